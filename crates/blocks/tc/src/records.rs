//! Transaction and operation records of a tc, preallocated from config
//! (max_concurrent_transactions, max_concurrent_operations) so that the hot
//! path never allocates and running out is an ordinary, retryable error.

use signal::attr::KeyHash;
use signal::signals::{LockMode, OperationKind, ReadRow, ReplicaChain, TcKeyReq};
use signal::{BlockKind, BlockRef, ErrorCode, Gci, NodeId, TransactionId};
use stdx::FixedMap;

/// No record.
pub const NIL: u32 = u32::MAX;

/// Where a transaction is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TransactionState {
    /// Not in use.
    Free,
    /// Waiting for the client's next batch, commit or rollback.
    Idle,
    /// A batch is executing at the ldms.
    Executing,
    /// Commit decided; waiting for the GCP switch to hand out a GCI.
    WaitingForGci,
    /// COMMIT sent to every operation.
    Committing,
    /// Client acknowledged; COMPLETE sent to every operation.
    Completing,
    /// ABORT sent to every operation that may hold something.
    Aborting,
    /// Aborted by an error while the client was still sending the batch,
    /// and the client told (TCKEYREF). The record, with no operations left,
    /// only waits for the rest of the batch, so that the client hears of
    /// the abort once: operations that arrive are dropped, the one closing
    /// the batch (EXECUTE/COMMIT) releases the record, as do a rollback, the
    /// inactivity timeout and the client's disconnection.
    AbortedAwaitingBatchEnd,
}

/// What to tell the client once an abort finishes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AbortReply {
    /// TCKEYREF with the error and the failing operation.
    Error {
        /// Why.
        error: ErrorCode,
        /// Client's operation number (u32::MAX: none).
        client_op: u32,
    },
    /// TC_ROLLBACKCONF.
    RollbackConf,
    /// Nothing (the client is gone).
    Silent,
}

/// One transaction.
pub struct Transaction {
    pub state: TransactionState,
    pub transaction_id: TransactionId,
    pub api: BlockRef,
    pub first_op: u32,
    pub last_op: u32,
    pub op_count: u32,
    /// Replies still awaited in the current phase.
    pub outstanding: u32,
    /// Operations of the batch being executed.
    pub batch_ops: u32,
    /// The batch's last operation has arrived (EXECUTE seen).
    pub batch_closed: bool,
    /// Commit once the batch is done.
    pub commit_requested: bool,
    pub abort_reply: AbortReply,
    pub gci: Gci,
    /// Last time an operation was sent to or answered by an ldm: the
    /// lock-wait timeout counts from here, so a batch that keeps making
    /// progress is not taken for a deadlock.
    pub last_progress_ms: u64,
    /// Last time the client did something (inactivity timeout).
    pub last_activity_ms: u64,
    /// The client disconnected: finish without replies.
    pub api_failed: bool,
    /// Aborted while idle (no batch of the client open): the abort's
    /// TCKEYREF answers the client's next operation, since a client
    /// between batches waits for no reply.
    pub reply_owed: bool,
    /// The row of the read that answered last in a committing batch, held
    /// for the TCKEYCONF that ends the transaction (one signal to the
    /// client instead of two).
    pub last_row: Option<ReadRow>,
    /// With an abort for DuplicateKey: the unique index whose value was
    /// repeated (0: the primary key's), named in the TCKEYREF.
    pub duplicate_index: u32,
    /// Before-image reads in flight (`unique.rs`): (operation, table,
    /// key hash). A later operation of the transaction on the same row
    /// waits until the read's write is sent, so the row's operations
    /// reach the ldm in the client's order.
    pub before_images: Vec<(u32, u32, KeyHash)>,
    /// Operations waiting for a before-image of their row, in arrival
    /// order, with their key's hash.
    pub deferred: Vec<(KeyHash, TcKeyReq)>,
    /// The tc's switch count when the transaction began: a unique
    /// index's build waits for the transactions that began before its
    /// switch (`alter.rs`).
    pub switch_epoch: u32,
    pub previous_active: u32,
    pub next_active: u32,
    pub next_waiting_for_gci: u32,
    next_free: u32,
}

impl Transaction {
    fn empty(next_free: u32) -> Transaction {
        Transaction {
            state: TransactionState::Free,
            transaction_id: TransactionId(0),
            api: BlockRef::new(NodeId(0), BlockKind::Api, 0),
            first_op: NIL,
            last_op: NIL,
            op_count: 0,
            outstanding: 0,
            batch_ops: 0,
            batch_closed: false,
            commit_requested: false,
            abort_reply: AbortReply::Silent,
            gci: Gci(0),
            last_progress_ms: 0,
            last_activity_ms: 0,
            api_failed: false,
            reply_owed: false,
            last_row: None,
            duplicate_index: 0,
            before_images: Vec::new(),
            deferred: Vec::new(),
            switch_epoch: 0,
            previous_active: NIL,
            next_active: NIL,
            next_waiting_for_gci: NIL,
            next_free,
        }
    }
}

