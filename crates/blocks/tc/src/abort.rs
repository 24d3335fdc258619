//! Abort: ABORT to every operation that may hold a lock or an after-image,
//! then the client hears why (docs/design/transactions.md §6, §8). Also the
//! two timeouts that end in an abort (lock wait: deadlock detection;
//! inactivity) and the abort of a disconnected client's transactions.

use crate::records::{AbortReply, OpPhase, TransactionState, NIL};
use crate::Tc;
use kernel::{send, Context};
use signal::signals::*;
use signal::{BlockRef, ErrorCode};

impl Tc {
    /// Aborts `transaction` and answers per `reply` when every ldm confirmed.
    pub(crate) fn start_abort(
        &mut self,
        transaction: u32,
        reply: AbortReply,
        ctx: &mut dyn Context,
    ) {
        let record = &self.records.transactions[transaction as usize];
        assert!(
            matches!(
                record.state,
                TransactionState::Idle
                    | TransactionState::Executing
                    | TransactionState::WaitingForGci
            ),
            "abort of a transaction in state {:?}",
            record.state
        );
        let transaction_id = record.transaction_id;
        // A client between batches waits for nothing: it hears of an
        // abort it did not ask for in answer to its next operation. Not
        // after the inactivity timeout: such a client has been silent as
        // long as the record would wait for it.
        let reply_owed = record.state == TransactionState::Idle
            && matches!(
                reply,
                AbortReply::Error { error, .. } if error != ErrorCode::TransactionInactive
            );
        let address = self.config.address;
        let sent = self.advance_operations(
            transaction,
            &[OpPhase::Sent, OpPhase::Prepared],
            OpPhase::Aborting,
            |tc_op, _| {
                AbortReq {
                    tc: address,
                    tc_op,
                    transaction_id,
                }
                .into()
            },
            ctx,
        );
        let record = &mut self.records.transactions[transaction as usize];
        record.state = TransactionState::Aborting;
        record.abort_reply = reply;
        record.reply_owed = reply_owed;
        record.outstanding = sent;
        if sent == 0 {
            self.finish_abort(transaction, ctx);
        }
    }

    pub(crate) fn abort_conf(&mut self, conf: AbortConf, ctx: &mut dyn Context) {
        self.abort_confirmed(conf.tc_op, ctx);
    }

    /// Nothing of operation `tc_op` remains on any replica.
    pub(crate) fn abort_confirmed(&mut self, tc_op: u32, ctx: &mut dyn Context) {
        let confirmed =
            self.operation_confirmed(tc_op, OpPhase::Aborting, OpPhase::Released, "ABORTCONF");
        if let Some(transaction) = confirmed {
            self.finish_abort(transaction, ctx);
        }
    }

    fn finish_abort(&mut self, transaction: u32, ctx: &mut dyn Context) {
        let record = &self.records.transactions[transaction as usize];
        let (api, transaction_id) = (record.api, record.transaction_id);
        // An error ended the transaction while the client is still sending
        // its batch: keep the record until the batch ends, so that the rest
        // of the batch is dropped instead of refused once per operation (the
        // client hears of the abort once). Not after the inactivity timeout:
        // that client has already been silent as long as the record would
        // wait for it.
        let await_batch_end = (!record.batch_closed || record.reply_owed)
            && !record.api_failed
            && matches!(
                record.abort_reply,
                AbortReply::Error { error, .. } if error != ErrorCode::TransactionInactive
            );
        if !record.api_failed && !record.reply_owed {
            match record.abort_reply {
                AbortReply::Error { error, client_op } => send(
                    ctx,
                    self.config.address,
                    api,
                    TcKeyRef {
                        transaction_id,
                        client_op,
                        error,
                        index_id: if error == ErrorCode::DuplicateKey {
                            record.duplicate_index
                        } else {
                            0
                        },
                    },
                ),
                AbortReply::RollbackConf => send(
                    ctx,
                    self.config.address,
                    api,
                    TcRollbackConf { transaction_id },
                ),
                AbortReply::Silent => {}
            }
        }
        self.counters.aborts += 1;
        if await_batch_end {
            self.records.release_operations(transaction);
            let record = &mut self.records.transactions[transaction as usize];
            record.state = TransactionState::AbortedAwaitingBatchEnd;
        } else {
            self.records.release_transaction(transaction);
        }
    }

