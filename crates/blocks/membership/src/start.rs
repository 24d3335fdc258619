//! Start phases (NDB NDBCNTR's STTOR phases): the order in which the blocks
//! of a node come up, so that no block uses another before it is ready.
//!
//! Membership runs the phases one after the other: it sends
//! `StartPhaseReq{phase}` to every block of the node (dict, dih, each tc, each
//! ldm), waits for a `StartPhaseConf{phase}` from each, then goes on.
//!
//! | phase | name                | what the blocks do |
//! |-------|---------------------|--------------------|
//! | 0     | [`BEGIN`]           | the runtime hands membership this phase (from itself) to begin; no block sees it |
//! | 1     | [`INITIALISE`]      | every block initialises its own state; none talks to another yet |
//! | -     | cluster formation   | membership alone: every data node connected, registered with the president (`formation.rs`) |
//! | 2     | [`SCHEMA`]          | dict and dih are ready to take schema requests (create and drop table) |
//! | 3     | [`GLOBAL_CHECKPOINT`] | the master dih starts the global checkpoint protocol; every tc of every node receives its first GCI (other dihs wait to hear of it) |
//!
//! Phases 2 and 3 run only once the cluster is formed: from phase 2 on,
//! blocks talk to other nodes (the master dict adds tables on every node,
//! the master dih switches the GCI of every tc).
//!
//! After the last phase the node is started: it serves transactions and API
//! nodes registering are told so. Node restart will add phases (restore from
//! disk, join the replica chains, copy from a live replica) between these:
//! add them to [`PHASES`] in order, and the blocks that take part answer
//! their number.

/// The phase the runtime sends membership to itself to begin a start.
pub const BEGIN: u8 = 0;
/// Blocks initialise their own state.
pub const INITIALISE: u8 = 1;
/// dict and dih take schema requests from here on.
pub const SCHEMA: u8 = 2;
/// dih starts switching GCIs; tcs get their first GCI.
pub const GLOBAL_CHECKPOINT: u8 = 3;

/// The phases every block runs, in order.
pub const PHASES: &[u8] = &[INITIALISE, SCHEMA, GLOBAL_CHECKPOINT];

// Phases are sent in increasing order and blocks compare against them.
const _: () = {
    let mut index = 1;
    while index < PHASES.len() {
        assert!(
            PHASES[index - 1] < PHASES[index],
            "start phases must increase"
        );
        index += 1;
    }
    assert!(PHASES[0] > BEGIN, "phase 0 only begins the start");
};

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
}
