//! Overload by one client never stalls the rest of a data node
//! (ARCHITECTURE.md, "Trust model"): a client that holds a row lock and
//! sends a few dozen large operations on that row fills the section pool
//! with operations waiting for the lock. The receive thread then refuses
//! that client's further requests with a temporary error
//! (`OutOfSignalMemory`) instead of waiting for sections, and keeps the
//! pool's reserve for data-node links and redo and checkpoint writes, so
//! the node goes on serving its other connections.

mod common;

use client::{ClientError, Commit, ErrorCode, LockMode, Value};
use common::{column, create_table, keyed_definition, ClusterOptions, TestCluster};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Operations sent at the locked row: more than the 32 buffers of 32 KiB
/// that `max_concurrent_operations = 256` gives the section pool.
const FLOOD: usize = 40;

/// Bytes of each of the two value columns: an update of both is an attr
/// section of about 20 KB, which takes a 32 KiB buffer.
const VALUE_BYTES: usize = 10_000;

/// Longest the test waits for something that must happen, on a slow
/// shared machine (a failure, never a measurement).
const DEADLINE: Duration = Duration::from_secs(120);

#[test]
fn a_client_that_exhausts_the_section_pool_is_refused_and_the_node_serves_on() {
    let processes = TestCluster::start(ClusterOptions {
        name: "overload",
        // Waiting operations keep their sections for the whole test.
        lock_wait_timeout_ms: 600_000,
        extra_cluster_lines: "max_concurrent_operations = 256\n",
        ..ClusterOptions::default()
    });
    let flooder = processes.connect();
    let definition = keyed_definition(
        "big",
        ["v", "w"]
            .into_iter()
            .map(|name| column(name, client::ColumnType::VarChar(VALUE_BYTES as u16), false))
            .collect(),
    );
    let table = create_table(&flooder, &definition);
    for k in [1u32, 2] {
        let mut insert = flooder.transaction();
        insert
            .insert(
                &table,
                &[
                    ("k", Value::UInt(k.into())),
                    ("v", Value::from("x")),
                    ("w", Value::from("x")),
                ],
            )
            .expect("valid insert");
        insert.execute(Commit::Yes).expect("insert");
    }
    // The lock holder: row 1 stays locked until the end.
    let mut holder = flooder.transaction();
    holder
        .update(&table, &[Value::UInt(1)], &[("v", Value::from("held"))])
        .expect("valid update");
    holder.execute(Commit::No).expect("row 1 locked");

    let big = "b".repeat(VALUE_BYTES);
    let refused = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let mut flood = Vec::new();
        for _ in 0..FLOOD {
            flood.push(scope.spawn(|| {
                let mut transaction = flooder.transaction();
                transaction
                    .update(
                        &table,
                        &[Value::UInt(1)],
                        &[("v", Value::from(big.as_str())), ("w", Value::from(big.as_str()))],
                    )
                    .expect("valid update");
                let result = transaction.execute(Commit::Yes);
                if matches!(&result, Err(error) if error.code() == Some(ErrorCode::OutOfSignalMemory))
                {
                    refused.fetch_add(1, Ordering::SeqCst);
                }
                finished.fetch_add(1, Ordering::SeqCst);
                result
            }));
        }
        // The operations beyond what the pool holds without its reserve
        // are refused at once; the others wait for row 1.
        let started = Instant::now();
        while refused.load(Ordering::SeqCst) == 0 {
            assert!(
                started.elapsed() < DEADLINE,
                "no operation was refused: the receive thread waits for sections \
                 ({} of {FLOOD} finished)",
                finished.load(Ordering::SeqCst)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // Another client, on its own connection, is served meanwhile.
        let other = processes.connect();
        let mut read = other.transaction();
        let row = read
            .read(&table, &[Value::UInt(2)], LockMode::CommittedRead)
            .expect("valid read");
        read.execute(Commit::Yes)
            .expect("another client is served while the pool is full");
        assert_eq!(
            read.get(row).and_then(|row| row.get("v")),
            Some(&Value::from("x"))
        );
        let mut write = other.transaction();
        write
            .update(&table, &[Value::UInt(2)], &[("v", Value::from("y"))])
            .expect("valid update");
        write
            .execute(Commit::Yes)
            .expect("another client writes while the pool is full");
        // The lock holder commits: every waiting operation goes through.
        holder.execute(Commit::Yes).expect("the holder commits");
        for handle in flood {
            match handle.join().expect("flood thread") {
                Ok(_) => {}
                Err(error) if error.code() == Some(ErrorCode::OutOfSignalMemory) => {
                    assert!(error.is_temporary(), "{error}");
                    assert!(
                        matches!(error, ClientError::Operation { .. }),
                        "refused as an operation: {error:?}"
                    );
                }
                Err(error) => panic!("a flood operation failed otherwise: {error}"),
            }
        }
    });
    let refused = refused.load(Ordering::SeqCst);
    assert!(
        (1..FLOOD).contains(&refused),
        "{refused} of {FLOOD} refused: some, not all"
    );
    // Nothing is left held: the row takes a new write at once.
    let mut after = flooder.transaction();
    after
        .update(&table, &[Value::UInt(1)], &[("v", Value::from("after"))])
        .expect("valid update");
    after.execute(Commit::Yes).expect("row 1 is free again");
}
