//! The real client against the real blocks, in process (`sim::harness`):
//! routing by key hint, constraint errors, durable commits, lock waits
//! that end in the lock-wait timeout (simulated time), and the replica
//! checker, each from a seed.

use client::{ClientError, Commit, ErrorClass, ErrorCode, LockMode, Value};
use sim::harness::{create_kv_table, Harness};

fn code_of<T: std::fmt::Debug>(result: Result<T, ClientError>) -> Option<ErrorCode> {
    result.expect_err("the operation fails").code()
}

#[test]
fn a_key_hint_starts_the_transaction_on_the_primarys_node() {
    let placements = Harness::new(1).nodes(2, 1).run(|cluster, _| {
        let table = create_kv_table(cluster, "routed");
        let mut placements = Vec::new();
        for k in 0..16u64 {
            let key = [Value::UInt(k)];
            let primary = cluster.primary_node(&table, &key).unwrap().expect("a map");
            let mut transaction = cluster.transaction_with_hint(&table, &key).unwrap();
            transaction
                .insert(&table, &[("k", Value::UInt(k)), ("v", Value::from("x"))])
                .unwrap();
            transaction.execute(Commit::Yes).unwrap();
            placements.push((primary, transaction.node()));
        }
        placements
    });
    for (primary, started_on) in &placements {
        assert_eq!(primary, started_on, "{placements:?}");
    }
    let nodes: std::collections::BTreeSet<_> = placements.iter().map(|(p, _)| *p).collect();
    assert_eq!(
        nodes.len(),
        2,
        "16 keys spread over both nodes: {placements:?}"
    );
}

#[test]
fn constraint_and_schema_errors_come_from_the_real_blocks() {
    let codes = Harness::new(2).run(|cluster, _| {
        let table = create_kv_table(cluster, "errors");
        let row = [("k", Value::UInt(1)), ("v", Value::from("one"))];
        let mut first = cluster.transaction();
        first.insert(&table, &row).unwrap();
        first.execute(Commit::Yes).unwrap();
        let mut again = cluster.transaction();
        again.insert(&table, &row).unwrap();
        let duplicate = code_of(again.execute(Commit::Yes));
        let mut missing = cluster.transaction();
        let set = [("v", Value::from("two"))];
        missing.update(&table, &[Value::UInt(2)], &set).unwrap();
        let no_row = code_of(missing.execute(Commit::Yes));
        let unknown = code_of(cluster.table("no_such_table"));
        (duplicate, no_row, unknown)
    });
    assert_eq!(
        codes,
        (
            Some(ErrorCode::DuplicateKey),
            Some(ErrorCode::NoSuchRow),
            Some(ErrorCode::UnknownTable)
        )
    );
}

#[test]
fn a_durable_commit_returns_once_its_gci_is_durable() {
    let (outcome, waited) = Harness::new(3).nodes(2, 2).run(|cluster, _| {
        let table = create_kv_table(cluster, "durable");
        let mut transaction = cluster.transaction();
        transaction
            .insert(&table, &[("k", Value::UInt(7)), ("v", Value::from("kept"))])
            .unwrap();
        let outcome = transaction.execute(Commit::Durable).unwrap();
        let gci = outcome.gci.expect("a write commits in a GCI");
        (outcome, cluster.wait_durable(gci).unwrap() >= gci)
    });
    assert!(outcome.committed && outcome.durable, "{outcome:?}");
    assert!(waited, "a GCI a durable commit reported is durable");
}

