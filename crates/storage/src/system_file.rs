//! system_file: the system file of a data node
//! (docs/design/durability.md §2, §5), the few numbers a node must find on
//! its own disk to take part in a system restart: the latest GCI recorded
//! complete, the highest GCI it ever started (new GCIs start above it), its
//! node id and start count.
//!
//! The file holds two copies of one 512-byte record (slot A at byte 0,
//! slot B at byte 512), each with its own CRC32C. Every update writes
//! **both** copies with the same sequence number, one after the other, the
//! caller fsyncing after each: first the slot that is older (or damaged),
//! then the other. A crash can tear at most the slot being written, and the
//! other slot then still holds either the previous record (crash during the
//! first write) or the new one (crash during the second). At rest both
//! copies are equal, so a bit flip in one of them loses nothing either.
//! Reading ([`choose`]) takes the valid copy with the higher sequence; only
//! when neither copy is usable does it fail, naming each copy's problem and
//! its byte offset in the file, so the node can stop (fail-fast).
//!
//! Pure logic over bytes: the caller owns the file, the writes and the
//! fsyncs. The format, byte by byte, is in `docs/system-file-format.md`.

use std::fmt;

/// Bytes of one copy (one sector, so a real disk writes it whole).
pub const SLOT_BYTES: usize = 512;
/// Bytes of the whole file: slot A, then slot B.
pub const FILE_BYTES: usize = 2 * SLOT_BYTES;
/// The first eight bytes of a slot.
pub const MAGIC: [u8; 8] = *b"TSSYSFIL";
/// The format this code writes. It also reads version 1, which has no
/// members field (read as 0: not recorded).
pub const FORMAT_VERSION: u32 = 2;

const OFFSET_MAGIC: usize = 0;
const OFFSET_VERSION: usize = 8;
const OFFSET_NODE_ID: usize = 12;
const OFFSET_RESERVED_16: usize = 14;
const OFFSET_START_COUNT: usize = 16;
const OFFSET_RESERVED_32: usize = 20;
const OFFSET_SEQUENCE: usize = 24;
const OFFSET_LATEST_COMPLETE_GCI: usize = 32;
const OFFSET_HIGHEST_STARTED_GCI: usize = 40;
/// Version 2: the data nodes alive at the latest complete GCI (bit `id`
/// for node `id`).
const OFFSET_MEMBERS: usize = 48;
/// Bytes `OFFSET_PADDING..OFFSET_CHECKSUM` are zero; later versions add
/// fields there (version 1 had its padding from `OFFSET_MEMBERS`).
const OFFSET_PADDING: usize = 64;
const OFFSET_CHECKSUM: usize = SLOT_BYTES - 4;

const _: () = assert!(
    OFFSET_PADDING <= OFFSET_CHECKSUM,
    "fields must fit before the checksum"
);
const _: () = assert!(SLOT_BYTES.is_multiple_of(512), "a slot is whole sectors");

/// What the system file records for one data node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SystemFile {
    /// The node this file belongs to (a file copied from another node is
    /// refused by the caller, which knows its own id).
    pub node_id: u16,
    /// How many times the node has started (initial start included).
    pub start_count: u32,
    /// The latest GCI the master recorded complete in this file: every
    /// transaction with a GCI up to it is in redo on enough nodes.
    pub latest_complete_gci: u64,
    /// The highest GCI the node ever started; after a restart new GCIs
    /// start above the highest of this and what redo holds.
    pub highest_started_gci: u64,
    /// The data nodes alive when `latest_complete_gci` was recorded, bit
    /// `id` for node `id` (0: not recorded, a version 1 file or an
    /// initial start). A node missing from them failed earlier: its data
    /// ends before that GCI (docs/design/failures.md §9).
    pub members: u128,
}

impl SystemFile {
    /// What a node records at its initial start.
    pub fn initial(node_id: u16) -> SystemFile {
        SystemFile {
            node_id,
            start_count: 1,
            latest_complete_gci: 0,
            highest_started_gci: 0,
            members: 0,
        }
    }
}

