//! Start phases (NDB NDBCNTR's STTOR phases): the order in which the blocks
//! of a node come up, so that no block uses another before it is ready.
//!
//! Membership runs the phases one after the other: it sends
//! `StartPhaseReq{phase}` to every block of the node (dict, dih, each tc, each
//! ldm), waits for a `StartPhaseConf{phase}` from each, then goes on.
//!
//! The phases and what each block does in them are listed in
//! `signal::phases` (re-exported here), where every block finds the numbers.
//! Cluster formation (`formation.rs`) runs between phase 1 and phase 2.
//!
//! After the last phase the node is started: it serves transactions and API
//! nodes registering are told so. Node restart will add phases (join the replica
//! chains, copy from a live replica): add them to `PHASES` in order, and
//! the blocks that take part answer their number.

pub use signal::phases::*;

/// Where the node's start stands.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum StartState {
    /// Waiting for the runtime's phase 0.
    NotStarted,
    /// Running `PHASES[index]`; waiting for the blocks' confs.
    Running {
        /// Index into [`PHASES`].
        index: usize,
    },
    /// Phase 1 ran; waiting until every data node is connected and the
    /// president confirms the cluster is formed.
    Forming,
    /// Every phase ran; the node serves.
    Started,
    /// A restarting node, admitted into the running cluster as a starting
    /// member, ran every phase of its node restart
    /// (docs/design/0018-node-restart.md): it copied, checkpointed and
    /// records complete GCIs again; it waits for the membership round that
    /// ends its start.
    Admitted,
    /// The node was declared failed, or its side of a split may not
    /// continue (`failure`): it serves nothing more in this incarnation.
    ShutDown,
}
