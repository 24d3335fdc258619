//! The nodes of ordered indexes and where they live: fixed-size nodes cut
//! from DataMemory pages, shared by every ordered index of the ldm thread
//! (a small table's index takes a node, not a page), and their byte
//! layout.
//!
//! A node is `NODE_BYTES` bytes: a 16-byte header, then the entries' key
//! prefixes (`u64` each) together, then their row ids (`u32` each)
//! together, so that a binary search reads prefixes from a few adjacent
//! cache lines; an inner node then has its children (`u32` node refs, one
//! more than its entries). Its entries are separators: entry `i` is the
//! smallest entry under child `i + 1`.
//!
//! Header: entry count (u16), leaf flag (u8), then the leaf's next and
//! previous leaves (u32 node refs; a free node chains the free list
//! through `next`).
//!
//! A page holds `NODES_PER_PAGE` nodes. A page cut into nodes stays with
//! the node list (free nodes are reused by any index); a node ref is
//! `page * 64 + slot + 1`, 0 is no node.

use crate::page_memory::{PageId, PageMemory, PAGE_SIZE};
use std::cmp::Ordering;

/// Bytes in one node. 512: a leaf holds 41 entries and an inner node 30
/// separators, so a million entries take 4 levels; an insert shifts at
/// most half a node (design note scans-and-indexes.md §2 has the
/// measurements behind the choice).
pub const NODE_BYTES: usize = 512;

/// Nodes per page.
pub const NODES_PER_PAGE: u32 = (PAGE_SIZE / NODE_BYTES) as u32;
const SLOT_SHIFT: u32 = 6;
const _: () = assert!(
    NODES_PER_PAGE == 1 << SLOT_SHIFT,
    "a node ref packs the slot in the low bits"
);

const HEADER: usize = 16;
const COUNT_AT: usize = 0;
const LEAF_AT: usize = 2;
const NEXT_AT: usize = 4;
const PREV_AT: usize = 8;

/// Entries in a full leaf.
pub const LEAF_CAPACITY: usize = (NODE_BYTES - HEADER) / 12;
/// Separators in a full inner node (it then has one more child).
pub const INNER_CAPACITY: usize = (NODE_BYTES - HEADER - 4) / 16;
/// Fewest entries of a leaf that is not the root.
pub const LEAF_MINIMUM: usize = LEAF_CAPACITY / 2;
/// Fewest separators of an inner node that is not the root.
pub const INNER_MINIMUM: usize = INNER_CAPACITY / 2;
const _: () = assert!(
    2 * LEAF_MINIMUM - 1 <= LEAF_CAPACITY && 2 * INNER_MINIMUM <= INNER_CAPACITY,
    "a node below its minimum and a sibling at it merge into one node"
);
const _: () = assert!(INNER_MINIMUM >= 1 && LEAF_MINIMUM >= 2);

/// No node.
pub const NIL: u32 = 0;

/// One index entry: the row's key prefix (`signal::order::key_prefix`)
/// and its row id. Entries are ordered by key, then row id, so that equal
/// keys of a non-unique index still have one place each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The key's order-preserving prefix.
    pub prefix: u64,
    /// The row id.
    pub row: u32,
}

/// A node's bytes, copied out of its page for a change that touches
/// several nodes at once.
pub type NodeBytes = [u8; NODE_BYTES];

#[inline]
fn read_u16(node: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([node[at], node[at + 1]])
}

#[inline]
fn read_u32(node: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(node[at..at + 4].try_into().expect("4 bytes"))
}

#[inline]
fn write_u32(node: &mut [u8], at: usize, value: u32) {
    node[at..at + 4].copy_from_slice(&value.to_ne_bytes());
}

#[inline]
pub fn count(node: &[u8]) -> usize {
    read_u16(node, COUNT_AT) as usize
}

#[inline]
fn set_count(node: &mut [u8], count: usize) {
    node[COUNT_AT..COUNT_AT + 2].copy_from_slice(&(count as u16).to_ne_bytes());
}

#[inline]
pub fn is_leaf(node: &[u8]) -> bool {
    node[LEAF_AT] != 0
}

