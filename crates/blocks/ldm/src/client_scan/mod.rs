//! SCAN_REQ: a client's committed-read scan of one partition replica, a
//! batch at a time (docs/design/scans-and-indexes.md §3-4, designs 0021
//! and 0022).
//!
//! Two walks: `rows` visits the partition's slots in row-id order (a full
//! scan), `index` the primary key's ordered index between two bounds.
//! Both offer each live row to a [`Batch`], which applies the request's
//! program (`signal::scan_program`: the filter, then the projection, or
//! only a count) and knows when the batch is full: `max_rows` rows or
//! `max_bytes` bytes returned, [`EXAMINE_PER_BATCH`] rows looked at, or
//! [`WORK_PER_BATCH`] steps of filter evaluation, so one request never
//! holds the ldm thread for long however few rows its filter takes or
//! however dear it is.
//!
//! A committed read: no locks, each row as last committed (a prepared
//! insert is not yet live, a prepared update or delete still shows the
//! committed row), except that a request naming a transaction sees that
//! transaction's own prepared writes (`own_writes`; design 0035): both
//! walks show its inserts and updates as it wrote them and skip its
//! deletes, and an index walk merges in, at their keys, the rows whose
//! entries are not where its images put them, found on the transaction's
//! list of written rows. Nothing is kept here between batches: the answer says
//! where to resume (the next row id, or the last index entry looked at),
//! and the next request brings it back, so a client that stops asking
//! leaves nothing behind, and a row that did not change during the scan
//! is seen exactly once whatever was inserted or deleted between batches.
//!
//! Refused: unknown flags, bounds on a row-order scan, an index the table
//! does not have, a transaction of another API node (BadRequest); a malformed or mismatched bound or program
//! (BadRequest, BadValue, NullNotAllowed, UnknownColumn, BadFilter); a
//! batch over `MAX_BATCH_BYTES` (ScanBatchTooLarge); a table or partition
//! this ldm does not hold (UnknownTable); a stale table version
//! (SchemaVersionMismatch); a node still copying its data in a node
//! restart (NodeNotStarted); an expired read lease (ReadLeaseExpired); no
//! signal memory for the answer (OutOfSignalMemory); one row larger than
//! the batch's bytes (RowTooLarge).

mod index;
mod rows;
#[cfg(test)]
mod tests;

use crate::operation::OperationPool;
use crate::own_writes::{own_row, Own};
use crate::{Ldm, TableState};
use kernel::{send, Context};
use rowstore::{Entry, RowLayout, RowView};
use signal::scan_program::Program;
use signal::signals::{scan_flags, ScanConf, ScanRef, ScanReq};
use signal::{BlockRef, ErrorCode, Section, TransactionId};

/// Rows one batch may look at. At tens of nanoseconds a row this bounds a
/// request to well under a millisecond of the ldm thread.
pub(crate) const EXAMINE_PER_BATCH: u32 = 8192;
/// Steps of filter evaluation one batch may take (a step per filter node,
/// and per byte a LIKE tries): about a millisecond. A plain filter takes
/// a few steps a row, so rows end its batches; a LIKE over long values
/// ends them sooner. One row is always evaluated whole: the program's
/// limits (`scan_program`) bound it.
pub(crate) const WORK_PER_BATCH: u64 = 1 << 20;
/// Bytes before each row's attribute entries: row id, GCI, length.
const ROW_PREFIX_BYTES: usize = 4 + 8 + 4;

impl Ldm {
    pub(crate) fn client_scan(&mut self, from: BlockRef, request: ScanReq, ctx: &mut dyn Context) {
        let request_id = request.request_id;
        // Kept between requests so that a scan with rows of its own to
        // place allocates nothing once warm.
        let mut placed = std::mem::take(&mut self.scan_placed);
        let answer = self.scan_batch(from, &request, &mut placed, ctx);
        self.scan_placed = placed;
        match answer {
            Ok(conf) => send(ctx, self.address, from, conf),
            Err(error) => send(ctx, self.address, from, ScanRef { request_id, error }),
        }
    }

