//! Replication against real processes: clusters of 2 data nodes with 2
//! replicas, 4 data nodes with 2 replicas (two node groups) and 2 data
//! nodes with 1 replica (two node groups of one node).
//!
//! On each: key-operation semantics with keys whose primary replica is on
//! every data node; transactions of 2 to 8 rows (and one of 256) spanning
//! every node group and both primaries of a group, their atomicity and
//! rollback; a random concurrent workload from several API nodes (changes
//! chained per key through a counter row, committed reads, operations that
//! must fail, changes rolled back or failed on purpose, now and then a
//! deadlock) whose every committed effect is checked against the chains
//! afterwards; `mgm -e show` and `all report threads` for every node.
//! With 2 replicas also: lock conflicts where the lock is held on another
//! node than the waiter's tc (waiting, a lock wait timeout releasing every
//! lock, a deadlock across nodes); a client whose cached table (and map)
//! went stale when another client dropped and recreated it, refreshing and
//! carrying on; and, last, `mgm -e "check replicas"` finding no mismatch
//! over everything the parts left.
//!
//! The three tests take one lock so that at most one cluster runs at a
//! time on a small machine. Waiting is observed, never timed (see
//! conflicts.rs): "B waits" means B has not answered when A commits.
//! The workload prints its seed; TESSERA_TEST_SEED repeats its choices
//! (not the interleaving).

mod common;

use client::{
    ClientError, Cluster, ColumnType, Commit, ErrorClass, ErrorCode, LockMode, Row, Table,
    TableDef, TransactionState, Value,
};
use common::{
    code_of, column, create_table, data_node, key, keyed_definition, partition_of, read_row,
    threads_of_node, ClusterOptions, TestCluster, LDM_THREADS,
};
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Long enough that a waiter in the "waits, then proceeds" checks cannot
/// time out on a slow machine before its blocker commits; the timeout
/// checks take this long each.
const LOCK_WAIT_TIMEOUT_MS: u64 = 5000;

/// How long to give a blocked request to (wrongly) come back before the
/// blocker commits. Not an assertion about speed.
const OBSERVE: Duration = Duration::from_millis(500);

/// Upper bound for any answer.
const ANSWER: Duration = Duration::from_secs(60);

/// Upper bound for mgmd to report a GCI above 0 (status is pushed).
const GCI_WAIT: Duration = Duration::from_secs(60);

/// One cluster at a time: the machine may have 2 cores.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    // A failed test poisons the lock; the next one still runs.
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

fn start(name: &'static str, data_nodes: u16, replicas: u8) -> TestCluster {
    TestCluster::start(ClusterOptions {
        name,
        data_memory: "32M",
        lock_wait_timeout_ms: LOCK_WAIT_TIMEOUT_MS,
        data_nodes,
        replicas,
    })
}

#[test]
fn two_nodes_two_replicas() {
    let _serial = serial();
    let mut processes = start("repl-2n-2r", 2, 2);
    everything(&mut processes);
}

#[test]
fn four_nodes_two_replicas() {
    let _serial = serial();
    let mut processes = start("repl-4n-2r", 4, 2);
    everything(&mut processes);
}

#[test]
fn two_nodes_one_replica() {
    let _serial = serial();
    let mut processes = start("repl-2n-1r", 2, 1);
    let a = processes.connect();
    let b = processes.connect();
    let kv = create_table(&a, &kv_definition());
    assert_partitions_on_every_group(&processes, &kv);
    crud_with_every_primary(&processes, &a, &kv);
    multi_row_transactions(&processes, &a, &b, &kv);
    hinted_transactions_run_on_the_primarys_tc(&processes, &a, &kv);
    let live = workload(&processes);
    cluster_status(&processes);
    processes.assert_node_serving();
    assert!(live > 0, "the workload left rows");
}

/// Signals the tc threads of each data node have executed so far.
fn tc_signals_by_node(processes: &TestCluster) -> Vec<(u16, u64)> {
    let report = processes.report_threads();
    processes
        .node_ids()
        .into_iter()
        .map(|node| {
            let signals = threads_of_node(&report, node)
                .iter()
                .filter(|thread| thread["role"] == "tc")
                .map(|thread| thread["signals"].as_u64().expect("signals"))
                .sum();
            (node, signals)
        })
        .collect()
}

/// A transaction started with a key hint runs on a tc of the node holding
/// that key's primary: the per-node tc counters of `all report threads`
/// show it (issue 3, item 5).
fn hinted_transactions_run_on_the_primarys_tc(
    processes: &TestCluster,
    cluster: &Cluster,
    kv: &Arc<Table>,
) {
    const TRANSACTIONS: u64 = 2_000;
    let nodes = processes.node_ids();
    let target = *nodes.last().expect("data nodes");
    let keys: Vec<u32> = (1_000_000..)
        .filter(|&k| {
            cluster
                .primary_node(kv, &[Value::UInt(u64::from(k))])
                .expect("key encodes")
                == Some(signal::NodeId(target))
        })
        .take(TRANSACTIONS as usize)
        .collect();
    let before = tc_signals_by_node(processes);
    for &k in &keys {
        let key = [Value::UInt(u64::from(k))];
        let mut transaction = cluster
            .transaction_with_hint(kv, &key)
            .expect("hinted transaction");
        transaction
            .insert(
                kv,
                &[
                    ("k", Value::UInt(u64::from(k))),
                    ("v", Value::from("hinted")),
                ],
            )
            .expect("queued");
        transaction
            .execute(Commit::Yes)
            .expect("hinted insert commits");
    }
    let after = tc_signals_by_node(processes);
    let delta = |node: u16| {
        let at = |list: &[(u16, u64)]| {
            list.iter()
                .find(|(n, _)| *n == node)
                .map(|(_, s)| *s)
                .unwrap_or(0)
        };
        at(&after) - at(&before)
    };
    // Each committed insert is at least TCKEYREQ, LQHKEYCONF, COMMITCONF and
    // COMPLETECONF on its tc; the other nodes' tcs only see GCI switches.
    assert!(
        delta(target) >= 4 * TRANSACTIONS,
        "node {target}'s tc executed {} signals for {TRANSACTIONS} hinted transactions",
        delta(target)
    );
    for &node in &nodes {
        if node != target {
            assert!(
                delta(node) * 4 < delta(target),
                "node {node}'s tc executed {} signals while the hinted transactions ran on node {target} ({})",
                delta(node),
                delta(target)
            );
        }
    }
    let mut cleanup = cluster.transaction();
    for &k in &keys {
        cleanup
            .delete(kv, &[Value::UInt(u64::from(k))])
            .expect("queued");
    }
    cleanup.execute(Commit::Yes).expect("cleanup commits");
}

/// Every part, in sequence, on one cluster with 2 replicas; the replica
/// check runs last, over everything the parts left.
fn everything(processes: &mut TestCluster) {
    let a = processes.connect();
    let b = processes.connect();
    let kv = create_table(&a, &kv_definition());
    assert_partitions_on_every_group(processes, &kv);
    crud_with_every_primary(processes, &a, &kv);
    multi_row_transactions(processes, &a, &b, &kv);
    lock_conflicts_across_nodes(processes, &a, &b);
    let live = workload(processes);
    stale_table_is_refreshed(processes, &a, &b);
    cluster_status(processes);
    processes.assert_node_serving();
    check_replicas(processes, live);
}

// ---------------------------------------------------------------------
// Keys on every node

/// `kv`: k INT UNSIGNED key, v VARCHAR(32) NOT NULL, n BIGINT NULL.
fn kv_definition() -> TableDef {
    keyed_definition(
        "kv",
        vec![
            column("v", ColumnType::VarChar(32), false),
            column("n", ColumnType::BigInt { unsigned: false }, true),
        ],
    )
}

/// Where a key's partition lives: its node group and primary node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Slot {
    group: u32,
    primary: u16,
}

fn slot_of(processes: &TestCluster, table: &Table, k: u32) -> Slot {
    let partition = partition_of(table, &key(k));
    let replicas = processes.replicas_of_partition(partition);
    Slot {
        group: processes.group_of(replicas[0]),
        primary: replicas[0],
    }
}

/// Every slot of the cluster, ordered so that consecutive slots change
/// node group: the first primary of each group, then the second, ...
fn slot_order(processes: &TestCluster) -> Vec<Slot> {
    let groups = processes.groups();
    let mut slots = Vec::new();
    for position in 0..usize::from(processes.replicas()) {
        for (group, nodes) in groups.iter().enumerate() {
            slots.push(Slot {
                group: group as u32,
                primary: nodes[position],
            });
        }
    }
    slots
}

