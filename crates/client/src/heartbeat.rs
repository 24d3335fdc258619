//! Heartbeats between this API node and the data nodes
//! (docs/design/0017-api-heartbeats.md): one thread per connected
//! [`crate::Cluster`] wakes every heartbeat interval (the data nodes' own,
//! told in API_REGCONF) and, for each connection:
//!
//! - counts the interval silent if no frame arrived in it, and after the
//!   data node's limit of silent intervals in a row closes the connection,
//!   so that whatever waits on a data node that went silent (paused, cut
//!   off, its host gone) fails now instead of at its reply timeout;
//! - sends API_HEARTBEAT_REQ if this client sent nothing in the interval,
//!   which the data node's receive thread answers at once; so an idle
//!   client and its data nodes still hear from each other, and a data
//!   node takes a client that went silent for gone (its transactions are
//!   aborted, its locks freed).
//!
//! If the thread itself wakes late (the process was stopped or starved of
//! the CPU), the silence of that interval is not counted: what this
//! process did not read while it did not run is not the data nodes'
//! silence.
//!
//! Only a client on the system clock runs it; under the simulator the
//! client has no thread of its own (the data nodes' receive threads,
//! which time clients out, are not simulated either).

use crate::connection::FrameBuilder;
use crate::reconnect::NodeSlot;
use std::sync::{Arc, Condvar, Mutex, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The heartbeat thread of one cluster connection; stopped and joined
/// when dropped.
pub(crate) struct Heartbeat {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Heartbeat {
    /// Starts heartbeating `connections` at the shortest interval any of
    /// them asked for; `None` when none asked (no thread).
    pub(crate) fn start(connections: &Arc<[NodeSlot]>) -> Option<Heartbeat> {
        let interval = connections
            .iter()
            .map(NodeSlot::get)
            .filter(|connection| connection.heartbeat.missed > 0)
            .map(|connection| connection.heartbeat.interval)
            .filter(|interval| !interval.is_zero())
            .min()?;
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let connections = Arc::downgrade(connections);
        let thread_stop = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("tessera-heartbeat".into())
            .spawn(move || run(connections, interval, &thread_stop))
            .ok()?;
        Some(Heartbeat {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        let (stopped, wake) = &*self.stop;
        *stopped.lock().unwrap_or_else(PoisonError::into_inner) = true;
        wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(connections: Weak<[NodeSlot]>, interval: Duration, stop: &(Mutex<bool>, Condvar)) {
    let (stopped, wake) = stop;
    let mut frames = FrameBuilder::default();
    let mut last_tick = Instant::now();
    let mut next_tick = last_tick + interval;
    loop {
        let mut guard = stopped.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if *guard {
                return;
            }
            let now = Instant::now();
            if now >= next_tick {
                break;
            }
            guard = wake
                .wait_timeout(guard, next_tick - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        drop(guard);
        let now = Instant::now();
        let stalled = now.saturating_duration_since(last_tick) >= interval * 2;
        last_tick = now;
        next_tick = now + interval;
        let Some(connections) = connections.upgrade() else {
            return;
        };
        for slot in connections.iter() {
            slot.get().heartbeat_tick(stalled, &mut frames);
        }
    }
}
