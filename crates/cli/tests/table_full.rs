//! DataMemory exhaustion on a real data node: with a small `data_memory`
//! (16M over two ldm threads: 8 MiB each), inserting wide rows ends in
//! TableFull, a temporary error whose message says the table is full;
//! the node stays up, every row already stored reads back intact, rows can
//! still be updated in place and deleted, and the space deleted rows free
//! is used again by new inserts.

mod common;

use client::{
    ClientError, Cluster, ColumnType, Commit, ErrorClass, ErrorCode, LockMode, Table, TableDef,
    Value,
};
use common::{column, create_table, key, keyed_definition, read_row, ClusterOptions, TestCluster};
use std::sync::Arc;

const WIDTH: usize = 8000;

/// Far more rows than 16 MiB can hold; reaching it means TableFull never came.
const INSERT_LIMIT: u32 = 20_000;

fn table_definition() -> TableDef {
    keyed_definition(
        "wide",
        vec![column(
            "payload",
            ColumnType::VarBinary(WIDTH as u16),
            false,
        )],
    )
}

/// The payload of key `k` in version `version`: every byte depends on both,
/// so a mixed-up or torn row cannot pass for another.
fn payload(k: u32, version: u32) -> Vec<u8> {
    (0..WIDTH as u32)
        .map(|i| (i.wrapping_mul(31) ^ k.wrapping_mul(131) ^ version.wrapping_mul(7)) as u8)
        .collect()
}

fn insert(cluster: &Cluster, table: &Arc<Table>, k: u32) -> Result<(), ClientError> {
    let mut transaction = cluster.transaction();
    transaction.insert(
        table,
        &[
            ("k", Value::UInt(k.into())),
            ("payload", Value::from(payload(k, 0))),
        ],
    )?;
    transaction.execute(Commit::Yes).map(|_| ())
}

/// Reads `keys` in batches and checks each row's payload.
fn verify(cluster: &Cluster, table: &Arc<Table>, keys: &[(u32, u32)]) {
    for chunk in keys.chunks(16) {
        let mut transaction = cluster.transaction();
        let ops: Vec<_> = chunk
            .iter()
            .map(|&(k, _)| {
                transaction
                    .read(table, &key(k), LockMode::CommittedRead)
                    .expect("valid read")
            })
            .collect();
        transaction
            .execute(Commit::Yes)
            .unwrap_or_else(|error| panic!("reading a full table: {error}"));
        for (op, &(k, version)) in ops.into_iter().zip(chunk) {
            let got = transaction
                .get(op)
                .and_then(|row| row.get("payload"))
                .and_then(Value::as_bytes)
                .unwrap_or_else(|| panic!("row {k} has no payload"));
            assert!(
                got == payload(k, version).as_slice(),
                "row {k} (version {version}) read back wrong"
            );
        }
    }
}

