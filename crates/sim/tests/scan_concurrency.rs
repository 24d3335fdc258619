//! Scans while another client changes the rows they scan
//! (docs/design/0022-scan-programs.md), through the real client on 2
//! nodes with 2 replicas (`sim::harness`).
//!
//! A writer inserts a stable set of keys it never touches again, then
//! churns a second set (inserts, updates and deletes) while a scanner runs
//! full scans and primary-key ranges, in small batches, with and without a
//! filter, merged and not, and stops some scans early. A committed-read
//! scan must never return a row twice, never miss a stable row, and
//! return only rows that were there at some point. Afterwards a scan of a
//! dropped table is refused with a clear error and the nodes serve the
//! next scan. And a scan whose data node dies ends with a temporary error
//! (the client then routes by a map fetched anew), after which the
//! survivor serves every row.

use client::{
    Access, ClientError, Cluster, Commit, CompareOp, ErrorCode, Filter, KeyRange, ScanOptions,
    Value,
};
use sim::harness::{create_kv_table, insert_settled, Harness};
use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

/// Stable keys are even, below this; churned keys are odd, below it.
const KEYS: u64 = 240;
/// Churn operations the writer runs.
const CHURN: u64 = 600;

fn key(row: &client::Row) -> u64 {
    row.get("k").and_then(Value::as_u64).expect("rows carry k")
}

/// Waits until the writer has created the table and loaded the stable
/// keys (it then creates a marker table).
fn wait_for_table(cluster: &Cluster, context: &sim::hosted::HostedContext) -> Arc<client::Table> {
    for _ in 0..2_000 {
        if cluster.table("loaded").is_ok() {
            return cluster.table("t").expect("the scanned table");
        }
        context.sleep(Duration::from_millis(5));
    }
    panic!("the writer never loaded the table");
}

#[test]
fn committed_read_scans_see_stable_rows_once_while_others_churn() {
    let results = Harness::new(7)
        .nodes(2, 2)
        .run_clients(2, |index, cluster, context| {
            if index == 0 {
                // The writer.
                let table = create_kv_table(cluster, "t");
                for k in (0..KEYS).step_by(2) {
                    assert!(insert_settled(cluster, &table, k), "stable key {k}");
                }
                create_kv_table(cluster, "loaded");
                let mut present = BTreeSet::new();
                for step in 0..CHURN {
                    let k = (step * 37 % KEYS) | 1;
                    let mut transaction = cluster.transaction();
                    let (result, change): (_, fn(&mut BTreeSet<u64>, u64)) =
                        if !present.contains(&k) {
                            let row = [("k", Value::UInt(k)), ("v", Value::from("churned"))];
                            (transaction.insert(&table, &row), |present, k| {
                                present.insert(k);
                            })
                        } else if step % 3 == 0 {
                            let v = Value::from(format!("updated {step}").as_str());
                            (
                                transaction.update(&table, &[Value::UInt(k)], &[("v", v)]),
                                |_, _| {},
                            )
                        } else {
                            (
                                transaction.delete(&table, &[Value::UInt(k)]),
                                |present, k| {
                                    present.remove(&k);
                                },
                            )
                        };
                    match result.and_then(|_| transaction.execute(Commit::Yes)) {
                        Ok(_) => change(&mut present, k),
                        Err(error) if error.is_temporary() => {}
                        Err(error) => panic!("churn step {step}: {error:?}"),
                    }
                }
                create_kv_table(cluster, "churned");
                return 0;
            }
            // The scanner.
            let table = wait_for_table(cluster, context);
            let stable: BTreeSet<u64> = (0..KEYS).step_by(2).collect();
            let mut scans = 0;
            // How many churned rows each scan saw: they must differ, or the
            // scans did not run while the writer churned.
            let mut churned_seen = BTreeSet::new();
            for round in 0..60u64 {
                let filtered = round % 2 == 1;
                let options = ScanOptions {
                    batch_rows: 1 + (round % 4) as u32,
                    ordered: round % 3 != 0,
                    // v <> 'churned': drops the churned rows not updated.
                    filter: filtered.then(|| {
                        Filter::Or(vec![
                            Filter::compare("v", CompareOp::NotEqual, Value::from("churned")),
                            Filter::IsNull("v".into()),
                        ])
                    }),
                    ..ScanOptions::default()
                };
                let ranges = [KeyRange {
                    low: Bound::Included(vec![Value::UInt(round % 10)]),
                    high: Bound::Unbounded,
                }];
                let access = if round % 2 == 0 {
                    Access::Table
                } else {
                    Access::PrimaryKey(&ranges)
                };
                let low = if round % 2 == 0 { 0 } else { round % 10 };
                if round % 5 == 4 {
                    // Stop early: read a few rows, drop the cursor.
                    let mut cursor = cluster.scan_cursor(&table, access, &options).unwrap();
                    for row in cursor.by_ref().take(7) {
                        row.expect("a row");
                    }
                    drop(cursor);
                    continue;
                }
                let result = match cluster.scan(&table, access, &options) {
                    Ok(result) => result,
                    Err(error) if error.is_temporary() => continue,
                    Err(error) => panic!("round {round}: {error:?}"),
                };
                let keys: Vec<u64> = result.rows.iter().map(key).collect();
                let unique: BTreeSet<u64> = keys.iter().copied().collect();
                assert_eq!(
                    unique.len(),
                    keys.len(),
                    "round {round}: a row twice: {keys:?}"
                );
                for k in stable.range(low..) {
                    assert!(unique.contains(k), "round {round}: stable row {k} missed");
                }
                for k in &unique {
                    assert!(
                        *k < KEYS && *k >= low,
                        "round {round}: row {k} never written"
                    );
                    if filtered && k % 2 == 1 {
                        let row = result.rows.iter().find(|row| key(row) == *k).unwrap();
                        assert_ne!(row.get("v"), Some(&Value::from("churned")));
                    }
                }
                churned_seen.insert(unique.iter().filter(|k| *k % 2 == 1).count());
                if options.ordered && round % 2 == 1 {
                    assert!(keys.windows(2).all(|w| w[0] < w[1]), "round {round}: order");
                }
                scans += 1;
            }
            assert!(
                churned_seen.len() > 3,
                "the scans saw the churn: {churned_seen:?}"
            );
            // A scan of a table dropped since its definition was fetched,
            // once the writer is done with it.
            while cluster.table("churned").is_err() {
                context.sleep(Duration::from_millis(5));
            }
            let stale = cluster.table("t").expect("t");
            cluster.drop_table("t").expect("drop");
            match cluster.scan(&stale, Access::Table, &ScanOptions::default()) {
                Err(ClientError::Schema { code, .. }) => assert!(
                    matches!(
                        code,
                        ErrorCode::UnknownTable | ErrorCode::SchemaVersionMismatch
                    ),
                    "{code:?}"
                ),
                other => panic!("a scan of a dropped table: {other:?}"),
            }
            // The nodes serve the next scan.
            let again = create_kv_table(cluster, "after");
            assert!(insert_settled(cluster, &again, 5));
            let rows = cluster
                .scan(&again, Access::Table, &ScanOptions::default())
                .expect("a scan after the refusal")
                .rows;
            assert_eq!(rows.len(), 1);
            scans
        });
    assert!(results[1] >= 30, "scans that completed: {}", results[1]);
}

