//! A statement's result in MySQL's protocol: OK and ERR packets, result
//! sets in the text protocol (COM_QUERY) and the binary one
//! (COM_STMT_EXECUTE), column definitions from the engine's columns.

use mysql_protocol::{self as wire, ColumnType, OkPacket, PacketWriter};
use sql::value::Value;
use sql::{ColumnKind, OutputColumn, Response, SqlError};

/// utf8mb4 with a binary collation: how the cluster compares text.
const UTF8MB4_BIN: u16 = 46;

/// What the encoders need of the connection.
pub struct Framing<'a> {
    /// Where packets go.
    pub out: &'a mut Vec<u8>,
    /// Sequence ids.
    pub writer: &'a mut PacketWriter,
    /// CLIENT_DEPRECATE_EOF: result sets end with an OK, no EOF between.
    pub deprecate_eof: bool,
    /// CLIENT_FOUND_ROWS: UPDATE reports rows matched.
    pub found_rows: bool,
    /// Server status flags for OK and EOF.
    pub status: u16,
    /// The statement's warning count, for OK and EOF.
    pub warnings: u16,
}

impl Framing<'_> {
    fn packet(&mut self, payload: impl FnOnce(&mut Vec<u8>)) {
        let start = self.writer.begin(self.out);
        payload(self.out);
        self.writer.finish(self.out, start);
    }

    /// An OK.
    pub fn ok(&mut self, affected_rows: u64, last_insert_id: u64, info: &str) {
        let (status, warnings) = (self.status, self.warnings);
        self.packet(|out| {
            wire::response::encode_ok(
                out,
                &OkPacket {
                    affected_rows,
                    last_insert_id,
                    status,
                    warnings,
                    info,
                },
            )
        });
    }

    /// An ERR.
    pub fn error(&mut self, error: &SqlError) {
        let mut state = [b'H', b'Y', b'0', b'0', b'0'];
        if error.state.len() == 5 {
            state.copy_from_slice(error.state.as_bytes());
        }
        self.packet(|out| wire::response::encode_err(out, error.code, &state, &error.message));
    }

    /// The end of a list of definitions or rows.
    pub fn end_of(&mut self, rows: bool) {
        let (status, warnings) = (self.status, self.warnings);
        match (self.deprecate_eof, rows) {
            (true, true) => self.packet(|out| {
                wire::response::encode_eof_ok(
                    out,
                    &OkPacket {
                        affected_rows: 0,
                        last_insert_id: 0,
                        status,
                        warnings,
                        info: "",
                    },
                )
            }),
            (true, false) => {}
            (false, _) => self.packet(|out| wire::response::encode_eof(out, warnings, status)),
        }
    }

    /// Column definitions.
    pub fn columns(&mut self, columns: &[OutputColumn]) {
        for column in columns {
            self.packet(|out| definition(column).encode(out));
        }
    }

    /// A statement's response (text protocol when `binary` is false).
    pub fn response(&mut self, response: &Response, binary: bool) {
        match response {
            Response::Ok {
                affected_rows,
                matched_rows,
                last_insert_id,
                info,
            } => {
                let affected = if self.found_rows {
                    *matched_rows
                } else {
                    *affected_rows
                };
                self.ok(affected, *last_insert_id, info);
            }
            Response::Rows { columns, rows } => {
                self.packet(|out| wire::response::encode_column_count(out, columns.len() as u64));
                self.columns(columns);
                self.end_of(false);
                let mut text = Vec::new();
                for row in rows {
                    match binary {
                        false => self.packet(|out| text_row(out, columns, row, &mut text)),
                        true => self.packet(|out| binary_row(out, columns, row)),
                    }
                }
                self.end_of(true);
            }
        }
    }
}

fn text_row(out: &mut Vec<u8>, columns: &[OutputColumn], row: &[Value], scratch: &mut Vec<u8>) {
    for (column, value) in columns.iter().zip(row) {
        scratch.clear();
        if column.kind.write_text(value, scratch) {
            wire::put_lenenc_bytes(out, scratch);
        } else {
            out.push(wire::lenenc::LENENC_NULL);
        }
    }
}

