//! keylookup, the flexAsynch analogue (seed 001): threads send batches of
//! primary-key operations, one transaction per batch, and measure
//! throughput and batch latency per phase, while checking every row read
//! (see `rows` for how a row proves itself correct).
//!
//! Phases run in the order given, all threads together:
//! - `insert`: exactly keys 0..records, split in contiguous ranges per thread;
//! - `read`: committed reads of one pass over the keys, or of random keys
//!   for `duration_s` seconds;
//! - `update`: blind writes (upserts) of whole rows with a new round, one
//!   pass or random keys for `duration_s`;
//! - `delete`: exactly keys 0..records.
//!
//! A temporary error (lock wait timeout, overload, ...) is counted by code
//! and the batch retried after a short backoff. A constraint error on one
//! operation (a duplicate insert, a delete of a missing row) is counted and
//! the batch retried without that key. A permanent error is counted and the
//! batch given up. A lost connection ends the thread's phase.

use crate::report::{KeylookupReport, PhaseReport};
use crate::rows::{self, Rounds};
use crate::BenchError;
use client::{ClientError, Cluster, Commit, ErrorClass, ErrorCode, LockMode, Table, Value};
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use stdx::mix::XorShift;

/// One phase of a run.
///
/// ```
/// use bench::keylookup::Phase;
/// assert_eq!("read".parse::<Phase>(), Ok(Phase::Read));
/// assert_eq!(Phase::Delete.name(), "delete");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Phase {
    /// Insert keys 0..records.
    Insert,
    /// Read and verify.
    Read,
    /// Rewrite rows with a new round.
    Update,
    /// Delete keys 0..records.
    Delete,
}

impl Phase {
    /// Every phase, in the conventional order.
    ///
    /// ```
    /// assert_eq!(bench::keylookup::Phase::ALL.len(), 4);
    /// ```
    pub const ALL: [Phase; 4] = [Phase::Insert, Phase::Read, Phase::Update, Phase::Delete];

    /// The phase's name.
    ///
    /// ```
    /// assert_eq!(bench::keylookup::Phase::Insert.name(), "insert");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Phase::Insert => "insert",
            Phase::Read => "read",
            Phase::Update => "update",
            Phase::Delete => "delete",
        }
    }

    /// Parses a comma-separated list ("insert,read,update,read,delete");
    /// a phase may repeat. The error names the offending entry.
    ///
    /// ```
    /// use bench::keylookup::Phase;
    /// assert_eq!(Phase::parse_list("insert, read,read").unwrap(), [Phase::Insert, Phase::Read, Phase::Read]);
    /// let error = Phase::parse_list("insert,scan").unwrap_err();
    /// assert!(error.contains("\"scan\""), "{error}");
    /// assert!(Phase::parse_list("").is_err());
    /// ```
    pub fn parse_list(text: &str) -> Result<Vec<Phase>, String> {
        if text.trim().is_empty() {
            return Err(
                "no phases given; expected a comma-separated list such as insert,read,delete"
                    .into(),
            );
        }
        text.split(',').map(|entry| entry.trim().parse()).collect()
    }
}

impl FromStr for Phase {
    type Err = String;

