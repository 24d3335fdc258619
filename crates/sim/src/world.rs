//! The simulated world around the blocks: a clock in microseconds, one
//! queue of future events ordered by (time, sequence), seeded random
//! sources, a network with per-pair FIFO delivery, and the trace hash.
//!
//! [`World`] is the [`kernel::Context`] every block of every simulated data
//! node gets (the simulation tells it whose block runs, so reports land on
//! the right node). [`ClientIo`] is the narrower view the simulated API
//! nodes get: they may only send what an API node may send over its
//! connection.
//!
//! The network has three kinds of links, each with its own delays: between
//! two blocks of one node (a job queue hop), between two data nodes (each
//! pair of nodes gets its own base latency from the seed, plus a random
//! jitter per signal) and between an API node and a data node. Every
//! (sender block, receiver block) pair is FIFO whatever the link, as the
//! production job queues and TCP connections are.
//!
//! Links between data nodes behave as TCP connections: a link cut (by a
//! test, or by a node that takes its peer for failed, `Report::CutLinks`)
//! drops whatever was on it and everything sent on it later, and each
//! end that did not cut it hears of the break (`NodeLinkFailedRep` from
//! its transport). A node that shuts down (`Report::Shutdown`) or is
//! killed stops: nothing reaches its blocks any more, and its links break.
//!
//! File requests (`Context::fs_request`) go to the requesting node's
//! simulated [`Disk`]; its answer is an `FsConf` from the node's `io`
//! address after the disk's latency. Arbitration requests
//! (`ArbitrationReq`, which production's io thread takes to mgmd) go to
//! the simulated [`Arbitrator`], which decides as mgmd does and answers
//! after a network round trip; a node cut off from it gets no answer.
//!
//! Five random streams are split from the seed (network delays, blocks'
//! `random()`, client decisions, the links' base latencies, the disks) so that, for
//! example, a block starting to use randomness does not shift every network
//! delay of the run.

use crate::disk::{CrashOutcome, Disk};
use kernel::faults::{FaultAction, FaultPoint};
use kernel::{Context, Report};
use signal::fs::FsOperation;
use signal::signals::{ArbitrationConf, ArbitrationReq, FsConf, NodeLinkFailedRep};
use signal::{codec, BlockKind, BlockRef, Envelope, NodeId, NodeSet, SectionPool};
use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, VecDeque};
use stdx::mix::{fmix64, XorShift};

/// Delay of a signal between two blocks of the node (a job queue hop):
/// 1 to this many microseconds.
pub const NODE_DELAY_MAX_US: u64 = 50;

/// Base latency of a link between two data nodes: [`NODE_LINK_MIN_US`] to
/// [`NODE_LINK_MAX_US`] microseconds, drawn per pair of nodes from the seed.
pub const NODE_LINK_MIN_US: u64 = 20;
/// See [`NODE_LINK_MIN_US`].
pub const NODE_LINK_MAX_US: u64 = 150;
/// Jitter added to a signal between two data nodes: 0 to this many
/// microseconds.
pub const NODE_LINK_JITTER_US: u64 = 100;

/// Delay of a signal between an API node and a data node (a network hop):
/// [`CLIENT_DELAY_MIN_US`] to [`CLIENT_DELAY_MAX_US`] microseconds.
pub const CLIENT_DELAY_MIN_US: u64 = 30;
/// See [`CLIENT_DELAY_MIN_US`].
pub const CLIENT_DELAY_MAX_US: u64 = 300;

/// How long a node that shut down keeps its links, so that what it sent
/// last arrives (production lingers 600 ms so mgmd hears why).
pub const SHUTDOWN_LINGER_US: u64 = 10_000;

/// How many delivered signals the world remembers for a failure report.
const RECENT_DELIVERIES: usize = 200;

/// Something that happens at a simulated time.
pub(crate) enum Event {
    /// A signal reaches its receiver (a block, or an API node).
    Deliver(Envelope),
    /// A simulated client's timer fires with the token it chose.
    ClientWake(u64),
    /// A paused data node runs again (see [`World::pause`]).
    Resume(NodeId),
    /// A node that shut down closes its links, after what it sent last
    /// had time to leave (see [`World::stop`]).
    Sever(NodeId),
}

struct Scheduled {
    time_us: u64,
    sequence: u64,
    event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Scheduled) -> bool {
        (self.time_us, self.sequence) == (other.time_us, other.sequence)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Scheduled) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, other: &Scheduled) -> Ordering {
        // The sequence breaks ties, so events due at the same microsecond
        // run in the order they were scheduled: that, and nothing else
        // (no pointer, no hash order), decides the run.
        (self.time_us, self.sequence).cmp(&(other.time_us, other.sequence))
    }
}

/// One delivered signal, for the failure report.
#[derive(Clone, Copy, Debug)]
pub struct Delivery {
    /// Simulated time, microseconds.
    pub time_us: u64,
    /// Sender.
    pub from: BlockRef,
    /// Receiver.
    pub to: BlockRef,
    /// Signal name.
    pub signal: &'static str,
}

/// What one data node reported.
#[derive(Clone, Copy, Debug, Default)]
struct NodeReports {
    started: bool,
    latest_gci: signal::Gci,
    complete_gci: signal::Gci,
    restored_gci: signal::Gci,
    schema_version: u32,
    /// The agreed membership's id and members (`Report::Membership`).
    membership: (u32, NodeSet),
}

