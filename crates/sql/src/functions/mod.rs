//! The scalar functions beyond the first few (`expr::Function` names
//! them all): text (SUBSTRING, LEFT, RIGHT, TRIM, REPLACE, CHAR_LENGTH,
//! CONCAT_WS, LPAD, RPAD, LOCATE; more in `strings`), numbers (ROUND,
//! TRUNCATE, FLOOR, CEILING, MOD, GREATEST, LEAST, NULLIF; more in
//! `math`), dates and times (DATE_ADD, DATE_SUB, DATE, YEAR ... SECOND,
//! DAYOFWEEK, DAYOFYEAR, WEEKDAY, QUARTER, DATEDIFF, UNIX_TIMESTAMP;
//! more in `calendar`) and CAST, each with MySQL's results for NULL and
//! for its types.

pub mod calendar;
pub mod math;
pub mod patterns;
pub mod reading_dates;
pub mod strings;

use crate::decimal::Decimal;
use crate::error::{codes, SqlError, SqlResult};
use crate::temporal::{add_interval, DateTime, IntervalUnit, Time};
use crate::types::SqlType;
use crate::value::{self, Value};

/// The longest text a function makes (MySQL's max_allowed_packet, 64
/// MiB here): a longer one is NULL, as MySQL's.
const MAX_RESULT_BYTES: usize = 64 << 20;

/// What CAST converts to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CastTarget {
    /// SIGNED [INTEGER].
    Signed,
    /// UNSIGNED [INTEGER].
    Unsigned,
    /// DECIMAL(precision, scale).
    Decimal {
        /// Digits in all.
        precision: u8,
        /// Digits after the point.
        scale: u8,
    },
    /// DOUBLE, REAL, FLOAT.
    Double,
    /// CHAR: text.
    Char,
    /// DATE.
    Date,
    /// DATETIME(fsp).
    DateTime {
        /// Fractional digits.
        fsp: u8,
    },
    /// TIME(fsp).
    Time {
        /// Fractional digits.
        fsp: u8,
    },
}

/// A date and time part YEAR() and its kin take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// YEAR.
    Year,
    /// MONTH.
    Month,
    /// DAY, DAYOFMONTH.
    Day,
    /// HOUR.
    Hour,
    /// MINUTE.
    Minute,
    /// SECOND.
    Second,
    /// DAYOFWEEK: 1 for Sunday to 7.
    DayOfWeek,
    /// WEEKDAY: 0 for Monday to 6.
    Weekday,
    /// DAYOFYEAR: from 1.
    DayOfYear,
    /// QUARTER: 1 to 4.
    Quarter,
}

/// Text of a value (NULL stays `None`).
fn text(value: &Value) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    value::write_text(value, &mut out).then_some(out)
}

/// A value as an integer (MySQL's conversion for a position or count).
fn integer(value: &Value) -> Option<i64> {
    match value {
        Value::Null => None,
        Value::Int(x) => Some(*x),
        Value::UInt(x) => Some(i64::try_from(*x).unwrap_or(i64::MAX)),
        other => Some(value::to_f64(other).round() as i64),
    }
}

/// The characters of UTF-8 text (bytes that are not UTF-8 as one each).
fn characters(bytes: &[u8]) -> Vec<&[u8]> {
    match std::str::from_utf8(bytes) {
        Ok(text) => text
            .char_indices()
            .map(|(at, c)| &bytes[at..at + c.len_utf8()])
            .collect(),
        Err(_) => bytes.chunks(1).collect(),
    }
}

/// SUBSTRING(text, position[, length]): positions from 1, negative from
/// the end, as MySQL's.
pub fn substring(text_value: &Value, position: &Value, length: Option<&Value>) -> Value {
    let (Some(bytes), Some(position)) = (text(text_value), integer(position)) else {
        return Value::Null;
    };
    let length = match length {
        Some(length) => match integer(length) {
            Some(length) => length,
            None => return Value::Null,
        },
        None => i64::MAX,
    };
    let chars = characters(&bytes);
    let count = chars.len() as i64;
    let start = match position {
        0 => return Value::Bytes(Vec::new()),
        p if p > 0 => p - 1,
        p => count + p,
    };
    if start < 0 || start >= count || length <= 0 {
        return Value::Bytes(Vec::new());
    }
    let end = start.saturating_add(length).min(count);
    Value::Bytes(chars[start as usize..end as usize].concat())
}

