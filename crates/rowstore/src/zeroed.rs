//! Large zeroed memory for DataMemory's pages (`page_memory`), taken from
//! the OS directly so that it can ask for transparent huge pages. (It lived
//! in `kernel::memory` while the ldm owned its pages; DataMemory is its
//! only user, so it moved here with the row store, which must not depend
//! on the kernel.)
//!
//! A key lookup touches a hash index element and a row at random places in
//! gigabytes of DataMemory. With 4 KiB pages each of those accesses also
//! misses the TLB and walks the page tables; with 2 MiB pages one TLB entry
//! covers 512 times as much (measured in docs/benchmarks.md, design 0006).
//! Linux hands out huge pages only to mappings that ask
//! (`transparent_hugepage = madvise`, Debian's default), so the memory is
//! mapped here and advised with `MADV_HUGEPAGE`; the pages still arrive
//! zeroed and only on first touch, as `vec![0u64; n]` would give them.
//! Elsewhere, or if the OS refuses, it is an ordinary zeroed allocation.

use std::ops::{Deref, DerefMut};

/// Below this, a pool is an ordinary allocation (a huge page would be
/// mostly empty).
const MAPPED_MIN_BYTES: usize = 4 << 20;

/// A zeroed `[u64]` of fixed length, owned like a `Box<[u64]>`.
pub struct ZeroedWords {
    storage: Storage,
}

enum Storage {
    Heap(Vec<u64>),
    #[cfg(target_os = "linux")]
    Mapped {
        pointer: std::ptr::NonNull<u64>,
        words: usize,
    },
}

// SAFETY: a mapping is owned by exactly one `ZeroedWords` (never aliased),
// like the buffer of a `Vec<u64>`, which is Send and Sync.
unsafe impl Send for ZeroedWords {}
// SAFETY: as above: shared access only reads through `&[u64]`.
unsafe impl Sync for ZeroedWords {}

impl ZeroedWords {
    /// `words` zeroed words. Panics if the OS has no memory for them (as
    /// an allocation would abort): pools are sized from config at start.
    pub fn new(words: usize) -> ZeroedWords {
        let bytes = words
            .checked_mul(8)
            .expect("ZeroedWords larger than the address space");
        #[cfg(target_os = "linux")]
        if bytes >= MAPPED_MIN_BYTES {
            if let Some(pointer) = map_zeroed(bytes) {
                return ZeroedWords {
                    storage: Storage::Mapped { pointer, words },
                };
            }
        }
        let _ = bytes;
        ZeroedWords {
            storage: Storage::Heap(vec![0u64; words]),
        }
    }

    /// Whether the memory is a mapping advised for huge pages (for tests
    /// and reports).
    pub fn is_mapped(&self) -> bool {
        match self.storage {
            Storage::Heap(_) => false,
            #[cfg(target_os = "linux")]
            Storage::Mapped { .. } => true,
        }
    }
}

/// Maps `bytes` of private anonymous memory (zeroed by the OS) and asks
/// for huge pages; `None` if the map fails. A refused advice is fine: the
/// memory works the same with small pages.
#[cfg(target_os = "linux")]
fn map_zeroed(bytes: usize) -> Option<std::ptr::NonNull<u64>> {
    // SAFETY: a fresh anonymous private mapping aliases nothing; the
    // result is checked before use.
    let address = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if address == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: the range is the mapping just made.
    unsafe {
        libc::madvise(address, bytes, libc::MADV_HUGEPAGE);
    }
    std::ptr::NonNull::new(address.cast::<u64>())
}

impl Deref for ZeroedWords {
    type Target = [u64];

    #[inline]
    fn deref(&self) -> &[u64] {
        match &self.storage {
            Storage::Heap(words) => words,
            #[cfg(target_os = "linux")]
            // SAFETY: the mapping holds `words` u64s (page-aligned, so
            // aligned for u64), lives as long as `self`, and is only
            // written through `&mut self`.
            Storage::Mapped { pointer, words } => unsafe {
                std::slice::from_raw_parts(pointer.as_ptr(), *words)
            },
        }
    }
}

impl DerefMut for ZeroedWords {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u64] {
        match &mut self.storage {
            Storage::Heap(words) => words,
            #[cfg(target_os = "linux")]
            // SAFETY: as in `deref`; `&mut self` makes this the only access.
            Storage::Mapped { pointer, words } => unsafe {
                std::slice::from_raw_parts_mut(pointer.as_ptr(), *words)
            },
        }
    }
}

impl Drop for ZeroedWords {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        if let Storage::Mapped { pointer, words } = self.storage {
            // SAFETY: the mapping made in `new`, of exactly this length,
            // unmapped once (no slice of it can outlive `self`).
            unsafe {
                libc::munmap(pointer.as_ptr().cast(), words * 8);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_pools_are_mapped_zeroed_and_writable() {
        let words = (64 << 20) / 8;
        let mut memory = ZeroedWords::new(words);
        assert_eq!(memory.len(), words);
        #[cfg(target_os = "linux")]
        assert!(memory.is_mapped());
        assert!(memory.iter().step_by(4096).all(|&word| word == 0));
        memory[0] = 1;
        memory[words - 1] = u64::MAX;
        assert_eq!((memory[0], memory[words - 1]), (1, u64::MAX));
    }

    #[test]
    fn small_pools_are_ordinary_allocations() {
        let memory = ZeroedWords::new(16);
        assert!(!memory.is_mapped());
        assert_eq!(&memory[..], &[0u64; 16]);
    }
}
