//! Node restarts under load, against real processes
//! (docs/design/0018-node-restart.md). Two loads run through clients
//! that stay connected the whole time (they reconnect to a node that
//! comes back):
//!
//! - **bank**: 16 accounts with a fixed total; transfers between two
//!   accounts (both locked, the lower first) and a reader of every
//!   balance under shared locks in one transaction: a read must sum to
//!   the total and show no negative balance.
//! - **set**: each client owns its keys and inserts new ones, deletes
//!   some it inserted and inserts some it deleted again. It knows the
//!   state of every key it touched: present, absent, or unknown (a
//!   commit whose answer was lost). A delete of a present key that finds
//!   no row, or an insert of a deleted key that finds one, is an anomaly
//!   at once; at the end every present key must be there, every absent
//!   one not.
//!
//! Every error a client sees must be temporary (a retry would succeed),
//! or, where a node is killed, a commit whose outcome is unknown; a
//! rolling restart (graceful stops) must give temporary errors only.
//! After each scenario the replicas agree.
//!
//! The scenarios: kill -9 of a data node of 2 under its angel, which
//! starts it again (from its files; and once more with `--initial`); a
//! rolling restart (`all restart`) of 4 data nodes; and a node restart
//! on 4 data nodes whose copy source dies mid-copy, leaving its group
//! with no live replica: the survival rule stops the cluster, and no
//! read ever returns a wrong row. Nothing here asserts a timing.

mod common;

