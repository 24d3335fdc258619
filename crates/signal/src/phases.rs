//! Start phases (NDB NDBCNTR's STTOR phases): the numbers every block
//! compares `StartPhaseReq::phase` against. Membership runs them in order
//! (`membership::start` documents the protocol); each block answers every
//! phase and does its part in the ones named here.
//!
//! | phase | name                 | what the blocks do |
//! |-------|----------------------|--------------------|
//! | 0     | [`BEGIN`]            | the runtime hands membership this phase (from itself) to begin; no block sees it |
//! | 1     | [`INITIALISE`]       | every block initialises its own state; dih reads the system file, dict the schema file; none talks to another node yet |
//! | -     | cluster formation    | membership alone: every data node connected, registered with the president |
//! | 2     | [`RESTART_GCI`]      | the dihs agree on the restored GCI: the highest any system file records complete (0: an initial start) |
//! | 3     | [`RESTORE_SCHEMA`]   | the dicts agree on the master's schema (SCHEMA_SYNC; a differing follower rewrites its file); dict gives the local tcs and ldms its tables |
//! | 4     | [`RESTORE_DATA`]     | dih has each local ldm restore up to the restored GCI (or format its redo log on an initial start); the master learns the highest GCI on any disk |
//! | 5     | [`SCHEMA`]           | dict and dih take schema requests (create and drop table) |
//! | 6     | [`GLOBAL_CHECKPOINT`] | the master dih starts the GCI protocol above every GCI on disk; every tc gets its first GCI |
//! | 7     | [`COPY_DATA`]        | node restart only: dih marks its system file as restoring nothing; each ldm copies what changed since its restored GCI from its partitions' primaries |
//! | 8     | [`LOCAL_CHECKPOINT`] | node restart only: each ldm writes a local checkpoint of every partition |
//! | 9     | [`RECORD_GCI`]       | node restart only: dih has the master record complete GCIs in its system file again, from one the checkpoints cover |
//!
//! Phases from 2 on run only once the cluster is formed: blocks talk to
//! other nodes from then on. A node restart runs them too, once the
//! running cluster admitted the node, each block in its node-restart form
//! (the block finds its own node among the membership's starting ones).

/// The phase the runtime sends membership to itself to begin a start.
pub const BEGIN: u8 = 0;
/// Blocks initialise their own state and read their own files.
pub const INITIALISE: u8 = 1;
/// The dihs agree on the restored GCI.
pub const RESTART_GCI: u8 = 2;
/// dict hands the stored tables to the local tcs and ldms.
pub const RESTORE_SCHEMA: u8 = 3;
/// Each ldm restores its partitions (or formats its redo on an initial start).
pub const RESTORE_DATA: u8 = 4;
/// dict and dih take schema requests from here on.
pub const SCHEMA: u8 = 5;
/// dih starts switching GCIs; tcs get their first GCI.
pub const GLOBAL_CHECKPOINT: u8 = 6;
/// Node restart only: each ldm copies its partitions from their primaries
/// (docs/design/0018-node-restart.md); at a system restart it does nothing.
pub const COPY_DATA: u8 = 7;
/// Node restart only: each ldm checkpoints every partition.
pub const LOCAL_CHECKPOINT: u8 = 8;
/// Node restart only: the node's system file records complete GCIs again.
pub const RECORD_GCI: u8 = 9;

/// The name of phase `phase`, for logs and `show`.
pub fn name(phase: u8) -> &'static str {
    match phase {
        BEGIN => "begin",
        INITIALISE => "initialise",
        RESTART_GCI => "restart GCI",
        RESTORE_SCHEMA => "restore schema",
        RESTORE_DATA => "restore data",
        SCHEMA => "schema",
        GLOBAL_CHECKPOINT => "global checkpoint",
        COPY_DATA => "copy data",
        LOCAL_CHECKPOINT => "local checkpoint",
        RECORD_GCI => "record GCI",
        _ => "unknown",
    }
}

/// The phases every block runs, in order.
pub const PHASES: &[u8] = &[
    INITIALISE,
    RESTART_GCI,
    RESTORE_SCHEMA,
    RESTORE_DATA,
    SCHEMA,
    GLOBAL_CHECKPOINT,
    COPY_DATA,
    LOCAL_CHECKPOINT,
    RECORD_GCI,
];

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
