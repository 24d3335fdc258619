//! Local checkpoints (docs/design/durability.md §4, docs/lcp-format.md):
//! each ldm checkpoints the partitions it owns, one at a time, in the
//! background, so that a restart loads rows from disk instead of replaying
//! all of redo, and so that the redo tail can move. LCPs are partial (NDB
//! 7.6, seed 003; `storage::lcp_control`): each writes some of the
//! partition's 2048 parts in full and only the changes of the others, so its
//! size follows the change rate, not the data size.
//!
//! One LCP of one partition:
//!
//! ```text
//! note the redo part's next LSN (the LCP's redo start) and the page count
//! choose the parts written in full: `parts_in_full` of the rows changed
//!   since the newest LCP started, continuing where its range ended (all
//!   2048 for a partition's first LCP and the first after a restore)
//! scan the rows in row-id order, a slice per self-signal (JOB_ADVANCE),
//! as fast as the pacing's credit allows (`lcp_pacing.rs`):
//!   a part in full: every committed image (a row prepared for an update
//!     still holds its committed image; a reserved slot, an insert not yet
//!     committed or a delete committed but not yet freed, holds none)
//!   any other part: committed images whose GCI is above the newest LCP's
//!     max_gci_completed, and a delete record for each slot with no
//!     committed row whose GCI is above it (a freed slot keeps its delete's
//!     GCI, a page returned to DataMemory the highest of its slots')
//!   -> data file T/P/<lcp id>.data, written in pieces of at most a section
//! fsync the data file
//! control file (the slot not holding the newest LCP; a partition's first
//!   LCP goes to slot 0, fsynced, then slot 1), fsynced: the LCP counts
//! once the complete GCI reaches its max_gci_written it is restorable:
//!   delete the data files only the previous LCP needed, move the redo tail
//! ```
//!
//! **Why the scan is consistent.** Every change committed before the redo
//! start is in the row when the scan reaches it; every change after it is
//! in redo from the redo start on, which restore replays (idempotently, by
//! row id) over the loaded rows. A row the scan wrote may carry a change of
//! a GCI that never becomes complete, and a delete committed before the
//! scan reached its row leaves no trace in the file, so the LCP is
//! restorable only once every GCI it may reflect is complete:
//! `max_gci_written` is the highest of the rows' GCIs and of the GCIs this
//! ldm committed up to the end of the scan.
//!
//! **The complete GCI.** The master runs one durability round at a time:
//! GCP_SAVEREQ{g}, then COPY_GCIREQ{g} to every node's system file, then
//! GCP_DURABLEREP. So when GCP_SAVEREQ{g2} arrives, every GCI an earlier
//! GCP_SAVEREQ named is complete and recorded in this node's system file
//! (docs/lcp-format.md §5, rule 3). The ldm also takes GCP_DURABLEREP{g}
//! should dih send it one. After a restart the restored GCI is complete.
//!
//! **Unchanged partitions.** When nothing was committed in a partition
//! since its newest LCP started, that LCP's data file still holds it: the
//! next LCP writes only a control file naming the same chain, with the redo
//! start of now (docs/lcp-format.md §4), so the redo tail keeps moving on an
//! idle partition for the price of one small write. After a restore the
//! first LCP is written in full (the files lack what redo replayed).
//!
//! **New partitions.** A partition created while the node runs (a create
//! table) gets an empty first LCP (both control slots) before AddTabConf,
//! with its redo start at the part's next LSN. So every partition with
//! committed rows has a control file: a restart never needs redo from
//! before the partition's first LCP, which the tail may have passed. The
//! exception is a restart that restores GCI 0: it deletes every LCP file
//! (`lcp_restore.rs`) and formats the redo log, and its partitions have
//! only redo until their first LCP of the new run is restorable; the tail
//! of their part stays meanwhile, and a restart replays that part from its
//! oldest record (`restore.rs`).
//!
//! **Why the changes are enough.** Every change with a GCI at or below the
//! newest LCP's `max_gci_completed` was committed before that LCP started,
//! so its scan saw it; a slot whose GCI is not above it is as that LCP's
//! chain restores it. A change after the scan passed the slot has a higher
//! GCI and is written now (or by redo, if after this LCP's redo start).
//! The row count in the control file is every committed row the scan
//! passed, written or not: what the chain restores.
//!
//! **Pacing.** `LcpSettings::pause_ms` between two partitions' LCPs; none
//! while a redo part is at least half full or a write was refused because
//! the log is full (the LCPs hurry so the tail moves). Within an LCP the
//! scan runs while `lcp_pacing::Pacing` has credit: its speed follows redo
//! fill, the change rate and the thread's load, decided once a second
//! (`job::PACE`, which also reports the counters). A scan slice is
//! `rows_per_slice` rows; at most `WRITES_IN_FLIGHT` data file writes are
//! outstanding. No allocation per row: rows are copied into one reused
//! buffer, drained to the file as it fills.

