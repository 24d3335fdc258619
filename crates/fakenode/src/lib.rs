//! fakenode: a stand-in for data nodes, in-process, for tests of the client and of
//! programs built on it (the benchmarks) before or beside a real cluster.
//!
//! It speaks the real wire format over real loopback TCP and keeps rows in
//! a map: enough transaction semantics to check a client end to end
//! (batches, START/EXECUTE/COMMIT flags, constraint errors, rollback,
//! schema requests), nothing of a real data node's concurrency control.
//! A [`FakeCluster`] is several fake data nodes over one shared state: each
//! listens on its own port with its own node id, the partition maps spread
//! primaries over them, only the president (lowest id) takes schema
//! changes (the others answer NotMaster), and the map can be moved (a new
//! map version) to test routing. Each node records what it received and
//! can be told to misbehave (refuse registration for a while, stay silent,
//! drop connections); batches can be made to fail.
//!
//! Durability: every commit that writes gets the next GCI. Waits for a
//! durable GCI (GCI_WAIT_REQ) are answered as a tc answers them, against
//! the fake's complete GCI: by default every GCI handed out is complete at
//! once; after `set_complete_gci` the test moves the complete GCI itself,
//! and waits beyond it are held (bounded by `set_max_gci_waits`, then
//! refused with TooManyGciWaits) until it passes them or their connection
//! ends.
//!
//! Not for production: it holds every row in one mutex.

use signal::attr::AttrIter;
use signal::codec;
use signal::codec::FrameAssembler;
use signal::schema::{ColumnType, TableDef};
use signal::signals::*;
use signal::{
    BlockKind, BlockRef, Envelope, ErrorCode, Gci, NodeId, SectionPool, Signal, TransactionId,
};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

/// How the fake data node presents itself.
///
/// ```
/// let options = fakenode::FakeDataNodeOptions { tc_instances: 4, ..Default::default() };
/// assert_eq!(options.node_id, 2);
/// ```
#[derive(Clone, Debug)]
pub struct FakeDataNodeOptions {
    /// Node id in its frames.
    pub node_id: u16,
    /// tc instances reported in API_REGCONF.
    pub tc_instances: u16,
    /// API_REGREQs answered with `started: false` before `true`.
    pub not_started_replies: u32,
    /// Partitions given to a table created with 0.
    pub default_partitions: u32,
    /// Loopback port to listen on (0: the OS picks one).
    pub port: u16,
}

impl Default for FakeDataNodeOptions {
    fn default() -> Self {
        FakeDataNodeOptions {
            node_id: 2,
            tc_instances: 2,
            not_started_replies: 0,
            default_partitions: 2,
            port: 0,
        }
    }
}

/// One signal the fake received, for assertions.
///
/// ```
/// # let signal = fakenode::ReceivedSignal { name: "TcCommitReq", to_kind: signal::BlockKind::Tc,
/// #   to_instance: 0, from_node: 200, frame_sequence: 0, frame_signals: 1, flags: 0, transaction_id: None };
/// assert_eq!(signal.name, "TcCommitReq");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ReceivedSignal {
    /// Signal name.
    pub name: &'static str,
    /// Receiving block.
    pub to_kind: BlockKind,
    /// Receiving block instance.
    pub to_instance: u16,
    /// Sending API node.
    pub from_node: u16,
    /// Sequence number of the frame it came in.
    pub frame_sequence: u64,
    /// Signals in that frame.
    pub frame_signals: u16,
    /// TCKEYREQ flags (0 for other signals).
    pub flags: u8,
    /// Transaction, for transaction signals.
    pub transaction_id: Option<TransactionId>,
}

type RowImage = BTreeMap<u16, Option<Vec<u8>>>;
type RowKey = (u32, Vec<u8>);

#[derive(Default)]
struct FakeTransaction {
    /// Operations of the batch being collected (until EXECUTE).
    batch: Vec<TcKeyReq>,
    /// Uncommitted changes: `None` deletes.
    pending: HashMap<RowKey, Option<RowImage>>,
}

/// What the fake data nodes of one fake cluster share.
struct FakeState {
    /// Node ids of the cluster, ascending.
    nodes: Vec<u16>,
    /// The node whose dict takes schema changes.
    president: u16,
    default_partitions: u32,
    tables: HashMap<String, TableDef>,
    next_table_id: u32,
    next_table_version: u32,
    rows: HashMap<RowKey, RowImage>,
    /// GCI of each row's last committed change.
    row_gcis: HashMap<RowKey, Gci>,
    transactions: HashMap<TransactionId, FakeTransaction>,
    next_gci: u32,
    /// The last GCI a commit got (0: none yet).
    last_gci: Gci,
    /// Set by the test: the complete GCI. `None`: every GCI handed out is
    /// complete at once.
    complete_gci: Option<Gci>,
    /// GCI waits beyond the complete GCI, in arrival order.
    gci_waits: Vec<HeldGciWait>,
    /// Most GCI waits held; more are refused.
    max_gci_waits: usize,
    injected: VecDeque<(Option<OperationKind>, ErrorCode)>,
    /// The distribution version every TCKEYCONF and GET_TABINFO_CONF carries.
    map_version: u32,
    /// How far primaries are moved from their first placement.
    rotation: u32,
}

type SharedState = Arc<Mutex<FakeState>>;

fn lock_state(state: &Mutex<FakeState>) -> MutexGuard<'_, FakeState> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A GCI wait the fake holds until its GCI is complete.
struct HeldGciWait {
    /// The connection to answer on.
    writer: Arc<ReplyWriter>,
    /// The tc that got it (answers come from it).
    tc: BlockRef,
    api: BlockRef,
    request_id: u32,
    gci: Gci,
}

impl HeldGciWait {
    fn answer(&self, complete_gci: Gci) {
        self.writer.send(&[Envelope {
            from: self.tc,
            to: self.api,
            signal: GciWaitConf {
                request_id: self.request_id,
                complete_gci,
            }
            .into(),
        }]);
    }
}

