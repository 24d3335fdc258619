//! keylookup end to end: an in-process mgmd whose config points at the
//! client's in-process fake data node(s), so the whole path (mgmd, API node
//! id, registration, transactions in flight, verification, ledger, report)
//! runs on loopback TCP.

use bench::keylookup::{self, KeylookupOptions, Phase};
use client::{Cluster, Commit, ErrorCode, Value};
use fakenode::{FakeDataNode, FakeDataNodeOptions};
use signal::signals::OperationKind;
use std::io::Write;

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
        ops_per_txn: 7,
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

#[test]
fn many_transactions_in_flight_per_thread_cover_every_key() {
    let setup = setup();
    let options = KeylookupOptions {
        inflight: 16,
        ops_per_txn: 3,
        ..options(&setup, keylookup::DEFAULT_PHASES)
    };
    let report = keylookup::run(&options).expect("runs");
    for phase in &report.phases {
        assert_eq!(phase.operations, 500, "{}", report.to_text());
        assert_eq!(phase.errors, 0, "{}", report.to_text());
        // 166 or 167 keys per thread, 3 per transaction.
        assert_eq!(phase.transactions, 56 + 56 + 56, "{}", report.to_text());
    }
    assert_eq!(report.phase("read#2").map(|p| p.verified), Some(500));
    assert_eq!(report.mismatches(), 0);
}

/// A fake cluster of two data nodes behind an in-process mgmd.
fn two_nodes() -> (fakenode::FakeCluster, mgmd::MgmdHandle, String) {
    let fake = fakenode::FakeCluster::start(
        FakeDataNodeOptions {
            tc_instances: 2,
            default_partitions: 4,
            ..Default::default()
        },
        &[2, 3],
    )
    .expect("fake nodes listen");
    let mgmd = fake.start_mgmd().expect("mgmd starts");
    let addr = mgmd.local_addr().to_string();
    (fake, mgmd, addr)
}

#[test]
fn transactions_start_on_the_node_of_their_first_keys_primary() {
    let (fake, _mgmd, mgmd_addr) = two_nodes();
    let options = KeylookupOptions {
        mgmd: mgmd_addr.clone(),
        records: 400,
        phases: Phase::parse_list("insert,read").expect("phases"),
        threads: 2,
        inflight: 8,
        ops_per_txn: 1,
        columns: 4,
        ..Default::default()
    };
    let report = keylookup::run(&options).expect("runs");
    assert_eq!(report.phase("read").map(|p| p.verified), Some(400));
    assert_eq!(report.errors(), 0, "{}", report.to_text());
    // One operation per transaction: every TCKEYREQ is on its key's primary.
    let cluster = Cluster::connect(&mgmd_addr).expect("connects");
    let table = cluster.table("keylookup").expect("table");
    for node in fake.nodes() {
        let requests = node
            .received()
            .iter()
            .filter(|signal| signal.name == "TcKeyReq")
            .count();
        assert!(requests > 100, "node {} got {requests}", node.node_id());
    }
    let on_primary = (0..400u32)
        .filter(|&key| {
            let primary = cluster
                .primary_node(&table, &[Value::UInt(u64::from(key))])
                .expect("key")
                .expect("a map");
            let mut bytes = Vec::new();
            table
                .encode_key(&[Value::UInt(u64::from(key))], &mut bytes)
                .expect("key");
            fake.primary_of("keylookup", &bytes) == Some(primary.0)
        })
        .count();
    assert_eq!(on_primary, 400);
}

