//! When local checkpoints run: which partition is due next, starting its
//! LCP (what it writes in full, what as changes), moving the running one
//! on as the pacing allows, counting it once its control file is durable,
//! and making LCPs restorable as GCIs complete, which moves the redo
//! tails. The pacing decision and the checkpoint report run here once a
//! period.

use super::files::{data_name, file_number, take_chain};
use super::pacing::{Inputs, PERIOD_MS};
use super::{job, Running, Stage, WRITES_IN_FLIGHT};
use crate::file_token::FileToken;
use crate::{Ldm, PartitionState};
use kernel::{CheckpointReport, Context, Report};
use rowstore::RowIdCursor;
use signal::fs::FsOperation;
use signal::section::MAX_SECTION_BYTES;
use signal::signals::ContinueB;
use storage::lcp_control::{
    files_to_delete, ControlFile, ControlSlot, DataFileEntry, DataFileHeader, DataFileWriter,
    PartRange, DEFAULT_ROW_ID_PAGE_SHIFT, PART_COUNT,
};

/// The pacing's reason while a restarting node checkpoints every partition.
const RESTART_REASON: &str = "node restart";

impl Ldm {
    /// The redo log is ready (formatted or restored): LCPs start.
    pub(crate) fn lcp_start(&mut self, restored_gci: u64, ctx: &mut dyn Context) {
        if self.redo.is_none() {
            return;
        }
        self.lcp.restored(restored_gci);
        self.lcp.started = true;
        self.lcp_check_restorable(ctx);
        self.lcp.schedule_tick(self.address, ctx, true);
        self.lcp_pace(ctx);
    }

    /// Starts the next partition's LCP as soon as may be (a node restart's
    /// checkpoint of every partition, `copy`).
    pub(crate) fn lcp_kick(&mut self, ctx: &mut dyn Context) {
        if self.copy_checkpointing() {
            self.lcp.pacing.full_speed(RESTART_REASON);
        }
        self.lcp.schedule_tick(self.address, ctx, true);
    }

    /// Whether this ldm writes LCPs at all (a redo log, and LCPs enabled).
    pub(crate) fn lcp_enabled(&self) -> bool {
        self.redo.is_some() && self.lcp.settings.enabled
    }

    /// Decides the LCP speed for the next period from what this ldm saw,
    /// reports the counters, and sets the next decision's timer.
    fn lcp_pace(&mut self, ctx: &mut dyn Context) {
        let inputs = Inputs {
            now_ms: ctx.now_ms(),
            changed_row_bytes: self.lcp.changed_row_bytes,
            lcp_bytes_written: self.lcp.bytes_written,
            redo_fill_percent: self.redo_fill_percent(),
            log_full: self.lcp.hurry,
            busy_percent: ctx.busy_percent(),
            recovery_work: self.lcp.settings.recovery_work,
        };
        self.lcp.pacing.decide(inputs);
        // A restarting node serves nothing yet: its checkpoint of every
        // partition (phase LOCAL_CHECKPOINT) is bound by the disk alone.
        if self.copy_checkpointing() {
            self.lcp.pacing.full_speed(RESTART_REASON);
        }
        self.lcp_report(ctx);
        if !self.lcp.pace_pending {
            self.lcp.pace_pending = true;
            let envelope = signal::Envelope {
                from: self.address,
                to: self.address,
                signal: ContinueB { job: job::PACE }.into(),
            };
            ctx.send_delayed(envelope, PERIOD_MS);
        }
    }

    /// Reports this ldm's checkpoint counters (`all report checkpoints`).
    fn lcp_report(&self, ctx: &mut dyn Context) {
        let mut report = CheckpointReport {
            instance: self.address.instance as u32,
            lcp_count: self.lcp.completed,
            lcp_bytes_written: self.lcp.bytes_written,
            changed_row_bytes: self.lcp.changed_row_bytes,
            pacing: self.lcp.pacing.report(),
            ..CheckpointReport::default()
        };
        for partition in self
            .tables
            .iter()
            .flatten()
            .flat_map(|table| table.partitions.iter().flatten())
        {
            report.checkpoint_disk_bytes += partition.lcp.disk_bytes();
            report.live_data_bytes += partition.store.live_bytes();
        }
        ctx.report(Report::Checkpoints(report));
    }

