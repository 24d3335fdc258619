//! The wire codec: frames of signals on TCP (DESIGN.md §3), byte by byte in
//! docs/wire-format.md.
//!
//! ```text
//! frame header (32 bytes, little-endian)
//!  0 u32 magic "TSRA"        4 u16 version (1)       6 u16 header bytes (32)
//!  8 u32 frame bytes        12 u32 CRC32C of bytes 16..frame bytes
//! 16 u16 sender node        18 u16 signal count     20 u32 sender incarnation
//! 24 u64 sequence number (per connection and direction, from 0)
//! signal record (12-byte head, then its body)
//!  0 u16 signal number       2 u8 receiver block    3 u8 sender block
//!  4 u16 receiver instance   6 u16 sender instance  8 u32 body bytes
//! body: the signal's fixed fields, then each section as u32 length + bytes
//! ```
//! Decoding checks every length, count and enum value and returns an error,
//! never panics: the bytes come from the network.

use crate::error::ErrorCode;
use crate::ids::{BlockKind, BlockRef, Gci, NodeId, TransactionId};
use crate::section::{Section, SectionPool, MAX_SECTION_BYTES};
use crate::signals::*;
use std::fmt;

/// "TSRA" as a little-endian u32.
pub const FRAME_MAGIC: u32 = u32::from_le_bytes(*b"TSRA");
/// Current frame version.
pub const FRAME_VERSION: u16 = 1;
/// Bytes of the frame header.
pub const FRAME_HEADER_BYTES: usize = 32;
/// Largest frame accepted; a larger length field closes the connection.
pub const MAX_FRAME_BYTES: usize = 4 << 20;
/// Bytes of a signal record's head.
pub const SIGNAL_HEAD_BYTES: usize = 12;

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
    if crc32c::crc32c(&frame[16..]) != header.checksum {
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
    let checksum = crc32c::crc32c(&frame[16..]);
    frame[12..16].copy_from_slice(&checksum.to_le_bytes());
}

/// Encodes a partition map (GET_TABINFO_CONF, and between data nodes):
/// table id u32, version u32, bucket count u32 and each bucket's partition
/// (u32), partition count u32 and per partition: node group u32, ldm
/// instance u16, redo part u32, replica count u8 and each replica's node u16.
pub fn encode_partition_map(out: &mut Vec<u8>, map: &PartitionMap) {
    let mut w = Writer::new(out);
    w.u32(map.table_id);
    w.u32(map.version);
    w.u32(map.bucket_partitions.len() as u32);
    for &partition in &map.bucket_partitions {
        w.u32(partition);
    }
    w.u32(map.partitions.len() as u32);
    for placement in &map.partitions {
        w.u32(placement.node_group);
        w.u16(placement.ldm_instance);
        w.u32(placement.redo_part);
        w.u8(placement.replicas.len() as u8);
        for node in &placement.replicas {
            w.u16(node.0);
        }
    }
}

/// Decodes and checks a partition map: every bucket names an existing
/// partition, every partition has 1 to 4 replicas.
pub fn decode_partition_map(bytes: &[u8]) -> Result<PartitionMap, WireError> {
    let mut r = Reader::new(bytes);
    let table_id = r.u32()?;
    let version = r.u32()?;
    let buckets = r.u32()? as usize;
    if buckets != crate::partition::BUCKETS as usize {
        return Err(WireError::BadField("partition map bucket count"));
    }
    let mut bucket_partitions = Vec::with_capacity(buckets);
    for _ in 0..buckets {
        bucket_partitions.push(r.u32()?);
    }
    let partition_count = r.u32()? as usize;
    if partition_count == 0 || partition_count > 4096 {
        return Err(WireError::BadField("partition map partition count"));
    }
    let mut partitions = Vec::with_capacity(partition_count);
    for _ in 0..partition_count {
        let node_group = r.u32()?;
        let ldm_instance = r.u16()?;
        let redo_part = r.u32()?;
        let replica_count = r.u8()? as usize;
        if !(1..=MAX_REPLICAS).contains(&replica_count) {
            return Err(WireError::BadField("partition map replica count"));
        }
        let mut replicas = Vec::with_capacity(replica_count);
        for _ in 0..replica_count {
            replicas.push(NodeId(r.u16()?));
        }
        partitions.push(PartitionPlacement {
            node_group,
            replicas,
            ldm_instance,
            redo_part,
        });
    }
    if bucket_partitions
        .iter()
        .any(|&p| p as usize >= partition_count)
    {
        return Err(WireError::BadField(
            "partition map bucket names no partition",
        ));
    }
    if !r.is_empty() {
        return Err(WireError::BadField("bytes after partition map"));
    }
    Ok(PartitionMap {
        table_id,
        version,
        bucket_partitions,
        partitions,
    })
}

