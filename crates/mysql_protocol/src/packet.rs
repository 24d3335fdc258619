//! packet: framing. A logical packet travels as one or more frames, each a
//! 4-byte header (3-byte little-endian payload length, 1-byte sequence id)
//! and its payload. A frame of exactly `MAX_FRAME_PAYLOAD` bytes means the
//! packet continues in the next frame; the packet ends with a shorter frame,
//! possibly empty. `take_packet` reads packets out of a receive buffer and
//! `PacketWriter` writes them into a send buffer.

use std::borrow::Cow;

use crate::error::WireError;

/// The largest payload one frame carries; a frame this long is continued.
pub const MAX_FRAME_PAYLOAD: usize = 0xFF_FFFF;

/// Bytes of a frame header.
const HEADER_LENGTH: usize = 4;

/// One logical packet taken from the front of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<'a> {
    /// The sequence id of the packet's last frame: the reply's first frame
    /// carries this plus one.
    pub sequence: u8,
    /// The payload: borrowed from the buffer for a single-frame packet,
    /// joined into an owned vector for a multi-frame one.
    pub payload: Cow<'a, [u8]>,
    /// How many bytes of the buffer the packet took, headers included: the
    /// caller drops these before taking the next packet.
    pub consumed: usize,
}

/// Takes the logical packet at the front of `buffer`.
///
/// `Ok(None)` means the buffer does not yet hold the whole packet: read more
/// bytes and call again. `Err(TooLarge)` comes as soon as the announced
/// frame lengths add up to more than `max_packet`, without waiting for the
/// bytes, so a client cannot make the server buffer a huge packet. Frames
/// of one packet must carry consecutive (wrapping) sequence ids, else
/// `Malformed`; the first frame's id is not checked here, because only the
/// caller knows which id it expects.
pub fn take_packet(buffer: &[u8], max_packet: usize) -> Result<Option<Packet<'_>>, WireError> {
    let mut offset = 0usize;
    let mut total_payload = 0usize;
    let mut frame_count = 0usize;
    let mut expected_sequence: Option<u8> = None;
    let last_sequence = loop {
        let Some(header) = buffer.get(offset..offset + HEADER_LENGTH) else {
            return Ok(None);
        };
        let length =
            usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
        let sequence = header[3];
        if let Some(expected) = expected_sequence {
            if sequence != expected {
                return Err(WireError::Malformed(format!(
                    "frame sequence id {sequence} where {expected} was expected"
                )));
            }
        }
        total_payload += length;
        if total_payload > max_packet {
            return Err(WireError::TooLarge {
                size: total_payload,
                limit: max_packet,
            });
        }
        let end = offset + HEADER_LENGTH + length;
        if buffer.len() < end {
            return Ok(None);
        }
        frame_count += 1;
        offset = end;
        if length < MAX_FRAME_PAYLOAD {
            break sequence;
        }
        expected_sequence = Some(sequence.wrapping_add(1));
    };

    let payload = if frame_count == 1 {
        Cow::Borrowed(&buffer[HEADER_LENGTH..offset])
    } else {
        // The frames were validated above; walk them again to join them.
        let mut joined = Vec::with_capacity(total_payload);
        let mut frame_start = 0usize;
        while frame_start < offset {
            let header = &buffer[frame_start..frame_start + HEADER_LENGTH];
            let length =
                usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
            let payload_start = frame_start + HEADER_LENGTH;
            joined.extend_from_slice(&buffer[payload_start..payload_start + length]);
            frame_start = payload_start + length;
        }
        Cow::Owned(joined)
    };
    Ok(Some(Packet {
        sequence: last_sequence,
        payload,
        consumed: offset,
    }))
}

/// Writes packets into a caller's buffer, numbering frames with sequence
/// ids. One writer lives for one exchange (a command and its response);
/// the caller resets the id for the next command with `set_sequence`.
#[derive(Debug, Clone)]
pub struct PacketWriter {
    sequence: u8,
}

impl PacketWriter {
    /// A writer whose first frame gets sequence id `sequence`.
    pub fn new(sequence: u8) -> PacketWriter {
        PacketWriter { sequence }
    }

    /// The sequence id the next frame will get.
    pub fn sequence(&self) -> u8 {
        self.sequence
    }

    /// Sets the sequence id of the next frame.
    pub fn set_sequence(&mut self, sequence: u8) {
        self.sequence = sequence;
    }

    /// Reserves a header at the end of `out` and returns its offset; the
    /// caller appends the payload and then calls `finish` with the offset.
    /// Encoding straight into the send buffer avoids a payload copy.
    pub fn begin(&mut self, out: &mut Vec<u8>) -> usize {
        let start = out.len();
        out.extend_from_slice(&[0; HEADER_LENGTH]);
        start
    }

