//! Exact decimal numbers, MySQL's DECIMAL: a 128-bit integer and a scale
//! (`mantissa / 10^scale`), at most 38 digits (MySQL allows 65; 38 is what
//! 128 bits hold, and every common use, money included, fits). The scale
//! travels with the value because MySQL prints a DECIMAL with exactly its
//! scale's digits (`1.50`), and arithmetic sets the result's scale by
//! MySQL's rules: the larger for `+` and `-`, the sum for `*` (at most
//! 30), the dividend's plus 4 for `/` (`div_precision_increment`).
//! Rounding, where digits are dropped, is half away from zero, as
//! MySQL's DECIMAL rounds.

use std::cmp::Ordering;

/// The most digits a DECIMAL holds.
pub const MAX_PRECISION: u8 = 38;
/// The most digits after the point.
pub const MAX_SCALE: u8 = 30;
/// Digits `/` adds to the dividend's scale (MySQL's
/// `div_precision_increment` default).
pub const DIVISION_SCALE_INCREMENT: u8 = 4;

/// An exact decimal number.
#[derive(Clone, Copy, Debug)]
pub struct Decimal {
    mantissa: i128,
    scale: u8,
}

/// 10^n for n up to 38.
fn power_of_ten(n: u8) -> i128 {
    debug_assert!(n <= MAX_PRECISION, "10^{n} does not fit the mantissa");
    10i128.pow(n as u32)
}

/// `value / 10^digits`, rounded half away from zero.
fn divide_rounding(value: i128, divisor: i128) -> i128 {
    let quotient = value / divisor;
    let remainder = value % divisor;
    if remainder.unsigned_abs() * 2 >= divisor.unsigned_abs() {
        // Away from zero, on the side of the dividend's sign times the divisor's.
        if (value < 0) != (divisor < 0) {
            quotient - 1
        } else {
            quotient + 1
        }
    } else {
        quotient
    }
}

impl Decimal {
    /// The largest mantissa (exclusive): 38 digits.
    const LIMIT: i128 = 100_000_000_000_000_000_000_000_000_000_000_000_000;

    /// `mantissa / 10^scale`, when it holds at most 38 digits.
    pub fn new(mantissa: i128, scale: u8) -> Option<Decimal> {
        (scale <= MAX_SCALE && mantissa.unsigned_abs() < Self::LIMIT as u128)
            .then_some(Decimal { mantissa, scale })
    }

    /// An integer, scale 0.
    pub fn from_integer(value: i128) -> Option<Decimal> {
        Decimal::new(value, 0)
    }

    /// The integer and scale.
    pub fn parts(self) -> (i128, u8) {
        (self.mantissa, self.scale)
    }

    /// The digits after the point it prints with.
    pub fn scale(self) -> u8 {
        self.scale
    }

    /// Its digits, not counting leading zeros (0 has one).
    pub fn precision(self) -> u8 {
        let mut digits = 1;
        let mut rest = self.mantissa.unsigned_abs() / 10;
        while rest > 0 {
            digits += 1;
            rest /= 10;
        }
        digits
    }

