//! The failover benchmark (docs/benchmarks.md): threads commit one-row
//! writes as fast as they can while, part way through, the caller kills a
//! data node (SIGKILL). It reports how long after the kill the first
//! transaction *started after it* committed (the time the cluster served
//! nothing new: detection, agreement, arbitration, take-over), and the
//! commits of every 100 ms around the kill, for a chart.
//!
//! A transaction started before the kill may still commit after it; it
//! says nothing about failover, so it is counted in the series but not in
//! the failover time. Errors (the failure's temporary ones, lost
//! connections) are counted and retried at once.

use crate::BenchError;
use client::{ClientError, Cluster, ColumnDef, ColumnType, Commit, ErrorCode, TableDef, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What to run.
#[derive(Clone, Debug)]
pub struct FailoverOptions {
    /// mgmd's address.
    pub mgmd: String,
    /// Client threads (each its own API node).
    pub threads: u32,
    /// Table written (created if missing).
    pub table: String,
    /// When the kill happens, from the start of the load.
    pub kill_after: Duration,
    /// How long the load runs in all.
    pub duration: Duration,
}

impl Default for FailoverOptions {
    fn default() -> Self {
        FailoverOptions {
            mgmd: "127.0.0.1:11860".into(),
            threads: 4,
            table: "failover".into(),
            kill_after: Duration::from_secs(3),
            duration: Duration::from_secs(8),
        }
    }
}

/// What a run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FailoverReport {
    /// When the kill was sent, ms from the start of the load.
    pub kill_at_ms: f64,
    /// From the kill to the commit of the first transaction started after
    /// it, in ms (`None`: none committed before the end).
    pub failover_ms: Option<f64>,
    /// Commits in each 100 ms from the start of the load.
    pub commits_per_100ms: Vec<u64>,
    /// Transactions that failed (and were retried).
    pub errors: u64,
}

impl FailoverReport {
    /// One line for people.
    pub fn to_text(&self) -> String {
        let failover = self
            .failover_ms
            .map_or_else(|| "none".into(), |ms| format!("{ms:.1} ms"));
        format!(
            "kill at {:.1} ms; first transaction started after the kill committed {failover} \
             after it; {} commits, {} errors",
            self.kill_at_ms,
            self.commits_per_100ms.iter().sum::<u64>(),
            self.errors
        )
    }
}

/// Runs the load, calls `kill` once at `kill_after`, and reports.
pub fn run(options: &FailoverOptions, kill: impl FnOnce()) -> Result<FailoverReport, BenchError> {
    if options.threads == 0 || options.kill_after >= options.duration {
        return Err(BenchError::Options(
            "failover needs at least one thread and the kill before the end".into(),
        ));
    }
    let setup_error = |context: &str| {
        let context = context.to_string();
        move |source| BenchError::Setup { context, source }
    };
    let setup = Cluster::connect(&options.mgmd).map_err(setup_error("connect"))?;
    let definition = TableDef {
        indexes: Vec::new(),
        revision: 0,
        id: 0,
        version: 0,
        name: options.table.clone(),
        columns: vec![
            ColumnDef::new("k", ColumnType::BigInt { unsigned: true }, false),
            ColumnDef::new("v", ColumnType::BigInt { unsigned: false }, false),
        ],
        primary_key: vec![0],
        partitions: 0,
        partition_key: Vec::new(),
    };
    match setup.create_table(&definition) {
        Ok(_) => {}
        Err(error) if error.code() == Some(ErrorCode::TableExists) => {}
        Err(error) => return Err(setup_error("create the table")(error)),
    }
    let buckets: Vec<AtomicU64> = (0..options.duration.as_millis() / 100 + 1)
        .map(|_| AtomicU64::new(0))
        .collect();
    let errors = AtomicU64::new(0);
    // Microseconds from the start of the kill, and of the first commit of a
    // transaction started after it (u64::MAX: none yet).
    let kill_at_us = AtomicU64::new(u64::MAX);
    let first_after_us = AtomicU64::new(u64::MAX);
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let clusters = (0..options.threads)
        .map(|_| Cluster::connect(&options.mgmd))
        .collect::<Result<Vec<_>, _>>()
        .map_err(setup_error("connect a client thread"))?;
    std::thread::scope(|scope| {
        for (index, cluster) in clusters.iter().enumerate() {
            let (buckets, errors, kill_at_us, first_after_us, stop) =
                (&buckets, &errors, &kill_at_us, &first_after_us, &stop);
            let table = options.table.clone();
            scope.spawn(move || {
                let Ok(table) = cluster.table(&table) else {
                    errors.fetch_add(1, Ordering::Relaxed);
                    return;
                };
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let began_us = start.elapsed().as_micros() as u64;
                    let key = (index as u64) << 32 | (n % 1024);
                    n += 1;
                    let mut transaction = cluster.transaction();
                    let result: Result<_, ClientError> = transaction
                        .write(
                            &table,
                            &[("k", Value::UInt(key)), ("v", Value::Int(n as i64))],
                        )
                        .and_then(|_| transaction.execute(Commit::Yes));
                    let done = start.elapsed();
                    match result {
                        Ok(_) => {
                            let bucket = (done.as_millis() / 100) as usize;
                            if let Some(count) = buckets.get(bucket) {
                                count.fetch_add(1, Ordering::Relaxed);
                            }
                            if began_us >= kill_at_us.load(Ordering::Acquire) {
                                first_after_us.fetch_min(done.as_micros() as u64, Ordering::AcqRel);
                            }
                        }
                        Err(_) => {
                            errors.fetch_add(1, Ordering::Relaxed);
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    }
                }
            });
        }
        std::thread::sleep(options.kill_after);
        kill_at_us.store(start.elapsed().as_micros() as u64, Ordering::Release);
        kill();
        let end = options.duration.saturating_sub(start.elapsed());
        std::thread::sleep(end);
        stop.store(true, Ordering::Relaxed);
    });
    let kill_at = kill_at_us.load(Ordering::Acquire);
    let first_after = first_after_us.load(Ordering::Acquire);
    Ok(FailoverReport {
        kill_at_ms: kill_at as f64 / 1000.0,
        failover_ms: (first_after != u64::MAX)
            .then(|| first_after.saturating_sub(kill_at) as f64 / 1000.0),
        commits_per_100ms: buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect(),
        errors: errors.load(Ordering::Relaxed),
    })
}
