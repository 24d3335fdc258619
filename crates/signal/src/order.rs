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
}
