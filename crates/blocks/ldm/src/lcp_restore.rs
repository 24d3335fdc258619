//! The first step of a system restart's RESTORE_REQ (`restore.rs`): load
//! each partition this ldm owns from its local checkpoint
//! (docs/lcp-format.md §4 and §5), before redo is replayed over it.
//!
//! ```text
//! per partition, one file at a time:
//!   read control files 0 and 1 (absent: no file, or empty)
//!     a valid one of another table version is a dropped table's: ignored
//!   choose_control(restored GCI): the newest LCP with max_gci_written <=
//!     the restored GCI (none: the partition restores from redo alone)
//!   read its chain's data files, streamed a section at a time, placing
//!     each row by row id (hash index kept; the ordered indexes are built
//!     from the rows once the redo is replayed) as RestorePlan says
//!   check the row count; the redo start LSN is where replay begins
//!   delete control files holding LCPs that never became restorable (their
//!     GCIs were voided by this restart: they must never be restored
//!     later), then every data file the chosen LCP does not name
//! ```
//!
//! A damaged control file beside a good one is survived and counted (a
//! crash tears the slot being written); both damaged, or any problem in a
//! data file the chosen LCP names, stops the node naming file and offset.
//!
//! A restart that restores GCI 0 (nothing was ever recorded complete, yet
//! the schema file kept tables) formats the redo log anew, and first
//! deletes every LCP file of its partitions (`discard`): they hold rows of
//! GCIs that restart rolls back, and redo start LSNs of the log it formats
//! away. Left in place until each partition's first LCP of the new run
//! overwrote them, they would be taken at a later restart: their
//! `max_gci_written` is below the new run's GCIs (which start above every
//! GCI handed out before), so they count as restorable.

use crate::file_token::FileToken;
use crate::Ldm;
use kernel::{Context, Report};
use signal::fs::{DirName, FileName, FsDone, FsError, FsErrorKind, FsOperation, OpenMode};
use signal::section::MAX_SECTION_BYTES;
use signal::BlockRef;
use storage::lcp_control::{
    choose_control, ControlChoice, ControlFile, DataFileReader, DataFileSummary, PartRole, Record,
    RestorePlan, SlotProblem, Step as ReadStep, DATA_HEADER_BYTES,
};

/// Bytes read of a control file at most (the largest is 65 628 bytes; a
/// longer file is damaged and its decode says so).
const CONTROL_READ_LIMIT: u64 = 1 << 17;

/// What the restore of one partition waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// The open, then the reads, of control file `slot`.
    Control { slot: u32 },
    /// The open, then the reads, of the chain's data file `chain_index`.
    Data,
    /// The listing of the partition's directory (deletes may answer first).
    List,
    /// The deletes of files nothing names.
    Cleanup,
}

/// Loading the local checkpoints of this ldm's partitions.
pub(crate) struct LcpRestore {
    restored_gci: u64,
    /// Restored GCI 0: every LCP file of every partition is deleted, none
    /// is read (see the module doc); the redo log is formatted after.
    discard: bool,
    /// The partitions to restore: (table, partition), in order.
    partitions: Vec<(u32, u32)>,
    /// The one being restored.
    index: usize,
    step: Step,
    /// The control files read (None: absent).
    slots: [Option<Vec<u8>>; 2],
    /// The LCP being loaded, and how.
    control: Option<ControlFile>,
    plan: Option<RestorePlan>,
    chain_index: usize,
    /// The file being read, and how many files were opened (tells a
    /// file's answers from the next one's).
    file: Option<FileName>,
    opened: u64,
    file_size: u64,
    next_offset: u64,
    /// Bytes read and not yet decoded, starting at file offset `pending_at`.
    pending: Vec<u8>,
    pending_at: u64,
    reader: Option<DataFileReader>,
    /// Deletes sent and not yet answered.
    deletes: u32,
    /// Files deleted (for the discard's report).
    deleted: u64,
    started_ms: u64,
    rows: u64,
    files: u64,
    damaged_copies: u64,
}

fn control_name(table: u32, partition: u32, slot: u32) -> FileName {
    FileName::LcpControl {
        table,
        partition,
        copy: slot,
    }
}

