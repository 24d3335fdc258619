//! The master dict's take-over of a schema change in flight
//! (docs/design/0016-schema-takeover.md): the president dies at each
//! fault point of a create or a drop, and the survivors must end with the
//! change made everywhere or nowhere. The real client against the real
//! blocks of a simulated cluster (`sim::harness`).
//!
//! Each case checks, after the failure is agreed and taken over: every
//! surviving tc, ldm and dict holds the same tables (`schema_agreement`);
//! the table the create made is usable through every survivor if it
//! stayed, and can be created again if it did not; the table the drop
//! took is gone (a drop that reached any block is finished) and its name
//! can be created again; and schema changes go on.

use client::{Commit, LockMode, Value};
use kernel::faults::{FaultAction, FaultPoint};
use signal::NodeId;
use sim::harness::{create_kv_table, kv_table_definition, Harness};
use std::time::Duration;

/// Long enough for the default heartbeats to declare the president dead
/// and for the survivors to agree it and take over.
const DETECTION: Duration = Duration::from_millis(2_500);

/// Writes and reads back one row of `name` through each of `nodes`.
fn write_through_each(cluster: &client::Cluster, name: &str, nodes: &[NodeId]) {
    cluster.invalidate_table(name);
    let table = cluster
        .table(name)
        .unwrap_or_else(|error| panic!("table {name:?} after the take-over: {error}"));
    for (key, &node) in (1u64..).zip(nodes) {
        let mut writer = cluster.transaction_on_node(node).unwrap();
        writer
            .insert(&table, &[("k", Value::UInt(key)), ("v", Value::from("x"))])
            .unwrap();
        writer
            .execute(Commit::Yes)
            .unwrap_or_else(|error| panic!("writing {name:?} through node {node}: {error}"));
        let mut reader = cluster.transaction_on_node(node).unwrap();
        let read = reader
            .read(&table, &[Value::UInt(key)], LockMode::Shared)
            .unwrap();
        reader
            .execute(Commit::Yes)
            .unwrap_or_else(|error| panic!("reading {name:?} through node {node}: {error}"));
        assert!(
            reader.get(read).is_some(),
            "the row written through node {node} is there"
        );
    }
}

/// What one case saw: whether the scratch table exists after the
/// take-over, and the tables every survivor holds.
struct Outcome {
    exists: bool,
    agreed: Result<Vec<(u32, u32)>, String>,
}

/// The president (node 2) dies at `point` while the client creates (or,
/// for the drop points, drops) table "scratch"; `survivors` check it.
fn run_case(
    seed: u64,
    (nodes, replicas): (u16, u16),
    point: FaultPoint,
    action: FaultAction,
) -> Outcome {
    let survivors: Vec<NodeId> = (3..2 + nodes).map(NodeId).collect();
    let checked = survivors.clone();
    let dropping = matches!(
        point,
        FaultPoint::DropAfterCoordinators | FaultPoint::DropAfterFirstDictionary
    );
    let case = format!("seed {seed}, {nodes} nodes, {point:?} {action}");
    let (exists, fired, agreed) = Harness::new(seed)
        .nodes(nodes, replicas)
        .fault_with(NodeId(2), point, action)
        .run_then(
            move |cluster, context| {
                // The create points fire at the first create: the
                // scratch table's.
                let changed = if dropping {
                    create_kv_table(cluster, "kept");
                    create_kv_table(cluster, "scratch");
                    cluster.drop_table("scratch")
                } else {
                    cluster
                        .create_table(&kv_table_definition("scratch"))
                        .map(|_| ())
                };
                context.sleep(DETECTION);
                cluster.invalidate_table("scratch");
                let exists = match cluster.table("scratch") {
                    Ok(_) => true,
                    Err(error) if error.code() == Some(client::ErrorCode::UnknownTable) => false,
                    Err(error) => panic!("looking the table up after the take-over: {error}"),
                };
                // A change confirmed to the client is made (the master
                // confirms once every dict has it).
                if changed.is_ok() {
                    assert_eq!(exists, !dropping, "a confirmed change stands");
                }
                if exists {
                    write_through_each(cluster, "scratch", &survivors);
                } else {
                    create_kv_table(cluster, "scratch");
                    write_through_each(cluster, "scratch", &survivors);
                }
                // Schema changes go on, and what stood before still serves.
                cluster
                    .drop_table("scratch")
                    .expect("a drop after the take-over");
                create_kv_table(cluster, "after");
                if dropping {
                    write_through_each(cluster, "kept", &survivors);
                }
                exists
            },
            move |simulation| simulation.schema_agreement(&checked),
        );
    assert_eq!(fired, [(NodeId(2), point)], "{case}: the point was reached");
    if dropping {
        assert!(!exists, "{case}: a drop that reached the tcs is finished");
    }
    Outcome { exists, agreed }
}

