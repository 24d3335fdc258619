//! The client against peers on real loopback TCP speaking the real wire
//! format: the in-process fake data node (`fakenode`) for protocol
//! behaviour, an in-process mgmd for `Cluster::connect`, and a hand-made
//! peer that misbehaves at the byte level.

use client::{
    ClientError, Cluster, ColumnDef, ColumnType, Commit, ConnectOptions, ErrorClass, ErrorCode,
    LockMode, TableDef, TransactionState, Value,
};
use fakenode::{FakeDataNode, FakeDataNodeOptions, ReceivedSignal};
use signal::signals::tc_key_flags::{COMMIT, EXECUTE, START};
use signal::BlockKind;
use std::io::Write;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

const API_NODE: u16 = 200;

fn start(options: FakeDataNodeOptions) -> (FakeDataNode, Cluster) {
    let node = FakeDataNode::start(options).expect("fake data node listens");
    let cluster =
        Cluster::connect_direct(&node.addr().to_string(), API_NODE).expect("client registers");
    (node, cluster)
}

fn accounts() -> TableDef {
    let column = |name: &str, column_type, nullable| ColumnDef {
        name: name.into(),
        column_type,
        nullable,
    };
    TableDef {
        indexes: Vec::new(),
        revision: 0,
        id: 0,
        version: 0,
        name: "accounts".into(),
        partitions: 0,
        primary_key: vec![0],
        columns: vec![
            column("id", ColumnType::Int { unsigned: true }, false),
            column("balance", ColumnType::BigInt { unsigned: false }, false),
            column("owner", ColumnType::VarChar(8), true),
        ],
        partition_key: Vec::new(),
    }
}

fn start_with_table(options: FakeDataNodeOptions) -> (FakeDataNode, Cluster) {
    let (node, cluster) = start(options);
    cluster.create_table(&accounts()).expect("create table");
    node.clear_received();
    (node, cluster)
}

fn insert_accounts(cluster: &Cluster, ids: std::ops::Range<u32>) {
    let table = cluster.table("accounts").expect("table");
    let mut transaction = cluster.transaction();
    for id in ids {
        transaction
            .insert(
                &table,
                &[
                    ("id", Value::from(id)),
                    ("balance", Value::from(100 * id as i64)),
                ],
            )
            .expect("valid row");
    }
    transaction.execute(Commit::Yes).expect("insert commits");
}

fn named<'a>(received: &'a [ReceivedSignal], name: &str) -> Vec<&'a ReceivedSignal> {
    received
        .iter()
        .filter(|signal| signal.name == name)
        .collect()
}

/// Polls until `condition` holds; the deadline only guards against a hang.
fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !condition() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn registration_repeats_until_the_node_is_started() {
    let (node, cluster) = start(FakeDataNodeOptions {
        not_started_replies: 3,
        tc_instances: 3,
        ..Default::default()
    });
    let registrations = named(&node.received(), "ApiRegReq")
        .into_iter()
        .cloned()
        .collect::<Vec<_>>();
    assert_eq!(registrations.len(), 4);
    for request in &registrations {
        assert_eq!(request.to_kind, BlockKind::Membership);
        assert_eq!(request.to_instance, 0);
        assert_eq!(request.from_node, API_NODE);
    }
    // Each registration is its own frame, numbered from 0.
    let sequences: Vec<u64> = registrations.iter().map(|r| r.frame_sequence).collect();
    assert_eq!(sequences, [0, 1, 2, 3]);
    assert_eq!(cluster.tc_instances(), 3);
    assert_eq!(cluster.api_node(), API_NODE);
}

#[test]
fn a_node_that_never_starts_is_reported() {
    let node = FakeDataNode::start(FakeDataNodeOptions {
        not_started_replies: u32::MAX,
        ..Default::default()
    })
    .expect("listens");
    let options = ConnectOptions {
        connect_timeout: Duration::from_millis(400),
        ..Default::default()
    };
    let error = Cluster::connect_direct_with(&node.addr().to_string(), API_NODE, options)
        .err()
        .expect("never started");
    assert_eq!(error.code(), Some(ErrorCode::NodeNotStarted), "{error}");
    assert!(error.is_temporary());
    assert!(
        error.to_string().contains("did not finish starting"),
        "{error}"
    );
}

