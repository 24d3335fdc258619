//! A data node killed under a bank workload, against real processes
//! (docs/design/failures.md §6-§8): 2 data nodes with 2 replicas, 16
//! accounts with a fixed total, several API nodes moving money between
//! two accounts at a time, and one reading every balance under shared
//! locks (the sum must always be the total, no balance negative). Once
//! every client has made progress, one data node gets SIGKILL: the
//! master (node 2, the president: the GCI switch, durability rounds and
//! schema changes move to node 3) or the other one.
//!
//! Each transfer also inserts a row naming itself, so the final state
//! tells which transfers committed: every one a client saw acknowledged
//! must be there, none that failed before its commit was sent or was
//! refused, and every balance must be what the transfers present make it.
//! Every client must succeed again after the kill (retrying on errors),
//! a new client must connect with the node down, every row must be
//! writable (no lock left by a transaction the kill caught), and a write
//! committed after the kill must become durable (global checkpoints go
//! on). Nothing here asserts a timing: the deadlines are generous upper
//! bounds for a loaded 2-core machine.
//!
//! Transfer clients pause briefly between transfers: without it they keep
//! the sixteen accounts locked all the time and the reader, which needs
//! all of them at once, starves on lock wait timeouts (the row locks are
//! not fair to a waiter of many rows), with or without a failure.

mod common;

use client::{ClientError, Cluster, Commit, LockMode, Value};
use common::{
    acct_definition, create_table, data_node, key, kv_definition, read_balances, send_signal,
    write_settled, ClusterOptions, TestCluster,
};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

const ACCOUNTS: u32 = 16;
const OPENING_BALANCE: i64 = 1_000;
const TRANSFER_CLIENTS: u32 = 3;

/// Successes each client must have before the kill, and again after it.
const PROGRESS: u32 = 20;

/// A transfer client's pause after each transfer.
const THINK_TIME: Duration = Duration::from_millis(5);

/// Upper bound for the load to make its progress after the kill.
const AFTER_KILL_DEADLINE: Duration = Duration::from_secs(90);

/// Transfer record keys: client `c`'s transfer `n` is `c * STRIDE + n`.
const STRIDE: u32 = 1_000_000;

/// What a client saw of one transfer.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Seen {
    /// The commit succeeded.
    Acknowledged,
    /// Failed before the commit was sent, or the data node refused it: it
    /// must not be in the final state.
    Failed,
    /// The commit was sent and its answer lost: either way.
    Unknown,
    /// The source account held too little: nothing written.
    Skipped,
}

#[derive(Clone, Copy, Debug)]
struct Transfer {
    record: u32,
    from: u32,
    to: u32,
    amount: i64,
    seen: Seen,
}

/// What each client thread did, for the checks at the end.
#[derive(Default)]
struct ClientLog {
    transfers: Vec<Transfer>,
    successes_after_kill: u32,
    errors: Vec<String>,
}

