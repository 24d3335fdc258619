//! Connections that come back (docs/design/0018-node-restart.md, "Clients
//! reconnect"): each data node's connection sits in a [`NodeSlot`], and
//! one thread per [`crate::Cluster`] on the system clock opens a lost one
//! again, every [`RECONNECT_INTERVAL`], until the data node (restarted by
//! its angel, or started again by hand) registers this API node once more
//! as started. A node that was down when the client connected has a slot
//! too, holding a connection that was never open, and is reached the same
//! way once it is up.
//!
//! What is in flight on a lost connection fails as before (its outcome
//! unknown when a commit was sent); a transaction keeps the connection it
//! started on to its end, so it never waits on one connection for replies
//! sent to another. New transactions go to the new connection.
//!
//! Under the simulator the client has no thread of its own: a lost
//! connection stays lost there.

use crate::connection::NodeConnection;
use crate::dispatch::Peers;
use crate::environment::{Clock, Transport};
use signal::signals::ApiToken;
use signal::NodeId;
use std::sync::{Arc, Condvar, Mutex, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// Pause between rounds of attempts to open lost connections again.
pub(crate) const RECONNECT_INTERVAL: Duration = Duration::from_secs(1);

/// Longest one attempt waits for a data node to accept the connection
/// and say it is started: a node still restarting says it is not, and
/// the next round asks again. Short, so that dropping the `Cluster`
/// (which waits for the thread) never waits long.
const ATTEMPT: Duration = Duration::from_secs(1);

/// The current connection to one data node.
pub(crate) struct NodeSlot {
    /// The node, the same for every connection the slot holds (a new one
    /// is opened to the node the old one reached).
    node: NodeId,
    current: Mutex<Arc<NodeConnection>>,
}

impl NodeSlot {
    pub(crate) fn new(connection: NodeConnection) -> NodeSlot {
        NodeSlot {
            node: connection.node(),
            current: Mutex::new(Arc::new(connection)),
        }
    }

    /// The data node (without taking the lock: routing looks it up on
    /// every transaction started on a node).
    pub(crate) fn node(&self) -> NodeId {
        self.node
    }

    /// The connection now in the slot (it may be lost).
    pub(crate) fn get(&self) -> Arc<NodeConnection> {
        Arc::clone(&self.current.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// `look` at the connection now in the slot, without taking a
    /// reference to it (routing's checks, on every transaction).
    pub(crate) fn with<R>(&self, look: impl FnOnce(&NodeConnection) -> R) -> R {
        look(&self.current.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn replace(&self, connection: NodeConnection) {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(connection);
    }
}

/// What opening a connection again needs: the same API node, token and
/// incarnation as the first time.
pub(crate) struct Reopening {
    pub transport: Arc<dyn Transport>,
    pub clock: Clock,
    pub incarnation: u32,
    pub api_node: NodeId,
    pub token: ApiToken,
    pub retry_interval: Duration,
    pub peers: Arc<Peers>,
}

impl Reopening {
    /// One attempt to open the connection of `lost` again.
    fn attempt(&self, lost: &NodeConnection) -> Option<NodeConnection> {
        let connection = NodeConnection::open(
            self.transport.as_ref(),
            &self.clock,
            &lost.addr,
            Some(lost.node()),
            self.api_node,
            self.token,
            self.incarnation,
            ATTEMPT,
            self.retry_interval,
        )
        .ok()?;
        self.peers.set(connection.node(), &connection.dispatch);
        connection.dispatch.set_peers(&self.peers);
        Some(connection)
    }
}

/// The reconnecting thread of one cluster connection; stopped and joined
/// when dropped.
pub(crate) struct Reconnector {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Reconnector {
    /// Starts watching `slots`; `None` if the thread cannot be started
    /// (the client then works without reconnecting).
    pub(crate) fn start(slots: &Arc<[NodeSlot]>, reopening: Reopening) -> Option<Reconnector> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let slots = Arc::downgrade(slots);
        let thread_stop = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("tessera-reconnect".into())
            .spawn(move || run(&slots, &reopening, &thread_stop))
            .ok()?;
        Some(Reconnector {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Reconnector {
    fn drop(&mut self) {
        let (stopped, wake) = &*self.stop;
        *stopped.lock().unwrap_or_else(PoisonError::into_inner) = true;
        wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(slots: &Weak<[NodeSlot]>, reopening: &Reopening, stop: &(Mutex<bool>, Condvar)) {
    let (stopped, wake) = stop;
    let is_stopped = || *stopped.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        let guard = stopped.lock().unwrap_or_else(PoisonError::into_inner);
        let (guard, _) = wake
            .wait_timeout_while(guard, RECONNECT_INTERVAL, |stopped| !*stopped)
            .unwrap_or_else(PoisonError::into_inner);
        if *guard {
            return;
        }
        drop(guard);
        let Some(slots) = slots.upgrade() else {
            return;
        };
        for slot in slots.iter() {
            if is_stopped() {
                return;
            }
            let lost = slot.get();
            if lost.is_connected() {
                continue;
            }
            if let Some(connection) = reopening.attempt(&lost) {
                slot.replace(connection);
            }
        }
    }
}
