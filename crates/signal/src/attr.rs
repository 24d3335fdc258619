//! The attribute encoding: how column values travel in key and attribute
//! sections, and the canonical form of a key that hashing and comparison use.
//!
//! ```text
//! entry:  column id (u16 LE) | length (u16 LE, 0xFFFF = NULL) | value bytes
//! INT: 4 bytes LE, BIGINT and DOUBLE: 8 bytes LE, CHAR/VARCHAR/VARBINARY: the bytes
//! ```
//! A key section holds one entry per primary-key column, in key order. An
//! attribute section holds entries in any order (insert: all columns that are
//! not NULL by default; update: the columns to change; read: empty means all).
//!
//! Canonical key form (docs/design/data-and-routing.md §5): CHAR and
//! VARCHAR lose trailing spaces, so `'a'` and `'a  '` hash and compare
//! equal, as in MySQL's PAD SPACE collations; everything else compares
//! byte for byte.

use crate::error::ErrorCode;
use crate::schema::{ColumnType, TableDef};
use stdx::mix::fmix64;

/// Length value that marks NULL.
pub const NULL_LENGTH: u16 = 0xFFFF;

/// One decoded entry.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct AttrEntry<'a> {
    /// Column id (index in the table's columns).
    pub column: u16,
    /// The value, or `None` for NULL.
    pub value: Option<&'a [u8]>,
}

/// Iterates the entries of an attribute or key section, checking bounds.
///
/// ```
/// use signal::attr::{AttrIter, AttrWriter};
/// let mut buffer = [0u8; 64];
/// let mut writer = AttrWriter::new(&mut buffer);
/// writer.push(0, Some(&7i32.to_le_bytes())).unwrap();
/// writer.push(1, None).unwrap();
/// let used = writer.len();
/// let entries: Vec<_> = AttrIter::new(&buffer[..used]).collect::<Result<_, _>>().unwrap();
/// assert_eq!(entries[1].value, None);
/// ```
pub struct AttrIter<'a> {
    bytes: &'a [u8],
}

impl<'a> AttrIter<'a> {
    /// Iterates `bytes`.
    pub fn new(bytes: &'a [u8]) -> AttrIter<'a> {
        AttrIter { bytes }
    }
}

impl<'a> Iterator for AttrIter<'a> {
    type Item = Result<AttrEntry<'a>, ErrorCode>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.bytes.is_empty() {
            return None;
        }
        if self.bytes.len() < 4 {
            self.bytes = &[];
            return Some(Err(ErrorCode::BadRequest));
        }
        let column = u16::from_le_bytes([self.bytes[0], self.bytes[1]]);
        let length = u16::from_le_bytes([self.bytes[2], self.bytes[3]]);
        if length == NULL_LENGTH {
            self.bytes = &self.bytes[4..];
            return Some(Ok(AttrEntry {
                column,
                value: None,
            }));
        }
        let end = 4 + length as usize;
        if self.bytes.len() < end {
            self.bytes = &[];
            return Some(Err(ErrorCode::BadRequest));
        }
        let value = &self.bytes[4..end];
        self.bytes = &self.bytes[end..];
        Some(Ok(AttrEntry {
            column,
            value: Some(value),
        }))
    }
}

/// Writes entries into a byte buffer.
pub struct AttrWriter<'a> {
    buffer: &'a mut [u8],
    used: usize,
}

