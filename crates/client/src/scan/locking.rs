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
//! The scan is the transaction's (`own`): it finds the rows the
//! transaction inserted and judges those it updated by their new values.
//! What a scan does not see: rows other transactions insert, or change
//! to meet the filter, behind its position (as any read-committed scan).

use super::{Access, ScanOptions, ScanResult};
use crate::error::ClientError;
use crate::table::{Row, Table};
use crate::transaction::{Commit, LockWait, Transaction};
use crate::value::Value;
use signal::scan_program::{Program, ProgramWriter};
use signal::signals::LockMode;
use std::collections::HashSet;
use std::sync::Arc;

/// Most rows locked per round trip (the options' `batch_rows` if fewer):
/// far below a transaction's operation limit.
const LOCK_BATCH: usize = 256;

impl Transaction<'_> {
    /// The rows of `table` that `access` reaches and `options.filter`
    /// takes, each locked in this transaction with `lock` (shared or
    /// exclusive) and returned as it stands under the lock, in the scan's
    /// order, at most `options.limit` of them. Update or delete them by
    /// their primary key in this transaction; others wait for its end. With
    /// `LockMode::CommittedRead` it is [`Transaction::scan`] (no lock).
    /// The scan sees the transaction's own writes: when a write to `table`
    /// is queued, what the transaction queued is executed before the scan
    /// begins; otherwise queued operations go with the first batch of
    /// locks (and stay queued when the scan finds no row). A lock that
    /// waits too long fails the transaction with LockWaitTimeout, as any
    /// locking read; a scan that fails (its data node lost) rolls the
    /// transaction back. Each row comes once; a row whose indexed values
    /// changed between the scan and its lock is left out (it changed
    /// during the scan). The result's `matched` counts the rows the scan
    /// received (locked or not); a limited scan asks each partition for a
    /// batch no larger than its limit, so `LIMIT 1 FOR UPDATE` (a queue's
    /// head) reads one row per partition, not a batch of them.
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
    /// for row in transaction.scan_locked(&table, Access::Table, &options, LockMode::Exclusive)?.rows {
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
    ) -> Result<ScanResult, ClientError> {
        self.scan_locked_waiting(table, access, options, lock, LockWait::Wait)
    }

    /// As [`Transaction::scan_locked`], with what a row another
    /// transaction holds locked does to the scan: wait for it, fail the
    /// transaction with `LockNotAvailable` at once (`NoWait`), or be left
    /// out (`SkipLocked`: a queue's consumers each take rows no other
    /// holds).
    pub fn scan_locked_waiting(
        &mut self,
        table: &Arc<Table>,
        access: Access<'_>,
        options: &ScanOptions,
        lock: LockMode,
        wait: LockWait,
    ) -> Result<ScanResult, ClientError> {
        if lock == LockMode::CommittedRead {
            return self.scan(table, access, options);
        }
        let limit = options.limit.unwrap_or(u64::MAX);
        if limit == 0 {
            return Ok(ScanResult::default());
        }
        // The rows whole (a locked read returns every column), and no
        // limit: a row may drop out once locked, and the next batch then
        // brings more. A batch no larger than the limit: what a batch
        // holds past it is read, sent and decoded for nothing.
        let scan = ScanOptions {
            limit: None,
            columns: None,
            batch_rows: options
                .batch_rows
                .min(u32::try_from(limit).unwrap_or(u32::MAX)),
            ..options.clone()
        };
        let filter = recheck_program(table, options)?;
        // Columns whose values placed the row in the scan: an index's
        // (the primary key's cannot change in place).
        let placed_by = match access {
            Access::Index(name, _) => table
                .def()
                .index(name)
                .map(|index| index.columns.clone())
                .unwrap_or_default(),
            Access::Table | Access::PrimaryKey(_) => Vec::new(),
        };
        let per_round = (options.batch_rows.max(1) as usize).min(LOCK_BATCH);
        let key_columns = table.def().primary_key.clone();
        // The transaction's own writes show: its inserts are found, its
        // deletes are not, and its updates are judged by their values.
        let mut cursor = match self.scan_cursor(table, access, &scan) {
            Ok(cursor) => cursor,
            Err(error) => return Err(self.end_after(error)),
        };
        let mut locked: Vec<Row> = Vec::new();
        // The keys returned, as their bytes (a key is never NULL).
        let mut taken: HashSet<Vec<Option<Vec<u8>>>> = HashSet::new();
        let mut seen: Vec<Row> = Vec::new();
        loop {
            seen.clear();
            let wanted = per_round.min((limit - locked.len() as u64) as usize);
            for row in cursor.by_ref().take(wanted) {
                match row {
                    Ok(row) => seen.push(row),
                    Err(error) => return Err(self.end_after(error)),
                }
            }
            if seen.is_empty() {
                return Ok(ScanResult::of(locked, cursor.statistics()));
            }
            let mut reads = Vec::with_capacity(seen.len());
            for row in &seen {
                let key: Vec<Value> = key_columns
                    .iter()
                    .map(|&column| row.values()[column as usize].clone())
                    .collect();
                reads.push(self.read_locking(table, &key, lock, wait)?);
            }
            self.execute(Commit::No)?;
            for (read, scanned) in reads.into_iter().zip(&seen) {
                let Some(row) = self.get(read) else {
                    // Deleted since the scan saw it, or (SkipLocked)
                    // locked by another transaction.
                    continue;
                };
                // Moved in the index since the scan saw it: where it is
                // now, the scan may pass it again (or has passed it).
                let moved = placed_by
                    .iter()
                    .any(|&column| row.raw(column as usize) != scanned.raw(column as usize));
                if moved || !meets(&filter, row) {
                    continue;
                }
                let key = key_columns
                    .iter()
                    .map(|&column| row.raw(column as usize).map(<[u8]>::to_vec))
                    .collect();
                if !taken.insert(key) {
                    continue;
                }
                locked.push(row.clone());
                if locked.len() as u64 >= limit {
                    return Ok(ScanResult::of(locked, cursor.statistics()));
                }
            }
        }
    }

    /// The scan part of a locking scan failed: the transaction, which may
    /// hold locks of rows the caller never got, is rolled back (as a
    /// locking read's failure aborts it), and the scan's error returned.
    fn end_after(&mut self, error: ClientError) -> ClientError {
        // A rollback that fails leaves the data node's timeout to end it.
        let _ = self.rollback();
        error
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
