//! The loop of a thread that runs blocks: take signals from the inbox in
//! batches, run each to completion, publish what they sent once per batch,
//! fire due timers, and sleep when there is nothing to do (optionally
//! spinning first, as NDB's spintime). A CONTINUEB a block sends itself
//! waits for the next batch, behind what arrived meanwhile, so long work
//! done a step at a time never starves the signals of other threads.

use crate::mesh::{Inbox, Outbox, Staging};
use crate::stats::{ThreadRole, ThreadStats};
use crate::timers::TimerQueue;
use crate::{Block, Context, Report};
use signal::fs::FsOperation;
use signal::signals::FsReq;
use signal::{BlockKind, BlockRef, Envelope, SectionPool};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use stdx::mix::XorShift;

/// Signals taken from one queue before looking at the next.
pub const BATCH: usize = 64;

/// Receives node-level reports (the data node's status for mgmd).
pub trait ReportSink: Send + Sync {
    /// Called on the reporting thread.
    fn report(&self, report: Report);

    /// A block hit a storage fault (`Context::fatal`): say so and end
    /// the process. The default prints the message and exits with code 1.
    fn fatal(&self, node: signal::NodeId, message: &str) -> ! {
        eprintln!("tessera node {node}: fatal: {message}");
        std::process::exit(1);
    }
}

/// Socket work a block thread does between its batches when the node runs
/// its network on that thread (`[threads] network_on_ldm`): reading frames
/// into signals and writing what blocks sent to other nodes, so that a key
/// lookup wakes one thread of the data node instead of three. Implemented
/// by the transport; the kernel only calls it.
pub trait Network: Send {
    /// Binds `waker` (the thread's inbox waker) so that a producer's wake
    /// ends [`Network::sleep`]. Called once, on the thread.
    fn bind(&mut self, waker: &crate::waker::Waker);

    /// Does what is ready now, never blocking: returns whether it found
    /// anything to do (then the thread looks at its queues again before
    /// sleeping).
    fn work(&mut self) -> bool;

    /// The first half of the sleep protocol for the network's own queues
    /// (`kernel::waker`): false when work arrived meanwhile, and the thread
    /// must not sleep.
    fn prepare_sleep(&mut self) -> bool;

    /// Sleeps until a socket is ready, a producer wakes the thread, or at
    /// most `timeout` passes; ends the sleep protocol either way.
    fn sleep(&mut self, timeout: Duration);

    /// The thread stops: what blocks sent still goes out (bounded), then
    /// every connection closes.
    fn finish(&mut self);
}

/// Everything a block thread needs besides its blocks.
pub struct BlockThreadSetup {
    /// Thread name, e.g. "ldm1".
    pub name: String,
    /// Role.
    pub role: ThreadRole,
    /// Receiving side.
    pub inbox: Inbox,
    /// Sending side.
    pub outbox: Outbox,
    /// The node's section pool.
    pub pool: &'static SectionPool,
    /// When the node started (time zero of `now_ms`).
    pub epoch: Instant,
    /// Counters.
    pub stats: Arc<ThreadStats>,
    /// Where reports go.
    pub reports: Arc<dyn ReportSink>,
    /// Set to stop the thread.
    pub shutdown: Arc<AtomicBool>,
    /// Microseconds to spin before sleeping (0: sleep at once).
    pub spin_us: u32,
    /// Seed of the thread's random source.
    pub seed: u64,
    /// The receive thread's signs of life from other data nodes.
    pub signs_of_life: Arc<crate::liveness::SignsOfLife>,
    /// The node's sockets, when they are served on this thread.
    pub network: Option<Box<dyn Network>>,
}

struct ThreadContext {
    now_ms: u64,
    rng: XorShift,
    outbox: Outbox,
    local: VecDeque<Envelope>,
    /// CONTINUEBs blocks sent themselves: they run after the signals
    /// other threads and nodes sent meanwhile (see `send`).
    continued: VecDeque<Envelope>,
    timers: TimerQueue,
    pool: &'static SectionPool,
    reports: Arc<dyn ReportSink>,
    load: LoadWindow,
    signs_of_life: Arc<crate::liveness::SignsOfLife>,
}

/// The share of wall time the thread spent awake, measured over windows of
/// `LOAD_WINDOW_MS` (what `Context::busy_percent` answers).
struct LoadWindow {
    start_ms: u64,
    asleep: Duration,
    busy_percent: Option<u32>,
}

const LOAD_WINDOW_MS: u64 = 1000;

impl LoadWindow {
    /// Closes the window once it is `LOAD_WINDOW_MS` old.
    fn roll(&mut self, now_ms: u64) {
        let elapsed_ms = now_ms.saturating_sub(self.start_ms);
        if elapsed_ms >= LOAD_WINDOW_MS {
            let asleep_ms = (self.asleep.as_millis() as u64).min(elapsed_ms);
            self.busy_percent = Some((100 * (elapsed_ms - asleep_ms) / elapsed_ms) as u32);
            self.start_ms = now_ms;
            self.asleep = Duration::ZERO;
        }
    }
}

