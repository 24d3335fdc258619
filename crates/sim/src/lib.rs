//! sim: deterministic simulation of a cluster of data nodes
//! (docs/design/testing.md §3).
//!
//! The production blocks of one to four data nodes (each node's built by
//! `datanode::wiring` from one config listing them all, never copied) run
//! in one thread, driven from a seed: a simulated clock, a simulated
//! network that delays every signal at random (within a node, between two
//! nodes, between an API node and a node) but keeps each sender-receiver
//! pair in order (as the production job queues and TCP connections do), a
//! simulated transport that tells each node's membership when its peers
//! connect, and API nodes that run the production client (`hosted`) and
//! play a bank workload, then check every replica of every partition. The
//! same seed gives the same run, signal for signal; the trace hash folds
//! every delivery so tests can tell.
//!
//! - `world`: clock, event queue, network, random streams, the blocks' context;
//! - `nemesis`: faults (crashes, pauses, partitions, broken links, fault
//!   points) and schedules of them drawn from a seed;
//! - `chaos`: runs of a transfer workload under a random schedule of
//!   faults, with the invariants checked after every step;
//! - `hosted`: real API nodes: threads running the `client` crate over
//!   the simulated network and clock, taking turns with the simulator;
//! - `disk`: each node's simulated disk (volatile until synced, torn on a
//!   crash, injected faults), serving the blocks' file requests;
//! - `simulation`: the nodes' blocks, their start and the event loop;
//! - `config`: the generated cluster config;
//! - `harness`: the in-process cluster harness: a test's client code as a
//!   hosted API node against a simulated cluster;
//! - `bank`, `plans`, `rows`, `ledger`: the workload on hosted API nodes,
//!   what its slots do, their table, their checker;
//! - `run`: one whole run from a seed, its end-of-run checks and its report;
//! - `crashes`, `restored`: runs with whole-cluster crashes and restarts,
//!   the table read back through the client after each, checked against
//!   the committed prefix up to the restored GCI.
//!
//! Architecture invariant: `sim` depends on blocks only through
//! `datanode::wiring` and the blocks' public accessors; block logic lives
//! in the blocks alone.

pub mod bank;
pub mod chaos;
pub mod config;
pub mod crashes;
pub mod disk;
pub mod harness;
pub mod hosted;
pub mod ledger;
pub mod nemesis;
mod plans;
pub mod restored;
pub mod rows;
mod run;
pub mod simulation;
pub mod world;

pub use bank::{Bank, BankOptions};
pub use chaos::{run_chaos, ChaosOptions, ChaosReport, RestartCheck};
pub use config::{ClusterShape, NodeLimits};
pub use crashes::{CrashAt, CrashOptions, CrashRun, CrashRunReport, RestartReport};
pub use disk::{Disk, DiskFaults};
pub use kernel::faults::{FaultAction, FaultPoint};
pub use run::{SimOptions, SimReport};
pub use simulation::{Client, NoClient, Simulation};
pub use world::{ClientIo, World};
