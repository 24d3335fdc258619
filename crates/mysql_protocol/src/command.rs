//! command: the command phase from the client's side: decoding a command
//! packet into a `Command`, and the binary-protocol parameters of
//! COM_STMT_EXECUTE into `ParamValue`s.

use crate::constants::{
    ColumnType, COM_CHANGE_USER, COM_DEBUG, COM_FIELD_LIST, COM_INIT_DB, COM_PING,
    COM_PROCESS_KILL, COM_QUERY, COM_QUIT, COM_RESET_CONNECTION, COM_SET_OPTION, COM_STATISTICS,
    COM_STMT_CLOSE, COM_STMT_EXECUTE, COM_STMT_FETCH, COM_STMT_PREPARE, COM_STMT_RESET,
    COM_STMT_SEND_LONG_DATA,
};
use crate::error::WireError;
use crate::lenenc::Reader;

/// One command from a client, borrowing from its packet's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command<'a> {
    /// COM_QUIT: the client is closing the connection.
    Quit,
    /// COM_INIT_DB: change to the named database.
    InitDb(&'a [u8]),
    /// COM_QUERY: the query text (the rest of the packet).
    Query(&'a [u8]),
    /// COM_FIELD_LIST: the table name and wildcard, undecoded.
    FieldList(&'a [u8]),
    /// COM_PING.
    Ping,
    /// COM_STATISTICS.
    Statistics,
    /// COM_PROCESS_KILL: the connection id to kill.
    ProcessKill(u32),
    /// COM_DEBUG.
    Debug,
    /// COM_RESET_CONNECTION.
    ResetConnection,
    /// COM_SET_OPTION: `MYSQL_OPTION_MULTI_STATEMENTS_ON` or `_OFF`.
    SetOption(u16),
    /// COM_STMT_PREPARE: the statement text.
    StmtPrepare(&'a [u8]),
    /// COM_STMT_EXECUTE.
    StmtExecute(StmtExecute<'a>),
    /// COM_STMT_SEND_LONG_DATA: a piece of a parameter's value, appended to
    /// what earlier pieces sent (no response).
    StmtSendLongData {
        /// The prepared statement.
        statement_id: u32,
        /// The parameter's index.
        param: u16,
        /// The piece.
        data: &'a [u8],
    },
    /// COM_STMT_CLOSE: the statement to forget (no response).
    StmtClose(u32),
    /// COM_STMT_RESET: the statement whose long data and cursor to drop.
    StmtReset(u32),
    /// COM_STMT_FETCH: fetch from a statement's cursor.
    StmtFetch {
        /// The prepared statement.
        statement_id: u32,
        /// How many rows to send.
        rows: u32,
    },
    /// COM_CHANGE_USER (the body is not decoded; servers may refuse it).
    ChangeUser,
    /// Any other command byte.
    Other(u8),
}

/// COM_STMT_EXECUTE's fixed part; the parameters in `rest` need the
/// statement's parameter count, so `decode_execute_params` reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StmtExecute<'a> {
    /// The prepared statement.
    pub statement_id: u32,
    /// Cursor flags (`CURSOR_TYPE_*`).
    pub flags: u8,
    /// Always 1.
    pub iteration_count: u32,
    /// The parameter block: NULL bitmap, new-params-bound flag, types,
    /// values.
    pub rest: &'a [u8],
}

/// Decodes a command-phase packet. An empty payload is `Malformed`; an
/// unknown command byte is `Command::Other` for the server to refuse.
/// Trailing bytes after a command's fields are ignored, as MySQL does.
pub fn decode_command(payload: &[u8]) -> Result<Command<'_>, WireError> {
    let Some((&command_byte, body)) = payload.split_first() else {
        return Err(WireError::Malformed("empty command packet".to_string()));
    };
    let mut reader = Reader::new(body);
    Ok(match command_byte {
        COM_QUIT => Command::Quit,
        COM_INIT_DB => Command::InitDb(body),
        // CLIENT_QUERY_ATTRIBUTES is never advertised, so there is no
        // attributes prefix: the whole body is the query.
        COM_QUERY => Command::Query(body),
        COM_FIELD_LIST => Command::FieldList(body),
        COM_STATISTICS => Command::Statistics,
        COM_PROCESS_KILL => Command::ProcessKill(reader.u32()?),
        COM_DEBUG => Command::Debug,
        COM_PING => Command::Ping,
        COM_CHANGE_USER => Command::ChangeUser,
        COM_STMT_PREPARE => Command::StmtPrepare(body),
        COM_STMT_EXECUTE => Command::StmtExecute(StmtExecute {
            statement_id: reader.u32()?,
            flags: reader.u8()?,
            iteration_count: reader.u32()?,
            rest: reader.rest(),
        }),
        COM_STMT_SEND_LONG_DATA => Command::StmtSendLongData {
            statement_id: reader.u32()?,
            param: reader.u16()?,
            data: reader.rest(),
        },
        COM_STMT_CLOSE => Command::StmtClose(reader.u32()?),
        COM_STMT_RESET => Command::StmtReset(reader.u32()?),
        COM_SET_OPTION => Command::SetOption(reader.u16()?),
        COM_STMT_FETCH => Command::StmtFetch {
            statement_id: reader.u32()?,
            rows: reader.u32()?,
        },
        COM_RESET_CONNECTION => Command::ResetConnection,
        other => Command::Other(other),
    })
}

/// A parameter's type as the client bound it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamType {
    /// The wire type byte (see `ColumnType::from_u8`); kept raw so a
    /// statement remembers exactly what the client sent.
    pub column_type: u8,
    /// Whether integers are unsigned (flag byte 0x80).
    pub unsigned: bool,
}

/// One decoded parameter value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParamValue<'a> {
    /// SQL NULL.
    Null,
    /// A signed integer of any width.
    Int(i64),
    /// An unsigned integer of any width.
    UInt(u64),
    /// FLOAT (widened) or DOUBLE.
    Double(f64),
    /// Strings, decimals (as text), BLOBs, JSON, BIT, geometry, and any
    /// parameter sent as long data.
    Bytes(&'a [u8]),
    /// DATE, DATETIME or TIMESTAMP; omitted parts are zero.
    DateTime {
        /// Year.
        year: u16,
        /// Month, 1-12 (0 in zero dates).
        month: u8,
        /// Day, 1-31 (0 in zero dates).
        day: u8,
        /// Hour.
        hour: u8,
        /// Minute.
        minute: u8,
        /// Second.
        second: u8,
        /// Microsecond.
        microsecond: u32,
    },
    /// TIME: a signed duration of days and a time of day.
    Time {
        /// Whether the duration is negative.
        negative: bool,
        /// Days.
        days: u32,
        /// Hours.
        hour: u8,
        /// Minutes.
        minute: u8,
        /// Seconds.
        second: u8,
        /// Microseconds.
        microsecond: u32,
    },
}

/// The flag byte bit that marks a parameter's integer type unsigned.
const UNSIGNED_PARAM_FLAG: u8 = 0x80;

/// Decodes COM_STMT_EXECUTE's parameter block (`StmtExecute::rest`) for a
/// statement with `param_count` parameters.
///
/// When the new-params-bound flag is set (any non-zero byte, as MySQL
/// reads it) the packet's types replace `types`; otherwise the statement's
/// remembered `types` are used and must have `param_count` entries. A
/// parameter with long data (`long_data[index]` is `Some`) takes those
/// bytes and has no value in the packet, whatever its NULL bit says (as in
/// MySQL). `long_data` may be shorter than `param_count`, e.g. empty.
pub fn decode_execute_params<'a>(
    rest: &'a [u8],
    param_count: usize,
    types: &mut Vec<ParamType>,
    long_data: &'a [Option<Vec<u8>>],
) -> Result<Vec<ParamValue<'a>>, WireError> {
    if param_count == 0 {
        return Ok(Vec::new());
    }
    let mut reader = Reader::new(rest);
    let null_bitmap = reader
        .bytes(param_count.div_ceil(8))
        .map_err(|_| WireError::Truncated("parameter NULL bitmap"))?;
    let new_params_bound = reader
        .u8()
        .map_err(|_| WireError::Truncated("new-params-bound flag"))?;
    if new_params_bound != 0 {
        let type_bytes = param_count
            .checked_mul(2)
            .and_then(|length| reader.bytes(length).ok())
            .ok_or(WireError::Truncated("parameter types"))?;
        types.clear();
        types.extend(type_bytes.chunks_exact(2).map(|pair| ParamType {
            column_type: pair[0],
            unsigned: pair[1] & UNSIGNED_PARAM_FLAG != 0,
        }));
    } else if types.len() != param_count {
        return Err(WireError::Malformed(
            "parameter types never sent".to_string(),
        ));
    }

    let mut values = Vec::with_capacity(param_count);
    for (index, param_type) in types.iter().enumerate() {
        if let Some(Some(data)) = long_data.get(index) {
            values.push(ParamValue::Bytes(data));
        } else if null_bitmap[index / 8] & (1 << (index % 8)) != 0 {
            values.push(ParamValue::Null);
        } else {
            values.push(decode_value(&mut reader, *param_type, index)?);
        }
    }
    Ok(values)
}

