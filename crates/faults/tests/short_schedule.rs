//! The harness's short schedule, as CI runs it
//! (docs/design/0019-fault-harness.md): 4 data nodes on separate hosts,
//! bank and register clients on two client hosts, and kills, pauses
//! (shorter and longer than the detection time) and partitions dealt
//! from the seed, the cluster healed between two; then every history
//! must check valid, the replicas must agree, and the report directory
//! must hold what it promises. 75 s of faults by default
//! (`FAULTS_TIME=S` and `FAULTS_SEED=N` for others). Needs root,
//! iproute2 and nftables, and the `tessera` binary (built here if
//! missing). Nothing here asserts a timing.

use faults::nemesis::{Kind, Schedule};
use faults::run::{run, RunOptions};
use faults::workload::Workload;
use std::path::PathBuf;
use std::time::Duration;

#[test]
fn bank_and_register_stay_valid_through_kills_pauses_and_partitions() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("faults-short-schedule");
    let _ = std::fs::remove_dir_all(&dir);
    let number = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|text| text.parse().ok())
            .unwrap_or(default)
    };
    let options = RunOptions {
        seed: number("FAULTS_SEED", 1),
        time: Duration::from_secs(number("FAULTS_TIME", 75)),
        schedule: Schedule::Short,
        workloads: vec![Workload::Bank, Workload::Register],
        clients: 4,
        dir: dir.clone(),
        tessera: faults::cluster::find_or_build_tessera(None).expect("the tessera binary"),
    };
    let report = std::thread::spawn(move || run(&options))
        .join()
        .expect("the run's thread")
        .unwrap_or_else(|error| panic!("the run failed: {error}"));
    let recoveries =
        faults::recovery::measure(&report.windows, &faults::report::ok_operations(&report));
    let summary = faults::report::summary(&report, &recoveries);
    faults::report::write(&report, &summary).expect("the report is written");
    for line in &report.nemesis {
        eprintln!("nemesis: {line}");
    }
    eprintln!("{summary}");
    let counts = report.counts();
    for kind in [Kind::Kill, Kind::Pause, Kind::Partition] {
        assert!(
            counts.get(&kind).copied().unwrap_or(0) >= 1,
            "a {} happened: {counts:?}",
            kind.name()
        );
    }
    assert!(report.healed, "the cluster healed: {:?}", report.nemesis);
    for workload in &report.workloads {
        assert!(
            workload.ok > 100,
            "the {} clients were served: {}",
            workload.workload.name(),
            workload.verdict
        );
    }
    assert!(
        report.valid(),
        "{summary} (histories and logs in {})",
        dir.display()
    );
    for file in [
        "history-bank.jsonl",
        "history-register.jsonl",
        "nemesis.log",
        "summary.json",
        "timeline.png",
        "node2.log",
        "mgmd.log",
    ] {
        assert!(dir.join(file).is_file(), "the report has {file}");
    }
    // The summary is the object `--json` prints.
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(written["valid"], true);
    assert_eq!(written["workloads"]["bank"]["valid"], true);
    assert!(written["nemeses"]["partition"].as_u64() >= Some(1));
}
