//! The bank checker: accounts hold a fixed total that transfers only move
//! around, so every successful read of all balances (`f: "read"`, value:
//! the balances, an array) must sum to the total and show no negative
//! balance. Transfers are not checked one by one (their outcome may be
//! unknown); the reads are what a client could see.

use super::{describe, Verdict};
use crate::history::{Completion, Operation};

/// Checks every successful read of `operations` against `total`.
pub fn check(operations: &[Operation], total: i64) -> Verdict {
    let mut reads = 0;
    for operation in operations {
        if operation.f != "read" || operation.completion != Completion::Ok {
            continue;
        }
        reads += 1;
        let Some(balances) = operation.output.as_array() else {
            return Verdict::invalid(
                "bank",
                operations.len(),
                format!("a read returned no balances: {}", describe(operation)),
            );
        };
        let values: Option<Vec<i64>> = balances.iter().map(serde_json::Value::as_i64).collect();
        let Some(values) = values else {
            return Verdict::invalid(
                "bank",
                operations.len(),
                format!(
                    "a read returned a balance that is not a number: {}",
                    describe(operation)
                ),
            );
        };
        let sum: i64 = values.iter().sum();
        if sum != total {
            return Verdict::invalid(
                "bank",
                operations.len(),
                format!(
                    "a read summed to {sum}, not the total {total}: {}",
                    describe(operation)
                ),
            );
        }
        if let Some(negative) = values.iter().find(|&&balance| balance < 0) {
            return Verdict::invalid(
                "bank",
                operations.len(),
                format!(
                    "a read showed a negative balance {negative}: {}",
                    describe(operation)
                ),
            );
        }
    }
    let _ = reads;
    Verdict::valid("bank", operations.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{pair, parse};

    const HISTORY: &str = r#"
{"process":0,"type":"invoke","f":"transfer","value":{"from":0,"to":1,"amount":5},"time":1}
{"process":1,"type":"invoke","f":"read","value":null,"time":2}
{"process":0,"type":"info","f":"transfer","value":null,"time":3}
{"process":1,"type":"ok","f":"read","value":[15,5],"time":4}
{"process":1,"type":"invoke","f":"read","value":null,"time":5}
{"process":1,"type":"ok","f":"read","value":READ,"time":6}
"#;

    fn verdict(read: &str) -> Verdict {
        let history = parse(&HISTORY.replace("READ", read)).unwrap();
        check(&pair(&history).unwrap(), 20)
    }

    #[test]
    fn balanced_reads_are_valid_and_unbalanced_or_negative_ones_are_not() {
        assert!(verdict("[10,10]").valid);
        let unbalanced = verdict("[10,15]");
        assert!(!unbalanced.valid);
        assert!(
            unbalanced
                .anomaly
                .as_deref()
                .unwrap()
                .contains("summed to 25"),
            "{unbalanced}"
        );
        let negative = verdict("[25,-5]");
        assert!(!negative.valid);
        assert!(
            negative.to_string().contains("negative balance -5"),
            "{negative}"
        );
    }
}