    fn from_str(text: &str) -> Result<Phase, String> {
        Phase::ALL
            .into_iter()
            .find(|phase| phase.name().eq_ignore_ascii_case(text))
            .ok_or_else(|| {
                format!("unknown phase {text:?}; phases are insert, read, update and delete")
            })
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The default phase list.
///
/// ```
/// use bench::keylookup::{Phase, DEFAULT_PHASES};
/// assert_eq!(Phase::parse_list(DEFAULT_PHASES).unwrap().len(), 5);
/// ```
pub const DEFAULT_PHASES: &str = "insert,read,update,read,delete";

/// What to run.
///
/// ```
/// let options = bench::keylookup::KeylookupOptions::default();
/// assert_eq!(options.records, 100_000);
/// assert_eq!(options.phases.len(), 5);
/// ```
#[derive(Clone, Debug)]
pub struct KeylookupOptions {
    /// mgmd address ("host:port").
    pub mgmd: String,
    /// Keys 0..records.
    pub records: u64,
    /// Phases in order.
    pub phases: Vec<Phase>,
    /// Threads, each with its own transactions on the shared connection.
    pub threads: u32,
    /// Run read and update phases on random keys for this long instead
    /// of one pass (insert and delete always make exactly one pass).
    pub duration_s: Option<u64>,
    /// Table name.
    pub table: String,
    /// Value columns c0..c(N-1) besides the key and the round.
    pub columns: u32,
    /// Operations per transaction (batch).
    pub batch: u32,
    /// Whether the caller wants JSON output (the CLI prints `to_json`).
    pub json: bool,
}

impl Default for KeylookupOptions {
    fn default() -> Self {
        KeylookupOptions {
            mgmd: "127.0.0.1:11860".into(),
            records: 100_000,
            phases: vec![
                Phase::Insert,
                Phase::Read,
                Phase::Update,
                Phase::Read,
                Phase::Delete,
            ],
            threads: 4,
            duration_s: None,
            table: "keylookup".into(),
            columns: 25,
            batch: 8,
            json: false,
        }
    }
}

impl KeylookupOptions {
    /// Checks the options; the error says which one is wrong.
    ///
    /// ```
    /// let options = bench::keylookup::KeylookupOptions { batch: 0, ..Default::default() };
    /// assert!(options.validate().unwrap_err().to_string().contains("batch"));
    /// ```
    pub fn validate(&self) -> Result<(), BenchError> {
        let invalid = |message: &str| Err(BenchError::Options(message.to_string()));
        if self.records == 0 || self.records > u32::MAX as u64 + 1 {
            return invalid("records must be 1..=4294967296 (the key is an INT UNSIGNED)");
        }
        if self.threads == 0 {
            return invalid("threads must be at least 1");
        }
        if self.batch == 0 {
            return invalid("batch must be at least 1");
        }
        if self.columns as usize > max_value_columns() {
            return Err(BenchError::Options(format!(
                "columns must be at most {}",
                max_value_columns()
            )));
        }
        if self.phases.is_empty() {
            return invalid("no phases given");
        }
        if self.duration_s == Some(0) {
            return invalid("duration must be at least 1 second");
        }
        Ok(())
    }
}

fn max_value_columns() -> usize {
    // Two columns are the key and the round.
    client::MAX_COLUMNS - 2
}

/// What a read may find, from the phases run so far.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Expectation {
    /// No phase of this run has written yet: any verified row, or none.
    Unknown,
    /// Every key exists.
    Present,
    /// No key exists.
    Absent,
}

/// Runs the phases and returns their figures. Errors during phases are
/// counted in the report; only a failure to connect or to prepare the
/// table is an `Err`.
///
/// ```no_run
/// let options = bench::keylookup::KeylookupOptions { records: 1000, ..Default::default() };
/// let report = bench::keylookup::run(&options)?;
/// if report.mismatches() > 0 {
///     eprintln!("{}", report.to_text());
/// }
/// # Ok::<(), bench::BenchError>(())
/// ```
pub fn run(options: &KeylookupOptions) -> Result<KeylookupReport, BenchError> {
    options.validate()?;
    let cluster = Cluster::connect(&options.mgmd).map_err(|source| BenchError::Setup {
        context: format!("cannot connect through mgmd at {}", options.mgmd),
        source,
    })?;
    let table = prepare_table(&cluster, options).map_err(|source| BenchError::Setup {
        context: format!("cannot prepare table {:?}", options.table),
        source,
    })?;
    let rounds = Rounds::new();
    let mut expectation = Expectation::Unknown;
    let mut report = KeylookupReport::default();
    let mut seen: BTreeMap<&'static str, u32> = BTreeMap::new();
    for &phase in &options.phases {
        let count = seen.entry(phase.name()).or_insert(0);
        *count += 1;
        let name = match *count {
            1 => phase.name().to_string(),
            n => format!("{}#{n}", phase.name()),
        };
        let context = PhaseContext {
            cluster: &cluster,
            table: &table,
            options,
            rounds: &rounds,
            phase,
            expectation,
        };
        report.phases.push(context.run(name));
        expectation = match phase {
            Phase::Insert | Phase::Update => Expectation::Present,
            Phase::Delete => Expectation::Absent,
            Phase::Read => expectation,
        };
    }
    Ok(report)
}

/// Creates the table if missing, or drops and recreates it if its shape
/// differs from what the options ask for.
fn prepare_table(cluster: &Cluster, options: &KeylookupOptions) -> Result<Arc<Table>, ClientError> {
    let wanted = rows::table_definition(&options.table, options.columns);
    match cluster.table(&options.table) {
        Ok(existing) if rows::same_shape(existing.def(), &wanted) => return Ok(existing),
        Ok(_) => cluster.drop_table(&options.table)?,
        Err(error) if error.code() == Some(ErrorCode::UnknownTable) => {}
        Err(error) => return Err(error),
    }
    cluster.create_table(&wanted)?;
    cluster.table(&options.table)
}

struct PhaseContext<'a> {
    cluster: &'a Cluster,
    table: &'a Arc<Table>,
    options: &'a KeylookupOptions,
    rounds: &'a Rounds,
    phase: Phase,
    expectation: Expectation,
}

