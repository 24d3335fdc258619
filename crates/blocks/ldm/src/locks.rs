//! Row locks and the end of an operation's life: COMMIT, COMPLETE, ABORT.
//!
//! A row's lock queue is the chain of operation records starting at the
//! row header's `op_link`, in arrival order; each record is granted or
//! waiting. Several operations of one transaction on one row are granted
//! together (they see each other's after-images); other transactions wait
//! in FIFO order. When a granted operation leaves the queue, every waiting
//! one is run again from the start (a fresh index lookup), so a wait that
//! ends in a delete or an aborted insert needs no special case. Deadlocks
//! end by the tc's lock-wait timeout (docs/design/transactions.md §8).

use crate::operation::{ImageKind, OpState, OperationPool, NIL};
use crate::page_memory::PageMemory;
use crate::partition::{Partition, RowState};
use crate::{layout_and_partition, Ldm};
use kernel::{send, Context};
use signal::signals::{
    AbortConf, AbortReq, CommitConf, CommitReq, CompleteConf, CompleteReq, LockMode, OperationKind,
};
use signal::{BlockRef, TransactionId};
use storage::redo::{Change, Operation as RedoOperation};

/// Appends operation `index` to row `row`'s lock queue.
pub(crate) fn append_to_row(
    operations: &mut OperationPool,
    memory: &mut PageMemory,
    partition: &Partition,
    row: u32,
    index: u32,
) {
    operations[index].next_in_row = NIL;
    operations[index].row = row;
    let head = partition.op_link(memory, row);
    if head == NIL {
        partition.set_op_link(memory, row, index);
        return;
    }
    let mut last = head;
    while operations[last].next_in_row != NIL {
        last = operations[last].next_in_row;
    }
    operations[last].next_in_row = index;
}

/// Queues operation `index` on `row`'s lock: it runs again when the lock
/// queue moves.
pub(crate) fn wait_on_row(
    operations: &mut OperationPool,
    memory: &mut PageMemory,
    partition: &Partition,
    row: u32,
    index: u32,
) -> crate::prepare::Outcome {
    append_to_row(operations, memory, partition, row, index);
    let operation = &mut operations[index];
    operation.granted = false;
    operation.state = OpState::Waiting;
    crate::prepare::Outcome::Waiting
}

/// Whether operation `index` may be granted on `row` now.
pub(crate) fn can_grant(
    operations: &OperationPool,
    memory: &PageMemory,
    partition: &Partition,
    row: u32,
    index: u32,
) -> bool {
    let requester = &operations[index];
    let exclusive = requester.lock == LockMode::Exclusive;
    let mut own_lock_held = false;
    let mut current = partition.op_link(memory, row);
    while current != NIL {
        let holder = &operations[current];
        if holder.transaction_id == requester.transaction_id {
            if !holder.granted {
                // Keep this transaction's operations in order.
                return false;
            }
            own_lock_held = true;
        } else if holder.granted {
            if exclusive || holder.lock == LockMode::Exclusive {
                return false;
            }
        } else if !own_lock_held {
            // Another transaction waits ahead of us: first come, first served.
            return false;
        }
        current = holder.next_in_row;
    }
    true
}

/// The last granted operation of `transaction_id` on `row` that has an
/// after-image (row or delete).
pub(crate) fn latest_image_of_transaction(
    operations: &OperationPool,
    memory: &PageMemory,
    partition: &Partition,
    row: u32,
    transaction_id: TransactionId,
) -> Option<u32> {
    let mut latest = None;
    let mut current = partition.op_link(memory, row);
    while current != NIL {
        let operation = &operations[current];
        if operation.granted
            && operation.transaction_id == transaction_id
            && operation.image_kind != ImageKind::None
        {
            latest = Some(current);
        }
        current = operation.next_in_row;
    }
    latest
}

