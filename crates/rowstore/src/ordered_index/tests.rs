//! The ordered index against a model (a `BTreeMap` of (key, row id)):
//! random inserts, removes and range walks both ways, with the tree's
//! rules checked as it changes shape.

use super::*;
use crate::page_memory::PAGE_SIZE;
use signal::order::{key_prefix, KeyColumn};
use signal::schema::ColumnType;
use std::collections::BTreeMap;
use std::ops::Bound;
use stdx::mix::XorShift;

/// Rows by id, each a binary key: long shared beginnings make most
/// prefixes equal, so comparisons go to the "row" often.
struct Rows {
    keys: Vec<Option<Vec<u8>>>,
}

const COLUMN: [KeyColumn; 1] = [KeyColumn {
    column_type: ColumnType::VarBinary(64),
    nullable: false,
}];

fn prefix_of(key: &[u8]) -> u64 {
    key_prefix(&COLUMN, &[Some(key)]).value
}

impl Rows {
    fn key(&self, row: u32) -> &[u8] {
        self.keys[row as usize]
            .as_deref()
            .expect("an indexed row exists")
    }

    /// How `entry` stands relative to (key, row).
    fn order(&self, entry: Entry, key: &[u8], row: u32) -> Ordering {
        entry
            .prefix
            .cmp(&prefix_of(key))
            .then_with(|| self.key(entry.row).cmp(key))
            .then(entry.row.cmp(&row))
    }

    fn entry(&self, row: u32) -> Entry {
        Entry {
            prefix: prefix_of(self.key(row)),
            row,
        }
    }
}

fn draw_key(random: &mut XorShift) -> Vec<u8> {
    let mut key = b"shared-prefix-".to_vec();
    key.truncate(random.below(16) as usize);
    for _ in 0..random.below(4) {
        key.push(b'a' + random.below(4) as u8);
    }
    key
}

/// Walks the index forward from the first entry not below `low` and
/// backward from the last entry below `high`, comparing with the model.
fn check_ranges(
    index: &OrderedIndex,
    memory: &PageMemory,
    rows: &Rows,
    model: &BTreeMap<(Vec<u8>, u32), ()>,
    random: &mut XorShift,
) {
    let low = draw_key(random);
    let inclusive = random.below(2) == 0;
    // Forward from `low` (inclusive: entries with key >= low; exclusive:
    // key > low), whole keys only: a bound has no row id.
    let before = |e: Entry| {
        let order = e
            .prefix
            .cmp(&prefix_of(&low))
            .then_with(|| rows.key(e.row).cmp(&low));
        if inclusive {
            order == Ordering::Less
        } else {
            order != Ordering::Greater
        }
    };
    let limit = random.below(60) as usize;
    let mut walked = Vec::new();
    let mut at = index.seek(memory, before);
    while let Some(position) = at {
        if walked.len() == limit {
            break;
        }
        walked.push(index.entry(memory, position).row);
        at = index.next(memory, position);
    }
    let start = if inclusive {
        Bound::Included((low.clone(), 0))
    } else {
        Bound::Excluded((low.clone(), u32::MAX))
    };
    let expected: Vec<u32> = model
        .range((start, Bound::Unbounded))
        .take(limit)
        .map(|((_, row), _)| *row)
        .collect();
    assert_eq!(
        walked, expected,
        "forward from {low:?} inclusive {inclusive}"
    );

    // Backward from below `high`.
    let high = draw_key(random);
    let before = |e: Entry| {
        e.prefix
            .cmp(&prefix_of(&high))
            .then_with(|| rows.key(e.row).cmp(&high))
            == Ordering::Less
    };
    let mut walked = Vec::new();
    let mut at = index.seek_last_before(memory, before);
    while let Some(position) = at {
        if walked.len() == limit {
            break;
        }
        walked.push(index.entry(memory, position).row);
        at = index.prev(memory, position);
    }
    let expected: Vec<u32> = model
        .range((Bound::Unbounded, Bound::Excluded((high.clone(), 0))))
        .rev()
        .take(limit)
        .map(|((_, row), _)| *row)
        .collect();
    assert_eq!(walked, expected, "backward from below {high:?}");
}

fn check_against(
    index: &OrderedIndex,
    memory: &PageMemory,
    rows: &Rows,
    model: &BTreeMap<(Vec<u8>, u32), ()>,
) {
    let entries = index.check(memory, |a, b| rows.order(a, rows.key(b.row), b.row));
    let expected: Vec<u32> = model.keys().map(|(_, row)| *row).collect();
    let found: Vec<u32> = entries.iter().map(|e| e.row).collect();
    assert_eq!(found, expected, "the index's entries");
}

