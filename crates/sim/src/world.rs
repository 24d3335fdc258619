//! The simulated world around the blocks: a clock in microseconds, one
//! queue of future events ordered by (time, sequence), seeded random
//! sources, a network with per-pair FIFO delivery, and the trace hash.
//!
//! [`World`] is the [`kernel::Context`] every block of the simulated node
//! gets. [`ClientIo`] is the narrower view the simulated API nodes get: they
//! may only send what an API node may send over its connection.
//!
//! Three random streams are split from the seed (network delays, blocks'
//! `random()`, client decisions) so that, for example, a block starting to
//! use randomness does not shift every network delay of the run.

use kernel::{Context, Report};
use signal::{codec, BlockKind, BlockRef, Envelope, NodeId, SectionPool};
use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, VecDeque};
use stdx::mix::{fmix64, XorShift};

/// Delay of a signal between two blocks of the node (a job queue hop):
/// 1 to this many microseconds.
pub const NODE_DELAY_MAX_US: u64 = 50;

/// Delay of a signal between an API node and the data node (a network hop):
/// [`CLIENT_DELAY_MIN_US`] to [`CLIENT_DELAY_MAX_US`] microseconds.
pub const CLIENT_DELAY_MIN_US: u64 = 30;
/// See [`CLIENT_DELAY_MIN_US`].
pub const CLIENT_DELAY_MAX_US: u64 = 300;

/// How many delivered signals the world remembers for a failure report.
const RECENT_DELIVERIES: usize = 200;

/// Something that happens at a simulated time.
pub(crate) enum Event {
    /// A signal reaches its receiver (a block, or an API node).
    Deliver(Envelope),
    /// A simulated client's timer fires with the token it chose.
    ClientWake(u64),
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
    node: NodeId,
    trace_hash: u64,
    delivered: u64,
    recent: VecDeque<Delivery>,
    trace_to_stderr: bool,
    node_started: bool,
    latest_gci: signal::Gci,
    schema_version: u32,
    pool: &'static SectionPool,
}

impl World {
    pub(crate) fn new(
        seed: u64,
        node: NodeId,
        pool: &'static SectionPool,
        trace_to_stderr: bool,
    ) -> World {
        let mut seeds = XorShift::new(seed);
        World {
            now_us: 0,
            events: BinaryHeap::with_capacity(4096),
            sequence: 0,
            network_rng: XorShift::new(seeds.next_u64()),
            block_rng: XorShift::new(seeds.next_u64()),
            client_rng: XorShift::new(seeds.next_u64()),
            last_delivery_us: HashMap::new(),
            node,
            trace_hash: fmix64(seed ^ 0x7e55_e4a0_5170_0001),
            delivered: 0,
            recent: VecDeque::with_capacity(RECENT_DELIVERIES),
            trace_to_stderr,
            node_started: false,
            latest_gci: signal::Gci(0),
            schema_version: 0,
            pool,
        }
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

    /// Whether membership reported the node started.
    pub fn node_started(&self) -> bool {
        self.node_started
    }

    /// The GCI dih last reported every tc switched to.
    pub fn latest_gci(&self) -> signal::Gci {
        self.latest_gci
    }

    /// The last schema version dict reported.
    pub fn schema_version(&self) -> u32 {
        self.schema_version
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

    /// Schedules `envelope` over the simulated network: a random delay,
    /// but never before an earlier signal of the same pair.
    pub(crate) fn send_over_network(&mut self, envelope: Envelope) {
        let api_link = envelope.from.kind == BlockKind::Api || envelope.to.kind == BlockKind::Api;
        let delay_us = if api_link {
            CLIENT_DELAY_MIN_US
                + self
                    .network_rng
                    .below(CLIENT_DELAY_MAX_US - CLIENT_DELAY_MIN_US + 1)
        } else {
            1 + self.network_rng.below(NODE_DELAY_MAX_US)
        };
        let pair = (envelope.from, envelope.to);
        let earliest = self.last_delivery_us.get(&pair).copied().unwrap_or(0);
        let time_us = (self.now_us + delay_us).max(earliest);
        self.last_delivery_us.insert(pair, time_us);
        self.schedule(time_us, Event::Deliver(envelope));
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
        assert!(
            envelope.to.node == self.node || envelope.to.kind == BlockKind::Api,
            "signal {} from {} to {}: the simulated cluster has no such node",
            envelope.signal.name(),
            envelope.from,
            envelope.to
        );
        self.send_over_network(envelope);
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
        match report {
            Report::NodeStarted => self.node_started = true,
            Report::LatestGci(gci) => {
                assert!(
                    gci > self.latest_gci,
                    "dih reported GCI {gci} after {}",
                    self.latest_gci
                );
                self.latest_gci = gci;
            }
            Report::SchemaVersion(version) => self.schema_version = version,
        }
    }

    fn pool(&self) -> &'static SectionPool {
        self.pool
    }
}

/// What a simulated API node may do: send API requests to the data node,
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

    /// The data node the client talks to.
    pub fn data_node(&self) -> NodeId {
        self.world.node
    }

    /// Sends an API request to a block of the data node.
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
            envelope.to.node == self.world.node && envelope.to.kind != BlockKind::Api,
            "a simulated client sent {} to {}, which is not a block of the data node",
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
