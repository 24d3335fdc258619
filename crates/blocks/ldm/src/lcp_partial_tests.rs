//! Partial local checkpoints (`lcp`, docs/lcp-format.md): chains of
//! data files that hold some parts in full and every other part as changes
//! since the previous LCP, on the in-memory disk of `lcp_test_disk.rs`.
//!
//! - model tests: a random workload (inserts, updates that resize the var
//!   part, deletes, whole pages freed, deleted keys inserted again, GCIs
//!   big enough to make the LCPs hurry) with LCPs at varying intervals and
//!   writes during them, and crashes (power loss or kill, between any two
//!   file requests, often in the middle of an LCP), each restart checked
//!   against a key/value model as of the restored GCI and, row id for row
//!   id, against the rows the node held then; at recovery_work 25, 50 and
//!   100, and on partitions of more than 256 sparse pages;
//! - the bytes one LCP writes after 1% of a million rows changed, and
//!   over a whole rotation of the parts written in full;
//! - the LCP files a steady update load leaves after 30 LCPs per
//!   partition, at recovery_work 25, 50 and 100, and the checkpoint report
//!   against the disk;
//! - a partition with no change writes only a control file, and is not
//!   checkpointed in a loop while another part's redo is under pressure;
//! - crashes and kills at every signal of a partial LCP.
//!
//! Byte counts and behaviour are asserted, never timings; every random
//! choice comes from a seeded generator. The figures the tests print
//! (`--nocapture`) are for the benchmarks doc.

use crate::lcp::PartitionLcp;
use crate::lcp_test_disk::{
    gci, lcp_disk_bytes, BlobSize, Disk, Node, NodeOptions, Parts, Rows, PARTITIONS, TABLE_ID,
};
use signal::fs::FileName;
use signal::signals::OperationKind::{self, Delete, Insert, Update};
use signal::ErrorCode;
use std::collections::{BTreeMap, BTreeSet};
use stdx::mix::XorShift;
use storage::lcp_control::{ControlFile, PART_COUNT};
use storage::redo::PAGE_BYTES;

/// Key -> (GCI of its last change, column v).
type Model = BTreeMap<i32, (u64, i64)>;

/// The model test's options: `recovery_work`, and file requests performed
/// one per step (a crash may come between any two); the rest as
/// `Node::initial` has them.
fn options(recovery_work: u32) -> NodeOptions {
    let mut options = NodeOptions {
        deferred_io: true,
        ..NodeOptions::default()
    };
    options.lcp.recovery_work = recovery_work;
    options
}

/// A redo file of `pages` redo pages (plus its header page).
fn redo_file_bytes(pages: u64) -> u64 {
    (pages + 1) * PAGE_BYTES as u64
}

fn lcp_of(node: &Node, partition: u32) -> &PartitionLcp {
    &node.partition(partition).lcp
}

/// Whether a new LCP of `partition` may start now.
fn is_due(node: &Node, partition: u32) -> bool {
    let lcp = lcp_of(node, partition);
    !lcp.creating && (lcp.newest.is_none() || lcp.newest_restorable)
}

/// Whether every partition's newest LCP is restorable and nothing was
/// committed in it since that LCP started.
fn settled(node: &Node) -> bool {
    (0..PARTITIONS).all(|partition| {
        let lcp = lcp_of(node, partition);
        lcp.newest_restorable && lcp.newest_changes == Some(lcp.changes)
    })
}

/// Runs as many LCPs as can run before the next save, at most `count`.
fn run_due_lcps(node: &mut Node, count: u64) {
    let due = (0..PARTITIONS).filter(|&p| is_due(node, p)).count() as u64;
    if count.min(due) > 0 {
        node.run_lcps(count.min(due));
    }
}

/// The control files on `disk` that decode: (partition, control file).
fn controls(disk: &Disk) -> Vec<(u32, ControlFile)> {
    disk.iter()
        .filter_map(|(name, file)| match name {
            FileName::LcpControl {
                table: TABLE_ID,
                partition,
                ..
            } => ControlFile::decode(&file.current)
                .ok()
                .map(|control| (*partition, control)),
            _ => None,
        })
        .collect()
}

/// The data files of `partition` on `disk`: number -> bytes.
fn data_files(disk: &Disk, partition: u32) -> BTreeMap<u32, Vec<u8>> {
    disk.iter()
        .filter_map(|(name, file)| match name {
            FileName::LcpData {
                table: TABLE_ID,
                partition: of,
                file: number,
            } if *of == partition => Some((*number, file.current.clone())),
            _ => None,
        })
        .collect()
}

/// Data files on `disk`, named by a control file there, that hold fewer
/// than all parts in full.
fn partial_files_named(disk: &Disk) -> usize {
    let mut named = BTreeSet::new();
    for (partition, control) in controls(disk) {
        for entry in &control.data_files {
            if entry.full_parts.count < PART_COUNT
                && disk.contains_key(&FileName::LcpData {
                    table: TABLE_ID,
                    partition,
                    file: entry.file_number,
                })
            {
                named.insert((partition, entry.file_number));
            }
        }
    }
    named.len()
}

