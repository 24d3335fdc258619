//! The data node's receive thread (NDB's recv thread): accepts connections,
//! dials the other data nodes, reassembles frames from every socket, decodes
//! their signals into sections, and hands them to the block threads through
//! the job-queue mesh.
//!
//! One `mio::Poll` watches the listener and every connection. The first
//! valid frame of a connection names its peer; from then on the connection
//! is registered in the [`ConnectionRegistry`] so the send thread can answer
//! on it. A peer that breaks a rule (garbage bytes, a bad checksum, a signal
//! an API node may not send, a block that does not exist, our own node id, a
//! node id already connected) loses its connection and nothing else: every
//! byte from the network is checked and no check panics.
//!
//! **API nodes.** When a registered API node's connection closes for any
//! reason, tc, dict and membership get `ApiFailRep` so they abort its transactions and
//! forget its requests. Signals decoded before the close were staged first,
//! and job queues keep order per sender-receiver pair, so the report
//! arrives after them.
//!
//! **Admission** (`admit`): a connection is registered only once it has
//! shown what mgmd issued: an API node the token of its node id in its
//! first API_REGREQ, a data node proof of the cluster secret in the link
//! handshake. Until then its frames are small and its time is short
//! (`identify_timeout`).
//!
//! **Data nodes** (docs/design/processes-and-blocks.md §5): one connection per pair,
//! dialed by the node with the lower id (retried every [`DIAL_RETRY`] until
//! it succeeds, and again after it drops) and accepted by the higher. The
//! link handshake's frames are written here before the connection is
//! registered (so the send thread's frames on it begin after them). The
//! handshake's end establishes the connection: it is registered and
//! membership gets `NodeConnectedRep`. A data node may send any wire signal from a data-node
//! block to a block that exists. The highest incarnation seen from each data
//! node is remembered, and a connection from a lower one (a node that has
//! since restarted) is refused. A data-node link that breaks once
//! established is never made again by this process: the node is cut in the
//! registry (so neither side's dial or accept admits it) and membership
//! gets `NodeLinkFailedRep`, and takes the node for failed
//! (docs/design/failures.md §2). Membership cuts a node it takes for
//! failed otherwise (missed heartbeats) through the registry too.

mod admit;

