//! A test harness for the ldm's disk paths (redo, LCP, restore): one ldm
//! driven through a context that performs its file requests against an
//! in-memory disk and delivers the answers, self-signals and timers back to
//! it, while the test plays dict, dih and the tc.
//!
//! The disk keeps, per file, what was written and what an fsync made
//! durable; a crash keeps either the durable bytes only, or everything
//! written (unsynced writes that happened to reach the disk). A file
//! request reaches the disk when the ldm sends it, or, with
//! `NodeOptions::deferred_io`, when its answer is delivered (one per step,
//! in order: a test can stop the node between any two).
//!
//! `NodeOptions` chooses the ldm's DataMemory, operation records, redo
//! geometry, LCP settings and row size; its `Default` is what
//! `Node::initial` and `Node::restart` use.

use crate::lcp::LcpSettings;
use crate::redo_log::RedoSettings;
use crate::PartitionState;
use crate::{Ldm, LdmConfig};
use kernel::testing::{column, one_node_map};
use kernel::{Block, CheckpointReport, Context, Report};
use rowstore::RowState;
use signal::attr::{key_hash, AttrWriter, KeyHash};
use signal::fs::{FileName, FsDone, FsError, FsErrorKind, FsOperation, OpenMode};
use signal::partition::bucket;
use signal::schema::{ColumnType, TableDef};
use signal::signals::*;
use signal::{
    BlockKind, BlockRef, Envelope, ErrorCode, Gci, NodeId, Section, SectionPool, Signal,
    TransactionId,
};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use storage::redo::{RedoGeometry, PAGE_BYTES};

pub(crate) const NODE: NodeId = NodeId(2);
pub(crate) const LDM: BlockRef = BlockRef::new(NODE, BlockKind::Ldm, 0);
pub(crate) const TC: BlockRef = BlockRef::new(NODE, BlockKind::Tc, 0);
pub(crate) const DICT: BlockRef = BlockRef::new(NODE, BlockKind::Dict, 0);
pub(crate) const DIH: BlockRef = BlockRef::new(NODE, BlockKind::Dih, 0);
const IO: BlockRef = BlockRef::new(NODE, BlockKind::Io, 0);

pub(crate) const TABLE_ID: u32 = 3;
pub(crate) const PARTITIONS: u32 = 2;

/// Columns: k INT key, v BIGINT NOT NULL, s VARCHAR(40), b VARBINARY(600).
pub(crate) fn table(version: u32) -> TableDef {
    let table = TableDef {
        indexes: Vec::new(),
        revision: 0,
        id: TABLE_ID,
        version,
        name: "rows".into(),
        columns: vec![
            column("k", ColumnType::Int { unsigned: false }, false),
            column("v", ColumnType::BigInt { unsigned: false }, false),
            column("s", ColumnType::VarChar(40), true),
            column("b", ColumnType::VarBinary(600), true),
        ],
        primary_key: vec![0],
        partitions: PARTITIONS,
        partition_key: Vec::new(),
    };
    table.validate().expect("test table is valid");
    table
}

/// Where the partitions' redo goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Parts {
    /// Partition p in redo part p.
    Own,
    /// Every partition in part 0 (as partitions of several tables share
    /// their ldm's parts).
    Shared,
}

/// One node, one ldm: partition p is in redo part p, or all in part 0.
fn partition_map(table: &TableDef, parts: Parts) -> PartitionMap {
    one_node_map(table, NODE, 1, |partition| match parts {
        Parts::Own => partition,
        Parts::Shared => 0,
    })
}

pub(crate) fn gci(n: u32) -> Gci {
    Gci::from_parts(n, 0)
}

/// Signals one `pump` may run: far more than any restore or LCP slice
/// takes in these tests.
const PUMP_LIMIT: u64 = 1_000_000;

/// A file: what was written, and what the last fsync made durable.
#[derive(Clone, Debug, Default)]
pub(crate) struct DiskFile {
    pub(crate) current: Vec<u8>,
    pub(crate) durable: Vec<u8>,
}

