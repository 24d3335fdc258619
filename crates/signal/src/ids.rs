//! Typed identifiers: nodes, blocks and block instances, GCIs, transactions.

use std::fmt;

/// A node of the cluster: mgmd, data node or API node (1..=255).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct NodeId(pub u16);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The kinds of blocks (docs/design/processes-and-blocks.md §2). `Api` is
/// the block of an API node (the client); signals to it leave the data node
/// through the send path.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
#[repr(u8)]
pub enum BlockKind {
    /// Transaction coordinator (NDB DBTC).
    Tc = 1,
    /// Local data manager (NDB DBLQH+DBACC+DBTUP+DBTUX).
    Ldm = 2,
    /// Distribution and global checkpoints (NDB DBDIH).
    Dih = 3,
    /// Schema (NDB DBDICT).
    Dict = 4,
    /// Heartbeats, start phases, API registration (NDB QMGR+NDBCNTR).
    Membership = 5,
    /// An API node (client).
    Api = 6,
    /// The node's file service (NDB NDBFS): the io thread in production,
    /// the disk model in `sim`. Node-local: blocks reach it through
    /// `Context::fs_request`, and it is no wire value (`from_u8` never
    /// decodes it), so no other node can address it.
    Io = 7,
}

impl BlockKind {
    /// Decodes a wire byte (never [`BlockKind::Io`], which is node-local).
    pub fn from_u8(value: u8) -> Option<BlockKind> {
        Some(match value {
            1 => BlockKind::Tc,
            2 => BlockKind::Ldm,
            3 => BlockKind::Dih,
            4 => BlockKind::Dict,
            5 => BlockKind::Membership,
            6 => BlockKind::Api,
            _ => return None,
        })
    }

    /// Lower-case name, as in reports.
    pub fn name(self) -> &'static str {
        match self {
            BlockKind::Tc => "tc",
            BlockKind::Ldm => "ldm",
            BlockKind::Dih => "dih",
            BlockKind::Dict => "dict",
            BlockKind::Membership => "membership",
            BlockKind::Api => "api",
            BlockKind::Io => "io",
        }
    }
}

/// The address of one block instance on one node.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct BlockRef {
    /// Node the block lives on.
    pub node: NodeId,
    /// Which block.
    pub kind: BlockKind,
    /// Instance number (ldm and tc have one per thread; others 0).
    pub instance: u16,
}

impl BlockRef {
    /// Shorthand constructor.
    pub const fn new(node: NodeId, kind: BlockKind, instance: u16) -> BlockRef {
        BlockRef {
            node,
            kind,
            instance,
        }
    }
}

impl fmt::Display for BlockRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}#{}", self.node, self.kind.name(), self.instance)
    }
}

/// A global checkpoint id: the global checkpoint number in the high 32 bits,
/// the epoch within it in the low 32 bits (docs/design/durability.md §1).
/// Ordered as a u64.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default)]
pub struct Gci(pub u64);

impl Gci {
    /// Builds a GCI from its halves.
    pub const fn from_parts(high: u32, low: u32) -> Gci {
        Gci(((high as u64) << 32) | low as u64)
    }
    /// Global checkpoint number (the unit made durable).
    pub const fn high(self) -> u32 {
        (self.0 >> 32) as u32
    }
    /// Epoch within the global checkpoint.
    pub const fn low(self) -> u32 {
        self.0 as u32
    }
}

impl fmt::Display for Gci {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.high(), self.low())
    }
}

/// A transaction id, chosen by the client and unique per client connection:
/// the API node id in the top 16 bits, a counter below.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct TransactionId(pub u64);

impl TransactionId {
    /// The API node that started the transaction.
    pub const fn api_node(self) -> NodeId {
        NodeId((self.0 >> 48) as u16)
    }
}

/// A set of data nodes (ids 1..=127, `config::MAX_DATA_NODE_ID`): one bit
/// per id. Memberships and failed sets travel in this form.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NodeSet(u128);

/// The highest node id a [`NodeSet`] holds.
pub const NODE_SET_MAX: u16 = 127;

impl NodeSet {
    /// The empty set.
    pub const EMPTY: NodeSet = NodeSet(0);