use crate::registry::{ConnectionRegistry, NODE_SLOTS};
use admission::ClusterSecret;
use admit::{Admitted, Admitting, Handshake};
use kernel::mesh::Outbox;
use kernel::stats::ThreadStats;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use signal::codec::{self, SignalDecoder, WireError};
use signal::codec::{FrameAssembler, StreamError};
use signal::signals::{ApiFailRep, NodeConnectedRep, NodeLinkFailedRep, TcKeyReqDroppedRep};
use signal::{BlockKind, BlockRef, Envelope, ErrorCode, NodeId, SectionPool, Signal};
use std::io::ErrorKind;
use std::net::{Shutdown, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Connections served at once; further ones are accepted and closed at once,
/// so a misbehaving client cannot exhaust the node's file descriptors.
pub const MAX_CONNECTIONS: usize = 256;

/// How long the thread sleeps in poll when idle: the bound on how late it
/// notices `shutdown`.
const POLL_TIMEOUT: Duration = Duration::from_millis(100);

/// How long a connection may stay open without being admitted (a client's
/// registration with its token, a data node's link handshake): slots are
/// few (see [`MAX_CONNECTIONS`]), so one that never says who it is must not
/// keep one.
pub const IDENTIFY_TIMEOUT: Duration = Duration::from_secs(10);

/// Reads from one connection per round before serving the others, so one
/// busy peer cannot starve the rest (sockets are edge-triggered, so a
/// connection cut short is remembered and served again next round).
const READS_PER_ROUND: usize = 8;

/// Pause when the section pool is empty: block threads free sections as
/// they finish operations, so waiting briefly is enough.
const OUT_OF_SECTIONS_PAUSE: Duration = Duration::from_millis(1);

/// Pause when the job queues to the block threads are full.
const QUEUES_FULL_PAUSE: Duration = Duration::from_micros(100);

/// Pause before retrying `accept` after it failed (out of descriptors, say).
const ACCEPT_RETRY_PAUSE: Duration = Duration::from_millis(10);

/// Pause between attempts to connect to a data node this node dials.
pub const DIAL_RETRY: Duration = Duration::from_millis(100);

/// How often a data node that was cut (taken for failed) is dialed again,
/// in case it restarted.
pub const CUT_REDIAL: Duration = Duration::from_secs(1);

/// A dial not connected after this long is abandoned (and retried).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

const LISTENER_TOKEN: Token = Token(0);

/// Another data node of the cluster (from the config).
#[derive(Clone, Debug)]
pub struct DataNodePeer {
    /// Its node id.
    pub node: NodeId,
    /// Where it listens.
    pub address: SocketAddr,
}

/// Everything the receive thread needs, built by the data node.
pub struct RecvSetup {
    /// This data node.
    pub own_node: NodeId,
    /// Bound listening socket (the data node's host:port from the config).
    pub listener: std::net::TcpListener,
    /// The receive thread's producer side of the mesh.
    pub outbox: Outbox,
    /// Where decoded signals take their sections from.
    pub pool: &'static SectionPool,
    /// Shared with the send thread.
    pub connections: Arc<ConnectionRegistry>,
    /// This thread's counters.
    pub stats: Arc<ThreadStats>,
    /// Set to stop the thread.
    pub shutdown: Arc<AtomicBool>,
    /// tc instances on this node, each told of a failed API node.
    pub tc_instances: u16,
    /// This start of the node: the hello frames carry it (the send thread
    /// must be given the same one).
    pub incarnation: u32,
    /// Every data node of the cluster (this one may be listed; it is
    /// skipped): this thread dials those with a higher id and accepts the
    /// others.
    pub data_nodes: Vec<DataNodePeer>,
    /// How long a connection may stay without being admitted
    /// ([`IDENTIFY_TIMEOUT`] in a data node; shorter in tests).
    pub identify_timeout: Duration,
    /// The cluster secret: API tokens are checked and link proofs made
    /// and checked with it.
    pub secret: ClusterSecret,
    /// Marked whenever a frame from another data node arrives (read by
    /// membership's heartbeat timer).
    pub signs_of_life: Arc<kernel::liveness::SignsOfLife>,
    /// How often an API node that heartbeats sends a sign of life, and
    /// how many such intervals of silence in a row close its connection
    /// (docs/design/0017-api-heartbeats.md).
    pub api_heartbeat: ApiHeartbeatLimits,
}

/// The API heartbeat settings of a data node (from the cluster config).
#[derive(Clone, Copy, Debug)]
pub struct ApiHeartbeatLimits {
    /// The heartbeat interval.
    pub interval: Duration,
    /// Intervals of silence in a row after which an API node that
    /// heartbeats is taken for gone.
    pub missed: u32,
}

/// The peer a connection has identified itself as.
#[derive(Clone, Copy, Debug)]
struct Peer {
    node: NodeId,
    connection_id: u64,
    /// A data node (else an API node).
    data_node: bool,
}

/// What this thread knows of another data node.
struct DataNodeLink {
    node: NodeId,
    address: SocketAddr,
    /// This node has the lower id, so it dials (until the node is cut).
    dials: bool,
    /// The slot of this thread's dialed connection (connecting or live).
    slot: Option<usize>,
    /// When to dial next (when `dials` and there is no `slot`).
    next_dial: Instant,
    /// The highest incarnation seen in the node's frames; lower ones are
    /// refused.
    highest_incarnation: Option<u32>,
    /// The incarnation of the established link, while there is one.
    connected: Option<u32>,
    /// A failure to reach the node was logged; further ones are not, until
    /// it connects.
    quiet: bool,
}

struct Connection {
    stream: TcpStream,
    address: SocketAddr,
    assembler: FrameAssembler,
    /// A duplicate of the socket, handed to the registry on registration.
    write_half: Option<std::net::TcpStream>,
    /// Known after the first valid frame.
    peer: Option<Peer>,
    /// Whether the connection is in the list of connections to serve.
    queued: bool,
    /// The data node this thread dialed (`None`: accepted).
    dialed: Option<NodeId>,
    /// When the dial began, while the connect is still in progress.
    connecting: Option<Instant>,
    /// When the connection was accepted or dialed: one that has not been
    /// admitted within the identify timeout is closed.
    opened: Instant,
    /// The data-node link handshake's progress (`admit`).
    handshake: Handshake,
    /// An API node's signs of life.
    liveness: Liveness,
}

/// An API connection's signs of life, counted per heartbeat interval.
#[derive(Clone, Copy, Debug, Default)]
struct Liveness {
    /// The API node heartbeats (it sent API_HEARTBEAT_REQ): silence
    /// counts from then on. Clients that do not heartbeat (tools and
    /// tests speaking the protocol by hand) are never timed out.
    heartbeats: bool,
    /// Bytes arrived since the last check.
    heard: bool,
    /// Checks in a row that found nothing heard.
    silent: u32,
}

/// Why the receive thread closed a connection (logged, one line).
#[derive(Debug)]
enum CloseReason {
    EndOfStream,
    Io(std::io::Error),
    Stream(StreamError),
    Decode(WireError),
    NotApiRequest(&'static str),
    NotFromApi {
        signal: &'static str,
        from: BlockRef,
    },
    WrongReceiver {
        signal: &'static str,
        to: BlockRef,
    },
    NoSuchBlock {
        signal: &'static str,
        to: BlockRef,
    },
    OwnNodeId,
    /// An API node that heartbeats sent nothing for this many intervals.
    ApiSilent {
        intervals: u32,
        interval: Duration,
    },
    AlreadyConnected(NodeId),
    NodeIdOutOfRange(NodeId),
    NoWriteHalf,
    Shutdown,
    FromApiBlock {
        signal: &'static str,
        from: BlockRef,
    },
    OldIncarnation {
        node: NodeId,
        incarnation: u32,
        highest: u32,
    },
    WrongPeer {
        expected: NodeId,
        found: NodeId,
    },
    MustBeDialed(NodeId),
    ConnectFailed(std::io::Error),
    ConnectTimeout,
    FrameNotWritten(String),
    /// Not admitted within the identify timeout.
    Unidentified,
    /// An API node without a valid token for its id.
    NotAdmitted {
        node: NodeId,
        why: &'static str,
    },
    /// A data node's link proof does not match the cluster secret.
    BadLinkProof(NodeId),
    /// A link handshake signal out of its place (or another signal in it).
    HandshakeOutOfOrder {
        node: NodeId,
        signal: &'static str,
    },
    /// The operating system's random source failed (no challenge).
    NoRandomness(String),
    /// A data node taken for failed: never admitted again by this process.
    Cut(NodeId),
}

impl std::fmt::Display for CloseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CloseReason::EndOfStream => write!(f, "peer closed the connection"),
            CloseReason::Io(error) => write!(f, "socket error: {error}"),
            CloseReason::Stream(error) => write!(f, "bad frame: {error}"),
            CloseReason::Decode(error) => write!(f, "bad signal: {error}"),
            CloseReason::NotApiRequest(signal) => {
                write!(f, "{signal} is not a signal an API node may send")
            }
            CloseReason::NotFromApi { signal, from } => {
                write!(f, "{signal} claims to come from {from}, not an API block")
            }
            CloseReason::WrongReceiver { signal, to } => {
                write!(f, "{signal} addressed to {to}, which does not take it")
            }
            CloseReason::NoSuchBlock { signal, to } => {
                write!(f, "{signal} addressed to {to}, which does not exist")
            }
            CloseReason::OwnNodeId => write!(f, "peer claims this node's own id"),
            CloseReason::ApiSilent {
                intervals,
                interval,
            } => write!(
                f,
                "the API node sent nothing for {intervals} heartbeat intervals of {} ms: \
                 taken for gone (its transactions are aborted)",
                interval.as_millis()
            ),
            CloseReason::AlreadyConnected(node) => {
                write!(f, "node {node} is already connected")
            }
            CloseReason::NodeIdOutOfRange(node) => write!(f, "node id {node} is out of range"),
            CloseReason::NoWriteHalf => write!(f, "socket could not be duplicated"),
            CloseReason::Shutdown => write!(f, "data node shutting down"),
            CloseReason::FromApiBlock { signal, from } => {
                write!(f, "{signal} from a data node claims to come from {from}, an API block")
            }
            CloseReason::OldIncarnation {
                node,
                incarnation,
                highest,
            } => write!(
                f,
                "data node {node} connects with incarnation {incarnation}, older than {highest} seen before"
            ),
            CloseReason::WrongPeer { expected, found } => {
                write!(f, "dialed data node {expected}, but node {found} answered")
            }
            CloseReason::MustBeDialed(node) => write!(
                f,
                "data node {node} has the higher id: this node dials it, not the other way round"
            ),
            CloseReason::ConnectFailed(error) => write!(f, "cannot connect: {error}"),
            CloseReason::ConnectTimeout => {
                write!(f, "cannot connect: no answer in {CONNECT_TIMEOUT:?}")
            }
            CloseReason::FrameNotWritten(why) => {
                write!(f, "cannot write a handshake or refusal frame: {why}")
            }
            CloseReason::Unidentified => write!(
                f,
                "not admitted in time: a peer must say who it is, and prove it, at once"
            ),
            CloseReason::NotAdmitted { node, why } => write!(
                f,
                "API node {node} not admitted: {why} (refused with API_REGREF NotAdmitted)"
            ),
            CloseReason::BadLinkProof(node) => write!(
                f,
                "data node {node}'s link proof does not match this node's cluster secret \
                 (another cluster's node, or a process that is not a data node of this cluster)"
            ),
            CloseReason::HandshakeOutOfOrder { node, signal } => write!(
                f,
                "node {node} sent {signal} where the link handshake wants another signal"
            ),
            CloseReason::NoRandomness(why) => {
                write!(f, "no random bytes for a link challenge: {why}")
            }
            CloseReason::Cut(node) => write!(
                f,
                "data node {node} was taken for failed; this node admits no incarnation of \
                 it seen so far (a restarted one, in a later incarnation, is admitted)"
            ),
        }
    }
}

