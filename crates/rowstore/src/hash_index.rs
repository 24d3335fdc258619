//! The primary-key hash index of one partition (NDB's DBACC): a 32-bit key
//! hash to an opaque u32 row reference, by linear hashing
//! (docs/design/data-and-routing.md §4).
//!
//! Linear hashing grows the table one bucket at a time, so no insert pays for
//! a whole-table rehash: with `buckets = 2^level + split`, an insert that
//! pushes the load past `LOAD_FACTOR` splits the single bucket at `split`.
//!
//! Keys are not stored. An entry is only (hash, row); `lookup` hands every
//! row whose hash matches to a caller's closure, which compares the key held
//! in the row itself. That keeps an entry at 12 bytes and the index ignorant
//! of key formats.
//!
//! All memory comes from [`PageMemory`] pages, so the hot path never touches
//! the heap:
//! - directory pages: `PAGE_WORDS` u32 bucket heads each (element ref, 0 =
//!   empty, which is what a zero-filled page already holds);
//! - element pages: `ELEMS_PER_PAGE` entries of {hash, row, next} u32s,
//!   chained per bucket; removed entries go to a free-element list.
//!
//! The only heap structures are two `Vec<PageId>` reserved at creation for
//! every page of the pool, so pushing to them never reallocates.

use crate::page_memory::{PageId, PageMemory, PAGE_WORDS};

/// Entries per bucket (on average) above which a bucket is split. One,
/// not two: chains are shorter, so a lookup walks fewer elements and the
/// prefetch (which looks at a chain's first two) finds nine keys in ten
/// instead of seven; the directory costs 4 bytes per row instead of 2.
/// Data-node CPU per read at 1M rows fell about 10% (design 0006; 0.5 was
/// no better, its directory misses more).
pub const LOAD_FACTOR: u64 = 1;

/// Bucket heads per directory page.
const DIR_SLOTS: u32 = PAGE_WORDS as u32;
const DIR_SHIFT: u32 = DIR_SLOTS.trailing_zeros();
const DIR_MASK: u32 = DIR_SLOTS - 1;
const _: () = assert!(
    DIR_SLOTS.is_power_of_two(),
    "bucket -> (page, slot) uses shifts"
);

/// u32 words per element: hash, row, next.
const ELEM_WORDS: usize = 3;
/// Elements per element page (the last PAGE_WORDS % 3 words are unused).
const ELEMS_PER_PAGE: u32 = (PAGE_WORDS / ELEM_WORDS) as u32;

/// The null element reference. Element refs are element number + 1 so that
/// a zero-filled directory page means "every bucket empty".
const NIL: u32 = 0;

/// Most splits one insert performs. Normally one insert needs at most one
/// split; more are owed only after splits were deferred for lack of a
/// directory page, and this bound keeps the catch-up work per insert small.
const MAX_SPLITS_PER_INSERT: u32 = 2;

/// No page was available for an insert; the index is unchanged.
#[derive(Debug, PartialEq, Eq)]
pub struct OutOfMemory;

/// The hash index of one partition. Every method takes the [`PageMemory`]
/// the index was created with; passing another one is a bug.
pub struct HashIndex {
    /// Directory pages; bucket `b` lives in `dir_pages[b >> DIR_SHIFT]`.
    dir_pages: Vec<PageId>,
    /// Element pages; element number `n` lives in
    /// `elem_pages[n / ELEMS_PER_PAGE]`.
    elem_pages: Vec<PageId>,
    /// `2^level - 1`: the bucket of `h` is `h & low_mask`, unless that bucket
    /// has already been split this round.
    low_mask: u32,
    /// The next bucket to split; buckets below it use `h & high_mask`.
    split: u32,
    entries: u64,
    /// Head of the free-element list (refs chained through `next`).
    free_head: u32,
    /// Elements ever handed out from `elem_pages`; those at or above it have
    /// never been used.
    fresh: u32,
    /// Element pages addressable by a u32 element ref.
    max_elem_pages: usize,
    max_moved: u32,
    /// Page count of the memory the index was created with, to catch a
    /// caller passing another pool.
    memory_pages: u32,
}

