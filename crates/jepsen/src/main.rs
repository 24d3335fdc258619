//! `tessera-jepsen`: one run of the fault harness from the command line
//! (docs/design/0019-fault-harness.md): separate hosts, a cluster of 4
//! data nodes under angels, register clients, data nodes killed on a
//! schedule from the seed, then healed and checked. Prints the nemesis
//! log and each workload's verdict; exits 1 on an invalid one (with the
//! command that replays the schedule), 2 when the run could not be made
//! (no root, iproute2 or nftables; no `tessera` binary).

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(about = "Fault tests of Tessera on separate network hosts, in Jepsen's manner")]
struct Options {
    /// Seconds of load and faults.
    #[arg(long, default_value_t = 60)]
    time: u64,
    /// The nemesis schedule's seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Register clients (over two client hosts).
    #[arg(long, default_value_t = 4)]
    clients: u64,
    /// Mean seconds between kills of a data node.
    #[arg(long, default_value_t = 6)]
    kill_every: u64,
    /// The run's directory (config, logs, history, nemesis log).
    #[arg(long, default_value = "jepsen-run")]
    dir: PathBuf,
    /// The tessera binary (default: next to this program).
    #[arg(long)]
    tessera: Option<PathBuf>,
}

fn main() -> ExitCode {
    let options = Options::parse();
    let tessera = match jepsen::cluster::find_tessera(options.tessera.as_deref()) {
        Ok(path) => path,
        Err(error) => {
            eprintln!("tessera-jepsen: {error}");
            return ExitCode::from(2);
        }
    };
    if options.dir.exists() {
        eprintln!(
            "tessera-jepsen: {} exists: give a new --dir (a run keeps its logs there)",
            options.dir.display()
        );
        return ExitCode::from(2);
    }
    let run_options = jepsen::run::RunOptions {
        seed: options.seed,
        time: Duration::from_secs(options.time),
        clients: options.clients.max(1),
        kill_every: Duration::from_secs(options.kill_every.max(1)),
        dir: options.dir.clone(),
        tessera,
    };
    let result = std::thread::spawn(move || jepsen::run::run(&run_options)).join();
    let report = match result {
        Ok(Ok(report)) => report,
        Ok(Err(error)) => {
            eprintln!("tessera-jepsen: the run failed: {error}");
            return ExitCode::from(2);
        }
        Err(_) => {
            eprintln!("tessera-jepsen: the run panicked");
            return ExitCode::from(2);
        }
    };
    for line in &report.nemesis {
        println!("nemesis {line}");
    }
    for verdict in &report.verdicts {
        println!("{verdict}");
    }
    println!("history, nemesis log and logs in {}", report.dir.display());
    if report.valid() {
        ExitCode::SUCCESS
    } else {
        println!(
            "replay this schedule: tessera-jepsen --seed {} --time {} --clients {} --kill-every {} --dir NEW_DIR",
            options.seed, options.time, options.clients, options.kill_every
        );
        ExitCode::from(1)
    }
}