/// The sending half of one client connection, shared by the thread that
/// serves it and whoever answers a held GCI wait later.
struct ReplyWriter {
    /// The stream and the next frame sequence number.
    stream: Mutex<(TcpStream, u64)>,
    node: NodeId,
    /// The node's silence switch.
    silent: Arc<AtomicBool>,
}

impl ReplyWriter {
    /// Writes `replies` in one frame (nothing while the node is silent);
    /// false if the connection is broken.
    fn send(&self, replies: &[Envelope]) -> bool {
        if replies.is_empty() || self.silent.load(Ordering::SeqCst) {
            return true;
        }
        let mut out = Vec::new();
        let start = codec::begin_frame(&mut out);
        for reply in replies {
            if codec::encode_signal(&mut out, reply).is_err() {
                return false;
            }
        }
        let mut stream = self.stream.lock().unwrap_or_else(PoisonError::into_inner);
        let sequence = stream.1;
        codec::finish_frame(
            &mut out,
            start,
            self.node,
            1,
            sequence,
            replies.len() as u16,
        );
        stream.1 += 1;
        stream.0.write_all(&out).is_ok()
    }
}

/// One fake data node's own part.
struct Shared {
    state: SharedState,
    options: FakeDataNodeOptions,
    registrations: AtomicU32,
    silent: Arc<AtomicBool>,
    received: Mutex<Vec<ReceivedSignal>>,
    stopping: AtomicBool,
    streams: Mutex<Vec<TcpStream>>,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, FakeState> {
        lock_state(&self.state)
    }

    fn received(&self) -> MutexGuard<'_, Vec<ReceivedSignal>> {
        self.received.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A fake data node listening on a loopback port.
///
/// ```
/// use fakenode::FakeDataNode;
/// let node = FakeDataNode::start(Default::default()).expect("loopback port");
/// let cluster = client::Cluster::connect_direct(&node.addr().to_string(), 200).expect("registers");
/// assert_eq!(cluster.tc_instances(), 2);
/// ```
pub struct FakeDataNode {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept_thread: Option<JoinHandle<()>>,
}

fn fake_pool() -> &'static SectionPool {
    static POOL: std::sync::OnceLock<&'static SectionPool> = std::sync::OnceLock::new();
    // Batches hold their sections until EXECUTE, so every class is deep;
    // pages are only touched when used.
    POOL.get_or_init(|| SectionPool::leak([65_536, 16_384, 4_096, 1_024, 1_024, 64]))
}

impl FakeDataNode {
    /// Listens on 127.0.0.1 with a port the OS picks, and serves every
    /// connection on its own thread: a cluster of this one node.
    ///
    /// ```
    /// let node = fakenode::FakeDataNode::start(Default::default()).unwrap();
    /// assert!(node.addr().ip().is_loopback());
    /// ```
    pub fn start(options: FakeDataNodeOptions) -> std::io::Result<FakeDataNode> {
        let state = new_state(&[options.node_id], options.default_partitions);
        FakeDataNode::start_in(options, state)
    }

