//! Storage faults against a real data node (fail-fast,
//! docs/design/durability.md §6): damage to bytes that were durable stops
//! the node at restart with a message naming the file and the offset, and it
//! never serves the bad data; a damaged copy of the system file is survived
//! while the other is good.
//!
//! Each test runs one data node (replicas 1), writes rows, waits until
//! global checkpoints made them durable, kills the node, damages a file in
//! its data directory and restarts it. Also here: a restart restores from
//! the redo log alone (local checkpoints off) and from local checkpoints
//! alone (nothing written after them), each checked row by row against the
//! writes' ledger.

mod common;

use common::{record_restart, restored_gci, run_tessera, ClusterOptions, TestCluster};
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// Flips one bit of the byte at `offset` in `path`.
fn flip_bit(path: &Path, offset: u64) {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap_or_else(|error| panic!("open {}: {error}", path.display()));
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, offset)
        .unwrap_or_else(|error| panic!("read {} at {offset}: {error}", path.display()));
    byte[0] ^= 0x10;
    file.write_all_at(&byte, offset)
        .unwrap_or_else(|error| panic!("write {} at {offset}: {error}", path.display()));
    file.sync_all().expect("sync the damaged file");
}

const RECORDS: &str = "3000";

/// The ledger of the rows written, in the cluster's directory.
fn ledger_of(cluster: &TestCluster) -> String {
    cluster.dir().join("ledger").to_string_lossy().into_owned()
}