/// The in-memory disk.
pub(crate) type Disk = BTreeMap<FileName, DiskFile>;

/// What the ldm's queue holds: a signal to it, or a file request whose
/// answer is due (performed on the disk only when it is delivered, with
/// `NodeOptions::deferred_io`).
enum Queued {
    Signal(Envelope),
    Io { token: u64, operation: FsOperation },
}

/// The context: the disk, the ldm's own queue and timers, and what it sent
/// to other blocks.
pub(crate) struct DiskContext {
    pub(crate) now_ms: u64,
    pub(crate) disk: Disk,
    queue: VecDeque<Queued>,
    /// File requests reach the disk one per step, in order, when their
    /// answer is delivered (a crash loses those not yet performed);
    /// otherwise at once, when the ldm sends them.
    deferred_io: bool,
    timers: Vec<(u64, Envelope)>,
    pub(crate) outbox: Vec<Envelope>,
    pub(crate) reports: Vec<Report>,
    pool: &'static SectionPool,
}

impl DiskContext {
    fn new(disk: Disk, deferred_io: bool) -> DiskContext {
        DiskContext {
            now_ms: 0,
            disk,
            queue: VecDeque::new(),
            deferred_io,
            timers: Vec::new(),
            outbox: Vec::new(),
            reports: Vec::new(),
            pool: SectionPool::leak([512, 128, 64, 32, 32, 32]),
        }
    }

    fn perform(&mut self, operation: FsOperation) -> Result<FsDone, FsError> {
        let missing = |operation: &FsOperation| {
            operation.error(FsErrorKind::NotFound, "No such file or directory")
        };
        Ok(match operation {
            FsOperation::Open { file, mode } => {
                if mode == OpenMode::Existing && !self.disk.contains_key(&file) {
                    return Err(missing(&operation));
                }
                let entry = self.disk.entry(file).or_default();
                FsDone::Opened {
                    size: entry.current.len() as u64,
                }
            }
            FsOperation::Write {
                file,
                offset,
                ref data,
            } => {
                let Some(entry) = self.disk.get_mut(&file) else {
                    return Err(missing(&operation));
                };
                let end = offset as usize + data.len();
                if entry.current.len() < end {
                    entry.current.resize(end, 0);
                }
                entry.current[offset as usize..end].copy_from_slice(data.as_slice());
                FsDone::Written {
                    bytes: data.len() as u32,
                }
            }
            FsOperation::Read { file, offset, len } => {
                let Some(entry) = self.disk.get(&file) else {
                    return Err(missing(&operation));
                };
                let start = (offset as usize).min(entry.current.len());
                let end = (start + len as usize).min(entry.current.len());
                let data = self
                    .pool
                    .copy_from(&entry.current[start..end])
                    .expect("the test pool has room");
                FsDone::Read { data }
            }
            FsOperation::Sync { file } => {
                let Some(entry) = self.disk.get_mut(&file) else {
                    return Err(missing(&operation));
                };
                entry.durable = entry.current.clone();
                FsDone::Synced
            }
            FsOperation::SetLen { file, len } => {
                let Some(entry) = self.disk.get_mut(&file) else {
                    return Err(missing(&operation));
                };
                entry.current.resize(len as usize, 0);
                FsDone::LenSet
            }
            FsOperation::Delete { file } => {
                if self.disk.remove(&file).is_none() {
                    return Err(missing(&operation));
                }
                FsDone::Deleted
            }
            FsOperation::List { dir } => FsDone::Listed {
                files: self
                    .disk
                    .keys()
                    .filter(|file| file.dir() == dir)
                    .copied()
                    .collect(),
            },
            other => panic!("the ldm asked for {other:?}, which the test disk does not do"),
        })
    }
}

impl Context for DiskContext {
    fn now_ms(&self) -> u64 {
        self.now_ms
    }

    fn random(&mut self) -> u64 {
        panic!("the ldm uses no randomness")
    }