fn binary_row(out: &mut Vec<u8>, columns: &[OutputColumn], row: &[Value]) {
    let bitmap = wire::response::begin_binary_row(out, columns.len());
    let mut text = Vec::new();
    for (index, (column, value)) in columns.iter().zip(row).enumerate() {
        if value.is_null() || column.kind == ColumnKind::Null {
            wire::response::set_binary_null(out, bitmap, index);
            continue;
        }
        let integer = || match value {
            Value::Int(x) => *x,
            Value::UInt(x) => *x as i64,
            other => sql::value::to_f64(other).round() as i64,
        };
        match &column.kind {
            ColumnKind::Int { bytes, .. } => {
                let wire_type = match bytes {
                    1 => ColumnType::Tiny,
                    2 => ColumnType::Short,
                    3 => ColumnType::Int24,
                    _ => ColumnType::Long,
                };
                wire::response::put_binary_int(out, wire_type, integer())
            }
            ColumnKind::Year => wire::response::put_binary_int(out, ColumnType::Year, integer()),
            ColumnKind::BigInt { .. } => {
                wire::response::put_binary_int(out, ColumnType::LongLong, integer())
            }
            ColumnKind::Float => {
                wire::response::put_binary_float(out, sql::value::to_f64(value) as f32)
            }
            ColumnKind::Double => wire::response::put_binary_double(out, sql::value::to_f64(value)),
            ColumnKind::Date | ColumnKind::DateTime(_) | ColumnKind::Timestamp(_) => {
                match sql::value::datetime_of(value) {
                    Some(datetime) => {
                        let (hour, minute, second, micro) = datetime.clock();
                        let date = datetime.date;
                        wire::response::put_binary_date_time(
                            out,
                            date.year,
                            date.month,
                            date.day,
                            hour as u8,
                            minute as u8,
                            second as u8,
                            micro as u32,
                        );
                    }
                    // Not a date (a stored value that did not decode):
                    // the zero date rather than bytes the client misreads.
                    None => wire::response::put_binary_date_time(out, 0, 0, 0, 0, 0, 0, 0),
                }
            }
            ColumnKind::Time(_) => {
                let micros = match value {
                    Value::Time(time) => time.micros,
                    _ => 0,
                };
                let magnitude = micros.unsigned_abs();
                let seconds = magnitude / 1_000_000;
                wire::response::put_binary_time(
                    out,
                    micros < 0,
                    (seconds / 86_400) as u32,
                    (seconds / 3600 % 24) as u8,
                    (seconds / 60 % 60) as u8,
                    (seconds % 60) as u8,
                    (magnitude % 1_000_000) as u32,
                );
            }
            ColumnKind::Decimal { .. }
            | ColumnKind::Char(_)
            | ColumnKind::Text(_)
            | ColumnKind::LongText(_)
            | ColumnKind::Binary(_)
            | ColumnKind::Blob(_)
            | ColumnKind::Enum(_)
            | ColumnKind::Json
            | ColumnKind::Null => {
                text.clear();
                column.kind.write_text(value, &mut text);
                wire::response::put_binary_bytes(out, &text);
            }
        }
    }
}

