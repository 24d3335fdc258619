//! mgmd: the management server (NDB's ndb_mgmd). It serves the cluster
//! config, hands out API node ids, knows which data nodes are up and what
//! they last reported, and answers the management protocol:
//! newline-delimited JSON over TCP, documented in `docs/mgm-protocol.md`.
//! The clients and the protocol's framing live in crate `mgmclient`
//! (re-exported here, so the server's users need one crate).

mod persist;
mod server;

pub use mgmclient::{client, mgm, wire, MgmdError, KNOWN_COMMANDS, MAX_LINE_BYTES};
pub use server::{
    run_server, start_server, start_server_with, MgmdHandle, ServerOptions, MAX_CONNECTIONS,
};
