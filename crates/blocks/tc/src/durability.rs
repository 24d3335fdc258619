//! The tc's part in making GCIs durable (docs/design/durability.md §2), and
//! the API nodes' waits for a durable GCI.
//!
//! - Commit phases per GCI: a transaction is *in its commit phase* from the
//!   commit decision (`commit_with`, COMMIT sent) until the last COMMITCONF
//!   (every replica committed it, so every replica's ldm has logged it; in
//!   the linear chain the primary confirms last). [`CommitPhases`] counts
//!   such transactions per GCI. A commit that sent nothing (committed reads
//!   only) is never counted.
//! - GCP_FLUSH_REQ{g} from the master dih is answered (GCP_FLUSH_CONF) as
//!   soon as no transaction with a GCI up to g is in its commit phase. The
//!   dih sends it only after every tc has switched past g, so no new
//!   transaction can get such a GCI afterwards: the answer is final.
//! - GCP_DURABLE_REP{g}: g is complete (durable). The tc keeps the latest
//!   one and answers every API node waiting for a GCI up to it.
//! - GCI_WAIT_REQ{gci} from an API node: answered at once (GCI_WAIT_CONF)
//!   when gci is complete, else held in a bounded list until it is; refused
//!   (GCI_WAIT_REF, TooManyGciWaits) when the list is full; dropped when the
//!   API node fails. A GCI that the last whole-cluster restart rolled back
//!   (above the restored GCI, below the first GCI of this run: the master
//!   dih's start round sends GCP_DURABLE_REP{restored}, when not 0, just
//!   before the first GCP_COMMIT, on the same link) is refused for good
//!   (GciRolledBack): without that, any such GCI would look complete once
//!   the new GCIs passed it.
//!
//! Nothing here allocates after `Tc::new`: both lists are sized there.

use crate::Tc;
use kernel::{send, Context};
use signal::signals::*;
use signal::{BlockKind, BlockRef, ErrorCode, Gci};
use std::collections::VecDeque;

/// How many distinct GCIs [`CommitPhases`] tracks before it starts folding
/// later GCIs into its last entry. Only a few GCIs are ever in their commit
/// phase at once (a commit phase takes a few round trips, a GCI lasts an
/// epoch), so reaching this means commits are stuck; folding then only
/// delays flushes of the folded GCIs until the older ones drain, which is
/// safe, where refusing to count would not be.
pub const COMMIT_PHASE_GCIS: usize = 64;

/// Transactions in their commit phase, counted per GCI.
///
/// Entries are in increasing GCI order, as a tc hands out GCIs in
/// non-decreasing order. Each entry counts the transactions whose GCI is at
/// least its `gci` and below the next entry's (normally exactly its GCI;
/// several GCIs once the list is full and later GCIs are folded into the
/// last entry). The front entry always has transactions left: drained
/// entries are taken off the front.
pub(crate) struct CommitPhases {
    entries: VecDeque<CommitPhaseEntry>,
    /// The highest GCI counted so far (to check the order).
    latest: Gci,
}

#[derive(Clone, Copy, Debug)]
struct CommitPhaseEntry {
    /// The lowest GCI this entry counts.
    gci: Gci,
    /// Transactions still in their commit phase.
    transactions: u32,
}

impl CommitPhases {
    pub(crate) fn new() -> CommitPhases {
        CommitPhases {
            entries: VecDeque::with_capacity(COMMIT_PHASE_GCIS),
            latest: Gci(0),
        }
    }

    /// A transaction entered its commit phase with `gci`.
    pub(crate) fn started(&mut self, gci: Gci) {
        assert!(
            gci >= self.latest,
            "a tc hands out GCIs in non-decreasing order ({gci} after {})",
            self.latest
        );
        self.latest = gci;
        let full = self.entries.len() == COMMIT_PHASE_GCIS;
        match self.entries.back_mut() {
            Some(last) if last.gci == gci || full => {
                // The same GCI, or the list is full: fold into the last entry.
                last.transactions += 1;
            }
            _ => self.entries.push_back(CommitPhaseEntry {
                gci,
                transactions: 1,
            }),
        }
    }

    /// A transaction with `gci` finished its commit phase.
    pub(crate) fn finished(&mut self, gci: Gci) {
        let entry = self
            .entries
            .iter_mut()
            .rev()
            .find(|entry| entry.gci <= gci)
            .filter(|entry| entry.transactions > 0);
        let entry = entry.unwrap_or_else(|| {
            panic!("a transaction of GCI {gci} finished a commit phase that was never counted")
        });
        entry.transactions -= 1;
        while self
            .entries
            .front()
            .is_some_and(|entry| entry.transactions == 0)
        {
            self.entries.pop_front();
        }
    }

