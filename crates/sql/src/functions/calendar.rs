//! Date functions past the parts and arithmetic: DATE_FORMAT, DAYNAME,
//! MONTHNAME, LAST_DAY, FROM_UNIXTIME and TIMESTAMPDIFF, in English as
//! MySQL's default `lc_time_names` (en_US) words them.

use super::integer;
use crate::temporal::{days_in_month, Date, DateTime, IntervalUnit};
use crate::value::{self, Value};
use std::fmt::Write;

const DAY_NAMES: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

const MONTH_NAMES: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

const MICROS_PER_SECOND: i64 = 1_000_000;

/// The day of the week, 0 for Sunday to 6 for Saturday.
pub fn day_of_week(date: Date) -> usize {
    // 1970-01-01 was a Thursday.
    (date.days() + 4).rem_euclid(7) as usize
}

/// The day of the year, from 1.
pub fn day_of_year(date: Date) -> i64 {
    date.days()
        - Date::new(date.year as i64, 1, 1)
            .expect("January 1st")
            .days()
        + 1
}

/// DAYNAME(d).
pub fn day_name(d: &Value) -> Value {
    match value::datetime_of(d) {
        Some(datetime) => Value::from(DAY_NAMES[day_of_week(datetime.date)]),
        None => Value::Null,
    }
}

/// MONTHNAME(d).
pub fn month_name(d: &Value) -> Value {
    match value::datetime_of(d) {
        Some(datetime) => Value::from(MONTH_NAMES[datetime.date.month as usize - 1]),
        None => Value::Null,
    }
}

/// LAST_DAY(d): the last day of its month.
pub fn last_day(d: &Value) -> Value {
    let Some(datetime) = value::datetime_of(d) else {
        return Value::Null;
    };
    let date = datetime.date;
    let last = days_in_month(date.year as i64, date.month);
    Date::new(date.year as i64, date.month as i64, last as i64).map_or(Value::Null, Value::Date)
}

/// FROM_UNIXTIME(seconds): the date and time in the session's zone
/// (`zone` seconds east of UTC), with microseconds when the seconds have
/// a fraction; NULL for a negative or unknown moment.
pub fn from_unixtime(seconds: &Value, zone: i64) -> Value {
    let (micros, fsp) = match seconds {
        Value::Null => return Value::Null,
        Value::Int(_) | Value::UInt(_) => match integer(seconds) {
            Some(whole) => (whole.checked_mul(MICROS_PER_SECOND), 0),
            None => return Value::Null,
        },
        Value::Bytes(text) if !text.contains(&b'.') => match integer(seconds) {
            Some(whole) => (whole.checked_mul(MICROS_PER_SECOND), 0),
            None => return Value::Null,
        },
        // A fraction of a second: microseconds (a double too large for
        // them saturates, and is no date).
        other => (Some((value::to_f64(other) * 1e6).round() as i64), 6),
    };
    let Some(micros) = micros
        .filter(|m| *m >= 0)
        .and_then(|m| m.checked_add(zone * MICROS_PER_SECOND))
    else {
        return Value::Null;
    };
    DateTime::from_epoch_micros(micros, fsp).map_or(Value::Null, Value::DateTime)
}

