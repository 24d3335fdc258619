//! signal: the vocabulary every part of Tessera speaks.
//!
//! Owns the typed ids (nodes, blocks, tables, GCIs), every signal type that
//! blocks exchange (named in NDB's REQ/CONF/REF/ORD/REP vocabulary), the wire
//! codec that frames signals on TCP (docs/wire-format.md), the pool of
//! sections that carry keys and row data without heap allocation, the table
//! schema, the attribute encoding, the partition hash shared by kernel and
//! client, the registry of error codes, the refusal every block gives an
//! API request it does not serve, and the reports blocks make of their own
//! counters (`reports`).
//!
//! Architecture invariant: `signal` depends on no other Tessera crate but
//! `stdx`. Blocks, transport and client all depend on it; it depends on none
//! of them.

pub mod attr;
pub mod codec;
pub mod error;
pub mod faults;
pub mod fs;
pub mod ids;
pub mod order;
pub mod partition;
pub mod phases;
pub mod refusal;
pub mod replica_check;
pub mod reports;
pub mod scan_bounds;
pub mod scan_program;
pub mod schema;
pub mod section;
pub mod signals;

pub use error::ErrorCode;
pub use ids::{BlockKind, BlockRef, Gci, NodeId, NodeSet, TransactionId, NODE_SET_MAX};
pub use section::{Section, SectionPool};
pub use signals::{Envelope, Signal};
