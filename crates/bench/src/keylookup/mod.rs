//! keylookup, the flexAsynch analogue (seed 001): threads keep transactions
//! of primary-key operations in flight through the client's async API and
//! measure throughput and transaction latency per phase, while checking
//! every row they read (see `rows` for how a row proves itself correct).
//!
//! Each thread is both flexAsynch's Definer and its Executor: it defines
//! transactions (each started on the tc of its first key's primary, so the
//! data node's per-tc counters show the routing) and keeps `inflight` of
//! them outstanding in one `AsyncSession`, which sends all the batches
//! bound for one data node in one write.
//!
//! Phases run in the order given, all threads together:
//! - `insert`: exactly keys 0..records, split in contiguous ranges per thread;
//! - `read`: committed reads of one pass over the keys, or of random keys
//!   for `duration_s` seconds;
//! - `update`: blind writes (upserts) of whole rows with a new round, one
//!   pass or random keys for `duration_s`;
//! - `range`: committed range scans of `RANGE_ROWS` consecutive keys
//!   through the primary key's ordered index (sysbench's range select),
//!   one pass of ranges over the keys or random ranges for `duration_s`
//!   seconds, every row verified and, once the keys are present, each
//!   range whole; operations count rows, transactions count ranges;
//! - `scan`: full scans of the table with a filter evaluated at the data
//!   nodes that takes 1% of the rows (a window of consecutive keys): one
//!   scan a thread, or random windows for `duration_s` seconds; every row
//!   returned verified and, once the keys are present, each window whole;
//!   operations count the rows looked at, transactions the scans;
//! - `delete`: exactly keys 0..records;
//! - `verify` (alone, with `verify_only`): one pass of reads over an
//!   existing table, writing nothing, each row checked and, with a ledger,
//!   checked against the last acknowledged write (see `ledger`).
//!
//! With `rate`, transactions start no faster than the given operations per
//! second (over all threads). With `durable`, every write transaction
//! commits with `Commit::Durable`: it is acknowledged (and its latency
//! measured) only once its GCI is durable. With a ledger, writers record
//! every write they send and every acknowledged one with its GCI, marked
//! durable when it was acknowledged durable. A durable commit whose wait
//! for durability fails is committed all the same: it is recorded as
//! acknowledged (not durable), counted as an error, and never retried.
//!
//! A temporary error (lock wait timeout, overload, ...) is counted by code
//! and the transaction retried after a short backoff; a stale table
//! definition is fetched again and the transaction retried. A constraint
//! error on one operation (a duplicate insert, a delete of a missing row)
//! is counted and the transaction retried without that key. A permanent
//! error, a timeout or a lost connection (the outcome is unknown) is
//! counted and the transaction given up. A thread's phase ends early when
//! no data node connection is left.

use crate::ledger::{Ledger, LedgerBuffer, LedgerFile};
use crate::report::{KeylookupReport, PhaseReport};
use crate::rows::{self, Rounds};
use crate::BenchError;
use client::{
    AsyncSession, ClientError, Cluster, Commit, Completion, ErrorClass, ErrorCode, Gci, LockMode,
    OpId, Table, Transaction, TransactionState, Value,
};
use hdrhistogram::Histogram;
use scans::{run_ranges, run_scans};
pub use scans::{RANGE_ROWS, SCAN_SHARE};
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use stdx::mix::XorShift;

mod scans;

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
    /// Range scans of `RANGE_ROWS` keys, verified.
    Range,
    /// Full scans with a filter taking 1% of the rows, verified.
    Scan,
    /// Read and verify every key of an existing table, against the ledger
    /// if there is one (the phase of `verify_only`; not in phase lists).
    Verify,
}

impl Phase {
    /// Every phase a phase list may name, in the conventional order.
    ///
    /// ```
    /// assert_eq!(bench::keylookup::Phase::ALL.len(), 6);
    /// ```
    pub const ALL: [Phase; 6] = [
        Phase::Insert,
        Phase::Read,
        Phase::Update,
        Phase::Delete,
        Phase::Range,
        Phase::Scan,
    ];

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
            Phase::Range => "range",
            Phase::Scan => "scan",
            Phase::Verify => "verify",
        }
    }

    /// Parses a comma-separated list ("insert,read,update,read,delete");
    /// a phase may repeat. The error names the offending entry.
    ///
    /// ```
    /// use bench::keylookup::Phase;
    /// assert_eq!(Phase::parse_list("insert, read,read").unwrap(), [Phase::Insert, Phase::Read, Phase::Read]);
    /// let error = Phase::parse_list("insert,scann").unwrap_err();
    /// assert!(error.contains("\"scann\""), "{error}");
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

    fn writes(self) -> bool {
        matches!(self, Phase::Insert | Phase::Update | Phase::Delete)
    }

    fn reads(self) -> bool {
        matches!(
            self,
            Phase::Read | Phase::Verify | Phase::Range | Phase::Scan
        )
    }
}

