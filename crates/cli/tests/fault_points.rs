//! Fault points against real processes (kernel::faults): a data node of 2
//! (replicas 2) is armed through mgm (`node N fault POINT`) and crashes
//! at that step of a protocol. The survivor must finish every transaction
//! one way (all of its rows or none; committed if the client heard so),
//! hold no lock (the same rows are writable), and go on making GCIs
//! durable (a durable commit is acknowledged, the GCI never goes back);
//! then a whole-cluster SIGKILL and restart loses nothing acknowledged
//! as durable (the crashed node's older data takes no part: designs 0014
//! and 0015; when the crashed node is the president, the lowest id, the
//! survivor leads the start).
//!
//! On the tc's node: after every operation prepared, after the first
//! COMMIT, before COMPLETE. On the GCP master: after GCP_PREPARE, after
//! GCP_COMMIT, before COPY_GCI. On the master dict: after it announced a
//! new table, after every tc dropped one (the survivor's take-over makes
//! the change whole or undoes it).

mod common;

use client::{Cluster, Commit, LockMode, Value};
use common::{acct_definition, create_table, data_node, key, ClusterOptions, TestCluster};
use std::time::{Duration, Instant};

const ACCOUNTS: u32 = 8;

/// Reads every balance under shared locks through `node`'s tc, retrying
/// temporary errors until `deadline`.
fn balances(cluster: &Cluster, table: &std::sync::Arc<client::Table>, node: u16) -> Vec<i64> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut transaction = cluster
            .transaction_on_node(signal::NodeId(node))
            .expect("a data node");
        let ops: Vec<_> = (0..ACCOUNTS)
            .map(|k| {
                transaction
                    .read(table, &key(k), LockMode::Shared)
                    .expect("a valid read")
            })
            .collect();
        match transaction.execute(Commit::Yes) {
            Ok(_) => {
                return ops
                    .into_iter()
                    .map(|op| {
                        transaction
                            .get(op)
                            .and_then(|row| row.get("v")?.as_i64())
                            .expect("an account")
                    })
                    .collect()
            }
            Err(error) if Instant::now() < deadline => {
                eprintln!("fault points: reading the balances: {error}; retrying");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(error) => panic!("the balances cannot be read: {error}"),
        }
    }
}

/// Sets every account to `value` through `node`'s tc and waits until it
/// is durable, retrying temporary errors; returns the commit's GCI.
fn set_all_durably(
    cluster: &Cluster,
    table: &std::sync::Arc<client::Table>,
    node: u16,
    value: i64,
) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut transaction = cluster
            .transaction_on_node(signal::NodeId(node))
            .expect("a data node");
        for k in 0..ACCOUNTS {
            transaction
                .update(table, &key(k), &[("v", Value::Int(value))])
                .expect("a valid update");
        }
        match transaction.commit_durable() {
            Ok(outcome) => return outcome.gci.expect("a write commits in a GCI").0,
            Err(error) if Instant::now() < deadline => {
                eprintln!("fault points: a durable write: {error}; retrying");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(error) => panic!("no durable write went through: {error}"),
        }
    }
}

