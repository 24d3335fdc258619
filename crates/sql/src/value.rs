//! SQL's values and their rules: how two compare (numbers as numbers,
//! text as the cluster orders it: bytes with PAD SPACE, dates as dates),
//! what is true, arithmetic with MySQL's results (integers exact, DECIMAL
//! exact with MySQL's scales, the rest as doubles), the text a value is
//! sent as, and fitting a value to a column's type on its way into the
//! cluster (a string '0' into an INT column, as sysbench's `DEFAULT '0'`
//! asks; '2024-01-31' into a DATE). How a fitted value is stored is
//! `types::store`.

use crate::decimal::Decimal;
use crate::error::{codes, SqlError, SqlResult};
use crate::temporal::{Date, DateTime, Time};
use crate::types::SqlType;
use std::cmp::Ordering;

/// A SQL value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// NULL.
    Null,
    /// A signed integer.
    Int(i64),
    /// An unsigned integer.
    UInt(u64),
    /// A double (FLOAT and DOUBLE).
    Double(f64),
    /// An exact decimal (DECIMAL).
    Decimal(Decimal),
    /// Text or bytes (CHAR, VARCHAR, TEXT, BINARY, BLOB, ENUM).
    Bytes(Vec<u8>),
    /// A DATE.
    Date(Date),
    /// A DATETIME or TIMESTAMP (in the session's time zone).
    DateTime(DateTime),
    /// A TIME.
    Time(Time),
}

impl Value {
    /// Whether it is NULL.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The value as a signed integer, when it is an integer that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(value) => Some(*value),
            Value::UInt(value) => i64::try_from(*value).ok(),
            _ => None,
        }
    }

    /// The value as an unsigned integer, when it is a non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Int(value) => u64::try_from(*value).ok(),
            Value::UInt(value) => Some(*value),
            _ => None,
        }
    }

    /// The bytes of text.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bytes(bytes) => Some(bytes),
            _ => None,
        }
    }

    /// Text as a string, when it is UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        self.as_bytes().and_then(|b| std::str::from_utf8(b).ok())
    }

    /// A value the cluster returned for a column it declares nothing more
    /// of (system tables, a table without SQL declarations).
    pub fn from_stored(value: client::Value) -> Value {
        match value {
            client::Value::Null => Value::Null,
            client::Value::Int(x) => Value::Int(x),
            client::Value::UInt(x) => Value::UInt(x),
            client::Value::Double(x) => Value::Double(x),
            client::Value::Bytes(bytes) => Value::Bytes(bytes),
        }
    }
}

impl From<&str> for Value {
    fn from(text: &str) -> Value {
        Value::Bytes(text.as_bytes().to_vec())
    }
}

impl From<String> for Value {
    fn from(text: String) -> Value {
        Value::Bytes(text.into_bytes())
    }
}

impl From<Vec<u8>> for Value {
    fn from(bytes: Vec<u8>) -> Value {
        Value::Bytes(bytes)
    }
}

impl From<f64> for Value {
    fn from(x: f64) -> Value {
        Value::Double(x)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(value: Option<T>) -> Value {
        value.map_or(Value::Null, Into::into)
    }
}

/// How `a` and `b` compare, or `None` when either is NULL (SQL's unknown).
pub fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Null, _) | (_, Value::Null) => None,
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::UInt(x), Value::UInt(y)) => Some(x.cmp(y)),
        (Value::Int(x), Value::UInt(y)) => Some(compare_signed_unsigned(*x, *y)),
        (Value::UInt(x), Value::Int(y)) => Some(compare_signed_unsigned(*y, *x).reverse()),
        (Value::Bytes(x), Value::Bytes(y)) => Some(compare_padded(x, y)),
        // Exact numbers exactly: a DECIMAL with an integer or a DECIMAL.
        (Value::Decimal(x), other) | (other, Value::Decimal(x))
            if matches!(other, Value::Int(_) | Value::UInt(_) | Value::Decimal(_)) =>
        {
            let y = exact_of(other).expect("an exact number");
            let ordering = x.compare(y);
            Some(match matches!(a, Value::Decimal(_)) {
                true => ordering,
                false => ordering.reverse(),
            })
        }
        // Dates and times with each other, or with text or a number that
        // reads as one (MySQL converts the constant to the column's type);
        // text that does not read as one compares as text.
        (Value::Date(_) | Value::DateTime(_), _) | (_, Value::Date(_) | Value::DateTime(_)) => {
            match (datetime_of(a), datetime_of(b)) {
                (Some(x), Some(y)) => Some(x.compare(y)),
                _ => Some(compare_padded(&text_of(a), &text_of(b))),
            }
        }
        (Value::Time(x), other) | (other, Value::Time(x)) => {
            let y = match other {
                Value::Time(y) => Some(*y),
                Value::Bytes(bytes) => std::str::from_utf8(bytes).ok().and_then(Time::parse),
                Value::Int(n) => Time::from_number(*n),
                _ => None,
            };
            let ordering = match y {
                Some(y) => x.micros.cmp(&y.micros),
                None => compare_doubles(time_number(*x), to_f64(other)),
            };
            Some(match matches!(a, Value::Time(_)) {
                true => ordering,
                false => ordering.reverse(),
            })
        }
        // A number with text or a double: as doubles (MySQL converts the
        // string to a number).
        _ => Some(compare_doubles(to_f64(a), to_f64(b))),
    }
}