impl LcpRestore {
    fn current(&self) -> (u32, u32) {
        self.partitions[self.index]
    }
}

impl Ldm {
    /// Starts loading every owned partition's LCP; the redo part of the
    /// restore follows when done.
    pub(crate) fn lcp_restore_start(&mut self, restored_gci: u64, ctx: &mut dyn Context) {
        let mut partitions = Vec::new();
        for (table_id, table) in self.tables.iter_mut().enumerate() {
            for partition in table
                .iter_mut()
                .flat_map(|table| table.partitions.iter_mut().flatten())
            {
                partitions.push((table_id as u32, partition.store.id));
                if restored_gci > 0 {
                    // Built from the rows once they are all in
                    // (`restore::build_restored_indexes_step`).
                    partition.store.defer_ordered_indexes();
                }
            }
        }
        let restore = self.restore.as_mut().expect("a restore runs");
        restore.lcp = Some(LcpRestore {
            restored_gci,
            discard: restored_gci == 0,
            partitions,
            index: 0,
            step: Step::Control { slot: 0 },
            slots: [None, None],
            control: None,
            plan: None,
            chain_index: 0,
            file: None,
            opened: 0,
            file_size: 0,
            next_offset: 0,
            pending: Vec::new(),
            pending_at: 0,
            reader: None,
            deletes: 0,
            deleted: 0,
            started_ms: ctx.now_ms(),
            rows: 0,
            files: 0,
            damaged_copies: 0,
        });
        self.lcp_restore_partition(ctx);
    }

    fn lcp_restore_state(&mut self) -> &mut LcpRestore {
        self.restore
            .as_mut()
            .and_then(|restore| restore.lcp.as_mut())
            .expect("an LCP restore runs")
    }

    /// Starts on the partition at `index`, or ends the LCP step.
    fn lcp_restore_partition(&mut self, ctx: &mut dyn Context) {
        let state = self.lcp_restore_state();
        if state.index == state.partitions.len() {
            let state = self
                .restore
                .as_mut()
                .and_then(|restore| restore.lcp.take())
                .expect("an LCP restore runs");
            if state.discard {
                ctx.report(Report::Phase {
                    name: "delete local checkpoints of a run rolled back to GCI 0",
                    elapsed_ms: ctx.now_ms().saturating_sub(state.started_ms),
                    count: state.deleted,
                    unit: "files",
                });
                let address = self.address;
                return self
                    .redo
                    .as_mut()
                    .expect("a restore runs with a redo log")
                    .format(address, ctx);
            }
            ctx.report(Report::Phase {
                name: "restore local checkpoints",
                elapsed_ms: ctx.now_ms().saturating_sub(state.started_ms),
                count: state.rows,
                unit: "rows",
            });
            if state.damaged_copies > 0 {
                ctx.report(Report::Phase {
                    name: "damaged LCP control file copies passed over",
                    elapsed_ms: 0,
                    count: state.damaged_copies,
                    unit: "control files",
                });
            }
            return self.restore_read_redo(ctx);
        }
        state.slots = [None, None];
        state.control = None;
        state.plan = None;
        state.deletes = 0;
        if state.discard {
            return self.lcp_restore_list(ctx);
        }
        let (table, partition) = state.current();
        self.lcp_restore_open(
            control_name(table, partition, 0),
            Step::Control { slot: 0 },
            ctx,
        );
    }

    fn lcp_restore_open(&mut self, file: FileName, step: Step, ctx: &mut dyn Context) {
        let address = self.address;
        let state = self.lcp_restore_state();
        state.step = step;
        state.file = Some(file);
        state.opened += 1;
        state.file_size = 0;
        state.next_offset = 0;
        state.pending.clear();
        state.pending_at = 0;
        state.reader = None;
        ctx.fs_request(
            address,
            FileToken::LcpRestore.encode(),
            FsOperation::Open {
                file,
                mode: OpenMode::Existing,
            },
        );
    }

    /// Asks for the next piece of the file being read.
    fn lcp_restore_read_more(&mut self, ctx: &mut dyn Context) {
        let address = self.address;
        let state = self.lcp_restore_state();
        let length = (state.file_size - state.next_offset).min(MAX_SECTION_BYTES as u64);
        ctx.fs_request(
            address,
            FileToken::LcpRestore.encode(),
            FsOperation::Read {
                file: state.file.expect("a file is being read"),
                offset: state.next_offset,
                len: length as u32,
            },
        );
    }

