//! Coordinator take-over (docs/design/failures.md §7): transfers between
//! accounts coordinated by one data node, which dies mid-stream. The
//! real client against the real blocks of a simulated cluster
//! (`sim::harness`). Each transfer also inserts a row naming itself, so
//! the final state tells which transfers committed: every one the client
//! saw acknowledged must be there, none it saw fail, and every balance
//! must be what the transfers present make it. Every row must be
//! writable afterwards (no lock left held by a dead coordinator), global
//! checkpoints must go on being made durable (the master dih held them
//! only until the take-over finished), and a table can be created. In
//! even seeds the coordinator is the president, so the GCI switch, the
//! durability rounds and schema changes are taken over too.

use client::{ClientError, Cluster, Commit, LockMode, Value};
use signal::NodeId;
use sim::harness::{create_kv_table, Harness};
use std::sync::Arc;
use std::time::Duration;

/// Long enough for the default heartbeats (250 ms, 4 missed) to declare
/// a node dead and for the survivors to agree it and take over.
const DETECTION: Duration = Duration::from_millis(2_500);

const ACCOUNTS: u64 = 6;
const OPENING_BALANCE: i64 = 100;

/// What the client saw of one transfer.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Seen {
    Acknowledged,
    Failed,
    Unknown,
}

#[derive(Clone, Copy, Debug)]
struct Transfer {
    from: u64,
    to: u64,
    amount: i64,
    seen: Seen,
}

fn balance_text(balance: i64) -> Value {
    Value::from(balance.to_string().as_str())
}

/// Moves `amount` from `from` to `to` and records transfer `n`, in one
/// transaction coordinated by `coordinator`.
fn transfer(
    cluster: &Cluster,
    accounts: &Arc<client::Table>,
    transfers: &Arc<client::Table>,
    coordinator: NodeId,
    (n, from, to, amount): (u64, u64, u64, i64),
) -> Result<(), ClientError> {
    let mut transaction = cluster.transaction_on_node(coordinator)?;
    let from_op = transaction.read(accounts, &[Value::UInt(from)], LockMode::Exclusive)?;
    let to_op = transaction.read(accounts, &[Value::UInt(to)], LockMode::Exclusive)?;
    transaction.execute(Commit::No)?;
    let balance = |op| -> i64 {
        transaction
            .get(op)
            .and_then(|row| row.get("v")?.as_str().map(String::from))
            .expect("an account row")
            .parse()
            .expect("a balance")
    };
    let (from_balance, to_balance) = (balance(from_op), balance(to_op));
    transaction.update(
        accounts,
        &[Value::UInt(from)],
        &[("v", balance_text(from_balance - amount))],
    )?;
    transaction.update(
        accounts,
        &[Value::UInt(to)],
        &[("v", balance_text(to_balance + amount))],
    )?;
    let record = format!("{from} {to} {amount}");
    transaction.insert(
        transfers,
        &[("k", Value::UInt(n)), ("v", Value::from(record.as_str()))],
    )?;
    transaction.execute(Commit::Yes).map(|_| ())
}

/// Inserts every account with the opening balance, in one transaction
/// coordinated by `coordinator` (any node when `None`).
fn open_accounts(cluster: &Cluster, accounts: &Arc<client::Table>, coordinator: Option<NodeId>) {
    let mut opening = match coordinator {
        Some(node) => cluster.transaction_on_node(node).unwrap(),
        None => cluster.transaction(),
    };
    for a in 0..ACCOUNTS {
        opening
            .insert(
                accounts,
                &[("k", Value::UInt(a)), ("v", balance_text(OPENING_BALANCE))],
            )
            .unwrap();
    }
    opening.execute(Commit::Yes).unwrap();
}

/// Operations per transaction in the checks (below the per-transaction
/// limit).
const BATCH: usize = 100;

/// Every row of `table` with a key below `count`, read under shared locks
/// through `coordinator`, in transactions of [`BATCH`] keys.
fn read_all(
    cluster: &Cluster,
    table: &Arc<client::Table>,
    count: u64,
    coordinator: NodeId,
) -> Vec<Option<String>> {
    let keys: Vec<u64> = (0..count).collect();
    keys.chunks(BATCH)
        .flat_map(|chunk| read_keys(cluster, table, chunk, coordinator))
        .collect()
}

