//! LQHKEYREQ on a backup replica: the primary has prepared the operation and
//! chosen its row id; the backup places exactly that row (Insert at the row
//! id, Update or Delete of the row at the row id) with the primary's full
//! after-image, under its own row lock (docs/design/data-and-routing.md §2,
//! docs/design/transactions.md §3). Backups never look a key up to find a
//! row: row identity is the primary's choice, so every replica holds the
//! same row at the same id.

use crate::locks::{append_to_row, can_grant, wait_on_row};
use crate::operation::{ImageKind, NIL};
use crate::prepare::Outcome;
use crate::{layout_and_partition, Ldm};
use rowstore::slots::AllocAtError;
use rowstore::RowState;
use signal::signals::OperationKind;
use signal::{ErrorCode, Section};

impl Ldm {
    /// Prepares operation `index` on this backup. `image` is the primary's
    /// after-image (absent for a delete); it moves into the operation record
    /// once prepared.
    pub(crate) fn prepare_backup(
        &mut self,
        index: u32,
        key: &[u8],
        image: &mut Option<Section>,
    ) -> Outcome {
        let Ldm {
            memory,
            operations,
            tables,
            ..
        } = self;
        let operation = &operations[index];
        let (kind, row) = (operation.kind, operation.target_row);
        let (layout, partition) = layout_and_partition(tables, operation);
        let image_bytes = image.as_ref().map_or(0, Section::len);
        let has_image = image.is_some();
        assert!(
            has_image == (kind != OperationKind::Delete)
                && (!has_image || image_bytes >= layout.fixed_body_bytes),
            "backup {}: {kind:?} at row {row} came with a malformed after-image",
            index
        );

        if partition.is_occupied(memory, row) {
            self.prepare_backup_on_held_row(index, image)
        } else {
            self.place_backup_insert(index, key, image)
        }
    }

    /// The row id holds a row here: queue behind whatever holds it, and
    /// once granted keep the primary's image (or delete) for commit. For
    /// an insert, the row there is the previous one at this id (a delete
    /// not yet completed here); for an update or delete, the row itself.
    fn prepare_backup_on_held_row(&mut self, index: u32, image: &mut Option<Section>) -> Outcome {
        let Ldm {
            memory,
            operations,
            tables,
            ..
        } = self;
        let operation = &operations[index];
        let (kind, row) = (operation.kind, operation.target_row);
        let (_, partition) = layout_and_partition(tables, operation);
        let held_by_others = partition.op_link(memory, row) != NIL;
        if kind == OperationKind::Insert {
            assert!(
                held_by_others,
                "backup: the primary placed a new row at {row}, which holds an unlocked row here (replicas diverged)"
            );
            return wait_on_row(operations, memory, partition, row, index);
        }
        if !can_grant(operations, memory, partition, row, index) {
            return wait_on_row(operations, memory, partition, row, index);
        }
        append_to_row(operations, memory, partition, row, index);
        operations[index].granted = true;
        let image_kind = if kind == OperationKind::Delete {
            ImageKind::Deleted
        } else {
            ImageKind::Row
        };
        self.keep_prepared(index, row, None, image.take(), image_kind)
    }

    /// The row id is free here: only an insert may come, placed at
    /// exactly that id with the primary's image, and indexed.
    fn place_backup_insert(
        &mut self,
        index: u32,
        key: &[u8],
        image: &mut Option<Section>,
    ) -> Outcome {
        let Ldm {
            memory,
            operations,
            tables,
            ..
        } = self;
        let operation = &operations[index];
        let (kind, row, hash) = (operation.kind, operation.target_row, operation.hash);
        let (layout, partition) = layout_and_partition(tables, operation);
        assert!(
            kind == OperationKind::Insert,
            "backup: {kind:?} of row {row}, which does not exist here (replicas diverged)"
        );
        let image_section = image.take().expect("an insert carries its after-image");
        match partition.reserve_row_at(memory, row) {
            Ok(()) => {}
            Err(AllocAtError::OutOfMemory) => return Outcome::Failed(ErrorCode::TableFull),
            Err(other) => panic!("backup: cannot place row {row}: {other:?} (replicas diverged)"),
        }
        if partition
            .fill_reserved_row(
                memory,
                layout,
                row,
                image_section.as_slice(),
                hash.index_hash(),
            )
            .is_err()
        {
            return Outcome::Failed(ErrorCode::TableFull);
        }
        debug_assert!(
            layout.key_matches(partition.view(memory, layout, row), key),
            "backup: the after-image does not hold the operation's key"
        );
        debug_assert_eq!(partition.state(memory, row), RowState::Reserved);
        partition.set_op_link(memory, row, index);
        operations[index].prepared_new_row(row, image_section);
        self.list_written(index);
        Outcome::Done {
            data: None,
            released: false,
        }
    }
}
