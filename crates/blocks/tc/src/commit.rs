//! Commit (docs/design/transactions.md §4-§5): the GCI is taken at the
//! commit decision, COMMIT goes to every operation that holds something, the
//! client is acknowledged with the GCI once all are committed, then COMPLETE
//! releases the records. And the tc's half of the GCI switch
//! (docs/design/durability.md §1). Each commit that sent COMMIT is counted
//! in its GCI's commit phases (`durability`) until its last COMMITCONF.

use crate::records::{OpPhase, TransactionState, NIL};
use crate::Tc;
use kernel::{send, Context};
use signal::signals::*;
use signal::{BlockRef, Gci};

impl Tc {
    /// The batch is prepared and the client asked to commit.
    pub(crate) fn decide_commit(&mut self, transaction: u32, ctx: &mut dyn Context) {
        if self.gcp_prepared || self.current_gci == Gci(0) {
            // Hold the decision until GCP_COMMIT: a commit now would take a
            // GCI that another tc may already have moved past.
            let record = &mut self.records.transactions[transaction as usize];
            record.state = TransactionState::WaitingForGci;
            record.next_waiting_for_gci = NIL;
            if self.waiting_for_gci_tail == NIL {
                self.waiting_for_gci_head = transaction;
            } else {
                self.records.transactions[self.waiting_for_gci_tail as usize]
                    .next_waiting_for_gci = transaction;
            }
            self.waiting_for_gci_tail = transaction;
            return;
        }
        self.commit_with(transaction, self.current_gci, ctx);
    }

    fn commit_with(&mut self, transaction: u32, gci: Gci, ctx: &mut dyn Context) {
        ctx.fault_point(kernel::faults::FaultPoint::TcAfterPrepare);
        let transaction_id = self.records.transactions[transaction as usize].transaction_id;
        let sent = self.advance_operations(
            transaction,
            &[OpPhase::Prepared],
            OpPhase::Committing,
            |tc_op, operation| {
                CommitReq {
                    ldm_op: operation.ldm_op,
                    tc_op,
                    transaction_id,
                    gci,
                }
                .into()
            },
            ctx,
        );
        let record = &mut self.records.transactions[transaction as usize];
        record.gci = gci;
        record.state = TransactionState::Committing;
        record.outstanding = sent;
        if sent == 0 {
            // Nothing held anywhere (committed reads only): done already,
            // and nothing for a GCI to wait for.
            record.gci = Gci(0);
            self.acknowledge_commit(transaction, ctx);
        } else {
            self.commit_phase_started(gci);
        }
    }

    pub(crate) fn commit_conf(&mut self, conf: CommitConf, ctx: &mut dyn Context) {
        self.commit_confirmed(conf.tc_op, ctx);
    }

    /// Operation `tc_op` is committed on every replica.
    pub(crate) fn commit_confirmed(&mut self, tc_op: u32, ctx: &mut dyn Context) {
        let confirmed =
            self.operation_confirmed(tc_op, OpPhase::Committing, OpPhase::Committed, "COMMITCONF");
        if let Some(transaction) = confirmed {
            // Every replica committed (the primary, last in the chain,
            // confirmed): the commit phase that `commit_with` counted is
            // over. Read the GCI before the acknowledgement may free the
            // record.
            let gci = self.records.transactions[transaction as usize].gci;
            self.acknowledge_commit(transaction, ctx);
            self.commit_phase_finished(gci, ctx);
        }
    }

    /// Every operation is committed: tell the client, then COMPLETE.
    fn acknowledge_commit(&mut self, transaction: u32, ctx: &mut dyn Context) {
        self.counters.commits += 1;
        let record = &mut self.records.transactions[transaction as usize];
        let (api, transaction_id, operations, gci, row) = (
            record.api,
            record.transaction_id,
            record.batch_ops,
            record.gci,
            record.last_row.take(),
        );
        if !record.api_failed {
            send(
                ctx,
                self.config.address,
                api,
                TcKeyConf {
                    transaction_id,
                    operations,
                    committed: true,
                    gci,
                    map_version: self.map_version,
                    row,
                },
            );
        }
        ctx.fault_point(kernel::faults::FaultPoint::TcBeforeComplete);
        let sent = self.advance_operations(
            transaction,
            &[OpPhase::Committed],
            OpPhase::Completing,
            |tc_op, operation| {
                CompleteReq {
                    ldm_op: operation.ldm_op,
                    tc_op,
                    transaction_id,
                }
                .into()
            },
            ctx,
        );
        let record = &mut self.records.transactions[transaction as usize];
        record.state = TransactionState::Completing;
        record.outstanding = sent;
        if sent == 0 {
            self.records.release_transaction(transaction);
        }
    }

    pub(crate) fn complete_conf(&mut self, conf: CompleteConf, _ctx: &mut dyn Context) {
        self.complete_confirmed(conf.tc_op);
    }

    /// Operation `tc_op` is complete on every replica.
    pub(crate) fn complete_confirmed(&mut self, tc_op: u32) {
        let confirmed = self.operation_confirmed(
            tc_op,
            OpPhase::Completing,
            OpPhase::Released,
            "COMPLETECONF",
        );
        if let Some(transaction) = confirmed {
            self.records.release_transaction(transaction);
        }
    }

    pub(crate) fn gcp_prepare(
        &mut self,
        from: BlockRef,
        request: GcpPrepare,
        ctx: &mut dyn Context,
    ) {
        assert!(
            request.new_gci > self.current_gci,
            "GCP_PREPARE must move the GCI forward"
        );
        self.gcp_prepared = true;
        send(
            ctx,
            self.config.address,
            from,
            GcpPrepareConf {
                new_gci: request.new_gci,
            },
        );
    }

    pub(crate) fn gcp_commit(&mut self, from: BlockRef, request: GcpCommit, ctx: &mut dyn Context) {
        assert!(
            request.gci > self.current_gci,
            "GCP_COMMIT must move the GCI forward"
        );
        let node_restart = (self.node_failures.starting()).contains(self.config.address.node);
        if self.current_gci == Gci(0) && !node_restart {
            // The first GCI of this run: what lies between the restored
            // GCI (complete, reported just before) and it was rolled back.
            // (A node restart joins GCIs that run on: nothing was.)
            self.durability.rolled_back = self.durability.complete_gci..request.gci;
        }
        self.current_gci = request.gci;
        self.gcp_prepared = false;
        send(
            ctx,
            self.config.address,
            from,
            GcpCommitConf { gci: request.gci },
        );
        // Release the held commit decisions, in arrival order.
        let mut transaction = self.waiting_for_gci_head;
        self.waiting_for_gci_head = NIL;
        self.waiting_for_gci_tail = NIL;
        while transaction != NIL {
            let next = self.records.transactions[transaction as usize].next_waiting_for_gci;
            self.records.transactions[transaction as usize].next_waiting_for_gci = NIL;
            if self.records.transactions[transaction as usize].state
                == TransactionState::WaitingForGci
            {
                self.commit_with(transaction, request.gci, ctx);
            }
            transaction = next;
        }
    }
}
