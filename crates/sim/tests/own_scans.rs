//! A transaction's scans see its own writes (docs/design/0035) while a
//! data node dies (`sim::harness`, three nodes, three replicas).
//!
//! Each transaction runs on a survivor's tc. It writes a few keys of a
//! loaded table: it inserts new keys, and updates or deletes loaded ones,
//! sometimes one key twice. It then scans the table from inside (a full
//! scan, or a primary-key range in either direction), compares what it
//! sees with the loaded rows plus its own writes, and rolls back. A scan
//! that names no transaction must see the loaded rows alone. Transactions
//! caught by the failure fail with temporary errors and are not checked.
//! At the end the table holds the loaded rows, nothing a rolled-back
//! transaction wrote, and the replicas agree.

use client::{Access, ClientError, Commit, KeyRange, ScanOptions, Value};
use signal::NodeId;
use sim::harness::{create_kv_table, Harness};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::time::Duration;
use stdx::mix::XorShift;

/// Failure detection and the take-over after it, with room to spare.
const DETECTION: Duration = Duration::from_millis(2_500);
/// Keys loaded (0..LOADED), and keys written (0..KEYS).
const LOADED: u64 = 20;
const KEYS: u64 = 32;

/// The rows a scan returned, as (k, v).
fn rows_of(result: &client::ScanResult) -> Vec<(u64, Option<String>)> {
    result
        .rows
        .iter()
        .map(|row| {
            let k = row.values()[0].as_u64().expect("k");
            let v = row.get("v").and_then(|v| v.as_str().map(String::from));
            (k, v)
        })
        .collect()
}

#[test]
fn own_scans_see_their_writes_while_a_node_dies() {
    for seed in 1..=4 {
        let victim = NodeId(3 + (seed % 2) as u16);
        let kill_at_us = 900_000 + seed * 7_919;
        let (checked, failed) = Harness::new(seed)
            .nodes(3, 3)
            .kill_at(victim, kill_at_us)
            .run(move |cluster, context| {
                let table = create_kv_table(cluster, "own");
                let survivor = NodeId(2);
                let mut loaded: BTreeMap<u64, Option<String>> = BTreeMap::new();
                let mut transaction = cluster.transaction_on_node(survivor).unwrap();
                for k in 0..LOADED {
                    let v = format!("loaded {k}");
                    transaction
                        .insert(
                            &table,
                            &[("k", Value::UInt(k)), ("v", Value::from(v.as_str()))],
                        )
                        .unwrap();
                    loaded.insert(k, Some(v));
                }
                transaction.execute(Commit::Yes).expect("the load commits");

                let mut random = XorShift::new(seed);
                let (mut checked, mut failed) = (0u32, Vec::<String>::new());
                let end_us = kill_at_us + 2 * DETECTION.as_micros() as u64;
                let mut round = 0u64;
                while context.now_us() < end_us {
                    round += 1;
                    let mut own = loaded.clone();
                    let mut transaction = cluster.transaction_on_node(survivor).unwrap();
                    let attempt = (|| -> Result<(), ClientError> {
                        for _ in 0..1 + random.below(4) {
                            let k = random.below(KEYS);
                            let key = [Value::UInt(k)];
                            let v = format!("round {round}");
                            match own.contains_key(&k) {
                                false => {
                                    transaction.insert(
                                        &table,
                                        &[("k", Value::UInt(k)), ("v", Value::from(v.as_str()))],
                                    )?;
                                    own.insert(k, Some(v));
                                }
                                true if random.below(3) == 0 => {
                                    transaction.delete(&table, &key)?;
                                    own.remove(&k);
                                }
                                true => {
                                    transaction.update(
                                        &table,
                                        &key,
                                        &[("v", Value::from(v.as_str()))],
                                    )?;
                                    own.insert(k, Some(v));
                                }
                            }
                        }
                        let low = random.below(KEYS);
                        let high = low + random.below(KEYS);
                        let range = [KeyRange {
                            low: Bound::Included(vec![Value::UInt(low)]),
                            high: Bound::Excluded(vec![Value::UInt(high)]),
                        }];
                        let whole = random.below(3) == 0;
                        let options = ScanOptions {
                            descending: !whole && random.below(2) == 0,
                            batch_rows: 1 + random.below(4) as u32,
                            ..ScanOptions::default()
                        };
                        let access = match whole {
                            true => Access::Table,
                            false => Access::PrimaryKey(&range),
                        };
                        let in_range = |k: u64| whole || (low..high).contains(&k);
                        let mut expected: Vec<(u64, Option<String>)> = own
                            .iter()
                            .filter(|(k, _)| in_range(**k))
                            .map(|(k, v)| (*k, v.clone()))
                            .collect();
                        let mut committed: Vec<(u64, Option<String>)> = loaded
                            .iter()
                            .filter(|(k, _)| in_range(**k))
                            .map(|(k, v)| (*k, v.clone()))
                            .collect();
                        if options.descending {
                            expected.reverse();
                            committed.reverse();
                        }
                        let mut seen = rows_of(&transaction.scan(&table, access, &options)?);
                        let mut others = rows_of(&cluster.scan(&table, access, &options)?);
                        if whole {
                            // A full scan has no order.
                            seen.sort();
                            others.sort();
                        }
                        assert_eq!(seen, expected, "seed {seed} round {round}: its own scan");
                        assert_eq!(others, committed, "seed {seed} round {round}: another's");
                        Ok(())
                    })();
                    match attempt {
                        Ok(()) => checked += 1,
                        Err(error) if error.is_temporary() => failed.push(error.to_string()),
                        Err(error) => panic!("seed {seed} round {round}: {error}"),
                    }
                    // Nothing it wrote may stay.
                    let _ = transaction.rollback();
                }
                // What is left is what was loaded, on every replica.
                let all = cluster
                    .scan(&table, Access::Table, &ScanOptions::default())
                    .expect("the last scan");
                let mut left = rows_of(&all);
                left.sort();
                let loaded: Vec<(u64, Option<String>)> = loaded.into_iter().collect();
                assert_eq!(left, loaded, "seed {seed}: rolled-back writes stayed");
                let report = cluster.check_replicas().expect("the replica check");
                assert!(report.is_consistent(), "seed {seed}: {report}");
                (checked, failed)
            });
        assert!(
            checked > 20,
            "seed {seed}: only {checked} transactions checked ({failed:?})"
        );
    }
}
