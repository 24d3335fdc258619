//! DataMemory of one ldm thread: a fixed pool of `PAGE_SIZE` pages allocated
//! once at start (docs/design/data-and-routing.md §1).
//!
//! Everything the ldm stores per partition (rows, hash index, ordered
//! indexes) takes its memory from here, so that the hot path never calls the
//! heap allocator and running out of memory is an ordinary, reportable
//! condition (a full pool) instead of an abort. Pages are handed out by a
//! free stack sized at start; an allocated-bitmap catches double frees.

use crate::ordered_index::{NodeList, NODES_PER_PAGE};
use crate::zeroed::ZeroedWords;

/// Bytes in one page.
pub const PAGE_SIZE: usize = 32 * 1024;

/// u64 words backing one page; the storage is u64 so that a page is aligned
/// for every narrower view (u32 words, bytes).
const PAGE_U64S: usize = PAGE_SIZE / 8;

/// u32 words in one page, the length of [`PageMemory::words`].
pub const PAGE_WORDS: usize = PAGE_SIZE / 4;

/// Index of a page within one [`PageMemory`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct PageId(pub u32);

/// The page pool of one ldm thread.
pub struct PageMemory {
    /// Page `p` is `storage[p * PAGE_U64S..][..PAGE_U64S]`: flat zeroed u64s
    /// the OS maps lazily (on huge pages where it can: `zeroed`).
    storage: ZeroedWords,
    pages: u32,
    /// Free page ids; popped from the end. Capacity is the page count, so a
    /// free never reallocates.
    free: Vec<u32>,
    /// One bit per page, set while the page is allocated.
    allocated: Vec<u64>,
    /// The ordered indexes' nodes, cut from pages of this pool and shared
    /// by every index of the thread (`ordered_index`).
    index_nodes: NodeList,
}

impl PageMemory {
    /// A pool of `bytes / PAGE_SIZE` pages (at least one).
    ///
    /// The pages are requested zeroed, so the OS maps them lazily and an
    /// unused pool costs no resident memory.
    pub fn new(bytes: u64) -> PageMemory {
        let count = (bytes / PAGE_SIZE as u64).max(1);
        assert!(
            count <= u64::from(u32::MAX),
            "PageMemory of {bytes} bytes has more pages than a PageId can name"
        );
        let count = count as usize;
        let words = count
            .checked_mul(PAGE_U64S)
            .expect("PageMemory larger than the address space");
        let storage = ZeroedWords::new(words);
        let mut free = Vec::with_capacity(count);
        // Reversed so that pops hand out the lowest ids first: a fresh pool
        // gives the same layout on every run and every replica.
        free.extend((0..count as u32).rev());
        PageMemory {
            storage,
            pages: count as u32,
            free,
            allocated: vec![0u64; count.div_ceil(64)],
            index_nodes: NodeList::new(count as u32),
        }
    }

    /// Pages in the pool.
    #[inline]
    pub fn page_count(&self) -> u32 {
        self.pages
    }

    /// Pages not allocated.
    #[inline]
    pub fn free_pages(&self) -> u32 {
        self.free.len() as u32
    }

    /// Pages allocated.
    #[inline]
    pub fn used_pages(&self) -> u32 {
        self.page_count() - self.free_pages()
    }

    /// A zero-filled page, or `None` when the pool is exhausted. A fresh pool
    /// hands out ids in ascending order; freed pages are reused last-freed
    /// first (deterministic either way).
    #[inline]
    pub fn alloc(&mut self) -> Option<PageId> {
        // Rows and the hash index leave the room promised to ordered-index
        // inserts that are prepared (`ordered_index::node`).
        let free_pages = u64::from(self.free_pages());
        let promised = self.index_nodes.promised();
        if promised > 0
            && (free_pages.saturating_sub(1)) * u64::from(NODES_PER_PAGE)
                + u64::from(self.index_nodes.free())
                < promised
        {
            return None;
        }
        self.alloc_page()
    }

    /// A page whatever is promised: for index nodes, which the promises are for.
    #[inline]
    pub(crate) fn alloc_page(&mut self) -> Option<PageId> {
        let id = self.free.pop()?;
        let (word, bit) = bit_of(id);
        debug_assert!(
            self.allocated[word] & bit == 0,
            "page {id} was on the free stack while marked allocated"
        );
        self.allocated[word] |= bit;
        Some(PageId(id))
    }

    /// Returns `page` to the pool. Freeing a page that is not allocated is a
    /// bug in the caller (double free) and panics.
    pub fn free(&mut self, page: PageId) {
        let (word, bit) = bit_of(page.0);
        assert!(
            page.0 < self.pages && self.allocated[word] & bit != 0,
            "free of {page:?} which is not allocated (double free or foreign page)"
        );
        // Zeroed here rather than at alloc: the page is resident anyway, and
        // never-used pages stay untouched (unmapped) until first needed.
        self.page_mut(page).fill(0);
        self.allocated[word] &= !bit;
        debug_assert!(
            self.free.len() < self.free.capacity(),
            "free stack would grow past the page count"
        );
        self.free.push(page.0);
    }

    /// The ordered indexes' node list.
    #[inline]
    pub fn index_nodes(&self) -> &NodeList {
        &self.index_nodes
    }

    #[inline]
    pub(crate) fn index_nodes_mut(&mut self) -> &mut NodeList {
        &mut self.index_nodes
    }

