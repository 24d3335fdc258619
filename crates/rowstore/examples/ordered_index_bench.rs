//! Figures for the choice of the ordered index's shape
//! (docs/design/0021-ordered-index.md): the B+tree with 8-byte key
//! prefixes, the same tree comparing through the rows only, and the
//! standard library's BTreeMap holding copies of the keys (a reference
//! point: it allocates per node on the heap and copies every key, which a
//! data node's index must not).
//!
//! `cargo run --release -p rowstore --example ordered_index_bench -- [ROWS]`
//!
//! Rows are 128-byte records in one large arena, placed in random order,
//! so reading a row's key is the cache miss it is in a data node. Three key
//! shapes: a BIGINT (the prefix is the whole key), a VARCHAR starting with
//! random characters (the prefix nearly always decides) and a VARCHAR whose
//! first 12 bytes every key shares (the prefix never decides). Prints one
//! line per (shape, structure): ns per insert, per point seek, per 100-row
//! range walk (reading each row's key, as a scan would) and per remove.

use rowstore::ordered_index::{Entry, OrderedIndex};
use rowstore::page_memory::PageMemory;
use signal::order::{compare_values, key_prefix, KeyColumn};
use signal::schema::ColumnType;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Instant;
use stdx::mix::XorShift;

const ROW_BYTES: usize = 128;

/// The rows: keys at the start of 128-byte records, row `r` at slot
/// `place[r]`.
struct Rows {
    arena: Vec<u8>,
    place: Vec<u32>,
    column_type: ColumnType,
}

impl Rows {
    fn new(count: u32, column_type: ColumnType, shared_start: bool, seed: u64) -> Rows {
        let mut random = XorShift::new(seed);
        let mut place: Vec<u32> = (0..count).collect();
        for i in (1..place.len()).rev() {
            let j = random.below(i as u64 + 1) as usize;
            place.swap(i, j);
        }
        let mut rows = Rows {
            arena: vec![0; count as usize * ROW_BYTES],
            place,
            column_type,
        };
        for row in 0..count {
            let key: Vec<u8> = match column_type {
                ColumnType::BigInt { .. } => random.next_u64().to_le_bytes().to_vec(),
                _ if !shared_start => format!("{:016x}{row:010}", random.next_u64()).into_bytes(),
                _ => format!("customer-id-{:016x}{row:010}", random.next_u64()).into_bytes(),
            };
            let at = rows.place[row as usize] as usize * ROW_BYTES;
            rows.arena[at] = key.len() as u8;
            rows.arena[at + 1..at + 1 + key.len()].copy_from_slice(&key);
        }
        rows
    }

    #[inline]
    fn key(&self, row: u32) -> &[u8] {
        let at = self.place[row as usize] as usize * ROW_BYTES;
        let length = self.arena[at] as usize;
        &self.arena[at + 1..at + 1 + length]
    }

    fn prefix(&self, key: &[u8]) -> u64 {
        let column = KeyColumn {
            column_type: self.column_type,
            nullable: false,
        };
        key_prefix(&[column], &[Some(key)]).value
    }

    #[inline]
    fn compare_keys(&self, a: &[u8], b: &[u8]) -> Ordering {
        compare_values(self.column_type, a, b)
    }
}

struct Figures {
    insert: f64,
    seek: f64,
    range: f64,
    remove: f64,
}

fn per_op(start: Instant, ops: u64) -> f64 {
    start.elapsed().as_nanos() as f64 / ops as f64
}

fn shuffled(count: u32, seed: u64) -> Vec<u32> {
    let mut random = XorShift::new(seed);
    let mut order: Vec<u32> = (0..count).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, random.below(i as u64 + 1) as usize);
    }
    order
}

