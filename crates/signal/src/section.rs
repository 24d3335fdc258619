//! Sections: the variable-size parts of signals (keys, attribute values, row
//! images, table definitions), taken from a pool sized at start.
//!
//! NDB carries long signal data in a segmented section pool so that no
//! signal allocates. Tessera does the same with size classes: a [`Section`]
//! is a unique handle to one buffer of a class, moved (never copied) from
//! receive thread to tc to ldm and back, and returned to its class's free
//! list when dropped.
//!
//! A section is usually freed on another thread than the one that took it
//! (the receive thread takes a key's section, the ldm thread frees it), so
//! a shared free list would have its head move between cores on every
//! operation. Each thread therefore keeps a few free buffers of each large
//! class for itself (a magazine, as in Bonwick's slab allocator) and trades
//! them with the class's shared depot in batches: one lock per batch
//! instead of a contended atomic per buffer. Small classes (fewer buffers
//! than a cache's worth per thread would strand) are not cached.
//! ```text
//!  alloc: own cache ──empty──> depot (take a batch)
//!  free:  own cache ──full───> depot (give a batch back)
//!  thread exit: own cache ───> depot
//! ```

use std::cell::{RefCell, UnsafeCell};
use std::fmt;
use std::sync::{Mutex, MutexGuard};

/// Buffer sizes of the classes, smallest first.
pub const CLASS_SIZES: [usize; 6] = [128, 512, 2048, 8192, 32768, 131072];

/// The largest section a pool can hand out.
pub const MAX_SECTION_BYTES: usize = CLASS_SIZES[CLASS_SIZES.len() - 1];

/// Buffers moved between a thread's cache and the depot at once.
const BATCH: usize = 32;

/// API requests leave the last `1 / RESERVE_SHARE` of every class to the
/// rest of the node ([`SectionPool::alloc_leaving_reserve`]).
pub const RESERVE_SHARE: usize = 8;

/// A class is cached per thread only if it has this many buffers per
/// batch a thread may hold (two), so caches can strand at most a small
/// share of it.
const CACHED_CLASS_MIN_BATCHES: usize = 64;

struct Class {
    buffer_bytes: usize,
    storage: Box<[UnsafeCell<u8>]>,
    /// Buffers in the class.
    count: usize,
    /// Free buffers no thread's cache holds; capacity `count`, so a push
    /// never reallocates.
    depot: Mutex<Vec<u32>>,
    /// Whether threads cache free buffers of this class.
    cached: bool,
}

impl Class {
    fn depot(&self) -> MutexGuard<'_, Vec<u32>> {
        // A panic while holding the lock cannot leave the Vec half-updated
        // (push and pop are whole), so a poisoned lock is still sound.
        self.depot
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn return_to_depot(&self, indices: impl IntoIterator<Item = u32>) {
        let mut depot = self.depot();
        for index in indices {
            assert!(
                depot.len() < self.count,
                "section free list overflowed: a section was returned twice"
            );
            depot.push(index);
        }
    }
}

/// One thread's free buffers of one pool, by class.
struct ThreadCache {
    pool: &'static SectionPool,
    free: [Vec<u32>; CLASS_SIZES.len()],
}

impl Drop for ThreadCache {
    fn drop(&mut self) {
        for (class, free) in self.pool.classes.iter().zip(&mut self.free) {
            class.return_to_depot(free.drain(..));
        }
    }
}

thread_local! {
    /// The calling thread's caches, one per pool it used (a data node
    /// thread uses one; the simulator runs several nodes' pools on one).
    static CACHES: RefCell<Vec<ThreadCache>> = const { RefCell::new(Vec::new()) };
}

