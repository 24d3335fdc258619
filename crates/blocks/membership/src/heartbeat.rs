//! Heartbeats and failure suspicion between data nodes
//! (docs/design/failures.md §2; NDB's QMGR heartbeat ring).
//!
//! Once the cluster is formed, the live data nodes form a ring by id:
//! every `interval_ms` each node sends CM_HEARTBEAT to the next node
//! (wrapping from the highest id to the lowest) and counts one missed
//! heartbeat for the node before it, which it watches; a heartbeat from
//! the watched node resets the count. A watched node that misses
//! `missed_limit` in a row is **suspected**: `tick` returns it, once, and
//! membership takes it for failed (`failure`). The ring is drawn again
//! over the nodes left whenever membership takes a node for failed.
//!
//! When a participant dies or stalls:
//! - the watched node dies, pauses or is cut off: its watcher suspects it
//!   after `missed_limit` intervals; no other node watches it;
//! - the watcher dies: nobody suspects the watched node through
//!   heartbeats; the watcher's own watcher suspects the watcher, and once
//!   it is gone the ring closes over it;
//! - a heartbeat is late (a slow link, a busy sender): counted when it
//!   comes; the count only grows while none comes;
//! - a heartbeat is duplicated or comes from a node that is not the
//!   watched one (the ring just changed): a sign of life of that node,
//!   which changes nothing here.
//!
//! A one-node ring sends nothing.
//!
//! Each heartbeat carries its send time by the sender's clock, and the
//! receiver acks it (CM_HEARTBEAT_ACK). The sender's **read lease** runs
//! `(missed_limit - 1) * interval_ms` from the send time of the latest
//! heartbeat acked: its receiver, the one node that watches the sender,
//! suspects it only after more than that since it last heard from it
//! (docs/design/failures.md §5). An ack that waited (a pause, a slow
//! link) carries an old send time and extends nothing that ran out.

use kernel::Context;
use signal::signals::{CmHeartbeat, ContinueB};
use signal::{BlockKind, BlockRef, Envelope, NodeId, NodeSet};

/// membership's ContinueB job of the heartbeat timer.
pub(crate) const JOB: u32 = 2;

/// One node's place in the heartbeat ring.
pub(crate) struct Heartbeats {
    address: BlockRef,
    interval_ms: u64,
    missed_limit: u32,
    /// The node this one sends heartbeats to (`None`: alone).
    next: Option<NodeId>,
    /// The node this one watches.
    watched: Option<NodeId>,
    /// Heartbeats sent.
    sequence: u32,
    /// Intervals in a row without a heartbeat from the watched node.
    missed: u32,
    /// When the watched node was last heard from (ms of ctx time).
    last_heard_ms: u64,
    /// Nodes suspected so far, in order.
    suspected: Vec<NodeId>,
    started: bool,
    /// The read lease: reads may be served until then (ms of ctx time).
    lease_until_ms: u64,
}

impl Heartbeats {
    /// The ring of `ring` (this node among them) seen from `address`'s node.
    pub(crate) fn new(
        address: BlockRef,
        ring: NodeSet,
        interval_ms: u64,
        missed_limit: u32,
    ) -> Heartbeats {
        assert!(
            interval_ms > 0 && missed_limit >= 2,
            "membership {address}: heartbeat interval {interval_ms} ms and missed limit \
             {missed_limit} (the config checks 1.. and 2..)"
        );
        let mut heartbeats = Heartbeats {
            address,
            interval_ms,
            missed_limit,
            next: None,
            watched: None,
            sequence: 0,
            missed: 0,
            last_heard_ms: 0,
            suspected: Vec::new(),
            started: false,
            lease_until_ms: 0,
        };
        heartbeats.set_ring(ring, 0);
        heartbeats
    }

    /// The ring is now `ring` (this node among them): send to the node
    /// after this one and watch the one before. A newly watched node
    /// starts with a clean count, as if heard from at `now_ms`.
    pub(crate) fn set_ring(&mut self, ring: NodeSet, now_ms: u64) {
        let me = self.address.node;
        assert!(
            ring.contains(me),
            "membership {}: a heartbeat ring {ring} without this node",
            self.address
        );
        let nodes: Vec<NodeId> = ring.iter().collect();
        let count = nodes.len();
        let position = nodes
            .iter()
            .position(|&node| node == me)
            .expect("checked above");
        let (next, watched) = if count > 1 {
            (
                Some(nodes[(position + 1) % count]),
                Some(nodes[(position + count - 1) % count]),
            )
        } else {
            (None, None)
        };
        self.next = next;
        if watched != self.watched {
            self.watched = watched;
            self.missed = 0;
            self.last_heard_ms = now_ms;
        }
    }

