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
    /// The end of the body of the frame `next_frame` returned last.
    last_body_end: usize,
    /// The undecoded rest of a frame put aside with [`FrameAssembler::hold`].
    held: Option<Held>,
}

/// The undecoded signals of a frame kept for later.
#[derive(Clone, Copy, Debug)]
struct Held {
    header: FrameHeader,
    /// Where the rest lies in the buffer.
    start: usize,
    end: usize,
    remaining: u16,
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
            last_body_end: 0,
            held: None,
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
        self.compact_if_full();
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
            self.compact();
            if self.buffer.len() - self.end < bytes.len() {
                self.buffer.resize(self.end + bytes.len(), 0);
            }
        }
        self.buffer[self.end..self.end + bytes.len()].copy_from_slice(bytes);
        self.end += bytes.len();
    }

    /// Moves the bytes still needed (a held rest, then what follows the
    /// frames taken) to the front, when the buffer is full or nothing
    /// follows.
    fn compact_if_full(&mut self) {
        let live = self.held.map_or(self.start, |held| held.start);
        if live > 0 && (self.end == self.buffer.len() || self.start == self.end) {
            self.compact();
        }
    }

    fn compact(&mut self) {
        let live = self.held.map_or(self.start, |held| held.start);
        self.buffer.copy_within(live..self.end, 0);
        self.end -= live;
        self.start -= live;
        self.last_body_end = self.last_body_end.saturating_sub(live);
        if let Some(held) = self.held.as_mut() {
            held.start -= live;
            held.end -= live;
        }
    }

    /// Keeps the undecoded rest of the frame `next_frame` returned last:
    /// its last `unread_bytes` bytes of body, holding `remaining` signals
    /// (a decoder's [`SignalDecoder::unread_bytes`] and
    /// [`SignalDecoder::remaining`] after it stopped). [`FrameAssembler::held`]
    /// hands it back until [`FrameAssembler::release`]; bytes read meanwhile
    /// queue behind it. Used when the signals cannot be taken now (no
    /// sections free) by a reader that must not wait.
    ///
    /// [`SignalDecoder::unread_bytes`]: crate::codec::SignalDecoder::unread_bytes
    /// [`SignalDecoder::remaining`]: crate::codec::SignalDecoder::remaining
    pub fn hold(&mut self, header: FrameHeader, unread_bytes: usize, remaining: u16) {
        assert!(
            self.held.is_none() && unread_bytes <= self.last_body_end,
            "hold: one rest at a time, of the frame taken last"
        );
        self.held = Some(Held {
            header,
            start: self.last_body_end - unread_bytes,
            end: self.last_body_end,
            remaining,
        });
    }

    /// The rest kept by [`FrameAssembler::hold`]: the frame's header, the
    /// undecoded body and its signal count.
    pub fn held(&self) -> Option<(FrameHeader, &[u8], u16)> {
        self.held.map(|held| {
            (
                held.header,
                &self.buffer[held.start..held.end],
                held.remaining,
            )
        })
    }

    /// Some of the held rest was decoded: `unread_bytes` bytes holding
    /// `remaining` signals are left.
    pub fn shrink_held(&mut self, unread_bytes: usize, remaining: u16) {
        let held = self.held.as_mut().expect("shrink_held: a rest is held");
        assert!(
            unread_bytes <= held.end - held.start && remaining <= held.remaining,
            "shrink_held: the rest only shrinks"
        );
        held.start = held.end - unread_bytes;
        held.remaining = remaining;
    }

    /// The held rest was decoded (or is to be dropped): frames follow.
    pub fn release(&mut self) {
        self.held = None;
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
        self.last_body_end = self.start;
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

    /// A frame of `count` TC_COMMIT_REQs numbered from `first`.
    fn frame_of(sequence: u64, first: u64, count: u16) -> Vec<u8> {
        let mut out = Vec::new();
        let start = codec::begin_frame(&mut out);
        for id in first..first + u64::from(count) {
            let envelope = Envelope {
                from: BlockRef::new(NodeId(130), BlockKind::Api, 0),
                to: BlockRef::new(NodeId(2), BlockKind::Tc, 0),
                signal: TcCommitReq {
                    transaction_id: TransactionId(id),
                }
                .into(),
            };
            codec::encode_signal(&mut out, &envelope).expect("wire signal");
        }
        codec::finish_frame(&mut out, start, NodeId(130), 1, sequence, count);
        out
    }

    fn ids(decoder: &mut codec::SignalDecoder<'_>, pool: &'static crate::SectionPool) -> Vec<u64> {
        let mut seen = Vec::new();
        while let Some(envelope) = decoder.next(pool).expect("valid") {
            let crate::Signal::TcCommitReq(request) = envelope.signal else {
                panic!("{envelope:?}");
            };
            seen.push(request.transaction_id.0);
        }
        seen
    }

    /// A rest held for later survives the bytes read meanwhile (the buffer
    /// compacted under it), shrinks as it is decoded, and the frames after
    /// it come out in order once it is released.
    #[test]
    fn a_held_rest_survives_later_reads_and_frames_follow_it() {
        let pool = crate::SectionPool::leak([1; 6]);
        let mut assembler = FrameAssembler::new();
        assembler.push_bytes(&frame_of(0, 0, 5));
        let (header, body) = assembler.next_frame().expect("valid").expect("a frame");
        let mut decoder =
            codec::SignalDecoder::new(body, header.signal_count, header.sender, NodeId(2));
        assert!(decoder.next(pool).expect("valid").is_some());
        let (unread, remaining) = (decoder.unread_bytes(), decoder.remaining());
        assert_eq!(remaining, 4);
        assembler.hold(header, unread, remaining);
        // Enough frames behind it to make the buffer compact and grow.
        let mut sequence = 1;
        let mut next_id = 5;
        while sequence < 400 {
            assembler.push_bytes(&frame_of(sequence, next_id, 100));
            sequence += 1;
            next_id += 100;
        }
        let (held_header, rest, held_remaining) = assembler.held().expect("held");
        assert_eq!((held_header, held_remaining), (header, 4));
        let mut decoder = codec::SignalDecoder::new(rest, held_remaining, header.sender, NodeId(2));
        assert!(decoder.next(pool).expect("valid").is_some());
        let (unread, remaining) = (decoder.unread_bytes(), decoder.remaining());
        assembler.shrink_held(unread, remaining);
        let (_, rest, held_remaining) = assembler.held().expect("held");
        let mut decoder = codec::SignalDecoder::new(rest, held_remaining, header.sender, NodeId(2));
        assert_eq!(ids(&mut decoder, pool), [2, 3, 4]);
        assembler.release();
        let mut expected_id = 5;
        let mut frames = 0;
        while let Some((header, body)) = assembler.next_frame().expect("valid") {
            let mut decoder =
                codec::SignalDecoder::new(body, header.signal_count, header.sender, NodeId(2));
            for id in ids(&mut decoder, pool) {
                assert_eq!(id, expected_id);
                expected_id += 1;
            }
            frames += 1;
        }
        assert_eq!((frames, expected_id), (399, next_id));
    }
}
