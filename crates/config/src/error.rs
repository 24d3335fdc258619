//! `ConfigError`: the one error type of the config crate. It carries the
//! file name, the line and the key so that every mistake in a cluster file
//! can be fixed without guessing where it is.

use std::fmt;

/// A mistake in a cluster config file, or a failure to read it.
///
/// Displays as `<file>:<line>: <key>: <message>`; the line is left out when
/// the mistake has no single place in the file (a missing table, no data
/// nodes), the key when it is a TOML syntax error or an I/O error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file name (or whatever name the caller gave the text).
    pub source_name: String,
    /// 1-based line of the offending key or value, if there is one.
    pub line: Option<usize>,
    /// Dotted key path, e.g. `cluster.replicas` or `data_node.port`.
    pub key: String,
    /// What is wrong, in words a user can act on.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source_name)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        f.write_str(": ")?;
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}