/// The simulated world: clock, events, network, randomness, reports.
pub struct World {
    now_us: u64,
    events: BinaryHeap<Reverse<Scheduled>>,
    sequence: u64,
    network_rng: XorShift,
    block_rng: XorShift,
    client_rng: XorShift,
    /// The latest delivery time scheduled per (sender, receiver): a later
    /// signal on the pair is never delivered before it, as with the
    /// production SPSC queues and TCP connections.
    last_delivery_us: HashMap<(BlockRef, BlockRef), u64>,
    /// The data nodes, ascending (the first is the president).
    nodes: Vec<NodeId>,
    /// Base latency of each link between two data nodes, by (lower, higher).
    link_base_us: HashMap<(NodeId, NodeId), u64>,
    /// The node whose block is handling a signal (reports are its).
    current_node: NodeId,
    /// (receiver, sender) of data-node signals delivered since the
    /// receiver's membership last asked (`Context::heard_from`).
    signs_of_life: BTreeSet<(NodeId, NodeId)>,
    reports: BTreeMap<NodeId, NodeReports>,
    trace_hash: u64,
    delivered: u64,
    recent: VecDeque<Delivery>,
    trace_to_stderr: bool,
    pool: &'static SectionPool,
    /// Each data node's disk.
    disks: BTreeMap<NodeId, Disk>,
    /// Paused data nodes, with the signals that reached them meanwhile,
    /// in order (their timers included).
    paused: BTreeMap<NodeId, VecDeque<Envelope>>,
    /// Broken links between data nodes, as (lower id, higher id).
    cut: BTreeSet<(NodeId, NodeId)>,
    /// Stopped data nodes and why (a shutdown's reason, or "killed").
    stopped: BTreeMap<NodeId, String>,
    /// The nodes' incarnation: 1, and one more after each whole-cluster
    /// crash.
    incarnation: u32,
    /// Node restarts of each data node so far: its incarnation is the
    /// cluster's plus these, so each restart is above the last.
    node_restarts: BTreeMap<NodeId, u32>,
    /// mgmd as the arbitrator.
    arbitrator: Arbitrator,
    /// Fault points armed per node, with what each does (each fires once).
    armed_faults: BTreeMap<NodeId, BTreeMap<FaultPoint, FaultAction>>,
    /// Signals a node sent while stalled at a fault point: they leave when
    /// it runs again.
    held_sends: BTreeMap<NodeId, Vec<Envelope>>,
    /// Every fault point that fired, in order: (time, node, point, action).
    fired: Vec<(u64, NodeId, FaultPoint, FaultAction)>,
    /// Broken connections between an API node and a data node, as (API
    /// node, data node): nothing more passes between them.
    api_cut: BTreeSet<(NodeId, NodeId)>,
    /// One-way partitions between data nodes: nothing sent from the first
    /// node to the second arrives before the time given (TCP holds it
    /// and retransmits once the path heals, so nothing is lost unless the
    /// connection breaks meanwhile).
    held: BTreeMap<(NodeId, NodeId), u64>,
    /// Every membership installed in this run of the cluster, by id: one
    /// member set per id, whoever installs it.
    installed: BTreeMap<u32, NodeSet>,
    /// The blocks' most recent log lines and shutdown reasons, with time
    /// and node, for a failure report.
    logs: VecDeque<(u64, NodeId, String)>,
}

/// How many log lines the world remembers for a failure report.
const RECENT_LOGS: usize = 40;

/// The simulated arbitrator: mgmd's `arbitrate` rule
/// (docs/mgm-protocol.md): for each agreed membership (its id and
/// members) it grants the first side that asks, and after that only that
/// side or a part of it.
#[derive(Default)]
pub struct Arbitrator {
    /// ((membership id, members), the side granted), in grant order.
    grants: Vec<((u32, NodeSet), NodeSet)>,
    /// Data nodes that cannot reach it: their requests get no answer.
    cut_off: NodeSet,
    /// Every decision, in order: (asking node, membership id, side,
    /// granted).
    decisions: Vec<(NodeId, u32, NodeSet, bool)>,
}

impl Arbitrator {
    fn decide(&mut self, node: NodeId, request: &ArbitrationReq) -> bool {
        let key = (request.membership_id, request.before);
        let granted = match self.grants.iter().find(|(k, _)| *k == key) {
            Some(&(_, granted)) => request.side.is_subset(granted),
            None => {
                self.grants.push((key, request.side));
                true
            }
        };
        self.decisions
            .push((node, request.membership_id, request.side, granted));
        granted
    }

    /// Every decision so far: (asking node, membership id, side, granted).
    pub fn decisions(&self) -> &[(NodeId, u32, NodeSet, bool)] {
        &self.decisions
    }
}

