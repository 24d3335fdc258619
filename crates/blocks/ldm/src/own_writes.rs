//! What a transaction's own scans see of its uncommitted writes (design
//! 0035): a row it inserted or updated as it wrote it, a row it deleted
//! not at all, as its key reads already do (`prepare::visible_view`).
//!
//! A prepared write keeps its after-image in its operation record and
//! leaves the row, the hash index and the ordered indexes as committed
//! until commit. A full scan visits every slot, so it finds the rows it
//! must show differently through their lock queues. An index scan walks
//! entries placed by committed keys, and a row the transaction inserted,
//! or updated so that its key in the index changed, is not where the
//! transaction's image puts it. So every operation prepared with a row
//! image is also on its transaction's list of written rows at this ldm,
//! from prepare to its release (its head found by transaction id): an
//! index scan for a transaction looks through that list, its own writes
//! only, for the rows it must place itself. The list costs a write two
//! links at prepare and two at release, and its transaction's first and
//! last a map entry.

use crate::locks::latest_image_of_transaction;
use crate::operation::{ImageKind, OpState, OperationPool, NIL};
use crate::Ldm;
use rowstore::{PageMemory, Partition, RowLayout, RowView};
use signal::TransactionId;

/// What a transaction's own prepared writes make of one row.
pub(crate) enum Own<'a> {
    /// Nothing of its own: the row as committed.
    Committed,
    /// Its delete: no row.
    Deleted,
    /// Its insert or update: the image operation `operation` holds.
    Row { operation: u32, view: RowView<'a> },
}

/// `transaction_id`'s latest image of `row` while it is prepared
/// (`Committed` when the transaction wrote nothing there, or the row has
/// no lock queue at all, which costs one header read; also once that
/// image is installed: a backup keeps the committed record, without its
/// image, until COMPLETE).
#[inline]
pub(crate) fn own_row<'a>(
    operations: &'a OperationPool,
    memory: &PageMemory,
    layout: &RowLayout,
    partition: &Partition,
    row: u32,
    transaction_id: TransactionId,
) -> Own<'a> {
    match latest_image_of_transaction(operations, memory, partition, row, transaction_id) {
        Some(latest) if operations[latest].state == OpState::Prepared => {
            match operations[latest].image_kind {
                ImageKind::Deleted => Own::Deleted,
                _ => Own::Row {
                    operation: latest,
                    view: prepared_image(operations, layout, latest),
                },
            }
        }
        _ => Own::Committed,
    }
}

/// The after-image prepared operation `operation` keeps.
pub(crate) fn prepared_image<'a>(
    operations: &'a OperationPool,
    layout: &RowLayout,
    operation: u32,
) -> RowView<'a> {
    layout.image_view(
        operations[operation]
            .image
            .as_ref()
            .expect("a prepared write keeps its image")
            .as_slice(),
    )
}

/// The operations on a transaction's list of written rows, from `head`.
pub(crate) fn written<'a>(
    operations: &'a OperationPool,
    head: u32,
) -> impl Iterator<Item = u32> + 'a {
    let mut current = head;
    std::iter::from_fn(move || {
        if current == NIL {
            return None;
        }
        let this = current;
        current = operations[this].written_next;
        Some(this)
    })
}

impl Ldm {
    /// The head of `transaction_id`'s list of written rows here, or NIL.
    pub(crate) fn written_head(&self, transaction_id: TransactionId) -> u32 {
        if transaction_id.0 == u64::MAX {
            // The map's reserved key: no transaction has it (its API node
            // would be 65535), whatever a request names.
            return NIL;
        }
        self.written_by_transaction
            .get(transaction_id.0)
            .unwrap_or(NIL)
    }

    /// Puts operation `index`, just prepared with a row image, at the head
    /// of its transaction's list of written rows.
    pub(crate) fn list_written(&mut self, index: u32) {
        let operation = &self.operations[index];
        assert!(
            !operation.written_listed && operation.image_kind == ImageKind::Row,
            "operation {index}: listed as written twice, or without a row image"
        );
        let transaction_id = operation.transaction_id;
        let head = self.written_head(transaction_id);
        if head != NIL {
            self.operations[head].written_prev = index;
        }
        let operation = &mut self.operations[index];
        operation.written_next = head;
        operation.written_prev = NIL;
        operation.written_listed = true;
        self.written_by_transaction
            .insert(transaction_id.0, index)
            .expect(
                "a transaction with a listed operation has one entry: no more than the records",
            );
    }

    /// Takes operation `index` off its transaction's list of written rows,
    /// if it is on it (at its release).
    pub(crate) fn unlist_written(&mut self, index: u32) {
        let operation = &self.operations[index];
        if !operation.written_listed {
            return;
        }
        let (prev, next) = (operation.written_prev, operation.written_next);
        let transaction_id = operation.transaction_id;
        if prev == NIL {
            assert_eq!(
                self.written_head(transaction_id),
                index,
                "operation {index}: first on no list of written rows"
            );
            if next == NIL {
                self.written_by_transaction.remove(transaction_id.0);
            } else {
                self.written_by_transaction
                    .insert(transaction_id.0, next)
                    .expect("replaces the transaction's entry");
            }
        } else {
            self.operations[prev].written_next = next;
        }
        if next != NIL {
            self.operations[next].written_prev = prev;
        }
        let operation = &mut self.operations[index];
        operation.written_prev = NIL;
        operation.written_next = NIL;
        operation.written_listed = false;
    }
}