/// Moves `amount` from `from` to `to` (locking the lower account first,
/// so transfers never deadlock each other) and inserts record `record`.
fn transfer(
    cluster: &Cluster,
    accounts: &Arc<client::Table>,
    records: &Arc<client::Table>,
    (record, from, to, amount): (u32, u32, u32, i64),
) -> (Seen, Option<ClientError>) {
    let mut transaction = cluster.transaction();
    let mut read = |k: u32| -> Result<i64, ClientError> {
        let op = transaction.read(accounts, &key(k), LockMode::Exclusive)?;
        transaction.execute(Commit::No)?;
        Ok(transaction
            .get(op)
            .and_then(|row| row.get("v")?.as_i64())
            .expect("an account row has v"))
    };
    let (first, second) = (from.min(to), from.max(to));
    let balances = read(first).and_then(|a| Ok((a, read(second)?)));
    let (from_balance, to_balance) = match balances {
        Ok((a, b)) if first == from => (a, b),
        Ok((a, b)) => (b, a),
        Err(error) => return (Seen::Failed, Some(error)),
    };
    if from_balance < amount {
        let _ = transaction.rollback();
        return (Seen::Skipped, None);
    }
    let queued = transaction
        .update(
            accounts,
            &key(from),
            &[("v", Value::Int(from_balance - amount))],
        )
        .and_then(|_| {
            transaction.update(
                accounts,
                &key(to),
                &[("v", Value::Int(to_balance + amount))],
            )
        })
        .and_then(|_| {
            let text = format!("{from} {to} {amount}");
            transaction.insert(
                records,
                &[
                    ("k", Value::UInt(record.into())),
                    ("v", Value::from(text.as_str())),
                ],
            )
        });
    if let Err(error) = queued {
        return (Seen::Failed, Some(error));
    }
    match transaction.execute(Commit::Yes) {
        Ok(_) => (Seen::Acknowledged, None),
        // The data node answered: the transaction was aborted.
        Err(error @ (ClientError::Operation { .. } | ClientError::DuplicateKey { .. })) => {
            (Seen::Failed, Some(error))
        }
        Err(error) => (Seen::Unknown, Some(error)),
    }
}

/// Record `k`'s text, or `None` when it is not there (read alone, so a
/// missing row fails only its own read).
fn read_record(cluster: &Cluster, records: &Arc<client::Table>, k: u32) -> Option<String> {
    for attempt in 1.. {
        let mut transaction = cluster.transaction();
        let op = transaction
            .read(records, &key(k), LockMode::Shared)
            .expect("a valid read");
        match transaction.execute(Commit::Yes) {
            Ok(_) => {
                return transaction
                    .get(op)
                    .and_then(|row| row.get("v")?.as_str().map(String::from))
            }
            Err(error) if error.code() == Some(client::ErrorCode::NoSuchRow) => return None,
            Err(error) if attempt < 20 && error.is_temporary() => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(error) => panic!("reading record {k} after the failover: {error}"),
        }
    }
    unreachable!()
}

