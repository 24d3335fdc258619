//! schema_file: the schema file of a data node
//! (docs/design/durability.md §5), which lets the tables survive a
//! whole-cluster restart. Every dict keeps its own copy and rewrites it
//! whole after each create and drop.
//!
//! One file holds the whole schema: the schema version, the last version of
//! every table id (so a table id reused after a restart still gets a new
//! version), and every table with its definition and partition map. A
//! header carries a magic, the format version, the file's length and a
//! CRC32C of the whole file, so damage anywhere is found and reported with
//! its byte offset ([`SchemaFileError::offset`]); decoding never panics.
//!
//! The definition and the map of a table are opaque bytes here: they are
//! the encodings the wire already uses (`signal::schema::TableDef::encode`
//! and `signal::codec::encode_partition_map`), produced and checked by
//! dict. This keeps `storage` free of the signal vocabulary (it depends on
//! `stdx` only) while the checksum still covers every byte.
//!
//! The file is replaced atomically by its writer: write the whole new file
//! under a temporary name, fsync it, rename it over the old one (the file
//! service fsyncs the directory after a rename). A crash leaves either the
//! old file or the new one, never a mix. Pure logic over bytes: the caller
//! owns the files, the writes and the fsyncs. The format, byte by byte, and
//! the replacement protocol are in `docs/schema-file-format.md`.

use std::fmt;

/// The first eight bytes of the file.
pub const MAGIC: [u8; 8] = *b"TSSCHEMA";
/// The format this code writes and the only one it reads.
pub const FORMAT_VERSION: u32 = 1;
/// Bytes of the fixed header; the id-version table follows it.
pub const HEADER_BYTES: usize = 40;
/// Bytes of a table entry before its definition (id, version, definition
/// length) plus the map length between definition and map.
pub const ENTRY_OVERHEAD_BYTES: usize = 16;

const OFFSET_MAGIC: usize = 0;
const OFFSET_VERSION: usize = 8;
const OFFSET_CHECKSUM: usize = 12;
const OFFSET_LENGTH: usize = 16;
const OFFSET_SCHEMA_VERSION: usize = 24;
const OFFSET_ID_COUNT: usize = 28;
const OFFSET_TABLE_COUNT: usize = 32;
const OFFSET_RESERVED: usize = 36;

const _: () = assert!(
    OFFSET_RESERVED + 4 == HEADER_BYTES,
    "the header's fields fill it exactly"
);

/// The whole schema as the file stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schema {
    /// The schema version after the last create or drop (at least 1).
    pub schema_version: u32,
    /// Index = table id: the version that id last had, 0 if never used. A
    /// dropped table's id keeps its entry, so a table created later with
    /// that id gets a higher version.
    pub id_versions: Vec<u32>,
    /// Every table, in increasing id order.
    pub tables: Vec<StoredTable>,
}

/// One table as the file stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredTable {
    /// Table id (also inside `definition`; dict checks they agree).
    pub id: u32,
    /// Table version (also inside `definition`).
    pub version: u32,
    /// The definition, as `TableDef::encode` writes it.
    pub definition: Vec<u8>,
    /// The partition map, as `codec::encode_partition_map` writes it.
    pub map: Vec<u8>,
}

impl Schema {
    /// Where table `index` (its position in [`Schema::tables`]) starts in
    /// the encoded file, for messages about a table whose bytes dict
    /// cannot decode.
    pub fn table_offset(&self, index: usize) -> usize {
        assert!(
            index < self.tables.len(),
            "table {index} of a schema with {} tables",
            self.tables.len()
        );
        HEADER_BYTES
            + 4 * self.id_versions.len()
            + self.tables[..index]
                .iter()
                .map(StoredTable::encoded_len)
                .sum::<usize>()
    }

    /// Bytes of the encoded file.
    pub fn encoded_len(&self) -> usize {
        HEADER_BYTES
            + 4 * self.id_versions.len()
            + self
                .tables
                .iter()
                .map(StoredTable::encoded_len)
                .sum::<usize>()
    }
}