/// Checks a signal from an API node: an API request, from an API block,
/// to the kind of block that serves it (the signal table's receiver):
/// decoding checked that the bytes form a signal, this that a block is
/// never handed a signal it does not expect.
fn check_api_request(envelope: &Envelope) -> Result<(), CloseReason> {
    // The name only for an error: this runs for every API request.
    let name = || envelope.signal.name();
    if !codec::is_api_request(envelope.signal.number()) {
        return Err(CloseReason::NotApiRequest(name()));
    }
    if envelope.from.kind != BlockKind::Api {
        return Err(CloseReason::NotFromApi {
            signal: name(),
            from: envelope.from,
        });
    }
    if envelope.signal.api_receiver() != Some(envelope.to.kind) {
        return Err(CloseReason::WrongReceiver {
            signal: name(),
            to: envelope.to,
        });
    }
    Ok(())
}

/// The receive thread's state apart from its connections (so a connection
/// can be borrowed while signals are routed).
struct Dispatch {
    own_node: NodeId,
    outbox: Outbox,
    pool: &'static SectionPool,
    /// Decodes an API request that the pool could not take, to learn whom
    /// to refuse: one request at a time, each section freed at once.
    refusal_pool: &'static SectionPool,
    registry: Arc<ConnectionRegistry>,
    stats: Arc<ThreadStats>,
    shutdown: Arc<AtomicBool>,
    tc_instances: u16,
    incarnation: u32,
    links: Vec<DataNodeLink>,
    /// The address the node listens on, when it is one IPv4 address: its
    /// links to other data nodes leave from it too, so a firewall between
    /// hosts sees them as this node's.
    source_ip: Option<std::net::Ipv4Addr>,
    secret: ClusterSecret,
    /// Per API node id, the newest allocation (`ApiToken::allocation`)
    /// admitted: a token of an older one is refused.
    api_allocations: Vec<u64>,
    signs_of_life: Arc<kernel::liveness::SignsOfLife>,
    /// This thread runs the blocks its signals go to (see
    /// [`RecvLoop::beside_blocks`]).
    blocks_beside: bool,
}

impl Dispatch {
    fn link_mut(&mut self, node: NodeId) -> Option<&mut DataNodeLink> {
        self.links.iter_mut().find(|link| link.node == node)
    }

    /// Remembers the data node's incarnation and tells membership.
    fn data_node_connected(&mut self, node: NodeId, incarnation: u32) {
        let own_node = self.own_node;
        if let Some(link) = self.link_mut(node) {
            link.highest_incarnation = Some(
                link.highest_incarnation
                    .map_or(incarnation, |highest| highest.max(incarnation)),
            );
            link.quiet = false;
            link.connected = Some(incarnation);
        }
        eprintln!(
            "recv thread of node {own_node}: data node {node} connected (incarnation {incarnation})"
        );
        let membership = BlockRef::new(own_node, BlockKind::Membership, 0);
        let envelope = Envelope {
            from: membership,
            to: membership,
            signal: NodeConnectedRep { node, incarnation }.into(),
        };
        if self.outbox.stage(envelope).not_staged().is_some() {
            eprintln!(
                "recv thread of node {own_node}: no route for NodeConnectedRep to membership"
            );
        }
    }

    /// Checks one decoded signal from `peer` and stages it for its block's
    /// thread. Inlined into the receive loop, the hottest path of a key
    /// lookup on the receive thread: as a call of its own (it has a second
    /// caller, the admission of a connection's first signal) it cost about
    /// 1% of a data node's instructions per read (docs/benchmarks.md).
    #[inline(always)]
    fn route(&mut self, envelope: Envelope, peer: Peer) -> Result<(), CloseReason> {
        if peer.data_node {
            return self.route_from_data_node(envelope);
        }
        check_api_request(&envelope)?;
        // `Err` with a route means the block would run on this very thread,
        // which never runs blocks: treat it as absent, like a bad instance.
        match self.outbox.stage(envelope).not_staged() {
            None => Ok(()),
            Some(envelope) => Err(CloseReason::NoSuchBlock {
                signal: envelope.signal.name(),
                to: envelope.to,
            }),
        }
    }

    /// API_HEARTBEAT_REQ from an API node: answered straight to the send
    /// thread, from membership's address, without waking a block.
    fn answer_api_heartbeat(&mut self, request: &Envelope, count: u32) -> Result<(), CloseReason> {
        check_api_request(request)?;
        let answer = Envelope {
            from: BlockRef::new(self.own_node, BlockKind::Membership, 0),
            to: request.from,
            signal: signal::signals::ApiHeartbeatConf { count }.into(),
        };
        if self.outbox.stage(answer).not_staged().is_some() {
            eprintln!(
                "recv thread of node {}: no route for ApiHeartbeatConf to {}",
                self.own_node, request.from
            );
        }
        Ok(())
    }

