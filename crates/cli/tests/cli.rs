//! The `tessera` command line against real processes: `bench keylookup`
//! over every phase with every read verified; the JSON of `mgm -e show`
//! and `mgm -e "all report threads"`; `demo` printing its ready line and
//! stopping every process it started on SIGTERM, and refusing a non-empty
//! data directory; `--help` of every subcommand; `tc_on_ldm` thread
//! placement serving transactions.

mod common;

use common::{
    assert_thread_roles, data_node, data_nodes_in, fresh_dir, parse_json, process_alive,
    run_tessera, send_signal, threads_of_node, threads_of_node2, wait_timeout, ClusterOptions,
    TestCluster, TESSERA,
};
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Upper bound for a whole benchmark run or a quick command.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(300);

const RECORDS: u64 = 20_000;

#[test]
fn bench_keylookup_and_mgm_json() {
    let processes = TestCluster::start(ClusterOptions {
        name: "cli-bench",
        data_memory: "64M",
        ..Default::default()
    });
    let mgmd = processes.mgmd_addr();
    bench_every_phase(&mgmd, RECORDS, &[]);

    // `mgm -e show --json`: the documented shape, the real pid.
    let finished = run_tessera(
        &["mgm", "--mgmd", &mgmd, "-e", "show", "--json"],
        COMMAND_TIMEOUT,
    );
    assert!(finished.status.success(), "{finished:?}");
    let show = parse_json(&finished.stdout, "show --json");
    let top: BTreeSet<&str> = show
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        top,
        BTreeSet::from(["latest_gci", "latest_complete_gci", "restored_gci", "nodes"]),
        "{show}"
    );
    assert!(show["latest_gci"].is_u64(), "{show}");
    assert!(show["latest_complete_gci"].is_u64(), "{show}");
    assert_eq!(
        show["restored_gci"], 0,
        "an initial start restores nothing: {show}"
    );
    let node = data_node(&show, 2).unwrap_or_else(|| panic!("no data node 2: {show}"));
    for (field, want) in [
        ("id", Value::from(2)),
        ("type", Value::from("data")),
        ("group", Value::from(0)),
        ("state", Value::from("started")),
        ("pid", Value::from(processes.node_pid())),
        ("start_count", Value::from(1)),
    ] {
        assert_eq!(node[field], want, "{field} in {node}");
    }
    assert!(
        show["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .all(|node| node["id"].is_u64() && node["type"].is_string()),
        "{show}"
    );
    assert!(
        show["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .any(|node| node["type"] == "mgmd"),
        "{show}"
    );
    let text = run_tessera(&["mgm", "--mgmd", &mgmd, "-e", "show"], COMMAND_TIMEOUT);
    assert!(text.status.success(), "{text:?}");
    assert!(
        text.stdout
            .contains(&format!("started, pid {}", processes.node_pid())),
        "{}",
        text.stdout
    );

    // `mgm -e "all report threads" --json`: every thread with its role and
    // signals; ldm threads with the partitions they own.
    let finished = run_tessera(
        &["mgm", "--mgmd", &mgmd, "-e", "all report threads", "--json"],
        COMMAND_TIMEOUT,
    );
    assert!(finished.status.success(), "{finished:?}");
    let report = parse_json(&finished.stdout, "all report threads --json");
    assert_eq!(
        report["nodes"].as_array().map(Vec::len),
        Some(1),
        "one data node: {report}"
    );
    let threads = threads_of_node2(&report);
    assert_thread_roles(&threads, &report);
    let mut owned = Vec::new();
    for thread in &threads {
        assert!(thread["name"].is_string(), "{thread}");
        assert!(thread["signals"].is_u64(), "{thread}");
        match thread["role"].as_str() {
            Some("ldm") => {
                let partitions = thread["partitions"]
                    .as_array()
                    .unwrap_or_else(|| panic!("ldm without partitions: {thread}"));
                assert!(!partitions.is_empty(), "{thread}");
                owned.extend(partitions.iter().map(|p| p.as_u64().expect("partition")));
                assert!(
                    thread["signals"].as_u64() > Some(0),
                    "an ldm served the benchmark: {thread}"
                );
            }
            Some("tc") => assert!(thread["signals"].as_u64() > Some(0), "{thread}"),
            _ => {}
        }
    }
    assert_eq!(
        threads
            .iter()
            .filter(|thread| thread["role"] == "ldm")
            .count(),
        2,
        "{report}"
    );
    let distinct: BTreeSet<u64> = owned.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        owned.len(),
        "no partition owned twice: {report}"
    );
    let text = run_tessera(
        &["mgm", "--mgmd", &mgmd, "-e", "all report threads"],
        COMMAND_TIMEOUT,
    );
    assert!(text.status.success(), "{text:?}");
    assert_eq!(
        text.stdout.lines().count(),
        threads.len(),
        "{}",
        text.stdout
    );

    let unknown = run_tessera(
        &["mgm", "--mgmd", &mgmd, "-e", "reboot all"],
        COMMAND_TIMEOUT,
    );
    assert!(!unknown.status.success(), "{unknown:?}");
}

