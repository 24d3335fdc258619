//! Sleeping and waking threads without losing a wake-up.
//!
//! A thread with nothing to do announces `sleeping`, looks at its queues
//! once more, and only then blocks; a producer that published work checks
//! `sleeping` after publishing. SeqCst fences on both sides guarantee that
//! at least one of them sees the other, so work is never left unnoticed.
//! Producers wake each target once per batch, not once per signal.

use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::thread::Thread;
use std::time::Duration;

/// The wake-up handle of one thread.
pub struct Waker {
    sleeping: AtomicBool,
    thread: OnceLock<Thread>,
    hook: OnceLock<Box<dyn Fn() + Send + Sync>>,
    wakeups: AtomicU64,
}

impl Default for Waker {
    fn default() -> Self {
        Waker::new()
    }
}

impl Waker {
    /// A waker not yet bound to a thread.
    pub fn new() -> Waker {
        Waker {
            sleeping: AtomicBool::new(false),
            thread: OnceLock::new(),
            hook: OnceLock::new(),
            wakeups: AtomicU64::new(0),
        }
    }

    /// Binds to the calling thread (which will park).
    pub fn bind_current_thread(&self) {
        let _ = self.thread.set(std::thread::current());
    }

    /// Binds to a custom wake action (a thread blocked in epoll, say).
    pub fn bind_hook(&self, hook: Box<dyn Fn() + Send + Sync>) {
        let _ = self.hook.set(hook);
    }

    /// Called by the owner before its last look at its queues.
    pub fn prepare_sleep(&self) {
        self.sleeping.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// Called by the owner when it found work after `prepare_sleep`, or woke.
    pub fn cancel_sleep(&self) {
        self.sleeping.store(false, Ordering::Relaxed);
    }

    /// Parks the owner for at most `timeout` (returns early when woken).
    pub fn park(&self, timeout: Duration) {
        std::thread::park_timeout(timeout);
        self.sleeping.store(false, Ordering::Relaxed);
    }

    /// Called by a producer after publishing work for the owner.
    pub fn wake(&self) {
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) && self.sleeping.swap(false, Ordering::SeqCst) {
            self.wakeups.fetch_add(1, Ordering::Relaxed);
            if let Some(hook) = self.hook.get() {
                hook();
            } else if let Some(thread) = self.thread.get() {
                thread.unpark();
            }
        }
    }

    /// Wake-ups delivered to this thread so far.
    pub fn wakeups(&self) -> u64 {
        self.wakeups.load(Ordering::Relaxed)
    }
}
