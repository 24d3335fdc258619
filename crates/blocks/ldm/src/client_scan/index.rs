//! An index scan: the live rows of a partition through one of its ordered
//! indexes (the primary key's, 0, or another of the table's), between two
//! bounds, in key order or reversed (designs 0021 and 0023). The resume point is the (key, row id) of the last entry looked
//! at, which the answer carries: entries are ordered by (key, row id), so
//! the next batch seeks just past it, and a row that did not change during
//! the scan is looked at exactly once, whatever was inserted or deleted
//! between batches.

use super::{Batch, Offer, OwnWrites};
use crate::operation::OpState;
use crate::own_writes::{prepared_image, written, Own};
use rowstore::ordered_key::{KeyBound, OrderedKey};
use rowstore::{
    Entry, OrderedIndex, PageMemory, Partition, Position, RowLayout, RowState, RowView,
};
use signal::scan_bounds;
use signal::section::SectionPool;
use signal::signals::{scan_flags, ScanReq};
use signal::{ErrorCode, Section};
use std::cmp::Ordering;

/// Walks the index from the request's start until the batch is spent or
/// the bound is passed: whether the walk ended, and the row id and key of
/// the entry to resume after.
///
/// With `own`, the transaction's own writes show: an entry whose row it
/// deleted is skipped, one whose row it updated without changing this
/// index's key shows its image, and the rows it inserted or moved in
/// this index (whose entries, if any, are skipped) are placed by the
/// keys of their images into `placed` and merged into the walk.
pub(super) fn walk(
    memory: &PageMemory,
    partition: &Partition,
    request: &ScanReq,
    batch: &mut Batch<'_>,
    pool: &'static SectionPool,
    own: Option<&OwnWrites<'_>>,
    placed: &mut Vec<(Entry, u32)>,
) -> Result<(bool, u32, Option<Section>), ErrorCode> {
    let layout = batch.layout;
    let (key, index) = partition
        .ordered_index(request.index)
        .ok_or(ErrorCode::UnknownIndex)?;
    let walk = parse_walk(key, request)?;
    let scan = Scan {
        memory,
        layout,
        partition,
        index,
        key,
    };
    placed.clear();
    if let Some(own) = own {
        scan.place_own(&walk, own, placed);
    }
    let image = |operation: u32| -> RowView<'_> {
        let operations = own
            .expect("only a scan with a transaction places rows")
            .operations;
        prepared_image(operations, layout, operation)
    };
    let mut next_placed = 0;
    // The last entry looked at, and the operation whose image it showed
    // when it was a placed row.
    let mut last: Option<(Entry, Option<u32>)> = None;
    let mut at = scan.start(&walk);
    let mut done = true;
    loop {
        let from_tree = at
            .map(|position| (position, scan.index.entry(memory, position)))
            .filter(|&(_, entry)| scan.within(&walk, entry));
        let from_placed = placed.get(next_placed).copied();
        // Which comes first in the walk's direction.
        let take_placed = match (from_tree, from_placed) {
            (None, None) => break,
            (None, Some(_)) => true,
            (Some(_), None) => false,
            (Some((_, entry)), Some((mine, operation))) => {
                let order = key.order(
                    layout,
                    entry,
                    mine,
                    || image(operation),
                    |row| partition.view(memory, layout, row),
                );
                if walk.descending {
                    order == Ordering::Less
                } else {
                    order == Ordering::Greater
                }
            }
        };
        if batch.is_spent() {
            done = false;
            break;
        }
        if take_placed {
            let (entry, operation) = from_placed.expect("chosen");
            // An uncommitted image has no commit GCI.
            if batch.offer(entry.row, image(operation), 0, || {})? == Offer::Full {
                done = false;
                break;
            }
            last = Some((entry, Some(operation)));
            next_placed += 1;
            continue;
        }
        let (position, entry) = from_tree.expect("chosen");
        let committed = partition.view(memory, layout, entry.row);
        let shown = OwnWrites::shown(own, memory, layout, partition, entry.row);
        let offered = match shown {
            Own::Committed => {
                let gci = partition.gci(memory, entry.row);
                let verify = || partition.verify_checksum(memory, layout, entry.row);
                Some(batch.offer(entry.row, committed, gci, verify)?)
            }
            // Updated in place: shown here with its image.
            Own::Row { view, .. } if key.compare(layout, view, committed) == Ordering::Equal => {
                Some(batch.offer(entry.row, view, 0, || {})?)
            }
            // Moved by the transaction (placed by its image's key), or
            // deleted by it: looked at, so that a long run of them still
            // ends batches.
            Own::Row { .. } | Own::Deleted => {
                batch.pass();
                None
            }
        };
        if offered == Some(Offer::Full) {
            done = false;
            break;
        }
        last = Some((entry, None));
        at = if walk.descending {
            scan.index.prev(memory, position)
        } else {
            scan.index.next(memory, position)
        };
    }
    if done {
        return Ok((true, 0, None));
    }
    let (last, operation) =
        last.expect("a batch looks at its first entry: it is refused if that does not fit");
    let mut section = pool
        .alloc_leaving_reserve(key.entries_max_bytes())
        .ok_or(ErrorCode::OutOfSignalMemory)?;
    let view = match operation {
        Some(operation) => image(operation),
        None => partition.view(memory, layout, last.row),
    };
    let length = key.write_entries(layout, view, section.as_mut_slice())?;
    section.set_len(length);
    Ok((false, last.row, Some(section)))
}

