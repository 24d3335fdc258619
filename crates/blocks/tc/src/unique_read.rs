//! Reads through a unique index in one round trip from the client
//! (`tc_key_flags::THROUGH_UNIQUE_INDEX`, docs/design/0026-unique-indexes.md;
//! NDB's unique index read, which its tc chains the same way):
//!
//! ```text
//!  client read of hidden table T#unique#i, key = the index's values
//!    -> the hidden row's read (OpRole::IndexRead), with the read's lock:
//!       its row is the primary key, kept in the tc
//!    -> the row's read by that key (OpRole::IndexRow), with the same lock
//!       and the client's projection: its row goes to the client
//! ```
//!
//! A lock on the hidden row keeps the value from moving to another row
//! until the transaction ends (moving it deletes that hidden row). A
//! committed read takes no lock, so the row may have changed between the
//! two reads: it is answered only if it still holds the index's values
//! (its projection gains the index's columns to check them). No hidden
//! row, or a row that moved away, is no row: a read asked with
//! IGNORE_MISSING answers none, any other fails with NoSuchRow, as a key
//! read of a missing row does. Both reads are ordinary operations of the
//! transaction.

use crate::records::{OpRole, TransactionState};
use crate::Tc;
use kernel::Context;
use signal::attr::{append_entry, key_values_equal, AttrIter};
use signal::section::Section;
use signal::signals::{tc_key_flags, LockMode, OperationKind, TcKeyReq};
use signal::ErrorCode;

impl Tc {
    /// A client's read of a hidden table with THROUGH_UNIQUE_INDEX: sends
    /// the hidden row's read.
    pub(crate) fn read_through_unique_index(
        &mut self,
        transaction: u32,
        request: TcKeyReq,
        ctx: &mut dyn Context,
    ) {
        let client_op = request.client_op;
        let hidden = self.tables[request.table_id as usize]
            .as_ref()
            .expect("routed a moment ago");
        let (Some(_), OperationKind::Read) = (hidden.hidden_of, request.kind) else {
            // Only a read, of a hidden table.
            return self.abort_for(transaction, ErrorCode::BadRequest, client_op, ctx);
        };
        let read = match self.hidden_row_read(&request, request.lock) {
            Ok(read) => read,
            Err(error) => return self.abort_for(transaction, error, client_op, ctx),
        };
        let route = match self.route(&read) {
            Ok(route) => route,
            Err(error) => return self.abort_for(transaction, error, client_op, ctx),
        };
        if let Some(op) = self.send_operation(transaction, read, route, OpRole::IndexRead, ctx) {
            self.records.operations[op as usize].pending = Some(Box::new(request));
        }
    }

    /// A read, with `lock` and tolerating a missing row, of the hidden row
    /// `like` names (its hidden table and key), returning the row's
    /// primary-key columns (the hidden table's after the index's).
    pub(crate) fn hidden_row_read(
        &self,
        like: &TcKeyReq,
        lock: LockMode,
    ) -> Result<TcKeyReq, ErrorCode> {
        let hidden = self.tables[like.table_id as usize]
            .as_ref()
            .ok_or(ErrorCode::UnknownTable)?;
        let definition = &hidden.definition;
        let first = definition.primary_key.len() as u16;
        let projection: Vec<u8> = (first..definition.columns.len() as u16)
            .flat_map(u16::to_le_bytes)
            .collect();
        let pool = like.key.pool();
        let (Some(key), Some(attr)) = (
            pool.copy_from(like.key.as_slice()),
            pool.copy_from(&projection),
        ) else {
            return Err(ErrorCode::OutOfSignalMemory);
        };
        Ok(TcKeyReq {
            transaction_id: like.transaction_id,
            client_op: like.client_op,
            flags: tc_key_flags::IGNORE_MISSING,
            kind: OperationKind::Read,
            lock,
            table_id: like.table_id,
            table_version: like.table_version,
            key,
            attr: Some(attr),
        })
    }

