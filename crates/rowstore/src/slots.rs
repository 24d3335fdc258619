//! Pages cut into equal slots: the fixed part of rows (one size per table)
//! and the var parts (one `SlotPages` per size class).
//!
//! A slot reference packs the page's logical index within its owner and the
//! slot number: `page << 10 | slot`; for fixed parts it is the row id, so a
//! logical page index never changes meaning. Each page keeps its own free
//! list (threaded through its free slots) and count; pages with free slots
//! form a doubly linked list. A page whose slots are all free goes back to
//! DataMemory, leaving a hole in the logical index that the next new page
//! fills. For fixed parts the hole remembers the highest
//! delete GCI of its slots, and a page that refills it starts every slot
//! with that GCI: a freed slot keeps (at least) the GCI of its delete even
//! across the page's return to DataMemory.

use crate::page_memory::{PageId, PageMemory, PAGE_SIZE};

/// No slot / no page.
pub const NIL: u32 = u32::MAX;
/// Bits of the slot number in a slot reference.
pub const SLOT_BITS: u32 = 10;
const SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;
/// Logical pages an owner may have (4 bits stay free for the var class).
const MAX_PAGES: u32 = 1 << (32 - SLOT_BITS - 4);

#[derive(Clone, Copy)]
struct PageEntry {
    /// The physical page, or `None` for a hole.
    page: Option<PageId>,
    free_count: u32,
    /// First free slot number in the page, or NIL.
    free_head: u32,
    /// Neighbours in the list of pages with free slots (logical indices).
    previous_with_free: u32,
    next_with_free: u32,
    /// Highest GCI of a slot freed in this page (owners that keep GCIs).
    max_freed_gci: u64,
    /// Next hole (when this entry is a hole).
    next_hole: u32,
}

/// Why [`SlotPages::alloc_at`] could not take a slot.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AllocAtError {
    /// The slot is in use.
    Occupied,
    /// DataMemory is exhausted.
    OutOfMemory,
    /// No slot can have that reference.
    OutOfRange,
}

/// Equal-size slots over pages of one owner (a partition).
pub struct SlotPages {
    slot_bytes: usize,
    slots_per_page: u32,
    link_offset: usize,
    gci_offset: Option<usize>,
    entries: Vec<PageEntry>,
    with_free_head: u32,
    hole_head: u32,
    used: u64,
    pages_held: u32,
}

impl SlotPages {
    /// Slots of `slot_bytes` (>= 32, a multiple of 8). A free slot stores its
    /// free-list link at `link_offset`; `gci_offset` says where a slot keeps
    /// a GCI that must survive freeing (fixed row parts), if anywhere.
    pub fn new(
        slot_bytes: usize,
        link_offset: usize,
        gci_offset: Option<usize>,
        page_capacity: usize,
    ) -> SlotPages {
        assert!(
            slot_bytes >= 32 && slot_bytes.is_multiple_of(8) && slot_bytes <= PAGE_SIZE,
            "slot size {slot_bytes} must be 32..=PAGE_SIZE and 8-aligned so a page holds at most 1024"
        );
        assert!(
            link_offset + 4 <= slot_bytes,
            "free link must fit in the slot"
        );
        SlotPages {
            slot_bytes,
            slots_per_page: (PAGE_SIZE / slot_bytes) as u32,
            link_offset,
            gci_offset,
            entries: Vec::with_capacity(page_capacity),
            with_free_head: NIL,
            hole_head: NIL,
            used: 0,
            pages_held: 0,
        }
    }

    /// Bytes per slot.
    #[inline]
    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// Slots per page.
    #[inline]
    pub fn slots_per_page(&self) -> u32 {
        self.slots_per_page
    }

    /// Slots in use.
    #[inline]
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Pages of DataMemory held.
    #[inline]
    pub fn page_count(&self) -> usize {
        self.pages_held as usize
    }

    /// Logical page indices in use, holes included: every slot reference
    /// has a page index below this.
    #[inline]
    pub fn logical_pages(&self) -> u32 {
        self.entries.len() as u32
    }