/// Makes `node` an empty leaf or inner node with no links.
pub fn format(node: &mut [u8], leaf: bool) {
    node[..HEADER].fill(0);
    node[LEAF_AT] = u8::from(leaf);
}

#[inline]
pub fn next(node: &[u8]) -> u32 {
    read_u32(node, NEXT_AT)
}

#[inline]
pub fn set_next(node: &mut [u8], to: u32) {
    write_u32(node, NEXT_AT, to);
}

#[inline]
pub fn prev(node: &[u8]) -> u32 {
    read_u32(node, PREV_AT)
}

#[inline]
pub fn set_prev(node: &mut [u8], to: u32) {
    write_u32(node, PREV_AT, to);
}

#[inline]
fn capacity(node: &[u8]) -> usize {
    if is_leaf(node) {
        LEAF_CAPACITY
    } else {
        INNER_CAPACITY
    }
}

#[inline]
fn prefix_at(i: usize) -> usize {
    HEADER + 8 * i
}

#[inline]
fn row_at(node: &[u8], i: usize) -> usize {
    HEADER + 8 * capacity(node) + 4 * i
}

#[inline]
fn child_at(i: usize) -> usize {
    HEADER + 12 * INNER_CAPACITY + 4 * i
}

#[inline]
pub fn entry(node: &[u8], i: usize) -> Entry {
    debug_assert!(i < count(node), "entry {i} of a node of {}", count(node));
    let at = prefix_at(i);
    Entry {
        prefix: u64::from_ne_bytes(node[at..at + 8].try_into().expect("8 bytes")),
        row: read_u32(node, row_at(node, i)),
    }
}

#[inline]
pub fn set_entry(node: &mut [u8], i: usize, entry: Entry) {
    let at = prefix_at(i);
    node[at..at + 8].copy_from_slice(&entry.prefix.to_ne_bytes());
    let at = row_at(node, i);
    write_u32(node, at, entry.row);
}

/// Inserts `entry` at `i`, shifting the entries from `i` on.
pub fn insert_entry(node: &mut [u8], i: usize, entry: Entry) {
    let n = count(node);
    assert!(
        n < capacity(node) && i <= n,
        "insert at {i} into a node of {n}"
    );
    node.copy_within(prefix_at(i)..prefix_at(n), prefix_at(i + 1));
    let rows = row_at(node, 0);
    node.copy_within(rows + 4 * i..rows + 4 * n, rows + 4 * (i + 1));
    set_count(node, n + 1);
    set_entry(node, i, entry);
}

/// Removes the entry at `i`, shifting the later ones down.
pub fn remove_entry(node: &mut [u8], i: usize) {
    let n = count(node);
    assert!(i < n, "remove of {i} from a node of {n}");
    node.copy_within(prefix_at(i + 1)..prefix_at(n), prefix_at(i));
    let rows = row_at(node, 0);
    node.copy_within(rows + 4 * (i + 1)..rows + 4 * n, rows + 4 * i);
    set_count(node, n - 1);
}

#[inline]
pub fn child(node: &[u8], i: usize) -> u32 {
    debug_assert!(!is_leaf(node) && i <= count(node));
    read_u32(node, child_at(i))
}

#[inline]
pub fn set_child(node: &mut [u8], i: usize, to: u32) {
    debug_assert!(!is_leaf(node));
    write_u32(node, child_at(i), to);
}

/// Inserts separator `entry` at `i` and `right` as child `i + 1` of an
/// inner node (a child split: `right` holds the entries from `entry` on).
pub fn insert_separator(node: &mut [u8], i: usize, entry: Entry, right: u32) {
    let n = count(node);
    node.copy_within(child_at(i + 1)..child_at(n + 1), child_at(i + 2));
    insert_entry(node, i, entry);
    set_child(node, i + 1, right);
}

/// Removes separator `i` and child `i + 1` of an inner node (a merge of
/// child `i + 1` into child `i`).
pub fn remove_separator(node: &mut [u8], i: usize) {
    let n = count(node);
    node.copy_within(child_at(i + 2)..child_at(n + 1), child_at(i + 1));
    remove_entry(node, i);
}

