//! Column values as an application sees them, and their conversion to and
//! from the attribute encoding of `signal::attr` for a given column type.
//!
//! Conversion is checked on the client, before anything is sent: a value
//! that does not fit its column (out of range, too long, wrong kind) fails
//! here with the registry code the data node would have used, so a bad
//! value never costs a round trip or aborts a transaction on the node.

use signal::attr::{AttrWriter, NULL_LENGTH};
use signal::schema::ColumnType;
use signal::ErrorCode;
use std::fmt;

/// One column value.
///
/// ```
/// use client::Value;
/// assert_eq!(Value::from(7u32), Value::UInt(7));
/// assert_eq!(Value::from("abc"), Value::Bytes(b"abc".to_vec()));
/// assert_eq!(Value::from(None::<i64>), Value::Null);
/// ```
#[derive(Clone, PartialEq, Debug)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// A signed integer (INT, BIGINT).
    Int(i64),
    /// An unsigned integer (INT UNSIGNED, BIGINT UNSIGNED).
    UInt(u64),
    /// A double (DOUBLE).
    Double(f64),
    /// Bytes (CHAR, VARCHAR, VARBINARY).
    Bytes(Vec<u8>),
}

impl Value {
    /// The value as a signed integer, when it is an integer that fits.
    ///
    /// ```
    /// use client::Value;
    /// assert_eq!(Value::UInt(5).as_i64(), Some(5));
    /// assert_eq!(Value::UInt(u64::MAX).as_i64(), None);
    /// ```
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(value) => Some(*value),
            Value::UInt(value) => i64::try_from(*value).ok(),
            _ => None,
        }
    }

    /// The value as an unsigned integer, when it is a non-negative integer.
    ///
    /// ```
    /// use client::Value;
    /// assert_eq!(Value::Int(5).as_u64(), Some(5));
    /// assert_eq!(Value::Int(-1).as_u64(), None);
    /// ```
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Int(value) => u64::try_from(*value).ok(),
            Value::UInt(value) => Some(*value),
            _ => None,
        }
    }

    /// The value as a double (integers convert).
    ///
    /// ```
    /// use client::Value;
    /// assert_eq!(Value::Int(2).as_f64(), Some(2.0));
    /// ```
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Double(value) => Some(*value),
            Value::Int(value) => Some(*value as f64),
            Value::UInt(value) => Some(*value as f64),
            _ => None,
        }
    }

    /// The bytes of a CHAR, VARCHAR or VARBINARY value.
    ///
    /// ```
    /// use client::Value;
    /// assert_eq!(Value::from("hi").as_bytes(), Some(&b"hi"[..]));
    /// ```
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bytes(bytes) => Some(bytes),
            _ => None,
        }
    }

    /// The bytes as UTF-8 text, when they are.
    ///
    /// ```
    /// use client::Value;
    /// assert_eq!(Value::from("hi").as_str(), Some("hi"));
    /// ```
    pub fn as_str(&self) -> Option<&str> {
        self.as_bytes()
            .and_then(|bytes| std::str::from_utf8(bytes).ok())
    }

    /// True for NULL.
    ///
    /// ```
    /// assert!(client::Value::Null.is_null());
    /// ```
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => write!(f, "NULL"),
            Value::Int(value) => write!(f, "{value}"),
            Value::UInt(value) => write!(f, "{value}"),
            Value::Double(value) => write!(f, "{value}"),
            Value::Bytes(bytes) => match std::str::from_utf8(bytes) {
                Ok(text) => write!(f, "{text:?}"),
                Err(_) => write!(f, "0x{}", hex(bytes)),
            },
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

macro_rules! from_signed {
    ($($type:ty),*) => {$(
        impl From<$type> for Value {
            fn from(value: $type) -> Value {
                Value::Int(value as i64)
            }
        }
    )*};
}
macro_rules! from_unsigned {
    ($($type:ty),*) => {$(
        impl From<$type> for Value {
            fn from(value: $type) -> Value {
                Value::UInt(value as u64)
            }
        }
    )*};
}
from_signed!(i8, i16, i32, i64);
from_unsigned!(u8, u16, u32, u64);

