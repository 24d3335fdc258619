//! The `kv` table (`kv_definition`) of the CRUD, transaction and routing
//! parts: its rows as (v, n) and the operations the parts queue on them.

use crate::common::{key, read_row};
use client::{
    ClientError, Cluster, Commit, ErrorCode, LockMode, OpId, Row, Table, Transaction, Value,
};
use std::sync::Arc;

/// (v, n) of a `kv` row.
pub fn kv_values(v: &str, n: Option<i64>) -> (Value, Value) {
    (Value::from(v), n.map_or(Value::Null, Value::Int))
}

fn values_of(row: &Row) -> (Value, Value) {
    (
        row.get("v").cloned().expect("v"),
        row.get("n").cloned().expect("n"),
    )
}

/// (v, n) of row `k`, by a committed read.
pub fn kv_row(cluster: &Cluster, kv: &Arc<Table>, k: u32) -> Result<(Value, Value), ClientError> {
    Ok(values_of(&read_row(cluster, kv, &key(k))?))
}

/// A committed read of row `k` gives (v, n).
pub fn assert_kv_row(
    cluster: &Cluster,
    kv: &Arc<Table>,
    k: u32,
    v: &str,
    n: Option<i64>,
    at: &str,
) {
    assert_eq!(
        kv_row(cluster, kv, k).expect("read"),
        kv_values(v, n),
        "{at}"
    );
}

/// Every column of a `kv` row.
fn kv_columns(k: u32, v: &str, n: Option<i64>) -> [(&'static str, Value); 3] {
    [
        ("k", Value::UInt(k.into())),
        ("v", Value::from(v)),
        ("n", n.map_or(Value::Null, Value::Int)),
    ]
}

pub fn kv_insert(transaction: &mut Transaction<'_>, kv: &Arc<Table>, k: u32, v: &str, n: i64) {
    transaction
        .insert(kv, &kv_columns(k, v, Some(n)))
        .expect("valid insert");
}

/// A write naming every column.
pub fn kv_write(
    transaction: &mut Transaction<'_>,
    kv: &Arc<Table>,
    k: u32,
    v: &str,
    n: Option<i64>,
) {
    transaction
        .write(kv, &kv_columns(k, v, n))
        .expect("valid write");
}

/// An update of v only.
pub fn kv_update(transaction: &mut Transaction<'_>, kv: &Arc<Table>, k: u32, v: &str) {
    transaction
        .update(kv, &key(k), &[("v", Value::from(v))])
        .expect("valid update");
}

pub fn kv_delete(transaction: &mut Transaction<'_>, kv: &Arc<Table>, keys: &[u32]) {
    for &k in keys {
        transaction.delete(kv, &key(k)).expect("valid delete");
    }
}

/// Queues a read of each of `keys`.
pub fn kv_reads(
    transaction: &mut Transaction<'_>,
    kv: &Arc<Table>,
    keys: &[u32],
    lock: LockMode,
) -> Vec<OpId> {
    keys.iter()
        .map(|&k| transaction.read(kv, &key(k), lock).expect("valid read"))
        .collect()
}

/// Reads `keys` in one transaction (committed reads): `None` for a key
/// without a row. A missing row fails a whole batch, so absent keys are
/// found one by one after a failure.
pub fn kv_snapshot(
    cluster: &Cluster,
    kv: &Arc<Table>,
    keys: &[u32],
) -> Vec<Option<(Value, Value)>> {
    let mut transaction = cluster.transaction();
    let ops = kv_reads(&mut transaction, kv, keys, LockMode::CommittedRead);
    match transaction.execute(Commit::Yes) {
        Ok(_) => ops
            .iter()
            .map(|&op| Some(values_of(transaction.get(op).expect("a read row"))))
            .collect(),
        Err(error) if error.code() == Some(ErrorCode::NoSuchRow) => keys
            .iter()
            .map(|&k| match kv_row(cluster, kv, k) {
                Ok(values) => Some(values),
                Err(error) if error.code() == Some(ErrorCode::NoSuchRow) => None,
                Err(error) => panic!("read of kv {k}: {error}"),
            })
            .collect(),
        Err(error) => panic!("read of kv {keys:?}: {error}"),
    }
}
