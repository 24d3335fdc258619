//! The order of column values, as ordered indexes and range bounds use it
//! (docs/design/scans-and-indexes.md §2): for every column type, how two
//! values in their stored form (little-endian numbers, bytes) compare.
//!
//! - NULL sorts before every value.
//! - INT and BIGINT: signed or unsigned, as numbers.
//! - DOUBLE: as numbers, -0 equal to +0. NaN has no place in an order:
//!   [`check_orderable`] refuses it where a value enters an index or a
//!   bound; compared anyway (a bug upstream), it sorts after +infinity so
//!   the order stays total.
//! - CHAR and VARCHAR: MySQL's PAD SPACE with a binary collation: bytes
//!   compared as unsigned, the shorter value compared as if padded with
//!   spaces, so trailing spaces never matter ("a" = "a  ", and "a" sorts
//!   after "a\x01" because a space is above 0x01). Case-sensitive until
//!   collations exist.
//! - VARBINARY: bytes as unsigned, a prefix before the longer value.
//! - A key of several columns compares column by column.
//!
//! Values here are well formed (checked when they entered the row or the
//! bound: `attr::check_value`); a number of the wrong width is a broken
//! invariant and panics.

use crate::error::ErrorCode;
use crate::schema::ColumnType;
use std::cmp::Ordering;

/// How two values of `column_type` compare (`None` is NULL).
#[inline]
pub fn compare(column_type: ColumnType, a: Option<&[u8]>, b: Option<&[u8]>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => compare_values(column_type, a, b),
    }
}

/// How two non-NULL values of `column_type` compare.
#[inline]
pub fn compare_values(column_type: ColumnType, a: &[u8], b: &[u8]) -> Ordering {
    match column_type {
        ColumnType::Int { unsigned: false } => {
            i32::from_le_bytes(word(a)).cmp(&i32::from_le_bytes(word(b)))
        }
        ColumnType::Int { unsigned: true } => {
            u32::from_le_bytes(word(a)).cmp(&u32::from_le_bytes(word(b)))
        }
        ColumnType::BigInt { unsigned: false } => {
            i64::from_le_bytes(word(a)).cmp(&i64::from_le_bytes(word(b)))
        }
        ColumnType::BigInt { unsigned: true } => {
            u64::from_le_bytes(word(a)).cmp(&u64::from_le_bytes(word(b)))
        }
        ColumnType::Double => {
            compare_doubles(f64::from_le_bytes(word(a)), f64::from_le_bytes(word(b)))
        }
        ColumnType::Char(_) | ColumnType::VarChar(_) => compare_padded(a, b),
        ColumnType::VarBinary(_) => a.cmp(b),
    }
}

/// How two non-NULL values of different column types compare, where the
/// two types order the same way: integers of any width and sign as
/// numbers, CHAR with VARCHAR (PAD SPACE), VARBINARY with VARBINARY,
/// DOUBLE with DOUBLE. `None` when the types do not compare (a number
/// with text, DOUBLE with an integer: a caller converts first).
pub fn compare_across(
    a_type: ColumnType,
    a: &[u8],
    b_type: ColumnType,
    b: &[u8],
) -> Option<Ordering> {
    if a_type == b_type {
        return Some(compare_values(a_type, a, b));
    }
    if let (Some(a), Some(b)) = (integer(a_type, a), integer(b_type, b)) {
        return Some(a.cmp(&b));
    }
    match (a_type, b_type) {
        (x, y) if x.pads_spaces() && y.pads_spaces() => Some(compare_padded(a, b)),
        (ColumnType::VarBinary(_), ColumnType::VarBinary(_)) => Some(a.cmp(b)),
        _ => None,
    }
}

/// Whether values of the two types compare ([`compare_across`]).
pub fn comparable(a_type: ColumnType, b_type: ColumnType) -> bool {
    let is_integer = |t| matches!(t, ColumnType::Int { .. } | ColumnType::BigInt { .. });
    a_type == b_type
        || (is_integer(a_type) && is_integer(b_type))
        || (a_type.pads_spaces() && b_type.pads_spaces())
        || matches!(
            (a_type, b_type),
            (ColumnType::VarBinary(_), ColumnType::VarBinary(_))
        )
}

