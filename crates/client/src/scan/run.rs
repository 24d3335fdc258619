//! Running a scan: a [`ScanCursor`] reads every partition of a walk at
//! once, keeps at most one request in flight and one batch of rows per
//! partition, and hands rows out as its caller asks for them: a
//! partition's next batch is asked for once its last one is used up, so
//! a caller that stops reading stops the scan. The answers of all the
//! partitions, over any number of connections, land in one shared slot
//! the cursor sleeps on. In key order, the partitions' rows are merged
//! as they are handed out.

use super::{encode_bound, single_key, KeyRange};
use crate::cluster::{section_from, unexpected_reply, Cluster};
use crate::connection::{FrameBuilder, NodeConnection};
use crate::dispatch::{SchemaReply, SharedSlot, Slot};
use crate::error::ClientError;
use crate::table::{Row, Table};
use crate::value::Value;
use signal::order;
use signal::scan_bounds::{self, ScanBounds};
use signal::signals::{scan_flags, PartitionMap, ScanReq};
use signal::{BlockKind, TransactionId};
use std::cmp::Ordering;
use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

/// Bytes before each row's attribute entries: row id, GCI, length.
const ROW_PREFIX_BYTES: usize = 4 + 8 + 4;

/// A scan, checked and encoded.
pub(super) struct Plan {
    pub(super) walks: Vec<Walk>,
    /// The projection and filter (`signal::scan_program`).
    pub(super) program: Vec<u8>,
    /// Count only.
    pub(super) count: bool,
    /// Merge the partitions' rows into key order.
    pub(super) merged: bool,
    /// The columns of the index walked (none for a full scan): what
    /// merging compares.
    pub(super) order_columns: Vec<u16>,
    pub(super) descending: bool,
    pub(super) limit: u64,
    pub(super) batch_rows: u32,
    pub(super) batch_bytes: u32,
    /// The transaction whose own uncommitted writes the scan sees
    /// (`TransactionId(0)`: none).
    pub(super) transaction_id: TransactionId,
}

/// One walk over the partitions: the whole of each in row order, or one
/// primary-key range.
pub(super) struct Walk {
    /// `scan_flags::ROW_ORDER` or the index (0: the primary key's).
    index: u32,
    /// The bounds' attribute entries (empty: none), then the flags that
    /// say which are inclusive.
    low: Vec<u8>,
    high: Vec<u8>,
    inclusive: u8,
    /// The bucket every row of the range is in, when the range pins it:
    /// a single whole primary key, or equal bounds on every column of
    /// the table's partition key. Only its partition can hold the rows.
    bucket: Option<u32>,
}

impl Walk {
    pub(super) fn rows() -> Walk {
        Walk {
            index: scan_flags::ROW_ORDER,
            low: Vec::new(),
            high: Vec::new(),
            inclusive: 0,
            bucket: None,
        }
    }

    /// A range of index `index` (0: the primary key's) over `columns`.
    pub(super) fn range(
        table: &Table,
        index: u32,
        columns: &[u16],
        range: &KeyRange,
    ) -> Result<Walk, ClientError> {
        let mut inclusive = 0;
        let mut entries = |bound, flag| -> Result<Vec<u8>, ClientError> {
            Ok(match encode_bound(table, columns, bound)? {
                Some((entries, true)) => {
                    inclusive |= flag;
                    entries
                }
                Some((entries, false)) => entries,
                None => Vec::new(),
            })
        };
        let low = entries(&range.low, scan_flags::LOW_INCLUSIVE)?;
        let high = entries(&range.high, scan_flags::HIGH_INCLUSIVE)?;
        // Rows are placed by the primary key, or by the partition key when
        // the table has one: a range that pins either reaches one
        // partition.
        let bucket = match index {
            0 => single_key(table, range)
                .map(|key| table.bucket(key))
                .transpose()?,
            _ => None,
        }
        .or_else(|| pinned_bucket(table, columns, range));
        Ok(Walk {
            index,
            low,
            high,
            inclusive,
            bucket,
        })
    }
}

