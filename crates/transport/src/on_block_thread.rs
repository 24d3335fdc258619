//! The receive and send work on a block thread (`[threads]
//! network_on_ldm`): the thread runs its blocks, then a pass of each loop,
//! and sleeps on one poll that watches both loops' polls and its own
//! waker.
//!
//! Why: on a machine with few cores, a key lookup through the three
//! threads (receive, the ldm thread, send) wakes each of them, and the
//! wake-ups, not the work, are most of what the node spends (docs/design/
//! 0027-sql-node.md, "Threads"). On one thread it wakes one.
//!
//! The loops are the same code as the threads of their own
//! ([`RecvLoop`], [`SendLoop`]), so the wire, admission and liveness
//! behave alike. What differs: the receive loop never waits for the
//! blocks it feeds (they run only once it returns; see
//! [`RecvLoop::beside_blocks`]), and a producer's wake, meant for either
//! this thread's blocks or its send queue, ends the one sleep.

use crate::{RecvLoop, SendLoop};
use kernel::block_thread::Network;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use signal::NodeId;
use std::sync::Arc;
use std::time::Duration;

const WAKER_TOKEN: Token = Token(0);
const RECV_TOKEN: Token = Token(1);
const SEND_TOKEN: Token = Token(2);

/// Both loops and the poll the thread sleeps on.
pub struct NetworkOnThread {
    own_node: NodeId,
    recv: RecvLoop,
    send: SendLoop,
    poll: Poll,
    events: Events,
    waker: Arc<mio::Waker>,
}

impl NetworkOnThread {
    /// Joins the two loops under one poll.
    ///
    /// Panics when the operating system refuses the poll (the node cannot
    /// serve without it).
    pub fn new(own_node: NodeId, mut recv: RecvLoop, mut send: SendLoop) -> NetworkOnThread {
        recv.beside_blocks();
        send.beside_blocks();
        let poll = Poll::new()
            .unwrap_or_else(|error| panic!("network of node {own_node}: no poll: {error}"));
        let registry = poll.registry();
        for (fd, token) in [(recv.poll_fd(), RECV_TOKEN), (send.poll_fd(), SEND_TOKEN)] {
            registry
                .register(&mut SourceFd(&fd), token, Interest::READABLE)
                .unwrap_or_else(|error| {
                    panic!("network of node {own_node}: cannot poll a loop's poll: {error}")
                });
        }
        let waker = Arc::new(
            mio::Waker::new(registry, WAKER_TOKEN)
                .unwrap_or_else(|error| panic!("network of node {own_node}: no waker: {error}")),
        );
        NetworkOnThread {
            own_node,
            recv,
            send,
            poll,
            events: Events::with_capacity(4),
            waker,
        }
    }
}

impl Network for NetworkOnThread {
    fn bind(&mut self, waker: &kernel::waker::Waker) {
        // Producers wake the blocks' inbox or the send queue; either ends
        // the one sleep.
        for target in [waker, self.send.waker().as_ref()] {
            let poll_waker = self.waker.clone();
            target.bind_hook(Box::new(move || {
                // Fails only if the eventfd is full, and then the poll is
                // awake anyway.
                let _ = poll_waker.wake();
            }));
        }
    }

    fn work(&mut self) -> bool {
        let sent = self.send.work();
        let received = self.recv.turn(Duration::ZERO);
        sent || received
    }

    fn prepare_sleep(&mut self) -> bool {
        if self.recv.has_work() {
            return false;
        }
        self.send.prepare_sleep()
    }

    fn sleep(&mut self, timeout: Duration) {
        let timeout = timeout.min(self.recv.idle_timeout());
        if let Err(error) = self.poll.poll(&mut self.events, Some(timeout)) {
            if error.kind() != std::io::ErrorKind::Interrupted {
                panic!("network of node {}: poll failed: {error}", self.own_node);
            }
        }
        self.send.cancel_sleep();
    }

    fn finish(&mut self) {
        self.send.finish();
        self.recv.finish();
    }
}
