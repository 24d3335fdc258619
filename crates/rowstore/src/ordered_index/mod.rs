//! An ordered index of one partition (NDB's DBTUX): a B+tree of row ids
//! ordered by the indexed columns, in DataMemory
//! (docs/design/scans-and-indexes.md §2).
//!
//! Entries are (key prefix, row id) pairs; the index holds no copy of the
//! key beyond its 8-byte order-preserving prefix
//! (`signal::order::key_prefix`). Like the hash index it knows nothing of
//! key formats: every search takes the caller's comparison of an entry
//! with the target, which decides on the prefixes where they differ and
//! reads the row where they do not. Entries are ordered by key and then by
//! row id, so every entry has exactly one place even in a non-unique index.
//!
//! - Separators are entries: inner node separator `i` is the smallest entry
//!   under child `i + 1`, always an entry of a leaf, so its row exists and
//!   its key can be read. A remove that takes a leaf's first entry puts the
//!   leaf's new first entry in the separator that named it.
//! - Leaves link both ways, so a range walks either direction leaf by leaf.
//! - A `Position` (leaf, slot) is valid until the index next changes; a
//!   scan that yields between batches keeps its last entry instead and
//!   seeks past it to resume.
//! - An insert may split one node per level and add a root, so it needs at
//!   most `nodes_for_insert()` free nodes; it takes them before changing
//!   anything. Commit, which must not fail, reserves them at prepare
//!   (`reserve_insert`), and the node list keeps the reserved nodes free.
//! - Nodes come from the node list of the DataMemory (`node`), shared by
//!   every ordered index of the ldm thread.

mod node;

pub use node::{
    Entry, NodeList, OutOfMemory, INNER_CAPACITY, LEAF_CAPACITY, NODES_PER_PAGE, NODE_BYTES,
    SPARE_NODES,
};

use crate::page_memory::PageMemory;
use node::{INNER_MINIMUM, LEAF_MINIMUM, NIL};
use std::cmp::Ordering;

/// Levels a tree may have. With at least 16 children per inner node and 20
/// entries per leaf, 8 levels hold more than the 2^32 rows a partition
/// can have.
const MAX_HEIGHT: usize = 12;

/// Where an entry stands: a leaf and a slot in it. Valid until the index
/// changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    leaf: u32,
    slot: u16,
}

/// The way from the root to a leaf: the node at each level and which child
/// the way took from it.
struct Path {
    nodes: [u32; MAX_HEIGHT],
    children: [u16; MAX_HEIGHT],
    depth: usize,
}

/// An ordered index. Every method takes the [`PageMemory`] the index was
/// created with.
pub struct OrderedIndex {
    root: u32,
    /// Levels, the leaves included; 0 when empty.
    height: usize,
    entries: u64,
    first_leaf: u32,
    last_leaf: u32,
    /// Nodes the tree holds.
    nodes: u64,
    memory_pages: u32,
}

