//! Durable commits and waits for a durable GCI, end to end on loopback TCP
//! against the fake data nodes of `fakenode`, whose complete GCI
//! the tests move by hand (`set_complete_gci`): a wait is answered only
//! once the complete GCI reaches its GCI, refused when the fake holds too
//! many, failed by a lost connection or moved to another node; a commit
//! that wrote nothing never waits; the async session hands durable commits
//! back only once durable.

mod common;

use client::{
    AsyncSession, ClientError, Cluster, Commit, Completion, ConnectOptions, ErrorCode, Gci,
    LockMode, TransactionState, Value,
};
use common::kv_table;
use fakenode::{FakeCluster, FakeDataNode, FakeDataNodeOptions};
use signal::{BlockKind, NodeId};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const API_NODE: u16 = 200;
/// Above every GCI the tests' commits get (the fake numbers them 1/0, 2/0, ...).
const FAR_AHEAD: Gci = Gci::from_parts(1000, 0);

/// A fake node with the table, whose complete GCI the test moves (none
/// complete yet), and a client connected to it.
fn start_with(options: ConnectOptions) -> (FakeDataNode, Cluster) {
    let node = FakeDataNode::start(FakeDataNodeOptions::default()).expect("fake node listens");
    let cluster = Cluster::connect_direct_with(&node.addr().to_string(), API_NODE, options)
        .expect("client registers");
    cluster.create_table(&kv_table()).expect("create table");
    node.set_complete_gci(Gci(0));
    (node, cluster)
}

fn start() -> (FakeDataNode, Cluster) {
    start_with(ConnectOptions::default())
}

/// Polls until `condition` holds; the deadline only guards against a hang.
fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !condition() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn write(cluster: &Cluster, transaction: &mut client::Transaction<'_>, k: u32) {
    let table = cluster.table("kv").expect("table");
    transaction
        .write(
            &table,
            &[("k", Value::from(k)), ("v", Value::from(i64::from(k)))],
        )
        .expect("valid row");
}

fn gci_waits_received(node: &FakeDataNode) -> Vec<fakenode::ReceivedSignal> {
    node.received()
        .into_iter()
        .filter(|signal| signal.name == "GciWaitReq")
        .collect()
}

#[test]
fn a_durable_commit_returns_only_once_its_gci_is_complete() {
    let (node, cluster) = start();
    let returned = AtomicBool::new(false);
    let mut transaction = cluster.transaction();
    write(&cluster, &mut transaction, 1);
    let tc_instance = transaction.tc_instance();
    std::thread::scope(|scope| {
        let committer = scope.spawn(|| {
            let outcome = transaction.commit_durable();
            returned.store(true, Ordering::SeqCst);
            (outcome, transaction)
        });
        eventually("the GCI wait to be held", || node.held_gci_waits() == 1);
        assert!(
            !returned.load(Ordering::SeqCst),
            "the commit returned while its GCI was not complete"
        );
        // A complete GCI below the commit's releases nothing.
        node.set_complete_gci(Gci(1));
        assert_eq!(node.held_gci_waits(), 1);
        assert!(!returned.load(Ordering::SeqCst));
        node.set_complete_gci(FAR_AHEAD);
        let (outcome, transaction) = committer.join().expect("no panic");
        let outcome = outcome.expect("durable commit");
        assert!(outcome.committed && outcome.durable, "{outcome:?}");
        let gci = outcome.gci.expect("a write has a GCI");
        assert!(gci > Gci(1) && gci < FAR_AHEAD);
        assert_eq!(transaction.commit_gci(), Some(gci));
        assert_eq!(transaction.state(), TransactionState::Committed);
    });
    // The wait went to the transaction's own tc.
    let waits = gci_waits_received(&node);
    assert_eq!(waits.len(), 1);
    assert_eq!(
        (waits[0].to_kind, waits[0].to_instance),
        (BlockKind::Tc, tc_instance)
    );
    assert_eq!(cluster.in_flight(), 0, "nothing left registered");
}