/// Whether `value` is NULL, for functions that are NULL on any NULL.
fn any_null(values: &[Value]) -> bool {
    values.iter().any(Value::is_null)
}

/// ROUND(x, d) and TRUNCATE(x, d): exact for integers and DECIMALs
/// (half away from zero), by doubles otherwise (half to even).
fn round(value: &Value, digits: i64, truncate: bool) -> SqlResult<Value> {
    // A double's digits run from about 10^308 to 10^-324: beyond those
    // places rounding keeps nothing, or changes nothing.
    let double_digits = digits.clamp(-400, 400) as i32;
    let digits = digits.clamp(-38, 30);
    Ok(match value {
        Value::Null => Value::Null,
        Value::Int(_) | Value::UInt(_) | Value::Decimal(_) => {
            let exact = match value {
                Value::Decimal(x) => *x,
                Value::Int(x) => Decimal::from_integer(*x as i128).expect("an i64 fits"),
                Value::UInt(x) => Decimal::from_integer(*x as i128).expect("a u64 fits"),
                _ => unreachable!("matched above"),
            };
            let integer_input = !matches!(value, Value::Decimal(_));
            if digits >= 0 {
                let scale = digits as u8;
                let result = match truncate {
                    true => exact.truncate(scale),
                    false => exact
                        .rescale(scale.min(exact.scale()))
                        .ok_or_else(out_of_range)?,
                };
                match integer_input {
                    true => value.clone(),
                    false => Value::Decimal(result),
                }
            } else {
                // To tens, hundreds...: the mantissa divided by 10^(scale
                // + k), rounded or cut, times 10^k.
                let (mantissa, scale) = exact.parts();
                let k = (-digits) as u32;
                let kept = match 10i128.checked_pow(scale as u32 + k) {
                    None => 0,
                    Some(divisor) => {
                        let quotient = mantissa / divisor;
                        let remainder = mantissa % divisor;
                        let away =
                            !truncate && remainder.unsigned_abs() * 2 >= divisor.unsigned_abs();
                        let quotient = match (away, mantissa < 0) {
                            (true, true) => quotient - 1,
                            (true, false) => quotient + 1,
                            (false, _) => quotient,
                        };
                        quotient.saturating_mul(10i128.pow(k))
                    }
                };
                match integer_input {
                    true => match value {
                        Value::UInt(_) => {
                            Value::UInt(u64::try_from(kept.max(0)).map_err(|_| out_of_range())?)
                        }
                        _ => Value::Int(i64::try_from(kept).map_err(|_| out_of_range())?),
                    },
                    false => Value::Decimal(Decimal::from_integer(kept).ok_or_else(out_of_range)?),
                }
            }
        }
        other => {
            let x = value::to_f64(other);
            let factor = 10f64.powi(double_digits);
            let scaled = x * factor;
            // A double rounds half to even, as MySQL's (the C library's
            // rint): ROUND(2.5e0) is 2.
            let rounded = match truncate {
                true => scaled.trunc(),
                false => scaled.round_ties_even(),
            };
            match (factor == 0.0, scaled.is_finite() && factor.is_finite()) {
                // More digits to the left than a double has: all gone.
                (true, _) => Value::Double(0.0),
                // More to the right than it has: nothing to round.
                (false, false) => Value::Double(x),
                (false, true) => Value::Double(rounded / factor),
            }
        }
    })
}

fn out_of_range() -> SqlError {
    SqlError::new(codes::DATA_OUT_OF_RANGE, "DECIMAL value is out of range")
}

/// FLOOR and CEILING: integers stay, DECIMALs become integers exactly.
fn floor_or_ceiling(value: &Value, ceiling: bool) -> Value {
    match value {
        Value::Null => Value::Null,
        Value::Int(_) | Value::UInt(_) => value.clone(),
        Value::Decimal(x) => {
            let truncated = x.truncate(0);
            let (mantissa, _) = truncated.parts();
            let below = x.compare(truncated) == std::cmp::Ordering::Less;
            let above = x.compare(truncated) == std::cmp::Ordering::Greater;
            let whole = match (ceiling, below, above) {
                (false, true, _) => mantissa - 1,
                (true, _, true) => mantissa + 1,
                _ => mantissa,
            };
            match i64::try_from(whole) {
                Ok(whole) => Value::Int(whole),
                Err(_) => Value::Decimal(Decimal::from_integer(whole).unwrap_or(*x)),
            }
        }
        other => {
            let x = value::to_f64(other);
            Value::Double(if ceiling { x.ceil() } else { x.floor() })
        }
    }
}