/// A TIME as the number MySQL makes of it (`10:30:05` is 103005).
fn time_number(time: Time) -> f64 {
    let magnitude = time.micros.abs();
    let seconds = magnitude / 1_000_000;
    let number = (seconds / 3600 * 10_000 + seconds / 60 % 60 * 100 + seconds % 60) as f64
        + (magnitude % 1_000_000) as f64 / 1e6;
    if time.micros < 0 {
        -number
    } else {
        number
    }
}

/// A value as a date and time, when it is one or reads as one.
pub fn datetime_of(value: &Value) -> Option<DateTime> {
    match value {
        Value::Date(date) => Some(date.at_midnight()),
        Value::DateTime(datetime) => Some(*datetime),
        Value::Bytes(bytes) => std::str::from_utf8(bytes).ok().and_then(DateTime::parse),
        Value::Int(x) => DateTime::from_number(*x),
        Value::UInt(x) => i64::try_from(*x).ok().and_then(DateTime::from_number),
        _ => None,
    }
}

/// The text form of a value, for comparing it as text.
fn text_of(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_text(value, &mut out);
    out
}

/// An integer or DECIMAL as a DECIMAL.
fn exact_of(value: &Value) -> Option<Decimal> {
    match value {
        Value::Int(x) => Decimal::from_integer(*x as i128),
        Value::UInt(x) => Decimal::from_integer(*x as i128),
        Value::Decimal(x) => Some(*x),
        _ => None,
    }
}

/// The order of ORDER BY: NULL first, then [`compare`].
pub fn order(a: &Value, b: &Value) -> Ordering {
    match (a.is_null(), b.is_null()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (false, false) => compare(a, b).unwrap_or(Ordering::Equal),
    }
}

fn compare_signed_unsigned(signed: i64, unsigned: u64) -> Ordering {
    match u64::try_from(signed) {
        Ok(signed) => signed.cmp(&unsigned),
        Err(_) => Ordering::Less,
    }
}

fn compare_doubles(a: f64, b: f64) -> Ordering {
    a.partial_cmp(&b).unwrap_or(Ordering::Equal)
}

/// PAD SPACE: the shorter compared as if padded with spaces.
fn compare_padded(a: &[u8], b: &[u8]) -> Ordering {
    let common = a.len().min(b.len());
    match a[..common].cmp(&b[..common]) {
        Ordering::Equal => {}
        other => return other,
    }
    let (rest, flip) = match a.len().cmp(&b.len()) {
        Ordering::Equal => return Ordering::Equal,
        Ordering::Greater => (&a[common..], false),
        Ordering::Less => (&b[common..], true),
    };
    let ordering = rest
        .iter()
        .map(|byte| byte.cmp(&b' '))
        .find(|ordering| *ordering != Ordering::Equal)
        .unwrap_or(Ordering::Equal);
    if flip {
        ordering.reverse()
    } else {
        ordering
    }
}

/// A value as a double: numbers as they are, text by MySQL's rule (its
/// longest numeric prefix, 0 when there is none), dates and times as
/// MySQL's numbers of them (20240131, 103005), NULL as 0.
pub fn to_f64(value: &Value) -> f64 {
    match value {
        Value::Null => 0.0,
        Value::Int(x) => *x as f64,
        Value::UInt(x) => *x as f64,
        Value::Double(x) => *x,
        Value::Decimal(x) => x.to_f64(),
        Value::Bytes(bytes) => parse_number_prefix(bytes),
        Value::Date(date) => {
            (date.year as i64 * 10_000 + date.month as i64 * 100 + date.day as i64) as f64
        }
        Value::DateTime(datetime) => {
            let date = datetime.date;
            let (hour, minute, second, micro) = datetime.clock();
            ((date.year as i64 * 10_000 + date.month as i64 * 100 + date.day as i64) * 1_000_000
                + hour * 10_000
                + minute * 100
                + second) as f64
                + micro as f64 / 1e6
        }
        Value::Time(time) => time_number(*time),
    }
}

/// The longest prefix of `bytes` (after leading spaces) that reads as a
/// number, MySQL's conversion of a string in a numeric context.
fn parse_number_prefix(bytes: &[u8]) -> f64 {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_start();
    let mut end = 0;
    let mut seen_digit = false;
    let mut seen_dot = false;
    let mut seen_exponent = false;
    let chars: Vec<char> = text.chars().collect();
    while end < chars.len() {
        let c = chars[end];
        let ok = match c {
            '0'..='9' => {
                seen_digit = true;
                true
            }
            '+' | '-' => end == 0 || matches!(chars[end - 1], 'e' | 'E'),
            '.' if !seen_dot && !seen_exponent => {
                seen_dot = true;
                true
            }
            'e' | 'E' if seen_digit && !seen_exponent => {
                seen_exponent = true;
                true
            }
            _ => false,
        };
        if !ok {
            break;
        }
        end += 1;
    }
    let mut prefix: String = chars[..end].iter().collect();
    while !prefix.is_empty() && prefix.parse::<f64>().is_err() {
        prefix.pop();
    }
    prefix.parse().unwrap_or(0.0)
}

/// A value as SQL's truth: `None` for NULL.
pub fn truth(value: &Value) -> Option<bool> {
    match value {
        Value::Null => None,
        Value::Int(x) => Some(*x != 0),
        Value::UInt(x) => Some(*x != 0),
        Value::Double(x) => Some(*x != 0.0),
        Value::Decimal(x) => Some(!x.is_zero()),
        _ => Some(to_f64(value) != 0.0),
    }
}