/// One thread's figures.
struct WorkerStats {
    operations: u64,
    transactions: u64,
    errors: u64,
    errors_by_code: BTreeMap<String, u64>,
    verified: u64,
    mismatches: u64,
    mismatch_examples: Vec<String>,
    latency_us: Histogram<u64>,
    /// The connection is gone: nothing more can succeed.
    connection_lost: bool,
}

/// Mismatch descriptions kept per phase.
const MISMATCH_EXAMPLES: usize = 5;
/// Attempts of one batch that fails temporarily before it is given up.
const MAX_ATTEMPTS: u32 = 100;

fn latency_histogram() -> Histogram<u64> {
    // 1 us .. 1 hour at 3 significant digits; longer batches saturate.
    Histogram::new_with_bounds(1, 3_600_000_000, 3)
        .expect("constant histogram bounds are valid: low >= 1, high >= 2 * low, sigfig <= 5")
}

impl WorkerStats {
    fn new() -> WorkerStats {
        WorkerStats {
            operations: 0,
            transactions: 0,
            errors: 0,
            errors_by_code: BTreeMap::new(),
            verified: 0,
            mismatches: 0,
            mismatch_examples: Vec::new(),
            latency_us: latency_histogram(),
            connection_lost: false,
        }
    }

    fn count_error(&mut self, error: &ClientError) {
        self.errors += 1;
        *self.errors_by_code.entry(error.label()).or_insert(0) += 1;
    }

    fn mismatch(&mut self, description: String) {
        self.mismatches += 1;
        if self.mismatch_examples.len() < MISMATCH_EXAMPLES {
            self.mismatch_examples.push(description);
        }
    }

    fn merge(&mut self, other: WorkerStats) {
        self.operations += other.operations;
        self.transactions += other.transactions;
        self.errors += other.errors;
        for (code, count) in other.errors_by_code {
            *self.errors_by_code.entry(code).or_insert(0) += count;
        }
        self.verified += other.verified;
        self.mismatches += other.mismatches;
        for example in other.mismatch_examples {
            if self.mismatch_examples.len() < MISMATCH_EXAMPLES {
                self.mismatch_examples.push(example);
            }
        }
        // Both histograms share bounds, so adding cannot fail.
        let _ = self.latency_us.add(&other.latency_us);
        self.connection_lost |= other.connection_lost;
    }
}

