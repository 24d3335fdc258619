//! Scans: a table's rows in no particular order (a full scan), or ranges
//! of its primary key or of another of its ordered indexes in that
//! index's order (through each partition's ordered index), filtered,
//! projected and limited at the data nodes, or only counted
//! (docs/design/scans-and-indexes.md §3-4, designs 0021 to 0023).
//!
//! A scan asks the primary replica of every partition it must read for
//! committed rows, a batch at a time (SCAN_REQ), all partitions at once:
//! each partition's next request goes out as soon as its answer is in
//! (`run`). The data node keeps nothing between batches: each answer says
//! where to resume and the next request brings it back. A row that did
//! not change while the scan ran is returned exactly once; a scan stopped
//! early, or a client gone, leaves nothing behind on a node. A range that
//! fixes the whole primary key reads only the partition that can hold it.
//!
//! A committed read takes no locks: a row changed during the scan may be
//! seen before or after its change. A transaction's scans (`own`) also
//! see its own uncommitted writes (design 0035). A node that fails or loses its read
//! lease during the scan fails it with a temporary error: scan again.

mod filter;
mod locking;
mod own;
mod run;

pub use filter::Filter;
pub use run::{ScanCursor, ScanStatistics};

use crate::cluster::Cluster;
use crate::error::ClientError;
use crate::table::{Row, Table};
use crate::value::{push_entry, Value};
use run::{Plan, Walk};
use signal::scan_program::ProgramWriter;
use signal::signals::scan_flags;
use signal::{ErrorCode, TransactionId};
use std::ops::Bound;
use std::sync::Arc;

/// Rows per batch unless [`ScanOptions::batch_rows`] says otherwise.
pub const DEFAULT_BATCH_ROWS: u32 = 256;

/// Which primary keys a scan reads: each bound gives values for a leading
/// run of the primary-key columns (all of them, or the first few: a bound
/// (5) on a key (a, b) is every key whose a is 5).
#[derive(Clone, Debug, PartialEq)]
pub struct KeyRange {
    /// The low bound.
    pub low: Bound<Vec<Value>>,
    /// The high bound.
    pub high: Bound<Vec<Value>>,
}

impl KeyRange {
    /// Every key.
    pub fn all() -> KeyRange {
        KeyRange {
            low: Bound::Unbounded,
            high: Bound::Unbounded,
        }
    }
}

/// How a scan reaches the rows.
#[derive(Clone, Copy, Debug)]
pub enum Access<'a> {
    /// Every row of the table, partition by partition in row-id order: no
    /// order a caller may rely on.
    Table,
    /// The rows whose primary key lies in any of the ranges, range after
    /// range (a row in two ranges comes twice), each in key order.
    PrimaryKey(&'a [KeyRange]),
    /// The rows whose values of the named ordered index's columns lie in
    /// any of the ranges (bounds on a leading run of its columns), range
    /// after range, each in the index's order (rows with equal values in
    /// any order). NULL sorts first: a range open below includes the rows
    /// whose first column is NULL (SQL's `c < 5` is the low bound
    /// `Excluded([NULL])`).
    Index(&'a str, &'a [KeyRange]),
}

/// How a scan runs.
#[derive(Clone, Debug)]
pub struct ScanOptions {
    /// From the high bound down (primary-key ranges only).
    pub descending: bool,
    /// Merge the partitions' rows into key order (else each partition's
    /// rows come in key order, mixed with other partitions' as their
    /// batches arrive). Primary-key ranges only.
    pub ordered: bool,
    /// Stop after this many rows.
    pub limit: Option<u64>,
    /// Rows per request to a data node (at least 1).
    pub batch_rows: u32,
    /// Bytes of rows per request to a data node (0: the node's default,
    /// 32 KiB; at most 128 KiB).
    pub batch_bytes: u32,
    /// Only rows that meet this, evaluated at the data nodes.
    pub filter: Option<Filter>,
    /// Only these columns (by name, at least one; `None`: every column).
    /// The other columns of the rows returned read as NULL. When
    /// partitions' rows are merged into key order, the key's columns come
    /// too.
    pub columns: Option<Vec<String>>,
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            descending: false,
            ordered: true,
            limit: None,
            batch_rows: DEFAULT_BATCH_ROWS,
            batch_bytes: 0,
            filter: None,
            columns: None,
        }
    }
}

/// What a scan read, and what it cost.
#[derive(Clone, Debug, Default)]
pub struct ScanResult {
    /// The rows.
    pub rows: Vec<Row>,
    /// Rows the data nodes found meeting the filter: the count of
    /// [`Cluster::count`]; for a scan, the rows sent (a limit may have
    /// left some of them out of `rows`).
    pub matched: u64,
    /// Partitions it sent requests to.
    pub partitions_scanned: u32,
    /// Requests it sent.
    pub requests: u32,
    /// Rows the data nodes looked at (met the filter or not).
    pub examined: u64,
}