/// SQL's boolean as a value: 1, 0 or NULL.
pub fn boolean(truth: Option<bool>) -> Value {
    match truth {
        None => Value::Null,
        Some(true) => Value::Int(1),
        Some(false) => Value::Int(0),
    }
}

/// An arithmetic operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arithmetic {
    /// `+`.
    Add,
    /// `-`.
    Subtract,
    /// `*`.
    Multiply,
    /// `/`: a DECIMAL for exact operands (4 more digits than the
    /// dividend), else a double.
    Divide,
    /// `DIV`: integer division.
    IntegerDivide,
    /// `%` / `MOD`.
    Modulo,
}

impl std::fmt::Display for Arithmetic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Arithmetic::Add => "+",
            Arithmetic::Subtract => "-",
            Arithmetic::Multiply => "*",
            Arithmetic::Divide => "/",
            Arithmetic::IntegerDivide => "DIV",
            Arithmetic::Modulo => "%",
        })
    }
}

/// `a op b` with MySQL's rules: NULL in, NULL out; integers stay integers
/// (an overflow is error 1690); a division by zero is NULL.
pub fn arithmetic(op: Arithmetic, a: &Value, b: &Value) -> SqlResult<Value> {
    if a.is_null() || b.is_null() {
        return Ok(Value::Null);
    }
    let integers = integer_of(a).zip(integer_of(b));
    let overflow =
        |kind: &str| out_of_range(kind, &format!("({} {op} {})", display(a), display(b)));
    let exact = exact_of(a).zip(exact_of(b));
    match (op, integers) {
        // Exact operands divide exactly (MySQL's `/` is a DECIMAL with 4
        // more digits than the dividend); by zero, NULL.
        (Arithmetic::Divide, _) => match exact {
            Some((_, y)) if y.is_zero() => Ok(Value::Null),
            Some((x, y)) => x
                .checked_div(y)
                .map(Value::Decimal)
                .ok_or_else(|| overflow("DECIMAL")),
            None => {
                let divisor = to_f64(b);
                if divisor == 0.0 {
                    return Ok(Value::Null);
                }
                finite(to_f64(a) / divisor).ok_or_else(|| overflow("DOUBLE"))
            }
        },
        (_, None) if exact.is_some() => {
            let (x, y) = exact.expect("checked");
            let result = match op {
                Arithmetic::Add => x.checked_add(y),
                Arithmetic::Subtract => x.checked_sub(y),
                Arithmetic::Multiply => x.checked_mul(y),
                Arithmetic::IntegerDivide | Arithmetic::Modulo if y.is_zero() => {
                    return Ok(Value::Null)
                }
                Arithmetic::IntegerDivide => {
                    let quotient = x.checked_div(y).ok_or_else(|| overflow("DECIMAL"))?;
                    let whole = quotient.truncate(0).parts().0;
                    return i64::try_from(whole)
                        .map(Value::Int)
                        .map_err(|_| overflow("BIGINT"));
                }
                Arithmetic::Modulo => x.checked_rem(y),
                Arithmetic::Divide => unreachable!("handled above"),
            };
            result
                .map(Value::Decimal)
                .ok_or_else(|| overflow("DECIMAL"))
        }
        (_, Some((x, y))) => {
            let result = match op {
                Arithmetic::Add => x.checked_add(y),
                Arithmetic::Subtract => x.checked_sub(y),
                Arithmetic::Multiply => x.checked_mul(y),
                Arithmetic::IntegerDivide | Arithmetic::Modulo if y == 0 => return Ok(Value::Null),
                Arithmetic::IntegerDivide => x.checked_div(y),
                Arithmetic::Modulo => x.checked_rem(y),
                Arithmetic::Divide => unreachable!("handled above"),
            };
            let result = result.ok_or_else(|| overflow("BIGINT"))?;
            // With an UNSIGNED operand a sum, difference or product is
            // UNSIGNED (MySQL's rule): below zero is out of its range, as
            // above its top. DIV and MOD keep their signed results (a
            // remainder's sign is its dividend's).
            let unsigned = matches!(
                op,
                Arithmetic::Add | Arithmetic::Subtract | Arithmetic::Multiply
            ) && (matches!(a, Value::UInt(_)) || matches!(b, Value::UInt(_)));
            Ok(
                match (unsigned, i64::try_from(result), u64::try_from(result)) {
                    (true, _, Ok(value)) => Value::UInt(value),
                    (true, _, Err(_)) => return Err(overflow("BIGINT UNSIGNED")),
                    (false, Ok(value), _) => Value::Int(value),
                    (false, Err(_), _) => return Err(overflow("BIGINT")),
                },
            )
        }
        (_, None) => {
            let (x, y) = (to_f64(a), to_f64(b));
            let double = |result: f64| finite(result).ok_or_else(|| overflow("DOUBLE"));
            Ok(match op {
                Arithmetic::Add => double(x + y)?,
                Arithmetic::Subtract => double(x - y)?,
                Arithmetic::Multiply => double(x * y)?,
                Arithmetic::IntegerDivide if y == 0.0 => Value::Null,
                Arithmetic::IntegerDivide => Value::Int((x / y).trunc() as i64),
                Arithmetic::Modulo if y == 0.0 => Value::Null,
                Arithmetic::Modulo => Value::Double(x % y),
                Arithmetic::Divide => unreachable!("handled above"),
            })
        }
    }
}

