//! Runs with whole-cluster crashes (docs/design/testing.md §3, design 0004):
//! the bank workload runs, the whole cluster crashes at a moment drawn from
//! the seed (every signal in flight, timer and disk answer dropped, every
//! disk losing or tearing what was not synced, every connection of the API
//! nodes lost), restarts from its disks, and the table is read back through
//! the client (replicas compared, then the primaries scanned) and checked
//! against what the clients knew at the crash: the
//! committed prefix up to the restored GCI (`bank::restart`,
//! `ledger::restart`). The clients then continue from the restored table,
//! and the next crash is judged against the next restored GCI. After the
//! last restart the bank runs to its end and the usual end-of-run checks run
//! (`run`).
//!
//! Besides the table, each restart must restore at least every GCI a node
//! reported complete before the crash (what clients were told is durable)
//! and the GCI of every commit the client reported durable,
//! no more than the GCIs handed out, the same GCI on every node, and new
//! GCIs start above every GCI handed out before (the world asserts that
//! each dih's reported GCIs only go up across restarts).

use crate::bank::{Bank, BankOptions, CrashedBank};
use crate::disk::CrashOutcome;
use crate::restored::{self, Restored, ScannedRow};
use crate::run::{SimOptions, SimReport};
use crate::simulation::Simulation;
use signal::Gci;
use stdx::mix::{fmix64, XorShift};

/// Simulated time the clients may take to describe their table, and the
/// cluster to complete a GCI, before the run is declared stuck.
const PROGRESS_LIMIT_US: u64 = 60_000_000;

/// Most signals of a restart's start phases, per data node, before a
/// crash interrupts it (a restart of the simulated clusters takes about
/// 200 signals per node, so about one interruption in five comes just
/// after the nodes started).
const RESTART_SIGNALS_PER_NODE: u64 = 250;

/// Mixed into the seed for the stream of crash moments (its own stream, so
/// crashes move no network delay or client decision of the run before).
const CRASH_STREAM: u64 = 0xc7a5_4000_0000_0001;

/// When a crash comes. Moments are counted in signals delivered rather
/// than in simulated time: the bank's lock convoys (an abandoned transfer
/// holds its locks for the inactivity timeout) fill much of the simulated
/// time with nothing committing, and a crash should mostly hit the cluster
/// while it commits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashAt {
    /// Once a GCI newer than any complete before this part of the run is
    /// complete, after up to `max_signals` more signals (random).
    AfterComplete {
        /// Most signals delivered after the new complete GCI.
        max_signals: u64,
    },
    /// After up to `max_signals` signals (random) from when the clients
    /// described their table, but no later than `max_us` after it, and
    /// right after a new GCI becomes complete if one does first. The first
    /// global checkpoint closes `gcp_interval_ms` (2 s) after the nodes
    /// start, and its durability round follows; the clients describe their
    /// table within milliseconds of the start: with `max_us` well below
    /// 2 s the crash comes before any new GCI is complete.
    BeforeComplete {
        /// Most signals delivered after the table is described.
        max_signals: u64,
        /// Latest simulated time after the table is described.
        max_us: u64,
    },
    /// After up to `max_signals` signals (random) from the start of this
    /// part of the run: while the clients register, create or describe
    /// their table, or load it.
    Early {
        /// Most signals delivered after the nodes started.
        max_signals: u64,
    },
}

/// The default crash: up to 60,000 signals (a few hundred to a few
/// thousand transactions) after a new complete GCI.
pub const AFTER_COMPLETE: CrashAt = CrashAt::AfterComplete {
    max_signals: 60_000,
};

/// A crash before the first new complete GCI (which comes about 2 s after
/// the start, with the simulator's `gcp_interval_ms`): up to 20,000
/// signals and 1.5 simulated seconds after the clients described their
/// table.
pub const BEFORE_COMPLETE: CrashAt = CrashAt::BeforeComplete {
    max_signals: 20_000,
    max_us: 1_500_000,
};

/// A crash while the clients register, create their table (or, after a
/// restart, describe it) and load their accounts: up to 3,000 signals after
/// the nodes started.
pub const EARLY: CrashAt = CrashAt::Early { max_signals: 3_000 };

