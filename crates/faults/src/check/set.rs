//! The set checker: clients add unique elements (`f: "add"`, value: the
//! element), and after the run heals one final read (`f: "read"`, value:
//! every element present, an array) must hold every element whose add
//! was acknowledged (`ok`), and nothing that was never attempted. An add
//! that failed must not be there either; one whose outcome is unknown
//! (`info`) may or may not be.

use super::{describe, Verdict};
use crate::history::{Completion, Operation};
use std::collections::{BTreeMap, BTreeSet};

/// As [`check`], the verdict named `workload` (the durable workload is a
/// set whose adds commit durably).
pub fn check_named(operations: &[Operation], workload: &'static str) -> Verdict {
    Verdict {
        workload,
        ..check(operations)
    }
}

/// Checks the last successful read of `operations` against the adds.
pub fn check(operations: &[Operation]) -> Verdict {
    let total = operations.len();
    let mut adds: BTreeMap<u64, Completion> = BTreeMap::new();
    for operation in operations.iter().filter(|operation| operation.f == "add") {
        let Some(element) = operation.input.as_u64() else {
            return Verdict::invalid(
                "set",
                total,
                format!("an add of no element: {}", describe(operation)),
            );
        };
        adds.insert(element, operation.completion);
    }
    let Some(read) = operations
        .iter()
        .rev()
        .find(|operation| operation.f == "read" && operation.completion == Completion::Ok)
    else {
        return Verdict::invalid("set", total, "no final read succeeded".to_string());
    };
    let Some(present) = read.output.as_array().and_then(|values| {
        values
            .iter()
            .map(serde_json::Value::as_u64)
            .collect::<Option<BTreeSet<u64>>>()
    }) else {
        return Verdict::invalid(
            "set",
            total,
            format!(
                "the final read returned no set of elements: {}",
                describe(read)
            ),
        );
    };
    let lost: Vec<u64> = adds
        .iter()
        .filter(|&(element, &completion)| {
            completion == Completion::Ok && !present.contains(element)
        })
        .map(|(&element, _)| element)
        .collect();
    let unexpected: Vec<u64> = present
        .iter()
        .filter(|element| !matches!(adds.get(element), Some(Completion::Ok | Completion::Info)))
        .copied()
        .collect();
    if lost.is_empty() && unexpected.is_empty() {
        return Verdict::valid("set", total);
    }
    let sample = |elements: &[u64]| {
        let shown: Vec<String> = elements.iter().take(10).map(u64::to_string).collect();
        let more = elements.len().saturating_sub(10);
        if more > 0 {
            format!("{} and {more} more", shown.join(", "))
        } else {
            shown.join(", ")
        }
    };
    let mut anomaly = Vec::new();
    if !lost.is_empty() {
        anomaly.push(format!(
            "{} acknowledged add(s) missing from the final read: {}",
            lost.len(),
            sample(&lost)
        ));
    }
    if !unexpected.is_empty() {
        anomaly.push(format!(
            "{} element(s) read that no add could have put there (never attempted, or failed): {}",
            unexpected.len(),
            sample(&unexpected)
        ));
    }
    Verdict::invalid("set", total, anomaly.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{pair, parse};

    const HISTORY: &str = r#"
{"process":0,"type":"invoke","f":"add","value":1,"time":1}
{"process":0,"type":"ok","f":"add","value":1,"time":2}
{"process":1,"type":"invoke","f":"add","value":2,"time":3}
{"process":1,"type":"info","f":"add","value":2,"time":4}
{"process":0,"type":"invoke","f":"add","value":3,"time":5}
{"process":0,"type":"fail","f":"add","value":3,"time":6}
{"process":2,"type":"invoke","f":"read","value":null,"time":10}
{"process":2,"type":"ok","f":"read","value":READ,"time":11}
"#;

    fn verdict(read: &str) -> Verdict {
        check(&pair(&parse(&HISTORY.replace("READ", read)).unwrap()).unwrap())
    }

    #[test]
    fn lost_adds_and_elements_never_added_are_anomalies() {
        // The unknown add may or may not be there.
        assert!(verdict("[1]").valid);
        assert!(verdict("[1,2]").valid);
        // An acknowledged add lost.
        let lost = verdict("[2]");
        assert!(!lost.valid);
        assert!(
            lost.to_string().contains("1 acknowledged add(s) missing"),
            "{lost}"
        );
        // A failed add, and one never attempted, present.
        let unexpected = verdict("[1,3,9]");
        assert!(!unexpected.valid);
        assert!(
            unexpected.to_string().contains("2 element(s) read"),
            "{unexpected}"
        );
    }
}
