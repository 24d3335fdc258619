//! Starting and stopping a data node: register with mgmd (which gives the
//! node's incarnation: its start count), take the config, build the blocks,
//! place them on threads by role (one OS thread per ldm and tc instance, one
//! main thread for dih, dict and membership, one recv and one send thread,
//! one io thread owning the data directory; with `tc_on_ldm`, tc instance i
//! runs on ldm thread i instead),
//! connect the threads with job queues, listen for API nodes and the data
//! nodes with lower ids, dial those with higher ids, and run until SIGTERM
//! or SIGINT.

use crate::arbiter::Arbiter;
use crate::io::{FileService, IoThreadSetup};
use crate::status::{CheckpointReports, NodeStatus, ThreadInfo};
use crate::wiring::{build_blocks_for, default_partitions_of_ldm};
use admission::ClusterSecret;
use config::ClusterConfig;
use kernel::block_thread::{self, BlockThreadSetup};
use kernel::mesh::{self, Router};
use kernel::stats::{ThreadRole, ThreadStats};
use kernel::Block;
use signal::signals::{NodeStopReq, StartPhaseReq};
use signal::{BlockKind, BlockRef, Envelope, NodeId, SectionPool};
use std::net::{TcpListener, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use transport::recv::DataNodePeer;
use transport::{ConnectionRegistry, RecvSetup, SendSetup};

/// How `tessera node` was started.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// mgmd address, HOST:PORT.
    pub mgmd: String,
    /// This node's id (a data node in the config).
    pub node_id: u16,
    /// Start from nothing: delete the node's files in its data directory
    /// first (NDB's `--initial`). Without it the node restarts from them.
    pub initial: bool,
    /// The file holding the cluster secret, when not the config's
    /// `secret_file` (a node on another host than mgmd's keeps its copy
    /// elsewhere).
    pub secret_file: Option<PathBuf>,
}

/// A restart mgmd asked for (`node N restart`): 0 none, else the exit
/// code that tells the angel to start the node again
/// ([`RESTART_EXIT_CODE`], [`RESTART_INITIAL_EXIT_CODE`]).
static RESTART_REQUESTED: AtomicU32 = AtomicU32::new(0);

/// How long a stop waits for the transactions the node's tcs run to
/// finish (a graceful stop, docs/design/0018-node-restart.md): a few lock
/// wait timeouts, so only a client that holds a transaction open outlasts it.
const STOP_LIMIT: Duration = Duration::from_secs(5);

/// The exit code of a node stopped to be started again by its angel.
pub const RESTART_EXIT_CODE: i32 = 4;
/// The exit code of a node that could not reach mgmd to register (no
/// connection, or one that broke): a network fault, not a refusal. An
/// angel restarting its node tries again; a first start reports it.
pub const MGMD_UNREACHABLE_EXIT_CODE: i32 = 8;

/// Why a data node stopped before it served, or could not run.
#[derive(Debug)]
pub struct StartFailure {
    /// For the operator.
    pub message: String,
    /// mgmd could not be reached (the node may start once it can).
    pub mgmd_unreachable: bool,
}

impl From<String> for StartFailure {
    fn from(message: String) -> StartFailure {
        StartFailure {
            message,
            mgmd_unreachable: false,
        }
    }
}
/// The same, its files deleted first (`node N restart --initial`).
pub const RESTART_INITIAL_EXIT_CODE: i32 = 5;
/// The exit code of a node whose own files could not be restored at its
/// start (a storage fault before it served): its angel does not start it
/// again, and the log says to use `--initial`.
pub const DAMAGED_FILES_EXIT_CODE: i32 = 7;
/// The exit code of a node stopped by mgmd (`node N stop`) under an angel:
/// the angel waits for `node N start` instead of starting it again.
pub const STOPPED_EXIT_CODE: i32 = 6;

/// Whether the node's angel started it (so a restart has someone to start
/// it again).
fn under_angel() -> bool {
    std::env::var_os("TESSERA_ANGEL_CHILD").is_some()
}

