//! Row layout (NDB's DBTUP attribute descriptors): where each column of a
//! table lives in a row, how an operation's attribute entries become an
//! after-image, and how a row becomes attribute entries again for a read.
//!
//! ```text
//! fixed slot (never moves):  header (24 bytes) | fixed body
//! fixed body:                null bitmap (1 bit per column) | fixed columns
//!                            INT 4 | BIGINT, DOUBLE 8 | CHAR(n): length u8 + n bytes
//! var slot (may move):       var part = lengths (u16 per var column) | data
//! after-image (a section):   fixed body | var part
//! ```
//! An after-image has exactly the shape of the stored row minus its header,
//! so commit installs it with two copies.

use signal::attr::{self, AttrIter, AttrWriter};
use signal::order::KeyColumn;
use signal::schema::{ColumnType, TableDef, MAX_COLUMNS};
use signal::ErrorCode;

/// Bytes of the row header at the start of every fixed slot.
pub const HEADER_BYTES: usize = 24;

#[derive(Clone, Copy, Debug)]
enum Place {
    /// Offset in the fixed body.
    Fixed(usize),
    /// Index among the var columns.
    Var(usize),
}

#[derive(Clone, Copy, Debug)]
struct ColumnPlace {
    column_type: ColumnType,
    nullable: bool,
    place: Place,
}

/// The layout of one table's rows.
#[derive(Debug)]
pub struct RowLayout {
    columns: Vec<ColumnPlace>,
    primary_key: Vec<u16>,
    null_bytes: usize,
    /// Bytes of the fixed body (null bitmap + fixed columns).
    pub fixed_body_bytes: usize,
    /// Number of var columns.
    pub var_columns: usize,
    /// A primary-key column is a var column (an update then takes its
    /// bytes from the key, not the old row).
    var_in_key: bool,
    /// Largest var part.
    pub var_max_bytes: usize,
    /// Largest read result (attribute entries of every column).
    pub read_max_bytes: usize,
    /// Largest key section (attribute entries of the primary-key columns).
    pub key_max_bytes: usize,
    /// For tables of INT, BIGINT and DOUBLE columns only: each column's
    /// entry, for the whole-row read of a row without NULLs.
    plain_read: Option<Vec<PlainColumn>>,
}

/// One column of a whole-row read of a table of fixed-width numbers: its
/// entry header and where its value is in the fixed body.
#[derive(Clone, Copy, Debug)]
struct PlainColumn {
    header: [u8; 4],
    offset: u32,
    /// 4 or 8.
    width: u32,
}

/// A row or after-image to read values from.
#[derive(Clone, Copy)]
pub struct RowView<'a> {
    /// The fixed body.
    pub fixed: &'a [u8],
    /// The var part (empty when the table has no var columns).
    pub var: &'a [u8],
}

impl RowLayout {
    /// The layout of `table`.
    pub fn new(table: &TableDef) -> RowLayout {
        assert!(
            table.columns.len() <= MAX_COLUMNS,
            "table {:?} has {} columns: dict validates tables to at most {MAX_COLUMNS}",
            table.name,
            table.columns.len()
        );
        let null_bytes = table.columns.len().div_ceil(8);
        let mut fixed_offset = null_bytes;
        let mut var_columns = 0;
        let mut var_max_bytes = 0;
        let mut read_max_bytes = 0;
        let columns: Vec<ColumnPlace> = table
            .columns
            .iter()
            .map(|column| {
                read_max_bytes += attr::entry_bytes(column.column_type.max_value_bytes());
                let place = match column.column_type.fixed_width() {
                    Some(width) => {
                        let place = Place::Fixed(fixed_offset);
                        fixed_offset += width;
                        place
                    }
                    None => {
                        let place = Place::Var(var_columns);
                        var_columns += 1;
                        var_max_bytes += 2 + column.column_type.max_value_bytes();
                        place
                    }
                };
                ColumnPlace {
                    column_type: column.column_type,
                    nullable: column.nullable,
                    place,
                }
            })
            .collect();
        let key_max_bytes = table
            .primary_key
            .iter()
            .map(|&column| {
                attr::entry_bytes(table.columns[column as usize].column_type.max_value_bytes())
            })
            .sum();
        let plain_read = columns
            .iter()
            .enumerate()
            .map(|(column, place)| {
                let width = match place.column_type {
                    ColumnType::Int { .. } => 4u16,
                    ColumnType::BigInt { .. } | ColumnType::Double => 8,
                    _ => return None,
                };
                let Place::Fixed(offset) = place.place else {
                    return None;
                };
                let mut header = [0u8; 4];
                header[..2].copy_from_slice(&(column as u16).to_le_bytes());
                header[2..].copy_from_slice(&width.to_le_bytes());
                Some(PlainColumn {
                    header,
                    offset: offset as u32,
                    width: u32::from(width),
                })
            })
            .collect::<Option<Vec<_>>>();
        let var_in_key = table
            .primary_key
            .iter()
            .any(|&column| matches!(columns[column as usize].place, Place::Var(_)));
        RowLayout {
            plain_read,
            var_in_key,
            columns,
            primary_key: table.primary_key.clone(),
            null_bytes,
            fixed_body_bytes: fixed_offset,
            var_columns,
            var_max_bytes,
            read_max_bytes,
            key_max_bytes,
        }
    }

