//! The LCP control file of one partition: which data files, in order, make
//! a restorable state (the chain), which parts each holds in full, the
//! LCP's `max_gci_written`, and where redo replay starts. Also the rules
//! that make partial LCPs work: the restore plan over the chain
//! ([`RestorePlan`]), trimming the chain when a new data file is added
//! ([`append_and_trim`]), which files a newer LCP frees
//! ([`files_to_delete`]) and which of the two alternating control files to
//! restore from at restart ([`choose_control`]).

use std::fmt;

use super::{
    get_u16, get_u32, get_u64, page_of_row_id, part_of_row_id, put_u16, put_u32, put_u64, LcpError,
    PartRange, FORMAT_VERSION, PART_COUNT,
};

/// The first eight bytes of a control file.
pub const CONTROL_MAGIC: [u8; 8] = *b"TSLCPCTL";
/// Bytes before the first data file entry.
pub const CONTROL_HEADER_BYTES: usize = 88;
/// Bytes of one data file entry.
pub const CONTROL_ENTRY_BYTES: usize = 32;
/// The longest chain. Every LCP that writes a data file writes at least one
/// part in full, continuing the rotation where the previous one stopped, so
/// after 2048 data files every part has a newer full copy and the oldest
/// file drops out of the chain.
pub const MAX_CHAIN_FILES: usize = PART_COUNT as usize;

const OFFSET_MAGIC: usize = 0;
const OFFSET_VERSION: usize = 8;
const OFFSET_TOTAL_BYTES: usize = 12;
const OFFSET_LCP_ID: usize = 16;
const OFFSET_PREVIOUS_LCP_ID: usize = 24;
const OFFSET_TABLE_ID: usize = 32;
const OFFSET_TABLE_VERSION: usize = 36;
const OFFSET_PARTITION: usize = 40;
const OFFSET_PART_COUNT: usize = 44;
const OFFSET_PAGE_SHIFT: usize = 46;
const OFFSET_RESERVED: usize = 47;
const OFFSET_MAX_GCI_COMPLETED: usize = 48;
const OFFSET_MAX_GCI_WRITTEN: usize = 56;
const OFFSET_REDO_START_LSN: usize = 64;
const OFFSET_ROW_COUNT: usize = 72;
const OFFSET_MAX_PAGE_COUNT: usize = 80;
const OFFSET_FILE_COUNT: usize = 84;

const ENTRY_FILE_NUMBER: usize = 0;
const ENTRY_FIRST_PART: usize = 4;
const ENTRY_PART_COUNT: usize = 6;
const ENTRY_LCP_ID: usize = 8;
const ENTRY_MAX_GCI_WRITTEN: usize = 16;
const ENTRY_ROW_RECORDS: usize = 24;
const ENTRY_DELETE_RECORDS: usize = 28;

const _: () = assert!(
    OFFSET_FILE_COUNT + 4 == CONTROL_HEADER_BYTES,
    "header fields fill the header"
);
const _: () = assert!(
    ENTRY_DELETE_RECORDS + 4 == CONTROL_ENTRY_BYTES,
    "entry fields fill the entry"
);

/// The largest control file: a full chain. (NDB's is 4 KB and grows to 8 KB.)
pub const MAX_CONTROL_BYTES: usize =
    CONTROL_HEADER_BYTES + MAX_CHAIN_FILES * CONTROL_ENTRY_BYTES + 4;

/// One data file of the chain, as the control file describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataFileEntry {
    /// The file's number within the partition: strictly increasing along
    /// the chain, one more for each data file written. The caller derives
    /// the file name from table, partition and this number.
    pub file_number: u32,
    /// The parts this file holds in full; it holds every other part as
    /// changes only.
    pub full_parts: PartRange,
    /// The LCP that wrote the file.
    pub lcp_id: u64,
    /// The highest GCI of any record in the file (0 if it has none).
    pub max_gci_written: u64,
    /// Row records in the file.
    pub row_records: u32,
    /// Delete-by-row-id records in the file.
    pub delete_records: u32,
}

