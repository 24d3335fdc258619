//! kernel: what every block stands on (docs/design/processes-and-blocks.md).
//!
//! A block is a synchronous state machine that talks to other blocks only
//! through signals. It never touches a socket, a file, a clock, a thread or
//! a random source; it gets time, randomness and sending from a [`Context`].
//! Production implements that context with threads and job queues
//! ([`block_thread`], [`mesh`]); the simulator implements it with a virtual
//! clock in one thread. The same block code runs in both.
//!
//! Architecture invariant: `kernel` knows signals but no block; blocks know
//! the kernel and signals but never each other.

pub mod answers;
pub mod block_thread;
pub mod faults;
pub mod liveness;
pub mod mesh;
pub mod node_failures;
pub mod schema_takeover;
pub mod spsc;
pub mod stale;
pub mod stats;
pub mod testing;
pub mod timers;
pub mod waker;

use signal::fs::FsOperation;
use signal::{BlockRef, Envelope, Gci, SectionPool, Signal};

/// A block: one state machine of a data node.
pub trait Block: Send {
    /// This block's own address.
    fn address(&self) -> BlockRef;

    /// Handles one signal to completion: no blocking, no waiting, and no
    /// heap allocation on hot paths once started.
    fn handle(&mut self, envelope: Envelope, ctx: &mut dyn Context);

    /// A hint that `envelope` will be handled after `distance` others
    /// (1: next): a block may start loading what it will touch for it
    /// (`stdx::prefetch`), further stages of a dependent chain as the
    /// distance shrinks, so that the cache misses of queued signals
    /// overlap the work on the current one. Must not change any state or
    /// result; the simulator never calls it. Default: nothing.
    fn prefetch(&self, _envelope: &Envelope, _distance: usize) {}
}

/// What the node reports to the outside (mgmd status, reports, tests).
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Report {
    /// The node finished its start phases and serves.
    NodeStarted,
    /// The current GCI after a switch.
    LatestGci(Gci),
    /// The schema version after a create or drop.
    SchemaVersion(u32),
    /// The latest GCI recorded complete (durable) in the system files.
    CompleteGci(Gci),
    /// The GCI this node restored at its start (0: initial start).
    RestoredGci(Gci),
    /// The node waits to form the cluster: the data nodes (bit `id` set for
    /// node `id`) not connected yet. Every data node takes part in a start
    /// (a system restart needs each node's disk), so the operator must
    /// start them; reported again while the wait lasts.
    WaitingForNodes(u128),
    /// A start or restart phase finished: its name, how long it took and
    /// what it did, for the node's log (seed 003's phase-by-phase report).
    Phase {
        /// What ran ("restore redo", ...).
        name: &'static str,
        /// How long it took, in ms of ctx time.
        elapsed_ms: u64,
        /// How much it did, counted in `unit`s.
        count: u64,
        /// What `count` counts ("row changes replayed").
        unit: &'static str,
    },
    /// A line for the node's log: something the operator should know that
    /// is not an error of the node (a damaged copy of a file that has a
    /// good one, a refused restart and what to do). Blocks never print;
    /// the node's log is the context's to write (production: stderr).
    Log(String),
    /// Membership takes these data nodes for failed: close the links to
    /// them and accept nothing more from their incarnations (production:
    /// the transport; the simulator: its network). Sent once per node.
    CutLinks(signal::NodeSet),
    /// The agreed membership changed (docs/design/failures.md §3): its id
    /// and members, for the node's status and `show`.
    Membership {
        /// The membership id, higher at every change.
        membership_id: u32,
        /// The data nodes in it.
        live: signal::NodeSet,
    },
    /// The node must stop serving at once and for good in this
    /// incarnation: it was declared failed, or its side of a split may not
    /// continue. `reason` says why, for the log and `show`. Production
    /// prints it and exits; the simulator stops the node.
    Shutdown(String),
    /// One ldm instance's local checkpoint counters and pacing, sent after
    /// each LCP and each pacing decision (`all report checkpoints`).
    Checkpoints(CheckpointReport),
    /// The start phase the node runs now (`signal::phases`), and whether
    /// the start is a node restart, for `show` (`start_phase`).
    StartPhase {
        /// The phase's number.
        phase: u8,
        /// A node restart into a running cluster.
        node_restart: bool,
    },
    /// One ldm instance's copy of a node restart so far (`show`'s
    /// `copy_progress`): partitions copied of all it holds, rows and bytes
    /// applied, since the copy began (`elapsed_ms`).
    CopyProgress {
        /// The ldm instance.
        instance: u16,
        /// Partitions copied.
        partitions_copied: u32,
        /// Partitions it holds.
        partitions: u32,
        /// Rows applied.
        rows: u64,
        /// Bytes of rows applied.
        bytes: u64,
        /// Since its copy began, ms of ctx time.
        elapsed_ms: u64,
    },
    /// A graceful stop may go on (NODE_STOP_REQ): every tc finished its
    /// transactions (`drained`), or the limit passed with some left.
    ReadyToStop {
        /// Every tc finished its transactions.
        drained: bool,
    },
}

