//! keylookup `durable`: every write transaction commits with
//! `Commit::Durable` against the client's fake data node (mgmd, API node
//! id, async session and ledger on loopback TCP): acknowledged writes are
//! marked durable in the ledger, and a durable commit whose wait is
//! refused counts an error, is recorded as acknowledged without the
//! marker, and is not retried.

use bench::keylookup::{self, KeylookupOptions, Phase};
use client::Gci;
use fakenode::{FakeDataNode, FakeDataNodeOptions};

fn start() -> (FakeDataNode, mgmd::MgmdHandle, String) {
    let node = FakeDataNode::start(FakeDataNodeOptions::default()).expect("fake node listens");
    let mgmd = node.start_mgmd().expect("mgmd starts");
    let mgmd_addr = mgmd.local_addr().to_string();
    (node, mgmd, mgmd_addr)
}

fn temp_path(name: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("tessera-{name}-{}.ledger", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

fn options(mgmd_addr: &str, phases: &str, ledger: &std::path::Path) -> KeylookupOptions {
    KeylookupOptions {
        mgmd: mgmd_addr.to_string(),
        records: 200,
        phases: Phase::parse_list(phases).expect("phases"),
        threads: 2,
        inflight: 3,
        ops_per_txn: 4,
        columns: 4,
        durable: true,
        ledger: Some(ledger.to_path_buf()),
        ..Default::default()
    }
}

#[test]
fn durable_writes_wait_for_their_gci_and_are_marked_durable_in_the_ledger() {
    // The fake counts every GCI it hands out as complete at once.
    let (node, _mgmd, mgmd_addr) = start();
    let ledger = temp_path("durable");
    let writer = options(&mgmd_addr, "insert,read,update,delete", &ledger);
    let report = keylookup::run(&writer).expect("runs");
    assert_eq!(report.errors(), 0, "{}", report.to_text());
    assert_eq!(report.mismatches(), 0, "{}", report.to_text());
    let write_transactions: u64 = ["insert", "update", "delete"]
        .iter()
        .map(|name| report.phase(name).expect("phase").transactions)
        .sum();
    // 200 keys in batches of 4 over 2 threads, per write phase.
    assert_eq!(write_transactions, 3 * 50);
    let waits = node
        .received()
        .iter()
        .filter(|signal| signal.name == "GciWaitReq")
        .count();
    assert_eq!(
        waits as u64, write_transactions,
        "one GCI wait per write transaction, none for reads"
    );
    let text = std::fs::read_to_string(&ledger).expect("ledger written");
    let acknowledgements: Vec<&str> = text
        .lines()
        .filter(|line| line.starts_with("w ") || line.starts_with("d "))
        .collect();
    assert_eq!(acknowledgements.len(), 600);
    assert!(
        acknowledgements
            .iter()
            .all(|line| line.ends_with(" durable")),
        "every acknowledgement was durable"
    );
    // The marked ledger verifies like any other.
    let verify = KeylookupOptions {
        verify_only: true,
        durable: false,
        phases: Vec::new(),
        columns: 0,
        ..writer
    };
    let report = keylookup::run(&verify).expect("verifies");
    assert_eq!(report.mismatches(), 0, "{}", report.to_text());
    let _ = std::fs::remove_file(&ledger);
}

#[test]
fn a_refused_durable_wait_is_an_error_but_the_write_is_acknowledged_and_not_retried() {
    let (node, _mgmd, mgmd_addr) = start();
    node.set_complete_gci(Gci(0));
    node.set_max_gci_waits(0);
    let ledger = temp_path("durable-refused");
    let report = keylookup::run(&options(&mgmd_addr, "insert", &ledger)).expect("runs");
    let insert = report.phase("insert").expect("insert");
    assert_eq!(insert.errors, 50, "{}", report.to_text());
    assert_eq!(
        insert.errors_by_code.get("4022/4021"),
        Some(&50),
        "every wait refused (an unknown outcome, never retried), no retry tripped over \
         its own insert: {}",
        report.to_text()
    );
    assert_eq!(node.row_count("keylookup"), 200, "every insert committed");
    let text = std::fs::read_to_string(&ledger).expect("ledger written");
    let writes: Vec<&str> = text.lines().filter(|line| line.starts_with("w ")).collect();
    assert_eq!(writes.len(), 200, "each committed write acknowledged once");
    assert!(
        writes.iter().all(|line| !line.ends_with("durable")),
        "none acknowledged durable"
    );
    let _ = std::fs::remove_file(&ledger);
}
