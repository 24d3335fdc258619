//! INDEX_SCANREQ: committed rows of one partition replica through its
//! primary-key ordered index, between two bounds, in key order or
//! reversed, a batch at a time (docs/design/scans-and-indexes.md §4,
//! design 0021).
//!
//! A committed read: no locks, each row as last committed (the index holds
//! live rows only). Nothing is kept here between batches: the client
//! resumes after the last row it got, by that row's key and row id, and
//! because entries are ordered by (key, row id) a row that did not change
//! during the scan is returned exactly once, whatever was inserted or
//! deleted between batches. A client that stops asking leaves nothing
//! behind.
//!
//! Refused: a malformed or mismatched bound (BadRequest, BadValue,
//! NullNotAllowed), a table or partition this ldm does not hold
//! (UnknownTable), a stale table version (SchemaVersionMismatch), a node
//! still copying its data in a node restart (NodeNotStarted), an expired
//! read lease (ReadLeaseExpired), no signal memory for the answer.

use crate::{Ldm, TableState};
use kernel::{send, Context};
use rowstore::ordered_key::{KeyBound, OrderedKey};
use rowstore::{Budget, Entry, OrderedIndex, PageMemory, Partition, Position, RowLayout};
use signal::scan_bounds;
use signal::signals::{index_scan_flags, IndexScanConf, IndexScanRef, IndexScanReq};
use signal::{BlockRef, ErrorCode};
use std::cmp::Ordering;

/// Bytes of rows per answer.
const SCAN_BATCH_BYTES: usize = 32 * 1024;
/// Bytes before each row's attribute entries: row id, GCI, length.
const ROW_PREFIX_BYTES: usize = 4 + 8 + 4;

/// The walk's bounds, checked against the index's key.
struct Walk<'a> {
    low: KeyBound<'a>,
    high: KeyBound<'a>,
    low_inclusive: bool,
    high_inclusive: bool,
    /// The last row returned, to resume after.
    resume: Option<(KeyBound<'a>, u32)>,
    descending: bool,
}

impl Ldm {
    pub(crate) fn index_scan(
        &mut self,
        from: BlockRef,
        request: IndexScanReq,
        ctx: &mut dyn Context,
    ) {
        let request_id = request.request_id;
        let refuse = |ctx: &mut dyn Context, error| {
            send(ctx, self.address, from, IndexScanRef { request_id, error });
        };
        if request.flags & !index_scan_flags::ALL != 0 {
            return refuse(ctx, ErrorCode::BadRequest);
        }
        let Some(TableState {
            definition,
            layout,
            partitions,
            ..
        }) = self
            .tables
            .get(request.table_id as usize)
            .and_then(Option::as_ref)
        else {
            return refuse(ctx, ErrorCode::UnknownTable);
        };
        if definition.version != request.table_version {
            return refuse(ctx, ErrorCode::SchemaVersionMismatch);
        }
        let Some(Some(partition)) = partitions.get(request.partition as usize) else {
            return refuse(ctx, ErrorCode::UnknownTable);
        };
        if self.node_failures.starting().contains(self.address.node) {
            // Its rows may be older than the cluster's until the copy ends.
            return refuse(ctx, ErrorCode::NodeNotStarted);
        }
        if ctx.now_ms() >= self.read_lease_until_ms {
            return refuse(ctx, ErrorCode::ReadLeaseExpired);
        }
        let store = &partition.store;
        let key = store.ordered_key();
        let walk = match parse_walk(key, &request) {
            Ok(walk) => walk,
            Err(error) => return refuse(ctx, error),
        };
        let Some(mut rows) = ctx.pool().alloc(SCAN_BATCH_BYTES) else {
            return refuse(ctx, ErrorCode::OutOfSignalMemory);
        };
        let scan = Scan {
            memory: &self.memory,
            layout,
            partition: store,
            index: &store.ordered,
            key,
        };
        let max_rows = request.max_rows.max(1);
        let mut budget = Budget::new(max_rows, usize::MAX);
        let buffer = rows.as_mut_slice();
        let mut used = 0;
        let mut done = true;
        let mut at = scan.start(&walk);
        while let Some(position) = at {
            let entry = scan.index.entry(scan.memory, position);
            if !scan.within(&walk, entry) {
                break;
            }
            if budget.is_spent() {
                done = false;
                break;
            }
            // Row id, GCI, length, then the row's attribute entries.
            let start = used + ROW_PREFIX_BYTES;
            let view = store.view(scan.memory, layout, entry.row);
            let encoded = (start < buffer.len())
                .then(|| layout.encode_read(view, &[], &mut buffer[start..]).ok())
                .flatten();
            let Some(length) = encoded else {
                // This row does not fit what is left: it starts the next batch.
                if used == 0 {
                    return refuse(ctx, ErrorCode::RowTooLarge);
                }
                done = false;
                break;
            };
            store.verify_checksum(scan.memory, layout, entry.row);
            let gci = store.gci(scan.memory, entry.row);
            buffer[used..used + 4].copy_from_slice(&entry.row.to_le_bytes());
            buffer[used + 4..used + 12].copy_from_slice(&gci.to_le_bytes());
            buffer[used + 12..used + 16].copy_from_slice(&(length as u32).to_le_bytes());
            used = start + length;
            budget.charge(1, 0);
            at = if walk.descending {
                scan.index.prev(scan.memory, position)
            } else {
                scan.index.next(scan.memory, position)
            };
        }
        rows.set_len(used);
        send(
            ctx,
            self.address,
            from,
            IndexScanConf {
                request_id,
                done,
                rows,
            },
        );
    }
}