    /// Fills the header reserved at `start` for the payload that follows it
    /// (to the end of `out`). A payload of `MAX_FRAME_PAYLOAD` bytes or more
    /// is split in place into full frames and a final shorter (possibly
    /// empty) frame, each with the next sequence id.
    ///
    /// # Panics
    ///
    /// When `start` is not an offset `begin` returned for this buffer (the
    /// header does not fit): a bug in the caller, not bad input.
    pub fn finish(&mut self, out: &mut Vec<u8>, start: usize) {
        assert!(
            start + HEADER_LENGTH <= out.len(),
            "PacketWriter::finish: no header reserved at offset {start}"
        );
        let payload_length = out.len() - start - HEADER_LENGTH;
        if payload_length < MAX_FRAME_PAYLOAD {
            write_header(out, start, payload_length, self.sequence);
            self.sequence = self.sequence.wrapping_add(1);
            return;
        }
        // Every full frame is followed by another, so the last frame holds
        // the remainder, which is empty when the payload is an exact
        // multiple of the frame size.
        let frame_count = payload_length / MAX_FRAME_PAYLOAD + 1;
        out.resize(out.len() + (frame_count - 1) * HEADER_LENGTH, 0);
        // Move frames from the last to the first: each one moves forward by
        // its index times a header, onto bytes already moved or spare, so
        // nothing is overwritten before it has moved.
        for index in (0..frame_count).rev() {
            let source = start + HEADER_LENGTH + index * MAX_FRAME_PAYLOAD;
            let length = (payload_length - index * MAX_FRAME_PAYLOAD).min(MAX_FRAME_PAYLOAD);
            let header = start + index * (MAX_FRAME_PAYLOAD + HEADER_LENGTH);
            out.copy_within(source..source + length, header + HEADER_LENGTH);
            let sequence = self.sequence.wrapping_add(index as u8);
            write_header(out, header, length, sequence);
        }
        self.sequence = self.sequence.wrapping_add(frame_count as u8);
    }

    /// Writes `payload` as one logical packet (split into frames as needed).
    pub fn packet(&mut self, out: &mut Vec<u8>, payload: &[u8]) {
        let start = self.begin(out);
        out.extend_from_slice(payload);
        self.finish(out, start);
    }
}

/// Writes a frame header at `offset`; `length` is below 2^24.
fn write_header(out: &mut [u8], offset: usize, length: usize, sequence: u8) {
    let length = (length as u32).to_le_bytes();
    out[offset..offset + HEADER_LENGTH]
        .copy_from_slice(&[length[0], length[1], length[2], sequence]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_frame_borrows_and_reports_consumed() {
        let buffer = [3, 0, 0, 7, b'a', b'b', b'c', 0xAA];
        let packet = take_packet(&buffer, 100).unwrap().unwrap();
        assert_eq!(packet.sequence, 7);
        assert!(matches!(packet.payload, Cow::Borrowed(b"abc")));
        assert_eq!(packet.consumed, 7);
    }

    #[test]
    fn incomplete_buffers_wait() {
        let buffer = [3, 0, 0, 7, b'a', b'b', b'c'];
        for end in 0..buffer.len() {
            assert_eq!(take_packet(&buffer[..end], 100), Ok(None));
        }
    }

    #[test]
    fn too_large_is_reported_before_the_bytes_arrive() {
        assert_eq!(
            take_packet(&[0x10, 0, 0, 0], 15),
            Err(WireError::TooLarge {
                size: 16,
                limit: 15
            })
        );
        assert!(take_packet(&[0x0F, 0, 0, 0], 15).unwrap().is_none());
    }

    #[test]
    fn empty_packet() {
        let mut out = Vec::new();
        let mut writer = PacketWriter::new(255);
        writer.packet(&mut out, &[]);
        assert_eq!(out, [0, 0, 0, 255]);
        assert_eq!(writer.sequence(), 0);
        let packet = take_packet(&out, 0).unwrap().unwrap();
        assert_eq!(packet.payload.len(), 0);
        assert_eq!(packet.consumed, 4);
    }

    #[test]
    fn writer_counts_sequence_ids() {
        let mut out = Vec::new();
        let mut writer = PacketWriter::new(1);
        let start = writer.begin(&mut out);
        out.extend_from_slice(b"hi");
        writer.finish(&mut out, start);
        writer.packet(&mut out, b"x");
        assert_eq!(out, [2, 0, 0, 1, b'h', b'i', 1, 0, 0, 2, b'x']);
        assert_eq!(writer.sequence(), 3);
        writer.set_sequence(9);
        assert_eq!(writer.sequence(), 9);
    }
}
