//! Online index changes (docs/design/0024-online-index-changes.md) through
//! the real client on 2 nodes with 2 replicas (`sim::harness`).
//!
//! A writer loads a table, then inserts, updates (moving the indexed
//! columns) and deletes rows while a second client creates two indexes,
//! drops one and creates it again. The writer keeps a model of the rows;
//! when the changes are done and its writes have gone on a while, every
//! index, scanned through the client in order, holds exactly the model's
//! rows in the index's order, a scan of the dropped index is refused with
//! UnknownIndex, every ldm's indexes equal its rows (`check_ordered`),
//! every replica holds the same rows, and every ldm and dict is at the
//! same index revision.

use client::{Access, ClientError, Cluster, Commit, ErrorCode, ScanOptions, Table, Value};
use sim::harness::Harness;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use stdx::mix::XorShift;

const LOADED: u64 = 3_000;
const KEYS: u64 = 3_500;

/// k -> (a, s).
type Model = BTreeMap<u64, (i64, Option<String>)>;

fn definition() -> client::TableDef {
    sim::harness::table_definition(
        "t",
        &[
            ("k", client::ColumnType::BigInt { unsigned: true }, false),
            ("a", client::ColumnType::BigInt { unsigned: false }, false),
            ("s", client::ColumnType::VarChar(8), true),
        ],
    )
}

fn marker(cluster: &Cluster, name: &str) {
    let mut definition = definition();
    definition.name = name.into();
    cluster.create_table(&definition).expect("a marker table");
}

fn exists(cluster: &Cluster, name: &str) -> bool {
    cluster.invalidate_table(name);
    cluster.table(name).is_ok()
}

/// One write of `k`, retried while temporary; the model follows what
/// committed.
fn write(cluster: &Cluster, table: &Arc<Table>, model: &mut Model, random: &mut XorShift, k: u64) {
    let a = random.below(50) as i64 - 25;
    let s = (random.below(4) != 0).then(|| format!("s{}", random.below(9)));
    let delete = model.contains_key(&k) && random.below(4) == 0;
    for _ in 0..100 {
        let mut transaction = cluster.transaction();
        let values = [
            ("k", Value::UInt(k)),
            ("a", Value::Int(a)),
            ("s", s.as_deref().map_or(Value::Null, Value::from)),
        ];
        let result = if delete {
            transaction.delete(table, &[Value::UInt(k)])
        } else if model.contains_key(&k) {
            transaction.update(table, &[Value::UInt(k)], &values[1..])
        } else {
            transaction.insert(table, &values)
        };
        match result.and_then(|_| transaction.execute(Commit::Yes)) {
            Ok(_) => {
                if delete {
                    model.remove(&k);
                } else {
                    model.insert(k, (a, s));
                }
                return;
            }
            Err(error) if error.is_temporary() => continue,
            Err(error) => panic!("writing {k}: {error:?}"),
        }
    }
    panic!("writing {k}: still refused after 100 tries");
}

/// The rows through index `name`, in order: (k, a, s).
fn through_index(
    cluster: &Cluster,
    name: &str,
) -> Result<Vec<(u64, i64, Option<String>)>, ClientError> {
    cluster.invalidate_table("t");
    let table = cluster.table("t")?;
    let options = ScanOptions {
        ordered: true,
        batch_rows: 7,
        ..ScanOptions::default()
    };
    let range = [client::KeyRange::all()];
    let result = cluster.scan(&table, Access::Index(name, &range), &options)?;
    Ok(result
        .rows
        .iter()
        .map(|row| {
            (
                row.get("k").and_then(Value::as_u64).unwrap(),
                row.get("a").and_then(Value::as_i64).unwrap(),
                row.get("s").and_then(Value::as_str).map(str::to_owned),
            )
        })
        .collect())
}

