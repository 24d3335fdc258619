//! An LCP data file: a checksummed header naming the file (LCP, table,
//! partition, the parts it holds in full), then records, each with its own
//! CRC32C: row records (row id, GCI, image) and delete-by-row-id records,
//! then one end record with the counts. A file without a valid end record
//! is incomplete; a control file only ever names complete, fsynced files,
//! so restore treats any problem in a named file as corruption.
//!
//! The writer appends to a caller's buffer (flushed to disk as the caller
//! likes); the reader decodes from a buffer holding the file's bytes from
//! its current position, so a restore can stream a large file in chunks.

use super::control::{ControlFile, DataFileEntry};
use super::{
    get_u16, get_u32, get_u64, part_of_row_id, put_u16, put_u32, put_u64, LcpError, PartRange,
    FORMAT_VERSION, PART_COUNT,
};

/// The first eight bytes of a data file.
pub const DATA_MAGIC: [u8; 8] = *b"TSLCPDAT";
/// Bytes of the file header; the first record follows.
pub const DATA_HEADER_BYTES: usize = 48;
/// Bytes of the head every record starts with (a delete record is only this).
pub const RECORD_HEADER_BYTES: usize = 24;
/// Bytes of the end record.
pub const END_RECORD_BYTES: usize = 40;
/// The largest record (bounds what a corrupt length field can ask for).
const MAX_RECORD_BYTES: usize = 16 << 20;
/// The largest row image a row record holds.
pub const MAX_IMAGE_BYTES: usize = MAX_RECORD_BYTES - RECORD_HEADER_BYTES;

const HEADER_MAGIC: usize = 0;
const HEADER_VERSION: usize = 8;
const HEADER_FILE_NUMBER: usize = 12;
const HEADER_LCP_ID: usize = 16;
const HEADER_TABLE_ID: usize = 24;
const HEADER_TABLE_VERSION: usize = 28;
const HEADER_PARTITION: usize = 32;
const HEADER_FIRST_PART: usize = 36;
const HEADER_FULL_PART_COUNT: usize = 38;
const HEADER_PART_COUNT: usize = 40;
const HEADER_PAGE_SHIFT: usize = 42;
const HEADER_RESERVED: usize = 43;
const HEADER_CHECKSUM: usize = 44;

const RECORD_CHECKSUM: usize = 0;
const RECORD_LENGTH: usize = 4;
const RECORD_KIND: usize = 8;
const RECORD_RESERVED: usize = 9;
const RECORD_ROW_ID: usize = 12;
const RECORD_GCI: usize = 16;
const END_ROW_RECORDS: usize = 24;
const END_DELETE_RECORDS: usize = 28;
const END_OFFSET: usize = 32;

const KIND_ROW: u8 = 1;
const KIND_DELETE: u8 = 2;
const KIND_END: u8 = 3;

const _: () = assert!(
    HEADER_CHECKSUM + 4 == DATA_HEADER_BYTES,
    "header fields fill the header"
);
const _: () = assert!(
    RECORD_GCI + 8 == RECORD_HEADER_BYTES,
    "record head fields fill the head"
);
const _: () = assert!(
    END_OFFSET + 8 == END_RECORD_BYTES,
    "end record fields fill it"
);

/// The header of a data file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataFileHeader {
    pub file_number: u32,
    pub lcp_id: u64,
    pub table_id: u32,
    pub table_version: u32,
    pub partition: u32,
    /// The parts the file holds in full; every other part as changes only.
    pub full_parts: PartRange,
    pub row_id_page_shift: u8,
}