#[test]
fn nothing_listening_is_a_connect_error() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let options = ConnectOptions {
        connect_timeout: Duration::from_millis(300),
        ..Default::default()
    };
    let error = Cluster::connect_direct_with(&format!("127.0.0.1:{port}"), API_NODE, options)
        .err()
        .expect("nothing listens");
    assert!(matches!(error, ClientError::Connect { .. }), "{error}");
}

#[test]
fn schema_requests_create_fetch_cache_and_drop() {
    let (node, cluster) = start(Default::default());
    let created = cluster.create_table(&accounts()).expect("create");
    assert_ne!(created.version, 0);
    assert_eq!(created.partitions, 2, "dict's default partitions come back");
    assert_eq!(created.columns, accounts().columns);
    let received = node.received();
    let create = named(&received, "CreateTabReq");
    assert_eq!(create.len(), 1);
    assert_eq!(create[0].to_kind, BlockKind::Dict);
    assert_eq!(named(&received, "GetTabInfoReq").len(), 1);

    node.clear_received();
    let table = cluster.table("accounts").expect("cached");
    assert_eq!(table.def(), &created);
    assert!(
        node.received().is_empty(),
        "a cached table costs no request"
    );
    cluster.invalidate_table("accounts");
    cluster.table("accounts").expect("refetched");
    assert_eq!(named(&node.received(), "GetTabInfoReq").len(), 1);

    let exists = cluster.create_table(&accounts()).unwrap_err();
    assert_eq!(exists.code(), Some(ErrorCode::TableExists), "{exists}");
    assert!(exists.to_string().contains("accounts"), "{exists}");

    cluster.drop_table("accounts").expect("drop");
    let gone = cluster.table("accounts").unwrap_err();
    assert_eq!(gone.code(), Some(ErrorCode::UnknownTable), "{gone}");
    let gone = cluster.drop_table("accounts").unwrap_err();
    assert_eq!(gone.code(), Some(ErrorCode::UnknownTable), "{gone}");

    let mut invalid = accounts();
    invalid.primary_key.clear();
    let error = cluster.create_table(&invalid).unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::BadTableDefinition));
    assert!(error.to_string().contains("primary key"), "{error}");
    assert_eq!(cluster.in_flight(), 0);
}

#[test]
fn a_batch_travels_in_one_frame_with_start_execute_commit_flags() {
    let (node, cluster) = start_with_table(Default::default());
    insert_accounts(&cluster, 0..5);
    let received = node.received();
    let requests = named(&received, "TcKeyReq");
    assert_eq!(requests.len(), 5);
    let sequence = requests[0].frame_sequence;
    for request in &requests {
        assert_eq!(request.frame_sequence, sequence, "one frame for the batch");
        assert_eq!(request.frame_signals, 5);
        assert_eq!(request.to_kind, BlockKind::Tc);
    }
    let flags: Vec<u8> = requests.iter().map(|r| r.flags).collect();
    assert_eq!(flags, [START, 0, 0, 0, EXECUTE | COMMIT]);
    assert_eq!(node.row_count("accounts"), 5);
}

#[test]
fn a_batch_larger_than_a_frame_spans_several_frames() {
    let (node, cluster) = start(Default::default());
    let mut definition = accounts();
    definition.name = "blobs".into();
    definition.columns[2].column_type = ColumnType::VarBinary(16_000);
    cluster.create_table(&definition).expect("create");
    node.clear_received();
    let table = cluster.table("blobs").expect("table");
    let mut transaction = cluster.transaction();
    for id in 0..150u32 {
        transaction
            .insert(
                &table,
                &[
                    ("id", Value::from(id)),
                    ("balance", Value::from(0)),
                    ("owner", Value::from(vec![id as u8; 15_000])),
                ],
            )
            .expect("row");
    }
    transaction
        .execute(Commit::Yes)
        .expect("2 MB batch commits");
    let received = node.received();
    let requests = named(&received, "TcKeyReq");
    assert_eq!(requests.len(), 150);
    let mut frames: Vec<u64> = requests.iter().map(|r| r.frame_sequence).collect();
    frames.dedup();
    assert!(frames.len() >= 2, "frames: {frames:?}");
    assert_eq!(node.row_count("blobs"), 150);
    // More large rows in one batch than the client's pool has sections.
    let mut transaction = cluster.transaction();
    let reads: Vec<_> = (0..150u32)
        .map(|id| {
            transaction
                .read(&table, &[Value::from(id)], LockMode::CommittedRead)
                .expect("key")
        })
        .collect();
    transaction
        .execute(Commit::Yes)
        .expect("2 MB of rows come back");
    for (id, read) in reads.into_iter().enumerate() {
        let row = transaction.get(read).expect("row");
        assert_eq!(row.get("owner"), Some(&Value::from(vec![id as u8; 15_000])));
    }
}

