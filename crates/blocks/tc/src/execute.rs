//! Executing a batch: TCKEYREQ in, LQHKEYREQ out to the partition's ldm,
//! LQHKEYCONF/REF back, TCKEYCONF (or commit) when the batch is done.

use crate::records::{AbortReply, OpPhase, OpRole, TransactionState, NIL};
use crate::Tc;
use kernel::{send, Context};
use signal::attr::key_hash;
use signal::partition::bucket;
use signal::signals::ReplicaChain;
use signal::signals::*;
use signal::{BlockKind, BlockRef, ErrorCode, Gci};

/// Where an operation goes.
pub(crate) struct Route {
    /// The primary replica's ldm.
    pub(crate) ldm: BlockRef,
    /// The replicas it runs on (the primary alone for a read).
    pub(crate) chain: ReplicaChain,
    pub(crate) partition: u32,
    pub(crate) hash: signal::attr::KeyHash,
    /// The table has unique indexes, or is one's hidden table: a write
    /// takes the path of `unique.rs`.
    pub(crate) unique_indexes: bool,
}

impl Tc {
    pub(crate) fn tc_key_req(&mut self, from: BlockRef, request: TcKeyReq, ctx: &mut dyn Context) {
        let Some(transaction) = self.accept_operation(
            from,
            request.transaction_id,
            request.client_op,
            request.flags,
            ctx,
        ) else {
            return;
        };
        self.execute_operation(transaction, request, ctx);
    }

    /// TCKEYREQ_DROPPED_REP from the receive thread: an operation of `from`
    /// could not be taken. It counts as an operation of its batch that the
    /// tc refused: the transaction aborts, and the client hears one
    /// TCKEYREF, as for an operation refused here.
    pub(crate) fn tc_key_req_dropped(
        &mut self,
        from: BlockRef,
        dropped: TcKeyReqDroppedRep,
        ctx: &mut dyn Context,
    ) {
        let Some(transaction) = self.accept_operation(
            from,
            dropped.transaction_id,
            dropped.client_op,
            dropped.flags,
            ctx,
        ) else {
            return;
        };
        self.start_abort(
            transaction,
            AbortReply::Error {
                error: dropped.error,
                client_op: dropped.client_op,
            },
            ctx,
        );
    }