/// The control file of one partition for one LCP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlFile {
    /// The LCP this control file completes (ids grow, from 1).
    pub lcp_id: u64,
    /// The LCP whose control file this one follows for the partition, or 0
    /// for the partition's first LCP (which is written to both slots).
    pub previous_lcp_id: u64,
    pub table_id: u32,
    pub table_version: u32,
    pub partition: u32,
    /// How row ids split into page and slot (see `part_of_row_id`).
    pub row_id_page_shift: u8,
    /// The latest complete GCI when this LCP started: a row or freed slot
    /// whose GCI is above it may have changed after the LCP scanned it, so
    /// the next LCP writes it as a change.
    pub max_gci_completed: u64,
    /// The highest GCI in any data file of the chain: the LCP is
    /// restorable once the complete GCI is at least this.
    pub max_gci_written: u64,
    /// The LSN of the partition's redo log part when this LCP started:
    /// replay after restoring it begins here, and the redo tail may not
    /// move past it while this is the newest restorable LCP.
    pub redo_start_lsn: u64,
    /// Rows in the partition the LCP restores (a check for restore).
    pub row_count: u64,
    /// Pages the partition had when the LCP started. Restore skips records
    /// of older data files on pages at or above it: those pages were
    /// released before this LCP, and rows there now come from redo.
    pub max_page_count: u32,
    /// The chain, oldest first; never empty.
    pub data_files: Vec<DataFileEntry>,
}

impl ControlFile {
    /// Bytes of the encoded file.
    pub fn encoded_len(&self) -> usize {
        CONTROL_HEADER_BYTES + self.data_files.len() * CONTROL_ENTRY_BYTES + 4
    }

    /// Whether the LCP may be restored once `complete_gci` is complete.
    pub fn is_restorable(&self, complete_gci: u64) -> bool {
        self.max_gci_written <= complete_gci
    }

