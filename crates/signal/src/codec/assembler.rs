//! Reassembles frames from a byte stream: bytes arrive in arbitrary pieces,
//! frames leave whole and verified (magic, version, length, CRC32C, sequence).
//!
//! Both the data node's receive thread (non-blocking sockets) and the
//! client's receive thread (blocking) feed bytes in and take frames out.

use crate::codec::{self, FrameHeader, WireError};
use std::io::Read;

/// A frame-boundary-aware receive buffer for one connection.
pub struct FrameAssembler {
    buffer: Vec<u8>,
    start: usize,
    end: usize,
    expected_sequence: u64,
    peer: Option<(u16, u32)>,
    /// Largest frame taken: `MAX_FRAME_BYTES`, or less while a connection
    /// has not said who it is (`set_frame_limit`).
    frame_limit: usize,
}

/// Why a connection must be closed.
#[derive(Debug, PartialEq, Eq)]
pub enum StreamError {
    /// The bytes are not valid frames.
    Wire(WireError),
    /// A frame's sequence number is not the next one.
    BadSequence {
        /// Expected.
        expected: u64,
        /// Found.
        found: u64,
    },
    /// A frame came from another node or incarnation than the first frame.
    PeerChanged,
    /// A frame is larger than the connection's limit for now
    /// ([`FrameAssembler::set_frame_limit`]).
    FrameTooLarge {
        /// The frame's length.
        bytes: u32,
        /// The limit.
        limit: usize,
    },
}

impl std::fmt::Display for StreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamError::Wire(error) => write!(f, "{error}"),
            StreamError::BadSequence { expected, found } => {
                write!(f, "frame sequence {found}, expected {expected}")
            }
            StreamError::PeerChanged => {
                write!(f, "sender node or incarnation changed mid-connection")
            }
            StreamError::FrameTooLarge { bytes, limit } => write!(
                f,
                "a frame of {bytes} bytes, over the {limit} bytes taken on this connection for now"
            ),
        }
    }
}

impl Default for FrameAssembler {
    fn default() -> Self {
        FrameAssembler::new()
    }
}

impl FrameAssembler {
    /// An empty assembler with a 256 KiB buffer (grows only for larger frames).
    pub fn new() -> FrameAssembler {
        FrameAssembler {
            buffer: vec![0; 256 * 1024],
            start: 0,
            end: 0,
            expected_sequence: 0,
            peer: None,
            frame_limit: codec::MAX_FRAME_BYTES,
        }
    }

    /// Takes frames of at most `bytes` (capped at `MAX_FRAME_BYTES`) from
    /// now on: a data node holds a connection that has not identified
    /// itself to small frames, so an unknown peer cannot make it buffer
    /// megabytes.
    pub fn set_frame_limit(&mut self, bytes: usize) {
        self.frame_limit = bytes.min(codec::MAX_FRAME_BYTES);
    }