impl<'a> AttrWriter<'a> {
    /// Writes into `buffer` from its start.
    pub fn new(buffer: &'a mut [u8]) -> AttrWriter<'a> {
        AttrWriter { buffer, used: 0 }
    }

    /// Appends one entry; `Err` when the buffer is too small or the value
    /// too long for the encoding.
    pub fn push(&mut self, column: u16, value: Option<&[u8]>) -> Result<(), ErrorCode> {
        let length = value.map_or(0, <[u8]>::len);
        if length >= NULL_LENGTH as usize {
            return Err(ErrorCode::ValueTooLong);
        }
        let end = self.used + 4 + length;
        if end > self.buffer.len() {
            return Err(ErrorCode::RowTooLarge);
        }
        self.buffer[self.used..self.used + 2].copy_from_slice(&column.to_le_bytes());
        let length_field = if value.is_some() {
            length as u16
        } else {
            NULL_LENGTH
        };
        self.buffer[self.used + 2..self.used + 4].copy_from_slice(&length_field.to_le_bytes());
        if let Some(value) = value {
            self.buffer[self.used + 4..end].copy_from_slice(value);
        }
        self.used = end;
        Ok(())
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.used
    }

    /// True when nothing was written.
    pub fn is_empty(&self) -> bool {
        self.used == 0
    }
}

/// Bytes one entry takes.
pub const fn entry_bytes(value_length: usize) -> usize {
    4 + value_length
}

/// Appends one entry (not NULL) to `out`, growing it; `Err` for a value
/// too long for the encoding. For sections built off the hot paths (a
/// unique index's rows, the replica checker's keys).
///
/// ```
/// let mut out = Vec::new();
/// signal::attr::append_entry(&mut out, 3, b"ab").unwrap();
/// assert_eq!(out, [3, 0, 2, 0, b'a', b'b']);
/// ```
pub fn append_entry(out: &mut Vec<u8>, column: u16, value: &[u8]) -> Result<(), ErrorCode> {
    let start = out.len();
    out.resize(start + entry_bytes(value.len()), 0);
    let pushed = AttrWriter::new(&mut out[start..]).push(column, Some(value));
    if pushed.is_err() {
        out.truncate(start);
    }
    pushed
}

/// Checks that `value` fits `column_type` (inlined: the client runs it in
/// its per-column row decoding loops).
#[inline]
pub fn check_value(column_type: ColumnType, value: &[u8]) -> Result<(), ErrorCode> {
    match column_type {
        ColumnType::Int { .. } if value.len() != 4 => Err(ErrorCode::BadValue),
        ColumnType::BigInt { .. } | ColumnType::Double if value.len() != 8 => {
            Err(ErrorCode::BadValue)
        }
        // NaN has no place in an order (an index, a bound) and no SQL
        // meaning: refused everywhere, as MySQL does.
        ColumnType::Double if f64::from_le_bytes(value.try_into().expect("8 bytes")).is_nan() => {
            Err(ErrorCode::BadValue)
        }
        ColumnType::Char(n) | ColumnType::VarChar(n) | ColumnType::VarBinary(n)
            if value.len() > n as usize =>
        {
            Err(ErrorCode::ValueTooLong)
        }
        _ => Ok(()),
    }
}

/// The most columns one increment operation adds to (its entries are
/// turned into ordinary changes in a buffer of fixed size on the ldm).
pub const MAX_INCREMENTS: usize = 32;

/// `current`, a value of the integer column type `column_type`, plus
/// `delta`: the sum's bytes (the first `len` of the array, as the column
/// stores it), ValueOutOfRange when the sum leaves the type's range, and
/// BadValue when the column is not an integer or `current` not its width.
///
/// ```
/// use signal::attr::add_to_integer;
/// use signal::schema::ColumnType;
/// let int = ColumnType::Int { unsigned: false };
/// let (sum, len) = add_to_integer(int, &41i32.to_le_bytes(), 1).unwrap();
/// assert_eq!(&sum[..len], &42i32.to_le_bytes());
/// assert!(add_to_integer(int, &i32::MAX.to_le_bytes(), 1).is_err());
/// let unsigned = ColumnType::BigInt { unsigned: true };
/// assert!(add_to_integer(unsigned, &0u64.to_le_bytes(), -1).is_err());
/// ```
pub fn add_to_integer(
    column_type: ColumnType,
    current: &[u8],
    delta: i64,
) -> Result<([u8; 8], usize), ErrorCode> {
    let (value, low, high, len): (i128, i128, i128, usize) = match column_type {
        ColumnType::Int { unsigned: false } => (
            i32::from_le_bytes(current.try_into().map_err(|_| ErrorCode::BadValue)?).into(),
            i32::MIN.into(),
            i32::MAX.into(),
            4,
        ),
        ColumnType::Int { unsigned: true } => (
            u32::from_le_bytes(current.try_into().map_err(|_| ErrorCode::BadValue)?).into(),
            0,
            u32::MAX.into(),
            4,
        ),
        ColumnType::BigInt { unsigned: false } => (
            i64::from_le_bytes(current.try_into().map_err(|_| ErrorCode::BadValue)?).into(),
            i64::MIN.into(),
            i64::MAX.into(),
            8,
        ),
        ColumnType::BigInt { unsigned: true } => (
            u64::from_le_bytes(current.try_into().map_err(|_| ErrorCode::BadValue)?).into(),
            0,
            u64::MAX.into(),
            8,
        ),
        _ => return Err(ErrorCode::BadValue),
    };
    let sum = value + i128::from(delta);
    if sum < low || sum > high {
        return Err(ErrorCode::ValueOutOfRange);
    }
    let mut bytes = [0u8; 8];
    // Two's complement: the low `len` bytes of the sum are the column's
    // encoding, signed or not, once the range is checked.
    bytes[..len].copy_from_slice(&sum.to_le_bytes()[..len]);
    Ok((bytes, len))
}

/// The canonical form of a value of `column_type`: trailing spaces dropped
/// for CHAR and VARCHAR, and a DOUBLE's -0 made +0 (the two compare
/// equal, in SQL and in an ordered index, so they must hash alike and be
/// one key).
#[inline]
pub fn canonical(column_type: ColumnType, value: &[u8]) -> &[u8] {
    /// +0.0's bytes.
    static POSITIVE_ZERO: [u8; 8] = [0; 8];
    if column_type.pads_spaces() {
        let mut end = value.len();
        while end > 0 && value[end - 1] == b' ' {
            end -= 1;
        }
        &value[..end]
    } else if column_type == ColumnType::Double && value == (-0.0f64).to_le_bytes() {
        &POSITIVE_ZERO
    } else {
        value
    }
}

/// Whether two values of `column_type` are equal as keys.
#[inline]
pub fn key_values_equal(column_type: ColumnType, a: &[u8], b: &[u8]) -> bool {
    canonical(column_type, a) == canonical(column_type, b)
}

/// The hash of a key: one 64-bit value whose high half picks the partition
/// (through 3840 buckets, see `partition`) and whose low half is the hash
/// index's hash, so the two choices are independent.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct KeyHash(pub u64);

impl KeyHash {
    /// The hash the partition's hash index uses.
    #[inline]
    pub fn index_hash(self) -> u32 {
        self.0 as u32
    }

