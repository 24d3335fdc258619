//! Test harness for the receive and send threads: a data node reduced to
//! its job-queue mesh, the two transport threads, and the test playing
//! every block on thread 0; plus a blocking TCP client that speaks the wire
//! format as an API node does.
//!
//! Mesh of 3 threads: thread 0 runs tc instance 0, ldm instance 0 and the
//! main blocks (the test drains its inbox and stages replies through its
//! outbox), thread 1 is the receive thread, thread 2 the send thread.
//! Several such nodes in one process, each told of the others' addresses,
//! form a cluster of data nodes on loopback.

// Each test file uses a different part of the harness.
#![allow(dead_code)]

use admission::{ClusterSecret, LinkRole, LinkStatement};
use kernel::mesh::{self, Inbox, Outbox, Router};
use kernel::stats::ThreadStats;
use signal::codec::FrameAssembler;
use signal::codec::{self, FrameHeader};
use signal::signals::{ApiToken, LinkHelloReq, LinkProofRep};
use signal::{BlockKind, BlockRef, Envelope, NodeId, SectionPool, Signal};
use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use transport::recv::DataNodePeer;
use transport::{ConnectionRegistry, RecvSetup, SendSetup};

/// The data node's id in every test.
pub const OWN_NODE: NodeId = NodeId(1);
/// Its incarnation.
pub const INCARNATION: u32 = 7;

/// How long the test node keeps a connection that says nothing: short, so
/// a test sees the close, and long enough for every other test's client to
/// send its first frame on a slow machine.
pub const IDENTIFY_TIMEOUT: Duration = Duration::from_secs(2);
/// The test node's API heartbeats: 50 ms, 4 intervals, so a test sees an
/// API node that stopped heartbeating closed soon (clients that never
/// heartbeat, as most tests' are, are never timed out).
pub const API_HEARTBEAT: transport::ApiHeartbeatLimits = transport::ApiHeartbeatLimits {
    interval: Duration::from_millis(50),
    missed: 4,
};
/// Generous bound on waiting for something that must happen; tests never
/// assert how fast it happens.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// The cluster secret of every test node.
pub fn test_secret() -> ClusterSecret {
    ClusterSecret::from_bytes(b"transport tests: a cluster secret").expect("long enough")
}

/// The token mgmd would issue with API node id `node` (allocation 1).
pub fn token(node: u16) -> ApiToken {
    test_secret().api_token(NodeId(node), 1)
}

/// A data node with only its transport threads running.
pub struct TestNode {
    pub node: NodeId,
    pub incarnation: u32,
    pub address: SocketAddr,
    pub registry: Arc<ConnectionRegistry>,
    pub recv_stats: Arc<ThreadStats>,
    pub send_stats: Arc<ThreadStats>,
    pub pool: &'static SectionPool,
    block_inbox: Inbox,
    block_outbox: Outbox,
    received: VecDeque<Envelope>,
    shutdown: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// The receive and send loops, when they run on the test's thread
    /// beside its blocks (`start_data_node_beside_blocks`) instead of on
    /// threads of their own.
    network: Option<transport::NetworkOnThread>,
    // Unused ends of the mesh, kept so that no queue loses its consumer.
    _recv_inbox: Inbox,
    _send_outbox: Outbox,
}

/// A listener on a free loopback port.
pub fn listen() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").expect("bind loopback")
}

impl TestNode {
    /// Starts the receive and send threads with a section pool of these counts.
    pub fn start(section_counts: [u32; 6]) -> TestNode {
        TestNode::start_data_node(OWN_NODE, INCARNATION, listen(), Vec::new(), section_counts)
    }

    /// Starts data node `node` of incarnation `incarnation` on `listener`,
    /// with the other data nodes `data_nodes`.
    pub fn start_data_node(
        node: NodeId,
        incarnation: u32,
        listener: TcpListener,
        data_nodes: Vec<DataNodePeer>,
        section_counts: [u32; 6],
    ) -> TestNode {
        TestNode::start_with(
            node,
            incarnation,
            listener,
            data_nodes,
            section_counts,
            false,
        )
    }

