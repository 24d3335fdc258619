//! One connection from this API node to one data node: the send side
//! (frames with this node's id, incarnation and a per-connection sequence,
//! many signals per frame, one write per batch), the receive side
//! ([`Inbound`]), and the registration handshake (API_REGREQ until
//! API_REGCONF says `started`). The bytes travel over whatever the
//! [`Transport`] opened (TCP in production, see `tcp`).
//!
//! ```text
//!  app threads ──FrameBuilder──> outgoing lock: seal, Link::write ──> data node
//!  loop tasks  ──FrameBuilder──> outgoing lock: seal, gather ... flush ──┘
//!  data node ──> Inbound: FrameAssembler -> SignalDecoder -> Dispatch slots
//! ```

use crate::dispatch::Dispatch;
use crate::environment::{Clock, Link, Transport};
use crate::error::ClientError;
use signal::codec::FrameAssembler;
use signal::codec::{self, ForApi, WireError};
use signal::signals::{ApiHeartbeatReq, ApiRegConf, ApiRegReq, ApiToken};
use signal::{BlockKind, BlockRef, Envelope, NodeId, SectionPool, Signal};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The protocol version this client speaks in API_REGREQ.
///
/// ```
/// assert_eq!(client::PROTOCOL_VERSION, 2);
/// ```
pub const PROTOCOL_VERSION: u16 = signal::signals::API_PROTOCOL_VERSION;

/// A frame is closed once it holds this many bytes, far below
/// `codec::MAX_FRAME_BYTES` even after one more signal with two full sections.
const FRAME_SPLIT_BYTES: usize = 1 << 20;

/// Signal records collected into frames, ready for [`NodeConnection::send`].
/// Owned by the caller so its buffer is reused batch after batch.
#[derive(Default)]
pub(crate) struct FrameBuilder {
    bytes: Vec<u8>,
    /// Start offset and signal count of each frame in `bytes`.
    frames: Vec<(usize, u16)>,
}

impl FrameBuilder {
    /// Empties the builder, keeping its memory.
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.frames.clear();
    }

    /// Bytes of memory held for frames.
    pub(crate) fn capacity(&self) -> usize {
        self.bytes.capacity()
    }

    /// Whether nothing is collected.
    pub(crate) fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Marks the current end, so that a batch that fails half-way through
    /// can be taken out again with [`FrameBuilder::restore`].
    pub(crate) fn checkpoint(&self) -> FrameCheckpoint {
        FrameCheckpoint {
            bytes: self.bytes.len(),
            frames: self.frames.len(),
            last_count: self.frames.last().map_or(0, |&(_, count)| count),
        }
    }

    /// Drops everything pushed after `checkpoint`.
    pub(crate) fn restore(&mut self, checkpoint: FrameCheckpoint) {
        self.bytes.truncate(checkpoint.bytes);
        self.frames.truncate(checkpoint.frames);
        if let Some(last) = self.frames.last_mut() {
            last.1 = checkpoint.last_count;
        }
    }

    /// Number of signals collected.
    #[cfg(test)]
    pub(crate) fn signal_count(&self) -> usize {
        self.frames.iter().map(|&(_, count)| count as usize).sum()
    }

    /// Appends a signal, opening a new frame when the current one is full.
    pub(crate) fn push(&mut self, envelope: &Envelope) -> Result<(), ClientError> {
        let needs_frame = match self.frames.last() {
            None => true,
            Some(&(start, count)) => {
                count == u16::MAX || self.bytes.len() - start >= FRAME_SPLIT_BYTES
            }
        };
        if needs_frame {
            let start = codec::begin_frame(&mut self.bytes);
            self.frames.push((start, 0));
        }
        codec::encode_signal(&mut self.bytes, envelope).map_err(|error| {
            ClientError::Usage(format!("cannot encode {}: {error}", envelope.signal.name()))
        })?;
        if let Some(last) = self.frames.last_mut() {
            last.1 += 1;
        }
        Ok(())
    }

    /// Fills in every frame header, numbering the frames from `sequence`;
    /// returns the next sequence number.
    pub(crate) fn seal(&mut self, sender: NodeId, incarnation: u32, mut sequence: u64) -> u64 {
        for (index, &(start, count)) in self.frames.iter().enumerate() {
            // `finish_frame` takes the frame to run to the end of the slice.
            let end = self
                .frames
                .get(index + 1)
                .map_or(self.bytes.len(), |&(next, _)| next);
            codec::finish_frame(
                &mut self.bytes[..end],
                start,
                sender,
                incarnation,
                sequence,
                count,
            );
            sequence += 1;
        }
        sequence
    }

    /// The finished bytes (for tests of the frame layout).
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// A position in a [`FrameBuilder`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct FrameCheckpoint {
    bytes: usize,
    frames: usize,
    last_count: u16,
}

