//! How many workers the SQL node runs: a base that serves everything while
//! statements are quick, and more while some are stalled (docs/design/
//! 0027-sql-node.md, "Threads").
//!
//! A worker that waits for a row lock (up to the lock wait timeout) holds
//! its thread. With every base worker waiting on locks held by
//! transactions whose next statement waits for a worker, nothing moves
//! until lock waits time out: at 1,024 sysbench threads on 64 workers,
//! read-write fell to a tenth. MySQL's thread pool answers this with a
//! stall limit: a thread busy on one request for longer than that stops
//! counting against the group's limit, and another may start. This does
//! the same: a monitor, woken only when no worker is idle, looks every
//! [`STALL_LIMIT`]; if fewer than `base` workers are free or busy for less
//! than the limit, it starts enough new ones to make `base` again (at most
//! [`MAX_WORKERS`] in all). A worker whose wait for events times out
//! retires if the workers not stalled are more than the base.
//!
//! ```text
//!   worker: idle ──event──> busy(since) ──done──> idle ──timeout, serving > base──> retired
//!   monitor: asleep ──no worker idle──> every STALL_LIMIT: count busy > limit, start workers
//! ```

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// A worker busy this long on one connection no longer counts as serving:
/// it is waiting (a row lock) or running a long statement, and the others
/// should not wait behind it. Point selects on a loaded machine take
/// milliseconds; lock waits take up to the lock wait timeout.
pub(crate) const STALL_LIMIT: Duration = Duration::from_millis(20);

/// The most workers at once, whatever stalls: every worker reserves a
/// statement stack, and past a few thousand threads the machine spends its
/// time switching between them.
pub(crate) const MAX_WORKERS: usize = 4096;

/// One worker's state as the monitor sees it.
#[derive(Default)]
pub(crate) struct WorkerState {
    /// Microseconds since the pool's epoch, plus one, when it took the
    /// connection it serves; 0 while it waits for events.
    busy_since: AtomicU64,
    /// The worker has left the pool.
    retired: std::sync::atomic::AtomicBool,
}

/// The pool's accounting, shared by the workers and the monitor.
pub(crate) struct Pool {
    base: usize,
    epoch: Instant,
    workers: Mutex<Vec<Arc<WorkerState>>>,
    /// Workers in the pool (retired ones not counted).
    total: AtomicUsize,
    /// Workers waiting for events.
    idle: AtomicUsize,
    /// The monitor sleeps on this until no worker is idle; `true` while
    /// it sleeps (so that workers notify only then).
    monitor_sleeping: Mutex<bool>,
    monitor_wake: Condvar,
}

impl Pool {
    /// A pool of `base` workers (at least one), none started yet.
    pub(crate) fn new(base: usize) -> Pool {
        Pool {
            base: base.clamp(1, MAX_WORKERS),
            epoch: Instant::now(),
            workers: Mutex::new(Vec::new()),
            total: AtomicUsize::new(0),
            idle: AtomicUsize::new(0),
            monitor_sleeping: Mutex::new(false),
            monitor_wake: Condvar::new(),
        }
    }

    /// The workers started when the server starts.
    pub(crate) fn base(&self) -> usize {
        self.base
    }

    /// Workers in the pool now.
    pub(crate) fn size(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }

    /// A new worker's state, counted in the pool and as serving (not
    /// stalled) until it first waits for events: on a loaded machine a new
    /// thread may take longer than the stall limit to run at all, and
    /// counting it stalled would start more on every look.
    pub(crate) fn join(&self) -> Arc<WorkerState> {
        let state = Arc::new(WorkerState::default());
        let mut workers = self.workers.lock().expect("pool workers lock");
        workers.retain(|worker| !worker.retired.load(Ordering::Relaxed));
        workers.push(Arc::clone(&state));
        self.total.fetch_add(1, Ordering::Relaxed);
        state
    }

    /// A worker that joined but could not start leaves at once.
    pub(crate) fn abandon(&self, state: &WorkerState) {
        state.retired.store(true, Ordering::Relaxed);
        self.total.fetch_sub(1, Ordering::Relaxed);
    }

