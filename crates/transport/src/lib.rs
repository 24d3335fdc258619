//! transport: moving frames of signals over TCP (DESIGN.md §2, "Between
//! nodes"). Holds the frame assembler shared by the data node and the client,
//! and the data node's receive and send threads.
//!
//! Architecture invariant: transport knows signals and the kernel's queues,
//! never a block.

pub mod assembler;
