//! A partition's ordered indexes (design 0021, docs/design/0023-secondary-indexes.md):
//! the primary key's and the table's other ordered indexes, kept equal to
//! the live rows at every row-state change.
//!
//! - A row becoming live (the commit of an insert, a copied row) enters
//!   every index, with the nodes promised when its insert was prepared
//!   (`promise_ordered_insert`, one count in header byte 21 for every
//!   index: they share one node list). A restore defers the indexes and
//!   builds each from the rows at its end, sorted
//!   (`defer_ordered_indexes`, `build_deferred_indexes`).
//! - A live row leaving (a committed delete, a restore's or copy's
//!   removal) leaves every index.
//! - An update of a live row (`write_image`) takes the row out of each
//!   secondary index whose columns the new image changes, before the
//!   image is written (entries are found by reading the row), and
//!   `commit_row` puts it back under its new values, with the nodes the
//!   update promised at prepare (`promise_index_update`, kept by the
//!   operation). The primary key never changes in an update.
//!
//! A live row missing from an index, or an entry without one, is a broken
//! invariant and panics, except in an index being built on a partition
//! that holds rows (`begin_index_build`): there every change is kept
//! tolerantly (an entry added only where absent, removed only where
//! present) while `build_index_step` walks the rows by row id and adds
//! those already there, until the index holds every live row.

use super::{row_view, Partition, RowState};
use crate::layout::{RowLayout, RowView};
use crate::ordered_index::{Entry, OrderedIndex};
use crate::ordered_key::OrderedKey;
use crate::page_memory::PageMemory;
use crate::partition::OutOfDataMemory;
use crate::slots::SlotPages;
use std::cmp::Ordering;

/// One ordered index besides the primary key's.
pub struct SecondaryIndex {
    /// Its number in the table (`IndexDef::id`).
    pub id: u32,
    /// Its columns.
    pub key: OrderedKey,
    /// Its entries.
    pub tree: OrderedIndex,
    /// While it is built: where the build stands.
    pub building: Option<Build>,
}

/// An index being built (`Partition::begin_index_build`): every change
/// keeps it tolerantly (an entry is added only where absent, removed only
/// where present, and a commit's insert takes whatever node DataMemory
/// has, as an insert prepared before the build began promised none for
/// it) until `finish_index_build`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Build {
    /// The row id the walk looks at next; `None` once it has seen every
    /// row.
    pub next_row: Option<u32>,
    /// A commit found no node for an entry: the index misses a row and
    /// can never be finished (drop it).
    pub failed: bool,
}

/// The indexes a pending update took a row out of: `write_image` sets it,
/// the `commit_row` that follows in the same step puts the row back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Reindex {
    pub(super) row: u32,
    /// Bit i: secondary index i.
    pub(super) mask: u32,
}

impl Partition {
    /// Adds an ordered index over `columns` (column ids in index order),
    /// numbered `id`, to a partition holding no row yet.
    pub fn add_secondary_index(
        &mut self,
        memory: &PageMemory,
        layout: &RowLayout,
        id: u32,
        columns: &[u16],
    ) {
        assert!(
            self.ordered.is_empty(),
            "partition {}: an index is added to a partition with rows only by a build",
            self.id
        );
        assert!(
            self.secondary.len() < 31,
            "partition {}: a table has at most 16 indexes (validated)",
            self.id
        );
        self.secondary.push(SecondaryIndex {
            id,
            key: OrderedKey::new(layout, columns),
            tree: OrderedIndex::new(memory),
            building: None,
        });
    }

