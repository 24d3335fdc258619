//! Every signal blocks exchange, one struct each, named in NDB's vocabulary
//! (REQ asks, CONF answers yes, REF answers no, ORD orders without answer,
//! REP reports). Each documents its sender, its receiver and its meaning.
//!
//! Signals between blocks of one node move as Rust values through the job
//! queues; signals to another node or an API node are encoded by `codec`.
//! Signals holding an `Arc` are node-internal and never encoded.

use crate::attr::KeyHash;
use crate::error::ErrorCode;
use crate::fs::{FsDone, FsError, FsOperation};
use crate::ids::{BlockRef, Gci, NodeId, TransactionId};
use crate::schema::TableDef;
use crate::section::Section;
use std::sync::Arc;

/// A signal with its addresses: the unit of work of a block thread.
#[derive(Debug)]
pub struct Envelope {
    /// Sending block.
    pub from: BlockRef,
    /// Receiving block.
    pub to: BlockRef,
    /// The signal.
    pub signal: Signal,
}

/// What an operation does to its row.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum OperationKind {
    /// Read the row (lock per [`LockMode`]).
    Read = 1,
    /// Insert a new row; fails with DuplicateKey if the key exists.
    Insert = 2,
    /// Change columns of an existing row; fails with NoSuchRow.
    Update = 3,
    /// Insert or overwrite (upsert).
    Write = 4,
    /// Delete an existing row; fails with NoSuchRow.
    Delete = 5,
}

impl OperationKind {
    /// Decodes a wire byte.
    pub fn from_u8(value: u8) -> Option<OperationKind> {
        Some(match value {
            1 => OperationKind::Read,
            2 => OperationKind::Insert,
            3 => OperationKind::Update,
            4 => OperationKind::Write,
            5 => OperationKind::Delete,
            _ => return None,
        })
    }
}

/// How a read locks. Writes always take an exclusive lock.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum LockMode {
    /// Read the last committed image without a lock (read committed).
    CommittedRead = 0,
    /// Shared lock held until commit or abort.
    Shared = 1,
    /// Exclusive lock held until commit or abort.
    Exclusive = 2,
}

impl LockMode {
    /// Decodes a wire byte.
    pub fn from_u8(value: u8) -> Option<LockMode> {
        Some(match value {
            0 => LockMode::CommittedRead,
            1 => LockMode::Shared,
            2 => LockMode::Exclusive,
            _ => return None,
        })
    }
}

/// Flags of [`TcKeyReq`].
pub mod tc_key_flags {
    /// First operation of a new transaction.
    pub const START: u8 = 1;
    /// Last operation of a batch: execute the batch and answer.
    pub const EXECUTE: u8 = 2;
    /// Commit once the batch has executed (implies EXECUTE).
    pub const COMMIT: u8 = 4;
    /// Every flag a client may set.
    pub const ALL: u8 = START | EXECUTE | COMMIT;
}

/// API -> membership. An API node announces itself on a new connection.
#[derive(Debug, PartialEq)]
pub struct ApiRegReq {
    /// Protocol version the client speaks.
    pub protocol_version: u16,
}

/// membership -> API. Registration accepted; the node's shape for routing.
#[derive(Debug, PartialEq)]
pub struct ApiRegConf {
    /// Whether the node has finished its start phases.
    pub started: bool,
    /// tc instances on the node (the client spreads transactions over them).
    pub tc_instances: u16,
}

/// API -> tc. One operation of a transaction; a batch is a run of these
/// ending with one flagged EXECUTE (or COMMIT).
#[derive(Debug, PartialEq)]
pub struct TcKeyReq {
    /// Transaction the operation belongs to.
    pub transaction_id: TransactionId,
    /// Client's number for this operation, echoed in replies.
    pub client_op: u32,
    /// [`tc_key_flags`].
    pub flags: u8,
    /// What to do.
    pub kind: OperationKind,
    /// Lock for reads.
    pub lock: LockMode,
    /// Table id.
    pub table_id: u32,
    /// Table version the client believes current.
    pub table_version: u32,
    /// Key section: the primary-key entries in key order.
    pub key: Section,
    /// Attribute section: values to write, or the columns to read (empty: all).
    pub attr: Option<Section>,
}

