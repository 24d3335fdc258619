//! The checkers: each reads a history (`history::Op` records) and gives a
//! [`Verdict`]: valid, or invalid with the first anomaly found and the
//! operations involved.

pub mod bank;
pub mod register;
pub mod set;

use crate::history::Operation;

/// A checker's judgement of one history.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// The workload checked ("bank", "set", "register").
    pub workload: &'static str,
    /// No anomaly found.
    pub valid: bool,
    /// Operations looked at.
    pub operations: usize,
    /// The first anomaly found, with the operations involved.
    pub anomaly: Option<String>,
}

impl Verdict {
    pub(crate) fn valid(workload: &'static str, operations: usize) -> Verdict {
        Verdict {
            workload,
            valid: true,
            operations,
            anomaly: None,
        }
    }

    pub(crate) fn invalid(workload: &'static str, operations: usize, anomaly: String) -> Verdict {
        Verdict {
            workload,
            valid: false,
            operations,
            anomaly: Some(anomaly),
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.anomaly {
            None => write!(
                f,
                "{}: valid ({} operations)",
                self.workload, self.operations
            ),
            Some(anomaly) => write!(
                f,
                "{}: INVALID ({} operations): {anomaly}",
                self.workload, self.operations
            ),
        }
    }
}

/// An operation as a line of a report.
pub(crate) fn describe(operation: &Operation) -> String {
    let key = operation
        .key
        .map_or_else(String::new, |key| format!(" key {key}"));
    let ret = if operation.ret == u64::MAX {
        "?".to_string()
    } else {
        operation.ret.to_string()
    };
    format!(
        "process {} {}{key} {} -> {} ({:?}, {}..{ret} ns)",
        operation.process,
        operation.f,
        operation.input,
        operation.output,
        operation.completion,
        operation.call
    )
}