    /// The encoded file. Asserts every rule the decoder checks, so a bad
    /// control file never reaches the disk.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        self.encode_into(&mut bytes);
        debug_assert_eq!(
            ControlFile::decode(&bytes).as_ref(),
            Ok(self),
            "encode and decode agree"
        );
        bytes
    }

    /// Encodes the file into `bytes` (cleared first), as [`encode`] does:
    /// with `bytes` reserved to [`MAX_CONTROL_BYTES`] it never allocates,
    /// which the ldm relies on (its thread does not allocate once warm).
    ///
    /// [`encode`]: ControlFile::encode
    pub fn encode_into(&self, bytes: &mut Vec<u8>) {
        if let Err(error) = self.check() {
            panic!(
                "control file for LCP {} breaks the format ({error})",
                self.lcp_id
            );
        }
        bytes.clear();
        bytes.resize(self.encoded_len(), 0);
        let bytes = &mut bytes[..];
        bytes[OFFSET_MAGIC..OFFSET_MAGIC + 8].copy_from_slice(&CONTROL_MAGIC);
        put_u32(bytes, OFFSET_VERSION, FORMAT_VERSION);
        put_u32(bytes, OFFSET_TOTAL_BYTES, self.encoded_len() as u32);
        put_u64(bytes, OFFSET_LCP_ID, self.lcp_id);
        put_u64(bytes, OFFSET_PREVIOUS_LCP_ID, self.previous_lcp_id);
        put_u32(bytes, OFFSET_TABLE_ID, self.table_id);
        put_u32(bytes, OFFSET_TABLE_VERSION, self.table_version);
        put_u32(bytes, OFFSET_PARTITION, self.partition);
        put_u16(bytes, OFFSET_PART_COUNT, PART_COUNT);
        bytes[OFFSET_PAGE_SHIFT] = self.row_id_page_shift;
        put_u64(bytes, OFFSET_MAX_GCI_COMPLETED, self.max_gci_completed);
        put_u64(bytes, OFFSET_MAX_GCI_WRITTEN, self.max_gci_written);
        put_u64(bytes, OFFSET_REDO_START_LSN, self.redo_start_lsn);
        put_u64(bytes, OFFSET_ROW_COUNT, self.row_count);
        put_u32(bytes, OFFSET_MAX_PAGE_COUNT, self.max_page_count);
        put_u32(bytes, OFFSET_FILE_COUNT, self.data_files.len() as u32);
        for (index, entry) in self.data_files.iter().enumerate() {
            let at = CONTROL_HEADER_BYTES + index * CONTROL_ENTRY_BYTES;
            put_u32(bytes, at + ENTRY_FILE_NUMBER, entry.file_number);
            put_u16(bytes, at + ENTRY_FIRST_PART, entry.full_parts.first);
            put_u16(bytes, at + ENTRY_PART_COUNT, entry.full_parts.count);
            put_u64(bytes, at + ENTRY_LCP_ID, entry.lcp_id);
            put_u64(bytes, at + ENTRY_MAX_GCI_WRITTEN, entry.max_gci_written);
            put_u32(bytes, at + ENTRY_ROW_RECORDS, entry.row_records);
            put_u32(bytes, at + ENTRY_DELETE_RECORDS, entry.delete_records);
        }
        let checksum_at = bytes.len() - 4;
        let checksum = crc32c::crc32c(&bytes[..checksum_at]);
        put_u32(bytes, checksum_at, checksum);
    }

    /// Decodes a control file (the whole file, nothing after it).
    pub fn decode(bytes: &[u8]) -> Result<ControlFile, LcpError> {
        let minimum = CONTROL_HEADER_BYTES + CONTROL_ENTRY_BYTES + 4;
        if bytes.len() < OFFSET_TOTAL_BYTES + 4 {
            return Err(LcpError::Truncated {
                offset: bytes.len() as u64,
                needed: (minimum - bytes.len()) as u64,
            });
        }
        // The length field is read before the checksum can vouch for it, so
        // it is bounded first; a flip in it shows up here or as a checksum
        // mismatch at the wrong place.
        let total = get_u32(bytes, OFFSET_TOTAL_BYTES) as usize;
        if !(minimum..=MAX_CONTROL_BYTES).contains(&total)
            || !(total - CONTROL_HEADER_BYTES - 4).is_multiple_of(CONTROL_ENTRY_BYTES)
        {
            return Err(LcpError::invalid(
                OFFSET_TOTAL_BYTES,
                format!("control file length field {total} is not 88 + 32 * (1..=2048) + 4"),
            ));
        }
        if bytes.len() < total {
            return Err(LcpError::Truncated {
                offset: bytes.len() as u64,
                needed: (total - bytes.len()) as u64,
            });
        }
        if bytes.len() > total {
            return Err(LcpError::invalid(
                total,
                format!(
                    "{} bytes after the end of the control file",
                    bytes.len() - total
                ),
            ));
        }
        let checksum_at = total - 4;
        let stored = get_u32(bytes, checksum_at);
        let computed = crc32c::crc32c(&bytes[..checksum_at]);
        if stored != computed {
            return Err(LcpError::Checksum {
                offset: checksum_at as u64,
                covered_from: 0,
                stored,
                computed,
            });
        }
        if bytes[OFFSET_MAGIC..OFFSET_MAGIC + 8] != CONTROL_MAGIC {
            return Err(LcpError::BadMagic {
                offset: OFFSET_MAGIC as u64,
            });
        }
        let version = get_u32(bytes, OFFSET_VERSION);
        if version != FORMAT_VERSION {
            return Err(LcpError::UnsupportedVersion {
                offset: OFFSET_VERSION as u64,
                version,
            });
        }
        let part_count = get_u16(bytes, OFFSET_PART_COUNT);
        if part_count != PART_COUNT {
            return Err(LcpError::invalid(
                OFFSET_PART_COUNT,
                format!("part count {part_count}, the format has {PART_COUNT}"),
            ));
        }
        if bytes[OFFSET_RESERVED] != 0 {
            return Err(LcpError::invalid(
                OFFSET_RESERVED,
                "reserved byte is not zero",
            ));
        }
        let file_count = get_u32(bytes, OFFSET_FILE_COUNT) as usize;
        if CONTROL_HEADER_BYTES + file_count * CONTROL_ENTRY_BYTES + 4 != total {
            return Err(LcpError::invalid(
                OFFSET_FILE_COUNT,
                format!("{file_count} data files do not fill a control file of {total} bytes"),
            ));
        }
        let mut data_files = Vec::with_capacity(file_count);
        for index in 0..file_count {
            let at = CONTROL_HEADER_BYTES + index * CONTROL_ENTRY_BYTES;
            let full_parts = PartRange {
                first: get_u16(bytes, at + ENTRY_FIRST_PART),
                count: get_u16(bytes, at + ENTRY_PART_COUNT),
            };
            if let Err(reason) = full_parts.check() {
                return Err(LcpError::invalid(at + ENTRY_FIRST_PART, reason));
            }
            data_files.push(DataFileEntry {
                file_number: get_u32(bytes, at + ENTRY_FILE_NUMBER),
                full_parts,
                lcp_id: get_u64(bytes, at + ENTRY_LCP_ID),
                max_gci_written: get_u64(bytes, at + ENTRY_MAX_GCI_WRITTEN),
                row_records: get_u32(bytes, at + ENTRY_ROW_RECORDS),
                delete_records: get_u32(bytes, at + ENTRY_DELETE_RECORDS),
            });
        }
        let control = ControlFile {
            lcp_id: get_u64(bytes, OFFSET_LCP_ID),
            previous_lcp_id: get_u64(bytes, OFFSET_PREVIOUS_LCP_ID),
            table_id: get_u32(bytes, OFFSET_TABLE_ID),
            table_version: get_u32(bytes, OFFSET_TABLE_VERSION),
            partition: get_u32(bytes, OFFSET_PARTITION),
            row_id_page_shift: bytes[OFFSET_PAGE_SHIFT],
            max_gci_completed: get_u64(bytes, OFFSET_MAX_GCI_COMPLETED),
            max_gci_written: get_u64(bytes, OFFSET_MAX_GCI_WRITTEN),
            redo_start_lsn: get_u64(bytes, OFFSET_REDO_START_LSN),
            row_count: get_u64(bytes, OFFSET_ROW_COUNT),
            max_page_count: get_u32(bytes, OFFSET_MAX_PAGE_COUNT),
            data_files,
        };
        control.check()?;
        Ok(control)
    }

    /// The rules of the format that the fields must keep, with the offset
    /// of the field that breaks one.
    fn check(&self) -> Result<(), LcpError> {
        if self.lcp_id == 0 {
            return Err(LcpError::invalid(
                OFFSET_LCP_ID,
                "LCP id 0 (ids start at 1)",
            ));
        }
        if self.previous_lcp_id >= self.lcp_id {
            return Err(LcpError::invalid(
                OFFSET_PREVIOUS_LCP_ID,
                format!(
                    "previous LCP {} is not before LCP {}",
                    self.previous_lcp_id, self.lcp_id
                ),
            ));
        }
        if self.row_id_page_shift >= 32 {
            return Err(LcpError::invalid(
                OFFSET_PAGE_SHIFT,
                format!(
                    "row id page shift {} (must be below 32)",
                    self.row_id_page_shift
                ),
            ));
        }
        if self.data_files.is_empty() || self.data_files.len() > MAX_CHAIN_FILES {
            return Err(LcpError::invalid(
                OFFSET_FILE_COUNT,
                format!("{} data files (must be 1..=2048)", self.data_files.len()),
            ));
        }
        let mut previous: Option<&DataFileEntry> = None;
        for (index, entry) in self.data_files.iter().enumerate() {
            let at = CONTROL_HEADER_BYTES + index * CONTROL_ENTRY_BYTES;
            if let Err(reason) = entry.full_parts.check() {
                return Err(LcpError::invalid(at + ENTRY_FIRST_PART, reason));
            }
            if let Some(previous) = previous {
                if entry.file_number <= previous.file_number {
                    return Err(LcpError::invalid(
                        at + ENTRY_FILE_NUMBER,
                        format!(
                            "data file {} follows data file {}: numbers must increase",
                            entry.file_number, previous.file_number
                        ),
                    ));
                }
                if entry.lcp_id <= previous.lcp_id {
                    return Err(LcpError::invalid(
                        at + ENTRY_LCP_ID,
                        format!(
                            "data file {} from LCP {} follows one from LCP {}",
                            entry.file_number, entry.lcp_id, previous.lcp_id
                        ),
                    ));
                }
            }
            if entry.lcp_id == 0 || entry.lcp_id > self.lcp_id {
                return Err(LcpError::invalid(
                    at + ENTRY_LCP_ID,
                    format!(
                        "data file {} from LCP {} in the control file of LCP {}",
                        entry.file_number, entry.lcp_id, self.lcp_id
                    ),
                ));
            }
            if entry.max_gci_written > self.max_gci_written {
                return Err(LcpError::invalid(
                    at + ENTRY_MAX_GCI_WRITTEN,
                    format!(
                        "data file {} holds GCI {} above the LCP's max_gci_written {}",
                        entry.file_number, entry.max_gci_written, self.max_gci_written
                    ),
                ));
            }
            previous = Some(entry);
        }
        if let Some(part) = first_uncovered_part(&self.data_files) {
            return Err(LcpError::invalid(
                CONTROL_HEADER_BYTES,
                format!("part {part} is held in full by no data file: the chain restores nothing"),
            ));
        }
        Ok(())
    }

    /// How to combine the chain's data files at restore.
    pub fn restore_plan(&self) -> RestorePlan {
        RestorePlan::for_chain(
            &self.data_files,
            self.max_page_count,
            self.row_id_page_shift,
        )
    }

    /// Whether data file `file_number` is part of this LCP's chain.
    pub fn references(&self, file_number: u32) -> bool {
        self.data_files
            .binary_search_by_key(&file_number, |entry| entry.file_number)
            .is_ok()
    }
}