    /// Largest after-image.
    #[inline]
    pub fn image_max_bytes(&self) -> usize {
        self.fixed_body_bytes + self.var_max_bytes
    }

    /// Splits an after-image into its view.
    #[inline]
    pub fn image_view<'a>(&self, image: &'a [u8]) -> RowView<'a> {
        let (fixed, var) = image.split_at(self.fixed_body_bytes);
        RowView { fixed, var }
    }

    /// Bytes of the var part of `view` (lengths + data).
    #[inline]
    pub fn var_part_bytes(&self, var: &[u8]) -> usize {
        if self.var_columns == 0 {
            return 0;
        }
        let mut total = 2 * self.var_columns;
        for index in 0..self.var_columns {
            total += u16::from_le_bytes([var[2 * index], var[2 * index + 1]]) as usize;
        }
        total
    }

    /// The primary key's column ids, in key order.
    pub fn primary_key(&self) -> &[u16] {
        &self.primary_key
    }

    /// Column `column` as an ordered key sees it: its type and whether it
    /// may be NULL.
    pub fn key_column(&self, column: usize) -> KeyColumn {
        let place = self.columns[column];
        KeyColumn {
            column_type: place.column_type,
            nullable: place.nullable,
        }
    }

    /// The type of column `column` (`None`: no such column).
    pub fn column_type(&self, column: usize) -> Option<ColumnType> {
        self.columns.get(column).map(|place| place.column_type)
    }

    /// The value of column `column` (`None` for NULL).
    #[inline]
    pub fn value<'a>(&self, view: RowView<'a>, column: usize) -> Option<&'a [u8]> {
        let place = self.columns[column];
        if view.fixed[column / 8] & (1 << (column % 8)) != 0 {
            return None;
        }
        Some(match place.place {
            Place::Fixed(offset) => match place.column_type {
                ColumnType::Char(_) => {
                    let length = view.fixed[offset] as usize;
                    &view.fixed[offset + 1..offset + 1 + length]
                }
                other => {
                    let width = other.fixed_width().unwrap_or(0);
                    &view.fixed[offset..offset + width]
                }
            },
            Place::Var(index) => {
                let mut start = 2 * self.var_columns;
                for before in 0..index {
                    start += u16::from_le_bytes([view.var[2 * before], view.var[2 * before + 1]])
                        as usize;
                }
                let length =
                    u16::from_le_bytes([view.var[2 * index], view.var[2 * index + 1]]) as usize;
                &view.var[start..start + length]
            }
        })
    }

    /// Whether the row holds the key of `key` (a validated key section).
    #[inline]
    pub fn key_matches(&self, view: RowView<'_>, key: &[u8]) -> bool {
        for (entry, &column) in AttrIter::new(key).zip(&self.primary_key) {
            let Ok(entry) = entry else { return false };
            let (Some(wanted), Some(stored)) = (entry.value, self.value(view, column as usize))
            else {
                return false;
            };
            if !attr::key_values_equal(self.columns[column as usize].column_type, wanted, stored) {
                return false;
            }
        }
        true
    }

    /// Writes the key section of the row `view` (its primary-key columns as
    /// attribute entries, in key order) into `out` (at least
    /// `key_max_bytes` long). Returns the bytes written. Restore uses it to
    /// index rows that come without their key (LCP data files), and to find
    /// the index entry of a row a replayed change displaces.
    pub fn write_key(&self, view: RowView<'_>, out: &mut [u8]) -> Result<usize, ErrorCode> {
        let mut writer = AttrWriter::new(out);
        for &column in &self.primary_key {
            writer.push(column, self.value(view, column as usize))?;
        }
        Ok(writer.len())
    }

    /// Builds an after-image into `image` (at least `image_max_bytes` long):
    /// start from `base` (update) or from all-NULL (insert), take the key
    /// columns from `key`, then apply `changes`. Returns the image length.
    pub fn build_image(
        &self,
        image: &mut [u8],
        base: Option<RowView<'_>>,
        key: &[u8],
        changes: &[u8],
    ) -> Result<usize, ErrorCode> {
        let (fixed, var_area) = image.split_at_mut(self.fixed_body_bytes);
        match base {
            Some(base) => fixed.copy_from_slice(base.fixed),
            None => {
                fixed.fill(0);
                // Every column starts NULL; the checks below refuse NULL
                // where it is not allowed.
                for column in 0..self.columns.len() {
                    fixed[column / 8] |= 1 << (column % 8);
                }
            }
        }
        // Var columns assigned in `changes`, one bit each (a table has at
        // most MAX_COLUMNS columns, so at most that many var columns).
        let mut assigned_var = [0u64; MAX_COLUMNS.div_ceil(64)];
        // Key columns first (they are validated by the tc's key hash).
        for (entry, &column) in AttrIter::new(key).zip(&self.primary_key) {
            let entry = entry.map_err(|_| ErrorCode::BadRequest)?;
            self.set_fixed(fixed, column as usize, entry.value)?;
        }
        for entry in AttrIter::new(changes) {
            let entry = entry?;
            let column = entry.column as usize;
            let Some(place) = self.columns.get(column) else {
                return Err(ErrorCode::UnknownColumn);
            };
            if let Some(position) = self.primary_key.iter().position(|&k| k as usize == column) {
                // A key column may be repeated in the values only unchanged.
                let key_value = AttrIter::new(key)
                    .nth(position)
                    .and_then(Result::ok)
                    .and_then(|e| e.value);
                match (entry.value, key_value) {
                    (Some(given), Some(key_value))
                        if attr::key_values_equal(place.column_type, given, key_value) => {}
                    _ => return Err(ErrorCode::BadRequest),
                }
                continue;
            }
            if let Some(value) = entry.value {
                attr::check_value(place.column_type, value)?;
            } else if !place.nullable {
                return Err(ErrorCode::NullNotAllowed);
            }
            self.set_fixed(fixed, column, entry.value)?;
            if let Place::Var(index) = place.place {
                assigned_var[index / 64] |= 1 << (index % 64);
            }
        }
        // NOT NULL columns must hold a value.
        for (column, place) in self.columns.iter().enumerate() {
            if !place.nullable && fixed[column / 8] & (1 << (column % 8)) != 0 {
                return Err(ErrorCode::NullNotAllowed);
            }
        }
        // The var part: each var column from `changes` if assigned there,
        // else from `base`.
        if self.var_columns == 0 {
            return Ok(self.fixed_body_bytes);
        }
        // An update that assigns no var column (and whose key has none,
        // whose bytes come from `key`) keeps the base's var part as it is:
        // one copy, not one per column (TPC-C's stock, district and
        // customer updates change numbers only).
        if let Some(base) = base {
            if !self.var_in_key && assigned_var.iter().all(|bits| *bits == 0) {
                let bytes = self.var_part_bytes(base.var);
                var_area[..bytes].copy_from_slice(&base.var[..bytes]);
                return Ok(self.fixed_body_bytes + bytes);
            }
        }
        let mut data_at = 2 * self.var_columns;
        for (column, place) in self.columns.iter().enumerate() {
            let Place::Var(index) = place.place else {
                continue;
            };
            let value: &[u8] = if assigned_var[index / 64] & (1 << (index % 64)) != 0 {
                AttrIter::new(changes)
                    .filter_map(Result::ok)
                    .filter(|e| e.column as usize == column)
                    .last()
                    .and_then(|e| e.value)
                    .unwrap_or(&[])
            } else if self.primary_key.contains(&(column as u16)) {
                let position = self
                    .primary_key
                    .iter()
                    .position(|&k| k as usize == column)
                    .unwrap_or(0);
                AttrIter::new(key)
                    .nth(position)
                    .and_then(Result::ok)
                    .and_then(|e| e.value)
                    .unwrap_or(&[])
            } else {
                base.and_then(|base| self.value(base, column))
                    .unwrap_or(&[])
            };
            var_area[2 * index..2 * index + 2].copy_from_slice(&(value.len() as u16).to_le_bytes());
            var_area[data_at..data_at + value.len()].copy_from_slice(value);
            data_at += value.len();
        }
        Ok(self.fixed_body_bytes + data_at)
    }

    /// Stores a value's null bit and, for fixed columns, its bytes.
    fn set_fixed(
        &self,
        fixed: &mut [u8],
        column: usize,
        value: Option<&[u8]>,
    ) -> Result<(), ErrorCode> {
        let place = self.columns[column];
        match value {
            None => fixed[column / 8] |= 1 << (column % 8),
            Some(value) => {
                fixed[column / 8] &= !(1 << (column % 8));
                if let Place::Fixed(offset) = place.place {
                    match place.column_type {
                        ColumnType::Char(n) => {
                            let value = attr::canonical(place.column_type, value);
                            if value.len() > n as usize {
                                return Err(ErrorCode::ValueTooLong);
                            }
                            fixed[offset] = value.len() as u8;
                            fixed[offset + 1..offset + 1 + value.len()].copy_from_slice(value);
                            fixed[offset + 1 + value.len()..offset + 1 + n as usize].fill(0);
                        }
                        _ => fixed[offset..offset + value.len()].copy_from_slice(value),
                    }
                }
            }
        }
        Ok(())
    }

    /// Encodes the columns listed in `projection` (u16 column ids; empty:
    /// all) of `view` as attribute entries into `out`. Returns bytes written.
    pub fn encode_read(
        &self,
        view: RowView<'_>,
        projection: &[u8],
        out: &mut [u8],
    ) -> Result<usize, ErrorCode> {
        if projection.is_empty() && out.len() >= self.read_max_bytes {
            return Ok(self.encode_all(view, out));
        }
        let mut writer = AttrWriter::new(out);
        if projection.is_empty() {
            for column in 0..self.columns.len() {
                writer.push(column as u16, self.value(view, column))?;
            }
        } else {
            if !projection.len().is_multiple_of(2) {
                return Err(ErrorCode::BadRequest);
            }
            for pair in projection.chunks_exact(2) {
                let column = u16::from_le_bytes([pair[0], pair[1]]) as usize;
                if column >= self.columns.len() {
                    return Err(ErrorCode::UnknownColumn);
                }
                writer.push(column as u16, self.value(view, column))?;
            }
        }
        Ok(writer.len())
    }

    /// Every column of `view` as attribute entries, the same bytes
    /// `AttrWriter` would write, into `out` of at least `read_max_bytes`.
    ///
    /// The read of a whole row is the hottest path of a key lookup: one
    /// pass over the columns with the var part's offsets carried along
    /// (instead of summed again per column), fixed-size copies for INT and
    /// BIGINT, and one bounds check up front instead of one per entry.
    fn encode_all(&self, view: RowView<'_>, out: &mut [u8]) -> usize {
        assert!(
            out.len() >= self.read_max_bytes,
            "encode_all needs room for the largest read ({} bytes), got {}",
            self.read_max_bytes,
            out.len()
        );
        if let Some(plain) = &self.plain_read {
            if view.fixed[..self.null_bytes].iter().all(|&bits| bits == 0) {
                return encode_plain(plain, view.fixed, out);
            }
        }
        let mut used = 0;
        let mut var_start = 2 * self.var_columns;
        for (column, place) in self.columns.iter().enumerate() {
            let is_null = view.fixed[column / 8] & (1 << (column % 8)) != 0;
            let value: &[u8] = match place.place {
                Place::Fixed(offset) => match place.column_type {
                    ColumnType::Int { .. } => &view.fixed[offset..offset + 4],
                    ColumnType::BigInt { .. } | ColumnType::Double => {
                        &view.fixed[offset..offset + 8]
                    }
                    ColumnType::Char(_) => {
                        let length = view.fixed[offset] as usize;
                        &view.fixed[offset + 1..offset + 1 + length]
                    }
                    ColumnType::VarChar(_) | ColumnType::VarBinary(_) => {
                        unreachable!("var columns are placed in the var part")
                    }
                },
                Place::Var(index) => {
                    // A NULL var column still has its (zero) length in
                    // the lengths array, so the offset advances the same.
                    let length =
                        u16::from_le_bytes([view.var[2 * index], view.var[2 * index + 1]]) as usize;
                    let start = var_start;
                    var_start += length;
                    &view.var[start..start + length]
                }
            };
            let entry = &mut out[used..];
            entry[0..2].copy_from_slice(&(column as u16).to_le_bytes());
            if is_null {
                entry[2..4].copy_from_slice(&attr::NULL_LENGTH.to_le_bytes());
                used += 4;
                continue;
            }
            // Lengths fit: `read_max_bytes` counts each column's largest
            // value, and values are below NULL_LENGTH by the schema.
            entry[2..4].copy_from_slice(&(value.len() as u16).to_le_bytes());
            match value.len() {
                4 => entry[4..8].copy_from_slice(&value[..4]),
                8 => entry[4..12].copy_from_slice(&value[..8]),
                length => entry[4..4 + length].copy_from_slice(value),
            }
            used += 4 + value.len();
        }
        used
    }

    /// Null bitmap bytes (for tests).
    pub fn null_bytes(&self) -> usize {
        self.null_bytes
    }
}

