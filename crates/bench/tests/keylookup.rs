//! keylookup end to end: an in-process mgmd whose config points at the
//! client's in-process fake data node, so the whole path (mgmd, API node id,
//! registration, batches, verification, report) runs on loopback TCP.

use bench::keylookup::{self, KeylookupOptions, Phase};
use client::testing::{FakeDataNode, FakeDataNodeOptions};
use client::{Cluster, Commit, ErrorCode, Value};
use signal::signals::OperationKind;

struct Setup {
    node: FakeDataNode,
    _mgmd: mgmd::MgmdHandle,
    mgmd_addr: String,
}

fn setup() -> Setup {
    let node = FakeDataNode::start(FakeDataNodeOptions {
        tc_instances: 2,
        ..Default::default()
    })
    .expect("fake data node listens");
    let mgmd = node.start_mgmd().expect("mgmd starts");
    let mgmd_addr = mgmd.local_addr().to_string();
    Setup {
        node,
        _mgmd: mgmd,
        mgmd_addr,
    }
}

fn options(setup: &Setup, phases: &str) -> KeylookupOptions {
    KeylookupOptions {
        mgmd: setup.mgmd_addr.clone(),
        records: 500,
        phases: Phase::parse_list(phases).expect("valid phases"),
        threads: 3,
        batch: 7,
        columns: 10,
        ..Default::default()
    }
}

#[test]
fn the_default_phases_cover_every_key_and_verify_every_row() {
    let setup = setup();
    let report = keylookup::run(&options(&setup, keylookup::DEFAULT_PHASES)).expect("runs");
    let names: Vec<&str> = report.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["insert", "read", "update", "read#2", "delete"]);
    for phase in &report.phases {
        assert_eq!(phase.operations, 500, "{}", report.to_text());
        assert_eq!(phase.errors, 0, "{}", report.to_text());
        assert_eq!(phase.mismatches, 0, "{}", report.to_text());
        // 500 keys over 3 threads in batches of 7.
        assert_eq!(phase.transactions, 72, "{}", report.to_text());
        assert!(phase.max_us >= phase.p50_us);
    }
    assert_eq!(report.phase("read").map(|p| p.verified), Some(500));
    assert_eq!(report.phase("read#2").map(|p| p.verified), Some(500));
    assert_eq!(report.mismatches(), 0);
    assert_eq!(
        setup.node.row_count("keylookup"),
        0,
        "delete removed every key"
    );

    let json: serde_json::Value = serde_json::from_str(&report.to_json()).expect("valid JSON");
    assert_eq!(json["phases"]["read#2"]["verified"], 500);
    assert_eq!(json["phases"]["insert"]["kind"], "insert");
    assert!(json["phases"]["update"]["ops_per_sec"].as_f64().is_some());
    let text = report.to_json();
    let position = |name: &str| text.find(&format!("\"{name}\":{{")).expect("phase present");
    assert!(position("insert") < position("read") && position("read#2") < position("delete"));
    let table = report.to_text();
    assert_eq!(table.lines().count(), 6, "{table}");
}

#[test]
fn temporary_errors_are_retried_and_counted_by_code() {
    let setup = setup();
    setup
        .node
        .fail_next_batches(None, &[ErrorCode::LockWaitTimeout; 3]);
    let report = keylookup::run(&options(&setup, "insert")).expect("runs");
    let insert = report.phase("insert").expect("insert phase");
    assert_eq!(insert.operations, 500);
    assert_eq!(insert.errors, 3);
    assert_eq!(insert.errors_by_code.get("266"), Some(&3));
    assert_eq!(setup.node.row_count("keylookup"), 500);
    assert!(report.to_text().contains("error 266 x3 lock wait timeout"));
}

#[test]
fn a_row_missing_after_insert_is_a_mismatch() {
    let setup = setup();
    setup
        .node
        .fail_next_batches(Some(OperationKind::Read), &[ErrorCode::NoSuchRow]);
    let report = keylookup::run(&options(&setup, "insert,read")).expect("runs");
    let read = report.phase("read").expect("read phase");
    assert_eq!(read.mismatches, 1, "{}", report.to_text());
    assert_eq!(read.verified, 499);
    assert_eq!(read.errors, 0);
    assert_eq!(report.mismatches(), 1);
    assert!(report
        .to_text()
        .contains("row missing after it was written"));
}

#[test]
fn reused_tables_keep_rows_and_corruption_is_caught() {
    let setup = setup();
    keylookup::run(&options(&setup, "insert")).expect("first run");
    // Damage one row behind the benchmark's back.
    let cluster = Cluster::connect(&setup.mgmd_addr).expect("connects");
    let table = cluster.table("keylookup").expect("table exists");
    let mut transaction = cluster.transaction();
    transaction
        .update(&table, &[Value::UInt(123)], &[("c4", Value::UInt(1))])
        .expect("update");
    transaction.execute(Commit::Yes).expect("committed");

    // A second run reuses the table: its inserts are all duplicates.
    let report = keylookup::run(&options(&setup, "insert,read")).expect("second run");
    let insert = report.phase("insert").expect("insert");
    assert_eq!(insert.errors_by_code.get("630"), Some(&500));
    let read = report.phase("read").expect("read");
    assert_eq!(read.verified, 499);
    assert_eq!(read.mismatches, 1);
    assert!(read.mismatch_examples[0].contains("key 123"), "{read:?}");

    // Another shape drops and recreates the table.
    let reshaped = KeylookupOptions {
        columns: 3,
        ..options(&setup, "read,insert,read")
    };
    let report = keylookup::run(&reshaped).expect("third run");
    assert_eq!(
        report.phase("read").map(|p| p.verified),
        Some(500),
        "absent rows verify"
    );
    assert_eq!(report.phase("insert").map(|p| p.errors), Some(0));
    assert_eq!(report.phase("read#2").map(|p| p.verified), Some(500));
    let table = Cluster::connect(&setup.mgmd_addr)
        .expect("connects")
        .table("keylookup")
        .expect("table");
    assert_eq!(table.def().columns.len(), 5);
}

#[test]
fn duration_runs_reads_and_updates_on_random_keys() {
    let setup = setup();
    let options = KeylookupOptions {
        duration_s: Some(1),
        ..options(&setup, "insert,update,read,delete")
    };
    let report = keylookup::run(&options).expect("runs");
    let read = report.phase("read").expect("read");
    assert!(read.verified > 0);
    assert_eq!(read.mismatches, 0);
    assert_eq!(report.phase("insert").map(|p| p.operations), Some(500));
    assert_eq!(report.phase("delete").map(|p| p.errors), Some(0));
    assert_eq!(setup.node.row_count("keylookup"), 0);
}

#[test]
fn setup_failures_are_errors_and_bad_options_are_refused() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("free port")
        .port();
    let options = KeylookupOptions {
        mgmd: format!("127.0.0.1:{port}"),
        ..Default::default()
    };
    let error = keylookup::run(&options).unwrap_err();
    assert!(
        error.to_string().contains("cannot connect through mgmd"),
        "{error}"
    );
    let error = keylookup::run(&KeylookupOptions {
        threads: 0,
        ..Default::default()
    })
    .unwrap_err();
    assert!(matches!(error, bench::BenchError::Options(_)));
}