    /// The next signal of an API node's frame did not fit in the section
    /// pool without its reserve (an overload): refuse it instead of
    /// waiting, so that this client cannot stall the node's other
    /// connections, its peers' links or its redo. The request is decoded
    /// from the small refusal pool to learn whom to answer, and dropped:
    /// a TCKEYREQ goes to its tc as TCKEYREQ_DROPPED_REP (the transaction
    /// aborts and the client gets one TCKEYREF, as for any refused
    /// operation); any other request is answered with its REF at once.
    fn refuse_for_sections(&mut self, decoder: &mut SignalDecoder<'_>) -> Result<(), CloseReason> {
        let envelope = match decoder.next(self.refusal_pool) {
            Ok(Some(envelope)) => envelope,
            Ok(None) => return Ok(()),
            Err(error) => return Err(CloseReason::Decode(error)),
        };
        check_api_request(&envelope)?;
        let error = ErrorCode::OutOfSignalMemory;
        let answer = match &envelope.signal {
            Signal::TcKeyReq(request) => Envelope {
                from: envelope.from,
                to: envelope.to,
                signal: TcKeyReqDroppedRep {
                    transaction_id: request.transaction_id,
                    client_op: request.client_op,
                    flags: request.flags,
                    error,
                }
                .into(),
            },
            other => match other.refusal_with(error) {
                Some(refusal) => Envelope {
                    from: envelope.to,
                    to: envelope.from,
                    signal: refusal,
                },
                None => return Ok(()),
            },
        };
        let name = answer.signal.name();
        match self.outbox.stage(answer).not_staged() {
            None => Ok(()),
            Some(answer) => Err(CloseReason::NoSuchBlock {
                signal: name,
                to: answer.to,
            }),
        }
    }

    /// Checks one signal from a data node: any wire signal (decoding took
    /// only those) from a data-node block to a block of this node that exists.
    fn route_from_data_node(&mut self, envelope: Envelope) -> Result<(), CloseReason> {
        let name = envelope.signal.name();
        if admit::is_handshake(&envelope.signal) {
            return Err(CloseReason::HandshakeOutOfOrder {
                node: envelope.from.node,
                signal: name,
            });
        }
        if envelope.from.kind == BlockKind::Api {
            return Err(CloseReason::FromApiBlock {
                signal: name,
                from: envelope.from,
            });
        }
        match self.outbox.stage(envelope).not_staged() {
            None => Ok(()),
            Some(envelope) => Err(CloseReason::NoSuchBlock {
                signal: name,
                to: envelope.to,
            }),
        }
    }

    /// How long until the next dial is due (`None`: no dial waits).
    fn next_dial_in(&self, now: Instant) -> Option<Duration> {
        self.links
            .iter()
            .filter(|link| link.dials && link.slot.is_none())
            .map(|link| link.next_dial.saturating_duration_since(now))
            .min()
    }

    /// The established link to data node `node` closed: cut it for good
    /// and tell membership (once).
    fn data_node_link_failed(&mut self, node: NodeId) {
        let incarnation = self
            .link_mut(node)
            .and_then(|link| link.connected.take())
            .unwrap_or(0);
        if !self.registry.cut(node) {
            // Membership cut it: it knows.
            return;
        }
        let membership = BlockRef::new(self.own_node, BlockKind::Membership, 0);
        let envelope = Envelope {
            from: membership,
            to: membership,
            signal: NodeLinkFailedRep { node, incarnation }.into(),
        };
        if self.outbox.stage(envelope).not_staged().is_some() {
            eprintln!(
                "recv thread of node {}: no route for NodeLinkFailedRep to membership",
                self.own_node
            );
        }
    }

    /// Tells every tc instance, dict and membership that API node `node` is gone.
    fn report_api_failure(&mut self, node: NodeId) {
        let from = BlockRef::new(self.own_node, BlockKind::Membership, 0);
        let targets = (0..self.tc_instances)
            .map(|instance| BlockRef::new(self.own_node, BlockKind::Tc, instance))
            .chain([
                BlockRef::new(self.own_node, BlockKind::Dict, 0),
                BlockRef::new(self.own_node, BlockKind::Membership, 0),
            ]);
        for to in targets {
            let envelope = Envelope {
                from,
                to,
                signal: ApiFailRep { node }.into(),
            };
            if let Some(envelope) = self.outbox.stage(envelope).not_staged() {
                eprintln!(
                    "recv thread of node {}: no route for ApiFailRep to {} (tc_instances does not match the router)",
                    self.own_node, envelope.to
                );
            }
        }
    }
}

/// Completes a dial once the socket reports: `Ok(true)` when connected
/// (the hello is written and the socket polled for reading only),
/// `Ok(false)` while still connecting.
fn finish_connect(
    connection: &mut Connection,
    slot: usize,
    registry: &mio::Registry,
    dispatch: &Dispatch,
) -> Result<bool, CloseReason> {
    match connection.stream.take_error() {
        Ok(None) => {}
        Ok(Some(error)) | Err(error) => return Err(CloseReason::ConnectFailed(error)),
    }
    match connection.stream.peer_addr() {
        Ok(_) => {}
        Err(error) if error.kind() == ErrorKind::NotConnected => return Ok(false),
        Err(error) => return Err(CloseReason::ConnectFailed(error)),
    }
    connection.connecting = None;
    registry
        .reregister(&mut connection.stream, token_of(slot), Interest::READABLE)
        .map_err(CloseReason::ConnectFailed)?;
    let Some(node) = connection.dialed else {
        return Ok(true);
    };
    dispatch.start_dial(&mut connection.stream, node, &mut connection.handshake)?;
    Ok(true)
}

/// Reads what the socket holds (up to [`READS_PER_ROUND`] reads) and routes
/// every complete frame. `Ok(true)` when the socket may hold more.
fn serve(connection: &mut Connection, dispatch: &mut Dispatch) -> Result<Served, CloseReason> {
    // A frame put aside for want of sections goes first, and no byte more
    // is read until it is through.
    if connection.assembler.held().is_some() && !route_frames(connection, dispatch)? {
        return Ok(Served::Held);
    }
    let mut reads = 0;
    while reads < READS_PER_ROUND {
        let result = connection.assembler.read_from(&mut connection.stream);
        ThreadStats::add(&dispatch.stats.syscalls, 1);
        match result {
            Ok(0) => return Err(CloseReason::EndOfStream),
            Ok(read) => {
                reads += 1;
                connection.liveness.heard = true;
                if let Some(peer) = connection.peer.filter(|peer| peer.data_node) {
                    dispatch.signs_of_life.mark(peer.node);
                }
                ThreadStats::add(&dispatch.stats.bytes, read as u64);
                if !route_frames(connection, dispatch)? {
                    return Ok(Served::Held);
                }
            }
            Err(error) if error.kind() == ErrorKind::WouldBlock => return Ok(Served::Drained),
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => return Err(CloseReason::Io(error)),
        }
    }
    Ok(Served::More)
}

