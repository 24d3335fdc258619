//! SCAN_PARTITIONREQ: the committed rows of one partition replica in row-id
//! order, for the replica checker (which compares row id, key, row GCI and
//! values across replicas). Rows of operations not yet committed are not
//! shown; run the checker on a quiet cluster.

use crate::partition::RowState;
use crate::{Ldm, TableState};
use kernel::{send, Context};
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
        let Some(mut rows) = ctx.pool().alloc(SCAN_BATCH_BYTES) else {
            return refuse(ctx, ErrorCode::OutOfSignalMemory);
        };
        let buffer = rows.as_mut_slice();
        let mut used = 0;
        let mut returned = 0u32;
        let mut next = partition.fixed.next_held_slot(request.start_row);
        while let Some(row) = next {
            if returned >= request.max_rows.max(1) {
                break;
            }
            if partition.state(&self.memory, row) == RowState::Live {
                let view = partition.view(&self.memory, layout, row);
                let start = used + ROW_PREFIX_BYTES;
                if start >= buffer.len() {
                    break;
                }
                let Ok(length) = layout.encode_read(view, &[], &mut buffer[start..]) else {
                    // This row does not fit what is left: it starts the next batch.
                    if returned == 0 {
                        return refuse(ctx, ErrorCode::RowTooLarge);
                    }
                    break;
                };
                buffer[used..used + 4].copy_from_slice(&row.to_le_bytes());
                let gci = partition.gci(&self.memory, row);
                buffer[used + 4..used + 12].copy_from_slice(&gci.to_le_bytes());
                buffer[used + 12..used + 16].copy_from_slice(&(length as u32).to_le_bytes());
                used = start + length;
                returned += 1;
            }
            next = row
                .checked_add(1)
                .and_then(|after| partition.fixed.next_held_slot(after));
        }
        rows.set_len(used);
        let (next_row, done) = match next {
            Some(row) => (row, false),
            None => (u32::MAX, true),
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