impl HashIndex {
    /// An empty index over `memory`. Reserves its page lists for every page
    /// of the pool (the only heap allocation it ever makes); takes no pages.
    pub fn new(memory: &PageMemory) -> HashIndex {
        let pages = memory.page_count() as usize;
        HashIndex {
            dir_pages: Vec::with_capacity(pages),
            elem_pages: Vec::with_capacity(pages),
            low_mask: 0,
            split: 0,
            entries: 0,
            free_head: NIL,
            fresh: 0,
            max_elem_pages: pages.min((u32::MAX / ELEMS_PER_PAGE) as usize),
            max_moved: 0,
            memory_pages: memory.page_count(),
        }
    }

    /// Entries in the index.
    #[inline]
    pub fn len(&self) -> u64 {
        self.entries
    }

    /// Whether the index holds no entries.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Buckets in the table: `2^level + split`.
    pub fn buckets(&self) -> u64 {
        u64::from(self.low_mask) + 1 + u64::from(self.split)
    }

    /// Pages the index holds (directory and element pages).
    pub fn pages_used(&self) -> u32 {
        (self.dir_pages.len() + self.elem_pages.len()) as u32
    }

    /// The most entries a single insert has moved by splitting, over the
    /// index's life: the bound on an insert's extra work.
    pub fn max_moved_per_insert(&self) -> u32 {
        self.max_moved
    }

    /// The first row with hash `hash` for which `matches(row)` is true (the
    /// caller compares the key stored in the row).
    #[inline]
    pub fn lookup(
        &self,
        memory: &PageMemory,
        hash: u32,
        mut matches: impl FnMut(u32) -> bool,
    ) -> Option<u32> {
        self.check_memory(memory);
        if self.entries == 0 {
            // Also covers the index without any directory page yet.
            return None;
        }
        let mut cur = self.head(memory, self.bucket_of(hash));
        while cur != NIL {
            let [h, row, next] = self.elem(memory, cur);
            if h == hash && matches(row) {
                return Some(row);
            }
            cur = next;
        }
        None
    }

    /// Starts loading what a lookup of `hash` will read, one stage per
    /// call as the lookup draws near (see `Block::prefetch`): 4 and more,
    /// the bucket's head; 3, the first element (reading the head, loaded by
    /// then); 2, the first element's row if its hash matches (returned for
    /// the caller to prefetch), else the second element; 1, the row of the
    /// first element among those two whose hash matches. Never changes
    /// anything, and any hash is fine.
    #[inline]
    pub fn prefetch(&self, memory: &PageMemory, hash: u32, distance: usize) -> Option<u32> {
        if self.entries == 0 || memory.page_count() != self.memory_pages {
            return None;
        }
        let bucket = self.bucket_of(hash);
        let page = *self.dir_pages.get((bucket >> DIR_SHIFT) as usize)?;
        let words = memory.words(page);
        let head = &words[(bucket & DIR_MASK) as usize];
        if distance >= 4 {
            stdx::prefetch::prefetch_read(head);
            return None;
        }
        if *head == NIL {
            return None;
        }
        let (page, at) = self.elem_at(*head);
        let element = &memory.words(page)[at..at + ELEM_WORDS];
        if distance == 3 {
            stdx::prefetch::prefetch_read(element);
            return None;
        }
        if element[0] == hash {
            return Some(element[1]);
        }
        if element[2] == NIL {
            return None;
        }
        let (page, at) = self.elem_at(element[2]);
        let second = &memory.words(page)[at..at + ELEM_WORDS];
        if distance == 2 {
            // Not the chain's head: start loading the next element instead.
            stdx::prefetch::prefetch_read(second);
            return None;
        }
        (second[0] == hash).then_some(second[1])
    }

    /// Adds (hash, row). The caller guarantees no entry for the same key
    /// exists. On `Err` the index and the pool are as before the call.
    #[inline]
    pub fn insert(
        &mut self,
        memory: &mut PageMemory,
        hash: u32,
        row: u32,
    ) -> Result<(), OutOfMemory> {
        self.check_memory(memory);
        // Take every page this insert needs before changing anything, so that
        // a failure leaves nothing half done.
        let new_dir = if self.dir_pages.is_empty() {
            Some(memory.alloc().ok_or(OutOfMemory)?)
        } else {
            None
        };
        let needs_elem_page = self.free_head == NIL
            && self.fresh as usize == self.elem_pages.len() * ELEMS_PER_PAGE as usize;
        let new_elem = if needs_elem_page {
            let page = if self.elem_pages.len() < self.max_elem_pages {
                memory.alloc()
            } else {
                None
            };
            if page.is_none() {
                if let Some(dir) = new_dir {
                    memory.free(dir);
                }
                return Err(OutOfMemory);
            }
            page
        } else {
            None
        };

        if let Some(dir) = new_dir {
            push_page(&mut self.dir_pages, dir);
        }
        if let Some(page) = new_elem {
            push_page(&mut self.elem_pages, page);
        }
        let elem = self.take_element(memory);
        let bucket = self.bucket_of(hash);
        let head = self.head(memory, bucket);
        self.set_elem(memory, elem, [hash, row, head]);
        self.set_head(memory, bucket, elem);
        self.entries += 1;
        self.grow(memory);
        Ok(())
    }

