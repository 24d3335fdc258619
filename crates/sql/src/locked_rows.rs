//! The rows an open transaction holds locked, as it last saw or wrote
//! them (docs/design/0034-fewer-round-trips.md, "Locked rows").
//!
//! A row read with an exclusive lock (`SELECT ... FOR UPDATE`, or the
//! read of an UPDATE) cannot change under its holder until the holder's
//! transaction ends: no other transaction can write it. Its image is
//! therefore still the row when a later statement of the same
//! transaction updates or deletes it by primary key, and that statement
//! needs no read of its own: one round trip (the write) instead of two,
//! the pattern of every read-modify-write transaction (TPC-C's New-Order
//! and Payment, a queue's head). A committed read of the row by its key
//! takes the image as well: no round trip at all.
//!
//! The images belong to one transaction (by its id): a new transaction
//! finds none. This transaction's own writes keep them true: an UPDATE
//! by this session stores the new image, a DELETE or a key change drops
//! it, and any other write of a table (INSERT, REPLACE, upserts) drops
//! every image of that table.
//!
//! Such a write cannot fail on the data (the row is there, held, and the
//! new values already fit their columns), so it need not run at once: it
//! waits in the transaction (`defer`) and goes to the data nodes with the
//! transaction's next round trip, the next statement's read or the
//! commit, as NDB's SQL node batches writes. Its keys are remembered
//! until then: an operation on one of them (an INSERT of the key
//! included), or a scan or upsert of the table, first sends what waits
//! (`settle_key`, `settle_table`), so one batch never holds two
//! operations on one row. A session with `transaction_allow_batching`
//! lets its plain INSERTs wait the same way.

use crate::catalog::SqlTable;
use crate::error::{SqlError, SqlResult};
use crate::types::{self, SqlType};
use crate::value::Value;
use client::{OpId, Transaction, TransactionId, TransactionState};
use foldhash::{HashMap, HashSet};

/// At most this many images per transaction: past it, rows are read
/// again (a transaction locking more is a bulk one, where a read per
/// row is not the cost that matters).
const MOST_ROWS: usize = 4096;

/// (table id, table version, the encoded primary key).
type RowKey = (u32, u32, Vec<u8>);

fn without_trailing_spaces(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().rposition(|b| *b != b' ').map_or(0, |i| i + 1);
    &bytes[..end]
}

/// `row` as a read of it would give it back: CHAR loses its trailing
/// spaces in the cluster (MySQL's CHAR does on retrieval), so an image
/// made from the values an UPDATE wrote must lose them too.
fn as_stored(table: &SqlTable, row: &[Value]) -> Vec<Value> {
    row.iter()
        .zip(&table.columns)
        .map(|(value, column)| match (value, &column.sql_type) {
            (Value::Bytes(bytes), SqlType::Char(_)) => {
                Value::Bytes(without_trailing_spaces(bytes).to_vec())
            }
            (value, _) => value.clone(),
        })
        .collect()
}

/// The images of one transaction's locked rows.
#[derive(Default)]
pub struct LockedRows {
    /// The transaction, and the session time zone the images were
    /// loaded in (a TIMESTAMP's value depends on it).
    owner: Option<(TransactionId, i64)>,
    rows: HashMap<RowKey, Vec<Value>>,
    /// The rows whose writes wait queued in a transaction, the
    /// transaction's id and the first operation of that queue: once the
    /// queue is sent (by whatever runs it: a read's round trip, a
    /// subquery's flush), the transaction's queue starts with another
    /// operation or is empty, and the rows noted no longer wait.
    deferred: Option<(TransactionId, OpId)>,
    waiting: HashSet<RowKey>,
    /// The cluster names of the tables those rows are of, so an error
    /// their round trip brings can name its table.
    waiting_tables: Vec<String>,
}

impl LockedRows {
    /// The images, emptied first when they were another transaction's
    /// or loaded in another time zone (`zone`, seconds east of UTC).
    /// `None` when `transaction` holds nothing to remember.
    fn of(
        &mut self,
        transaction: &Transaction<'_>,
        zone: i64,
    ) -> Option<&mut HashMap<RowKey, Vec<Value>>> {
        if transaction.state() != TransactionState::Active {
            return None;
        }
        let owner = Some((transaction.id(), zone));
        if self.owner != owner {
            self.rows.clear();
            self.owner = owner;
        }
        Some(&mut self.rows)
    }

    /// The key as the cluster compares it (`types::canonical_key_value`),
    /// so `'a'` and `'a '`, or -0 and 0, name one row here as they do
    /// there.
    fn key(table: &SqlTable, key: &[client::Value]) -> Option<RowKey> {
        // Numbers other than a float's zero are their own canonical form:
        // a key of them (every TPC-C key) is encoded as it is.
        let canonical_already = key
            .iter()
            .all(|value| !matches!(value, client::Value::Bytes(_) | client::Value::Double(_)));
        let canonical: Vec<client::Value>;
        let canonical = match canonical_already {
            true => key,
            false => {
                canonical = key
                    .iter()
                    .zip(&table.def().primary_key)
                    .map(|(value, column)| {
                        let sql_type = &table.columns[*column as usize].sql_type;
                        types::canonical_key_value(value.clone(), sql_type)
                    })
                    .collect();
                &canonical
            }
        };
        let mut bytes = Vec::new();
        table.table.encode_key(canonical, &mut bytes).ok()?;
        let def = table.def();
        Some((def.id, def.version, bytes))
    }

