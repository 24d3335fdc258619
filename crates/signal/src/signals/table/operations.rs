//! The signal table's group Operations between tc and ldm: 120..=159 (room for take-over of a failed tc): declarations in
//! `signal_table!`'s form (the signals module says what each part means),
//! handed on with the groups before them to the next group's macro, and
//! by the last to `signal_table!` itself. One file a group keeps the table
//! readable; the numbers and the order are the table's.

macro_rules! operations_signals {
    ($($declared:tt)*) => {
        checkpoints_signals! {
            $($declared)*

            /// tc -> ldm (the primary), and ldm -> ldm along the replica chain. Prepare
            /// one operation on one replica of its partition.
            ///
            /// From the tc, `position` is 0, `row_id` and `previous_op` are NIL
            /// (u32::MAX) and `attr` holds the client's values (or read projection).
            /// A replica that prepared forwards the request to the next one in the
            /// chain with `position + 1`, the row id it chose or used, its own
            /// operation record in `previous_op`, and the full after-image in `attr`
            /// (no `attr` for a delete); `kind` is then Insert (place a new row at
            /// `row_id`), Update (replace the row at `row_id`) or Delete. The last
            /// replica answers the tc with LQHKEYCONF.
            #[derive(Debug)]
            120 LqhKeyReq: Tc | Ldm -> Ldm, node
                checked_by checks::lqh_key_req
            {
                /// The tc coordinating the transaction (answers and aborts go there).
                tc: BlockRef,
                /// The tc's operation record, echoed.
                tc_op: u32,
                /// The replicas, primary first.
                chain: ReplicaChain,
                /// The receiving replica's position in `chain`.
                position: u8,
                /// Row id chosen by the primary (NIL from the tc).
                row_id: u32,
                /// The previous replica's operation record (NIL at the primary).
                previous_op: u32,
                /// Transaction.
                transaction_id: TransactionId,
                /// What to do.
                kind: OperationKind,
                /// Lock for reads.
                lock: LockMode,
                /// Table id.
                table_id: u32,
                /// Partition within the table.
                partition: u32,
                /// The key's hash (tc computed it to route; ldm reuses it).
                hash: KeyHash,
                /// Key section.
                key: Section,
                /// Attribute section.
                attr: Option<Section>,
                /// A lock not granted at once is refused with LockNotAvailable
                /// instead of waited for (SQL's NOWAIT and SKIP LOCKED).
                /// Locking reads only.
                no_wait: bool,
            }

            /// ldm -> tc. The operation is prepared (row locked, after-image kept) or,
            /// for a committed read, done.
            #[derive(Debug)]
            121 LqhKeyConf: Ldm -> Tc, node {
                /// Echoed.
                tc_op: u32,
                /// The ldm's operation record, for COMMIT, COMPLETE and ABORT.
                ldm_op: u32,
                /// True when the ldm kept no operation record (committed read).
                released: bool,
                /// Row data of a read.
                data: Option<Section>,
            }

            /// ldm -> tc. The operation failed; the ldm kept nothing of it.
            #[derive(Debug)]
            122 LqhKeyRef: Ldm -> Tc, node {
                /// Echoed.
                tc_op: u32,
                /// Why.
                error: ErrorCode,
            }

            /// tc -> ldm. Commit a prepared operation: install its after-image, stamp
            /// the row with `gci`, release the lock (primary).
            #[derive(Debug)]
            123 CommitReq: Tc | Ldm -> Ldm, node {
                /// The ldm's operation record.
                ldm_op: u32,
                /// Echoed.
                tc_op: u32,
                /// Transaction (checked against the record).
                transaction_id: TransactionId,
                /// The transaction's commit GCI.
                gci: Gci,
            }

            /// ldm -> tc. The operation is committed.
            #[derive(Debug)]
            124 CommitConf: Ldm -> Tc, node {
                /// Echoed.
                tc_op: u32,
            }

            /// tc -> ldm. The transaction is acknowledged; release what remains of the
            /// operation record (and, on backups, the lock).
            #[derive(Debug)]
            125 CompleteReq: Tc | Ldm -> Ldm, node {
                /// The ldm's operation record.
                ldm_op: u32,
                /// Echoed.
                tc_op: u32,
                /// Transaction (checked against the record).
                transaction_id: TransactionId,
            }

            /// ldm -> tc. The operation record is released.
            #[derive(Debug)]
            126 CompleteConf: Ldm -> Tc, node {
                /// Echoed.
                tc_op: u32,
            }

            /// tc -> ldm (the primary), then ldm -> ldm along the chain. Abort the
            /// operation `tc_op` of `tc`, prepared or still waiting for a lock; drop its
            /// after-image and release its lock. A replica that had forwarded the
            /// operation forwards the abort (after the forwarded request on the same
            /// link, so it never overtakes it); the last one that holds or held
            /// nothing to forward answers the tc with ABORTCONF.
            #[derive(Debug)]
            127 AbortReq: Tc | Ldm -> Ldm, node
                checked_by checks::abort_req
            {
                /// The coordinating tc.
                tc: BlockRef,
                /// The tc's operation record (the ldm finds its own by it).
                tc_op: u32,
                /// Transaction (checked).
                transaction_id: TransactionId,
            }

            /// ldm -> tc. Nothing of the operation remains.
            #[derive(Debug)]
            128 AbortConf: Ldm -> Tc, node {
                /// Echoed.
                tc_op: u32,
            }

            /// tc -> an end of `chain`, then ldm -> ldm along it. Finish operation
            /// `tc_op` of `tc` on the live replicas after a data node of its chain
            /// failed (docs/design/failures.md §6), where the normal COMMIT,
            /// COMPLETE or ABORT may have been lost at the failed node, or after
            /// its coordinator failed (§7, sent by the tc taking over). `chain`
            /// holds only replicas alive when the tc sent it. Each replica finds
            /// the operation by `tc` and `tc_op` and does `step` if it still has
            /// it to do (commit: where prepared, with `gci`; complete: where
            /// committed; abort: where prepared or waiting), then passes it on:
            /// COMMIT and COMPLETE from the last replica back to the first, as
            /// normally; ABORT from the first to the last, behind any prepare on
            /// the same links. The far end answers RESOLVE_CONF to `reply_to`.
            #[derive(Debug, PartialEq)]
            129 ResolveReq: Tc | Ldm -> Ldm, node {
                /// The tc that coordinated the operation (the ldms know the
                /// operation by it).
                tc: BlockRef,
                /// Who hears RESOLVE_CONF: `tc`, or the tc that took its
                /// transactions over.
                reply_to: BlockRef,
                /// The tc's operation record.
                tc_op: u32,
                /// Transaction (checked).
                transaction_id: TransactionId,
                /// The live replicas, primary (or first alive) first.
                chain: ReplicaChain,
                /// [`resolve_step`].
                step: u8,
                /// The commit's GCI (commit only; 0 otherwise).
                gci: Gci,
            }

            /// ldm -> tc. The far end of a RESOLVE_REQ: `step` is done on every
            /// live replica.
            #[derive(Debug, PartialEq)]
            130 ResolveConf: Ldm -> Tc, node {
                /// Echoed.
                tc: BlockRef,
                /// Echoed.
                tc_op: u32,
                /// Echoed.
                transaction_id: TransactionId,
                /// Echoed.
                step: u8,
            }

            /// tc taking over -> every ldm of every live data node, once every
            /// survivor refuses the failed nodes (NODE_FAIL_COMPLETE_REP). Report
            /// every operation record here whose coordinating tc ran on a node of
            /// `failed` (TAKEOVER_OP_REP each), then TAKEOVER_CONF
            /// (docs/design/failures.md §7; NDB's LQH_TRANSREQ).
            #[derive(Debug, PartialEq)]
            131 TakeoverReq: Tc -> Ldm, node {
                /// The membership the take-over runs for (echoed, so the answers
                /// of an earlier take-over, cut short, are told apart).
                membership_id: u32,
                /// Every data node failed so far.
                failed: NodeSet,
            }

            /// ldm -> the tc taking over. One operation of a failed tc, as this
            /// replica holds it.
            #[derive(Debug, PartialEq)]
            132 TakeoverOpRep: Ldm -> Tc, node {
                /// Echoed.
                membership_id: u32,
                /// The failed tc that coordinated it.
                tc: BlockRef,
                /// That tc's operation record.
                tc_op: u32,
                /// Transaction.
                transaction_id: TransactionId,
                /// The partition's replicas as at prepare, primary first.
                chain: ReplicaChain,
                /// [`takeover_state`].
                state: u8,
                /// The commit's GCI (committed only; 0 otherwise).
                gci: Gci,
            }

            /// ldm -> the tc taking over: every operation of the failed tcs held
            /// here was reported (on the same link, before this).
            #[derive(Debug, PartialEq)]
            133 TakeoverConf: Ldm -> Tc, node {
                /// Echoed.
                membership_id: u32,
                /// How many TAKEOVER_OP_REPs went before it.
                operations: u32,
            }

            /// tc taking over -> the master dih of its node: every transaction of
            /// the tcs failed up to membership `membership_id` is committed (and
            /// completed) or aborted on every live replica. Global checkpoints
            /// were held back until now (docs/design/failures.md §7).
            #[derive(Debug, PartialEq)]
            134 TakeoverCompleteRep: Tc -> Dih, local {
                /// The membership the take-over ran for.
                membership_id: u32,
                /// Transactions committed by the take-over.
                committed: u32,
                /// Transactions aborted by the take-over.
                aborted: u32,
            }
        }
    };
}
