//! The ldm's redo log (docs/design/durability.md §3): the parts this ldm
//! instance writes, each a `storage::redo::RedoAppender` over a buffer of
//! its own, and the I/O that moves closed pages to the part's files through
//! the node's file service (`Context::fs_request`).
//!
//! The life of a row change in the log:
//! - **prepare** reserves room for the record in the partition's part
//!   (`reserve`): the commit that follows cannot fail, so a part without
//!   room refuses the operation with a temporary error instead (redo log
//!   full; writes behind);
//! - **commit** appends the record (`append`) and hands every page that is
//!   now full to the io thread; nothing is fsynced at commit;
//! - a **GCP_SAVEREQ** from the master dih appends the "g complete" marker
//!   to every part, closes the page, writes what is left and fsyncs every
//!   file written since the last fsync; the conf goes back only then.
//!
//! Pages are handed to the io thread in order and answered in order (the
//! service keeps a node's requests in order), which is what
//! `RedoAppender::written` requires. A write larger than a section is sent
//! in pieces of at most `MAX_SECTION_BYTES`.
//!
//! A part is formatted on an initial start (every file created with its
//! header page, fsynced) and resumed after a restore (`restore.rs`). An
//! I/O error on any redo file stops the node (`Context::fatal`).

use crate::file_token::FileToken;
use crate::Ldm;
use kernel::{send, Context};
use signal::fs::{FileName, FsOperation, OpenMode};
use signal::section::MAX_SECTION_BYTES;
use signal::signals::GcpSaveConf;
use signal::{BlockRef, ErrorCode, Gci};
use std::collections::VecDeque;
use storage::redo::{
    encode_file_header, record_bytes, AppendError, AppenderConfig, Change, PageWrite, RedoAppender,
    RedoGeometry, PAGE_BODY_BYTES, PAGE_BYTES,
};

/// How this ldm's redo log is set up (from config, `datanode::wiring`).
#[derive(Clone, Debug)]
pub struct RedoSettings {
    /// Every part's ring shape.
    pub geometry: RedoGeometry,
    /// Pages of each part's buffer.
    pub buffer_pages: u32,
    /// Ring pages kept for GCI markers (`AppenderConfig`).
    pub marker_reserve_pages: u32,
    /// The parts this ldm instance writes (dih's `redo_parts_of_ldm`).
    pub parts: Vec<u32>,
}

impl RedoSettings {
    /// The appender config of `part`.
    pub(crate) fn appender_config(&self, part: u32) -> AppenderConfig {
        AppenderConfig {
            geometry: self.geometry,
            part,
            buffer_pages: self.buffer_pages,
            marker_reserve_pages: self.marker_reserve_pages,
        }
    }
}

/// Pages of slack every room check keeps free beyond the reserved bytes:
/// each GCI marker appended while reservations wait closes the page being
/// filled, wasting at most one page (and reserved records are packed back
/// to back otherwise). Eight cover 16 s of global checkpoints at the
/// default interval; a commit past that may still use the marker reserve.
const SLACK_PAGES: usize = 8;

/// A page write handed out by the appender, sent in pieces.
#[derive(Debug)]
struct InFlight {
    write: PageWrite,
    /// Bytes of it not yet sent to the io thread.
    unsent_from: usize,
    /// Pieces sent and not yet answered.
    pieces_outstanding: u32,
}

/// One part: its appender, its buffer, what is reserved and in flight.
pub(crate) struct PartLog {
    pub(crate) part: u32,
    pub(crate) appender: Option<RedoAppender>,
    pub(crate) buffer: Vec<u8>,
    /// Record bytes reserved by prepared operations, not yet appended.
    reserved_bytes: usize,
    /// Page writes handed out, in order; the front completes first.
    in_flight: VecDeque<InFlight>,
    /// Files written since their last fsync.
    dirty_files: Vec<bool>,
    /// Syncs sent and not yet answered, and the page they make durable.
    syncs_outstanding: u32,
    sync_through_page: u64,
}

/// Where a GCP_SAVEREQ stands.
#[derive(Clone, Copy, Debug)]
struct SaveRound {
    gci: u64,
    from: BlockRef,
    /// The marker is appended to every part.
    marked: bool,
    /// Syncs have been sent for every part.
    syncing: bool,
}

/// The redo log of one ldm instance.
pub(crate) struct RedoLog {
    pub(crate) settings: RedoSettings,
    pub(crate) parts: Vec<PartLog>,
    save: Option<SaveRound>,
    /// Format steps not yet answered (initial start).
    format_outstanding: u32,
}

