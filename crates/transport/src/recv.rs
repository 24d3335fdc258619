//! The data node's receive thread (NDB's recv thread): accepts connections,
//! reassembles frames from every socket, decodes their signals into
//! sections, and hands them to the block threads through the job-queue mesh.
//!
//! One `mio::Poll` watches the listener and every connection. The first
//! valid frame of a connection names its peer; from then on the connection
//! is registered in the [`ConnectionRegistry`] so the send thread can answer
//! on it. A peer that breaks a rule (garbage bytes, a bad checksum, a signal
//! an API node may not send, a block that does not exist, our own node id, a
//! node id already connected) loses its connection and nothing else: every
//! byte from the network is checked and no check panics.
//!
//! When a registered peer's connection closes for any reason, tc and dict
//! get `ApiFailRep` so they abort its transactions and forget its requests.
//! Signals decoded before the close were staged first, and job queues keep
//! order per sender-receiver pair, so the report arrives after them.

use crate::assembler::{FrameAssembler, StreamError};
use crate::registry::{ConnectionRegistry, RegisterError};
use kernel::mesh::Outbox;
use kernel::stats::ThreadStats;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use signal::codec::{self, SignalDecoder, WireError};
use signal::signals::ApiFailRep;
use signal::{BlockKind, BlockRef, Envelope, NodeId, SectionPool, Signal};
use std::io::ErrorKind;
use std::net::{Shutdown, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Connections served at once; further ones are accepted and closed at once,
/// so a misbehaving client cannot exhaust the node's file descriptors.
pub const MAX_CONNECTIONS: usize = 256;

/// How long the thread sleeps in poll when idle: the bound on how late it
/// notices `shutdown`.
const POLL_TIMEOUT: Duration = Duration::from_millis(100);

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

const LISTENER_TOKEN: Token = Token(0);

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
}

/// The peer a connection has identified itself as.
#[derive(Clone, Copy, Debug)]
struct Peer {
    node: NodeId,
    connection_id: u64,
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
    AlreadyConnected(NodeId),
    NodeIdOutOfRange(NodeId),
    NoWriteHalf,
    Shutdown,
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
            CloseReason::AlreadyConnected(node) => {
                write!(f, "node {node} is already connected")
            }
            CloseReason::NodeIdOutOfRange(node) => write!(f, "node id {node} is out of range"),
            CloseReason::NoWriteHalf => write!(f, "socket could not be duplicated"),
            CloseReason::Shutdown => write!(f, "data node shutting down"),
        }
    }
}

/// The receiving side of each API request: decoding checks that the bytes
/// form a signal, this checks that the signal goes where its kind is
/// handled, so a block is never handed a signal it does not expect.
fn api_receiver(signal: &Signal) -> Option<BlockKind> {
    match signal {
        Signal::ApiRegReq(_) => Some(BlockKind::Membership),
        Signal::TcKeyReq(_) | Signal::TcCommitReq(_) | Signal::TcRollbackReq(_) => {
            Some(BlockKind::Tc)
        }
        Signal::CreateTabReq(_) | Signal::DropTabReq(_) | Signal::GetTabInfoReq(_) => {
            Some(BlockKind::Dict)
        }
        _ => None,
    }
}

/// The receive thread's state apart from its connections (so a connection
/// can be borrowed while signals are routed).
struct Dispatch {
    own_node: NodeId,
    outbox: Outbox,
    pool: &'static SectionPool,
    registry: Arc<ConnectionRegistry>,
    stats: Arc<ThreadStats>,
    shutdown: Arc<AtomicBool>,
    tc_instances: u16,
}

impl Dispatch {
    /// Names the connection's peer from its first valid frame and registers
    /// the connection for the send thread.
    fn identify(
        &mut self,
        sender: NodeId,
        write_half: &mut Option<std::net::TcpStream>,
    ) -> Result<Peer, CloseReason> {
        if sender == self.own_node {
            return Err(CloseReason::OwnNodeId);
        }
        let stream = write_half.take().ok_or(CloseReason::NoWriteHalf)?;
        match self.registry.register(sender, stream) {
            Ok(connection_id) => Ok(Peer {
                node: sender,
                connection_id,
            }),
            Err(RegisterError::AlreadyConnected) => Err(CloseReason::AlreadyConnected(sender)),
            Err(RegisterError::NodeIdOutOfRange) => Err(CloseReason::NodeIdOutOfRange(sender)),
        }
    }