impl World {
    /// A world for the data nodes `nodes` (ascending, at least one).
    pub(crate) fn new(
        seed: u64,
        nodes: Vec<NodeId>,
        pool: &'static SectionPool,
        trace_to_stderr: bool,
    ) -> World {
        assert!(
            !nodes.is_empty() && nodes.windows(2).all(|pair| pair[0] < pair[1]),
            "a world needs data nodes in ascending order, not {nodes:?}"
        );
        let mut seeds = XorShift::new(seed);
        let network_rng = XorShift::new(seeds.next_u64());
        let block_rng = XorShift::new(seeds.next_u64());
        let client_rng = XorShift::new(seeds.next_u64());
        let mut link_rng = XorShift::new(seeds.next_u64());
        let mut link_base_us = HashMap::new();
        for (index, &low) in nodes.iter().enumerate() {
            for &high in &nodes[index + 1..] {
                let base =
                    NODE_LINK_MIN_US + link_rng.below(NODE_LINK_MAX_US - NODE_LINK_MIN_US + 1);
                link_base_us.insert((low, high), base);
            }
        }
        // Drawn after the other streams, so that adding disks moved no
        // earlier run's network delays.
        let disk_seed = seeds.next_u64();
        let disks = nodes
            .iter()
            .map(|&node| (node, Disk::new(fmix64(disk_seed ^ u64::from(node.0)), pool)))
            .collect();
        World {
            now_us: 0,
            events: BinaryHeap::with_capacity(4096),
            sequence: 0,
            network_rng,
            block_rng,
            client_rng,
            last_delivery_us: HashMap::new(),
            current_node: nodes[0],
            signs_of_life: BTreeSet::new(),
            reports: nodes
                .iter()
                .map(|&node| (node, NodeReports::default()))
                .collect(),
            nodes,
            link_base_us,
            trace_hash: fmix64(seed ^ 0x7e55_e4a0_5170_0001),
            delivered: 0,
            recent: VecDeque::with_capacity(RECENT_DELIVERIES),
            trace_to_stderr,
            pool,
            disks,
            paused: BTreeMap::new(),
            cut: BTreeSet::new(),
            stopped: BTreeMap::new(),
            arbitrator: Arbitrator::default(),
            armed_faults: BTreeMap::new(),
            held_sends: BTreeMap::new(),
            fired: Vec::new(),
            api_cut: BTreeSet::new(),
            held: BTreeMap::new(),
            installed: BTreeMap::new(),
            logs: VecDeque::with_capacity(RECENT_LOGS),
            incarnation: 1,
            node_restarts: BTreeMap::new(),
        }
    }

    /// The data nodes that have not stopped, ascending.
    pub(crate) fn running_nodes(&self) -> Vec<NodeId> {
        let nodes = self.nodes.iter().copied();
        nodes
            .filter(|node| !self.stopped.contains_key(node))
            .collect()
    }

    /// The incarnation of data node `node` now.
    pub fn incarnation_of(&self, node: NodeId) -> u32 {
        self.incarnation + self.node_restarts.get(&node).copied().unwrap_or(0)
    }

    /// The stopped data node `node` runs again as a new process (a node
    /// restart): a higher incarnation, its links up again, and nothing
    /// left of its old incarnation: signals to or from it still in
    /// flight, its timers and its disk answers are dropped (its old
    /// links broke when it stopped). Its disk keeps what it holds. Its
    /// start is forgotten: it reports started again once it is.
    pub(crate) fn restart_node(&mut self, node: NodeId) {
        assert!(
            self.stopped.contains_key(&node),
            "node restart of node {node}: it is running"
        );
        self.stopped.remove(&node);
        *self.node_restarts.entry(node).or_insert(0) += 1;
        let of_node = |block: &BlockRef| block.kind != BlockKind::Api && block.node == node;
        let events = std::mem::take(&mut self.events);
        self.events = events
            .into_iter()
            .filter(|Reverse(scheduled)| match &scheduled.event {
                Event::Deliver(envelope) => !of_node(&envelope.from) && !of_node(&envelope.to),
                Event::Resume(resumed) | Event::Sever(resumed) => *resumed != node,
                Event::ClientWake(_) => true,
            })
            .collect();
        self.cut.retain(|&(low, high)| low != node && high != node);
        self.held
            .retain(|&(from, to), _| from != node && to != node);
        self.api_cut.retain(|&(_, data)| data != node);
        self.armed_faults.remove(&node);
        self.held_sends.remove(&node);
        self.signs_of_life
            .retain(|&(receiver, sender)| receiver != node && sender != node);
        let reports = self.reports.entry(node).or_default();
        reports.started = false;
        reports.membership = (0, NodeSet::EMPTY);
    }

    /// The disk of data node `node`.
    pub fn disk(&self, node: NodeId) -> &Disk {
        self.disks
            .get(&node)
            .unwrap_or_else(|| panic!("node {node} is not a simulated data node"))
    }

    /// The disk of data node `node`, to inject faults or crash it.
    pub fn disk_mut(&mut self, node: NodeId) -> &mut Disk {
        self.disks
            .get_mut(&node)
            .unwrap_or_else(|| panic!("node {node} is not a simulated data node"))
    }

    /// Simulated time in microseconds.
    pub fn now_us(&self) -> u64 {
        self.now_us
    }

    /// The hash of every delivery so far.
    pub fn trace_hash(&self) -> u64 {
        self.trace_hash
    }

    /// Signals delivered so far.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// The data nodes, ascending.
    pub fn data_nodes(&self) -> &[NodeId] {
        &self.nodes
    }

    /// The president: the lowest data node id.
    pub fn president(&self) -> NodeId {
        self.nodes[0]
    }

    fn reports_of(&self, node: NodeId) -> &NodeReports {
        self.reports
            .get(&node)
            .unwrap_or_else(|| panic!("node {node} is not a simulated data node"))
    }

    /// Whether membership of `node` reported it started.
    pub fn node_started(&self, node: NodeId) -> bool {
        self.reports_of(node).started
    }

    /// Whether every data node reported it started.
    pub fn all_started(&self) -> bool {
        self.reports.values().all(|reports| reports.started)
    }

    /// The highest GCI any dih reported every tc switched to (the master's:
    /// the others hear of each switch after it).
    pub fn latest_gci(&self) -> signal::Gci {
        self.reports
            .values()
            .map(|reports| reports.latest_gci)
            .max()
            .unwrap_or(signal::Gci(0))
    }

    /// The highest GCI any node's dih recorded complete in its system file.
    pub fn complete_gci(&self) -> signal::Gci {
        self.reports
            .values()
            .map(|reports| reports.complete_gci)
            .max()
            .unwrap_or(signal::Gci(0))
    }

    /// The GCI `node` restored at its last start.
    pub fn restored_gci_of(&self, node: NodeId) -> signal::Gci {
        self.reports_of(node).restored_gci
    }