/// Starts one node (with `extra_cluster_lines` in its config), writes rows
/// (recorded in the ledger) and waits until two more global checkpoints
/// are complete after them (so their redo pages are durable and later
/// pages say so), then kills the node.
fn cluster_with_durable_rows(name: &'static str, extra_cluster_lines: &'static str) -> TestCluster {
    let mut cluster = TestCluster::start(ClusterOptions {
        name,
        extra_cluster_lines,
        ..ClusterOptions::default()
    });
    let mgmd = cluster.mgmd_addr();
    let ledger = ledger_of(&cluster);
    let inserted = run_tessera(
        &[
            "bench",
            "keylookup",
            "--mgmd",
            &mgmd,
            "--records",
            RECORDS,
            "--phases",
            "insert,update",
            "--ledger",
            &ledger,
        ],
        Duration::from_secs(120),
    );
    assert!(inserted.status.success(), "insert: {}", inserted.stderr);
    let complete =
        |cluster: &TestCluster| cluster.show()["latest_complete_gci"].as_u64().unwrap_or(0) >> 32;
    let target = cluster.show()["latest_gci"].as_u64().unwrap_or(0) >> 32;
    let deadline = Instant::now() + Duration::from_secs(120);
    while complete(&cluster) < target + 2 {
        assert!(
            Instant::now() < deadline,
            "global checkpoints did not complete: {}",
            cluster.show()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    cluster.kill_data_nodes();
    cluster
}

#[test]
fn a_bit_flipped_in_durable_redo_stops_the_node_naming_file_and_offset() {
    // Without local checkpoints the restart reads the redo log from its
    // first page, so the damaged page is read.
    let mut cluster = cluster_with_durable_rows("fault-redo", "local_checkpoints = false\n");
    let redo = cluster.data_dir_of(2).join("redo/0/0.redo");
    // Page 2 of the part's first file: written and fsynced long ago.
    let offset = 2 * 4096 + 300;
    flip_bit(&redo, offset);
    let (status, log) = cluster.restart_expecting_exit(2);
    let status = status.unwrap_or_else(|| panic!("the node kept running on damaged redo:\n{log}"));
    assert!(!status.success(), "the node exited with {status}:\n{log}");
    assert!(
        log.contains("fatal") && log.contains("redo part 0 is corrupt at file 0 offset 8192"),
        "the message names the part, file and offset of the damaged page:\n{log}"
    );
    // Damaged before it served: an angel would not start it again, and
    // the log says what to do.
    assert_eq!(status.code(), Some(7), "{log}");
    assert!(log.contains("start this one with --initial"), "{log}");
    assert!(
        !log.contains("tessera node: started, serving\ntessera node 2: fatal")
            && log.matches("started, serving").count() == 1,
        "the damaged node never served:\n{log}"
    );
}

#[test]
fn a_system_file_with_both_copies_damaged_stops_the_node_and_one_copy_is_survived() {
    let mut cluster = cluster_with_durable_rows("fault-system", "");
    let system = cluster.data_dir_of(2).join("system/0.sys");
    // One copy (slot A, in its complete GCI field): the other one serves.
    flip_bit(&system, 33);
    cluster.restart_data_nodes();
    let log = cluster.node_log_of(2);
    assert!(
        log.contains("system file") && log.contains("damaged copy at offset"),
        "the damaged copy is reported:\n{log}"
    );
    let restored = cluster.show()["restored_gci"].as_u64().unwrap_or(0);
    assert!(restored > 0, "the good copy's complete GCI was restored");
    // Both copies (the restart rewrote slot A from the good one; damage
    // both now): nothing says which GCI is complete, so the node stops.
    cluster.kill_data_nodes();
    flip_bit(&system, 33);
    flip_bit(&system, 512 + 33);
    let (status, log) = cluster.restart_expecting_exit(2);
    let status = status.unwrap_or_else(|| panic!("the node kept running:\n{log}"));
    assert!(!status.success(), "the node exited with {status}:\n{log}");
    assert!(
        log.contains("fatal") && log.contains("system file") && log.contains("offset"),
        "the message names the system file and the offsets:\n{log}"
    );
}

/// Every row as the ledger says it must be at the restored GCI.
fn verify_rows(cluster: &TestCluster) {
    let (restored, number) = restored_gci(cluster);
    assert!(
        number > 0,
        "the restart restored a complete GCI ({restored})"
    );
    let ledger = ledger_of(cluster);
    let verified = run_tessera(
        &[
            "bench",
            "keylookup",
            "--mgmd",
            &cluster.mgmd_addr(),
            "--records",
            RECORDS,
            "--verify-only",
            "--ledger",
            &ledger,
            "--restored-gci",
            &restored,
        ],
        Duration::from_secs(120),
    );
    assert!(
        verified.status.success(),
        "rows differ from the ledger at {restored}:\n{}\n{}",
        verified.stdout,
        verified.stderr
    );
}

/// The count of a restart phase's log lines (`<name>: <ms> ms, <count>
/// <unit>`), summed over the ldm threads.
fn phase_count(log: &str, name: &str) -> u64 {
    let prefix = format!("{name}: ");
    log.lines()
        .filter_map(|line| line.split_once(prefix.as_str()))
        .filter_map(|(_, rest)| rest.split(", ").nth(1))
        .filter_map(|count| count.split(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// The log of the node's latest start.
fn last_start(log: &str) -> &str {
    &log[log.rfind("listening on").unwrap_or(0)..]
}

#[test]
fn a_restart_restores_from_the_redo_log_alone() {
    let mut cluster = cluster_with_durable_rows("restore-redo-only", "local_checkpoints = false\n");
    cluster.restart_data_nodes();
    let log = cluster.node_log_of(2);
    let start = last_start(&log);
    assert!(
        phase_count(start, "replay redo log") >= 6000
            && phase_count(start, "restore local checkpoints") == 0,
        "every insert and update came back from redo, nothing from checkpoints:\n{log}"
    );
    verify_rows(&cluster);
}

#[test]
fn a_restart_restores_from_local_checkpoints_alone() {
    let mut cluster = cluster_with_durable_rows("restore-lcp-only", "");
    // Restart until a restart finds every row in the checkpoints and
    // replays no change: the LCPs (one partition every 200 ms) covered the
    // rows and nothing was written after them. Restarts write no rows.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        cluster.restart_data_nodes();
        let log = cluster.node_log_of(2);
        let start = last_start(&log);
        let loaded = phase_count(start, "restore local checkpoints");
        let replayed = phase_count(start, "replay redo log");
        if loaded >= 3000 && replayed == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no restart came from the checkpoints alone (last: {loaded} loaded, {replayed} \
             replayed):\n{log}"
        );
        std::thread::sleep(Duration::from_secs(3));
        cluster.kill_data_nodes();
    }
    verify_rows(&cluster);
}

#[test]
fn a_bit_flipped_in_a_local_checkpoint_data_file_stops_the_node() {
    let mut cluster = cluster_with_durable_rows("fault-lcp", "");
    let lcp = cluster.data_dir_of(2).join("lcp");
    let mut data_files: Vec<_> = walk(&lcp)
        .into_iter()
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "data")
                && std::fs::metadata(path).is_ok_and(|meta| meta.len() > 8192)
        })
        .collect();
    data_files.sort();
    let data = data_files
        .first()
        .unwrap_or_else(|| panic!("no checkpoint data file with rows in {}", lcp.display()))
        .clone();
    let middle = std::fs::metadata(&data).expect("size").len() / 2;
    flip_bit(&data, middle);
    let (status, log) = cluster.restart_expecting_exit(2);
    let status = status.unwrap_or_else(|| panic!("the node kept running on a damaged LCP:\n{log}"));
    assert!(!status.success(), "the node exited with {status}:\n{log}");
    let relative = data
        .strip_prefix(cluster.data_dir_of(2))
        .expect("inside the data directory")
        .to_string_lossy()
        .into_owned();
    assert!(
        log.contains("fatal") && log.contains(&relative) && log.contains("at byte"),
        "the message names {relative} and the byte offset:\n{log}"
    );
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return files;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn deleted_rows_stay_deleted_and_reinserted_rows_come_back_across_restarts() {
    let mut cluster = TestCluster::start(ClusterOptions {
        name: "restart-deletes",
        ..ClusterOptions::default()
    });
    let mgmd = cluster.mgmd_addr();
    let ledger = ledger_of(&cluster);
    let phases = |phases: &str| {
        let finished = run_tessera(
            &[
                "bench",
                "keylookup",
                "--mgmd",
                &mgmd,
                "--records",
                RECORDS,
                "--phases",
                phases,
                "--ledger",
                &ledger,
            ],
            Duration::from_secs(120),
        );
        assert!(finished.status.success(), "{phases}: {}", finished.stderr);
    };
    // Every row inserted, deleted, inserted again and deleted again, with
    // restarts in between: whatever the restored GCI, each row must be in
    // the state of its last acknowledged change up to it.
    phases("insert,delete");
    for (round, next) in ["insert", "delete", ""].into_iter().enumerate() {
        std::thread::sleep(Duration::from_millis(2500));
        cluster.kill_data_nodes();
        cluster.restart_data_nodes();
        let (restored, _) = restored_gci(&cluster);
        record_restart(&ledger, &restored);
        let verified = run_tessera(
            &[
                "bench",
                "keylookup",
                "--mgmd",
                &mgmd,
                "--records",
                RECORDS,
                "--verify-only",
                "--ledger",
                &ledger,
                "--restored-gci",
                &restored,
            ],
            Duration::from_secs(120),
        );
        assert!(
            verified.status.success(),
            "round {round}: rows differ from the ledger at {restored}:\n{}\n{}",
            verified.stdout,
            verified.stderr
        );
        if !next.is_empty() {
            phases(next);
        }
    }
}

#[test]
fn a_restart_with_a_node_missing_names_it_and_goes_on_once_it_comes() {
    let mut cluster = TestCluster::start(ClusterOptions::pair("restart-missing-node"));
    cluster.kill_data_nodes();
    // Only node 2: it waits for node 3 (every node's disk takes part in
    // a system restart) and says so.
    cluster.spawn_data_node(2);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cluster
        .node_log_of(2)
        .contains("waiting for data node(s) 3 to connect")
    {
        assert!(
            Instant::now() < deadline,
            "node 2 never named the missing node:\n{}",
            cluster.node_log_of(2)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        cluster.node_is_running_of(2),
        "node 2 waits, it does not stop"
    );
    cluster.restart_data_nodes();
}
