//! A global allocator wrapper that counts heap allocations per thread.
//!
//! The data node promises that its ldm and tc threads never allocate once
//! warm (docs/design/processes-and-blocks.md §6: pools are sized from
//! config at start). The `tessera` binary installs [`CountingAllocator`]
//! and each thread publishes its own count in `all report threads`, so a
//! cluster test can check the promise on a real process instead of
//! trusting it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    // `const` initialisation and no destructor: safe to touch from inside the
    // allocator without recursing into it.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    // Whether an allocation by this thread prints where it came from.
    static TRAP: Cell<bool> = const { Cell::new(false) };
}

/// Wraps an allocator (the system's unless told) and counts the
/// allocations made by each thread.
///
/// ```
/// // In a binary: #[global_allocator] static A: stdx::alloc_counter::CountingAllocator =
/// //     stdx::alloc_counter::CountingAllocator(std::alloc::System);
/// let before = stdx::alloc_counter::thread_allocations();
/// assert!(stdx::alloc_counter::thread_allocations() >= before);
/// ```
pub struct CountingAllocator<Inner: GlobalAlloc = System>(pub Inner);

// SAFETY: every call is forwarded unchanged to the inner allocator; the
// counter is a thread-local `Cell` that never allocates.
unsafe impl<Inner: GlobalAlloc> GlobalAlloc for CountingAllocator<Inner> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { self.0.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { self.0.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { self.0.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { self.0.dealloc(ptr, layout) }
    }
}

fn count_one() {
    // `try_with` because the thread-local may already be gone while a thread
    // is being torn down; such allocations are simply not counted.
    let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
    if TRAP.try_with(|trap| trap.replace(false)).unwrap_or(false) {
        // The trap is off while the backtrace is taken and printed (both
        // allocate), so this does not recurse.
        let thread = std::thread::current();
        eprintln!(
            "allocation on trapped thread {}:\n{}",
            thread.name().unwrap_or("?"),
            std::backtrace::Backtrace::force_capture()
        );
        TRAP.with(|trap| trap.set(true));
    }
}

/// From now on, every allocation by the calling thread prints a backtrace
/// to standard error: for finding what breaks a no-allocation promise
/// (the data node sets it on hot threads when asked, see
/// `TESSERA_TRAP_ALLOCATIONS_AFTER_SIGNALS`). Slow; a debugging aid only.
pub fn trap_thread_allocations() {
    TRAP.with(|trap| trap.set(true));
}

/// Heap allocations (and reallocations) made so far by the calling thread.
/// Always 0 unless [`CountingAllocator`] is the global allocator.
pub fn thread_allocations() -> u64 {
    ALLOCATIONS.try_with(|count| count.get()).unwrap_or(0)
}