/// Arms `point` on `victim` (2 or 3), makes it reach the point, and checks
/// what the module doc says.
fn crash_at(point: &str, victim: u16, name: &'static str) {
    let mut cluster = TestCluster::start(ClusterOptions::pair(name));
    let survivor = if victim == 2 { 3 } else { 2 };
    let client = cluster.connect();
    let table = create_table(&client, &acct_definition());
    let mut opening = client.transaction();
    for k in 0..ACCOUNTS {
        opening
            .insert(
                &table,
                &[("k", Value::UInt(k.into())), ("v", Value::Int(100))],
            )
            .expect("a valid insert");
    }
    opening.execute(Commit::Yes).expect("the opening balances");
    drop(opening);
    let armed = cluster.mgm_json(&format!("node {victim} fault {point}"));
    assert!(armed.status.success(), "arming {point}: {armed:?}");

    // A transaction coordinated by the victim's tc, moving 10 from every
    // even account to the odd one after it (rows on both primaries). On
    // the GCP master it runs too, and the crash comes from the GCP round.
    let mut transaction = client
        .transaction_on_node(signal::NodeId(victim))
        .expect("a data node");
    for k in (0..ACCOUNTS).step_by(2) {
        transaction
            .update(&table, &key(k), &[("v", Value::Int(90))])
            .expect("a valid update");
        transaction
            .update(&table, &key(k + 1), &[("v", Value::Int(110))])
            .expect("a valid update");
    }
    let committed = transaction.execute(Commit::Yes);
    drop(transaction);
    eprintln!("fault points: {point}: the transaction through node {victim}: {committed:?}");
    let (status, log) = cluster.wait_for_exit(victim);
    assert!(
        status.is_some(),
        "node {victim} never reached {point}:\n{log}"
    );
    assert!(
        log.contains(&format!("fault point {point} reached")),
        "{log}"
    );

    // One way on the survivor: all or nothing, and what the client heard.
    let seen = balances(&client, &table, survivor);
    let moved: Vec<i64> = (0..ACCOUNTS)
        .map(|k| if k % 2 == 0 { 90 } else { 110 })
        .collect();
    let untouched = vec![100; ACCOUNTS as usize];
    assert!(
        seen == moved || seen == untouched,
        "{point}: half a transaction on node {survivor}: {seen:?}"
    );
    if committed.is_ok() {
        assert_eq!(seen, moved, "{point}: an acknowledged commit is lost");
    }
    // No lock left; GCIs go on and never go back.
    let latest_before = cluster.show()["latest_gci"].as_u64().unwrap_or(0);
    let durable_gci = set_all_durably(&client, &table, survivor, 7);
    assert!(durable_gci >= latest_before, "{point}: GCI went back");
    let show = cluster.show();
    assert_eq!(
        data_node(&show, survivor.into()).map(|node| node["state"].clone()),
        Some("started".into()),
        "{show}"
    );
    drop(client);

    // A whole-cluster crash and restart.
    cluster.kill_data_nodes();
    cluster.spawn_data_node(survivor);
    cluster.spawn_data_node(victim);
    // The crashed node's data is the older: it takes no part and exits
    // (when it is the lowest id, the start is led by the survivor,
    // design 0015); the survivor starts alone with the durable write.
    let (status, log) = cluster.wait_for_exit(victim);
    assert!(
        status.is_some(),
        "{point}: node {victim} still runs:\n{log}"
    );
    assert!(log.contains("needs a node restart"), "{point}: {log}");
    cluster.wait_until_started(survivor);
    let client = cluster.connect();
    let table = client.table("acct").expect("acct");
    assert_eq!(
        balances(&client, &table, survivor),
        vec![7; ACCOUNTS as usize],
        "{point}: the durable write after the crash"
    );
}

#[test]
fn a_tc_that_crashes_after_every_operation_prepared() {
    crash_at("TC_AFTER_PREPARE", 3, "fault-tc-after-prepare");
}

#[test]
fn a_tc_that_crashes_after_its_first_commit() {
    crash_at("TC_AFTER_FIRST_COMMIT", 3, "fault-tc-after-first-commit");
}

#[test]
fn a_tc_that_crashes_before_complete() {
    crash_at("TC_BEFORE_COMPLETE", 3, "fault-tc-before-complete");
}

#[test]
fn the_gcp_master_crashing_after_prepare() {
    crash_at("GCP_AFTER_PREPARE", 2, "fault-gcp-after-prepare");
}

#[test]
fn the_gcp_master_crashing_after_commit() {
    crash_at("GCP_AFTER_COMMIT", 2, "fault-gcp-after-commit");
}

#[test]
fn the_gcp_master_crashing_before_copy() {
    crash_at("GCP_BEFORE_COPY", 2, "fault-gcp-before-copy");
}

#[test]
fn an_unknown_fault_point_is_refused_naming_the_known_ones() {
    let cluster = TestCluster::start(ClusterOptions {
        name: "fault-unknown",
        ..ClusterOptions::default()
    });
    let refused = cluster.mgm_json("node 2 fault NO_SUCH_POINT");
    assert!(!refused.status.success(), "{refused:?}");
    assert!(
        refused.stderr.contains("TC_AFTER_FIRST_COMMIT"),
        "{refused:?}"
    );
}