/// The bucket of the rows of `range` (bounds over `columns`, an index's
/// or the primary key's) when its bounds agree on a leading run of
/// columns holding every column of the table's partition key: each row
/// between the bounds has those values, so all of them hash alike.
/// `None` for a table without a partition key of its own, an open bound,
/// or a partition-key column the bounds leave free.
fn pinned_bucket(table: &Table, columns: &[u16], range: &KeyRange) -> Option<u32> {
    let (Bound::Included(low) | Bound::Excluded(low)) = &range.low else {
        return None;
    };
    let (Bound::Included(high) | Bound::Excluded(high)) = &range.high else {
        return None;
    };
    let agreed = low.iter().zip(high).take_while(|(a, b)| a == b).count();
    let mut values = Vec::with_capacity(table.def().partition_key.len());
    for &column in &table.def().partition_key {
        let position = columns.iter().position(|c| *c == column)?;
        if position >= agreed {
            return None;
        }
        values.push(&low[position]);
    }
    table.bucket_of_partition_values(values.into_iter())
}

/// What a scan cost so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanStatistics {
    /// Rows the data nodes found meeting the filter (for a count, the
    /// count; for a scan, the rows sent, some of which a limit may leave
    /// unread).
    pub matched: u64,
    /// Rows the data nodes looked at.
    pub examined: u64,
    /// Partitions requests went to (each walk counts its own).
    pub partitions_scanned: u32,
    /// Requests sent.
    pub requests: u32,
}

/// One partition's part of a walk.
struct Cursor {
    partition: u32,
    connection: Arc<NodeConnection>,
    ldm_instance: u16,
    /// Where the last answer said to resume: the key (index scans) and
    /// the row id.
    resume: Option<(Vec<u8>, u32)>,
    done: bool,
    rows: VecDeque<Row>,
    /// The request in flight.
    waiting: Option<u32>,
}

impl Cursor {
    /// Whether it may still give rows it does not hold yet.
    fn needs_batch(&self) -> bool {
        !self.done && self.rows.is_empty()
    }
}

/// Requests to one data node sent in one write: the connection, their
/// frames, and each request's cursor (by position) and id.
type Write = (Arc<NodeConnection>, FrameBuilder, Vec<(usize, u32)>);

/// A scan in progress: an iterator over its rows, each batch asked for
/// when the rows before it are used up ([`Cluster::scan_cursor`]). A
/// cursor dropped before its end forgets its requests: the data nodes hold
/// nothing for it.
pub struct ScanCursor<'c> {
    cluster: &'c Cluster,
    table: Arc<Table>,
    plan: Plan,
    map: Arc<PartitionMap>,
    /// The next walk to start.
    next_walk: usize,
    /// The partitions of the current walk.
    cursors: Vec<Cursor>,
    answers: Arc<SharedSlot>,
    returned: u64,
    statistics: ScanStatistics,
    /// The partition the last row came from (unordered: the next comes
    /// from it too while it has rows).
    current: usize,
    /// A partition's rows ran out, or an answer came: take the answers
    /// and ask for batches before the next row.
    refresh: bool,
    /// An error ended it, or it was read to the end.
    finished: bool,
}

