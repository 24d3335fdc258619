//! `RowIdCursor`: the walk over one partition's row ids, in order, a batch
//! at a time (docs/design/scans-and-indexes.md §3). Every walk over a
//! partition's rows uses it: local checkpoints (`ldm::lcp::scan`), the
//! replica checker's partition scan (`ldm::scan`), and, once built,
//! node-restart copy and client scans.
//!
//! A row id is a fixed-part slot: `page << SLOT_BITS | slot` (`slots`).
//! The cursor is only a position, the next row id to look at, plus how far
//! to go and what to report. It borrows nothing between batches (the ldm
//! serves other signals in between, which may insert and delete rows), so
//! it is a small `Copy` value the walker keeps (the LCP in its running
//! state, a client scan as the row id in its next request) and hands the
//! partition and DataMemory again at each step. Rows never move, so
//! resuming visits every row that existed for the whole walk exactly once,
//! whatever was inserted or deleted between batches.
//!
//! What a walk sees, slot by slot ([`SlotHolds`]): a committed row, a slot
//! taken without a committed row (an insert prepared, a delete committed
//! and not yet freed), a free slot with the GCI of the delete that freed
//! it, and, for walks that must see deletes (LCPs, node-restart copy), the
//! slots of pages returned to DataMemory with the highest GCI of the
//! deletes that emptied them. Other walks skip those pages whole.
//!
//! One batch:
//!
//! ```
//! use rowstore::{Budget, PageMemory, Partition, RowIdCursor, RowLayout, SlotHolds, PAGE_SIZE};
//! use signal::schema::{ColumnDef, ColumnType, TableDef};
//!
//! let table = TableDef {
//!     indexes: Vec::new(),
//!     revision: 0,
//!     id: 0,
//!     version: 1,
//!     name: "t".into(),
//!     columns: vec![ColumnDef {
//!         name: "k".into(),
//!         column_type: ColumnType::Int { unsigned: false },
//!         nullable: false,
//!     }],
//!     primary_key: vec![0],
//!     partitions: 1,
//!     partition_key: Vec::new(),
//! };
//! let layout = RowLayout::new(&table);
//! let mut memory = PageMemory::new(4 * PAGE_SIZE as u64);
//! let mut partition = Partition::new(0, &layout, &memory);
//! for hash in 0..3 {
//!     let row = partition.reserve_row(&mut memory).unwrap();
//!     let image = vec![0u8; layout.fixed_body_bytes];
//!     partition.fill_reserved_row(&mut memory, &layout, row, &image, hash).unwrap();
//!     partition.commit_row(&mut memory, &layout, row, 7, 0);
//! }
//!
//! // Two committed rows per batch; the cursor is kept between batches.
//! let mut cursor = RowIdCursor::new(0);
//! let mut batch = Vec::new();
//! let mut budget = Budget::new(2, usize::MAX);
//! while let Some(slot) = cursor.peek(&partition, &memory) {
//!     if budget.is_spent() {
//!         break; // the next batch starts at this slot
//!     }
//!     if let SlotHolds::Committed { gci } = slot.holds {
//!         batch.push((slot.row_id, gci));
//!         budget.charge(1, 0);
//!     }
//!     cursor.advance();
//! }
//! assert_eq!(batch, [(0, 7), (1, 7)]);
//! assert_eq!(cursor.row_id(), 2, "where the next batch resumes");
//! ```
//!
//! What a batch may take is the walker's [`Budget`]: rows (or slots
//! looked at: the walker decides what it charges) and bytes. The walker
//! checks it before each slot and stops there, so a batch ends at a slot
//! boundary and the next one starts at that slot.

use crate::page_memory::PageMemory;
use crate::partition::{Partition, RowState};
use crate::slots::SLOT_BITS;

const SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;