    /// An io answer of the LCP restore.
    pub(crate) fn lcp_restore_answered(
        &mut self,
        result: Result<FsDone, FsError>,
        ctx: &mut dyn Context,
    ) {
        let address = self.address;
        let state = self.lcp_restore_state();
        let step = state.step;
        let done = match result {
            Ok(done) => done,
            Err(FsError {
                kind: FsErrorKind::NotFound,
                ..
            }) if matches!(step, Step::Control { .. }) => {
                return self.lcp_restore_control_read(None, ctx);
            }
            Err(FsError {
                kind: FsErrorKind::NotFound,
                operation: "delete",
                ..
            }) => FsDone::Deleted,
            Err(error) => {
                let file = state.file.map_or(String::new(), |file| file.to_string());
                ctx.fatal(format!(
                    "ldm {address}: restoring local checkpoint file {file} failed, the node \
                     stops: {error}"
                ))
            }
        };
        match done {
            FsDone::Deleted => {
                state.deletes -= 1;
                if state.step == Step::Cleanup && state.deletes == 0 {
                    state.index += 1;
                    self.lcp_restore_partition(ctx);
                }
            }
            FsDone::Opened { size } => {
                state.file_size = match step {
                    Step::Control { .. } => size.min(CONTROL_READ_LIMIT),
                    _ => size,
                };
                if state.file_size == 0 {
                    self.lcp_restore_file_read(ctx);
                } else {
                    self.lcp_restore_read_more(ctx);
                }
            }
            FsDone::Read { data } => {
                let bytes = data.as_slice();
                state.pending.extend_from_slice(bytes);
                state.next_offset += bytes.len() as u64;
                if bytes.is_empty() {
                    // Shorter than its open said.
                    state.file_size = state.next_offset;
                }
                drop(data);
                let opened = state.opened;
                if step == Step::Data {
                    // May finish the file and open the next one.
                    self.lcp_restore_decode(ctx);
                }
                let state = self.lcp_restore_state();
                if state.opened == opened && state.step == step {
                    if state.next_offset < state.file_size {
                        self.lcp_restore_read_more(ctx);
                    } else {
                        self.lcp_restore_file_read(ctx);
                    }
                }
            }
            FsDone::Listed { files } => self.lcp_restore_cleanup(files, ctx),
            other => panic!("ldm {address}: LCP restore answer {other:?} in step {step:?}"),
        }
    }

    /// The file being read is read to its end.
    fn lcp_restore_file_read(&mut self, ctx: &mut dyn Context) {
        let state = self.lcp_restore_state();
        match state.step {
            Step::Control { .. } => {
                let bytes = std::mem::take(&mut state.pending);
                self.lcp_restore_control_read(Some(bytes), ctx);
            }
            Step::Data => {
                // The end record ends decoding before the file ends; a file
                // that ends first is cut short.
                let opened = state.opened;
                self.lcp_restore_decode(ctx);
                let state = self.lcp_restore_state();
                if state.opened == opened && state.step == Step::Data {
                    let file = state.file.expect("a data file is being read");
                    let at = state.file_size;
                    let message = format!("at byte {at}: the file ends before its end record");
                    lcp_file_damaged(ctx, self.address, file, &message);
                }
            }
            step => panic!("a file read finished in step {step:?}"),
        }
    }

    /// Control file `slot` is read (`None`: absent).
    fn lcp_restore_control_read(&mut self, bytes: Option<Vec<u8>>, ctx: &mut dyn Context) {
        let state = self.lcp_restore_state();
        let Step::Control { slot } = state.step else {
            panic!("a control file answer outside the control step");
        };
        state.slots[slot as usize] = bytes;
        let (table, partition) = state.current();
        if slot == 0 {
            return self.lcp_restore_open(
                control_name(table, partition, 1),
                Step::Control { slot: 1 },
                ctx,
            );
        }
        self.lcp_restore_choose(ctx);
    }

