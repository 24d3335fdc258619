//! The job-queue mesh of one data node: a single-producer single-consumer
//! queue for every ordered pair of threads, and the router that maps a
//! block address to the thread that runs it.
//!
//! Each thread owns an [`Inbox`] (the consumer ends of the queues into it)
//! and an [`Outbox`] (the producer ends of the queues out of it, each with a
//! pending list). Signals are staged in the outbox during a batch and
//! published with one store per target at the end; each target that got
//! work is woken once.

use crate::spsc::{self, Consumer, Producer};
use crate::waker::Waker;
use signal::{BlockKind, BlockRef, Envelope, NodeId};
use std::collections::VecDeque;
use std::sync::Arc;

/// Slots per queue.
pub const QUEUE_CAPACITY: usize = 4096;

/// Which thread runs which block of this node; signals to other nodes go
/// to the send thread.
#[derive(Clone, Debug)]
pub struct Router {
    /// This node.
    pub own_node: NodeId,
    /// Thread of tc instance i.
    pub tc_threads: Vec<usize>,
    /// Thread of ldm instance i.
    pub ldm_threads: Vec<usize>,
    /// Thread of dih, dict and membership.
    pub main_thread: usize,
    /// Thread that sends to other nodes.
    pub send_thread: usize,
    /// Thread of the file service ([`BlockKind::Io`]), if the node has one.
    pub io_thread: Option<usize>,
}

impl Router {
    /// The thread for `to`, or `None` for an address that does not exist
    /// on this node (a bad instance number from the network).
    #[inline]
    pub fn route(&self, to: BlockRef) -> Option<usize> {
        if to.node != self.own_node {
            return Some(self.send_thread);
        }
        match to.kind {
            BlockKind::Tc => self.tc_threads.get(to.instance as usize).copied(),
            BlockKind::Ldm => self.ldm_threads.get(to.instance as usize).copied(),
            BlockKind::Dih | BlockKind::Dict | BlockKind::Membership if to.instance == 0 => {
                Some(self.main_thread)
            }
            BlockKind::Io if to.instance == 0 => self.io_thread,
            _ => None,
        }
    }
}

/// The receiving side of one thread.
pub struct Inbox {
    /// Queues from every other thread.
    consumers: Vec<Consumer>,
    /// This thread's waker.
    pub waker: Arc<Waker>,
}

impl Inbox {
    /// Hands up to `max_per_queue` envelopes from each queue to `handle`.
    pub fn drain(&mut self, max_per_queue: usize, mut handle: impl FnMut(Envelope)) -> usize {
        let mut handled = 0;
        for consumer in &mut self.consumers {
            handled += consumer.pop_batch(max_per_queue, &mut handle);
        }
        handled
    }

    /// Whether any queue holds work.
    pub fn has_pending(&mut self) -> bool {
        self.consumers.iter_mut().any(Consumer::has_pending)
    }
}

struct Lane {
    producer: Producer,
    pending: VecDeque<Envelope>,
}

/// What [`Outbox::stage`] did with an envelope.
#[derive(Debug)]
pub enum Staging {
    /// Staged for another thread.
    Staged,
    /// For a block on this very thread: run it locally.
    Local(Envelope),
    /// No block on this node has that address.
    NoRoute(Envelope),
}

impl Staging {
    /// The envelope when it was not staged.
    pub fn not_staged(self) -> Option<Envelope> {
        match self {
            Staging::Staged => None,
            Staging::Local(envelope) | Staging::NoRoute(envelope) => Some(envelope),
        }
    }
}

/// The sending side of one thread.
pub struct Outbox {
    own_index: usize,
    lanes: Vec<Option<Lane>>,
    wakers: Vec<Arc<Waker>>,
    touched: u64,
    router: Arc<Router>,
}

impl Outbox {
    /// The router.
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// Stages `envelope` for its thread, or hands it back when it is for
    /// this very thread (the caller runs it locally) or has no route.
    #[inline]
    pub fn stage(&mut self, envelope: Envelope) -> Staging {
        match self.router.route(envelope.to) {
            Some(thread) if thread != self.own_index => {
                self.stage_to(thread, envelope);
                Staging::Staged
            }
            Some(_) => Staging::Local(envelope),
            None => Staging::NoRoute(envelope),
        }
    }

    /// Stages `envelope` for thread `thread`.
    #[inline]
    pub fn stage_to(&mut self, thread: usize, envelope: Envelope) {
        let lane = self.lanes[thread]
            .as_mut()
            .expect("mesh invariant: every thread has a lane to every other thread");
        lane.pending.push_back(envelope);
        self.touched |= 1 << thread;
    }

    /// Publishes staged envelopes and wakes their threads. Returns true when
    /// some could not be published (a full queue) and remain staged.
    pub fn flush(&mut self) -> bool {
        let mut blocked = false;
        let mut touched = self.touched;
        self.touched = 0;
        while touched != 0 {
            let thread = touched.trailing_zeros() as usize;
            touched &= touched - 1;
            let Some(lane) = self.lanes[thread].as_mut() else {
                continue;
            };
            if lane.producer.push_from(&mut lane.pending) > 0 {
                self.wakers[thread].wake();
            }
            if !lane.pending.is_empty() {
                blocked = true;
                self.touched |= 1 << thread;
            }
        }
        blocked
    }
}

/// Builds the queues among `thread_count` threads. Returns each thread's
/// inbox and outbox; wakers are created here and shared.
pub fn build(thread_count: usize, router: Router) -> Vec<(Inbox, Outbox)> {
    assert!(
        thread_count <= 64,
        "the mesh tracks touched lanes in a u64: at most 64 threads per node"
    );
    let router = Arc::new(router);
    let wakers: Vec<Arc<Waker>> = (0..thread_count).map(|_| Arc::new(Waker::new())).collect();
    let mut producers: Vec<Vec<Option<Producer>>> = (0..thread_count)
        .map(|_| (0..thread_count).map(|_| None).collect())
        .collect();
    let mut consumers: Vec<Vec<Consumer>> = (0..thread_count).map(|_| Vec::new()).collect();
    for (from, row) in producers.iter_mut().enumerate() {
        for (to, slot) in row.iter_mut().enumerate() {
            if from != to {
                let (producer, consumer) = spsc::channel(QUEUE_CAPACITY);
                *slot = Some(producer);
                consumers[to].push(consumer);
            }
        }
    }
    producers
        .into_iter()
        .zip(consumers)
        .enumerate()
        .map(|(index, (row, consumers))| {
            let lanes = row
                .into_iter()
                .map(|producer| {
                    producer.map(|producer| Lane {
                        producer,
                        pending: VecDeque::with_capacity(QUEUE_CAPACITY),
                    })
                })
                .collect();
            (
                Inbox {
                    consumers,
                    waker: wakers[index].clone(),
                },
                Outbox {
                    own_index: index,
                    lanes,
                    wakers: wakers.clone(),
                    touched: 0,
                    router: router.clone(),
                },
            )
        })
        .collect()
}