/// How a connection's round ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Served {
    /// Everything readable was read and routed.
    Drained,
    /// The round's reads were used up: more may wait.
    More,
    /// A data node's frame waits for sections (`FrameAssembler::hold`).
    Held,
}

/// Routes the signals of every complete frame in the connection's buffer,
/// the held rest of one first. Returns false when a data node's signal
/// found no sections free: the rest of its frame is held (the receive
/// loop never waits for the block threads, which may be this thread).
fn route_frames(connection: &mut Connection, dispatch: &mut Dispatch) -> Result<bool, CloseReason> {
    loop {
        let held = connection.assembler.held();
        let resumed = held.is_some();
        let (header, body, signal_count) = match held {
            Some(held) => held,
            None => match connection.assembler.next_frame() {
                Ok(Some((header, body))) => (header, body, header.signal_count),
                Ok(None) => return Ok(true),
                Err(error) => return Err(CloseReason::Stream(error)),
            },
        };
        if !resumed {
            ThreadStats::add(&dispatch.stats.frames, 1);
        }
        let mut decoder = SignalDecoder::new(body, signal_count, header.sender, dispatch.own_node);
        let mut admitted_now = false;
        let peer = match connection.peer {
            Some(peer) => peer,
            None => {
                // The assembler keeps every later frame to this sender and
                // incarnation, so admitting on the first frames is enough.
                let admitted = dispatch.admit(
                    &header,
                    &mut decoder,
                    Admitting {
                        stream: &mut connection.stream,
                        write_half: &mut connection.write_half,
                        dialed: connection.dialed,
                        handshake: &mut connection.handshake,
                    },
                )?;
                let Admitted::Peer { peer, first } = admitted else {
                    continue;
                };
                connection.peer = Some(peer);
                admitted_now = true;
                if let Some(registration) = first {
                    dispatch.route(registration, peer)?;
                    ThreadStats::add(&dispatch.stats.signals, 1);
                }
                peer
            }
        };
        loop {
            let decoded = if peer.data_node {
                decoder.next(dispatch.pool)
            } else {
                decoder.next_leaving_reserve(dispatch.pool)
            };
            match decoded {
                Ok(Some(envelope)) => {
                    if let Signal::ApiHeartbeatReq(request) = &envelope.signal {
                        if !peer.data_node {
                            // Answered here, ahead of any queued work: a
                            // busy node still shows it lives.
                            connection.liveness.heartbeats = true;
                            dispatch.answer_api_heartbeat(&envelope, request.count)?;
                            continue;
                        }
                    }
                    dispatch.route(envelope, peer)?;
                    ThreadStats::add(&dispatch.stats.signals, 1);
                }
                Ok(None) => break,
                // An API request may not take the pool's reserve: refused.
                Err(WireError::OutOfSections) if !peer.data_node => {
                    dispatch.refuse_for_sections(&mut decoder)?
                }
                // From a data node, the decoder did not advance: the rest
                // of the frame is held and retried once block threads have
                // freed sections.
                Err(WireError::OutOfSections) => {
                    let (unread, remaining) = (decoder.unread_bytes(), decoder.remaining());
                    if resumed {
                        connection.assembler.shrink_held(unread, remaining);
                    } else {
                        connection.assembler.hold(header, unread, remaining);
                    }
                    return Ok(false);
                }
                Err(error) => return Err(CloseReason::Decode(error)),
            }
        }
        if resumed {
            connection.assembler.release();
        }
        if admitted_now {
            // Past admission, frames may be as large as any.
            connection.assembler.set_frame_limit(codec::MAX_FRAME_BYTES);
        }
    }
}

/// The connections of the thread and the poll that watches them.
struct Connections {
    poll: Poll,
    listener: TcpListener,
    slots: Vec<Option<Connection>>,
    free_slots: Vec<usize>,
    /// Connections to serve this round (readable, or cut short last round).
    ready: Vec<usize>,
    /// Connections whose frame waits for sections: served again next
    /// pass, after a pause when the thread has nothing else to do.
    held: Vec<usize>,
    /// `accept` failed; try again after a pause.
    accept_again: bool,
    /// See [`RecvSetup::identify_timeout`].
    identify_timeout: Duration,
}

/// The assembler of a connection not admitted yet: small frames only.
fn unadmitted_assembler() -> FrameAssembler {
    let mut assembler = FrameAssembler::new();
    assembler.set_frame_limit(admit::UNIDENTIFIED_FRAME_BYTES);
    assembler
}

fn token_of(slot: usize) -> Token {
    Token(slot + 1)
}

impl Connections {
    fn queue(&mut self, slot: usize) {
        if let Some(connection) = self.slots.get_mut(slot).and_then(Option::as_mut) {
            if !connection.queued {
                connection.queued = true;
                self.ready.push(slot);
            }
        }
    }

