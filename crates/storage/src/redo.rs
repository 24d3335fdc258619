//! redo: the format of a redo log part (docs/design/durability.md §3) and
//! the pure logic around it: the appender an ldm uses to lay records into
//! pages, the scanner a restart uses to find the end of the log, and the
//! replay filter. No file I/O: the caller owns the files, the page buffer,
//! the writes and the fsyncs, and hands these types the bytes. The format,
//! byte by byte, is in `docs/redo-format.md`; this is the short version.
//!
//! ```text
//! part = ring of N files of the configured size, each:
//!   page 0: file header (part, file index, geometry), written once at format
//!   pages 1..: redo pages, 4 KiB each, page number p at ring position p % R
//! redo page = 64-byte header (CRC32C of the whole page, page number,
//!             incarnation, first LSN, synced page, complete GCI) | body
//! body      = records back to back; a record may run on into later pages
//! record    = 48-byte header (CRC32C, length, kind, LSN, GCI, table,
//!             partition, row id, key and image lengths) | key | image
//! ```
//!
//! A page is written once and never rewritten: the appender hands out only
//! closed pages, and a commit never forces a partial page out (nothing is
//! fsynced at commit); a GCI marker closes its page before the fsync. So a
//! crash can only damage pages that were never known durable, and the page
//! checksum tells a torn 4 KiB write from a whole one.
//!
//! Concerns, one file each: `format` (byte layouts), `appender` (writing),
//! `scan` (finding the end, torn tail vs corruption, reading records back),
//! `replay` (the GCI filter).

mod appender;
mod format;
mod replay;
mod scan;
#[cfg(test)]
mod tests;

use std::fmt;

pub use appender::{record_bytes, AppendError, AppenderConfig, PageWrite, RedoAppender};
pub use format::encode_file_header;
pub use replay::ReplayFilter;
pub use scan::{oldest_start_lsn, scan_part, EndKind, LogEnd, PartScan, RecordCursor};

/// Bytes of a page: the unit of writing and of torn-write detection (the
/// memory page size, and the physical sector of current drives).
pub const PAGE_BYTES: usize = 4096;
/// Bytes of a redo page's header.
pub const PAGE_HEADER_BYTES: usize = 64;
/// Bytes of a redo page's body (records).
pub const PAGE_BODY_BYTES: usize = PAGE_BYTES - PAGE_HEADER_BYTES;
/// Bytes of a record's fixed header.
pub const RECORD_HEADER_BYTES: usize = 48;
/// The largest record. A row is at most 24 000 bytes (signal::schema's
/// `MAX_ROW_BYTES`), its key no more, so a record with both fits with room
/// to spare; a decoder refuses anything longer as damage.
pub const MAX_RECORD_BYTES: usize = 128 * 1024;
/// Pages one record can touch: its bytes, plus the page it starts in part-way.
pub const MAX_RECORD_PAGES: usize = MAX_RECORD_BYTES.div_ceil(PAGE_BODY_BYTES) + 1;
/// The smallest ring a part may have, in redo pages.
pub const MIN_RING_PAGES: u64 = 128;
/// The format this code writes and the only one it reads.
pub const FORMAT_VERSION: u16 = 1;
/// The LSN of a part's first record.
pub const FIRST_LSN: u64 = 1;
/// LSNs, page numbers and incarnations stay below this (a part would need
/// centuries to get there); a decoder refuses larger values as damage, so
/// arithmetic on them cannot overflow.
pub(crate) const MAX_COUNTER: u64 = 1 << 62;
const _: () = assert!(PAGE_BYTES.is_multiple_of(512), "a page is whole sectors");
const _: () = assert!(
    PAGE_BODY_BYTES <= u16::MAX as usize,
    "page body lengths are stored as u16"
);
const _: () = assert!(
    MAX_RECORD_BYTES >= RECORD_HEADER_BYTES + 2 * 24_000,
    "a record must hold a full row image and its key"
);
const _: () = assert!(
    MIN_RING_PAGES - MIN_RING_PAGES / 4 > MAX_RECORD_PAGES as u64,
    "the largest record must fit in a minimal ring beside the largest marker reserve"
);

