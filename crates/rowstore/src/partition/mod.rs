//! One partition's rows: fixed-part slots (row id = slot reference, chosen
//! here and never moved), var parts in size classes, the primary-key hash
//! index, the primary-key ordered index, and the row header; and the row
//! changes that prepare, commit, abort and restore make to them (the ldm
//! decides when; this file keeps the header, the checksum, the indexes and
//! the live-data count right).
//!
//! The hash index holds every row from its insert's prepare (a later
//! operation on the key must find the reserved row); the ordered indexes
//! (the primary key's and the table's others, `indexes`) hold live rows
//! only: a row enters them when it becomes live (commit of an insert, a
//! restored row), leaves them when it stops being live (commit of a
//! delete, a restore's removal), and moves in those whose columns an
//! update changes. Their nodes are promised when the change is prepared,
//! so that commit cannot fail.
//!
//! ```text
//! row header (24 bytes at the start of every fixed slot)
//!  0 u64 gci        GCI of the last committed change (of the delete, when free)
//!  8 u32 checksum   CRC32C of fixed body + var part (live rows)
//! 12 u32 op_link    first operation record in the row's lock queue, or NIL
//! 16 u32 var_ref    var part (class << 28 | slot ref), or NIL; free-list link when free
//! 20 u8  state      0 free, 1 reserved (insert prepared, invisible), 2 live
//! 21 u8  reserved   ordered-index nodes reserved for the prepared insert here (every index)
//! 22..24            zero
//! ```
//!
//! What the ldm keeps beside a partition's rows (its redo part, its local
//! checkpoints) lives in the ldm (`ldm::PartitionState`).

use crate::hash_index::HashIndex;
use crate::layout::{RowLayout, RowView, HEADER_BYTES};
use crate::ordered_index::OrderedIndex;
use crate::ordered_key::OrderedKey;
use indexes::Reindex;
pub use indexes::{Build, SecondaryIndex};

mod indexes;
use crate::page_memory::{PageMemory, PAGE_SIZE};
use crate::slots::{AllocAtError, SlotPages, NIL};

/// State byte of a row header.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum RowState {
    /// No row; the header keeps the GCI of the delete.
    Free = 0,
    /// An insert is prepared here; invisible to committed reads.
    Reserved = 1,
    /// A committed row.
    Live = 2,
}

/// DataMemory is exhausted (the caller answers "table is full").
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct OutOfDataMemory;

/// Var part size classes: 32 bytes doubling to a whole page.
pub const VAR_CLASSES: usize = 11;

#[inline]
fn var_class_of(bytes: usize) -> usize {
    let mut class = 0;
    while (32usize << class) < bytes {
        class += 1;
    }
    assert!(
        class < VAR_CLASSES,
        "var part of {bytes} bytes exceeds a page"
    );
    class
}

/// The var class a var part of `bytes` needs.
#[inline]
pub fn var_class(bytes: usize) -> usize {
    var_class_of(bytes.max(1))
}

/// One partition.
pub struct Partition {
    /// Partition number within its table.
    pub id: u32,
    /// Fixed-part slots; a slot reference is the row id.
    pub fixed: SlotPages,
    var: Vec<Option<SlotPages>>,
    /// Primary-key hash index.
    pub index: HashIndex,
    /// Primary-key ordered index of the live rows.
    pub ordered: OrderedIndex,
    ordered_key: OrderedKey,
    /// The table's other ordered indexes (`indexes`).
    secondary: Vec<SecondaryIndex>,
    /// An update's index changes between `write_image` and `commit_row`.
    reindex: Option<Reindex>,
    /// A restore puts the rows in without touching the ordered indexes,
    /// which are built from them, sorted, once it is done
    /// (`defer_ordered_indexes`, `build_deferred_indexes`).
    ordered_deferred: bool,
    page_capacity: usize,
    /// Bytes of the live rows' images (fixed body and used var part), kept
    /// as rows change (the checkpoint report's live data).
    live_bytes: u64,
}

/// Reads a u32 at `offset`.
#[inline]
fn read_u32(bytes: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes([
        bytes[offset],
        bytes[offset + 1],
        bytes[offset + 2],
        bytes[offset + 3],
    ])
}

