//! The register workload: `KEYS` registers (table `register`: k, v);
//! reads under a shared lock, writes, and compare-and-sets (an
//! exclusive read and, if the value is the expected one, an update, in
//! one transaction). Checked by `check::register` (linearizability).

use super::Client;
use crate::history::OpType;
use client::{
    ClientError, ColumnDef, ColumnType, Commit, ErrorCode, LockMode, Table, TableDef, Transaction,
    Value,
};
use serde_json::Value as Json;
use std::sync::Arc;

/// Registers.
pub const KEYS: u64 = 8;

pub fn table() -> TableDef {
    TableDef {
        indexes: Vec::new(),
        revision: 0,
        id: 0,
        version: 0,
        name: "register".into(),
        columns: vec![
            ColumnDef::new("k", ColumnType::Int { unsigned: true }, false),
            ColumnDef::new("v", ColumnType::BigInt { unsigned: false }, false),
        ],
        primary_key: vec![0],
        partitions: 0,
        partition_key: Vec::new(),
    }
}

/// The value of register `key` under `lock`, `null` for no row.
pub fn read_value(
    transaction: &mut Transaction<'_>,
    table: &Arc<Table>,
    key: u64,
    lock: LockMode,
    commit: Commit,
) -> Result<Json, ClientError> {
    let op = transaction.read(table, &[Value::UInt(key)], lock)?;
    match transaction.execute(commit) {
        Ok(_) => Ok(transaction
            .get(op)
            .and_then(|row| row.get("v")?.as_i64())
            .map_or(Json::Null, Json::from)),
        Err(error) if error.code() == Some(ErrorCode::NoSuchRow) => Ok(Json::Null),
        Err(error) => Err(error),
    }
}

/// One read, write or compare-and-set of a random register.
pub(super) fn step(client: &mut Client<'_>) {
    let Some(table) = client.table("register") else {
        return;
    };
    let key = client.random.below(KEYS);
    let cluster = client.cluster;
    match client.random.below(3) {
        0 => {
            client.invoke("read", Some(key), Json::Null);
            let mut transaction = cluster.transaction();
            match read_value(&mut transaction, &table, key, LockMode::Shared, Commit::Yes) {
                Ok(value) => client.complete(OpType::Ok, "read", value, None, None),
                // A read changes nothing: whatever happened, it did not.
                Err(error) => client.complete(OpType::Fail, "read", Json::Null, Some(&error), None),
            }
        }
        1 => {
            let value = client.random.below(5) as i64;
            client.invoke("write", Some(key), Json::from(value));
            let mut transaction = cluster.transaction();
            let result = transaction
                .write(&table, &[("k", Value::UInt(key)), ("v", Value::Int(value))])
                .and_then(|_| transaction.execute(Commit::Yes));
            client.committed("write", Json::from(value), result, false);
        }
        _ => {
            // Never null: a missing row is a value other than expected.
            let (expected, new) = (client.random.below(5) as i64, client.random.below(5) as i64);
            let arguments = Json::from(vec![expected, new]);
            client.invoke("cas", Some(key), arguments.clone());
            let mut transaction = cluster.transaction();
            match read_value(
                &mut transaction,
                &table,
                key,
                LockMode::Exclusive,
                Commit::No,
            ) {
                Ok(current) if current == expected => {
                    let result = transaction
                        .update(&table, &[Value::UInt(key)], &[("v", Value::Int(new))])
                        .and_then(|_| transaction.execute(Commit::Yes));
                    client.committed("cas", arguments, result, false);
                }
                Ok(_) => {
                    let _ = transaction.rollback();
                    client.complete(OpType::Fail, "cas", arguments, None, None);
                }
                // Its read failed: nothing written.
                Err(error) => client.complete(OpType::Fail, "cas", arguments, Some(&error), None),
            }
        }
    }
}

/// Every register's value, read in one transaction (after a
/// whole-cluster restart, with the clients held).
pub fn read_all(cluster: &client::Cluster) -> Result<Vec<Json>, ClientError> {
    let table = cluster.table("register")?;
    let mut values = Vec::new();
    for key in 0..KEYS {
        let mut transaction = cluster.transaction();
        values.push(read_value(
            &mut transaction,
            &table,
            key,
            LockMode::Shared,
            Commit::Yes,
        )?);
    }
    Ok(values)
}
