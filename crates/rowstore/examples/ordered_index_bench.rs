//! Figures for the choice of the ordered index's shape
//! (docs/design/0021-ordered-index.md): the B+tree with 8-byte key
//! prefixes, the same tree comparing through the rows only, a T-tree (NDB
//! DBTUX's shape: a balanced binary tree whose nodes each hold a sorted
//! run of entries) holding the same (prefix, row) entries, and the
//! standard library's BTreeMap holding copies of the keys (a reference
//! point: it allocates per node on the heap and copies every key, which a
//! data node's index must not). The T-tree here lives on the heap and has
//! no remove: it measures the shape's descent and walk, not a storage
//! engine's version of it.
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

/// Entries a T-tree node holds (NDB's DBTUX nodes hold a few dozen).
const T_NODE_ENTRIES: usize = 32;

/// A T-tree node: a sorted run of entries, every entry of the left
/// subtree below them and of the right subtree above, AVL-balanced.
struct TNode {
    entries: Vec<Entry>,
    left: Option<Box<TNode>>,
    right: Option<Box<TNode>>,
    height: i32,
}

fn t_leaf(entry: Entry) -> Box<TNode> {
    let mut entries = Vec::with_capacity(T_NODE_ENTRIES);
    entries.push(entry);
    Box::new(TNode {
        entries,
        left: None,
        right: None,
        height: 1,
    })
}

fn t_height(node: &Option<Box<TNode>>) -> i32 {
    node.as_ref().map_or(0, |node| node.height)
}

fn t_balance(mut node: Box<TNode>) -> Box<TNode> {
    let fix = |node: &mut TNode| node.height = 1 + t_height(&node.left).max(t_height(&node.right));
    let rotate_right = |mut node: Box<TNode>| {
        let mut left = node.left.take().expect("a left child to rotate");
        node.left = left.right.take();
        fix(&mut node);
        left.right = Some(node);
        fix(&mut left);
        left
    };
    let rotate_left = |mut node: Box<TNode>| {
        let mut right = node.right.take().expect("a right child to rotate");
        node.right = right.left.take();
        fix(&mut node);
        right.left = Some(node);
        fix(&mut right);
        right
    };
    fix(&mut node);
    let skew = t_height(&node.left) - t_height(&node.right);
    if skew > 1 {
        let left = node.left.take().expect("taller left");
        node.left = Some(if t_height(&left.left) < t_height(&left.right) {
            rotate_left(left)
        } else {
            left
        });
        return rotate_right(node);
    }
    if skew < -1 {
        let right = node.right.take().expect("taller right");
        node.right = Some(if t_height(&right.right) < t_height(&right.left) {
            rotate_right(right)
        } else {
            right
        });
        return rotate_left(node);
    }
    node
}

/// Inserts `entry`, above every entry of the subtree.
fn t_insert_max(node: Option<Box<TNode>>, entry: Entry) -> Box<TNode> {
    let Some(mut node) = node else {
        return t_leaf(entry);
    };
    if node.right.is_some() {
        node.right = Some(t_insert_max(node.right.take(), entry));
        return t_balance(node);
    }
    if node.entries.len() < T_NODE_ENTRIES {
        node.entries.push(entry);
        return node;
    }
    node.right = Some(t_leaf(entry));
    t_balance(node)
}

fn t_insert(
    node: Option<Box<TNode>>,
    entry: Entry,
    order: &impl Fn(Entry, Entry) -> Ordering,
) -> Box<TNode> {
    let Some(mut node) = node else {
        return t_leaf(entry);
    };
    let first = node.entries[0];
    let last = *node.entries.last().expect("a node holds an entry");
    if order(entry, first) == Ordering::Less && node.left.is_some() {
        node.left = Some(t_insert(node.left.take(), entry, order));
        return t_balance(node);
    }
    if order(entry, last) == Ordering::Greater && node.right.is_some() {
        node.right = Some(t_insert(node.right.take(), entry, order));
        return t_balance(node);
    }
    // The bounding node, or the last one on the way.
    let at = node
        .entries
        .partition_point(|&held| order(held, entry) == Ordering::Less);
    if node.entries.len() < T_NODE_ENTRIES {
        node.entries.insert(at, entry);
        return node;
    }
    if at == 0 {
        node.left = Some(t_leaf(entry));
    } else if at == node.entries.len() {
        node.right = Some(t_leaf(entry));
    } else {
        // Full: the entry goes in, the smallest moves down to the left
        // subtree, above everything there.
        node.entries.insert(at, entry);
        let smallest = node.entries.remove(0);
        node.left = Some(t_insert_max(node.left.take(), smallest));
    }
    t_balance(node)
}