/// Runs the bank, kills `victim` once every client made progress, and
/// checks everything the module doc lists.
fn bank_survives_the_kill_of(victim: u16, name: &'static str) {
    let mut cluster = TestCluster::start(ClusterOptions::pair(name));
    let survivor = if victim == 2 { 3 } else { 2 };
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
    let total = OPENING_BALANCE * i64::from(ACCOUNTS);

    let killed = AtomicBool::new(false);
    // Clients (and the reader) that succeeded PROGRESS times after the kill.
    let progressed = AtomicU32::new(0);
    let stop = AtomicBool::new(false);
    // Every client (and the reader) made PROGRESS before the kill.
    let ready = Barrier::new(TRANSFER_CLIENTS as usize + 2);
    let anomalies = Mutex::new(Vec::<String>::new());
    let mgmd = cluster.mgmd_addr();
    let (logs, reads_after_kill, kill_at) = std::thread::scope(|scope| {
        let clients: Vec<_> = (0..TRANSFER_CLIENTS)
            .map(|c| {
                let (killed, stop, ready, mgmd, progressed) =
                    (&killed, &stop, &ready, &mgmd, &progressed);
                scope.spawn(move || {
                    let cluster = Cluster::connect(mgmd).expect("a client connects");
                    let accounts = cluster.table("acct").expect("acct");
                    let records = cluster.table("kv").expect("kv");
                    let mut choices =
                        stdx::mix::XorShift::new(0x9E37_79B9_7F4A_7C15 ^ u64::from(c + 1));
                    let mut log = ClientLog::default();
                    let mut before = 0;
                    for n in 0.. {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let from = choices.below(ACCOUNTS.into()) as u32;
                        let to =
                            (from + 1 + choices.below((ACCOUNTS - 1).into()) as u32) % ACCOUNTS;
                        let amount = choices.below(50) as i64 + 1;
                        let record = c * STRIDE + n;
                        let after_kill = killed.load(Ordering::Relaxed);
                        let (seen, error) =
                            transfer(&cluster, &accounts, &records, (record, from, to, amount));
                        log.transfers.push(Transfer {
                            record,
                            from,
                            to,
                            amount,
                            seen,
                        });
                        match error {
                            None if after_kill => {
                                log.successes_after_kill += 1;
                                if log.successes_after_kill == PROGRESS {
                                    progressed.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                            None => {
                                before += 1;
                                if before == PROGRESS {
                                    ready.wait();
                                }
                            }
                            Some(error) => {
                                log.errors.push(format!("{}: {error}", error.label()));
                                std::thread::sleep(Duration::from_millis(20));
                            }
                        }
                        // Think time: without it three clients keep every
                        // account locked, and the reader of all balances
                        // (which waits for all sixteen) starves.
                        std::thread::sleep(THINK_TIME);
                    }
                    log
                })
            })
            .collect();
        let reader = {
            let (killed, stop, ready, mgmd, anomalies, progressed) =
                (&killed, &stop, &ready, &mgmd, &anomalies, &progressed);
            scope.spawn(move || {
                let cluster = Cluster::connect(mgmd).expect("the reader connects");
                let accounts = cluster.table("acct").expect("acct");
                let (mut before, mut after, mut failures) = (0, 0, 0);
                while !stop.load(Ordering::Relaxed) {
                    let after_kill = killed.load(Ordering::Relaxed);
                    match read_balances(&cluster, &accounts, ACCOUNTS) {
                        Ok(balances) => {
                            let sum: i64 = balances.iter().sum();
                            if sum != total || balances.iter().any(|&b| b < 0) {
                                anomalies.lock().unwrap().push(format!(
                                    "a read saw {balances:?} (sum {sum}, total {total})"
                                ));
                            }
                            if after_kill {
                                after += 1;
                                if after == PROGRESS {
                                    progressed.fetch_add(1, Ordering::Relaxed);
                                }
                            } else {
                                before += 1;
                                if before == PROGRESS {
                                    ready.wait();
                                }
                            }
                        }
                        Err(_) => failures += 1,
                    }
                    // Reads of every balance under shared locks deadlock
                    // with transfers now and then (each ends by the lock
                    // wait timeout); a pause keeps the reader from
                    // holding the whole table all the time.
                    std::thread::sleep(Duration::from_millis(50));
                }
                eprintln!("failover: the reader's reads that failed: {failures}");
                after
            })
        };
        let load_start = Instant::now();
        ready.wait();
        eprintln!(
            "failover: every client made {PROGRESS} transactions in {:?}",
            load_start.elapsed()
        );
        let pid = cluster.node_pid_of(victim);
        send_signal(pid, libc::SIGKILL);
        let kill_at = Instant::now();
        killed.store(true, Ordering::Relaxed);
        eprintln!("failover: SIGKILL to data node {victim} (pid {pid})");
        // The load goes on until every client (and the reader) succeeded
        // PROGRESS times after the kill, or the deadline passed (the
        // checks below then say who did not).
        while progressed.load(Ordering::Relaxed) < TRANSFER_CLIENTS + 1
            && kill_at.elapsed() < AFTER_KILL_DEADLINE
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!(
            "failover: every client made {PROGRESS} transactions after the kill in {:?}",
            kill_at.elapsed()
        );
        stop.store(true, Ordering::Relaxed);
        let logs: Vec<ClientLog> = clients
            .into_iter()
            .map(|client| client.join().expect("a client thread"))
            .collect();
        (logs, reader.join().expect("the reader thread"), kill_at)
    });
    eprintln!(
        "failover: load stopped {:?} after the kill",
        kill_at.elapsed()
    );
    let anomalies = anomalies.into_inner().unwrap();
    assert!(anomalies.is_empty(), "balance reads: {anomalies:#?}");
    for (c, log) in logs.iter().enumerate() {
        assert!(
            log.successes_after_kill >= PROGRESS,
            "client {c} succeeded {} times after the kill within {AFTER_KILL_DEADLINE:?}; \
             its errors: {:?}",
            log.successes_after_kill,
            log.errors
        );
    }
    assert!(
        reads_after_kill >= PROGRESS,
        "{reads_after_kill} balance reads succeeded after the kill"
    );

    // The victim is gone and mgmd says so; the survivor serves.
    assert!(!cluster.node_is_running_of(victim), "the victim runs");
    assert!(
        cluster.node_is_running_of(survivor),
        "the survivor exited:\n{}",
        cluster.node_log_of(survivor)
    );
    let show = cluster.show();
    let state = |id: u16| data_node(&show, id.into()).map(|node| node["state"].clone());
    assert_eq!(state(victim), Some("failed".into()), "{show}");
    assert_eq!(state(survivor), Some("started".into()), "{show}");

    // A new client connects with the node down, and sees every transfer
    // acknowledged, none that failed, and balances that match.
    let checker = cluster.connect();
    let accounts = checker.table("acct").expect("acct");
    let records = checker.table("kv").expect("kv");
    let mut expected = vec![OPENING_BALANCE; ACCOUNTS as usize];
    let mut unknown = 0;
    for transfer in logs.iter().flat_map(|log| &log.transfers) {
        let found = read_record(&checker, &records, transfer.record);
        match (transfer.seen, &found) {
            (Seen::Acknowledged, None) => {
                panic!("acknowledged transfer {transfer:?} is lost")
            }
            (Seen::Failed | Seen::Skipped, Some(_)) => {
                panic!("transfer {transfer:?} failed, yet it committed")
            }
            (Seen::Unknown, _) => unknown += 1,
            _ => {}
        }
        if let Some(text) = found {
            let wanted = format!("{} {} {}", transfer.from, transfer.to, transfer.amount);
            assert_eq!(text, wanted, "transfer {transfer:?}");
            expected[transfer.from as usize] -= transfer.amount;
            expected[transfer.to as usize] += transfer.amount;
        }
    }
    let balances = read_balances(&checker, &accounts, ACCOUNTS).expect("the final balances");
    assert_eq!(
        balances, expected,
        "balances agree with the transfers that committed"
    );
    let acknowledged = logs
        .iter()
        .flat_map(|log| &log.transfers)
        .filter(|transfer| transfer.seen == Seen::Acknowledged)
        .count();
    eprintln!(
        "failover: {acknowledged} transfers acknowledged, {unknown} unknown; \
         each client's errors: {:?}",
        logs.iter().map(|log| &log.errors).collect::<Vec<_>>()
    );

    // No lock left: every account is writable, and that write becomes
    // durable (the GCI switch and durability rounds go on).
    let mut transaction = checker.transaction();
    for (k, balance) in balances.iter().enumerate() {
        transaction
            .update(&accounts, &key(k as u32), &[("v", Value::Int(*balance))])
            .expect("a valid update");
    }
    transaction
        .commit_durable()
        .unwrap_or_else(|error| panic!("every account is writable and durable: {error}"));
    assert!(
        cluster.node_is_running_of(survivor),
        "the survivor exited:\n{}",
        cluster.node_log_of(survivor)
    );

    // The replica checker compares the live replicas and says which are
    // dead.
    let check = cluster.mgm_json("check replicas");
    let check: serde_json::Value = serde_json::from_str(check.stdout.trim())
        .unwrap_or_else(|error| panic!("check replicas printed no JSON ({error})"));
    assert_eq!(check["mismatches"], 0, "{check}");
    assert_eq!(check["dead_nodes"], serde_json::json!([victim]), "{check}");
    let text = cluster.mgm_text("check replicas");
    assert!(
        text.stdout
            .contains(&format!("the replicas on data node(s) [{victim}] are dead")),
        "{}",
        text.stdout
    );
}

#[test]
fn a_bank_survives_sigkill_of_the_master() {
    bank_survives_the_kill_of(2, "failover-master");
}

#[test]
fn a_bank_survives_sigkill_of_a_non_master() {
    bank_survives_the_kill_of(3, "failover-non-master");
}

/// A transaction coordinated by the node that dies holds exclusive locks
/// from reads on every account, between its batches: the survivor's
/// take-over must release them, so every account is writable through
/// the survivor afterwards.
#[test]
fn locks_held_by_a_killed_coordinator_are_released() {
    let cluster = TestCluster::start(ClusterOptions::pair("failover-locks"));
    let client = cluster.connect();
    let accounts = create_table(&client, &acct_definition());
    let mut opening = client.transaction();
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
    let (victim, survivor) = (3, 2);
    let mut holder = client
        .transaction_on_node(signal::NodeId(victim))
        .expect("a data node");
    for k in 0..ACCOUNTS {
        holder
            .read(&accounts, &key(k), LockMode::Exclusive)
            .expect("a valid read");
    }
    holder.execute(Commit::No).expect("the locks");
    send_signal(cluster.node_pid_of(victim), libc::SIGKILL);
    let deadline = Instant::now() + Duration::from_secs(60);
    for k in 0..ACCOUNTS {
        loop {
            let mut writer = client
                .transaction_on_node(signal::NodeId(survivor))
                .expect("a data node");
            writer
                .update(&accounts, &key(k), &[("v", Value::Int(1))])
                .expect("a valid update");
            match writer.execute(Commit::Yes) {
                Ok(_) => break,
                Err(error) if error.is_temporary() && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(error) => panic!(
                    "account {k} stays locked after node {victim} died: {error}\n{}",
                    cluster.node_log_of(survivor)
                ),
            }
        }
    }
    drop(holder);
    let log = cluster.node_log_of(survivor);
    for line in log.lines().filter(|line| line.contains("took over")) {
        eprintln!("failover: node {survivor}: {line}");
    }
}

/// 4 data nodes in 2 node groups of 2: one node of each group dies in
/// turn and the cluster carries on, every row written before still
/// there; then the last node of one group dies, and the survivor shuts
/// down, saying that a node group has no node left.
#[test]
fn four_nodes_survive_one_node_per_group_and_stop_without_a_whole_group() {
    let mut cluster = TestCluster::start(ClusterOptions {
        name: "failover-groups",
        data_nodes: 4,
        replicas: 2,
        ..ClusterOptions::default()
    });
    let groups = cluster.groups();
    let client = cluster.connect();
    let table = create_table(&client, &kv_definition());
    let deadline = || Instant::now() + Duration::from_secs(60);
    let mut written = 0;
    for victim in [groups[0][1], groups[1][1]] {
        for _ in 0..50 {
            write_settled(&client, &table, written, deadline());
            written += 1;
        }
        send_signal(cluster.node_pid_of(victim), libc::SIGKILL);
        // Writes go on through the failure, in every partition.
        for _ in 0..50 {
            write_settled(&client, &table, written, deadline());
            written += 1;
        }
        for k in 0..written {
            let row = common::read_row(&client, &table, &key(k))
                .unwrap_or_else(|error| panic!("row {k} after node {victim} died: {error}"));
            assert_eq!(
                row.get("v").and_then(Value::as_str),
                Some(format!("value {k}").as_str()),
                "row {k}"
            );
        }
    }
    // The last node of group 0: group 1's survivor has no copy of
    // group 0's partitions, so it stops rather than serve half the data.
    let (last, survivor) = (groups[0][0], groups[1][0]);
    send_signal(cluster.node_pid_of(last), libc::SIGKILL);
    let (status, log) = cluster.wait_for_exit(survivor);
    let status = status.unwrap_or_else(|| panic!("node {survivor} still runs:\n{log}"));
    assert_eq!(status.code(), Some(3), "the shutdown exit code:\n{log}");
    assert!(
        log.contains("has no node of node group 0"),
        "node {survivor} says why it shut down:\n{log}"
    );
    let show = cluster.show();
    let node = data_node(&show, survivor.into()).expect("the survivor in show");
    assert_eq!(node["state"], "shut_down", "{show}");
    assert!(
        node["shutdown_reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("node group 0")),
        "{show}"
    );
}

/// SIGSTOP one data node of 2 past the detection time, overwrite every
/// key through the other (which the arbitrator lets continue), then send
/// a read through the stopped node and SIGCONT it: the read gets an
/// error, never the old values, and the node finds it was declared
/// failed and exits.
#[test]
fn a_stopped_node_never_serves_a_stale_read_and_exits_when_it_runs_again() {
    let mut cluster = TestCluster::start(ClusterOptions::pair("failover-sigstop"));
    let (stopped, survivor) = (3u16, 2u16);
    let client = cluster.connect();
    let table = create_table(&client, &kv_definition());
    let deadline = || Instant::now() + Duration::from_secs(60);
    for k in 0..8 {
        write_settled(&client, &table, k, deadline());
    }
    // A client that would wait ten minutes for a reply.
    let patient = Cluster::connect_with(
        &cluster.mgmd_addr(),
        client::ConnectOptions {
            reply_timeout: Duration::from_secs(600),
            ..client::ConnectOptions::default()
        },
    )
    .expect("a client connects");
    let patient_table = patient.table("kv").expect("kv");
    let pid = cluster.node_pid_of(stopped);
    common::stop_process(pid);
    // Its write through the stopped node waits there, until the survivor
    // tells the client that the cluster agreed the node failed.
    let (answered, answer) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let mut transaction = patient
            .transaction_on_node(signal::NodeId(stopped))
            .expect("a data node");
        let result = transaction
            .write(
                &patient_table,
                &[("k", Value::UInt(100)), ("v", Value::from("waiting"))],
            )
            .and_then(|_| transaction.execute(Commit::Yes));
        let _ = answered.send(result.map(|_| ()).map_err(|error| error.to_string()));
    });
    let waited = answer
        .recv_timeout(Duration::from_secs(60))
        .expect("the client hears of the failure long before its reply timeout");
    let error = waited.expect_err("a commit through a stopped node cannot succeed");
    assert!(
        error.contains(&format!("data node {stopped} failed")),
        "{error}"
    );
    waiter.join().expect("the waiter");
    // Until the survivor agreed a membership without the stopped node.
    cluster.wait_for_log(survivor, &format!("without {{{stopped}}}"));
    for k in 0..8 {
        let until = deadline();
        loop {
            let mut transaction = client
                .transaction_on_node(signal::NodeId(survivor))
                .expect("a data node");
            transaction
                .update(&table, &key(k), &[("v", Value::from("new"))])
                .expect("a valid update");
            match transaction.execute(Commit::Yes) {
                Ok(_) => break,
                Err(error) if error.is_temporary() && Instant::now() < until => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(error) => panic!("overwriting {k} on node {survivor}: {error}"),
            }
        }
    }
    let read = std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            let mut transaction = client
                .transaction_on_node(signal::NodeId(stopped))
                .expect("a data node");
            let ops: Vec<_> = (0..8)
                .map(|k| {
                    transaction
                        .read(&table, &key(k), LockMode::CommittedRead)
                        .expect("a valid read")
                })
                .collect();
            transaction.execute(Commit::Yes).map(|_| {
                ops.into_iter()
                    .map(|op| {
                        transaction
                            .get(op)
                            .and_then(|row| row.get("v")?.as_str().map(String::from))
                    })
                    .collect::<Vec<_>>()
            })
        });
        // The read waits in the stopped node's socket.
        std::thread::sleep(Duration::from_millis(500));
        send_signal(pid, libc::SIGCONT);
        reader.join().expect("the reader thread")
    });
    match read {
        Ok(values) => {
            panic!("node {stopped} answered a read after it was declared failed: {values:?}")
        }
        Err(error) => eprintln!("failover: the read through the stopped node: {error}"),
    }
    let (status, log) = cluster.wait_for_exit(stopped);
    let status = status.unwrap_or_else(|| panic!("node {stopped} still runs:\n{log}"));
    assert_eq!(status.code(), Some(3), "the shutdown exit code:\n{log}");
    assert!(log.contains("shutting down"), "{log}");
    // The survivor serves the new values.
    for k in 0..8 {
        let row = common::read_row(&client, &table, &key(k)).expect("a read");
        assert_eq!(row.get("v").and_then(Value::as_str), Some("new"), "key {k}");
    }
}