/// Panics naming the first differences if `actual` is not `expected`.
fn assert_rows_eq(actual: &Rows, expected: &Rows, context: &str) {
    if actual == expected {
        return;
    }
    let missing: Vec<_> = expected
        .iter()
        .filter(|(row, image)| actual.get(row) != Some(image))
        .map(|(row, (gci, _))| (*row, *gci, actual.get(row).map(|(gci, _)| *gci)))
        .take(5)
        .collect();
    let extra: Vec<_> = actual
        .iter()
        .filter(|(row, _)| !expected.contains_key(row))
        .map(|(row, (gci, _))| (*row, *gci))
        .take(5)
        .collect();
    panic!(
        "{context}: {} rows restored, {} expected; expected rows missing or different \
         ((partition, row id), GCI, restored GCI): {missing:?}; rows not expected: {extra:?}",
        actual.len(),
        expected.len()
    );
}

/// The rows of `node` are `model` (by key: GCI and value) and, row id for
/// row id, `rows`.
fn assert_restored(node: &Node, model: &Model, rows: &Rows, context: &str) {
    let restored = node.rows();
    assert_eq!(restored.len(), model.len(), "{context}: row count");
    for (&k, &expected) in model {
        assert_eq!(node.row_of(k), Some(expected), "{context}: key {k}");
    }
    assert_rows_eq(&restored, rows, context);
}

/// The last checkpoint report was sent with no LCP running and matches
/// the LCP files on disk and the partitions' live bytes.
fn assert_report_matches_disk(node: &Node) {
    let report = node.last_checkpoint_report().expect("a checkpoint report");
    assert!(!node.ldm.lcp.is_running());
    assert_eq!(report.lcp_count, node.ldm.lcps_completed());
    assert_eq!(report.lcp_bytes_written, node.ldm.lcp.bytes_written);
    assert_eq!(
        report.checkpoint_disk_bytes,
        node.lcp_disk_bytes(),
        "the report's LCP disk bytes are the files' lengths"
    );
    let live: u64 = (0..PARTITIONS)
        .map(|p| node.partition(p).store.live_bytes())
        .sum();
    assert_eq!(report.live_data_bytes, live);
}

/// Starts the next due LCP (firing timers) and runs `steps` of its
/// signals; false if no LCP started.
fn start_lcp_and_step(node: &mut Node, steps: u64) -> bool {
    if !(0..PARTITIONS).any(|p| is_due(node, p)) {
        return false;
    }
    let mut timers = 0;
    while !node.ldm.lcp.is_running() {
        if timers == 1000 {
            return false;
        }
        node.fire_timers();
        timers += 1;
        while !node.ldm.lcp.is_running() && node.step() {}
    }
    for _ in 0..steps {
        if !node.ldm.lcp.is_running() || !node.step() {
            break;
        }
    }
    true
}

// ---------------------------------------------------------------------
// The model test.

/// The state as of a saved GCI: restorable at a crash while it is one of
/// the last two saved.
struct Saved {
    gci: u32,
    model: Model,
    rows: Rows,
}

struct ModelRun {
    options: NodeOptions,
    node: Option<Node>,
    rng: XorShift,
    model: Model,
    /// The GCI writes commit in; above every GCI saved or handed out.
    open_gci: u32,
    /// The last two saved GCIs, oldest first.
    saved: Vec<Saved>,
    next_key: i32,
    deleted: Vec<i32>,
    // What the run covered.
    lcps: u64,
    restarts: u32,
    refused: u64,
    pages_freed: u64,
    mid_lcp_writes: u64,
    crashes_mid_lcp: u32,
    longest_chain: usize,
    longest_chain_restored: usize,
    partial_files_seen: usize,
}

impl ModelRun {
    fn new(recovery_work: u32, seed: u64) -> ModelRun {
        let options = options(recovery_work);
        let node = Node::initial_with_options(&options);
        let mut run = ModelRun::with_node(options, node, Model::new(), 2, seed);
        // Nothing saved yet.
        run.saved.clear();
        run
    }

    /// A run going on from `node`, whose rows are `model` as of its last
    /// save, with writes in `open_gci` or later.
    fn with_node(
        options: NodeOptions,
        node: Node,
        model: Model,
        open_gci: u32,
        seed: u64,
    ) -> ModelRun {
        let rows = node.rows();
        let next_key = model.keys().next_back().map_or(0, |&k| k + 1);
        ModelRun {
            node: Some(node),
            options,
            rng: XorShift::new(seed),
            saved: vec![Saved {
                gci: open_gci - 1,
                model: model.clone(),
                rows,
            }],
            model,
            open_gci,
            next_key,
            deleted: Vec::new(),
            lcps: 0,
            restarts: 0,
            refused: 0,
            pages_freed: 0,
            mid_lcp_writes: 0,
            crashes_mid_lcp: 0,
            longest_chain: 0,
            longest_chain_restored: 0,
            partial_files_seen: 0,
        }
    }

    fn node(&mut self) -> &mut Node {
        self.node.as_mut().expect("a node runs")
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.rng.below(bound)
    }

    /// One write at the open GCI; false if the redo log refused it.
    fn write(&mut self, kind: OperationKind, k: i32, v: i64) -> bool {
        let at = gci(self.open_gci);
        match self.node().try_write(kind, k, v, at) {
            Ok(()) => {
                match kind {
                    Delete => {
                        self.model.remove(&k).expect("deleted a live key");
                        self.deleted.push(k);
                    }
                    _ => {
                        self.model.insert(k, (at.0, v));
                    }
                }
                true
            }
            Err(ErrorCode::RedoLogFull) => {
                self.refused += 1;
                false
            }
            Err(other) => panic!("{kind:?} of {k} refused: {other:?}"),
        }
    }

