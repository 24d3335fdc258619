//! appender: lays one part's records into pages of a caller-owned buffer
//! and tracks the part's place in its ring: which pages are ready to write
//! and where, which are written and durable, and how far the head may go
//! before it would overwrite records still needed (the tail).
//!
//! The buffer is a ring of `buffer_pages` pages (the caller allocates it,
//! aligned as its io path needs); page number `p` sits in slot
//! `p % buffer_pages`. A page is handed out for writing only once closed:
//! full, or closed early by [`RedoAppender::close_page`] before an fsync (a
//! GCI marker). Pages are never rewritten, so a torn write can only hit a
//! page that was never known durable. Appending copies bytes and nothing
//! else: no allocation per record.

use super::format::{encode_record_header, seal_page, PageHeader, RecordHeader, RecordKind};
use super::scan::PartScan;
use super::{
    Change, RedoGeometry, FIRST_LSN, MAX_RECORD_BYTES, MAX_RECORD_PAGES, PAGE_BODY_BYTES,
    PAGE_BYTES, PAGE_HEADER_BYTES, RECORD_HEADER_BYTES,
};
use std::fmt;

/// How a part's appender is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppenderConfig {
    /// The ring's shape.
    pub geometry: RedoGeometry,
    /// The part.
    pub part: u32,
    /// Pages of the caller's buffer (at least `MAX_RECORD_PAGES`, so the
    /// largest record fits).
    pub buffer_pages: u32,
    /// Ring pages row changes may not use, kept for GCI markers so global
    /// checkpoints go on completing while the log is full (which is what
    /// lets a local checkpoint finish and move the tail). Each marker with
    /// its fsync takes at most one page; 1..=ring/4.
    pub marker_reserve_pages: u32,
}

impl AppenderConfig {
    /// Bytes of the buffer the caller must pass to every call.
    pub fn buffer_bytes(&self) -> usize {
        self.buffer_pages as usize * PAGE_BYTES
    }

    fn check(&self) {
        assert!(
            self.buffer_pages as usize >= MAX_RECORD_PAGES,
            "a redo buffer of {} pages cannot hold the largest record ({MAX_RECORD_PAGES} \
             pages): config validation must refuse it",
            self.buffer_pages
        );
        assert!(
            self.marker_reserve_pages >= 1,
            "the marker reserve must hold at least one page, or a full log stops GCIs"
        );
        assert!(
            u64::from(self.marker_reserve_pages) <= self.geometry.ring_pages() / 4,
            "a marker reserve of {} pages is over a quarter of the ring ({} pages), so the \
             largest record might never fit",
            self.marker_reserve_pages,
            self.geometry.ring_pages()
        );
    }
}

/// Why a record was not appended. Both are temporary: nothing was written,
/// and the same append succeeds once the condition passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendError {
    /// The ring has no room before the tail: the redo log is full until a
    /// local checkpoint completes and the tail moves ([`RedoAppender::set_tail`]).
    /// Clients get a temporary error; LCPs speed up.
    LogFull,
    /// Every buffer page is waiting to be written: write some
    /// ([`RedoAppender::next_write`], [`RedoAppender::written`]) and retry.
    BufferFull,
}

impl fmt::Display for AppendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppendError::LogFull => f.write_str(
                "redo log full: retry once a local checkpoint has moved the tail (temporary)",
            ),
            AppendError::BufferFull => {
                f.write_str("redo buffer full: waiting for redo writes (temporary)")
            }
        }
    }
}

impl std::error::Error for AppendError {}

/// Bytes a row change with a key of `key_bytes` and an image of
/// `image_bytes` takes in the log (its header included).
pub fn record_bytes(key_bytes: usize, image_bytes: usize) -> usize {
    RECORD_HEADER_BYTES + key_bytes + image_bytes
}

