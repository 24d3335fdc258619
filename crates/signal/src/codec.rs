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
//! Connections between data nodes use the same frames as API connections.
//! Every signal that crosses nodes has a wire form; the node-local ones
//! (start phases, ApiFailRep, NodeConnectedRep, ContinueB, DiAddTab*,
//! FsReq/FsConf) are
//! refused by the encoder with [`WireError::NotWireSignal`].
//!
//! Decoding checks every length, count and enum value and returns an error,
//! never panics: the bytes come from the network.

use crate::attr::KeyHash;
use crate::error::ErrorCode;
use crate::ids::{BlockKind, BlockRef, Gci, NodeId, TransactionId};
use crate::schema::TableDef;
use crate::section::{Section, SectionPool, MAX_SECTION_BYTES};
use crate::signals::*;
use std::fmt;
use std::sync::Arc;

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
    write_partition_map(&mut Writer::new(out), map);
}

fn write_partition_map(w: &mut Writer<'_>, map: &PartitionMap) {
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
/// partition, every partition has 1 to 4 distinct replicas, each a node id
/// in 1..=255.
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
            let node = node_id(&mut r, "partition map replica node")?;
            if replicas.contains(&node) {
                return Err(WireError::BadField("partition map replica twice"));
            }
            replicas.push(node);
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

/// Encodes the names of a ListTablesConf: u16 count, then per name a u16
/// byte length and the name's UTF-8 bytes. Refused, with nothing appended,
/// when the names do not fit the encoding: more than 65 535 of them
/// (`BadField("table name count")`), a name over 65 535 bytes
/// (`BadField("table name length")`), or more than
/// [`MAX_SECTION_BYTES`] in all (`BadField("table names section")`).
pub fn encode_table_names<'a>(
    out: &mut Vec<u8>,
    names: impl IntoIterator<Item = &'a str>,
) -> Result<(), WireError> {
    let start = out.len();
    let result = write_table_names(out, names);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

fn write_table_names<'a>(
    out: &mut Vec<u8>,
    names: impl IntoIterator<Item = &'a str>,
) -> Result<(), WireError> {
    let start = out.len();
    let mut w = Writer::new(out);
    w.u16(0); // count, patched below
    let mut count: usize = 0;
    for name in names {
        if name.len() > u16::MAX as usize {
            return Err(WireError::BadField("table name length"));
        }
        count += 1;
        if count > u16::MAX as usize {
            return Err(WireError::BadField("table name count"));
        }
        w.bytes16(name.as_bytes());
        if w.position() - start > MAX_SECTION_BYTES {
            return Err(WireError::BadField("table names section"));
        }
    }
    out[start..start + 2].copy_from_slice(&(count as u16).to_le_bytes());
    Ok(())
}

/// Decodes the names of a ListTablesConf (see [`encode_table_names`]):
/// every length within the bytes (`Truncated`), every name UTF-8
/// (`BadField("table name utf-8")`), and exactly `count` names with no
/// bytes after them (`BadField("bytes after table names")`). The names
/// borrow from `bytes`, in the order sent.
pub fn decode_table_names(bytes: &[u8]) -> Result<Vec<&str>, WireError> {
    let mut names = Vec::new();
    for_each_table_name(bytes, |name| names.push(name))?;
    Ok(names)
}

/// Checks the encoded table names in `bytes`, handing each to `each`.
fn for_each_table_name<'a>(
    bytes: &'a [u8],
    mut each: impl FnMut(&'a str),
) -> Result<(), WireError> {
    let mut r = Reader::new(bytes);
    let count = r.u16()?;
    for _ in 0..count {
        let name = std::str::from_utf8(r.bytes16()?)
            .map_err(|_| WireError::BadField("table name utf-8"))?;
        each(name);
    }
    if !r.is_empty() {
        return Err(WireError::BadField("bytes after table names"));
    }
    Ok(())
}

/// Whether an API node may send signal `number` (to a data node).
pub fn is_api_request(number: u16) -> bool {
    matches!(number, 1 | 10 | 14 | 15 | 20 | 23 | 25 | 27 | 30)
}

/// Writes a block address (node u16, kind u8, instance u16: 5 bytes), for
/// signals that name a block other than their sender (the coordinating tc).
fn write_block_ref(w: &mut Writer<'_>, block: BlockRef) {
    w.u16(block.node.0);
    w.u8(block.kind as u8);
    w.u16(block.instance);
}