use crate::lcp_pacing::{Inputs, Pacing, PERIOD_MS};
use crate::partition::RowState;
use crate::redo_log::token;
use crate::{Ldm, TableState};
use kernel::{send, CheckpointReport, Context, Report};
use signal::fs::{FileName, FsDone, FsError, FsErrorKind, FsOperation, OpenMode};
use signal::section::MAX_SECTION_BYTES;
use signal::signals::{AddTabConf, ContinueB};
use signal::{BlockRef, Section};
use storage::lcp_control::{
    append_and_trim_into, files_to_delete, page_of_row_id, part_of_row_id, ControlFile,
    ControlSlot, DataFileEntry, DataFileHeader, DataFileWriter, PartRange, DATA_HEADER_BYTES,
    DEFAULT_ROW_ID_PAGE_SHIFT, END_RECORD_BYTES, MAX_CONTROL_BYTES, PART_COUNT,
    RECORD_HEADER_BYTES,
};

/// `ContinueB` jobs of the ldm.
pub(crate) mod job {
    /// The timer between partitions: start the next partition's LCP if one
    /// is due.
    pub const TICK: u32 = 1;
    /// The same, sent at once (the LCPs hurry).
    pub const KICK: u32 = 2;
    /// Move the running LCP on: the next scan slice, or the next writes.
    pub const ADVANCE: u32 = 3;
    /// Decide the LCP speed for the next period, and report.
    pub const PACE: u32 = 4;
}

/// The row id layout the ldm uses is the one the LCP files record.
const _: () = assert!(
    crate::slots::SLOT_BITS == DEFAULT_ROW_ID_PAGE_SHIFT as u32,
    "row ids are page << 10 | slot, as the LCP files say"
);

/// Data file writes of the running LCP outstanding at once (each holds a
/// section of the node's pool until answered).
const WRITES_IN_FLIGHT: u32 = 2;
/// A retry when the section pool had no buffer and nothing is outstanding.
const POOL_RETRY_MS: u64 = 1;
/// Data files a new chain has room for: longer chains grow theirs once,
/// and the grown chain is reused from then on.
const CHAIN_RESERVE: usize = 32;

/// How local checkpoints are paced (config, `datanode::wiring`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LcpSettings {
    /// Pause between one partition's LCP and the next one's, and between
    /// checks when no partition is due; none while the redo log is under
    /// pressure.
    pub pause_ms: u64,
    /// Rows scanned per signal (the ldm serves transactions in between).
    pub rows_per_slice: u32,
    /// False: no LCP ever scans a partition (config `local_checkpoints =
    /// false`): restarts replay the redo log from its start, which is then
    /// never trimmed past a table's creation. For tests and comparison.
    pub enabled: bool,
    /// NDB's RecoveryWork (25..=100, default 50): how many parts an LCP
    /// writes in full, against the share of rows changed since the last
    /// one. Lower writes more per LCP and keeps less on disk (and less to
    /// read at restore); higher the opposite (seed 003: writes about 4x,
    /// 3x, 2x the changed bytes at 25, 50, 100; files about 1.35x, 1.6x,
    /// 2.1x live data).
    pub recovery_work: u32,
}

/// The bounds of `LcpSettings::recovery_work` (the config checks them).
pub const RECOVERY_WORK_RANGE: std::ops::RangeInclusive<u32> = 25..=100;

impl Default for LcpSettings {
    fn default() -> LcpSettings {
        LcpSettings {
            pause_ms: 200,
            rows_per_slice: 256,
            enabled: true,
            recovery_work: 50,
        }
    }
}

/// What a partition knows of its own LCPs.
#[derive(Debug)]
pub(crate) struct PartitionLcp {
    /// The newest LCP that counts (its control file is written and
    /// fsynced, in both slots for a first LCP).
    pub(crate) newest: Option<ControlFile>,
    /// Whether the complete GCI has reached `newest.max_gci_written`.
    pub(crate) newest_restorable: bool,
    /// The LCP before `newest`, kept until `newest` is restorable.
    pub(crate) previous: Option<ControlFile>,
    /// The redo start of the newest restorable LCP: redo before it is not
    /// needed by this partition (`None`: all of it is).
    pub(crate) restorable_start_lsn: Option<u64>,
    /// The control slot the next LCP writes (unless it is a first LCP).
    pub(crate) write_next: ControlSlot,
    /// The next LCP id (also its data file's number).
    pub(crate) next_lcp_id: u64,
    /// Its first, empty LCP is being written (a create table).
    pub(crate) creating: bool,
    /// Row changes committed in the partition since this ldm started.
    pub(crate) changes: u64,
    /// `changes` when the newest LCP started (`None`: unknown, as after a
    /// restore, whose replayed changes the LCP's files do not hold).
    pub(crate) newest_changes: Option<u64>,
    /// The partition's LCP data files on disk: (file number, bytes).
    pub(crate) data_file_bytes: Vec<(u32, u64)>,
    /// Bytes of each control slot on disk.
    pub(crate) control_bytes: [u64; 2],
}

