//! Transactions: operations are queued (`insert`, `read`, ...) and sent
//! together as one batch of TCKEYREQs to the transaction's tc; the batch's
//! replies are posted to an inbox and applied here. Two ways to run a
//! batch share that machinery: `execute` (the sync API: send, then wait on
//! the transaction's own inbox) and `AsyncSession::execute` (many
//! transactions in flight from one thread, see `session`).
//!
//! ```text
//!            execute(No)            execute(Yes) / TCKEYCONF committed
//!  Idle ───────────────> Active ──────────────────────────────> Committed
//!    │                     │ TCKEYREF, rollback()
//!    │ rollback()          └──────────────────────────────────> Aborted
//!    └───────────────────────────────────────────────────────> Aborted
//!  any send or wait failure (connection lost, timeout) ──────> Unknown
//! ```
//!
//! A durable commit (`Commit::Durable`) is committed at the committing
//! TCKEYCONF like any other; then, if it wrote something, the same request
//! slot waits for its GCI to become durable (a GCI_WAIT_REQ, see `durable`)
//! before the outcome is handed back. A failure of that wait leaves the
//! transaction Committed: the commit stands, only its durability is not
//! confirmed.
//! Dropping an Active or Unknown transaction sends TCROLLBACKREQ without
//! waiting, so a forgotten transaction does not hold locks until the data
//! node's inactivity timeout.

use crate::cluster::{section_from, Cluster};
use crate::connection::{FrameBuilder, NodeConnection};
use crate::dispatch::{Inbox, Posted, Replies, Reply};
use crate::durable::{DurableWait, WaitAnswer};
use crate::error::ClientError;
use crate::table::{ColumnSelector, Row, Table};
use crate::value::Value;
use signal::schema::ColumnType;
use signal::signals::{
    tc_key_flags, LockMode, OperationKind, TcCommitReq, TcKeyReq, TcRollbackReq,
};
use signal::{BlockKind, ErrorCode, Gci, NodeId, Signal, TransactionId};
use std::ops::Range;
use std::sync::Arc;

/// Names one operation of a transaction; numbered from 0 in the order the
/// operations were defined.
///
/// ```
/// let op = client::OpId::new(3);
/// assert_eq!(op.index(), 3);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct OpId(u32);

impl OpId {
    /// The operation numbered `index`.
    ///
    /// ```
    /// assert_eq!(client::OpId::new(0), client::OpId::new(0));
    /// ```
    pub const fn new(index: u32) -> OpId {
        OpId(index)
    }

    /// Its number.
    ///
    /// ```
    /// assert_eq!(client::OpId::new(7).index(), 7);
    /// ```
    pub const fn index(self) -> u32 {
        self.0
    }
}

/// What a locking read does about a row another transaction holds
/// locked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LockWait {
    /// Wait for the lock (until the lock-wait timeout), as every locking
    /// read does by default.
    #[default]
    Wait,
    /// Fail the transaction at once with `LockNotAvailable` (NOWAIT).
    NoWait,
    /// Return no row and go on (SKIP LOCKED).
    SkipLocked,
}

/// Whether `execute` also commits.
///
/// ```
/// assert_ne!(client::Commit::Yes, client::Commit::No);
/// assert_ne!(client::Commit::Yes, client::Commit::Durable);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Commit {
    /// Execute the batch; the transaction stays open, locks stay held.
    No,
    /// Execute the batch and commit the transaction. The commit is
    /// acknowledged once every replica committed it (in memory): a
    /// whole-cluster crash before its GCI is durable can lose it.
    Yes,
    /// Execute the batch, commit, and return only once the commit's GCI is
    /// durable (complete on disk), so no crash can lose it. A commit that
    /// wrote nothing returns at once. If the wait for durability fails
    /// after the commit, the error says why and the transaction is
    /// `Committed` (see [`Transaction::commit_gci`]).
    Durable,
}

/// What an `execute` achieved.
///
/// ```
/// let outcome = client::Outcome { committed: false, gci: None, durable: false };
/// assert!(!outcome.committed);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Outcome {
    /// The transaction is committed.
    pub committed: bool,
    /// The commit's GCI, when committed and something was written.
    pub gci: Option<Gci>,
    /// Committed with `Commit::Durable`: the commit's GCI is durable (or
    /// the commit wrote nothing). Always false otherwise.
    pub durable: bool,
}

/// Where a transaction is in its life.
///
/// ```
/// assert_ne!(client::TransactionState::Idle, client::TransactionState::Active);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TransactionState {
    /// Nothing sent yet.
    Idle,
    /// At least one batch executed; not committed.
    Active,
    /// Committed.
    Committed,
    /// Aborted on the data node (refused, or rolled back).
    Aborted,
    /// A send or wait failed: the data node's view is unknown.
    Unknown,
}

struct QueuedOp {
    op: OpId,
    kind: OperationKind,
    lock: LockMode,
    /// `tc_key_flags::IGNORE_MISSING`, `THROUGH_UNIQUE_INDEX`, or 0.
    flags: u8,
    /// The table whose rows the operation reads or writes (its rows are
    /// decoded by it).
    table: Arc<Table>,
    /// A read through a unique index: the index's hidden table, which the
    /// request names (`table` is the one whose row comes back).
    through: Option<Arc<Table>>,
    key: Range<usize>,
    attr: Option<Range<usize>>,
}

/// A transaction. Obtained from [`Cluster::transaction`].
///
/// ```no_run
/// use client::{Cluster, Commit, Value};
/// use signal::signals::LockMode;
/// let cluster = Cluster::connect("127.0.0.1:11860")?;
/// let table = cluster.table("accounts")?;
/// let mut transaction = cluster.transaction();
/// let read = transaction.read(&table, &[Value::UInt(1)], LockMode::Exclusive)?;
/// transaction.execute(Commit::No)?;
/// let balance = transaction.get(read).and_then(|row| row.get("balance")?.as_f64());
/// transaction.update(&table, &[Value::UInt(1)], &[("balance", Value::from(balance.unwrap_or(0.0) + 1.0))])?;
/// transaction.execute(Commit::Yes)?;
/// # Ok::<(), client::ClientError>(())
/// ```
pub struct Transaction<'a> {
    cluster: &'a Cluster,
    id: TransactionId,
    connection: usize,
    /// The connection in slot `connection` when the transaction began:
    /// kept to the end, so replies come back where the transaction waits
    /// even if the slot gets a new connection meanwhile (`reconnect.rs`).
    link: Arc<NodeConnection>,
    tc_instance: u16,
    state: TransactionState,
    next_op: u32,
    /// The inbox the connection's dispatch posts replies to, and the tag
    /// they carry, while registered.
    registered: Option<(Arc<Inbox>, u32)>,
    /// The rest: behind one pointer, so that a transaction is cheap to
    /// move through a session, and recycled when the transaction drops.
    /// `None` only inside `drop`.
    body: Option<Box<Body>>,
}

