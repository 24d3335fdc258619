//! ldm: the local data manager block (NDB's DBLQH + DBACC + DBTUP): one
//! instance per ldm thread, owning a disjoint set of partitions with their
//! rows, primary-key hash indexes, row locks and operation records
//! (docs/design/data-and-routing.md, docs/design/transactions.md).
//!
//! The rows themselves, without signals, are the `rowstore` crate
//! (DataMemory pages, slots, row layout, hash index, a partition's rows,
//! the row-id cursor). This crate is the block around them, split by
//! concern as NDB splits DBLQH, DBACC, DBTUP and dbtux/ into files by job:
//! - `lib.rs`: the block, its tables and partitions, the signal dispatch;
//! - `operation`: operation records and their states;
//! - `prepare`: LQHKEYREQ on the primary (lookup, lock, after-image);
//! - `backup`: LQHKEYREQ on a backup (place the primary's row by row id);
//! - `locks`: lock queues on rows;
//! - `commit`: COMMIT and COMPLETE along the replica chain;
//! - `abort`: ABORT, and undoing a prepare;
//! - `resolve`: RESOLVE_REQ, finishing an operation on the live replicas
//!   after a node of its chain, or its coordinator, failed;
//! - `takeover`: TAKEOVER_REQ, reporting the operations of failed tcs to
//!   the tc taking their transactions over;
//! - `alter`: LQH_ALTER_TAB_REQ, a table's indexes built or dropped
//!   while it is written;
//! - `scan`: SCAN_PARTITIONREQ, the replica checker's partition scan;
//! - `client_scan`: SCAN_REQ, a client's committed-read scan of one
//!   partition, in row-id order or through the primary key's ordered index
//!   between bounds, filtered, projected or counted at the ldm;
//! - `file_token`: what a file request is for, and the one place its
//!   answer (FSCONF) is dispatched from;
//! - `redo_log`: the redo parts this ldm writes (room reserved at prepare,
//!   records appended at commit, GCI markers and fsyncs for GCP_SAVEREQ);
//! - `lcp`: local checkpoints, one partition at a time in the background
//!   (`schedule`, `scan`, `files`, `pacing`), and the redo tail they let
//!   move;
//! - `restore`, `lcp_restore`: RESTORE_REQ at start: format the redo log,
//!   or load each partition's local checkpoint, replay redo up to the
//!   restored GCI and resume the log.
//!
//! Architecture invariant: an after-image lives in the operation record
//! until commit; the row is untouched before commit, except the slot of a
//! prepared insert, which stays invisible (state Reserved) until then.

mod abort;
mod alter;
#[cfg(test)]
mod alter_tests;
mod backup;
mod client_scan;
mod commit;
mod copy;
#[cfg(test)]
mod copy_tests;
mod file_token;
#[cfg(test)]
mod index_tests;
mod lcp;
#[cfg(test)]
mod lcp_partial_tests;
mod lcp_restore;
#[cfg(test)]
mod lcp_test_disk;
#[cfg(test)]
mod lcp_tests;
#[cfg(test)]
mod lock_tests;
mod locks;
pub mod operation;
mod own_writes;
mod prepare;
mod redo_log;
mod resolve;
mod restore;
#[cfg(test)]
mod robustness_tests;
#[cfg(test)]
mod row_tests;
mod scan;
mod takeover;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod value_tests;

use kernel::{send, Block, Context};
use lcp::PartitionLcp;
use operation::{Operation, OperationPool};
use rowstore::{PageMemory, Partition, RowLayout};
use signal::schema::TableDef;
use signal::signals::*;
use signal::{codec, BlockRef, Envelope, Signal};
use std::collections::VecDeque;
use std::sync::Arc;

pub use lcp::{LcpSettings, RECOVERY_WORK_RANGE};
pub use redo_log::RedoSettings;

/// A partition's committed rows as (row id, GCI, image), in row-id order
/// ([`Ldm::committed_rows`]).
pub type CommittedRows = Vec<(u32, u64, Vec<u8>)>;

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
    pub(crate) partitions: Vec<Option<PartitionState>>,
    pub(crate) active_operations: u32,
    /// Rises when an index build begins (`alter`); an operation keeps the
    /// value it prepared under.
    pub(crate) build_epoch: u32,
    /// Operations in flight prepared before the last build began (under
    /// an older epoch): that build finishes only once they are gone.
    pub(crate) operations_before_build: u32,
    /// A unique index's hidden table: its base table's id (it is added
    /// and dropped with it, and left out of a take-over's answer).
    pub(crate) hidden_of: Option<u32>,
}

