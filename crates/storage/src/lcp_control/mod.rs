//! lcp_control: the files of one partition's local checkpoint (LCP,
//! docs/design/durability.md §4), already in the shape of NDB 7.6's
//! partial LCP (seed 003):
//!
//! - `control`: the **control file** says which data files, in which order,
//!   make a restorable state, which of the 2048 parts each of them holds in
//!   full, the LCP's `max_gci_written`, and where redo replay starts. Two
//!   control files per partition alternate, so the previous LCP stays
//!   restorable until the new one is; [`choose_control`] picks at restart.
//! - `data_file`: a **data file**: a header, then row records (row id, GCI,
//!   image) and delete-by-row-id records, then an end record with counts.
//!
//! Parts. A partition's row ids fall into [`PART_COUNT`] parts by the page
//! half of the row id: `part = (row_id >> row_id_page_shift) % 2048`, so a
//! part is every slot of every 2048th page, and parts stay the same size as
//! the partition grows. A data file holds a wrapping range of parts in full
//! (every row there) and all other parts as changes only (rows changed since
//! the previous LCP, and deletes by row id). Durability I writes one data
//! file with all 2048 parts per LCP; Durability II writes fewer parts and
//! the chain grows; restore is the same code for both ([`RestorePlan`]).
//!
//! Pure encoders and decoders over bytes; the caller names, writes, fsyncs
//! and deletes the files. Every decoder reports problems with the byte
//! offset where they were found ([`LcpError::offset`]) and never panics on
//! any input. Byte-by-byte format and the rules for when an LCP becomes
//! restorable and which files may be deleted: `docs/lcp-format.md`.

mod control;
mod data_file;
#[cfg(test)]
mod tests;

pub use control::{
    append_and_trim, append_and_trim_into, choose_control, files_to_delete, ChoiceError,
    ControlChoice, ControlFile, ControlSlot, DataFileEntry, PartRole, RestorePlan, SlotProblem,
    CONTROL_ENTRY_BYTES, CONTROL_HEADER_BYTES, CONTROL_MAGIC, MAX_CHAIN_FILES, MAX_CONTROL_BYTES,
};
pub use data_file::{
    DataFileHeader, DataFileReader, DataFileSummary, DataFileWriter, Record, Step,
    DATA_HEADER_BYTES, DATA_MAGIC, END_RECORD_BYTES, MAX_IMAGE_BYTES, RECORD_HEADER_BYTES,
};

use std::fmt;

/// Parts per partition (NDB's 2048): fine enough that one part of a 16 TB
/// database is a few GB, coarse enough that the control file stays small.
pub const PART_COUNT: u16 = 2048;
/// The format version of both control and data files.
pub const FORMAT_VERSION: u32 = 1;
/// The row id layout Tessera's ldm uses (`page << 10 | slot`); every file
/// records the shift it was written with, so parts stay well defined if the
/// layout ever changes.
pub const DEFAULT_ROW_ID_PAGE_SHIFT: u8 = 10;

/// The part a row id belongs to.
pub fn part_of_row_id(row_id: u32, row_id_page_shift: u8) -> u16 {
    assert!(row_id_page_shift < 32, "a row id page shift is below 32");
    ((row_id >> row_id_page_shift) % PART_COUNT as u32) as u16
}

/// The page half of a row id.
pub fn page_of_row_id(row_id: u32, row_id_page_shift: u8) -> u32 {
    assert!(row_id_page_shift < 32, "a row id page shift is below 32");
    row_id >> row_id_page_shift
}

/// A wrapping range of parts, `first, first + 1, ..` (mod 2048), `count`
/// long: the parts a data file holds in full. An LCP that writes k parts in
/// full continues where the previous one stopped, so the ranges rotate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartRange {
    /// The first part, below 2048.
    pub first: u16,
    /// How many parts, 1..=2048.
    pub count: u16,
}

impl PartRange {
    /// All 2048 parts: a full checkpoint.
    pub const ALL: PartRange = PartRange {
        first: 0,
        count: PART_COUNT,
    };

    /// A range; panics outside the format's bounds (a writer bug).
    pub fn new(first: u16, count: u16) -> PartRange {
        let range = PartRange { first, count };
        if let Err(reason) = range.check() {
            panic!("part range {first}+{count}: {reason}");
        }
        range
    }

