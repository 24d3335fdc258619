//! Commit (DESIGN.md §4): the GCI is taken at the commit decision, COMMIT
//! goes to every operation that holds something, the client is acknowledged
//! with the GCI once all are committed, then COMPLETE releases the records.
//! And the tc's half of the GCI switch (DESIGN.md §5).

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
        let address = self.config.address;
        let record = &self.records.transactions[transaction as usize];
        let transaction_id = record.transaction_id;
        let mut sent = 0;
        let mut op = record.first_op;
        while op != NIL {
            let operation = &mut self.records.operations[op as usize];
            if operation.phase == OpPhase::Prepared {
                operation.phase = OpPhase::Committing;
                send(
                    ctx,
                    address,
                    operation.ldm,
                    CommitReq {
                        ldm_op: operation.ldm_op,
                        tc_op: op,
                        transaction_id,
                        gci,
                    },
                );
                sent += 1;
            }
            op = operation.next;
        }
        let record = &mut self.records.transactions[transaction as usize];
        record.gci = gci;
        record.state = TransactionState::Committing;
        record.outstanding = sent;
        if sent == 0 {
            // Nothing held anywhere (committed reads only): done already.
            record.gci = Gci(0);
            self.acknowledge_commit(transaction, ctx);
        }
    }

    pub(crate) fn commit_conf(&mut self, conf: CommitConf, ctx: &mut dyn Context) {
        let operation = &mut self.records.operations[conf.tc_op as usize];
        assert_eq!(
            operation.phase,
            OpPhase::Committing,
            "COMMITCONF for an operation not committing"
        );
        operation.phase = OpPhase::Committed;
        let transaction = operation.transaction;
        let record = &mut self.records.transactions[transaction as usize];
        record.outstanding -= 1;
        if record.outstanding == 0 {
            self.acknowledge_commit(transaction, ctx);
        }
    }

    /// Every operation is committed: tell the client, then COMPLETE.
    fn acknowledge_commit(&mut self, transaction: u32, ctx: &mut dyn Context) {
        let address = self.config.address;
        self.counters.commits += 1;
        let record = &self.records.transactions[transaction as usize];
        let (api, transaction_id, operations, gci) = (
            record.api,
            record.transaction_id,
            record.batch_ops,
            record.gci,
        );
        if !record.api_failed {
            send(
                ctx,
                address,
                api,
                TcKeyConf {
                    transaction_id,
                    operations,
                    committed: true,
                    gci,
                },
            );
        }
        let mut sent = 0;
        let mut op = record.first_op;
        while op != NIL {
            let operation = &mut self.records.operations[op as usize];
            if operation.phase == OpPhase::Committed {
                operation.phase = OpPhase::Completing;
                send(
                    ctx,
                    address,
                    operation.ldm,
                    CompleteReq {
                        ldm_op: operation.ldm_op,
                        tc_op: op,
                        transaction_id,
                    },
                );
                sent += 1;
            }
            op = operation.next;
        }
        let record = &mut self.records.transactions[transaction as usize];
        record.state = TransactionState::Completing;
        record.outstanding = sent;
        if sent == 0 {
            self.records.release_transaction(transaction);
        }
    }

    pub(crate) fn complete_conf(&mut self, conf: CompleteConf, _ctx: &mut dyn Context) {
        let operation = &mut self.records.operations[conf.tc_op as usize];
        assert_eq!(
            operation.phase,
            OpPhase::Completing,
            "COMPLETECONF for an operation not completing"
        );
        operation.phase = OpPhase::Released;
        let transaction = operation.transaction;
        let record = &mut self.records.transactions[transaction as usize];
        record.outstanding -= 1;
        if record.outstanding == 0 {
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
