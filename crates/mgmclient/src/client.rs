//! Clients of the management protocol: `MgmClient` for tools, API nodes
//! and data nodes asking the arbitrator (config, show, reports, API node
//! ids, arbitration) and `DataNodeSession` for a data node's registration
//! connection and its status pushes.
//!
//! Every socket has connect, read and write timeouts so a dead or wedged
//! mgmd yields an error instead of a hang.

use std::io::{self, BufReader};
use std::net::{Ipv4Addr, SocketAddr, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use signal::signals::ApiToken;

use crate::wire::{self, LineRead};
use crate::MgmdError;

/// How long to try to reach mgmd.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long to wait for an answer; above mgmd's 2 s wait for fresh statuses
/// (`report_threads`, `report_checkpoints`).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Responses carry the config text, which may be large, but not unbounded.
const MAX_RESPONSE_BYTES: usize = 64 << 20;

/// One request/response connection to mgmd.
struct Conn {
    addr: String,
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Conn {
    fn connect(addr: &str) -> Result<Conn, MgmdError> {
        Conn::connect_from(addr, None)
    }

    /// Connects to `addr`, from address `local` when given (IPv4).
    fn connect_from(addr: &str, local: Option<Ipv4Addr>) -> Result<Conn, MgmdError> {
        let connect_error = |source| MgmdError::Connect {
            addr: addr.to_owned(),
            source,
        };
        let mut last_error = io::Error::new(io::ErrorKind::NotFound, "address resolves to nothing");
        let mut connected = None;
        for socket_addr in addr.to_socket_addrs().map_err(connect_error)? {
            let attempt = match (local, socket_addr) {
                (Some(local), SocketAddr::V4(remote)) => stdx::net::connect_from(
                    local,
                    remote,
                    stdx::net::Connect::Within(CONNECT_TIMEOUT),
                ),
                _ => TcpStream::connect_timeout(&socket_addr, CONNECT_TIMEOUT),
            };
            match attempt {
                Ok(stream) => {
                    connected = Some(stream);
                    break;
                }
                Err(e) => last_error = e,
            }
        }
        let stream = connected.ok_or_else(|| connect_error(last_error))?;
        let _ = stream.set_nodelay(true);
        stream
            .set_read_timeout(Some(REQUEST_TIMEOUT))
            .map_err(connect_error)?;
        stream
            .set_write_timeout(Some(REQUEST_TIMEOUT))
            .map_err(connect_error)?;
        let writer = stream.try_clone().map_err(connect_error)?;
        Ok(Conn {
            addr: addr.to_owned(),
            reader: BufReader::new(stream),
            writer,
        })
    }

    fn io_error(&self, source: io::Error) -> MgmdError {
        MgmdError::Io {
            context: format!("lost the connection to mgmd at {}", self.addr),
            source,
        }
    }

    /// Sends a request and returns the successful response object.
    fn request(&mut self, request: &Value) -> Result<Value, MgmdError> {
        wire::write_line(&mut self.writer, request).map_err(|e| self.io_error(e))?;
        let mut line = Vec::new();
        match wire::read_line(&mut self.reader, &mut line, MAX_RESPONSE_BYTES) {
            Ok(LineRead::Complete) => {}
            Ok(LineRead::Eof) => {
                return Err(self.io_error(io::Error::new(io::ErrorKind::UnexpectedEof, "closed")))
            }
            Ok(LineRead::TooLong) => {
                return Err(MgmdError::Protocol(format!(
                    "response longer than {MAX_RESPONSE_BYTES} bytes"
                )))
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(MgmdError::Io {
                    context: format!("no answer from mgmd at {}", self.addr),
                    source: e,
                })
            }
            Err(e) => return Err(self.io_error(e)),
        }
        let response: Value = serde_json::from_slice(&line)
            .map_err(|e| MgmdError::Protocol(format!("malformed JSON: {e}")))?;
        match response.get("ok").and_then(Value::as_bool) {
            Some(true) => Ok(response),
            Some(false) => Err(MgmdError::Refused(
                response
                    .get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("request failed (no error message)")
                    .to_owned(),
            )),
            None => Err(MgmdError::Protocol(format!(
                "response without \"ok\": {response}"
            ))),
        }
    }
}

/// Removes the `ok` field: what callers and `--json` output want.
fn without_ok(mut response: Value) -> Value {
    if let Value::Object(map) = &mut response {
        map.remove("ok");
    }
    response
}

fn string_field(response: &Value, field: &str) -> Result<String, MgmdError> {
    response
        .get(field)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| MgmdError::Protocol(format!("response lacks the string \"{field}\"")))
}

/// A management client connection (tools, API nodes).
pub struct MgmClient {
    conn: Conn,
}

impl MgmClient {
    /// Connects to mgmd at `addr` ("host:port").
    pub fn connect(addr: &str) -> Result<MgmClient, MgmdError> {
        Ok(MgmClient {
            conn: Conn::connect(addr)?,
        })
    }

    /// Connects to mgmd at `addr` from address `local` (a data node's own
    /// host, so that firewall rules see the connection as the node's).
    pub fn connect_from(addr: &str, local: Ipv4Addr) -> Result<MgmClient, MgmdError> {
        Ok(MgmClient {
            conn: Conn::connect_from(addr, Some(local))?,
        })
    }

    /// The cluster config file's text.
    pub fn get_config(&mut self) -> Result<String, MgmdError> {
        let response = self.conn.request(&json!({ "req": "get_config" }))?;
        string_field(&response, "config")
    }

    /// The `show` response without `ok`: `{"nodes": [...], "latest_gci": N}`.
    pub fn show(&mut self) -> Result<Value, MgmdError> {
        self.conn.request(&json!({ "req": "show" })).map(without_ok)
    }

    /// The `report_threads` response without `ok`: `{"nodes": [{"id", "threads"}]}`.
    pub fn report_threads(&mut self) -> Result<Value, MgmdError> {
        self.conn
            .request(&json!({ "req": "report_threads" }))
            .map(without_ok)
    }

    /// The `report_checkpoints` response without `ok`: `{"nodes": [{"id",
    /// "lcp_count", ..., "pacing"}]}` (each node's `checkpoints` object
    /// next to its id).
    pub fn report_checkpoints(&mut self) -> Result<Value, MgmdError> {
        self.conn
            .request(&json!({ "req": "report_checkpoints" }))
            .map(without_ok)
    }

    /// Arms fault point `point` (a name such as `TC_AFTER_FIRST_COMMIT`)
    /// on data node `node`: the node crashes when it next reaches it, or
    /// with `delay_ms` stalls there that long (for tests;
    /// docs/mgm-protocol.md `fault`).
    pub fn arm_fault(
        &mut self,
        node: u16,
        point: &str,
        delay_ms: Option<u64>,
    ) -> Result<Value, MgmdError> {
        let mut request = json!({ "req": "fault", "node_id": node, "point": point });
        if let Some(ms) = delay_ms {
            request["delay_ms"] = json!(ms);
        }
        self.conn.request(&request).map(without_ok)
    }

    /// Asks data node `node` to restart (its angel starts it again), from
    /// its files or, with `initial`, empty. Answers with its start count
    /// before the restart.
    pub fn restart_node(&mut self, node: u16, initial: bool) -> Result<Value, MgmdError> {
        let request = json!({ "req": "restart_node", "node_id": node, "initial": initial });
        self.conn.request(&request).map(without_ok)
    }

    /// Asks data node `node` to stop (gracefully) and stay stopped until
    /// [`MgmClient::start_node`]. Answers with its start count.
    pub fn stop_node(&mut self, node: u16) -> Result<Value, MgmdError> {
        let request = json!({ "req": "stop_node", "node_id": node });
        self.conn.request(&request).map(without_ok)
    }

    /// Asks the angel of data node `node`, which `stop_node` stopped, to
    /// start it again. Answers with its start count before the start.
    pub fn start_node(&mut self, node: u16) -> Result<Value, MgmdError> {
        let request = json!({ "req": "start_node", "node_id": node });
        self.conn.request(&request).map(without_ok)
    }

    /// For the angel of stopped data node `node`: whether to start it now.
    pub fn angel_wait(&mut self, node: u16) -> Result<bool, MgmdError> {
        let request = json!({ "req": "angel_wait", "node_id": node });
        let response = self.conn.request(&request)?;
        Ok(response.get("start").and_then(Value::as_bool) == Some(true))
    }

    /// Allocates an API node id (128..=255), held until this client closes,
    /// with the token a data node admits it by (send it in API_REGREQ).
    pub fn alloc_api_node(&mut self) -> Result<ApiAllocation, MgmdError> {
        let response = self.conn.request(&json!({ "req": "alloc_api_node" }))?;
        let node_id = response
            .get("node_id")
            .and_then(Value::as_u64)
            .and_then(|id| u16::try_from(id).ok())
            .ok_or_else(|| {
                MgmdError::Protocol("alloc_api_node response lacks \"node_id\"".into())
            })?;
        let allocation = response
            .get("allocation")
            .and_then(Value::as_u64)
            .ok_or_else(|| {
                MgmdError::Protocol("alloc_api_node response lacks \"allocation\"".into())
            })?;
        let mac = response
            .get("token")
            .and_then(Value::as_str)
            .and_then(mac_from_hex)
            .ok_or_else(|| {
                MgmdError::Protocol("alloc_api_node response lacks \"token\", 64 hex digits".into())
            })?;
        Ok(ApiAllocation {
            node_id,
            token: ApiToken { allocation, mac },
        })
    }

    /// Asks mgmd, the arbitrator, whether `side` may continue after a
    /// split of the agreed membership `membership_id` whose members were
    /// `before` (see docs/mgm-protocol.md `arbitrate`). `proof` is the
    /// arbitration proof of data node `node` under the cluster secret
    /// (`admission::ClusterSecret::arbitration_proof`). A refusal is an
    /// answer (`granted: false`), not an error; an error means the request
    /// was malformed or its proof wrong, or mgmd could not be asked.
    pub fn arbitrate(
        &mut self,
        node: u16,
        membership_id: u32,
        before: &[u16],
        side: &[u16],
        proof: &[u8; 32],
    ) -> Result<ArbitrationAnswer, MgmdError> {
        let response = self.conn.request(&json!({
            "req": "arbitrate",
            "node_id": node,
            "membership_id": membership_id,
            "before": before,
            "side": side,
            "proof": mac_to_hex(proof),
        }))?;
        let granted = response
            .get("granted")
            .and_then(Value::as_bool)
            .ok_or_else(|| {
                MgmdError::Protocol("arbitrate response lacks \"granted\", a boolean".into())
            })?;
        let reason = string_field(&response, "reason")?;
        Ok(ArbitrationAnswer { granted, reason })
    }
}

/// mgmd's answer to an arbitration request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArbitrationAnswer {
    /// Whether the side may continue; false: it must shut down.
    pub granted: bool,
    /// Why, in words (for the data node's log).
    pub reason: String,
}