    /// Adds an ordered index over `columns`, numbered `id`, to a partition
    /// that may hold rows: from now on every change keeps it (tolerantly),
    /// and `build_index_step` adds the rows already here.
    pub fn begin_index_build(
        &mut self,
        memory: &PageMemory,
        layout: &RowLayout,
        id: u32,
        columns: &[u16],
    ) {
        assert!(
            self.secondary.len() < 31 && self.secondary.iter().all(|index| index.id != id),
            "partition {}: index {id} added twice, or past the limit (validated)",
            self.id
        );
        debug_assert!(
            !self.ordered_deferred,
            "partition {}: an index built while a restore defers them",
            self.id
        );
        self.secondary.push(SecondaryIndex {
            id,
            key: OrderedKey::new(layout, columns),
            tree: OrderedIndex::new(memory),
            building: Some(Build {
                next_row: Some(0),
                failed: false,
            }),
        });
    }

    /// Adds the rows among the next `max_rows` slots to index `id`,
    /// walking by row id from where the last step stopped: `Ok(true)` once
    /// the walk has seen every row, `Ok(false)` to call again. `Err` when
    /// DataMemory has no node for an entry, here or at a commit since the
    /// build began: the index cannot be built (drop it).
    pub fn build_index_step(
        &mut self,
        memory: &mut PageMemory,
        layout: &RowLayout,
        id: u32,
        max_rows: u32,
    ) -> Result<bool, OutOfDataMemory> {
        let at = self.secondary_position(id);
        let build = self.secondary[at]
            .building
            .unwrap_or_else(|| panic!("partition {}: index {id} is not being built", self.id));
        if build.failed {
            return Err(OutOfDataMemory);
        }
        let Some(start) = build.next_row else {
            return Ok(true);
        };
        let mut cursor = crate::scan::RowIdCursor::new(start);
        let mut rows = 0;
        let next_row = loop {
            let Some(slot) = cursor.peek(self, memory) else {
                break None;
            };
            if rows == max_rows {
                break Some(slot.row_id);
            }
            if matches!(slot.holds, crate::scan::SlotHolds::Committed { .. }) {
                let Partition {
                    fixed,
                    var,
                    secondary,
                    ..
                } = self;
                let index = &mut secondary[at];
                let (target, order) =
                    entry_of_row(fixed, var, &index.key, memory, layout, slot.row_id);
                if !contains(&index.tree, memory, target, &order)
                    && index.tree.insert(memory, target, order).is_err()
                {
                    return Err(OutOfDataMemory);
                }
            }
            // Every slot looked at counts, so a step over a sparse
            // partition is bounded too.
            rows += 1;
            cursor.advance();
        };
        let build = self.secondary[at]
            .building
            .as_mut()
            .expect("still being built");
        build.next_row = next_row;
        Ok(next_row.is_none())
    }

    /// Index `id`, whose walk has seen every row, is built: from now on
    /// every change keeps it strictly, from promises. The caller makes
    /// sure no change prepared before the build began can still commit
    /// (it promised no node for this index).
    pub fn finish_index_build(&mut self, id: u32) {
        let at = self.secondary_position(id);
        let index = &mut self.secondary[at];
        assert!(
            index
                .building
                .is_some_and(|build| build.next_row.is_none() && !build.failed),
            "partition {}: index {id} finished before its walk ended, or after it failed",
            self.id
        );
        index.building = None;
    }

    fn secondary_position(&self, id: u32) -> usize {
        self.secondary
            .iter()
            .position(|index| index.id == id)
            .unwrap_or_else(|| panic!("partition {}: no index {id}", self.id))
    }

    /// Takes index `id` out of the partition, its nodes back to DataMemory.
    pub fn drop_secondary_index(&mut self, memory: &mut PageMemory, id: u32) {
        assert!(
            self.reindex.is_none(),
            "partition {}: an index dropped between an update's image and its commit",
            self.id
        );
        if let Some(at) = self.secondary.iter().position(|index| index.id == id) {
            let mut index = self.secondary.remove(at);
            index.tree.clear(memory);
        }
    }

    /// The table's other ordered indexes, in the order of its definition.
    pub fn secondary_indexes(&self) -> &[SecondaryIndex] {
        &self.secondary
    }

