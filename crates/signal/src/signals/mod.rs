//! Every signal blocks exchange, declared once in the table below and
//! named in NDB's vocabulary (REQ asks, CONF answers yes, REF answers no,
//! ORD orders without answer, REP reports). Each declaration says the
//! signal's number, its senders and receivers, its class (API request, API
//! reply, between data nodes, node-local), the REF a misaddressed API
//! request is refused with, its fields (which are its wire form, in order)
//! and any check of the whole signal; `signal_table!` (in `declare`)
//! generates the rest. Adding a signal is one declaration here plus its
//! handlers (the recipe: docs/wire-format.md, "Adding a signal").
//!
//! Numbers are grouped by protocol, with room left in each group for the
//! signals still to come (node failures and take-over, node restart,
//! scans and indexes). Signals between blocks of one node move as Rust
//! values through the job queues; signals to another node or an API node
//! are encoded by `codec`. Signals holding an `Arc` are node-local.

#[macro_use]
mod declare;
#[cfg(test)]
mod table_tests;
mod types;

pub use types::*;

use crate::attr::KeyHash;
use crate::codec::checks;
use crate::error::ErrorCode;
use crate::fs::{FsDone, FsError, FsOperation};
use crate::ids::{BlockRef, Gci, NodeId, NodeSet, TransactionId};
use crate::schema::TableDef;
use crate::section::Section;
use std::sync::Arc;

/// Who sends a signal and where it may travel.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SignalClass {
    /// An API node sends it to one kind of block of a data node.
    ApiRequest,
    /// A data node's block sends it to an API node.
    ApiReply,
    /// Between blocks of data nodes (on the wire between nodes).
    Node,
    /// Inside one data node only: no wire form.
    Local,
}

/// One signal's declaration, as data ([`SIGNALS`]).
#[derive(Clone, Copy, Debug)]
pub struct SignalInfo {
    /// The number on the wire.
    pub number: u16,
    /// The struct's name.
    pub name: &'static str,
    /// The kinds of sender (block kinds, `Api`, `Transport` or `Any`).
    pub from: &'static [&'static str],
    /// The kinds of receiver.
    pub to: &'static [&'static str],
    /// Who sends it and where it travels.
    pub class: SignalClass,
    /// The REF a misaddressed API request is refused with.
    pub refused_with: Option<&'static str>,
}