    /// A random live key (the first at or after a random one).
    fn live_key(&mut self) -> Option<i32> {
        let from = self.below(self.next_key.max(1) as u64) as i32;
        self.model
            .range(from..)
            .next()
            .or_else(|| self.model.iter().next())
            .map(|(&k, _)| k)
    }

    /// A value whose row's var part differs in size from most others.
    fn value(&mut self) -> i64 {
        self.below(1 << 40) as i64 - (1 << 39)
    }

    fn insert(&mut self) -> bool {
        let k = if !self.deleted.is_empty() && self.below(2) == 0 {
            let index = self.below(self.deleted.len() as u64) as usize;
            let k = self.deleted.swap_remove(index);
            if self.model.contains_key(&k) {
                return true;
            }
            k
        } else {
            self.next_key += 1;
            self.next_key - 1
        };
        let v = self.value();
        self.write(Insert, k, v)
    }

    fn update(&mut self) -> bool {
        let Some(k) = self.live_key() else {
            return true;
        };
        let v = self.value();
        self.write(Update, k, v)
    }

    fn delete(&mut self) -> bool {
        let Some(k) = self.live_key() else {
            return true;
        };
        self.write(Delete, k, 0)
    }

    /// Deletes every row on the page of a random row: the page goes back
    /// to DataMemory.
    fn free_page(&mut self) -> bool {
        let Some(k) = self.live_key() else {
            return true;
        };
        let node = self.node.as_ref().expect("a node runs");
        let partition = node.route(k).0;
        let page = node.row_id(k).expect("a live key") >> 10;
        let victims: Vec<i32> = self
            .model
            .keys()
            .copied()
            .filter(|&key| {
                node.route(key).0 == partition
                    && node.row_id(key).map(|row| row >> 10) == Some(page)
            })
            .collect();
        for k in victims {
            if !self.write(Delete, k, 0) {
                return false;
            }
        }
        self.pages_freed += 1;
        true
    }

    /// `count` random writes at the open GCI; stops at a refusal.
    fn writes(&mut self, count: u64, bulk: bool) {
        for _ in 0..count {
            let rows = self.model.len();
            let roll = self.below(1000);
            let done = if bulk && roll < 1 && rows > 10_000 {
                self.free_page()
            } else if rows < 8000 || (rows < 20000 && roll < 450) {
                self.insert()
            } else if roll < 750 {
                self.update()
            } else {
                self.delete()
            };
            if !done {
                return;
            }
        }
    }

    /// Starts an LCP, runs part of it, and commits writes while it runs.
    fn writes_during_an_lcp(&mut self) {
        let steps = self.below(80);
        if !start_lcp_and_step(self.node(), steps) {
            return;
        }
        let count = self.below(20);
        self.node().hold = true;
        self.writes(count, false);
        self.mid_lcp_writes += count;
        let node = self.node();
        node.hold = false;
        node.pump();
    }

    fn save(&mut self) {
        let at = self.open_gci;
        self.node().save(gci(at));
        let rows = self.node().rows();
        self.saved.push(Saved {
            gci: at,
            model: self.model.clone(),
            rows,
        });
        if self.saved.len() > 2 {
            self.saved.remove(0);
        }
        self.open_gci += 1;
    }

    fn note_chains(&mut self) {
        let node = self.node.as_ref().expect("a node runs");
        for partition in 0..PARTITIONS {
            if let Some(newest) = &lcp_of(node, partition).newest {
                self.longest_chain = self.longest_chain.max(newest.data_files.len());
            }
        }
    }

    /// Power loss or kill, maybe in the middle of an LCP (with writes
    /// committed while it ran, never saved); then a restart at one of the
    /// last two saved GCIs, checked against the model.
    fn crash_and_restart(&mut self) {
        if self.below(3) != 0 {
            // The LCPs taken since the last save become restorable, and the
            // next one starts.
            self.save();
            let steps = self.below(250);
            if start_lcp_and_step(self.node(), steps) {
                if self.node().ldm.lcp.is_running() {
                    self.crashes_mid_lcp += 1;
                }
                if self.below(2) == 0 {
                    let count = self.below(10);
                    self.node().hold = true;
                    self.writes(count, false);
                }
            }
        }
        let node = self.node.take().expect("a node runs");
        self.lcps += node.ldm.lcps_completed();
        let disk = if self.below(2) == 0 {
            node.crash()
        } else {
            node.kill()
        };
        self.partial_files_seen = self.partial_files_seen.max(partial_files_named(&disk));
        let pick = if self.saved.len() == 2 && self.below(3) == 0 {
            0
        } else {
            self.saved.len() - 1
        };
        let target = self.saved.swap_remove(pick);
        self.saved.clear();
        let restored = Node::restart_with_options(disk, gci(target.gci), &self.options);
        self.restarts += 1;
        let context = format!(
            "restart {} at GCI {} (recovery_work {})",
            self.restarts, target.gci, self.options.lcp.recovery_work
        );
        assert_restored(&restored, &target.model, &target.rows, &context);
        for partition in 0..PARTITIONS {
            if let Some(newest) = &lcp_of(&restored, partition).newest {
                self.longest_chain_restored =
                    self.longest_chain_restored.max(newest.data_files.len());
            }
        }
        self.model = target.model.clone();
        self.saved.push(target);
        self.node = Some(restored);
        // GCIs of the voided run are never handed out again.
        self.open_gci += 1;
    }

