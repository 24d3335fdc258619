//! Pages cut into equal slots, with a free list threaded through the free
//! slots themselves: the fixed part of rows (one size per table) and the
//! var parts (one `SlotPages` per size class). A slot reference packs the
//! page's index within its owner and the slot number: `page << 10 | slot`.

use crate::page_memory::{PageId, PageMemory, PAGE_SIZE};

/// No slot.
pub const NIL: u32 = u32::MAX;
/// Bits of the slot number in a slot reference.
pub const SLOT_BITS: u32 = 10;
const SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;

/// Equal-size slots over pages of one owner (a partition).
pub struct SlotPages {
    slot_bytes: usize,
    slots_per_page: u32,
    link_offset: usize,
    pages: Vec<PageId>,
    free_head: u32,
    used: u64,
}

impl SlotPages {
    /// Slots of `slot_bytes` (>= 32, a multiple of 8); the free-list link of
    /// a free slot is stored at `link_offset` within it.
    pub fn new(slot_bytes: usize, link_offset: usize, page_capacity: usize) -> SlotPages {
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
            pages: Vec::with_capacity(page_capacity),
            free_head: NIL,
            used: 0,
        }
    }

    /// Bytes per slot.
    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// Slots in use.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Pages held.
    pub fn page_count(&self) -> usize {
        self.pages.len()
    }

    #[inline]
    fn locate(&self, reference: u32) -> (PageId, usize) {
        let page_index = (reference >> SLOT_BITS) as usize;
        let slot = (reference & SLOT_MASK) as usize;
        debug_assert!(
            slot < self.slots_per_page as usize,
            "slot reference out of page"
        );
        (self.pages[page_index], slot * self.slot_bytes)
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

    /// Takes a free slot, adding a page when none is free. `None` when
    /// DataMemory is exhausted.
    pub fn alloc(&mut self, memory: &mut PageMemory) -> Option<u32> {
        if self.free_head == NIL {
            let page_index = self.pages.len() as u32;
            if page_index >= 1 << (32 - SLOT_BITS - 4) {
                // Slot references (with 4 bits of var class on top) would overflow.
                return None;
            }
            let page = memory.alloc()?;
            self.pages.push(page);
            // Thread the new page's slots onto the free list, lowest first.
            for slot in (0..self.slots_per_page).rev() {
                let reference = page_index << SLOT_BITS | slot;
                self.push_free(memory, reference);
            }
        }
        let reference = self.free_head;
        let link_offset = self.link_offset;
        let slot = self.slot(memory, reference);
        self.free_head = u32::from_le_bytes([
            slot[link_offset],
            slot[link_offset + 1],
            slot[link_offset + 2],
            slot[link_offset + 3],
        ]);
        self.used += 1;
        Some(reference)
    }

    fn push_free(&mut self, memory: &mut PageMemory, reference: u32) {
        let link_offset = self.link_offset;
        let head = self.free_head;
        let slot = self.slot_mut(memory, reference);
        slot[link_offset..link_offset + 4].copy_from_slice(&head.to_le_bytes());
        self.free_head = reference;
    }

    /// Returns a slot to the free list (its bytes other than the link are kept).
    pub fn free(&mut self, memory: &mut PageMemory, reference: u32) {
        assert!(self.used > 0, "freeing a slot of an owner with none in use");
        self.used -= 1;
        self.push_free(memory, reference);
    }

    /// Returns every page to `memory` (drop table).
    pub fn release_all(&mut self, memory: &mut PageMemory) {
        for page in self.pages.drain(..) {
            memory.free(page);
        }
        self.free_head = NIL;
        self.used = 0;
    }

    /// Visits every slot reference that exists (free or not), in row-id order.
    pub fn for_each_slot(&self, mut visit: impl FnMut(u32)) {
        for page_index in 0..self.pages.len() as u32 {
            for slot in 0..self.slots_per_page {
                visit(page_index << SLOT_BITS | slot);
            }
        }
    }
}
