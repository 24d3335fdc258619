//! The data node's promise that its ldm and tc threads do not touch the heap
//! once warm (docs/design/processes-and-blocks.md §6), checked on a real
//! process: the `tessera` binary counts allocations per thread and
//! `all report threads` publishes the counts. After a warm-up that runs
//! every kind of operation used later, 100,000 key operations (committed,
//! shared and exclusive reads, updates that move values between size
//! classes, writes, deletes and re-inserts) must leave the ldm and tc counts
//! unchanged. Local checkpoints run on the ldm threads beside the
//! operations, so both the warm-up and the measured run go on until a few
//! more LCPs have completed: the promise covers them too.
//!
//! To find what allocates: run the test with
//! `TESSERA_TRAP_ALLOCATIONS_AFTER_SIGNALS=<the "signals" before>` and the
//! nodes print a backtrace of every allocation past that many signals of
//! a block thread (into the node log the failing test prints).
//!
//! Every read is also checked against what the test wrote, so the run
//! doubles as a correctness check under steady load.

mod common;

use client::{Cluster, ColumnType, Commit, LockMode, OpId, Table, TableDef, Value};
use common::{
    column, create_table, key, keyed_definition, threads_of_node2, ClusterOptions, TestCluster,
    FIRST_DATA_NODE,
};
use mgmd::client::MgmClient;
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const ROWS: u32 = 10_000;
const MEASURED_OPERATIONS: u64 = 100_000;
const WARMUP_OPERATIONS: u64 = 20_000;
/// Two API nodes, each owning the keys of its parity, so they never wait
/// on each other's locks.
const CLIENTS: u32 = 2;
const BATCH: usize = 10;
/// LCPs (summed over the node's ldms) that must complete in the warm-up
/// and again in the measured run: with two ldms, about two each, so each
/// ldm writes a partial LCP, its control file, and deletes what only the
/// LCP before needed.
const LCPS_PER_PHASE: u64 = 4;
/// Operations run at a time while waiting for LCPs.
const OPERATIONS_PER_ROUND: u64 = 10_000;
/// Longest wait for `LCPS_PER_PHASE` LCPs: generous for a slow, shared
/// machine (an LCP of a partition here takes well under a second).
const LCP_TIMEOUT: Duration = Duration::from_secs(240);

fn table_definition() -> TableDef {
    keyed_definition(
        "steady",
        vec![
            column("v", ColumnType::VarChar(200), false),
            column("n", ColumnType::BigInt { unsigned: false }, true),
        ],
    )
}

/// A value whose length varies with `round`, so updates move the row's
/// variable part between size classes.
fn text(k: u32, round: u64) -> String {
    let length = 1 + ((k as u64 * 31 + round * 17) % 180) as usize;
    let mut text = format!("{k}:{round}:");
    while text.len() < length {
        text.push((b'a' + ((k as u64 + round + text.len() as u64) % 26) as u8) as char);
    }
    text.truncate(length);
    text
}

/// What one client believes its rows hold.
struct Model {
    rows: BTreeMap<u32, (String, i64)>,
    rng: u64,
    round: u64,
}

