//! COMMIT and COMPLETE along the replica chain
//! (docs/design/transactions.md §4, §5): at COMMIT each replica installs
//! the after-image it kept since prepare and stamps the GCI, appends the
//! change to its redo log, and passes the commit up the chain; the primary,
//! last to commit, releases its lock and confirms to the tc. COMPLETE then
//! runs the same way, releasing the backups' locks and every replica's
//! operation record.

use crate::locks::has_later_writer;
use crate::operation::{ImageKind, OpState, Operation, OperationPool, NIL};
use crate::{layout_and_partition_state, Ldm};
use kernel::{send, Context, Report};
use rowstore::{PageMemory, Partition, RowLayout};
use signal::signals::{CommitConf, CommitReq, CompleteConf, CompleteReq, OperationKind};
use signal::BlockRef;
use storage::redo::{Change, Operation as RedoOperation};

impl Ldm {
    /// COMMIT, from the tc at the last replica or from the next replica:
    /// install the after-image and stamp the GCI, then pass the commit to
    /// the previous replica; the primary, last to commit, releases its lock
    /// and tells the tc (docs/design/transactions.md §4). Backups keep their
    /// locks until COMPLETE.
    pub(crate) fn commit(&mut self, from: BlockRef, request: CommitReq, ctx: &mut dyn Context) {
        let index = request.ldm_op;
        if !self.holds(index, &request.transaction_id, request.tc_op, |state| {
            state == OpState::Prepared
        }) {
            // A peer's word, not this ldm's state: after a failure a
            // resolve or a take-over may have finished the operation here
            // first (docs/design/failures.md §6, §7).
            ctx.report(Report::Log(format!(
                "ldm {}: ignored COMMIT of operation {index} from {from}: not held prepared                  for transaction {:?} operation {}",
                self.address, request.transaction_id, request.tc_op
            )));
            return;
        }
        self.commit_here(index, request.gci.0, ctx);
        let operation = &self.operations[index];
        let (position, previous_op, tc) = (operation.position, operation.previous_op, operation.tc);
        if position > 0 {
            let previous = self.operations[index].replica_ldm(position - 1, self.address.instance);
            let forward = CommitReq {
                ldm_op: previous_op,
                ..request
            };
            send(ctx, self.address, previous, forward);
        } else {
            send(
                ctx,
                self.address,
                tc,
                CommitConf {
                    tc_op: request.tc_op,
                },
            );
        }
    }

    /// Whether record `index` is in use for operation `tc_op` of
    /// `transaction_id`, in a state `wanted` accepts.
    fn holds(
        &self,
        index: u32,
        transaction_id: &signal::TransactionId,
        tc_op: u32,
        wanted: impl Fn(OpState) -> bool,
    ) -> bool {
        self.operations.is_live(index) && {
            let operation = &self.operations[index];
            operation.transaction_id == *transaction_id
                && operation.tc_op == tc_op
                && wanted(operation.state)
        }
    }

    /// Commits prepared operation `index` on this replica at `gci`: its
    /// image installed and logged, its redo room used, and the lock
    /// released if this is the primary (backups keep theirs until
    /// COMPLETE).
    pub(crate) fn commit_here(&mut self, index: u32, gci: u64, ctx: &mut dyn Context) {
        // An LCP scanning now may reflect this change (`lcp`).
        self.lcp.highest_committed_gci = self.lcp.highest_committed_gci.max(gci);
        self.install_and_log(index, gci, ctx);
        self.release_redo_reservation(index);
        if self.operations[index].position == 0 {
            self.release_from_row(index);
        }
        self.operations[index].state = OpState::Committed { gci };
    }

    /// Completes committed operation `index` on this replica: a backup
    /// releases its lock, and the record is freed.
    pub(crate) fn complete_here(&mut self, index: u32) {
        if self.operations[index].position > 0 {
            self.release_from_row(index);
        }
        self.release_operation(index);
    }