impl From<f64> for Value {
    fn from(value: f64) -> Value {
        Value::Double(value)
    }
}

impl From<f32> for Value {
    fn from(value: f32) -> Value {
        Value::Double(value as f64)
    }
}

impl From<&str> for Value {
    fn from(value: &str) -> Value {
        Value::Bytes(value.as_bytes().to_vec())
    }
}

impl From<String> for Value {
    fn from(value: String) -> Value {
        Value::Bytes(value.into_bytes())
    }
}

impl From<&[u8]> for Value {
    fn from(value: &[u8]) -> Value {
        Value::Bytes(value.to_vec())
    }
}

impl From<Vec<u8>> for Value {
    fn from(value: Vec<u8>) -> Value {
        Value::Bytes(value)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(value: Option<T>) -> Value {
        value.map_or(Value::Null, Into::into)
    }
}

/// `value` in the stored form of `column_type` (`None` for NULL), as a
/// scan filter compares it: as in an entry, but text of any length (a
/// longer value than the column holds just never equals one of its).
pub(crate) fn filter_bytes(
    value: &Value,
    column_type: ColumnType,
) -> Result<Option<Vec<u8>>, ErrorCode> {
    if *value == Value::Null {
        return Ok(None);
    }
    let is_bytes = matches!(
        column_type,
        ColumnType::Char(_) | ColumnType::VarChar(_) | ColumnType::VarBinary(_)
    );
    if let (true, Some(bytes)) = (is_bytes, value.as_bytes()) {
        return Ok(Some(bytes.to_vec()));
    }
    let mut scratch = [0u8; 8];
    wire_bytes(value, column_type, &mut scratch).map(|bytes| Some(bytes.to_vec()))
}

/// The wire bytes of a non-NULL value of `column_type`. Numbers are
/// written into `scratch`; bytes are borrowed from the value.
fn wire_bytes<'a>(
    value: &'a Value,
    column_type: ColumnType,
    scratch: &'a mut [u8; 8],
) -> Result<&'a [u8], ErrorCode> {
    let out_of_range = ErrorCode::BadValue;
    match column_type {
        ColumnType::Int { unsigned: false } => {
            let wide = value.as_i64().ok_or(out_of_range)?;
            let narrow = i32::try_from(wide).map_err(|_| out_of_range)?;
            scratch[..4].copy_from_slice(&narrow.to_le_bytes());
            Ok(&scratch[..4])
        }
        ColumnType::Int { unsigned: true } => {
            let wide = value.as_u64().ok_or(out_of_range)?;
            let narrow = u32::try_from(wide).map_err(|_| out_of_range)?;
            scratch[..4].copy_from_slice(&narrow.to_le_bytes());
            Ok(&scratch[..4])
        }
        ColumnType::BigInt { unsigned: false } => {
            let wide = value.as_i64().ok_or(out_of_range)?;
            scratch.copy_from_slice(&wide.to_le_bytes());
            Ok(&scratch[..])
        }
        ColumnType::BigInt { unsigned: true } => {
            let wide = value.as_u64().ok_or(out_of_range)?;
            scratch.copy_from_slice(&wide.to_le_bytes());
            Ok(&scratch[..])
        }
        ColumnType::Double => {
            let double = value.as_f64().ok_or(out_of_range)?;
            if double.is_nan() {
                return Err(ErrorCode::BadValue);
            }
            scratch.copy_from_slice(&double.to_le_bytes());
            Ok(&scratch[..])
        }
        ColumnType::Char(limit) | ColumnType::VarChar(limit) | ColumnType::VarBinary(limit) => {
            let bytes = value.as_bytes().ok_or(ErrorCode::BadValue)?;
            if bytes.len() > limit as usize {
                return Err(ErrorCode::ValueTooLong);
            }
            Ok(bytes)
        }
    }
}

