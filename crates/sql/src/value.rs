//! SQL's rules for values (the client's [`Value`]): how two compare
//! (numbers as numbers, text as the cluster orders it: bytes with PAD
//! SPACE), what is true, arithmetic with MySQL's results, the text a
//! value is sent as, and fitting a value to a column's type on its way
//! into the cluster (a string '0' into an INT column, as sysbench's
//! `DEFAULT '0'` asks).

use crate::error::{codes, SqlError, SqlResult};
use client::{ColumnType, Value};
use std::cmp::Ordering;

/// How `a` and `b` compare, or `None` when either is NULL (SQL's unknown).
pub fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Null, _) | (_, Value::Null) => None,
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::UInt(x), Value::UInt(y)) => Some(x.cmp(y)),
        (Value::Int(x), Value::UInt(y)) => Some(compare_signed_unsigned(*x, *y)),
        (Value::UInt(x), Value::Int(y)) => Some(compare_signed_unsigned(*y, *x).reverse()),
        (Value::Bytes(x), Value::Bytes(y)) => Some(compare_padded(x, y)),
        // A number with text or a double: as doubles (MySQL converts the
        // string to a number).
        _ => Some(compare_doubles(to_f64(a), to_f64(b))),
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
/// longest numeric prefix, 0 when there is none), NULL as 0.
pub fn to_f64(value: &Value) -> f64 {
    match value {
        Value::Null => 0.0,
        Value::Int(x) => *x as f64,
        Value::UInt(x) => *x as f64,
        Value::Double(x) => *x,
        Value::Bytes(bytes) => parse_number_prefix(bytes),
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
        Value::Bytes(_) => Some(to_f64(value) != 0.0),
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
    /// `/`: always a double (MySQL's is a DECIMAL).
    Divide,
    /// `DIV`: integer division.
    IntegerDivide,
    /// `%` / `MOD`.
    Modulo,
}

/// `a op b` with MySQL's rules: NULL in, NULL out; integers stay integers
/// (an overflow is error 1690); a division by zero is NULL.
pub fn arithmetic(op: Arithmetic, a: &Value, b: &Value) -> SqlResult<Value> {
    if a.is_null() || b.is_null() {
        return Ok(Value::Null);
    }
    let integers = integer_of(a).zip(integer_of(b));
    let out_of_range = || {
        SqlError::new(
            1690,
            format!("BIGINT value is out of range in '{a:?} {op:?} {b:?}'"),
        )
    };
    match (op, integers) {
        (Arithmetic::Divide, _) => {
            let divisor = to_f64(b);
            Ok(if divisor == 0.0 {
                Value::Null
            } else {
                Value::Double(to_f64(a) / divisor)
            })
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
            let result = result.ok_or_else(out_of_range)?;
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
                    (true, _, Err(_)) => {
                        return Err(SqlError::new(
                            1690,
                            format!(
                                "BIGINT UNSIGNED value is out of range in '{a:?} {op:?} {b:?}'"
                            ),
                        ))
                    }
                    (false, Ok(value), _) => Value::Int(value),
                    (false, Err(_), _) => return Err(out_of_range()),
                },
            )
        }
        (_, None) => {
            let (x, y) = (to_f64(a), to_f64(b));
            Ok(match op {
                Arithmetic::Add => Value::Double(x + y),
                Arithmetic::Subtract => Value::Double(x - y),
                Arithmetic::Multiply => Value::Double(x * y),
                Arithmetic::IntegerDivide if y == 0.0 => Value::Null,
                Arithmetic::IntegerDivide => Value::Int((x / y).trunc() as i64),
                Arithmetic::Modulo if y == 0.0 => Value::Null,
                Arithmetic::Modulo => Value::Double(x % y),
                Arithmetic::Divide => unreachable!("handled above"),
            })
        }
    }
}

