//! A full scan: the partition's live rows in row-id order, walked with the
//! shared `RowIdCursor` (docs/design/scans-and-indexes.md §3). The resume
//! point is the row id of the first slot not looked at; rows never move,
//! so resuming there visits every row that lived through the scan once.

use super::{Batch, Offer, OwnWrites};
use crate::own_writes::Own;
use rowstore::{PageMemory, Partition, RowIdCursor, SlotHolds};
use signal::signals::{scan_flags, ScanReq};
use signal::ErrorCode;

/// Slots (live or not) one batch may visit.
const SLOTS_PER_BATCH: u32 = 4 * super::EXAMINE_PER_BATCH;

/// Walks from the request's resume row (or the first) until the batch is
/// spent or the partition ends: whether it ended, and where to resume.
/// With `own`, a row the transaction wrote shows as it wrote it: its
/// insert's reserved slot and its update's image are offered, its delete
/// skipped.
pub(super) fn walk(
    memory: &PageMemory,
    partition: &Partition,
    request: &ScanReq,
    batch: &mut Batch<'_>,
    own: Option<&OwnWrites<'_>>,
) -> Result<(bool, u32), ErrorCode> {
    // Bounds and directions belong to an index.
    let index_only =
        scan_flags::LOW_INCLUSIVE | scan_flags::HIGH_INCLUSIVE | scan_flags::DESCENDING;
    if request.flags & index_only != 0 || !request.bounds.as_slice().is_empty() {
        return Err(ErrorCode::BadRequest);
    }
    let start = if request.flags & scan_flags::RESUME != 0 {
        request.resume_row
    } else {
        0
    };
    let layout = batch.layout;
    let mut cursor = RowIdCursor::new(start);
    // Free and reserved slots cost a look too: a partition of few live
    // rows on many pages still ends its batches.
    let mut slots = 0;
    while let Some(slot) = cursor.peek(partition, memory) {
        if batch.is_spent() || slots >= SLOTS_PER_BATCH {
            return Ok((false, cursor.row_id()));
        }
        slots += 1;
        let (committed, gci) = match slot.holds {
            SlotHolds::Committed { gci } => (true, gci),
            SlotHolds::Reserved { gci } => (false, gci),
            _ => {
                cursor.advance();
                continue;
            }
        };
        let shown = OwnWrites::shown(own, memory, layout, partition, slot.row_id);
        let offered = match shown {
            Own::Committed if committed => {
                let view = partition.view(memory, layout, slot.row_id);
                let verify = || partition.verify_checksum(memory, layout, slot.row_id);
                Some(batch.offer(slot.row_id, view, gci, verify)?)
            }
            // An uncommitted image has no commit GCI.
            Own::Row { view, .. } => Some(batch.offer(slot.row_id, view, 0, || {})?),
            Own::Committed | Own::Deleted => None,
        };
        if offered == Some(Offer::Full) {
            return Ok((false, cursor.row_id()));
        }
        cursor.advance();
    }
    Ok((true, u32::MAX))
}
