//! RESTORE_REQ from dih (start phase RESTORE_DATA,
//! docs/design/durability.md §5): bring this ldm's partitions back from disk
//! up to the restored GCI, then make the redo log ready to take new records.
//!
//! ```text
//! restored GCI 0 (initial start, or nothing ever complete): delete every
//!   LCP file of the partitions (`lcp_restore.rs`), format every part ---> conf
//! otherwise: load each partition's newest restorable local checkpoint
//!              (`lcp_restore.rs`), which says where its redo starts
//!            read every file of every part (one read at a time)
//!            scan each part from the oldest redo start of its partitions:
//!              end of log, torn tail cut, corruption fatal
//!            check the part marks the restored GCI complete
//!            replay its changes with GCI <= restored, by row id, each
//!              partition from its own redo start (hash index kept as
//!              rows are placed)
//!            build every ordered index from the rows, sorted, one
//!              partition a signal (the phase's time is measured)
//!            resume each part: invalidation record, written, every file
//!              fsynced ---------------------------------------------------> conf
//! ```
//!
//! Replay is idempotent (docs/design/durability.md §3): an insert or update
//! places the full after-image at its row id whether or not the row is
//! there; a delete of a missing row does nothing. A change older than the
//! partition's state may find its row id holding another key (the checkpoint
//! saw the id reused after a delete the change precedes): the row there is
//! removed and the change placed, and the later records bring the final
//! state. Records of tables the schema no longer has (dropped) are skipped.
//! A part with a partition that has no checkpoint (or with none) is scanned
//! from the oldest record it still holds (`oldest_start_lsn`).
//!
//! Every phase is reported with its duration (`Report::Phase`).

use crate::file_token::FileToken;
use crate::operation::NIL;
use crate::{Ldm, TableState};
use kernel::{send, Context, Report};
use rowstore::{PageMemory, Partition, RowLayout, RowState};
use signal::attr::key_hash;
use signal::fs::{FileName, FsDone, FsError, FsErrorKind, FsOperation, OpenMode};
use signal::schema::TableDef;
use signal::section::MAX_SECTION_BYTES;
use signal::signals::{ContinueB, RestoreConf};
use signal::BlockRef;
use storage::redo::{
    oldest_start_lsn, scan_part, Change, Operation as RedoOperation, PartScan, RedoAppender,
    RedoGeometry, ReplayFilter,
};

/// A restore in progress.
pub(crate) struct Restore {
    /// Who asked (dih).
    requester: BlockRef,
    restored_gci: u64,
    started_ms: u64,
    /// Per part, per file: the bytes read so far.
    files: Vec<Vec<Vec<u8>>>,
    /// The file being read: (part index, file), and the next offset.
    reading: Option<(usize, u32)>,
    next_offset: u64,
    /// Size of the file being read (from its open).
    file_size: u64,
    highest_gci: u64,
    replayed: u64,
    /// The local checkpoints being loaded (the first step).
    pub(crate) lcp: Option<crate::lcp_restore::LcpRestore>,
    /// The ordered indexes being built from the restored rows, one
    /// partition a signal (`job::BUILD_INDEXES`): so the phase's time is
    /// measured (a block's clock moves between signals only) and other
    /// signals run between partitions.
    index_build: Option<IndexBuild>,
}

/// The build of the restored partitions' ordered indexes.
struct IndexBuild {
    started_ms: u64,
    /// Entries built so far.
    entries: u64,
    /// The redo log became ready meanwhile (at this time): the restore
    /// finishes once the build does.
    finish_waits: Option<u64>,
}

/// ContinueB jobs of the restore.
pub(crate) mod job {
    /// Build the ordered indexes of the next partition restored without
    /// them.
    pub const BUILD_INDEXES: u32 = 21;
}

impl Ldm {
    /// RESTORE_REQ: format (initial start) or restore from the redo log.
    pub(crate) fn restore(&mut self, from: BlockRef, restored_gci: u64, ctx: &mut dyn Context) {
        assert!(
            self.restore.is_none(),
            "ldm {}: RESTORE_REQ while a restore runs",
            self.address
        );
        let Some(redo) = self.redo.as_ref() else {
            // Diskless: nothing on disk, nothing to restore.
            return send(
                ctx,
                self.address,
                from,
                RestoreConf {
                    highest_gci: signal::Gci(0),
                    replayed: 0,
                },
            );
        };
        self.restored_gci = restored_gci;
        let part_count = redo.parts.len();
        let file_count = redo.settings.geometry.file_count() as usize;
        self.restore = Some(Restore {
            requester: from,
            restored_gci,
            started_ms: ctx.now_ms(),
            files: vec![vec![Vec::new(); file_count]; part_count],
            reading: None,
            next_offset: 0,
            file_size: 0,
            highest_gci: 0,
            replayed: 0,
            lcp: None,
            index_build: None,
        });
        // Restored GCI 0: the LCP step deletes what the rolled-back run
        // left, then formats the redo log (`lcp_restore.rs`).
        self.lcp_restore_start(restored_gci, ctx);
    }

