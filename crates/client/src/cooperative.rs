//! Waiting without holding a thread: a scheduler that runs many tasks on
//! one thread (the SQL node's connection tasks, each a stackful
//! coroutine) installs itself here while it runs one, and every wait of
//! the client then suspends that task instead of sleeping on a condvar,
//! so the thread goes on with the others (docs/design/0027-sql-node.md,
//! "Threads").
//!
//! - [`Scheduler`]: what such a scheduler offers the task it is running.
//! - [`run`]: runs a step of a task with its scheduler installed.
//! - [`suspend`], [`sleep`], [`lock`]: waits that suspend the running
//!   task, or block the thread when no scheduler is installed.
//! - `WakeUp` (crate-internal): what the client's waiters wait on, a
//!   condvar for a thread and a [`Waker`] for a task; every wait in the
//!   client goes through `Clock::wait`, which picks one.
//!
//! A task may be resumed early (its waker woken for an older wait, a
//! deadline from before): like a condvar wait, a suspension may return
//! before what it waits for has happened, and every caller checks again.
//! A task must not hold a lock that another task of its thread may take
//! while it is suspended: the thread would block on it and never resume
//! the holder. [`lock`] takes such a lock without blocking the thread.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError, TryLockError};
use std::task::Waker;
use std::time::{Duration, Instant};

/// How long a task waits before trying a contended [`lock`] again.
const LOCK_RETRY: Duration = Duration::from_millis(1);

/// A scheduler running many tasks on one thread, as the running task sees
/// it.
pub trait Scheduler {
    /// A waker that makes the running task runnable again once it has
    /// suspended (woken before then, it resumes right after suspending).
    fn waker(&self) -> Waker;

    /// Suspends the running task until its waker wakes or `deadline`
    /// passes (`None`: only its waker); it may resume earlier.
    fn suspend(&self, deadline: Option<Instant>);
}

thread_local! {
    /// The scheduler of the task this thread runs now, if any.
    static CURRENT: Cell<Option<*const (dyn Scheduler + 'static)>> = const { Cell::new(None) };
}

/// Runs `step` (a step of a task: up to its next suspension) with
/// `scheduler` installed as the thread's, and the previous one back after,
/// even when `step` panics.
pub fn run<R>(scheduler: &(dyn Scheduler + 'static), step: impl FnOnce() -> R) -> R {
    struct Restore(Option<*const (dyn Scheduler + 'static)>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|current| current.set(self.0));
        }
    }
    let previous = CURRENT.with(|current| current.replace(Some(scheduler as *const _)));
    let _restore = Restore(previous);
    step()
}

/// Calls `with` with the running task's scheduler, or returns `None`
/// when this thread runs no task.
fn with_current<R>(with: impl FnOnce(&dyn Scheduler) -> R) -> Option<R> {
    let current = CURRENT.with(Cell::get)?;
    // SAFETY: `run` installs the pointer only for the duration of a step
    // and takes it out after, and the scheduler outlives the step (it is
    // borrowed for it), so while it is installed it points to a live
    // scheduler.
    Some(with(unsafe { &*current }))
}

/// The running task's waker (see [`Scheduler::waker`]), or `None` when
/// this thread runs no task.
pub fn waker() -> Option<Waker> {
    with_current(|scheduler| scheduler.waker())
}

/// Whether this thread runs a task now (its waits suspend the task).
pub fn in_task() -> bool {
    CURRENT.with(Cell::get).is_some()
}

/// Suspends the running task until `deadline` (or its waker, or earlier:
/// callers check again). Returns false, without waiting, when this thread
/// runs no task.
pub fn suspend(deadline: Option<Instant>) -> bool {
    with_current(|scheduler| scheduler.suspend(deadline)).is_some()
}

/// Sleeps for `duration`: the running task suspended, or the thread.
pub fn sleep(duration: Duration) {
    let until = Instant::now() + duration;
    if !in_task() {
        std::thread::sleep(duration);
        return;
    }
    while Instant::now() < until {
        suspend(Some(until));
    }
}

/// Locks `mutex`. A task whose thread would block on it (the holder may
/// be another task of the thread, suspended) suspends for a moment and
/// tries again instead. For locks held across a wait for the cluster,
/// taken rarely: contention costs a millisecond a try.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    if !in_task() {
        return mutex.lock().unwrap_or_else(PoisonError::into_inner);
    }
    loop {
        match mutex.try_lock() {
            Ok(guard) => return guard,
            Err(TryLockError::Poisoned(poisoned)) => return poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {
                suspend(Some(Instant::now() + LOCK_RETRY));
            }
        }
    }
}

/// What one waiter of the client waits on: a condvar when the waiter is a
/// thread, its waker when it is a task. A notify costs a system call only
/// when a thread waits (a condvar's notify makes one even with nobody
/// waiting; the receive threads notify for every reply).
#[derive(Default)]
pub(crate) struct WakeUp {
    condvar: Condvar,
    /// Threads waiting on `condvar` (counted under the waiters' state lock,
    /// before they wait).
    threads_waiting: AtomicUsize,
    /// A task waits: its waker is in `task`.
    task_waits: AtomicBool,
    task: Mutex<Option<Waker>>,
}