/// The B+tree; `use_prefix` false stores 0 for every prefix, so every
/// comparison reads the rows.
fn tree(rows: &Rows, count: u32, use_prefix: bool) -> Figures {
    let mut memory = PageMemory::new(count as u64 * 64 + (64 << 20));
    let mut index = OrderedIndex::new(&memory);
    let prefix = |key: &[u8]| if use_prefix { rows.prefix(key) } else { 0 };
    // How entry `e` stands relative to (key with prefix p, row).
    let order = |e: Entry, p: u64, key: &[u8], row: u32| {
        e.prefix
            .cmp(&p)
            .then_with(|| rows.compare_keys(rows.key(e.row), key))
            .then(e.row.cmp(&row))
    };
    let inserts = shuffled(count, 1);
    let start = Instant::now();
    for &row in &inserts {
        let key = rows.key(row);
        let p = prefix(key);
        index
            .insert(&mut memory, Entry { prefix: p, row }, |_, e| {
                order(e, p, key, row)
            })
            .expect("memory sized for the rows");
    }
    let insert = per_op(start, u64::from(count));

    let lookups = shuffled(count, 2);
    let seeks = (count / 4).max(1);
    let start = Instant::now();
    for &row in &lookups[..seeks as usize] {
        let key = rows.key(row);
        let p = prefix(key);
        let at = index.seek(&memory, |e| order(e, p, key, 0) == Ordering::Less);
        black_box(at.map(|at| index.entry(&memory, at)));
    }
    let seek = per_op(start, u64::from(seeks));

    let ranges = (count / 100).max(1);
    let start = Instant::now();
    let mut bytes = 0usize;
    for &row in &lookups[..ranges as usize] {
        let key = rows.key(row);
        let p = prefix(key);
        let mut at = index.seek(&memory, |e| order(e, p, key, 0) == Ordering::Less);
        for _ in 0..100 {
            let Some(position) = at else { break };
            bytes += rows.key(index.entry(&memory, position).row).len();
            at = index.next(&memory, position);
        }
    }
    black_box(bytes);
    let range = per_op(start, u64::from(ranges));

    let start = Instant::now();
    for &row in &lookups {
        let key = rows.key(row);
        let p = prefix(key);
        index
            .remove(&mut memory, |_, e| order(e, p, key, row))
            .expect("every row is indexed");
    }
    let remove = per_op(start, u64::from(count));
    Figures {
        insert,
        seek,
        range,
        remove,
    }
}

/// The standard library's BTreeMap over copies of the keys (binary
/// order, which is the VARCHAR's too for these keys: no trailing spaces).
fn std_btree(rows: &Rows, count: u32) -> Figures {
    let sortable = |key: &[u8]| -> Vec<u8> {
        match rows.column_type {
            ColumnType::BigInt { .. } => u64::from_le_bytes(key.try_into().expect("8 bytes"))
                .to_be_bytes()
                .to_vec(),
            _ => key.to_vec(),
        }
    };
    let mut map = BTreeMap::new();
    let inserts = shuffled(count, 1);
    let start = Instant::now();
    for &row in &inserts {
        map.insert((sortable(rows.key(row)), row), ());
    }
    let insert = per_op(start, u64::from(count));
    let lookups = shuffled(count, 2);
    let seeks = (count / 4).max(1);
    let start = Instant::now();
    for &row in &lookups[..seeks as usize] {
        black_box(map.range((sortable(rows.key(row)), 0)..).next());
    }
    let seek = per_op(start, u64::from(seeks));
    let ranges = (count / 100).max(1);
    let start = Instant::now();
    let mut bytes = 0usize;
    for &row in &lookups[..ranges as usize] {
        for ((_, found), ()) in map.range((sortable(rows.key(row)), 0)..).take(100) {
            bytes += rows.key(*found).len();
        }
    }
    black_box(bytes);
    let range = per_op(start, u64::from(ranges));
    let start = Instant::now();
    for &row in &lookups {
        map.remove(&(sortable(rows.key(row)), row));
    }
    let remove = per_op(start, u64::from(count));
    Figures {
        insert,
        seek,
        range,
        remove,
    }
}

fn main() {
    let count: u32 = std::env::args()
        .nth(1)
        .map(|n| n.parse().expect("ROWS is a number"))
        .unwrap_or(1_000_000);
    println!("rows {count}; ns per operation (range: seek + 100 rows read)");
    println!(
        "{:<22} {:<18} {:>8} {:>8} {:>8} {:>8}",
        "keys", "structure", "insert", "seek", "range", "remove"
    );
    let shapes = [
        ("bigint", ColumnType::BigInt { unsigned: true }, false),
        ("varchar random start", ColumnType::VarChar(40), false),
        ("varchar shared start", ColumnType::VarChar(40), true),
    ];
    for (seed, (name, column_type, shared_start)) in (1..).zip(shapes) {
        let rows = Rows::new(count, column_type, shared_start, seed);
        let results = [
            ("btree + prefix", tree(&rows, count, true)),
            ("btree, rows only", tree(&rows, count, false)),
            ("std BTreeMap (copies)", std_btree(&rows, count)),
        ];
        for (structure, f) in results {
            println!(
                "{name:<22} {structure:<18} {:>8.0} {:>8.0} {:>8.0} {:>8.0}",
                f.insert, f.seek, f.range, f.remove
            );
        }
    }
}