    /// `state`'s worker is about to wait for events.
    pub(crate) fn idle(&self, state: &WorkerState) {
        state.busy_since.store(0, Ordering::Relaxed);
        self.idle.fetch_add(1, Ordering::AcqRel);
    }

    /// `state`'s worker took an event (or its wait timed out and it stays).
    /// The last idle worker to become busy wakes the monitor.
    pub(crate) fn busy(&self, state: &WorkerState) {
        state.busy_since.store(self.now_mark(), Ordering::Relaxed);
        self.leave_idle();
    }

    /// One idle worker fewer; the last wakes the monitor.
    fn leave_idle(&self) {
        if self.idle.fetch_sub(1, Ordering::AcqRel) == 1 {
            let sleeping = self.monitor_sleeping.lock().expect("monitor lock");
            if *sleeping {
                self.monitor_wake.notify_one();
            }
        }
    }

    /// `state`'s worker waited for events and none came: it leaves the
    /// pool (true) if the workers not stalled, itself included, are more
    /// than the base (a worker that retired while others stall would only
    /// be started again). Either way it is no longer idle; when it stays,
    /// it is busy as after [`Pool::busy`].
    pub(crate) fn retire_or_stay(&self, state: &WorkerState) -> bool {
        self.retire_or_stay_at(state, self.now_mark())
    }

    fn retire_or_stay_at(&self, state: &WorkerState, now_mark: u64) -> bool {
        let retire = {
            // Under the workers' lock, so that two retiring at once do not
            // both count the other as serving.
            let workers = self.workers.lock().expect("pool workers lock");
            let stalled = Self::stalled_among(&workers, self.stall_mark(now_mark));
            let serving = self.size().saturating_sub(stalled);
            if serving > self.base {
                state.retired.store(true, Ordering::Relaxed);
                self.total.fetch_sub(1, Ordering::AcqRel);
                true
            } else {
                false
            }
        };
        if retire {
            self.leave_idle();
        } else {
            self.busy(state);
        }
        retire
    }

    /// The monitor's wait: returns once some worker is idle no more and
    /// [`STALL_LIMIT`] has passed, with how many workers to start (maybe
    /// none); `None` once `stopping` says so (checked at least every
    /// second, and whenever [`Pool::wake_monitor`] is called).
    pub(crate) fn next_shortfall(&self, stopping: &dyn Fn() -> bool) -> Option<usize> {
        {
            let mut sleeping = self.monitor_sleeping.lock().expect("monitor lock");
            while self.idle.load(Ordering::Acquire) > 0 {
                if stopping() {
                    return None;
                }
                *sleeping = true;
                sleeping = self
                    .monitor_wake
                    .wait_timeout(sleeping, Duration::from_secs(1))
                    .expect("monitor lock")
                    .0;
                *sleeping = false;
            }
            // Every worker is busy: give them the stall limit to finish.
            let _ = self
                .monitor_wake
                .wait_timeout(sleeping, STALL_LIMIT)
                .expect("monitor lock");
        }
        if stopping() {
            return None;
        }
        Some(self.shortfall_at(self.now_mark()))
    }

    /// Wakes the monitor (to stop).
    pub(crate) fn wake_monitor(&self) {
        let _guard = self.monitor_sleeping.lock().expect("monitor lock");
        self.monitor_wake.notify_all();
    }

    /// How many workers to start at `now_mark`: with none idle, enough
    /// that the workers not stalled make the base again, within
    /// [`MAX_WORKERS`].
    fn shortfall_at(&self, now_mark: u64) -> usize {
        if self.idle.load(Ordering::Acquire) > 0 {
            return 0;
        }
        let workers = self.workers.lock().expect("pool workers lock");
        let stalled = Self::stalled_among(&workers, self.stall_mark(now_mark));
        let total = self.size();
        let serving = total.saturating_sub(stalled);
        self.base
            .saturating_sub(serving)
            .min(MAX_WORKERS.saturating_sub(total))
    }

    /// Workers busy since `stall_mark` or before.
    fn stalled_among(workers: &[Arc<WorkerState>], stall_mark: u64) -> usize {
        workers
            .iter()
            .filter(|worker| !worker.retired.load(Ordering::Relaxed))
            .filter(|worker| {
                let since = worker.busy_since.load(Ordering::Relaxed);
                since != 0 && since <= stall_mark
            })
            .count()
    }