impl Partition {
    /// An empty partition whose rows follow `layout`.
    pub fn new(id: u32, layout: &RowLayout, memory: &PageMemory) -> Partition {
        let slot_bytes = (HEADER_BYTES + layout.fixed_body_bytes).div_ceil(8) * 8;
        let page_capacity = memory.page_count() as usize;
        assert!(
            slot_bytes <= PAGE_SIZE,
            "fixed row part of {slot_bytes} bytes must fit a page (schema validation bounds rows)"
        );
        Partition {
            id,
            fixed: SlotPages::new(slot_bytes.max(32), 16, Some(0), page_capacity),
            var: (0..VAR_CLASSES).map(|_| None).collect(),
            index: HashIndex::new(memory),
            ordered: OrderedIndex::new(memory),
            ordered_key: OrderedKey::primary(layout),
            secondary: Vec::new(),
            reindex: None,
            ordered_deferred: false,
            page_capacity,
            live_bytes: 0,
        }
    }

    /// Bytes of the live rows' images.
    #[inline]
    pub fn live_bytes(&self) -> u64 {
        self.live_bytes
    }

    /// Bytes of row `row`'s image as stored: fixed body and used var part
    /// (what an LCP row record holds after its head).
    #[inline]
    pub fn image_bytes(&self, memory: &PageMemory, layout: &RowLayout, row: u32) -> u64 {
        let view = self.view(memory, layout, row);
        (view.fixed.len() + layout.var_part_bytes(view.var)) as u64
    }

    /// A live row leaves the live data (replaced, deleted or freed).
    #[inline]
    fn forget_live_image(&mut self, memory: &PageMemory, layout: &RowLayout, row: u32) {
        if self.state(memory, row) == RowState::Live {
            let bytes = self.image_bytes(memory, layout, row);
            self.live_bytes = self
                .live_bytes
                .checked_sub(bytes)
                .expect("live bytes count every live row's image");
        }
    }

    /// Rows in use (live or reserved).
    #[inline]
    pub fn rows(&self) -> u64 {
        self.fixed.used()
    }

    /// Header fields of row `row`.
    #[inline]
    pub fn state(&self, memory: &PageMemory, row: u32) -> RowState {
        if self.fixed.freed_page_gci(row).is_some() {
            return RowState::Free;
        }
        match self.fixed.slot(memory, row)[20] {
            0 => RowState::Free,
            1 => RowState::Reserved,
            2 => RowState::Live,
            other => panic!(
                "row {row} of partition {} has state byte {other}: memory corruption",
                self.id
            ),
        }
    }

