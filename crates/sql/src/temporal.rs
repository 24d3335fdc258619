//! Dates and times as MySQL has them: DATE, DATETIME(fsp) and TIMESTAMP
//! values (a calendar date and a time of day, to the microsecond), TIME
//! (a signed span up to 838:59:59); reading them from text and numbers
//! (`'2024-01-31'`, `'2024-01-31 10:30:00.25'`, `20240131`), printing
//! them, the calendar arithmetic DATE_ADD needs, and the integers they
//! are stored as (`storage`): orders that sort as the values do.
//!
//! The fractional digits a value prints with (`fsp`) travel with it, as
//! a DECIMAL's scale does: a DATETIME(3) column prints `.250`, NOW()
//! prints none. Calendar: the proleptic Gregorian one, years 1 to 9999
//! (MySQL supports 1000 to 9999 and accepts earlier ones); MySQL's zero
//! date (`0000-00-00`) is refused, as its strict mode with NO_ZERO_DATE
//! refuses it.

use std::cmp::Ordering;

/// Microseconds in a second.
pub const MICROS_PER_SECOND: i64 = 1_000_000;
/// Microseconds in a day.
pub const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SECOND;
/// The most fractional digits.
pub const MAX_FSP: u8 = 6;
/// TIME's largest magnitude: 838:59:59.999999.
pub const MAX_TIME_MICROS: i64 = (838 * 3600 + 59 * 60 + 59) * MICROS_PER_SECOND + 999_999;

/// A calendar date.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    /// 1 to 9999.
    pub year: u16,
    /// 1 to 12.
    pub month: u8,
    /// 1 to the month's last day.
    pub day: u8,
}

/// A date and a time of day.
#[derive(Clone, Copy, Debug)]
pub struct DateTime {
    /// The date.
    pub date: Date,
    /// Microseconds since the day began (below a day).
    pub micros: i64,
    /// Fractional digits it prints with.
    pub fsp: u8,
}

/// A signed span of time (MySQL's TIME).
#[derive(Clone, Copy, Debug)]
pub struct Time {
    /// Microseconds, at most [`MAX_TIME_MICROS`] either way.
    pub micros: i64,
    /// Fractional digits it prints with.
    pub fsp: u8,
}

/// Whether `year` is a leap year.
pub fn leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

/// Days in `month` of `year`.
pub fn days_in_month(year: i64, month: u8) -> u8 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if leap(year) => 29,
        _ => 28,
    }
}