    /// Grows the empty index to the buckets `entries` entries need, so
    /// that filling it splits no chain: a restore, which knows how many
    /// rows it places, then touches one bucket head and one element per
    /// insert instead of also walking the chains every split relinks (the
    /// cache misses that made hash inserts a third of restore time).
    /// Stops early, harmlessly, when DataMemory has no directory page left.
    pub fn reserve(&mut self, memory: &mut PageMemory, entries: u64) {
        self.check_memory(memory);
        assert!(
            self.entries == 0,
            "reserve sizes an empty index (a restore's fresh partition)"
        );
        if self.dir_pages.is_empty() {
            let Some(page) = memory.alloc() else { return };
            push_page(&mut self.dir_pages, page);
        }
        while entries > self.buckets() * LOAD_FACTOR {
            if self.split_one(memory).is_none() {
                break;
            }
        }
    }

    /// Removes the entry (hash, row). Returns whether it was present. Frees
    /// the element for reuse; the directory never shrinks.
    #[inline]
    pub fn remove(&mut self, memory: &mut PageMemory, hash: u32, row: u32) -> bool {
        self.check_memory(memory);
        if self.entries == 0 {
            return false;
        }
        let bucket = self.bucket_of(hash);
        let mut prev = NIL;
        let mut cur = self.head(memory, bucket);
        while cur != NIL {
            let [h, r, next] = self.elem(memory, cur);
            if h == hash && r == row {
                if prev == NIL {
                    self.set_head(memory, bucket, next);
                } else {
                    self.set_next(memory, prev, next);
                }
                self.set_next(memory, cur, self.free_head);
                self.free_head = cur;
                self.entries -= 1;
                return true;
            }
            prev = cur;
            cur = next;
        }
        false
    }

    /// Returns every page to `memory` and empties the index (drop table).
    pub fn clear(&mut self, memory: &mut PageMemory) {
        self.check_memory(memory);
        for &page in self.dir_pages.iter().chain(self.elem_pages.iter()) {
            memory.free(page);
        }
        self.dir_pages.clear();
        self.elem_pages.clear();
        self.low_mask = 0;
        self.split = 0;
        self.entries = 0;
        self.free_head = NIL;
        self.fresh = 0;
    }

    /// Calls `f(hash, row)` for every entry, bucket by bucket.
    pub fn for_each(&self, memory: &PageMemory, mut f: impl FnMut(u32, u32)) {
        self.check_memory(memory);
        if self.dir_pages.is_empty() {
            return;
        }
        for bucket in 0..self.buckets() {
            let mut cur = self.head(memory, bucket as u32);
            while cur != NIL {
                let [h, row, next] = self.elem(memory, cur);
                f(h, row);
                cur = next;
            }
        }
    }

    /// The bucket `hash` belongs to now.
    #[inline]
    fn bucket_of(&self, hash: u32) -> u32 {
        let low = hash & self.low_mask;
        if low < self.split {
            hash & self.high_mask()
        } else {
            low
        }
    }

    /// `2^(level+1) - 1`.
    #[inline]
    fn high_mask(&self) -> u32 {
        (self.low_mask << 1) | 1
    }

    /// Splits while the load is above `LOAD_FACTOR`, at most
    /// `MAX_SPLITS_PER_INSERT` times, and records the entries moved.
    fn grow(&mut self, memory: &mut PageMemory) {
        let mut moved = 0;
        let mut splits = 0;
        while self.entries > self.buckets() * LOAD_FACTOR && splits < MAX_SPLITS_PER_INSERT {
            match self.split_one(memory) {
                Some(n) => moved += n,
                // No page for the directory: the split is retried by a later
                // insert. Chains grow longer meanwhile, but writes keep
                // succeeding while there is room for elements.
                None => break,
            }
            splits += 1;
        }
        self.max_moved = self.max_moved.max(moved);
    }

