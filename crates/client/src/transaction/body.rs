//! A transaction's body (`Transaction::body`): the request in flight,
//! the queued operations and their bytes, the rows read, and the memory
//! all of it reuses, kept in a per-thread pool between transactions.

use super::{Batch, QueuedOp};
use crate::connection::FrameBuilder;
use crate::dispatch::Inbox;
use crate::error::ClientError;
use crate::table::{Row, RowStorage, Table};
use crate::value::Value;
use signal::Gci;
use std::cell::RefCell;
use std::ops::Range;
use std::sync::Arc;

/// The part of a transaction behind a pointer: the request in flight and
/// everything that needs memory. Bodies are kept in a per-thread pool
/// between transactions ([`Body::take`], [`Body::recycle`]), so that a
/// short transaction allocates nothing once its thread is warm.
///
/// A per-thread pool rather than one per `Cluster`: taking and giving back
/// cost no lock, and a pooled body holds nothing of a cluster (no rows, no
/// tables: only emptied vectors and an idle inbox).
#[derive(Default)]
pub(crate) struct Body {
    /// The request sent and not yet answered.
    pub(super) batch: Option<Batch>,
    /// The GCI of the commit, once committed with a write.
    pub(super) commit_gci: Option<Gci>,
    /// A write was queued: a commit whose answer is lost has an unknown
    /// outcome only then (a transaction of reads changed nothing, and is
    /// simply retried).
    pub(super) wrote: bool,
    /// An operation that writes or takes a lock was queued: the
    /// transaction may hold something at the data nodes.
    pub(super) locked: bool,
    /// The ids of the tables a write was queued to (few: a linear list).
    pub(super) written_tables: Vec<u32>,
    pub(super) queued: Vec<QueuedOp>,
    /// Key and attribute bytes of the queued operations, after the key of
    /// the hint (see `hint`).
    pub(super) bytes: Vec<u8>,
    /// The key the transaction was started with (`transaction_with_hint`),
    /// encoded at the start of `bytes`. It is usually the key of the first
    /// operation, which then needs no encoding of its own.
    hint: Option<HintKey>,
    /// Rows read, indexed by operation number.
    pub(super) rows: Vec<Option<Row>>,
    /// Rows of the batch in flight, decoded as they arrive: (operation
    /// number, row). They become visible when the batch is confirmed.
    pub(super) arrived: Vec<(u32, Row)>,
    /// Why row data of the batch in flight could not be stored (its rows
    /// after that are ignored), reported when the batch is confirmed.
    pub(super) row_error: Option<ClientError>,
    /// The memory of rows no longer needed, for the next rows decoded.
    pub(super) spare_rows: Vec<RowStorage>,
    /// The sync API's inbox (made on first use).
    pub(super) own_inbox: Option<Arc<Inbox>>,
    /// The sync API's frames.
    pub(super) frames: FrameBuilder,
}

/// A one-column key encoded for a transaction's hint.
struct HintKey {
    table: Arc<Table>,
    /// Never `Value::Bytes`, so that keeping it costs no allocation.
    value: Value,
    /// The length of its encoding at the start of [`Body::bytes`].
    encoded: usize,
}

impl Body {
    /// Encodes `key` of `table` (the hint of a transaction about to start)
    /// at the start of the (empty) bytes and returns the encoding.
    pub(crate) fn encode_hint(
        &mut self,
        table: &Arc<Table>,
        key: &[Value],
    ) -> Result<&[u8], ClientError> {
        debug_assert!(self.bytes.is_empty() && self.hint.is_none());
        table.encode_key(key, &mut self.bytes)?;
        // Only a key of one number is kept: other keys cost more to keep
        // and compare, and are encoded again when an operation uses them.
        if let [value @ (Value::Int(_) | Value::UInt(_) | Value::Double(_))] = key {
            self.hint = Some(HintKey {
                table: Arc::clone(table),
                value: value.clone(),
                encoded: self.bytes.len(),
            });
        }
        Ok(&self.bytes)
    }

