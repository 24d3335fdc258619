//! Scale test of the ordered index: a million entries inserted in random
//! order are all found again and walked in order, and inserts, seeks,
//! walks and removes never touch the heap (the index's memory is
//! DataMemory pages).
//!
//! Run with `--release`: debug builds are slow for this many operations.

use rowstore::ordered_index::{Entry, OrderedIndex};
use rowstore::page_memory::PageMemory;
use std::cmp::Ordering;
use stdx::alloc_counter::{thread_allocations, CountingAllocator};
use stdx::mix::XorShift;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator(std::alloc::System);

const ROWS: u32 = 1_000_000;

/// Row `r`'s key: a permutation of the row ids, so keys and row ids order
/// differently, with every fourth key shared by two rows.
fn key(row: u32) -> u64 {
    u64::from(row.wrapping_mul(2_654_435_761) >> 2)
}

fn entry(row: u32) -> Entry {
    Entry {
        prefix: key(row),
        row,
    }
}

fn order(e: Entry, row: u32) -> Ordering {
    e.prefix.cmp(&key(row)).then(e.row.cmp(&row))
}

#[test]
fn a_million_entries_without_the_heap() {
    let mut memory = PageMemory::new(64 << 20);
    let mut index = OrderedIndex::new(&memory);
    let seed = 0x0DE5;
    let before = thread_allocations();
    // Random insertion order: rows drawn with a stride through the ids.
    let mut random = XorShift::new(seed);
    let stride = 7_919u64; // prime to ROWS: a permutation
    for i in 0..ROWS {
        let row = (u64::from(i) * stride % u64::from(ROWS)) as u32;
        index
            .insert(&mut memory, entry(row), |_, e| order(e, row))
            .expect("memory is sized for every row");
    }
    // Every row is found by a seek on its key and row id.
    let mut walked = 0u32;
    for _ in 0..ROWS / 10 {
        let row = random.below(u64::from(ROWS)) as u32;
        let at = index
            .seek(&memory, |e| order(e, row) == Ordering::Less)
            .expect("every row is indexed");
        assert_eq!(index.entry(&memory, at), entry(row));
        // And the walk from it is in (key, row) order.
        let mut previous = entry(row);
        let mut next = index.next(&memory, at);
        for _ in 0..20 {
            let Some(position) = next else { break };
            let e = index.entry(&memory, position);
            assert_eq!(order(previous, e.row), Ordering::Less);
            previous = e;
            walked += 1;
            next = index.next(&memory, position);
        }
    }
    assert!(walked > 0);
    let after_inserts = thread_allocations();
    for i in 0..ROWS / 2 {
        let row = (u64::from(i) * stride % u64::from(ROWS)) as u32;
        assert!(index.remove(&mut memory, |_, e| order(e, row)).is_some());
    }
    assert_eq!(
        thread_allocations() - before,
        0,
        "inserts, seeks, walks and removes allocate nothing ({} by the inserts and seeks)",
        after_inserts - before
    );
    let entries = index.check(&memory, |a, b| order(a, b.row));
    assert_eq!(entries.len() as u32, ROWS - ROWS / 2);
    assert!(
        index.height() <= 5,
        "height {} for half a million",
        index.height()
    );
}