/// A failed [`NodeConnection::send_reporting`].
pub(crate) struct SendFailure {
    /// The lost connection.
    pub error: ClientError,
    /// A write was attempted: the node may have received part of it.
    pub maybe_received: bool,
}

/// A connection's send state, under one lock.
#[derive(Default)]
struct Outgoing {
    /// The next frame's sequence number.
    sequence: u64,
    /// Sealed frames a task sent while its thread gathers (`gather`),
    /// written by the thread's next flush or before the next write.
    gathered: Vec<u8>,
}

/// Gathered bytes past this are written at once, with the send that
/// crossed it.
const GATHER_LIMIT: usize = 64 * 1024;
/// A gathered buffer grown past this by a burst is given back after its
/// write.
const GATHER_KEEP: usize = 1 << 20;

/// The connection to one data node.
pub(crate) struct NodeConnection {
    /// Address connected to (for messages).
    pub addr: String,
    /// tc instances on the node, from API_REGCONF (at least 1).
    pub tc_instances: u16,
    /// The data node's id: from the config, or from the frames it sends.
    node: Arc<AtomicU16>,
    api_node: NodeId,
    /// What mgmd issued with `api_node`, sent in API_REGREQ.
    token: ApiToken,
    incarnation: u32,
    /// The next frame's sequence number and the frames gathered for a
    /// later write (`gather`); held while writing, so that frames reach
    /// the link in sequence order.
    outgoing: Mutex<Outgoing>,
    /// Waiters of this connection.
    pub dispatch: Arc<Dispatch>,
    /// The data node's heartbeat settings, from API_REGCONF
    /// (`heartbeat.rs`).
    pub heartbeat: HeartbeatSettings,
    /// Something was sent since the heartbeat thread last looked.
    sent: AtomicBool,
    /// Heartbeat intervals in a row in which nothing arrived.
    silent: AtomicU32,
    /// Heartbeats sent.
    heartbeats_sent: AtomicU32,
    /// Declared last: dropping it may wait for a receive thread, which
    /// `Drop` has woken by shutting the link down.
    link: Box<dyn Link>,
}

