//! Unique indexes, kept by the tc in the transaction that writes their
//! base table (docs/design/scans-and-indexes.md §5; NDB's TC triggers).
//!
//! A unique index is a hidden table keyed on the indexed columns whose
//! rows hold the base row's primary key. A client's write of a table with
//! unique indexes becomes, in its own transaction:
//!
//! ```text
//!  insert:                    the insert | each index's hidden insert
//!  update (of an indexed      exclusive read of the row's indexed columns
//!  column), delete, write:      -> the write | each changed index's hidden
//!                                  delete of the old value and insert of the new
//! ```
//!
//! The before-image read stands for the client's operation in its batch
//! (`OpRole::BeforeImage`) and holds its lock to the commit, so no other
//! transaction changes the row between the read and the write; the
//! operations it leads to are `OpRole::Triggered` and answered with the
//! batch. A hidden insert that finds its key is the index's duplicate: the
//! transaction aborts with DuplicateKey naming the index. A row with a
//! NULL in an index's columns has no hidden row (SQL allows many NULLs).
//! A write of a row that is not there is sent as an insert, alone
//! (`OpRole::InsertForWrite`): prepared, its hidden rows follow; refused
//! because another transaction inserted the row meanwhile, the write
//! starts again from a new before-image read. Later operations of the
//! transaction on the same row wait (`Transaction::deferred`) until the
//! row's writes are sent, so they reach the ldm in the client's order.
//!
//! Everything is an ordinary operation of the transaction, so commit,
//! abort, a failure's resolve and a tc take-over treat them as any other:
//! a tc that dies between the read and the write leaves a transaction of
//! prepared operations that its take-over aborts (no commit was decided).

use crate::execute::Route;
use crate::records::{OpRole, Transaction, TransactionState};
use crate::{Tc, UniqueIndex};
use kernel::Context;
use signal::attr::{append_entry, key_values_equal, AttrIter, KeyHash};
use signal::schema::ColumnType;
use signal::section::Section;
use signal::signals::{tc_key_flags, LockMode, OperationKind, TcKeyReq};
use signal::ErrorCode;

/// A row's values by column as far as an operation knows them: `None`
/// not known, `Some(None)` NULL.
type Values<'a> = Vec<Option<Option<&'a [u8]>>>;

impl Transaction {
    /// Whether `request` (its key hashing to `hash`) must wait: a
    /// before-image read of its row is in flight, or an operation waiting
    /// for one is its row's.
    pub(crate) fn waits_for_before_image(&self, request: &TcKeyReq, hash: KeyHash) -> bool {
        let same = |table_id: u32, other: KeyHash| table_id == request.table_id && other == hash;
        self.before_images
            .iter()
            .any(|&(_, table_id, other)| same(table_id, other))
            || self
                .deferred
                .iter()
                .any(|(other, waiting)| same(waiting.table_id, *other))
    }
}