impl DataFileHeader {
    fn encode(&self) -> [u8; DATA_HEADER_BYTES] {
        assert!(self.lcp_id > 0, "LCP ids start at 1");
        assert!(
            self.row_id_page_shift < 32,
            "a row id page shift is below 32"
        );
        self.full_parts
            .check()
            .expect("a data file's full part range is valid");
        let mut bytes = [0u8; DATA_HEADER_BYTES];
        bytes[HEADER_MAGIC..HEADER_MAGIC + 8].copy_from_slice(&DATA_MAGIC);
        put_u32(&mut bytes, HEADER_VERSION, FORMAT_VERSION);
        put_u32(&mut bytes, HEADER_FILE_NUMBER, self.file_number);
        put_u64(&mut bytes, HEADER_LCP_ID, self.lcp_id);
        put_u32(&mut bytes, HEADER_TABLE_ID, self.table_id);
        put_u32(&mut bytes, HEADER_TABLE_VERSION, self.table_version);
        put_u32(&mut bytes, HEADER_PARTITION, self.partition);
        put_u16(&mut bytes, HEADER_FIRST_PART, self.full_parts.first);
        put_u16(&mut bytes, HEADER_FULL_PART_COUNT, self.full_parts.count);
        put_u16(&mut bytes, HEADER_PART_COUNT, PART_COUNT);
        bytes[HEADER_PAGE_SHIFT] = self.row_id_page_shift;
        let checksum = crc32c::crc32c(&bytes[..HEADER_CHECKSUM]);
        put_u32(&mut bytes, HEADER_CHECKSUM, checksum);
        bytes
    }

    fn decode(bytes: &[u8]) -> Result<DataFileHeader, LcpError> {
        if bytes.len() < DATA_HEADER_BYTES {
            return Err(LcpError::Truncated {
                offset: bytes.len() as u64,
                needed: (DATA_HEADER_BYTES - bytes.len()) as u64,
            });
        }
        let stored = get_u32(bytes, HEADER_CHECKSUM);
        let computed = crc32c::crc32c(&bytes[..HEADER_CHECKSUM]);
        if stored != computed {
            return Err(LcpError::Checksum {
                offset: HEADER_CHECKSUM as u64,
                covered_from: 0,
                stored,
                computed,
            });
        }
        if bytes[HEADER_MAGIC..HEADER_MAGIC + 8] != DATA_MAGIC {
            return Err(LcpError::BadMagic {
                offset: HEADER_MAGIC as u64,
            });
        }
        let version = get_u32(bytes, HEADER_VERSION);
        if version != FORMAT_VERSION {
            return Err(LcpError::UnsupportedVersion {
                offset: HEADER_VERSION as u64,
                version,
            });
        }
        let part_count = get_u16(bytes, HEADER_PART_COUNT);
        if part_count != PART_COUNT {
            return Err(LcpError::invalid(
                HEADER_PART_COUNT,
                format!("part count {part_count}, the format has {PART_COUNT}"),
            ));
        }
        if bytes[HEADER_RESERVED] != 0 {
            return Err(LcpError::invalid(
                HEADER_RESERVED,
                "reserved byte is not zero",
            ));
        }
        let header = DataFileHeader {
            file_number: get_u32(bytes, HEADER_FILE_NUMBER),
            lcp_id: get_u64(bytes, HEADER_LCP_ID),
            table_id: get_u32(bytes, HEADER_TABLE_ID),
            table_version: get_u32(bytes, HEADER_TABLE_VERSION),
            partition: get_u32(bytes, HEADER_PARTITION),
            full_parts: PartRange {
                first: get_u16(bytes, HEADER_FIRST_PART),
                count: get_u16(bytes, HEADER_FULL_PART_COUNT),
            },
            row_id_page_shift: bytes[HEADER_PAGE_SHIFT],
        };
        if let Err(reason) = header.full_parts.check() {
            return Err(LcpError::invalid(HEADER_FIRST_PART, reason));
        }
        if header.lcp_id == 0 {
            return Err(LcpError::invalid(
                HEADER_LCP_ID,
                "LCP id 0 (ids start at 1)",
            ));
        }
        if header.row_id_page_shift >= 32 {
            return Err(LcpError::invalid(
                HEADER_PAGE_SHIFT,
                "row id page shift 32 or more",
            ));
        }
        Ok(header)
    }

