//! The data node's send thread (NDB's send thread): takes the signals block
//! threads addressed to other nodes off its inbox, packs them into frames
//! per connection, and writes them with non-blocking writes.
//!
//! Batching is the point: a drained batch becomes at most one frame per
//! connection (more only past [`FRAME_TARGET_BYTES`]), and each connection
//! gets one write per batch, so the per-signal cost is an encode into a
//! buffer reused for the life of the connection, not a syscall and never a
//! heap allocation.
//!
//! The thread sleeps in `mio::Poll`. Its inbox waker is bound to a
//! `mio::Waker`, so a block thread publishing work wakes the poll; a socket
//! that refused bytes (the peer reads slowly) is registered for WRITABLE and
//! wakes it too. The usual protocol (announce sleep, look at the queues once
//! more, then block) means no wake-up is lost.
//!
//! Connections to API nodes and to other data nodes are the same to this
//! thread: a signal goes to the connection registered for its receiver's
//! node, or is dropped when there is none.
//!
//! A connection whose write fails, or whose peer stops reading for so long
//! that [`MAX_PENDING_BYTES`] pile up, is shut down: the receive thread sees
//! the close and handles it exactly as a disconnect.

use crate::registry::{node_slot, ConnectionRegistry, RegisteredConnection, NODE_SLOTS};
use kernel::mesh::Inbox;
use kernel::stats::ThreadStats;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use signal::codec;
use signal::{Envelope, NodeId};
use std::io::{ErrorKind, Write};
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A frame is closed once it holds this many bytes: large enough that a
/// busy connection pays one header and one CRC pass per many signals, small
/// enough that the first signals of a batch do not wait behind the last.
pub const FRAME_TARGET_BYTES: usize = 64 * 1024;

/// Output buffer reserved per connection when it appears.
pub const BUFFER_RESERVED_BYTES: usize = 256 * 1024;

/// Unwritten bytes one connection may hold before the peer is judged not
/// to read at all and its connection is closed (a bad peer must not make
/// the node grow without bound).
pub const MAX_PENDING_BYTES: usize = 16 << 20;

/// Envelopes taken from each inbox queue per batch.
const DRAIN_BATCH: usize = 256;

/// How long the thread sleeps when idle: the bound on how late it notices
/// `shutdown`.
const POLL_TIMEOUT: Duration = Duration::from_millis(100);

/// How long a stopping send thread keeps writing what was queued before
/// the stop.
const FINAL_FLUSH: Duration = Duration::from_millis(500);

/// Connections use the token of their node slot (below [`NODE_SLOTS`]).
const WAKER_TOKEN: Token = Token(usize::MAX);

// A frame closed at the target size plus one more signal (at most two
// sections of the largest class and a small head) stays a legal frame.
const _: () = assert!(
    FRAME_TARGET_BYTES + 2 * signal::section::MAX_SECTION_BYTES + 4096 <= codec::MAX_FRAME_BYTES,
    "FRAME_TARGET_BYTES leaves no room for the largest signal under MAX_FRAME_BYTES"
);

/// Everything the send thread needs, built by the data node.
pub struct SendSetup {
    /// This data node (the sender of every frame).
    pub own_node: NodeId,
    /// This start of the node (in every frame header).
    pub incarnation: u32,
    /// Signals for other nodes.
    pub inbox: Inbox,
    /// Shared with the receive thread.
    pub connections: Arc<ConnectionRegistry>,
    /// This thread's counters.
    pub stats: Arc<ThreadStats>,
    /// Set to stop the thread.
    pub shutdown: Arc<AtomicBool>,
}