/// Pages ready to be written with one write: `bytes` bytes from
/// `buffer_offset` in the buffer to `file_offset` in file `file`. Never
/// crosses the end of the buffer or of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageWrite {
    /// Number of the first page.
    pub first_page: u64,
    /// Pages in the write.
    pub page_count: u64,
    /// File index.
    pub file: u32,
    /// Byte offset in the file.
    pub file_offset: u64,
    /// Byte offset in the buffer.
    pub buffer_offset: usize,
    /// Bytes to write.
    pub bytes: usize,
}

/// How much of the ring a record may use.
#[derive(Clone, Copy)]
enum Room {
    /// Everything but the marker reserve.
    RowChange,
    /// Everything but one page, kept for the invalidation a restart writes.
    Marker,
    /// Everything.
    Invalidate,
}

/// The writer of one redo part (one per part; the ldm that owns the part's
/// partitions drives it).
#[derive(Debug)]
pub struct RedoAppender {
    config: AppenderConfig,
    incarnation: u32,
    next_lsn: u64,
    /// The page being filled; every page below it is closed.
    head_page: u64,
    /// Body bytes used in the head page (0: nothing there yet; never full,
    /// a full page is closed at once).
    head_used: usize,
    head_first_lsn: u64,
    head_continuation: usize,
    head_complete_gci: u64,
    /// Pages below this were handed out by `next_write`.
    issued_page: u64,
    /// Pages below this are written (their buffer slots are free).
    written_page: u64,
    /// Pages below this are durable (the caller fsynced after writing them).
    synced_page: u64,
    /// The oldest page that must not be overwritten.
    tail_page: u64,
    /// The highest GCI marked complete by records appended so far.
    complete_gci: u64,
    /// Per file: the first LSN of its first page, in its latest lap. Every
    /// record with bytes before a file's first page has an LSN at most that.
    file_start_lsn: Vec<u64>,
}

impl RedoAppender {
    /// The appender of a freshly formatted part: page 0, LSN 1, incarnation 1.
    pub fn initial(config: AppenderConfig) -> RedoAppender {
        config.check();
        RedoAppender {
            config,
            incarnation: 1,
            next_lsn: FIRST_LSN,
            head_page: 0,
            head_used: 0,
            head_first_lsn: 0,
            head_continuation: 0,
            head_complete_gci: 0,
            issued_page: 0,
            written_page: 0,
            synced_page: 0,
            tail_page: 0,
            complete_gci: 0,
            file_start_lsn: vec![0; config.geometry.file_count() as usize],
        }
    }

    /// The appender of a part after a restart, continuing after the end
    /// `scan` found. It starts a new incarnation with an invalidation
    /// record for `restored_gci` in a fresh page, already closed: write it
    /// ([`RedoAppender::next_write`]), fsync every file of the part, call
    /// [`RedoAppender::synced`], and only then accept writes
    /// (docs/design/durability.md §5: redo beyond the restored point is
    /// invalidated durably first).
    pub fn resume(
        config: AppenderConfig,
        scan: &PartScan,
        restored_gci: u64,
        buffer: &mut [u8],
    ) -> Result<RedoAppender, AppendError> {
        config.check();
        assert_eq!(
            (config.geometry, config.part),
            (scan.geometry, scan.part),
            "an appender resumes the part it scanned"
        );
        let end = &scan.end;
        let mut appender = RedoAppender {
            config,
            incarnation: end.next_incarnation,
            next_lsn: end.next_lsn,
            head_page: end.next_page,
            head_used: 0,
            head_first_lsn: 0,
            head_continuation: 0,
            head_complete_gci: 0,
            issued_page: end.next_page,
            written_page: end.next_page,
            synced_page: end.synced_page.min(end.next_page),
            tail_page: scan.start_page().unwrap_or(end.next_page),
            complete_gci: scan.last_complete_gci.unwrap_or(0).min(restored_gci),
            file_start_lsn: scan.file_start_lsn().to_vec(),
        };
        let header = RecordHeader::bare(RecordKind::Invalidate, 0, restored_gci);
        appender.append(buffer, header, &[], &[], Room::Invalidate)?;
        appender.close_page(buffer);
        Ok(appender)
    }