/// What a run with crashes does.
#[derive(Clone, Debug, Default)]
pub struct CrashOptions {
    /// The cluster, limits and workload; `bank.transactions` is what the
    /// clients end after the last restart (before it, they run until the
    /// crash).
    pub run: SimOptions,
    /// The crashes, in order.
    pub crashes: Vec<CrashAt>,
    /// Each restart is interrupted by up to this many further crashes
    /// (how many, from the seed), each after a random number of the start
    /// phases' signals (possibly after the nodes started, before the
    /// clients came back); the table is checked after the restart that
    /// runs through.
    pub restart_crashes: u32,
}

/// What one crash and restart did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestartReport {
    /// When the cluster crashed, simulated microseconds.
    pub crashed_at_us: u64,
    /// The latest GCI any node reported complete before the crash.
    pub complete_before: Gci,
    /// The latest GCI handed out before the crash.
    pub latest_before: Gci,
    /// The GCI the restart restored.
    pub restored_gci: Gci,
    /// Whether the clients had their table (created and described) at
    /// the crash.
    pub described: bool,
    /// Writing transactions the clients heard commit since the last start.
    pub committed: u64,
    /// Of them, those committed after the restored GCI (lost, allowed).
    pub committed_lost: u64,
    /// Transactions in doubt at the crash.
    pub in_doubt: u64,
    /// Of them, those the restored table holds (they committed, in a GCI
    /// up to the restored one; the clients never heard).
    pub in_doubt_restored: u64,
    /// Rows read back after the restart.
    pub rows_restored: u64,
    /// What the disks lost, summed over the nodes.
    pub disks: CrashOutcome,
    /// Crashes that interrupted the restart (see
    /// [`CrashOptions::restart_crashes`]).
    pub restart_crashes: u32,
    /// How long the restart that ran through took, simulated microseconds.
    pub restart_us: u64,
    /// Signals delivered during that restart.
    pub restart_signals: u64,
}

/// What a run with crashes did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrashRunReport {
    /// Each crash and restart.
    pub restarts: Vec<RestartReport>,
    /// The run after the last restart, to its end.
    pub end: SimReport,
}

/// The cluster just crashed and restarted: what the clients knew, and the
/// table read back (replicas compared), not yet checked.
pub struct Restart {
    /// What the clients knew at the crash.
    pub crashed: CrashedBank,
    /// The GCI the restart restored.
    pub restored_gci: Gci,
    /// The primaries' rows.
    pub rows: Vec<ScannedRow>,
    /// The report so far.
    pub report: RestartReport,
}

impl Restart {
    /// The rows read back as the table restored at `gci` (the restored GCI,
    /// unless a test pretends otherwise), checked against what the clients
    /// knew.
    pub fn check_as(&self, gci: Gci) -> Result<Restored, String> {
        self.check_counting(gci).map(|(restored, _)| restored)
    }

    /// [`Restart::check_as`], also counting the transactions in doubt the
    /// table holds.
    fn check_counting(&self, gci: Gci) -> Result<(Restored, u64), String> {
        let restored = Restored::from_rows(gci, &self.rows)?;
        let in_doubt = self.crashed.check(&restored)?;
        Ok((restored, in_doubt))
    }
}

/// A run with crashes, step by step (for tests that do something between
/// the steps); [`Simulation::run_with_crashes`] runs one whole.
pub struct CrashRun {
    simulation: Simulation,
    bank: Option<Bank>,
    options: SimOptions,
    rng: XorShift,
    reports: Vec<RestartReport>,
    /// What the crash being handled found, until the restart.
    crash: Option<(CrashedBank, RestartReport)>,
}

impl CrashRun {
    /// Starts the cluster and the clients (which run until a crash).
    pub fn start(seed: u64, options: &SimOptions) -> CrashRun {
        let mut simulation = Simulation::with_cluster(
            seed,
            options.cluster,
            options.limits,
            options.trace_to_stderr,
        );
        // Its crash plan: the seed's, or SIM_CRASHES (see the test).
        simulation.set_replay("crash_restart", "replay_crash_seed");
        simulation.start_nodes();
        let mut bank = Bank::new(until_crash(&options.bank));
        bank.begin(&mut simulation.client_io());
        CrashRun {
            simulation,
            bank: Some(bank),
            options: options.clone(),
            rng: XorShift::new(fmix64(seed ^ CRASH_STREAM)),
            reports: Vec::new(),
            crash: None,
        }
    }

    /// The simulation (to corrupt a disk between a crash and the restart).
    pub fn simulation_mut(&mut self) -> &mut Simulation {
        &mut self.simulation
    }

    /// The simulation.
    pub fn simulation(&self) -> &Simulation {
        &self.simulation
    }

