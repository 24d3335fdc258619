//! mgmclient: the clients of the management server (mgmd) and the
//! protocol they speak, newline-delimited JSON over TCP
//! (`docs/mgm-protocol.md`), without the server: `client::MgmClient` (tools
//! and API nodes: the config, node id allocation, status), `client::
//! DataNodeSession` (a data node's registration and status pushes) and
//! `mgm::run_command` (the `tessera mgm` commands). API nodes depend on
//! this crate alone; the server (crate `mgmd`) shares its `wire` and errors.

pub mod client;
mod error;
pub mod mgm;
pub mod wire;

pub use error::{MgmdError, KNOWN_COMMANDS};
pub use wire::MAX_LINE_BYTES;
