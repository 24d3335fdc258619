//! An index created on a table of real data nodes while another client
//! writes to it (docs/design/0024-online-index-changes.md), then a
//! whole-cluster restart: the index survives (the schema file holds it)
//! and is rebuilt from the restored rows on every replica. Checked
//! through the client against the rows it wrote, and by `check replicas`,
//! which compares every replica's indexes with its rows.

mod common;

use client::{Access, Commit, KeyRange, ScanOptions, Value};
use common::{ClusterOptions, TestCluster};
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LOADED: u32 = 20_000;

/// k -> n for every row, as the writers left them.
type Rows = BTreeMap<u32, i64>;

/// Inserts row `k` (or, `exists`, updates its n), retrying temporary
/// errors.
fn write(cluster: &client::Cluster, table: &Arc<client::Table>, k: u32, n: i64, exists: bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut transaction = cluster.transaction();
        let values = [
            ("k", Value::UInt(u64::from(k))),
            ("v", Value::from(format!("value {k}").as_str())),
            ("n", Value::Int(n)),
        ];
        let result = if exists {
            transaction.update(table, &[Value::UInt(u64::from(k))], &values[2..])
        } else {
            transaction.insert(table, &values)
        };
        let result = result.and_then(|_| transaction.execute(Commit::Yes));
        match result {
            Ok(_) => return,
            Err(error) if error.is_temporary() && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(error) => panic!("writing {k}: {error}"),
        }
    }
}

/// Every row through index `by_n`, in its order, as (n, k).
fn through_index(cluster: &client::Cluster) -> Vec<(i64, u32)> {
    cluster.invalidate_table("kv");
    let table = cluster.table("kv").expect("the table");
    let range = [KeyRange::all()];
    let options = ScanOptions {
        ordered: true,
        ..ScanOptions::default()
    };
    let result = cluster
        .scan(&table, Access::Index("by_n", &range), &options)
        .expect("a scan of the new index");
    result
        .rows
        .iter()
        .map(|row| {
            let n = row.get("n").and_then(Value::as_i64).expect("n");
            let k = row.get("k").and_then(Value::as_u64).expect("k") as u32;
            (n, k)
        })
        .collect()
}

fn expected(rows: &Rows) -> Vec<(i64, u32)> {
    let mut expected: Vec<(i64, u32)> = rows.iter().map(|(&k, &n)| (n, k)).collect();
    expected.sort_unstable();
    expected
}

fn assert_index_equals(cluster: &client::Cluster, rows: &Rows, when: &str) {
    let scanned = through_index(cluster);
    assert!(
        scanned.windows(2).all(|pair| pair[0].0 <= pair[1].0),
        "{when}: rows in n's order"
    );
    let mut sorted = scanned;
    sorted.sort_unstable();
    assert_eq!(sorted, expected(rows), "{when}: the index holds every row");
}

fn check_replicas(cluster: &TestCluster, when: &str) {
    let check = cluster.mgm_json("check replicas");
    let check: Json = serde_json::from_str(check.stdout.trim())
        .unwrap_or_else(|error| panic!("check replicas printed no JSON ({error})"));
    assert_eq!(check["mismatches"], 0, "{when}: {check}");
}

#[test]
fn an_index_created_under_writes_survives_a_whole_cluster_restart() {
    let mut cluster = TestCluster::start(ClusterOptions {
        name: "online_index",
        data_memory: "64M",
        data_nodes: 2,
        replicas: 2,
        ..ClusterOptions::default()
    });
    let client = Arc::new(cluster.connect());
    let table = common::create_table(&client, &common::kv_definition());
    let mut rows = Rows::new();
    for k in 0..LOADED {
        let n = i64::from(k % 997) - 500;
        write(&client, &table, k, n, false);
        rows.insert(k, n);
    }
    // A writer changes n (the indexed column) and inserts rows from
    // before the create until after it (whether writes land during the
    // build itself is up to the machine; the ldm's block tests and the
    // simulator interleave them step by step).
    let building = Arc::new(AtomicBool::new(true));
    let progress = Arc::new(AtomicU32::new(0));
    let writer = {
        let (client, table) = (client.clone(), table.clone());
        let (building, progress) = (building.clone(), progress.clone());
        std::thread::spawn(move || {
            let mut written = Rows::new();
            let mut step: u32 = 0;
            let mut after_create = 0;
            while after_create < 200 {
                let k = step.wrapping_mul(7_919) % (LOADED + 2_000);
                let n = i64::from(step % 101);
                let exists = k < LOADED || written.contains_key(&k);
                write(&client, &table, k, n, exists);
                written.insert(k, n);
                step += 1;
                progress.store(step, Ordering::Relaxed);
                if !building.load(Ordering::Relaxed) {
                    after_create += 1;
                }
            }
            written
        })
    };
    while progress.load(Ordering::Relaxed) < 50 {
        std::thread::sleep(Duration::from_millis(1));
    }
    client
        .create_index("kv", "by_n", &["n"])
        .expect("the index is created while rows are written");
    building.store(false, Ordering::Relaxed);
    rows.extend(writer.join().expect("the writer"));
    assert_index_equals(&client, &rows, "after the create");
    check_replicas(&cluster, "after the create");

    // Durable, then every data node killed and restarted from disk.
    let last = {
        let mut transaction = client.transaction();
        transaction
            .insert(
                &table,
                &[
                    ("k", Value::UInt(u64::from(LOADED + 5_000))),
                    ("v", Value::from("last")),
                    ("n", Value::Int(-1)),
                ],
            )
            .unwrap();
        let outcome = transaction.execute(Commit::Yes).expect("the last write");
        outcome.gci.expect("a write has a GCI")
    };
    rows.insert(LOADED + 5_000, -1);
    client.wait_durable(last).expect("durable");
    drop(table);
    drop(client);
    cluster.kill_data_nodes();
    cluster.restart_data_nodes();
    let client = cluster.connect();
    let table = client.table("kv").expect("the table after the restart");
    assert!(
        table.def().index("by_n").is_some(),
        "the index is in the restored schema: {:?}",
        table.def().indexes
    );
    assert_index_equals(&client, &rows, "after the restart");
    check_replicas(&cluster, "after the restart");
    // And it is kept from here on.
    client
        .drop_index("kv", "by_n")
        .expect("dropped after the restart");
    client
        .create_index("kv", "by_n", &["n"])
        .expect("created again");
    assert_index_equals(&client, &rows, "created again");
}