/// One of the two copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// Bytes `0..512` of the file.
    A,
    /// Bytes `512..1024` of the file.
    B,
}

impl Slot {
    /// The other copy.
    pub fn other(self) -> Slot {
        match self {
            Slot::A => Slot::B,
            Slot::B => Slot::A,
        }
    }

    /// Where this copy starts in the file.
    pub fn file_offset(self) -> u64 {
        match self {
            Slot::A => 0,
            Slot::B => SLOT_BYTES as u64,
        }
    }

    /// The byte range of this copy in the file.
    pub fn range(self) -> std::ops::Range<usize> {
        let start = self.file_offset() as usize;
        start..start + SLOT_BYTES
    }
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Slot::A => f.write_str("A"),
            Slot::B => f.write_str("B"),
        }
    }
}

/// Why one copy cannot be used. Offsets are from the start of the copy;
/// [`SlotError::offset`] gives them, and [`SystemFileError`]'s message adds
/// the copy's place in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlotError {
    /// The copy is not `SLOT_BYTES` long (the file was cut short).
    WrongLength { length: usize },
    /// Every byte is zero: never written.
    Empty,
    /// The CRC32C stored at `offset` does not match bytes `0..offset`.
    Checksum {
        offset: usize,
        stored: u32,
        computed: u32,
    },
    /// The magic at byte 0 is not `TSSYSFIL`: not a system file.
    BadMagic,
    /// A format version this code does not read.
    UnsupportedVersion { version: u32 },
    /// The checksum matches but the field at `offset` breaks a rule of the
    /// format (a writer bug, or a file from a newer version).
    Invalid { offset: usize, reason: &'static str },
}

impl SlotError {
    /// The byte (from the start of the copy) where the problem was found.
    pub fn offset(&self) -> usize {
        match self {
            SlotError::WrongLength { length } => (*length).min(SLOT_BYTES),
            SlotError::Empty | SlotError::BadMagic => OFFSET_MAGIC,
            SlotError::Checksum { offset, .. } | SlotError::Invalid { offset, .. } => *offset,
            SlotError::UnsupportedVersion { .. } => OFFSET_VERSION,
        }
    }
}

impl fmt::Display for SlotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SlotError::WrongLength { length } => {
                write!(f, "copy is {length} bytes, expected {SLOT_BYTES}")
            }
            SlotError::Empty => f.write_str("copy is all zeros (never written)"),
            SlotError::Checksum {
                offset,
                stored,
                computed,
            } => write!(
                f,
                "checksum mismatch: CRC32C of bytes 0..{offset} is {computed:#010x}, \
                 stored {stored:#010x}"
            ),
            SlotError::BadMagic => f.write_str("bad magic (not a Tessera system file)"),
            SlotError::UnsupportedVersion { version } => {
                write!(
                    f,
                    "format version {version}, this build reads 1 and {FORMAT_VERSION}"
                )
            }
            SlotError::Invalid { reason, .. } => write!(f, "invalid field: {reason}"),
        }
    }
}

/// Why the system file as a whole cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SystemFileError {
    /// Both copies are all zeros: the node was never started with this
    /// file (an initial start is needed).
    Absent,
    /// Neither copy is usable.
    BothCopiesBad { a: SlotError, b: SlotError },
    /// Both copies are valid but contradict each other (same sequence with
    /// different contents, different node ids, or numbers that went
    /// backwards from the older copy to the newer): a writer bug or a file
    /// assembled from two nodes.
    CopiesDisagree { reason: &'static str },
}

fn file_offset(slot: Slot, error: &SlotError) -> u64 {
    slot.file_offset() + error.offset() as u64
}

impl fmt::Display for SystemFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SystemFileError::Absent => {
                f.write_str("system file is empty (both copies all zeros): start with --initial")
            }
            SystemFileError::BothCopiesBad { a, b } => write!(
                f,
                "system file unusable: copy A at byte {}: {a}; copy B at byte {}: {b}",
                file_offset(Slot::A, a),
                file_offset(Slot::B, b)
            ),
            SystemFileError::CopiesDisagree { reason } => {
                write!(f, "system file copies disagree: {reason}")
            }
        }
    }
}

