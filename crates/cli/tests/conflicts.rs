//! Conflicting transactions on a real data node: a committed read never
//! waits and never sees uncommitted data; shared locks coexist; an
//! exclusive read waits for the writer and then sees its committed value;
//! a transaction kept waiting past `lock_wait_timeout_ms` aborts with
//! LockWaitTimeout (temporary) and releases every lock it held; a deadlock
//! ends with at least one side timed out and the other free to commit; a
//! transaction dropped without commit releases its locks.
//!
//! Waiting is observed, never timed: "B is still waiting" means B has not
//! answered when A commits, which is a correctness property (B must not read
//! past A's exclusive lock), however slow the machine.

mod common;

use client::{
    ClientError, Cluster, Commit, ErrorClass, ErrorCode, LockMode, Table, Transaction,
    TransactionState, Value,
};
use common::{
    acct_definition, create_table, key, locked_read, read_row, set, wait_behind, ClusterOptions,
    TestCluster, ANSWER, OBSERVE,
};
use std::sync::mpsc;
use std::sync::Arc;

/// Long enough that a waiter in the "waits, then proceeds" checks cannot
/// time out on a slow machine before its blocker commits; the timeout
/// checks then take this long each.
const LOCK_WAIT_TIMEOUT_MS: u64 = 5000;

fn committed_value(cluster: &Cluster, table: &Arc<Table>, k: u32) -> i64 {
    read_row(cluster, table, &key(k))
        .expect("committed read")
        .get("v")
        .and_then(Value::as_i64)
        .expect("v")
}

#[test]
fn conflicting_transactions_wait_or_time_out_and_release_locks() {
    let processes = TestCluster::start(ClusterOptions {
        name: "conflicts",
        lock_wait_timeout_ms: LOCK_WAIT_TIMEOUT_MS,
        ..Default::default()
    });
    // Two API nodes, as two applications would be.
    let a = processes.connect();
    let b = processes.connect();
    let table_a = create_table(&a, &acct_definition());
    let table_b = b.table("acct").expect("acct");
    let mut transaction = a.transaction();
    for k in 1..=6 {
        transaction
            .insert(&table_a, &[("k", Value::UInt(k)), ("v", Value::Int(0))])
            .expect("valid insert");
    }
    transaction.execute(Commit::Yes).expect("insert rows");

    exclusive_reader_waits_for_writer(&a, &table_a, &b, &table_b);
    shared_locks_coexist(&a, &table_a, &b, &table_b);
    waiter_times_out_and_releases_its_locks(&a, &table_a, &b, &table_b);
    deadlock_ends_with_a_timeout(&a, &table_a, &b, &table_b);
    dropped_transaction_releases_locks(&a, &table_a, &b, &table_b);
    vanished_client_releases_locks(&processes, &b, &table_b);
    waiters_on_uncommitted_inserts_and_deletes(&a, &table_a, &b, &table_b);
    concurrent_increments_are_not_lost(&processes, &a, &table_a);
    let mut processes = processes;
    processes.assert_node_serving();
}

fn exclusive_reader_waits_for_writer(
    a: &Cluster,
    table_a: &Arc<Table>,
    b: &Cluster,
    table_b: &Arc<Table>,
) {
    let mut writer = a.transaction();
    set(&mut writer, table_a, 1, 11);
    writer.execute(Commit::No).expect("A updates k=1");

    // No dirty read, and a committed read does not wait for the lock.
    assert_eq!(committed_value(b, table_b, 1), 0);

    std::thread::scope(|scope| {
        let (sender, receiver) = mpsc::channel();
        let reader = scope.spawn(move || {
            let mut transaction = b.transaction();
            let result = locked_read(&mut transaction, table_b, 1, LockMode::Exclusive);
            let _ = sender.send(result.map_err(|error| error.to_string()));
            transaction.execute(Commit::Yes).map(|_| ())
        });
        match receiver.recv_timeout(OBSERVE) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            other => panic!("B's exclusive read answered while A held the row: {other:?}"),
        }
        writer.execute(Commit::Yes).expect("A commits");
        let seen = receiver
            .recv_timeout(ANSWER)
            .expect("B's read answers once A committed");
        assert_eq!(seen, Ok(11), "B sees A's committed value");
        reader
            .join()
            .expect("reader thread")
            .expect("B commits its read");
    });
}