signal_table! {

    // ---- Registration and admission: 1..=19

    /// API -> membership. An API node announces itself on a new connection.
    /// The first one, which must open the connection's first frame, is
    /// checked by the data node's receive thread before the connection is
    /// admitted: `token` must be the one mgmd issued with the frame's
    /// sender id (docs/design/0007-groundwork.md, "Authenticated
    /// admission"); otherwise API_REGREF `NotAdmitted` and the connection
    /// is closed.
    #[derive(Debug, PartialEq)]
    1 ApiRegReq: Api -> Membership, api_request
        refused_by ApiRegRef { }
    {
        /// Protocol version the client speaks.
        protocol_version: u16,
        /// What mgmd issued with the API node id.
        token: ApiToken,
    }

    /// membership -> API. Registration accepted; the node's shape for routing.
    #[derive(Debug, PartialEq)]
    2 ApiRegConf: Membership -> Api, api_reply {
        /// Whether the node has finished its start phases.
        started: bool,
        /// tc instances on the node (the client spreads transactions over them).
        tc_instances: u16,
        /// The cluster's heartbeat interval, milliseconds: the API node
        /// sends [`ApiHeartbeatReq`] on a connection idle this long.
        heartbeat_interval_ms: u32,
        /// Intervals of silence, in a row, after which either side takes
        /// the other for gone.
        api_heartbeat_missed: u16,
    }

    /// membership -> API. Registration refused: the request was malformed
    /// or sent to a block that does not register API nodes, or the
    /// client speaks another protocol version (membership), or its token
    /// is not one mgmd issued for its node id (the receive thread, before
    /// it closes the connection: `NotAdmitted`).
    #[derive(Debug, PartialEq)]
    3 ApiRegRef: Membership -> Api, api_reply {
        /// Why.
        error: ErrorCode,
    }

    /// Data node -> data node, the dialer's hello: the first frame on a
    /// link (sequence 0, this signal alone). Opens the handshake that
    /// proves both sides hold the cluster secret (docs/wire-format.md §7).
    /// Sent and consumed by the receive threads; no block sees it.
    #[derive(Debug, PartialEq)]
    4 LinkHelloReq: Transport -> Transport, node {
        /// Fresh random bytes the acceptor's proof must cover.
        challenge: [u8; 16],
    }

    /// Data node -> data node, the acceptor's hello (its first frame,
    /// sequence 0, this signal alone): its own challenge and its proof
    /// over both challenges.
    #[derive(Debug, PartialEq)]
    5 LinkHelloConf: Transport -> Transport, node {
        /// Fresh random bytes the dialer's proof must cover.
        challenge: [u8; 16],
        /// HMAC-SHA256 under the cluster secret (`admission::link_proof`).
        proof: [u8; 32],
    }

    /// Data node -> data node, the dialer's proof (its second frame,
    /// sequence 1, this signal alone); the acceptor admits the link on it.
    #[derive(Debug, PartialEq)]
    6 LinkProofRep: Transport -> Transport, node {
        /// HMAC-SHA256 under the cluster secret (`admission::link_proof`).
        proof: [u8; 32],
    }

    /// membership -> every API node registered with this data node: the
    /// cluster agreed that the data nodes of `failed` failed (membership
    /// `membership_id`). The client fails what waits on its connections to
    /// them and stops using them at once, instead of waiting for its reply
    /// timeout: a node that went silent (paused, cut off) keeps its
    /// connections open (docs/design/failures.md §10).
    #[derive(Debug, PartialEq)]
    7 ApiNodeFailRep: Membership -> Api, api_reply {
        /// The agreed membership without them.
        membership_id: u32,
        /// The data nodes that failed.
        failed: NodeSet,
    }

    /// API -> a data node, on a connection it has sent nothing else on for
    /// a heartbeat interval: a sign of life (docs/design/0017-api-heartbeats.md).
    /// The data node's receive thread answers it at once with
    /// [`ApiHeartbeatConf`], ahead of any queued work, and from the first
    /// one on closes the connection if the API node goes silent (the API
    /// node is taken for failed: its transactions are aborted). Membership
    /// answers one that reaches it the same way.
    #[derive(Debug, PartialEq)]
    8 ApiHeartbeatReq: Api -> Membership, api_request
        refused_by ApiRegRef { }
    {
        /// The API node's count of heartbeats sent on this connection
        /// (echoed; for logs).
        count: u32,
    }

    /// data node -> API. Answer to [`ApiHeartbeatReq`]: the API node
    /// counts any frame from the data node as a sign of life, this one
    /// included, and takes the data node for gone after its limit of
    /// silence.
    #[derive(Debug, PartialEq)]
    9 ApiHeartbeatConf: Membership -> Api, api_reply {
        /// Echoed.
        count: u32,
    }

    // ---- Transactions from API nodes: 20..=59 (room for take-over and scans of a transaction)

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

    // ---- Schema requests from API nodes: 60..=79

    /// API -> dict. Create a table from an encoded [`TableDef`] (id and version ignored).
    #[derive(Debug, PartialEq)]
    60 CreateTabReq: Api -> Dict, api_request
        refused_by SchemaRef { request_id }
    {
        /// Client's number for the request, echoed.
        request_id: u32,
        /// Encoded table definition.
        definition: Section,
    }

    /// dict -> API. The table exists on every block.
    #[derive(Debug, PartialEq)]
    61 CreateTabConf: Dict -> Api, api_reply {
        /// Echoed.
        request_id: u32,
        /// Assigned id.
        table_id: u32,
        /// Assigned version.
        table_version: u32,
    }

    /// dict -> API. A schema request failed (create, drop, get or list).
    #[derive(Debug, PartialEq)]
    62 SchemaRef: Dict -> Api, api_reply {
        /// Echoed.
        request_id: u32,
        /// Why.
        error: ErrorCode,
    }

    /// API -> dict. Drop the table with this name.
    #[derive(Debug, PartialEq)]
    63 DropTabReq: Api -> Dict, api_request
        refused_by SchemaRef { request_id }
    {
        /// Client's number for the request, echoed.
        request_id: u32,
        /// Table name bytes.
        name: Section,
    }

    /// dict -> API. The table is gone from every block.
    #[derive(Debug, PartialEq)]
    64 DropTabConf: Dict -> Api, api_reply {
        /// Echoed.
        request_id: u32,
    }

    /// API -> dict. Fetch a table's definition by name.
    #[derive(Debug, PartialEq)]
    65 GetTabInfoReq: Api -> Dict, api_request
        refused_by SchemaRef { request_id }
    {
        /// Client's number for the request, echoed.
        request_id: u32,
        /// Table name bytes.
        name: Section,
    }

    /// dict -> API. A table definition.
    #[derive(Debug, PartialEq)]
    66 GetTabInfoConf: Dict -> Api, api_reply {
        /// Echoed.
        request_id: u32,
        /// Schema version at the time of the answer.
        schema_version: u32,
        /// Encoded [`TableDef`] with id, version and partitions.
        definition: Section,
        /// The cluster's distribution version when the map was taken.
        map_version: u32,
        /// Encoded [`PartitionMap`] of the table (see `codec::encode_partition_map`).
        map: Section,
    }

    /// API -> dict (any data node's). List the online tables: how the replica
    /// checker finds every table without knowing their names. Refused with
    /// [`SchemaRef`] (NodeNotStarted before the dict's schema phase).
    #[derive(Debug, PartialEq)]
    67 ListTablesReq: Api -> Dict, api_request
        refused_by SchemaRef { request_id }
    {
        /// Client's number for the request, echoed.
        request_id: u32,
    }

    /// dict -> API. The names of the online tables (those GET_TABINFO finds;
    /// tables being created or dropped are left out), sorted by byte value.
    #[derive(Debug, PartialEq)]
    68 ListTablesConf: Dict -> Api, api_reply
        checked_by checks::list_tables_conf
    {
        /// Echoed.
        request_id: u32,
        /// Schema version at the time of the answer: the list is that
        /// version's tables.
        schema_version: u32,
        /// The names: u16 count, then per name a u16 byte length and that many
        /// bytes of UTF-8 (see `codec::encode_table_names` and
        /// `codec::decode_table_names`).
        names: Section,
    }

    /// API -> dict. Create an ordered index on a table that may hold rows
    /// and be written to (docs/design/0024-online-index-changes.md).
    #[derive(Debug, PartialEq)]
    69 CreateIndexReq: Api -> Dict, api_request
        refused_by SchemaRef { request_id }
    {
        /// Client's number for the request, echoed.
        request_id: u32,
        /// The table, the index's name and its columns by name: see
        /// [`crate::schema::IndexChange`].
        change: Section,
    }

    /// API -> dict. Drop an ordered index of a table.
    #[derive(Debug, PartialEq)]
    70 DropIndexReq: Api -> Dict, api_request
        refused_by SchemaRef { request_id }
    {
        /// Client's number for the request, echoed.
        request_id: u32,
        /// The table and the index's name (no columns): see
        /// [`crate::schema::IndexChange`].
        change: Section,
    }

    /// dict -> API. The index is built on every replica and every dict
    /// hands out the definition with it (a create), or is gone (a drop).
    #[derive(Debug, PartialEq)]
    71 AlterTabConf: Dict -> Api, api_reply {
        /// Echoed.
        request_id: u32,
        /// The table's revision after the change.
        revision: u32,
    }

    // ---- Scans: 80..=119 (room for table and index scans)

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
    /// lease ran out.
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
        /// The low bound, the high bound and the resume key
        /// ([`crate::scan_bounds`]); all empty for a row-order scan.
        bounds: Section,
        /// The projection and filter ([`crate::scan_program`]).
        program: Section,
    }

    /// ldm -> API. A batch of a scan: each row is row id (u32), GCI
    /// (u64), length (u32) and that many bytes of attribute entries of the
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

    // ---- Operations between tc and ldm: 120..=159 (room for take-over of a failed tc)

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

    // ---- Global checkpoints: 160..=199

    /// dih -> tc. Phase one of the GCI switch: stop taking commit decisions.
    #[derive(Debug, PartialEq)]
    160 GcpPrepare: Dih -> Tc, node {
        /// The GCI that commits will get after the switch.
        new_gci: Gci,
    }

    /// tc -> dih. No commit decision will be taken until GCP_COMMIT.
    #[derive(Debug, PartialEq)]
    161 GcpPrepareConf: Tc -> Dih, node {
        /// Echoed.
        new_gci: Gci,
    }

    /// dih -> tc. Phase two: commits from now on get `gci`; release held commits.
    #[derive(Debug, PartialEq)]
    162 GcpCommit: Dih -> Tc, node {
        /// The new current GCI.
        gci: Gci,
    }

    /// tc -> dih. Switched.
    #[derive(Debug, PartialEq)]
    163 GcpCommitConf: Tc -> Dih, node {
        /// Echoed.
        gci: Gci,
    }

    /// master dih -> the other dihs. Every tc has switched to `gci`.
    #[derive(Debug, PartialEq)]
    164 GcpCompleteRep: Dih -> Dih, node {
        /// The GCI now current on every tc.
        gci: Gci,
    }

    /// master dih -> every tc of every node. Answer with [`GcpFlushConf`] once
    /// every transaction this tc committed with a GCI up to `gci` has finished
    /// its commit phase (COMMITTED on every replica, so each replica's ldm has
    /// logged it). Sent after every tc has switched past `gci`.
    #[derive(Debug, PartialEq)]
    165 GcpFlushReq: Dih -> Tc, node {
        /// The last GCI of the global checkpoint being made durable.
        gci: Gci,
    }

    /// tc -> master dih. Every commit with a GCI up to `gci` is logged.
    #[derive(Debug, PartialEq)]
    166 GcpFlushConf: Tc -> Dih, node {
        /// Echoed.
        gci: Gci,
    }

    /// master dih -> every ldm of every node. Append the "`gci` complete"
    /// marker to every redo part, write and fsync them; then answer
    /// [`GcpSaveConf`]. An fsync failure stops the node (docs/design/durability.md §6).
    #[derive(Debug, PartialEq)]
    167 GcpSaveReq: Dih -> Ldm, node {
        /// The GCI made complete.
        gci: Gci,
    }

    /// ldm -> master dih. Every redo part of this ldm holds the marker, durably.
    #[derive(Debug, PartialEq)]
    168 GcpSaveConf: Ldm -> Dih, node {
        /// Echoed.
        gci: Gci,
    }

    /// master dih -> every dih (itself included). Record `complete_gci` as
    /// complete in this node's system file (both copies, fsynced), then answer
    /// [`CopyGciConf`].
    #[derive(Debug, PartialEq)]
    169 CopyGciReq: Dih -> Dih, node {
        /// The latest complete GCI.
        complete_gci: Gci,
        /// The master's current GCI: recorded as the highest started, so that
        /// after a restart new GCIs start above every GCI ever handed out.
        started_gci: Gci,
    }

    /// dih -> master dih. The system file records the GCI.
    #[derive(Debug, PartialEq)]
    170 CopyGciConf: Dih -> Dih, node {
        /// Echoed.
        complete_gci: Gci,
    }

    /// master dih -> every tc of every node. `gci` is complete: answer the
    /// GCI waits up to it.
    #[derive(Debug, PartialEq)]
    171 GcpDurableRep: Dih -> Tc, node {
        /// The latest complete GCI.
        gci: Gci,
    }

    /// new master dih -> every live tc and every live dih, once every
    /// survivor handled the failure of the old master (master take-over,
    /// docs/design/failures.md §8): where does the GCI switch stand here?
    /// A tc answers MASTER_GCP_TC_CONF and forgets a flush the old master
    /// asked for; a dih answers MASTER_GCP_DIH_CONF.
    #[derive(Debug, PartialEq)]
    172 MasterGcpReq: Dih -> Tc | Dih, node {
        /// The membership the take-over runs for (echoed).
        membership_id: u32,
    }

    /// tc -> the new master dih.
    #[derive(Debug, PartialEq)]
    173 MasterGcpTcConf: Tc -> Dih, node {
        /// Echoed.
        membership_id: u32,
        /// The GCI this tc's commits get (the last GCP_COMMIT it had).
        current_gci: Gci,
        /// It holds commit decisions (a GCP_PREPARE had no GCP_COMMIT).
        prepared: bool,
    }

    /// dih -> the new master dih.
    #[derive(Debug, PartialEq)]
    174 MasterGcpDihConf: Dih -> Dih, node {
        /// Echoed.
        membership_id: u32,
        /// The latest GCI the old master reported every tc switched to.
        latest: Gci,
        /// The latest GCI this dih recorded complete.
        complete: Gci,
        /// The highest GCI this dih recorded as started.
        started: Gci,
    }

    // ---- Schema between blocks and nodes: 200..=239 (room for index create and drop)

    /// dict -> dih. Work out the distribution of a new table.
    #[derive(Debug)]
    200 DiAddTabReq: Dict -> Dih, local {
        /// The table (partitions already decided).
        table: Arc<TableDef>,
    }

    /// dih -> dict. The table's distribution.
    #[derive(Debug)]
    201 DiAddTabConf: Dih -> Dict, local {
        /// The map.
        map: Arc<PartitionMap>,
    }

    /// dict -> tc. A table now exists; route its operations with `map`.
    #[derive(Debug)]
    202 TcAddTabReq: Dict -> Tc, node
        checked_by checks::tc_add_tab_req
    {
        /// Definition.
        table: Arc<TableDef>,
        /// Distribution.
        map: Arc<PartitionMap>,
    }

    /// dict -> ldm. Create the partitions of a table this ldm owns.
    #[derive(Debug)]
    203 LqhAddTabReq: Dict -> Ldm, node
        checked_by checks::lqh_add_tab_req
    {
        /// Definition.
        table: Arc<TableDef>,
        /// Distribution (the ldm creates the partitions whose placement names
        /// its own node and instance).
        map: Arc<PartitionMap>,
    }

    /// tc or ldm -> dict. The table is added.
    #[derive(Debug, PartialEq)]
    204 AddTabConf: Tc | Ldm | Dict -> Dict, node {
        /// Table.
        table_id: u32,
    }

    /// master dict -> tc, ldm or another dict. Forget a table (tc: refuse new
    /// operations; ldm: free its partitions once no operation uses them;
    /// dict: stop handing it out). A block that does not hold the table
    /// answers at once (a take-over drops a table wherever it may be).
    #[derive(Debug, PartialEq)]
    205 DropTabOrd: Dict -> Tc | Ldm | Dict, node {
        /// Table.
        table_id: u32,
    }

    /// tc, ldm or dict -> the master dict. Answer to [`DropTabOrd`].
    #[derive(Debug, PartialEq)]
    206 DropTabRep: Tc | Ldm | Dict -> Dict, node {
        /// Table.
        table_id: u32,
        /// True when operations still use the table: dict retries later.
        busy: bool,
    }

    /// master dict -> the other dicts. A table exists on every tc and ldm; keep
    /// its definition to answer GET_TABINFO. Answered with ADD_TAB_CONF.
    #[derive(Debug)]
    207 DictAddTabReq: Dict -> Dict, node
        checked_by checks::dict_add_tab_req
    {
        /// Schema version after the create.
        schema_version: u32,
        /// Definition.
        table: Arc<TableDef>,
        /// Distribution.
        map: Arc<PartitionMap>,
    }

    /// master dict -> every other dict, system restart (start phase
    /// RESTORE_SCHEMA; NDB's SCHEMA_INFO): one chunk of the master's schema,
    /// the bytes of its schema file (docs/schema-file-format.md). The master's
    /// schema wins: the other dict replaces its own with it (rewriting its
    /// schema file when they differ) before it gives its tcs and ldms the
    /// tables. Chunks go in order, one at a time, each answered with
    /// [`SchemaSyncConf`].
    #[derive(Debug, PartialEq)]
    208 SchemaSyncReq: Dict -> Dict, node
        checked_by checks::schema_sync_req
    {
        /// Bytes of the whole schema; 0: the master has no schema (no schema
        /// file, or diskless), sent as one empty chunk.
        total_bytes: u32,
        /// Where `data` starts within them.
        offset: u32,
        /// The chunk: at most `section::MAX_SECTION_BYTES`, ending within
        /// `total_bytes`, empty only when `total_bytes` is 0.
        data: Section,
    }

    /// dict -> master dict. Answer to [`SchemaSyncReq`]: `received` bytes of
    /// the schema have arrived. Below the total: send the chunk from there.
    /// Equal to the total (the answer to the last chunk): this dict has taken
    /// the master's schema, its schema file holds it and its tcs and ldms have
    /// every table of it.
    #[derive(Debug, PartialEq)]
    209 SchemaSyncConf: Dict -> Dict, node {
        /// Bytes of the schema received so far.
        received: u32,
    }

    /// new master dict -> every live tc, ldm and other dict, after the
    /// master dict failed and every survivor installed that failure (NDB's
    /// DICT_TAKEOVER_REQ; docs/design/0016-schema-takeover.md): which
    /// tables (id, version) do you hold? `tables` lists the new master's
    /// own; a dict sends the master a [`DictAddTabReq`] of each table it
    /// holds that the master lacks before it answers, so the master can
    /// roll the table forward. Answered with [`DictTakeoverConf`].
    #[derive(Debug, PartialEq)]
    210 DictTakeoverReq: Dict -> Tc | Ldm | Dict, node
        checked_by checks::dict_takeover_req
    {
        /// The membership whose failure of the master this take-over
        /// handles, echoed.
        membership_id: u32,
        /// The new master's tables: see `codec::encode_table_versions`.
        tables: Section,
    }

    /// tc, ldm or dict -> the new master dict. Answer to
    /// [`DictTakeoverReq`]: the tables this block holds.
    #[derive(Debug, PartialEq)]
    211 DictTakeoverConf: Tc | Ldm | Dict -> Dict, node
        checked_by checks::dict_takeover_conf
    {
        /// Echoed.
        membership_id: u32,
        /// A dict's schema version (0 from a tc or ldm).
        schema_version: u32,
        /// (table id, table version) of every table held: see
        /// `codec::encode_table_versions`.
        tables: Section,
    }

    /// new master dict -> every other live dict: the take-over is done;
    /// take this schema version (above any a dict had) and write it into
    /// the schema file. No answer: a dict that misses it (its node fails)
    /// is out of the cluster.
    #[derive(Debug, PartialEq)]
    212 DictTakeoverDoneOrd: Dict -> Dict, node {
        /// The schema version every dict has from now on.
        schema_version: u32,
    }

    /// master dict -> ldm. The table's indexes are now `table`'s (a
    /// higher or, rolling a change back, lower revision): build each new
    /// one over the rows of this ldm's partitions while writes go on, drop
    /// each one no longer named. Answered with [`AlterTabRep`] once every
    /// new index holds every row, or [`AlterTabRef`]; a repeat of the
    /// revision under way is answered once.
    #[derive(Debug)]
    213 LqhAlterTabReq: Dict -> Ldm, node {
        /// The definition with its new index list and revision.
        table: Arc<TableDef>,
    }

    /// ldm, tc or dict -> the master dict. The table's indexes are those
    /// of revision `revision` here.
    #[derive(Debug, PartialEq)]
    214 AlterTabRep: Ldm | Tc | Dict -> Dict, node {
        /// Table.
        table_id: u32,
        /// Echoed.
        revision: u32,
    }

    /// ldm -> the master dict. An index of revision `revision` could not
    /// be built (TableFull: DataMemory has no room for its entries); the
    /// ldm dropped it again.
    #[derive(Debug, PartialEq)]
    215 AlterTabRef: Ldm -> Dict, node {
        /// Table.
        table_id: u32,
        /// Echoed.
        revision: u32,
        /// Why.
        error: ErrorCode,
    }

    /// master dict -> the other dicts. Hand out `table` from now on (its
    /// indexes changed) and write it to the schema file; answered with
    /// [`AlterTabRep`]. At a master taking over, from another dict: a
    /// revision of a table higher than the master's.
    #[derive(Debug)]
    216 DictAlterTabReq: Dict -> Dict, node {
        /// Schema version after the change.
        schema_version: u32,
        /// The definition.
        table: Arc<TableDef>,
    }

    /// master dict -> tc. The table's indexes are now `table`'s (a higher
    /// or, rolling a change back, lower revision): keep the hidden tables
    /// of the unique indexes it names, and no others, from now on
    /// (docs/design/0026-unique-indexes.md). Answered with
    /// [`AlterTabRep`], once every transaction that wrote before it has
    /// ended when it starts the building of a unique index. A tc that
    /// does not hold the table answers too.
    #[derive(Debug)]
    217 TcAlterTabReq: Dict -> Tc, node {
        /// A unique index of `table` whose hidden rows are being built (0:
        /// none): its hidden rows are kept tolerantly, a delete removing
        /// only a hidden row that names its row.
        building: u32,
        /// The definition with its new index list and revision.
        table: Arc<TableDef>,
    }

    /// master dict -> a tc of its node. Insert the hidden row of every row
    /// of the table for unique index `index_id` (its tcs keep it, building,
    /// from every write since): in transactions of the tc's own, each row
    /// read with a shared lock. Answered with [`BuildUniqueConf`] once
    /// every row has its hidden row, or [`BuildUniqueRef`]: DuplicateKey
    /// when two rows hold one value, or the error that stopped it.
    #[derive(Debug, PartialEq)]
    218 BuildUniqueReq: Dict -> Tc, local {
        /// Table.
        table_id: u32,
        /// Its version.
        table_version: u32,
        /// The unique index.
        index_id: u32,
    }

    /// tc -> dict. Every row has its hidden row.
    #[derive(Debug, PartialEq)]
    219 BuildUniqueConf: Tc -> Dict, local {
        /// Echoed.
        table_id: u32,
        /// Echoed.
        index_id: u32,
        /// Rows the build inserted a hidden row for.
        rows: u64,
    }

    /// tc -> dict. The build stopped; the hidden rows it inserted stay
    /// (the dict drops the hidden table with the index).
    #[derive(Debug, PartialEq)]
    220 BuildUniqueRef: Tc -> Dict, local {
        /// Echoed.
        table_id: u32,
        /// Echoed.
        index_id: u32,
        /// Why: DuplicateKey when two rows hold one value.
        error: ErrorCode,
    }

    // ---- Membership and start phases: 240..=279 (room for heartbeats, node failure and arbitration)

    /// membership -> the membership of the lowest configured data node,
    /// which forms the cluster. This node is connected to every data node
    /// and asks to join; it says what its system file records, so that
    /// the start leaves out the nodes whose data is stale. A node
    /// restarting while the cluster runs sends it to every member it is
    /// connected to; the president admits it (design 0018).
    #[derive(Debug, PartialEq)]
    240 CmRegReq: Membership -> Membership, node {
        /// The joining node.
        node: NodeId,
        /// The latest GCI its system file records complete (0: none).
        complete_gci: Gci,
        /// The data nodes the file records alive at that GCI (empty: not
        /// recorded).
        members: NodeSet,
        /// The data nodes the sender is connected to (itself included):
        /// a node restart is admitted only when connected to every member.
        connected: NodeSet,
    }

    /// forming membership -> every membership. Every configured data node
    /// has registered: the cluster is formed without the stale nodes, and
    /// start phases may go on.
    #[derive(Debug, PartialEq)]
    241 CmRegConf: Membership -> Membership, node {
        /// The president (master of dih and dict): the lowest id that is
        /// not stale.
        president: NodeId,
        /// Nodes whose data ends before `restored_gci` (they failed before
        /// it was made durable): they take no part and shut down.
        stale: NodeSet,
        /// The highest GCI any node's system file records complete.
        restored_gci: Gci,
    }

    /// membership -> a block. Run start phase `phase`; answer with [`StartPhaseConf`].
    #[derive(Debug, PartialEq)]
    242 StartPhaseReq: Membership -> Any, local {
        /// Phase number (see membership's start module).
        phase: u8,
    }

    /// a block -> membership. Phase done on this block.
    #[derive(Debug, PartialEq)]
    243 StartPhaseConf: Any -> Membership, local {
        /// Echoed.
        phase: u8,
    }

    /// transport -> membership (local). A data node connected, with the
    /// incarnation its frames carry.
    #[derive(Debug, PartialEq)]
    244 NodeConnectedRep: Transport -> Membership, local {
        /// The peer.
        node: NodeId,
        /// Its incarnation.
        incarnation: u32,
    }

    /// transport -> tc, dict and membership. An API node disconnected:
    /// abort its transactions and forget its requests (membership stops
    /// telling it of node failures).
    #[derive(Debug, PartialEq)]
    245 ApiFailRep: Transport -> Tc | Dict | Membership, local {
        /// The API node.
        node: NodeId,
    }

    /// membership -> the blocks of its node that have a master (dih and
    /// dict). `president` is the president: the data node whose dih and
    /// dict are the masters. Membership is the one source of this fact:
    /// sent before phase INITIALISE, on the same link as the phase (so the
    /// block knows it before the node joins the cluster and hears from
    /// other nodes), and again whenever the president changes (master
    /// take-over, docs/design/failures.md).
    #[derive(Debug, PartialEq)]
    246 PresidentRep: Membership -> Dih | Dict, local {
        /// The president's node id.
        president: NodeId,
    }

    /// membership -> every other member's membership, every
    /// `heartbeat_interval_ms` once the cluster is formed (design 0020):
    /// a sign of life the receiver counts
    /// (docs/design/failures.md §2). A late, repeated or unexpected one
    /// changes nothing but the count. The receiver answers each with
    /// CM_HEARTBEAT_ACK (the sender's read lease, docs/design/failures.md
    /// §5).
    #[derive(Debug, PartialEq)]
    247 CmHeartbeat: Membership -> Membership, node {
        /// The sender's count of heartbeats sent (for logs).
        sequence: u32,
        /// When it was sent, by the sender's clock (echoed in the ack).
        sent_at_ms: u64,
    }

    /// transport -> membership. The established link to data node `node`
    /// (its incarnation `incarnation`) closed or broke. It is never
    /// reconnected in that incarnation: membership treats the node as
    /// failed (docs/design/failures.md §2).
    #[derive(Debug, PartialEq)]
    248 NodeLinkFailedRep: Transport -> Membership, local {
        /// The peer.
        node: NodeId,
        /// Its incarnation on the link that broke.
        incarnation: u32,
    }

    /// membership -> the president's membership. The sender takes `failed`
    /// for failed (each missed its heartbeats or lost its link to the
    /// sender) and asks the president to agree (docs/design/failures.md §3).
    /// `membership_id` is the sender's agreed membership. Repeated while
    /// the nodes are not agreed failed, to each new president.
    #[derive(Debug, PartialEq)]
    249 CmFailRep: Membership -> Membership, node {
        /// The sender's agreed membership id.
        membership_id: u32,
        /// The nodes the sender takes for failed.
        failed: NodeSet,
    }

    /// president's membership -> the membership of every node it proposes
    /// to keep. Step one of the failure protocol: the membership `live`
    /// under id `membership_id`. The receiver cuts its links to the nodes
    /// it leaves out, and answers CM_FAIL_PREPARE_CONF, or
    /// CM_FAIL_PREPARE_REF when it already prepared a higher id.
    #[derive(Debug, PartialEq)]
    250 CmFailPrepareReq: Membership -> Membership, node {
        /// The proposed membership's id.
        membership_id: u32,
        /// The proposed members.
        live: NodeSet,
        /// Those of `live` still in their node restart: they hold no
        /// data that counts (docs/design/0018-node-restart.md). A
        /// proposal that admits a restarting node adds it to both.
        starting: NodeSet,
        /// Those of `live` that came back by a node restart: they go last
        /// in every replica chain, after the nodes that did not.
        returned: NodeSet,
    }

    /// membership -> the president's membership. Prepared `membership_id`;
    /// `failed` is every node the sender takes for failed, so that the
    /// president can widen its proposal.
    #[derive(Debug, PartialEq)]
    251 CmFailPrepareConf: Membership -> Membership, node {
        /// The prepared membership's id.
        membership_id: u32,
        /// The nodes the sender takes for failed.
        failed: NodeSet,
    }

    /// membership -> the president's membership. A proposal with an id no
    /// higher than one the sender already prepared or installed: the
    /// president proposes again above `highest`.
    #[derive(Debug, PartialEq)]
    252 CmFailPrepareRef: Membership -> Membership, node {
        /// The refused proposal's id.
        membership_id: u32,
        /// The highest membership id the sender prepared or installed.
        highest: u32,
    }

    /// president's membership -> every member of `live`. Step two: every
    /// member prepared it and the survival rule let this side continue;
    /// install membership `membership_id`. The sender is its president.
    /// A node being admitted by a node restart gets it too: it is the
    /// answer to its CM_REGREQ.
    #[derive(Debug, PartialEq)]
    253 CmFailCommitOrd: Membership -> Membership, node {
        /// The new membership's id.
        membership_id: u32,
        /// Its members.
        live: NodeSet,
        /// Those of `live` still in their node restart.
        starting: NodeSet,
        /// Those of `live` that came back by a node restart.
        returned: NodeSet,
    }

    /// president's membership -> every member of `live`. Every member
    /// prepared it, but the survival rule (docs/design/failures.md §4)
    /// says this side must not continue: shut down. Each receiver works
    /// out why from the same rule, to say so.
    #[derive(Debug, PartialEq)]
    254 CmShutdownOrd: Membership -> Membership, node {
        /// The refused membership's id.
        membership_id: u32,
        /// The nodes on this side.
        live: NodeSet,
    }

    /// membership -> every block of its node (dict, dih, each tc, each ldm),
    /// in the order memberships are installed. The cluster agreed
    /// membership `membership_id` = `live`; the nodes of `failed` left it
    /// with this change. From now on the block handles nothing from them
    /// (what they sent before and is still queued is dropped), stops
    /// waiting for them, and answers NODE_FAIL_CONF. Work that needs the
    /// other survivors waits for NODE_FAIL_COMPLETE_REP
    /// (docs/design/failures.md §3).
    #[derive(Debug, PartialEq)]
    255 NodeFailRep: Membership -> Dih | Dict | Tc | Ldm, local {
        /// The new membership's id.
        membership_id: u32,
        /// Its members.
        live: NodeSet,
        /// The members of the previous membership left out of this one.
        failed: NodeSet,
        /// Its president: the node whose dih and dict are the masters.
        president: NodeId,
        /// Members still in their node restart (not readable, not yet
        /// restorable from their own files).
        starting: NodeSet,
        /// Members that came back by a node restart: last in every
        /// replica chain ([`PartitionMap::routed`]).
        returned: NodeSet,
    }

    /// block -> its node's membership. The block handled NODE_FAILREP
    /// `membership_id`: nothing from the failed nodes reaches it any more.
    #[derive(Debug, PartialEq)]
    256 NodeFailConf: Dih | Dict | Tc | Ldm -> Membership, local {
        /// Echoed.
        membership_id: u32,
    }

    /// membership -> the membership of every member of membership
    /// `membership_id`: every block of the sender handled the change.
    #[derive(Debug, PartialEq)]
    257 CmNodeFailHandledRep: Membership -> Membership, node {
        /// The membership the sender's blocks installed.
        membership_id: u32,
    }

    /// membership -> every block of its node. Every block of every member
    /// of membership `membership_id` handled it (and every earlier one):
    /// no survivor handles a signal of a failed node any more, so the
    /// survivors may finish what the failed nodes left (aborts, commits,
    /// take-overs) without a late signal of theirs crossing the work.
    #[derive(Debug, PartialEq)]
    258 NodeFailCompleteRep: Membership -> Dih | Dict | Tc | Ldm, local {
        /// The membership handled everywhere.
        membership_id: u32,
    }

    /// membership (the president of a side) -> its node's io service
    /// (`BlockKind::Io`: the io thread in production, the simulated
    /// arbitrator in `sim`). A failure or a split left `side` with exactly
    /// half of the nodes of membership `membership_id` (`before`) and no
    /// node group whole: ask the arbitrator (mgmd) whether `side` may
    /// continue (docs/design/failures.md §4). Answered with one
    /// ARBITRATION_CONF. Node-local: never encoded.
    #[derive(Debug, PartialEq)]
    259 ArbitrationReq: Membership -> Io, local {
        /// The agreed membership the side judged itself against.
        membership_id: u32,
        /// Its members.
        before: NodeSet,
        /// The nodes of this side.
        side: NodeSet,
    }

    /// io service -> membership: the arbitrator's answer to
    /// ARBITRATION_REQ (its fields echoed), or that it could not be had
    /// (`answered` false: unreachable, no arbitrator configured, or an
    /// error; the io service logs which). Node-local: never encoded.
    #[derive(Debug, PartialEq)]
    260 ArbitrationConf: Io -> Membership, local {
        /// Echoed.
        membership_id: u32,
        /// Echoed.
        side: NodeSet,
        /// The arbitrator answered.
        answered: bool,
        /// It let this side continue (false when not answered).
        granted: bool,
    }

    /// membership -> the membership that sent a CM_HEARTBEAT: it was
    /// heard. The heartbeat's sender extends its read lease from the time
    /// it sent it, by its own clock, so an ack that waited in a queue (a
    /// pause, a slow link) extends nothing that has run out
    /// (docs/design/failures.md §5).
    #[derive(Debug, PartialEq)]
    261 CmHeartbeatAck: Membership -> Membership, node {
        /// The heartbeat's `sent_at_ms`, echoed.
        sent_at_ms: u64,
    }

    /// membership -> every ldm of its node: reads may be served until
    /// `valid_until_ms` (ctx time, the node's clock), and not after: the
    /// node may have been declared failed and its partitions promoted
    /// elsewhere. 0 revokes the lease (a failure is being agreed);
    /// `u64::MAX` lifts it (no other data node could take over).
    /// Node-local: never encoded.
    #[derive(Debug, PartialEq)]
    262 ReadLeaseRep: Membership -> Ldm, local {
        /// Until when reads may be served.
        valid_until_ms: u64,
    }

    /// dih -> its node's membership, in start phase INITIALISE (before
    /// its conf): what the system file records, which membership carries
    /// to the cluster's formation. Node-local: never encoded.
    #[derive(Debug, PartialEq)]
    263 SystemFileRep: Dih -> Membership, local {
        /// The latest GCI the file records complete (0: none).
        complete_gci: Gci,
        /// The data nodes it records alive at that GCI (empty: not
        /// recorded).
        members: NodeSet,
    }

    /// stale node's membership -> the membership of every node going on,
    /// at a system restart: it heard the formation's verdict (CM_REGCONF
    /// naming it stale) and leaves. The receiver cuts its link, which
    /// tells the stale node everyone has let it go, and it shuts down.
    #[derive(Debug, PartialEq)]
    264 CmStaleRep: Membership -> Membership, node {
        /// The restored GCI its data ends before, echoed.
        restored_gci: Gci,
    }

    /// president's membership -> a node asking to join the running
    /// cluster (node restart, CM_REGREQ): not now. The node asks again a
    /// moment later (docs/design/0018-node-restart.md).
    #[derive(Debug, PartialEq)]
    265 CmRegRef: Membership -> Membership, node {
        /// Why (`signal::signals::join_refusal`).
        reason: u8,
    }

    /// restarting node's membership -> the president's membership: every
    /// phase of its node restart ran (it copied, checkpointed, and its
    /// system file records complete GCIs): end its start, a membership
    /// round without it among the starting members. Sent again every
    /// second, and to each new president, until a commit says so.
    #[derive(Debug, PartialEq)]
    266 CmNodeStartedReq: Membership -> Membership, node {
        /// The restarting node.
        node: NodeId,
    }

    /// io service -> membership, graceful stop
    /// (docs/design/0018-node-restart.md, "Graceful stop"): the node was
    /// asked to stop (SIGTERM, or mgmd's stop or restart): let the
    /// transactions its tcs coordinate finish first. Node-local: never
    /// encoded.
    #[derive(Debug, PartialEq)]
    267 NodeStopReq: Io -> Membership, local {
        /// How long the stop may wait for transactions, in ms.
        limit_ms: u64,
    }

    /// membership -> every tc of the node, graceful stop: begin no new
    /// transaction (a START is refused with NodeShuttingDown, which the
    /// client retries on another node), finish those begun, and answer
    /// with [`TcDrainConf`] once none is left. Node-local: never encoded.
    #[derive(Debug, PartialEq)]
    268 TcDrainReq: Membership -> Tc, local {}

    /// tc -> membership: no transaction left on this tc. Node-local:
    /// never encoded.
    #[derive(Debug, PartialEq)]
    269 TcDrainConf: Tc -> Membership, local {}

    /// membership -> every other member's membership: the sender stopped
    /// hearing `suspect` (it missed its heartbeats) and asks, before it
    /// takes it for failed, whether the receiver still hears it
    /// (docs/design/0020-connectivity-check.md). Answered with
    /// [`CmPingConf`]; `suspect` itself answers too, which clears the
    /// suspicion.
    #[derive(Debug, PartialEq)]
    270 CmPingReq: Membership -> Membership, node {
        /// The sender's check (echoed).
        check: u32,
        /// The member the sender no longer hears.
        suspect: NodeId,
    }

    /// membership -> the membership that sent a [`CmPingReq`]: whether
    /// this node heard from `suspect` within the last two heartbeat
    /// intervals (always true when this node is `suspect`).
    #[derive(Debug, PartialEq)]
    271 CmPingConf: Membership -> Membership, node {
        /// Echoed.
        check: u32,
        /// Echoed.
        suspect: NodeId,
        /// The answer.
        hears: bool,
    }

    /// membership -> the president's membership: the sender does not
    /// hear `suspect`, which other members still hear: the
    /// link between the two is bad, and one of them must leave. The
    /// president gathers such reports for a moment and chooses who
    /// (docs/design/0020-connectivity-check.md).
    #[derive(Debug, PartialEq)]
    272 CmLinkCutRep: Membership -> Membership, node {
        /// The sender's agreed membership id.
        membership_id: u32,
        /// The member the sender no longer hears.
        suspect: NodeId,
        /// The sender hears `suspect` again: drop the report (answered
        /// with [`CmLinkCutConf`]).
        withdraw: bool,
    }

    /// president's membership -> a member that withdrew its cut report of
    /// `suspect`: the report is dropped (or was not pending); the member
    /// may ack `suspect`'s heartbeats and serve reads again
    /// (docs/design/0020-connectivity-check.md).
    #[derive(Debug, PartialEq)]
    273 CmLinkCutConf: Membership -> Membership, node {
        /// Echoed.
        suspect: NodeId,
    }

    // ---- System restart: 280..=299 (room for node restart and copy of partitions)

    /// dih -> master dih, system restart (start phase RESTART_GCI): what this
    /// node's system file says.
    #[derive(Debug, PartialEq)]
    280 RestartGciRep: Dih -> Dih, node {
        /// The latest GCI the system file records complete (0: no system file,
        /// the node has never made a GCI durable).
        complete_gci: Gci,
        /// The data nodes the file records alive at that GCI (empty: not
        /// recorded).
        members: NodeSet,
    }

    /// master dih -> every dih, system restart: the GCI the cluster restores.
    #[derive(Debug, PartialEq)]
    281 RestartGciOrd: Dih -> Dih, node {
        /// The restored GCI (0: initial start, nothing to restore).
        restored_gci: Gci,
        /// Nodes whose data is older than the restored GCI (they failed
        /// before it was made durable): they take no part, and wait for a
        /// node restart (docs/design/failures.md §9).
        stale: NodeSet,
    }

    /// dih -> master dih, system restart (start phase RESTORE_DATA): this node
    /// restored its data; new GCIs must start above `highest_gci`.
    #[derive(Debug, PartialEq)]
    282 RestoredRep: Dih -> Dih, node {
        /// The highest GCI found anywhere on this node's disk.
        highest_gci: Gci,
    }

    /// dih -> each ldm of its node. Restore from disk up to `restored_gci`
    /// (newest usable local checkpoint, then redo), rebuild the indexes,
    /// invalidate redo beyond it durably, then answer [`RestoreConf`].
    /// Node-local.
    #[derive(Debug, PartialEq)]
    283 RestoreReq: Dih -> Ldm, local {
        /// The GCI the cluster restores (0: initial start, format the redo log).
        restored_gci: Gci,
    }

    /// ldm -> dih. Restored and ready to log. Node-local.
    #[derive(Debug, PartialEq)]
    284 RestoreConf: Ldm -> Dih, local {
        /// The highest GCI found in this ldm's redo parts.
        highest_gci: Gci,
        /// Row changes replayed.
        replayed: u64,
    }

    /// restarting node's dih -> master dih, node restart (start phase
    /// GLOBAL_CHECKPOINT): take this node's tcs into the GCI switch and
    /// its ldms into the rounds that make GCIs durable
    /// (docs/design/0018-node-restart.md). Sent again to a new master.
    /// Answered with [`IncludeNodeConf`] once its tcs hold a GCI.
    #[derive(Debug, PartialEq)]
    285 IncludeNodeReq: Dih -> Dih, node {
        /// The restarting node.
        node: NodeId,
        /// 0 until its local checkpoints are written; then the first GCI
        /// its system file may record complete (phase RECORD_GCI): its
        /// dih takes part in the rounds' COPY_GCI from the first round of
        /// a GCI at least this one.
        system_file_from: Gci,
    }

    /// master dih -> the restarting node's dih: its tcs took part in the
    /// switch to `gci` and hold it; its ldms take part in the durability
    /// rounds from the next one on.
    #[derive(Debug, PartialEq)]
    286 IncludeNodeConf: Dih -> Dih, node {
        /// The GCI every tc holds now.
        gci: Gci,
    }

    /// restarting node's ldm -> the ldm of the partition's primary, node
    /// restart (phase COPY_DATA; docs/design/0018-node-restart.md): attach
    /// the sender's node to the partition (every write the primary
    /// prepares from now on runs on to it, last in its chain), then send
    /// it every row whose GCI is above `since_gci` and every slot freed
    /// above it, in row-id order ([`CopyRowsReq`]).
    #[derive(Debug, PartialEq)]
    287 CopyFragReq: Ldm -> Ldm, node {
        /// Table.
        table_id: u32,
        /// Partition.
        partition: u32,
        /// What the restarting node restored (0: nothing).
        since_gci: Gci,
    }

    /// primary's ldm -> restarting ldm: the copy is refused (no such
    /// partition here, or another copy of it runs); the restarting ldm
    /// asks the partition's primary again a moment later.
    #[derive(Debug, PartialEq)]
    288 CopyFragRef: Ldm -> Ldm, node {
        /// Echoed.
        table_id: u32,
        /// Echoed.
        partition: u32,
        /// Why.
        error: ErrorCode,
    }

    /// primary's ldm -> restarting ldm: a batch of the copy, in row-id
    /// order (`ldm::copy` documents the entries); `done` on the last.
    /// Answered with [`CopyRowsConf`] before the next batch is sent.
    #[derive(Debug, PartialEq)]
    289 CopyRowsReq: Ldm -> Ldm, node {
        /// Table.
        table_id: u32,
        /// Partition.
        partition: u32,
        /// Nothing follows this batch.
        done: bool,
        /// The entries.
        rows: Section,
    }

    /// restarting ldm -> primary's ldm: the batch is applied; send the
    /// next.
    #[derive(Debug, PartialEq)]
    290 CopyRowsConf: Ldm -> Ldm, node {
        /// Echoed.
        table_id: u32,
        /// Echoed.
        partition: u32,
    }

    // ---- Node-local services: 300..=319

    /// A block to itself, delayed: periodic work (NDB's CONTINUEB).
    #[derive(Debug, PartialEq)]
    300 ContinueB: Any -> Any, local {
        /// Which periodic job (block-specific).
        job: u32,
    }

    /// a block -> the node's io service (`BlockKind::Io`: the io thread in
    /// production, the disk model in `sim`), sent by `Context::fs_request`,
    /// never by `send`. Perform one file operation in the node's data
    /// directory; answered with one [`FsConf`] carrying `token`. Requests run
    /// in the order they arrive. Node-local: never encoded.
    #[derive(Debug)]
    301 FsReq: Any -> Io, local {
        /// The requester's number for the request, echoed.
        token: u64,
        /// What to do.
        operation: FsOperation,
    }

    /// io service -> the block that sent [`FsReq`]. The operation is done, or
    /// failed with the file, offset and OS error text. The service never
    /// panics on an OS error; the block decides (an fsync error or a bad
    /// checksum stops the node, docs/design/durability.md §6). Node-local: never encoded.
    #[derive(Debug)]
    302 FsConf: Io -> Any, local {
        /// Echoed.
        token: u64,
        /// The outcome.
        result: Result<FsDone, FsError>,
    }
}

// Signals move through job queues by value; keep them small.
const _: () = assert!(
    std::mem::size_of::<Signal>() <= 128,
    "Signal grew too large for job queues"
);