    fn send(&mut self, envelope: Envelope) {
        if envelope.to == LDM {
            self.queue.push_back(Queued::Signal(envelope));
        } else {
            self.outbox.push(envelope);
        }
    }

    fn send_delayed(&mut self, envelope: Envelope, delay_ms: u64) {
        assert_eq!(envelope.to, LDM, "the ldm delays only signals to itself");
        self.timers.push((self.now_ms + delay_ms, envelope));
    }

    fn report(&mut self, report: Report) {
        self.reports.push(report);
    }

    fn pool(&self) -> &'static SectionPool {
        self.pool
    }

    fn fs_request(&mut self, from: BlockRef, token: u64, operation: FsOperation) {
        assert_eq!(from, LDM);
        if self.deferred_io {
            self.queue.push_back(Queued::Io { token, operation });
        } else {
            let result = self.perform(operation);
            self.queue
                .push_back(Queued::Signal(io_answer(token, result)));
        }
    }
}

fn io_answer(token: u64, result: Result<FsDone, FsError>) -> Envelope {
    Envelope {
        from: IO,
        to: LDM,
        signal: FsConf { token, result }.into(),
    }
}

/// A row as stored: (GCI, image).
pub(crate) type Rows = BTreeMap<(u32, u32), (u64, Vec<u8>)>;

/// One ldm on the test disk.
pub(crate) struct Node {
    pub(crate) ldm: Ldm,
    pub(crate) ctx: DiskContext,
    table: Arc<TableDef>,
    map: Arc<PartitionMap>,
    next_op: u32,
    /// While set, delivering a signal does not run what it queues.
    pub(crate) hold: bool,
    blob: BlobSize,
}

/// An operation prepared and not yet committed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Prepared {
    ldm_op: u32,
    tc_op: u32,
    transaction_id: TransactionId,
}

/// The length of column b of a row `write` writes with value v:
/// `base + |v| mod spread` bytes (`spread` 0: always `base`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlobSize {
    pub(crate) base: usize,
    pub(crate) spread: u64,
}

impl BlobSize {
    fn of(self, v: i64) -> usize {
        self.base
            + match self.spread {
                0 => 0,
                spread => (v.unsigned_abs() % spread) as usize,
            }
    }
}

/// How to build the test's ldm. `Default` is what `Node::initial` and
/// `Node::restart` use.
#[derive(Clone, Debug)]
pub(crate) struct NodeOptions {
    /// The ldm's DataMemory, bytes.
    pub(crate) data_memory_bytes: u64,
    /// Operation records.
    pub(crate) max_operations: u32,
    /// Redo files per part.
    pub(crate) redo_files: u32,
    /// Bytes of each redo file (its header page included).
    pub(crate) redo_file_bytes: u64,
    /// Redo pages buffered per part.
    pub(crate) redo_buffer_pages: u32,
    /// How LCPs are paced and sized.
    pub(crate) lcp: LcpSettings,
    /// Where the partitions' redo goes.
    pub(crate) parts: Parts,
    /// The length of the rows' column b.
    pub(crate) blob: BlobSize,
    /// File requests reach the disk only when their answer is delivered
    /// (so a test can stop the node between two requests of one signal).
    pub(crate) deferred_io: bool,
}

impl Default for NodeOptions {
    fn default() -> NodeOptions {
        NodeOptions {
            data_memory_bytes: 16 << 20,
            max_operations: 64,
            // 4 files of 32 redo pages: the smallest ring.
            redo_files: 4,
            redo_file_bytes: 33 * PAGE_BYTES as u64,
            redo_buffer_pages: 40,
            lcp: LcpSettings {
                pause_ms: 10,
                rows_per_slice: 16,
                ..LcpSettings::default()
            },
            parts: Parts::Own,
            blob: BlobSize {
                base: 200,
                spread: 300,
            },
            deferred_io: false,
        }
    }
}