/// tc -> API. The batch executed (and committed when asked).
#[derive(Debug, PartialEq)]
pub struct TcKeyConf {
    /// Transaction.
    pub transaction_id: TransactionId,
    /// Operations of the batch confirmed.
    pub operations: u32,
    /// Whether the transaction is now committed (and finished at the tc).
    pub committed: bool,
    /// GCI of the commit (0 when not committed or nothing was written).
    pub gci: Gci,
    /// The cluster's distribution (partition map) version: a client whose
    /// cached maps are older refreshes them.
    pub map_version: u32,
    /// The row of the read that answered last, when the batch commits:
    /// carried here instead of in a [`TransIdAi`] of its own, so a
    /// single-read transaction costs one signal to the client, not two.
    pub row: Option<ReadRow>,
}

/// The row of one read operation, inside a [`TcKeyConf`].
#[derive(Debug, PartialEq)]
pub struct ReadRow {
    /// The read operation.
    pub client_op: u32,
    /// Attribute entries of the row.
    pub data: Section,
}

/// tc -> API. The transaction failed and has been aborted, every lock released.
#[derive(Debug, PartialEq)]
pub struct TcKeyRef {
    /// Transaction.
    pub transaction_id: TransactionId,
    /// The operation that failed (u32::MAX when none in particular).
    pub client_op: u32,
    /// Why.
    pub error: ErrorCode,
}

/// tc -> API. Row data of one read operation; arrives before the batch's
/// [`TcKeyConf`] (which carries the last read's row itself when the batch
/// commits).
#[derive(Debug, PartialEq)]
pub struct TransIdAi {
    /// Transaction.
    pub transaction_id: TransactionId,
    /// The read operation.
    pub client_op: u32,
    /// Attribute entries of the row.
    pub data: Section,
}

/// API -> tc. Commit a transaction whose batches have all executed.
#[derive(Debug, PartialEq)]
pub struct TcCommitReq {
    /// Transaction.
    pub transaction_id: TransactionId,
}

/// API -> tc. Abort a transaction and release its locks.
#[derive(Debug, PartialEq)]
pub struct TcRollbackReq {
    /// Transaction.
    pub transaction_id: TransactionId,
}

/// tc -> API. The transaction is rolled back.
#[derive(Debug, PartialEq)]
pub struct TcRollbackConf {
    /// Transaction.
    pub transaction_id: TransactionId,
}

/// API -> tc. Answer once GCI `gci` is complete (durable: recorded in the
/// system files, DESIGN.md §5). Answered with [`GciWaitConf`], or
/// [`GciWaitRef`] when the tc cannot take one more waiter.
#[derive(Debug, PartialEq)]
pub struct GciWaitReq {
    /// Client's number for the request, echoed.
    pub request_id: u32,
    /// The GCI to wait for (a commit's GCI from its TCKEYCONF).
    pub gci: Gci,
}

/// tc -> API. `complete_gci` (at least the GCI waited for) is complete.
#[derive(Debug, PartialEq)]
pub struct GciWaitConf {
    /// Echoed.
    pub request_id: u32,
    /// The cluster's latest complete GCI.
    pub complete_gci: Gci,
}

/// tc -> API. The wait was not taken.
#[derive(Debug, PartialEq)]
pub struct GciWaitRef {
    /// Echoed.
    pub request_id: u32,
    /// Why.
    pub error: ErrorCode,
}

/// API -> dict. Create a table from an encoded [`TableDef`] (id and version ignored).
#[derive(Debug, PartialEq)]
pub struct CreateTabReq {
    /// Client's number for the request, echoed.
    pub request_id: u32,
    /// Encoded table definition.
    pub definition: Section,
}