/// The rows of `keys` in one transaction (or one each, when some are
/// missing).
fn read_keys(
    cluster: &Cluster,
    table: &Arc<client::Table>,
    keys: &[u64],
    coordinator: NodeId,
) -> Vec<Option<String>> {
    let mut transaction = cluster.transaction_on_node(coordinator).unwrap();
    let ops: Vec<_> = keys
        .iter()
        .map(|&k| {
            transaction
                .read(table, &[Value::UInt(k)], LockMode::Shared)
                .unwrap()
        })
        .collect();
    // A missing row fails the batch: read one by one then.
    match transaction.execute(Commit::Yes) {
        Ok(_) => ops
            .into_iter()
            .map(|op| {
                transaction
                    .get(op)
                    .and_then(|row| row.get("v")?.as_str().map(String::from))
            })
            .collect(),
        Err(_) => keys
            .iter()
            .map(|&k| {
                let mut transaction = cluster.transaction_on_node(coordinator).unwrap();
                let op = transaction
                    .read(table, &[Value::UInt(k)], LockMode::Shared)
                    .unwrap();
                match transaction.execute(Commit::Yes) {
                    Ok(_) => transaction
                        .get(op)
                        .and_then(|row| row.get("v")?.as_str().map(String::from)),
                    Err(error) if error.code() == Some(client::ErrorCode::NoSuchRow) => None,
                    Err(error) => panic!("reading key {k}: {error}"),
                }
            })
            .collect(),
    }
}