    /// The GCI the dih of `node` last reported.
    pub fn latest_gci_of(&self, node: NodeId) -> signal::Gci {
        self.reports_of(node).latest_gci
    }

    /// The last schema version the president's dict reported.
    pub fn schema_version(&self) -> u32 {
        self.reports_of(self.president()).schema_version
    }

    /// The last schema version the dict of `node` reported.
    pub fn schema_version_of(&self, node: NodeId) -> u32 {
        self.reports_of(node).schema_version
    }

    /// Whether `node` is a simulated data node.
    pub fn is_data_node(&self, node: NodeId) -> bool {
        self.nodes.binary_search(&node).is_ok()
    }

    /// The whole cluster crashed: every event still scheduled (signals in
    /// flight between blocks, nodes and API nodes, timers of blocks and
    /// clients, answers of the disks) is dropped, every disk loses its page
    /// cache ([`Disk::crash`]), and each node's start is forgotten (it
    /// reports started again after its restart). What the nodes reported of
    /// GCIs stays: the restarted nodes must continue above it (new GCIs,
    /// complete GCIs never go down). Returns what each disk's crash did.
    pub(crate) fn crash(&mut self) -> Vec<(NodeId, CrashOutcome)> {
        self.events.clear();
        self.paused.clear();
        self.cut.clear();
        self.stopped.clear();
        self.held.clear();
        self.installed.clear();
        self.armed_faults.clear();
        self.held_sends.clear();
        self.signs_of_life.clear();
        self.api_cut.clear();
        // mgmd forgets its grants when a new run of the cluster starts,
        // and whatever cut nodes off from it has healed.
        self.arbitrator.grants.clear();
        self.arbitrator.cut_off = NodeSet::EMPTY;
        self.incarnation += 1;
        self.last_delivery_us.clear();
        for reports in self.reports.values_mut() {
            reports.started = false;
            // A system restart forms the cluster, and membership 1, anew.
            reports.membership = (0, NodeSet::EMPTY);
        }
        self.disks
            .iter_mut()
            .map(|(&node, disk)| (node, disk.crash()))
            .collect()
    }

    /// Data node `node` stops (as a process stopped by SIGSTOP, or a VM
    /// that froze) until `until_us`: nothing reaches its blocks and none
    /// of its timers fires; what comes meanwhile waits, in order, and is
    /// delivered at once when it resumes.
    pub(crate) fn pause(&mut self, node: NodeId, until_us: u64) {
        assert!(
            self.is_data_node(node) && !self.paused.contains_key(&node),
            "pause of node {node}: not a running data node"
        );
        assert!(until_us > self.now_us, "a pause ends in the future");
        self.paused.insert(node, VecDeque::new());
        self.schedule(until_us, Event::Resume(node));
    }

    /// Breaks the link between data nodes `a` and `b` (if it was not
    /// broken yet): what is on it is lost, and each end other than
    /// `cut_by` hears of the break from its transport. Returns whether it
    /// was up.
    pub(crate) fn cut_link(&mut self, a: NodeId, b: NodeId, cut_by: Option<NodeId>) -> bool {
        assert!(
            a != b && self.is_data_node(a) && self.is_data_node(b),
            "a link between data nodes {a} and {b}: no such link"
        );
        if !self.cut.insert((a.min(b), a.max(b))) {
            return false;
        }
        for (end, peer) in [(a, b), (b, a)] {
            if Some(end) == cut_by || self.stopped.contains_key(&end) {
                continue;
            }
            let membership = BlockRef::new(end, BlockKind::Membership, 0);
            let report = Envelope {
                from: membership,
                to: membership,
                signal: NodeLinkFailedRep {
                    node: peer,
                    incarnation: self.incarnation_of(peer),
                }
                .into(),
            };
            // The transport notices a closed connection about a network
            // hop later.
            let delay_us = NODE_LINK_MIN_US + self.network_rng.below(NODE_LINK_MAX_US);
            self.deliver_after_us(delay_us, report);
        }
        true
    }

    /// A block's signal leaves its node: an arbitration request goes to
    /// the arbitrator, anything else over the network.
    fn send_from_block(&mut self, envelope: Envelope) {
        if envelope.to.kind == BlockKind::Io {
            if let signal::Signal::ArbitrationReq(request) = envelope.signal {
                return self.arbitrate(envelope.from, request);
            }
        }
        assert!(
            self.is_data_node(envelope.to.node) || envelope.to.kind == BlockKind::Api,
            "signal {} from {} to {}: the simulated cluster has no such node",
            envelope.signal.name(),
            envelope.from,
            envelope.to
        );
        self.send_over_network(envelope);
    }

    /// Nothing sent from data node `from` to data node `to` arrives
    /// before `until_us` (a one-way partition that heals then, or a slow
    /// path): it is held, in order, not lost. A partition longer than
    /// the heartbeats tolerate ends in a node failure, whose broken link
    /// drops what was held.
    pub(crate) fn hold_link(&mut self, from: NodeId, to: NodeId, until_us: u64) {
        assert!(
            from != to && self.is_data_node(from) && self.is_data_node(to),
            "a partition between data nodes {from} and {to}: no such link"
        );
        let held = self.held.entry((from, to)).or_insert(0);
        *held = (*held).max(until_us);
    }

