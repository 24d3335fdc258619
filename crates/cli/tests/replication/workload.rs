//! The random concurrent workload: several API nodes run random
//! transactions over a small key space, each key's changes chained through
//! its counter row, and every committed effect is checked afterwards.

use crate::common::{column, create_table, key, keyed_definition, read_row, TestCluster};
use crate::keys::slot_of;
use client::{
    ClientError, Cluster, ColumnType, Commit, ErrorCode, LockMode, Outcome, Row, Table, TableDef,
    Transaction, Value,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

const WORKLOAD_THREADS: u64 = 4;
const WORKLOAD_TRANSACTIONS: usize = 150;
const WORKLOAD_KEYS: u32 = 32;
const WORKLOAD_FIRST_KEY: u32 = 5000;

/// `wl`: the data rows. `ver` is the counter of the change that wrote the
/// row, `val` names the writer.
fn wl_definition() -> TableDef {
    keyed_definition(
        "wl",
        vec![
            column("ver", ColumnType::BigInt { unsigned: true }, false),
            column("val", ColumnType::VarChar(32), false),
        ],
    )
}

/// `wl_ctr`: one row per key of `wl`, always present: how many
/// transactions changed the key (`c`) and whether its `wl` row exists.
/// Every transaction that touches a `wl` row first locks its counter, so
/// the transactions of each key form one chain, numbered by `c`.
fn wl_ctr_definition() -> TableDef {
    keyed_definition(
        "wl_ctr",
        vec![
            column("c", ColumnType::BigInt { unsigned: true }, false),
            column("present", ColumnType::Int { unsigned: true }, false),
        ],
    )
}

/// Every column of a `wl` row.
fn wl_columns(k: u32, ver: u64, val: &str) -> [(&'static str, Value); 3] {
    [
        ("k", Value::UInt(k.into())),
        ("ver", Value::UInt(ver)),
        ("val", Value::from(val)),
    ]
}

/// A `wl` row: (ver, val); `None` when absent.
type WlState = Option<(u64, String)>;

/// One committed change of a key: the `c`-th of its chain.
#[derive(Clone, Debug)]
struct Touch {
    k: u32,
    c: u64,
    /// What the counter said before (row present?).
    pre_present: bool,
    op: &'static str,
    /// What a locked read of the row returned (reads only).
    observed: Option<WlState>,
    /// The row afterwards.
    post: WlState,
    who: String,
}

impl Touch {
    /// Whether the row exists after the change, as its counter records it.
    fn present_after(&self) -> bool {
        if self.op == "locked read" {
            self.pre_present
        } else {
            self.post.is_some()
        }
    }
}

/// What one thread saw.
#[derive(Default)]
struct ThreadLog {
    touches: Vec<Touch>,
    /// Committed reads of present rows: (k, ver, val, who).
    reads: Vec<(u32, u64, String, String)>,
    /// Things that must not happen.
    anomalies: Vec<String>,
    retries: u64,
    /// Temporary errors retried, by error.
    retried: BTreeMap<String, u64>,
    probes: u64,
    /// Changes rolled back or failed on purpose.
    aborted: u64,
}

fn wl_state(row: &Row) -> (u64, String) {
    (
        row.get("ver").and_then(Value::as_u64).expect("ver"),
        row.get("val")
            .and_then(Value::as_str)
            .expect("val")
            .to_string(),
    )
}

fn ctr_state(row: &Row) -> (u64, bool) {
    (
        row.get("c").and_then(Value::as_u64).expect("c"),
        row.get("present").and_then(Value::as_u64).expect("present") != 0,
    )
}

fn workload_seed() -> u64 {
    match std::env::var("TESSERA_TEST_SEED") {
        Ok(text) => text.parse().expect("TESSERA_TEST_SEED is a u64"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |elapsed| elapsed.as_nanos() as u64),
    }
}

/// Several API nodes run random transactions over a small key space, each
/// key's transactions chained through its counter row; temporary errors
/// are retried. Afterwards every chain must be complete (no lost or
/// doubled change), each change must have seen its predecessor's row, a
/// committed read of every key must give the last change's row, and every
/// committed read during the run must have seen a committed change.
/// Returns the number of rows the workload tables hold.
pub fn workload(processes: &TestCluster) -> usize {
    let seed = workload_seed();
    eprintln!("workload seed {seed} (TESSERA_TEST_SEED={seed} repeats the choices)");
    let setup = processes.connect();
    let wl = create_table(&setup, &wl_definition());
    let ctr = create_table(&setup, &wl_ctr_definition());
    let keys: Vec<u32> = (WORKLOAD_FIRST_KEY..WORKLOAD_FIRST_KEY + WORKLOAD_KEYS).collect();
    let groups: BTreeSet<u32> = keys
        .iter()
        .map(|&k| slot_of(processes, &wl, k).group)
        .collect();
    assert_eq!(
        groups.len(),
        processes.groups().len(),
        "the keys span every group"
    );
    let mut transaction = setup.transaction();
    for &k in &keys {
        transaction
            .insert(
                &ctr,
                &[
                    ("k", Value::UInt(k.into())),
                    ("c", Value::UInt(0)),
                    ("present", Value::UInt(0)),
                ],
            )
            .expect("valid insert");
    }
    transaction
        .execute(Commit::Yes)
        .expect("insert the counters");

    let clients: Vec<Cluster> = (0..WORKLOAD_THREADS).map(|_| processes.connect()).collect();
    let logs: Vec<ThreadLog> = std::thread::scope(|scope| {
        let workers: Vec<_> = clients
            .iter()
            .enumerate()
            .map(|(thread, cluster)| {
                let keys = &keys;
                scope.spawn(move || {
                    workload_thread(cluster, keys, thread, seed ^ ((thread as u64) << 56))
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("workload thread"))
            .collect()
    });
    let retries: u64 = logs.iter().map(|log| log.retries).sum();
    let probes: u64 = logs.iter().map(|log| log.probes).sum();
    let aborted: u64 = logs.iter().map(|log| log.aborted).sum();
    let changes: usize = logs.iter().map(|log| log.touches.len()).sum();
    eprintln!(
        "workload: {changes} committed changes, {aborted} aborted on purpose, {} committed reads, \
         {probes} refused probes, {retries} retries {:?}",
        logs.iter().map(|log| log.reads.len()).sum::<usize>(),
        logs.iter().flat_map(|log| log.retried.iter()).fold(
            BTreeMap::<&str, u64>::new(),
            |mut all, (name, count)| {
                *all.entry(name.as_str()).or_default() += count;
                all
            }
        )
    );

    // Check every chain against the final rows.
    let mut problems: Vec<String> = logs
        .iter()
        .flat_map(|log| log.anomalies.iter().cloned())
        .collect();
    let mut chain: BTreeMap<(u32, u64), Touch> = BTreeMap::new();
    for touch in logs.iter().flat_map(|log| log.touches.iter()) {
        if let Some(other) = chain.insert((touch.k, touch.c), touch.clone()) {
            problems.push(format!(
                "key {} change {} committed twice, by {} and {}: {other:?} and {touch:?}",
                touch.k, touch.c, other.who, touch.who
            ));
        }
    }
    let mut live = keys.len();
    for &k in &keys {
        let (count, present) = ctr_state(
            &read_row(&setup, &ctr, &key(k)).unwrap_or_else(|error| panic!("ctr {k}: {error}")),
        );
        let mut state: WlState = None;
        for c in 1..=count {
            let Some(touch) = chain.get(&(k, c)) else {
                problems.push(format!(
                    "key {k}: change {c} of {count} is in the counter but no client saw it commit"
                ));
                continue;
            };
            if touch.pre_present != state.is_some() {
                problems.push(format!(
                    "key {k} change {c}: the counter said present={} but the chain has {state:?}: {touch:?}",
                    touch.pre_present
                ));
            }
            if let Some(observed) = &touch.observed {
                if *observed != state {
                    problems.push(format!(
                        "key {k} change {c}: a locked read saw {observed:?}, the chain has {state:?}: {touch:?}"
                    ));
                }
            }
            state = touch.post.clone();
        }
        if chain.range((k, count + 1)..(k + 1, 0)).next().is_some() {
            problems.push(format!(
                "key {k}: changes after {count} were acknowledged but are not in the counter: {:?}",
                chain.range((k, count + 1)..(k + 1, 0)).collect::<Vec<_>>()
            ));
        }
        if present != state.is_some() {
            problems.push(format!(
                "key {k}: the counter says present={present}, the chain ends with {state:?}"
            ));
        }
        let actual = match read_row(&setup, &wl, &key(k)) {
            Ok(row) => Some(wl_state(&row)),
            Err(error) if error.code() == Some(ErrorCode::NoSuchRow) => None,
            Err(error) => panic!("read wl {k}: {error}"),
        };
        if actual != state {
            problems.push(format!(
                "key {k}: the row is {actual:?}, the chain of {count} changes ends with {state:?}"
            ));
        }
        live += usize::from(actual.is_some());
    }
    for (k, ver, val, who) in logs.iter().flat_map(|log| log.reads.iter()) {
        let written = chain.get(&(*k, *ver)).and_then(|touch| touch.post.clone());
        if written.as_ref() != Some(&(*ver, val.clone())) {
            problems.push(format!(
                "{who}: a committed read of key {k} saw ({ver}, {val:?}), but change {ver} wrote {written:?}"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "workload (seed {seed}): {} problems:\n{}",
        problems.len(),
        problems
            .iter()
            .take(30)
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(changes > 0, "the workload changed something");
    live
}

/// What one workload thread works with: its API node, the workload tables
/// as that node sees them, the key space, its random choices and its log.
struct Worker<'a> {
    cluster: &'a Cluster,
    wl: Arc<Table>,
    ctr: Arc<Table>,
    keys: &'a [u32],
    rng: stdx::mix::XorShift,
    log: ThreadLog,
}

fn workload_thread(cluster: &Cluster, keys: &[u32], thread: usize, seed: u64) -> ThreadLog {
    let mut worker = Worker {
        cluster,
        wl: cluster.table("wl").expect("wl"),
        ctr: cluster.table("wl_ctr").expect("wl_ctr"),
        keys,
        rng: stdx::mix::XorShift::new(seed),
        log: ThreadLog::default(),
    };
    for number in 0..WORKLOAD_TRANSACTIONS {
        let kind = worker.rng.below(10);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let who = format!("thread {thread} transaction {number} attempt {attempt}");
            let tag = format!("t{thread}-{number}-{attempt}");
            let result = match kind {
                0..=5 => worker.change(&who, &tag),
                6 => worker.probe(&who),
                _ => worker.committed_read(&who),
            };
            let log = &mut worker.log;
            match result {
                Ok(()) => break,
                Err(error) if error.is_temporary() => {
                    log.retries += 1;
                    let name = error
                        .code()
                        .map_or_else(|| error.label(), |code| format!("{code:?}"));
                    *log.retried.entry(name).or_default() += 1;
                    assert!(attempt < 100, "{who}: still failing: {error}");
                }
                Err(error) => {
                    log.anomalies.push(format!("{who}: {error}"));
                    break;
                }
            }
        }
    }
    worker.log
}

/// One of `keys`.
fn pick_key(keys: &[u32], rng: &mut stdx::mix::XorShift) -> u32 {
    keys[rng.below(keys.len() as u64) as usize]
}

/// 1 to 4 distinct keys, ascending.
fn pick_keys(keys: &[u32], rng: &mut stdx::mix::XorShift) -> Vec<u32> {
    let count = 1 + rng.below(4) as usize;
    let mut picked = BTreeSet::new();
    while picked.len() < count {
        picked.insert(pick_key(keys, rng));
    }
    picked.into_iter().collect()
}

/// Locks the counters of `picked` one batch each, in key order (so
/// transactions never deadlock on them), and returns (c, present) of each.
fn lock_counters(
    transaction: &mut Transaction<'_>,
    ctr: &Arc<Table>,
    picked: &[u32],
) -> Result<Vec<(u64, bool)>, ClientError> {
    let mut states = Vec::new();
    for &k in picked {
        let op = transaction.read(ctr, &key(k), LockMode::Exclusive)?;
        transaction.execute(Commit::No)?;
        states.push(ctr_state(transaction.get(op).expect("a read counter")));
    }
    Ok(states)
}

/// Locks the counters of `picked` in one batch; returns (c, present) of each.
fn lock_counters_in_one_batch(
    transaction: &mut Transaction<'_>,
    ctr: &Arc<Table>,
    picked: &[u32],
) -> Result<Vec<(u64, bool)>, ClientError> {
    let ops = picked
        .iter()
        .map(|&k| transaction.read(ctr, &key(k), LockMode::Exclusive))
        .collect::<Result<Vec<_>, _>>()?;
    transaction.execute(Commit::No)?;
    Ok(ops
        .into_iter()
        .map(|op| ctr_state(transaction.get(op).expect("a read counter")))
        .collect())
}

impl Worker<'_> {
    /// A transaction changing (or lock-reading) 1 to 4 keys; `val` tags what
    /// it writes.
    fn change(&mut self, who: &str, val: &str) -> Result<(), ClientError> {
        let picked = pick_keys(self.keys, &mut self.rng);
        let mut transaction = self.cluster.transaction();
        // Now and then every counter in one batch: the locks are then taken in
        // no particular order, so transactions may deadlock and time out.
        let counters = if self.rng.below(25) == 0 {
            lock_counters_in_one_batch(&mut transaction, &self.ctr, &picked)?
        } else {
            lock_counters(&mut transaction, &self.ctr, &picked)?
        };
        let mut touches = Vec::new();
        let mut reads = Vec::new();
        for (&k, &(c, present)) in picked.iter().zip(&counters) {
            let ver = c + 1;
            let row = (ver, val.to_string());
            let kk = key(k);
            let full = wl_columns(k, ver, val);
            let (op, post) = match (present, self.rng.below(5)) {
                (true, 0) => {
                    transaction.update(
                        &self.wl,
                        &kk,
                        &[("ver", Value::UInt(ver)), ("val", Value::from(val))],
                    )?;
                    ("update", Some(row))
                }
                (true, 1) => {
                    transaction.write(&self.wl, &full)?;
                    ("write over", Some(row))
                }
                (true, 2) => {
                    transaction.delete(&self.wl, &kk)?;
                    ("delete", None)
                }
                (true, lock) => {
                    let lock = if lock == 3 {
                        LockMode::Shared
                    } else {
                        LockMode::Exclusive
                    };
                    reads.push((touches.len(), transaction.read(&self.wl, &kk, lock)?));
                    ("locked read", None)
                }
                (false, choice) if choice % 2 == 0 => {
                    transaction.insert(&self.wl, &full)?;
                    ("insert", Some(row))
                }
                (false, _) => {
                    transaction.write(&self.wl, &full)?;
                    ("write new", Some(row))
                }
            };
            touches.push(Touch {
                k,
                c: ver,
                pre_present: present,
                op,
                observed: None,
                post,
                who: who.to_string(),
            });
        }
        // Sometimes the data in one batch and the counters in the next.
        if self.rng.below(2) == 0 {
            transaction.execute(Commit::No)?;
        }
        for touch in &touches {
            transaction.update(
                &self.ctr,
                &key(touch.k),
                &[
                    ("c", Value::UInt(touch.c)),
                    ("present", Value::UInt(touch.present_after().into())),
                ],
            )?;
        }
        match self.rng.below(10) {
            // Rolled back after the batch: the chain must not move.
            0 => {
                transaction.execute(Commit::No)?;
                transaction.rollback()?;
                self.log.aborted += 1;
                return Ok(());
            }
            // A last operation that must fail aborts everything prepared,
            // on every replica.
            1 => {
                let last = touches.last().expect("at least one key");
                let expected = if last.present_after() {
                    transaction.insert(&self.wl, &wl_columns(last.k, 0, "doomed"))?;
                    ErrorCode::DuplicateKey
                } else {
                    transaction.update(
                        &self.wl,
                        &key(last.k),
                        &[("val", Value::from("doomed"))],
                    )?;
                    ErrorCode::NoSuchRow
                };
                if commit_must_fail(&mut transaction, expected, &mut self.log, |other| {
                    format!(
                        "{who}: {touches:?} then a failing operation on key {} should fail with {expected}, got {other:?}",
                        last.k
                    )
                })? {
                    self.log.aborted += 1;
                }
                return Ok(());
            }
            _ => {}
        }
        transaction.execute(Commit::Yes)?;
        for (index, op) in reads {
            let state = wl_state(transaction.get(op).expect("a read row"));
            touches[index].observed = Some(Some(state.clone()));
            touches[index].post = Some(state);
        }
        self.log.touches.extend(touches);
        Ok(())
    }

    /// An operation the counter says must fail: insert of a present row
    /// (DuplicateKey), update, delete or read of an absent one (NoSuchRow).
    fn probe(&mut self, who: &str) -> Result<(), ClientError> {
        let k = pick_key(self.keys, &mut self.rng);
        let mut transaction = self.cluster.transaction();
        let (c, present) = lock_counters(&mut transaction, &self.ctr, &[k])?[0];
        let kk = key(k);
        let (what, expected) = if present {
            transaction.insert(&self.wl, &wl_columns(k, 0, "probe"))?;
            ("insert", ErrorCode::DuplicateKey)
        } else {
            match self.rng.below(3) {
                0 => {
                    transaction.update(&self.wl, &kk, &[("val", Value::from("probe"))])?;
                    ("update", ErrorCode::NoSuchRow)
                }
                1 => {
                    transaction.delete(&self.wl, &kk)?;
                    ("delete", ErrorCode::NoSuchRow)
                }
                _ => {
                    transaction.read(&self.wl, &kk, LockMode::Shared)?;
                    ("read", ErrorCode::NoSuchRow)
                }
            }
        };
        if commit_must_fail(&mut transaction, expected, &mut self.log, |other| {
            format!(
                "{who}: {what} of key {k} (counter {c}, present={present}) should fail with {expected}, got {other:?}"
            )
        })? {
            self.log.probes += 1;
        }
        Ok(())
    }

    /// A committed read of one key (a missing row fails a whole batch).
    fn committed_read(&mut self, who: &str) -> Result<(), ClientError> {
        let k = pick_key(self.keys, &mut self.rng);
        match read_row(self.cluster, &self.wl, &key(k)) {
            Ok(row) => {
                let (ver, val) = wl_state(&row);
                self.log.reads.push((k, ver, val, who.to_string()));
                Ok(())
            }
            Err(error) if error.code() == Some(ErrorCode::NoSuchRow) => Ok(()),
            Err(error) => Err(error),
        }
    }
}

/// Commits a transaction whose last operation must fail with `expected`:
/// true when it did; a temporary error is returned (to retry); anything
/// else is logged as an anomaly, described by `anomaly`.
fn commit_must_fail(
    transaction: &mut Transaction<'_>,
    expected: ErrorCode,
    log: &mut ThreadLog,
    anomaly: impl FnOnce(&Result<Outcome, ClientError>) -> String,
) -> Result<bool, ClientError> {
    match transaction.execute(Commit::Yes) {
        Err(error) if error.code() == Some(expected) => Ok(true),
        Err(error) if error.is_temporary() => Err(error),
        other => {
            log.anomalies.push(anomaly(&other));
            Ok(false)
        }
    }
}