#[test]
fn reads_return_rows_and_commits_return_the_gci() {
    let (_node, cluster) = start_with_table(Default::default());
    let table = cluster.table("accounts").expect("table");
    let mut transaction = cluster.transaction();
    transaction
        .insert(
            &table,
            &[
                ("id", Value::from(7u32)),
                ("balance", Value::from(-3i64)),
                ("owner", Value::from("ann")),
            ],
        )
        .expect("row");
    let outcome = transaction.execute(Commit::Yes).expect("commit");
    assert!(outcome.committed);
    assert!(outcome.gci.is_some(), "a write commits in a GCI");
    assert_eq!(transaction.state(), TransactionState::Committed);

    let mut transaction = cluster.transaction();
    let read = transaction
        .read(&table, &[Value::from(7u32)], LockMode::CommittedRead)
        .expect("key");
    let outcome = transaction.execute(Commit::Yes).expect("read");
    assert_eq!(outcome.gci, None, "a read-only commit writes nothing");
    let row = transaction.get(read).expect("row read");
    assert_eq!(row.get("id"), Some(&Value::UInt(7)));
    assert_eq!(row.get("balance"), Some(&Value::Int(-3)));
    assert_eq!(row.get(2u16).and_then(Value::as_str), Some("ann"));
    assert_eq!(
        transaction.execute(Commit::No).unwrap_err().code(),
        None,
        "a committed transaction cannot run again"
    );
}

#[test]
fn only_a_transaction_of_committed_reads_holds_nothing() {
    let (_node, cluster) = start_with_table(Default::default());
    insert_accounts(&cluster, 0..2);
    let table = cluster.table("accounts").expect("table");
    let key = [Value::from(1u32)];
    let mut reads = cluster.transaction();
    assert!(reads.holds_nothing(), "nothing sent yet");
    reads
        .read(&table, &key, LockMode::CommittedRead)
        .expect("key");
    reads.execute(Commit::No).expect("read");
    assert_eq!(reads.state(), TransactionState::Active);
    assert!(reads.holds_nothing(), "committed reads take no lock");
    reads.read(&table, &key, LockMode::Shared).expect("key");
    assert!(!reads.holds_nothing(), "a locking read queued");
    reads.execute(Commit::No).expect("locked read");
    assert!(!reads.holds_nothing(), "the lock is held until the end");
    reads.execute(Commit::Yes).expect("commit");
    assert!(!reads.holds_nothing(), "committed: over");

    let mut write = cluster.transaction();
    write
        .update(&table, &key, &[("owner", Value::from("x"))])
        .expect("key");
    assert!(!write.holds_nothing(), "a write queued");
    write.execute(Commit::No).expect("update");
    assert!(!write.holds_nothing());
    write.rollback().expect("rollback");
}