    fn accept_all(&mut self, own_node: NodeId) {
        self.accept_again = false;
        loop {
            let (stream, address) = match self.listener.accept() {
                Ok(accepted) => accepted,
                Err(error) if error.kind() == ErrorKind::WouldBlock => return,
                Err(error) if error.kind() == ErrorKind::Interrupted => continue,
                Err(error) => {
                    eprintln!("recv thread of node {own_node}: accept failed: {error}");
                    self.accept_again = true;
                    return;
                }
            };
            let Some(slot) = self.free_slots.pop() else {
                eprintln!(
                    "recv thread of node {own_node}: refused connection from {address}: {MAX_CONNECTIONS} connections already open"
                );
                let _ = stream.shutdown(Shutdown::Both);
                continue;
            };
            if let Err(error) = stream.set_nodelay(true) {
                eprintln!("recv thread of node {own_node}: TCP_NODELAY on {address}: {error}");
            }
            let stream: std::net::TcpStream = stream.into();
            let write_half = match stream.try_clone() {
                Ok(write_half) => write_half,
                Err(error) => {
                    eprintln!(
                        "recv thread of node {own_node}: closed connection from {address}: cannot duplicate socket: {error}"
                    );
                    self.free_slots.push(slot);
                    continue;
                }
            };
            let mut stream = TcpStream::from_std(stream);
            // Registration reports bytes that arrived before it, so nothing
            // sent right after connecting is missed (edge-triggered).
            if let Err(error) =
                self.poll
                    .registry()
                    .register(&mut stream, token_of(slot), Interest::READABLE)
            {
                eprintln!("recv thread of node {own_node}: cannot poll connection from {address}: {error}");
                let _ = stream.shutdown(Shutdown::Both);
                self.free_slots.push(slot);
                continue;
            }
            self.slots[slot] = Some(Connection {
                stream,
                address,
                assembler: unadmitted_assembler(),
                write_half: Some(write_half),
                peer: None,
                queued: false,
                dialed: None,
                connecting: None,
                opened: Instant::now(),
                handshake: Handshake::Idle,
                liveness: Liveness::default(),
            });
        }
    }

    /// Dials every data node this node dials that has no connection and is
    /// due, and gives up on connects that take too long.
    fn dial_due(&mut self, dispatch: &mut Dispatch) {
        let now = Instant::now();
        for index in 0..dispatch.links.len() {
            let link = &dispatch.links[index];
            if !link.dials {
                continue;
            }
            if let Some(slot) = link.slot {
                let started = self.slots[slot].as_ref().and_then(|c| c.connecting);
                if started.is_some_and(|started| now.duration_since(started) >= CONNECT_TIMEOUT) {
                    self.close(slot, CloseReason::ConnectTimeout, dispatch);
                }
                continue;
            }
            if now < link.next_dial {
                continue;
            }
            // A cut node is dialed now and then: a restarted one, in a
            // later incarnation, is admitted (docs/design/0018-node-restart.md).
            let retry = if dispatch.registry.is_cut(link.node) {
                CUT_REDIAL
            } else {
                DIAL_RETRY
            };
            dispatch.links[index].next_dial = now + retry;
            if let Err(reason) = self.dial(index, now, dispatch) {
                let link = &mut dispatch.links[index];
                if !link.quiet {
                    link.quiet = true;
                    eprintln!(
                        "recv thread of node {}: cannot dial data node {} at {}: {reason} (retrying every {DIAL_RETRY:?}, quietly)",
                        dispatch.own_node, link.node, link.address
                    );
                }
            }
        }
    }

    /// Starts a non-blocking connect to the data node of link `index`.
    fn dial(
        &mut self,
        index: usize,
        now: Instant,
        dispatch: &mut Dispatch,
    ) -> Result<(), CloseReason> {
        let link = &mut dispatch.links[index];
        let Some(&slot) = self.free_slots.last() else {
            return Err(CloseReason::ConnectFailed(std::io::Error::other(format!(
                "{MAX_CONNECTIONS} connections already open"
            ))));
        };
        let stream = match (dispatch.source_ip, link.address) {
            (Some(source), std::net::SocketAddr::V4(address)) => {
                stdx::net::connect_from(source, address, stdx::net::Connect::NonBlocking)
                    .map(TcpStream::from_std)
            }
            _ => TcpStream::connect(link.address),
        }
        .map_err(CloseReason::ConnectFailed)?;
        if let Err(error) = stream.set_nodelay(true) {
            eprintln!(
                "recv thread of node {}: TCP_NODELAY on the connection to data node {}: {error}",
                dispatch.own_node, link.node
            );
        }
        // mio streams are not `try_clone`; borrow the descriptor as a std
        // stream to duplicate it.
        let std_stream: std::net::TcpStream = stream.into();
        let write_half = std_stream.try_clone().map_err(CloseReason::ConnectFailed)?;
        let mut stream = TcpStream::from_std(std_stream);
        self.poll
            .registry()
            .register(
                &mut stream,
                token_of(slot),
                Interest::READABLE | Interest::WRITABLE,
            )
            .map_err(CloseReason::ConnectFailed)?;
        self.free_slots.pop();
        link.slot = Some(slot);
        self.slots[slot] = Some(Connection {
            stream,
            address: link.address,
            assembler: unadmitted_assembler(),
            write_half: Some(write_half),
            peer: None,
            queued: false,
            dialed: Some(link.node),
            connecting: Some(now),
            opened: now,
            handshake: Handshake::Idle,
            liveness: Liveness::default(),
        });
        Ok(())
    }

    /// Closes every connection that has not said who it is within the
    /// identify timeout (a dial still connecting has its own timeout).
    fn close_unidentified(&mut self, now: Instant, dispatch: &mut Dispatch) {
        for slot in 0..self.slots.len() {
            let expired = self.slots[slot].as_ref().is_some_and(|connection| {
                connection.peer.is_none()
                    && connection.connecting.is_none()
                    && now.saturating_duration_since(connection.opened) >= self.identify_timeout
            });
            if expired {
                self.close(slot, CloseReason::Unidentified, dispatch);
            }
        }
    }

    /// Once per heartbeat interval: closes the connection of every API
    /// node that heartbeats and sent nothing for `limits.missed`
    /// intervals in a row. `stalled`: this thread itself ran late (the
    /// process was paused or starved), so silence is not counted this
    /// time: what a stalled node did not read is not the peers' silence.
    fn check_api_liveness(
        &mut self,
        limits: ApiHeartbeatLimits,
        stalled: bool,
        dispatch: &mut Dispatch,
    ) {
        for slot in 0..self.slots.len() {
            let Some(connection) = self.slots[slot].as_mut() else {
                continue;
            };
            let api = connection.peer.is_some_and(|peer| !peer.data_node);
            let liveness = &mut connection.liveness;
            if !api || !liveness.heartbeats {
                continue;
            }
            if liveness.heard || stalled {
                liveness.heard = false;
                liveness.silent = 0;
                continue;
            }
            liveness.silent += 1;
            if liveness.silent >= limits.missed {
                let reason = CloseReason::ApiSilent {
                    intervals: liveness.silent,
                    interval: limits.interval,
                };
                self.close(slot, reason, dispatch);
            }
        }
    }