/// An integer value widened, or `None` for a type that is not an integer.
fn integer(column_type: ColumnType, value: &[u8]) -> Option<i128> {
    Some(match column_type {
        ColumnType::Int { unsigned: false } => i32::from_le_bytes(word(value)).into(),
        ColumnType::Int { unsigned: true } => u32::from_le_bytes(word(value)).into(),
        ColumnType::BigInt { unsigned: false } => i64::from_le_bytes(word(value)).into(),
        ColumnType::BigInt { unsigned: true } => u64::from_le_bytes(word(value)).into(),
        _ => return None,
    })
}

/// How two keys of `columns` compare, column by column (each key gives
/// one value per column, `None` for NULL).
pub fn compare_keys(columns: &[ColumnType], a: &[Option<&[u8]>], b: &[Option<&[u8]>]) -> Ordering {
    assert!(
        a.len() == columns.len() && b.len() == columns.len(),
        "keys of {} and {} values compared over {} columns",
        a.len(),
        b.len(),
        columns.len()
    );
    for ((&column_type, &x), &y) in columns.iter().zip(a).zip(b) {
        let order = compare(column_type, x, y);
        if order != Ordering::Equal {
            return order;
        }
    }
    Ordering::Equal
}

/// Whether `value` may take part in an order: a DOUBLE must not be NaN
/// (`BadValue`). Every other well-formed value may.
pub fn check_orderable(column_type: ColumnType, value: &[u8]) -> Result<(), ErrorCode> {
    if column_type == ColumnType::Double
        && value.len() == 8
        && f64::from_le_bytes(word(value)).is_nan()
    {
        return Err(ErrorCode::BadValue);
    }
    Ok(())
}

/// Bytes in a key prefix ([`key_prefix`]).
pub const PREFIX_BYTES: usize = 8;

/// The first [`PREFIX_BYTES`] bytes of a key in a form whose byte order is
/// the key's order, as a big-endian `u64`, and whether it is the whole key.
///
/// An ordered index keeps it beside each row id so that most comparisons
/// on the way down the tree and along a range compare two integers
/// instead of reading two rows (docs/design/scans-and-indexes.md §2).
/// It is monotone: `prefix(a) < prefix(b)` implies `a < b`, and equal keys
/// have equal prefixes; keys with equal prefixes are compared in full,
/// unless `exact` says the prefix holds every byte of the key (then equal
/// prefixes are equal keys).
///
/// Column by column: a NULL-able column gives one byte (0 NULL, 1 a
/// value) before its value; integers are big-endian, signed ones with the
/// sign bit flipped; a DOUBLE's bits are flipped so that byte order is
/// numeric order (-0 taken as +0); a text value (CHAR, VARCHAR) is its
/// bytes padded with spaces to the end of the prefix (PAD SPACE) and a
/// binary one its bytes padded with zeros, and either ends the prefix (the
/// next column's bytes would meet the longer value's). A value that does
/// not fit is cut, which keeps the order.
pub fn key_prefix(columns: &[KeyColumn], key: &[Option<&[u8]>]) -> KeyPrefix {
    assert!(
        key.len() <= columns.len(),
        "a key of {} values for {} columns",
        key.len(),
        columns.len()
    );
    let mut builder = KeyPrefixBuilder::new();
    for (&column, &value) in columns.iter().zip(key) {
        if !builder.push(column, value) {
            break;
        }
    }
    builder.finish()
}

/// [`key_prefix`] fed one column at a time, for callers that read the
/// values from a row and have no slice of them.
#[derive(Clone, Copy, Debug)]
pub struct KeyPrefixBuilder {
    bytes: [u8; PREFIX_BYTES],
    at: usize,
    exact: bool,
    full: bool,
}

impl Default for KeyPrefixBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl KeyPrefixBuilder {
    /// A prefix of no columns yet.
    pub fn new() -> KeyPrefixBuilder {
        KeyPrefixBuilder {
            bytes: [0; PREFIX_BYTES],
            at: 0,
            exact: true,
            full: false,
        }
    }

    /// Adds the next column's value; returns whether later columns still
    /// matter (false once the prefix is full).
    pub fn push(&mut self, column: KeyColumn, value: Option<&[u8]>) -> bool {
        if self.full || self.at == PREFIX_BYTES {
            self.exact = false;
            self.full = true;
            return false;
        }
        if column.nullable {
            self.bytes[self.at] = u8::from(value.is_some());
            self.at += 1;
        }
        let Some(value) = value else {
            assert!(
                column.nullable,
                "NULL in a NOT NULL key column: values are checked when they enter"
            );
            return true;
        };
        let (written, ended) = encode_value(column.column_type, value, &mut self.bytes[self.at..]);
        self.at += written;
        if ended {
            self.exact = false;
            self.full = true;
        }
        !self.full
    }