impl StoredTable {
    fn encoded_len(&self) -> usize {
        ENTRY_OVERHEAD_BYTES + self.definition.len() + self.map.len()
    }
}

/// Why the file cannot be used. Every case has the byte offset where it
/// was found ([`SchemaFileError::offset`]); the message does not repeat it,
/// so the caller can name the file and the offset in one place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SchemaFileError {
    /// Shorter than the fixed header (the file was cut short).
    TooShort {
        /// The file's length.
        length: usize,
    },
    /// The magic at byte 0 is not `TSSCHEMA`: not a schema file.
    BadMagic,
    /// A format version this code does not read.
    UnsupportedVersion {
        /// The version found.
        version: u32,
    },
    /// The length recorded at byte 16 is not the file's length (cut short,
    /// or bytes appended).
    LengthMismatch {
        /// What the header says.
        stored: u64,
        /// What the file holds.
        actual: usize,
    },
    /// The CRC32C stored at byte 12 does not match the file.
    Checksum {
        /// Stored in the header.
        stored: u32,
        /// Computed over the file.
        computed: u32,
    },
    /// The checksum matches but the field at `offset` breaks a rule of the
    /// format (a writer bug, or a file from a newer version).
    Invalid {
        /// Where the field starts.
        offset: usize,
        /// Which rule.
        reason: &'static str,
    },
}

impl SchemaFileError {
    /// The byte of the file where the problem was found.
    pub fn offset(&self) -> usize {
        match self {
            SchemaFileError::TooShort { length } => *length,
            SchemaFileError::BadMagic => OFFSET_MAGIC,
            SchemaFileError::UnsupportedVersion { .. } => OFFSET_VERSION,
            SchemaFileError::LengthMismatch { .. } => OFFSET_LENGTH,
            SchemaFileError::Checksum { .. } => OFFSET_CHECKSUM,
            SchemaFileError::Invalid { offset, .. } => *offset,
        }
    }
}

impl fmt::Display for SchemaFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemaFileError::TooShort { length } => write!(
                f,
                "file is {length} bytes, shorter than the {HEADER_BYTES}-byte header"
            ),
            SchemaFileError::BadMagic => f.write_str("bad magic (not a Tessera schema file)"),
            SchemaFileError::UnsupportedVersion { version } => write!(
                f,
                "format version {version}, this build reads {FORMAT_VERSION}"
            ),
            SchemaFileError::LengthMismatch { stored, actual } => write!(
                f,
                "file is {actual} bytes, its header says {stored} (cut short or appended to)"
            ),
            SchemaFileError::Checksum { stored, computed } => write!(
                f,
                "checksum mismatch: CRC32C of the file is {computed:#010x}, stored {stored:#010x}"
            ),
            SchemaFileError::Invalid { reason, .. } => write!(f, "invalid field: {reason}"),
        }
    }
}

impl std::error::Error for SchemaFileError {}