/// dict -> API. The table exists on every block.
#[derive(Debug, PartialEq)]
pub struct CreateTabConf {
    /// Echoed.
    pub request_id: u32,
    /// Assigned id.
    pub table_id: u32,
    /// Assigned version.
    pub table_version: u32,
}

/// dict -> API. A schema request failed (create, drop, get or list).
#[derive(Debug, PartialEq)]
pub struct SchemaRef {
    /// Echoed.
    pub request_id: u32,
    /// Why.
    pub error: ErrorCode,
}

/// API -> dict. Drop the table with this name.
#[derive(Debug, PartialEq)]
pub struct DropTabReq {
    /// Client's number for the request, echoed.
    pub request_id: u32,
    /// Table name bytes.
    pub name: Section,
}

/// dict -> API. The table is gone from every block.
#[derive(Debug, PartialEq)]
pub struct DropTabConf {
    /// Echoed.
    pub request_id: u32,
}

/// API -> dict. Fetch a table's definition by name.
#[derive(Debug, PartialEq)]
pub struct GetTabInfoReq {
    /// Client's number for the request, echoed.
    pub request_id: u32,
    /// Table name bytes.
    pub name: Section,
}

/// dict -> API. A table definition.
#[derive(Debug, PartialEq)]
pub struct GetTabInfoConf {
    /// Echoed.
    pub request_id: u32,
    /// Schema version at the time of the answer.
    pub schema_version: u32,
    /// Encoded [`TableDef`] with id, version and partitions.
    pub definition: Section,
    /// The cluster's distribution version when the map was taken.
    pub map_version: u32,
    /// Encoded [`PartitionMap`] of the table (see `codec::encode_partition_map`).
    pub map: Section,
}

/// API -> dict (any data node's). List the online tables: how the replica
/// checker finds every table without knowing their names. Refused with
/// [`SchemaRef`] (NodeNotStarted before the dict's schema phase).
#[derive(Debug, PartialEq)]
pub struct ListTablesReq {
    /// Client's number for the request, echoed.
    pub request_id: u32,
}

/// dict -> API. The names of the online tables (those GET_TABINFO finds;
/// tables being created or dropped are left out), sorted by byte value.
#[derive(Debug, PartialEq)]
pub struct ListTablesConf {
    /// Echoed.
    pub request_id: u32,
    /// Schema version at the time of the answer: the list is that
    /// version's tables.
    pub schema_version: u32,
    /// The names: u16 count, then per name a u16 byte length and that many
    /// bytes of UTF-8 (see `codec::encode_table_names` and
    /// `codec::decode_table_names`).
    pub names: Section,
}

/// Most replicas a partition may have.
pub const MAX_REPLICAS: usize = 4;

/// The replicas of a partition in chain order, primary first (DESIGN.md §4).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ReplicaChain {
    /// Nodes; only the first `length` are meaningful.
    pub nodes: [NodeId; MAX_REPLICAS],
    /// Number of replicas (1..=4).
    pub length: u8,
}

impl ReplicaChain {
    /// A chain of the given nodes (1..=4 of them).
    pub fn new(nodes: &[NodeId]) -> ReplicaChain {
        assert!(
            (1..=MAX_REPLICAS).contains(&nodes.len()),
            "a replica chain has 1 to {MAX_REPLICAS} nodes"
        );
        let mut chain = [NodeId(0); MAX_REPLICAS];
        chain[..nodes.len()].copy_from_slice(nodes);
        ReplicaChain {
            nodes: chain,
            length: nodes.len() as u8,
        }
    }

    /// The primary replica.
    pub fn primary(&self) -> NodeId {
        self.nodes[0]
    }

    /// The replicas in chain order.
    pub fn as_slice(&self) -> &[NodeId] {
        &self.nodes[..self.length as usize]
    }

