//! The read lease (docs/design/failures.md §5): a node serves reads only
//! while it is sure no other node may have taken its partitions over.
//!
//! The survivors promote a node's backups only after they agreed it
//! failed, and that needs a peer to miss `missed_limit` of its heartbeats
//! (or a link to it to break). So the node serves reads while:
//! - its lease from the heartbeat acks runs (`heartbeat`): every peer
//!   heard from it within the last `(missed_limit - 1)` intervals, by the
//!   node's own clock, measured from when it sent the heartbeat;
//! - it takes no member for failed that is not agreed out yet: a link
//!   that broke may already have let the other side start agreeing that
//!   this node failed; and
//! - it checks no suspicion of its own (`connectivity`): the president
//!   may settle it by taking this node out.
//!
//! Membership tells every ldm of the node (READ_LEASE_REP) whenever the
//! lease it may grant changes; an ldm refuses a read once the lease
//! ran out (`ReadLeaseExpired`, temporary). A node alone in its
//! membership has nobody to take over from it: its lease is unlimited.
//!
//! What this relies on: clocks that run at about the same rate (not
//! synchronised ones). What it does not close: a read that reaches an
//! ldm thread within the same batch as the moment a pause (SIGSTOP)
//! stopped it is handled with the time the batch started at.

use crate::start::StartState;
use crate::Membership;
use kernel::Context;
use signal::signals::ReadLeaseRep;
use signal::{BlockKind, BlockRef};

impl Membership {
    /// The lease the ldms may serve reads under now.
    fn lease_to_grant(&self) -> u64 {
        if self.failures.live.len() <= 1 {
            // Agreed alone: no other node may take over.
            return u64::MAX;
        }
        if !self.failures.failed.is_empty()
            || self.connectivity.checking()
            || !self.heartbeats.running()
        {
            return 0;
        }
        self.heartbeats.lease_until_ms()
    }

    /// Tells every ldm of the node the lease, if it changed.
    pub(crate) fn publish_lease(&mut self, ctx: &mut dyn Context) {
        if self.state == StartState::ShutDown || self.failures.membership_id == 0 {
            return;
        }
        let valid_until_ms = self.lease_to_grant();
        if self.lease_published == Some(valid_until_ms) {
            return;
        }
        self.lease_published = Some(valid_until_ms);
        for instance in 0..self.ldm_instances {
            let ldm = BlockRef::new(self.address.node, BlockKind::Ldm, instance);
            kernel::send(ctx, self.address, ldm, ReadLeaseRep { valid_until_ms });
        }
    }

    /// CM_HEARTBEAT: a sign of life of the sender, which hears back.
    pub(crate) fn heartbeat(&mut self, from: BlockRef, sent_at_ms: u64, ctx: &mut dyn Context) {
        self.heartbeats.heard(from, ctx);
        // A node that reported its link to the sender bad acks none of
        // its heartbeats until the report is settled or withdrawn: the
        // sender's lease from it must have run out if the president takes
        // the sender out on that report (`connectivity`).
        if from.kind == BlockKind::Membership
            && self.failures.membership_id > 0
            && !self.connectivity.reported(from.node)
        {
            let ack = signal::signals::CmHeartbeatAck { sent_at_ms };
            kernel::send(ctx, self.address, from, ack);
        }
    }

    /// CM_HEARTBEAT_ACK: the lease may grow.
    pub(crate) fn heartbeat_acked(
        &mut self,
        from: BlockRef,
        sent_at_ms: u64,
        ctx: &mut dyn Context,
    ) {
        if from.kind == BlockKind::Membership && self.heartbeats.acked(from.node, sent_at_ms) {
            self.publish_lease(ctx);
        }
    }
}