impl FromStr for Phase {
    type Err = String;

    fn from_str(text: &str) -> Result<Phase, String> {
        Phase::ALL
            .into_iter()
            .find(|phase| phase.name().eq_ignore_ascii_case(text))
            .ok_or_else(|| {
                format!("unknown phase {text:?}; phases are insert, read, update, delete, range and scan")
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

/// Parses a GCI as `H/L` (as GCIs print), or `H` meaning every epoch of
/// global checkpoint H.
///
/// ```
/// use bench::keylookup::parse_gci;
/// assert_eq!(parse_gci("12/3"), Ok(client::Gci::from_parts(12, 3)));
/// assert_eq!(parse_gci("12"), Ok(client::Gci::from_parts(12, u32::MAX)));
/// assert!(parse_gci("twelve").is_err());
/// ```
pub fn parse_gci(text: &str) -> Result<Gci, String> {
    crate::ledger::parse_gci(text)
}

/// What to run.
///
/// ```
/// let options = bench::keylookup::KeylookupOptions::default();
/// assert_eq!(options.records, 100_000);
/// assert_eq!(options.phases.len(), 5);
/// assert_eq!(options.inflight, 1);
/// ```
#[derive(Clone, Debug)]
pub struct KeylookupOptions {
    /// mgmd address ("host:port").
    pub mgmd: String,
    /// Keys 0..records.
    pub records: u64,
    /// Phases in order (ignored with `verify_only`).
    pub phases: Vec<Phase>,
    /// Threads, each with its own async session on the shared connections.
    pub threads: u32,
    /// Run read and update phases on random keys for this long instead
    /// of one pass (insert and delete always make exactly one pass).
    pub duration_s: Option<u64>,
    /// Table name.
    pub table: String,
    /// Value columns c0..c(N-1) besides the key and the round (with
    /// `verify_only`: taken from the existing table).
    pub columns: u32,
    /// Ordered indexes besides the primary key's, one on each of c0..
    /// (0 to 16, at most `columns`): what each write keeps besides the row.
    pub indexes: u32,
    /// Operations per transaction.
    pub ops_per_txn: u32,
    /// Transactions in flight per thread.
    pub inflight: u32,
    /// Most operations per second over all threads (`None`: as fast as possible).
    pub rate: Option<f64>,
    /// Write transactions commit durably (`Commit::Durable`): acknowledged
    /// only once their GCI is durable, and marked so in the ledger.
    pub durable: bool,
    /// Read and check every record of the existing table, writing nothing.
    pub verify_only: bool,
    /// Writers append every write sent and acknowledged here; with
    /// `verify_only`, rows are checked against it.
    pub ledger: Option<PathBuf>,
    /// With `verify_only` and `ledger`: only acknowledged writes with a
    /// GCI up to this one must be visible (`None`: all of them).
    pub restored_gci: Option<Gci>,
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
            indexes: 0,
            ops_per_txn: 8,
            inflight: 1,
            rate: None,
            durable: false,
            verify_only: false,
            ledger: None,
            restored_gci: None,
            json: false,
        }
    }
}

impl KeylookupOptions {
    /// Checks the options; the error says which one is wrong.
    ///
    /// ```
    /// let options = bench::keylookup::KeylookupOptions { ops_per_txn: 0, ..Default::default() };
    /// assert!(options.validate().unwrap_err().to_string().contains("ops-per-txn"));
    /// ```
    pub fn validate(&self) -> Result<(), BenchError> {
        let invalid = |message: &str| Err(BenchError::Options(message.to_string()));
        if self.records == 0 || self.records > u32::MAX as u64 + 1 {
            return invalid("records must be 1..=4294967296 (the key is an INT UNSIGNED)");
        }
        if self.threads == 0 {
            return invalid("threads must be at least 1");
        }
        if self.ops_per_txn == 0 {
            return invalid("ops-per-txn must be at least 1");
        }
        if self.inflight == 0 {
            return invalid("inflight must be at least 1");
        }
        if self
            .rate
            .is_some_and(|rate| !rate.is_finite() || rate <= 0.0)
        {
            return invalid("rate must be a positive number of operations per second");
        }
        if self.columns as usize > max_value_columns() {
            return Err(BenchError::Options(format!(
                "columns must be at most {}",
                max_value_columns()
            )));
        }
        if self.indexes as usize > client::MAX_INDEXES || self.indexes > self.columns {
            return Err(BenchError::Options(format!(
                "indexes must be at most {} and at most columns",
                client::MAX_INDEXES
            )));
        }
        if self.phases.is_empty() && !self.verify_only {
            return invalid("no phases given");
        }
        if self.phases.contains(&Phase::Verify) {
            return invalid("the verify phase runs alone, with verify-only");
        }
        if self.duration_s == Some(0) {
            return invalid("duration must be at least 1 second");
        }
        if self.restored_gci.is_some() && !(self.verify_only && self.ledger.is_some()) {
            return invalid("restored-gci needs verify-only and a ledger");
        }
        if self.durable && self.verify_only {
            return invalid("durable applies to writes; verify-only writes nothing");
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
/// counted in the report; only a failure to connect, to prepare (or, with
/// `verify_only`, find) the table or to read or write the ledger is an `Err`.
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
    let setup_error = |source| BenchError::Setup {
        context: format!("cannot prepare table {:?}", options.table),
        source,
    };
    let (table, columns) = if options.verify_only {
        existing_table(&cluster, options)?
    } else {
        (
            prepare_table(&cluster, options).map_err(setup_error)?,
            options.columns,
        )
    };
    let ledger = match (&options.ledger, options.verify_only) {
        (Some(path), true) => Some(Ledger::load(path).map_err(BenchError::Ledger)?),
        _ => None,
    };
    let ledger_file = match (&options.ledger, options.verify_only) {
        (Some(path), false) => Some(
            LedgerFile::open(path)
                .map_err(|error| BenchError::Ledger(format!("{}: {error}", path.display())))?,
        ),
        _ => None,
    };
    let phases = if options.verify_only {
        vec![Phase::Verify]
    } else {
        options.phases.clone()
    };
    // Every key the ledger names is read, even beyond `records`.
    let records = options
        .records
        .max(ledger.as_ref().map_or(0, Ledger::key_end));
    let rounds = Rounds::new();
    let mut expectation = Expectation::Unknown;
    let mut report = KeylookupReport::default();
    let mut seen: BTreeMap<&'static str, u32> = BTreeMap::new();
    let mut ledger_error = None;
    for &phase in &phases {
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
            columns,
            records,
            rounds: &rounds,
            phase,
            expectation,
            ledger_file: ledger_file.as_ref(),
            ledger: ledger.as_ref(),
            restored: options.restored_gci.unwrap_or(Gci(u64::MAX)),
        };
        let (phase_report, error) = context.run(name);
        report.phases.push(phase_report);
        ledger_error = ledger_error.or(error);
        expectation = match phase {
            Phase::Insert | Phase::Update => Expectation::Present,
            Phase::Delete => Expectation::Absent,
            Phase::Read | Phase::Verify | Phase::Range | Phase::Scan => expectation,
        };
    }
    match ledger_error {
        Some(error) => Err(BenchError::Ledger(format!(
            "writing the ledger failed, so it cannot vouch for this run: {error}"
        ))),
        None => Ok(report),
    }
}

/// Creates the table if missing, or drops and recreates it if its shape
/// differs from what the options ask for.
fn prepare_table(cluster: &Cluster, options: &KeylookupOptions) -> Result<Arc<Table>, ClientError> {
    let mut wanted = rows::table_definition(&options.table, options.columns);
    wanted.indexes = rows::value_indexes(options.indexes);
    match cluster.table(&options.table) {
        Ok(existing)
            if rows::same_shape(existing.def(), &wanted)
                && existing.def().indexes == wanted.indexes =>
        {
            return Ok(existing)
        }
        Ok(_) => cluster.drop_table(&options.table)?,
        Err(error) if error.code() == Some(ErrorCode::UnknownTable) => {}
        Err(error) => return Err(error),
    }
    cluster.create_table(&wanted)?;
    cluster.table(&options.table)
}

/// The table of a verify-only run and its value column count: it must
/// exist and have keylookup's shape.
fn existing_table(
    cluster: &Cluster,
    options: &KeylookupOptions,
) -> Result<(Arc<Table>, u32), BenchError> {
    let table = cluster
        .table(&options.table)
        .map_err(|source| BenchError::Setup {
            context: format!("cannot verify table {:?}", options.table),
            source,
        })?;
    let columns = rows::value_columns_of(table.def()).ok_or_else(|| {
        BenchError::Options(format!(
            "table {:?} is not a keylookup table (k INT UNSIGNED, round BIGINT UNSIGNED, \
             c0.. INT UNSIGNED)",
            options.table
        ))
    })?;
    Ok((table, columns))
}

struct PhaseContext<'a> {
    cluster: &'a Cluster,
    table: &'a Arc<Table>,
    options: &'a KeylookupOptions,
    columns: u32,
    /// Keys 0..records.
    records: u64,
    rounds: &'a Rounds,
    phase: Phase,
    expectation: Expectation,
    ledger_file: Option<&'a LedgerFile>,
    ledger: Option<&'a Ledger>,
    restored: Gci,
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
    /// No data node connection is left: nothing more can succeed.
    connection_lost: bool,
    /// Writing the ledger failed.
    ledger_error: Option<String>,
    /// Transactions committed per 100 ms from the phase's start.
    per_100ms: Vec<u64>,
}

/// Mismatch descriptions kept per phase.
const MISMATCH_EXAMPLES: usize = 5;
/// Attempts of one transaction that fails temporarily before it is given up.
const MAX_ATTEMPTS: u32 = 100;
/// Longest a thread waits for completions before looking at its schedule.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

fn latency_histogram() -> Histogram<u64> {
    // 1 us .. 1 hour at 3 significant digits; longer transactions saturate.
    Histogram::new_with_bounds(1, 3_600_000_000, 3)
        .expect("constant histogram bounds are valid: low >= 1, high >= 2 * low, sigfig <= 5")
}

impl WorkerStats {
    /// Whether no data node connection is left (and says so in the
    /// stats): nothing more can succeed.
    fn no_connection_left(&mut self, context: &PhaseContext<'_>) -> bool {
        let cluster = context.cluster;
        if cluster
            .data_nodes()
            .into_iter()
            .any(|node| cluster.is_node_connected(node))
        {
            return false;
        }
        self.connection_lost = true;
        true
    }

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
            ledger_error: None,
            per_100ms: Vec::new(),
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

    fn verdict(&mut self, verdict: Result<(), String>) {
        match verdict {
            Ok(()) => self.verified += 1,
            Err(description) => self.mismatch(description),
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
        self.ledger_error = self.ledger_error.take().or(other.ledger_error);
        if self.per_100ms.len() < other.per_100ms.len() {
            self.per_100ms.resize(other.per_100ms.len(), 0);
        }
        for (total, count) in self.per_100ms.iter_mut().zip(other.per_100ms) {
            *total += count;
        }
    }

    /// A transaction committed `since_start` into the phase.
    fn committed_at(&mut self, since_start: Duration) {
        self.transactions += 1;
        let bucket = (since_start.as_millis() / 100) as usize;
        if self.per_100ms.len() <= bucket {
            self.per_100ms.resize(bucket + 1, 0);
        }
        self.per_100ms[bucket] += 1;
    }
}

impl PhaseContext<'_> {
    /// Runs the phase on every thread; the report, and the first ledger
    /// write error.
    fn run(&self, name: String) -> (PhaseReport, Option<String>) {
        let threads = self.options.threads as u64;
        let records = self.records;
        let started = Instant::now();
        let started_unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_millis() as u64);
        let deadline = match (self.phase, self.options.duration_s) {
            (Phase::Read | Phase::Update | Phase::Range | Phase::Scan, Some(seconds)) => {
                Some(started + Duration::from_secs(seconds))
            }
            _ => None,
        };
        let mut total = WorkerStats::new();
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|thread| {
                    let source = match deadline {
                        Some(deadline) => KeySource::Random {
                            random: XorShift::new(thread ^ (self.rounds.next() << 20)),
                            records,
                            deadline,
                        },
                        None => KeySource::Pass {
                            next: records * thread / threads,
                            end: records * (thread + 1) / threads,
                        },
                    };
                    match self.phase {
                        Phase::Range => {
                            return scope.spawn(move || run_ranges(self, source, started))
                        }
                        Phase::Scan => {
                            return scope.spawn(move || run_scans(self, source, started))
                        }
                        _ => {}
                    }
                    scope.spawn(move || Worker::new(self, source, started).run())
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
        let report = PhaseReport {
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
            started_unix_ms,
            transactions_per_100ms: total.per_100ms,
        };
        (report, total.ledger_error)
    }
}

/// Where a thread's keys come from.
enum KeySource {
    /// Keys next..end, once.
    Pass { next: u64, end: u64 },
    /// Random keys below `records` until `deadline`.
    Random {
        random: XorShift,
        records: u64,
        deadline: Instant,
    },
}

impl KeySource {
    /// Appends up to `count` keys; false when the source is exhausted.
    fn take(&mut self, count: u32, now: Instant, keys: &mut Vec<u32>) -> bool {
        match self {
            KeySource::Pass { next, end } => {
                let stop = (*next + u64::from(count)).min(*end);
                keys.extend((*next..stop).map(|key| key as u32));
                *next = stop;
            }
            KeySource::Random {
                random,
                records,
                deadline,
            } => {
                if now < *deadline {
                    keys.extend((0..count).map(|_| random.below(*records) as u32));
                }
            }
        }
        !keys.is_empty()
    }

    fn is_exhausted(&self, now: Instant) -> bool {
        match self {
            KeySource::Pass { next, end } => next >= end,
            KeySource::Random { deadline, .. } => now >= *deadline,
        }
    }
}

/// Spaces transactions so that operations start at most at a given rate.
struct Pacer {
    seconds_per_operation: f64,
    /// When the next transaction may start.
    next: Instant,
}

/// How far a pacer that fell behind may catch up at full speed.
const PACER_BURST: Duration = Duration::from_millis(10);

impl Pacer {
    fn new(operations_per_second: f64, now: Instant) -> Pacer {
        Pacer {
            seconds_per_operation: 1.0 / operations_per_second,
            next: now,
        }
    }

    /// `Some(when)` if no transaction may start before `when`.
    fn wait_until(&self, now: Instant) -> Option<Instant> {
        (self.next > now).then_some(self.next)
    }

    /// A transaction of `operations` starts now.
    fn admit(&mut self, operations: usize, now: Instant) {
        let earliest = now.checked_sub(PACER_BURST).unwrap_or(now);
        self.next = self.next.max(earliest)
            + Duration::from_secs_f64(operations as f64 * self.seconds_per_operation);
    }
}

/// One transaction's work, travelling with it through the session.
#[derive(Default)]
struct Work {
    keys: Vec<u32>,
    /// The round each key is written with (writing phases but delete).
    rounds: Vec<u64>,
    /// When the first attempt started.
    started: Option<Instant>,
    attempts: u32,
    /// When a retry may start.
    retry_at: Option<Instant>,
    /// Intents are in the ledger.
    intended: bool,
}

impl Work {
    fn remove(&mut self, index: usize) -> u32 {
        if index < self.rounds.len() {
            self.rounds.remove(index);
        }
        self.keys.remove(index)
    }
}

/// One thread of a phase.
struct Worker<'c, 'a> {
    context: &'c PhaseContext<'a>,
    /// The table as this thread knows it (refreshed after a schema change).
    table: Arc<Table>,
    stats: WorkerStats,
    session: AsyncSession<'a, Work>,
    source: KeySource,
    retries: VecDeque<Work>,
    /// Finished work, kept for its memory.
    spare: Vec<Work>,
    pacer: Option<Pacer>,
    ledger: Option<LedgerBuffer<'a>>,
    /// No data node connection is left.
    stop: bool,
    /// When the phase started (the series counts from it).
    phase_started: Instant,
}

impl<'c, 'a> Worker<'c, 'a> {
    fn new(
        context: &'c PhaseContext<'a>,
        source: KeySource,
        phase_started: Instant,
    ) -> Worker<'c, 'a> {
        let options = context.options;
        let now = Instant::now();
        // The cluster's cached table, in case an earlier phase refreshed it.
        let wanted = rows::table_definition(context.table.name(), context.columns);
        let table = context
            .cluster
            .table(context.table.name())
            .ok()
            .filter(|table| rows::same_shape(table.def(), &wanted))
            .unwrap_or_else(|| Arc::clone(context.table));
        Worker {
            context,
            table,
            stats: WorkerStats::new(),
            session: context.cluster.session(),
            source,
            retries: VecDeque::new(),
            spare: Vec::new(),
            pacer: options
                .rate
                .map(|rate| Pacer::new(rate / f64::from(options.threads), now)),
            ledger: context
                .ledger_file
                .filter(|_| context.phase.writes())
                .map(LedgerBuffer::new),
            stop: false,
            phase_started,
        }
    }

    fn run(mut self) -> WorkerStats {
        let inflight = self.context.options.inflight as usize;
        let mut done: Vec<Completion<'a, Work>> = Vec::new();
        loop {
            let now = Instant::now();
            let mut wait = POLL_INTERVAL;
            while !self.stop && self.session.in_flight() < inflight {
                if let Some(when) = self.pacer.as_ref().and_then(|p| p.wait_until(now)) {
                    wait = wait.min(when - now);
                    break;
                }
                let Some(work) = self.next_work(now) else {
                    break;
                };
                if let Some(pacer) = &mut self.pacer {
                    pacer.admit(work.keys.len(), now);
                }
                self.start(work, now);
            }
            if let Some(retry_at) = self.retries.front().and_then(|work| work.retry_at) {
                wait = wait.min(retry_at.saturating_duration_since(now));
            }
            let finished = self.stop || self.source.is_exhausted(now);
            if self.session.in_flight() == 0 && (finished && self.retries.is_empty() || self.stop) {
                break;
            }
            // Intents reach the ledger before their transactions are sent.
            if let Some(ledger) = &mut self.ledger {
                ledger.flush();
            }
            if self.session.in_flight() == 0 {
                // Only the pacer or a retry's backoff holds work back.
                std::thread::sleep(wait);
                continue;
            }
            self.session.poll(wait, &mut done);
            for completion in done.drain(..) {
                self.complete(completion);
            }
        }
        if let Some(mut ledger) = self.ledger.take() {
            ledger.flush();
            self.stats.ledger_error = ledger.error.take();
        }
        self.stats
    }

    /// A retry that is due, else new keys.
    fn next_work(&mut self, now: Instant) -> Option<Work> {
        if self
            .retries
            .front()
            .is_some_and(|work| work.retry_at.is_none_or_before(now))
        {
            return self.retries.pop_front();
        }
        let mut work = self.spare.pop().unwrap_or_default();
        if self
            .source
            .take(self.context.options.ops_per_txn, now, &mut work.keys)
        {
            work.started = Some(now);
            Some(work)
        } else {
            self.spare.push(work);
            None
        }
    }

    fn recycle(&mut self, mut work: Work) {
        work.keys.clear();
        work.rounds.clear();
        work.started = None;
        work.attempts = 0;
        work.retry_at = None;
        work.intended = false;
        self.spare.push(work);
    }

    /// Defines the transaction for `work` and hands it to the session.
    fn start(&mut self, mut work: Work, now: Instant) {
        let phase = self.context.phase;
        if matches!(phase, Phase::Insert | Phase::Update) && work.rounds.is_empty() {
            let rounds = self.context.rounds;
            work.rounds.extend(work.keys.iter().map(|_| rounds.next()));
        }
        if !work.intended {
            if let Some(ledger) = &mut self.ledger {
                for (index, &key) in work.keys.iter().enumerate() {
                    match work.rounds.get(index) {
                        Some(&round) => ledger.intend_write(key, round),
                        None => ledger.intend_delete(key),
                    }
                }
            }
            work.intended = true;
        }
        work.started.get_or_insert(now);
        let commit = if self.context.options.durable && phase.writes() {
            Commit::Durable
        } else {
            Commit::Yes
        };
        match self.define(&work) {
            Ok(transaction) => self.session.execute(transaction, commit, work),
            Err(error) => {
                // The keys cannot be encoded: a bug, not the cluster's doing.
                self.stats.count_error(&error);
                self.recycle(work);
            }
        }
    }

    fn define(&self, work: &Work) -> Result<Transaction<'a>, ClientError> {
        let context = self.context;
        let table = &self.table;
        let first = Value::UInt(u64::from(work.keys[0]));
        let mut transaction = context
            .cluster
            .transaction_with_hint(table, std::slice::from_ref(&first))?;
        for (index, &key) in work.keys.iter().enumerate() {
            let key_value = [Value::UInt(u64::from(key))];
            match context.phase {
                Phase::Insert => {
                    let values = rows::row_values(key, work.rounds[index], context.columns);
                    transaction.insert(table, &values)?;
                }
                Phase::Update => {
                    let values = rows::row_values(key, work.rounds[index], context.columns);
                    transaction.write(table, &values)?;
                }
                Phase::Delete => {
                    transaction.delete(table, &key_value)?;
                }
                Phase::Read | Phase::Verify => {
                    transaction.read(table, &key_value, LockMode::CommittedRead)?;
                }
                Phase::Range | Phase::Scan => {
                    unreachable!("the scan phases run in `scans`, not in workers")
                }
            }
        }
        Ok(transaction)
    }

    fn complete(&mut self, completion: Completion<'a, Work>) {
        let Completion {
            transaction,
            user: mut work,
            result,
        } = completion;
        work.attempts += 1;
        match result {
            Ok(outcome) => {
                self.stats.committed_at(self.phase_started.elapsed());
                self.stats.operations += work.keys.len() as u64;
                let started = work.started.unwrap_or_else(Instant::now);
                let micros = started.elapsed().as_micros().max(1);
                self.stats
                    .latency_us
                    .saturating_record(u64::try_from(micros).unwrap_or(u64::MAX));
                if self.context.phase.reads() {
                    for (index, &key) in work.keys.iter().enumerate() {
                        let row = transaction.get(OpId::new(index as u32));
                        let verdict = self.read_verdict(key, row);
                        self.stats.verdict(verdict);
                    }
                }
                if let Some(gci) = outcome.gci {
                    self.acknowledged(&work, gci, outcome.durable);
                }
                drop(transaction);
                self.recycle(work);
            }
            Err(error) => {
                // A durable commit whose wait for durability failed: the
                // commit stands (its GCI is known), only not known durable.
                let committed = transaction.state() == TransactionState::Committed;
                if let (true, Some(gci)) = (committed, transaction.commit_gci()) {
                    self.acknowledged(&work, gci, false);
                }
                drop(transaction);
                if committed {
                    self.failed_after_commit(work, error);
                } else {
                    self.failed(work, error);
                }
            }
        }
    }

    /// Records the writes of `work` as acknowledged in `gci` (and durable).
    fn acknowledged(&mut self, work: &Work, gci: Gci, durable: bool) {
        let Some(ledger) = &mut self.ledger else {
            return;
        };
        for (index, &key) in work.keys.iter().enumerate() {
            match work.rounds.get(index) {
                Some(&round) => ledger.acknowledged_write(key, round, gci, durable),
                None => ledger.acknowledged_delete(key, gci, durable),
            }
        }
    }

    /// The transaction committed but its request failed afterwards (a
    /// durable commit's wait for its GCI): counted, never retried (the
    /// writes are in).
    fn failed_after_commit(&mut self, work: Work, error: ClientError) {
        if error.code() == Some(ErrorCode::ConnectionLost) {
            // Counted there, and the thread stops if no node is left.
            return self.failed(work, error);
        }
        self.stats.count_error(&error);
        self.recycle(work);
    }

    /// The verdict on one row read (`None`: the read found no row data).
    fn read_verdict(&self, key: u32, row: Option<&client::Row>) -> Result<(), String> {
        let Some(row) = row else {
            return Err(format!("key {key}: read succeeded without row data"));
        };
        if self.context.expectation == Expectation::Absent {
            return Err(format!("key {key}: row found after it was deleted"));
        }
        let round = rows::verify(row, key, self.context.columns)?;
        match self.context.ledger {
            Some(ledger) => ledger.check(key, Some(round), self.context.restored),
            None => Ok(()),
        }
    }

    fn failed(&mut self, mut work: Work, error: ClientError) {
        if error.code() == Some(ErrorCode::ConnectionLost) {
            // The outcome is unknown; the other nodes may still serve.
            self.stats.count_error(&error);
            let cluster = self.context.cluster;
            if !cluster
                .data_nodes()
                .into_iter()
                .any(|node| cluster.is_node_connected(node))
            {
                self.stats.connection_lost = true;
                self.stop = true;
            }
            self.recycle(work);
            return;
        }
        if error.class() == Some(ErrorClass::Constraint) {
            if let Some(index) = error.failed_op().map(|op| op.index() as usize) {
                if index < work.keys.len() {
                    let key = work.remove(index);
                    self.constraint_answer(key, &error);
                    self.retry(work, Duration::ZERO);
                    return;
                }
            }
        }
        self.stats.count_error(&error);
        if matches!(
            error.code(),
            Some(ErrorCode::SchemaVersionMismatch | ErrorCode::UnknownTable)
        ) {
            if self.refresh_table() && work.attempts < MAX_ATTEMPTS {
                self.retry(work, Duration::ZERO);
            } else {
                self.recycle(work);
            }
            return;
        }
        // After a timeout the outcome is unknown: a blind retry could
        // double-apply (or trip over) a write that did commit.
        let unknown_outcome = matches!(error, ClientError::Timeout { .. });
        if !error.is_temporary() || unknown_outcome || work.attempts >= MAX_ATTEMPTS {
            self.recycle(work);
            return;
        }
        // Short, growing pause: the data node may be overloaded, or
        // the lock holder needs a moment to finish.
        let pause = Duration::from_millis(u64::from(work.attempts.min(20)));
        self.retry(work, pause);
    }

    fn retry(&mut self, mut work: Work, after: Duration) {
        if work.keys.is_empty() {
            self.recycle(work);
            return;
        }
        work.retry_at = Some(Instant::now() + after);
        self.retries.push_back(work);
    }

    /// Fetches the table again after a schema error; true if it still has
    /// the shape this run writes.
    fn refresh_table(&mut self) -> bool {
        let Ok(fresh) = self.context.cluster.table(self.table.name()) else {
            return false;
        };
        let wanted = rows::table_definition(self.table.name(), self.context.columns);
        if !rows::same_shape(fresh.def(), &wanted) {
            return false;
        }
        self.table = fresh;
        true
    }

    /// Accounts for one operation answered by a constraint error (NoSuchRow,
    /// DuplicateKey): for reads a verdict on the data, for writes an error.
    fn constraint_answer(&mut self, key: u32, error: &ClientError) {
        self.stats.operations += 1;
        let missing = error.code() == Some(ErrorCode::NoSuchRow);
        match (self.context.phase, self.context.expectation, missing) {
            (Phase::Read, Expectation::Present, true) => {
                self.stats
                    .mismatch(format!("key {key}: row missing after it was written"));
            }
            (Phase::Verify, _, true) => {
                let verdict = match self.context.ledger {
                    Some(ledger) => ledger.check(key, None, self.context.restored),
                    None => Ok(()),
                };
                self.stats.verdict(verdict);
            }
            (Phase::Read, _, true) => self.stats.verified += 1,
            _ => self.stats.count_error(error),
        }
    }
}

/// `Option<Instant>` as "may start at": none means now.
trait StartAt {
    fn is_none_or_before(&self, now: Instant) -> bool;
}

impl StartAt for Option<Instant> {
    fn is_none_or_before(&self, now: Instant) -> bool {
        match self {
            None => true,
            Some(at) => *at <= now,
        }
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
            "unknown phase \"upsert\"; phases are insert, read, update, delete, range and scan"
        );
        assert!(Phase::parse_list("verify").is_err(), "verify runs alone");
    }