    /// The local checkpoints are loaded: read the redo log.
    pub(crate) fn restore_read_redo(&mut self, ctx: &mut dyn Context) {
        self.open_next_file(0, 0, ctx);
    }

    /// The open of redo file `file` of part `index` is answered: read it.
    pub(crate) fn restore_redo_opened(
        &mut self,
        index: usize,
        file: u32,
        result: Result<FsDone, FsError>,
        ctx: &mut dyn Context,
    ) {
        let done = self.restore_redo_result(index, file, result, ctx);
        let FsDone::Opened { size } = done else {
            panic!("ldm {}: restore answer {done:?} to an open", self.address);
        };
        let file_bytes = self.redo_file_bytes();
        let restore = self.restore.as_mut().expect("a restore runs");
        restore.file_size = size.min(file_bytes);
        restore.next_offset = 0;
        restore.files[index][file as usize] = Vec::with_capacity(restore.file_size as usize);
        self.restore_read_next(index, file, ctx);
    }

    /// A read of redo file `file` of part `index` is answered: keep the
    /// bytes, read on.
    pub(crate) fn restore_redo_read(
        &mut self,
        index: usize,
        file: u32,
        result: Result<FsDone, FsError>,
        ctx: &mut dyn Context,
    ) {
        let done = self.restore_redo_result(index, file, result, ctx);
        let FsDone::Read { data } = done else {
            panic!("ldm {}: restore answer {done:?} to a read", self.address);
        };
        let restore = self.restore.as_mut().expect("a restore runs");
        let bytes = data.as_slice();
        restore.files[index][file as usize].extend_from_slice(bytes);
        restore.next_offset += bytes.len() as u64;
        if bytes.is_empty() {
            // The file ended early (shorter than its open said).
            restore.file_size = restore.next_offset;
        }
        drop(data);
        self.restore_read_next(index, file, ctx);
    }

    /// What an open or read of a redo file gave; a failure stops the node.
    fn restore_redo_result(
        &self,
        index: usize,
        file: u32,
        result: Result<FsDone, FsError>,
        ctx: &mut dyn Context,
    ) -> FsDone {
        match result {
            Ok(done) => done,
            Err(FsError {
                kind: FsErrorKind::NotFound,
                ..
            }) => ctx.fatal(format!(
                "ldm {}: redo file {} is missing, but the node restores GCI {} from its \
                 redo log: the data directory lost files",
                self.address,
                self.redo_file_name(index, file),
                self.restore
                    .as_ref()
                    .map_or(0, |restore| restore.restored_gci)
            )),
            Err(error) => ctx.fatal(format!(
                "ldm {}: reading the redo log failed, the node stops: {error}",
                self.address
            )),
        }
    }

    /// Bytes of a redo file.
    fn redo_file_bytes(&self) -> u64 {
        self.redo
            .as_ref()
            .expect("restoring from redo")
            .settings
            .geometry
            .file_bytes()
    }

    /// Reads the next piece of redo file `file` of part `index`, or opens
    /// the next file, or, once every file of every part is read, replays.
    fn restore_read_next(&mut self, index: usize, file: u32, ctx: &mut dyn Context) {
        let restore = self.restore.as_ref().expect("a restore runs");
        if restore.next_offset < restore.file_size {
            let length = (restore.file_size - restore.next_offset).min(MAX_SECTION_BYTES as u64);
            let offset = restore.next_offset;
            ctx.fs_request(
                self.address,
                FileToken::RedoRestoreRead { part: index, file }.encode(),
                FsOperation::Read {
                    file: self.redo_file_name(index, file),
                    offset,
                    len: length as u32,
                },
            );
            return;
        }
        let redo = self.redo.as_ref().expect("restoring from redo");
        let file_count = redo.settings.geometry.file_count();
        if file + 1 < file_count {
            self.open_next_file(index, file + 1, ctx);
        } else if index + 1 < redo.parts.len() {
            self.open_next_file(index + 1, 0, ctx);
        } else {
            self.replay_and_resume(ctx);
        }
    }

