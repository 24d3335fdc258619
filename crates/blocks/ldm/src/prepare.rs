//! LQHKEYREQ: find the row by key, take or queue for its lock, and build the
//! operation's after-image (docs/design/transactions.md §3). The row itself
//! is not changed; a prepared insert takes an invisible (Reserved) slot.

use crate::layout::{RowLayout, RowView};
use crate::locks::{append_to_row, can_grant, latest_image_of_transaction, wait_on_row};
use crate::operation::{ImageKind, OpState, NIL};
use crate::partition::RowState;
use crate::{layout_and_partition, Ldm};
use kernel::{send, Context};
use signal::signals::{LockMode, LqhKeyConf, LqhKeyRef, LqhKeyReq, OperationKind};
use signal::{ErrorCode, Section, SectionPool};

/// The result of one attempt to prepare an operation.
pub(crate) enum Outcome {
    /// Prepared (or, for a committed read, done and released).
    Done {
        data: Option<Section>,
        released: bool,
    },
    /// Queued on a row lock; runs again when the lock queue moves.
    Waiting,
    /// Failed; the operation holds nothing.
    Failed(ErrorCode),
}

fn encode_read(
    layout: &RowLayout,
    view: RowView<'_>,
    projection: &[u8],
    pool: &'static SectionPool,
) -> Result<Section, ErrorCode> {
    let mut section = pool
        .alloc(layout.read_max_bytes)
        .ok_or(ErrorCode::OutOfSignalMemory)?;
    let used = layout.encode_read(view, projection, section.as_mut_slice())?;
    section.set_len(used);
    Ok(section)
}

impl Ldm {
    /// Runs (or re-runs, after a lock wait) operation `index`; once it is
    /// prepared, passes it to the next replica or, on the last replica,
    /// answers the tc.
    pub(crate) fn execute(&mut self, index: u32, ctx: &mut dyn Context) {
        let outcome = self.try_prepare(index, ctx.pool());
        let operation = &self.operations[index];
        let (tc, tc_op) = (operation.tc, operation.tc_op);
        match outcome {
            Outcome::Waiting => {}
            Outcome::Done { data, released } => {
                if !self.operations[index].is_last_replica() {
                    return self.forward_prepare(index, ctx);
                }
                send(
                    ctx,
                    self.address,
                    tc,
                    LqhKeyConf {
                        tc_op,
                        ldm_op: index,
                        data,
                        released,
                    },
                );
                if released {
                    self.release_operation(index);
                }
            }
            Outcome::Failed(error) => {
                send(ctx, self.address, tc, LqhKeyRef { tc_op, error });
                self.release_operation(index);
            }
        }
    }

    /// Passes a prepared write to the next replica: the row id this replica
    /// used and the full after-image, so the backup places exactly this row.
    fn forward_prepare(&mut self, index: u32, ctx: &mut dyn Context) {
        let operation = &self.operations[index];
        let kind = match operation.image_kind {
            ImageKind::Deleted => OperationKind::Delete,
            ImageKind::Row if operation.new_row => OperationKind::Insert,
            ImageKind::Row => OperationKind::Update,
            ImageKind::None => unreachable!("reads run on the primary only"),
        };
        let image = match (&operation.image, kind) {
            (_, OperationKind::Delete) => None,
            (Some(image), _) => match ctx.pool().copy_from(image.as_slice()) {
                Some(copy) => Some(copy),
                None => {
                    // No section for the copy: undo here and refuse; the
                    // tc aborts the transaction.
                    let (tc, tc_op) = (operation.tc, operation.tc_op);
                    self.undo_prepare(index);
                    self.release_operation(index);
                    let error = ErrorCode::OutOfSignalMemory;
                    return send(ctx, self.address, tc, LqhKeyRef { tc_op, error });
                }
            },
            (None, _) => unreachable!("a row write keeps its after-image until commit"),
        };
        let operation = &self.operations[index];
        // The next replica gets a copy: this one keeps its key for the redo
        // record it writes at commit.
        let key = operation
            .key
            .as_ref()
            .expect("a write keeps its key until commit");
        let Some(key) = ctx.pool().copy_from(key.as_slice()) else {
            let (tc, tc_op) = (operation.tc, operation.tc_op);
            self.undo_prepare(index);
            self.release_operation(index);
            let error = ErrorCode::OutOfSignalMemory;
            return send(ctx, self.address, tc, LqhKeyRef { tc_op, error });
        };
        let operation = &mut self.operations[index];
        operation.forwarded = true;
        let next = operation.replica_ldm(operation.position + 1, self.address.instance);
        let request = LqhKeyReq {
            tc: operation.tc,
            tc_op: operation.tc_op,
            chain: operation.chain,
            position: operation.position + 1,
            row_id: operation.row,
            previous_op: index,
            transaction_id: operation.transaction_id,
            kind,
            lock: LockMode::Exclusive,
            table_id: operation.table_id,
            partition: operation.partition,
            hash: operation.hash,
            key,
            attr: image,
        };
        send(ctx, self.address, next, request);
    }

