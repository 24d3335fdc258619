//! One whole run from a seed: start the nodes, run the bank until it has
//! verified everything and run the client's replica checker, let the
//! nodes settle, check that nothing is left behind in the blocks, and
//! report.

use crate::bank::{Bank, BankOptions};
use crate::config::{
    ClusterShape, NodeLimits, INACTIVE_TRANSACTION_TIMEOUT_MS, LOCK_WAIT_TIMEOUT_MS,
};
use crate::simulation::Simulation;
use crate::world::ClientIo;
use signal::replica_check::ReplicaCheckReport;
use signal::{ErrorCode, Gci};
use std::collections::BTreeMap;

/// Simulated time the nodes get after the last answer to finish what
/// follows an acknowledgement (COMPLETE) before the leftovers check.
const SETTLE_US: u64 = 100_000;

/// Simulated time a run may take before it is declared stuck (a lost
/// answer ends sooner, in the client's reply timeout).
const RUN_LIMIT_US: u64 = 3_600_000_000;

/// What a run does besides its seed.
#[derive(Clone, Debug, Default)]
pub struct SimOptions {
    /// The workload.
    pub bank: BankOptions,
    /// Data nodes and replicas.
    pub cluster: ClusterShape,
    /// Each node's record pools.
    pub limits: NodeLimits,
    /// Print every delivered signal to stderr.
    pub trace_to_stderr: bool,
}

/// What one run did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimReport {
    /// The seed.
    pub seed: u64,
    /// Data nodes and replicas.
    pub cluster: ClusterShape,
    /// Hash of (time, sender, receiver, signal number) of every delivery.
    pub trace_hash: u64,
    /// Signals delivered (to blocks and to API nodes).
    pub signals_delivered: u64,
    /// Simulated time at the end, microseconds.
    pub simulated_us: u64,
    /// Workload transactions that committed.
    pub transactions_committed: u64,
    /// Workload transactions that aborted or rolled back.
    pub transactions_aborted: u64,
    /// Of the aborted, those rolled back by the client.
    pub rolled_back: u64,
    /// Of the aborted, the refusals by error code number (see
    /// [`SimReport::abort_summary`]).
    pub aborts_by_code: BTreeMap<u16, u64>,
    /// Transfers that committed.
    pub transfers_committed: u64,
    /// Lock-wait timeouts the tcs counted.
    pub lock_wait_timeouts: u64,
    /// Inactivity timeouts the tcs counted.
    pub inactivity_timeouts: u64,
    /// The GCI every tc had switched to at the end.
    pub final_gci: Gci,
    /// The latest GCI recorded complete (durable) at the end.
    pub complete_gci: Gci,
    /// Sum of all balances read at the end.
    pub final_total_balance: i64,
    /// Scratch rows at the end.
    pub scratch_rows: u64,
    /// Commits the client reported durable (`Commit::Durable`).
    pub durable_commits: u64,
    /// Transactions started at a tc on the node of their first key's
    /// primary replica.
    pub started_at_primary: u64,
    /// Transactions started at a tc on another node.
    pub started_elsewhere: u64,
    /// The replica checker's outcome (no mismatch, or the run fails).
    pub replica_check: ReplicaCheckReport,
}

impl SimReport {
    /// Aborts by error name, for humans.
    pub fn abort_summary(&self) -> String {
        let mut parts: Vec<String> = self
            .aborts_by_code
            .iter()
            .map(|(&code, count)| match ErrorCode::from_u16(code) {
                Some(error) => format!("{error:?} {count}"),
                None => format!("code {code} {count}"),
            })
            .collect();
        parts.push(format!("rolled back {}", self.rolled_back));
        parts.join(", ")
    }
}

impl Simulation {
    /// Runs the default bank workload (at least 10,000 transactions) on a
    /// fresh one-node cluster from `seed`. Panics, naming the seed and how
    /// to rerun it, when a block or a check fails.
    pub fn run(seed: u64) -> SimReport {
        Simulation::run_with(seed, &SimOptions::default())
    }

    /// Runs `options` from `seed`.
    pub fn run_with(seed: u64, options: &SimOptions) -> SimReport {
        let mut simulation = Simulation::with_cluster(
            seed,
            options.cluster,
            options.limits,
            options.trace_to_stderr,
        );
        simulation.start_nodes();
        let mut bank = Bank::new(options.bank.clone());
        bank.begin(&mut simulation.client_io());
        simulation.finish_run(&mut bank)
    }

