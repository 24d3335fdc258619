//! The simulated data nodes: the production blocks of every node, each
//! node's built by `datanode::wiring::build_blocks` from one generated
//! config that lists them all, driven in one thread by the [`World`]'s
//! event queue.
//!
//! Nothing here copies block logic. The simulator only decides what the
//! production runtime and transport decide (when a signal is handled, what
//! time it is, what a random draw gives, when a peer connects) and plays
//! the API nodes through a [`Client`].

use crate::config::{cluster_config, ClusterShape, NodeLimits};
use crate::disk::CrashOutcome;
use crate::world::{render_delivery, ClientIo, Event, World};
use config::ClusterConfig;
use dict::Dict;
use dih::Dih;
use kernel::Block;
use ldm::Ldm;
use membership::Membership;
use signal::section::CLASS_SIZES;
use signal::signals::{NodeConnectedRep, StartPhaseReq};
use signal::{BlockKind, BlockRef, Envelope, NodeId, SectionPool};
use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Mutex;
use tc::Tc;

/// A simulated API node (or several): gets every signal addressed to an
/// API block, and its own timers.
pub trait Client {
    /// A signal from the data node reached the API node `envelope.to`.
    fn on_signal(&mut self, envelope: Envelope, io: &mut ClientIo<'_>);

    /// A timer set with [`ClientIo::wake_after_us`] fired.
    fn on_wake(&mut self, token: u64, io: &mut ClientIo<'_>);
}

/// A client for phases with no API node: any signal to one is a bug.
pub struct NoClient;

impl Client for NoClient {
    fn on_signal(&mut self, envelope: Envelope, _io: &mut ClientIo<'_>) {
        panic!(
            "signal {} from {} to API node {} before any client exists",
            envelope.signal.name(),
            envelope.from,
            envelope.to
        );
    }

    fn on_wake(&mut self, token: u64, _io: &mut ClientIo<'_>) {
        panic!("client timer {token} fired before any client exists");
    }
}

/// A block the simulator can also look at as its concrete type (for the
/// blocks' public accessors in end-of-run checks).
pub trait SimBlock: Block {
    /// The block as `Any`, to downcast.
    fn as_any(&self) -> &dyn Any;
}

impl<T: Block + Any> SimBlock for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Simulated time the nodes may take to start before the run is declared stuck.
const START_LIMIT_US: u64 = 60_000_000;

/// Latest simulated time at which a node begins its start, and at which
/// the transport reports a peer connected: the nodes start in any order,
/// and a peer may connect before or after a node's start began.
const START_SPREAD_US: u64 = 2_000;

/// The pool counts a cluster of `nodes` data nodes uses: per node, sized
/// for the config's 1024 operation records (see
/// `SectionPool::leak_for_operations`).
fn pool_counts(nodes: u16) -> [u32; CLASS_SIZES.len()] {
    [3072, 2048, 256, 64, 32, 16].map(|count| count * u32::from(nodes.max(1)))
}

/// Pools of finished simulations, all buffers returned, with the node
/// count they are sized for: a pool is leaked (sections need a `'static`
/// one), so reusing them keeps a run of many seeds from leaking one per
/// seed. Reuse cannot change a run: a fully returned pool hands out buffers
/// whose contents no one reads before writing them.
static SPARE_POOLS: Mutex<Vec<(u16, &'static SectionPool)>> = Mutex::new(Vec::new());

fn take_pool(nodes: u16) -> &'static SectionPool {
    let mut spares = SPARE_POOLS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match spares.iter().position(|&(count, _)| count == nodes) {
        Some(index) => spares.swap_remove(index).1,
        None => SectionPool::leak(pool_counts(nodes)),
    }
}

/// Whether every buffer of `pool` (made for `nodes` nodes) is back in it.
pub(crate) fn pool_is_full(pool: &SectionPool, nodes: u16) -> bool {
    pool_counts(nodes)
        .iter()
        .enumerate()
        .all(|(class, &count)| pool.free_in_class(class) == count as usize)
}

/// The simulated data nodes and their world.
pub struct Simulation {
    seed: u64,
    shape: ClusterShape,
    world: World,
    /// Every block of every node by (node, kind, instance).
    blocks: BTreeMap<(NodeId, BlockKind, u16), Box<dyn SimBlock>>,
    /// The config every node's blocks are built from (again at a restart).
    config: ClusterConfig,
    /// Whole-cluster restarts so far.
    restarts: u32,
    /// The test and the test function that rerun a failed seed.
    replay: (&'static str, &'static str),
    /// What the run did besides its seed (the faults it drew), for a
    /// failure report.
    context: String,
}

/// Every block of every node of `nodes`, built by `datanode::wiring`
/// from `config`, by (node, kind, instance).
fn build_blocks(
    config: &ClusterConfig,
    nodes: &[NodeId],
) -> BTreeMap<(NodeId, BlockKind, u16), Box<dyn SimBlock>> {
    let mut blocks: BTreeMap<(NodeId, BlockKind, u16), Box<dyn SimBlock>> = BTreeMap::new();
    for &node in nodes {
        add_node_blocks(&mut blocks, config, node, false);
    }
    blocks
}

/// Adds the blocks of data node `node` to `blocks`; `joining`: it
/// rejoins a running cluster by a node restart.
fn add_node_blocks(
    blocks: &mut BTreeMap<(NodeId, BlockKind, u16), Box<dyn SimBlock>>,
    config: &ClusterConfig,
    node: NodeId,
    joining: bool,
) {
    {
        let built = datanode::wiring::build_blocks_for(config, node, joining)
            .unwrap_or_else(|error| panic!("cannot build simulated node {node}: {error}"));
        let mut add = |block: Box<dyn SimBlock>| {
            let address = block.address();
            assert_eq!(address.node, node, "wiring built a block of another node");
            let key = (address.node, address.kind, address.instance);
            let previous = blocks.insert(key, block);
            assert!(previous.is_none(), "wiring built {address} twice");
        };
        for ldm in built.ldms {
            add(Box::new(ldm));
        }
        for tc in built.tcs {
            add(Box::new(tc));
        }
        add(Box::new(built.dih));
        add(Box::new(built.dict));
        add(Box::new(built.membership));
    }
}

impl Simulation {
    /// Builds one data node's blocks from the generated config with the
    /// default limits; nothing runs yet. `trace_to_stderr` prints every signal.
    pub fn new(seed: u64, trace_to_stderr: bool) -> Simulation {
        Simulation::with_limits(seed, NodeLimits::default(), trace_to_stderr)
    }

    /// Like [`Simulation::new`], with the node's record pools from `limits`.
    pub fn with_limits(seed: u64, limits: NodeLimits, trace_to_stderr: bool) -> Simulation {
        Simulation::with_cluster(seed, ClusterShape::default(), limits, trace_to_stderr)
    }

    /// Builds the blocks of every data node of `shape` (each node's
    /// record pools from `limits`); nothing runs yet.
    pub fn with_cluster(
        seed: u64,
        shape: ClusterShape,
        limits: NodeLimits,
        trace_to_stderr: bool,
    ) -> Simulation {
        let config = cluster_config(shape, limits);
        let nodes = shape.node_ids();
        let blocks = build_blocks(&config, &nodes);
        Simulation {
            seed,
            shape,
            world: World::new(seed, nodes, take_pool(shape.data_nodes), trace_to_stderr),
            blocks,
            config,
            restarts: 0,
            replay: ("simulation", "replay_seed"),
            context: String::new(),
        }
    }

    /// The cluster's shape.
    pub fn shape(&self) -> ClusterShape {
        self.shape
    }

    /// The seed of this run.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The world (clock, trace hash, reports).
    pub fn world(&self) -> &World {
        &self.world
    }

    /// Starts every node as the production runtime and transport do: each
    /// node's membership gets phase 0 from itself, and a NodeConnectedRep
    /// from its transport for every peer, each at a random time (a peer
    /// may connect before the node's start began). Runs until every node's
    /// membership reported it started. After a [`Simulation::crash`], this
    /// is the system restart: the same phases, from what the disks hold.
    pub fn start_nodes(&mut self) {
        let started = self.start_nodes_for(u64::MAX);
        assert!(started, "an unlimited start ended unstarted");
    }

    /// Like [`Simulation::start_nodes`], but stops after `max_signals`
    /// delivered signals if the nodes have not all started by then (so
    /// that a test can crash the cluster in the middle of its restart).
    /// Returns whether every node started.
    pub fn start_nodes_for(&mut self, max_signals: u64) -> bool {
        self.begin_start();
        self.run_start(max_signals, |world| world.all_started())
    }

    /// Like [`Simulation::start_nodes`], for a restart some nodes may
    /// refuse (stale ones shut down, saying why): runs until every node
    /// has either started or stopped.
    pub fn start_nodes_settled(&mut self) {
        self.begin_start();
        self.run_start(u64::MAX, |world| {
            let nodes = world.data_nodes().iter();
            nodes
                .clone()
                .all(|&node| world.node_started(node) || world.is_stopped(node))
        });
    }

    /// Posts each node's phase 0 and its transport's reports of its peers.
    fn begin_start(&mut self) {
        let nodes = self.world.data_nodes().to_vec();
        for &node in &nodes {
            let membership = BlockRef::new(node, BlockKind::Membership, 0);
            let post = |world: &mut World, signal: signal::Signal| {
                let delay_us = world.network_random_below(START_SPREAD_US);
                world.deliver_after_us(
                    delay_us,
                    Envelope {
                        from: membership,
                        to: membership,
                        signal,
                    },
                );
            };
            let begin = StartPhaseReq {
                phase: membership::start::BEGIN,
            };
            post(&mut self.world, begin.into());
            for &peer in nodes.iter().filter(|&&peer| peer != node) {
                let connected = NodeConnectedRep {
                    node: peer,
                    incarnation: self.world.incarnation_of(peer),
                };
                post(&mut self.world, connected.into());
            }
        }
    }

    /// Runs the start until `done` or `max_signals` more deliveries;
    /// returns whether it is done.
    fn run_start(&mut self, max_signals: u64, done: impl Fn(&World) -> bool) -> bool {
        let limit_us = self.world.now_us() + START_LIMIT_US;
        let until = self.world.delivered().saturating_add(max_signals);
        while !done(&self.world) {
            if self.world.delivered() >= until {
                return false;
            }
            assert!(
                self.step(&mut NoClient),
                "the nodes ran out of work during their start"
            );
            assert!(
                self.world.now_us() < limit_us,
                "the nodes' start did not end within {} simulated seconds",
                START_LIMIT_US / 1_000_000
            );
        }
        true
    }

    /// The whole cluster crashes now, at whatever point its work had
    /// reached: every signal in flight, timer and disk answer is dropped,
    /// every disk loses what was not synced (or keeps it torn, see
    /// [`crate::Disk::crash`]), and every block is thrown away. Fresh blocks
    /// are built from the same config over the same disks; nothing runs
    /// until [`Simulation::start_nodes`] restarts them. The API nodes'
    /// connections are gone with the events: a client must register again.
    /// Returns what each node's disk lost.
    pub fn crash(&mut self) -> Vec<(NodeId, CrashOutcome)> {
        let outcome = self.world.crash();
        // The old blocks go first, returning their sections to the pool.
        self.blocks.clear();
        self.blocks = build_blocks(&self.config, self.world.data_nodes());
        self.restarts += 1;
        outcome
    }

    /// A failure report names `test`'s `function` to rerun the seed.
    pub(crate) fn set_replay(&mut self, test: &'static str, function: &'static str) {
        self.replay = (test, function);
    }

    /// A failure report says `context` too (the faults a run drew).
    pub(crate) fn set_context(&mut self, context: String) {
        self.context = context;
    }

    /// Whole-cluster crashes so far.
    pub fn restarts(&self) -> u32 {
        self.restarts
    }

    /// The world, to inject disk faults or corrupt a file at rest.
    pub fn world_mut(&mut self) -> &mut World {
        &mut self.world
    }

    /// Runs the next event. Returns false when none is left.
    pub fn step(&mut self, client: &mut dyn Client) -> bool {
        let Some(event) = self.world.next_event() else {
            return false;
        };
        match event {
            Event::Deliver(envelope) => {
                if !self.world.deliverable(&envelope) {
                    return true;
                }
                let Some(envelope) = self.world.hold_if_paused(envelope) else {
                    return true;
                };
                self.world.record_delivery(&envelope);
                if envelope.to.kind == BlockKind::Api {
                    client.on_signal(
                        envelope,
                        &mut ClientIo {
                            world: &mut self.world,
                        },
                    );
                } else {
                    self.deliver_to_block(envelope);
                }
            }
            Event::Resume(node) => {
                // Everything that waited, at once and in order, before
                // anything else reaches the node.
                for envelope in self.world.resume(node) {
                    if !self.world.deliverable(&envelope) {
                        // Its link broke, or the node stopped, meanwhile.
                        continue;
                    }
                    self.world.record_delivery(&envelope);
                    self.deliver_to_block(envelope);
                }
            }
            Event::Sever(node) => self.world.sever(node),
            Event::ClientWake(token) => client.on_wake(
                token,
                &mut ClientIo {
                    world: &mut self.world,
                },
            ),
        }
        true
    }

    fn deliver_to_block(&mut self, envelope: Envelope) {
        let to = envelope.to;
        let key = (to.node, to.kind, to.instance);
        let Some(block) = self.blocks.get_mut(&key) else {
            panic!(
                "signal {} from {} to {}: no such block",
                envelope.signal.name(),
                envelope.from,
                envelope.to
            );
        };
        self.world.set_current_node(to.node);
        block.handle(envelope, &mut self.world);
    }

    /// Data node `node` stops for `duration_us` of simulated time (as a
    /// process stopped by SIGSTOP): nothing reaches its blocks and none of
    /// its timers fires; then what came meanwhile is delivered at once, in
    /// order.
    pub fn pause_node(&mut self, node: NodeId, duration_us: u64) {
        let until = self.world.now_us() + duration_us;
        self.world.pause(node, until);
    }

    /// Breaks the link between data nodes `a` and `b` (a cut cable, a
    /// reset connection): what was on it is lost and both ends hear of it.
    pub fn cut_link(&mut self, a: NodeId, b: NodeId) {
        self.world.cut_link(a, b, None);
    }

    /// Data node `node` can no longer reach the arbitrator (mgmd): its
    /// arbitration requests go unanswered from now on.
    pub fn cut_off_arbitrator(&mut self, node: NodeId) {
        self.world.cut_off_arbitrator(node);
    }

    /// The stopped data node `node` starts again while the others run
    /// (a node restart, docs/design/0018-node-restart.md): fresh blocks
    /// over its disk, a higher incarnation, its links up again; it begins
    /// its start and asks the running cluster to admit it. Nothing of its
    /// old incarnation is left in flight.
    pub fn restart_node(&mut self, node: NodeId) {
        self.restart_node_with(node, false);
    }

    /// As [`Simulation::restart_node`]; `initial`: its files are deleted
    /// first (`--initial`), so it copies every row.
    pub fn restart_node_with(&mut self, node: NodeId, initial: bool) {
        self.world.restart_node(node);
        if initial {
            self.world.disk_mut(node).wipe();
        }
        // The old blocks go first, returning their sections to the pool.
        self.blocks.retain(|&(owner, _, _), _| owner != node);
        add_node_blocks(&mut self.blocks, &self.config, node, true);
        let membership_of = |node| BlockRef::new(node, BlockKind::Membership, 0);
        let post = |world: &mut World, to: NodeId, signal: signal::Signal| {
            let delay_us = world.network_random_below(START_SPREAD_US);
            let envelope = Envelope {
                from: membership_of(to),
                to: membership_of(to),
                signal,
            };
            world.deliver_after_us(delay_us, envelope);
        };
        let begin = StartPhaseReq {
            phase: membership::start::BEGIN,
        };
        post(&mut self.world, node, begin.into());
        let peers: Vec<NodeId> = self.world.running_nodes();
        for peer in peers.into_iter().filter(|&peer| peer != node) {
            let connected = NodeConnectedRep {
                node: peer,
                incarnation: self.world.incarnation_of(peer),
            };
            post(&mut self.world, node, connected.into());
            let connected = NodeConnectedRep {
                node,
                incarnation: self.world.incarnation_of(node),
            };
            post(&mut self.world, peer, connected.into());
        }
    }

    /// Data node `node` dies now (kill -9): nothing reaches it any more,
    /// and its links break. Its disk keeps what it had.
    pub fn kill_node(&mut self, node: NodeId) {
        self.world.stop(node, "killed".to_string(), false);
    }

    pub(crate) fn world_io(&mut self) -> ClientIo<'_> {
        ClientIo {
            world: &mut self.world,
        }
    }

    /// Runs events until simulated time reaches `until_us` (or none is left).
    pub fn run_until_us(&mut self, client: &mut dyn Client, until_us: u64) {
        while self
            .world
            .next_event_time_us()
            .is_some_and(|time| time <= until_us)
        {
            self.step(client);
        }
    }

    fn typed<T: Any>(&self, kind: BlockKind) -> impl Iterator<Item = &T> {
        self.blocks
            .iter()
            .filter(move |((_, block_kind, _), _)| *block_kind == kind)
            .map(|(_, block)| {
                block
                    .as_any()
                    .downcast_ref::<T>()
                    .expect("blocks of one kind share one type")
            })
    }

    /// Every node's tc instances.
    pub fn tcs(&self) -> impl Iterator<Item = &Tc> {
        self.typed::<Tc>(BlockKind::Tc)
    }

    /// Every node's ldm instances.
    pub fn ldms(&self) -> impl Iterator<Item = &Ldm> {
        self.typed::<Ldm>(BlockKind::Ldm)
    }

    /// Every node's dih.
    pub fn dihs(&self) -> impl Iterator<Item = &Dih> {
        self.typed::<Dih>(BlockKind::Dih)
    }

    /// Every node's membership.
    pub fn memberships(&self) -> impl Iterator<Item = &Membership> {
        self.typed::<Membership>(BlockKind::Membership)
    }

    /// Every node's dict.
    pub fn dicts(&self) -> impl Iterator<Item = &Dict> {
        self.typed::<Dict>(BlockKind::Dict)
    }

    /// Whether `nodes` agree on the schema: every tc, ldm and dict of them
    /// holds the same tables (id, version) and index revision of each,
    /// every tc and ldm the hidden tables of the unique indexes those
    /// revisions name and no others, and no dict is still taking the master
    /// role over. `Err` says who differs from whom. (A create
    /// or drop a failed master dict had under way is finished or undone
    /// everywhere: docs/design/0016-schema-takeover.md.)
    pub fn schema_agreement(&self, nodes: &[NodeId]) -> Result<Vec<(u32, u32)>, String> {
        let mut held: Vec<(BlockRef, Vec<(u32, u32)>)> = Vec::new();
        // (id, version, index revision) of each table, per block.
        type Revisions = Vec<(u32, u32, u32)>;
        let mut revisions: Vec<(BlockRef, Revisions)> = Vec::new();
        let mine = |block: BlockRef| nodes.contains(&block.node);
        let versions = |tables: &[(u32, u32, u32)]| -> Vec<(u32, u32)> {
            tables
                .iter()
                .map(|&(id, version, _)| (id, version))
                .collect()
        };
        for tc in self.tcs().filter(|tc| mine(kernel::Block::address(*tc))) {
            let tables = tc.table_versions();
            held.push((kernel::Block::address(tc), versions(&tables)));
            revisions.push((kernel::Block::address(tc), tables));
        }
        for ldm in self.ldms().filter(|ldm| mine(kernel::Block::address(*ldm))) {
            let tables = ldm.table_versions();
            held.push((kernel::Block::address(ldm), versions(&tables)));
            revisions.push((kernel::Block::address(ldm), tables));
        }
        for dict in self
            .dicts()
            .filter(|dict| mine(kernel::Block::address(*dict)))
        {
            let address = kernel::Block::address(dict);
            if dict.is_taking_over() {
                return Err(format!("{address} is still taking the master role over"));
            }
            let tables = dict.table_versions();
            held.push((address, versions(&tables)));
            revisions.push((address, tables));
        }
        // Indexes too: every tc, ldm and dict at the same revision of each.
        if let Some((first, tables)) = revisions.first() {
            for (block, other) in &revisions {
                if other != tables {
                    return Err(format!(
                        "{first} holds tables (id, version, index revision) {tables:?}, \
                         {block} holds {other:?}"
                    ));
                }
            }
        }
        // The hidden tables every tc and ldm holds: those of the unique
        // indexes the dicts' definitions name (a unique index dropped
        // alone takes its table with it everywhere).
        let named: Vec<(u32, u32)> = {
            let dict = self
                .dicts()
                .find(|dict| mine(kernel::Block::address(*dict)));
            let mut named: Vec<(u32, u32)> =
                dict.map(|dict| dict.hidden_tables()).unwrap_or_default();
            named.sort_unstable();
            named
        };
        let mut hidden: Vec<(BlockRef, Vec<(u32, u32)>)> = Vec::new();
        for tc in self.tcs().filter(|tc| mine(kernel::Block::address(*tc))) {
            hidden.push((kernel::Block::address(tc), tc.hidden_tables()));
        }
        for ldm in self.ldms().filter(|ldm| mine(kernel::Block::address(*ldm))) {
            hidden.push((kernel::Block::address(ldm), ldm.hidden_tables()));
        }
        for (block, mut tables) in hidden {
            tables.sort_unstable();
            if tables != named {
                return Err(format!(
                    "{block} holds hidden tables (id, base) {tables:?}, the dicts name {named:?}"
                ));
            }
        }
        let Some((first, tables)) = held.first().cloned() else {
            return Ok(Vec::new());
        };
        for (block, other) in &held {
            if *other != tables {
                return Err(format!(
                    "{first} holds tables {tables:?}, {block} holds {other:?}"
                ));
            }
        }
        Ok(tables)
    }

    /// Whether the running nodes' replicas of every partition of table
    /// `table_id` hold the same committed rows (row id, GCI, image) as
    /// they stand now (run it on a quiet cluster). `Err` names the first
    /// difference.
    pub fn replicas_agree(&self, table_id: u32) -> Result<(), String> {
        let mut first: BTreeMap<u32, (BlockRef, ldm::CommittedRows)> = BTreeMap::new();
        for ldm in self.ldms() {
            let address = kernel::Block::address(ldm);
            if self.world.is_stopped(address.node) {
                continue;
            }
            for partition in ldm.partitions_of(table_id) {
                let rows = ldm
                    .committed_rows(table_id, partition)
                    .expect("a partition the ldm listed");
                match first.get(&partition) {
                    None => {
                        first.insert(partition, (address, rows));
                    }
                    Some((other, expected)) if *expected != rows => {
                        let differ = expected
                            .iter()
                            .zip(&rows)
                            .find(|(a, b)| a != b)
                            .map(|(a, b)| {
                                format!(
                                    "row {} (GCI {}) against row {} (GCI {})",
                                    a.0, a.1, b.0, b.1
                                )
                            })
                            .unwrap_or_else(|| {
                                format!("{} rows against {}", expected.len(), rows.len())
                            });
                        return Err(format!(
                            "table {table_id} partition {partition}: {other} and {address} differ: {differ}"
                        ));
                    }
                    Some(_) => {}
                }
            }
        }
        Ok(())
    }

    /// Whether every section buffer is back in the pool.
    pub fn sections_all_returned(&self) -> bool {
        pool_is_full(self.world.pool_ref(), self.shape.data_nodes)
    }

    /// Events still scheduled (timers of the blocks and the client).
    pub fn pending_events(&self) -> usize {
        self.world.pending_events()
    }
}

impl Drop for Simulation {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // A block or a check failed: say how to get here again, and
            // what the nodes did just before.
            let seed = self.seed;
            let ClusterShape {
                data_nodes,
                replicas,
            } = self.shape;
            let (test, replay) = self.replay;
            let mut text = format!(
                "\nsim: seed {seed} ({data_nodes} data nodes, replicas {replicas}) FAILED at {} us \
                 simulated after {} signals and {} whole-cluster restarts.\n\
                 sim: rerun it with\n    SIM_SEED={seed} SIM_NODES={data_nodes} \
                 SIM_REPLICAS={replicas} cargo test -p sim --release --test {test} -- \
                 --ignored {replay} --nocapture\n\
                 sim: (add SIM_TRACE=1 to print every signal).\n",
                self.world.now_us(),
                self.world.delivered(),
                self.restarts
            );
            if !self.context.is_empty() {
                text.push_str(&format!("sim: {}\n", self.context));
            }
            text.push_str("sim: blocks:\n");
            for tc in self.tcs() {
                let counters = tc.counters();
                text.push_str(&format!(
                    "    {}: {} transaction records in use; {} commits, {} aborts\n",
                    tc.address(),
                    tc.transactions_in_use(),
                    counters.commits,
                    counters.aborts
                ));
            }
            for ldm in self.ldms() {
                text.push_str(&format!(
                    "    {}: {} operation records in use\n",
                    ldm.address(),
                    ldm.operations_in_use()
                ));
            }
            text.push_str("sim: last log lines of the nodes:\n");
            for (time_us, node, line) in self.world.recent_logs() {
                text.push_str(&format!(
                    "    {:>6}.{:03} ms node {node}: {line}\n",
                    time_us / 1000,
                    time_us % 1000
                ));
            }
            text.push_str("sim: last signals delivered:\n");
            for delivery in self.world.recent_deliveries() {
                text.push_str("    ");
                text.push_str(&render_delivery(delivery, None));
                text.push('\n');
            }
            eprintln!("{text}");
            // The pool may still lend sections to events that die with this
            // run: do not hand it to the next one.
            return;
        }
        // Drop pending events (and the sections they hold) before deciding
        // whether the pool can serve another run.
        while self.world.next_event().is_some() {}
        let pool = self.world.pool_ref();
        self.blocks.clear();
        let nodes = self.shape.data_nodes;
        if pool_is_full(pool, nodes) {
            // The next run may be on another test thread: the buffers this
            // thread keeps free for itself go back to the pool first.
            pool.return_thread_cache();
            SPARE_POOLS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push((nodes, pool));
        }
    }
}