    #[test]
    fn options_are_validated() {
        assert!(KeylookupOptions::default().validate().is_ok());
        assert!(KeylookupOptions {
            verify_only: true,
            ledger: Some("ledger.txt".into()),
            restored_gci: Some(Gci::from_parts(3, 0)),
            ..Default::default()
        }
        .validate()
        .is_ok());
        assert!(KeylookupOptions {
            durable: true,
            ledger: Some("ledger.txt".into()),
            ..Default::default()
        }
        .validate()
        .is_ok());
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
            KeylookupOptions {
                inflight: 0,
                ..Default::default()
            },
            KeylookupOptions {
                ops_per_txn: 0,
                ..Default::default()
            },
            KeylookupOptions {
                rate: Some(0.0),
                ..Default::default()
            },
            KeylookupOptions {
                rate: Some(f64::NAN),
                ..Default::default()
            },
            KeylookupOptions {
                restored_gci: Some(Gci(1)),
                ledger: Some("ledger.txt".into()),
                ..Default::default()
            },
            KeylookupOptions {
                phases: vec![Phase::Verify],
                ..Default::default()
            },
            KeylookupOptions {
                durable: true,
                verify_only: true,
                ..Default::default()
            },
        ] {
            assert!(options.validate().is_err(), "{options:?}");
        }
    }

    #[test]
    fn a_pacer_spaces_operations_and_limits_catching_up() {
        let start = Instant::now();
        let mut pacer = Pacer::new(1000.0, start);
        assert_eq!(pacer.wait_until(start), None);
        pacer.admit(10, start);
        assert_eq!(
            pacer.wait_until(start),
            Some(start + Duration::from_millis(10))
        );
        let later = start + Duration::from_millis(10);
        assert_eq!(pacer.wait_until(later), None);
        pacer.admit(5, later);
        assert_eq!(
            pacer.wait_until(later),
            Some(later + Duration::from_millis(5))
        );
        // After a long stall, at most PACER_BURST worth runs at once.
        let stalled = start + Duration::from_secs(10);
        pacer.admit(5, stalled);
        assert_eq!(pacer.wait_until(stalled), None);
        pacer.admit(5, stalled);
        assert_eq!(
            pacer.wait_until(stalled),
            None,
            "10 ms of catching up allowed"
        );
        pacer.admit(5, stalled);
        assert!(pacer.wait_until(stalled).is_some());
    }

    #[test]
    fn key_sources_cover_a_range_once_or_run_until_a_deadline() {
        let now = Instant::now();
        let mut pass = KeySource::Pass { next: 3, end: 10 };
        let mut keys = Vec::new();
        assert!(pass.take(4, now, &mut keys));
        assert_eq!(keys, [3, 4, 5, 6]);
        keys.clear();
        assert!(pass.take(4, now, &mut keys));
        assert_eq!(keys, [7, 8, 9]);
        keys.clear();
        assert!(!pass.take(4, now, &mut keys));
        assert!(pass.is_exhausted(now));
        let mut random = KeySource::Random {
            random: XorShift::new(1),
            records: 5,
            deadline: now + Duration::from_secs(60),
        };
        assert!(random.take(100, now, &mut keys));
        assert!(keys.iter().all(|&key| key < 5));
        keys.clear();
        assert!(!random.take(1, now + Duration::from_secs(61), &mut keys));
    }
}