impl std::error::Error for SystemFileError {}

/// The highest sequence number a copy may carry: half the u64 range, which
/// one update per global checkpoint never reaches, and far enough below
/// the maximum that the next numbers never overflow.
pub const MAX_SEQUENCE: u64 = u64::MAX / 2;

/// Encodes one copy holding `file` with `sequence`.
///
/// Asserts the invariants a reader checks, so a bad record never reaches
/// the disk (fail-fast on the writing side of the boundary).
pub fn encode_slot(file: &SystemFile, sequence: u64) -> [u8; SLOT_BYTES] {
    assert!(
        sequence > 0,
        "system file sequence numbers start at 1 (0 marks a slot never written)"
    );
    assert!(
        file.latest_complete_gci <= file.highest_started_gci,
        "complete GCI {} above highest started GCI {}: a GCI completes only after it starts",
        file.latest_complete_gci,
        file.highest_started_gci
    );
    let mut bytes = [0u8; SLOT_BYTES];
    bytes[OFFSET_MAGIC..OFFSET_MAGIC + 8].copy_from_slice(&MAGIC);
    put_u32(&mut bytes, OFFSET_VERSION, FORMAT_VERSION);
    bytes[OFFSET_NODE_ID..OFFSET_NODE_ID + 2].copy_from_slice(&file.node_id.to_le_bytes());
    put_u32(&mut bytes, OFFSET_START_COUNT, file.start_count);
    put_u64(&mut bytes, OFFSET_SEQUENCE, sequence);
    put_u64(
        &mut bytes,
        OFFSET_LATEST_COMPLETE_GCI,
        file.latest_complete_gci,
    );
    put_u64(
        &mut bytes,
        OFFSET_HIGHEST_STARTED_GCI,
        file.highest_started_gci,
    );
    bytes[OFFSET_MEMBERS..OFFSET_MEMBERS + 16].copy_from_slice(&file.members.to_le_bytes());
    let checksum = crc32c::crc32c(&bytes[..OFFSET_CHECKSUM]);
    put_u32(&mut bytes, OFFSET_CHECKSUM, checksum);
    debug_assert_eq!(
        decode_slot(&bytes),
        Ok((*file, sequence)),
        "encode and decode must agree"
    );
    bytes
}