#[test]
fn a_durable_commit_that_wrote_nothing_does_not_wait() {
    let (node, cluster) = start();
    let table = cluster.table("kv").expect("table");
    let mut transaction = cluster.transaction();
    transaction
        .read(&table, &[Value::from(5u32)], LockMode::CommittedRead)
        .expect("valid key");
    // The row is missing: the read fails, nothing was written.
    let error = transaction.commit_durable().expect_err("no such row");
    assert_eq!(error.code(), Some(ErrorCode::NoSuchRow));
    // An empty transaction commits nothing.
    let outcome = cluster
        .transaction()
        .commit_durable()
        .expect("empty commit");
    assert_eq!(
        (outcome.committed, outcome.gci, outcome.durable),
        (true, None, true)
    );
    // A commit of reads only gets GCI 0 and returns without a wait.
    let mut writer = cluster.transaction();
    write(&cluster, &mut writer, 5);
    writer.execute(Commit::Yes).expect("write commits");
    let mut reader = cluster.transaction();
    reader
        .read(&table, &[Value::from(5u32)], LockMode::CommittedRead)
        .expect("valid key");
    let outcome = reader.commit_durable().expect("read commits");
    assert_eq!((outcome.gci, outcome.durable), (None, true));
    assert!(gci_waits_received(&node).is_empty(), "nothing waited for");
}

#[test]
fn wait_durable_answers_at_once_for_a_complete_gci_and_later_for_the_next() {
    let (node, cluster) = start();
    node.set_complete_gci(Gci::from_parts(50, 0));
    assert_eq!(
        cluster
            .wait_durable(Gci::from_parts(7, 3))
            .expect("complete"),
        Gci::from_parts(50, 0),
        "the answer names the complete GCI"
    );
    let wanted = Gci::from_parts(60, 0);
    std::thread::scope(|scope| {
        let waiter = scope.spawn(|| cluster.wait_durable(wanted));
        eventually("the wait to be held", || node.held_gci_waits() == 1);
        node.set_complete_gci(Gci::from_parts(61, 2));
        assert_eq!(
            waiter.join().expect("no panic").expect("complete"),
            Gci::from_parts(61, 2)
        );
    });
    assert_eq!(cluster.in_flight(), 0);
}

#[test]
fn a_refused_wait_fails_with_its_code_and_the_commit_stands() {
    let (node, cluster) = start();
    node.set_max_gci_waits(0);
    let mut transaction = cluster.transaction();
    write(&cluster, &mut transaction, 2);
    let error = transaction.commit_durable().expect_err("no room to wait");
    let gci = transaction.commit_gci().expect("committed with a GCI");
    let ClientError::OutcomeUnknown { cause } = &error else {
        panic!("a committed durable commit whose wait failed: {error:?}");
    };
    assert!(
        matches!(
            **cause,
            ClientError::DurableWaitRefused {
                code: ErrorCode::TooManyGciWaits,
                gci: refused
            } if refused == gci
        ),
        "{error:?}"
    );
    assert!(
        !error.is_temporary(),
        "the transaction committed: retrying it would apply it twice"
    );
    assert!(cause.is_temporary(), "waiting again may succeed");
    assert_eq!(transaction.state(), TransactionState::Committed);
    assert_eq!(node.row_count("kv"), 1, "the commit stands");
    // Asking again once there is room and the GCI is complete works.
    node.set_max_gci_waits(8);
    node.set_complete_gci(gci);
    assert_eq!(cluster.wait_durable(gci).expect("complete"), gci);
}

#[test]
fn a_lost_connection_fails_the_wait_with_connection_lost() {
    let (node, cluster) = start();
    let mut transaction = cluster.transaction();
    write(&cluster, &mut transaction, 3);
    std::thread::scope(|scope| {
        let committer = scope.spawn(|| {
            let result = transaction.commit_durable();
            (result, transaction)
        });
        eventually("the GCI wait to be held", || node.held_gci_waits() == 1);
        node.disconnect_all();
        let (result, transaction) = committer.join().expect("no panic");
        let error = result.expect_err("no node left to ask");
        let ClientError::OutcomeUnknown { cause } = &error else {
            panic!("a committed durable commit whose wait failed: {error:?}");
        };
        assert_eq!(cause.code(), Some(ErrorCode::ConnectionLost), "{error:?}");
        assert_eq!(transaction.state(), TransactionState::Committed);
        assert!(transaction.commit_gci().is_some());
    });
    eventually("the fake to drop the wait", || node.held_gci_waits() == 0);
    let error = cluster.wait_durable(Gci(1)).expect_err("no connection");
    assert_eq!(error.code(), Some(ErrorCode::ConnectionLost));
}