/// An API node id from mgmd and the token that proves it was issued.
#[derive(Clone, Copy, Debug)]
pub struct ApiAllocation {
    /// 128..=255.
    pub node_id: u16,
    /// What a data node checks in API_REGREQ.
    pub token: ApiToken,
}

/// The MAC of a token as mgmd writes it: 64 lower- or upper-case hex digits.
pub fn mac_from_hex(text: &str) -> Option<[u8; 32]> {
    let digits = text.as_bytes();
    if digits.len() != 64 {
        return None;
    }
    let nibble = |digit: u8| (digit as char).to_digit(16).map(|value| value as u8);
    let mut mac = [0u8; 32];
    for (byte, pair) in mac.iter_mut().zip(digits.chunks_exact(2)) {
        *byte = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(mac)
}

/// The MAC of a token as mgmd writes it: 64 hex digits.
pub fn mac_to_hex(mac: &[u8; 32]) -> String {
    mac.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// A data node's registration with mgmd. The node counts as up for as long
/// as this connection is open; dropping the session ends it.
pub struct DataNodeSession {
    conn: Conn,
    node_id: u16,
    pid: u32,
    start_count: u64,
    config_dir: Option<PathBuf>,
    /// Another data node was started (serving) when this one registered.
    cluster_running: bool,
}

impl DataNodeSession {
    /// Connects, registers; returns the session and the config text.
    pub fn register(
        addr: &str,
        node_id: u16,
        pid: u32,
    ) -> Result<(DataNodeSession, String), MgmdError> {
        let mut conn = Conn::connect(addr)?;
        let registered =
            conn.request(&json!({ "req": "register_data_node", "node_id": node_id, "pid": pid }))?;
        let start_count = registered
            .get("start_count")
            .and_then(Value::as_u64)
            .filter(|&count| count > 0)
            .ok_or_else(|| {
                MgmdError::Protocol(
                    "register_data_node response lacks \"start_count\", a positive integer".into(),
                )
            })?;
        let cluster_running = registered
            .get("cluster_running")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let response = conn.request(&json!({ "req": "get_config" }))?;
        let config = string_field(&response, "config")?;
        let config_dir = response
            .get("config_dir")
            .and_then(Value::as_str)
            .map(PathBuf::from);
        Ok((
            DataNodeSession {
                conn,
                node_id,
                pid,
                start_count,
                config_dir,
                cluster_running,
            },
            config,
        ))
    }

    pub fn node_id(&self) -> u16 {
        self.node_id
    }

    /// How many times this node id has registered since mgmd started, this
    /// registration included (1 on the first start). It rises on every
    /// start of the node, so the data node uses it as its incarnation.
    pub fn start_count(&self) -> u64 {
        self.start_count
    }

    /// Whether another data node of the cluster was started (serving) when
    /// this one registered: the cluster runs, and this node would have to
    /// join it (node restart).
    pub fn cluster_running(&self) -> bool {
        self.cluster_running
    }

    /// The config file's directory on mgmd's host, if mgmd knows it: parse
    /// the text with `ClusterConfig::from_toml_str_relative_to` and this to
    /// resolve relative `data_dir`s as mgmd does.
    pub fn config_dir(&self) -> Option<&Path> {
        self.config_dir.as_deref()
    }

    /// Pushes one status now (mgmd answers none). For tools and tests; a
    /// data node runs [`DataNodeSession::spawn_status_pusher`].
    pub fn push_status(&mut self, status: &Value) -> Result<(), MgmdError> {
        let message = json!({ "req": "status", "status": status });
        wire::write_line(&mut self.conn.writer, &message).map_err(|source| MgmdError::Io {
            context: "pushing a status to mgmd".into(),
            source,
        })
    }

    /// Spawns a thread that pushes `status()` every `period` and at once on
    /// each refresh. When mgmd goes away the data node runs on without it,
    /// and the thread registers again every second, keeping the node's
    /// start count, until an mgmd (restarted, or reachable again) takes it.
    pub fn spawn_status_pusher(
        self,
        period: Duration,
        status: impl FnMut() -> Value + Send + 'static,
    ) -> JoinHandle<()> {
        self.spawn_status_pusher_with(period, status, |_| {})
    }

    /// [`DataNodeSession::spawn_status_pusher`], handing every other
    /// command mgmd sends (`{"cmd": "fault", ...}`) to `on_command`.
    pub fn spawn_status_pusher_with(
        self,
        period: Duration,
        status: impl FnMut() -> Value + Send + 'static,
        on_command: impl FnMut(&Value) + Send + 'static,
    ) -> JoinHandle<()> {
        let node_id = self.node_id;
        let run = move || self.push_statuses(period, status, on_command);
        match std::thread::Builder::new()
            .name(format!("mgmd-status-{node_id}"))
            .spawn(run)
        {
            Ok(handle) => handle,
            // No thread to be had: the node runs on without mgmd, which is
            // what it does when mgmd goes away too.
            Err(_) => std::thread::spawn(|| ()),
        }
    }

    fn push_statuses(
        mut self,
        period: Duration,
        mut status: impl FnMut() -> Value,
        mut on_command: impl FnMut(&Value),
    ) {
        // A zero read timeout is rejected by the OS API; keep a floor.
        let period = period.max(Duration::from_millis(1));
        let mut next_push = Instant::now();
        let mut line = Vec::new();
        loop {
            if Instant::now() >= next_push {
                let message = json!({ "req": "status", "status": status() });
                if wire::write_line(&mut self.conn.writer, &message).is_err() {
                    self.reattach();
                    continue;
                }
                next_push = Instant::now() + period;
            }
            let wait = next_push
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1));
            if self
                .conn
                .reader
                .get_ref()
                .set_read_timeout(Some(wait))
                .is_err()
            {
                self.reattach();
                continue;
            }
            match wire::read_line(&mut self.conn.reader, &mut line, wire::MAX_LINE_BYTES) {
                Ok(LineRead::Complete) => {
                    let message = serde_json::from_slice::<Value>(&line).ok();
                    match message
                        .as_ref()
                        .and_then(|v| v.get("cmd"))
                        .and_then(Value::as_str)
                    {
                        Some("refresh") => next_push = Instant::now(),
                        Some(_) => on_command(message.as_ref().expect("parsed")),
                        None => {}
                    }
                    // Anything else (an error response to a bad status) is
                    // not actionable here and is ignored.
                    line.clear();
                }
                // Timeout: time for a periodic push; a partial line stays
                // in `line` and is completed by the next read.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(LineRead::Eof) | Ok(LineRead::TooLong) | Err(_) => {
                    self.reattach();
                    line.clear();
                    next_push = Instant::now();
                }
            }
        }
    }

    /// After the session broke: registers again every second, with the
    /// start count the node runs with (`register_data_node` with
    /// `start_count`: no new start is counted), until mgmd takes it.
    fn reattach(&mut self) {
        const EVERY: Duration = Duration::from_secs(1);
        loop {
            std::thread::sleep(EVERY);
            let Ok(mut conn) = Conn::connect(&self.conn.addr) else {
                continue;
            };
            let request = json!({
                "req": "register_data_node",
                "node_id": self.node_id,
                "pid": self.pid,
                "start_count": self.start_count,
            });
            if conn.request(&request).is_ok() {
                self.conn = conn;
                return;
            }
        }
    }
}