/// A partition as this ldm holds it: its rows, and what the ldm keeps
/// beside them.
pub(crate) struct PartitionState {
    /// Its rows, hash index and row headers.
    pub(crate) store: Partition,
    /// Its redo log part, fixed at creation.
    pub(crate) redo_part: u32,
    /// Its local checkpoints (`lcp`).
    pub(crate) lcp: PartitionLcp,
    /// Its replicas in map order (a restarting node copies from the first
    /// one alive that is not starting).
    pub(crate) replicas: Vec<signal::NodeId>,
    /// At the primary: a restarting node every write prepared here runs
    /// on to, last in its chain (`copy`).
    pub(crate) attached: Option<signal::NodeId>,
    /// At a restarting node, while the partition is being copied: writes
    /// from the chain are applied by row id at commit (`copy`).
    pub(crate) applying: bool,
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
    let (layout, partition) = layout_and_partition_state(tables, operation);
    (layout, &mut partition.store)
}

/// As `layout_and_partition`, with what the ldm keeps beside the rows.
pub(crate) fn layout_and_partition_state<'a>(
    tables: &'a mut [Option<TableState>],
    operation: &Operation,
) -> (&'a RowLayout, &'a mut PartitionState) {
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
    /// The agreed membership: nothing of a failed node is handled, and
    /// chains skip it.
    pub(crate) node_failures: kernel::node_failures::NodeFailures,
    /// Reads are served until then (ctx ms), by membership's read lease
    /// (docs/design/failures.md §5); `u64::MAX` until membership says
    /// otherwise (one node, or a cluster not yet formed).
    pub(crate) read_lease_until_ms: u64,
    /// A node restart's copies, as a primary or as the restarting node.
    pub(crate) copies: copy::Copies,
    /// The GCI this ldm restored at start (0: none).
    pub(crate) restored_gci: u64,
    /// Index builds under way (`alter`).
    pub(crate) builds: alter::Builds,
    /// An index scan's rows its transaction wrote away from their entries,
    /// with their operations (`client_scan`): kept for its capacity.
    pub(crate) scan_placed: Vec<(rowstore::Entry, u32)>,
    /// Each transaction's last operation prepared here with a row image,
    /// the head of its list of written rows (`own_writes`).
    pub(crate) written_by_transaction: stdx::FixedMap,
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
            node_failures: Default::default(),
            read_lease_until_ms: u64::MAX,
            copies: copy::Copies::default(),
            restored_gci: 0,
            builds: alter::Builds::default(),
            scan_placed: Vec::new(),
            // A transaction with a listed operation has one entry: never
            // more than the operation records.
            written_by_transaction: stdx::FixedMap::with_capacity(config.max_operations as usize),
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

    /// Checks every partition's ordered index against its rows (the
    /// entries are the live rows, in key order, with their prefixes);
    /// returns the rows checked. Walks every row: for tests and the
    /// simulator's checks when a run has settled.
    pub fn check_ordered_indexes(&self) -> Result<u64, String> {
        let mut rows = 0;
        for (table_id, table) in self.tables.iter().enumerate() {
            let Some(table) = table else { continue };
            for (partition_id, partition) in table.partitions.iter().enumerate() {
                let Some(partition) = partition else { continue };
                rows += partition
                    .store
                    .check_ordered(&self.memory, &table.layout)
                    .map_err(|problem| {
                        format!(
                            "ldm {}: table {table_id} partition {partition_id}: {problem}",
                            self.address
                        )
                    })?;
            }
        }
        Ok(rows)
    }

    /// (id, version, revision) of every table this ldm stores: its answer
    /// to a master dict's take-over, and what the simulator compares.
    pub fn table_versions(&self) -> Vec<(u32, u32, u32)> {
        let tables = self.tables.iter().enumerate();
        tables
            .filter_map(|(id, table)| {
                let table = table.as_ref().filter(|table| table.hidden_of.is_none())?;
                let definition = &table.definition;
                Some((id as u32, definition.version, definition.revision))
            })
            .collect()
    }

    /// (id, base table id) of every unique index's hidden table this ldm
    /// holds, for the simulator's schema agreement.
    pub fn hidden_tables(&self) -> Vec<(u32, u32)> {
        let tables = self.tables.iter().enumerate();
        tables
            .filter_map(|(id, table)| Some((id as u32, table.as_ref()?.hidden_of?)))
            .collect()
    }

    /// The partitions of `table_id` this ldm holds.
    pub fn partitions_of(&self, table_id: u32) -> Vec<u32> {
        self.tables
            .get(table_id as usize)
            .and_then(Option::as_ref)
            .map_or(Vec::new(), |table| {
                let partitions = table.partitions.iter().flatten();
                partitions.map(|partition| partition.store.id).collect()
            })
    }

    /// The committed rows of `table_id`'s partition `partition` on this
    /// ldm, in row-id order: (row id, GCI, image), for the simulator's
    /// comparison of replicas; `None` when this ldm does not hold it.
    pub fn committed_rows(&self, table_id: u32, partition: u32) -> Option<CommittedRows> {
        let table = self.tables.get(table_id as usize)?.as_ref()?;
        let state = table.partitions.get(partition as usize)?.as_ref()?;
        let (store, layout) = (&state.store, &table.layout);
        let mut cursor = rowstore::RowIdCursor::new(0);
        let mut rows = Vec::new();
        while let Some(slot) = cursor.peek(store, &self.memory) {
            if let rowstore::SlotHolds::Committed { gci } = slot.holds {
                let view = store.view(&self.memory, layout, slot.row_id);
                let mut image = view.fixed.to_vec();
                image.extend_from_slice(&view.var[..layout.var_part_bytes(view.var)]);
                rows.push((slot.row_id, gci, image));
            }
            cursor.advance();
        }
        Some(rows)
    }

    /// Rows stored in `table_id`'s partitions on this ldm.
    pub fn rows(&self, table_id: u32) -> u64 {
        self.tables
            .get(table_id as usize)
            .and_then(Option::as_ref)
            .map_or(0, |table| {
                table
                    .partitions
                    .iter()
                    .flatten()
                    .map(|partition| partition.store.rows())
                    .sum()
            })
    }

    fn add_table(&mut self, from: BlockRef, request: LqhAddTabReq, ctx: &mut dyn Context) {
        let table = request.table;
        // Each unique index's hidden table, placed by the base table's map
        // (docs/design/scans-and-indexes.md §5).
        for index in table.unique_indexes() {
            let hidden = table
                .unique_index_table(index)
                .expect("a unique index has a hidden table");
            self.register_table(Arc::new(hidden), &request.map, Some(table.id));
        }
        self.register_table(Arc::clone(&table), &request.map, None);
        // A table created while the node runs: its partitions get an empty
        // first LCP, and the conf waits for it.
        if self.lcp_create_table(table.id, from, ctx) {
            return;
        }
        send(ctx, self.address, from, AddTabConf { table_id: table.id });
    }

    /// Takes table `table` in, with the partitions of `map` this instance
    /// holds.
    fn register_table(&mut self, table: Arc<TableDef>, map: &PartitionMap, hidden_of: Option<u32>) {
        let layout = RowLayout::new(&table);
        let mut partitions: Vec<Option<PartitionState>> =
            (0..table.partitions).map(|_| None).collect();
        for (number, placement) in map.partitions.iter().enumerate() {
            let mine = placement.ldm_instance == self.address.instance
                && placement.replicas.contains(&self.address.node);
            if mine {
                if let Some(redo) = &self.redo {
                    // Asserts the part is one this instance writes.
                    redo.index_of(placement.redo_part);
                }
                let mut store = Partition::new(number as u32, &layout, &self.memory);
                for index in &table.indexes {
                    store.add_secondary_index(&self.memory, &layout, index.id, &index.columns);
                }
                partitions[number] = Some(PartitionState {
                    store,
                    redo_part: placement.redo_part,
                    lcp: PartitionLcp::default(),
                    replicas: placement.replicas.clone(),
                    attached: None,
                    applying: false,
                });
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
            definition: table,
            layout,
            partitions,
            active_operations: 0,
            build_epoch: 0,
            operations_before_build: 0,
            hidden_of,
        });
    }

    fn drop_table(&mut self, from: BlockRef, order: DropTabOrd, ctx: &mut dyn Context) {
        let id = order.table_id as usize;
        // A table whose first (empty) LCP is still being written waits
        // for it too: a take-over may drop a table it just created.
        let creating = self.lcp.creating(order.table_id);
        // A base table goes with its unique indexes' hidden tables (a
        // hidden table is never dropped alone).
        let base = self.tables.get(id).and_then(Option::as_ref);
        let base = base.filter(|table| table.hidden_of.is_none());
        // (Those of unique indexes dropped alone, still in use, too.)
        let hidden = self.tables.iter().enumerate().filter(|(_, table)| {
            table
                .as_ref()
                .is_some_and(|table| table.hidden_of == Some(order.table_id))
        });
        let ids: Vec<u32> = match base {
            Some(_) => std::iter::once(order.table_id)
                .chain(hidden.map(|(id, _)| id as u32))
                .collect(),
            None => Vec::new(),
        };
        let busy = creating
            || ids.iter().any(|&id| {
                self.lcp.creating(id)
                    || self.tables[id as usize]
                        .as_ref()
                        .is_some_and(|table| table.active_operations > 0)
            });
        if !busy {
            for id in ids {
                if let Some(mut table) = self.tables[id as usize].take() {
                    for partition in table.partitions.iter_mut().flatten() {
                        partition.store.release(&mut self.memory);
                    }
                }
                self.forget_build(id);
            }
        }
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

    /// Releases an operation record and its table's count.
    pub(crate) fn release_operation(&mut self, index: u32) {
        // A waiter its row's lock holder let go of sits in the restart
        // queue until the end of the signal; released meanwhile (a
        // take-over's RESOLVE_REQ aborting it, say), it must not run.
        if !self.restart.is_empty() {
            self.restart.retain(|&queued| queued != index);
        }
        self.release_redo_reservation(index);
        self.unlist_written(index);
        let table_id = self.operations[index].table_id;
        let build_epoch = self.operations[index].build_epoch;
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
            if build_epoch < table.build_epoch {
                assert!(
                    table.operations_before_build > 0,
                    "table {table_id}: an operation from before the last index build \
                     was not counted when it began"
                );
                table.operations_before_build -= 1;
            }
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

    fn run_restarts(&mut self, ctx: &mut dyn Context) {
        while let Some(index) = self.restart.pop_front() {
            self.execute(index, ctx);
        }
    }
}

impl Ldm {
    /// This node restarts into a running cluster: nothing from another
    /// data node is handled until it is admitted (a late signal meant for
    /// its previous incarnation must not reach this one).
    pub fn await_admission(&mut self) {
        let own = self.address.node;
        self.node_failures.await_admission(own);
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
        let partition = &partition.store;
        if let Some(row) = partition.index.prefetch(&self.memory, hash, distance) {
            partition.fixed.prefetch(&self.memory, row);
        }
    }

    fn handle(&mut self, envelope: Envelope, ctx: &mut dyn Context) {
        let from = envelope.from;
        if self.node_failures.refuses(from) {
            return;
        }
        match envelope.signal {
            Signal::LqhKeyReq(request) => self.lqh_key_req(from, request, ctx),
            Signal::CommitReq(request) => self.commit(from, request, ctx),
            Signal::CompleteReq(request) => self.complete(from, request, ctx),
            Signal::AbortReq(request) => self.abort(from, request, ctx),
            Signal::ResolveReq(request) => self.resolve(from, request, ctx),
            Signal::TakeoverReq(request) => self.takeover(from, request, ctx),
            Signal::ScanPartitionReq(request) => self.scan_partition(from, request, ctx),
            Signal::ScanReq(request) => self.client_scan(from, request, ctx),
            Signal::LqhAddTabReq(request) => self.add_table(from, request, ctx),
            Signal::DropTabOrd(order) => self.drop_table(from, order, ctx),
            Signal::LqhAlterTabReq(request) => self.alter_table(from, request, ctx),
            Signal::DictTakeoverReq(request) => {
                let tables = self.table_versions();
                let me = self.address;
                kernel::schema_takeover::answer(ctx, me, from, request, 0, tables.into_iter());
            }
            Signal::GcpSaveReq(request) => self.gcp_save(from, request.gci, ctx),
            Signal::RestoreReq(request) => self.restore(from, request.restored_gci.0, ctx),
            Signal::FsConf(conf) => self.fs_answer(conf.token, conf.result, ctx),
            Signal::ContinueB(job) if job.job == alter::job::BUILD => self.build_step(ctx),
            Signal::ContinueB(job) if job.job == restore::job::BUILD_INDEXES => {
                self.build_restored_indexes_step(ctx)
            }
            Signal::ContinueB(job) if job.job >= copy::job::SEND => {
                self.copy_continue(job.job, ctx)
            }
            Signal::ContinueB(job) => self.lcp_continue(job.job, ctx),
            Signal::CopyFragReq(request) => self.copy_fragment(from, request, ctx),
            Signal::CopyFragRef(refusal) => self.copy_refused(from, refusal, ctx),
            Signal::CopyRowsReq(request) => self.copy_rows(from, request, ctx),
            Signal::CopyRowsConf(conf) => self.copy_rows_applied(from, conf, ctx),
            Signal::GcpDurableRep(report) => self.lcp_complete(report.gci.0, ctx),
            Signal::NodeFailRep(report) => {
                let failed = self.node_failures.install(self.address, from, &report, ctx);
                if !failed.is_empty() {
                    self.copy_without(failed);
                    self.copy_source_failed(failed, ctx);
                }
            }
            Signal::NodeFailCompleteRep(report) => {
                self.node_failures.complete(report.membership_id);
            }
            Signal::ReadLeaseRep(report) if from.node == self.address.node => {
                self.read_lease_until_ms = report.valid_until_ms;
            }
            Signal::StartPhaseReq(request) if request.phase == signal::phases::COPY_DATA => {
                self.copy_phase(from, ctx)
            }
            Signal::StartPhaseReq(request) if request.phase == signal::phases::LOCAL_CHECKPOINT => {
                self.checkpoint_phase(from, ctx)
            }
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
                if let Some(reply) = other.refusal() {
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