/// Days from 1970-01-01 to the date (negative before it): Howard
/// Hinnant's `days_from_civil`.
pub fn days_from_civil(year: i64, month: u8, day: u8) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = month as i64;
    let day_of_year =
        (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day as i64 - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date `days` after 1970-01-01: the inverse of [`days_from_civil`].
pub fn civil_from_days(days: i64) -> (i64, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

impl Date {
    /// The date, when it is one of years 1 to 9999.
    pub fn new(year: i64, month: i64, day: i64) -> Option<Date> {
        let valid = (1..=9999).contains(&year)
            && (1..=12).contains(&month)
            && day >= 1
            && day <= days_in_month(year, month as u8) as i64;
        valid.then_some(Date {
            year: year as u16,
            month: month as u8,
            day: day as u8,
        })
    }

    /// Days since 1970-01-01.
    pub fn days(self) -> i64 {
        days_from_civil(self.year as i64, self.month, self.day)
    }

    /// The date `days` after 1970-01-01, when in years 1 to 9999.
    pub fn from_days(days: i64) -> Option<Date> {
        let (year, month, day) = civil_from_days(days);
        Date::new(year, month as i64, day as i64)
    }

    /// Reads `YYYY-MM-DD` (any punctuation between the parts, or none:
    /// `YYYYMMDD`); a time after it is allowed and ignored (as MySQL
    /// takes a DATETIME's text for a DATE). Two-digit years are 1970-2069.
    pub fn parse(text: &str) -> Option<Date> {
        DateTime::parse(text).map(|datetime| datetime.date)
    }

    /// From a number `YYYYMMDD` (or `YYMMDD`).
    pub fn from_number(number: i64) -> Option<Date> {
        let (year, month, day) = (number / 10_000, number / 100 % 100, number % 100);
        Date::new(two_digit_year(year, number < 1_000_000), month, day)
    }

    /// The packed integer it is stored as: year * 512 + month * 32 + day,
    /// ordered as dates are (MySQL's own DATE storage).
    pub fn pack(self) -> i64 {
        self.year as i64 * 512 + self.month as i64 * 32 + self.day as i64
    }

    /// The date a stored integer holds, when it is one.
    pub fn unpack(packed: i64) -> Option<Date> {
        Date::new(packed / 512, packed / 32 % 16, packed % 32)
    }

    /// Writes `YYYY-MM-DD`.
    pub fn write_text(self, out: &mut Vec<u8>) {
        use std::io::Write;
        let _ = write!(out, "{:04}-{:02}-{:02}", self.year, self.month, self.day);
    }

    /// Midnight of the date.
    pub fn at_midnight(self) -> DateTime {
        DateTime {
            date: self,
            micros: 0,
            fsp: 0,
        }
    }
}

/// A two-digit year read as MySQL reads it: 70-99 are 1970-1999, 0-69
/// are 2000-2069 (only where the text gave two digits).
pub fn two_digit_year(year: i64, two_digits: bool) -> i64 {
    match (two_digits, year) {
        (true, 0..=69) => year + 2000,
        (true, 70..=99) => year + 1900,
        _ => year,
    }
}

/// Rounds `micros` to `fsp` fractional digits, half away from zero.
fn round_micros(micros: i64, fsp: u8) -> i64 {
    let unit = 10i64.pow((MAX_FSP - fsp.min(MAX_FSP)) as u32);
    if unit == 1 {
        return micros;
    }
    let remainder = micros.rem_euclid(unit);
    let base = micros - remainder;
    if remainder * 2 >= unit {
        base + unit
    } else {
        base
    }
}

/// Reads a fraction's digits as microseconds (at most 6 kept, the 7th
/// rounding), or `None` when they are not digits.
fn fraction_micros(digits: &str) -> Option<i64> {
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut micros: i64 = 0;
    for (position, byte) in digits.bytes().take(6).enumerate() {
        micros += (byte - b'0') as i64 * 10i64.pow(5 - position as u32);
    }
    if digits.len() > 6 && digits.as_bytes()[6] >= b'5' {
        micros += 1;
    }
    Some(micros)
}

impl DateTime {
    /// The date and time, checked.
    pub fn new(date: Date, hour: i64, minute: i64, second: i64, micro: i64) -> Option<DateTime> {
        let valid = (0..24).contains(&hour)
            && (0..60).contains(&minute)
            && (0..60).contains(&second)
            && (0..1_000_000).contains(&micro);
        valid.then_some(DateTime {
            date,
            micros: ((hour * 60 + minute) * 60 + second) * MICROS_PER_SECOND + micro,
            fsp: 0,
        })
    }

    /// Reads `YYYY-MM-DD[( |T)HH:MM:SS[.ffffff]]`, any punctuation between
    /// the parts, or the digits alone (`YYYYMMDDHHMMSS`, `YYYYMMDD`).
    /// The fraction's digits become its `fsp`.
    pub fn parse(text: &str) -> Option<DateTime> {
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        if text.bytes().all(|b| b.is_ascii_digit()) {
            return DateTime::from_digits(text);
        }
        if let Some((whole, fraction)) = text.split_once('.') {
            if whole.bytes().all(|b| b.is_ascii_digit()) {
                let mut datetime = DateTime::from_digits(whole)?;
                datetime.micros += fraction_micros(fraction)?;
                datetime.fsp = fraction.len().min(6) as u8;
                return Some(datetime);
            }
        }
        // Split into runs of digits; the separator before the fraction
        // (the 7th part) must be a point.
        let mut parts: Vec<&str> = Vec::new();
        let mut separators: Vec<u8> = Vec::new();
        let bytes = text.as_bytes();
        let mut start = None;
        for (at, byte) in bytes.iter().enumerate() {
            match (byte.is_ascii_digit(), start) {
                (true, None) => start = Some(at),
                (false, Some(from)) => {
                    parts.push(&text[from..at]);
                    separators.push(*byte);
                    start = None;
                }
                (false, None) => {
                    if at == 0 {
                        return None;
                    }
                    // Several separators in a row (`2024-01-01  10:00`):
                    // only spaces may repeat.
                    if *byte != b' ' && separators.last() != Some(&b' ') {
                        return None;
                    }
                }
                (true, Some(_)) => {}
            }
        }
        if let Some(from) = start {
            parts.push(&text[from..]);
        } else {
            return None;
        }
        if parts.len() < 3 || parts.len() > 7 {
            return None;
        }
        let number = |part: &str| -> Option<i64> {
            (part.len() <= 4).then_some(())?;
            part.parse().ok()
        };
        let year = two_digit_year(number(parts[0])?, parts[0].len() <= 2);
        let date = Date::new(year, number(parts[1])?, number(parts[2])?)?;
        let field = |index: usize| parts.get(index).map_or(Some(0), |part| number(part));
        let mut datetime = DateTime::new(date, field(3)?, field(4)?, field(5)?, 0)?;
        if let Some(fraction) = parts.get(6) {
            if separators.get(5) != Some(&b'.') {
                return None;
            }
            datetime.micros += fraction_micros(fraction)?;
            datetime.fsp = fraction.len().min(6) as u8;
        }
        Some(datetime)
    }

    /// From digits alone: `YYYYMMDDHHMMSS`, `YYMMDDHHMMSS`, `YYYYMMDD`,
    /// `YYMMDD`.
    fn from_digits(digits: &str) -> Option<DateTime> {
        let number: i64 = digits.parse().ok()?;
        match digits.len() {
            6 | 8 => Date::from_number(number).map(Date::at_midnight),
            12 | 14 => DateTime::from_number(number),
            _ => None,
        }
    }

    /// From a number `YYYYMMDDHHMMSS` (or `YYYYMMDD`, `YYMMDD`...).
    pub fn from_number(number: i64) -> Option<DateTime> {
        if number < 100_000_000 {
            return Date::from_number(number).map(Date::at_midnight);
        }
        let date = Date::from_number(number / 1_000_000)?;
        let time = number % 1_000_000;
        DateTime::new(date, time / 10_000, time / 100 % 100, time % 100, 0)
    }

    /// Microseconds since 1970-01-01 00:00:00 (of whatever zone it is in).
    pub fn epoch_micros(self) -> i64 {
        self.date.days() * MICROS_PER_DAY + self.micros
    }

    /// The date and time `micros` after 1970-01-01 00:00:00, when in
    /// years 1 to 9999.
    pub fn from_epoch_micros(micros: i64, fsp: u8) -> Option<DateTime> {
        let days = micros.div_euclid(MICROS_PER_DAY);
        Some(DateTime {
            date: Date::from_days(days)?,
            micros: micros.rem_euclid(MICROS_PER_DAY),
            fsp,
        })
    }

    /// Rounded to `fsp` fractional digits (a carry may reach the next
    /// day), and printing with them.
    pub fn round(self, fsp: u8) -> Option<DateTime> {
        let micros = round_micros(self.epoch_micros(), fsp);
        DateTime::from_epoch_micros(micros, fsp)
    }

    /// Hour, minute, second, microsecond.
    pub fn clock(self) -> (i64, i64, i64, i64) {
        let seconds = self.micros / MICROS_PER_SECOND;
        (
            seconds / 3600,
            seconds / 60 % 60,
            seconds % 60,
            self.micros % MICROS_PER_SECOND,
        )
    }

    /// The packed integer a DATETIME is stored as: MySQL's DATETIME2
    /// layout (year * 13 + month, day, hour, minute, second, microsecond
    /// in bit fields), ordered as the values are.
    pub fn pack(self) -> i64 {
        let (hour, minute, second, micro) = self.clock();
        let year_month = self.date.year as i64 * 13 + self.date.month as i64;
        let day = (year_month << 5) | self.date.day as i64;
        let clock = (hour << 12) | (minute << 6) | second;
        (((day << 17) | clock) << 24) | micro
    }

    /// The DATETIME a stored integer holds, when it is one.
    pub fn unpack(packed: i64, fsp: u8) -> Option<DateTime> {
        let micro = packed & 0xff_ffff;
        let whole = packed >> 24;
        let clock = whole & 0x1_ffff;
        let day = whole >> 17;
        let year_month = day >> 5;
        let date = Date::new(year_month / 13, year_month % 13, day & 31)?;
        let mut datetime = DateTime::new(date, clock >> 12, (clock >> 6) & 63, clock & 63, micro)?;
        datetime.fsp = fsp;
        Some(datetime)
    }

    /// Writes `YYYY-MM-DD HH:MM:SS[.fff]` with its `fsp` digits.
    pub fn write_text(self, out: &mut Vec<u8>) {
        use std::io::Write;
        self.date.write_text(out);
        let (hour, minute, second, micro) = self.clock();
        let _ = write!(out, " {hour:02}:{minute:02}:{second:02}");
        write_fraction(out, micro, self.fsp);
    }

    /// How two compare (their `fsp` aside).
    pub fn compare(self, other: DateTime) -> Ordering {
        self.epoch_micros().cmp(&other.epoch_micros())
    }
}

impl PartialEq for DateTime {
    fn eq(&self, other: &DateTime) -> bool {
        self.compare(*other) == Ordering::Equal
    }
}

/// Writes `.` and `fsp` digits of `micro`, when `fsp` > 0.
fn write_fraction(out: &mut Vec<u8>, micro: i64, fsp: u8) {
    use std::io::Write;
    if fsp == 0 {
        return;
    }
    let fsp = fsp.min(MAX_FSP);
    let digits = micro / 10i64.pow((MAX_FSP - fsp) as u32);
    let _ = write!(out, ".{digits:0width$}", width = fsp as usize);
}

impl Time {
    /// A span, when within TIME's range.
    pub fn new(micros: i64, fsp: u8) -> Option<Time> {
        (micros.unsigned_abs() <= MAX_TIME_MICROS as u64).then_some(Time { micros, fsp })
    }

    /// Reads `[-][D ]HH:MM[:SS[.ffffff]]`, `HHMMSS[.ffffff]`, `MMSS`, `SS`.
    pub fn parse(text: &str) -> Option<Time> {
        let text = text.trim();
        let (negative, text) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (whole, fraction) = match text.split_once('.') {
            Some((whole, fraction)) => (whole, fraction),
            None => (text, ""),
        };
        let micro = fraction_micros(fraction)?;
        let fsp = fraction.len().min(6) as u8;
        let (days, clock) = match whole.split_once(' ') {
            Some((days, clock)) => (days.trim().parse::<i64>().ok()?, clock.trim()),
            None => (0, whole),
        };
        let (hours, minutes, seconds) = if clock.contains(':') {
            let parts: Vec<&str> = clock.split(':').collect();
            let number = |part: &str| -> Option<i64> {
                (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| part.parse().ok())?
            };
            match parts.as_slice() {
                [h, m] => (number(h)?, number(m)?, 0),
                [h, m, s] => (number(h)?, number(m)?, number(s)?),
                _ => return None,
            }
        } else {
            if clock.is_empty() || !clock.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let number: i64 = clock.parse().ok()?;
            (number / 10_000, number / 100 % 100, number % 100)
        };
        if minutes >= 60 || seconds >= 60 {
            return None;
        }
        let hours = days.checked_mul(24)?.checked_add(hours)?;
        let seconds = hours
            .checked_mul(3600)?
            .checked_add(minutes * 60 + seconds)?;
        let micros = seconds.checked_mul(MICROS_PER_SECOND)? + micro;
        Time::new(if negative { -micros } else { micros }, fsp)
    }

    /// From a number `HHMMSS`.
    pub fn from_number(number: i64) -> Option<Time> {
        let magnitude = number.checked_abs()?;
        let (hours, minutes, seconds) =
            (magnitude / 10_000, magnitude / 100 % 100, magnitude % 100);
        if minutes >= 60 || seconds >= 60 {
            return None;
        }
        let micros = (hours * 3600 + minutes * 60 + seconds) * MICROS_PER_SECOND;
        Time::new(if number < 0 { -micros } else { micros }, 0)
    }

    /// Rounded to `fsp` digits, printing with them.
    pub fn round(self, fsp: u8) -> Option<Time> {
        let magnitude = round_micros(self.micros.abs(), fsp);
        Time::new(
            if self.micros < 0 {
                -magnitude
            } else {
                magnitude
            },
            fsp,
        )
    }

    /// Writes `[-]HH:MM:SS[.fff]` (hours may run past 24).
    pub fn write_text(self, out: &mut Vec<u8>) {
        use std::io::Write;
        if self.micros < 0 {
            out.push(b'-');
        }
        let magnitude = self.micros.abs();
        let seconds = magnitude / MICROS_PER_SECOND;
        let _ = write!(
            out,
            "{:02}:{:02}:{:02}",
            seconds / 3600,
            seconds / 60 % 60,
            seconds % 60
        );
        write_fraction(out, magnitude % MICROS_PER_SECOND, self.fsp);
    }
}

impl PartialEq for Time {
    fn eq(&self, other: &Time) -> bool {
        self.micros == other.micros
    }
}

/// A time zone as a fixed offset from UTC, in seconds: what
/// `time_zone` may be set to (`SYSTEM` and `+00:00` are UTC, the zone
/// of the machines Tessera runs on; named zones need time zone tables,
/// which no SQL node has, so they are refused as MySQL refuses them
/// without its tables).
pub fn zone_offset(name: &str) -> Option<i64> {
    let name = name.trim();
    if name.eq_ignore_ascii_case("SYSTEM") || name.eq_ignore_ascii_case("UTC") {
        return Some(0);
    }
    let (sign, rest) = match name.as_bytes().first()? {
        b'+' => (1, &name[1..]),
        b'-' => (-1, &name[1..]),
        _ => return None,
    };
    let (hours, minutes) = rest.split_once(':')?;
    let (hours, minutes): (i64, i64) = (hours.parse().ok()?, minutes.parse().ok()?);
    if !(0..60).contains(&minutes) || !(0..=14).contains(&hours) {
        return None;
    }
    let offset = sign * (hours * 3600 + minutes * 60);
    // MySQL's range: -13:59 to +14:00.
    (-(13 * 3600 + 59 * 60)..=14 * 3600)
        .contains(&offset)
        .then_some(offset)
}

/// The interval units of DATE_ADD and DATE_SUB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntervalUnit {
    /// MICROSECOND.
    Microsecond,
    /// SECOND.
    Second,
    /// MINUTE.
    Minute,
    /// HOUR.
    Hour,
    /// DAY.
    Day,
    /// WEEK.
    Week,
    /// MONTH.
    Month,
    /// QUARTER.
    Quarter,
    /// YEAR.
    Year,
}

impl IntervalUnit {
    /// The unit named `name` (any case).
    pub fn named(name: &str) -> Option<IntervalUnit> {
        Some(match name.to_ascii_uppercase().as_str() {
            "MICROSECOND" => IntervalUnit::Microsecond,
            "SECOND" => IntervalUnit::Second,
            "MINUTE" => IntervalUnit::Minute,
            "HOUR" => IntervalUnit::Hour,
            "DAY" => IntervalUnit::Day,
            "WEEK" => IntervalUnit::Week,
            "MONTH" => IntervalUnit::Month,
            "QUARTER" => IntervalUnit::Quarter,
            "YEAR" => IntervalUnit::Year,
            _ => return None,
        })
    }

    /// Whether adding it to a DATE keeps a DATE (no time of day in it).
    pub fn keeps_date(self) -> bool {
        matches!(
            self,
            IntervalUnit::Day
                | IntervalUnit::Week
                | IntervalUnit::Month
                | IntervalUnit::Quarter
                | IntervalUnit::Year
        )
    }
}

/// `datetime + amount unit`: months and years move the calendar (the day
/// clamped to the month's last, as MySQL does: Jan 31 + 1 month is Feb
/// 28 or 29), the rest add their length. `None` out of years 1 to 9999.
pub fn add_interval(datetime: DateTime, amount: i64, unit: IntervalUnit) -> Option<DateTime> {
    let months = match unit {
        IntervalUnit::Month => Some(amount),
        IntervalUnit::Quarter => amount.checked_mul(3),
        IntervalUnit::Year => amount.checked_mul(12),
        _ => None,
    };
    if let Some(months) = months {
        let date = datetime.date;
        let index = (date.year as i64 * 12 + date.month as i64 - 1).checked_add(months)?;
        let (year, month) = (index.div_euclid(12), index.rem_euclid(12) as u8 + 1);
        if !(1..=9999).contains(&year) {
            return None;
        }
        let day = date.day.min(days_in_month(year, month));
        return Some(DateTime {
            date: Date::new(year, month as i64, day as i64)?,
            ..datetime
        });
    }
    let micros_each = match unit {
        IntervalUnit::Microsecond => 1,
        IntervalUnit::Second => MICROS_PER_SECOND,
        IntervalUnit::Minute => 60 * MICROS_PER_SECOND,
        IntervalUnit::Hour => 3600 * MICROS_PER_SECOND,
        IntervalUnit::Day => MICROS_PER_DAY,
        IntervalUnit::Week => 7 * MICROS_PER_DAY,
        _ => unreachable!("calendar units handled above"),
    };
    let micros = datetime
        .epoch_micros()
        .checked_add(amount.checked_mul(micros_each)?)?;
    let fsp = match unit {
        IntervalUnit::Microsecond => MAX_FSP,
        _ => datetime.fsp,
    };
    DateTime::from_epoch_micros(micros, fsp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of(datetime: Option<DateTime>) -> String {
        let mut out = Vec::new();
        match datetime {
            Some(datetime) => datetime.write_text(&mut out),
            None => out.extend_from_slice(b"none"),
        }
        String::from_utf8(out).unwrap()
    }

    fn time_text(time: Option<Time>) -> String {
        let mut out = Vec::new();
        match time {
            Some(time) => time.write_text(&mut out),
            None => out.extend_from_slice(b"none"),
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_calendar_round_trips() {
        for days in [-719_162, -1, 0, 1, 11_016, 19_753, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(
            days_from_civil(2000, 3, 1) - days_from_civil(2000, 2, 28),
            2
        );
        assert!(Date::new(2023, 2, 29).is_none());
        assert!(Date::new(2024, 2, 29).is_some());
        assert!(Date::new(0, 1, 1).is_none());
    }

    #[test]
    fn reads_the_forms_mysql_takes() {
        let parse = |text| text_of(DateTime::parse(text));
        assert_eq!(parse("2024-01-31"), "2024-01-31 00:00:00");
        assert_eq!(parse("2024-01-31 10:30:05"), "2024-01-31 10:30:05");
        assert_eq!(parse("2024-01-31T10:30:05.25"), "2024-01-31 10:30:05.25");
        assert_eq!(parse("2024/1/5 1:2:3"), "2024-01-05 01:02:03");
        assert_eq!(parse("20240131103005"), "2024-01-31 10:30:05");
        assert_eq!(parse("20240131"), "2024-01-31 00:00:00");
        assert_eq!(parse("99-12-31"), "1999-12-31 00:00:00");
        assert_eq!(parse("2024-02-30"), "none");
        assert_eq!(parse("0000-00-00"), "none");
        assert_eq!(parse("2024-01-31 24:00:00"), "none");
        assert_eq!(parse("hello"), "none");
        assert_eq!(parse("2024-01"), "none");
        assert_eq!(
            text_of(DateTime::from_number(20240131103005)),
            "2024-01-31 10:30:05"
        );
    }

    #[test]
    fn packs_in_order() {
        let values = [
            "0001-01-01 00:00:00",
            "1999-12-31 23:59:59.999999",
            "2000-01-01 00:00:00",
            "2000-01-01 00:00:00.000001",
            "2024-02-29 12:00:00",
            "9999-12-31 23:59:59.999999",
        ];
        let packed: Vec<i64> = values
            .iter()
            .map(|v| DateTime::parse(v).unwrap().pack())
            .collect();
        assert!(packed.windows(2).all(|w| w[0] < w[1]), "{packed:?}");
        for (text, packed) in values.iter().zip(&packed) {
            let back = DateTime::unpack(*packed, 6).unwrap();
            assert_eq!(back, DateTime::parse(text).unwrap());
        }
        let date = Date::new(2024, 12, 31).unwrap();
        assert_eq!(Date::unpack(date.pack()), Some(date));
        assert!(Date::new(2024, 12, 31).unwrap().pack() < Date::new(2025, 1, 1).unwrap().pack());
    }

    #[test]
    fn rounds_fractions_with_a_carry() {
        let value = DateTime::parse("2024-12-31 23:59:59.6").unwrap();
        assert_eq!(text_of(value.round(0)), "2025-01-01 00:00:00");
        let value = DateTime::parse("2024-01-01 10:00:00.123456").unwrap();
        assert_eq!(text_of(value.round(3)), "2024-01-01 10:00:00.123");
        assert_eq!(text_of(value.round(6)), "2024-01-01 10:00:00.123456");
    }

    #[test]
    fn times_read_and_print() {
        assert_eq!(time_text(Time::parse("10:30:05")), "10:30:05");
        assert_eq!(time_text(Time::parse("-1 02:00:00")), "-26:00:00");
        assert_eq!(time_text(Time::parse("838:59:59")), "838:59:59");
        assert_eq!(time_text(Time::parse("839:00:00")), "none");
        assert_eq!(time_text(Time::parse("103005.5")), "10:30:05.5");
        assert_eq!(time_text(Time::parse("10:61:00")), "none");
        assert_eq!(time_text(Time::parse("12:30")), "12:30:00");
        assert_eq!(time_text(Time::from_number(-123)), "-00:01:23");
        assert_eq!(time_text(Time::parse("x")), "none");
        assert_eq!(time_text(Time::from_number(i64::MIN)), "none");
        assert_eq!(time_text(Time::new(i64::MIN, 0)), "none");
    }

    #[test]
    fn intervals_follow_the_calendar() {
        let at = |text| DateTime::parse(text).unwrap();
        let add = |text, n, unit| text_of(add_interval(at(text), n, unit));
        assert_eq!(
            add("2024-01-31", 1, IntervalUnit::Month),
            "2024-02-29 00:00:00"
        );
        assert_eq!(
            add("2023-01-31", 1, IntervalUnit::Month),
            "2023-02-28 00:00:00"
        );
        assert_eq!(
            add("2024-12-31 23:00:00", 2, IntervalUnit::Hour),
            "2025-01-01 01:00:00"
        );
        assert_eq!(
            add("2024-03-01", -1, IntervalUnit::Day),
            "2024-02-29 00:00:00"
        );
        assert_eq!(
            add("2024-02-29", 1, IntervalUnit::Year),
            "2025-02-28 00:00:00"
        );
        assert_eq!(add("9999-12-31", 1, IntervalUnit::Day), "none");
    }

    #[test]
    fn zones_are_offsets() {
        assert_eq!(zone_offset("SYSTEM"), Some(0));
        // Hours past any zone's, however many digits, are none.
        assert_eq!(zone_offset("+9999999999999999:00"), None);
        assert_eq!(zone_offset("+15:00"), None);
        assert_eq!(zone_offset("+05:30"), Some(19_800));
        assert_eq!(zone_offset("-08:00"), Some(-28_800));
        assert_eq!(zone_offset("+15:00"), None);
        assert_eq!(zone_offset("Europe/Paris"), None);
    }
}