impl Tc {
    /// A write of a table with unique indexes (or of a hidden table, which
    /// clients may only read), routed by `route`.
    pub(crate) fn execute_unique_indexed_write(
        &mut self,
        transaction: u32,
        request: TcKeyReq,
        route: Route,
        ctx: &mut dyn Context,
    ) {
        let table = self.tables[request.table_id as usize]
            .as_ref()
            .expect("routed a moment ago");
        if table.hidden_of.is_some() {
            // Only the tc writes a unique index's rows: in a client's
            // transaction as below, or in a build's own (`unique_build`).
            if self.records.transactions[transaction as usize].api == self.config.address {
                self.send_operation(transaction, request, route, OpRole::Client, ctx);
                return;
            }
            let client_op = request.client_op;
            return self.abort_for(transaction, ErrorCode::BadRequest, client_op, ctx);
        }
        // The indexes whose values the write may change.
        let attr = request.attr.as_ref().map_or(&[][..], Section::as_slice);
        let indexes: Vec<&UniqueIndex> = match request.kind {
            OperationKind::Insert => Vec::new(),
            OperationKind::Update => {
                let set: Vec<u16> = AttrIter::new(attr)
                    .filter_map(Result::ok)
                    .map(|entry| entry.column)
                    .collect();
                let touched = |index: &&UniqueIndex| index.columns.iter().any(|c| set.contains(c));
                table.unique.iter().filter(touched).collect()
            }
            OperationKind::Increment => {
                let set: Vec<u16> = AttrIter::new(attr)
                    .filter_map(Result::ok)
                    .map(|entry| entry.column)
                    .collect();
                if table
                    .unique
                    .iter()
                    .any(|index| index.columns.iter().any(|c| set.contains(c)))
                {
                    // A unique index is kept from a write's new values,
                    // which an increment does not carry (the ldm computes
                    // them): refused; a client reads and updates instead.
                    let client_op = request.client_op;
                    return self.abort_for(transaction, ErrorCode::BadRequest, client_op, ctx);
                }
                Vec::new()
            }
            OperationKind::Delete | OperationKind::Write => table.unique.iter().collect(),
            OperationKind::Read => unreachable!("reads keep no index"),
        };
        if request.kind == OperationKind::Insert {
            return self.write_with_unique_indexes(transaction, request, None, ctx);
        }
        if indexes.is_empty() {
            // An update of no indexed column (a malformed section is the
            // ldm's to refuse): as it is.
            self.send_operation(transaction, request, route, OpRole::Client, ctx);
            return;
        }
        // Those indexes' columns, each once.
        let mut projection = Vec::new();
        for index in indexes {
            for &column in &index.columns {
                if !projection.contains(&column) {
                    projection.push(column);
                }
            }
        }
        let bytes: Vec<u8> = projection.iter().flat_map(|c| c.to_le_bytes()).collect();
        let pool = request.key.pool();
        let (Some(key), Some(attr)) = (
            pool.copy_from(request.key.as_slice()),
            pool.copy_from(&bytes),
        ) else {
            let client_op = request.client_op;
            return self.abort_for(transaction, ErrorCode::OutOfSignalMemory, client_op, ctx);
        };
        let read = TcKeyReq {
            transaction_id: request.transaction_id,
            client_op: request.client_op,
            flags: if request.kind == OperationKind::Write {
                tc_key_flags::IGNORE_MISSING
            } else {
                0
            },
            kind: OperationKind::Read,
            lock: LockMode::Exclusive,
            table_id: request.table_id,
            table_version: request.table_version,
            key,
            attr: Some(attr),
        };
        let read_route = match self.route(&read) {
            Ok(route) => route,
            Err(error) => return self.abort_for(transaction, error, request.client_op, ctx),
        };
        let (table_id, hash) = (request.table_id, route.hash);
        if let Some(op) =
            self.send_operation(transaction, read, read_route, OpRole::BeforeImage, ctx)
        {
            self.records.operations[op as usize].pending = Some(Box::new(request));
            let record = &mut self.records.transactions[transaction as usize];
            record.before_images.push((op, table_id, hash));
        }
    }

    /// Holds `request` until the before-image read of its row has sent its
    /// write; a client sending ever more of them is refused as one sending
    /// too many operations.
    pub(crate) fn defer_operation(
        &mut self,
        transaction: u32,
        request: TcKeyReq,
        hash: KeyHash,
        ctx: &mut dyn Context,
    ) {
        let record = &mut self.records.transactions[transaction as usize];
        let waiting = record.op_count as usize + record.deferred.len();
        if waiting >= self.config.max_operations_per_transaction as usize {
            let client_op = request.client_op;
            return self.abort_for(transaction, ErrorCode::TooManyOperations, client_op, ctx);
        }
        record.deferred.push((hash, request));
    }

