//! Date functions past the parts and arithmetic: DATE_FORMAT, DAYNAME,
//! MONTHNAME, LAST_DAY, FROM_UNIXTIME, TIMESTAMPDIFF, WEEK, YEARWEEK
//! and CONVERT_TZ, in English as MySQL's default `lc_time_names` (en_US)
//! words them.

use super::integer;
use crate::temporal::{days_in_month, Date, DateTime, IntervalUnit};
use crate::value::{self, Value};
use std::fmt::Write;

pub(super) const DAY_NAMES: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

pub(super) const MONTH_NAMES: [&str; 12] = [
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
    // %V and %X, %v and %x: weeks of a year of weeks, from Sunday or
    // from Monday.
    let sunday_weeks = WeekRule(WeekRule::WEEK_YEAR | WeekRule::FIRST_WEEKDAY);
    let monday_weeks = WeekRule(WeekRule::WEEK_YEAR | WeekRule::MONDAY_FIRST);
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
            'U' => write!(
                out,
                "{:02}",
                week_of(date, WeekRule(WeekRule::FIRST_WEEKDAY)).0
            ),
            'u' => write!(
                out,
                "{:02}",
                week_of(date, WeekRule(WeekRule::MONDAY_FIRST)).0
            ),
            'V' => write!(out, "{:02}", week_of(date, sunday_weeks).0),
            'v' => write!(out, "{:02}", week_of(date, monday_weeks).0),
            'X' => write!(out, "{:04}", week_of(date, sunday_weeks).1),
            'x' => write!(out, "{:04}", week_of(date, monday_weeks).1),
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

/// How a week number is counted: MySQL's `calc_week` flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WeekRule(u8);

impl WeekRule {
    /// Weeks begin on Monday (else Sunday).
    const MONDAY_FIRST: u8 = 1;
    /// Week numbers run 1 to 53, a date early in January belonging to
    /// the last week of the year before (else 0 to 53).
    const WEEK_YEAR: u8 = 2;
    /// Week 1 is the first with the first day of the week in it (else
    /// the first with four days or more in the year).
    const FIRST_WEEKDAY: u8 = 4;

    /// WEEK's and YEARWEEK's `mode` (0 to 7; only its low three bits
    /// count, as in MySQL).
    pub fn of_mode(mode: i64) -> WeekRule {
        let mut rule = (mode & 7) as u8;
        if rule & Self::MONDAY_FIRST == 0 {
            rule ^= Self::FIRST_WEEKDAY;
        }
        WeekRule(rule)
    }

    /// The rule with week numbers of a year of weeks (YEARWEEK's).
    pub fn with_week_year(self) -> WeekRule {
        WeekRule(self.0 | Self::WEEK_YEAR)
    }

    fn has(self, flag: u8) -> bool {
        self.0 & flag != 0
    }
}

/// Days in `year`.
fn days_in_year(year: i64) -> i64 {
    365 + crate::temporal::leap(year) as i64
}

/// The week of `date` and the year the week belongs to, as MySQL's
/// `calc_week` counts them.
pub fn week_of(date: Date, rule: WeekRule) -> (i64, i64) {
    let monday_first = rule.has(WeekRule::MONDAY_FIRST);
    let mut week_year = rule.has(WeekRule::WEEK_YEAR);
    let first_weekday = rule.has(WeekRule::FIRST_WEEKDAY);
    let day_number = date.days();
    let mut first_day = Date::new(date.year as i64, 1, 1)
        .expect("January 1st")
        .days();
    // January 1st's weekday, 0 for the week's first day.
    let mut weekday = match monday_first {
        true => (day_of_week(Date::from_days(first_day).expect("a date")) + 6) % 7,
        false => day_of_week(Date::from_days(first_day).expect("a date")),
    } as i64;
    let mut year = date.year as i64;
    // Whether a year's first days before its week 1 make a week 0.
    let short_first_week =
        |weekday: i64| (first_weekday && weekday != 0) || (!first_weekday && weekday >= 4);
    if date.month == 1 && (date.day as i64) <= 7 - weekday {
        if !week_year && short_first_week(weekday) {
            return (0, year);
        }
        week_year = true;
        year -= 1;
        let days = days_in_year(year);
        first_day -= days;
        weekday = (weekday + 53 * 7 - days) % 7;
    }
    let days = match short_first_week(weekday) {
        true => day_number - (first_day + (7 - weekday)),
        false => day_number - (first_day - weekday),
    };
    if week_year && days >= 52 * 7 {
        let weekday = (weekday + days_in_year(year)) % 7;
        if !short_first_week(weekday) {
            return (1, year + 1);
        }
    }
    (days / 7 + 1, year)
}

/// WEEK(d, mode): a mode left out or NULL is 0.
pub fn week(d: &Value, mode: Option<&Value>) -> Value {
    let mode = mode.and_then(integer).unwrap_or(0);
    match value::datetime_of(d) {
        Some(datetime) => Value::Int(week_of(datetime.date, WeekRule::of_mode(mode)).0),
        None => Value::Null,
    }
}

/// YEARWEEK(d, mode): the year and week, `year * 100 + week`; a mode
/// left out or NULL is 0.
pub fn year_week(d: &Value, mode: Option<&Value>) -> Value {
    let mode = mode.and_then(integer).unwrap_or(0);
    match value::datetime_of(d) {
        Some(datetime) => {
            let rule = WeekRule::of_mode(mode).with_week_year();
            let (week, year) = week_of(datetime.date, rule);
            Value::Int(year * 100 + week)
        }
        None => Value::Null,
    }
}

/// CONVERT_TZ(d, from, to): `d` read in zone `from` and written in zone
/// `to`, each as `time_zone` takes it (an offset such as `+02:00`,
/// SYSTEM or UTC; NULL for a named zone, as MySQL answers without its
/// time zone tables). A moment outside TIMESTAMP's range comes back as
/// it was, as MySQL's does.
pub fn convert_tz(d: &Value, from: &Value, to: &Value) -> Value {
    let zone = |value: &Value| {
        let text = super::text(value)?;
        crate::temporal::zone_offset(std::str::from_utf8(&text).ok()?)
    };
    let (Some(datetime), Some(from), Some(to)) = (value::datetime_of(d), zone(from), zone(to))
    else {
        return Value::Null;
    };
    let micros = datetime.date.days() * crate::temporal::MICROS_PER_DAY + datetime.micros;
    let utc_seconds = micros.div_euclid(MICROS_PER_SECOND) - from;
    // TIMESTAMP's range: 1970-01-01 00:00:01 to 2038-01-19 03:14:07 UTC.
    if !(1..=i32::MAX as i64).contains(&utc_seconds) {
        return Value::DateTime(datetime);
    }
    let moved = micros + (to - from) * MICROS_PER_SECOND;
    let days = moved.div_euclid(crate::temporal::MICROS_PER_DAY);
    match Date::from_days(days) {
        Some(date) => Value::DateTime(DateTime {
            date,
            micros: moved.rem_euclid(crate::temporal::MICROS_PER_DAY),
            fsp: datetime.fsp,
        }),
        None => Value::Null,
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
        assert_eq!(week("2021-01-01", "%V %X %v %x"), "52 2020 53 2020");
        assert_eq!(week("2024-12-30", "%V %X %v %x"), "52 2024 01 2025");
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
