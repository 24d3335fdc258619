//! The encodings of the sections that signals carry and both ends read:
//! the partition map of a table (GET_TABINFO_CONF, and between data nodes
//! in the add-table signals) and the table names of a ListTablesConf. The
//! decoders check every count, node id and name, so a signal holding a
//! section is refused whole when the section is bad.

use super::field::node_id;
use super::{Reader, WireError, Writer};
use crate::section::MAX_SECTION_BYTES;
use crate::signals::{PartitionMap, PartitionPlacement, MAX_REPLICAS};

/// Encodes a partition map (GET_TABINFO_CONF, and between data nodes):
/// table id u32, version u32, bucket count u32 and each bucket's partition
/// (u32), partition count u32 and per partition: node group u32, ldm
/// instance u16, redo part u32, replica count u8 and each replica's node u16.
pub fn encode_partition_map(out: &mut Vec<u8>, map: &PartitionMap) {
    write_partition_map(&mut Writer::new(out), map);
}

pub(super) fn write_partition_map(w: &mut Writer<'_>, map: &PartitionMap) {
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
pub(super) fn for_each_table_name<'a>(
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

/// Most (id, version, revision) entries a table-versions section holds:
/// what fits one section.
pub const MAX_TABLE_VERSIONS: usize = (MAX_SECTION_BYTES - 4) / 12;

/// Encodes the tables a block holds, as (table id, table version, index
/// revision) entries, for DICT_TAKEOVER_REQ and DICT_TAKEOVER_CONF: a u32
/// count, then each entry as three u32. More than [`MAX_TABLE_VERSIONS`]
/// entries is refused (`BadField("table versions section")`) and leaves
/// `out` as it was.
pub fn encode_table_versions(
    out: &mut Vec<u8>,
    tables: impl ExactSizeIterator<Item = (u32, u32, u32)>,
) -> Result<(), WireError> {
    if tables.len() > MAX_TABLE_VERSIONS {
        return Err(WireError::BadField("table versions section"));
    }
    let mut w = Writer::new(out);
    w.u32(tables.len() as u32);
    for (id, version, revision) in tables {
        w.u32(id);
        w.u32(version);
        w.u32(revision);
    }
    Ok(())
}

/// Decodes what [`encode_table_versions`] wrote: exactly `count` entries,
/// nothing after them (`Truncated`, `BadField("bytes after table
/// versions")`).
pub fn decode_table_versions(bytes: &[u8]) -> Result<Vec<(u32, u32, u32)>, WireError> {
    let mut r = Reader::new(bytes);
    let count = r.u32()? as usize;
    if count > MAX_TABLE_VERSIONS {
        return Err(WireError::BadField("table versions count"));
    }
    let mut tables = Vec::with_capacity(count);
    for _ in 0..count {
        tables.push((r.u32()?, r.u32()?, r.u32()?));
    }
    if !r.is_empty() {
        return Err(WireError::BadField("bytes after table versions"));
    }
    Ok(tables)
}