    /// Only the primary (reads, and writes with one replica).
    pub fn primary_only(&self) -> ReplicaChain {
        ReplicaChain::new(&self.nodes[..1])
    }
}

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
pub struct LqhKeyReq {
    /// The tc coordinating the transaction (answers and aborts go there).
    pub tc: BlockRef,
    /// The tc's operation record, echoed.
    pub tc_op: u32,
    /// The replicas, primary first.
    pub chain: ReplicaChain,
    /// The receiving replica's position in `chain`.
    pub position: u8,
    /// Row id chosen by the primary (NIL from the tc).
    pub row_id: u32,
    /// The previous replica's operation record (NIL at the primary).
    pub previous_op: u32,
    /// Transaction.
    pub transaction_id: TransactionId,
    /// What to do.
    pub kind: OperationKind,
    /// Lock for reads.
    pub lock: LockMode,
    /// Table id.
    pub table_id: u32,
    /// Partition within the table.
    pub partition: u32,
    /// The key's hash (tc computed it to route; ldm reuses it).
    pub hash: KeyHash,
    /// Key section.
    pub key: Section,
    /// Attribute section.
    pub attr: Option<Section>,
}

/// ldm -> tc. The operation is prepared (row locked, after-image kept) or,
/// for a committed read, done.
#[derive(Debug)]
pub struct LqhKeyConf {
    /// Echoed.
    pub tc_op: u32,
    /// The ldm's operation record, for COMMIT, COMPLETE and ABORT.
    pub ldm_op: u32,
    /// Row data of a read.
    pub data: Option<Section>,
    /// True when the ldm kept no operation record (committed read).
    pub released: bool,
}

/// ldm -> tc. The operation failed; the ldm kept nothing of it.
#[derive(Debug)]
pub struct LqhKeyRef {
    /// Echoed.
    pub tc_op: u32,
    /// Why.
    pub error: ErrorCode,
}

/// tc -> ldm. Commit a prepared operation: install its after-image, stamp
/// the row with `gci`, release the lock (primary).
#[derive(Debug)]
pub struct CommitReq {
    /// The ldm's operation record.
    pub ldm_op: u32,
    /// Echoed.
    pub tc_op: u32,
    /// Transaction (checked against the record).
    pub transaction_id: TransactionId,
    /// The transaction's commit GCI.
    pub gci: Gci,
}

/// ldm -> tc. The operation is committed.
#[derive(Debug)]
pub struct CommitConf {
    /// Echoed.
    pub tc_op: u32,
}

/// tc -> ldm. The transaction is acknowledged; release what remains of the
/// operation record (and, on backups, the lock).
#[derive(Debug)]
pub struct CompleteReq {
    /// The ldm's operation record.
    pub ldm_op: u32,
    /// Echoed.
    pub tc_op: u32,
    /// Transaction (checked against the record).
    pub transaction_id: TransactionId,
}

/// ldm -> tc. The operation record is released.
#[derive(Debug)]
pub struct CompleteConf {
    /// Echoed.
    pub tc_op: u32,
}

/// tc -> ldm (the primary), then ldm -> ldm along the chain. Abort the
/// operation `tc_op` of `tc`, prepared or still waiting for a lock; drop its
/// after-image and release its lock. A replica that had forwarded the
/// operation forwards the abort (after the forwarded request on the same
/// link, so it never overtakes it); the last one that holds or held
/// nothing to forward answers the tc with ABORTCONF.
#[derive(Debug)]
pub struct AbortReq {
    /// The coordinating tc.
    pub tc: BlockRef,
    /// The tc's operation record (the ldm finds its own by it).
    pub tc_op: u32,
    /// Transaction (checked).
    pub transaction_id: TransactionId,
}

/// ldm -> tc. Nothing of the operation remains.
#[derive(Debug)]
pub struct AbortConf {
    /// Echoed.
    pub tc_op: u32,
}

