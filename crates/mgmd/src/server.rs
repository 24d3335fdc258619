//! The management server (NDB's ndb_mgmd): serves the cluster config, hands
//! out API node ids, tracks which data nodes are up (a node is up while its
//! registration connection is open) and their latest self-reported status,
//! and answers `show`, `report_threads` and `report_checkpoints`. One
//! thread per connection: the number of connections is the number of nodes
//! and tools, which is small, and capped (`MAX_CONNECTIONS`) so that no
//! peer can make it large.
//!
//! The server must survive anything a peer sends: every malformed line gets
//! an error response and the connection stays usable; a line over
//! `MAX_LINE_BYTES` closes it, and so does silence before the first line
//! (`FIRST_LINE_TIMEOUT`). Every per-connection resource is bounded: one
//! thread, one line buffer, at most one API node id.
//!
//! **Admission** (docs/design/0007-groundwork.md, "Authenticated
//! admission"): mgmd holds the cluster secret, read from the file the
//! config names, and answers each API node id it hands out with a token
//! made with it, which data nodes check. The secret itself is never sent:
//! `get_config` serves the config text, which names only the file.
//!
//! **Arbitration** (docs/design/failures.md §4): when the data nodes split
//! into two sides of exactly half, each side's president asks mgmd, the
//! arbitrator, whether its side may continue (`arbitrate`). mgmd grants one
//! side per split, the first to ask, and remembers it: the decision rests
//! on its table of grants alone, never on timing or on which data node
//! sessions are open.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use admission::{ArbitrationStatement, ClusterSecret};
use config::ClusterConfig;
use serde_json::{json, Map, Value};
use signal::{NodeId, NodeSet, NODE_SET_MAX};

use crate::persist::{GrantRecord, Remembered, StateFile};
use mgmclient::wire::{self, LineRead, MAX_LINE_BYTES};
use mgmclient::MgmdError;

/// How long `report_threads` and `report_checkpoints` wait for data nodes
/// to push a fresh status.
const REPORT_WAIT: Duration = Duration::from_secs(2);
/// A peer that stops reading must not block a server thread for long.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// API node ids, as in NDB: data nodes and mgmd use 1..=127.
const API_IDS: std::ops::RangeInclusive<u16> = 128..=255;
/// Connections served at once: every data node and API node id (255) and
/// room for tools; one more is closed at accept.
pub const MAX_CONNECTIONS: usize = 512;
/// A connection must send its first line within this (it holds a thread).
const FIRST_LINE_TIMEOUT: Duration = Duration::from_secs(10);
/// Arbitration grants kept (see [`Grants`]).
const MAX_GRANTS: usize = 1024;
/// A data node session silent this long ends: the node died or was cut
/// off (it pushes a status every 250 ms).
const DATA_NODE_SILENCE: Duration = Duration::from_secs(10);
/// After mgmd starts again, the data nodes that ran on register again
/// (every second until it answers): a node starting meanwhile is told
/// whether the cluster runs only after this, or it would be told it does
/// not and try to start a cluster that runs without it (and mgmd would
/// take its registration for a new run and forget its grants).
pub const REATTACH_GRACE: Duration = Duration::from_secs(3);

/// Options for `start_server_with`.
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    /// Listen here instead of the config's `mgmd.host:port` (tests use
    /// "127.0.0.1:0" to get a free port).
    pub bind_addr: Option<String>,
    /// Directory of the config file, sent with `get_config` so that nodes
    /// resolve relative `data_dir`s as `ClusterConfig::from_file` does.
    pub config_dir: Option<PathBuf>,
    /// Connections served at once (default [`MAX_CONNECTIONS`]).
    pub max_connections: Option<usize>,
    /// How long a connection may stay silent before its first line
    /// (default 10 s).
    pub first_line_timeout: Option<Duration>,
    /// The cluster secret, for a server built in-process by a test (the
    /// config's `secret_file` then need not exist); without it, mgmd reads
    /// the file the config names and does not start if it names none.
    pub secret: Option<ClusterSecret>,
    /// Where mgmd remembers the data nodes' start counts and its
    /// arbitration grants across its own restarts (`persist`); `None`:
    /// in memory only (a server built in-process by a test).
    pub state_dir: Option<PathBuf>,
    /// How long a data node session may stay silent before it ends
    /// (default 10 s; a node pushes its status every 250 ms).
    pub data_node_silence: Option<Duration>,
    /// After mgmd starts on a state file of an earlier run, how long a new
    /// data node's registration waits for the running nodes to register
    /// again (default [`REATTACH_GRACE`]).
    pub reattach_grace: Option<Duration>,
}

/// A running server. Dropping it (or `shutdown`) stops it.
pub struct MgmdHandle {
    local_addr: SocketAddr,
    shared: Arc<Shared>,
    accept_thread: Option<JoinHandle<()>>,
}

impl MgmdHandle {
    /// The address the server listens on (with the real port if 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Blocks until the server stops (which it does only on `shutdown` from
    /// another handle user, so in practice: forever).
    pub fn wait(mut self) {
        if let Some(thread) = self.accept_thread.take() {
            // A panic in the accept loop has already been reported by the
            // panic hook; there is nothing more to do with it here.
            let _ = thread.join();
        }
    }