impl Context for ThreadContext {
    fn now_ms(&self) -> u64 {
        self.now_ms
    }

    fn random(&mut self) -> u64 {
        self.rng.next_u64()
    }

    fn send(&mut self, envelope: Envelope) {
        match self.outbox.stage(envelope) {
            Staging::Staged => {}
            // A block continuing long work later (an index build's next
            // step, a checkpoint's next slice) goes behind what arrived
            // from elsewhere since, as NDB's CONTINUEB does: otherwise a
            // chain of them would run back to back and starve key
            // operations, whose replies would not even leave the thread.
            Staging::Local(envelope)
                if envelope.from == envelope.to
                    && matches!(envelope.signal, signal::Signal::ContinueB(_)) =>
            {
                self.continued.push_back(envelope)
            }
            Staging::Local(envelope) => self.local.push_back(envelope),
            // A block addressed a block that does not exist here: a bug.
            Staging::NoRoute(envelope) => panic!(
                "signal {} from {} to {}: no such block on this node",
                envelope.signal.name(),
                envelope.from,
                envelope.to
            ),
        }
    }

    fn send_delayed(&mut self, envelope: Envelope, delay_ms: u64) {
        self.timers.schedule(self.now_ms + delay_ms, envelope);
    }

    fn report(&mut self, report: Report) {
        self.reports.report(report);
    }

    fn pool(&self) -> &'static SectionPool {
        self.pool
    }

    fn fs_request(&mut self, from: BlockRef, token: u64, operation: FsOperation) {
        // The io thread is an address like any block's: the request takes
        // the job queue from this thread to it, in order with the others.
        let io = BlockRef::new(self.outbox.router().own_node, BlockKind::Io, 0);
        let envelope = Envelope {
            from,
            to: io,
            signal: FsReq { token, operation }.into(),
        };
        match self.outbox.stage(envelope) {
            Staging::Staged => {}
            Staging::Local(_) | Staging::NoRoute(_) => {
                panic!("{from} asked for a file operation, but this node runs no io thread")
            }
        }
    }

    fn heard_from(&mut self, node: signal::NodeId) -> bool {
        self.signs_of_life.take(node)
    }

    fn busy_percent(&self) -> Option<u32> {
        self.load.busy_percent
    }

    fn fatal(&mut self, message: String) -> ! {
        // Fail fast (docs/design/durability.md §6): stop the whole process
        // now, before any thread can serve what the fault touched.
        self.reports.fatal(self.outbox.router().own_node, &message)
    }

    fn fault_point(&mut self, point: crate::faults::FaultPoint) {
        let node = self.outbox.router().own_node;
        match crate::faults::take(point) {
            None => {}
            Some(crate::faults::FaultAction::Crash) => {
                // A crash right after this step: what the block sent
                // before the point goes out to the other threads (and from
                // there to the network, which the pause gives time for);
                // nothing after.
                eprintln!(
                    "tessera node {node}: fault point {} reached: crashing",
                    point.name()
                );
                self.outbox.flush();
                std::thread::sleep(std::time::Duration::from_millis(100));
                std::process::abort();
            }
            Some(crate::faults::FaultAction::Delay { ms }) => {
                // A stall of this thread at this step: what the block sent
                // before it leaves now, the rest of the step after.
                eprintln!(
                    "tessera node {node}: fault point {} reached: stalling {ms} ms",
                    point.name()
                );
                self.outbox.flush();
                std::thread::sleep(std::time::Duration::from_millis(ms));
            }
        }
    }
}

fn dispatch(
    blocks: &mut [Box<dyn Block>],
    addresses: &[BlockRef],
    envelope: Envelope,
    ctx: &mut ThreadContext,
) {
    let target = envelope.to;
    let index = addresses
        .iter()
        .position(|&address| address.kind == target.kind && address.instance == target.instance);
    match index {
        Some(index) => blocks[index].handle(envelope, ctx),
        None => panic!(
            "signal {} routed to a thread that does not run {}",
            envelope.signal.name(),
            target
        ),
    }
}

/// How many queued local signals ahead [`Block::prefetch`] looks: one per
/// stage of a key lookup's chain of misses (bucket, first element, second
/// element or row, row).
const PREFETCH_DISTANCE: usize = 4;

fn prefetch(
    blocks: &[Box<dyn Block>],
    addresses: &[BlockRef],
    envelope: &Envelope,
    distance: usize,
) {
    let target = envelope.to;
    if let Some(index) = addresses
        .iter()
        .position(|&address| address.kind == target.kind && address.instance == target.instance)
    {
        blocks[index].prefetch(envelope, distance);
    }
}

