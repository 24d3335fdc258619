//! response: the server's side of the command phase: OK, ERR and EOF
//! packets, result set metadata, text and binary rows, and the answer to
//! COM_STMT_PREPARE. Every encoder appends one packet's payload to `out`;
//! framing is `PacketWriter`'s job.

use crate::constants::ColumnType;
use crate::lenenc::{put_lenenc_bytes, put_lenenc_int, LENENC_NULL};

/// An OK packet's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OkPacket<'a> {
    /// Rows changed (or matched, with CLIENT_FOUND_ROWS).
    pub affected_rows: u64,
    /// The AUTO_INCREMENT value the statement generated, or 0.
    pub last_insert_id: u64,
    /// Server status flags.
    pub status: u16,
    /// Warning count.
    pub warnings: u16,
    /// Human-readable information, e.g. `Rows matched: 1  Changed: 1`.
    pub info: &'a str,
}

/// Appends the fields after an OK packet's header byte, without `info`.
fn put_ok_body(out: &mut Vec<u8>, ok: &OkPacket) {
    put_lenenc_int(out, ok.affected_rows);
    put_lenenc_int(out, ok.last_insert_id);
    out.extend_from_slice(&ok.status.to_le_bytes());
    out.extend_from_slice(&ok.warnings.to_le_bytes());
}

/// Appends an OK packet (header 0x00). A non-empty `info` is written as a
/// length-encoded string, as MySQL's server writes it (`net_store_data`)
/// and as libmariadb reads it whatever the capabilities; an empty one is
/// left out.
pub fn encode_ok(out: &mut Vec<u8>, ok: &OkPacket) {
    out.push(0x00);
    put_ok_body(out, ok);
    if !ok.info.is_empty() {
        crate::lenenc::put_lenenc_bytes(out, ok.info.as_bytes());
    }
}

/// Appends the OK packet with header 0xFE that ends a result set when
/// CLIENT_DEPRECATE_EOF is on. `info` is omitted: clients tell this packet
/// from a row that starts with 0xFE by its length (under 9 bytes), so it is
/// kept short; `affected_rows` and `last_insert_id` should be 0 for the
/// same reason, as the MySQL server sends them.
pub fn encode_eof_ok(out: &mut Vec<u8>, ok: &OkPacket) {
    out.push(0xFE);
    put_ok_body(out, ok);
}

/// Appends an ERR packet: 0xFF, the error code, `#`, the 5-character
/// SQLSTATE, then the message.
pub fn encode_err(out: &mut Vec<u8>, code: u16, sql_state: &[u8; 5], message: &str) {
    out.push(0xFF);
    out.extend_from_slice(&code.to_le_bytes());
    out.push(b'#');
    out.extend_from_slice(sql_state);
    out.extend_from_slice(message.as_bytes());
}

/// Appends an EOF packet (without CLIENT_DEPRECATE_EOF: after column
/// definitions and after the last row).
pub fn encode_eof(out: &mut Vec<u8>, warnings: u16, status: u16) {
    out.push(0xFE);
    out.extend_from_slice(&warnings.to_le_bytes());
    out.extend_from_slice(&status.to_le_bytes());
}

/// One column of a result set's metadata (Protocol::ColumnDefinition41).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnDefinition<'a> {
    /// The database.
    pub schema: &'a str,
    /// The table alias.
    pub table: &'a str,
    /// The table's real name.
    pub org_table: &'a str,
    /// The column alias.
    pub name: &'a str,
    /// The column's real name.
    pub org_name: &'a str,
    /// The collation id (`BINARY_CHARSET` for numbers and dates).
    pub charset: u16,
    /// The maximum display length.
    pub column_length: u32,
    /// The column's type.
    pub column_type: ColumnType,
    /// Column flags (`NOT_NULL_FLAG`, ...).
    pub flags: u16,
    /// Digits after the decimal point (0x1F for floats of no fixed scale).
    pub decimals: u8,
}

impl ColumnDefinition<'_> {
    /// Appends the column definition's payload.
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_lenenc_bytes(out, b"def");
        put_lenenc_bytes(out, self.schema.as_bytes());
        put_lenenc_bytes(out, self.table.as_bytes());
        put_lenenc_bytes(out, self.org_table.as_bytes());
        put_lenenc_bytes(out, self.name.as_bytes());
        put_lenenc_bytes(out, self.org_name.as_bytes());
        // The length of the fixed-size fields that follow.
        out.push(0x0C);
        out.extend_from_slice(&self.charset.to_le_bytes());
        out.extend_from_slice(&self.column_length.to_le_bytes());
        out.push(self.column_type as u8);
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.push(self.decimals);
        out.extend_from_slice(&[0, 0]);
    }
}