/// Reads one binary-protocol value of `param_type`.
fn decode_value<'a>(
    reader: &mut Reader<'a>,
    param_type: ParamType,
    index: usize,
) -> Result<ParamValue<'a>, WireError> {
    let Some(column_type) = ColumnType::from_u8(param_type.column_type) else {
        return Err(WireError::Malformed(format!(
            "parameter {index} has unknown type {}",
            param_type.column_type
        )));
    };
    let unsigned = param_type.unsigned;
    Ok(match column_type {
        ColumnType::Null => ParamValue::Null,
        ColumnType::Tiny => {
            let byte = reader.u8()?;
            if unsigned {
                ParamValue::UInt(u64::from(byte))
            } else {
                ParamValue::Int(i64::from(byte as i8))
            }
        }
        ColumnType::Short | ColumnType::Year => {
            let value = reader.u16()?;
            if unsigned {
                ParamValue::UInt(u64::from(value))
            } else {
                ParamValue::Int(i64::from(value as i16))
            }
        }
        ColumnType::Long | ColumnType::Int24 => {
            let value = reader.u32()?;
            if unsigned {
                ParamValue::UInt(u64::from(value))
            } else {
                ParamValue::Int(i64::from(value as i32))
            }
        }
        ColumnType::LongLong => {
            let value = reader.u64()?;
            if unsigned {
                ParamValue::UInt(value)
            } else {
                ParamValue::Int(value as i64)
            }
        }
        ColumnType::Float => ParamValue::Double(f64::from(f32::from_bits(reader.u32()?))),
        ColumnType::Double => ParamValue::Double(f64::from_bits(reader.u64()?)),
        ColumnType::Date | ColumnType::DateTime | ColumnType::Timestamp => {
            decode_date_time(reader, index)?
        }
        ColumnType::Time => decode_time(reader, index)?,
        ColumnType::Decimal
        | ColumnType::NewDecimal
        | ColumnType::VarChar
        | ColumnType::VarString
        | ColumnType::String
        | ColumnType::TinyBlob
        | ColumnType::MediumBlob
        | ColumnType::LongBlob
        | ColumnType::Blob
        | ColumnType::Enum
        | ColumnType::Set
        | ColumnType::Json
        | ColumnType::Bit
        | ColumnType::Geometry => ParamValue::Bytes(reader.lenenc_bytes()?),
    })
}