impl NodeOptions {
    fn redo_settings(&self) -> RedoSettings {
        RedoSettings {
            geometry: RedoGeometry::new(self.redo_files, self.redo_file_bytes).expect("valid"),
            buffer_pages: self.redo_buffer_pages,
            marker_reserve_pages: 4,
            parts: (0..PARTITIONS).collect(),
        }
    }
}

impl Node {
    fn build(disk: Disk, version: u32, options: &NodeOptions) -> Node {
        let ldm = Ldm::new(LdmConfig {
            address: LDM,
            data_memory_bytes: options.data_memory_bytes,
            max_operations: options.max_operations,
            redo: Some(options.redo_settings()),
        })
        .with_lcp_settings(options.lcp.clone());
        let table = Arc::new(table(version));
        let map = Arc::new(partition_map(&table, options.parts));
        Node {
            ldm,
            ctx: DiskContext::new(disk, options.deferred_io),
            table,
            map,
            next_op: 0,
            hold: false,
            blob: options.blob,
        }
    }

    /// An initial start: format the redo log, then create the table.
    pub(crate) fn initial() -> Node {
        Node::initial_with(Parts::Own)
    }

    /// An initial start with the partitions' redo in `parts`.
    pub(crate) fn initial_with(parts: Parts) -> Node {
        Node::initial_with_options(&NodeOptions {
            parts,
            ..NodeOptions::default()
        })
    }

    /// An initial start of an ldm built as `options` says.
    pub(crate) fn initial_with_options(options: &NodeOptions) -> Node {
        let mut node = Node::build(Disk::new(), 1, options);
        node.restore_req(0);
        node.add_table();
        node
    }

    /// A system restart from `disk`, restoring `restored_gci`.
    pub(crate) fn restart(disk: Disk, restored_gci: Gci) -> Node {
        Node::restart_with(disk, restored_gci, Parts::Own)
    }

    /// A system restart of a node whose partitions' redo is in `parts`.
    pub(crate) fn restart_with(disk: Disk, restored_gci: Gci, parts: Parts) -> Node {
        Node::restart_with_options(
            disk,
            restored_gci,
            &NodeOptions {
                parts,
                ..NodeOptions::default()
            },
        )
    }

    /// A system restart from `disk` of an ldm built as `options` says.
    pub(crate) fn restart_with_options(
        disk: Disk,
        restored_gci: Gci,
        options: &NodeOptions,
    ) -> Node {
        let mut node = Node::build(disk, 1, options);
        node.add_table();
        node.restore_req(restored_gci.0);
        node
    }

    fn add_table(&mut self) {
        let (table, map) = (self.table.clone(), self.map.clone());
        self.deliver(DICT, LqhAddTabReq { table, map });
        let answer = self.take_one();
        assert_eq!(answer.to, DICT);
        assert!(matches!(
            answer.signal,
            Signal::AddTabConf(AddTabConf { table_id: TABLE_ID })
        ));
    }

    fn restore_req(&mut self, restored_gci: u64) {
        self.deliver(
            DIH,
            RestoreReq {
                restored_gci: Gci(restored_gci),
            },
        );
        let answer = self.take_one();
        assert!(
            matches!(answer.signal, Signal::RestoreConf(_)),
            "{answer:?}"
        );
    }

    /// Delivers a signal from a peer, then everything it causes (but no
    /// timer).
    pub(crate) fn deliver(&mut self, from: BlockRef, signal: impl Into<Signal>) {
        self.ldm.handle(
            Envelope {
                from,
                to: LDM,
                signal: signal.into(),
            },
            &mut self.ctx,
        );
        if !self.hold {
            self.pump();
        }
    }

    /// Runs the ldm's queue (self-signals, io answers) until empty. Stops
    /// the test if the ldm never goes idle without time passing (a loop of
    /// self-signals would otherwise run, and grow the disk, forever).
    pub(crate) fn pump(&mut self) {
        let mut steps = 0u64;
        while self.step() {
            steps += 1;
            assert!(
                steps < PUMP_LIMIT,
                "the ldm does not go idle: {steps} signals at {} ms, {} LCPs completed",
                self.ctx.now_ms,
                self.ldm.lcps_completed()
            );
        }
    }

