//! Locking scans (docs/design/0025-locking-scans.md) through the real
//! client on 2 nodes with 2 replicas (`sim::harness`).
//!
//! - A row a locking scan returned is locked until its transaction ends:
//!   another client's update of it waits for the commit and lands after
//!   it.
//! - Clients whose filters overlap each scan with exclusive locks and add
//!   1 to every row they got, in one transaction, many times over: no
//!   increment is lost (the sum of the rows is the increments that
//!   committed), which a committed-read scan followed by updates would
//!   not guarantee. A row deleted between the scan and its lock is left
//!   out, not an error.
//! - NOWAIT and SKIP LOCKED: while one transaction holds rows locked, a
//!   locking scan that skips locked rows returns the others and its
//!   transaction goes on to commit; a read that may not wait fails its
//!   transaction with LockNotAvailable while the lock is still held, and
//!   the holder's lock and commit are untouched by either.

use client::{Access, Commit, CompareOp, Filter, KeyRange, LockMode, LockWait, ScanOptions, Value};
use sim::harness::Harness;
use std::ops::Bound;
use std::time::Duration;

const ROWS: u64 = 60;
const GROUPS: u64 = 3;

fn definition() -> client::TableDef {
    sim::harness::table_definition(
        "counters",
        &[
            ("k", client::ColumnType::BigInt { unsigned: true }, false),
            ("n", client::ColumnType::BigInt { unsigned: false }, false),
            ("g", client::ColumnType::Int { unsigned: true }, false),
        ],
    )
}

fn load(cluster: &client::Cluster) -> std::sync::Arc<client::Table> {
    cluster.create_table(&definition()).expect("create");
    let table = cluster.table("counters").unwrap();
    for k in 0..ROWS {
        let mut transaction = cluster.transaction();
        transaction
            .insert(
                &table,
                &[
                    ("k", Value::UInt(k)),
                    ("n", Value::Int(0)),
                    ("g", Value::UInt(k % GROUPS)),
                ],
            )
            .unwrap();
        transaction.execute(Commit::Yes).expect("load");
    }
    table
}

fn wait_for(cluster: &client::Cluster, context: &sim::hosted::HostedContext, name: &str) {
    for _ in 0..30_000 {
        cluster.invalidate_table(name);
        if cluster.table(name).is_ok() {
            return;
        }
        context.sleep(Duration::from_millis(5));
    }
    panic!("table {name} never appeared");
}

#[test]
fn a_row_a_locking_scan_returned_stays_locked_until_its_commit() {
    let results = Harness::new(21)
        .nodes(2, 2)
        .run_clients(2, |index, cluster, context| {
            if index == 0 {
                let table = load(cluster);
                let mut transaction = cluster.transaction();
                let range = [KeyRange {
                    low: Bound::Included(vec![Value::UInt(10)]),
                    high: Bound::Excluded(vec![Value::UInt(20)]),
                }];
                let options = ScanOptions {
                    ordered: true,
                    ..ScanOptions::default()
                };
                let rows = transaction
                    .scan_locked(
                        &table,
                        Access::PrimaryKey(&range),
                        &options,
                        LockMode::Exclusive,
                    )
                    .expect("a locking scan")
                    .rows;
                let keys: Vec<u64> = rows.iter().map(|row| row.get_u64("k").unwrap()).collect();
                assert_eq!(keys, (10..20).collect::<Vec<_>>(), "the range, in order");
                // The other client now tries to update row 15; it must wait.
                let marker = client::TableDef {
                    name: "scanned".into(),
                    ..definition()
                };
                cluster.create_table(&marker).unwrap();
                context.sleep(Duration::from_millis(300));
                for row in &rows {
                    let k = row.get_u64("k").unwrap();
                    transaction
                        .update(&table, &[Value::UInt(k)], &[("n", Value::Int(100))])
                        .unwrap();
                }
                transaction
                    .execute(Commit::Yes)
                    .expect("the scanner commits");
                return context.now_us();
            }
            wait_for(cluster, context, "scanned");
            let table = cluster.table("counters").unwrap();
            let mut transaction = cluster.transaction();
            transaction
                .update(&table, &[Value::UInt(15)], &[("n", Value::Int(7))])
                .unwrap();
            transaction
                .execute(Commit::Yes)
                .expect("the writer commits once the lock is gone");
            let done = context.now_us();
            let mut reader = cluster.transaction();
            let read = reader
                .read(&table, &[Value::UInt(15)], LockMode::CommittedRead)
                .unwrap();
            reader.execute(Commit::Yes).unwrap();
            let n = reader.get(read).unwrap().get("n").and_then(Value::as_i64);
            assert_eq!(n, Some(7), "the writer's update came after the scanner's");
            done
        });
    let (scanner_committed, writer_done) = (results[0], results[1]);
    assert!(
        writer_done >= scanner_committed,
        "the writer finished at {writer_done} us, before the scanner's commit at \
         {scanner_committed} us"
    );
}