#[test]
fn transactions_of_a_killed_coordinator_end_one_way_and_release_their_locks() {
    let mut caught = 0;
    for seed in 1..=16 {
        // Three nodes of one group (2, 3, 4): the coordinator dies. Node 3
        // (odd seeds): node 2, the president, takes its transactions over.
        // Node 2, the president and master (even seeds): node 3 becomes
        // both, and takes over the GCI switch too.
        let victim = NodeId(if seed % 2 == 1 { 3 } else { 2 });
        let survivor = NodeId(if seed % 2 == 1 { 2 } else { 3 });
        let kill_at_us = 600_000 + seed * 7_919;
        let (transfers_seen, balances, records, durable, gci_after) = Harness::new(seed)
            .nodes(3, 3)
            .kill_at(victim, kill_at_us)
            .run(move |cluster, context| {
                let accounts = create_kv_table(cluster, "accounts");
                let transfers = create_kv_table(cluster, "transfers");
                open_accounts(cluster, &accounts, Some(survivor));
                let mut seen = Vec::new();
                for n in 0..10_000u64 {
                    let from = n % ACCOUNTS;
                    let to = (from + 1 + n / ACCOUNTS % (ACCOUNTS - 1)) % ACCOUNTS;
                    let amount = (n % 7 + 1) as i64;
                    let result = transfer(
                        cluster,
                        &accounts,
                        &transfers,
                        victim,
                        (n, from, to, amount),
                    );
                    let seen_now = match &result {
                        Ok(()) => Seen::Acknowledged,
                        Err(error) if error.is_outcome_unknown() => Seen::Unknown,
                        Err(_) => Seen::Failed,
                    };
                    seen.push(Transfer {
                        from,
                        to,
                        amount,
                        seen: seen_now,
                    });
                    if context.now_us() >= kill_at_us && result.is_err() {
                        break; // The coordinator is gone.
                    }
                }
                context.sleep(DETECTION);
                // Schema changes go on (the president's dict is the master).
                let later = create_kv_table(cluster, "created_after_the_failure");
                let mut transaction = cluster.transaction_on_node(survivor).unwrap();
                transaction
                    .insert(&later, &[("k", Value::UInt(1)), ("v", Value::Null)])
                    .unwrap();
                transaction.execute(Commit::Yes).unwrap();
                // Every row writable again through each survivor.
                let count = seen.len() as u64;
                let balances = read_all(cluster, &accounts, ACCOUNTS, survivor);
                let records = read_all(cluster, &transfers, count, NodeId(4));
                for (k, balance) in balances.iter().enumerate() {
                    let mut transaction = cluster.transaction_on_node(NodeId(4)).unwrap();
                    let balance = balance.as_deref().expect("every account is there");
                    transaction
                        .update(
                            &accounts,
                            &[Value::UInt(k as u64)],
                            &[("v", Value::from(balance))],
                        )
                        .unwrap();
                    transaction.execute(Commit::Yes).unwrap_or_else(|error| {
                        panic!("account {k} stays locked after the take-over: {error}")
                    });
                }
                let mut gci_after = signal::Gci(0);
                for chunk in (0..count).collect::<Vec<_>>().chunks(BATCH) {
                    let mut transaction = cluster.transaction_on_node(survivor).unwrap();
                    for &k in chunk {
                        transaction
                            .write(&transfers, &[("k", Value::UInt(k)), ("v", Value::Null)])
                            .unwrap();
                    }
                    let outcome = transaction
                        .execute(Commit::Yes)
                        .unwrap_or_else(|error| panic!("a transfer row stays locked: {error}"));
                    gci_after = gci_after.max(outcome.gci.expect("writes commit in a GCI"));
                }
                let durable = cluster.wait_durable(gci_after).unwrap();
                (seen, balances, records, durable, gci_after)
            });
        assert!(
            durable >= gci_after,
            "seed {seed}: global checkpoints go on"
        );
        let mut expected = vec![OPENING_BALANCE; ACCOUNTS as usize];
        for (n, (transfer, record)) in transfers_seen.iter().zip(&records).enumerate() {
            match (transfer.seen, record) {
                (Seen::Acknowledged, None) => {
                    panic!("seed {seed}: acknowledged transfer {n} is lost")
                }
                (Seen::Failed, Some(_)) => {
                    panic!("seed {seed}: transfer {n} failed, yet committed")
                }
                _ => {}
            }
            if let Some(record) = record {
                let wanted = format!("{} {} {}", transfer.from, transfer.to, transfer.amount);
                assert_eq!(record, &wanted, "seed {seed}: transfer {n}");
                expected[transfer.from as usize] -= transfer.amount;
                expected[transfer.to as usize] += transfer.amount;
            }
        }
        let balances: Vec<i64> = balances
            .iter()
            .map(|balance| balance.as_deref().unwrap().parse().unwrap())
            .collect();
        assert_eq!(
            balances, expected,
            "seed {seed}: balances agree with the transfers committed ({transfers_seen:?})"
        );
        if transfers_seen
            .iter()
            .any(|transfer| transfer.seen == Seen::Unknown)
        {
            caught += 1;
        }
    }
    assert!(
        caught > 0,
        "in some seed the kill caught a transfer's commit in flight (else this tests nothing)"
    );
}

/// A transaction coordinated by the node that dies holds exclusive locks
/// from reads it executed (no commit asked yet, as a client between its
/// batches does): the take-over must release them, on the survivor's
/// replicas, whichever replica was primary. Two data nodes, so the
/// survivor continues through the arbitrator.
#[test]
fn locks_of_reads_held_by_a_killed_coordinator_are_released() {
    for seed in 1..=6 {
        let (victim, survivor) = if seed % 2 == 0 {
            (NodeId(2), NodeId(3))
        } else {
            (NodeId(3), NodeId(2))
        };
        let kill_at_us = 900_000;
        let outcome = Harness::new(seed)
            .nodes(2, 2)
            .kill_at(victim, kill_at_us)
            .run(move |cluster, context| {
                let accounts = create_kv_table(cluster, "accounts");
                open_accounts(cluster, &accounts, Some(survivor));
                // Every account locked by a transaction of the victim.
                let mut holder = cluster.transaction_on_node(victim).unwrap();
                for a in 0..ACCOUNTS {
                    holder
                        .read(&accounts, &[Value::UInt(a)], LockMode::Exclusive)
                        .unwrap();
                }
                holder.execute(Commit::No).unwrap();
                while context.now_us() < kill_at_us {
                    context.sleep(Duration::from_millis(20));
                }
                context.sleep(DETECTION);
                let mut results = Vec::new();
                for a in 0..ACCOUNTS {
                    let mut writer = cluster.transaction_on_node(survivor).unwrap();
                    writer
                        .update(&accounts, &[Value::UInt(a)], &[("v", balance_text(1))])
                        .unwrap();
                    results.push(
                        writer
                            .execute(Commit::Yes)
                            .map(|_| ())
                            .map_err(|e| e.to_string()),
                    );
                }
                drop(holder);
                results
            });
        for (a, result) in outcome.iter().enumerate() {
            assert!(
                result.is_ok(),
                "seed {seed}: account {a} stays locked after node {victim} died: {result:?}"
            );
        }
    }
}