/// Visits up to `count` entries from the first one `before` is false
/// for, in order.
fn t_walk(
    root: &Option<Box<TNode>>,
    before: impl Fn(Entry) -> bool,
    count: usize,
    mut visit: impl FnMut(Entry),
) {
    // Nodes whose left subtree is done, with the next entry to visit.
    let mut stack: Vec<(&TNode, usize)> = Vec::with_capacity(48);
    let mut at = root.as_deref();
    while let Some(node) = at {
        if before(*node.entries.last().expect("a node holds an entry")) {
            at = node.right.as_deref();
        } else if !before(node.entries[0]) {
            stack.push((node, 0));
            at = node.left.as_deref();
        } else {
            let position = node.entries.partition_point(|&entry| before(entry));
            stack.push((node, position));
            break;
        }
    }
    let mut visited = 0;
    while visited < count {
        let Some((node, next)) = stack.last_mut() else {
            return;
        };
        if *next < node.entries.len() {
            visit(node.entries[*next]);
            *next += 1;
            visited += 1;
            continue;
        }
        let right = node.right.as_deref();
        stack.pop();
        let mut down = right;
        while let Some(node) = down {
            stack.push((node, 0));
            down = node.left.as_deref();
        }
    }
}

/// A T-tree of (prefix, row) entries, compared as the B+tree's are.
fn t_tree(rows: &Rows, count: u32) -> Figures {
    let order = |a: Entry, b: Entry| {
        a.prefix
            .cmp(&b.prefix)
            .then_with(|| rows.compare_keys(rows.key(a.row), rows.key(b.row)))
            .then(a.row.cmp(&b.row))
    };
    let mut root: Option<Box<TNode>> = None;
    let inserts = shuffled(count, 1);
    let start = Instant::now();
    for &row in &inserts {
        let entry = Entry {
            prefix: rows.prefix(rows.key(row)),
            row,
        };
        root = Some(t_insert(root.take(), entry, &order));
    }
    let insert = per_op(start, u64::from(count));
    // Below the target: its prefix, then its key (row 0 comes first).
    let below = |entry: Entry, p: u64, key: &[u8]| {
        entry
            .prefix
            .cmp(&p)
            .then_with(|| rows.compare_keys(rows.key(entry.row), key))
            == Ordering::Less
    };
    let lookups = shuffled(count, 2);
    let seeks = (count / 4).max(1);
    let start = Instant::now();
    for &row in &lookups[..seeks as usize] {
        let key = rows.key(row);
        let p = rows.prefix(key);
        t_walk(
            &root,
            |entry| below(entry, p, key),
            1,
            |entry| {
                black_box(entry);
            },
        );
    }
    let seek = per_op(start, u64::from(seeks));
    let ranges = (count / 100).max(1);
    let start = Instant::now();
    let mut bytes = 0usize;
    for &row in &lookups[..ranges as usize] {
        let key = rows.key(row);
        let p = rows.prefix(key);
        t_walk(
            &root,
            |entry| below(entry, p, key),
            100,
            |entry| {
                bytes += rows.key(entry.row).len();
            },
        );
    }
    black_box(bytes);
    let range = per_op(start, u64::from(ranges));
    // Checked once: the walk sees every row, in order.
    let mut previous: Option<Entry> = None;
    let mut seen = 0u32;
    t_walk(
        &root,
        |_| false,
        usize::MAX,
        |entry| {
            if let Some(previous) = previous {
                assert_eq!(
                    order(previous, entry),
                    Ordering::Less,
                    "the T-tree is in order"
                );
            }
            previous = Some(entry);
            seen += 1;
        },
    );
    assert_eq!(seen, count, "the T-tree holds every row");
    Figures {
        insert,
        seek,
        range,
        remove: f64::NAN,
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
            ("T-tree + prefix", t_tree(&rows, count)),
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