    /// The set of `nodes`. Panics on an id outside 1..=127: data node ids
    /// are checked by the config, so one out of range is a bug.
    pub fn of(nodes: impl IntoIterator<Item = NodeId>) -> NodeSet {
        let mut set = NodeSet::EMPTY;
        for node in nodes {
            set.insert(node);
        }
        set
    }

    /// The set of bits `bits` (bit `id` for node `id`), if bit 0 is clear.
    pub const fn from_bits(bits: u128) -> Option<NodeSet> {
        if bits & 1 == 0 {
            Some(NodeSet(bits))
        } else {
            None
        }
    }

    /// Bit `id` set for node `id`.
    pub const fn bits(self) -> u128 {
        self.0
    }

    /// Adds `node`.
    pub fn insert(&mut self, node: NodeId) {
        assert!(
            (1..=NODE_SET_MAX).contains(&node.0),
            "node {node} in a set of data nodes (ids 1..={NODE_SET_MAX})"
        );
        self.0 |= 1 << node.0;
    }

    /// Removes `node` (nothing if absent or out of range).
    pub fn remove(&mut self, node: NodeId) {
        if node.0 <= NODE_SET_MAX {
            self.0 &= !(1 << node.0);
        }
    }

    /// Whether `node` is in the set.
    pub const fn contains(self, node: NodeId) -> bool {
        node.0 <= NODE_SET_MAX && self.0 & (1 << node.0) != 0
    }

    /// How many nodes.
    pub const fn len(self) -> u32 {
        self.0.count_ones()
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The nodes in both.
    pub const fn intersection(self, other: NodeSet) -> NodeSet {
        NodeSet(self.0 & other.0)
    }

    /// The nodes in either.
    pub const fn union(self, other: NodeSet) -> NodeSet {
        NodeSet(self.0 | other.0)
    }

    /// The nodes of `self` not in `other`.
    pub const fn difference(self, other: NodeSet) -> NodeSet {
        NodeSet(self.0 & !other.0)
    }

    /// Whether every node of `self` is in `other`.
    pub const fn is_subset(self, other: NodeSet) -> bool {
        self.0 & !other.0 == 0
    }

    /// The lowest id, if any.
    pub fn first(self) -> Option<NodeId> {
        (self.0 != 0).then(|| NodeId(self.0.trailing_zeros() as u16))
    }

    /// The nodes, ascending.
    pub fn iter(self) -> impl Iterator<Item = NodeId> {
        let mut bits = self.0;
        std::iter::from_fn(move || {
            if bits == 0 {
                return None;
            }
            let id = bits.trailing_zeros() as u16;
            bits &= bits - 1;
            Some(NodeId(id))
        })
    }
}

impl fmt::Debug for NodeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(self.iter().map(|node| node.0))
            .finish()
    }
}

/// `{1, 3, 4}`.
impl fmt::Display for NodeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{")?;
        for (index, node) in self.iter().enumerate() {
            if index > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{node}")?;
        }
        write!(f, "}}")
    }
}

#[cfg(test)]
mod node_set_tests {
    use super::*;

    #[test]
    fn a_node_set_keeps_ids_in_order_and_refuses_bit_zero() {
        let set = NodeSet::of([NodeId(4), NodeId(1), NodeId(127)]);
        assert_eq!(
            set.iter().collect::<Vec<_>>(),
            [NodeId(1), NodeId(4), NodeId(127)]
        );
        assert_eq!(set.len(), 3);
        assert_eq!(set.first(), Some(NodeId(1)));
        assert!(set.contains(NodeId(127)) && !set.contains(NodeId(2)));
        assert!(!set.contains(NodeId(200)), "out of range is never in a set");
        let other = NodeSet::of([NodeId(4), NodeId(5)]);
        assert_eq!(set.difference(other), NodeSet::of([NodeId(1), NodeId(127)]));
        assert_eq!(set.intersection(other), NodeSet::of([NodeId(4)]));
        assert!(NodeSet::of([NodeId(4)]).is_subset(set));
        assert_eq!(set.to_string(), "{1, 4, 127}");
        assert_eq!(NodeSet::from_bits(1), None);
        assert_eq!(NodeSet::from_bits(set.bits()), Some(set));
    }
}
