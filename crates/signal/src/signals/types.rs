//! The types signals are made of that are not signals themselves: the
//! envelope a signal travels in, operation kinds and lock modes, the
//! flags of TCKEYREQ, replica chains, and partition maps.

use super::Signal;
use crate::ids::{BlockRef, NodeId, NodeSet};
use crate::section::Section;

/// A signal with its addresses: the unit of work of a block thread.
#[derive(Debug)]
pub struct Envelope {
    /// Sending block.
    pub from: BlockRef,
    /// Receiving block.
    pub to: BlockRef,
    /// The signal.
    pub signal: Signal,
}

/// The version of the API protocol (the signals an API node exchanges with
/// data nodes) that this build speaks: API_REGREQ carries it and a data
/// node refuses another with API_REGREF. 2: SCAN_REQ names a transaction.
pub const API_PROTOCOL_VERSION: u16 = 2;

/// What mgmd issued an API node with its id (docs/design/0007-groundwork.md,
/// "Authenticated admission"): the allocation's number and an HMAC-SHA256
/// under the cluster secret of the node id and that number. A data node
/// checks it in the API node's first API_REGREQ without asking mgmd. The
/// bytes are opaque to the API node; they are a credential, so `Debug`
/// does not print the MAC.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ApiToken {
    /// mgmd's number for this allocation of the id; rises with every
    /// allocation (data nodes refuse an older one of an id they have
    /// admitted a newer one of).
    pub allocation: u64,
    /// HMAC-SHA256 (the `admission` crate computes and checks it).
    pub mac: [u8; 32],
}

impl ApiToken {
    /// No token: what a client that was given none sends. No data node
    /// admits it (a real MAC is never all zeros but with negligible
    /// chance); only test stand-ins for data nodes do.
    pub const NONE: ApiToken = ApiToken {
        allocation: 0,
        mac: [0; 32],
    };
}

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiToken")
            .field("allocation", &self.allocation)
            .finish_non_exhaustive()
    }
}

/// What an operation does to its row.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum OperationKind {
    /// Read the row (lock per [`LockMode`]).
    Read = 1,
    /// Insert a new row; fails with DuplicateKey if the key exists.
    Insert = 2,
    /// Change columns of an existing row; fails with NoSuchRow.
    Update = 3,
    /// Insert or overwrite (upsert).
    Write = 4,
    /// Delete an existing row; fails with NoSuchRow.
    Delete = 5,
    /// Add to integer columns of an existing row, in one round trip
    /// (`UPDATE t SET k = k + 1 WHERE id = ?`): each attribute entry names
    /// an INT or BIGINT column and holds an 8-byte signed delta
    /// ([`crate::attr::add_to_integer`]). The column must hold a value
    /// and the sum must fit its type, else ValueOutOfRange; fails with
    /// NoSuchRow. The primary computes the after-image, and its backups
    /// get that image as an Update.
    Increment = 6,
}

impl OperationKind {
    /// Decodes a wire byte.
    pub fn from_u8(value: u8) -> Option<OperationKind> {
        Some(match value {
            1 => OperationKind::Read,
            2 => OperationKind::Insert,
            3 => OperationKind::Update,
            4 => OperationKind::Write,
            5 => OperationKind::Delete,
            6 => OperationKind::Increment,
            _ => return None,
        })
    }
}

/// How a read locks. Writes always take an exclusive lock.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum LockMode {
    /// Read the last committed image without a lock (read committed).
    CommittedRead = 0,
    /// Shared lock held until commit or abort.
    Shared = 1,
    /// Exclusive lock held until commit or abort.
    Exclusive = 2,
}

impl LockMode {
    /// Decodes a wire byte.
    pub fn from_u8(value: u8) -> Option<LockMode> {
        Some(match value {
            0 => LockMode::CommittedRead,
            1 => LockMode::Shared,
            2 => LockMode::Exclusive,
            _ => return None,
        })
    }
}