    /// Whether any running data node installed a membership that leaves
    /// out another running node which, in turn, installed one leaving out
    /// the first, the two memberships sharing no member: two sides that
    /// both went on (split brain). Returns the pair, if so. (Memberships
    /// with a member in common are one cluster's, one newer than the
    /// other: a node paused through a change and a node that rejoined
    /// since may each leave the other out, and the paused one finds it
    /// was declared failed when it runs again.)
    pub fn split_brain(&self) -> Option<(NodeId, NodeId)> {
        let running: Vec<(NodeId, NodeSet)> = self
            .reports
            .iter()
            .filter(|(node, reports)| !self.stopped.contains_key(node) && reports.membership.0 > 0)
            .map(|(&node, reports)| (node, reports.membership.1))
            .collect();
        for (index, &(a, members_a)) in running.iter().enumerate() {
            for &(b, members_b) in &running[index + 1..] {
                if !members_a.contains(b)
                    && !members_b.contains(a)
                    && members_a.intersection(members_b).is_empty()
                {
                    return Some((a, b));
                }
            }
        }
        None
    }

    /// The newest membership any node installed in this run: its id and
    /// members.
    pub fn newest_membership(&self) -> Option<(u32, NodeSet)> {
        self.installed
            .last_key_value()
            .map(|(&id, &members)| (id, members))
    }

    /// Whether data node `node` is paused.
    pub fn is_paused(&self, node: NodeId) -> bool {
        self.paused.contains_key(&node)
    }

    /// Whether data node `node` has stopped (killed or shut down).
    pub fn is_stopped(&self, node: NodeId) -> bool {
        self.stopped.contains_key(&node)
    }

    /// Data node `node` stops for good: nothing reaches it any more.
    /// `why` is its shutdown's reason, or "killed". A killed node's links
    /// break at once, losing what is on them; one that shut down closes
    /// them after [`SHUTDOWN_LINGER_US`], so that what it sent last (a
    /// shutdown order to its side) arrives, as production's linger lets
    /// it.
    /// Arms fault point `point` on data node `node`: the node is killed
    /// when it first reaches it.
    pub fn arm_fault(&mut self, node: NodeId, point: FaultPoint) {
        self.arm_fault_with(node, point, FaultAction::Crash);
    }

    /// Arms fault point `point` on data node `node` with `action`: killed
    /// there, or paused there for the delay (what it sends in that step
    /// leaves when it runs again).
    pub fn arm_fault_with(&mut self, node: NodeId, point: FaultPoint, action: FaultAction) {
        self.armed_faults
            .entry(node)
            .or_default()
            .insert(point, action);
    }

    /// Disarms every fault point not reached yet (the faults of a run
    /// are over: what follows checks the healed cluster).
    pub fn disarm_faults(&mut self) {
        self.armed_faults.clear();
    }

    /// Every fault point that fired so far, in order: (time in
    /// microseconds, node, point, action).
    pub fn fired_faults(&self) -> &[(u64, NodeId, FaultPoint, FaultAction)] {
        &self.fired
    }

    /// The simulated arbitrator.
    pub fn arbitrator(&self) -> &Arbitrator {
        &self.arbitrator
    }

    /// Data node `node` can no longer reach the arbitrator (a cut between
    /// it and mgmd): its arbitration requests get no answer.
    pub(crate) fn cut_off_arbitrator(&mut self, node: NodeId) {
        self.arbitrator.cut_off.insert(node);
    }

    /// ARBITRATION_REQ from `from` (a membership), to the node's io
    /// service: decided by the arbitrator and answered after a round trip
    /// between the node and mgmd, unless the node is cut off from it.
    fn arbitrate(&mut self, from: BlockRef, request: ArbitrationReq) {
        if self.arbitrator.cut_off.contains(from.node) {
            return;
        }
        let granted = self.arbitrator.decide(from.node, &request);
        let round_trip_us = 2 * CLIENT_DELAY_MIN_US
            + self
                .network_rng
                .below(2 * (CLIENT_DELAY_MAX_US - CLIENT_DELAY_MIN_US));
        let answer = Envelope {
            from: BlockRef::new(from.node, BlockKind::Io, 0),
            to: from,
            signal: ArbitrationConf {
                membership_id: request.membership_id,
                side: request.side,
                answered: true,
                granted,
            }
            .into(),
        };
        self.schedule(self.now_us + round_trip_us, Event::Deliver(answer));
    }

    pub(crate) fn stop(&mut self, node: NodeId, why: String, graceful: bool) {
        assert!(
            self.is_data_node(node),
            "stop of node {node}: not a data node"
        );
        if self.stopped.contains_key(&node) {
            return;
        }
        self.stopped.insert(node, why);
        self.paused.remove(&node);
        self.held_sends.remove(&node);
        if graceful {
            self.schedule(self.now_us + SHUTDOWN_LINGER_US, Event::Sever(node));
        } else {
            self.sever(node);
        }
    }

    /// Breaks every link of `node`.
    pub(crate) fn sever(&mut self, node: NodeId) {
        for peer in self.nodes.clone() {
            if peer != node {
                self.cut_link(node, peer, Some(node));
            }
        }
    }

    /// Stopped data nodes and why.
    pub fn stopped(&self) -> &BTreeMap<NodeId, String> {
        &self.stopped
    }

    /// The agreed membership `node` last reported: id (0 before the
    /// cluster formed) and members.
    pub fn membership_of(&self, node: NodeId) -> (u32, NodeSet) {
        self.reports_of(node).membership
    }

