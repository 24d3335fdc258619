//! The table of live connections a data node shares between its receive
//! thread (which accepts, identifies and closes connections) and its send
//! thread (which writes frames to them).
//!
//! The receive thread is the only writer: it registers a connection when
//! the connection's first valid frame names its node (an API node, or a
//! data node whose hello frame arrived), and removes it when the connection
//! closes. The send thread reads the table only when the
//! generation counter moved, so a steady state costs it one atomic load per
//! signal and never takes the lock.
//!
//! Each connection gets a connection id unique for the process, so the send
//! thread can tell "the same node, a new connection" (fresh sequence
//! numbers, empty buffers) from "the same connection".
//!
//! **Cut nodes.** A data node taken for failed (by membership, or because
//! its link broke) is cut: its connection is shut down and no incarnation
//! of it seen so far is ever admitted again by this process. A later
//! incarnation (the node restarted, docs/design/0018-node-restart.md) is
//! admitted; membership decides whether its signals count. A node that
//! shuts down closes every connection and admits nothing more.

use signal::NodeId;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Node ids are 1..=255 (docs/design/processes-and-blocks.md §1); the table
/// has one slot per id.
pub const NODE_SLOTS: usize = 256;

/// The write side of one registered connection.
#[derive(Debug)]
pub struct RegisteredConnection {
    /// The peer node.
    pub node: NodeId,
    /// Unique for the process; changes when the node reconnects.
    pub connection_id: u64,
    /// A duplicate of the socket (non-blocking), for writing.
    pub stream: TcpStream,
    /// The sequence number of the send thread's first frame: 0, or 1 on a
    /// data-node connection, where the receive thread wrote the hello frame
    /// (sequence 0) before registering.
    pub first_sequence: u64,
}

/// Why a connection could not be registered.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RegisterError {
    /// The node already has a live connection.
    AlreadyConnected,
    /// The node id is 0 or above 255.
    NodeIdOutOfRange,
    /// That incarnation of the node was cut ([`ConnectionRegistry::cut`]).
    Cut,
    /// This node shuts down ([`ConnectionRegistry::close_all`]).
    Closed,
}

/// Node id to the write side of that node's connection, plus a generation
/// counter that rises on every change.
#[derive(Debug)]
pub struct ConnectionRegistry {
    slots: Mutex<Vec<Option<Arc<RegisteredConnection>>>>,
    generation: AtomicU64,
    next_connection_id: AtomicU64,
    /// For each node id: (the highest incarnation registered, the highest
    /// cut: incarnations up to it are refused; 0: none).
    incarnations: Mutex<Vec<(u32, u32)>>,
    /// The node shuts down: every connection closed, none admitted.
    closed: AtomicBool,
}

impl Default for ConnectionRegistry {
    fn default() -> Self {
        ConnectionRegistry::new()
    }
}

impl ConnectionRegistry {
    /// An empty registry.
    pub fn new() -> ConnectionRegistry {
        ConnectionRegistry {
            slots: Mutex::new(vec![None; NODE_SLOTS]),
            generation: AtomicU64::new(0),
            next_connection_id: AtomicU64::new(1),
            incarnations: Mutex::new(vec![(0, 0); NODE_SLOTS]),
            closed: AtomicBool::new(false),
        }
    }

