//! ldm: the local data manager block (NDB's DBLQH + DBACC + DBTUP): one
//! instance per ldm thread, owning a disjoint set of partitions with their
//! rows, primary-key hash indexes, row locks and operation records
//! (docs/design/data-and-routing.md, docs/design/transactions.md).
//!
//! Split by concern, as NDB's dbtux/ is:
//! - `page_memory`: this thread's DataMemory, fixed pages allocated at start;
//! - `slots`, `partition`: rows in pages, row ids, the row header;
//! - `hash_index`: the primary-key index (linear hashing);
//! - `layout`: column placement, after-images, read encoding;
//! - `operation`: operation records and their states;
//! - `prepare`: LQHKEYREQ (lookup, lock, after-image);
//! - `locks`: lock queues on rows, and commit, complete and abort;
//! - `redo_log`: the redo parts this ldm writes (room reserved at prepare,
//!   records appended at commit, GCI markers and fsyncs for GCP_SAVEREQ);
//! - `lcp`: local checkpoints, one partition at a time in the background,
//!   and the redo tail they let move;
//! - `restore`, `lcp_restore`: RESTORE_REQ at start: format the redo log,
//!   or load each partition's local checkpoint, replay redo up to the
//!   restored GCI and resume the log.
//!
//! Architecture invariant: an after-image lives in the operation record
//! until commit; the row is untouched before commit, except the slot of a
//! prepared insert, which stays invisible (state Reserved) until then.

mod backup;
pub mod hash_index;
pub mod layout;
mod lcp;
mod lcp_pacing;
#[cfg(test)]
mod lcp_partial_tests;
mod lcp_restore;
#[cfg(test)]
mod lcp_test_disk;
#[cfg(test)]
mod lcp_tests;
mod locks;
pub mod operation;
pub mod page_memory;
pub mod partition;
mod prepare;
mod redo_log;
mod restore;
#[cfg(test)]
mod robustness_tests;
mod scan;
pub mod slots;
#[cfg(test)]
mod tests;

use kernel::{send, Block, Context};
use layout::RowLayout;
use operation::{Operation, OperationPool};
use page_memory::PageMemory;
use partition::Partition;
use signal::signals::*;
use signal::{codec, refusal, BlockRef, Envelope, ErrorCode, Signal};
use std::collections::VecDeque;
use std::sync::Arc;

pub use lcp::{LcpSettings, RECOVERY_WORK_RANGE};
pub use redo_log::RedoSettings;

/// How to build an ldm instance.
#[derive(Clone, Debug)]
pub struct LdmConfig {
    /// This instance's address.
    pub address: BlockRef,
    /// This instance's share of DataMemory, in bytes.
    pub data_memory_bytes: u64,
    /// Operation records.
    pub max_operations: u32,
    /// The redo log this instance writes; `None` when diskless.
    pub redo: Option<RedoSettings>,
}

/// A table as this ldm holds it.
pub(crate) struct TableState {
    pub(crate) definition: Arc<signal::schema::TableDef>,
    pub(crate) layout: RowLayout,
    /// Indexed by partition number; `None` for partitions other ldms own.
    pub(crate) partitions: Vec<Option<Partition>>,
    pub(crate) active_operations: u32,
}

/// The layout of `operation`'s table and the partition it runs in. Both
/// exist for every operation in flight: a table with operations is never
/// dropped, and an LQHKEYREQ for a partition this ldm does not own is
/// refused. Takes the tables alone, so that callers can hold `memory` and
/// `operations` beside what it returns.
pub(crate) fn layout_and_partition<'a>(
    tables: &'a mut [Option<TableState>],
    operation: &Operation,
) -> (&'a RowLayout, &'a mut Partition) {
    let table = tables[operation.table_id as usize]
        .as_mut()
        .expect("a table with operations in flight is never dropped");
    let partition = table.partitions[operation.partition as usize]
        .as_mut()
        .expect("operations run only in partitions this ldm owns");
    (&table.layout, partition)
}

/// The ldm block.
pub struct Ldm {
    pub(crate) address: BlockRef,
    pub(crate) memory: PageMemory,
    pub(crate) operations: OperationPool,
    pub(crate) tables: Vec<Option<TableState>>,
    /// Operations whose lock wait ended, to run again in order.
    pub(crate) restart: VecDeque<u32>,
    /// The redo log (`None`: diskless).
    pub(crate) redo: Option<redo_log::RedoLog>,
    /// A RESTORE_REQ in progress.
    pub(crate) restore: Option<restore::Restore>,
    /// Local checkpoints (idle when diskless).
    pub(crate) lcp: lcp::LcpEngine,
}

impl Ldm {
    /// Allocates this instance's DataMemory and operation records.
    pub fn new(config: LdmConfig) -> Ldm {
        Ldm {
            address: config.address,
            memory: PageMemory::new(config.data_memory_bytes),
            operations: OperationPool::new(config.max_operations),
            tables: Vec::new(),
            restart: VecDeque::with_capacity(config.max_operations as usize),
            redo: config.redo.map(redo_log::RedoLog::new),
            restore: None,
            lcp: lcp::LcpEngine::new(LcpSettings::default()),
        }
    }

