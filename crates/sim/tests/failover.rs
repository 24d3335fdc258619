//! The cluster carries on when a data node dies (docs/design/failures.md
//! §6): the real client against the real blocks of a simulated cluster
//! (`sim::harness`), a node killed while the client works. Global
//! checkpoints keep being switched and made durable on the survivors,
//! new operations route to the surviving replicas, and the maps clients
//! get leave the dead node out.

use client::{ClientError, Cluster, Commit, LockMode, Value};
use signal::NodeId;
use sim::harness::{create_kv_table, Harness};
use std::time::Duration;

/// Long enough for the default heartbeats (250 ms, 4 missed) to declare
/// a node dead and for the survivors to agree it.
const DETECTION: Duration = Duration::from_millis(2_500);

/// Inserts `k` -> "value k" in its own transaction (coordinated by
/// `coordinator`, or any node), retrying temporary errors; an unknown
/// outcome (the commit went out, then its node died) is settled by
/// retrying too: a duplicate key then means the first attempt committed.
/// Returns the errors seen.
fn insert_settled(
    cluster: &Cluster,
    table: &std::sync::Arc<client::Table>,
    k: u64,
    coordinator: Option<NodeId>,
) -> Vec<String> {
    let mut errors = Vec::new();
    for _ in 0..20 {
        let mut transaction = match coordinator {
            Some(node) => cluster.transaction_on_node(node).unwrap(),
            None => cluster.transaction(),
        };
        let v = Value::from(format!("value {k}").as_str());
        let result = transaction
            .insert(table, &[("k", Value::UInt(k)), ("v", v)])
            .and_then(|_| transaction.execute(Commit::Yes));
        match result {
            Ok(_) => return errors,
            Err(error)
                if error.code() == Some(client::ErrorCode::DuplicateKey) && !errors.is_empty() =>
            {
                return errors
            }
            Err(error)
                if error.is_temporary() || matches!(error, ClientError::OutcomeUnknown { .. }) =>
            {
                errors.push(format!("{error}"));
            }
            Err(error) => panic!("insert {k} after {errors:?}: {error:?}"),
        }
    }
    panic!("insert {k} never committed: {errors:?}");
}

fn read(
    cluster: &Cluster,
    table: &std::sync::Arc<client::Table>,
    k: u64,
) -> Result<Option<String>, ClientError> {
    let mut transaction = cluster.transaction();
    let op = transaction.read(table, &[Value::UInt(k)], LockMode::CommittedRead)?;
    transaction.execute(Commit::Yes)?;
    Ok(transaction
        .get(op)
        .and_then(|row| row.get("v")?.as_str().map(String::from)))
}

#[test]
fn a_killed_non_president_leaves_a_cluster_that_commits_and_makes_gcis_durable() {
    for seed in 1..=3 {
        // Three nodes of one group (ids 2, 3, 4): two survivors are a
        // majority. Node 4 holds a replica of every partition and is
        // primary of some.
        let victim = NodeId(4);
        let (gci_before, gci_after, durable, values, map_version, chains) = Harness::new(seed)
            .nodes(3, 3)
            .kill_at(victim, 1_000_000)
            .run(move |cluster, context| {
                let table = create_kv_table(cluster, "kept");
                for k in 0..10 {
                    insert_settled(cluster, &table, k, None);
                }
                let gci_before = cluster.wait_durable(signal::Gci(0)).unwrap();
                while context.now_us() < 1_000_000 {
                    context.sleep(Duration::from_millis(50));
                }
                context.sleep(DETECTION);
                for k in 10..20 {
                    insert_settled(cluster, &table, k, None);
                }
                let mut transaction = cluster.transaction();
                transaction
                    .insert(&table, &[("k", Value::UInt(20)), ("v", Value::Null)])
                    .unwrap();
                let outcome = transaction.execute(Commit::Durable).unwrap();
                let gci_after = outcome.gci.expect("a write commits in a GCI");
                let durable = cluster.wait_durable(gci_after).unwrap();
                let values: Vec<Option<String>> =
                    (0..20).map(|k| read(cluster, &table, k).unwrap()).collect();
                cluster.invalidate_table("kept");
                let fresh = cluster.table("kept").unwrap();
                let map = fresh.map().expect("a map").clone();
                let chains: Vec<Vec<NodeId>> = map
                    .partitions
                    .iter()
                    .map(|placement| placement.replicas.clone())
                    .collect();
                (gci_before, gci_after, durable, values, map.version, chains)
            });
        assert!(gci_after > gci_before, "seed {seed}: GCIs moved on");
        assert!(durable >= gci_after, "seed {seed}: durable {durable}");
        for (k, value) in values.iter().enumerate() {
            assert_eq!(
                value.as_deref(),
                Some(format!("value {k}").as_str()),
                "seed {seed}: key {k}"
            );
        }
        assert!(map_version >= 2, "seed {seed}: the map changed");
        for chain in &chains {
            assert_eq!(chain.len(), 2, "seed {seed}: {chains:?}");
            assert!(!chain.contains(&victim), "seed {seed}: {chains:?}");
        }
    }
}