/// A point armed to stall (`... fault POINT delay MS`): the node stops at
/// that step for the delay, shorter than the heartbeats tolerate, then
/// goes on: the transaction through it commits and the node keeps
/// running. A delay that is not a number of milliseconds is refused.
#[test]
fn a_fault_point_armed_to_stall_delays_its_step_and_the_node_goes_on() {
    let mut cluster = TestCluster::start(ClusterOptions::pair("fault-stall"));
    for bad in ["delay 0", "delay soon", "delay 700000"] {
        let refused = cluster.mgm_json(&format!("node 3 fault TC_AFTER_FIRST_COMMIT {bad}"));
        assert!(!refused.status.success(), "{bad}: {refused:?}");
        assert!(refused.stderr.contains("delay <ms>"), "{bad}: {refused:?}");
    }
    let client = cluster.connect();
    let table = create_table(&client, &acct_definition());
    let armed = cluster.mgm_json("node 3 fault TC_AFTER_FIRST_COMMIT delay 300");
    assert!(armed.status.success(), "{armed:?}");
    let mut transaction = client
        .transaction_on_node(signal::NodeId(3))
        .expect("a data node");
    for k in 0..ACCOUNTS {
        transaction
            .insert(
                &table,
                &[("k", Value::UInt(k.into())), ("v", Value::Int(1))],
            )
            .expect("a valid insert");
    }
    transaction
        .execute(Commit::Yes)
        .expect("the transaction commits after the stall");
    let log = cluster.node_log_of(3);
    assert!(
        log.contains("fault point TC_AFTER_FIRST_COMMIT reached: stalling 300 ms"),
        "{log}"
    );
    assert!(cluster.node_is_running_of(3), "{log}");
}

/// The president (node 2, the master dict) crashes at `point` in the
/// middle of a create (or, for a drop point, a drop) of table
/// "scratch". The survivor's dict takes the master role over (design
/// 0016): the change is made or undone, never half, so the table either
/// serves through the survivor or can be created again; and schema
/// changes go on.
fn schema_master_crashes_at(point: &str, name: &'static str) {
    let mut cluster = TestCluster::start(ClusterOptions::pair(name));
    let client = cluster.connect();
    let dropping = point.starts_with("DROP");
    let mut scratch = acct_definition();
    scratch.name = "scratch".into();
    if dropping {
        create_table(&client, &scratch);
    }
    let armed = cluster.mgm_json(&format!("node 2 fault {point}"));
    assert!(armed.status.success(), "arming {point}: {armed:?}");
    let changed = if dropping {
        client.drop_table("scratch")
    } else {
        client.create_table(&scratch).map(|_| ())
    };
    eprintln!("fault points: {point}: the change through node 2: {changed:?}");
    let (status, log) = cluster.wait_for_exit(2);
    assert!(status.is_some(), "node 2 never reached {point}:\n{log}");
    assert!(
        log.contains(&format!("fault point {point} reached")),
        "{log}"
    );

    // Wait for the take-over (the survivor's dict answers lookups while
    // it runs, before the drop it finishes), then look the table up
    // through the survivor's dict.
    let deadline = Instant::now() + Duration::from_secs(60);
    let taken_over = loop {
        let survivor_log = cluster.node_log_of(3);
        if survivor_log.contains("schema take-over done") || Instant::now() > deadline {
            break survivor_log;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        taken_over.contains("schema take-over done"),
        "{point}: {taken_over}"
    );
    let exists = loop {
        client.invalidate_table("scratch");
        match client.table("scratch") {
            Ok(_) => break true,
            Err(error) if error.code() == Some(client::ErrorCode::UnknownTable) => break false,
            Err(error) if Instant::now() < deadline => {
                eprintln!("fault points: looking the table up: {error}; retrying");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(error) => panic!("{point}: the table cannot be looked up: {error}"),
        }
    };
    if dropping {
        assert!(!exists, "{point}: a drop that reached the tcs is finished");
    }
    if changed.is_ok() {
        assert_eq!(exists, !dropping, "{point}: a confirmed change stands");
    }
    if !exists {
        create_table(&client, &scratch);
    }
    let table = client.table("scratch").expect("the scratch table");
    let mut writer = client
        .transaction_on_node(signal::NodeId(3))
        .expect("a data node");
    writer
        .insert(&table, &[("k", Value::UInt(1)), ("v", Value::Int(1))])
        .expect("a valid insert");
    writer
        .execute(Commit::Yes)
        .unwrap_or_else(|error| panic!("{point}: writing the table: {error}"));
    client
        .drop_table("scratch")
        .expect("a drop after the take-over");
}

#[test]
fn the_schema_master_crashing_after_announcing_a_new_table() {
    schema_master_crashes_at("CREATE_AFTER_FIRST_ANNOUNCE", "fault-create-announce");
}

#[test]
fn the_schema_master_crashing_after_the_tcs_dropped_a_table() {
    schema_master_crashes_at("DROP_AFTER_COORDINATORS", "fault-drop-coordinators");
}