/// What restore does with a part of one data file of the chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartRole {
    /// A later file of the chain holds the part in full: skip its records.
    Skip,
    /// This is the newest file holding the part in full: load every row
    /// record (the part starts empty, so this clears its row-id range).
    AllRows,
    /// A file after the part's newest full copy: a row record replaces the
    /// row at its row id, a delete record removes whatever is there.
    Changes,
}

/// How restore combines a chain: read the data files oldest first, and for
/// each record ask [`RestorePlan::row_role`]. Any number of files works;
/// the result is the partition as of the LCP, to which redo is then applied
/// from `redo_start_lsn`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestorePlan {
    /// For each part, the chain index of the newest file holding it in
    /// full (`u16::MAX`: none, which a valid control file never has).
    newest_full: Vec<u16>,
    max_page_count: u32,
    row_id_page_shift: u8,
}

impl RestorePlan {
    fn for_chain(
        chain: &[DataFileEntry],
        max_page_count: u32,
        row_id_page_shift: u8,
    ) -> RestorePlan {
        assert!(
            chain.len() <= MAX_CHAIN_FILES,
            "chains hold at most 2048 files"
        );
        let mut newest_full = vec![u16::MAX; PART_COUNT as usize];
        for (index, entry) in chain.iter().enumerate() {
            for part in entry.full_parts.parts() {
                newest_full[part as usize] = index as u16;
            }
        }
        RestorePlan {
            newest_full,
            max_page_count,
            row_id_page_shift,
        }
    }