/// GREATEST and LEAST: NULL if any argument is.
fn extreme(values: Vec<Value>, greatest: bool) -> Value {
    if any_null(&values) {
        return Value::Null;
    }
    values
        .into_iter()
        .reduce(|best, next| {
            let ordering = value::order(&next, &best);
            let better = match greatest {
                true => ordering == std::cmp::Ordering::Greater,
                false => ordering == std::cmp::Ordering::Less,
            };
            if better {
                next
            } else {
                best
            }
        })
        .unwrap_or(Value::Null)
}

/// DATE_ADD(d, INTERVAL n unit): a DATE (or the text of one) stays a
/// DATE for whole days and longer, else a DATETIME; NULL for a date that
/// is not one.
pub fn date_add(date: &Value, amount: &Value, unit: IntervalUnit, subtract: bool) -> Value {
    let Some(amount) = integer(amount) else {
        return Value::Null;
    };
    let amount = if subtract {
        amount.saturating_neg()
    } else {
        amount
    };
    let Some(datetime) = value::datetime_of(date) else {
        return Value::Null;
    };
    let Some(moved) = add_interval(datetime, amount, unit) else {
        return Value::Null;
    };
    // A date, or text of a date alone, stays a date for whole days and
    // longer (MySQL's rule).
    let date_only = match date {
        Value::Date(_) => true,
        Value::Bytes(bytes) => !bytes.contains(&b':'),
        _ => false,
    };
    match date_only && unit.keeps_date() {
        true => Value::Date(moved.date),
        false => Value::DateTime(moved),
    }
}

/// CAST(value AS target), as MySQL converts (an impossible conversion is
/// NULL for a date or time, 0 for a number).
pub fn cast(value: &Value, target: CastTarget) -> SqlResult<Value> {
    if value.is_null() {
        return Ok(Value::Null);
    }
    Ok(match target {
        CastTarget::Signed => match value {
            Value::Int(_) => value.clone(),
            Value::UInt(x) => Value::Int(*x as i64),
            Value::Decimal(x) => Value::Int(x.round_to_integer() as i64),
            Value::Bytes(bytes) => {
                let text = String::from_utf8_lossy(bytes);
                match text.trim().parse::<i64>() {
                    Ok(x) => Value::Int(x),
                    Err(_) => Value::Int(value::to_f64(value) as i64),
                }
            }
            other => Value::Int(value::to_f64(other).round() as i64),
        },
        CastTarget::Unsigned => match cast(value, CastTarget::Signed)? {
            Value::Int(x) => Value::UInt(x as u64),
            other => other,
        },
        CastTarget::Decimal { precision, scale } => {
            let fitted = value::fit(value, &SqlType::Decimal { precision, scale }, "CAST");
            match fitted {
                Ok(fitted) => fitted,
                // Out of range: the largest of the type, as MySQL's
                // (with a warning there).
                Err(error) if error.code == codes::WARN_DATA_OUT_OF_RANGE => {
                    let nines = 10i128.pow(precision as u32) - 1;
                    let sign = if value::to_f64(value) < 0.0 { -1 } else { 1 };
                    Value::Decimal(Decimal::new(sign * nines, scale).expect("fits its precision"))
                }
                Err(_) => Value::Decimal(Decimal::new(0, scale).expect("zero fits")),
            }
        }
        CastTarget::Double => Value::Double(value::to_f64(value)),
        CastTarget::Char => Value::Bytes(text(value).unwrap_or_default()),
        CastTarget::Date => value::datetime_of(value).map_or(Value::Null, |d| Value::Date(d.date)),
        CastTarget::DateTime { fsp } => value::datetime_of(value)
            .and_then(|d| d.round(fsp))
            .map_or(Value::Null, Value::DateTime),
        CastTarget::Time { fsp } => {
            let time = match value {
                Value::Time(time) => Some(*time),
                Value::DateTime(datetime) => Time::new(datetime.micros, datetime.fsp),
                Value::Bytes(bytes) => std::str::from_utf8(bytes).ok().and_then(Time::parse),
                other => integer(other).and_then(Time::from_number),
            };
            time.and_then(|t| t.round(fsp))
                .map_or(Value::Null, Value::Time)
        }
    })
}

