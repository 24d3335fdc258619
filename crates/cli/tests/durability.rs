//! Durability against real processes (design 0004,
//! docs/design/durability.md): a cluster of 4 data nodes with 2 replicas
//! (two node groups) under a concurrent load of transactions that each write
//! several rows across both node groups, killed with SIGKILL, every data
//! node at once, at an arbitrary moment, then restarted from disk. After
//! each restart, through the benchmark's ledger (`bench keylookup --ledger`,
//! see crates/bench/src/ledger.rs): every write acknowledged with a GCI up
//! to the restored GCI is there, none acknowledged with a larger GCI is (so
//! no transaction is partly there: its rows share its GCI), every write
//! acknowledged `--durable` is there whatever the restored GCI, no row holds
//! a round the ledger never saw, and the replica checker finds every replica
//! equal. The restored GCI never goes back.
//!
//! `TESSERA_KILL_ROUNDS=N` runs N rounds (default 15, the CI figure);
//! `TESSERA_TEST_SEED` repeats the choices of kill moments and loads.
//! Nothing here asserts a timing: the kill moment only decides how much
//! work is in flight when the nodes die.

mod common;

use common::{
    record_restart, restored_gci, run_tessera, send_signal, wait_timeout, ClusterOptions,
    TestCluster, TESSERA,
};
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Rows of the test table (small: every round reads them all back).
const RECORDS: u32 = 3000;

/// Longest a verification or insert may take on a slow shared machine.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(180);

fn seed() -> u64 {
    std::env::var("TESSERA_TEST_SEED")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |elapsed| elapsed.as_nanos() as u64)
        })
}

fn rounds() -> u32 {
    std::env::var("TESSERA_KILL_ROUNDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(15)
}

/// Checks every row against the ledger for `restored` and every replica.
fn verify(cluster: &TestCluster, ledger: &str, restored: &str, round: u32) {
    let mgmd = cluster.mgmd_addr();
    let records = RECORDS.to_string();
    let verified = run_tessera(
        &[
            "bench",
            "keylookup",
            "--mgmd",
            &mgmd,
            "--records",
            &records,
            "--verify-only",
            "--ledger",
            ledger,
            "--restored-gci",
            restored,
            "--json",
        ],
        COMMAND_TIMEOUT,
    );
    assert!(
        verified.status.success(),
        "round {round}: verification against the ledger at restored GCI {restored} failed:\n\
         stdout: {}\nstderr: {}",
        verified.stdout,
        verified.stderr
    );
    let report: Value = serde_json::from_str(verified.stdout.trim())
        .unwrap_or_else(|error| panic!("bench printed no JSON ({error}): {}", verified.stdout));
    let text = report.to_string();
    assert!(
        text.contains("\"mismatches\":0") && text.contains("\"errors\":0"),
        "round {round}: rows differ from the ledger at restored GCI {restored}: {text}"
    );
    let check = cluster.mgm_json("check replicas");
    let check: Value = serde_json::from_str(check.stdout.trim())
        .unwrap_or_else(|error| panic!("check replicas printed no JSON ({error})"));
    assert_eq!(
        check["mismatches"], 0,
        "round {round}: replicas differ after the restart: {check}"
    );
    assert!(
        check["rows_checked"].as_u64().is_some(),
        "round {round}: the checker reports what it compared: {check}"
    );
}

#[test]
fn whole_cluster_kills_under_load_lose_no_complete_gci() {
    let seed = seed();
    eprintln!("durability kill test: seed {seed} (TESSERA_TEST_SEED repeats its choices)");
    let mut random = stdx::mix::XorShift::new(seed);
    let mut cluster = TestCluster::start(ClusterOptions {
        name: "durability-kill",
        data_memory: "32M",
        data_nodes: 4,
        replicas: 2,
        ..ClusterOptions::default()
    });
    let ledger = cluster.dir().join("ledger");
    let ledger = ledger.to_string_lossy().into_owned();
    let mgmd = cluster.mgmd_addr();
    let records = RECORDS.to_string();
    let inserted = run_tessera(
        &[
            "bench",
            "keylookup",
            "--mgmd",
            &mgmd,
            "--records",
            &records,
            "--phases",
            "insert",
            "--ops-per-txn",
            "4",
            "--ledger",
            &ledger,
        ],
        COMMAND_TIMEOUT,
    );
    assert!(
        inserted.status.success(),
        "insert failed: {}",
        inserted.stderr
    );
    let mut last_restored = 0;
    for round in 0..rounds() {
        // Transactions of 2 to 8 rows over every node group, several in
        // flight, until the nodes die under them.
        let ops_per_txn = (2 + random.below(7)).to_string();
        let load_args = |threads: &'static str, durable: bool| {
            let mut args: Vec<String> = [
                "bench",
                "keylookup",
                "--mgmd",
                &mgmd,
                "--records",
                &records,
                "--phases",
                "update",
                "--duration",
                "600",
                "--threads",
                threads,
                "--inflight",
                "4",
                "--ops-per-txn",
                &ops_per_txn,
                "--ledger",
                &ledger,
            ]
            .iter()
            .map(|arg| arg.to_string())
            .collect();
            if durable {
                // Acknowledged only once durable: always present after.
                args.push("--durable".into());
            }
            args
        };
        let spawn_load = |args: Vec<String>| {
            Command::new(TESSERA)
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start the load")
        };
        let mut loads = [
            spawn_load(load_args("2", false)),
            spawn_load(load_args("1", true)),
        ];
        // An arbitrary moment: sometimes before a global checkpoint
        // completes, sometimes after several.
        std::thread::sleep(Duration::from_millis(300 + random.below(4000)));
        cluster.kill_data_nodes();
        for load in &mut loads {
            send_signal(load.id(), libc::SIGKILL);
            let _ = wait_timeout(load, Duration::from_secs(30));
        }
        cluster.restart_data_nodes();
        let (restored, restored_number) = restored_gci(&cluster);
        record_restart(&ledger, &restored);
        eprintln!("round {round}: restored GCI {restored} ({ops_per_txn} rows per transaction)");
        assert!(
            restored_number >= last_restored,
            "round {round}: the restored GCI went back from {last_restored} to {restored_number}"
        );
        last_restored = restored_number;
        verify(&cluster, &ledger, &restored, round);
    }
    assert!(
        last_restored > 0,
        "no global checkpoint ever completed, so nothing was tested"
    );
    let text = std::fs::read_to_string(&ledger).expect("read the ledger");
    assert!(
        text.lines().any(|line| line.ends_with(" durable")),
        "no durable commit was ever acknowledged, so that promise was not tested"
    );
}