    /// Where `key` of `table` is encoded already: at the start of the
    /// bytes, if it is the hint's.
    pub(super) fn hinted(&self, table: &Arc<Table>, key: &[Value]) -> Option<Range<usize>> {
        // The hint's key stays at the start of the bytes until they are
        // emptied, which forgets the hint.
        let hint = self.hint.as_ref()?;
        let same =
            Arc::ptr_eq(&hint.table, table) && matches!(key, [value] if *value == hint.value);
        same.then_some(0..hint.encoded)
    }

    /// Empties the bytes (and so forgets the hint).
    pub(super) fn clear_bytes(&mut self) {
        self.bytes.clear();
        if self.hint.is_some() {
            self.hint = None;
        }
    }
}

/// Bodies kept per thread; more are freed when given back. Enough for a
/// session's whole window of transactions to be replaced at once; their
/// kept vectors are bounded below, so a thread's pool holds a few MB at
/// most and usually a few hundred KB.
const SPARE_BODIES_PER_THREAD: usize = 256;
/// Rows' memory kept per body.
const SPARE_ROWS: usize = 16;
/// Vectors grown beyond these capacities (a huge batch) are not kept.
const KEPT_OPERATIONS: usize = 1024;
const KEPT_BYTES: usize = 1 << 16;

thread_local! {
    // Boxed bodies, as transactions hold them: handed over without moving
    // the body.
    #[allow(clippy::vec_box)]
    static SPARE_BODIES: RefCell<Vec<Box<Body>>> = const { RefCell::new(Vec::new()) };
}

impl Body {
    /// A body from this thread's pool, or a new one (empty, no batch).
    pub(crate) fn take() -> Box<Body> {
        SPARE_BODIES
            .try_with(|spare| spare.borrow_mut().pop())
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    /// Empties the body (keeping its memory, up to a limit) and gives it
    /// to this thread's pool.
    pub(super) fn recycle(mut self: Box<Body>) {
        let body = &mut *self;
        body.batch = None;
        body.commit_gci = None;
        body.wrote = false;
        body.locked = false;
        body.written_tables.clear();
        keep_empty(&mut body.queued, KEPT_OPERATIONS);
        body.clear_bytes();
        keep_empty(&mut body.bytes, KEPT_BYTES);
        while let Some(read) = body.rows.pop() {
            if let Some(row) = read {
                spare_row(&mut body.spare_rows, row);
            }
        }
        keep_empty(&mut body.rows, KEPT_OPERATIONS);
        body.clear_arrived();
        keep_empty(&mut body.arrived, KEPT_OPERATIONS);
        if let Some(inbox) = &body.own_inbox {
            inbox.clear();
        }
        body.frames.clear();
        if body.frames.capacity() > KEPT_BYTES {
            body.frames = FrameBuilder::default();
        }
        let refused = SPARE_BODIES.try_with(|spare| {
            let mut spare = spare.borrow_mut();
            if spare.len() < SPARE_BODIES_PER_THREAD {
                spare.push(self);
                None
            } else {
                Some(self)
            }
        });
        // Freed outside the borrow of the pool.
        drop(refused);
    }

    /// Forgets the rows of the batch in flight and their error.
    #[inline]
    pub(super) fn clear_arrived(&mut self) {
        // Usually there is nothing to forget: skip the drain's setup.
        if !self.arrived.is_empty() {
            for (_, row) in self.arrived.drain(..) {
                spare_row(&mut self.spare_rows, row);
            }
        }
        if self.row_error.is_some() {
            self.row_error = None;
        }
    }
}

/// Keeps the memory of `row` for a later row, up to a limit.
pub(super) fn spare_row(spare: &mut Vec<RowStorage>, row: Row) {
    if spare.len() < SPARE_ROWS {
        spare.push(row.into_storage());
    }
}

/// Empties `vector`, keeping its memory unless it grew beyond `limit` items.
fn keep_empty<T>(vector: &mut Vec<T>, limit: usize) {
    vector.clear();
    if vector.capacity() > limit {
        *vector = Vec::new();
    }
}