    /// The hidden row's read `op` answered with `data` (the row's primary
    /// key): sends the row's read.
    pub(crate) fn index_read(
        &mut self,
        transaction: u32,
        op: u32,
        data: Option<Section>,
        ctx: &mut dyn Context,
    ) {
        let Some(data) = data else {
            return self.index_row_missing(transaction, op, ctx);
        };
        let request = self.records.operations[op as usize]
            .pending
            .take()
            .expect("an index read holds its request");
        let client_op = request.client_op;
        // Dropped (or even its id reused) between the two reads: the tc
        // drops a table's routes at once, its operations in flight go on.
        let hidden = self.tables[request.table_id as usize].as_ref();
        let base = hidden
            .and_then(|hidden| hidden.hidden_of)
            .and_then(|base_id| self.tables[base_id as usize].as_ref());
        let Some(base) = base else {
            return self.abort_for(transaction, ErrorCode::UnknownTable, client_op, ctx);
        };
        let Some(index) = base.unique.iter().find(|i| i.table_id == request.table_id) else {
            return self.abort_for(transaction, ErrorCode::UnknownTable, client_op, ctx);
        };
        let index_columns = index.columns.clone();
        let table = &base.definition;
        let (table_id, table_version) = (table.id, table.version);
        let primary_key = table.primary_key.clone();
        // The key: the hidden row's primary-key values under the base
        // table's column ids.
        let mut key = Vec::new();
        let values = AttrIter::new(data.as_slice()).map(|entry| entry.map(|e| e.value));
        for (&column, value) in primary_key.iter().zip(values) {
            let Ok(Some(value)) = value else {
                return self.abort_for(transaction, ErrorCode::BadRequest, client_op, ctx);
            };
            if append_entry(&mut key, column, value).is_err() {
                return self.abort_for(transaction, ErrorCode::BadRequest, client_op, ctx);
            }
        }
        // The client's projection (empty: every column), with the index's
        // columns for a committed read's check.
        let checked = request.lock == LockMode::CommittedRead;
        let mut projection = request
            .attr
            .as_ref()
            .map_or(Vec::new(), |attr| attr.as_slice().to_vec());
        if checked && !projection.is_empty() {
            for column in &index_columns {
                let bytes = column.to_le_bytes();
                if !projection.chunks_exact(2).any(|pair| pair == bytes) {
                    projection.extend_from_slice(&bytes);
                }
            }
        }
        let pool = request.key.pool();
        let (Some(key), Some(attr)) = (pool.copy_from(&key), pool.copy_from(&projection)) else {
            return self.abort_for(transaction, ErrorCode::OutOfSignalMemory, client_op, ctx);
        };
        let read = TcKeyReq {
            transaction_id: request.transaction_id,
            client_op,
            flags: request.flags & tc_key_flags::IGNORE_MISSING,
            kind: OperationKind::Read,
            lock: request.lock,
            table_id,
            table_version,
            key,
            attr: (!projection.is_empty()).then_some(attr),
        };
        let route = match self.route(&read) {
            Ok(route) => route,
            Err(error) => return self.abort_for(transaction, error, client_op, ctx),
        };
        let role = OpRole::IndexRow { checked };
        if let Some(row) = self.send_operation(transaction, read, route, role, ctx) {
            self.records.operations[row as usize].pending = Some(request);
        }
    }

    /// Whether the row an `IndexRow` read (`op`) found (`data`) still
    /// holds the index's values its request asked for.
    pub(crate) fn index_row_holds_values(&self, op: u32, data: Option<&Section>) -> bool {
        let (Some(request), Some(data)) = (&self.records.operations[op as usize].pending, data)
        else {
            return false;
        };
        let Some(base) = self.tables[request.table_id as usize]
            .as_ref()
            .and_then(|hidden| self.tables[hidden.hidden_of? as usize].as_ref())
        else {
            return false;
        };
        let Some(index) = base.unique.iter().find(|i| i.table_id == request.table_id) else {
            return false;
        };
        let row: Vec<_> = AttrIter::new(data.as_slice())
            .filter_map(Result::ok)
            .collect();
        let wanted: Vec<_> = AttrIter::new(request.key.as_slice())
            .filter_map(Result::ok)
            .collect();
        index.columns.len() == wanted.len()
            && index.columns.iter().zip(wanted).all(|(&column, wanted)| {
                let column_type = base.definition.columns[column as usize].column_type;
                let found = row.iter().find(|entry| entry.column == column);
                match (found.and_then(|entry| entry.value), wanted.value) {
                    (Some(found), Some(wanted)) => key_values_equal(column_type, found, wanted),
                    _ => false,
                }
            })
    }

    /// A read through a unique index (`op`, either of its two reads)
    /// found no row: none for a read asked with IGNORE_MISSING, else the
    /// transaction fails with NoSuchRow.
    pub(crate) fn index_row_missing(&mut self, transaction: u32, op: u32, ctx: &mut dyn Context) {
        let operation = &mut self.records.operations[op as usize];
        let request = operation
            .pending
            .take()
            .expect("a read through an index holds its request");
        if request.flags & tc_key_flags::IGNORE_MISSING == 0 {
            return self.abort_for(transaction, ErrorCode::NoSuchRow, request.client_op, ctx);
        }
        if self.records.transactions[transaction as usize].state == TransactionState::Executing {
            self.maybe_batch_done(transaction, ctx);
        }
    }
}