    /// Both control files are read: choose the LCP to load.
    fn lcp_restore_choose(&mut self, ctx: &mut dyn Context) {
        let address = self.address;
        let state = self.lcp_restore_state();
        let (table_id, partition_id) = state.current();
        let restored_gci = state.restored_gci;
        let slots = std::mem::take(&mut state.slots);
        let version = self.tables[table_id as usize]
            .as_ref()
            .expect("restoring an owned partition")
            .definition
            .version;
        // A valid control file of another version of the table is what a
        // dropped table with this id left: not this table's.
        let mut stale = Vec::new();
        let mut usable: [Option<&[u8]>; 2] = [None, None];
        for (slot, bytes) in slots.iter().enumerate() {
            let Some(bytes) = bytes else { continue };
            match ControlFile::decode(bytes) {
                Ok(control) if control.table_version != version => stale.push(slot as u32),
                _ => usable[slot] = Some(bytes),
            }
        }
        let choice = choose_control(usable[0], usable[1], table_id, partition_id, restored_gci)
            .unwrap_or_else(|error| {
                ctx.fatal(format!(
                    "ldm {address}: table {table_id} partition {partition_id}: cannot restore \
                     from its local checkpoint files (lcp/{table_id}/{partition_id}/0.ctl and \
                     1.ctl), the node stops: {error}"
                ))
            });
        let control_bytes = self.lcp_restore_void_controls(&slots, stale, &choice, ctx);
        let partition = self.tables[table_id as usize]
            .as_mut()
            .and_then(|table| table.partitions[partition_id as usize].as_mut())
            .expect("restoring an owned partition");
        if let Some((_, control)) = &choice.restore {
            // The index takes the LCP's rows without splitting a chain.
            partition
                .store
                .index
                .reserve(&mut self.memory, control.row_count);
        }
        let lcp = &mut partition.lcp;
        lcp.control_bytes = control_bytes;
        lcp.data_file_bytes.clear();
        lcp.write_next = choice.write_next;
        lcp.next_lcp_id = choice.newest_lcp_id + 1;
        lcp.newest = None;
        lcp.newest_restorable = false;
        lcp.previous = None;
        lcp.restorable_start_lsn = None;
        // The files do not hold what redo replays over them: the next LCP
        // is written in full.
        lcp.newest_changes = None;
        let Some((_, control)) = choice.restore else {
            return self.lcp_restore_list(ctx);
        };
        let state = self.lcp_restore_state();
        let plan = control.restore_plan();
        state.chain_index = plan.first_needed();
        state.plan = Some(plan);
        state.control = Some(control);
        self.lcp_restore_open_data(ctx);
    }

    /// Deletes the control files this restart voids: `stale` slots (a
    /// dropped table's) and LCPs that never became restorable (their GCIs
    /// are above the restored one, so they must not be restorable at a
    /// later restart either); counts damaged copies. Returns the bytes of
    /// each control file that stays on disk (for the checkpoint report).
    fn lcp_restore_void_controls(
        &mut self,
        slots: &[Option<Vec<u8>>; 2],
        stale: Vec<u32>,
        choice: &ControlChoice,
        ctx: &mut dyn Context,
    ) -> [u64; 2] {
        let address = self.address;
        let state = self.lcp_restore_state();
        let (table_id, partition_id) = state.current();
        let mut obsolete = stale;
        for (slot, problem) in &choice.passed_over {
            match problem {
                SlotProblem::Damaged(_) => state.damaged_copies += 1,
                SlotProblem::NotRestorable { .. } => obsolete.push(slot.index()),
                SlotProblem::Absent => {}
            }
        }
        let mut control_bytes = [0u64; 2];
        for (slot, bytes) in slots.iter().enumerate() {
            control_bytes[slot] = bytes.as_ref().map_or(0, |bytes| bytes.len() as u64);
        }
        for slot in &obsolete {
            control_bytes[*slot as usize] = 0;
        }
        for slot in obsolete {
            state.deletes += 1;
            ctx.fs_request(
                address,
                FileToken::LcpRestore.encode(),
                FsOperation::Delete {
                    file: control_name(table_id, partition_id, slot),
                },
            );
        }
        control_bytes
    }