    /// Runs one queued signal (performing its file request first, with
    /// deferred io); false when none is queued.
    pub(crate) fn step(&mut self) -> bool {
        let envelope = match self.ctx.queue.pop_front() {
            None => return false,
            Some(Queued::Signal(envelope)) => envelope,
            Some(Queued::Io { token, operation }) => {
                let result = self.ctx.perform(operation);
                io_answer(token, result)
            }
        };
        self.ldm.handle(envelope, &mut self.ctx);
        true
    }

    /// Moves time to the next timer and queues every timer due then.
    pub(crate) fn fire_timers(&mut self) {
        let due = self
            .ctx
            .timers
            .iter()
            .map(|(due, _)| *due)
            .min()
            .expect("the ldm keeps a timer running");
        self.ctx.now_ms = self.ctx.now_ms.max(due);
        let now = self.ctx.now_ms;
        let (fired, kept) = std::mem::take(&mut self.ctx.timers)
            .into_iter()
            .partition(|(due, _)| *due <= now);
        self.ctx.timers = kept;
        for (_, envelope) in fired {
            self.ctx.queue.push_back(Queued::Signal(envelope));
        }
    }

    /// Moves time to the next timer and runs what it causes.
    pub(crate) fn next_timer(&mut self) {
        self.fire_timers();
        self.pump();
    }

    /// Lets time pass until `count` more LCPs have completed.
    pub(crate) fn run_lcps(&mut self, count: u64) {
        let target = self.ldm.lcps_completed() + count;
        for _ in 0..10_000 {
            if self.ldm.lcps_completed() >= target {
                return;
            }
            self.next_timer();
        }
        panic!("LCPs do not complete");
    }

    /// The one signal the ldm sent to a peer.
    fn take_one(&mut self) -> Envelope {
        assert_eq!(
            self.ctx.outbox.len(),
            1,
            "expected one answer, got {:?}",
            self.ctx.outbox
        );
        self.ctx.outbox.pop().expect("one")
    }

    fn section(&self, entries: &[(u16, Option<&[u8]>)]) -> Section {
        let bytes: usize = entries
            .iter()
            .map(|(_, value)| 4 + value.map_or(0, <[u8]>::len))
            .sum();
        let mut section = self.ctx.pool.alloc(bytes).expect("pool has room");
        let mut writer = AttrWriter::new(section.as_mut_slice());
        for &(column, value) in entries {
            writer.push(column, value).expect("fits");
        }
        section
    }

    pub(crate) fn key(&self, k: i32) -> Section {
        self.section(&[(0, Some(&k.to_le_bytes()))])
    }

    /// The partition and hash of key k.
    pub(crate) fn route(&self, k: i32) -> (u32, KeyHash) {
        let hash = key_hash(&self.table, self.key(k).as_slice()).expect("valid key");
        (self.map.bucket_partitions[bucket(hash) as usize], hash)
    }

    /// Prepares a one-operation transaction on key k; the error if the ldm
    /// refused it.
    pub(crate) fn prepare(
        &mut self,
        kind: OperationKind,
        k: i32,
        v: i64,
    ) -> Result<Prepared, ErrorCode> {
        let (partition, hash) = self.route(k);
        let blob = vec![(k as u8).wrapping_add(v as u8); self.blob.of(v)];
        let text = format!("row {k} value {v}");
        let attr = (kind != OperationKind::Delete).then(|| {
            self.section(&[
                (1, Some(&v.to_le_bytes())),
                (2, Some(text.as_bytes())),
                (3, Some(&blob)),
            ])
        });
        self.next_op += 1;
        let tc_op = self.next_op;
        let transaction_id = TransactionId(7 << 48 | u64::from(tc_op));
        let request = LqhKeyReq {
            tc: TC,
            tc_op,
            chain: ReplicaChain::new(&[NODE]),
            position: 0,
            row_id: u32::MAX,
            previous_op: u32::MAX,
            transaction_id,
            kind,
            lock: LockMode::Exclusive,
            table_id: TABLE_ID,
            partition,
            hash,
            key: self.key(k),
            attr,
            no_wait: false,
        };
        self.deliver(TC, request);
        match self.take_one().signal {
            Signal::LqhKeyConf(conf) => Ok(Prepared {
                ldm_op: conf.ldm_op,
                tc_op,
                transaction_id,
            }),
            Signal::LqhKeyRef(refusal) => Err(refusal.error),
            other => panic!("unexpected answer {other:?}"),
        }
    }