    /// GCI in the row header.
    #[inline]
    pub fn gci(&self, memory: &PageMemory, row: u32) -> u64 {
        if let Some(gci) = self.fixed.freed_page_gci(row) {
            return gci;
        }
        let slot = self.fixed.slot(memory, row);
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&slot[0..8]);
        u64::from_le_bytes(bytes)
    }

    /// The first operation in the row's lock queue.
    #[inline]
    pub fn op_link(&self, memory: &PageMemory, row: u32) -> u32 {
        read_u32(self.fixed.slot(memory, row), 12)
    }

    /// Sets the first operation of the row's lock queue.
    #[inline]
    pub fn set_op_link(&self, memory: &mut PageMemory, row: u32, op: u32) {
        self.fixed.slot_mut(memory, row)[12..16].copy_from_slice(&op.to_le_bytes());
    }

    #[inline]
    fn var_ref(&self, memory: &PageMemory, row: u32) -> u32 {
        read_u32(self.fixed.slot(memory, row), 16)
    }

    /// The stored row as a view (fixed body and var part).
    #[inline]
    pub fn view<'a>(&self, memory: &'a PageMemory, layout: &RowLayout, row: u32) -> RowView<'a> {
        row_view(&self.fixed, &self.var, memory, layout, row)
    }

    /// Verifies the checksum of a live row; a mismatch is memory corruption
    /// and stops the node (fail fast: never serve corrupt data).
    #[inline]
    pub fn verify_checksum(&self, memory: &PageMemory, layout: &RowLayout, row: u32) {
        let stored = read_u32(self.fixed.slot(memory, row), 8);
        let computed = self.compute_checksum(memory, layout, row);
        assert_eq!(
            stored, computed,
            "row checksum mismatch in partition {} row {row}: memory corruption",
            self.id
        );
    }

    #[inline]
    fn compute_checksum(&self, memory: &PageMemory, layout: &RowLayout, row: u32) -> u32 {
        self.checksum_and_image_bytes(memory, layout, row).0
    }

    /// The row's checksum and its image's bytes, from one view of it.
    #[inline]
    fn checksum_and_image_bytes(
        &self,
        memory: &PageMemory,
        layout: &RowLayout,
        row: u32,
    ) -> (u32, u64) {
        let view = self.view(memory, layout, row);
        let var_bytes = layout.var_part_bytes(view.var);
        let crc = stdx::crc::crc32c(view.fixed);
        let checksum = stdx::crc::crc32c_append(crc, &view.var[..var_bytes]);
        (checksum, (view.fixed.len() + var_bytes) as u64)
    }

    /// Takes a free fixed slot for a new row (state Reserved, no var part,
    /// no operations, GCI kept). `None` when DataMemory is full.
    #[inline]
    pub fn reserve_row(&mut self, memory: &mut PageMemory) -> Option<u32> {
        let row = self.fixed.alloc(memory)?;
        self.init_reserved_header(memory, row);
        Some(row)
    }

    /// The header of a slot just taken for a new row: state Reserved, no
    /// checksum, operations, var part or promise; the GCI kept.
    fn init_reserved_header(&mut self, memory: &mut PageMemory, row: u32) {
        let slot = self.fixed.slot_mut(memory, row);
        slot[8..12].fill(0);
        slot[12..16].copy_from_slice(&NIL.to_le_bytes());
        slot[16..20].copy_from_slice(&NIL.to_le_bytes());
        slot[20] = RowState::Reserved as u8;
        slot[21] = 0;
    }

    /// Takes the free fixed slot `row` for a row a backup places at the id
    /// its primary chose (state Reserved, as `reserve_row`).
    #[inline]
    pub fn reserve_row_at(
        &mut self,
        memory: &mut PageMemory,
        row: u32,
    ) -> Result<(), AllocAtError> {
        self.fixed.alloc_at(memory, row)?;
        self.init_reserved_header(memory, row);
        Ok(())
    }

    /// Whether `row` names a slot that holds a row (live or reserved).
    #[inline]
    pub fn is_occupied(&self, memory: &PageMemory, row: u32) -> bool {
        self.fixed.is_held(row) && self.state(memory, row) != RowState::Free
    }

    /// Fills the freshly reserved slot `row` with after-image `image` (var
    /// part in a new slot of its class) and indexes it under `hash`. When
    /// DataMemory runs out the slot is freed again and `Err` returned.
    #[inline]
    pub fn fill_reserved_row(
        &mut self,
        memory: &mut PageMemory,
        layout: &RowLayout,
        row: u32,
        image: &[u8],
        hash: u32,
    ) -> Result<(), OutOfDataMemory> {
        let mut var = NIL;
        if layout.var_columns > 0 {
            match self.alloc_var(memory, var_class(image.len() - layout.fixed_body_bytes)) {
                Some(reference) => var = reference,
                None => {
                    self.free_row(memory, layout, row, None);
                    return Err(OutOfDataMemory);
                }
            }
        }
        self.write_image(memory, layout, row, image, var);
        if self.index.insert(memory, hash, row).is_err() {
            self.free_row(memory, layout, row, None);
            return Err(OutOfDataMemory);
        }
        if self.promise_ordered_insert(memory, row).is_err() {
            self.index.remove(memory, hash, row);
            self.free_row(memory, layout, row, None);
            return Err(OutOfDataMemory);
        }
        Ok(())
    }

    /// Takes a var slot of `class`. `None` when DataMemory is full.
    #[inline]
    pub fn alloc_var(&mut self, memory: &mut PageMemory, class: usize) -> Option<u32> {
        let page_capacity = self.page_capacity;
        let pages = self.var[class]
            .get_or_insert_with(|| SlotPages::new(32 << class, 0, None, page_capacity));
        let reference = pages.alloc(memory)?;
        Some((class as u32) << 28 | reference)
    }

    /// The var slot an after-image of `image_bytes` needs at commit on row
    /// `row`, taken now so that commit cannot fail: NIL when the row's
    /// current var slot has the right size class (or the table has no var
    /// columns), a new slot otherwise. `None` when DataMemory is full.
    #[inline]
    pub fn var_slot_for_image(
        &mut self,
        memory: &mut PageMemory,
        layout: &RowLayout,
        row: u32,
        image_bytes: usize,
    ) -> Option<u32> {
        if layout.var_columns == 0 {
            return Some(NIL);
        }
        let needed = var_class(image_bytes - layout.fixed_body_bytes);
        if self.var_class_of_row(memory, row) == Some(needed) {
            return Some(NIL);
        }
        self.alloc_var(memory, needed)
    }

    /// Returns a var slot.
    #[inline]
    pub fn free_var(&mut self, memory: &mut PageMemory, var_ref: u32) {
        let (class, reference) = split_var_ref(var_ref);
        self.var[class]
            .as_mut()
            .expect("freeing a var slot of a class never allocated")
            .free(memory, reference);
    }

    /// The var class currently holding row `row`'s var part, if any.
    #[inline]
    pub fn var_class_of_row(&self, memory: &PageMemory, row: u32) -> Option<usize> {
        let var_ref = self.var_ref(memory, row);
        (var_ref != NIL).then(|| split_var_ref(var_ref).0)
    }

    /// Writes an after-image into row `row`: the fixed body, and the var part
    /// into `new_var` (a reserved var slot, freeing the old one) or into the
    /// row's current var slot (`new_var == NIL`, same class).
    #[inline]
    pub fn write_image(
        &mut self,
        memory: &mut PageMemory,
        layout: &RowLayout,
        row: u32,
        image: &[u8],
        new_var: u32,
    ) {
        self.unindex_for_update(memory, layout, row, image);
        self.forget_live_image(memory, layout, row);
        let (fixed_body, var_part) = image.split_at(layout.fixed_body_bytes);
        {
            let slot = self.fixed.slot_mut(memory, row);
            slot[HEADER_BYTES..HEADER_BYTES + layout.fixed_body_bytes].copy_from_slice(fixed_body);
        }
        if layout.var_columns == 0 {
            return;
        }
        let old_var = self.var_ref(memory, row);
        let target = if new_var != NIL {
            if old_var != NIL {
                self.free_var(memory, old_var);
            }
            self.fixed.slot_mut(memory, row)[16..20].copy_from_slice(&new_var.to_le_bytes());
            new_var
        } else {
            assert!(
                old_var != NIL,
                "an image with a var part needs a var slot reserved at prepare"
            );
            old_var
        };
        let (class, reference) = split_var_ref(target);
        let pages = self.var[class]
            .as_ref()
            .expect("var slot of an allocated class");
        let slot = pages.slot_mut(memory, reference);
        assert!(
            var_part.len() <= slot.len(),
            "var part larger than its slot class"
        );
        slot[..var_part.len()].copy_from_slice(var_part);
    }

    /// Marks a row live at `gci` and seals its checksum. A row becoming
    /// live enters every ordered index; an updated one goes back into the
    /// indexes its image's `write_image` took it out of, with the nodes
    /// its update promised (`index_promise`, from `promise_index_update`;
    /// 0 for none, or a restore).
    #[inline]
    pub fn commit_row(
        &mut self,
        memory: &mut PageMemory,
        layout: &RowLayout,
        row: u32,
        gci: u64,
        index_promise: u8,
    ) {
        let becomes_live = self.state(memory, row) != RowState::Live;
        let (checksum, image_bytes) = self.checksum_and_image_bytes(memory, layout, row);
        // `write_image`, always called first, took any live image out.
        self.live_bytes += image_bytes;
        let slot = self.fixed.slot_mut(memory, row);
        slot[0..8].copy_from_slice(&gci.to_le_bytes());
        slot[8..12].copy_from_slice(&checksum.to_le_bytes());
        slot[20] = RowState::Live as u8;
        if becomes_live {
            let slot = self.fixed.slot_mut(memory, row);
            let promised = slot[21];
            slot[21] = 0;
            self.release_index_promise(memory, index_promise);
            self.order_row(memory, layout, row, promised);
        } else {
            self.reindex_after_update(memory, layout, row, index_promise);
        }
    }

    /// A committed delete: the row leaves the index's view (state Reserved,
    /// invisible) with the delete's GCI; it is freed once no operation holds it.
    #[inline]
    pub fn mark_deleted(
        &mut self,
        memory: &mut PageMemory,
        layout: &RowLayout,
        row: u32,
        gci: u64,
    ) {
        self.leave_ordered_index(memory, layout, row);
        self.forget_live_image(memory, layout, row);
        let slot = self.fixed.slot_mut(memory, row);
        slot[0..8].copy_from_slice(&gci.to_le_bytes());
        slot[20] = RowState::Reserved as u8;
    }

    /// Frees row `row`: var part returned, state Free, header GCI set to
    /// `delete_gci` (Some for a committed delete; None for an aborted
    /// insert, which keeps the slot's previous GCI).
    #[inline]
    pub fn free_row(
        &mut self,
        memory: &mut PageMemory,
        layout: &RowLayout,
        row: u32,
        delete_gci: Option<u64>,
    ) {
        self.leave_ordered_index(memory, layout, row);
        self.forget_live_image(memory, layout, row);
        let var_ref = self.var_ref(memory, row);
        if var_ref != NIL {
            self.free_var(memory, var_ref);
        }
        {
            let slot = self.fixed.slot_mut(memory, row);
            if let Some(gci) = delete_gci {
                slot[0..8].copy_from_slice(&gci.to_le_bytes());
            }
            slot[8..12].fill(0);
            slot[12..16].copy_from_slice(&NIL.to_le_bytes());
            slot[20] = RowState::Free as u8;
        }
        self.fixed.free(memory, row);
    }

    /// Returns every page (drop table), and every index node and node
    /// reservation.
    pub fn release(&mut self, memory: &mut PageMemory) {
        let mut held = Vec::new();
        self.fixed.for_each_slot(|row| {
            if self.fixed.is_held(row) {
                held.push(row);
            }
        });
        for row in held {
            self.release_ordered_reservation(memory, row);
        }
        self.index.clear(memory);
        self.ordered.clear(memory);
        for index in &mut self.secondary {
            index.tree.clear(memory);
        }
        self.fixed.release_all(memory);
        for pages in self.var.iter_mut().flatten() {
            pages.release_all(memory);
        }
    }
}

/// Row `row` of the partition whose slots are `fixed` and `var`, as a view
/// (a function of the slots alone, so that the ordered index's comparisons
/// can read rows while the index itself is borrowed for a change).
#[inline]
fn row_view<'a>(
    fixed: &SlotPages,
    var: &[Option<SlotPages>],
    memory: &'a PageMemory,
    layout: &RowLayout,
    row: u32,
) -> RowView<'a> {
    let slot = fixed.slot(memory, row);
    let fixed_body = &slot[HEADER_BYTES..HEADER_BYTES + layout.fixed_body_bytes];
    let var_ref = read_u32(slot, 16);
    let var = if var_ref == NIL || layout.var_columns == 0 {
        &[][..]
    } else {
        let (class, reference) = split_var_ref(var_ref);
        let pages = var[class]
            .as_ref()
            .expect("row points at a var class the partition never allocated");
        pages.slot(memory, reference)
    };
    RowView {
        fixed: fixed_body,
        var,
    }
}

/// Splits a var reference into (class, slot reference).
#[inline]
pub fn split_var_ref(var_ref: u32) -> (usize, u32) {
    ((var_ref >> 28) as usize, var_ref & 0x0FFF_FFFF)
}