impl WakeUp {
    /// Wakes one waiter. Called after the state the waiters check changed
    /// (under their lock): a waiter that counted itself before then is
    /// seen here, and one that comes later sees the change.
    pub(crate) fn notify_one(&self) {
        self.wake_task();
        if self.threads_waiting.load(Ordering::SeqCst) > 0 {
            self.condvar.notify_one();
        }
    }

    /// Wakes every waiter.
    pub(crate) fn notify_all(&self) {
        self.wake_task();
        if self.threads_waiting.load(Ordering::SeqCst) > 0 {
            self.condvar.notify_all();
        }
    }

    /// A thread waits on the condvar (its state lock held) until
    /// `deadline`, or for a notify when `None`; the state locked again.
    pub(crate) fn wait_as_thread<'guard, T>(
        &self,
        guard: MutexGuard<'guard, T>,
        deadline: Option<Instant>,
    ) -> MutexGuard<'guard, T> {
        self.threads_waiting.fetch_add(1, Ordering::SeqCst);
        let guard = match deadline {
            Some(deadline) => {
                let timeout = deadline.saturating_duration_since(Instant::now());
                self.condvar
                    .wait_timeout(guard, timeout)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
            None => self
                .condvar
                .wait(guard)
                .unwrap_or_else(PoisonError::into_inner),
        };
        self.threads_waiting.fetch_sub(1, Ordering::SeqCst);
        guard
    }

    fn wake_task(&self) {
        if !self.task_waits.swap(false, Ordering::AcqRel) {
            return;
        }
        let waker = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Waits on behalf of the running task, if this thread runs one:
    /// registers its waker, lets go of `guard` and suspends it until a
    /// notify or `deadline`; returns the state locked again. `None` (and
    /// `guard` back) when the thread runs no task.
    pub(crate) fn wait_as_task<'guard, T>(
        &self,
        mutex: &'guard Mutex<T>,
        guard: MutexGuard<'guard, T>,
        deadline: Option<Instant>,
    ) -> Result<MutexGuard<'guard, T>, MutexGuard<'guard, T>> {
        let mut guard = Some(guard);
        let waited = with_current(|scheduler| {
            // Registered under the waiter's state lock: whoever changes
            // the state next notifies after, and finds the waker.
            *self.task.lock().unwrap_or_else(PoisonError::into_inner) = Some(scheduler.waker());
            self.task_waits.store(true, Ordering::Release);
            drop(guard.take());
            scheduler.suspend(deadline);
        });
        match waited {
            Some(()) => Ok(mutex.lock().unwrap_or_else(PoisonError::into_inner)),
            None => Err(guard.expect("the guard is kept when no task waits")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::sync::Arc;
    use std::task::Wake;

    /// A scheduler of one "task" that cannot really suspend: suspending
    /// records the deadline and returns, as an early resumption would.
    #[derive(Default)]
    struct Recording {
        suspended: std::cell::RefCell<VecDeque<Option<Instant>>>,
        woken: Arc<AtomicBool>,
    }

    struct Flag(Arc<AtomicBool>);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    impl Scheduler for Recording {
        fn waker(&self) -> Waker {
            Waker::from(Arc::new(Flag(Arc::clone(&self.woken))))
        }
        fn suspend(&self, deadline: Option<Instant>) {
            self.suspended.borrow_mut().push_back(deadline);
        }
    }

    #[test]
    fn a_wait_in_a_task_suspends_it_and_a_notify_wakes_it() {
        let scheduler = Recording::default();
        let wake_up = WakeUp::default();
        let mutex = Mutex::new(0);
        run(&scheduler, || {
            assert!(in_task());
            let guard = mutex.lock().unwrap();
            let guard = wake_up
                .wait_as_task(&mutex, guard, None)
                .expect("a task waits as a task");
            drop(guard);
        });
        assert!(!in_task(), "the scheduler is taken out after the step");
        assert_eq!(scheduler.suspended.borrow().len(), 1);
        wake_up.notify_one();
        assert!(scheduler.woken.load(Ordering::SeqCst));
    }

    #[test]
    fn outside_a_task_a_wait_is_handed_back() {
        let wake_up = WakeUp::default();
        let mutex = Mutex::new(0);
        let guard = mutex.lock().unwrap();
        assert!(wake_up.wait_as_task(&mutex, guard, None).is_err());
        assert!(!suspend(None));
    }

    /// A scheduler whose suspension lets go of a lock another task holds.
    struct Releasing {
        holder: std::cell::RefCell<Option<MutexGuard<'static, i32>>>,
        suspensions: Cell<u32>,
    }

    impl Scheduler for Releasing {
        fn waker(&self) -> Waker {
            Waker::noop().clone()
        }
        fn suspend(&self, _deadline: Option<Instant>) {
            self.suspensions.set(self.suspensions.get() + 1);
            self.holder.borrow_mut().take();
        }
    }

    #[test]
    fn a_contended_lock_suspends_the_task_instead_of_blocking() {
        let mutex: &'static Mutex<i32> = Box::leak(Box::new(Mutex::new(0)));
        let scheduler = Releasing {
            holder: std::cell::RefCell::new(Some(mutex.lock().unwrap())),
            suspensions: Cell::new(0),
        };
        run(&scheduler, || *lock(mutex) += 1);
        assert_eq!(
            scheduler.suspensions.get(),
            1,
            "it suspended once, then took the lock"
        );
        assert_eq!(*mutex.lock().unwrap(), 1);
    }
}