    pub(crate) fn tc_rollback_req(
        &mut self,
        from: BlockRef,
        request: TcRollbackReq,
        ctx: &mut dyn Context,
    ) {
        let transaction_id = request.transaction_id;
        match self.records.find(transaction_id) {
            Some(index) if self.records.transactions[index as usize].api == from => {
                match self.records.transactions[index as usize].state {
                    TransactionState::Idle | TransactionState::Executing => {
                        self.start_abort(index, AbortReply::RollbackConf, ctx)
                    }
                    TransactionState::Aborting => {
                        // Its end answers, the rollback now (an abort
                        // between batches owed the client nothing else).
                        let record = &mut self.records.transactions[index as usize];
                        record.abort_reply = AbortReply::RollbackConf;
                        record.reply_owed = false;
                    }
                    // Aborted already, and the client told; it gives up the
                    // rest of its batch.
                    TransactionState::AbortedAwaitingBatchEnd => {
                        self.records.release_transaction(index);
                        send(
                            ctx,
                            self.config.address,
                            from,
                            TcRollbackConf { transaction_id },
                        );
                    }
                    _ => self.refuse_whole_transaction(
                        ctx,
                        from,
                        transaction_id,
                        ErrorCode::BadRequest,
                    ),
                }
            }
            // Unknown (already finished): rolling back nothing succeeds.
            _ => send(
                ctx,
                self.config.address,
                from,
                TcRollbackConf { transaction_id },
            ),
        }
    }

    /// Periodic: abort transactions stuck on locks or idle too long.
    pub(crate) fn timeout_scan(&mut self, ctx: &mut dyn Context) {
        let now = ctx.now_ms();
        let mut transaction = self.records.active_head;
        while transaction != NIL {
            let record = &self.records.transactions[transaction as usize];
            let next = record.next_active;
            match record.state {
                TransactionState::Executing
                    if record.outstanding > 0
                        && now.saturating_sub(record.last_progress_ms)
                            >= self.config.lock_wait_timeout_ms =>
                {
                    self.counters.lock_wait_timeouts += 1;
                    let reply = AbortReply::Error {
                        error: ErrorCode::LockWaitTimeout,
                        client_op: u32::MAX,
                    };
                    self.start_abort(transaction, reply, ctx);
                }
                // Idle, or in a batch the client has not closed with nothing
                // outstanding: either way the client owes the next step.
                TransactionState::Idle | TransactionState::Executing
                    if (record.state == TransactionState::Idle
                        || (record.outstanding == 0 && !record.batch_closed))
                        && now.saturating_sub(record.last_activity_ms)
                            >= self.config.inactive_transaction_timeout_ms =>
                {
                    self.counters.inactivity_timeouts += 1;
                    let reply = AbortReply::Error {
                        error: ErrorCode::TransactionInactive,
                        client_op: u32::MAX,
                    };
                    self.start_abort(transaction, reply, ctx);
                }
                // The rest of the aborted batch is not coming (the client
                // heard of the abort already).
                TransactionState::AbortedAwaitingBatchEnd
                    if now.saturating_sub(record.last_activity_ms)
                        >= self.config.inactive_transaction_timeout_ms =>
                {
                    self.records.release_transaction(transaction);
                }
                _ => {}
            }
            transaction = next;
        }
    }

    pub(crate) fn api_failed(&mut self, report: ApiFailRep, ctx: &mut dyn Context) {
        self.drop_gci_waiters_of(&report);
        let mut transaction = self.records.active_head;
        while transaction != NIL {
            let record = &mut self.records.transactions[transaction as usize];
            let next = record.next_active;
            if record.api.node == report.node {
                record.api_failed = true;
                match record.state {
                    TransactionState::Idle | TransactionState::Executing => {
                        self.start_abort(transaction, AbortReply::Silent, ctx)
                    }
                    TransactionState::AbortedAwaitingBatchEnd => {
                        self.records.release_transaction(transaction)
                    }
                    _ => {}
                }
            }
            transaction = next;
        }
    }
}