    /// The index numbered `id` (0: the primary key's): its key and tree;
    /// `None` for one still being built, which holds only some rows.
    pub fn ordered_index(&self, id: u32) -> Option<(&OrderedKey, &OrderedIndex)> {
        debug_assert!(
            !self.ordered_deferred,
            "partition {}: an index read while a restore defers them",
            self.id
        );
        if id == 0 {
            return Some((&self.ordered_key, &self.ordered));
        }
        self.secondary
            .iter()
            .find(|index| index.id == id && index.building.is_none())
            .map(|index| (&index.key, &index.tree))
    }

    /// Promises the ordered-index nodes row `row` will need when it
    /// becomes live at commit (an insert prepared on it): for every index,
    /// in one count kept in the row's header. Nothing when it holds a
    /// promise already. `Err` when DataMemory cannot promise them.
    pub fn promise_ordered_insert(
        &mut self,
        memory: &mut PageMemory,
        row: u32,
    ) -> Result<(), OutOfDataMemory> {
        if self.fixed.slot(memory, row)[21] != 0 {
            return Ok(());
        }
        let nodes = self.promise(memory, u32::MAX)?;
        self.fixed.slot_mut(memory, row)[21] = nodes;
        Ok(())
    }

    /// Promises the nodes an update of live row `row` to `image` will
    /// need at commit: for each secondary index whose columns it changes.
    /// Returns the count for the operation to keep (0: none changes), to
    /// hand to `commit_row` or give back with `release_index_promise`.
    pub fn promise_index_update(
        &mut self,
        memory: &mut PageMemory,
        layout: &RowLayout,
        row: u32,
        image: &[u8],
    ) -> Result<u8, OutOfDataMemory> {
        if self.secondary.is_empty() || self.state(memory, row) != RowState::Live {
            return Ok(0);
        }
        let mask = self.changed_indexes(memory, layout, row, layout.image_view(image));
        if mask == 0 {
            return Ok(0);
        }
        self.promise(memory, mask)
    }

    /// Gives back a promise of `nodes` that will not be used (an abort, or
    /// an update a later write of its transaction replaced).
    pub fn release_index_promise(&mut self, memory: &mut PageMemory, nodes: u8) {
        if nodes > 0 {
            self.ordered.release(memory, nodes);
        }
    }

    /// Reserves an insert's nodes in the primary key's index (bit 31 of
    /// `mask`) and in each secondary index whose bit is set; the total.
    fn promise(&mut self, memory: &mut PageMemory, mask: u32) -> Result<u8, OutOfDataMemory> {
        let mut total: u32 = 0;
        let trees = std::iter::once((1u32 << 31, &self.ordered)).chain(
            self.secondary
                .iter()
                .enumerate()
                .map(|(at, index)| (1 << at, &index.tree)),
        );
        for (bit, tree) in trees {
            if mask & bit == 0 {
                continue;
            }
            match tree.reserve_insert(memory) {
                Ok(nodes) => total += u32::from(nodes),
                Err(_) => {
                    if total > 0 {
                        node_release(&self.ordered, memory, total);
                    }
                    return Err(OutOfDataMemory);
                }
            }
        }
        // 17 trees of at most a dozen levels: far below a byte's range.
        Ok(u8::try_from(total).expect("a promise for every index fits a byte"))
    }

    /// Bit i set for each secondary index i whose columns differ between
    /// live row `row` and `new`.
    fn changed_indexes(
        &self,
        memory: &PageMemory,
        layout: &RowLayout,
        row: u32,
        new: RowView<'_>,
    ) -> u32 {
        let old = row_view(&self.fixed, &self.var, memory, layout, row);
        let mut mask = 0;
        for (at, index) in self.secondary.iter().enumerate() {
            let changed = index
                .key
                .column_ids()
                .any(|column| layout.value(old, column) != layout.value(new, column));
            if changed {
                mask |= 1 << at;
            }
        }
        mask
    }

