//! Heartbeats and failure suspicion between data nodes
//! (docs/design/failures.md §2, docs/design/0020-connectivity-check.md;
//! NDB's QMGR heartbeats).
//!
//! Once the cluster is formed, every member sends CM_HEARTBEAT to every
//! other member every `interval_ms` and watches every other member: each
//! interval counts one missed heartbeat for each peer, and a heartbeat
//! from the peer resets its count. A peer that misses `missed_limit` in a
//! row, with no frame of it read by the receive path meanwhile, is
//! **suspected**: `tick` returns it, once per suspicion, and membership
//! checks with the other members whether they still hear it before
//! anything is taken for failed (`connectivity`). A suspicion that the
//! check clears (`clear_suspicion`) starts the count again.
//!
//! Every link is watched, not a ring: a link that goes silent between
//! two members that are not ring neighbours would otherwise never be
//! found, and a node that hears badly would be judged by the one peer it
//! watches.
//!
//! When a participant dies or stalls:
//! - a peer dies, pauses or is cut off: every member that stops hearing
//!   it suspects it after `missed_limit` intervals;
//! - a heartbeat is late (a slow link, a busy sender): counted when it
//!   comes; the count only grows while none comes;
//! - a heartbeat is duplicated or comes from a node that is not a peer
//!   (the membership just changed): nothing.
//!
//! A node alone sends nothing.
//!
//! Each heartbeat carries its send time by the sender's clock, and the
//! receiver acks it (CM_HEARTBEAT_ACK). The sender's **read lease** runs
//! `(missed_limit - 1) * interval_ms` from the send time of the latest
//! heartbeat each peer acked, and is the earliest of those: any peer may
//! start the way to declaring it failed, and each suspects it only after
//! more than that since it last heard from it (docs/design/failures.md
//! §5). An ack that waited (a pause, a slow link) carries an old send
//! time and extends nothing that ran out.

use kernel::Context;
use signal::signals::{CmHeartbeat, ContinueB};
use signal::{BlockKind, BlockRef, Envelope, NodeId, NodeSet};

/// membership's ContinueB job of the heartbeat timer.
pub(crate) const JOB: u32 = 2;

/// What this node knows of one peer's heartbeats.
struct Peer {
    node: NodeId,
    /// Intervals in a row without a heartbeat from it.
    missed: u32,
    /// When it was last heard from (ms of ctx time): a heartbeat, or a
    /// frame the receive path read in an interval.
    last_heard_ms: u64,
    /// Suspected and not cleared since.
    suspected: bool,
    /// Its part of the read lease: its latest ack's send time plus the
    /// lease (ms of ctx time).
    lease_until_ms: u64,
}

/// One node's heartbeats to and from every other member.
pub(crate) struct Heartbeats {
    address: BlockRef,
    interval_ms: u64,
    missed_limit: u32,
    /// Every other member, by id.
    peers: Vec<Peer>,
    /// Heartbeats sent (each round counts once).
    sequence: u32,
    /// Nodes suspected so far, in order (each once).
    suspected: Vec<NodeId>,
    started: bool,
    /// `start` ran: this node is a formed member (with peers or alone).
    formed: bool,
}

