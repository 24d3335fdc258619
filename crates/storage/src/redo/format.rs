//! format: the byte layouts of a redo part (file header, redo page header,
//! record header) and their encoders and decoders. Everything is
//! little-endian; the tables in `docs/redo-format.md` are the reference and
//! the offsets below follow them. Encoders assert what decoders check, so a
//! malformed page never reaches the disk, and decoders never trust a length
//! or an offset read from the bytes before checking it.

use super::{
    Change, Operation, Record, RedoGeometry, RowChange, FORMAT_VERSION, MAX_COUNTER,
    MAX_RECORD_BYTES, PAGE_BODY_BYTES, PAGE_BYTES, PAGE_HEADER_BYTES, RECORD_HEADER_BYTES,
};

/// The first four bytes of a file header page.
pub(crate) const FILE_MAGIC: [u8; 4] = *b"TSRF";
/// The first four bytes of a redo page.
pub(crate) const PAGE_MAGIC: [u8; 4] = *b"TSRP";

// File header (page 0 of every file).
const FILE_MAGIC_AT: usize = 0;
const FILE_CHECKSUM_AT: usize = 4;
const FILE_VERSION_AT: usize = 8;
const FILE_PAGE_BYTES_AT: usize = 10;
const FILE_PART_AT: usize = 12;
const FILE_INDEX_AT: usize = 16;
const FILE_COUNT_AT: usize = 20;
const FILE_BYTES_AT: usize = 24;
/// Bytes `FILE_HEADER_END..PAGE_BYTES` are zero in version 1.
const FILE_HEADER_END: usize = 32;

// Redo page header.
const PAGE_MAGIC_AT: usize = 0;
const PAGE_CHECKSUM_AT: usize = 4;
const PAGE_VERSION_AT: usize = 8;
const PAGE_HEADER_BYTES_AT: usize = 10;
const PAGE_USED_AT: usize = 12;
const PAGE_CONTINUATION_AT: usize = 14;
const PAGE_PART_AT: usize = 16;
const PAGE_INCARNATION_AT: usize = 20;
const PAGE_NUMBER_AT: usize = 24;
const PAGE_FIRST_LSN_AT: usize = 32;
const PAGE_SYNCED_AT: usize = 40;
const PAGE_COMPLETE_GCI_AT: usize = 48;
const PAGE_RESERVED_AT: usize = 56;
/// The checksum covers everything after itself: the rest of the header and
/// the whole body, padding included.
const PAGE_CHECKSUMMED_FROM: usize = 8;

// Record header.
const RECORD_CHECKSUM_AT: usize = 0;
const RECORD_BYTES_AT: usize = 4;
const RECORD_KIND_AT: usize = 8;
const RECORD_OPERATION_AT: usize = 9;
const RECORD_RESERVED_AT: usize = 10;
const RECORD_TABLE_AT: usize = 12;
const RECORD_LSN_AT: usize = 16;
const RECORD_GCI_AT: usize = 24;
const RECORD_PARTITION_AT: usize = 32;
const RECORD_ROW_ID_AT: usize = 36;
const RECORD_KEY_BYTES_AT: usize = 40;
const RECORD_IMAGE_BYTES_AT: usize = 44;
/// Bytes a reader needs to learn a record's length.
pub(crate) const RECORD_PREFIX_BYTES: usize = 8;

const _: () = assert!(
    PAGE_RESERVED_AT + 8 == PAGE_HEADER_BYTES,
    "page header fields fill the header"
);
const _: () = assert!(
    RECORD_IMAGE_BYTES_AT + 4 == RECORD_HEADER_BYTES,
    "record header fields fill the header"
);
const _: () = assert!(FILE_HEADER_END <= PAGE_BYTES, "file header fits its page");