    /// Reads decimal text: optional sign, digits, an optional point and
    /// digits, an optional exponent (`1.5e3`). Digits past 38 significant
    /// ones, or past scale 30, are rounded away. `None` when it is not a
    /// number or too large.
    pub fn parse(text: &str) -> Option<Decimal> {
        let text = text.trim();
        let (negative, rest) = match text.as_bytes().first()? {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        let (number, exponent) = match rest.find(['e', 'E']) {
            Some(at) => (&rest[..at], rest[at + 1..].parse::<i32>().ok()?),
            None => (rest, 0),
        };
        let (whole, fraction) = match number.find('.') {
            Some(at) => (&number[..at], &number[at + 1..]),
            None => (number, ""),
        };
        if whole.is_empty() && fraction.is_empty() {
            return None;
        }
        if !whole
            .bytes()
            .chain(fraction.bytes())
            .all(|b| b.is_ascii_digit())
        {
            return None;
        }
        // Digits, and where the point stands among them after the exponent.
        let digits: Vec<u8> = whole
            .bytes()
            .chain(fraction.bytes())
            .map(|b| b - b'0')
            .collect();
        let scale = fraction.len() as i64 - exponent as i64;
        Decimal::from_digits(negative, &digits, scale)
    }

    /// The number `digits` (most significant first) times 10^-scale.
    fn from_digits(negative: bool, digits: &[u8], scale: i64) -> Option<Decimal> {
        // Leading zeros add nothing.
        let first = digits.iter().position(|d| *d != 0).unwrap_or(digits.len());
        let digits = &digits[first..];
        // Keep at most MAX_SCALE digits after the point, rounding the rest.
        let mut kept = digits.len();
        let mut scale = scale;
        if scale > MAX_SCALE as i64 {
            let drop = scale - MAX_SCALE as i64;
            if drop > digits.len() as i64 {
                // Every digit lies below the first one dropped: zero.
                return Decimal::new(0, MAX_SCALE);
            }
            kept = digits.len() - drop as usize;
            scale = MAX_SCALE as i64;
        }
        let mut mantissa: i128 = 0;
        for digit in &digits[..kept] {
            mantissa = mantissa.checked_mul(10)?.checked_add(*digit as i128)?;
            if mantissa >= Self::LIMIT {
                return None;
            }
        }
        if kept < digits.len() && digits[kept] >= 5 {
            mantissa += 1;
        }
        if mantissa == 0 {
            // Zero at any exponent (`0e2147483647`).
            return Decimal::new(0, scale.clamp(0, MAX_SCALE as i64) as u8);
        }
        if scale < -(MAX_PRECISION as i64) {
            // More digits than any DECIMAL holds.
            return None;
        }
        // A negative scale (digits before an exponent): zeros to append.
        while scale < 0 {
            mantissa = mantissa.checked_mul(10)?;
            scale += 1;
        }
        let mantissa = if negative { -mantissa } else { mantissa };
        Decimal::new(mantissa, scale as u8)
    }

    /// A double as the shortest decimal that reads back as it (MySQL's
    /// conversion of a DOUBLE to DECIMAL); `None` for infinities and NaN.
    pub fn from_f64(value: f64) -> Option<Decimal> {
        if !value.is_finite() {
            return None;
        }
        Decimal::parse(&format!("{value:e}"))
    }

    /// The nearest double.
    pub fn to_f64(self) -> f64 {
        // Through text: exact digits, one correctly rounded conversion.
        let mut out = Vec::new();
        self.write_text(&mut out);
        std::str::from_utf8(&out)
            .ok()
            .and_then(|text| text.parse().ok())
            .unwrap_or(0.0)
    }

    /// The integer part, rounded half away from zero (MySQL's conversion
    /// of a DECIMAL to an integer).
    pub fn round_to_integer(self) -> i128 {
        divide_rounding(self.mantissa, power_of_ten(self.scale))
    }

    /// The same number with `scale` digits after the point: rounded half
    /// away from zero when digits are dropped; `None` when it no longer
    /// fits 38 digits.
    pub fn rescale(self, scale: u8) -> Option<Decimal> {
        let scale = scale.min(MAX_SCALE);
        match scale.cmp(&self.scale) {
            Ordering::Equal => Some(self),
            Ordering::Less => Decimal::new(
                divide_rounding(self.mantissa, power_of_ten(self.scale - scale)),
                scale,
            ),
            Ordering::Greater => Decimal::new(
                self.mantissa
                    .checked_mul(power_of_ten(scale - self.scale))?,
                scale,
            ),
        }
    }

    /// Cut to `scale` digits after the point toward zero (TRUNCATE()).
    pub fn truncate(self, scale: u8) -> Decimal {
        if scale >= self.scale {
            return self;
        }
        Decimal {
            mantissa: self.mantissa / power_of_ten(self.scale - scale),
            scale,
        }
    }

    /// Whether it fits DECIMAL(precision, scale) once rescaled to it.
    pub fn fit(self, precision: u8, scale: u8) -> Option<Decimal> {
        let fitted = self.rescale(scale)?;
        (fitted.mantissa.abs() < power_of_ten(precision)).then_some(fitted)
    }

    /// `self + other` at the larger scale.
    pub fn checked_add(self, other: Decimal) -> Option<Decimal> {
        let scale = self.scale.max(other.scale);
        let (a, b) = (self.rescale(scale)?, other.rescale(scale)?);
        Decimal::new(a.mantissa.checked_add(b.mantissa)?, scale)
    }

    /// `self - other` at the larger scale.
    pub fn checked_sub(self, other: Decimal) -> Option<Decimal> {
        self.checked_add(other.negate())
    }

    /// `self * other`, at the sum of the scales (at most 30, rounded).
    pub fn checked_mul(self, other: Decimal) -> Option<Decimal> {
        let product = self.mantissa.checked_mul(other.mantissa)?;
        let scale = self.scale + other.scale;
        if scale > MAX_SCALE {
            let drop = scale - MAX_SCALE;
            return Decimal::new(divide_rounding(product, power_of_ten(drop)), MAX_SCALE);
        }
        Decimal::new(product, scale)
    }

    /// `self / other` at the dividend's scale plus 4 (rounded); `None`
    /// when `other` is zero or the quotient does not fit.
    pub fn checked_div(self, other: Decimal) -> Option<Decimal> {
        if other.mantissa == 0 {
            return None;
        }
        let scale = (self.scale + DIVISION_SCALE_INCREMENT).min(MAX_SCALE);
        // self/other = (a / 10^sa) / (b / 10^sb); at `scale`:
        // a * 10^(scale + sb - sa) / b.
        let shift = scale as i32 + other.scale as i32 - self.scale as i32;
        let (numerator, divisor) = if shift >= 0 {
            (
                self.mantissa.checked_mul(power_of_ten(shift as u8))?,
                other.mantissa,
            )
        } else {
            (
                self.mantissa,
                other.mantissa.checked_mul(power_of_ten((-shift) as u8))?,
            )
        };
        Decimal::new(divide_rounding(numerator, divisor), scale)
    }

    /// `self % other` (the sign of the dividend), at the larger scale.
    pub fn checked_rem(self, other: Decimal) -> Option<Decimal> {
        let scale = self.scale.max(other.scale);
        let (a, b) = (self.rescale(scale)?, other.rescale(scale)?);
        if b.mantissa == 0 {
            return None;
        }
        Decimal::new(a.mantissa % b.mantissa, scale)
    }

    /// `-self`.
    pub fn negate(self) -> Decimal {
        Decimal {
            mantissa: -self.mantissa,
            scale: self.scale,
        }
    }

    /// `|self|`.
    pub fn abs(self) -> Decimal {
        Decimal {
            mantissa: self.mantissa.abs(),
            scale: self.scale,
        }
    }

    /// Whether it is zero.
    pub fn is_zero(self) -> bool {
        self.mantissa == 0
    }

    /// How two decimals compare by value (`1.50` equals `1.5`).
    pub fn compare(self, other: Decimal) -> Ordering {
        let scale = self.scale.max(other.scale);
        match (self.rescale(scale), other.rescale(scale)) {
            (Some(a), Some(b)) => a.mantissa.cmp(&b.mantissa),
            // Rescaling overflowed: the one with more integer digits is the
            // larger in magnitude; compare as doubles, exact enough there.
            _ => self
                .to_f64()
                .partial_cmp(&other.to_f64())
                .unwrap_or(Ordering::Equal),
        }
    }

    /// Its value without trailing fraction zeros, for grouping: equal
    /// numbers give equal keys.
    pub fn normalized(self) -> (i128, u8) {
        let (mut mantissa, mut scale) = (self.mantissa, self.scale);
        while scale > 0 && mantissa % 10 == 0 {
            mantissa /= 10;
            scale -= 1;
        }
        (mantissa, scale)
    }

    /// Writes it as MySQL prints it: exactly `scale` digits after the point.
    pub fn write_text(self, out: &mut Vec<u8>) {
        if self.mantissa < 0 {
            out.push(b'-');
        }
        let digits = self.mantissa.unsigned_abs().to_string();
        let scale = self.scale as usize;
        if scale == 0 {
            out.extend_from_slice(digits.as_bytes());
            return;
        }
        if digits.len() <= scale {
            out.extend_from_slice(b"0.");
            out.extend(std::iter::repeat_n(b'0', scale - digits.len()));
            out.extend_from_slice(digits.as_bytes());
        } else {
            let point = digits.len() - scale;
            out.extend_from_slice(&digits.as_bytes()[..point]);
            out.push(b'.');
            out.extend_from_slice(&digits.as_bytes()[point..]);
        }
    }
}

impl std::fmt::Display for Decimal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = Vec::new();
        self.write_text(&mut out);
        f.write_str(&String::from_utf8_lossy(&out))
    }
}