    fn run(&mut self, rounds: u32) {
        for round in 0..rounds {
            let gcis = 1 + self.below(3);
            for _ in 0..gcis {
                let count = match self.below(10) {
                    0 => 0,
                    1..=3 => self.below(6),
                    4 => self.below(40),
                    5..=8 => self.below(500),
                    // Enough to fill half the redo log: the LCPs hurry,
                    // running between the writes.
                    _ => 1000 + self.below(1500),
                };
                self.writes(count, true);
                if self.below(6) == 0 {
                    self.writes_during_an_lcp();
                }
                self.save();
                let lcps = self.below(3);
                run_due_lcps(self.node(), lcps);
                self.note_chains();
            }
            if round % 12 == 11 {
                self.crash_and_restart();
            }
        }
        self.crash_and_restart();
        self.lcps += self
            .node
            .as_ref()
            .expect("a node runs")
            .ldm
            .lcps_completed();
    }
}

fn model_test(recovery_work: u32, seed: u64) {
    let mut run = ModelRun::new(recovery_work, seed);
    run.run(240);
    eprintln!(
        "model test, recovery_work {recovery_work}: {} LCPs, {} restarts ({} in the middle of an \
         LCP), {} rows at the end, {} pages freed, {} writes during LCPs, {} writes refused \
         (redo full), longest chain {} files ({} restored), {} partial data files on disk at \
         most",
        run.lcps,
        run.restarts,
        run.crashes_mid_lcp,
        run.model.len(),
        run.pages_freed,
        run.mid_lcp_writes,
        run.refused,
        run.longest_chain,
        run.longest_chain_restored,
        run.partial_files_seen
    );
    assert!(run.lcps >= 2 * 48, "dozens of LCPs per partition");
    assert!(run.restarts >= 10);
    assert!(run.pages_freed >= 3, "whole pages were freed");
    assert!(run.partial_files_seen > 0, "partial LCPs were on disk");
    assert!(run.longest_chain >= 8, "long chains");
    assert!(run.longest_chain_restored >= 3, "restores combined chains");
}

#[test]
fn model_test_recovery_work_25() {
    model_test(25, 25);
}

#[test]
fn model_test_recovery_work_50() {
    model_test(50, 50);
}

#[test]
fn model_test_recovery_work_100() {
    model_test(100, 100);
}

#[test]
fn model_test_partitions_of_more_than_256_sparse_pages() {
    // 530,000 rows inserted, then all but every 200th deleted: each
    // partition keeps some 324 pages (more than the 256 parts the full
    // ranges rotate through at least) with a few rows each, so the ranges
    // rotate through the parts of the partition's pages.
    const ROWS: i32 = 530_000;
    let mut options = options(50);
    options.data_memory_bytes = 256 << 20;
    options.redo_files = 8;
    options.redo_file_bytes = redo_file_bytes(1024);
    options.lcp.rows_per_slice = 1024;
    options.blob = BlobSize { base: 0, spread: 0 };
    options.deferred_io = false;
    let mut node = Node::initial_with_options(&options);
    let mut open = load(&mut node, ROWS, 53_000);
    for batch in (0..ROWS).collect::<Vec<_>>().chunks(53_000) {
        for &k in batch.iter().filter(|&&k| k % 200 != 0) {
            node.write(Delete, k, 0, gci(open));
        }
        node.save(gci(open));
        node.save(gci(open + 1));
        open += 2;
        node.run_lcps(2);
    }
    node.save(gci(open));
    let pages: Vec<u32> = (0..PARTITIONS)
        .map(|p| node.partition(p).store.fixed.logical_pages())
        .collect();
    assert!(pages.iter().all(|&pages| pages > 256), "{pages:?} pages");
    let model: Model = (0..ROWS)
        .step_by(200)
        .map(|k| (k, node.row_of(k).expect("kept")))
        .collect();
    let mut options = options.clone();
    options.deferred_io = true;
    let mut run = ModelRun::with_node(options, node, model, open + 1, 256);
    run.run(60);
    eprintln!(
        "sparse model test ({pages:?} pages): {} LCPs, {} restarts ({} in the middle of an \
         LCP), {} rows at the end, longest chain {} files ({} restored)",
        run.lcps,
        run.restarts,
        run.crashes_mid_lcp,
        run.model.len(),
        run.longest_chain,
        run.longest_chain_restored
    );
    assert!(run.restarts >= 5);
    assert!(run.longest_chain_restored >= 3, "restores combined chains");
}

// ---------------------------------------------------------------------
// Write volume and disk space.

/// Inserts keys `0..rows` in batches, each made restorable by LCPs so the
/// redo tail moves; then lets LCPs run until every partition is settled.
/// Returns the next open GCI.
fn load(node: &mut Node, rows: i32, batch: i32) -> u32 {
    let mut open = 2;
    for start in (0..rows).step_by(batch as usize) {
        for k in start..(start + batch).min(rows) {
            node.write(Insert, k, i64::from(k), gci(open));
        }
        node.save(gci(open));
        node.save(gci(open + 1));
        open += 2;
        node.run_lcps(2);
    }
    for _ in 0..10 {
        node.save(gci(open));
        open += 1;
        if settled(node) {
            return open;
        }
        run_due_lcps(node, 2);
    }
    panic!("the partitions do not settle");
}