    /// Remembers `row` (every column, loaded in time zone `zone`) of
    /// `table`, whose primary key is `key`, as `transaction` holds it
    /// locked.
    pub fn remember(
        &mut self,
        transaction: &Transaction<'_>,
        zone: i64,
        table: &SqlTable,
        key: &[client::Value],
        row: &[Value],
    ) {
        let Some(key) = Self::key(table, key) else {
            return;
        };
        let Some(rows) = self.of(transaction, zone) else {
            return;
        };
        if rows.len() < MOST_ROWS || rows.contains_key(&key) {
            rows.insert(key, as_stored(table, row));
        }
    }

    /// The image of the row of `table` with primary key `key`, loaded in
    /// time zone `zone`, if `transaction` holds it locked and remembered
    /// it.
    pub fn get(
        &mut self,
        transaction: &Transaction<'_>,
        zone: i64,
        table: &SqlTable,
        key: &[client::Value],
    ) -> Option<Vec<Value>> {
        let key = Self::key(table, key)?;
        self.of(transaction, zone)?.get(&key).cloned()
    }

    /// Forgets the row of `table` with primary key `key` (deleted, or
    /// moved to another key).
    pub fn forget(&mut self, table: &SqlTable, key: &[client::Value]) {
        if let Some(key) = Self::key(table, key) {
            self.rows.remove(&key);
        }
    }

    /// Notes that the write of the row of `table` with primary key `key`
    /// waits in `transaction`: queued there (before this call) and not
    /// executed.
    pub fn defer(
        &mut self,
        transaction: &Transaction<'_>,
        table: &SqlTable,
        key: &[client::Value],
    ) {
        let Some(key) = Self::key(table, key) else {
            return;
        };
        // Callers queue the write first; with nothing queued, nothing
        // waits to be noted.
        let Some(first) = transaction.first_pending_operation() else {
            return;
        };
        let queue = Some((transaction.id(), first));
        if self.deferred != queue {
            self.clear_waiting();
            self.deferred = queue;
        }
        self.waiting.insert(key);
        let name = table.cluster_name();
        if !self.waiting_tables.contains(&name) {
            self.waiting_tables.push(name);
        }
    }

    /// The rows whose writes still wait in `transaction`: none once
    /// anything executed the queue they were noted in.
    fn waiting(&mut self, transaction: &Transaction<'_>) -> &HashSet<RowKey> {
        let queue = transaction
            .first_pending_operation()
            .map(|first| (transaction.id(), first));
        if self.deferred != queue {
            self.clear_waiting();
        }
        &self.waiting
    }

    fn clear_waiting(&mut self) {
        self.waiting.clear();
        self.waiting_tables.clear();
        self.deferred = None;
    }

    /// The cluster name of the table whose writes wait in `transaction`,
    /// when they are all of one table: the table an error of the round
    /// trip that carries them (a COMMIT's) is about.
    pub fn waiting_table(&mut self, transaction: &Transaction<'_>) -> Option<String> {
        self.waiting(transaction);
        match self.waiting_tables.as_slice() {
            [name] => Some(name.clone()),
            _ => None,
        }
    }

    /// Sends the writes waiting in `transaction` when one of them is of
    /// the row of `table` with primary key `key`, before an operation on
    /// it joins the queue. Whether it sent them.
    pub fn settle_key(
        &mut self,
        transaction: &mut Transaction<'static>,
        table: &SqlTable,
        key: &[client::Value],
    ) -> SqlResult<bool> {
        let Some(key) = Self::key(table, key) else {
            return Ok(false);
        };
        match self.waiting(transaction).contains(&key) {
            true => self.send(transaction, table).map(|()| true),
            false => Ok(false),
        }
    }

    /// Sends the writes waiting in `transaction` when any is of a row of
    /// `table`, before a scan or an upsert of it (or an insert, when the
    /// table has a unique index).
    pub fn settle_table(
        &mut self,
        transaction: &mut Transaction<'static>,
        table: &SqlTable,
    ) -> SqlResult<()> {
        let def = table.def();
        let waits = self
            .waiting(transaction)
            .iter()
            .any(|(id, version, _)| (*id, *version) == (def.id, def.version));
        match waits {
            true => self.send(transaction, table),
            false => Ok(()),
        }
    }

    fn send(&mut self, transaction: &mut Transaction<'static>, table: &SqlTable) -> SqlResult<()> {
        let name = self
            .waiting_table(transaction)
            .unwrap_or_else(|| table.cluster_name());
        self.clear_waiting();
        transaction
            .execute(client::Commit::No)
            .map(|_| ())
            .map_err(|error| SqlError::from_client(&error, &name))
    }

    /// Forgets every row of `table` (written by a statement that keeps
    /// no images).
    pub fn forget_table(&mut self, table: &SqlTable) {
        let def = table.def();
        self.rows
            .retain(|(id, version, _), _| (*id, *version) != (def.id, def.version));
    }
}