/// The whole-row read of a row of fixed-width numbers without NULLs:
/// header and value per column, no decisions (see `RowLayout::encode_all`).
fn encode_plain(plain: &[PlainColumn], fixed: &[u8], out: &mut [u8]) -> usize {
    let mut used = 0;
    for column in plain {
        let source = column.offset as usize;
        out[used..used + 4].copy_from_slice(&column.header);
        if column.width == 8 {
            out[used + 4..used + 12].copy_from_slice(&fixed[source..source + 8]);
            used += 12;
        } else {
            out[used + 4..used + 8].copy_from_slice(&fixed[source..source + 4]);
            used += 8;
        }
    }
    used
}

#[cfg(test)]
mod tests {
    use super::*;
    use signal::schema::ColumnDef;

    fn table() -> TableDef {
        let column = |name: &str, column_type, nullable| ColumnDef {
            name: name.into(),
            column_type,
            nullable,
        };
        TableDef {
            indexes: Vec::new(),
            revision: 0,
            id: 1,
            version: 1,
            name: "t".into(),
            columns: vec![
                column("k", ColumnType::VarChar(10), false),
                column("a", ColumnType::Int { unsigned: false }, true),
                column("b", ColumnType::Char(4), true),
                column("c", ColumnType::VarBinary(20), true),
                column("d", ColumnType::BigInt { unsigned: true }, false),
            ],
            primary_key: vec![0],
            partitions: 1,
            partition_key: Vec::new(),
        }
    }