    /// Splits bucket `split` into itself and `split + 2^level`. Returns the
    /// entries moved, or `None` (nothing changed) if the new bucket needs a
    /// directory page and none is free.
    fn split_one(&mut self, memory: &mut PageMemory) -> Option<u32> {
        debug_assert!(
            self.low_mask != u32::MAX,
            "2^32 buckets cannot be exceeded: entries are bounded by u32 element refs"
        );
        let old = self.split;
        let new_bit = self.low_mask + 1;
        let new = old + new_bit;
        if (new >> DIR_SHIFT) as usize == self.dir_pages.len() {
            let page = memory.alloc()?;
            push_page(&mut self.dir_pages, page);
        }
        debug_assert!(
            ((new >> DIR_SHIFT) as usize) < self.dir_pages.len(),
            "directory pages must cover every bucket"
        );

        // Re-link the old chain into two chains; order within a chain does
        // not matter, so prepending is enough.
        let mut keep = NIL;
        let mut moved_head = NIL;
        let mut moved = 0;
        let mut cur = self.head(memory, old);
        while cur != NIL {
            let [h, _, next] = self.elem(memory, cur);
            if h & new_bit != 0 {
                self.set_next(memory, cur, moved_head);
                moved_head = cur;
                moved += 1;
            } else {
                self.set_next(memory, cur, keep);
                keep = cur;
            }
            cur = next;
        }
        self.set_head(memory, old, keep);
        self.set_head(memory, new, moved_head);

        self.split += 1;
        if self.split == new_bit {
            // Every bucket of this level is split: the table doubled.
            self.split = 0;
            self.low_mask = self.high_mask();
        }
        Some(moved)
    }

    /// A free element ref: from the free list, else the next never-used one
    /// (the caller has ensured an element page has room).
    #[inline]
    fn take_element(&mut self, memory: &PageMemory) -> u32 {
        if self.free_head != NIL {
            let elem = self.free_head;
            self.free_head = self.elem(memory, elem)[2];
            elem
        } else {
            debug_assert!(
                (self.fresh as usize) < self.elem_pages.len() * ELEMS_PER_PAGE as usize,
                "insert must secure an element page before taking an element"
            );
            self.fresh += 1;
            // Ref = element number + 1, and the number is the old `fresh`.
            self.fresh
        }
    }

    #[inline]
    fn head(&self, memory: &PageMemory, bucket: u32) -> u32 {
        let page = self.dir_pages[(bucket >> DIR_SHIFT) as usize];
        memory.words(page)[(bucket & DIR_MASK) as usize]
    }

    #[inline]
    fn set_head(&self, memory: &mut PageMemory, bucket: u32, elem: u32) {
        let page = self.dir_pages[(bucket >> DIR_SHIFT) as usize];
        memory.words_mut(page)[(bucket & DIR_MASK) as usize] = elem;
    }

    /// Page and word offset of element ref `elem`.
    #[inline]
    fn elem_at(&self, elem: u32) -> (PageId, usize) {
        debug_assert!(elem != NIL, "element ref 0 is the null ref");
        let number = elem - 1;
        let page = self.elem_pages[(number / ELEMS_PER_PAGE) as usize];
        (page, (number % ELEMS_PER_PAGE) as usize * ELEM_WORDS)
    }

    /// The element's [hash, row, next].
    #[inline]
    fn elem(&self, memory: &PageMemory, elem: u32) -> [u32; 3] {
        let (page, at) = self.elem_at(elem);
        let words = &memory.words(page)[at..at + ELEM_WORDS];
        [words[0], words[1], words[2]]
    }

    #[inline]
    fn set_elem(&self, memory: &mut PageMemory, elem: u32, value: [u32; 3]) {
        let (page, at) = self.elem_at(elem);
        memory.words_mut(page)[at..at + ELEM_WORDS].copy_from_slice(&value);
    }

    #[inline]
    fn set_next(&self, memory: &mut PageMemory, elem: u32, next: u32) {
        let (page, at) = self.elem_at(elem);
        memory.words_mut(page)[at + 2] = next;
    }