/// The shape of a part's ring: `file_count` files of `file_bytes` each.
/// Page 0 of every file is its header; the other pages form the ring, file
/// after file: ring position `r` is page `1 + r % pages_per_file` of file
/// `r / pages_per_file`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RedoGeometry {
    file_count: u32,
    file_bytes: u64,
}

/// Why a configured ring shape is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GeometryError {
    /// Files asked for.
    pub file_count: u32,
    /// Bytes per file asked for.
    pub file_bytes: u64,
    /// What is wrong.
    pub reason: &'static str,
}

impl fmt::Display for GeometryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "redo log of {} files of {} bytes: {}",
            self.file_count, self.file_bytes, self.reason
        )
    }
}

impl std::error::Error for GeometryError {}

impl RedoGeometry {
    /// Checks a configured shape.
    pub fn new(file_count: u32, file_bytes: u64) -> Result<RedoGeometry, GeometryError> {
        let refuse = |reason| {
            Err(GeometryError {
                file_count,
                file_bytes,
                reason,
            })
        };
        if file_count < 2 {
            // The tail is protected a whole file at a time; with one file the
            // head could never come back to the start of the ring.
            return refuse("a part needs at least 2 files");
        }
        if !file_bytes.is_multiple_of(PAGE_BYTES as u64) {
            return refuse("the file size must be a multiple of 4096");
        }
        if file_bytes < 2 * PAGE_BYTES as u64 {
            return refuse("a file needs its header page and at least one redo page");
        }
        let geometry = RedoGeometry {
            file_count,
            file_bytes,
        };
        if geometry.ring_pages() < MIN_RING_PAGES {
            return refuse("the ring needs at least 128 redo pages (512 KiB)");
        }
        Ok(geometry)
    }

    /// Files in the ring.
    pub fn file_count(self) -> u32 {
        self.file_count
    }

    /// Bytes of each file.
    pub fn file_bytes(self) -> u64 {
        self.file_bytes
    }

    /// Redo pages per file (every page but the header).
    pub fn pages_per_file(self) -> u64 {
        self.file_bytes / PAGE_BYTES as u64 - 1
    }

    /// Redo pages in the ring.
    pub fn ring_pages(self) -> u64 {
        self.pages_per_file() * u64::from(self.file_count)
    }

    /// Where page number `page` lives (ring position `page % ring_pages`).
    pub fn location(self, page: u64) -> Location {
        let position = page % self.ring_pages();
        Location {
            file: (position / self.pages_per_file()) as u32,
            offset: (1 + position % self.pages_per_file()) * PAGE_BYTES as u64,
        }
    }

    /// The file holding page number `page`.
    pub(crate) fn file_of(self, page: u64) -> usize {
        ((page % self.ring_pages()) / self.pages_per_file()) as usize
    }
}

/// A byte in a part: file index within the ring and offset within the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Location {
    /// File index, `0..file_count`.
    pub file: u32,
    /// Byte offset within the file.
    pub offset: u64,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "file {} offset {}", self.file, self.offset)
    }
}

/// What a row change did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// A new row: the key and the full after-image.
    Insert,
    /// A changed row: the key and the full after-image (never a delta, so
    /// replaying it twice is harmless).
    Update,
    /// A removed row, by row id (the key rides along; the image is empty).
    Delete,
}

impl Operation {
    pub(crate) fn code(self) -> u8 {
        match self {
            Operation::Insert => 1,
            Operation::Update => 2,
            Operation::Delete => 3,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<Operation> {
        Some(match code {
            1 => Operation::Insert,
            2 => Operation::Update,
            3 => Operation::Delete,
            _ => return None,
        })
    }
}

/// One committed change of one row, as the ldm logs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Change<'a> {
    /// The GCI the transaction committed in.
    pub gci: u64,
    /// Table id.
    pub table: u32,
    /// Partition of the table.
    pub partition: u32,
    /// Row id in the partition (the fixed slot reference, ldm `slots.rs`).
    pub row_id: u32,
    /// What happened.
    pub operation: Operation,
    /// The key (a key section).
    pub key: &'a [u8],
    /// The full after-image (fixed body | var part, ldm `layout.rs`);
    /// empty for a delete.
    pub image: &'a [u8],
}

/// A row change read back, with the LSN it was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowChange<'a> {
    /// Its LSN.
    pub lsn: u64,
    /// The change.
    pub change: Change<'a>,
}