/// API -> ldm. Read a batch of rows of one partition replica in row-id
/// order, for the replica checker.
#[derive(Debug, PartialEq)]
pub struct ScanPartitionReq {
    /// Client's number for the request, echoed.
    pub request_id: u32,
    /// Table.
    pub table_id: u32,
    /// Partition.
    pub partition: u32,
    /// First row id to look at.
    pub start_row: u32,
    /// Most rows to return.
    pub max_rows: u32,
}

/// ldm -> API. Rows of a partition scan: each row is row id (u32), GCI
/// (u64), length (u32) and that many bytes of attribute entries of every
/// column.
#[derive(Debug, PartialEq)]
pub struct ScanPartitionConf {
    /// Echoed.
    pub request_id: u32,
    /// The rows.
    pub rows: Section,
    /// Where the next batch starts.
    pub next_row: u32,
    /// True when no rows remain after this batch.
    pub done: bool,
}

/// ldm -> API. The scan failed.
#[derive(Debug, PartialEq)]
pub struct ScanPartitionRef {
    /// Echoed.
    pub request_id: u32,
    /// Why.
    pub error: ErrorCode,
}

/// transport -> membership (local). A data node connected, with the
/// incarnation its frames carry.
#[derive(Debug, PartialEq)]
pub struct NodeConnectedRep {
    /// The peer.
    pub node: NodeId,
    /// Its incarnation.
    pub incarnation: u32,
}

/// membership -> the president's membership. This node is connected to
/// every data node and asks to join the cluster.
#[derive(Debug, PartialEq)]
pub struct CmRegReq {
    /// The joining node.
    pub node: NodeId,
}

/// president's membership -> every membership. Every configured data node
/// has registered: the cluster is formed and start phases may go on.
#[derive(Debug, PartialEq)]
pub struct CmRegConf {
    /// The president (master of dih and dict).
    pub president: NodeId,
}

/// master dih -> the other dihs. Every tc has switched to `gci`.
#[derive(Debug, PartialEq)]
pub struct GcpCompleteRep {
    /// The GCI now current on every tc.
    pub gci: Gci,
}

/// master dict -> the other dicts. A table exists on every tc and ldm; keep
/// its definition to answer GET_TABINFO. Answered with ADD_TAB_CONF.
#[derive(Debug)]
pub struct DictAddTabReq {
    /// Definition.
    pub table: Arc<TableDef>,
    /// Distribution.
    pub map: Arc<PartitionMap>,
    /// Schema version after the create.
    pub schema_version: u32,
}

/// master dict -> every other dict, system restart (start phase
/// RESTORE_SCHEMA; NDB's SCHEMA_INFO): one chunk of the master's schema,
/// the bytes of its schema file (docs/schema-file-format.md). The master's
/// schema wins: the other dict replaces its own with it (rewriting its
/// schema file when they differ) before it gives its tcs and ldms the
/// tables. Chunks go in order, one at a time, each answered with
/// [`SchemaSyncConf`].
#[derive(Debug, PartialEq)]
pub struct SchemaSyncReq {
    /// Bytes of the whole schema; 0: the master has no schema (no schema
    /// file, or diskless), sent as one empty chunk.
    pub total_bytes: u32,
    /// Where `data` starts within them.
    pub offset: u32,
    /// The chunk: at most `section::MAX_SECTION_BYTES`, ending within
    /// `total_bytes`, empty only when `total_bytes` is 0.
    pub data: Section,
}

/// dict -> master dict. Answer to [`SchemaSyncReq`]: `received` bytes of
/// the schema have arrived. Below the total: send the chunk from there.
/// Equal to the total (the answer to the last chunk): this dict has taken
/// the master's schema, its schema file holds it and its tcs and ldms have
/// every table of it.
#[derive(Debug, PartialEq)]
pub struct SchemaSyncConf {
    /// Bytes of the schema received so far.
    pub received: u32,
}

/// dih -> tc. Phase one of the GCI switch: stop taking commit decisions.
#[derive(Debug, PartialEq)]
pub struct GcpPrepare {
    /// The GCI that commits will get after the switch.
    pub new_gci: Gci,
}

