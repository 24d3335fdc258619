//! Decoding: [`SignalDecoder`] takes the signal records of one verified
//! frame body, one at a time, and `decode_body` turns each body into its
//! signal, checking every length, count, flag, node id and enum value (the
//! bytes come from the network: errors, never panics). Also which signals
//! an API node may send ([`is_api_request`]).

use super::maps::{decode_partition_map, for_each_table_name};
use super::{Reader, WireError, SIGNAL_HEAD_BYTES};
use crate::attr::KeyHash;
use crate::error::ErrorCode;
use crate::ids::{BlockKind, BlockRef, Gci, NodeId, TransactionId};
use crate::schema::TableDef;
use crate::section::{Section, SectionPool};
use crate::signals::*;
use std::sync::Arc;

/// Whether an API node may send signal `number` (to a data node).
pub fn is_api_request(number: u16) -> bool {
    matches!(number, 1 | 10 | 14 | 15 | 17 | 20 | 23 | 25 | 27 | 30)
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
        let Some(head) = self.head()? else {
            return Ok(None);
        };
        let mut r = Reader::new(&self.body[SIGNAL_HEAD_BYTES..head.record_end]);
        let signal = decode_body(head.number, &mut r, pool)?;
        let (from, to) = self.finish(r, &head)?;
        Ok(Some(Envelope { from, to, signal }))
    }

    /// As [`next`], but the two signals an API node receives for every
    /// read, TCKEYCONF and TRANSID_AI, come back as an [`ApiReply`] whose
    /// row borrows from the frame: the client's receive thread hands it
    /// to the waiting transaction without a section in between.
    ///
    /// [`next`]: SignalDecoder::next
    pub fn next_for_api(
        &mut self,
        pool: &'static SectionPool,
    ) -> Result<Option<ForApi<'a>>, WireError> {
        let Some(head) = self.head()? else {
            return Ok(None);
        };
        let body: &'a [u8] = &self.body[SIGNAL_HEAD_BYTES..head.record_end];
        let mut r = Reader::new(body);
        let reply = match head.number {
            TC_KEY_CONF => ApiReply::TcKeyConf {
                transaction_id: TransactionId(r.u64()?),
                operations: r.u32()?,
                committed: r.u8()? != 0,
                gci: Gci(r.u64()?),
                map_version: r.u32()?,
                row: if flag(&mut r, "TcKeyConf row flag")? {
                    Some((r.u32()?, r.bytes32()?))
                } else {
                    None
                },
            },
            TRANS_ID_AI => ApiReply::TransIdAi {
                transaction_id: TransactionId(r.u64()?),
                client_op: r.u32()?,
                data: r.bytes32()?,
            },
            number => {
                let signal = decode_body(number, &mut r, pool)?;
                let (from, to) = self.finish(r, &head)?;
                return Ok(Some(ForApi::Signal(Envelope { from, to, signal })));
            }
        };
        let (_, to) = self.finish(r, &head)?;
        Ok(Some(ForApi::Reply { to, reply }))
    }

    /// The head of the next signal record, checked; `None` at the end.
    fn head(&self) -> Result<Option<RecordHead>, WireError> {
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
        Ok(Some(RecordHead {
            number,
            to_kind,
            from_kind,
            to_instance,
            from_instance,
            record_end,
        }))
    }

    /// Checks that the body was read to its end, moves past the record and
    /// returns its (sender, receiver).
    fn finish(
        &mut self,
        rest: Reader<'_>,
        head: &RecordHead,
    ) -> Result<(BlockRef, BlockRef), WireError> {
        if !rest.is_empty() {
            return Err(WireError::BadField("bytes after signal fields"));
        }
        self.body = &self.body[head.record_end..];
        self.remaining -= 1;
        Ok((
            BlockRef::new(self.sender, head.from_kind, head.from_instance),
            BlockRef::new(self.receiver, head.to_kind, head.to_instance),
        ))
    }
}