/// What an io answer completed, for the ldm to act on.
pub(crate) enum Completed {
    /// Nothing the ldm must act on.
    Nothing,
    /// The GCP_SAVEREQ of `gci` from `from` is durable: confirm it.
    Saved { gci: u64, from: BlockRef },
    /// Every part is formatted (or resumed and fsynced): ready to log.
    Ready,
}

impl RedoLog {
    /// The log of `settings`, with buffers allocated now (at start, not on
    /// the commit path) and no part usable until formatted or restored.
    pub(crate) fn new(settings: RedoSettings) -> RedoLog {
        assert!(
            !settings.parts.is_empty(),
            "an ldm with a redo log writes at least one part: config gives every ldm a part"
        );
        let buffer_bytes = settings.buffer_pages as usize * PAGE_BYTES;
        let file_count = settings.geometry.file_count() as usize;
        let parts = settings
            .parts
            .iter()
            .map(|&part| PartLog {
                part,
                appender: None,
                buffer: vec![0; buffer_bytes],
                reserved_bytes: 0,
                in_flight: VecDeque::with_capacity(settings.buffer_pages as usize),
                dirty_files: vec![false; file_count],
                syncs_outstanding: 0,
                sync_through_page: 0,
            })
            .collect();
        RedoLog {
            settings,
            parts,
            save: None,
            format_outstanding: 0,
        }
    }

    /// The local index of redo part `part` (the partition's `redo_part`).
    pub(crate) fn index_of(&self, part: u32) -> usize {
        self.settings
            .parts
            .iter()
            .position(|&mine| mine == part)
            .unwrap_or_else(|| {
                panic!(
                    "redo part {part} is not one of this ldm's parts {:?}: dih assigns a \
                     partition only a part of its own ldm",
                    self.settings.parts
                )
            })
    }

    /// Whether every part can take records.
    pub(crate) fn is_ready(&self) -> bool {
        self.parts.iter().all(|part| part.appender.is_some())
    }

    /// Reserves room for a row change of at most `bytes` record bytes in
    /// part `index`, or says why not (a temporary error for the client).
    pub(crate) fn reserve(&mut self, index: usize, bytes: usize) -> Result<(), ErrorCode> {
        let part = &mut self.parts[index];
        let Some(appender) = part.appender.as_ref() else {
            // Not formatted or restored yet: the node is not started.
            return Err(ErrorCode::NodeNotStarted);
        };
        let wanted = part.reserved_bytes + bytes + SLACK_PAGES * PAGE_BODY_BYTES;
        match appender.check_room(wanted) {
            Ok(()) => {
                part.reserved_bytes += bytes;
                Ok(())
            }
            Err(AppendError::LogFull) => Err(ErrorCode::RedoLogFull),
            Err(AppendError::BufferFull) => Err(ErrorCode::RedoOverloaded),
        }
    }

    /// Gives back a reservation made by `reserve` with the same `bytes`.
    pub(crate) fn release(&mut self, index: usize, bytes: usize) {
        let part = &mut self.parts[index];
        let total = bytes;
        assert!(
            part.reserved_bytes >= total,
            "redo part {}: releasing {total} reserved bytes of {}",
            part.part,
            part.reserved_bytes
        );
        part.reserved_bytes -= total;
    }

    /// The record bytes an operation reserves: its key and the largest
    /// after-image of its table.
    pub(crate) fn reservation_bytes(key_bytes: usize, max_image_bytes: usize) -> usize {
        record_bytes(key_bytes, max_image_bytes)
    }

    /// Appends a committed change to part `index` (its room was reserved
    /// at prepare) and sends the pages it filled.
    pub(crate) fn append(
        &mut self,
        index: usize,
        change: &Change<'_>,
        address: BlockRef,
        ctx: &mut dyn Context,
    ) {
        let part = &mut self.parts[index];
        let appender = part
            .appender
            .as_mut()
            .expect("an operation prepared only with its part ready to log");
        if let Err(error) = appender.append_reserved_change(&mut part.buffer, change) {
            panic!(
                "redo part {}: a change reserved at prepare found no room at commit ({error}): \
                 the reservation slack was too small",
                part.part
            );
        }
        Self::send_writes(part, index, address, ctx);
    }