/// The first position `i` in the node's entries for which `before` is
/// false (`count` if none): `before` must hold for a leading run only.
#[inline]
pub fn partition_point(node: &[u8], mut before: impl FnMut(Entry) -> bool) -> usize {
    let (mut low, mut high) = (0, count(node));
    while low < high {
        let middle = (low + high) / 2;
        if before(entry(node, middle)) {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    low
}

/// The position of the first entry not ordered before the target by
/// `order` (an entry's order relative to the target).
#[inline]
pub fn lower_bound(node: &[u8], mut order: impl FnMut(Entry) -> Ordering) -> usize {
    partition_point(node, |entry| order(entry) == Ordering::Less)
}

/// Nodes always kept for inserts whose promise falls short: an insert
/// prepared at height h is promised h + 2 nodes, and needs more only if
/// its tree grew two levels before its commit; this many cover any
/// growth a tree can have.
pub const SPARE_NODES: u32 = 13;

/// The free index nodes of one DataMemory ([`PageMemory::index_nodes`]),
/// and the nodes promised to prepared inserts. A promise is counted
/// against the free nodes and the free pages together: pages are cut into
/// nodes only when a node is taken, and rows and the hash index
/// (`PageMemory::alloc`) leave the promised room. Free nodes link both
/// ways (through their header's next and previous fields), so that a page
/// whose nodes are all free again leaves the list in one step and goes
/// back to DataMemory.
#[derive(Debug)]
pub struct NodeList {
    free_head: u32,
    free: u32,
    /// Nodes promised to prepared inserts.
    reserved: u32,
    pages: u32,
    /// Per DataMemory page, its free nodes (0 for a page not cut into
    /// nodes). Sized at start.
    free_in_page: Vec<u8>,
}

impl NodeList {
    /// An empty list for a DataMemory of `pages` pages.
    pub fn new(pages: u32) -> NodeList {
        NodeList {
            free_head: NIL,
            free: 0,
            reserved: 0,
            pages: 0,
            free_in_page: vec![0; pages as usize],
        }
    }

    /// Pages cut into index nodes.
    pub fn pages(&self) -> u32 {
        self.pages
    }

    /// Index nodes in use.
    pub fn in_use(&self) -> u64 {
        u64::from(self.pages) * u64::from(NODES_PER_PAGE) - u64::from(self.free)
    }

    /// Free nodes on the list.
    pub fn free(&self) -> u32 {
        self.free
    }

    /// Nodes promised to prepared inserts.
    pub fn reserved(&self) -> u32 {
        self.reserved
    }

    /// Nodes the rest of DataMemory must leave room for: the promises and,
    /// while there are any, the spare.
    pub fn promised(&self) -> u64 {
        if self.reserved == 0 {
            0
        } else {
            u64::from(self.reserved) + u64::from(SPARE_NODES)
        }
    }
}

/// Nodes DataMemory can still give: the free ones and the free pages'.
fn available(memory: &PageMemory) -> u64 {
    u64::from(memory.index_nodes().free)
        + u64::from(memory.free_pages()) * u64::from(NODES_PER_PAGE)
}

/// Makes `nodes` nodes free for an insert, cutting pages into nodes as
/// needed. Without a promise of its own (`promised` false) the insert must
/// leave the promised room; with one (given back just before) it may use
/// every node but the other promises'. On `Err` nothing changed.
pub fn ensure_free(memory: &mut PageMemory, nodes: u32, promised: bool) -> Result<(), OutOfMemory> {
    let keep = if promised {
        u64::from(memory.index_nodes().reserved)
    } else {
        memory.index_nodes().promised()
    };
    if available(memory) < keep + u64::from(nodes) {
        return Err(OutOfMemory);
    }
    while memory.index_nodes().free < nodes {
        let page = memory
            .alloc_page()
            .expect("a free page was counted as available");
        assert!(
            (u64::from(page.0) + 1) << SLOT_SHIFT <= u64::from(u32::MAX),
            "node refs of page {} do not fit in 32 bits",
            page.0
        );
        // Pushed highest first: the lowest is handed out first.
        for slot in (0..NODES_PER_PAGE).rev() {
            push_free(memory, (page.0 << SLOT_SHIFT) + slot + 1);
        }
        memory.index_nodes_mut().pages += 1;
    }
    Ok(())
}

/// Promises `nodes` nodes to a prepared insert, if DataMemory can give
/// them beyond the other promises and the spare. Takes no page.
pub fn reserve(memory: &mut PageMemory, nodes: u32) -> Result<(), OutOfMemory> {
    let after =
        u64::from(memory.index_nodes().reserved) + u64::from(nodes) + u64::from(SPARE_NODES);
    if available(memory) < after {
        return Err(OutOfMemory);
    }
    memory.index_nodes_mut().reserved += nodes;
    Ok(())
}

/// Takes back a promise of `nodes` ([`reserve`]).
pub fn release(memory: &mut PageMemory, nodes: u32) {
    let list = memory.index_nodes_mut();
    assert!(
        nodes <= list.reserved,
        "{nodes} index nodes released of {} reserved",
        list.reserved
    );
    list.reserved -= nodes;
}

/// Puts the formatted `node` at the head of the free list.
fn push_free(memory: &mut PageMemory, node: u32) {
    let head = memory.index_nodes().free_head;
    let bytes = bytes_mut(memory, node);
    format(bytes, false);
    set_next(bytes, head);
    if head != NIL {
        set_prev(bytes_mut(memory, head), node);
    }
    let list = memory.index_nodes_mut();
    list.free_head = node;
    list.free += 1;
    list.free_in_page[locate(node).0 .0 as usize] += 1;
}

/// Takes the free `node` out of the free list, wherever it is.
fn unlink_free(memory: &mut PageMemory, node: u32) {
    let bytes = bytes(memory, node);
    let (before, after) = (prev(bytes), next(bytes));
    if before == NIL {
        memory.index_nodes_mut().free_head = after;
    } else {
        set_next(bytes_mut(memory, before), after);
    }
    if after != NIL {
        set_prev(bytes_mut(memory, after), before);
    }
    let list = memory.index_nodes_mut();
    list.free -= 1;
    list.free_in_page[locate(node).0 .0 as usize] -= 1;
}

/// A node, formatted empty. Panics if none is free: the caller made sure
/// first ([`ensure_free`]).
pub fn take(memory: &mut PageMemory, leaf: bool) -> u32 {
    let node = memory.index_nodes().free_head;
    assert!(
        node != NIL,
        "an index node taken without making sure one is free"
    );
    unlink_free(memory, node);
    format(bytes_mut(memory, node), leaf);
    node
}

/// Puts `node` back on the free list; when that frees its whole page, the
/// page goes back to DataMemory (promises count free pages too).
pub fn give_back(memory: &mut PageMemory, node: u32) {
    push_free(memory, node);
    let page = locate(node).0;
    if u32::from(memory.index_nodes().free_in_page[page.0 as usize]) == NODES_PER_PAGE {
        for slot in 0..NODES_PER_PAGE {
            unlink_free(memory, (page.0 << SLOT_SHIFT) + slot + 1);
        }
        memory.index_nodes_mut().pages -= 1;
        memory.free(page);
    }
}

/// Free nodes on the list, counted by walking it (for checks).
pub fn count_free(memory: &PageMemory) -> u32 {
    let mut free = 0;
    let mut node = memory.index_nodes().free_head;
    let mut before = NIL;
    while node != NIL {
        free += 1;
        let node_bytes = bytes(memory, node);
        assert_eq!(prev(node_bytes), before, "free node {node}'s previous link");
        before = node;
        node = next(node_bytes);
    }
    assert_eq!(
        free,
        memory.index_nodes().free,
        "the free list's length and its count"
    );
    free
}

#[inline]
pub fn bytes(memory: &PageMemory, node: u32) -> &[u8] {
    let (page, at) = locate(node);
    &memory.bytes(page)[at..at + NODE_BYTES]
}

#[inline]
pub fn bytes_mut(memory: &mut PageMemory, node: u32) -> &mut [u8] {
    let (page, at) = locate(node);
    &mut memory.bytes_mut(page)[at..at + NODE_BYTES]
}

/// A copy of `node`'s bytes.
pub fn load(memory: &PageMemory, node: u32) -> NodeBytes {
    bytes(memory, node)
        .try_into()
        .expect("a node is NODE_BYTES")
}

/// Writes `node_bytes` back as `node`.
pub fn store(memory: &mut PageMemory, node: u32, node_bytes: &NodeBytes) {
    bytes_mut(memory, node).copy_from_slice(node_bytes);
}

#[inline]
fn locate(node: u32) -> (PageId, usize) {
    debug_assert!(node != NIL, "NIL node dereferenced");
    let number = node - 1;
    let slot = number & ((1 << SLOT_SHIFT) - 1);
    (PageId(number >> SLOT_SHIFT), slot as usize * NODE_BYTES)
}

/// No page was free for the nodes an insert may need; the index is as it
/// was.
#[derive(Debug, PartialEq, Eq)]
pub struct OutOfMemory;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacities_fill_the_node() {
        assert_eq!(LEAF_CAPACITY, 41);
        assert_eq!(INNER_CAPACITY, 30);
        const { assert!(HEADER + 12 * LEAF_CAPACITY <= NODE_BYTES) };
        assert!(child_at(INNER_CAPACITY + 1) <= NODE_BYTES);
    }

    #[test]
    fn entries_and_children_shift_in_place() {
        let mut node = [0u8; NODE_BYTES];
        format(&mut node, false);
        set_child(&mut node, 0, 100);
        for (i, row) in [10u32, 30, 20].into_iter().enumerate() {
            let at = if row == 20 { 1 } else { i };
            insert_separator(
                &mut node,
                at,
                Entry {
                    prefix: u64::from(row),
                    row,
                },
                row + 1,
            );
        }
        let rows: Vec<u32> = (0..count(&node)).map(|i| entry(&node, i).row).collect();
        let children: Vec<u32> = (0..=count(&node)).map(|i| child(&node, i)).collect();
        assert_eq!(rows, [10, 20, 30]);
        assert_eq!(children, [100, 11, 21, 31]);
        remove_separator(&mut node, 0);
        let children: Vec<u32> = (0..=count(&node)).map(|i| child(&node, i)).collect();
        assert_eq!(children, [100, 21, 31]);
        assert_eq!(lower_bound(&node, |e| e.row.cmp(&25)), 1);
    }

    #[test]
    fn the_node_list_cuts_pages_and_keeps_promised_room() {
        let mut memory = PageMemory::new(3 * PAGE_SIZE as u64);
        assert_eq!(ensure_free(&mut memory, 1, false), Ok(()));
        assert_eq!(memory.index_nodes().pages(), 1);
        let a = take(&mut memory, true);
        let b = take(&mut memory, false);
        assert_ne!(a, b);
        assert!(is_leaf(bytes(&memory, a)) && !is_leaf(bytes(&memory, b)));
        assert_eq!(memory.index_nodes().in_use(), 2);
        give_back(&mut memory, a);
        assert_eq!(count_free(&memory), NODES_PER_PAGE - 1);
        // The last node of a page given back returns the page.
        give_back(&mut memory, b);
        assert_eq!((memory.used_pages(), memory.index_nodes().pages()), (0, 0));
        assert_eq!(count_free(&memory), 0);
        // A promise takes no page, but other users leave its room: here,
        // with the spare, two pages of the three.
        let promise = 2 * NODES_PER_PAGE - SPARE_NODES;
        assert_eq!(reserve(&mut memory, promise), Ok(()));
        assert_eq!(memory.used_pages(), 0);
        assert!(memory.alloc().is_some(), "one page for rows");
        assert_eq!(
            memory.alloc(),
            None,
            "the rest is promised (with the spare)"
        );
        // An insert without a promise leaves it too; one with its own
        // promise, given back, uses it.
        assert_eq!(ensure_free(&mut memory, 1, false), Err(OutOfMemory));
        assert_eq!(reserve(&mut memory, 1), Err(OutOfMemory));
        release(&mut memory, promise);
        assert_eq!(ensure_free(&mut memory, NODES_PER_PAGE + 1, true), Ok(()));
        assert_eq!(memory.index_nodes().pages(), 2);
        assert_eq!(memory.index_nodes().reserved(), 0);
        assert_eq!(count_free(&memory), 2 * NODES_PER_PAGE);
    }
}