/// The president dies at each point of a create and a drop, with two
/// nodes and with three (replicas 3: the announce reaches the highest
/// node first, so the next president is the dict that lacks the
/// table). A crash loses what the president had not sent; a stall past
/// the detection time lets what it sent arrive, so the tables it told
/// one dict of are rolled forward.
#[test]
fn a_schema_change_the_master_dict_died_in_ends_everywhere_or_nowhere() {
    let points = [
        FaultPoint::CreateAfterAddRequests,
        FaultPoint::CreateAfterFirstAnnounce,
        FaultPoint::DropAfterCoordinators,
        FaultPoint::DropAfterFirstDictionary,
    ];
    let stall = FaultAction::Delay { ms: 3_000 };
    let mut seed = 0;
    let mut rolled_forward = 0;
    for &point in &points {
        for action in [FaultAction::Crash, stall] {
            for shape in [(2, 2), (3, 3)] {
                seed += 1;
                let outcome = run_case(seed, shape, point, action);
                let case = format!("seed {seed}, shape {shape:?}, {point:?} {action}");
                let dropping = matches!(
                    point,
                    FaultPoint::DropAfterCoordinators | FaultPoint::DropAfterFirstDictionary
                );
                // after, and kept when the case dropped.
                let tables = if dropping { 2 } else { 1 };
                match &outcome.agreed {
                    Ok(held) => assert_eq!(held.len(), tables, "{case}: {held:?}"),
                    Err(disagreement) => panic!("{case}: {disagreement}"),
                }
                match (point, action) {
                    // No dict had the table: no client can have used it.
                    (FaultPoint::CreateAfterAddRequests, _) => {
                        assert!(
                            !outcome.exists,
                            "{case}: a create that reached no dict is undone"
                        )
                    }
                    // A dict had it: a client may have written rows.
                    (FaultPoint::CreateAfterFirstAnnounce, FaultAction::Delay { .. }) => {
                        assert!(
                            outcome.exists,
                            "{case}: a create that reached a dict is kept"
                        );
                        rolled_forward += 1;
                    }
                    _ => {}
                }
            }
        }
    }
    assert_eq!(rolled_forward, 2, "both shapes rolled a create forward");
}

/// What an index change the president died in left: whether the index
/// stands, and whether the survivors agree on every table and index
/// revision.
struct IndexOutcome {
    exists: bool,
    agreed: Result<Vec<(u32, u32)>, String>,
}