/// The bounds and resume point of `request`, checked against `key`.
fn parse_walk<'a>(key: &OrderedKey, request: &'a IndexScanReq) -> Result<Walk<'a>, ErrorCode> {
    let flags = request.flags;
    let bounds = scan_bounds::decode(request.bounds.as_slice())?;
    let resume = if flags & index_scan_flags::RESUME != 0 {
        let bound = key.bound(bounds.resume)?;
        if bound.columns() != key.columns() {
            // A resume point is a whole key.
            return Err(ErrorCode::BadRequest);
        }
        Some((bound, request.resume_row))
    } else {
        if !bounds.resume.is_empty() {
            return Err(ErrorCode::BadRequest);
        }
        None
    };
    Ok(Walk {
        low: key.bound(bounds.low)?,
        high: key.bound(bounds.high)?,
        low_inclusive: flags & index_scan_flags::LOW_INCLUSIVE != 0,
        high_inclusive: flags & index_scan_flags::HIGH_INCLUSIVE != 0,
        resume,
        descending: flags & index_scan_flags::DESCENDING != 0,
    })
}

/// One partition's index and rows, for a walk.
struct Scan<'a> {
    memory: &'a PageMemory,
    layout: &'a RowLayout,
    partition: &'a Partition,
    index: &'a OrderedIndex,
    key: &'a OrderedKey,
}

impl Scan<'_> {
    /// How `entry` stands relative to `bound` on its columns.
    fn compare(&self, entry: Entry, bound: &KeyBound<'_>) -> Ordering {
        self.key.compare_bound(self.layout, entry, bound, |row| {
            self.partition.view(self.memory, self.layout, row)
        })
    }

    /// How `entry` stands relative to the resume point (key, row id).
    fn compare_resume(&self, entry: Entry, resume: &(KeyBound<'_>, u32)) -> Ordering {
        self.compare(entry, &resume.0)
            .then(entry.row.cmp(&resume.1))
    }

    /// Whether `entry` is below the low bound.
    fn below_low(&self, walk: &Walk<'_>, entry: Entry) -> bool {
        walk.low.columns() > 0
            && match self.compare(entry, &walk.low) {
                Ordering::Less => true,
                Ordering::Equal => !walk.low_inclusive,
                Ordering::Greater => false,
            }
    }

    /// Whether `entry` is above the high bound.
    fn above_high(&self, walk: &Walk<'_>, entry: Entry) -> bool {
        walk.high.columns() > 0
            && match self.compare(entry, &walk.high) {
                Ordering::Greater => true,
                Ordering::Equal => !walk.high_inclusive,
                Ordering::Less => false,
            }
    }

    /// Whether the walk goes on at `entry` (it ends at the first entry
    /// past the bound it walks towards).
    fn within(&self, walk: &Walk<'_>, entry: Entry) -> bool {
        if walk.descending {
            !self.below_low(walk, entry)
        } else {
            !self.above_high(walk, entry)
        }
    }

    /// The first entry of the walk: after the resume point, or at the bound
    /// it starts from, or at the end of the index.
    fn start(&self, walk: &Walk<'_>) -> Option<Position> {
        let (index, memory) = (self.index, self.memory);
        match (&walk.resume, walk.descending) {
            (Some(resume), false) => {
                let after = index.seek(memory, |e| {
                    self.compare_resume(e, resume) != Ordering::Greater
                });
                // A resume point below the low bound (a client's mistake)
                // must not widen the range.
                after.and_then(|position| self.skip_below_low(walk, position))
            }
            (Some(resume), true) => {
                let before = index
                    .seek_last_before(memory, |e| self.compare_resume(e, resume) == Ordering::Less);
                before.and_then(|position| self.skip_above_high(walk, position))
            }
            (None, false) if walk.low.columns() > 0 => {
                index.seek(memory, |e| self.below_low(walk, e))
            }
            (None, false) => index.first(memory),
            (None, true) if walk.high.columns() > 0 => {
                index.seek_last_before(memory, |e| !self.above_high(walk, e))
            }
            (None, true) => index.last(memory),
        }
    }

    fn skip_below_low(&self, walk: &Walk<'_>, position: Position) -> Option<Position> {
        let entry = self.index.entry(self.memory, position);
        if self.below_low(walk, entry) {
            self.index.seek(self.memory, |e| self.below_low(walk, e))
        } else {
            Some(position)
        }
    }

    fn skip_above_high(&self, walk: &Walk<'_>, position: Position) -> Option<Position> {
        let entry = self.index.entry(self.memory, position);
        if self.above_high(walk, entry) {
            self.index
                .seek_last_before(self.memory, |e| !self.above_high(walk, e))
        } else {
            Some(position)
        }
    }
}
