//! A client whose data-node connections are read through a `Receiver`
//! (no receive thread per connection), end to end on loopback TCP against
//! a fake data node: transactions work while the receiver's own thread
//! reads, while an owner's loop polls it, while an owner takes it over but
//! never polls (the thread stands in), and after the owner gives it back;
//! a lost connection fails its waiters.

mod common;

use client::{ClientError, Cluster, Commit, ConnectOptions, ErrorCode, LockMode, Receiver, Value};
use common::kv_table;
use fakenode::{FakeDataNode, FakeDataNodeOptions};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const API_NODE: u16 = 200;

/// A fake node with the table and a client reading through `receiver`.
fn start(receiver: &Arc<Receiver>) -> (FakeDataNode, Cluster) {
    let node = FakeDataNode::start(FakeDataNodeOptions::default()).expect("fake node listens");
    let options = ConnectOptions {
        receiver: Some(Arc::clone(receiver)),
        ..Default::default()
    };
    let cluster = Cluster::connect_direct_with(&node.addr().to_string(), API_NODE, options)
        .expect("client registers through the receiver's thread");
    cluster.create_table(&kv_table()).expect("create table");
    (node, cluster)
}

/// Writes key `k` and reads it back, each in its own transaction.
fn write_and_read(cluster: &Cluster, k: u32) {
    let table = cluster.table("kv").expect("table");
    let mut write = cluster.transaction();
    write
        .write(
            &table,
            &[("k", Value::from(k)), ("v", Value::from(i64::from(k) * 10))],
        )
        .expect("valid row");
    write.execute(Commit::Yes).expect("write commits");
    let mut read = cluster.transaction();
    let op = read
        .read(&table, &[Value::from(k)], LockMode::CommittedRead)
        .expect("valid key");
    read.execute(Commit::Yes).expect("read commits");
    let value = read.get(op).and_then(|row| row.get("v")?.as_i64());
    assert_eq!(value, Some(i64::from(k) * 10));
}

/// An owner's loop: polls the receiver's descriptor and reads what is
/// ready, until told to stop.
fn owner_loop(receiver: &Receiver, stop: &AtomicBool) {
    receiver.take_over();
    while !stop.load(Ordering::SeqCst) {
        let mut poll_fd = libc::pollfd {
            fd: receiver.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        receiver.polling(true);
        // SAFETY: one valid pollfd for the duration of the call.
        let ready = unsafe { libc::poll(&mut poll_fd, 1, 10) };
        receiver.polling(false);
        if ready > 0 {
            receiver.receive_ready();
        }
    }
    receiver.give_back();
}

#[test]
fn transactions_run_whoever_reads_the_receiver() {
    let receiver = Receiver::new().expect("receiver");
    let (_node, cluster) = start(&receiver);
    // Its own thread reads: no owner yet.
    write_and_read(&cluster, 1);
    // An owner's loop reads.
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let owner = scope.spawn(|| owner_loop(&receiver, &stop));
        for k in 2..50 {
            write_and_read(&cluster, k);
        }
        stop.store(true, Ordering::SeqCst);
        owner.join().expect("owner loop");
    });
    // Given back: its thread reads again.
    write_and_read(&cluster, 50);
}

#[test]
fn an_owner_that_never_polls_is_stood_in_for() {
    let receiver = Receiver::new().expect("receiver");
    let (_node, cluster) = start(&receiver);
    // Taken over, and then away from its poll (a long statement, say):
    // replies must not wait for it.
    // Without a stand-in, each would time out (ClientError::Timeout).
    receiver.take_over();
    receiver.polling(false);
    for k in 1..5 {
        write_and_read(&cluster, k);
    }
    receiver.give_back();
}

#[test]
fn a_lost_connection_fails_its_waiters_and_new_requests() {
    let receiver = Receiver::new().expect("receiver");
    let (node, cluster) = start(&receiver);
    write_and_read(&cluster, 1);
    node.disconnect_all();
    // The end of the stream is read and fails the connection; a request
    // after that fails at once instead of waiting for its timeout.
    let table = cluster.table("kv").expect("cached table");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut read = cluster.transaction();
        read.read(&table, &[Value::from(1u32)], LockMode::CommittedRead)
            .expect("valid key");
        match read.execute(Commit::Yes) {
            Err(error) if error.code() == Some(ErrorCode::ConnectionLost) => break,
            Err(ClientError::Timeout { .. }) => panic!("a lost connection made a waiter time out"),
            other => {
                assert!(
                    Instant::now() < deadline,
                    "the lost connection was never noticed: {other:?}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}
