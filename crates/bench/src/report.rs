//! Benchmark reports: per phase figures, as JSON for scripts and as a text
//! table for people. Phases keep their run order in both forms.

use client::ErrorCode;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// The figures of one phase.
///
/// ```
/// let phase = bench::PhaseReport { name: "read#2".into(), ..Default::default() };
/// assert_eq!(phase.mismatches, 0);
/// ```
#[derive(Clone, Debug, Default, Serialize)]
pub struct PhaseReport {
    /// Name in the report: the phase, with `#n` for its n-th repetition.
    #[serde(skip)]
    pub name: String,
    /// The kind of phase ("insert", "read", "update", "delete").
    pub kind: String,
    /// Operations completed (a read that found the row absent counts).
    pub operations: u64,
    /// Transactions committed.
    pub transactions: u64,
    /// Wall-clock seconds of the phase.
    pub elapsed_s: f64,
    /// `operations / elapsed_s`.
    pub ops_per_sec: f64,
    /// Failed attempts, retried ones included.
    pub errors: u64,
    /// Failed attempts by error code number (or kind, without a code).
    pub errors_by_code: BTreeMap<String, u64>,
    /// Rows (or absences) read and found correct.
    pub verified: u64,
    /// Rows read and found wrong, or missing when they must exist.
    pub mismatches: u64,
    /// The first few mismatches, described.
    pub mismatch_examples: Vec<String>,
    /// Transaction latency percentiles and maximum, microseconds, from the
    /// first attempt to success (retries included).
    pub p50_us: u64,
    /// 95th percentile.
    pub p95_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// Maximum.
    pub max_us: u64,
    /// When the phase started, milliseconds since the Unix epoch (to place
    /// an outside event, a node killed say, on the series below).
    pub started_unix_ms: u64,
    /// Transactions committed in each 100 ms from the phase's start (a
    /// chart of the rate, docs/benchmarks.md "Failover").
    pub transactions_per_100ms: Vec<u64>,
}

/// The result of a keylookup run.
///
/// ```
/// let report = bench::KeylookupReport { phases: vec![], ..Default::default() };
/// assert_eq!(report.mismatches(), 0);
/// assert_eq!(report.to_json(), r#"{"phases":{}}"#);
/// ```
#[derive(Clone, Debug, Default)]
pub struct KeylookupReport {
    /// Phases in run order.
    pub phases: Vec<PhaseReport>,
}

impl KeylookupReport {
    /// Mismatches over all phases: non-zero means the cluster returned
    /// wrong or lost data.
    ///
    /// ```
    /// let phase = bench::PhaseReport { mismatches: 2, ..Default::default() };
    /// let report = bench::KeylookupReport { phases: vec![phase.clone(), phase] };
    /// assert_eq!(report.mismatches(), 4);
    /// ```
    pub fn mismatches(&self) -> u64 {
        self.phases.iter().map(|phase| phase.mismatches).sum()
    }

    /// Errors over all phases.
    ///
    /// ```
    /// let phase = bench::PhaseReport { errors: 3, ..Default::default() };
    /// assert_eq!(bench::KeylookupReport { phases: vec![phase] }.errors(), 3);
    /// ```
    pub fn errors(&self) -> u64 {
        self.phases.iter().map(|phase| phase.errors).sum()
    }

    /// The phase named `name` ("read", "read#2", ...).
    ///
    /// ```
    /// let phase = bench::PhaseReport { name: "insert".into(), ..Default::default() };
    /// let report = bench::KeylookupReport { phases: vec![phase] };
    /// assert!(report.phase("insert").is_some());
    /// ```
    pub fn phase(&self, name: &str) -> Option<&PhaseReport> {
        self.phases.iter().find(|phase| phase.name == name)
    }

    /// `{"phases": {"insert": {...}, "read": {...}, "read#2": {...}}}`,
    /// phases in run order.
    ///
    /// ```
    /// let phase = bench::PhaseReport { name: "read".into(), kind: "read".into(), ..Default::default() };
    /// let json = bench::KeylookupReport { phases: vec![phase] }.to_json();
    /// assert!(json.starts_with(r#"{"phases":{"read":{"kind":"read","#), "{json}");
    /// ```
    pub fn to_json(&self) -> String {
        // Assembled by hand so phases keep run order (serde_json's map sorts).
        let mut out = String::from("{\"phases\":{");
        for (index, phase) in self.phases.iter().enumerate() {
            if index > 0 {
                out.push(',');
            }
            // Strings, numbers and string-keyed maps always serialize.
            out.push_str(&serde_json::to_string(&phase.name).unwrap_or_default());
            out.push(':');
            out.push_str(&serde_json::to_string(phase).unwrap_or_default());
        }
        out.push_str("}}");
        out
    }

    /// A table, one row per phase, then errors by code and mismatch examples.
    ///
    /// ```
    /// let phase = bench::PhaseReport { name: "insert".into(), operations: 10, ..Default::default() };
    /// let text = bench::KeylookupReport { phases: vec![phase] }.to_text();
    /// assert!(text.lines().nth(1).unwrap().starts_with("insert"));
    /// ```
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<10} {:>12} {:>10} {:>8} {:>10} {:>10} {:>8} {:>8} {:>8} {:>9}",
            "phase",
            "ops/s",
            "ops",
            "errors",
            "verified",
            "mismatches",
            "p50_us",
            "p95_us",
            "p99_us",
            "max_us"
        );
        for phase in &self.phases {
            let _ = writeln!(
                out,
                "{:<10} {:>12.1} {:>10} {:>8} {:>10} {:>10} {:>8} {:>8} {:>8} {:>9}",
                phase.name,
                phase.ops_per_sec,
                phase.operations,
                phase.errors,
                phase.verified,
                phase.mismatches,
                phase.p50_us,
                phase.p95_us,
                phase.p99_us,
                phase.max_us
            );
        }
        for phase in &self.phases {
            for (code, count) in &phase.errors_by_code {
                let meaning = code
                    .parse::<u16>()
                    .ok()
                    .and_then(ErrorCode::from_u16)
                    .map_or("", ErrorCode::message);
                let _ = writeln!(out, "{}: error {code} x{count} {meaning}", phase.name);
            }
            for example in &phase.mismatch_examples {
                let _ = writeln!(out, "{}: MISMATCH {example}", phase.name);
            }
        }
        out
    }
}