    /// The fullest redo part of this ldm, percent.
    fn redo_fill_percent(&self) -> u32 {
        self.redo.as_ref().map_or(0, |redo| {
            redo.parts
                .iter()
                .filter_map(|part| part.appender.as_ref())
                .map(|appender| {
                    (appender.pages_in_use() * 100 / appender.ring_pages().max(1)) as u32
                })
                .max()
                .unwrap_or(0)
        })
    }

    /// A `ContinueB` of the LCP machinery.
    pub(crate) fn lcp_continue(&mut self, job: u32, ctx: &mut dyn Context) {
        match job {
            job::TICK => {
                self.lcp.timer_pending = false;
                self.lcp_tick(ctx);
            }
            job::KICK => {
                self.lcp.kick_pending = false;
                self.lcp_tick(ctx);
            }
            job::ADVANCE => {
                self.lcp.advance_pending = false;
                self.lcp_advance(ctx);
            }
            job::PACE => {
                self.lcp.pace_pending = false;
                self.lcp_pace(ctx);
            }
            other => panic!("ldm {}: unknown ContinueB job {other}", self.address),
        }
    }

    /// GCP_SAVEREQ{gci}: every GCI an earlier one named is complete.
    pub(crate) fn lcp_saw_save(&mut self, gci: u64, ctx: &mut dyn Context) {
        let complete = self.lcp.last_saved_gci;
        self.lcp.last_saved_gci = self.lcp.last_saved_gci.max(gci);
        self.lcp_complete(complete, ctx);
    }

    /// `gci` is complete and recorded in this node's system file.
    pub(crate) fn lcp_complete(&mut self, gci: u64, ctx: &mut dyn Context) {
        if gci > self.lcp.complete_gci {
            self.lcp.complete_gci = gci;
            self.lcp_check_restorable(ctx);
        }
    }

    /// Whether some redo part is at least half full.
    fn redo_under_pressure(&self) -> bool {
        self.redo.as_ref().is_some_and(|redo| {
            redo.parts.iter().any(|part| {
                part.appender
                    .as_ref()
                    .is_some_and(|appender| appender.pages_in_use() * 2 >= appender.ring_pages())
            })
        })
    }

    /// Starts the next due partition's LCP, or waits.
    fn lcp_tick(&mut self, ctx: &mut dyn Context) {
        if !self.lcp.started {
            return;
        }
        self.lcp_send_creations(ctx);
        self.lcp_move_tails();
        if self.lcp.running.is_some() || !self.lcp.settings.enabled {
            return;
        }
        if self.node_failures.starting().contains(self.address.node) && !self.copy_checkpointing() {
            // A node in its node restart checkpoints nothing until its
            // copy is done: its disk keeps what it restored from
            // (docs/design/0018-node-restart.md).
            return self.lcp.schedule_tick(self.address, ctx, false);
        }
        match self.lcp_next_due() {
            Some((table, partition)) => self.lcp_begin(table, partition, ctx),
            None => self.lcp.schedule_tick(self.address, ctx, false),
        }
    }

    /// The next partition due for an LCP after the last one, round robin.
    fn lcp_next_due(&self) -> Option<(u32, u32)> {
        let mut first = None;
        for (table_id, table) in self.tables.iter().enumerate() {
            let Some(table) = table else { continue };
            for partition in table.partitions.iter().flatten() {
                if !partition.lcp.is_due() || self.lcp_would_gain_nothing(partition) {
                    continue;
                }
                let id = (table_id as u32, partition.store.id);
                if id > self.lcp.cursor {
                    return Some(id);
                }
                first = first.or(Some(id));
            }
        }
        first
    }

    /// An unchanged partition whose newest LCP's redo start is its part's
    /// end: a new control file would say the same, so it is not due (else
    /// LCPs hurrying for a full log would rewrite it without end).
    fn lcp_would_gain_nothing(&self, partition: &PartitionState) -> bool {
        let (Some(newest), Some(redo)) = (&partition.lcp.newest, &self.redo) else {
            return false;
        };
        partition.lcp.unchanged()
            && redo.parts[redo.index_of(partition.redo_part)]
                .appender
                .as_ref()
                .is_some_and(|appender| appender.next_lsn() == newest.redo_start_lsn)
    }

