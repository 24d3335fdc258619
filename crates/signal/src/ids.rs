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