fn get_u16(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

fn get_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn get_u64(bytes: &[u8], at: usize) -> u64 {
    let mut value = [0u8; 8];
    value.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(value)
}

fn put_u16(bytes: &mut [u8], at: usize, value: u16) {
    bytes[at..at + 2].copy_from_slice(&value.to_le_bytes());
}

fn put_u32(bytes: &mut [u8], at: usize, value: u32) {
    bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

fn put_u64(bytes: &mut [u8], at: usize, value: u64) {
    bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

fn all_zero(bytes: &[u8]) -> bool {
    bytes.iter().all(|&byte| byte == 0)
}

/// The header page of file `file` of part `part`, written once when the
/// part is formatted (the rest of the file is zeros: never written).
pub fn encode_file_header(geometry: RedoGeometry, part: u32, file: u32) -> [u8; PAGE_BYTES] {
    assert!(
        file < geometry.file_count(),
        "file {file} is outside a ring of {} files",
        geometry.file_count()
    );
    let mut page = [0u8; PAGE_BYTES];
    page[FILE_MAGIC_AT..FILE_MAGIC_AT + 4].copy_from_slice(&FILE_MAGIC);
    put_u16(&mut page, FILE_VERSION_AT, FORMAT_VERSION);
    put_u16(&mut page, FILE_PAGE_BYTES_AT, PAGE_BYTES as u16);
    put_u32(&mut page, FILE_PART_AT, part);
    put_u32(&mut page, FILE_INDEX_AT, file);
    put_u32(&mut page, FILE_COUNT_AT, geometry.file_count());
    put_u64(&mut page, FILE_BYTES_AT, geometry.file_bytes());
    let checksum = crc32c::crc32c(&page[FILE_VERSION_AT..]);
    put_u32(&mut page, FILE_CHECKSUM_AT, checksum);
    assert_eq!(
        check_file_header(&page, geometry, part, file),
        Ok(()),
        "an encoded file header must decode"
    );
    page
}

/// Checks the header page at the start of `bytes` (a whole file, or at
/// least its first page) against what the configuration says it must be.
pub(crate) fn check_file_header(
    bytes: &[u8],
    geometry: RedoGeometry,
    part: u32,
    file: u32,
) -> Result<(), String> {
    let Some(page) = bytes.get(..PAGE_BYTES) else {
        return Err(format!(
            "the file is {} bytes, shorter than its header page",
            bytes.len()
        ));
    };
    if all_zero(page) {
        return Err("the header page is all zeros (the part was never formatted)".to_string());
    }
    if page[FILE_MAGIC_AT..FILE_MAGIC_AT + 4] != FILE_MAGIC {
        return Err("bad magic (not a Tessera redo file)".to_string());
    }
    let stored = get_u32(page, FILE_CHECKSUM_AT);
    let computed = crc32c::crc32c(&page[FILE_VERSION_AT..]);
    if stored != computed {
        return Err(format!(
            "checksum mismatch: CRC32C of bytes 8..4096 is {computed:#010x}, stored {stored:#010x}"
        ));
    }
    let version = get_u16(page, FILE_VERSION_AT);
    if version != FORMAT_VERSION {
        return Err(format!(
            "format version {version}, this build reads {FORMAT_VERSION}"
        ));
    }
    let page_bytes = get_u16(page, FILE_PAGE_BYTES_AT);
    if usize::from(page_bytes) != PAGE_BYTES {
        return Err(format!(
            "pages of {page_bytes} bytes, this build uses {PAGE_BYTES}"
        ));
    }
    let file_part = get_u32(page, FILE_PART_AT);
    if file_part != part {
        return Err(format!("the file belongs to redo part {file_part}"));
    }
    let index = get_u32(page, FILE_INDEX_AT);
    if index != file {
        return Err(format!("the file is file {index} of its ring"));
    }
    let file_count = get_u32(page, FILE_COUNT_AT);
    let file_bytes = get_u64(page, FILE_BYTES_AT);
    if file_count != geometry.file_count() || file_bytes != geometry.file_bytes() {
        return Err(format!(
            "the ring was made of {file_count} files of {file_bytes} bytes, the \
             configuration says {} files of {} bytes (a redo ring cannot be reshaped in place)",
            geometry.file_count(),
            geometry.file_bytes()
        ));
    }
    if !all_zero(&page[FILE_HEADER_END..]) {
        return Err("bytes 32..4096 of the header page are not zero".to_string());
    }
    Ok(())
}

/// The header of a redo page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PageHeader {
    /// Body bytes holding records (`0..=PAGE_BODY_BYTES`); the rest is zero.
    pub used: usize,
    /// Body bytes at the start that finish a record begun on an earlier page.
    pub continuation: usize,
    /// The part.
    pub part: u32,
    /// Which run of the part wrote the page (1, then one more per restart).
    pub incarnation: u32,
    /// The page number (ever increasing; ring position = number % ring pages).
    pub page: u64,
    /// LSN of the record the body's first byte belongs to.
    pub first_lsn: u64,
    /// Every page numbered below this was durable when this page was sealed.
    pub synced_page: u64,
    /// The highest GCI marked complete by records before this page.
    pub complete_gci: u64,
}

impl PageHeader {
    /// LSN of the first record that starts in this page, if one does.
    pub(crate) fn first_record_lsn(&self) -> Option<u64> {
        if self.continuation >= self.used {
            None
        } else if self.continuation > 0 {
            Some(self.first_lsn + 1)
        } else {
            Some(self.first_lsn)
        }
    }
}

/// Writes `header` into `page` (whose body already holds the records,
/// zero-padded) and seals it with the checksum.
pub(crate) fn seal_page(page: &mut [u8], header: &PageHeader) {
    assert_eq!(page.len(), PAGE_BYTES, "a redo page is {PAGE_BYTES} bytes");
    assert!(
        header.used <= PAGE_BODY_BYTES,
        "page {} uses {} body bytes of {PAGE_BODY_BYTES}",
        header.page,
        header.used
    );
    assert!(
        header.continuation <= header.used,
        "page {}: a continuation of {} bytes in a body of {}",
        header.page,
        header.continuation,
        header.used
    );
    assert!(
        header.incarnation >= 1 && header.first_lsn >= 1,
        "incarnations and LSNs start at 1 (0 would read as never written)"
    );
    assert!(
        header.page < MAX_COUNTER
            && header.first_lsn < MAX_COUNTER
            && u64::from(header.incarnation) < MAX_COUNTER >> 32,
        "page {}: counters out of range",
        header.page
    );
    assert!(
        all_zero(&page[PAGE_HEADER_BYTES + header.used..]),
        "page {}: the body after its records must be zero",
        header.page
    );
    page[PAGE_MAGIC_AT..PAGE_MAGIC_AT + 4].copy_from_slice(&PAGE_MAGIC);
    put_u16(page, PAGE_VERSION_AT, FORMAT_VERSION);
    put_u16(page, PAGE_HEADER_BYTES_AT, PAGE_HEADER_BYTES as u16);
    put_u16(page, PAGE_USED_AT, header.used as u16);
    put_u16(page, PAGE_CONTINUATION_AT, header.continuation as u16);
    put_u32(page, PAGE_PART_AT, header.part);
    put_u32(page, PAGE_INCARNATION_AT, header.incarnation);
    put_u64(page, PAGE_NUMBER_AT, header.page);
    put_u64(page, PAGE_FIRST_LSN_AT, header.first_lsn);
    put_u64(page, PAGE_SYNCED_AT, header.synced_page);
    put_u64(page, PAGE_COMPLETE_GCI_AT, header.complete_gci);
    put_u64(page, PAGE_RESERVED_AT, 0);
    let checksum = crc32c::crc32c(&page[PAGE_CHECKSUMMED_FROM..]);
    put_u32(page, PAGE_CHECKSUM_AT, checksum);
}

/// What is at a ring position.
#[derive(Clone, Copy, Debug)]
pub(crate) enum PageRead<'a> {
    /// A whole page this part wrote at this position.
    Valid {
        /// Its header.
        header: PageHeader,
        /// Its body's used bytes.
        body: &'a [u8],
    },
    /// Zeros (or past the end of a short file): never written.
    Unwritten,
    /// Anything else: a torn write, damage, or a page from elsewhere.
    Invalid(&'static str),
}

/// Reads the page at ring position `position` from `bytes` (the page's
/// bytes; shorter when the file ends inside it).
pub(crate) fn read_page(
    bytes: &[u8],
    part: u32,
    geometry: RedoGeometry,
    position: u64,
) -> PageRead<'_> {
    if bytes.len() < PAGE_BYTES {
        return if all_zero(bytes) {
            PageRead::Unwritten
        } else {
            PageRead::Invalid("the file ends inside the page")
        };
    }
    let page = &bytes[..PAGE_BYTES];
    if page[PAGE_MAGIC_AT..PAGE_MAGIC_AT + 4] != PAGE_MAGIC {
        return if all_zero(page) {
            PageRead::Unwritten
        } else {
            PageRead::Invalid("bad magic")
        };
    }
    if get_u32(page, PAGE_CHECKSUM_AT) != crc32c::crc32c(&page[PAGE_CHECKSUMMED_FROM..]) {
        return PageRead::Invalid("checksum mismatch (a torn or damaged page)");
    }
    // The checksum matched, so what follows are writer bugs or pages of
    // another format; they are refused the same way as damage.
    if get_u16(page, PAGE_VERSION_AT) != FORMAT_VERSION {
        return PageRead::Invalid("unknown format version");
    }
    if usize::from(get_u16(page, PAGE_HEADER_BYTES_AT)) != PAGE_HEADER_BYTES {
        return PageRead::Invalid("unknown page header size");
    }
    let header = PageHeader {
        used: usize::from(get_u16(page, PAGE_USED_AT)),
        continuation: usize::from(get_u16(page, PAGE_CONTINUATION_AT)),
        part: get_u32(page, PAGE_PART_AT),
        incarnation: get_u32(page, PAGE_INCARNATION_AT),
        page: get_u64(page, PAGE_NUMBER_AT),
        first_lsn: get_u64(page, PAGE_FIRST_LSN_AT),
        synced_page: get_u64(page, PAGE_SYNCED_AT),
        complete_gci: get_u64(page, PAGE_COMPLETE_GCI_AT),
    };
    if header.used > PAGE_BODY_BYTES || header.continuation > header.used {
        return PageRead::Invalid("body lengths out of range");
    }
    if get_u64(page, PAGE_RESERVED_AT) != 0 {
        return PageRead::Invalid("reserved header bytes are not zero");
    }
    if header.part != part {
        return PageRead::Invalid("the page belongs to another part");
    }
    if header.incarnation == 0 || header.first_lsn == 0 {
        return PageRead::Invalid("incarnation or first LSN is 0");
    }
    if header.page >= MAX_COUNTER
        || header.first_lsn >= MAX_COUNTER
        || u64::from(header.incarnation) >= MAX_COUNTER >> 32
    {
        return PageRead::Invalid("page number, first LSN or incarnation out of range");
    }
    if header.page % geometry.ring_pages() != position {
        return PageRead::Invalid("the page number does not belong at this position");
    }
    let body = &page[PAGE_HEADER_BYTES..];
    if !all_zero(&body[header.used..]) {
        return PageRead::Invalid("bytes after the used body are not zero");
    }
    PageRead::Valid {
        header,
        body: &body[..header.used],
    }
}

/// Record kinds (byte 8 of a record).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecordKind {
    RowChange,
    GciComplete,
    Invalidate,
}