    /// The chain index of the oldest file restore needs: every file before
    /// it holds only parts a later file holds in full.
    pub fn first_needed(&self) -> usize {
        self.newest_full.iter().copied().min().unwrap_or(0) as usize
    }

    /// What to do with part `part` of the file at chain index `file_index`.
    pub fn part_role(&self, file_index: usize, part: u16) -> PartRole {
        let newest = self.newest_full[part as usize] as usize;
        match file_index.cmp(&newest) {
            std::cmp::Ordering::Less => PartRole::Skip,
            std::cmp::Ordering::Equal => PartRole::AllRows,
            std::cmp::Ordering::Greater => PartRole::Changes,
        }
    }

    /// What to do with a record for `row_id` in the file at chain index
    /// `file_index`: its part's role, or `Skip` for a page at or above the
    /// LCP's `max_page_count`.
    pub fn row_role(&self, file_index: usize, row_id: u32) -> PartRole {
        if page_of_row_id(row_id, self.row_id_page_shift) >= self.max_page_count {
            return PartRole::Skip;
        }
        self.part_role(file_index, part_of_row_id(row_id, self.row_id_page_shift))
    }
}

const _: () = assert!(
    PART_COUNT.is_multiple_of(64),
    "a PartSet word holds 64 parts"
);

/// A set of parts, one bit each: on the stack, so the checks and chain
/// updates an ldm runs for every LCP do not allocate.
struct PartSet {
    words: [u64; PART_COUNT as usize / 64],
    count: usize,
}