impl NodeConnection {
    /// Opens a connection to `addr` through `transport` and registers:
    /// API_REGREQ (with `token`) every `retry_interval` until an
    /// API_REGCONF says the node is started, or `connect_timeout` passes.
    // Each argument is one setting of the connection; a struct of them
    // would be built at the one call site only.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn open(
        transport: &dyn Transport,
        clock: &Clock,
        addr: &str,
        expected_node: Option<NodeId>,
        api_node: NodeId,
        token: ApiToken,
        incarnation: u32,
        connect_timeout: Duration,
        retry_interval: Duration,
    ) -> Result<NodeConnection, ClientError> {
        let started_at = clock.now();
        let deadline = started_at + connect_timeout;
        let node = Arc::new(AtomicU16::new(expected_node.map_or(0, |node| node.0)));
        let dispatch = Arc::new(Dispatch::new());
        let inbound = Inbound {
            assembler: FrameAssembler::new(),
            dispatch: Arc::clone(&dispatch),
            api_node,
            node: Arc::clone(&node),
        };
        let link = transport.open(addr, deadline, inbound)?;
        let mut connection =
            NodeConnection::assembled(addr, node, (api_node, token, incarnation), dispatch, link);
        let conf = connection.register(clock, deadline, retry_interval, started_at)?;
        connection.tc_instances = conf.tc_instances.max(1);
        connection.heartbeat = HeartbeatSettings {
            interval: Duration::from_millis(u64::from(conf.heartbeat_interval_ms)),
            missed: u32::from(conf.api_heartbeat_missed),
        };
        Ok(connection)
    }

    /// A connection to `addr` that is not open: its node was down when
    /// the client connected. It fails every use with `reason` until it is
    /// replaced by one opened again (`reconnect.rs`).
    pub(crate) fn not_open(
        addr: &str,
        node: NodeId,
        api_node: NodeId,
        token: ApiToken,
        tc_instances: u16,
        reason: String,
    ) -> NodeConnection {
        let dispatch = Arc::new(Dispatch::new());
        dispatch.close(reason);
        let node = Arc::new(AtomicU16::new(node.0));
        let mut connection =
            NodeConnection::assembled(addr, node, (api_node, token, 0), dispatch, Box::new(NoLink));
        connection.tc_instances = tc_instances.max(1);
        connection
    }

    /// A connection over `link`, as API node `api_node` with `token` in
    /// `incarnation`, before registration tells it the node's settings.
    fn assembled(
        addr: &str,
        node: Arc<AtomicU16>,
        (api_node, token, incarnation): (NodeId, ApiToken, u32),
        dispatch: Arc<Dispatch>,
        link: Box<dyn Link>,
    ) -> NodeConnection {
        NodeConnection {
            addr: addr.to_string(),
            tc_instances: 1,
            node,
            api_node,
            token,
            incarnation,
            outgoing: Mutex::new(Outgoing::default()),
            dispatch,
            heartbeat: HeartbeatSettings::default(),
            sent: AtomicBool::new(false),
            silent: AtomicU32::new(0),
            heartbeats_sent: AtomicU32::new(0),
            link,
        }
    }

    fn register(
        &self,
        clock: &Clock,
        deadline: Instant,
        retry_interval: Duration,
        started_at: Instant,
    ) -> Result<ApiRegConf, ClientError> {
        let mut frames = FrameBuilder::default();
        loop {
            frames.clear();
            frames.push(
                &self.envelope(
                    BlockKind::Membership,
                    0,
                    ApiRegReq {
                        protocol_version: PROTOCOL_VERSION,
                        token: self.token,
                    }
                    .into(),
                ),
            )?;
            self.send_now(&mut frames)?;
            let attempt_deadline = (clock.now() + retry_interval).min(deadline);
            let (mut registration, _) =
                self.dispatch
                    .registration
                    .wait_until(clock, attempt_deadline, |registration| {
                        registration.lost.is_some()
                            || registration.refused.is_some()
                            || registration
                                .conf
                                .as_ref()
                                .is_some_and(|(_, conf)| conf.started)
                    });
            // A refusal first: a data node that does not admit this client
            // answers API_REGREF and closes at once, so both may be in.
            if let Some(code) = registration.refused {
                // The protocol version matters only to a version refusal.
                let context = if code == signal::ErrorCode::NotAdmitted {
                    format!("as API node {}", self.api_node)
                } else {
                    format!("(protocol version {PROTOCOL_VERSION})")
                };
                return Err(ClientError::Config(format!(
                    "the data node at {} refused this client's registration {context}: {code}",
                    self.addr
                )));
            }
            if let Some(reason) = registration.lost.clone() {
                return Err(self.lost(reason));
            }
            if let Some((sender, conf)) = registration.conf.take() {
                if conf.started {
                    let expected = self.node.load(Ordering::Relaxed);
                    if expected != 0 && expected != sender.0 {
                        return Err(ClientError::Config(format!(
                            "the data node at {} says it is node {sender}, the config says {expected}",
                            self.addr
                        )));
                    }
                    return Ok(conf);
                }
            }
            drop(registration);
            let now = clock.now();
            if now >= deadline {
                return Err(ClientError::NotStarted {
                    addr: self.addr.clone(),
                    waited: now - started_at,
                });
            }
            // A not-started answer came early: keep the retry pace.
            if now < attempt_deadline {
                clock.sleep(attempt_deadline - now);
            }
        }
    }

    /// The data node's id (0 until it has sent a frame, when not configured).
    pub(crate) fn node(&self) -> NodeId {
        NodeId(self.node.load(Ordering::Relaxed))
    }

    /// An envelope from this API node to block `kind`/`instance` of the data node.
    pub(crate) fn envelope(&self, kind: BlockKind, instance: u16, signal: Signal) -> Envelope {
        Envelope {
            from: BlockRef::new(self.api_node, BlockKind::Api, 0),
            to: BlockRef::new(self.node(), kind, instance),
            signal,
        }
    }

    /// The error for a lost connection.
    pub(crate) fn lost(&self, reason: String) -> ClientError {
        ClientError::ConnectionLost {
            node: self.node(),
            reason,
        }
    }

    /// Whether the connection is still up.
    pub(crate) fn is_connected(&self) -> bool {
        !self.dispatch.is_closed()
    }

    /// Whether new transactions may go here: the connection is up and
    /// the node has not said it is stopping.
    pub(crate) fn takes_transactions(&self) -> bool {
        self.is_connected() && !self.dispatch.stopping.load(Ordering::Relaxed)
    }

    /// Numbers the frames in `frames`, seals them and writes them all at
    /// once (or gathers them for the thread's flush, `gather`). A failed
    /// write shuts the link down, so the receive side ends and fails every
    /// waiter.
    pub(crate) fn send(self: &Arc<Self>, frames: &mut FrameBuilder) -> Result<(), ClientError> {
        self.send_reporting(frames).map_err(|failure| failure.error)
    }

    /// [`NodeConnection::send`], telling a failure before any byte went
    /// out from a failed write, after which the node may have received
    /// some of the frames (and acted on them: a commit among them may
    /// have been applied). Gathered frames cannot fail here: a failure of
    /// their later write reaches the waiters as a lost connection.
    pub(crate) fn send_reporting(
        self: &Arc<Self>,
        frames: &mut FrameBuilder,
    ) -> Result<(), SendFailure> {
        if frames.frames.is_empty() {
            return Ok(());
        }
        let mut outgoing = self.outgoing.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(reason) = self.dispatch.closed_reason() {
            return Err(SendFailure {
                error: self.lost(reason),
                maybe_received: false,
            });
        }
        // Sequence numbers must reach the wire in order, so they are
        // assigned under the same lock as the write.
        outgoing.sequence = frames.seal(self.api_node, self.incarnation, outgoing.sequence);
        if crate::gather::active() && outgoing.gathered.len() + frames.bytes.len() <= GATHER_LIMIT {
            outgoing.gathered.extend_from_slice(&frames.bytes);
            drop(outgoing);
            self.sent.store(true, Ordering::Relaxed);
            // Noted on every append, not only the one that found the
            // buffer empty: this thread's flush must write what this
            // thread gathered, whether or not another loop flushes first.
            crate::gather::note(self);
            return Ok(());
        }
        self.write_sealed(&mut outgoing, &frames.bytes)
            .map_err(|error| SendFailure {
                error,
                maybe_received: true,
            })
    }

    /// Seals and writes `frames` at once, after anything gathered: the
    /// connection's own sends (registration, heartbeats), never gathered.
    fn send_now(&self, frames: &mut FrameBuilder) -> Result<(), ClientError> {
        if frames.frames.is_empty() {
            return Ok(());
        }
        let mut outgoing = self.outgoing.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(reason) = self.dispatch.closed_reason() {
            return Err(self.lost(reason));
        }
        outgoing.sequence = frames.seal(self.api_node, self.incarnation, outgoing.sequence);
        self.write_sealed(&mut outgoing, &frames.bytes)
    }

    /// Writes what is gathered, then `bytes` (sealed under the same hold
    /// of the lock).
    fn write_sealed(&self, outgoing: &mut Outgoing, bytes: &[u8]) -> Result<(), ClientError> {
        let written = if outgoing.gathered.is_empty() {
            self.link.write(bytes)
        } else {
            outgoing.gathered.extend_from_slice(bytes);
            let written = self.link.write(&outgoing.gathered);
            outgoing.empty_gathered();
            written
        };
        if let Err(error) = written {
            self.link.shutdown();
            return Err(self.lost(format!("write failed: {error}")));
        }
        self.sent.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Writes the frames gathered for this connection, if any (`gather`).
    /// A failed write ends the connection at once: the link is shut down
    /// and every waiter fails as on a lost connection (a commit among the
    /// frames with an unknown outcome), and later sends are refused.
    pub(crate) fn flush_gathered(&self) {
        let mut outgoing = self.outgoing.lock().unwrap_or_else(PoisonError::into_inner);
        if outgoing.gathered.is_empty() {
            return;
        }
        let written = self.link.write(&outgoing.gathered);
        outgoing.empty_gathered();
        drop(outgoing);
        if let Err(error) = written {
            self.link.shutdown();
            self.dispatch.close(format!("write failed: {error}"));
        }
    }

    /// One heartbeat interval passed (`heartbeat.rs`): counts it silent
    /// if nothing arrived, and closes the connection after the data
    /// node's limit of silent intervals (every waiter fails at once,
    /// instead of at its reply timeout); sends API_HEARTBEAT_REQ if this
    /// client sent nothing in the interval, so the data node hears from
    /// it. `stalled`: the heartbeat thread itself ran late (this process
    /// was paused or starved): silence is not counted this time.
    pub(crate) fn heartbeat_tick(&self, stalled: bool, frames: &mut FrameBuilder) {
        if !self.is_connected() || self.heartbeat.missed == 0 {
            return;
        }
        let heard = self.dispatch.heard.swap(false, Ordering::Relaxed);
        if heard || stalled {
            self.silent.store(0, Ordering::Relaxed);
        } else {
            let silent = self.silent.fetch_add(1, Ordering::Relaxed) + 1;
            if silent >= self.heartbeat.missed {
                let reason = format!(
                    "data node {} sent nothing for {silent} heartbeat intervals of {} ms \
                     (taken for gone)",
                    self.node(),
                    self.heartbeat.interval.as_millis()
                );
                self.dispatch.close(reason);
                self.link.shutdown();
                return;
            }
        }
        if self.sent.swap(false, Ordering::Relaxed) {
            return;
        }
        let count = self.heartbeats_sent.fetch_add(1, Ordering::Relaxed) + 1;
        frames.clear();
        let heartbeat = ApiHeartbeatReq { count };
        let pushed = frames.push(&self.envelope(BlockKind::Membership, 0, heartbeat.into()));
        // A failed write closes the connection; its waiters hear of it.
        if pushed.is_ok() && self.send_now(frames).is_ok() {
            // The heartbeat itself does not count as traffic.
            self.sent.store(false, Ordering::Relaxed);
        }
    }
}

