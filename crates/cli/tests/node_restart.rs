//! Node restart against real processes (docs/design/0018-node-restart.md):
//! 2 data nodes with 2 replicas; one gets SIGKILL, the other goes on and
//! the client changes rows (updates, deletes, inserts, keys deleted and
//! inserted again); the killed node is started again (from its own
//! files, or with `--initial`) while the cluster runs, rejoins, copies
//! what changed and reports started. Then the replica checker finds no
//! difference, and once the node that never stopped is killed in turn,
//! the restarted node alone serves every row as the client last wrote
//! it. The clients connected all along (one since before the kill, one
//! since the node was down) reach the restarted node again by
//! themselves, and the first serves every row through it at the end.
//! Nothing here asserts a timing: the deadlines are generous upper
//! bounds for a loaded 2-core machine.

mod common;

use client::{Cluster, Commit, LockMode, Value};
use common::{create_table, kv_definition, send_signal, ClusterOptions, TestCluster};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Upper bound for any one step to go through while failures settle.
const SETTLE: Duration = Duration::from_secs(60);

/// Runs `attempt` until it succeeds, retrying temporary errors (a failure
/// being handled) until the deadline.
fn settled<T>(what: &str, mut attempt: impl FnMut() -> Result<T, client::ClientError>) -> T {
    let deadline = Instant::now() + SETTLE;
    loop {
        match attempt() {
            Ok(value) => return value,
            Err(error) if Instant::now() < deadline => {
                eprintln!("node restart: {what}: {error}; retrying");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(error) => panic!("{what} never went through: {error}"),
        }
    }
}

/// Sets `k` to `value` (None: deletes it), in a transaction of its own.
fn set(cluster: &Cluster, table: &Arc<client::Table>, k: u32, value: Option<&str>) {
    settled(&format!("set {k}"), || {
        let mut transaction = cluster.transaction();
        match value {
            Some(value) => transaction.write(
                table,
                &[("k", Value::UInt(k.into())), ("v", Value::from(value))],
            )?,
            None => transaction.delete(table, &[Value::UInt(k.into())])?,
        };
        match transaction.execute(Commit::Yes) {
            Err(error) if value.is_none() && error.code() == Some(client::ErrorCode::NoSuchRow) => {
                // An earlier attempt with an unknown outcome deleted it.
                Ok(())
            }
            other => other.map(|_| ()),
        }
    });
}

/// `k`'s value (None: no row).
fn get(cluster: &Cluster, table: &Arc<client::Table>, k: u32) -> Option<String> {
    settled(&format!("read {k}"), || {
        let mut transaction = cluster.transaction();
        let op = transaction.read(table, &[Value::UInt(k.into())], LockMode::CommittedRead)?;
        match transaction.execute(Commit::Yes) {
            Ok(_) => Ok(transaction
                .get(op)
                .and_then(|row| row.get("v")?.as_str().map(String::from))),
            Err(error) if error.code() == Some(client::ErrorCode::NoSuchRow) => Ok(None),
            Err(error) => Err(error),
        }
    })
}

fn restart_and_serve(name: &'static str, initial: bool) {
    let mut cluster = TestCluster::start(ClusterOptions::pair(name));
    let (victim, survivor) = (3u16, 2u16);
    let client = cluster.connect();
    let table = create_table(&client, &kv_definition());
    let mut expected: BTreeMap<u32, Option<String>> = BTreeMap::new();
    for k in 0..300 {
        let value = format!("first {k}");
        set(&client, &table, k, Some(&value));
        expected.insert(k, Some(value));
    }
    // Durable on both nodes: the node killed next has them in its files.
    settled("a durable commit", || {
        let mut transaction = client.transaction();
        transaction.write(
            &table,
            &[("k", Value::UInt(0)), ("v", Value::from("durable"))],
        )?;
        transaction.commit_durable().map(|_| ())
    });
    expected.insert(0, Some("durable".to_string()));

    send_signal(cluster.node_pid_of(victim), libc::SIGKILL);
    let _ = cluster.wait_for_exit(victim);
    cluster.wait_for_log(survivor, &format!("without {{{victim}}}"));
    // A client that connects while the node is down.
    let late = cluster.connect();
    // While it is down: updates, deletes, inserts.
    for k in 0..300 {
        let value = match k % 3 {
            0 => Some(format!("while down {k}")),
            1 => None,
            _ => continue,
        };
        set(&client, &table, k, value.as_deref());
        expected.insert(k, value);
    }
    for k in 300..350 {
        let value = format!("inserted while down {k}");
        set(&client, &table, k, Some(&value));
        expected.insert(k, Some(value));
    }

    if initial {
        cluster.spawn_data_node_initial(victim);
    } else {
        cluster.spawn_data_node(victim);
    }
    // Writes go on while it restarts (deleted keys come back, too).
    let mut round = 0u32;
    while !cluster
        .show()
        .get("nodes")
        .and_then(|nodes| nodes.as_array())
        .is_some_and(|nodes| {
            nodes
                .iter()
                .any(|node| node["id"] == victim && node["state"] == "started")
        })
    {
        let k = (round * 7) % 350;
        let value = format!("during the restart {round}");
        set(&client, &table, k, Some(&value));
        expected.insert(k, Some(value));
        round += 1;
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            round < 10_000,
            "node {victim} never started:\n{}",
            cluster.node_log_of(victim)
        );
    }
    cluster.wait_until_started(victim);
    // show reports the copy: every partition, and the rows it brought.
    let show = cluster.show();
    let node = common::data_node(&show, victim.into()).expect("the victim in show");
    let progress = &node["copy_progress"];
    assert!(
        progress["rows"].as_u64().is_some_and(|rows| rows > 0)
            && progress["partitions_copied"] == progress["partitions"]
            && node["start_phase"].is_null(),
        "{node}"
    );
    let log = cluster.node_log_of(victim);
    assert!(log.contains("node restart: phase copy data"), "{log}");
    // The copy's progress, in the log too.
    assert!(log.contains("node restart: copy: "), "{log}");
    assert!(log.contains("rejoining it by a node restart"), "{log}");
    assert!(log.contains("node restart done"), "{log}");
    if !initial {
        // It restored its own files, up to what it had made durable.
        assert!(
            log.contains("restoring this node's own data up to GCI")
                && !log.contains("restoring this node's own data up to GCI 0/0"),
            "{log}"
        );
    }
    // Both clients open their connection to it again, and run on it.
    for (which, connected) in [("the first client", &client), ("the late client", &late)] {
        let deadline = Instant::now() + SETTLE;
        while !connected.is_node_connected(signal::NodeId(victim)) {
            assert!(
                Instant::now() < deadline,
                "{which} never reconnected to node {victim}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        settled(&format!("a write through node {victim} by {which}"), || {
            let mut transaction = connected.transaction_on_node(signal::NodeId(victim))?;
            transaction.write(&table, &[("k", Value::UInt(1)), ("v", Value::from(which))])?;
            transaction.execute(Commit::Yes).map(|_| ())
        });
        expected.insert(1, Some(which.to_string()));
    }
    drop(late);

    // Quiet: every replica holds the same rows.
    let checker = cluster.connect();
    let report = settled("the replica check", || checker.check_replicas());
    assert_eq!(report.mismatches, 0, "the replicas differ: {report}");
    drop(checker);

    // The node that never stopped dies: the restarted one serves alone.
    send_signal(cluster.node_pid_of(survivor), libc::SIGKILL);
    let _ = cluster.wait_for_exit(survivor);
    cluster.wait_for_log(victim, &format!("without {{{survivor}}}"));
    // Through the first client, on its new connection.
    for (&k, value) in &expected {
        assert_eq!(get(&client, &table, k), *value, "key {k}");
    }
}

#[test]
fn a_killed_node_restarts_from_its_files_catches_up_and_serves_alone() {
    restart_and_serve("node-restart-files", false);
}

#[test]
fn a_killed_node_restarts_with_initial_copies_everything_and_serves_alone() {
    restart_and_serve("node-restart-initial", true);
}
