//! Every signal blocks exchange, declared once in the table (`table/`,
//! one file a group of numbers) and
//! named in NDB's vocabulary (REQ asks, CONF answers yes, REF answers no,
//! ORD orders without answer, REP reports). Each declaration says the
//! signal's number, its senders and receivers, its class (API request, API
//! reply, between data nodes, node-local), the REF a misaddressed API
//! request is refused with, its fields (which are its wire form, in order)
//! and any check of the whole signal; `signal_table!` (in `declare`)
//! generates the rest. Adding a signal is one declaration here plus its
//! handlers (the recipe: docs/wire-format.md, "Adding a signal").
//!
//! Numbers are grouped by protocol, with room left in each group for the
//! signals still to come (node failures and take-over, node restart,
//! scans and indexes). Signals between blocks of one node move as Rust
//! values through the job queues; signals to another node or an API node
//! are encoded by `codec`. Signals holding an `Arc` are node-local.

#[macro_use]
mod declare;
#[macro_use]
mod table;
#[cfg(test)]
mod table_tests;
mod types;

pub use types::*;

use crate::attr::KeyHash;
use crate::codec::checks;
use crate::error::ErrorCode;
use crate::fs::{FsDone, FsError, FsOperation};
use crate::ids::{BlockRef, Gci, NodeId, NodeSet, TransactionId};
use crate::schema::TableDef;
use crate::section::Section;
use std::sync::Arc;

/// Who sends a signal and where it may travel.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SignalClass {
    /// An API node sends it to one kind of block of a data node.
    ApiRequest,
    /// A data node's block sends it to an API node.
    ApiReply,
    /// Between blocks of data nodes (on the wire between nodes).
    Node,
    /// Inside one data node only: no wire form.
    Local,
}

/// One signal's declaration, as data ([`SIGNALS`]).
#[derive(Clone, Copy, Debug)]
pub struct SignalInfo {
    /// The number on the wire.
    pub number: u16,
    /// The struct's name.
    pub name: &'static str,
    /// The kinds of sender (block kinds, `Api`, `Transport` or `Any`).
    pub from: &'static [&'static str],
    /// The kinds of receiver.
    pub to: &'static [&'static str],
    /// Who sends it and where it travels.
    pub class: SignalClass,
    /// The REF a misaddressed API request is refused with.
    pub refused_with: Option<&'static str>,
}

// The whole table, group by group (`table/`).
registration_signals! {}

// Signals move through job queues by value; keep them small.
const _: () = assert!(
    std::mem::size_of::<Signal>() <= 128,
    "Signal grew too large for job queues"
);