    #[inline]
    fn check_memory(&self, memory: &PageMemory) {
        debug_assert_eq!(
            memory.page_count(),
            self.memory_pages,
            "HashIndex used with a PageMemory other than the one it was created with"
        );
    }
}

/// Pushes onto a page list reserved for the whole pool; never reallocates.
#[inline]
fn push_page(list: &mut Vec<PageId>, page: PageId) {
    assert!(
        list.len() < list.capacity(),
        "page list reserved for the whole pool is full: index used with another PageMemory"
    );
    list.push(page);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page_memory::PAGE_SIZE;
    use std::collections::HashMap;
    use stdx::mix::XorShift;

    #[test]
    fn a_reserved_index_takes_its_entries_without_splitting() {
        let mut memory = memory(512);
        let mut index = HashIndex::new(&memory);
        index.reserve(&mut memory, 50_000);
        let buckets = index.buckets();
        assert!(buckets * LOAD_FACTOR >= 50_000, "{buckets} buckets");
        let mut rng = XorShift::new(7);
        let mut rows = HashMap::new();
        for row in 0..50_000u32 {
            let hash = rng.next_u64() as u32;
            index.insert(&mut memory, hash, row).expect("room");
            rows.insert(row, hash);
        }
        assert_eq!(index.buckets(), buckets, "no split while filling");
        assert_eq!(index.max_moved_per_insert(), 0);
        verify(&index, &memory);
        for (row, hash) in rows {
            let mut found = false;
            index.lookup(&memory, hash, |candidate| {
                found |= candidate == row;
                candidate == row
            });
            assert!(found, "row {row} found by its hash");
        }
    }

    fn memory(pages: u64) -> PageMemory {
        PageMemory::new(pages * PAGE_SIZE as u64)
    }

    /// Walks the whole structure and checks its invariants: every entry in
    /// the bucket its hash maps to, entry and element counts consistent.
    fn verify(index: &HashIndex, memory: &PageMemory) {
        let mut seen = 0u64;
        if !index.dir_pages.is_empty() {
            for bucket in 0..index.buckets() {
                let mut cur = index.head(memory, bucket as u32);
                while cur != NIL {
                    let [h, _, next] = index.elem(memory, cur);
                    assert_eq!(index.bucket_of(h) as u64, bucket, "entry in wrong bucket");
                    seen += 1;
                    cur = next;
                }
            }
        }
        assert_eq!(seen, index.len());
        let mut free = 0u64;
        let mut cur = index.free_head;
        while cur != NIL {
            free += 1;
            cur = index.elem(memory, cur)[2];
        }
        assert_eq!(
            seen + free,
            u64::from(index.fresh),
            "every used element is live or free"
        );
        assert!(
            index.buckets() <= (index.dir_pages.len() as u64) * u64::from(DIR_SLOTS)
                || index.dir_pages.is_empty()
        );
        assert!(index.pages_used() <= memory.used_pages());
    }

    /// Random inserts, removes and lookups against a std HashMap, with hashes
    /// drawn from a small set so that many keys collide.
    /// The prefetch stages read the index without changing it: the last
    /// stage names the row of a key among the first two of its chain, and
    /// nothing is named for an empty index or an absent hash.
    #[test]
    fn prefetch_names_the_first_row_and_changes_nothing() {
        let mut memory = memory(64);
        let mut index = HashIndex::new(&memory);
        assert_eq!(index.prefetch(&memory, 5, 1), None, "empty index");
        let mut rng = XorShift::new(9);
        let hashes: Vec<u32> = (0..5_000).map(|_| rng.next_u64() as u32).collect();
        for (row, &hash) in hashes.iter().enumerate() {
            index.insert(&mut memory, hash, row as u32).expect("room");
        }
        let mut named = 0;
        for (row, &hash) in hashes.iter().enumerate() {
            assert_eq!(index.prefetch(&memory, hash, 4), None);
            assert_eq!(index.prefetch(&memory, hash, 3), None);
            if let Some(early) = index.prefetch(&memory, hash, 2) {
                assert_eq!(hashes[early as usize], hash, "a row of that hash");
            }
            if let Some(first) = index.prefetch(&memory, hash, 1) {
                assert_eq!(hashes[first as usize], hash, "a row of that hash");
                named += usize::from(first == row as u32);
            }
            assert_eq!(
                index.lookup(&memory, hash, |r| r == row as u32),
                Some(row as u32)
            );
        }
        // The row stage reaches the keys among the first two of their
        // chain: about nine in ten at the index's load (the rest wait for
        // containers holding a bucket's chain in one cache line).
        assert!(
            named > hashes.len() * 3 / 4,
            "keys among the first two of their chain: {named}"
        );
        let absent = (0..u32::MAX)
            .find(|h| !hashes.contains(h))
            .expect("a free hash");
        assert_eq!(index.prefetch(&memory, absent, 1), None);
    }

    #[test]
    fn model_with_collisions() {
        let mut mem = memory(64);
        let mut index = HashIndex::new(&mem);
        let mut rng = XorShift::new(42);
        // key -> hash; the row reference is the key itself.
        let mut model: HashMap<u32, u32> = HashMap::new();
        let hash_of = |key: u32| -> u32 {
            match key % 4 {
                // Every such key has the same hash: one long chain.
                0 => 0xDEAD_BEEF,
                // Few distinct hashes: many keys per hash.
                1 => (key / 4) % 7,
                _ => stdx::mix::fmix64(u64::from(key)) as u32,
            }
        };
        const KEYS: u64 = 6000;
        for step in 0..60_000u32 {
            let key = rng.below(KEYS) as u32;
            let hash = hash_of(key);
            match rng.below(10) {
                0..=4 => {
                    if let std::collections::hash_map::Entry::Vacant(e) = model.entry(key) {
                        index.insert(&mut mem, hash, key).unwrap();
                        e.insert(hash);
                    }
                }
                5..=6 => {
                    let present = model.remove(&key).is_some();
                    assert_eq!(index.remove(&mut mem, hash, key), present);
                }
                _ => {
                    let found = index.lookup(&mem, hash, |row| row == key);
                    assert_eq!(found, model.contains_key(&key).then_some(key));
                }
            }
            // A wrong row with the right hash is not removed.
            assert!(!index.remove(&mut mem, hash, key + KEYS as u32));
            assert_eq!(index.len(), model.len() as u64);
            if step % 5000 == 0 {
                verify(&index, &mem);
            }
        }
        verify(&index, &mem);
        let mut all = HashMap::new();
        index.for_each(&mem, |h, row| {
            assert!(all.insert(row, h).is_none(), "row twice")
        });
        assert_eq!(all, model);
        assert!(index.buckets() > 1000, "the table grew");
        assert!(index.len() <= index.buckets() * LOAD_FACTOR);
    }

    #[test]
    fn lookup_calls_matcher_only_for_equal_hashes() {
        let mut mem = memory(4);
        let mut index = HashIndex::new(&mem);
        for row in 0..100 {
            index.insert(&mut mem, row, row).unwrap();
        }
        for row in 100..110 {
            index.insert(&mut mem, 7, row).unwrap();
        }
        let mut candidates = Vec::new();
        let found = index.lookup(&mem, 7, |row| {
            candidates.push(row);
            false
        });
        assert_eq!(found, None);
        candidates.sort_unstable();
        assert_eq!(
            candidates,
            [7, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109]
        );
        assert_eq!(index.lookup(&mem, 7, |row| row == 105), Some(105));
    }

    #[test]
    fn out_of_memory_leaves_index_unchanged() {
        // Empty index, pool exhausted by someone else: no page is kept.
        let mut mem = memory(1);
        let mut index = HashIndex::new(&mem);
        let other = mem.alloc().unwrap();
        assert_eq!(index.insert(&mut mem, 1, 1), Err(OutOfMemory));
        assert_eq!((index.len(), mem.used_pages()), (0, 1));
        mem.free(other);
        // Only a directory page fits: the element page is missing, and the
        // directory page taken for the attempt is given back.
        let mut index = HashIndex::new(&mem);
        assert_eq!(index.insert(&mut mem, 1, 1), Err(OutOfMemory));
        assert_eq!(
            (index.len(), mem.used_pages(), index.pages_used()),
            (0, 0, 0)
        );

        // One directory page, one element page, one page held by "rows".
        let mut mem = memory(3);
        let mut index = HashIndex::new(&mem);
        let rows_page = mem.alloc().unwrap();
        let mut rng = XorShift::new(7);
        let mut inserted = Vec::new();
        loop {
            let hash = rng.next_u64() as u32;
            let row = inserted.len() as u32;
            match index.insert(&mut mem, hash, row) {
                Ok(()) => inserted.push(hash),
                Err(OutOfMemory) => break,
            }
        }
        assert_eq!(
            inserted.len() as u32,
            ELEMS_PER_PAGE,
            "one element page full"
        );
        assert_eq!(index.len(), u64::from(ELEMS_PER_PAGE));
        for (row, &hash) in inserted.iter().enumerate() {
            assert_eq!(
                index.lookup(&mem, hash, |r| r == row as u32),
                Some(row as u32)
            );
        }
        verify(&index, &mem);

        // A removed entry's element is reused without a new page.
        assert!(index.remove(&mut mem, inserted[0], 0));
        index.insert(&mut mem, inserted[0], 0).unwrap();
        assert_eq!(index.insert(&mut mem, 5, 99_999), Err(OutOfMemory));

        // Once the rows give a page back, inserts succeed again.
        mem.free(rows_page);
        index.insert(&mut mem, 5, 99_999).unwrap();
        assert_eq!(index.lookup(&mem, 5, |r| r == 99_999), Some(99_999));
        for (row, &hash) in inserted.iter().enumerate() {
            assert_eq!(
                index.lookup(&mem, hash, |r| r == row as u32),
                Some(row as u32)
            );
        }
        verify(&index, &mem);
    }

    #[test]
    fn split_deferred_without_directory_page_then_caught_up() {
        // The index may take one directory page and the element pages of
        // `target` entries; "rows" hold 4 more. The split that needs a
        // second directory page comes while the last of those element
        // pages fills, so it must wait.
        let full_directory = LOAD_FACTOR as u32 * DIR_SLOTS;
        let target = full_directory + 1000;
        let element_pages = target.div_ceil(ELEMS_PER_PAGE);
        assert_eq!(
            (full_directory + 1).div_ceil(ELEMS_PER_PAGE),
            element_pages,
            "test sizing: the split is owed once memory is full"
        );
        let mut mem = memory(1 + u64::from(element_pages) + 4);
        let held: Vec<PageId> = (0..4).map(|_| mem.alloc().unwrap()).collect();
        let mut index = HashIndex::new(&mem);
        let mut rng = XorShift::new(3);
        let mut hashes = Vec::new();
        for row in 0..target {
            let hash = rng.next_u64() as u32;
            index.insert(&mut mem, hash, row).unwrap();
            hashes.push(hash);
        }
        assert_eq!(mem.free_pages(), 0);
        assert_eq!(index.buckets(), u64::from(DIR_SLOTS), "directory is full");
        assert!(
            index.len() > index.buckets() * LOAD_FACTOR,
            "splits were deferred"
        );
        for page in held {
            mem.free(page);
        }
        for row in target..target + 2000 {
            let hash = rng.next_u64() as u32;
            index.insert(&mut mem, hash, row).unwrap();
            hashes.push(hash);
        }
        assert!(index.len() <= index.buckets() * LOAD_FACTOR, "caught up");
        for (row, &hash) in hashes.iter().enumerate() {
            assert_eq!(
                index.lookup(&mem, hash, |r| r == row as u32),
                Some(row as u32)
            );
        }
        verify(&index, &mem);
        assert_eq!(index.pages_used(), mem.used_pages());
    }

    #[test]
    fn clear_returns_every_page() {
        let mut mem = memory(32);
        let mut index = HashIndex::new(&mem);
        let mut rng = XorShift::new(11);
        for row in 0..20_000 {
            index.insert(&mut mem, rng.next_u64() as u32, row).unwrap();
        }
        assert!(index.pages_used() > 2);
        assert_eq!(mem.used_pages(), index.pages_used());
        index.clear(&mut mem);
        assert_eq!(mem.used_pages(), 0);
        assert_eq!(
            (index.len(), index.buckets(), index.pages_used()),
            (0, 1, 0)
        );
        assert_eq!(index.lookup(&mem, 1, |_| true), None);
        let mut count = 0;
        index.for_each(&mem, |_, _| count += 1);
        assert_eq!(count, 0);
        // Reusable after clear.
        index.insert(&mut mem, 1, 2).unwrap();
        assert_eq!(index.lookup(&mem, 1, |r| r == 2), Some(2));
        verify(&index, &mem);
    }
}