impl<'c> ScanCursor<'c> {
    pub(super) fn new(
        cluster: &'c Cluster,
        table: &Arc<Table>,
        plan: Plan,
    ) -> Result<ScanCursor<'c>, ClientError> {
        let map = cluster.routing_map(table).ok_or_else(|| {
            ClientError::Usage(format!("table {:?} has no partition map", table.name()))
        })?;
        Ok(ScanCursor {
            cluster,
            table: Arc::clone(table),
            plan,
            map,
            next_walk: 0,
            cursors: Vec::new(),
            answers: Arc::new(Slot::new(Vec::new())),
            returned: 0,
            statistics: ScanStatistics::default(),
            current: 0,
            refresh: true,
            finished: false,
        })
    }

    /// What the scan cost so far.
    pub fn statistics(&self) -> ScanStatistics {
        self.statistics
    }

    /// The next row, or `None` at the end.
    fn next_row(&mut self) -> Result<Option<Row>, ClientError> {
        loop {
            if self.finished || self.returned >= self.plan.limit {
                return Ok(None);
            }
            if self.cursors.is_empty() {
                if !self.start_walk()? {
                    return Ok(None);
                }
                continue;
            }
            // Answers are taken and batches asked for only when a
            // partition's rows ran out or an answer was waited for, not for
            // every row handed out.
            if self.refresh {
                self.refresh = false;
                self.take_answers()?;
                self.ask_for_batches()?;
            }
            let chosen = if self.plan.merged {
                // Every partition that may still hold rows must show its
                // next one before the smallest can be chosen.
                if self.cursors.iter().any(Cursor::needs_batch) {
                    None
                } else {
                    self.smallest_head()
                }
            } else if self
                .cursors
                .get(self.current)
                .is_some_and(|cursor| !cursor.rows.is_empty())
            {
                Some(self.current)
            } else {
                self.cursors
                    .iter()
                    .position(|cursor| !cursor.rows.is_empty())
            };
            if let Some(at) = chosen {
                self.returned += 1;
                self.current = at;
                let cursor = &mut self.cursors[at];
                let row = cursor.rows.pop_front();
                if cursor.rows.is_empty() {
                    self.refresh = true;
                }
                return Ok(row);
            }
            if self
                .cursors
                .iter()
                .all(|cursor| cursor.done && cursor.rows.is_empty())
            {
                self.end_walk();
                continue;
            }
            self.wait_for_answers()?;
            self.refresh = true;
        }
    }

    /// Starts the next walk on the partitions it must read; false when
    /// none is left.
    fn start_walk(&mut self) -> Result<bool, ClientError> {
        let Some(walk) = self.plan.walks.get(self.next_walk) else {
            return Ok(false);
        };
        self.next_walk += 1;
        // The map the placements come from says which partition holds a
        // bucket (the table's own may be older).
        let partitions: Vec<u32> = match walk.bucket {
            Some(bucket) => {
                let partition =
                    self.map
                        .bucket_partitions
                        .get(bucket as usize)
                        .ok_or_else(|| {
                            ClientError::Protocol(format!("bucket {bucket} is not in the map"))
                        })?;
                vec![*partition]
            }
            None => (0..self.map.partitions.len() as u32).collect(),
        };
        for partition in partitions {
            let placement = self.map.partitions.get(partition as usize).ok_or_else(|| {
                ClientError::Protocol(format!("partition {partition} is not in the map"))
            })?;
            let node = *placement.replicas.first().ok_or_else(|| {
                ClientError::Protocol(format!("partition {partition} has no replica"))
            })?;
            let index = self.cluster.connection_index(node).ok_or_else(|| {
                ClientError::Protocol(format!("{node} is not a data node of this cluster"))
            })?;
            self.cursors.push(Cursor {
                partition,
                connection: self.cluster.connection(index),
                ldm_instance: placement.ldm_instance,
                resume: None,
                done: false,
                rows: VecDeque::new(),
                waiting: None,
            });
        }
        self.statistics.partitions_scanned += self.cursors.len() as u32;
        (self.current, self.refresh) = (0, true);
        Ok(true)
    }

    /// Forgets the current walk's partitions (and any request of theirs
    /// still in flight).
    fn end_walk(&mut self) {
        for cursor in self.cursors.drain(..) {
            if let Some(request_id) = cursor.waiting {
                cursor.connection.dispatch.unregister_request(request_id);
            }
        }
    }

    /// Sends the next request of every partition whose rows are used up.
    fn ask_for_batches(&mut self) -> Result<(), ClientError> {
        let left = self.plan.limit - self.returned;
        let max_rows = u32::try_from(left)
            .unwrap_or(u32::MAX)
            .min(self.plan.batch_rows);
        let walk = &self.plan.walks[self.next_walk - 1];
        // The requests to one data node go in one write.
        let mut writes: Vec<Write> = Vec::new();
        for at in 0..self.cursors.len() {
            let cursor = &self.cursors[at];
            if !cursor.needs_batch() || cursor.waiting.is_some() {
                continue;
            }
            let write = match writes
                .iter()
                .position(|(connection, ..)| Arc::ptr_eq(connection, &cursor.connection))
            {
                Some(write) => write,
                None => {
                    let connection = Arc::clone(&cursor.connection);
                    writes.push((connection, FrameBuilder::default(), Vec::new()));
                    writes.len() - 1
                }
            };
            let (_, frames, asked) = &mut writes[write];
            match self.push_request(walk, cursor, max_rows, frames) {
                Ok(request_id) => asked.push((at, request_id)),
                Err(error) => {
                    // Nothing was sent: forget the requests made so far.
                    for (connection, _, asked) in &writes {
                        for &(_, request_id) in asked {
                            connection.dispatch.unregister_request(request_id);
                        }
                    }
                    return Err(error);
                }
            }
        }
        for (connection, mut frames, asked) in writes {
            if let Err(error) = connection.send(&mut frames) {
                for (_, request_id) in asked {
                    connection.dispatch.unregister_request(request_id);
                }
                return Err(error);
            }
            for (at, request_id) in asked {
                self.cursors[at].waiting = Some(request_id);
                self.statistics.requests += 1;
            }
        }
        Ok(())
    }

    /// Adds `cursor`'s next SCAN_REQ to `frames`, its answer to go to the
    /// shared slot; the request's id.
    fn push_request(
        &self,
        walk: &Walk,
        cursor: &Cursor,
        max_rows: u32,
        frames: &mut FrameBuilder,
    ) -> Result<u32, ClientError> {
        let table = &self.table;
        let mut flags = 0;
        if self.plan.count {
            flags |= scan_flags::COUNT;
        }
        if cursor.resume.is_some() {
            flags |= scan_flags::RESUME;
        }
        let mut bounds = Vec::new();
        if walk.index != scan_flags::ROW_ORDER {
            flags |= walk.inclusive;
            if self.plan.descending {
                flags |= scan_flags::DESCENDING;
            }
            scan_bounds::encode(
                ScanBounds {
                    low: &walk.low,
                    high: &walk.high,
                    resume: cursor.resume.as_ref().map_or(&[], |(key, _)| key),
                },
                &mut bounds,
            )
            .map_err(|code| ClientError::Invalid {
                code,
                detail: "a scan bound too long".into(),
            })?;
        }
        let request_id = self.cluster.next_request_id();
        let connection = &cursor.connection;
        connection
            .dispatch
            .register_shared_request(request_id, &self.answers)
            .map_err(|reason| connection.lost(reason))?;
        let sent = (|| {
            let signal = ScanReq {
                request_id,
                table_id: table.def().id,
                table_version: table.def().version,
                partition: cursor.partition,
                index: walk.index,
                flags,
                max_rows,
                max_bytes: self.plan.batch_bytes,
                resume_row: cursor.resume.as_ref().map_or(0, |&(_, row)| row),
                transaction_id: self.plan.transaction_id,
                bounds: section_from(&bounds)?,
                program: section_from(&self.plan.program)?,
            };
            frames.push(&connection.envelope(BlockKind::Ldm, cursor.ldm_instance, signal.into()))
        })();
        if let Err(error) = sent {
            connection.dispatch.unregister_request(request_id);
            return Err(error);
        }
        Ok(request_id)
    }

    /// Sleeps until an answer comes, or fails the scan at the reply
    /// timeout.
    fn wait_for_answers(&mut self) -> Result<(), ClientError> {
        let clock = self.cluster.clock();
        let timeout = self.cluster.options().reply_timeout;
        let deadline = clock.now() + timeout;
        let (answers, _) = self
            .answers
            .wait_until(clock, deadline, |answers| !answers.is_empty());
        if answers.is_empty() {
            return Err(ClientError::Timeout {
                what: "a scan batch",
                waited: timeout,
            });
        }
        Ok(())
    }

    /// Takes the answers that came in, without waiting.
    fn take_answers(&mut self) -> Result<(), ClientError> {
        let arrived = std::mem::take(&mut *self.answers.lock());
        for (request_id, reply) in arrived {
            let Some(cursor) = self
                .cursors
                .iter_mut()
                .find(|cursor| cursor.waiting == Some(request_id))
            else {
                // A request of a walk that ended: nothing waits for it.
                continue;
            };
            cursor.waiting = None;
            cursor.connection.dispatch.unregister_request(request_id);
            match reply {
                SchemaReply::Scan {
                    rows,
                    next_row,
                    done,
                    matched,
                    examined,
                    resume_key,
                } => {
                    decode_rows(&self.table, &rows, &mut cursor.rows)?;
                    self.statistics.matched += u64::from(matched);
                    self.statistics.examined += u64::from(examined);
                    cursor.done = done;
                    cursor.resume = Some((resume_key, next_row));
                }
                SchemaReply::Refused(code) => {
                    use signal::ErrorCode;
                    match code {
                        // The definition changed (an index dropped, the
                        // table recreated): the next Cluster::table asks.
                        ErrorCode::SchemaVersionMismatch
                        | ErrorCode::UnknownTable
                        | ErrorCode::UnknownIndex => {
                            self.cluster.invalidate_stale_table(&self.table)
                        }
                        // The replica asked is not the partition's primary
                        // (any more): the next scan routes by a map
                        // fetched anew.
                        ErrorCode::NotPrimary
                        | ErrorCode::NodeNotStarted
                        | ErrorCode::ReadLeaseExpired => self.map_is_stale(),
                        _ => {}
                    }
                    return Err(ClientError::Schema {
                        code,
                        table: self.table.name().to_string(),
                    });
                }
                SchemaReply::Lost(reason) => {
                    let error = cursor.connection.lost(reason);
                    // Its node may have failed: the partitions it was the
                    // primary of have another now, which a scan-only
                    // client hears of from no transaction's answer.
                    self.map_is_stale();
                    return Err(error);
                }
                other => return Err(unexpected_reply(self.table.name(), other)),
            }
        }
        Ok(())
    }

    /// The partition map this scan routed by may be out of date: routing
    /// asks dict for a newer one (`Cluster::routing_map`).
    fn map_is_stale(&self) {
        // A unique index's hidden table is routed by its base table's map.
        let name = self.table.base_table().unwrap_or(self.table.name());
        self.cluster.map_is_stale(name, &self.map);
    }

    /// The partition whose next row comes first in the scan's order.
    fn smallest_head(&self) -> Option<usize> {
        let mut best: Option<(usize, &Row)> = None;
        for (at, cursor) in self.cursors.iter().enumerate() {
            let Some(row) = cursor.rows.front() else {
                continue;
            };
            let better = best.is_none_or(|(_, current)| {
                let order = compare_keys(&self.table, &self.plan.order_columns, row, current);
                if self.plan.descending {
                    order == Ordering::Greater
                } else {
                    order == Ordering::Less
                }
            });
            if better {
                best = Some((at, row));
            }
        }
        best.map(|(at, _)| at)
    }
}