    fn incarnations(&self) -> MutexGuard<'_, Vec<(u32, u32)>> {
        self.incarnations
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Cuts data node `node`: shuts its connection down (the receive
    /// thread sees the close and unregisters it) and refuses every
    /// incarnation of it registered so far, from now on. Returns whether
    /// that cut anything not cut before.
    pub fn cut(&self, node: NodeId) -> bool {
        let Some(slot) = data_node_slot(node) else {
            return false;
        };
        let newly = {
            let mut incarnations = self.incarnations();
            let (seen, cut) = &mut incarnations[slot];
            let newly = *seen > *cut;
            *cut = (*cut).max(*seen);
            newly
        };
        self.shut_down_connection_of(node);
        newly
    }

    /// Whether `node` was cut (some incarnation of it is refused).
    pub fn is_cut(&self, node: NodeId) -> bool {
        data_node_slot(node).is_some_and(|slot| self.incarnations()[slot].1 > 0)
    }

    /// Whether incarnation `incarnation` of `node` is refused: it is no
    /// later than one cut.
    pub fn is_cut_incarnation(&self, node: NodeId, incarnation: u32) -> bool {
        data_node_slot(node).is_some_and(|slot| {
            let cut = self.incarnations()[slot].1;
            cut > 0 && incarnation <= cut
        })
    }

    /// The node shuts down: every connection is shut down and nothing is
    /// admitted any more.
    pub fn close_all(&self) {
        let slots = self.lock();
        self.closed.store(true, Ordering::SeqCst);
        for entry in slots.iter().flatten() {
            let _ = entry.stream.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Whether [`ConnectionRegistry::close_all`] ran.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    fn shut_down_connection_of(&self, node: NodeId) {
        if let Some(slot) = node_slot(node) {
            if let Some(entry) = &self.lock()[slot] {
                let _ = entry.stream.shutdown(std::net::Shutdown::Both);
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Option<Arc<RegisteredConnection>>>> {
        // A panic while holding the lock cannot leave the table half-changed
        // (every change is one slot assignment), so a poisoned lock is usable.
        self.slots
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Rises on every register and remove. Read it with acquire ordering, so
    /// a thread that saw a registration's effects elsewhere (a reply to the
    /// peer's first signal, say) also sees the new generation.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Registers `stream` as the connection of incarnation `incarnation`
    /// of `node` (0 for an API node), whose frames from this node continue
    /// at `first_sequence`; refuses a node that is already connected, and
    /// an incarnation that was cut. Returns the new connection id.
    pub fn register(
        &self,
        node: NodeId,
        incarnation: u32,
        stream: TcpStream,
        first_sequence: u64,
    ) -> Result<u64, RegisterError> {
        let slot = node_slot(node).ok_or(RegisterError::NodeIdOutOfRange)?;
        let mut slots = self.lock();
        // Checked under the table's lock: a cut or close that comes later
        // finds this connection registered and shuts it down.
        if self.is_closed() {
            return Err(RegisterError::Closed);
        }
        if self.is_cut_incarnation(node, incarnation) {
            return Err(RegisterError::Cut);
        }
        if slots[slot].is_some() {
            return Err(RegisterError::AlreadyConnected);
        }
        if let Some(data) = data_node_slot(node) {
            let seen = &mut self.incarnations()[data].0;
            *seen = (*seen).max(incarnation);
        }
        let connection_id = self.next_connection_id.fetch_add(1, Ordering::Relaxed);
        slots[slot] = Some(Arc::new(RegisteredConnection {
            node,
            connection_id,
            stream,
            first_sequence,
        }));
        self.generation.fetch_add(1, Ordering::Release);
        Ok(connection_id)
    }

    /// Removes the connection `connection_id` of `node`; does nothing when
    /// the node's current connection is another one. Returns whether it removed.
    pub fn remove(&self, node: NodeId, connection_id: u64) -> bool {
        let Some(slot) = node_slot(node) else {
            return false;
        };
        let mut slots = self.lock();
        let matches = slots[slot]
            .as_ref()
            .is_some_and(|entry| entry.connection_id == connection_id);
        if matches {
            slots[slot] = None;
            self.generation.fetch_add(1, Ordering::Release);
        }
        matches
    }

    /// Whether `node` has a live connection.
    pub fn is_connected(&self, node: NodeId) -> bool {
        node_slot(node).is_some_and(|slot| self.lock()[slot].is_some())
    }

    /// The nodes with a live connection, in id order (for reports).
    pub fn connected_nodes(&self) -> Vec<NodeId> {
        self.lock()
            .iter()
            .flatten()
            .map(|entry| entry.node)
            .collect()
    }

    /// Copies the table into `into` (one entry per node slot) and returns the
    /// generation it reflects. `into` keeps its capacity between calls.
    pub fn snapshot(&self, into: &mut Vec<Option<Arc<RegisteredConnection>>>) -> u64 {
        let slots = self.lock();
        into.clear();
        into.extend(slots.iter().cloned());
        // Under the lock the generation cannot move, so it matches the copy.
        self.generation.load(Ordering::Acquire)
    }
}

/// The table slot of `node`, `None` for ids outside 1..=255.
pub fn node_slot(node: NodeId) -> Option<usize> {
    let slot = node.0 as usize;
    (1..NODE_SLOTS).contains(&slot).then_some(slot)
}

/// The slot of data node `node` in the incarnation table (`None` above
/// 127: no data node has such an id).
fn data_node_slot(node: NodeId) -> Option<usize> {
    (1..128).contains(&node.0).then_some(usize::from(node.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn stream() -> TcpStream {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let address = listener.local_addr().expect("address");
        TcpStream::connect(address).expect("connect loopback")
    }

    #[test]
    fn a_node_registers_once_and_only_its_own_connection_removes_it() {
        let registry = ConnectionRegistry::new();
        let start = registry.generation();
        let first = registry
            .register(NodeId(130), 0, stream(), 0)
            .expect("first");
        assert_eq!(
            registry.register(NodeId(130), 0, stream(), 0),
            Err(RegisterError::AlreadyConnected)
        );
        assert_eq!(
            registry.register(NodeId(0), 0, stream(), 0),
            Err(RegisterError::NodeIdOutOfRange)
        );
        assert_eq!(
            registry.register(NodeId(256), 0, stream(), 0),
            Err(RegisterError::NodeIdOutOfRange)
        );
        assert_eq!(registry.generation(), start + 1);
        assert!(!registry.remove(NodeId(130), first + 1), "a stale id");
        assert!(registry.is_connected(NodeId(130)));
        assert_eq!(registry.connected_nodes(), vec![NodeId(130)]);
        let mut copy = Vec::new();
        assert_eq!(registry.snapshot(&mut copy), start + 1);
        assert_eq!(copy.len(), NODE_SLOTS);
        assert!(copy[130].is_some());
        assert!(registry.remove(NodeId(130), first));
        assert!(!registry.is_connected(NodeId(130)));
        assert_eq!(registry.generation(), start + 2);
        let second = registry
            .register(NodeId(130), 0, stream(), 0)
            .expect("again");
        assert_ne!(first, second, "a reconnect gets a new connection id");
    }

    #[test]
    fn a_cut_node_is_remembered_and_its_connection_shut_down() {
        use std::io::Read;
        let registry = ConnectionRegistry::new();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let ours = TcpStream::connect(listener.local_addr().expect("address")).expect("connect");
        let (mut theirs, _) = listener.accept().expect("accept");
        registry.register(NodeId(3), 5, ours, 0).expect("register");
        assert!(!registry.is_cut(NodeId(3)));
        assert!(registry.cut(NodeId(3)));
        assert!(!registry.cut(NodeId(3)), "cut once");
        assert!(registry.is_cut(NodeId(3)) && !registry.is_cut(NodeId(4)));
        assert!(registry.is_cut_incarnation(NodeId(3), 5));
        assert!(
            registry.is_cut_incarnation(NodeId(3), 4),
            "an older one too"
        );
        assert!(
            !registry.is_cut_incarnation(NodeId(3), 6),
            "a restarted node's next incarnation is admitted"
        );
        let mut byte = [0u8; 1];
        assert_eq!(
            theirs.read(&mut byte).expect("read"),
            0,
            "the peer sees the close"
        );
        assert!(!registry.cut(NodeId(200)), "no data node has id 200");
        assert!(!registry.is_closed());
        registry.close_all();
        assert!(registry.is_closed());
    }
}