    /// The before-image read `op` answered: `data` the row's indexed
    /// columns, `None` when a write's row is not there. Sends the write,
    /// then the operations that waited for it.
    pub(crate) fn before_image_read(
        &mut self,
        transaction: u32,
        op: u32,
        data: Option<Section>,
        ctx: &mut dyn Context,
    ) {
        let request = self.records.operations[op as usize]
            .pending
            .take()
            .expect("a before-image read holds its write");
        self.write_with_unique_indexes(transaction, *request, Some(data), ctx);
        self.row_writes_sent(transaction, op, ctx);
    }

    /// Operation `op` of `transaction` no longer holds its row's later
    /// operations back (its writes are sent): those go, in order, each
    /// waiting again if its row's read is (still or newly) in flight; an
    /// abort meanwhile drops the rest. Then the batch may be done.
    fn row_writes_sent(&mut self, transaction: u32, op: u32, ctx: &mut dyn Context) {
        let record = &mut self.records.transactions[transaction as usize];
        record
            .before_images
            .retain(|&(waiting, _, _)| waiting != op);
        let deferred = std::mem::take(&mut record.deferred);
        for (_, request) in deferred {
            if self.records.transactions[transaction as usize].state != TransactionState::Executing
            {
                break;
            }
            self.execute_operation(transaction, request, ctx);
        }
        if self.records.transactions[transaction as usize].state == TransactionState::Executing {
            self.maybe_batch_done(transaction, ctx);
        }
    }

    /// Sends the client's write `request` and the hidden rows' inserts and
    /// deletes it makes. `before`: `None` for an insert (no read was
    /// needed), else what the before-image read found.
    fn write_with_unique_indexes(
        &mut self,
        transaction: u32,
        mut request: TcKeyReq,
        before: Option<Option<Section>>,
        ctx: &mut dyn Context,
    ) {
        let client_op = request.client_op;
        let role = if before.is_some() {
            OpRole::Triggered { index_id: 0 }
        } else {
            OpRole::Client
        };
        let old_row = before.as_ref().and_then(Option::as_ref);
        if request.kind == OperationKind::Write && before.is_some() && old_row.is_none() {
            return self.insert_for_write(transaction, request, ctx);
        }
        request.kind = match (request.kind, old_row) {
            (OperationKind::Write, Some(_)) => OperationKind::Update,
            (kind, _) => kind,
        };
        let changes = match self.hidden_row_changes(&request, old_row) {
            Ok(changes) => changes,
            Err(error) => return self.abort_for(transaction, error, client_op, ctx),
        };
        let route = match self.route(&request) {
            Ok(route) => route,
            Err(error) => return self.abort_for(transaction, error, client_op, ctx),
        };
        if self
            .send_operation(transaction, request, route, role, ctx)
            .is_none()
        {
            return;
        }
        self.send_hidden_changes(transaction, client_op, changes, ctx);
    }

    /// A write whose row was not there: sent as an insert first, alone,
    /// the write kept (`OpRole::InsertForWrite`). Once it is prepared, the
    /// hidden rows follow (`inserted_for_write`); if another transaction
    /// inserted the row meanwhile (DuplicateKey, nothing held), the write
    /// starts again from its before-image (`insert_for_write_refused`),
    /// now an update of that row. The row's later operations wait for it
    /// as for a before-image.
    fn insert_for_write(&mut self, transaction: u32, request: TcKeyReq, ctx: &mut dyn Context) {
        let client_op = request.client_op;
        let pool = request.key.pool();
        // A write may carry no attribute section (the key alone).
        let values = request.attr.as_ref().map_or(&[][..], Section::as_slice);
        let (Some(key), Some(attr)) = (
            pool.copy_from(request.key.as_slice()),
            pool.copy_from(values),
        ) else {
            return self.abort_for(transaction, ErrorCode::OutOfSignalMemory, client_op, ctx);
        };
        let insert = TcKeyReq {
            transaction_id: request.transaction_id,
            client_op,
            flags: 0,
            kind: OperationKind::Insert,
            lock: LockMode::Exclusive,
            table_id: request.table_id,
            table_version: request.table_version,
            key,
            attr: Some(attr),
        };
        let route = match self.route(&insert) {
            Ok(route) => route,
            Err(error) => return self.abort_for(transaction, error, client_op, ctx),
        };
        let (table_id, hash) = (insert.table_id, route.hash);
        if let Some(op) =
            self.send_operation(transaction, insert, route, OpRole::InsertForWrite, ctx)
        {
            self.records.operations[op as usize].pending = Some(Box::new(request));
            let record = &mut self.records.transactions[transaction as usize];
            record.before_images.push((op, table_id, hash));
        }
    }