    /// Sets how local checkpoints are paced (before the node starts).
    pub fn with_lcp_settings(mut self, settings: LcpSettings) -> Ldm {
        self.lcp = lcp::LcpEngine::new(settings);
        self
    }

    /// Local checkpoints that completed (their control file is durable)
    /// since this instance started.
    pub fn lcps_completed(&self) -> u64 {
        self.lcp.completed
    }

    /// Pages of DataMemory in use and in all.
    pub fn memory_pages(&self) -> (u32, u32) {
        (self.memory.used_pages(), self.memory.page_count())
    }

    /// Operation records in use.
    pub fn operations_in_use(&self) -> u32 {
        self.operations.in_use()
    }

    /// Rows stored in `table_id`'s partitions on this ldm.
    pub fn rows(&self, table_id: u32) -> u64 {
        self.tables
            .get(table_id as usize)
            .and_then(Option::as_ref)
            .map_or(0, |table| {
                table.partitions.iter().flatten().map(Partition::rows).sum()
            })
    }

    fn add_table(&mut self, from: BlockRef, request: LqhAddTabReq, ctx: &mut dyn Context) {
        let table = request.table;
        let layout = RowLayout::new(&table);
        let mut partitions: Vec<Option<Partition>> = (0..table.partitions).map(|_| None).collect();
        for (number, placement) in request.map.partitions.iter().enumerate() {
            let mine = placement.ldm_instance == self.address.instance
                && placement.replicas.contains(&self.address.node);
            if mine {
                if let Some(redo) = &self.redo {
                    // Asserts the part is one this instance writes.
                    redo.index_of(placement.redo_part);
                }
                partitions[number] = Some(Partition::new(
                    number as u32,
                    placement.redo_part,
                    &layout,
                    &self.memory,
                ));
            }
        }
        let id = table.id as usize;
        if self.tables.len() <= id {
            self.tables.resize_with(id + 1, || None);
        }
        assert!(
            self.tables[id].is_none(),
            "dict added table {id} twice without a drop"
        );
        self.tables[id] = Some(TableState {
            definition: Arc::clone(&table),
            layout,
            partitions,
            active_operations: 0,
        });
        // A table created while the node runs: its partitions get an empty
        // first LCP, and the conf waits for it.
        if self.lcp_create_table(table.id, from, ctx) {
            return;
        }
        send(ctx, self.address, from, AddTabConf { table_id: table.id });
    }

    fn drop_table(&mut self, from: BlockRef, order: DropTabOrd, ctx: &mut dyn Context) {
        let id = order.table_id as usize;
        let busy = match self.tables.get_mut(id).and_then(Option::as_mut) {
            Some(table) if table.active_operations > 0 => true,
            Some(table) => {
                for partition in table.partitions.iter_mut().flatten() {
                    partition.release(&mut self.memory);
                }
                self.tables[id] = None;
                false
            }
            None => false,
        };
        send(
            ctx,
            self.address,
            from,
            DropTabRep {
                table_id: order.table_id,
                busy,
            },
        );
    }

    fn lqh_key_req(&mut self, from: BlockRef, request: LqhKeyReq, ctx: &mut dyn Context) {
        // Refusals answer the tc, also when the request came from the
        // previous replica.
        let refuse = |ctx: &mut dyn Context, error| {
            send(
                ctx,
                self.address,
                request.tc,
                LqhKeyRef {
                    tc_op: request.tc_op,
                    error,
                },
            );
        };
        let Some(table) = self
            .tables
            .get_mut(request.table_id as usize)
            .and_then(Option::as_mut)
        else {
            return refuse(ctx, ErrorCode::UnknownTable);
        };
        if !matches!(
            table.partitions.get(request.partition as usize),
            Some(Some(_))
        ) {
            return refuse(ctx, ErrorCode::UnknownTable);
        }
        let chain_is_valid = request.position < request.chain.length
            && request.chain.nodes[request.position as usize] == self.address.node
            && (request.position == 0) == (request.previous_op == operation::NIL);
        assert!(
            chain_is_valid,
            "ldm {} got LQHKEYREQ from {from} for position {} of chain {:?}",
            self.address, request.position, request.chain
        );
        // A write's redo record must find room at commit, which cannot
        // fail: reserve it now, or refuse with a temporary error.
        let mut redo_reservation = None;
        if request.kind != OperationKind::Read {
            if let Some(redo) = self.redo.as_mut() {
                let part = table.partitions[request.partition as usize]
                    .as_ref()
                    .expect("checked above")
                    .redo_part;
                let part_index = redo.index_of(part);
                let bytes = redo_log::RedoLog::reservation_bytes(
                    request.key.len(),
                    table.layout.fixed_body_bytes + table.layout.var_max_bytes,
                );
                if let Err(error) = redo.reserve(part_index, bytes) {
                    if error == ErrorCode::RedoLogFull {
                        self.lcp.note_log_full(self.address, ctx);
                    }
                    return refuse(ctx, error);
                }
                redo_reservation = Some((part_index, bytes));
            }
        }
        let Some(index) = self.operations.seize(request.tc, request.tc_op) else {
            if let (Some((part_index, bytes)), Some(redo)) = (redo_reservation, self.redo.as_mut())
            {
                redo.release(part_index, bytes);
            }
            return refuse(ctx, ErrorCode::OutOfOperationRecords);
        };
        table.active_operations += 1;
        let operation = &mut self.operations[index];
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
        self.execute(index, ctx);
    }

