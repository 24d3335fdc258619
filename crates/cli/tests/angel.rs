//! The angel against real processes (docs/design/0018-node-restart.md):
//! `tessera node` without `--no-angel` runs a supervising parent. Killed
//! with SIGKILL under a write load, the data node is started again by its
//! angel, rejoins by a node restart and reports `started` with a new pid
//! and a start count one higher, round after round (5 in CI;
//! `TESSERA_NR_ROUNDS=N` for more); no acknowledged write is lost and the
//! replicas agree. SIGTERM to the angel stops the node for good; past its
//! restart limit the angel gives up, saying so. A node restarted while
//! mgmd cannot be reached is started again until it can (the fault
//! harness once saw an angel give up on a node whose host was cut off). Nothing here asserts a
//! timing: the deadlines are generous upper bounds for a loaded machine.

mod common;

use client::{Commit, Value};
use common::{
    create_table, data_node, kv_definition, send_signal, started_pid, wait_started_again,
    ClusterOptions, TestCluster,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The cluster with node 3 stopped and started again under its angel.
fn cluster_with_angel(name: &'static str, angel_args: &[&str]) -> TestCluster {
    let mut cluster = TestCluster::start(ClusterOptions::pair(name));
    // Started without an angel: stop it, then start it under one (it
    // rejoins by a node restart).
    send_signal(cluster.node_pid_of(3), libc::SIGKILL);
    let _ = cluster.wait_for_exit(3);
    cluster.wait_for_log(2, "without {3}");
    cluster.spawn_data_node_with_angel(3, angel_args);
    cluster.wait_until_started(3);
    cluster
}

#[test]
fn the_angel_restarts_a_killed_node_which_catches_up_round_after_round() {
    let rounds: u32 = std::env::var("TESSERA_NR_ROUNDS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(5);
    let cluster = cluster_with_angel("angel-rounds", &["--restarts", "1000"]);
    let client = cluster.connect();
    let table = create_table(&client, &kv_definition());
    drop(client);

    // A writer through node 2 the whole time: every acknowledged write is
    // remembered, with its value.
    let acknowledged: Arc<Mutex<BTreeMap<u64, String>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (acknowledged, stop) = (Arc::clone(&acknowledged), Arc::clone(&stop));
        let cluster = cluster.connect();
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let k = n % 500;
                let value = format!("write {n}");
                let mut transaction = match cluster.transaction_on_node(signal::NodeId(2)) {
                    Ok(transaction) => transaction,
                    Err(_) => cluster.transaction(),
                };
                let written = transaction
                    .write(
                        &table,
                        &[("k", Value::UInt(k)), ("v", Value::from(value.as_str()))],
                    )
                    .and_then(|_| transaction.execute(Commit::Yes));
                if written.is_ok() {
                    acknowledged.lock().expect("writer").insert(k, value);
                }
                n += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
            n
        })
    };

    let (mut pid, mut count) = started_pid(&cluster, 3).expect("node 3 started");
    for round in 0..rounds {
        send_signal(pid as u32, libc::SIGKILL);
        let (new_pid, new_count) = wait_started_again(&cluster, 3, pid);
        assert_eq!(new_count, count + 1, "round {round}: one more start");
        eprintln!("angel: round {round}: node 3 started again as pid {new_pid}");
        (pid, count) = (new_pid, new_count);
    }
    stop.store(true, Ordering::SeqCst);
    let written = writer.join().expect("the writer");
    assert!(written > 0, "the writer wrote");
    let log = cluster.node_log_of(3);
    assert!(
        log.matches("tessera angel of node 3: the node died")
            .count()
            >= rounds as usize,
        "{log}"
    );

    // The replicas agree, and every acknowledged write is there.
    let client = cluster.connect();
    let report = client.check_replicas().expect("the replica check");
    assert_eq!(report.mismatches, 0, "the replicas differ: {report}");
    let table = client.table("kv").expect("kv");
    for (&k, value) in acknowledged.lock().expect("writer").iter() {
        let row = common::read_row(&client, &table, &[Value::UInt(k)]).expect("a read");
        assert_eq!(
            row.get("v").and_then(Value::as_str),
            Some(value.as_str()),
            "key {k}"
        );
    }
}

