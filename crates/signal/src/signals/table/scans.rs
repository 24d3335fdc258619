//! The signal table's group Scans: 80..=119 (room for table and index scans): declarations in
//! `signal_table!`'s form (the signals module says what each part means),
//! handed on with the groups before them to the next group's macro, and
//! by the last to `signal_table!` itself. One file a group keeps the table
//! readable; the numbers and the order are the table's.

macro_rules! scans_signals {
    ($($declared:tt)*) => {
        operations_signals! {
            $($declared)*

            /// API -> ldm. Read a batch of rows of one partition replica in row-id
            /// order, for the replica checker.
            #[derive(Debug, PartialEq)]
            80 ScanPartitionReq: Api | Tc -> Ldm, api_request
                refused_by ScanPartitionRef { request_id }
            {
                /// Client's number for the request, echoed.
                request_id: u32,
                /// Table.
                table_id: u32,
                /// Partition.
                partition: u32,
                /// First row id to look at.
                start_row: u32,
                /// Most rows to return.
                max_rows: u32,
            }

            /// ldm -> API. Rows of a partition scan: each row is row id (u32), GCI
            /// (u64), length (u32) and that many bytes of attribute entries of every
            /// column.
            #[derive(Debug, PartialEq)]
            81 ScanPartitionConf: Ldm -> Api | Tc, api_reply {
                /// Echoed.
                request_id: u32,
                /// Where the next batch starts.
                next_row: u32,
                /// True when no rows remain after this batch.
                done: bool,
                /// The rows.
                rows: Section,
            }

            /// ldm -> API. The scan failed.
            #[derive(Debug, PartialEq)]
            82 ScanPartitionRef: Ldm -> Api | Tc, api_reply {
                /// Echoed.
                request_id: u32,
                /// Why.
                error: ErrorCode,
            }

            /// API -> ldm. A batch of committed rows of one partition replica:
            /// in row-id order (`index` ROW_ORDER, a full scan) or through one of
            /// its ordered indexes (`index` 0 the primary key's, or another of the
            /// table's) in key order (descending with DESCENDING) between two
            /// bounds. The `program`
            /// ([`crate::scan_program`]) chooses the columns returned and filters
            /// the rows at the ldm; with COUNT only the number of matching rows
            /// comes back. A committed read: it takes no locks, sees each row as
            /// last committed, and keeps nothing at the ldm between batches: the
            /// answer says where to resume (RESUME with `resume_row`, and for an
            /// index scan the key in `bounds`), so a row that did not change during
            /// the scan is seen exactly once. A batch ends at `max_rows` rows or
            /// `max_bytes` bytes returned, or after a bounded number of rows
            /// examined. Refused with ReadLeaseExpired when this node's read
            /// lease ran out. With a `transaction_id` (one of the sending API
            /// node's) the transaction's own prepared writes show through: its
            /// inserts and updates as it wrote them, its deletes gone (NDB's
            /// read of the latest copy in the same transaction; design 0035).
            #[derive(Debug, PartialEq)]
            83 ScanReq: Api -> Ldm, api_request
                refused_by ScanRef { request_id }
            {
                /// Client's number for the request, echoed.
                request_id: u32,
                /// Table.
                table_id: u32,
                /// Table version the client believes current.
                table_version: u32,
                /// Partition.
                partition: u32,
                /// The access path: [`scan_flags::ROW_ORDER`] or an ordered
                /// index (0: the primary key's, else the table's index of that
                /// id, `IndexDef::id`).
                index: u32,
                /// [`scan_flags`].
                flags: u8,
                /// Most rows to return (at least one is).
                max_rows: u32,
                /// Most bytes of rows to return (at most
                /// [`scan_flags::MAX_BATCH_BYTES`]; 0: [`scan_flags::DEFAULT_BATCH_BYTES`]).
                max_bytes: u32,
                /// With RESUME: the row id to resume at (row order) or after
                /// (an index, with the key in `bounds`).
                resume_row: u32,
                /// The transaction whose own uncommitted writes the scan sees
                /// (`TransactionId(0)`: none, committed rows only).
                transaction_id: TransactionId,
                /// The low bound, the high bound and the resume key
                /// ([`crate::scan_bounds`]); all empty for a row-order scan.
                bounds: Section,
                /// The projection and filter ([`crate::scan_program`]).
                program: Section,
            }

            /// ldm -> API. A batch of a scan: each row is row id (u32), GCI
            /// (u64: its last committed change's; 0 for a row shown with the
            /// scan's transaction's own uncommitted image), length (u32) and that many bytes of attribute entries of the
            /// projected columns (none with COUNT). Where to resume: `resume_row`,
            /// and for an index scan `resume_key`, the key of the last entry the
            /// batch looked at, which need not be a row it returned.
            #[derive(Debug, PartialEq)]
            84 ScanConf: Ldm -> Api, api_reply {
                /// Echoed.
                request_id: u32,
                /// True when no rows remain after this batch.
                done: bool,
                /// Rows of this batch that met the filter (returned, or only
                /// counted with COUNT).
                matched: u32,
                /// Rows this batch looked at.
                examined: u32,
                /// Where the next batch resumes (see the request's `resume_row`).
                resume_row: u32,
                /// The resume key of an index scan (attribute entries).
                resume_key: Section,
                /// The rows.
                rows: Section,
            }

            /// ldm -> API. The scan failed.
            #[derive(Debug, PartialEq)]
            85 ScanRef: Ldm -> Api, api_reply {
                /// Echoed.
                request_id: u32,
                /// Why.
                error: ErrorCode,
            }
        }
    };
}
