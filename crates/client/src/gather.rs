//! Sends gathered per round of an event loop: while a thread that runs
//! many tasks (the SQL node's loops, `cooperative`) has gathering on,
//! a request its tasks send waits in its connection's outgoing buffer
//! instead of being written at once, and the loop writes every buffer
//! with one write per data node when its round of work is done, before
//! it sleeps (NDB's send buffers, flushed at the end of a poll round).
//! Under load a round resumes many tasks, each of which sends its next
//! request: their requests then reach a data node in one write, which
//! wakes its receiver once instead of once per request, and its answers
//! come back gathered the same way (docs/design/0034-fewer-round-trips.md
//! §6).
//!
//! ```text
//!  task: send ──> connection's outgoing buffer (sealed, in sequence)
//!                 └─ the connection noted in this thread's list
//!  loop: round of tasks ... flush() ──> one write per noted connection
//! ```
//!
//! Only sends made inside a task are gathered; a thread's own sends
//! (connecting, heartbeats, a plain application thread) write at once,
//! after whatever is gathered for the same connection, so frames reach
//! the link in sequence order. A task only ever waits by suspending, so
//! its loop always reaches its flush before it sleeps, and that flush
//! writes every connection the loop's tasks sent on, whichever loop's
//! task began its buffer. A write that fails ends the connection: every
//! waiter hears of the loss as it would of a lost connection (a commit's
//! outcome then unknown).

use crate::connection::NodeConnection;
use std::cell::{Cell, RefCell};
use std::sync::Arc;

thread_local! {
    /// This thread gathers its tasks' sends.
    static ON: Cell<bool> = const { Cell::new(false) };
    /// The connections this thread's tasks gathered sends on since its
    /// last flush.
    static NOTED: RefCell<Vec<Arc<NodeConnection>>> = const { RefCell::new(Vec::new()) };
}

/// Gathering on the calling thread while it lives; dropped, it flushes
/// what is gathered and turns gathering off.
pub struct Gathering {
    /// Tied to its thread.
    _not_send: std::marker::PhantomData<*const ()>,
}

/// Turns gathering on for the calling thread, which must then call
/// [`flush`] after each round of running its tasks, before it sleeps.
pub fn on_this_thread() -> Gathering {
    ON.with(|on| on.set(true));
    Gathering {
        _not_send: std::marker::PhantomData,
    }
}

impl Drop for Gathering {
    fn drop(&mut self) {
        flush();
        ON.with(|on| on.set(false));
    }
}

/// Whether a send now is gathered: gathering is on and a task is running.
pub(crate) fn active() -> bool {
    ON.with(Cell::get) && crate::cooperative::in_task()
}

/// A task of this thread gathered a send on `connection`.
pub(crate) fn note(connection: &Arc<NodeConnection>) {
    NOTED.with(|noted| {
        let mut noted = noted.borrow_mut();
        if !noted.iter().any(|known| Arc::ptr_eq(known, connection)) {
            noted.push(Arc::clone(connection));
        }
    });
}

/// Writes what this thread's tasks gathered: one write per connection.
pub fn flush() {
    let noted = NOTED.with(|noted| std::mem::take(&mut *noted.borrow_mut()));
    if noted.is_empty() {
        return;
    }
    for connection in &noted {
        connection.flush_gathered();
    }
    // The list's allocation is kept for the next round.
    NOTED.with(|list| {
        let mut list = list.borrow_mut();
        if list.is_empty() {
            let mut noted = noted;
            noted.clear();
            *list = noted;
        }
    });
}
