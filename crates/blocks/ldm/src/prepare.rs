//! LQHKEYREQ: seize an operation record (and, for a write, room in the redo
//! log), find the row by key, take or queue for its lock, and build the
//! operation's after-image (docs/design/transactions.md §3). The row itself
//! is not changed; a prepared insert takes an invisible (Reserved) slot.
//! Then the prepare goes on to the next replica (`forward_prepare`), or the
//! last replica answers the tc. A backup's prepare is `backup.rs`.

use crate::locks::{append_to_row, can_grant, latest_image_of_transaction, wait_on_row};
use crate::operation::{self, ImageKind, OpState, OperationPool, NIL};
use crate::redo_log::RedoLog;
use crate::{layout_and_partition, Ldm};
use kernel::{send, Context};
use rowstore::{PageMemory, Partition, RowLayout, RowState, RowView};
use signal::attr::AttrIter;
use signal::signals::{LockMode, LqhKeyConf, LqhKeyRef, LqhKeyReq, OperationKind};
use signal::{BlockRef, ErrorCode, Section, SectionPool, TransactionId};

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
    /// LQHKEYREQ, from the tc at the primary or from the previous replica:
    /// seize a record (and, for a write, reserve its redo room), then run
    /// the operation.
    pub(crate) fn lqh_key_req(
        &mut self,
        from: BlockRef,
        mut request: LqhKeyReq,
        ctx: &mut dyn Context,
    ) {
        let Ldm {
            address,
            operations,
            tables,
            redo,
            lcp,
            read_lease_until_ms,
            ..
        } = self;
        let address = *address;
        // Refusals answer the tc, also when the request came from the
        // previous replica.
        let refuse = |ctx: &mut dyn Context, error| {
            let tc_op = request.tc_op;
            send(ctx, address, request.tc, LqhKeyRef { tc_op, error });
        };
        let Some(table) = tables
            .get_mut(request.table_id as usize)
            .and_then(Option::as_mut)
        else {
            return refuse(ctx, ErrorCode::UnknownTable);
        };
        let Some(Some(partition)) = table.partitions.get(request.partition as usize) else {
            return refuse(ctx, ErrorCode::UnknownTable);
        };
        let chain_is_valid = request.position < request.chain.length
            && request.chain.nodes[request.position as usize] == address.node
            && (request.position == 0) == (request.previous_op == operation::NIL);
        assert!(
            chain_is_valid,
            "ldm {address} got LQHKEYREQ from {from} for position {} of chain {:?}",
            request.position, request.chain
        );
        if request.kind == OperationKind::Read && ctx.now_ms() >= *read_lease_until_ms {
            // This node may have been declared failed and its partitions
            // promoted elsewhere (docs/design/failures.md §5).
            return refuse(ctx, ErrorCode::ReadLeaseExpired);
        }
        if request.position == 0 && request.kind != OperationKind::Read {
            // A restarting node being copied to gets every write prepared
            // here from the copy's start on, last in the chain (`copy`).
            if let Some(node) = partition.attached {
                if !request.chain.as_slice().contains(&node) {
                    request.chain = request.chain.appended(node);
                }
            }
        }
        // A write applied by row id at a partition being copied logs
        // nothing (`copy`).
        let applier = request.position > 0 && partition.applying;
        // A write's redo record must find room at commit, which cannot
        // fail: reserve it now, or refuse with a temporary error.
        let mut redo_reservation = None;
        if request.kind != OperationKind::Read && !applier {
            if let Some(redo) = redo.as_mut() {
                let image_max_bytes = table.layout.fixed_body_bytes + table.layout.var_max_bytes;
                let bytes = RedoLog::reservation_bytes(request.key.len(), image_max_bytes);
                let part_index = redo.index_of(partition.redo_part);
                if let Err(error) = redo.reserve(part_index, bytes) {
                    if error == ErrorCode::RedoLogFull {
                        lcp.note_log_full(address, ctx);
                    }
                    return refuse(ctx, error);
                }
                redo_reservation = Some((part_index, bytes));
            }
        }
        let Some(index) = operations.seize(request.tc, request.tc_op) else {
            if let (Some((part_index, bytes)), Some(redo)) = (redo_reservation, redo.as_mut()) {
                redo.release(part_index, bytes);
            }
            return refuse(ctx, ErrorCode::OutOfOperationRecords);
        };
        table.active_operations += 1;
        let operation = &mut operations[index];
        operation.build_epoch = table.build_epoch;
        operation.transaction_id = request.transaction_id;
        operation.kind = request.kind;
        operation.lock = match request.kind {
            OperationKind::Read => request.lock,
            _ => LockMode::Exclusive,
        };
        operation.table_id = request.table_id;
        operation.partition = request.partition;
        operation.hash = request.hash;
        operation.key = Some(request.key);
        operation.attr = request.attr;
        operation.chain = request.chain;
        operation.position = request.position;
        operation.previous_op = request.previous_op;
        operation.target_row = request.row_id;
        operation.redo_reservation = redo_reservation;
        operation.applier = applier;
        operation.no_wait = request.no_wait;
        self.execute(index, ctx);
    }

    /// Runs (or re-runs, after a lock wait) operation `index`; once it is
    /// prepared, passes it to the next replica or, on the last replica,
    /// answers the tc.
    pub(crate) fn execute(&mut self, index: u32, ctx: &mut dyn Context) {
        let outcome = self.try_prepare(index, ctx.pool());
        let operation = &self.operations[index];
        let (tc, tc_op) = (operation.tc, operation.tc_op);
        // A tc on a node taken for failed gets no answer: its
        // transactions are another tc's to finish (the take-over finds
        // this operation prepared, or resolves it), and an answer could
        // reach the node's next incarnation, whose tc knows nothing of
        // it (an operation that waited on a lock across the failure).
        let tc_failed = self.node_failures.failed().contains(tc.node);
        match outcome {
            Outcome::Waiting => {}
            Outcome::Done { data, released } => {
                if !self.operations[index].is_last_replica() {
                    return self.forward_prepare(index, ctx);
                }
                if !tc_failed {
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
                }
                if released {
                    self.release_operation(index);
                }
            }
            Outcome::Failed(error) => {
                if !tc_failed {
                    send(ctx, self.address, tc, LqhKeyRef { tc_op, error });
                }
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
            no_wait: false,
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
        } else if self.operations[index].applier {
            self.operations[index].prepared_to_apply(attr.take())
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

    /// Prepares operation `index` on the primary: finds its row by `key`
    /// and, but for a committed read, takes or queues for the row's lock
    /// and builds the after-image from `changes` (the attribute section).
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
            // No lock: what the transaction sees now, and done.
            // What the transaction sees, as `visible_view` says; spelled
            // out here, the hottest path, where it compiles tighter.
            let Some(row) = found else {
                return Outcome::Failed(ErrorCode::NoSuchRow);
            };
            let own =
                latest_image_of_transaction(operations, memory, partition, row, transaction_id);
            let view = match own {
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

        // The row exists (live, or reserved by some insert): queue for its
        // lock, unless the read was asked not to wait (it holds nothing).
        if !can_grant(operations, memory, partition, row, index) {
            if operations[index].no_wait {
                return Outcome::Failed(ErrorCode::LockNotAvailable);
            }
            return wait_on_row(operations, memory, partition, row, index);
        }
        append_to_row(operations, memory, partition, row, index);
        operations[index].granted = true;

        let base = visible_view(operations, memory, layout, partition, row, transaction_id);
        match operate_on_row(kind, layout, base, key, changes, pool) {
            Ok((data, image, image_kind)) => {
                self.keep_prepared(index, row, data, image, image_kind)
            }
            Err(error) => {
                self.release_from_row(index);
                Outcome::Failed(error)
            }
        }
    }

    /// Operation `index` holds the lock on `row` and has its result: takes
    /// the var slot its after-image needs at commit (so that commit cannot
    /// fail) and keeps the image in the record, prepared. Primaries and
    /// backups alike.
    pub(crate) fn keep_prepared(
        &mut self,
        index: u32,
        row: u32,
        data: Option<Section>,
        image: Option<Section>,
        image_kind: ImageKind,
    ) -> Outcome {
        let Ldm {
            memory,
            operations,
            tables,
            ..
        } = self;
        let operation = &operations[index];
        let (layout, partition) = layout_and_partition(tables, operation);
        // A var part of another size class needs a new var slot.
        let new_var = match &image {
            Some(image) => partition.var_slot_for_image(memory, layout, row, image.len()),
            None => Some(NIL),
        };
        let Some(new_var) = new_var else {
            self.release_from_row(index);
            return Outcome::Failed(ErrorCode::TableFull);
        };
        // A row that is not live (its delete committed, the row still held)
        // becomes live again at this commit: its ordered-index entry is
        // promised now, as for a new row.
        if image_kind == ImageKind::Row
            && partition.state(memory, row) != RowState::Live
            && partition.promise_ordered_insert(memory, row).is_err()
        {
            if new_var != NIL {
                partition.free_var(memory, new_var);
            }
            self.release_from_row(index);
            return Outcome::Failed(ErrorCode::TableFull);
        }
        // An update of a live row that changes a secondary index's columns
        // moves the row in that index at commit: its nodes are promised now.
        let index_nodes = match (&image, image_kind) {
            (Some(image), ImageKind::Row) => {
                match partition.promise_index_update(memory, layout, row, image.as_slice()) {
                    Ok(nodes) => nodes,
                    Err(_) => {
                        if new_var != NIL {
                            partition.free_var(memory, new_var);
                        }
                        self.release_from_row(index);
                        return Outcome::Failed(ErrorCode::TableFull);
                    }
                }
            }
            _ => 0,
        };
        let operation = &mut operations[index];
        operation.row = row;
        operation.image = image;
        operation.image_kind = image_kind;
        operation.new_var = new_var;
        operation.index_nodes = index_nodes;
        operation.state = OpState::Prepared;
        if image_kind == ImageKind::Row {
            self.list_written(index);
        }
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
        self.list_written(index);
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

/// What transaction `transaction_id` sees of row `row`: its own latest
/// after-image, else the committed row (checksum verified); `None` when it
/// sees no row (its own delete, or a slot without a committed row).
#[inline]
fn visible_view<'a>(
    operations: &'a OperationPool,
    memory: &'a PageMemory,
    layout: &RowLayout,
    partition: &Partition,
    row: u32,
    transaction_id: TransactionId,
) -> Option<RowView<'a>> {
    match latest_image_of_transaction(operations, memory, partition, row, transaction_id) {
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
    }
}

/// Room for the changes an increment becomes: an entry (4-byte head, at
/// most 8 bytes of value) for each of its columns.
const INCREMENT_CHANGES_BYTES: usize = signal::attr::MAX_INCREMENTS * 12;

/// The changes `increments` (entries of 8-byte deltas) make to `base`:
/// each column's sum, as an ordinary entry in `out`; returns the bytes
/// used. BadValue for a column that is not an integer, ValueOutOfRange
/// for a NULL column or a sum outside its type, BadRequest for a
/// malformed entry, a column named twice or more increments than `out`
/// holds.
fn incremented(
    layout: &RowLayout,
    base: RowView<'_>,
    increments: &[u8],
    out: &mut [u8],
) -> Result<usize, ErrorCode> {
    let mut writer = signal::attr::AttrWriter::new(out);
    for (position, entry) in AttrIter::new(increments).enumerate() {
        let entry = entry?;
        let column = entry.column as usize;
        let column_type = layout.column_type(column).ok_or(ErrorCode::UnknownColumn)?;
        if !matches!(
            column_type,
            signal::schema::ColumnType::Int { .. } | signal::schema::ColumnType::BigInt { .. }
        ) {
            return Err(ErrorCode::BadValue);
        }
        // Each sum is from the base: a column twice would keep only the
        // last. At most MAX_INCREMENTS entries, so the look back is short.
        let twice = AttrIter::new(increments)
            .take(position)
            .any(|earlier| earlier.is_ok_and(|earlier| earlier.column == entry.column));
        if twice {
            return Err(ErrorCode::BadRequest);
        }
        let delta = entry
            .value
            .and_then(|value| <[u8; 8]>::try_from(value).ok())
            .map(i64::from_le_bytes)
            .ok_or(ErrorCode::BadRequest)?;
        let current = layout
            .value(base, column)
            .ok_or(ErrorCode::ValueOutOfRange)?;
        let (sum, len) = signal::attr::add_to_integer(column_type, current, delta)?;
        writer
            .push(entry.column, Some(&sum[..len]))
            .map_err(|_| ErrorCode::BadRequest)?;
    }
    Ok(writer.len())
}

/// What a locking operation of `kind` does to the row it holds, which it
/// sees as `base`: (read result, after-image, what commit does), or why it
/// fails.
fn operate_on_row(
    kind: OperationKind,
    layout: &RowLayout,
    base: Option<RowView<'_>>,
    key: &[u8],
    changes: &[u8],
    pool: &'static SectionPool,
) -> Result<(Option<Section>, Option<Section>, ImageKind), ErrorCode> {
    match (kind, base) {
        (OperationKind::Read, None)
        | (OperationKind::Update, None)
        | (OperationKind::Increment, None)
        | (OperationKind::Delete, None) => Err(ErrorCode::NoSuchRow),
        (OperationKind::Increment, Some(view)) => {
            // The sums as ordinary changes, built on the stack (the ldm
            // allocates nothing once warm).
            let mut sums = [0u8; INCREMENT_CHANGES_BYTES];
            let used = incremented(layout, view, changes, &mut sums)?;
            build_image(layout, Some(view), key, &sums[..used], pool)
                .map(|image| (None, Some(image), ImageKind::Row))
        }
        (OperationKind::Insert, Some(_)) => Err(ErrorCode::DuplicateKey),
        (OperationKind::Read, Some(view)) => {
            encode_read(layout, view, changes, pool).map(|data| (Some(data), None, ImageKind::None))
        }
        (OperationKind::Delete, Some(_)) => Ok((None, None, ImageKind::Deleted)),
        (_, base) => build_image(layout, base, key, changes, pool)
            .map(|image| (None, Some(image), ImageKind::Row)),
    }
}