impl PartialEq for Decimal {
    fn eq(&self, other: &Decimal) -> bool {
        self.compare(*other) == Ordering::Equal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(text: &str) -> Decimal {
        Decimal::parse(text).unwrap_or_else(|| panic!("{text} parses"))
    }

    fn text(value: Option<Decimal>) -> String {
        value.map(|v| v.to_string()).unwrap_or("none".into())
    }

    #[test]
    fn parses_and_prints_with_its_scale() {
        assert_eq!(d("12.50").to_string(), "12.50");
        assert_eq!(d("-0.05").to_string(), "-0.05");
        assert_eq!(d(".5").to_string(), "0.5");
        assert_eq!(d("7.").to_string(), "7");
        assert_eq!(d("1.5e3").to_string(), "1500");
        assert_eq!(d("125e-2").to_string(), "1.25");
        assert_eq!(d("+3").to_string(), "3");
        assert!(Decimal::parse("abc").is_none());
        assert!(Decimal::parse("1.2.3").is_none());
        assert!(Decimal::parse("").is_none());
        assert!(Decimal::parse(".").is_none());
        assert_eq!(d("0e2147483647").to_string(), "0");
        assert!(Decimal::parse("1e2147483647").is_none());
        assert!(Decimal::parse(&"9".repeat(39)).is_none());
        assert_eq!(d(&"9".repeat(38)).precision(), 38);
    }

    #[test]
    fn rounds_half_away_from_zero() {
        assert_eq!(text(d("2.345").rescale(2)), "2.35");
        assert_eq!(text(d("-2.345").rescale(2)), "-2.35");
        assert_eq!(text(d("2.344").rescale(2)), "2.34");
        assert_eq!(text(d("2.5").rescale(0)), "3");
        assert_eq!(text(d("1.5").rescale(3)), "1.500");
        assert_eq!(d("-2.5").round_to_integer(), -3);
        assert_eq!(d("2.567").truncate(1).to_string(), "2.5");
    }

    #[test]
    fn fits_a_declared_precision() {
        assert_eq!(text(d("999.994").fit(5, 2)), "999.99");
        assert!(d("999.995").fit(5, 2).is_none());
        assert!(d("1000").fit(5, 2).is_none());
        assert_eq!(text(d("-12").fit(4, 2)), "-12.00");
    }

    #[test]
    fn arithmetic_takes_mysql_scales() {
        assert_eq!(text(d("1.5").checked_add(d("2.25"))), "3.75");
        assert_eq!(text(d("1.50").checked_sub(d("2"))), "-0.50");
        assert_eq!(text(d("1.5").checked_mul(d("2.25"))), "3.375");
        assert_eq!(text(d("1").checked_div(d("3"))), "0.3333");
        assert_eq!(text(d("2").checked_div(d("3"))), "0.6667");
        assert_eq!(text(d("7.00").checked_div(d("2"))), "3.500000");
        assert_eq!(text(d("-1").checked_div(d("8"))), "-0.1250");
        assert_eq!(text(d("1").checked_div(d("0"))), "none");
        assert_eq!(text(d("7.5").checked_rem(d("2"))), "1.5");
        assert_eq!(text(d("-7").checked_rem(d("2"))), "-1");
        assert!(d(&"9".repeat(38)).checked_add(d("1")).is_none());
    }

    #[test]
    fn compares_by_value() {
        assert_eq!(d("1.50"), d("1.5"));
        assert_eq!(d("-1").compare(d("0.5")), Ordering::Less);
        assert_eq!(d("10").compare(d("9.99")), Ordering::Greater);
        assert_eq!(d("1.50").normalized(), d("1.5").normalized());
        assert_eq!(d("0.00").normalized(), (0, 0));
    }

    #[test]
    fn converts_with_doubles() {
        assert_eq!(Decimal::from_f64(0.1).unwrap().to_string(), "0.1");
        assert_eq!(Decimal::from_f64(-2.5e-3).unwrap().to_string(), "-0.0025");
        assert_eq!(
            Decimal::from_f64(1e20).unwrap().to_string(),
            "100000000000000000000"
        );
        assert!(Decimal::from_f64(f64::NAN).is_none());
        assert_eq!(d("12.25").to_f64(), 12.25);
    }
}