    /// Starts loading slot `reference` (a lookup's row, see
    /// `HashIndex::prefetch`); nothing for a reference that names no slot.
    #[inline]
    pub fn prefetch(&self, memory: &PageMemory, reference: u32) {
        let Some(entry) = self.entries.get((reference >> SLOT_BITS) as usize) else {
            return;
        };
        let Some(page) = entry.page else {
            return;
        };
        let offset = (reference & SLOT_MASK) as usize * self.slot_bytes;
        if let Some(slot) = memory.bytes(page).get(offset..offset + self.slot_bytes) {
            stdx::prefetch::prefetch_read(slot);
        }
    }

    #[inline]
    fn locate(&self, reference: u32) -> (PageId, usize) {
        let entry = &self.entries[(reference >> SLOT_BITS) as usize];
        let slot = (reference & SLOT_MASK) as usize;
        debug_assert!(
            slot < self.slots_per_page as usize,
            "slot reference out of page"
        );
        let page = entry
            .page
            .expect("slot reference into a page returned to DataMemory");
        (page, slot * self.slot_bytes)
    }

    /// For a slot on a page returned to DataMemory: the highest GCI of the
    /// slots freed there (the GCI a freed slot keeps). `None` while the page
    /// is held (read the slot itself).
    #[inline]
    pub fn freed_page_gci(&self, reference: u32) -> Option<u64> {
        let entry = self.entries.get((reference >> SLOT_BITS) as usize)?;
        match entry.page {
            Some(_) => None,
            None => Some(entry.max_freed_gci),
        }
    }

    /// Whether `reference` lies on a page this owner holds.
    #[inline]
    pub fn is_held(&self, reference: u32) -> bool {
        let slot = reference & SLOT_MASK;
        slot < self.slots_per_page
            && self
                .entries
                .get((reference >> SLOT_BITS) as usize)
                .is_some_and(|entry| entry.page.is_some())
    }