    /// The checks of an operation that arrives for transaction
    /// `transaction_id` of API block `from`, with `flags`: the
    /// transaction's record (seized for a START) once the operation may
    /// join it, its batch state updated; `None` when the operation was
    /// refused (answered) or dropped (the rest of a batch an abort ended).
    #[inline]
    fn accept_operation(
        &mut self,
        from: BlockRef,
        transaction_id: signal::TransactionId,
        client_op: u32,
        flags: u8,
        ctx: &mut dyn Context,
    ) -> Option<u32> {
        let address = self.config.address;
        let refuse = |ctx: &mut dyn Context, error| {
            send(
                ctx,
                address,
                from,
                TcKeyRef {
                    transaction_id,
                    client_op,
                    error,
                    index_id: 0,
                },
            );
            None
        };
        if !self.started {
            return refuse(ctx, ErrorCode::NodeNotStarted);
        }
        // An API node's, or (a unique index's build) this tc's own.
        let client = from.kind == BlockKind::Api || from == address;
        if !client || transaction_id.api_node() != from.node {
            return refuse(ctx, ErrorCode::BadRequest);
        }
        let now = ctx.now_ms();
        let transaction = match self.records.find(transaction_id) {
            Some(index) => {
                if flags & tc_key_flags::START != 0
                    || self.records.transactions[index as usize].api != from
                {
                    return refuse(ctx, ErrorCode::BadRequest);
                }
                index
            }
            // A stopping node begins nothing new: the client retries on
            // another node.
            None if flags & tc_key_flags::START != 0 && self.draining.is_some() => {
                return refuse(ctx, ErrorCode::NodeShuttingDown)
            }
            None if flags & tc_key_flags::START != 0 => {
                match self.records.seize_transaction(transaction_id, from, now) {
                    Some(index) => {
                        let epoch = self.switches.epoch;
                        self.records.transactions[index as usize].switch_epoch = epoch;
                        index
                    }
                    // No record to remember this refusal in: the rest of
                    // the batch, if any, is refused as UnknownTransaction,
                    // one TCKEYREF per operation; a client drops refusals
                    // of a transaction it has finished.
                    None => return refuse(ctx, ErrorCode::OutOfTransactionRecords),
                }
            }
            None => return refuse(ctx, ErrorCode::UnknownTransaction),
        };
        let closes_batch = flags & (tc_key_flags::EXECUTE | tc_key_flags::COMMIT) != 0;
        let record = &mut self.records.transactions[transaction as usize];
        match record.state {
            TransactionState::Idle => {
                record.state = TransactionState::Executing;
                record.batch_ops = 0;
                record.batch_closed = false;
            }
            TransactionState::Executing if !record.batch_closed => {}
            // The rest of a batch that an abort ended (or is ending) is
            // dropped: the abort's one TCKEYREF answers the whole batch.
            // The operation closing the batch ends the wait for it.
            TransactionState::Aborting | TransactionState::AbortedAwaitingBatchEnd => {
                record.last_activity_ms = now;
                if record.reply_owed {
                    // Aborted while the client was between batches: this
                    // operation opens its next batch, which hears why (at
                    // once, or when the abort finishes).
                    record.reply_owed = false;
                    record.batch_closed = false;
                    if let AbortReply::Error { error, .. } = record.abort_reply {
                        record.abort_reply = AbortReply::Error { error, client_op };
                        if record.state == TransactionState::AbortedAwaitingBatchEnd {
                            refuse(ctx, error);
                        }
                    }
                }
                if closes_batch {
                    record.batch_closed = true;
                    if record.state == TransactionState::AbortedAwaitingBatchEnd {
                        self.records.release_transaction(transaction);
                    }
                }
                return None;
            }
            _ => return refuse(ctx, ErrorCode::BadRequest),
        }
        record.last_activity_ms = now;
        if closes_batch {
            record.batch_closed = true;
            record.commit_requested = flags & tc_key_flags::COMMIT != 0;
        }
        Some(transaction)
    }

    /// Sends an accepted operation of `transaction` to its partition's
    /// primary ldm, or aborts the transaction when it cannot go. A write
    /// of a table with unique indexes keeps them too (`unique.rs`).
    pub(crate) fn execute_operation(
        &mut self,
        transaction: u32,
        request: TcKeyReq,
        ctx: &mut dyn Context,
    ) {
        let route = match self.route(&request) {
            Ok(route) => route,
            Err(error) => {
                let client_op = request.client_op;
                return self.abort_for(transaction, error, client_op, ctx);
            }
        };
        if request.flags & tc_key_flags::THROUGH_UNIQUE_INDEX != 0 {
            return self.read_through_unique_index(transaction, request, ctx);
        }
        let record = &mut self.records.transactions[transaction as usize];
        if !record.before_images.is_empty() && record.waits_for_before_image(&request, route.hash) {
            return self.defer_operation(transaction, request, route.hash, ctx);
        }
        if route.unique_indexes && request.kind != OperationKind::Read {
            return self.execute_unique_indexed_write(transaction, request, route, ctx);
        }
        self.send_operation(transaction, request, route, OpRole::Client, ctx);
    }

    /// Aborts `transaction` for `error` of client operation `client_op`.
    pub(crate) fn abort_for(
        &mut self,
        transaction: u32,
        error: ErrorCode,
        client_op: u32,
        ctx: &mut dyn Context,
    ) {
        self.start_abort(transaction, AbortReply::Error { error, client_op }, ctx);
    }