/// What a slot holds, as a walk reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotHolds {
    /// A committed row (state Live); `gci` is its last change's.
    Committed {
        /// The GCI of the row's last committed change.
        gci: u64,
    },
    /// Taken, with no committed row in it: an insert prepared here
    /// (invisible to committed reads), or a delete committed and not yet
    /// freed (`gci` is then the delete's).
    Reserved {
        /// The GCI in the row header.
        gci: u64,
    },
    /// A free slot on a page the partition holds.
    Free {
        /// The GCI of the delete that freed it (at least: a page taken
        /// again after being returned starts every slot at that page's
        /// highest delete GCI; 0 for a slot never used).
        gci: u64,
    },
    /// A slot on a page returned to DataMemory: every slot there is free.
    /// Reported only by cursors `visiting_freed_pages`.
    FreedPage {
        /// The highest GCI of the deletes that emptied the page.
        gci: u64,
    },
}

impl SlotHolds {
    /// The slot's GCI: of the committed row's last change, or of the
    /// delete that freed it.
    #[inline]
    pub fn gci(self) -> u64 {
        match self {
            SlotHolds::Committed { gci }
            | SlotHolds::Reserved { gci }
            | SlotHolds::Free { gci }
            | SlotHolds::FreedPage { gci } => gci,
        }
    }
}

/// One slot a walk reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowSlot {
    /// Its row id.
    pub row_id: u32,
    /// What it holds.
    pub holds: SlotHolds,
}

/// A position in a walk over one partition's row ids (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowIdCursor {
    /// The next row id to look at; it may name a slot past the end of its
    /// page, or on a page the walk skips (`peek` moves past those).
    next: u32,
    /// The walk ends before this logical page (and always at the
    /// partition's last page).
    end_page: u32,
    /// Whether the slots of pages returned to DataMemory are reported.
    freed_pages: bool,
}

impl RowIdCursor {
    /// A walk from row id `row_id` (0: the partition's start; else where a
    /// previous batch stopped) to the partition's end as it is at each
    /// step, over the slots of the pages it holds.
    #[inline]
    pub const fn new(row_id: u32) -> RowIdCursor {
        RowIdCursor {
            next: row_id,
            end_page: u32::MAX,
            freed_pages: false,
        }
    }

    /// Also reports every slot of the pages returned to DataMemory, as
    /// `SlotHolds::FreedPage` (walks that must find deletes: LCPs,
    /// node-restart copy). The walker may pass the rest of such a page
    /// with `skip_page`.
    #[inline]
    pub const fn visiting_freed_pages(self) -> RowIdCursor {
        RowIdCursor {
            freed_pages: true,
            ..self
        }
    }

    /// Ends the walk before logical page `pages`: an LCP walks the pages
    /// the partition had when it started (rows on pages added later are in
    /// the redo log after its start).
    #[inline]
    pub const fn ending_before_page(self, pages: u32) -> RowIdCursor {
        RowIdCursor {
            end_page: pages,
            ..self
        }
    }

    /// Where the walk stands: after `peek` found a slot, that slot's row
    /// id; the row id a stopped walk resumes from (`RowIdCursor::new`).
    #[inline]
    pub const fn row_id(&self) -> u32 {
        self.next
    }

    /// Whether the position is on or past the page the walk ends before:
    /// the walk is over, known without looking at a slot or moving. (`peek`
    /// may find it over sooner: past the last slot of the last page, or
    /// with only skipped pages left.)
    #[inline]
    pub fn is_past_end(&self, partition: &Partition) -> bool {
        self.next >> SLOT_BITS >= self.end_page.min(partition.fixed.logical_pages())
    }