/// Appends one attribute entry for `value` in column `column` of type
/// `column_type` to `out`. NULL is refused for a column that is not
/// nullable. On error `out` is left as it was.
///
/// ```
/// use client::value::push_entry;
/// use client::Value;
/// use signal::schema::ColumnType;
/// let mut out = Vec::new();
/// push_entry(&mut out, 3, ColumnType::Int { unsigned: true }, false, &Value::UInt(9)).unwrap();
/// assert_eq!(out, [3, 0, 4, 0, 9, 0, 0, 0]);
/// let too_big = Value::UInt(1 << 40);
/// assert!(push_entry(&mut out, 3, ColumnType::Int { unsigned: true }, false, &too_big).is_err());
/// ```
pub fn push_entry(
    out: &mut Vec<u8>,
    column: u16,
    column_type: ColumnType,
    nullable: bool,
    value: &Value,
) -> Result<(), ErrorCode> {
    let mut scratch = [0u8; 8];
    let bytes = match value {
        Value::Null if nullable => None,
        Value::Null => return Err(ErrorCode::NullNotAllowed),
        value => Some(wire_bytes(value, column_type, &mut scratch)?),
    };
    let length = signal::attr::entry_bytes(bytes.map_or(0, <[u8]>::len));
    // AttrWriter keeps the entry layout in one place (signal::attr). A
    // short entry (every number, NULL) is written on the stack and copied,
    // which saves zeroing the output for it.
    let mut short = [0u8; signal::attr::entry_bytes(8)];
    if let Some(entry) = short.get_mut(..length) {
        AttrWriter::new(entry).push(column, bytes)?;
        out.extend_from_slice(entry);
        return Ok(());
    }
    let start = out.len();
    out.resize(start + length, 0);
    let mut writer = AttrWriter::new(&mut out[start..]);
    if let Err(code) = writer.push(column, bytes) {
        out.truncate(start);
        return Err(code);
    }
    Ok(())
}

/// Decodes the wire bytes of one entry of `column_type` (`None` is NULL).
///
/// ```
/// use client::value::decode_value;
/// use client::Value;
/// use signal::schema::ColumnType;
/// let bytes = (-5i32).to_le_bytes();
/// assert_eq!(decode_value(ColumnType::Int { unsigned: false }, Some(&bytes)), Ok(Value::Int(-5)));
/// ```
pub fn decode_value(column_type: ColumnType, bytes: Option<&[u8]>) -> Result<Value, ErrorCode> {
    let Some(bytes) = bytes else {
        return Ok(Value::Null);
    };
    signal::attr::check_value(column_type, bytes)?;
    Ok(checked_value(column_type, bytes))
}

/// The value of `bytes` that passed [`signal::attr::check_value`] for `column_type`.
#[inline]
pub(crate) fn checked_value(column_type: ColumnType, bytes: &[u8]) -> Value {
    match column_type {
        ColumnType::Int { unsigned: false } => Value::Int(i32::from_le_bytes(le(bytes)) as i64),
        ColumnType::Int { unsigned: true } => Value::UInt(u32::from_le_bytes(le(bytes)) as u64),
        ColumnType::BigInt { unsigned: false } => Value::Int(i64::from_le_bytes(le(bytes))),
        ColumnType::BigInt { unsigned: true } => Value::UInt(u64::from_le_bytes(le(bytes))),
        ColumnType::Double => Value::Double(f64::from_le_bytes(le(bytes))),
        ColumnType::Char(_) | ColumnType::VarChar(_) | ColumnType::VarBinary(_) => {
            Value::Bytes(bytes.to_vec())
        }
    }
}

/// What row decoding needs to know of a column's type, looked up once per
/// table rather than matched on the type for every value.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct WireRule {
    /// The length of a fixed-width value, or the longest variable one.
    length: u16,
    fixed: bool,
    /// How a value reads as a number.
    pub(crate) number: Number,
}

/// How the wire bytes of a column read as a number.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Number {
    Int32,
    UInt32,
    Int64,
    UInt64,
    /// DOUBLE, CHAR, VARCHAR, VARBINARY: no integer.
    NotInteger,
}