impl Default for PartitionLcp {
    fn default() -> PartitionLcp {
        PartitionLcp {
            newest: None,
            newest_restorable: false,
            previous: None,
            restorable_start_lsn: None,
            write_next: ControlSlot::Zero,
            next_lcp_id: 1,
            creating: false,
            changes: 0,
            newest_changes: None,
            data_file_bytes: Vec::new(),
            control_bytes: [0; 2],
        }
    }
}

impl PartitionLcp {
    /// Whether a new LCP may start: its control file will overwrite the
    /// slot of the older LCP, so the newest must be restorable first.
    fn is_due(&self) -> bool {
        !self.creating && (self.newest.is_none() || self.newest_restorable)
    }

    /// Whether nothing was committed in the partition since its newest LCP
    /// started: that LCP's files still hold the partition, and the next LCP
    /// only writes a control file naming them with a later redo start.
    fn unchanged(&self) -> bool {
        self.newest.is_some() && self.newest_changes == Some(self.changes)
    }

    /// Bytes of the partition's LCP files on disk.
    pub(crate) fn disk_bytes(&self) -> u64 {
        self.data_file_bytes
            .iter()
            .map(|(_, bytes)| bytes)
            .sum::<u64>()
            + self.control_bytes.iter().sum::<u64>()
    }

    /// Records a counted LCP written to `last_slot` (both slots for a
    /// first LCP, slot One last), which started at `changes`.
    fn counted(&mut self, control: ControlFile, last_slot: ControlSlot, changes: u64) {
        self.newest_changes = Some(changes);
        assert!(
            self.previous.is_none() && (self.newest.is_none() || self.newest_restorable),
            "an LCP started only with the newest one restorable"
        );
        self.next_lcp_id = control.lcp_id + 1;
        self.previous = self.newest.replace(control);
        self.newest_restorable = false;
        self.write_next = last_slot.other();
    }
}

/// Where the running LCP stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Scanning rows into the data file.
    Scanning,
    /// Scan done, end record appended: the rest of the file is being sent.
    Draining,
    /// Waiting for the data file's fsync.
    SyncingData,
    /// Writing control slot `slots[index]`; its requests are sent once `sent`.
    Control { index: usize, sent: bool },
    /// The table was dropped: waiting for outstanding answers, then forgotten.
    Abandoned,
}

/// The LCP in progress.
struct Running {
    table: u32,
    version: u32,
    partition: u32,
    lcp_id: u64,
    file: FileName,
    redo_start_lsn: u64,
    max_gci_completed: u64,
    max_page_count: u32,
    /// The parts written in full; every other part as changes only.
    full_parts: PartRange,
    /// A row or freed slot counts as changed when its GCI is above this:
    /// the previous LCP's `max_gci_completed` (`None`: every part is full).
    changed_after: Option<u64>,
    writer: Option<DataFileWriter>,
    /// The next row id to scan.
    cursor: u32,
    rows: u64,
    /// Bytes of the data file sent to the file service.
    file_offset: u64,
    /// File requests sent and not yet answered.
    outstanding: u32,
    stage: Stage,
    /// Set at the end of the scan.
    control: Option<ControlFile>,
    /// Where the control file goes: slot Zero then One for a first LCP.
    slots: [Option<ControlSlot>; 2],
    /// The partition's change count when the LCP started.
    changes: u64,
}

/// A create table's partitions getting their first, empty LCP.
struct Creation {
    table_id: u32,
    requester: BlockRef,
    /// Each partition's control file (written to both slots).
    controls: Vec<ControlFile>,
    /// Requests sent once `sent`, and not yet answered.
    sent: bool,
    outstanding: u32,
}

/// The LCP machinery of one ldm.
pub(crate) struct LcpEngine {
    settings: LcpSettings,
    /// The latest GCI known complete and recorded in the system file.
    pub(crate) complete_gci: u64,
    /// The GCI of the latest GCP_SAVEREQ (complete once the next one comes).
    last_saved_gci: u64,
    /// The highest GCI this ldm committed a change in.
    pub(crate) highest_committed_gci: u64,
    /// A write was refused because a redo part is full: no pauses.
    hurry: bool,
    /// LCPs run (the redo log is ready).
    started: bool,
    timer_pending: bool,
    kick_pending: bool,
    advance_pending: bool,
    /// The partition the last LCP was of: (table, partition).
    cursor: (u32, u32),
    running: Option<Running>,
    /// Bytes of the data file not yet sent.
    buffer: Vec<u8>,
    /// One row's image, copied out of its slots.
    image: Vec<u8>,
    /// The control file being written, encoded.
    control_bytes: Vec<u8>,
    /// Chains of control files no longer needed, emptied, for the next
    /// LCPs' control files: an LCP then allocates nothing once warm (the
    /// ldm thread's promise, checked by the cli test `no_alloc`).
    spare_chains: Vec<Vec<DataFileEntry>>,
    creations: Vec<Creation>,
    /// A key built from a row, during a restore.
    pub(crate) key_scratch: Vec<u8>,
    /// LCPs that counted since the start (for tests and status).
    pub(crate) completed: u64,
    /// Bytes of row changes committed since the start (`locks.rs`).
    pub(crate) changed_row_bytes: u64,
    /// Bytes written to LCP files since the start.
    pub(crate) bytes_written: u64,
    /// How fast the running LCP may write (`lcp_pacing.rs`).
    pacing: Pacing,
    pace_pending: bool,
}