/// The output side of one connection.
struct PeerOutput {
    node: NodeId,
    connection_id: u64,
    /// A duplicate of the registry's socket: mio needs to own what it polls.
    stream: TcpStream,
    /// Frames; bytes before `written` are already on the socket.
    buffer: Vec<u8>,
    written: usize,
    /// Start of the frame being filled, if one is open.
    frame_start: Option<usize>,
    frame_signals: u16,
    /// Sequence number of the next frame (from the registry's
    /// `first_sequence`: 0, or 1 after a data-node hello).
    next_sequence: u64,
    /// In the list of connections to close frames of and write.
    dirty: bool,
    /// Registered for WRITABLE after a write would have blocked.
    waiting_writable: bool,
    /// Shut down after a write failure; envelopes for it are dropped until
    /// the registry replaces the connection.
    failed: bool,
}

impl PeerOutput {
    /// Closes the open frame, if any. Returns whether one was closed.
    fn finish_frame(&mut self, own_node: NodeId, incarnation: u32) -> bool {
        let Some(start) = self.frame_start.take() else {
            return false;
        };
        codec::finish_frame(
            &mut self.buffer,
            start,
            own_node,
            incarnation,
            self.next_sequence,
            self.frame_signals,
        );
        self.next_sequence += 1;
        self.frame_signals = 0;
        true
    }

    /// Moves unwritten bytes to the front once the written prefix is large,
    /// so the buffer stops growing while a slow peer catches up. Only
    /// between frames, because an open frame's start offset would move.
    fn compact(&mut self) {
        if self.frame_start.is_some() || self.written == 0 {
            return;
        }
        if self.written == self.buffer.len() {
            self.buffer.clear();
            self.written = 0;
        } else if self.written >= self.buffer.capacity() / 2 {
            self.buffer.drain(..self.written);
            self.written = 0;
        }
    }

    fn pending_bytes(&self) -> usize {
        self.buffer.len() - self.written
    }
}

struct Sender {
    own_node: NodeId,
    incarnation: u32,
    registry: Arc<ConnectionRegistry>,
    /// The registry generation `peers` reflects.
    generation: u64,
    snapshot: Vec<Option<Arc<RegisteredConnection>>>,
    /// Indexed by node slot.
    peers: Vec<Option<PeerOutput>>,
    /// Slots with an open frame or unwritten bytes this batch.
    dirty: Vec<usize>,
    /// Peers registered for WRITABLE.
    waiting_writable: usize,
    poll_registry: mio::Registry,
    stats: Arc<ThreadStats>,
}

impl Sender {
    /// Re-reads the registry: keeps the output of connections that are
    /// still there, drops those that are gone, and starts fresh (the
    /// connection's first sequence, empty buffer) for new ones.
    fn refresh(&mut self) {
        self.generation = self.registry.snapshot(&mut self.snapshot);
        for slot in 1..NODE_SLOTS {
            let current = self.snapshot.get(slot).and_then(Option::as_ref);
            let unchanged = match (&self.peers[slot], current) {
                (Some(peer), Some(entry)) => peer.connection_id == entry.connection_id,
                (None, None) => true,
                _ => false,
            };
            if unchanged {
                continue;
            }
            if let Some(mut old) = self.peers[slot].take() {
                if old.waiting_writable {
                    let _ = self.poll_registry.deregister(&mut old.stream);
                    self.waiting_writable -= 1;
                }
            }
            let Some(entry) = current else {
                continue;
            };
            match entry.stream.try_clone() {
                Ok(stream) => {
                    self.peers[slot] = Some(PeerOutput {
                        node: entry.node,
                        connection_id: entry.connection_id,
                        stream: TcpStream::from_std(stream),
                        buffer: Vec::with_capacity(BUFFER_RESERVED_BYTES),
                        written: 0,
                        frame_start: None,
                        frame_signals: 0,
                        next_sequence: entry.first_sequence,
                        dirty: false,
                        waiting_writable: false,
                        failed: false,
                    });
                }
                Err(error) => {
                    // Without a socket of our own we cannot write; shutting
                    // the registry's one makes the receive thread close it.
                    eprintln!(
                        "send thread of node {}: cannot duplicate the socket of node {}: {error}",
                        self.own_node, entry.node
                    );
                    let _ = entry.stream.shutdown(Shutdown::Both);
                }
            }
        }
        // Hold no references between refreshes: the registry's entry is
        // the one that lives while the connection does.
        self.snapshot.clear();
    }