impl Model {
    fn next(&mut self) -> u64 {
        // xorshift64*: deterministic, no dependency.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Runs `operations` key operations on the model's keys, in transactions
/// of `BATCH` distinct keys.
fn run_operations(cluster: &Cluster, table: &Arc<Table>, model: &mut Model, operations: u64) {
    let keys: Vec<u32> = model.rows.keys().copied().collect();
    let mut done = 0u64;
    let mut transaction_number = 0u64;
    while done < operations {
        transaction_number += 1;
        model.round += 1;
        let round = model.round;
        let mut transaction = cluster.transaction();
        let mut checks = Vec::new();
        let mut used = std::collections::BTreeSet::new();
        let mut in_batch = 0;
        while in_batch < BATCH && done < operations {
            let k = keys[(model.next() % keys.len() as u64) as usize];
            if !used.insert(k) {
                continue;
            }
            let choice = model.next() % 10;
            match choice {
                0..=2 => {
                    let op = transaction
                        .read(table, &key(k), LockMode::CommittedRead)
                        .expect("read");
                    checks.push((op, k));
                }
                3 => {
                    let op = transaction
                        .read(table, &key(k), LockMode::Shared)
                        .expect("read");
                    checks.push((op, k));
                }
                4 => {
                    let op = transaction
                        .read(table, &key(k), LockMode::Exclusive)
                        .expect("read");
                    checks.push((op, k));
                }
                5..=7 => {
                    let value = text(k, round);
                    let n = round as i64 * 3;
                    transaction
                        .update(
                            table,
                            &key(k),
                            &[("v", Value::from(value.as_str())), ("n", Value::Int(n))],
                        )
                        .expect("update");
                    model.rows.insert(k, (value, n));
                }
                8 => {
                    let value = text(k, round + 1);
                    transaction
                        .write(
                            table,
                            &[
                                ("k", Value::UInt(k.into())),
                                ("v", Value::from(value.as_str())),
                                ("n", Value::Int(-(round as i64))),
                            ],
                        )
                        .expect("write");
                    model.rows.insert(k, (value, -(round as i64)));
                }
                _ => {
                    // Delete and insert again in the same transaction: the
                    // row count stays put, so the index neither grows nor
                    // shrinks between the snapshots.
                    let value = text(k, round + 2);
                    transaction.delete(table, &key(k)).expect("delete");
                    transaction
                        .insert(
                            table,
                            &[
                                ("k", Value::UInt(k.into())),
                                ("v", Value::from(value.as_str())),
                            ],
                        )
                        .expect("insert");
                    model.rows.insert(k, (value, 0));
                    done += 1;
                }
            }
            in_batch += 1;
            done += 1;
        }
        // A key appears once per transaction, so a read key was not written
        // in it: the model holds what the read must return.
        let expected: Vec<(OpId, u32, (String, i64))> = checks
            .iter()
            .map(|&(op, k)| (op, k, model.rows[&k].clone()))
            .collect();
        transaction
            .execute(Commit::Yes)
            .unwrap_or_else(|error| panic!("transaction {transaction_number}: {error}"));
        for (op, k, (v, n)) in expected {
            let row = transaction.get(op).expect("a read has a row");
            assert_eq!(row.get("v"), Some(&Value::from(v.as_str())), "key {k}");
            // Inserts leave n NULL (model: 0); updates and writes never set 0.
            let want_n = if n == 0 { Value::Null } else { Value::Int(n) };
            assert_eq!(row.get("n"), Some(&want_n), "key {k}");
        }
    }
}

/// The data node's completed LCPs, all ldms together (`all report
/// checkpoints`; each ldm publishes its count about once a second).
fn lcp_count(processes: &TestCluster) -> u64 {
    let report = MgmClient::connect(&processes.mgmd_addr())
        .and_then(|mut mgm| mgm.report_checkpoints())
        .unwrap_or_else(|error| panic!("mgm all report checkpoints: {error}"));
    report["nodes"]
        .as_array()
        .and_then(|nodes| nodes.iter().find(|node| node["id"] == FIRST_DATA_NODE))
        .and_then(|node| node["lcp_count"].as_u64())
        .unwrap_or_else(|| panic!("no lcp_count of node {FIRST_DATA_NODE} in {report}"))
}

/// Runs `operations` operations split over the clients, in parallel.
fn run_clients(clients: &[Cluster], models: &mut [Model], operations: u64) {
    std::thread::scope(|scope| {
        for (cluster, model) in clients.iter().zip(models.iter_mut()) {
            scope.spawn(move || {
                let table = cluster.table("steady").expect("table");
                run_operations(cluster, &table, model, operations / u64::from(CLIENTS));
            });
        }
    });
}

/// Runs `operations` operations, then more until the node has completed
/// `LCPS_PER_PHASE` LCPs since `lcps_at_start`.
fn run_through_lcps(
    processes: &TestCluster,
    clients: &[Cluster],
    models: &mut [Model],
    operations: u64,
    lcps_at_start: u64,
    phase: &str,
) {
    run_clients(clients, models, operations);
    let started = Instant::now();
    loop {
        let lcps = lcp_count(processes);
        if lcps >= lcps_at_start + LCPS_PER_PHASE {
            return;
        }
        assert!(
            started.elapsed() < LCP_TIMEOUT,
            "{phase}: {} LCPs completed in {LCP_TIMEOUT:?} under load, {LCPS_PER_PHASE} wanted",
            lcps - lcps_at_start
        );
        run_clients(clients, models, OPERATIONS_PER_ROUND);
    }
}

/// Allocation and signal counts of the ldm and tc threads, by name.
fn hot_thread_counts(processes: &TestCluster) -> BTreeMap<String, (u64, u64)> {
    // The counters are published by each thread after every round of
    // signals; a thread that just answered may publish a moment later, and
    // the tc's periodic timeout scan makes sure it does. Asking twice with
    // a pause gives the counts time to settle (this is no timing assertion:
    // a late count could only hide an allocation, never invent one).
    let _ = processes.report_threads();
    std::thread::sleep(Duration::from_millis(500));
    let report = processes.report_threads();
    let mut counts = BTreeMap::new();
    for thread in threads_of_node2(&report) {
        let role = thread["role"].as_str().unwrap_or_default();
        if role == "ldm" || role == "tc" {
            let name = thread["name"].as_str().expect("name").to_string();
            let allocations = thread["allocations"].as_u64().expect("allocations");
            let signals = thread["signals"].as_u64().expect("signals");
            counts.insert(name, (allocations, signals));
        }
    }
    assert_eq!(
        counts.keys().filter(|name| name.starts_with("ldm")).count(),
        2,
        "two ldm threads: {report}"
    );
    assert_eq!(
        counts.keys().filter(|name| name.starts_with("tc")).count(),
        1,
        "one tc thread: {report}"
    );
    counts
}

fn report_json(counts: &BTreeMap<String, (u64, u64)>) -> Json {
    counts
        .iter()
        .map(|(name, (allocations, signals))| {
            (
                name.clone(),
                serde_json::json!({"allocations": allocations, "signals": signals}),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

#[test]
fn ldm_and_tc_threads_do_not_allocate_once_warm() {
    let processes = TestCluster::start(ClusterOptions {
        name: "no-alloc",
        data_memory: "64M",
        ..Default::default()
    });
    let clients: Vec<Cluster> = (0..CLIENTS).map(|_| processes.connect()).collect();
    create_table(&clients[0], &table_definition());

    // Load: every client inserts the keys of its parity.
    let mut models: Vec<Model> = (0..CLIENTS)
        .map(|client| Model {
            rows: BTreeMap::new(),
            rng: 0x9e37_79b9_7f4a_7c15 ^ u64::from(client + 1),
            round: 0,
        })
        .collect();
    std::thread::scope(|scope| {
        for (client, (cluster, model)) in clients.iter().zip(models.iter_mut()).enumerate() {
            scope.spawn(move || {
                let table = cluster.table("steady").expect("table");
                let keys: Vec<u32> = (0..ROWS).filter(|k| k % CLIENTS == client as u32).collect();
                for chunk in keys.chunks(BATCH) {
                    let mut transaction = cluster.transaction();
                    for &k in chunk {
                        let value = text(k, 0);
                        transaction
                            .insert(
                                &table,
                                &[
                                    ("k", Value::UInt(k.into())),
                                    ("v", Value::from(value.as_str())),
                                ],
                            )
                            .expect("insert");
                        model.rows.insert(k, (value, 0));
                    }
                    transaction.execute(Commit::Yes).expect("load");
                }
            });
        }
    });

    // Warm-up: the same mix as measured, and LCPs.
    let loaded_lcps = lcp_count(&processes);
    run_through_lcps(
        &processes,
        &clients,
        &mut models,
        WARMUP_OPERATIONS,
        loaded_lcps,
        "warm-up",
    );

    let before = hot_thread_counts(&processes);
    let lcps_before = lcp_count(&processes);
    run_through_lcps(
        &processes,
        &clients,
        &mut models,
        MEASURED_OPERATIONS,
        lcps_before,
        "measured run",
    );
    let after = hot_thread_counts(&processes);

    let mut processes = processes;
    processes.assert_node_serving();
    for (name, (allocations_before, signals_before)) in &before {
        let (allocations_after, signals_after) = after[name];
        assert!(
            signals_after > *signals_before,
            "{name} executed no signals during the run: before {}, after {}",
            report_json(&before),
            report_json(&after)
        );
        assert_eq!(
            allocations_after,
            *allocations_before,
            "{name} allocated {} times during {MEASURED_OPERATIONS} warm operations: \
             before {}, after {}",
            allocations_after.wrapping_sub(*allocations_before),
            report_json(&before),
            report_json(&after)
        );
    }
}
