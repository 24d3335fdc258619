//! The simulator with faults (docs/design/testing.md §5c): runs of a
//! transfer workload on 2 to 4 data nodes under a random schedule of
//! crashes, pauses, partitions, broken links (between data nodes, and
//! between the clients and a node), arbitrator cut-offs and fault points
//! (crash or stall), each drawn from its seed, with the invariants checked
//! after every step and the history checked at the end and after a
//! whole-cluster restart (`sim::chaos`).
//!
//! `cargo test -p sim --test chaos` runs the fixed set of 200 seeds (CI
//! does, as part of the workspace's tests). Any number of
//! seeds: `SIM_CHAOS_SEEDS=1000 SIM_FIRST_SEED=5000 cargo test -p sim
//! --release --test chaos -- chaos_seeds --nocapture`; one seed again:
//! `SIM_SEED=7 cargo test -p sim --release --test chaos -- --ignored
//! replay_chaos_seed --nocapture` (add `SIM_TRACE=1` to print every
//! signal). A failing seed prints the command that replays it.

use sim::{run_chaos, ChaosOptions, ChaosReport};
use std::time::Instant;

fn number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(default)
}

fn run(seed: u64, options: &ChaosOptions) -> ChaosReport {
    let started = Instant::now();
    let report = run_chaos(seed, options);
    println!("{report} ({:.2} s wall)", started.elapsed().as_secs_f64());
    report
}

/// The fixed seed set: seeds 1 to 200 (about 40 s on this machine in
/// the workspace's optimised test profile), or as `SIM_CHAOS_SEEDS` and
/// `SIM_FIRST_SEED` say. Across the set, the faults must have done what
/// they are for: nodes stopped, transfers caught with an unknown outcome,
/// clusters that went on and checked live, restarts with a stale node.
#[test]
fn chaos_seeds() {
    let count = number("SIM_CHAOS_SEEDS", 200);
    let first = number("SIM_FIRST_SEED", 1);
    let started = Instant::now();
    let reports: Vec<ChaosReport> = (first..first + count)
        .map(|seed| run(seed, &ChaosOptions::default()))
        .collect();
    println!(
        "{count} chaos seeds from {first} in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    for report in &reports {
        // A cluster that still served at the end must have committed
        // something. One that went down may not have: seed 3453's first
        // transfers deadlocked (resolved by the lock wait timeout) and
        // faults took every node down before the next ones ran.
        let (acked, _, _) = report.transfers;
        assert!(
            acked > 0 || !report.verified_live,
            "seed {}: no transfer committed, yet the cluster served at the end",
            report.seed
        );
    }
    let committed = reports
        .iter()
        .filter(|report| report.transfers.0 > 0)
        .count();
    assert!(
        committed * 100 >= reports.len() * 95,
        "only {committed} of {} seeds committed a transfer",
        reports.len()
    );
    if count < 100 {
        return;
    }
    let some = |what: &str, found: bool| assert!(found, "no seed of the set {what}");
    some(
        "stopped a node",
        reports.iter().any(|report| !report.stopped.is_empty()),
    );
    some(
        "went on with a node down and checked the live cluster",
        reports
            .iter()
            .any(|report| report.verified_live && !report.stopped.is_empty()),
    );
    some(
        "caught a transfer with its outcome unknown",
        reports.iter().any(|report| report.transfers.2 > 0),
    );
    some(
        "restarted with a stale node",
        reports
            .iter()
            .any(|report| !report.restart.stale.is_empty()),
    );
    some(
        "restarted without the lowest node id, stale",
        reports
            .iter()
            .any(|report| report.restart.stale.contains(&report.shape.node_ids()[0])),
    );
    let fired = |wanted: &[&str]| {
        reports.iter().any(|report| {
            report
                .fired
                .iter()
                .any(|(_, point, _)| wanted.contains(&point.name()))
        })
    };
    some(
        "crashed or stalled a node while it agreed a failure",
        fired(&["FAILURE_AFTER_PREPARE", "FAILURE_AFTER_COMMIT"]),
    );
    some(
        "crashed or stalled a node taking over a coordinator or the master",
        fired(&[
            "TAKEOVER_AFTER_QUERY",
            "TAKEOVER_AFTER_DECISION",
            "MASTER_TAKEOVER_AFTER_QUERY",
        ]),
    );
    some(
        "crashed or stalled the master dict in the middle of a create or drop",
        fired(&[
            "CREATE_AFTER_ADD_REQUESTS",
            "CREATE_AFTER_FIRST_ANNOUNCE",
            "DROP_AFTER_COORDINATORS",
            "DROP_AFTER_FIRST_DICTIONARY",
        ]),
    );
    some(
        "stalled a node at a fault point",
        reports.iter().any(|report| {
            report
                .fired
                .iter()
                .any(|(_, _, action)| *action != sim::FaultAction::Crash)
        }),
    );
    some(
        "broke the clients' links to a node that ran on",
        reports
            .iter()
            .any(|report| report.faults.contains("clients' links") && report.verified_live),
    );
    some(
        "shut the whole cluster down",
        reports.iter().any(|report| !report.verified_live),
    );
}

#[test]
fn a_chaos_run_is_a_function_of_its_seed() {
    let options = ChaosOptions::default();
    assert_eq!(run(3, &options), run(3, &options));
}

/// `SIM_SEED=N` reruns one seed (`SIM_NODES` and `SIM_REPLICAS`, as a
/// failure prints them, name the shape the seed drew); `SIM_TRACE=1`
/// prints every signal.
#[test]
#[ignore = "on demand: reruns the seed in SIM_SEED"]
fn replay_chaos_seed() {
    let seed = number("SIM_SEED", 1);
    let shape = match (
        std::env::var("SIM_NODES").ok(),
        std::env::var("SIM_REPLICAS").ok(),
    ) {
        (Some(nodes), Some(replicas)) => Some(sim::ClusterShape::new(
            nodes.parse().expect("SIM_NODES is a number"),
            replicas.parse().expect("SIM_REPLICAS is a number"),
        )),
        _ => None,
    };
    let options = ChaosOptions {
        shape,
        trace_to_stderr: std::env::var_os("SIM_TRACE").is_some(),
        ..ChaosOptions::default()
    };
    run(seed, &options);
}
