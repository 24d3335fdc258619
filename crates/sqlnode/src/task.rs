//! Connection tasks: the work of serving one connection's ready requests
//! runs as a stackful coroutine on its event loop's thread, and every wait
//! for the cluster (a reply, a lock, a retry's pause) suspends the task
//! instead of the thread (`client::cooperative`), so one thread keeps many
//! statements in flight (docs/design/0027-sql-node.md, "Threads").
//!
//! - [`Tasks`]: one loop's tasks: started, resumed when woken, their
//!   deadlines, their stacks kept for the next.
//! - [`WakeQueue`]: where wakers from other threads (the client's receive
//!   threads) leave the tasks to resume, and the eventfd that wakes the
//!   loop when it sleeps.
//!
//! A task is suspended in one wait at a time, numbered; a waker names the
//! wait it was made for, and a wake for an older wait is dropped (the
//! client's waiters check again after any resumption, so an early one
//! would only cost time). A task never moves to another thread: its
//! stack may hold references to the thread's locals.

use client::cooperative::{self, Scheduler};
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use foldhash::{HashMap, HashMapExt};
use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};
use std::time::Instant;
use stdx::epoll::EventFd;

/// Finished tasks' stacks kept for the next, at most (each is
/// `sql::STATEMENT_STACK_BYTES` of address space, and the pages a task
/// touched stay with it). Freeing and mapping a stack per task costs more
/// than the task under load; stacks left unused for a whole trim interval
/// are freed (`Tasks::trim_spare_stacks`), down to `KEPT_STACKS`.
const SPARE_STACKS: usize = 4096;
/// Spare stacks never freed by a trim.
const KEPT_STACKS: usize = 16;

/// What a task hands its loop when it suspends: the deadline to resume it
/// by (`None`: only when woken).
type Suspension = Option<Instant>;

type TaskCoroutine = Coroutine<(), Suspension, (), DefaultStack>;

/// A task's number on its loop (never reused).
pub(crate) type TaskId = u64;

/// Wakes left for one loop by other threads.
pub(crate) struct WakeQueue {
    woken: Mutex<Vec<(TaskId, u32)>>,
    /// The loop is about to sleep, or sleeps, in its poll: a wake pokes it.
    sleeping: AtomicBool,
    /// Written to wake the loop from its poll; in the loop's epoll set.
    eventfd: EventFd,
}

impl WakeQueue {
    pub(crate) fn new() -> io::Result<WakeQueue> {
        Ok(WakeQueue {
            woken: Mutex::new(Vec::new()),
            sleeping: AtomicBool::new(false),
            eventfd: EventFd::new()?,
        })
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.eventfd.fd()
    }

    /// Task `task` may resume from its wait `wait`.
    fn wake(&self, task: TaskId, wait: u32) {
        self.woken
            .lock()
            .expect("wake queue lock")
            .push((task, wait));
        // After the push: a loop that looked at the queue before it said
        // it sleeps, and is poked.
        if self.sleeping.swap(false, Ordering::SeqCst) {
            self.poke();
        }
    }

    /// Wakes the loop from its poll (a new connection for it, a stop).
    pub(crate) fn poke(&self) {
        self.eventfd.signal();
    }

    /// Empties the eventfd after it woke the loop.
    pub(crate) fn drain(&self) {
        self.eventfd.drain();
    }

    /// The loop is about to sleep in its poll: true when it may (nothing
    /// was woken); from here until [`WakeQueue::awake`], a wake pokes it.
    pub(crate) fn prepare_sleep(&self) -> bool {
        self.sleeping.store(true, Ordering::SeqCst);
        if self.woken.lock().expect("wake queue lock").is_empty() {
            return true;
        }
        self.sleeping.store(false, Ordering::SeqCst);
        false
    }

    /// The loop is back from its poll: wakes need not poke it.
    pub(crate) fn awake(&self) {
        self.sleeping.store(false, Ordering::SeqCst);
    }

    /// Moves the wakes left so far to `out`.
    fn take(&self, out: &mut Vec<(TaskId, u32)>) {
        std::mem::swap(out, &mut *self.woken.lock().expect("wake queue lock"));
    }
}

/// A waker for one wait of one task.
struct TaskWaker {
    queue: Arc<WakeQueue>,
    task: TaskId,
    wait: u32,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.queue.wake(self.task, self.wait);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.queue.wake(self.task, self.wait);
    }
}