    /// Appends one envelope to its connection's open frame, or drops it
    /// (returning its sections to their pool) when the node is not connected.
    fn append(&mut self, envelope: Envelope) {
        // Checked per envelope, not per batch: a reply may be drained after
        // the registration of its connection that an earlier check missed.
        if self.registry.generation() != self.generation {
            self.refresh();
        }
        let Some(slot) = node_slot(envelope.to.node) else {
            return;
        };
        let Some(peer) = self.peers[slot].as_mut() else {
            return;
        };
        if peer.failed {
            return;
        }
        if let Some(start) = peer.frame_start {
            let full =
                peer.buffer.len() - start >= FRAME_TARGET_BYTES || peer.frame_signals == u16::MAX;
            if full && peer.finish_frame(self.own_node, self.incarnation) {
                ThreadStats::add(&self.stats.frames, 1);
            }
        }
        if peer.frame_start.is_none() {
            if peer.pending_bytes() > MAX_PENDING_BYTES {
                let reason = format!(
                    "node {} is not reading: {} bytes unsent",
                    peer.node,
                    peer.pending_bytes()
                );
                self.fail(slot, &reason);
                return;
            }
            peer.compact();
            peer.frame_start = Some(codec::begin_frame(&mut peer.buffer));
        }
        if let Err(error) = codec::encode_signal(&mut peer.buffer, &envelope) {
            panic!(
                "send thread of node {}: cannot send {} from {} to {}: {error} (a node-internal signal was addressed to another node)",
                self.own_node,
                envelope.signal.name(),
                envelope.from,
                envelope.to
            );
        }
        peer.frame_signals += 1;
        ThreadStats::add(&self.stats.signals, 1);
        if !peer.dirty {
            peer.dirty = true;
            self.dirty.push(slot);
        }
    }

    /// Closes the open frame of every connection that got signals this batch
    /// and writes what each holds (unless it waits for WRITABLE).
    fn flush_dirty(&mut self) {
        for index in 0..self.dirty.len() {
            let slot = self.dirty[index];
            let Some(peer) = self.peers[slot].as_mut() else {
                continue;
            };
            // A connection replaced mid-batch leaves its slot here; the new
            // one is not dirty unless it was appended to (and then listed again).
            if !peer.dirty {
                continue;
            }
            peer.dirty = false;
            if peer.finish_frame(self.own_node, self.incarnation) {
                ThreadStats::add(&self.stats.frames, 1);
            }
            if !peer.waiting_writable {
                self.write_pending(slot);
            }
        }
        self.dirty.clear();
    }