/// Decodes one copy: the record and its sequence number.
pub fn decode_slot(bytes: &[u8]) -> Result<(SystemFile, u64), SlotError> {
    if bytes.len() != SLOT_BYTES {
        return Err(SlotError::WrongLength {
            length: bytes.len(),
        });
    }
    if bytes.iter().all(|&byte| byte == 0) {
        return Err(SlotError::Empty);
    }
    let stored = get_u32(bytes, OFFSET_CHECKSUM);
    let computed = crc32c::crc32c(&bytes[..OFFSET_CHECKSUM]);
    if stored != computed {
        return Err(SlotError::Checksum {
            offset: OFFSET_CHECKSUM,
            stored,
            computed,
        });
    }
    if bytes[OFFSET_MAGIC..OFFSET_MAGIC + 8] != MAGIC {
        return Err(SlotError::BadMagic);
    }
    let version = get_u32(bytes, OFFSET_VERSION);
    if version != FORMAT_VERSION && version != 1 {
        return Err(SlotError::UnsupportedVersion { version });
    }
    let padding = if version == 1 {
        OFFSET_MEMBERS
    } else {
        OFFSET_PADDING
    };
    if bytes[OFFSET_RESERVED_16..OFFSET_RESERVED_16 + 2] != [0, 0] {
        return Err(SlotError::Invalid {
            offset: OFFSET_RESERVED_16,
            reason: "reserved bytes 14..16 are not zero",
        });
    }
    if get_u32(bytes, OFFSET_RESERVED_32) != 0 {
        return Err(SlotError::Invalid {
            offset: OFFSET_RESERVED_32,
            reason: "reserved bytes 20..24 are not zero",
        });
    }
    if let Some(position) = bytes[padding..OFFSET_CHECKSUM]
        .iter()
        .position(|&byte| byte != 0)
    {
        return Err(SlotError::Invalid {
            offset: padding + position,
            reason: "padding after the fields is not zero",
        });
    }
    let sequence = get_u64(bytes, OFFSET_SEQUENCE);
    if sequence == 0 {
        return Err(SlotError::Invalid {
            offset: OFFSET_SEQUENCE,
            reason: "sequence number 0",
        });
    }
    if sequence > MAX_SEQUENCE {
        // No node gets there (one update per global checkpoint), so the
        // copy is damaged; refusing it here also keeps the next update's
        // number (`after`, `WritePlan::completed`) from overflowing.
        return Err(SlotError::Invalid {
            offset: OFFSET_SEQUENCE,
            reason: "sequence number beyond any a node writes",
        });
    }
    let file = SystemFile {
        node_id: u16::from_le_bytes([bytes[OFFSET_NODE_ID], bytes[OFFSET_NODE_ID + 1]]),
        start_count: get_u32(bytes, OFFSET_START_COUNT),
        latest_complete_gci: get_u64(bytes, OFFSET_LATEST_COMPLETE_GCI),
        highest_started_gci: get_u64(bytes, OFFSET_HIGHEST_STARTED_GCI),
        members: if version == 1 {
            0
        } else {
            let mut members = [0u8; 16];
            members.copy_from_slice(&bytes[OFFSET_MEMBERS..OFFSET_MEMBERS + 16]);
            u128::from_le_bytes(members)
        },
    };
    if file.latest_complete_gci > file.highest_started_gci {
        return Err(SlotError::Invalid {
            offset: OFFSET_LATEST_COMPLETE_GCI,
            reason: "latest complete GCI above highest started GCI",
        });
    }
    Ok((file, sequence))
}

/// The next update of the file: write `first` with [`WritePlan::encode`],
/// fsync, then write [`WritePlan::second`] with the same bytes, fsync. The
/// update is durable once the first fsync returns (a crash after it leaves
/// the new record in `first`); it is complete after the second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WritePlan {
    /// The copy to write first: the older or damaged one, so the copy
    /// holding the newest record survives a crash during this write.
    pub first: Slot,
    /// The sequence number both copies of the update carry.
    pub sequence: u64,
}

impl WritePlan {
    /// The plan for creating the file at an initial start (both slots are
    /// zero or about to be overwritten).
    pub fn initial() -> WritePlan {
        WritePlan {
            first: Slot::A,
            sequence: 1,
        }
    }

    /// The copy to write after `first` has been fsynced.
    pub fn second(&self) -> Slot {
        self.first.other()
    }

    /// The bytes of either copy for this update.
    pub fn encode(&self, file: &SystemFile) -> [u8; SLOT_BYTES] {
        encode_slot(file, self.sequence)
    }

    /// The plan for the update after this one, once both copies are
    /// written and fsynced (both then hold `sequence`; either may go first).
    pub fn completed(&self) -> WritePlan {
        WritePlan {
            first: Slot::A,
            sequence: self
                .sequence
                .checked_add(1)
                .expect("system file sequence overflows u64"),
        }
    }
}

/// What [`choose`] read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chosen {
    /// The newest valid record.
    pub file: SystemFile,
    /// Its sequence number.
    pub sequence: u64,
    /// The copy it came from.
    pub read_from: Slot,
    /// How to write the next update.
    pub next_write: WritePlan,
    /// A copy that could not be used, with why: normally the slot a crash
    /// tore mid-write, possibly a bit flip at rest. The caller logs it
    /// (naming the file and [`Chosen::damaged_file_offset`]); the next
    /// update rewrites it first.
    pub damaged: Option<(Slot, SlotError)>,
}