/// How long a node waits for mgmd to notice that the previous process of
/// its id is gone (a node restarted right after a crash or a kill): mgmd
/// sees the old connection close within moments.
const PREVIOUS_SESSION_WAIT: Duration = Duration::from_secs(5);

/// Registers with mgmd. mgmd learns that a killed node's session ended
/// only when it sees the connection close, which may come a moment after
/// the node restarts; until then it refuses the id as in use, so that
/// refusal is retried for a while (other errors are final).
fn register_with_mgmd(
    options: &NodeOptions,
    pid: u32,
) -> Result<(mgmd::client::DataNodeSession, String), StartFailure> {
    let deadline = std::time::Instant::now() + PREVIOUS_SESSION_WAIT;
    let mut logged = false;
    loop {
        match mgmd::client::DataNodeSession::register(&options.mgmd, options.node_id, pid) {
            Ok(registered) => return Ok(registered),
            Err(error)
                if error.to_string().contains("already in use")
                    && std::time::Instant::now() < deadline =>
            {
                if !logged {
                    eprintln!(
                        "tessera node {}: mgmd says the id is in use ({error}); waiting for it \
                         to notice the previous process is gone",
                        options.node_id
                    );
                    logged = true;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(error) => {
                let mgmd_unreachable = matches!(
                    error,
                    mgmd::MgmdError::Connect { .. } | mgmd::MgmdError::Io { .. }
                );
                return Err(StartFailure {
                    message: format!(
                        "cannot register node {} with mgmd at {}: {error}",
                        options.node_id, options.mgmd
                    ),
                    mgmd_unreachable,
                });
            }
        }
    }
}

/// Makes a panic on any thread of the data node end the process, as
/// `Context::fatal` does: a block, receive, send or io thread that died
/// alone would leave the node holding its sockets and reporting `started`
/// while its peers and clients wait on it forever. The default hook prints
/// the panic (and a backtrace when asked) first.
fn fail_fast_on_panic(node_id: u16) {
    let print_panic = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        print_panic(info);
        let thread = std::thread::current();
        eprintln!(
            "tessera node {node_id}: fatal: thread {} panicked; stopping the node (fail fast)",
            thread.name().unwrap_or("unnamed")
        );
        std::process::exit(FATAL_EXIT_CODE);
    }));
}

/// The exit code of a data node that stopped itself on a broken invariant
/// or a storage fault (`Context::fatal`) or a panic.
pub const FATAL_EXIT_CODE: i32 = 1;

