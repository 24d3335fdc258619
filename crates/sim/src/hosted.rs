//! Real API nodes in the simulator: each a thread running the production
//! `client` crate (`Cluster::connect_in`), its bytes carried by the
//! simulated network and its time the simulated clock
//! (docs/design/testing.md §3).
//!
//! The threads never run beside the simulator: an API node's thread runs
//! only while the simulator waits for it, from a delivery or a timer of
//! its own until it parks again (waits for a reply or a deadline) or
//! ends, so a run is the same for the same seed however the OS schedules
//! threads.
//!
//! ```text
//!  simulator thread                         API node thread (client crate)
//!  Deliver(envelope to API node) ──encode──> Inbound::receive -> dispatch
//!  take_turn ─────────── turn ─────────────> runs until Driver::park
//!  <── frames written to a Link ─────────── (Transaction::execute, ...)
//!  decode, ClientIo::send; timer at the park's deadline
//! ```
//!
//! An API node's addresses are `node-<id>` (see [`data_node_addr`]); the
//! frames both ways go through the real codec and frame assembler, so
//! sequence numbers, checksums and incarnations are checked as in
//! production.

use crate::simulation::Client;
use crate::world::ClientIo;
use client::environment::{Driver, Environment, Inbound, Link, Transport};
use client::{ClientError, Cluster, ConnectOptions};
use signal::codec::{self, FrameAssembler};
use signal::{Envelope, NodeId};
use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The address under which hosted API nodes reach data node `node`.
pub fn data_node_addr(node: NodeId) -> String {
    format!("node-{}", node.0)
}

/// What a hosted API node's thread gets: how to connect, and a random
/// seed of its own drawn from the client stream.
pub struct HostedContext {
    /// This API node's id.
    pub api_node: NodeId,
    /// Every data node, ascending.
    pub data_nodes: Vec<NodeId>,
    /// A seed for the thread's own random choices.
    pub seed: u64,
    environment: Environment,
    /// The instant simulated time 0 maps to.
    base: Instant,
    shared: Arc<Shared>,
}

impl HostedContext {
    /// Connects the real client to every data node running (registering
    /// with each), as mgmd would list them: those running when this API
    /// node began, less those that stopped since and did not come back.
    pub fn connect(&self, options: ConnectOptions) -> Result<Cluster, ClientError> {
        let down = self.shared.lock().down.clone();
        let nodes: Vec<NodeId> = self
            .data_nodes
            .iter()
            .copied()
            .filter(|node| !down.contains(node))
            .collect();
        let addrs: Vec<String> = nodes.iter().map(|&n| data_node_addr(n)).collect();
        let targets: Vec<(&str, u16)> = addrs
            .iter()
            .zip(&nodes)
            .map(|(addr, node)| (addr.as_str(), node.0))
            .collect();
        Cluster::connect_in(&self.environment, &targets, self.api_node.0, options)
    }

    /// Fault injection: the next write on any connection goes out whole,
    /// but the client is told it failed (as when a connection breaks just
    /// after the kernel took the bytes), and that connection ends.
    pub fn fail_next_write_after_sending(&self) {
        self.shared.lock().fail_next_write = true;
    }

    /// Sleeps in simulated time.
    pub fn sleep(&self, duration: Duration) {
        let driver = &self.environment.driver;
        let until = driver.now() + duration;
        while driver.now() < until {
            driver.park(Some(until));
        }
    }