/// The walk's bounds, checked against the index's key.
struct Walk<'a> {
    low: KeyBound<'a>,
    high: KeyBound<'a>,
    low_inclusive: bool,
    high_inclusive: bool,
    /// The last entry looked at, to resume after.
    resume: Option<(KeyBound<'a>, u32)>,
    descending: bool,
}

/// The bounds and resume point of `request`, checked against `key`.
fn parse_walk<'a>(key: &OrderedKey, request: &'a ScanReq) -> Result<Walk<'a>, ErrorCode> {
    let flags = request.flags;
    let bounds = scan_bounds::decode(request.bounds.as_slice())?;
    let resume = if flags & scan_flags::RESUME != 0 {
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
        low_inclusive: flags & scan_flags::LOW_INCLUSIVE != 0,
        high_inclusive: flags & scan_flags::HIGH_INCLUSIVE != 0,
        resume,
        descending: flags & scan_flags::DESCENDING != 0,
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

    /// Puts into `placed`, in the walk's order, the rows `own`'s
    /// transaction wrote in this partition whose images this index does
    /// not hold where they belong (inserted, revived after a committed
    /// delete, or updated to another key in this index) and that lie
    /// within the walk's bounds, past its resume point.
    fn place_own(&self, walk: &Walk<'_>, own: &OwnWrites<'_>, placed: &mut Vec<(Entry, u32)>) {
        let (memory, layout, partition, key) = (self.memory, self.layout, self.partition, self.key);
        for operation in written(own.operations, own.written_head) {
            let record = &own.operations[operation];
            debug_assert_eq!(record.transaction_id, own.transaction_id);
            if record.table_id != own.table_id
                || record.partition != own.partition
                || record.state != OpState::Prepared
            {
                continue;
            }
            let row = record.row;
            // The row's latest image of the transaction's, looked at once.
            let view = match OwnWrites::shown(Some(own), memory, layout, partition, row) {
                Own::Row {
                    operation: latest,
                    view,
                } if latest == operation => view,
                _ => continue,
            };
            if partition.state(memory, row) == RowState::Live
                && key.compare(layout, view, partition.view(memory, layout, row)) == Ordering::Equal
            {
                // Its entry is where its image belongs: the walk shows it.
                continue;
            }
            let entry = Entry {
                prefix: key.prefix(layout, view),
                row,
            };
            let compare = |bound: &KeyBound<'_>| key.compare_bound(layout, entry, bound, |_| view);
            let below_low = walk.low.columns() > 0
                && match compare(&walk.low) {
                    Ordering::Less => true,
                    Ordering::Equal => !walk.low_inclusive,
                    Ordering::Greater => false,
                };
            let above_high = walk.high.columns() > 0
                && match compare(&walk.high) {
                    Ordering::Greater => true,
                    Ordering::Equal => !walk.high_inclusive,
                    Ordering::Less => false,
                };
            let passed = walk.resume.as_ref().is_some_and(|resume| {
                let order = compare(&resume.0).then(row.cmp(&resume.1));
                if walk.descending {
                    order != Ordering::Less
                } else {
                    order != Ordering::Greater
                }
            });
            if !below_low && !above_high && !passed {
                placed.push((entry, operation));
            }
        }
        placed.sort_unstable_by(|&(a, a_operation), &(b, b_operation)| {
            let order = key.order(
                layout,
                a,
                b,
                || prepared_image(own.operations, layout, b_operation),
                |_| prepared_image(own.operations, layout, a_operation),
            );
            if walk.descending {
                order.reverse()
            } else {
                order
            }
        });
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