    /// The hash the distribution uses.
    #[inline]
    pub fn distribution_hash(self) -> u32 {
        (self.0 >> 32) as u32
    }
}

/// Checks a key section against `table` (exactly the primary-key columns,
/// in order, not NULL, fitting their types) and hashes its canonical form.
///
/// With a partition key (`TableDef::partition_key`), the distribution
/// half is the same hash of the partition key's values alone, so rows
/// that share them share a partition; the index half stays the whole
/// key's.
pub fn key_hash(table: &TableDef, key: &[u8]) -> Result<KeyHash, ErrorCode> {
    let mut crc = 0u32;
    // The partition key's values, in the partition key's order.
    let mut partition_values: [&[u8]; 8] = [&[]; 8];
    let partitioned = !table.partition_key.is_empty() && table.partition_key != table.primary_key;
    let mut entries = AttrIter::new(key);
    for &column in &table.primary_key {
        let entry = entries.next().ok_or(ErrorCode::NullNotAllowed)??;
        if entry.column != column {
            return Err(ErrorCode::BadRequest);
        }
        let value = entry.value.ok_or(ErrorCode::NullNotAllowed)?;
        let column_type = table.columns[column as usize].column_type;
        check_value(column_type, value)?;
        let canonical_value = canonical(column_type, value);
        crc = stdx::crc::crc32c_append(crc, &(canonical_value.len() as u16).to_le_bytes());
        crc = stdx::crc::crc32c_append(crc, canonical_value);
        if partitioned {
            if let Some(position) = table.partition_key.iter().position(|c| *c == column) {
                if position < partition_values.len() {
                    partition_values[position] = canonical_value;
                }
            }
        }
    }
    if entries.next().is_some() {
        return Err(ErrorCode::BadRequest);
    }
    let whole = fmix64(crc as u64 ^ 0x5bd1_e995_0000_0000);
    if !partitioned {
        return Ok(KeyHash(whole));
    }
    let distribution =
        distribution_of(&partition_values[..table.partition_key.len().min(partition_values.len())]);
    Ok(KeyHash(
        (distribution & 0xFFFF_FFFF_0000_0000) | (whole & 0xFFFF_FFFF),
    ))
}

/// The distribution half of a partition key's canonical values, in the
/// partition key's order.
fn distribution_of(values: &[&[u8]]) -> u64 {
    let mut partition_crc = 0u32;
    for value in values {
        partition_crc =
            stdx::crc::crc32c_append(partition_crc, &(value.len() as u16).to_le_bytes());
        partition_crc = stdx::crc::crc32c_append(partition_crc, value);
    }
    fmix64(partition_crc as u64 ^ 0x5bd1_e995_0000_0000)
}

/// The distribution hash (`KeyHash::distribution_hash`) every row of
/// `table` whose partition-key columns hold `entries` has: attribute
/// entries of exactly the partition key's columns, in its order, not
/// NULL. What a scan whose bounds pin those columns uses to reach the one
/// partition holding its rows. Only for a table with a partition key of
/// its own (`TableDef::partition_key` set and not the primary key): any
/// other spreads its rows by the whole key.
pub fn partition_key_hash(table: &TableDef, entries: &[u8]) -> Result<u32, ErrorCode> {
    if table.partition_key.is_empty() || table.partition_key == table.primary_key {
        return Err(ErrorCode::BadRequest);
    }
    let mut values: [&[u8]; 8] = [&[]; 8];
    let mut iter = AttrIter::new(entries);
    for (position, &column) in table.partition_key.iter().enumerate() {
        let entry = iter.next().ok_or(ErrorCode::BadRequest)??;
        if entry.column != column || position >= values.len() {
            return Err(ErrorCode::BadRequest);
        }
        let value = entry.value.ok_or(ErrorCode::NullNotAllowed)?;
        let column_type = table.columns[column as usize].column_type;
        check_value(column_type, value)?;
        values[position] = canonical(column_type, value);
    }
    if iter.next().is_some() {
        return Err(ErrorCode::BadRequest);
    }
    Ok((distribution_of(&values[..table.partition_key.len()]) >> 32) as u32)
}

#[cfg(test)]
mod partition_key_tests {
    use super::*;
    use crate::schema::{ColumnDef, ColumnType};