impl Outgoing {
    /// Empties the gathered frames after their write, keeping a usual
    /// round's room.
    fn empty_gathered(&mut self) {
        self.gathered.clear();
        if self.gathered.capacity() > GATHER_KEEP {
            self.gathered.shrink_to(GATHER_LIMIT);
        }
    }
}

/// The link of a connection that was never opened.
struct NoLink;

impl Link for NoLink {
    fn write(&self, _bytes: &[u8]) -> std::io::Result<()> {
        Err(std::io::ErrorKind::NotConnected.into())
    }

    fn shutdown(&self) {}
}

/// A data node's heartbeat settings, as its API_REGCONF says.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct HeartbeatSettings {
    /// How often to heartbeat an idle connection.
    pub interval: Duration,
    /// Intervals of silence in a row after which the data node is taken
    /// for gone (0: the node asks for no heartbeats).
    pub missed: u32,
}

impl NodeConnection {
    /// Ends the connection now, whoever still holds it: the receive side
    /// closes the dispatch, failing every waiter.
    pub(crate) fn shut_down(&self) {
        self.link.shutdown();
    }
}

impl Drop for NodeConnection {
    fn drop(&mut self) {
        // Wakes the receive side, which closes the dispatch.
        self.link.shutdown();
    }
}

/// The process-wide section pool of the client. Sections live only while
/// one signal is encoded or decoded (the dispatch copies row data out), so
/// the pool needs about one section per thread using the client per class;
/// the OS maps its pages only when used. Uncached: a program may use the
/// client from a thousand threads (an SQL node's workers), and per-thread
/// caches of two batches each would strand the whole pool.
pub(crate) fn section_pool() -> &'static SectionPool {
    static POOL: std::sync::OnceLock<&'static SectionPool> = std::sync::OnceLock::new();
    POOL.get_or_init(|| SectionPool::leak_uncached([4_096, 2_048, 512, 128, 64, 32]))
}