    /// The insert a write of a missing row became (`op`) is prepared: its
    /// hidden rows' inserts go.
    pub(crate) fn inserted_for_write(&mut self, transaction: u32, op: u32, ctx: &mut dyn Context) {
        let request = self.records.operations[op as usize]
            .pending
            .take()
            .expect("an insert for a write holds the write");
        let client_op = request.client_op;
        match self.hidden_row_changes(&request, None) {
            Ok(changes) => self.send_hidden_changes(transaction, client_op, changes, ctx),
            Err(error) => return self.abort_for(transaction, error, client_op, ctx),
        }
        self.row_writes_sent(transaction, op, ctx);
    }

    /// The insert a write of a missing row became (`op`) found the row
    /// there (another transaction inserted it): the write starts again,
    /// from a new before-image read of that row.
    pub(crate) fn insert_for_write_refused(
        &mut self,
        transaction: u32,
        op: u32,
        ctx: &mut dyn Context,
    ) {
        let request = self.records.operations[op as usize]
            .pending
            .take()
            .expect("an insert for a write holds the write");
        let record = &mut self.records.transactions[transaction as usize];
        record
            .before_images
            .retain(|&(waiting, _, _)| waiting != op);
        // The new before-image stands for the client's operation in its
        // batch, as the first one did.
        record.batch_ops -= 1;
        let client_op = request.client_op;
        match self.route(&request) {
            Ok(route) => self.execute_unique_indexed_write(transaction, *request, route, ctx),
            Err(error) => self.abort_for(transaction, error, client_op, ctx),
        }
    }

    /// Sends the hidden rows' `changes` of client operation `client_op`.
    fn send_hidden_changes(
        &mut self,
        transaction: u32,
        client_op: u32,
        changes: Vec<(u32, TcKeyReq)>,
        ctx: &mut dyn Context,
    ) {
        for (index_id, hidden) in changes {
            if hidden.kind == OperationKind::Delete && hidden.attr.is_some() {
                if self
                    .check_hidden_row(transaction, index_id, hidden, ctx)
                    .is_none()
                {
                    return;
                }
                continue;
            }
            let route = match self.route(&hidden) {
                Ok(route) => route,
                Err(error) => return self.abort_for(transaction, error, client_op, ctx),
            };
            let role = OpRole::Triggered { index_id };
            if self
                .send_operation(transaction, hidden, route, role, ctx)
                .is_none()
            {
                return;
            }
        }
    }

    /// A hidden row's delete while its index is built (`delete` carries
    /// the row's primary key as its attributes): first an exclusive read
    /// of the hidden row (`OpRole::HiddenCheck`), since the build may not
    /// have inserted it yet, or another row's may hold the value (two
    /// rows held it before the build, which will fail on it: deleting
    /// that row's entry would hide the repeat). `None` when the
    /// transaction is aborting.
    fn check_hidden_row(
        &mut self,
        transaction: u32,
        index_id: u32,
        delete: TcKeyReq,
        ctx: &mut dyn Context,
    ) -> Option<u32> {
        let client_op = delete.client_op;
        let read = match self.hidden_row_read(&delete, LockMode::Exclusive) {
            Ok(read) => read,
            Err(error) => {
                self.abort_for(transaction, error, client_op, ctx);
                return None;
            }
        };
        let route = match self.route(&read) {
            Ok(route) => route,
            Err(error) => {
                self.abort_for(transaction, error, client_op, ctx);
                return None;
            }
        };
        let role = OpRole::HiddenCheck { index_id };
        let op = self.send_operation(transaction, read, route, role, ctx)?;
        self.records.operations[op as usize].pending = Some(Box::new(delete));
        Some(op)
    }