#[test]
fn overlapping_locking_scans_lose_no_update() {
    const CLIENTS: u16 = 3;
    const ROUNDS: u32 = 25;
    const DELETED: [u64; 3] = [3, 31, 47];
    let results =
        Harness::new(22)
            .nodes(2, 2)
            .run_clients(CLIENTS + 1, |index, cluster, context| {
                if index == CLIENTS {
                    // Loads, deletes a few rows while the others scan, then
                    // reads every counter once they are done.
                    load(cluster);
                    let marker = |name: &str| client::TableDef {
                        name: name.into(),
                        ..definition()
                    };
                    cluster.create_table(&marker("loaded")).unwrap();
                    let table = cluster.table("counters").unwrap();
                    context.sleep(Duration::from_millis(50));
                    for k in DELETED {
                        loop {
                            let mut transaction = cluster.transaction();
                            transaction.delete(&table, &[Value::UInt(k)]).unwrap();
                            match transaction.execute(Commit::Yes) {
                                Ok(_) => break,
                                Err(error) if error.is_temporary() => {}
                                Err(error) => panic!("delete {k}: {error:?}"),
                            }
                        }
                        context.sleep(Duration::from_millis(30));
                    }
                    for other in 0..CLIENTS {
                        wait_for(cluster, context, &format!("done{other}"));
                    }
                    let rows = cluster
                        .scan(&table, Access::Table, &ScanOptions::default())
                        .expect("the final read")
                        .rows;
                    let mut counters = vec![0u64; ROWS as usize];
                    for row in rows {
                        let k = row.get_u64("k").unwrap();
                        counters[k as usize] = row.get("n").and_then(Value::as_i64).unwrap() as u64;
                    }
                    return (counters, 0);
                }
                wait_for(cluster, context, "loaded");
                let table = cluster.table("counters").unwrap();
                // Client i takes the groups other than i: every pair overlaps.
                let filter = Filter::Not(Box::new(Filter::compare(
                    "g",
                    CompareOp::Equal,
                    Value::UInt(u64::from(index)),
                )));
                let options = ScanOptions {
                    filter: Some(filter),
                    batch_rows: 5,
                    ..ScanOptions::default()
                };
                let mut increments = vec![0u64; ROWS as usize];
                let (mut rounds, mut retries) = (0, 0u64);
                while rounds < ROUNDS {
                    let mut transaction = cluster.transaction();
                    let result = transaction
                        .scan_locked(&table, Access::Table, &options, LockMode::Exclusive)
                        .and_then(|result| {
                            let mut keys = Vec::new();
                            for row in &result.rows {
                                assert_ne!(
                                    row.get_u64("g"),
                                    Some(u64::from(index)),
                                    "a locked row meets the filter"
                                );
                                let k = row.get_u64("k").unwrap();
                                let n = row.get("n").and_then(Value::as_i64).unwrap();
                                let set = [("n", Value::Int(n + 1))];
                                transaction.update(&table, &[Value::UInt(k)], &set)?;
                                keys.push(k);
                            }
                            transaction.execute(Commit::Yes)?;
                            Ok(keys)
                        });
                    match result {
                        Ok(keys) => {
                            for k in keys {
                                increments[k as usize] += 1;
                            }
                            rounds += 1;
                        }
                        Err(error) if error.is_temporary() => retries += 1,
                        Err(error) => panic!("client {index}: {error:?}"),
                    }
                }
                let marker = client::TableDef {
                    name: format!("done{index}"),
                    ..definition()
                };
                cluster.create_table(&marker).unwrap();
                (increments, retries)
            });
    let (counters, _) = &results[CLIENTS as usize];
    let mut conflicts = 0;
    for k in 0..ROWS as usize {
        let committed: u64 = results[..CLIENTS as usize]
            .iter()
            .map(|(increments, _)| increments[k])
            .sum();
        if DELETED.contains(&(k as u64)) {
            assert_eq!(counters[k], 0, "row {k} was deleted");
            continue;
        }
        assert_eq!(
            counters[k], committed,
            "row {k}: every committed increment is there, none lost"
        );
        assert_eq!(
            committed,
            u64::from(ROUNDS) * 2,
            "row {k}: two clients take its group"
        );
    }
    conflicts += results[..CLIENTS as usize]
        .iter()
        .map(|(_, retries)| retries)
        .sum::<u64>();
    // Not asserted (timing): how often a lock wait ended a round.
    eprintln!("rounds retried after a lock conflict: {conflicts}");
}