impl ScanResult {
    /// `rows`, with what the scan that found them cost.
    pub(crate) fn of(rows: Vec<Row>, statistics: ScanStatistics) -> ScanResult {
        ScanResult {
            rows,
            matched: statistics.matched,
            partitions_scanned: statistics.partitions_scanned,
            requests: statistics.requests,
            examined: statistics.examined,
        }
    }
}

impl Cluster {
    /// The committed rows of `table` that `access` reaches and
    /// `options.filter` takes.
    ///
    /// ```no_run
    /// use client::{Access, CompareOp, Filter, KeyRange, ScanOptions, Value};
    /// use std::ops::Bound;
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// let table = cluster.table("t")?;
    /// let range = [KeyRange {
    ///     low: Bound::Included(vec![Value::Int(100)]),
    ///     high: Bound::Excluded(vec![Value::Int(200)]),
    /// }];
    /// let options = ScanOptions {
    ///     filter: Some(Filter::compare("v", CompareOp::Greater, Value::Int(0))),
    ///     ..ScanOptions::default()
    /// };
    /// for row in cluster.scan(&table, Access::PrimaryKey(&range), &options)?.rows {
    ///     println!("{:?}", row.values());
    /// }
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn scan(
        &self,
        table: &Arc<Table>,
        access: Access<'_>,
        options: &ScanOptions,
    ) -> Result<ScanResult, ClientError> {
        self.scan_as(table, access, options, TransactionId(0))
    }

    /// [`Cluster::scan`], seeing the own writes of `transaction_id` (0:
    /// none).
    fn scan_as(
        &self,
        table: &Arc<Table>,
        access: Access<'_>,
        options: &ScanOptions,
        transaction_id: TransactionId,
    ) -> Result<ScanResult, ClientError> {
        let mut cursor = self.scan_cursor_as(table, access, options, transaction_id)?;
        let mut rows = Vec::new();
        for row in cursor.by_ref() {
            rows.push(row?);
        }
        Ok(ScanResult::of(rows, cursor.statistics()))
    }

    /// [`Cluster::scan`] as an iterator over the rows: each partition's
    /// next batch is asked for when its rows are used up, so reading
    /// stops the scan where the caller stops (flow control), and memory
    /// holds at most a batch a partition.
    pub fn scan_cursor(
        &self,
        table: &Arc<Table>,
        access: Access<'_>,
        options: &ScanOptions,
    ) -> Result<ScanCursor<'_>, ClientError> {
        self.scan_cursor_as(table, access, options, TransactionId(0))
    }

    /// [`Cluster::scan_cursor`], seeing the own writes of
    /// `transaction_id` (0: none).
    fn scan_cursor_as(
        &self,
        table: &Arc<Table>,
        access: Access<'_>,
        options: &ScanOptions,
        transaction_id: TransactionId,
    ) -> Result<ScanCursor<'_>, ClientError> {
        let (table, mut plan) = self.plan(table, access, options, false)?;
        plan.transaction_id = transaction_id;
        ScanCursor::new(self, &table, plan)
    }

    /// The scan's plan against `table`; when `table` lacks the index the
    /// scan names (another client created it since this one fetched the
    /// definition), against the definition fetched anew.
    fn plan(
        &self,
        table: &Arc<Table>,
        access: Access<'_>,
        options: &ScanOptions,
        count: bool,
    ) -> Result<(Arc<Table>, Plan), ClientError> {
        match Plan::new(table, access, options, count) {
            Err(error) if error.code() == Some(ErrorCode::UnknownIndex) => {
                self.invalidate_stale_table(table);
                let fresh = self.table(table.name())?;
                // The same table (not one dropped and created again under
                // its name), with the index now.
                let same =
                    fresh.def().id == table.def().id && fresh.def().version == table.def().version;
                if !same {
                    return Err(error);
                }
                let plan = Plan::new(&fresh, access, options, count)?;
                Ok((fresh, plan))
            }
            planned => Ok((Arc::clone(table), planned?)),
        }
    }

    /// How many committed rows of `table` `access` reaches and
    /// `options.filter` takes, counted at the data nodes (no row crosses
    /// the network). `limit`, `columns` and the order are ignored.
    pub fn count(
        &self,
        table: &Arc<Table>,
        access: Access<'_>,
        options: &ScanOptions,
    ) -> Result<u64, ClientError> {
        self.count_as(table, access, options, TransactionId(0))
    }

    /// [`Cluster::count`], counting the own writes of `transaction_id`
    /// (0: none).
    fn count_as(
        &self,
        table: &Arc<Table>,
        access: Access<'_>,
        options: &ScanOptions,
        transaction_id: TransactionId,
    ) -> Result<u64, ClientError> {
        let (table, mut plan) = self.plan(table, access, options, true)?;
        plan.transaction_id = transaction_id;
        let mut cursor = ScanCursor::new(self, &table, plan)?;
        if let Some(Err(error)) = cursor.next() {
            return Err(error);
        }
        Ok(cursor.statistics().matched)
    }

    /// The committed rows of `table` whose primary key lies in `range`
    /// (see [`Cluster::scan`]).
    pub fn scan_primary_key(
        &self,
        table: &Arc<Table>,
        range: &KeyRange,
        options: &ScanOptions,
    ) -> Result<ScanResult, ClientError> {
        self.scan(
            table,
            Access::PrimaryKey(std::slice::from_ref(range)),
            options,
        )
    }
}

