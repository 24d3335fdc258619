//! transport: moving frames of signals over TCP
//! (docs/design/processes-and-blocks.md §5). Holds the data node's receive
//! and send threads (NDB's recv and send threads; or their loops run on a
//! block thread, `on_block_thread`) with the registry of
//! connections they share: connections from API nodes, and one connection to
//! each other data node (dialed by the lower id, opened by a hello frame
//! carrying the node's incarnation).
//!
//! Wire format, byte by byte: docs/wire-format.md.
//!
//! Architecture invariant: transport knows signals and the kernel's queues,
//! never a block.

pub mod on_block_thread;
pub mod recv;
pub mod registry;
pub mod send;

pub use on_block_thread::NetworkOnThread;
pub use recv::{run_recv_thread, ApiHeartbeatLimits, DataNodePeer, RecvLoop, RecvSetup};
pub use registry::ConnectionRegistry;
pub use send::{run_send_thread, SendLoop, SendSetup};