    /// An update that assigns no var column keeps the var part in one
    /// copy: the image is byte for byte the one assigning each var
    /// column its old value gives.
    #[test]
    fn an_update_of_fixed_columns_keeps_the_var_part_as_it_was() {
        let mut def = table();
        def.columns[0] = ColumnDef::new("k", ColumnType::Int { unsigned: false }, false);
        def.columns
            .push(ColumnDef::new("e", ColumnType::VarChar(30), true));
        let layout = RowLayout::new(&def);
        let key = entries(&[(0, Some(&7i32.to_le_bytes()))]);
        let mut image = vec![0u8; layout.image_max_bytes()];
        let insert = entries(&[
            (3, Some(b"bytes")),
            (4, Some(&1u64.to_le_bytes())),
            (5, Some(b"text")),
        ]);
        let len = layout
            .build_image(&mut image, None, &key, &insert)
            .expect("valid insert");
        let base = layout.image_view(&image[..len]);
        let numbers = entries(&[
            (1, Some(&5i32.to_le_bytes())),
            (4, Some(&2u64.to_le_bytes())),
        ]);
        let mut fast = vec![0u8; layout.image_max_bytes()];
        let fast_len = layout
            .build_image(&mut fast, Some(base), &key, &numbers)
            .expect("valid update");
        let mut spelled = numbers.clone();
        spelled.extend(entries(&[(3, Some(b"bytes")), (5, Some(b"text"))]));
        let mut slow = vec![0u8; layout.image_max_bytes()];
        let slow_len = layout
            .build_image(&mut slow, Some(base), &key, &spelled)
            .expect("valid update");
        assert_eq!(fast[..fast_len], slow[..slow_len]);
        let view = layout.image_view(&fast[..fast_len]);
        assert_eq!(layout.value(view, 5), Some(&b"text"[..]));
        assert_eq!(layout.value(view, 2), None);
        assert_eq!(layout.value(view, 1), Some(&5i32.to_le_bytes()[..]));
    }