/// The receive side of one connection: bytes from the data node in,
/// signals out to their waiters. Made by the client for each connection
/// and handed to the [`Transport`], whose receiver (a receive thread, or
/// the simulator) feeds it the bytes in order and closes it when the
/// stream ends.
pub struct Inbound {
    assembler: FrameAssembler,
    dispatch: Arc<Dispatch>,
    api_node: NodeId,
    node: Arc<AtomicU16>,
}

impl Inbound {
    /// Bytes that arrived, in order: every whole frame is delivered now.
    /// `Err(reason)`: the stream carries something invalid; close it.
    pub fn receive(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.assembler.push_bytes(bytes);
        // Nobody else runs while a driven client receives, so sections
        // that are not there now never will be.
        self.deliver(false)
    }

    /// Reads what `stream` has into the frame buffer (a receive thread's
    /// read, without a copy).
    pub(crate) fn read_from(&mut self, stream: &mut impl std::io::Read) -> std::io::Result<usize> {
        self.assembler.read_from(stream)
    }

    /// The stream ended: every waiter of the connection fails with `reason`.
    pub fn close(self, reason: String) {
        self.dispatch.close(reason);
    }

    /// Delivers every whole frame received. `wait_for_sections`: sending
    /// threads hold the pool's sections only while encoding, so when there
    /// is none the same signal is retried after a pause.
    pub(crate) fn deliver(&mut self, wait_for_sections: bool) -> Result<(), String> {
        loop {
            let (header, body) = match self.assembler.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => return Ok(()),
                Err(error) => return Err(format!("invalid frame: {error}")),
            };
            self.dispatch.heard.store(true, Ordering::Relaxed);
            // The first frame names the peer when the config did not.
            let known = self.node.load(Ordering::Relaxed);
            if known == 0 {
                self.node.store(header.sender.0, Ordering::Relaxed);
            } else if known != header.sender.0 {
                return Err(format!(
                    "frame from node {}, expected node {known}",
                    header.sender
                ));
            }
            let mut decoder =
                codec::SignalDecoder::new(body, header.signal_count, header.sender, self.api_node);
            loop {
                match decoder.next_for_api(section_pool()) {
                    // A read's reply: its row goes from the frame to the inbox.
                    Ok(Some(ForApi::Reply { to, reply })) => {
                        if to.kind != BlockKind::Api {
                            return Err(format!(
                                "{} addressed to block {}, not to the API node",
                                reply.name(),
                                to.kind.name()
                            ));
                        }
                        self.dispatch.deliver_reply(reply);
                    }
                    Ok(Some(ForApi::Signal(envelope))) => {
                        if envelope.to.kind != BlockKind::Api {
                            return Err(format!(
                                "{} addressed to block {}, not to the API node",
                                envelope.signal.name(),
                                envelope.to.kind.name()
                            ));
                        }
                        self.dispatch.deliver(header.sender, envelope.signal)?;
                    }
                    Ok(None) => break,
                    // The decoder has not advanced: the same signal is retried.
                    Err(WireError::OutOfSections) if wait_for_sections => {
                        std::thread::sleep(Duration::from_millis(1))
                    }
                    Err(error) => return Err(format!("undecodable signal: {error}")),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use signal::signals::TcCommitReq;
    use signal::TransactionId;

    #[test]
    fn a_checkpoint_takes_out_a_half_built_batch() {
        let commit = |id: u64| Envelope {
            from: BlockRef::new(NodeId(200), BlockKind::Api, 0),
            to: BlockRef::new(NodeId(2), BlockKind::Tc, 0),
            signal: TcCommitReq {
                transaction_id: TransactionId(id),
            }
            .into(),
        };
        let mut builder = FrameBuilder::default();
        let empty = builder.checkpoint();
        builder.push(&commit(1)).unwrap();
        builder.restore(empty);
        assert!(builder.is_empty());
        builder.push(&commit(1)).unwrap();
        let bytes_before = builder.bytes().to_vec();
        let checkpoint = builder.checkpoint();
        builder.push(&commit(2)).unwrap();
        builder.push(&commit(3)).unwrap();
        builder.restore(checkpoint);
        assert_eq!(builder.signal_count(), 1);
        assert_eq!(builder.bytes(), &bytes_before[..]);
        builder.push(&commit(4)).unwrap();
        builder.seal(NodeId(200), 5, 0);
        let mut assembler = FrameAssembler::new();
        assembler.push_bytes(builder.bytes());
        let (header, body) = assembler.next_frame().unwrap().expect("one frame");
        assert_eq!(header.signal_count, 2);
        let pool = SectionPool::leak([1, 1, 1, 1, 1, 1]);
        let mut decoder = codec::SignalDecoder::new(body, 2, header.sender, NodeId(2));
        let mut ids = Vec::new();
        while let Some(envelope) = decoder.next(pool).unwrap() {
            if let Signal::TcCommitReq(request) = envelope.signal {
                ids.push(request.transaction_id.0);
            }
        }
        assert_eq!(ids, [1, 4]);
    }

    /// A link that records each write.
    struct RecordingLink(Arc<Mutex<Vec<Vec<u8>>>>);

    impl Link for RecordingLink {
        fn write(&self, bytes: &[u8]) -> std::io::Result<()> {
            self.0.lock().unwrap().push(bytes.to_vec());
            Ok(())
        }

        fn shutdown(&self) {}
    }

    /// A scheduler whose task never waits (the sends below do not).
    struct NeverWaits;

    impl crate::cooperative::Scheduler for NeverWaits {
        fn waker(&self) -> std::task::Waker {
            std::task::Waker::noop().clone()
        }

        fn suspend(&self, _deadline: Option<Instant>) {
            unreachable!("nothing here waits");
        }
    }

    /// The sequence numbers of the frames in `bytes`, in order, read by
    /// the connection's one assembler (which refuses a frame out of
    /// sequence).
    fn sequences(assembler: &mut FrameAssembler, bytes: &[u8]) -> Vec<u64> {
        assembler.push_bytes(bytes);
        let mut sequences = Vec::new();
        while let Some((header, _)) = assembler.next_frame().unwrap() {
            sequences.push(header.sequence);
        }
        sequences
    }

    /// A connection from API node 200 to data node 2 over `link`.
    fn connection_over(dispatch: Arc<Dispatch>, link: Box<dyn Link>) -> Arc<NodeConnection> {
        Arc::new(NodeConnection::assembled(
            "test",
            Arc::new(AtomicU16::new(2)),
            (NodeId(200), ApiToken::NONE, 1),
            dispatch,
            link,
        ))
    }

    /// One frame of one signal (TC_COMMITREQ of `id`) for `connection`'s
    /// node.
    fn commit_frame(connection: &NodeConnection, id: u64) -> FrameBuilder {
        let mut frames = FrameBuilder::default();
        let commit = TcCommitReq {
            transaction_id: TransactionId(id),
        };
        frames
            .push(&connection.envelope(BlockKind::Tc, 0, commit.into()))
            .unwrap();
        frames
    }

    #[test]
    fn a_tasks_sends_wait_for_the_flush_and_keep_their_sequence() {
        let writes = Arc::new(Mutex::new(Vec::new()));
        let connection = connection_over(
            Arc::new(Dispatch::new()),
            Box::new(RecordingLink(Arc::clone(&writes))),
        );
        let one_frame = |id: u64| commit_frame(&connection, id);
        let written = || std::mem::take(&mut *writes.lock().unwrap());
        let mut assembler = FrameAssembler::new();
        let mut read = |writes: Vec<Vec<u8>>| {
            (writes.iter())
                .map(|write| sequences(&mut assembler, write))
                .collect::<Vec<_>>()
        };

        // A thread that does not gather writes at once, even in a task.
        crate::cooperative::run(&NeverWaits, || connection.send(&mut one_frame(1))).unwrap();
        assert_eq!(read(written()), [vec![0]]);

        let gathering = crate::gather::on_this_thread();
        // Outside a task, a gathering thread's send is written at once too.
        connection.send(&mut one_frame(2)).unwrap();
        assert_eq!(read(written()), [vec![1]]);
        // Two tasks' sends wait for the flush, which writes them at once.
        for id in [3, 4] {
            crate::cooperative::run(&NeverWaits, || connection.send(&mut one_frame(id))).unwrap();
        }
        assert!(written().is_empty());
        crate::gather::flush();
        assert_eq!(read(written()), [vec![2, 3]]);
        // The connection's own send (a heartbeat) goes out after what is
        // gathered, in one write and in sequence.
        crate::cooperative::run(&NeverWaits, || connection.send(&mut one_frame(5))).unwrap();
        connection.send_now(&mut one_frame(6)).unwrap();
        assert_eq!(read(written()), [vec![4, 5]]);
        crate::gather::flush();
        assert!(written().is_empty());
        // Dropping the gathering flushes what is left.
        crate::cooperative::run(&NeverWaits, || connection.send(&mut one_frame(7))).unwrap();
        drop(gathering);
        assert_eq!(read(written()), [vec![6]]);
        crate::cooperative::run(&NeverWaits, || connection.send(&mut one_frame(8))).unwrap();
        assert_eq!(read(written()), [vec![7]]);
    }

    #[test]
    fn a_closed_connection_refuses_a_gathered_send_before_any_byte() {
        let writes = Arc::new(Mutex::new(Vec::new()));
        let dispatch = Arc::new(Dispatch::new());
        let connection = connection_over(
            Arc::clone(&dispatch),
            Box::new(RecordingLink(Arc::clone(&writes))),
        );
        dispatch.close("gone".to_string());
        let mut frames = commit_frame(&connection, 1);
        let _gathering = crate::gather::on_this_thread();
        let failure =
            crate::cooperative::run(&NeverWaits, || connection.send_reporting(&mut frames))
                .expect_err("refused");
        assert!(!failure.maybe_received);
        crate::gather::flush();
        assert!(writes.lock().unwrap().is_empty());
    }

    /// A link whose writes fail; counts its shutdowns.
    struct BrokenLink(Arc<AtomicU32>);

    impl Link for BrokenLink {
        fn write(&self, _bytes: &[u8]) -> std::io::Result<()> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }

        fn shutdown(&self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_failed_flush_shuts_the_link_down_so_the_waiters_hear_of_it() {
        let shutdowns = Arc::new(AtomicU32::new(0));
        let connection = connection_over(
            Arc::new(Dispatch::new()),
            Box::new(BrokenLink(Arc::clone(&shutdowns))),
        );
        let mut frames = commit_frame(&connection, 1);
        let _gathering = crate::gather::on_this_thread();
        // Gathered: nothing is written yet, so nothing fails yet.
        crate::cooperative::run(&NeverWaits, || connection.send(&mut frames)).unwrap();
        assert_eq!(shutdowns.load(Ordering::Relaxed), 0);
        crate::gather::flush();
        assert_eq!(shutdowns.load(Ordering::Relaxed), 1);
        // The waiters are failed now, not when the receive side notices,
        // and a later send is refused before any byte.
        assert!(connection
            .dispatch
            .closed_reason()
            .is_some_and(|reason| reason.contains("write failed")));
        let failure =
            crate::cooperative::run(&NeverWaits, || connection.send_reporting(&mut frames))
                .expect_err("refused");
        assert!(!failure.maybe_received);
    }

    #[test]
    fn a_loop_flushes_what_it_gathered_even_onto_a_buffer_another_loop_began() {
        let writes = Arc::new(Mutex::new(Vec::new()));
        let connection = connection_over(
            Arc::new(Dispatch::new()),
            Box::new(RecordingLink(Arc::clone(&writes))),
        );
        let send = |connection: &Arc<NodeConnection>, id: u64| {
            let mut frames = commit_frame(connection, id);
            crate::cooperative::run(&NeverWaits, || connection.send(&mut frames)).unwrap();
        };
        // Another loop's task begins the buffer and that loop is still in
        // its round (it does not flush).
        let (began, finish) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
        // What this loop's flush wrote while the other loop was still in
        // its round (checked once both threads are done, so that a failure
        // cannot leave the other waiting).
        let (before_flush, flushed) = std::thread::scope(|scope| {
            scope.spawn(|| {
                let _gathering = crate::gather::on_this_thread();
                send(&connection, 1);
                began.wait();
                finish.wait();
            });
            began.wait();
            let _gathering = crate::gather::on_this_thread();
            send(&connection, 2);
            let before_flush = writes.lock().unwrap().len();
            crate::gather::flush();
            let flushed = std::mem::take(&mut *writes.lock().unwrap());
            finish.wait();
            (before_flush, flushed)
        });
        assert_eq!(before_flush, 0);
        // This loop's flush wrote both: its own request was not left for
        // the other loop's round.
        let mut assembler = FrameAssembler::new();
        let read: Vec<Vec<u64>> = (flushed.iter())
            .map(|write| sequences(&mut assembler, write))
            .collect();
        assert_eq!(read, [vec![0, 1]]);
    }

    #[test]
    fn frames_split_by_size_and_decode_back() {
        let mut builder = FrameBuilder::default();
        let pool = SectionPool::leak([1, 1, 1, 1, 1, 64]);
        let envelope = |index: u64| Envelope {
            from: BlockRef::new(NodeId(200), BlockKind::Api, 0),
            to: BlockRef::new(NodeId(2), BlockKind::Dict, 0),
            signal: signal::signals::DropTabReq {
                request_id: index as u32,
                name: pool.copy_from(&vec![b'x'; 100_000]).unwrap(),
            }
            .into(),
        };
        for index in 0..25 {
            builder.push(&envelope(index)).unwrap();
        }
        builder
            .push(&Envelope {
                from: BlockRef::new(NodeId(200), BlockKind::Api, 0),
                to: BlockRef::new(NodeId(2), BlockKind::Tc, 0),
                signal: TcCommitReq {
                    transaction_id: TransactionId(1),
                }
                .into(),
            })
            .unwrap();
        assert_eq!(builder.signal_count(), 26);
        assert!(builder.frames.len() >= 3, "2.5 MB must span several frames");
        let frame_count = builder.frames.len() as u64;
        assert_eq!(builder.seal(NodeId(200), 5, 0), frame_count);
        let mut assembler = FrameAssembler::new();
        assembler.push_bytes(builder.bytes());
        let mut seen = 0;
        while let Some((header, body)) = assembler.next_frame().unwrap() {
            assert_eq!(header.sender, NodeId(200));
            let mut decoder =
                codec::SignalDecoder::new(body, header.signal_count, header.sender, NodeId(2));
            while decoder.next(pool).unwrap().is_some() {
                seen += 1;
            }
        }
        assert_eq!(seen, 26);
    }
}
