//! The frame header (32 bytes, laid out in `codec`'s module doc): parsing
//! and checking it ([`parse_frame_header`], [`verify_frame`] with its
//! CRC32C over bytes 16.. of the frame), and writing it around the signals
//! of an outgoing frame ([`begin_frame`], then [`finish_frame`]).

use super::{Reader, WireError};
use crate::ids::NodeId;

/// "TSRA" as a little-endian u32.
pub const FRAME_MAGIC: u32 = u32::from_le_bytes(*b"TSRA");
/// Current frame version: 2 when the signal table renumbered the signals
/// and moved the attr flag of TCKEYREQ and LQHKEYREQ next to its section;
/// 3 since admission is authenticated (API_REGREQ carries the API node's
/// token, and data nodes open their links with the LINK_HELLO handshake),
/// so a process of an older build is refused at its first frame.
pub const FRAME_VERSION: u16 = 3;
/// Bytes of the frame header.
pub const FRAME_HEADER_BYTES: usize = 32;
/// Largest frame accepted; a larger length field closes the connection.
pub const MAX_FRAME_BYTES: usize = 4 << 20;

/// A decoded frame header.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct FrameHeader {
    /// Total frame bytes, header included.
    pub frame_bytes: u32,
    /// CRC32C of bytes 16..frame_bytes.
    pub checksum: u32,
    /// Sending node.
    pub sender: NodeId,
    /// Signals in the frame.
    pub signal_count: u16,
    /// Sender's incarnation (rises on every start of the node).
    pub incarnation: u32,
    /// Per-connection sequence number.
    pub sequence: u64,
}

/// Parses a frame header from the start of `bytes`. `Ok(None)` when fewer
/// than 32 bytes are there yet.
pub fn parse_frame_header(bytes: &[u8]) -> Result<Option<FrameHeader>, WireError> {
    if bytes.len() < FRAME_HEADER_BYTES {
        return Ok(None);
    }
    let mut reader = Reader::new(&bytes[..FRAME_HEADER_BYTES]);
    if reader.u32()? != FRAME_MAGIC {
        return Err(WireError::BadMagic);
    }
    let version = reader.u16()?;
    if version != FRAME_VERSION {
        return Err(WireError::BadVersion(version));
    }
    let header_bytes = reader.u16()?;
    if header_bytes as usize != FRAME_HEADER_BYTES {
        return Err(WireError::BadHeaderLength(header_bytes));
    }
    let frame_bytes = reader.u32()?;
    if (frame_bytes as usize) < FRAME_HEADER_BYTES || frame_bytes as usize > MAX_FRAME_BYTES {
        return Err(WireError::BadFrameLength(frame_bytes));
    }
    Ok(Some(FrameHeader {
        frame_bytes,
        checksum: reader.u32()?,
        sender: NodeId(reader.u16()?),
        signal_count: reader.u16()?,
        incarnation: reader.u32()?,
        sequence: reader.u64()?,
    }))
}

/// Checks a whole frame's CRC; returns its signal body.
pub fn verify_frame<'a>(frame: &'a [u8], header: &FrameHeader) -> Result<&'a [u8], WireError> {
    if frame.len() != header.frame_bytes as usize {
        return Err(WireError::BadFrameLength(frame.len() as u32));
    }
    if stdx::crc::crc32c(&frame[16..]) != header.checksum {
        return Err(WireError::BadChecksum);
    }
    Ok(&frame[FRAME_HEADER_BYTES..])
}

/// Starts a frame at the end of `out`; returns its start offset for [`finish_frame`].
pub fn begin_frame(out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0u8; FRAME_HEADER_BYTES]);
    start
}

/// Fills in the header of the frame begun at `start`, now holding
/// `signal_count` signals.
pub fn finish_frame(
    out: &mut [u8],
    start: usize,
    sender: NodeId,
    incarnation: u32,
    sequence: u64,
    signal_count: u16,
) {
    let frame_bytes = out.len() - start;
    assert!(
        frame_bytes <= MAX_FRAME_BYTES,
        "frame of {frame_bytes} bytes exceeds MAX_FRAME_BYTES: the sender must split earlier"
    );
    let frame = &mut out[start..];
    frame[0..4].copy_from_slice(&FRAME_MAGIC.to_le_bytes());
    frame[4..6].copy_from_slice(&FRAME_VERSION.to_le_bytes());
    frame[6..8].copy_from_slice(&(FRAME_HEADER_BYTES as u16).to_le_bytes());
    frame[8..12].copy_from_slice(&(frame_bytes as u32).to_le_bytes());
    frame[16..18].copy_from_slice(&sender.0.to_le_bytes());
    frame[18..20].copy_from_slice(&signal_count.to_le_bytes());
    frame[20..24].copy_from_slice(&incarnation.to_le_bytes());
    frame[24..32].copy_from_slice(&sequence.to_le_bytes());
    let checksum = stdx::crc::crc32c(&frame[16..]);
    frame[12..16].copy_from_slice(&checksum.to_le_bytes());
}