/// Appends the first packet of a result set: its column count.
pub fn encode_column_count(out: &mut Vec<u8>, count: u64) {
    put_lenenc_int(out, count);
}

/// Appends a text-protocol row: each value as a length-encoded string,
/// NULL as 0xFB.
pub fn encode_text_row<'b>(out: &mut Vec<u8>, values: impl IntoIterator<Item = Option<&'b [u8]>>) {
    for value in values {
        match value {
            Some(bytes) => put_lenenc_bytes(out, bytes),
            None => out.push(LENENC_NULL),
        }
    }
}

/// The binary-protocol row writers, grouped under one name; each is also a
/// free function of the same name in this module.
///
/// A binary row is a 0x00 header, a NULL bitmap whose first two bits are
/// reserved (so column `c` is bit `c + 2`), then each non-NULL column's
/// value in its type's binary form.
#[derive(Debug, Clone, Copy)]
pub struct BinaryRow;

impl BinaryRow {
    /// See the free function `begin_binary_row`.
    pub fn begin_binary_row(out: &mut Vec<u8>, columns: usize) -> usize {
        begin_binary_row(out, columns)
    }

    /// See the free function `set_binary_null`.
    #[allow(clippy::ptr_arg)] // The signature the server crate was written against.
    pub fn set_binary_null(out: &mut Vec<u8>, bitmap_offset: usize, column: usize) {
        set_binary_null(out, bitmap_offset, column)
    }

    /// See the free function `put_binary_int`.
    pub fn put_binary_int(out: &mut Vec<u8>, column_type: ColumnType, value: i64) {
        put_binary_int(out, column_type, value)
    }

    /// See the free function `put_binary_double`.
    pub fn put_binary_double(out: &mut Vec<u8>, value: f64) {
        put_binary_double(out, value)
    }

    /// See the free function `put_binary_float`.
    pub fn put_binary_float(out: &mut Vec<u8>, value: f32) {
        put_binary_float(out, value)
    }

    /// See the free function `put_binary_bytes`.
    pub fn put_binary_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
        put_binary_bytes(out, bytes)
    }
}

/// Starts a binary-protocol row of `columns` columns: appends the 0x00
/// header and a zeroed NULL bitmap of (columns + 7 + 2) / 8 bytes, and
/// returns the bitmap's offset in `out` for `set_binary_null`. Values
/// follow with the `put_binary_*` writers.
pub fn begin_binary_row(out: &mut Vec<u8>, columns: usize) -> usize {
    out.push(0x00);
    let bitmap_offset = out.len();
    out.resize(bitmap_offset + (columns + 7 + 2) / 8, 0);
    bitmap_offset
}

/// Marks `column` NULL in the bitmap at `bitmap_offset` (bit column + 2, as
/// the first two bits are reserved). A NULL column has no value bytes.
///
/// # Panics
///
/// When the bit lies outside `out`: `column` or `bitmap_offset` do not
/// belong to the row `begin_binary_row` started, a bug in the caller.
#[allow(clippy::ptr_arg)] // The signature the server crate was written against.
pub fn set_binary_null(out: &mut Vec<u8>, bitmap_offset: usize, column: usize) {
    let bit = column + 2;
    out[bitmap_offset + bit / 8] |= 1 << (bit % 8);
}

/// Appends an integer in `column_type`'s width: Tiny 1 byte, Short and Year
/// 2, Long and Int24 4, LongLong (and any other type) 8, little-endian and
/// truncated. Unsigned values are passed as `value as i64`: the bytes are
/// the same.
pub fn put_binary_int(out: &mut Vec<u8>, column_type: ColumnType, value: i64) {
    let bytes = value.to_le_bytes();
    let width = match column_type {
        ColumnType::Tiny => 1,
        ColumnType::Short | ColumnType::Year => 2,
        ColumnType::Long | ColumnType::Int24 => 4,
        _ => 8,
    };
    out.extend_from_slice(&bytes[..width]);
}

/// Appends a DOUBLE: 8 bytes IEEE little-endian.
pub fn put_binary_double(out: &mut Vec<u8>, value: f64) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// Appends a FLOAT: 4 bytes IEEE little-endian.
pub fn put_binary_float(out: &mut Vec<u8>, value: f32) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// Appends a string, decimal, BLOB, JSON or BIT value: a length-encoded
/// string.
pub fn put_binary_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_lenenc_bytes(out, bytes);
}