    /// Sends `request` (a client's or one the tc made, as `role` says)
    /// along `route` as an operation of `transaction`: its record, or
    /// `None` when none was left and the transaction is aborting.
    pub(crate) fn send_operation(
        &mut self,
        transaction: u32,
        request: TcKeyReq,
        route: Route,
        role: OpRole,
        ctx: &mut dyn Context,
    ) -> Option<u32> {
        let address = self.config.address;
        let now = ctx.now_ms();
        let record = &self.records.transactions[transaction as usize];
        if record.op_count >= self.config.max_operations_per_transaction {
            let client_op = request.client_op;
            self.abort_for(transaction, ErrorCode::TooManyOperations, client_op, ctx);
            return None;
        }
        let Some(op) = self.records.seize_operation(transaction) else {
            let client_op = request.client_op;
            self.abort_for(
                transaction,
                ErrorCode::OutOfOperationRecords,
                client_op,
                ctx,
            );
            return None;
        };
        let operation = &mut self.records.operations[op as usize];
        operation.phase = OpPhase::Sent;
        operation.client_op = request.client_op;
        operation.kind = request.kind;
        operation.lock = if request.kind == OperationKind::Read {
            request.lock
        } else {
            LockMode::Exclusive
        };
        operation.primary = route.ldm;
        operation.ldm = route.ldm;
        operation.chain = route.chain;
        operation.ignore_missing = request.flags & tc_key_flags::IGNORE_MISSING != 0;
        operation.skip_locked = request.flags & tc_key_flags::SKIP_LOCKED != 0;
        let no_wait = request.flags & (tc_key_flags::NO_WAIT | tc_key_flags::SKIP_LOCKED) != 0;
        operation.role = role;
        let record = &mut self.records.transactions[transaction as usize];
        record.outstanding += 1;
        if matches!(
            role,
            OpRole::Client | OpRole::BeforeImage | OpRole::IndexRead
        ) {
            record.batch_ops += 1;
        }
        record.last_progress_ms = now;
        self.counters.operations += 1;
        send(
            ctx,
            address,
            route.ldm,
            LqhKeyReq {
                tc: address,
                tc_op: op,
                chain: route.chain,
                position: 0,
                row_id: NIL,
                previous_op: NIL,
                transaction_id: request.transaction_id,
                kind: request.kind,
                lock: request.lock,
                table_id: request.table_id,
                partition: route.partition,
                hash: route.hash,
                key: request.key,
                attr: request.attr,
                no_wait,
            },
        );
        Some(op)
    }

    /// The ldm, partition and hash of an operation's key.
    pub(crate) fn route(&self, request: &TcKeyReq) -> Result<Route, ErrorCode> {
        let table = self
            .tables
            .get(request.table_id as usize)
            .and_then(Option::as_ref)
            .ok_or(ErrorCode::UnknownTable)?;
        if table.definition.version != request.table_version {
            return Err(ErrorCode::SchemaVersionMismatch);
        }
        let hash = key_hash(&table.definition, request.key.as_slice())?;
        let partition = table.map.bucket_partitions[bucket(hash) as usize];
        let placement = &table.map.partitions[partition as usize];
        let chain = ReplicaChain::new(&placement.replicas);
        // Reads (locking or not) use the primary only; writes run the chain.
        let chain = if request.kind == OperationKind::Read {
            chain.primary_only()
        } else {
            chain
        };
        Ok(Route {
            ldm: BlockRef::new(chain.primary(), BlockKind::Ldm, placement.ldm_instance),
            chain,
            partition,
            hash,
            unique_indexes: !table.unique.is_empty() || table.hidden_of.is_some(),
        })
    }

    /// The transaction of operation `tc_op`, which ldm `from` answered:
    /// `None` for an answer this tc awaits from no one (not in use, or not
    /// in flight in a transaction still executing). From another node
    /// that is a late signal (one meant for a failed incarnation of this
    /// node, say): counted and dropped. From this node's own ldm it is a
    /// bug.
    fn answered_operation(&mut self, from: BlockRef, tc_op: u32) -> Option<u32> {
        let awaited = self
            .records
            .operations
            .get(tc_op as usize)
            .filter(|operation| operation.transaction != NIL)
            .filter(|operation| {
                operation.phase == OpPhase::Sent
                    || self.records.transactions[operation.transaction as usize].state
                        == TransactionState::Aborting
            })
            .map(|operation| operation.transaction);
        if awaited.is_none() {
            assert_ne!(
                from.node, self.config.address.node,
                "ldm {from} answered tc operation {tc_op}, which awaits no answer"
            );
            self.counters.stray_ldm_answers += 1;
        }
        awaited
    }