/// `count` keys from `from` upwards, taken round robin over every slot, so
/// any two consecutive keys are in different node groups (when there are
/// several) and the first `slots` keys cover every primary node.
fn spread_keys(processes: &TestCluster, table: &Table, from: u32, count: usize) -> Vec<u32> {
    let order = slot_order(processes);
    let mut pending: BTreeMap<Slot, Vec<u32>> = BTreeMap::new();
    let mut keys = Vec::new();
    let mut next = from;
    while keys.len() < count {
        let wanted = order[keys.len() % order.len()];
        if let Some(k) = pending.get_mut(&wanted).and_then(Vec::pop) {
            keys.push(k);
            continue;
        }
        let slot = slot_of(processes, table, next);
        if slot == wanted {
            keys.push(next);
        } else {
            pending.entry(slot).or_default().insert(0, next);
        }
        next += 1;
        assert!(
            next < from + 100_000,
            "no key of {wanted:?} among 100000 keys from {from}: is every node primary of a partition?"
        );
    }
    keys
}

/// The default partition count puts partitions (and primaries) on every
/// node group and every node.
fn assert_partitions_on_every_group(processes: &TestCluster, table: &Table) {
    let partitions = table.def().partitions;
    let groups = processes.groups().len() as u32;
    assert_eq!(
        partitions,
        groups * LDM_THREADS,
        "default partitions = node groups x ldm threads: {:?}",
        table.def()
    );
    let primaries: BTreeSet<u16> = (0..partitions)
        .map(|partition| processes.replicas_of_partition(partition)[0])
        .collect();
    assert_eq!(
        primaries,
        processes.node_ids().into_iter().collect(),
        "every data node is primary of some partition"
    );
}

// ---------------------------------------------------------------------
// CRUD

fn kv_row(cluster: &Cluster, kv: &Arc<Table>, k: u32) -> Result<(Value, Value), ClientError> {
    let row = read_row(cluster, kv, &key(k))?;
    Ok((
        row.get("v").cloned().expect("v"),
        row.get("n").cloned().expect("n"),
    ))
}

fn kv_values(v: &str, n: Option<i64>) -> (Value, Value) {
    (Value::from(v), n.map_or(Value::Null, Value::Int))
}

/// Every key operation and its refusals, on a key whose primary replica is
/// on each data node in turn (the transactions' tcs rotate over the nodes,
/// so most operations cross nodes).
fn crud_with_every_primary(processes: &TestCluster, cluster: &Cluster, kv: &Arc<Table>) {
    let slots = slot_order(processes);
    let keys = spread_keys(processes, kv, 1, slots.len());
    for (&k, slot) in keys.iter().zip(&slots) {
        let at = format!("key {k} ({slot:?})");
        let kk = key(k);

        // Insert, then read it back in every lock mode.
        let mut transaction = cluster.transaction();
        transaction
            .insert(
                kv,
                &[
                    ("k", Value::UInt(k.into())),
                    ("v", Value::from("one")),
                    ("n", Value::Int(1)),
                ],
            )
            .expect("valid insert");
        let outcome = transaction
            .execute(Commit::Yes)
            .unwrap_or_else(|error| panic!("{at}: insert: {error}"));
        assert!(outcome.committed, "{at}: {outcome:?}");
        assert!(
            outcome.gci.is_some_and(|gci| gci.0 > 0),
            "{at}: a write commits in a GCI: {outcome:?}"
        );
        for lock in [
            LockMode::CommittedRead,
            LockMode::Shared,
            LockMode::Exclusive,
        ] {
            let mut transaction = cluster.transaction();
            let op = transaction.read(kv, &kk, lock).expect("valid read");
            transaction
                .execute(Commit::Yes)
                .unwrap_or_else(|error| panic!("{at}: {lock:?} read: {error}"));
            let row = transaction.get(op).expect("a read row");
            assert_eq!(row.get("v"), Some(&Value::from("one")), "{at}: {lock:?}");
            assert_eq!(row.get("n"), Some(&Value::Int(1)), "{at}: {lock:?}");
        }

        // A duplicate insert: a constraint error naming the operation.
        let mut transaction = cluster.transaction();
        let op = transaction
            .insert(kv, &[("k", Value::UInt(k.into())), ("v", Value::from("2"))])
            .expect("valid insert");
        let error = transaction.execute(Commit::Yes).expect_err("duplicate key");
        assert_eq!(error.code(), Some(ErrorCode::DuplicateKey), "{at}: {error}");
        assert_eq!(error.class(), Some(ErrorClass::Constraint), "{at}");
        assert!(!error.is_temporary(), "{at}");
        assert_eq!(error.failed_op(), Some(op), "{at}");
        assert_eq!(transaction.state(), TransactionState::Aborted, "{at}");
        assert_eq!(
            kv_row(cluster, kv, k).expect("read"),
            kv_values("one", Some(1)),
            "{at}"
        );

        // Update changes only the columns it names.
        let mut transaction = cluster.transaction();
        transaction
            .update(kv, &kk, &[("v", Value::from("uno"))])
            .expect("valid update");
        transaction
            .execute(Commit::Yes)
            .unwrap_or_else(|error| panic!("{at}: update: {error}"));
        assert_eq!(
            kv_row(cluster, kv, k).expect("read"),
            kv_values("uno", Some(1)),
            "{at}"
        );

        // Write of a present key overwrites the columns it names (all).
        let mut transaction = cluster.transaction();
        transaction
            .write(
                kv,
                &[
                    ("k", Value::UInt(k.into())),
                    ("v", Value::from("w")),
                    ("n", Value::Null),
                ],
            )
            .expect("valid write");
        transaction
            .execute(Commit::Yes)
            .unwrap_or_else(|error| panic!("{at}: write over a row: {error}"));
        assert_eq!(
            kv_row(cluster, kv, k).expect("read"),
            kv_values("w", None),
            "{at}"
        );

        // Delete; then every operation that needs the row says NoSuchRow.
        let mut transaction = cluster.transaction();
        transaction.delete(kv, &kk).expect("valid delete");
        transaction
            .execute(Commit::Yes)
            .unwrap_or_else(|error| panic!("{at}: delete: {error}"));
        assert_eq!(
            code_of(kv_row(cluster, kv, k)),
            ErrorCode::NoSuchRow,
            "{at}"
        );
        let mut transaction = cluster.transaction();
        transaction
            .update(kv, &kk, &[("v", Value::from("x"))])
            .expect("valid update");
        let error = transaction.execute(Commit::Yes).expect_err("no row");
        assert_eq!(error.code(), Some(ErrorCode::NoSuchRow), "{at}: {error}");
        assert_eq!(error.class(), Some(ErrorClass::Constraint), "{at}");
        let mut transaction = cluster.transaction();
        transaction.delete(kv, &kk).expect("valid delete");
        assert_eq!(
            code_of(transaction.execute(Commit::Yes)),
            ErrorCode::NoSuchRow,
            "{at}: delete of a missing row"
        );
        for lock in [
            LockMode::CommittedRead,
            LockMode::Shared,
            LockMode::Exclusive,
        ] {
            let mut transaction = cluster.transaction();
            transaction.read(kv, &kk, lock).expect("valid read");
            assert_eq!(
                code_of(transaction.execute(Commit::Yes)),
                ErrorCode::NoSuchRow,
                "{at}: {lock:?} read of a missing row"
            );
        }

        // Write of an absent key inserts.
        let mut transaction = cluster.transaction();
        transaction
            .write(
                kv,
                &[
                    ("k", Value::UInt(k.into())),
                    ("v", Value::from("again")),
                    ("n", Value::Int(-5)),
                ],
            )
            .expect("valid write");
        transaction
            .execute(Commit::Yes)
            .unwrap_or_else(|error| panic!("{at}: write of a missing row: {error}"));
        assert_eq!(
            kv_row(cluster, kv, k).expect("read"),
            kv_values("again", Some(-5)),
            "{at}"
        );

        // Delete and insert again in one transaction, reading its own write.
        let mut transaction = cluster.transaction();
        transaction.delete(kv, &kk).expect("valid delete");
        transaction
            .insert(
                kv,
                &[("k", Value::UInt(k.into())), ("v", Value::from("re"))],
            )
            .expect("valid insert");
        let op = transaction
            .read(kv, &kk, LockMode::Exclusive)
            .expect("valid read");
        transaction
            .execute(Commit::Yes)
            .unwrap_or_else(|error| panic!("{at}: delete + insert + read: {error}"));
        assert_eq!(
            transaction.get(op).and_then(|row| row.get("v")),
            Some(&Value::from("re")),
            "{at}: the transaction reads its own insert"
        );
        assert_eq!(
            kv_row(cluster, kv, k).expect("read"),
            kv_values("re", None),
            "{at}"
        );
    }
}