/// A part of a date or time value; NULL for what is not one.
pub fn part(value: &Value, part: Part) -> Value {
    // Text that is a time and not a date and time ('10:30:45') reads as
    // a TIME for the clock's parts.
    let as_time = match value {
        Value::Time(time) => Some(*time),
        Value::Bytes(bytes) if value::datetime_of(value).is_none() => {
            std::str::from_utf8(bytes).ok().and_then(Time::parse)
        }
        _ => None,
    };
    if let Some(time) = as_time {
        let seconds = time.micros.abs() / 1_000_000;
        return match part {
            Part::Hour => Value::Int(seconds / 3600),
            Part::Minute => Value::Int(seconds / 60 % 60),
            Part::Second => Value::Int(seconds % 60),
            _ => Value::Null,
        };
    }
    let Some(datetime) = value::datetime_of(value) else {
        return Value::Null;
    };
    let (hour, minute, second, _) = datetime.clock();
    Value::Int(match part {
        Part::Year => datetime.date.year as i64,
        Part::Month => datetime.date.month as i64,
        Part::Day => datetime.date.day as i64,
        Part::Hour => hour,
        Part::Minute => minute,
        Part::Second => second,
        Part::DayOfWeek => calendar::day_of_week(datetime.date) as i64 + 1,
        Part::Weekday => (calendar::day_of_week(datetime.date) as i64 + 6) % 7,
        Part::DayOfYear => calendar::day_of_year(datetime.date),
        Part::Quarter => (datetime.date.month as i64 - 1) / 3 + 1,
    })
}

/// DATEDIFF(a, b): days from b to a.
pub fn date_diff(a: &Value, b: &Value) -> Value {
    match (value::datetime_of(a), value::datetime_of(b)) {
        (Some(a), Some(b)) => Value::Int(a.date.days() - b.date.days()),
        _ => Value::Null,
    }
}

/// UNIX_TIMESTAMP(d): seconds since 1970 UTC of a date and time in the
/// session's zone (`zone` seconds east of UTC).
pub fn unix_timestamp(value: &Value, zone: i64) -> Value {
    match value::datetime_of(value) {
        Some(datetime) => {
            let micros = datetime.epoch_micros() - zone * 1_000_000;
            match micros % 1_000_000 {
                0 => Value::Int(micros / 1_000_000),
                // With the time's fractional digits, as MySQL shows it.
                _ => {
                    let exact = Decimal::new(micros as i128, 6).expect("fits");
                    let digits = match datetime.fsp {
                        0 => 6,
                        fsp => fsp.min(6),
                    };
                    Value::Decimal(exact.rescale(digits).unwrap_or(exact))
                }
            }
        }
        None => Value::Null,
    }
}

/// A date and time now, in the zone `zone` seconds east of UTC, with
/// `fsp` fractional digits: NOW(), CURRENT_TIMESTAMP.
pub fn now(started: std::time::SystemTime, zone: i64, fsp: u8) -> Value {
    let micros = started
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
        + zone * 1_000_000;
    let datetime = DateTime::from_epoch_micros(micros, 6)
        .and_then(|d| d.round(fsp.min(6)))
        .expect("now is within years 1 to 9999");
    Value::DateTime(datetime)
}

/// Today's date in the zone: CURDATE().
pub fn today(started: std::time::SystemTime, zone: i64) -> Value {
    match now(started, zone, 0) {
        Value::DateTime(datetime) => Value::Date(datetime.date),
        _ => unreachable!("now is a date and time"),
    }
}

/// The time of day in the zone: CURTIME().
pub fn time_of_day(started: std::time::SystemTime, zone: i64) -> Value {
    match now(started, zone, 0) {
        Value::DateTime(datetime) => {
            Value::Time(Time::new(datetime.micros, 0).expect("a time of day is a TIME"))
        }
        _ => unreachable!("now is a date and time"),
    }
}

/// TRIM's sides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Both ends (TRIM).
    Both,
    /// The start (LTRIM, TRIM(LEADING)).
    Leading,
    /// The end (RTRIM, TRIM(TRAILING)).
    Trailing,
}

