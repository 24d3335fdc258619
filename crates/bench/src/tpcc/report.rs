//! tpcc's report: tpmC, per transaction kind counts and latency
//! percentiles, the consistency verdict and the first errors, as text for
//! people and as JSON for scripts.

use super::consistency::Consistency;
use super::terminal::{KindStats, MixStats};
use super::transactions::TransactionKind;
use super::TpccOptions;
use serde_json::{json, Map, Value};
use std::fmt::Write;
use std::time::Duration;

/// One transaction kind's figures.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TransactionReport {
    /// "new_order", "payment", "order_status", "delivery" or "stock_level".
    pub name: String,
    /// Transactions committed.
    pub count: u64,
    /// Transactions given up after an error (or after 10 retryable ones).
    pub errors: u64,
    /// Attempts retried after a deadlock or lock wait timeout.
    pub retried: u64,
    /// New-Orders rolled back on purpose (1%, clause 2.4.2.3): complete
    /// transactions, but not counted in tpmC.
    pub rolled_back: u64,
    /// Latency percentiles and maximum of committed and rolled back
    /// transactions, milliseconds, retries included.
    pub p50_ms: f64,
    /// 95th percentile.
    pub p95_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Maximum.
    pub max_ms: f64,
}

impl TransactionReport {
    fn new(kind: TransactionKind, stats: &KindStats) -> TransactionReport {
        let histogram = &stats.latency_us;
        let milliseconds = |micros: u64| micros as f64 / 1000.0;
        let quantile = |fraction: f64| {
            if histogram.is_empty() {
                0.0
            } else {
                milliseconds(histogram.value_at_quantile(fraction))
            }
        };
        TransactionReport {
            name: kind.name().to_string(),
            count: stats.committed,
            errors: stats.errors,
            retried: stats.retried,
            rolled_back: stats.rolled_back,
            p50_ms: quantile(0.50),
            p95_ms: quantile(0.95),
            p99_ms: quantile(0.99),
            max_ms: if histogram.is_empty() {
                0.0
            } else {
                milliseconds(histogram.max())
            },
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "count": self.count,
            "errors": self.errors,
            "retried": self.retried,
            "rolled_back": self.rolled_back,
            "p50_ms": self.p50_ms,
            "p95_ms": self.p95_ms,
            "p99_ms": self.p99_ms,
            "max_ms": self.max_ms,
        })
    }
}

/// The result of a TPC-C run.
#[derive(Clone, Debug, PartialEq)]
pub struct TpccReport {
    /// Warehouses run on.
    pub warehouses: u32,
    /// Connections (terminals) that ran the mix.
    pub connections: u32,
    /// Seconds the mix ran, measured (0 when no mix ran).
    pub duration_s: f64,
    /// Seconds the load took, when this run loaded.
    pub load_seconds: Option<f64>,
    /// New-Orders committed per minute of `duration_s`.
    pub tpmc: f64,
    /// Per transaction kind: new_order, payment, order_status, delivery,
    /// stock_level.
    pub transactions: Vec<TransactionReport>,
    /// Consistency conditions 1 to 4 after the run.
    pub consistency: Consistency,
    /// The first few distinct error messages (at most 5).
    pub error_messages: Vec<String>,
}

impl TpccReport {
    /// The report of a run with `options` whose mix ran for `measured`.
    pub(super) fn new(
        options: &TpccOptions,
        load: Option<Duration>,
        measured: Duration,
        stats: &MixStats,
        consistency: Consistency,
    ) -> TpccReport {
        let transactions: Vec<TransactionReport> = TransactionKind::ALL
            .into_iter()
            .map(|kind| TransactionReport::new(kind, stats.kind(kind)))
            .collect();
        let minutes = measured.as_secs_f64() / 60.0;
        let new_orders = stats.kind(TransactionKind::NewOrder).committed;
        TpccReport {
            warehouses: options.warehouses,
            connections: options.connections,
            duration_s: measured.as_secs_f64(),
            load_seconds: load.map(|load| load.as_secs_f64()),
            tpmc: if minutes > 0.0 {
                new_orders as f64 / minutes
            } else {
                0.0
            },
            transactions,
            consistency,
            error_messages: stats.error_messages.clone(),
        }
    }

    /// Transactions given up over all kinds.
    pub fn errors(&self) -> u64 {
        self.transactions.iter().map(|kind| kind.errors).sum()
    }

    /// Whether consistency conditions 1 to 4 held.
    pub fn is_consistent(&self) -> bool {
        self.consistency == Consistency::Ok
    }

    /// `{"tpmc": .., "warehouses": .., "connections": .., "duration_s": ..,
    /// "transactions": {"new_order": {"count": .., "errors": ..,
    /// "retried": .., "rolled_back": .., "p50_ms": .., "p95_ms": ..,
    /// "p99_ms": .., "max_ms": ..}, ...}, "consistency": "ok" or
    /// ["condition 1: ...", ...], "load_seconds": .. or null,
    /// "error_messages": [..]}`.
    pub fn to_json(&self) -> Value {
        let mut transactions = Map::new();
        for transaction in &self.transactions {
            transactions.insert(transaction.name.clone(), transaction.to_json());
        }
        let consistency = match &self.consistency {
            Consistency::Ok => json!("ok"),
            Consistency::Failed(failures) => json!(failures),
        };
        json!({
            "tpmc": self.tpmc,
            "warehouses": self.warehouses,
            "connections": self.connections,
            "duration_s": self.duration_s,
            "transactions": transactions,
            "consistency": consistency,
            "load_seconds": self.load_seconds,
            "error_messages": self.error_messages,
        })
    }

    /// A summary line, a table of the transaction kinds, the consistency
    /// verdict and the first errors.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let load = match self.load_seconds {
            Some(seconds) => format!(", loaded in {seconds:.1} s"),
            None => String::new(),
        };
        let _ = writeln!(
            out,
            "TPC-C: {} warehouses, {} connections, {:.1} s measured{load}",
            self.warehouses, self.connections, self.duration_s
        );
        let _ = writeln!(
            out,
            "tpmC {:.1} (New-Orders committed per minute)",
            self.tpmc
        );
        let _ = writeln!(
            out,
            "{:<13} {:>10} {:>11} {:>8} {:>7} {:>9} {:>9} {:>9} {:>9}",
            "transaction",
            "count",
            "rolled_back",
            "retried",
            "errors",
            "p50_ms",
            "p95_ms",
            "p99_ms",
            "max_ms"
        );
        for transaction in &self.transactions {
            let _ = writeln!(
                out,
                "{:<13} {:>10} {:>11} {:>8} {:>7} {:>9.2} {:>9.2} {:>9.2} {:>9.2}",
                transaction.name,
                transaction.count,
                transaction.rolled_back,
                transaction.retried,
                transaction.errors,
                transaction.p50_ms,
                transaction.p95_ms,
                transaction.p99_ms,
                transaction.max_ms
            );
        }
        match &self.consistency {
            Consistency::Ok => {
                let _ = writeln!(out, "consistency: ok (conditions 1-4)");
            }
            Consistency::Failed(failures) => {
                let _ = writeln!(out, "consistency: FAILED");
                for failure in failures {
                    let _ = writeln!(out, "  {failure}");
                }
            }
        }
        if !self.error_messages.is_empty() {
            let _ = writeln!(out, "first errors:");
            for message in &self.error_messages {
                let _ = writeln!(out, "  {message}");
            }
        }
        out
    }
}
