//! The little-endian fields every frame, signal and section is made of:
//! [`Writer`] appends them to a vector, [`Reader`] takes them from a slice
//! with every read bounds-checked, and [`WireError`] says why bytes could
//! not be decoded (or a signal encoded).

use crate::section::MAX_SECTION_BYTES;
use std::fmt;

/// Why bytes could not be decoded (or a signal encoded).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WireError {
    /// Fewer bytes than a field needs.
    Truncated,
    /// The frame does not start with the magic.
    BadMagic,
    /// Unknown frame version.
    BadVersion(u16),
    /// Header length field is not 32.
    BadHeaderLength(u16),
    /// The frame length is out of bounds.
    BadFrameLength(u32),
    /// CRC32C mismatch.
    BadChecksum,
    /// Unknown signal number.
    UnknownSignal(u16),
    /// A signal this connection may not carry (wrong direction or internal).
    NotAllowed(u16),
    /// A field holds an invalid value.
    BadField(&'static str),
    /// The section pool is exhausted; retry the same signal later.
    OutOfSections,
    /// The signal is node-internal and has no wire form.
    NotWireSignal(&'static str),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated => write!(f, "truncated"),
            WireError::BadMagic => write!(f, "bad magic"),
            WireError::BadVersion(v) => write!(f, "unsupported frame version {v}"),
            WireError::BadHeaderLength(v) => write!(f, "bad header length {v}"),
            WireError::BadFrameLength(v) => write!(f, "bad frame length {v}"),
            WireError::BadChecksum => write!(f, "CRC32C mismatch"),
            WireError::UnknownSignal(n) => write!(f, "unknown signal number {n}"),
            WireError::NotAllowed(n) => write!(f, "signal {n} not allowed on this connection"),
            WireError::BadField(name) => write!(f, "invalid field {name}"),
            WireError::OutOfSections => write!(f, "out of section memory"),
            WireError::NotWireSignal(name) => write!(f, "{name} is node-internal"),
        }
    }
}

impl std::error::Error for WireError {}

/// Appends little-endian fields to a vector.
pub struct Writer<'a> {
    out: &'a mut Vec<u8>,
}

impl<'a> Writer<'a> {
    /// Appends to `out`.
    pub fn new(out: &'a mut Vec<u8>) -> Writer<'a> {
        Writer { out }
    }
    /// Bytes in the vector.
    pub fn position(&self) -> usize {
        self.out.len()
    }
    /// u8.
    pub fn u8(&mut self, value: u8) {
        self.out.push(value);
    }
    /// u16 LE.
    pub fn u16(&mut self, value: u16) {
        self.out.extend_from_slice(&value.to_le_bytes());
    }
    /// u32 LE.
    pub fn u32(&mut self, value: u32) {
        self.out.extend_from_slice(&value.to_le_bytes());
    }
    /// u64 LE.
    pub fn u64(&mut self, value: u64) {
        self.out.extend_from_slice(&value.to_le_bytes());
    }
    /// Bytes of a length both sides know (a fixed-size field).
    pub fn fixed(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }
    /// u16 length then bytes (names; at most 65535 bytes).
    pub fn bytes16(&mut self, bytes: &[u8]) {
        let length = bytes.len().min(u16::MAX as usize);
        self.u16(length as u16);
        self.out.extend_from_slice(&bytes[..length]);
    }
    /// u32 length then bytes (sections).
    pub fn bytes32(&mut self, bytes: &[u8]) {
        self.u32(bytes.len() as u32);
        self.out.extend_from_slice(bytes);
    }
    /// u32 length then whatever `fill` writes (a section built in place:
    /// a table definition or a partition map, without a copy).
    pub fn section_with(&mut self, fill: impl FnOnce(&mut Writer<'_>)) {
        let at = self.out.len();
        self.u32(0);
        fill(&mut Writer::new(self.out));
        let length = self.out.len() - at - 4;
        assert!(
            length <= MAX_SECTION_BYTES,
            "a section of {length} bytes exceeds MAX_SECTION_BYTES: no receiver would take it"
        );
        self.out[at..at + 4].copy_from_slice(&(length as u32).to_le_bytes());
    }
}

/// Reads little-endian fields from a slice; every read checks bounds.
pub struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Reads `bytes`.
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes }
    }
    /// True when all bytes are consumed.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
    fn take(&mut self, count: usize) -> Result<&'a [u8], WireError> {
        if self.bytes.len() < count {
            return Err(WireError::Truncated);
        }
        let (head, rest) = self.bytes.split_at(count);
        self.bytes = rest;
        Ok(head)
    }
    /// u8.
    pub fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1)?[0])
    }
    /// u16 LE.
    pub fn u16(&mut self) -> Result<u16, WireError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    /// u32 LE.
    pub fn u32(&mut self) -> Result<u32, WireError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// u64 LE.
    pub fn u64(&mut self) -> Result<u64, WireError> {
        let b = self.take(8)?;
        let mut array = [0u8; 8];
        array.copy_from_slice(b);
        Ok(u64::from_le_bytes(array))
    }
    /// `N` bytes (a fixed-size field).
    pub fn fixed<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut array = [0u8; N];
        array.copy_from_slice(self.take(N)?);
        Ok(array)
    }
    /// u16 length then bytes.
    pub fn bytes16(&mut self) -> Result<&'a [u8], WireError> {
        let length = self.u16()? as usize;
        self.take(length)
    }
    /// u32 length then bytes.
    pub fn bytes32(&mut self) -> Result<&'a [u8], WireError> {
        let length = self.u32()? as usize;
        if length > MAX_SECTION_BYTES {
            return Err(WireError::BadField("section length"));
        }
        self.take(length)
    }
    /// u16 length then UTF-8.
    pub fn string16(&mut self) -> Result<String, WireError> {
        let bytes = self.bytes16()?;
        String::from_utf8(bytes.to_vec()).map_err(|_| WireError::BadField("utf-8 string"))
    }
}