/// A binary DATE/DATETIME/TIMESTAMP: a length byte (0, 4, 7 or 11), then
/// year(2) month day, hour minute second, microsecond(4) as far as it goes.
fn decode_date_time<'a>(
    reader: &mut Reader<'a>,
    index: usize,
) -> Result<ParamValue<'a>, WireError> {
    let length = reader.u8()?;
    if !matches!(length, 0 | 4 | 7 | 11) {
        return Err(WireError::Malformed(format!(
            "parameter {index}: date length {length} is not 0, 4, 7 or 11"
        )));
    }
    let mut value = Reader::new(
        reader
            .bytes(usize::from(length))
            .map_err(|_| WireError::Truncated("date value"))?,
    );
    let (mut year, mut month, mut day, mut hour, mut minute, mut second, mut microsecond) =
        (0, 0, 0, 0, 0, 0, 0);
    if length >= 4 {
        year = value.u16()?;
        month = value.u8()?;
        day = value.u8()?;
    }
    if length >= 7 {
        hour = value.u8()?;
        minute = value.u8()?;
        second = value.u8()?;
    }
    if length >= 11 {
        microsecond = value.u32()?;
    }
    Ok(ParamValue::DateTime {
        year,
        month,
        day,
        hour,
        minute,
        second,
        microsecond,
    })
}

/// A binary TIME: a length byte (0, 8 or 12), then negative flag, days(4),
/// hour minute second, microsecond(4) as far as it goes.
fn decode_time<'a>(reader: &mut Reader<'a>, index: usize) -> Result<ParamValue<'a>, WireError> {
    let length = reader.u8()?;
    if !matches!(length, 0 | 8 | 12) {
        return Err(WireError::Malformed(format!(
            "parameter {index}: time length {length} is not 0, 8 or 12"
        )));
    }
    let mut value = Reader::new(
        reader
            .bytes(usize::from(length))
            .map_err(|_| WireError::Truncated("time value"))?,
    );
    let (mut negative, mut days, mut hour, mut minute, mut second, mut microsecond) =
        (false, 0, 0, 0, 0, 0);
    if length >= 8 {
        negative = value.u8()? != 0;
        days = value.u32()?;
        hour = value.u8()?;
        minute = value.u8()?;
        second = value.u8()?;
    }
    if length >= 12 {
        microsecond = value.u32()?;
    }
    Ok(ParamValue::Time {
        negative,
        days,
        hour,
        minute,
        second,
        microsecond,
    })
}