#[test]
fn a_wait_whose_connection_is_lost_is_asked_again_on_another_node() {
    let fake = FakeCluster::start(FakeDataNodeOptions::default(), &[2, 3]).expect("fake nodes");
    let mgmd = fake.start_mgmd().expect("mgmd starts");
    let cluster = Cluster::connect(&mgmd.local_addr().to_string()).expect("connects");
    cluster.create_table(&kv_table()).expect("create table");
    fake.set_complete_gci(Gci(0));
    let mut transaction = cluster
        .transaction_on_node(NodeId(2))
        .expect("node 2 is a data node");
    write(&cluster, &mut transaction, 4);
    let (node2, node3) = (fake.node(2).expect("node 2"), fake.node(3).expect("node 3"));
    std::thread::scope(|scope| {
        let committer = scope.spawn(|| transaction.commit_durable());
        eventually("the wait on node 2", || {
            gci_waits_received(node2).len() == 1
        });
        eventually("node 2 to hold it", || fake.held_gci_waits() == 1);
        node2.disconnect_all();
        eventually("the wait asked again on node 3", || {
            gci_waits_received(node3).len() == 1 && fake.held_gci_waits() == 1
        });
        fake.set_complete_gci(FAR_AHEAD);
        let outcome = committer.join().expect("no panic").expect("durable commit");
        assert!(outcome.durable);
    });
}

#[test]
fn a_wait_without_an_answer_times_out_and_the_commit_stands() {
    let (node, cluster) = start_with(ConnectOptions {
        reply_timeout: Duration::from_millis(300),
        ..Default::default()
    });
    let mut transaction = cluster.transaction();
    write(&cluster, &mut transaction, 6);
    let error = transaction.commit_durable().expect_err("never complete");
    assert!(
        matches!(&error, ClientError::OutcomeUnknown { cause }
            if matches!(**cause, ClientError::Timeout { what, .. } if what.contains("durable"))),
        "{error:?}"
    );
    assert_eq!(transaction.state(), TransactionState::Committed);
    assert_eq!(cluster.in_flight(), 0, "the wait is given up");
    assert_eq!(node.held_gci_waits(), 1, "the fake still holds it");
    let error = cluster
        .wait_durable(transaction.commit_gci().expect("committed"))
        .expect_err("still not complete");
    assert!(matches!(error, ClientError::Timeout { .. }), "{error:?}");
}

/// Polls `session` until `condition` holds, collecting completions.
fn poll_until<'a>(
    session: &mut AsyncSession<'a, u32>,
    done: &mut Vec<Completion<'a, u32>>,
    what: &str,
    mut condition: impl FnMut(&[Completion<'a, u32>]) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !condition(done) {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        session.poll(Duration::from_millis(5), done);
    }
}

#[test]
fn the_session_hands_back_durable_commits_only_once_their_gci_is_complete() {
    let (node, cluster) = start();
    let mut session = cluster.session::<u32>();
    for k in 0..4u32 {
        let mut transaction = cluster.transaction();
        write(&cluster, &mut transaction, k);
        let commit = if k == 0 { Commit::Yes } else { Commit::Durable };
        session.execute(transaction, commit, k);
    }
    let mut done = Vec::new();
    poll_until(&mut session, &mut done, "three waits held", |_| {
        node.held_gci_waits() == 3
    });
    poll_until(&mut session, &mut done, "the plain commit", |done| {
        !done.is_empty()
    });
    assert_eq!(done.len(), 1, "only the plain commit is back");
    assert_eq!(done[0].user, 0);
    let plain = done.remove(0).result.expect("plain commit");
    assert!(plain.committed && !plain.durable);
    assert_eq!(session.in_flight(), 3);
    node.set_complete_gci(FAR_AHEAD);
    poll_until(&mut session, &mut done, "the durable commits", |done| {
        done.len() == 3
    });
    let mut users: Vec<u32> = done.iter().map(|completion| completion.user).collect();
    users.sort_unstable();
    assert_eq!(users, [1, 2, 3]);
    for completion in done.drain(..) {
        let outcome = completion.result.expect("durable commit");
        assert!(outcome.durable && outcome.gci.is_some(), "{outcome:?}");
        assert_eq!(completion.transaction.commit_gci(), outcome.gci);
    }
    assert_eq!(session.in_flight(), 0);
    assert_eq!(cluster.in_flight(), 0);
}

#[test]
fn the_session_reports_a_refused_wait_with_the_commit_standing() {
    let (node, cluster) = start();
    node.set_max_gci_waits(0);
    let mut session = cluster.session::<u32>();
    let mut transaction = cluster.transaction();
    write(&cluster, &mut transaction, 9);
    session.execute(transaction, Commit::Durable, 9);
    let mut done = Vec::new();
    poll_until(&mut session, &mut done, "the completion", |done| {
        !done.is_empty()
    });
    let completion = done.remove(0);
    let error = completion.result.expect_err("refused");
    assert_eq!(error.code(), Some(ErrorCode::CommitOutcomeUnknown));
    assert_eq!(error.label(), "4022/4021", "{error:?}");
    assert_eq!(completion.transaction.state(), TransactionState::Committed);
    assert!(completion.transaction.commit_gci().is_some());
}