#[test]
fn a_node_restarted_while_mgmd_is_unreachable_is_started_again_until_it_is_back() {
    // Three replicas: the two left are a majority, and go on without the
    // arbitrator (mgmd), which is down.
    let mut cluster = TestCluster::start(ClusterOptions {
        name: "angel-unreachable",
        data_nodes: 3,
        replicas: 3,
        angels: true,
        ..ClusterOptions::default()
    });
    let (pid, _) = started_pid(&cluster, 3).expect("node 3 started");
    cluster.kill_mgmd();
    send_signal(pid as u32, libc::SIGKILL);
    // The angel starts the node, which cannot register: the angel says
    // so and keeps starting it.
    cluster.wait_for_log(3, "cannot reach mgmd");
    cluster.wait_for_log(3, "cannot register node 3 with mgmd");
    assert!(
        cluster.node_is_running_of(3),
        "the angel gave up:\n{}",
        cluster.node_log_of(3)
    );
    cluster.start_mgmd_again();
    let (again, _) = wait_started_again(&cluster, 3, pid);
    assert_ne!(again, pid);
    // And the cluster serves through it.
    let client = cluster.connect();
    let table = create_table(&client, &kv_definition());
    let mut transaction = client
        .transaction_on_node(signal::NodeId(3))
        .expect("node 3 takes transactions");
    transaction
        .write(&table, &[("k", Value::UInt(1)), ("v", Value::from("back"))])
        .and_then(|_| transaction.execute(Commit::Yes))
        .expect("a write through node 3 commits");
}

#[test]
fn sigterm_to_the_angel_stops_the_node_for_good_and_past_its_limit_it_gives_up() {
    let mut cluster = cluster_with_angel(
        "angel-stop",
        &["--restarts", "1", "--restart-window", "600"],
    );
    // One restart is allowed.
    let (pid, _) = started_pid(&cluster, 3).expect("node 3 started");
    send_signal(pid as u32, libc::SIGKILL);
    let (pid, _) = wait_started_again(&cluster, 3, pid);
    // The second kill within the window is one too many.
    send_signal(pid as u32, libc::SIGKILL);
    let (status, log) = cluster.wait_for_exit(3);
    let status = status.unwrap_or_else(|| panic!("the angel still runs:\n{log}"));
    assert!(!status.success(), "{log}");
    assert!(log.contains("giving up"), "{log}");

    // Under a new angel, SIGTERM to the angel stops node and angel.
    cluster.spawn_data_node_with_angel(3, &[]);
    cluster.wait_until_started(3);
    let (node_pid, _) = started_pid(&cluster, 3).expect("node 3 started");
    send_signal(cluster.node_pid_of(3), libc::SIGTERM);
    let (status, log) = cluster.wait_for_exit(3);
    let status = status.unwrap_or_else(|| panic!("the angel still runs:\n{log}"));
    assert!(status.success(), "{status:?}:\n{log}");
    assert!(log.contains("stopping too"), "{log}");
    assert!(
        !common::process_alive(node_pid as u32),
        "the node stopped with its angel"
    );
}

