//! Text functions past the common ones: REPEAT, REVERSE, SPACE, HEX,
//! UNHEX, MD5, SHA1, SHA2, ASCII, FIND_IN_SET, FIELD, ELT and STRCMP,
//! with MySQL's results for NULL and for numbers given as text.

use super::{characters, integer, text, MAX_RESULT_BYTES};
use crate::value::{self, Value};
use sha2::Digest;

/// A digest function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DigestKind {
    /// MD5(s).
    Md5,
    /// SHA1(s) and SHA(s).
    Sha1,
    /// SHA2(s, bits): 224, 256 (or 0), 384 or 512.
    Sha2,
}

/// REPEAT(s, n): NULL past the longest result a function makes.
pub fn repeat(s: &Value, n: &Value) -> Value {
    let (Some(s), Some(n)) = (text(s), integer(n)) else {
        return Value::Null;
    };
    let n = n.max(0) as usize;
    match s.len().checked_mul(n) {
        Some(bytes) if bytes <= MAX_RESULT_BYTES => Value::Bytes(s.repeat(n)),
        _ => Value::Null,
    }
}

/// SPACE(n).
pub fn space(n: &Value) -> Value {
    repeat(&Value::from(" "), n)
}

/// REVERSE(s): its characters in reverse order.
pub fn reverse(s: &Value) -> Value {
    let Some(s) = text(s) else {
        return Value::Null;
    };
    Value::Bytes(
        characters(&s)
            .into_iter()
            .rev()
            .flatten()
            .copied()
            .collect(),
    )
}

/// HEX(x): a number's value in hexadecimal (a negative one as its 64-bit
/// two's complement), text's bytes two digits each, upper case.
pub fn hex(x: &Value) -> Value {
    let digits = match x {
        Value::Null => return Value::Null,
        Value::Bytes(bytes) => bytes.iter().map(|b| format!("{b:02X}")).collect(),
        Value::Int(x) => format!("{:X}", *x as u64),
        Value::UInt(x) => format!("{x:X}"),
        other => match integer(other) {
            Some(x) => format!("{:X}", x as u64),
            None => return Value::Null,
        },
    };
    Value::from(digits)
}

/// UNHEX(s): the bytes two hexadecimal digits each stand for (an odd
/// count as if led by 0); NULL for a character that is not a digit.
pub fn unhex(s: &Value) -> Value {
    let Some(s) = text(s) else {
        return Value::Null;
    };
    let digit = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut padded = Vec::with_capacity(s.len() + 1);
    if s.len() % 2 == 1 {
        padded.push(b'0');
    }
    padded.extend_from_slice(&s);
    let mut bytes = Vec::with_capacity(padded.len() / 2);
    for pair in padded.chunks(2) {
        match (digit(pair[0]), digit(pair[1])) {
            (Some(high), Some(low)) => bytes.push(high << 4 | low),
            _ => return Value::Null,
        }
    }
    Value::Bytes(bytes)
}

