//! Row locks: each row's queue of operation records, who may be granted,
//! and leaving the queue (NDB's DBACC lock queues).
//!
//! A row's lock queue is the chain of operation records starting at the
//! row header's `op_link`, in arrival order; each record is granted or
//! waiting. Several operations of one transaction on one row are granted
//! together (they see each other's after-images); other transactions wait
//! in FIFO order. When a granted operation leaves the queue, every waiting
//! one is run again from the start (a fresh index lookup), so a wait that
//! ends in a delete or an aborted insert needs no special case. Deadlocks
//! end by the tc's lock-wait timeout (docs/design/transactions.md §8).
//! Commit (`commit.rs`) and abort (`abort.rs`) leave the queue through
//! `release_from_row`.

use crate::operation::{ImageKind, OpState, OperationPool, NIL};
use crate::{layout_and_partition, Ldm};
use rowstore::{PageMemory, Partition, RowState};
use signal::signals::LockMode;
use signal::TransactionId;

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

/// Whether a granted operation of the same transaction queued after
/// operation `index` on its row has an after-image: then that later one
/// installs at commit (its image includes this one's) and this one does not.
pub(crate) fn has_later_writer(operations: &OperationPool, index: u32) -> bool {
    let operation = &operations[index];
    let mut current = operation.next_in_row;
    while current != NIL {
        let other = &operations[current];
        if other.granted
            && other.transaction_id == operation.transaction_id
            && other.image_kind != ImageKind::None
        {
            return true;
        }
        current = other.next_in_row;
    }
    false
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
}