    /// Runs while `go_on` says so, failing the run if it takes longer than
    /// [`PROGRESS_LIMIT_US`] of simulated time.
    fn run_while(&mut self, what: &str, mut go_on: impl FnMut(&Simulation, &Bank) -> bool) {
        let limit = self.simulation.world().now_us() + PROGRESS_LIMIT_US;
        let mut bank = self.bank.take().expect("the clients run between restarts");
        while go_on(&self.simulation, &bank) {
            assert!(
                self.simulation.step(&mut bank),
                "the simulation ran out of events while waiting for {what}"
            );
            assert!(
                self.simulation.world().now_us() < limit,
                "{what} did not happen within {} simulated seconds",
                PROGRESS_LIMIT_US / 1_000_000
            );
        }
        self.bank = Some(bank);
    }

    /// Runs the clients until the moment `at` names.
    pub fn run_until_crash(&mut self, at: CrashAt) {
        let floor = self.simulation.world().complete_gci();
        if let CrashAt::Early { max_signals } = at {
            let until = self.simulation.world().delivered() + self.rng.below(max_signals + 1);
            return self.run_while("the crash moment", |simulation, _| {
                simulation.world().delivered() < until
            });
        }
        self.run_while("the clients to describe their table", |_, bank| {
            !bank.described()
        });
        let (before_complete, max_signals, until_us) = match at {
            CrashAt::Early { .. } => unreachable!("an early crash came above"),
            CrashAt::AfterComplete { max_signals } => {
                self.run_while("a new complete GCI", |simulation, _| {
                    simulation.world().complete_gci() <= floor
                });
                (false, max_signals, u64::MAX)
            }
            CrashAt::BeforeComplete {
                max_signals,
                max_us,
            } => (true, max_signals, self.simulation.world().now_us() + max_us),
        };
        let until = self.simulation.world().delivered() + self.rng.below(max_signals + 1);
        self.run_while("the crash moment", |simulation, _| {
            let world = simulation.world();
            world.delivered() < until
                && world
                    .next_event_time_us()
                    .is_some_and(|time| time <= until_us)
                && !(before_complete && world.complete_gci() > floor)
        });
    }

    /// The whole cluster crashes now (see [`Simulation::crash`]); nothing
    /// runs until [`CrashRun::restart`].
    pub fn crash(&mut self) {
        let mut bank = self.bank.take().expect("the clients run until a crash");
        let world = self.simulation.world();
        let (complete_before, latest_before, crashed_at_us) =
            (world.complete_gci(), world.latest_gci(), world.now_us());
        let mut disks = CrashOutcome::default();
        for (_, outcome) in self.simulation.crash() {
            disks.kept += outcome.kept;
            disks.torn += outcome.torn;
            disks.lost += outcome.lost;
        }
        // The API nodes see every transaction in flight fail, and end.
        bank.lose_connections(&mut self.simulation.client_io());
        let limit = self.simulation.world().now_us() + PROGRESS_LIMIT_US;
        while !bank.api_nodes_ended() {
            assert!(
                self.simulation.step(&mut bank),
                "the simulation ran out of events while the API nodes ended"
            );
            assert!(
                self.simulation.world().now_us() < limit,
                "the API nodes did not end after the crash"
            );
        }
        let crashed = bank.crashed();
        let report = RestartReport {
            crashed_at_us,
            complete_before,
            latest_before,
            restored_gci: Gci(0),
            described: crashed.described(),
            committed: crashed.committed(),
            committed_lost: 0,
            in_doubt: crashed.in_doubt(),
            in_doubt_restored: 0,
            rows_restored: 0,
            disks,
            restart_crashes: 0,
            restart_us: 0,
            restart_signals: 0,
        };
        self.crash = Some((crashed, report));
    }

    /// Restarts the crashed cluster from its disks, but crashes it again
    /// after up to `max_signals` signals (random) of its start phases, or
    /// right after it started if that came first (nothing else runs).
    pub fn interrupt_restart(&mut self, max_signals: u64) {
        let (_, report) = self.crash.as_mut().expect("a crash comes before a restart");
        let signals = self.rng.below(max_signals + 1);
        self.simulation.start_nodes_for(signals);
        for (_, outcome) in self.simulation.crash() {
            report.disks.kept += outcome.kept;
            report.disks.torn += outcome.torn;
            report.disks.lost += outcome.lost;
        }
        report.restart_crashes += 1;
    }

