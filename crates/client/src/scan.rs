//! Range scans over a table's primary key, through each partition's
//! ordered index (docs/design/scans-and-indexes.md §4, design 0021).
//!
//! A scan asks the primary replica of each partition for committed rows
//! between the bounds, a batch at a time (INDEX_SCANREQ); the data node
//! keeps nothing between batches, so the next request names the last row
//! returned (its key and row id) and the node resumes after it. A row
//! that did not change while the scan ran is returned exactly once; a
//! scan stopped early, or a client gone, leaves nothing behind on the
//! node. Partitions are read one after the other; with `ordered`, their
//! rows are merged into key order. A range that fixes the whole primary
//! key reads only the partition that can hold it.
//!
//! A committed read takes no locks: a row changed during the scan may be
//! seen before or after its change. A node that fails or loses its read
//! lease during the scan fails it with a temporary error: scan again.

use crate::cluster::{section_from, unexpected_reply, Cluster};
use crate::dispatch::SchemaReply;
use crate::error::ClientError;
use crate::table::{Row, Table};
use crate::value::{push_entry, Value};
use signal::order;
use signal::scan_bounds::{self, ScanBounds};
use signal::signals::{index_scan_flags, IndexScanReq};
use signal::{BlockKind, ErrorCode};
use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;

/// Bytes before each row's attribute entries: row id, GCI, length.
const ROW_PREFIX_BYTES: usize = 4 + 8 + 4;

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

/// How a scan runs.
#[derive(Clone, Debug)]
pub struct ScanOptions {
    /// From the high bound down.
    pub descending: bool,
    /// Merge the partitions' rows into key order (else partition after
    /// partition, each in key order).
    pub ordered: bool,
    /// Stop after this many rows.
    pub limit: Option<u64>,
    /// Rows per request to a data node (at least 1).
    pub batch_rows: u32,
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            descending: false,
            ordered: true,
            limit: None,
            batch_rows: DEFAULT_BATCH_ROWS,
        }
    }
}

/// What a scan read, and from how many partitions.
#[derive(Clone, Debug)]
pub struct ScanResult {
    /// The rows.
    pub rows: Vec<Row>,
    /// Partitions it sent requests to.
    pub partitions_scanned: u32,
    /// Requests it sent.
    pub requests: u32,
}

/// One bound as the request carries it: attribute entries and whether it
/// is inclusive.
struct EncodedBound {
    entries: Vec<u8>,
    inclusive: bool,
}

impl Cluster {
    /// The committed rows of `table` whose primary key lies in `range`,
    /// in key order (partition by partition unless `options.ordered`).
    ///
    /// ```no_run
    /// use client::{KeyRange, ScanOptions, Value};
    /// use std::ops::Bound;
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// let table = cluster.table("t")?;
    /// let range = KeyRange {
    ///     low: Bound::Included(vec![Value::Int(100)]),
    ///     high: Bound::Excluded(vec![Value::Int(200)]),
    /// };
    /// for row in cluster.scan_primary_key(&table, &range, &ScanOptions::default())?.rows {
    ///     println!("{:?}", row.values());
    /// }
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn scan_primary_key(
        &self,
        table: &Arc<Table>,
        range: &KeyRange,
        options: &ScanOptions,
    ) -> Result<ScanResult, ClientError> {
        let low = encode_bound(table, &range.low)?;
        let high = encode_bound(table, &range.high)?;
        let map = self.routing_map(table).ok_or_else(|| {
            ClientError::Usage(format!("table {:?} has no partition map", table.name()))
        })?;
        // A range of one whole key reads the partition that can hold it.
        let partitions: Vec<u32> = match single_key(table, range) {
            Some(key) => vec![table.partition(key)?],
            None => (0..map.partitions.len() as u32).collect(),
        };
        let limit = options.limit.unwrap_or(u64::MAX);
        let mut result = ScanResult {
            rows: Vec::new(),
            partitions_scanned: 0,
            requests: 0,
        };
        let mut per_partition = Vec::with_capacity(partitions.len());
        for partition in partitions {
            let placement = &map.partitions[partition as usize];
            let node = *placement.replicas.first().ok_or_else(|| {
                ClientError::Protocol(format!("partition {partition} has no replica"))
            })?;
            let connection = self.connection_index(node).ok_or_else(|| {
                ClientError::Protocol(format!("{node} is not a data node of this cluster"))
            })?;
            // Unordered: what earlier partitions returned counts against
            // the limit; ordered, every partition may hold the first rows.
            let left = if options.ordered {
                limit
            } else {
                limit.saturating_sub(result.rows.len() as u64)
            };
            if left == 0 {
                break;
            }
            let rows = self.scan_one_partition(
                table,
                (connection, placement.ldm_instance, partition),
                (&low, &high),
                options,
                left,
                &mut result.requests,
            )?;
            result.partitions_scanned += 1;
            if options.ordered {
                per_partition.push(rows);
            } else {
                result.rows.extend(rows);
            }
        }
        if options.ordered {
            result.rows = merge(table, per_partition, options.descending, limit);
        }
        Ok(result)
    }