/// Transactions coordinated by a survivor (node 2), each writing a
/// partition whose chain runs through the node that dies: those caught
/// before their commit decision are aborted on the live replicas with
/// the temporary `NodeFailureAbort`, and the retry commits. (Those whose
/// coordinator dies need coordinator take-over, not built yet.)
#[test]
fn transactions_in_flight_when_a_node_dies_end_and_the_retries_commit() {
    for seed in 1..=12 {
        let victim = NodeId(3 + (seed % 2) as u16);
        let kill_at_us = 700_000 + seed * 9_973;
        let (errors, values) = Harness::new(seed)
            .nodes(3, 3)
            .kill_at(victim, kill_at_us)
            .run(move |cluster, context| {
                let table = create_kv_table(cluster, "busy");
                let mut errors = Vec::new();
                let mut k = 0;
                // Writes run through the kill and past its detection.
                while context.now_us() < kill_at_us + DETECTION.as_micros() as u64 {
                    errors.extend(insert_settled(cluster, &table, k, Some(NodeId(2))));
                    k += 1;
                }
                let values: Vec<Option<String>> =
                    (0..k).map(|k| read(cluster, &table, k).unwrap()).collect();
                (errors, values)
            });
        for (k, value) in values.iter().enumerate() {
            assert_eq!(
                value.as_deref(),
                Some(format!("value {k}").as_str()),
                "seed {seed}: key {k} ({errors:?})"
            );
        }
    }
}

/// A data node paused past the detection time (SIGSTOP, then SIGCONT)
/// while its peer is promoted and a key is overwritten there: a read sent
/// to the paused node, handled when it runs again, must never return the
/// old value (the read lease ran out, or the node has shut down), and the
/// paused node ends shut down. Two data nodes: the survivor continues
/// through the arbitrator.
#[test]
fn a_paused_node_never_serves_a_stale_read_after_its_peer_was_promoted() {
    for seed in 1..=6 {
        let (paused, survivor) = if seed % 2 == 0 {
            (NodeId(2), NodeId(3))
        } else {
            (NodeId(3), NodeId(2))
        };
        let pause_at_us = 800_000;
        let pause_us = 4_000_000;
        let (answer, overwritten) = Harness::new(seed)
            .nodes(2, 2)
            .pause_at(paused, pause_at_us, pause_us)
            .connect_options(client::ConnectOptions {
                reply_timeout: Duration::from_secs(20),
                ..client::ConnectOptions::default()
            })
            .run(move |cluster, context| {
                let table = create_kv_table(cluster, "kept");
                for k in 0..8 {
                    insert_settled(cluster, &table, k, Some(survivor));
                }
                while context.now_us() < pause_at_us + DETECTION.as_micros() as u64 {
                    context.sleep(Duration::from_millis(50));
                }
                // The survivor took over: overwrite every key there.
                let mut overwritten = true;
                for k in 0..8 {
                    let mut transaction = cluster.transaction_on_node(survivor).unwrap();
                    transaction
                        .update(&table, &[Value::UInt(k)], &[("v", Value::from("new"))])
                        .unwrap();
                    overwritten &= transaction.execute(Commit::Yes).is_ok();
                }
                // A read of each key through the paused node: queued
                // until it runs again.
                let mut transaction = cluster.transaction_on_node(paused).unwrap();
                let ops: Vec<_> = (0..8)
                    .map(|k| {
                        transaction
                            .read(&table, &[Value::UInt(k)], LockMode::CommittedRead)
                            .unwrap()
                    })
                    .collect();
                let answer = match transaction.execute(Commit::Yes) {
                    Ok(_) => Ok(ops
                        .into_iter()
                        .map(|op| {
                            transaction
                                .get(op)
                                .and_then(|row| row.get("v")?.as_str().map(String::from))
                        })
                        .collect::<Vec<_>>()),
                    Err(error) => Err(error.to_string()),
                };
                (answer, overwritten)
            });
        assert!(overwritten, "seed {seed}: the survivor took the writes");
        if let Ok(values) = &answer {
            panic!("seed {seed}: the paused node {paused} served reads after its peer was promoted: {values:?}");
        }
    }
}