    fn redo_file_name(&self, index: usize, file: u32) -> FileName {
        let redo = self.redo.as_ref().expect("restoring from redo");
        FileName::Redo {
            part: redo.parts[index].part,
            file,
        }
    }

    fn open_next_file(&mut self, index: usize, file: u32, ctx: &mut dyn Context) {
        let name = self.redo_file_name(index, file);
        let restore = self.restore.as_mut().expect("a restore runs");
        restore.reading = Some((index, file));
        ctx.fs_request(
            self.address,
            FileToken::RedoRestoreOpen { part: index, file }.encode(),
            FsOperation::Open {
                file: name,
                mode: OpenMode::Existing,
            },
        );
    }

    /// Every file is read: scan, replay and resume each part.
    fn replay_and_resume(&mut self, ctx: &mut dyn Context) {
        let read_ms = ctx.now_ms();
        let mut restore = self.restore.take().expect("a restore runs");
        let total_bytes: u64 = restore
            .files
            .iter()
            .flatten()
            .map(|file| file.len() as u64)
            .sum();
        ctx.report(Report::Phase {
            name: "read redo log",
            elapsed_ms: read_ms.saturating_sub(restore.started_ms),
            count: total_bytes,
            unit: "bytes",
        });
        let mut redo = self.redo.take().expect("restoring from redo");
        let geometry = redo.settings.geometry;
        let restored_gci = restore.restored_gci;
        for (index, files) in restore.files.iter().enumerate() {
            let part = redo.parts[index].part;
            let scan = self.scan_redo_part(files, geometry, part, restored_gci, ctx);
            restore.highest_gci = restore.highest_gci.max(scan.highest_gci);
            restore.replayed += self.replay_redo_part(&scan, files, part, restored_gci, ctx);
            let config = redo.settings.appender_config(part);
            let log = &mut redo.parts[index];
            match RedoAppender::resume(config, &scan, restored_gci, &mut log.buffer) {
                Ok(appender) => log.appender = Some(appender),
                Err(error) => ctx.fatal(format!(
                    "ldm {}: redo part {part} has no room for the restart's invalidation \
                     record: {error}",
                    self.address
                )),
            }
        }
        let replay_ms = ctx.now_ms();
        ctx.report(Report::Phase {
            name: "replay redo log",
            elapsed_ms: replay_ms.saturating_sub(read_ms),
            count: restore.replayed,
            unit: "row changes replayed",
        });
        if self.has_deferred_indexes() {
            restore.index_build = Some(IndexBuild {
                started_ms: ctx.now_ms(),
                entries: 0,
                finish_waits: None,
            });
            continue_build(self.address, ctx);
        }
        restore.files = Vec::new();
        restore.started_ms = ctx.now_ms();
        redo.sync_resumed(self.address, ctx);
        self.redo = Some(redo);
        self.restore = Some(restore);
    }

    /// Whether a partition was restored without its ordered indexes.
    fn has_deferred_indexes(&self) -> bool {
        self.tables
            .iter()
            .flatten()
            .flat_map(|table| table.partitions.iter().flatten())
            .any(|partition| partition.store.ordered_deferred())
    }

    /// ContinueB `job::BUILD_INDEXES`: every row is restored; builds every
    /// ordered index of the next partition restored without them from its
    /// rows, sorted (the restore put the rows in without them,
    /// `lcp_restore_start`): a pass over each index's entries rather than a
    /// descent per row. The last one reports the phase, and finishes the
    /// restore if the redo log is ready. DataMemory without room for them
    /// stops the node, as for the rows.
    pub(crate) fn build_restored_indexes_step(&mut self, ctx: &mut dyn Context) {
        let built = self.build_next_partition_indexes(ctx);
        let Some(restore) = self.restore.as_mut() else {
            panic!(
                "ldm {}: an index build step outside a restore",
                self.address
            );
        };
        let build = restore
            .index_build
            .as_mut()
            .expect("a build step of a running build");
        if let Some(entries) = built {
            build.entries += entries;
            return continue_build(self.address, ctx);
        }
        let build = restore.index_build.take().expect("checked just now");
        ctx.report(Report::Phase {
            name: "build ordered indexes",
            elapsed_ms: ctx.now_ms().saturating_sub(build.started_ms),
            count: build.entries,
            unit: "index entries",
        });
        if let Some(ready_ms) = build.finish_waits {
            self.finish_restore(ready_ms, ctx);
        }
    }