/// Encodes `schema` as a whole file.
///
/// Asserts the rules a reader checks, so a bad file never reaches the disk
/// (fail-fast on the writing side of the boundary).
pub fn encode(schema: &Schema) -> Vec<u8> {
    assert!(
        schema.schema_version >= 1,
        "schema versions start at 1 (0 would read back as invalid)"
    );
    let mut previous_id = None;
    for table in &schema.tables {
        assert!(
            previous_id.is_none_or(|previous| table.id > previous),
            "tables are stored in increasing id order, each id once (table {} after {:?})",
            table.id,
            previous_id
        );
        previous_id = Some(table.id);
        assert_eq!(
            schema.id_versions.get(table.id as usize).copied(),
            Some(table.version),
            "table {} has version {}, which must be its id's last version",
            table.id,
            table.version
        );
        assert!(table.version >= 1, "table versions start at 1");
    }
    let length = schema.encoded_len();
    let mut bytes = Vec::with_capacity(length);
    bytes.extend_from_slice(&MAGIC);
    bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes()); // checksum, filled in below
    bytes.extend_from_slice(&(length as u64).to_le_bytes());
    bytes.extend_from_slice(&schema.schema_version.to_le_bytes());
    bytes.extend_from_slice(&count_u32(schema.id_versions.len(), "table ids").to_le_bytes());
    bytes.extend_from_slice(&count_u32(schema.tables.len(), "tables").to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes()); // reserved
    for version in &schema.id_versions {
        bytes.extend_from_slice(&version.to_le_bytes());
    }
    for table in &schema.tables {
        bytes.extend_from_slice(&table.id.to_le_bytes());
        bytes.extend_from_slice(&table.version.to_le_bytes());
        let definition_length = count_u32(table.definition.len(), "definition bytes");
        bytes.extend_from_slice(&definition_length.to_le_bytes());
        bytes.extend_from_slice(&table.definition);
        bytes.extend_from_slice(&count_u32(table.map.len(), "map bytes").to_le_bytes());
        bytes.extend_from_slice(&table.map);
    }
    assert_eq!(
        bytes.len(),
        length,
        "encoded_len must match what is written"
    );
    let checksum = checksum(&bytes);
    bytes[OFFSET_CHECKSUM..OFFSET_CHECKSUM + 4].copy_from_slice(&checksum.to_le_bytes());
    debug_assert_eq!(
        decode(&bytes).as_ref(),
        Ok(schema),
        "encode and decode must agree"
    );
    bytes
}

/// Decodes and checks a whole file. Never panics: any damage is an error
/// naming its offset. Checks, in order: the header's length, magic,
/// version, recorded length and checksum, then every field's rules (see
/// `docs/schema-file-format.md`).
pub fn decode(bytes: &[u8]) -> Result<Schema, SchemaFileError> {
    if bytes.len() < HEADER_BYTES {
        return Err(SchemaFileError::TooShort {
            length: bytes.len(),
        });
    }
    let mut reader = Reader { bytes, position: 0 };
    if bytes[OFFSET_MAGIC..OFFSET_MAGIC + 8] != MAGIC {
        return Err(SchemaFileError::BadMagic);
    }
    reader.position = OFFSET_VERSION;
    let version = reader.u32()?;
    if version != FORMAT_VERSION {
        return Err(SchemaFileError::UnsupportedVersion { version });
    }
    let stored_checksum = reader.u32()?;
    let stored_length = reader.u64()?;
    if stored_length != bytes.len() as u64 {
        return Err(SchemaFileError::LengthMismatch {
            stored: stored_length,
            actual: bytes.len(),
        });
    }
    let computed = checksum(bytes);
    if stored_checksum != computed {
        return Err(SchemaFileError::Checksum {
            stored: stored_checksum,
            computed,
        });
    }
    let schema_version = reader.u32()?;
    if schema_version == 0 {
        return Err(invalid(OFFSET_SCHEMA_VERSION, "schema version 0"));
    }
    let id_count = reader.u32()? as usize;
    let table_count = reader.u32()? as usize;
    if reader.u32()? != 0 {
        return Err(invalid(
            OFFSET_RESERVED,
            "reserved bytes 36..40 are not zero",
        ));
    }
    // Counts are checked against the bytes left before anything is
    // allocated for them, so a huge count cannot exhaust memory.
    if id_count > reader.remaining() / 4 {
        return Err(invalid(
            OFFSET_ID_COUNT,
            "the id-version table runs past the end of the file",
        ));
    }
    if table_count > reader.remaining().saturating_sub(4 * id_count) / ENTRY_OVERHEAD_BYTES {
        return Err(invalid(
            OFFSET_TABLE_COUNT,
            "more tables than the file has room for",
        ));
    }
    let mut id_versions = Vec::with_capacity(id_count);
    for _ in 0..id_count {
        id_versions.push(reader.u32()?);
    }
    let mut tables = Vec::with_capacity(table_count);
    let mut previous_id: Option<u32> = None;
    for _ in 0..table_count {
        let id_offset = reader.position;
        let id = reader.u32()?;
        if previous_id.is_some_and(|previous| id <= previous) {
            return Err(invalid(
                id_offset,
                "table ids are not in increasing order (or one is stored twice)",
            ));
        }
        previous_id = Some(id);
        let version_offset = reader.position;
        let version = reader.u32()?;
        match id_versions.get(id as usize) {
            None => return Err(invalid(id_offset, "table id beyond the id-version table")),
            Some(_) if version == 0 => {
                return Err(invalid(version_offset, "table version 0"));
            }
            Some(&last) if last != version => {
                return Err(invalid(
                    version_offset,
                    "table version differs from its id's last version",
                ));
            }
            Some(_) => {}
        }
        let definition = reader.bytes32("the table definition runs past the end of the file")?;
        let map = reader.bytes32("the partition map runs past the end of the file")?;
        tables.push(StoredTable {
            id,
            version,
            definition: definition.to_vec(),
            map: map.to_vec(),
        });
    }
    if reader.remaining() != 0 {
        return Err(invalid(reader.position, "bytes after the last table"));
    }
    Ok(Schema {
        schema_version,
        id_versions,
        tables,
    })
}

