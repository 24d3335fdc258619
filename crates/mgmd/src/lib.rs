//! mgmd: the management server (NDB's ndb_mgmd) and its clients. The server
//! serves the cluster config, hands out API node ids, knows which data
//! nodes are up and what they last reported, and answers the management
//! protocol: newline-delimited JSON over TCP, documented in
//! `docs/mgm-protocol.md`. The clients are `client::MgmClient` (tools, API
//! nodes), `client::DataNodeSession` (a data node's registration) and
//! `mgm::run_command` (the `tessera mgm` commands).

pub mod client;
mod error;
pub mod mgm;
mod server;
mod wire;

pub use error::{MgmdError, KNOWN_COMMANDS};
pub use server::{run_server, start_server, start_server_with, MgmdHandle, ServerOptions};
pub use wire::MAX_LINE_BYTES;