// ---------------------------------------------------------------------
// Multi-row transactions

fn kv_insert(transaction: &mut client::Transaction<'_>, kv: &Arc<Table>, k: u32, v: &str, n: i64) {
    transaction
        .insert(
            kv,
            &[
                ("k", Value::UInt(k.into())),
                ("v", Value::from(v)),
                ("n", Value::Int(n)),
            ],
        )
        .expect("valid insert");
}

fn kv_update(transaction: &mut client::Transaction<'_>, kv: &Arc<Table>, k: u32, v: &str) {
    transaction
        .update(kv, &key(k), &[("v", Value::from(v))])
        .expect("valid update");
}

/// Reads `keys` in one transaction (committed reads): `None` for a key
/// without a row. A missing row fails a whole batch, so absent keys are
/// found one by one after a failure.
fn kv_snapshot(cluster: &Cluster, kv: &Arc<Table>, keys: &[u32]) -> Vec<Option<(Value, Value)>> {
    let mut transaction = cluster.transaction();
    let ops: Vec<_> = keys
        .iter()
        .map(|&k| {
            transaction
                .read(kv, &key(k), LockMode::CommittedRead)
                .expect("valid read")
        })
        .collect();
    match transaction.execute(Commit::Yes) {
        Ok(_) => ops
            .iter()
            .map(|&op| {
                let row = transaction.get(op).expect("a read row");
                Some((
                    row.get("v").cloned().expect("v"),
                    row.get("n").cloned().expect("n"),
                ))
            })
            .collect(),
        Err(error) if error.code() == Some(ErrorCode::NoSuchRow) => keys
            .iter()
            .map(|&k| match kv_row(cluster, kv, k) {
                Ok(values) => Some(values),
                Err(error) if error.code() == Some(ErrorCode::NoSuchRow) => None,
                Err(error) => panic!("read of kv {k}: {error}"),
            })
            .collect(),
        Err(error) => panic!("read of kv {keys:?}: {error}"),
    }
}

/// Transactions of 2 to 8 rows whose keys alternate node groups and
/// primaries: all-or-nothing commit, failure and rollback; uncommitted
/// writes invisible to another API node, visible to their own transaction.
fn multi_row_transactions(processes: &TestCluster, a: &Cluster, b: &Cluster, kv: &Arc<Table>) {
    let groups = processes.groups().len();
    for rows in 2..=8usize {
        let keys = spread_keys(processes, kv, 100_000 * rows as u32, rows + 1);
        let (keys, extra) = (&keys[..rows], keys[rows]);
        let at = format!("{rows} rows {keys:?}");
        let spanned: BTreeSet<u32> = keys
            .iter()
            .map(|&k| slot_of(processes, kv, k).group)
            .collect();
        assert_eq!(spanned.len(), groups.min(rows), "{at}: node groups spanned");
        let original: Vec<_> = (0..rows)
            .map(|i| Some(kv_values(&format!("r{rows}-{i}"), Some(i as i64))))
            .collect();

        // All inserted in one transaction, read back in one by another API node.
        let mut transaction = a.transaction();
        for (i, &k) in keys.iter().enumerate() {
            kv_insert(&mut transaction, kv, k, &format!("r{rows}-{i}"), i as i64);
        }
        let outcome = transaction
            .execute(Commit::Yes)
            .unwrap_or_else(|error| panic!("{at}: insert: {error}"));
        assert!(
            outcome.committed && outcome.gci.is_some(),
            "{at}: {outcome:?}"
        );
        assert_eq!(kv_snapshot(b, kv, keys), original, "{at}: after insert");

        // Uncommitted updates: the transaction sees them, B does not;
        // rolled back, nothing changed.
        let mut transaction = a.transaction();
        for &k in keys {
            kv_update(&mut transaction, kv, k, "uncommitted");
        }
        let own: Vec<_> = keys
            .iter()
            .map(|&k| {
                transaction
                    .read(kv, &key(k), LockMode::Exclusive)
                    .expect("valid read")
            })
            .collect();
        transaction
            .execute(Commit::No)
            .unwrap_or_else(|error| panic!("{at}: update batch: {error}"));
        for op in own {
            assert_eq!(
                transaction.get(op).and_then(|row| row.get("v")),
                Some(&Value::from("uncommitted")),
                "{at}: own writes"
            );
        }
        assert_eq!(kv_snapshot(b, kv, keys), original, "{at}: no dirty reads");
        transaction
            .rollback()
            .unwrap_or_else(|error| panic!("{at}: rollback: {error}"));
        assert_eq!(transaction.state(), TransactionState::Aborted, "{at}");
        assert_eq!(kv_snapshot(b, kv, keys), original, "{at}: rolled back");

        // The last operation fails (a duplicate in another node group than
        // the one before it): nothing of the transaction stays.
        let mut transaction = a.transaction();
        for &k in &keys[..rows - 1] {
            kv_update(&mut transaction, kv, k, "lost");
        }
        kv_insert(&mut transaction, kv, extra, "lost", 0);
        let duplicate = transaction
            .insert(
                kv,
                &[
                    ("k", Value::UInt(keys[rows - 1].into())),
                    ("v", Value::from("dup")),
                ],
            )
            .expect("valid insert");
        let error = transaction.execute(Commit::Yes).expect_err("duplicate");
        assert_eq!(error.code(), Some(ErrorCode::DuplicateKey), "{at}: {error}");
        assert_eq!(error.failed_op(), Some(duplicate), "{at}");
        assert_eq!(kv_snapshot(b, kv, keys), original, "{at}: atomic abort");
        assert_eq!(
            kv_snapshot(b, kv, &[extra]),
            vec![None],
            "{at}: atomic abort"
        );

        // Two batches, then commit: every row changes.
        let mut transaction = a.transaction();
        for &k in &keys[..rows / 2] {
            kv_update(&mut transaction, kv, k, "two");
        }
        transaction
            .execute(Commit::No)
            .unwrap_or_else(|error| panic!("{at}: first batch: {error}"));
        for &k in &keys[rows / 2..] {
            transaction
                .write(
                    kv,
                    &[
                        ("k", Value::UInt(k.into())),
                        ("v", Value::from("two")),
                        ("n", Value::Null),
                    ],
                )
                .expect("valid write");
        }
        transaction
            .execute(Commit::Yes)
            .unwrap_or_else(|error| panic!("{at}: second batch: {error}"));
        let expected: Vec<_> = (0..rows)
            .map(|i| {
                Some(kv_values(
                    "two",
                    if i < rows / 2 { Some(i as i64) } else { None },
                ))
            })
            .collect();
        assert_eq!(kv_snapshot(b, kv, keys), expected, "{at}: two batches");

        // Mixed: delete the first row, insert a new one, update the rest.
        let mut transaction = a.transaction();
        transaction.delete(kv, &key(keys[0])).expect("valid delete");
        kv_insert(&mut transaction, kv, extra, "new", 77);
        for &k in &keys[1..] {
            kv_update(&mut transaction, kv, k, "mixed");
        }
        transaction
            .execute(Commit::Yes)
            .unwrap_or_else(|error| panic!("{at}: mixed: {error}"));
        let mut expected: Vec<_> = (0..rows)
            .map(|i| {
                (i > 0)
                    .then(|| kv_values("mixed", if i < rows / 2 { Some(i as i64) } else { None }))
            })
            .collect();
        expected.push(Some(kv_values("new", Some(77))));
        let mut all = keys.to_vec();
        all.push(extra);
        assert_eq!(kv_snapshot(b, kv, &all), expected, "{at}: mixed");

        // Every row deleted in one transaction (except for 8 rows, left
        // for the replica check).
        if rows < 8 {
            let mut transaction = a.transaction();
            for &k in &all[1..] {
                transaction.delete(kv, &key(k)).expect("valid delete");
            }
            transaction
                .execute(Commit::Yes)
                .unwrap_or_else(|error| panic!("{at}: delete all: {error}"));
            assert_eq!(
                kv_snapshot(b, kv, &all),
                vec![None; rows + 1],
                "{at}: deleted"
            );
        }
    }

    // One transaction of many rows on every node: inserted, read back,
    // updated and deleted, each in one batch.
    let keys: Vec<u32> = (900_000..900_256).collect();
    let mut transaction = a.transaction();
    for &k in &keys {
        kv_insert(&mut transaction, kv, k, "bulk", k.into());
    }
    transaction
        .execute(Commit::Yes)
        .unwrap_or_else(|error| panic!("bulk insert: {error}"));
    let expected: Vec<_> = keys
        .iter()
        .map(|&k| Some(kv_values("bulk", Some(k.into()))))
        .collect();
    assert_eq!(kv_snapshot(b, kv, &keys), expected, "bulk insert");
    let mut transaction = a.transaction();
    for &k in &keys {
        kv_update(&mut transaction, kv, k, "bulk2");
    }
    transaction
        .execute(Commit::Yes)
        .unwrap_or_else(|error| panic!("bulk update: {error}"));
    let expected: Vec<_> = keys
        .iter()
        .map(|&k| Some(kv_values("bulk2", Some(k.into()))))
        .collect();
    assert_eq!(kv_snapshot(b, kv, &keys), expected, "bulk update");
    let mut transaction = a.transaction();
    for &k in &keys {
        transaction.delete(kv, &key(k)).expect("valid delete");
    }
    transaction
        .execute(Commit::Yes)
        .unwrap_or_else(|error| panic!("bulk delete: {error}"));
    assert_eq!(
        kv_snapshot(b, kv, &keys),
        vec![None; keys.len()],
        "bulk delete"
    );
}