impl LcpEngine {
    pub(crate) fn new(settings: LcpSettings) -> LcpEngine {
        assert!(
            settings.rows_per_slice > 0,
            "an LCP slice scans at least one row"
        );
        LcpEngine {
            settings,
            complete_gci: 0,
            last_saved_gci: 0,
            highest_committed_gci: 0,
            hurry: false,
            started: false,
            timer_pending: false,
            kick_pending: false,
            advance_pending: false,
            cursor: (0, 0),
            running: None,
            // A slice stops once two sections' worth is buffered, so one
            // row record more is the most it holds.
            buffer: Vec::with_capacity(
                2 * MAX_SECTION_BYTES + RECORD_HEADER_BYTES + signal::schema::MAX_ROW_BYTES,
            ),
            image: Vec::with_capacity(signal::schema::MAX_ROW_BYTES),
            control_bytes: Vec::with_capacity(MAX_CONTROL_BYTES),
            spare_chains: Vec::with_capacity(CHAIN_RESERVE),
            creations: Vec::new(),
            key_scratch: Vec::new(),
            completed: 0,
            changed_row_bytes: 0,
            bytes_written: 0,
            pacing: Pacing::new(),
            pace_pending: false,
        }
    }

    /// Whether an LCP is running (tests).
    #[cfg(test)]
    pub(crate) fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// The partition of the running LCP (tests).
    #[cfg(test)]
    pub(crate) fn running_partition(&self) -> Option<u32> {
        self.running.as_ref().map(|running| running.partition)
    }

    /// A write was refused with "redo log full": LCPs stop pausing (and the
    /// next one starts at once if none runs).
    pub(crate) fn note_log_full(&mut self, address: BlockRef, ctx: &mut dyn Context) {
        if !self.hurry {
            self.hurry = true;
            self.pacing.redo_full();
            if self.started && self.running.is_none() {
                self.schedule_tick(address, ctx, true);
            }
        }
    }

    /// Schedules a tick: at once (deduplicated), or after the pause (one
    /// timer at a time).
    fn schedule_tick(&mut self, address: BlockRef, ctx: &mut dyn Context, now: bool) {
        let job = if now {
            if self.kick_pending {
                return;
            }
            self.kick_pending = true;
            job::KICK
        } else {
            if self.timer_pending {
                return;
            }
            self.timer_pending = true;
            job::TICK
        };
        let envelope = signal::Envelope {
            from: address,
            to: address,
            signal: ContinueB { job }.into(),
        };
        if now {
            ctx.send(envelope);
        } else {
            ctx.send_delayed(envelope, self.settings.pause_ms);
        }
    }

    /// Schedules the next step of the running LCP (deduplicated).
    fn schedule_advance(&mut self, address: BlockRef, ctx: &mut dyn Context, delay_ms: u64) {
        if self.advance_pending {
            return;
        }
        self.advance_pending = true;
        let envelope = signal::Envelope {
            from: address,
            to: address,
            signal: ContinueB { job: job::ADVANCE }.into(),
        };
        if delay_ms == 0 {
            ctx.send(envelope);
        } else {
            ctx.send_delayed(envelope, delay_ms);
        }
    }

    /// A GCI every commit of which (and of every GCI below) has finished
    /// in this ldm: the latest GCP_SAVEREQ's, which the master sends only
    /// after GCP_FLUSH found those commits finished on every replica. An
    /// LCP records it as `max_gci_completed` when it starts, and the next
    /// LCP writes as changes only slots with a GCI above it. (The complete
    /// GCI would do too, but lags one more round, so every change of that
    /// round would be written by two LCPs in a row.)
    pub(crate) fn flushed_gci(&self) -> u64 {
        self.complete_gci.max(self.last_saved_gci)
    }

    /// The restored GCI is complete (it is the highest any system file
    /// records complete).
    pub(crate) fn restored(&mut self, restored_gci: u64) {
        self.complete_gci = self.complete_gci.max(restored_gci);
        self.last_saved_gci = self.last_saved_gci.max(restored_gci);
    }
}

/// Sends open (create), truncate, write and fsync of `file` with `bytes`.
/// `None` when the section pool has no buffer (nothing was sent).
fn send_whole_file(
    ctx: &mut dyn Context,
    address: BlockRef,
    token: u64,
    file: FileName,
    bytes: &[u8],
) -> Option<u32> {
    let data: Section = ctx.pool().copy_from(bytes)?;
    let steps = [
        FsOperation::Open {
            file,
            mode: OpenMode::Create,
        },
        FsOperation::SetLen { file, len: 0 },
        FsOperation::Write {
            file,
            offset: 0,
            data,
        },
        FsOperation::Sync { file },
    ];
    let count = steps.len() as u32;
    for step in steps {
        ctx.fs_request(address, token, step);
    }
    Some(count)
}

