//! datanode: a data node process (NDB's ndbmtd). Wires config to blocks,
//! blocks to threads, threads to job queues, and the node to its sockets
//! and to mgmd (docs/design/processes-and-blocks.md).
//!
//! - `wiring`: config -> blocks (shared with the simulator);
//! - `runtime`: blocks -> threads (ldm, tc, main, recv, send, io) and the mesh;
//! - `io`: the io thread, the node's file service (`Context::fs_request`)
//!   and its way to the arbitrator (`arbiter`);
//! - `status`: what the node reports to mgmd.

pub mod arbiter;
pub mod io;
pub mod runtime;
pub mod status;
pub mod wiring;

pub use runtime::{
    run, NodeOptions, StartFailure, DAMAGED_FILES_EXIT_CODE, MGMD_UNREACHABLE_EXIT_CODE,
    RESTART_EXIT_CODE, RESTART_INITIAL_EXIT_CODE, STOPPED_EXIT_CODE,
};