/// Flags of [`TcKeyReq`].
pub mod tc_key_flags {
    /// First operation of a new transaction.
    pub const START: u8 = 1;
    /// Last operation of a batch: execute the batch and answer.
    pub const EXECUTE: u8 = 2;
    /// Commit once the batch has executed (implies EXECUTE).
    pub const COMMIT: u8 = 4;
    /// A read whose row does not exist returns no row instead of failing
    /// (and aborting) the transaction: how a locking scan locks rows it saw
    /// that may have been deleted since (NDB's AO_IgnoreError on a read).
    /// Reads only.
    pub const IGNORE_MISSING: u8 = 8;
    /// A read of a unique index's hidden table answered with the row the
    /// hidden row names, in one round trip (the tc reads both, with the
    /// read's lock; a committed read is answered only if the row still
    /// holds the index's values): the key is the index's values, the
    /// attribute section the projection of the base table's columns.
    /// Reads of a hidden table only.
    pub const THROUGH_UNIQUE_INDEX: u8 = 16;
    /// A locking read whose row another transaction holds locked fails at
    /// once with LockNotAvailable, aborting the transaction, instead of
    /// waiting (SQL's NOWAIT). Locking reads only.
    pub const NO_WAIT: u8 = 32;
    /// A locking read whose row another transaction holds locked returns
    /// no row at once and the transaction goes on (SQL's SKIP LOCKED).
    /// Locking reads only.
    pub const SKIP_LOCKED: u8 = 64;
    /// Every flag a client may set.
    pub const ALL: u8 =
        START | EXECUTE | COMMIT | IGNORE_MISSING | THROUGH_UNIQUE_INDEX | NO_WAIT | SKIP_LOCKED;
}

/// Flags and limits of a [`ScanReq`](super::ScanReq).
pub mod scan_flags {
    /// The low bound is inclusive (else exclusive).
    pub const LOW_INCLUSIVE: u8 = 1;
    /// The high bound is inclusive (else exclusive).
    pub const HIGH_INCLUSIVE: u8 = 2;
    /// From the high bound down to the low one.
    pub const DESCENDING: u8 = 4;
    /// Resume where the last answer said.
    pub const RESUME: u8 = 8;
    /// Return only how many rows met the filter, no rows.
    pub const COUNT: u8 = 16;
    /// Every flag a client may set.
    pub const ALL: u8 = LOW_INCLUSIVE | HIGH_INCLUSIVE | DESCENDING | RESUME | COUNT;
    /// The `index` of a scan in row-id order (a full scan, no bounds).
    pub const ROW_ORDER: u32 = u32::MAX;
    /// The most bytes of rows a batch carries.
    pub const MAX_BATCH_BYTES: u32 = 128 * 1024;
    /// The bytes of rows a batch carries when the request says 0.
    pub const DEFAULT_BATCH_BYTES: u32 = 32 * 1024;
}

/// Steps of a [`ResolveReq`].
pub mod resolve_step {
    /// Commit where still prepared (last replica back to the first).
    pub const COMMIT: u8 = 0;
    /// Complete where still committed (last replica back to the first).
    pub const COMPLETE: u8 = 1;
    /// Abort where still prepared or waiting (first replica to the last).
    pub const ABORT: u8 = 2;
}

/// Why the president refused a node restart's CM_REGREQ for now
/// ([`CmRegRef`]): the node asks again a moment later.
pub mod join_refusal {
    /// Another node is in its node restart (one at a time).
    pub const ANOTHER_NODE_STARTING: u8 = 1;
    /// A membership change is being agreed or handled.
    pub const MEMBERSHIP_CHANGING: u8 = 2;
    /// The joining node is not connected to every member yet.
    pub const NOT_CONNECTED: u8 = 3;
    /// The president itself has not finished starting.
    pub const PRESIDENT_NOT_STARTED: u8 = 4;

    /// The reason in words, for the joining node's log.
    pub fn describe(reason: u8) -> &'static str {
        match reason {
            ANOTHER_NODE_STARTING => "another node is in its node restart",
            MEMBERSHIP_CHANGING => "a membership change is being agreed",
            NOT_CONNECTED => "this node is not connected to every member yet",
            PRESIDENT_NOT_STARTED => "the president has not finished starting",
            _ => "an unknown reason",
        }
    }
}

/// States of an operation in a [`TakeoverOpRep`].
pub mod takeover_state {
    /// Queued on a row lock.
    pub const WAITING: u8 = 0;
    /// Prepared: lock held, after-image kept.
    pub const PREPARED: u8 = 1;
    /// Committed at the report's GCI, not yet completed.
    pub const COMMITTED: u8 = 2;
}