    /// Writes the connection's finished frames until done or the socket
    /// would block (then waits for WRITABLE).
    fn write_pending(&mut self, slot: usize) {
        let Some(peer) = self.peers[slot].as_mut() else {
            return;
        };
        if peer.failed {
            return;
        }
        let complete = peer.frame_start.unwrap_or(peer.buffer.len());
        while peer.written < complete {
            let result = peer.stream.write(&peer.buffer[peer.written..complete]);
            ThreadStats::add(&self.stats.syscalls, 1);
            match result {
                Ok(0) => {
                    self.fail(slot, "socket accepts no more bytes");
                    return;
                }
                Ok(count) => {
                    peer.written += count;
                    ThreadStats::add(&self.stats.bytes, count as u64);
                }
                Err(error) if error.kind() == ErrorKind::WouldBlock => {
                    if !peer.waiting_writable {
                        let registered = self.poll_registry.register(
                            &mut peer.stream,
                            Token(slot),
                            Interest::WRITABLE,
                        );
                        if let Err(error) = registered {
                            let reason = format!("cannot poll for writability: {error}");
                            self.fail(slot, &reason);
                            return;
                        }
                        peer.waiting_writable = true;
                        self.waiting_writable += 1;
                    }
                    return;
                }
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) => {
                    let reason = format!("write failed: {error}");
                    self.fail(slot, &reason);
                    return;
                }
            }
        }
        peer.compact();
        if peer.waiting_writable {
            let _ = self.poll_registry.deregister(&mut peer.stream);
            peer.waiting_writable = false;
            self.waiting_writable -= 1;
        }
    }

    /// Drops the connection's output and shuts its socket down, so the
    /// receive thread sees the close and reports the node's failure.
    fn fail(&mut self, slot: usize, reason: &str) {
        let Some(peer) = self.peers[slot].as_mut() else {
            return;
        };
        eprintln!(
            "send thread of node {}: dropping connection to node {}: {reason}",
            self.own_node, peer.node
        );
        if peer.waiting_writable {
            let _ = self.poll_registry.deregister(&mut peer.stream);
            peer.waiting_writable = false;
            self.waiting_writable -= 1;
        }
        let _ = peer.stream.shutdown(Shutdown::Both);
        peer.failed = true;
        peer.buffer = Vec::new();
        peer.written = 0;
        peer.frame_start = None;
        peer.frame_signals = 0;
    }

    fn handle_events(&mut self, events: &Events) {
        for event in events.iter() {
            let Token(slot) = event.token();
            let waiting = self
                .peers
                .get(slot)
                .and_then(Option::as_ref)
                .is_some_and(|peer| peer.waiting_writable);
            if waiting {
                self.write_pending(slot);
            }
        }
    }
}

/// The send thread's work, one pass at a time: run by a thread of its own
/// ([`run_send_thread`]) or by a block thread beside its blocks
/// ([`crate::NetworkOnThread`]).
pub struct SendLoop {
    own_node: NodeId,
    inbox: Inbox,
    poll: Poll,
    events: Events,
    sender: Sender,
    shutdown: Arc<AtomicBool>,
    /// Run by a block thread (see [`SendLoop::beside_blocks`]).
    beside_blocks: bool,
}

impl SendLoop {
    /// Sets the loop up; the inbox's waker is left for the caller to bind
    /// ([`SendLoop::bind_own_waker`], or a block thread's wake).
    ///
    /// Panics when the operating system refuses the poll.
    pub fn new(setup: SendSetup) -> SendLoop {
        let SendSetup {
            own_node,
            incarnation,
            inbox,
            connections: registry,
            stats,
            shutdown,
        } = setup;
        let poll = Poll::new()
            .unwrap_or_else(|error| panic!("send thread of node {own_node}: no poll: {error}"));
        let poll_registry = poll.registry().try_clone().unwrap_or_else(|error| {
            panic!("send thread of node {own_node}: no poll registry: {error}")
        });
        let sender = Sender {
            own_node,
            incarnation,
            generation: registry.generation().wrapping_sub(1),
            registry,
            snapshot: Vec::with_capacity(NODE_SLOTS),
            peers: (0..NODE_SLOTS).map(|_| None).collect(),
            dirty: Vec::with_capacity(NODE_SLOTS),
            waiting_writable: 0,
            poll_registry,
            stats,
        };
        SendLoop {
            own_node,
            inbox,
            poll,
            events: Events::with_capacity(NODE_SLOTS + 1),
            sender,
            shutdown,
            beside_blocks: false,
        }
    }

    /// This loop runs on a block thread: the thread's counters are the
    /// block thread's to report.
    pub fn beside_blocks(&mut self) {
        self.beside_blocks = true;
    }

    /// A thread of its own: a producer's wake interrupts this loop's poll.
    fn bind_own_waker(&mut self) {
        let own_node = self.own_node;
        let waker = mio::Waker::new(self.poll.registry(), WAKER_TOKEN).unwrap_or_else(|error| {
            panic!("send thread of node {own_node}: no poll waker: {error}")
        });
        self.inbox.waker.bind_hook(Box::new(move || {
            // Fails only if the eventfd is full, and then the poll is awake anyway.
            let _ = waker.wake();
        }));
    }

