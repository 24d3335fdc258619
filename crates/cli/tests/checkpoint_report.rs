//! `all report checkpoints` against real processes (design 0005,
//! "Reporting"): a cluster of 2 data nodes with 2 replicas answers
//! `tessera mgm -e "all report checkpoints"` with one entry per data node
//! holding every counter and the pacing, in JSON and as one text line per
//! node; under a load of inserts and updates the checkpoint count and the
//! changed row bytes grow on every node, and no counter ever goes back
//! between two reports. Also here: a config with `recovery_work` out of its
//! range is refused with the key, the line and the range.
//!
//! Nothing here asserts a timing: the polling deadline only guards
//! against a hang on a slow shared machine.

mod common;

use common::{
    fresh_dir, parse_json, run_tessera, ClusterOptions, TestCluster, FIRST_DATA_NODE, LDM_THREADS,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The counters and sizes of a node's entry, summed over its ldms.
const COUNTERS: [&str; 5] = [
    "lcp_count",
    "lcp_bytes_written",
    "changed_row_bytes",
    "checkpoint_disk_bytes",
    "live_data_bytes",
];

/// The counters that only grow while a node runs (the sizes may shrink).
const GROWING: [&str; 3] = ["lcp_count", "lcp_bytes_written", "changed_row_bytes"];

/// The numbers of `pacing`, of the node and of each of its ldms.
const PACING_NUMBERS: [&str; 5] = [
    "speed_bytes_per_second",
    "keep_up_bytes_per_second",
    "change_bytes_per_second",
    "redo_fill_percent",
    "busy_percent",
];

const DATA_NODES: u16 = 2;

/// Rows the load writes (inserted, then updated).
const RECORDS: &str = "3000";

/// Longest an insert or a report may take on a slow shared machine.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(180);

/// Longest wait for checkpoints of the loaded rows: generous, it only
/// guards against a hang.
const CHECKPOINT_TIMEOUT: Duration = Duration::from_secs(120);

/// An unsigned integer field of `object`, failing the test with `what`.
fn unsigned(object: &Value, name: &str, what: &str) -> u64 {
    object[name]
        .as_u64()
        .unwrap_or_else(|| panic!("{what}: {name} is not an unsigned integer: {object}"))
}

/// Checks the shape of an `all report checkpoints --json` answer (exactly
/// `{"nodes": [...]}`, one entry per data node, every field there with its
/// type) and returns each node's growing counters by node id.
fn check_report(report: &Value, node_ids: &[u16]) -> BTreeMap<u16, [u64; 3]> {
    let object = report
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {report}"));
    assert_eq!(
        object.keys().collect::<Vec<_>>(),
        ["nodes"],
        "only \"nodes\", no \"ok\": {report}"
    );
    let nodes = report["nodes"]
        .as_array()
        .unwrap_or_else(|| panic!("nodes is not an array: {report}"));
    let mut counters = BTreeMap::new();
    for node in nodes {
        let id = u16::try_from(unsigned(node, "id", "a node"))
            .unwrap_or_else(|_| panic!("node id out of range: {node}"));
        let what = format!("node {id}");
        for name in COUNTERS {
            unsigned(node, name, &what);
        }
        let pacing = &node["pacing"];
        assert!(
            pacing.is_object(),
            "{what}: pacing is not an object: {node}"
        );
        for name in PACING_NUMBERS {
            unsigned(pacing, name, &format!("{what} pacing"));
        }
        assert!(
            pacing["reason"]
                .as_str()
                .is_some_and(|reason| !reason.is_empty()),
            "{what}: pacing has no reason: {node}"
        );
        let ldms = pacing["ldms"]
            .as_array()
            .unwrap_or_else(|| panic!("{what}: pacing.ldms is not an array: {node}"));
        assert_eq!(
            ldms.len(),
            LDM_THREADS as usize,
            "{what}: one per ldm: {node}"
        );
        for (instance, ldm) in ldms.iter().enumerate() {
            let what = format!("{what} ldm {instance}");
            assert_eq!(unsigned(ldm, "instance", &what), instance as u64, "{node}");
            for name in PACING_NUMBERS {
                unsigned(ldm, name, &what);
            }
            assert!(
                ldm["reason"]
                    .as_str()
                    .is_some_and(|reason| !reason.is_empty()),
                "{what}: no reason: {node}"
            );
        }
        let growing = GROWING.map(|name| unsigned(node, name, &what));
        assert!(
            counters.insert(id, growing).is_none(),
            "node {id} is listed twice: {report}"
        );
    }
    assert_eq!(
        counters.keys().copied().collect::<Vec<u16>>(),
        node_ids,
        "one entry per data node: {report}"
    );
    counters
}

/// `tessera mgm -e "all report checkpoints" --json`, checked and parsed.
fn report_checkpoints(cluster: &TestCluster) -> (Value, BTreeMap<u16, [u64; 3]>) {
    let finished = cluster.mgm_json("all report checkpoints");
    assert!(
        finished.status.success(),
        "all report checkpoints --json failed: {finished:?}"
    );
    let report = parse_json(&finished.stdout, "all report checkpoints --json");
    let counters = check_report(&report, &cluster.node_ids());
    (report, counters)
}

/// Fails the test if any growing counter of any node went back.
fn assert_not_decreasing(
    before: &BTreeMap<u16, [u64; 3]>,
    after: &BTreeMap<u16, [u64; 3]>,
    report: &Value,
) {
    for (id, old) in before {
        let new = &after[id];
        for (index, name) in GROWING.iter().enumerate() {
            assert!(
                new[index] >= old[index],
                "node {id}: {name} went back from {} to {}: {report}",
                old[index],
                new[index]
            );
        }
    }
}

#[test]
fn every_data_node_reports_its_checkpoints_and_the_counters_grow_under_load() {
    // A value other than the default, so the key is carried from the file
    // through mgmd to every data node's ldms.
    let cluster = TestCluster::start(ClusterOptions {
        name: "checkpoint-report",
        data_nodes: DATA_NODES,
        replicas: 2,
        extra_cluster_lines: "recovery_work = 25\n",
        ..ClusterOptions::default()
    });
    let node_ids: Vec<u16> = (FIRST_DATA_NODE..FIRST_DATA_NODE + DATA_NODES).collect();
    assert_eq!(cluster.node_ids(), node_ids);
    let mgmd = cluster.mgmd_addr();

    let (_, first) = report_checkpoints(&cluster);

    // The text form: one line per data node, each beginning with its id.
    let text = run_tessera(
        &["mgm", "--mgmd", &mgmd, "-e", "all report checkpoints"],
        COMMAND_TIMEOUT,
    );
    assert!(text.status.success(), "all report checkpoints: {text:?}");
    let lines: Vec<&str> = text.stdout.lines().collect();
    assert_eq!(lines.len(), node_ids.len(), "{}", text.stdout);
    for (line, id) in lines.iter().zip(&node_ids) {
        assert!(
            line.starts_with(&format!("id={id}\tlcp_count=")),
            "{}",
            text.stdout
        );
    }

    let loaded = run_tessera(
        &[
            "bench",
            "keylookup",
            "--mgmd",
            &mgmd,
            "--records",
            RECORDS,
            "--phases",
            "insert,update",
        ],
        COMMAND_TIMEOUT,
    );
    assert!(loaded.status.success(), "load: {}", loaded.stderr);

    // Poll until every node checkpointed again and counted the changes,
    // checking on the way that no counter goes back.
    let deadline = Instant::now() + CHECKPOINT_TIMEOUT;
    let mut previous = first.clone();
    loop {
        let (report, counters) = report_checkpoints(&cluster);
        assert_not_decreasing(&previous, &counters, &report);
        let done = counters.iter().all(|(id, now)| {
            let [lcp_count, _, changed_row_bytes] = *now;
            lcp_count > first[id][0] && changed_row_bytes > 0
        });
        if done {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "within {CHECKPOINT_TIMEOUT:?} of the load, every node's lcp_count should have \
             grown from {first:?} and its changed_row_bytes be above 0: {report}"
        );
        previous = counters;
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn recovery_work_out_of_its_range_is_refused_with_the_key_line_and_range() {
    let dir = fresh_dir("recovery-work-range");
    let config = "\
[mgmd]
host = \"127.0.0.1\"
port = 1

[cluster]
recovery_work = 10

[[data_node]]
id = 2
host = \"127.0.0.1\"
port = 2
data_dir = \"node2\"
";
    let path = dir.join("config.toml");
    std::fs::write(&path, config).expect("write config");
    let finished = run_tessera(
        &["mgmd", "--config", &path.to_string_lossy()],
        COMMAND_TIMEOUT,
    );
    assert!(
        !finished.status.success(),
        "mgmd accepted recovery_work = 10: {finished:?}"
    );
    for part in [
        "config.toml:6:",
        "cluster.recovery_work",
        "between 25 and 100",
        "got 10",
    ] {
        assert!(
            finished.stderr.contains(part),
            "the message must contain {part:?}: {:?}",
            finished.stderr
        );
    }
}