    /// Builds the ordered indexes of the first partition restored without
    /// them: the entries built, `None` when none is left.
    fn build_next_partition_indexes(&mut self, ctx: &mut dyn Context) -> Option<u64> {
        for (table_id, table) in self.tables.iter_mut().enumerate() {
            let Some(table) = table else { continue };
            for partition in table.partitions.iter_mut().flatten() {
                if !partition.store.ordered_deferred() {
                    continue;
                }
                return match partition
                    .store
                    .build_deferred_indexes(&mut self.memory, &table.layout)
                {
                    Ok(built) => Some(built),
                    Err(_) => ctx.fatal(format!(
                        "ldm {}: DataMemory is too small for the ordered indexes of the \
                         restored rows (table {table_id}, partition {})",
                        self.address, partition.store.id
                    )),
                };
            }
        }
        None
    }

    /// Scans redo part `part` (its `files`) from where its partitions
    /// need it to the end of the log; a damaged log, or one that does not
    /// reach the restored GCI, stops the node.
    fn scan_redo_part(
        &self,
        files: &[Vec<u8>],
        geometry: RedoGeometry,
        part: u32,
        restored_gci: u64,
        ctx: &mut dyn Context,
    ) -> PartScan {
        let damaged = |ctx: &mut dyn Context, error: &dyn std::fmt::Display| -> ! {
            ctx.fatal(format!(
                "ldm {}: redo log damaged, the node stops: {error}",
                self.address
            ))
        };
        let start_lsn = match self.redo_start_of_part(part) {
            Some(lsn) => lsn,
            None => {
                oldest_start_lsn(files, geometry, part).unwrap_or_else(|error| damaged(ctx, &error))
            }
        };
        let scan = scan_part(files, geometry, part, start_lsn)
            .unwrap_or_else(|error| damaged(ctx, &error));
        if let Err(error) = scan.check_reaches(restored_gci) {
            ctx.fatal(format!("ldm {}: {error}", self.address));
        }
        scan
    }

    /// Replays the changes of a scanned redo part with GCIs up to the
    /// restored one, each partition's from its own redo start; returns how
    /// many were applied.
    fn replay_redo_part(
        &mut self,
        scan: &PartScan,
        files: &[Vec<u8>],
        part: u32,
        restored_gci: u64,
        ctx: &mut dyn Context,
    ) -> u64 {
        let address = self.address;
        let damaged = |ctx: &mut dyn Context, error: &dyn std::fmt::Display| -> ! {
            ctx.fatal(format!(
                "ldm {address}: redo log damaged, the node stops: {error}"
            ))
        };
        let mut filter = ReplayFilter::new(scan, files, restored_gci)
            .unwrap_or_else(|error| damaged(ctx, &error));
        let mut replayed = 0;
        loop {
            let change = match filter.next_change() {
                Ok(Some(change)) => change,
                Ok(None) => return replayed,
                Err(error) => damaged(ctx, &error),
            };
            if change.lsn < self.redo_start_of_partition(&change.change) {
                // The partition's checkpoint already holds it.
                continue;
            }
            if let Err(message) = self.apply_change(&change.change) {
                ctx.fatal(format!(
                    "ldm {address}: cannot replay redo part {part} LSN {}: {message}",
                    change.lsn
                ));
            }
            replayed += 1;
        }
    }

    /// The redo log is formatted, or resumed and fsynced: the restore is done.
    pub(crate) fn restore_finished(&mut self, ctx: &mut dyn Context) {
        if let Some(build) = self.restore.as_mut().and_then(|r| r.index_build.as_mut()) {
            // The ordered indexes are still being built: finished by the
            // build's last step.
            build.finish_waits = Some(ctx.now_ms());
            return;
        }
        self.finish_restore(ctx.now_ms(), ctx);
    }

    /// The redo log became ready at `ready_ms` and every ordered index is
    /// built: the restore is done.
    fn finish_restore(&mut self, ready_ms: u64, ctx: &mut dyn Context) {
        assert!(
            !self.has_deferred_indexes(),
            "ldm {}: the restore ends with partitions lacking their ordered indexes",
            self.address
        );
        let restore = self
            .restore
            .take()
            .expect("the redo log became ready during a restore");
        let name = if restore.restored_gci == 0 {
            "format redo log"
        } else {
            "invalidate redo beyond the restored GCI"
        };
        let parts = self.redo.as_ref().map_or(0, |redo| redo.parts.len());
        ctx.report(Report::Phase {
            name,
            elapsed_ms: ready_ms.saturating_sub(restore.started_ms),
            count: parts as u64,
            unit: "redo parts",
        });
        send(
            ctx,
            self.address,
            restore.requester,
            RestoreConf {
                highest_gci: signal::Gci(restore.highest_gci),
                replayed: restore.replayed,
            },
        );
        self.lcp_start(restore.restored_gci, ctx);
    }