/// TRIM: `what` (spaces by default) taken off the side(s), repeatedly.
pub fn trim(value: &Value, what: Option<&Value>, side: Side) -> Value {
    let Some(mut bytes) = text(value) else {
        return Value::Null;
    };
    let what = match what {
        Some(what) => match text(what) {
            Some(what) => what,
            None => return Value::Null,
        },
        None => b" ".to_vec(),
    };
    if what.is_empty() {
        return Value::Bytes(bytes);
    }
    if side != Side::Trailing {
        while bytes.starts_with(&what) {
            bytes.drain(..what.len());
        }
    }
    if side != Side::Leading {
        while bytes.ends_with(&what) {
            bytes.truncate(bytes.len() - what.len());
        }
    }
    Value::Bytes(bytes)
}

/// The functions of this module by name, with their arity checked by
/// the caller: `None` when `name` is none of them.
pub fn apply(function: crate::expr::Function, values: &[Value], zone: i64) -> SqlResult<Value> {
    use crate::expr::Function as F;
    let first = || &values[0];
    Ok(match function {
        F::Substring => substring(first(), &values[1], values.get(2)),
        F::Left | F::Right => {
            let (Some(bytes), Some(count)) = (text(first()), integer(&values[1])) else {
                return Ok(Value::Null);
            };
            let chars = characters(&bytes);
            let count = count.clamp(0, chars.len() as i64) as usize;
            Value::Bytes(match function {
                F::Left => chars[..count].concat(),
                _ => chars[chars.len() - count..].concat(),
            })
        }
        F::CharLength => match text(first()) {
            Some(bytes) => Value::Int(characters(&bytes).len() as i64),
            None => Value::Null,
        },
        F::Replace => match (text(first()), text(&values[1]), text(&values[2])) {
            (Some(text), Some(from), Some(to)) => {
                if from.is_empty() {
                    return Ok(Value::Bytes(text));
                }
                let mut out = Vec::with_capacity(text.len());
                let mut at = 0;
                while at < text.len() {
                    if text[at..].starts_with(&from) {
                        out.extend_from_slice(&to);
                        at += from.len();
                    } else {
                        out.push(text[at]);
                        at += 1;
                    }
                    if out.len() > MAX_RESULT_BYTES {
                        return Ok(Value::Null);
                    }
                }
                Value::Bytes(out)
            }
            _ => Value::Null,
        },
        F::Trim(side) => trim(first(), values.get(1), side),
        F::ConcatWithSeparator => {
            let Some(separator) = text(first()) else {
                return Ok(Value::Null);
            };
            let parts: Vec<Vec<u8>> = values[1..].iter().filter_map(text).collect();
            Value::Bytes(parts.join(&separator[..]))
        }
        F::Pad { left } => {
            let (Some(bytes), Some(length), Some(filler)) =
                (text(first()), integer(&values[1]), text(&values[2]))
            else {
                return Ok(Value::Null);
            };
            let chars = characters(&bytes);
            let length = length.max(0) as usize;
            if length > MAX_RESULT_BYTES {
                // Longer than a packet may be: NULL, as MySQL answers past
                // max_allowed_packet.
                return Ok(Value::Null);
            }
            if length <= chars.len() {
                return Ok(Value::Bytes(chars[..length].concat()));
            }
            let filler_chars = characters(&filler);
            if filler_chars.is_empty() {
                return Ok(Value::Null);
            }
            let padding: Vec<u8> = filler_chars
                .iter()
                .cycle()
                .take(length - chars.len())
                .flat_map(|c| c.iter().copied())
                .collect();
            Value::Bytes(match left {
                true => [padding, bytes].concat(),
                false => [bytes, padding].concat(),
            })
        }
        F::Locate => {
            // LOCATE(needle, haystack[, start]): the first position from 1,
            // 0 when absent.
            let (Some(needle), Some(haystack)) = (text(first()), text(&values[1])) else {
                return Ok(Value::Null);
            };
            let start = values.get(2).and_then(integer).unwrap_or(1).max(1) as usize;
            let chars = characters(&haystack);
            let needle_chars = characters(&needle);
            if start > chars.len() + 1 {
                return Ok(Value::Int(0));
            }
            let found = (start - 1..=chars.len().saturating_sub(needle_chars.len()))
                .find(|at| chars[*at..].starts_with(&needle_chars));
            Value::Int(found.map_or(0, |at| at as i64 + 1))
        }
        F::Round | F::Truncate => {
            let digits = match values.get(1) {
                Some(digits) => match integer(digits) {
                    Some(digits) => digits,
                    None => return Ok(Value::Null),
                },
                None => 0,
            };
            round(first(), digits, function == F::Truncate)?
        }
        F::Floor => floor_or_ceiling(first(), false),
        F::Ceiling => floor_or_ceiling(first(), true),
        F::Greatest => extreme(values.to_vec(), true),
        F::Least => extreme(values.to_vec(), false),
        F::NullIf => match value::compare(first(), &values[1]) {
            Some(std::cmp::Ordering::Equal) => Value::Null,
            _ => first().clone(),
        },
        F::DateAdd { unit, subtract } => date_add(first(), &values[1], unit, subtract),
        F::DatePart(which) => part(first(), which),
        F::DateOf => value::datetime_of(first()).map_or(Value::Null, |d| Value::Date(d.date)),
        F::DateDiff => date_diff(first(), &values[1]),
        F::UnixTimestamp => unix_timestamp(first(), zone),
        F::Cast(target) => cast(first(), target)?,
        F::Math(function) => math::unary(function, first())?,
        F::Log => math::log(first(), &values[1])?,
        F::Power => math::power(first(), &values[1])?,
        F::Sign => math::sign(first()),
        F::Repeat => strings::repeat(first(), &values[1]),
        F::Space => strings::space(first()),
        F::Reverse => strings::reverse(first()),
        F::Hex => strings::hex(first()),
        F::Unhex => strings::unhex(first()),
        F::Digest(kind) => strings::digest(kind, first(), values.get(1)),
        F::Ascii => strings::ascii(first()),
        F::FindInSet => strings::find_in_set(first(), &values[1]),
        F::Field => strings::field(values),
        F::Element => strings::element(values),
        F::StrCmp => strings::strcmp(first(), &values[1]),
        F::DateFormat => calendar::date_format(first(), &values[1]),
        F::DayName => calendar::day_name(first()),
        F::MonthName => calendar::month_name(first()),
        F::LastDay => calendar::last_day(first()),
        F::FromUnixTime => calendar::from_unixtime(first(), zone),
        F::TimestampDiff(unit) => calendar::timestamp_diff(unit, first(), &values[1]),
        F::Week => calendar::week(first(), values.get(1)),
        F::YearWeek => calendar::year_week(first(), values.get(1)),
        F::StrToDate => reading_dates::str_to_date(first(), &values[1])?,
        F::ConvertTz => calendar::convert_tz(first(), &values[1], &values[2]),
        F::Format => math::format(first(), &values[1], values.get(2))?,
        F::Regexp(which) => patterns::apply(which, values)?,
        other => {
            return Err(SqlError::new(
                codes::UNKNOWN_ERROR,
                format!("internal: {other:?} is not evaluated by the functions module"),
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::Function as F;
    use crate::temporal::Date;

    fn run(function: F, values: &[Value]) -> String {
        value::display(&apply(function, values, 0).unwrap())
    }

    fn d(text: &str) -> Value {
        Value::Decimal(Decimal::parse(text).unwrap())
    }

    #[test]
    fn text_functions_count_characters() {
        let s = Value::from("héllo");
        assert_eq!(
            run(F::Substring, &[s.clone(), Value::Int(2), Value::Int(3)]),
            "éll"
        );
        assert_eq!(run(F::Substring, &[s.clone(), Value::Int(-2)]), "lo");
        assert_eq!(run(F::Substring, &[s.clone(), Value::Int(0)]), "");
        assert_eq!(run(F::Left, &[s.clone(), Value::Int(2)]), "hé");
        assert_eq!(run(F::Right, &[s.clone(), Value::Int(9)]), "héllo");
        assert_eq!(run(F::CharLength, std::slice::from_ref(&s)), "5");
        assert_eq!(
            run(
                F::Replace,
                &[Value::from("a-b-c"), Value::from("-"), Value::from("+")]
            ),
            "a+b+c"
        );
        assert_eq!(run(F::Trim(Side::Both), &[Value::from("  x  ")]), "x");
        assert_eq!(
            run(
                F::Trim(Side::Leading),
                &[Value::from("xxaxx"), Value::from("x")]
            ),
            "axx"
        );
        assert_eq!(
            run(
                F::ConcatWithSeparator,
                &[
                    Value::from(","),
                    Value::from("a"),
                    Value::Null,
                    Value::Int(3)
                ]
            ),
            "a,3"
        );
        assert_eq!(
            run(
                F::Pad { left: true },
                &[Value::from("7"), Value::Int(3), Value::from("0")]
            ),
            "007"
        );
        assert_eq!(
            run(
                F::Locate,
                &[Value::from("b"), Value::from("abcb"), Value::Int(3)]
            ),
            "4"
        );
        assert_eq!(run(F::Substring, &[Value::Null, Value::Int(1)]), "NULL");
    }

    #[test]
    fn rounding_is_exact_for_exact_numbers() {
        assert_eq!(run(F::Round, &[d("2.345"), Value::Int(2)]), "2.35");
        assert_eq!(run(F::Round, &[d("-2.5")]), "-3");
        assert_eq!(run(F::Truncate, &[d("2.349"), Value::Int(2)]), "2.34");
        assert_eq!(run(F::Round, &[Value::Int(1234), Value::Int(-2)]), "1200");
        let too_big = apply(F::Round, &[Value::Int(i64::MAX), Value::Int(-1)], 0);
        assert_eq!(too_big.unwrap_err().code, 1690);
        // A double rounds half to even (MySQL's rint), unlike an exact number.
        assert_eq!(run(F::Round, &[Value::Double(2.5)]), "2");
        assert_eq!(run(F::Round, &[Value::Double(3.5)]), "4");
        assert_eq!(run(F::Floor, &[d("-1.5")]), "-2");
        assert_eq!(run(F::Ceiling, &[d("1.2")]), "2");
        assert_eq!(
            run(F::Greatest, &[Value::Int(3), d("3.5"), Value::Int(1)]),
            "3.5"
        );
        assert_eq!(run(F::Least, &[Value::Int(3), Value::Null]), "NULL");
        assert_eq!(run(F::NullIf, &[Value::Int(1), Value::Int(1)]), "NULL");
    }

    #[test]
    fn dates_move_and_part() {
        let date = Value::Date(Date::new(2024, 1, 31).unwrap());
        let month = F::DateAdd {
            unit: IntervalUnit::Month,
            subtract: false,
        };
        assert_eq!(run(month, &[date.clone(), Value::Int(1)]), "2024-02-29");
        let hours = F::DateAdd {
            unit: IntervalUnit::Hour,
            subtract: true,
        };
        assert_eq!(
            run(hours, &[date.clone(), Value::Int(1)]),
            "2024-01-30 23:00:00"
        );
        assert_eq!(
            run(
                F::DatePart(Part::Month),
                &[Value::from("2024-03-05 10:00:00")]
            ),
            "3"
        );
        assert_eq!(
            run(F::DateDiff, &[Value::from("2024-03-01"), date.clone()]),
            "30"
        );
        assert_eq!(run(F::UnixTimestamp, &[Value::from("1970-01-02")]), "86400");
        assert_eq!(
            run(F::DateOf, &[Value::from("2024-03-05 10:00:00")]),
            "2024-03-05"
        );
    }

    #[test]
    fn casts_convert_as_mysql_does() {
        let cast_to = |target, value: Value| value::display(&cast(&value, target).unwrap());
        assert_eq!(cast_to(CastTarget::Signed, Value::from("42abc")), "42");
        assert_eq!(
            cast_to(
                CastTarget::Decimal {
                    precision: 5,
                    scale: 2
                },
                Value::from("3.14159")
            ),
            "3.14"
        );
        assert_eq!(
            cast_to(
                CastTarget::Decimal {
                    precision: 3,
                    scale: 1
                },
                Value::Int(1000)
            ),
            "99.9"
        );
        assert_eq!(cast_to(CastTarget::Date, Value::from("2024-02-30")), "NULL");
        assert_eq!(cast_to(CastTarget::Char, d("1.50")), "1.50");
        assert_eq!(
            cast_to(CastTarget::DateTime { fsp: 0 }, Value::from("2024-01-01")),
            "2024-01-01 00:00:00"
        );
    }
}