    /// Checks that this is the file `entry` of `control`'s chain describes
    /// (restore calls it before reading records).
    pub fn check_against(
        &self,
        control: &ControlFile,
        entry: &DataFileEntry,
    ) -> Result<(), LcpError> {
        let mismatch = |offset: usize, what: &str, found: u64, expected: u64| {
            Err(LcpError::invalid(
                offset,
                format!(
                    "{what} is {found}, the control file of LCP {} says {expected}",
                    control.lcp_id
                ),
            ))
        };
        if self.file_number != entry.file_number {
            return mismatch(
                HEADER_FILE_NUMBER,
                "file number",
                self.file_number.into(),
                entry.file_number.into(),
            );
        }
        if self.lcp_id != entry.lcp_id {
            return mismatch(HEADER_LCP_ID, "LCP id", self.lcp_id, entry.lcp_id);
        }
        if self.table_id != control.table_id {
            return mismatch(
                HEADER_TABLE_ID,
                "table id",
                self.table_id.into(),
                control.table_id.into(),
            );
        }
        if self.table_version > control.table_version {
            return mismatch(
                HEADER_TABLE_VERSION,
                "table version",
                self.table_version.into(),
                control.table_version.into(),
            );
        }
        if self.partition != control.partition {
            return mismatch(
                HEADER_PARTITION,
                "partition",
                self.partition.into(),
                control.partition.into(),
            );
        }
        if self.full_parts != entry.full_parts {
            return Err(LcpError::invalid(
                HEADER_FIRST_PART,
                format!(
                    "full parts {:?}, the control file of LCP {} says {:?}",
                    self.full_parts, control.lcp_id, entry.full_parts
                ),
            ));
        }
        if self.row_id_page_shift != control.row_id_page_shift {
            return mismatch(
                HEADER_PAGE_SHIFT,
                "row id page shift",
                self.row_id_page_shift.into(),
                control.row_id_page_shift.into(),
            );
        }
        Ok(())
    }
}

/// One record of a data file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record<'a> {
    /// The row at `row_id` as of `gci`, in the ldm's row image format.
    Row {
        row_id: u32,
        gci: u64,
        image: &'a [u8],
    },
    /// The slot at `row_id` is free, freed at `gci` (change-only parts only).
    Delete { row_id: u32, gci: u64 },
}

/// What the end record of a complete data file says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataFileSummary {
    pub row_records: u32,
    pub delete_records: u32,
    /// The highest GCI of any record (0 if none).
    pub max_gci_written: u64,
    /// Where the end record starts; the file is this plus 40 bytes.
    pub end_offset: u64,
}

impl DataFileSummary {
    /// The file's entry in the chain of a control file.
    pub fn entry(&self, header: &DataFileHeader) -> DataFileEntry {
        DataFileEntry {
            file_number: header.file_number,
            full_parts: header.full_parts,
            lcp_id: header.lcp_id,
            max_gci_written: self.max_gci_written,
            row_records: self.row_records,
            delete_records: self.delete_records,
        }
    }

    /// Bytes of the whole file.
    pub fn file_bytes(&self) -> u64 {
        self.end_offset + END_RECORD_BYTES as u64
    }

    /// Checks the counts against the control file's entry (restore calls
    /// it after the end record).
    pub fn check_against(&self, entry: &DataFileEntry) -> Result<(), LcpError> {
        let at = self.end_offset as usize;
        if self.row_records != entry.row_records {
            return Err(LcpError::invalid(
                at + END_ROW_RECORDS,
                format!(
                    "{} row records, the control file says {}",
                    self.row_records, entry.row_records
                ),
            ));
        }
        if self.delete_records != entry.delete_records {
            return Err(LcpError::invalid(
                at + END_DELETE_RECORDS,
                format!(
                    "{} delete records, the control file says {}",
                    self.delete_records, entry.delete_records
                ),
            ));
        }
        if self.max_gci_written != entry.max_gci_written {
            return Err(LcpError::invalid(
                at + RECORD_GCI,
                format!(
                    "max GCI written {}, the control file says {}",
                    self.max_gci_written, entry.max_gci_written
                ),
            ));
        }
        Ok(())
    }
}