/// Through an index, with a limit: rows come in the index's order, a
/// limit locks no more rows than it returns (another client updates the
/// next row without waiting), and a limit of 0 returns nothing.
#[test]
fn a_limited_locking_scan_through_an_index_locks_only_what_it_returns() {
    let results = Harness::new(24)
        .nodes(2, 2)
        .run_clients(2, |index, cluster, context| {
            if index == 0 {
                load(cluster);
                cluster
                    .create_index("counters", "by_g_k", &["g", "k"])
                    .unwrap();
                let table = cluster.table("counters").unwrap();
                let mut transaction = cluster.transaction();
                let range = [KeyRange {
                    low: Bound::Included(vec![Value::UInt(1)]),
                    high: Bound::Included(vec![Value::UInt(1)]),
                }];
                let options = |limit| ScanOptions {
                    ordered: true,
                    limit: Some(limit),
                    ..ScanOptions::default()
                };
                let access = Access::Index("by_g_k", &range);
                let none = transaction
                    .scan_locked(&table, access, &options(0), LockMode::Exclusive)
                    .unwrap();
                assert!(none.rows.is_empty(), "a limit of 0");
                let result = transaction
                    .scan_locked(&table, access, &options(2), LockMode::Exclusive)
                    .unwrap();
                let keys: Vec<u64> = result
                    .rows
                    .iter()
                    .map(|row| row.get_u64("k").unwrap())
                    .collect();
                assert_eq!(keys, [1, 4], "group 1 in key order, two of them");
                // Each partition sent a batch of at most the limit, not
                // the group's 20 rows.
                assert!(
                    result.matched <= 2 * u64::from(result.partitions_scanned),
                    "a limit of 2 received {} rows from {} partitions",
                    result.matched,
                    result.partitions_scanned
                );
                let marker = client::TableDef {
                    name: "locked".into(),
                    ..definition()
                };
                cluster.create_table(&marker).unwrap();
                context.sleep(Duration::from_millis(500));
                transaction.execute(Commit::Yes).unwrap();
                return context.now_us();
            }
            wait_for(cluster, context, "locked");
            let table = cluster.table("counters").unwrap();
            // Row 7, the next of group 1, is not locked.
            let mut transaction = cluster.transaction();
            transaction
                .update(&table, &[Value::UInt(7)], &[("n", Value::Int(1))])
                .unwrap();
            transaction
                .execute(Commit::Yes)
                .expect("row 7 was not locked");
            context.now_us()
        });
    assert!(
        results[1] < results[0],
        "the update of an unreturned row ({} us) did not wait for the scanner's commit ({} us)",
        results[1],
        results[0]
    );
}