impl WireRule {
    pub(crate) fn of(column_type: ColumnType) -> WireRule {
        let (length, fixed, number) = match column_type {
            ColumnType::Int { unsigned: false } => (4, true, Number::Int32),
            ColumnType::Int { unsigned: true } => (4, true, Number::UInt32),
            ColumnType::BigInt { unsigned: false } => (8, true, Number::Int64),
            ColumnType::BigInt { unsigned: true } => (8, true, Number::UInt64),
            ColumnType::Double => (8, true, Number::NotInteger),
            ColumnType::Char(limit) | ColumnType::VarChar(limit) | ColumnType::VarBinary(limit) => {
                (limit, false, Number::NotInteger)
            }
        };
        WireRule {
            length,
            fixed,
            number,
        }
    }

    /// [`signal::attr::check_value`] for `value`.
    #[inline]
    pub(crate) fn check(self, value: &[u8]) -> Result<(), ErrorCode> {
        let length = value.len();
        if self.fixed {
            if length != self.length as usize {
                Err(ErrorCode::BadValue)
            } else if self.number == Number::NotInteger && f64::from_le_bytes(le(value)).is_nan() {
                // The one fixed-width non-integer is DOUBLE: NaN is refused.
                Err(ErrorCode::BadValue)
            } else {
                Ok(())
            }
        } else if length <= self.length as usize {
            Ok(())
        } else {
            Err(ErrorCode::ValueTooLong)
        }
    }
}

impl Number {
    /// [`checked_value`]`.as_u64()` for checked `bytes`, without building
    /// the value.
    #[inline]
    pub(crate) fn as_u64(self, bytes: &[u8]) -> Option<u64> {
        match self {
            Number::Int32 => u64::try_from(i32::from_le_bytes(le(bytes))).ok(),
            Number::UInt32 => Some(u64::from(u32::from_le_bytes(le(bytes)))),
            Number::Int64 => u64::try_from(i64::from_le_bytes(le(bytes))).ok(),
            Number::UInt64 => Some(u64::from_le_bytes(le(bytes))),
            Number::NotInteger => None,
        }
    }
}

/// The `N` bytes of a checked fixed-width value (zeros if `bytes` is not
/// `N` long, which [`signal::attr::check_value`] rules out).
#[inline]
fn le<const N: usize>(bytes: &[u8]) -> [u8; N] {
    bytes.try_into().unwrap_or([0; N])
}