fn shared_locks_coexist(a: &Cluster, table_a: &Arc<Table>, b: &Cluster, table_b: &Arc<Table>) {
    let mut first = a.transaction();
    assert_eq!(
        locked_read(&mut first, table_a, 2, LockMode::Shared).expect("A shared"),
        0
    );
    // Would end in LockWaitTimeout if shared locks excluded each other.
    let mut second = b.transaction();
    assert_eq!(
        locked_read(&mut second, table_b, 2, LockMode::Shared).expect("B shared beside A"),
        0
    );
    second.execute(Commit::Yes).expect("B commits");

    // An exclusive lock waits for the shared one.
    std::thread::scope(|scope| {
        let (sender, receiver) = mpsc::channel();
        let writer = scope.spawn(move || {
            let mut transaction = b.transaction();
            set(&mut transaction, table_b, 2, 22);
            let result = transaction.execute(Commit::Yes).map(|_| ());
            let _ = sender.send(result.map_err(|error| error.to_string()));
        });
        match receiver.recv_timeout(OBSERVE) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            other => panic!("B's update went past A's shared lock: {other:?}"),
        }
        first
            .execute(Commit::Yes)
            .expect("A releases its shared lock");
        assert_eq!(
            receiver.recv_timeout(ANSWER).expect("B's update answers"),
            Ok(())
        );
        writer.join().expect("writer thread");
    });
    assert_eq!(committed_value(a, table_a, 2), 22);
}

fn waiter_times_out_and_releases_its_locks(
    a: &Cluster,
    table_a: &Arc<Table>,
    b: &Cluster,
    table_b: &Arc<Table>,
) {
    let mut holder = a.transaction();
    set(&mut holder, table_a, 3, 33);
    holder.execute(Commit::No).expect("A holds k=3");

    // B takes k=4 in a first batch, then waits for k=3 until it times out.
    let mut waiter = b.transaction();
    set(&mut waiter, table_b, 4, 44);
    waiter.execute(Commit::No).expect("B holds k=4");
    set(&mut waiter, table_b, 3, -1);
    let error = waiter
        .execute(Commit::Yes)
        .expect_err("B cannot get k=3 while A holds it");
    assert_eq!(error.code(), Some(ErrorCode::LockWaitTimeout), "{error}");
    assert_eq!(error.class(), Some(ErrorClass::Temporary));
    assert!(error.is_temporary());
    assert_eq!(waiter.state(), TransactionState::Aborted);

    // A was only kept waiting for, not harmed: it commits.
    let outcome = holder
        .execute(Commit::Yes)
        .expect("A commits after B's timeout");
    assert!(outcome.committed);
    assert_eq!(committed_value(b, table_b, 3), 33);

    // B's locks are gone and its first batch is undone: a new transaction
    // locks both rows at once (it would time out otherwise).
    let mut after = b.transaction();
    assert_eq!(
        locked_read(&mut after, table_b, 4, LockMode::Exclusive).expect("k=4 is free"),
        0,
        "B's aborted update of k=4 is rolled back"
    );
    assert_eq!(
        locked_read(&mut after, table_b, 3, LockMode::Exclusive).expect("k=3 is free"),
        33
    );
    set(&mut after, table_b, 3, 34);
    after.execute(Commit::Yes).expect("commit");
    assert_eq!(committed_value(a, table_a, 3), 34);
}

fn deadlock_ends_with_a_timeout(
    a: &Cluster,
    table_a: &Arc<Table>,
    b: &Cluster,
    table_b: &Arc<Table>,
) {
    let mut first = a.transaction();
    set(&mut first, table_a, 5, 55);
    first.execute(Commit::No).expect("A holds k=5");
    let mut second = b.transaction();
    set(&mut second, table_b, 6, 66);
    second.execute(Commit::No).expect("B holds k=6");

    let (result_a, result_b) = std::thread::scope(|scope| {
        let a_side = scope.spawn(move || {
            set(&mut first, table_a, 6, 56);
            first.execute(Commit::Yes).map(|_| ())
        });
        let b_side = scope.spawn(move || {
            set(&mut second, table_b, 5, 65);
            second.execute(Commit::Yes).map(|_| ())
        });
        (
            a_side.join().expect("A thread"),
            b_side.join().expect("B thread"),
        )
    });
    let codes =
        [&result_a, &result_b].map(|result| result.as_ref().err().and_then(ClientError::code));
    assert!(
        codes.contains(&Some(ErrorCode::LockWaitTimeout)),
        "a deadlock must end in a lock wait timeout: A {result_a:?}, B {result_b:?}"
    );
    for code in codes.into_iter().flatten() {
        assert_eq!(
            code,
            ErrorCode::LockWaitTimeout,
            "A {result_a:?}, B {result_b:?}"
        );
    }
    // Each row holds what the committed side (if any) wrote, else 0.
    let expected_5 = if result_a.is_ok() {
        55
    } else if result_b.is_ok() {
        65
    } else {
        0
    };
    let expected_6 = if result_a.is_ok() {
        56
    } else if result_b.is_ok() {
        66
    } else {
        0
    };
    assert_eq!(committed_value(a, table_a, 5), expected_5);
    assert_eq!(committed_value(a, table_a, 6), expected_6);
    // And nothing stays locked.
    let mut after = a.transaction();
    set(&mut after, table_a, 5, 0);
    set(&mut after, table_a, 6, 0);
    after.execute(Commit::Yes).expect("both rows are free");
}