    /// Whether no transaction with a GCI up to `gci` is in its commit phase.
    pub(crate) fn none_up_to(&self, gci: Gci) -> bool {
        // The front entry has transactions left and the lowest GCI.
        self.entries.front().is_none_or(|entry| entry.gci > gci)
    }

    /// Transactions in their commit phase (for tests and reports).
    pub(crate) fn transactions(&self) -> u32 {
        self.entries.iter().map(|entry| entry.transactions).sum()
    }
}

/// An API node waiting for a GCI to become complete.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GciWaiter {
    api: BlockRef,
    request_id: u32,
    gci: Gci,
}

/// The durability state of one tc.
pub(crate) struct Durability {
    pub(crate) commit_phases: CommitPhases,
    /// The master dih's GCP_FLUSH_REQ not answered yet: (sender, GCI).
    pub(crate) pending_flush: Option<(BlockRef, Gci)>,
    /// The latest GCI the master dih reported complete.
    pub(crate) complete_gci: Gci,
    /// The GCIs a whole-cluster restart rolled back: above the restored
    /// GCI (the complete GCI when the first GCI arrived) and below the
    /// first GCI of this run. Empty until the first GCP_COMMIT.
    pub(crate) rolled_back: std::ops::Range<Gci>,
    /// Held GCI_WAIT_REQs; never longer than `waiter_capacity`.
    pub(crate) waiters: Vec<GciWaiter>,
    waiter_capacity: usize,
}

impl Durability {
    /// Room for `waiter_capacity` held GCI waits.
    pub(crate) fn new(waiter_capacity: usize) -> Durability {
        let waiter_capacity = waiter_capacity.max(1);
        Durability {
            commit_phases: CommitPhases::new(),
            pending_flush: None,
            complete_gci: Gci(0),
            rolled_back: Gci(0)..Gci(0),
            waiters: Vec::with_capacity(waiter_capacity),
            waiter_capacity,
        }
    }
}

impl Tc {
    /// A transaction sent COMMIT with `gci`: its commit phase begins
    /// (called once per commit that sent something).
    pub(crate) fn commit_phase_started(&mut self, gci: Gci) {
        self.durability.commit_phases.started(gci);
    }

    /// Every operation of a transaction with `gci` confirmed COMMIT: its
    /// commit phase is over, which may complete a pending flush.
    pub(crate) fn commit_phase_finished(&mut self, gci: Gci, ctx: &mut dyn Context) {
        self.durability.commit_phases.finished(gci);
        self.answer_flush_if_drained(ctx);
    }

    /// GCP_FLUSH_REQ: answer once no commit phase up to `gci` is left.
    pub(crate) fn gcp_flush_req(
        &mut self,
        from: BlockRef,
        request: GcpFlushReq,
        ctx: &mut dyn Context,
    ) {
        if let Some((_, pending)) = self.durability.pending_flush {
            assert_eq!(
                pending, request.gci,
                "the master dih flushes one GCI at a time: GCP_FLUSH_REQ for {} while {} is pending",
                request.gci, pending
            );
        }
        self.durability.pending_flush = Some((from, request.gci));
        self.answer_flush_if_drained(ctx);
    }

    /// MASTER_GCP_REQ from a new master dih (master take-over,
    /// docs/design/failures.md §8): where this tc's GCI stands. A flush
    /// the failed master asked for is forgotten: the new master asks for
    /// its own.
    pub(crate) fn master_gcp_req(
        &mut self,
        from: BlockRef,
        request: MasterGcpReq,
        ctx: &mut dyn Context,
    ) {
        self.durability.pending_flush = None;
        let conf = MasterGcpTcConf {
            membership_id: request.membership_id,
            current_gci: self.current_gci,
            prepared: self.gcp_prepared,
        };
        send(ctx, self.config.address, from, conf);
    }

    fn answer_flush_if_drained(&mut self, ctx: &mut dyn Context) {
        let Some((dih, gci)) = self.durability.pending_flush else {
            return;
        };
        if self.durability.commit_phases.none_up_to(gci) {
            self.durability.pending_flush = None;
            send(ctx, self.config.address, dih, GcpFlushConf { gci });
        }
    }

    /// GCP_DURABLE_REP: `gci` is complete; answer the waits up to it.
    pub(crate) fn gcp_durable_rep(&mut self, report: GcpDurableRep, ctx: &mut dyn Context) {
        if report.gci <= self.durability.complete_gci {
            // An older report overtaken by a newer one: nothing new.
            return;
        }
        let complete_gci = report.gci;
        self.durability.complete_gci = complete_gci;
        let address = self.config.address;
        self.durability.waiters.retain(|waiter| {
            if waiter.gci > complete_gci {
                return true;
            }
            send(
                ctx,
                address,
                waiter.api,
                GciWaitConf {
                    request_id: waiter.request_id,
                    complete_gci,
                },
            );
            false
        });
        self.build_durable(ctx);
    }