// ---------------------------------------------------------------------
// Lock conflicts across nodes

fn acct_definition() -> TableDef {
    keyed_definition(
        "acct",
        vec![column("v", ColumnType::BigInt { unsigned: false }, false)],
    )
}

fn set(transaction: &mut client::Transaction<'_>, table: &Arc<Table>, k: u32, v: i64) {
    transaction
        .update(table, &key(k), &[("v", Value::Int(v))])
        .expect("valid update");
}

fn acct_value(cluster: &Cluster, table: &Arc<Table>, k: u32) -> i64 {
    read_row(cluster, table, &key(k))
        .unwrap_or_else(|error| panic!("read acct {k}: {error}"))
        .get("v")
        .and_then(Value::as_i64)
        .expect("v")
}

/// Executes a locking read of `k` (no commit) and returns v.
fn locked_read(
    transaction: &mut client::Transaction<'_>,
    table: &Arc<Table>,
    k: u32,
    lock: LockMode,
) -> Result<i64, ClientError> {
    let op = transaction.read(table, &key(k), lock)?;
    transaction.execute(Commit::No)?;
    Ok(transaction
        .get(op)
        .and_then(|row| row.get("v"))
        .and_then(Value::as_i64)
        .expect("a read row has v"))
}

/// Runs `waiter` on another thread, checks that it has not answered
/// after `OBSERVE`, runs `release` and returns what the waiter got.
fn wait_behind<T: Send + std::fmt::Debug>(
    what: &str,
    waiter: impl FnOnce() -> T + Send,
    release: impl FnOnce(),
) -> T {
    std::thread::scope(|scope| {
        let (sender, receiver) = mpsc::channel();
        scope.spawn(move || {
            let _ = sender.send(waiter());
        });
        match receiver.recv_timeout(OBSERVE) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            other => panic!("{what}: answered while the row was locked: {other:?}"),
        }
        release();
        receiver
            .recv_timeout(ANSWER)
            .unwrap_or_else(|error| panic!("{what}: no answer after the release: {error}"))
    })
}

/// A holds a row (its primary on each node in turn, A's and B's tcs
/// rotating over the nodes, so the holder's lock, A's tc and B's tc are
/// on different nodes in most rounds): B's committed read does not wait
/// and sees the old value, B's exclusive read waits until A commits and
/// then sees A's value. A lock wait timeout aborts the waiter and releases
/// the locks it held on another node; a deadlock across nodes ends with
/// at least one side timed out.
fn lock_conflicts_across_nodes(processes: &TestCluster, a: &Cluster, b: &Cluster) {
    let table_a = create_table(a, &acct_definition());
    let table_b = b.table("acct").expect("acct");
    let slots = slot_order(processes);
    let keys = spread_keys(processes, &table_a, 1, slots.len());
    let mut transaction = a.transaction();
    for &k in &keys {
        transaction
            .insert(
                &table_a,
                &[("k", Value::UInt(k.into())), ("v", Value::Int(0))],
            )
            .expect("valid insert");
    }
    transaction.execute(Commit::Yes).expect("insert acct rows");

    // Each key twice: consecutive transactions start on different tcs.
    let mut value = 0;
    for round in 0..2 {
        for (&k, slot) in keys.iter().zip(&slots) {
            let at = format!("round {round}, key {k} ({slot:?})");
            let before = acct_value(a, &table_a, k);
            value += 1;
            let mut holder = a.transaction();
            set(&mut holder, &table_a, k, value);
            holder
                .execute(Commit::No)
                .unwrap_or_else(|error| panic!("{at}: A holds: {error}"));
            assert_eq!(
                acct_value(b, &table_b, k),
                before,
                "{at}: B's committed read neither waits nor sees A's update"
            );
            let seen = wait_behind(
                &format!("{at}: B's exclusive read"),
                || {
                    let mut transaction = b.transaction();
                    let seen = locked_read(&mut transaction, &table_b, k, LockMode::Exclusive);
                    let committed = transaction.execute(Commit::Yes).map(|_| ());
                    (
                        seen.map_err(|error| error.to_string()),
                        committed.map_err(|error| error.to_string()),
                    )
                },
                || {
                    holder
                        .execute(Commit::Yes)
                        .unwrap_or_else(|error| panic!("{at}: A commits: {error}"));
                },
            );
            assert_eq!(
                seen,
                (Ok(value), Ok(())),
                "{at}: B sees A's committed value"
            );
        }
    }

    // Lock wait timeout: A holds x; B takes y (another node's primary),
    // then waits for x until it times out, which releases y.
    for (x, y) in [(keys[0], keys[1]), (keys[1], keys[0])] {
        let at = format!("timeout: A holds {x}, B holds {y}");
        let (x_before, y_before) = (acct_value(a, &table_a, x), acct_value(a, &table_a, y));
        let mut holder = a.transaction();
        set(&mut holder, &table_a, x, 1000 + i64::from(x));
        holder
            .execute(Commit::No)
            .unwrap_or_else(|error| panic!("{at}: A holds x: {error}"));
        let mut waiter = b.transaction();
        set(&mut waiter, &table_b, y, -1);
        waiter
            .execute(Commit::No)
            .unwrap_or_else(|error| panic!("{at}: B holds y: {error}"));
        set(&mut waiter, &table_b, x, -1);
        let error = waiter
            .execute(Commit::Yes)
            .expect_err("B cannot get x while A holds it");
        assert_eq!(
            error.code(),
            Some(ErrorCode::LockWaitTimeout),
            "{at}: {error}"
        );
        assert!(error.is_temporary(), "{at}");
        assert_eq!(waiter.state(), TransactionState::Aborted, "{at}");
        // y is free again (else this read would time out) and unchanged.
        let mut check = a.transaction();
        assert_eq!(
            locked_read(&mut check, &table_a, y, LockMode::Exclusive)
                .unwrap_or_else(|error| panic!("{at}: y is not released: {error}")),
            y_before,
            "{at}: B's update of y is rolled back"
        );
        check.execute(Commit::Yes).expect("commit the read of y");
        holder
            .execute(Commit::Yes)
            .unwrap_or_else(|error| panic!("{at}: A commits x: {error}"));
        assert_eq!(acct_value(b, &table_b, x), 1000 + i64::from(x), "{at}");
        assert_ne!(x_before, 1000 + i64::from(x), "{at}: x changed");
    }

    // A deadlock across nodes: A holds x and wants y, B holds y and wants
    // x. At least one times out; if one commits, its update is the value.
    let (x, y) = (keys[0], keys[1]);
    let mut first = a.transaction();
    set(&mut first, &table_a, x, 2001);
    first.execute(Commit::No).expect("A holds x");
    let mut second = b.transaction();
    set(&mut second, &table_b, y, 2002);
    second.execute(Commit::No).expect("B holds y");
    let (result_a, result_b) = std::thread::scope(|scope| {
        let other = scope.spawn(move || {
            set(&mut second, &table_b, x, 2002);
            second.execute(Commit::Yes).map_err(|error| error.code())
        });
        set(&mut first, &table_a, y, 2001);
        let mine = first.execute(Commit::Yes).map_err(|error| error.code());
        (mine, other.join().expect("B's thread"))
    });
    let ok_or_timeout = |result: &Result<client::Outcome, Option<ErrorCode>>| {
        result.is_ok() || *result == Err(Some(ErrorCode::LockWaitTimeout))
    };
    assert!(
        (result_a.is_err() || result_b.is_err())
            && ok_or_timeout(&result_a)
            && ok_or_timeout(&result_b),
        "deadlock: A {result_a:?}, B {result_b:?}"
    );
    let (vx, vy) = (acct_value(a, &table_a, x), acct_value(a, &table_a, y));
    match (&result_a, &result_b) {
        (Ok(_), _) => assert_eq!((vx, vy), (2001, 2001), "A won"),
        (_, Ok(_)) => assert_eq!((vx, vy), (2002, 2002), "B won"),
        _ => assert!(
            vx != 2001 && vx != 2002 && vy != 2001 && vy != 2002,
            "both aborted"
        ),
    }
}

