//! The signal table's group Transactions from API nodes: 20..=59 (room for take-over and scans of a transaction): declarations in
//! `signal_table!`'s form (the signals module says what each part means),
//! handed on with the groups before them to the next group's macro, and
//! by the last to `signal_table!` itself. One file a group keeps the table
//! readable; the numbers and the order are the table's.

macro_rules! transactions_signals {
    ($($declared:tt)*) => {
        schema_requests_signals! {
            $($declared)*

            /// API -> tc. One operation of a transaction; a batch is a run of these
            /// ending with one flagged EXECUTE (or COMMIT).
            #[derive(Debug, PartialEq)]
            20 TcKeyReq: Api | Tc -> Tc, api_request
                refused_by TcKeyRef { transaction_id, client_op, index_id = 0 }
                checked_by checks::tc_key_req
            {
                /// Transaction the operation belongs to.
                transaction_id: TransactionId,
                /// Client's number for this operation, echoed in replies.
                client_op: u32,
                /// [`tc_key_flags`].
                flags: u8,
                /// What to do.
                kind: OperationKind,
                /// Lock for reads.
                lock: LockMode,
                /// Table id.
                table_id: u32,
                /// Table version the client believes current.
                table_version: u32,
                /// Key section: the primary-key entries in key order.
                key: Section,
                /// Attribute section: values to write, or the columns to read (empty: all).
                attr: Option<Section>,
            }

            /// tc -> API. The batch executed (and committed when asked).
            #[derive(Debug, PartialEq)]
            21 TcKeyConf: Tc -> Api | Tc, api_reply {
                /// Transaction.
                transaction_id: TransactionId,
                /// Operations of the batch confirmed.
                operations: u32,
                /// Whether the transaction is now committed (and finished at the tc).
                committed: bool,
                /// GCI of the commit (0 when not committed or nothing was written).
                gci: Gci,
                /// The cluster's distribution (partition map) version: a client whose
                /// cached maps are older refreshes them.
                map_version: u32,
                /// The row of the read that answered last, when the batch commits:
                /// carried here instead of in a [`TransIdAi`] of its own, so a
                /// single-read transaction costs one signal to the client, not two.
                row: Option<ReadRow>,
            }

            /// tc -> API. The transaction failed and has been aborted, every lock released.
            #[derive(Debug, PartialEq)]
            22 TcKeyRef: Tc -> Api | Tc, api_reply {
                /// Transaction.
                transaction_id: TransactionId,
                /// The operation that failed (u32::MAX when none in particular).
                client_op: u32,
                /// Why.
                error: ErrorCode,
                /// With [`ErrorCode::DuplicateKey`]: the unique index whose value
                /// the operation would have repeated (0: the primary key's).
                index_id: u32,
            }

            /// tc -> API. Row data of one read operation; arrives before the batch's
            /// [`TcKeyConf`] (which carries the last read's row itself when the batch
            /// commits).
            #[derive(Debug, PartialEq)]
            23 TransIdAi: Tc -> Api | Tc, api_reply {
                /// Transaction.
                transaction_id: TransactionId,
                /// The read operation.
                client_op: u32,
                /// Attribute entries of the row.
                data: Section,
            }

            /// API -> tc. Commit a transaction whose batches have all executed.
            #[derive(Debug, PartialEq)]
            24 TcCommitReq: Api | Tc -> Tc, api_request
                refused_by TcKeyRef { transaction_id, client_op = u32::MAX, index_id = 0 }
            {
                /// Transaction.
                transaction_id: TransactionId,
            }

            /// API -> tc. Abort a transaction and release its locks.
            #[derive(Debug, PartialEq)]
            25 TcRollbackReq: Api | Tc -> Tc, api_request
                refused_by TcKeyRef { transaction_id, client_op = u32::MAX, index_id = 0 }
            {
                /// Transaction.
                transaction_id: TransactionId,
            }

            /// tc -> API. The transaction is rolled back.
            #[derive(Debug, PartialEq)]
            26 TcRollbackConf: Tc -> Api | Tc, api_reply {
                /// Transaction.
                transaction_id: TransactionId,
            }

            /// API -> tc. Answer once GCI `gci` is complete (durable: recorded in the
            /// system files, docs/design/durability.md §2). Answered with [`GciWaitConf`], or
            /// [`GciWaitRef`] when the tc cannot take one more waiter.
            #[derive(Debug, PartialEq)]
            27 GciWaitReq: Api -> Tc, api_request
                refused_by GciWaitRef { request_id }
            {
                /// Client's number for the request, echoed.
                request_id: u32,
                /// The GCI to wait for (a commit's GCI from its TCKEYCONF).
                gci: Gci,
            }

            /// tc -> API. `complete_gci` (at least the GCI waited for) is complete.
            #[derive(Debug, PartialEq)]
            28 GciWaitConf: Tc -> Api, api_reply {
                /// Echoed.
                request_id: u32,
                /// The cluster's latest complete GCI.
                complete_gci: Gci,
            }

            /// tc -> API. The wait was not taken.
            #[derive(Debug, PartialEq)]
            29 GciWaitRef: Tc -> Api, api_reply {
                /// Echoed.
                request_id: u32,
                /// Why.
                error: ErrorCode,
            }

            /// receive thread -> tc (local). An operation of a transaction arrived
            /// but could not be taken: its sections would have taken the section
            /// pool's reserve (an overload, `OutOfSignalMemory`). The tc treats it
            /// as an operation it refused: it aborts the transaction and answers
            /// the API node (`from`) with one TCKEYREF, as for any refused
            /// operation, so that the client's view and the tc's agree.
            #[derive(Debug, PartialEq)]
            30 TcKeyReqDroppedRep: Transport -> Tc, local {
                /// Transaction the operation belongs to.
                transaction_id: TransactionId,
                /// The operation, echoed in the refusal.
                client_op: u32,
                /// The operation's [`tc_key_flags`] (whether it started the
                /// transaction or closed its batch).
                flags: u8,
                /// Why.
                error: ErrorCode,
            }
        }
    };
}