/// tc -> dih. No commit decision will be taken until GCP_COMMIT.
#[derive(Debug, PartialEq)]
pub struct GcpPrepareConf {
    /// Echoed.
    pub new_gci: Gci,
}

/// dih -> tc. Phase two: commits from now on get `gci`; release held commits.
#[derive(Debug, PartialEq)]
pub struct GcpCommit {
    /// The new current GCI.
    pub gci: Gci,
}

/// tc -> dih. Switched.
#[derive(Debug, PartialEq)]
pub struct GcpCommitConf {
    /// Echoed.
    pub gci: Gci,
}

/// master dih -> every tc of every node. Answer with [`GcpFlushConf`] once
/// every transaction this tc committed with a GCI up to `gci` has finished
/// its commit phase (COMMITTED on every replica, so each replica's ldm has
/// logged it). Sent after every tc has switched past `gci`.
#[derive(Debug, PartialEq)]
pub struct GcpFlushReq {
    /// The last GCI of the global checkpoint being made durable.
    pub gci: Gci,
}

/// tc -> master dih. Every commit with a GCI up to `gci` is logged.
#[derive(Debug, PartialEq)]
pub struct GcpFlushConf {
    /// Echoed.
    pub gci: Gci,
}

/// master dih -> every ldm of every node. Append the "`gci` complete"
/// marker to every redo part, write and fsync them; then answer
/// [`GcpSaveConf`]. An fsync failure stops the node (DESIGN.md §5).
#[derive(Debug, PartialEq)]
pub struct GcpSaveReq {
    /// The GCI made complete.
    pub gci: Gci,
}

/// ldm -> master dih. Every redo part of this ldm holds the marker, durably.
#[derive(Debug, PartialEq)]
pub struct GcpSaveConf {
    /// Echoed.
    pub gci: Gci,
}

/// master dih -> every dih (itself included). Record `complete_gci` as
/// complete in this node's system file (both copies, fsynced), then answer
/// [`CopyGciConf`].
#[derive(Debug, PartialEq)]
pub struct CopyGciReq {
    /// The latest complete GCI.
    pub complete_gci: Gci,
    /// The master's current GCI: recorded as the highest started, so that
    /// after a restart new GCIs start above every GCI ever handed out.
    pub started_gci: Gci,
}

/// dih -> master dih. The system file records the GCI.
#[derive(Debug, PartialEq)]
pub struct CopyGciConf {
    /// Echoed.
    pub complete_gci: Gci,
}

/// master dih -> every tc of every node. `gci` is complete: answer the
/// GCI waits up to it.
#[derive(Debug, PartialEq)]
pub struct GcpDurableRep {
    /// The latest complete GCI.
    pub gci: Gci,
}

/// dih -> master dih, system restart (start phase RESTART_GCI): what this
/// node's system file says.
#[derive(Debug, PartialEq)]
pub struct RestartGciRep {
    /// The latest GCI the system file records complete (0: no system file,
    /// the node has never made a GCI durable).
    pub complete_gci: Gci,
}

/// master dih -> every dih, system restart: the GCI the cluster restores.
#[derive(Debug, PartialEq)]
pub struct RestartGciOrd {
    /// The restored GCI (0: initial start, nothing to restore).
    pub restored_gci: Gci,
}

/// dih -> master dih, system restart (start phase RESTORE_DATA): this node
/// restored its data; new GCIs must start above `highest_gci`.
#[derive(Debug, PartialEq)]
pub struct RestoredRep {
    /// The highest GCI found anywhere on this node's disk.
    pub highest_gci: Gci,
}

/// dih -> each ldm of its node. Restore from disk up to `restored_gci`
/// (newest usable local checkpoint, then redo), rebuild the indexes,
/// invalidate redo beyond it durably, then answer [`RestoreConf`].
/// Node-local.
#[derive(Debug, PartialEq)]
pub struct RestoreReq {
    /// The GCI the cluster restores (0: initial start, format the redo log).
    pub restored_gci: Gci,
}

