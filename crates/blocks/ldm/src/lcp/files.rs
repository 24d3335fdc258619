//! The file requests of local checkpoints (docs/lcp-format.md): the
//! running LCP's data file (open, truncate, writes of at most a section,
//! `WRITES_IN_FLIGHT` at a time, fsync) and control file (written whole
//! and fsynced, to one slot or, for a first LCP, to both in turn), the
//! empty first LCPs of a table created while the node runs, and the
//! answers to all of these. Any LCP I/O error stops the node, but a data
//! file to delete that is already gone.

use super::{Creation, Stage, CHAIN_RESERVE, POOL_RETRY_MS, WRITES_IN_FLIGHT};
use crate::file_token::FileToken;
use crate::Ldm;
use kernel::{send, Context};
use signal::fs::{FileName, FsDone, FsError, FsErrorKind, FsOperation, OpenMode};
use signal::section::MAX_SECTION_BYTES;
use signal::signals::AddTabConf;
use signal::{BlockRef, Section};
use storage::lcp_control::{
    ControlFile, ControlSlot, DataFileEntry, DataFileHeader, DataFileWriter, PartRange,
    DATA_HEADER_BYTES, DEFAULT_ROW_ID_PAGE_SHIFT, END_RECORD_BYTES,
};

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
pub(super) fn take_chain(spare_chains: &mut Vec<Vec<DataFileEntry>>) -> Vec<DataFileEntry> {
    spare_chains
        .pop()
        .unwrap_or_else(|| Vec::with_capacity(CHAIN_RESERVE))
}

/// The name of a partition's control file in `slot`.
fn control_name(table: u32, partition: u32, slot: ControlSlot) -> FileName {
    FileName::LcpControl {
        table,
        partition,
        copy: slot.index(),
    }
}

/// The name of a partition's data file number `file`.
pub(super) fn data_name(table: u32, partition: u32, file: u32) -> FileName {
    FileName::LcpData {
        table,
        partition,
        file,
    }
}

/// The data file number of LCP `lcp_id` (they are the same).
pub(super) fn file_number(lcp_id: u64) -> u32 {
    u32::try_from(lcp_id).expect("a partition takes fewer than 2^32 LCPs")
}

impl Ldm {
    /// Creates the running LCP's data file empty (open, truncate).
    pub(super) fn lcp_open_data_file(&mut self, file: FileName, ctx: &mut dyn Context) {
        let running = self.lcp.running.as_mut().expect("an LCP runs");
        let token = FileToken::LcpWrite.encode();
        let mode = OpenMode::Create;
        ctx.fs_request(self.address, token, FsOperation::Open { file, mode });
        ctx.fs_request(self.address, token, FsOperation::SetLen { file, len: 0 });
        running.outstanding += 2;
    }