    fn lcp_restore_open_data(&mut self, ctx: &mut dyn Context) {
        let state = self.lcp_restore_state();
        let (table, partition) = state.current();
        let control = state.control.as_ref().expect("an LCP is being loaded");
        let file = FileName::LcpData {
            table,
            partition,
            file: control.data_files[state.chain_index].file_number,
        };
        self.lcp_restore_open(file, Step::Data, ctx);
    }

    /// Decodes and places the records of the data file read so far; at
    /// its end record, goes on to the next file of the chain.
    fn lcp_restore_decode(&mut self, ctx: &mut dyn Context) {
        if !self.lcp_restore_has_reader(ctx) {
            return;
        }
        let state = self.lcp_restore_state();
        let mut reader = state.reader.take().expect("made above");
        let pending = std::mem::take(&mut state.pending);
        let plan = state.plan.take().expect("an LCP is being loaded");
        let consumed = (reader.position() - state.pending_at) as usize;
        let (consumed, rows, end) =
            self.lcp_restore_place(&mut reader, &pending, consumed, &plan, ctx);
        let state = self.lcp_restore_state();
        state.rows += rows;
        state.plan = Some(plan);
        state.pending = pending;
        state.pending.drain(..consumed);
        state.pending_at += consumed as u64;
        state.reader = Some(reader);
        if let Some(summary) = end {
            self.lcp_restore_file_done(summary, ctx);
        }
    }

    /// Makes the reader of the data file being read once its header is
    /// in, checked against the control file; false while bytes are missing.
    fn lcp_restore_has_reader(&mut self, ctx: &mut dyn Context) -> bool {
        let address = self.address;
        let state = self.lcp_restore_state();
        if state.reader.is_some() {
            return true;
        }
        if (state.pending.len() as u64) < DATA_HEADER_BYTES as u64
            && state.next_offset < state.file_size
        {
            return false;
        }
        let file = state.file.expect("a data file is being read");
        let control = state.control.as_ref().expect("an LCP is being loaded");
        let entry = control.data_files[state.chain_index];
        let reader = DataFileReader::new(&state.pending, state.file_size)
            .unwrap_or_else(|error| lcp_file_damaged(ctx, address, file, &error));
        if let Err(error) = reader.header().check_against(control, &entry) {
            lcp_file_damaged(ctx, address, file, &error);
        }
        state.reader = Some(reader);
        true
    }

    /// Places the records in `pending[consumed..]` by row id as `plan`
    /// says: (bytes consumed, rows placed, the end record if reached).
    fn lcp_restore_place(
        &mut self,
        reader: &mut DataFileReader,
        pending: &[u8],
        mut consumed: usize,
        plan: &RestorePlan,
        ctx: &mut dyn Context,
    ) -> (usize, u64, Option<DataFileSummary>) {
        let address = self.address;
        let state = self.lcp_restore_state();
        let file = state.file.expect("a data file is being read");
        let (table_id, partition_id) = state.current();
        let chain_index = state.chain_index;
        let mut rows = 0;
        loop {
            let step = reader
                .next(&pending[consumed..])
                .unwrap_or_else(|error| lcp_file_damaged(ctx, address, file, &error));
            let (length, record) = match step {
                ReadStep::NeedMore { .. } => return (consumed, rows, None),
                ReadStep::End(summary) => return (consumed, rows, Some(summary)),
                ReadStep::Record { length, record, .. } => (length, record),
            };
            consumed += length;
            let placed = match record {
                Record::Row { row_id, gci, image } => match plan.row_role(chain_index, row_id) {
                    PartRole::Skip => Ok(()),
                    PartRole::AllRows | PartRole::Changes => {
                        rows += 1;
                        self.restore_put_row(table_id, partition_id, row_id, gci, image, None)
                    }
                },
                Record::Delete { row_id, gci } => match plan.row_role(chain_index, row_id) {
                    PartRole::Changes => {
                        self.restore_remove_row(table_id, partition_id, row_id, gci)
                    }
                    PartRole::Skip | PartRole::AllRows => Ok(()),
                },
            };
            if let Err(message) = placed {
                ctx.fatal(format!(
                    "ldm {address}: cannot load local checkpoint data file {file}: {message}"
                ));
            }
        }
    }