/// The scheduler a task's waits see (`client::cooperative`).
struct TaskScheduler {
    task: TaskId,
    /// The number of the task's current (or next) wait.
    wait: Cell<u32>,
    /// The task's yielder, set when its coroutine starts.
    yielder: Cell<*const Yielder<(), Suspension>>,
    queue: Arc<WakeQueue>,
}

impl Scheduler for TaskScheduler {
    fn waker(&self) -> Waker {
        Waker::from(Arc::new(TaskWaker {
            queue: Arc::clone(&self.queue),
            task: self.task,
            wait: self.wait.get(),
        }))
    }

    fn suspend(&self, deadline: Option<Instant>) {
        let yielder = self.yielder.get();
        assert!(
            !yielder.is_null(),
            "a task suspends only from inside its coroutine, which sets its yielder first"
        );
        // SAFETY: the yielder lives on the coroutine's stack for as long as
        // the coroutine runs, and only the coroutine itself calls suspend
        // (the scheduler is installed only while it runs).
        unsafe { (*yielder).suspend(deadline) };
        self.wait.set(self.wait.get().wrapping_add(1));
    }
}

struct Task {
    coroutine: TaskCoroutine,
    /// Boxed: the coroutine and the thread's scheduler slot point to it.
    scheduler: Box<TaskScheduler>,
    /// The connection it serves.
    client: u32,
}

/// One loop's tasks.
pub(crate) struct Tasks {
    queue: Arc<WakeQueue>,
    suspended: HashMap<TaskId, Task>,
    /// The task serving each connection that has one.
    serving: HashMap<u32, TaskId>,
    next: TaskId,
    stacks: Vec<DefaultStack>,
    /// The fewest spare stacks since the last trim: that many went unused.
    stacks_unused: usize,
    /// Deadlines: when, which task, which wait. An entry stays after its
    /// task resumed otherwise (most waits end long before their reply
    /// timeout) until it comes due or the heap is pruned.
    timers: BinaryHeap<Reverse<(Instant, TaskId, u32)>>,
    woken: Vec<(TaskId, u32)>,
}

impl Tasks {
    pub(crate) fn new(queue: Arc<WakeQueue>) -> Tasks {
        Tasks {
            queue,
            suspended: HashMap::new(),
            serving: HashMap::new(),
            next: 0,
            stacks: Vec::new(),
            stacks_unused: 0,
            timers: BinaryHeap::new(),
            woken: Vec::new(),
        }
    }

    /// Whether a task serves connection `client` now.
    pub(crate) fn serves(&self, client: u32) -> bool {
        self.serving.contains_key(&client)
    }

    /// Starts a task serving connection `client` with `body`, and runs it
    /// until it first suspends or ends.
    pub(crate) fn start(&mut self, client: u32, body: impl FnOnce() + 'static) -> io::Result<()> {
        let stack = match self.stacks.pop() {
            Some(stack) => stack,
            None => DefaultStack::new(sql::STATEMENT_STACK_BYTES)?,
        };
        self.stacks_unused = self.stacks_unused.min(self.stacks.len());
        let id = self.next;
        self.next += 1;
        let scheduler = Box::new(TaskScheduler {
            task: id,
            wait: Cell::new(0),
            yielder: Cell::new(std::ptr::null()),
            queue: Arc::clone(&self.queue),
        });
        let scheduler_at: *const TaskScheduler = &*scheduler;
        let coroutine =
            Coroutine::with_stack(stack, move |yielder: &Yielder<(), Suspension>, ()| {
                // SAFETY: the scheduler is boxed in the task, which outlives its
                // coroutine; nothing else writes its yielder.
                unsafe { (*scheduler_at).yielder.set(yielder) };
                body();
            });
        self.serving.insert(client, id);
        self.run(Task {
            coroutine,
            scheduler,
            client,
        });
        Ok(())
    }

    /// Resumes connection `client`'s task (an event on its socket, which
    /// it waits for when its output is full), if it has one.
    pub(crate) fn resume_serving(&mut self, client: u32) {
        if let Some(task) = self.serving.get(&client).copied() {
            if let Some(task) = self.suspended.remove(&task) {
                self.run(task);
            }
        }
    }

    /// Resumes the tasks woken from other threads and those whose
    /// deadline passed.
    pub(crate) fn resume_woken(&mut self, now: Instant) {
        let mut woken = std::mem::take(&mut self.woken);
        self.queue.take(&mut woken);
        for &(task, wait) in &woken {
            self.resume_wait(task, wait);
        }
        woken.clear();
        self.woken = woken;
        while let Some(&Reverse((deadline, task, wait))) = self.timers.peek() {
            if deadline > now {
                break;
            }
            self.timers.pop();
            self.resume_wait(task, wait);
        }
    }

