//! Prints what an online index build and a locking scan cost through a
//! running cluster (docs/design/0024-online-index-changes.md,
//! docs/design/0025-locking-scans.md):
//!
//! ```text
//! cargo run --release -p bench --example index_changes -- MGMD_ADDR [ROWS]
//! ```
//!
//! Loads ROWS rows (default 1,000,000) into a fresh table `index_bench`
//! (k BIGINT UNSIGNED key, n BIGINT), then:
//! - `CREATE INDEX` on n with nothing else running: rows a second;
//! - again while one client updates n of random rows in a loop: rows a
//!   second of the build, and the updates a second before and during it;
//! - both again as a unique index (`create_unique_index`), before them,
//!   the writer giving each row a value no other row holds;
//! - 100-row primary-key ranges, 2,000 of them, read committed and with
//!   exclusive locks (each in its own transaction): ranges a second.
//!
//! It drops the table at the end. Figures only: nothing is asserted.

use client::{Access, Cluster, Commit, KeyRange, LockMode, ScanOptions, Value};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TABLE: &str = "index_bench";
const RANGES: u64 = 2_000;

fn main() {
    let mut args = std::env::args().skip(1);
    let mgmd = args.next().unwrap_or_else(|| {
        eprintln!("usage: index_changes MGMD_ADDR [ROWS]");
        std::process::exit(2)
    });
    let rows: u64 = args
        .next()
        .map(|rows| rows.parse().expect("ROWS is a number"))
        .unwrap_or(1_000_000);
    let cluster = Arc::new(Cluster::connect(&mgmd).expect("connect"));
    let _ = cluster.drop_table(TABLE);
    let definition = client::TableDef {
        id: 0,
        version: 0,
        name: TABLE.into(),
        columns: vec![
            column("k", client::ColumnType::BigInt { unsigned: true }),
            column("n", client::ColumnType::BigInt { unsigned: false }),
        ],
        primary_key: vec![0],
        partitions: 0,
        indexes: Vec::new(),
        revision: 0,
        partition_key: Vec::new(),
    };
    cluster.create_table(&definition).expect("create the table");
    let table = cluster.table(TABLE).unwrap();
    let started = Instant::now();
    for first in (0..rows).step_by(500) {
        let mut transaction = cluster.transaction();
        for k in first..(first + 500).min(rows) {
            let values = [("k", Value::UInt(k)), ("n", Value::Int(n_of(k)))];
            transaction.insert(&table, &values).unwrap();
        }
        transaction.execute(Commit::Yes).expect("load");
    }
    println!(
        "loaded {rows} rows in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let seconds = time(|| cluster.create_index(TABLE, "by_n", &["n"]).expect("create"));
    println!(
        "create index, idle:         {:>9.0} rows/s ({seconds:.2} s)",
        rows as f64 / seconds
    );
    cluster.drop_index(TABLE, "by_n").expect("drop");

    // As a unique index (docs/design/0026-unique-indexes.md), before any
    // update repeats a value: the rows' hidden rows built in
    // transactions of a tc's own. Its writer gives each row a value no
    // other row holds.
    let seconds = time(|| {
        cluster
            .create_unique_index(TABLE, "unique_n", &["n"])
            .expect("create unique")
    });
    println!(
        "create unique index, idle:   {:>9.0} rows/s ({seconds:.2} s)",
        rows as f64 / seconds
    );
    cluster.drop_index(TABLE, "unique_n").expect("drop");
    // Negative, and apart by the key space: held by no row.
    let fresh = move |k: u64, round: i64| -1 - (round * rows as i64 + k as i64);
    let (seconds, before, during) = while_updating(&cluster, rows, fresh, || {
        cluster
            .create_unique_index(TABLE, "unique_n", &["n"])
            .expect("create unique")
    });
    println!(
        "create unique index, under updates: {:>9.0} rows/s ({seconds:.2} s); updates/s \
         {before:.0} before, {during:.0} during",
        rows as f64 / seconds
    );
    cluster.drop_index(TABLE, "unique_n").expect("drop");

    // Under an update load that repeats values.
    let repeating = |k: u64, _| n_of(k + 7);
    let (seconds, before, during) = while_updating(&cluster, rows, repeating, || {
        cluster.create_index(TABLE, "by_n", &["n"]).expect("create")
    });
    println!(
        "create index, under updates: {:>9.0} rows/s ({seconds:.2} s); updates/s {before:.0} \
         before, {during:.0} during",
        rows as f64 / seconds
    );

    for (name, lock) in [
        ("committed read", LockMode::CommittedRead),
        ("exclusive locks", LockMode::Exclusive),
    ] {
        let seconds = time(|| {
            for at in 0..RANGES {
                let low = (at * 7_919) % rows.saturating_sub(100).max(1);
                let range = [KeyRange {
                    low: Bound::Included(vec![Value::UInt(low)]),
                    high: Bound::Excluded(vec![Value::UInt(low + 100)]),
                }];
                let options = ScanOptions {
                    ordered: true,
                    ..ScanOptions::default()
                };
                let mut transaction = cluster.transaction();
                let found = transaction
                    .scan_locked(&table, Access::PrimaryKey(&range), &options, lock)
                    .expect("a range")
                    .rows;
                assert_eq!(found.len() as u64, 100.min(rows), "a whole range");
                transaction.execute(Commit::Yes).expect("commit");
            }
        });
        println!(
            "100-row ranges, {name:<15} {:>7.0} ranges/s",
            RANGES as f64 / seconds
        );
    }
    cluster.drop_table(TABLE).expect("drop the table");
}

/// Runs `change` while one client updates n of random rows to
/// `value(k, round)`, one update a transaction: the seconds it took, and
/// the updates a second before it (after two seconds of warming up) and
/// during it.
fn while_updating(
    cluster: &Arc<Cluster>,
    rows: u64,
    value: impl Fn(u64, i64) -> i64 + Send + 'static,
    change: impl FnOnce(),
) -> (f64, f64, f64) {
    let running = Arc::new(AtomicBool::new(true));
    let updates = Arc::new(AtomicU64::new(0));
    let writer = {
        let (cluster, running, updates) = (cluster.clone(), running.clone(), updates.clone());
        std::thread::spawn(move || {
            let table = cluster.table(TABLE).unwrap();
            let (mut k, mut round): (u64, i64) = (1, 0);
            while running.load(Ordering::Relaxed) {
                k = (k * 6_364_136_223_846_793_005 + 1) % rows.max(1);
                round += 1;
                let mut transaction = cluster.transaction();
                let set = [("n", Value::Int(value(k, round)))];
                if transaction.update(&table, &[Value::UInt(k)], &set).is_ok()
                    && transaction.execute(Commit::Yes).is_ok()
                {
                    updates.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    std::thread::sleep(Duration::from_secs(2));
    updates.swap(0, Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs(2));
    let before = updates.swap(0, Ordering::Relaxed) as f64 / 2.0;
    let seconds = time(change);
    let during = updates.swap(0, Ordering::Relaxed) as f64 / seconds;
    running.store(false, Ordering::Relaxed);
    writer.join().unwrap();
    (seconds, before, during)
}

fn column(name: &str, column_type: client::ColumnType) -> client::ColumnDef {
    client::ColumnDef {
        name: name.into(),
        column_type,
        nullable: false,
    }
}

fn n_of(k: u64) -> i64 {
    (k.wrapping_mul(2_654_435_761) % 1_000_003) as i64
}

fn time(work: impl FnOnce()) -> f64 {
    let started = Instant::now();
    work();
    started.elapsed().as_secs_f64()
}
