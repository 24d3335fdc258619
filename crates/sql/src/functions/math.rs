//! Numeric functions past arithmetic and rounding: SQRT, EXP, LN, LOG,
//! LOG2, LOG10, POW and SIGN, as MySQL computes them: doubles, NULL where
//! the function is undefined (SQRT of a negative, LN of 0), error 1690
//! where the result is too large for a double; and FORMAT, a number as
//! text with a locale's separators.

use crate::error::{codes, SqlError, SqlResult};
use crate::value::{self, Value};

/// A function of one number giving a double.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MathFunction {
    /// SQRT.
    SquareRoot,
    /// EXP.
    Exponential,
    /// LN, and LOG of one argument.
    NaturalLog,
    /// LOG2.
    Log2,
    /// LOG10.
    Log10,
}

impl MathFunction {
    /// Its name, for messages.
    fn name(self) -> &'static str {
        match self {
            MathFunction::SquareRoot => "sqrt",
            MathFunction::Exponential => "exp",
            MathFunction::NaturalLog => "ln",
            MathFunction::Log2 => "log2",
            MathFunction::Log10 => "log10",
        }
    }
}

/// `function(x)`.
pub fn unary(function: MathFunction, x: &Value) -> SqlResult<Value> {
    if x.is_null() {
        return Ok(Value::Null);
    }
    let x = value::to_f64(x);
    let result = match function {
        MathFunction::SquareRoot => (x >= 0.0).then(|| x.sqrt()),
        MathFunction::Exponential => Some(x.exp()),
        MathFunction::NaturalLog => (x > 0.0).then(|| x.ln()),
        MathFunction::Log2 => (x > 0.0).then(|| x.log2()),
        MathFunction::Log10 => (x > 0.0).then(|| x.log10()),
    };
    double(result, || format!("{}({x})", function.name()))
}

/// LOG(base, x): NULL for a base that is not above 0 or is 1, or an x
/// that is not above 0.
pub fn log(base: &Value, x: &Value) -> SqlResult<Value> {
    if base.is_null() || x.is_null() {
        return Ok(Value::Null);
    }
    let (base, x) = (value::to_f64(base), value::to_f64(x));
    let defined = base > 0.0 && base != 1.0 && x > 0.0;
    double(defined.then(|| x.ln() / base.ln()), || {
        format!("log({base},{x})")
    })
}

/// POW(x, y): NULL where it is not a real number (a negative base to a
/// fractional power).
pub fn power(x: &Value, y: &Value) -> SqlResult<Value> {
    if x.is_null() || y.is_null() {
        return Ok(Value::Null);
    }
    let (x, y) = (value::to_f64(x), value::to_f64(y));
    let result = x.powf(y);
    double((!result.is_nan()).then_some(result), || {
        format!("pow({x},{y})")
    })
}

/// SIGN(x): -1, 0 or 1.
pub fn sign(x: &Value) -> Value {
    if x.is_null() {
        return Value::Null;
    }
    let x = value::to_f64(x);
    Value::Int(if x > 0.0 {
        1
    } else if x < 0.0 {
        -1
    } else {
        0
    })
}

/// MySQL's RAND() generator (`my_rnd`): RAND(n) gives the same sequence
/// as MySQL's and MariaDB's for the same n.
#[derive(Clone, Copy, Debug)]
pub struct MySqlRandom {
    seed1: u64,
    seed2: u64,
}

/// The generator's modulus.
const RANDOM_MAX: u64 = 0x3FFF_FFFF;

impl MySqlRandom {
    /// Seeded as RAND(n) seeds it: from n's low 32 bits.
    pub fn seeded(n: i64) -> MySqlRandom {
        let n = n as u32;
        MySqlRandom::from_seeds(
            n.wrapping_mul(0x10001).wrapping_add(55_555_555) as u64,
            n.wrapping_mul(0x1000_0001) as u64,
        )
    }

    /// Seeded from two values (a session's: random ones).
    pub fn from_seeds(seed1: u64, seed2: u64) -> MySqlRandom {
        MySqlRandom {
            seed1: seed1 % RANDOM_MAX,
            seed2: seed2 % RANDOM_MAX,
        }
    }

    /// The next value, at least 0 and below 1.
    pub fn next_f64(&mut self) -> f64 {
        self.seed1 = (self.seed1 * 3 + self.seed2) % RANDOM_MAX;
        self.seed2 = (self.seed1 + self.seed2 + 33) % RANDOM_MAX;
        self.seed1 as f64 / RANDOM_MAX as f64
    }
}

/// A double result: NULL when undefined (`None`), error 1690 when it
/// overflowed, naming `expression` as MySQL does.
fn double(result: Option<f64>, expression: impl FnOnce() -> String) -> SqlResult<Value> {
    match result {
        None => Ok(Value::Null),
        Some(result) if result.is_finite() => Ok(Value::Double(result)),
        Some(_) => Err(SqlError::new(
            codes::DATA_OUT_OF_RANGE,
            format!("DOUBLE value is out of range in '{}'", expression()),
        )),
    }
}

/// The most decimals FORMAT writes (MariaDB's; MySQL's is 30).
const FORMAT_MAX_DECIMALS: i64 = 38;