/// Where an operation is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum OpPhase {
    /// LQHKEYREQ sent, no answer yet.
    Sent,
    /// Prepared at the ldm (holds a lock and maybe an after-image).
    Prepared,
    /// Finished at the ldm, which kept nothing (committed read, or failed).
    Released,
    /// COMMIT sent.
    Committing,
    /// Committed at the ldm.
    Committed,
    /// COMPLETE sent.
    Completing,
    /// ABORT sent.
    Aborting,
}

/// Why an operation is in its transaction (docs/design/scans-and-indexes.md
/// §5: how a tc keeps unique indexes).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum OpRole {
    /// A client's operation as it sent it: counted in its batch, a read's
    /// row goes back to the client.
    Client,
    /// The exclusive read of a row's before-image that a client's update,
    /// delete or write of a table with unique indexes needs first: it
    /// stands for the client's operation in its batch (and holds it in
    /// `pending`); its row stays in the tc.
    BeforeImage,
    /// An operation the tc added: a client's write sent after its
    /// before-image (index 0), or the insert or delete of a unique index's
    /// hidden row (that index's id). Not counted in the batch; a
    /// DuplicateKey from it names `index_id`.
    Triggered {
        /// The unique index whose hidden row it writes (0: none).
        index_id: u32,
    },
    /// A client's write of a row its before-image found missing, sent as
    /// an insert alone (holding the write in `pending`): prepared, the
    /// hidden rows' inserts follow; refused with DuplicateKey (another
    /// transaction inserted the row meanwhile), the write starts again.
    /// Not counted in the batch.
    InsertForWrite,
    /// A client's read through a unique index
    /// (`tc_key_flags::THROUGH_UNIQUE_INDEX`): the hidden row's read,
    /// holding the client's request in `pending`. Counted in the batch;
    /// its row (the primary key) stays in the tc.
    IndexRead,
    /// The read of the row an `IndexRead` found, whose row goes to the
    /// client; `checked`: a committed read, answered only if the row
    /// still holds the index's values (the request in `pending` says
    /// them). Not counted in the batch.
    IndexRow {
        /// Check the row's values.
        checked: bool,
    },
    /// While a unique index is built: the exclusive read of the hidden
    /// row a write's delete of an old value would remove, holding the
    /// delete in `pending`; the delete goes only if the hidden row names
    /// the writer's row. Not counted in the batch.
    HiddenCheck {
        /// The unique index.
        index_id: u32,
    },
}

/// One operation.
pub struct TcOperation {
    pub phase: OpPhase,
    pub transaction: u32,
    pub next: u32,
    pub client_op: u32,
    pub kind: OperationKind,
    pub lock: LockMode,
    /// The primary replica's ldm (where ABORT goes).
    pub primary: BlockRef,
    /// The last replica's ldm (where COMMIT and COMPLETE go), known from
    /// the LQHKEYCONF's sender.
    pub ldm: BlockRef,
    /// The last replica's operation record.
    pub ldm_op: u32,
    /// The replicas the operation runs on, primary first (the primary
    /// alone for reads): after a node failure, what routes around it.
    pub chain: ReplicaChain,
    /// A node of `chain` failed and the operation's COMMIT, COMPLETE or
    /// ABORT went out as RESOLVE_REQ: only RESOLVE_CONF moves it on (a
    /// normal answer may come too, and is ignored).
    pub resolving: bool,
    /// A read asked with `tc_key_flags::IGNORE_MISSING`: its row missing
    /// at the primary answers no row, not an abort.
    pub ignore_missing: bool,
    /// A read asked with `tc_key_flags::SKIP_LOCKED`: its row locked by
    /// another transaction, it returns no row and the transaction goes on.
    pub skip_locked: bool,
    /// Why the operation is here.
    pub role: OpRole,
    /// With `OpRole::BeforeImage` or `OpRole::InsertForWrite`: the
    /// client's write, sent once the row is read (or started again).
    pub pending: Option<Box<TcKeyReq>>,
    next_free: u32,
}

impl TcOperation {
    fn empty(next_free: u32) -> TcOperation {
        TcOperation {
            phase: OpPhase::Released,
            transaction: NIL,
            next: NIL,
            client_op: 0,
            kind: OperationKind::Read,
            lock: LockMode::CommittedRead,
            primary: BlockRef::new(NodeId(0), BlockKind::Ldm, 0),
            ldm: BlockRef::new(NodeId(0), BlockKind::Ldm, 0),
            ldm_op: NIL,
            chain: ReplicaChain::new(&[NodeId(0)]),
            resolving: false,
            ignore_missing: false,
            skip_locked: false,
            role: OpRole::Client,
            pending: None,
            next_free,
        }
    }
}