#[test]
fn a_lock_held_by_another_transaction_ends_in_the_lock_wait_timeout() {
    let (class, code, waited_us) = Harness::new(4).run(|cluster, context| {
        let table = create_kv_table(cluster, "locks");
        let mut insert = cluster.transaction();
        insert
            .insert(&table, &[("k", Value::UInt(1)), ("v", Value::Null)])
            .unwrap();
        insert.execute(Commit::Yes).unwrap();
        let key = [Value::UInt(1)];
        let mut holder = cluster.transaction();
        holder.read(&table, &key, LockMode::Exclusive).unwrap();
        holder.execute(Commit::No).unwrap();
        let mut waiter = cluster.transaction();
        waiter.read(&table, &key, LockMode::Exclusive).unwrap();
        let started_us = context.now_us();
        let error = waiter.execute(Commit::Yes).expect_err("the lock is held");
        let waited_us = context.now_us() - started_us;
        holder.rollback().unwrap();
        (error.class(), error.code(), waited_us)
    });
    assert_eq!(class, Some(ErrorClass::Temporary));
    assert_eq!(code, Some(ErrorCode::LockWaitTimeout));
    // Simulated time, so exact enough to check the timeout was waited for.
    let timeout_us = sim::config::LOCK_WAIT_TIMEOUT_MS * 1000;
    assert!(waited_us >= timeout_us, "waited {waited_us} us");
}

#[test]
fn the_clients_replica_checker_finds_the_replicas_equal() {
    let report = Harness::new(5).nodes(2, 2).run(|cluster, _| {
        let table = create_kv_table(cluster, "replicated");
        for k in 0..50u64 {
            let mut transaction = cluster.transaction();
            let v = Value::from(format!("value {k}").as_str());
            transaction
                .insert(&table, &[("k", Value::UInt(k)), ("v", v)])
                .unwrap();
            transaction.execute(Commit::Yes).unwrap();
        }
        cluster.check_replicas().unwrap()
    });
    assert_eq!(report.mismatches, 0, "{report}");
    assert_eq!(report.rows_checked, 50);
}

#[test]
fn the_same_seed_gives_the_same_answers() {
    let run = |seed| {
        Harness::new(seed).nodes(2, 2).run(|cluster, context| {
            let table = create_kv_table(cluster, "again");
            let mut gcis = Vec::new();
            for k in 0..20u64 {
                let mut transaction = cluster.transaction();
                transaction
                    .insert(&table, &[("k", Value::UInt(k)), ("v", Value::Null)])
                    .unwrap();
                gcis.push((
                    transaction.execute(Commit::Yes).unwrap().gci,
                    context.now_us(),
                ));
            }
            gcis
        })
    };
    assert_eq!(run(9), run(9));
}

/// A commit whose write failed after the bytes went out may have been
/// applied: the client must say the outcome is unknown, never a temporary
/// error that invites a retry. Here it was applied, as a read through the
/// other node shows.
#[test]
fn a_commit_whose_write_failed_after_sending_has_an_unknown_outcome() {
    let (error, value) = Harness::new(6).nodes(2, 2).run(|cluster, context| {
        let table = create_kv_table(cluster, "cut");
        let nodes = cluster.data_nodes();
        let mut insert = cluster.transaction_on_node(nodes[0]).unwrap();
        insert
            .insert(
                &table,
                &[("k", Value::UInt(1)), ("v", Value::from("before"))],
            )
            .unwrap();
        insert.execute(Commit::Yes).unwrap();
        let mut update = cluster.transaction_on_node(nodes[0]).unwrap();
        let set = [("v", Value::from("after"))];
        update.update(&table, &[Value::UInt(1)], &set).unwrap();
        context.fail_next_write_after_sending();
        let error = update.execute(Commit::Yes).expect_err("the write failed");
        // The commit is still on its way through the node: let it finish.
        context.sleep(std::time::Duration::from_millis(500));
        let mut read = cluster.transaction_on_node(nodes[1]).unwrap();
        let op = read
            .read(&table, &[Value::UInt(1)], LockMode::CommittedRead)
            .unwrap();
        read.execute(Commit::Yes).unwrap();
        let value = read
            .get(op)
            .and_then(|row| row.get("v")?.as_str().map(String::from));
        (error, value)
    });
    assert!(
        matches!(&error, ClientError::OutcomeUnknown { cause }
            if cause.code() == Some(ErrorCode::ConnectionLost)),
        "{error:?}"
    );
    assert!(!error.is_temporary());
    assert_eq!(value.as_deref(), Some("after"), "the commit was applied");
}
