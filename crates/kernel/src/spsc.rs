//! A bounded single-producer single-consumer queue of envelopes: the job
//! queue between two threads (one per sender-receiver pair,
//! docs/design/processes-and-blocks.md §4).
//!
//! The producer publishes a whole batch with one release store and the
//! consumer frees a whole batch with one, so a batch of signals costs two
//! atomic operations, not two per signal. Indices grow without wrapping
//! (u64 would take centuries to overflow) and are masked into the ring.

use signal::Envelope;
use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[repr(align(128))]
struct Padded(AtomicU64);

struct Ring {
    slots: Box<[UnsafeCell<MaybeUninit<Envelope>>]>,
    mask: u64,
    /// Next slot the consumer reads; written by the consumer only.
    head: Padded,
    /// Next slot the producer writes; written by the producer only.
    tail: Padded,
}

// SAFETY: a slot is written only by the producer while it is outside
// head..tail, and read only by the consumer while inside; the release/acquire
// pairs on head and tail order those accesses.
unsafe impl Sync for Ring {}
// SAFETY: as above; envelopes are Send.
unsafe impl Send for Ring {}

impl Drop for Ring {
    fn drop(&mut self) {
        let head = *self.head.0.get_mut();
        let tail = *self.tail.0.get_mut();
        for index in head..tail {
            let slot = &mut self.slots[(index & self.mask) as usize];
            // SAFETY: slots in head..tail hold initialised envelopes that no
            // one else can reach any more (both ends are gone).
            unsafe { slot.get_mut().assume_init_drop() };
        }
    }
}

/// Creates a queue of `capacity` (rounded up to a power of two) slots.
///
/// ```
/// use signal::{BlockKind, BlockRef, Envelope, NodeId, signals::ContinueB};
/// let (mut producer, mut consumer) = kernel::spsc::channel(4);
/// let me = BlockRef::new(NodeId(1), BlockKind::Tc, 0);
/// let mut batch = std::collections::VecDeque::new();
/// batch.push_back(Envelope { from: me, to: me, signal: ContinueB { job: 1 }.into() });
/// assert_eq!(producer.push_from(&mut batch), 1);
/// let mut seen = 0;
/// consumer.pop_batch(16, |_| seen += 1);
/// assert_eq!(seen, 1);
/// ```
pub fn channel(capacity: usize) -> (Producer, Consumer) {
    let capacity = capacity.max(2).next_power_of_two();
    let slots = (0..capacity)
        .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
        .collect();
    let ring = Arc::new(Ring {
        slots,
        mask: capacity as u64 - 1,
        head: Padded(AtomicU64::new(0)),
        tail: Padded(AtomicU64::new(0)),
    });
    (
        Producer {
            ring: ring.clone(),
            tail: 0,
            head_cache: 0,
        },
        Consumer {
            ring,
            head: 0,
            tail_cache: 0,
        },
    )
}

/// The sending end.
pub struct Producer {
    ring: Arc<Ring>,
    tail: u64,
    head_cache: u64,
}

impl Producer {
    /// Moves envelopes from the front of `pending` into the queue until it
    /// is full; returns how many moved. Publishes them with one store.
    pub fn push_from(&mut self, pending: &mut VecDeque<Envelope>) -> usize {
        let capacity = self.ring.mask + 1;
        if self.tail - self.head_cache + pending.len() as u64 > capacity {
            self.head_cache = self.ring.head.0.load(Ordering::Acquire);
        }
        let room = capacity - (self.tail - self.head_cache);
        let count = (pending.len() as u64).min(room);
        for _ in 0..count {
            let Some(envelope) = pending.pop_front() else {
                break;
            };
            let slot = &self.ring.slots[(self.tail & self.ring.mask) as usize];
            // SAFETY: the slot is outside head..tail, so the consumer does not
            // read it; only this producer writes slots.
            unsafe { (*slot.get()).write(envelope) };
            self.tail += 1;
        }
        if count > 0 {
            self.ring.tail.0.store(self.tail, Ordering::Release);
        }
        count as usize
    }
}

/// The receiving end.
pub struct Consumer {
    ring: Arc<Ring>,
    head: u64,
    tail_cache: u64,
}

impl Consumer {
    /// Whether envelopes are waiting (refreshes the producer's position).
    pub fn has_pending(&mut self) -> bool {
        if self.head == self.tail_cache {
            self.tail_cache = self.ring.tail.0.load(Ordering::Acquire);
        }
        self.head != self.tail_cache
    }

    /// Hands up to `max` envelopes to `handle` in order; returns how many.
    pub fn pop_batch(&mut self, max: usize, mut handle: impl FnMut(Envelope)) -> usize {
        if !self.has_pending() {
            return 0;
        }
        let available = (self.tail_cache - self.head).min(max as u64);
        for _ in 0..available {
            let slot = &self.ring.slots[(self.head & self.ring.mask) as usize];
            // SAFETY: the slot is inside head..tail, initialised by the
            // producer (acquire on tail); reading moves it out, and advancing
            // head below hands the slot back.
            let envelope = unsafe { (*slot.get()).assume_init_read() };
            self.head += 1;
            // Publish after each take so a panic in `handle` cannot make the
            // ring drop the same envelope again.
            self.ring.head.0.store(self.head, Ordering::Release);
            handle(envelope);
        }
        available as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use signal::signals::ContinueB;
    use signal::{BlockKind, BlockRef, NodeId};

    fn envelope(job: u32) -> Envelope {
        let me = BlockRef::new(NodeId(1), BlockKind::Tc, 0);
        Envelope {
            from: me,
            to: me,
            signal: ContinueB { job }.into(),
        }
    }

    #[test]
    fn keeps_order_across_threads_and_respects_capacity() {
        let (mut producer, mut consumer) = channel(8);
        let sender = std::thread::spawn(move || {
            let mut pending = VecDeque::new();
            for job in 0..100_000u32 {
                pending.push_back(envelope(job));
                if pending.len() >= 5 {
                    while !pending.is_empty() {
                        if producer.push_from(&mut pending) == 0 {
                            std::thread::yield_now();
                        }
                    }
                }
            }
            while !pending.is_empty() {
                producer.push_from(&mut pending);
            }
        });
        let mut next = 0u32;
        while next < 100_000 {
            consumer.pop_batch(3, |env| {
                let signal::Signal::ContinueB(ContinueB { job }) = env.signal else {
                    panic!("unexpected signal");
                };
                assert_eq!(job, next);
                next += 1;
            });
        }
        sender.join().expect("producer thread");
    }

    #[test]
    fn full_queue_takes_only_what_fits() {
        let (mut producer, mut consumer) = channel(4);
        let mut pending: VecDeque<_> = (0..6).map(envelope).collect();
        assert_eq!(producer.push_from(&mut pending), 4);
        assert_eq!(pending.len(), 2);
        assert_eq!(consumer.pop_batch(10, drop), 4);
        assert_eq!(producer.push_from(&mut pending), 2);
    }
}
