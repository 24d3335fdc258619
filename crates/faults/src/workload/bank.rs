//! The bank workload: `ACCOUNTS` accounts (table `bank`: account,
//! balance) holding `TOTAL` between them; transfers of 1 to 5 between
//! two accounts (both read under exclusive locks, refused when the
//! source holds too little) and reads of every balance in one
//! transaction under shared locks. Checked by `check::bank`: every read
//! sums to the total and shows no negative balance.

use super::Client;
use crate::history::OpType;
use client::{ClientError, Cluster, ColumnDef, ColumnType, Commit, LockMode, TableDef, Value};
use serde_json::{json, Value as Json};

pub const ACCOUNTS: u64 = 5;
pub const TOTAL: i64 = 100;

pub fn table() -> TableDef {
    TableDef {
        indexes: Vec::new(),
        revision: 0,
        id: 0,
        version: 0,
        name: "bank".into(),
        columns: vec![
            ColumnDef::new("account", ColumnType::Int { unsigned: true }, false),
            ColumnDef::new("balance", ColumnType::BigInt { unsigned: false }, false),
        ],
        primary_key: vec![0],
        partitions: 0,
        partition_key: Vec::new(),
    }
}

/// Writes every account's opening balance (the total shared evenly) in
/// one transaction, unless the accounts exist already.
pub fn open_accounts(cluster: &Cluster) -> Result<(), ClientError> {
    let table = cluster.table("bank")?;
    if read_balances(cluster)
        .is_ok_and(|balances| balances.iter().all(|balance| !balance.is_null()))
    {
        return Ok(());
    }
    let mut transaction = cluster.transaction();
    for account in 0..ACCOUNTS {
        let share = TOTAL / ACCOUNTS as i64 + i64::from(account == 0) * (TOTAL % ACCOUNTS as i64);
        transaction.write(
            &table,
            &[
                ("account", Value::UInt(account)),
                ("balance", Value::Int(share)),
            ],
        )?;
    }
    transaction.execute(Commit::Yes).map(|_| ())
}

/// Every balance, in account order, read in one transaction; an account
/// missing is a balance of none (the checker reports it). Accounts are
/// locked one at a time in ascending order, as transfers lock theirs:
/// no deadlock between two of them.
pub fn read_balances(cluster: &Cluster) -> Result<Vec<Json>, ClientError> {
    let table = cluster.table("bank")?;
    let mut transaction = cluster.transaction();
    let mut balances = Vec::new();
    for account in 0..ACCOUNTS {
        let op = transaction.read(&table, &[Value::UInt(account)], LockMode::Shared)?;
        let commit = if account + 1 == ACCOUNTS {
            Commit::Yes
        } else {
            Commit::No
        };
        match transaction.execute(commit) {
            Ok(_) => {}
            // An account gone is an anomaly for the checker to report,
            // not a failed read.
            Err(error) if error.code() == Some(client::ErrorCode::NoSuchRow) => {
                balances.resize(ACCOUNTS as usize, Json::Null);
                return Ok(balances);
            }
            Err(error) => return Err(error),
        }
        balances.push(
            transaction
                .get(op)
                .and_then(|row| row.get("balance")?.as_i64())
                .map_or(Json::Null, Json::from),
        );
    }
    Ok(balances)
}

/// Moves `amount` from `from` to `to` if `from` holds that much: the
/// commit's outcome, or `Ok(None)` when refused for too little. Locks
/// the lower account first.
fn transfer(
    cluster: &Cluster,
    from: u64,
    to: u64,
    amount: i64,
) -> Result<Option<client::Outcome>, ClientError> {
    let table = cluster.table("bank")?;
    let mut transaction = cluster.transaction();
    let mut balances = [0i64; 2];
    let mut order = [(from, 0usize), (to, 1usize)];
    order.sort_unstable();
    for (account, slot) in order {
        let op = transaction.read(&table, &[Value::UInt(account)], LockMode::Exclusive)?;
        transaction.execute(Commit::No)?;
        balances[slot] = transaction
            .get(op)
            .and_then(|row| row.get("balance")?.as_i64())
            .ok_or_else(|| ClientError::Protocol(format!("account {account} has no balance")))?;
    }
    let [from_balance, to_balance] = balances;
    if from_balance < amount {
        let _ = transaction.rollback();
        return Ok(None);
    }
    transaction.update(
        &table,
        &[Value::UInt(from)],
        &[("balance", Value::Int(from_balance - amount))],
    )?;
    transaction.update(
        &table,
        &[Value::UInt(to)],
        &[("balance", Value::Int(to_balance + amount))],
    )?;
    transaction.execute(Commit::Yes).map(Some)
}

/// One transfer or read of every balance.
pub(super) fn step(client: &mut Client<'_>) {
    let cluster = client.cluster;
    if client.random.below(2) == 0 {
        client.invoke("read", None, Json::Null);
        match read_balances(cluster) {
            Ok(balances) => client.complete(OpType::Ok, "read", Json::from(balances), None, None),
            Err(error) => client.complete(OpType::Fail, "read", Json::Null, Some(&error), None),
        }
        return;
    }
    let from = client.random.below(ACCOUNTS);
    let to = (from + 1 + client.random.below(ACCOUNTS - 1)) % ACCOUNTS;
    let amount = 1 + client.random.below(5) as i64;
    let value = json!({"from": from, "to": to, "amount": amount});
    client.invoke("transfer", None, value.clone());
    match transfer(cluster, from, to, amount) {
        Ok(None) => client.complete(OpType::Fail, "transfer", value, None, None),
        Ok(Some(outcome)) => client.committed("transfer", value, Ok(outcome), false),
        Err(error) => client.committed("transfer", value, Err(error), false),
    }
}
