//! [`Field`]: how one field of a signal is written and read back. The
//! signal table (`signals/table/`) builds every signal's codec from its
//! fields' impls, in declaration order; the checks of a value that needs
//! no other field (a node id in 1..=255, an enum byte, a 0/1 flag, a
//! replica chain, a table definition) live here, so every signal holding
//! such a field checks it the same way.

use super::maps::{decode_partition_map, write_partition_map};
use super::{Reader, WireError, Writer};
use crate::attr::KeyHash;
use crate::error::ErrorCode;
use crate::ids::{BlockKind, BlockRef, Gci, NodeId, NodeSet, TransactionId};
use crate::schema::TableDef;
use crate::section::{Section, SectionPool};
use crate::signals::{
    ApiToken, LockMode, OperationKind, PartitionMap, ReadRow, ReplicaChain, MAX_REPLICAS,
};
use std::sync::Arc;

/// Where a decoder takes the sections of the signals it decodes: the whole
/// pool (data-node links, files), or all but its reserve (API requests,
/// `SectionPool::alloc_leaving_reserve`).
#[derive(Clone, Copy)]
pub struct Sections {
    pool: &'static SectionPool,
    leave_reserve: bool,
}

impl Sections {
    /// Every buffer of `pool`.
    pub fn all(pool: &'static SectionPool) -> Sections {
        Sections {
            pool,
            leave_reserve: false,
        }
    }

    /// `pool` but its reserve.
    pub fn leaving_reserve(pool: &'static SectionPool) -> Sections {
        Sections {
            pool,
            leave_reserve: true,
        }
    }

    /// A section holding `bytes`; `None` when the pool (or all of it but
    /// the reserve) is exhausted.
    #[inline]
    pub fn copy_from(self, bytes: &[u8]) -> Option<Section> {
        if self.leave_reserve {
            self.pool.copy_from_leaving_reserve(bytes)
        } else {
            self.pool.copy_from(bytes)
        }
    }
}