fn dropped_transaction_releases_locks(
    a: &Cluster,
    table_a: &Arc<Table>,
    b: &Cluster,
    table_b: &Arc<Table>,
) {
    let mut forgotten = a.transaction();
    set(&mut forgotten, table_a, 1, 999);
    forgotten.execute(Commit::No).expect("A holds k=1");
    drop(forgotten);
    // The rollback sent on drop releases k=1 long before B's lock wait
    // could time out.
    let mut after = b.transaction();
    assert_eq!(
        locked_read(&mut after, table_b, 1, LockMode::Exclusive).expect("k=1 is free"),
        11,
        "the dropped transaction's update is rolled back"
    );
    after.execute(Commit::Yes).expect("commit");
}

fn vanished_client_releases_locks(processes: &TestCluster, b: &Cluster, table_b: &Arc<Table>) {
    let gone = processes.connect();
    let table = gone.table("acct").expect("acct");
    let mut transaction = gone.transaction();
    set(&mut transaction, &table, 2, 2222);
    transaction
        .execute(Commit::No)
        .expect("the vanishing client holds k=2");
    // No rollback is ever sent: the connection just closes, as when a
    // process dies. The data node must abort the transaction itself.
    std::mem::forget(transaction);
    drop(table);
    drop(gone);
    let mut after = b.transaction();
    assert_eq!(
        locked_read(&mut after, table_b, 2, LockMode::Exclusive)
            .expect("k=2 is released when its holder's connection closes"),
        22,
        "the vanished client's update is rolled back"
    );
    after.execute(Commit::Yes).expect("commit");
}