/// Kills a demo's process group if the test fails before stopping it.
struct DemoGuard(u32);

impl Drop for DemoGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // The demo leads its own process group (setpgid in demo.rs):
            // this reaches the demo and every child it started, nothing else.
            send_signal(self.0, libc::SIGTERM);
            std::thread::sleep(Duration::from_secs(2));
            // SAFETY: kill(2) on the process group the demo created.
            unsafe {
                libc::kill(-(self.0 as libc::pid_t), libc::SIGKILL);
            }
        }
    }
}

/// A base port P with P and P+1 free (the demo uses P for mgmd and P+1 for
/// its data node).
/// `tc_on_ldm = true`: the tc instance runs on ldm thread 0 of each node
/// (no tc thread), and transactions work as before on two replicas: every
/// phase without errors, every read verified; `all report threads` names
/// the shared thread and counts its signals.
#[test]
fn tc_on_ldm_threads_serve_transactions() {
    let processes = TestCluster::start(ClusterOptions {
        data_memory: "64M",
        extra_thread_lines: "tc_on_ldm = true\n",
        ..ClusterOptions::pair("cli-tc-on-ldm")
    });
    let mgmd = processes.mgmd_addr();
    let records = 5_000u64;
    // With two secondary indexes, which every write keeps.
    bench_every_phase(&mgmd, records, &["--inflight", "16", "--indexes", "2"]);
    let finished = run_tessera(
        &["mgm", "--mgmd", &mgmd, "-e", "all report threads", "--json"],
        COMMAND_TIMEOUT,
    );
    assert!(finished.status.success(), "{finished:?}");
    let threads = parse_json(&finished.stdout, "all report threads --json");
    for id in [2, 3] {
        let node_threads = threads_of_node(&threads, id);
        let names: Vec<&str> = node_threads
            .iter()
            .map(|thread| thread["name"].as_str().expect("name"))
            .collect();
        assert!(names.contains(&"ldm0+tc0"), "node {id}: {names:?}");
        assert!(names.contains(&"ldm1"), "node {id}: {names:?}");
        assert!(
            node_threads.iter().all(|thread| thread["role"] != "tc"),
            "node {id}: no thread of its own for tc: {names:?}"
        );
        let shared = node_threads
            .iter()
            .find(|thread| thread["name"] == "ldm0+tc0")
            .expect("shared thread");
        assert_eq!(shared["role"], "ldm", "{shared}");
        assert!(
            shared["signals"].as_u64().expect("signals") > 4 * records,
            "the shared thread ran the tc's and its ldm's signals: {shared}"
        );
    }
}