    /// A worker busy since this mark or before has stalled at `now_mark`.
    fn stall_mark(&self, now_mark: u64) -> u64 {
        now_mark.saturating_sub(STALL_LIMIT.as_micros() as u64)
    }

    fn now_mark(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64 + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A time at which every worker busy now has stalled.
    fn after_the_limit(pool: &Pool) -> u64 {
        pool.now_mark() + STALL_LIMIT.as_micros() as u64 + 1
    }

    #[test]
    fn stalled_workers_are_made_up_for_up_to_the_base() {
        let pool = Pool::new(3);
        let workers: Vec<_> = (0..3).map(|_| pool.join()).collect();
        assert_eq!(
            pool.shortfall_at(after_the_limit(&pool)),
            0,
            "started, not yet waiting: serving"
        );
        for worker in &workers {
            pool.idle(worker);
        }
        assert_eq!(
            pool.shortfall_at(after_the_limit(&pool)),
            0,
            "idle workers: nothing to start"
        );
        let before = pool.now_mark();
        for worker in &workers {
            pool.busy(worker);
        }
        assert_eq!(pool.shortfall_at(before), 0, "busy, not for long");
        assert_eq!(pool.shortfall_at(after_the_limit(&pool)), 3, "all stalled");
        // One finishes and takes its next request: two stalled.
        let later = after_the_limit(&pool);
        std::thread::sleep(Duration::from_micros(2));
        pool.idle(&workers[0]);
        pool.busy(&workers[0]);
        assert_eq!(pool.shortfall_at(later), 2);
        // Two started to make up for them: serving.
        let extra: Vec<_> = (0..2).map(|_| pool.join()).collect();
        assert_eq!(pool.size(), 5);
        assert_eq!(pool.shortfall_at(later), 0);
        // An extra worker's wait times out while the two still stall: it
        // stays (the serving would fall below the base).
        pool.idle(&extra[0]);
        assert!(!pool.retire_or_stay_at(&extra[0], later));
        // The stalls are over (as at `before`): the extras retire, then
        // the pool is at its base and the next one stays.
        pool.idle(&extra[0]);
        assert!(pool.retire_or_stay_at(&extra[0], before));
        pool.idle(&extra[1]);
        assert!(pool.retire_or_stay_at(&extra[1], before));
        assert_eq!(pool.size(), 3);
        pool.idle(&workers[0]);
        assert!(
            !pool.retire_or_stay_at(&workers[0], before),
            "the base stays"
        );
        assert_eq!(pool.size(), 3);
        // The retired are forgotten: only the base's stalls count.
        assert_eq!(pool.shortfall_at(after_the_limit(&pool)), 3);
    }

    #[test]
    fn the_pool_never_grows_past_its_maximum() {
        let pool = Pool::new(MAX_WORKERS);
        let workers: Vec<_> = (0..MAX_WORKERS).map(|_| pool.join()).collect();
        for worker in &workers {
            pool.idle(worker);
            pool.busy(worker);
        }
        assert_eq!(pool.shortfall_at(after_the_limit(&pool)), 0);
    }

    #[test]
    fn the_monitor_wakes_when_no_worker_is_idle_and_stops_when_told() {
        let pool = Arc::new(Pool::new(1));
        let worker = pool.join();
        pool.idle(&worker);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (shortfalls, seen) = std::sync::mpsc::channel();
        let monitor = {
            let pool = Arc::clone(&pool);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                while let Some(shortfall) = pool.next_shortfall(&|| stop.load(Ordering::Relaxed)) {
                    let _ = shortfalls.send(shortfall);
                }
            })
        };
        // The only worker takes a request and stalls on it.
        pool.busy(&worker);
        loop {
            let shortfall = seen
                .recv_timeout(Duration::from_secs(60))
                .expect("the monitor looks while no worker is idle");
            if shortfall == 1 {
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        pool.wake_monitor();
        monitor.join().expect("monitor stops");
    }
}
