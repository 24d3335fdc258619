//! tpcc's exact values as SQL text: money as integer cents (DECIMAL(p,2)
//! read and written without f64, whose rounding would make consistency
//! condition 1 fail on its own), fixed-point rates such as taxes, and
//! DATETIME text from the system clock (UTC).

use std::time::{SystemTime, UNIX_EPOCH};

/// The cents of a decimal text such as "-10.00", "300000.00", "12" or
/// "0.5"; `None` when it is not a number or has non-zero digits beyond
/// the cents (a DECIMAL(p,2) never does; a SUM may print more zeros).
pub(super) fn parse_cents(text: &str) -> Option<i64> {
    let text = text.trim();
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let all_digits = |part: &str| part.bytes().all(|byte| byte.is_ascii_digit());
    if !all_digits(whole) || !all_digits(fraction) {
        return None;
    }
    let (cents_digits, beyond) = fraction.split_at(fraction.len().min(2));
    if beyond.bytes().any(|byte| byte != b'0') {
        return None;
    }
    let whole_value: i64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let fraction_value: i64 = match cents_digits.len() {
        0 => 0,
        // "0.5" is fifty cents.
        1 => cents_digits.parse::<i64>().ok()? * 10,
        _ => cents_digits.parse().ok()?,
    };
    let cents = whole_value.checked_mul(100)?.checked_add(fraction_value)?;
    Some(if negative { -cents } else { cents })
}

/// `cents` as a decimal literal with two places: -1000 is "-10.00".
pub(super) fn format_cents(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let magnitude = cents.unsigned_abs();
    format!("{sign}{}.{:02}", magnitude / 100, magnitude % 100)
}

/// `ten_thousandths` as a DECIMAL(4,4) literal: 1234 is "0.1234" (taxes
/// and discounts are drawn as integers so their text is exact).
pub(super) fn format_rate(ten_thousandths: u32) -> String {
    format!(
        "{}.{:04}",
        ten_thousandths / 10_000,
        ten_thousandths % 10_000
    )
}

/// `time` as DATETIME text, 'YYYY-MM-DD HH:MM:SS' in UTC (times before
/// 1970 print as the epoch: the clock is never there).
pub(super) fn datetime_text(time: SystemTime) -> String {
    let seconds = time
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let (year, month, day) = civil_from_days((seconds / 86_400) as i64);
    let of_day = seconds % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

/// The proleptic Gregorian (year, month, day) of `days` since 1970-01-01
/// (Howard Hinnant's civil_from_days: exact, no tables).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    // Days counted from 0000-03-01, so leap days end each 400-year era.
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    // Months counted from March.
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = (if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    }) as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}
