//! sim: deterministic simulation of a data node (DESIGN.md §8, layer 3).
//!
//! The production blocks of one data node (built by `datanode::wiring`,
//! never copied) run in one thread, driven from a seed: a simulated clock,
//! a simulated network that delays every signal at random but keeps each
//! sender-receiver pair in order (as the production job queues and TCP
//! connections do), and simulated API nodes that play a bank workload with
//! the real client signals. The same seed gives the same run, signal for
//! signal; the trace hash folds every delivery so tests can tell.
//!
//! - `world`: clock, event queue, network, random streams, the blocks' context;
//! - `simulation`: the node's blocks and the event loop;
//! - `config`: the generated cluster config;
//! - `bank`, `plans`, `rows`, `ledger`: the simulated clients, what they do,
//!   their table, their checker;
//! - `run`: one whole run from a seed, its end-of-run checks and its report.
//!
//! Architecture invariant: `sim` depends on blocks only through
//! `datanode::wiring` and the blocks' public accessors; block logic lives
//! in the blocks alone.

pub mod bank;
pub mod config;
pub mod ledger;
mod plans;
pub mod rows;
mod run;
pub mod simulation;
pub mod world;

pub use bank::{Bank, BankOptions};
pub use config::NodeLimits;
pub use run::{SimOptions, SimReport};
pub use simulation::{Client, NoClient, Simulation};
pub use world::{ClientIo, World};
