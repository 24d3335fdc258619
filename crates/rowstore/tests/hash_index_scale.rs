//! Scale test of the primary-key hash index: 2,000,000 inserts into one
//! index must all be found again, no insert may move more than a small,
//! bounded number of entries (linear hashing grows in small steps, never a
//! whole-table rehash), and inserts and lookups must not touch the heap.
//!
//! Run with `--release`: debug builds are slow for this many operations.

use rowstore::hash_index::{HashIndex, LOAD_FACTOR};
use rowstore::page_memory::{PageMemory, PAGE_SIZE};
use stdx::alloc_counter::{thread_allocations, CountingAllocator};
use stdx::mix::XorShift;

// Counts heap allocations so the test can prove the hot path makes none.
#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator(std::alloc::System);

const ROWS: u32 = 2_000_000;

#[test]
fn two_million_inserts_grow_in_small_steps() {
    // 256 MiB: far more than 2M entries need (about 14 bytes each).
    let mut memory = PageMemory::new(256 << 20);
    let mut index = HashIndex::new(&memory);
    // Hashes are regenerated from the same seed rather than kept in a Vec,
    // so the allocation count below covers only the index.
    let seed = 0x07E5_5E7A;

    let before = thread_allocations();
    let mut rng = XorShift::new(seed);
    for row in 0..ROWS {
        index
            .insert(&mut memory, rng.next_u64() as u32, row)
            .expect("memory is sized for every row");
    }
    let mut rng = XorShift::new(seed);
    for row in 0..ROWS {
        let hash = rng.next_u64() as u32;
        assert_eq!(
            index.lookup(&memory, hash, |r| r == row),
            Some(row),
            "row {row} lost"
        );
    }
    assert_eq!(
        thread_allocations(),
        before,
        "inserts and lookups must not allocate from the heap"
    );

    assert_eq!(index.len(), u64::from(ROWS));
    assert!(
        index.len() <= index.buckets() * LOAD_FACTOR,
        "load factor kept"
    );
    assert_eq!(index.pages_used(), memory.used_pages());
    let bytes = u64::from(index.pages_used()) * PAGE_SIZE as u64;
    println!(
        "hash index: {} entries, {} buckets, {} pages, {:.2} bytes/entry, max_moved_per_insert = {}",
        index.len(),
        index.buckets(),
        index.pages_used(),
        bytes as f64 / index.len() as f64,
        index.max_moved_per_insert()
    );
    assert!(
        index.max_moved_per_insert() <= 64,
        "an insert moved {} entries: growth is not incremental",
        index.max_moved_per_insert()
    );

    index.clear(&mut memory);
    assert_eq!(memory.used_pages(), 0, "clear returns every page");
}