    /// The connection between API node `api` and data node `data` breaks
    /// (a reset, a cut cable) while both run: what is on it is lost, and
    /// the data node's transport tells its tcs, dict and membership that
    /// the API node is gone, as production's receive thread does. (The
    /// API node's side is the hosted client's: `HostedApiNodes`.)
    pub(crate) fn cut_api_link(&mut self, api: NodeId, data: NodeId) {
        if !self.api_cut.insert((api, data)) || self.stopped.contains_key(&data) {
            return;
        }
        let membership = BlockRef::new(data, BlockKind::Membership, 0);
        let targets = (0..crate::config::TC_INSTANCES)
            .map(|instance| BlockRef::new(data, BlockKind::Tc, instance))
            .chain([BlockRef::new(data, BlockKind::Dict, 0), membership]);
        for to in targets {
            let report = Envelope {
                from: membership,
                to,
                signal: signal::signals::ApiFailRep { node: api }.into(),
            };
            let delay_us = NODE_LINK_MIN_US + self.network_rng.below(NODE_LINK_MAX_US);
            self.deliver_after_us(delay_us, report);
        }
    }

    /// Whether `envelope` can still arrive: its receiver runs, and a
    /// signal between two data nodes, or between an API node and a data
    /// node, needs their link up.
    pub(crate) fn deliverable(&self, envelope: &Envelope) -> bool {
        let (from, to) = (envelope.from.node, envelope.to.node);
        if self.stopped.contains_key(&to) {
            return false;
        }
        let api_link = match (envelope.from.kind, envelope.to.kind) {
            (BlockKind::Api, BlockKind::Api) => None,
            (BlockKind::Api, _) => Some((from, to)),
            (_, BlockKind::Api) => Some((to, from)),
            _ => None,
        };
        if let Some(link) = api_link {
            return !self.api_cut.contains(&link);
        }
        let between_data_nodes = from != to
            && envelope.from.kind != BlockKind::Api
            && envelope.to.kind != BlockKind::Api;
        !(between_data_nodes && self.cut.contains(&(from.min(to), from.max(to))))
    }

    /// `envelope` for a paused node waits for its resumption (returned
    /// back when the node runs).
    pub(crate) fn hold_if_paused(&mut self, envelope: Envelope) -> Option<Envelope> {
        match self.paused.get_mut(&envelope.to.node) {
            Some(held) if envelope.to.kind != BlockKind::Api => {
                held.push_back(envelope);
                None
            }
            _ => Some(envelope),
        }
    }

    /// The paused node `node` runs again: what it sent while stalled at a
    /// fault point leaves now; returns what reached it meanwhile.
    pub(crate) fn resume(&mut self, node: NodeId) -> VecDeque<Envelope> {
        for envelope in self.held_sends.remove(&node).unwrap_or_default() {
            self.send_from_block(envelope);
        }
        self.paused.remove(&node).unwrap_or_default()
    }

    /// The next signals go from a block of `node` (its reports are its own).
    pub(crate) fn set_current_node(&mut self, node: NodeId) {
        self.current_node = node;
    }

    /// The blocks' most recent log lines and shutdown reasons: (time in
    /// microseconds, node, line), oldest first.
    pub fn recent_logs(&self) -> impl Iterator<Item = &(u64, NodeId, String)> {
        self.logs.iter()
    }

    /// The most recent deliveries, oldest first.
    pub fn recent_deliveries(&self) -> impl Iterator<Item = &Delivery> {
        self.recent.iter()
    }

    /// Events still scheduled.
    pub(crate) fn pending_events(&self) -> usize {
        self.events.len()
    }

    pub(crate) fn pool_ref(&self) -> &'static SectionPool {
        self.pool
    }

    fn schedule(&mut self, time_us: u64, event: Event) {
        self.sequence += 1;
        self.events.push(Reverse(Scheduled {
            time_us,
            sequence: self.sequence,
            event,
        }));
    }

    /// Schedules `envelope` over the simulated network: a random delay
    /// for its kind of link, but never before an earlier signal of the same
    /// (sender, receiver) pair.
    pub(crate) fn send_over_network(&mut self, envelope: Envelope) {
        let (from, to) = (envelope.from, envelope.to);
        let api_link = from.kind == BlockKind::Api || to.kind == BlockKind::Api;
        let delay_us = if api_link {
            CLIENT_DELAY_MIN_US
                + self
                    .network_rng
                    .below(CLIENT_DELAY_MAX_US - CLIENT_DELAY_MIN_US + 1)
        } else if from.node == to.node {
            1 + self.network_rng.below(NODE_DELAY_MAX_US)
        } else {
            let link = (from.node.min(to.node), from.node.max(to.node));
            let base = self.link_base_us.get(&link).copied().unwrap_or_else(|| {
                panic!(
                    "signal {} from {from} to {to}: no link between these nodes",
                    envelope.signal.name()
                )
            });
            let held_for_us = self
                .held
                .get(&(from.node, to.node))
                .map_or(0, |&until_us| until_us.saturating_sub(self.now_us));
            held_for_us + base + self.network_rng.below(NODE_LINK_JITTER_US + 1)
        };
        let pair = (envelope.from, envelope.to);
        let earliest = self.last_delivery_us.get(&pair).copied().unwrap_or(0);
        let time_us = (self.now_us + delay_us).max(earliest);
        self.last_delivery_us.insert(pair, time_us);
        self.schedule(time_us, Event::Deliver(envelope));
    }

    /// A random value in `0..bound` from the network stream (for when
    /// the transport connects peers and the runtime starts nodes).
    pub(crate) fn network_random_below(&mut self, bound: u64) -> u64 {
        self.network_rng.below(bound)
    }

    /// Delivers `envelope` after `delay_us`, unordered against every other
    /// signal (as a timer, or a report from the transport threads).
    pub(crate) fn deliver_after_us(&mut self, delay_us: u64, envelope: Envelope) {
        self.schedule(self.now_us + delay_us, Event::Deliver(envelope));
    }

    /// Schedules a client timer.
    pub(crate) fn schedule_client_wake(&mut self, delay_us: u64, token: u64) {
        self.schedule(self.now_us + delay_us, Event::ClientWake(token));
    }

    /// When the next event is due.
    pub(crate) fn next_event_time_us(&self) -> Option<u64> {
        self.events
            .peek()
            .map(|Reverse(scheduled)| scheduled.time_us)
    }

    /// Takes the next event and moves the clock to it.
    pub(crate) fn next_event(&mut self) -> Option<Event> {
        let Reverse(scheduled) = self.events.pop()?;
        assert!(
            scheduled.time_us >= self.now_us,
            "simulated time went backwards: {} after {}",
            scheduled.time_us,
            self.now_us
        );
        self.now_us = scheduled.time_us;
        Some(scheduled.event)
    }

    /// Folds one delivery into the trace hash and the recent list.
    pub(crate) fn record_delivery(&mut self, envelope: &Envelope) {
        let (from, to) = (envelope.from, envelope.to);
        let between_data_nodes =
            from.node != to.node && from.kind != BlockKind::Api && to.kind != BlockKind::Api;
        if between_data_nodes {
            // What production's receive thread marks for every frame.
            self.signs_of_life.insert((to.node, from.node));
        }
        for word in [
            self.now_us,
            pack(envelope.from),
            pack(envelope.to),
            u64::from(envelope.signal.number()),
        ] {
            self.trace_hash = fmix64(self.trace_hash.rotate_left(23) ^ word);
        }
        self.delivered += 1;
        if self.recent.len() == RECENT_DELIVERIES {
            self.recent.pop_front();
        }
        let delivery = Delivery {
            time_us: self.now_us,
            from: envelope.from,
            to: envelope.to,
            signal: envelope.signal.name(),
        };
        self.recent.push_back(delivery);
        if self.trace_to_stderr {
            eprintln!("{}", render_delivery(&delivery, Some(&envelope.signal)));
        }
    }
}

