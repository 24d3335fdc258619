//! The register checker: each key is a register that clients read
//! (`f: "read"`, result: the value, `null` for none), write (`"write"`,
//! argument: the value) and compare-and-set (`"cas"`, argument:
//! `[expected, new]`; `ok` if it set, `fail` if it did not: the value
//! was not the expected one, or its transaction aborted). Every key's
//! history must be **linearizable**: some order of its operations, each
//! taking effect at one instant between its invocation and its
//! completion, explains every result. An operation whose outcome is
//! unknown (`info`) may take effect at any instant after its
//! invocation, or never; a `fail` never took effect and, as in Jepsen,
//! says nothing more (a failed compare-and-set does not tell which
//! value it saw: its transaction may have aborted after reading the
//! expected one).
//!
//! The search is Wing and Gong's, with Lowe's memoization, as Porcupine
//! runs it: walk the invocations and completions in time order; try to
//! linearize the next pending operation whose invocation has been
//! reached (it must explain its result from the current state); on
//! meeting a completion whose operation is not linearized yet, undo the
//! last choice and try the next. A set of linearized operations with the
//! state it leaves, once seen, is never explored again, which makes the
//! search practical on histories of thousands of operations per key.
//! Histories split per key first: registers are independent.

use super::{describe, Verdict};
use crate::history::{Completion, Operation};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};

/// What an operation is, as the model sees it.
#[derive(Clone, Debug)]
enum Step {
    /// A read that returned this value.
    Read(Value),
    Write(Value),
    /// Set `new` if the value is `expected`; `set`: whether it did
    /// (`None`: unknown).
    Cas {
        expected: Value,
        new: Value,
        /// `Some(true)`: it set; `None`: unknown.
        set: Option<bool>,
    },
}

impl Step {
    /// The operation applied to `state`: the state after it, or `None`
    /// if it cannot have given its result there.
    fn apply(&self, state: &Value) -> Option<Value> {
        match self {
            Step::Read(value) => (value == state).then(|| state.clone()),
            Step::Write(value) => Some(value.clone()),
            Step::Cas { expected, new, set } => {
                let matches = expected == state;
                match set {
                    Some(_) => matches.then(|| new.clone()),
                    None if matches => Some(new.clone()),
                    None => Some(state.clone()),
                }
            }
        }
    }
}

/// Checks every key's operations for linearizability from the initial
/// value `null` (no value).
pub fn check(operations: &[Operation]) -> Verdict {
    let mut by_key: BTreeMap<u64, Vec<&Operation>> = BTreeMap::new();
    for operation in operations {
        by_key
            .entry(operation.key.unwrap_or(0))
            .or_default()
            .push(operation);
    }
    for (key, of_key) in &by_key {
        if let Err(anomaly) = check_key(of_key) {
            return Verdict::invalid(
                "register",
                operations.len(),
                format!("key {key} is not linearizable: {anomaly}"),
            );
        }
    }
    Verdict::valid("register", operations.len())
}

/// The model's step for `operation`, or `None` when it adds nothing to
/// check (a failed operation never happened; a read of unknown result
/// constrains nothing).
fn step_of(operation: &Operation) -> Result<Option<Step>, String> {
    if operation.completion == Completion::Fail {
        if operation.f == "cas" {
            // Still a well-formed one.
            cas_arguments(operation)?;
        }
        return Ok(None);
    }
    let known = operation.completion == Completion::Ok;
    match operation.f.as_str() {
        "read" if known => Ok(Some(Step::Read(operation.output.clone()))),
        "read" => Ok(None),
        "write" => Ok(Some(Step::Write(operation.input.clone()))),
        "cas" => {
            let (expected, new) = cas_arguments(operation)?;
            Ok(Some(Step::Cas {
                expected,
                new,
                set: known.then_some(true),
            }))
        }
        other => Err(format!(
            "a register has no operation {other:?}: {}",
            describe(operation)
        )),
    }
}

