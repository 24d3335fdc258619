//! Prints what a unique index costs through a running cluster
//! (docs/design/0026-unique-indexes.md):
//!
//! ```text
//! cargo run --release -p bench --example unique_writes -- MGMD_ADDR [ROWS] [THREADS]
//! ```
//!
//! Two tables of ROWS rows (default 100,000), `plain` and `unique` (k
//! BIGINT UNSIGNED key, u BIGINT, n BIGINT), the second with a unique
//! index on u. THREADS client threads (default 8), each running
//! one-operation transactions, time for each table:
//! - inserts of every row (the unique table also inserts its hidden row);
//! - updates of n (no indexed column: sent as they are);
//! - updates of u to a fresh value (a before-image read, then the write,
//!   the hidden delete and insert);
//! - reads by primary key, and on the unique table reads by u (one
//!   operation the tc runs as two reads), each a committed transaction.
//!
//! Operations a second for each. It drops both tables at the end.
//! Figures only: nothing is asserted.

use client::{Cluster, Commit, IndexDef, LockMode, Table, UniqueTable, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let mgmd = args.next().unwrap_or_else(|| {
        eprintln!("usage: unique_writes MGMD_ADDR [ROWS] [THREADS]");
        std::process::exit(2)
    });
    let rows: u64 = args
        .next()
        .map_or(100_000, |rows| rows.parse().expect("ROWS"));
    let threads: u64 = args
        .next()
        .map_or(8, |threads| threads.parse().expect("THREADS"));
    let cluster = Arc::new(Cluster::connect(&mgmd).expect("connect"));
    println!("{rows} rows, {threads} client threads, one operation a transaction");
    println!("{:<34} {:>12} {:>12}", "", "plain", "unique");
    let plain = create(&cluster, "plain", false);
    let unique = create(&cluster, "unique", true);
    let tables = [&plain, &unique];
    let line = |what: &str, per_table: &dyn Fn(&Arc<Table>) -> Option<f64>| {
        let figures: Vec<String> = tables
            .iter()
            .map(|table| per_table(table).map_or("-".into(), |rate| format!("{rate:.0}")))
            .collect();
        println!("{what:<34} {:>12} {:>12}", figures[0], figures[1]);
    };
    let run = |table: &Arc<Table>, operation: &(dyn Fn(&Cluster, &Arc<Table>, u64) + Sync)| {
        Some(rate(&cluster, table, rows, threads, operation))
    };
    line("insert /s", &|table| {
        run(table, &|cluster, table, k| {
            let values = [
                ("k", Value::UInt(k)),
                ("u", Value::Int(k as i64)),
                ("n", Value::Int(0)),
            ];
            one(cluster, |transaction| {
                transaction.insert(table, &values).map(|_| ())
            });
        })
    });
    line("update of a column of no index /s", &|table| {
        run(table, &|cluster, table, k| {
            let set = [("n", Value::Int(1))];
            one(cluster, |transaction| {
                transaction
                    .update(table, &[Value::UInt(k)], &set)
                    .map(|_| ())
            });
        })
    });
    line("update of the indexed column /s", &|table| {
        run(table, &|cluster, table, k| {
            let set = [("u", Value::Int((k + rows) as i64))];
            one(cluster, |transaction| {
                transaction
                    .update(table, &[Value::UInt(k)], &set)
                    .map(|_| ())
            });
        })
    });
    line("read by primary key /s", &|table| {
        run(table, &|cluster, table, k| {
            one(cluster, |transaction| {
                transaction
                    .read(table, &[Value::UInt(k)], LockMode::CommittedRead)
                    .map(|_| ())
            });
        })
    });
    line("read by the unique index /s", &|table| {
        table.unique_index_table("by_u").ok()?;
        run(table, &|cluster, table, k| {
            let mut transaction = cluster.transaction();
            let u = [Value::Int((k + rows) as i64)];
            let op = transaction
                .read_unique(table, "by_u", &u, LockMode::CommittedRead)
                .expect("a lookup");
            transaction.execute(Commit::Yes).expect("the lookup");
            assert!(transaction.get(op).is_some(), "row {k} found by its value");
        })
    });
    for name in ["plain", "unique"] {
        cluster.drop_table(name).expect("drop");
    }
}

fn create(cluster: &Cluster, name: &str, unique: bool) -> Arc<Table> {
    let _ = cluster.drop_table(name);
    let column = |name: &str| {
        client::ColumnDef::new(name, client::ColumnType::BigInt { unsigned: false }, false)
    };
    let mut key = column("k");
    key.column_type = client::ColumnType::BigInt { unsigned: true };
    let indexes = if unique {
        vec![IndexDef {
            id: 1,
            name: "by_u".into(),
            columns: vec![1],
            unique: Some(UniqueTable::REQUESTED),
        }]
    } else {
        Vec::new()
    };
    let definition = client::TableDef {
        id: 0,
        version: 0,
        name: name.into(),
        columns: vec![key, column("u"), column("n")],
        primary_key: vec![0],
        partitions: 0,
        indexes,
        revision: 0,
        partition_key: Vec::new(),
    };
    cluster.create_table(&definition).expect("create the table");
    cluster.table(name).expect("the table")
}

/// One transaction of what `queue` queues, committed; temporary errors
/// retried.
fn one(
    cluster: &Cluster,
    queue: impl Fn(&mut client::Transaction<'_>) -> Result<(), client::ClientError>,
) {
    loop {
        let mut transaction = cluster.transaction();
        queue(&mut transaction).expect("queued");
        match transaction.execute(Commit::Yes) {
            Ok(_) => return,
            Err(error) if error.is_temporary() => continue,
            Err(error) => panic!("{error}"),
        }
    }
}

/// Runs `operation` for keys 0..rows over `threads` threads: operations
/// a second.
fn rate(
    cluster: &Arc<Cluster>,
    table: &Arc<Table>,
    rows: u64,
    threads: u64,
    operation: &(dyn Fn(&Cluster, &Arc<Table>, u64) + Sync),
) -> f64 {
    let next = AtomicU64::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= rows {
                    return;
                }
                operation(cluster, table, k);
            });
        }
    });
    rows as f64 / started.elapsed().as_secs_f64()
}
