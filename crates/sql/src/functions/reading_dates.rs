//! STR_TO_DATE: text read by a DATE_FORMAT-style format into a DATE, a
//! DATETIME or a TIME, as MySQL's `extract_date_time` reads it. The
//! result's type follows from the format alone (its date and time
//! specifiers), so a statement's column type is known before any row.

use super::calendar::{DAY_NAMES, MONTH_NAMES};
use crate::error::{SqlError, SqlResult};
use crate::temporal::{two_digit_year, Date, DateTime, Time, MICROS_PER_SECOND};
use crate::value::Value;

/// What STR_TO_DATE makes of a format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadKind {
    /// A DATE: no time specifier.
    Date,
    /// A DATETIME(fsp): date and time specifiers (`%f`: fsp 6).
    DateTime(u8),
    /// A TIME(fsp): time specifiers only.
    Time(u8),
}

/// The type STR_TO_DATE gives with `format`, by MySQL's rule: `%f` is a
/// time part with microseconds; `H I S T h i k l r s` time parts; `M V
/// U X Y W a b c j m v u x y w` date parts (`%d` is not among them, as
/// in MySQL: `%d` alone reads a DATE anyway).
pub fn read_kind(format: &[u8]) -> ReadKind {
    let (mut date, mut time, mut fraction) = (false, false, false);
    let mut at = 0;
    while at < format.len() {
        if format[at] == b'%' && at + 1 < format.len() {
            at += 1;
            let specifier = format[at];
            if specifier == b'f' {
                fraction = true;
                time = true;
            } else if !time && b"HISThiklrs".contains(&specifier) {
                time = true;
            } else if !date && b"MVUXYWabcjmvuxyw".contains(&specifier) {
                date = true;
            }
            if date && fraction {
                return ReadKind::DateTime(6);
            }
        }
        at += 1;
    }
    match (date, time, fraction) {
        (_, _, true) => ReadKind::Time(6),
        (true, true, false) => ReadKind::DateTime(0),
        (false, true, false) => ReadKind::Time(0),
        _ => ReadKind::Date,
    }
}

/// The fields read so far; what the text does not give stays 0.
#[derive(Default)]
struct Fields {
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    micro: i64,
    /// A twelve-hour clock's hour was read (`%h`, `%I`, `%l`).
    twelve_hour: bool,
    /// 12 after `PM`.
    afternoon: i64,
    /// `%j`: the day of the year.
    year_day: i64,
}

/// STR_TO_DATE(text, format): NULL when the text does not match the
/// format or names no valid date or time (a zero month or day included,
/// as MySQL's default strict mode has it). Week specifiers (`%U %u %V
/// %v %X %x`) are refused.
pub fn str_to_date(text: &Value, format: &Value) -> SqlResult<Value> {
    let (Some(text), Some(format)) = (super::text(text), super::text(format)) else {
        return Ok(Value::Null);
    };
    let kind = read_kind(&format);
    let mut fields = Fields::default();
    if read(&text, &format, &mut fields)?.is_none() {
        return Ok(Value::Null);
    }
    Ok(finish(fields, kind).unwrap_or(Value::Null))
}