fn cas_arguments(operation: &Operation) -> Result<(Value, Value), String> {
    match operation.input.as_array().map(Vec::as_slice) {
        Some([expected, new]) => Ok((expected.clone(), new.clone())),
        _ => Err(format!(
            "a cas takes [expected, new]: {}",
            describe(operation)
        )),
    }
}

/// One invocation or completion, in the doubly linked list the search
/// lifts operations out of.
#[derive(Clone, Copy)]
struct Entry {
    operation: usize,
    /// The matching completion's entry, for an invocation.
    completion: Option<usize>,
    prev: usize,
    next: usize,
}

/// The sentinel before the first entry, and the end of the list.
const HEAD: usize = 0;
const END: usize = usize::MAX;

fn check_key(operations: &[&Operation]) -> Result<(), String> {
    let mut steps = Vec::new();
    let mut kept = Vec::new();
    for operation in operations {
        if let Some(step) = step_of(operation)? {
            steps.push(step);
            kept.push(*operation);
        }
    }
    let count = steps.len();
    if count == 0 {
        return Ok(());
    }
    // Events in time order, invocations before completions at one instant
    // (touching operations may go either way).
    let mut events: Vec<(u64, bool, usize)> = Vec::with_capacity(2 * count);
    for (index, operation) in kept.iter().enumerate() {
        events.push((operation.call, false, index));
        events.push((operation.ret, true, index));
    }
    events.sort_by_key(|&(time, is_completion, index)| (time, is_completion, index));
    // Entry 0 is the head sentinel; entry i + 1 is event i.
    let mut entries = vec![Entry {
        operation: usize::MAX,
        completion: None,
        prev: END,
        next: if events.is_empty() { END } else { 1 },
    }];
    let mut completion_of = vec![0usize; count];
    for (position, &(_, is_completion, index)) in events.iter().enumerate() {
        let me = position + 1;
        if is_completion {
            completion_of[index] = me;
        }
        entries.push(Entry {
            operation: index,
            completion: None,
            prev: me - 1,
            next: if me == events.len() { END } else { me + 1 },
        });
    }
    for (position, &(_, is_completion, index)) in events.iter().enumerate() {
        if !is_completion {
            entries[position + 1].completion = Some(completion_of[index]);
        }
    }

    // The set of linearized operations, as a Zobrist hash: the XOR of a
    // random 128-bit key per operation in it, updated in O(1) as one is
    // linearized or undone. The memo keeps (that hash, state): a set is
    // never copied, so a key's history of a million operations costs
    // O(1) per step and 16 bytes plus the state per memo entry. Two sets
    // meeting on one hash (odds about 2^-128 a pair) would only make the
    // search skip a branch: it could call a history invalid, never
    // valid, wrongly.
    let keys: Vec<u128> = (0..count).map(zobrist_key).collect();
    let mut linearized = 0u128;
    let mut state = Value::Null;
    // Chosen so far: (invocation entry, state before it).
    let mut chosen: Vec<(usize, Value)> = Vec::new();
    // States as their JSON text (a `Value` is not hashable).
    let mut seen: HashSet<(u128, String)> = HashSet::new();
    let mut deepest = (0usize, None::<usize>);
    let mut entry = entries[HEAD].next;
    while entries[HEAD].next != END {
        if chosen.len() > deepest.0 || deepest.1.is_none() {
            deepest = (chosen.len(), Some(entries[HEAD].next));
        }
        // At the list's end nothing is left to try at this depth; at a
        // completion whose operation is not linearized, the last choice
        // cannot stand. Either way: undo it and try the one after it.
        let backtrack = entry == END || entries[entry].completion.is_none();
        if backtrack {
            let Some((undone, before)) = chosen.pop() else {
                return Err(stuck(&kept, &entries, deepest, count));
            };
            let operation = entries[undone].operation;
            linearized ^= keys[operation];
            state = before;
            unlift(&mut entries, undone);
            entry = entries[undone].next;
            continue;
        }
        let operation = entries[entry].operation;
        let tried = steps[operation].apply(&state).and_then(|after| {
            let with = linearized ^ keys[operation];
            seen.insert((with, after.to_string()))
                .then_some((with, after))
        });
        match tried {
            Some((with, after)) => {
                chosen.push((entry, std::mem::replace(&mut state, after)));
                linearized = with;
                lift(&mut entries, entry);
                entry = entries[HEAD].next;
            }
            None => entry = entries[entry].next,
        }
    }
    Ok(())
}

