//! Coordinator take-over (docs/design/failures.md §7, design 0010; NDB's
//! DBTC take-over with LQH_TRANSREQ): the transactions a failed node's
//! tcs coordinated end one way on the live replicas.
//!
//! ```text
//!  tc taking over                 every ldm of every survivor
//!   |-- TakeoverReq{id, failed} ------->|  every record whose tc is on a failed node
//!   |<------------- TakeoverOpRep (each) |
//!   |<--------------------- TakeoverConf |
//!   |   per transaction: committed anywhere (with its GCI) -> commit, else abort
//!   |-- ResolveReq COMMIT (gci) -> ... ->|  then COMPLETE; or ABORT
//!   |<------------------------ ResolveConf (each operation, each step)
//!   |-- TakeoverCompleteRep{id} -> master dih (global checkpoints go on)
//! ```
//!
//! - *Who:* tc instance 0 of the president, so every survivor knows which
//!   without a message, and its report to the master dih stays on its
//!   node. It starts at NODE_FAIL_COMPLETE_REP: no survivor handles a
//!   failed node's signal any more, so no operation of a failed tc can
//!   arrive at an ldm after the ldm answered.
//! - *The decision:* a failed tc commits a transaction only after every
//!   operation prepared on every replica, and the client hears of a
//!   commit only once every replica committed. So an operation committed
//!   anywhere means every operation was prepared everywhere, and the
//!   transaction commits with that GCI; none committed means the client
//!   never heard of a commit, and it aborts.
//! - *Again from the start:* a later failure (of a replica, or of this
//!   tc's node) starts the take-over again, for every node failed so far,
//!   under the new membership id; answers to the earlier query are
//!   ignored by that id. What the earlier run finished is gone from the
//!   ldms or committed there, so the new run decides the same way: an
//!   operation is completed only once every operation of its transaction
//!   is committed on every live replica. A RESOLVE_CONF of the earlier
//!   run counts for the new one: it says the step is done on every
//!   replica alive then.
//! - *Global checkpoints:* the master dih completes none from the
//!   failure until TAKEOVER_COMPLETE_REP of its membership, so no GCI is
//!   made durable with half a transaction of a failed tc in it.
//! - *Memory:* the take-over's records are allocated when it runs (a
//!   rare event, sized by what the failed tcs left), not pooled. They are
//!   ordered maps, so the signals go out in the same order on every run
//!   of a simulator seed.
//!
//! The clients of a failed tc lost their connection to it: a batch that
//! was not committing gets a temporary error (its transaction is
//! aborted here), a commit's outcome is unknown to them (the client
//! library says so).

use crate::Tc;
use kernel::{send, Context, Report};
use signal::signals::{
    resolve_step, takeover_state, ReplicaChain, ResolveConf, ResolveReq, TakeoverCompleteRep,
    TakeoverConf, TakeoverOpRep, TakeoverReq,
};
use signal::{BlockKind, BlockRef, Gci, NodeSet, TransactionId};
use std::collections::BTreeMap;

/// A transaction of a failed tc, as the ldms reported it.
#[derive(Debug)]
struct TakenTransaction {
    /// The GCI one of its operations committed with, if any did.
    committed_gci: Option<Gci>,
    /// Its operations, by the failed tc's operation record.
    operations: BTreeMap<u32, TakenOperation>,
    /// The step under way once decided ([`resolve_step`]).
    step: Option<u8>,
    /// Operations whose step has not been confirmed.
    outstanding: u32,
}

#[derive(Debug)]
struct TakenOperation {
    /// The chain as at prepare.
    chain: ReplicaChain,
    /// The ldm instance holding its partition (the same on every replica).
    ldm_instance: u16,
    /// Its step is sent and not yet confirmed.
    pending: bool,
}

/// A running take-over.
#[derive(Debug, Default)]
pub(crate) struct Takeover {
    /// The membership it runs for (0: none runs).
    membership_id: u32,
    /// The nodes whose tcs it takes over.
    failed: NodeSet,
    /// TAKEOVER_CONFs still to come.
    ldms_to_answer: u32,
    /// By the failed tc and the transaction.
    transactions: BTreeMap<(BlockRef, TransactionId), TakenTransaction>,
    committed: u32,
    aborted: u32,
}

impl Tc {
    /// Whether this tc is taking over failed tcs' transactions now.
    pub(crate) fn takeover_running(&self) -> bool {
        self.takeover.membership_id != 0
    }

    /// At NODE_FAIL_COMPLETE_REP: if this tc takes over for the cluster
    /// and every change installed here is handled everywhere, start again
    /// for every node failed so far. (A change installed but not yet
    /// handled everywhere starts it at its own completion.)
    pub(crate) fn start_takeover(&mut self, ctx: &mut dyn Context) {
        let me = self.config.address;
        if self.node_failures.president() != Some(me.node)
            || me.instance != 0
            || !self.node_failures.all_complete()
        {
            return;
        }
        let membership_id = self.node_failures.membership_id();
        let live = self.node_failures.live();
        let failed = self.node_failures.failed();
        self.takeover = Takeover {
            membership_id,
            failed,
            ldms_to_answer: live.len() * self.config.ldm_instances as u32,
            ..Takeover::default()
        };
        for node in live.iter() {
            for instance in 0..self.config.ldm_instances {
                let ldm = BlockRef::new(node, BlockKind::Ldm, instance);
                send(
                    ctx,
                    me,
                    ldm,
                    TakeoverReq {
                        membership_id,
                        failed,
                    },
                );
            }
        }
        ctx.fault_point(kernel::faults::FaultPoint::TakeoverAfterQuery);
    }