/// A commit acknowledged in a GCI that never became durable is lost when
/// the whole cluster is killed; after the restart a wait for that GCI is
/// refused for good (`ClientError::RolledBack`), not confirmed because the
/// new run's GCIs are above it.
#[test]
fn a_wait_for_a_gci_that_a_restart_rolled_back_is_refused() {
    // Global checkpoints a minute apart: nothing committed after the start
    // becomes durable before the kill.
    let mut cluster = TestCluster::start(ClusterOptions {
        name: "rolled_back",
        extra_cluster_lines: "gcp_interval_ms = 60000\n",
        ..ClusterOptions::default()
    });
    let gci = {
        let client = cluster.connect();
        let table = common::create_table(&client, &common::kv_definition());
        let mut transaction = client.transaction();
        transaction
            .insert(
                &table,
                &[
                    ("k", client::Value::UInt(1)),
                    ("v", client::Value::from("gone")),
                ],
            )
            .expect("valid insert");
        let outcome = transaction.execute(client::Commit::Yes).expect("committed");
        outcome.gci.expect("a write has a GCI")
    };
    cluster.kill_data_nodes();
    cluster.restart_data_nodes();
    let (_, restored) = restored_gci(&cluster);
    assert!(
        restored < gci.0,
        "the commit's GCI {gci} was not durable, yet the cluster restored {restored:#x}"
    );
    let client = cluster.connect();
    match client.wait_durable(gci) {
        Err(client::ClientError::RolledBack { gci: refused }) => assert_eq!(refused, gci),
        other => panic!("a wait for rolled-back GCI {gci} answered {other:?}"),
    }
    // The restored GCI itself is durable.
    let complete = client
        .wait_durable(signal::Gci(restored))
        .expect("the restored GCI is complete");
    assert!(complete.0 >= restored);
}