/// Where the first `characters` characters of `text` end, when it has
/// more than that; `None` when it has no more. Text is UTF-8; a byte of
/// it that is not counts as a character of its own (so `characters`
/// characters never take more than 4 bytes each).
fn nth_character_end(text: &[u8], characters: usize) -> Option<usize> {
    // Cheap when every byte is a character, the common case.
    if text.len() <= characters {
        return None;
    }
    let mut counted = 0;
    let mut at = 0;
    for chunk in text.utf8_chunks() {
        for (offset, _) in chunk.valid().char_indices() {
            if counted == characters {
                return Some(at + offset);
            }
            counted += 1;
        }
        at += chunk.valid().len();
        for index in 0..chunk.invalid().len() {
            if counted == characters {
                return Some(at + index);
            }
            counted += 1;
        }
        at += chunk.invalid().len();
    }
    None
}

/// Error 1690: a `kind` value (BIGINT, DECIMAL, DOUBLE...) out of range
/// in `expression`, as MySQL words it.
fn out_of_range(kind: &str, expression: &str) -> SqlError {
    SqlError::new(
        codes::DATA_OUT_OF_RANGE,
        format!("{kind} value is out of range in '{expression}'"),
    )
}

/// A double that is a number: MySQL has no infinities (nor NaN), a result
/// beyond the range of DOUBLE is an error.
fn finite(x: f64) -> Option<Value> {
    x.is_finite().then_some(Value::Double(x))
}

/// Unary minus: `-x` is signed even for an UNSIGNED `x` (MySQL's
/// `-CAST(5 AS UNSIGNED)` is -5); 1690 only when it does not fit a BIGINT.
pub fn negate(value: &Value) -> SqlResult<Value> {
    match value {
        Value::Null => Ok(Value::Null),
        Value::Int(_) | Value::UInt(_) => {
            let x = integer_of(value).expect("an integer");
            i64::try_from(-x)
                .map(Value::Int)
                .map_err(|_| out_of_range("BIGINT", &format!("-({})", display(value))))
        }
        Value::Decimal(x) => Ok(Value::Decimal(x.negate())),
        other => arithmetic(Arithmetic::Subtract, &Value::Int(0), other),
    }
}

/// An integer value as i128 (text is not an integer here: it goes the
/// double way, as MySQL's).
fn integer_of(value: &Value) -> Option<i128> {
    match value {
        Value::Int(x) => Some(*x as i128),
        Value::UInt(x) => Some(*x as i128),
        _ => None,
    }
}

/// Appends the text form of `value` the text protocol sends (`None` for
/// NULL, which the protocol marks apart).
pub fn write_text(value: &Value, out: &mut Vec<u8>) -> bool {
    use std::io::Write;
    match value {
        Value::Null => return false,
        Value::Int(x) => {
            let _ = write!(out, "{x}");
        }
        Value::UInt(x) => {
            let _ = write!(out, "{x}");
        }
        Value::Double(x) => write_double(*x, out),
        Value::Decimal(x) => x.write_text(out),
        Value::Bytes(bytes) => out.extend_from_slice(bytes),
        Value::Date(date) => date.write_text(out),
        Value::DateTime(datetime) => datetime.write_text(out),
        Value::Time(time) => time.write_text(out),
    }
    true
}

/// A double as MySQL prints one: the shortest text that reads back the
/// same, without a trailing ".0", in exponent form when very large or small.
pub fn write_double(x: f64, out: &mut Vec<u8>) {
    use std::io::Write;
    if x == x.trunc() && x.abs() < 1e15 {
        let _ = write!(out, "{}", x as i64);
    } else if x != 0.0 && (x.abs() >= 1e15 || x.abs() < 1e-4) {
        let _ = write!(out, "{x:e}");
    } else {
        let _ = write!(out, "{x}");
    }
}