    /// When the next deadline is, if any task has one.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.timers.peek().map(|Reverse((deadline, ..))| *deadline)
    }

    /// Resumes `task` if it still waits in wait `wait`.
    fn resume_wait(&mut self, task: TaskId, wait: u32) {
        let current = self
            .suspended
            .get(&task)
            .is_some_and(|suspended| suspended.scheduler.wait.get() == wait);
        if current {
            let task = self.suspended.remove(&task).expect("looked up just now");
            self.run(task);
        }
    }

    /// Runs `task` until it suspends (kept, with its deadline) or ends
    /// (its stack kept for the next). A panic that escapes the task's body
    /// (its body catches its own: this is the net under it) ends the task
    /// and its stack, never the loop.
    fn run(&mut self, mut task: Task) {
        let resumed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            cooperative::run(&*task.scheduler, || task.coroutine.resume(()))
        }));
        match resumed {
            Ok(CoroutineResult::Yield(deadline)) => {
                let id = task.scheduler.task;
                if let Some(deadline) = deadline {
                    self.timers
                        .push(Reverse((deadline, id, task.scheduler.wait.get())));
                }
                self.suspended.insert(id, task);
                if self.timers.len() > 2 * self.suspended.len() + 64 {
                    self.prune_timers();
                }
            }
            Ok(CoroutineResult::Return(())) => {
                self.serving.remove(&task.client);
                if self.stacks.len() < SPARE_STACKS {
                    self.stacks.push(task.coroutine.into_stack());
                }
            }
            Err(_) => {
                eprintln!(
                    "sql node: a task serving connection {} ended in a panic",
                    task.client
                );
                self.serving.remove(&task.client);
            }
        }
    }

    /// Drops the deadlines of waits that are over: at most as many stay
    /// as tasks are suspended, so the heap stays within twice that (plus
    /// a little), each entry pruned once.
    fn prune_timers(&mut self) {
        let suspended = &self.suspended;
        self.timers.retain(|Reverse((_, task, wait))| {
            suspended
                .get(task)
                .is_some_and(|suspended| suspended.scheduler.wait.get() == *wait)
        });
    }

    /// Frees the spare stacks no task took since the last trim (keeping
    /// `KEPT_STACKS`): after a burst of connections, their stacks and the
    /// pages they touched go back.
    pub(crate) fn trim_spare_stacks(&mut self) {
        let free = self.stacks_unused.saturating_sub(KEPT_STACKS);
        let keep = self.stacks.len() - free.min(self.stacks.len());
        self.stacks.truncate(keep);
        self.stacks_unused = self.stacks.len();
    }
}