impl RecordKind {
    fn code(self) -> u8 {
        match self {
            RecordKind::RowChange => 1,
            RecordKind::GciComplete => 2,
            RecordKind::Invalidate => 3,
        }
    }

    fn from_code(code: u8) -> Option<RecordKind> {
        Some(match code {
            1 => RecordKind::RowChange,
            2 => RecordKind::GciComplete,
            3 => RecordKind::Invalidate,
            _ => return None,
        })
    }
}

/// A record's fixed header, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecordHeader {
    pub kind: RecordKind,
    /// `Some` exactly for row changes.
    pub operation: Option<Operation>,
    pub table: u32,
    pub lsn: u64,
    /// The change's GCI, the GCI made complete, or the restored GCI.
    pub gci: u64,
    pub partition: u32,
    pub row_id: u32,
    pub key_bytes: usize,
    pub image_bytes: usize,
}

impl RecordHeader {
    /// Bytes of the whole record.
    pub(crate) fn record_bytes(&self) -> usize {
        RECORD_HEADER_BYTES + self.key_bytes + self.image_bytes
    }

    /// The header of a record with no row (marker, invalidation).
    pub(crate) fn bare(kind: RecordKind, lsn: u64, gci: u64) -> RecordHeader {
        RecordHeader {
            kind,
            operation: None,
            table: 0,
            lsn,
            gci,
            partition: 0,
            row_id: 0,
            key_bytes: 0,
            image_bytes: 0,
        }
    }