/// Takes an invocation and its completion out of the list.
fn lift(entries: &mut [Entry], call: usize) {
    let completion = entries[call].completion.expect("an invocation");
    for removed in [call, completion] {
        let Entry { prev, next, .. } = entries[removed];
        entries[prev].next = next;
        if next != END {
            entries[next].prev = prev;
        }
    }
}

/// Puts them back (in the reverse order of `lift`).
fn unlift(entries: &mut [Entry], call: usize) {
    let completion = entries[call].completion.expect("an invocation");
    for restored in [completion, call] {
        let Entry { prev, next, .. } = entries[restored];
        entries[prev].next = restored;
        if next != END {
            entries[next].prev = restored;
        }
    }
}

/// Operation `index`'s random key in the Zobrist hash of a set
/// (splitmix64, twice: fixed, so a verdict does not depend on the run).
fn zobrist_key(index: usize) -> u128 {
    let mix = |mut z: u64| {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let index = index as u64;
    (u128::from(mix(index.wrapping_mul(2))) << 64) | u128::from(mix(index.wrapping_mul(2) + 1))
}

/// The report of a key with no linearization: how far the best attempt
/// got, and the operation it could not place next.
fn stuck(
    kept: &[&Operation],
    entries: &[Entry],
    (depth, first): (usize, Option<usize>),
    count: usize,
) -> String {
    let next = first
        .filter(|&entry| entry != END)
        .map(|entry| describe(kept[entries[entry].operation]))
        .unwrap_or_default();
    format!(
        "at most {depth} of its {count} operations can be ordered; the next could not be \
         explained: {next}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{pair, parse, Op, OpType};

    fn verdict(text: &str) -> Verdict {
        check(&pair(&parse(text).unwrap()).unwrap())
    }

    #[test]
    fn concurrent_writes_and_reads_that_some_order_explains_are_valid() {
        // The read overlaps both writes: either value is fine.
        let text = r#"
{"process":0,"type":"invoke","f":"write","key":1,"value":1,"time":0}
{"process":1,"type":"invoke","f":"write","key":1,"value":2,"time":1}
{"process":2,"type":"invoke","f":"read","key":1,"value":null,"time":2}
{"process":0,"type":"ok","f":"write","key":1,"value":1,"time":10}
{"process":1,"type":"ok","f":"write","key":1,"value":2,"time":11}
{"process":2,"type":"ok","f":"read","key":1,"value":1,"time":12}
{"process":2,"type":"invoke","f":"read","key":1,"value":null,"time":20}
{"process":2,"type":"ok","f":"read","key":1,"value":1,"time":21}
"#;
        assert!(verdict(text).valid, "{}", verdict(text));
    }

    #[test]
    fn a_stale_read_after_a_completed_write_is_not_linearizable() {
        let text = r#"
{"process":0,"type":"invoke","f":"write","key":1,"value":1,"time":0}
{"process":0,"type":"ok","f":"write","key":1,"value":1,"time":1}
{"process":0,"type":"invoke","f":"write","key":1,"value":2,"time":2}
{"process":0,"type":"ok","f":"write","key":1,"value":2,"time":3}
{"process":1,"type":"invoke","f":"read","key":1,"value":null,"time":4}
{"process":1,"type":"ok","f":"read","key":1,"value":1,"time":5}
"#;
        let verdict = verdict(text);
        assert!(!verdict.valid);
        assert!(
            verdict.to_string().contains("key 1 is not linearizable"),
            "{verdict}"
        );
        assert!(verdict.to_string().contains("read key 1"), "{verdict}");
    }

    #[test]
    fn unknown_writes_may_or_may_not_take_effect_and_failed_ones_never_do() {
        // An unknown write may land late: a read after sees it.
        let late = r#"
{"process":0,"type":"invoke","f":"write","key":3,"value":7,"time":0}
{"process":0,"type":"info","f":"write","key":3,"value":null,"time":1}
{"process":1,"type":"invoke","f":"read","key":3,"value":null,"time":5}
{"process":1,"type":"ok","f":"read","key":3,"value":null,"time":6}
{"process":1,"type":"invoke","f":"read","key":3,"value":null,"time":7}
{"process":1,"type":"ok","f":"read","key":3,"value":7,"time":8}
"#;
        assert!(verdict(late).valid, "{}", verdict(late));
        // A failed write never lands.
        let failed = late.replace(
            r#""type":"info","f":"write""#,
            r#""type":"fail","f":"write""#,
        );
        assert!(!verdict(&failed).valid);
    }

    #[test]
    fn compare_and_set_succeeds_only_on_the_expected_value() {
        let ok = r#"
{"process":0,"type":"invoke","f":"write","key":2,"value":1,"time":0}
{"process":0,"type":"ok","f":"write","key":2,"value":1,"time":1}
{"process":1,"type":"invoke","f":"cas","key":2,"value":[1,5],"time":2}
{"process":1,"type":"ok","f":"cas","key":2,"value":[1,5],"time":3}
{"process":2,"type":"invoke","f":"cas","key":2,"value":[1,6],"time":4}
{"process":2,"type":"fail","f":"cas","key":2,"value":[1,6],"time":5}
{"process":2,"type":"invoke","f":"read","key":2,"value":null,"time":6}
{"process":2,"type":"ok","f":"read","key":2,"value":5,"time":7}
"#;
        assert!(verdict(ok).valid, "{}", verdict(ok));
        // Both cas from 1 succeeding, one after the other, is impossible.
        let twice = ok.replace(r#""type":"fail","f":"cas""#, r#""type":"ok","f":"cas""#);
        assert!(!verdict(&twice).valid);
    }

    /// A random history made from a sequential run: each operation takes
    /// effect at its instant, its invocation and completion somewhere
    /// around it (so operations overlap), some outcomes unknown.
    fn random_history(seed: u64) -> Vec<crate::history::Op> {
        use crate::history::{Op, OpType};
        let mut random = stdx::mix::XorShift::new(seed);
        let mut ops = Vec::new();
        let mut state = Value::Null;
        for (index, process) in (0..60u64).map(|index| (index, index % 6)) {
            let instant = 1_000 + index * 100;
            let call = instant - random.below(250);
            let ret = instant + random.below(250);
            let (f, input, output, op_type) = match random.below(3) {
                0 => {
                    let value = Value::from(random.below(5));
                    state = value.clone();
                    let op_type = if random.below(5) == 0 {
                        OpType::Info
                    } else {
                        OpType::Ok
                    };
                    ("write", value.clone(), value, op_type)
                }
                1 => ("read", Value::Null, state.clone(), OpType::Ok),
                _ => {
                    let expected = Value::from(random.below(5));
                    let new = Value::from(random.below(5));
                    let input = Value::from(vec![expected.clone(), new.clone()]);
                    if expected == state {
                        state = new;
                        ("cas", input.clone(), input, OpType::Ok)
                    } else {
                        ("cas", input.clone(), input, OpType::Fail)
                    }
                }
            };
            // Each process is sequential: its own operations never
            // overlap (60 operations round robin over 6 processes are
            // 600 ns apart, more than the 500 ns an interval spans).
            let process = process + seed * 100;
            ops.push((
                call,
                Op {
                    process,
                    op_type: OpType::Invoke,
                    f: f.into(),
                    key: Some(1),
                    value: input,
                    time: call,
                    error: None,
                    gci: None,
                },
            ));
            ops.push((
                ret,
                Op {
                    process,
                    op_type,
                    f: f.into(),
                    key: Some(1),
                    value: output,
                    time: ret,
                    error: None,
                    gci: None,
                },
            ));
        }
        ops.sort_by_key(|(time, _)| *time);
        ops.into_iter().map(|(_, op)| op).collect()
    }

    #[test]
    fn random_histories_of_a_sequential_run_are_valid_and_a_forged_read_is_not() {
        for seed in 1..200u64 {
            let history = random_history(seed);
            let operations = pair(&history).unwrap();
            let verdict = check(&operations);
            assert!(verdict.valid, "seed {seed}: {verdict}");
            // A read of a value no one ever wrote.
            let mut forged = history.clone();
            if let Some(read) = forged
                .iter_mut()
                .find(|op| op.f == "read" && op.op_type == crate::history::OpType::Ok)
            {
                read.value = Value::from(999);
                let verdict = check(&pair(&forged).unwrap());
                assert!(!verdict.valid, "seed {seed}: a forged read passed");
            }
        }
    }

    #[test]
    fn a_key_with_hundreds_of_thousands_of_operations_and_unknown_writes_is_checked() {
        // An hour's worth on one key: 4 processes in overlapping rounds
        // of a write and three reads, and now and then a write whose
        // outcome is unknown (it stays open for the rest of the history).
        let mut ops = Vec::new();
        let mut time = 0u64;
        let mut process_base = 0u64;
        let record = |process, op_type, f: &str, value: serde_json::Value, time| Op {
            process,
            op_type,
            f: f.into(),
            key: Some(0),
            value,
            time,
            error: None,
            gci: None,
        };
        for round in 0..50_000u64 {
            let writer = process_base;
            ops.push(record(writer, OpType::Invoke, "write", round.into(), time));
            for reader in 1..4 {
                ops.push(record(
                    writer + reader,
                    OpType::Invoke,
                    "read",
                    Value::Null,
                    time + 1,
                ));
            }
            time += 2;
            if round % 1000 == 999 {
                // Unknown: the writer's process retires.
                ops.push(record(writer, OpType::Info, "write", round.into(), time));
                process_base += 10;
            } else {
                ops.push(record(writer, OpType::Ok, "write", round.into(), time));
            }
            for reader in 1..4 {
                let seen = if reader == 1 && round > 0 {
                    round - 1
                } else {
                    round
                };
                ops.push(record(
                    writer + reader,
                    OpType::Ok,
                    "read",
                    seen.into(),
                    time + 1,
                ));
            }
            time += 2;
        }
        let operations = crate::history::pair(&ops).unwrap();
        assert_eq!(operations.len(), 200_000);
        let verdict = check(&operations);
        assert!(verdict.valid, "{verdict}");
    }

    #[test]
    fn keys_are_independent_and_a_long_history_is_checked_quickly() {
        // 2,000 overlapping operations on each of 3 keys: without
        // memoization the search would not end.
        let mut lines = Vec::new();
        let mut time = 0u64;
        for round in 0..500u64 {
            for key in 0..3u64 {
                for process in 0..4u64 {
                    let p = key * 10 + process;
                    let (f, value) = if process == 0 {
                        ("write", round.to_string())
                    } else {
                        ("read", "null".to_string())
                    };
                    lines.push(format!(
                        r#"{{"process":{p},"type":"invoke","f":"{f}","key":{key},"value":{value},"time":{time}}}"#
                    ));
                }
                time += 1;
                for process in 0..4u64 {
                    let p = key * 10 + process;
                    let (f, value) = if process == 0 {
                        ("write", round.to_string())
                    } else {
                        // Concurrent with the write: the old or the new value.
                        let seen = if process % 2 == 0 || round == 0 {
                            round
                        } else {
                            round - 1
                        };
                        ("read", seen.to_string())
                    };
                    lines.push(format!(
                        r#"{{"process":{p},"type":"ok","f":"{f}","key":{key},"value":{value},"time":{time}}}"#
                    ));
                }
                time += 1;
            }
        }
        let verdict = verdict(&lines.join("\n"));
        assert!(verdict.valid, "{verdict}");
        assert_eq!(verdict.operations, 6_000);
    }
}