    /// Before an update's image replaces live row `row`'s: takes the row
    /// out of each secondary index whose columns `image` changes, and
    /// remembers them for `commit_row`.
    pub(super) fn unindex_for_update(
        &mut self,
        memory: &mut PageMemory,
        layout: &RowLayout,
        row: u32,
        image: &[u8],
    ) {
        assert!(
            self.reindex.is_none(),
            "partition {}: an update's image written while another's awaits its commit",
            self.id
        );
        if self.ordered_deferred
            || self.secondary.is_empty()
            || self.state(memory, row) != RowState::Live
        {
            return;
        }
        let mask = self.changed_indexes(memory, layout, row, layout.image_view(image));
        if mask == 0 {
            return;
        }
        let Partition {
            fixed,
            var,
            secondary,
            id,
            ..
        } = self;
        for (at, index) in secondary.iter_mut().enumerate() {
            if mask & (1 << at) != 0 {
                let tree = (
                    &index.key,
                    &mut index.tree,
                    index.id,
                    index.building.as_mut(),
                );
                remove_entry(fixed, var, tree, memory, layout, row, *id);
            }
        }
        self.reindex = Some(Reindex { row, mask });
    }

    /// After an update's image is written and the row committed: puts the
    /// row back into the indexes `unindex_for_update` took it out of, with
    /// the `promised` nodes (0 for a restore, which inserts unpromised).
    pub(super) fn reindex_after_update(
        &mut self,
        memory: &mut PageMemory,
        layout: &RowLayout,
        row: u32,
        promised: u8,
    ) {
        let Some(Reindex { row: pending, mask }) = self.reindex.take() else {
            self.release_index_promise(memory, promised);
            return;
        };
        assert_eq!(
            pending, row,
            "partition {}: row {row} committed while row {pending}'s update awaits",
            self.id
        );
        self.release_index_promise(memory, promised);
        let unpromised = promised == 0;
        let Partition {
            fixed,
            var,
            secondary,
            id,
            ..
        } = self;
        for (at, index) in secondary.iter_mut().enumerate() {
            if mask & (1 << at) != 0 {
                let tree = (
                    &index.key,
                    &mut index.tree,
                    index.id,
                    index.building.as_mut(),
                );
                insert_entry(fixed, var, tree, memory, layout, row, unpromised, *id);
            }
        }
    }

    /// From now on rows come and go without the ordered indexes, which
    /// must be empty: a restore, or a node restart's copy into an empty
    /// partition, loads the rows first and builds every index from them
    /// at the end (`build_deferred_indexes`), sorted, rather than
    /// descending each tree once per row.
    pub fn defer_ordered_indexes(&mut self) {
        assert!(
            self.ordered_indexes_empty(),
            "partition {}: ordered indexes deferred once they hold entries",
            self.id
        );
        self.ordered_deferred = true;
    }

    /// Whether every ordered index is empty, so they may be deferred
    /// (`defer_ordered_indexes`).
    pub fn ordered_indexes_empty(&self) -> bool {
        self.ordered.is_empty() && self.secondary.iter().all(|index| index.tree.is_empty())
    }

    /// Whether the ordered indexes wait to be built from the rows
    /// (`defer_ordered_indexes`).
    pub fn ordered_deferred(&self) -> bool {
        self.ordered_deferred
    }