/// An empty chain for a new control file: a spare one if any.
fn take_chain(spare_chains: &mut Vec<Vec<DataFileEntry>>) -> Vec<DataFileEntry> {
    spare_chains
        .pop()
        .unwrap_or_else(|| Vec::with_capacity(CHAIN_RESERVE))
}

fn control_name(table: u32, partition: u32, slot: ControlSlot) -> FileName {
    FileName::LcpControl {
        table,
        partition,
        copy: slot.index(),
    }
}

fn data_name(table: u32, partition: u32, file: u32) -> FileName {
    FileName::LcpData {
        table,
        partition,
        file,
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
pub(crate) fn full_range(
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
pub(crate) fn parts_in_full(changed_rows: u64, rows: u64, recovery_work: u32, parts: u16) -> u16 {
    if rows == 0 {
        return parts;
    }
    let wanted = (u128::from(parts) * u128::from(changed_rows) * 100)
        .div_ceil(u128::from(rows) * u128::from(recovery_work));
    wanted.clamp(1, u128::from(parts)) as u16
}

fn file_number(lcp_id: u64) -> u32 {
    u32::try_from(lcp_id).expect("a partition takes fewer than 2^32 LCPs")
}

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
            report.live_data_bytes += partition.live_bytes();
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
                let id = (table_id as u32, partition.id);
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
    fn lcp_would_gain_nothing(&self, partition: &crate::partition::Partition) -> bool {
        let (Some(newest), Some(redo)) = (&partition.lcp.newest, &self.redo) else {
            return false;
        };
        partition.lcp.unchanged()
            && redo.parts[redo.index_of(partition.redo_part)]
                .appender
                .as_ref()
                .is_some_and(|appender| appender.next_lsn() == newest.redo_start_lsn)
    }

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
        if partition.lcp.unchanged() {
            // The newest LCP's files are the partition as it is: a new
            // control file names them with the redo start of now.
            let newest = partition.lcp.newest.as_ref().expect("unchanged");
            let mut data_files = take_chain(&mut lcp.spare_chains);
            data_files.extend_from_slice(&newest.data_files);
            let control = ControlFile {
                lcp_id,
                previous_lcp_id: newest.lcp_id,
                max_gci_completed: lcp.flushed_gci(),
                redo_start_lsn,
                data_files,
                ..*newest
            };
            lcp.running = Some(Running {
                table: table_id,
                version: table.definition.version,
                partition: partition_id,
                lcp_id,
                file: data_name(table_id, partition_id, file_number(lcp_id)),
                redo_start_lsn,
                max_gci_completed: lcp.flushed_gci(),
                max_page_count: newest.max_page_count,
                full_parts: PartRange::ALL,
                changed_after: None,
                writer: None,
                cursor: 0,
                rows: newest.row_count,
                file_offset: 0,
                outstanding: 0,
                stage: Stage::Control {
                    index: 0,
                    sent: false,
                },
                control: Some(control),
                slots,
                changes: partition.lcp.changes,
            });
            return self.lcp_send_control(ctx);
        }
        // Parts in full from the share of rows changed since the newest LCP
        // started; the rest as changes since its scan (docs/lcp-format.md).
        let (full_parts, changed_after) =
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
                        partition.rows(),
                        partition.fixed.logical_pages(),
                        lcp.settings.recovery_work,
                    );
                    (range, Some(newest.max_gci_completed))
                }
                // A first LCP, or the first after a restore (whose replayed
                // changes its files lack): every part in full.
                _ => (PartRange::ALL, None),
            };
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
        let writer = DataFileWriter::new(header, &mut lcp.buffer);
        let file = data_name(table_id, partition_id, header.file_number);
        lcp.running = Some(Running {
            table: table_id,
            version: table.definition.version,
            partition: partition_id,
            lcp_id,
            file,
            redo_start_lsn,
            max_gci_completed: lcp.flushed_gci(),
            max_page_count: partition.fixed.logical_pages(),
            full_parts,
            changed_after,
            writer: Some(writer),
            cursor: 0,
            rows: 0,
            file_offset: 0,
            outstanding: 2,
            stage: Stage::Scanning,
            control: None,
            slots,
            changes: partition.lcp.changes,
        });
        let token = token::make(token::LCP_WRITE, 0, 0, 0);
        ctx.fs_request(
            self.address,
            token,
            FsOperation::Open {
                file,
                mode: OpenMode::Create,
            },
        );
        ctx.fs_request(self.address, token, FsOperation::SetLen { file, len: 0 });
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

    /// Scans one slice of rows into the buffer; at the end of the
    /// partition, appends the end record and moves to `Draining`.
    fn lcp_scan_slice(&mut self) {
        let Ldm {
            memory,
            tables,
            lcp,
            ..
        } = self;
        let running = lcp.running.as_mut().expect("a scan runs");
        let TableState {
            layout, partitions, ..
        } = tables[running.table as usize]
            .as_ref()
            .expect("checked alive");
        let partition = partitions[running.partition as usize]
            .as_ref()
            .expect("the partitions of a live table stay");
        let (full_parts, changed_after) = (running.full_parts, running.changed_after);
        let changed = |gci: u64| changed_after.is_none_or(|after| gci > after);
        let writer = running.writer.as_mut().expect("scanning");
        let buffered_before = lcp.buffer.len();
        let slots_per_page = partition.fixed.slots_per_page();
        let mut scanned = 0;
        let finished = loop {
            let row = running.cursor;
            let page = page_of_row_id(row, DEFAULT_ROW_ID_PAGE_SHIFT);
            // Pages added after the LCP started hold only rows that redo
            // from the redo start has; restore skips them too.
            if page >= running.max_page_count {
                break true;
            }
            if scanned == lcp.settings.rows_per_slice || lcp.buffer.len() >= 2 * MAX_SECTION_BYTES {
                break false;
            }
            let next_page = (page + 1) << DEFAULT_ROW_ID_PAGE_SHIFT;
            if row & ((1 << DEFAULT_ROW_ID_PAGE_SHIFT) - 1) >= slots_per_page {
                running.cursor = next_page;
                continue;
            }
            scanned += 1;
            running.cursor = row + 1;
            let in_full = full_parts.contains(part_of_row_id(row, DEFAULT_ROW_ID_PAGE_SHIFT));
            if !partition.fixed.is_held(row) {
                // A page returned to DataMemory: every slot is free and
                // keeps the page's highest delete GCI. Rows of a change-only
                // part freed since the previous LCP get delete records;
                // otherwise the page has nothing to write.
                let gci = partition.fixed.freed_page_gci(row).unwrap_or(0);
                if in_full || !changed(gci) {
                    running.cursor = next_page;
                } else {
                    writer.delete(&mut lcp.buffer, row, gci);
                }
                continue;
            }
            let gci = partition.gci(memory, row);
            match partition.state(memory, row) {
                RowState::Live => {
                    running.rows += 1;
                    if in_full || changed(gci) {
                        partition.verify_checksum(memory, layout, row);
                        let view = partition.view(memory, layout, row);
                        lcp.image.clear();
                        lcp.image.extend_from_slice(view.fixed);
                        lcp.image
                            .extend_from_slice(&view.var[..layout.var_part_bytes(view.var)]);
                        writer.row(&mut lcp.buffer, row, gci, &lcp.image);
                    }
                }
                // No committed row (free, an insert not yet committed, a
                // delete not yet freed): a change-only part records the
                // slot's delete if it came after the previous LCP's scan.
                RowState::Free | RowState::Reserved => {
                    if !in_full && changed(gci) {
                        writer.delete(&mut lcp.buffer, row, gci);
                    }
                }
            }
        };
        lcp.pacing
            .spend((lcp.buffer.len() - buffered_before) as u64);
        match finished {
            false => {}
            true => {
                let writer = running.writer.take().expect("scanning");
                let header = *writer.header();
                let summary = writer.finish(&mut lcp.buffer);
                // A delete committed before the scan reached its row left no
                // record: the LCP reflects every GCI committed until now.
                let max_gci_written = summary.max_gci_written.max(lcp.highest_committed_gci);
                let previous = partition.lcp.newest.as_ref();
                running.control = Some(ControlFile {
                    lcp_id: running.lcp_id,
                    previous_lcp_id: previous.map_or(0, |control| control.lcp_id),
                    table_id: running.table,
                    table_version: running.version,
                    partition: running.partition,
                    row_id_page_shift: DEFAULT_ROW_ID_PAGE_SHIFT,
                    max_gci_completed: running.max_gci_completed,
                    max_gci_written,
                    redo_start_lsn: running.redo_start_lsn,
                    row_count: running.rows,
                    max_page_count: running.max_page_count,
                    data_files: {
                        let mut chain = take_chain(&mut lcp.spare_chains);
                        append_and_trim_into(
                            previous.map_or(&[][..], |control| &control.data_files),
                            summary.entry(&header),
                            &mut chain,
                        );
                        chain
                    },
                });
                running.stage = Stage::Draining;
            }
        }
    }

    /// Sends buffered data file bytes: whole sections while scanning, the
    /// rest once draining; then the fsync once all is written.
    fn lcp_send_data(&mut self, ctx: &mut dyn Context) {
        let address = self.address;
        let lcp = &mut self.lcp;
        let running = lcp.running.as_mut().expect("an LCP runs");
        let draining = running.stage == Stage::Draining;
        let token = token::make(token::LCP_WRITE, 0, 0, 0);
        let mut starved = false;
        while running.outstanding < WRITES_IN_FLIGHT
            && (lcp.buffer.len() >= MAX_SECTION_BYTES || (draining && !lcp.buffer.is_empty()))
        {
            let length = lcp.buffer.len().min(MAX_SECTION_BYTES);
            let Some(data) = ctx.pool().copy_from(&lcp.buffer[..length]) else {
                // An answer frees a section; with none outstanding, retry.
                starved = running.outstanding == 0;
                break;
            };
            ctx.fs_request(
                address,
                token,
                FsOperation::Write {
                    file: running.file,
                    offset: running.file_offset,
                    data,
                },
            );
            lcp.buffer.drain(..length);
            lcp.bytes_written += length as u64;
            running.file_offset += length as u64;
            running.outstanding += 1;
        }
        if draining && lcp.buffer.is_empty() && running.outstanding == 0 {
            running.stage = Stage::SyncingData;
            running.outstanding = 1;
            ctx.fs_request(address, token, FsOperation::Sync { file: running.file });
        }
        if starved {
            self.lcp.schedule_advance(self.address, ctx, POOL_RETRY_MS);
        }
    }

    /// Sends the writes of the control file to the current slot.
    fn lcp_send_control(&mut self, ctx: &mut dyn Context) {
        let address = self.address;
        let lcp = &mut self.lcp;
        let running = lcp.running.as_mut().expect("an LCP runs");
        let Stage::Control { index, sent: false } = running.stage else {
            return;
        };
        let slot = running.slots[index].expect("a slot to write");
        running
            .control
            .as_ref()
            .expect("the control file is built at the end of the scan")
            .encode_into(&mut lcp.control_bytes);
        let bytes = &lcp.control_bytes;
        let name = control_name(running.table, running.partition, slot);
        let token = token::make(token::LCP_WRITE, 0, 0, 0);
        match send_whole_file(ctx, address, token, name, bytes) {
            Some(count) => {
                running.outstanding = count;
                running.stage = Stage::Control { index, sent: true };
                self.lcp.bytes_written += bytes.len() as u64;
            }
            None => self.lcp.schedule_advance(self.address, ctx, POOL_RETRY_MS),
        }
    }

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

    /// An io answer for the LCP machinery.
    pub(crate) fn lcp_answered(
        &mut self,
        token: u64,
        result: Result<FsDone, FsError>,
        ctx: &mut dyn Context,
    ) {
        let (kind, _, _, sequence) = token::split(token);
        match (kind, result) {
            (token::LCP_DELETE, Ok(_))
            | (
                token::LCP_DELETE,
                Err(FsError {
                    kind: FsErrorKind::NotFound,
                    ..
                }),
            ) => {}
            (_, Err(error)) => ctx.fatal(format!(
                "ldm {}: local checkpoint I/O failed, the node stops: {error}",
                self.address
            )),
            (token::LCP_CREATE, Ok(_)) => self.lcp_creation_answered(sequence, ctx),
            (token::LCP_WRITE, Ok(_)) => self.lcp_write_answered(ctx),
            (other, _) => panic!("ldm {}: LCP answer of unknown kind {other}", self.address),
        }
    }

    fn lcp_write_answered(&mut self, ctx: &mut dyn Context) {
        let running = self
            .lcp
            .running
            .as_mut()
            .expect("an LCP write answered with no LCP running");
        running.outstanding -= 1;
        let (stage, outstanding) = (running.stage, running.outstanding);
        let next_slot = match stage {
            Stage::Control { index, .. } => {
                running.slots.get(index + 1).is_some_and(Option::is_some)
            }
            _ => false,
        };
        match stage {
            Stage::Scanning | Stage::Draining => self.lcp.schedule_advance(self.address, ctx, 0),
            Stage::SyncingData => {
                running.stage = Stage::Control {
                    index: 0,
                    sent: false,
                };
                self.lcp_send_control(ctx);
            }
            Stage::Control { index, sent: true } if outstanding == 0 => {
                if next_slot {
                    running.stage = Stage::Control {
                        index: index + 1,
                        sent: false,
                    };
                    self.lcp_send_control(ctx);
                } else {
                    self.lcp_counted(ctx);
                }
            }
            Stage::Control { .. } => {}
            Stage::Abandoned => {
                if outstanding == 0 {
                    self.lcp.running = None;
                    self.lcp.schedule_tick(self.address, ctx, false);
                }
            }
        }
    }

    /// The running LCP's control file is durable: the LCP counts.
    fn lcp_counted(&mut self, ctx: &mut dyn Context) {
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
                            token::make(token::LCP_DELETE, 0, 0, 0),
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

    /// LQHADDTABREQ of a table created while the node runs: each partition
    /// gets an empty first LCP before the table is confirmed. Returns
    /// whether the confirmation waits for it (false: answer at once).
    pub(crate) fn lcp_create_table(
        &mut self,
        table_id: u32,
        requester: BlockRef,
        ctx: &mut dyn Context,
    ) -> bool {
        if !self.lcp.started {
            // A restart re-adding its tables: their LCPs are on disk.
            return false;
        }
        let Ldm {
            tables, redo, lcp, ..
        } = self;
        let redo = redo.as_ref().expect("LCPs run only with a redo log");
        let table = tables[table_id as usize].as_mut().expect("just added");
        let mut controls = Vec::new();
        for partition in table.partitions.iter_mut().flatten() {
            let part_index = redo.index_of(partition.redo_part);
            let redo_start_lsn = redo.parts[part_index]
                .appender
                .as_ref()
                .expect("the redo log is ready")
                .next_lsn();
            let lcp_id = partition.lcp.next_lcp_id;
            let header = DataFileHeader {
                file_number: file_number(lcp_id),
                lcp_id,
                table_id,
                table_version: table.definition.version,
                partition: partition.id,
                full_parts: PartRange::ALL,
                row_id_page_shift: DEFAULT_ROW_ID_PAGE_SHIFT,
            };
            let mut bytes = Vec::new();
            let summary = DataFileWriter::new(header, &mut bytes).finish(&mut bytes);
            controls.push(ControlFile {
                lcp_id,
                previous_lcp_id: 0,
                table_id,
                table_version: table.definition.version,
                partition: partition.id,
                row_id_page_shift: DEFAULT_ROW_ID_PAGE_SHIFT,
                max_gci_completed: lcp.flushed_gci(),
                max_gci_written: 0,
                redo_start_lsn,
                row_count: 0,
                max_page_count: 0,
                data_files: vec![summary.entry(&header)],
            });
            partition.lcp.creating = true;
        }
        if controls.is_empty() {
            return false;
        }
        lcp.creations.push(Creation {
            table_id,
            requester,
            controls,
            sent: false,
            outstanding: 0,
        });
        self.lcp_send_creations(ctx);
        true
    }

    /// Sends the writes of every creation not sent yet (the section pool
    /// may have been short; the tick retries).
    fn lcp_send_creations(&mut self, ctx: &mut dyn Context) {
        let address = self.address;
        let mut retry = false;
        for creation in self.lcp.creations.iter_mut().filter(|c| !c.sent) {
            let token = token::make(token::LCP_CREATE, 0, 0, creation.table_id);
            // Each step needs a section; take them all before sending any.
            let mut files = Vec::new();
            for control in &creation.controls {
                let entry = control.data_files[0];
                let header = DataFileHeader {
                    file_number: entry.file_number,
                    lcp_id: entry.lcp_id,
                    table_id: control.table_id,
                    table_version: control.table_version,
                    partition: control.partition,
                    full_parts: entry.full_parts,
                    row_id_page_shift: control.row_id_page_shift,
                };
                let mut data = Vec::new();
                DataFileWriter::new(header, &mut data).finish(&mut data);
                let encoded = control.encode();
                let (table, partition) = (control.table_id, control.partition);
                files.push((data_name(table, partition, entry.file_number), data));
                for slot in [ControlSlot::Zero, ControlSlot::One] {
                    files.push((control_name(table, partition, slot), encoded.clone()));
                }
            }
            let pool = ctx.pool();
            let sections: Option<Vec<Section>> = files
                .iter()
                .map(|(_, bytes)| pool.copy_from(bytes))
                .collect();
            let Some(sections) = sections else {
                retry = true;
                continue;
            };
            drop(sections);
            // The pool had room for all of them: send (in order: data file,
            // fsync, slot 0, fsync, slot 1, fsync; the service keeps order).
            for (name, bytes) in &files {
                creation.outstanding += send_whole_file(ctx, address, token, *name, bytes)
                    .expect("the section was free a moment ago");
                self.lcp.bytes_written += bytes.len() as u64;
            }
            creation.sent = true;
        }
        if retry {
            self.lcp.schedule_tick(self.address, ctx, false);
        }
    }

    fn lcp_creation_answered(&mut self, table_id: u32, ctx: &mut dyn Context) {
        let position = self
            .lcp
            .creations
            .iter()
            .position(|creation| creation.table_id == table_id && creation.sent)
            .expect("an LCP creation answer for a table being created");
        let creation = &mut self.lcp.creations[position];
        creation.outstanding -= 1;
        if creation.outstanding > 0 {
            return;
        }
        let creation = self.lcp.creations.remove(position);
        if let Some(table) = self
            .tables
            .get_mut(table_id as usize)
            .and_then(Option::as_mut)
        {
            for control in creation.controls {
                if let Some(partition) = table.partitions[control.partition as usize].as_mut() {
                    partition.lcp.creating = false;
                    let file = control.data_files[0].file_number;
                    let empty_file = (DATA_HEADER_BYTES + END_RECORD_BYTES) as u64;
                    partition.lcp.data_file_bytes.push((file, empty_file));
                    partition.lcp.control_bytes = [control.encoded_len() as u64; 2];
                    let changes = partition.lcp.changes;
                    partition.lcp.counted(control, ControlSlot::One, changes);
                }
            }
        }
        self.lcp_check_restorable(ctx);
        send(
            ctx,
            self.address,
            creation.requester,
            AddTabConf { table_id },
        );
    }
}