impl Ldm {
    /// Takes operation `index` out of its row's lock queue. When no granted
    /// operation remains, a Reserved row (aborted insert, committed delete)
    /// is freed; waiting operations go to the restart queue.
    pub(crate) fn release_from_row(&mut self, index: u32) {
        let Ldm {
            memory,
            operations,
            tables,
            restart,
            ..
        } = self;
        let operation = &operations[index];
        let row = operation.row;
        if row == NIL {
            return;
        }
        let hash = operation.hash;
        let (layout, partition) = layout_and_partition(tables, operation);
        // Unlink `index` and every waiter; keep the other granted ones.
        let mut current = partition.op_link(memory, row);
        let mut kept_head = NIL;
        let mut kept_tail = NIL;
        while current != NIL {
            let next = operations[current].next_in_row;
            operations[current].next_in_row = NIL;
            if current == index {
                operations[current].row = NIL;
                operations[current].granted = false;
            } else if !operations[current].granted {
                operations[current].row = NIL;
                let pushed_within_capacity = restart.len() < restart.capacity();
                assert!(
                    pushed_within_capacity,
                    "restart queue is sized to the operation pool"
                );
                restart.push_back(current);
            } else {
                if kept_head == NIL {
                    kept_head = current;
                } else {
                    operations[kept_tail].next_in_row = current;
                }
                kept_tail = current;
            }
            current = next;
        }
        partition.set_op_link(memory, row, kept_head);
        if kept_head == NIL && partition.state(memory, row) == RowState::Reserved {
            partition.index.remove(memory, hash.index_hash(), row);
            partition.free_row(memory, layout, row, None);
        }
    }