    /// Starts the LCP of partition `partition_id` of table `table_id`: a
    /// control file alone when the partition is unchanged since its newest
    /// LCP, else a scan into a new data file.
    fn lcp_begin(&mut self, table_id: u32, partition_id: u32, ctx: &mut dyn Context) {
        let Ldm {
            tables, redo, lcp, ..
        } = self;
        let redo = redo.as_ref().expect("LCPs run only with a redo log");
        let table = tables[table_id as usize].as_ref().expect("a due table");
        let partition = table.partitions[partition_id as usize]
            .as_ref()
            .expect("a due partition");
        let part_index = redo.index_of(partition.redo_part);
        let redo_start_lsn = redo.parts[part_index]
            .appender
            .as_ref()
            .expect("LCPs start once the redo log is ready")
            .next_lsn();
        let lcp_id = partition.lcp.next_lcp_id;
        let first_lcp = partition.lcp.newest.is_none();
        let slots = if first_lcp {
            [Some(ControlSlot::Zero), Some(ControlSlot::One)]
        } else {
            [Some(partition.lcp.write_next), None]
        };
        lcp.cursor = (table_id, partition_id);
        let mut running = Running {
            table: table_id,
            version: table.definition.version,
            partition: partition_id,
            lcp_id,
            file: data_name(table_id, partition_id, file_number(lcp_id)),
            redo_start_lsn,
            max_gci_completed: lcp.flushed_gci(),
            max_page_count: 0,
            full_parts: PartRange::ALL,
            changed_after: None,
            writer: None,
            cursor: RowIdCursor::new(0),
            rows: 0,
            file_offset: 0,
            outstanding: 0,
            stage: Stage::Scanning,
            control: None,
            slots,
            changes: partition.lcp.changes,
        };
        if partition.lcp.unchanged() {
            // The newest LCP's files are the partition as it is: a new
            // control file names them with the redo start of now.
            let newest = partition.lcp.newest.as_ref().expect("unchanged");
            reuse_newest(&mut running, newest, &mut lcp.spare_chains);
            lcp.running = Some(running);
            return self.lcp_send_control(ctx);
        }
        let (full_parts, changed_after) = scan_scope(partition, lcp.settings.recovery_work);
        let pages = partition.store.fixed.logical_pages();
        let header = DataFileHeader {
            file_number: file_number(lcp_id),
            lcp_id,
            table_id,
            table_version: table.definition.version,
            partition: partition_id,
            full_parts,
            row_id_page_shift: DEFAULT_ROW_ID_PAGE_SHIFT,
        };
        lcp.buffer.clear();
        running.writer = Some(DataFileWriter::new(header, &mut lcp.buffer));
        running.max_page_count = pages;
        running.full_parts = full_parts;
        running.changed_after = changed_after;
        running.cursor = RowIdCursor::new(0)
            .visiting_freed_pages()
            .ending_before_page(pages);
        let file = running.file;
        lcp.running = Some(running);
        self.lcp_open_data_file(file, ctx);
        self.lcp.schedule_advance(self.address, ctx, 0);
    }

    /// Whether the running LCP's table still exists as it was.
    fn lcp_table_alive(&self) -> bool {
        let Some(running) = &self.lcp.running else {
            return false;
        };
        self.tables
            .get(running.table as usize)
            .and_then(Option::as_ref)
            .is_some_and(|table| table.definition.version == running.version)
    }

    /// Moves the running LCP on as far as it can go now.
    fn lcp_advance(&mut self, ctx: &mut dyn Context) {
        let Some(stage) = self.lcp.running.as_ref().map(|running| running.stage) else {
            return;
        };
        if matches!(stage, Stage::Scanning | Stage::Draining) && !self.lcp_table_alive() {
            return self.lcp_abandon(ctx);
        }
        match stage {
            Stage::Scanning => {
                // The pacing's credit decides whether a slice runs now.
                let paced = self.lcp.pacing.may_write(ctx.now_ms());
                let buffered = self.lcp.buffer.len();
                if buffered < 2 * MAX_SECTION_BYTES && paced.is_ok() {
                    self.lcp_scan_slice();
                }
                self.lcp_send_data(ctx);
                let running = self.lcp.running.as_ref().expect("running");
                if running.stage == Stage::Scanning
                    && running.outstanding < WRITES_IN_FLIGHT
                    && self.lcp.buffer.len() < 2 * MAX_SECTION_BYTES
                {
                    let delay_ms = paced.err().unwrap_or(0);
                    self.lcp.schedule_advance(self.address, ctx, delay_ms);
                }
            }
            Stage::Draining => self.lcp_send_data(ctx),
            Stage::Control { sent: false, .. } => self.lcp_send_control(ctx),
            Stage::SyncingData | Stage::Control { sent: true, .. } | Stage::Abandoned => {}
        }
    }