/// A record of a redo part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record<'a> {
    /// A committed row change.
    RowChange(RowChange<'a>),
    /// "GCI `gci` is complete in this part": every change of GCIs up to it
    /// that this part will ever hold comes before this record.
    GciComplete {
        /// Its LSN.
        lsn: u64,
        /// The GCI made complete.
        gci: u64,
    },
    /// Written first by every restart: every earlier record with a GCI
    /// above `restored_gci` never happened (see `docs/redo-format.md` §7).
    Invalidate {
        /// Its LSN.
        lsn: u64,
        /// The GCI the cluster restarted from.
        restored_gci: u64,
    },
}

impl Record<'_> {
    /// The record's LSN.
    pub fn lsn(&self) -> u64 {
        match self {
            Record::RowChange(change) => change.lsn,
            Record::GciComplete { lsn, .. } | Record::Invalidate { lsn, .. } => *lsn,
        }
    }
}

/// Why a part cannot be read. Every variant names the part, and where
/// bytes are at fault the file index and byte offset, so the node can stop
/// with a message an operator can act on (docs/design/durability.md §6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedoError {
    /// A file's header page (offset 0) is missing, damaged, or made for
    /// another part or another ring shape.
    FileHeader {
        /// The part.
        part: u32,
        /// The file index.
        file: u32,
        /// What is wrong.
        reason: String,
    },
    /// Bytes that were durable are damaged (not a torn tail): the node must
    /// stop and come back through an initial node restart.
    Corrupt {
        /// The part.
        part: u32,
        /// Where the damage is.
        at: Location,
        /// The page number there.
        page: u64,
        /// What is wrong.
        reason: String,
    },
    /// The restore point (the oldest LSN the restored checkpoint needs) is
    /// no longer in the ring.
    StartNotFound {
        /// The part.
        part: u32,
        /// The LSN asked for.
        start_lsn: u64,
        /// The oldest record the ring holds, if any.
        oldest_lsn: Option<u64>,
    },
    /// The log ends before the restore point.
    StartBeyondEnd {
        /// The part.
        part: u32,
        /// The LSN asked for.
        start_lsn: u64,
        /// The LSN after the last record.
        end_lsn: u64,
    },
    /// The part does not hold the marker of the restored GCI: it lost
    /// records that were part of a complete GCI.
    GciNotReached {
        /// The part.
        part: u32,
        /// The GCI the cluster restores.
        restored_gci: u64,
        /// The highest GCI the part marks complete, if any.
        last_complete_gci: Option<u64>,
    },
}

impl fmt::Display for RedoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedoError::FileHeader { part, file, reason } => {
                write!(
                    f,
                    "redo part {part}: file {file} offset 0: bad file header: {reason}"
                )
            }
            RedoError::Corrupt {
                part,
                at,
                page,
                reason,
            } => write!(
                f,
                "redo part {part} is corrupt at {at} (page {page}): {reason}"
            ),
            RedoError::StartNotFound {
                part,
                start_lsn,
                oldest_lsn,
            } => match oldest_lsn {
                Some(oldest) => write!(
                    f,
                    "redo part {part} no longer holds LSN {start_lsn} (its oldest record is \
                     LSN {oldest}): the records the restored checkpoint needs were overwritten"
                ),
                None => write!(
                    f,
                    "redo part {part} holds no records, but the restored checkpoint needs \
                     them from LSN {start_lsn}"
                ),
            },
            RedoError::StartBeyondEnd {
                part,
                start_lsn,
                end_lsn,
            } => write!(
                f,
                "redo part {part} ends before LSN {end_lsn}, but the restored checkpoint \
                 needs it from LSN {start_lsn}"
            ),
            RedoError::GciNotReached {
                part,
                restored_gci,
                last_complete_gci,
            } => match last_complete_gci {
                Some(last) => write!(
                    f,
                    "redo part {part} marks GCI {last} complete at most, but GCI \
                     {restored_gci} is being restored: the part lost records of a complete GCI"
                ),
                None => write!(
                    f,
                    "redo part {part} marks no GCI complete, but GCI {restored_gci} is being \
                     restored: the part lost records of a complete GCI"
                ),
            },
        }
    }
}

impl std::error::Error for RedoError {}