/// One line of a delivery trace.
pub fn render_delivery(delivery: &Delivery, signal: Option<&signal::Signal>) -> String {
    let time = format!(
        "{:>6}.{:03} ms",
        delivery.time_us / 1000,
        delivery.time_us % 1000
    );
    match signal {
        Some(signal) => format!("{time} {} -> {} {signal:?}", delivery.from, delivery.to),
        None => format!(
            "{time} {} -> {} {}",
            delivery.from, delivery.to, delivery.signal
        ),
    }
}

fn pack(address: BlockRef) -> u64 {
    u64::from(address.node.0) << 32
        | u64::from(address.kind as u8) << 16
        | u64::from(address.instance)
}

impl Context for World {
    fn now_ms(&self) -> u64 {
        self.now_us / 1000
    }

    fn random(&mut self) -> u64 {
        self.block_rng.next_u64()
    }

    fn send(&mut self, envelope: Envelope) {
        if self.stopped.contains_key(&self.current_node) {
            // The node crashed at a fault point while handling a signal:
            // nothing it sends after that leaves it.
            return;
        }
        if let Some(held) = self.held_sends.get_mut(&self.current_node) {
            // Stalled at a fault point: the rest of the step leaves when
            // the node runs again.
            held.push(envelope);
            return;
        }
        self.send_from_block(envelope);
    }

    fn heard_from(&mut self, node: NodeId) -> bool {
        self.signs_of_life.remove(&(self.current_node, node))
    }

    fn send_delayed(&mut self, envelope: Envelope, delay_ms: u64) {
        // A timer, as production's TimerQueue: it fires at its time and is
        // not ordered against the pair's ordinary signals.
        self.schedule(
            self.now_us + delay_ms.saturating_mul(1000),
            Event::Deliver(envelope),
        );
    }

    fn report(&mut self, report: Report) {
        let node = self.current_node;
        if let Report::Log(line) | Report::Shutdown(line) = &report {
            if self.logs.len() == RECENT_LOGS {
                self.logs.pop_front();
            }
            self.logs.push_back((self.now_us, node, line.clone()));
            if self.trace_to_stderr {
                eprintln!(
                    "{:>6}.{:03} ms node {node} log: {line}",
                    self.now_us / 1000,
                    self.now_us % 1000
                );
            }
        }
        let report = match report {
            Report::CutLinks(nodes) => {
                for peer in nodes.iter() {
                    self.cut_link(node, peer, Some(node));
                }
                return;
            }
            Report::Shutdown(reason) => return self.stop(node, reason, true),
            other => other,
        };
        let reports = self
            .reports
            .get_mut(&node)
            .expect("the current node is a data node");
        match report {
            Report::NodeStarted => {
                assert!(!reports.started, "node {node} reported started twice");
                reports.started = true;
            }
            Report::LatestGci(gci) => {
                assert!(
                    gci > reports.latest_gci,
                    "dih of node {node} reported GCI {gci} after {}",
                    reports.latest_gci
                );
                reports.latest_gci = gci;
            }
            Report::SchemaVersion(version) => reports.schema_version = version,
            Report::CompleteGci(gci) => {
                assert!(
                    gci >= reports.complete_gci,
                    "node {node} reported complete GCI {gci} after {}",
                    reports.complete_gci
                );
                reports.complete_gci = gci;
            }
            Report::RestoredGci(gci) => reports.restored_gci = gci,
            Report::Membership {
                membership_id,
                live,
            } => {
                assert!(
                    membership_id > reports.membership.0,
                    "node {node} installed membership {membership_id} after {}",
                    reports.membership.0
                );
                reports.membership = (membership_id, live);
                let agreed = *self.installed.entry(membership_id).or_insert(live);
                assert_eq!(
                    agreed, live,
                    "node {node} installed membership {membership_id} as {live}, another node \
                     as {agreed}: one id, one member set"
                );
            }
            Report::CutLinks(_) | Report::Shutdown(_) => {
                unreachable!("handled above")
            }
            Report::Phase { .. }
            | Report::WaitingForNodes(_)
            | Report::Checkpoints(_)
            | Report::StartPhase { .. }
            | Report::CopyProgress { .. }
            | Report::ReadyToStop { .. }
            | Report::Log(_) => {}
        }
    }

