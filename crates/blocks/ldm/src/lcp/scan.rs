//! One slice of a local checkpoint's row scan, and the control file built
//! when the scan reaches the end of the partition.
//!
//! The scan is a `rowstore::RowIdCursor` over the pages the partition had
//! when the LCP started (pages added later hold only rows that redo from
//! the LCP's redo start has; restore skips them too), freed pages
//! included, kept in the running LCP between slices. Each slot it reaches is written as the part it lies in
//! says (`lcp/mod.rs`): in a part written in full, every committed image;
//! in any other part, committed images and deletes whose GCI is above the
//! previous LCP's `max_gci_completed`. A slice ends after
//! `rows_per_slice` slots or once two sections' worth is buffered.

use super::files::take_chain;
use super::Running;
use super::Stage;
use crate::{Ldm, TableState};
use rowstore::{Budget, SlotHolds};
use signal::section::MAX_SECTION_BYTES;
use storage::lcp_control::{
    append_and_trim_into, part_of_row_id, ControlFile, DataFileEntry, DEFAULT_ROW_ID_PAGE_SHIFT,
};

/// Bytes buffered at which a slice stops (the buffer holds one row more).
const SLICE_BUFFER_BYTES: usize = 2 * MAX_SECTION_BYTES;

impl Ldm {
    /// Scans one slice of rows into the buffer; at the end of the
    /// partition, appends the end record and moves to `Draining`.
    pub(super) fn lcp_scan_slice(&mut self) {
        let Ldm {
            memory,
            tables,
            lcp,
            ..
        } = self;
        let running = lcp.running.as_mut().expect("a scan runs");
        let TableState {
            layout, partitions, ..
        } = tables[running.table as usize]
            .as_ref()
            .expect("checked alive");
        let partition = partitions[running.partition as usize]
            .as_ref()
            .expect("the partitions of a live table stay");
        let store = &partition.store;
        let (full_parts, changed_after) = (running.full_parts, running.changed_after);
        let changed = |gci: u64| changed_after.is_none_or(|after| gci > after);
        let writer = running.writer.as_mut().expect("scanning");
        let buffer = &mut lcp.buffer;
        let buffered_before = buffer.len();
        let mut budget = Budget::new(
            lcp.settings.rows_per_slice,
            SLICE_BUFFER_BYTES.saturating_sub(buffered_before),
        );
        let mut cursor = running.cursor;
        let finished = loop {
            // The end of the walk before the budget, the slot after: a
            // slice that spends its budget on the last slot leaves the end
            // to the next slice, as LCPs always have.
            if cursor.is_past_end(store) {
                break true;
            }
            if budget.is_spent() {
                break false;
            }
            let Some(slot) = cursor.peek(store, memory) else {
                break true;
            };
            let buffered = buffer.len();
            let row = slot.row_id;
            let in_full = full_parts.contains(part_of_row_id(row, DEFAULT_ROW_ID_PAGE_SHIFT));
            // Every slot of a page returned to DataMemory is free and keeps
            // the page's highest delete GCI. Rows of a change-only part
            // freed since the previous LCP get delete records; otherwise
            // the page has nothing to write.
            if let SlotHolds::FreedPage { gci } = slot.holds {
                if in_full || !changed(gci) {
                    cursor.skip_page();
                    budget.charge(1, 0);
                    continue;
                }
            }
            cursor.advance();
            match slot.holds {
                SlotHolds::Committed { gci } => {
                    running.rows += 1;
                    if in_full || changed(gci) {
                        store.verify_checksum(memory, layout, row);
                        let view = store.view(memory, layout, row);
                        lcp.image.clear();
                        lcp.image.extend_from_slice(view.fixed);
                        lcp.image
                            .extend_from_slice(&view.var[..layout.var_part_bytes(view.var)]);
                        writer.row(buffer, row, gci, &lcp.image);
                    }
                }
                // No committed row (a freed page's slot, free, an insert
                // not yet committed, a delete not yet freed): a change-only
                // part records the slot's delete if it came after the
                // previous LCP's scan.
                SlotHolds::FreedPage { gci }
                | SlotHolds::Free { gci }
                | SlotHolds::Reserved { gci } => {
                    if !in_full && changed(gci) {
                        writer.delete(buffer, row, gci);
                    }
                }
            }
            budget.charge(1, buffer.len() - buffered);
        };
        running.cursor = cursor;
        lcp.pacing.spend((buffer.len() - buffered_before) as u64);
        if finished {
            // A delete committed before the scan reached its row left no
            // record: the LCP reflects every GCI committed until now.
            let highest_committed_gci = lcp.highest_committed_gci;
            let previous = partition.lcp.newest.as_ref();
            let spare_chains = &mut lcp.spare_chains;
            finish_scan(
                running,
                buffer,
                spare_chains,
                highest_committed_gci,
                previous,
            );
        }
    }
}

/// The scan reached the end of the partition: appends the end record and
/// builds the control file (the chain: `previous`'s with this data file
/// appended, trimmed of files no part needs any more); the rest of the
/// file is sent next (`Draining`).
fn finish_scan(
    running: &mut Running,
    buffer: &mut Vec<u8>,
    spare_chains: &mut Vec<Vec<DataFileEntry>>,
    highest_committed_gci: u64,
    previous: Option<&ControlFile>,
) {
    let writer = running.writer.take().expect("scanning");
    let header = *writer.header();
    let summary = writer.finish(buffer);
    let max_gci_written = summary.max_gci_written.max(highest_committed_gci);
    let mut chain = take_chain(spare_chains);
    append_and_trim_into(
        previous.map_or(&[][..], |control| &control.data_files),
        summary.entry(&header),
        &mut chain,
    );
    running.control = Some(ControlFile {
        lcp_id: running.lcp_id,
        previous_lcp_id: previous.map_or(0, |control| control.lcp_id),
        table_id: running.table,
        table_version: running.version,
        partition: running.partition,
        row_id_page_shift: DEFAULT_ROW_ID_PAGE_SHIFT,
        max_gci_completed: running.max_gci_completed,
        max_gci_written,
        redo_start_lsn: running.redo_start_lsn,
        row_count: running.rows,
        max_page_count: running.max_page_count,
        data_files: chain,
    });
    running.stage = Stage::Draining;
}