    /// Moves to the next slot to visit, at or after the position, and says
    /// what it holds, without passing it (`advance` does); `None` once the
    /// walk is over.
    #[inline]
    pub fn peek(&mut self, partition: &Partition, memory: &PageMemory) -> Option<RowSlot> {
        let fixed = &partition.fixed;
        // A page the partition never had holds nothing.
        let end_page = self.end_page.min(fixed.logical_pages());
        loop {
            let page = self.next >> SLOT_BITS;
            if page >= end_page {
                return None;
            }
            // `page` is below the page count, so the next page's first row
            // id fits a u32.
            let next_page = (page + 1) << SLOT_BITS;
            if self.next & SLOT_MASK >= fixed.slots_per_page() {
                self.next = next_page;
                continue;
            }
            let row_id = self.next;
            let holds = match fixed.freed_page_gci(row_id) {
                Some(gci) if self.freed_pages => SlotHolds::FreedPage { gci },
                Some(_) => {
                    self.next = next_page;
                    continue;
                }
                None => {
                    let gci = partition.gci(memory, row_id);
                    match partition.state(memory, row_id) {
                        RowState::Live => SlotHolds::Committed { gci },
                        RowState::Reserved => SlotHolds::Reserved { gci },
                        RowState::Free => SlotHolds::Free { gci },
                    }
                }
            };
            return Some(RowSlot { row_id, holds });
        }
    }

    /// Passes the slot `peek` reported.
    #[inline]
    pub fn advance(&mut self) {
        self.next = self.next.saturating_add(1);
    }

    /// Instead of `advance`: passes the slot `peek` reported and the rest
    /// of its page (a walker that needs nothing more from a freed page).
    #[inline]
    pub fn skip_page(&mut self) {
        let next_page = (u64::from(self.next >> SLOT_BITS) + 1) << SLOT_BITS;
        self.next = u32::try_from(next_page).unwrap_or(u32::MAX);
    }
}

/// What one batch of a walk may still take: rows (or slots: what a row
/// costs is the walker's choice) and bytes. A walker checks `is_spent`
/// before each slot and stops there; the charge of the slot that spends
/// the budget may overshoot it (a batch's last row is whole).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    rows: u32,
    bytes: usize,
}

impl Budget {
    /// A budget of `rows` rows and `bytes` bytes (`usize::MAX`: no limit
    /// on bytes).
    #[inline]
    pub const fn new(rows: u32, bytes: usize) -> Budget {
        Budget { rows, bytes }
    }

    /// Whether the batch must stop before the next slot.
    #[inline]
    pub const fn is_spent(&self) -> bool {
        self.rows == 0 || self.bytes == 0
    }

    /// Charges what one slot took.
    #[inline]
    pub fn charge(&mut self, rows: u32, bytes: usize) {
        self.rows = self.rows.saturating_sub(rows);
        self.bytes = self.bytes.saturating_sub(bytes);
    }

    /// Rows left.
    #[inline]
    pub const fn rows_left(&self) -> u32 {
        self.rows
    }