/// Writes a data file into a caller's buffer: [`DataFileWriter::new`]
/// appends the header, each call a record, [`DataFileWriter::finish`] the
/// end record. The caller may drain the buffer to disk at any point.
#[derive(Debug)]
pub struct DataFileWriter {
    header: DataFileHeader,
    position: u64,
    row_records: u32,
    delete_records: u32,
    max_gci_written: u64,
}

impl DataFileWriter {
    /// Starts a file: appends its header to `out`.
    pub fn new(header: DataFileHeader, out: &mut Vec<u8>) -> DataFileWriter {
        out.extend_from_slice(&header.encode());
        DataFileWriter {
            header,
            position: DATA_HEADER_BYTES as u64,
            row_records: 0,
            delete_records: 0,
            max_gci_written: 0,
        }
    }

    /// The header the file was started with.
    pub fn header(&self) -> &DataFileHeader {
        &self.header
    }

    /// Bytes written so far.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Appends a row record.
    pub fn row(&mut self, out: &mut Vec<u8>, row_id: u32, gci: u64, image: &[u8]) {
        assert!(
            image.len() <= MAX_IMAGE_BYTES,
            "a row image of {} bytes exceeds the LCP record limit",
            image.len()
        );
        self.row_records = self
            .row_records
            .checked_add(1)
            .expect("row records fit u32");
        self.record(out, KIND_ROW, row_id, gci, image);
    }

    /// Appends a delete-by-row-id record; only parts the file holds as
    /// changes have them (a full part's absent rows are deleted anyway).
    pub fn delete(&mut self, out: &mut Vec<u8>, row_id: u32, gci: u64) {
        let part = part_of_row_id(row_id, self.header.row_id_page_shift);
        assert!(
            !self.header.full_parts.contains(part),
            "delete record for row {row_id} in part {part}, which this file holds in full"
        );
        self.delete_records = self
            .delete_records
            .checked_add(1)
            .expect("delete records fit u32");
        self.record(out, KIND_DELETE, row_id, gci, &[]);
    }

    fn record(&mut self, out: &mut Vec<u8>, kind: u8, row_id: u32, gci: u64, body: &[u8]) {
        let start = out.len();
        let length = RECORD_HEADER_BYTES + body.len();
        out.resize(start + RECORD_HEADER_BYTES, 0);
        out.extend_from_slice(body);
        let record = &mut out[start..];
        put_u32(record, RECORD_LENGTH, length as u32);
        record[RECORD_KIND] = kind;
        put_u32(record, RECORD_ROW_ID, row_id);
        put_u64(record, RECORD_GCI, gci);
        let checksum = crc32c::crc32c(&record[RECORD_LENGTH..]);
        put_u32(record, RECORD_CHECKSUM, checksum);
        self.position += length as u64;
        self.max_gci_written = self.max_gci_written.max(gci);
    }

    /// Appends the end record; the file is complete once it is on disk.
    pub fn finish(self, out: &mut Vec<u8>) -> DataFileSummary {
        let summary = DataFileSummary {
            row_records: self.row_records,
            delete_records: self.delete_records,
            max_gci_written: self.max_gci_written,
            end_offset: self.position,
        };
        let start = out.len();
        out.resize(start + END_RECORD_BYTES, 0);
        let record = &mut out[start..];
        put_u32(record, RECORD_LENGTH, END_RECORD_BYTES as u32);
        record[RECORD_KIND] = KIND_END;
        put_u64(record, RECORD_GCI, summary.max_gci_written);
        put_u32(record, END_ROW_RECORDS, summary.row_records);
        put_u32(record, END_DELETE_RECORDS, summary.delete_records);
        put_u64(record, END_OFFSET, summary.end_offset);
        let checksum = crc32c::crc32c(&record[RECORD_LENGTH..]);
        put_u32(record, RECORD_CHECKSUM, checksum);
        summary
    }
}

