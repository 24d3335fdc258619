//! A transaction's scans: what it has written shows through (design
//! 0035). A scan of a table the transaction wrote names the transaction
//! in its requests, and the data nodes show its inserts and updates as it
//! wrote them and leave out what it deleted, as its key reads do. When a
//! write to the table is still queued, the transaction executes what it
//! queued first (every operation: `execute` sends them all), so that the
//! data nodes hold it (every replica of its row has prepared it once
//! `execute` returns, so the replica the scan reads has it). Writes
//! queued to other tables alone stay queued.
//!
//! A table the transaction has not written is scanned as by
//! [`Cluster::scan`](crate::Cluster::scan), committed rows only, with no
//! round trip first.

use super::{Access, ScanCursor, ScanOptions, ScanResult};
use crate::error::ClientError;
use crate::table::Table;
use crate::transaction::{Commit, Transaction};
use signal::TransactionId;
use std::sync::Arc;

impl<'a> Transaction<'a> {
    /// The rows of `table` that `access` reaches and `options.filter`
    /// takes, as this transaction sees them: committed rows, with its own
    /// writes applied.
    ///
    /// ```no_run
    /// use client::{Access, ScanOptions, Value};
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// let table = cluster.table("t")?;
    /// let mut transaction = cluster.transaction();
    /// transaction.insert(&table, &[("k", Value::UInt(7)), ("v", Value::from("seven"))])?;
    /// let seen = transaction.scan(&table, Access::Table, &ScanOptions::default())?;
    /// assert!(seen.rows.iter().any(|row| row.values()[0] == Value::UInt(7)));
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn scan(
        &mut self,
        table: &Arc<Table>,
        access: Access<'_>,
        options: &ScanOptions,
    ) -> Result<ScanResult, ClientError> {
        let seen_as = self.scan_view(table)?;
        self.cluster().scan_as(table, access, options, seen_as)
    }

    /// [`Transaction::scan`] as an iterator over the rows (see
    /// [`Cluster::scan_cursor`](crate::Cluster::scan_cursor)).
    pub fn scan_cursor(
        &mut self,
        table: &Arc<Table>,
        access: Access<'_>,
        options: &ScanOptions,
    ) -> Result<ScanCursor<'a>, ClientError> {
        let seen_as = self.scan_view(table)?;
        self.cluster()
            .scan_cursor_as(table, access, options, seen_as)
    }

    /// How many rows of `table` `access` reaches and `options.filter`
    /// takes, as this transaction sees them (see
    /// [`Cluster::count`](crate::Cluster::count)).
    pub fn count(
        &mut self,
        table: &Arc<Table>,
        access: Access<'_>,
        options: &ScanOptions,
    ) -> Result<u64, ClientError> {
        let seen_as = self.scan_view(table)?;
        self.cluster().count_as(table, access, options, seen_as)
    }

    /// Whose writes a scan of `table` sees: this transaction's once it
    /// has written the table (after executing what it queued when a
    /// write to the table waits among it), else only committed rows.
    fn scan_view(&mut self, table: &Table) -> Result<TransactionId, ClientError> {
        if !self.has_written(table) {
            return Ok(TransactionId(0));
        }
        // Writes to other tables may stay queued: the scan needs only
        // this table's at the data nodes.
        if self.has_queued_write_to(table) {
            self.execute(Commit::No)?;
        } else {
            self.check_open()?;
        }
        Ok(self.id())
    }
}