/// Several clients move money between two accounts at a time (reads
/// under exclusive locks, then the writes and the commit, as the real
/// process test does), round robin over both data nodes, while one of
/// the two dies. Afterwards every account must be writable: no lock left
/// by a transaction the failure caught, on either coordinator.
#[test]
fn concurrent_transfers_across_a_node_death_leave_no_lock() {
    for seed in 1..=24 {
        let victim = NodeId(if seed % 2 == 0 { 2 } else { 3 });
        let survivor = NodeId(if seed % 2 == 0 { 3 } else { 2 });
        let kill_at_us = 1_500_000 + seed * 7_919;
        let results = Harness::new(seed)
            .nodes(2, 2)
            .kill_at(victim, kill_at_us)
            .run_clients(4, move |index, cluster, context| {
                if index == 0 {
                    let accounts = create_kv_table(cluster, "accounts");
                    create_kv_table(cluster, "transfers");
                    open_accounts(cluster, &accounts, None);
                }
                let (accounts, transfers) = loop {
                    match (cluster.table("accounts"), cluster.table("transfers")) {
                        (Ok(a), Ok(t)) => break (a, t),
                        _ => context.sleep(Duration::from_millis(50)),
                    }
                };
                context.sleep(Duration::from_millis(200));
                let mut n = u64::from(index) * 1_000_000;
                while context.now_us() < kill_at_us + DETECTION.as_micros() as u64 {
                    let from = context_below(context, ACCOUNTS);
                    let to = (from + 1 + context_below(context, ACCOUNTS - 1)) % ACCOUNTS;
                    let node = cluster.transaction().node();
                    let _ = transfer(cluster, &accounts, &transfers, node, (n, from, to, 1));
                    n += 1;
                }
                if index != 0 {
                    return Vec::new();
                }
                context.sleep(Duration::from_millis(500));
                write_every_account(cluster, &accounts, survivor)
            });
        for (a, result) in results[0].iter().enumerate() {
            assert!(
                result.is_ok(),
                "seed {seed}: account {a} stays locked after node {victim} died: {result:?}"
            );
        }
    }
}

fn context_below(context: &sim::hosted::HostedContext, bound: u64) -> u64 {
    context.now_us() % 7_919 * 31 % bound
}