    pub(crate) fn lqh_key_conf(&mut self, from: BlockRef, conf: LqhKeyConf, ctx: &mut dyn Context) {
        let Some(transaction) = self.answered_operation(from, conf.tc_op) else {
            return;
        };
        let record = &mut self.records.transactions[transaction as usize];
        if record.state == TransactionState::Aborting {
            // The ABORT we sent will be answered after this; the data is dropped.
            return;
        }
        assert_eq!(
            record.state,
            TransactionState::Executing,
            "LQHKEYCONF for a transaction not executing"
        );
        let operation = &mut self.records.operations[conf.tc_op as usize];
        assert_eq!(
            operation.phase,
            OpPhase::Sent,
            "second LQHKEYCONF for one operation"
        );
        // The last replica of the chain answers; commit starts there. A
        // primary copying to a restarting node added it last to the chain
        // (docs/design/0018-node-restart.md): it is part of the chain
        // from now on, for a failure's resolve as for the commit.
        operation.ldm = from;
        let chain = &operation.chain;
        if !chain.as_slice().contains(&from.node) && usize::from(chain.length) < MAX_REPLICAS {
            operation.chain = chain.appended(from.node);
        }
        operation.ldm_op = conf.ldm_op;
        operation.phase = if conf.released {
            OpPhase::Released
        } else {
            OpPhase::Prepared
        };
        let client_op = operation.client_op;
        let role = operation.role;
        let (api, transaction_id) = (record.api, record.transaction_id);
        record.outstanding -= 1;
        record.last_progress_ms = ctx.now_ms();
        match role {
            // The row a unique-indexed write needs: the tc's, not the
            // client's.
            OpRole::BeforeImage => {
                return self.before_image_read(transaction, conf.tc_op, conf.data, ctx)
            }
            OpRole::InsertForWrite => return self.inserted_for_write(transaction, conf.tc_op, ctx),
            OpRole::IndexRead => return self.index_read(transaction, conf.tc_op, conf.data, ctx),
            OpRole::IndexRow { checked } => {
                if checked && !self.index_row_holds_values(conf.tc_op, conf.data.as_ref()) {
                    // Changed between the two reads: no such row now.
                    return self.index_row_missing(transaction, conf.tc_op, ctx);
                }
                // Its request's sections go back to the pool.
                self.records.operations[conf.tc_op as usize].pending = None;
            }
            OpRole::HiddenCheck { .. } => {
                return self.hidden_row_checked(transaction, conf.tc_op, conf.data, ctx)
            }
            OpRole::Client | OpRole::Triggered { .. } => {}
        }
        let record = &mut self.records.transactions[transaction as usize];
        let ends_committing_batch =
            record.commit_requested && record.batch_closed && record.outstanding == 0;
        if let Some(data) = conf.data {
            if ends_committing_batch && record.last_row.is_none() {
                // The commit's TCKEYCONF comes next: the row rides in it.
                record.last_row = Some(ReadRow { client_op, data });
                return self.maybe_batch_done(transaction, ctx);
            }
            send(
                ctx,
                self.config.address,
                api,
                TransIdAi {
                    transaction_id,
                    client_op,
                    data,
                },
            );
        }
        self.maybe_batch_done(transaction, ctx);
    }