    fn pool(&self) -> &'static SectionPool {
        self.pool
    }

    fn fault_point(&mut self, point: FaultPoint) {
        let node = self.current_node;
        let armed = self
            .armed_faults
            .get_mut(&node)
            .and_then(|points| points.remove(&point));
        if let Some(action) = armed {
            self.fired.push((self.now_us, node, point, action));
        }
        match armed {
            None => {}
            Some(FaultAction::Crash) => {
                self.stop(node, format!("fault point {}", point.name()), false)
            }
            Some(FaultAction::Delay { ms }) if !self.paused.contains_key(&node) => {
                self.pause(node, self.now_us + ms.max(1) * 1000);
                self.held_sends.insert(node, Vec::new());
            }
            Some(FaultAction::Delay { .. }) => {}
        }
    }

    fn fs_request(&mut self, from: BlockRef, token: u64, operation: FsOperation) {
        let now_us = self.now_us;
        let disk = self.disks.get_mut(&from.node).unwrap_or_else(|| {
            panic!(
                "{from} asked for file operation {}: not a simulated data node",
                operation.name()
            )
        });
        let done_us = disk.completion_us(now_us, &operation);
        let result = disk.perform(operation);
        let answer = Envelope {
            from: BlockRef::new(from.node, BlockKind::Io, 0),
            to: from,
            signal: FsConf { token, result }.into(),
        };
        self.schedule(done_us, Event::Deliver(answer));
    }
}

/// What a simulated API node may do: send API requests to the data nodes,
/// set timers, draw random numbers from the client stream, take sections.
pub struct ClientIo<'a> {
    pub(crate) world: &'a mut World,
}

impl ClientIo<'_> {
    /// Simulated time in microseconds.
    pub fn now_us(&self) -> u64 {
        self.world.now_us
    }

    /// 64 random bits from the client stream.
    pub fn random(&mut self) -> u64 {
        self.world.client_rng.next_u64()
    }

    /// A random value in `0..bound`.
    pub fn below(&mut self, bound: u64) -> u64 {
        self.world.client_rng.below(bound)
    }

    /// The section pool (clients build key and attribute sections in it).
    pub fn pool(&self) -> &'static SectionPool {
        self.world.pool
    }

    /// The president (lowest data node id): schema requests go there. In a
    /// one-node cluster, the data node.
    pub fn data_node(&self) -> NodeId {
        self.world.president()
    }

    /// Every data node, ascending.
    pub fn data_nodes(&self) -> &[NodeId] {
        self.world.data_nodes()
    }

    /// The data nodes that have not stopped, ascending: those mgmd would
    /// tell a connecting client to reach.
    pub fn running_data_nodes(&self) -> Vec<NodeId> {
        let nodes = self.world.data_nodes().iter().copied();
        nodes.filter(|&node| !self.world.is_stopped(node)).collect()
    }

    /// Sends an API request to a block of a data node.
    pub fn send(&mut self, envelope: Envelope) {
        assert!(
            envelope.from.kind == BlockKind::Api,
            "a simulated client sent {} as {}, which is not an API node",
            envelope.signal.name(),
            envelope.from
        );
        assert!(
            codec::is_api_request(envelope.signal.number()),
            "a simulated client sent {}, which an API node may not send",
            envelope.signal.name()
        );
        assert!(
            self.world.is_data_node(envelope.to.node) && envelope.to.kind != BlockKind::Api,
            "a simulated client sent {} to {}, which is not a block of a data node",
            envelope.signal.name(),
            envelope.to
        );
        self.world.send_over_network(envelope);
    }

    /// Calls the client's `on_wake(token)` after `delay_us`.
    pub fn wake_after_us(&mut self, delay_us: u64, token: u64) {
        self.world.schedule_client_wake(delay_us, token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use signal::fs::{FileName, FsDone, OpenMode};
    use signal::Signal;

    #[test]
    fn file_requests_are_answered_by_the_nodes_disk_in_order() {
        let pool = SectionPool::leak([8, 2, 2, 2, 2, 2]);
        let mut world = World::new(9, vec![NodeId(2), NodeId(3)], pool, false);
        let ldm = BlockRef::new(NodeId(3), BlockKind::Ldm, 0);
        let file = FileName::System { copy: 0 };
        let mode = OpenMode::Create;
        world.fs_request(ldm, 1, FsOperation::Open { file, mode });
        world.fs_request(ldm, 2, FsOperation::Sync { file });
        let mut answers = Vec::new();
        while let Some(Event::Deliver(envelope)) = world.next_event() {
            assert_eq!(envelope.from, BlockRef::new(NodeId(3), BlockKind::Io, 0));
            assert_eq!(envelope.to, ldm);
            let Signal::FsConf(conf) = envelope.signal else {
                panic!("not an FsConf");
            };
            answers.push((conf.token, conf.result));
        }
        assert_eq!(
            answers,
            vec![(1, Ok(FsDone::Opened { size: 0 })), (2, Ok(FsDone::Synced))]
        );
        assert!(world.disk(NodeId(3)).contents(&file).is_some());
        assert!(
            world.disk(NodeId(2)).contents(&file).is_none(),
            "one disk per node"
        );
    }
}