    /// Appends a committed row change; returns its LSN.
    pub fn append_change(
        &mut self,
        buffer: &mut [u8],
        change: &Change<'_>,
    ) -> Result<u64, AppendError> {
        let header = RecordHeader::row_change(0, change);
        self.append(buffer, header, change.key, change.image, Room::RowChange)
    }

    /// Appends a committed row change whose room was checked with
    /// [`RedoAppender::check_room`] when its operation prepared: it may use
    /// the marker reserve, because GCI markers appended since then may have
    /// eaten into the room that check saw. Returns its LSN.
    pub fn append_reserved_change(
        &mut self,
        buffer: &mut [u8],
        change: &Change<'_>,
    ) -> Result<u64, AppendError> {
        let header = RecordHeader::row_change(0, change);
        self.append(buffer, header, change.key, change.image, Room::Marker)
    }

    /// Whether row changes of `record_bytes` in all (each record's
    /// [`record_bytes`] summed, plus what earlier checks reserved and not
    /// yet appended) fit now, both in the ring before the tail (keeping the
    /// marker reserve) and in the buffer. Operations check at prepare, so
    /// that their commit, which cannot fail, finds room.
    pub fn check_room(&self, record_bytes: usize) -> Result<(), AppendError> {
        let spill = record_bytes.saturating_sub(PAGE_BODY_BYTES - self.head_used);
        // A page of slack for each record boundary a GCI marker might close
        // early is not knowable here; callers add their own slack.
        let last_page = self.head_page + spill.div_ceil(PAGE_BODY_BYTES) as u64;
        if last_page >= self.written_page + u64::from(self.config.buffer_pages) {
            return Err(AppendError::BufferFull);
        }
        let kept = u64::from(self.config.marker_reserve_pages);
        if last_page + kept >= self.tail_page + self.config.geometry.ring_pages() {
            return Err(AppendError::LogFull);
        }
        Ok(())
    }

    /// Appends the "GCI `gci` is complete" marker; returns its LSN. Close
    /// the page, write it and fsync before reporting the GCI durable.
    pub fn append_gci_complete(&mut self, buffer: &mut [u8], gci: u64) -> Result<u64, AppendError> {
        assert!(
            gci >= self.complete_gci,
            "GCI {gci} marked complete after GCI {}: GCIs complete in order",
            self.complete_gci
        );
        let header = RecordHeader::bare(RecordKind::GciComplete, 0, gci);
        let lsn = self.append(buffer, header, &[], &[], Room::Marker)?;
        self.complete_gci = gci;
        Ok(lsn)
    }

    /// Closes the page being filled, if it holds anything, so it can be
    /// written; the next record starts a new page.
    pub fn close_page(&mut self, buffer: &mut [u8]) {
        self.check_buffer(buffer);
        if self.head_used > 0 {
            self.close_head(buffer);
        }
    }

    /// The next pages to write, if any are closed and not yet handed out.
    /// Writes must complete (be reported to [`RedoAppender::written`]) in
    /// the order they were handed out.
    pub fn next_write(&mut self) -> Option<PageWrite> {
        if self.issued_page == self.head_page {
            return None;
        }
        let first_page = self.issued_page;
        let buffer_pages = u64::from(self.config.buffer_pages);
        let slot = first_page % buffer_pages;
        let geometry = self.config.geometry;
        let in_file = (first_page % geometry.ring_pages()) % geometry.pages_per_file();
        let page_count = (self.head_page - first_page)
            .min(buffer_pages - slot)
            .min(geometry.pages_per_file() - in_file);
        let location = geometry.location(first_page);
        self.issued_page += page_count;
        Some(PageWrite {
            first_page,
            page_count,
            file: location.file,
            file_offset: location.offset,
            buffer_offset: slot as usize * PAGE_BYTES,
            bytes: page_count as usize * PAGE_BYTES,
        })
    }

