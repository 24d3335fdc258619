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
//!
//! The parts live in `replication/`, one module each.

mod common;

// Files directly in tests/ are test crates of their own, so the parts sit
// in a folder of this test.
#[path = "replication/crud.rs"]
mod crud;
#[path = "replication/keys.rs"]
mod keys;
#[path = "replication/kv.rs"]
mod kv;
#[path = "replication/locks.rs"]
mod locks;
#[path = "replication/routing.rs"]
mod routing;
#[path = "replication/stale.rs"]
mod stale;
#[path = "replication/status.rs"]
mod status;
#[path = "replication/transactions.rs"]
mod transactions;
#[path = "replication/workload.rs"]
mod workload;

use client::{Commit, Outcome, Transaction, Value};
use common::{create_table, kv_definition, ClusterOptions, TestCluster};
use std::fmt::Display;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Long enough that a waiter in the "waits, then proceeds" checks cannot
/// time out on a slow machine before its blocker commits; the timeout
/// checks take this long each.
const LOCK_WAIT_TIMEOUT_MS: u64 = 5000;

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
        ..ClusterOptions::default()
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
    keys::assert_partitions_on_every_group(&processes, &kv);
    crud::crud_with_every_primary(&processes, &a, &kv);
    transactions::multi_row_transactions(&processes, &a, &b, &kv);
    routing::hinted_transactions_run_on_the_primarys_tc(&processes, &a, &kv);
    let live = workload::workload(&processes);
    status::cluster_status(&processes);
    processes.assert_node_serving();
    assert!(live > 0, "the workload left rows");
}

/// Every part, in sequence, on one cluster with 2 replicas; the replica
/// check runs last, over everything the parts left.
fn everything(processes: &mut TestCluster) {
    let a = processes.connect();
    let b = processes.connect();
    let kv = create_table(&a, &kv_definition());
    keys::assert_partitions_on_every_group(processes, &kv);
    crud::crud_with_every_primary(processes, &a, &kv);
    transactions::multi_row_transactions(processes, &a, &b, &kv);
    locks::lock_conflicts_across_nodes(processes, &a, &b);
    let live = workload::workload(processes);
    stale::stale_table_is_refreshed(processes, &a, &b);
    status::cluster_status(processes);
    processes.assert_node_serving();
    status::check_replicas(processes, live);
}

// ---------------------------------------------------------------------
// Shared by the parts

/// Executes the batch of `transaction`; an error fails the test, named by
/// `what`.
fn execute(transaction: &mut Transaction<'_>, commit: Commit, what: impl Display) -> Outcome {
    transaction
        .execute(commit)
        .unwrap_or_else(|error| panic!("{what}: {error}"))
}

/// A row of a table made by `keyed_definition` with one more column.
fn keyed_row(k: u32, column: &str, value: Value) -> [(&str, Value); 2] {
    [("k", Value::UInt(k.into())), (column, value)]
}
