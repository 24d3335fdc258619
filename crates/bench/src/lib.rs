//! bench: Tessera's load generators, programs that print figures (tests
//! assert behaviour; a benchmark never does). `keylookup` is the
//! flexAsynch analogue: threads keep transactions of primary-key
//! operations in flight through the client's async API and check every
//! row they read; with a ledger (`ledger`) it also proves that no
//! acknowledged write was lost. `failover` measures how long commits stop
//! when a data node is killed. Later: `tpcc`, `ycsb`.
//!
//! The `tessera bench ...` subcommands (crate `cli`) parse their flags into
//! the options types here, call `run`, and print the report.
//!
//! ```no_run
//! use bench::keylookup::{self, KeylookupOptions, Phase};
//! let options = KeylookupOptions {
//!     phases: Phase::parse_list("insert,read").expect("valid phases"),
//!     ..KeylookupOptions::default()
//! };
//! let report = keylookup::run(&options)?;
//! println!("{}", report.to_text());
//! # Ok::<(), bench::BenchError>(())
//! ```

pub mod failover;
pub mod keylookup;
mod ledger;
pub mod mysql;
mod report;
mod rows;
pub mod tpcc;

pub use report::{KeylookupReport, PhaseReport};

use std::fmt;

/// Why a benchmark could not run (errors during a run are counted in the
/// report instead).
///
/// ```
/// let error = bench::BenchError::Options("threads must be at least 1".into());
/// assert_eq!(error.to_string(), "invalid options: threads must be at least 1");
/// ```
#[derive(Debug)]
pub enum BenchError {
    /// The options are inconsistent.
    Options(String),
    /// The ledger could not be read, parsed or written.
    Ledger(String),
    /// A MySQL server refused or broke a connection or a statement the
    /// benchmark needs (the SQL benchmarks' setup).
    Sql(String),
    /// Connecting or preparing the table failed.
    Setup {
        /// What was being done.
        context: String,
        /// The client's error.
        source: client::ClientError,
    },
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BenchError::Options(message) => write!(f, "invalid options: {message}"),
            BenchError::Ledger(message) => write!(f, "ledger: {message}"),
            BenchError::Sql(message) => write!(f, "{message}"),
            BenchError::Setup { context, source } => write!(f, "{context}: {source}"),
        }
    }
}

impl std::error::Error for BenchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BenchError::Setup { source, .. } => Some(source),
            BenchError::Options(_) | BenchError::Ledger(_) | BenchError::Sql(_) => None,
        }
    }
}