    /// Restarts the crashed cluster from its disks (the start phases),
    /// checks what every restart must do with GCIs (see the module doc),
    /// and reads the table back, comparing the replicas.
    pub fn restart(&mut self) -> Restart {
        let (crashed, mut report) = self.crash.take().expect("a crash comes before a restart");
        let world = self.simulation.world();
        let (began_us, began_signals) = (world.now_us(), world.delivered());
        self.simulation.start_nodes();
        let world = self.simulation.world();
        report.restart_us = world.now_us() - began_us;
        report.restart_signals = world.delivered() - began_signals;
        let restored_gci = world.restored_gci_of(world.president());
        for &node in world.data_nodes() {
            assert_eq!(
                world.restored_gci_of(node),
                restored_gci,
                "node {node} restored another GCI than the president"
            );
        }
        assert!(
            restored_gci >= report.complete_before,
            "the restart restored GCI {restored_gci}, but GCI {} was reported complete before \
             the crash: a durable GCI was lost",
            report.complete_before
        );
        assert!(
            restored_gci <= report.latest_before,
            "the restart restored GCI {restored_gci}, above the latest GCI handed out ({})",
            report.latest_before
        );
        assert!(
            crashed.durable_gci() <= restored_gci,
            "the restart restored GCI {restored_gci}, but the client reported a commit in GCI \
             {} durable",
            crashed.durable_gci()
        );
        report.restored_gci = restored_gci;
        report.committed_lost = crashed.committed_after(restored_gci);
        // Read by name: a table restored with rows the clients know of is
        // read even when the run that crashed had not described it again.
        let rows = restored::read_back(&mut self.simulation);
        report.rows_restored = rows.len() as u64;
        // The ordered indexes were rebuilt from the restored rows.
        for ldm in self.simulation.ldms() {
            if let Err(problem) = ldm.check_ordered_indexes() {
                panic!("after a restart, an ordered index differs from its rows: {problem}");
            }
        }
        Restart {
            crashed,
            restored_gci,
            rows,
            report,
        }
    }

    /// Checks the table `restart` read back against what the clients knew
    /// (panicking on a difference), then lets the clients continue from
    /// it: until the next crash, or, with `last`, to the end of the run.
    pub fn resume(&mut self, mut restart: Restart, last: bool) {
        let (restored, in_doubt) =
            restart
                .check_counting(restart.restored_gci)
                .unwrap_or_else(|error| {
                    panic!(
                        "after restart {} (restored GCI {}): the table is not the committed \
                     prefix up to the restored GCI: {error}",
                        self.reports.len() + 1,
                        restart.restored_gci
                    )
                });
        restart.report.in_doubt_restored = in_doubt;
        let options = if last {
            self.options.bank.clone()
        } else {
            until_crash(&self.options.bank)
        };
        let mut bank = Bank::resume(&restart.crashed, &restored, options);
        bank.begin(&mut self.simulation.client_io());
        self.bank = Some(bank);
        self.reports.push(restart.report);
    }

    /// Runs the clients to their end after the last restart, with the
    /// end-of-run checks.
    pub fn finish(mut self) -> CrashRunReport {
        let mut bank = self
            .bank
            .take()
            .expect("the clients run after the last restart");
        let end = self.simulation.finish_run(&mut bank);
        CrashRunReport {
            restarts: self.reports,
            end,
        }
    }
}

/// The workload before a crash: the same, without an end.
fn until_crash(bank: &BankOptions) -> BankOptions {
    BankOptions {
        transactions: u64::MAX,
        ..bank.clone()
    }
}

impl Simulation {
    /// Runs the bank from `seed` through `options.crashes` whole-cluster
    /// crashes and restarts, checking the restored table after each (see
    /// the module doc), then to the end of the workload with the usual
    /// end-of-run checks. Panics, naming the seed, when a check fails.
    pub fn run_with_crashes(seed: u64, options: &CrashOptions) -> CrashRunReport {
        assert!(
            !options.crashes.is_empty(),
            "run_with_crashes needs at least one crash (run_with runs none)"
        );
        let mut run = CrashRun::start(seed, &options.run);
        for (index, &at) in options.crashes.iter().enumerate() {
            run.run_until_crash(at);
            run.crash();
            let interruptions = run.rng.below(u64::from(options.restart_crashes) + 1);
            let max_signals = RESTART_SIGNALS_PER_NODE * u64::from(options.run.cluster.data_nodes);
            for _ in 0..interruptions {
                run.interrupt_restart(max_signals);
            }
            let restart = run.restart();
            run.resume(restart, index + 1 == options.crashes.len());
        }
        run.finish()
    }
}