/// A value as text for messages and SHOW output.
pub fn display(value: &Value) -> String {
    let mut out = Vec::new();
    if !write_text(value, &mut out) {
        return "NULL".into();
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `value` fitted to a column of `sql_type`, as MySQL's strict mode fits
/// it: an integer in range, a double, a DECIMAL rounded to its scale and
/// within its precision, a date or time read from text or a number, text
/// within its length, an ENUM member; what does not fit is an error
/// (1264 out of range, 1366 or 1292 not a value of the type, 1406 too
/// long, 1265 not a member). NULL stays NULL (the cluster refuses it
/// where NOT NULL).
pub fn fit(value: &Value, sql_type: &SqlType, column: &str) -> SqlResult<Value> {
    if value.is_null() {
        return Ok(Value::Null);
    }
    let out_of_range = || {
        SqlError::new(
            codes::WARN_DATA_OUT_OF_RANGE,
            format!("Out of range value for column '{column}' at row 1"),
        )
    };
    let incorrect = |code: u16, kind: &str| {
        SqlError::new(
            code,
            format!(
                "Incorrect {kind} value: '{}' for column '{column}' at row 1",
                display(value)
            ),
        )
    };
    let text = || std::str::from_utf8(value.as_bytes().unwrap_or(b"")).unwrap_or("");
    Ok(match sql_type {
        SqlType::Integer { .. } => {
            let x = match value {
                Value::Int(x) => *x as i128,
                Value::UInt(x) => *x as i128,
                Value::Double(x) if x.is_finite() => x.round() as i128,
                Value::Double(_) => return Err(out_of_range()),
                Value::Decimal(x) => x.round_to_integer(),
                Value::Bytes(_) => {
                    let text = text().trim();
                    match text.parse::<i128>() {
                        Ok(x) => x,
                        Err(_) => match text.parse::<f64>() {
                            Ok(x) if x.is_finite() => x.round() as i128,
                            _ => {
                                return Err(incorrect(
                                    codes::TRUNCATED_WRONG_VALUE_FOR_FIELD,
                                    "integer",
                                ))
                            }
                        },
                    }
                }
                other => to_f64(other).round() as i128,
            };
            let (low, high) = sql_type.integer_range().expect("an integer type");
            if x < low || x > high {
                return Err(out_of_range());
            }
            match i64::try_from(x) {
                Ok(x) if low < 0 => Value::Int(x),
                _ => Value::UInt(x as u64),
            }
        }
        SqlType::Year => {
            let (x, from_text) = match value {
                Value::Bytes(_) => match text().trim().parse::<i64>() {
                    Ok(x) => (x, true),
                    Err(_) => {
                        return Err(incorrect(codes::TRUNCATED_WRONG_VALUE_FOR_FIELD, "integer"))
                    }
                },
                other => match fit(
                    other,
                    &SqlType::Integer {
                        bytes: 8,
                        unsigned: false,
                    },
                    column,
                )? {
                    Value::Int(x) => (x, false),
                    _ => return Err(out_of_range()),
                },
            };
            // Two digits are 1970-2069; the number 0 is the zero year,
            // the text '0' or '00' the year 2000.
            let year = match x {
                0 if !from_text => 0,
                0..=69 => 2000 + x,
                70..=99 => 1900 + x,
                _ => x,
            };
            if year != 0 && !(1901..=2155).contains(&year) {
                return Err(out_of_range());
            }
            Value::Int(year)
        }
        SqlType::Float | SqlType::Double => {
            let x = match value {
                Value::Bytes(_) => text()
                    .trim()
                    .parse::<f64>()
                    .map_err(|_| incorrect(codes::TRUNCATED_WRONG_VALUE_FOR_FIELD, "double"))?,
                other => to_f64(other),
            };
            if !x.is_finite() {
                return Err(out_of_range());
            }
            match sql_type {
                SqlType::Float if x.abs() > f32::MAX as f64 => return Err(out_of_range()),
                SqlType::Float => Value::Double(crate::types::single_precision(x)),
                _ => Value::Double(x),
            }
        }
        SqlType::Decimal { precision, scale } => {
            let decimal = match value {
                Value::Bytes(_) => Decimal::parse(text())
                    .ok_or_else(|| incorrect(codes::TRUNCATED_WRONG_VALUE_FOR_FIELD, "decimal"))?,
                Value::Double(x) => Decimal::from_f64(*x).ok_or_else(out_of_range)?,
                other => match exact_of(other) {
                    Some(x) => x,
                    None => Decimal::from_f64(to_f64(other)).ok_or_else(out_of_range)?,
                },
            };
            Value::Decimal(decimal.fit(*precision, *scale).ok_or_else(out_of_range)?)
        }
        SqlType::Date => match value {
            Value::Date(date) => Value::Date(*date),
            other => Value::Date(
                datetime_of(other)
                    .ok_or_else(|| incorrect(codes::TRUNCATED_WRONG_VALUE, "date"))?
                    .date,
            ),
        },
        SqlType::DateTime { fsp } | SqlType::Timestamp { fsp } => {
            let datetime = datetime_of(value)
                .ok_or_else(|| incorrect(codes::TRUNCATED_WRONG_VALUE, "datetime"))?;
            Value::DateTime(datetime.round(*fsp).ok_or_else(out_of_range)?)
        }
        SqlType::Time { fsp } => {
            let time = match value {
                Value::Time(time) => Some(*time),
                Value::Bytes(_) => Time::parse(text()),
                Value::Int(x) => Time::from_number(*x),
                Value::DateTime(datetime) => Time::new(datetime.micros, datetime.fsp),
                _ => None,
            }
            .ok_or_else(|| incorrect(codes::TRUNCATED_WRONG_VALUE, "time"))?;
            Value::Time(time.round(*fsp).ok_or_else(out_of_range)?)
        }
        SqlType::Enum(members) => {
            let found = match value {
                Value::Bytes(bytes) => {
                    let end = bytes.iter().rposition(|b| *b != b' ').map_or(0, |i| i + 1);
                    members.iter().find(|m| m.as_bytes() == &bytes[..end])
                }
                other => other
                    .as_u64()
                    .filter(|n| *n >= 1)
                    .and_then(|n| members.get(n as usize - 1)),
            };
            match found {
                Some(member) => Value::Bytes(member.as_bytes().to_vec()),
                None => {
                    return Err(SqlError::new(
                        codes::DATA_TRUNCATED,
                        format!("Data truncated for column '{column}' at row 1"),
                    ))
                }
            }
        }
        SqlType::VarChar(n) => {
            let mut bytes = match value {
                Value::Bytes(bytes) => bytes.clone(),
                other => display(other).into_bytes(),
            };
            // n counts characters: spaces past them are cut off silently,
            // anything else past them is too long.
            if let Some(end) = nth_character_end(&bytes, *n as usize) {
                if !bytes[end..].iter().all(|b| *b == b' ') {
                    return Err(SqlError::new(
                        codes::DATA_TOO_LONG,
                        format!("Data too long for column '{column}' at row 1"),
                    ));
                }
                bytes.truncate(end);
            }
            Value::Bytes(bytes)
        }
        SqlType::Json(n) => {
            let invalid = |message: &str, position: usize| {
                SqlError::new(
                    codes::INVALID_JSON_TEXT,
                    format!(
                        "Invalid JSON text: \"{message}\" at position {position} in value for column '{column}'."
                    ),
                )
            };
            let document = match value {
                Value::Bytes(bytes) => {
                    crate::json::Json::parse(bytes).map_err(|error| match error.too_deep {
                        true => SqlError::new(
                            codes::JSON_DOCUMENT_TOO_DEEP,
                            "The JSON document exceeds the maximum depth of 100.",
                        ),
                        false => invalid(error.message, error.position),
                    })?
                }
                // MySQL takes text only (CAST(x AS JSON) makes a number
                // JSON text).
                _ => return Err(invalid("not a JSON text, may need CAST", 0)),
            };
            let text = document.to_text().into_bytes();
            if text.len() > *n as usize {
                return Err(SqlError::new(
                    codes::DATA_TOO_LONG,
                    format!("Data too long for column '{column}' at row 1"),
                ));
            }
            Value::Bytes(text)
        }
        // CHAR counts bytes (its room in the row is fixed; the cluster's
        // CHAR drops its trailing spaces), as TEXT and the binary types do.
        SqlType::Char(n) | SqlType::Text(n) | SqlType::VarBinary(n) | SqlType::Blob(n) => {
            let mut bytes = match value {
                Value::Bytes(bytes) => bytes.clone(),
                other => display(other).into_bytes(),
            };
            // CHAR keeps no trailing spaces, and MySQL cuts them off
            // silently where they alone overflow.
            let n = *n as usize;
            if bytes.len() > n && bytes[n..].iter().all(|b| *b == b' ') {
                bytes.truncate(n);
            }
            if bytes.len() > n {
                return Err(SqlError::new(
                    codes::DATA_TOO_LONG,
                    format!("Data too long for column '{column}' at row 1"),
                ));
            }
            Value::Bytes(bytes)
        }
    })
}

/// Whether `value` converts exactly to `sql_type` with [`fit`]'s rules
/// and compares the same as the column's values would: a key or bound a
/// lookup can use as it is (then stored with `types::store`). `None`
/// when it cannot (the caller then finds no row, or filters in the SQL
/// node).
pub fn fit_exactly(value: &Value, sql_type: &SqlType) -> Option<Value> {
    let fitted = || fit(value, sql_type, "").ok();
    match (value, sql_type) {
        (Value::Null, _) => None,
        (Value::Bytes(_), t) if t.is_text() => fitted(),
        (Value::Bytes(_), SqlType::VarBinary(_) | SqlType::Blob(_) | SqlType::Enum(_)) => fitted(),
        (Value::Int(_) | Value::UInt(_), SqlType::Integer { .. } | SqlType::Year) => fitted(),
        (Value::Double(x), SqlType::Integer { .. }) if *x == x.trunc() => fitted(),
        (Value::Decimal(x), SqlType::Integer { .. }) if x.truncate(0) == *x => fitted(),
        (Value::Bytes(bytes), SqlType::Integer { .. }) => {
            let text = std::str::from_utf8(bytes).ok()?.trim();
            let x: i128 = text.parse().ok()?;
            fit(&Value::Int(i64::try_from(x).ok()?), sql_type, "").ok()
        }
        (
            Value::Int(_) | Value::UInt(_) | Value::Double(_) | Value::Decimal(_),
            SqlType::Double,
        ) => fitted(),
        (Value::Int(_) | Value::UInt(_) | Value::Double(_) | Value::Decimal(_), SqlType::Float) => {
            let x = to_f64(value);
            (crate::types::single_precision(x) == x).then(fitted)?
        }
        (
            Value::Int(_) | Value::UInt(_) | Value::Decimal(_) | Value::Bytes(_) | Value::Double(_),
            SqlType::Decimal { .. },
        ) => {
            // Only where rounding to the column's scale changes nothing.
            let fitted = fitted()?;
            (compare(&fitted, value) == Some(Ordering::Equal)).then_some(fitted)
        }
        (_, SqlType::Date) => {
            let datetime = datetime_of(value)?;
            (datetime.micros == 0).then_some(Value::Date(datetime.date))
        }
        (_, SqlType::DateTime { fsp } | SqlType::Timestamp { fsp }) => {
            let datetime = datetime_of(value)?;
            (datetime.round(*fsp)? == datetime).then_some(Value::DateTime(datetime.round(*fsp)?))
        }
        (Value::Time(_) | Value::Bytes(_) | Value::Int(_), SqlType::Time { .. }) => {
            // Exact when rounding to the column's digits changed nothing.
            let Value::Time(time) = fitted()? else {
                return None;
            };
            let full = fit(value, &SqlType::Time { fsp: 6 }, "").ok()?;
            matches!(full, Value::Time(t) if t.micros == time.micros).then_some(Value::Time(time))
        }
        _ => None,
    }
}

/// Bytes that are equal exactly when two values are equal for DISTINCT
/// and grouping (text without its trailing spaces, numbers by value).
pub fn group_key(value: &Value, out: &mut Vec<u8>) {
    // Room for the largest entry at once: one allocation for a fresh key,
    // not one for the tag and another for the value.
    out.reserve(match value {
        Value::Bytes(bytes) => 5 + bytes.len(),
        _ => 18,
    });
    match value {
        Value::Null => out.push(0),
        Value::Int(x) => {
            out.push(1);
            out.extend_from_slice(&(*x as i128).to_le_bytes());
        }
        Value::UInt(x) => {
            out.push(1);
            out.extend_from_slice(&(*x as i128).to_le_bytes());
        }
        Value::Decimal(x) => match x.normalized() {
            (mantissa, 0) => {
                out.push(1);
                out.extend_from_slice(&mantissa.to_le_bytes());
            }
            (mantissa, scale) => {
                out.push(4);
                out.extend_from_slice(&mantissa.to_le_bytes());
                out.push(scale);
            }
        },
        Value::Double(x) => {
            out.push(2);
            let x = if *x == 0.0 { 0.0 } else { *x };
            out.extend_from_slice(&x.to_bits().to_le_bytes());
        }
        Value::Bytes(bytes) => {
            out.push(3);
            let end = bytes.iter().rposition(|b| *b != b' ').map_or(0, |i| i + 1);
            out.extend_from_slice(&(end as u32).to_le_bytes());
            out.extend_from_slice(&bytes[..end]);
        }
        Value::Date(date) => {
            out.push(5);
            out.extend_from_slice(&date.at_midnight().epoch_micros().to_le_bytes());
        }
        Value::DateTime(datetime) => {
            out.push(5);
            out.extend_from_slice(&datetime.epoch_micros().to_le_bytes());
        }
        Value::Time(time) => {
            out.push(6);
            out.extend_from_slice(&time.micros.to_le_bytes());
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_names_the_type_and_the_expression_as_mysql_does() {
        let error =
            arithmetic(Arithmetic::Add, &Value::UInt(u64::MAX), &Value::Int(1)).unwrap_err();
        assert_eq!(error.code, codes::DATA_OUT_OF_RANGE);
        assert_eq!(
            error.message,
            "BIGINT UNSIGNED value is out of range in '(18446744073709551615 + 1)'"
        );
        let error =
            arithmetic(Arithmetic::Multiply, &Value::Double(1e308), &Value::Int(10)).unwrap_err();
        assert_eq!(
            error.message,
            "DOUBLE value is out of range in '(1e308 * 10)'"
        );
        let error = negate(&Value::Int(i64::MIN)).unwrap_err();
        assert_eq!(
            error.message,
            "BIGINT value is out of range in '-(-9223372036854775808)'"
        );
        assert_eq!(
            arithmetic(
                Arithmetic::Divide,
                &Value::Double(1e300),
                &Value::Double(1e-300)
            )
            .unwrap_err()
            .code,
            codes::DATA_OUT_OF_RANGE
        );
    }

    #[test]
    fn numbers_compare_as_numbers_and_text_pads_spaces() {
        assert_eq!(
            compare(&Value::Int(-1), &Value::UInt(1)),
            Some(Ordering::Less)
        );
        assert_eq!(
            compare(&Value::Int(2), &Value::Double(1.5)),
            Some(Ordering::Greater)
        );
        assert_eq!(
            compare(&Value::from("a "), &Value::from("a")),
            Some(Ordering::Equal)
        );
        assert_eq!(
            compare(&Value::from("10"), &Value::Int(9)),
            Some(Ordering::Greater)
        );
        assert_eq!(compare(&Value::Null, &Value::Int(1)), None);
    }

    #[test]
    fn arithmetic_keeps_integers_and_refuses_overflow() {
        let add = |a, b| arithmetic(Arithmetic::Add, &a, &b);
        assert_eq!(add(Value::Int(1), Value::Int(2)), Ok(Value::Int(3)));
        assert_eq!(add(Value::Int(1), Value::Null), Ok(Value::Null));
        assert!(add(Value::Int(i64::MAX), Value::Int(1)).is_err());
        let divided = arithmetic(Arithmetic::Divide, &Value::Int(1), &Value::Int(0));
        assert_eq!(divided, Ok(Value::Null));
        assert_eq!(
            add(Value::from("1.5"), Value::Int(1)),
            Ok(Value::Double(2.5))
        );
    }

    #[test]
    fn fit_converts_as_strict_mode_does() {
        let int = &SqlType::Integer {
            bytes: 4,
            unsigned: false,
        };
        assert_eq!(fit(&Value::from("0"), int, "k"), Ok(Value::Int(0)));
        assert_eq!(fit(&Value::from("abc"), int, "k").unwrap_err().code, 1366);
        assert_eq!(fit(&Value::Int(1 << 40), int, "k").unwrap_err().code, 1264);
        let tiny = &SqlType::Integer {
            bytes: 1,
            unsigned: true,
        };
        assert_eq!(fit(&Value::Int(255), tiny, "k"), Ok(Value::UInt(255)));
        assert_eq!(fit(&Value::Int(256), tiny, "k").unwrap_err().code, 1264);
        assert_eq!(fit(&Value::Int(-1), tiny, "k").unwrap_err().code, 1264);
        let char3 = &SqlType::Char(3);
        // Spaces past CHAR's length go silently (the cluster drops the
        // rest); its length counts bytes.
        assert_eq!(
            fit(&Value::from("ab  "), char3, "c"),
            Ok(Value::from("ab "))
        );
        assert_eq!(
            fit(&Value::from("éé"), char3, "c").unwrap_err().code,
            codes::DATA_TOO_LONG
        );
        // VARCHAR's length counts characters, of up to 4 bytes each.
        let varchar3 = &SqlType::VarChar(3);
        assert_eq!(
            fit(&Value::from("éé€"), varchar3, "v"),
            Ok(Value::from("éé€"))
        );
        assert_eq!(
            fit(&Value::from("😀😀😀 "), varchar3, "v"),
            Ok(Value::from("😀😀😀"))
        );
        assert_eq!(
            fit(&Value::from("éé€x"), varchar3, "v").unwrap_err().code,
            codes::DATA_TOO_LONG
        );
        let varchar2 = &SqlType::VarChar(2);
        assert_eq!(
            fit(&Value::from("é "), varchar2, "v"),
            Ok(Value::from("é "))
        );
        assert_eq!(
            fit(&Value::from("é   "), varchar2, "v"),
            Ok(Value::from("é "))
        );
        // A byte that is not UTF-8 counts as a character of its own.
        assert_eq!(
            fit(&Value::Bytes(vec![0xff, b'a', 0xfe]), varchar2, "v")
                .unwrap_err()
                .code,
            codes::DATA_TOO_LONG
        );
        assert_eq!(
            fit(&Value::Bytes(vec![0xff, 0xfe]), varchar2, "v"),
            Ok(Value::Bytes(vec![0xff, 0xfe]))
        );
        assert_eq!(
            fit(&Value::from("abcd"), char3, "c").unwrap_err().code,
            1406
        );
        assert_eq!(fit(&Value::Int(12), char3, "c"), Ok(Value::from("12")));
    }

    #[test]
    fn fit_reads_decimals_dates_and_members() {
        let text = |value: SqlResult<Value>| match value {
            Ok(value) => display(&value),
            Err(error) => format!("error {}", error.code),
        };
        let money = &SqlType::Decimal {
            precision: 5,
            scale: 2,
        };
        assert_eq!(text(fit(&Value::from("12.345"), money, "m")), "12.35");
        assert_eq!(text(fit(&Value::Int(7), money, "m")), "7.00");
        assert_eq!(text(fit(&Value::Double(0.1), money, "m")), "0.10");
        assert_eq!(text(fit(&Value::from("1000"), money, "m")), "error 1264");
        assert_eq!(text(fit(&Value::from("x"), money, "m")), "error 1366");
        let date = &SqlType::Date;
        assert_eq!(
            text(fit(&Value::from("2024-02-29"), date, "d")),
            "2024-02-29"
        );
        assert_eq!(text(fit(&Value::Int(20240131), date, "d")), "2024-01-31");
        assert_eq!(
            text(fit(&Value::from("2023-02-29"), date, "d")),
            "error 1292"
        );
        let stamp = &SqlType::DateTime { fsp: 2 };
        assert_eq!(
            text(fit(&Value::from("2024-01-31 10:00:00.125"), stamp, "t")),
            "2024-01-31 10:00:00.13"
        );
        let time = &SqlType::Time { fsp: 0 };
        assert_eq!(text(fit(&Value::from("-10:30"), time, "t")), "-10:30:00");
        let year = &SqlType::Year;
        assert_eq!(text(fit(&Value::Int(24), year, "y")), "2024");
        assert_eq!(text(fit(&Value::Int(1800), year, "y")), "error 1264");
        let members = &SqlType::Enum(vec!["small".to_string(), "large".to_string()].into());
        assert_eq!(text(fit(&Value::from("large "), members, "e")), "large");
        assert_eq!(text(fit(&Value::from("LARGE"), members, "e")), "error 1265");
        assert_eq!(text(fit(&Value::Int(1), members, "e")), "small");
        assert_eq!(text(fit(&Value::from("huge"), members, "e")), "error 1265");
        let float = &SqlType::Float;
        assert_eq!(text(fit(&Value::from("1.1"), float, "f")), "1.1");
    }

    #[test]
    fn values_of_different_kinds_compare_as_mysql_does() {
        let decimal = Value::Decimal(Decimal::parse("1.50").unwrap());
        assert_eq!(compare(&decimal, &Value::Int(1)), Some(Ordering::Greater));
        assert_eq!(compare(&Value::Int(2), &decimal), Some(Ordering::Greater));
        let date = Value::Date(Date::new(2024, 1, 31).unwrap());
        assert_eq!(
            compare(&date, &Value::from("2024-01-31")),
            Some(Ordering::Equal)
        );
        assert_eq!(
            compare(&Value::from("2024-02-01"), &date),
            Some(Ordering::Greater)
        );
        assert_eq!(
            compare(&date, &Value::from("2024-01-31 00:00:01")),
            Some(Ordering::Less)
        );
        let quotient = arithmetic(Arithmetic::Divide, &Value::Int(7), &Value::Int(2));
        assert_eq!(quotient.map(|v| display(&v)), Ok("3.5000".to_string()));
        let sum = arithmetic(Arithmetic::Add, &decimal, &Value::Int(1));
        assert_eq!(sum.map(|v| display(&v)), Ok("2.50".to_string()));
        let mut a = Vec::new();
        let mut b = Vec::new();
        group_key(&decimal, &mut a);
        group_key(&Value::Decimal(Decimal::parse("1.5").unwrap()), &mut b);
        assert_eq!(a, b);
    }

    #[test]
    fn doubles_print_as_mysql_prints_them() {
        let text = |x| {
            let mut out = Vec::new();
            write_double(x, &mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(text(3.0), "3");
        assert_eq!(text(2.5), "2.5");
        assert_eq!(text(-0.25), "-0.25");
    }
}