    /// Bytes left.
    #[inline]
    pub const fn bytes_left(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::RowLayout;
    use crate::page_memory::PAGE_SIZE;
    use signal::schema::{ColumnDef, ColumnType, TableDef};

    /// A table whose fixed slot is 512 bytes: 64 slots per page.
    fn layout() -> RowLayout {
        RowLayout::new(&TableDef {
            indexes: Vec::new(),
            revision: 0,
            id: 0,
            version: 1,
            name: "t".into(),
            columns: vec![
                ColumnDef {
                    name: "k".into(),
                    column_type: ColumnType::Int { unsigned: false },
                    nullable: false,
                },
                ColumnDef {
                    name: "c".into(),
                    column_type: ColumnType::Char(250),
                    nullable: false,
                },
                ColumnDef {
                    name: "d".into(),
                    column_type: ColumnType::Char(230),
                    nullable: false,
                },
            ],
            primary_key: vec![0],
            partitions: 1,
            partition_key: Vec::new(),
        })
    }

    struct Rows {
        layout: RowLayout,
        memory: PageMemory,
        partition: Partition,
    }

    impl Rows {
        fn new() -> Rows {
            let layout = layout();
            let memory = PageMemory::new(64 * PAGE_SIZE as u64);
            let partition = Partition::new(0, &layout, &memory);
            Rows {
                layout,
                memory,
                partition,
            }
        }

        fn slots_per_page(&self) -> u32 {
            self.partition.fixed.slots_per_page()
        }

        /// Inserts and commits a row at `gci`; returns its row id.
        fn insert(&mut self, gci: u64) -> u32 {
            let Rows {
                layout,
                memory,
                partition,
            } = self;
            let row = partition.reserve_row(memory).expect("memory");
            let image = vec![0u8; layout.fixed_body_bytes];
            partition
                .fill_reserved_row(memory, layout, row, &image, row)
                .expect("memory");
            partition.commit_row(memory, layout, row, gci, 0);
            row
        }

        /// Deletes row `row` at `gci`: index entry and slot.
        fn delete(&mut self, row: u32, gci: u64) {
            let Rows {
                layout,
                memory,
                partition,
            } = self;
            assert!(partition.index.remove(memory, row, row));
            partition.free_row(memory, layout, row, Some(gci));
        }

        /// Every slot a cursor from `cursor` reports, in one batch.
        fn walk(&self, mut cursor: RowIdCursor) -> Vec<RowSlot> {
            let mut slots = Vec::new();
            while let Some(slot) = cursor.peek(&self.partition, &self.memory) {
                slots.push(slot);
                cursor.advance();
            }
            slots
        }
    }

    #[test]
    fn a_walk_reports_every_slot_of_held_pages_in_order() {
        let mut rows = Rows::new();
        let per_page = rows.slots_per_page();
        assert_eq!(per_page, 64, "the test's slot size");
        for gci in 1..=3 {
            assert_eq!(rows.insert(gci), (gci - 1) as u32);
        }
        rows.delete(1, 9);
        let reserved = rows
            .partition
            .reserve_row(&mut rows.memory)
            .expect("memory");
        assert_eq!(reserved, 1, "the freed slot is taken again");
        let slots = rows.walk(RowIdCursor::new(0));
        assert_eq!(slots.len(), per_page as usize, "one page, every slot");
        assert_eq!(slots[0].holds, SlotHolds::Committed { gci: 1 });
        assert_eq!(
            slots[1].holds,
            SlotHolds::Reserved { gci: 9 },
            "a reserved slot keeps its delete's GCI"
        );
        assert_eq!(slots[2].holds, SlotHolds::Committed { gci: 3 });
        assert_eq!(slots[3].holds, SlotHolds::Free { gci: 0 });
        let ids: Vec<u32> = slots.iter().map(|slot| slot.row_id).collect();
        assert_eq!(ids, (0..per_page).collect::<Vec<_>>());
    }

    #[test]
    fn freed_pages_are_skipped_or_reported_with_their_highest_delete_gci() {
        let mut rows = Rows::new();
        let per_page = rows.slots_per_page();
        let all: Vec<u32> = (0..3 * per_page).map(|_| rows.insert(1)).collect();
        // Empty the middle page: it goes back to DataMemory.
        for (n, &row) in all[per_page as usize..2 * per_page as usize]
            .iter()
            .enumerate()
        {
            rows.delete(row, 10 + n as u64);
        }
        let (page_1, page_2) = (1 << SLOT_BITS, 2 << SLOT_BITS);
        assert!(!rows.partition.fixed.is_held(page_1));
        let skipping = rows.walk(RowIdCursor::new(0));
        assert_eq!(skipping.len(), 2 * per_page as usize);
        assert_eq!(skipping[per_page as usize].row_id, page_2);
        let visiting = rows.walk(RowIdCursor::new(0).visiting_freed_pages());
        assert_eq!(visiting.len(), 3 * per_page as usize);
        let highest = 10 + u64::from(per_page) - 1;
        for slot in &visiting[per_page as usize..2 * per_page as usize] {
            assert_eq!(slot.holds, SlotHolds::FreedPage { gci: highest });
        }
        // A walker done with a freed page passes the rest of it at once.
        let mut cursor = RowIdCursor::new(page_1 + 5).visiting_freed_pages();
        let slot = cursor.peek(&rows.partition, &rows.memory).expect("a slot");
        assert_eq!(slot.holds.gci(), highest);
        cursor.skip_page();
        let slot = cursor.peek(&rows.partition, &rows.memory).expect("a slot");
        assert_eq!(slot.row_id, page_2);
        // Also from the page's last slot: the next page is not skipped.
        let mut cursor = RowIdCursor::new(page_1 + per_page - 1).visiting_freed_pages();
        let slot = cursor.peek(&rows.partition, &rows.memory).expect("a slot");
        assert_eq!(slot.row_id, page_1 + per_page - 1);
        cursor.skip_page();
        assert_eq!(cursor.row_id(), page_2);
    }

    #[test]
    fn a_walk_ends_before_its_page_limit_and_at_the_partitions_end() {
        let mut rows = Rows::new();
        let per_page = rows.slots_per_page();
        for _ in 0..2 * per_page + 1 {
            rows.insert(1);
        }
        let limited = rows.walk(RowIdCursor::new(0).ending_before_page(1));
        assert_eq!(limited.len(), per_page as usize);
        let beyond = rows.walk(RowIdCursor::new(0).ending_before_page(100));
        assert_eq!(beyond.len(), 3 * per_page as usize);
        assert!(rows.walk(RowIdCursor::new(u32::MAX)).is_empty());
        // A slot number past the page's slots moves to the next page.
        let past = rows.walk(RowIdCursor::new(1 << SLOT_BITS | 1000));
        assert_eq!(past[0].row_id, 2 << SLOT_BITS);
        let mut cursor = RowIdCursor::new(u32::MAX);
        assert!(cursor.is_past_end(&rows.partition));
        cursor.advance();
        cursor.skip_page();
        assert_eq!(cursor.row_id(), u32::MAX, "the end stays the end");
        // Past the last slot of the last page: not past the end page yet,
        // but nothing is left to peek.
        let mut cursor = RowIdCursor::new(2 << SLOT_BITS | per_page);
        assert!(!cursor.is_past_end(&rows.partition));
        assert_eq!(cursor.peek(&rows.partition, &rows.memory), None);
        assert!(cursor.is_past_end(&rows.partition));
    }

    #[test]
    fn batches_resume_where_they_stopped_and_see_stable_rows_once() {
        let mut rows = Rows::new();
        let per_page = rows.slots_per_page();
        let first: Vec<u32> = (0..3 * per_page).map(|_| rows.insert(1)).collect();
        let mut cursor = RowIdCursor::new(0);
        let mut seen = Vec::new();
        let mut batches = 0;
        loop {
            let mut budget = Budget::new(10, usize::MAX);
            let mut finished = true;
            while let Some(slot) = cursor.peek(&rows.partition, &rows.memory) {
                if budget.is_spent() {
                    finished = false;
                    break;
                }
                if let SlotHolds::Committed { .. } = slot.holds {
                    seen.push(slot.row_id);
                    budget.charge(1, 0);
                }
                cursor.advance();
            }
            batches += 1;
            if finished {
                break;
            }
            // Between batches: rows come and go behind and ahead of the
            // cursor; rows never move.
            let behind = first[(batches * 7) % first.len()];
            if behind < cursor.row_id()
                && rows.partition.state(&rows.memory, behind) == RowState::Live
            {
                rows.delete(behind, 5);
                rows.insert(6);
            }
        }
        assert!(batches > 3 * per_page as usize / 10);
        let stable: Vec<u32> = first
            .iter()
            .copied()
            .filter(|&row| rows.partition.state(&rows.memory, row) == RowState::Live)
            .collect();
        for row in stable {
            assert_eq!(
                seen.iter().filter(|&&seen| seen == row).count(),
                1,
                "row {row}, live for the whole walk, is seen exactly once"
            );
        }
        let mut sorted = seen.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), seen.len(), "no row id twice");
    }

    #[test]
    fn a_budget_is_spent_by_rows_or_by_bytes() {
        let mut budget = Budget::new(2, 100);
        assert!(!budget.is_spent());
        budget.charge(1, 60);
        assert_eq!((budget.rows_left(), budget.bytes_left()), (1, 40));
        assert!(!budget.is_spent());
        budget.charge(0, 70);
        assert!(budget.is_spent(), "the bytes ran out (overshooting)");
        let mut budget = Budget::new(1, usize::MAX);
        budget.charge(1, 5);
        assert!(budget.is_spent(), "the rows ran out");
    }
}