    /// One partition's rows in the range, batch by batch, at most `limit`.
    fn scan_one_partition(
        &self,
        table: &Arc<Table>,
        (connection, ldm_instance, partition): (usize, u16, u32),
        (low, high): (&Option<EncodedBound>, &Option<EncodedBound>),
        options: &ScanOptions,
        limit: u64,
        requests: &mut u32,
    ) -> Result<Vec<Row>, ClientError> {
        let mut rows = Vec::new();
        let mut resume: Option<(Vec<u8>, u32)> = None;
        let mut flags = 0;
        if low.as_ref().is_some_and(|bound| bound.inclusive) {
            flags |= index_scan_flags::LOW_INCLUSIVE;
        }
        if high.as_ref().is_some_and(|bound| bound.inclusive) {
            flags |= index_scan_flags::HIGH_INCLUSIVE;
        }
        if options.descending {
            flags |= index_scan_flags::DESCENDING;
        }
        let batch_rows = options.batch_rows.max(1);
        loop {
            let mut bounds = Vec::new();
            scan_bounds::encode(
                ScanBounds {
                    low: low.as_ref().map_or(&[], |bound| &bound.entries),
                    high: high.as_ref().map_or(&[], |bound| &bound.entries),
                    resume: resume.as_ref().map_or(&[], |(key, _)| key),
                },
                &mut bounds,
            )
            .map_err(|code| ClientError::Invalid {
                code,
                detail: "a scan bound too long".into(),
            })?;
            let flags = flags
                | if resume.is_some() {
                    index_scan_flags::RESUME
                } else {
                    0
                };
            let resume_row = resume.as_ref().map_or(0, |&(_, row)| row);
            let left = limit - rows.len() as u64;
            let max_rows = u32::try_from(left).unwrap_or(u32::MAX).min(batch_rows);
            let (table_id, table_version) = (table.def().id, table.def().version);
            *requests += 1;
            let reply = self.request_on(
                &self.connection(connection),
                (BlockKind::Ldm, ldm_instance),
                table.name(),
                &|request_id| {
                    let bounds = section_from(&bounds)?;
                    Ok(IndexScanReq {
                        request_id,
                        table_id,
                        table_version,
                        partition,
                        flags,
                        max_rows,
                        resume_row,
                        bounds,
                    }
                    .into())
                },
            )?;
            let SchemaReply::Scan {
                rows: batch, done, ..
            } = reply
            else {
                return Err(unexpected_reply(table.name(), reply));
            };
            let mut last = None;
            for (row_id, row) in decode_rows(table, &batch)? {
                last = Some((row_id, key_of(table, &row)?));
                rows.push(row);
            }
            if done || rows.len() as u64 >= limit {
                return Ok(rows);
            }
            let (row_id, key) = last.ok_or_else(|| {
                ClientError::Protocol(
                    "an index scan batch with no rows that is not the last".into(),
                )
            })?;
            resume = Some((key, row_id));
        }
    }
}