    /// GCP_SAVEREQ: mark `gci` complete in every part, write and fsync.
    pub(crate) fn start_save(
        &mut self,
        gci: u64,
        from: BlockRef,
        address: BlockRef,
        ctx: &mut dyn Context,
    ) -> Completed {
        assert!(
            self.save.is_none(),
            "ldm {address}: GCP_SAVEREQ for GCI {gci} while the save of {:?} runs: the master \
             runs one save round at a time",
            self.save
        );
        assert!(
            self.is_ready(),
            "ldm {address}: GCP_SAVEREQ before the redo log is ready: GCIs start only after \
             every ldm restored"
        );
        self.save = Some(SaveRound {
            gci,
            from,
            marked: false,
            syncing: false,
        });
        self.advance_save(address, ctx)
    }

    /// Moves a save round on as far as it can go now.
    fn advance_save(&mut self, address: BlockRef, ctx: &mut dyn Context) -> Completed {
        let Some(mut save) = self.save else {
            return Completed::Nothing;
        };
        if !save.marked {
            for (index, part) in self.parts.iter_mut().enumerate() {
                let appender = part.appender.as_mut().expect("ready parts have appenders");
                if appender.complete_gci() >= save.gci {
                    continue;
                }
                match appender.append_gci_complete(&mut part.buffer, save.gci) {
                    Ok(_) => appender.close_page(&mut part.buffer),
                    // Writes behind: retried when they complete.
                    Err(AppendError::BufferFull) => {
                        Self::send_writes(part, index, address, ctx);
                        return Completed::Nothing;
                    }
                    Err(AppendError::LogFull) => panic!(
                        "redo part {}: no room for the marker of GCI {} even in the marker \
                         reserve",
                        part.part, save.gci
                    ),
                }
                Self::send_writes(part, index, address, ctx);
            }
            save.marked = true;
        }
        if !save.syncing {
            if self.parts.iter().any(|part| !part.in_flight_all_sent()) {
                self.save = Some(save);
                return Completed::Nothing;
            }
            for (index, part) in self.parts.iter_mut().enumerate() {
                Self::send_syncs(part, index, address, ctx);
            }
            save.syncing = true;
        }
        self.save = Some(save);
        self.finish_save_if_synced()
    }

    fn finish_save_if_synced(&mut self) -> Completed {
        let Some(save) = self.save else {
            return Completed::Nothing;
        };
        if !save.syncing || self.parts.iter().any(|part| part.syncs_outstanding > 0) {
            return Completed::Nothing;
        }
        self.save = None;
        Completed::Saved {
            gci: save.gci,
            from: save.from,
        }
    }

    /// Sends every closed page of `part` not yet sent.
    fn send_writes(part: &mut PartLog, index: usize, address: BlockRef, ctx: &mut dyn Context) {
        let appender = part
            .appender
            .as_mut()
            .expect("writes only from ready parts");
        while let Some(write) = appender.next_write() {
            part.in_flight.push_back(InFlight {
                write,
                unsent_from: 0,
                pieces_outstanding: 0,
            });
        }
        let pool = ctx.pool();
        for flight in part.in_flight.iter_mut() {
            while flight.unsent_from < flight.write.bytes {
                let length = (flight.write.bytes - flight.unsent_from).min(MAX_SECTION_BYTES);
                let start = flight.write.buffer_offset + flight.unsent_from;
                let Some(data) = pool.copy_from(&part.buffer[start..start + length]) else {
                    // Sections are all in use: sent when an answer frees one.
                    return;
                };
                let file = flight.write.file;
                ctx.fs_request(
                    address,
                    FileToken::RedoWrite { part: index, file }.encode(),
                    FsOperation::Write {
                        file: FileName::Redo {
                            part: part.part,
                            file,
                        },
                        offset: flight.write.file_offset + flight.unsent_from as u64,
                        data,
                    },
                );
                part.dirty_files[file as usize] = true;
                flight.unsent_from += length;
                flight.pieces_outstanding += 1;
            }
        }
    }

    /// Sends an fsync of every file of `part` written since its last one.
    fn send_syncs(part: &mut PartLog, index: usize, address: BlockRef, ctx: &mut dyn Context) {
        let appender = part.appender.as_ref().expect("syncs only of ready parts");
        part.sync_through_page = part
            .in_flight
            .back()
            .map_or(appender.written_through(), |flight| {
                flight.write.first_page + flight.write.page_count
            });
        for file in 0..part.dirty_files.len() {
            if part.dirty_files[file] {
                part.dirty_files[file] = false;
                part.syncs_outstanding += 1;
                ctx.fs_request(
                    address,
                    FileToken::RedoSync {
                        part: index,
                        file: file as u32,
                    }
                    .encode(),
                    FsOperation::Sync {
                        file: FileName::Redo {
                            part: part.part,
                            file: file as u32,
                        },
                    },
                );
            }
        }
    }