#[test]
fn an_increment_adds_in_one_round_trip_and_refuses_what_does_not_fit() {
    let (node, cluster) = start_with_table(Default::default());
    insert_accounts(&cluster, 1..2);
    let table = cluster.table("accounts").expect("table");
    let key = [Value::from(1u32)];
    node.clear_received();
    let mut transaction = cluster.transaction();
    transaction
        .increment(&table, &key, &[("balance", 7)])
        .expect("an integer column");
    transaction.execute(Commit::Yes).expect("incremented");
    let received = node.received();
    assert_eq!(
        named(&received, "TcKeyReq").len(),
        1,
        "one operation, no read first"
    );
    let mut read = cluster.transaction();
    let op = read
        .read(&table, &key, LockMode::CommittedRead)
        .expect("key");
    read.execute(Commit::Yes).expect("read");
    assert_eq!(
        read.get(op).and_then(|row| row.get("balance").cloned()),
        Some(Value::Int(107))
    );

    let not_integer = cluster
        .transaction()
        .increment(&table, &key, &[("owner", 1)])
        .unwrap_err();
    assert_eq!(not_integer.code(), Some(ErrorCode::BadValue));
    let mut past_the_range = cluster.transaction();
    past_the_range
        .increment(&table, &key, &[("balance", i64::MAX)])
        .expect("queued");
    let error = past_the_range.execute(Commit::Yes).unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::ValueOutOfRange));
    let mut missing = cluster.transaction();
    missing
        .increment(&table, &[Value::from(9u32)], &[("balance", 1)])
        .expect("queued");
    assert_eq!(
        missing.execute(Commit::Yes).unwrap_err().code(),
        Some(ErrorCode::NoSuchRow)
    );
}

#[test]
fn a_refused_operation_names_code_class_and_op_and_aborts() {
    let (node, cluster) = start_with_table(Default::default());
    insert_accounts(&cluster, 0..2);
    let table = cluster.table("accounts").expect("table");
    let mut transaction = cluster.transaction();
    transaction
        .read(&table, &[Value::from(0u32)], LockMode::Shared)
        .expect("key");
    let missing = transaction
        .read(&table, &[Value::from(9u32)], LockMode::Shared)
        .expect("key");
    let error = transaction.execute(Commit::No).unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::NoSuchRow));
    assert_eq!(error.class(), Some(ErrorClass::Constraint));
    assert_eq!(error.failed_op(), Some(missing));
    assert!(!error.is_temporary());
    assert!(error.to_string().contains("operation 1"), "{error}");
    assert_eq!(transaction.state(), TransactionState::Aborted);
    let again = transaction.execute(Commit::Yes).unwrap_err();
    assert_eq!(again.code(), Some(ErrorCode::TransactionAborted));
    drop(transaction);
    assert!(
        named(&node.received(), "TcRollbackReq").is_empty(),
        "an aborted transaction needs no rollback"
    );
    assert_eq!(cluster.in_flight(), 0);
}

#[test]
fn batches_continue_a_transaction_and_an_empty_commit_sends_tccommitreq() {
    let (node, cluster) = start_with_table(Default::default());
    insert_accounts(&cluster, 0..3);
    node.clear_received();
    let table = cluster.table("accounts").expect("table");
    let mut transaction = cluster.transaction();
    transaction
        .update(&table, &[Value::from(1u32)], &[("balance", Value::from(5))])
        .expect("update");
    let outcome = transaction.execute(Commit::No).expect("first batch");
    assert!(!outcome.committed);
    let read = transaction
        .read(&table, &[Value::from(1u32)], LockMode::Exclusive)
        .expect("read");
    transaction.execute(Commit::No).expect("second batch");
    assert_eq!(
        transaction.get(read).and_then(|row| row.get("balance")),
        Some(&Value::Int(5)),
        "a locking read sees the transaction's own write"
    );
    let outcome = transaction.execute(Commit::Yes).expect("commit");
    assert!(outcome.committed && outcome.gci.is_some());
    let received = node.received();
    let flags: Vec<u8> = named(&received, "TcKeyReq")
        .iter()
        .map(|r| r.flags)
        .collect();
    assert_eq!(
        flags,
        [START | EXECUTE, EXECUTE],
        "only the first op starts"
    );
    assert_eq!(named(&received, "TcCommitReq").len(), 1);
    assert_eq!(node.open_transactions(), 0);
}

