//! A hint to the CPU to start loading a cache line that will be read soon.
//!
//! A key lookup in DataMemory is a chain of dependent cache misses (hash
//! bucket, index element, row); a thread with a batch of lookups queued can
//! start the misses of the next ones while it works on the current one.
//! Prefetching never faults and has no effect on results, so it is safe for
//! any address.

/// Starts loading the cache line holding `value` (a no-op where the target
/// has no prefetch instruction).
#[inline(always)]
pub fn prefetch_read<T: ?Sized>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        let pointer = (value as *const T).cast::<i8>();
        // SAFETY: PREFETCHT0 only hints the cache; it does not access
        // memory architecturally and cannot fault. SSE is baseline on
        // x86_64.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(pointer);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}