impl Heartbeats {
    /// The heartbeats of `members` (this node among them) seen from
    /// `address`'s node.
    pub(crate) fn new(
        address: BlockRef,
        members: NodeSet,
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
            peers: Vec::new(),
            sequence: 0,
            suspected: Vec::new(),
            started: false,
            formed: false,
        };
        heartbeats.set_members(members, 0);
        heartbeats
    }

    /// The members are now `members` (this node among them). A new peer
    /// starts with a clean count, as if heard from at `now_ms`, and with
    /// no more lease than the node has already: it acked nothing yet.
    pub(crate) fn set_members(&mut self, members: NodeSet, now_ms: u64) {
        let me = self.address.node;
        assert!(
            members.contains(me),
            "membership {}: heartbeats among {members} without this node",
            self.address
        );
        let lease = self.lease_until_ms();
        let mut peers = Vec::with_capacity(members.len() as usize);
        for node in members.iter().filter(|&node| node != me) {
            match self.peers.iter().position(|peer| peer.node == node) {
                Some(index) => peers.push(self.peers.swap_remove(index)),
                None => peers.push(Peer {
                    node,
                    missed: 0,
                    last_heard_ms: now_ms,
                    suspected: false,
                    lease_until_ms: if self.started { lease } else { 0 },
                }),
            }
        }
        peers.sort_by_key(|peer| peer.node);
        self.peers = peers;
    }

    /// The cluster is formed: start sending and watching (once). A node
    /// formed alone (a whole-cluster restart that the arbitrator let it
    /// make without its peers) starts them when its first peer joins
    /// (`start_if_formed`).
    pub(crate) fn start(&mut self, ctx: &mut dyn Context) {
        self.formed = true;
        if self.started || self.peers.is_empty() {
            return;
        }
        self.started = true;
        let now = ctx.now_ms();
        // Every node just heard from every other to form the cluster.
        let lease = now + self.lease_ms();
        for peer in &mut self.peers {
            peer.last_heard_ms = now;
            peer.lease_until_ms = lease;
        }
        self.beat(ctx);
        self.arm(ctx);
    }

    /// The timer: send the next heartbeats and count one missed for each
    /// peer; at the limit, suspect it unless the receive path read a
    /// frame of it in the interval. Returns the peers that were just
    /// suspected, each with how long it has been silent (ms).
    pub(crate) fn tick(&mut self, ctx: &mut dyn Context) -> Vec<(NodeId, u64)> {
        assert!(
            self.started,
            "membership {}: a heartbeat timer before the heartbeats started",
            self.address
        );
        self.beat(ctx);
        self.arm(ctx);
        let now = ctx.now_ms();
        let limit = self.missed_limit;
        let mut suspects = Vec::new();
        for peer in &mut self.peers {
            // Asked every tick, so it means "in this interval".
            let frames_arrived = ctx.heard_from(peer.node);
            if frames_arrived {
                peer.last_heard_ms = now;
            }
            peer.missed = peer.missed.saturating_add(1);
            if peer.missed < limit || peer.suspected {
                continue;
            }
            if frames_arrived {
                // Its heartbeats are late, but the receive path still
                // reads its frames: alive (its main thread, or this one,
                // is behind on work). Held at the limit: the first
                // interval without a frame or a heartbeat suspects it.
                peer.missed = limit - 1;
                continue;
            }
            peer.suspected = true;
            suspects.push((peer.node, now.saturating_sub(peer.last_heard_ms)));
        }
        for &(node, _) in &suspects {
            if !self.suspected.contains(&node) {
                self.suspected.push(node);
            }
        }
        suspects
    }

    /// A heartbeat from `from` (any data node's membership: from the
    /// network, so nothing about it is asserted).
    pub(crate) fn heard(&mut self, from: BlockRef, ctx: &mut dyn Context) {
        if from.kind != BlockKind::Membership {
            return;
        }
        let now = ctx.now_ms();
        if let Some(peer) = self.peers.iter_mut().find(|peer| peer.node == from.node) {
            peer.missed = 0;
            peer.last_heard_ms = now;
        }
    }

    /// Whether `node` was heard from lately (a heartbeat or a frame):
    /// what a member answers when another asks whether it still hears
    /// `node`. Lately is two intervals, but fewer than the silence that
    /// makes a suspect (`missed_limit - 1` intervals at the least), so a
    /// peer that lost a node as long ago as the one asking says so.
    pub(crate) fn hears(&self, node: NodeId, now_ms: u64) -> bool {
        let window = u64::from(self.missed_limit.saturating_sub(2).clamp(1, 2)) * self.interval_ms;
        self.last_heard_ms(node)
            .is_some_and(|heard| now_ms.saturating_sub(heard) <= window)
    }

    /// Whether `node` was heard from within `missed_limit - 1` intervals
    /// (two at the least): not yet silent for as long as a suspicion of it
    /// takes, give or take an interval of jitter. A member that heard its
    /// president this lately does not follow another node that left the
    /// president out (design 0020 decision 6): that node lost only its own
    /// link. A president that really failed is silent to every member
    /// for longer by the time anyone's suspicion of it ends.
    pub(crate) fn heard_lately(&self, node: NodeId, now_ms: u64) -> bool {
        let window = u64::from(self.missed_limit.saturating_sub(1).max(2)) * self.interval_ms;
        self.last_heard_ms(node)
            .is_some_and(|heard| now_ms.saturating_sub(heard) <= window)
    }

    /// When `node` was last heard from (`None`: not a peer).
    pub(crate) fn last_heard_ms(&self, node: NodeId) -> Option<u64> {
        self.peers
            .iter()
            .find(|peer| peer.node == node)
            .map(|peer| peer.last_heard_ms)
    }

    /// The suspicion of `node` is over (it answered, or it was heard
    /// again): count its missed heartbeats from nothing.
    pub(crate) fn clear_suspicion(&mut self, node: NodeId) {
        if let Some(peer) = self.peers.iter_mut().find(|peer| peer.node == node) {
            peer.suspected = false;
            peer.missed = 0;
        }
    }

    /// CM_HEARTBEAT_ACK from `from` of a heartbeat this node sent at
    /// `sent_at_ms`: that peer's part of the lease runs from then.
    /// Returns whether the lease grew.
    pub(crate) fn acked(&mut self, from: NodeId, sent_at_ms: u64) -> bool {
        let before = self.lease_until_ms();
        let until = sent_at_ms.saturating_add(self.lease_ms());
        if let Some(peer) = self.peers.iter_mut().find(|peer| peer.node == from) {
            peer.lease_until_ms = peer.lease_until_ms.max(until);
        }
        self.lease_until_ms() > before
    }

    /// Until when this node may serve reads, by its heartbeats alone:
    /// the earliest of the peers' parts.
    pub(crate) fn lease_until_ms(&self) -> u64 {
        self.peers
            .iter()
            .map(|peer| peer.lease_until_ms)
            .min()
            .unwrap_or(0)
    }

    /// Starts the heartbeats if this node is a formed member that had no
    /// peer to send them to until now (a node restart just joined it).
    /// A node formed alone that never started them would take no joining
    /// node for failed on silence, and would grant its ldms no read lease
    /// once a peer joined: every read refused.
    pub(crate) fn start_if_formed(&mut self, ctx: &mut dyn Context) {
        if self.formed {
            self.start(ctx);
        }
    }

    /// Whether heartbeats run (formed, with another member).
    pub(crate) fn running(&self) -> bool {
        self.started && !self.peers.is_empty()
    }

    fn lease_ms(&self) -> u64 {
        u64::from(self.missed_limit - 1) * self.interval_ms
    }

    /// Milliseconds between heartbeats.
    pub(crate) fn interval_ms(&self) -> u64 {
        self.interval_ms
    }

    /// Heartbeats a peer may miss in a row before it is suspected.
    pub(crate) fn missed_limit(&self) -> u32 {
        self.missed_limit
    }

    /// The nodes this node suspected, in order (each once).
    pub(crate) fn suspected(&self) -> &[NodeId] {
        &self.suspected
    }

    fn beat(&mut self, ctx: &mut dyn Context) {
        if self.peers.is_empty() {
            return;
        }
        self.sequence = self.sequence.wrapping_add(1);
        let sequence = self.sequence;
        let sent_at_ms = ctx.now_ms();
        for peer in &self.peers {
            let to = BlockRef::new(peer.node, BlockKind::Membership, 0);
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