    /// The bytes of a slot.
    #[inline]
    pub fn slot<'a>(&self, memory: &'a PageMemory, reference: u32) -> &'a [u8] {
        let (page, offset) = self.locate(reference);
        &memory.bytes(page)[offset..offset + self.slot_bytes]
    }

    /// The bytes of a slot, writable.
    #[inline]
    pub fn slot_mut<'a>(&self, memory: &'a mut PageMemory, reference: u32) -> &'a mut [u8] {
        let (page, offset) = self.locate(reference);
        &mut memory.bytes_mut(page)[offset..offset + self.slot_bytes]
    }

    #[inline]
    fn read_link(&self, memory: &PageMemory, page: PageId, slot: u32) -> u32 {
        let offset = slot as usize * self.slot_bytes + self.link_offset;
        let bytes = &memory.bytes(page)[offset..offset + 4];
        u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
    }

    #[inline]
    fn write_link(&self, memory: &mut PageMemory, page: PageId, slot: u32, link: u32) {
        let offset = slot as usize * self.slot_bytes + self.link_offset;
        memory.bytes_mut(page)[offset..offset + 4].copy_from_slice(&link.to_le_bytes());
    }

    #[inline]
    fn push_with_free(&mut self, index: u32) {
        let head = self.with_free_head;
        self.entries[index as usize].previous_with_free = NIL;
        self.entries[index as usize].next_with_free = head;
        if head != NIL {
            self.entries[head as usize].previous_with_free = index;
        }
        self.with_free_head = index;
    }

    #[inline]
    fn unlink_with_free(&mut self, index: u32) {
        let PageEntry {
            previous_with_free,
            next_with_free,
            ..
        } = self.entries[index as usize];
        if previous_with_free != NIL {
            self.entries[previous_with_free as usize].next_with_free = next_with_free;
        } else {
            self.with_free_head = next_with_free;
        }
        if next_with_free != NIL {
            self.entries[next_with_free as usize].previous_with_free = previous_with_free;
        }
        self.entries[index as usize].previous_with_free = NIL;
        self.entries[index as usize].next_with_free = NIL;
    }

    /// Adds a page (filling a hole first). `None` when DataMemory is full.
    fn add_page(&mut self, memory: &mut PageMemory) -> Option<()> {
        let index = if self.hole_head != NIL {
            self.hole_head
        } else {
            if self.entries.len() as u32 >= MAX_PAGES {
                return None;
            }
            self.entries.len() as u32
        };
        let page = memory.alloc()?;
        let start_gci = if index == self.hole_head {
            let hole = self.entries[index as usize];
            self.hole_head = hole.next_hole;
            hole.max_freed_gci
        } else {
            self.entries.push(PageEntry {
                page: None,
                free_count: 0,
                free_head: NIL,
                previous_with_free: NIL,
                next_with_free: NIL,
                max_freed_gci: 0,
                next_hole: NIL,
            });
            0
        };
        // Thread every slot onto the page's free list, lowest first.
        for slot in (0..self.slots_per_page).rev() {
            let next = if slot + 1 < self.slots_per_page {
                slot + 1
            } else {
                NIL
            };
            self.write_link(memory, page, slot, next);
            if let (Some(gci_offset), true) = (self.gci_offset, start_gci != 0) {
                let offset = slot as usize * self.slot_bytes + gci_offset;
                memory.bytes_mut(page)[offset..offset + 8]
                    .copy_from_slice(&start_gci.to_le_bytes());
            }
        }
        let entry = &mut self.entries[index as usize];
        *entry = PageEntry {
            page: Some(page),
            free_count: self.slots_per_page,
            free_head: 0,
            previous_with_free: NIL,
            next_with_free: NIL,
            max_freed_gci: start_gci,
            next_hole: NIL,
        };
        self.pages_held += 1;
        self.push_with_free(index);
        Some(())
    }

    /// Takes a free slot, adding a page when none is free. `None` when
    /// DataMemory is exhausted.
    #[inline]
    pub fn alloc(&mut self, memory: &mut PageMemory) -> Option<u32> {
        if self.with_free_head == NIL {
            self.add_page(memory)?;
        }
        let index = self.with_free_head;
        let entry = self.entries[index as usize];
        let page = entry.page.expect("pages with free slots are held");
        let slot = entry.free_head;
        assert!(
            slot != NIL && entry.free_count > 0,
            "a page on the free list has a free slot"
        );
        let next = self.read_link(memory, page, slot);
        let entry = &mut self.entries[index as usize];
        entry.free_head = next;
        entry.free_count -= 1;
        if entry.free_count == 0 {
            self.unlink_with_free(index);
        }
        self.used += 1;
        Some(index << SLOT_BITS | slot)
    }

    /// Takes the specific free slot `reference` (a backup placing a row at
    /// the row id its primary chose), adding pages up to it as needed.
    pub fn alloc_at(
        &mut self,
        memory: &mut PageMemory,
        reference: u32,
    ) -> Result<(), AllocAtError> {
        let index = reference >> SLOT_BITS;
        let slot = reference & SLOT_MASK;
        if index >= MAX_PAGES || slot >= self.slots_per_page {
            return Err(AllocAtError::OutOfRange);
        }
        // Pages up to `index` exist (as holes) so the page can be added.
        while self.entries.len() as u32 <= index {
            let hole = self.entries.len() as u32;
            self.entries.push(PageEntry {
                page: None,
                free_count: 0,
                free_head: NIL,
                previous_with_free: NIL,
                next_with_free: NIL,
                max_freed_gci: 0,
                next_hole: self.hole_head,
            });
            self.hole_head = hole;
        }
        if self.entries[index as usize].page.is_none() {
            // Fill this very hole: unlink it from the hole list first.
            let mut previous = NIL;
            let mut current = self.hole_head;
            while current != index {
                assert!(current != NIL, "a page without memory is on the hole list");
                previous = current;
                current = self.entries[current as usize].next_hole;
            }
            let next = self.entries[index as usize].next_hole;
            if previous == NIL {
                self.hole_head = next;
            } else {
                self.entries[previous as usize].next_hole = next;
            }
            // Put it at the head so `add_page` fills it.
            self.entries[index as usize].next_hole = self.hole_head;
            self.hole_head = index;
            if self.add_page(memory).is_none() {
                return Err(AllocAtError::OutOfMemory);
            }
        }
        // Unlink `slot` from the page's free list.
        let entry = self.entries[index as usize];
        let page = entry.page.expect("the page was just made present");
        let mut previous = NIL;
        let mut current = entry.free_head;
        while current != NIL && current != slot {
            previous = current;
            current = self.read_link(memory, page, current);
        }
        if current == NIL {
            return Err(AllocAtError::Occupied);
        }
        let next = self.read_link(memory, page, slot);
        if previous == NIL {
            self.entries[index as usize].free_head = next;
        } else {
            self.write_link(memory, page, previous, next);
        }
        let entry = &mut self.entries[index as usize];
        entry.free_count -= 1;
        if entry.free_count == 0 {
            self.unlink_with_free(index);
        }
        self.used += 1;
        Ok(())
    }

    /// Returns a slot to its page's free list; a page left with no slot in
    /// use goes back to DataMemory at once, so that space freed by deletes
    /// serves rows of any table, partition or size class.
    #[inline]
    pub fn free(&mut self, memory: &mut PageMemory, reference: u32) {
        assert!(self.used > 0, "freeing a slot of an owner with none in use");
        let index = reference >> SLOT_BITS;
        let slot = reference & SLOT_MASK;
        let (page, _) = self.locate(reference);
        let gci = self.gci_offset.map_or(0, |gci_offset| {
            let offset = slot as usize * self.slot_bytes + gci_offset;
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&memory.bytes(page)[offset..offset + 8]);
            u64::from_le_bytes(bytes)
        });
        let head = self.entries[index as usize].free_head;
        self.write_link(memory, page, slot, head);
        self.used -= 1;
        let entry = &mut self.entries[index as usize];
        entry.free_head = slot;
        entry.free_count += 1;
        entry.max_freed_gci = entry.max_freed_gci.max(gci);
        if entry.free_count == 1 {
            self.push_with_free(index);
        }
        if self.entries[index as usize].free_count == self.slots_per_page {
            self.unlink_with_free(index);
            memory.free(page);
            self.pages_held -= 1;
            let entry = &mut self.entries[index as usize];
            entry.page = None;
            entry.free_count = 0;
            entry.free_head = NIL;
            entry.next_hole = self.hole_head;
            self.hole_head = index;
        }
    }

    /// Returns every page to `memory` (drop table).
    pub fn release_all(&mut self, memory: &mut PageMemory) {
        for entry in self.entries.drain(..) {
            if let Some(page) = entry.page {
                memory.free(page);
            }
        }
        self.with_free_head = NIL;
        self.hole_head = NIL;
        self.used = 0;
        self.pages_held = 0;
    }

    /// The first slot at or after `reference` on a held page, in row-id order.
    pub fn next_held_slot(&self, reference: u32) -> Option<u32> {
        let mut index = (reference >> SLOT_BITS) as usize;
        let mut slot = reference & SLOT_MASK;
        while index < self.entries.len() {
            if self.entries[index].page.is_some() && slot < self.slots_per_page {
                return Some((index as u32) << SLOT_BITS | slot);
            }
            index += 1;
            slot = 0;
        }
        None
    }

    /// Visits every slot reference of every held page, in row-id order.
    pub fn for_each_slot(&self, mut visit: impl FnMut(u32)) {
        for (index, entry) in self.entries.iter().enumerate() {
            if entry.page.is_some() {
                for slot in 0..self.slots_per_page {
                    visit((index as u32) << SLOT_BITS | slot);
                }
            }
        }
    }
}
