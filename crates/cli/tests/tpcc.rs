//! `tessera bench tpcc` against `tessera sql` on a real cluster (two data
//! nodes, replicas 2): it loads one warehouse, runs the standard mix, and
//! the TPC-C consistency conditions hold afterwards; its JSON report
//! carries tpmC and every transaction type's counts and percentiles.

mod common;

use common::{ClusterOptions, SqlNode, TestCluster};
use std::process::Command;

#[test]
fn tpcc_loads_runs_the_mix_and_stays_consistent() {
    // One warehouse is about 500,000 rows: room for them on each node.
    let cluster = TestCluster::start(ClusterOptions {
        data_memory: "768M",
        ..ClusterOptions::pair("tpcc")
    });
    let node = SqlNode::start(&cluster);
    let output = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["bench", "tpcc", "--mysql"])
        .arg(format!("127.0.0.1:{}", node.port))
        .args([
            "--warehouses",
            "1",
            "--load",
            "--duration",
            "8",
            "--connections",
            "4",
            "--json",
        ])
        .output()
        .expect("tessera bench tpcc runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    assert_eq!(report["consistency"], "ok", "{report}");
    assert!(report["tpmc"].as_f64().unwrap() > 0.0, "{report}");
    for kind in [
        "new_order",
        "payment",
        "order_status",
        "delivery",
        "stock_level",
    ] {
        let transaction = &report["transactions"][kind];
        assert!(
            transaction["count"].as_u64().unwrap() > 0,
            "{kind}: {report}"
        );
        assert!(transaction["p95_ms"].as_f64().is_some(), "{kind}: {report}");
        assert_eq!(transaction["errors"], 0, "{kind}: {report}");
    }
    // Every replica holds the same rows after the mix.
    let check = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args([
            "mgm",
            "--mgmd",
            &cluster.mgmd_addr(),
            "-e",
            "check replicas",
        ])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
}