/// TIMESTAMPDIFF(unit, a, b): `b - a` in whole units, toward zero;
/// months, quarters and years by the calendar (a month has passed when
/// the day and time of day are reached again).
pub fn timestamp_diff(unit: IntervalUnit, a: &Value, b: &Value) -> Value {
    let (Some(a), Some(b)) = (value::datetime_of(a), value::datetime_of(b)) else {
        return Value::Null;
    };
    let months_per = match unit {
        IntervalUnit::Month => Some(1),
        IntervalUnit::Quarter => Some(3),
        IntervalUnit::Year => Some(12),
        _ => None,
    };
    if let Some(months_per) = months_per {
        let index = |d: &DateTime| d.date.year as i64 * 12 + d.date.month as i64;
        let within = |d: &DateTime| (d.date.day, d.micros);
        let mut months = index(&b) - index(&a);
        if months > 0 && within(&b) < within(&a) {
            months -= 1;
        } else if months < 0 && within(&b) > within(&a) {
            months += 1;
        }
        return Value::Int(months / months_per);
    }
    let micros = b.epoch_micros() - a.epoch_micros();
    let per = match unit {
        IntervalUnit::Microsecond => 1,
        IntervalUnit::Second => MICROS_PER_SECOND,
        IntervalUnit::Minute => 60 * MICROS_PER_SECOND,
        IntervalUnit::Hour => 3600 * MICROS_PER_SECOND,
        IntervalUnit::Day => 86_400 * MICROS_PER_SECOND,
        IntervalUnit::Week => 7 * 86_400 * MICROS_PER_SECOND,
        _ => unreachable!("the calendar units are counted above"),
    };
    Value::Int(micros / per)
}

/// DATE_FORMAT(d, format): MySQL's specifiers (`%Y-%m-%d`, `%W %D %M`,
/// ...); a `%` before a character that is none stands for the character.
pub fn date_format(d: &Value, format: &Value) -> Value {
    let (Some(datetime), Some(format)) = (value::datetime_of(d), super::text(format)) else {
        return Value::Null;
    };
    let Ok(format) = String::from_utf8(format) else {
        return Value::Null;
    };
    let date = datetime.date;
    let (hour, minute, second, micro) = datetime.clock();
    let twelve = |hour: i64| (hour + 11) % 12 + 1;
    let weekday = day_of_week(date);
    let mut out = String::with_capacity(format.len() + 16);
    let mut specifiers = format.chars();
    while let Some(c) = specifiers.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(specifier) = specifiers.next() else {
            break;
        };
        // Writing to a String cannot fail.
        let _ = match specifier {
            'a' => write!(out, "{}", &DAY_NAMES[weekday][..3]),
            'b' => write!(out, "{}", &MONTH_NAMES[date.month as usize - 1][..3]),
            'c' => write!(out, "{}", date.month),
            'D' => write!(out, "{}{}", date.day, ordinal_suffix(date.day)),
            'd' => write!(out, "{:02}", date.day),
            'e' => write!(out, "{}", date.day),
            'f' => write!(out, "{micro:06}"),
            'H' => write!(out, "{hour:02}"),
            'h' | 'I' => write!(out, "{:02}", twelve(hour)),
            'i' => write!(out, "{minute:02}"),
            'j' => write!(out, "{:03}", day_of_year(date)),
            'k' => write!(out, "{hour}"),
            'l' => write!(out, "{}", twelve(hour)),
            'M' => write!(out, "{}", MONTH_NAMES[date.month as usize - 1]),
            'm' => write!(out, "{:02}", date.month),
            'p' => write!(out, "{}", if hour < 12 { "AM" } else { "PM" }),
            'r' => write!(
                out,
                "{:02}:{minute:02}:{second:02} {}",
                twelve(hour),
                if hour < 12 { "AM" } else { "PM" }
            ),
            'S' | 's' => write!(out, "{second:02}"),
            'T' => write!(out, "{hour:02}:{minute:02}:{second:02}"),
            'U' => write!(out, "{:02}", week_from(date, 0)),
            'u' => write!(out, "{:02}", week_from(date, 1)),
            'W' => write!(out, "{}", DAY_NAMES[weekday]),
            'w' => write!(out, "{weekday}"),
            'Y' => write!(out, "{:04}", date.year),
            'y' => write!(out, "{:02}", date.year % 100),
            other => write!(out, "{other}"),
        };
    }
    Value::from(out)
}

/// "st", "nd", "rd" or "th" after a day of the month.
fn ordinal_suffix(day: u8) -> &'static str {
    match (day % 10, day / 10) {
        (_, 1) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    }
}

