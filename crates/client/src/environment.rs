//! The client's seam to the world: where its bytes, its time and its
//! waiting come from (docs/design/testing.md §3).
//!
//! In production ([`crate::Cluster::connect`]): TCP, a receive thread per
//! data node (`tcp`), the system clock, and condvar waits. Under the
//! simulator ([`crate::Cluster::connect_in`]): a simulated network and
//! simulated time, the client's threads taking turns with the simulator,
//! so that the real client (routing, registration, map refresh, retries,
//! timeouts, durable waits) runs deterministically from a seed.
//!
//! - [`Transport`] opens a byte stream to a data node: what the client
//!   writes goes out through the [`Link`] it returns, and whatever carries
//!   the bytes back hands them to the connection's [`Inbound`].
//! - [`Driver`] tells the time and takes the turn when a client thread has
//!   nothing to do until a reply arrives or a deadline passes.
//! - [`Environment`] bundles both with the process's incarnation.
//!
//! Inside the crate, [`Clock`] is the one way to read the time, sleep and
//! wait: the system's, or a driver's. Nothing else in the client calls
//! `Instant::now`, sleeps or waits on a condvar directly.

use crate::cooperative::WakeUp;
use crate::error::ClientError;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

pub use crate::connection::Inbound;

/// Carries the bytes of one connection to a data node.
pub trait Link: Send + Sync {
    /// Writes sealed frames, whole and in order; an error ends the
    /// connection (the client then shuts the link down).
    fn write(&self, bytes: &[u8]) -> std::io::Result<()>;

    /// Ends the connection: no more writes, and the [`Inbound`] is closed
    /// (soon, by whoever holds it), failing every waiter.
    fn shutdown(&self);
}

/// Opens connections to data nodes.
pub trait Transport: Send + Sync {
    /// Opens a byte stream to the data node at `addr`, trying until
    /// `deadline` (data nodes may still be starting). Bytes that arrive go
    /// to `inbound`, which is closed when the stream ends.
    fn open(
        &self,
        addr: &str,
        deadline: Instant,
        inbound: Inbound,
    ) -> Result<Box<dyn Link>, ClientError>;
}

/// Time and turns for a client whose world is simulated.
///
/// Every waiting client thread calls [`Driver::park`] and re-checks what
/// it waits for when the call returns, so a driver may return early (after
/// any delivery, say) without harm; it must return by `deadline` in its
/// own time.
pub trait Driver: Send + Sync {
    /// The current time.
    fn now(&self) -> Instant;

    /// The calling thread has nothing to do until bytes arrive on one of
    /// its connections or `deadline` passes (`None`: until bytes arrive).
    fn park(&self, deadline: Option<Instant>);
}

/// Everything [`crate::Cluster::connect_in`] needs from outside the client.
#[derive(Clone)]
pub struct Environment {
    /// Opens the connections to the data nodes.
    pub transport: Arc<dyn Transport>,
    /// The time and the turns.
    pub driver: Arc<dyn Driver>,
    /// The frame header's incarnation for this API node's life (a real
    /// process picks one at random).
    pub incarnation: u32,
    /// What API_REGREQ presents: mgmd's token for this API node id (data
    /// nodes check it in their receive threads).
    pub token: signal::signals::ApiToken,
}

/// The client's time and waits: the system's, or a [`Driver`]'s.
#[derive(Clone, Default)]
pub(crate) enum Clock {
    /// The system clock; waits on condvars.
    #[default]
    System,
    /// A driver's time; waits park with the driver.
    Driven(Arc<dyn Driver>),
}

impl Clock {
    /// The current time.
    pub(crate) fn now(&self) -> Instant {
        match self {
            Clock::System => Instant::now(),
            Clock::Driven(driver) => driver.now(),
        }
    }

    /// Whether the world is a driver's (then nothing may block on real time).
    pub(crate) fn is_driven(&self) -> bool {
        matches!(self, Clock::Driven(_))
    }

    /// Sleeps for `duration` (a task running on a scheduler suspends:
    /// `cooperative`).
    pub(crate) fn sleep(&self, duration: Duration) {
        match self {
            Clock::System => crate::cooperative::sleep(duration),
            Clock::Driven(driver) => {
                let until = driver.now() + duration;
                while driver.now() < until {
                    driver.park(Some(until));
                }
            }
        }
    }

    /// Waits on `wake_up` (notified by whoever changes the state behind
    /// `mutex`) until it is notified or `deadline` passes, which must be
    /// later than now; returns the state locked again. A task running on a
    /// scheduler suspends instead of blocking its thread (`cooperative`).
    /// Like a condvar wait, it may return early: callers re-check their
    /// condition.
    pub(crate) fn wait<'guard, T>(
        &self,
        mutex: &'guard Mutex<T>,
        wake_up: &WakeUp,
        guard: MutexGuard<'guard, T>,
        deadline: Option<Instant>,
    ) -> MutexGuard<'guard, T> {
        match self {
            Clock::System => {
                let guard = match wake_up.wait_as_task(mutex, guard, deadline) {
                    Ok(relocked) => return relocked,
                    Err(guard) => guard,
                };
                wake_up.wait_as_thread(guard, deadline)
            }
            Clock::Driven(driver) => {
                // The driver hands the turn to whoever delivers; the lock
                // must be free for them.
                drop(guard);
                driver.park(deadline);
                mutex.lock().unwrap_or_else(PoisonError::into_inner)
            }
        }
    }
}