#[test]
fn an_lcp_after_one_percent_of_a_million_rows_changed_writes_at_most_5x_the_changed_bytes() {
    const ROWS: i32 = 1_000_000;
    const CHANGED: usize = 10_000;
    let options = NodeOptions {
        data_memory_bytes: 900 << 20,
        // 8 files of 8 MiB per part: more than a batch's redo.
        redo_files: 8,
        redo_file_bytes: redo_file_bytes(2048),
        lcp: crate::LcpSettings {
            pause_ms: 10,
            rows_per_slice: 1024,
            ..crate::LcpSettings::default()
        },
        ..NodeOptions::default()
    };
    let mut node = Node::initial_with_options(&options);
    let open = load(&mut node, ROWS, 50_000);
    let lcp_ids: Vec<u64> = (0..PARTITIONS)
        .map(|p| lcp_of(&node, p).next_lcp_id)
        .collect();
    let written_before = node.ldm.lcp.bytes_written;
    let changed_before = node.ldm.lcp.changed_row_bytes;
    // 1% of the rows, distinct keys spread at random.
    let mut rng = XorShift::new(1);
    let mut keys = BTreeSet::new();
    while keys.len() < CHANGED {
        keys.insert(rng.below(ROWS as u64) as i32);
    }
    for k in keys {
        let v = rng.below(1 << 30) as i64;
        node.write(Update, k, v, gci(open));
    }
    node.save(gci(open));
    node.save(gci(open + 1));
    // The next LCP of every partition.
    node.run_lcps(u64::from(PARTITIONS));
    for partition in 0..PARTITIONS {
        assert_eq!(
            lcp_of(&node, partition).next_lcp_id,
            lcp_ids[partition as usize] + 1,
            "one LCP of partition {partition}"
        );
        let newest = lcp_of(&node, partition).newest.as_ref().expect("an LCP");
        let last = newest.data_files.last().expect("a data file");
        eprintln!(
            "1% test: partition {partition}: {} pages, LCP {} wrote parts {}+{} in full, \
             {} row records, chain of {} files",
            node.partition(partition).store.fixed.logical_pages(),
            newest.lcp_id,
            last.full_parts.first,
            last.full_parts.count,
            last.row_records,
            newest.data_files.len()
        );
    }
    let written = node.ldm.lcp.bytes_written - written_before;
    let changed = node.ldm.lcp.changed_row_bytes - changed_before;
    eprintln!(
        "1% test: {CHANGED} of {ROWS} rows updated: {changed} changed bytes, {written} LCP bytes \
         written, {:.2} bytes written per changed byte",
        written as f64 / changed as f64
    );
    assert!(
        written <= 5 * changed,
        "{written} bytes written for {changed} changed bytes"
    );
}

#[test]
fn one_percent_changes_over_a_rotation_of_the_parts_write_at_most_5x_the_changed_bytes() {
    // The rows of a partition of fewer than 2048 pages are in the parts of
    // its pages only (62 here), so one LCP writes far more or far less than
    // its share of the parts; over a whole rotation of the parts written in
    // full every page is written in full once, as planned.
    const ROWS: i32 = 100_000;
    const CHANGED: usize = 1_000;
    let options = NodeOptions {
        data_memory_bytes: 128 << 20,
        redo_files: 8,
        redo_file_bytes: redo_file_bytes(1024),
        lcp: crate::LcpSettings {
            pause_ms: 10,
            rows_per_slice: 256,
            ..crate::LcpSettings::default()
        },
        ..NodeOptions::default()
    };
    let mut node = Node::initial_with_options(&options);
    let mut open = load(&mut node, ROWS, 25_000);
    let mut rng = XorShift::new(3);
    let (mut written, mut changed) = (0, 0);
    let mut ratios = Vec::new();
    let mut parts_in_full = [0u64; PARTITIONS as usize];
    while parts_in_full
        .iter()
        .any(|&parts| parts < u64::from(PART_COUNT))
    {
        let written_before = node.ldm.lcp.bytes_written;
        let changed_before = node.ldm.lcp.changed_row_bytes;
        let mut keys = BTreeSet::new();
        while keys.len() < CHANGED {
            keys.insert(rng.below(ROWS as u64) as i32);
        }
        for k in keys {
            let v = rng.below(1 << 30) as i64;
            node.write(Update, k, v, gci(open));
        }
        node.save(gci(open));
        node.save(gci(open + 1));
        open += 2;
        node.run_lcps(u64::from(PARTITIONS));
        for (partition, parts) in parts_in_full.iter_mut().enumerate() {
            let newest = lcp_of(&node, partition as u32)
                .newest
                .as_ref()
                .expect("an LCP");
            let last = newest.data_files.last().expect("a data file");
            *parts += u64::from(last.full_parts.count);
        }
        let round_written = node.ldm.lcp.bytes_written - written_before;
        let round_changed = node.ldm.lcp.changed_row_bytes - changed_before;
        ratios.push(round_written as f64 / round_changed as f64);
        written += round_written;
        changed += round_changed;
    }
    let ratio = written as f64 / changed as f64;
    let least = ratios.iter().copied().fold(f64::MAX, f64::min);
    let most = ratios.iter().copied().fold(0.0, f64::max);
    eprintln!(
        "1% rounds over a rotation: {} rounds of {CHANGED} of {ROWS} rows updated, {written} \
         bytes written for {changed} changed bytes: {ratio:.2} per changed byte (one round: \
         {least:.2} to {most:.2})",
        ratios.len()
    );
    assert!(ratio <= 5.0, "{ratio:.2} bytes written per changed byte");
}