    /// The header of a row change.
    pub(crate) fn row_change(lsn: u64, change: &Change<'_>) -> RecordHeader {
        RecordHeader {
            kind: RecordKind::RowChange,
            operation: Some(change.operation),
            table: change.table,
            lsn,
            gci: change.gci,
            partition: change.partition,
            row_id: change.row_id,
            key_bytes: change.key.len(),
            image_bytes: change.image.len(),
        }
    }
}

/// Encodes a record's header, checksum included (the checksum covers bytes
/// 4.. of the header, then `key`, then `image`).
pub(crate) fn encode_record_header(
    header: &RecordHeader,
    key: &[u8],
    image: &[u8],
) -> [u8; RECORD_HEADER_BYTES] {
    assert_eq!(
        (header.key_bytes, header.image_bytes),
        (key.len(), image.len()),
        "a record header must describe the key and image it is written with"
    );
    assert!(
        header.record_bytes() <= MAX_RECORD_BYTES,
        "a record of {} bytes is over the format's {MAX_RECORD_BYTES}",
        header.record_bytes()
    );
    assert_eq!(
        header.operation.is_some(),
        header.kind == RecordKind::RowChange,
        "exactly row changes carry an operation"
    );
    assert!(
        header.kind == RecordKind::RowChange
            || (
                header.table,
                header.partition,
                header.row_id,
                key.len(),
                image.len()
            ) == (0, 0, 0, 0, 0),
        "markers and invalidations carry no row"
    );
    assert!(
        header.operation != Some(Operation::Delete) || image.is_empty(),
        "a delete carries no after-image"
    );
    assert!(
        header.lsn >= 1 && header.lsn < MAX_COUNTER,
        "LSN {} out of range",
        header.lsn
    );
    let mut bytes = [0u8; RECORD_HEADER_BYTES];
    put_u32(&mut bytes, RECORD_BYTES_AT, header.record_bytes() as u32);
    bytes[RECORD_KIND_AT] = header.kind.code();
    bytes[RECORD_OPERATION_AT] = header.operation.map_or(0, Operation::code);
    put_u32(&mut bytes, RECORD_TABLE_AT, header.table);
    put_u64(&mut bytes, RECORD_LSN_AT, header.lsn);
    put_u64(&mut bytes, RECORD_GCI_AT, header.gci);
    put_u32(&mut bytes, RECORD_PARTITION_AT, header.partition);
    put_u32(&mut bytes, RECORD_ROW_ID_AT, header.row_id);
    put_u32(&mut bytes, RECORD_KEY_BYTES_AT, key.len() as u32);
    put_u32(&mut bytes, RECORD_IMAGE_BYTES_AT, image.len() as u32);
    let mut checksum = crc32c::crc32c(&bytes[RECORD_BYTES_AT..]);
    checksum = crc32c::crc32c_append(checksum, key);
    checksum = crc32c::crc32c_append(checksum, image);
    put_u32(&mut bytes, RECORD_CHECKSUM_AT, checksum);
    bytes
}