/// The row of one read operation, inside a [`TcKeyConf`].
#[derive(Debug, PartialEq)]
pub struct ReadRow {
    /// The read operation.
    pub client_op: u32,
    /// Attribute entries of the row.
    pub data: Section,
}

/// Most replicas a partition may have.
pub const MAX_REPLICAS: usize = 4;

/// The replicas of a partition in chain order, primary first (docs/design/transactions.md §3).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ReplicaChain {
    /// Nodes; only the first `length` are meaningful.
    pub nodes: [NodeId; MAX_REPLICAS],
    /// Number of replicas (1..=4).
    pub length: u8,
}

impl ReplicaChain {
    /// A chain of the given nodes (1..=4 of them).
    pub fn new(nodes: &[NodeId]) -> ReplicaChain {
        assert!(
            (1..=MAX_REPLICAS).contains(&nodes.len()),
            "a replica chain has 1 to {MAX_REPLICAS} nodes"
        );
        let mut chain = [NodeId(0); MAX_REPLICAS];
        chain[..nodes.len()].copy_from_slice(nodes);
        ReplicaChain {
            nodes: chain,
            length: nodes.len() as u8,
        }
    }

    /// The primary replica.
    pub fn primary(&self) -> NodeId {
        self.nodes[0]
    }

    /// The replicas in chain order.
    pub fn as_slice(&self) -> &[NodeId] {
        &self.nodes[..self.length as usize]
    }

    /// The last replica (COMMIT and COMPLETE enter there).
    pub fn last(&self) -> NodeId {
        self.nodes[self.length as usize - 1]
    }

    /// Whether a node of `failed` is in the chain.
    pub fn touches(&self, failed: NodeSet) -> bool {
        !failed.is_empty() && self.as_slice().iter().any(|&node| failed.contains(node))
    }

    /// Whether every replica of the chain is in `failed` (no live one is
    /// left); cheap when nothing failed.
    pub fn all_failed(&self, failed: NodeSet) -> bool {
        !failed.is_empty() && self.as_slice().iter().all(|&node| failed.contains(node))
    }

    /// The chain without the nodes of `failed`, in the same order; `None`
    /// when every replica failed.
    pub fn without(&self, failed: NodeSet) -> Option<ReplicaChain> {
        let mut live = ReplicaChain {
            nodes: [NodeId(0); MAX_REPLICAS],
            length: 0,
        };
        for &node in self.as_slice() {
            if !failed.contains(node) {
                live.nodes[live.length as usize] = node;
                live.length += 1;
            }
        }
        (live.length > 0).then_some(live)
    }

    /// The chain with `node` added last (a restarting replica, which a
    /// primary adds to every write while copying to it). A chain that
    /// is full (every configured replica) cannot lack a replica: a bug.
    pub fn appended(&self, node: NodeId) -> ReplicaChain {
        let length = self.length as usize;
        assert!(
            length < MAX_REPLICAS,
            "a chain of {MAX_REPLICAS} replicas {:?} cannot take node {node} too",
            self.as_slice()
        );
        let mut chain = *self;
        chain.nodes[length] = node;
        chain.length += 1;
        chain
    }

    /// Only the primary (reads, and writes with one replica).
    pub fn primary_only(&self) -> ReplicaChain {
        ReplicaChain::new(&self.nodes[..1])
    }
}

/// Where one partition lives (docs/design/data-and-routing.md §6).
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionPlacement {
    /// Node group holding the partition.
    pub node_group: u32,
    /// Replicas in chain order; the first is the primary.
    pub replicas: Vec<NodeId>,
    /// The ldm instance on each replica's node that owns the partition.
    pub ldm_instance: u16,
    /// The redo log part the partition writes, fixed at creation.
    pub redo_part: u32,
}

/// A table's distribution: buckets to partitions, partitions to replicas.
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionMap {
    /// Table.
    pub table_id: u32,
    /// Rises whenever the map changes.
    pub version: u32,
    /// Partition of each of the `partition::BUCKETS` buckets.
    pub bucket_partitions: Vec<u32>,
    /// Placement of each partition.
    pub partitions: Vec<PartitionPlacement>,
}

