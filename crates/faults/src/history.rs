//! Histories: what clients asked for and what they saw, as Jepsen
//! records them. Each client process logs an `invoke` when it sends an
//! operation and one completion when it knows the outcome: `ok` (it
//! happened), `fail` (it certainly did not), or `info` (unknown: a
//! timeout, a lost connection, a commit whose answer never came). A
//! history is a sequence of such records, one JSON object per line:
//!
//! ```text
//! {"process":3,"type":"invoke","f":"write","key":7,"value":4,"time":1200}
//! {"process":3,"type":"ok","f":"write","key":7,"value":4,"time":1900}
//! ```
//!
//! `time` is in nanoseconds since the run began (any monotonic origin
//! shared by all processes of a run); `key` is optional (workloads on
//! one object omit it); `value` is whatever the workload's operation
//! carries (JSON).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a record says of an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpType {
    /// The client sends the operation.
    Invoke,
    /// It happened.
    Ok,
    /// It certainly did not happen.
    Fail,
    /// Its outcome is unknown: it may have happened, at any time after
    /// its invocation.
    Info,
}

/// One record of a history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Op {
    /// The client process (one operation at a time each).
    pub process: u64,
    /// Invoke or a completion.
    #[serde(rename = "type")]
    pub op_type: OpType,
    /// The operation's kind ("read", "write", "cas", "transfer", ...).
    pub f: String,
    /// The object it is on, for workloads of many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<u64>,
    /// Its argument on invoke; its result on completion.
    #[serde(default)]
    pub value: Value,
    /// Nanoseconds since the run began.
    pub time: u64,
    /// Why a `fail` or `info` completion ended so (for the report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The commit's global checkpoint id, on an `ok` completion of a
    /// write that reports one: a whole-cluster restart keeps exactly
    /// the commits of GCIs up to the one it restores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gci: Option<u64>,
}

impl Op {
    /// The record as one JSON line (no newline).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("an Op always serializes")
    }
}

/// Reads a history: one JSON record per non-empty line.
pub fn parse(text: &str) -> Result<Vec<Op>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(index, line)| {
            serde_json::from_str(line)
                .map_err(|error| format!("history line {}: {error}: {line}", index + 1))
        })
        .collect()
}

/// How an operation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    Ok,
    Fail,
    /// Unknown, or never completed in the history (the run ended first).
    Info,
}

/// An invocation paired with its completion.
#[derive(Clone, Debug, PartialEq)]
pub struct Operation {
    pub process: u64,
    pub f: String,
    pub key: Option<u64>,
    /// The invocation's value (the argument).
    pub input: Value,
    /// The completion's value (the result), `Null` without one.
    pub output: Value,
    pub completion: Completion,
    /// Invocation time.
    pub call: u64,
    /// Completion time; `u64::MAX` when unknown (an `info`, or none).
    pub ret: u64,
    /// The commit's GCI, when its completion gave one.
    pub gci: Option<u64>,
}

/// Pairs each invocation with the next completion of its process. A
/// completion without an invocation, or a second invocation before the
/// first completed, is an error (a client bug, not an anomaly).
pub fn pair(history: &[Op]) -> Result<Vec<Operation>, String> {
    let mut open: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
    let mut operations: Vec<Operation> = Vec::new();
    for (index, op) in history.iter().enumerate() {
        match op.op_type {
            OpType::Invoke => {
                if let Some(&earlier) = open.get(&op.process) {
                    return Err(format!(
                        "record {index}: process {} invokes again while operation {earlier} \
                         is open",
                        op.process
                    ));
                }
                open.insert(op.process, operations.len());
                operations.push(Operation {
                    process: op.process,
                    f: op.f.clone(),
                    key: op.key,
                    input: op.value.clone(),
                    output: Value::Null,
                    completion: Completion::Info,
                    call: op.time,
                    ret: u64::MAX,
                    gci: None,
                });
            }
            completion => {
                let Some(opened) = open.remove(&op.process) else {
                    return Err(format!(
                        "record {index}: process {} completes an operation it never invoked",
                        op.process
                    ));
                };
                let operation = &mut operations[opened];
                if operation.f != op.f {
                    return Err(format!(
                        "record {index}: process {} completes {:?} but invoked {:?}",
                        op.process, op.f, operation.f
                    ));
                }
                operation.output = op.value.clone();
                operation.gci = op.gci;
                match completion {
                    OpType::Ok => {
                        operation.completion = Completion::Ok;
                        operation.ret = op.time;
                    }
                    OpType::Fail => {
                        operation.completion = Completion::Fail;
                        operation.ret = op.time;
                    }
                    // Unknown: it may take effect at any time from its call on.
                    OpType::Info | OpType::Invoke => {}
                }
            }
        }
    }
    Ok(operations)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_pair_by_process() {
        let text = r#"
{"process":1,"type":"invoke","f":"write","key":7,"value":4,"time":10}
{"process":2,"type":"invoke","f":"read","key":7,"value":null,"time":11}
{"process":1,"type":"ok","f":"write","key":7,"value":4,"time":20}
{"process":2,"type":"info","f":"read","key":7,"value":null,"time":30}
{"process":1,"type":"invoke","f":"cas","key":7,"value":[4,5],"time":40}
"#;
        let history = parse(text).unwrap();
        assert_eq!(history.len(), 5);
        assert_eq!(parse(&history[0].to_line()).unwrap()[0], history[0]);
        let operations = pair(&history).unwrap();
        assert_eq!(operations.len(), 3);
        assert_eq!(
            (operations[0].completion, operations[0].ret),
            (Completion::Ok, 20)
        );
        assert_eq!(
            (operations[1].completion, operations[1].ret),
            (Completion::Info, u64::MAX)
        );
        // Never completed: unknown.
        assert_eq!(operations[2].completion, Completion::Info);
    }

    #[test]
    fn a_client_bug_is_an_error_not_a_verdict() {
        let twice = r#"
{"process":1,"type":"invoke","f":"read","value":null,"time":1}
{"process":1,"type":"invoke","f":"read","value":null,"time":2}
"#;
        assert!(pair(&parse(twice).unwrap()).is_err());
        let orphan = r#"{"process":1,"type":"ok","f":"read","value":null,"time":1}"#;
        assert!(pair(&parse(orphan).unwrap()).is_err());
        assert!(parse("{not json").is_err());
    }
}