impl Chosen {
    /// Where in the file the damaged copy's problem was found.
    pub fn damaged_file_offset(&self) -> Option<u64> {
        self.damaged
            .as_ref()
            .map(|(slot, error)| file_offset(*slot, error))
    }
}

/// Reads the two copies (`copy_a` = file bytes `0..512`, `copy_b` =
/// `512..1024`; a short file gives short slices) and picks the newest valid
/// record, with the plan for the next write.
pub fn choose(copy_a: &[u8], copy_b: &[u8]) -> Result<Chosen, SystemFileError> {
    let a = decode_slot(copy_a);
    let b = decode_slot(copy_b);
    match (a, b) {
        (Ok((file_a, sequence_a)), Ok((file_b, sequence_b))) => {
            if file_a.node_id != file_b.node_id {
                return Err(SystemFileError::CopiesDisagree {
                    reason: "the copies name different nodes",
                });
            }
            if sequence_a == sequence_b {
                if file_a != file_b {
                    return Err(SystemFileError::CopiesDisagree {
                        reason: "same sequence number, different contents",
                    });
                }
                return Ok(Chosen {
                    file: file_a,
                    sequence: sequence_a,
                    read_from: Slot::A,
                    next_write: after(sequence_a, Slot::A),
                    damaged: None,
                });
            }
            let (newer, older, newer_slot) = if sequence_a > sequence_b {
                ((file_a, sequence_a), file_b, Slot::A)
            } else {
                ((file_b, sequence_b), file_a, Slot::B)
            };
            check_monotonic(&older, &newer.0)?;
            Ok(Chosen {
                file: newer.0,
                sequence: newer.1,
                read_from: newer_slot,
                // A crash between the two writes of the last update: the
                // older copy is rewritten first.
                next_write: after(newer.1, newer_slot.other()),
                damaged: None,
            })
        }
        (Ok((file, sequence)), Err(error)) => Ok(one_valid(file, sequence, Slot::A, error)),
        (Err(error), Ok((file, sequence))) => Ok(one_valid(file, sequence, Slot::B, error)),
        (Err(SlotError::Empty), Err(SlotError::Empty)) => Err(SystemFileError::Absent),
        (Err(a), Err(b)) => Err(SystemFileError::BothCopiesBad { a, b }),
    }
}

fn after(sequence: u64, first: Slot) -> WritePlan {
    WritePlan {
        first,
        sequence: sequence
            .checked_add(1)
            .expect("system file sequence overflows u64"),
    }
}

fn one_valid(file: SystemFile, sequence: u64, slot: Slot, error: SlotError) -> Chosen {
    Chosen {
        file,
        sequence,
        read_from: slot,
        next_write: after(sequence, slot.other()),
        damaged: Some((slot.other(), error)),
    }
}

/// Every field of the record only grows from one update to the next.
fn check_monotonic(older: &SystemFile, newer: &SystemFile) -> Result<(), SystemFileError> {
    if newer.latest_complete_gci < older.latest_complete_gci {
        return Err(SystemFileError::CopiesDisagree {
            reason: "the newer copy has a lower complete GCI",
        });
    }
    if newer.highest_started_gci < older.highest_started_gci {
        return Err(SystemFileError::CopiesDisagree {
            reason: "the newer copy has a lower highest started GCI",
        });
    }
    if newer.start_count < older.start_count {
        return Err(SystemFileError::CopiesDisagree {
            reason: "the newer copy has a lower start count",
        });
    }
    Ok(())
}

fn put_u32(bytes: &mut [u8], offset: usize, value: u32) {
    bytes[offset..offset + 4].copy_from_slice(&value.to_le_bytes());
}