    fn check(&self) -> Result<(), &'static str> {
        if self.first >= PART_COUNT {
            return Err("first part must be below 2048");
        }
        if self.count == 0 || self.count > PART_COUNT {
            return Err("part count must be 1..=2048");
        }
        Ok(())
    }

    /// Whether `part` is in the range.
    pub fn contains(&self, part: u16) -> bool {
        debug_assert!(part < PART_COUNT);
        (part + PART_COUNT - self.first) % PART_COUNT < self.count
    }

    /// The parts, in order from `first`.
    pub fn parts(&self) -> impl Iterator<Item = u16> {
        let first = self.first;
        (0..self.count).map(move |step| (first + step) % PART_COUNT)
    }

    /// The part after the last one: where the next rotating range starts.
    pub fn next_first(&self) -> u16 {
        (self.first + self.count) % PART_COUNT
    }
}

/// A problem in a control or data file. Offsets are bytes from the start of
/// the file; the caller adds the file name (fail-fast: "file F, byte N").
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LcpError {
    /// The file ends at `offset`, inside a structure that needs `needed`
    /// more bytes (a torn write, or a data file without its end record).
    Truncated { offset: u64, needed: u64 },
    /// The CRC32C stored at `offset` does not match the bytes it covers
    /// (`covered_from..offset` for headers and control files; the record's
    /// bytes after the checksum for records).
    Checksum {
        offset: u64,
        covered_from: u64,
        stored: u32,
        computed: u32,
    },
    /// The magic at `offset` is not the expected one.
    BadMagic { offset: u64 },
    /// A format version this code does not read.
    UnsupportedVersion { offset: u64, version: u32 },
    /// The bytes are intact (or not yet checked) but the field at `offset`
    /// breaks a rule of the format.
    Invalid { offset: u64, reason: String },
}

impl LcpError {
    /// Where the problem was found, in bytes from the start of the file.
    pub fn offset(&self) -> u64 {
        match self {
            LcpError::Truncated { offset, .. }
            | LcpError::Checksum { offset, .. }
            | LcpError::BadMagic { offset }
            | LcpError::UnsupportedVersion { offset, .. }
            | LcpError::Invalid { offset, .. } => *offset,
        }
    }

    fn invalid(offset: usize, reason: impl Into<String>) -> LcpError {
        LcpError::Invalid {
            offset: offset as u64,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for LcpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LcpError::Truncated { offset, needed } => write!(
                f,
                "at byte {offset}: file ends {needed} bytes short of the structure starting here"
            ),
            LcpError::Checksum {
                offset,
                covered_from,
                stored,
                computed,
            } => write!(
                f,
                "at byte {offset}: checksum mismatch over bytes from {covered_from} \
                 (stored {stored:#010x}, computed {computed:#010x})"
            ),
            LcpError::BadMagic { offset } => write!(f, "at byte {offset}: bad magic"),
            LcpError::UnsupportedVersion { offset, version } => write!(
                f,
                "at byte {offset}: format version {version}, this build reads {FORMAT_VERSION}"
            ),
            LcpError::Invalid { offset, reason } => write!(f, "at byte {offset}: {reason}"),
        }
    }
}

impl std::error::Error for LcpError {}

fn put_u16(bytes: &mut [u8], offset: usize, value: u16) {
    bytes[offset..offset + 2].copy_from_slice(&value.to_le_bytes());
}

fn put_u32(bytes: &mut [u8], offset: usize, value: u32) {
    bytes[offset..offset + 4].copy_from_slice(&value.to_le_bytes());
}

fn put_u64(bytes: &mut [u8], offset: usize, value: u64) {
    bytes[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
}

/// Reads are only called on ranges the caller has bounds-checked.
fn get_u16(bytes: &[u8], offset: usize) -> u16 {
    u16::from_le_bytes(bytes[offset..offset + 2].try_into().expect("2 bytes"))
}

fn get_u32(bytes: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes(bytes[offset..offset + 4].try_into().expect("4 bytes"))
}

fn get_u64(bytes: &[u8], offset: usize) -> u64 {
    u64::from_le_bytes(bytes[offset..offset + 8].try_into().expect("8 bytes"))
}