    fn start_in(options: FakeDataNodeOptions, state: SharedState) -> std::io::Result<FakeDataNode> {
        let listener = TcpListener::bind(("127.0.0.1", options.port))?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            state,
            options,
            registrations: AtomicU32::new(0),
            silent: Arc::new(AtomicBool::new(false)),
            received: Mutex::new(Vec::new()),
            stopping: AtomicBool::new(false),
            streams: Mutex::new(Vec::new()),
        });
        let accept_shared = Arc::clone(&shared);
        let accept_thread = std::thread::Builder::new()
            .name("fake-data-node".into())
            .spawn(move || accept_loop(listener, accept_shared))?;
        Ok(FakeDataNode {
            addr,
            shared,
            accept_thread: Some(accept_thread),
        })
    }

    /// This node's id.
    ///
    /// ```
    /// let node = fakenode::FakeDataNode::start(Default::default()).unwrap();
    /// assert_eq!(node.node_id(), 2);
    /// ```
    pub fn node_id(&self) -> u16 {
        self.shared.options.node_id
    }

    /// The address to connect to.
    ///
    /// ```
    /// let node = fakenode::FakeDataNode::start(Default::default()).unwrap();
    /// assert_ne!(node.addr().port(), 0);
    /// ```
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every signal received so far, in order (the first 262,144).
    ///
    /// ```
    /// let node = fakenode::FakeDataNode::start(Default::default()).unwrap();
    /// assert!(node.received().is_empty());
    /// ```
    pub fn received(&self) -> Vec<ReceivedSignal> {
        self.shared.received().clone()
    }

    /// Forgets the received signals.
    ///
    /// ```
    /// let node = fakenode::FakeDataNode::start(Default::default()).unwrap();
    /// node.clear_received();
    /// ```
    pub fn clear_received(&self) {
        self.shared.received().clear();
    }

    /// Rows committed in table `name` (0 if there is no such table), in
    /// the whole fake cluster.
    ///
    /// ```
    /// let node = fakenode::FakeDataNode::start(Default::default()).unwrap();
    /// assert_eq!(node.row_count("t"), 0);
    /// ```
    pub fn row_count(&self, name: &str) -> usize {
        let state = self.shared.state();
        let Some(table) = state.tables.get(name) else {
            return 0;
        };
        let id = table.id;
        state.rows.keys().filter(|(table, _)| *table == id).count()
    }

    /// Transactions the fake holds open (started, not committed or aborted).
    ///
    /// ```
    /// let node = fakenode::FakeDataNode::start(Default::default()).unwrap();
    /// assert_eq!(node.open_transactions(), 0);
    /// ```
    pub fn open_transactions(&self) -> usize {
        self.shared.state().transactions.len()
    }

    /// The next batches to execute whose first operation is of `kind`
    /// (any kind for `None`) fail with these codes, one batch each, the
    /// first operation named as the failing one.
    ///
    /// ```
    /// use signal::{signals::OperationKind, ErrorCode};
    /// let node = fakenode::FakeDataNode::start(Default::default()).unwrap();
    /// node.fail_next_batches(None, &[ErrorCode::LockWaitTimeout]);
    /// node.fail_next_batches(Some(OperationKind::Read), &[ErrorCode::NoSuchRow]);
    /// ```
    pub fn fail_next_batches(&self, kind: Option<OperationKind>, codes: &[ErrorCode]) {
        self.shared
            .state()
            .injected
            .extend(codes.iter().map(|&code| (kind, code)));
    }

    /// While silent, this fake node processes requests but sends no reply.
    ///
    /// ```
    /// let node = fakenode::FakeDataNode::start(Default::default()).unwrap();
    /// node.set_silent(true);
    /// ```
    pub fn set_silent(&self, silent: bool) {
        self.shared.silent.store(silent, Ordering::SeqCst);
    }

    /// Changes the version of table `name` in place, as a drop and
    /// re-create by another client would; clients holding the old version
    /// get SchemaVersionMismatch.
    ///
    /// ```
    /// let node = fakenode::FakeDataNode::start(Default::default()).unwrap();
    /// assert!(!node.bump_table_version("missing"));
    /// ```
    pub fn bump_table_version(&self, name: &str) -> bool {
        let mut state = self.shared.state();
        let version = state.next_table_version;
        let Some(table) = state.tables.get_mut(name) else {
            return false;
        };
        table.version = version;
        state.next_table_version += 1;
        true
    }

    /// Starts an in-process mgmd on a free loopback port whose config names
    /// data node 2 at this fake's address, so that `Cluster::connect`
    /// through it reaches the fake. The config says id 2 whatever id the
    /// fake was given, so a fake with another id shows a mismatch.
    ///
    /// ```
    /// let node = fakenode::FakeDataNode::start(Default::default()).unwrap();
    /// let mgmd = node.start_mgmd().expect("mgmd listens");
    /// let cluster = client::Cluster::connect(&mgmd.local_addr().to_string()).expect("connects");
    /// assert!(cluster.api_node() >= 128);
    /// ```
    pub fn start_mgmd(&self) -> Result<mgmd::MgmdHandle, mgmd::MgmdError> {
        start_mgmd_for(&[(2, self.addr)])
    }

    /// Closes every client connection to this node (they see the
    /// connection lost).
    ///
    /// ```
    /// let node = fakenode::FakeDataNode::start(Default::default()).unwrap();
    /// node.disconnect_all();
    /// ```
    pub fn disconnect_all(&self) {
        let streams = std::mem::take(
            &mut *self
                .shared
                .streams
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for stream in streams {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

impl FakeDataNode {
    /// Makes `gci` the complete (durable) GCI of the fake cluster, or
    /// keeps a higher one set before: GCI waits up to it are answered now,
    /// later ones are held until it passes them. Before the first call,
    /// every GCI a commit got counts as complete at once.
    ///
    /// ```
    /// let node = fakenode::FakeDataNode::start(Default::default()).unwrap();
    /// node.set_complete_gci(client::Gci(0));
    /// assert_eq!(node.held_gci_waits(), 0);
    /// ```
    pub fn set_complete_gci(&self, gci: Gci) {
        let released = self.shared.state().set_complete_gci(gci);
        for (wait, complete_gci) in released {
            wait.answer(complete_gci);
        }
    }

    /// GCI waits the fake cluster holds (beyond its complete GCI).
    ///
    /// ```
    /// let node = fakenode::FakeDataNode::start(Default::default()).unwrap();
    /// assert_eq!(node.held_gci_waits(), 0);
    /// ```
    pub fn held_gci_waits(&self) -> usize {
        self.shared.state().gci_waits.len()
    }

    /// At most `limit` GCI waits are held; more are refused with
    /// TooManyGciWaits, as a tc refuses them (the default is 1024).
    ///
    /// ```
    /// let node = fakenode::FakeDataNode::start(Default::default()).unwrap();
    /// node.set_max_gci_waits(0);
    /// ```
    pub fn set_max_gci_waits(&self, limit: usize) {
        self.shared.state().max_gci_waits = limit;
    }
}

impl Drop for FakeDataNode {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.disconnect_all();
        // Wakes the accept loop, which then sees `stopping`.
        let _ = TcpStream::connect(self.addr);
        if let Some(thread) = self.accept_thread.take() {
            let _ = thread.join();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let Ok(registered) = stream.try_clone() else {
            continue;
        };
        shared
            .streams
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(registered);
        let connection_shared = Arc::clone(&shared);
        // Connection threads end when their stream closes; not joined.
        let _ = std::thread::Builder::new()
            .name("fake-data-node-conn".into())
            .spawn(move || serve_connection(stream, connection_shared));
    }
}

fn serve_connection(stream: TcpStream, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let Ok(closer) = stream.try_clone() else {
        return;
    };
    let Ok(sending) = stream.try_clone() else {
        return;
    };
    let writer = Arc::new(ReplyWriter {
        stream: Mutex::new((sending, 0)),
        node: NodeId(shared.options.node_id),
        silent: Arc::clone(&shared.silent),
    });
    serve_frames(stream, &shared, &writer);
    // Nobody is left to answer, as a tc drops a failed API node's waits.
    shared
        .state()
        .gci_waits
        .retain(|wait| !Arc::ptr_eq(&wait.writer, &writer));
    // Whatever ended the loop, the client must see the connection end.
    let _ = closer.shutdown(Shutdown::Both);
}

fn serve_frames(mut stream: TcpStream, shared: &Shared, writer: &Arc<ReplyWriter>) {
    let mut assembler = FrameAssembler::new();
    let node = NodeId(shared.options.node_id);
    loop {
        match assembler.read_from(&mut stream) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        loop {
            let (header, body) = match assembler.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(_) => return,
            };
            let mut replies = Vec::new();
            // GCI waits (of any connection) that commits made complete.
            let mut released = Vec::new();
            let mut decoder =
                codec::SignalDecoder::new(body, header.signal_count, header.sender, node);
            loop {
                match decoder.next(fake_pool()) {
                    Ok(Some(envelope)) => {
                        // Heartbeats are answered at once, as a data
                        // node's receive thread does, and not recorded.
                        if let Signal::ApiHeartbeatReq(request) = envelope.signal {
                            replies.push(Envelope {
                                from: envelope.to,
                                to: BlockRef::new(envelope.from.node, BlockKind::Api, 0),
                                signal: signal::signals::ApiHeartbeatConf {
                                    count: request.count,
                                }
                                .into(),
                            });
                            continue;
                        }
                        record(shared, &envelope, header.sequence, header.signal_count);
                        if let Signal::ApiRegReq(_) = envelope.signal {
                            let registrations =
                                shared.registrations.fetch_add(1, Ordering::SeqCst) + 1;
                            replies.push(Envelope {
                                from: envelope.to,
                                to: BlockRef::new(envelope.from.node, BlockKind::Api, 0),
                                signal: ApiRegConf {
                                    started: registrations > shared.options.not_started_replies,
                                    tc_instances: shared.options.tc_instances,
                                    heartbeat_interval_ms: FAKE_HEARTBEAT_INTERVAL_MS,
                                    api_heartbeat_missed: FAKE_API_HEARTBEAT_MISSED,
                                }
                                .into(),
                            });
                            continue;
                        }
                        let mut state = shared.state();
                        state.handle(envelope, &mut replies, writer);
                        released.extend(state.release_gci_waits());
                    }
                    Ok(None) => break,
                    Err(_) => return,
                }
            }
            if !writer.send(&replies) {
                return;
            }
            for (wait, complete_gci) in released {
                wait.answer(complete_gci);
            }
        }
    }
}

fn record(shared: &Shared, envelope: &Envelope, sequence: u64, frame_signals: u16) {
    let (flags, transaction_id) = match &envelope.signal {
        Signal::TcKeyReq(request) => (request.flags, Some(request.transaction_id)),
        Signal::TcCommitReq(request) => (0, Some(request.transaction_id)),
        Signal::TcRollbackReq(request) => (0, Some(request.transaction_id)),
        _ => (0, None),
    };
    let mut received = shared.received();
    if received.len() >= RECORDED_MAX {
        return;
    }
    received.push(ReceivedSignal {
        name: envelope.signal.name(),
        to_kind: envelope.to.kind,
        to_instance: envelope.to.instance,
        from_node: envelope.from.node.0,
        frame_sequence: sequence,
        frame_signals,
        flags,
        transaction_id,
    });
}

/// Signals a fake node records at most (a benchmark run sends millions).
const RECORDED_MAX: usize = 1 << 18;

/// What the fake tells clients at registration: the defaults of a real
/// cluster (docs/design/0017-api-heartbeats.md).
const FAKE_HEARTBEAT_INTERVAL_MS: u32 = 250;
const FAKE_API_HEARTBEAT_MISSED: u16 = 8;

/// GCI waits a fake cluster holds before refusing more, unless set.
const DEFAULT_MAX_GCI_WAITS: usize = 1024;

fn new_state(nodes: &[u16], default_partitions: u32) -> SharedState {
    let mut nodes = nodes.to_vec();
    nodes.sort_unstable();
    nodes.dedup();
    Arc::new(Mutex::new(FakeState {
        president: nodes[0],
        nodes,
        default_partitions,
        tables: HashMap::new(),
        next_table_id: 1,
        next_table_version: 1,
        rows: HashMap::new(),
        row_gcis: HashMap::new(),
        transactions: HashMap::new(),
        next_gci: 1,
        last_gci: Gci(0),
        complete_gci: None,
        gci_waits: Vec::new(),
        max_gci_waits: DEFAULT_MAX_GCI_WAITS,
        injected: VecDeque::new(),
        map_version: 1,
        rotation: 0,
    }))
}

/// Starts an in-process mgmd on a free loopback port whose config lists
/// these data nodes (id, address).
fn start_mgmd_for(nodes: &[(u16, SocketAddr)]) -> Result<mgmd::MgmdHandle, mgmd::MgmdError> {
    let mut text =
        "[mgmd]\nhost = \"127.0.0.1\"\nport = 11860\n\n[cluster]\nreplicas = 1\n".to_string();
    for (id, addr) in nodes {
        text.push_str(&format!(
            "\n[[data_node]]\nid = {id}\nhost = \"127.0.0.1\"\nport = {}\ndata_dir = \"d{id}\"\n",
            addr.port()
        ));
    }
    let config = config::ClusterConfig::from_toml_str(&text, "fake-data-node.toml")
        .map_err(mgmd::MgmdError::Config)?;
    mgmd::start_server_with(
        config,
        text,
        mgmd::ServerOptions {
            bind_addr: Some("127.0.0.1:0".into()),
            // Fake data nodes check no token; mgmd still issues them.
            secret: Some(
                admission::ClusterSecret::from_bytes(b"fakenode: a cluster secret for tests")
                    .map_err(|error| mgmd::MgmdError::Secret(error.to_string()))?,
            ),
            ..Default::default()
        },
    )
}

/// Several fake data nodes over one shared state (tables, rows,
/// transactions): a transaction may run on any of them, as on the tcs of
/// a real cluster.
///
/// ```
/// use fakenode::FakeCluster;
/// let fake = FakeCluster::start(Default::default(), &[2, 3]).expect("loopback ports");
/// let mgmd = fake.start_mgmd().expect("mgmd listens");
/// let cluster = client::Cluster::connect(&mgmd.local_addr().to_string()).expect("connects");
/// assert_eq!(cluster.data_nodes(), [signal::NodeId(2), signal::NodeId(3)]);
/// ```
pub struct FakeCluster {
    nodes: Vec<FakeDataNode>,
    state: SharedState,
}

impl FakeCluster {
    /// Starts one fake data node per id in `node_ids`, each with `options`
    /// but its own id.
    ///
    /// ```
    /// let fake = fakenode::FakeCluster::start(Default::default(), &[3, 2]).unwrap();
    /// assert_eq!(fake.nodes()[0].node_id(), 2, "in id order");
    /// ```
    pub fn start(options: FakeDataNodeOptions, node_ids: &[u16]) -> std::io::Result<FakeCluster> {
        if node_ids.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a fake cluster needs at least one node",
            ));
        }
        let state = new_state(node_ids, options.default_partitions);
        let ids = lock_state(&state).nodes.clone();
        let nodes = ids
            .into_iter()
            .map(|node_id| {
                FakeDataNode::start_in(
                    FakeDataNodeOptions {
                        node_id,
                        port: 0,
                        ..options.clone()
                    },
                    Arc::clone(&state),
                )
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(FakeCluster { nodes, state })
    }

    /// The nodes, in id order.
    ///
    /// ```
    /// let fake = fakenode::FakeCluster::start(Default::default(), &[2, 3]).unwrap();
    /// assert_eq!(fake.nodes().len(), 2);
    /// ```
    pub fn nodes(&self) -> &[FakeDataNode] {
        &self.nodes
    }

    /// The node with id `node_id`.
    ///
    /// ```
    /// let fake = fakenode::FakeCluster::start(Default::default(), &[2, 3]).unwrap();
    /// assert_eq!(fake.node(3).map(|node| node.node_id()), Some(3));
    /// assert!(fake.node(4).is_none());
    /// ```
    pub fn node(&self, node_id: u16) -> Option<&FakeDataNode> {
        self.nodes.iter().find(|node| node.node_id() == node_id)
    }

    /// An in-process mgmd whose config lists every node of the fake cluster.
    ///
    /// ```
    /// let fake = fakenode::FakeCluster::start(Default::default(), &[2, 3]).unwrap();
    /// assert!(fake.start_mgmd().is_ok());
    /// ```
    pub fn start_mgmd(&self) -> Result<mgmd::MgmdHandle, mgmd::MgmdError> {
        let nodes: Vec<(u16, SocketAddr)> = self
            .nodes
            .iter()
            .map(|node| (node.node_id(), node.addr()))
            .collect();
        start_mgmd_for(&nodes)
    }

    /// Moves every partition's primary to the next node and raises the
    /// distribution version, as a real cluster's dih does after a node
    /// failure: replies carry the new version from now on.
    ///
    /// ```
    /// let fake = fakenode::FakeCluster::start(Default::default(), &[2, 3]).unwrap();
    /// assert_eq!(fake.map_version(), 1);
    /// fake.move_primaries();
    /// assert_eq!(fake.map_version(), 2);
    /// ```
    pub fn move_primaries(&self) {
        let mut state = lock_state(&self.state);
        state.rotation += 1;
        state.map_version += 1;
    }

    /// Makes `gci` the complete (durable) GCI of the fake cluster (see
    /// [`FakeDataNode::set_complete_gci`]; the nodes share it).
    ///
    /// ```
    /// let fake = fakenode::FakeCluster::start(Default::default(), &[2, 3]).unwrap();
    /// fake.set_complete_gci(client::Gci(0));
    /// assert_eq!(fake.held_gci_waits(), 0);
    /// ```
    pub fn set_complete_gci(&self, gci: Gci) {
        self.nodes[0].set_complete_gci(gci);
    }

    /// GCI waits held by any node of the fake cluster.
    ///
    /// ```
    /// let fake = fakenode::FakeCluster::start(Default::default(), &[2]).unwrap();
    /// assert_eq!(fake.held_gci_waits(), 0);
    /// ```
    pub fn held_gci_waits(&self) -> usize {
        lock_state(&self.state).gci_waits.len()
    }

    /// The distribution version replies carry.
    ///
    /// ```
    /// let fake = fakenode::FakeCluster::start(Default::default(), &[2]).unwrap();
    /// assert_eq!(fake.map_version(), 1);
    /// ```
    pub fn map_version(&self) -> u32 {
        lock_state(&self.state).map_version
    }

    /// Makes `node_id` the node that takes schema changes (the others
    /// answer NotMaster), as after the president failed.
    ///
    /// ```
    /// let fake = fakenode::FakeCluster::start(Default::default(), &[2, 3]).unwrap();
    /// fake.set_president(3);
    /// ```
    pub fn set_president(&self, node_id: u16) {
        lock_state(&self.state).president = node_id;
    }

    /// The node holding the primary of the row with this key section in
    /// table `name`, by the fake's own current map.
    ///
    /// ```
    /// let fake = fakenode::FakeCluster::start(Default::default(), &[2, 3]).unwrap();
    /// assert_eq!(fake.primary_of("missing", &[]), None);
    /// ```
    pub fn primary_of(&self, name: &str, key: &[u8]) -> Option<u16> {
        let state = lock_state(&self.state);
        let table = state.tables.get(name)?;
        let hash = signal::attr::key_hash(table, key).ok()?;
        let map = state.map_of(table);
        let partition = map.bucket_partitions[signal::partition::bucket(hash) as usize];
        Some(map.partitions[partition as usize].replicas[0].0)
    }
}

fn image_from_entries(entries: &[u8], into: &mut RowImage) -> Result<(), ErrorCode> {
    for entry in AttrIter::new(entries) {
        let entry = entry?;
        into.insert(entry.column, entry.value.map(<[u8]>::to_vec));
    }
    Ok(())
}

fn entries_from_image(table: &TableDef, image: &RowImage) -> Vec<u8> {
    let mut out = Vec::new();
    for column in 0..table.columns.len() as u16 {
        let value = image.get(&column).and_then(Option::as_deref);
        out.extend_from_slice(&column.to_le_bytes());
        match value {
            Some(bytes) => {
                out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
                out.extend_from_slice(bytes);
            }
            None => out.extend_from_slice(&signal::attr::NULL_LENGTH.to_le_bytes()),
        }
    }
    out
}

impl FakeState {
    /// The table's distribution: partition p's replicas are every node
    /// (at most 4), starting at node (p + rotation) mod nodes, on ldm
    /// instance (p / nodes) mod 2 (as on nodes of two ldm threads, each
    /// node's primaries spread over both).
    fn map_of(&self, table: &TableDef) -> signal::signals::PartitionMap {
        let partitions = table.partitions.max(1);
        let nodes = self.nodes.len() as u32;
        let placements = (0..partitions)
            .map(|partition| signal::signals::PartitionPlacement {
                node_group: 0,
                replicas: (0..nodes.min(signal::signals::MAX_REPLICAS as u32))
                    .map(|step| {
                        let index = (partition + self.rotation + step) % nodes;
                        NodeId(self.nodes[index as usize])
                    })
                    .collect(),
                ldm_instance: ((partition / nodes) % 2) as u16,
                redo_part: partition,
            })
            .collect();
        signal::signals::PartitionMap {
            table_id: table.id,
            version: self.map_version,
            bucket_partitions: (0..signal::partition::BUCKETS)
                .map(|bucket| signal::partition::default_partition_of_bucket(bucket, partitions))
                .collect(),
            partitions: placements,
        }
    }

    /// The complete GCI: set by the test, else the last one handed out.
    fn current_complete_gci(&self) -> Gci {
        self.complete_gci.unwrap_or(self.last_gci)
    }

    /// Takes the held GCI waits that are complete now, each with the
    /// complete GCI to answer (sent by the caller, outside the state lock).
    fn release_gci_waits(&mut self) -> Vec<(HeldGciWait, Gci)> {
        let complete_gci = self.current_complete_gci();
        if !self.gci_waits.iter().any(|wait| wait.gci <= complete_gci) {
            return Vec::new();
        }
        let (released, held) = std::mem::take(&mut self.gci_waits)
            .into_iter()
            .partition(|wait| wait.gci <= complete_gci);
        self.gci_waits = held;
        released
            .into_iter()
            .map(|wait| (wait, complete_gci))
            .collect()
    }

    /// Sets the complete GCI (never lowers it); returns the waits it released.
    fn set_complete_gci(&mut self, gci: Gci) -> Vec<(HeldGciWait, Gci)> {
        let complete_gci = self.complete_gci.map_or(gci, |complete| complete.max(gci));
        self.complete_gci = Some(complete_gci);
        self.release_gci_waits()
    }

    fn handle(
        &mut self,
        envelope: Envelope,
        replies: &mut Vec<Envelope>,
        writer: &Arc<ReplyWriter>,
    ) {
        let api = BlockRef::new(envelope.from.node, BlockKind::Api, 0);
        let me = envelope.to;
        let mut reply = |signal: Signal| {
            replies.push(Envelope {
                from: me,
                to: api,
                signal,
            })
        };
        match envelope.signal {
            Signal::TcKeyReq(request) => {
                let transaction_id = request.transaction_id;
                let client_op = request.client_op;
                let flags = request.flags;
                if flags & tc_key_flags::START != 0 {
                    self.transactions.entry(transaction_id).or_default();
                }
                let Some(transaction) = self.transactions.get_mut(&transaction_id) else {
                    reply(
                        TcKeyRef {
                            transaction_id,
                            client_op,
                            error: ErrorCode::UnknownTransaction,
                            index_id: 0,
                        }
                        .into(),
                    );
                    return;
                };
                transaction.batch.push(request);
                if flags & (tc_key_flags::EXECUTE | tc_key_flags::COMMIT) != 0 {
                    self.execute(
                        transaction_id,
                        flags & tc_key_flags::COMMIT != 0,
                        &mut reply,
                    );
                }
            }
            Signal::TcCommitReq(request) => {
                let transaction_id = request.transaction_id;
                match self.transactions.remove(&transaction_id) {
                    Some(transaction) => {
                        let gci = self.commit(transaction);
                        reply(
                            TcKeyConf {
                                transaction_id,
                                operations: 0,
                                committed: true,
                                gci,
                                map_version: self.map_version,
                                row: None,
                            }
                            .into(),
                        );
                    }
                    None => reply(
                        TcKeyRef {
                            transaction_id,
                            client_op: u32::MAX,
                            error: ErrorCode::UnknownTransaction,
                            index_id: 0,
                        }
                        .into(),
                    ),
                }
            }
            Signal::TcRollbackReq(request) => {
                self.transactions.remove(&request.transaction_id);
                reply(
                    TcRollbackConf {
                        transaction_id: request.transaction_id,
                    }
                    .into(),
                );
            }
            Signal::CreateTabReq(request) if me.node.0 != self.president => reply(
                SchemaRef {
                    request_id: request.request_id,
                    error: ErrorCode::NotMaster,
                }
                .into(),
            ),
            Signal::DropTabReq(request) if me.node.0 != self.president => reply(
                SchemaRef {
                    request_id: request.request_id,
                    error: ErrorCode::NotMaster,
                }
                .into(),
            ),
            Signal::CreateTabReq(request) => {
                let request_id = request.request_id;
                match self.create_table(request.definition.as_slice()) {
                    Ok(table) => reply(
                        CreateTabConf {
                            request_id,
                            table_id: table.id,
                            table_version: table.version,
                        }
                        .into(),
                    ),
                    Err(error) => reply(SchemaRef { request_id, error }.into()),
                }
            }
            Signal::DropTabReq(request) => {
                let name = String::from_utf8_lossy(request.name.as_slice()).into_owned();
                match self.tables.remove(&name) {
                    Some(table) => {
                        self.rows.retain(|(id, _), _| *id != table.id);
                        self.row_gcis.retain(|(id, _), _| *id != table.id);
                        reply(
                            DropTabConf {
                                request_id: request.request_id,
                            }
                            .into(),
                        );
                    }
                    None => reply(
                        SchemaRef {
                            request_id: request.request_id,
                            error: ErrorCode::UnknownTable,
                        }
                        .into(),
                    ),
                }
            }
            Signal::GetTabInfoReq(request) => {
                let name = String::from_utf8_lossy(request.name.as_slice()).into_owned();
                let encoded = self.tables.get(&name).map(TableDef::encode_to_vec);
                let map = self.tables.get(&name).map(|table| {
                    let mut bytes = Vec::new();
                    signal::codec::encode_partition_map(&mut bytes, &self.map_of(table));
                    bytes
                });
                let sections = encoded.as_deref().map(|bytes| {
                    fake_pool()
                        .copy_from(bytes)
                        .zip(map.as_deref().and_then(|map| fake_pool().copy_from(map)))
                });
                let signal: Signal = match sections {
                    Some(Some((definition, map))) => GetTabInfoConf {
                        request_id: request.request_id,
                        schema_version: self.next_table_version,
                        definition,
                        map_version: self.map_version,
                        map,
                    }
                    .into(),
                    Some(None) => SchemaRef {
                        request_id: request.request_id,
                        error: ErrorCode::OutOfSignalMemory,
                    }
                    .into(),
                    None => SchemaRef {
                        request_id: request.request_id,
                        error: ErrorCode::UnknownTable,
                    }
                    .into(),
                };
                reply(signal);
            }
            Signal::ListTablesReq(request) => {
                let mut names: Vec<&str> = self.tables.keys().map(String::as_str).collect();
                names.sort_unstable();
                let mut bytes = Vec::new();
                let signal: Signal = match signal::codec::encode_table_names(&mut bytes, names)
                    .ok()
                    .and_then(|()| fake_pool().copy_from(&bytes))
                {
                    Some(names) => ListTablesConf {
                        request_id: request.request_id,
                        schema_version: self.next_table_version,
                        names,
                    }
                    .into(),
                    None => SchemaRef {
                        request_id: request.request_id,
                        error: ErrorCode::OutOfSignalMemory,
                    }
                    .into(),
                };
                reply(signal);
            }
            Signal::GciWaitReq(request) => {
                let complete_gci = self.current_complete_gci();
                let request_id = request.request_id;
                if request.gci <= complete_gci {
                    reply(
                        GciWaitConf {
                            request_id,
                            complete_gci,
                        }
                        .into(),
                    );
                } else if self.gci_waits.len() >= self.max_gci_waits {
                    reply(
                        GciWaitRef {
                            request_id,
                            error: ErrorCode::TooManyGciWaits,
                        }
                        .into(),
                    );
                } else {
                    self.gci_waits.push(HeldGciWait {
                        writer: Arc::clone(writer),
                        tc: me,
                        api,
                        request_id,
                        gci: request.gci,
                    });
                }
            }
            Signal::ScanPartitionReq(request) => match self.scan(&request) {
                Ok(conf) => reply(conf.into()),
                Err(error) => reply(
                    ScanPartitionRef {
                        request_id: request.request_id,
                        error,
                    }
                    .into(),
                ),
            },
            // Anything else is not for a data node from an API node; a real
            // node would close the connection, the fake ignores it.
            _ => {}
        }
    }

    fn create_table(&mut self, bytes: &[u8]) -> Result<TableDef, ErrorCode> {
        let mut table = TableDef::decode(bytes).map_err(|_| ErrorCode::BadTableDefinition)?;
        if self.tables.contains_key(&table.name) {
            return Err(ErrorCode::TableExists);
        }
        table.id = self.next_table_id;
        table.version = self.next_table_version;
        if table.partitions == 0 {
            table.partitions = self.default_partitions;
        }
        self.next_table_id += 1;
        self.next_table_version += 1;
        self.tables.insert(table.name.clone(), table.clone());
        Ok(table)
    }

    fn table_by_id(&self, id: u32) -> Option<&TableDef> {
        self.tables.values().find(|table| table.id == id)
    }

    fn commit(&mut self, transaction: FakeTransaction) -> Gci {
        if transaction.pending.is_empty() {
            return Gci(0);
        }
        let gci = Gci::from_parts(self.next_gci, 0);
        self.next_gci += 1;
        self.last_gci = gci;
        for (key, image) in transaction.pending {
            match image {
                Some(image) => {
                    self.row_gcis.insert(key.clone(), gci);
                    self.rows.insert(key, image);
                }
                None => {
                    self.row_gcis.remove(&key);
                    self.rows.remove(&key);
                }
            }
        }
        gci
    }

    /// The rows of one partition in key order (a row's id is its place).
    fn scan(&self, request: &ScanPartitionReq) -> Result<ScanPartitionConf, ErrorCode> {
        let table = self
            .table_by_id(request.table_id)
            .ok_or(ErrorCode::UnknownTable)?;
        let map = self.map_of(table);
        if request.partition as usize >= map.partitions.len() {
            return Err(ErrorCode::UnknownTable);
        }
        let mut keys: Vec<&RowKey> = self
            .rows
            .keys()
            .filter(|(id, key)| {
                *id == table.id
                    && signal::attr::key_hash(table, key).is_ok_and(|hash| {
                        map.bucket_partitions[signal::partition::bucket(hash) as usize]
                            == request.partition
                    })
            })
            .collect();
        keys.sort_unstable();
        let mut out = Vec::new();
        let start = (request.start_row as usize).min(keys.len());
        let end = start
            .saturating_add(request.max_rows.max(1) as usize)
            .min(keys.len());
        for (row_id, key) in keys.iter().enumerate().take(end).skip(start) {
            let entries = entries_from_image(table, &self.rows[*key]);
            out.extend_from_slice(&(row_id as u32).to_le_bytes());
            let gci = self.row_gcis.get(*key).copied().unwrap_or(Gci(0));
            out.extend_from_slice(&gci.0.to_le_bytes());
            out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
            out.extend_from_slice(&entries);
        }
        let next_row = if end < keys.len() {
            end as u32
        } else {
            u32::MAX
        };
        Ok(ScanPartitionConf {
            request_id: request.request_id,
            rows: fake_pool()
                .copy_from(&out)
                .ok_or(ErrorCode::OutOfSignalMemory)?,
            next_row,
            done: next_row == u32::MAX,
        })
    }

    fn execute(
        &mut self,
        transaction_id: TransactionId,
        commit: bool,
        reply: &mut impl FnMut(Signal),
    ) {
        let Some(mut transaction) = self.transactions.remove(&transaction_id) else {
            return;
        };
        let batch = std::mem::take(&mut transaction.batch);
        let operations = batch.len() as u32;
        let first_kind = batch.first().map(|op| op.kind);
        let injected = self
            .injected
            .front()
            .is_some_and(|(kind, _)| kind.is_none() || *kind == first_kind);
        if let Some((_, error)) = injected.then(|| self.injected.pop_front()).flatten() {
            let client_op = batch.first().map_or(u32::MAX, |op| op.client_op);
            reply(
                TcKeyRef {
                    transaction_id,
                    client_op,
                    error,
                    index_id: 0,
                }
                .into(),
            );
            return;
        }
        let mut rows = Vec::new();
        for op in &batch {
            match self.apply(&mut transaction, op) {
                Ok(Some(data)) => rows.push((op.client_op, data)),
                Ok(None) => {}
                Err(error) => {
                    // The whole transaction aborts: its pending changes go.
                    reply(
                        TcKeyRef {
                            transaction_id,
                            client_op: op.client_op,
                            error,
                            index_id: 0,
                        }
                        .into(),
                    );
                    return;
                }
            }
        }
        for (client_op, data) in rows {
            let Some(data) = fake_pool().copy_from(&data) else {
                reply(
                    TcKeyRef {
                        transaction_id,
                        client_op,
                        error: ErrorCode::OutOfSignalMemory,
                        index_id: 0,
                    }
                    .into(),
                );
                return;
            };
            reply(
                TransIdAi {
                    transaction_id,
                    client_op,
                    data,
                }
                .into(),
            );
        }
        let gci = if commit {
            self.commit(transaction)
        } else {
            self.transactions.insert(transaction_id, transaction);
            Gci(0)
        };
        reply(
            TcKeyConf {
                transaction_id,
                operations,
                committed: commit,
                gci,
                map_version: self.map_version,
                row: None,
            }
            .into(),
        );
    }

    /// Applies one operation to the transaction's view; returns row data for a read.
    fn apply(
        &self,
        transaction: &mut FakeTransaction,
        op: &TcKeyReq,
    ) -> Result<Option<Vec<u8>>, ErrorCode> {
        let table = self
            .table_by_id(op.table_id)
            .ok_or(ErrorCode::UnknownTable)?;
        if table.version != op.table_version {
            return Err(ErrorCode::SchemaVersionMismatch);
        }
        signal::attr::key_hash(table, op.key.as_slice())?;
        let key: RowKey = (table.id, op.key.as_slice().to_vec());
        let current: Option<RowImage> = match transaction.pending.get(&key) {
            Some(pending) => pending.clone(),
            None => self.rows.get(&key).cloned(),
        };
        let attr = op
            .attr
            .as_ref()
            .map_or(&[][..], |section| section.as_slice());
        match op.kind {
            OperationKind::Read => {
                // A committed read sees the last committed image only.
                let image = if op.lock == LockMode::CommittedRead {
                    self.rows.get(&key).cloned()
                } else {
                    current
                };
                let image = image.ok_or(ErrorCode::NoSuchRow)?;
                Ok(Some(entries_from_image(table, &image)))
            }
            OperationKind::Insert | OperationKind::Write => {
                if op.kind == OperationKind::Insert && current.is_some() {
                    return Err(ErrorCode::DuplicateKey);
                }
                let mut image = RowImage::new();
                image_from_entries(op.key.as_slice(), &mut image)?;
                image_from_entries(attr, &mut image)?;
                transaction.pending.insert(key, Some(image));
                Ok(None)
            }
            OperationKind::Update => {
                let mut image = current.ok_or(ErrorCode::NoSuchRow)?;
                image_from_entries(attr, &mut image)?;
                transaction.pending.insert(key, Some(image));
                Ok(None)
            }
            OperationKind::Increment => {
                // As a data node: a unique index's columns are refused (by
                // the tc), then no row, then each column's type, NULL and
                // range (by the ldm); a key column cannot change.
                let mut seen: Vec<u16> = Vec::new();
                for entry in AttrIter::new(attr) {
                    let column = entry?.column;
                    let unique = table
                        .indexes
                        .iter()
                        .any(|index| index.unique.is_some() && index.columns.contains(&column));
                    if unique || seen.contains(&column) {
                        return Err(ErrorCode::BadRequest);
                    }
                    seen.push(column);
                }
                let mut image = current.ok_or(ErrorCode::NoSuchRow)?;
                for entry in AttrIter::new(attr) {
                    let entry = entry?;
                    let column = table
                        .columns
                        .get(entry.column as usize)
                        .ok_or(ErrorCode::UnknownColumn)?;
                    if !matches!(
                        column.column_type,
                        ColumnType::Int { .. } | ColumnType::BigInt { .. }
                    ) {
                        return Err(ErrorCode::BadValue);
                    }
                    if table.primary_key.contains(&entry.column) {
                        return Err(ErrorCode::BadRequest);
                    }
                    let delta = entry
                        .value
                        .and_then(|value| value.try_into().ok())
                        .map(i64::from_le_bytes)
                        .ok_or(ErrorCode::BadRequest)?;
                    let now = image
                        .get(&entry.column)
                        .cloned()
                        .flatten()
                        .ok_or(ErrorCode::ValueOutOfRange)?;
                    let (sum, len) = signal::attr::add_to_integer(column.column_type, &now, delta)?;
                    image.insert(entry.column, Some(sum[..len].to_vec()));
                }
                transaction.pending.insert(key, Some(image));
                Ok(None)
            }
            OperationKind::Delete => {
                current.ok_or(ErrorCode::NoSuchRow)?;
                transaction.pending.insert(key, None);
                Ok(None)
            }
        }
    }
}