    /// Commits and completes a prepared operation at `gci`.
    pub(crate) fn commit(&mut self, prepared: Prepared, gci: Gci) {
        let Prepared {
            ldm_op,
            tc_op,
            transaction_id,
        } = prepared;
        self.deliver(
            TC,
            CommitReq {
                ldm_op,
                tc_op,
                transaction_id,
                gci,
            },
        );
        assert!(matches!(self.take_one().signal, Signal::CommitConf(_)));
        self.deliver(
            TC,
            CompleteReq {
                ldm_op,
                tc_op,
                transaction_id,
            },
        );
        assert!(matches!(self.take_one().signal, Signal::CompleteConf(_)));
    }

    /// A one-operation transaction on key k, committed at `gci`; the
    /// error if the ldm refused it.
    pub(crate) fn try_write(
        &mut self,
        kind: OperationKind,
        k: i32,
        v: i64,
        gci: Gci,
    ) -> Result<(), ErrorCode> {
        let prepared = self.prepare(kind, k, v)?;
        self.commit(prepared, gci);
        Ok(())
    }

    pub(crate) fn write(&mut self, kind: OperationKind, k: i32, v: i64, gci: Gci) {
        if let Err(error) = self.try_write(kind, k, v, gci) {
            panic!("{kind:?} of {k} refused: {error:?}");
        }
    }

    /// GCP_SAVEREQ: the marker of `gci` in every part, fsynced.
    pub(crate) fn save(&mut self, gci: Gci) {
        self.deliver(DIH, GcpSaveReq { gci });
        assert!(matches!(
            self.take_one().signal,
            Signal::GcpSaveConf(GcpSaveConf { gci: saved }) if saved == gci
        ));
    }

    /// Every live row, checking the index finds each by its key and holds
    /// nothing else.
    pub(crate) fn rows(&self) -> Rows {
        let mut rows = Rows::new();
        let table = self.ldm.tables[TABLE_ID as usize]
            .as_ref()
            .expect("the table");
        let memory = &self.ldm.memory;
        let layout = &table.layout;
        for partition in table.partitions.iter().flatten() {
            let partition = &partition.store;
            let mut live = 0;
            partition.fixed.for_each_slot(|row| {
                if partition.state(memory, row) != RowState::Live {
                    return;
                }
                live += 1;
                partition.verify_checksum(memory, layout, row);
                let view = partition.view(memory, layout, row);
                let mut key = vec![0u8; layout.key_max_bytes];
                let length = layout.write_key(view, &mut key).expect("fits");
                let hash = key_hash(&table.definition, &key[..length])
                    .expect("valid")
                    .index_hash();
                let found = partition.index.lookup(memory, hash, |candidate| {
                    partition.state(memory, candidate) == RowState::Live
                        && layout
                            .key_matches(partition.view(memory, layout, candidate), &key[..length])
                });
                assert_eq!(found, Some(row), "the index finds row {row} by its key");
                let mut image = view.fixed.to_vec();
                image.extend_from_slice(&view.var[..layout.var_part_bytes(view.var)]);
                rows.insert((partition.id, row), (partition.gci(memory, row), image));
            });
            assert_eq!(partition.index.len(), live, "index entries without rows");
            assert_eq!(partition.rows(), live, "slots held by no live row");
        }
        rows
    }