    /// Builds every ordered index from the live rows (each index's entries
    /// sorted, then laid out left to right) and keeps them at every change
    /// from then on; the entries it made. `Err` when DataMemory has too
    /// few nodes for them.
    pub fn build_deferred_indexes(
        &mut self,
        memory: &mut PageMemory,
        layout: &RowLayout,
    ) -> Result<u64, OutOfDataMemory> {
        if !self.ordered_deferred {
            return Ok(0);
        }
        let live = self.live_rows(memory);
        let Partition {
            fixed,
            var,
            ordered,
            ordered_key,
            secondary,
            ..
        } = self;
        let mut built = 0;
        let trees = std::iter::once((&*ordered_key, ordered)).chain(
            secondary
                .iter_mut()
                .map(|index| (&index.key, &mut index.tree)),
        );
        for (key, tree) in trees {
            let view = |row: u32| row_view(fixed, var, memory, layout, row);
            let mut entries: Vec<Entry> = live
                .iter()
                .map(|&row| Entry {
                    prefix: key.prefix(layout, view(row)),
                    row,
                })
                .collect();
            // The tree's own order (prefix, key, row id), reading rows only
            // where prefixes tie.
            entries.sort_unstable_by(|a, b| key.order(layout, *a, *b, || view(b.row), view));
            tree.build_sorted(memory, &entries)
                .map_err(|_| OutOfDataMemory)?;
            built += entries.len() as u64;
        }
        self.ordered_deferred = false;
        Ok(built)
    }

    /// The key of the primary-key ordered index.
    pub fn ordered_key(&self) -> &OrderedKey {
        &self.ordered_key
    }

    /// Adds live row `row` to every ordered index, with the nodes
    /// promised when its insert was prepared (`promised`; an insert
    /// always promises, a restore never does: running out there is a
    /// broken invariant).
    pub(super) fn order_row(
        &mut self,
        memory: &mut PageMemory,
        layout: &RowLayout,
        row: u32,
        promised: u8,
    ) {
        self.release_index_promise(memory, promised);
        if self.ordered_deferred {
            return;
        }
        let unpromised = promised == 0;
        let Partition {
            fixed,
            var,
            ordered,
            ordered_key,
            secondary,
            id,
            ..
        } = self;
        let primary = (&*ordered_key, ordered, 0, None);
        insert_entry(fixed, var, primary, memory, layout, row, unpromised, *id);
        for index in secondary.iter_mut() {
            let tree = (
                &index.key,
                &mut index.tree,
                index.id,
                index.building.as_mut(),
            );
            insert_entry(fixed, var, tree, memory, layout, row, unpromised, *id);
        }
    }

    /// Takes row `row` out of every ordered index if it is live there, and
    /// gives back the nodes reserved for an insert prepared on it.
    pub(super) fn leave_ordered_index(
        &mut self,
        memory: &mut PageMemory,
        layout: &RowLayout,
        row: u32,
    ) {
        self.release_ordered_reservation(memory, row);
        if self.ordered_deferred || self.state(memory, row) != RowState::Live {
            return;
        }
        let Partition {
            fixed,
            var,
            ordered,
            ordered_key,
            secondary,
            id,
            ..
        } = self;
        let primary = (&*ordered_key, ordered, 0, None);
        remove_entry(fixed, var, primary, memory, layout, row, *id);
        for index in secondary.iter_mut() {
            let tree = (
                &index.key,
                &mut index.tree,
                index.id,
                index.building.as_mut(),
            );
            remove_entry(fixed, var, tree, memory, layout, row, *id);
        }
    }

    pub(super) fn release_ordered_reservation(&mut self, memory: &mut PageMemory, row: u32) {
        let slot = self.fixed.slot_mut(memory, row);
        let nodes = slot[21];
        if nodes > 0 {
            slot[21] = 0;
            self.ordered.release(memory, nodes);
        }
    }

    /// Checks every ordered index against the rows: each index's entries
    /// are the live rows, each with its key's prefix, in key order. For
    /// tests and the simulator's checks; walks every row. Returns the
    /// primary key index's entries.
    pub fn check_ordered(&self, memory: &PageMemory, layout: &RowLayout) -> Result<u64, String> {
        let mut live = self.live_rows(memory);
        live.sort_unstable();
        let entries = self.check_tree(memory, layout, &self.ordered_key, &self.ordered, &live)?;
        // An index being built holds some of the rows until it is done.
        for index in self
            .secondary
            .iter()
            .filter(|index| index.building.is_none())
        {
            self.check_tree(memory, layout, &index.key, &index.tree, &live)
                .map_err(|error| format!("index {}: {error}", index.id))?;
        }
        Ok(entries)
    }

