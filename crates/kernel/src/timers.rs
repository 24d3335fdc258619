//! Delayed signals: a min-heap by due time, with a sequence number so
//! signals due at the same moment keep the order they were sent in.

use signal::Envelope;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

struct Timer {
    due_ms: u64,
    sequence: u64,
    envelope: Envelope,
}

impl PartialEq for Timer {
    fn eq(&self, other: &Timer) -> bool {
        (self.due_ms, self.sequence) == (other.due_ms, other.sequence)
    }
}
impl Eq for Timer {}
impl PartialOrd for Timer {
    fn partial_cmp(&self, other: &Timer) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Timer {
    fn cmp(&self, other: &Timer) -> Ordering {
        // Reversed: BinaryHeap is a max-heap, we want the earliest first.
        (other.due_ms, other.sequence).cmp(&(self.due_ms, self.sequence))
    }
}

/// Pending delayed signals.
pub struct TimerQueue {
    heap: BinaryHeap<Timer>,
    sequence: u64,
}

impl TimerQueue {
    /// A queue with room for `capacity` timers before it allocates.
    pub fn with_capacity(capacity: usize) -> TimerQueue {
        TimerQueue {
            heap: BinaryHeap::with_capacity(capacity),
            sequence: 0,
        }
    }

    /// Schedules `envelope` at `due_ms`.
    pub fn schedule(&mut self, due_ms: u64, envelope: Envelope) {
        self.sequence += 1;
        self.heap.push(Timer {
            due_ms,
            sequence: self.sequence,
            envelope,
        });
    }

    /// The earliest due time.
    pub fn next_due_ms(&self) -> Option<u64> {
        self.heap.peek().map(|timer| timer.due_ms)
    }

    /// Removes and returns a timer due at or before `now_ms`.
    pub fn pop_due(&mut self, now_ms: u64) -> Option<Envelope> {
        if self.heap.peek()?.due_ms <= now_ms {
            self.heap.pop().map(|timer| timer.envelope)
        } else {
            None
        }
    }

    /// Number of pending timers.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// True when none are pending.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}