/// Runs a data node until SIGTERM/SIGINT. Errors are for the operator.
pub fn run(options: NodeOptions) -> Result<(), StartFailure> {
    fail_fast_on_panic(options.node_id);
    let pid = std::process::id();
    let (session, config_text) = register_with_mgmd(&options, pid)?;
    let config = match session.config_dir() {
        Some(dir) => {
            ClusterConfig::from_toml_str_relative_to(&config_text, "config from mgmd", dir)
        }
        None => ClusterConfig::from_toml_str(&config_text, "config from mgmd"),
    }
    .map_err(|error| format!("config from mgmd is invalid: {error}"))?;
    let node = NodeId(options.node_id);
    // The cluster runs without this node (it failed or was stopped while
    // the others went on): it rejoins by a node restart
    // (docs/design/0018-node-restart.md) instead of forming a cluster.
    let joining = session.cluster_running() && cluster_still_running(&options.mgmd, node);
    let secret = load_secret(node, &options, &config)?;
    if config.threads.recv != 1 || config.threads.send != 1 {
        eprintln!(
            "tessera node {node}: [threads] asks for recv = {} and send = {}; this version \
             runs one receive and one send thread, and the rest of [threads] as configured",
            config.threads.recv, config.threads.send
        );
    }
    let node_config = config
        .data_node(options.node_id)
        .ok_or_else(|| format!("node {} is not a data node in the config", options.node_id))?
        .clone();
    let listener =
        TcpListener::bind((node_config.host.as_str(), node_config.port)).map_err(|error| {
            format!(
                "node {node}: cannot listen on {}:{}: {error}",
                node_config.host, node_config.port
            )
        })?;
    // The start count rises on every registration, so it orders this
    // node's starts: peers refuse connections from an older one.
    let incarnation = u32::try_from(session.start_count()).map_err(|_| {
        format!(
            "node {node}: start count {} from mgmd does not fit an incarnation",
            session.start_count()
        )
    })?;
    kernel::faults::arm_from_environment().map_err(|error| format!("node {node}: {error}"))?;
    stdx::stop::on_signals();
    if options.initial {
        crate::io::wipe_node_files(&node_config.data_dir)
            .map_err(|error| format!("node {node}: --initial: {error}"))?;
        eprintln!(
            "tessera node {node}: --initial: deleted the node's files in {}",
            node_config.data_dir.display()
        );
    }
    if joining {
        eprintln!(
            "tessera node {node}: the cluster runs without this node: rejoining it by a node \
             restart ({})",
            if options.initial {
                "--initial: copying every row from the live replicas"
            } else {
                "restoring this node's own files, then copying what changed since"
            }
        );
    }
    let node_runtime = start(&config, node, listener, pid, incarnation, secret, joining)?;
    let status = node_runtime.status.clone();
    let tc_placement = if config.threads.tc_on_ldm {
        format!("{} tc instances on the ldm threads", config.threads.tc)
    } else {
        format!("{} tc threads", config.threads.tc)
    };
    let network_placement = if config.threads.network_on_ldm {
        "receive and send on ldm thread 0"
    } else {
        "receive and send threads"
    };
    eprintln!(
        "tessera node {node}: pid {pid}, incarnation {incarnation}, listening on {}:{}, {} ldm threads, {tc_placement}, {network_placement}",
        node_config.host, node_config.port, config.threads.ldm
    );
    let _pusher = session.spawn_status_pusher_with(
        Duration::from_millis(250),
        move || status.to_json(),
        move |command| command_from_mgmd(node, command),
    );
    while !stdx::stop::requested() {
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("tessera node {node}: stopping");
    node_runtime.stop_gracefully(STOP_LIMIT);
    let restart = RESTART_REQUESTED.load(Ordering::SeqCst);
    if restart == STOPPED_EXIT_CODE as u32 {
        eprintln!("tessera node {node}: stopped; its angel waits for `node {node} start`");
        std::process::exit(STOPPED_EXIT_CODE);
    }
    if restart != 0 {
        eprintln!("tessera node {node}: stopped to be started again by its angel");
        std::process::exit(restart as i32);
    }
    Ok(())
}

/// Whether, a moment after mgmd said at registration that another data
/// node serves, mgmd still shows one started. A whole cluster killed and
/// started again at once can register before mgmd has noticed the old
/// sessions close; their last status said `started`.
fn cluster_still_running(mgmd: &str, node: NodeId) -> bool {
    // mgmd sees a closed session within milliseconds; a second is ample.
    std::thread::sleep(Duration::from_secs(1));
    let show = mgmd::client::MgmClient::connect(mgmd).and_then(|mut client| client.show());
    match show {
        Ok(show) => show["nodes"].as_array().is_some_and(|nodes| {
            nodes.iter().any(|other| {
                other["type"] == "data" && other["id"] != node.0 && other["state"] == "started"
            })
        }),
        // Cannot tell: refuse, as registration said.
        Err(_) => true,
    }
}

/// A command from mgmd on the node's session: `{"cmd": "restart",
/// "initial": BOOL}` stops the node for its angel to start it again (a
/// node restart); a fault point (`arm_fault`); anything else is logged.
fn command_from_mgmd(node: NodeId, command: &serde_json::Value) {
    if command.get("cmd").and_then(serde_json::Value::as_str) == Some("stop") {
        eprintln!("tessera node {node}: mgmd asks it to stop");
        if under_angel() {
            RESTART_REQUESTED.store(STOPPED_EXIT_CODE as u32, Ordering::SeqCst);
        }
        stdx::stop::request();
        return;
    }
    if command.get("cmd").and_then(serde_json::Value::as_str) != Some("restart") {
        return arm_fault(node, command);
    }
    if !under_angel() {
        eprintln!("tessera node {node}: asked to restart, but no angel would start it again");
        return;
    }
    let initial = command.get("initial").and_then(serde_json::Value::as_bool) == Some(true);
    let code = if initial {
        RESTART_INITIAL_EXIT_CODE
    } else {
        RESTART_EXIT_CODE
    };
    eprintln!(
        "tessera node {node}: mgmd asks for a restart{}",
        if initial { " with --initial" } else { "" }
    );
    RESTART_REQUESTED.store(code as u32, Ordering::SeqCst);
    stdx::stop::request();
}

/// A fault command from mgmd: `{"cmd": "fault", "point": NAME}` arms that
/// fault point to crash the node, `{..., "delay_ms": MS}` to stall it
/// there (kernel::faults); anything else is logged.
fn arm_fault(node: NodeId, command: &serde_json::Value) {
    let name = command.get("point").and_then(serde_json::Value::as_str);
    let delay = command.get("delay_ms").map(serde_json::Value::as_u64);
    let action = match delay {
        None => Some(kernel::faults::FaultAction::Crash),
        Some(Some(ms)) if ms > 0 => Some(kernel::faults::FaultAction::Delay { ms }),
        Some(_) => None,
    };
    match (
        command.get("cmd").and_then(serde_json::Value::as_str),
        name,
        action,
    ) {
        (Some("fault"), Some(name), Some(action)) => {
            match kernel::faults::FaultPoint::parse(name) {
                Some(point) => {
                    kernel::faults::arm_with(point, action);
                    eprintln!(
                        "tessera node {node}: fault point {} armed ({action})",
                        point.name()
                    );
                }
                None => eprintln!("tessera node {node}: {}", kernel::faults::unknown(name)),
            }
        }
        _ => eprintln!("tessera node {node}: ignored a command from mgmd: {command}"),
    }
}

/// The cluster secret, from `--secret-file` or else the config's
/// `secret_file` (docs/design/0007-groundwork.md, "Authenticated
/// admission"): a node without one could neither prove itself to its peers
/// nor check an API node's token, so it does not start.
fn load_secret(
    node: NodeId,
    options: &NodeOptions,
    config: &ClusterConfig,
) -> Result<ClusterSecret, String> {
    let path = options
        .secret_file
        .as_ref()
        .or(config.cluster.secret_file.as_ref())
        .ok_or_else(|| {
            format!(
                "node {node}: the config names no cluster secret ([cluster] secret_file) and \
                 --secret-file was not given"
            )
        })?;
    ClusterSecret::load(path).map_err(|error| format!("node {node}: {error}"))
}

/// A thread to be: its name, role and the blocks it runs.
type Placement = (String, ThreadRole, Vec<Box<dyn Block>>);

/// A running node's threads.
pub struct NodeRuntime {
    /// Published state.
    pub status: Arc<NodeStatus>,
    shutdown: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// Into the io thread, which passes it on to its block: how a stop
    /// request reaches membership.
    to_io: std::sync::mpsc::Sender<Envelope>,
    io_waker: Arc<kernel::waker::Waker>,
    node: NodeId,
}

impl NodeRuntime {
    /// A graceful stop (docs/design/0018-node-restart.md): asks
    /// membership to let the tcs finish their transactions, waits until
    /// it says they did or `limit` passed (a second more, should the node
    /// not answer at all), then stops every thread.
    pub fn stop_gracefully(self, limit: Duration) {
        let membership = BlockRef::new(self.node, BlockKind::Membership, 0);
        let request = Envelope {
            from: BlockRef::new(self.node, BlockKind::Io, 0),
            to: membership,
            signal: NodeStopReq {
                limit_ms: u64::try_from(limit.as_millis()).unwrap_or(u64::MAX),
            }
            .into(),
        };
        // The io thread runs until `stop`; a send fails only if it died.
        if self.to_io.send(request).is_ok() {
            self.io_waker.wake();
            let deadline = Instant::now() + limit + Duration::from_secs(1);
            while !self.status.ready_to_stop.load(Ordering::SeqCst) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if self.status.ready_to_stop.load(Ordering::SeqCst) {
                // The tcs go on refusing new transactions for a moment: a
                // request already on its way gets NodeShuttingDown (the
                // client retries elsewhere) instead of meeting a closed
                // link with its outcome unknown (design 0018, item 12).
                std::thread::sleep(STOP_LINGER);
            }
        }
        self.stop();
    }

    /// Stops every thread and waits for them.
    pub fn stop(self) {
        self.shutdown.store(true, Ordering::SeqCst);
        for info in &self.status.threads {
            info.waker.wake();
        }
        for thread in self.threads {
            let _ = thread.join();
        }
    }
}

/// How long a gracefully stopping node goes on refusing transactions
/// after its own have finished, before it closes its links: several
/// client round trips on a loaded host.
const STOP_LINGER: Duration = Duration::from_millis(300);

/// Every data node of the config with its address (the first `host:port`
/// resolves to).
fn data_node_peers(config: &ClusterConfig) -> Result<Vec<DataNodePeer>, String> {
    config
        .data_nodes
        .iter()
        .map(|data_node| {
            let (host, port) = (data_node.host.as_str(), data_node.port);
            let address = (host, port)
                .to_socket_addrs()
                .map_err(|error| {
                    format!(
                        "data node {}: cannot resolve {host}:{port}: {error}",
                        data_node.id
                    )
                })?
                .next()
                .ok_or_else(|| {
                    format!(
                        "data node {}: {host}:{port} resolves to no address",
                        data_node.id
                    )
                })?;
            Ok(DataNodePeer {
                node: NodeId(data_node.id),
                address,
            })
        })
        .collect()
}

/// Starts the threads of data node `node`, in its start `incarnation`,
/// serving on `listener` and admitting connections with `secret`;
/// `joining`: the cluster runs, and the node rejoins it by a node restart.
pub fn start(
    config: &ClusterConfig,
    node: NodeId,
    listener: TcpListener,
    pid: u32,
    incarnation: u32,
    secret: ClusterSecret,
    joining: bool,
) -> Result<NodeRuntime, String> {
    let data_nodes = data_node_peers(config)?;
    let arbitration_secret = secret.clone();
    let ldm_count = config.threads.ldm as usize;
    let tc_count = config.threads.tc as usize;
    let node_group = config
        .data_node(node.0)
        .map_or(0, |data_node| data_node.node_group);
    let data_dir = config
        .data_node(node.0)
        .map(|data_node| data_node.data_dir.clone())
        .ok_or_else(|| format!("node {node} is not a data node in the config"))?;
    // `tc_on_ldm`: tc instance i runs on ldm thread i (config checks
    // tc <= ldm), so there are no tc threads.
    let tc_on_ldm = config.threads.tc_on_ldm;
    assert!(
        !tc_on_ldm || tc_count <= ldm_count,
        "config lets tc_on_ldm through only with tc <= ldm"
    );
    let tc_thread_count = if tc_on_ldm { 0 } else { tc_count };
    // Thread indices: ldm threads, tc threads (unless on the ldm threads),
    // main, recv, send, io.
    let main_thread = ldm_count + tc_thread_count;
    let recv_thread = main_thread + 1;
    let send_thread = main_thread + 2;
    let io_thread = main_thread + 3;
    let thread_count = io_thread + 1;
    let router = Router {
        own_node: node,
        tc_threads: if tc_on_ldm {
            (0..tc_count).collect()
        } else {
            (ldm_count..ldm_count + tc_count).collect()
        },
        ldm_threads: (0..ldm_count).collect(),
        main_thread,
        send_thread,
        io_thread: Some(io_thread),
    };
    let mut ports: Vec<_> = mesh::build(thread_count, router)
        .into_iter()
        .map(Some)
        .collect();
    let pool = SectionPool::leak_for_operations(config.cluster.max_concurrent_operations);
    let blocks = build_blocks_for(config, node, joining)?;
    let shutdown = Arc::new(AtomicBool::new(false));
    let epoch = Instant::now();

    let mut placements: Vec<Placement> = Vec::new();
    for (instance, ldm) in blocks.ldms.into_iter().enumerate() {
        placements.push((
            format!("ldm{instance}"),
            ThreadRole::Ldm,
            vec![Box::new(ldm)],
        ));
    }
    for (instance, tc) in blocks.tcs.into_iter().enumerate() {
        if tc_on_ldm {
            let (name, _, thread_blocks) = &mut placements[instance];
            name.push_str(&format!("+tc{instance}"));
            thread_blocks.push(Box::new(tc));
        } else {
            placements.push((format!("tc{instance}"), ThreadRole::Tc, vec![Box::new(tc)]));
        }
    }
    placements.push((
        "main".into(),
        ThreadRole::Main,
        vec![
            Box::new(blocks.membership),
            Box::new(blocks.dih),
            Box::new(blocks.dict),
        ],
    ));

    let mut infos = Vec::new();
    let mut block_threads = Vec::new();
    for (index, (name, role, node_blocks)) in placements.into_iter().enumerate() {
        let (inbox, outbox) = ports[index].take().expect("each port is taken once");
        let stats = Arc::new(ThreadStats::default());
        let partitions = if role == ThreadRole::Ldm {
            default_partitions_of_ldm(config, node_group, index as u32)
        } else {
            Vec::new()
        };
        infos.push(ThreadInfo {
            name: name.clone(),
            role,
            stats: stats.clone(),
            waker: inbox.waker.clone(),
            partitions,
        });
        block_threads.push((name, role, inbox, outbox, stats, node_blocks));
    }
    let (recv_inbox, mut recv_outbox) = ports[recv_thread].take().expect("recv port");
    let (send_inbox, _send_outbox) = ports[send_thread].take().expect("send port");
    let (io_inbox, io_outbox) = ports[io_thread].take().expect("io port");
    let recv_stats = Arc::new(ThreadStats::default());
    let send_stats = Arc::new(ThreadStats::default());
    let io_stats = Arc::new(ThreadStats::default());
    let file_service = FileService::new(&data_dir, pool, io_stats.clone())
        .map_err(|error| format!("node {node}: {error}"))?;
    // With `network_on_ldm` the two loops run on ldm thread 0: their
    // counters stay apart, under names that say where they run.
    let (recv_name, send_name) = if config.threads.network_on_ldm {
        ("recv (on ldm0)", "send (on ldm0)")
    } else {
        ("recv", "send")
    };
    infos.push(ThreadInfo {
        name: recv_name.into(),
        role: ThreadRole::Recv,
        stats: recv_stats.clone(),
        waker: recv_inbox.waker.clone(),
        partitions: Vec::new(),
    });
    infos.push(ThreadInfo {
        name: send_name.into(),
        role: ThreadRole::Send,
        stats: send_stats.clone(),
        waker: send_inbox.waker.clone(),
        partitions: Vec::new(),
    });
    infos.push(ThreadInfo {
        name: "io".into(),
        role: ThreadRole::Io,
        stats: io_stats.clone(),
        waker: io_inbox.waker.clone(),
        partitions: Vec::new(),
    });
    let connections = Arc::new(ConnectionRegistry::new());
    let status = Arc::new(NodeStatus {
        started: AtomicBool::new(false),
        latest_gci: AtomicU64::new(0),
        complete_gci: AtomicU64::new(0),
        restored_gci: AtomicU64::new(0),
        schema_version: AtomicU32::new(0),
        threads: infos,
        pid,
        checkpoints: CheckpointReports::new(config.threads.ldm as usize),
        connections: connections.clone(),
        membership: std::sync::Mutex::new((0, Vec::new())),
        shutdown_reason: std::sync::Mutex::new(None),
        start_phase: std::sync::atomic::AtomicU8::new(0),
        copy_progress: std::sync::Mutex::new(Vec::new()),
        ready_to_stop: AtomicBool::new(false),
        began: Instant::now(),
        copy_logged_at: std::sync::Mutex::new(None),
    });

    // Membership begins the start phases when it receives phase 0 from itself.
    let membership = BlockRef::new(node, BlockKind::Membership, 0);
    let begin = Envelope {
        from: membership,
        to: membership,
        signal: StartPhaseReq { phase: 0 }.into(),
    };
    if recv_outbox.stage(begin).not_staged().is_some() {
        return Err("internal: membership has no route".into());
    }
    recv_outbox.flush();

    let signs_of_life = Arc::new(kernel::liveness::SignsOfLife::new(
        transport::registry::NODE_SLOTS,
    ));
    let recv_setup = RecvSetup {
        own_node: node,
        listener,
        outbox: recv_outbox,
        pool,
        connections: connections.clone(),
        stats: recv_stats,
        shutdown: shutdown.clone(),
        tc_instances: tc_count as u16,
        incarnation,
        data_nodes,
        identify_timeout: transport::recv::IDENTIFY_TIMEOUT,
        secret,
        signs_of_life: signs_of_life.clone(),
        api_heartbeat: transport::ApiHeartbeatLimits {
            interval: Duration::from_millis(config.cluster.heartbeat_interval_ms),
            missed: u32::from(config.cluster.api_heartbeat_missed()),
        },
    };
    let send_setup = SendSetup {
        own_node: node,
        incarnation,
        inbox: send_inbox,
        connections,
        stats: send_stats,
        shutdown: shutdown.clone(),
    };
    // `network_on_ldm`: the receive and send loops run on ldm thread 0
    // (placed first), beside its blocks; otherwise on threads of their own.
    let (mut network, network_threads) = if config.threads.network_on_ldm {
        let network = transport::NetworkOnThread::new(
            node,
            transport::RecvLoop::new(recv_setup),
            transport::SendLoop::new(send_setup),
        );
        let network: Box<dyn kernel::block_thread::Network> = Box::new(network);
        (Some(network), None)
    } else {
        (None, Some((recv_setup, send_setup)))
    };
    let mut threads = Vec::new();
    for (index, (name, role, inbox, outbox, stats, node_blocks)) in
        block_threads.into_iter().enumerate()
    {
        let setup = BlockThreadSetup {
            name: name.clone(),
            role,
            inbox,
            outbox,
            pool,
            epoch,
            stats,
            reports: status.clone(),
            shutdown: shutdown.clone(),
            spin_us: config.threads.spin_us,
            seed: u64::from(pid) << 32 | index as u64,
            signs_of_life: signs_of_life.clone(),
            network: if index == 0 { network.take() } else { None },
        };
        let handle = std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || block_thread::run(setup, node_blocks))
            .map_err(|error| format!("cannot start thread {name}: {error}"))?;
        threads.push(handle);
    }
    if let Some((recv_setup, send_setup)) = network_threads {
        threads.push(
            std::thread::Builder::new()
                .name("recv".into())
                .spawn(move || transport::run_recv_thread(recv_setup))
                .map_err(|error| format!("cannot start thread recv: {error}"))?,
        );
        threads.push(
            std::thread::Builder::new()
                .name("send".into())
                .spawn(move || transport::run_send_thread(send_setup))
                .map_err(|error| format!("cannot start thread send: {error}"))?,
        );
    }
    let arbiter = Arbiter::new(
        node,
        format!("{}:{}", config.mgmd.host, config.mgmd.port),
        config
            .data_node(node.0)
            .and_then(|data_node| data_node.host.parse::<std::net::Ipv4Addr>().ok())
            .filter(|ip| !ip.is_unspecified()),
        arbitration_secret,
    );
    // The stop request enters the io thread the way arbitration answers do.
    let to_io = arbiter.0.answers();
    let io_waker = io_inbox.waker.clone();
    let io_setup = IoThreadSetup {
        node,
        inbox: io_inbox,
        outbox: io_outbox,
        shutdown: shutdown.clone(),
        stats: io_stats,
        arbiter,
    };
    threads.push(
        std::thread::Builder::new()
            .name("io".into())
            .spawn(move || crate::io::run_io_thread(io_setup, file_service))
            .map_err(|error| format!("cannot start thread io: {error}"))?,
    );
    Ok(NodeRuntime {
        status,
        shutdown,
        threads,
        to_io,
        io_waker,
        node,
    })
}