fn temp_path(name: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("tessera-{name}-{}.ledger", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

#[test]
fn the_ledger_proves_every_acknowledged_write_and_catches_a_lost_one() {
    let (fake, _mgmd, mgmd_addr) = two_nodes();
    let ledger = temp_path("ledger");
    let writer = KeylookupOptions {
        mgmd: mgmd_addr.clone(),
        records: 300,
        phases: Phase::parse_list("insert,update,update").expect("phases"),
        threads: 3,
        inflight: 4,
        ops_per_txn: 5,
        columns: 6,
        ledger: Some(ledger.clone()),
        ..Default::default()
    };
    let report = keylookup::run(&writer).expect("writes");
    assert_eq!(report.errors(), 0, "{}", report.to_text());
    let text = std::fs::read_to_string(&ledger).expect("ledger written");
    let count = |kind: &str| text.lines().filter(|line| line.starts_with(kind)).count();
    assert_eq!(count("i "), 900, "an intent per write");
    assert_eq!(count("w "), 900, "an acknowledgement per write");
    // A second writer process appends; rounds never repeat.
    keylookup::run(&KeylookupOptions {
        phases: Phase::parse_list("update").expect("phases"),
        ..writer.clone()
    })
    .expect("second writer");
    let text = std::fs::read_to_string(&ledger).expect("ledger");
    let mut rounds: Vec<&str> = text
        .lines()
        .filter(|line| line.starts_with("w "))
        .map(|line| line.split(' ').nth(2).expect("round"))
        .collect();
    assert_eq!(rounds.len(), 1200);
    rounds.sort_unstable();
    rounds.dedup();
    assert_eq!(rounds.len(), 1200, "rounds are unique across runs");

    let rows_before = fake.nodes()[0].row_count("keylookup");
    for node in fake.nodes() {
        node.clear_received();
    }
    let verify = KeylookupOptions {
        verify_only: true,
        phases: Vec::new(),
        columns: 0, // taken from the table
        ledger: Some(ledger.clone()),
        ..writer.clone()
    };
    let report = keylookup::run(&verify).expect("verifies");
    let names: Vec<&str> = report.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["verify"]);
    let phase = report.phase("verify").expect("verify");
    assert_eq!(phase.verified, 300, "{}", report.to_text());
    assert_eq!(phase.mismatches, 0, "{}", report.to_text());
    assert_eq!(phase.kind, "verify");
    assert_eq!(fake.nodes()[0].row_count("keylookup"), rows_before);
    for node in fake.nodes() {
        for signal in node.received() {
            assert!(
                !matches!(signal.name, "CreateTabReq" | "DropTabReq"),
                "verify-only changes no schema"
            );
        }
    }

    // A write acknowledged in a later GCI that the table does not hold:
    // lost, unless the restored GCI is older than its acknowledgement.
    let last_gci = text
        .lines()
        .filter(|line| line.starts_with("w "))
        .map(|line| {
            let gci = line.split(' ').nth(3).expect("gci");
            let (high, _) = gci.split_once('/').expect("H/L");
            high.parse::<u32>().expect("number")
        })
        .max()
        .expect("writes");
    let lost_gci = last_gci + 10;
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&ledger)
        .expect("append");
    writeln!(file, "i 17 12345\nw 17 12345 {lost_gci}/0").expect("append");
    drop(file);
    let report = keylookup::run(&verify).expect("verifies");
    let phase = report.phase("verify").expect("verify");
    assert_eq!(phase.mismatches, 1, "{}", report.to_text());
    assert!(
        phase.mismatch_examples[0].contains("key 17")
            && phase.mismatch_examples[0].contains("older than the write of round 0x3039"),
        "{:?}",
        phase.mismatch_examples
    );
    let restored_before = KeylookupOptions {
        restored_gci: Some(keylookup::parse_gci(&format!("{}", lost_gci - 1)).expect("gci")),
        ..verify.clone()
    };
    let report = keylookup::run(&restored_before).expect("verifies");
    assert_eq!(report.mismatches(), 0, "{}", report.to_text());

    // A row deleted behind the ledger's back is missing.
    let cluster = Cluster::connect(&mgmd_addr).expect("connects");
    let table = cluster.table("keylookup").expect("table");
    let mut transaction = cluster.transaction();
    transaction
        .delete(&table, &[Value::UInt(42)])
        .expect("delete");
    transaction.execute(Commit::Yes).expect("deleted");
    let report = keylookup::run(&restored_before).expect("verifies");
    let phase = report.phase("verify").expect("verify");
    assert_eq!(phase.mismatches, 1, "{}", report.to_text());
    assert!(
        phase.mismatch_examples[0].contains("key 42: row missing"),
        "{:?}",
        phase.mismatch_examples
    );
    let _ = std::fs::remove_file(&ledger);
}