impl Plan {
    /// Checks and encodes what `access` and `options` ask of `table`.
    fn new(
        table: &Arc<Table>,
        access: Access<'_>,
        options: &ScanOptions,
        count: bool,
    ) -> Result<Plan, ClientError> {
        let usage = |detail: String| ClientError::Usage(detail);
        if options.batch_bytes > scan_flags::MAX_BATCH_BYTES {
            return Err(ClientError::Invalid {
                code: ErrorCode::ScanBatchTooLarge,
                detail: format!(
                    "batches of {} bytes: at most {}",
                    options.batch_bytes,
                    scan_flags::MAX_BATCH_BYTES
                ),
            });
        }
        let primary_key = &table.def().primary_key;
        let (walks, order_columns) = match access {
            Access::Table => {
                if options.descending {
                    return Err(usage("a full scan has no order to reverse".into()));
                }
                (vec![Walk::rows()], Vec::new())
            }
            Access::PrimaryKey(ranges) => (
                ranges
                    .iter()
                    .map(|range| Walk::range(table, 0, primary_key, range))
                    .collect::<Result<_, _>>()?,
                primary_key.clone(),
            ),
            Access::Index(name, ranges) => {
                let index = table
                    .def()
                    .index(name)
                    .ok_or_else(|| ClientError::Invalid {
                        code: ErrorCode::UnknownIndex,
                        detail: format!("table {:?} has no index {name:?}", table.name()),
                    })?;
                (
                    ranges
                        .iter()
                        .map(|range| Walk::range(table, index.id, &index.columns, range))
                        .collect::<Result<_, _>>()?,
                    index.columns.clone(),
                )
            }
        };
        let merged = options.ordered && !order_columns.is_empty() && !count;
        let mut columns = Vec::new();
        if let Some(names) = &options.columns {
            if names.is_empty() {
                return Err(usage(
                    "a scan of no columns: name at least one, or None for every column".into(),
                ));
            }
            for name in names {
                columns.push(table.column_id(name.as_str())?);
            }
            if merged {
                // Merging compares the rows' keys.
                for &key_column in &order_columns {
                    if !columns.contains(&key_column) {
                        columns.push(key_column);
                    }
                }
            }
        }
        let mut program = ProgramWriter::new(&columns);
        if let Some(filter) = &options.filter {
            filter.encode(table, &mut program)?;
        }
        let program = program.finish().map_err(|code| ClientError::Invalid {
            code,
            detail: format!(
                "the scan's program does not encode: at most {} bytes, values under 64 KiB",
                signal::scan_program::MAX_PROGRAM_BYTES
            ),
        })?;
        Ok(Plan {
            walks,
            program,
            count,
            merged,
            order_columns,
            descending: options.descending,
            limit: if count {
                u64::MAX
            } else {
                options.limit.unwrap_or(u64::MAX)
            },
            batch_rows: options.batch_rows.max(1),
            batch_bytes: options.batch_bytes,
            transaction_id: TransactionId(0),
        })
    }
}

/// The attribute entries of `bound`, checked against the index columns
/// `key`.
fn encode_bound(
    table: &Table,
    key: &[u16],
    bound: &Bound<Vec<Value>>,
) -> Result<Option<(Vec<u8>, bool)>, ClientError> {
    let (values, inclusive) = match bound {
        Bound::Unbounded => return Ok(None),
        Bound::Included(values) => (values, true),
        Bound::Excluded(values) => (values, false),
    };
    if values.is_empty() || values.len() > key.len() {
        return Err(ClientError::Invalid {
            code: ErrorCode::BadRequest,
            detail: format!(
                "a bound on an index of table {:?} gives 1 to {} values, not {}",
                table.name(),
                key.len(),
                values.len()
            ),
        });
    }
    let mut entries = Vec::new();
    for (&column, value) in key.iter().zip(values) {
        let def = &table.def().columns[column as usize];
        push_entry(&mut entries, column, def.column_type, def.nullable, value).map_err(|code| {
            ClientError::Invalid {
                code,
                detail: format!("bound value {value} for column {:?}", def.name),
            }
        })?;
    }
    Ok(Some((entries, inclusive)))
}

/// The whole key a range names when its bounds are one key, inclusive.
fn single_key<'a>(table: &Table, range: &'a KeyRange) -> Option<&'a [Value]> {
    match (&range.low, &range.high) {
        (Bound::Included(low), Bound::Included(high))
            if low == high && low.len() == table.def().primary_key.len() =>
        {
            Some(low)
        }
        _ => None,
    }
}