/// The wire definition of a result column.
pub fn definition(column: &OutputColumn) -> wire::ColumnDefinition<'_> {
    let binary_charset = u16::from(wire::BINARY_CHARSET);
    let (column_type, length, charset, mut flags, decimals) = match column.kind {
        ColumnKind::Int { bytes, unsigned } => {
            let (wire_type, width) = match bytes {
                1 => (ColumnType::Tiny, 4),
                2 => (ColumnType::Short, 6),
                3 => (ColumnType::Int24, 9),
                _ => (ColumnType::Long, 11),
            };
            (
                wire_type,
                width,
                binary_charset,
                wire::NUM_FLAG | unsigned_flag(unsigned),
                0,
            )
        }
        ColumnKind::BigInt { unsigned } => (
            ColumnType::LongLong,
            20,
            binary_charset,
            wire::NUM_FLAG | unsigned_flag(unsigned),
            0,
        ),
        ColumnKind::Float => (ColumnType::Float, 12, binary_charset, wire::NUM_FLAG, 31),
        ColumnKind::Double => (ColumnType::Double, 22, binary_charset, wire::NUM_FLAG, 31),
        ColumnKind::Decimal { precision, scale } => (
            ColumnType::NewDecimal,
            // Digits, a point when there is a scale, and a sign.
            precision as u32 + u32::from(scale > 0) + 1,
            binary_charset,
            wire::NUM_FLAG,
            scale,
        ),
        ColumnKind::Date => (ColumnType::Date, 10, binary_charset, wire::BINARY_FLAG, 0),
        ColumnKind::DateTime(fsp) => (
            ColumnType::DateTime,
            19 + fraction_width(fsp),
            binary_charset,
            wire::BINARY_FLAG,
            fsp,
        ),
        ColumnKind::Timestamp(fsp) => (
            ColumnType::Timestamp,
            19 + fraction_width(fsp),
            binary_charset,
            wire::BINARY_FLAG | wire::TIMESTAMP_FLAG,
            fsp,
        ),
        ColumnKind::Time(fsp) => (
            ColumnType::Time,
            10 + fraction_width(fsp),
            binary_charset,
            wire::BINARY_FLAG,
            fsp,
        ),
        ColumnKind::Year => (
            ColumnType::Year,
            4,
            binary_charset,
            wire::NUM_FLAG | wire::UNSIGNED_FLAG | wire::ZEROFILL_FLAG,
            0,
        ),
        ColumnKind::Char(n) => (ColumnType::String, n * 4, UTF8MB4_BIN, 0, 0),
        ColumnKind::Text(n) => (ColumnType::VarString, n * 4, UTF8MB4_BIN, 0, 0),
        ColumnKind::LongText(n) => (ColumnType::Blob, n, UTF8MB4_BIN, wire::BLOB_FLAG, 0),
        ColumnKind::Binary(n) => (
            ColumnType::VarString,
            n,
            binary_charset,
            wire::BINARY_FLAG,
            0,
        ),
        ColumnKind::Blob(n) => (
            ColumnType::Blob,
            n,
            binary_charset,
            wire::BINARY_FLAG | wire::BLOB_FLAG,
            0,
        ),
        ColumnKind::Enum(n) => (ColumnType::String, n * 4, UTF8MB4_BIN, wire::ENUM_FLAG, 0),
        // As MySQL describes a JSON column: the binary character set,
        // which drivers know to read as utf8mb4.
        ColumnKind::Json => (
            ColumnType::Json,
            u32::MAX,
            binary_charset,
            wire::BLOB_FLAG | wire::BINARY_FLAG,
            0,
        ),
        ColumnKind::Null => (ColumnType::Null, 0, binary_charset, 0, 0),
    };
    if column.not_null {
        flags |= wire::NOT_NULL_FLAG;
    }
    if column.primary_key {
        flags |= wire::PRI_KEY_FLAG;
    }
    if column.auto_increment {
        flags |= wire::AUTO_INCREMENT_FLAG;
    }
    wire::ColumnDefinition {
        schema: &column.database,
        table: &column.table,
        org_table: &column.table,
        name: &column.name,
        org_name: &column.org_name,
        charset,
        column_length: length,
        column_type,
        flags,
        decimals,
    }
}

/// Characters a fraction of `fsp` digits adds: its point and digits.
fn fraction_width(fsp: u8) -> u32 {
    match fsp {
        0 => 0,
        fsp => fsp as u32 + 1,
    }
}

fn unsigned_flag(unsigned: bool) -> u16 {
    if unsigned {
        wire::UNSIGNED_FLAG
    } else {
        0
    }
}