    /// GCI_WAIT_REQ from an API node (anything in it may be wrong).
    pub(crate) fn gci_wait_req(
        &mut self,
        from: BlockRef,
        request: GciWaitReq,
        ctx: &mut dyn Context,
    ) {
        let address = self.config.address;
        let request_id = request.request_id;
        let refuse = |ctx: &mut dyn Context, error| {
            send(ctx, address, from, GciWaitRef { request_id, error });
        };
        if !self.started {
            return refuse(ctx, ErrorCode::NodeNotStarted);
        }
        if from.kind != BlockKind::Api {
            return refuse(ctx, ErrorCode::BadRequest);
        }
        let rolled_back = &self.durability.rolled_back;
        if request.gci > rolled_back.start && request.gci < rolled_back.end {
            return refuse(ctx, ErrorCode::GciRolledBack);
        }
        let complete_gci = self.durability.complete_gci;
        if request.gci <= complete_gci {
            return send(
                ctx,
                address,
                from,
                GciWaitConf {
                    request_id,
                    complete_gci,
                },
            );
        }
        let durability = &mut self.durability;
        if durability.waiters.len() >= durability.waiter_capacity {
            return refuse(ctx, ErrorCode::TooManyGciWaits);
        }
        durability.waiters.push(GciWaiter {
            api: from,
            request_id,
            gci: request.gci,
        });
    }

    /// API node `report.node` failed: nobody is left to answer its waits.
    pub(crate) fn drop_gci_waiters_of(&mut self, report: &ApiFailRep) {
        self.durability
            .waiters
            .retain(|waiter| waiter.api.node != report.node);
    }

    /// Transactions in their commit phase (tests, reports).
    pub fn transactions_in_commit_phase(&self) -> u32 {
        self.durability.commit_phases.transactions()
    }

    /// GCI waits held (tests, reports).
    pub fn gci_waits_held(&self) -> usize {
        self.durability.waiters.len()
    }

    /// The latest GCI reported complete (durable) to this tc.
    pub fn complete_gci(&self) -> Gci {
        self.durability.complete_gci
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G1: Gci = Gci::from_parts(5, 1);
    const G2: Gci = Gci::from_parts(5, 2);
    const G3: Gci = Gci::from_parts(6, 0);

    #[test]
    fn counts_drain_per_gci_in_any_order() {
        let mut phases = CommitPhases::new();
        assert!(phases.none_up_to(G3));
        phases.started(G1);
        phases.started(G1);
        phases.started(G2);
        assert!(!phases.none_up_to(G1));
        phases.finished(G2);
        assert!(!phases.none_up_to(G1), "G1 still has two");
        assert!(phases.none_up_to(Gci(G1.0 - 1)));
        phases.finished(G1);
        phases.finished(G1);
        assert!(phases.none_up_to(G3));
        assert_eq!(phases.transactions(), 0);
    }

    #[test]
    fn a_full_list_folds_later_gcis_into_its_last_entry() {
        let mut phases = CommitPhases::new();
        let gcis: Vec<Gci> = (0..COMMIT_PHASE_GCIS as u64 + 3)
            .map(|index| Gci(100 + index))
            .collect();
        let capacity = phases.entries.capacity();
        for &gci in &gcis {
            phases.started(gci);
        }
        assert_eq!(phases.entries.len(), COMMIT_PHASE_GCIS, "never grows");
        assert_eq!(phases.entries.capacity(), capacity, "never reallocates");
        let last_entry = gcis[COMMIT_PHASE_GCIS - 1];
        // Every GCI before the folded entry drains as usual.
        for &gci in &gcis[..COMMIT_PHASE_GCIS - 1] {
            phases.finished(gci);
        }
        assert!(phases.none_up_to(Gci(last_entry.0 - 1)));
        // The folded GCIs count together: a flush of the first of them
        // waits for all of them (late, never wrong).
        for &gci in &gcis[COMMIT_PHASE_GCIS - 1..gcis.len() - 1] {
            phases.finished(gci);
            assert!(!phases.none_up_to(last_entry));
        }
        phases.finished(*gcis.last().expect("not empty"));
        assert!(phases.none_up_to(Gci(u64::MAX)));
    }

    #[test]
    #[should_panic(expected = "non-decreasing")]
    fn a_decreasing_gci_is_a_broken_invariant() {
        let mut phases = CommitPhases::new();
        phases.started(G2);
        phases.started(G1);
    }

    #[test]
    #[should_panic(expected = "never counted")]
    fn finishing_an_uncounted_commit_phase_is_a_broken_invariant() {
        let mut phases = CommitPhases::new();
        phases.started(G2);
        phases.finished(G1);
    }
}