impl PartSet {
    fn new() -> PartSet {
        PartSet {
            words: [0; PART_COUNT as usize / 64],
            count: 0,
        }
    }

    fn insert_range(&mut self, range: PartRange) {
        for part in range.parts() {
            let (word, bit) = (part as usize / 64, part % 64);
            if self.words[word] & (1 << bit) == 0 {
                self.words[word] |= 1 << bit;
                self.count += 1;
            }
        }
    }

    fn is_full(&self) -> bool {
        self.count == PART_COUNT as usize
    }

    fn first_missing(&self) -> Option<u16> {
        let word = self.words.iter().position(|&word| word != u64::MAX)?;
        Some((word * 64) as u16 + self.words[word].trailing_ones() as u16)
    }
}

/// The first part no file of `chain` holds in full, if any (a chain that
/// leaves one uncovered restores nothing for it).
fn first_uncovered_part(chain: &[DataFileEntry]) -> Option<u16> {
    let mut covered = PartSet::new();
    for entry in chain {
        covered.insert_range(entry.full_parts);
    }
    covered.first_missing()
}

/// The chain of a new LCP: `chain` (the newest control file's) with `new`
/// appended, then every leading file dropped whose parts all have a newer
/// full copy. `chain` is empty for a partition's first LCP, whose file must
/// hold all parts.
pub fn append_and_trim(chain: &[DataFileEntry], new: DataFileEntry) -> Vec<DataFileEntry> {
    let mut joined = Vec::with_capacity(chain.len() + 1);
    append_and_trim_into(chain, new, &mut joined);
    joined
}

/// [`append_and_trim`] into `out` (cleared first): no allocation when `out`
/// has room for the result, so an ldm can reuse the chains of dropped
/// control files.
pub fn append_and_trim_into(
    chain: &[DataFileEntry],
    new: DataFileEntry,
    out: &mut Vec<DataFileEntry>,
) {
    if let Some(last) = chain.last() {
        assert!(
            new.file_number > last.file_number,
            "data file numbers grow: {} after {}",
            new.file_number,
            last.file_number
        );
        assert!(
            new.lcp_id > last.lcp_id,
            "a data file's LCP id grows along the chain"
        );
    }
    // Walk from the newest file back until every part has a full copy:
    // `first_needed` is the index in `chain`, `chain.len()` for `new`.
    let mut covered = PartSet::new();
    covered.insert_range(new.full_parts);
    let mut first_needed = chain.len();
    for (index, entry) in chain.iter().enumerate().rev() {
        if covered.is_full() {
            break;
        }
        covered.insert_range(entry.full_parts);
        first_needed = index;
    }
    assert!(
        covered.is_full(),
        "the chain must hold every part in full somewhere"
    );
    out.clear();
    out.extend_from_slice(&chain[first_needed..]);
    out.push(new);
}

/// The data files of `older`'s chain that `newer`'s chain no longer needs.
/// Delete them only once `newer` is restorable and that is durable: the
/// node's system file records a complete GCI of at least
/// `newer.max_gci_written`.
pub fn files_to_delete<'a>(
    older: &'a ControlFile,
    newer: &'a ControlFile,
) -> impl Iterator<Item = u32> + 'a {
    assert!(older.lcp_id < newer.lcp_id, "files_to_delete(older, newer)");
    older
        .data_files
        .iter()
        .map(|entry| entry.file_number)
        .filter(|&number| !newer.references(number))
}