mod body;
mod unique;

use body::spare_row;
pub(crate) use body::Body;

/// What was sent.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum BatchKind {
    /// Operations (or a TCCOMMITREQ when none were queued).
    Operations {
        /// COMMIT was asked for.
        committing: bool,
        /// The commit is to be durable before it is answered.
        durable: bool,
        /// Operations sent.
        expected: u32,
    },
    /// TCROLLBACKREQ.
    Rollback,
    /// The durable commit is committed with `outcome`; waiting for its GCI
    /// to be durable. `wait`: the GCI_WAIT_REQ, `None` until it is queued.
    DurableWait {
        outcome: Outcome,
        wait: Option<DurableWait>,
    },
}

/// What a reply did to the request in flight.
#[derive(Debug)]
pub(crate) enum Progress {
    /// More replies are awaited.
    Waiting,
    /// The request is answered (or failed).
    Done(Result<Outcome, ClientError>),
    /// A durable commit is committed: its GCI wait must be queued
    /// ([`Transaction::push_durable_wait`]) and sent.
    SendDurableWait,
}

/// What has arrived for the request in flight (its rows arrive in
/// [`Body::arrived`]).
#[derive(Debug)]
struct Batch {
    kind: BatchKind,
    /// Operations confirmed by TCKEYCONFs so far.
    confirmed: u32,
    /// A TCKEYCONF said the transaction is committed, with this GCI.
    committed: bool,
    gci: Gci,
}

impl Batch {
    fn new(kind: BatchKind) -> Batch {
        Batch {
            kind,
            confirmed: 0,
            committed: false,
            gci: Gci(0),
        }
    }
}

impl<'a> Transaction<'a> {
    /// A new transaction with `body` (empty, from [`Body::take`]).
    pub(crate) fn new(
        cluster: &'a Cluster,
        id: TransactionId,
        connection: usize,
        tc_instance: u16,
        body: Box<Body>,
    ) -> Transaction<'a> {
        Transaction {
            cluster,
            id,
            connection,
            link: cluster.connection(connection),
            tc_instance,
            state: TransactionState::Idle,
            next_op: 0,
            registered: None,
            body: Some(body),
        }
    }

    /// The cluster the transaction runs in.
    pub fn cluster(&self) -> &'a Cluster {
        self.cluster
    }

    pub(crate) fn connection_index(&self) -> usize {
        self.connection
    }
}

/// The body is there from `new` until `drop` takes it.
const BODY_PRESENT: &str = "a transaction has its body until it drops";

impl Transaction<'_> {
    fn body(&self) -> &Body {
        self.body.as_deref().expect(BODY_PRESENT)
    }

    fn body_mut(&mut self) -> &mut Body {
        self.body.as_deref_mut().expect(BODY_PRESENT)
    }
}

