//! Locking scans (docs/design/0025-locking-scans.md; NDB's scans with
//! `LM_Read` / `LM_Exclusive`): the rows a scan finds, each locked in the
//! caller's transaction and returned as it stands under the lock, so that
//! the transaction can update or delete them (SQL's `SELECT ... FOR
//! UPDATE` and `LOCK IN SHARE MODE`, NDB's lockCurrentTuple).
//!
//! A committed-read scan walks the table or index (filtered at the data
//! nodes, in batches, merged into order when asked); each batch's rows are
//! then read again by primary key with the lock, in one round trip of the
//! transaction, tolerating rows deleted since (`read_if_exists`); the
//! filter is evaluated again on each locked row, by the same evaluator
//! the data nodes run, and a row that no longer meets it is left out (its
//! lock stays until the transaction ends, as NDB's does for a row the
//! scan stood on). A row is returned only as it is under the lock: no
//! other transaction can change it until this one commits or rolls back.
//! What a scan does not see: rows inserted, or changed to meet the
//! filter, behind its position (as any read-committed scan).

use super::{Access, ScanOptions};
use crate::error::ClientError;
use crate::table::{Row, Table};
use crate::transaction::{Commit, Transaction};
use crate::value::Value;
use signal::scan_program::{Program, ProgramWriter};
use signal::signals::LockMode;
use std::sync::Arc;

/// Rows locked per round trip when the options ask for none in
/// particular.
const LOCK_BATCH: usize = 64;

impl Transaction<'_> {
    /// The rows of `table` that `access` reaches and `options.filter`
    /// takes, each locked in this transaction with `lock` (shared or
    /// exclusive) and returned as it stands under the lock, in the scan's
    /// order, at most `options.limit` of them. Update or delete them by
    /// their primary key in this transaction; others wait for its end. With
    /// `LockMode::CommittedRead` it is [`crate::Cluster::scan`] (no lock).
    /// Operations queued and not yet executed go with the first batch of
    /// locks. A lock that waits too long fails the transaction with
    /// LockWaitTimeout, as any locking read.
    ///
    /// ```no_run
    /// use client::{Access, CompareOp, Filter, ScanOptions, Value};
    /// use signal::signals::LockMode;
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// let table = cluster.table("accounts")?;
    /// let mut transaction = cluster.transaction();
    /// let options = ScanOptions {
    ///     filter: Some(Filter::compare("balance", CompareOp::Less, Value::Int(0))),
    ///     ..ScanOptions::default()
    /// };
    /// for row in transaction.scan_locked(&table, Access::Table, &options, LockMode::Exclusive)? {
    ///     let key = [row.get("id").unwrap().clone()];
    ///     transaction.update(&table, &key, &[("balance", Value::Int(0))])?;
    /// }
    /// transaction.execute(client::Commit::Yes)?;
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn scan_locked(
        &mut self,
        table: &Arc<Table>,
        access: Access<'_>,
        options: &ScanOptions,
        lock: LockMode,
    ) -> Result<Vec<Row>, ClientError> {
        let cluster = self.cluster();
        if lock == LockMode::CommittedRead {
            return Ok(cluster.scan(table, access, options)?.rows);
        }
        let limit = options.limit.unwrap_or(u64::MAX);
        // The rows whole (a locked read returns every column), and no
        // limit: a row may drop out once locked.
        let scan = ScanOptions {
            limit: None,
            columns: None,
            ..options.clone()
        };
        let filter = recheck_program(table, options)?;
        let per_round = match options.batch_rows {
            0 => LOCK_BATCH,
            rows => rows as usize,
        };
        let key_columns = table.def().primary_key.clone();
        let mut cursor = cluster.scan_cursor(table, access, &scan)?;
        let mut locked = Vec::new();
        let mut keys: Vec<Vec<Value>> = Vec::with_capacity(per_round);
        loop {
            keys.clear();
            for row in cursor.by_ref().take(per_round) {
                let row = row?;
                let key = key_columns
                    .iter()
                    .map(|&column| row.values()[column as usize].clone())
                    .collect();
                keys.push(key);
            }
            if keys.is_empty() {
                return Ok(locked);
            }
            let mut reads = Vec::with_capacity(keys.len());
            for key in &keys {
                reads.push(self.read_if_exists(table, key, lock)?);
            }
            self.execute(Commit::No)?;
            for read in reads {
                let Some(row) = self.get(read) else {
                    // Deleted since the scan saw it.
                    continue;
                };
                if !meets(&filter, row) {
                    continue;
                }
                locked.push(row.clone());
                if locked.len() as u64 >= limit {
                    return Ok(locked);
                }
            }
        }
    }
}

/// The options' filter, decoded as a data node decodes it, to evaluate
/// on locked rows (`None`: no filter).
fn recheck_program(table: &Table, options: &ScanOptions) -> Result<Option<Program>, ClientError> {
    let Some(filter) = &options.filter else {
        return Ok(None);
    };
    let mut writer = ProgramWriter::new(&[]);
    filter.encode(table, &mut writer)?;
    let bytes = writer.finish().map_err(|code| ClientError::Invalid {
        code,
        detail: "the scan's filter does not encode".into(),
    })?;
    Program::decode(&bytes, &table.def().columns)
        .map(Some)
        .map_err(|code| ClientError::Invalid {
            code,
            detail: "the scan's filter does not fit the table".into(),
        })
}

/// Whether `row` meets `filter` (SQL's truth: unknown is not).
fn meets(filter: &Option<Program>, row: &Row) -> bool {
    let Some(program) = filter else {
        return true;
    };
    let mut work = 0;
    program
        .filter()
        .matches(|column| row.raw(column), &mut work)
}