/// Reads `text` by `format` into `fields`; `None` where they disagree.
/// Spaces in the text before each field or character are skipped, and
/// spaces in the format match nothing; text left over after the format
/// is ignored (MySQL warns of it).
fn read(text: &[u8], format: &[u8], fields: &mut Fields) -> SqlResult<Option<usize>> {
    let mut at = 0;
    let mut specifiers = 0;
    while specifiers < format.len() && at < text.len() {
        while at < text.len() && text[at].is_ascii_whitespace() {
            at += 1;
        }
        if at >= text.len() {
            break;
        }
        let wanted = format[specifiers];
        if wanted != b'%' || specifiers + 1 == format.len() {
            if !wanted.is_ascii_whitespace() {
                if text[at] != wanted {
                    return Ok(None);
                }
                at += 1;
            }
            specifiers += 1;
            continue;
        }
        specifiers += 1;
        let rest = &text[at..];
        let read = match format[specifiers] {
            b'Y' => number(rest, 4).map(|(year, used)| {
                fields.year = two_digit_year(year, used <= 2);
                used
            }),
            b'y' => number(rest, 2).map(|(year, used)| {
                fields.year = two_digit_year(year, true);
                used
            }),
            b'm' | b'c' => number(rest, 2).map(|(month, used)| {
                fields.month = month;
                used
            }),
            b'M' => word(rest, &MONTH_NAMES, None).map(|(month, used)| {
                fields.month = month as i64 + 1;
                used
            }),
            b'b' => word(rest, &MONTH_NAMES, Some(3)).map(|(month, used)| {
                fields.month = month as i64 + 1;
                used
            }),
            b'd' | b'e' => number(rest, 2).map(|(day, used)| {
                fields.day = day;
                used
            }),
            b'D' => number(rest, 2).map(|(day, used)| {
                fields.day = day;
                // The ordinal's two letters: 1st, 2nd, 23rd.
                (used + 2).min(rest.len())
            }),
            b'h' | b'I' | b'l' | b'k' | b'H' => {
                fields.twelve_hour |= matches!(format[specifiers], b'h' | b'I' | b'l');
                number(rest, 2).map(|(hour, used)| {
                    fields.hour = hour;
                    used
                })
            }
            b'i' => number(rest, 2).map(|(minute, used)| {
                fields.minute = minute;
                used
            }),
            b's' | b'S' => number(rest, 2).map(|(second, used)| {
                fields.second = second;
                used
            }),
            b'f' => number(rest, 6).map(|(micro, used)| {
                fields.micro = micro * 10i64.pow(6 - used as u32);
                used
            }),
            b'p' => {
                let daypart = rest.get(..2).filter(|_| fields.twelve_hour);
                match daypart {
                    Some(p) if p.eq_ignore_ascii_case(b"PM") => {
                        fields.afternoon = 12;
                        Some(2)
                    }
                    Some(p) if p.eq_ignore_ascii_case(b"AM") => Some(2),
                    _ => None,
                }
            }
            b'W' => word(rest, &DAY_NAMES, None).map(|(_, used)| used),
            b'a' => word(rest, &DAY_NAMES, Some(3)).map(|(_, used)| used),
            b'w' => number(rest, 1)
                .filter(|(day, _)| *day < 7)
                .map(|(_, used)| used),
            b'j' => number(rest, 3).map(|(day, used)| {
                fields.year_day = day;
                used
            }),
            b'r' => read(rest, b"%I:%i:%S %p", fields)?,
            b'T' => read(rest, b"%H:%i:%S", fields)?,
            b'.' => Some(rest.iter().take_while(|b| b.is_ascii_punctuation()).count()),
            b'@' => Some(rest.iter().take_while(|b| b.is_ascii_alphabetic()).count()),
            b'#' => Some(rest.iter().take_while(|b| b.is_ascii_digit()).count()),
            b'%' => (rest[0] == b'%').then_some(1),
            b'U' | b'u' | b'V' | b'v' | b'X' | b'x' => {
                return Err(SqlError::unsupported(
                    "STR_TO_DATE of week numbers (%U %u %V %v %X %x)",
                ))
            }
            _ => None,
        };
        let Some(used) = read else {
            return Ok(None);
        };
        at += used;
        specifiers += 1;
    }
    Ok(Some(at))
}

/// An unsigned number of at most `most` digits at the start of `text`,
/// and the bytes it took; `None` without a digit.
fn number(text: &[u8], most: usize) -> Option<(i64, usize)> {
    let digits = text
        .iter()
        .take(most)
        .take_while(|b| b.is_ascii_digit())
        .count();
    let value = std::str::from_utf8(&text[..digits]).ok()?.parse().ok()?;
    Some((value, digits))
}

/// The name in `names` that the letters at the start of `text` are, or
/// begin (one name only: `Ju` is none), compared without case; with
/// `short`, the names' first `short` letters. Its index and the letters'
/// length.
fn word(text: &[u8], names: &[&'static str], short: Option<usize>) -> Option<(usize, usize)> {
    let length = text.iter().take_while(|b| b.is_ascii_alphabetic()).count();
    if length == 0 {
        return None;
    }
    let letters = &text[..length];
    let name_of = |name: &'static str| match short {
        Some(short) => &name.as_bytes()[..short],
        None => name.as_bytes(),
    };
    let exact = names
        .iter()
        .position(|name| name_of(name).eq_ignore_ascii_case(letters));
    if let Some(index) = exact {
        return Some((index, length));
    }
    let mut beginning = names.iter().enumerate().filter(|(_, name)| {
        let name = name_of(name);
        name.len() > length && name[..length].eq_ignore_ascii_case(letters)
    });
    match (beginning.next(), beginning.next()) {
        (Some((index, _)), None) => Some((index, length)),
        _ => None,
    }
}

