//! stdx: small helpers every Tessera crate may use and that know nothing of
//! databases: a counting allocator (to prove hot paths never allocate), a
//! fixed-capacity hash map for pools sized at start, integer mixing, and
//! CRC-32C for short inputs, a cache prefetch hint, a TCP connect from
//! a chosen local address, a process's stop request (SIGTERM, SIGINT),
//! and Linux's epoll set and eventfd for event loops.
//!
//! Architecture invariant: `stdx` depends on no other Tessera crate.

pub mod alloc_counter;
pub mod crc;
pub mod epoll;
pub mod fixed_map;
pub mod mix;
pub mod net;
pub mod prefetch;
pub mod stop;

pub use fixed_map::FixedMap;