use client::{ClientError, Cluster, Commit, ErrorCode, LockMode, Value};
use common::{
    acct_definition, create_table, data_node, key, kv_definition, read_balances, send_signal,
    started_pid, wait_started_again, ClusterOptions, TestCluster,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const ACCOUNTS: u32 = 16;
const OPENING_BALANCE: i64 = 1_000;
const TRANSFER_CLIENTS: u32 = 2;
const SET_CLIENTS: u64 = 2;
/// Set client `c` owns keys `c * SET_STRIDE ..`.
const SET_STRIDE: u64 = 1_000_000;
/// Upper bound for the load to make progress at any point.
const PROGRESS_DEADLINE: Duration = Duration::from_secs(120);

/// Which errors a scenario accepts besides temporary ones.
#[derive(Clone, Copy, PartialEq)]
enum Errors {
    /// A node is killed: a commit in flight through it has an unknown
    /// outcome.
    OutcomeUnknownToo,
    /// Nodes stop gracefully: temporary errors only.
    TemporaryOnly,
}

/// What a set client knows of one of its keys.
#[derive(Clone, Copy, Debug, PartialEq)]
enum KeyState {
    Present,
    Absent,
    /// A commit on it whose answer was lost: either; never touched again.
    Unknown,
}

/// The load's threads and what they share.
struct Load {
    stop: Arc<AtomicBool>,
    /// Transactions that succeeded, all clients together.
    successes: Arc<AtomicU64>,
    /// Anomalies seen: wrong sums, lost inserts, deleted keys back.
    anomalies: Arc<Mutex<Vec<String>>>,
    /// Errors a client saw that the scenario does not accept.
    bad_errors: Arc<Mutex<Vec<String>>>,
    /// Errors seen in all, by label (for the log).
    errors_seen: Arc<Mutex<BTreeMap<String, u64>>>,
    threads: Vec<JoinHandle<Vec<(u64, KeyState)>>>,
}

impl Load {
    /// Creates the tables and starts the clients.
    fn start(cluster: &TestCluster, accepted: Errors) -> Load {
        let setup = cluster.connect();
        let accounts = create_table(&setup, &acct_definition());
        create_table(&setup, &kv_definition());
        let mut opening = setup.transaction();
        for k in 0..ACCOUNTS {
            opening
                .insert(
                    &accounts,
                    &[
                        ("k", Value::UInt(k.into())),
                        ("v", Value::Int(OPENING_BALANCE)),
                    ],
                )
                .expect("a valid insert");
        }
        opening.execute(Commit::Yes).expect("the opening balances");
        drop(opening);
        drop(setup);
        let mut load = Load {
            stop: Arc::default(),
            successes: Arc::default(),
            anomalies: Arc::default(),
            bad_errors: Arc::default(),
            errors_seen: Arc::default(),
            threads: Vec::new(),
        };
        let mgmd = cluster.mgmd_addr();
        for c in 0..TRANSFER_CLIENTS {
            let worker = load.worker(&mgmd, accepted);
            load.threads.push(std::thread::spawn(move || {
                worker.transfers(u64::from(c));
                Vec::new()
            }));
        }
        let worker = load.worker(&mgmd, accepted);
        load.threads.push(std::thread::spawn(move || {
            worker.balance_reads();
            Vec::new()
        }));
        for c in 0..SET_CLIENTS {
            let worker = load.worker(&mgmd, accepted);
            load.threads
                .push(std::thread::spawn(move || worker.set_changes(c)));
        }
        load
    }

    fn worker(&self, mgmd: &str, accepted: Errors) -> Worker {
        Worker {
            cluster: Cluster::connect(mgmd).expect("a load client connects"),
            stop: Arc::clone(&self.stop),
            successes: Arc::clone(&self.successes),
            anomalies: Arc::clone(&self.anomalies),
            bad_errors: Arc::clone(&self.bad_errors),
            errors_seen: Arc::clone(&self.errors_seen),
            accepted,
        }
    }

    /// Waits until `more` transactions succeeded from now on.
    fn wait_for_progress(&self, more: u64, what: &str) {
        let target = self.successes.load(Ordering::Relaxed) + more;
        let deadline = Instant::now() + PROGRESS_DEADLINE;
        while self.successes.load(Ordering::Relaxed) < target {
            assert!(
                Instant::now() < deadline,
                "the load made no progress {what}: errors {:?}",
                self.errors_seen.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the clients; checks that no anomaly and no error the
    /// scenario does not accept was seen; the set clients' keys.
    fn stop(self) -> Vec<(u64, KeyState)> {
        self.stop.store(true, Ordering::SeqCst);
        let keys = self
            .threads
            .into_iter()
            .flat_map(|thread| thread.join().expect("a load client"))
            .collect();
        eprintln!(
            "load: {} transactions succeeded; errors seen: {:?}",
            self.successes.load(Ordering::Relaxed),
            self.errors_seen.lock().unwrap()
        );
        let anomalies = self.anomalies.lock().unwrap();
        assert!(anomalies.is_empty(), "anomalies: {anomalies:#?}");
        let bad = self.bad_errors.lock().unwrap();
        assert!(bad.is_empty(), "errors no retry would fix: {bad:#?}");
        keys
    }
}

/// One client of the load.
struct Worker {
    cluster: Cluster,
    stop: Arc<AtomicBool>,
    successes: Arc<AtomicU64>,
    anomalies: Arc<Mutex<Vec<String>>>,
    bad_errors: Arc<Mutex<Vec<String>>>,
    errors_seen: Arc<Mutex<BTreeMap<String, u64>>>,
    accepted: Errors,
}

impl Worker {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn succeeded(&self) {
        self.successes.fetch_add(1, Ordering::Relaxed);
    }

    fn anomaly(&self, text: String) {
        self.anomalies.lock().unwrap().push(text);
    }

    /// An error a transaction got: counted, judged against the
    /// scenario, and followed by a short pause.
    fn failed(&self, what: &str, error: &ClientError) {
        let label = match error.code() {
            Some(code) => format!("{}: {code:?}", error.label()),
            None => error.label(),
        };
        *self.errors_seen.lock().unwrap().entry(label).or_default() += 1;
        let accepted = error.is_temporary()
            || (error.is_outcome_unknown() && self.accepted == Errors::OutcomeUnknownToo);
        if !accepted {
            self.bad_errors
                .lock()
                .unwrap()
                .push(format!("{what}: {error}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }

    fn transfers(&self, c: u64) {
        let accounts = self.cluster.table("acct").expect("acct");
        let mut choices = stdx::mix::XorShift::new(0x9E37_79B9_7F4A_7C15 ^ (c + 1));
        while !self.stopped() {
            let from = choices.below(ACCOUNTS.into()) as u32;
            let to = (from + 1 + choices.below((ACCOUNTS - 1).into()) as u32) % ACCOUNTS;
            let amount = choices.below(50) as i64 + 1;
            match self.transfer(&accounts, from, to, amount) {
                Ok(()) => self.succeeded(),
                Err(error) => self.failed("a transfer", &error),
            }
            // Think time, so the reader of all sixteen gets its locks.
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Moves `amount` from `from` to `to` if `from` holds it.
    fn transfer(
        &self,
        accounts: &Arc<client::Table>,
        from: u32,
        to: u32,
        amount: i64,
    ) -> Result<(), ClientError> {
        let mut transaction = self.cluster.transaction();
        let (first, second) = (from.min(to), from.max(to));
        let mut balances = [0i64; 2];
        for (slot, k) in [first, second].into_iter().enumerate() {
            let op = transaction.read(accounts, &key(k), LockMode::Exclusive)?;
            transaction.execute(Commit::No)?;
            balances[slot] = transaction
                .get(op)
                .and_then(|row| row.get("v")?.as_i64())
                .expect("an account row has v");
        }
        let (from_balance, to_balance) = if first == from {
            (balances[0], balances[1])
        } else {
            (balances[1], balances[0])
        };
        if from_balance < amount {
            return transaction.rollback();
        }
        transaction.update(
            accounts,
            &key(from),
            &[("v", Value::Int(from_balance - amount))],
        )?;
        transaction.update(
            accounts,
            &key(to),
            &[("v", Value::Int(to_balance + amount))],
        )?;
        transaction.execute(Commit::Yes).map(|_| ())
    }

    fn balance_reads(&self) {
        let accounts = self.cluster.table("acct").expect("acct");
        let total = OPENING_BALANCE * i64::from(ACCOUNTS);
        while !self.stopped() {
            match read_balances(&self.cluster, &accounts, ACCOUNTS) {
                Ok(balances) => {
                    let sum: i64 = balances.iter().sum();
                    if sum != total || balances.iter().any(|&balance| balance < 0) {
                        self.anomaly(format!(
                            "a read saw {balances:?} (sum {sum}, total {total})"
                        ));
                    }
                    self.succeeded();
                }
                Err(error) => self.failed("a read of every balance", &error),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Inserts new keys, deletes present ones, inserts deleted ones
    /// again; returns what it knows of every key it touched.
    fn set_changes(&self, c: u64) -> Vec<(u64, KeyState)> {
        let table = self.cluster.table("kv").expect("kv");
        let mut keys: BTreeMap<u64, KeyState> = BTreeMap::new();
        let mut next = c * SET_STRIDE;
        let mut choices = stdx::mix::XorShift::new(0x51_7CC1_B727_220A ^ (c + 1));
        let pick = |keys: &BTreeMap<u64, KeyState>, wanted: KeyState, at: u64| {
            let matching: Vec<u64> = keys
                .iter()
                .filter(|&(_, &state)| state == wanted)
                .map(|(&k, _)| k)
                .collect();
            (!matching.is_empty()).then(|| matching[(at % matching.len() as u64) as usize])
        };
        while !self.stopped() {
            let roll = choices.below(100);
            let at = choices.next_u64();
            let (k, insert) = match roll {
                0..=24 => match pick(&keys, KeyState::Present, at) {
                    Some(k) => (k, false),
                    None => continue,
                },
                25..=39 => match pick(&keys, KeyState::Absent, at) {
                    Some(k) => (k, true),
                    None => continue,
                },
                _ => {
                    next += 1;
                    (next, true)
                }
            };
            let mut transaction = self.cluster.transaction();
            let queued = if insert {
                let text = format!("set {k}");
                transaction.insert(
                    &table,
                    &[("k", Value::UInt(k)), ("v", Value::from(text.as_str()))],
                )
            } else {
                transaction.delete(&table, &[Value::UInt(k)])
            };
            queued.expect("a valid operation");
            let known = keys.get(&k).copied();
            match transaction.execute(Commit::Yes) {
                Ok(_) => {
                    keys.insert(
                        k,
                        if insert {
                            KeyState::Present
                        } else {
                            KeyState::Absent
                        },
                    );
                    self.succeeded();
                }
                Err(error) if error.code() == Some(ErrorCode::DuplicateKey) => {
                    self.anomaly(format!(
                        "inserting key {k} ({known:?}) found a row: a deleted key came back"
                    ));
                }
                Err(error) if error.code() == Some(ErrorCode::NoSuchRow) => {
                    self.anomaly(format!(
                        "deleting key {k} ({known:?}) found no row: an acknowledged insert is lost"
                    ));
                }
                Err(error) => {
                    if error.is_outcome_unknown() {
                        keys.insert(k, KeyState::Unknown);
                    } else if known.is_none() {
                        // A new key that was not inserted: it must not
                        // appear.
                        keys.insert(k, KeyState::Absent);
                    }
                    self.failed(if insert { "an insert" } else { "a delete" }, &error);
                }
            }
        }
        keys.into_iter().collect()
    }
}

/// Runs `attempt` until it succeeds, retrying temporary errors.
fn settled<T>(what: &str, attempt: impl FnMut() -> Result<T, ClientError>) -> T {
    common::settled(what, PROGRESS_DEADLINE, attempt)
}

/// After the load: the balances still sum to the total, every key the
/// set clients know is as they know it, and the replicas agree.
fn check_final_state(cluster: &TestCluster, keys: &[(u64, KeyState)]) {
    let client = cluster.connect();
    let accounts = client.table("acct").expect("acct");
    let balances = settled("reading the balances", || {
        read_balances(&client, &accounts, ACCOUNTS)
    });
    assert_eq!(
        balances.iter().sum::<i64>(),
        OPENING_BALANCE * i64::from(ACCOUNTS),
        "{balances:?}"
    );
    let table = client.table("kv").expect("kv");
    let (mut present, mut absent) = (0, 0);
    for &(k, state) in keys {
        let found = settled(&format!("reading key {k}"), || {
            let mut transaction = client.transaction();
            let op = transaction.read(&table, &[Value::UInt(k)], LockMode::CommittedRead)?;
            match transaction.execute(Commit::Yes) {
                Ok(_) => Ok(transaction.get(op).is_some()),
                Err(error) if error.code() == Some(ErrorCode::NoSuchRow) => Ok(false),
                Err(error) => Err(error),
            }
        });
        match state {
            KeyState::Present => {
                assert!(found, "key {k}: an acknowledged insert is missing");
                present += 1;
            }
            KeyState::Absent => {
                assert!(!found, "key {k}: deleted (or never inserted), yet there");
                absent += 1;
            }
            KeyState::Unknown => {}
        }
    }
    eprintln!("load: {present} keys present and {absent} absent as acknowledged");
    assert!(present > 0 && absent > 0, "the set load did both");
    let report = settled("the replica check", || client.check_replicas());
    assert_eq!(report.mismatches, 0, "the replicas differ: {report}");
}

/// kill -9 of data node 3 of 2 under the load; its angel starts it again
/// (from its files), or, `initial`, the node and its angel are killed and
/// it is started again with `--initial`.
fn killed_under_load(name: &'static str, initial: bool) {
    let mut cluster = TestCluster::start(ClusterOptions {
        angels: true,
        ..ClusterOptions::pair(name)
    });
    let load = Load::start(&cluster, Errors::OutcomeUnknownToo);
    load.wait_for_progress(200, "before the kill");
    let (pid, count) = started_pid(&cluster, 3).expect("node 3 started");
    if initial {
        // The angel too (the node dies with it), then a new one, empty.
        send_signal(cluster.node_pid_of(3), libc::SIGKILL);
        let _ = cluster.wait_for_exit(3);
        cluster.spawn_data_node_with_angel(3, &["--initial"]);
    } else {
        send_signal(pid as u32, libc::SIGKILL);
    }
    let (_, new_count) = wait_started_again(&cluster, 3, pid);
    assert_eq!(new_count, count + 1, "one more start");
    let log = cluster.node_log_of(3);
    assert!(log.contains("node restart done"), "{log}");
    if initial {
        assert!(log.contains("--initial: deleted the node's files"), "{log}");
    } else {
        assert!(
            log.contains("the node died"),
            "the angel restarted it:\n{log}"
        );
    }
    load.wait_for_progress(200, "after the restart");
    let keys = load.stop();
    check_final_state(&cluster, &keys);
}

#[test]
fn bank_and_set_loads_survive_a_kill_and_angel_restart() {
    killed_under_load("load-kill-restart", false);
}

#[test]
fn bank_and_set_loads_survive_a_kill_and_initial_restart() {
    killed_under_load("load-kill-initial", true);
}

/// `all restart --wait` of 4 data nodes (2 groups of 2) under the load:
/// one node at a time stops gracefully and rejoins; every error the
/// clients see is temporary.
#[test]
fn a_rolling_restart_of_four_nodes_under_load_gives_only_temporary_errors() {
    let cluster = TestCluster::start(ClusterOptions {
        name: "load-rolling",
        data_nodes: 4,
        replicas: 2,
        angels: true,
        ..ClusterOptions::default()
    });
    let load = Load::start(&cluster, Errors::TemporaryOnly);
    load.wait_for_progress(200, "before the rolling restart");
    let before: Vec<u64> = cluster
        .node_ids()
        .into_iter()
        .map(|id| started_pid(&cluster, id).expect("started").1)
        .collect();
    let rolled = common::run_tessera(
        &[
            "mgm",
            "--mgmd",
            &cluster.mgmd_addr(),
            "-e",
            "all restart",
            "--wait",
        ],
        Duration::from_secs(900),
    );
    assert!(rolled.status.success(), "{rolled:?}");
    let after: Vec<u64> = cluster
        .node_ids()
        .into_iter()
        .map(|id| started_pid(&cluster, id).expect("started").1)
        .collect();
    assert_eq!(
        after,
        before.iter().map(|count| count + 1).collect::<Vec<_>>(),
        "every node started once more"
    );
    for id in cluster.node_ids() {
        let log = cluster.node_log_of(id);
        assert!(
            log.contains("every transaction of this node finished"),
            "{log}"
        );
    }
    load.wait_for_progress(200, "after the rolling restart");
    let keys = load.stop();
    check_final_state(&cluster, &keys);
}

/// 4 data nodes: node 3 of group 0 is killed and started again with
/// `--initial`; node 2, the only live node of group 0 and so the source
/// of every copy, crashes after sending a batch of its first partition
/// (fault point COPY_AFTER_BATCH). Group 0 then has no node holding its
/// data (node 3 had not finished), so by the survival rule nodes 4 and 5
/// shut down, and node 3 stops its restart. Readers all along never get
/// a wrong row. Started again, the cluster serves every row.
#[test]
fn a_copy_source_dying_mid_copy_stops_the_cluster_and_nothing_wrong_is_served() {
    let mut cluster = TestCluster::start(ClusterOptions {
        name: "load-copy-source-dies",
        data_nodes: 4,
        replicas: 2,
        data_memory: "64M",
        ..ClusterOptions::default()
    });
    assert_eq!(cluster.groups(), [vec![2, 3], vec![4, 5]]);
    const ROWS: u64 = 60_000;
    let client = cluster.connect();
    let table = create_table(&client, &kv_definition());
    for batch in 0..ROWS / 1_000 {
        let mut transaction = client.transaction();
        for k in batch * 1_000..(batch + 1) * 1_000 {
            let text = format!("value {k}");
            transaction
                .insert(
                    &table,
                    &[("k", Value::UInt(k)), ("v", Value::from(text.as_str()))],
                )
                .expect("a valid insert");
        }
        transaction.commit_durable().expect("the rows, durable");
    }
    drop(client);

    // Readers of random rows through every node: a row is its value or
    // an error, never anything else.
    let stop = Arc::new(AtomicBool::new(false));
    let wrong: Arc<Mutex<Vec<String>>> = Arc::default();
    let reads = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..2u64)
        .map(|r| {
            let (stop, wrong, reads) = (Arc::clone(&stop), Arc::clone(&wrong), Arc::clone(&reads));
            let client = cluster.connect();
            std::thread::spawn(move || {
                let table = client.table("kv").expect("kv");
                let mut choices = stdx::mix::XorShift::new(77 + r);
                while !stop.load(Ordering::Relaxed) {
                    let k = choices.below(ROWS);
                    let mut transaction = client.transaction();
                    let op = transaction
                        .read(&table, &[Value::UInt(k)], LockMode::CommittedRead)
                        .expect("a valid read");
                    match transaction.execute(Commit::Yes) {
                        Ok(_) => {
                            let value = transaction
                                .get(op)
                                .and_then(|row| row.get("v")?.as_str().map(String::from));
                            if value.as_deref() != Some(format!("value {k}").as_str()) {
                                wrong.lock().unwrap().push(format!("key {k}: {value:?}"));
                            }
                            reads.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(error) if error.code() == Some(ErrorCode::NoSuchRow) => {
                            wrong.lock().unwrap().push(format!("key {k}: no row"));
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
            })
        })
        .collect();

    send_signal(cluster.node_pid_of(3), libc::SIGKILL);
    let _ = cluster.wait_for_exit(3);
    cluster.wait_for_log(2, "without {3}");
    let armed = cluster.mgm_json("node 2 fault COPY_AFTER_BATCH");
    assert!(armed.status.success(), "{armed:?}");
    cluster.spawn_data_node_initial(3);

    let (status, log) = cluster.wait_for_exit(2);
    assert!(status.is_some(), "node 2 still runs:\n{log}");
    assert!(
        log.contains("fault point COPY_AFTER_BATCH reached"),
        "{log}"
    );
    for survivor in [4u16, 5] {
        let (status, log) = cluster.wait_for_exit(survivor);
        let status = status.unwrap_or_else(|| panic!("node {survivor} still runs:\n{log}"));
        assert_eq!(status.code(), Some(3), "node {survivor}:\n{log}");
        assert!(log.contains("has no node of node group 0"), "{log}");
    }
    let (status, log) = cluster.wait_for_exit(3);
    let status = status.unwrap_or_else(|| panic!("node 3 still runs:\n{log}"));
    assert_eq!(status.code(), Some(3), "node 3:\n{log}");
    assert!(!log.contains("node restart done"), "{log}");
    stop.store(true, Ordering::SeqCst);
    for reader in readers {
        reader.join().expect("a reader");
    }
    let wrong = wrong.lock().unwrap();
    assert!(wrong.is_empty(), "wrong rows served: {wrong:?}");
    eprintln!(
        "copy source: {} reads, none wrong",
        reads.load(Ordering::Relaxed)
    );
    let show = cluster.show();
    for id in [4u64, 5] {
        let node = data_node(&show, id).expect("in show");
        assert_eq!(node["state"], "shut_down", "{show}");
    }

    // Every node started again: node 3, which voided its files when its
    // copy began, is stale and leaves; the others restore every row.
    // Started once more, node 3 rejoins by a node restart.
    for id in [2u16, 4, 5, 3] {
        cluster.spawn_data_node(id);
    }
    let (status, log) = cluster.wait_for_exit(3);
    let status = status.unwrap_or_else(|| panic!("node 3 still runs:\n{log}"));
    assert_eq!(status.code(), Some(3), "node 3:\n{log}");
    assert!(log.contains("needs a node restart"), "{log}");
    for id in [2u16, 4, 5] {
        cluster.wait_until_started(id);
    }
    cluster.spawn_data_node(3);
    cluster.wait_until_started(3);
    let client = cluster.connect();
    let table = client.table("kv").expect("kv");
    for k in (0..ROWS).step_by(7) {
        let row = settled(&format!("reading key {k}"), || {
            common::read_row(&client, &table, &[Value::UInt(k)])
        });
        assert_eq!(
            row.get("v").and_then(Value::as_str),
            Some(format!("value {k}").as_str()),
            "key {k}"
        );
    }
    let report = settled("the replica check", || client.check_replicas());
    assert_eq!(report.mismatches, 0, "the replicas differ: {report}");
}