    /// The live rows' ids, in slot order.
    fn live_rows(&self, memory: &PageMemory) -> Vec<u32> {
        let mut live = Vec::new();
        self.fixed.for_each_slot(|row| {
            if self.state(memory, row) == RowState::Live {
                live.push(row);
            }
        });
        live
    }

    fn check_tree(
        &self,
        memory: &PageMemory,
        layout: &RowLayout,
        key: &OrderedKey,
        tree: &OrderedIndex,
        live: &[u32],
    ) -> Result<u64, String> {
        let view = |row: u32| row_view(&self.fixed, &self.var, memory, layout, row);
        let entries = tree.check(memory, |a, b| key.order(layout, a, b, || view(b.row), view));
        let mut indexed: Vec<u32> = Vec::with_capacity(entries.len());
        for entry in &entries {
            if self.state(memory, entry.row) != RowState::Live {
                return Err(format!(
                    "row {} is in the ordered index but not live",
                    entry.row
                ));
            }
            let prefix = key.prefix(layout, view(entry.row));
            if prefix != entry.prefix {
                return Err(format!(
                    "row {}'s ordered-index prefix {:#x} is not its key's {prefix:#x}",
                    entry.row, entry.prefix
                ));
            }
            indexed.push(entry.row);
        }
        indexed.sort_unstable();
        if indexed != live {
            let missing: Vec<u32> = live
                .iter()
                .filter(|row| indexed.binary_search(row).is_err())
                .copied()
                .take(5)
                .collect();
            return Err(format!(
                "the ordered index holds {} rows, the partition {} live ones (first missing: {missing:?})",
                indexed.len(),
                live.len()
            ));
        }
        Ok(entries.len() as u64)
    }
}

/// One ordered index as the helpers below take it: its key, its tree,
/// its number (0: the primary key's) and whether it is being built (then
/// an entry may be missing, or already there, and that is no error).
/// An index to change: its key, its tree, its id, and its build while
/// it is being built.
type Tree<'a> = (
    &'a OrderedKey,
    &'a mut OrderedIndex,
    u32,
    Option<&'a mut Build>,
);

/// Whether `tree` holds the entry `target` (`order` says how an entry
/// stands relative to it).
fn contains(
    tree: &OrderedIndex,
    memory: &PageMemory,
    target: Entry,
    order: &impl Fn(&PageMemory, Entry) -> Ordering,
) -> bool {
    tree.seek(memory, |entry| order(memory, entry) == Ordering::Less)
        .is_some_and(|position| tree.entry(memory, position) == target)
}

/// Adds row `row`'s entry to `tree`: from a promise just released, or
/// (`unpromised`, a restore) with whatever nodes DataMemory has.
#[allow(clippy::too_many_arguments)]
fn insert_entry(
    fixed: &SlotPages,
    var: &[Option<SlotPages>],
    (key, tree, index, building): Tree<'_>,
    memory: &mut PageMemory,
    layout: &RowLayout,
    row: u32,
    unpromised: bool,
    partition: u32,
) {
    let (target, order) = entry_of_row(fixed, var, key, memory, layout, row);
    if let Some(build) = building {
        // The build may have added it already; and the change may have
        // been prepared before the build began, promising nothing here.
        if !contains(tree, memory, target, &order) && tree.insert(memory, target, order).is_err() {
            build.failed = true;
        }
        return;
    }
    if unpromised {
        assert!(
            tree.insert(memory, target, order).is_ok(),
            "partition {partition}: row {row} entered index {index} without a promise, and \
             DataMemory has no node for it"
        );
    } else {
        tree.insert_from_promise(memory, target, order);
    }
}

