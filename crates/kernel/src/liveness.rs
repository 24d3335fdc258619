//! Signs of life from other data nodes, as the receive path sees them
//! (docs/design/0017-api-heartbeats.md): the receive thread marks a node
//! whenever a frame from it arrives, ahead of any queued work; membership's
//! heartbeat timer asks (`Context::heard_from`) before it counts an
//! interval missed, so a node whose heartbeats wait behind other work is
//! not taken for dead while its frames keep coming.

use signal::NodeId;
use std::sync::atomic::{AtomicBool, Ordering};

/// One flag per node id: a frame arrived since the last ask.
pub struct SignsOfLife {
    heard: Box<[AtomicBool]>,
}

impl SignsOfLife {
    /// Flags for node ids `0..slots`.
    pub fn new(slots: usize) -> SignsOfLife {
        SignsOfLife {
            heard: (0..slots).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    /// A frame from `node` arrived (an id beyond the slots is ignored).
    #[inline]
    pub fn mark(&self, node: NodeId) {
        if let Some(flag) = self.heard.get(usize::from(node.0)) {
            flag.store(true, Ordering::Relaxed);
        }
    }

    /// Whether a frame from `node` arrived since the last call for it.
    pub fn take(&self, node: NodeId) -> bool {
        self.heard
            .get(usize::from(node.0))
            .is_some_and(|flag| flag.swap(false, Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_is_taken_once_and_ids_beyond_the_slots_are_ignored() {
        let signs = SignsOfLife::new(4);
        assert!(!signs.take(NodeId(2)));
        signs.mark(NodeId(2));
        signs.mark(NodeId(9));
        assert!(signs.take(NodeId(2)));
        assert!(!signs.take(NodeId(2)));
        assert!(!signs.take(NodeId(3)));
        assert!(!signs.take(NodeId(9)));
    }
}