/// Appends a DATE, DATETIME or TIMESTAMP in its shortest binary form:
/// length 0 (all zero), 4 (date only), 7 (with time) or 11 (with
/// microseconds).
#[allow(clippy::too_many_arguments)] // The seven parts of a datetime.
pub fn put_binary_date_time(
    out: &mut Vec<u8>,
    year: u16,
    month: u8,
    day: u8,
    hour: u8,
    minute: u8,
    second: u8,
    microsecond: u32,
) {
    let has_microsecond = microsecond != 0;
    let has_time = has_microsecond || hour != 0 || minute != 0 || second != 0;
    let has_date = has_time || year != 0 || month != 0 || day != 0;
    let length: u8 = if has_microsecond {
        11
    } else if has_time {
        7
    } else if has_date {
        4
    } else {
        0
    };
    out.push(length);
    if length >= 4 {
        out.extend_from_slice(&year.to_le_bytes());
        out.extend_from_slice(&[month, day]);
    }
    if length >= 7 {
        out.extend_from_slice(&[hour, minute, second]);
    }
    if length >= 11 {
        out.extend_from_slice(&microsecond.to_le_bytes());
    }
}

/// Appends a TIME in its shortest binary form: length 0 (zero), 8 (no
/// microseconds) or 12.
pub fn put_binary_time(
    out: &mut Vec<u8>,
    negative: bool,
    days: u32,
    hour: u8,
    minute: u8,
    second: u8,
    microsecond: u32,
) {
    let is_zero = days == 0 && hour == 0 && minute == 0 && second == 0 && microsecond == 0;
    if is_zero {
        out.push(0);
        return;
    }
    out.push(if microsecond != 0 { 12 } else { 8 });
    out.push(u8::from(negative));
    out.extend_from_slice(&days.to_le_bytes());
    out.extend_from_slice(&[hour, minute, second]);
    if microsecond != 0 {
        out.extend_from_slice(&microsecond.to_le_bytes());
    }
}

/// The answer to COM_STMT_PREPARE (COM_STMT_PREPARE_OK); parameter and
/// column definitions follow it as separate packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrepareOk {
    /// The new statement's id.
    pub statement_id: u32,
    /// How many result columns it has.
    pub columns: u16,
    /// How many `?` parameters it has.
    pub params: u16,
    /// Warning count.
    pub warnings: u16,
}