/// Unary minus: `-x` is signed even for an UNSIGNED `x` (MySQL's
/// `-CAST(5 AS UNSIGNED)` is -5); 1690 only when it does not fit a BIGINT.
pub fn negate(value: &Value) -> SqlResult<Value> {
    match value {
        Value::Null => Ok(Value::Null),
        Value::Int(_) | Value::UInt(_) => {
            let x = integer_of(value).expect("an integer");
            i64::try_from(-x).map(Value::Int).map_err(|_| {
                SqlError::new(
                    1690,
                    format!("BIGINT value is out of range in '-({value:?})'"),
                )
            })
        }
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
        Value::Bytes(bytes) => out.extend_from_slice(bytes),
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

/// `value` as the cluster stores a column of `column_type`: an integer
/// in range, a double, bytes; text to a number as MySQL's strict mode
/// (digits only, else error 1366); a number to text as its text form.
/// NULL stays NULL (the cluster refuses it where NOT NULL).
pub fn fit(value: &Value, column_type: ColumnType, column: &str) -> SqlResult<Value> {
    let out_of_range = || {
        SqlError::new(
            codes::WARN_DATA_OUT_OF_RANGE,
            format!("Out of range value for column '{column}'"),
        )
    };
    let integer = |value: &Value| -> SqlResult<i128> {
        match value {
            Value::Int(x) => Ok(*x as i128),
            Value::UInt(x) => Ok(*x as i128),
            Value::Double(x) => Ok(x.round() as i128),
            Value::Bytes(bytes) => {
                let text = std::str::from_utf8(bytes).unwrap_or("").trim();
                if let Ok(x) = text.parse::<i128>() {
                    return Ok(x);
                }
                match text.parse::<f64>() {
                    Ok(x) if x.is_finite() => Ok(x.round() as i128),
                    _ => Err(SqlError::new(
                        codes::TRUNCATED_WRONG_VALUE_FOR_FIELD,
                        format!("Incorrect integer value: '{text}' for column '{column}'"),
                    )),
                }
            }
            Value::Null => unreachable!("NULL handled by the caller"),
        }
    };
    if value.is_null() {
        return Ok(Value::Null);
    }
    Ok(match column_type {
        ColumnType::Int { unsigned: false } => {
            let x = integer(value)?;
            Value::Int(i32::try_from(x).map_err(|_| out_of_range())? as i64)
        }
        ColumnType::Int { unsigned: true } => {
            let x = integer(value)?;
            Value::UInt(u32::try_from(x).map_err(|_| out_of_range())? as u64)
        }
        ColumnType::BigInt { unsigned: false } => {
            Value::Int(i64::try_from(integer(value)?).map_err(|_| out_of_range())?)
        }
        ColumnType::BigInt { unsigned: true } => {
            Value::UInt(u64::try_from(integer(value)?).map_err(|_| out_of_range())?)
        }
        ColumnType::Double => match value {
            Value::Bytes(bytes) => {
                let text = std::str::from_utf8(bytes).unwrap_or("").trim();
                Value::Double(text.parse().map_err(|_| {
                    SqlError::new(
                        codes::TRUNCATED_WRONG_VALUE_FOR_FIELD,
                        format!("Incorrect double value: '{text}' for column '{column}'"),
                    )
                })?)
            }
            other => Value::Double(to_f64(other)),
        },
        ColumnType::Char(n) | ColumnType::VarChar(n) | ColumnType::VarBinary(n) => {
            let bytes = match value {
                Value::Bytes(bytes) => bytes.clone(),
                other => display(other).into_bytes(),
            };
            // CHAR keeps no trailing spaces, and MySQL cuts them off
            // silently where they alone overflow.
            let mut bytes = bytes;
            if bytes.len() > n as usize && bytes[n as usize..].iter().all(|b| *b == b' ') {
                bytes.truncate(n as usize);
            }
            if bytes.len() > n as usize {
                return Err(SqlError::new(
                    codes::DATA_TOO_LONG,
                    format!("Data too long for column '{column}' at row 1"),
                ));
            }
            Value::Bytes(bytes)
        }
    })
}

/// Whether `value` converts exactly to `column_type` with [`fit`]'s rules
/// and compares the same as the column's values would: a key or bound a
/// lookup can use as it is. `None` when it cannot (the caller then finds
/// no row, or filters in the SQL node).
pub fn fit_exactly(value: &Value, column_type: ColumnType) -> Option<Value> {
    match (value, column_type) {
        (Value::Null, _) => None,
        (Value::Bytes(_), ColumnType::Char(_) | ColumnType::VarChar(_)) => {
            fit(value, column_type, "").ok()
        }
        (Value::Bytes(_), ColumnType::VarBinary(_)) => fit(value, column_type, "").ok(),
        (Value::Int(_) | Value::UInt(_), ColumnType::Int { .. } | ColumnType::BigInt { .. }) => {
            fit(value, column_type, "").ok()
        }
        (Value::Double(x), ColumnType::Int { .. } | ColumnType::BigInt { .. })
            if *x == x.trunc() =>
        {
            fit(value, column_type, "").ok()
        }
        (Value::Bytes(bytes), ColumnType::Int { .. } | ColumnType::BigInt { .. }) => {
            let text = std::str::from_utf8(bytes).ok()?.trim();
            let x: i128 = text.parse().ok()?;
            fit(&Value::Int(i64::try_from(x).ok()?), column_type, "").ok()
        }
        (Value::Int(_) | Value::UInt(_) | Value::Double(_), ColumnType::Double) => {
            fit(value, column_type, "").ok()
        }
        _ => None,
    }
}

/// Bytes that are equal exactly when two values are equal for DISTINCT
/// and grouping (text without its trailing spaces, numbers by value).
pub fn group_key(value: &Value, out: &mut Vec<u8>) {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let int = ColumnType::Int { unsigned: false };
        assert_eq!(fit(&Value::from("0"), int, "k"), Ok(Value::Int(0)));
        assert_eq!(fit(&Value::from("abc"), int, "k").unwrap_err().code, 1366);
        assert_eq!(fit(&Value::Int(1 << 40), int, "k").unwrap_err().code, 1264);
        let char3 = ColumnType::Char(3);
        assert_eq!(
            fit(&Value::from("ab  "), char3, "c"),
            Ok(Value::from("ab "))
        );
        assert_eq!(
            fit(&Value::from("abcd"), char3, "c").unwrap_err().code,
            1406
        );
        assert_eq!(fit(&Value::Int(12), char3, "c"), Ok(Value::from("12")));
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
