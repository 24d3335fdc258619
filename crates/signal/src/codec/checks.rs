//! The checks of a decoded signal that look at more than one field: named
//! by `checked_by` in the signal table (`signals/table/`) and run after
//! every field has been read and checked on its own.

use super::maps::{decode_table_versions, for_each_table_name};
use super::WireError;
use crate::ids::{BlockKind, BlockRef};
use crate::schema::TableDef;
use crate::signals::{
    tc_key_flags, AbortReq, DictAddTabReq, DictTakeoverConf, DictTakeoverReq, ListTablesConf,
    LqhAddTabReq, LqhKeyReq, PartitionMap, SchemaSyncReq, TcAddTabReq, TcKeyReq,
};

/// Only the flags a client may set, IGNORE_MISSING and
/// THROUGH_UNIQUE_INDEX on reads only.
pub(crate) fn tc_key_req(request: &TcKeyReq) -> Result<(), WireError> {
    if request.flags & !tc_key_flags::ALL != 0 {
        return Err(WireError::BadField("TcKeyReq flags"));
    }
    let read_flags = tc_key_flags::IGNORE_MISSING | tc_key_flags::THROUGH_UNIQUE_INDEX;
    if request.flags & read_flags != 0 && request.kind != crate::signals::OperationKind::Read {
        return Err(WireError::BadField("TcKeyReq a read's flag on a write"));
    }
    let lock_flags = tc_key_flags::NO_WAIT | tc_key_flags::SKIP_LOCKED;
    if request.flags & lock_flags != 0 && !locking_read(request.kind, request.lock) {
        return Err(WireError::BadField(
            "TcKeyReq NO_WAIT or SKIP_LOCKED on no locking read",
        ));
    }
    // A read through a unique index is two reads the tc makes: neither
    // declines to wait (a caller scans the index instead).
    if request.flags & lock_flags != 0 && request.flags & tc_key_flags::THROUGH_UNIQUE_INDEX != 0 {
        return Err(WireError::BadField(
            "TcKeyReq NO_WAIT or SKIP_LOCKED through a unique index",
        ));
    }
    Ok(())
}

/// A read that takes a lock.
fn locking_read(kind: crate::signals::OperationKind, lock: crate::signals::LockMode) -> bool {
    kind == crate::signals::OperationKind::Read && lock != crate::signals::LockMode::CommittedRead
}

/// The coordinator is a tc, the receiver's position is in the chain, and
/// only a locking read declines to wait.
pub(crate) fn lqh_key_req(request: &LqhKeyReq) -> Result<(), WireError> {
    coordinating_tc(request.tc)?;
    if request.position >= request.chain.length {
        return Err(WireError::BadField("chain position"));
    }
    if request.no_wait && !locking_read(request.kind, request.lock) {
        return Err(WireError::BadField("LqhKeyReq no_wait on no locking read"));
    }
    Ok(())
}

/// The coordinator is a tc.
pub(crate) fn abort_req(request: &AbortReq) -> Result<(), WireError> {
    coordinating_tc(request.tc)
}

/// The block that answers goes to is a tc (any instance: the answer finds
/// no route if the instance is wrong).
fn coordinating_tc(tc: BlockRef) -> Result<(), WireError> {
    if tc.kind != BlockKind::Tc {
        return Err(WireError::BadField("tc block kind"));
    }
    Ok(())
}

/// The names section is a well-formed list of names.
pub(crate) fn list_tables_conf(conf: &ListTablesConf) -> Result<(), WireError> {
    for_each_table_name(conf.names.as_slice(), |_| {})
}

/// The chunk lies within the schema, and is empty only for an empty schema.
pub(crate) fn schema_sync_req(request: &SchemaSyncReq) -> Result<(), WireError> {
    let end = u64::from(request.offset) + request.data.len() as u64;
    if end > u64::from(request.total_bytes) {
        return Err(WireError::BadField("SchemaSyncReq chunk beyond the total"));
    }
    if request.data.is_empty() != (request.total_bytes == 0) {
        return Err(WireError::BadField("SchemaSyncReq empty chunk"));
    }
    Ok(())
}

pub(crate) fn tc_add_tab_req(request: &TcAddTabReq) -> Result<(), WireError> {
    table_and_map(&request.table, &request.map)
}

pub(crate) fn lqh_add_tab_req(request: &LqhAddTabReq) -> Result<(), WireError> {
    table_and_map(&request.table, &request.map)
}

pub(crate) fn dict_add_tab_req(request: &DictAddTabReq) -> Result<(), WireError> {
    table_and_map(&request.table, &request.map)
}

/// The map is the table's, with one placement per partition.
fn table_and_map(table: &TableDef, map: &PartitionMap) -> Result<(), WireError> {
    if map.table_id != table.id {
        return Err(WireError::BadField("partition map of another table"));
    }
    if map.partitions.len() != table.partitions as usize {
        return Err(WireError::BadField("partition map partition count"));
    }
    Ok(())
}

pub(crate) fn dict_takeover_req(request: &DictTakeoverReq) -> Result<(), WireError> {
    decode_table_versions(request.tables.as_slice()).map(|_| ())
}

pub(crate) fn dict_takeover_conf(conf: &DictTakeoverConf) -> Result<(), WireError> {
    decode_table_versions(conf.tables.as_slice()).map(|_| ())
}