    /// The simulated time, in microseconds since the run began.
    pub fn now_us(&self) -> u64 {
        let now = self.environment.driver.now();
        now.duration_since(self.base).as_micros() as u64
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Turn {
    /// The simulator runs; the API node's thread waits.
    Simulator,
    /// The API node's thread runs; the simulator waits.
    ApiNode,
    /// The thread's function returned (or panicked).
    Ended,
}

/// One data-node connection as the host sees it.
struct HostedLink {
    /// The client's receive side; `None` once closed.
    inbound: Option<Inbound>,
    /// Frames from the API node, checked and split as a data node would.
    from_api: FrameAssembler,
    /// Sequence number of the next frame to the API node.
    to_api_sequence: u64,
}

struct State {
    turn: Turn,
    now_us: u64,
    /// When the parked thread wants its turn back at the latest.
    wake_at_us: Option<u64>,
    /// Bytes written by the client since its turn began: (data node, bytes).
    written: Vec<(NodeId, Vec<u8>)>,
    links: BTreeMap<NodeId, HostedLink>,
    panic: Option<Box<dyn Any + Send>>,
    /// See [`HostedContext::fail_next_write_after_sending`].
    fail_next_write: bool,
    /// Data nodes that stopped: a connection to one is refused, as a
    /// socket to a dead process is.
    down: BTreeSet<NodeId>,
}

/// What the simulator and one API node's thread share.
struct Shared {
    /// The instant simulated time 0 maps to (only differences between
    /// instants of the API node's clock are ever used, so any will do).
    base: Instant,
    state: Mutex<State>,
    turn_changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands the turn to `next` and waits until it is `wanted` again
    /// (or `Ended`, for the simulator).
    fn hand_over(&self, next: Turn, wanted: Turn) -> MutexGuard<'_, State> {
        let mut state = self.lock();
        state.turn = next;
        self.turn_changed.notify_all();
        drop(state);
        self.wait_for(wanted)
    }

    /// Waits until the turn is `wanted` (or `Ended`, for the simulator).
    fn wait_for(&self, wanted: Turn) -> MutexGuard<'_, State> {
        let mut state = self.lock();
        while state.turn != wanted && !(wanted == Turn::Simulator && state.turn == Turn::Ended) {
            state = self
                .turn_changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state
    }
}

struct HostedDriver(Arc<Shared>);

impl Driver for HostedDriver {
    fn now(&self) -> Instant {
        self.0.base + Duration::from_micros(self.0.lock().now_us)
    }

    fn park(&self, deadline: Option<Instant>) {
        let wake_at_us = deadline.map(|deadline| {
            let since_base = deadline.saturating_duration_since(self.0.base);
            // Round up: waking before the deadline would only park again.
            since_base.as_nanos().div_ceil(1000) as u64
        });
        self.0.lock().wake_at_us = wake_at_us;
        drop(self.0.hand_over(Turn::Simulator, Turn::ApiNode));
    }
}

struct HostedTransport(Arc<Shared>);

impl Transport for HostedTransport {
    fn open(
        &self,
        addr: &str,
        _deadline: Instant,
        inbound: Inbound,
    ) -> Result<Box<dyn Link>, ClientError> {
        let node = addr
            .strip_prefix("node-")
            .and_then(|id| id.parse().ok())
            .map(NodeId)
            .ok_or_else(|| ClientError::Usage(format!("{addr:?} is not a simulated data node")))?;
        if self.0.lock().down.contains(&node) {
            return Err(ClientError::Connect {
                addr: addr.to_string(),
                source: std::io::ErrorKind::ConnectionRefused.into(),
            });
        }
        let link = HostedLink {
            inbound: Some(inbound),
            from_api: FrameAssembler::new(),
            to_api_sequence: 0,
        };
        if let Some(old) = self.0.lock().links.insert(node, link) {
            if let Some(inbound) = old.inbound {
                inbound.close("replaced by a new connection".to_string());
            }
        }
        Ok(Box::new(HostedLinkHandle {
            shared: Arc::clone(&self.0),
            node,
        }))
    }
}

/// The client's end of a hosted link.
struct HostedLinkHandle {
    shared: Arc<Shared>,
    node: NodeId,
}

impl Link for HostedLinkHandle {
    fn write(&self, bytes: &[u8]) -> std::io::Result<()> {
        let mut state = self.shared.lock();
        let open = state
            .links
            .get(&self.node)
            .is_some_and(|link| link.inbound.is_some());
        if !open {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        }
        state.written.push((self.node, bytes.to_vec()));
        if std::mem::take(&mut state.fail_next_write) {
            return Err(std::io::ErrorKind::ConnectionReset.into());
        }
        Ok(())
    }

    fn shutdown(&self) {
        let inbound = {
            let mut state = self.shared.lock();
            let link = state.links.get_mut(&self.node);
            link.and_then(|link| link.inbound.take())
        };
        if let Some(inbound) = inbound {
            inbound.close("connection shut down by the API node".to_string());
        }
    }
}

/// One hosted API node: its thread and what it shares with the simulator.
struct HostedApiNode<R> {
    api_node: NodeId,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<Option<R>>>,
    result: Option<R>,
    /// Incremented at each park: a timer of an earlier park is stale.
    generation: u32,
}

/// Every hosted API node of a run: the simulator's [`Client`].
pub struct HostedApiNodes<R> {
    nodes: Vec<HostedApiNode<R>>,
}

impl<R: Send + 'static> Default for HostedApiNodes<R> {
    fn default() -> Self {
        HostedApiNodes { nodes: Vec::new() }
    }
}

