//! The bounds of an index scan: the `bounds` section of an
//! [`IndexScanReq`](crate::signals::IndexScanReq), pure code over bytes.
//!
//! Three keys in a row: the low bound, the high bound and the resume key.
//! Each is a u16 byte length (little-endian) and that many bytes of
//! attribute entries (`attr`) for a leading run of the index's columns in
//! index order; an empty key is no bound (and, for the resume key, no
//! resume). A bound on the first k columns of an index compares with a
//! row's first k values only: `a >= 5` on an index over (a, b) is the low
//! key (a = 5), inclusive.

use crate::error::ErrorCode;

/// The three keys of a `bounds` section, each attribute entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanBounds<'a> {
    /// The low bound (empty: none).
    pub low: &'a [u8],
    /// The high bound (empty: none).
    pub high: &'a [u8],
    /// The key of the last row returned, to resume after (empty: none).
    pub resume: &'a [u8],
}

/// Appends the section for `bounds` to `out`. A key over u16::MAX bytes
/// is a `BadRequest` (no index key is that long).
pub fn encode(bounds: ScanBounds<'_>, out: &mut Vec<u8>) -> Result<(), ErrorCode> {
    for key in [bounds.low, bounds.high, bounds.resume] {
        let length = u16::try_from(key.len()).map_err(|_| ErrorCode::BadRequest)?;
        out.extend_from_slice(&length.to_le_bytes());
        out.extend_from_slice(key);
    }
    Ok(())
}

/// Splits a `bounds` section into its three keys; `BadRequest` when its
/// lengths do not add up to the section (the entries themselves are
/// checked against the index by the receiver).
pub fn decode(section: &[u8]) -> Result<ScanBounds<'_>, ErrorCode> {
    let mut rest = section;
    let mut next = || -> Result<&[u8], ErrorCode> {
        if rest.len() < 2 {
            return Err(ErrorCode::BadRequest);
        }
        let length = u16::from_le_bytes([rest[0], rest[1]]) as usize;
        let (key, after) = rest[2..]
            .split_at_checked(length)
            .ok_or(ErrorCode::BadRequest)?;
        rest = after;
        Ok(key)
    };
    let (low, high, resume) = (next()?, next()?, next()?);
    if !rest.is_empty() {
        return Err(ErrorCode::BadRequest);
    }
    Ok(ScanBounds { low, high, resume })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_round_trip_and_bad_lengths_are_refused() {
        let bounds = ScanBounds {
            low: &[1, 2, 3],
            high: &[],
            resume: &[9; 40],
        };
        let mut section = Vec::new();
        encode(bounds, &mut section).unwrap();
        assert_eq!(decode(&section), Ok(bounds));
        for cut in 0..section.len() {
            assert_eq!(
                decode(&section[..cut]),
                Err(ErrorCode::BadRequest),
                "cut at {cut}"
            );
        }
        section.push(0);
        assert_eq!(
            decode(&section),
            Err(ErrorCode::BadRequest),
            "a trailing byte"
        );
        let long = vec![0u8; 70_000];
        let too_long = ScanBounds {
            low: &long,
            high: &[],
            resume: &[],
        };
        assert_eq!(
            encode(too_long, &mut Vec::new()),
            Err(ErrorCode::BadRequest)
        );
    }
}