    /// The running LCP's table was dropped: its buffer goes, and it is
    /// forgotten once its outstanding requests are answered.
    fn lcp_abandon(&mut self, ctx: &mut dyn Context) {
        let running = self.lcp.running.as_mut().expect("an LCP runs");
        running.stage = Stage::Abandoned;
        let idle = running.outstanding == 0;
        self.lcp.buffer.clear();
        if idle {
            self.lcp.running = None;
            self.lcp.schedule_tick(self.address, ctx, false);
        }
    }

    /// The running LCP's control file is durable: the LCP counts.
    pub(super) fn lcp_counted(&mut self, ctx: &mut dyn Context) {
        let alive = self.lcp_table_alive();
        let running = self.lcp.running.take().expect("an LCP runs");
        if alive {
            let last_slot = running
                .slots
                .iter()
                .flatten()
                .last()
                .copied()
                .expect("a slot was written");
            let control = running.control.expect("written");
            let partition = self.tables[running.table as usize]
                .as_mut()
                .and_then(|table| table.partitions[running.partition as usize].as_mut())
                .expect("alive");
            if running.file_offset > 0 {
                let file = file_number(running.lcp_id);
                partition
                    .lcp
                    .data_file_bytes
                    .push((file, running.file_offset));
            }
            for slot in running.slots.iter().flatten() {
                partition.lcp.control_bytes[slot.index() as usize] = control.encoded_len() as u64;
            }
            partition.lcp.counted(control, last_slot, running.changes);
            self.lcp.completed += 1;
            self.lcp_check_restorable(ctx);
            self.lcp_report(ctx);
            self.copy_partition_checkpointed(running.table, running.partition, ctx);
        }
        let now = self.lcp.hurry || self.lcp.settings.pause_ms == 0 || self.redo_under_pressure();
        self.lcp.schedule_tick(self.address, ctx, now);
    }

    /// Makes restorable every newest LCP the complete GCI now covers:
    /// deletes what only its predecessor needed and moves the redo tails.
    pub(crate) fn lcp_check_restorable(&mut self, ctx: &mut dyn Context) {
        let complete = self.lcp.complete_gci;
        let spare_chains = &mut self.lcp.spare_chains;
        let mut changed = false;
        for table in self.tables.iter_mut().flatten() {
            for partition in table.partitions.iter_mut().flatten() {
                let lcp = &mut partition.lcp;
                let Some(newest) = &lcp.newest else { continue };
                if lcp.newest_restorable || !newest.is_restorable(complete) {
                    continue;
                }
                if let Some(mut previous) = lcp.previous.take() {
                    for file in files_to_delete(&previous, newest) {
                        lcp.data_file_bytes.retain(|(number, _)| *number != file);
                        ctx.fs_request(
                            self.address,
                            FileToken::LcpDelete.encode(),
                            FsOperation::Delete {
                                file: data_name(newest.table_id, newest.partition, file),
                            },
                        );
                    }
                    previous.data_files.clear();
                    spare_chains.push(std::mem::take(&mut previous.data_files));
                }
                lcp.newest_restorable = true;
                lcp.restorable_start_lsn = Some(newest.redo_start_lsn);
                changed = true;
            }
        }
        if changed {
            self.lcp_move_tails();
        }
    }

    /// Moves each redo part's tail to the oldest redo start its partitions'
    /// restorable LCPs need; a partition without one holds the tail.
    pub(crate) fn lcp_move_tails(&mut self) {
        let Ldm { tables, redo, .. } = self;
        let Some(redo) = redo.as_mut() else { return };
        for part in redo.parts.iter_mut() {
            let Some(appender) = part.appender.as_mut() else {
                continue;
            };
            let mut needed = Some(appender.next_lsn());
            for table in tables.iter().flatten() {
                for partition in table.partitions.iter().flatten() {
                    if partition.redo_part == part.part {
                        needed = match (needed, partition.lcp.restorable_start_lsn) {
                            (Some(needed), Some(start)) => Some(needed.min(start)),
                            _ => None,
                        };
                    }
                }
            }
            if let Some(needed) = needed {
                appender.set_tail(needed);
            }
        }
        if !self.redo_under_pressure() {
            self.lcp.hurry = false;
        }
    }
}