/// One of the two control files of a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlSlot {
    Zero,
    One,
}

impl ControlSlot {
    /// The other control file.
    pub fn other(self) -> ControlSlot {
        match self {
            ControlSlot::Zero => ControlSlot::One,
            ControlSlot::One => ControlSlot::Zero,
        }
    }

    /// 0 or 1, for the file name.
    pub fn index(self) -> u32 {
        match self {
            ControlSlot::Zero => 0,
            ControlSlot::One => 1,
        }
    }
}

/// Why a control file was not restored from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlotProblem {
    /// The file does not exist (or is empty).
    Absent,
    /// The file cannot be decoded: torn by a crash mid-write, or corrupt.
    Damaged(LcpError),
    /// A valid LCP whose `max_gci_written` is above the restored GCI (it
    /// never became restorable; its new data files are garbage).
    NotRestorable { lcp_id: u64, max_gci_written: u64 },
}

impl fmt::Display for SlotProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SlotProblem::Absent => f.write_str("absent"),
            SlotProblem::Damaged(error) => write!(f, "damaged, {error}"),
            SlotProblem::NotRestorable {
                lcp_id,
                max_gci_written,
            } => write!(f, "LCP {lcp_id} needs GCI {max_gci_written} complete"),
        }
    }
}

/// What [`choose_control`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlChoice {
    /// The control file to restore, or `None`: the partition has no
    /// restorable LCP yet and restores from redo alone (from its start,
    /// which redo still holds because no LCP of it ever became restorable).
    pub restore: Option<(ControlSlot, ControlFile)>,
    /// Where the next control file goes. When `restore` is `None`, the next
    /// LCP is the partition's first: `previous_lcp_id` 0, written to slot
    /// Zero, fsynced, then to slot One.
    pub write_next: ControlSlot,
    /// The highest LCP id in any valid control file (new ids go above).
    pub newest_lcp_id: u64,
    /// Slots not restored from that hold something worth logging: damage
    /// (name the file and offset) or an LCP that never became restorable.
    pub passed_over: Vec<(ControlSlot, SlotProblem)>,
}

/// Why a partition cannot be restored from its own disk (the node stops;
/// it comes back through an initial node restart from its peers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChoiceError {
    /// A valid control file names another table or partition.
    WrongPartition {
        slot: ControlSlot,
        table_id: u32,
        partition: u32,
    },
    /// Both control files hold the same LCP id with different contents.
    Disagree { lcp_id: u64 },
    /// The partition had a restorable LCP once, and neither control file
    /// now gives one.
    NoRestorableLcp {
        restored_gci: u64,
        zero: SlotProblem,
        one: SlotProblem,
    },
}

impl fmt::Display for ChoiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChoiceError::WrongPartition {
                slot,
                table_id,
                partition,
            } => write!(
                f,
                "control file {} belongs to table {table_id} partition {partition}",
                slot.index()
            ),
            ChoiceError::Disagree { lcp_id } => {
                write!(
                    f,
                    "both control files hold LCP {lcp_id} with different contents"
                )
            }
            ChoiceError::NoRestorableLcp {
                restored_gci,
                zero,
                one,
            } => write!(
                f,
                "no restorable LCP at restored GCI {restored_gci}: control file 0 {zero}; \
                 control file 1 {one}"
            ),
        }
    }
}

impl std::error::Error for ChoiceError {}

enum Read {
    Absent,
    Damaged(LcpError),
    Valid(ControlFile),
}