/// ldm -> dih. Restored and ready to log. Node-local.
#[derive(Debug, PartialEq)]
pub struct RestoreConf {
    /// The highest GCI found in this ldm's redo parts.
    pub highest_gci: Gci,
    /// Row changes replayed.
    pub replayed: u64,
}

/// Where one partition lives (DESIGN.md §3).
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionPlacement {
    /// Node group holding the partition.
    pub node_group: u32,
    /// Replicas in chain order; the first is the primary.
    pub replicas: Vec<NodeId>,
    /// The ldm instance on each replica's node that owns the partition.
    pub ldm_instance: u16,
    /// The redo log part the partition writes, fixed at creation.
    pub redo_part: u32,
}

/// A table's distribution: buckets to partitions, partitions to replicas.
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionMap {
    /// Table.
    pub table_id: u32,
    /// Rises whenever the map changes.
    pub version: u32,
    /// Partition of each of the `partition::BUCKETS` buckets.
    pub bucket_partitions: Vec<u32>,
    /// Placement of each partition.
    pub partitions: Vec<PartitionPlacement>,
}

/// dict -> dih. Work out the distribution of a new table.
#[derive(Debug)]
pub struct DiAddTabReq {
    /// The table (partitions already decided).
    pub table: Arc<TableDef>,
}

/// dih -> dict. The table's distribution.
#[derive(Debug)]
pub struct DiAddTabConf {
    /// The map.
    pub map: Arc<PartitionMap>,
}

/// dict -> tc. A table now exists; route its operations with `map`.
#[derive(Debug)]
pub struct TcAddTabReq {
    /// Definition.
    pub table: Arc<TableDef>,
    /// Distribution.
    pub map: Arc<PartitionMap>,
}

/// dict -> ldm. Create the partitions of a table this ldm owns.
#[derive(Debug)]
pub struct LqhAddTabReq {
    /// Definition.
    pub table: Arc<TableDef>,
    /// Distribution (the ldm creates the partitions whose placement names
    /// its own node and instance).
    pub map: Arc<PartitionMap>,
}

/// tc or ldm -> dict. The table is added.
#[derive(Debug, PartialEq)]
pub struct AddTabConf {
    /// Table.
    pub table_id: u32,
}

/// dict -> tc or ldm. Forget a table (tc: refuse new operations; ldm: free
/// its partitions once no operation uses them).
#[derive(Debug, PartialEq)]
pub struct DropTabOrd {
    /// Table.
    pub table_id: u32,
}

/// tc or ldm -> dict. Answer to [`DropTabOrd`].
#[derive(Debug, PartialEq)]
pub struct DropTabRep {
    /// Table.
    pub table_id: u32,
    /// True when operations still use the table: dict retries later.
    pub busy: bool,
}

/// membership -> a block. Run start phase `phase`; answer with [`StartPhaseConf`].
#[derive(Debug, PartialEq)]
pub struct StartPhaseReq {
    /// Phase number (see membership's start module).
    pub phase: u8,
}

/// a block -> membership. Phase done on this block.
#[derive(Debug, PartialEq)]
pub struct StartPhaseConf {
    /// Echoed.
    pub phase: u8,
}

/// transport -> tc and dict. An API node disconnected: abort its
/// transactions and forget its requests.
#[derive(Debug, PartialEq)]
pub struct ApiFailRep {
    /// The API node.
    pub node: NodeId,
}

/// A block to itself, delayed: periodic work (NDB's CONTINUEB).
#[derive(Debug, PartialEq)]
pub struct ContinueB {
    /// Which periodic job (block-specific).
    pub job: u32,
}

/// a block -> the node's io service (`BlockKind::Io`: the io thread in
/// production, the disk model in `sim`), sent by `Context::fs_request`,
/// never by `send`. Perform one file operation in the node's data
/// directory; answered with one [`FsConf`] carrying `token`. Requests run
/// in the order they arrive. Node-local: never encoded.
#[derive(Debug)]
pub struct FsReq {
    /// The requester's number for the request, echoed.
    pub token: u64,
    /// What to do.
    pub operation: FsOperation,
}