/// Runs `action` on this thread's cache for `pool`; `None` when the thread
/// has no cache to offer (it is exiting, or the cache is busy further up
/// the stack), and the caller uses the depot directly.
fn with_cache<R>(
    pool: &'static SectionPool,
    action: impl FnOnce(&mut ThreadCache) -> R,
) -> Option<R> {
    CACHES
        .try_with(|caches| {
            let mut caches = caches.try_borrow_mut().ok()?;
            let at = match caches
                .iter()
                .position(|cache| std::ptr::eq(cache.pool, pool))
            {
                Some(at) => at,
                None => {
                    caches.push(ThreadCache {
                        pool,
                        // One over two batches: a free pushes before it spills.
                        free: std::array::from_fn(|_| Vec::with_capacity(2 * BATCH + 1)),
                    });
                    caches.len() - 1
                }
            };
            Some(action(&mut caches[at]))
        })
        .ok()
        .flatten()
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
// its index (indices move through the depots and thread caches, each
// owned or locked), so no two threads touch the same bytes at once.
unsafe impl Sync for SectionPool {}
// SAFETY: as above; the pool owns plain bytes.
unsafe impl Send for SectionPool {}

impl SectionPool {
    /// Creates a pool with `counts[i]` buffers of `CLASS_SIZES[i]` bytes and
    /// leaks it: pools live as long as the process (or the simulated node),
    /// and a `'static` pool lets sections drop without carrying an `Arc`.
    /// Memory is zeroed lazily by the OS, so large counts cost little until used.
    pub fn leak(counts: [u32; CLASS_SIZES.len()]) -> &'static SectionPool {
        SectionPool::leak_with(counts, true)
    }

    /// As [`SectionPool::leak`], but no thread keeps free buffers for
    /// itself: for a pool shared by any number of threads that each hold a
    /// section only briefly (a client library's application threads, an
    /// SQL node's workers). Thread caches would strand up to two batches
    /// per thread, and a thousand threads would strand the whole pool.
    pub fn leak_uncached(counts: [u32; CLASS_SIZES.len()]) -> &'static SectionPool {
        SectionPool::leak_with(counts, false)
    }

    fn leak_with(counts: [u32; CLASS_SIZES.len()], caching: bool) -> &'static SectionPool {
        let classes = CLASS_SIZES
            .iter()
            .zip(counts)
            .map(|(&buffer_bytes, count)| {
                let count = count.max(1) as usize;
                // Reversed so that pops hand out the lowest indices first.
                let depot: Vec<u32> = (0..count as u32).rev().collect();
                // `vec![0; n]` comes from calloc: the OS maps pages lazily.
                let bytes = vec![0u8; buffer_bytes * count].into_boxed_slice();
                // SAFETY: `UnsafeCell<u8>` is `repr(transparent)` over `u8`,
                // so the slice has the same layout and length.
                let storage: Box<[UnsafeCell<u8>]> =
                    unsafe { Box::from_raw(Box::into_raw(bytes) as *mut [UnsafeCell<u8>]) };
                Class {
                    buffer_bytes,
                    storage,
                    count,
                    depot: Mutex::new(depot),
                    cached: caching && count >= CACHED_CLASS_MIN_BATCHES * 2 * BATCH,
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
    /// (no free buffer in the depot or this thread's cache; other threads'
    /// caches may hold a few) or `len` exceeds [`MAX_SECTION_BYTES`].
    pub fn alloc(&'static self, len: usize) -> Option<Section> {
        self.alloc_keeping(len, false)
    }

    /// As [`SectionPool::alloc`], but never takes the last
    /// [`RESERVE_SHARE`]th of a class's buffers from its depot: what the
    /// receive thread decodes API requests with, so that clients can never
    /// take the sections that data-node links, redo and local checkpoint
    /// writes need to go on. `None` when only the reserve is left.
    pub fn alloc_leaving_reserve(&'static self, len: usize) -> Option<Section> {
        self.alloc_keeping(len, true)
    }

    /// As [`SectionPool::copy_from`], leaving the reserve
    /// ([`SectionPool::alloc_leaving_reserve`]).
    pub fn copy_from_leaving_reserve(&'static self, bytes: &[u8]) -> Option<Section> {
        let mut section = self.alloc_leaving_reserve(bytes.len())?;
        section.as_mut_slice().copy_from_slice(bytes);
        Some(section)
    }

    /// Takes a buffer, leaving the reserve in the class's depot when
    /// `leave_reserve` (the thread's own cached buffers are always free to
    /// take).
    #[inline]
    fn alloc_keeping(&'static self, len: usize, leave_reserve: bool) -> Option<Section> {
        let class_number = CLASS_SIZES.iter().position(|&size| size >= len)?;
        let class = &self.classes[class_number];
        let keep = if leave_reserve {
            class.count / RESERVE_SHARE
        } else {
            0
        };
        let index = if class.cached {
            with_cache(self, |cache| {
                let free = &mut cache.free[class_number];
                if free.is_empty() {
                    let mut depot = class.depot();
                    let take = depot.len().saturating_sub(keep).min(BATCH);
                    let from = depot.len() - take;
                    free.extend(depot.drain(from..).rev());
                }
                free.pop()
            })
            .unwrap_or_else(|| pop_keeping(&mut class.depot(), keep))
        } else {
            pop_keeping(&mut class.depot(), keep)
        }?;
        Some(Section {
            pool: self,
            class: class_number as u8,
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

    /// Free buffers in class `class`: those in the depot and in the calling
    /// thread's cache (exact for a pool one thread uses, as in the
    /// simulator and block tests; other threads' caches are not counted).
    pub fn free_in_class(&self, class: usize) -> usize {
        let cached = CACHES
            .try_with(|caches| {
                let caches = caches.try_borrow().ok()?;
                let cache = caches.iter().find(|cache| std::ptr::eq(cache.pool, self))?;
                Some(cache.free[class].len())
            })
            .ok()
            .flatten()
            .unwrap_or(0);
        self.classes[class].depot().len() + cached
    }

    /// Gives the free buffers the calling thread keeps for itself back to
    /// the pool's depots (they go back by themselves when the thread
    /// exits): for a pool another thread uses next, such as a simulator's
    /// pool reused by the next test.
    pub fn return_thread_cache(&self) {
        let _ = CACHES.try_with(|caches| {
            if let Ok(mut caches) = caches.try_borrow_mut() {
                // Dropping the cache returns its buffers.
                caches.retain(|cache| !std::ptr::eq(cache.pool, self));
            }
        });
    }

    /// Returns buffer `index` of class `class` (a dropped section).
    fn free(&'static self, class_number: usize, index: u32) {
        let class = &self.classes[class_number];
        if class.cached {
            let cached = with_cache(self, |cache| {
                let free = &mut cache.free[class_number];
                free.push(index);
                if free.len() > 2 * BATCH {
                    let from = free.len() - BATCH;
                    class.return_to_depot(free.drain(from..));
                }
            });
            if cached.is_some() {
                return;
            }
        }
        class.return_to_depot([index]);
    }

    fn buffer_ptr(&self, class: u8, index: u32) -> *mut u8 {
        let class = &self.classes[class as usize];
        let start = index as usize * class.buffer_bytes;
        // `UnsafeCell<u8>` has the layout of `u8`.
        class.storage[start..start + class.buffer_bytes].as_ptr() as *mut u8
    }
}

/// Takes a buffer index from `depot` unless only `keep` are left.
fn pop_keeping(depot: &mut Vec<u32>, keep: usize) -> Option<u32> {
    if depot.len() > keep {
        depot.pop()
    } else {
        None
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
        self.pool.free(self.class as usize, self.index);
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
    fn an_uncached_pool_strands_nothing_in_the_threads_that_used_it() {
        const COUNT: usize = CACHED_CLASS_MIN_BATCHES * 2 * BATCH;
        let counts = [COUNT as u32, 1, 1, 1, 1, 1];
        for (pool, strands) in [
            (SectionPool::leak(counts), true),
            (SectionPool::leak_uncached(counts), false),
        ] {
            // Threads that each took and freed a few sections and live on
            // (a server's idle workers).
            let (done, finish) = std::sync::mpsc::channel::<()>();
            let finish = std::sync::Arc::new(std::sync::Mutex::new(finish));
            let (used, wait_used) = std::sync::mpsc::channel();
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    let used = used.clone();
                    let finish = finish.clone();
                    std::thread::spawn(move || {
                        let taken: Vec<Section> =
                            (0..40).map(|_| pool.alloc(10).expect("free")).collect();
                        drop(taken);
                        used.send(()).expect("main waits");
                        let _ = finish.lock().expect("finish lock").recv();
                    })
                })
                .collect();
            for _ in 0..4 {
                wait_used.recv().expect("thread used the pool");
            }
            let available = (0..COUNT)
                .take_while(|_| pool.alloc(10).map(std::mem::forget).is_some())
                .count();
            assert_eq!(
                available < COUNT,
                strands,
                "{available} of {COUNT} sections free while other threads idle"
            );
            drop(done);
            for thread in threads {
                thread.join().expect("thread");
            }
        }
    }

    #[test]
    fn api_allocations_leave_the_reserve_to_the_rest_of_the_node() {
        // 16 buffers in the small class: 2 are the reserve.
        let pool = SectionPool::leak([16, 1, 1, 1, 1, 1]);
        let mut taken: Vec<Section> = (0..14)
            .map(|_| {
                pool.copy_from_leaving_reserve(b"request")
                    .expect("above the reserve")
            })
            .collect();
        assert!(
            pool.alloc_leaving_reserve(10).is_none(),
            "an API request may not take the reserve"
        );
        // The rest of the node may.
        taken.push(pool.alloc(10).expect("the reserve, for a data-node link"));
        taken.push(pool.alloc(10).expect("the reserve, for a redo write"));
        assert!(pool.alloc(10).is_none());
        taken.truncate(14);
        assert!(pool.alloc_leaving_reserve(10).is_none(), "2 left, 2 kept");
        taken.pop();
        assert!(pool.alloc_leaving_reserve(10).is_some(), "3 left, 2 kept");
    }

    /// A large class is cached per thread: buffers freed on one thread
    /// are taken on another, every buffer is handed out once at a time,
    /// and when the threads are gone every buffer is back.
    #[test]
    fn cached_classes_move_between_threads_and_come_back() {
        let count = (CACHED_CLASS_MIN_BATCHES * 2 * BATCH) as u32;
        let pool = SectionPool::leak([count, 1, 1, 1, 1, 1]);
        assert!(pool.classes[0].cached && !pool.classes[1].cached);
        let (to_freer, from_taker) = std::sync::mpsc::sync_channel::<Section>(256);
        let taker = std::thread::spawn(move || {
            for round in 0..20_000u32 {
                let mut section = loop {
                    match pool.alloc(64) {
                        Some(section) => break section,
                        None => std::thread::yield_now(),
                    }
                };
                section.as_mut_slice().fill(round as u8);
                to_freer.send(section).expect("freer runs");
            }
        });
        let freer = std::thread::spawn(move || {
            let mut held = Vec::new();
            for (round, section) in from_taker.iter().enumerate() {
                assert!(section.as_slice().iter().all(|&b| b == round as u8));
                held.push(section);
                if held.len() > 100 {
                    held.drain(..50);
                }
            }
        });
        taker.join().expect("taker");
        freer.join().expect("freer");
        assert_eq!(pool.free_in_class(0), count as usize, "every buffer back");
        let all: Vec<Section> = (0..count).map(|_| pool.alloc(1).expect("free")).collect();
        let mut indices: Vec<u32> = all.iter().map(|section| section.index).collect();
        indices.sort_unstable();
        indices.dedup();
        assert_eq!(indices.len(), count as usize, "no buffer handed out twice");
        assert!(pool.alloc(1).is_none(), "exhausted");
        drop(all);
        assert_eq!(pool.free_in_class(0), count as usize);
        // Handed to another thread, the pool counts every buffer free once
        // this thread gave back its cache.
        pool.return_thread_cache();
        let elsewhere = std::thread::spawn(move || pool.free_in_class(0));
        assert_eq!(elsewhere.join().expect("thread"), count as usize);
    }

    #[test]
    fn contents_survive_a_move_between_threads() {
        let pool = SectionPool::leak([4, 1, 1, 1, 1, 1]);
        let section = pool.copy_from(&[7u8; 64]).expect("room");
        let back = std::thread::spawn(move || section).join().expect("thread");
        assert_eq!(back.as_slice(), &[7u8; 64][..]);
    }
}
