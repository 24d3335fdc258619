//! The Redis comparison script (`bench/keylookup-vs-redis.sh`, design 0006)
//! on a small table: both Redis runs, both Tessera clusters, every phase
//! without error and every read verified (the script exits non-zero
//! otherwise), and the table it prints. No figure is asserted: the figures
//! are benchmarks (docs/benchmarks.md).

mod common;

use common::TESSERA;
use std::path::Path;
use std::process::Command;

#[test]
fn the_comparison_script_runs_on_a_small_table_and_prints_its_table() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let work = std::env::temp_dir().join(format!("tessera-vs-redis-test-{}", std::process::id()));
    let output = Command::new("bash")
        .arg(root.join("bench/keylookup-vs-redis.sh"))
        .args(["2000", "1"])
        .env("TESSERA", TESSERA)
        .env("WORK", &work)
        // Below the ephemeral range other tests' ports come from.
        .env("PORT", "21500")
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the script failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|line| line.starts_with("| ") && !line.starts_with("| workload"))
        .collect();
    for workload in [
        "batched reads, 1 node, replicas 1",
        "batched reads, 2 nodes, replicas 2",
        "batched updates, 2 nodes, replicas 2, durable",
        "single reads, 1 node, replicas 1",
        "single reads, 2 nodes, replicas 2",
    ] {
        let row = rows
            .iter()
            .find(|row| row.starts_with(&format!("| {workload} |")))
            .unwrap_or_else(|| panic!("no row for {workload}:\n{stdout}"));
        // Tessera and Redis ops/s both measured (a number above zero).
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        for cell in [cells[2], cells[5]] {
            let value: f64 = cell.replace(',', "").parse().expect("a number");
            assert!(value > 0.0, "{workload}: {row}");
        }
    }
    let _ = std::fs::remove_dir_all(&work);
}