    /// Releases an operation record and its table's count.
    pub(crate) fn release_operation(&mut self, index: u32) {
        self.release_redo_reservation(index);
        let table_id = self.operations[index].table_id;
        self.operations.release(index);
        if let Some(table) = self
            .tables
            .get_mut(table_id as usize)
            .and_then(Option::as_mut)
        {
            assert!(
                table.active_operations > 0,
                "table operation count underflow"
            );
            table.active_operations -= 1;
        }
    }

    /// Gives back operation `index`'s redo reservation, if it holds one.
    pub(crate) fn release_redo_reservation(&mut self, index: u32) {
        if let Some((part_index, bytes)) = self.operations[index].redo_reservation.take() {
            self.redo
                .as_mut()
                .expect("only an ldm with a redo log reserves")
                .release(part_index, bytes);
        }
    }

    /// GCP_SAVEREQ: make `gci` complete in every redo part, durably.
    fn gcp_save(&mut self, from: BlockRef, gci: signal::Gci, ctx: &mut dyn Context) {
        self.lcp_saw_save(gci.0, ctx);
        let Some(redo) = self.redo.as_mut() else {
            // Diskless: nothing to make durable.
            return send(ctx, self.address, from, GcpSaveConf { gci });
        };
        if let redo_log::Completed::Saved { gci, from } =
            redo.start_save(gci.0, from, self.address, ctx)
        {
            send(
                ctx,
                self.address,
                from,
                GcpSaveConf {
                    gci: signal::Gci(gci),
                },
            );
        }
    }

    fn run_restarts(&mut self, ctx: &mut dyn Context) {
        while let Some(index) = self.restart.pop_front() {
            self.execute(index, ctx);
        }
    }
}

impl Block for Ldm {
    fn address(&self) -> BlockRef {
        self.address
    }

    /// A queued LQHKEYREQ's lookup, one stage per distance: the hash
    /// bucket, then its first element, then the row it names.
    fn prefetch(&self, envelope: &Envelope, distance: usize) {
        let Signal::LqhKeyReq(request) = &envelope.signal else {
            return;
        };
        let Some(Some(table)) = self.tables.get(request.table_id as usize) else {
            return;
        };
        let Some(Some(partition)) = table.partitions.get(request.partition as usize) else {
            return;
        };
        let hash = request.hash.index_hash();
        if let Some(row) = partition.index.prefetch(&self.memory, hash, distance) {
            partition.fixed.prefetch(&self.memory, row);
        }
    }

    fn handle(&mut self, envelope: Envelope, ctx: &mut dyn Context) {
        let from = envelope.from;
        match envelope.signal {
            Signal::LqhKeyReq(request) => self.lqh_key_req(from, request, ctx),
            Signal::CommitReq(request) => self.commit(from, request, ctx),
            Signal::CompleteReq(request) => self.complete(from, request, ctx),
            Signal::AbortReq(request) => self.abort(from, request, ctx),
            Signal::ScanPartitionReq(request) => self.scan_partition(from, request, ctx),
            Signal::LqhAddTabReq(request) => self.add_table(from, request, ctx),
            Signal::DropTabOrd(order) => self.drop_table(from, order, ctx),
            Signal::GcpSaveReq(request) => self.gcp_save(from, request.gci, ctx),
            Signal::RestoreReq(request) => self.restore(from, request.restored_gci.0, ctx),
            Signal::FsConf(conf) => self.fs_answer(conf.token, conf.result, ctx),
            Signal::ContinueB(job) => self.lcp_continue(job.job, ctx),
            Signal::GcpDurableRep(report) => self.lcp_complete(report.gci.0, ctx),
            Signal::StartPhaseReq(request) => send(
                ctx,
                self.address,
                from,
                StartPhaseConf {
                    phase: request.phase,
                },
            ),
            // From API nodes addressed to this block: never panic.
            other if codec::is_api_request(other.number()) => {
                if let Some(reply) = refusal::refuse_api_request(&other) {
                    send(ctx, self.address, from, reply);
                }
            }
            other => panic!(
                "ldm {} got unexpected signal {} from {from}",
                self.address,
                other.name()
            ),
        }
        self.run_restarts(ctx);
    }
}