/// A signal record's head.
struct RecordHead {
    number: u16,
    to_kind: BlockKind,
    from_kind: BlockKind,
    to_instance: u16,
    from_instance: u16,
    record_end: usize,
}

/// Signal numbers [`SignalDecoder::next_for_api`] decodes in place.
const TC_KEY_CONF: u16 = 11;
const TRANS_ID_AI: u16 = 13;

/// What [`SignalDecoder::next_for_api`] returns.
#[derive(Debug)]
pub enum ForApi<'a> {
    /// A TCKEYCONF or TRANSID_AI, its row in the frame, addressed to `to`.
    Reply { to: BlockRef, reply: ApiReply<'a> },
    /// Any other signal, decoded as [`SignalDecoder::next`] does.
    Signal(Envelope),
}

/// A TCKEYCONF or TRANSID_AI whose row bytes borrow from the frame; the
/// fields and checks are those of [`TcKeyConf`] and [`TransIdAi`].
#[derive(Debug, PartialEq)]
pub enum ApiReply<'a> {
    TcKeyConf {
        transaction_id: TransactionId,
        operations: u32,
        committed: bool,
        gci: Gci,
        map_version: u32,
        /// The client op and attribute entries of the row it carries.
        row: Option<(u32, &'a [u8])>,
    },
    TransIdAi {
        transaction_id: TransactionId,
        client_op: u32,
        data: &'a [u8],
    },
}

impl ApiReply<'_> {
    /// The signal's name.
    pub fn name(&self) -> &'static str {
        match self {
            ApiReply::TcKeyConf { .. } => "TcKeyConf",
            ApiReply::TransIdAi { .. } => "TransIdAi",
        }
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
pub(super) fn node_id(r: &mut Reader<'_>, what: &'static str) -> Result<NodeId, WireError> {
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
            row: if flag(r, "TcKeyConf row flag")? {
                Some(ReadRow {
                    client_op: r.u32()?,
                    data: section(r, pool)?,
                })
            } else {
                None
            },
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
        17 => GciWaitReq {
            request_id: r.u32()?,
            gci: Gci(r.u64()?),
        }
        .into(),
        18 => GciWaitConf {
            request_id: r.u32()?,
            complete_gci: Gci(r.u64()?),
        }
        .into(),
        19 => GciWaitRef {
            request_id: r.u32()?,
            error: error_code(r)?,
        }
        .into(),
        65 => GcpFlushReq { gci: Gci(r.u64()?) }.into(),
        66 => GcpFlushConf { gci: Gci(r.u64()?) }.into(),
        67 => GcpSaveReq { gci: Gci(r.u64()?) }.into(),
        68 => GcpSaveConf { gci: Gci(r.u64()?) }.into(),
        69 => CopyGciReq {
            complete_gci: Gci(r.u64()?),
            started_gci: Gci(r.u64()?),
        }
        .into(),
        78 => CopyGciConf {
            complete_gci: Gci(r.u64()?),
        }
        .into(),
        79 => GcpDurableRep { gci: Gci(r.u64()?) }.into(),
        86 => RestartGciRep {
            complete_gci: Gci(r.u64()?),
        }
        .into(),
        87 => RestartGciOrd {
            restored_gci: Gci(r.u64()?),
        }
        .into(),
        88 => RestoredRep {
            highest_gci: Gci(r.u64()?),
        }
        .into(),
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
        93 => {
            let total_bytes = r.u32()?;
            let offset = r.u32()?;
            // Checked before a section is taken, so a refusal costs none.
            let data = r.bytes32()?;
            let end = u64::from(offset) + data.len() as u64;
            if end > u64::from(total_bytes) {
                return Err(WireError::BadField("SchemaSyncReq chunk beyond the total"));
            }
            if data.is_empty() != (total_bytes == 0) {
                return Err(WireError::BadField("SchemaSyncReq empty chunk"));
            }
            SchemaSyncReq {
                total_bytes,
                offset,
                data: pool.copy_from(data).ok_or(WireError::OutOfSections)?,
            }
            .into()
        }
        94 => SchemaSyncConf { received: r.u32()? }.into(),
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