    /// The inbox's waker (bound by whoever sleeps for this loop).
    pub fn waker(&self) -> &Arc<kernel::waker::Waker> {
        &self.inbox.waker
    }

    /// The poll of this loop's sockets (ready when one that refused bytes
    /// becomes writable), for a thread that sleeps on several polls.
    pub fn poll_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.poll.as_raw_fd()
    }

    /// Takes a batch off the inbox, writes it, and writes to sockets that
    /// became writable; returns whether the inbox had anything.
    pub fn work(&mut self) -> bool {
        let sender = &mut self.sender;
        if sender.registry.generation() != sender.generation {
            sender.refresh();
        }
        let drained = self
            .inbox
            .drain(DRAIN_BATCH, |envelope| sender.append(envelope));
        sender.flush_dirty();
        if !self.beside_blocks {
            // Beside the blocks, the thread's count is the block thread's.
            sender
                .stats
                .allocations
                .store(stdx::alloc_counter::thread_allocations(), Ordering::Relaxed);
        }
        // Look for writable sockets without sleeping, and only when some
        // connection waits for one.
        if sender.waiting_writable > 0 {
            poll_once(
                &mut self.poll,
                &mut self.events,
                Duration::ZERO,
                self.own_node,
            );
            sender.handle_events(&self.events);
        }
        drained > 0
    }

    /// The first half of the sleep protocol (`kernel::waker`): false when
    /// work arrived meanwhile (then the caller must not sleep).
    pub fn prepare_sleep(&mut self) -> bool {
        self.inbox.waker.prepare_sleep();
        if self.inbox.has_pending() {
            self.inbox.waker.cancel_sleep();
            return false;
        }
        true
    }

    /// The caller woke (or never slept after [`SendLoop::prepare_sleep`]).
    pub fn cancel_sleep(&mut self) {
        self.inbox.waker.cancel_sleep();
    }

    /// Stopping: what the blocks sent before the stop still goes out (a
    /// graceful stop waits for the tcs to answer every transaction, and
    /// those answers may still be queued here), for at most FINAL_FLUSH.
    pub fn finish(&mut self) {
        let deadline = std::time::Instant::now() + FINAL_FLUSH;
        loop {
            let sender = &mut self.sender;
            let drained = self
                .inbox
                .drain(DRAIN_BATCH, |envelope| sender.append(envelope));
            sender.flush_dirty();
            if drained == 0 && sender.waiting_writable == 0 {
                break;
            }
            if std::time::Instant::now() >= deadline {
                break;
            }
            if sender.waiting_writable > 0 {
                poll_once(
                    &mut self.poll,
                    &mut self.events,
                    Duration::from_millis(5),
                    self.own_node,
                );
                sender.handle_events(&self.events);
            }
        }
    }
}

/// Runs the send thread until `shutdown` is set. Call on its own thread.
///
/// Panics when the operating system refuses the poll at start, and when a
/// block addressed a node-internal signal to another node (a bug, named in
/// the message); nothing a peer does panics.
pub fn run_send_thread(setup: SendSetup) {
    let mut send = SendLoop::new(setup);
    send.bind_own_waker();
    while !send.shutdown.load(Ordering::Relaxed) {
        if send.work() || !send.prepare_sleep() {
            continue;
        }
        ThreadStats::add(&send.sender.stats.sleeps, 1);
        poll_once(
            &mut send.poll,
            &mut send.events,
            POLL_TIMEOUT,
            send.own_node,
        );
        send.cancel_sleep();
        send.sender.handle_events(&send.events);
    }
    send.finish();
}

fn poll_once(poll: &mut Poll, events: &mut Events, timeout: Duration, own_node: NodeId) {
    if let Err(error) = poll.poll(events, Some(timeout)) {
        if error.kind() == ErrorKind::Interrupted {
            events.clear();
            return;
        }
        panic!("send thread of node {own_node}: poll failed: {error}");
    }
}