#[test]
fn rollback_waits_and_drop_rolls_back_without_waiting() {
    let (node, cluster) = start_with_table(Default::default());
    insert_accounts(&cluster, 0..1);
    let table = cluster.table("accounts").expect("table");
    let mut transaction = cluster.transaction();
    transaction
        .delete(&table, &[Value::from(0u32)])
        .expect("delete");
    transaction.execute(Commit::No).expect("delete executes");
    transaction.rollback().expect("rolled back");
    assert_eq!(transaction.state(), TransactionState::Aborted);
    assert_eq!(node.row_count("accounts"), 1);
    drop(transaction);

    let mut transaction = cluster.transaction();
    transaction
        .delete(&table, &[Value::from(0u32)])
        .expect("delete");
    transaction.execute(Commit::No).expect("delete executes");
    assert_eq!(node.open_transactions(), 1);
    drop(transaction);
    eventually("the dropped transaction's rollback", || {
        node.open_transactions() == 0
    });
    assert_eq!(named(&node.received(), "TcRollbackReq").len(), 2);
    assert_eq!(node.row_count("accounts"), 1);

    // Nothing sent yet: a rollback or a drop sends nothing.
    node.clear_received();
    let mut transaction = cluster.transaction();
    transaction
        .delete(&table, &[Value::from(0u32)])
        .expect("delete");
    transaction.rollback().expect("local rollback");
    drop(cluster.transaction());
    assert!(node.received().is_empty());
    assert_eq!(cluster.in_flight(), 0);
}

#[test]
fn a_stale_table_version_drops_the_cached_definition() {
    let (node, cluster) = start_with_table(Default::default());
    insert_accounts(&cluster, 0..1);
    let stale = cluster.table("accounts").expect("table");
    assert!(node.bump_table_version("accounts"));
    let mut transaction = cluster.transaction();
    transaction
        .read(&stale, &[Value::from(0u32)], LockMode::CommittedRead)
        .expect("key");
    let error = transaction.execute(Commit::Yes).unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::SchemaVersionMismatch));
    assert!(error.is_temporary());
    node.clear_received();
    let fresh = cluster.table("accounts").expect("refetched");
    assert_eq!(named(&node.received(), "GetTabInfoReq").len(), 1);
    assert_ne!(fresh.def().version, stale.def().version);
    let mut transaction = cluster.transaction();
    let read = transaction
        .read(&fresh, &[Value::from(0u32)], LockMode::CommittedRead)
        .expect("key");
    transaction.execute(Commit::Yes).expect("retry succeeds");
    assert!(transaction.get(read).is_some());
}

#[test]
fn transactions_spread_over_tc_instances_and_carry_the_api_node_id() {
    let (node, cluster) = start_with_table(FakeDataNodeOptions {
        tc_instances: 3,
        ..Default::default()
    });
    for id in 0..6 {
        insert_accounts(&cluster, id..id + 1);
    }
    let received = node.received();
    let requests = named(&received, "TcKeyReq");
    let instances: Vec<u16> = requests.iter().map(|r| r.to_instance).collect();
    let first = instances[0];
    for (index, instance) in instances.iter().enumerate() {
        assert_eq!(*instance, (first + index as u16) % 3, "{instances:?}");
    }
    for request in requests {
        let id = request.transaction_id.expect("transaction signal");
        assert_eq!(id.api_node().0, API_NODE);
    }
}