/// Several API nodes increment two counters in the same transaction
/// (locked in key order, so they never deadlock), retrying temporary
/// errors. With correct locking no increment is lost.
fn concurrent_increments_are_not_lost(processes: &TestCluster, a: &Cluster, table_a: &Arc<Table>) {
    const THREADS: usize = 4;
    const INCREMENTS: usize = 100;
    let start_3 = committed_value(a, table_a, 3);
    let start_4 = committed_value(a, table_a, 4);
    let clients: Vec<Cluster> = (0..THREADS).map(|_| processes.connect()).collect();
    let retries: usize = std::thread::scope(|scope| {
        let workers: Vec<_> = clients
            .iter()
            .map(|cluster| {
                scope.spawn(move || {
                    let table = cluster.table("acct").expect("acct");
                    let mut retries = 0;
                    for _ in 0..INCREMENTS {
                        loop {
                            let mut transaction = cluster.transaction();
                            let attempt = (|| {
                                let three =
                                    locked_read(&mut transaction, &table, 3, LockMode::Exclusive)?;
                                let four =
                                    locked_read(&mut transaction, &table, 4, LockMode::Exclusive)?;
                                set(&mut transaction, &table, 3, three + 1);
                                set(&mut transaction, &table, 4, four + 1);
                                transaction.execute(Commit::Yes)
                            })();
                            match attempt {
                                Ok(_) => break,
                                Err(error) if error.is_temporary() => retries += 1,
                                Err(error) => panic!("increment: {error}"),
                            }
                        }
                    }
                    retries
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("worker"))
            .sum()
    });
    let total = (THREADS * INCREMENTS) as i64;
    assert_eq!(
        committed_value(a, table_a, 3),
        start_3 + total,
        "lost increments on k=3 ({retries} retries)"
    );
    assert_eq!(
        committed_value(a, table_a, 4),
        start_4 + total,
        "lost increments on k=4 ({retries} retries)"
    );
}

fn insert_row(transaction: &mut Transaction<'_>, table: &Arc<Table>, k: u32, v: i64) {
    transaction
        .insert(table, &[("k", Value::UInt(k.into())), ("v", Value::Int(v))])
        .expect("valid insert");
}

/// Operations queued on a row that an uncommitted insert created or an
/// uncommitted delete removes: what they get depends on how the holder
/// ends, and the row's slot must not be reused under them.
fn waiters_on_uncommitted_inserts_and_deletes(
    a: &Cluster,
    table_a: &Arc<Table>,
    b: &Cluster,
    table_b: &Arc<Table>,
) {
    let b_insert = |k: u32, v: i64| {
        move || {
            let mut transaction = b.transaction();
            insert_row(&mut transaction, table_b, k, v);
            transaction
                .execute(Commit::Yes)
                .map(|_| ())
                .map_err(|error| error.code())
        }
    };
    let b_read = |k: u32| {
        move || {
            let mut transaction = b.transaction();
            let result = locked_read(&mut transaction, table_b, k, LockMode::Exclusive)
                .map_err(|error| error.code());
            if result.is_ok() {
                transaction.execute(Commit::Yes).expect("commit the read");
            }
            result
        }
    };

    // Insert rolled back: the waiting insert of the same key succeeds.
    let mut holder = a.transaction();
    insert_row(&mut holder, table_a, 50, 1);
    holder.execute(Commit::No).expect("A inserts k=50");
    let got = wait_behind("B inserts k=50 behind A's insert", b_insert(50, 2), || {
        holder.rollback().expect("A rolls back");
    });
    assert_eq!(
        got,
        Ok(()),
        "the key is free once A's insert is rolled back"
    );
    assert_eq!(committed_value(a, table_a, 50), 2);

    // Insert committed: the waiting insert is a duplicate.
    let mut holder = a.transaction();
    insert_row(&mut holder, table_a, 51, 1);
    holder.execute(Commit::No).expect("A inserts k=51");
    let got = wait_behind("B inserts k=51 behind A's insert", b_insert(51, 2), || {
        holder.execute(Commit::Yes).expect("A commits");
    });
    assert_eq!(got, Err(Some(ErrorCode::DuplicateKey)));
    assert_eq!(committed_value(a, table_a, 51), 1);

    // Insert committed: a waiting exclusive read sees the new row.
    let mut holder = a.transaction();
    insert_row(&mut holder, table_a, 52, 7);
    holder.execute(Commit::No).expect("A inserts k=52");
    let got = wait_behind("B reads k=52 behind A's insert", b_read(52), || {
        holder.execute(Commit::Yes).expect("A commits");
    });
    assert_eq!(got, Ok(7));

    // Insert rolled back: a waiting exclusive read finds no row.
    let mut holder = a.transaction();
    insert_row(&mut holder, table_a, 53, 7);
    holder.execute(Commit::No).expect("A inserts k=53");
    let got = wait_behind("B reads k=53 behind A's insert", b_read(53), || {
        holder.rollback().expect("A rolls back");
    });
    assert_eq!(got, Err(Some(ErrorCode::NoSuchRow)));

    // Delete committed: a waiting read finds no row, a waiting insert succeeds.
    let mut holder = a.transaction();
    holder.delete(table_a, &key(50)).expect("valid delete");
    holder.execute(Commit::No).expect("A deletes k=50");
    let got = wait_behind("B reads k=50 behind A's delete", b_read(50), || {
        holder.execute(Commit::Yes).expect("A commits");
    });
    assert_eq!(got, Err(Some(ErrorCode::NoSuchRow)));
    let mut holder = a.transaction();
    holder.delete(table_a, &key(51)).expect("valid delete");
    holder.execute(Commit::No).expect("A deletes k=51");
    let got = wait_behind("B inserts k=51 behind A's delete", b_insert(51, 3), || {
        holder.execute(Commit::Yes).expect("A commits");
    });
    assert_eq!(got, Ok(()));
    assert_eq!(committed_value(a, table_a, 51), 3);

    // Delete rolled back: a waiting read sees the row as it was.
    let mut holder = a.transaction();
    holder.delete(table_a, &key(52)).expect("valid delete");
    holder.execute(Commit::No).expect("A deletes k=52");
    let got = wait_behind("B reads k=52 behind A's delete", b_read(52), || {
        holder.rollback().expect("A rolls back");
    });
    assert_eq!(got, Ok(7));

    // Several waiters queued on one inserted row, the holder rolls back:
    // exactly one insert wins, the others are duplicates.
    let mut holder = a.transaction();
    insert_row(&mut holder, table_a, 54, 1);
    holder.execute(Commit::No).expect("A inserts k=54");
    let results = std::thread::scope(|scope| {
        let (sender, receiver) = mpsc::channel();
        for v in 10..13 {
            let sender = sender.clone();
            let insert = b_insert(54, v);
            scope.spawn(move || {
                let _ = sender.send((v, insert()));
            });
        }
        drop(sender);
        match receiver.recv_timeout(OBSERVE) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            other => panic!("an insert went past A's uncommitted insert: {other:?}"),
        }
        holder.rollback().expect("A rolls back");
        receiver.iter().collect::<Vec<_>>()
    });
    let winners: Vec<i64> = results
        .iter()
        .filter(|(_, result)| result.is_ok())
        .map(|(v, _)| *v)
        .collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    assert!(
        results
            .iter()
            .all(|(_, result)| result.is_ok() || *result == Err(Some(ErrorCode::DuplicateKey))),
        "{results:?}"
    );
    assert_eq!(committed_value(a, table_a, 54), winners[0]);
}