/// The record length stored in the first `RECORD_PREFIX_BYTES` of `bytes`.
pub(crate) fn record_length(bytes: &[u8]) -> usize {
    get_u32(bytes, RECORD_BYTES_AT) as usize
}

/// Whether a record length read from the bytes can be a record.
pub(crate) fn record_length_valid(length: usize) -> bool {
    (RECORD_HEADER_BYTES..=MAX_RECORD_BYTES).contains(&length)
}

/// Decodes and checks one whole record (`bytes` is exactly its length).
pub(crate) fn decode_record_header(bytes: &[u8]) -> Result<RecordHeader, &'static str> {
    if bytes.len() < RECORD_HEADER_BYTES || record_length(bytes) != bytes.len() {
        return Err("record length does not match its bytes");
    }
    let stored = get_u32(bytes, RECORD_CHECKSUM_AT);
    if stored != crc32c::crc32c(&bytes[RECORD_BYTES_AT..]) {
        return Err("record checksum mismatch");
    }
    let kind = RecordKind::from_code(bytes[RECORD_KIND_AT]).ok_or("unknown record kind")?;
    let operation_code = bytes[RECORD_OPERATION_AT];
    let header = RecordHeader {
        kind,
        operation: Operation::from_code(operation_code),
        table: get_u32(bytes, RECORD_TABLE_AT),
        lsn: get_u64(bytes, RECORD_LSN_AT),
        gci: get_u64(bytes, RECORD_GCI_AT),
        partition: get_u32(bytes, RECORD_PARTITION_AT),
        row_id: get_u32(bytes, RECORD_ROW_ID_AT),
        key_bytes: get_u32(bytes, RECORD_KEY_BYTES_AT) as usize,
        image_bytes: get_u32(bytes, RECORD_IMAGE_BYTES_AT) as usize,
    };
    if get_u16(bytes, RECORD_RESERVED_AT) != 0 {
        return Err("reserved record bytes are not zero");
    }
    if header.key_bytes.checked_add(header.image_bytes) != Some(bytes.len() - RECORD_HEADER_BYTES) {
        return Err("key and image lengths do not add up to the record");
    }
    if header.lsn == 0 || header.lsn >= MAX_COUNTER {
        return Err("LSN out of range");
    }
    match kind {
        RecordKind::RowChange => match header.operation {
            None => return Err("unknown row operation"),
            Some(Operation::Delete) if header.image_bytes != 0 => {
                return Err("a delete with an after-image")
            }
            Some(_) => {}
        },
        RecordKind::GciComplete | RecordKind::Invalidate => {
            let row = (
                operation_code,
                header.table,
                header.partition,
                header.row_id,
                header.key_bytes + header.image_bytes,
            );
            if row != (0, 0, 0, 0, 0) {
                return Err("a marker or invalidation with row fields");
            }
        }
    }
    Ok(header)
}

/// The record `header` was decoded from, viewed over its `bytes`.
pub(crate) fn record_view<'a>(header: &RecordHeader, bytes: &'a [u8]) -> Record<'a> {
    match (header.kind, header.operation) {
        (RecordKind::RowChange, Some(operation)) => {
            let key_end = RECORD_HEADER_BYTES + header.key_bytes;
            Record::RowChange(RowChange {
                lsn: header.lsn,
                change: Change {
                    gci: header.gci,
                    table: header.table,
                    partition: header.partition,
                    row_id: header.row_id,
                    operation,
                    key: &bytes[RECORD_HEADER_BYTES..key_end],
                    image: &bytes[key_end..key_end + header.image_bytes],
                },
            })
        }
        (RecordKind::GciComplete, _) => Record::GciComplete {
            lsn: header.lsn,
            gci: header.gci,
        },
        (RecordKind::Invalidate, _) => Record::Invalidate {
            lsn: header.lsn,
            restored_gci: header.gci,
        },
        (RecordKind::RowChange, None) => {
            unreachable!("decode_record_header refuses a row change without an operation")
        }
    }
}
