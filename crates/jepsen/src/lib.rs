//! jepsen: fault tests of real Tessera processes on separate network
//! hosts, in the manner of Jepsen (docs/design/0019-fault-harness.md):
//! clients record what they asked and what they saw as a **history**,
//! nemeses break the cluster meanwhile, and **checkers** judge the
//! histories afterwards.
//!
//! Codemap:
//! - `history`: operations (invoke, ok, fail, info), one JSON line each,
//!   and pairing each invocation with its completion.
//! - `hosts`: separate network hosts on one machine: a network namespace
//!   per host on a bridge, inside a private namespace of the run;
//!   commands and threads on a host; one-way cuts by nftables.
//! - `cluster`: a Tessera cluster on those hosts: mgmd and each data
//!   node (under its angel) on a host of its own.
//! - `workload`: clients on client hosts recording histories (register).
//! - `run`: one run: hosts, cluster, workload, nemesis, heal, check.
//! - `check`: the checkers, one per workload: `bank` (every read sums to
//!   the total, no negative balance), `set` (every acknowledged insert
//!   is read at the end, nothing never attempted is), `register`
//!   (linearizability of each key's reads, writes and compare-and-sets,
//!   by the Wing-Gong-Lowe search with memoization, as Porcupine does).
//!
//! Architecture invariant: the checkers know nothing of Tessera; they
//! read histories only, so they can be tested on hand-made ones and
//! cross-checked against other checkers on the same files.

pub mod check;
pub mod cluster;
pub mod history;
pub mod hosts;
pub mod run;
pub mod workload;

pub use check::Verdict;
pub use history::{Completion, Op, OpType, Operation};