impl<R: Send + 'static> HostedApiNodes<R> {
    /// Starts API node `api_node` running `work` at the current simulated
    /// time (its first turn is taken at once).
    pub fn spawn(
        &mut self,
        api_node: NodeId,
        io: &mut ClientIo<'_>,
        work: impl FnOnce(HostedContext) -> R + Send + 'static,
    ) {
        assert!(
            self.nodes.iter().all(|node| node.api_node != api_node),
            "API node {api_node} hosted twice"
        );
        let shared = Arc::new(Shared {
            base: Instant::now(),
            state: Mutex::new(State {
                turn: Turn::Simulator,
                now_us: io.now_us(),
                wake_at_us: None,
                written: Vec::new(),
                links: BTreeMap::new(),
                panic: None,
                fail_next_write: false,
                down: BTreeSet::new(),
            }),
            turn_changed: Condvar::new(),
        });
        let context = HostedContext {
            api_node,
            // As mgmd tells a connecting client: the nodes not failed.
            data_nodes: io.running_data_nodes(),
            seed: io.random(),
            environment: Environment {
                transport: Arc::new(HostedTransport(Arc::clone(&shared))),
                driver: Arc::new(HostedDriver(Arc::clone(&shared))),
                incarnation: io.random() as u32,
                // Admission is checked by a data node's receive threads,
                // which the simulator does not run (it delivers signals).
                token: client::ApiToken::NONE,
            },
            base: shared.base,
            shared: Arc::clone(&shared),
        };
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("sim-api-{}", api_node.0))
            .spawn(move || {
                drop(thread_shared.wait_for(Turn::ApiNode));
                let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| work(context)));
                let mut state = thread_shared.lock();
                let result = match outcome {
                    Ok(result) => Some(result),
                    Err(panic) => {
                        state.panic = Some(panic);
                        None
                    }
                };
                state.turn = Turn::Ended;
                thread_shared.turn_changed.notify_all();
                result
            })
            .expect("the OS starts a thread for a simulated API node");
        self.nodes.push(HostedApiNode {
            api_node,
            shared,
            thread: Some(thread),
            result: None,
            generation: 0,
        });
        let index = self.nodes.len() - 1;
        self.take_turn(index, io);
    }

    /// The hosted API nodes' ids, in spawn order.
    pub fn api_node_ids(&self) -> Vec<NodeId> {
        self.nodes.iter().map(|node| node.api_node).collect()
    }

    /// Whether every API node's function has returned.
    pub fn all_ended(&self) -> bool {
        self.nodes.iter().all(|node| node.thread.is_none())
    }

    /// The API nodes' results, in spawn order, once all have ended (they
    /// stay hosted: signals still on their way to them are dropped).
    pub fn take_results(&mut self) -> Vec<R> {
        assert!(self.all_ended(), "API nodes are still running");
        self.nodes
            .iter_mut()
            .map(|node| {
                node.result
                    .take()
                    .expect("an ended API node left its result")
            })
            .collect()
    }

    /// Every connection of every API node ends (the data nodes crashed):
    /// each receive side is closed with `reason`, failing its waiters,
    /// new connections are refused (the processes are gone; a client
    /// still connecting must not reach the blocks built for the restart
    /// before they start), and each API node gets a turn to notice.
    pub fn lose_connections(&mut self, reason: &str, io: &mut ClientIo<'_>) {
        for index in 0..self.nodes.len() {
            let inbounds: Vec<Inbound> = {
                let mut state = self.nodes[index].shared.lock();
                state.down.extend(io.data_nodes().iter().copied());
                let links = state.links.values_mut();
                links.filter_map(|link| link.inbound.take()).collect()
            };
            for inbound in inbounds {
                inbound.close(reason.to_string());
            }
            self.take_turn(index, io);
        }
    }

    /// Data node `data_node` runs again (a node restart): connections to
    /// it are admitted from now on.
    pub fn data_node_back(&mut self, data_node: NodeId) {
        for node in &self.nodes {
            node.shared.lock().down.remove(&data_node);
        }
    }

    /// Data node `data_node` stopped: every API node's connection to it
    /// ends with `reason` (failing its waiters), later ones are refused,
    /// and each API node gets a turn to notice.
    pub fn lose_connections_to(&mut self, data_node: NodeId, reason: &str, io: &mut ClientIo<'_>) {
        for index in 0..self.nodes.len() {
            let inbound = {
                let mut state = self.nodes[index].shared.lock();
                state.down.insert(data_node);
                let link = state.links.get_mut(&data_node);
                link.and_then(|link| link.inbound.take())
            };
            if let Some(inbound) = inbound {
                inbound.close(reason.to_string());
            }
            self.take_turn(index, io);
        }
    }

    /// Lets API node `index` run until it parks or ends, then sends what
    /// it wrote and sets the timer of its park.
    fn take_turn(&mut self, index: usize, io: &mut ClientIo<'_>) {
        let node = &mut self.nodes[index];
        if node.thread.is_none() {
            return;
        }
        let (written, wake_at_us, ended) = {
            {
                let mut state = node.shared.lock();
                state.now_us = io.now_us();
                state.wake_at_us = None;
            }
            let mut state = node.shared.hand_over(Turn::ApiNode, Turn::Simulator);
            let written = std::mem::take(&mut state.written);
            (written, state.wake_at_us, state.turn == Turn::Ended)
        };
        for (data_node, bytes) in written {
            node.send_to_data_node(data_node, &bytes, io);
        }
        if ended {
            node.end();
            return;
        }
        if let Some(at_us) = wake_at_us {
            node.generation = node.generation.wrapping_add(1);
            let token = (index as u64) << 32 | u64::from(node.generation);
            io.wake_after_us(at_us.saturating_sub(io.now_us()), token);
        }
    }
}

