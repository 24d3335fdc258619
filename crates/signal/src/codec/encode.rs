//! Encoding: [`encode_signal`] appends one signal record (12-byte head, then
//! the signal's fields and sections) inside a frame, and refuses the
//! node-local signals, which have no wire form.

use super::maps::write_partition_map;
use super::{WireError, Writer};
use crate::ids::BlockRef;
use crate::schema::TableDef;
use crate::signals::*;

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

/// Writes a table definition section, then the table's partition map
/// section, each built in place (read back by `decode`'s `table_and_map`).
fn write_table_and_map(w: &mut Writer<'_>, table: &TableDef, map: &PartitionMap) {
    w.section_with(|w| table.encode(w));
    w.section_with(|w| write_partition_map(w, map));
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
            w.u8(s.row.is_some() as u8);
            if let Some(row) = &s.row {
                w.u32(row.client_op);
                w.bytes32(row.data.as_slice());
            }
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
        Signal::GciWaitReq(s) => {
            w.u32(s.request_id);
            w.u64(s.gci.0);
        }
        Signal::GciWaitConf(s) => {
            w.u32(s.request_id);
            w.u64(s.complete_gci.0);
        }
        Signal::GciWaitRef(s) => {
            w.u32(s.request_id);
            w.u16(s.error as u16);
        }
        Signal::GcpFlushReq(s) => w.u64(s.gci.0),
        Signal::GcpFlushConf(s) => w.u64(s.gci.0),
        Signal::GcpSaveReq(s) => w.u64(s.gci.0),
        Signal::GcpSaveConf(s) => w.u64(s.gci.0),
        Signal::CopyGciReq(s) => {
            w.u64(s.complete_gci.0);
            w.u64(s.started_gci.0);
        }
        Signal::CopyGciConf(s) => w.u64(s.complete_gci.0),
        Signal::GcpDurableRep(s) => w.u64(s.gci.0),
        Signal::RestartGciRep(s) => w.u64(s.complete_gci.0),
        Signal::RestartGciOrd(s) => w.u64(s.restored_gci.0),
        Signal::RestoredRep(s) => w.u64(s.highest_gci.0),
        Signal::TcAddTabReq(s) => write_table_and_map(&mut w, &s.table, &s.map),
        Signal::LqhAddTabReq(s) => write_table_and_map(&mut w, &s.table, &s.map),
        Signal::DictAddTabReq(s) => {
            w.u32(s.schema_version);
            write_table_and_map(&mut w, &s.table, &s.map);
        }
        Signal::AddTabConf(s) => w.u32(s.table_id),
        Signal::SchemaSyncReq(s) => {
            w.u32(s.total_bytes);
            w.u32(s.offset);
            w.bytes32(s.data.as_slice());
        }
        Signal::SchemaSyncConf(s) => w.u32(s.received),
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
        | Signal::FsConf(_)
        | Signal::RestoreReq(_)
        | Signal::RestoreConf(_) => {
            let name = envelope.signal.name();
            out.truncate(head);
            return Err(WireError::NotWireSignal(name));
        }
    }
    let body_bytes = (out.len() - body) as u32;
    out[head + 8..head + 12].copy_from_slice(&body_bytes.to_le_bytes());
    Ok(())
}