fn put_u64(bytes: &mut [u8], offset: usize, value: u64) {
    bytes[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
}

fn get_u32(bytes: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes(bytes[offset..offset + 4].try_into().expect("4 bytes"))
}

fn get_u64(bytes: &[u8], offset: usize) -> u64 {
    u64::from_le_bytes(bytes[offset..offset + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use stdx::mix::XorShift;

    fn sample() -> SystemFile {
        SystemFile {
            node_id: 3,
            start_count: 7,
            latest_complete_gci: 0x0000_0012_0000_0000,
            highest_started_gci: 0x0000_0013_0000_0000,
            members: 0b1100,
        }
    }

    fn choose_file(file: &[u8]) -> Result<Chosen, SystemFileError> {
        let a = &file[..SLOT_BYTES.min(file.len())];
        let b = &file[SLOT_BYTES.min(file.len())..FILE_BYTES.min(file.len())];
        choose(a, b)
    }

    #[test]
    fn round_trip() {
        let file = sample();
        let bytes = encode_slot(&file, 42);
        assert_eq!(decode_slot(&bytes), Ok((file, 42)));
        assert_eq!(&bytes[..8], b"TSSYSFIL");
        assert_eq!(
            get_u64(&bytes, OFFSET_LATEST_COMPLETE_GCI),
            file.latest_complete_gci
        );
        let extremes = SystemFile {
            node_id: u16::MAX,
            start_count: u32::MAX,
            latest_complete_gci: u64::MAX,
            highest_started_gci: u64::MAX,
            members: u128::MAX,
        };
        assert_eq!(
            decode_slot(&encode_slot(&extremes, MAX_SEQUENCE)),
            Ok((extremes, MAX_SEQUENCE))
        );
    }

    #[test]
    fn a_version_1_copy_reads_with_no_members_recorded() {
        let file = sample();
        let mut bytes = encode_slot(&file, 5);
        // Version 1 as it was written: no members field, zero padding.
        put_u32(&mut bytes, OFFSET_VERSION, 1);
        bytes[OFFSET_MEMBERS..OFFSET_PADDING].fill(0);
        let checksum = crc32c::crc32c(&bytes[..OFFSET_CHECKSUM]);
        put_u32(&mut bytes, OFFSET_CHECKSUM, checksum);
        assert_eq!(
            decode_slot(&bytes),
            Ok((SystemFile { members: 0, ..file }, 5))
        );
        // Version 1 has nothing in those bytes.
        bytes[OFFSET_MEMBERS] = 1;
        let checksum = crc32c::crc32c(&bytes[..OFFSET_CHECKSUM]);
        put_u32(&mut bytes, OFFSET_CHECKSUM, checksum);
        assert!(matches!(
            decode_slot(&bytes),
            Err(SlotError::Invalid {
                offset: OFFSET_MEMBERS,
                ..
            })
        ));
    }

    #[test]
    fn a_sequence_number_at_its_maximum_is_damage_not_a_panic() {
        let file = sample();
        for sequence in [MAX_SEQUENCE + 1, u64::MAX - 1, u64::MAX] {
            // A copy whose checksum holds (written so, or damaged before
            // its checksum was computed) with such a number.
            let mut damaged = encode_slot(&file, 9);
            put_u64(&mut damaged, OFFSET_SEQUENCE, sequence);
            let checksum = crc32c::crc32c(&damaged[..OFFSET_CHECKSUM]);
            put_u32(&mut damaged, OFFSET_CHECKSUM, checksum);
            assert_eq!(
                decode_slot(&damaged),
                Err(SlotError::Invalid {
                    offset: OFFSET_SEQUENCE,
                    reason: "sequence number beyond any a node writes",
                })
            );
            // Both copies so: the file is unusable, with an error.
            assert!(matches!(
                choose(&damaged, &damaged),
                Err(SystemFileError::BothCopiesBad { .. })
            ));
            // Beside a good copy: the good one is used and the other
            // rewritten first.
            let chosen = choose(&encode_slot(&file, 9), &damaged).expect("one good copy");
            assert_eq!((chosen.sequence, chosen.next_write.first), (9, Slot::B));
        }
    }

    #[test]
    fn every_single_bit_flip_is_detected_with_an_offset() {
        let bytes = encode_slot(&sample(), 5);
        for bit in 0..SLOT_BYTES * 8 {
            let mut flipped = bytes;
            flipped[bit / 8] ^= 1 << (bit % 8);
            let error = decode_slot(&flipped).expect_err("a flipped bit must be detected");
            assert!(
                error.offset() < SLOT_BYTES,
                "offset inside the copy: {error:?}"
            );
            // Alone in slot B, with slot A intact: the good copy is used and
            // the damage is reported at a file offset inside slot B.
            let chosen = choose(&bytes, &flipped).expect("one good copy suffices");
            assert_eq!(chosen.file, sample());
            assert_eq!(chosen.read_from, Slot::A);
            assert_eq!(
                chosen.next_write.first,
                Slot::B,
                "the damaged copy is rewritten first"
            );
            let offset = chosen.damaged_file_offset().expect("damage reported");
            assert!(Slot::B.range().contains(&(offset as usize)));
        }
    }

    #[test]
    fn both_copies_bad_names_each_copy_and_offset() {
        let mut a = encode_slot(&sample(), 5);
        let mut b = a;
        a[100] ^= 1;
        b[OFFSET_SEQUENCE] ^= 0x80;
        let error = choose(&a, &b).expect_err("no usable copy");
        let message = error.to_string();
        assert!(message.contains("copy A at byte 508"), "{message}");
        assert!(message.contains("copy B at byte 1020"), "{message}");
        assert!(message.contains("checksum mismatch"), "{message}");
    }

    #[test]
    fn empty_and_short_files() {
        let zeros = [0u8; SLOT_BYTES];
        assert_eq!(choose(&zeros, &zeros), Err(SystemFileError::Absent));
        assert_eq!(
            choose(&[], &[]),
            Err(SystemFileError::BothCopiesBad {
                a: SlotError::WrongLength { length: 0 },
                b: SlotError::WrongLength { length: 0 },
            })
        );
        // A crash during the very first write, after copy A was fsynced.
        let a = WritePlan::initial().encode(&SystemFile::initial(2));
        let chosen = choose(&a, &zeros).expect("copy A is good");
        assert_eq!(chosen.file, SystemFile::initial(2));
        assert_eq!(chosen.damaged, Some((Slot::B, SlotError::Empty)));
        assert_eq!(
            chosen.next_write,
            WritePlan {
                first: Slot::B,
                sequence: 2
            }
        );
        // The file cut inside copy B.
        let chosen = choose(&a, &a[..100]).expect("copy A is good");
        assert_eq!(
            chosen.damaged,
            Some((Slot::B, SlotError::WrongLength { length: 100 }))
        );
    }

    #[test]
    fn disagreeing_copies_stop_the_node() {
        let file = sample();
        let other_node = SystemFile { node_id: 4, ..file };
        assert!(matches!(
            choose(&encode_slot(&file, 2), &encode_slot(&other_node, 3)),
            Err(SystemFileError::CopiesDisagree { .. })
        ));
        let later = SystemFile {
            latest_complete_gci: file.latest_complete_gci + 1,
            ..file
        };
        assert!(matches!(
            choose(&encode_slot(&file, 2), &encode_slot(&later, 2)),
            Err(SystemFileError::CopiesDisagree { .. })
        ));
        assert!(matches!(
            choose(&encode_slot(&later, 2), &encode_slot(&file, 3)),
            Err(SystemFileError::CopiesDisagree { .. })
        ));
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = XorShift::new(11);
        let mut accepted = 0;
        for round in 0..20_000 {
            let length = if round % 4 == 0 {
                rng.below(FILE_BYTES as u64 + 1) as usize
            } else {
                FILE_BYTES
            };
            let mut bytes: Vec<u8> = (0..length).map(|_| rng.next_u64() as u8).collect();
            if round % 3 == 0 && length >= SLOT_BYTES {
                // Mostly valid: a real copy with a few random bytes.
                bytes[..SLOT_BYTES].copy_from_slice(&encode_slot(&sample(), round + 1));
                for _ in 0..rng.below(3) {
                    let at = rng.below(length as u64) as usize;
                    bytes[at] = rng.next_u64() as u8;
                }
            }
            if let Ok(chosen) = choose_file(&bytes) {
                accepted += 1;
                assert_eq!(chosen.file, sample());
            }
        }
        assert!(
            accepted > 0,
            "the mostly-valid inputs are sometimes accepted"
        );
    }

    /// A disk with the two copies, where a crash during a write leaves the
    /// slot being written torn: a prefix of the new bytes over the old ones,
    /// or garbage.
    struct Disk {
        file: Vec<u8>,
    }

    impl Disk {
        fn write(&mut self, slot: Slot, bytes: &[u8; SLOT_BYTES]) {
            self.file[slot.range()].copy_from_slice(bytes);
        }

        fn tear(&mut self, slot: Slot, bytes: &[u8; SLOT_BYTES], rng: &mut XorShift) {
            let range = slot.range();
            match rng.below(3) {
                0 => {
                    let cut = rng.below(SLOT_BYTES as u64) as usize;
                    self.file[range.start..range.start + cut].copy_from_slice(&bytes[..cut]);
                }
                1 => {
                    for byte in &mut self.file[range] {
                        *byte = rng.next_u64() as u8;
                    }
                }
                _ => {
                    // Sectors reordered: the tail landed, the head did not.
                    let cut = 1 + rng.below(SLOT_BYTES as u64 - 1) as usize;
                    self.file[range.start + cut..range.end].copy_from_slice(&bytes[cut..]);
                }
            }
        }
    }

    #[test]
    fn two_copy_protocol_survives_crashes_at_every_step() {
        let mut rng = XorShift::new(2024);
        let node = 5;
        let mut disk = Disk {
            file: vec![0; FILE_BYTES],
        };
        assert_eq!(choose_file(&disk.file), Err(SystemFileError::Absent));
        // Initial start.
        let mut durable = SystemFile::initial(node);
        let plan = WritePlan::initial();
        disk.write(plan.first, &plan.encode(&durable));
        disk.write(plan.second(), &plan.encode(&durable));
        let mut plan = plan.completed();
        let mut crashes = 0;
        for step in 0..5_000u64 {
            let mut next = durable;
            next.highest_started_gci += 1 + rng.below(3);
            next.latest_complete_gci = next.highest_started_gci - rng.below(2);
            next.latest_complete_gci = next.latest_complete_gci.max(durable.latest_complete_gci);
            if rng.below(50) == 0 {
                next.start_count += 1;
            }
            let bytes = plan.encode(&next);
            match rng.below(8) {
                // Crash during the first write: the previous record survives.
                0 => {
                    disk.tear(plan.first, &bytes, &mut rng);
                    if disk.file[plan.first.range()] == bytes[..] {
                        // Every byte of the torn write happened to land.
                        durable = next;
                    }
                    crashes += 1;
                }
                // Crash during the second write: the new record survives.
                1 => {
                    disk.write(plan.first, &bytes);
                    disk.tear(plan.second(), &bytes, &mut rng);
                    durable = next;
                    crashes += 1;
                }
                // Crash between the two writes.
                2 => {
                    disk.write(plan.first, &bytes);
                    durable = next;
                    crashes += 1;
                }
                // Both writes done; sometimes a bit rots at rest afterwards.
                _ => {
                    disk.write(plan.first, &bytes);
                    disk.write(plan.second(), &bytes);
                    durable = next;
                    plan = plan.completed();
                    if rng.below(4) == 0 {
                        let bit = rng.below(FILE_BYTES as u64 * 8) as usize;
                        disk.file[bit / 8] ^= 1 << (bit % 8);
                        crashes += 1;
                    } else {
                        continue;
                    }
                }
            }
            // Restart: read back and carry on with the plan `choose` gives.
            let chosen =
                choose_file(&disk.file).unwrap_or_else(|error| panic!("step {step}: {error}"));
            assert_eq!(
                chosen.file, durable,
                "step {step}: the last durable record is read back"
            );
            plan = chosen.next_write;
        }
        assert!(crashes > 1_000);
    }
}
