//! The signal table, one file a group of numbers (`super` says what a
//! declaration holds). Each group's macro hands the declarations before it
//! on to the next group's; the last hands the whole table to
//! `signal_table!` (`super::declare`), which `super` starts with
//! `registration_signals! {}`.

#[macro_use]
mod registration;
#[macro_use]
mod transactions;
#[macro_use]
mod schema_requests;
#[macro_use]
mod scans;
#[macro_use]
mod operations;
#[macro_use]
mod checkpoints;
#[macro_use]
mod schema;
#[macro_use]
mod membership;
#[macro_use]
mod restart;
#[macro_use]
mod local_services;