impl PhaseContext<'_> {
    fn run(&self, name: String) -> PhaseReport {
        let threads = self.options.threads as u64;
        let records = self.options.records;
        let started = Instant::now();
        let deadline = match (self.phase, self.options.duration_s) {
            (Phase::Read | Phase::Update, Some(seconds)) => {
                Some(started + Duration::from_secs(seconds))
            }
            _ => None,
        };
        let mut total = WorkerStats::new();
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|thread| {
                    let keys = records * thread / threads..records * (thread + 1) / threads;
                    scope.spawn(move || match deadline {
                        Some(deadline) => self.random_keys(thread, deadline),
                        None => self.one_pass(keys),
                    })
                })
                .collect();
            for worker in workers {
                match worker.join() {
                    Ok(stats) => total.merge(stats),
                    // A worker panic is a bug in this crate: surface it.
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
        });
        let elapsed_s = started.elapsed().as_secs_f64();
        let quantile = |q| total.latency_us.value_at_quantile(q);
        PhaseReport {
            name,
            kind: self.phase.name().to_string(),
            operations: total.operations,
            transactions: total.transactions,
            elapsed_s,
            ops_per_sec: if elapsed_s > 0.0 {
                total.operations as f64 / elapsed_s
            } else {
                0.0
            },
            errors: total.errors,
            errors_by_code: total.errors_by_code,
            verified: total.verified,
            mismatches: total.mismatches,
            mismatch_examples: total.mismatch_examples,
            p50_us: quantile(0.50),
            p95_us: quantile(0.95),
            p99_us: quantile(0.99),
            max_us: total.latency_us.max(),
        }
    }

    fn one_pass(&self, keys: std::ops::Range<u64>) -> WorkerStats {
        let mut stats = WorkerStats::new();
        let mut batch = Vec::with_capacity(self.options.batch as usize);
        let mut key = keys.start;
        while key < keys.end && !stats.connection_lost {
            batch.clear();
            while key < keys.end && batch.len() < self.options.batch as usize {
                batch.push(key as u32);
                key += 1;
            }
            self.execute_batch(&mut batch, &mut stats);
        }
        stats
    }

    fn random_keys(&self, thread: u64, deadline: Instant) -> WorkerStats {
        let mut stats = WorkerStats::new();
        let seed = thread ^ ((self.rounds.next() as u64) << 20);
        let mut random = XorShift::new(seed);
        let mut batch = Vec::with_capacity(self.options.batch as usize);
        while Instant::now() < deadline && !stats.connection_lost {
            batch.clear();
            batch
                .extend((0..self.options.batch).map(|_| random.below(self.options.records) as u32));
            self.execute_batch(&mut batch, &mut stats);
        }
        stats
    }

    /// Runs one batch to completion (with retries); `keys` may shrink as
    /// constraint errors take keys out.
    fn execute_batch(&self, keys: &mut Vec<u32>, stats: &mut WorkerStats) {
        let started = Instant::now();
        let mut attempts = 0;
        while !keys.is_empty() {
            attempts += 1;
            let error = match self.attempt(keys, stats) {
                Ok(()) => {
                    stats.transactions += 1;
                    let micros = started.elapsed().as_micros().max(1);
                    stats
                        .latency_us
                        .saturating_record(u64::try_from(micros).unwrap_or(u64::MAX));
                    return;
                }
                Err(error) => error,
            };
            if error.code() == Some(ErrorCode::ConnectionLost) {
                stats.count_error(&error);
                stats.connection_lost = true;
                return;
            }
            if error.class() == Some(ErrorClass::Constraint) {
                if let Some(index) = error.failed_op().map(|op| op.index() as usize) {
                    if index < keys.len() {
                        let key = keys.remove(index);
                        self.constraint_answer(key, &error, stats);
                        continue;
                    }
                }
            }
            stats.count_error(&error);
            // After a timeout the outcome is unknown: a blind retry could
            // double-apply (or trip over) a write that did commit.
            let unknown_outcome = matches!(error, ClientError::Timeout { .. });
            if !error.is_temporary() || unknown_outcome || attempts >= MAX_ATTEMPTS {
                return;
            }
            // Short, growing pause: the data node may be overloaded, or
            // the lock holder needs a moment to finish.
            std::thread::sleep(Duration::from_millis(u64::from(attempts.min(20))));
        }
    }

    /// Accounts for one operation answered by a constraint error (NoSuchRow,
    /// DuplicateKey): for reads a verdict on the data, for writes an error.
    fn constraint_answer(&self, key: u32, error: &ClientError, stats: &mut WorkerStats) {
        stats.operations += 1;
        let missing = error.code() == Some(ErrorCode::NoSuchRow);
        match (self.phase, self.expectation, missing) {
            (Phase::Read, Expectation::Present, true) => {
                stats.mismatch(format!("key {key}: row missing after it was written"));
            }
            (Phase::Read, _, true) => stats.verified += 1,
            _ => stats.count_error(error),
        }
    }

    /// One transaction for the batch.
    fn attempt(&self, keys: &[u32], stats: &mut WorkerStats) -> Result<(), ClientError> {
        let columns = self.options.columns;
        let mut transaction = self.cluster.transaction();
        let mut reads = Vec::new();
        for &key in keys {
            match self.phase {
                Phase::Insert => {
                    let values = rows::row_values(key, self.rounds.next(), columns);
                    transaction.insert(self.table, &values)?;
                }
                Phase::Update => {
                    let values = rows::row_values(key, self.rounds.next(), columns);
                    transaction.write(self.table, &values)?;
                }
                Phase::Delete => {
                    transaction.delete(self.table, &[Value::UInt(key as u64)])?;
                }
                Phase::Read => {
                    let op = transaction.read(
                        self.table,
                        &[Value::UInt(key as u64)],
                        LockMode::CommittedRead,
                    )?;
                    reads.push((key, op));
                }
            }
        }
        transaction.execute(Commit::Yes)?;
        stats.operations += keys.len() as u64;
        for (key, op) in reads {
            let verdict = match transaction.get(op) {
                None => Err(format!("key {key}: read succeeded without row data")),
                Some(_) if self.expectation == Expectation::Absent => {
                    Err(format!("key {key}: row found after it was deleted"))
                }
                Some(row) => rows::verify(row, key, columns),
            };
            match verdict {
                Ok(()) => stats.verified += 1,
                Err(description) => stats.mismatch(description),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_lists_parse_with_clear_errors() {
        assert_eq!(
            Phase::parse_list(DEFAULT_PHASES).unwrap(),
            KeylookupOptions::default().phases
        );
        assert_eq!(Phase::parse_list("READ").unwrap(), [Phase::Read]);
        let error = Phase::parse_list("insert,,read").unwrap_err();
        assert!(error.contains("\"\""), "{error}");
        let error = Phase::parse_list("insert,upsert").unwrap_err();
        assert_eq!(
            error,
            "unknown phase \"upsert\"; phases are insert, read, update and delete"
        );
    }

    #[test]
    fn options_are_validated() {
        assert!(KeylookupOptions::default().validate().is_ok());
        for options in [
            KeylookupOptions {
                threads: 0,
                ..Default::default()
            },
            KeylookupOptions {
                records: 0,
                ..Default::default()
            },
            KeylookupOptions {
                columns: 300,
                ..Default::default()
            },
            KeylookupOptions {
                phases: vec![],
                ..Default::default()
            },
            KeylookupOptions {
                duration_s: Some(0),
                ..Default::default()
            },
        ] {
            assert!(options.validate().is_err(), "{options:?}");
        }
    }
}