/// Whether an API node may send signal `number` (to a data node).
pub fn is_api_request(number: u16) -> bool {
    matches!(number, 1 | 10 | 14 | 15 | 20 | 23 | 25)
}

/// Appends one signal record to `out` (inside a frame).
pub fn encode_signal(out: &mut Vec<u8>, envelope: &Envelope) -> Result<(), WireError> {
    let head = out.len();
    let mut w = Writer::new(out);
    w.u16(envelope.signal.number());
    w.u8(envelope.to.kind as u8);
    w.u8(envelope.from.kind as u8);
    w.u16(envelope.to.instance);
    w.u16(envelope.from.instance);
    w.u32(0); // body length, patched below
    let body = w.position();
    match &envelope.signal {
        Signal::ApiRegReq(s) => w.u16(s.protocol_version),
        Signal::ApiRegConf(s) => {
            w.u8(s.started as u8);
            w.u16(s.tc_instances);
        }
        Signal::TcKeyReq(s) => {
            w.u64(s.transaction_id.0);
            w.u32(s.client_op);
            w.u8(s.flags);
            w.u8(s.kind as u8);
            w.u8(s.lock as u8);
            w.u8(s.attr.is_some() as u8);
            w.u32(s.table_id);
            w.u32(s.table_version);
            w.bytes32(s.key.as_slice());
            if let Some(attr) = &s.attr {
                w.bytes32(attr.as_slice());
            }
        }
        Signal::TcKeyConf(s) => {
            w.u64(s.transaction_id.0);
            w.u32(s.operations);
            w.u8(s.committed as u8);
            w.u64(s.gci.0);
            w.u32(s.map_version);
        }
        Signal::TcKeyRef(s) => {
            w.u64(s.transaction_id.0);
            w.u32(s.client_op);
            w.u16(s.error as u16);
        }
        Signal::TransIdAi(s) => {
            w.u64(s.transaction_id.0);
            w.u32(s.client_op);
            w.bytes32(s.data.as_slice());
        }
        Signal::TcCommitReq(s) => w.u64(s.transaction_id.0),
        Signal::TcRollbackReq(s) => w.u64(s.transaction_id.0),
        Signal::TcRollbackConf(s) => w.u64(s.transaction_id.0),
        Signal::CreateTabReq(s) => {
            w.u32(s.request_id);
            w.bytes32(s.definition.as_slice());
        }
        Signal::CreateTabConf(s) => {
            w.u32(s.request_id);
            w.u32(s.table_id);
            w.u32(s.table_version);
        }
        Signal::SchemaRef(s) => {
            w.u32(s.request_id);
            w.u16(s.error as u16);
        }
        Signal::DropTabReq(s) => {
            w.u32(s.request_id);
            w.bytes32(s.name.as_slice());
        }
        Signal::DropTabConf(s) => w.u32(s.request_id),
        Signal::GetTabInfoReq(s) => {
            w.u32(s.request_id);
            w.bytes32(s.name.as_slice());
        }
        Signal::GetTabInfoConf(s) => {
            w.u32(s.request_id);
            w.u32(s.schema_version);
            w.bytes32(s.definition.as_slice());
            w.u32(s.map_version);
            w.bytes32(s.map.as_slice());
        }
        other => {
            out.truncate(head);
            return Err(WireError::NotWireSignal(other.name()));
        }
    }
    let body_bytes = (out.len() - body) as u32;
    out[head + 8..head + 12].copy_from_slice(&body_bytes.to_le_bytes());
    Ok(())
}

/// Decodes the signals of one verified frame body, one at a time.
pub struct SignalDecoder<'a> {
    body: &'a [u8],
    remaining: u16,
    sender: NodeId,
    receiver: NodeId,
}

impl<'a> SignalDecoder<'a> {
    /// Decodes `signal_count` signals from `body`, sent by node `sender` to
    /// node `receiver`.
    pub fn new(body: &'a [u8], signal_count: u16, sender: NodeId, receiver: NodeId) -> Self {
        SignalDecoder {
            body,
            remaining: signal_count,
            sender,
            receiver,
        }
    }