/// The separators of the locales FORMAT knows, as MariaDB's tables have
/// them: (names, between thousands, before the decimals). A locale not
/// listed formats as en_US, MySQL's answer to a locale it does not know.
const FORMAT_LOCALES: [(&[&str], &str, &str); 5] = [
    (
        &[
            "en_US", "en_GB", "en_AU", "en_CA", "en_NZ", "en_IE", "en_ZA", "es_MX", "ja_JP",
            "zh_CN", "zh_TW", "ko_KR",
        ],
        ",",
        ".",
    ),
    (
        &[
            "de_DE", "es_ES", "da_DK", "tr_TR", "nb_NO", "uk_UA", "hu_HU",
        ],
        ".",
        ",",
    ),
    (
        &[
            "fr_FR", "it_IT", "pt_BR", "pt_PT", "nl_NL", "de_AT", "pl_PL", "el_GR",
        ],
        "",
        ",",
    ),
    (&["ru_RU", "sv_SE", "fi_FI", "cs_CZ"], " ", ","),
    (&["de_CH"], "'", "."),
];

/// The separators of `locale` (between thousands, before the decimals),
/// when FORMAT knows it.
fn separators(locale: &[u8]) -> Option<(&'static str, &'static str)> {
    FORMAT_LOCALES
        .iter()
        .find(|(names, ..)| {
            names
                .iter()
                .any(|n| n.as_bytes().eq_ignore_ascii_case(locale))
        })
        .map(|(_, thousands, point)| (*thousands, *point))
}

/// Whether FORMAT knows `locale` (else it formats as en_US, with
/// warning 1649).
pub fn known_locale(locale: &[u8]) -> bool {
    separators(locale).is_some()
}

/// FORMAT(x, decimals[, locale]): `x` rounded to `decimals` places
/// (exact numbers half away from zero, doubles and text as doubles), its
/// whole part in groups of three: `FORMAT(1234.5, 2)` is `1,234.50`.
pub fn format(x: &Value, decimals: &Value, locale: Option<&Value>) -> SqlResult<Value> {
    let Some(decimals) = super::integer(decimals) else {
        return Ok(Value::Null);
    };
    let decimals = decimals.clamp(0, FORMAT_MAX_DECIMALS);
    let plain = match x {
        Value::Null => return Ok(Value::Null),
        Value::Int(_) | Value::UInt(_) | Value::Decimal(_) => {
            let rounded = super::round(x, decimals, false)?;
            let mut text = Vec::new();
            value::write_text(&rounded, &mut text);
            let mut text = String::from_utf8(text).expect("a number's text is ASCII");
            let written = text
                .split_once('.')
                .map_or(0, |(_, fraction)| fraction.len());
            if written == 0 && decimals > 0 {
                text.push('.');
            }
            text.extend(std::iter::repeat_n('0', decimals as usize - written));
            text
        }
        other => {
            let rounded = super::round(&Value::Double(value::to_f64(other)), decimals, false)?;
            format!("{:.*}", decimals as usize, value::to_f64(&rounded))
        }
    };
    let locale = locale.and_then(super::text).unwrap_or_default();
    let (thousands, point) = separators(&locale).unwrap_or((",", "."));
    let (sign, unsigned) = match plain.strip_prefix('-') {
        // Rounded to zero, a negative number loses its sign, as in MySQL.
        Some(rest) if rest.bytes().any(|b| (b'1'..=b'9').contains(&b)) => ("-", rest),
        Some(rest) => ("", rest),
        None => ("", plain.as_str()),
    };
    let (whole, fraction) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    let mut out = String::with_capacity(plain.len() + whole.len() / 3 + 2);
    out.push_str(sign);
    for (at, digit) in whole.chars().enumerate() {
        if at > 0 && (whole.len() - at) % 3 == 0 {
            out.push_str(thousands);
        }
        out.push(digit);
    }
    if !fraction.is_empty() {
        out.push_str(point);
        out.push_str(fraction);
    }
    Ok(Value::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undefined_is_null_and_overflow_an_error() {
        let f = |x: f64| Value::Double(x);
        assert_eq!(unary(MathFunction::SquareRoot, &f(16.0)).unwrap(), f(4.0));
        assert_eq!(
            unary(MathFunction::SquareRoot, &f(-1.0)).unwrap(),
            Value::Null
        );
        assert_eq!(
            unary(MathFunction::NaturalLog, &Value::Int(0)).unwrap(),
            Value::Null
        );
        assert_eq!(unary(MathFunction::Log2, &Value::Int(8)).unwrap(), f(3.0));
        assert_eq!(log(&Value::Int(1), &Value::Int(100)).unwrap(), Value::Null);
        assert_eq!(log(&Value::Int(10), &Value::Int(100)).unwrap(), f(2.0));
        assert_eq!(power(&Value::Int(2), &Value::Int(10)).unwrap(), f(1024.0));
        assert_eq!(power(&Value::Int(-8), &f(0.5)).unwrap(), Value::Null);
        let overflow = unary(MathFunction::Exponential, &Value::Int(1000)).unwrap_err();
        assert_eq!(overflow.code, codes::DATA_OUT_OF_RANGE);
        assert_eq!(sign(&Value::Int(-7)), Value::Int(-1));
        assert_eq!(
            unary(MathFunction::Exponential, &Value::Null).unwrap(),
            Value::Null
        );
    }
}