/// A table of 100,000 rows under a steady update load for 30 LCPs per
/// partition: (LCP disk / live data, LCP bytes written / changed bytes).
fn thirty_lcps(recovery_work: u32) -> (f64, f64) {
    const ROWS: i32 = 100_000;
    const UPDATES_PER_ROUND: u32 = 5_000;
    const LCPS: u64 = 30;
    let options = NodeOptions {
        data_memory_bytes: 128 << 20,
        redo_files: 8,
        redo_file_bytes: redo_file_bytes(1024),
        lcp: crate::LcpSettings {
            pause_ms: 10,
            rows_per_slice: 256,
            recovery_work,
            ..crate::LcpSettings::default()
        },
        ..NodeOptions::default()
    };
    let mut node = Node::initial_with_options(&options);
    let mut open = load(&mut node, ROWS, 25_000);
    let lcp_ids: Vec<u64> = (0..PARTITIONS)
        .map(|p| lcp_of(&node, p).next_lcp_id)
        .collect();
    let written_before = node.ldm.lcp.bytes_written;
    let changed_before = node.ldm.lcp.changed_row_bytes;
    let mut rng = XorShift::new(u64::from(recovery_work));
    let mut partial = 0;
    for _ in 0..LCPS {
        for _ in 0..UPDATES_PER_ROUND {
            let k = rng.below(ROWS as u64) as i32;
            let v = rng.below(1 << 30) as i64;
            node.write(Update, k, v, gci(open));
        }
        // The GCI is complete before the LCPs start (as when LCPs take
        // far longer than a GCI): each change is written once.
        node.save(gci(open));
        node.save(gci(open + 1));
        open += 2;
        node.run_lcps(u64::from(PARTITIONS));
        partial += (0..PARTITIONS)
            .filter(|&p| {
                let newest = lcp_of(&node, p).newest.as_ref().expect("an LCP");
                newest.data_files.last().expect("a file").full_parts.count < PART_COUNT
            })
            .count();
    }
    for partition in 0..PARTITIONS {
        assert_eq!(
            lcp_of(&node, partition).next_lcp_id,
            lcp_ids[partition as usize] + LCPS
        );
    }
    assert!(partial >= 50, "partial LCPs ({partial} of 60)");
    let written = node.ldm.lcp.bytes_written - written_before;
    let changed = node.ldm.lcp.changed_row_bytes - changed_before;
    assert_report_matches_disk(&node);
    // The last LCPs restorable: the files only their predecessors needed
    // are deleted.
    node.save(gci(open));
    assert!(settled(&node));
    let disk = node.lcp_disk_bytes();
    let accounted: u64 = (0..PARTITIONS).map(|p| lcp_of(&node, p).disk_bytes()).sum();
    assert_eq!(accounted, disk, "the ldm accounts for every LCP file");
    // Unchanged partitions: control files only (overwriting the older
    // slots, whose chains may be longer), and a fresh report.
    let data_before: Vec<_> = (0..PARTITIONS)
        .map(|p| data_files(&node.ctx.disk, p))
        .collect();
    node.run_lcps(u64::from(PARTITIONS));
    assert_report_matches_disk(&node);
    for partition in 0..PARTITIONS {
        assert_eq!(
            data_files(&node.ctx.disk, partition),
            data_before[partition as usize]
        );
    }
    let disk = node.lcp_disk_bytes();
    let live: u64 = (0..PARTITIONS)
        .map(|p| node.partition(p).store.live_bytes())
        .sum();
    let chains: Vec<usize> = (0..PARTITIONS)
        .map(|p| {
            lcp_of(&node, p)
                .newest
                .as_ref()
                .expect("an LCP")
                .data_files
                .len()
        })
        .collect();
    let ratio = disk as f64 / live as f64;
    let write_ratio = written as f64 / changed as f64;
    eprintln!(
        "30-LCP test, recovery_work {recovery_work}: LCP files {disk} bytes, live data {live} \
         bytes: {ratio:.2}x; chains {chains:?} files; {written} bytes written for {changed} \
         changed bytes over {LCPS} LCPs per partition: {write_ratio:.2} per changed byte"
    );
    (ratio, write_ratio)
}

#[test]
fn thirty_lcps_at_recovery_work_50_keep_at_most_2_2x_live_data_on_disk() {
    let (ratio, _) = thirty_lcps(50);
    assert!(ratio <= 2.2, "{ratio:.2}x live data on disk");
}

#[test]
fn thirty_lcps_at_recovery_work_25_keep_at_most_1_8x_live_data_on_disk() {
    let (ratio, _) = thirty_lcps(25);
    assert!(ratio <= 1.8, "{ratio:.2}x live data on disk");
}

#[test]
fn thirty_lcps_at_recovery_work_100_keep_at_most_3x_live_data_on_disk() {
    let (ratio, _) = thirty_lcps(100);
    assert!(ratio <= 3.0, "{ratio:.2}x live data on disk");
}

// ---------------------------------------------------------------------
// Unchanged partitions, and crashes in the middle of a partial LCP.