/// The week of the year, 00 to 53, weeks beginning on Sunday (`first`
/// 0: `%U`, MySQL's mode 0: the days before the year's first Sunday are
/// week 0) or Monday (1: `%u`, mode 1: week 1 is the first with four or
/// more days in the year).
fn week_from(date: Date, first: usize) -> i64 {
    let january_first = Date::new(date.year as i64, 1, 1).expect("January 1st");
    let start_weekday = (day_of_week(january_first) + 7 - first) % 7;
    let day = day_of_year(date) - 1;
    match first {
        // Mode 0: week 1 begins on the year's first Sunday.
        0 => {
            let first_sunday = ((7 - start_weekday) % 7) as i64;
            match day < first_sunday {
                true => 0,
                false => (day - first_sunday) / 7 + 1,
            }
        }
        // Mode 1: a first week of at least four days counts as week 1.
        _ => {
            let week = (day + start_weekday as i64) / 7;
            if start_weekday <= 3 {
                week + 1
            } else {
                week
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(value: Value) -> String {
        value::display(&value)
    }

    #[test]
    fn dates_format_and_name_as_mysql() {
        let d = Value::from("2024-03-09 14:05:07.25");
        let format = |f: &str| shown(date_format(&d, &Value::from(f)));
        assert_eq!(format("%Y-%m-%d %H:%i:%s"), "2024-03-09 14:05:07");
        assert_eq!(format("%W %D %M %y"), "Saturday 9th March 24");
        assert_eq!(format("%a %b %e %c %j"), "Sat Mar 9 3 069");
        assert_eq!(format("%h:%i %p %r %T"), "02:05 PM 02:05:07 PM 14:05:07");
        assert_eq!(format("%f %k %l %w %% %Q"), "250000 14 2 6 % Q");
        let week = |day: &str, f: &str| shown(date_format(&Value::from(day), &Value::from(f)));
        assert_eq!(week("2024-01-01", "%U %u"), "00 01");
        assert_eq!(week("2023-01-01", "%U %u"), "01 00");
        assert_eq!(week("2024-12-31", "%U %u"), "52 53");
        assert_eq!(ordinal_suffix(11), "th");
        assert_eq!(ordinal_suffix(22), "nd");
        assert_eq!(shown(day_name(&Value::from("2024-01-01"))), "Monday");
        assert_eq!(shown(month_name(&Value::from("2024-02-10"))), "February");
        assert_eq!(shown(last_day(&Value::from("2024-02-10"))), "2024-02-29");
        assert_eq!(
            shown(from_unixtime(&Value::Int(86_400), 0)),
            "1970-01-02 00:00:00"
        );
        assert_eq!(
            shown(from_unixtime(&Value::Int(0), 3600)),
            "1970-01-01 01:00:00"
        );
        assert_eq!(from_unixtime(&Value::Int(-1), 0), Value::Null);
        assert_eq!(
            from_unixtime(&Value::Int(i64::MAX / 1_000_000), 50_400),
            Value::Null
        );
        assert_eq!(
            shown(from_unixtime(&Value::Double(1.5), 0)),
            "1970-01-01 00:00:01.500000"
        );
        let diff =
            |unit, a: &str, b: &str| shown(timestamp_diff(unit, &Value::from(a), &Value::from(b)));
        assert_eq!(diff(IntervalUnit::Month, "2024-01-31", "2024-02-29"), "0");
        assert_eq!(diff(IntervalUnit::Month, "2024-01-31", "2024-03-31"), "2");
        assert_eq!(diff(IntervalUnit::Year, "2020-06-01", "2024-05-31"), "3");
        assert_eq!(diff(IntervalUnit::Month, "2024-03-31", "2024-01-31"), "-2");
        assert_eq!(
            diff(IntervalUnit::Day, "2024-01-01 12:00", "2024-01-03 11:00"),
            "1"
        );
        assert_eq!(
            diff(IntervalUnit::Hour, "2024-01-01 12:00", "2024-01-01 09:30"),
            "-2"
        );
    }
}
