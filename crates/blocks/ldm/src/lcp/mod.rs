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
//! as fast as the pacing's credit allows (`pacing`):
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
//! scan runs while `pacing::Pacing` has credit: its speed follows redo
//! fill, the change rate and the thread's load, decided once a second
//! (`job::PACE`, which also reports the counters). A scan slice is
//! `rows_per_slice` rows; at most `WRITES_IN_FLIGHT` data file writes are
//! outstanding. No allocation per row: rows are copied into one reused
//! buffer, drained to the file as it fills.
//!
//! The files of this module, by concern:
//! - `mod.rs`: settings, what a partition knows of its LCPs, the engine's
//!   state and its self-signals (`ContinueB` jobs);
//! - `schedule`: which partition is due and when, starting an LCP, moving
//!   the running one on, counting it, making LCPs restorable and moving
//!   the redo tails;
//! - `scan`: one slice of the row scan (a `rowstore::RowIdCursor` over the
//!   partition's row ids) into the data file buffer, and the control file
//!   built at its end;
//! - `files`: the file requests: data file writes and fsync, control
//!   files, deletes, new tables' first LCPs, and their answers;
//! - `pacing`: how fast the running LCP may write.

mod files;
mod pacing;
mod scan;
mod schedule;

use kernel::Context;
use pacing::Pacing;
use rowstore::RowIdCursor;
use signal::fs::FileName;
use signal::section::MAX_SECTION_BYTES;
use signal::signals::ContinueB;
use signal::BlockRef;
use storage::lcp_control::{
    ControlFile, ControlSlot, DataFileEntry, DataFileWriter, PartRange, DEFAULT_ROW_ID_PAGE_SHIFT,
    MAX_CONTROL_BYTES, RECORD_HEADER_BYTES,
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
    rowstore::slots::SLOT_BITS == DEFAULT_ROW_ID_PAGE_SHIFT as u32,
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
    /// Where the scan stands: over the `max_page_count` pages the
    /// partition had at the start, freed pages included (their deletes).
    cursor: RowIdCursor,
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
    requester: Option<BlockRef>,
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
    /// Tables created while the node runs whose first LCP is being written.
    creations: Vec<Creation>,
    /// A key built from a row, during a restore.
    pub(crate) key_scratch: Vec<u8>,
    /// LCPs that counted since the start (for tests and status).
    pub(crate) completed: u64,
    /// Bytes of row changes committed since the start (`commit.rs`).
    pub(crate) changed_row_bytes: u64,
    /// Bytes written to LCP files since the start.
    pub(crate) bytes_written: u64,
    /// How fast the running LCP may write (`pacing`).
    pacing: Pacing,
    pace_pending: bool,
}

impl LcpEngine {
    /// Whether table `table_id`'s first LCP is still being written.
    pub(crate) fn creating(&self, table_id: u32) -> bool {
        self.creations
            .iter()
            .any(|creation| creation.table_id == table_id)
    }

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