/// A data node dies while scans read from it: the scan in flight ends
/// with a temporary error (nothing of it is held anywhere: scans are
/// stateless at the ldm), and once the failure is handled a scan reads
/// every row from the survivor.
#[test]
fn a_scan_whose_data_node_dies_ends_with_a_temporary_error() {
    let (failures, rows) = Harness::new(9)
        .nodes(2, 2)
        .kill_at(signal::NodeId(3), 1_500_000)
        .run(|cluster, context| {
            let table = create_kv_table(cluster, "t");
            for k in 0..KEYS {
                assert!(insert_settled(cluster, &table, k), "key {k}");
            }
            let options = ScanOptions {
                batch_rows: 1,
                ..ScanOptions::default()
            };
            let (mut failures, mut after_failures) = (0, 0);
            while context.now_us() < 4_000_000 {
                match cluster.scan(&table, Access::Table, &options) {
                    Ok(result) => {
                        assert_eq!(result.rows.len() as u64, KEYS, "a whole scan");
                        if failures > 0 {
                            after_failures += 1;
                        }
                    }
                    Err(error) => {
                        assert!(
                            error.is_temporary(),
                            "a scan cut by a node's death: {error:?}"
                        );
                        failures += 1;
                        // Retried at once: before the failure is agreed,
                        // dict still hands out the old map.
                        context.sleep(Duration::from_millis(1));
                    }
                }
            }
            // Scans went on through the survivor, without the test asking
            // for the table again.
            assert!(after_failures > 0, "no scan succeeded after the failover");
            context.sleep(Duration::from_secs(2));
            let rows = loop {
                match cluster.scan(&table, Access::Table, &ScanOptions::default()) {
                    Ok(result) => break result.rows.len() as u64,
                    Err(error) if error.is_temporary() => context.sleep(Duration::from_millis(50)),
                    Err(error) => panic!("a scan after the failure: {error:?}"),
                }
            };
            (failures, rows)
        });
    assert!(failures > 0, "a scan was cut by the node's death");
    assert_eq!(rows, KEYS, "the survivor serves every row");
}