    /// `write` is on disk (not necessarily durable): its buffer slots are free.
    pub fn written(&mut self, write: &PageWrite) {
        assert_eq!(
            write.first_page, self.written_page,
            "redo writes must complete in the order they were handed out"
        );
        assert!(
            write.first_page + write.page_count <= self.issued_page,
            "a write of pages {}..{} that was never handed out",
            write.first_page,
            write.first_page + write.page_count
        );
        self.written_page += write.page_count;
    }

    /// Pages below this number are written (pass it to `synced` once an
    /// fsync issued after now completes).
    pub fn written_through(&self) -> u64 {
        self.written_page
    }

    /// Every file of the part was fsynced after the pages below
    /// `through_page` were written: they are durable. Pages sealed from now
    /// on record it, which is what lets a restart tell damage to durable
    /// pages (corruption) from a torn tail.
    pub fn synced(&mut self, through_page: u64) {
        assert!(
            through_page <= self.written_page,
            "page {through_page} reported durable but only pages below {} are written",
            self.written_page
        );
        assert!(
            through_page >= self.synced_page,
            "the durable point went back from page {} to {through_page}",
            self.synced_page
        );
        self.synced_page = through_page;
    }

    /// Records with LSNs from `oldest_needed_lsn` on must be kept (the start
    /// of the oldest local checkpoint still needed); older ones may be
    /// overwritten. The tail moves to the end of a file at a time, and
    /// keeps the record just before `oldest_needed_lsn` too, so a restart
    /// can always find the page where the needed records start.
    pub fn set_tail(&mut self, oldest_needed_lsn: u64) {
        let keep_from = oldest_needed_lsn.saturating_sub(1);
        let pages_per_file = self.config.geometry.pages_per_file();
        loop {
            // The pages from the tail to the end of its file hold records
            // with LSNs up to the first LSN of the next file's first page,
            // once that page is open (after a restart the tail may be in
            // the middle of a file the head has come round to again).
            let file_end = (self.tail_page / pages_per_file + 1) * pages_per_file;
            let opened =
                file_end < self.head_page || (file_end == self.head_page && self.head_used > 0);
            if !opened {
                break;
            }
            if self.file_start_lsn[self.config.geometry.file_of(file_end)] >= keep_from {
                break;
            }
            self.tail_page = file_end;
        }
    }

    /// The LSN the next record gets (what a local checkpoint records as its
    /// redo start).
    pub fn next_lsn(&self) -> u64 {
        self.next_lsn
    }

    /// The highest GCI marked complete so far.
    pub fn complete_gci(&self) -> u64 {
        self.complete_gci
    }

    /// This run's incarnation.
    pub fn incarnation(&self) -> u32 {
        self.incarnation
    }

    /// Ring pages between the tail and the head, the head page included
    /// (for pacing local checkpoints against redo use).
    pub fn pages_in_use(&self) -> u64 {
        self.head_page + u64::from(self.head_used > 0) - self.tail_page
    }

    /// Redo pages in the ring.
    pub fn ring_pages(&self) -> u64 {
        self.config.geometry.ring_pages()
    }

    fn check_buffer(&self, buffer: &[u8]) {
        assert_eq!(
            buffer.len(),
            self.config.buffer_bytes(),
            "the caller must pass the same redo buffer to every call"
        );
    }

    fn slot_start(&self, page: u64) -> usize {
        (page % u64::from(self.config.buffer_pages)) as usize * PAGE_BYTES
    }