/// io service -> the block that sent [`FsReq`]. The operation is done, or
/// failed with the file, offset and OS error text. The service never
/// panics on an OS error; the block decides (an fsync error or a bad
/// checksum stops the node, DESIGN.md §5). Node-local: never encoded.
#[derive(Debug)]
pub struct FsConf {
    /// Echoed.
    pub token: u64,
    /// The outcome.
    pub result: Result<FsDone, FsError>,
}

macro_rules! signals {
    ($( $name:ident = $number:literal, )*) => {
        /// Every signal. One variant per signal struct, with the same name.
        #[derive(Debug)]
        pub enum Signal {
            $( #[doc = concat!("See [`", stringify!($name), "`].")] $name($name), )*
        }

        impl Signal {
            /// The signal's global number (NDB: GSN), as on the wire.
            pub fn number(&self) -> u16 {
                match self {
                    $( Signal::$name(_) => $number, )*
                }
            }

            /// The signal's name, for traces.
            pub fn name(&self) -> &'static str {
                match self {
                    $( Signal::$name(_) => stringify!($name), )*
                }
            }
        }

        $(
            impl From<$name> for Signal {
                fn from(value: $name) -> Signal {
                    Signal::$name(value)
                }
            }
        )*
    };
}

signals! {
    ApiRegReq = 1,
    ApiRegConf = 2,
    TcKeyReq = 10,
    TcKeyConf = 11,
    TcKeyRef = 12,
    TransIdAi = 13,
    TcCommitReq = 14,
    TcRollbackReq = 15,
    TcRollbackConf = 16,
    CreateTabReq = 20,
    CreateTabConf = 21,
    SchemaRef = 22,
    DropTabReq = 23,
    DropTabConf = 24,
    GetTabInfoReq = 25,
    GetTabInfoConf = 26,
    ListTablesReq = 27,
    ListTablesConf = 28,
    LqhKeyReq = 40,
    LqhKeyConf = 41,
    LqhKeyRef = 42,
    CommitReq = 43,
    CommitConf = 44,
    CompleteReq = 45,
    CompleteConf = 46,
    AbortReq = 47,
    AbortConf = 48,
    GcpPrepare = 60,
    GcpPrepareConf = 61,
    GcpCommit = 62,
    GcpCommitConf = 63,
    DiAddTabReq = 70,
    DiAddTabConf = 71,
    TcAddTabReq = 72,
    LqhAddTabReq = 73,
    AddTabConf = 74,
    DropTabOrd = 75,
    DropTabRep = 76,
    StartPhaseReq = 80,
    StartPhaseConf = 81,
    ApiFailRep = 82,
    ContinueB = 90,
    ScanPartitionReq = 30,
    ScanPartitionConf = 31,
    ScanPartitionRef = 32,
    NodeConnectedRep = 83,
    CmRegReq = 84,
    CmRegConf = 85,
    GcpCompleteRep = 64,
    DictAddTabReq = 77,
    FsReq = 100,
    FsConf = 101,
    GciWaitReq = 17,
    GciWaitConf = 18,
    GciWaitRef = 19,
    GcpFlushReq = 65,
    GcpFlushConf = 66,
    GcpSaveReq = 67,
    GcpSaveConf = 68,
    CopyGciReq = 69,
    CopyGciConf = 78,
    GcpDurableRep = 79,
    RestartGciRep = 86,
    RestartGciOrd = 87,
    RestoredRep = 88,
    RestoreReq = 91,
    RestoreConf = 92,
    SchemaSyncReq = 93,
    SchemaSyncConf = 94,
}

// Signals move through job queues by value; keep them small.
const _: () = assert!(
    std::mem::size_of::<Signal>() <= 128,
    "Signal grew too large for job queues"
);