    /// The prefix of the columns pushed.
    pub fn finish(self) -> KeyPrefix {
        KeyPrefix {
            value: u64::from_be_bytes(self.bytes),
            bytes: self.at,
            exact: self.exact,
        }
    }
}

/// One column of an ordered key, as [`key_prefix`] encodes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyColumn {
    /// The column's type.
    pub column_type: ColumnType,
    /// Whether it may hold NULL (a NOT NULL column spends no byte on it).
    pub nullable: bool,
}

/// A key's prefix ([`key_prefix`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyPrefix {
    /// The prefix bytes as a big-endian number: compare these.
    pub value: u64,
    /// How many of its bytes the key's values wrote (the rest are zero);
    /// all of them when a value ran to the end.
    pub bytes: usize,
    /// Whether the prefix holds the whole key: equal exact prefixes are
    /// equal keys.
    pub exact: bool,
}

/// Writes `value`'s order-preserving bytes into `out`, cut to its length.
/// Returns the bytes written and whether the value ends the prefix (a
/// string, padded to the end; or a number cut short).
fn encode_value(column_type: ColumnType, value: &[u8], out: &mut [u8]) -> (usize, bool) {
    let mut number = [0u8; 8];
    let ordered: &[u8] = match column_type {
        ColumnType::Int { unsigned } => {
            let mut n = u32::from_le_bytes(word(value));
            if !unsigned {
                n ^= 1 << 31;
            }
            number[..4].copy_from_slice(&n.to_be_bytes());
            &number[..4]
        }
        ColumnType::BigInt { unsigned } => {
            let mut n = u64::from_le_bytes(word(value));
            if !unsigned {
                n ^= 1 << 63;
            }
            number.copy_from_slice(&n.to_be_bytes());
            &number
        }
        ColumnType::Double => {
            let mut bits = f64::from_le_bytes(word(value)).to_bits();
            if bits == (-0.0f64).to_bits() {
                bits = 0;
            }
            // Negative numbers: every bit flipped (larger magnitude first);
            // positive: the sign bit set (above every negative).
            bits = if bits >> 63 == 1 {
                !bits
            } else {
                bits | 1 << 63
            };
            number.copy_from_slice(&bits.to_be_bytes());
            &number
        }
        ColumnType::Char(_) | ColumnType::VarChar(_) | ColumnType::VarBinary(_) => {
            let pad = if matches!(column_type, ColumnType::VarBinary(_)) {
                0
            } else {
                b' '
            };
            let taken = value.len().min(out.len());
            out[..taken].copy_from_slice(&value[..taken]);
            out[taken..].fill(pad);
            return (out.len(), true);
        }
    };
    let taken = ordered.len().min(out.len());
    out[..taken].copy_from_slice(&ordered[..taken]);
    (taken, taken < ordered.len())
}

fn word<const N: usize>(value: &[u8]) -> [u8; N] {
    value.try_into().unwrap_or_else(|_| {
        panic!(
            "a {}-byte value compared as a {N}-byte number: values are checked when they enter",
            value.len()
        )
    })
}

fn compare_doubles(a: f64, b: f64) -> Ordering {
    match a.partial_cmp(&b) {
        Some(order) => order,
        // NaN, refused upstream: after everything, equal to itself.
        None => a.is_nan().cmp(&b.is_nan()),
    }
}