fn run_model(seed: u64, steps: usize, max_rows: u32) {
    let mut random = XorShift::new(seed);
    let mut memory = PageMemory::new(512 * PAGE_SIZE as u64);
    let mut index = OrderedIndex::new(&memory);
    let mut rows = Rows {
        keys: vec![None; max_rows as usize],
    };
    let mut model = BTreeMap::new();
    // Phases that grow and shrink the tree so that splits and merges
    // happen at every level.
    for step in 0..steps {
        let growing = (step / 3000) % 2 == 0;
        let insert = random.below(100) < if growing { 75 } else { 25 };
        let row = random.below(u64::from(max_rows)) as u32;
        if insert && rows.keys[row as usize].is_none() {
            let key = draw_key(&mut random);
            rows.keys[row as usize] = Some(key.clone());
            let entry = rows.entry(row);
            index
                .insert(&mut memory, entry, |_, e| rows.order(e, &key, row))
                .expect("memory for the model");
            model.insert((key, row), ());
        } else if !insert {
            if let Some(key) = rows.keys[row as usize].clone() {
                let removed = index.remove(&mut memory, |_, e| rows.order(e, &key, row));
                assert_eq!(removed, Some(rows.entry(row)), "remove of row {row}");
                model.remove(&(key, row));
                rows.keys[row as usize] = None;
            } else {
                // A row the index does not hold: nothing to remove.
                let key = draw_key(&mut random);
                assert_eq!(
                    index.remove(&mut memory, |_, e| rows.order(e, &key, row)),
                    None
                );
            }
        }
        if step % 97 == 0 {
            check_ranges(&index, &memory, &rows, &model, &mut random);
        }
        if step % 499 == 0 {
            check_against(&index, &memory, &rows, &model);
        }
    }
    check_against(&index, &memory, &rows, &model);
    // Empty it: every node goes back, the pages stay with the index.
    for ((key, row), ()) in std::mem::take(&mut model) {
        assert!(index
            .remove(&mut memory, |_, e| rows.order(e, &key, row))
            .is_some());
        rows.keys[row as usize] = None;
    }
    check_against(&index, &memory, &rows, &model);
    assert_eq!((index.len(), index.height()), (0, 0));
    index.clear(&mut memory);
    assert_eq!(
        memory.index_nodes().in_use(),
        0,
        "clear gives every node back"
    );
}

#[test]
fn random_changes_match_the_model() {
    for seed in 1..=6 {
        run_model(seed, 24_000, 4000);
    }
}

#[test]
fn a_small_key_space_with_many_equal_keys_matches_the_model() {
    // Few distinct keys over many rows: long runs of equal keys ordered by
    // row id, split across leaves.
    run_model(77, 30_000, 20_000);
}

/// Row ids as keys (exact prefixes): ascending and descending fills and
/// empties take the tree through every split and merge shape.
#[test]
fn ordered_fills_and_empties_keep_the_tree_valid() {
    let mut memory = PageMemory::new(256 * PAGE_SIZE as u64);
    let mut index = OrderedIndex::new(&memory);
    let by_row = |row: u32| move |_: &PageMemory, e: Entry| e.row.cmp(&row);
    let entry = |row: u32| Entry {
        prefix: u64::from(row),
        row,
    };
    let all_in_order =
        |index: &OrderedIndex, memory: &PageMemory, expected: &mut dyn Iterator<Item = u32>| {
            let found: Vec<u32> = index
                .check(memory, |a, b| a.row.cmp(&b.row))
                .iter()
                .map(|e| e.row)
                .collect();
            assert_eq!(found, expected.collect::<Vec<_>>());
        };
    let n = 60_000u32;
    for row in 0..n {
        index.insert(&mut memory, entry(row), by_row(row)).unwrap();
    }
    assert!(index.height() >= 4, "height {}", index.height());
    all_in_order(&index, &memory, &mut (0..n));
    // Every other row out, then the rest from the top down.
    for row in (0..n).step_by(2) {
        assert!(index.remove(&mut memory, by_row(row)).is_some());
    }
    all_in_order(&index, &memory, &mut (1..n).step_by(2));
    for row in (1..n).step_by(2).rev() {
        assert!(index.remove(&mut memory, by_row(row)).is_some());
    }
    all_in_order(&index, &memory, &mut (0..0));
    // Descending fill, then removal from the front.
    for row in (0..n).rev() {
        index.insert(&mut memory, entry(row), by_row(row)).unwrap();
    }
    all_in_order(&index, &memory, &mut (0..n));
    let pages = memory.used_pages();
    for row in 0..n {
        assert!(index.remove(&mut memory, by_row(row)).is_some());
        if row % 5000 == 0 {
            all_in_order(&index, &memory, &mut (row + 1..n));
        }
    }
    assert!(index.is_empty());
    assert!(pages > 40, "{pages} pages for 60,000 entries");
    assert_eq!(
        memory.used_pages(),
        0,
        "pages whose nodes are all free go back"
    );
}