/// Both pools and the transaction-id map.
pub struct Records {
    pub transactions: Vec<Transaction>,
    pub operations: Vec<TcOperation>,
    free_transaction: u32,
    free_operation: u32,
    pub transactions_in_use: u32,
    pub operations_in_use: u32,
    by_id: FixedMap,
    /// Head of the list of transactions in use (timeout scan).
    pub active_head: u32,
}

impl Records {
    /// Pools of the given sizes.
    pub fn new(transactions: u32, operations: u32) -> Records {
        let transactions = transactions.max(1);
        let operations = operations.max(1);
        Records {
            transactions: (0..transactions)
                .map(|i| Transaction::empty(if i + 1 < transactions { i + 1 } else { NIL }))
                .collect(),
            operations: (0..operations)
                .map(|i| TcOperation::empty(if i + 1 < operations { i + 1 } else { NIL }))
                .collect(),
            free_transaction: 0,
            free_operation: 0,
            transactions_in_use: 0,
            operations_in_use: 0,
            by_id: FixedMap::with_capacity(transactions as usize),
            active_head: NIL,
        }
    }

    /// The transaction with this id.
    pub fn find(&self, transaction_id: TransactionId) -> Option<u32> {
        self.by_id.get(transaction_id.0)
    }

    /// Seizes a transaction record.
    pub fn seize_transaction(
        &mut self,
        transaction_id: TransactionId,
        api: BlockRef,
        now_ms: u64,
    ) -> Option<u32> {
        let index = self.free_transaction;
        if index == NIL || transaction_id.0 == u64::MAX {
            return None;
        }
        let inserted = self.by_id.insert(transaction_id.0, index);
        assert!(inserted.is_ok(), "transaction map is sized to the pool");
        let head = self.active_head;
        let record = &mut self.transactions[index as usize];
        self.free_transaction = record.next_free;
        *record = Transaction::empty(NIL);
        record.state = TransactionState::Idle;
        record.transaction_id = transaction_id;
        record.api = api;
        record.last_activity_ms = now_ms;
        record.next_active = head;
        if head != NIL {
            self.transactions[head as usize].previous_active = index;
        }
        self.active_head = index;
        self.transactions_in_use += 1;
        Some(index)
    }

    /// Frees all operations of a transaction (it keeps its record).
    pub fn release_operations(&mut self, index: u32) {
        let record = &mut self.transactions[index as usize];
        record.before_images.clear();
        record.deferred.clear();
        let mut op = record.first_op;
        record.first_op = NIL;
        record.last_op = NIL;
        record.op_count = 0;
        while op != NIL {
            let next = self.operations[op as usize].next;
            self.operations[op as usize] = TcOperation::empty(self.free_operation);
            self.free_operation = op;
            self.operations_in_use -= 1;
            op = next;
        }
    }

    /// Frees a transaction and all its operations.
    pub fn release_transaction(&mut self, index: u32) {
        self.release_operations(index);
        let record = &self.transactions[index as usize];
        assert!(
            record.state != TransactionState::Free,
            "transaction record {index} released twice"
        );
        let (previous, next, id) = (
            record.previous_active,
            record.next_active,
            record.transaction_id,
        );
        if previous != NIL {
            self.transactions[previous as usize].next_active = next;
        } else {
            self.active_head = next;
        }
        if next != NIL {
            self.transactions[next as usize].previous_active = previous;
        }
        let removed = self.by_id.remove(id.0);
        assert_eq!(
            removed,
            Some(index),
            "transaction {index} missing from the id map"
        );
        self.transactions[index as usize] = Transaction::empty(self.free_transaction);
        self.free_transaction = index;
        self.transactions_in_use -= 1;
    }

    /// Seizes an operation record and appends it to `transaction`.
    pub fn seize_operation(&mut self, transaction: u32) -> Option<u32> {
        let index = self.free_operation;
        if index == NIL {
            return None;
        }
        self.free_operation = self.operations[index as usize].next_free;
        self.operations[index as usize] = TcOperation::empty(NIL);
        self.operations[index as usize].transaction = transaction;
        let record = &mut self.transactions[transaction as usize];
        if record.last_op == NIL {
            record.first_op = index;
        } else {
            let last = record.last_op;
            self.operations[last as usize].next = index;
        }
        let record = &mut self.transactions[transaction as usize];
        record.last_op = index;
        record.op_count += 1;
        self.operations_in_use += 1;
        Some(index)
    }
}