// ---------------------------------------------------------------------
// The random concurrent workload

const WORKLOAD_THREADS: u64 = 4;
const WORKLOAD_TRANSACTIONS: usize = 150;
const WORKLOAD_KEYS: u32 = 32;
const WORKLOAD_FIRST_KEY: u32 = 5000;

/// `wl`: the data rows. `ver` is the counter of the change that wrote the
/// row, `val` names the writer.
fn wl_definition() -> TableDef {
    keyed_definition(
        "wl",
        vec![
            column("ver", ColumnType::BigInt { unsigned: true }, false),
            column("val", ColumnType::VarChar(32), false),
        ],
    )
}

/// `wl_ctr`: one row per key of `wl`, always present: how many
/// transactions changed the key (`c`) and whether its `wl` row exists.
/// Every transaction that touches a `wl` row first locks its counter, so
/// the transactions of each key form one chain, numbered by `c`.
fn wl_ctr_definition() -> TableDef {
    keyed_definition(
        "wl_ctr",
        vec![
            column("c", ColumnType::BigInt { unsigned: true }, false),
            column("present", ColumnType::Int { unsigned: true }, false),
        ],
    )
}

/// A `wl` row: (ver, val); `None` when absent.
type WlState = Option<(u64, String)>;

/// One committed change of a key: the `c`-th of its chain.
#[derive(Clone, Debug)]
struct Touch {
    k: u32,
    c: u64,
    /// What the counter said before (row present?).
    pre_present: bool,
    op: &'static str,
    /// What a locked read of the row returned (reads only).
    observed: Option<WlState>,
    /// The row afterwards.
    post: WlState,
    who: String,
}

/// What one thread saw.
#[derive(Default)]
struct ThreadLog {
    touches: Vec<Touch>,
    /// Committed reads of present rows: (k, ver, val, who).
    reads: Vec<(u32, u64, String, String)>,
    /// Things that must not happen.
    anomalies: Vec<String>,
    retries: u64,
    /// Temporary errors retried, by error.
    retried: BTreeMap<String, u64>,
    probes: u64,
    /// Changes rolled back or failed on purpose.
    aborted: u64,
}

fn wl_state(row: &Row) -> (u64, String) {
    (
        row.get("ver").and_then(Value::as_u64).expect("ver"),
        row.get("val")
            .and_then(Value::as_str)
            .expect("val")
            .to_string(),
    )
}

fn ctr_state(row: &Row) -> (u64, bool) {
    (
        row.get("c").and_then(Value::as_u64).expect("c"),
        row.get("present").and_then(Value::as_u64).expect("present") != 0,
    )
}

fn workload_seed() -> u64 {
    match std::env::var("TESSERA_TEST_SEED") {
        Ok(text) => text.parse().expect("TESSERA_TEST_SEED is a u64"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |elapsed| elapsed.as_nanos() as u64),
    }
}