impl Transaction<'_> {
    /// The transaction's id.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// assert_eq!(cluster.transaction().id().api_node().0, cluster.api_node());
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn id(&self) -> TransactionId {
        self.id
    }

    /// The tc instance this transaction uses on its data node.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// assert!(cluster.transaction().tc_instance() < cluster.tc_instances());
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn tc_instance(&self) -> u16 {
        self.tc_instance
    }

    /// Where the transaction is in its life.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// assert_eq!(cluster.transaction().state(), client::TransactionState::Idle);
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn state(&self) -> TransactionState {
        self.state
    }

    /// The GCI the transaction committed in, once it committed a write
    /// (`None` before, and for a commit that wrote nothing). After a
    /// durable commit whose wait for durability failed, this is the GCI to
    /// pass to [`Cluster::wait_durable`].
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// assert_eq!(cluster.transaction().commit_gci(), None);
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn commit_gci(&self) -> Option<Gci> {
        self.body().commit_gci
    }

    /// Whether ending the transaction now can change nothing: it is open,
    /// and everything it queued or ran read without a lock (committed
    /// reads). It holds no lock and wrote nothing, so committing it and
    /// dropping it (which rolls it back at the tc without waiting) end it
    /// alike, and dropping saves the commit's round trip.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// assert!(cluster.transaction().holds_nothing());
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn holds_nothing(&self) -> bool {
        matches!(
            self.state,
            TransactionState::Idle | TransactionState::Active
        ) && self.body().batch.is_none()
            && !self.body().locked
    }

    /// Whether the transaction queued a write to `table` (executed or
    /// not): a committed read of one of its rows elsewhere could miss
    /// the transaction's own change.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// let table = cluster.table("t")?;
    /// let mut transaction = cluster.transaction();
    /// assert!(!transaction.has_written(&table));
    /// transaction.delete(&table, &[client::Value::UInt(1)])?;
    /// assert!(transaction.has_written(&table));
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn has_written(&self, table: &Table) -> bool {
        self.body().written_tables.contains(&table.def().id)
    }

    /// Whether a write to `table` is queued and not yet executed: a scan
    /// that must see the transaction's own writes sends it first.
    pub(crate) fn has_queued_write_to(&self, table: &Table) -> bool {
        let id = table.def().id;
        self.body()
            .queued
            .iter()
            .any(|queued| queued.kind != OperationKind::Read && queued.table.def().id == id)
    }

    /// Operations queued and not yet executed.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// assert_eq!(cluster.transaction().pending_operations(), 0);
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn pending_operations(&self) -> usize {
        self.body().queued.len()
    }

    /// The first operation queued and not yet executed: it names the
    /// queue, since a queue that was sent and filled again starts with a
    /// later operation.
    ///
    /// ```no_run
    /// # let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// # let table = cluster.table("t")?;
    /// let mut transaction = cluster.transaction();
    /// assert_eq!(transaction.first_pending_operation(), None);
    /// let op = transaction.delete(&table, &[client::Value::UInt(1)])?;
    /// assert_eq!(transaction.first_pending_operation(), Some(op));
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn first_pending_operation(&self) -> Option<OpId> {
        self.body().queued.first().map(|queued| queued.op)
    }

    pub(crate) fn check_open(&self) -> Result<(), ClientError> {
        match self.state {
            TransactionState::Idle | TransactionState::Active => Ok(()),
            TransactionState::Committed => Err(ClientError::Usage(
                "the transaction is already committed; start a new one".into(),
            )),
            TransactionState::Aborted => Err(ClientError::Operation {
                code: ErrorCode::TransactionAborted,
                op: None,
                table: None,
            }),
            TransactionState::Unknown => Err(ClientError::Usage(
                "the transaction's outcome is unknown after an earlier error; start a new one"
                    .into(),
            )),
        }
    }

    fn queue(
        &mut self,
        kind: OperationKind,
        lock: LockMode,
        table: &Arc<Table>,
        encode: impl FnOnce(&mut Vec<u8>) -> Result<(Range<usize>, Option<Range<usize>>), ClientError>,
    ) -> Result<OpId, ClientError> {
        self.check_open()?;
        let body = self.body.as_deref_mut().expect(BODY_PRESENT);
        let start = body.bytes.len();
        let (key, attr) = match encode(&mut body.bytes) {
            Ok(ranges) => ranges,
            Err(error) => {
                body.bytes.truncate(start);
                return Err(error);
            }
        };
        let op = OpId(self.next_op);
        self.next_op += 1;
        body.wrote |= kind != OperationKind::Read;
        body.locked |= kind != OperationKind::Read || lock != LockMode::CommittedRead;
        let table_id = table.def().id;
        if kind != OperationKind::Read && !body.written_tables.contains(&table_id) {
            body.written_tables.push(table_id);
        }
        body.queued.push(QueuedOp {
            op,
            kind,
            lock,
            flags: 0,
            table: Arc::clone(table),
            through: None,
            key,
            attr,
        });
        Ok(op)
    }

    fn queue_row<C: ColumnSelector>(
        &mut self,
        kind: OperationKind,
        table: &Arc<Table>,
        values: &[(C, Value)],
    ) -> Result<OpId, ClientError> {
        self.queue(kind, LockMode::Exclusive, table, |bytes| {
            // The key is built from the same values into a scratch buffer,
            // then placed after the attributes.
            let mut key = Vec::new();
            let attr_start = bytes.len();
            table.encode_row(values, bytes, Some(&mut key))?;
            let attr = attr_start..bytes.len();
            let key_start = bytes.len();
            bytes.extend_from_slice(&key);
            Ok((key_start..bytes.len(), Some(attr)))
        })
    }

    /// Queues an insert of a whole row (every key and NOT NULL column).
    /// Fails on execute with DuplicateKey if the key exists.
    ///
    /// ```no_run
    /// # let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// # let table = cluster.table("t")?;
    /// use client::Value;
    /// let mut transaction = cluster.transaction();
    /// transaction.insert(&table, &[("k", Value::UInt(1)), ("v", Value::from("one"))])?;
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn insert<C: ColumnSelector>(
        &mut self,
        table: &Arc<Table>,
        values: &[(C, Value)],
    ) -> Result<OpId, ClientError> {
        self.queue_row(OperationKind::Insert, table, values)
    }

    /// Queues an upsert (NDB's writeTuple): inserts the row when the key is
    /// absent (columns not given are NULL, and a NOT NULL column not given
    /// is an error), or sets the given columns of the existing row, leaving
    /// the others as they are. Give every column to overwrite a whole row.
    ///
    /// ```no_run
    /// # let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// # let table = cluster.table("t")?;
    /// use client::Value;
    /// let mut transaction = cluster.transaction();
    /// transaction.write(&table, &[(0u16, Value::UInt(1)), (1u16, Value::from("uno"))])?;
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn write<C: ColumnSelector>(
        &mut self,
        table: &Arc<Table>,
        values: &[(C, Value)],
    ) -> Result<OpId, ClientError> {
        self.queue_row(OperationKind::Write, table, values)
    }

    /// Queues an update of some non-key columns of the row with `key`.
    /// Fails on execute with NoSuchRow if there is none.
    ///
    /// ```no_run
    /// # let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// # let table = cluster.table("t")?;
    /// use client::Value;
    /// let mut transaction = cluster.transaction();
    /// transaction.update(&table, &[Value::UInt(1)], &[("v", Value::from("eins"))])?;
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn update<C: ColumnSelector>(
        &mut self,
        table: &Arc<Table>,
        key: &[Value],
        set: &[(C, Value)],
    ) -> Result<OpId, ClientError> {
        self.queue(OperationKind::Update, LockMode::Exclusive, table, |bytes| {
            let key_start = bytes.len();
            table.encode_key(key, bytes)?;
            let attr_start = bytes.len();
            table.encode_row(set, bytes, None)?;
            Ok((key_start..attr_start, Some(attr_start..bytes.len())))
        })
    }

    /// Queues additions to integer columns of the row with `key`, done by
    /// the data node in one round trip (`SET k = k + 1` without reading
    /// the row first). Fails on execute with NoSuchRow if there is no row,
    /// and ValueOutOfRange if a column is NULL or a sum leaves the column
    /// type's range (the transaction is then aborted, as on any refused
    /// operation). Columns of a unique index cannot be incremented
    /// (BadRequest): the index is kept from new values, which only the
    /// data node knows here.
    ///
    /// ```no_run
    /// # let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// # let table = cluster.table("t")?;
    /// let mut transaction = cluster.transaction();
    /// transaction.increment(&table, &[client::Value::UInt(1)], &[("hits", 1)])?;
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn increment<C: ColumnSelector>(
        &mut self,
        table: &Arc<Table>,
        key: &[Value],
        deltas: &[(C, i64)],
    ) -> Result<OpId, ClientError> {
        if deltas.is_empty() || deltas.len() > signal::attr::MAX_INCREMENTS {
            return Err(ClientError::Usage(format!(
                "an increment adds to 1 to {} columns, not {}",
                signal::attr::MAX_INCREMENTS,
                deltas.len()
            )));
        }
        let mut columns: Vec<(u16, i64)> = Vec::with_capacity(deltas.len());
        for (column, delta) in deltas {
            let id = table.column_id(column)?;
            if columns.iter().any(|(seen, _)| *seen == id) {
                return Err(ClientError::Usage(format!(
                    "an increment names column {} twice",
                    column.describe()
                )));
            }
            let column_type = table.def().columns[id as usize].column_type;
            if !matches!(
                column_type,
                ColumnType::Int { .. } | ColumnType::BigInt { .. }
            ) {
                return Err(ClientError::Invalid {
                    code: ErrorCode::BadValue,
                    detail: format!(
                        "column {} of table {:?} is not an integer: it cannot be incremented",
                        column.describe(),
                        table.name()
                    ),
                });
            }
            columns.push((id, *delta));
        }
        self.queue(
            OperationKind::Increment,
            LockMode::Exclusive,
            table,
            |bytes| {
                let key_start = bytes.len();
                table.encode_key(key, bytes)?;
                let attr_start = bytes.len();
                for (id, delta) in &columns {
                    signal::attr::append_entry(bytes, *id, &delta.to_le_bytes()).map_err(
                        |code| ClientError::Invalid {
                            code,
                            detail: format!("an increment of table {:?}", table.name()),
                        },
                    )?;
                }
                Ok((key_start..attr_start, Some(attr_start..bytes.len())))
            },
        )
    }

    /// Queues a delete of the row with `key`. Fails on execute with
    /// NoSuchRow if there is none.
    ///
    /// ```no_run
    /// # let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// # let table = cluster.table("t")?;
    /// let mut transaction = cluster.transaction();
    /// transaction.delete(&table, &[client::Value::UInt(1)])?;
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn delete(&mut self, table: &Arc<Table>, key: &[Value]) -> Result<OpId, ClientError> {
        if let Some(encoded) = self.body().hinted(table, key) {
            let kind = OperationKind::Delete;
            return self.queue(kind, LockMode::Exclusive, table, |_| Ok((encoded, None)));
        }
        self.queue(OperationKind::Delete, LockMode::Exclusive, table, |bytes| {
            let key_start = bytes.len();
            table.encode_key(key, bytes)?;
            Ok((key_start..bytes.len(), None))
        })
    }

    /// Queues a read of every column of the row with `key`; after execute,
    /// [`Transaction::get`] returns it. A missing row fails the execute
    /// with NoSuchRow.
    ///
    /// ```no_run
    /// # let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// # let table = cluster.table("t")?;
    /// use signal::signals::LockMode;
    /// let mut transaction = cluster.transaction();
    /// let op = transaction.read(&table, &[client::Value::UInt(1)], LockMode::CommittedRead)?;
    /// transaction.execute(client::Commit::Yes)?;
    /// println!("{:?}", transaction.get(op));
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn read(
        &mut self,
        table: &Arc<Table>,
        key: &[Value],
        lock: LockMode,
    ) -> Result<OpId, ClientError> {
        if let Some(encoded) = self.body().hinted(table, key) {
            return self.queue(OperationKind::Read, lock, table, |_| Ok((encoded, None)));
        }
        self.queue(OperationKind::Read, lock, table, |bytes| {
            let key_start = bytes.len();
            table.encode_key(key, bytes)?;
            Ok((key_start..bytes.len(), None))
        })
    }

    /// As [`Transaction::read`], but a missing row is not an error: after
    /// execute, [`Transaction::get`] returns `None` for it and the
    /// transaction goes on (a locking scan locks the rows it saw this way,
    /// some of which may be gone).
    pub fn read_if_exists(
        &mut self,
        table: &Arc<Table>,
        key: &[Value],
        lock: LockMode,
    ) -> Result<OpId, ClientError> {
        let op = self.read(table, key, lock)?;
        let queued = self.body_mut().queued.last_mut().expect("queued just now");
        queued.flags = tc_key_flags::IGNORE_MISSING;
        Ok(op)
    }

    /// As [`Transaction::read_if_exists`], and with what a row another
    /// transaction holds locked does to a locking read: wait for it (`Wait`), fail the transaction at
    /// once with `LockNotAvailable` (`NoWait`, SQL's NOWAIT), or return no
    /// row, the transaction going on (`SkipLocked`, SQL's SKIP LOCKED).
    pub fn read_locking(
        &mut self,
        table: &Arc<Table>,
        key: &[Value],
        lock: LockMode,
        wait: LockWait,
    ) -> Result<OpId, ClientError> {
        if wait != LockWait::Wait && lock == LockMode::CommittedRead {
            return Err(ClientError::Invalid {
                code: ErrorCode::BadRequest,
                detail: "NoWait and SkipLocked are for locking reads".into(),
            });
        }
        let op = self.read_if_exists(table, key, lock)?;
        let queued = self.body_mut().queued.last_mut().expect("queued just now");
        queued.flags |= match wait {
            LockWait::Wait => 0,
            LockWait::NoWait => tc_key_flags::NO_WAIT,
            LockWait::SkipLocked => tc_key_flags::SKIP_LOCKED,
        };
        Ok(op)
    }

    /// The row a read operation returned, once executed.
    ///
    /// ```no_run
    /// # let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// let transaction = cluster.transaction();
    /// assert!(transaction.get(client::OpId::new(0)).is_none());
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn get(&self, op: OpId) -> Option<&Row> {
        self.body().rows.get(op.0 as usize)?.as_ref()
    }

    /// The data node whose tc runs this transaction.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// assert!(cluster.data_nodes().contains(&cluster.transaction().node()));
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn node(&self) -> NodeId {
        self.link.node()
    }

    /// Sends the queued operations as one batch (committing with
    /// `Commit::Yes`) and waits for the outcome. On a refusal the
    /// transaction is aborted on the data node; the error names the code,
    /// its class and the failing operation.
    ///
    /// ```no_run
    /// # let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// # let table = cluster.table("t")?;
    /// let mut transaction = cluster.transaction();
    /// transaction.delete(&table, &[client::Value::UInt(1)])?;
    /// match transaction.execute(client::Commit::Yes) {
    ///     Ok(outcome) => println!("committed at {:?}", outcome.gci),
    ///     Err(error) if error.is_temporary() => println!("retry: {error}"),
    ///     Err(error) => return Err(error),
    /// }
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn execute(&mut self, commit: Commit) -> Result<Outcome, ClientError> {
        let inbox = self.own_inbox();
        let mut frames = std::mem::take(&mut self.body_mut().frames);
        frames.clear();
        let sent = match self.prepare(commit, &inbox, 0, &mut frames) {
            Err(error) => Err(error),
            Ok(Some(outcome)) => Ok(Some(outcome)),
            Ok(None) => match self.link.send_reporting(&mut frames) {
                Err(failure) => Err(self.send_failed(failure.error, failure.maybe_received)),
                Ok(()) => Ok(None),
            },
        };
        self.body_mut().frames = frames;
        match sent? {
            Some(outcome) => Ok(outcome),
            None => {
                self.sent();
                self.wait(&inbox)
            }
        }
    }

    /// Executes the queued operations, commits, and returns once the
    /// commit's GCI is durable: `execute(Commit::Durable)`. When the commit
    /// is confirmed but the wait for durability fails (its connection is
    /// lost, it times out, the data node refuses it), the error is
    /// [`ClientError::OutcomeUnknown`] with that failure as its cause: the
    /// transaction is `Committed` and [`Transaction::commit_gci`] names its
    /// GCI, but whether it outlives a crash is unknown, so it must not be
    /// retried blindly ([`Cluster::wait_durable`] asks again). A GCI that a
    /// restart rolled back is a definite answer: [`ClientError::RolledBack`].
    ///
    /// ```no_run
    /// # let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// # let table = cluster.table("t")?;
    /// use client::Value;
    /// let mut transaction = cluster.transaction();
    /// transaction.write(&table, &[("k", Value::UInt(1)), ("v", Value::from("one"))])?;
    /// let outcome = transaction.commit_durable()?;
    /// assert!(outcome.durable);
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn commit_durable(&mut self) -> Result<Outcome, ClientError> {
        self.execute(Commit::Durable)
    }

    fn own_inbox(&mut self) -> Arc<Inbox> {
        let inbox = self.body_mut().own_inbox.get_or_insert_with(Arc::default);
        // Late replies of an earlier batch must not be taken for this one's.
        inbox.clear();
        Arc::clone(inbox)
    }

    /// Waits on `inbox` (the transaction's own) until the request in
    /// flight is answered or the reply timeout passes (counted afresh for
    /// a durable commit's GCI wait).
    fn wait(&mut self, inbox: &Arc<Inbox>) -> Result<Outcome, ClientError> {
        let timeout = self.cluster.options().reply_timeout;
        let mut deadline = self.cluster.clock().now() + timeout;
        let mut replies = Replies::default();
        loop {
            if !inbox.take(self.cluster.clock(), &mut replies, Some(deadline)) {
                return Err(self.timed_out());
            }
            let Replies { list, row_bytes } = &mut replies;
            for Posted {
                transaction, reply, ..
            } in list.drain(..)
            {
                if transaction != self.id {
                    continue;
                }
                match self.on_reply(reply, row_bytes) {
                    Progress::Waiting => {}
                    Progress::Done(result) => return result,
                    Progress::SendDurableWait => {
                        self.send_durable_wait(inbox)?;
                        deadline = self.cluster.clock().now() + timeout;
                    }
                }
            }
            row_bytes.clear();
        }
    }

    /// The sync API's way to send a durable commit's GCI wait.
    fn send_durable_wait(&mut self, inbox: &Arc<Inbox>) -> Result<(), ClientError> {
        let mut frames = std::mem::take(&mut self.body_mut().frames);
        frames.clear();
        let connection = self.push_durable_wait(inbox, 0, |_| &mut frames);
        let sent = match connection {
            Ok(connection) => self
                .cluster
                .connection(connection)
                .send(&mut frames)
                .map_err(|error| self.send_failed(error, true)),
            Err(error) => Err(error),
        };
        self.body_mut().frames = frames;
        sent
    }

    /// Registers the transaction's replies to go to `inbox`, posted with
    /// `tag` (see `dispatch::Posted`).
    fn register(&mut self, inbox: &Arc<Inbox>, tag: u32) -> Result<(), ClientError> {
        if self
            .registered
            .as_ref()
            .is_some_and(|(registered, registered_tag)| {
                Arc::ptr_eq(registered, inbox) && *registered_tag == tag
            })
        {
            return Ok(());
        }
        let connection = &self.link;
        connection
            .dispatch
            .register_transaction(self.id, inbox, tag)
            .map_err(|reason| connection.lost(reason))?;
        self.registered = Some((Arc::clone(inbox), tag));
        Ok(())
    }

    fn unregister(&mut self) {
        if self.registered.take().is_some() {
            self.link.dispatch.unregister_transaction(self.id);
        }
    }

    /// Forgets the queued operations (sent, or given up).
    fn clear_queue(&mut self) {
        let body = self.body_mut();
        body.queued.clear();
        body.clear_bytes();
        body.clear_arrived();
    }

    /// Readies an execute: registers the replies to go to `inbox` (posted
    /// with `tag`, see `dispatch::Posted`) and
    /// appends the batch's signals to `frames` (all of them or, on an
    /// error, none). `Ok(Some(..))`: nothing needs sending, this is the
    /// outcome. The queued operations are dropped on an error.
    pub(crate) fn prepare(
        &mut self,
        commit: Commit,
        inbox: &Arc<Inbox>,
        tag: u32,
        frames: &mut FrameBuilder,
    ) -> Result<Option<Outcome>, ClientError> {
        self.check_open()?;
        if self.body().batch.is_some() {
            return Err(ClientError::Usage(
                "the transaction is already executing".into(),
            ));
        }
        let committing = commit != Commit::No;
        let durable = commit == Commit::Durable;
        if self.body().queued.is_empty() {
            match (commit, self.state) {
                (Commit::No, _) => return Ok(Some(not_committed())),
                (_, TransactionState::Idle) => {
                    // Nothing was ever sent: there is nothing to commit,
                    // and nothing to make durable.
                    self.state = TransactionState::Committed;
                    return Ok(Some(Outcome {
                        committed: true,
                        gci: None,
                        durable,
                    }));
                }
                _ => {}
            }
        }
        let checkpoint = frames.checkpoint();
        let prepared = self
            .register(inbox, tag)
            .and_then(|()| self.build_batch(committing, frames));
        if let Err(error) = prepared {
            // Nothing of the batch is sent: the state is unchanged.
            frames.restore(checkpoint);
            self.clear_queue();
            return Err(error);
        }
        let body = self.body_mut();
        body.clear_arrived();
        let expected = body.queued.len() as u32;
        self.body_mut().batch = Some(Batch::new(BatchKind::Operations {
            committing,
            durable,
            expected,
        }));
        Ok(None)
    }

    /// Queues the GCI wait of a durable commit (after
    /// [`Progress::SendDurableWait`]) on the frames `frames_of` gives for
    /// the chosen connection: the transaction's own tc while its
    /// connection is up, else another connected node's. Returns the
    /// connection; on an error the request is over (the transaction stays
    /// Committed) and the error is its result.
    pub(crate) fn push_durable_wait<'f>(
        &mut self,
        inbox: &Arc<Inbox>,
        tag: u32,
        frames_of: impl FnOnce(usize) -> &'f mut FrameBuilder,
    ) -> Result<usize, ClientError> {
        let gci = match &self.body().batch {
            Some(Batch {
                kind:
                    BatchKind::DurableWait {
                        outcome: Outcome { gci: Some(gci), .. },
                        wait: None,
                    },
                ..
            }) => *gci,
            _ => {
                return Err(ClientError::Usage(
                    "no durable commit waiting to ask for its GCI".into(),
                ))
            }
        };
        let queued = self
            .cluster
            .durable_wait_tc((self.connection, self.tc_instance))
            .and_then(|tc| {
                let frames = frames_of(tc.0);
                DurableWait::prepare(self.cluster, gci, tc, self.id, inbox, tag, frames)
            });
        match queued {
            Ok(queued) => {
                // The batch checked above: nothing since has changed it.
                if let Some(Batch {
                    kind: BatchKind::DurableWait { wait, .. },
                    ..
                }) = &mut self.body_mut().batch
                {
                    *wait = Some(queued);
                }
                Ok(queued.connection)
            }
            Err(error) => {
                self.body_mut().batch = None;
                Err(durability_unknown(error))
            }
        }
    }

    /// Gives up a durable commit's GCI wait in flight, if any (its answer
    /// becomes a stray). Returns whether the request in flight was one.
    fn cancel_durable_wait(&mut self) -> bool {
        match self.body().batch {
            Some(Batch {
                kind: BatchKind::DurableWait { wait, .. },
                ..
            }) => {
                if let Some(wait) = wait {
                    wait.cancel(self.cluster);
                }
                self.body_mut().batch = None;
                true
            }
            _ => false,
        }
    }

    /// The prepared request was written to the data node.
    pub(crate) fn sent(&mut self) {
        self.cluster().count_execute();
        if let Some(Batch {
            kind: BatchKind::Operations { .. },
            ..
        }) = self.body().batch
        {
            self.state = TransactionState::Active;
        }
    }

    /// Writing the prepared request failed with `error` (a lost
    /// connection); `maybe_received`: the write was attempted, so the node
    /// may have received part of it. A committing batch may then have
    /// been applied: its outcome is unknown. Otherwise the connection was
    /// lost before anything went out, and the node aborts the
    /// transaction, so the error stays what it is (temporary). For a
    /// durable commit's GCI wait, only the durability is unknown.
    pub(crate) fn send_failed(&mut self, error: ClientError, maybe_received: bool) -> ClientError {
        if self.cancel_durable_wait() {
            return durability_unknown(error);
        }
        let committing = matches!(
            self.body().batch,
            Some(Batch {
                kind: BatchKind::Operations {
                    committing: true,
                    ..
                },
                ..
            })
        );
        self.state = TransactionState::Unknown;
        self.body_mut().batch = None;
        self.unregister();
        self.clear_queue();
        if committing && maybe_received && self.body().wrote {
            ClientError::OutcomeUnknown {
                cause: Box::new(error),
            }
        } else {
            error
        }
    }

    /// No reply within the reply timeout: the outcome is unknown (for a
    /// durable commit's GCI wait: only its durability is).
    pub(crate) fn timed_out(&mut self) -> ClientError {
        if self.cancel_durable_wait() {
            return durability_unknown(ClientError::Timeout {
                what: "a wait for a durable GCI",
                waited: self.cluster.options().reply_timeout,
            });
        }
        let kind = self.body_mut().batch.take().map(|batch| batch.kind);
        let what = match kind {
            Some(BatchKind::Rollback) => "a rollback",
            Some(BatchKind::Operations {
                committing: true, ..
            }) => "a commit",
            _ => "a transaction batch",
        };
        self.state = TransactionState::Unknown;
        self.unregister();
        self.clear_queue();
        let timeout = ClientError::Timeout {
            what,
            waited: self.cluster.options().reply_timeout,
        };
        if what == "a commit" && self.body().wrote {
            ClientError::OutcomeUnknown {
                cause: Box::new(timeout),
            }
        } else {
            timeout
        }
    }

    fn build_batch(&self, committing: bool, frames: &mut FrameBuilder) -> Result<(), ClientError> {
        let connection = &self.link;
        let Body { queued, bytes, .. } = self.body();
        if queued.is_empty() {
            let signal: Signal = TcCommitReq {
                transaction_id: self.id,
            }
            .into();
            return frames.push(&connection.envelope(BlockKind::Tc, self.tc_instance, signal));
        }
        let last = queued.len() - 1;
        for (index, op) in queued.iter().enumerate() {
            let mut flags = op.flags;
            if index == 0 && self.state == TransactionState::Idle {
                flags |= tc_key_flags::START;
            }
            if index == last {
                flags |= tc_key_flags::EXECUTE;
                if committing {
                    flags |= tc_key_flags::COMMIT;
                }
            }
            let attr = match &op.attr {
                Some(range) => Some(section_from(&bytes[range.clone()])?),
                None => None,
            };
            let named = op.through.as_ref().unwrap_or(&op.table).def();
            let signal: Signal = TcKeyReq {
                transaction_id: self.id,
                client_op: op.op.0,
                flags,
                kind: op.kind,
                lock: op.lock,
                table_id: named.id,
                table_version: named.version,
                key: section_from(&bytes[op.key.clone()])?,
                attr,
            }
            .into();
            // Encoded (copied into the frame) at once, so the sections go
            // back to the pool before the next operation takes its own.
            frames.push(&connection.envelope(BlockKind::Tc, self.tc_instance, signal))?;
        }
        Ok(())
    }

    /// Applies one reply to the request in flight; `row_bytes` holds the
    /// data of a `Reply::Row` (the [`Replies`] it was taken with).
    pub(crate) fn on_reply(&mut self, reply: Reply, row_bytes: &[u8]) -> Progress {
        let cluster = self.cluster;
        let Some(batch) = self.body_mut().batch.as_mut() else {
            return Progress::Waiting;
        };
        if let BatchKind::DurableWait { outcome, wait } = batch.kind {
            return self.on_durable_reply(outcome, wait, reply);
        }
        let rollback = batch.kind == BatchKind::Rollback;
        let committing = matches!(
            batch.kind,
            BatchKind::Operations {
                committing: true,
                ..
            }
        );
        match reply {
            Reply::Row { client_op, data } => {
                // Only an operations batch stores rows (when it is
                // confirmed); a rollback has none to read.
                if !rollback {
                    self.row_arrived(client_op, &row_bytes[data]);
                }
                Progress::Waiting
            }
            Reply::Conf {
                operations,
                committed,
                gci,
                map_version,
            } => {
                cluster.observe_map_version(map_version);
                batch.confirmed = batch.confirmed.saturating_add(operations);
                if committed {
                    batch.committed = true;
                    batch.gci = gci;
                }
                let (done, durable) = match batch.kind {
                    BatchKind::Operations {
                        committing,
                        durable,
                        expected,
                    } => (
                        batch.committed || (!committing && batch.confirmed >= expected),
                        durable && batch.committed,
                    ),
                    BatchKind::Rollback | BatchKind::DurableWait { .. } => (false, false),
                };
                if !done {
                    return Progress::Waiting;
                }
                match self.finish() {
                    Ok(outcome) if durable => self.await_durable(outcome),
                    result => Progress::Done(result),
                }
            }
            // Only a durable commit's GCI wait is answered this way.
            Reply::Durable { .. } | Reply::DurableRefused { .. } => Progress::Waiting,
            // Both end the transaction at the tc: the dispatch has already
            // dropped the registration.
            Reply::Refused {
                client_op,
                error,
                index_id,
            } => {
                self.registered = None;
                self.body_mut().batch = None;
                self.state = TransactionState::Aborted;
                let result = if rollback {
                    // The tc holds nothing of the transaction (it already
                    // aborted it): rolled back all the same.
                    Ok(not_committed())
                } else {
                    Err(self.refusal(client_op, error, index_id))
                };
                self.clear_queue();
                Progress::Done(result)
            }
            Reply::RolledBack => {
                self.registered = None;
                self.body_mut().batch = None;
                self.state = TransactionState::Aborted;
                self.clear_queue();
                Progress::Done(if rollback {
                    Ok(not_committed())
                } else {
                    Err(ClientError::Operation {
                        code: ErrorCode::TransactionAborted,
                        op: None,
                        table: None,
                    })
                })
            }
            Reply::Lost(reason) => {
                self.registered = None;
                self.body_mut().batch = None;
                // A data node aborts the transactions of an API node whose
                // connection ended: a rollback's outcome is known.
                self.state = if rollback {
                    TransactionState::Aborted
                } else {
                    TransactionState::Unknown
                };
                self.clear_queue();
                let lost = self.link.lost(reason);
                Progress::Done(Err(if committing && self.body().wrote {
                    ClientError::OutcomeUnknown {
                        cause: Box::new(lost),
                    }
                } else {
                    lost
                }))
            }
        }
    }

    /// A durable commit is confirmed with `outcome`: answer at once if it
    /// wrote nothing, else wait for its GCI.
    fn await_durable(&mut self, outcome: Outcome) -> Progress {
        if outcome.gci.is_none() {
            return Progress::Done(Ok(Outcome {
                durable: true,
                ..outcome
            }));
        }
        self.body_mut().batch = Some(Batch::new(BatchKind::DurableWait {
            outcome,
            wait: None,
        }));
        Progress::SendDurableWait
    }

    /// A reply while a durable commit waits for its GCI.
    fn on_durable_reply(
        &mut self,
        outcome: Outcome,
        wait: Option<DurableWait>,
        reply: Reply,
    ) -> Progress {
        let Some(wait) = wait else {
            // Not sent yet: nothing can answer it.
            return Progress::Waiting;
        };
        match wait.answer(reply) {
            WaitAnswer::Durable(_) => {
                self.body_mut().batch = None;
                Progress::Done(Ok(Outcome {
                    durable: true,
                    ..outcome
                }))
            }
            WaitAnswer::Failed(error) => {
                self.body_mut().batch = None;
                Progress::Done(Err(durability_unknown(error)))
            }
            WaitAnswer::Lost => {
                // Any tc can answer: ask again where a connection is up.
                self.body_mut().batch = Some(Batch::new(BatchKind::DurableWait {
                    outcome,
                    wait: None,
                }));
                Progress::SendDurableWait
            }
            WaitAnswer::Other => Progress::Waiting,
        }
    }

    /// The batch is confirmed (and committed, if so).
    fn finish(&mut self) -> Result<Outcome, ClientError> {
        let Some(batch) = self.body_mut().batch.take() else {
            return Err(ClientError::Usage("no batch in flight".into()));
        };
        let committed = batch.committed;
        if committed && batch.gci.0 != 0 {
            self.body_mut().commit_gci = Some(batch.gci);
        }
        self.state = if committed {
            // A committing TCKEYCONF ends the registration in the dispatch.
            self.registered = None;
            TransactionState::Committed
        } else {
            TransactionState::Active
        };
        let decoded = self.store_rows();
        if decoded.is_err() && !committed {
            self.state = TransactionState::Unknown;
        }
        self.clear_queue();
        decoded?;
        Ok(Outcome {
            committed,
            gci: (committed && batch.gci.0 != 0).then_some(batch.gci),
            durable: false,
        })
    }

    /// Decodes the row data of a read of the batch in flight into
    /// [`Body::arrived`]; after an error, later rows are ignored (the
    /// batch fails with that error when it is confirmed).
    fn row_arrived(&mut self, client_op: u32, data: &[u8]) {
        let body = self.body_mut();
        if body.row_error.is_some() {
            return;
        }
        let first = body.queued.first().map_or(u32::MAX, |op| op.op.0);
        let read = client_op
            .checked_sub(first)
            .and_then(|index| body.queued.get(index as usize))
            .filter(|op| op.kind == OperationKind::Read);
        let Some(read) = read else {
            body.row_error = Some(ClientError::Protocol(format!(
                "row data for operation {client_op}, which is not a read of this batch"
            )));
            return;
        };
        let storage = body.spare_rows.pop().unwrap_or_default();
        match Table::decode_row_into(&read.table, data, storage) {
            Ok(row) => body.arrived.push((client_op, row)),
            Err(error) => body.row_error = Some(error),
        }
    }

    /// Stores the batch's rows by operation number (those that arrived
    /// before an error, if one did: the error is the result).
    fn store_rows(&mut self) -> Result<(), ClientError> {
        let body = self.body_mut();
        for (client_op, row) in body.arrived.drain(..) {
            let index = client_op as usize;
            // Operations are numbered from 0 in order: usually the next one.
            if index >= body.rows.len() {
                body.rows.resize_with(index, || None);
                body.rows.push(Some(row));
            } else if let Some(replaced) = body.rows[index].replace(row) {
                spare_row(&mut body.spare_rows, replaced);
            }
        }
        match body.row_error.take() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// The value `op` would have repeated in the primary key (`index_id`
    /// 0) or in unique index `index_id`, one per column of the key, read
    /// back from the request's own sections; empty when the request did
    /// not carry every column of the key (a unique column it left alone
    /// reads NULL here, and NULLs are never duplicates).
    fn repeated_entry(&self, op: &QueuedOp, index_id: u32) -> Vec<Value> {
        let bytes = &self.body().bytes;
        let def = op.table.def();
        let (columns, section) = if index_id == 0 {
            (&def.primary_key, Some(op.key.clone()))
        } else {
            match def.indexes.iter().find(|index| index.id == index_id) {
                Some(index) => (&index.columns, op.attr.clone()),
                None => return Vec::new(),
            }
        };
        let Some(row) = section
            .and_then(|range| bytes.get(range))
            .and_then(|data| Table::decode_row(&op.table, data).ok())
        else {
            return Vec::new();
        };
        let entry: Vec<Value> = columns
            .iter()
            .map(|&column| row.decode_value(column as usize))
            .collect();
        if entry.contains(&Value::Null) {
            return Vec::new();
        }
        entry
    }

    /// The error for a TCKEYREF; drops cached definitions it proves stale.
    fn refusal(&self, client_op: u32, error: ErrorCode, index_id: u32) -> ClientError {
        let queued = &self.body().queued;
        let failed = queued.iter().find(|op| op.op.0 == client_op);
        if error == ErrorCode::DuplicateKey {
            let index = (index_id != 0).then(|| {
                failed
                    .and_then(|op| op.table.def().indexes.iter().find(|i| i.id == index_id))
                    .map_or_else(|| format!("#{index_id}"), |index| index.name.clone())
            });
            return ClientError::DuplicateKey {
                index,
                entry: failed.map_or_else(Vec::new, |op| self.repeated_entry(op, index_id)),
                op: failed.map(|op| op.op),
                table: failed.map(|op| op.table.name().to_string()),
            };
        }
        if matches!(
            error,
            ErrorCode::SchemaVersionMismatch | ErrorCode::UnknownTable
        ) {
            match failed {
                Some(op) => self.cluster.invalidate_stale_table(&op.table),
                None => {
                    for op in queued {
                        self.cluster.invalidate_stale_table(&op.table);
                    }
                }
            }
        }
        ClientError::Operation {
            code: error,
            op: failed.map(|op| op.op),
            table: failed.map(|op| op.table.name().to_string()),
        }
    }

    fn rollback_envelope(&self) -> signal::Envelope {
        let signal: Signal = TcRollbackReq {
            transaction_id: self.id,
        }
        .into();
        self.link.envelope(BlockKind::Tc, self.tc_instance, signal)
    }

    /// Aborts the transaction, dropping queued operations and releasing
    /// every lock it holds, and waits for the data node to confirm.
    ///
    /// ```no_run
    /// # let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// # let table = cluster.table("t")?;
    /// let mut transaction = cluster.transaction();
    /// transaction.delete(&table, &[client::Value::UInt(1)])?;
    /// transaction.execute(client::Commit::No)?;
    /// transaction.rollback()?;
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn rollback(&mut self) -> Result<(), ClientError> {
        self.clear_queue();
        match self.state {
            TransactionState::Idle | TransactionState::Aborted => {
                self.state = TransactionState::Aborted;
                return Ok(());
            }
            TransactionState::Committed => {
                return Err(ClientError::Usage(
                    "the transaction is already committed and cannot be rolled back".into(),
                ))
            }
            TransactionState::Active | TransactionState::Unknown => {}
        }
        if self.body().batch.is_some() {
            return Err(ClientError::Usage(
                "the transaction is executing in a session; wait for its completion".into(),
            ));
        }
        let inbox = self.own_inbox();
        self.register(&inbox, 0)?;
        let mut frames = std::mem::take(&mut self.body_mut().frames);
        frames.clear();
        let envelope = self.rollback_envelope();
        let result = frames
            .push(&envelope)
            .and_then(|()| self.link.send(&mut frames));
        self.body_mut().frames = frames;
        if let Err(error) = result {
            // Nothing committing was in it: the transaction is aborted
            // either way (the node aborts a lost API node's transactions).
            return Err(self.send_failed(error, false));
        }
        self.body_mut().batch = Some(Batch::new(BatchKind::Rollback));
        self.wait(&inbox).map(|_| ())
    }
}

fn not_committed() -> Outcome {
    Outcome {
        committed: false,
        gci: None,
        durable: false,
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        self.cancel_durable_wait();
        self.unregister();
        let Some(mut body) = self.body.take() else {
            return;
        };
        if matches!(
            self.state,
            TransactionState::Active | TransactionState::Unknown
        ) {
            // Best effort, no wait: the answer arrives as a stray reply.
            let frames = &mut body.frames;
            frames.clear();
            let envelope = self.rollback_envelope();
            if frames.push(&envelope).is_ok() {
                let _ = self.link.send(frames);
            }
        }
        body.recycle();
    }
}

/// The error a durable commit returns when its commit was confirmed but
/// the wait for its GCI failed with `error`: the transaction is committed,
/// whether it outlives a crash is unknown, and a blind retry would apply
/// it twice, so the outcome is unknown, with `error` as the cause. A GCI
/// rolled back by a restart is a definite answer (the commit is lost) and
/// stays as it is.
fn durability_unknown(error: ClientError) -> ClientError {
    match error {
        ClientError::RolledBack { .. } | ClientError::OutcomeUnknown { .. } => error,
        cause => ClientError::OutcomeUnknown {
            cause: Box::new(cause),
        },
    }
}