#[test]
fn mgm_restarts_a_node_under_its_angel_and_rolls_the_whole_cluster() {
    let mut cluster = cluster_with_angel("angel-mgm", &[]);
    let client = cluster.connect();
    let table = create_table(&client, &kv_definition());
    for k in 0..200u64 {
        let mut transaction = client.transaction();
        transaction
            .write(
                &table,
                &[("k", Value::UInt(k)), ("v", Value::from("before"))],
            )
            .expect("a valid write");
        transaction.execute(Commit::Yes).expect("a write");
    }
    drop(client);
    let addr = cluster.mgmd_addr();
    let mgm = |command: &str| {
        common::run_tessera(
            &["mgm", "--mgmd", &addr, "-e", command, "--wait"],
            Duration::from_secs(300),
        )
    };

    // Node 2 runs without an angel: nothing would start it again.
    let refused = mgm("node 2 restart");
    assert!(!refused.status.success(), "{refused:?}");
    assert!(refused.stderr.contains("without an angel"), "{refused:?}");

    // Node 3, from its files and then empty.
    for command in ["node 3 restart", "node 3 restart --initial"] {
        let (_, before) = started_pid(&cluster, 3).expect("node 3 started");
        let restarted = mgm(command);
        assert!(restarted.status.success(), "{command}: {restarted:?}");
        let (_, after) = started_pid(&cluster, 3).expect("node 3 started again");
        assert_eq!(after, before + 1, "{command}: one more start");
    }

    // Node 2 under an angel too, then a rolling restart of both.
    send_signal(cluster.node_pid_of(2), libc::SIGKILL);
    let _ = cluster.wait_for_exit(2);
    cluster.wait_for_log(3, "without {2}");
    cluster.spawn_data_node_with_angel(2, &[]);
    cluster.wait_until_started(2);
    let counts =
        |cluster: &TestCluster| [2u16, 3].map(|id| started_pid(cluster, id).expect("started").1);
    let before = counts(&cluster);
    let rolled = mgm("all restart");
    assert!(rolled.status.success(), "{rolled:?}");
    assert_eq!(counts(&cluster), [before[0] + 1, before[1] + 1]);

    let client = cluster.connect();
    let report = client.check_replicas().expect("the replica check");
    assert_eq!(report.mismatches, 0, "the replicas differ: {report}");
    let table = client.table("kv").expect("kv");
    for k in 0..200u64 {
        let row = common::read_row(&client, &table, &[Value::UInt(k)]).expect("a read");
        assert_eq!(
            row.get("v").and_then(Value::as_str),
            Some("before"),
            "key {k}"
        );
    }
}

/// `node N stop` stops a node for good, shown `stopped`, its angel
/// waiting; the last started node of a group cannot be stopped; `node N
/// start` has the angel start it again, and it rejoins.
#[test]
fn mgm_stops_a_node_which_stays_stopped_until_mgm_starts_it() {
    let mut cluster = cluster_with_angel("angel-stop-start", &[]);
    let addr = cluster.mgmd_addr();
    let mgm = |command: &str| {
        common::run_tessera(
            &["mgm", "--mgmd", &addr, "-e", command, "--wait"],
            Duration::from_secs(300),
        )
    };
    let (pid, before) = started_pid(&cluster, 3).expect("node 3 started");
    let stopped = mgm("node 3 stop");
    assert!(stopped.status.success(), "{stopped:?}");
    assert!(stopped.stdout.contains("Node 3: stopped"), "{stopped:?}");
    assert!(!common::process_alive(pid as u32), "the data node exited");
    assert!(cluster.node_is_running_of(3), "its angel waits");
    // It stays stopped (the angel would have started a crashed node
    // again after a second).
    std::thread::sleep(Duration::from_secs(3));
    let show = cluster.show();
    let node = data_node(&show, 3).expect("node 3 in show");
    assert_eq!(node["state"], "stopped", "{show}");
    let text = cluster.mgm_text("show");
    assert!(text.stdout.contains("stopped by mgm"), "{}", text.stdout);
    // Node 2 is now the only started node of the group.
    let refused = mgm("node 2 stop");
    assert!(!refused.status.success(), "{refused:?}");
    assert!(refused.stderr.contains("only started node"), "{refused:?}");
    // A node that is not stopped cannot be started.
    let refused = mgm("node 2 start");
    assert!(!refused.status.success(), "{refused:?}");
    assert!(refused.stderr.contains("not stopped"), "{refused:?}");

    let started = mgm("node 3 start");
    assert!(started.status.success(), "{started:?}");
    let (_, after) = started_pid(&cluster, 3).expect("node 3 started again");
    assert_eq!(after, before + 1, "one more start");
    let log = cluster.node_log_of(3);
    assert!(log.contains("waiting for `node 3 start`"), "{log}");
    assert!(log.contains("node restart done"), "{log}");
}