#[test]
fn verify_only_needs_an_existing_keylookup_table_and_a_readable_ledger() {
    let setup = setup();
    let verify = KeylookupOptions {
        verify_only: true,
        ..options(&setup, "insert")
    };
    let error = keylookup::run(&verify).unwrap_err();
    assert!(error.to_string().contains("cannot verify table"), "{error}");
    assert_eq!(
        setup.node.row_count("keylookup"),
        0,
        "verify-only created nothing"
    );
    keylookup::run(&options(&setup, "insert")).expect("insert");
    let report = keylookup::run(&verify).expect("verifies without a ledger");
    assert_eq!(report.phase("verify").map(|p| p.verified), Some(500));

    let missing = temp_path("missing");
    let error = keylookup::run(&KeylookupOptions {
        ledger: Some(missing),
        ..verify.clone()
    })
    .unwrap_err();
    assert!(matches!(error, bench::BenchError::Ledger(_)), "{error}");
    let garbage = temp_path("garbage");
    std::fs::write(&garbage, "i 1 2\nnot a record\n").expect("write");
    let error = keylookup::run(&KeylookupOptions {
        ledger: Some(garbage.clone()),
        ..verify.clone()
    })
    .unwrap_err();
    assert!(error.to_string().contains("line 2"), "{error}");
    let _ = std::fs::remove_file(&garbage);

    // Another shape is refused, not dropped.
    let cluster = Cluster::connect(&setup.mgmd_addr).expect("connects");
    cluster.drop_table("keylookup").expect("drop");
    cluster
        .create_table(&client::TableDef {
            indexes: Vec::new(),
            revision: 0,
            id: 0,
            version: 0,
            name: "keylookup".into(),
            partitions: 0,
            primary_key: vec![0],
            columns: vec![client::ColumnDef {
                name: "k".into(),
                column_type: client::ColumnType::Int { unsigned: true },
                nullable: false,
            }],
            partition_key: Vec::new(),
        })
        .expect("create");
    let error = keylookup::run(&verify).unwrap_err();
    assert!(
        error.to_string().contains("not a keylookup table"),
        "{error}"
    );
    assert!(cluster.table("keylookup").is_ok(), "still there");
}

#[test]
fn a_rate_caps_the_operations_per_second() {
    let setup = setup();
    keylookup::run(&options(&setup, "insert")).expect("insert");
    let rate = 400.0;
    let options = KeylookupOptions {
        rate: Some(rate),
        inflight: 8,
        ops_per_txn: 2,
        duration_s: Some(1),
        ..options(&setup, "read")
    };
    let report = keylookup::run(&options).expect("runs");
    let read = report.phase("read").expect("read");
    assert!(read.verified > 0);
    // At most the rate, plus what three threads may start at once (one
    // transaction each and a 10 ms catch-up allowance).
    let allowed = rate * read.elapsed_s + 3.0 * (2.0 + rate / 3.0 * 0.01) + 1.0;
    assert!(
        (read.operations as f64) <= allowed,
        "{} operations in {} s at {rate}/s",
        read.operations,
        read.elapsed_s
    );
}

#[test]
fn a_schema_change_mid_run_refreshes_the_table_and_carries_on() {
    let setup = setup();
    keylookup::run(&options(&setup, "insert")).expect("insert");
    std::thread::scope(|scope| {
        let run = scope.spawn(|| {
            keylookup::run(&KeylookupOptions {
                duration_s: Some(2),
                inflight: 4,
                ..options(&setup, "update,read")
            })
            .expect("runs")
        });
        std::thread::sleep(std::time::Duration::from_millis(500));
        assert!(setup.node.bump_table_version("keylookup"));
        let report = run.join().expect("bench thread");
        let update = report.phase("update").expect("update");
        assert!(
            update.errors_by_code.contains_key("241"),
            "the version change was seen: {}",
            report.to_text()
        );
        let read = report.phase("read").expect("read");
        assert!(read.verified > 0, "{}", report.to_text());
        assert_eq!(read.errors, 0, "{}", report.to_text());
        assert_eq!(report.mismatches(), 0, "{}", report.to_text());
    });
}