    /// Runs `bank` (begun) until it has verified everything and checked
    /// the replicas, lets the nodes settle, checks that nothing is left
    /// behind and reports.
    pub(crate) fn finish_run(&mut self, bank: &mut Bank) -> SimReport {
        while !bank.done() {
            assert!(
                self.step(bank),
                "the simulation ran out of events before the bank finished"
            );
            assert!(
                self.world().now_us() < RUN_LIMIT_US,
                "the bank did not finish within {} simulated seconds",
                RUN_LIMIT_US / 1_000_000
            );
        }
        let settle_until = self.world().now_us() + SETTLE_US;
        self.run_until_us(bank, settle_until);
        self.check_settled(bank);
        let replica_check = bank
            .replica_check()
            .expect("a finished bank checked the replicas");

        let counters = bank.counters();
        let (lock_wait_timeouts, inactivity_timeouts) =
            self.tcs().fold((0, 0), |(lock, inactive), tc| {
                let counters = tc.counters();
                (
                    lock + counters.lock_wait_timeouts,
                    inactive + counters.inactivity_timeouts,
                )
            });
        SimReport {
            seed: self.seed(),
            cluster: self.shape(),
            trace_hash: self.world().trace_hash(),
            signals_delivered: self.world().delivered(),
            simulated_us: self.world().now_us(),
            transactions_committed: counters.committed,
            transactions_aborted: counters.aborted,
            rolled_back: counters.rolled_back,
            aborts_by_code: counters.aborts_by_code.clone(),
            transfers_committed: counters.transfers_committed,
            lock_wait_timeouts,
            inactivity_timeouts,
            final_gci: self.world().latest_gci(),
            complete_gci: self.world().complete_gci(),
            final_total_balance: counters.final_total_balance,
            scratch_rows: counters.scratch_rows,
            durable_commits: counters.durable_commits,
            started_at_primary: counters.started_at_primary,
            started_elsewhere: counters.started_elsewhere,
            replica_check,
        }
    }

    /// A client's view of this simulation's world, to start a client.
    pub fn client_io(&mut self) -> ClientIo<'_> {
        self.world_io()
    }

    /// Nothing may be left in the blocks once every transaction ended and
    /// the nodes settled: no transaction or operation record in use, rows
    /// exactly as the clients' model says on every replica, every section
    /// back in the pool, the tcs finished exactly the transactions the
    /// clients heard end, and no commit the client reported durable is
    /// above the complete GCI.
    pub(crate) fn check_settled(&self, bank: &Bank) {
        let table = bank.table_id().expect("the bank created its table");
        let replicas = u64::from(self.shape().replicas);
        self.check_quiet(table, bank.rows_expected() * replicas);
        let fail = |message: String| -> ! { self.fail_end_of_run(message) };
        let (commits, aborts) = self.tcs().fold((0, 0), |(commits, aborts), tc| {
            (
                commits + tc.counters().commits,
                aborts + tc.counters().aborts,
            )
        });
        let counters = bank.counters();
        let (durable, complete) = (bank.durable_gci(), self.world().complete_gci());
        if durable > complete {
            fail(format!(
                "a commit in GCI {durable} was reported durable, but GCI {complete} is the \
                 latest complete one"
            ));
        }
        if (commits, aborts) != (counters.all_committed, counters.all_aborted) {
            fail(format!(
                "the tcs finished {commits} commits and {aborts} aborts, the clients heard of \
                 {} and {}",
                counters.all_committed, counters.all_aborted
            ));
        }
    }

    /// Every client ended and the nodes settled: no transaction or
    /// operation record in use, no node suspected by another, `rows` rows
    /// of table `table` over all replicas, every node on the president's
    /// schema version and GCI, every section back in the pool.
    pub(crate) fn check_quiet(&self, table: u32, rows_expected: u64) {
        let fail = |message: String| -> ! { self.fail_end_of_run(message) };
        for tc in self.tcs() {
            if tc.transactions_in_use() != 0 {
                fail(format!(
                    "tc {} still has {} transaction records in use",
                    kernel::Block::address(tc),
                    tc.transactions_in_use()
                ));
            }
        }
        for ldm in self.ldms() {
            if ldm.operations_in_use() != 0 {
                fail(format!(
                    "ldm {} still has {} operation records in use",
                    kernel::Block::address(ldm),
                    ldm.operations_in_use()
                ));
            }
            if let Err(problem) = ldm.check_ordered_indexes() {
                fail(format!("an ordered index differs from its rows: {problem}"));
            }
        }
        for membership in self.memberships() {
            // Nothing paused or cut off a node: a suspicion is a false one.
            if !membership.suspected().is_empty() {
                fail(format!(
                    "membership {} suspected nodes {:?} of having failed",
                    kernel::Block::address(membership),
                    membership.suspected()
                ));
            }
        }
        let rows: u64 = self.ldms().map(|ldm| ldm.rows(table)).sum();
        if rows != rows_expected {
            fail(format!(
                "the ldms hold {rows} rows of table {table} over all replicas, the clients expect {rows_expected}"
            ));
        }
        let world = self.world();
        let president = world.president();
        for &node in world.data_nodes() {
            if world.schema_version_of(node) != world.schema_version() {
                fail(format!(
                    "node {node}'s dict reported schema version {}, the president's {}",
                    world.schema_version_of(node),
                    world.schema_version()
                ));
            }
            let gci = world.latest_gci_of(node);
            if gci == Gci(0) || gci > world.latest_gci_of(president) {
                fail(format!(
                    "node {node}'s dih reported GCI {gci}, the master's {}",
                    world.latest_gci_of(president)
                ));
            }
        }
        if !self.sections_all_returned() {
            fail("sections were not returned to the pool".into());
        }
    }

    fn fail_end_of_run(&self, message: String) -> ! {
        panic!(
            "end-of-run check failed at {} us: {message} (timeouts: lock wait \
             {LOCK_WAIT_TIMEOUT_MS} ms, inactivity {INACTIVE_TRANSACTION_TIMEOUT_MS} ms)",
            self.world().now_us()
        )
    }
}