    /// Stops accepting, closes every connection and waits for the accept
    /// thread. Sessions of data nodes end, as if mgmd had died.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(thread) = self.accept_thread.take() else {
            return;
        };
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wake the blocking accept() with a connection of our own.
        let mut wake = self.local_addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(if wake.is_ipv4() {
                std::net::Ipv4Addr::LOCALHOST.into()
            } else {
                std::net::Ipv6Addr::LOCALHOST.into()
            });
        }
        let _ = TcpStream::connect_timeout(&wake, WRITE_TIMEOUT);
        let _ = thread.join();
        let state = self.shared.lock();
        for stream in state.connections.values() {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for MgmdHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Parses the config file, listens on `mgmd.host:port` and serves forever.
/// Returns only on failure to start (config errors, bind errors).
pub fn run_server(config_path: &Path) -> Result<(), MgmdError> {
    let text = std::fs::read_to_string(config_path).map_err(|source| MgmdError::Io {
        context: format!("cannot read the config file {}", config_path.display()),
        source,
    })?;
    let parent = match config_path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // Nodes may run in another working directory: give them an absolute one.
    let config_dir = std::fs::canonicalize(&parent).unwrap_or(parent);
    let config = ClusterConfig::from_toml_str_relative_to(
        &text,
        &config_path.display().to_string(),
        &config_dir,
    )?;
    let state_dir = config
        .mgmd
        .data_dir
        .clone()
        .unwrap_or_else(|| config_dir.clone());
    let options = ServerOptions {
        config_dir: Some(config_dir),
        state_dir: Some(state_dir),
        ..ServerOptions::default()
    };
    let handle = start_server_with(config, text, options)?;
    eprintln!("tessera mgmd: listening on {}", handle.local_addr());
    handle.wait();
    Ok(())
}

/// Binds the config's `mgmd.host:port` and serves on background threads.
pub fn start_server(config: ClusterConfig, config_text: String) -> Result<MgmdHandle, MgmdError> {
    start_server_with(config, config_text, ServerOptions::default())
}

/// `start_server` with a bind address override and the config directory.
pub fn start_server_with(
    config: ClusterConfig,
    config_text: String,
    options: ServerOptions,
) -> Result<MgmdHandle, MgmdError> {
    let secret = match options.secret.clone() {
        Some(secret) => secret,
        None => load_secret(&config)?,
    };
    let addr = options
        .bind_addr
        .clone()
        .unwrap_or_else(|| wire::host_port(&config.mgmd.host, config.mgmd.port));
    let bind_error = |source| MgmdError::Bind {
        addr: addr.clone(),
        source,
    };
    let addrs: Vec<SocketAddr> = addr.to_socket_addrs().map_err(bind_error)?.collect();
    let listener = TcpListener::bind(&addrs[..]).map_err(bind_error)?;
    let local_addr = listener.local_addr().map_err(bind_error)?;

    let state_file = options
        .state_dir
        .as_deref()
        .map(|dir| StateFile::in_dir(dir, config.mgmd.node_id))
        .transpose()
        .map_err(MgmdError::State)?;
    let remembered = match &state_file {
        Some(file) => {
            let remembered = file.load().map_err(MgmdError::State)?;
            eprintln!(
                "mgmd: remembering data node start counts and arbitration grants in {}",
                file.path().display()
            );
            remembered
        }
        None => Remembered::default(),
    };
    let mut grants = Grants::default();
    for grant in &remembered.grants {
        let set = |ids: &[u16]| NodeSet::of(ids.iter().map(|&id| NodeId(id)));
        grants.granted.push_back(Grant {
            membership_id: grant.membership_id,
            before: set(&grant.before),
            side: set(&grant.side),
        });
    }
    let data_nodes = config
        .data_nodes
        .iter()
        .map(|n| DataNodeState {
            id: n.id,
            group: n.node_group,
            host: n.host.clone(),
            session: None,
            start_count: remembered.start_counts.get(&n.id).copied().unwrap_or(0),
            status: None,
            status_seq: 0,
            ended: None,
            stop_requested: false,
            start_requested: false,
            angel_waited_at: None,
        })
        .collect();
    let shared = Arc::new(Shared {
        config,
        config_text,
        secret,
        config_dir: options.config_dir,
        max_connections: options.max_connections.unwrap_or(MAX_CONNECTIONS),
        first_line_timeout: options.first_line_timeout.unwrap_or(FIRST_LINE_TIMEOUT),
        data_node_silence: options.data_node_silence.unwrap_or(DATA_NODE_SILENCE),
        started_at: Instant::now(),
        reattach_grace: options.reattach_grace.unwrap_or(REATTACH_GRACE),
        state: Mutex::new(State {
            data_nodes,
            api_nodes: BTreeMap::new(),
            next_api_id: *API_IDS.start(),
            next_allocation: first_allocation(),
            connections: HashMap::new(),
            next_connection: 0,
        }),
        status_changed: Condvar::new(),
        grants: Mutex::new(grants),
        state_file,
        remembered: Mutex::new(remembered),
        stopping: AtomicBool::new(false),
    });
    let accept_shared = Arc::clone(&shared);
    let accept_thread = std::thread::Builder::new()
        .name("mgmd-accept".into())
        .spawn(move || accept_loop(listener, accept_shared))
        .map_err(|source| MgmdError::Io {
            context: "cannot start the mgmd accept thread".into(),
            source,
        })?;
    Ok(MgmdHandle {
        local_addr,
        shared,
        accept_thread: Some(accept_thread),
    })
}

type ConnId = u64;
/// The write half of a connection; responses and `refresh` commands are
/// written under this lock so lines never interleave.
type Writer = Arc<Mutex<TcpStream>>;

struct Shared {
    config: ClusterConfig,
    config_text: String,
    /// Makes the API tokens; never sent anywhere.
    secret: ClusterSecret,
    config_dir: Option<PathBuf>,
    max_connections: usize,
    first_line_timeout: Duration,
    data_node_silence: Duration,
    /// When this mgmd started, and how long after it a new data node
    /// waits for running ones to register again.
    started_at: Instant,
    reattach_grace: Duration,
    state: Mutex<State>,
    /// Signalled whenever a data node pushes a status or its session ends.
    status_changed: Condvar,
    /// The arbitrator's grants; every decision is made under this lock.
    grants: Mutex<Grants>,
    /// Where start counts and grants are remembered across restarts.
    state_file: Option<StateFile>,
    /// What the file holds. Always the innermost lock: taken under
    /// `state` or `grants`, never the other way.
    remembered: Mutex<Remembered>,
    stopping: AtomicBool,
}

impl Shared {
    /// Records `change` to what mgmd remembers, durably when it has a
    /// state file; the error says why it could not.
    fn remember(&self, change: impl FnOnce(&mut Remembered)) -> Result<(), String> {
        let mut remembered = self
            .remembered
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        change(&mut remembered);
        match &self.state_file {
            Some(file) => file.save(&remembered),
            None => Ok(()),
        }
    }
}

impl Grants {
    /// The grants as the state file records them.
    fn records(&self) -> Vec<GrantRecord> {
        let ids = |set: NodeSet| set.iter().map(|node| node.0).collect();
        self.granted
            .iter()
            .map(|grant| GrantRecord {
                membership_id: grant.membership_id,
                before: ids(grant.before),
                side: ids(grant.side),
            })
            .collect()
    }
}

impl Shared {
    /// Locks the state, ignoring poisoning: every update leaves it
    /// consistent, and one panicking connection must not stop the others.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

struct State {
    /// In config order, which is the order `show` lists them in.
    data_nodes: Vec<DataNodeState>,
    /// API node id -> the connection holding it, with the peer's IP.
    api_nodes: BTreeMap<u16, (ConnId, String)>,
    /// Where the round-robin search for a free API node id starts.
    next_api_id: u16,
    /// The number of the next API node id allocation (in its token).
    next_allocation: u64,
    /// Clones of every open connection, to close them on shutdown.
    connections: HashMap<ConnId, TcpStream>,
    next_connection: ConnId,
}

impl State {
    fn data_node(&mut self, id: u16) -> Option<&mut DataNodeState> {
        self.data_nodes.iter_mut().find(|n| n.id == id)
    }

    /// Data node `id`'s node group, and whether another node of it is
    /// started (`None`: no such data node).
    fn group_of(&self, id: u16) -> Option<(u32, bool)> {
        let group = self.data_nodes.iter().find(|node| node.id == id)?.group;
        let others_started = self
            .data_nodes
            .iter()
            .filter(|other| other.group == group && other.id != id)
            .any(|other| node_state(other) == "started");
        Some((group, others_started))
    }
}

/// Passes `command` down data node `id`'s session; on success logs
/// `done` and answers with `answer`.
fn send_to_node(writer: &Writer, id: u16, command: &Value, done: &str, answer: Value) -> Value {
    let mut stream = writer.lock().unwrap_or_else(PoisonError::into_inner);
    match wire::write_line(&mut *stream, command).and_then(|()| stream.flush()) {
        Ok(()) => {
            eprintln!("mgmd: {done}");
            answer
        }
        Err(source) => error(format!("cannot reach data node {id}: {source}")),
    }
}

struct DataNodeState {
    id: u16,
    group: u32,
    host: String,
    session: Option<Session>,
    /// Registrations since mgmd started.
    start_count: u64,
    /// The latest status pushed on the current session.
    status: Option<Value>,
    /// Bumped on every status push, so waiters can tell "newer".
    status_seq: u64,
    /// How the last session ended, while there is none: `show` tells a
    /// node that failed or shut down from one never started.
    ended: Option<Ended>,
    /// `stop_node` asked the current session's node to stop: its end is
    /// a stop, not a failure.
    stop_requested: bool,
    /// `start_node` asked for the stopped node: its angel's next
    /// `angel_wait` says start.
    start_requested: bool,
    /// When the stopped node's angel last asked whether to start it.
    angel_waited_at: Option<std::time::Instant>,
}

/// How a data node's session ended.
#[derive(Clone)]
enum Ended {
    /// The node said why it shut down (declared failed, or on a side that
    /// may not continue) before it went.
    ShutDown(String),
    /// The session broke without a reason: the node died or was cut off.
    Failed,
    /// Stopped on purpose by `stop_node`.
    Stopped,
}

struct Session {
    connection: ConnId,
    pid: Option<u32>,
    writer: Writer,
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        match stream {
            Ok(stream) => start_connection(&shared, stream),
            // Out of file descriptors or a connection reset before accept:
            // nothing to do for that peer; pause so EMFILE does not spin.
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn start_connection(shared: &Arc<Shared>, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    if stream.set_write_timeout(Some(WRITE_TIMEOUT)).is_err() {
        return;
    }
    let (Ok(for_shutdown), Ok(writer)) = (stream.try_clone(), stream.try_clone()) else {
        return;
    };
    let peer = stream
        .peer_addr()
        .map(|a| a.ip().to_string())
        .unwrap_or_default();
    let id = {
        let mut state = shared.lock();
        if state.connections.len() >= shared.max_connections {
            drop(state);
            eprintln!(
                "mgmd: refused a connection from {peer}: {} connections already open",
                shared.max_connections
            );
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
        let id = state.next_connection;
        state.next_connection += 1;
        state.connections.insert(id, for_shutdown);
        id
    };
    let conn = Connection {
        id,
        peer,
        writer: Arc::new(Mutex::new(writer)),
        data_node: None,
    };
    let thread_shared = Arc::clone(shared);
    let spawned = std::thread::Builder::new()
        .name(format!("mgmd-conn-{id}"))
        .spawn(move || serve_connection(&thread_shared, stream, conn));
    if spawned.is_err() {
        // Could not get a thread: drop the connection rather than the server.
        shared.lock().connections.remove(&id);
    }
}

/// Per-connection state kept by its thread.
struct Connection {
    id: ConnId,
    peer: String,
    writer: Writer,
    /// Set once `register_data_node` succeeded on this connection.
    data_node: Option<u16>,
}

impl Connection {
    fn send(&self, value: &Value) -> std::io::Result<()> {
        let mut stream = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        wire::write_line(&mut *stream, value)
    }
}

fn serve_connection(shared: &Shared, stream: TcpStream, mut conn: Connection) {
    // Silence before the first line closes the connection; after it, a
    // client may stay idle (an API node holds its id for its lifetime).
    let first_line_deadline = stream.set_read_timeout(Some(shared.first_line_timeout));
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    let mut first = first_line_deadline.is_ok();
    loop {
        line.clear();
        match wire::read_line(&mut reader, &mut line, MAX_LINE_BYTES) {
            Ok(LineRead::Complete) => {
                if first {
                    first = false;
                    if reader.get_ref().set_read_timeout(None).is_err() {
                        break;
                    }
                }
                let was_data_node = conn.data_node.is_some();
                if let Some(response) = handle_line(shared, &mut conn, &line) {
                    if conn.send(&response).is_err() {
                        break;
                    }
                }
                // A data node pushes its status every 250 ms: silence
                // this long means it died or was cut off, and its
                // session must end (so that the node, restarted or
                // back, can register again).
                if !was_data_node
                    && conn.data_node.is_some()
                    && reader
                        .get_ref()
                        .set_read_timeout(Some(shared.data_node_silence))
                        .is_err()
                {
                    break;
                }
            }
            Ok(LineRead::TooLong) => {
                let _ = conn.send(&error(format!(
                    "request line longer than {MAX_LINE_BYTES} bytes; closing the connection"
                )));
                break;
            }
            Ok(LineRead::Eof) | Err(_) => break,
        }
    }
    end_connection(shared, &conn);
    let _ = conn
        .writer
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .shutdown(Shutdown::Both);
}

/// Releases everything the connection held: its data node session (the
/// node is now "not connected") and its API node ids.
fn end_connection(shared: &Shared, conn: &Connection) {
    let mut state = shared.lock();
    state.connections.remove(&conn.id);
    state.api_nodes.retain(|_, (owner, _)| *owner != conn.id);
    if let Some(id) = conn.data_node {
        if let Some(node) = state.data_node(id) {
            if node
                .session
                .as_ref()
                .is_some_and(|s| s.connection == conn.id)
            {
                let reason = node
                    .status
                    .as_ref()
                    .and_then(|status| status.get("shutdown_reason"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                node.ended = Some(if node.stop_requested {
                    Ended::Stopped
                } else {
                    reason.map_or(Ended::Failed, Ended::ShutDown)
                });
                node.stop_requested = false;
                node.session = None;
                node.status = None;
            }
        }
    }
    drop(state);
    shared.status_changed.notify_all();
}

fn error(message: impl Into<String>) -> Value {
    json!({ "ok": false, "error": message.into() })
}

/// Handles one request line; `None` means no response (a status push).
fn handle_line(shared: &Shared, conn: &mut Connection, line: &[u8]) -> Option<Value> {
    let request = match parse_request(line) {
        Ok(r) => r,
        Err(message) => return Some(error(message)),
    };
    let kind = request
        .get("req")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let response = match kind {
        "get_config" => get_config(shared),
        "register_data_node" => register_data_node(shared, conn, &request),
        "status" => match status(shared, conn, &request) {
            Ok(()) => return None,
            Err(message) => error(message),
        },
        "alloc_api_node" => alloc_api_node(shared, conn),
        "show" => show(shared),
        "report_threads" => report_threads(shared),
        "report_checkpoints" => report_checkpoints(shared),
        "fault" => fault(shared, &request),
        "restart_node" => restart_node(shared, &request),
        "stop_node" => stop_node(shared, &request),
        "start_node" => start_node(shared, &request),
        "angel_wait" => angel_wait(shared, &request),
        "arbitrate" => arbitrate(shared, &request),
        other => error(format!(
            "unknown request \"{other}\"; known requests: get_config, register_data_node, \
             status, alloc_api_node, show, report_threads, report_checkpoints, arbitrate, fault, \
             restart_node, stop_node, start_node, angel_wait"
        )),
    };
    Some(response)
}

/// A request must be a JSON object with a string `req`.
fn parse_request(line: &[u8]) -> Result<Map<String, Value>, String> {
    let text = std::str::from_utf8(line).map_err(|_| "request is not valid UTF-8".to_owned())?;
    let text = text.trim();
    if text.is_empty() {
        return Err("empty request; send one JSON object per line".to_owned());
    }
    let value: Value = serde_json::from_str(text).map_err(|e| format!("malformed JSON: {e}"))?;
    match value {
        Value::Object(map) if map.get("req").is_some_and(Value::is_string) => Ok(map),
        _ => Err("a request must be a JSON object with a string \"req\" field".to_owned()),
    }
}

fn get_config(shared: &Shared) -> Value {
    let mut response = json!({ "ok": true, "config": shared.config_text });
    if let Some(dir) = &shared.config_dir {
        response["config_dir"] = json!(dir.display().to_string());
    }
    response
}

fn register_data_node(
    shared: &Shared,
    conn: &mut Connection,
    request: &Map<String, Value>,
) -> Value {
    let Some(id) = request.get("node_id").and_then(Value::as_u64) else {
        return error("register_data_node needs \"node_id\", a positive integer");
    };
    let pid = match request.get("pid") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64().and_then(|p| u32::try_from(p).ok()) {
            Some(pid) => Some(pid),
            None => return error("\"pid\" must be a process id (a positive integer)"),
        },
    };
    // A running node registering again after its session broke (mgmd
    // restarted, or the link to it was lost) gives the start count it
    // runs with: it keeps it, no new start is counted.
    let reattach = match request.get("start_count") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64().filter(|&count| count > 0) {
            Some(count) => Some(count),
            None => return error("\"start_count\" must be a positive integer"),
        },
    };
    if let Some(current) = conn.data_node {
        return error(format!(
            "this connection is already registered as data node {current}"
        ));
    }
    if reattach.is_none() {
        wait_for_running_nodes_to_register_again(shared, id);
    }
    let mut state = shared.lock();
    let known: Vec<String> = state.data_nodes.iter().map(|n| n.id.to_string()).collect();
    let node = match u16::try_from(id).ok().and_then(|id| state.data_node(id)) {
        Some(node) => node,
        None => {
            return error(format!(
                "node id {id} is not a data node in the config (data nodes: {})",
                known.join(", ")
            ))
        }
    };
    if let Some(session) = &node.session {
        // The same process coming back on a new connection (it saw the
        // old one break before mgmd did): the old one is over.
        let same_process = reattach.is_some() && pid.is_some() && session.pid == pid;
        if !same_process {
            let pid = session
                .pid
                .map_or_else(|| "unknown".to_owned(), |p| p.to_string());
            return error(format!(
                "node id {id} is already in use by a running data node (pid {pid})"
            ));
        }
        let _ = session
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .shutdown(Shutdown::Both);
    }
    if let Some(count) = reattach {
        return reattach_data_node(shared, conn, &mut state, id as u16, pid, count);
    }
    // The first data node of a new run of the cluster (every session was
    // closed: a whole-cluster stop or crash). Membership ids start again
    // at 1 in a new run, so the last run's grants must not answer for it.
    let new_run = !state
        .data_nodes
        .iter()
        .any(|other| other.id != id as u16 && other.session.is_some());
    let node = state
        .data_node(id as u16)
        .expect("found above, under the same lock");
    node.session = Some(Session {
        connection: conn.id,
        pid,
        writer: Arc::clone(&conn.writer),
    });
    node.start_count += 1;
    let start_count = node.start_count;
    if let Err(why) = shared.remember(|remembered| {
        remembered.start_counts.insert(id as u16, start_count);
    }) {
        return error(format!(
            "mgmd cannot record data node {id}'s start (its incarnation): {why}"
        ));
    }
    let node = state
        .data_node(id as u16)
        .expect("found above, under the same lock");
    node.status = None;
    node.ended = None;
    node.stop_requested = false;
    node.start_requested = false;
    node.angel_waited_at = None;
    conn.data_node = Some(node.id);
    let (node_id, start_count) = (node.id, node.start_count);
    // Another data node serves: the cluster runs without this one.
    let cluster_running = state.data_nodes.iter().any(|other| {
        other.id != node_id
            && other.session.is_some()
            && other
                .status
                .as_ref()
                .and_then(|status| status.get("state"))
                .and_then(Value::as_str)
                == Some("started")
    });
    let answer = json!({
        "ok": true,
        "node_id": node_id,
        "start_count": start_count,
        "cluster_running": cluster_running,
    });
    if new_run {
        let cleared = {
            let mut grants = shared.grants.lock().unwrap_or_else(PoisonError::into_inner);
            let cleared = std::mem::take(&mut grants.granted).len();
            if let Err(why) = shared.remember(|remembered| remembered.grants.clear()) {
                eprintln!("mgmd: cannot record that the last run's grants are forgotten: {why}");
            }
            cleared
        };
        if cleared > 0 {
            eprintln!(
                "mgmd: arbitration: data node {id} starts a new run of the cluster (no other \
                 data node is up): the {cleared} grants of the last run are forgotten"
            );
        }
    }
    answer
}

/// A new data node registration soon after mgmd started on an earlier
/// run's state: waits out the rest of the reattach grace, so that the data
/// nodes still running have registered again before this one is told
/// whether the cluster runs.
fn wait_for_running_nodes_to_register_again(shared: &Shared, id: u64) {
    let earlier_run = !shared
        .remembered
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .start_counts
        .is_empty();
    let left = shared
        .reattach_grace
        .saturating_sub(shared.started_at.elapsed());
    if earlier_run && !left.is_zero() {
        eprintln!(
            "mgmd: data node {id} registers {} ms after mgmd started: waiting {} ms for the \
             data nodes still running to register again",
            shared.started_at.elapsed().as_millis(),
            left.as_millis()
        );
        std::thread::sleep(left);
    }
}

/// `register_data_node` with `start_count`: a running data node's new
/// session (it lost the last one: mgmd restarted, or the link broke).
/// It keeps its start count (mgmd takes it if higher than its own:
/// counts only rise), it is not a new run of the cluster, and its next
/// status push says where it is.
fn reattach_data_node(
    shared: &Shared,
    conn: &mut Connection,
    state: &mut State,
    id: u16,
    pid: Option<u32>,
    count: u64,
) -> Value {
    let node = state.data_node(id).expect("the caller found it");
    if count > node.start_count {
        node.start_count = count;
        if let Err(why) = shared.remember(|remembered| {
            remembered.start_counts.insert(id, count);
        }) {
            return error(format!(
                "mgmd cannot record data node {id}'s start count: {why}"
            ));
        }
    }
    let node = state.data_node(id).expect("the caller found it");
    node.session = Some(Session {
        connection: conn.id,
        pid,
        writer: Arc::clone(&conn.writer),
    });
    node.status = None;
    node.ended = None;
    node.stop_requested = false;
    node.start_requested = false;
    node.angel_waited_at = None;
    conn.data_node = Some(id);
    eprintln!("mgmd: data node {id} (start count {count}) is back on a new session");
    let cluster_running = state
        .data_nodes
        .iter()
        .any(|other| other.id != id && other.session.is_some() && node_state(other) == "started");
    json!({
        "ok": true,
        "node_id": id,
        "start_count": count,
        "cluster_running": cluster_running,
    })
}

fn status(shared: &Shared, conn: &Connection, request: &Map<String, Value>) -> Result<(), String> {
    let Some(id) = conn.data_node else {
        return Err(
            "status is only accepted on a data node session (register_data_node first)".into(),
        );
    };
    let Some(status @ Value::Object(_)) = request.get("status") else {
        return Err("status needs \"status\", a JSON object".into());
    };
    let mut state = shared.lock();
    if let Some(node) = state.data_node(id) {
        node.status = Some(status.clone());
        node.status_seq += 1;
    }
    drop(state);
    shared.status_changed.notify_all();
    Ok(())
}

fn alloc_api_node(shared: &Shared, conn: &Connection) -> Value {
    let mut state = shared.lock();
    // One id per connection: the id lives as long as the connection that
    // holds it, so one connection must not take the whole range.
    if let Some((&held, _)) = state
        .api_nodes
        .iter()
        .find(|(_, (owner, _))| *owner == conn.id)
    {
        return error(format!(
            "this connection already holds API node id {held}: open another connection \
             for another API node"
        ));
    }
    // Hand ids out round-robin rather than lowest-free: a data node may
    // still be finishing the failure handling of an id's previous owner
    // (late replies in flight), so an id just released is the worst choice.
    let start = state.next_api_id;
    let span = API_IDS.end() - API_IDS.start() + 1;
    let Some(id) = (0..span)
        .map(|step| API_IDS.start() + (start - API_IDS.start() + step) % span)
        .find(|id| !state.api_nodes.contains_key(id))
    else {
        return error("no free API node id: 128-255 are all in use");
    };
    state.next_api_id = if id == *API_IDS.end() {
        *API_IDS.start()
    } else {
        id + 1
    };
    state.api_nodes.insert(id, (conn.id, conn.peer.clone()));
    let allocation = state.next_allocation;
    state.next_allocation += 1;
    drop(state);
    let token = shared.secret.api_token(signal::NodeId(id), allocation);
    json!({
        "ok": true,
        "node_id": id,
        "allocation": allocation,
        "token": mgmclient::client::mac_to_hex(&token.mac),
    })
}

/// The grants the arbitrator made, oldest first: for each split judged,
/// the agreed membership it split (its id and its members) and the side
/// granted. Two sides of one split judge against the same membership, so
/// they find the same entry, and only one of them is granted.
///
/// Only the most recent [`MAX_GRANTS`] are kept (the oldest is dropped
/// first), so a peer holding the secret cannot grow mgmd's memory without
/// bound. A grant dropped this way could let the other side of that split
/// be granted, but only after 1024 later splits were decided, long after
/// both sides of it acted on their answers.
#[derive(Default)]
struct Grants {
    granted: VecDeque<Grant>,
}

struct Grant {
    membership_id: u32,
    before: NodeSet,
    side: NodeSet,
}

/// What the arbitrator decided for one request.
enum Decision {
    /// No grant for this split yet: this side is granted and recorded.
    First,
    /// This side is within the side already granted (a retry, or the same
    /// side asking again after it lost another node).
    Again { granted: NodeSet },
    /// Another side was granted.
    Refused { granted: NodeSet },
}

impl Grants {
    fn decide(&mut self, membership_id: u32, before: NodeSet, side: NodeSet) -> Decision {
        let existing = self
            .granted
            .iter()
            .find(|grant| grant.membership_id == membership_id && grant.before == before);
        match existing {
            Some(grant) if side.is_subset(grant.side) => Decision::Again {
                granted: grant.side,
            },
            Some(grant) => Decision::Refused {
                granted: grant.side,
            },
            None => {
                if self.granted.len() >= MAX_GRANTS {
                    self.granted.pop_front();
                }
                self.granted.push_back(Grant {
                    membership_id,
                    before,
                    side,
                });
                Decision::First
            }
        }
    }
}

/// A set of data node ids from a JSON array of integers in 1..=127
/// (repeats count once); `None` if it is anything else.
fn node_set(value: Option<&Value>) -> Option<NodeSet> {
    let mut set = NodeSet::EMPTY;
    for id in value?.as_array()? {
        let id = id.as_u64()?;
        if !(1..=u64::from(NODE_SET_MAX)).contains(&id) {
            return None;
        }
        set.insert(NodeId(id as u16));
    }
    Some(set)
}

/// `arbitrate`: whether `side` may continue after a split of exactly half
/// of membership `membership_id` (docs/mgm-protocol.md). Any connection may
/// ask: the proof, made with the cluster secret, is the authentication.
fn arbitrate(shared: &Shared, request: &Map<String, Value>) -> Value {
    let node = match request.get("node_id").and_then(Value::as_u64) {
        Some(id @ 1..=127) => NodeId(id as u16),
        _ => {
            return error(format!(
                "arbitrate needs \"node_id\", the asking data node's id (1..={NODE_SET_MAX})"
            ))
        }
    };
    let membership_id = match request.get("membership_id").and_then(Value::as_u64) {
        Some(id) if id >= 1 => match u32::try_from(id) {
            Ok(id) => id,
            Err(_) => return error(format!("\"membership_id\" {id} is over {}", u32::MAX)),
        },
        _ => {
            return error(format!(
                "arbitrate needs \"membership_id\", the id of the agreed membership that split \
                 (1..={})",
                u32::MAX
            ))
        }
    };
    let Some(before) = node_set(request.get("before")) else {
        return error(format!(
            "arbitrate needs \"before\", the members of that membership: an array of data node \
             ids (1..={NODE_SET_MAX})"
        ));
    };
    let side = match node_set(request.get("side")) {
        Some(side) if !side.is_empty() => side,
        _ => {
            return error(format!(
                "arbitrate needs \"side\", the side asking to continue: a non-empty array of \
                 data node ids (1..={NODE_SET_MAX})"
            ))
        }
    };
    if !side.is_subset(before) {
        return error(format!(
            "side {side} is not a subset of the membership {before} it split from \
             (nodes {} are not members)",
            side.difference(before)
        ));
    }
    if !side.contains(node) {
        return error(format!(
            "node {node} asks for side {side}, which it is not on"
        ));
    }
    let Some(proof) = request
        .get("proof")
        .and_then(Value::as_str)
        .and_then(mgmclient::client::mac_from_hex)
    else {
        return error("arbitrate needs \"proof\", 64 hex digits");
    };
    let statement = ArbitrationStatement {
        node,
        membership_id,
        before,
        side,
    };
    if !shared.secret.verify_arbitration_proof(&statement, &proof) {
        return error(format!(
            "the proof of node {node} does not verify: it was not made with this cluster's \
             secret, or not for this node, membership id, membership and side"
        ));
    }

    let what = format!("membership {membership_id} {before}");
    if shared.config.mgmd.arbitration_rank == 0 {
        eprintln!(
            "mgmd: arbitration: {what}: refused side {side} (asked by node {node}): \
             arbitration_rank = 0"
        );
        return json!({
            "ok": true,
            "granted": false,
            "reason": "mgmd is not the arbitrator: arbitration_rank = 0 in its config",
        });
    }
    let decision = {
        let mut grants = shared.grants.lock().unwrap_or_else(PoisonError::into_inner);
        let decision = grants.decide(membership_id, before, side);
        // A first grant is on disk before it is answered: an mgmd
        // restarted between two halves' requests must refuse the second.
        let records = grants.records();
        match decision {
            Decision::First => match shared.remember(|remembered| remembered.grants = records) {
                Ok(()) => decision,
                Err(why) => {
                    eprintln!(
                        "mgmd: arbitration: {membership_id}: refused side {side}: the grant \
                         cannot be recorded: {why}"
                    );
                    return json!({
                        "ok": true,
                        "granted": false,
                        "reason": format!("mgmd cannot record the grant: {why}"),
                    });
                }
            },
            _ => decision,
        }
    };
    let (granted, reason, log) = match decision {
        Decision::First => (
            true,
            format!("side {side} is the first side of {what} to ask: granted"),
            format!("granted side {side} (asked by node {node})"),
        ),
        Decision::Again { granted } => (
            true,
            format!("side {granted} was granted for {what}; side {side} is within it: granted"),
            format!("granted side {side} again (asked by node {node}): within side {granted}"),
        ),
        Decision::Refused { granted } => (
            false,
            format!("side {granted} was granted for {what}; side {side} may not continue"),
            format!("refused side {side} (asked by node {node}): side {granted} was granted"),
        ),
    };
    eprintln!("mgmd: arbitration: {what}: {log}");
    json!({ "ok": true, "granted": granted, "reason": reason })
}

/// The cluster secret from the file the config names: mgmd cannot issue
/// tokens without it, so a config that names none is refused here.
fn load_secret(config: &ClusterConfig) -> Result<ClusterSecret, MgmdError> {
    let Some(path) = &config.cluster.secret_file else {
        return Err(MgmdError::Secret(
            "the config names no cluster secret: add `secret_file = \"cluster.secret\"` to \
             [cluster] and create the file with `tessera secret FILE` (mgmd and every data node \
             read it; API nodes never see it)"
                .to_owned(),
        ));
    };
    ClusterSecret::load(path).map_err(|error| MgmdError::Secret(error.to_string()))
}

/// The first allocation number of this mgmd: the wall clock in
/// microseconds, so numbers keep rising across mgmd restarts (data nodes
/// refuse a token of an older allocation of an id than one they have
/// admitted) unless the clock goes back; then one per allocation.
fn first_allocation() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |since| {
            u64::try_from(since.as_micros()).unwrap_or(u64::MAX >> 1)
        })
        .max(1)
}

/// The state a connected data node reports, "starting" until it says.
fn node_state(node: &DataNodeState) -> &str {
    if node.session.is_none() {
        return match node.ended {
            None => "not_connected",
            Some(Ended::Failed) => "failed",
            Some(Ended::ShutDown(_)) => "shut_down",
            Some(Ended::Stopped) => "stopped",
        };
    }
    node.status
        .as_ref()
        .and_then(|s| s.get("state"))
        .and_then(Value::as_str)
        .unwrap_or("starting")
}

fn show(shared: &Shared) -> Value {
    let state = shared.lock();
    let mut nodes = Vec::new();
    // The cluster's figures are the highest any node reports: each node
    // hears of a GCI a little after the master.
    let mut latest_gci = 0u64;
    let mut latest_complete_gci = 0u64;
    let mut restored_gci = 0u64;
    for node in &state.data_nodes {
        let status_u64 = |key: &str| {
            node.status
                .as_ref()
                .and_then(|s| s.get(key))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        latest_gci = latest_gci.max(status_u64("latest_gci"));
        latest_complete_gci = latest_complete_gci.max(status_u64("latest_complete_gci"));
        restored_gci = restored_gci.max(status_u64("restored_gci"));
        nodes.push(json!({
            "id": node.id,
            "type": "data",
            "host": node.host,
            "group": node.group,
            "state": node_state(node),
            "pid": node.session.as_ref().and_then(|s| s.pid),
            "start_count": node.start_count,
            "shutdown_reason": match &node.ended {
                Some(Ended::ShutDown(reason)) => Some(reason.as_str()),
                _ => None,
            },
            "membership_id": node.status.as_ref().and_then(|s| s.get("membership_id")).cloned(),
            // A node restart's phase and copy (null otherwise).
            "start_phase": node.status.as_ref().and_then(|s| s.get("start_phase")).cloned(),
            "copy_progress": node.status.as_ref().and_then(|s| s.get("copy_progress")).cloned(),
        }));
    }
    let mgmd = &shared.config.mgmd;
    nodes.push(json!({
        "id": mgmd.node_id,
        "type": "mgmd",
        "host": mgmd.host,
        "state": "started",
        "pid": std::process::id(),
    }));
    for (id, (_, host)) in &state.api_nodes {
        nodes.push(json!({ "id": id, "type": "api", "host": host, "state": "connected" }));
    }
    json!({
        "ok": true,
        "nodes": nodes,
        "latest_gci": latest_gci,
        "latest_complete_gci": latest_complete_gci,
        "restored_gci": restored_gci,
    })
}

/// Asks every connected data node for a fresh status (`{"cmd":
/// "refresh"}`) and waits up to `REPORT_WAIT` for each to push one newer
/// than it had. Returns each node still connected on the session it was
/// asked on, in config order, with its latest status (`None` if it never
/// pushed one); a node that did not answer in time keeps its previous one.
fn refreshed_statuses(shared: &Shared) -> Vec<(u16, Option<Value>)> {
    // Who to ask, and the status each had before asking.
    let targets: Vec<(u16, ConnId, u64, Writer)> = shared
        .lock()
        .data_nodes
        .iter()
        .filter_map(|n| {
            let s = n.session.as_ref()?;
            Some((n.id, s.connection, n.status_seq, Arc::clone(&s.writer)))
        })
        .collect();
    let refresh = json!({ "cmd": "refresh" });
    for (_, _, _, writer) in &targets {
        let mut stream = writer.lock().unwrap_or_else(PoisonError::into_inner);
        // A node that cannot be written to is going away; its session
        // ends on its own thread and the wait below stops counting it.
        let _ = wire::write_line(&mut *stream, &refresh).and_then(|()| stream.flush());
    }

    let deadline = Instant::now() + REPORT_WAIT;
    let mut state = shared.lock();
    loop {
        let waiting = targets.iter().any(|(id, connection, seq, _)| {
            state.data_nodes.iter().any(|n| {
                n.id == *id
                    && n.session
                        .as_ref()
                        .is_some_and(|s| s.connection == *connection)
                    && n.status_seq == *seq
            })
        });
        let now = Instant::now();
        if !waiting || now >= deadline {
            break;
        }
        state = shared
            .status_changed
            .wait_timeout(state, deadline - now)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }

    targets
        .iter()
        .filter_map(|(id, connection, _, _)| {
            let node = state.data_nodes.iter().find(|n| n.id == *id)?;
            // Skip nodes that went away while we waited.
            node.session
                .as_ref()
                .filter(|s| s.connection == *connection)?;
            Some((*id, node.status.clone()))
        })
        .collect()
}

/// Each connected node's `threads`, from a fresh status.
fn report_threads(shared: &Shared) -> Value {
    let nodes: Vec<Value> = refreshed_statuses(shared)
        .into_iter()
        .map(|(id, status)| {
            let threads = status
                .as_ref()
                .and_then(|s| s.get("threads"))
                .cloned()
                .unwrap_or_else(|| json!([]));
            json!({ "id": id, "threads": threads })
        })
        .collect();
    json!({ "ok": true, "nodes": nodes })
}

/// Each connected node's `checkpoints` object, from a fresh status, with
/// its fields next to the node's `id` (only the id if it has none).
/// `restart_node`: a data node stops and its angel starts it again, so it
/// rejoins by a node restart (docs/design/0018-node-restart.md), from its
/// files or with `"initial": true` empty. Refused unless the node is
/// started under an angel and another node of its node group is started
/// (the group would otherwise have no data while it restarts). Answers
/// with the node's start count before the restart, which a waiting
/// client watches rise.
fn restart_node(shared: &Shared, request: &Map<String, Value>) -> Value {
    let id = match requested_node(request, "restart_node") {
        Ok(id) => id,
        Err(refusal) => return refusal,
    };
    let initial = request.get("initial").and_then(Value::as_bool) == Some(true);
    let (writer, start_count) = {
        let mut state = shared.lock();
        let Some((group, others_started)) = state.group_of(id) else {
            return error(format!("node id {id} is not a data node in the config"));
        };
        let node = state.data_node(id).expect("checked above");
        let Some(session) = &node.session else {
            return error(format!("data node {id} is not connected"));
        };
        if node_state(node) != "started" {
            return error(format!(
                "data node {id} is not started ({}): restart it once it is",
                node_state(node)
            ));
        }
        let angel = node.status.as_ref().and_then(|s| s.get("angel")) == Some(&json!(true));
        if !angel {
            return error(format!(
                "data node {id} runs without an angel (--no-angel): nothing would start it \
                 again; stop it and start it yourself"
            ));
        }
        if !others_started {
            return error(format!(
                "data node {id} is the only started node of node group {group}: restarting it \
                 would leave the group's data unserved"
            ));
        }
        (Arc::clone(&session.writer), node.start_count)
    };
    let command = json!({ "cmd": "restart", "initial": initial });
    let flag = if initial { " --initial" } else { "" };
    let done = format!("data node {id} asked to restart{flag}");
    let answer = json!({ "ok": true, "start_count": start_count });
    send_to_node(&writer, id, &command, &done, answer)
}

/// The data node id a request names in `node_id`.
fn requested_node(request: &Map<String, Value>, what: &str) -> Result<u16, Value> {
    request
        .get("node_id")
        .and_then(Value::as_u64)
        .and_then(|id| u16::try_from(id).ok())
        .ok_or_else(|| error(format!("{what} needs \"node_id\", a data node's id")))
}

/// How long after its angel last asked a stopped node counts as having
/// an angel waiting (the angel asks every second).
const ANGEL_WAIT_FRESH: Duration = Duration::from_secs(5);

/// `stop_node`: a data node stops on purpose (a graceful stop: its
/// transactions finish first) and stays stopped, shown `stopped`, until
/// `start_node` (its angel waits for that) or until started by hand.
/// Refused for a node not connected, and for the only started node of
/// its node group (the group's data would go unserved).
fn stop_node(shared: &Shared, request: &Map<String, Value>) -> Value {
    let id = match requested_node(request, "stop_node") {
        Ok(id) => id,
        Err(refusal) => return refusal,
    };
    let (writer, start_count) = {
        let mut state = shared.lock();
        let Some((group, others_started)) = state.group_of(id) else {
            return error(format!("node id {id} is not a data node in the config"));
        };
        let node = state.data_node(id).expect("checked above");
        let Some(session) = &node.session else {
            return error(format!(
                "data node {id} is not connected ({})",
                node_state(node)
            ));
        };
        if node_state(node) == "started" && !others_started {
            return error(format!(
                "data node {id} is the only started node of node group {group}: stopping it \
                 would leave the group's data unserved"
            ));
        }
        let writer = Arc::clone(&session.writer);
        node.stop_requested = true;
        (writer, node.start_count)
    };
    let command = json!({ "cmd": "stop" });
    let done = format!("data node {id} asked to stop");
    let answer = json!({ "ok": true, "start_count": start_count });
    send_to_node(&writer, id, &command, &done, answer)
}

/// `start_node`: starts a node `stop_node` stopped, through its angel,
/// which waits for this (`angel_wait`). Refused unless the node is
/// stopped and its angel has asked lately. Answers with the start count
/// before the start, which a waiting client watches rise.
fn start_node(shared: &Shared, request: &Map<String, Value>) -> Value {
    let id = match requested_node(request, "start_node") {
        Ok(id) => id,
        Err(refusal) => return refusal,
    };
    let mut state = shared.lock();
    let Some(node) = state.data_node(id) else {
        return error(format!("node id {id} is not a data node in the config"));
    };
    let node_state = node_state(node).to_owned();
    if node_state != "stopped" {
        return error(format!(
            "data node {id} is {node_state}, not stopped: only a node stopped by `node {id} \
             stop` is started this way"
        ));
    }
    let angel_waits = node
        .angel_waited_at
        .is_some_and(|at| at.elapsed() < ANGEL_WAIT_FRESH);
    if !angel_waits {
        return error(format!(
            "no angel waits to start data node {id} (it ran with --no-angel, or its angel \
             exited): start it with `tessera node --node-id {id}`"
        ));
    }
    node.start_requested = true;
    eprintln!("mgmd: data node {id} asked to start");
    json!({ "ok": true, "start_count": node.start_count })
}

/// `angel_wait`: the angel of a stopped node asks, every second, whether
/// to start it (docs/mgm-protocol.md). Answers `start` once `start_node`
/// asked, and only once.
fn angel_wait(shared: &Shared, request: &Map<String, Value>) -> Value {
    let id = match requested_node(request, "angel_wait") {
        Ok(id) => id,
        Err(refusal) => return refusal,
    };
    let mut state = shared.lock();
    let Some(node) = state.data_node(id) else {
        return error(format!("node id {id} is not a data node in the config"));
    };
    node.angel_waited_at = Some(std::time::Instant::now());
    let start = std::mem::take(&mut node.start_requested);
    json!({ "ok": true, "start": start })
}

/// `fault`: arms a fault point on a data node (tests): the command goes
/// down the node's session, which checks the point's name itself.
fn fault(shared: &Shared, request: &Map<String, Value>) -> Value {
    let id = match requested_node(request, "fault") {
        Ok(id) => id,
        Err(refusal) => return refusal,
    };
    let Some(name) = request.get("point").and_then(Value::as_str) else {
        return error("fault needs \"point\", the fault point's name");
    };
    let Some(point) = signal::faults::FaultPoint::parse(name) else {
        return error(signal::faults::unknown(name));
    };
    let point = point.name();
    let delay_ms = match request.get("delay_ms") {
        None => None,
        Some(value) => match value.as_u64().filter(|ms| (1..=600_000).contains(ms)) {
            Some(ms) => Some(ms),
            None => {
                return error(format!(
                    "fault \"delay_ms\" must be a whole number of milliseconds, 1 to 600000, \
                     not {value}"
                ))
            }
        },
    };
    let writer = {
        let mut state = shared.lock();
        let Some(node) = state.data_node(id) else {
            return error(format!("node id {id} is not a data node in the config"));
        };
        let Some(session) = &node.session else {
            return error(format!("data node {id} is not connected"));
        };
        Arc::clone(&session.writer)
    };
    let mut command = json!({ "cmd": "fault", "point": point });
    if let Some(ms) = delay_ms {
        command["delay_ms"] = json!(ms);
    }
    let action = delay_ms.map_or("crash".to_string(), |ms| format!("delay {ms} ms"));
    let done = format!("fault point {point} armed on data node {id} ({action})");
    send_to_node(&writer, id, &command, &done, json!({ "ok": true }))
}

fn report_checkpoints(shared: &Shared) -> Value {
    let nodes: Vec<Value> = refreshed_statuses(shared)
        .into_iter()
        .map(|(id, status)| {
            let mut node = Map::new();
            node.insert("id".into(), json!(id));
            if let Some(Value::Object(checkpoints)) =
                status.as_ref().and_then(|s| s.get("checkpoints"))
            {
                for (key, value) in checkpoints {
                    // A field called "id" in a status must not hide the node's.
                    if key != "id" {
                        node.insert(key.clone(), value.clone());
                    }
                }
            }
            Value::Object(node)
        })
        .collect();
    json!({ "ok": true, "nodes": nodes })
}