/// One field of a wire signal: its bytes and its checks. `what` names the
/// field ("TcKeyReq kind") in the error a bad value gets.
pub trait Field: Sized {
    /// Appends the field.
    fn put(&self, writer: &mut Writer<'_>);
    /// Reads the field and checks its value; sections come from `sections`.
    fn take(
        reader: &mut Reader<'_>,
        sections: Sections,
        what: &'static str,
    ) -> Result<Self, WireError>;
}

macro_rules! integer_field {
    ($($type:ident),*) => {$(
        impl Field for $type {
            #[inline]
            fn put(&self, writer: &mut Writer<'_>) {
                writer.$type(*self);
            }
            #[inline]
            fn take(
                reader: &mut Reader<'_>,
                _sections: Sections,
                _what: &'static str,
            ) -> Result<Self, WireError> {
                reader.$type()
            }
        }
    )*};
}

integer_field!(u8, u16, u32, u64);

macro_rules! u64_newtype_field {
    ($($type:ident),*) => {$(
        impl Field for $type {
            #[inline]
            fn put(&self, writer: &mut Writer<'_>) {
                writer.u64(self.0);
            }
            #[inline]
            fn take(
                reader: &mut Reader<'_>,
                _sections: Sections,
                _what: &'static str,
            ) -> Result<Self, WireError> {
                Ok($type(reader.u64()?))
            }
        }
    )*};
}

u64_newtype_field!(TransactionId, Gci, KeyHash);

/// Bytes of a fixed length (nonces, proofs): any value is valid.
impl<const N: usize> Field for [u8; N] {
    #[inline]
    fn put(&self, writer: &mut Writer<'_>) {
        writer.fixed(self);
    }
    #[inline]
    fn take(
        reader: &mut Reader<'_>,
        _sections: Sections,
        _what: &'static str,
    ) -> Result<Self, WireError> {
        reader.fixed()
    }
}

/// The allocation number, then the MAC.
impl Field for ApiToken {
    #[inline]
    fn put(&self, writer: &mut Writer<'_>) {
        writer.u64(self.allocation);
        writer.fixed(&self.mac);
    }
    #[inline]
    fn take(
        reader: &mut Reader<'_>,
        _sections: Sections,
        _what: &'static str,
    ) -> Result<Self, WireError> {
        Ok(ApiToken {
            allocation: reader.u64()?,
            mac: reader.fixed()?,
        })
    }
}

/// A u8 that must be 0 or 1.
impl Field for bool {
    #[inline]
    fn put(&self, writer: &mut Writer<'_>) {
        writer.u8(*self as u8);
    }
    #[inline]
    fn take(
        reader: &mut Reader<'_>,
        _sections: Sections,
        what: &'static str,
    ) -> Result<Self, WireError> {
        flag(reader, what)
    }
}

/// A u8 that must be 0 or 1.
pub(super) fn flag(reader: &mut Reader<'_>, what: &'static str) -> Result<bool, WireError> {
    match reader.u8()? {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(WireError::BadField(what)),
    }
}

/// A node id: u16 in 1..=255.
impl Field for NodeId {
    fn put(&self, writer: &mut Writer<'_>) {
        writer.u16(self.0);
    }
    fn take(
        reader: &mut Reader<'_>,
        _sections: Sections,
        what: &'static str,
    ) -> Result<Self, WireError> {
        node_id(reader, what)
    }
}

/// A set of data nodes: u128 as two u64 (low half first); bit 0 (no
/// node has id 0) must be clear.
impl Field for NodeSet {
    fn put(&self, writer: &mut Writer<'_>) {
        writer.u64(self.bits() as u64);
        writer.u64((self.bits() >> 64) as u64);
    }
    fn take(
        reader: &mut Reader<'_>,
        _sections: Sections,
        what: &'static str,
    ) -> Result<Self, WireError> {
        let low = u128::from(reader.u64()?);
        let high = u128::from(reader.u64()?);
        NodeSet::from_bits(high << 64 | low).ok_or(WireError::BadField(what))
    }
}

/// A node id that must be in 1..=255.
pub(super) fn node_id(reader: &mut Reader<'_>, what: &'static str) -> Result<NodeId, WireError> {
    let node = reader.u16()?;
    if (1..=255).contains(&node) {
        Ok(NodeId(node))
    } else {
        Err(WireError::BadField(what))
    }
}

/// A block address (node u16 in 1..=255, kind u8, instance u16: 5 bytes),
/// for signals that name a block other than their sender (the
/// coordinating tc). The kind is any wire kind; a signal that expects one
/// in particular checks it.
impl Field for BlockRef {
    fn put(&self, writer: &mut Writer<'_>) {
        writer.u16(self.node.0);
        writer.u8(self.kind as u8);
        writer.u16(self.instance);
    }
    fn take(
        reader: &mut Reader<'_>,
        _sections: Sections,
        what: &'static str,
    ) -> Result<Self, WireError> {
        let node = node_id(reader, what)?;
        let kind = BlockKind::from_u8(reader.u8()?).ok_or(WireError::BadField(what))?;
        Ok(BlockRef::new(node, kind, reader.u16()?))
    }
}

/// A replica chain: length u8 in 1..=4, then four u16 node slots (9
/// bytes): that many distinct node ids in 1..=255, the unused slots 0.
impl Field for ReplicaChain {
    fn put(&self, writer: &mut Writer<'_>) {
        let nodes = self.as_slice();
        writer.u8(nodes.len() as u8);
        for slot in 0..MAX_REPLICAS {
            writer.u16(nodes.get(slot).map_or(0, |node| node.0));
        }
    }
    fn take(
        reader: &mut Reader<'_>,
        _sections: Sections,
        _what: &'static str,
    ) -> Result<Self, WireError> {
        let length = reader.u8()? as usize;
        if !(1..=MAX_REPLICAS).contains(&length) {
            return Err(WireError::BadField("replica chain length"));
        }
        let mut nodes = [NodeId(0); MAX_REPLICAS];
        for slot in 0..MAX_REPLICAS {
            if slot < length {
                let node = node_id(reader, "replica chain node")?;
                if nodes[..slot].contains(&node) {
                    return Err(WireError::BadField("replica chain node twice"));
                }
                nodes[slot] = node;
            } else if reader.u16()? != 0 {
                return Err(WireError::BadField("unused replica chain slot"));
            }
        }
        Ok(ReplicaChain::new(&nodes[..length]))
    }
}

macro_rules! enum_field {
    ($($type:ident: $width:ident, $decode:ident;)*) => {$(
        impl Field for $type {
            #[inline]
            fn put(&self, writer: &mut Writer<'_>) {
                writer.$width(*self as $width);
            }
            #[inline]
            fn take(
                reader: &mut Reader<'_>,
                _sections: Sections,
                what: &'static str,
            ) -> Result<Self, WireError> {
                $type::$decode(reader.$width()?).ok_or(WireError::BadField(what))
            }
        }
    )*};
}

enum_field! {
    OperationKind: u8, from_u8;
    LockMode: u8, from_u8;
    ErrorCode: u16, from_u16;
}

/// A section: u32 length, then the bytes, copied into a pooled buffer.
impl Field for Section {
    #[inline]
    fn put(&self, writer: &mut Writer<'_>) {
        writer.bytes32(self.as_slice());
    }
    #[inline]
    fn take(
        reader: &mut Reader<'_>,
        sections: Sections,
        _what: &'static str,
    ) -> Result<Self, WireError> {
        let bytes = reader.bytes32()?;
        sections.copy_from(bytes).ok_or(WireError::OutOfSections)
    }
}

/// A flag u8 (0 or 1), then the value when the flag is 1.
impl<T: Field> Field for Option<T> {
    #[inline]
    fn put(&self, writer: &mut Writer<'_>) {
        writer.u8(self.is_some() as u8);
        if let Some(value) = self {
            value.put(writer);
        }
    }
    #[inline]
    fn take(
        reader: &mut Reader<'_>,
        sections: Sections,
        what: &'static str,
    ) -> Result<Self, WireError> {
        if flag(reader, what)? {
            Ok(Some(T::take(reader, sections, what)?))
        } else {
            Ok(None)
        }
    }
}

/// The read's client op (u32), then its row as a section.
impl Field for ReadRow {
    #[inline]
    fn put(&self, writer: &mut Writer<'_>) {
        writer.u32(self.client_op);
        writer.bytes32(self.data.as_slice());
    }
    fn take(
        reader: &mut Reader<'_>,
        sections: Sections,
        what: &'static str,
    ) -> Result<Self, WireError> {
        Ok(ReadRow {
            client_op: reader.u32()?,
            data: Section::take(reader, sections, what)?,
        })
    }
}

/// A table definition, as a section built in place (`TableDef::encode`)
/// and checked whole.
impl Field for Arc<TableDef> {
    fn put(&self, writer: &mut Writer<'_>) {
        writer.section_with(|writer| self.encode(writer));
    }
    fn take(
        reader: &mut Reader<'_>,
        _sections: Sections,
        _what: &'static str,
    ) -> Result<Self, WireError> {
        let table = TableDef::decode(reader.bytes32()?)
            .map_err(|_| WireError::BadField("table definition"))?;
        Ok(Arc::new(table))
    }
}

/// A partition map, as a section built in place and checked whole
/// (`codec::decode_partition_map`).
impl Field for Arc<PartitionMap> {
    fn put(&self, writer: &mut Writer<'_>) {
        writer.section_with(|writer| write_partition_map(writer, self));
    }
    fn take(
        reader: &mut Reader<'_>,
        _sections: Sections,
        _what: &'static str,
    ) -> Result<Self, WireError> {
        Ok(Arc::new(decode_partition_map(reader.bytes32()?)?))
    }
}