// The NULL marker must not collide with a real length.
const _: () = assert!(NULL_LENGTH as usize > signal::schema::MAX_VAR_BYTES as usize);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_decode_rule_is_the_signal_crates_and_the_fast_paths_agree() {
        let types = [
            ColumnType::Int { unsigned: false },
            ColumnType::Int { unsigned: true },
            ColumnType::BigInt { unsigned: false },
            ColumnType::BigInt { unsigned: true },
            ColumnType::Double,
            ColumnType::Char(3),
            ColumnType::VarChar(5),
            ColumnType::VarBinary(0),
        ];
        let mut rng = stdx::mix::XorShift::new(5);
        for _ in 0..5_000 {
            let column_type = types[rng.below(types.len() as u64) as usize];
            let length = [0, 3, 4, 5, 8, 9][rng.below(6) as usize];
            let bytes: Vec<u8> = (0..length).map(|_| rng.next_u64() as u8).collect();
            let decoded = decode_value(column_type, Some(&bytes));
            let signal_rule = signal::attr::check_value(column_type, &bytes);
            assert_eq!(
                decoded.is_ok(),
                signal_rule.is_ok(),
                "{column_type:?} {bytes:?}"
            );
            let rule = WireRule::of(column_type);
            assert_eq!(rule.check(&bytes), signal_rule, "{column_type:?} {bytes:?}");
            if let Ok(value) = decoded {
                assert_eq!(rule.number.as_u64(&bytes), value.as_u64());
            }
        }
    }

    fn encode(column_type: ColumnType, value: Value) -> Result<Vec<u8>, ErrorCode> {
        let mut out = Vec::new();
        push_entry(&mut out, 1, column_type, true, &value)?;
        Ok(out[4..].to_vec())
    }

    #[test]
    fn integers_are_range_checked_per_column_type() {
        let int = ColumnType::Int { unsigned: false };
        let uint = ColumnType::Int { unsigned: true };
        let big = ColumnType::BigInt { unsigned: false };
        let ubig = ColumnType::BigInt { unsigned: true };
        assert_eq!(
            encode(int, Value::Int(-2)),
            Ok((-2i32).to_le_bytes().to_vec())
        );
        assert_eq!(
            encode(int, Value::Int(i32::MAX as i64 + 1)),
            Err(ErrorCode::BadValue)
        );
        assert_eq!(encode(int, Value::UInt(7)), Ok(7i32.to_le_bytes().to_vec()));
        assert_eq!(encode(uint, Value::Int(-1)), Err(ErrorCode::BadValue));
        assert_eq!(encode(uint, Value::UInt(u32::MAX as u64)), Ok(vec![255; 4]));
        assert_eq!(
            encode(uint, Value::UInt(u32::MAX as u64 + 1)),
            Err(ErrorCode::BadValue)
        );
        assert_eq!(encode(big, Value::UInt(u64::MAX)), Err(ErrorCode::BadValue));
        assert_eq!(
            encode(big, Value::Int(i64::MIN)),
            Ok(i64::MIN.to_le_bytes().to_vec())
        );
        assert_eq!(encode(ubig, Value::UInt(u64::MAX)), Ok(vec![255; 8]));
        assert_eq!(encode(ubig, Value::Int(-3)), Err(ErrorCode::BadValue));
        assert_eq!(encode(int, Value::from("1")), Err(ErrorCode::BadValue));
        assert_eq!(encode(int, Value::Double(1.0)), Err(ErrorCode::BadValue));
        assert_eq!(
            encode(ColumnType::Double, Value::Double(f64::NAN)),
            Err(ErrorCode::BadValue),
            "NaN is refused before it is sent"
        );
    }

    #[test]
    fn doubles_and_bytes_encode_and_check_length() {
        assert_eq!(
            encode(ColumnType::Double, Value::Double(1.5)),
            Ok(1.5f64.to_le_bytes().to_vec())
        );
        assert_eq!(
            encode(ColumnType::Double, Value::Int(2)),
            Ok(2.0f64.to_le_bytes().to_vec())
        );
        assert_eq!(
            encode(ColumnType::VarChar(3), Value::from("abc")),
            Ok(b"abc".to_vec())
        );
        assert_eq!(
            encode(ColumnType::VarChar(3), Value::from("abcd")),
            Err(ErrorCode::ValueTooLong)
        );
        assert_eq!(
            encode(ColumnType::Char(2), Value::from("abc")),
            Err(ErrorCode::ValueTooLong)
        );
        assert_eq!(
            encode(ColumnType::VarBinary(2), Value::UInt(1)),
            Err(ErrorCode::BadValue)
        );
    }

    #[test]
    fn null_needs_a_nullable_column_and_leaves_nothing_on_error() {
        let mut out = vec![9];
        let column = ColumnType::Int { unsigned: false };
        assert_eq!(
            push_entry(&mut out, 0, column, false, &Value::Null),
            Err(ErrorCode::NullNotAllowed)
        );
        assert_eq!(out, [9]);
        push_entry(&mut out, 2, column, true, &Value::Null).unwrap();
        assert_eq!(out, [9, 2, 0, 0xFF, 0xFF]);
    }

    #[test]
    fn values_decode_back_to_what_was_encoded() {
        let cases = [
            (ColumnType::Int { unsigned: false }, Value::Int(-7)),
            (
                ColumnType::Int { unsigned: true },
                Value::UInt(4_000_000_000),
            ),
            (ColumnType::BigInt { unsigned: false }, Value::Int(-1 << 40)),
            (ColumnType::BigInt { unsigned: true }, Value::UInt(u64::MAX)),
            (ColumnType::Double, Value::Double(-0.25)),
            (ColumnType::VarBinary(10), Value::Bytes(vec![0, 1, 2])),
        ];
        for (column_type, value) in cases {
            let bytes = encode(column_type, value.clone()).unwrap();
            assert_eq!(decode_value(column_type, Some(&bytes)), Ok(value));
        }
        assert_eq!(
            decode_value(ColumnType::Double, Some(&[1, 2, 3])),
            Err(ErrorCode::BadValue)
        );
        assert_eq!(decode_value(ColumnType::Double, None), Ok(Value::Null));
    }
}