/// A transaction coordinated by the survivor holds exclusive locks from
/// reads on both nodes' replicas, between its batches, when the other
/// node dies: its next batch must get an answer (the temporary
/// NodeFailureAbort, the failure caught it), never silence, and every
/// lock must be free afterwards.
#[test]
fn a_survivors_transaction_idle_across_a_node_death_gets_an_answer() {
    for seed in 1..=4 {
        let (victim, survivor) = if seed % 2 == 0 {
            (NodeId(2), NodeId(3))
        } else {
            (NodeId(3), NodeId(2))
        };
        let kill_at_us = 900_000;
        let (next_batch, writes) = Harness::new(seed)
            .nodes(2, 2)
            .kill_at(victim, kill_at_us)
            .connect_options(client::ConnectOptions {
                reply_timeout: Duration::from_secs(10),
                ..client::ConnectOptions::default()
            })
            .run(move |cluster, context| {
                let accounts = create_kv_table(cluster, "accounts");
                open_accounts(cluster, &accounts, Some(survivor));
                let mut holder = cluster.transaction_on_node(survivor).unwrap();
                for a in 0..ACCOUNTS {
                    holder
                        .read(&accounts, &[Value::UInt(a)], LockMode::Exclusive)
                        .unwrap();
                }
                holder.execute(Commit::No).unwrap();
                while context.now_us() < kill_at_us {
                    context.sleep(Duration::from_millis(20));
                }
                // A killed node's links break at once: the survivor has
                // agreed and handled the failure well within this, which
                // stays below the simulator's inactivity timeout (2 s).
                context.sleep(Duration::from_millis(600));
                holder
                    .update(&accounts, &[Value::UInt(0)], &[("v", balance_text(5))])
                    .unwrap();
                let next_batch = holder
                    .execute(Commit::Yes)
                    .map(|_| ())
                    .map_err(|e| e.to_string());
                let writes: Vec<Result<(), String>> = (0..ACCOUNTS)
                    .map(|a| {
                        let mut writer = cluster.transaction_on_node(survivor).unwrap();
                        writer
                            .update(&accounts, &[Value::UInt(a)], &[("v", balance_text(1))])
                            .unwrap();
                        writer
                            .execute(Commit::Yes)
                            .map(|_| ())
                            .map_err(|e| e.to_string())
                    })
                    .collect();
                (next_batch, writes)
            });
        if let Err(error) = &next_batch {
            assert!(
                error.contains("4010") || error.contains("node failure"),
                "seed {seed}: the next batch after node {victim} died: {error}"
            );
        }
        for (a, result) in writes.iter().enumerate() {
            assert!(
                result.is_ok(),
                "seed {seed}: account {a} stays locked: {result:?}"
            );
        }
    }
}

/// What one transfer left: how the client saw it, every balance, and
/// its record (present when it committed).
type OneTransfer = (Seen, Vec<Option<String>>, Vec<Option<String>>);

/// Client code: opens the accounts, moves 5 from account 0 to 1 through
/// `coordinator` (which a fault point stops mid-way), waits `wait` for
/// the failures to be agreed and taken over, reads what committed through
/// `survivor`, and writes every account (each must be free of locks).
fn one_transfer_through(
    cluster: &Cluster,
    context: &sim::hosted::HostedContext,
    (coordinator, survivor): (NodeId, NodeId),
    wait: Duration,
) -> OneTransfer {
    let accounts = create_kv_table(cluster, "accounts");
    let transfers = create_kv_table(cluster, "transfers");
    open_accounts(cluster, &accounts, Some(survivor));
    let result = transfer(cluster, &accounts, &transfers, coordinator, (0, 0, 1, 5));
    let seen = match &result {
        Ok(()) => Seen::Acknowledged,
        Err(error) if error.is_outcome_unknown() => Seen::Unknown,
        Err(_) => Seen::Failed,
    };
    context.sleep(wait);
    let balances = read_all(cluster, &accounts, ACCOUNTS, survivor);
    let records = read_all(cluster, &transfers, 1, survivor);
    for (a, written) in write_every_account(cluster, &accounts, survivor)
        .into_iter()
        .enumerate()
    {
        if let Err(error) = written {
            panic!("account {a} stays locked: {error}");
        }
    }
    (seen, balances, records)
}

/// Writes every account through `coordinator`, each in its own
/// transaction: what each write came to (an account still locked by a
/// transaction a failure caught times out).
fn write_every_account(
    cluster: &Cluster,
    accounts: &Arc<client::Table>,
    coordinator: NodeId,
) -> Vec<Result<(), String>> {
    (0..ACCOUNTS)
        .map(|a| {
            let mut writer = cluster.transaction_on_node(coordinator).unwrap();
            writer
                .update(accounts, &[Value::UInt(a)], &[("v", balance_text(1))])
                .unwrap();
            writer
                .execute(Commit::Yes)
                .map(|_| ())
                .map_err(|error| error.to_string())
        })
        .collect()
}