/// Runs `bench keylookup --phases
/// insert,read,range,scan,update,read,delete,range,scan --json` over
/// `records` rows (with `extra` arguments) and checks its report: every
/// phase there, each over every row without an error or mismatch, every
/// read verified, every range and scan window whole while the rows are
/// there and empty after the delete.
fn bench_every_phase(mgmd: &str, records: u64, extra: &[&str]) {
    let records_text = records.to_string();
    let mut arguments = vec![
        "bench",
        "keylookup",
        "--mgmd",
        mgmd,
        "--records",
        &records_text,
        "--phases",
        "insert,read,range,scan,update,read,delete,range,scan",
        "--json",
    ];
    arguments.extend_from_slice(extra);
    let finished = run_tessera(&arguments, COMMAND_TIMEOUT);
    assert!(finished.status.success(), "bench failed: {finished:?}");
    let report = parse_json(&finished.stdout, "bench --json");
    let phases = report["phases"]
        .as_object()
        .unwrap_or_else(|| panic!("no phases: {report}"));
    let mut names: Vec<&str> = phases.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["delete", "insert", "range", "range#2", "read", "read#2", "scan", "scan#2", "update"],
        "{report}"
    );
    for (name, phase) in phases {
        assert_eq!(phase["errors"], 0, "{name}: {phase}");
        assert_eq!(phase["mismatches"], 0, "{name}: {phase}");
        if name == "range#2" {
            // After the delete: every range scanned, none with a row.
            assert_eq!(phase["operations"], 0, "{name}: {phase}");
            let ranges = phase["transactions"].as_u64().unwrap_or(0);
            assert!(
                ranges >= records / 100,
                "{name}: every range scanned: {phase}"
            );
            continue;
        }
        if phase["kind"] == "scan" {
            // Each thread's scan looks at every row there and returns its
            // window of 1% of the keys: every row once the keys are there.
            let scans = phase["transactions"].as_u64().unwrap_or(0);
            assert!(scans >= 1, "{name}: a scan ran: {phase}");
            let (examined, verified) = if name == "scan#2" {
                (0, 0)
            } else {
                (records * scans, (records / 100).max(1) * scans)
            };
            assert_eq!(
                phase["operations"], examined,
                "{name}: rows looked at: {phase}"
            );
            assert_eq!(
                phase["verified"], verified,
                "{name}: rows returned and verified: {phase}"
            );
            continue;
        }
        assert_eq!(phase["operations"], records, "{name}: {phase}");
        if phase["kind"] == "read" || phase["kind"] == "range" {
            assert_eq!(
                phase["verified"], records,
                "{name}: every read verified: {phase}"
            );
        }
    }
}

/// The ports a demo uses: its base port and the nineteen after it.
const DEMO_PORTS: u32 = 20;

/// A running `tessera demo` whose ready line was read.
struct StartedDemo {
    demo: Child,
    guard: DemoGuard,
    ready: String,
    base_port: u16,
    data_dir: PathBuf,
    stderr: std::thread::JoinHandle<String>,
}

/// Starts a demo on free ports and reads its ready line; retries with new
/// ports when one was taken between picking and binding it.
fn start_demo(dir: &Path) -> StartedDemo {
    for attempt in 0..5 {
        let data_dir = dir.join(format!("data{attempt}"));
        let base_port = common::free_port_block(DEMO_PORTS);
        let mut demo = Command::new(TESSERA)
            .args([
                "demo",
                "--base-port",
                &base_port.to_string(),
                "--data-dir",
                &data_dir.to_string_lossy(),
                "--data-memory",
                "16M",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start demo");
        let guard = DemoGuard(demo.id());
        let (lines, receiver) = mpsc::channel();
        let stdout = demo.stdout.take().expect("piped");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = demo.stderr.take().expect("piped");
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                text.push_str(&line);
                text.push('\n');
            }
            text
        });
        match receiver.recv_timeout(Duration::from_secs(180)) {
            Ok(ready) => {
                return StartedDemo {
                    demo,
                    guard,
                    ready,
                    base_port,
                    data_dir,
                    stderr,
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                // The demo exited without a ready line.
                let _ = wait_timeout(&mut demo, Duration::from_secs(30));
                let mut text = stderr.join().unwrap_or_default();
                // Every process's log: the mgmd's and each data node's.
                let mut logs: Vec<PathBuf> = std::fs::read_dir(&data_dir)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|entry| entry.path())
                    .filter(|path| path.extension().is_some_and(|extension| extension == "log"))
                    .collect();
                logs.sort();
                for log in logs {
                    text.push_str(&format!("--- {}\n", log.display()));
                    text.push_str(&std::fs::read_to_string(&log).unwrap_or_default());
                }
                if text.to_lowercase().contains("address already in use") {
                    continue;
                }
                panic!("the demo exited before its ready line: {text}");
            }
            Err(mpsc::RecvTimeoutError::Timeout) => panic!("no ready line from the demo"),
        }
    }
    panic!("the demo never found its ports free");
}

