//! The register checker against Porcupine itself (Go, v1.3.1, from the
//! module proxy; `crates/faults/porcupine`): random concurrent histories
//! of reads, writes and compare-and-sets on two keys, with failed and
//! unknown outcomes, most of them not linearizable, written to files;
//! both checkers judge every file, and must agree on each (400 in CI;
//! `FAULTS_PORCUPINE_HISTORIES=N` for more). Needs the Go
//! toolchain (and the module proxy, or a module cache holding
//! Porcupine); without Go the test fails, saying so.

use faults::history::{pair, Op, OpType};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A random history: 4 processes, each sequential, their operations
/// overlapping each other's; values 0..3; results random, so a history is
/// linearizable only sometimes.
fn random_history(seed: u64) -> Vec<Op> {
    let mut random = stdx::mix::XorShift::new(seed);
    let mut records: Vec<Op> = Vec::new();
    let mut free_at = [0u64; 4];
    // As in Jepsen, a process whose operation's outcome is unknown is
    // retired: the slot goes on as a new process.
    let mut process_of = [0u64, 1, 2, 3];
    let count = 4 + random.below(10);
    for _ in 0..count {
        let slot = random.below(4) as usize;
        let process = process_of[slot];
        let call = free_at[slot] + random.below(20);
        let ret = call + 1 + random.below(40);
        free_at[slot] = ret + 1;
        let key = Some(random.below(2));
        // Reads and expected values drawn from what was written to the
        // key so far (or none): plausible, so that a good share of the
        // histories is linearizable.
        let written: Vec<Value> = std::iter::once(Value::Null)
            .chain(
                records
                    .iter()
                    .filter(|op| op.key == key && op.op_type == OpType::Invoke)
                    .filter_map(|op| match op.f.as_str() {
                        "write" => Some(op.value.clone()),
                        "cas" => op.value.get(1).cloned(),
                        _ => None,
                    }),
            )
            .collect();
        let value = |random: &mut stdx::mix::XorShift| {
            written[random.below(written.len() as u64) as usize].clone()
        };
        let (f, input) = match random.below(3) {
            0 => ("read", Value::Null),
            1 => ("write", Value::from(random.below(3))),
            _ => (
                "cas",
                Value::from(vec![value(&mut random), Value::from(random.below(3))]),
            ),
        };
        let op_type = match random.below(10) {
            0 => OpType::Fail,
            1 => OpType::Info,
            _ => OpType::Ok,
        };
        let output = match (f, op_type) {
            ("read", OpType::Ok) => value(&mut random),
            _ => input.clone(),
        };
        records.push(Op {
            process,
            op_type: OpType::Invoke,
            f: f.into(),
            key,
            value: input,
            time: call,
            error: None,
            gci: None,
        });
        if op_type == OpType::Info {
            process_of[slot] += 4;
        }
        // Now and then an unknown outcome is never completed at all.
        if op_type != OpType::Info || random.below(2) == 0 {
            records.push(Op {
                process,
                op_type,
                f: f.into(),
                key,
                value: output,
                time: ret,
                error: None,
                gci: None,
            });
        }
    }
    records.sort_by_key(|op| (op.time, op.op_type != OpType::Invoke));
    records
}

/// Builds the Go program once, into the test's target directory.
fn porcupine_binary() -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("porcupine");
    let binary = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("porcupine-check");
    let built = Command::new("go")
        .args(["build", "-o"])
        .arg(&binary)
        .arg(".")
        .current_dir(&source)
        .status()
        .unwrap_or_else(|error| {
            panic!("cannot run `go` to build the Porcupine cross-check (is Go installed?): {error}")
        });
    assert!(built.success(), "building {} failed", source.display());
    binary
}

#[test]
fn the_register_checker_agrees_with_porcupine_on_random_histories() {
    let binary = porcupine_binary();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("porcupine-histories");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the histories' directory");
    let mut ours = Vec::new();
    let mut files = Vec::new();
    // More with FAULTS_PORCUPINE_HISTORIES=N.
    let count: u64 = std::env::var("FAULTS_PORCUPINE_HISTORIES")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(400);
    for seed in 1..=count {
        let history = random_history(seed);
        let path = dir.join(format!("{seed}.jsonl"));
        let text: Vec<String> = history.iter().map(Op::to_line).collect();
        std::fs::write(&path, text.join("\n")).expect("a history file");
        let verdict = faults::check::register::check(&pair(&history).expect("paired"));
        ours.push(verdict.valid);
        files.push(path);
    }
    let output = Command::new(&binary)
        .args(&files)
        .output()
        .expect("the Porcupine checker runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let verdicts = String::from_utf8(output.stdout).expect("text");
    let theirs: Vec<bool> = verdicts
        .lines()
        .map(|line| line.ends_with(" valid"))
        .collect();
    assert_eq!(theirs.len(), files.len(), "{verdicts}");
    let mut disagreements = Vec::new();
    for (index, path) in files.iter().enumerate() {
        if ours[index] != theirs[index] {
            disagreements.push(format!(
                "{}: ours {}, Porcupine's {}",
                path.display(),
                ours[index],
                theirs[index]
            ));
        }
    }
    assert!(disagreements.is_empty(), "{disagreements:#?}");
    let valid = ours.iter().filter(|&&valid| valid).count();
    eprintln!(
        "porcupine: {valid} of {} histories linearizable, both agree",
        ours.len()
    );
    assert!(
        valid > 20 && valid < ours.len() - 20,
        "the histories hold both verdicts in number ({valid} valid)"
    );
}