#[test]
fn many_threads_share_one_connection() {
    let (node, cluster) = start_with_table(Default::default());
    let cluster = Arc::new(cluster);
    let threads: Vec<_> = (0..8u32)
        .map(|thread| {
            let cluster = Arc::clone(&cluster);
            std::thread::spawn(move || {
                let table = cluster.table("accounts").expect("table");
                for round in 0..40u32 {
                    let id = thread * 1000 + round;
                    insert_accounts(&cluster, id..id + 1);
                    let mut transaction = cluster.transaction();
                    let read = transaction
                        .read(&table, &[Value::from(id)], LockMode::CommittedRead)
                        .expect("key");
                    transaction.execute(Commit::Yes).expect("read");
                    let row = transaction.get(read).expect("row");
                    assert_eq!(row.get("balance"), Some(&Value::Int(100 * id as i64)));
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("worker");
    }
    assert_eq!(node.row_count("accounts"), 320);
    assert_eq!(cluster.in_flight(), 0);
}

#[test]
fn bad_values_fail_before_anything_is_sent() {
    let (node, cluster) = start_with_table(Default::default());
    let table = cluster.table("accounts").expect("table");
    let mut transaction = cluster.transaction();
    let too_long = transaction
        .insert(
            &table,
            &[
                ("id", Value::from(1u32)),
                ("balance", Value::from(1)),
                ("owner", Value::from("far too long")),
            ],
        )
        .unwrap_err();
    assert_eq!(too_long.code(), Some(ErrorCode::ValueTooLong));
    let negative = transaction
        .read(&table, &[Value::from(-1)], LockMode::CommittedRead)
        .unwrap_err();
    assert_eq!(negative.code(), Some(ErrorCode::BadValue));
    assert_eq!(transaction.pending_operations(), 0);
    transaction.execute(Commit::Yes).expect("nothing to do");
    assert!(node.received().is_empty());
}

#[test]
fn a_lost_connection_fails_the_waiter_and_later_calls() {
    let (node, cluster) = start_with_table(Default::default());
    let table = cluster.table("accounts").expect("table");
    node.set_silent(true);
    std::thread::scope(|scope| {
        let waiter = scope.spawn(|| {
            let mut transaction = cluster.transaction();
            transaction
                .update(&table, &[Value::from(1u32)], &[("owner", Value::from("x"))])
                .expect("key");
            let error = transaction.execute(Commit::Yes).unwrap_err();
            (error, transaction.state())
        });
        eventually("the request to reach the node", || {
            !named(&node.received(), "TcKeyReq").is_empty()
        });
        node.disconnect_all();
        let (error, state) = waiter.join().expect("waiter");
        // The commit of a write was sent: it may have happened, so the
        // error says the outcome is unknown and does not invite a blind
        // retry.
        assert_eq!(
            error.code(),
            Some(ErrorCode::CommitOutcomeUnknown),
            "{error}"
        );
        assert_eq!(error.class(), Some(ErrorClass::OutcomeUnknown));
        assert!(
            error.is_outcome_unknown() && !error.is_temporary(),
            "{error}"
        );
        assert!(
            matches!(&error, ClientError::OutcomeUnknown { cause }
                if cause.code() == Some(ErrorCode::ConnectionLost)),
            "{error:?}"
        );
        assert_eq!(state, TransactionState::Unknown);
    });
    assert!(!cluster.is_connected());
    let mut transaction = cluster.transaction();
    transaction
        .read(&table, &[Value::from(1u32)], LockMode::CommittedRead)
        .expect("key");
    let error = transaction.execute(Commit::Yes).unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::ConnectionLost), "{error}");
    let error = cluster.drop_table("accounts").unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::ConnectionLost), "{error}");
}

#[test]
fn a_silent_node_times_out() {
    let node = FakeDataNode::start(Default::default()).expect("listens");
    let options = ConnectOptions {
        reply_timeout: Duration::from_millis(200),
        ..Default::default()
    };
    let cluster = Cluster::connect_direct_with(&node.addr().to_string(), API_NODE, options)
        .expect("registers");
    cluster.create_table(&accounts()).expect("create");
    let table = cluster.table("accounts").expect("table");
    node.set_silent(true);
    let mut transaction = cluster.transaction();
    transaction
        .read(&table, &[Value::from(1u32)], LockMode::CommittedRead)
        .expect("key");
    let error = transaction.execute(Commit::No).unwrap_err();
    assert!(matches!(error, ClientError::Timeout { .. }), "{error}");
    assert!(error.is_temporary());
    assert_eq!(transaction.state(), TransactionState::Unknown);
    // A commit of a read that times out changed nothing: a timeout.
    let mut reading = cluster.transaction();
    reading
        .read(&table, &[Value::from(1u32)], LockMode::CommittedRead)
        .expect("key");
    let error = reading.execute(Commit::Yes).unwrap_err();
    assert!(matches!(error, ClientError::Timeout { .. }), "{error:?}");
    drop(reading);
    // A commit of a write that times out may have happened: its outcome
    // is unknown.
    let mut committing = cluster.transaction();
    committing
        .update(&table, &[Value::from(1u32)], &[("owner", Value::from("x"))])
        .expect("key");
    let error = committing.execute(Commit::Yes).unwrap_err();
    assert!(
        matches!(&error, ClientError::OutcomeUnknown { cause }
            if matches!(**cause, ClientError::Timeout { .. })),
        "{error:?}"
    );
    assert!(!error.is_temporary() && error.is_outcome_unknown());
    assert_eq!(committing.state(), TransactionState::Unknown);
    drop(committing);
    let error = cluster.table("other").unwrap_err();
    assert!(matches!(error, ClientError::Timeout { .. }), "{error}");
    drop(transaction);
    assert_eq!(cluster.in_flight(), 0);
}