    /// Starts data node `node` as `start_data_node` does; with
    /// `beside_blocks`, the receive and send loops are run by the test's
    /// own thread between its looks at the blocks' inbox, as a block
    /// thread runs them with `network_on_ldm`: they must never wait for
    /// the blocks.
    pub fn start_with(
        node: NodeId,
        incarnation: u32,
        listener: TcpListener,
        data_nodes: Vec<DataNodePeer>,
        section_counts: [u32; 6],
        beside_blocks: bool,
    ) -> TestNode {
        let pool = SectionPool::leak(section_counts);
        let router = Router {
            own_node: node,
            tc_threads: vec![0],
            ldm_threads: vec![0],
            main_thread: 0,
            send_thread: 2,
            io_thread: None,
        };
        let mut ends = mesh::build(3, router).into_iter();
        let (block_inbox, block_outbox) = ends.next().expect("thread 0");
        let (recv_inbox, recv_outbox) = ends.next().expect("thread 1");
        let (send_inbox, send_outbox) = ends.next().expect("thread 2");
        let address = listener.local_addr().expect("listener address");
        let registry = Arc::new(ConnectionRegistry::new());
        let recv_stats = Arc::new(ThreadStats::default());
        let send_stats = Arc::new(ThreadStats::default());
        let shutdown = Arc::new(AtomicBool::new(false));
        let recv = RecvSetup {
            own_node: node,
            listener,
            outbox: recv_outbox,
            pool,
            connections: registry.clone(),
            stats: recv_stats.clone(),
            shutdown: shutdown.clone(),
            tc_instances: 1,
            incarnation,
            data_nodes,
            identify_timeout: IDENTIFY_TIMEOUT,
            secret: test_secret(),
            api_heartbeat: API_HEARTBEAT,
            signs_of_life: Arc::new(kernel::liveness::SignsOfLife::new(256)),
        };
        let send = SendSetup {
            own_node: node,
            incarnation,
            inbox: send_inbox,
            connections: registry.clone(),
            stats: send_stats.clone(),
            shutdown: shutdown.clone(),
        };
        let (threads, network) = if beside_blocks {
            let network = transport::NetworkOnThread::new(
                node,
                transport::RecvLoop::new(recv),
                transport::SendLoop::new(send),
            );
            (Vec::new(), Some(network))
        } else {
            let threads = vec![
                std::thread::Builder::new()
                    .name("recv".into())
                    .spawn(move || transport::run_recv_thread(recv))
                    .expect("spawn recv"),
                std::thread::Builder::new()
                    .name("send".into())
                    .spawn(move || transport::run_send_thread(send))
                    .expect("spawn send"),
            ];
            (threads, None)
        };
        TestNode {
            node,
            incarnation,
            address,
            registry,
            recv_stats,
            send_stats,
            pool,
            block_inbox,
            block_outbox,
            received: VecDeque::new(),
            shutdown,
            threads,
            network,
            _recv_inbox: recv_inbox,
            _send_outbox: send_outbox,
        }
    }

    /// Takes whatever reached the blocks, without waiting (after a pass of
    /// the network loops, when they run on this thread).
    fn collect(&mut self) {
        if let Some(network) = self.network.as_mut() {
            use kernel::block_thread::Network;
            network.work();
        }
        let received = &mut self.received;
        self.block_inbox
            .drain(1024, |envelope| received.push_back(envelope));
    }

