//! faults: fault tests of real Tessera processes on separate network
//! hosts, in the manner of Jepsen (docs/design/0019-fault-harness.md):
//! clients record what they asked and what they saw as a **history**,
//! nemeses break the cluster meanwhile, and **checkers** judge the
//! histories afterwards.
//!
//! Codemap:
//! - `history`: operations (invoke, ok, fail, info), one JSON line each,
//!   and pairing each invocation with its completion.
//! - `check`: the checkers, one per workload: `bank` (every read sums to
//!   the total, no negative balance), `set` (every acknowledged insert
//!   is read at the end, nothing never attempted is), `register`
//!   (linearizability of each key's reads, writes and compare-and-sets,
//!   by the Wing-Gong-Lowe search with memoization, as Porcupine does).
//! - `hosts`: separate network hosts on one machine: a network namespace
//!   per host on a bridge, inside a private namespace of the run;
//!   commands and threads on a host; one-way cuts and loss by nftables.
//! - `cluster`: a Tessera cluster on those hosts: mgmd and each data
//!   node (under its angel) on a host of its own.
//! - `workload`: clients on client hosts recording histories (bank, set,
//!   register, durable), and the gate that holds or stops them.
//! - `proxy`: a delaying TCP proxy in front of a data node (delay,
//!   jitter and slow links, which need netem otherwise).
//! - `nemesis`: the faults, drawn from a schedule and a seed.
//! - `run`: one run: hosts, cluster, workloads, nemesis, heal, final
//!   reads, replicas compared, checks.
//! - `recovery`: per fault, how long until the clients were served
//!   again, and at full throughput.
//! - `report`, `png`: the report directory (histories, nemesis log,
//!   summary, a PNG timeline).
//!
//! Architecture invariant: the checkers know nothing of Tessera; they
//! read histories only, so they can be tested on hand-made ones and
//! cross-checked against other checkers on the same files.

pub mod check;
pub mod cluster;
pub mod history;
pub mod hosts;
pub mod nemesis;
pub mod png;
pub mod proxy;
pub mod recovery;
pub mod report;
pub mod run;
pub mod workload;

pub use check::Verdict;
pub use history::{Completion, Op, OpType, Operation};