impl Iterator for ScanCursor<'_> {
    type Item = Result<Row, ClientError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.next_row() {
            Ok(Some(row)) => Some(Ok(row)),
            Ok(None) => {
                self.finished = true;
                self.end_walk();
                None
            }
            Err(error) => {
                self.finished = true;
                self.end_walk();
                Some(Err(error))
            }
        }
    }
}

impl Drop for ScanCursor<'_> {
    fn drop(&mut self) {
        self.end_walk();
    }
}

/// Appends the rows of a SCAN_CONF to `out`.
fn decode_rows(
    table: &Arc<Table>,
    mut bytes: &[u8],
    out: &mut VecDeque<Row>,
) -> Result<(), ClientError> {
    let malformed =
        || ClientError::Protocol(format!("malformed scan rows of table {:?}", table.name()));
    // Room for the batch's rows at once, not doubling row by row.
    out.reserve(count_rows(bytes));
    while !bytes.is_empty() {
        let prefix = bytes.get(..ROW_PREFIX_BYTES).ok_or_else(malformed)?;
        let length = u32::from_le_bytes(prefix[12..16].try_into().map_err(|_| malformed())?);
        let end = ROW_PREFIX_BYTES
            .checked_add(length as usize)
            .filter(|&end| end <= bytes.len())
            .ok_or_else(malformed)?;
        out.push_back(Table::decode_row(table, &bytes[ROW_PREFIX_BYTES..end])?);
        bytes = &bytes[end..];
    }
    Ok(())
}