#[test]
fn full_data_memory_is_a_temporary_error_and_the_node_recovers() {
    let mut processes = TestCluster::start(ClusterOptions {
        name: "table-full",
        data_memory: "16M",
        ..Default::default()
    });
    let cluster = processes.connect();
    let table = create_table(&cluster, &table_definition());

    let mut stored: Vec<(u32, u32)> = Vec::new();
    let (full_key, error) = loop {
        let k = stored.len() as u32;
        assert!(
            k < INSERT_LIMIT,
            "{k} rows of {WIDTH} bytes fit in 16M: no TableFull"
        );
        match insert(&cluster, &table, k) {
            Ok(()) => stored.push((k, 0)),
            Err(error) => break (k, error),
        }
    };
    assert_eq!(
        error.code(),
        Some(ErrorCode::TableFull),
        "after {} rows: {error}",
        stored.len()
    );
    assert_eq!(error.class(), Some(ErrorClass::Temporary));
    assert!(error.is_temporary());
    let message = error.to_string();
    assert!(message.contains("table is full"), "{message}");
    assert!(
        stored.len() > 100,
        "only {} rows of {WIDTH} bytes fit in 16M",
        stored.len()
    );
    processes.assert_node_serving();

    // The refused row is not there; the stored ones are intact.
    assert_eq!(
        read_row(&cluster, &table, &key(full_key))
            .err()
            .and_then(|e| e.code()),
        Some(ErrorCode::NoSuchRow)
    );
    verify(&cluster, &table, &stored);

    // Same-size updates need no new memory and succeed while full.
    for entry in stored.iter_mut().step_by(7) {
        let (k, _) = *entry;
        let mut transaction = cluster.transaction();
        transaction
            .update(&table, &key(k), &[("payload", Value::from(payload(k, 1)))])
            .expect("valid update");
        transaction
            .execute(Commit::Yes)
            .unwrap_or_else(|error| panic!("same-size update of {k} while full: {error}"));
        entry.1 = 1;
    }
    verify(&cluster, &table, &stored);

    // An update that needs a variable part of another size may or may not
    // find room; refused, it is TableFull and leaves the row as it was.
    let (k, version) = stored[1];
    let mut transaction = cluster.transaction();
    transaction
        .update(&table, &key(k), &[("payload", Value::from(vec![1u8; 100]))])
        .expect("valid update");
    match transaction.execute(Commit::Yes) {
        Ok(_) => {
            let mut transaction = cluster.transaction();
            transaction
                .update(
                    &table,
                    &key(k),
                    &[("payload", Value::from(payload(k, version)))],
                )
                .expect("valid update");
            match transaction.execute(Commit::Yes) {
                // Shrinking freed no room for the wide value again: drop
                // the row from what is checked later.
                Err(error) if error.code() == Some(ErrorCode::TableFull) => {
                    stored.remove(1);
                    let mut transaction = cluster.transaction();
                    transaction.delete(&table, &key(k)).expect("valid delete");
                    transaction.execute(Commit::Yes).expect("delete");
                }
                other => {
                    other.unwrap_or_else(|error| panic!("growing row {k} back: {error}"));
                }
            }
        }
        Err(error) => assert_eq!(error.code(), Some(ErrorCode::TableFull), "{error}"),
    }
    verify(&cluster, &table, &stored);

    // Delete every fourth row, in batches.
    let (deleted, kept): (Vec<_>, Vec<_>) = stored
        .iter()
        .enumerate()
        .partition(|(index, _)| index % 4 == 0);
    let deleted: Vec<(u32, u32)> = deleted.into_iter().map(|(_, &entry)| entry).collect();
    let kept: Vec<(u32, u32)> = kept.into_iter().map(|(_, &entry)| entry).collect();
    for chunk in deleted.chunks(16) {
        let mut transaction = cluster.transaction();
        for &(k, _) in chunk {
            transaction.delete(&table, &key(k)).expect("valid delete");
        }
        transaction
            .execute(Commit::Yes)
            .unwrap_or_else(|error| panic!("delete while full: {error}"));
    }
    for &(k, _) in deleted.iter().take(20) {
        assert_eq!(
            read_row(&cluster, &table, &key(k))
                .err()
                .and_then(|e| e.code()),
            Some(ErrorCode::NoSuchRow),
            "row {k} was deleted"
        );
    }
    verify(&cluster, &table, &kept);

    // The freed space takes new rows: the refused key, then more. A quarter
    // of each ldm's rows was freed; a tenth of all rows as new keys spread
    // over both ldms fits with a wide margin.
    insert(&cluster, &table, full_key)
        .unwrap_or_else(|error| panic!("the refused key after deletes: {error}"));
    let mut fresh = vec![(full_key, 0)];
    let first_new = full_key + 1;
    for k in first_new..first_new + (stored.len() as u32 / 10) {
        insert(&cluster, &table, k)
            .unwrap_or_else(|error| panic!("new key {k} after deletes: {error}"));
        fresh.push((k, 0));
    }
    verify(&cluster, &table, &fresh);
    verify(&cluster, &table, &kept);
    processes.assert_node_serving();
}