    /// Checks one decoded signal and stages it for its block's thread.
    fn route(&mut self, envelope: Envelope) -> Result<(), CloseReason> {
        let name = envelope.signal.name();
        if !codec::is_api_request(envelope.signal.number()) {
            return Err(CloseReason::NotApiRequest(name));
        }
        if envelope.from.kind != BlockKind::Api {
            return Err(CloseReason::NotFromApi {
                signal: name,
                from: envelope.from,
            });
        }
        if api_receiver(&envelope.signal) != Some(envelope.to.kind) {
            return Err(CloseReason::WrongReceiver {
                signal: name,
                to: envelope.to,
            });
        }
        // `Err` with a route means the block would run on this very thread,
        // which never runs blocks: treat it as absent, like a bad instance.
        match self.outbox.stage(envelope).not_staged() {
            None => Ok(()),
            Some(envelope) => Err(CloseReason::NoSuchBlock {
                signal: name,
                to: envelope.to,
            }),
        }
    }

    /// Publishes what is staged and waits for block threads to free sections.
    fn wait_for_sections(&mut self) -> Result<(), CloseReason> {
        self.outbox.flush();
        if self.shutdown.load(Ordering::Relaxed) {
            return Err(CloseReason::Shutdown);
        }
        std::thread::sleep(OUT_OF_SECTIONS_PAUSE);
        Ok(())
    }