/// PAD SPACE: the common prefix by bytes, then the longer value's rest
/// against spaces.
fn compare_padded(a: &[u8], b: &[u8]) -> Ordering {
    let common = a.len().min(b.len());
    match a[..common].cmp(&b[..common]) {
        Ordering::Equal => {}
        order => return order,
    }
    let rest_order = |rest: &[u8]| {
        rest.iter()
            .find(|&&byte| byte != b' ')
            .map_or(Ordering::Equal, |&byte| byte.cmp(&b' '))
    };
    if a.len() > common {
        rest_order(&a[common..])
    } else {
        rest_order(&b[common..]).reverse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stdx::mix::XorShift;

    const SIGNED: ColumnType = ColumnType::BigInt { unsigned: false };

    fn sorted_by(column_type: ColumnType, values: &[Option<Vec<u8>>]) -> Vec<Option<Vec<u8>>> {
        let mut sorted = values.to_vec();
        sorted.sort_by(|a, b| compare(column_type, a.as_deref(), b.as_deref()));
        sorted
    }

    #[test]
    fn integers_compare_as_numbers_signed_or_not_and_null_first() {
        let values = [
            Some(5i64),
            None,
            Some(-3),
            Some(i64::MIN),
            Some(i64::MAX),
            Some(0),
        ];
        let encoded: Vec<Option<Vec<u8>>> = values
            .iter()
            .map(|v| v.map(|v| v.to_le_bytes().to_vec()))
            .collect();
        let sorted = sorted_by(SIGNED, &encoded);
        let decoded: Vec<Option<i64>> = sorted
            .iter()
            .map(|v| v.as_ref().map(|v| i64::from_le_bytes(word(v))))
            .collect();
        assert_eq!(
            decoded,
            vec![
                None,
                Some(i64::MIN),
                Some(-3),
                Some(0),
                Some(5),
                Some(i64::MAX)
            ]
        );
        // Unsigned: the high bit is a large number, not a negative one.
        let unsigned = ColumnType::Int { unsigned: true };
        let big = u32::MAX.to_le_bytes();
        let one = 1u32.to_le_bytes();
        assert_eq!(compare_values(unsigned, &big, &one), Ordering::Greater);
        let signed = ColumnType::Int { unsigned: false };
        assert_eq!(compare_values(signed, &big, &one), Ordering::Less);
    }

    #[test]
    fn doubles_compare_as_numbers_zeros_equal_and_nan_is_refused() {
        let d = |v: f64| v.to_le_bytes();
        let double = ColumnType::Double;
        assert_eq!(compare_values(double, &d(-0.0), &d(0.0)), Ordering::Equal);
        assert_eq!(compare_values(double, &d(-1.5), &d(0.25)), Ordering::Less);
        assert_eq!(
            compare_values(double, &d(f64::INFINITY), &d(1e308)),
            Ordering::Greater
        );
        assert_eq!(
            compare_values(double, &d(f64::NEG_INFINITY), &d(-1e308)),
            Ordering::Less
        );
        assert_eq!(
            check_orderable(double, &d(f64::NAN)),
            Err(ErrorCode::BadValue)
        );
        assert_eq!(check_orderable(double, &d(1.0)), Ok(()));
        assert_eq!(
            check_orderable(ColumnType::VarBinary(4), &[0xff; 4]),
            Ok(())
        );
        // Compared anyway, NaN stays in a total order: last.
        assert_eq!(
            compare_values(double, &d(f64::NAN), &d(f64::INFINITY)),
            Ordering::Greater
        );
        assert_eq!(
            compare_values(double, &d(f64::NAN), &d(f64::NAN)),
            Ordering::Equal
        );
    }

    /// PAD SPACE by its definition: pad the shorter with spaces, then
    /// compare bytes.
    fn padded_model(a: &[u8], b: &[u8]) -> Ordering {
        let length = a.len().max(b.len());
        let pad = |v: &[u8]| {
            let mut padded = v.to_vec();
            padded.resize(length, b' ');
            padded
        };
        pad(a).cmp(&pad(b))
    }

    #[test]
    fn text_ignores_trailing_spaces_and_compares_as_if_padded() {
        let text = ColumnType::VarChar(16);
        assert_eq!(compare_values(text, b"a", b"a   "), Ordering::Equal);
        assert_eq!(compare_values(text, b"a", b"a\x01"), Ordering::Greater);
        assert_eq!(compare_values(text, b"a", b"a!"), Ordering::Less);
        assert_eq!(compare_values(text, b"", b"   "), Ordering::Equal);
        assert_eq!(
            compare_values(text, b"B", b"a"),
            Ordering::Less,
            "binary: case counts"
        );
        // Binary strings: a prefix first, spaces count.
        let binary = ColumnType::VarBinary(16);
        assert_eq!(compare_values(binary, b"a", b"a "), Ordering::Less);
        assert_eq!(compare_values(binary, b"a", b"a\x01"), Ordering::Less);
        // Random strings over a small alphabet around the space: the
        // comparison is the padded model's, and a total order.
        let mut random = XorShift::new(11);
        let alphabet = [0u8, 0x1f, b' ', b'!', b'a', 0xff];
        let draw = |random: &mut XorShift| -> Vec<u8> {
            (0..random.below(6))
                .map(|_| alphabet[random.below(alphabet.len() as u64) as usize])
                .collect()
        };
        for _ in 0..20_000 {
            let (a, b) = (draw(&mut random), draw(&mut random));
            assert_eq!(
                compare_values(text, &a, &b),
                padded_model(&a, &b),
                "{a:?} {b:?}"
            );
            assert_eq!(
                compare_values(text, &a, &b),
                compare_values(text, &b, &a).reverse(),
                "{a:?} {b:?}"
            );
        }
    }

    #[test]
    fn keys_compare_column_by_column() {
        let columns = [ColumnType::Int { unsigned: false }, ColumnType::VarChar(8)];
        let one = 1i32.to_le_bytes();
        let two = 2i32.to_le_bytes();
        let key = |n: &[u8; 4], s: Option<&'static [u8]>| [Some(n.to_vec()), s.map(<[u8]>::to_vec)];
        let compare_owned = |a: &[Option<Vec<u8>>; 2], b: &[Option<Vec<u8>>; 2]| {
            let a: Vec<Option<&[u8]>> = a.iter().map(Option::as_deref).collect();
            let b: Vec<Option<&[u8]>> = b.iter().map(Option::as_deref).collect();
            compare_keys(&columns, &a, &b)
        };
        assert_eq!(
            compare_owned(&key(&one, Some(b"z")), &key(&two, Some(b"a"))),
            Ordering::Less
        );
        assert_eq!(
            compare_owned(&key(&two, None), &key(&two, Some(b""))),
            Ordering::Less
        );
        assert_eq!(
            compare_owned(&key(&two, Some(b"x ")), &key(&two, Some(b"x"))),
            Ordering::Equal
        );
    }

    #[test]
    #[should_panic(expected = "a 3-byte value compared as a 8-byte number")]
    fn a_number_of_the_wrong_width_is_a_broken_invariant() {
        compare_values(SIGNED, &[1, 2, 3], &[0; 8]);
    }

    fn key_columns(types: &[ColumnType], nullable: bool) -> Vec<KeyColumn> {
        types
            .iter()
            .map(|&column_type| KeyColumn {
                column_type,
                nullable,
            })
            .collect()
    }

    /// A random value of `column_type` from a small domain, so that equal
    /// values, shared prefixes and trailing spaces come up often.
    fn draw_value(
        random: &mut XorShift,
        column_type: ColumnType,
        nullable: bool,
    ) -> Option<Vec<u8>> {
        if nullable && random.below(8) == 0 {
            return None;
        }
        let small = |random: &mut XorShift| random.below(7) as i64 - 3;
        Some(match column_type {
            ColumnType::Int { unsigned: false } => {
                let n = match random.below(6) {
                    0 => i32::MIN,
                    1 => i32::MAX,
                    _ => small(random) as i32,
                };
                n.to_le_bytes().to_vec()
            }
            ColumnType::Int { unsigned: true } => {
                let n = [random.below(5) as u32, u32::MAX, 1 << 31][random.below(3) as usize];
                n.to_le_bytes().to_vec()
            }
            ColumnType::BigInt { unsigned: false } => {
                let n = [small(random), i64::MIN, i64::MAX, 1 << 40][random.below(4) as usize];
                n.to_le_bytes().to_vec()
            }
            ColumnType::BigInt { unsigned: true } => {
                let n = [random.below(5), u64::MAX, 1 << 63][random.below(3) as usize];
                n.to_le_bytes().to_vec()
            }
            ColumnType::Double => {
                let choices = [
                    -0.0,
                    0.0,
                    1.5,
                    -1.5,
                    f64::INFINITY,
                    f64::NEG_INFINITY,
                    1e-300,
                    -1e300,
                    small(random) as f64,
                ];
                choices[random.below(choices.len() as u64) as usize]
                    .to_le_bytes()
                    .to_vec()
            }
            ColumnType::Char(_) | ColumnType::VarChar(_) | ColumnType::VarBinary(_) => {
                let alphabet = [0u8, 0x1f, b' ', b'!', b'a', 0xff];
                (0..random.below(12))
                    .map(|_| alphabet[random.below(alphabet.len() as u64) as usize])
                    .collect()
            }
        })
    }

    #[test]
    fn key_prefixes_keep_the_order_of_keys() {
        let shapes: [&[ColumnType]; 7] = [
            &[ColumnType::Int { unsigned: false }],
            &[ColumnType::BigInt { unsigned: false }],
            &[
                ColumnType::BigInt { unsigned: true },
                ColumnType::Int { unsigned: false },
            ],
            &[ColumnType::Double],
            &[ColumnType::VarChar(16)],
            &[
                ColumnType::Int { unsigned: true },
                ColumnType::VarBinary(16),
            ],
            &[ColumnType::Char(4), ColumnType::Int { unsigned: false }],
        ];
        let mut random = XorShift::new(5);
        for shape in shapes {
            for nullable in [false, true] {
                let columns = key_columns(shape, nullable);
                let mut exact_pairs = 0;
                for _ in 0..20_000 {
                    let a: Vec<Option<Vec<u8>>> = shape
                        .iter()
                        .map(|&t| draw_value(&mut random, t, nullable))
                        .collect();
                    let b: Vec<Option<Vec<u8>>> = shape
                        .iter()
                        .map(|&t| draw_value(&mut random, t, nullable))
                        .collect();
                    let a: Vec<Option<&[u8]>> = a.iter().map(Option::as_deref).collect();
                    let b: Vec<Option<&[u8]>> = b.iter().map(Option::as_deref).collect();
                    let order = compare_keys(shape, &a, &b);
                    let (pa, pb) = (key_prefix(&columns, &a), key_prefix(&columns, &b));
                    if pa.value != pb.value {
                        assert_eq!(
                            order,
                            pa.value.cmp(&pb.value),
                            "{shape:?} {a:?} {b:?}: prefixes {pa:?} {pb:?}"
                        );
                    } else if pa.exact && pb.exact {
                        exact_pairs += 1;
                        assert_eq!(order, Ordering::Equal, "{shape:?} {a:?} {b:?}");
                    }
                }
                if shape == [ColumnType::Int { unsigned: false }] {
                    assert!(exact_pairs > 0, "a lone INT's prefix is exact");
                }
            }
        }
    }

    #[test]
    fn a_prefix_is_exact_only_when_it_holds_the_whole_key() {
        let int = ColumnType::Int { unsigned: false };
        let big = ColumnType::BigInt { unsigned: true };
        let one = 1i32.to_le_bytes();
        let long = 1u64.to_le_bytes();
        let prefix = |types: &[ColumnType], nullable: bool, key: &[Option<&[u8]>]| {
            key_prefix(&key_columns(types, nullable), key)
        };
        assert!(prefix(&[int], false, &[Some(&one)]).exact);
        assert!(prefix(&[int], true, &[Some(&one)]).exact, "5 bytes");
        assert!(prefix(&[int, int], false, &[Some(&one), Some(&one)]).exact);
        assert!(
            !prefix(&[int, int], true, &[Some(&one), Some(&one)]).exact,
            "10 bytes"
        );
        assert!(
            prefix(&[int, int], true, &[None, Some(&one)]).exact,
            "NULL is one byte"
        );
        assert!(prefix(&[big], false, &[Some(&long)]).exact);
        assert!(!prefix(&[big], true, &[Some(&long)]).exact, "9 bytes");
        assert!(!prefix(&[ColumnType::VarChar(2)], false, &[Some(b"ab")]).exact);
        // A bound on the first column of two: its bytes, and exact for what
        // it gives.
        let bound = prefix(&[int, int], false, &[Some(&one)]);
        assert_eq!((bound.bytes, bound.exact), (4, true));
        assert_eq!(bound.value, 0x8000_0001_0000_0000);
        // Doubles: -0 is +0, negatives below positives.
        let d = |v: f64| prefix(&[ColumnType::Double], false, &[Some(&v.to_le_bytes())]).value;
        assert_eq!(d(-0.0), d(0.0));
        assert!(d(-2.0) < d(-1.0) && d(-1.0) < d(0.0) && d(0.0) < d(f64::MIN_POSITIVE));
    }

    #[test]
    #[should_panic(expected = "NULL in a NOT NULL key column")]
    fn a_null_in_a_not_null_key_column_is_a_broken_invariant() {
        let columns = key_columns(&[ColumnType::Int { unsigned: false }], false);
        key_prefix(&columns, &[None]);
    }
}
