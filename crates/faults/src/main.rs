//! `faults`: the fault harness from the command line
//! (docs/design/0019-fault-harness.md):
//!
//! ```text
//! faults run --schedule short|long [--time SECONDS] [--seed S]
//!            [--workloads bank,set,register,durable] --report DIR [--json]
//! ```
//!
//! Separate hosts, a cluster of 4 data nodes under angels, the
//! workloads' clients, faults drawn from the schedule and the seed, then
//! healed and checked. Prints the nemesis log, each verdict and the
//! recovery figures; with `--json` the last line is the summary object.
//! Exits 1 on an invalid verdict (printing the command that replays the
//! schedule), 2 when the run cannot be made (no root, iproute2 or
//! nftables; no `tessera` binary; bad arguments).

use clap::{Parser, Subcommand};
use faults::nemesis::Schedule;
use faults::workload::Workload;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(about = "Fault tests of Tessera on separate network hosts, in Jepsen's manner")]
struct Options {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// One run: cluster, clients, nemesis, healing, checks, report.
    Run(RunArguments),
}

#[derive(clap::Args, Debug)]
struct RunArguments {
    /// short: kills, pauses and partitions; long: also mgmd kills,
    /// rolling restarts and whole-cluster kills.
    #[arg(long)]
    schedule: String,
    /// Seconds of load and faults (default: 120 short, 3600 long).
    #[arg(long)]
    time: Option<u64>,
    /// The seed of the schedule and the clients.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Comma-separated (default: bank,register short; all four long).
    #[arg(long)]
    workloads: Option<String>,
    /// Clients per workload (over two client hosts).
    #[arg(long, default_value_t = 4)]
    clients: u64,
    /// The report directory (histories, logs, summary, timeline); new
    /// or empty.
    #[arg(long)]
    report: PathBuf,
    /// Print the summary object as the last line.
    #[arg(long)]
    json: bool,
    /// The tessera binary (default: next to this program).
    #[arg(long)]
    tessera: Option<PathBuf>,
}

fn main() -> ExitCode {
    let Command::Run(arguments) = Options::parse().command;
    match run(&arguments) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(error) => {
            eprintln!("faults: {error}");
            ExitCode::from(2)
        }
    }
}

fn run(arguments: &RunArguments) -> Result<bool, String> {
    let schedule = Schedule::parse(&arguments.schedule)?;
    let workloads =
        Workload::parse_list(arguments.workloads.as_deref().unwrap_or(match schedule {
            Schedule::Short => "bank,register",
            Schedule::Long => "bank,set,register,durable",
        }))?;
    let time = arguments.time.unwrap_or(match schedule {
        Schedule::Short => 120,
        Schedule::Long => 3600,
    });
    if arguments.clients == 0 || arguments.clients > 64 {
        return Err(format!("--clients {}: 1 to 64", arguments.clients));
    }
    faults::report::usable_dir(&arguments.report)?;
    let options = faults::run::RunOptions {
        seed: arguments.seed,
        time: Duration::from_secs(time),
        schedule,
        workloads: workloads.clone(),
        clients: arguments.clients,
        dir: arguments.report.clone(),
        tessera: faults::cluster::find_or_build_tessera(arguments.tessera.as_deref())?,
    };
    let report = std::thread::spawn(move || faults::run::run(&options))
        .join()
        .map_err(|_| "the run panicked".to_string())?
        .map_err(|error| format!("the run failed: {error}"))?;
    let recoveries =
        faults::recovery::measure(&report.windows, &faults::report::ok_operations(&report));
    let summary = faults::report::summary(&report, &recoveries);
    faults::report::write(&report, &summary)?;
    for line in &report.nemesis {
        println!("nemesis {line}");
    }
    for workload in &report.workloads {
        println!(
            "{} (ok {}, fail {}, info {})",
            workload.verdict, workload.ok, workload.fail, workload.info
        );
    }
    println!("{}", report.replicas);
    for line in faults::report::recovery_lines(&summary) {
        println!("{line}");
    }
    println!("report in {}", arguments.report.display());
    let valid = report.valid();
    if !valid {
        let names: Vec<&str> = workloads.iter().map(|workload| workload.name()).collect();
        println!(
            "INVALID (seed {}); replay this schedule: cargo run --release -p faults -- run \
             --schedule {} --time {time} --seed {} --workloads {} --clients {} --report NEW_DIR",
            arguments.seed,
            schedule.name(),
            arguments.seed,
            names.join(","),
            arguments.clients
        );
    }
    if arguments.json {
        println!("{summary}");
    }
    Ok(valid)
}