    /// The cluster is formed: start sending and watching (once).
    pub(crate) fn start(&mut self, ctx: &mut dyn Context) {
        if self.started || self.next.is_none() {
            return;
        }
        self.started = true;
        self.last_heard_ms = ctx.now_ms();
        // Every node just heard from every other to form the cluster.
        self.lease_until_ms = ctx.now_ms() + self.lease_ms();
        self.beat(ctx);
        self.arm(ctx);
    }

    /// The timer: send the next heartbeat and count one missed for the
    /// watched node; at the limit, suspect it unless the receive path
    /// read a frame of it in the interval. Returns the watched node and how long it has been
    /// silent (ms) when it just reached the missed limit (once per node).
    pub(crate) fn tick(&mut self, ctx: &mut dyn Context) -> Option<(NodeId, u64)> {
        assert!(
            self.started,
            "membership {}: a heartbeat timer before the heartbeats started",
            self.address
        );
        self.beat(ctx);
        self.arm(ctx);
        let watched = self.watched?;
        // Asked every tick, so it means "in this interval".
        let frames_arrived = ctx.heard_from(watched);
        self.missed = self.missed.saturating_add(1);
        if self.missed < self.missed_limit || self.suspected.contains(&watched) {
            return None;
        }
        if frames_arrived {
            // Its heartbeats are late, but the receive path still reads
            // its frames: alive (its main thread, or this one, is behind
            // on work). Held at the limit: the first interval without a
            // frame or a heartbeat suspects it. A node that went silent
            // is found as fast as by heartbeats alone.
            self.missed = self.missed_limit - 1;
            return None;
        }
        self.suspected.push(watched);
        Some((watched, ctx.now_ms().saturating_sub(self.last_heard_ms)))
    }

    /// A heartbeat from `from` (any data node's membership: from the
    /// network, so nothing about it is asserted).
    pub(crate) fn heard(&mut self, from: BlockRef, ctx: &mut dyn Context) {
        if from.kind == BlockKind::Membership && Some(from.node) == self.watched {
            self.missed = 0;
            self.last_heard_ms = ctx.now_ms();
        }
    }

    /// CM_HEARTBEAT_ACK of a heartbeat this node sent at `sent_at_ms`:
    /// the lease runs from then. Returns whether it grew.
    pub(crate) fn acked(&mut self, sent_at_ms: u64) -> bool {
        let until = sent_at_ms.saturating_add(self.lease_ms());
        if until <= self.lease_until_ms {
            return false;
        }
        self.lease_until_ms = until;
        true
    }

    /// Until when this node may serve reads, by its heartbeats alone.
    pub(crate) fn lease_until_ms(&self) -> u64 {
        self.lease_until_ms
    }

    /// Whether heartbeats run (a ring of more than one node, formed).
    pub(crate) fn running(&self) -> bool {
        self.started && self.next.is_some()
    }

    fn lease_ms(&self) -> u64 {
        u64::from(self.missed_limit - 1) * self.interval_ms
    }

    /// Milliseconds between heartbeats.
    pub(crate) fn interval_ms(&self) -> u64 {
        self.interval_ms
    }

    /// Heartbeats a watched node may miss in a row before it is suspected.
    pub(crate) fn missed_limit(&self) -> u32 {
        self.missed_limit
    }

    /// The nodes this node suspected, in order (each once).
    pub(crate) fn suspected(&self) -> &[NodeId] {
        &self.suspected
    }

    fn beat(&mut self, ctx: &mut dyn Context) {
        let Some(next) = self.next else {
            return;
        };
        self.sequence = self.sequence.wrapping_add(1);
        let to = BlockRef::new(next, BlockKind::Membership, 0);
        let sequence = self.sequence;
        let sent_at_ms = ctx.now_ms();
        kernel::send(
            ctx,
            self.address,
            to,
            CmHeartbeat {
                sequence,
                sent_at_ms,
            },
        );
    }

    fn arm(&mut self, ctx: &mut dyn Context) {
        let envelope = Envelope {
            from: self.address,
            to: self.address,
            signal: ContinueB { job: JOB }.into(),
        };
        ctx.send_delayed(envelope, self.interval_ms);
    }
}
