//! The simulated data node: the production blocks, built by
//! `datanode::wiring::build_blocks` from a generated config, driven in one
//! thread by the [`World`]'s event queue.
//!
//! Nothing here copies block logic. The simulator only decides what the
//! production runtime decides (when a signal is handled, what time it is,
//! what a random draw gives) and plays the API nodes through a [`Client`].

use crate::config::{cluster_config, NodeLimits, DATA_NODE};
use crate::world::{render_delivery, ClientIo, Event, World};
use kernel::Block;
use ldm::Ldm;
use signal::section::CLASS_SIZES;
use signal::signals::StartPhaseReq;
use signal::{BlockKind, BlockRef, Envelope, SectionPool};
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

/// Simulated time the node may take to start before the run is declared stuck.
const START_LIMIT_US: u64 = 60_000_000;

/// The pool counts every simulated node uses (sized for the config's
/// 1024 operation records; see `SectionPool::leak_for_operations`).
fn pool_counts() -> [u32; CLASS_SIZES.len()] {
    [3072, 2048, 256, 64, 32, 16]
}

/// Pools of finished simulations, all buffers returned: a pool is leaked
/// (sections need a `'static` one), so reusing them keeps a run of many
/// seeds from leaking one per seed. Reuse cannot change a run: a fully
/// returned pool hands out buffers whose contents no one reads before
/// writing them.
static SPARE_POOLS: Mutex<Vec<&'static SectionPool>> = Mutex::new(Vec::new());

fn take_pool() -> &'static SectionPool {
    let spare = SPARE_POOLS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .pop();
    spare.unwrap_or_else(|| SectionPool::leak(pool_counts()))
}

/// Whether every buffer of `pool` is back in it.
pub(crate) fn pool_is_full(pool: &SectionPool) -> bool {
    pool_counts()
        .iter()
        .enumerate()
        .all(|(class, &count)| pool.free_in_class(class) == count as usize)
}

/// One simulated data node and its world.
pub struct Simulation {
    seed: u64,
    world: World,
    blocks: BTreeMap<(BlockKind, u16), Box<dyn SimBlock>>,
}

impl Simulation {
    /// Builds the node's blocks from the generated config with the default
    /// limits; nothing runs yet. `trace_to_stderr` prints every signal.
    pub fn new(seed: u64, trace_to_stderr: bool) -> Simulation {
        Simulation::with_limits(seed, NodeLimits::default(), trace_to_stderr)
    }

    /// Like [`Simulation::new`], with the node's record pools from `limits`.
    pub fn with_limits(seed: u64, limits: NodeLimits, trace_to_stderr: bool) -> Simulation {
        let config = cluster_config(limits);
        let node = datanode::wiring::build_blocks(&config, DATA_NODE)
            .unwrap_or_else(|error| panic!("cannot build the simulated node: {error}"));
        let mut blocks: BTreeMap<(BlockKind, u16), Box<dyn SimBlock>> = BTreeMap::new();
        let mut add = |block: Box<dyn SimBlock>| {
            let address = block.address();
            assert_eq!(
                address.node, DATA_NODE,
                "wiring built a block of another node"
            );
            let previous = blocks.insert((address.kind, address.instance), block);
            assert!(previous.is_none(), "wiring built {address} twice");
        };
        for ldm in node.ldms {
            add(Box::new(ldm));
        }
        for tc in node.tcs {
            add(Box::new(tc));
        }
        add(Box::new(node.dih));
        add(Box::new(node.dict));
        add(Box::new(node.membership));
        Simulation {
            seed,
            world: World::new(seed, DATA_NODE, take_pool(), trace_to_stderr),
            blocks,
        }
    }

    /// The seed of this run.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The world (clock, trace hash, reports).
    pub fn world(&self) -> &World {
        &self.world
    }

    /// Starts the node as the production runtime does (phase 0 from
    /// membership to itself) and runs until membership reports it started.
    pub fn start_node(&mut self) {
        let membership = BlockRef::new(DATA_NODE, BlockKind::Membership, 0);
        self.world.send_over_network(Envelope {
            from: membership,
            to: membership,
            signal: StartPhaseReq {
                phase: membership::start::BEGIN,
            }
            .into(),
        });
        while !self.world.node_started() {
            assert!(
                self.step(&mut NoClient),
                "the node ran out of work before it started"
            );
            assert!(
                self.world.now_us() < START_LIMIT_US,
                "the node did not start within {} simulated seconds",
                START_LIMIT_US / 1_000_000
            );
        }
    }

    /// Runs the next event. Returns false when none is left.
    pub fn step(&mut self, client: &mut dyn Client) -> bool {
        let Some(event) = self.world.next_event() else {
            return false;
        };
        match event {
            Event::Deliver(envelope) => {
                self.world.record_delivery(&envelope);
                if envelope.to.kind == BlockKind::Api {
                    client.on_signal(
                        envelope,
                        &mut ClientIo {
                            world: &mut self.world,
                        },
                    );
                } else {
                    let key = (envelope.to.kind, envelope.to.instance);
                    let Some(block) = self.blocks.get_mut(&key) else {
                        panic!(
                            "signal {} from {} to {}: no such block on the node",
                            envelope.signal.name(),
                            envelope.from,
                            envelope.to
                        );
                    };
                    block.handle(envelope, &mut self.world);
                }
            }
            Event::ClientWake(token) => client.on_wake(
                token,
                &mut ClientIo {
                    world: &mut self.world,
                },
            ),
        }
        true
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
            .filter(move |((block_kind, _), _)| *block_kind == kind)
            .map(|(_, block)| {
                block
                    .as_any()
                    .downcast_ref::<T>()
                    .expect("blocks of one kind share one type")
            })
    }

    /// The node's tc instances.
    pub fn tcs(&self) -> impl Iterator<Item = &Tc> {
        self.typed::<Tc>(BlockKind::Tc)
    }

    /// The node's ldm instances.
    pub fn ldms(&self) -> impl Iterator<Item = &Ldm> {
        self.typed::<Ldm>(BlockKind::Ldm)
    }

    /// Whether every section buffer is back in the pool.
    pub fn sections_all_returned(&self) -> bool {
        pool_is_full(self.world.pool_ref())
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
            // what the node did just before.
            let seed = self.seed;
            let mut text = format!(
                "\nsim: seed {seed} FAILED at {} us simulated after {} signals.\n\
                 sim: rerun it with\n    SIM_SEED={seed} cargo test -p sim --release \
                 --test simulation -- --ignored replay_seed --nocapture\n\
                 sim: (add SIM_TRACE=1 to print every signal). Blocks:\n",
                self.world.now_us(),
                self.world.delivered()
            );
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
        if pool_is_full(pool) {
            SPARE_POOLS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(pool);
        }
    }
}