impl Drop for Tasks {
    /// The loop ends (the server stops, or the loop's thread unwinds):
    /// suspended tasks are left where they are, never resumed or unwound
    /// (unwinding would run their waits' cleanup, which may wait again,
    /// and corosensei unwinds by a panic their bodies would catch). Their
    /// transactions are not rolled back here: the process is ending, and
    /// the cluster aborts a departed API node's transactions.
    fn drop(&mut self) {
        for (_, task) in self.suspended.drain() {
            std::mem::forget(task);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn a_task_suspended_in_a_wait_resumes_when_woken_for_that_wait_only() {
        let queue = Arc::new(WakeQueue::new().unwrap());
        let mut tasks = Tasks::new(Arc::clone(&queue));
        let steps = Rc::new(Cell::new(0));
        let wakers: Rc<std::cell::RefCell<Vec<Waker>>> = Rc::default();
        {
            let steps = Rc::clone(&steps);
            let wakers = Rc::clone(&wakers);
            tasks
                .start(7, move || {
                    for _ in 0..2 {
                        wakers.borrow_mut().push(
                            cooperative::waker().expect("a task's body runs with its scheduler"),
                        );
                        assert!(cooperative::suspend(None));
                        steps.set(steps.get() + 1);
                    }
                })
                .unwrap();
        }
        assert!(tasks.serves(7));
        assert_eq!(steps.get(), 0, "suspended in its first wait");
        // The first wait's waker resumes it once; woken again for the same
        // (now old) wait, it stays in its second wait.
        let first = wakers.borrow()[0].clone();
        first.wake_by_ref();
        assert!(!queue.prepare_sleep(), "a wake keeps the loop awake");
        tasks.resume_woken(Instant::now());
        assert_eq!(steps.get(), 1);
        first.wake();
        tasks.resume_woken(Instant::now());
        assert_eq!(steps.get(), 1, "a wake for an older wait is dropped");
        let second = wakers.borrow()[1].clone();
        second.wake();
        tasks.resume_woken(Instant::now());
        assert_eq!(steps.get(), 2);
        assert!(!tasks.serves(7), "an ended task serves nothing");
        assert_eq!(tasks.stacks.len(), 1, "its stack is kept for the next");
    }

    #[test]
    fn a_deadline_resumes_a_task_nobody_wakes() {
        let queue = Arc::new(WakeQueue::new().unwrap());
        let mut tasks = Tasks::new(queue);
        let done = Rc::new(Cell::new(false));
        let deadline = Instant::now() + std::time::Duration::from_secs(3600);
        {
            let done = Rc::clone(&done);
            tasks
                .start(1, move || {
                    cooperative::suspend(Some(deadline));
                    done.set(true);
                })
                .unwrap();
        }
        assert_eq!(tasks.next_deadline(), Some(deadline));
        tasks.resume_woken(Instant::now());
        assert!(!done.get(), "not before its deadline");
        tasks.resume_woken(deadline);
        assert!(done.get());
    }

    #[test]
    fn deadlines_of_finished_waits_do_not_pile_up() {
        let queue = Arc::new(WakeQueue::new().unwrap());
        let mut tasks = Tasks::new(Arc::clone(&queue));
        let far = Instant::now() + std::time::Duration::from_secs(3600);
        let wakers: Rc<std::cell::RefCell<Vec<Waker>>> = Rc::default();
        {
            let wakers = Rc::clone(&wakers);
            // Many waits with a far deadline, each ended by its waker
            // long before it (as replies end waits for their timeouts).
            tasks
                .start(1, move || {
                    for _ in 0..10_000 {
                        wakers.borrow_mut().push(cooperative::waker().unwrap());
                        cooperative::suspend(Some(far));
                    }
                })
                .unwrap();
        }
        for _ in 0..10_000 {
            let waker = wakers.borrow_mut().pop().expect("the task waits");
            waker.wake();
            tasks.resume_woken(Instant::now());
            assert!(
                tasks.timers.len() <= 2 * tasks.suspended.len() + 65,
                "{} deadlines kept for {} suspended tasks",
                tasks.timers.len(),
                tasks.suspended.len()
            );
        }
        assert!(!tasks.serves(1));
    }

    #[test]
    fn spare_stacks_unused_for_a_trim_interval_are_freed() {
        let queue = Arc::new(WakeQueue::new().unwrap());
        let mut tasks = Tasks::new(queue);
        // A burst: 40 tasks suspended at once, then all ended.
        let wakers: Rc<std::cell::RefCell<Vec<Waker>>> = Rc::default();
        for client in 0..40 {
            let wakers = Rc::clone(&wakers);
            tasks
                .start(client, move || {
                    wakers.borrow_mut().push(cooperative::waker().unwrap());
                    cooperative::suspend(None);
                })
                .unwrap();
        }
        for waker in wakers.borrow_mut().drain(..) {
            waker.wake();
        }
        tasks.resume_woken(Instant::now());
        assert_eq!(tasks.stacks.len(), 40);
        // The first trim only starts counting; one task between uses one.
        tasks.trim_spare_stacks();
        assert_eq!(tasks.stacks.len(), 40);
        tasks.start(99, || {}).unwrap();
        tasks.trim_spare_stacks();
        assert_eq!(
            tasks.stacks.len(),
            KEPT_STACKS + 1,
            "the stacks no task took since the last trim are freed, but the kept ones"
        );
    }

    #[test]
    fn a_panic_escaping_a_task_ends_the_task_not_the_loop() {
        let queue = Arc::new(WakeQueue::new().unwrap());
        let mut tasks = Tasks::new(queue);
        tasks
            .start(5, || panic!("a bug the task's body did not catch"))
            .unwrap();
        assert!(!tasks.serves(5));
        // The loop's tasks go on.
        let ran = Rc::new(Cell::new(false));
        let ran_too = Rc::clone(&ran);
        tasks.start(6, move || ran_too.set(true)).unwrap();
        assert!(ran.get());
    }
}