    fn table(partition_key: Vec<u16>) -> TableDef {
        TableDef {
            id: 1,
            version: 1,
            name: "db/stock".into(),
            columns: vec![
                ColumnDef::new("w_id", ColumnType::Int { unsigned: false }, false),
                ColumnDef::new("i_id", ColumnType::Int { unsigned: false }, false),
            ],
            primary_key: vec![0, 1],
            partition_key,
            partitions: 8,
            indexes: Vec::new(),
            revision: 0,
        }
    }

    fn key(w_id: i32, i_id: i32) -> Vec<u8> {
        let mut key = Vec::new();
        append_entry(&mut key, 0, &w_id.to_le_bytes()).unwrap();
        append_entry(&mut key, 1, &i_id.to_le_bytes()).unwrap();
        key
    }

    #[test]
    fn rows_sharing_the_partition_key_share_a_partition() {
        let partitioned = table(vec![0]);
        let a = key_hash(&partitioned, &key(7, 1)).unwrap();
        let b = key_hash(&partitioned, &key(7, 2)).unwrap();
        assert_eq!(a.distribution_hash(), b.distribution_hash());
        assert_ne!(a.index_hash(), b.index_hash());
        // The index half is the whole key's, as without a partition key.
        let whole = table(Vec::new());
        assert_eq!(
            key_hash(&whole, &key(7, 1)).unwrap().index_hash(),
            a.index_hash()
        );
        // Different warehouses spread.
        let spread: std::collections::HashSet<u32> = (1..50)
            .map(|w| {
                key_hash(&partitioned, &key(w, 1))
                    .unwrap()
                    .distribution_hash()
                    % 8
            })
            .collect();
        assert!(spread.len() > 4, "{spread:?}");
        // The whole key as partition key is the default.
        assert_eq!(
            key_hash(&table(vec![0, 1]), &key(7, 1)).unwrap(),
            key_hash(&whole, &key(7, 1)).unwrap()
        );
    }