    /// Sends the fsyncs that make a resumed part's invalidation durable
    /// (every file of the part, docs/design/durability.md §5). Part of a
    /// restore.
    pub(crate) fn sync_resumed(&mut self, address: BlockRef, ctx: &mut dyn Context) {
        for (index, part) in self.parts.iter_mut().enumerate() {
            Self::send_writes(part, index, address, ctx);
            part.dirty_files.fill(true);
            Self::send_syncs(part, index, address, ctx);
        }
    }

    /// Formats every part for an initial start: each file created empty
    /// with its header page, fsynced. `Completed::Ready` follows once all
    /// are answered.
    pub(crate) fn format(&mut self, address: BlockRef, ctx: &mut dyn Context) {
        let geometry = self.settings.geometry;
        for (index, part) in self.parts.iter().enumerate() {
            for file in 0..geometry.file_count() {
                let name = FileName::Redo {
                    part: part.part,
                    file,
                };
                let header = encode_file_header(geometry, part.part, file);
                let data = ctx
                    .pool()
                    .copy_from(&header)
                    .expect("the section pool has room for format writes at start");
                let token = FileToken::RedoFormat { part: index, file }.encode();
                let steps = [
                    FsOperation::Open {
                        file: name,
                        mode: OpenMode::Create,
                    },
                    FsOperation::SetLen { file: name, len: 0 },
                    FsOperation::Write {
                        file: name,
                        offset: 0,
                        data,
                    },
                    FsOperation::Sync { file: name },
                ];
                for step in steps {
                    self.format_outstanding += 1;
                    ctx.fs_request(address, token, step);
                }
            }
        }
    }

    /// A piece of a page write of part `index` is written: the page it
    /// completes is the part's oldest in flight (the service answers in
    /// order).
    pub(crate) fn write_answered(
        &mut self,
        index: usize,
        address: BlockRef,
        ctx: &mut dyn Context,
    ) -> Completed {
        let part = &mut self.parts[index];
        let front = part
            .in_flight
            .front_mut()
            .expect("a redo write answered with none in flight");
        front.pieces_outstanding -= 1;
        if front.pieces_outstanding == 0 && front.unsent_from == front.write.bytes {
            let done = part.in_flight.pop_front().expect("front exists");
            part.appender
                .as_mut()
                .expect("writes only from ready parts")
                .written(&done.write);
        }
        // An answer frees a section: send what waited for one.
        for (index, part) in self.parts.iter_mut().enumerate() {
            if part.appender.is_some() {
                Self::send_writes(part, index, address, ctx);
            }
        }
        self.advance_save(address, ctx)
    }

    /// An fsync of part `index` is done.
    pub(crate) fn sync_answered(&mut self, index: usize) -> Completed {
        let part = &mut self.parts[index];
        part.syncs_outstanding -= 1;
        if part.syncs_outstanding == 0 {
            let through = part.sync_through_page;
            part.appender
                .as_mut()
                .expect("syncs only of ready parts")
                .synced(through);
            if self.save.is_none() {
                // The fsyncs of a resume: ready once every part's are in.
                return if self.parts.iter().all(|part| part.syncs_outstanding == 0) {
                    Completed::Ready
                } else {
                    Completed::Nothing
                };
            }
        }
        self.finish_save_if_synced()
    }

    /// A format step is done; the log is ready after the last one.
    pub(crate) fn format_answered(&mut self) -> Completed {
        self.format_outstanding -= 1;
        if self.format_outstanding > 0 {
            return Completed::Nothing;
        }
        for part in &mut self.parts {
            let config = self.settings.appender_config(part.part);
            part.appender = Some(RedoAppender::initial(config));
        }
        Completed::Ready
    }
}

impl PartLog {
    /// Every handed-out write was sent to the io thread.
    fn in_flight_all_sent(&self) -> bool {
        self.in_flight
            .iter()
            .all(|flight| flight.unsent_from == flight.write.bytes)
    }
}

impl Ldm {
    /// GCP_SAVEREQ: make `gci` complete in every redo part, durably.
    pub(crate) fn gcp_save(&mut self, from: BlockRef, gci: Gci, ctx: &mut dyn Context) {
        self.lcp_saw_save(gci.0, ctx);
        let Some(redo) = self.redo.as_mut() else {
            // Diskless: nothing to make durable.
            return send(ctx, self.address, from, GcpSaveConf { gci });
        };
        if let Completed::Saved { gci, from } = redo.start_save(gci.0, from, self.address, ctx) {
            send(ctx, self.address, from, GcpSaveConf { gci: Gci(gci) });
        }
    }
}