    /// The hidden row a building index's delete checks (`op`) answered:
    /// `data` its primary-key columns, `None` when there is none. The
    /// delete goes only if they name the writer's row.
    pub(crate) fn hidden_row_checked(
        &mut self,
        transaction: u32,
        op: u32,
        data: Option<Section>,
        ctx: &mut dyn Context,
    ) {
        let OpRole::HiddenCheck { index_id } = self.records.operations[op as usize].role else {
            unreachable!("a hidden row's check");
        };
        let mut delete = *self.records.operations[op as usize]
            .pending
            .take()
            .expect("a hidden row's check holds its delete");
        // The index dropped (a roll-back, a take-over) since the check
        // went: its hidden rows are nobody's to keep any more.
        let kept = self
            .tables
            .get(delete.table_id as usize)
            .is_some_and(Option::is_some);
        let names_the_row = kept
            && match (&data, &delete.attr) {
                (Some(found), Some(expected)) => self
                    .tables
                    .get(delete.table_id as usize)
                    .and_then(Option::as_ref)
                    .is_some_and(|hidden| {
                        same_entries(&hidden.definition, found.as_slice(), expected.as_slice())
                    }),
                _ => false,
            };
        if names_the_row {
            delete.attr = None;
            let client_op = delete.client_op;
            let route = match self.route(&delete) {
                Ok(route) => route,
                Err(error) => return self.abort_for(transaction, error, client_op, ctx),
            };
            let role = OpRole::Triggered { index_id };
            if self
                .send_operation(transaction, delete, route, role, ctx)
                .is_none()
            {
                return;
            }
        }
        self.maybe_batch_done(transaction, ctx);
    }

    /// The hidden rows' deletes and inserts (with their index ids) that
    /// `request` makes, given the row's indexed columns before it
    /// (`old_row`; `None`: no row).
    fn hidden_row_changes(
        &self,
        request: &TcKeyReq,
        old_row: Option<&Section>,
    ) -> Result<Vec<(u32, TcKeyReq)>, ErrorCode> {
        // Dropped since the write was routed (the tc drops a table's
        // routes at once; its operations in flight go on).
        let route = self.tables[request.table_id as usize]
            .as_ref()
            .filter(|route| route.definition.version == request.table_version)
            .ok_or(ErrorCode::UnknownTable)?;
        let table = &route.definition;
        let key = request.key.as_slice();
        let attr = request.attr.as_ref().map_or(&[][..], Section::as_slice);
        let mut old: Values<'_> = vec![None; table.columns.len()];
        if let Some(row) = old_row {
            overlay(&mut old, row.as_slice())?;
            overlay(&mut old, key)?;
        }
        let mut new = old.clone();
        match request.kind {
            OperationKind::Delete => new.iter_mut().for_each(|value| *value = None),
            _ => {
                overlay(&mut new, key)?;
                overlay(&mut new, attr)?;
            }
        }
        let primary: Vec<&[u8]> = AttrIter::new(key)
            .map(|entry| entry.map(|entry| entry.value.unwrap_or_default()))
            .collect::<Result<_, _>>()?;
        let pool = request.key.pool();
        let mut changes = Vec::new();
        for index in &route.unique {
            let old_key = index_key(&old, &index.columns);
            let new_key = index_key(&new, &index.columns);
            let types: Vec<ColumnType> = index
                .columns
                .iter()
                .map(|&column| table.columns[column as usize].column_type)
                .collect();
            if same_key(&types, old_key.as_deref(), new_key.as_deref()) {
                continue;
            }
            let hidden = |kind, values: &[&[u8]], with_primary: bool| {
                let mut key_bytes = Vec::new();
                encode(&mut key_bytes, 0, values.iter().copied())?;
                let mut attr_bytes = Vec::new();
                if with_primary {
                    encode(&mut attr_bytes, values.len(), primary.iter().copied())?;
                }
                let key = pool.copy_from(&key_bytes);
                let attr = pool.copy_from(&attr_bytes);
                let (Some(key), Some(attr)) = (key, attr) else {
                    return Err(ErrorCode::OutOfSignalMemory);
                };
                Ok(TcKeyReq {
                    transaction_id: request.transaction_id,
                    client_op: request.client_op,
                    flags: 0,
                    kind,
                    lock: LockMode::Exclusive,
                    table_id: index.table_id,
                    table_version: index.table_version,
                    key,
                    attr: with_primary.then_some(attr),
                })
            };
            if let Some(values) = &old_key {
                // While the index is built, the delete carries the row's
                // primary key: the hidden row goes only if it names it.
                let delete = hidden(OperationKind::Delete, values, index.building)?;
                changes.push((index.index_id, delete));
            }
            if let Some(values) = &new_key {
                changes.push((index.index_id, hidden(OperationKind::Insert, values, true)?));
            }
        }
        Ok(changes)
    }
}