    fn entries(values: &[(u16, Option<&[u8]>)]) -> Vec<u8> {
        let mut buffer = vec![0u8; 256];
        let mut writer = AttrWriter::new(&mut buffer);
        for (column, value) in values {
            writer.push(*column, *value).expect("fits");
        }
        let used = writer.len();
        buffer.truncate(used);
        buffer
    }

    #[test]
    fn insert_then_update_then_read_round_trips() {
        let layout = RowLayout::new(&table());
        let key = entries(&[(0, Some(b"key1"))]);
        let mut image = vec![0u8; layout.image_max_bytes()];
        let changes = entries(&[
            (1, Some(&5i32.to_le_bytes())),
            (2, Some(b"ab  ")),
            (4, Some(&9u64.to_le_bytes())),
        ]);
        let len = layout
            .build_image(&mut image, None, &key, &changes)
            .expect("valid insert");
        let view = layout.image_view(&image[..len]);
        assert!(
            layout.key_matches(view, &entries(&[(0, Some(b"key1  "))])),
            "trailing spaces ignored"
        );
        assert!(!layout.key_matches(view, &entries(&[(0, Some(b"key2"))])));
        assert_eq!(
            layout.value(view, 2),
            Some(&b"ab"[..]),
            "CHAR loses trailing spaces"
        );
        assert_eq!(layout.value(view, 3), None);
        let mut updated = vec![0u8; layout.image_max_bytes()];
        let update = entries(&[(3, Some(b"xyz")), (1, None)]);
        let len2 = layout
            .build_image(&mut updated, Some(view), &key, &update)
            .expect("valid update");
        let view2 = layout.image_view(&updated[..len2]);
        assert_eq!(layout.value(view2, 3), Some(&b"xyz"[..]));
        assert_eq!(layout.value(view2, 1), None);
        assert_eq!(layout.value(view2, 0), Some(&b"key1"[..]));
        assert_eq!(layout.value(view2, 4), Some(&9u64.to_le_bytes()[..]));
        let mut out = vec![0u8; layout.read_max_bytes];
        let used = layout.encode_read(view2, &[], &mut out).expect("fits");
        let decoded: Vec<_> = AttrIter::new(&out[..used])
            .collect::<Result<_, _>>()
            .expect("valid");
        assert_eq!(decoded.len(), 5);
    }