impl OrderedIndex {
    /// An empty index; it takes no page until its first insert.
    pub fn new(memory: &PageMemory) -> OrderedIndex {
        OrderedIndex {
            root: NIL,
            height: 0,
            entries: 0,
            first_leaf: NIL,
            last_leaf: NIL,
            nodes: 0,
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

    /// Levels of the tree (0 when empty, 1 when the root is a leaf).
    pub fn height(&self) -> usize {
        self.height
    }

    /// Nodes the index holds (each `NODE_BYTES` of DataMemory).
    pub fn nodes(&self) -> u64 {
        self.nodes
    }

    /// Nodes the next insert may need at most: one per level (each may
    /// split) and a new root.
    pub fn nodes_for_insert(&self) -> u32 {
        self.height as u32 + 1
    }

    /// Adds `entry`; `order(memory, e)` is how entry `e` of the index
    /// stands relative to it (never `Equal`: an entry is added once), and
    /// may read rows from `memory`. On `Err` the index is unchanged.
    pub fn insert(
        &mut self,
        memory: &mut PageMemory,
        entry: Entry,
        order: impl FnMut(&PageMemory, Entry) -> Ordering,
    ) -> Result<(), OutOfMemory> {
        self.check_memory(memory);
        node::ensure_free(memory, self.nodes_for_insert(), false)?;
        self.insert_with_free_nodes(memory, entry, order);
        Ok(())
    }

    /// Adds `entry` as [`Self::insert`] does, for an insert that was
    /// promised `reservation` nodes when it was prepared
    /// ([`Self::reserve_insert`]): the promise is given back and its nodes
    /// used (with the spare, should the tree have grown two levels since),
    /// so this cannot run out of memory.
    pub fn insert_promised(
        &mut self,
        memory: &mut PageMemory,
        reservation: u8,
        entry: Entry,
        order: impl FnMut(&PageMemory, Entry) -> Ordering,
    ) {
        self.check_memory(memory);
        node::release(memory, u32::from(reservation));
        self.insert_from_promise(memory, entry, order);
    }

    /// Adds `entry` with nodes a promise just given back left free (the
    /// caller released one promise covering several indexes' inserts,
    /// [`Self::release`]), with the spare should the tree have grown.
    pub fn insert_from_promise(
        &mut self,
        memory: &mut PageMemory,
        entry: Entry,
        order: impl FnMut(&PageMemory, Entry) -> Ordering,
    ) {
        self.check_memory(memory);
        let nodes = self.nodes_for_insert();
        assert!(
            node::ensure_free(memory, nodes, true).is_ok(),
            "a promised ordered-index insert found fewer than {nodes} nodes \
             (with the spare {SPARE_NODES}) at commit"
        );
        self.insert_with_free_nodes(memory, entry, order);
    }

    /// The insert once `nodes_for_insert` nodes are free.
    fn insert_with_free_nodes(
        &mut self,
        memory: &mut PageMemory,
        entry: Entry,
        mut order: impl FnMut(&PageMemory, Entry) -> Ordering,
    ) {
        if self.root == NIL {
            let leaf = self.take(memory, true);
            (self.root, self.height) = (leaf, 1);
            (self.first_leaf, self.last_leaf) = (leaf, leaf);
        }
        let (path, slot) = {
            let memory: &PageMemory = memory;
            let path = self.descend(memory, |separator| {
                order(memory, separator) == Ordering::Less
            });
            let bytes = node::bytes(memory, path.nodes[path.depth]);
            let slot = node::lower_bound(bytes, |e| order(memory, e));
            assert!(
                slot == node::count(bytes)
                    || order(memory, node::entry(bytes, slot)) != Ordering::Equal,
                "entry {entry:?} inserted into an ordered index that holds it"
            );
            (path, slot)
        };
        let leaf = path.nodes[path.depth];
        self.entries += 1;
        let bytes = node::bytes_mut(memory, leaf);
        if node::count(bytes) < LEAF_CAPACITY {
            node::insert_entry(bytes, slot, entry);
            return;
        }
        let (separator, right) = self.split_leaf(memory, leaf, slot, entry);
        self.insert_up(memory, &path, separator, right);
    }

    /// Fills this empty index with `entries`, which must be in the index's
    /// order (key, then row id; `check` finds it if they are not): leaves
    /// filled left to right, then each inner level over the one below, in
    /// one pass, rather than a descent per entry. The entries spread
    /// evenly over as few nodes as hold them, so leaves come out nearly
    /// full (the first inserts after a restart split them) and every
    /// node at least half full. On `Err` (DataMemory has too few nodes)
    /// the index stays empty.
    pub fn build_sorted(
        &mut self,
        memory: &mut PageMemory,
        entries: &[Entry],
    ) -> Result<(), OutOfMemory> {
        self.check_memory(memory);
        assert!(
            self.root == NIL,
            "a sorted build fills an empty ordered index"
        );
        if entries.is_empty() {
            return Ok(());
        }
        // Nodes per level, the leaves first.
        let mut levels = vec![entries.len().div_ceil(LEAF_CAPACITY)];
        while let Some(&below) = levels.last().filter(|&&below| below > 1) {
            levels.push(below.div_ceil(INNER_CAPACITY + 1));
        }
        let total: usize = levels.iter().sum();
        node::ensure_free(memory, u32::try_from(total).unwrap_or(u32::MAX), false)?;
        // The level below: each node with the first entry under it.
        let mut below: Vec<(u32, Entry)> = Vec::with_capacity(levels[0]);
        let mut previous = NIL;
        for run in even_runs(entries.len(), levels[0]) {
            let leaf = self.take(memory, true);
            let bytes = node::bytes_mut(memory, leaf);
            for (slot, &entry) in entries[run.clone()].iter().enumerate() {
                node::insert_entry(bytes, slot, entry);
            }
            node::set_prev(bytes, previous);
            if previous == NIL {
                self.first_leaf = leaf;
            } else {
                node::set_next(node::bytes_mut(memory, previous), leaf);
            }
            below.push((leaf, entries[run.start]));
            previous = leaf;
        }
        self.last_leaf = previous;
        for &count in &levels[1..] {
            let mut level = Vec::with_capacity(count);
            for run in even_runs(below.len(), count) {
                let inner = self.take(memory, false);
                let bytes = node::bytes_mut(memory, inner);
                let children = &below[run];
                node::set_child(bytes, 0, children[0].0);
                for (at, &(child, first)) in children[1..].iter().enumerate() {
                    node::insert_separator(bytes, at, first, child);
                }
                level.push((inner, children[0].1));
            }
            below = level;
        }
        self.root = below[0].0;
        self.height = levels.len();
        self.entries = entries.len() as u64;
        assert!(
            self.height <= MAX_HEIGHT,
            "an ordered index of {} levels",
            self.height
        );
        Ok(())
    }

    /// Removes the entry for which `order(memory, e)` is `Equal` (how an
    /// entry stands relative to the one to remove) and returns it; `None`
    /// if the index does not hold it.
    pub fn remove(
        &mut self,
        memory: &mut PageMemory,
        mut order: impl FnMut(&PageMemory, Entry) -> Ordering,
    ) -> Option<Entry> {
        self.check_memory(memory);
        if self.root == NIL {
            return None;
        }
        let (path, slot) = {
            let memory: &PageMemory = memory;
            let path = self.descend(memory, |separator| {
                order(memory, separator) != Ordering::Greater
            });
            let bytes = node::bytes(memory, path.nodes[path.depth]);
            let slot = node::lower_bound(bytes, |e| order(memory, e));
            if slot == node::count(bytes)
                || order(memory, node::entry(bytes, slot)) != Ordering::Equal
            {
                return None;
            }
            (path, slot)
        };
        let bytes = node::bytes_mut(memory, path.nodes[path.depth]);
        let removed = node::entry(bytes, slot);
        node::remove_entry(bytes, slot);
        self.entries -= 1;
        if slot == 0 && node::count(bytes) > 0 {
            let first = node::entry(bytes, 0);
            self.replace_separator(memory, &path, removed, first);
        }
        self.rebalance(memory, &path);
        Some(removed)
    }

    /// Promises the nodes one insert may need (`nodes_for_insert`, and one
    /// more for the tree growing a level meanwhile) to an insert prepared
    /// now and made at commit, which must not fail
    /// ([`Self::insert_promised`]). Takes no page: rows and other inserts
    /// leave the promised room. Returns how many, for
    /// [`Self::insert_promised`] or [`Self::release`].
    pub fn reserve_insert(&self, memory: &mut PageMemory) -> Result<u8, OutOfMemory> {
        self.check_memory(memory);
        let nodes = self.nodes_for_insert() + 1;
        node::reserve(memory, nodes)?;
        Ok(nodes as u8)
    }

    /// Takes back a promise of `nodes` ([`Self::reserve_insert`]) whose
    /// insert was abandoned (an abort, a delete in the same transaction).
    pub fn release(&self, memory: &mut PageMemory, nodes: u8) {
        self.check_memory(memory);
        node::release(memory, u32::from(nodes));
    }

    /// The first entry for which `before` is false (`before` must be true
    /// for a leading run of the index's entries and false after: "is this
    /// entry below the bound"), or `None` if there is none.
    pub fn seek(
        &self,
        memory: &PageMemory,
        mut before: impl FnMut(Entry) -> bool,
    ) -> Option<Position> {
        self.check_memory(memory);
        if self.root == NIL {
            return None;
        }
        let path = self.descend(memory, &mut before);
        let leaf = path.nodes[path.depth];
        let bytes = node::bytes(memory, leaf);
        let slot = node::partition_point(bytes, before);
        if slot < node::count(bytes) {
            return Some(Position {
                leaf,
                slot: slot as u16,
            });
        }
        // Past this leaf: the answer, if any, is the next leaf's first
        // entry (a separator above that the way down went left of).
        let next = node::next(bytes);
        (next != NIL).then_some(Position {
            leaf: next,
            slot: 0,
        })
    }

    /// The last entry for which `before` is true (see [`Self::seek`]), or
    /// `None`: where a descending walk below an upper bound starts.
    pub fn seek_last_before(
        &self,
        memory: &PageMemory,
        before: impl FnMut(Entry) -> bool,
    ) -> Option<Position> {
        match self.seek(memory, before) {
            Some(position) => self.prev(memory, position),
            None => self.last(memory),
        }
    }

    /// The smallest entry's position.
    pub fn first(&self, memory: &PageMemory) -> Option<Position> {
        self.check_memory(memory);
        (self.first_leaf != NIL).then_some(Position {
            leaf: self.first_leaf,
            slot: 0,
        })
    }

    /// The largest entry's position.
    pub fn last(&self, memory: &PageMemory) -> Option<Position> {
        self.check_memory(memory);
        if self.last_leaf == NIL {
            return None;
        }
        let count = node::count(node::bytes(memory, self.last_leaf));
        Some(Position {
            leaf: self.last_leaf,
            slot: (count - 1) as u16,
        })
    }

    /// The entry at `position`.
    #[inline]
    pub fn entry(&self, memory: &PageMemory, position: Position) -> Entry {
        node::entry(node::bytes(memory, position.leaf), position.slot as usize)
    }

    /// The position after `position`, if any.
    #[inline]
    pub fn next(&self, memory: &PageMemory, position: Position) -> Option<Position> {
        let bytes = node::bytes(memory, position.leaf);
        let slot = position.slot as usize + 1;
        if slot < node::count(bytes) {
            return Some(Position {
                leaf: position.leaf,
                slot: slot as u16,
            });
        }
        let next = node::next(bytes);
        (next != NIL).then_some(Position {
            leaf: next,
            slot: 0,
        })
    }

    /// The position before `position`, if any.
    #[inline]
    pub fn prev(&self, memory: &PageMemory, position: Position) -> Option<Position> {
        if position.slot > 0 {
            return Some(Position {
                leaf: position.leaf,
                slot: position.slot - 1,
            });
        }
        let prev = node::prev(node::bytes(memory, position.leaf));
        if prev == NIL {
            return None;
        }
        let count = node::count(node::bytes(memory, prev));
        Some(Position {
            leaf: prev,
            slot: (count - 1) as u16,
        })
    }

    /// Gives every node back to the node list and empties the index (its
    /// table is dropped).
    pub fn clear(&mut self, memory: &mut PageMemory) {
        self.check_memory(memory);
        if self.root != NIL {
            self.give_back_subtree(memory, self.root);
        }
        debug_assert_eq!(self.nodes, 0, "every node of a cleared index went back");
        self.root = NIL;
        self.height = 0;
        self.entries = 0;
        self.first_leaf = NIL;
        self.last_leaf = NIL;
    }

    fn give_back_subtree(&mut self, memory: &mut PageMemory, current: u32) {
        let bytes = node::load(memory, current);
        if !node::is_leaf(&bytes) {
            for i in 0..=node::count(&bytes) {
                self.give_back_subtree(memory, node::child(&bytes, i));
            }
        }
        self.give_back(memory, current);
    }

    fn take(&mut self, memory: &mut PageMemory, leaf: bool) -> u32 {
        self.nodes += 1;
        node::take(memory, leaf)
    }

    fn give_back(&mut self, memory: &mut PageMemory, current: u32) {
        self.nodes -= 1;
        node::give_back(memory, current);
    }

    /// Walks from the root to a leaf, at each inner node taking the child
    /// after the separators for which `go_right` holds.
    fn descend(&self, memory: &PageMemory, mut go_right: impl FnMut(Entry) -> bool) -> Path {
        let mut path = Path {
            nodes: [NIL; MAX_HEIGHT],
            children: [0; MAX_HEIGHT],
            depth: 0,
        };
        let mut current = self.root;
        for level in 0..self.height - 1 {
            let bytes = node::bytes(memory, current);
            let child = node::partition_point(bytes, &mut go_right);
            path.nodes[level] = current;
            path.children[level] = child as u16;
            current = node::child(bytes, child);
        }
        path.depth = self.height - 1;
        path.nodes[path.depth] = current;
        path
    }

    /// Splits the full `leaf` with `entry` going in at `slot`: the upper
    /// half moves to a new leaf on its right. Returns the new leaf's first
    /// entry (its separator) and the new leaf.
    fn split_leaf(
        &mut self,
        memory: &mut PageMemory,
        leaf: u32,
        slot: usize,
        entry: Entry,
    ) -> (Entry, u32) {
        let right = self.take(memory, true);
        let mut left_bytes = node::load(memory, leaf);
        let mut right_bytes = node::load(memory, right);
        let keep = LEAF_CAPACITY.div_ceil(2);
        // Move entries from `keep` on (counting the new one) to the right.
        let mut moved = 0;
        for i in keep..=LEAF_CAPACITY {
            let e = match i.cmp(&slot) {
                Ordering::Less => node::entry(&left_bytes, i),
                Ordering::Equal => entry,
                Ordering::Greater => node::entry(&left_bytes, i - 1),
            };
            node::insert_entry(&mut right_bytes, moved, e);
            moved += 1;
        }
        for _ in 0..LEAF_CAPACITY + 1 - keep - usize::from(slot >= keep) {
            let last = node::count(&left_bytes) - 1;
            node::remove_entry(&mut left_bytes, last);
        }
        if slot < keep {
            node::insert_entry(&mut left_bytes, slot, entry);
        }
        debug_assert_eq!(node::count(&left_bytes) + moved, LEAF_CAPACITY + 1);
        let after = node::next(&left_bytes);
        node::set_next(&mut right_bytes, after);
        node::set_prev(&mut right_bytes, leaf);
        node::set_next(&mut left_bytes, right);
        let separator = node::entry(&right_bytes, 0);
        node::store(memory, leaf, &left_bytes);
        node::store(memory, right, &right_bytes);
        if after == NIL {
            self.last_leaf = right;
        } else {
            node::set_prev(node::bytes_mut(memory, after), right);
        }
        (separator, right)
    }

    /// Puts `separator` and its new child `right` into the parents along
    /// `path`, splitting full inner nodes up to a new root if need be.
    fn insert_up(
        &mut self,
        memory: &mut PageMemory,
        path: &Path,
        mut separator: Entry,
        mut right: u32,
    ) {
        for level in (0..path.depth).rev() {
            let parent = path.nodes[level];
            let at = path.children[level] as usize;
            let bytes = node::bytes_mut(memory, parent);
            if node::count(bytes) < INNER_CAPACITY {
                node::insert_separator(bytes, at, separator, right);
                return;
            }
            (separator, right) = self.split_inner(memory, parent, at, separator, right);
        }
        let root = self.take(memory, false);
        let bytes = node::bytes_mut(memory, root);
        node::set_child(bytes, 0, self.root);
        node::insert_separator(bytes, 0, separator, right);
        self.root = root;
        self.height += 1;
        assert!(
            self.height <= MAX_HEIGHT,
            "an ordered index of {} levels",
            self.height
        );
    }

    /// Splits the full inner node `inner` with (`separator`, `child`) going
    /// in at `at`: the middle separator moves up, the ones after it and
    /// their children to a new node. Returns the separator moving up and
    /// the new node.
    fn split_inner(
        &mut self,
        memory: &mut PageMemory,
        inner: u32,
        at: usize,
        separator: Entry,
        child: u32,
    ) -> (Entry, u32) {
        let bytes = node::load(memory, inner);
        // The node as it would be with the new separator: CAPACITY + 1
        // separators and CAPACITY + 2 children.
        let mut separators = [Entry { prefix: 0, row: 0 }; INNER_CAPACITY + 1];
        let mut children = [NIL; INNER_CAPACITY + 2];
        for (i, slot) in separators.iter_mut().enumerate() {
            *slot = match i.cmp(&at) {
                Ordering::Less => node::entry(&bytes, i),
                Ordering::Equal => separator,
                Ordering::Greater => node::entry(&bytes, i - 1),
            };
        }
        for (i, slot) in children.iter_mut().enumerate() {
            *slot = match i.cmp(&(at + 1)) {
                Ordering::Less => node::child(&bytes, i),
                Ordering::Equal => child,
                Ordering::Greater => node::child(&bytes, i - 1),
            };
        }
        let middle = INNER_CAPACITY.div_ceil(2);
        let right = self.take(memory, false);
        let mut left_bytes = bytes;
        node::format(&mut left_bytes, false);
        let mut right_bytes = node::load(memory, right);
        fill_inner(&mut left_bytes, &separators[..middle], &children[..=middle]);
        fill_inner(
            &mut right_bytes,
            &separators[middle + 1..],
            &children[middle + 1..],
        );
        node::store(memory, inner, &left_bytes);
        node::store(memory, right, &right_bytes);
        (separators[middle], right)
    }

    /// After `removed` left the front of the path's leaf, the separator
    /// that named it (in the deepest ancestor the way entered from the
    /// left of a child other than its first) names `first`, the leaf's
    /// new first entry.
    fn replace_separator(
        &mut self,
        memory: &mut PageMemory,
        path: &Path,
        removed: Entry,
        first: Entry,
    ) {
        for level in (0..path.depth).rev() {
            let child = path.children[level] as usize;
            if child > 0 {
                let bytes = node::bytes_mut(memory, path.nodes[level]);
                assert_eq!(
                    node::entry(bytes, child - 1),
                    removed,
                    "the separator above a leaf is its first entry"
                );
                node::set_entry(bytes, child - 1, first);
                return;
            }
        }
    }

    /// Restores the minimum fill along `path` after a remove from its leaf:
    /// a node below its minimum borrows an entry from a sibling that can
    /// spare one, or merges with it (which takes a separator from the
    /// parent, so the parent is checked next). A root inner node left with
    /// one child gives way to it; an empty root leaf leaves the index empty.
    fn rebalance(&mut self, memory: &mut PageMemory, path: &Path) {
        for level in (0..=path.depth).rev() {
            let current = path.nodes[level];
            let bytes = node::bytes(memory, current);
            let count = node::count(bytes);
            let leaf = node::is_leaf(bytes);
            if level == 0 {
                if count == 0 && leaf {
                    self.give_back(memory, current);
                    self.root = NIL;
                    self.height = 0;
                    self.first_leaf = NIL;
                    self.last_leaf = NIL;
                } else if count == 0 {
                    self.root = node::child(bytes, 0);
                    self.give_back(memory, current);
                    self.height -= 1;
                }
                return;
            }
            let minimum = if leaf { LEAF_MINIMUM } else { INNER_MINIMUM };
            if count >= minimum {
                return;
            }
            let parent = path.nodes[level - 1];
            let at = path.children[level - 1] as usize;
            let parent_bytes = node::bytes(memory, parent);
            let left = (at > 0).then(|| node::child(parent_bytes, at - 1));
            let right = (at < node::count(parent_bytes)).then(|| node::child(parent_bytes, at + 1));
            let spares = |sibling: Option<u32>| {
                sibling.is_some_and(|sibling| node::count(node::bytes(memory, sibling)) > minimum)
            };
            let (left_spares, right_spares) = (spares(left), spares(right));
            if let (Some(left), true) = (left, left_spares) {
                self.borrow_from_left(memory, parent, at, left, current);
                return;
            }
            if let (Some(right), true) = (right, right_spares) {
                self.borrow_from_right(memory, parent, at, current, right);
                return;
            }
            match (left, right) {
                (Some(left), _) => self.merge(memory, parent, at - 1, left, current),
                (None, Some(right)) => self.merge(memory, parent, at, current, right),
                (None, None) => panic!("an inner node with one child below the root"),
            }
        }
    }

    /// Moves `left`'s last entry (and, between inner nodes, its last
    /// child, rotating through the parent's separator) to the front of
    /// `current`, child `at` of `parent`.
    fn borrow_from_left(
        &mut self,
        memory: &mut PageMemory,
        parent: u32,
        at: usize,
        left: u32,
        current: u32,
    ) {
        let mut parent_bytes = node::load(memory, parent);
        let mut left_bytes = node::load(memory, left);
        let mut bytes = node::load(memory, current);
        let last = node::count(&left_bytes) - 1;
        let moving = node::entry(&left_bytes, last);
        if node::is_leaf(&bytes) {
            node::insert_entry(&mut bytes, 0, moving);
            node::remove_entry(&mut left_bytes, last);
            node::set_entry(&mut parent_bytes, at - 1, moving);
        } else {
            let moving_child = node::child(&left_bytes, last + 1);
            let down = node::entry(&parent_bytes, at - 1);
            let first_child = node::child(&bytes, 0);
            node::set_child(&mut bytes, 0, moving_child);
            node::insert_separator(&mut bytes, 0, down, first_child);
            node::remove_entry(&mut left_bytes, last);
            node::set_entry(&mut parent_bytes, at - 1, moving);
        }
        node::store(memory, parent, &parent_bytes);
        node::store(memory, left, &left_bytes);
        node::store(memory, current, &bytes);
    }

    /// Moves `right`'s first entry (and, between inner nodes, its first
    /// child) to the end of `current`, child `at` of `parent`.
    fn borrow_from_right(
        &mut self,
        memory: &mut PageMemory,
        parent: u32,
        at: usize,
        current: u32,
        right: u32,
    ) {
        let mut parent_bytes = node::load(memory, parent);
        let mut right_bytes = node::load(memory, right);
        let mut bytes = node::load(memory, current);
        let count = node::count(&bytes);
        if node::is_leaf(&bytes) {
            node::insert_entry(&mut bytes, count, node::entry(&right_bytes, 0));
            node::remove_entry(&mut right_bytes, 0);
            node::set_entry(&mut parent_bytes, at, node::entry(&right_bytes, 0));
        } else {
            let down = node::entry(&parent_bytes, at);
            node::insert_separator(&mut bytes, count, down, node::child(&right_bytes, 0));
            node::set_entry(&mut parent_bytes, at, node::entry(&right_bytes, 0));
            // Drop the first separator and the first child: removing
            // separator 0 drops child 1, so child 1 moves to 0 after.
            let second_child = node::child(&right_bytes, 1);
            node::remove_separator(&mut right_bytes, 0);
            node::set_child(&mut right_bytes, 0, second_child);
        }
        node::store(memory, parent, &parent_bytes);
        node::store(memory, right, &right_bytes);
        node::store(memory, current, &bytes);
    }

    /// Merges `right` (child `separator + 1` of `parent`) into `left`
    /// (child `separator`), pulling the separator between them down into
    /// an inner node, and frees `right`.
    fn merge(
        &mut self,
        memory: &mut PageMemory,
        parent: u32,
        separator: usize,
        left: u32,
        right: u32,
    ) {
        let mut left_bytes = node::load(memory, left);
        let right_bytes = node::load(memory, right);
        let mut at = node::count(&left_bytes);
        if node::is_leaf(&left_bytes) {
            for i in 0..node::count(&right_bytes) {
                node::insert_entry(&mut left_bytes, at, node::entry(&right_bytes, i));
                at += 1;
            }
            let after = node::next(&right_bytes);
            node::set_next(&mut left_bytes, after);
            if after == NIL {
                self.last_leaf = left;
            } else {
                node::set_prev(node::bytes_mut(memory, after), left);
            }
        } else {
            let down = node::entry(node::bytes(memory, parent), separator);
            node::insert_separator(&mut left_bytes, at, down, node::child(&right_bytes, 0));
            at += 1;
            for i in 0..node::count(&right_bytes) {
                let (e, child) = (
                    node::entry(&right_bytes, i),
                    node::child(&right_bytes, i + 1),
                );
                node::insert_separator(&mut left_bytes, at, e, child);
                at += 1;
            }
        }
        node::store(memory, left, &left_bytes);
        node::remove_separator(node::bytes_mut(memory, parent), separator);
        self.give_back(memory, right);
    }

    /// Checks every rule of the tree and returns the entries in order;
    /// `order(a, b)` compares two entries in full. Panics with the rule
    /// broken. For tests and the replica checker, never a hot path.
    pub fn check(
        &self,
        memory: &PageMemory,
        mut order: impl FnMut(Entry, Entry) -> Ordering,
    ) -> Vec<Entry> {
        self.check_memory(memory);
        let mut entries = Vec::new();
        let mut leaves = Vec::new();
        if self.root != NIL {
            self.check_node(
                memory,
                self.root,
                0,
                None,
                None,
                &mut order,
                &mut entries,
                &mut leaves,
            );
        } else {
            assert_eq!(self.height, 0, "an empty index has no levels");
        }
        assert_eq!(entries.len() as u64, self.entries, "the entry count");
        for pair in entries.windows(2) {
            assert_eq!(
                order(pair[0], pair[1]),
                Ordering::Less,
                "entries {:?} and {:?} out of order",
                pair[0],
                pair[1]
            );
        }
        // The leaf chain, both ways, is the leaves in order.
        let mut chained = Vec::new();
        let mut leaf = self.first_leaf;
        let mut before = NIL;
        while leaf != NIL {
            let bytes = node::bytes(memory, leaf);
            assert_eq!(node::prev(bytes), before, "leaf {leaf}'s previous leaf");
            chained.push(leaf);
            before = leaf;
            leaf = node::next(bytes);
        }
        assert_eq!(chained, leaves, "the leaf chain and the tree's leaves");
        assert_eq!(self.last_leaf, before, "the last leaf");
        node::count_free(memory);
        let mut nodes = 0;
        self.count_nodes(memory, self.root, &mut nodes);
        assert_eq!(nodes, self.nodes, "the tree's nodes and its count");
        entries
    }

    fn count_nodes(&self, memory: &PageMemory, current: u32, nodes: &mut u64) {
        if current == NIL {
            return;
        }
        *nodes += 1;
        let bytes = node::bytes(memory, current);
        if !node::is_leaf(bytes) {
            for i in 0..=node::count(bytes) {
                self.count_nodes(memory, node::child(bytes, i), nodes);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn check_node(
        &self,
        memory: &PageMemory,
        current: u32,
        level: usize,
        low: Option<Entry>,
        high: Option<Entry>,
        order: &mut impl FnMut(Entry, Entry) -> Ordering,
        entries: &mut Vec<Entry>,
        leaves: &mut Vec<u32>,
    ) -> Entry {
        let bytes = node::bytes(memory, current);
        let count = node::count(bytes);
        let leaf = node::is_leaf(bytes);
        assert_eq!(
            leaf,
            level == self.height - 1,
            "node {current}: leaves are on the last level"
        );
        if level > 0 {
            let minimum = if leaf { LEAF_MINIMUM } else { INNER_MINIMUM };
            assert!(
                count >= minimum,
                "node {current} holds {count}, under {minimum}"
            );
        } else {
            assert!(count >= 1, "the root is not empty");
        }
        let in_range = |e: Entry, order: &mut dyn FnMut(Entry, Entry) -> Ordering| {
            low.is_none_or(|low| order(low, e) != Ordering::Greater)
                && high.is_none_or(|high| order(e, high) == Ordering::Less)
        };
        for i in 0..count {
            let e = node::entry(bytes, i);
            assert!(
                in_range(e, order),
                "entry {e:?} of node {current} outside {low:?}..{high:?}"
            );
        }
        if leaf {
            leaves.push(current);
            entries.extend((0..count).map(|i| node::entry(bytes, i)));
            return node::entry(bytes, 0);
        }
        let mut smallest = None;
        for i in 0..=count {
            let child_low = if i == 0 {
                low
            } else {
                Some(node::entry(bytes, i - 1))
            };
            let child_high = if i == count {
                high
            } else {
                Some(node::entry(bytes, i))
            };
            let first = self.check_node(
                memory,
                node::child(bytes, i),
                level + 1,
                child_low,
                child_high,
                order,
                entries,
                leaves,
            );
            if i > 0 {
                assert_eq!(
                    first,
                    node::entry(bytes, i - 1),
                    "separator {} of node {current} is the first entry under child {i}",
                    i - 1
                );
            }
            smallest.get_or_insert(first);
        }
        smallest.expect("an inner node has children")
    }

    fn check_memory(&self, memory: &PageMemory) {
        debug_assert_eq!(
            memory.page_count(),
            self.memory_pages,
            "an ordered index used with another DataMemory"
        );
    }
}

/// Writes `separators` and `children` (one more) into an empty inner node.
fn fill_inner(bytes: &mut [u8], separators: &[Entry], children: &[u32]) {
    node::set_child(bytes, 0, children[0]);
    for (i, (&separator, &child)) in separators.iter().zip(&children[1..]).enumerate() {
        node::insert_separator(bytes, i, separator, child);
    }
}

#[cfg(test)]
mod tests;

/// `items` split into `parts` runs of sizes differing by at most one, in
/// order: how a sorted build spreads entries over nodes so that each is
/// at least half full.
fn even_runs(items: usize, parts: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let (base, extra) = (items / parts, items % parts);
    (0..parts).scan(0, move |start, part| {
        let size = base + usize::from(part < extra);
        let run = *start..*start + size;
        *start += size;
        Some(run)
    })
}