/// One partition's chain under an agreed membership: its replicas as
/// created (`created`) that serve, in that order, but those that came
/// back by a node restart (`returned`) after the others. The one rule for
/// every block that needs a partition's primary ([`PartitionMap::routed`]
/// for routing, a restarting ldm for its copy source), so they never
/// disagree on it.
pub fn routed_chain(created: &[NodeId], serving: NodeSet, returned: NodeSet) -> Vec<NodeId> {
    let serves = |node: &&NodeId| serving.contains(**node);
    let first = created
        .iter()
        .filter(serves)
        .filter(|node| !returned.contains(**node));
    let last = created
        .iter()
        .filter(serves)
        .filter(|node| returned.contains(**node));
    first.chain(last).copied().collect()
}

impl PartitionMap {
    /// The map clients and tcs route with under an agreed membership:
    /// each partition's replicas that serve (members not starting), in
    /// the map's order, but the nodes that came back by a node restart
    /// (`returned`) after the others, so a restarted node never takes a
    /// primary role back while writes are in flight
    /// (docs/design/0018-node-restart.md); `version` is the membership's
    /// id. Panics if a partition would have no replica: the survival rule
    /// shuts such a side down first.
    pub fn routed(&self, serving: NodeSet, returned: NodeSet, version: u32) -> PartitionMap {
        let partitions = self
            .partitions
            .iter()
            .enumerate()
            .map(|(partition, placement)| {
                let replicas = routed_chain(&placement.replicas, serving, returned);
                assert!(
                    !replicas.is_empty(),
                    "partition {partition} of table {} has no replica serving ({:?} of {serving}): \
                     the survival rule lets no side without a whole node group continue",
                    self.table_id,
                    placement.replicas
                );
                PartitionPlacement {
                    replicas,
                    ..placement.clone()
                }
            })
            .collect();
        PartitionMap {
            table_id: self.table_id,
            version,
            bucket_partitions: self.bucket_partitions.clone(),
            partitions,
        }
    }

    /// The map with the data nodes of `failed` taken out of every chain
    /// (the next replica in chain order becomes primary where the primary
    /// failed), drawn for membership `membership_id`: its version becomes
    /// that id when a chain changed, and stays otherwise. Every node
    /// derives the same map from the same agreed memberships
    /// (docs/design/failures.md §6). Panics if a partition would lose
    /// every replica: the survival rule shuts such a side down before
    /// any block installs its membership.
    pub fn without(&self, failed: NodeSet, membership_id: u32) -> PartitionMap {
        let mut changed = false;
        let partitions = self
            .partitions
            .iter()
            .enumerate()
            .map(|(partition, placement)| {
                let replicas: Vec<NodeId> = placement
                    .replicas
                    .iter()
                    .copied()
                    .filter(|&node| !failed.contains(node))
                    .collect();
                assert!(
                    !replicas.is_empty(),
                    "partition {partition} of table {} lost every replica ({:?}): the \
                     survival rule lets no side without a whole node group continue",
                    self.table_id,
                    placement.replicas
                );
                changed |= replicas.len() != placement.replicas.len();
                PartitionPlacement {
                    replicas,
                    ..placement.clone()
                }
            })
            .collect();
        PartitionMap {
            table_id: self.table_id,
            version: if changed {
                self.version.max(membership_id)
            } else {
                self.version
            },
            bucket_partitions: self.bucket_partitions.clone(),
            partitions,
        }
    }
}

#[cfg(test)]
mod chain_tests {
    use super::*;

    #[test]
    fn a_chain_without_failed_nodes_keeps_the_order_of_the_rest() {
        let chain = ReplicaChain::new(&[NodeId(4), NodeId(2), NodeId(3)]);
        assert_eq!(chain.last(), NodeId(3));
        assert!(!chain.touches(NodeSet::EMPTY));
        assert!(!chain.touches(NodeSet::of([NodeId(5)])));
        assert!(chain.touches(NodeSet::of([NodeId(2), NodeId(5)])));
        let live = chain.without(NodeSet::of([NodeId(4)])).expect("two left");
        assert_eq!(live.as_slice(), &[NodeId(2), NodeId(3)]);
        assert_eq!((live.primary(), live.last()), (NodeId(2), NodeId(3)));
        assert_eq!(chain.without(NodeSet::EMPTY), Some(chain));
        assert_eq!(
            chain.without(NodeSet::of([NodeId(2), NodeId(3), NodeId(4)])),
            None
        );
    }
}