    #[test]
    fn a_double_minus_zero_is_the_key_plus_zero_is() {
        let double = |partition_key: Vec<u16>| TableDef {
            columns: vec![
                ColumnDef::new("d", ColumnType::Double, false),
                ColumnDef::new("i", ColumnType::Int { unsigned: false }, false),
            ],
            ..table(partition_key)
        };
        let key = |d: f64| {
            let mut key = Vec::new();
            append_entry(&mut key, 0, &d.to_le_bytes()).unwrap();
            append_entry(&mut key, 1, &1i32.to_le_bytes()).unwrap();
            key
        };
        let (minus, plus) = ((-0.0f64).to_le_bytes(), 0.0f64.to_le_bytes());
        assert!(key_values_equal(ColumnType::Double, &minus, &plus));
        assert!(!key_values_equal(
            ColumnType::Double,
            &minus,
            &1.0f64.to_le_bytes()
        ));
        // Bytes of other types are compared as they are.
        let int = ColumnType::BigInt { unsigned: false };
        assert!(!key_values_equal(int, &minus, &plus));
        for partition_key in [Vec::new(), vec![0]] {
            let table = double(partition_key);
            assert_eq!(
                key_hash(&table, &key(-0.0)).unwrap(),
                key_hash(&table, &key(0.0)).unwrap()
            );
        }
        let table = double(vec![0]);
        let alone = |d: f64| {
            let mut entries = Vec::new();
            append_entry(&mut entries, 0, &d.to_le_bytes()).unwrap();
            partition_key_hash(&table, &entries).unwrap()
        };
        assert_eq!(alone(-0.0), alone(0.0));
        assert_eq!(
            alone(0.0),
            key_hash(&table, &key(-0.0)).unwrap().distribution_hash()
        );
    }

    #[test]
    fn a_partition_key_alone_hashes_as_its_rows_do() {
        let partitioned = table(vec![0]);
        let mut entries = Vec::new();
        append_entry(&mut entries, 0, &7i32.to_le_bytes()).unwrap();
        let alone = partition_key_hash(&partitioned, &entries).unwrap();
        for i_id in [1, 2, 99_999] {
            let row = key_hash(&partitioned, &key(7, i_id)).unwrap();
            assert_eq!(alone, row.distribution_hash());
        }
        // Not the partition key's columns, or a table spread by its whole
        // key: no partition follows from them.
        let mut wrong = Vec::new();
        append_entry(&mut wrong, 1, &7i32.to_le_bytes()).unwrap();
        assert!(partition_key_hash(&partitioned, &wrong).is_err());
        assert!(partition_key_hash(&partitioned, &[]).is_err());
        assert!(partition_key_hash(&table(Vec::new()), &entries).is_err());
        assert!(partition_key_hash(&table(vec![0, 1]), &entries).is_err());
    }

    #[test]
    fn a_partition_key_round_trips_and_must_be_in_the_primary_key() {
        let partitioned = table(vec![0]);
        let decoded = TableDef::decode(&partitioned.encode_to_vec()).unwrap();
        assert_eq!(decoded, partitioned);
        let plain = table(Vec::new());
        assert_eq!(TableDef::decode(&plain.encode_to_vec()).unwrap(), plain);
        let mut outside = table(vec![0]);
        outside.columns.push(ColumnDef::new(
            "v",
            ColumnType::Int { unsigned: false },
            true,
        ));
        outside.partition_key = vec![2];
        assert!(outside.validate().is_err());
        assert!(table(vec![0, 0]).validate().is_err());
    }
}