/// One step of [`DataFileReader::next`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step<'a> {
    /// A record, found at file offset `offset`, taking `length` bytes.
    Record {
        offset: u64,
        length: usize,
        record: Record<'a>,
    },
    /// The buffer holds only part of the next record: call again with at
    /// least this many bytes from the same position.
    NeedMore { bytes: usize },
    /// The end record, verified; the file is complete and fully read.
    End(DataFileSummary),
}

/// Reads a data file record by record, checking every checksum and every
/// rule of the format, and stopping at the first problem with its offset.
#[derive(Debug)]
pub struct DataFileReader {
    header: DataFileHeader,
    file_bytes: u64,
    position: u64,
    row_records: u32,
    delete_records: u32,
    max_gci_written: u64,
    end: Option<DataFileSummary>,
}

impl DataFileReader {
    /// Starts reading a file of `file_bytes` bytes, whose first bytes (at
    /// least the 48-byte header, if the file has them) are `start`.
    pub fn new(start: &[u8], file_bytes: u64) -> Result<DataFileReader, LcpError> {
        let available = (start.len() as u64).min(file_bytes) as usize;
        let header = DataFileHeader::decode(&start[..available])?;
        Ok(DataFileReader {
            header,
            file_bytes,
            position: DATA_HEADER_BYTES as u64,
            row_records: 0,
            delete_records: 0,
            max_gci_written: 0,
            end: None,
        })
    }

    pub fn header(&self) -> &DataFileHeader {
        &self.header
    }

    /// The file offset of the next record: `buffer` in [`DataFileReader::next`]
    /// starts here.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// The end record's summary, once reached.
    pub fn summary(&self) -> Option<DataFileSummary> {
        self.end
    }

