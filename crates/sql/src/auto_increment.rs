//! AUTO_INCREMENT values unique across every SQL node: each node takes a
//! range of values from the table's counter row in
//! `tessera$auto_increment` (one short transaction: read the row with an
//! exclusive lock, move it past the range) and hands values out of it
//! without asking again, so concurrent inserts do not queue on one row.
//! NDB's SQL nodes do the same with its `ndb_autoincrement_prefetch_sz`.
//!
//! Ranges grow with use (16 values first, doubling to 1,024), so a small
//! table wastes few values and a bulk load asks rarely. Values are unique,
//! rising on each node, not gap-free across nodes (as InnoDB's with
//! `innodb_autoinc_lock_mode=2`). An insert naming its own value at or
//! above the counter moves the counter past it, so a generated value
//! never repeats an explicit one.

use crate::catalog::{auto_increment_key, hidden_key_counter, SqlTable, AUTO_INCREMENT};
use crate::error::{SqlError, SqlResult};
use client::{Cluster, Commit, LockMode, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

const FIRST_RANGE: u64 = 16;
const LARGEST_RANGE: u64 = 1024;

/// One table's range on this node.
#[derive(Default)]
struct Range {
    /// The next value to hand out.
    next: u64,
    /// One past the last value of the range (`next == end`: used up).
    end: u64,
    /// The size of the next range to take.
    size: u64,
}

/// The node's ranges, by the tables' counter keys. Each table's range has
/// a lock of its own, held while a new range is reserved (a round trip to
/// the cluster, more under contention): inserts into other tables go on.
#[derive(Default)]
pub struct AutoIncrement {
    ranges: Mutex<HashMap<u64, Arc<Mutex<Range>>>>,
}

impl AutoIncrement {
    /// Table `key`'s range (made empty on first use).
    fn range_of(&self, key: u64) -> Arc<Mutex<Range>> {
        let mut ranges = self.ranges.lock().expect("auto-increment lock");
        Arc::clone(ranges.entry(key).or_default())
    }

    /// `count` new values for `table`'s AUTO_INCREMENT column, rising.
    pub fn take(&self, cluster: &Cluster, table: &SqlTable, count: usize) -> SqlResult<Vec<u64>> {
        self.take_from(cluster, auto_increment_key(table.def()), count)
    }

    /// `count` new values for `table`'s hidden key, from a counter of its
    /// own (an AUTO_INCREMENT column beside it keeps MySQL's numbering).
    pub fn take_hidden(
        &self,
        cluster: &Cluster,
        table: &SqlTable,
        count: usize,
    ) -> SqlResult<Vec<u64>> {
        self.take_from(cluster, hidden_key_counter(table.def()), count)
    }

    fn take_from(&self, cluster: &Cluster, key: u64, count: usize) -> SqlResult<Vec<u64>> {
        let mut values = Vec::with_capacity(count);
        let range = self.range_of(key);
        // Held across the round trip: taken without blocking a thread
        // that runs other connections' tasks (one may hold it).
        let mut range = client::cooperative::lock(&range);
        while values.len() < count {
            if range.next == range.end {
                range.size = (range.size * 2).clamp(FIRST_RANGE, LARGEST_RANGE);
                let wanted = range.size.max((count - values.len()) as u64);
                let start = reserve(cluster, key, wanted, None)?;
                range.next = start;
                range.end = start.checked_add(wanted).ok_or_else(exhausted)?;
            }
            values.push(range.next);
            range.next += 1;
        }
        Ok(values)
    }

    /// An insert gave the AUTO_INCREMENT column `value` itself: later
    /// generated values must be above it.
    pub fn note_explicit(&self, cluster: &Cluster, table: &SqlTable, value: u64) -> SqlResult<()> {
        let key = auto_increment_key(table.def());
        let range = self.range_of(key);
        let mut range = client::cooperative::lock(&range);
        if value < range.next {
            return Ok(());
        }
        if value < range.end {
            // Inside this node's range: skip past it here; the counter is
            // already beyond the range.
            range.next = value + 1;
            return Ok(());
        }
        // At or above the counter, maybe: move the counter past it
        // (reserve does nothing when the counter is already higher).
        // The largest value leaves the counter at the end: the next value
        // to generate is then refused.
        reserve(cluster, key, 0, Some(value.saturating_add(1)))?;
        range.next = 0;
        range.end = 0;
        Ok(())
    }

    /// ALTER TABLE ... AUTO_INCREMENT = `value`: values generated from
    /// now on are at least `value` (the counter never goes back: values
    /// below it may be in use). Other SQL nodes finish the ranges they
    /// hold first, as they do after an explicit value.
    pub fn raise(&self, cluster: &Cluster, table: &SqlTable, value: u64) -> SqlResult<()> {
        let key = auto_increment_key(table.def());
        let range = self.range_of(key);
        let mut range = client::cooperative::lock(&range);
        reserve(cluster, key, 0, Some(value.max(1)))?;
        range.next = 0;
        range.end = 0;
        Ok(())
    }
}

/// The counter has no values left.
fn exhausted() -> SqlError {
    SqlError::new(
        1467,
        "Failed to read auto-increment value from storage engine: the counter is at its end",
    )
}

/// Moves the counter `key` on by `count` (or to at least `at_least`) in
/// one transaction; returns where the reserved values start.
fn reserve(cluster: &Cluster, key: u64, count: u64, at_least: Option<u64>) -> SqlResult<u64> {
    let refused = |error: client::ClientError| SqlError::from_client(&error, AUTO_INCREMENT);
    let table = cluster.table(AUTO_INCREMENT).map_err(refused)?;
    let mut attempt = 0;
    loop {
        let mut transaction = cluster.transaction();
        // `None`: the counter cannot move on by `count`.
        let result: Result<Option<u64>, client::ClientError> = (|| {
            let read =
                transaction.read_if_exists(&table, &[Value::UInt(key)], LockMode::Exclusive)?;
            transaction.execute(Commit::No)?;
            let current = transaction.get(read).and_then(|row| row.get_u64("next"));
            let start = current.unwrap_or(1).max(at_least.unwrap_or(0));
            let Some(next) = start.checked_add(count) else {
                return Ok(None);
            };
            let row = [("table_key", Value::UInt(key)), ("next", Value::UInt(next))];
            match current {
                Some(current) if current == next => {}
                Some(_) => {
                    transaction.update(&table, &[Value::UInt(key)], &row[1..])?;
                }
                None => {
                    transaction.insert(&table, &row)?;
                }
            }
            transaction.execute(Commit::Yes)?;
            Ok(Some(start))
        })();
        match result {
            Ok(Some(start)) => return Ok(start),
            Ok(None) => return Err(exhausted()),
            // Two nodes creating the row at once, or a lock wait: again.
            Err(error)
                if attempt < 10
                    && (error.is_temporary()
                        || error.code() == Some(client::ErrorCode::DuplicateKey)) =>
            {
                attempt += 1;
            }
            Err(error) => return Err(refused(error)),
        }
    }
}