#[test]
fn connect_through_mgmd_allocates_an_api_node_id() {
    let node = FakeDataNode::start(Default::default()).expect("listens");
    let mgmd = node.start_mgmd().expect("mgmd starts");
    let addr = mgmd.local_addr().to_string();
    let first = Cluster::connect(&addr).expect("connects through mgmd");
    let second = Cluster::connect(&addr).expect("connects through mgmd");
    assert!(first.api_node() >= 128);
    assert_ne!(first.api_node(), second.api_node(), "ids are not shared");
    first.create_table(&accounts()).expect("create");
    let from_node: Vec<u16> = node.received().iter().map(|r| r.from_node).collect();
    assert!(from_node.contains(&first.api_node()));
    assert!(from_node.contains(&second.api_node()));

    let wrong = FakeDataNode::start(FakeDataNodeOptions {
        node_id: 3,
        ..Default::default()
    })
    .expect("listens");
    let mgmd = wrong.start_mgmd().expect("mgmd starts");
    let error = Cluster::connect(&mgmd.local_addr().to_string())
        .err()
        .expect("node id differs from the config");
    assert!(
        error.to_string().contains("node 3") || error.to_string().contains("expected node 2"),
        "{error}"
    );
}

/// A peer that answers registration correctly, then sends bytes that are
/// not a frame: the client closes the connection and reports why.
#[test]
fn garbage_from_the_peer_ends_the_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let peer = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().expect("accept");
        let mut assembler = signal::codec::FrameAssembler::new();
        let pool = signal::SectionPool::leak([16, 4, 1, 1, 1, 1]);
        let mut sequence = 0;
        let mut requests = 0;
        loop {
            if assembler.read_from(&mut stream).unwrap_or(0) == 0 {
                return requests;
            }
            while let Some((header, body)) =
                assembler.next_frame().expect("client frames are valid")
            {
                let mut decoder = signal::codec::SignalDecoder::new(
                    body,
                    header.signal_count,
                    header.sender,
                    signal::NodeId(2),
                );
                while let Some(envelope) = decoder.next(pool).expect("client signals decode") {
                    requests += 1;
                    if let signal::Signal::ApiRegReq(request) = envelope.signal {
                        assert_eq!(request.protocol_version, client::PROTOCOL_VERSION);
                        let mut out = Vec::new();
                        let start = signal::codec::begin_frame(&mut out);
                        let reply = signal::Envelope {
                            from: signal::BlockRef::new(
                                signal::NodeId(2),
                                BlockKind::Membership,
                                0,
                            ),
                            to: envelope.from,
                            signal: signal::signals::ApiRegConf {
                                started: true,
                                tc_instances: 1,
                                heartbeat_interval_ms: 250,
                                api_heartbeat_missed: 8,
                            }
                            .into(),
                        };
                        signal::codec::encode_signal(&mut out, &reply).expect("encodes");
                        signal::codec::finish_frame(
                            &mut out,
                            start,
                            signal::NodeId(2),
                            9,
                            sequence,
                            1,
                        );
                        sequence += 1;
                        stream.write_all(&out).expect("reply");
                    } else {
                        stream.write_all(&[0xAB; 64]).expect("garbage");
                    }
                }
            }
        }
    });
    let cluster = Cluster::connect_direct(&addr, API_NODE).expect("registers");
    let error = cluster.table("anything").unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::ConnectionLost), "{error}");
    assert!(error.to_string().contains("invalid frame"), "{error}");
    assert!(!cluster.is_connected());
    drop(cluster);
    let requests = peer.join().expect("peer");
    assert_eq!(requests, 2, "the registration and the one request");
}