/// The fewest parts the full ranges rotate through (see `full_range`).
const MIN_ROTATION: u32 = 256;

/// The parts the next LCP writes in full, after `previous` (the newest data
/// file's range). A partition of fewer than 2048 pages has rows only in
/// the parts of its pages (part = page mod 2048), so the share is taken of
/// those parts, and a range that reaches the last of them runs on to part
/// 2047 (the rest hold no rows: free to write in full), so the next range
/// starts again at part 0 and every part is rewritten in full once per
/// rotation, which lets the chain's oldest files go.
fn full_range(
    previous: PartRange,
    changed_rows: u64,
    rows: u64,
    pages: u32,
    recovery_work: u32,
) -> PartRange {
    // At least MIN_ROTATION parts rotate, so that a partition of a page
    // or a few still gets LCPs of changes only between its full ones.
    let populated = pages.clamp(MIN_ROTATION, u32::from(PART_COUNT)) as u16;
    let count = parts_in_full(changed_rows, rows, recovery_work, populated);
    let mut first = previous.next_first();
    if first >= populated {
        first = 0;
    }
    if count >= populated - first {
        PartRange::new(first, PART_COUNT - first)
    } else {
        PartRange::new(first, count)
    }
}

/// How many of `parts` parts an LCP writes in full: the share of the
/// partition's rows changed since the previous LCP, times 100 /
/// `recovery_work` (at least one, at most all). Seed 003's trade: with a changed
/// share c and a part share f = c x 100 / recovery_work, an LCP writes
/// about f + c of the partition (c x (1 + 100 / recovery_work) over the
/// changed bytes: 3x at 50) and the chain, about 1 / f files long, holds
/// the partition once plus about c / f of it in changes (1.5x at 50).
fn parts_in_full(changed_rows: u64, rows: u64, recovery_work: u32, parts: u16) -> u16 {
    if rows == 0 {
        return parts;
    }
    let wanted = (u128::from(parts) * u128::from(changed_rows) * 100)
        .div_ceil(u128::from(rows) * u128::from(recovery_work));
    wanted.clamp(1, u128::from(parts)) as u16
}

/// Makes `running` the LCP of an unchanged partition: its control file
/// names the newest LCP's chain, with the running LCP's id, redo start and
/// `max_gci_completed` (docs/lcp-format.md §4); no data file is written.
fn reuse_newest(
    running: &mut Running,
    newest: &ControlFile,
    spare_chains: &mut Vec<Vec<DataFileEntry>>,
) {
    let mut data_files = take_chain(spare_chains);
    data_files.extend_from_slice(&newest.data_files);
    running.control = Some(ControlFile {
        lcp_id: running.lcp_id,
        previous_lcp_id: newest.lcp_id,
        max_gci_completed: running.max_gci_completed,
        redo_start_lsn: running.redo_start_lsn,
        data_files,
        ..*newest
    });
    running.max_page_count = newest.max_page_count;
    running.rows = newest.row_count;
    running.stage = Stage::Control {
        index: 0,
        sent: false,
    };
}

/// What an LCP of `partition` writes: the parts in full, from the share of
/// rows changed since the newest LCP started, and the GCI above which a
/// slot of another part counts as changed since its scan
/// (docs/lcp-format.md). A first LCP, and the first after a restore (whose
/// replayed changes its files lack), writes every part in full.
fn scan_scope(partition: &PartitionState, recovery_work: u32) -> (PartRange, Option<u64>) {
    match (&partition.lcp.newest, partition.lcp.newest_changes) {
        (Some(newest), Some(at)) => {
            let changed = partition.lcp.changes - at;
            let previous_range = newest
                .data_files
                .last()
                .expect("a chain has a data file")
                .full_parts;
            let range = full_range(
                previous_range,
                changed,
                partition.store.rows(),
                partition.store.fixed.logical_pages(),
                recovery_work,
            );
            (range, Some(newest.max_gci_completed))
        }
        _ => (PartRange::ALL, None),
    }
}