/// Sets the values `entries` (an attribute or key section) name.
fn overlay<'a>(values: &mut Values<'a>, entries: &'a [u8]) -> Result<(), ErrorCode> {
    for entry in AttrIter::new(entries) {
        let entry = entry?;
        let slot = values
            .get_mut(entry.column as usize)
            .ok_or(ErrorCode::UnknownColumn)?;
        *slot = Some(entry.value);
    }
    Ok(())
}

/// An index's key in a row: its columns' values, `None` when one is NULL
/// or not set (an insert's column left out is NULL).
fn index_key<'a>(values: &Values<'a>, columns: &[u16]) -> Option<Vec<&'a [u8]>> {
    columns
        .iter()
        .map(|&column| values[column as usize].flatten())
        .collect()
}

/// Whether two index keys are the same key (PAD SPACE text compares
/// without trailing spaces), so the hidden row stays.
fn same_key(types: &[ColumnType], a: Option<&[&[u8]]>, b: Option<&[&[u8]]>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => types
            .iter()
            .zip(a.iter().zip(b))
            .all(|(&column_type, (a, b))| key_values_equal(column_type, a, b)),
        _ => false,
    }
}

/// Whether two runs of attribute entries of `table`'s columns name the
/// same columns with the same values (PAD SPACE text compares without
/// trailing spaces).
fn same_entries(table: &signal::schema::TableDef, a: &[u8], b: &[u8]) -> bool {
    let mut a = AttrIter::new(a);
    let mut b = AttrIter::new(b);
    loop {
        match (a.next(), b.next()) {
            (None, None) => return true,
            (Some(Ok(a)), Some(Ok(b))) if a.column == b.column => {
                let Some(column) = table.columns.get(a.column as usize) else {
                    return false;
                };
                let equal = match (a.value, b.value) {
                    (Some(a), Some(b)) => key_values_equal(column.column_type, a, b),
                    (None, None) => true,
                    _ => false,
                };
                if !equal {
                    return false;
                }
            }
            _ => return false,
        }
    }
}

/// Appends `values` as attribute entries for columns `first..`.
fn encode<'a>(
    out: &mut Vec<u8>,
    first: usize,
    values: impl Iterator<Item = &'a [u8]>,
) -> Result<(), ErrorCode> {
    for (at, value) in values.enumerate() {
        append_entry(out, (first + at) as u16, value)?;
    }
    Ok(())
}