    /// Tells every tc instance and dict that API node `node` is gone.
    fn report_api_failure(&mut self, node: NodeId) {
        let from = BlockRef::new(self.own_node, BlockKind::Membership, 0);
        let targets = (0..self.tc_instances)
            .map(|instance| BlockRef::new(self.own_node, BlockKind::Tc, instance))
            .chain(std::iter::once(BlockRef::new(
                self.own_node,
                BlockKind::Dict,
                0,
            )));
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

/// Reads what the socket holds (up to [`READS_PER_ROUND`] reads) and routes
/// every complete frame. `Ok(true)` when the socket may hold more.
fn serve(connection: &mut Connection, dispatch: &mut Dispatch) -> Result<bool, CloseReason> {
    let mut reads = 0;
    while reads < READS_PER_ROUND {
        let result = connection.assembler.read_from(&mut connection.stream);
        ThreadStats::add(&dispatch.stats.syscalls, 1);
        match result {
            Ok(0) => return Err(CloseReason::EndOfStream),
            Ok(read) => {
                reads += 1;
                ThreadStats::add(&dispatch.stats.bytes, read as u64);
                route_frames(connection, dispatch)?;
            }
            Err(error) if error.kind() == ErrorKind::WouldBlock => return Ok(false),
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => return Err(CloseReason::Io(error)),
        }
    }
    Ok(true)
}

/// Routes the signals of every complete frame in the connection's buffer.
fn route_frames(connection: &mut Connection, dispatch: &mut Dispatch) -> Result<(), CloseReason> {
    loop {
        let (header, body) = match connection.assembler.next_frame() {
            Ok(Some(frame)) => frame,
            Ok(None) => return Ok(()),
            Err(error) => return Err(CloseReason::Stream(error)),
        };
        if connection.peer.is_none() {
            // The assembler keeps every later frame to this sender and
            // incarnation, so identifying on the first frame is enough.
            connection.peer = Some(dispatch.identify(header.sender, &mut connection.write_half)?);
        }
        ThreadStats::add(&dispatch.stats.frames, 1);
        let mut decoder =
            SignalDecoder::new(body, header.signal_count, header.sender, dispatch.own_node);
        loop {
            match decoder.next(dispatch.pool) {
                Ok(Some(envelope)) => {
                    dispatch.route(envelope)?;
                    ThreadStats::add(&dispatch.stats.signals, 1);
                }
                Ok(None) => break,
                // The decoder did not advance: the same signal is retried.
                Err(WireError::OutOfSections) => dispatch.wait_for_sections()?,
                Err(error) => return Err(CloseReason::Decode(error)),
            }
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
    /// `accept` failed; try again after a pause.
    accept_again: bool,
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
                assembler: FrameAssembler::new(),
                write_half: Some(write_half),
                peer: None,
                queued: false,
            });
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
        let peer_name = match connection.peer {
            Some(peer) => format!(" (node {})", peer.node),
            None => String::new(),
        };
        if !matches!(reason, CloseReason::Shutdown) {
            eprintln!(
                "recv thread of node {own_node}: closed connection from {}{peer_name}: {reason}",
                connection.address
            );
        }
        if let Some(peer) = connection.peer {
            dispatch.registry.remove(peer.node, peer.connection_id);
            if !matches!(reason, CloseReason::Shutdown) {
                dispatch.report_api_failure(peer.node);
            }
        }
    }
}

/// Runs the receive thread until `shutdown` is set. Call on its own thread.
///
/// Panics only when the operating system refuses the poll itself at start
/// (the node cannot serve without it); nothing a peer sends panics.
pub fn run_recv_thread(setup: RecvSetup) {
    let RecvSetup {
        own_node,
        listener,
        outbox,
        pool,
        connections: registry,
        stats,
        shutdown,
        tc_instances,
    } = setup;
    if let Err(error) = listener.set_nonblocking(true) {
        panic!("recv thread of node {own_node}: cannot make the listener non-blocking: {error}");
    }
    let poll = Poll::new()
        .unwrap_or_else(|error| panic!("recv thread of node {own_node}: no poll: {error}"));
    let mut listener = TcpListener::from_std(listener);
    if let Err(error) = poll
        .registry()
        .register(&mut listener, LISTENER_TOKEN, Interest::READABLE)
    {
        panic!("recv thread of node {own_node}: cannot poll the listener: {error}");
    }
    let mut dispatch = Dispatch {
        own_node,
        outbox,
        pool,
        registry,
        stats,
        shutdown,
        tc_instances,
    };
    let mut connections = Connections {
        poll,
        listener,
        slots: (0..MAX_CONNECTIONS).map(|_| None).collect(),
        // Reversed so slot 0 is used first (tidier logs, nothing more).
        free_slots: (0..MAX_CONNECTIONS).rev().collect(),
        ready: Vec::with_capacity(MAX_CONNECTIONS),
        accept_again: false,
    };
    let mut events = Events::with_capacity(1024);
    let mut serving: Vec<usize> = Vec::with_capacity(MAX_CONNECTIONS);
    let mut queues_full = false;
    while !dispatch.shutdown.load(Ordering::Relaxed) {
        if queues_full {
            // Stop reading until the block threads catch up: TCP then
            // pushes back on the clients instead of our memory growing.
            if dispatch.outbox.flush() {
                std::thread::sleep(QUEUES_FULL_PAUSE);
                continue;
            }
            queues_full = false;
        }
        let timeout = if !connections.ready.is_empty() {
            Duration::ZERO
        } else if connections.accept_again {
            ACCEPT_RETRY_PAUSE
        } else {
            ThreadStats::add(&dispatch.stats.sleeps, 1);
            POLL_TIMEOUT
        };
        if let Err(error) = connections.poll.poll(&mut events, Some(timeout)) {
            if error.kind() == ErrorKind::Interrupted {
                continue;
            }
            panic!("recv thread of node {own_node}: poll failed: {error}");
        }
        if connections.accept_again {
            connections.accept_all(own_node);
        }
        for event in events.iter() {
            match event.token() {
                LISTENER_TOKEN => connections.accept_all(own_node),
                Token(token) => connections.queue(token - 1),
            }
        }
        std::mem::swap(&mut serving, &mut connections.ready);
        for slot in serving.drain(..) {
            let Some(connection) = connections.slots[slot].as_mut() else {
                continue;
            };
            connection.queued = false;
            match serve(connection, &mut dispatch) {
                Ok(true) => connections.queue(slot),
                Ok(false) => {}
                Err(reason) => connections.close(slot, reason, &mut dispatch),
            }
        }
        queues_full = dispatch.outbox.flush();
        dispatch
            .stats
            .allocations
            .store(stdx::alloc_counter::thread_allocations(), Ordering::Relaxed);
    }
    for slot in 0..MAX_CONNECTIONS {
        connections.close(slot, CloseReason::Shutdown, &mut dispatch);
    }
    dispatch.outbox.flush();
}