/// MD5(s), SHA1(s), SHA2(s, bits): the digest in lower-case hexadecimal;
/// SHA2 of a length it does not know is NULL.
pub fn digest(kind: DigestKind, s: &Value, bits: Option<&Value>) -> Value {
    let Some(s) = text(s) else {
        return Value::Null;
    };
    let bytes: Vec<u8> = match kind {
        DigestKind::Md5 => md5::Md5::digest(&s).to_vec(),
        DigestKind::Sha1 => sha1::Sha1::digest(&s).to_vec(),
        DigestKind::Sha2 => match bits.and_then(integer) {
            Some(224) => sha2::Sha224::digest(&s).to_vec(),
            Some(0 | 256) => sha2::Sha256::digest(&s).to_vec(),
            Some(384) => sha2::Sha384::digest(&s).to_vec(),
            Some(512) => sha2::Sha512::digest(&s).to_vec(),
            _ => return Value::Null,
        },
    };
    Value::from(bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// A version-1 UUID's text for `unix_ticks` (100 ns since 1970) with
/// `noise` for its clock sequence and node (the node's multicast bit set,
/// as for a node that is no network card's address).
pub fn uuid_v1(unix_ticks: u64, noise: u64) -> String {
    // 100 ns intervals from 1582-10-15 to 1970-01-01.
    let ticks = unix_ticks.wrapping_add(0x01B2_1DD2_1381_4000);
    let time_low = ticks & 0xFFFF_FFFF;
    let time_mid = (ticks >> 32) & 0xFFFF;
    let time_high = ((ticks >> 48) & 0x0FFF) | 0x1000;
    let clock_sequence = ((noise >> 48) & 0x3FFF) | 0x8000;
    let node = (noise & 0xFFFF_FFFF_FFFF) | 0x0100_0000_0000;
    format!("{time_low:08x}-{time_mid:04x}-{time_high:04x}-{clock_sequence:04x}-{node:012x}")
}

/// ASCII(s): its first byte, 0 for ''.
pub fn ascii(s: &Value) -> Value {
    match text(s) {
        Some(s) => Value::Int(s.first().copied().unwrap_or(0) as i64),
        None => Value::Null,
    }
}

/// FIND_IN_SET(s, list): the position from 1 of `s` among the
/// comma-separated items of `list`, 0 when absent (or when `s` holds a
/// comma).
pub fn find_in_set(s: &Value, list: &Value) -> Value {
    let (Some(s), Some(list)) = (text(s), text(list)) else {
        return Value::Null;
    };
    if s.contains(&b',') {
        return Value::Int(0);
    }
    let found = list
        .split(|b| *b == b',')
        .position(|item| item == s.as_slice());
    Value::Int(found.map_or(0, |at| at as i64 + 1))
}

/// FIELD(s, a, b, ...): the position from 1 of the first argument equal
/// to `s`, 0 when none is (or `s` is NULL).
pub fn field(values: &[Value]) -> Value {
    let Some((s, list)) = values.split_first() else {
        return Value::Int(0);
    };
    if s.is_null() {
        return Value::Int(0);
    }
    let found = list
        .iter()
        .position(|item| value::compare(s, item) == Some(std::cmp::Ordering::Equal));
    Value::Int(found.map_or(0, |at| at as i64 + 1))
}

/// ELT(n, a, b, ...): the nth of the rest, NULL when there is none.
pub fn element(values: &[Value]) -> Value {
    let Some((n, list)) = values.split_first() else {
        return Value::Null;
    };
    match integer(n) {
        Some(n) if n >= 1 => list.get(n as usize - 1).cloned().unwrap_or(Value::Null),
        _ => Value::Null,
    }
}

/// STRCMP(a, b): -1, 0 or 1 as the texts compare (bytes: utf8mb4_bin).
pub fn strcmp(a: &Value, b: &Value) -> Value {
    let (Some(a), Some(b)) = (text(a), text(b)) else {
        return Value::Null;
    };
    Value::Int(match a.cmp(&b) {
        std::cmp::Ordering::Less => -1,
        std::cmp::Ordering::Equal => 0,
        std::cmp::Ordering::Greater => 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(value: Value) -> String {
        value::display(&value)
    }

    #[test]
    fn text_functions_answer_as_mysql() {
        assert_eq!(shown(repeat(&Value::from("ab"), &Value::Int(3))), "ababab");
        assert_eq!(shown(repeat(&Value::from("ab"), &Value::Int(-1))), "");
        assert_eq!(
            repeat(&Value::from("ab"), &Value::Int(i64::MAX)),
            Value::Null
        );
        assert_eq!(shown(reverse(&Value::from("héllo"))), "olléh");
        assert_eq!(shown(hex(&Value::Int(255))), "FF");
        assert_eq!(shown(hex(&Value::Int(-1))), "FFFFFFFFFFFFFFFF");
        assert_eq!(shown(hex(&Value::from("abc"))), "616263");
        assert_eq!(unhex(&Value::from("616263")), Value::from("abc"));
        assert_eq!(unhex(&Value::from("F")), Value::Bytes(vec![0x0F]));
        assert_eq!(unhex(&Value::from("zz")), Value::Null);
        assert_eq!(
            shown(digest(DigestKind::Md5, &Value::from("abc"), None)),
            "900150983cd24fb0d6963f7d28e17f72"
        );
        assert_eq!(
            shown(digest(DigestKind::Sha1, &Value::from("abc"), None)),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(
            shown(digest(
                DigestKind::Sha2,
                &Value::from("abc"),
                Some(&Value::Int(256))
            )),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            digest(DigestKind::Sha2, &Value::from("abc"), Some(&Value::Int(1))),
            Value::Null
        );
        assert_eq!(ascii(&Value::from("A")), Value::Int(65));
        assert_eq!(
            find_in_set(&Value::from("b"), &Value::from("a,b,c")),
            Value::Int(2)
        );
        assert_eq!(
            find_in_set(&Value::from("d"), &Value::from("a,b,c")),
            Value::Int(0)
        );
        let args = [Value::from("b"), Value::from("a"), Value::from("b")];
        assert_eq!(field(&args), Value::Int(2));
        assert_eq!(
            element(&[Value::Int(2), Value::from("x"), Value::from("y")]),
            Value::from("y")
        );
        assert_eq!(element(&[Value::Int(3), Value::from("x")]), Value::Null);
        assert_eq!(strcmp(&Value::from("a"), &Value::from("b")), Value::Int(-1));
    }
}