    /// Closes the connection in `slot`: the socket is shut down (not just
    /// dropped) because the send thread holds a duplicate of it, and the
    /// peer must see the close now.
    fn close(&mut self, slot: usize, reason: CloseReason, dispatch: &mut Dispatch) {
        let Some(mut connection) = self.slots.get_mut(slot).and_then(Option::take) else {
            return;
        };
        let _ = self.poll.registry().deregister(&mut connection.stream);
        let _ = connection.stream.shutdown(Shutdown::Both);
        self.free_slots.push(slot);
        let own_node = dispatch.own_node;
        let shutdown = matches!(reason, CloseReason::Shutdown);
        let mut log = !shutdown;
        if let Some(node) = connection.dialed {
            if let Some(link) = dispatch.link_mut(node) {
                if link.slot == Some(slot) {
                    link.slot = None;
                    link.next_dial = Instant::now() + DIAL_RETRY;
                }
                // A peer that is down fails every dial: say so once.
                if connection.peer.is_none() && log {
                    log = !link.quiet;
                    link.quiet = true;
                }
            }
        }
        if log {
            let peer_name = match (connection.peer, connection.dialed) {
                (Some(peer), _) if peer.data_node => format!(" (data node {})", peer.node),
                (Some(peer), _) => format!(" (node {})", peer.node),
                (None, Some(node)) => format!(" (dialing data node {node})"),
                (None, None) => String::new(),
            };
            let retry = match (connection.dialed, connection.peer) {
                (_, Some(peer)) if peer.data_node => {
                    "; the link is not made again in this incarnation".to_string()
                }
                (Some(_), Some(_)) => format!("; dialing again every {DIAL_RETRY:?}"),
                (Some(_), None) => format!(
                    "; dialing again every {DIAL_RETRY:?}, logging no further failure until it connects"
                ),
                (None, _) => String::new(),
            };
            eprintln!(
                "recv thread of node {own_node}: closed connection {} {}{peer_name}: {reason}{retry}",
                if connection.dialed.is_some() { "to" } else { "from" },
                connection.address
            );
        }
        if let Some(peer) = connection.peer {
            dispatch.registry.remove(peer.node, peer.connection_id);
            if shutdown {
                return;
            }
            if peer.data_node {
                dispatch.data_node_link_failed(peer.node);
            } else {
                dispatch.report_api_failure(peer.node);
            }
        }
    }
}

/// The links to the configured data nodes other than `own_node`, each due
/// to be dialed now (if this node dials it).
fn data_links(own_node: NodeId, data_nodes: Vec<DataNodePeer>) -> Vec<DataNodeLink> {
    let now = Instant::now();
    let mut links: Vec<DataNodeLink> = Vec::with_capacity(data_nodes.len());
    for peer in data_nodes {
        if peer.node == own_node || links.iter().any(|link| link.node == peer.node) {
            continue;
        }
        links.push(DataNodeLink {
            node: peer.node,
            address: peer.address,
            dials: own_node < peer.node,
            slot: None,
            next_dial: now,
            highest_incarnation: None,
            connected: None,
            quiet: false,
        });
    }
    links
}

/// The receive thread's work, one pass at a time: run by a thread of its
/// own ([`run_recv_thread`]) or by a block thread beside its blocks
/// ([`crate::NetworkOnThread`]).
pub struct RecvLoop {
    own_node: NodeId,
    dispatch: Dispatch,
    connections: Connections,
    events: Events,
    serving: Vec<usize>,
    /// The held connections being tried again (swapped with
    /// `Connections::held`, so that neither list allocates).
    held_retry: Vec<usize>,
    queues_full: bool,
    last_sweep: Instant,
    last_liveness_check: Instant,
    api_heartbeat: ApiHeartbeatLimits,
}

impl RecvLoop {
    /// Sets the loop up: the listener polled, the links to dial listed.
    ///
    /// Panics when the operating system refuses the poll or the listener.
    pub fn new(setup: RecvSetup) -> RecvLoop {
        let RecvSetup {
            own_node,
            listener,
            outbox,
            pool,
            connections: registry,
            stats,
            shutdown,
            tc_instances,
            incarnation,
            data_nodes,
            identify_timeout,
            secret,
            api_heartbeat,
            signs_of_life,
        } = setup;
        if let Err(error) = listener.set_nonblocking(true) {
            panic!(
                "recv thread of node {own_node}: cannot make the listener non-blocking: {error}"
            );
        }
        let poll = Poll::new()
            .unwrap_or_else(|error| panic!("recv thread of node {own_node}: no poll: {error}"));
        let source_ip = match listener.local_addr() {
            Ok(std::net::SocketAddr::V4(address)) if !address.ip().is_unspecified() => {
                Some(*address.ip())
            }
            _ => None,
        };
        let mut listener = TcpListener::from_std(listener);
        if let Err(error) =
            poll.registry()
                .register(&mut listener, LISTENER_TOKEN, Interest::READABLE)
        {
            panic!("recv thread of node {own_node}: cannot poll the listener: {error}");
        }
        let dispatch = Dispatch {
            own_node,
            outbox,
            pool,
            // Two buffers of every class: the sections of one request.
            refusal_pool: SectionPool::leak([2; 6]),
            registry,
            stats,
            shutdown,
            tc_instances,
            incarnation,
            links: data_links(own_node, data_nodes),
            source_ip,
            secret,
            api_allocations: vec![0; NODE_SLOTS],
            signs_of_life,
            blocks_beside: false,
        };
        let connections = Connections {
            poll,
            listener,
            slots: (0..MAX_CONNECTIONS).map(|_| None).collect(),
            // Reversed so slot 0 is used first (tidier logs, nothing more).
            free_slots: (0..MAX_CONNECTIONS).rev().collect(),
            ready: Vec::with_capacity(MAX_CONNECTIONS),
            held: Vec::with_capacity(MAX_CONNECTIONS),
            accept_again: false,
            identify_timeout,
        };
        RecvLoop {
            own_node,
            dispatch,
            connections,
            events: Events::with_capacity(1024),
            serving: Vec::with_capacity(MAX_CONNECTIONS),
            held_retry: Vec::with_capacity(MAX_CONNECTIONS),
            queues_full: false,
            last_sweep: Instant::now(),
            last_liveness_check: Instant::now(),
            api_heartbeat,
        }
    }

    /// This loop runs on a block thread, beside the blocks its signals go
    /// to: it must never wait for them (they run only once it returns).
    pub fn beside_blocks(&mut self) {
        self.dispatch.blocks_beside = true;
    }