impl<R> HostedApiNode<R> {
    /// Splits what the API node wrote to `data_node` into frames and
    /// signals, as the data node's receive thread does, and sends each.
    fn send_to_data_node(&mut self, data_node: NodeId, bytes: &[u8], io: &mut ClientIo<'_>) {
        let api_node = self.api_node;
        let mut state = self.shared.lock();
        let link = state
            .links
            .get_mut(&data_node)
            .expect("bytes are written only to opened links");
        link.from_api.push_bytes(bytes);
        let mut envelopes = Vec::new();
        while let Some((header, body)) = link.from_api.next_frame().unwrap_or_else(|error| {
            panic!("API node {api_node} sent node {data_node} a bad frame: {error}")
        }) {
            assert_eq!(header.sender, api_node, "frames carry their sender's id");
            let mut decoder =
                codec::SignalDecoder::new(body, header.signal_count, header.sender, data_node);
            while let Some(envelope) = decoder.next(io.pool()).unwrap_or_else(|error| {
                panic!("API node {api_node} sent node {data_node} an undecodable signal: {error}")
            }) {
                envelopes.push(envelope);
            }
        }
        drop(state);
        for envelope in envelopes {
            io.send(envelope);
        }
    }

    /// Hands a signal from a data node to the client's receive side, as
    /// one frame on that node's link.
    fn receive(&mut self, envelope: Envelope) {
        let from = envelope.from.node;
        let mut state = self.shared.lock();
        let Some(link) = state.links.get_mut(&from) else {
            // Not connected (yet, or any more): a stray for a closed socket.
            return;
        };
        let Some(mut inbound) = link.inbound.take() else {
            return;
        };
        let mut bytes = Vec::new();
        let start = codec::begin_frame(&mut bytes);
        codec::encode_signal(&mut bytes, &envelope)
            .unwrap_or_else(|error| panic!("{} does not encode: {error}", envelope.signal.name()));
        drop(envelope);
        codec::finish_frame(&mut bytes, start, from, 1, link.to_api_sequence, 1);
        link.to_api_sequence += 1;
        drop(state);
        match inbound.receive(&bytes) {
            Ok(()) => {
                let mut state = self.shared.lock();
                if let Some(link) = state.links.get_mut(&from) {
                    link.inbound = Some(inbound);
                }
            }
            Err(reason) => inbound.close(reason),
        }
    }

    /// Joins the ended thread; a panic in it is re-raised here.
    fn end(&mut self) {
        let thread = self.thread.take().expect("an API node ends once");
        let result = thread
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        if let Some(panic) = self.shared.lock().panic.take() {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".to_string());
            panic!("simulated API node {} failed: {message}", self.api_node);
        }
        self.result = result;
    }
}

impl<R: Send + 'static> Client for HostedApiNodes<R> {
    fn on_signal(&mut self, envelope: Envelope, io: &mut ClientIo<'_>) {
        let to = envelope.to.node;
        let Some(index) = self.nodes.iter().position(|node| node.api_node == to) else {
            panic!(
                "signal {} from {} to API node {to}, which is not hosted",
                envelope.signal.name(),
                envelope.from
            );
        };
        if self.nodes[index].thread.is_none() {
            // Its process has ended: the socket is gone.
            return;
        }
        self.nodes[index].receive(envelope);
        self.take_turn(index, io);
    }

    fn on_wake(&mut self, token: u64, io: &mut ClientIo<'_>) {
        let index = (token >> 32) as usize;
        let generation = token as u32;
        let Some(node) = self.nodes.get(index) else {
            panic!("timer {token:#x} of no hosted API node");
        };
        if node.generation == generation {
            self.take_turn(index, io);
        }
    }
}