    /// The whole-row read writes exactly what one `AttrWriter` entry per
    /// column would: NULLs, CHAR lengths, var columns before and after
    /// NULL ones, empty and full-length values.
    #[test]
    fn whole_row_read_matches_one_entry_per_column() {
        let layout = RowLayout::new(&table());
        let mut random = stdx::mix::XorShift::new(7);
        let mut image = vec![0u8; layout.image_max_bytes()];
        for round in 0..500i32 {
            let text = |random: &mut stdx::mix::XorShift, max: u64| -> Vec<u8> {
                let length = random.below(max + 1) as usize;
                (0..length).map(|i| b'a' + (i % 26) as u8).collect()
            };
            let key = entries(&[(0, Some(&text(&mut random, 10)[..]))]);
            let a = round.to_le_bytes();
            let b = text(&mut random, 4);
            let c = text(&mut random, 20);
            let d = (round as u64 * 77).to_le_bytes();
            let maybe = |random: &mut stdx::mix::XorShift, value: &[u8]| -> Option<Vec<u8>> {
                (random.below(3) != 0).then(|| value.to_vec())
            };
            let (a, b, c) = (
                maybe(&mut random, &a),
                maybe(&mut random, &b),
                maybe(&mut random, &c),
            );
            let changes = entries(&[
                (1, a.as_deref()),
                (2, b.as_deref()),
                (3, c.as_deref()),
                (4, Some(&d)),
            ]);
            let length = layout
                .build_image(&mut image, None, &key, &changes)
                .expect("valid insert");
            let view = layout.image_view(&image[..length]);
            let expected: Vec<(u16, Option<&[u8]>)> = (0..5)
                .map(|column| (column as u16, layout.value(view, column)))
                .collect();
            let mut out = vec![0xAAu8; layout.read_max_bytes];
            let used = layout.encode_all(view, &mut out);
            assert_eq!(&out[..used], &entries(&expected)[..], "round {round}");
            let used_by_read = layout.encode_read(view, &[], &mut out).expect("fits");
            assert_eq!(&out[..used_by_read], &entries(&expected)[..]);
        }
    }