/// How many whole rows `bytes` holds (those of a malformed tail are not
/// counted: decoding reports them).
fn count_rows(mut bytes: &[u8]) -> usize {
    let mut count = 0;
    while let Some(prefix) = bytes.get(..ROW_PREFIX_BYTES) {
        let length = u32::from_le_bytes([prefix[12], prefix[13], prefix[14], prefix[15]]);
        let Some(rest) = bytes.get(ROW_PREFIX_BYTES + length as usize..) else {
            break;
        };
        count += 1;
        bytes = rest;
    }
    count
}

/// How two rows' values of `columns` compare, column by column, in the
/// data nodes' order (`signal::order`): values as decoded, compared
/// without encoding them again (merging compares for every row).
fn compare_keys(table: &Table, columns: &[u16], a: &Row, b: &Row) -> Ordering {
    let (a, b) = (a.values(), b.values());
    for &column in columns {
        let column_type = table.def().columns[column as usize].column_type;
        let order = match (&a[column as usize], &b[column as usize]) {
            (Value::Null, Value::Null) => Ordering::Equal,
            (Value::Null, _) => Ordering::Less,
            (_, Value::Null) => Ordering::Greater,
            (Value::Int(x), Value::Int(y)) => x.cmp(y),
            (Value::UInt(x), Value::UInt(y)) => x.cmp(y),
            (Value::Double(x), Value::Double(y)) => {
                order::compare_values(column_type, &x.to_le_bytes(), &y.to_le_bytes())
            }
            (Value::Bytes(x), Value::Bytes(y)) => order::compare_values(column_type, x, y),
            // A column decodes to one kind of value: mixed kinds are a
            // decoding bug; numbers as numbers keep the order total.
            (x, y) => x
                .as_f64()
                .partial_cmp(&y.as_f64())
                .unwrap_or(Ordering::Equal),
        };
        if order != Ordering::Equal {
            return order;
        }
    }
    Ordering::Equal
}