    /// The poll of this loop's listener and sockets, for a thread that
    /// sleeps on several polls.
    pub fn poll_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.connections.poll.as_raw_fd()
    }

    /// Whether a connection is left to serve at once (it had more to read
    /// than one round takes), or signals wait for room in a block thread's
    /// queue: then the caller must not sleep.
    pub fn has_work(&self) -> bool {
        !self.connections.ready.is_empty() || self.queues_full
    }

    /// How long this loop may sleep when idle: its sweeps and dials are due
    /// then (and a late wake-up shows the thread was stalled).
    pub fn idle_timeout(&self) -> Duration {
        if !self.connections.held.is_empty() {
            return OUT_OF_SECTIONS_PAUSE;
        }
        if self.connections.accept_again {
            return ACCEPT_RETRY_PAUSE;
        }
        let idle = POLL_TIMEOUT.min(self.api_heartbeat.interval);
        self.dispatch
            .next_dial_in(Instant::now())
            .map_or(idle, |wait| wait.min(idle))
    }

    /// One pass: polls for at most `timeout` (zero: only what is ready),
    /// accepts, dials, reads every ready connection once round, sweeps,
    /// and publishes what it decoded. Returns whether it found anything
    /// to do.
    pub fn turn(&mut self, timeout: Duration) -> bool {
        let own_node = self.own_node;
        let dispatch = &mut self.dispatch;
        let connections = &mut self.connections;
        if self.queues_full {
            // Stop reading until the block threads catch up: TCP then
            // pushes back on the clients instead of our memory growing.
            if dispatch.outbox.flush() {
                if !dispatch.blocks_beside {
                    std::thread::sleep(QUEUES_FULL_PAUSE);
                }
                return true;
            }
            self.queues_full = false;
        }
        let timeout = if connections.ready.is_empty() {
            timeout
        } else {
            Duration::ZERO
        };
        if let Err(error) = connections.poll.poll(&mut self.events, Some(timeout)) {
            if error.kind() == ErrorKind::Interrupted {
                return true;
            }
            panic!("recv thread of node {own_node}: poll failed: {error}");
        }
        let mut found = !self.events.is_empty() || !connections.ready.is_empty();
        // Frames held for want of sections are tried again each pass, but
        // are no reason not to sleep: the pause of `idle_timeout` comes
        // between tries when nothing else is to be done.
        std::mem::swap(&mut connections.held, &mut self.held_retry);
        for slot in self.held_retry.drain(..) {
            connections.queue(slot);
        }
        if connections.accept_again {
            connections.accept_all(own_node);
        }
        for event in self.events.iter() {
            match event.token() {
                LISTENER_TOKEN => connections.accept_all(own_node),
                Token(token) => connections.queue(token - 1),
            }
        }
        connections.dial_due(dispatch);
        std::mem::swap(&mut self.serving, &mut connections.ready);
        for slot in self.serving.drain(..) {
            let Some(connection) = connections.slots[slot].as_mut() else {
                continue;
            };
            connection.queued = false;
            if connection.connecting.is_some() {
                let registry = connections.poll.registry();
                match finish_connect(connection, slot, registry, dispatch) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(reason) => {
                        connections.close(slot, reason, dispatch);
                        continue;
                    }
                }
            }
            let Some(connection) = connections.slots[slot].as_mut() else {
                continue;
            };
            match serve(connection, dispatch) {
                Ok(Served::More) => connections.queue(slot),
                Ok(Served::Drained) => {}
                Ok(Served::Held) => connections.held.push(slot),
                Err(reason) => connections.close(slot, reason, dispatch),
            }
        }
        let now = Instant::now();
        if now.saturating_duration_since(self.last_sweep) >= POLL_TIMEOUT {
            self.last_sweep = now;
            connections.close_unidentified(now, dispatch);
        }
        let since_check = now.saturating_duration_since(self.last_liveness_check);
        if since_check >= self.api_heartbeat.interval {
            self.last_liveness_check = now;
            let stalled = since_check >= self.api_heartbeat.interval * 2;
            connections.check_api_liveness(self.api_heartbeat, stalled, dispatch);
        }
        self.queues_full = dispatch.outbox.flush();
        found |= self.queues_full;
        if !dispatch.blocks_beside {
            // Beside the blocks, the thread's count is the block thread's.
            dispatch
                .stats
                .allocations
                .store(stdx::alloc_counter::thread_allocations(), Ordering::Relaxed);
        }
        found
    }

    /// Stopping: every connection closed, what was decoded published.
    pub fn finish(&mut self) {
        for slot in 0..MAX_CONNECTIONS {
            self.connections
                .close(slot, CloseReason::Shutdown, &mut self.dispatch);
        }
        self.dispatch.outbox.flush();
    }
}

/// Runs the receive thread until `shutdown` is set. Call on its own thread.
///
/// Panics when the operating system refuses the poll or the listener at
/// start; nothing a peer sends panics.
pub fn run_recv_thread(setup: RecvSetup) {
    let mut recv = RecvLoop::new(setup);
    while !recv.dispatch.shutdown.load(Ordering::Relaxed) {
        let timeout = if recv.has_work() {
            Duration::ZERO
        } else {
            ThreadStats::add(&recv.dispatch.stats.sleeps, 1);
            recv.idle_timeout()
        };
        recv.turn(timeout);
    }
    recv.finish();
}

#[cfg(test)]
mod tests {
    use super::*;
    use signal::signals::{GetTabInfoReq, ListTablesConf, ListTablesReq};
    use signal::Signal;

    #[test]
    fn list_tables_req_goes_to_dict_only() {
        let request: Signal = ListTablesReq { request_id: 1 }.into();
        assert!(codec::is_api_request(request.number()));
        assert_eq!(request.api_receiver(), Some(BlockKind::Dict));
        // As GET_TABINFO, its neighbour.
        let pool = SectionPool::leak([2; 6]);
        let get: Signal = GetTabInfoReq {
            request_id: 1,
            name: pool.copy_from(b"t").expect("room"),
        }
        .into();
        assert_eq!(get.api_receiver(), request.api_receiver());
        // The answer is not an API node's to send.
        let answer: Signal = ListTablesConf {
            request_id: 1,
            schema_version: 1,
            names: pool.copy_from(&[0, 0]).expect("room"),
        }
        .into();
        assert!(!codec::is_api_request(answer.number()));
        assert_eq!(answer.api_receiver(), None);
    }
}
