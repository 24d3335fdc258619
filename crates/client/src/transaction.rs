//! Transactions, the sync API: operations are queued (`insert`, `read`,
//! ...) and sent together by `execute`, one frame of TCKEYREQs for the whole
//! batch, then the caller waits for the batch's replies.
//!
//! ```text
//!            execute(No)            execute(Yes) / TCKEYCONF committed
//!  Idle ───────────────> Active ──────────────────────────────> Committed
//!    │                     │ TCKEYREF, rollback()
//!    │ rollback()          └──────────────────────────────────> Aborted
//!    └───────────────────────────────────────────────────────> Aborted
//!  any send or wait failure (connection lost, timeout) ──────> Unknown
//! ```
//! Dropping an Active or Unknown transaction sends TCROLLBACKREQ without
//! waiting, so a forgotten transaction does not hold locks until the data
//! node's inactivity timeout.

use crate::cluster::{section_from, Cluster};
use crate::connection::FrameBuilder;
use crate::dispatch::{BatchEnd, TransactionSlot};
use crate::error::ClientError;
use crate::table::{ColumnSelector, Row, Table};
use crate::value::Value;
use signal::signals::{
    tc_key_flags, LockMode, OperationKind, TcCommitReq, TcKeyReq, TcRollbackReq,
};
use signal::{BlockKind, ErrorCode, Gci, Signal, TransactionId};
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

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

/// Whether `execute` also commits.
///
/// ```
/// assert_ne!(client::Commit::Yes, client::Commit::No);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Commit {
    /// Execute the batch; the transaction stays open, locks stay held.
    No,
    /// Execute the batch and commit the transaction.
    Yes,
}

/// What an `execute` achieved.
///
/// ```
/// let outcome = client::Outcome { committed: false, gci: None };
/// assert!(!outcome.committed);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Outcome {
    /// The transaction is committed.
    pub committed: bool,
    /// The commit's GCI, when committed and something was written.
    pub gci: Option<Gci>,
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
    table: Arc<Table>,
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
    tc_instance: u16,
    state: TransactionState,
    next_op: u32,
    queued: Vec<QueuedOp>,
    /// Key and attribute bytes of the queued operations.
    bytes: Vec<u8>,
    /// Rows read, indexed by operation number.
    rows: Vec<Option<Row>>,
    slot: Option<Arc<TransactionSlot>>,
    frames: FrameBuilder,
}

