//! Sections: the variable-size parts of signals (keys, attribute values, row
//! images, table definitions), taken from a pool sized at start.
//!
//! NDB carries long signal data in a segmented section pool so that no
//! signal allocates. Tessera does the same with size classes: a [`Section`]
//! is a unique handle to one buffer of a class, moved (never copied) from
//! receive thread to tc to ldm and back, and returned to its class's free
//! list when dropped. Free lists are lock-free queues, because a section is
//! usually freed on another thread than the one that took it.

use crossbeam_queue::ArrayQueue;
use std::cell::UnsafeCell;
use std::fmt;

/// Buffer sizes of the classes, smallest first.
pub const CLASS_SIZES: [usize; 6] = [128, 512, 2048, 8192, 32768, 131072];

/// The largest section a pool can hand out.
pub const MAX_SECTION_BYTES: usize = CLASS_SIZES[CLASS_SIZES.len() - 1];

struct Class {
    buffer_bytes: usize,
    storage: Box<[UnsafeCell<u8>]>,
    free: ArrayQueue<u32>,
}

/// A pool of section buffers in size classes.
///
/// ```
/// use signal::SectionPool;
/// let pool = SectionPool::leak([4, 4, 1, 1, 1, 1]);
/// let section = pool.copy_from(b"hello").expect("pool has room");
/// assert_eq!(section.as_slice(), b"hello");
/// drop(section); // back to the pool
/// assert_eq!(pool.free_in_class(0), 4);
/// ```
pub struct SectionPool {
    classes: Vec<Class>,
}

// SAFETY: a buffer is only ever reached through the one `Section` that owns
// its index (indices move through the lock-free free lists), so no two
// threads touch the same bytes at once.
unsafe impl Sync for SectionPool {}
// SAFETY: as above; the pool owns plain bytes.
unsafe impl Send for SectionPool {}

impl SectionPool {
    /// Creates a pool with `counts[i]` buffers of `CLASS_SIZES[i]` bytes and
    /// leaks it: pools live as long as the process (or the simulated node),
    /// and a `'static` pool lets sections drop without carrying an `Arc`.
    /// Memory is zeroed lazily by the OS, so large counts cost little until used.
    pub fn leak(counts: [u32; CLASS_SIZES.len()]) -> &'static SectionPool {
        let classes = CLASS_SIZES
            .iter()
            .zip(counts)
            .map(|(&buffer_bytes, count)| {
                let count = count.max(1);
                let free = ArrayQueue::new(count as usize);
                for index in 0..count {
                    // Cannot fail: the queue was made with exactly `count` slots.
                    let _ = free.push(index);
                }
                // `vec![0; n]` comes from calloc: the OS maps pages lazily.
                let bytes = vec![0u8; buffer_bytes * count as usize].into_boxed_slice();
                // SAFETY: `UnsafeCell<u8>` is `repr(transparent)` over `u8`,
                // so the slice has the same layout and length.
                let storage: Box<[UnsafeCell<u8>]> =
                    unsafe { Box::from_raw(Box::into_raw(bytes) as *mut [UnsafeCell<u8>]) };
                Class {
                    buffer_bytes,
                    storage,
                    free,
                }
            })
            .collect();
        Box::leak(Box::new(SectionPool { classes }))
    }

    /// A pool sized for a node that allows `operations` concurrent operations.
    pub fn leak_for_operations(operations: u32) -> &'static SectionPool {
        let ops = operations.max(64);
        SectionPool::leak([
            ops.saturating_mul(3),
            ops.saturating_mul(2),
            (ops / 4).max(256),
            (ops / 16).max(64),
            (ops / 64).max(32),
            16,
        ])
    }

    /// Takes a buffer able to hold `len` bytes; its length is set to `len`
    /// and its contents are unspecified. `None` when the class is exhausted
    /// or `len` exceeds [`MAX_SECTION_BYTES`].
    pub fn alloc(&'static self, len: usize) -> Option<Section> {
        let class = CLASS_SIZES.iter().position(|&size| size >= len)?;
        let index = self.classes[class].free.pop()?;
        Some(Section {
            pool: self,
            class: class as u8,
            index,
            len: len as u32,
        })
    }

    /// Takes a buffer and copies `bytes` into it.
    pub fn copy_from(&'static self, bytes: &[u8]) -> Option<Section> {
        let mut section = self.alloc(bytes.len())?;
        section.as_mut_slice().copy_from_slice(bytes);
        Some(section)
    }

    /// Free buffers left in class `class` (for reports and tests).
    pub fn free_in_class(&self, class: usize) -> usize {
        self.classes[class].free.len()
    }

    fn buffer_ptr(&self, class: u8, index: u32) -> *mut u8 {
        let class = &self.classes[class as usize];
        let start = index as usize * class.buffer_bytes;
        // `UnsafeCell<u8>` has the layout of `u8`.
        class.storage[start..start + class.buffer_bytes].as_ptr() as *mut u8
    }
}

/// A unique handle to one pool buffer holding `len` bytes.
pub struct Section {
    pool: &'static SectionPool,
    class: u8,
    index: u32,
    len: u32,
}

impl Section {
    /// Bytes held.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True when it holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Largest length this buffer can take.
    pub fn capacity(&self) -> usize {
        CLASS_SIZES[self.class as usize]
    }

    /// Sets the length (at most [`Section::capacity`]); new bytes are unspecified.
    pub fn set_len(&mut self, len: usize) {
        assert!(
            len <= self.capacity(),
            "section length {len} exceeds its buffer of {}",
            self.capacity()
        );
        self.len = len as u32;
    }

    /// The bytes held.
    pub fn as_slice(&self) -> &[u8] {
        let ptr = self.pool.buffer_ptr(self.class, self.index);
        // SAFETY: this handle uniquely owns buffer `index` of its class, the
        // buffer is `capacity()` >= `len` bytes long and lives for 'static.
        unsafe { std::slice::from_raw_parts(ptr, self.len as usize) }
    }

    /// The bytes held, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let ptr = self.pool.buffer_ptr(self.class, self.index);
        // SAFETY: as in `as_slice`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(ptr, self.len as usize) }
    }

    /// The pool it came from (to allocate a sibling section).
    pub fn pool(&self) -> &'static SectionPool {
        self.pool
    }
}

impl Drop for Section {
    fn drop(&mut self) {
        let pushed = self.pool.classes[self.class as usize].free.push(self.index);
        assert!(
            pushed.is_ok(),
            "section free list overflowed: a section was returned twice"
        );
    }
}

impl fmt::Debug for Section {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Section({} bytes)", self.len)
    }
}

impl PartialEq for Section {
    fn eq(&self, other: &Section) -> bool {
        self.as_slice() == other.as_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_chosen_by_size_and_exhaust_cleanly() {
        let pool = SectionPool::leak([2, 1, 1, 1, 1, 1]);
        let a = pool.alloc(100).expect("first small");
        let b = pool.alloc(128).expect("second small");
        assert!(pool.alloc(1).is_none(), "small class is exhausted");
        let c = pool.alloc(129).expect("next class");
        assert_eq!(c.capacity(), 512);
        assert!(pool.alloc(MAX_SECTION_BYTES + 1).is_none());
        drop(a);
        assert!(pool.alloc(5).is_some());
        drop((b, c));
    }

    #[test]
    fn contents_survive_a_move_between_threads() {
        let pool = SectionPool::leak([4, 1, 1, 1, 1, 1]);
        let section = pool.copy_from(&[7u8; 64]).expect("room");
        let back = std::thread::spawn(move || section).join().expect("thread");
        assert_eq!(back.as_slice(), &[7u8; 64][..]);
    }
}