/// A table of fixed-width columns (whole rows take the client's template
/// comparison rather than the entry walk).
fn counters() -> TableDef {
    let column = |name: &str, column_type| ColumnDef {
        name: name.into(),
        column_type,
        nullable: false,
    };
    TableDef {
        indexes: Vec::new(),
        revision: 0,
        id: 0,
        version: 0,
        name: "counters".into(),
        partitions: 0,
        primary_key: vec![0],
        columns: vec![
            column("id", ColumnType::Int { unsigned: true }),
            column("total", ColumnType::BigInt { unsigned: false }),
            column("count", ColumnType::Int { unsigned: true }),
        ],
        partition_key: Vec::new(),
    }
}

#[test]
fn transactions_of_one_thread_reuse_memory_and_never_see_each_others_rows() {
    let (_node, cluster) = start(Default::default());
    cluster.create_table(&counters()).expect("create table");
    let table = cluster.table("counters").expect("table");
    let mut transaction = cluster.transaction();
    for id in 0..20u32 {
        let row = [
            ("id", Value::from(id)),
            ("total", Value::from(-(id as i64) * 1000)),
            ("count", Value::from(id * 3)),
        ];
        transaction.insert(&table, &row).expect("row");
    }
    transaction.execute(Commit::Yes).expect("insert");
    let check = |row: Option<&client::Row>, id: u32| {
        let row = row.expect("row read");
        assert_eq!(row.get_u64("id"), Some(id as u64));
        assert_eq!(row.get("total"), Some(&Value::Int(-(id as i64) * 1000)));
        assert_eq!(row.get_u64("total"), (id == 0).then_some(0), "negative");
        assert_eq!(row.get_u64(2u16), Some(id as u64 * 3));
    };
    for round in 0..200u32 {
        let (hinted, other) = (round % 20, (round + 7) % 20);
        let mut transaction = cluster
            .transaction_with_hint(&table, &[Value::from(hinted)])
            .expect("hint");
        if round % 5 == 4 {
            // Dropped unused: its memory goes back for the next one.
            continue;
        }
        let first = transaction
            .read(&table, &[Value::from(hinted)], LockMode::CommittedRead)
            .expect("the hint's key");
        let second = transaction
            .read(&table, &[Value::from(other)], LockMode::CommittedRead)
            .expect("another key");
        if round % 2 == 0 {
            transaction.execute(Commit::No).expect("first batch");
            let third = transaction
                .read(&table, &[Value::from(hinted)], LockMode::CommittedRead)
                .expect("the hint's key again");
            transaction.execute(Commit::Yes).expect("second batch");
            check(transaction.get(third), hinted);
        } else {
            transaction.execute(Commit::Yes).expect("one batch");
        }
        check(transaction.get(first), hinted);
        check(transaction.get(second), other);
        // A refused read: no row of this thread's earlier transactions shows.
        let mut missing = cluster
            .transaction_with_hint(&table, &[Value::from(hinted)])
            .expect("hint");
        let op = missing
            .read(
                &table,
                &[Value::from(1000 + round)],
                LockMode::CommittedRead,
            )
            .expect("key");
        let error = missing.execute(Commit::Yes).unwrap_err();
        assert_eq!(error.code(), Some(ErrorCode::NoSuchRow));
        assert!(missing.get(op).is_none());
        assert!(missing.get(client::OpId::new(0)).is_none());
    }
    // The async API, hints of other keys than the reads'.
    let mut session = cluster.session::<u32>();
    let mut done = Vec::new();
    for round in 0..3 {
        for id in 0..20u32 {
            let mut transaction = cluster
                .transaction_with_hint(&table, &[Value::from((id + round) % 20)])
                .expect("hint");
            transaction
                .read(&table, &[Value::from(id)], LockMode::CommittedRead)
                .expect("key");
            session.execute(transaction, Commit::Yes, id);
        }
        while session.in_flight() > 0 {
            session.poll(Duration::from_secs(5), &mut done);
        }
        assert_eq!(done.len(), 20);
        for completion in done.drain(..) {
            completion.result.expect("read");
            check(
                completion.transaction.get(client::OpId::new(0)),
                completion.user,
            );
        }
    }
}