    /// Tables of fixed-width numbers take the plain path when the row has
    /// no NULLs; it writes the same bytes as one entry per column, and a
    /// row with a NULL still comes out right.
    #[test]
    fn whole_row_read_of_numbers_matches_one_entry_per_column() {
        let column = |name: &str, column_type, nullable| ColumnDef {
            name: name.into(),
            column_type,
            nullable,
        };
        let table = TableDef {
            indexes: Vec::new(),
            revision: 0,
            id: 2,
            version: 1,
            name: "numbers".into(),
            columns: vec![
                column("k", ColumnType::Int { unsigned: true }, false),
                column("a", ColumnType::BigInt { unsigned: false }, true),
                column("b", ColumnType::Double, false),
                column("c", ColumnType::Int { unsigned: false }, false),
            ],
            primary_key: vec![0],
            partitions: 1,
            partition_key: Vec::new(),
        };
        let layout = RowLayout::new(&table);
        assert!(layout.plain_read.is_some(), "numbers only: plain path");
        assert!(RowLayout::new(&table_def_with_char()).plain_read.is_none());
        let mut image = vec![0u8; layout.image_max_bytes()];
        for round in 0..50u32 {
            let key = entries(&[(0, Some(&round.to_le_bytes()))]);
            let a = (i64::from(round) * -3).to_le_bytes();
            let a = (round % 3 != 0).then_some(&a[..]);
            let b = (f64::from(round) / 7.0).to_le_bytes();
            let c = (round as i32 * 11).to_le_bytes();
            let changes = entries(&[(1, a), (2, Some(&b)), (3, Some(&c))]);
            let length = layout
                .build_image(&mut image, None, &key, &changes)
                .expect("valid insert");
            let view = layout.image_view(&image[..length]);
            let expected: Vec<(u16, Option<&[u8]>)> = (0..4)
                .map(|column| (column as u16, layout.value(view, column)))
                .collect();
            let mut out = vec![0x55u8; layout.read_max_bytes];
            let used = layout.encode_read(view, &[], &mut out).expect("fits");
            assert_eq!(&out[..used], &entries(&expected)[..], "round {round}");
        }
    }

    fn table_def_with_char() -> TableDef {
        let mut def = table();
        def.columns[0].column_type = ColumnType::Int { unsigned: false };
        def.columns[3].column_type = ColumnType::Int { unsigned: false };
        def
    }

    #[test]
    fn bad_values_are_refused() {
        let layout = RowLayout::new(&table());
        let key = entries(&[(0, Some(b"k"))]);
        let mut image = vec![0u8; layout.image_max_bytes()];
        let missing_not_null = entries(&[(1, Some(&5i32.to_le_bytes()))]);
        assert_eq!(
            layout.build_image(&mut image, None, &key, &missing_not_null),
            Err(ErrorCode::NullNotAllowed)
        );
        let too_long = entries(&[(4, Some(&1u64.to_le_bytes())), (2, Some(b"abcde"))]);
        assert_eq!(
            layout.build_image(&mut image, None, &key, &too_long),
            Err(ErrorCode::ValueTooLong)
        );
        let wrong_width = entries(&[(4, Some(&1u32.to_le_bytes()))]);
        assert_eq!(
            layout.build_image(&mut image, None, &key, &wrong_width),
            Err(ErrorCode::BadValue)
        );
        let unknown = entries(&[(4, Some(&1u64.to_le_bytes())), (9, None)]);
        assert_eq!(
            layout.build_image(&mut image, None, &key, &unknown),
            Err(ErrorCode::UnknownColumn)
        );
        let key_changed = entries(&[(4, Some(&1u64.to_le_bytes())), (0, Some(b"other"))]);
        assert_eq!(
            layout.build_image(&mut image, None, &key, &key_changed),
            Err(ErrorCode::BadRequest)
        );
    }
}
