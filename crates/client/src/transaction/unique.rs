//! Reads by unique index (docs/design/0026-unique-indexes.md): one
//! operation the tc runs as two reads, the index's hidden row (which holds
//! the primary key), then the row itself, with the read's lock
//! (`tc_key_flags::THROUGH_UNIQUE_INDEX`): one round trip.

use super::{Commit, OpId, Transaction};
use crate::error::ClientError;
use crate::table::{Row, Table};
use crate::value::Value;
use signal::signals::{tc_key_flags, LockMode, OperationKind};
use std::sync::Arc;

impl Transaction<'_> {
    /// Queues a read of the row of `table` whose unique index `index` (by
    /// name) holds `values` (one per index column, in index order, none
    /// NULL); after execute, [`Transaction::get`] returns it, or `None`
    /// when no row holds them. With a lock, the index's entry is locked
    /// too, so the values cannot move to another row until the
    /// transaction ends; a committed read returns the row only if it
    /// still holds the values when read.
    ///
    /// ```no_run
    /// # let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// # let table = cluster.table("users")?;
    /// use signal::signals::LockMode;
    /// let mut transaction = cluster.transaction();
    /// let email = client::Value::from("ada@example.com");
    /// let op = transaction.read_unique(&table, "by_email", &[email], LockMode::Shared)?;
    /// transaction.execute(client::Commit::Yes)?;
    /// let row = transaction.get(op);
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn read_unique(
        &mut self,
        table: &Arc<Table>,
        index: &str,
        values: &[Value],
        lock: LockMode,
    ) -> Result<OpId, ClientError> {
        let hidden = Arc::clone(table.unique_index_table(index)?);
        let op = self.queue(OperationKind::Read, lock, table, |bytes| {
            let key_start = bytes.len();
            hidden.encode_key(values, bytes)?;
            Ok((key_start..bytes.len(), None))
        })?;
        let queued = self.body_mut().queued.last_mut().expect("queued just now");
        queued.flags = tc_key_flags::IGNORE_MISSING | tc_key_flags::THROUGH_UNIQUE_INDEX;
        queued.through = Some(hidden);
        Ok(op)
    }

    /// The row of `table` whose unique index `index` (by name) holds
    /// `values`, or `None`: [`Transaction::read_unique`], executed at once
    /// with the operations queued before it (without committing). A NULL
    /// among `values` matches no row (as SQL's `=`).
    ///
    /// ```no_run
    /// # let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// # let table = cluster.table("users")?;
    /// use signal::signals::LockMode;
    /// let mut transaction = cluster.transaction();
    /// let email = client::Value::from("ada@example.com");
    /// let row = transaction.read_by_unique_index(&table, "by_email", &[email], LockMode::Shared)?;
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn read_by_unique_index(
        &mut self,
        table: &Arc<Table>,
        index: &str,
        values: &[Value],
        lock: LockMode,
    ) -> Result<Option<Row>, ClientError> {
        if values.iter().any(|value| matches!(value, Value::Null)) {
            table.unique_index_table(index)?;
            return Ok(None);
        }
        let op = self.read_unique(table, index, values, lock)?;
        self.execute(Commit::No)?;
        Ok(self.get(op).cloned())
    }
}