/// Writes a replica chain: length u8, then four u16 node slots (the unused
/// ones 0), 9 bytes.
fn write_chain(w: &mut Writer<'_>, chain: &ReplicaChain) {
    let nodes = chain.as_slice();
    w.u8(nodes.len() as u8);
    for slot in 0..MAX_REPLICAS {
        w.u16(nodes.get(slot).map_or(0, |node| node.0));
    }
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
        Signal::ListTablesReq(s) => w.u32(s.request_id),
        Signal::ListTablesConf(s) => {
            w.u32(s.request_id);
            w.u32(s.schema_version);
            w.bytes32(s.names.as_slice());
        }
        Signal::ScanPartitionReq(s) => {
            w.u32(s.request_id);
            w.u32(s.table_id);
            w.u32(s.partition);
            w.u32(s.start_row);
            w.u32(s.max_rows);
        }
        Signal::ScanPartitionConf(s) => {
            w.u32(s.request_id);
            w.u32(s.next_row);
            w.u8(s.done as u8);
            w.bytes32(s.rows.as_slice());
        }
        Signal::ScanPartitionRef(s) => {
            w.u32(s.request_id);
            w.u16(s.error as u16);
        }
        Signal::LqhKeyReq(s) => {
            write_block_ref(&mut w, s.tc);
            w.u32(s.tc_op);
            write_chain(&mut w, &s.chain);
            w.u8(s.position);
            w.u32(s.row_id);
            w.u32(s.previous_op);
            w.u64(s.transaction_id.0);
            w.u8(s.kind as u8);
            w.u8(s.lock as u8);
            w.u8(s.attr.is_some() as u8);
            w.u32(s.table_id);
            w.u32(s.partition);
            w.u64(s.hash.0);
            w.bytes32(s.key.as_slice());
            if let Some(attr) = &s.attr {
                w.bytes32(attr.as_slice());
            }
        }
        Signal::LqhKeyConf(s) => {
            w.u32(s.tc_op);
            w.u32(s.ldm_op);
            w.u8(s.released as u8);
            w.u8(s.data.is_some() as u8);
            if let Some(data) = &s.data {
                w.bytes32(data.as_slice());
            }
        }
        Signal::LqhKeyRef(s) => {
            w.u32(s.tc_op);
            w.u16(s.error as u16);
        }
        Signal::CommitReq(s) => {
            w.u32(s.ldm_op);
            w.u32(s.tc_op);
            w.u64(s.transaction_id.0);
            w.u64(s.gci.0);
        }
        Signal::CommitConf(s) => w.u32(s.tc_op),
        Signal::CompleteReq(s) => {
            w.u32(s.ldm_op);
            w.u32(s.tc_op);
            w.u64(s.transaction_id.0);
        }
        Signal::CompleteConf(s) => w.u32(s.tc_op),
        Signal::AbortReq(s) => {
            write_block_ref(&mut w, s.tc);
            w.u32(s.tc_op);
            w.u64(s.transaction_id.0);
        }
        Signal::AbortConf(s) => w.u32(s.tc_op),
        Signal::GcpPrepare(s) => w.u64(s.new_gci.0),
        Signal::GcpPrepareConf(s) => w.u64(s.new_gci.0),
        Signal::GcpCommit(s) => w.u64(s.gci.0),
        Signal::GcpCommitConf(s) => w.u64(s.gci.0),
        Signal::GcpCompleteRep(s) => w.u64(s.gci.0),
        Signal::TcAddTabReq(s) => {
            w.section_with(|w| s.table.encode(w));
            w.section_with(|w| write_partition_map(w, &s.map));
        }
        Signal::LqhAddTabReq(s) => {
            w.section_with(|w| s.table.encode(w));
            w.section_with(|w| write_partition_map(w, &s.map));
        }
        Signal::DictAddTabReq(s) => {
            w.u32(s.schema_version);
            w.section_with(|w| s.table.encode(w));
            w.section_with(|w| write_partition_map(w, &s.map));
        }
        Signal::AddTabConf(s) => w.u32(s.table_id),
        Signal::DropTabOrd(s) => w.u32(s.table_id),
        Signal::DropTabRep(s) => {
            w.u32(s.table_id);
            w.u8(s.busy as u8);
        }
        Signal::CmRegReq(s) => w.u16(s.node.0),
        Signal::CmRegConf(s) => w.u16(s.president.0),
        // Node-local: listed so a new signal must be placed on one side.
        Signal::StartPhaseReq(_)
        | Signal::StartPhaseConf(_)
        | Signal::ApiFailRep(_)
        | Signal::NodeConnectedRep(_)
        | Signal::ContinueB(_)
        | Signal::DiAddTabReq(_)
        | Signal::DiAddTabConf(_)
        | Signal::FsReq(_)
        | Signal::FsConf(_) => {
            let name = envelope.signal.name();
            out.truncate(head);
            return Err(WireError::NotWireSignal(name));
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

/// A u8 that must be 0 or 1.
fn flag(r: &mut Reader<'_>, what: &'static str) -> Result<bool, WireError> {
    match r.u8()? {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(WireError::BadField(what)),
    }
}

/// A node id that must be in 1..=255.
fn node_id(r: &mut Reader<'_>, what: &'static str) -> Result<NodeId, WireError> {
    let node = r.u16()?;
    if (1..=255).contains(&node) {
        Ok(NodeId(node))
    } else {
        Err(WireError::BadField(what))
    }
}

/// The address of a tc (node 1..=255, kind tc, any instance: the receiver
/// answers it, and the answer finds no route if the instance is wrong).
fn tc_block_ref(r: &mut Reader<'_>) -> Result<BlockRef, WireError> {
    let node = node_id(r, "tc node")?;
    if BlockKind::from_u8(r.u8()?) != Some(BlockKind::Tc) {
        return Err(WireError::BadField("tc block kind"));
    }
    Ok(BlockRef::new(node, BlockKind::Tc, r.u16()?))
}

/// A replica chain: length 1..=4, that many distinct node ids in 1..=255,
/// the unused slots 0.
fn replica_chain(r: &mut Reader<'_>) -> Result<ReplicaChain, WireError> {
    let length = r.u8()? as usize;
    if !(1..=MAX_REPLICAS).contains(&length) {
        return Err(WireError::BadField("replica chain length"));
    }
    let mut nodes = [NodeId(0); MAX_REPLICAS];
    for slot in 0..MAX_REPLICAS {
        if slot < length {
            let node = node_id(r, "replica chain node")?;
            if nodes[..slot].contains(&node) {
                return Err(WireError::BadField("replica chain node twice"));
            }
            nodes[slot] = node;
        } else if r.u16()? != 0 {
            return Err(WireError::BadField("unused replica chain slot"));
        }
    }
    Ok(ReplicaChain::new(&nodes[..length]))
}

/// A table definition section followed by the table's partition map
/// section, each checked, and checked against each other.
fn table_and_map(r: &mut Reader<'_>) -> Result<(Arc<TableDef>, Arc<PartitionMap>), WireError> {
    let table =
        TableDef::decode(r.bytes32()?).map_err(|_| WireError::BadField("table definition"))?;
    let map = decode_partition_map(r.bytes32()?)?;
    if map.table_id != table.id {
        return Err(WireError::BadField("partition map of another table"));
    }
    if map.partitions.len() != table.partitions as usize {
        return Err(WireError::BadField("partition map partition count"));
    }
    Ok((Arc::new(table), Arc::new(map)))
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
        27 => ListTablesReq {
            request_id: r.u32()?,
        }
        .into(),
        28 => {
            let request_id = r.u32()?;
            let schema_version = r.u32()?;
            // Checked before a section is taken, so a refusal costs none.
            let names = r.bytes32()?;
            for_each_table_name(names, |_| {})?;
            ListTablesConf {
                request_id,
                schema_version,
                names: pool.copy_from(names).ok_or(WireError::OutOfSections)?,
            }
            .into()
        }
        30 => ScanPartitionReq {
            request_id: r.u32()?,
            table_id: r.u32()?,
            partition: r.u32()?,
            start_row: r.u32()?,
            max_rows: r.u32()?,
        }
        .into(),
        31 => ScanPartitionConf {
            request_id: r.u32()?,
            next_row: r.u32()?,
            done: flag(r, "ScanPartitionConf done")?,
            rows: section(r, pool)?,
        }
        .into(),
        32 => ScanPartitionRef {
            request_id: r.u32()?,
            error: error_code(r)?,
        }
        .into(),
        40 => {
            let tc = tc_block_ref(r)?;
            let tc_op = r.u32()?;
            let chain = replica_chain(r)?;
            let position = r.u8()?;
            if position >= chain.length {
                return Err(WireError::BadField("chain position"));
            }
            let row_id = r.u32()?;
            let previous_op = r.u32()?;
            let transaction_id = TransactionId(r.u64()?);
            let kind =
                OperationKind::from_u8(r.u8()?).ok_or(WireError::BadField("operation kind"))?;
            let lock = LockMode::from_u8(r.u8()?).ok_or(WireError::BadField("lock mode"))?;
            let has_attr = flag(r, "attr flag")?;
            let table_id = r.u32()?;
            let partition = r.u32()?;
            let hash = KeyHash(r.u64()?);
            let key = section(r, pool)?;
            // On OutOfSections here `key` returns to the pool and the
            // decoder has not advanced: the retry decodes both again.
            let attr = if has_attr {
                Some(section(r, pool)?)
            } else {
                None
            };
            LqhKeyReq {
                tc,
                tc_op,
                chain,
                position,
                row_id,
                previous_op,
                transaction_id,
                kind,
                lock,
                table_id,
                partition,
                hash,
                key,
                attr,
            }
            .into()
        }
        41 => {
            let tc_op = r.u32()?;
            let ldm_op = r.u32()?;
            let released = flag(r, "LqhKeyConf released")?;
            let data = if flag(r, "data flag")? {
                Some(section(r, pool)?)
            } else {
                None
            };
            LqhKeyConf {
                tc_op,
                ldm_op,
                data,
                released,
            }
            .into()
        }
        42 => LqhKeyRef {
            tc_op: r.u32()?,
            error: error_code(r)?,
        }
        .into(),
        43 => CommitReq {
            ldm_op: r.u32()?,
            tc_op: r.u32()?,
            transaction_id: TransactionId(r.u64()?),
            gci: Gci(r.u64()?),
        }
        .into(),
        44 => CommitConf { tc_op: r.u32()? }.into(),
        45 => CompleteReq {
            ldm_op: r.u32()?,
            tc_op: r.u32()?,
            transaction_id: TransactionId(r.u64()?),
        }
        .into(),
        46 => CompleteConf { tc_op: r.u32()? }.into(),
        47 => AbortReq {
            tc: tc_block_ref(r)?,
            tc_op: r.u32()?,
            transaction_id: TransactionId(r.u64()?),
        }
        .into(),
        48 => AbortConf { tc_op: r.u32()? }.into(),
        60 => GcpPrepare {
            new_gci: Gci(r.u64()?),
        }
        .into(),
        61 => GcpPrepareConf {
            new_gci: Gci(r.u64()?),
        }
        .into(),
        62 => GcpCommit { gci: Gci(r.u64()?) }.into(),
        63 => GcpCommitConf { gci: Gci(r.u64()?) }.into(),
        64 => GcpCompleteRep { gci: Gci(r.u64()?) }.into(),
        72 => {
            let (table, map) = table_and_map(r)?;
            TcAddTabReq { table, map }.into()
        }
        73 => {
            let (table, map) = table_and_map(r)?;
            LqhAddTabReq { table, map }.into()
        }
        74 => AddTabConf { table_id: r.u32()? }.into(),
        75 => DropTabOrd { table_id: r.u32()? }.into(),
        76 => DropTabRep {
            table_id: r.u32()?,
            busy: flag(r, "DropTabRep busy")?,
        }
        .into(),
        77 => {
            let schema_version = r.u32()?;
            let (table, map) = table_and_map(r)?;
            DictAddTabReq {
                table,
                map,
                schema_version,
            }
            .into()
        }
        84 => CmRegReq {
            node: node_id(r, "CmRegReq node")?,
        }
        .into(),
        85 => CmRegConf {
            president: node_id(r, "CmRegConf president")?,
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
    fn node_local_signals_are_refused_by_the_encoder() {
        let table = Arc::new(test_table());
        let local: Vec<Signal> = vec![
            StartPhaseReq { phase: 1 }.into(),
            StartPhaseConf { phase: 1 }.into(),
            ApiFailRep { node: NodeId(130) }.into(),
            NodeConnectedRep {
                node: NodeId(3),
                incarnation: 2,
            }
            .into(),
            ContinueB { job: 1 }.into(),
            DiAddTabReq {
                table: table.clone(),
            }
            .into(),
            DiAddTabConf {
                map: Arc::new(test_map(&table)),
            }
            .into(),
            FsReq {
                token: 1,
                operation: crate::fs::FsOperation::Sync {
                    file: crate::fs::FileName::System { copy: 0 },
                },
            }
            .into(),
            FsConf {
                token: 1,
                result: Ok(crate::fs::FsDone::Synced),
            }
            .into(),
        ];
        for signal in local {
            let name = signal.name();
            let mut out = vec![9u8];
            let envelope = Envelope {
                from: BlockRef::new(NodeId(2), BlockKind::Dih, 0),
                to: BlockRef::new(NodeId(3), BlockKind::Membership, 0),
                signal,
            };
            assert_eq!(
                encode_signal(&mut out, &envelope),
                Err(WireError::NotWireSignal(name))
            );
            assert_eq!(out, vec![9u8], "{name}: nothing appended");
        }
    }

    fn test_table() -> crate::schema::TableDef {
        use crate::schema::{ColumnDef, ColumnType, TableDef};
        TableDef {
            id: 5,
            version: 2,
            name: "accounts".into(),
            columns: vec![
                ColumnDef {
                    name: "id".into(),
                    column_type: ColumnType::BigInt { unsigned: true },
                    nullable: false,
                },
                ColumnDef {
                    name: "owner".into(),
                    column_type: ColumnType::VarChar(40),
                    nullable: true,
                },
            ],
            primary_key: vec![0],
            partitions: 3,
        }
    }

    fn test_map(table: &crate::schema::TableDef) -> PartitionMap {
        PartitionMap {
            table_id: table.id,
            version: 4,
            bucket_partitions: (0..crate::partition::BUCKETS)
                .map(|bucket| bucket % table.partitions)
                .collect(),
            partitions: (0..table.partitions)
                .map(|partition| PartitionPlacement {
                    node_group: partition % 2,
                    replicas: if partition == 0 {
                        vec![NodeId(2)]
                    } else {
                        vec![NodeId(3), NodeId(2), NodeId(4), NodeId(5)]
                    },
                    ldm_instance: partition as u16,
                    redo_part: partition * 7,
                })
                .collect(),
        }
    }

    /// Encodes and decodes one signal between data nodes 2 and 3.
    fn round_trip_between_nodes(signal: Signal) {
        let pool = pool();
        let envelope = Envelope {
            from: BlockRef::new(NodeId(2), BlockKind::Ldm, 1),
            to: BlockRef::new(NodeId(3), BlockKind::Ldm, 0),
            signal,
        };
        let mut out = Vec::new();
        encode_signal(&mut out, &envelope).expect("wire signal");
        let mut decoder = SignalDecoder::new(&out, 1, NodeId(2), NodeId(3));
        let decoded = decoder.next(pool).expect("decodes").expect("one signal");
        assert_eq!(decoded.from, envelope.from);
        assert_eq!(decoded.to, envelope.to);
        assert_eq!(
            format!("{:?}", decoded.signal),
            format!("{:?}", envelope.signal)
        );
        assert!(decoder.next(pool).expect("end").is_none());
    }

    fn lqh_key_req(pool: &'static SectionPool, attr: bool) -> LqhKeyReq {
        LqhKeyReq {
            tc: BlockRef::new(NodeId(2), BlockKind::Tc, 1),
            tc_op: 17,
            chain: ReplicaChain::new(&[NodeId(2), NodeId(3), NodeId(9)]),
            position: 1,
            row_id: 0x0001_0002,
            previous_op: 44,
            transaction_id: TransactionId(130 << 48 | 5),
            kind: OperationKind::Insert,
            lock: LockMode::Exclusive,
            table_id: 5,
            partition: 2,
            hash: KeyHash(0xdead_beef_0bad_f00d),
            key: pool.copy_from(b"key bytes").expect("room"),
            attr: attr.then(|| pool.copy_from(b"after image").expect("room")),
        }
    }

    #[test]
    fn data_node_signals_round_trip() {
        let pool = pool();
        let table = Arc::new(test_table());
        let map = Arc::new(test_map(&table));
        let signals: Vec<Signal> = vec![
            lqh_key_req(pool, true).into(),
            lqh_key_req(pool, false).into(),
            LqhKeyReq {
                tc: BlockRef::new(NodeId(255), BlockKind::Tc, u16::MAX),
                chain: ReplicaChain::new(&[NodeId(255)]),
                position: 0,
                row_id: u32::MAX,
                previous_op: u32::MAX,
                kind: OperationKind::Read,
                lock: LockMode::CommittedRead,
                ..lqh_key_req(pool, false)
            }
            .into(),
            LqhKeyConf {
                tc_op: 1,
                ldm_op: 2,
                data: Some(pool.copy_from(b"row").expect("room")),
                released: true,
            }
            .into(),
            LqhKeyConf {
                tc_op: u32::MAX,
                ldm_op: 0,
                data: None,
                released: false,
            }
            .into(),
            LqhKeyRef {
                tc_op: 3,
                error: ErrorCode::NoSuchRow,
            }
            .into(),
            CommitReq {
                ldm_op: 4,
                tc_op: 5,
                transaction_id: TransactionId(6),
                gci: Gci::from_parts(7, 8),
            }
            .into(),
            CommitConf { tc_op: 9 }.into(),
            CompleteReq {
                ldm_op: 10,
                tc_op: 11,
                transaction_id: TransactionId(12),
            }
            .into(),
            CompleteConf { tc_op: 13 }.into(),
            AbortReq {
                tc: BlockRef::new(NodeId(3), BlockKind::Tc, 0),
                tc_op: 14,
                transaction_id: TransactionId(15),
            }
            .into(),
            AbortConf { tc_op: 16 }.into(),
            GcpPrepare {
                new_gci: Gci::from_parts(1, 2),
            }
            .into(),
            GcpPrepareConf {
                new_gci: Gci::from_parts(1, 2),
            }
            .into(),
            GcpCommit {
                gci: Gci::from_parts(3, 0),
            }
            .into(),
            GcpCommitConf { gci: Gci(u64::MAX) }.into(),
            GcpCompleteRep { gci: Gci(0) }.into(),
            TcAddTabReq {
                table: table.clone(),
                map: map.clone(),
            }
            .into(),
            LqhAddTabReq {
                table: table.clone(),
                map: map.clone(),
            }
            .into(),
            DictAddTabReq {
                table: table.clone(),
                map: map.clone(),
                schema_version: 77,
            }
            .into(),
            AddTabConf { table_id: 5 }.into(),
            DropTabOrd { table_id: 5 }.into(),
            DropTabRep {
                table_id: 5,
                busy: true,
            }
            .into(),
            DropTabRep {
                table_id: 6,
                busy: false,
            }
            .into(),
            CmRegReq { node: NodeId(4) }.into(),
            CmRegConf {
                president: NodeId(2),
            }
            .into(),
            ScanPartitionReq {
                request_id: 1,
                table_id: 5,
                partition: 2,
                start_row: 100,
                max_rows: 64,
            }
            .into(),
            ScanPartitionConf {
                request_id: 1,
                rows: pool.copy_from(b"rows").expect("room"),
                next_row: 164,
                done: true,
            }
            .into(),
            ScanPartitionRef {
                request_id: 1,
                error: ErrorCode::UnknownTable,
            }
            .into(),
        ];
        for signal in signals {
            round_trip_between_nodes(signal);
        }
    }

    /// Encodes `signal`, lets `mangle` change its body, and decodes.
    fn decode_mangled(signal: Signal, mangle: impl FnOnce(&mut Vec<u8>)) -> WireError {
        let envelope = Envelope {
            from: BlockRef::new(NodeId(2), BlockKind::Tc, 0),
            to: BlockRef::new(NodeId(3), BlockKind::Ldm, 0),
            signal,
        };
        let mut out = Vec::new();
        encode_signal(&mut out, &envelope).expect("wire signal");
        let mut body = out.split_off(SIGNAL_HEAD_BYTES);
        mangle(&mut body);
        out[8..12].copy_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(&body);
        let mut decoder = SignalDecoder::new(&out, 1, NodeId(2), NodeId(3));
        match decoder.next(pool()) {
            Err(error) => error,
            Ok(decoded) => panic!("mangled body decoded: {decoded:?}"),
        }
    }

    #[test]
    fn invalid_data_node_fields_are_refused() {
        let pool = pool();
        // LqhKeyReq body: tc 0..5, tc op 5..9, chain length 9, slots 10..18,
        // position 18, ..., attr flag 37.
        let request = || Signal::from(lqh_key_req(pool, true));
        type Mangle = Box<dyn FnOnce(&mut Vec<u8>)>;
        let cases: Vec<(&str, Mangle, WireError)> = vec![
            (
                "tc node 0",
                Box::new(|b| b[0..2].copy_from_slice(&0u16.to_le_bytes())),
                WireError::BadField("tc node"),
            ),
            (
                "tc kind ldm",
                Box::new(|b| b[2] = BlockKind::Ldm as u8),
                WireError::BadField("tc block kind"),
            ),
            (
                "chain length 0",
                Box::new(|b| b[9] = 0),
                WireError::BadField("replica chain length"),
            ),
            (
                "chain length 5",
                Box::new(|b| b[9] = 5),
                WireError::BadField("replica chain length"),
            ),
            (
                "chain length 4 with an empty slot",
                Box::new(|b| b[9] = 4),
                WireError::BadField("replica chain node"),
            ),
            (
                "chain length 2 with a used third slot",
                Box::new(|b| b[9] = 2),
                WireError::BadField("unused replica chain slot"),
            ),
            (
                "a node twice",
                Box::new(|b| b[12..14].copy_from_slice(&2u16.to_le_bytes())),
                WireError::BadField("replica chain node twice"),
            ),
            (
                "a node above 255",
                Box::new(|b| b[12..14].copy_from_slice(&256u16.to_le_bytes())),
                WireError::BadField("replica chain node"),
            ),
            (
                "position past the chain",
                Box::new(|b| b[18] = 3),
                WireError::BadField("chain position"),
            ),
            (
                "attr flag 2",
                Box::new(|b| b[37] = 2),
                WireError::BadField("attr flag"),
            ),
            (
                "operation kind 0",
                Box::new(|b| b[35] = 0),
                WireError::BadField("operation kind"),
            ),
            (
                "lock mode 3",
                Box::new(|b| b[36] = 3),
                WireError::BadField("lock mode"),
            ),
            (
                "truncated",
                Box::new(|b| b.truncate(50)),
                WireError::Truncated,
            ),
        ];
        for (case, mangle, expected) in cases {
            assert_eq!(decode_mangled(request(), mangle), expected, "{case}");
        }
        assert_eq!(
            decode_mangled(CmRegReq { node: NodeId(2) }.into(), |b| b.fill(0)),
            WireError::BadField("CmRegReq node")
        );
        assert_eq!(
            decode_mangled(
                DropTabRep {
                    table_id: 1,
                    busy: true
                }
                .into(),
                |b| b[4] = 7
            ),
            WireError::BadField("DropTabRep busy")
        );
        let table = Arc::new(test_table());
        let other_table = Arc::new(crate::schema::TableDef {
            id: 6,
            ..test_table()
        });
        let fewer_partitions = Arc::new(crate::schema::TableDef {
            partitions: 2,
            ..test_table()
        });
        let map = Arc::new(test_map(&table));
        let mismatched = [
            (other_table, "partition map of another table"),
            (fewer_partitions, "partition map partition count"),
        ];
        for (table, why) in mismatched {
            let request = TcAddTabReq {
                table,
                map: map.clone(),
            };
            assert_eq!(
                decode_mangled(request.into(), |_| {}),
                WireError::BadField(why)
            );
        }
        let request = LqhAddTabReq {
            table: table.clone(),
            map: map.clone(),
        };
        // The table name's first byte (table section: length 0..4, id,
        // version, partitions, name length 16..18, name 18..).
        assert_eq!(
            decode_mangled(request.into(), |b| b[18] = b'-'),
            WireError::BadField("table definition")
        );
        // Replica 2 of partition 1 made equal to replica 1.
        let mut broken = test_map(&table);
        broken.partitions[1].replicas[1] = NodeId(3);
        let mut bytes = Vec::new();
        encode_partition_map(&mut bytes, &broken);
        assert_eq!(
            decode_partition_map(&bytes),
            Err(WireError::BadField("partition map replica twice"))
        );
        broken.partitions[1].replicas[1] = NodeId(0);
        bytes.clear();
        encode_partition_map(&mut bytes, &broken);
        assert_eq!(
            decode_partition_map(&bytes),
            Err(WireError::BadField("partition map replica node"))
        );
    }

    #[test]
    fn scan_partition_req_is_an_api_request() {
        assert!(is_api_request(30));
        assert!(!is_api_request(31));
        assert!(!is_api_request(40));
    }

    #[test]
    fn list_tables_req_is_an_api_request_and_its_conf_is_not() {
        assert!(is_api_request(27));
        assert!(!is_api_request(28));
        let request: Signal = ListTablesReq { request_id: 1 }.into();
        assert_eq!((request.number(), request.name()), (27, "ListTablesReq"));
    }

    fn table_names(names: &[&str]) -> Vec<u8> {
        let mut bytes = Vec::new();
        encode_table_names(&mut bytes, names.iter().copied()).expect("the names fit");
        bytes
    }

    #[test]
    fn list_tables_signals_round_trip() {
        let pool = pool();
        let long = "x".repeat(64);
        let names = ["accounts", "orders", "\u{e9}t\u{e9}", long.as_str()];
        let cases: Vec<Signal> = vec![
            ListTablesReq { request_id: 0 }.into(),
            ListTablesReq {
                request_id: u32::MAX,
            }
            .into(),
            ListTablesConf {
                request_id: 7,
                schema_version: 12,
                names: pool.copy_from(&table_names(&names)).expect("room"),
            }
            .into(),
            ListTablesConf {
                request_id: 8,
                schema_version: 1,
                names: pool.copy_from(&table_names(&[])).expect("room"),
            }
            .into(),
        ];
        for signal in cases {
            round_trip(signal);
        }
        // The body byte by byte (docs/wire-format.md).
        let envelope = Envelope {
            from: BlockRef::new(NodeId(2), BlockKind::Dict, 0),
            to: BlockRef::new(NodeId(130), BlockKind::Api, 3),
            signal: ListTablesConf {
                request_id: 7,
                schema_version: 12,
                names: pool.copy_from(&table_names(&["ab", "c"])).expect("room"),
            }
            .into(),
        };
        let mut out = Vec::new();
        encode_signal(&mut out, &envelope).expect("wire signal");
        let mut expected = vec![
            28,
            0,
            BlockKind::Api as u8,
            BlockKind::Dict as u8,
            3,
            0,
            0,
            0,
        ];
        expected.extend_from_slice(&(4u32 + 4 + 4 + 9).to_le_bytes());
        expected.extend_from_slice(&7u32.to_le_bytes());
        expected.extend_from_slice(&12u32.to_le_bytes());
        expected.extend_from_slice(&9u32.to_le_bytes());
        expected.extend_from_slice(&[2, 0, 2, 0, b'a', b'b', 1, 0, b'c']);
        assert_eq!(out, expected);
        let mut out = Vec::new();
        let request = Envelope {
            from: BlockRef::new(NodeId(130), BlockKind::Api, 3),
            to: BlockRef::new(NodeId(2), BlockKind::Dict, 0),
            signal: ListTablesReq { request_id: 5 }.into(),
        };
        encode_signal(&mut out, &request).expect("wire signal");
        assert_eq!(out[8..], [4, 0, 0, 0, 5, 0, 0, 0]);
    }

    #[test]
    fn table_names_round_trip() {
        let long = "n".repeat(u16::MAX as usize);
        let cases: Vec<Vec<&str>> = vec![
            vec![],
            vec!["t"],
            vec!["a", "b", "a"],
            vec!["", "\u{1f980}", "T1", "t1"],
            vec![&long],
        ];
        for names in cases {
            let bytes = table_names(&names);
            assert_eq!(
                bytes.len(),
                2 + names.iter().map(|name| 2 + name.len()).sum::<usize>()
            );
            assert_eq!(decode_table_names(&bytes), Ok(names));
        }
        // Appends to what `out` holds.
        let mut out = vec![9];
        encode_table_names(&mut out, ["t"]).expect("fits");
        assert_eq!(out, [9, 1, 0, 1, 0, b't']);
    }

    #[test]
    fn table_names_that_do_not_fit_are_refused_with_nothing_appended() {
        let long = "n".repeat(u16::MAX as usize + 1);
        let many = vec![""; u16::MAX as usize + 1];
        // Two names of 65 535 bytes are over 131 072 bytes with their
        // lengths and count.
        let huge = "h".repeat(u16::MAX as usize);
        let cases: Vec<(Vec<&str>, WireError)> = vec![
            (vec!["t", &long], WireError::BadField("table name length")),
            (many, WireError::BadField("table name count")),
            (
                vec![&huge, &huge, "t"],
                WireError::BadField("table names section"),
            ),
        ];
        for (names, expected) in cases {
            let mut out = vec![9];
            assert_eq!(encode_table_names(&mut out, names), Err(expected));
            assert_eq!(out, [9], "{expected:?}: nothing appended");
        }
        // The most empty names the count allows fit.
        let mut out = Vec::new();
        encode_table_names(&mut out, vec![""; u16::MAX as usize]).expect("fits");
        assert_eq!(
            decode_table_names(&out).map(|names| names.len()),
            Ok(65_535)
        );
    }

    #[test]
    fn malformed_table_names_are_refused() {
        let good = table_names(&["ab", "c"]);
        let with = |edit: &dyn Fn(&mut Vec<u8>)| {
            let mut bytes = good.clone();
            edit(&mut bytes);
            bytes
        };
        let cases: Vec<(&str, Vec<u8>, WireError)> = vec![
            ("empty", Vec::new(), WireError::Truncated),
            ("half a count", vec![1], WireError::Truncated),
            (
                "count above the names",
                with(&|b| b[0] = 3),
                WireError::Truncated,
            ),
            (
                "count below the names",
                with(&|b| b[0] = 1),
                WireError::BadField("bytes after table names"),
            ),
            (
                "a byte after the names",
                with(&|b| b.push(0)),
                WireError::BadField("bytes after table names"),
            ),
            (
                "a length past the end",
                with(&|b| b[6] = 2),
                WireError::Truncated,
            ),
            (
                "half a length",
                with(&|b| b.truncate(7)),
                WireError::Truncated,
            ),
            (
                "a name cut short",
                with(&|b| b.truncate(8)),
                WireError::Truncated,
            ),
            (
                "invalid UTF-8",
                with(&|b| b[4] = 0xff),
                WireError::BadField("table name utf-8"),
            ),
            (
                "a lone continuation byte",
                with(&|b| b[8] = 0x80),
                WireError::BadField("table name utf-8"),
            ),
            (
                "half a two-byte character",
                with(&|b| b[5] = 0xc3),
                WireError::BadField("table name utf-8"),
            ),
        ];
        for (case, bytes, expected) in cases {
            assert_eq!(decode_table_names(&bytes), Err(expected), "{case}");
            // The same names inside a ListTablesConf refuse the signal.
            let pool = pool();
            let conf = ListTablesConf {
                request_id: 1,
                schema_version: 2,
                names: pool.copy_from(&bytes).expect("room"),
            };
            assert_eq!(decode_mangled(conf.into(), |_| {}), expected, "{case}");
        }
    }

    #[test]
    fn truncated_list_tables_bodies_are_refused() {
        let pool = pool();
        let conf = || ListTablesConf {
            request_id: 1,
            schema_version: 2,
            names: pool.copy_from(&table_names(&["t1", "t2"])).expect("room"),
        };
        // request id 0..4, schema version 4..8, section length 8..12, names.
        for keep in 0..22 {
            assert_eq!(
                decode_mangled(conf().into(), |b| b.truncate(keep)),
                WireError::Truncated,
                "ListTablesConf cut to {keep} bytes"
            );
        }
        assert_eq!(
            decode_mangled(conf().into(), |b| b[8..12]
                .copy_from_slice(&(MAX_SECTION_BYTES as u32 + 1).to_le_bytes())),
            WireError::BadField("section length")
        );
        assert_eq!(
            decode_mangled(conf().into(), |b| b.push(0)),
            WireError::BadField("bytes after signal fields")
        );
        for keep in 0..4 {
            assert_eq!(
                decode_mangled(ListTablesReq { request_id: 3 }.into(), |b| b.truncate(keep)),
                WireError::Truncated
            );
        }
        assert_eq!(
            decode_mangled(ListTablesReq { request_id: 3 }.into(), |b| b.push(0)),
            WireError::BadField("bytes after signal fields")
        );
    }

    #[test]
    fn a_list_tables_conf_waiting_for_a_section_can_be_decoded_again() {
        let pool = SectionPool::leak([1, 1, 1, 1, 1, 1]);
        let envelope = Envelope {
            from: BlockRef::new(NodeId(2), BlockKind::Dict, 0),
            to: BlockRef::new(NodeId(3), BlockKind::Dict, 0),
            signal: ListTablesConf {
                request_id: 1,
                schema_version: 2,
                names: pool.copy_from(&table_names(&["t"])).expect("room"),
            }
            .into(),
        };
        let mut out = Vec::new();
        encode_signal(&mut out, &envelope).expect("wire signal");
        let mut decoder = SignalDecoder::new(&out, 1, NodeId(2), NodeId(3));
        // The only small section is the one the envelope still holds.
        assert_eq!(decoder.next(pool).err(), Some(WireError::OutOfSections));
        drop(envelope);
        let decoded = decoder.next(pool).expect("decodes").expect("one signal");
        let Signal::ListTablesConf(conf) = decoded.signal else {
            panic!("decoded {:?}", decoded.signal);
        };
        assert_eq!(decode_table_names(conf.names.as_slice()), Ok(vec!["t"]));
    }

    #[test]
    fn mangled_table_names_never_panic() {
        let mut rng = stdx::mix::XorShift::new(7);
        let alphabet = ["t", "T1", "", "\u{e9}", "\u{1f980}x"];
        let mut decoded = 0;
        for _ in 0..20_000 {
            let names: Vec<&str> = (0..rng.below(4))
                .map(|_| alphabet[rng.below(alphabet.len() as u64) as usize])
                .collect();
            let mut bytes = table_names(&names);
            for _ in 0..rng.below(3) {
                let position = rng.below(bytes.len() as u64 + 1) as usize;
                match rng.below(3) {
                    0 if position < bytes.len() => bytes[position] = rng.next_u64() as u8,
                    1 => bytes.truncate(position),
                    _ => bytes.insert(position, rng.below(4) as u8),
                }
            }
            if let Ok(names) = decode_table_names(&bytes) {
                decoded += 1;
                assert_eq!(table_names(&names), bytes, "decoding is exact");
            }
        }
        assert!(decoded > 1000, "only {decoded} inputs decoded");
    }
}