/// The transfer of [`one_transfer_through`] ended one way: committed if
/// the client heard so, not if it heard it failed, and both balances
/// agree with whether its record is there.
fn check_one_outcome(case: &str, (seen, balances, records): &OneTransfer) {
    let balance = |a: usize| -> i64 { balances[a].as_deref().unwrap().parse().unwrap() };
    let committed = records[0].is_some();
    match seen {
        Seen::Acknowledged => assert!(committed, "{case}: acknowledged, lost"),
        Seen::Failed => assert!(!committed, "{case}: failed, yet committed"),
        Seen::Unknown => {}
    }
    let expected = if committed {
        (OPENING_BALANCE - 5, OPENING_BALANCE + 5)
    } else {
        (OPENING_BALANCE, OPENING_BALANCE)
    };
    assert_eq!(
        (balance(0), balance(1)),
        expected,
        "{case}: one outcome on every account ({seen:?}, committed {committed})"
    );
}

/// Fault points on the coordinator's node, from the seed: the node dies
/// after every operation prepared, after its first COMMIT, or before
/// COMPLETE, in one of a run of transfers. The survivors finish it one
/// way (the checks of the first test of this file) and free its locks.
#[test]
fn a_coordinator_dying_at_each_fault_point_leaves_one_outcome() {
    use kernel::faults::FaultPoint;
    let points = [
        FaultPoint::TcAfterPrepare,
        FaultPoint::TcAfterFirstCommit,
        FaultPoint::TcBeforeComplete,
    ];
    for seed in 1..=9 {
        let point = points[seed as usize % points.len()];
        let (victim, survivor) = if seed % 2 == 0 {
            (NodeId(2), NodeId(3))
        } else {
            (NodeId(3), NodeId(2))
        };
        let outcome =
            Harness::new(seed)
                .nodes(2, 2)
                .fault(victim, point)
                .run(move |cluster, context| {
                    one_transfer_through(cluster, context, (victim, survivor), DETECTION)
                });
        check_one_outcome(&format!("seed {seed} {point:?}"), &outcome);
    }
}

/// The coordinator (node 4) dies in the middle of a transfer (at
/// TC_AFTER_FIRST_COMMIT or TC_AFTER_PREPARE), and the president taking
/// its transactions over (node 2) dies in the middle of that
/// (TAKEOVER_AFTER_QUERY: it asked the ldms; TAKEOVER_AFTER_DECISION: it
/// sent the outcomes). Two groups of two: the next president (node 3)
/// takes over both failed coordinators; the transfer ends one way on
/// every account, and no lock stays held.
#[test]
fn a_take_over_interrupted_by_the_death_of_its_president_is_finished_by_the_next() {
    use kernel::faults::FaultPoint;
    let cases = [
        (
            FaultPoint::TcAfterFirstCommit,
            FaultPoint::TakeoverAfterQuery,
        ),
        (
            FaultPoint::TcAfterFirstCommit,
            FaultPoint::TakeoverAfterDecision,
        ),
        (FaultPoint::TcAfterPrepare, FaultPoint::TakeoverAfterQuery),
        (
            FaultPoint::TcAfterPrepare,
            FaultPoint::TakeoverAfterDecision,
        ),
    ];
    for (seed, &(at_coordinator, at_takeover)) in (1..).zip(cases.iter()) {
        let (coordinator, survivor) = (NodeId(4), NodeId(3));
        let (outcome, fired) = Harness::new(seed)
            .nodes(4, 2)
            .fault(coordinator, at_coordinator)
            .fault(NodeId(2), at_takeover)
            .run_and_report(move |cluster, context| {
                one_transfer_through(cluster, context, (coordinator, survivor), DETECTION * 2)
            });
        let case = format!("seed {seed} {at_coordinator:?} then {at_takeover:?}");
        check_one_outcome(&case, &outcome);
        assert_eq!(
            fired,
            [(coordinator, at_coordinator), (NodeId(2), at_takeover)],
            "{case}: both points reached (else this tests nothing)"
        );
    }
}