    fn scan_batch(
        &self,
        from: BlockRef,
        request: &ScanReq,
        placed: &mut Vec<(Entry, u32)>,
        ctx: &mut dyn Context,
    ) -> Result<ScanConf, ErrorCode> {
        if request.flags & !scan_flags::ALL != 0 {
            return Err(ErrorCode::BadRequest);
        }
        let transaction_id = request.transaction_id;
        if transaction_id != TransactionId(0) && transaction_id.api_node() != from.node {
            // Clients are untrusted: one must not read another's
            // uncommitted writes.
            return Err(ErrorCode::BadRequest);
        }
        let Some(TableState {
            definition,
            layout,
            partitions,
            ..
        }) = self
            .tables
            .get(request.table_id as usize)
            .and_then(Option::as_ref)
        else {
            return Err(ErrorCode::UnknownTable);
        };
        if definition.version != request.table_version {
            return Err(ErrorCode::SchemaVersionMismatch);
        }
        let Some(Some(partition)) = partitions.get(request.partition as usize) else {
            return Err(ErrorCode::UnknownTable);
        };
        if self.node_failures.starting().contains(self.address.node) {
            // Its rows may be older than the cluster's until the copy ends.
            return Err(ErrorCode::NodeNotStarted);
        }
        if ctx.now_ms() >= self.read_lease_until_ms {
            return Err(ErrorCode::ReadLeaseExpired);
        }
        let max_bytes = match request.max_bytes {
            0 => scan_flags::DEFAULT_BATCH_BYTES,
            bytes if bytes > scan_flags::MAX_BATCH_BYTES => {
                return Err(ErrorCode::ScanBatchTooLarge)
            }
            bytes => bytes,
        };
        let program = Program::decode(request.program.as_slice(), &definition.columns)?;
        let count_only = request.flags & scan_flags::COUNT != 0;
        // Answers to clients leave the reserve that links, redo and
        // checkpoints need.
        let buffer = ctx
            .pool()
            .alloc_leaving_reserve(if count_only { 0 } else { max_bytes as usize })
            .ok_or(ErrorCode::OutOfSignalMemory)?;
        let mut batch = Batch {
            layout,
            program: &program,
            count_only,
            buffer,
            used: 0,
            rows: 0,
            max_rows: request.max_rows.max(1),
            matched: 0,
            examined: 0,
            work: 0,
        };
        let store = &partition.store;
        let own = (transaction_id != TransactionId(0)).then(|| OwnWrites {
            operations: &self.operations,
            transaction_id,
            table_id: request.table_id,
            partition: request.partition,
            written_head: self.written_head(transaction_id),
        });
        let (done, resume_row, resume_key) = match request.index {
            scan_flags::ROW_ORDER => {
                let (done, resume_row) =
                    rows::walk(&self.memory, store, request, &mut batch, own.as_ref())?;
                (done, resume_row, None)
            }
            // An ordered index: the primary key's (0) or another; the walk
            // refuses one the table does not have.
            _ => index::walk(
                &self.memory,
                store,
                request,
                &mut batch,
                ctx.pool(),
                own.as_ref(),
                placed,
            )?,
        };
        let resume_key = match resume_key {
            Some(key) => key,
            None => ctx
                .pool()
                .alloc_leaving_reserve(0)
                .ok_or(ErrorCode::OutOfSignalMemory)?,
        };
        let Batch {
            mut buffer,
            used,
            matched,
            examined,
            ..
        } = batch;
        buffer.set_len(used);
        Ok(ScanConf {
            request_id: request.request_id,
            done,
            matched,
            examined,
            resume_row,
            resume_key,
            rows: buffer,
        })
    }
}

/// The transaction whose own prepared writes a scan sees, and where to
/// find them.
struct OwnWrites<'a> {
    operations: &'a OperationPool,
    transaction_id: TransactionId,
    /// The table and partition scanned.
    table_id: u32,
    partition: u32,
    /// The transaction's list of operations prepared here with a row
    /// image (every table's and partition's).
    written_head: u32,
}

impl<'a> OwnWrites<'a> {
    /// What the scan shows of `row` (`Own::Committed` for a scan naming
    /// no transaction).
    fn shown(
        own: Option<&OwnWrites<'a>>,
        memory: &rowstore::PageMemory,
        layout: &RowLayout,
        partition: &rowstore::Partition,
        row: u32,
    ) -> Own<'a> {
        match own {
            Some(own) => own_row(
                own.operations,
                memory,
                layout,
                partition,
                row,
                own.transaction_id,
            ),
            None => Own::Committed,
        }
    }
}

/// What a batch did with a row offered to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Offer {
    /// Looked at: returned, counted or filtered out.
    Taken,
    /// Not looked at: the batch is full, and this row starts the next one.
    Full,
}

/// The answer being built: the program applied to each row offered, and
/// the limits of one batch.
struct Batch<'a> {
    layout: &'a RowLayout,
    program: &'a Program,
    count_only: bool,
    buffer: Section,
    used: usize,
    rows: u32,
    max_rows: u32,
    matched: u32,
    examined: u32,
    /// Steps of filter evaluation so far.
    work: u64,
}

impl Batch<'_> {
    /// Whether the batch takes no more rows: checked before each row, so
    /// a walk that stops here resumes at the row it did not look at.
    fn is_spent(&self) -> bool {
        self.rows >= self.max_rows
            || self.examined >= EXAMINE_PER_BATCH
            || self.work >= WORK_PER_BATCH
    }

    /// Counts a row looked at and not offered (one the scan's own
    /// transaction deleted or moved), so that a run of them ends the
    /// batch as rows offered do.
    fn pass(&mut self) {
        self.examined += 1;
    }

    /// Applies the program to the live row `row` (`view`, committed at
    /// `gci`); `verify` checks its checksum when it is returned.
    fn offer(
        &mut self,
        row: u32,
        view: RowView<'_>,
        gci: u64,
        verify: impl FnOnce(),
    ) -> Result<Offer, ErrorCode> {
        let layout = self.layout;
        if !self
            .program
            .filter()
            .matches(|column| layout.value(view, column), &mut self.work)
        {
            self.examined += 1;
            return Ok(Offer::Taken);
        }
        if self.count_only {
            self.examined += 1;
            self.matched += 1;
            return Ok(Offer::Taken);
        }
        // Row id, GCI, length, then the projected attribute entries.
        let buffer = self.buffer.as_mut_slice();
        let start = self.used + ROW_PREFIX_BYTES;
        let encoded = (start < buffer.len())
            .then(|| {
                layout
                    .encode_read(view, self.program.projection(), &mut buffer[start..])
                    .ok()
            })
            .flatten();
        let Some(length) = encoded else {
            if self.rows == 0 {
                // Not even alone in the batch.
                return Err(ErrorCode::RowTooLarge);
            }
            return Ok(Offer::Full);
        };
        verify();
        let used = self.used;
        buffer[used..used + 4].copy_from_slice(&row.to_le_bytes());
        buffer[used + 4..used + 12].copy_from_slice(&gci.to_le_bytes());
        buffer[used + 12..used + 16].copy_from_slice(&(length as u32).to_le_bytes());
        self.used = start + length;
        self.rows += 1;
        self.matched += 1;
        self.examined += 1;
        Ok(Offer::Taken)
    }
}
