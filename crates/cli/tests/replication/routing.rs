//! Key-hint routing: a transaction started with a key hint runs on a tc
//! of the node holding that key's primary.

use crate::common::{threads_of_node, TestCluster};
use client::{Cluster, Commit, Table, Value};
use std::sync::Arc;

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
/// show it (docs/design/data-and-routing.md §7).
pub fn hinted_transactions_run_on_the_primarys_tc(
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