    /// The next signal that reached a block (tc, ldm, dict or membership).
    pub fn next_signal(&mut self) -> Envelope {
        let deadline = Instant::now() + PATIENCE;
        loop {
            self.collect();
            if let Some(envelope) = self.received.pop_front() {
                return envelope;
            }
            assert!(Instant::now() < deadline, "no signal reached the blocks");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The next signal, if one is already there.
    pub fn try_next_signal(&mut self) -> Option<Envelope> {
        self.collect();
        self.received.pop_front()
    }

    /// Sends signals from a block of this node, as a block thread would.
    pub fn reply(&mut self, envelopes: impl IntoIterator<Item = Envelope>) {
        for envelope in envelopes {
            if self.block_outbox.stage(envelope).not_staged().is_some() {
                panic!("reply has no route");
            }
        }
        while self.block_outbox.flush() {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.collect();
    }

    /// Waits until `condition` holds (checked every millisecond).
    pub fn wait_until(&mut self, what: &str, mut condition: impl FnMut(&TestNode) -> bool) {
        let deadline = Instant::now() + PATIENCE;
        while !condition(self) {
            assert!(Instant::now() < deadline, "waited in vain for: {what}");
            std::thread::sleep(Duration::from_millis(1));
            self.collect();
        }
    }
}

impl Drop for TestNode {
    fn drop(&mut self) {
        self.shutdown.store(true, Ordering::Relaxed);
        if let Some(network) = self.network.as_mut() {
            use kernel::block_thread::Network;
            network.finish();
        }
        for thread in self.threads.drain(..) {
            let finished = thread.join();
            if !std::thread::panicking() {
                finished.expect("transport thread panicked");
            }
        }
    }
}

/// The address of `kind` instance `instance` on the test data node.
pub fn block(kind: BlockKind, instance: u16) -> BlockRef {
    BlockRef::new(OWN_NODE, kind, instance)
}

/// The API block of node `node`.
pub fn api(node: u16) -> BlockRef {
    BlockRef::new(NodeId(node), BlockKind::Api, 0)
}

/// An envelope.
pub fn envelope(from: BlockRef, to: BlockRef, signal: impl Into<Signal>) -> Envelope {
    Envelope {
        from,
        to,
        signal: signal.into(),
    }
}

/// A blocking client speaking the wire format as API node `node`.
pub struct Client {
    pub node: NodeId,
    stream: TcpStream,
    next_sequence: u64,
    incarnation: u32,
    assembler: FrameAssembler,
    pool: &'static SectionPool,
    received: VecDeque<(FrameHeader, Envelope)>,
}

impl Client {
    /// Connects to the test node as API node `node`.
    pub fn connect(address: SocketAddr, node: u16) -> Client {
        Client::connect_as(address, node, 1)
    }

    /// Connects to the test node as node `node` of incarnation `incarnation`.
    pub fn connect_as(address: SocketAddr, node: u16, incarnation: u32) -> Client {
        let stream = TcpStream::connect(address).expect("connect to the data node");
        Client::on_stream(stream, node, incarnation)
    }

    /// Speaks as node `node` of incarnation `incarnation` on `stream` (a
    /// connection a test node dialed, say).
    pub fn on_stream(stream: TcpStream, node: u16, incarnation: u32) -> Client {
        stream
            .set_read_timeout(Some(PATIENCE))
            .expect("read timeout");
        stream.set_nodelay(true).expect("nodelay");
        Client {
            node: NodeId(node),
            stream,
            next_sequence: 0,
            incarnation,
            assembler: FrameAssembler::new(),
            pool: SectionPool::leak([1024, 64, 16, 16, 64, 4]),
            received: VecDeque::new(),
        }
    }

    /// One frame holding `envelopes`, with this client's sender, incarnation
    /// and next sequence number.
    pub fn frame(&mut self, envelopes: &[Envelope]) -> Vec<u8> {
        let mut out = Vec::new();
        let start = codec::begin_frame(&mut out);
        for envelope in envelopes {
            codec::encode_signal(&mut out, envelope).expect("wire signal");
        }
        codec::finish_frame(
            &mut out,
            start,
            self.node,
            self.incarnation,
            self.next_sequence,
            envelopes.len() as u16,
        );
        self.next_sequence += 1;
        out
    }

    /// One frame around already encoded signal records (which may break
    /// the rules; `signal_count` need not match them).
    pub fn frame_with_records(&mut self, records: &[u8], signal_count: u16) -> Vec<u8> {
        let mut out = Vec::new();
        let start = codec::begin_frame(&mut out);
        out.extend_from_slice(records);
        codec::finish_frame(
            &mut out,
            start,
            self.node,
            self.incarnation,
            self.next_sequence,
            signal_count,
        );
        self.next_sequence += 1;
        out
    }

    /// Sends `envelopes` in one frame.
    pub fn send(&mut self, envelopes: &[Envelope]) {
        let frame = self.frame(envelopes);
        self.send_bytes(&frame);
    }

    /// Sends raw bytes; a refused write is fine (the node may have closed).
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        let _ = self.stream.write_all(bytes);
    }

    /// The next signal from the data node, with its frame's header.
    pub fn receive(&mut self) -> (FrameHeader, Envelope) {
        loop {
            if let Some(received) = self.received.pop_front() {
                return received;
            }
            while let Some((header, body)) = self.assembler.next_frame().expect("valid frames") {
                let mut decoder =
                    codec::SignalDecoder::new(body, header.signal_count, header.sender, self.node);
                while let Some(envelope) = decoder.next(self.pool).expect("valid signals") {
                    self.received.push_back((header, envelope));
                }
            }
            if !self.received.is_empty() {
                continue;
            }
            let read = self
                .assembler
                .read_from(&mut self.stream)
                .expect("the data node answers in time");
            assert!(read > 0, "the data node closed the connection");
        }
    }

    /// Sends a data node's LINK_HELLO_REQ to `peer` (this client plays
    /// the dialer) and returns its challenge.
    pub fn send_link_hello(&mut self, peer: NodeId) -> [u8; 16] {
        let challenge = [0x42; 16];
        let from = BlockRef::new(self.node, BlockKind::Membership, 0);
        let to = BlockRef::new(peer, BlockKind::Membership, 0);
        self.send(&[envelope(from, to, LinkHelloReq { challenge })]);
        challenge
    }

    /// The link handshake as the dialer plays it (docs/wire-format.md §7)
    /// with `secret`: LINK_HELLO_REQ, the acceptor's LINK_HELLO_CONF (its
    /// proof checked), LINK_PROOF_REP. Returns the acceptor's hello header.
    pub fn link_handshake(&mut self, peer: NodeId, secret: &ClusterSecret) -> FrameHeader {
        let challenge = self.send_link_hello(peer);
        let (header, hello) = self.receive();
        let Signal::LinkHelloConf(answer) = hello.signal else {
            panic!("expected LinkHelloConf, got {hello:?}");
        };
        assert_eq!(
            header.signal_count, 1,
            "a hello frame holds its signal alone"
        );
        let acceptor = LinkStatement {
            role: LinkRole::Acceptor,
            prover: header.sender,
            verifier: self.node,
            prover_incarnation: header.incarnation,
            verifier_incarnation: self.incarnation,
            prover_challenge: answer.challenge,
            verifier_challenge: challenge,
        };
        assert!(
            secret.verify_link_proof(&acceptor, &answer.proof),
            "the acceptor proves the secret"
        );
        let proof = secret.link_proof(&LinkStatement {
            role: LinkRole::Dialer,
            prover: self.node,
            verifier: header.sender,
            prover_incarnation: self.incarnation,
            verifier_incarnation: header.incarnation,
            prover_challenge: challenge,
            verifier_challenge: answer.challenge,
        });
        let from = BlockRef::new(self.node, BlockKind::Membership, 0);
        let to = BlockRef::new(header.sender, BlockKind::Membership, 0);
        self.send(&[envelope(from, to, LinkProofRep { proof })]);
        header
    }

    /// Waits until the data node closes the connection.
    pub fn expect_closed(&mut self) {
        let mut scratch = [0u8; 4096];
        loop {
            match self.stream.read(&mut scratch) {
                Ok(0) => return,
                Ok(_) => {}
                Err(error)
                    if matches!(
                        error.kind(),
                        ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
                    ) =>
                {
                    return
                }
                Err(error) => panic!("connection still open: {error}"),
            }
        }
    }
}
