//! Status and the replica checker: `mgm -e show`, `all report threads`
//! and `check replicas` against every node.

use crate::common::{
    assert_thread_roles, data_node, data_nodes_in, parse_json, threads_of_node, TestCluster,
    LDM_THREADS,
};
use std::time::{Duration, Instant};

/// Upper bound for mgmd to report a GCI above 0 (status is pushed).
const GCI_WAIT: Duration = Duration::from_secs(60);

/// `mgm -e show --json`: every data node started, with its pid and node
/// group, a GCI above 0; `all report threads --json`: each node's threads,
/// its ldm threads owning its group's partitions and all of them busy.
pub fn cluster_status(processes: &TestCluster) {
    let deadline = Instant::now() + GCI_WAIT;
    let show = loop {
        let finished = processes.mgm_json("show");
        assert!(finished.status.success(), "{finished:?}");
        let show = parse_json(&finished.stdout, "show --json");
        if show["latest_gci"].as_u64() > Some(0) || Instant::now() > deadline {
            break show;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        show["latest_gci"].as_u64() > Some(0),
        "a GCI above 0: {show}"
    );
    let data_nodes = data_nodes_in(&show);
    assert_eq!(data_nodes, processes.node_ids().len(), "{show}");
    for id in processes.node_ids() {
        let node = data_node(&show, id.into()).unwrap_or_else(|| panic!("no node {id}: {show}"));
        assert_eq!(node["state"], "started", "node {id}: {show}");
        assert_eq!(node["pid"], processes.node_pid_of(id), "node {id}: {show}");
        assert_eq!(node["group"], processes.group_of(id), "node {id}: {show}");
        assert_eq!(node["start_count"], 1, "node {id}: {show}");
    }

    let finished = processes.mgm_json("all report threads");
    assert!(finished.status.success(), "{finished:?}");
    let report = parse_json(&finished.stdout, "all report threads --json");
    assert_eq!(
        report["nodes"].as_array().map(Vec::len),
        Some(processes.node_ids().len()),
        "{report}"
    );
    let groups = processes.groups().len() as u32;
    for id in processes.node_ids() {
        let threads = threads_of_node(&report, id);
        assert_thread_roles(&threads, format_args!("node {id}: {report}"));
        let mut owned = Vec::new();
        for thread in &threads {
            match thread["role"].as_str() {
                Some("ldm") => {
                    owned.extend(
                        thread["partitions"]
                            .as_array()
                            .unwrap_or_else(|| {
                                panic!("node {id}: ldm without partitions: {thread}")
                            })
                            .iter()
                            .map(|p| p.as_u64().expect("partition") as u32),
                    );
                    assert!(
                        thread["signals"].as_u64() > Some(0),
                        "node {id}: every ldm served: {thread}"
                    );
                }
                Some("tc") => assert!(
                    thread["signals"].as_u64() > Some(0),
                    "node {id}: the tc served: {thread}"
                ),
                _ => {}
            }
        }
        owned.sort_unstable();
        let group = processes.group_of(id);
        let expected: Vec<u32> = (0..groups * LDM_THREADS)
            .filter(|p| p % groups == group)
            .collect();
        assert_eq!(
            owned, expected,
            "node {id} holds its group's partitions: {report}"
        );
    }
}

/// `mgm -e "check replicas" --json` finds every replica of every partition
/// alike. `live_rows` is a lower bound of the rows compared; the tables
/// left are kv, acct, wl, wl_ctr and side with the default partition
/// count and stale with 8.
pub fn check_replicas(processes: &TestCluster, live_rows: usize) {
    let partitions = 5 * processes.groups().len() as u64 * u64::from(LDM_THREADS) + 8;
    let finished = processes.mgm_json("check replicas");
    assert!(
        finished.status.success(),
        "PENDING if mgm has no `check replicas` yet: {finished:?}"
    );
    let report = parse_json(&finished.stdout, "check replicas --json");
    eprintln!(
        "check replicas: {} partitions, {} rows, {} mismatches",
        report["partitions_checked"], report["rows_checked"], report["mismatches"]
    );
    assert_eq!(report["mismatches"], 0, "{report}");
    assert!(report["details"].is_array(), "{report}");
    assert!(
        report["partitions_checked"].as_u64() >= Some(partitions),
        "at least {partitions} partitions: {report}"
    );
    assert!(
        report["rows_checked"].as_u64() >= Some(live_rows as u64),
        "at least the workload's {live_rows} rows: {report}"
    );
}