/// A node dies; the survivor commits more, durably; then the whole
/// cluster dies and both nodes start again. The node that died first has
/// older data (its system file's GCI is below the one the survivor made
/// durable, and the survivor's file records it was not alive then): it
/// takes no part and exits saying it needs a node restart, and the
/// survivor starts alone (the arbitrator lets it) with every commit it
/// made durable. Started once more, the older node rejoins by a node
/// restart and holds what the survivor holds.
#[test]
fn a_whole_cluster_restart_after_a_node_failure_starts_without_the_older_copy() {
    let mut cluster = TestCluster::start(ClusterOptions::pair("failover-stale-restart"));
    let (first, survivor) = (3u16, 2u16);
    let client = cluster.connect();
    let table = create_table(&client, &kv_definition());
    let mut transaction = client.transaction();
    for k in 0..16 {
        transaction
            .write(&table, &[("k", Value::UInt(k)), ("v", Value::from("old"))])
            .expect("a valid write");
    }
    transaction
        .commit_durable()
        .expect("the old values, durable");
    drop(transaction);
    send_signal(cluster.node_pid_of(first), libc::SIGKILL);
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let mut transaction = client
            .transaction_on_node(signal::NodeId(survivor))
            .expect("a data node");
        for k in 0..16 {
            transaction
                .write(&table, &[("k", Value::UInt(k)), ("v", Value::from("new"))])
                .expect("a valid write");
        }
        match transaction.commit_durable() {
            Ok(_) => break,
            Err(error) if Instant::now() < until => {
                eprintln!("failover: the new values: {error}; retrying");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(error) => panic!("the new values never committed durably: {error}"),
        }
    }
    drop(client);
    cluster.kill_data_nodes();
    cluster.spawn_data_node(survivor);
    cluster.spawn_data_node(first);
    let (status, log) = cluster.wait_for_exit(first);
    let status = status.unwrap_or_else(|| panic!("node {first} still runs:\n{log}"));
    assert_eq!(status.code(), Some(3), "the shutdown exit code:\n{log}");
    assert!(log.contains("needs a node restart"), "{log}");
    cluster.wait_until_started(survivor);
    let client = cluster.connect();
    let table = client.table("kv").expect("kv");
    for k in 0..16 {
        let row = common::read_row(&client, &table, &key(k as u32)).expect("a read");
        assert_eq!(row.get("v").and_then(Value::as_str), Some("new"), "key {k}");
    }
    drop(client);
    // Started again, the stale node rejoins by a node restart: it
    // copies the new values and holds what the survivor holds.
    cluster.spawn_data_node(first);
    cluster.wait_until_started(first);
    let log = cluster.node_log_of(first);
    assert!(log.contains("node restart done"), "{log}");
    let client = cluster.connect();
    // The survivor formed the cluster alone: it runs heartbeats with the
    // node that joined, so its read lease holds and it serves reads (it
    // once never started them, and refused every read from here on).
    let table = client.table("kv").expect("kv");
    for k in 0..16 {
        let row = common::read_row(&client, &table, &key(k as u32)).expect("a read");
        assert_eq!(row.get("v").and_then(Value::as_str), Some("new"), "key {k}");
    }
    let report = client.check_replicas().expect("the replica check");
    assert_eq!(report.mismatches, 0, "the replicas differ: {report}");
}