#[test]
fn an_insert_without_memory_fails_and_changes_nothing() {
    let mut memory = PageMemory::new(3 * PAGE_SIZE as u64);
    let mut index = OrderedIndex::new(&memory);
    let entry = |row: u32| Entry {
        prefix: u64::from(row),
        row,
    };
    let mut inserted = 0u32;
    loop {
        let row = inserted;
        match index.insert(&mut memory, entry(row), |_, e| e.row.cmp(&row)) {
            Ok(()) => inserted += 1,
            Err(OutOfMemory) => break,
        }
    }
    assert!(inserted > 1000, "3 pages hold {inserted} entries");
    let entries = index.check(&memory, |a, b| a.row.cmp(&b.row));
    assert_eq!(
        entries.len() as u32,
        inserted,
        "the failed insert left nothing behind"
    );
    // Removes still work; once they merged nodes free, so do inserts
    // (an insert needs room for a split at every level first).
    for row in 0..inserted / 2 {
        assert!(index.remove(&mut memory, |_, e| e.row.cmp(&row)).is_some());
    }
    index
        .insert(&mut memory, entry(0), |_, e| e.row.cmp(&0))
        .unwrap();
    let entries = index.check(&memory, |a, b| a.row.cmp(&b.row));
    assert_eq!(entries.len() as u32, inserted - inserted / 2 + 1);
}

#[test]
#[should_panic(expected = "inserted into an ordered index that holds it")]
fn an_entry_inserted_twice_is_a_broken_invariant() {
    let mut memory = PageMemory::new(4 * PAGE_SIZE as u64);
    let mut index = OrderedIndex::new(&memory);
    let entry = Entry { prefix: 7, row: 7 };
    index
        .insert(&mut memory, entry, |_, e| e.row.cmp(&7))
        .unwrap();
    let _ = index.insert(&mut memory, entry, |_, e| e.row.cmp(&7));
}

#[test]
fn a_reserved_insert_succeeds_when_memory_has_run_out() {
    let mut memory = PageMemory::new(3 * PAGE_SIZE as u64);
    let mut index = OrderedIndex::new(&memory);
    let entry = |row: u32| Entry {
        prefix: u64::from(row),
        row,
    };
    let reservation = index.reserve_insert(&mut memory).unwrap();
    assert_eq!(memory.index_nodes().reserved(), u32::from(reservation));
    // Unreserved inserts fill memory and stop short of the promised nodes
    // (and the spare).
    let mut row = 1u32;
    while index
        .insert(&mut memory, entry(row), |_, e| e.row.cmp(&row))
        .is_ok()
    {
        row += 1;
    }
    assert!(row > 1000);
    // The prepared insert (row 0, before all of them: a split on the way)
    // still goes in.
    index.insert_promised(&mut memory, reservation, entry(0), |_, e| e.row.cmp(&0));
    let entries = index.check(&memory, |a, b| a.row.cmp(&b.row));
    assert_eq!(entries.len() as u32, row);
    assert_eq!(memory.index_nodes().reserved(), 0);
}

/// A sorted build of every size from empty to a few levels holds exactly
/// its entries, passes the tree's checks (every node at least half full,
/// links both ways), walks like a model, and takes inserts and removes
/// afterwards as any tree does.
#[test]
fn a_sorted_build_equals_the_model_and_changes_like_any_tree() {
    let mut random = XorShift::new(77);
    for count in [0u32, 1, 2, 40, 41, 42, 83, 1_000, 1_300, 5_000, 40_000] {
        let mut memory = PageMemory::new(2048 * PAGE_SIZE as u64);
        let mut index = OrderedIndex::new(&memory);
        let mut rows = Rows {
            keys: vec![None; count as usize + 200],
        };
        let mut model = BTreeMap::new();
        for row in 0..count {
            let key = draw_key(&mut random);
            rows.keys[row as usize] = Some(key.clone());
            model.insert((key, row), ());
        }
        let mut sorted: Vec<Entry> = (0..count).map(|row| rows.entry(row)).collect();
        sorted.sort_by(|a, b| rows.order(*a, rows.key(b.row), b.row));
        index.build_sorted(&mut memory, &sorted).expect("room");
        assert_eq!(index.len(), u64::from(count));
        check_against(&index, &memory, &rows, &model);
        for _ in 0..20 {
            check_ranges(&index, &memory, &rows, &model, &mut random);
        }
        // Changes after the build.
        for row in count..count + 200 {
            let key = draw_key(&mut random);
            rows.keys[row as usize] = Some(key.clone());
            let entry = rows.entry(row);
            index
                .insert(&mut memory, entry, |_, e| rows.order(e, &key, row))
                .expect("room");
            model.insert((key, row), ());
        }
        for row in (0..count).step_by(3) {
            let key = rows.key(row).to_vec();
            assert!(index
                .remove(&mut memory, |_, e| rows.order(e, &key, row))
                .is_some());
            model.remove(&(key, row));
        }
        check_against(&index, &memory, &rows, &model);
    }
}

#[test]
fn a_sorted_build_datamemory_cannot_hold_leaves_the_index_empty() {
    let mut memory = PageMemory::new(2 * PAGE_SIZE as u64);
    let mut index = OrderedIndex::new(&memory);
    let entries: Vec<Entry> = (0..100_000)
        .map(|row| Entry {
            prefix: u64::from(row),
            row,
        })
        .collect();
    assert!(index.build_sorted(&mut memory, &entries).is_err());
    assert!(index.is_empty());
    assert_eq!(index.nodes(), 0);
}