// The ldm's checkpoint report belongs to the ldm's vocabulary, not the
// kernel's: defined in `signal::reports`, re-exported for `Report`'s users.
pub use signal::reports::{CheckpointReport, PacingReport};

/// Everything a block may use of the world.
pub trait Context {
    /// Milliseconds since the node started (monotonic; simulated in `sim`).
    fn now_ms(&self) -> u64;

    /// 64 pseudo-random bits (seeded in `sim`).
    fn random(&mut self) -> u64;

    /// Sends a signal; it is handled after the current one, in order per
    /// sender-receiver pair.
    fn send(&mut self, envelope: Envelope);

    /// Sends a signal after `delay_ms`.
    fn send_delayed(&mut self, envelope: Envelope, delay_ms: u64);

    /// Reports node-level state to the outside world.
    fn report(&mut self, report: Report);

    /// The node's section pool, to build sections for replies.
    fn pool(&self) -> &'static SectionPool;

    /// Asks the node's file service (the io thread in production, the disk
    /// model in `sim`) to perform `operation` in the node's data directory.
    /// The answer arrives later as an [`signal::signals::FsConf`] signal to
    /// `from` carrying `token`; operations run in the order requested.
    ///
    /// The default panics: a context that serves no files (most tests)
    /// must not be asked for one.
    fn fs_request(&mut self, from: BlockRef, token: u64, operation: FsOperation) {
        panic!(
            "{from} asked for file operation {} (token {token}), but this context has no \
             file service",
            operation.name()
        );
    }

    /// Stops the node at once: a storage fault (an fsync error, damaged
    /// bytes that were durable) after which it must not serve
    /// (docs/design/durability.md §6). `message` names the file and offset.
    /// Production prints it and exits the process; the default panics with
    /// it, which is what tests and the simulator observe.
    fn fatal(&mut self, message: String) -> ! {
        panic!("fatal: {message}");
    }

    /// Whether a frame from data node `node` arrived since the last ask
    /// (`liveness`: the receive path's signs of life, ahead of queued
    /// work). The default says no (tests, tools).
    fn heard_from(&mut self, _node: signal::NodeId) -> bool {
        false
    }

    /// A fault point (`faults`): if it is armed, the node crashes here
    /// and this never returns. The default does nothing (tests, tools).
    fn fault_point(&mut self, _point: faults::FaultPoint) {}

    /// How busy the calling thread was lately, percent of wall time spent
    /// executing signals (production measures the last second; `None`
    /// where unknown, as in the simulator and tests, which keeps them
    /// deterministic). Adaptive pacing slows background work when busy.
    fn busy_percent(&self) -> Option<u32> {
        None
    }
}

/// Shorthand used by blocks: build the envelope and send it.
pub fn send(ctx: &mut dyn Context, from: BlockRef, to: BlockRef, signal: impl Into<Signal>) {
    ctx.send(Envelope {
        from,
        to,
        signal: signal.into(),
    });
}