impl PrepareOk {
    /// Appends the payload: 0x00, id, columns, params, a 0 filler,
    /// warnings.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(0x00);
        out.extend_from_slice(&self.statement_id.to_le_bytes());
        out.extend_from_slice(&self.columns.to_le_bytes());
        out.extend_from_slice(&self.params.to_le_bytes());
        out.push(0);
        out.extend_from_slice(&self.warnings.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::constants::{BINARY_CHARSET, NOT_NULL_FLAG, NUM_FLAG, PRI_KEY_FLAG};

    #[test]
    fn ok_packet_bytes() {
        let mut out = Vec::new();
        let ok = OkPacket {
            affected_rows: 300,
            last_insert_id: 5,
            status: 0x0002,
            warnings: 1,
            info: "hi",
        };
        encode_ok(&mut out, &ok);
        assert_eq!(
            out,
            [0x00, 0xFC, 0x2C, 0x01, 0x05, 0x02, 0x00, 0x01, 0x00, 2, b'h', b'i']
        );
    }

    #[test]
    fn eof_ok_packet_bytes() {
        let mut out = Vec::new();
        encode_eof_ok(
            &mut out,
            &OkPacket {
                status: 0x0022,
                info: "ignored",
                ..OkPacket::default()
            },
        );
        assert_eq!(out, [0xFE, 0x00, 0x00, 0x22, 0x00, 0x00, 0x00]);
    }

    #[test]
    fn err_packet_bytes() {
        let mut out = Vec::new();
        encode_err(&mut out, 1064, b"42000", "oops");
        assert_eq!(
            out,
            [0xFF, 0x28, 0x04, b'#', b'4', b'2', b'0', b'0', b'0', b'o', b'o', b'p', b's']
        );
    }

    #[test]
    fn eof_packet_bytes() {
        let mut out = Vec::new();
        encode_eof(&mut out, 3, 0x0002);
        assert_eq!(out, [0xFE, 0x03, 0x00, 0x02, 0x00]);
    }

    #[test]
    fn column_definition_bytes() {
        let mut out = Vec::new();
        ColumnDefinition {
            schema: "db",
            table: "t",
            org_table: "tab",
            name: "c",
            org_name: "col",
            charset: u16::from(BINARY_CHARSET),
            column_length: 11,
            column_type: ColumnType::Long,
            flags: NOT_NULL_FLAG | PRI_KEY_FLAG | NUM_FLAG,
            decimals: 0,
        }
        .encode(&mut out);
        let expected: &[u8] = &[
            3, b'd', b'e', b'f', 2, b'd', b'b', 1, b't', 3, b't', b'a', b'b', 1, b'c', 3, b'c',
            b'o', b'l', 0x0C, 63, 0, 11, 0, 0, 0, 3, 0x03, 0x80, 0, 0, 0,
        ];
        assert_eq!(out, expected);
    }

    #[test]
    fn column_count_bytes() {
        let mut out = Vec::new();
        encode_column_count(&mut out, 3);
        encode_column_count(&mut out, 251);
        assert_eq!(out, [3, 0xFC, 0xFB, 0x00]);
    }

    #[test]
    fn text_row_bytes() {
        let mut out = Vec::new();
        encode_text_row(&mut out, [Some(&b"1"[..]), None, Some(&b""[..])]);
        assert_eq!(out, [1, b'1', 0xFB, 0]);
    }

    #[test]
    fn binary_row_bytes() {
        let mut out = vec![0xAA]; // Bytes before the row stay put.
        let bitmap = begin_binary_row(&mut out, 7);
        assert_eq!(bitmap, 2);
        set_binary_null(&mut out, bitmap, 1);
        set_binary_null(&mut out, bitmap, 6);
        put_binary_int(&mut out, ColumnType::Tiny, -1);
        put_binary_int(&mut out, ColumnType::Short, 0x0102);
        put_binary_int(&mut out, ColumnType::Int24, 0x01020304);
        put_binary_int(&mut out, ColumnType::LongLong, -2);
        put_binary_double(&mut out, 1.0);
        put_binary_float(&mut out, 1.0);
        put_binary_bytes(&mut out, b"ab");
        let expected: &[u8] = &[
            0xAA,
            0x00, // Row header.
            0b0000_1000,
            0b0000_0001, // Columns 1 and 6 are bits 3 and 8.
            0xFF,
            0x02,
            0x01,
            0x04,
            0x03,
            0x02,
            0x01, // Tiny, Short, Int24.
            0xFE,
            0xFF,
            0xFF,
            0xFF,
            0xFF,
            0xFF,
            0xFF,
            0xFF, // LongLong.
            0,
            0,
            0,
            0,
            0,
            0,
            0xF0,
            0x3F, // Double 1.0.
            0,
            0,
            0x80,
            0x3F, // Float 1.0.
            2,
            b'a',
            b'b',
        ];
        assert_eq!(out, expected);
    }

    #[test]
    fn binary_null_bitmap_sizes() {
        for (columns, bitmap_length) in [(0, 1), (1, 1), (6, 1), (7, 2), (14, 2), (15, 3)] {
            let mut out = Vec::new();
            let offset = BinaryRow::begin_binary_row(&mut out, columns);
            assert_eq!(out.len() - offset, bitmap_length, "{columns} columns");
        }
    }

    #[test]
    fn binary_date_and_time_bytes() {
        let mut out = Vec::new();
        put_binary_date_time(&mut out, 0, 0, 0, 0, 0, 0, 0);
        put_binary_date_time(&mut out, 2024, 2, 29, 0, 0, 0, 0);
        put_binary_date_time(&mut out, 2024, 2, 29, 13, 14, 15, 0);
        put_binary_date_time(&mut out, 2024, 2, 29, 13, 14, 15, 7);
        let expected: &[u8] = &[
            0, 4, 0xE8, 0x07, 2, 29, 7, 0xE8, 0x07, 2, 29, 13, 14, 15, 11, 0xE8, 0x07, 2, 29, 13,
            14, 15, 7, 0, 0, 0,
        ];
        assert_eq!(out, expected);
        out.clear();
        put_binary_time(&mut out, false, 0, 0, 0, 0, 0);
        put_binary_time(&mut out, true, 1, 2, 3, 4, 0);
        put_binary_time(&mut out, false, 0, 0, 0, 1, 5);
        let expected: &[u8] = &[
            0, 8, 1, 1, 0, 0, 0, 2, 3, 4, 12, 0, 0, 0, 0, 0, 0, 0, 1, 5, 0, 0, 0,
        ];
        assert_eq!(out, expected);
    }

    #[test]
    fn prepare_ok_bytes() {
        let mut out = Vec::new();
        PrepareOk {
            statement_id: 0x01020304,
            columns: 2,
            params: 3,
            warnings: 4,
        }
        .encode(&mut out);
        assert_eq!(out, [0x00, 0x04, 0x03, 0x02, 0x01, 2, 0, 3, 0, 0, 4, 0]);
    }
}
