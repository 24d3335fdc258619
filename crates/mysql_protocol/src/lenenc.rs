//! lenenc: the protocol's primitive encodings: length-encoded integers and
//! strings (writers), and `Reader`, a bounds-checked little-endian cursor
//! over a payload that every decoder in this crate reads through.

use crate::error::WireError;

/// The first byte of a length-encoded integer that means NULL (in text rows)
/// instead of a number.
pub const LENENC_NULL: u8 = 0xFB;

/// Appends `value` as a length-encoded integer: one byte below 251, else a
/// marker byte (0xFC, 0xFD, 0xFE) and 2, 3 or 8 little-endian bytes.
pub fn put_lenenc_int(out: &mut Vec<u8>, value: u64) {
    if value < 251 {
        out.push(value as u8);
    } else if value <= 0xFFFF {
        out.push(0xFC);
        out.extend_from_slice(&(value as u16).to_le_bytes());
    } else if value <= 0xFF_FFFF {
        out.push(0xFD);
        out.extend_from_slice(&(value as u32).to_le_bytes()[..3]);
    } else {
        out.push(0xFE);
        out.extend_from_slice(&value.to_le_bytes());
    }
}

/// Appends `bytes` as a length-encoded string: its length as a
/// length-encoded integer, then the bytes.
pub fn put_lenenc_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_lenenc_int(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A cursor over a payload. Every read checks bounds and returns
/// `WireError::Truncated` instead of panicking; reads of byte runs borrow
/// from the payload.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes }
    }

    /// The next `count` bytes.
    pub fn bytes(&mut self, count: usize) -> Result<&'a [u8], WireError> {
        if count > self.bytes.len() {
            return Err(WireError::Truncated("fixed-length bytes"));
        }
        let (head, tail) = self.bytes.split_at(count);
        self.bytes = tail;
        Ok(head)
    }

    /// The next `N` bytes as an array, for the fixed-size integer readers.
    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], WireError> {
        if N > self.bytes.len() {
            return Err(WireError::Truncated(what));
        }
        let (head, tail) = self.bytes.split_at(N);
        self.bytes = tail;
        let mut array = [0u8; N];
        array.copy_from_slice(head);
        Ok(array)
    }

    /// Skips `count` bytes (fillers).
    pub fn skip(&mut self, count: usize) -> Result<(), WireError> {
        self.bytes(count).map(|_| ())
    }

    /// A 1-byte integer.
    pub fn u8(&mut self) -> Result<u8, WireError> {
        let [byte] = self.array::<1>("1-byte integer")?;
        Ok(byte)
    }

    /// A 2-byte little-endian integer.
    pub fn u16(&mut self) -> Result<u16, WireError> {
        self.array("2-byte integer").map(u16::from_le_bytes)
    }

    /// A 3-byte little-endian integer.
    pub fn u24(&mut self) -> Result<u32, WireError> {
        let [low, middle, high] = self.array::<3>("3-byte integer")?;
        Ok(u32::from_le_bytes([low, middle, high, 0]))
    }

    /// A 4-byte little-endian integer.
    pub fn u32(&mut self) -> Result<u32, WireError> {
        self.array("4-byte integer").map(u32::from_le_bytes)
    }

    /// An 8-byte little-endian integer.
    pub fn u64(&mut self) -> Result<u64, WireError> {
        self.array("8-byte integer").map(u64::from_le_bytes)
    }

    /// A length-encoded integer; `None` for the NULL marker 0xFB. The byte
    /// 0xFF (an ERR packet's header, never a length) is `Malformed`.
    pub fn lenenc_int(&mut self) -> Result<Option<u64>, WireError> {
        let first = self.u8()?;
        match first {
            0..=0xFA => Ok(Some(u64::from(first))),
            LENENC_NULL => Ok(None),
            0xFC => self.u16().map(|value| Some(u64::from(value))),
            0xFD => self.u24().map(|value| Some(u64::from(value))),
            0xFE => self.u64().map(Some),
            0xFF => Err(WireError::Malformed(
                "0xFF is not a length-encoded integer".to_string(),
            )),
        }
    }

    /// A length-encoded string. NULL (0xFB) is `Malformed`: callers that
    /// accept NULL read `lenenc_int` themselves.
    pub fn lenenc_bytes(&mut self) -> Result<&'a [u8], WireError> {
        let Some(length) = self.lenenc_int()? else {
            return Err(WireError::Malformed(
                "NULL where a length-encoded string was expected".to_string(),
            ));
        };
        // A length beyond usize cannot fit in the payload either.
        let length = usize::try_from(length).unwrap_or(usize::MAX);
        if length > self.bytes.len() {
            return Err(WireError::Truncated("length-encoded string"));
        }
        self.bytes(length)
    }

    /// The bytes up to the next NUL, which is consumed and not returned.
    pub fn null_terminated(&mut self) -> Result<&'a [u8], WireError> {
        let Some(end) = self.bytes.iter().position(|&byte| byte == 0) else {
            return Err(WireError::Truncated("NUL-terminated string"));
        };
        let head = &self.bytes[..end];
        self.bytes = &self.bytes[end + 1..];
        Ok(head)
    }

    /// The bytes up to the next NUL (consumed), or all remaining bytes when
    /// there is no NUL: for a packet's last string, which some clients send
    /// without its terminator (the MySQL server accepts that too).
    pub fn null_terminated_or_rest(&mut self) -> &'a [u8] {
        match self.null_terminated() {
            Ok(head) => head,
            Err(_) => self.rest(),
        }
    }

    /// All remaining bytes; the reader is empty afterwards.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.bytes)
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// How many bytes are left.
    pub fn remaining(&self) -> usize {
        self.bytes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenenc_int_encodings_match_the_protocol() {
        let cases: [(u64, &[u8]); 8] = [
            (0, &[0x00]),
            (250, &[0xFA]),
            (251, &[0xFC, 0xFB, 0x00]),
            (0xFFFF, &[0xFC, 0xFF, 0xFF]),
            (0x10000, &[0xFD, 0x00, 0x00, 0x01]),
            (0xFF_FFFF, &[0xFD, 0xFF, 0xFF, 0xFF]),
            (0x100_0000, &[0xFE, 0, 0, 0, 1, 0, 0, 0, 0]),
            (
                u64::MAX,
                &[0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF],
            ),
        ];
        for (value, expected) in cases {
            let mut out = Vec::new();
            put_lenenc_int(&mut out, value);
            assert_eq!(out, expected, "encoding {value}");
            let mut reader = Reader::new(&out);
            assert_eq!(reader.lenenc_int(), Ok(Some(value)));
            assert!(reader.is_empty());
        }
    }

    #[test]
    fn lenenc_null_and_bad_first_byte() {
        assert_eq!(Reader::new(&[0xFB]).lenenc_int(), Ok(None));
        assert!(matches!(
            Reader::new(&[0xFF]).lenenc_int(),
            Err(WireError::Malformed(_))
        ));
        assert!(matches!(
            Reader::new(&[0xFB]).lenenc_bytes(),
            Err(WireError::Malformed(_))
        ));
        assert_eq!(
            Reader::new(&[0xFC, 0x01]).lenenc_int(),
            Err(WireError::Truncated("2-byte integer"))
        );
        let huge = [0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 1, 2];
        assert!(matches!(
            Reader::new(&huge).lenenc_bytes(),
            Err(WireError::Truncated(_))
        ));
    }

    #[test]
    fn reader_reads_little_endian_and_strings() {
        let bytes = [
            1, 2, 0, 3, 0, 0, 4, 0, 0, 0, b'a', b'b', 0, 2, b'x', b'y', b'z',
        ];
        let mut reader = Reader::new(&bytes);
        assert_eq!(reader.u8(), Ok(1));
        assert_eq!(reader.u16(), Ok(2));
        assert_eq!(reader.u24(), Ok(3));
        assert_eq!(reader.u32(), Ok(4));
        assert_eq!(reader.null_terminated(), Ok(&b"ab"[..]));
        assert_eq!(reader.lenenc_bytes(), Ok(&b"xy"[..]));
        assert_eq!(reader.remaining(), 1);
        assert!(reader.null_terminated().is_err());
        assert_eq!(reader.null_terminated_or_rest(), b"z");
        assert!(reader.is_empty());
        assert_eq!(reader.u64(), Err(WireError::Truncated("8-byte integer")));
        assert!(reader.bytes(1).is_err());
        assert_eq!(reader.bytes(0), Ok(&b""[..]));
    }
}