/// Picks, at restart, the control file to restore a partition from: the
/// valid one with the highest LCP id whose `max_gci_written` is at most the
/// restored GCI. `None` or an empty slice means the file does not exist.
///
/// The rules it relies on (docs/lcp-format.md, "Two control files"): a new
/// control file overwrites the slot not holding the newest one, and only
/// once the newest is restorable; a partition's first control file is
/// written to both slots. So a crash tears at most a slot whose loss is
/// harmless, and every other combination is corruption and an error.
pub fn choose_control(
    slot_zero: Option<&[u8]>,
    slot_one: Option<&[u8]>,
    table_id: u32,
    partition: u32,
    restored_gci: u64,
) -> Result<ControlChoice, ChoiceError> {
    let read = |slot: ControlSlot, bytes: Option<&[u8]>| -> Result<Read, ChoiceError> {
        match bytes {
            None | Some([]) => Ok(Read::Absent),
            Some(bytes) => match ControlFile::decode(bytes) {
                Err(error) => Ok(Read::Damaged(error)),
                Ok(control) if control.table_id != table_id || control.partition != partition => {
                    Err(ChoiceError::WrongPartition {
                        slot,
                        table_id: control.table_id,
                        partition: control.partition,
                    })
                }
                Ok(control) => Ok(Read::Valid(control)),
            },
        }
    };
    let reads = [
        (ControlSlot::Zero, read(ControlSlot::Zero, slot_zero)?),
        (ControlSlot::One, read(ControlSlot::One, slot_one)?),
    ];
    if let (Read::Valid(zero), Read::Valid(one)) = (&reads[0].1, &reads[1].1) {
        if zero.lcp_id == one.lcp_id && zero != one {
            return Err(ChoiceError::Disagree {
                lcp_id: zero.lcp_id,
            });
        }
    }
    let newest_lcp_id = reads
        .iter()
        .filter_map(|(_, read)| match read {
            Read::Valid(control) => Some(control.lcp_id),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let restore = reads
        .iter()
        .filter_map(|(slot, read)| match read {
            Read::Valid(control) if control.is_restorable(restored_gci) => Some((*slot, control)),
            _ => None,
        })
        // Highest LCP id; on a tie (the first LCP's two copies) slot Zero.
        .fold(
            None::<(ControlSlot, &ControlFile)>,
            |best, candidate| match best {
                Some(best) if best.1.lcp_id >= candidate.1.lcp_id => Some(best),
                _ => Some(candidate),
            },
        );
    let problem = |read: &Read| -> Option<SlotProblem> {
        match read {
            Read::Absent => None,
            Read::Damaged(error) => Some(SlotProblem::Damaged(error.clone())),
            Read::Valid(control) if !control.is_restorable(restored_gci) => {
                Some(SlotProblem::NotRestorable {
                    lcp_id: control.lcp_id,
                    max_gci_written: control.max_gci_written,
                })
            }
            Read::Valid(_) => None,
        }
    };
    if let Some((slot, control)) = restore {
        let other = slot.other();
        let passed_over = reads
            .iter()
            .filter(|(candidate, _)| *candidate == other)
            .filter_map(|(candidate, read)| problem(read).map(|problem| (*candidate, problem)))
            .collect();
        return Ok(ControlChoice {
            restore: Some((slot, control.clone())),
            write_next: other,
            newest_lcp_id,
            passed_over,
        });
    }
    // Nothing restorable. That is expected only while the partition's first
    // LCP has not become restorable: no valid control file names a previous
    // LCP, and at most one slot is damaged (the first LCP's copy a crash
    // tore; with both copies written the LCP survives in one of them).
    let had_earlier_lcp = reads
        .iter()
        .any(|(_, read)| matches!(read, Read::Valid(control) if control.previous_lcp_id != 0));
    let damaged = reads
        .iter()
        .filter(|(_, read)| matches!(read, Read::Damaged(_)))
        .count();
    if had_earlier_lcp || damaged == 2 {
        let describe = |read: &Read| problem(read).unwrap_or(SlotProblem::Absent);
        return Err(ChoiceError::NoRestorableLcp {
            restored_gci,
            zero: describe(&reads[0].1),
            one: describe(&reads[1].1),
        });
    }
    Ok(ControlChoice {
        restore: None,
        write_next: ControlSlot::Zero,
        newest_lcp_id,
        passed_over: reads
            .iter()
            .filter_map(|(slot, read)| problem(read).map(|problem| (*slot, problem)))
            .collect(),
    })
}