    /// The next signal, `Ok(None)` at the end. On [`WireError::OutOfSections`]
    /// the decoder has not advanced, so the caller may retry later.
    pub fn next(&mut self, pool: &'static SectionPool) -> Result<Option<Envelope>, WireError> {
        if self.remaining == 0 {
            return if self.body.is_empty() {
                Ok(None)
            } else {
                Err(WireError::BadField("bytes after the last signal"))
            };
        }
        let mut head = Reader::new(self.body);
        let number = head.u16()?;
        let to_kind =
            BlockKind::from_u8(head.u8()?).ok_or(WireError::BadField("receiver block"))?;
        let from_kind =
            BlockKind::from_u8(head.u8()?).ok_or(WireError::BadField("sender block"))?;
        let to_instance = head.u16()?;
        let from_instance = head.u16()?;
        let body_bytes = head.u32()? as usize;
        let record_end = SIGNAL_HEAD_BYTES
            .checked_add(body_bytes)
            .ok_or(WireError::Truncated)?;
        if self.body.len() < record_end {
            return Err(WireError::Truncated);
        }
        let mut r = Reader::new(&self.body[SIGNAL_HEAD_BYTES..record_end]);
        let signal = decode_body(number, &mut r, pool)?;
        if !r.is_empty() {
            return Err(WireError::BadField("bytes after signal fields"));
        }
        self.body = &self.body[record_end..];
        self.remaining -= 1;
        Ok(Some(Envelope {
            from: BlockRef::new(self.sender, from_kind, from_instance),
            to: BlockRef::new(self.receiver, to_kind, to_instance),
            signal,
        }))
    }
}

fn section(r: &mut Reader<'_>, pool: &'static SectionPool) -> Result<Section, WireError> {
    let bytes = r.bytes32()?;
    pool.copy_from(bytes).ok_or(WireError::OutOfSections)
}

fn error_code(r: &mut Reader<'_>) -> Result<ErrorCode, WireError> {
    ErrorCode::from_u16(r.u16()?).ok_or(WireError::BadField("error code"))
}