    /// The row id key k has, if the index finds it.
    pub(crate) fn row_id(&self, k: i32) -> Option<u32> {
        let (partition_id, hash) = self.route(k);
        let key = self.key(k);
        let table = self.ldm.tables[TABLE_ID as usize].as_ref().expect("table");
        let partition = &table.partitions[partition_id as usize]
            .as_ref()
            .expect("owned partition")
            .store;
        let memory = &self.ldm.memory;
        partition.index.lookup(memory, hash.index_hash(), |row| {
            partition.state(memory, row) == RowState::Live
                && table
                    .layout
                    .key_matches(partition.view(memory, &table.layout, row), key.as_slice())
        })
    }

    /// The disk after a power loss: only what was fsynced.
    pub(crate) fn crash(self) -> Disk {
        self.ctx
            .disk
            .into_iter()
            .map(|(name, file)| {
                let durable = file.durable.clone();
                (
                    name,
                    DiskFile {
                        current: durable.clone(),
                        durable,
                    },
                )
            })
            .collect()
    }

    /// The disk after a kill: everything written reached it.
    pub(crate) fn kill(self) -> Disk {
        self.ctx
            .disk
            .into_iter()
            .map(|(name, file)| {
                let current = file.current.clone();
                (
                    name,
                    DiskFile {
                        durable: current.clone(),
                        current,
                    },
                )
            })
            .collect()
    }

    /// Redo pages between tail and head, per part.
    pub(crate) fn redo_pages_in_use(&self) -> Vec<u64> {
        self.ldm
            .redo
            .as_ref()
            .expect("a redo log")
            .parts
            .iter()
            .map(|part| part.appender.as_ref().expect("ready").pages_in_use())
            .collect()
    }

    /// The phases the ldm reported, by name: (count, unit).
    pub(crate) fn phase(&self, name: &str) -> Option<u64> {
        self.ctx.reports.iter().find_map(|report| match report {
            Report::Phase {
                name: reported,
                count,
                ..
            } if *reported == name => Some(*count),
            _ => None,
        })
    }

    /// Bytes of the LCP files (data and control) on the disk now.
    pub(crate) fn lcp_disk_bytes(&self) -> u64 {
        lcp_disk_bytes(&self.ctx.disk)
    }

    /// The last checkpoint report the ldm sent.
    pub(crate) fn last_checkpoint_report(&self) -> Option<CheckpointReport> {
        self.ctx
            .reports
            .iter()
            .rev()
            .find_map(|report| match report {
                Report::Checkpoints(report) => Some(*report),
                _ => None,
            })
    }

    /// Partition `partition` of the table.
    pub(crate) fn partition(&self, partition: u32) -> &PartitionState {
        self.ldm.tables[TABLE_ID as usize]
            .as_ref()
            .and_then(|table| table.partitions[partition as usize].as_ref())
            .expect("an owned partition")
    }

    /// The GCI and column v of key k's row, if the index finds it.
    pub(crate) fn row_of(&self, k: i32) -> Option<(u64, i64)> {
        let row = self.row_id(k)?;
        let table = self.ldm.tables[TABLE_ID as usize].as_ref().expect("table");
        let partition = &self.partition(self.route(k).0).store;
        let memory = &self.ldm.memory;
        let view = partition.view(memory, &table.layout, row);
        let value = table.layout.value(view, 1).expect("v is NOT NULL");
        let v = i64::from_le_bytes(value.try_into().expect("a BIGINT"));
        Some((partition.gci(memory, row), v))
    }
}

/// Bytes of the LCP files (data and control) on `disk`, as written.
pub(crate) fn lcp_disk_bytes(disk: &Disk) -> u64 {
    disk.iter()
        .filter(|(name, _)| matches!(name, FileName::LcpData { .. } | FileName::LcpControl { .. }))
        .map(|(_, file)| file.current.len() as u64)
        .sum()
}

/// Runs `body`, which must stop the node; returns its message.
pub(crate) fn fatal_message(body: impl FnOnce()) -> String {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
    let panic = outcome.expect_err("the node must stop");
    let message = panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(
        message.starts_with("fatal: "),
        "not a fatal stop: {message}"
    );
    message
}