    /// Installs operation `index`'s after-image (or delete) at `gci` and
    /// appends the change to its partition's redo part, in commit order;
    /// nothing waits for it to reach disk (docs/design/durability.md §3).
    /// The record keeps no image, key or var slot after.
    fn install_and_log(&mut self, index: u32, gci: u64, ctx: &mut dyn Context) {
        if self.operations[index].applier {
            return self.apply_by_row_id(index, gci, ctx);
        }
        let Ldm {
            memory,
            operations,
            tables,
            redo,
            address,
            lcp,
            ..
        } = self;
        let operation = &operations[index];
        let (layout, partition) = layout_and_partition_state(tables, operation);
        let changed = &mut lcp.changed_row_bytes;
        let logged = install(
            operations,
            memory,
            layout,
            &mut partition.store,
            changed,
            index,
            gci,
        );
        if logged.is_some() {
            // The partition's next LCP cannot reuse the newest one's files.
            partition.lcp.changes += 1;
        }
        let operation = &operations[index];
        if let (Some(kind), Some(redo)) = (logged, redo.as_mut()) {
            let (part_index, _) = operation
                .redo_reservation
                .expect("a write on an ldm with a redo log reserved room at prepare");
            redo.append(
                part_index,
                &redo_change(operation, kind, gci),
                *address,
                ctx,
            );
        }
        let operation = &mut operations[index];
        operation.new_var = NIL;
        operation.index_nodes = 0;
        operation.image = None;
        operation.key = None;
    }

    /// Installs a write at a restarting node's partition being copied
    /// (`copy`): by row id, whatever the slot holds (the row there
    /// replaced, or removed for a delete), logging nothing.
    fn apply_by_row_id(&mut self, index: u32, gci: u64, ctx: &mut dyn Context) {
        let operation = &mut self.operations[index];
        let (table, partition, row) = (
            operation.table_id,
            operation.partition,
            operation.target_row,
        );
        let image = operation.image.take();
        let key = operation.key.take();
        let result = match (operation.image_kind, &image) {
            (ImageKind::Deleted, _) => self.restore_remove_row(table, partition, row, gci),
            (ImageKind::Row, Some(image)) => self.restore_put_row(
                table,
                partition,
                row,
                gci,
                image.as_slice(),
                key.as_ref().map(|key| key.as_slice()),
            ),
            (kind, _) => Err(format!(
                "a write to apply of kind {kind:?} without its image"
            )),
        };
        if let Err(error) = result {
            ctx.fatal(format!(
                "ldm {}: node restart: cannot apply a write to table {table} partition \
                 {partition} row {row}: {error}",
                self.address
            ));
        }
        if let Some(state) = self.tables[table as usize]
            .as_mut()
            .and_then(|table| table.partitions[partition as usize].as_mut())
        {
            state.lcp.changes += 1;
        }
    }

    /// COMPLETE, from the tc at the last replica or from the next replica:
    /// a backup releases its lock; every replica frees its record and
    /// passes the complete up the chain; the primary tells the tc.
    pub(crate) fn complete(&mut self, from: BlockRef, request: CompleteReq, ctx: &mut dyn Context) {
        let index = request.ldm_op;
        if !self.holds(index, &request.transaction_id, request.tc_op, |state| {
            matches!(state, OpState::Committed { .. })
        }) {
            ctx.report(Report::Log(format!(
                "ldm {}: ignored COMPLETE of operation {index} from {from}: not held committed                  for transaction {:?} operation {}",
                self.address, request.transaction_id, request.tc_op
            )));
            return;
        }
        let operation = &self.operations[index];
        let (position, previous_op, tc) = (operation.position, operation.previous_op, operation.tc);
        let previous =
            (position > 0).then(|| operation.replica_ldm(position - 1, self.address.instance));
        self.complete_here(index);
        match previous {
            Some(previous) => {
                let forward = CompleteReq {
                    ldm_op: previous_op,
                    ..request
                };
                send(ctx, self.address, previous, forward);
            }
            None => send(
                ctx,
                self.address,
                tc,
                CompleteConf {
                    tc_op: request.tc_op,
                },
            ),
        }
    }
}