    /// Decodes the record at [`DataFileReader::position`]; `buffer` holds the
    /// file's bytes from there on (any amount; more than one record is
    /// fine). A problem leaves the position where it was.
    pub fn next<'a>(&mut self, buffer: &'a [u8]) -> Result<Step<'a>, LcpError> {
        if let Some(summary) = self.end {
            return Ok(Step::End(summary));
        }
        let at = self.position;
        let remaining = self.file_bytes.saturating_sub(at);
        let buffer = &buffer[..(buffer.len() as u64).min(remaining) as usize];
        if remaining < RECORD_HEADER_BYTES as u64 {
            return Err(LcpError::Truncated {
                offset: self.file_bytes,
                needed: RECORD_HEADER_BYTES as u64 - remaining,
            });
        }
        if buffer.len() < RECORD_HEADER_BYTES {
            return Ok(Step::NeedMore {
                bytes: RECORD_HEADER_BYTES,
            });
        }
        let length = get_u32(buffer, RECORD_LENGTH) as usize;
        if !(RECORD_HEADER_BYTES..=MAX_RECORD_BYTES).contains(&length) {
            return Err(LcpError::Invalid {
                offset: at + RECORD_LENGTH as u64,
                reason: format!("record length {length} out of range"),
            });
        }
        if remaining < length as u64 {
            return Err(LcpError::Truncated {
                offset: self.file_bytes,
                needed: length as u64 - remaining,
            });
        }
        if buffer.len() < length {
            return Ok(Step::NeedMore { bytes: length });
        }
        let record = &buffer[..length];
        let stored = get_u32(record, RECORD_CHECKSUM);
        let computed = crc32c::crc32c(&record[RECORD_LENGTH..]);
        if stored != computed {
            return Err(LcpError::Checksum {
                offset: at,
                covered_from: at + RECORD_LENGTH as u64,
                stored,
                computed,
            });
        }
        let invalid = |field: usize, reason: String| LcpError::Invalid {
            offset: at + field as u64,
            reason,
        };
        if record[RECORD_RESERVED..RECORD_ROW_ID] != [0, 0, 0] {
            return Err(invalid(
                RECORD_RESERVED,
                "reserved record bytes are not zero".into(),
            ));
        }
        let row_id = get_u32(record, RECORD_ROW_ID);
        let gci = get_u64(record, RECORD_GCI);
        let decoded = match record[RECORD_KIND] {
            KIND_ROW => {
                self.row_records = self
                    .row_records
                    .checked_add(1)
                    .ok_or_else(|| invalid(RECORD_KIND, "more than 2^32 - 1 row records".into()))?;
                Record::Row {
                    row_id,
                    gci,
                    image: &record[RECORD_HEADER_BYTES..],
                }
            }
            KIND_DELETE => {
                if length != RECORD_HEADER_BYTES {
                    return Err(invalid(
                        RECORD_LENGTH,
                        format!("delete record of {length} bytes"),
                    ));
                }
                let part = part_of_row_id(row_id, self.header.row_id_page_shift);
                if self.header.full_parts.contains(part) {
                    return Err(invalid(
                        RECORD_ROW_ID,
                        format!("delete record for row {row_id} in part {part}, held in full"),
                    ));
                }
                self.delete_records = self.delete_records.checked_add(1).ok_or_else(|| {
                    invalid(RECORD_KIND, "more than 2^32 - 1 delete records".into())
                })?;
                Record::Delete { row_id, gci }
            }
            KIND_END => return self.end_record(at, record),
            kind => return Err(invalid(RECORD_KIND, format!("unknown record kind {kind}"))),
        };
        self.max_gci_written = self.max_gci_written.max(gci);
        self.position += length as u64;
        Ok(Step::Record {
            offset: at,
            length,
            record: decoded,
        })
    }

    fn end_record<'a>(&mut self, at: u64, record: &[u8]) -> Result<Step<'a>, LcpError> {
        let invalid = |field: usize, reason: String| LcpError::Invalid {
            offset: at + field as u64,
            reason,
        };
        if record.len() != END_RECORD_BYTES {
            return Err(invalid(
                RECORD_LENGTH,
                format!("end record of {} bytes", record.len()),
            ));
        }
        if get_u32(record, RECORD_ROW_ID) != 0 {
            return Err(invalid(RECORD_ROW_ID, "end record with a row id".into()));
        }
        let summary = DataFileSummary {
            row_records: get_u32(record, END_ROW_RECORDS),
            delete_records: get_u32(record, END_DELETE_RECORDS),
            max_gci_written: get_u64(record, RECORD_GCI),
            end_offset: get_u64(record, END_OFFSET),
        };
        if summary.end_offset != at {
            return Err(invalid(
                END_OFFSET,
                format!("end record says it starts at {}", summary.end_offset),
            ));
        }
        if summary.row_records != self.row_records {
            return Err(invalid(
                END_ROW_RECORDS,
                format!(
                    "end record counts {} rows, the file has {}",
                    summary.row_records, self.row_records
                ),
            ));
        }
        if summary.delete_records != self.delete_records {
            return Err(invalid(
                END_DELETE_RECORDS,
                format!(
                    "end record counts {} deletes, the file has {}",
                    summary.delete_records, self.delete_records
                ),
            ));
        }
        if summary.max_gci_written != self.max_gci_written {
            return Err(invalid(
                RECORD_GCI,
                format!(
                    "end record says max GCI {}, the records have {}",
                    summary.max_gci_written, self.max_gci_written
                ),
            ));
        }
        let file_end = at + END_RECORD_BYTES as u64;
        if self.file_bytes != file_end {
            return Err(LcpError::Invalid {
                offset: file_end,
                reason: format!("{} bytes after the end record", self.file_bytes - file_end),
            });
        }
        self.position = file_end;
        self.end = Some(summary);
        Ok(Step::End(summary))
    }

    /// Reads the next record of a file held whole in `file`: `Ok(None)` once
    /// the end record has been verified.
    pub fn next_in_file<'a>(
        &mut self,
        file: &'a [u8],
    ) -> Result<Option<(u64, Record<'a>)>, LcpError> {
        let start = (self.position as usize).min(file.len());
        match self.next(&file[start..])? {
            Step::Record { offset, record, .. } => Ok(Some((offset, record))),
            Step::End(_) => Ok(None),
            Step::NeedMore { bytes } => Err(LcpError::Truncated {
                offset: file.len() as u64,
                needed: bytes as u64,
            }),
        }
    }
}