    /// The LSN replay of `part` starts at: the oldest redo start of its
    /// partitions' restored checkpoints. `None` when the part has no
    /// partition, or when any of its partitions restored no checkpoint: the
    /// caller starts from the oldest record there is. Such a partition may
    /// have committed rows in redo: after a restart that restored GCI 0 no
    /// partition has a checkpoint, and one whose first checkpoint of the
    /// new run is not restorable yet has nothing but redo, from wherever
    /// the part's tail stood (the tail does not move while a partition of
    /// the part has no restorable checkpoint, `lcp_move_tails`). Another
    /// partition's redo start may be past those rows (an unchanged
    /// partition's checkpoint is restorable at once, with the redo start of
    /// its time), so taking the oldest start among the partitions that do
    /// have one would skip them.
    fn redo_start_of_part(&self, part: u32) -> Option<u64> {
        let mut start: Option<u64> = None;
        for partition in self
            .tables
            .iter()
            .flatten()
            .flat_map(|table| table.partitions.iter().flatten())
            .filter(|partition| partition.redo_part == part)
        {
            let lsn = partition.lcp.restorable_start_lsn?;
            start = Some(start.map_or(lsn, |start| start.min(lsn)));
        }
        start
    }

    /// The first LSN of redo the partition of `change` needs (0: all).
    fn redo_start_of_partition(&self, change: &Change<'_>) -> u64 {
        self.tables
            .get(change.table as usize)
            .and_then(Option::as_ref)
            .and_then(|table| table.partitions.get(change.partition as usize))
            .and_then(Option::as_ref)
            .and_then(|partition| partition.lcp.restorable_start_lsn)
            .unwrap_or(0)
    }

    /// Applies one logged change by row id, idempotently.
    fn apply_change(&mut self, change: &Change<'_>) -> Result<(), String> {
        let known = self
            .tables
            .get(change.table as usize)
            .and_then(Option::as_ref)
            .map(|table| table.partitions.get(change.partition as usize));
        match known {
            // A table dropped after this change: its rows are gone.
            None => return Ok(()),
            Some(Some(Some(_))) => {}
            Some(_) => {
                return Err(format!(
                    "table {} partition {} is not on this ldm",
                    change.table, change.partition
                ))
            }
        }
        match change.operation {
            RedoOperation::Delete => {
                self.restore_remove_row(change.table, change.partition, change.row_id, change.gci)
            }
            RedoOperation::Insert | RedoOperation::Update => self.restore_put_row(
                change.table,
                change.partition,
                change.row_id,
                change.gci,
                change.image,
                Some(change.key),
            ),
        }
    }