/// The attribute entries of `bound`, checked against the primary key.
fn encode_bound(
    table: &Table,
    bound: &Bound<Vec<Value>>,
) -> Result<Option<EncodedBound>, ClientError> {
    let (values, inclusive) = match bound {
        Bound::Unbounded => return Ok(None),
        Bound::Included(values) => (values, true),
        Bound::Excluded(values) => (values, false),
    };
    let key = &table.def().primary_key;
    if values.is_empty() || values.len() > key.len() {
        return Err(ClientError::Invalid {
            code: ErrorCode::BadRequest,
            detail: format!(
                "a bound on table {:?}'s primary key gives 1 to {} values, not {}",
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
    Ok(Some(EncodedBound { entries, inclusive }))
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

/// The rows of an INDEX_SCANCONF with their row ids.
fn decode_rows(table: &Arc<Table>, mut bytes: &[u8]) -> Result<Vec<(u32, Row)>, ClientError> {
    let malformed = || {
        ClientError::Protocol(format!(
            "malformed index scan rows of table {:?}",
            table.name()
        ))
    };
    let mut rows = Vec::new();
    while !bytes.is_empty() {
        let prefix = bytes.get(..ROW_PREFIX_BYTES).ok_or_else(malformed)?;
        let row_id = u32::from_le_bytes(prefix[0..4].try_into().map_err(|_| malformed())?);
        let length = u32::from_le_bytes(prefix[12..16].try_into().map_err(|_| malformed())?);
        let end = ROW_PREFIX_BYTES
            .checked_add(length as usize)
            .filter(|&end| end <= bytes.len())
            .ok_or_else(malformed)?;
        rows.push((
            row_id,
            Table::decode_row(table, &bytes[ROW_PREFIX_BYTES..end])?,
        ));
        bytes = &bytes[end..];
    }
    Ok(rows)
}

/// The key section of `row`'s primary key.
fn key_of(table: &Table, row: &Row) -> Result<Vec<u8>, ClientError> {
    let values: Vec<Value> = table
        .def()
        .primary_key
        .iter()
        .map(|&column| row.values()[column as usize].clone())
        .collect();
    let mut key = Vec::new();
    table.encode_key(&values, &mut key)?;
    Ok(key)
}

/// How the primary keys of two rows compare, column by column, in the
/// data nodes' order (`signal::order`).
fn compare_keys(table: &Table, a: &Row, b: &Row) -> Ordering {
    for &column in &table.def().primary_key {
        let column_type = table.def().columns[column as usize].column_type;
        let wire = |value: &Value| -> Option<Vec<u8>> {
            let mut entry = Vec::new();
            // Values decoded from the node encode again; the entry's header
            // (column, length: 4 bytes) comes first.
            push_entry(&mut entry, column, column_type, true, value).ok()?;
            (*value != Value::Null).then(|| entry.split_off(4))
        };
        let order = order::compare(
            column_type,
            wire(&a.values()[column as usize]).as_deref(),
            wire(&b.values()[column as usize]).as_deref(),
        );
        if order != Ordering::Equal {
            return order;
        }
    }
    Ordering::Equal
}

/// Merges rows sorted per partition into one order, at most `limit`.
fn merge(table: &Table, partitions: Vec<Vec<Row>>, descending: bool, limit: u64) -> Vec<Row> {
    let mut rest: Vec<std::vec::IntoIter<Row>> =
        partitions.into_iter().map(Vec::into_iter).collect();
    let mut heads: Vec<Option<Row>> = rest.iter_mut().map(Iterator::next).collect();
    let mut merged = Vec::new();
    while (merged.len() as u64) < limit {
        let mut best: Option<usize> = None;
        for (i, head) in heads.iter().enumerate() {
            let Some(row) = head else { continue };
            let better = best.is_none_or(|j| {
                let current = heads[j].as_ref().expect("the best so far has a row");
                let order = compare_keys(table, row, current);
                if descending {
                    order == Ordering::Greater
                } else {
                    order == Ordering::Less
                }
            });
            if better {
                best = Some(i);
            }
        }
        let Some(i) = best else { break };
        merged.push(heads[i].take().expect("the best has a row"));
        heads[i] = rest[i].next();
    }
    merged
}
