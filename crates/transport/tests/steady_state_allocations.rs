//! The send and receive threads allocate nothing per signal once warm
//! (docs/design/processes-and-blocks.md §6): the counting allocator is
//! installed for this test binary and each thread publishes its own count in
//! its stats.

mod common;

use common::{api, block, envelope, Client, TestNode};
use kernel::stats::ThreadStats;
use signal::signals::{ApiRegReq, TcCommitReq, TcRollbackConf};
use signal::{BlockKind, Signal, TransactionId};
use std::time::Duration;

#[global_allocator]
static ALLOCATOR: stdx::alloc_counter::CountingAllocator =
    stdx::alloc_counter::CountingAllocator(std::alloc::System);

/// `count` round trips: the client sends a commit, the block answers it.
fn round_trips(node: &mut TestNode, client: &mut Client, first: u64, count: u64) {
    for transaction in first..first + count {
        client.send(&[envelope(
            api(210),
            block(BlockKind::Tc, 0),
            TcCommitReq {
                transaction_id: TransactionId(transaction),
            },
        )]);
        let seen = node.next_signal();
        assert!(matches!(seen.signal, Signal::TcCommitReq(_)), "{seen:?}");
        node.reply([envelope(
            block(BlockKind::Tc, 0),
            api(210),
            TcRollbackConf {
                transaction_id: TransactionId(transaction),
            },
        )]);
        let (_, reply) = client.receive();
        let Signal::TcRollbackConf(conf) = reply.signal else {
            panic!("expected TcRollbackConf, got {reply:?}");
        };
        assert_eq!(conf.transaction_id, TransactionId(transaction));
    }
}

/// Both threads' allocation counts once they have published their latest
/// (each publishes after every loop round, and an idle thread still wakes
/// every 100 ms).
fn settled_allocations(node: &TestNode) -> (u64, u64) {
    std::thread::sleep(Duration::from_millis(350));
    (
        ThreadStats::get(&node.recv_stats.allocations),
        ThreadStats::get(&node.send_stats.allocations),
    )
}

#[test]
fn warm_transport_threads_do_not_allocate_per_signal() {
    let mut node = TestNode::start([256, 64, 16, 16, 16, 4]);
    let mut client = Client::connect(node.address, 210);
    client.send(&[envelope(
        api(210),
        block(BlockKind::Membership, 0),
        ApiRegReq {
            protocol_version: 1,
            token: common::token(210),
        },
    )]);
    assert!(matches!(node.next_signal().signal, Signal::ApiRegReq(_)));
    round_trips(&mut node, &mut client, 0, 200);
    let (recv_before, send_before) = settled_allocations(&node);
    // Both allocated at start (poll, buffers): the counter is live.
    assert!(
        recv_before > 0 && send_before > 0,
        "allocations are not counted"
    );
    round_trips(&mut node, &mut client, 200, 2000);
    let (recv_after, send_after) = settled_allocations(&node);
    assert_eq!(
        send_after - send_before,
        0,
        "send thread allocated during 2000 replies"
    );
    assert_eq!(
        recv_after - recv_before,
        0,
        "receive thread allocated during 2000 requests"
    );
}