    pub(crate) fn lqh_key_ref(
        &mut self,
        from: BlockRef,
        refusal: LqhKeyRef,
        ctx: &mut dyn Context,
    ) {
        let Some(transaction) = self.answered_operation(from, refusal.tc_op) else {
            return;
        };
        let operation = &mut self.records.operations[refusal.tc_op as usize];
        let client_op = operation.client_op;
        let record = &mut self.records.transactions[transaction as usize];
        if record.state == TransactionState::Aborting {
            return;
        }
        assert_eq!(
            operation.phase,
            OpPhase::Sent,
            "LQHKEYREF for an operation not in flight"
        );
        let skipped = operation.skip_locked
            && refusal.error == ErrorCode::LockNotAvailable
            && operation.role == OpRole::Client;
        if skipped && from == operation.primary {
            // A read asked to skip a row another transaction holds: it
            // holds nothing and returns no row; the transaction goes on.
            operation.phase = OpPhase::Released;
            record.outstanding -= 1;
            record.last_progress_ms = ctx.now_ms();
            return self.maybe_batch_done(transaction, ctx);
        }
        if operation.ignore_missing
            && refusal.error == ErrorCode::NoSuchRow
            && from == operation.primary
        {
            // A read of a row that is not there, asked to tolerate it: it
            // holds nothing and returns no row; the transaction goes on.
            operation.phase = OpPhase::Released;
            record.outstanding -= 1;
            record.last_progress_ms = ctx.now_ms();
            match operation.role {
                // A write of a row not there: it inserts.
                OpRole::BeforeImage => {
                    return self.before_image_read(transaction, refusal.tc_op, None, ctx)
                }
                // No hidden row: no row for the client.
                OpRole::IndexRead => {
                    return self.index_row_missing(transaction, refusal.tc_op, ctx)
                }
                // No hidden row to delete (the build has not reached it).
                OpRole::HiddenCheck { .. } => {
                    return self.hidden_row_checked(transaction, refusal.tc_op, None, ctx)
                }
                _ => {}
            }
            return self.maybe_batch_done(transaction, ctx);
        }
        if operation.role == OpRole::InsertForWrite
            && refusal.error == ErrorCode::DuplicateKey
            && from == operation.primary
        {
            // Another transaction inserted the row the write found
            // missing: nothing is held; the write starts again.
            operation.phase = OpPhase::Released;
            record.outstanding -= 1;
            record.last_progress_ms = ctx.now_ms();
            return self.insert_for_write_refused(transaction, refusal.tc_op, ctx);
        }
        if let (ErrorCode::DuplicateKey, OpRole::Triggered { index_id }) =
            (refusal.error, operation.role)
        {
            record.duplicate_index = index_id;
        }
        // A refusal from the primary means nothing is held anywhere. A
        // refusal from a backup means the replicas before it hold the
        // prepared operation: the abort must run the chain from the primary.
        operation.phase = if from == operation.primary {
            OpPhase::Released
        } else {
            OpPhase::Prepared
        };
        record.outstanding -= 1;
        self.start_abort(
            transaction,
            AbortReply::Error {
                error: refusal.error,
                client_op,
            },
            ctx,
        );
    }

    /// Answers or commits once every operation of a closed batch answered.
    pub(crate) fn maybe_batch_done(&mut self, transaction: u32, ctx: &mut dyn Context) {
        let record = &mut self.records.transactions[transaction as usize];
        if record.outstanding > 0 || !record.batch_closed {
            return;
        }
        if record.commit_requested {
            return self.decide_commit(transaction, ctx);
        }
        record.state = TransactionState::Idle;
        record.last_activity_ms = ctx.now_ms();
        let (api, transaction_id, operations) =
            (record.api, record.transaction_id, record.batch_ops);
        send(
            ctx,
            self.config.address,
            api,
            TcKeyConf {
                transaction_id,
                operations,
                committed: false,
                gci: Gci(0),
                map_version: self.map_version,
                row: None,
            },
        );
    }

    pub(crate) fn tc_commit_req(
        &mut self,
        from: BlockRef,
        request: TcCommitReq,
        ctx: &mut dyn Context,
    ) {
        let transaction_id = request.transaction_id;
        match self.records.find(transaction_id) {
            Some(index)
                if self.records.transactions[index as usize].api == from
                    && self.records.transactions[index as usize].state
                        == TransactionState::Idle =>
            {
                let record = &mut self.records.transactions[index as usize];
                record.batch_ops = 0;
                record.batch_closed = true;
                record.commit_requested = true;
                self.decide_commit(index, ctx);
            }
            // Aborted between batches (a node failure, say): the commit
            // hears why, as an operation would (`accept_operation`).
            Some(index)
                if self.records.transactions[index as usize].api == from
                    && self.records.transactions[index as usize].reply_owed =>
            {
                let record = &mut self.records.transactions[index as usize];
                record.reply_owed = false;
                // Still aborting: its end answers (`finish_abort`).
                if record.state == TransactionState::AbortedAwaitingBatchEnd {
                    let error = match record.abort_reply {
                        AbortReply::Error { error, .. } => error,
                        _ => ErrorCode::TransactionAborted,
                    };
                    self.records.release_transaction(index);
                    self.refuse_whole_transaction(ctx, from, transaction_id, error);
                }
            }
            _ => self.refuse_whole_transaction(
                ctx,
                from,
                transaction_id,
                ErrorCode::UnknownTransaction,
            ),
        }
    }
}
