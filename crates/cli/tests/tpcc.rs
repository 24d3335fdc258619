//! `tessera bench tpcc` against `tessera sql` on a real cluster (two data
//! nodes, replicas 2): it loads one warehouse, runs the standard mix with
//! text statements, then prepared ones, then prepared ones with the
//! transactions' INSERTs batched (`--batching`), and the TPC-C consistency
//! conditions hold after each; its JSON report carries tpmC and every
//! transaction type's counts and percentiles.

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
    let modes: [(bool, &[&str]); 3] = [
        (true, &[]),
        (false, &["--prepared"]),
        (false, &["--prepared", "--batching"]),
    ];
    for (first, mode) in modes {
        let output = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(["bench", "tpcc", "--mysql"])
            .arg(format!("127.0.0.1:{}", node.port))
            .args([
                "--warehouses",
                "1",
                "--duration",
                "8",
                "--connections",
                "4",
                "--json",
            ])
            .args(first.then_some("--load"))
            .args(mode)
            .output()
            .expect("tessera bench tpcc runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{mode:?}: {stdout}\n{stderr}");
        let report: serde_json::Value =
            serde_json::from_str(stdout.trim()).expect("one JSON object");
        assert_eq!(report["consistency"], "ok", "{mode:?}: {report}");
        assert!(report["tpmc"].as_f64().unwrap() > 0.0, "{mode:?}: {report}");
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
                "{mode:?} {kind}: {report}"
            );
            assert!(
                transaction["p95_ms"].as_f64().is_some(),
                "{mode:?} {kind}: {report}"
            );
            assert_eq!(transaction["errors"], 0, "{mode:?} {kind}: {report}");
        }
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