/// Installs operation `index`'s after-image in its row at `gci`, or marks
/// the row deleted, and counts the changed bytes; says what the redo log
/// records (`None`: nothing changed here). Only the transaction's last
/// writer on the row installs: its image already includes the earlier
/// ones, whose reserved var slots go back.
fn install(
    operations: &mut OperationPool,
    memory: &mut PageMemory,
    layout: &RowLayout,
    partition: &mut Partition,
    changed_row_bytes: &mut u64,
    index: u32,
    gci: u64,
) -> Option<RedoOperation> {
    let operation = &operations[index];
    let row = operation.row;
    let new_var = operation.new_var;
    match operation.image_kind {
        ImageKind::None => None,
        _ if has_later_writer(operations, index) => {
            if new_var != NIL {
                partition.free_var(memory, new_var);
            }
            partition.release_index_promise(memory, operation.index_nodes);
            None
        }
        ImageKind::Row => {
            supersede_earlier_writers(operations, memory, partition, index);
            let operation = &operations[index];
            let image = operation
                .image
                .as_ref()
                .expect("row image kept until commit");
            partition.write_image(memory, layout, row, image.as_slice(), new_var);
            partition.commit_row(memory, layout, row, gci, operation.index_nodes);
            *changed_row_bytes += image.len() as u64;
            if operation.kind == OperationKind::Insert {
                Some(RedoOperation::Insert)
            } else {
                Some(RedoOperation::Update)
            }
        }
        ImageKind::Deleted => {
            supersede_earlier_writers(operations, memory, partition, index);
            let operation = &operations[index];
            partition
                .index
                .remove(memory, operation.hash.index_hash(), row);
            // The deleted image leaves the live data: that many bytes changed.
            let live_before = partition.live_bytes();
            partition.mark_deleted(memory, layout, row, gci);
            *changed_row_bytes += live_before - partition.live_bytes();
            Some(RedoOperation::Delete)
        }
    }
}

/// Operation `index` installs its image: earlier writes of its
/// transaction to the row that have not committed here yet are included
/// in it, and must install nothing when their COMMIT comes. Normally it
/// comes first (the tc commits them in order on the same links), but a
/// replica chain that changed between the writes (a node restart's copy
/// joining) can deliver a later write's COMMIT to the primary first, where
/// a committed operation leaves the row's queue at once, so
/// `has_later_writer` would no longer see it. They give back their var
/// slot and index promise now and keep no image.
fn supersede_earlier_writers(
    operations: &mut OperationPool,
    memory: &mut PageMemory,
    partition: &mut Partition,
    index: u32,
) {
    let (row, transaction_id) = (operations[index].row, operations[index].transaction_id);
    let mut current = partition.op_link(memory, row);
    while current != NIL && current != index {
        let earlier = &mut operations[current];
        let next = earlier.next_in_row;
        if earlier.transaction_id == transaction_id
            && earlier.granted
            && earlier.image_kind != ImageKind::None
            && earlier.state == OpState::Prepared
        {
            if earlier.new_var != NIL {
                partition.free_var(memory, earlier.new_var);
                earlier.new_var = NIL;
            }
            partition.release_index_promise(memory, earlier.index_nodes);
            earlier.index_nodes = 0;
            earlier.image_kind = ImageKind::None;
            earlier.image = None;
        }
        current = next;
    }
}

/// The redo record of `operation`'s committed change of `kind` at `gci`:
/// the row id, its key and the full after-image (none for a delete).
fn redo_change(operation: &Operation, kind: RedoOperation, gci: u64) -> Change<'_> {
    let key = operation
        .key
        .as_ref()
        .expect("a write keeps its key until commit for the redo log");
    let image = match kind {
        RedoOperation::Delete => &[][..],
        _ => operation
            .image
            .as_ref()
            .map_or(&[][..], |image| image.as_slice()),
    };
    Change {
        gci,
        table: operation.table_id,
        partition: operation.partition,
        row_id: operation.row,
        operation: kind,
        key: key.as_slice(),
        image,
    }
}