/// The president (node 2) dies at `point` while the client creates
/// index "by_v" on table "kept" (or, at the drop point, drops it); the
/// survivors must end with the index built everywhere or nowhere, and
/// when it stands it holds every row.
fn run_index_case(
    seed: u64,
    (nodes, replicas): (u16, u16),
    point: FaultPoint,
    action: FaultAction,
    unique: bool,
) -> IndexOutcome {
    let survivors: Vec<NodeId> = (3..2 + nodes).map(NodeId).collect();
    let checked = survivors.clone();
    let dropping = point == FaultPoint::IndexDropAfterFirstDictionary;
    let (exists, fired, agreed) = Harness::new(seed)
        .nodes(nodes, replicas)
        .fault_with(NodeId(2), point, action)
        .run_then(
            move |cluster, context| {
                let table = if unique {
                    // Declared with the table: a unique index's drop takes
                    // its hidden table with it everywhere.
                    let mut definition = kv_table_definition("kept");
                    definition.indexes.push(client::IndexDef {
                        id: 1,
                        name: "by_v".into(),
                        columns: vec![1],
                        unique: Some(client::UniqueTable::REQUESTED),
                    });
                    cluster.create_table(&definition).unwrap();
                    cluster.table("kept").unwrap()
                } else {
                    create_kv_table(cluster, "kept")
                };
                // Above the keys write_through_each writes.
                for k in 100..150 {
                    sim::harness::insert_settled(cluster, &table, k);
                }
                let changed = if dropping {
                    if !unique {
                        // A create runs first; its points are not armed.
                        cluster.create_index("kept", "by_v", &["v"]).unwrap();
                    }
                    cluster.drop_index("kept", "by_v")
                } else {
                    cluster.create_index("kept", "by_v", &["v"])
                };
                context.sleep(DETECTION);
                cluster.invalidate_table("kept");
                let table = cluster
                    .table("kept")
                    .expect("the table after the take-over");
                let exists = table.def().index("by_v").is_some();
                if changed.is_ok() {
                    assert_eq!(exists, !dropping, "a confirmed change stands");
                }
                let range = [client::KeyRange::all()];
                let options = client::ScanOptions::default();
                if exists {
                    let rows = cluster
                        .scan(&table, client::Access::Index("by_v", &range), &options)
                        .expect("a scan of the index that stayed");
                    assert_eq!(rows.rows.len(), 50, "the index holds every row");
                    cluster
                        .drop_index("kept", "by_v")
                        .expect("a drop after the take-over");
                } else {
                    cluster
                        .create_index("kept", "by_v", &["v"])
                        .expect("a create after the take-over");
                }
                write_through_each(cluster, "kept", &survivors);
                exists
            },
            move |simulation| simulation.schema_agreement(&checked),
        );
    assert_eq!(fired, [(NodeId(2), point)], "the point was reached");
    IndexOutcome { exists, agreed }
}

/// The president dies at each point of an index create and drop, with
/// two nodes and three: a change that reached no dict is undone at
/// every ldm, one a dict took is finished everywhere.
#[test]
fn an_index_change_the_master_dict_died_in_ends_everywhere_or_nowhere() {
    let points = [
        FaultPoint::IndexAfterBuildRequests,
        FaultPoint::IndexAfterFirstAnnounce,
        FaultPoint::IndexDropAfterFirstDictionary,
    ];
    let stall = FaultAction::Delay { ms: 3_000 };
    let mut seed = 100;
    for &point in &points {
        for action in [FaultAction::Crash, stall] {
            for shape in [(2, 2), (3, 3)] {
                seed += 1;
                let outcome = run_index_case(seed, shape, point, action, false);
                let case = format!("seed {seed}, shape {shape:?}, {point:?} {action}");
                if let Err(disagreement) = &outcome.agreed {
                    panic!("{case}: {disagreement}");
                }
                match (point, action) {
                    (FaultPoint::IndexAfterBuildRequests, _) => {
                        assert!(!outcome.exists, "{case}: a build no dict took is undone")
                    }
                    (FaultPoint::IndexAfterFirstAnnounce, FaultAction::Delay { .. }) => {
                        assert!(outcome.exists, "{case}: an index a dict took is kept")
                    }
                    (FaultPoint::IndexDropAfterFirstDictionary, FaultAction::Delay { .. }) => {
                        assert!(!outcome.exists, "{case}: a drop a dict took is finished")
                    }
                    _ => {}
                }
            }
        }
    }
}

/// The president dies where a drop of a unique index (declared with its
/// table) reached one dict: the drop is finished (a stalled president)
/// or not, and either way every survivor's tcs and ldms hold exactly the
/// hidden tables the dicts' definitions name (`schema_agreement`).
#[test]
fn a_unique_index_drop_the_master_dict_died_in_ends_everywhere_or_nowhere() {
    let point = FaultPoint::IndexDropAfterFirstDictionary;
    let mut seed = 200;
    for action in [FaultAction::Crash, FaultAction::Delay { ms: 3_000 }] {
        for shape in [(2, 2), (3, 3)] {
            seed += 1;
            let outcome = run_index_case(seed, shape, point, action, true);
            let case = format!("seed {seed}, shape {shape:?}, {point:?} {action}");
            if let Err(disagreement) = &outcome.agreed {
                panic!("{case}: {disagreement}");
            }
            if let FaultAction::Delay { .. } = action {
                assert!(!outcome.exists, "{case}: a drop a dict took is finished");
            }
        }
    }
}