#[test]
fn indexes_created_and_dropped_under_writes_equal_the_rows() {
    let (results, _, checked) = Harness::new(11).nodes(2, 2).run_clients_then(
        2,
        |index, cluster, context| {
            if index == 1 {
                // The schema changes, once the rows are there.
                while !exists(cluster, "loaded") {
                    context.sleep(Duration::from_millis(5));
                }
                cluster
                    .create_index("t", "by_a", &["a"])
                    .expect("create by_a");
                cluster
                    .create_index("t", "by_s_a", &["s", "a"])
                    .expect("create by_s_a");
                assert_eq!(
                    cluster
                        .create_index("t", "by_a", &["s"])
                        .unwrap_err()
                        .code(),
                    Some(ErrorCode::IndexExists)
                );
                cluster.drop_index("t", "by_a").expect("drop by_a");
                cluster
                    .create_index("t", "by_a_again", &["a"])
                    .expect("create again");
                marker(cluster, "indexed");
                return 0;
            }
            let table = {
                cluster.create_table(&definition()).expect("create t");
                cluster.table("t").unwrap()
            };
            let mut random = XorShift::new(3);
            let mut model = Model::new();
            for k in 0..LOADED {
                write(cluster, &table, &mut model, &mut random, k);
            }
            marker(cluster, "loaded");
            let mut writes = 0;
            let mut after = None;
            while after.is_none_or(|after| writes < after + 150) {
                let k = random.below(KEYS);
                write(cluster, &table, &mut model, &mut random, k);
                writes += 1;
                if after.is_none() && writes % 20 == 0 && exists(cluster, "indexed") {
                    after = Some(writes);
                }
            }
            assert!(
                after.is_some_and(|after| after > 20),
                "the changes ran while rows were written ({after:?} writes before)"
            );
            // The definition this client holds predates every index: a
            // scan naming one fetches it anew.
            let all = [client::KeyRange::all()];
            let counted = cluster
                .count(
                    &table,
                    Access::Index("by_s_a", &all),
                    &ScanOptions::default(),
                )
                .expect("an index another client created is found");
            assert_eq!(counted, model.len() as u64);
            // Every index holds the model's rows in its order.
            let mut by_a: Vec<(i64, u64)> = model.iter().map(|(&k, (a, _))| (*a, k)).collect();
            by_a.sort_unstable();
            let scanned = through_index(cluster, "by_a_again").expect("scan by_a_again");
            let mut keys: Vec<(i64, u64)> = scanned.iter().map(|(k, a, _)| (*a, *k)).collect();
            assert!(
                keys.windows(2).all(|pair| pair[0].0 <= pair[1].0),
                "in a's order"
            );
            keys.sort_unstable();
            assert_eq!(keys, by_a, "by_a_again holds the rows");
            let scanned = through_index(cluster, "by_s_a").expect("scan by_s_a");
            let order: Vec<(Option<String>, i64)> =
                scanned.iter().map(|(_, a, s)| (s.clone(), *a)).collect();
            assert!(
                order.windows(2).all(|pair| pair[0] <= pair[1]),
                "in (s, a) order"
            );
            let mut rows: Vec<(u64, i64, Option<String>)> = scanned;
            rows.sort_unstable();
            let expected: Vec<(u64, i64, Option<String>)> = model
                .iter()
                .map(|(&k, (a, s))| (k, *a, s.clone()))
                .collect();
            assert_eq!(rows, expected, "by_s_a holds the rows with their values");
            // The dropped index is gone for this client too.
            let error = through_index(cluster, "by_a").unwrap_err();
            assert_eq!(error.code(), Some(ErrorCode::UnknownIndex), "{error}");
            model.len()
        },
        |simulation| {
            let mut rows = 0;
            for ldm in simulation.ldms() {
                rows += ldm
                    .check_ordered_indexes()
                    .expect("every index equals the rows");
            }
            let table = simulation.dicts().next().unwrap().table_versions()[0].0;
            simulation.replicas_agree(table).expect("replicas agree");
            let nodes = [signal::NodeId(2), signal::NodeId(3)];
            simulation.schema_agreement(&nodes).expect("one schema");
            rows
        },
    );
    assert!(results[0] > 1_000, "rows left: {}", results[0]);
    // Two replicas of every row, in the primary key's index.
    assert!(
        checked >= 2 * results[0] as u64,
        "{checked} entries checked"
    );
}