/// CRC32C of the whole file with the checksum field (bytes 12..16) read
/// as zero, so the checksum covers every other byte, header included.
fn checksum(bytes: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&bytes[..OFFSET_CHECKSUM]);
    let crc = crc32c::crc32c_append(crc, &[0; 4]);
    crc32c::crc32c_append(crc, &bytes[OFFSET_CHECKSUM + 4..])
}

fn invalid(offset: usize, reason: &'static str) -> SchemaFileError {
    SchemaFileError::Invalid { offset, reason }
}

/// `count` as the u32 the file stores; a schema too large for the format
/// is a bug of the writer (dict never builds one).
fn count_u32(count: usize, what: &str) -> u32 {
    u32::try_from(count).unwrap_or_else(|_| panic!("{count} {what} do not fit the schema file"))
}

/// Reads little-endian fields, turning every overrun into an error at the
/// field's offset.
struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.position
    }

    fn take(&mut self, count: usize, reason: &'static str) -> Result<&'a [u8], SchemaFileError> {
        if count > self.remaining() {
            return Err(invalid(self.position, reason));
        }
        let taken = &self.bytes[self.position..self.position + count];
        self.position += count;
        Ok(taken)
    }

    fn u32(&mut self) -> Result<u32, SchemaFileError> {
        let bytes = self.take(4, "a field runs past the end of the file")?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    fn u64(&mut self) -> Result<u64, SchemaFileError> {
        let low = u64::from(self.u32()?);
        let high = u64::from(self.u32()?);
        Ok((high << 32) | low)
    }

    /// A u32 length and that many bytes; `reason` when they overrun.
    fn bytes32(&mut self, reason: &'static str) -> Result<&'a [u8], SchemaFileError> {
        let length_offset = self.position;
        let length = self.u32()? as usize;
        self.take(length, reason)
            .map_err(|_| invalid(length_offset, reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stdx::mix::XorShift;

    /// Three tables, ids 0, 2 and 3 (id 1 was dropped at version 4).
    fn sample() -> Schema {
        let table = |id: u32, version: u32, definition: &[u8], map_len: usize| StoredTable {
            id,
            version,
            definition: definition.to_vec(),
            map: (0..map_len)
                .map(|index| (index * 7 + id as usize) as u8)
                .collect(),
        };
        Schema {
            schema_version: 12,
            id_versions: vec![2, 4, 1, 1],
            tables: vec![
                table(0, 2, b"definition of t0", 300),
                table(2, 1, b"t2", 5),
                table(3, 1, b"", 0),
            ],
        }
    }

    #[test]
    fn round_trip_and_layout() {
        let schema = sample();
        let bytes = encode(&schema);
        assert_eq!(bytes.len(), schema.encoded_len());
        assert_eq!(&bytes[..8], b"TSSCHEMA");
        assert_eq!(bytes[8..12], 1u32.to_le_bytes());
        assert_eq!(bytes[16..24], (bytes.len() as u64).to_le_bytes());
        assert_eq!(bytes[24..28], 12u32.to_le_bytes());
        assert_eq!(bytes[28..32], 4u32.to_le_bytes(), "id count");
        assert_eq!(bytes[32..36], 3u32.to_le_bytes(), "table count");
        assert_eq!(bytes[40..44], 2u32.to_le_bytes(), "id 0's last version");
        let second = schema.table_offset(1);
        assert_eq!(second, 40 + 16 + (16 + 16 + 300));
        assert_eq!(bytes[second..second + 4], 2u32.to_le_bytes(), "id of t2");
        assert_eq!(&bytes[second + 12..second + 14], b"t2");
        assert_eq!(decode(&bytes), Ok(schema));

        let empty = Schema {
            schema_version: 1,
            id_versions: Vec::new(),
            tables: Vec::new(),
        };
        let bytes = encode(&empty);
        assert_eq!(bytes.len(), HEADER_BYTES);
        assert_eq!(decode(&bytes), Ok(empty));
    }

    #[test]
    fn every_truncation_is_an_error() {
        let bytes = encode(&sample());
        for length in 0..bytes.len() {
            let error = decode(&bytes[..length]).expect_err("a cut file must be refused");
            assert!(
                error.offset() <= length,
                "cut at {length}: {error:?} points past the end"
            );
            let expected_kind = if length < HEADER_BYTES {
                matches!(error, SchemaFileError::TooShort { .. })
            } else {
                matches!(error, SchemaFileError::LengthMismatch { .. })
            };
            assert!(expected_kind, "cut at {length}: {error:?}");
        }
        let mut appended = bytes.clone();
        appended.push(0);
        assert!(matches!(
            decode(&appended),
            Err(SchemaFileError::LengthMismatch { .. })
        ));
    }

    #[test]
    fn every_single_bit_flip_is_an_error_with_an_offset() {
        let bytes = encode(&sample());
        for bit in 0..bytes.len() * 8 {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            let error = decode(&flipped).expect_err("a flipped bit must be detected");
            assert!(error.offset() < bytes.len(), "bit {bit}: {error:?}");
            let message = error.to_string();
            assert!(!message.is_empty());
        }
    }

    #[test]
    fn damage_names_the_field_that_was_hit() {
        let bytes = encode(&sample());
        let mut magic = bytes.clone();
        magic[3] = b'x';
        assert_eq!(decode(&magic), Err(SchemaFileError::BadMagic));
        let mut version = bytes.clone();
        version[OFFSET_VERSION] = 2;
        assert_eq!(
            decode(&version),
            Err(SchemaFileError::UnsupportedVersion { version: 2 })
        );
        let mut body = bytes.clone();
        body[200] ^= 0x10;
        let error = decode(&body).expect_err("damage in a map");
        assert!(
            matches!(error, SchemaFileError::Checksum { .. }),
            "{error:?}"
        );
        assert_eq!(error.offset(), 12);
        assert!(error.to_string().contains("checksum mismatch"), "{error}");
    }

    /// A well-checksummed file whose fields break a rule (a writer bug, or
    /// a newer writer): refused with the field's offset.
    #[test]
    fn invalid_fields_behind_a_good_checksum_are_refused() {
        let reseal = |mut bytes: Vec<u8>| {
            let length = bytes.len() as u64;
            bytes[OFFSET_LENGTH..OFFSET_LENGTH + 8].copy_from_slice(&length.to_le_bytes());
            let crc = checksum(&bytes);
            bytes[OFFSET_CHECKSUM..OFFSET_CHECKSUM + 4].copy_from_slice(&crc.to_le_bytes());
            bytes
        };
        let bytes = encode(&sample());
        let second = sample().table_offset(1);
        let third = sample().table_offset(2);
        let cases: Vec<(Vec<u8>, usize, &str)> = vec![
            (
                {
                    let mut b = bytes.clone();
                    b[OFFSET_SCHEMA_VERSION..OFFSET_SCHEMA_VERSION + 4].fill(0);
                    b
                },
                OFFSET_SCHEMA_VERSION,
                "schema version 0",
            ),
            (
                {
                    let mut b = bytes.clone();
                    b[OFFSET_RESERVED] = 1;
                    b
                },
                OFFSET_RESERVED,
                "reserved",
            ),
            (
                {
                    let mut b = bytes.clone();
                    b[OFFSET_ID_COUNT..OFFSET_ID_COUNT + 4]
                        .copy_from_slice(&u32::MAX.to_le_bytes());
                    b
                },
                OFFSET_ID_COUNT,
                "id-version table",
            ),
            (
                {
                    let mut b = bytes.clone();
                    b[OFFSET_TABLE_COUNT..OFFSET_TABLE_COUNT + 4]
                        .copy_from_slice(&u32::MAX.to_le_bytes());
                    b
                },
                OFFSET_TABLE_COUNT,
                "more tables",
            ),
            (
                {
                    let mut b = bytes.clone();
                    b[third..third + 4].copy_from_slice(&2u32.to_le_bytes());
                    b
                },
                third,
                "increasing order",
            ),
            (
                {
                    let mut b = bytes.clone();
                    b[third..third + 4].copy_from_slice(&9u32.to_le_bytes());
                    b
                },
                third,
                "beyond the id-version table",
            ),
            (
                {
                    let mut b = bytes.clone();
                    b[second + 4..second + 8].copy_from_slice(&7u32.to_le_bytes());
                    b
                },
                second + 4,
                "last version",
            ),
            (
                {
                    let mut b = bytes.clone();
                    b[second + 8..second + 12].copy_from_slice(&100_000u32.to_le_bytes());
                    b
                },
                second + 8,
                "definition runs past",
            ),
            (
                {
                    let mut b = bytes.clone();
                    b.extend_from_slice(&[0; 3]);
                    b
                },
                bytes.len(),
                "bytes after the last table",
            ),
        ];
        for (damaged, offset, reason) in cases {
            let error = decode(&reseal(damaged)).expect_err(reason);
            assert_eq!(error.offset(), offset, "{reason}: {error:?}");
            assert!(error.to_string().contains(reason), "{reason}: {error}");
        }
    }

    #[test]
    fn random_damage_never_panics() {
        let mut rng = XorShift::new(4);
        let good = encode(&sample());
        let mut accepted = 0;
        for round in 0..20_000u32 {
            let mut bytes = good.clone();
            match round % 4 {
                // A few random bytes overwritten.
                0 => {
                    for _ in 0..1 + rng.below(4) {
                        let at = rng.below(bytes.len() as u64) as usize;
                        bytes[at] = rng.next_u64() as u8;
                    }
                }
                // Cut, then random bytes appended.
                1 => {
                    bytes.truncate(rng.below(bytes.len() as u64) as usize);
                    for _ in 0..rng.below(64) {
                        bytes.push(rng.next_u64() as u8);
                    }
                }
                // Pure noise of any length.
                2 => {
                    let length = rng.below(2 * good.len() as u64) as usize;
                    bytes = (0..length).map(|_| rng.next_u64() as u8).collect();
                }
                // Untouched.
                _ => {}
            }
            match decode(&bytes) {
                Ok(schema) => {
                    accepted += 1;
                    assert_eq!(schema, sample(), "only the true file is accepted");
                }
                Err(error) => assert!(error.offset() <= bytes.len(), "{error:?}"),
            }
        }
        assert!(accepted >= 5_000, "the untouched files decode");
    }

    #[test]
    #[should_panic(expected = "increasing id order")]
    fn encoding_tables_out_of_order_is_a_bug() {
        let mut schema = sample();
        schema.tables.swap(0, 1);
        encode(&schema);
    }

    #[test]
    #[should_panic(expected = "must be its id's last version")]
    fn encoding_a_version_its_id_never_had_is_a_bug() {
        let mut schema = sample();
        schema.id_versions[2] = 5;
        encode(&schema);
    }
}