#[test]
fn an_unchanged_partition_writes_only_a_control_file_and_restores() {
    let mut node = Node::initial();
    let keys_of = |node: &Node, partition: u32| -> Vec<i32> {
        (0..400).filter(|&k| node.route(k).0 == partition).collect()
    };
    for k in 0..400 {
        node.write(Insert, k, i64::from(k), gci(2));
    }
    node.save(gci(2));
    node.save(gci(3));
    node.run_lcps(2);
    // A partial LCP of each: a few rows changed.
    for k in (0..400).step_by(37) {
        node.write(Update, k, 7, gci(4));
    }
    node.save(gci(4));
    node.save(gci(5));
    node.run_lcps(2);
    node.save(gci(6));
    assert!(settled(&node));
    let chain = lcp_of(&node, 0).newest.clone().expect("an LCP");
    assert!(
        chain.data_files.len() >= 2,
        "partition 0 has a partial chain: {chain:?}"
    );
    // Only partition 1 changes.
    for &k in keys_of(&node, 1).iter().step_by(5) {
        node.write(Update, k, 9, gci(7));
    }
    node.save(gci(7));
    node.save(gci(8));
    let files_before = data_files(&node.ctx.disk, 0);
    let count_before = node.last_checkpoint_report().expect("a report").lcp_count;
    let mut unchanged_lcps = 0;
    let mut open = 9;
    for _ in 0..4 {
        let id_before = lcp_of(&node, 0).next_lcp_id;
        let written_before = node.ldm.lcp.bytes_written;
        let completed_before = node.ldm.lcps_completed();
        node.run_lcps(1);
        assert_eq!(node.ldm.lcps_completed(), completed_before + 1);
        if lcp_of(&node, 0).next_lcp_id == id_before {
            // Partition 1's LCP.
            node.save(gci(open));
            open += 1;
            continue;
        }
        unchanged_lcps += 1;
        let newest = lcp_of(&node, 0).newest.clone().expect("an LCP");
        assert_eq!(newest.lcp_id, id_before);
        assert_eq!(newest.data_files, chain.data_files, "the same chain");
        let control = controls(&node.ctx.disk)
            .into_iter()
            .find(|(partition, control)| *partition == 0 && control.lcp_id == id_before)
            .expect("its control file is on disk")
            .1;
        assert_eq!(control, newest);
        assert_eq!(
            node.ldm.lcp.bytes_written - written_before,
            control.encoded_len() as u64,
            "only the control file was written"
        );
        assert_eq!(
            data_files(&node.ctx.disk, 0),
            files_before,
            "no new data file"
        );
        let report = node.last_checkpoint_report().expect("a report");
        assert_eq!(report.lcp_count, node.ldm.lcps_completed());
        assert!(report.lcp_count > count_before);
        assert_report_matches_disk(&node);
    }
    assert!(unchanged_lcps >= 2, "{unchanged_lcps} LCPs of partition 0");
    node.save(gci(open));
    let expected = node.rows();
    let disk = node.crash();
    for entry in &chain.data_files {
        assert!(disk.contains_key(&FileName::LcpData {
            table: TABLE_ID,
            partition: 0,
            file: entry.file_number,
        }));
    }
    let restored = Node::restart(disk, gci(open));
    assert_rows_eq(&restored.rows(), &expected, "restart");
    assert_eq!(
        restored.phase("replay redo log"),
        Some(0),
        "the LCPs hold every change"
    );
}

/// Smaller rows, and file requests performed one per step: a crash may
/// come between any two of them.
fn cut_options() -> NodeOptions {
    NodeOptions {
        blob: BlobSize {
            base: 40,
            spread: 200,
        },
        deferred_io: true,
        ..NodeOptions::default()
    }
}

/// A node with a partial chain in each partition and changes since, the
/// next LCP due; deterministic. Returns the node, the saved GCI and the
/// rows as of it.
fn with_changes_after_a_partial_chain() -> (Node, u32, Rows) {
    let mut node = Node::initial_with_options(&cut_options());
    let mut rng = XorShift::new(7);
    for k in 0..1500 {
        node.write(Insert, k, i64::from(k), gci(2));
    }
    node.save(gci(2));
    node.save(gci(3));
    node.run_lcps(2);
    let mut open = 4;
    let mut live: BTreeSet<i32> = (0..1500).collect();
    let mut next_key = 1500;
    for round in 0..6 {
        for _ in 0..40 {
            let k = rng.below(next_key as u64) as i32;
            if live.contains(&k) {
                if rng.below(3) == 0 {
                    node.write(Delete, k, 0, gci(open));
                    live.remove(&k);
                } else {
                    node.write(Update, k, rng.below(1000) as i64, gci(open));
                }
            } else {
                node.write(Insert, k, 3, gci(open));
                live.insert(k);
            }
        }
        if round == 3 {
            // A page of partition 0 emptied.
            let first = *live.iter().find(|&&k| node.route(k).0 == 0).expect("a row");
            let page = node.row_id(first).map(|row| row >> 10);
            for k in live.clone() {
                if node.route(k).0 == 0 && node.row_id(k).map(|row| row >> 10) == page {
                    node.write(Delete, k, 0, gci(open));
                    live.remove(&k);
                }
            }
        }
        for _ in 0..30 {
            node.write(Insert, next_key, 1, gci(open));
            live.insert(next_key);
            next_key += 1;
        }
        node.save(gci(open));
        node.save(gci(open + 1));
        open += 2;
        node.run_lcps(2);
    }
    for k in (0..next_key).step_by(17) {
        if live.contains(&k) {
            node.write(Update, k, -5, gci(open));
        }
    }
    for k in (1..next_key).step_by(23) {
        if live.remove(&k) {
            node.write(Delete, k, 0, gci(open));
        }
    }
    node.save(gci(open));
    let rows = node.rows();
    for partition in 0..PARTITIONS {
        let newest = lcp_of(&node, partition).newest.as_ref().expect("an LCP");
        assert!(newest.data_files.len() >= 2, "a partial chain");
        assert!(is_due(&node, partition));
    }
    (node, open, rows)
}