/// Takes live row `row`'s entry out of `tree` (found by reading the row,
/// so before its values change).
fn remove_entry(
    fixed: &SlotPages,
    var: &[Option<SlotPages>],
    (key, tree, index, building): Tree<'_>,
    memory: &mut PageMemory,
    layout: &RowLayout,
    row: u32,
    partition: u32,
) {
    let (_, order) = entry_of_row(fixed, var, key, memory, layout, row);
    let removed = tree.remove(memory, order).is_some();
    // A build may not have reached the row yet.
    assert!(
        removed || building.is_some(),
        "partition {partition}: live row {row} missing from index {index}"
    );
}

/// Gives back `nodes` of a promise through any index (they share one node
/// list).
fn node_release(tree: &OrderedIndex, memory: &mut PageMemory, nodes: u32) {
    // At most a byte's worth was reserved before a failure.
    tree.release(
        memory,
        u8::try_from(nodes).expect("a partial promise fits a byte"),
    );
}
/// Row `row`'s ordered-index entry, and how another entry stands relative
/// to it (reading rows from the memory the tree hands in): what an insert
/// or a remove of the row's entry searches with.
fn entry_of_row<'a>(
    fixed: &'a SlotPages,
    var: &'a [Option<SlotPages>],
    key: &'a OrderedKey,
    memory: &PageMemory,
    layout: &'a RowLayout,
    row: u32,
) -> (Entry, impl Fn(&PageMemory, Entry) -> Ordering + 'a) {
    let view = row_view(fixed, var, memory, layout, row);
    let target = Entry {
        prefix: key.prefix(layout, view),
        row,
    };
    let order = move |memory: &PageMemory, entry: Entry| {
        let target_view = || row_view(fixed, var, memory, layout, row);
        key.order(layout, entry, target, target_view, |other| {
            row_view(fixed, var, memory, layout, other)
        })
    };
    (target, order)
}

#[cfg(test)]
mod tests {
    use crate::page_memory::PageMemory;
    use crate::{Partition, RowLayout};
    use signal::attr::AttrWriter;
    use signal::schema::{ColumnDef, ColumnType, TableDef};
    use stdx::mix::XorShift;

    fn table() -> TableDef {
        TableDef {
            id: 1,
            version: 1,
            name: "t".into(),
            columns: vec![
                ColumnDef::new("k", ColumnType::BigInt { unsigned: true }, false),
                ColumnDef::new("a", ColumnType::Int { unsigned: false }, true),
                ColumnDef::new("s", ColumnType::VarChar(20), false),
            ],
            primary_key: vec![0],
            partitions: 1,
            indexes: Vec::new(),
            revision: 0,
            partition_key: Vec::new(),
        }
    }

    /// Attribute entries of (column, value) pairs.
    fn entries(values: &[(u16, Option<Vec<u8>>)]) -> Vec<u8> {
        let mut buffer = vec![0u8; 256];
        let mut writer = AttrWriter::new(&mut buffer);
        for (column, value) in values {
            writer.push(*column, value.as_deref()).unwrap();
        }
        let length = writer.len();
        buffer.truncate(length);
        buffer
    }

    struct Rows {
        layout: RowLayout,
        memory: PageMemory,
        partition: Partition,
        /// Live rows: (row id, k).
        live: Vec<(u32, u64)>,
    }

    impl Rows {
        fn image(&self, k: u64, a: Option<i32>, s: &str, base: Option<u32>) -> Vec<u8> {
            let key = entries(&[(0, Some(k.to_le_bytes().to_vec()))]);
            let changes = entries(&[
                (1, a.map(|a| a.to_le_bytes().to_vec())),
                (2, Some(s.as_bytes().to_vec())),
            ]);
            let mut image = vec![0u8; self.layout.image_max_bytes()];
            let base = base.map(|row| self.partition.view(&self.memory, &self.layout, row));
            let length = self
                .layout
                .build_image(&mut image, base, &key, &changes)
                .unwrap();
            image.truncate(length);
            image
        }