fn decode_body(
    number: u16,
    r: &mut Reader<'_>,
    pool: &'static SectionPool,
) -> Result<Signal, WireError> {
    Ok(match number {
        1 => ApiRegReq {
            protocol_version: r.u16()?,
        }
        .into(),
        2 => ApiRegConf {
            started: r.u8()? != 0,
            tc_instances: r.u16()?,
        }
        .into(),
        10 => {
            let transaction_id = TransactionId(r.u64()?);
            let client_op = r.u32()?;
            let flags = r.u8()?;
            if flags & !tc_key_flags::ALL != 0 {
                return Err(WireError::BadField("TcKeyReq flags"));
            }
            let kind =
                OperationKind::from_u8(r.u8()?).ok_or(WireError::BadField("operation kind"))?;
            let lock = LockMode::from_u8(r.u8()?).ok_or(WireError::BadField("lock mode"))?;
            let has_attr = r.u8()?;
            let table_id = r.u32()?;
            let table_version = r.u32()?;
            let key = section(r, pool)?;
            let attr = match has_attr {
                0 => None,
                1 => Some(section(r, pool)?),
                _ => return Err(WireError::BadField("attr flag")),
            };
            TcKeyReq {
                transaction_id,
                client_op,
                flags,
                kind,
                lock,
                table_id,
                table_version,
                key,
                attr,
            }
            .into()
        }
        11 => TcKeyConf {
            transaction_id: TransactionId(r.u64()?),
            operations: r.u32()?,
            committed: r.u8()? != 0,
            gci: Gci(r.u64()?),
            map_version: r.u32()?,
        }
        .into(),
        12 => TcKeyRef {
            transaction_id: TransactionId(r.u64()?),
            client_op: r.u32()?,
            error: error_code(r)?,
        }
        .into(),
        13 => TransIdAi {
            transaction_id: TransactionId(r.u64()?),
            client_op: r.u32()?,
            data: section(r, pool)?,
        }
        .into(),
        14 => TcCommitReq {
            transaction_id: TransactionId(r.u64()?),
        }
        .into(),
        15 => TcRollbackReq {
            transaction_id: TransactionId(r.u64()?),
        }
        .into(),
        16 => TcRollbackConf {
            transaction_id: TransactionId(r.u64()?),
        }
        .into(),
        20 => CreateTabReq {
            request_id: r.u32()?,
            definition: section(r, pool)?,
        }
        .into(),
        21 => CreateTabConf {
            request_id: r.u32()?,
            table_id: r.u32()?,
            table_version: r.u32()?,
        }
        .into(),
        22 => SchemaRef {
            request_id: r.u32()?,
            error: error_code(r)?,
        }
        .into(),
        23 => DropTabReq {
            request_id: r.u32()?,
            name: section(r, pool)?,
        }
        .into(),
        24 => DropTabConf {
            request_id: r.u32()?,
        }
        .into(),
        25 => GetTabInfoReq {
            request_id: r.u32()?,
            name: section(r, pool)?,
        }
        .into(),
        26 => GetTabInfoConf {
            request_id: r.u32()?,
            schema_version: r.u32()?,
            definition: section(r, pool)?,
            map_version: r.u32()?,
            map: section(r, pool)?,
        }
        .into(),
        other => return Err(WireError::UnknownSignal(other)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> &'static SectionPool {
        SectionPool::leak([64, 8, 2, 2, 1, 1])
    }

    fn round_trip(signal: Signal) {
        let pool = pool();
        let envelope = Envelope {
            from: BlockRef::new(NodeId(130), BlockKind::Api, 0),
            to: BlockRef::new(NodeId(2), BlockKind::Tc, 1),
            signal,
        };
        let mut out = Vec::new();
        let start = begin_frame(&mut out);
        encode_signal(&mut out, &envelope).expect("wire signal");
        finish_frame(&mut out, start, NodeId(130), 7, 3, 1);
        let header = parse_frame_header(&out).expect("valid").expect("complete");
        assert_eq!(header.sequence, 3);
        assert_eq!(header.incarnation, 7);
        let body = verify_frame(&out, &header).expect("crc");
        let mut decoder = SignalDecoder::new(body, header.signal_count, header.sender, NodeId(2));
        let decoded = decoder.next(pool).expect("decodes").expect("one signal");
        assert_eq!(decoded.from, envelope.from);
        assert_eq!(decoded.to, envelope.to);
        assert_eq!(
            format!("{:?}", decoded.signal),
            format!("{:?}", envelope.signal)
        );
        assert!(decoder.next(pool).expect("end").is_none());
    }

    #[test]
    fn api_signals_round_trip() {
        let pool = pool();
        round_trip(
            TcKeyReq {
                transaction_id: TransactionId(99),
                client_op: 4,
                flags: tc_key_flags::START | tc_key_flags::COMMIT,
                kind: OperationKind::Update,
                lock: LockMode::Exclusive,
                table_id: 3,
                table_version: 1,
                key: pool.copy_from(b"key").expect("room"),
                attr: Some(pool.copy_from(b"attr").expect("room")),
            }
            .into(),
        );
        round_trip(
            TcKeyRef {
                transaction_id: TransactionId(1),
                client_op: 2,
                error: ErrorCode::DuplicateKey,
            }
            .into(),
        );
        round_trip(
            TcKeyConf {
                transaction_id: TransactionId(1),
                operations: 8,
                committed: true,
                gci: Gci::from_parts(5, 6),
                map_version: 3,
            }
            .into(),
        );
    }

    #[test]
    fn corruption_is_detected_not_panicked_on() {
        let pool = pool();
        let envelope = Envelope {
            from: BlockRef::new(NodeId(130), BlockKind::Api, 0),
            to: BlockRef::new(NodeId(2), BlockKind::Tc, 0),
            signal: TcCommitReq {
                transaction_id: TransactionId(5),
            }
            .into(),
        };
        let mut out = Vec::new();
        let start = begin_frame(&mut out);
        encode_signal(&mut out, &envelope).expect("wire signal");
        finish_frame(&mut out, start, NodeId(130), 1, 0, 1);
        for position in 0..out.len() {
            let mut bad = out.clone();
            bad[position] ^= 0x40;
            let Ok(Some(header)) = parse_frame_header(&bad) else {
                continue;
            };
            if header.frame_bytes as usize != bad.len() {
                continue;
            }
            assert!(
                verify_frame(&bad, &header).is_err(),
                "flip at {position} undetected"
            );
        }
        // Garbage bodies decode to errors, never panics.
        let mut rng = stdx::mix::XorShift::new(1);
        for _ in 0..2000 {
            let len = rng.below(64) as usize;
            let bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            let mut decoder = SignalDecoder::new(&bytes, 3, NodeId(1), NodeId(2));
            while let Ok(Some(_)) = decoder.next(pool) {}
        }
    }

    #[test]
    fn internal_signals_are_refused_by_the_encoder() {
        let mut out = Vec::new();
        let envelope = Envelope {
            from: BlockRef::new(NodeId(2), BlockKind::Dih, 0),
            to: BlockRef::new(NodeId(2), BlockKind::Tc, 0),
            signal: GcpCommit { gci: Gci(1) }.into(),
        };
        assert_eq!(
            encode_signal(&mut out, &envelope),
            Err(WireError::NotWireSignal("GcpCommit"))
        );
        assert!(out.is_empty());
    }
}