    fn append(
        &mut self,
        buffer: &mut [u8],
        mut header: RecordHeader,
        key: &[u8],
        image: &[u8],
        room: Room,
    ) -> Result<u64, AppendError> {
        self.check_buffer(buffer);
        let total = RECORD_HEADER_BYTES + key.len() + image.len();
        assert!(
            total <= MAX_RECORD_BYTES,
            "a redo record of {total} bytes is over {MAX_RECORD_BYTES}: dict bounds rows to \
             24 000 bytes"
        );
        // Check both limits before writing a byte, so a record is appended
        // whole or not at all.
        let spill = total.saturating_sub(PAGE_BODY_BYTES - self.head_used);
        let last_page = self.head_page + spill.div_ceil(PAGE_BODY_BYTES) as u64;
        if last_page >= self.written_page + u64::from(self.config.buffer_pages) {
            return Err(AppendError::BufferFull);
        }
        let kept = match room {
            Room::RowChange => u64::from(self.config.marker_reserve_pages),
            Room::Marker => 1,
            Room::Invalidate => 0,
        };
        if last_page + kept >= self.tail_page + self.config.geometry.ring_pages() {
            return Err(AppendError::LogFull);
        }
        let lsn = self.next_lsn;
        header.lsn = lsn;
        let head = encode_record_header(&header, key, image);
        let mut remaining = total;
        for piece in [&head[..], key, image] {
            self.put(buffer, piece, lsn, total, &mut remaining);
        }
        assert_eq!(remaining, 0, "every byte of the record was placed");
        assert!(
            self.head_page <= last_page + 1,
            "the record took more pages than were checked"
        );
        self.next_lsn += 1;
        Ok(lsn)
    }

    /// Copies `bytes` (a piece of record `lsn`, `total` bytes long, of which
    /// `remaining` are still to place) into the head page, closing full
    /// pages and opening new ones as it goes.
    fn put(
        &mut self,
        buffer: &mut [u8],
        mut bytes: &[u8],
        lsn: u64,
        total: usize,
        remaining: &mut usize,
    ) {
        while !bytes.is_empty() {
            if self.head_used == 0 {
                let continuation = if *remaining == total {
                    0
                } else {
                    (*remaining).min(PAGE_BODY_BYTES)
                };
                self.open_head(buffer, lsn, continuation);
            }
            let count = bytes.len().min(PAGE_BODY_BYTES - self.head_used);
            let at = self.slot_start(self.head_page) + PAGE_HEADER_BYTES + self.head_used;
            buffer[at..at + count].copy_from_slice(&bytes[..count]);
            self.head_used += count;
            *remaining -= count;
            bytes = &bytes[count..];
            if self.head_used == PAGE_BODY_BYTES {
                self.close_head(buffer);
            }
        }
    }

    fn open_head(&mut self, buffer: &mut [u8], lsn: u64, continuation: usize) {
        assert!(
            self.head_page < self.written_page + u64::from(self.config.buffer_pages),
            "page {} opened over an unwritten buffer slot: the room check failed",
            self.head_page
        );
        assert!(
            self.head_page < self.tail_page + self.config.geometry.ring_pages(),
            "page {} would overwrite page {} below the tail: the room check failed",
            self.head_page,
            self.head_page - self.config.geometry.ring_pages()
        );
        let start = self.slot_start(self.head_page);
        // Padding is zero (the page checksum covers it, a reader checks it).
        buffer[start..start + PAGE_BYTES].fill(0);
        if self
            .head_page
            .is_multiple_of(self.config.geometry.pages_per_file())
        {
            self.file_start_lsn[self.config.geometry.file_of(self.head_page)] = lsn;
        }
        self.head_first_lsn = lsn;
        self.head_continuation = continuation;
        self.head_complete_gci = self.complete_gci;
    }

    fn close_head(&mut self, buffer: &mut [u8]) {
        assert!(self.head_used > 0, "an empty page is never closed");
        let header = PageHeader {
            used: self.head_used,
            continuation: self.head_continuation,
            part: self.config.part,
            incarnation: self.incarnation,
            page: self.head_page,
            first_lsn: self.head_first_lsn,
            synced_page: self.synced_page,
            complete_gci: self.head_complete_gci,
        };
        let start = self.slot_start(self.head_page);
        seal_page(&mut buffer[start..start + PAGE_BYTES], &header);
        self.head_page += 1;
        self.head_used = 0;
    }
}