        fn insert(&mut self, k: u64, a: Option<i32>, s: &str) {
            let image = self.image(k, a, s, None);
            let Rows {
                layout,
                memory,
                partition,
                ..
            } = self;
            let row = partition.reserve_row(memory).unwrap();
            partition
                .fill_reserved_row(memory, layout, row, &image, k as u32)
                .unwrap();
            partition.commit_row(memory, layout, row, 1, 0);
            self.live.push((row, k));
        }

        fn update(&mut self, at: usize, a: Option<i32>, s: &str) {
            let (row, k) = self.live[at];
            let image = self.image(k, a, s, Some(row));
            let Rows {
                layout,
                memory,
                partition,
                ..
            } = self;
            let promise = partition
                .promise_index_update(memory, layout, row, &image)
                .unwrap();
            let new_var = partition
                .var_slot_for_image(memory, layout, row, image.len())
                .unwrap();
            partition.write_image(memory, layout, row, &image, new_var);
            partition.commit_row(memory, layout, row, 2, promise);
        }

        fn delete(&mut self, at: usize) {
            let (row, k) = self.live.swap_remove(at);
            let Rows {
                layout,
                memory,
                partition,
                ..
            } = self;
            assert!(partition.index.remove(memory, k as u32, row));
            partition.mark_deleted(memory, layout, row, 3);
            partition.free_row(memory, layout, row, Some(3));
        }
    }

    /// An index built on a partition with rows while rows are inserted,
    /// updated (its column and others) and deleted between the build's
    /// steps ends up holding exactly the live rows, in order.
    #[test]
    fn an_index_built_while_rows_change_equals_the_rows() {
        let layout = RowLayout::new(&table());
        let memory = PageMemory::new(16 << 20);
        let partition = Partition::new(0, &layout, &memory);
        let mut rows = Rows {
            layout,
            memory,
            partition,
            live: Vec::new(),
        };
        let mut random = XorShift::new(11);
        let mut next_k = 0;
        for _ in 0..500 {
            rows.insert(next_k, Some(random.below(50) as i32), "x");
            next_k += 1;
        }
        let Rows {
            layout,
            memory,
            partition,
            ..
        } = &mut rows;
        partition.begin_index_build(memory, layout, 1, &[1, 2]);
        let mut steps = 0;
        loop {
            let Rows {
                layout,
                memory,
                partition,
                ..
            } = &mut rows;
            let done = partition.build_index_step(memory, layout, 1, 7).unwrap();
            steps += 1;
            if done {
                partition.finish_index_build(1);
                break;
            }
            for _ in 0..3 {
                let a = (random.below(5) != 0).then(|| random.below(50) as i32);
                match random.below(4) {
                    0 => {
                        rows.insert(next_k, a, "y");
                        next_k += 1;
                    }
                    1 | 2 if !rows.live.is_empty() => {
                        let at = random.below(rows.live.len() as u64) as usize;
                        let s = if random.below(2) == 0 { "x" } else { "z" };
                        rows.update(at, a, s);
                    }
                    _ if !rows.live.is_empty() => {
                        let at = random.below(rows.live.len() as u64) as usize;
                        rows.delete(at);
                    }
                    _ => {}
                }
            }
            // While it builds, the other indexes stay checked.
            rows.partition
                .check_ordered(&rows.memory, &rows.layout)
                .unwrap();
        }
        assert!(steps > 50, "built in {steps} steps");
        // Built: every index, the new one too, equals the rows.
        let checked = rows
            .partition
            .check_ordered(&rows.memory, &rows.layout)
            .unwrap();
        assert_eq!(checked, rows.live.len() as u64);
        assert_eq!(
            rows.partition.secondary_indexes()[0].tree.len(),
            rows.live.len() as u64
        );
        // Dropped, its nodes go back.
        rows.partition.drop_secondary_index(&mut rows.memory, 1);
        assert!(rows.partition.secondary_indexes().is_empty());
    }
}
