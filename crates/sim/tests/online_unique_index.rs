//! A unique index created on a live table
//! (docs/design/0026-unique-indexes.md, "Creating one on a live table")
//! through the real client on 2 nodes with 2 replicas (`sim::harness`).
//!
//! - Under writes: a writer moves values between rows (each value held by
//!   one row at a time, some NULL) while another client creates the index;
//!   afterwards the replica checker finds one hidden row for each row
//!   with a value and nothing else, every row is found through the index,
//!   and a repeated value is refused naming the index.
//! - On rows that repeat a value: the create fails with DuplicateKey and
//!   leaves the table as it was (no index, no hidden table anywhere); once
//!   the repeat is gone, it succeeds.
//! - The master dies (crashes, or stalls past detection) once the build
//!   is asked for: no dict held the index, so the survivors undo it
//!   everywhere, and it can be created again.

use client::{ClientError, Cluster, Commit, ErrorCode, LockMode, Table, Value};
use kernel::faults::{FaultAction, FaultPoint};
use signal::NodeId;
use sim::harness::Harness;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use stdx::mix::XorShift;

const LOADED: u64 = 2_000;
const KEYS: u64 = 2_400;

/// k -> v (`None`: NULL).
type Model = BTreeMap<u64, Option<i64>>;

fn definition() -> client::TableDef {
    sim::harness::table_definition(
        "t",
        &[
            ("k", client::ColumnType::BigInt { unsigned: true }, false),
            ("v", client::ColumnType::BigInt { unsigned: false }, true),
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

/// Writes k's value `v` (or deletes k), retried while temporary; the model
/// follows what committed.
fn write(cluster: &Cluster, table: &Arc<Table>, model: &mut Model, k: u64, v: Option<Option<i64>>) {
    for _ in 0..100 {
        let mut transaction = cluster.transaction();
        let result = match v {
            None => transaction.delete(table, &[Value::UInt(k)]),
            Some(v) => {
                let v = v.map_or(Value::Null, Value::Int);
                transaction.write(table, &[("k", Value::UInt(k)), ("v", v)])
            }
        };
        match result.and_then(|_| transaction.execute(Commit::Yes)) {
            Ok(_) => {
                match v {
                    None => model.remove(&k),
                    Some(v) => model.insert(k, v),
                };
                return;
            }
            Err(error) if v.is_none() && error.code() == Some(ErrorCode::NoSuchRow) => {
                model.remove(&k);
                return;
            }
            // A write (an upsert) or a delete again settles an outcome
            // a lost connection left unknown.
            Err(error)
                if error.is_temporary() || matches!(error, ClientError::OutcomeUnknown { .. }) =>
            {
                continue
            }
            Err(error) => panic!("writing {k}: {error:?}"),
        }
    }
    panic!("writing {k}: still refused after 100 tries");
}

/// A value no other row holds: rounds apart by the key space.
fn fresh_value(k: u64, round: u64) -> Option<i64> {
    (!k.is_multiple_of(10)).then_some((k + KEYS * round) as i64)
}

/// The index holds the model: the replica checker's count of rows and
/// hidden rows, and each row through the index.
fn assert_index_holds(cluster: &Cluster, model: &Model) {
    let report = cluster.check_replicas().expect("the replica check");
    assert!(report.is_consistent(), "{report}");
    let values = model.values().flatten().count();
    assert_eq!(
        report.rows_checked,
        (model.len() + values) as u64,
        "the rows and one hidden row for each value: {report}"
    );
    cluster.invalidate_table("t");
    let table = cluster.table("t").expect("the table");
    for (&k, v) in model.iter().step_by(37) {
        let Some(v) = v else { continue };
        let mut transaction = cluster.transaction();
        let found = transaction
            .read_by_unique_index(&table, "by_v", &[Value::Int(*v)], LockMode::CommittedRead)
            .expect("a lookup");
        let found = found.and_then(|row| row.get("k").and_then(Value::as_u64));
        assert_eq!(found, Some(k), "v = {v}");
        transaction.execute(Commit::Yes).expect("its commit");
    }
}

#[test]
fn a_unique_index_created_under_writes_holds_every_row() {
    let (results, _, agreed) = Harness::new(61).nodes(2, 2).run_clients_then(
        2,
        |client, cluster, context| {
            if client == 1 {
                while !exists(cluster, "loaded") {
                    context.sleep(Duration::from_millis(5));
                }
                cluster
                    .create_unique_index("t", "by_v", &["v"])
                    .expect("create by_v");
                marker(cluster, "indexed");
                return 0;
            }
            cluster.create_table(&definition()).expect("create t");
            let table = cluster.table("t").unwrap();
            let mut model = Model::new();
            for k in 0..LOADED {
                write(cluster, &table, &mut model, k, Some(fresh_value(k, 0)));
            }
            marker(cluster, "loaded");
            let mut random = XorShift::new(5);
            let (mut writes, mut after) = (0u64, None);
            while after.is_none_or(|after| writes < after + 200) {
                let k = random.below(KEYS);
                let v = match random.below(6) {
                    0 => None,
                    _ => Some(fresh_value(k, 1 + writes)),
                };
                write(cluster, &table, &mut model, k, v);
                writes += 1;
                if after.is_none() && writes % 20 == 0 && exists(cluster, "indexed") {
                    after = Some(writes);
                }
            }
            assert!(
                after.is_some_and(|after| after > 20),
                "the create ran while rows were written ({after:?} writes before)"
            );
            assert_index_holds(cluster, &model);
            // A value another row holds is refused, naming the index.
            cluster.invalidate_table("t");
            let table = cluster.table("t").unwrap();
            let (&holder, &taken) = model
                .iter()
                .find(|(_, v)| v.is_some())
                .expect("a row with a value");
            let other = (0..KEYS).find(|k| *k != holder).unwrap();
            let mut transaction = cluster.transaction();
            transaction
                .write(
                    &table,
                    &[("k", Value::UInt(other)), ("v", Value::Int(taken.unwrap()))],
                )
                .unwrap();
            match transaction.execute(Commit::Yes) {
                Err(ClientError::DuplicateKey {
                    index: Some(index),
                    entry,
                    ..
                }) => {
                    assert_eq!(index, "by_v");
                    assert_eq!(entry, vec![Value::Int(taken.unwrap())]);
                }
                other => panic!("a repeated value: {other:?}"),
            }
            writes
        },
        |simulation| simulation.schema_agreement(&[NodeId(2), NodeId(3)]),
    );
    eprintln!("{} writes", results[0]);
    agreed.expect("every block holds the index's revision and hidden table");
}

#[test]
fn a_unique_index_on_repeated_values_is_refused_and_leaves_the_table_as_it_was() {
    let (_, _, agreed) = Harness::new(63).nodes(2, 2).run_then(
        |cluster, _| {
            cluster.create_table(&definition()).expect("create t");
            let table = cluster.table("t").unwrap();
            let mut model = Model::new();
            for k in 0..500 {
                write(cluster, &table, &mut model, k, Some(fresh_value(k, 0)));
            }
            // Two rows far apart (other partitions, other batches) repeat
            // a value.
            write(cluster, &table, &mut model, 499, Some(Some(7)));
            let refused = cluster.create_unique_index("t", "by_v", &["v"]);
            assert_eq!(
                refused.as_ref().err().and_then(ClientError::code),
                Some(ErrorCode::DuplicateKey),
                "{refused:?}"
            );
            cluster.invalidate_table("t");
            let table = cluster.table("t").unwrap();
            assert!(table.def().indexes.is_empty(), "the table is as it was");
            // Repeats are still written; check replicas finds no hidden
            // rows.
            write(cluster, &table, &mut model, 498, Some(Some(7)));
            let report = cluster.check_replicas().expect("the replica check");
            assert!(report.is_consistent(), "{report}");
            assert_eq!(report.rows_checked, model.len() as u64, "{report}");
            // Without the repeats it is created.
            write(cluster, &table, &mut model, 498, Some(None));
            write(cluster, &table, &mut model, 499, Some(None));
            cluster
                .create_unique_index("t", "by_v", &["v"])
                .expect("created once nothing repeats");
            assert_index_holds(cluster, &model);
        },
        |simulation| simulation.schema_agreement(&[NodeId(2), NodeId(3)]),
    );
    agreed.expect("every block agrees after the refusal and the create");
}

/// The president (node 2) dies, or stalls past detection, once it asked
/// its tc for the build: the survivor undoes the index everywhere.
#[test]
fn a_unique_index_build_the_master_died_in_is_undone_everywhere() {
    for (seed, action) in [
        (71, FaultAction::Crash),
        (72, FaultAction::Delay { ms: 3_000 }),
    ] {
        let point = FaultPoint::UniqueIndexAfterBuildRequest;
        let (created, fired, agreed) = Harness::new(seed)
            .nodes(2, 2)
            .fault_with(NodeId(2), point, action)
            .run_then(
                |cluster, context| {
                    cluster.create_table(&definition()).expect("create t");
                    let table = cluster.table("t").unwrap();
                    let mut model = Model::new();
                    for k in 0..300 {
                        write(cluster, &table, &mut model, k, Some(fresh_value(k, 0)));
                    }
                    let created = cluster.create_unique_index("t", "by_v", &["v"]);
                    context.sleep(Duration::from_millis(2_500));
                    cluster.invalidate_table("t");
                    let table = cluster.table("t").expect("the table after the take-over");
                    let stands = table.def().index("by_v").is_some();
                    assert!(!stands, "no dict held the index: {created:?}");
                    // Writes go on through the survivor, repeats allowed
                    // (no row holds a negative value).
                    write(cluster, &table, &mut model, 5, Some(Some(-1)));
                    write(cluster, &table, &mut model, 6, Some(Some(-1)));
                    write(cluster, &table, &mut model, 6, Some(Some(-2)));
                    cluster
                        .create_unique_index("t", "by_v", &["v"])
                        .expect("created again after the take-over");
                    created.is_ok()
                },
                |simulation| simulation.schema_agreement(&[NodeId(3)]),
            );
        assert_eq!(fired, [(NodeId(2), point)], "the point was reached");
        assert!(!created, "the first create was not confirmed");
        agreed.unwrap_or_else(|disagreement| panic!("{action}: {disagreement}"));
    }
}

/// A data node that is not the master's (node 3) dies while the build
/// walks, and a writer goes on: the walk waits for the failure to be
/// handled, starts again, and the index holds every row.
#[test]
fn a_unique_index_built_while_a_data_node_dies_holds_every_row() {
    const ROWS: u64 = 20_000;
    // A value no other row holds (rounds apart by the rows).
    let fresh_value =
        |k: u64, round: u64| (!k.is_multiple_of(10)).then_some((k + ROWS * round) as i64);
    let restarts = |simulation: &sim::Simulation| -> u64 {
        let counters = simulation.tcs().map(|tc| tc.counters());
        counters
            .map(|counters| counters.unique_build_restarts)
            .sum()
    };
    let (results, _, restarts) = Harness::new(81)
        .nodes(2, 2)
        .kill_at(NodeId(3), KILL_AT_US)
        .run_clients_then(
            2,
            move |client, cluster, context| {
                if client == 1 {
                    while !exists(cluster, "loaded") {
                        context.sleep(Duration::from_millis(5));
                    }
                    let started = context.now_us();
                    loop {
                        match cluster.create_unique_index("t", "by_v", &["v"]) {
                            Ok(()) => break,
                            Err(error) if error.is_temporary() => {
                                context.sleep(Duration::from_millis(50))
                            }
                            Err(error) => panic!("create by_v: {error:?}"),
                        }
                    }
                    marker(cluster, "indexed");
                    return (started, context.now_us());
                }
                cluster.create_table(&definition()).expect("create t");
                let table = cluster.table("t").unwrap();
                let mut model = Model::new();
                for first in (0..ROWS).step_by(200) {
                    let mut transaction = cluster.transaction();
                    for k in first..first + 200 {
                        let v = fresh_value(k, 0).map_or(Value::Null, Value::Int);
                        transaction
                            .insert(&table, &[("k", Value::UInt(k)), ("v", v)])
                            .unwrap();
                        model.insert(k, fresh_value(k, 0));
                    }
                    transaction.execute(Commit::Yes).expect("the load");
                }
                marker(cluster, "loaded");
                let mut random = XorShift::new(9);
                let mut round = 1;
                while !exists(cluster, "indexed") {
                    for _ in 0..20 {
                        let k = random.below(ROWS);
                        round += 1;
                        write(cluster, &table, &mut model, k, Some(fresh_value(k, round)));
                    }
                }
                context.sleep(Duration::from_millis(200));
                assert_index_holds(cluster, &model);
                (0, 0)
            },
            restarts,
        );
    let (started, created) = results[1];
    eprintln!("create from {started} us to {created} us; node 3 killed at {KILL_AT_US} us");
    assert!(
        (started..created).contains(&KILL_AT_US),
        "the node died during the create ({started}..{created} us)"
    );
    assert_eq!(restarts, 1, "the walk started again once after the failure");
}

/// When node 3 dies in the test above: within its build (the test checks).
const KILL_AT_US: u64 = 1_000_000;