    /// Sends buffered data file bytes: whole sections while scanning, the
    /// rest once draining; then the fsync once all is written.
    pub(super) fn lcp_send_data(&mut self, ctx: &mut dyn Context) {
        let address = self.address;
        let lcp = &mut self.lcp;
        let running = lcp.running.as_mut().expect("an LCP runs");
        let draining = running.stage == Stage::Draining;
        let token = FileToken::LcpWrite.encode();
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
    pub(super) fn lcp_send_control(&mut self, ctx: &mut dyn Context) {
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
        let token = FileToken::LcpWrite.encode();
        match send_whole_file(ctx, address, token, name, bytes) {
            Some(count) => {
                running.outstanding = count;
                running.stage = Stage::Control { index, sent: true };
                self.lcp.bytes_written += bytes.len() as u64;
            }
            None => self.lcp.schedule_advance(self.address, ctx, POOL_RETRY_MS),
        }
    }

    /// An LCP write answered with an error stops the node.
    fn lcp_io_failed(&self, error: FsError, ctx: &mut dyn Context) -> ! {
        ctx.fatal(format!(
            "ldm {}: local checkpoint I/O failed, the node stops: {error}",
            self.address
        ))
    }

    /// The delete of a data file no LCP needs is done (or the file was
    /// already gone).
    pub(crate) fn lcp_delete_answered(
        &mut self,
        result: Result<FsDone, FsError>,
        ctx: &mut dyn Context,
    ) {
        match result {
            Ok(_)
            | Err(FsError {
                kind: FsErrorKind::NotFound,
                ..
            }) => {}
            Err(error) => self.lcp_io_failed(error, ctx),
        }
    }

    /// A step of the running LCP's data or control file is done: move on.
    pub(crate) fn lcp_write_answered(
        &mut self,
        result: Result<FsDone, FsError>,
        ctx: &mut dyn Context,
    ) {
        if let Err(error) = result {
            self.lcp_io_failed(error, ctx);
        }
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

    /// LQHADDTABREQ of a table created while the node runs: each partition
    /// gets an empty first LCP before the table is confirmed. Returns
    /// whether the confirmation waits for it (false: answer at once).
    pub(crate) fn lcp_create_table(
        &mut self,
        table_id: u32,
        requester: BlockRef,
        ctx: &mut dyn Context,
    ) -> bool {
        // The table's unique indexes' hidden tables were added with it.
        let ids: Vec<u32> = match self.tables[table_id as usize].as_ref() {
            Some(base) => {
                let hidden = base
                    .definition
                    .unique_indexes()
                    .filter_map(|index| index.unique);
                std::iter::once(table_id)
                    .chain(hidden.map(|unique| unique.table_id))
                    .collect()
            }
            None => unreachable!("table {table_id} was just added"),
        };
        self.lcp_create_tables(table_id, ids, Some(requester), ctx)
    }

    /// The empty first LCP of every partition of tables `ids`, known as
    /// `key` (the base table's id) until written; then `requester`, if
    /// any, hears ADD_TAB_CONF (a unique index created on a live table
    /// waits for `LcpEngine::creating` instead). Returns whether there is
    /// anything to wait for.
    pub(crate) fn lcp_create_tables(
        &mut self,
        key: u32,
        ids: Vec<u32>,
        requester: Option<BlockRef>,
        ctx: &mut dyn Context,
    ) -> bool {
        if !self.lcp.started {
            // A restart re-adding its tables: their LCPs are on disk.
            return false;
        }
        let table_id = key;
        let Ldm {
            tables, redo, lcp, ..
        } = self;
        let redo = redo.as_ref().expect("LCPs run only with a redo log");
        let mut controls = Vec::new();
        for id in ids {
            let table = tables[id as usize].as_mut().expect("just added");
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
                    table_id: id,
                    table_version: table.definition.version,
                    partition: partition.store.id,
                    full_parts: PartRange::ALL,
                    row_id_page_shift: DEFAULT_ROW_ID_PAGE_SHIFT,
                };
                let mut bytes = Vec::new();
                let summary = DataFileWriter::new(header, &mut bytes).finish(&mut bytes);
                controls.push(ControlFile {
                    lcp_id,
                    previous_lcp_id: 0,
                    table_id: id,
                    table_version: table.definition.version,
                    partition: partition.store.id,
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
    pub(super) fn lcp_send_creations(&mut self, ctx: &mut dyn Context) {
        let address = self.address;
        let mut retry = false;
        for creation in self.lcp.creations.iter_mut().filter(|c| !c.sent) {
            let token = FileToken::LcpCreate {
                table: creation.table_id,
            }
            .encode();
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

    /// A step of table `table_id`'s first LCPs is done; after the last,
    /// they count and the table is confirmed.
    pub(crate) fn lcp_creation_answered(
        &mut self,
        table_id: u32,
        result: Result<FsDone, FsError>,
        ctx: &mut dyn Context,
    ) {
        if let Err(error) = result {
            self.lcp_io_failed(error, ctx);
        }
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
        // The controls of the table's unique indexes' hidden tables too.
        for control in creation.controls {
            let table = self.tables.get_mut(control.table_id as usize);
            if let Some(table) = table.and_then(Option::as_mut) {
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
        if let Some(requester) = creation.requester {
            send(ctx, self.address, requester, AddTabConf { table_id });
        }
    }
}