/// Runs blocks until `shutdown` is set. Call on the thread itself.
pub fn run(setup: BlockThreadSetup, mut blocks: Vec<Box<dyn Block>>) {
    let BlockThreadSetup {
        name: _,
        role: _,
        mut inbox,
        outbox,
        pool,
        epoch,
        stats,
        reports,
        shutdown,
        spin_us,
        seed,
        signs_of_life,
        mut network,
    } = setup;
    match network.as_mut() {
        Some(network) => network.bind(&inbox.waker),
        None => inbox.waker.bind_current_thread(),
    }
    // A debugging aid for the no-allocation promise: past this many
    // signals, every allocation on this thread prints its backtrace.
    let mut trap_after_signals: Option<u64> =
        std::env::var("TESSERA_TRAP_ALLOCATIONS_AFTER_SIGNALS")
            .ok()
            .and_then(|value| value.parse().ok());
    // A fault point for tests of fail-fast: the thread named here panics
    // as it runs its first signal.
    let panic_at_first_signal = std::env::var("TESSERA_FAULT_PANIC_THREAD")
        .is_ok_and(|thread| Some(thread.as_str()) == std::thread::current().name());
    let mut signals_so_far = 0u64;
    let addresses: Vec<BlockRef> = blocks.iter().map(|block| block.address()).collect();
    let mut ctx = ThreadContext {
        now_ms: 0,
        rng: XorShift::new(seed),
        outbox,
        local: VecDeque::with_capacity(4096),
        continued: VecDeque::with_capacity(64),
        timers: TimerQueue::with_capacity(4096),
        pool,
        reports,
        load: LoadWindow {
            start_ms: 0,
            asleep: Duration::ZERO,
            busy_percent: None,
        },
        signs_of_life,
    };
    let mut idle_since: Option<Instant> = None;
    while !shutdown.load(Ordering::Relaxed) {
        ctx.now_ms = epoch.elapsed().as_millis() as u64;
        ctx.load.roll(ctx.now_ms);
        let mut executed = 0u64;
        while let Some(envelope) = ctx.timers.pop_due(ctx.now_ms) {
            dispatch(&mut blocks, &addresses, envelope, &mut ctx);
            executed += 1;
        }
        // Signals from other threads join the local queue, so that the
        // prefetch below sees them too (a replica's LQHKEYREQ from another
        // node, or one from a tc on another thread). The order is as if
        // each ran on arrival: every one of them runs before what it sends
        // to blocks of this thread, which queues behind the rest.
        inbox.drain(BATCH, |envelope| ctx.local.push_back(envelope));
        // Then the continuations of the last round, behind what arrived.
        let ThreadContext {
            local, continued, ..
        } = &mut ctx;
        local.extend(continued.drain(..));
        while let Some(envelope) = ctx.local.pop_front() {
            // Signals queue here in batches (from the inbox, and between
            // blocks of this thread, such as a tc's LQHKEYREQs to the ldm
            // beside it): hint the ones coming up, the furthest first.
            for distance in (1..=PREFETCH_DISTANCE).rev() {
                if let Some(next) = ctx.local.get(distance - 1) {
                    prefetch(&blocks, &addresses, next, distance);
                }
            }
            dispatch(&mut blocks, &addresses, envelope, &mut ctx);
            executed += 1;
        }
        let blocked = ctx.outbox.flush();
        // What the blocks sent to other nodes leaves now, and what arrived
        // is read into this thread's queues for the next round.
        let networked = network.as_mut().is_some_and(|network| network.work());
        ThreadStats::add(&stats.signals, executed);
        signals_so_far += executed;
        assert!(
            !(panic_at_first_signal && executed > 0),
            "TESSERA_FAULT_PANIC_THREAD names this thread: panicking on purpose"
        );
        if trap_after_signals.is_some_and(|after| signals_so_far >= after) {
            trap_after_signals = None;
            stdx::alloc_counter::trap_thread_allocations();
        }
        stats
            .allocations
            .store(stdx::alloc_counter::thread_allocations(), Ordering::Relaxed);
        if executed > 0 || networked {
            idle_since = None;
            continue;
        }
        if blocked {
            // A target queue is full: give its thread time to drain it.
            std::thread::yield_now();
            continue;
        }
        if spin_us > 0 {
            let since = *idle_since.get_or_insert_with(Instant::now);
            if since.elapsed() < Duration::from_micros(spin_us as u64) {
                std::hint::spin_loop();
                continue;
            }
        }
        inbox.waker.prepare_sleep();
        if inbox.has_pending() {
            inbox.waker.cancel_sleep();
            continue;
        }
        if let Some(network) = network.as_mut() {
            if !network.prepare_sleep() {
                inbox.waker.cancel_sleep();
                continue;
            }
        }
        let now = epoch.elapsed().as_millis() as u64;
        let timeout_ms = match ctx.timers.next_due_ms() {
            Some(due) => due.saturating_sub(now).clamp(1, 1000),
            None => 1000,
        };
        ThreadStats::add(&stats.sleeps, 1);
        let asleep_at = Instant::now();
        match network.as_mut() {
            Some(network) => {
                network.sleep(Duration::from_millis(timeout_ms));
                inbox.waker.cancel_sleep();
            }
            None => inbox.waker.park(Duration::from_millis(timeout_ms)),
        }
        ctx.load.asleep += asleep_at.elapsed();
        idle_since = None;
    }
    if let Some(network) = network.as_mut() {
        network.finish();
    }
}
