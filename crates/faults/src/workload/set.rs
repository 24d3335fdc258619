//! The set workload (and the durable one, the same with `Commit::
//! Durable`): each client inserts unique elements (table `set` or
//! `durable`: one column, the element), client `c`'s `i`th being
//! `c * STRIDE + i`. After healing, the runner reads back every element
//! each client could have added and a few beyond (the final read,
//! through key lookups: the engine has no scans yet). Checked by
//! `check::set`: every acknowledged insert is there, nothing never
//! attempted or failed is.

use super::Client;
use client::{ClientError, Cluster, ColumnDef, ColumnType, Commit, LockMode, TableDef, Value};
use serde_json::Value as Json;
use std::collections::BTreeMap;

/// Elements of client `c` are `c * STRIDE ..`.
pub const STRIDE: u64 = 1_000_000_000;

/// Elements the final read looks at past each client's last attempt:
/// an element there was never attempted.
const BEYOND: u64 = 16;

pub fn table(name: &str) -> TableDef {
    TableDef {
        indexes: Vec::new(),
        revision: 0,
        id: 0,
        version: 0,
        name: name.into(),
        columns: vec![ColumnDef::new(
            "element",
            ColumnType::BigInt { unsigned: true },
            false,
        )],
        primary_key: vec![0],
        partitions: 0,
        partition_key: Vec::new(),
    }
}

/// One insert of the client's next element.
pub(super) fn step(client: &mut Client<'_>, commit: Commit) {
    let name = if commit == Commit::Durable {
        "durable"
    } else {
        "set"
    };
    let Some(table) = client.table(name) else {
        return;
    };
    let element = client.slot * STRIDE + client.invoked;
    client.invoke("add", None, Json::from(element));
    let mut transaction = client.cluster.transaction();
    let result = transaction
        .insert(&table, &[("element", Value::UInt(element))])
        .and_then(|_| transaction.execute(commit));
    // A durable commit whose wait for durability failed is committed,
    // but not known durable: unknown, not failed.
    let committed_anyway = result.is_err() && transaction.commit_gci().is_some();
    client.committed("add", Json::from(element), result, committed_anyway);
    // Some 50 adds a second per client: an hour's run stays within the
    // cluster's memory, and the final read within a minute or two.
    std::thread::sleep(ADD_PAUSE);
}

/// The pause after each add.
const ADD_PAUSE: std::time::Duration = std::time::Duration::from_millis(20);

/// The elements present among those the adds of `history` could have
/// written (each client's range up to its highest attempt, and
/// `BEYOND` more), read by key in batches (the clients stopped: nothing changes).
pub fn final_read(
    cluster: &Cluster,
    name: &str,
    attempted: &[u64],
) -> Result<Vec<u64>, ClientError> {
    let table = cluster.table(name)?;
    let mut highest: BTreeMap<u64, u64> = BTreeMap::new();
    for &element in attempted {
        let slot = element / STRIDE;
        let entry = highest.entry(slot).or_insert(element);
        *entry = (*entry).max(element);
    }
    let candidates: Vec<u64> = highest
        .iter()
        .flat_map(|(&slot, &high)| slot * STRIDE..=high + BEYOND)
        .collect();
    // Batches of keys in one transaction; a batch with a key missing
    // fails as a whole (NoSuchRow), and is read again key by key.
    let mut present = Vec::new();
    for batch in candidates.chunks(64) {
        match read_keys(cluster, &table, batch)? {
            Some(all) => present.extend(all),
            None => {
                for &element in batch {
                    if read_keys(cluster, &table, &[element])?.is_some() {
                        present.push(element);
                    }
                }
            }
        }
    }
    Ok(present)
}

/// `Some(keys)` if every one of `keys` has its row, `None` if one has not.
fn read_keys(
    cluster: &Cluster,
    table: &std::sync::Arc<client::Table>,
    keys: &[u64],
) -> Result<Option<Vec<u64>>, ClientError> {
    let mut transaction = cluster.transaction();
    for &element in keys {
        transaction.read(table, &[Value::UInt(element)], LockMode::Shared)?;
    }
    match transaction.execute(Commit::Yes) {
        Ok(_) => Ok(Some(keys.to_vec())),
        Err(error) if error.code() == Some(client::ErrorCode::NoSuchRow) => Ok(None),
        Err(error) => Err(error),
    }
}