#[test]
fn demo_prints_ready_and_stops_everything_on_sigterm() {
    let dir = fresh_dir("demo");
    let StartedDemo {
        mut demo,
        guard,
        ready,
        base_port,
        data_dir,
        stderr,
    } = start_demo(&dir);
    let prefix = format!("ready mgmd=127.0.0.1:{base_port}");
    assert!(
        ready.starts_with(&prefix),
        "{ready:?} should start with {prefix:?}"
    );
    assert!(ready.starts_with("ready mgmd=127.0.0.1:"));
    let sql_port = base_port + 19;
    assert!(
        ready.contains(&format!(" sql=127.0.0.1:{sql_port} ")),
        "{ready:?} should name the SQL node"
    );
    // Its SQL node answers the mariadb client.
    let answer = std::process::Command::new("mariadb")
        .args(["-h", "127.0.0.1", "-P", &sql_port.to_string(), "-u", "root"])
        .args(["--batch", "--skip-column-names", "-e", "SELECT 6 * 7"])
        .output()
        .expect("the mariadb client is installed (.ci/run installs it)");
    assert_eq!(
        String::from_utf8_lossy(&answer.stdout),
        "42\n",
        "{answer:?}"
    );

    // The cluster it announced works, and names its processes.
    let mgmd = format!("127.0.0.1:{base_port}");
    let finished = run_tessera(
        &["mgm", "--mgmd", &mgmd, "-e", "show", "--json"],
        COMMAND_TIMEOUT,
    );
    assert!(finished.status.success(), "{finished:?}");
    let show = parse_json(&finished.stdout, "show --json");
    let node = data_node(&show, 2).unwrap_or_else(|| panic!("no node 2: {show}"));
    assert_eq!(node["state"], "started", "{show}");
    let pids: Vec<u32> = show["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter_map(|node| node["pid"].as_u64())
        .map(|pid| pid as u32)
        .collect();
    let data_nodes = data_nodes_in(&show);
    assert_eq!(
        data_nodes, 2,
        "the demo runs 2 data nodes by default: {show}"
    );
    assert_eq!(
        pids.len(),
        1 + data_nodes,
        "mgmd and every data node report pids: {show}"
    );
    for &pid in &pids {
        assert!(process_alive(pid), "pid {pid} runs: {show}");
        assert_ne!(pid, demo.id(), "the demo starts separate processes");
    }
    let finished = run_tessera(
        &[
            "bench",
            "keylookup",
            "--mgmd",
            &mgmd,
            "--records",
            "500",
            "--threads",
            "2",
        ],
        COMMAND_TIMEOUT,
    );
    assert!(finished.status.success(), "{finished:?}");

    send_signal(demo.id(), libc::SIGTERM);
    let status = wait_timeout(&mut demo, Duration::from_secs(60))
        .unwrap_or_else(|| panic!("the demo did not exit on SIGTERM"));
    let stderr = stderr.join().unwrap_or_default();
    assert!(status.success(), "demo exit {status}: {stderr}");
    for pid in pids {
        assert!(
            !process_alive(pid),
            "pid {pid} still runs after the demo stopped: {stderr}"
        );
    }
    drop(guard);
    assert!(
        data_dir.join("config.toml").exists(),
        "the data directory is kept"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn demo_refuses_a_non_empty_data_dir() {
    let dir = fresh_dir("demo-non-empty");
    std::fs::write(dir.join("precious.txt"), "keep me").expect("write");
    let port = common::free_port_block(DEMO_PORTS).to_string();
    let finished = run_tessera(
        &[
            "demo",
            "--base-port",
            &port,
            "--data-dir",
            &dir.to_string_lossy(),
        ],
        COMMAND_TIMEOUT,
    );
    assert!(!finished.status.success(), "{finished:?}");
    assert!(
        finished.stderr.contains("not empty"),
        "{:?}",
        finished.stderr
    );
    assert!(!finished.stdout.contains("ready"), "{:?}", finished.stdout);
    assert_eq!(
        std::fs::read_to_string(dir.join("precious.txt"))
            .ok()
            .as_deref(),
        Some("keep me"),
        "nothing in the directory is touched"
    );
    assert_eq!(
        std::fs::read_dir(&dir).expect("dir").count(),
        1,
        "nothing is added either"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_subcommand_has_help() {
    for args in [
        &["--help"][..],
        &["mgmd", "--help"][..],
        &["node", "--help"][..],
        &["sql", "--help"][..],
        &["mgm", "--help"][..],
        &["bench", "--help"][..],
        &["bench", "keylookup", "--help"][..],
        &["demo", "--help"][..],
        &["help"][..],
    ] {
        let finished = run_tessera(args, COMMAND_TIMEOUT);
        assert!(finished.status.success(), "{args:?}: {finished:?}");
        assert!(
            finished.stdout.contains("Usage:"),
            "{args:?}: {}",
            finished.stdout
        );
    }
    let version = run_tessera(&["--version"], COMMAND_TIMEOUT);
    assert!(version.status.success() && version.stdout.starts_with("tessera "));
    let nothing = run_tessera(&[], COMMAND_TIMEOUT);
    assert!(!nothing.status.success(), "no subcommand is an error");
}
