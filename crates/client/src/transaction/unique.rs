//! Reads by unique index (docs/design/scans-and-indexes.md §5): two round
//! trips, the index's hidden row (which holds the primary key), then the
//! row itself. NDB's tc chains the second read itself to save one; ours
//! is the client's, with the same locks and checks.

use super::{Commit, Transaction};
use crate::error::ClientError;
use crate::table::{Row, Table};
use crate::value::Value;
use signal::signals::LockMode;
use std::sync::Arc;

impl Transaction<'_> {
    /// The row of `table` whose unique index `index` (by name) holds
    /// `values` (one per index column, in index order), or `None`. Runs
    /// the operations queued before it and two batches of its own
    /// (without committing): the index's hidden row, then the row by the
    /// primary key the hidden row holds, both read with `lock`. With a
    /// lock, the hidden row's lock keeps the value from moving to another
    /// row until the transaction ends; a committed read checks the row
    /// still holds the value (it may have changed between the reads), and
    /// answers `None` when it does not. A NULL among `values` matches no
    /// row (as SQL's `=`).
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
        let hidden = Arc::clone(table.unique_index_table(index)?);
        if values.iter().any(|value| matches!(value, Value::Null)) {
            // No row's values hold a NULL as far as the index goes (SQL's
            // comparison with NULL matches nothing).
            return Ok(None);
        }
        let entry = self.read_if_exists(&hidden, values, lock)?;
        self.execute(Commit::No)?;
        let Some(entry) = self.get(entry).cloned() else {
            return Ok(None);
        };
        let key_columns = hidden.def().primary_key.len();
        let primary_key: Vec<Value> = entry.values()[key_columns..].to_vec();
        let op = self.read_if_exists(table, &primary_key, lock)?;
        self.execute(Commit::No)?;
        let Some(row) = self.get(op) else {
            return Ok(None);
        };
        let index = table.def().index(index).expect("found above");
        let key_types = index
            .columns
            .iter()
            .map(|&column| table.def().columns[column as usize].column_type);
        let holds_values =
            index
                .columns
                .iter()
                .zip(key_types)
                .enumerate()
                .all(|(at, (&column, column_type))| {
                    match (row.raw(column as usize), entry.raw(at)) {
                        (Some(a), Some(b)) => signal::attr::key_values_equal(column_type, a, b),
                        _ => false,
                    }
                });
        Ok(holds_values.then(|| row.clone()))
    }
}