    /// Places `image` (committed at `gci`) at row id `row`, whatever the
    /// slot holds: an update in place when it holds the same key, else the
    /// row there (if any) removed and this one inserted and indexed. `key`
    /// is the row's key section, or `None` to take it from the image (LCP
    /// rows carry none).
    pub(crate) fn restore_put_row(
        &mut self,
        table: u32,
        partition: u32,
        row: u32,
        gci: u64,
        image: &[u8],
        key: Option<&[u8]>,
    ) -> Result<(), String> {
        let Ldm {
            memory,
            tables,
            lcp,
            ..
        } = self;
        let TableState {
            definition,
            layout,
            partitions,
            ..
        } = tables[table as usize]
            .as_mut()
            .expect("checked by the caller");
        let partition = &mut partitions[partition as usize]
            .as_mut()
            .expect("checked by the caller")
            .store;
        check_image(layout, image)?;
        let key_scratch = &mut lcp.key_scratch;
        let key = match key {
            Some(key) => key,
            None => {
                key_scratch.resize(layout.key_max_bytes, 0);
                let length = layout
                    .write_key(layout.image_view(image), key_scratch)
                    .map_err(|error| format!("row {row}: its key cannot be encoded: {error:?}"))?;
                &key_scratch[..length]
            }
        };
        let hash = key_hash(definition, key)
            .map_err(|error| format!("row {row}: the key does not fit the table: {error:?}"))?
            .index_hash();
        if partition.is_occupied(memory, row) {
            if layout.key_matches(partition.view(memory, layout, row), key) {
                let new_var = partition
                    .var_slot_for_image(memory, layout, row, image.len())
                    .ok_or("DataMemory is too small for the restored rows")?;
                // The row moves in the indexes whose columns change, or
                // enters them all if it was not live: their nodes first,
                // so that running out is this error, not a failed insert.
                let promised = if partition.state(memory, row) == RowState::Live {
                    partition.promise_index_update(memory, layout, row, image)
                } else {
                    partition.promise_ordered_insert(memory, row).map(|()| 0)
                };
                let Ok(index_promise) = promised else {
                    if new_var != NIL {
                        partition.free_var(memory, new_var);
                    }
                    return Err("DataMemory is too small for the restored rows".into());
                };
                partition.write_image(memory, layout, row, image, new_var);
                partition.commit_row(memory, layout, row, gci, index_promise);
                return Ok(());
            }
            // The id was reused: an older change meets a newer row.
            remove_row(memory, definition, layout, partition, row, gci)?;
        }
        partition
            .reserve_row_at(memory, row)
            .map_err(|error| format!("cannot place row {row}: {error:?}"))?;
        partition
            .fill_reserved_row(memory, layout, row, image, hash)
            .map_err(|_| "DataMemory is too small for the restored rows")?;
        partition.commit_row(memory, layout, row, gci, 0);
        Ok(())
    }

    /// Removes whatever row is at row id `row` (deleted at `gci`).
    pub(crate) fn restore_remove_row(
        &mut self,
        table: u32,
        partition: u32,
        row: u32,
        gci: u64,
    ) -> Result<(), String> {
        let Ldm { memory, tables, .. } = self;
        let TableState {
            definition,
            layout,
            partitions,
            ..
        } = tables[table as usize]
            .as_mut()
            .expect("checked by the caller");
        let partition = &mut partitions[partition as usize]
            .as_mut()
            .expect("checked by the caller")
            .store;
        remove_row(memory, definition, layout, partition, row, gci)
    }
}

/// Checks that an image has the table's shape before it is stored (its
/// bytes are checksummed on disk; this guards against a writer bug).
fn check_image(layout: &RowLayout, image: &[u8]) -> Result<(), String> {
    if image.len() < layout.fixed_body_bytes || image.len() > layout.image_max_bytes() {
        return Err(format!(
            "a row image of {} bytes does not fit the table (fixed part {} bytes, at most {})",
            image.len(),
            layout.fixed_body_bytes,
            layout.image_max_bytes()
        ));
    }
    let var = &image[layout.fixed_body_bytes..];
    if layout.var_columns > 0
        && (var.len() < 2 * layout.var_columns || layout.var_part_bytes(var) != var.len())
    {
        return Err(format!(
            "a row image's var part of {} bytes does not match its lengths",
            var.len()
        ));
    }
    Ok(())
}

/// Removes the row at `row`, if any: its index entry (found by the hash of
/// the key it holds, which may not be the key of the change at hand) and
/// its slot.
fn remove_row(
    memory: &mut PageMemory,
    definition: &TableDef,
    layout: &RowLayout,
    partition: &mut Partition,
    row: u32,
    gci: u64,
) -> Result<(), String> {
    if !partition.is_occupied(memory, row) {
        return Ok(());
    }
    let mut key = [0u8; 4096];
    let mut heap;
    let key: &mut [u8] = if layout.key_max_bytes <= key.len() {
        &mut key
    } else {
        heap = vec![0u8; layout.key_max_bytes];
        &mut heap
    };
    let length = layout
        .write_key(partition.view(memory, layout, row), key)
        .map_err(|error| format!("row {row}: its key cannot be encoded: {error:?}"))?;
    let hash = key_hash(definition, &key[..length])
        .map_err(|error| format!("row {row} holds a key that does not fit the table: {error:?}"))?
        .index_hash();
    if !partition.index.remove(memory, hash, row) {
        return Err(format!("row {row} is missing from the index"));
    }
    partition.free_row(memory, layout, row, Some(gci));
    Ok(())
}

/// Asks for the next step of the restored indexes' build.
fn continue_build(ldm: BlockRef, ctx: &mut dyn Context) {
    let step = ContinueB {
        job: job::BUILD_INDEXES,
    };
    send(ctx, ldm, ldm, step);
}
