//! SCAN_PARTITIONREQ: the committed rows of one partition replica in row-id
//! order, a batch at a time, for the replica checker (which compares row
//! id, key, row GCI and values across replicas). The walk is a
//! `rowstore::RowIdCursor` from the request's row id; the answer carries
//! the row id the next batch resumes from. Rows of operations not yet
//! committed are not shown; run the checker on a quiet cluster.

use crate::{Ldm, TableState};
use kernel::{send, Context};
use rowstore::{Budget, RowIdCursor, SlotHolds};
use signal::signals::{ScanPartitionConf, ScanPartitionRef, ScanPartitionReq};
use signal::{BlockRef, ErrorCode};

/// Bytes of rows per answer.
const SCAN_BATCH_BYTES: usize = 32 * 1024;
/// Bytes before each row's attribute entries: row id, GCI, length.
const ROW_PREFIX_BYTES: usize = 4 + 8 + 4;

impl Ldm {
    pub(crate) fn scan_partition(
        &mut self,
        from: BlockRef,
        request: ScanPartitionReq,
        ctx: &mut dyn Context,
    ) {
        let request_id = request.request_id;
        let refuse = |ctx: &mut dyn Context, error| {
            send(
                ctx,
                self.address,
                from,
                ScanPartitionRef { request_id, error },
            );
        };
        let Some(TableState {
            layout, partitions, ..
        }) = self
            .tables
            .get(request.table_id as usize)
            .and_then(Option::as_ref)
        else {
            return refuse(ctx, ErrorCode::UnknownTable);
        };
        let Some(Some(partition)) = partitions.get(request.partition as usize) else {
            return refuse(ctx, ErrorCode::UnknownTable);
        };
        let partition = &partition.store;
        let Some(mut rows) = ctx.pool().alloc(SCAN_BATCH_BYTES) else {
            return refuse(ctx, ErrorCode::OutOfSignalMemory);
        };
        let buffer = rows.as_mut_slice();
        let capacity = buffer.len();
        let max_rows = request.max_rows.max(1);
        // Rows; the section's room is checked row by row.
        let mut budget = Budget::new(max_rows, usize::MAX);
        let mut used = 0;
        let mut cursor = RowIdCursor::new(request.start_row);
        let mut more = false;
        while let Some(slot) = cursor.peek(partition, &self.memory) {
            if budget.is_spent() {
                more = true;
                break;
            }
            if let SlotHolds::Committed { gci } = slot.holds {
                // Row id, GCI, length, then the row's attribute entries.
                let start = used + ROW_PREFIX_BYTES;
                if start >= capacity {
                    more = true;
                    break;
                }
                let view = partition.view(&self.memory, layout, slot.row_id);
                let Ok(length) = layout.encode_read(view, &[], &mut buffer[start..]) else {
                    // This row does not fit what is left: it starts the next batch.
                    if budget.rows_left() == max_rows {
                        return refuse(ctx, ErrorCode::RowTooLarge);
                    }
                    more = true;
                    break;
                };
                buffer[used..used + 4].copy_from_slice(&slot.row_id.to_le_bytes());
                buffer[used + 4..used + 12].copy_from_slice(&gci.to_le_bytes());
                buffer[used + 12..used + 16].copy_from_slice(&(length as u32).to_le_bytes());
                used = start + length;
                budget.charge(1, 0);
            }
            cursor.advance();
        }
        rows.set_len(used);
        let (next_row, done) = match more {
            true => (cursor.row_id(), false),
            false => (u32::MAX, true),
        };
        send(
            ctx,
            self.address,
            from,
            ScanPartitionConf {
                request_id,
                rows,
                next_row,
                done,
            },
        );
    }
}