    /// Whether `page` is currently allocated.
    #[inline]
    pub fn is_allocated(&self, page: PageId) -> bool {
        let (word, bit) = bit_of(page.0);
        page.0 < self.pages && self.allocated[word] & bit != 0
    }

    /// The page as `PAGE_SIZE` bytes.
    #[inline]
    pub fn bytes(&self, page: PageId) -> &[u8] {
        let p = self.page(page);
        // SAFETY: `p` is PAGE_SIZE bytes of initialised u64s; u8 needs no
        // alignment and has no invalid values; the slice borrows `self`.
        unsafe { std::slice::from_raw_parts(p.as_ptr().cast::<u8>(), PAGE_SIZE) }
    }

    /// The page as `PAGE_SIZE` mutable bytes.
    #[inline]
    pub fn bytes_mut(&mut self, page: PageId) -> &mut [u8] {
        let p = self.page_mut(page);
        // SAFETY: as in `bytes`; the unique borrow of `self` makes the slice
        // the only access to the page while it lives.
        unsafe { std::slice::from_raw_parts_mut(p.as_mut_ptr().cast::<u8>(), PAGE_SIZE) }
    }

    /// The page as `PAGE_WORDS` u32 words (native endianness).
    #[inline]
    pub fn words(&self, page: PageId) -> &[u32] {
        let p = self.page(page);
        // SAFETY: u64 storage is aligned for u32 and PAGE_SIZE bytes hold
        // exactly PAGE_WORDS u32s; every bit pattern is a valid u32.
        unsafe { std::slice::from_raw_parts(p.as_ptr().cast::<u32>(), PAGE_WORDS) }
    }

    /// The page as `PAGE_WORDS` mutable u32 words (native endianness).
    #[inline]
    pub fn words_mut(&mut self, page: PageId) -> &mut [u32] {
        let p = self.page_mut(page);
        // SAFETY: as in `words`; the unique borrow of `self` makes the slice
        // the only access to the page while it lives.
        unsafe { std::slice::from_raw_parts_mut(p.as_mut_ptr().cast::<u32>(), PAGE_WORDS) }
    }

    #[inline]
    fn page(&self, page: PageId) -> &[u64] {
        debug_assert!(
            self.is_allocated(page),
            "access to {page:?} which is not allocated"
        );
        let start = page.0 as usize * PAGE_U64S;
        &self.storage[start..start + PAGE_U64S]
    }

    #[inline]
    fn page_mut(&mut self, page: PageId) -> &mut [u64] {
        debug_assert!(
            self.is_allocated(page),
            "access to {page:?} which is not allocated"
        );
        let start = page.0 as usize * PAGE_U64S;
        &mut self.storage[start..start + PAGE_U64S]
    }
}

/// Word index and mask of `id` in the allocated-bitmap.
#[inline]
fn bit_of(id: u32) -> (usize, u64) {
    ((id / 64) as usize, 1u64 << (id % 64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_counts() {
        let m = PageMemory::new(10 * PAGE_SIZE as u64 + 100);
        assert_eq!(m.page_count(), 10);
        assert_eq!(m.free_pages(), 10);
        assert_eq!(m.used_pages(), 0);
        assert_eq!(PageMemory::new(0).page_count(), 1, "at least one page");
    }

    #[test]
    fn alloc_is_lowest_first_then_exhausts() {
        let mut m = PageMemory::new(3 * PAGE_SIZE as u64);
        assert_eq!(m.alloc(), Some(PageId(0)));
        assert_eq!(m.alloc(), Some(PageId(1)));
        assert_eq!(m.alloc(), Some(PageId(2)));
        assert_eq!(m.alloc(), None);
        assert_eq!(m.used_pages(), 3);
        m.free(PageId(1));
        assert!(!m.is_allocated(PageId(1)));
        assert_eq!(m.alloc(), Some(PageId(1)));
    }

    #[test]
    fn views_alias_and_reused_pages_are_zero() {
        let mut m = PageMemory::new(2 * PAGE_SIZE as u64);
        let p = m.alloc().unwrap();
        assert_eq!(m.bytes(p).len(), PAGE_SIZE);
        assert_eq!(m.words(p).len(), PAGE_WORDS);
        assert!(m.bytes(p).iter().all(|&b| b == 0));
        m.words_mut(p)[1] = 0x0403_0201;
        assert_eq!(m.bytes(p)[4..8], 0x0403_0201u32.to_ne_bytes());
        m.bytes_mut(p)[PAGE_SIZE - 1] = 9;
        m.free(p);
        let q = m.alloc().unwrap();
        assert_eq!(q, p, "the freed page is reused");
        assert!(m.bytes(q).iter().all(|&b| b == 0), "reused page is zeroed");
    }

    #[test]
    #[should_panic(expected = "not allocated")]
    fn double_free_panics() {
        let mut m = PageMemory::new(PAGE_SIZE as u64);
        let p = m.alloc().unwrap();
        m.free(p);
        m.free(p);
    }

    #[test]
    #[should_panic(expected = "not allocated")]
    fn free_of_foreign_page_panics() {
        let mut m = PageMemory::new(PAGE_SIZE as u64);
        m.free(PageId(5));
    }

    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "not allocated")]
    fn access_to_free_page_panics_in_debug() {
        let m = PageMemory::new(PAGE_SIZE as u64);
        let _ = m.words(PageId(0));
    }
}