#[test]
fn skip_locked_leaves_held_rows_out_and_nowait_fails_while_they_are_held() {
    Harness::new(23)
        .nodes(2, 2)
        .run_clients(2, |index, cluster, context| {
            let marker = |name: &str| client::TableDef {
                name: name.into(),
                ..definition()
            };
            let range = |low: u64, high: u64| {
                [KeyRange {
                    low: Bound::Included(vec![Value::UInt(low)]),
                    high: Bound::Excluded(vec![Value::UInt(high)]),
                }]
            };
            let options = ScanOptions {
                ordered: true,
                ..ScanOptions::default()
            };
            if index == 0 {
                // The holder: rows 10..20 locked until the other client
                // has tried them.
                let table = load(cluster);
                let mut holder = cluster.transaction();
                let held = holder
                    .scan_locked(
                        &table,
                        Access::PrimaryKey(&range(10, 20)),
                        &options,
                        LockMode::Exclusive,
                    )
                    .expect("the holder's scan")
                    .rows;
                assert_eq!(held.len(), 10);
                cluster.create_table(&marker("held")).unwrap();
                wait_for(cluster, context, "tried");
                for k in 10..20 {
                    holder
                        .update(&table, &[Value::UInt(k)], &[("n", Value::Int(1))])
                        .unwrap();
                }
                holder
                    .execute(Commit::Yes)
                    .expect("the holder commits, its locks untouched by the others' attempts");
                cluster.create_table(&marker("released")).unwrap();
                return;
            }
            wait_for(cluster, context, "held");
            let table = cluster.table("counters").unwrap();
            // SKIP LOCKED: every row of 0..30 but the held ones, and the
            // transaction goes on to write and commit.
            let mut skipper = cluster.transaction();
            let rows = skipper
                .scan_locked_waiting(
                    &table,
                    Access::PrimaryKey(&range(0, 30)),
                    &options,
                    LockMode::Exclusive,
                    LockWait::SkipLocked,
                )
                .expect("a scan skipping locked rows")
                .rows;
            let keys: Vec<u64> = rows.iter().map(|row| row.get_u64("k").unwrap()).collect();
            let expected: Vec<u64> = (0..10).chain(20..30).collect();
            assert_eq!(keys, expected, "the rows no other transaction holds");
            let single = skipper
                .read_locking(
                    &table,
                    &[Value::UInt(15)],
                    LockMode::Shared,
                    LockWait::SkipLocked,
                )
                .unwrap();
            skipper
                .update(&table, &[Value::UInt(0)], &[("n", Value::Int(5))])
                .unwrap();
            skipper
                .execute(Commit::Yes)
                .expect("the skipping transaction commits");
            assert!(
                skipper.get(single).is_none(),
                "a held row read with SKIP LOCKED is no row"
            );
            // NOWAIT: the held row fails the transaction at once.
            let mut impatient = cluster.transaction();
            impatient
                .read_locking(
                    &table,
                    &[Value::UInt(15)],
                    LockMode::Exclusive,
                    LockWait::NoWait,
                )
                .unwrap();
            let error = impatient
                .execute(Commit::No)
                .expect_err("a NOWAIT read of a held row");
            assert_eq!(
                error.code(),
                Some(client::ErrorCode::LockNotAvailable),
                "{error:?}"
            );
            // A row nobody holds is read with NOWAIT as any other.
            let mut free = cluster.transaction();
            let read = free
                .read_locking(
                    &table,
                    &[Value::UInt(25)],
                    LockMode::Exclusive,
                    LockWait::NoWait,
                )
                .unwrap();
            free.execute(Commit::Yes)
                .expect("a NOWAIT read of a free row");
            assert!(free.get(read).is_some());
            cluster.create_table(&marker("tried")).unwrap();
            // Once the holder has committed, the rows are free again.
            wait_for(cluster, context, "released");
            let mut after = cluster.transaction();
            let read = after
                .read_locking(
                    &table,
                    &[Value::UInt(15)],
                    LockMode::Exclusive,
                    LockWait::NoWait,
                )
                .unwrap();
            after.execute(Commit::Yes).expect("the released row");
            assert_eq!(
                after
                    .get(read)
                    .and_then(|row| row.get("n"))
                    .and_then(Value::as_i64),
                Some(1)
            );
        });
}
