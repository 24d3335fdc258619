//! The bank through the real client (`sim::client_bank`): the production
//! `client` crate on hosted API nodes, over the simulated network and
//! clock, against one node and against two nodes with two replicas.

use sim::client_bank::{self, ClientBankOptions};
use sim::ClusterShape;

fn two_replicas() -> ClientBankOptions {
    ClientBankOptions {
        cluster: ClusterShape {
            data_nodes: 2,
            replicas: 2,
        },
        ..ClientBankOptions::default()
    }
}

#[test]
fn the_real_client_runs_the_bank_on_one_node() {
    for seed in 1..=3 {
        let report = client_bank::run(seed, &ClientBankOptions::default());
        eprintln!("{report:?}");
        assert!(
            report.committed > 0,
            "seed {seed}: nothing committed: {report:?}"
        );
        assert!(
            report.durable > 0,
            "seed {seed}: no durable commit: {report:?}"
        );
        assert_eq!(report.final_total, 40 * 1000);
        assert!(report.partitions_checked > 0);
    }
}

#[test]
fn the_real_client_runs_the_bank_on_two_replicas() {
    for seed in 11..=12 {
        let report = client_bank::run(seed, &two_replicas());
        assert!(
            report.committed > 0,
            "seed {seed}: nothing committed: {report:?}"
        );
        assert_eq!(report.final_total, 40 * 1000);
    }
}

#[test]
fn the_same_seed_gives_the_same_run_through_the_real_client() {
    let first = client_bank::run(21, &two_replicas());
    let second = client_bank::run(21, &two_replicas());
    assert_eq!(first, second);
    let other = client_bank::run(22, &two_replicas());
    assert_ne!(
        first.trace_hash, other.trace_hash,
        "another seed, another run"
    );
}

fn with_crash(options: ClientBankOptions) -> ClientBankOptions {
    ClientBankOptions {
        crash_within_signals: Some(20_000),
        ..options
    }
}

/// A whole-cluster crash mid-run: the real client classes what it sent
/// (in doubt or failed), and the restored table is the committed prefix
/// up to the restored GCI, checked by a fresh API node through the client.
#[test]
fn after_a_crash_the_real_client_reads_back_the_committed_prefix() {
    let mut in_doubt = 0;
    for seed in 31..=36 {
        let options = if seed % 2 == 0 {
            with_crash(two_replicas())
        } else {
            with_crash(ClientBankOptions::default())
        };
        let report = client_bank::run(seed, &options);
        eprintln!("{report:?}");
        let restart = report.restart.expect("the run crashed");
        assert!(restart.restored_gci >= restart.complete_before);
        assert!(restart.in_doubt_restored <= restart.in_doubt);
        in_doubt += restart.in_doubt;
    }
    assert!(in_doubt > 0, "some crash caught a commit in flight");
}