    /// COMMIT, from the tc at the last replica or from the next replica:
    /// install the after-image and stamp the GCI, then pass the commit to
    /// the previous replica; the primary, last to commit, releases its lock
    /// and tells the tc (docs/design/transactions.md §4). Backups keep their
    /// locks until COMPLETE.
    pub(crate) fn commit(&mut self, from: BlockRef, request: CommitReq, ctx: &mut dyn Context) {
        let index = request.ldm_op;
        assert!(
            self.operations.is_live(index)
                && self.operations[index].transaction_id == request.transaction_id
                && self.operations[index].tc_op == request.tc_op
                && self.operations[index].state == OpState::Prepared,
            "{from} committed operation {index} that ldm {} does not hold prepared for it",
            self.address
        );
        let gci = request.gci.0;
        // An LCP scanning now may reflect this change (`lcp.rs`).
        self.lcp.highest_committed_gci = self.lcp.highest_committed_gci.max(gci);
        {
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
            let (layout, partition) = layout_and_partition(tables, operation);
            let row = operation.row;
            // Only the transaction's last writer on the row installs: its
            // image already includes the earlier ones.
            let mut later_writer = false;
            let mut current = operation.next_in_row;
            while current != NIL {
                let other = &operations[current];
                if other.granted
                    && other.transaction_id == operation.transaction_id
                    && other.image_kind != ImageKind::None
                {
                    later_writer = true;
                }
                current = other.next_in_row;
            }
            let new_var = operation.new_var;
            let logged = match operation.image_kind {
                ImageKind::None => None,
                _ if later_writer => {
                    if new_var != NIL {
                        partition.free_var(memory, new_var);
                    }
                    None
                }
                ImageKind::Row => {
                    let image = operation
                        .image
                        .as_ref()
                        .expect("row image kept until commit");
                    partition.write_image(memory, layout, row, image.as_slice(), new_var);
                    partition.commit_row(memory, layout, row, gci);
                    lcp.changed_row_bytes += image.len() as u64;
                    let kind = if operation.kind == OperationKind::Insert {
                        RedoOperation::Insert
                    } else {
                        RedoOperation::Update
                    };
                    Some(kind)
                }
                ImageKind::Deleted => {
                    partition
                        .index
                        .remove(memory, operation.hash.index_hash(), row);
                    // The deleted image leaves the live data: that many bytes changed.
                    let live_before = partition.live_bytes();
                    partition.mark_deleted(memory, layout, row, gci);
                    lcp.changed_row_bytes += live_before - partition.live_bytes();
                    Some(RedoOperation::Delete)
                }
            };
            if logged.is_some() {
                // The partition's next LCP cannot reuse the newest one's files.
                partition.lcp.changes += 1;
            }
            // The change goes to the redo log on every replica, in commit
            // order; nothing waits for it to reach disk
            // (docs/design/durability.md §3).
            if let (Some(kind), Some(redo)) = (logged, redo.as_mut()) {
                let (part_index, _) = operation
                    .redo_reservation
                    .expect("a write on an ldm with a redo log reserved room at prepare");
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
                let change = Change {
                    gci,
                    table: operation.table_id,
                    partition: operation.partition,
                    row_id: row,
                    operation: kind,
                    key: key.as_slice(),
                    image,
                };
                redo.append(part_index, &change, *address, ctx);
            }
            let operation = &mut operations[index];
            operation.new_var = NIL;
            operation.image = None;
            operation.key = None;
        }
        self.release_redo_reservation(index);
        let operation = &self.operations[index];
        let (position, previous_op, tc) = (operation.position, operation.previous_op, operation.tc);
        if position == 0 {
            self.release_from_row(index);
        }
        self.operations[index].state = OpState::Committed { gci };
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

    /// COMPLETE, from the tc at the last replica or from the next replica:
    /// a backup releases its lock; every replica frees its record and
    /// passes the complete up the chain; the primary tells the tc.
    pub(crate) fn complete(&mut self, from: BlockRef, request: CompleteReq, ctx: &mut dyn Context) {
        let index = request.ldm_op;
        assert!(
            self.operations.is_live(index)
                && self.operations[index].transaction_id == request.transaction_id
                && self.operations[index].tc_op == request.tc_op
                && matches!(self.operations[index].state, OpState::Committed { .. }),
            "{from} completed operation {index} that ldm {} does not hold committed for it",
            self.address
        );
        let operation = &self.operations[index];
        let (position, previous_op, tc) = (operation.position, operation.previous_op, operation.tc);
        let previous =
            (position > 0).then(|| operation.replica_ldm(position - 1, self.address.instance));
        if position > 0 {
            self.release_from_row(index);
        }
        self.release_operation(index);
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

    /// Drops a prepared or waiting operation: its reserved var slot, its
    /// place in the lock queue (an inserted row it alone held is freed).
    pub(crate) fn undo_prepare(&mut self, index: u32) {
        let new_var = self.operations[index].new_var;
        if new_var != NIL {
            let Ldm {
                memory,
                operations,
                tables,
                ..
            } = self;
            let operation = &mut operations[index];
            operation.new_var = NIL;
            let (_, partition) = layout_and_partition(tables, operation);
            partition.free_var(memory, new_var);
        }
        self.release_from_row(index);
    }

    /// ABORT, from the tc at the primary or from the previous replica: undo
    /// the operation here; if it had been passed on, pass the abort on too
    /// (it follows the prepare on the same link, so it never overtakes it);
    /// otherwise this is the end of the chain and the tc hears ABORTCONF.
    pub(crate) fn abort(&mut self, from: BlockRef, request: AbortReq, ctx: &mut dyn Context) {
        let mut next = None;
        if let Some(index) = self.operations.find_by_tc(request.tc, request.tc_op) {
            let operation = &self.operations[index];
            assert_eq!(
                operation.transaction_id, request.transaction_id,
                "{from} aborted operation {} of {} with another transaction id",
                request.tc_op, request.tc
            );
            match operation.state {
                OpState::Waiting | OpState::Prepared => {
                    if operation.forwarded {
                        next = Some(
                            operation.replica_ldm(operation.position + 1, self.address.instance),
                        );
                    }
                    self.undo_prepare(index);
                    self.release_operation(index);
                }
                OpState::Committed { .. } => {
                    panic!(
                        "{from} aborted operation {} of {} after committing it",
                        request.tc_op, request.tc
                    )
                }
                OpState::Free => unreachable!("find_by_tc returns only live records"),
            }
        }
        match next {
            Some(next) => send(ctx, self.address, next, request),
            None => send(
                ctx,
                self.address,
                request.tc,
                AbortConf {
                    tc_op: request.tc_op,
                },
            ),
        }
    }
}