    /// Reads once from `source` into the free space. Returns bytes read
    /// (0 = end of stream), or the I/O error (WouldBlock included).
    pub fn read_from(&mut self, source: &mut impl Read) -> std::io::Result<usize> {
        if self.start > 0 && (self.end == self.buffer.len() || self.start == self.end) {
            self.buffer.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buffer.len() {
            // Only reached for a frame larger than the buffer (bounded by
            // MAX_FRAME_BYTES, checked in `next_frame` before growing).
            let grown = (self.buffer.len() * 2).min(codec::MAX_FRAME_BYTES + 64 * 1024);
            self.buffer.resize(grown, 0);
        }
        let read = source.read(&mut self.buffer[self.end..])?;
        self.end += read;
        Ok(read)
    }

    /// Appends bytes (for tests and in-memory transports).
    pub fn push_bytes(&mut self, bytes: &[u8]) {
        if self.buffer.len() - self.end < bytes.len() {
            self.buffer.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.buffer.len() - self.end < bytes.len() {
                self.buffer.resize(self.end + bytes.len(), 0);
            }
        }
        self.buffer[self.end..self.end + bytes.len()].copy_from_slice(bytes);
        self.end += bytes.len();
    }

    /// The next complete, verified frame: its header and its signal body.
    /// `Ok(None)` when more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<(FrameHeader, &[u8])>, StreamError> {
        let available = &self.buffer[self.start..self.end];
        let Some(header) = codec::parse_frame_header(available).map_err(StreamError::Wire)? else {
            return Ok(None);
        };
        let frame_bytes = header.frame_bytes as usize;
        if frame_bytes > self.frame_limit {
            return Err(StreamError::FrameTooLarge {
                bytes: header.frame_bytes,
                limit: self.frame_limit,
            });
        }
        if available.len() < frame_bytes {
            return Ok(None);
        }
        if header.sequence != self.expected_sequence {
            return Err(StreamError::BadSequence {
                expected: self.expected_sequence,
                found: header.sequence,
            });
        }
        let peer = (header.sender.0, header.incarnation);
        match self.peer {
            None => self.peer = Some(peer),
            Some(known) if known != peer => return Err(StreamError::PeerChanged),
            Some(_) => {}
        }
        let frame_start = self.start;
        self.start += frame_bytes;
        self.expected_sequence += 1;
        let frame = &self.buffer[frame_start..frame_start + frame_bytes];
        let body = codec::verify_frame(frame, &header).map_err(StreamError::Wire)?;
        Ok(Some((header, body)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signals::TcCommitReq;
    use crate::{BlockKind, BlockRef, Envelope, NodeId, TransactionId};

    fn frame(sequence: u64) -> Vec<u8> {
        let mut out = Vec::new();
        let start = codec::begin_frame(&mut out);
        let envelope = Envelope {
            from: BlockRef::new(NodeId(130), BlockKind::Api, 0),
            to: BlockRef::new(NodeId(2), BlockKind::Tc, 0),
            signal: TcCommitReq {
                transaction_id: TransactionId(sequence),
            }
            .into(),
        };
        codec::encode_signal(&mut out, &envelope).expect("wire signal");
        codec::finish_frame(&mut out, start, NodeId(130), 1, sequence, 1);
        out
    }

    #[test]
    fn frames_split_anywhere_come_out_whole() {
        let mut stream = Vec::new();
        for sequence in 0..50 {
            stream.extend(frame(sequence));
        }
        for piece in [1usize, 3, 7, 64, 1000] {
            let mut assembler = FrameAssembler::new();
            let mut seen = 0;
            for chunk in stream.chunks(piece) {
                assembler.push_bytes(chunk);
                while let Some((header, _)) = assembler.next_frame().expect("valid stream") {
                    assert_eq!(header.sequence, seen);
                    seen += 1;
                }
            }
            assert_eq!(seen, 50);
        }
    }

    #[test]
    fn a_frame_over_the_limit_is_an_error_before_its_body_arrives() {
        let whole = frame(0);
        let mut assembler = FrameAssembler::new();
        assembler.set_frame_limit(whole.len() - 1);
        // The header alone is enough to refuse it.
        assembler.push_bytes(&whole[..codec::FRAME_HEADER_BYTES]);
        assert_eq!(
            assembler.next_frame().map(|frame| frame.is_some()),
            Err(StreamError::FrameTooLarge {
                bytes: whole.len() as u32,
                limit: whole.len() - 1
            })
        );
        let mut assembler = FrameAssembler::new();
        assembler.set_frame_limit(whole.len());
        assembler.push_bytes(&whole);
        assert!(assembler.next_frame().expect("within the limit").is_some());
    }

    #[test]
    fn out_of_order_and_garbage_are_errors() {
        let mut assembler = FrameAssembler::new();
        assembler.push_bytes(&frame(1));
        assert!(matches!(
            assembler.next_frame(),
            Err(StreamError::BadSequence {
                expected: 0,
                found: 1
            })
        ));
        let mut assembler = FrameAssembler::new();
        assembler.push_bytes(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n..........");
        assert!(matches!(assembler.next_frame(), Err(StreamError::Wire(_))));
    }

    #[test]
    fn random_and_mangled_streams_end_in_an_error_never_a_panic() {
        let mut rng = stdx::mix::XorShift::new(17);
        for _ in 0..2000 {
            let mut stream = Vec::new();
            for sequence in 0..rng.below(4) {
                stream.extend(frame(sequence));
            }
            match rng.below(4) {
                0 => stream = (0..rng.below(200)).map(|_| rng.next_u64() as u8).collect(),
                1 if !stream.is_empty() => {
                    let position = rng.below(stream.len() as u64) as usize;
                    stream[position] ^= 1 << rng.below(8);
                }
                2 if stream.len() > 12 => {
                    // A frame length field set to anything.
                    let length = rng.next_u64() as u32;
                    stream[8..12].copy_from_slice(&length.to_le_bytes());
                }
                _ => {}
            }
            let mut assembler = FrameAssembler::new();
            let mut rest = &stream[..];
            'feed: while !rest.is_empty() {
                let take = (1 + rng.below(64) as usize).min(rest.len());
                assembler.push_bytes(&rest[..take]);
                rest = &rest[take..];
                loop {
                    match assembler.next_frame() {
                        Ok(Some((header, body))) => {
                            assert_eq!(header.frame_bytes as usize, body.len() + 32);
                        }
                        Ok(None) => break,
                        Err(_) => break 'feed,
                    }
                }
            }
        }
    }
}