/// The value `fields` make as `kind`, when they are a valid one.
fn finish(mut fields: Fields, kind: ReadKind) -> Option<Value> {
    if fields.twelve_hour {
        if !(1..=12).contains(&fields.hour) {
            return None;
        }
        fields.hour = fields.hour % 12 + fields.afternoon;
    }
    if fields.year_day > 0 {
        let january_first = Date::new(fields.year, 1, 1)?;
        let date = Date::from_days(january_first.days() + fields.year_day - 1)?;
        fields.month = date.month as i64;
        fields.day = date.day as i64;
    }
    if fields.hour > 23 || fields.minute > 59 || fields.second > 59 {
        return None;
    }
    let clock = ((fields.hour * 60 + fields.minute) * 60 + fields.second) * MICROS_PER_SECOND
        + fields.micro;
    match kind {
        ReadKind::Time(fsp) => Time::new(clock, fsp).map(Value::Time),
        ReadKind::Date => Date::new(fields.year, fields.month, fields.day).map(Value::Date),
        ReadKind::DateTime(fsp) => {
            let date = Date::new(fields.year, fields.month, fields.day)?;
            let mut datetime = DateTime::new(
                date,
                fields.hour,
                fields.minute,
                fields.second,
                fields.micro,
            )?;
            datetime.fsp = fsp;
            Some(Value::DateTime(datetime))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value;

    fn read_as(text: &str, format: &str) -> String {
        value::display(&str_to_date(&Value::from(text), &Value::from(format)).unwrap())
    }

    #[test]
    fn text_reads_by_its_format_as_mysql() {
        assert_eq!(read_as("2024-03-09", "%Y-%m-%d"), "2024-03-09");
        assert_eq!(read_as("9/3/24", "%e/%c/%y"), "2024-03-09");
        assert_eq!(
            read_as("March 9th, 2024 2:05 PM", "%M %D, %Y %l:%i %p"),
            "2024-03-09 14:05:00"
        );
        assert_eq!(
            read_as("Sat Mar 09 2024 12:00:01 AM", "%a %b %d %Y %r"),
            "2024-03-09 00:00:01"
        );
        assert_eq!(read_as("14:05:07.25", "%T.%f"), "14:05:07.250000");
        assert_eq!(read_as("10:30", "%H:%i"), "10:30:00");
        assert_eq!(read_as("2024 069", "%Y %j"), "2024-03-09");
        assert_eq!(
            read_as("20240309 1405", "%Y%m%d %H%i"),
            "2024-03-09 14:05:00"
        );
        // Spaces in the text before a field are skipped.
        assert_eq!(read_as("  2024-  3-  9", "%Y-%m-%d"), "2024-03-09");
        // Left over text is ignored; a mismatch, a bad date, a missing
        // part or a 13 o'clock PM is NULL.
        assert_eq!(read_as("2024-03-09 junk", "%Y-%m-%d"), "2024-03-09");
        assert_eq!(read_as("2024/03/09", "%Y-%m-%d"), "NULL");
        assert_eq!(read_as("2024-02-30", "%Y-%m-%d"), "NULL");
        assert_eq!(read_as("2024-03", "%Y-%m-%d"), "NULL");
        assert_eq!(read_as("13:00 PM", "%h:%i %p"), "NULL");
        assert_eq!(read_as("Ju 1 2024", "%M %d %Y"), "NULL");
        assert_eq!(read_as("Jun 1 2024", "%M %d %Y"), "2024-06-01");
        assert!(str_to_date(&Value::from("01 2024"), &Value::from("%U %Y")).is_err());
        assert_eq!(read_kind(b"%Y-%m-%d %H:%i:%s.%f"), ReadKind::DateTime(6));
        assert_eq!(read_kind(b"%d"), ReadKind::Date);
        assert_eq!(read_kind(b"%i:%s"), ReadKind::Time(0));
    }
}