impl<'a> Transaction<'a> {
    pub(crate) fn new(
        cluster: &'a Cluster,
        id: TransactionId,
        connection: usize,
        tc_instance: u16,
    ) -> Transaction<'a> {
        Transaction {
            cluster,
            id,
            connection,
            tc_instance,
            state: TransactionState::Idle,
            next_op: 0,
            queued: Vec::new(),
            bytes: Vec::new(),
            rows: Vec::new(),
            slot: None,
            frames: FrameBuilder::default(),
        }
    }

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

    /// Operations queued and not yet executed.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// assert_eq!(cluster.transaction().pending_operations(), 0);
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn pending_operations(&self) -> usize {
        self.queued.len()
    }

    fn check_open(&self) -> Result<(), ClientError> {
        match self.state {
            TransactionState::Idle | TransactionState::Active => Ok(()),
            TransactionState::Committed => Err(ClientError::Usage(
                "the transaction is already committed; start a new one".into(),
            )),
            TransactionState::Aborted => Err(ClientError::Operation {
                code: ErrorCode::TransactionAborted,
                op: None,
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
        let start = self.bytes.len();
        let (key, attr) = match encode(&mut self.bytes) {
            Ok(ranges) => ranges,
            Err(error) => {
                self.bytes.truncate(start);
                return Err(error);
            }
        };
        let op = OpId(self.next_op);
        self.next_op += 1;
        self.queued.push(QueuedOp {
            op,
            kind,
            lock,
            table: Arc::clone(table),
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

    /// Queues an upsert of a whole row: insert, or overwrite every column.
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
        self.queue(OperationKind::Read, lock, table, |bytes| {
            let key_start = bytes.len();
            table.encode_key(key, bytes)?;
            Ok((key_start..bytes.len(), None))
        })
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
        self.rows.get(op.0 as usize)?.as_ref()
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
        self.check_open()?;
        let committing = commit == Commit::Yes;
        if self.queued.is_empty() {
            match (commit, self.state) {
                (Commit::No, _) => {
                    return Ok(Outcome {
                        committed: false,
                        gci: None,
                    })
                }
                (Commit::Yes, TransactionState::Idle) => {
                    // Nothing was ever sent: there is nothing to commit.
                    self.state = TransactionState::Committed;
                    return Ok(Outcome {
                        committed: true,
                        gci: None,
                    });
                }
                _ => {}
            }
        }
        let result = self.send_batch(committing);
        self.queued.clear();
        self.bytes.clear();
        result
    }

    fn slot(&mut self) -> Result<Arc<TransactionSlot>, ClientError> {
        if let Some(slot) = &self.slot {
            return Ok(Arc::clone(slot));
        }
        let connection = self.cluster.connection(self.connection);
        let slot = connection
            .dispatch
            .register_transaction(self.id)
            .map_err(|reason| connection.lost(reason))?;
        self.slot = Some(Arc::clone(&slot));
        Ok(slot)
    }

    fn release_slot(&mut self) {
        if self.slot.take().is_some() {
            self.cluster
                .connection(self.connection)
                .dispatch
                .unregister_transaction(self.id);
        }
    }

    fn build_batch(&mut self, committing: bool) -> Result<(), ClientError> {
        let connection = self.cluster.connection(self.connection);
        self.frames.clear();
        if self.queued.is_empty() {
            let signal: Signal = TcCommitReq {
                transaction_id: self.id,
            }
            .into();
            return self
                .frames
                .push(&connection.envelope(BlockKind::Tc, self.tc_instance, signal));
        }
        let last = self.queued.len() - 1;
        for (index, op) in self.queued.iter().enumerate() {
            let mut flags = 0;
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
                Some(range) => Some(section_from(&self.bytes[range.clone()])?),
                None => None,
            };
            let signal: Signal = TcKeyReq {
                transaction_id: self.id,
                client_op: op.op.0,
                flags,
                kind: op.kind,
                lock: op.lock,
                table_id: op.table.def().id,
                table_version: op.table.def().version,
                key: section_from(&self.bytes[op.key.clone()])?,
                attr,
            }
            .into();
            // Encoded (copied into the frame) at once, so the sections go
            // back to the pool before the next operation takes its own.
            self.frames
                .push(&connection.envelope(BlockKind::Tc, self.tc_instance, signal))?;
        }
        Ok(())
    }

    fn send_batch(&mut self, committing: bool) -> Result<Outcome, ClientError> {
        let slot = self.slot()?;
        // Nothing is sent if a section cannot be had: the state is unchanged.
        self.build_batch(committing)?;
        slot.lock().reset();
        let connection = self.cluster.connection(self.connection);
        if let Err(error) = connection.send(&mut self.frames) {
            self.state = TransactionState::Unknown;
            return Err(error);
        }
        self.state = TransactionState::Active;
        let expected = self.queued.len() as u32;
        let timeout = self.cluster.options().reply_timeout;
        let (mut progress, done) = slot.wait_until(Instant::now() + timeout, |progress| {
            progress.end.is_some()
                || progress.committed
                || (!committing && progress.confirmed_operations >= expected)
        });
        if !done {
            drop(progress);
            self.state = TransactionState::Unknown;
            return Err(ClientError::Timeout {
                what: "a transaction batch",
                waited: timeout,
            });
        }
        let rows = std::mem::take(&mut progress.rows);
        let end = progress.end.take();
        let committed = progress.committed;
        let gci = progress.gci;
        drop(progress);
        match end {
            Some(BatchEnd::Refused { client_op, error }) => {
                self.state = TransactionState::Aborted;
                self.release_slot();
                Err(self.refusal(client_op, error))
            }
            Some(BatchEnd::RolledBack) => {
                self.state = TransactionState::Aborted;
                self.release_slot();
                Err(ClientError::Operation {
                    code: ErrorCode::TransactionAborted,
                    op: None,
                })
            }
            Some(BatchEnd::Lost(reason)) => {
                self.state = TransactionState::Unknown;
                self.release_slot();
                Err(connection.lost(reason))
            }
            None => {
                self.state = if committed {
                    self.release_slot();
                    TransactionState::Committed
                } else {
                    TransactionState::Active
                };
                let decoded = self.store_rows(rows);
                if decoded.is_err() && !committed {
                    self.state = TransactionState::Unknown;
                }
                decoded?;
                Ok(Outcome {
                    committed,
                    gci: (committed && gci.0 != 0).then_some(gci),
                })
            }
        }
    }

    /// Decodes the batch's row data into `rows` by operation number.
    fn store_rows(&mut self, rows: Vec<(u32, Vec<u8>)>) -> Result<(), ClientError> {
        let first = self.queued.first().map_or(u32::MAX, |op| op.op.0);
        for (client_op, data) in rows {
            let op = client_op
                .checked_sub(first)
                .and_then(|index| self.queued.get(index as usize))
                .filter(|op| op.kind == OperationKind::Read)
                .ok_or_else(|| {
                    ClientError::Protocol(format!(
                        "row data for operation {client_op}, which is not a read of this batch"
                    ))
                })?;
            let row = Table::decode_row(&op.table, &data)?;
            let index = client_op as usize;
            if self.rows.len() <= index {
                self.rows.resize(index + 1, None);
            }
            self.rows[index] = Some(row);
        }
        Ok(())
    }

    /// The error for a TCKEYREF; drops cached definitions it proves stale.
    fn refusal(&self, client_op: u32, error: ErrorCode) -> ClientError {
        let failed = self.queued.iter().find(|op| op.op.0 == client_op);
        if matches!(
            error,
            ErrorCode::SchemaVersionMismatch | ErrorCode::UnknownTable
        ) {
            match failed {
                Some(op) => self.cluster.invalidate_stale_table(&op.table),
                None => {
                    for op in &self.queued {
                        self.cluster.invalidate_stale_table(&op.table);
                    }
                }
            }
        }
        ClientError::Operation {
            code: error,
            op: failed.map(|op| op.op),
        }
    }

    fn rollback_envelope(&self) -> signal::Envelope {
        let signal: Signal = TcRollbackReq {
            transaction_id: self.id,
        }
        .into();
        self.cluster
            .connection(self.connection)
            .envelope(BlockKind::Tc, self.tc_instance, signal)
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
        self.queued.clear();
        self.bytes.clear();
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
        let slot = self.slot()?;
        slot.lock().reset();
        self.frames.clear();
        let envelope = self.rollback_envelope();
        self.frames.push(&envelope)?;
        let connection = self.cluster.connection(self.connection);
        if let Err(error) = connection.send(&mut self.frames) {
            self.state = TransactionState::Unknown;
            return Err(error);
        }
        let timeout = self.cluster.options().reply_timeout;
        let (mut progress, done) =
            slot.wait_until(Instant::now() + timeout, |progress| progress.end.is_some());
        let end = progress.end.take();
        drop(progress);
        if !done {
            self.state = TransactionState::Unknown;
            return Err(ClientError::Timeout {
                what: "a rollback",
                waited: timeout,
            });
        }
        self.release_slot();
        self.state = TransactionState::Aborted;
        match end {
            // A refusal means the tc holds nothing of the transaction (it
            // already aborted it): rolled back all the same.
            Some(BatchEnd::RolledBack) | Some(BatchEnd::Refused { .. }) | None => Ok(()),
            // A data node aborts the transactions of an API node whose
            // connection ended.
            Some(BatchEnd::Lost(reason)) => Err(connection.lost(reason)),
        }
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if matches!(
            self.state,
            TransactionState::Active | TransactionState::Unknown
        ) {
            // Best effort, no wait: the answer arrives as a stray reply.
            self.release_slot();
            self.frames.clear();
            let envelope = self.rollback_envelope();
            if self.frames.push(&envelope).is_ok() {
                let _ = self
                    .cluster
                    .connection(self.connection)
                    .send(&mut self.frames);
            }
        }
        self.release_slot();
    }
}