    fn try_prepare(&mut self, index: u32, pool: &'static SectionPool) -> Outcome {
        let key = self.operations[index]
            .key
            .take()
            .expect("key section kept until prepared");
        let mut attr = self.operations[index].attr.take();
        let outcome = if self.operations[index].position == 0 {
            let changes = attr.as_ref().map_or(&[][..], Section::as_slice);
            self.prepare_with(index, key.as_slice(), changes, pool)
        } else {
            self.prepare_backup(index, key.as_slice(), &mut attr)
        };
        let operation = &mut self.operations[index];
        match outcome {
            // Needed again when the lock is granted.
            Outcome::Waiting => {
                operation.key = Some(key);
                operation.attr = attr;
            }
            // A write keeps its key: the next replica gets a copy, and the
            // redo record at commit needs it.
            Outcome::Done { .. } if operation.image_kind != ImageKind::None => {
                operation.key = Some(key)
            }
            _ => {}
        }
        outcome
    }

    fn prepare_with(
        &mut self,
        index: u32,
        key: &[u8],
        changes: &[u8],
        pool: &'static SectionPool,
    ) -> Outcome {
        let Ldm {
            memory,
            operations,
            tables,
            ..
        } = self;
        let operation = &operations[index];
        let (kind, lock, transaction_id, hash) = (
            operation.kind,
            operation.lock,
            operation.transaction_id,
            operation.hash,
        );
        let (layout, partition) = layout_and_partition(tables, operation);
        let found = partition.index.lookup(memory, hash.index_hash(), |row| {
            partition.state(memory, row) != RowState::Free
                && layout.key_matches(partition.view(memory, layout, row), key)
        });

        if kind == OperationKind::Read && lock == LockMode::CommittedRead {
            let Some(row) = found else {
                return Outcome::Failed(ErrorCode::NoSuchRow);
            };
            let view = match latest_image_of_transaction(
                operations,
                memory,
                partition,
                row,
                transaction_id,
            ) {
                Some(own) if operations[own].image_kind == ImageKind::Deleted => {
                    return Outcome::Failed(ErrorCode::NoSuchRow)
                }
                Some(own) => layout.image_view(
                    operations[own]
                        .image
                        .as_ref()
                        .expect("row image kept")
                        .as_slice(),
                ),
                None if partition.state(memory, row) == RowState::Live => {
                    partition.verify_checksum(memory, layout, row);
                    partition.view(memory, layout, row)
                }
                None => return Outcome::Failed(ErrorCode::NoSuchRow),
            };
            return match encode_read(layout, view, changes, pool) {
                Ok(data) => Outcome::Done {
                    data: Some(data),
                    released: true,
                },
                Err(error) => Outcome::Failed(error),
            };
        }

        let Some(row) = found else {
            return self.prepare_insert_of_absent_key(index, key, changes, pool);
        };

        // The row exists (live, or reserved by some insert): queue for its lock.
        if !can_grant(operations, memory, partition, row, index) {
            return wait_on_row(operations, memory, partition, row, index);
        }
        append_to_row(operations, memory, partition, row, index);
        operations[index].granted = true;

        // What this transaction sees: its own latest image, else the committed row.
        let own = latest_image_of_transaction(operations, memory, partition, row, transaction_id);
        let base: Option<RowView<'_>> = match own {
            Some(own) if operations[own].image_kind == ImageKind::Deleted => None,
            Some(own) => Some(
                layout.image_view(
                    operations[own]
                        .image
                        .as_ref()
                        .expect("row image kept")
                        .as_slice(),
                ),
            ),
            None if partition.state(memory, row) == RowState::Live => {
                partition.verify_checksum(memory, layout, row);
                Some(partition.view(memory, layout, row))
            }
            None => None,
        };
        let result: Result<(Option<Section>, Option<Section>, ImageKind), ErrorCode> =
            match (kind, base) {
                (OperationKind::Read, None)
                | (OperationKind::Update, None)
                | (OperationKind::Delete, None) => Err(ErrorCode::NoSuchRow),
                (OperationKind::Insert, Some(_)) => Err(ErrorCode::DuplicateKey),
                (OperationKind::Read, Some(view)) => encode_read(layout, view, changes, pool)
                    .map(|data| (Some(data), None, ImageKind::None)),
                (OperationKind::Delete, Some(_)) => Ok((None, None, ImageKind::Deleted)),
                (_, base) => build_image(layout, base, key, changes, pool)
                    .map(|image| (None, Some(image), ImageKind::Row)),
            };
        let (data, image, image_kind) = match result {
            Ok(parts) => parts,
            Err(error) => {
                self.release_from_row(index);
                return Outcome::Failed(error);
            }
        };
        // A var part of another size class needs a new var slot, taken now
        // so that commit cannot fail.
        let Ldm {
            memory,
            operations,
            tables,
            ..
        } = self;
        let operation = &operations[index];
        let (layout, partition) = layout_and_partition(tables, operation);
        let new_var = match &image {
            Some(image) => partition.var_slot_for_image(memory, layout, row, image.len()),
            None => Some(NIL),
        };
        let Some(new_var) = new_var else {
            self.release_from_row(index);
            return Outcome::Failed(ErrorCode::TableFull);
        };
        let operation = &mut operations[index];
        operation.row = row;
        operation.image = image;
        operation.image_kind = image_kind;
        operation.new_var = new_var;
        operation.state = OpState::Prepared;
        Outcome::Done {
            data,
            released: false,
        }
    }

    /// Insert or write of a key not in the index: take a Reserved slot,
    /// write the image there (invisible until commit), index it.
    fn prepare_insert_of_absent_key(
        &mut self,
        index: u32,
        key: &[u8],
        changes: &[u8],
        pool: &'static SectionPool,
    ) -> Outcome {
        let Ldm {
            memory,
            operations,
            tables,
            ..
        } = self;
        let operation = &operations[index];
        if !matches!(operation.kind, OperationKind::Insert | OperationKind::Write) {
            return Outcome::Failed(ErrorCode::NoSuchRow);
        }
        let hash = operation.hash;
        let (layout, partition) = layout_and_partition(tables, operation);
        let image = match build_image(layout, None, key, changes, pool) {
            Ok(image) => image,
            Err(error) => return Outcome::Failed(error),
        };
        let Some(row) = partition.reserve_row(memory) else {
            return Outcome::Failed(ErrorCode::TableFull);
        };
        if partition
            .fill_reserved_row(memory, layout, row, image.as_slice(), hash.index_hash())
            .is_err()
        {
            return Outcome::Failed(ErrorCode::TableFull);
        }
        partition.set_op_link(memory, row, index);
        operations[index].prepared_new_row(row, image);
        Outcome::Done {
            data: None,
            released: false,
        }
    }
}

fn build_image(
    layout: &RowLayout,
    base: Option<RowView<'_>>,
    key: &[u8],
    changes: &[u8],
    pool: &'static SectionPool,
) -> Result<Section, ErrorCode> {
    let mut image = pool
        .alloc(layout.image_max_bytes())
        .ok_or(ErrorCode::OutOfSignalMemory)?;
    let used = layout.build_image(image.as_mut_slice(), base, key, changes)?;
    image.set_len(used);
    Ok(image)
}
