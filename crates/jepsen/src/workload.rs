//! Workloads: clients on client hosts running operations through the
//! native client against a hosted cluster, each recording its history
//! (`history::Op`): `invoke` before it sends, then `ok`, `fail` (the
//! transaction did not commit: the data node refused it, or it failed
//! before its commit was sent) or `info` (a commit whose answer was
//! lost: `ClientError::is_outcome_unknown`). After an `info` the client
//! goes on as a new process, as in Jepsen: the old one may still be
//! "running" its operation.
//!
//! - **register**: `KEYS` registers (table `register`: k, v); reads under
//!   a shared lock, writes, and compare-and-sets (an exclusive read and,
//!   if the value is the expected one, an update, in one transaction).

use crate::history::{Op, OpType};
use crate::hosts::{Host, Network};
use client::{
    ClientError, Cluster, ColumnDef, ColumnType, Commit, ErrorCode, LockMode, TableDef, Value,
};
use serde_json::Value as Json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Registers of the register workload.
pub const KEYS: u64 = 8;

/// The register workload's table.
pub fn register_table() -> TableDef {
    TableDef {
        id: 0,
        version: 0,
        name: "register".into(),
        columns: vec![
            ColumnDef::new("k", ColumnType::Int { unsigned: true }, false),
            ColumnDef::new("v", ColumnType::BigInt { unsigned: false }, false),
        ],
        primary_key: vec![0],
        partitions: 0,
    }
}

/// Connects from the calling thread (on its host), retrying for a while:
/// a nemesis may be at work.
pub fn connect(mgmd: &str, stop: &AtomicBool) -> Option<Cluster> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        if let Ok(cluster) = Cluster::connect(mgmd) {
            return Some(cluster);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    None
}

/// Creates the workload's table through a client on `host`.
pub fn set_up_register(network: &Network, host: &Host, mgmd: &str) -> Result<(), String> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                network.enter(host)?;
                let never = AtomicBool::new(false);
                let cluster = connect(mgmd, &never).ok_or("no client could connect")?;
                let deadline = Instant::now() + Duration::from_secs(60);
                loop {
                    match cluster.create_table(&register_table()) {
                        Ok(_) => return Ok(()),
                        Err(error) if error.is_temporary() && Instant::now() < deadline => {
                            std::thread::sleep(Duration::from_millis(200));
                        }
                        Err(error) => return Err(format!("creating the register table: {error}")),
                    }
                }
            })
            .join()
            .map_err(|_| "the set-up thread panicked".to_string())?
    })
}

/// One client's history so far.
struct Recorder {
    start: Instant,
    process: u64,
    /// Added to the process number after an `info` (the client count).
    stride: u64,
    ops: Vec<Op>,
}

impl Recorder {
    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    fn invoke(&mut self, f: &str, key: u64, value: Json) {
        let time = self.now();
        self.ops.push(Op {
            process: self.process,
            op_type: OpType::Invoke,
            f: f.into(),
            key: Some(key),
            value,
            time,
            error: None,
        });
    }

    fn complete(&mut self, op_type: OpType, f: &str, key: u64, value: Json) {
        self.complete_with(op_type, f, key, value, None);
    }

    /// A completion, with the error that ended it if any. After an
    /// error the client pauses a little: a node just lost fails every
    /// request at once, and a tight loop of failures says nothing more.
    fn complete_with(
        &mut self,
        op_type: OpType,
        f: &str,
        key: u64,
        value: Json,
        error: Option<&ClientError>,
    ) {
        let time = self.now();
        self.ops.push(Op {
            process: self.process,
            op_type,
            f: f.into(),
            key: Some(key),
            value,
            time,
            error: error.map(ToString::to_string),
        });
        if op_type == OpType::Info {
            self.process += self.stride;
        }
        if error.is_some() {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// A write's or cas's end from its commit's result.
    fn committed(&mut self, f: &str, key: u64, value: Json, result: Result<(), ClientError>) {
        let op_type = match &result {
            Ok(()) => OpType::Ok,
            Err(error) if error.is_outcome_unknown() => OpType::Info,
            Err(_) => OpType::Fail,
        };
        self.complete_with(op_type, f, key, value, result.as_ref().err());
    }
}

/// The value of register `key` under `lock`, `null` for no row.
fn read_value(
    transaction: &mut client::Transaction<'_>,
    table: &std::sync::Arc<client::Table>,
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

/// Runs register operations from a thread on `host` until `stop`;
/// returns its history. `slot` numbers the client (0..`clients`).
#[allow(clippy::too_many_arguments)]
pub fn register_client(
    network: &Network,
    host: &Host,
    mgmd: &str,
    start: Instant,
    slot: u64,
    clients: u64,
    seed: u64,
    stop: &AtomicBool,
) -> Vec<Op> {
    let mut recorder = Recorder {
        start,
        process: slot,
        stride: clients,
        ops: Vec::new(),
    };
    if network.enter(host).is_err() {
        return recorder.ops;
    }
    let Some(cluster) = connect(mgmd, stop) else {
        return recorder.ops;
    };
    let mut table = None;
    let mut random = stdx::mix::XorShift::new(seed ^ (slot + 1).wrapping_mul(0x9E37_79B9));
    while !stop.load(Ordering::Relaxed) {
        if table.is_none() {
            table = cluster.table("register").ok();
            if table.is_none() {
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
        }
        let table = table.as_ref().expect("fetched above");
        let key = random.below(KEYS);
        match random.below(3) {
            0 => {
                recorder.invoke("read", key, Json::Null);
                let mut transaction = cluster.transaction();
                match read_value(&mut transaction, table, key, LockMode::Shared, Commit::Yes) {
                    Ok(value) => recorder.complete(OpType::Ok, "read", key, value),
                    // A read changes nothing: whatever happened, it did not.
                    Err(error) => {
                        recorder.complete_with(OpType::Fail, "read", key, Json::Null, Some(&error))
                    }
                }
            }
            1 => {
                let value = random.below(5) as i64;
                recorder.invoke("write", key, Json::from(value));
                let mut transaction = cluster.transaction();
                let result = transaction
                    .write(table, &[("k", Value::UInt(key)), ("v", Value::Int(value))])
                    .and_then(|_| transaction.execute(Commit::Yes))
                    .map(|_| ());
                recorder.committed("write", key, Json::from(value), result);
            }
            _ => {
                // Never null: a missing row is a value other than expected.
                let (expected, new) = (random.below(5) as i64, random.below(5) as i64);
                let arguments = Json::from(vec![expected, new]);
                recorder.invoke("cas", key, arguments.clone());
                let mut transaction = cluster.transaction();
                match read_value(
                    &mut transaction,
                    table,
                    key,
                    LockMode::Exclusive,
                    Commit::No,
                ) {
                    Ok(current) if current == expected => {
                        let result = transaction
                            .update(table, &[Value::UInt(key)], &[("v", Value::Int(new))])
                            .and_then(|_| transaction.execute(Commit::Yes))
                            .map(|_| ());
                        recorder.committed("cas", key, arguments, result);
                    }
                    Ok(_) => {
                        let _ = transaction.rollback();
                        recorder.complete(OpType::Fail, "cas", key, arguments);
                    }
                    // Its read failed: nothing written.
                    Err(error) => {
                        recorder.complete_with(OpType::Fail, "cas", key, arguments, Some(&error))
                    }
                }
            }
        }
    }
    recorder.ops
}