    /// The data file being read reached its end record: check it, then
    /// open the chain's next file or finish the partition.
    fn lcp_restore_file_done(&mut self, summary: DataFileSummary, ctx: &mut dyn Context) {
        let address = self.address;
        let state = self.lcp_restore_state();
        let file = state.file.expect("a data file is being read");
        let (table_id, partition_id) = state.current();
        let control = state.control.as_ref().expect("an LCP is being loaded");
        let entry = control.data_files[state.chain_index];
        if let Err(error) = summary.check_against(&entry) {
            lcp_file_damaged(ctx, address, file, &error);
        }
        let file_bytes = state.file_size;
        self.tables[table_id as usize]
            .as_mut()
            .and_then(|table| table.partitions[partition_id as usize].as_mut())
            .expect("restoring an owned partition")
            .lcp
            .data_file_bytes
            .push((entry.file_number, file_bytes));
        let state = self.lcp_restore_state();
        state.files += 1;
        state.chain_index += 1;
        state.reader = None;
        let control = state.control.as_ref().expect("an LCP is being loaded");
        if state.chain_index < control.data_files.len() {
            self.lcp_restore_open_data(ctx);
        } else {
            self.lcp_restore_loaded(ctx);
        }
    }

    /// The chosen LCP is loaded: check it, note where replay starts.
    fn lcp_restore_loaded(&mut self, ctx: &mut dyn Context) {
        let address = self.address;
        let state = self.lcp_restore_state();
        let (table_id, partition_id) = state.current();
        let control = state.control.clone().expect("an LCP was loaded");
        let partition = self.tables[table_id as usize]
            .as_mut()
            .and_then(|table| table.partitions[partition_id as usize].as_mut())
            .expect("restoring an owned partition");
        if partition.store.rows() != control.row_count {
            ctx.fatal(format!(
                "ldm {address}: local checkpoint {} of table {table_id} partition \
                 {partition_id} restored {} rows, its control file says {}: the files do not \
                 belong together, the node stops",
                control.lcp_id,
                partition.store.rows(),
                control.row_count
            ));
        }
        let lcp = &mut partition.lcp;
        lcp.restorable_start_lsn = Some(control.redo_start_lsn);
        lcp.newest = Some(control);
        lcp.newest_restorable = true;
        self.lcp_restore_list(ctx);
    }

    /// Lists the partition's directory to delete what nothing names.
    fn lcp_restore_list(&mut self, ctx: &mut dyn Context) {
        let address = self.address;
        let state = self.lcp_restore_state();
        state.step = Step::List;
        let (table, partition) = state.current();
        ctx.fs_request(
            address,
            FileToken::LcpRestore.encode(),
            FsOperation::List {
                dir: DirName::Lcp { table, partition },
            },
        );
    }

    /// Deletes the data files the restored LCP does not name: those of
    /// LCPs cut by a crash or never restorable. When discarding, deletes
    /// every file: the control files first (the io thread keeps order), so
    /// a crash in between leaves no control file naming a missing file.
    fn lcp_restore_cleanup(&mut self, mut files: Vec<FileName>, ctx: &mut dyn Context) {
        let address = self.address;
        let state = self.lcp_restore_state();
        files.sort_by_key(|file| !matches!(file, FileName::LcpControl { .. }));
        for file in files {
            let delete = match file {
                FileName::LcpData { file: number, .. } => {
                    state.discard
                        || !state
                            .control
                            .as_ref()
                            .is_some_and(|control| control.references(number))
                }
                FileName::LcpControl { .. } => state.discard,
                _ => false,
            };
            if delete {
                state.deletes += 1;
                state.deleted += 1;
                ctx.fs_request(
                    address,
                    FileToken::LcpRestore.encode(),
                    FsOperation::Delete { file },
                );
            }
        }
        state.step = Step::Cleanup;
        if state.deletes == 0 {
            state.index += 1;
            self.lcp_restore_partition(ctx);
        }
    }
}

/// A data file of the LCP being loaded is damaged: the node stops.
fn lcp_file_damaged(
    ctx: &mut dyn Context,
    address: BlockRef,
    file: FileName,
    error: &dyn std::fmt::Display,
) -> ! {
    ctx.fatal(format!(
        "ldm {address}: local checkpoint data file {file} is damaged, the node stops: {error}"
    ))
}