/// Several API nodes run random transactions over a small key space, each
/// key's transactions chained through its counter row; temporary errors
/// are retried. Afterwards every chain must be complete (no lost or
/// doubled change), each change must have seen its predecessor's row, a
/// committed read of every key must give the last change's row, and every
/// committed read during the run must have seen a committed change.
/// Returns the number of rows the workload tables hold.
fn workload(processes: &TestCluster) -> usize {
    let seed = workload_seed();
    eprintln!("workload seed {seed} (TESSERA_TEST_SEED={seed} repeats the choices)");
    let setup = processes.connect();
    let wl = create_table(&setup, &wl_definition());
    let ctr = create_table(&setup, &wl_ctr_definition());
    let keys: Vec<u32> = (WORKLOAD_FIRST_KEY..WORKLOAD_FIRST_KEY + WORKLOAD_KEYS).collect();
    let groups: BTreeSet<u32> = keys
        .iter()
        .map(|&k| slot_of(processes, &wl, k).group)
        .collect();
    assert_eq!(
        groups.len(),
        processes.groups().len(),
        "the keys span every group"
    );
    let mut transaction = setup.transaction();
    for &k in &keys {
        transaction
            .insert(
                &ctr,
                &[
                    ("k", Value::UInt(k.into())),
                    ("c", Value::UInt(0)),
                    ("present", Value::UInt(0)),
                ],
            )
            .expect("valid insert");
    }
    transaction
        .execute(Commit::Yes)
        .expect("insert the counters");

    let clients: Vec<Cluster> = (0..WORKLOAD_THREADS).map(|_| processes.connect()).collect();
    let logs: Vec<ThreadLog> = std::thread::scope(|scope| {
        let workers: Vec<_> = clients
            .iter()
            .enumerate()
            .map(|(thread, cluster)| {
                let keys = &keys;
                scope.spawn(move || {
                    workload_thread(cluster, keys, thread, seed ^ ((thread as u64) << 56))
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("workload thread"))
            .collect()
    });
    let retries: u64 = logs.iter().map(|log| log.retries).sum();
    let probes: u64 = logs.iter().map(|log| log.probes).sum();
    let aborted: u64 = logs.iter().map(|log| log.aborted).sum();
    let changes: usize = logs.iter().map(|log| log.touches.len()).sum();
    eprintln!(
        "workload: {changes} committed changes, {aborted} aborted on purpose, {} committed reads, \
         {probes} refused probes, {retries} retries {:?}",
        logs.iter().map(|log| log.reads.len()).sum::<usize>(),
        logs.iter().flat_map(|log| log.retried.iter()).fold(
            BTreeMap::<&str, u64>::new(),
            |mut all, (name, count)| {
                *all.entry(name.as_str()).or_default() += count;
                all
            }
        )
    );

    // Check every chain against the final rows.
    let mut problems: Vec<String> = logs
        .iter()
        .flat_map(|log| log.anomalies.iter().cloned())
        .collect();
    let mut chain: BTreeMap<(u32, u64), Touch> = BTreeMap::new();
    for touch in logs.iter().flat_map(|log| log.touches.iter()) {
        if let Some(other) = chain.insert((touch.k, touch.c), touch.clone()) {
            problems.push(format!(
                "key {} change {} committed twice, by {} and {}: {other:?} and {touch:?}",
                touch.k, touch.c, other.who, touch.who
            ));
        }
    }
    let mut live = keys.len();
    for &k in &keys {
        let (count, present) = ctr_state(
            &read_row(&setup, &ctr, &key(k)).unwrap_or_else(|error| panic!("ctr {k}: {error}")),
        );
        let mut state: WlState = None;
        for c in 1..=count {
            let Some(touch) = chain.get(&(k, c)) else {
                problems.push(format!(
                    "key {k}: change {c} of {count} is in the counter but no client saw it commit"
                ));
                continue;
            };
            if touch.pre_present != state.is_some() {
                problems.push(format!(
                    "key {k} change {c}: the counter said present={} but the chain has {state:?}: {touch:?}",
                    touch.pre_present
                ));
            }
            if let Some(observed) = &touch.observed {
                if *observed != state {
                    problems.push(format!(
                        "key {k} change {c}: a locked read saw {observed:?}, the chain has {state:?}: {touch:?}"
                    ));
                }
            }
            state = touch.post.clone();
        }
        if chain.range((k, count + 1)..(k + 1, 0)).next().is_some() {
            problems.push(format!(
                "key {k}: changes after {count} were acknowledged but are not in the counter: {:?}",
                chain.range((k, count + 1)..(k + 1, 0)).collect::<Vec<_>>()
            ));
        }
        if present != state.is_some() {
            problems.push(format!(
                "key {k}: the counter says present={present}, the chain ends with {state:?}"
            ));
        }
        let actual = match read_row(&setup, &wl, &key(k)) {
            Ok(row) => Some(wl_state(&row)),
            Err(error) if error.code() == Some(ErrorCode::NoSuchRow) => None,
            Err(error) => panic!("read wl {k}: {error}"),
        };
        if actual != state {
            problems.push(format!(
                "key {k}: the row is {actual:?}, the chain of {count} changes ends with {state:?}"
            ));
        }
        live += usize::from(actual.is_some());
    }
    for (k, ver, val, who) in logs.iter().flat_map(|log| log.reads.iter()) {
        let written = chain.get(&(*k, *ver)).and_then(|touch| touch.post.clone());
        if written.as_ref() != Some(&(*ver, val.clone())) {
            problems.push(format!(
                "{who}: a committed read of key {k} saw ({ver}, {val:?}), but change {ver} wrote {written:?}"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "workload (seed {seed}): {} problems:\n{}",
        problems.len(),
        problems
            .iter()
            .take(30)
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(changes > 0, "the workload changed something");
    live
}

fn workload_thread(cluster: &Cluster, keys: &[u32], thread: usize, seed: u64) -> ThreadLog {
    let wl = cluster.table("wl").expect("wl");
    let ctr = cluster.table("wl_ctr").expect("wl_ctr");
    let mut rng = stdx::mix::XorShift::new(seed);
    let mut log = ThreadLog::default();
    for number in 0..WORKLOAD_TRANSACTIONS {
        let kind = rng.below(10);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let who = format!("thread {thread} transaction {number} attempt {attempt}");
            let tag = format!("t{thread}-{number}-{attempt}");
            let result = match kind {
                0..=5 => change(cluster, &wl, &ctr, keys, &mut rng, (&who, &tag), &mut log),
                6 => probe(cluster, &wl, &ctr, keys, &mut rng, &who, &mut log),
                _ => committed_read(cluster, &wl, keys, &mut rng, &who, &mut log),
            };
            match result {
                Ok(()) => break,
                Err(error) if error.is_temporary() => {
                    log.retries += 1;
                    let name = error
                        .code()
                        .map_or_else(|| error.label(), |code| format!("{code:?}"));
                    *log.retried.entry(name).or_default() += 1;
                    assert!(attempt < 100, "{who}: still failing: {error}");
                }
                Err(error) => {
                    log.anomalies.push(format!("{who}: {error}"));
                    break;
                }
            }
        }
    }
    log
}

/// 1 to 4 distinct keys, ascending.
fn pick_keys(keys: &[u32], rng: &mut stdx::mix::XorShift) -> Vec<u32> {
    let count = 1 + rng.below(4) as usize;
    let mut picked = BTreeSet::new();
    while picked.len() < count {
        picked.insert(keys[rng.below(keys.len() as u64) as usize]);
    }
    picked.into_iter().collect()
}

/// Locks the counters of `picked` one batch each, in key order (so
/// transactions never deadlock on them), and returns (c, present) of each.
fn lock_counters(
    transaction: &mut client::Transaction<'_>,
    ctr: &Arc<Table>,
    picked: &[u32],
) -> Result<Vec<(u64, bool)>, ClientError> {
    let mut states = Vec::new();
    for &k in picked {
        let op = transaction.read(ctr, &key(k), LockMode::Exclusive)?;
        transaction.execute(Commit::No)?;
        states.push(ctr_state(transaction.get(op).expect("a read counter")));
    }
    Ok(states)
}

/// Locks the counters of `picked` in one batch; returns (c, present) of each.
fn lock_counters_in_one_batch(
    transaction: &mut client::Transaction<'_>,
    ctr: &Arc<Table>,
    picked: &[u32],
) -> Result<Vec<(u64, bool)>, ClientError> {
    let ops = picked
        .iter()
        .map(|&k| transaction.read(ctr, &key(k), LockMode::Exclusive))
        .collect::<Result<Vec<_>, _>>()?;
    transaction.execute(Commit::No)?;
    Ok(ops
        .into_iter()
        .map(|op| ctr_state(transaction.get(op).expect("a read counter")))
        .collect())
}

/// A transaction changing (or lock-reading) 1 to 4 keys.
fn change(
    cluster: &Cluster,
    wl: &Arc<Table>,
    ctr: &Arc<Table>,
    keys: &[u32],
    rng: &mut stdx::mix::XorShift,
    (who, val): (&str, &str),
    log: &mut ThreadLog,
) -> Result<(), ClientError> {
    let picked = pick_keys(keys, rng);
    let mut transaction = cluster.transaction();
    // Now and then every counter in one batch: the locks are then taken in
    // no particular order, so transactions may deadlock and time out.
    let counters = if rng.below(25) == 0 {
        lock_counters_in_one_batch(&mut transaction, ctr, &picked)?
    } else {
        lock_counters(&mut transaction, ctr, &picked)?
    };
    let mut touches = Vec::new();
    let mut reads = Vec::new();
    for (&k, &(c, present)) in picked.iter().zip(&counters) {
        let ver = c + 1;
        let row = (ver, val.to_string());
        let kk = key(k);
        let full = [
            ("k", Value::UInt(k.into())),
            ("ver", Value::UInt(ver)),
            ("val", Value::from(val)),
        ];
        let (op, post) = match (present, rng.below(5)) {
            (true, 0) => {
                transaction.update(
                    wl,
                    &kk,
                    &[("ver", Value::UInt(ver)), ("val", Value::from(val))],
                )?;
                ("update", Some(row))
            }
            (true, 1) => {
                transaction.write(wl, &full)?;
                ("write over", Some(row))
            }
            (true, 2) => {
                transaction.delete(wl, &kk)?;
                ("delete", None)
            }
            (true, lock) => {
                let lock = if lock == 3 {
                    LockMode::Shared
                } else {
                    LockMode::Exclusive
                };
                reads.push((touches.len(), transaction.read(wl, &kk, lock)?));
                ("locked read", None)
            }
            (false, choice) if choice % 2 == 0 => {
                transaction.insert(wl, &full)?;
                ("insert", Some(row))
            }
            (false, _) => {
                transaction.write(wl, &full)?;
                ("write new", Some(row))
            }
        };
        touches.push(Touch {
            k,
            c: ver,
            pre_present: present,
            op,
            observed: None,
            post,
            who: who.to_string(),
        });
    }
    // Sometimes the data in one batch and the counters in the next.
    if rng.below(2) == 0 {
        transaction.execute(Commit::No)?;
    }
    for touch in &touches {
        let present = if touch.op == "locked read" {
            touch.pre_present
        } else {
            touch.post.is_some()
        };
        transaction.update(
            ctr,
            &key(touch.k),
            &[
                ("c", Value::UInt(touch.c)),
                ("present", Value::UInt(present.into())),
            ],
        )?;
    }
    match rng.below(10) {
        // Rolled back after the batch: the chain must not move.
        0 => {
            transaction.execute(Commit::No)?;
            transaction.rollback()?;
            log.aborted += 1;
            return Ok(());
        }
        // A last operation that must fail aborts everything prepared,
        // on every replica.
        1 => {
            let last = touches.last().expect("at least one key");
            let present = if last.op == "locked read" {
                last.pre_present
            } else {
                last.post.is_some()
            };
            let expected = if present {
                transaction.insert(
                    wl,
                    &[
                        ("k", Value::UInt(last.k.into())),
                        ("ver", Value::UInt(0)),
                        ("val", Value::from("doomed")),
                    ],
                )?;
                ErrorCode::DuplicateKey
            } else {
                transaction.update(wl, &key(last.k), &[("val", Value::from("doomed"))])?;
                ErrorCode::NoSuchRow
            };
            return match transaction.execute(Commit::Yes) {
                Err(error) if error.code() == Some(expected) => {
                    log.aborted += 1;
                    Ok(())
                }
                Err(error) if error.is_temporary() => Err(error),
                other => {
                    log.anomalies.push(format!(
                        "{who}: {touches:?} then a failing operation on key {} should fail with {expected}, got {other:?}",
                        last.k
                    ));
                    Ok(())
                }
            };
        }
        _ => {}
    }
    transaction.execute(Commit::Yes)?;
    for (index, op) in reads {
        let state = wl_state(transaction.get(op).expect("a read row"));
        touches[index].observed = Some(Some(state.clone()));
        touches[index].post = Some(state);
    }
    log.touches.extend(touches);
    Ok(())
}

/// An operation the counter says must fail: insert of a present row
/// (DuplicateKey), update, delete or read of an absent one (NoSuchRow).
fn probe(
    cluster: &Cluster,
    wl: &Arc<Table>,
    ctr: &Arc<Table>,
    keys: &[u32],
    rng: &mut stdx::mix::XorShift,
    who: &str,
    log: &mut ThreadLog,
) -> Result<(), ClientError> {
    let k = keys[rng.below(keys.len() as u64) as usize];
    let mut transaction = cluster.transaction();
    let (c, present) = lock_counters(&mut transaction, ctr, &[k])?[0];
    let kk = key(k);
    let (what, expected) = if present {
        transaction.insert(
            wl,
            &[
                ("k", Value::UInt(k.into())),
                ("ver", Value::UInt(0)),
                ("val", Value::from("probe")),
            ],
        )?;
        ("insert", ErrorCode::DuplicateKey)
    } else {
        match rng.below(3) {
            0 => {
                transaction.update(wl, &kk, &[("val", Value::from("probe"))])?;
                ("update", ErrorCode::NoSuchRow)
            }
            1 => {
                transaction.delete(wl, &kk)?;
                ("delete", ErrorCode::NoSuchRow)
            }
            _ => {
                transaction.read(wl, &kk, LockMode::Shared)?;
                ("read", ErrorCode::NoSuchRow)
            }
        }
    };
    match transaction.execute(Commit::Yes) {
        Err(error) if error.code() == Some(expected) => {
            log.probes += 1;
            Ok(())
        }
        Err(error) if error.is_temporary() => Err(error),
        other => {
            log.anomalies.push(format!(
                "{who}: {what} of key {k} (counter {c}, present={present}) should fail with {expected}, got {other:?}"
            ));
            Ok(())
        }
    }
}

/// A committed read of one key (a missing row fails a whole batch).
fn committed_read(
    cluster: &Cluster,
    wl: &Arc<Table>,
    keys: &[u32],
    rng: &mut stdx::mix::XorShift,
    who: &str,
    log: &mut ThreadLog,
) -> Result<(), ClientError> {
    let k = keys[rng.below(keys.len() as u64) as usize];
    match read_row(cluster, wl, &key(k)) {
        Ok(row) => {
            let (ver, val) = wl_state(&row);
            log.reads.push((k, ver, val, who.to_string()));
            Ok(())
        }
        Err(error) if error.code() == Some(ErrorCode::NoSuchRow) => Ok(()),
        Err(error) => Err(error),
    }
}

// ---------------------------------------------------------------------
// A stale table

fn stale_v1() -> TableDef {
    keyed_definition("stale", vec![column("v", ColumnType::VarChar(16), false)])
}

fn stale_v2() -> TableDef {
    let mut def = keyed_definition(
        "stale",
        vec![
            column("w", ColumnType::BigInt { unsigned: false }, true),
            column("v2", ColumnType::VarChar(8), false),
        ],
    );
    // Another partition count: another map.
    def.partitions = 8;
    def
}

fn is_stale(error: &ClientError) -> bool {
    matches!(
        error.code(),
        Some(ErrorCode::SchemaVersionMismatch | ErrorCode::UnknownTable)
    )
}

/// Runs `attempt` with `cluster`'s table `name`; on a stale-table error,
/// fetches the table again and runs it once more, which must succeed.
/// Whichever attempt succeeds must have used the `current` definition.
/// Returns the result and whether a refresh was needed.
fn with_refresh<T>(
    cluster: &Cluster,
    name: &str,
    current: &TableDef,
    what: &str,
    mut attempt: impl FnMut(&Arc<Table>) -> Result<T, ClientError>,
) -> (T, bool) {
    let is_current =
        |table: &Table| table.def().id == current.id && table.def().version == current.version;
    let table = cluster
        .table(name)
        .unwrap_or_else(|error| panic!("{what}: table {name}: {error}"));
    match attempt(&table) {
        Ok(value) => {
            assert!(
                is_current(&table),
                "{what}: a transaction with the stale definition {:?} succeeded (current {current:?})",
                table.def()
            );
            (value, false)
        }
        Err(error) if is_stale(&error) => {
            if error.code() == Some(ErrorCode::SchemaVersionMismatch) {
                assert!(error.is_temporary(), "{what}: a refresh-and-retry error");
            }
            let fresh = cluster
                .table(name)
                .unwrap_or_else(|error| panic!("{what}: table {name} again: {error}"));
            assert!(
                fresh.def().id != table.def().id || fresh.def().version != table.def().version,
                "{what}: the refreshed definition is the stale one: {:?}",
                fresh.def()
            );
            assert!(
                is_current(&fresh),
                "{what}: refreshed to {:?}, current {current:?}",
                fresh.def()
            );
            let value = attempt(&fresh)
                .unwrap_or_else(|error| panic!("{what}: after refreshing {name}: {error}"));
            (value, true)
        }
        Err(error) => panic!("{what}: {error}"),
    }
}

/// Client A caches `stale` (definition and map); client B drops and
/// recreates it, first with the same columns, then with other columns
/// and another partition count. A's transactions with the old table are
/// refused as stale (and change nothing, not even their other operations
/// on another table); A fetches the table again and carries on.
fn stale_table_is_refreshed(processes: &TestCluster, a: &Cluster, b: &Cluster) {
    let side = create_table(
        b,
        &keyed_definition(
            "side",
            vec![column("v", ColumnType::Int { unsigned: false }, false)],
        ),
    );
    let side_a = a.table("side").expect("side");
    create_table(b, &stale_v1());
    let old = a.table("stale").expect("stale");
    let keys = spread_keys(processes, &old, 1, 4);
    let mut transaction = a.transaction();
    for &k in &keys {
        transaction
            .insert(
                &old,
                &[("k", Value::UInt(k.into())), ("v", Value::from("before"))],
            )
            .expect("valid insert");
    }
    transaction
        .execute(Commit::Yes)
        .expect("A inserts into stale");

    // Same name, same columns: the id is reused with a new version.
    b.drop_table("stale").expect("B drops stale");
    let new = create_table(b, &stale_v1());
    assert!(
        new.def().id != old.def().id || new.def().version != old.def().version,
        "{:?} vs {:?}",
        new.def(),
        old.def()
    );
    let mut transaction = b.transaction();
    transaction
        .insert(
            &new,
            &[
                ("k", Value::UInt(keys[0].into())),
                ("v", Value::from("from B")),
            ],
        )
        .expect("valid insert");
    transaction
        .execute(Commit::Yes)
        .expect("B inserts into the new stale");

    // A's transaction with the old definition: an operation on another
    // table first, then one on the stale table. All of it is refused.
    let side_key = spread_keys(processes, &side_a, 1, 2)[1];
    let mut transaction = a.transaction();
    transaction
        .insert(
            &side_a,
            &[("k", Value::UInt(side_key.into())), ("v", Value::Int(1))],
        )
        .expect("valid insert");
    transaction
        .update(&old, &key(keys[0]), &[("v", Value::from("stale"))])
        .expect("valid update");
    let error = transaction
        .execute(Commit::Yes)
        .expect_err("a stale definition");
    assert!(is_stale(&error), "{error}");
    eprintln!("stale table, same columns: {error}");
    assert_eq!(
        code_of(read_row(a, &side_a, &key(side_key))),
        ErrorCode::NoSuchRow,
        "the refused transaction's other operation is rolled back"
    );
    let error = read_row(a, &old, &key(keys[1])).expect_err("a stale definition");
    assert!(is_stale(&error), "{error}");

    // A refreshes and carries on: the same transaction again.
    let (rows, refreshed) = with_refresh(a, "stale", new.def(), "A after recreate", |table| {
        let mut transaction = a.transaction();
        transaction.insert(
            &side_a,
            &[("k", Value::UInt(side_key.into())), ("v", Value::Int(1))],
        )?;
        transaction.update(table, &key(keys[0]), &[("v", Value::from("A again"))])?;
        let reads: Vec<_> = keys[..1]
            .iter()
            .map(|&k| transaction.read(table, &key(k), LockMode::Exclusive))
            .collect::<Result<_, _>>()?;
        transaction.execute(Commit::Yes)?;
        Ok(reads
            .into_iter()
            .map(|op| transaction.get(op).and_then(|row| row.get("v")).cloned())
            .collect::<Vec<_>>())
    });
    assert_eq!(rows, vec![Some(Value::from("A again"))]);
    eprintln!("stale table: A's next use after recreating refreshed: {refreshed}");
    let current = a.table("stale").expect("stale");
    for &k in &keys[1..] {
        assert_eq!(
            code_of(read_row(a, &current, &key(k))),
            ErrorCode::NoSuchRow,
            "the recreated table starts empty (key {k})"
        );
    }
    assert_eq!(
        read_row(b, &new, &key(keys[0])).expect("B reads").get("v"),
        Some(&Value::from("A again"))
    );

    // Other columns and another partition count, while A holds `current`.
    b.drop_table("stale").expect("B drops stale again");
    let newer = create_table(b, &stale_v2());
    assert_eq!(newer.def().partitions, 8, "{:?}", newer.def());
    let error = read_row(a, &current, &key(keys[0])).expect_err("a stale definition");
    assert!(is_stale(&error), "{error}");
    eprintln!("stale table, other columns: {error}");
    let mut transaction = a.transaction();
    transaction
        .insert(
            &current,
            &[
                ("k", Value::UInt(keys[1].into())),
                ("v", Value::from("old cols")),
            ],
        )
        .expect("valid insert by the old definition");
    let error = transaction
        .execute(Commit::Yes)
        .expect_err("a stale definition");
    assert!(is_stale(&error), "{error}");
    let newer_keys = spread_keys(processes, &newer, 1, 6);
    let (_, refreshed) = with_refresh(
        a,
        "stale",
        newer.def(),
        "A after the column change",
        |table| {
            let mut transaction = a.transaction();
            for &k in &newer_keys {
                transaction.insert(
                    table,
                    &[
                        ("k", Value::UInt(k.into())),
                        ("w", Value::Int(k.into())),
                        ("v2", Value::from("new cols")),
                    ],
                )?;
            }
            transaction.execute(Commit::Yes).map(|_| ())
        },
    );
    eprintln!("stale table: A's next use after the column change refreshed: {refreshed}");
    let fresh = a.table("stale").expect("stale");
    assert!(fresh.def().column("w").is_some(), "{:?}", fresh.def());
    assert_eq!(fresh.def().partitions, 8, "{:?}", fresh.def());
    for &k in &newer_keys {
        let row =
            read_row(b, &newer, &key(k)).unwrap_or_else(|error| panic!("B reads {k}: {error}"));
        assert_eq!(row.get("w"), Some(&Value::Int(k.into())));
        assert_eq!(row.get("v2"), Some(&Value::from("new cols")));
    }

    // The plain application loop: A has the table cached (and used it),
    // B recreates it (the same columns: A's code still fits), A's next
    // transaction takes the table from its cache, is refused as stale,
    // refreshes and carries on.
    let cached = a.table("stale").expect("stale");
    read_row(a, &cached, &key(newer_keys[0])).expect("A reads through its cache");
    b.drop_table("stale").expect("B drops stale a third time");
    let newest = create_table(b, &stale_v2());
    let mut transaction = b.transaction();
    transaction
        .insert(
            &newest,
            &[
                ("k", Value::UInt(newer_keys[0].into())),
                ("v2", Value::from("third")),
            ],
        )
        .expect("valid insert");
    transaction
        .execute(Commit::Yes)
        .expect("B inserts into the third stale");
    let (seen, refreshed) =
        with_refresh(a, "stale", newest.def(), "A's next transaction", |table| {
            let mut transaction = a.transaction();
            let op = transaction.read(table, &key(newer_keys[0]), LockMode::Shared)?;
            transaction.insert(
                table,
                &[
                    ("k", Value::UInt(newer_keys[1].into())),
                    ("v2", Value::from("A third")),
                ],
            )?;
            transaction.execute(Commit::Yes)?;
            Ok(transaction.get(op).and_then(|row| row.get("v2")).cloned())
        });
    eprintln!("stale table: A's next transaction through its cache refreshed: {refreshed}");
    assert_eq!(seen, Some(Value::from("third")));
    assert_eq!(
        read_row(b, &newest, &key(newer_keys[1]))
            .expect("B reads A's row")
            .get("v2"),
        Some(&Value::from("A third"))
    );
    drop(side);
}

// ---------------------------------------------------------------------
// Status and the replica checker

fn parse_json(text: &str, what: &str) -> Json {
    serde_json::from_str(text.trim()).unwrap_or_else(|error| panic!("{what}: {error}: {text:?}"))
}

/// `mgm -e show --json`: every data node started, with its pid and node
/// group, a GCI above 0; `all report threads --json`: each node's threads,
/// its ldm threads owning its group's partitions and all of them busy.
fn cluster_status(processes: &TestCluster) {
    let deadline = Instant::now() + GCI_WAIT;
    let show = loop {
        let finished = processes.mgm_json("show");
        assert!(finished.status.success(), "{finished:?}");
        let show = parse_json(&finished.stdout, "show --json");
        if show["latest_gci"].as_u64() > Some(0) || Instant::now() > deadline {
            break show;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        show["latest_gci"].as_u64() > Some(0),
        "a GCI above 0: {show}"
    );
    let data_nodes = show["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter(|node| node["type"] == "data")
        .count();
    assert_eq!(data_nodes, processes.node_ids().len(), "{show}");
    for id in processes.node_ids() {
        let node = data_node(&show, id.into()).unwrap_or_else(|| panic!("no node {id}: {show}"));
        assert_eq!(node["state"], "started", "node {id}: {show}");
        assert_eq!(node["pid"], processes.node_pid_of(id), "node {id}: {show}");
        assert_eq!(node["group"], processes.group_of(id), "node {id}: {show}");
        assert_eq!(node["start_count"], 1, "node {id}: {show}");
    }

    let finished = processes.mgm_json("all report threads");
    assert!(finished.status.success(), "{finished:?}");
    let report = parse_json(&finished.stdout, "all report threads --json");
    assert_eq!(
        report["nodes"].as_array().map(Vec::len),
        Some(processes.node_ids().len()),
        "{report}"
    );
    let groups = processes.groups().len() as u32;
    for id in processes.node_ids() {
        let threads = threads_of_node(&report, id);
        let roles: BTreeSet<&str> = threads
            .iter()
            .map(|thread| thread["role"].as_str().expect("role"))
            .collect();
        assert_eq!(
            roles,
            BTreeSet::from(["ldm", "tc", "main", "recv", "send", "io"]),
            "node {id}: {report}"
        );
        let mut owned = Vec::new();
        for thread in &threads {
            match thread["role"].as_str() {
                Some("ldm") => {
                    owned.extend(
                        thread["partitions"]
                            .as_array()
                            .unwrap_or_else(|| {
                                panic!("node {id}: ldm without partitions: {thread}")
                            })
                            .iter()
                            .map(|p| p.as_u64().expect("partition") as u32),
                    );
                    assert!(
                        thread["signals"].as_u64() > Some(0),
                        "node {id}: every ldm served: {thread}"
                    );
                }
                Some("tc") => assert!(
                    thread["signals"].as_u64() > Some(0),
                    "node {id}: the tc served: {thread}"
                ),
                _ => {}
            }
        }
        owned.sort_unstable();
        let group = processes.group_of(id);
        let expected: Vec<u32> = (0..groups * LDM_THREADS)
            .filter(|p| p % groups == group)
            .collect();
        assert_eq!(
            owned, expected,
            "node {id} holds its group's partitions: {report}"
        );
    }
}

/// `mgm -e "check replicas" --json` finds every replica of every partition
/// alike. `live_rows` is a lower bound of the rows compared; the tables
/// left are kv, acct, wl, wl_ctr and side with the default partition
/// count and stale with 8.
fn check_replicas(processes: &TestCluster, live_rows: usize) {
    let partitions = 5 * processes.groups().len() as u64 * u64::from(LDM_THREADS) + 8;
    let finished = processes.mgm_json("check replicas");
    assert!(
        finished.status.success(),
        "PENDING if mgm has no `check replicas` yet: {finished:?}"
    );
    let report = parse_json(&finished.stdout, "check replicas --json");
    eprintln!(
        "check replicas: {} partitions, {} rows, {} mismatches",
        report["partitions_checked"], report["rows_checked"], report["mismatches"]
    );
    assert_eq!(report["mismatches"], 0, "{report}");
    assert!(report["details"].is_array(), "{report}");
    assert!(
        report["partitions_checked"].as_u64() >= Some(partitions),
        "at least {partitions} partitions: {report}"
    );
    assert!(
        report["rows_checked"].as_u64() >= Some(live_rows as u64),
        "at least the workload's {live_rows} rows: {report}"
    );
}
