//! The harness's short schedule (docs/design/0019-fault-harness.md): 4
//! data nodes on separate hosts, register clients on two client hosts,
//! data nodes killed with SIGKILL every few seconds (their angels restart
//! them), then healed; every key's history must be linearizable (20 s
//! in CI; `JEPSEN_TIME=S` and `JEPSEN_SEED=N` for others). Needs
//! root, iproute2 and nftables, and the `tessera` binary (built here if
//! missing). Nothing here asserts a timing.

use jepsen::run::{run, RunOptions};
use std::path::PathBuf;
use std::time::Duration;

fn tessera() -> PathBuf {
    if let Ok(path) = jepsen::cluster::find_tessera(None) {
        return path;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let built = std::process::Command::new(cargo)
        .args(["build", "-p", "cli", "--bin", "tessera"])
        .status()
        .expect("cargo runs");
    assert!(built.success(), "building tessera");
    jepsen::cluster::find_tessera(None).expect("tessera, just built")
}

#[test]
fn registers_stay_linearizable_while_data_nodes_are_killed() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("jepsen-register-kills");
    let _ = std::fs::remove_dir_all(&dir);
    let number = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|text| text.parse().ok())
            .unwrap_or(default)
    };
    let options = RunOptions {
        seed: number("JEPSEN_SEED", 1),
        time: Duration::from_secs(number("JEPSEN_TIME", 20)),
        clients: 4,
        kill_every: Duration::from_secs(6),
        dir: dir.clone(),
        tessera: tessera(),
    };
    let report = std::thread::spawn(move || run(&options))
        .join()
        .expect("the run's thread")
        .unwrap_or_else(|error| panic!("the run failed: {error}"));
    for line in &report.nemesis {
        eprintln!("nemesis: {line}");
    }
    for verdict in &report.verdicts {
        eprintln!("{verdict}");
    }
    assert!(
        report.nemesis.iter().any(|line| line.contains("kill -9")),
        "the nemesis killed nodes: {:?}",
        report.nemesis
    );
    assert!(
        report
            .nemesis
            .iter()
            .any(|line| line.contains("every data node started")),
        "{:?}",
        report.nemesis
    );
    assert!(
        report
            .verdicts
            .iter()
            .all(|verdict| verdict.operations > 100),
        "the clients ran: {:?}",
        report.verdicts
    );
    assert!(
        report.valid(),
        "{:?} (history and logs in {})",
        report.verdicts,
        dir.display()
    );
}