#[test]
fn a_crash_at_any_point_of_a_partial_lcp_restores_exactly() {
    // How many signals the next LCP takes, start to count.
    let (mut node, _, _) = with_changes_after_a_partial_chain();
    assert!(start_lcp_and_step(&mut node, 0));
    let mut steps = 0u64;
    while node.ldm.lcp.is_running() {
        assert!(node.step());
        steps += 1;
    }
    assert!(steps > 20, "the LCP takes {steps} signals");
    let mut cuts: BTreeSet<u64> = (0..steps.min(40)).collect();
    cuts.extend((0..=steps + 2).step_by((steps / 60).max(1) as usize));
    // The last signals: the data file's fsync, the control file's open,
    // truncation, write and fsync.
    cuts.extend(steps.saturating_sub(12)..=steps);
    let mut cut_control_files = 0;
    let cut_count = cuts.len();
    for cut in cuts {
        let (mut node, saved, expected) = with_changes_after_a_partial_chain();
        assert!(start_lcp_and_step(&mut node, cut));
        let running = node.ldm.lcp.is_running();
        if cut % 3 == 1 {
            // Writes committed during the LCP, in a GCI never saved.
            node.hold = true;
            for k in 0..5 {
                // (A key deleted before is refused.)
                let _ = node.try_write(Update, k * 11, 1234, gci(saved + 1));
            }
            node.write(Insert, 900_000 + cut as i32, 1, gci(saved + 1));
        }
        let power_loss = cut % 2 == 0;
        let disk = if power_loss {
            node.crash()
        } else {
            node.kill()
        };
        let bytes = lcp_disk_bytes(&disk);
        let controls_on_disk = disk
            .keys()
            .filter(|name| matches!(name, FileName::LcpControl { .. }))
            .count();
        if controls(&disk).len() < controls_on_disk {
            // A control file cut between its truncation and its write.
            cut_control_files += 1;
        }
        let restored = Node::restart_with_options(disk, gci(saved), &cut_options());
        let context = format!(
            "crash after {cut} of {steps} signals of the LCP (running: {running}, {}, {bytes} \
             LCP bytes on disk)",
            if power_loss { "power loss" } else { "kill" }
        );
        assert_rows_eq(&restored.rows(), &expected, &context);
        // The restored node goes on: LCPs, then a restart from them.
        let mut restored = restored;
        for k in 0..40 {
            let _ = restored.try_write(Update, k, 77, gci(saved + 2));
        }
        restored.save(gci(saved + 2));
        restored.save(gci(saved + 3));
        restored.run_lcps(2);
        restored.save(gci(saved + 4));
        let expected = restored.rows();
        let again = Node::restart_with_options(restored.crash(), gci(saved + 4), &cut_options());
        assert_rows_eq(&again.rows(), &expected, &format!("{context}, then again"));
    }
    eprintln!(
        "crash test: {cut_count} cuts of an LCP of {steps} signals, {cut_control_files} with a \
         control file cut"
    );
    assert!(cut_control_files > 0, "a crash cut a control file write");
}

/// Partition 0 has its first (empty) LCP and no change; partition 1's
/// inserts, of a GCI not complete yet, fill its redo part (`parts`) to half
/// the ring, so partition 1's next LCP cannot become restorable before the
/// next GCP_SAVEREQ. The LCPs hurry (the next tick is sent at once when an
/// LCP counts); partition 0 must not be checkpointed again and again,
/// control file after control file with no time passing (it once was: its
/// unchanged LCP is restorable at once, so it was due again at once).
fn unchanged_partition_while_redo_is_under_pressure(parts: Parts) {
    let mut node = Node::initial_with(parts);
    let keys: Vec<i32> = (0..100_000).filter(|&k| node.route(k).0 == 1).collect();
    let part = match parts {
        Parts::Own => 1,
        Parts::Shared => 0,
    };
    let mut inserted = 0;
    while node.redo_pages_in_use()[part] < 64 {
        node.write(Insert, keys[inserted], 1, gci(2));
        inserted += 1;
    }
    // The LCP timer, then every signal it causes (bounded: a loop of
    // self-signals would never end).
    node.fire_timers();
    let start = node.ldm.lcps_completed();
    let at = node.ctx.now_ms;
    for _ in 0..100_000 {
        if !node.step() {
            break;
        }
    }
    let lcps = node.ldm.lcps_completed() - start;
    assert_eq!(node.ctx.now_ms, at);
    assert!(
        lcps <= 4,
        "{lcps} LCPs counted at {at} ms, after {inserted} inserts into partition 1 filled \
         its redo part to {:?} pages",
        node.redo_pages_in_use()
    );
    // Once GCI 2 is complete partition 1's LCP is restorable and the tail
    // moves; then the rows restore.
    node.save(gci(2));
    node.save(gci(3));
    node.run_lcps(2);
    node.save(gci(4));
    assert!(node.redo_pages_in_use()[part] < 64);
    let expected = node.rows();
    let restored = Node::restart_with(node.crash(), gci(4), parts);
    assert_rows_eq(&restored.rows(), &expected, "restart");
}

#[test]
fn an_unchanged_partition_is_not_checkpointed_in_a_loop_while_redo_is_under_pressure() {
    unchanged_partition_while_redo_is_under_pressure(Parts::Own);
}

#[test]
fn an_unchanged_partition_sharing_a_part_under_pressure_is_not_checkpointed_in_a_loop() {
    unchanged_partition_while_redo_is_under_pressure(Parts::Shared);
}