    /// One operation of a failed tc, as ldm `from` holds it.
    pub(crate) fn takeover_op_rep(&mut self, from: BlockRef, report: TakeoverOpRep) {
        let takeover = &mut self.takeover;
        if report.membership_id != takeover.membership_id || takeover.ldms_to_answer == 0 {
            return; // An earlier run's answer.
        }
        let transaction = takeover
            .transactions
            .entry((report.tc, report.transaction_id))
            .or_insert_with(|| TakenTransaction {
                committed_gci: None,
                operations: BTreeMap::new(),
                step: None,
                outstanding: 0,
            });
        if report.state == takeover_state::COMMITTED {
            transaction.committed_gci = Some(report.gci);
        }
        transaction
            .operations
            .entry(report.tc_op)
            .or_insert(TakenOperation {
                chain: report.chain,
                ldm_instance: from.instance,
                pending: false,
            });
    }

    /// Ldm `from` reported everything it holds of the failed tcs; once
    /// every ldm has, decide and finish every transaction.
    pub(crate) fn takeover_conf(&mut self, conf: TakeoverConf, ctx: &mut dyn Context) {
        let takeover = &mut self.takeover;
        if conf.membership_id != takeover.membership_id || takeover.ldms_to_answer == 0 {
            return;
        }
        takeover.ldms_to_answer -= 1;
        if takeover.ldms_to_answer > 0 {
            return;
        }
        let keys: Vec<(BlockRef, TransactionId)> = takeover.transactions.keys().copied().collect();
        for key in keys {
            let transaction = &self.takeover.transactions[&key];
            let step = if transaction.committed_gci.is_some() {
                resolve_step::COMMIT
            } else {
                resolve_step::ABORT
            };
            self.takeover_step(key, step, ctx);
        }
        if !self.takeover.transactions.is_empty() {
            ctx.fault_point(kernel::faults::FaultPoint::TakeoverAfterDecision);
        }
        self.takeover_finished_if_done(ctx);
    }

    /// Sends `step` of every operation of transaction `key` as RESOLVE_REQ
    /// over its live replicas.
    fn takeover_step(&mut self, key: (BlockRef, TransactionId), step: u8, ctx: &mut dyn Context) {
        let me = self.config.address;
        let failed = self.takeover.failed;
        let transaction = self
            .takeover
            .transactions
            .get_mut(&key)
            .expect("a transaction taken over stays until finished");
        transaction.step = Some(step);
        transaction.outstanding = transaction.operations.len() as u32;
        let gci = match step {
            resolve_step::COMMIT => transaction
                .committed_gci
                .expect("only a transaction committed somewhere is committed"),
            _ => Gci(0),
        };
        for (&tc_op, operation) in transaction.operations.iter_mut() {
            operation.pending = true;
            let live = operation.chain.without(failed).unwrap_or_else(|| {
                panic!(
                    "tc {me}: every replica of a taken-over operation's chain failed, and the \
                     survival rule lets no side without a whole node group continue"
                )
            });
            let entry = if step == resolve_step::ABORT {
                live.primary()
            } else {
                live.last()
            };
            let target = BlockRef::new(entry, BlockKind::Ldm, operation.ldm_instance);
            let request = ResolveReq {
                tc: key.0,
                reply_to: me,
                tc_op,
                transaction_id: key.1,
                chain: live,
                step,
                gci,
            };
            send(ctx, me, target, request);
        }
    }

    /// RESOLVE_CONF for an operation of a failed tc: the step is done on
    /// every live replica.
    pub(crate) fn takeover_resolve_conf(&mut self, conf: ResolveConf, ctx: &mut dyn Context) {
        let key = (conf.tc, conf.transaction_id);
        let Some(transaction) = self.takeover.transactions.get_mut(&key) else {
            return; // Finished, or not taken over by this run.
        };
        if transaction.step != Some(conf.step) {
            return;
        }
        let Some(operation) = transaction.operations.get_mut(&conf.tc_op) else {
            return;
        };
        if !std::mem::take(&mut operation.pending) {
            return; // A duplicate.
        }
        transaction.outstanding -= 1;
        if transaction.outstanding > 0 {
            return;
        }
        match conf.step {
            resolve_step::COMMIT => self.takeover_step(key, resolve_step::COMPLETE, ctx),
            resolve_step::COMPLETE => {
                self.takeover.transactions.remove(&key);
                self.takeover.committed += 1;
            }
            _ => {
                self.takeover.transactions.remove(&key);
                self.takeover.aborted += 1;
            }
        }
        self.takeover_finished_if_done(ctx);
    }

    /// Once every ldm answered and every transaction is finished: tell
    /// the master dih, which held global checkpoints back until now.
    fn takeover_finished_if_done(&mut self, ctx: &mut dyn Context) {
        let takeover = &mut self.takeover;
        if takeover.membership_id == 0
            || takeover.ldms_to_answer > 0
            || !takeover.transactions.is_empty()
        {
            return;
        }
        let me = self.config.address;
        let (committed, aborted) = (takeover.committed, takeover.aborted);
        ctx.report(Report::Log(format!(
            "tc {me}: took over the transactions of the tcs of nodes {}: {committed} committed, \
             {aborted} aborted",
            takeover.failed
        )));
        self.counters.takeover_commits += committed as u64;
        self.counters.takeover_aborts += aborted as u64;
        let membership_id = std::mem::take(&mut takeover.membership_id);
        send(
            ctx,
            me,
            BlockRef::new(me.node, BlockKind::Dih, 0),
            TakeoverCompleteRep {
                membership_id,
                committed,
                aborted,
            },
        );
    }
}
