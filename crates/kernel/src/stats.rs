//! Per-thread counters, written by the thread itself and read by reports
//! (`tessera mgm -e "all report threads"`). Relaxed atomics: reports need
//! recent values, not a consistent snapshot.

use std::sync::atomic::{AtomicU64, Ordering};

/// The role of a thread (NDB's ThreadConfig names).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ThreadRole {
    /// Local data manager: owns partitions.
    Ldm,
    /// Transaction coordinator.
    Tc,
    /// Receives frames from sockets.
    Recv,
    /// Sends frames to sockets.
    Send,
    /// Runs dih, dict and membership.
    Main,
    /// Performs file operations for the blocks (the node's file service).
    Io,
}

impl ThreadRole {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            ThreadRole::Ldm => "ldm",
            ThreadRole::Tc => "tc",
            ThreadRole::Recv => "recv",
            ThreadRole::Send => "send",
            ThreadRole::Main => "main",
            ThreadRole::Io => "io",
        }
    }
}

/// Counters of one thread.
#[derive(Default)]
pub struct ThreadStats {
    /// Signals executed (block threads), decoded/encoded (recv/send), or
    /// file operations performed (io).
    pub signals: AtomicU64,
    /// Times the thread went to sleep.
    pub sleeps: AtomicU64,
    /// Heap allocations made by the thread (counting allocator installed).
    pub allocations: AtomicU64,
    /// Frames received or sent.
    pub frames: AtomicU64,
    /// Bytes received or sent (io: bytes written and read).
    pub bytes: AtomicU64,
    /// Socket reads or writes (syscalls); io: fsyncs of files and directories.
    pub syscalls: AtomicU64,
}

impl ThreadStats {
    /// Adds to a counter.
    #[inline]
    pub fn add(counter: &AtomicU64, amount: u64) {
        counter.store(counter.load(Ordering::Relaxed) + amount, Ordering::Relaxed);
    }

    /// Reads a counter.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
