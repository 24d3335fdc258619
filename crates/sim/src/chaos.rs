//! Runs under random faults (docs/design/testing.md §5c): a cluster
//! shape, a transfer workload and a schedule of faults (`nemesis`), all
//! drawn from one seed, with the cluster's invariants checked after
//! every simulated step and the whole history checked at the end.
//!
//! The workload: clients (hosted API nodes running the production
//! client) move money between accounts; each transfer also inserts a
//! receipt row keyed by its id, so the final state tells which transfers
//! committed. Now and then a client reads every balance in one
//! transaction under shared locks: they must add up to the opening total
//! and none may be negative. Each transfer's outcome as the client saw it
//! is kept: acknowledged (with its GCI), failed (the cluster said it did
//! not commit) or unknown (the answer was lost).
//!
//! After every step: no two running nodes have each installed a
//! membership leaving the other out (two sides going on), every node
//! installing a membership id installs the same members (the world
//! checks it as they report), GCIs never go down (likewise), and the tcs
//! of running nodes agree on every partition's replica chain for each
//! map version (one primary per partition per membership).
//!
//! At the end, with every partition healed, a new client connects to the
//! nodes that run: if any data node still runs, the cluster must serve, and every acknowledged transfer's receipt is
//! there, no failed one's is, the balances are exactly what the present
//! receipts make them, every account can be written (no lock left by a
//! transaction a failure caught), the live replicas agree (the client's
//! replica checker), and no running node keeps a transaction or
//! operation record. Then the whole cluster crashes and restarts: the
//! state must be the committed prefix up to the restored GCI (every
//! transfer acknowledged in a GCI up to it is there, none above it, and
//! the balances match the receipts).

use crate::config::ClusterShape;
use crate::harness::{create_kv_table, drive};
use crate::hosted::{HostedApiNodes, HostedContext};
use crate::nemesis::Schedule;
use crate::simulation::Simulation;
use client::{ClientError, Cluster, Commit, ConnectOptions, ErrorCode, LockMode, Table, Value};
use signal::signals::PartitionMap;
use signal::{Gci, NodeId, NodeSet};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use stdx::mix::{fmix64, XorShift};

/// The shapes a seed picks from: two nodes of one group (a failure
/// leaves exactly half: the arbitrator decides), three replicas of one
/// group (a majority goes on), and two groups of two.
pub const SHAPES: [ClusterShape; 3] = [
    ClusterShape::new(2, 2),
    ClusterShape::new(3, 3),
    ClusterShape::new(4, 2),
];

/// Accounts of the workload.
const ACCOUNTS: u64 = 8;
/// Each account's opening balance.
const OPENING_BALANCE: i64 = 1000;
/// Operations per transaction in the final reads.
const BATCH: usize = 100;
/// The first API node id of the workload's clients.
const FIRST_API_NODE: u16 = 200;
/// The API node id that reads the table back after the restart.
const RESTART_API_NODE: u16 = 220;
/// Simulated time a run may take before it is declared stuck.
const RUN_LIMIT_US: u64 = 300_000_000;
/// How long a client waits after an error before its next transaction
/// (so a client of a cluster that is down does not spin).
const BACKOFF: Duration = Duration::from_millis(20);

/// What a chaos run does besides its seed.
#[derive(Clone, Debug)]
pub struct ChaosOptions {
    /// The cluster; `None` draws one of [`SHAPES`] from the seed.
    pub shape: Option<ClusterShape>,
    /// API nodes running transfers.
    pub clients: u16,
    /// Simulated time the transfers run, microseconds.
    pub workload_us: u64,
    /// At most this many faults (at least one).
    pub most_faults: u64,
    /// Print every delivered signal to stderr.
    pub trace_to_stderr: bool,
}

impl Default for ChaosOptions {
    fn default() -> ChaosOptions {
        ChaosOptions {
            shape: None,
            clients: 3,
            workload_us: 3_000_000,
            most_faults: 3,
            trace_to_stderr: false,
        }
    }
}

/// How the whole-cluster restart at the end went: it restored this GCI
/// on the nodes that started (the others were stale and shut down,
/// saying so), and the table read back was the committed prefix up to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestartCheck {
    /// The restored GCI.
    pub gci: Gci,
    /// Nodes that took no part (stale).
    pub stale: Vec<NodeId>,
}

/// What one chaos run did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChaosReport {
    /// The seed.
    pub seed: u64,
    /// The cluster.
    pub shape: ClusterShape,
    /// The faults, as scheduled.
    pub faults: String,
    /// The fault points that fired (an armed point fires only if the run
    /// reaches its step): (node, point, action).
    pub fired: Vec<(
        NodeId,
        kernel::faults::FaultPoint,
        kernel::faults::FaultAction,
    )>,
    /// Transfers acknowledged, failed, and of unknown outcome.
    pub transfers: (u64, u64, u64),
    /// Reads of every balance that added up.
    pub full_reads: u64,
    /// Creates and drops of the scratch table tried.
    pub schema_changes: u64,
    /// Nodes still running at the end of the workload.
    pub survivors: Vec<NodeId>,
    /// Nodes stopped during it, with why.
    pub stopped: Vec<(NodeId, String)>,
    /// Whether the end-of-run checks ran on a live cluster (false: every
    /// node had stopped).
    pub verified_live: bool,
    /// The restart at the end.
    pub restart: RestartCheck,
    /// Hash of every delivery.
    pub trace_hash: u64,
    /// Simulated time at the end, microseconds.
    pub simulated_us: u64,
}

impl std::fmt::Display for ChaosReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (acked, failed, unknown) = self.transfers;
        let fired: Vec<String> = self
            .fired
            .iter()
            .map(|(node, point, action)| format!("{} on {node} ({action})", point.name()))
            .collect();
        let stopped: Vec<String> = self
            .stopped
            .iter()
            .map(|(node, why)| format!("{node} ({})", first_words(why)))
            .collect();
        write!(
            f,
            "seed {} ({} nodes, replicas {}): faults [{}]; fired [{}]; transfers {acked} ok, \
             {failed} failed, \
             {unknown} unknown; {} full reads; {} schema changes; stopped: [{}]; {}; restart restored GCI {} without \
             {:?}; {:.1} s \
             simulated; trace {:#018x}",
            self.seed,
            self.shape.data_nodes,
            self.shape.replicas,
            self.faults,
            fired.join(", "),
            self.full_reads,
            self.schema_changes,
            stopped.join(", "),
            if self.verified_live {
                "checked live"
            } else {
                "cluster down"
            },
            self.restart.gci,
            self.restart.stale,
            self.simulated_us as f64 / 1e6,
            self.trace_hash
        )
    }
}

fn first_words(text: &str) -> String {
    text.split_whitespace()
        .take(6)
        .collect::<Vec<_>>()
        .join(" ")
}

/// What a client saw of one transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    Acknowledged(Gci),
    Failed,
    Unknown,
}

#[derive(Clone, Copy, Debug)]
struct Transfer {
    id: u64,
    from: u64,
    to: u64,
    amount: i64,
    seen: Seen,
}

impl Transfer {
    fn receipt(&self) -> String {
        format!("{} {} {}", self.from, self.to, self.amount)
    }
}

/// What the workload's clients share.
#[derive(Default)]
struct Shared {
    transfers: Vec<Transfer>,
    full_reads: u64,
    schema_changes: u64,
    /// The end-of-run check on the live cluster: `None` while not run,
    /// `Some(Err)` when the cluster could not be reached.
    verified: Option<Result<(), String>>,
}

fn lock(shared: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs one chaos run from `seed`. Panics, naming the seed and the
/// command that replays it, when an invariant or a check fails.
pub fn run_chaos(seed: u64, options: &ChaosOptions) -> ChaosReport {
    let mut random = XorShift::new(fmix64(seed ^ 0xc4a0_5000_0000_0001));
    // Drawn even when the options fix the shape, so that a replay naming
    // the drawn shape runs the same faults.
    let drawn = SHAPES[random.below(SHAPES.len() as u64) as usize];
    let shape = options.shape.unwrap_or(drawn);
    let mut simulation = Simulation::with_cluster(
        seed,
        shape,
        crate::NodeLimits::default(),
        options.trace_to_stderr,
    );
    simulation.set_replay("chaos", "replay_chaos_seed");
    simulation.start_nodes();
    // One set of API nodes for the whole run: an API node whose work
    // ended stays registered with the data nodes, and hears of failures.
    let mut api_nodes: HostedApiNodes<()> = HostedApiNodes::default();
    set_up(&mut simulation, &mut api_nodes);
    // Faults begin once the accounts are open and durable.
    let begin_us = simulation.world().now_us();
    let workload_end_us = begin_us + options.workload_us;
    let mut schedule = Schedule::random(
        &mut random,
        shape,
        begin_us + 100_000,
        workload_end_us,
        options.most_faults,
    );
    add_node_restarts(seed, &mut schedule);
    let faults = schedule.to_string();
    simulation.set_context(format!("faults: [{faults}]"));
    // Long enough for the longest pause or partition to heal and the
    // failure it caused to be agreed and taken over.
    let settle = Duration::from_millis(4_500);

    let shared = Arc::new(Mutex::new(Shared::default()));
    for index in 0..options.clients {
        let shared = Arc::clone(&shared);
        api_nodes.spawn(
            NodeId(FIRST_API_NODE + 1 + index),
            &mut simulation.client_io(),
            move |context| {
                let cluster = context
                    .connect(ConnectOptions::default())
                    .unwrap_or_else(|error| panic!("chaos client {index} cannot connect: {error}"));
                client_main(index, &cluster, &context, &shared, workload_end_us);
            },
        );
    }
    // Every stop in order, with why (a node restarted may stop again).
    let mut stop_order: Vec<(NodeId, String)> = Vec::new();
    let mut down = NodeSet::EMPTY;
    let mut after_step = |simulation: &Simulation| {
        check_invariants(simulation);
        let stopped = simulation.world().stopped();
        for (&node, why) in stopped {
            if !down.contains(node) {
                down.insert(node);
                stop_order.push((node, why.clone()));
            }
        }
        for node in down.iter() {
            if !stopped.contains_key(&node) {
                down.remove(node);
            }
        }
    };
    drive(
        &mut simulation,
        &mut api_nodes,
        &mut schedule,
        RUN_LIMIT_US,
        &mut after_step,
    );
    // Every client ended. Once every fault healed and every failure it
    // caused was agreed, a new client checks what the cluster holds, if
    // any node still runs.
    let settle_until = simulation.world().now_us() + settle.as_micros() as u64;
    while simulation
        .world()
        .next_event_time_us()
        .is_some_and(|time| time <= settle_until)
    {
        simulation.step(&mut api_nodes);
        after_step(&simulation);
    }
    // Points armed and never reached are faults too: healed with the
    // rest, so the checks below do not stop a node at one; and faults
    // scheduled past the workload's end (a kill that follows an armed
    // point) are not injected into them either (seed 2032 killed a node
    // as the verifier connected).
    simulation.world_mut().disarm_faults();
    let mut schedule = Schedule::default();
    let verifier = NodeId(FIRST_API_NODE + 1 + options.clients);
    let verifier_shared = Arc::clone(&shared);
    let any_running = shape
        .node_ids()
        .iter()
        .any(|&node| !simulation.world().is_stopped(node));
    if any_running {
        api_nodes.spawn(
            verifier,
            &mut simulation.client_io(),
            move |context| match context.connect(ConnectOptions::default()) {
                Ok(cluster) => verifier_main(&cluster, &verifier_shared),
                Err(error) => {
                    lock(&verifier_shared).verified =
                        Some(Err(format!("the verifier cannot connect: {error}")))
                }
            },
        );
        drive(
            &mut simulation,
            &mut api_nodes,
            &mut schedule,
            RUN_LIMIT_US,
            &mut after_step,
        );
    } else {
        lock(&shared).verified = Some(Err("every data node stopped".into()));
    }
    // The nodes that serve: not stopped, not paused (a node stalled or
    // stopped late in the run holds its records until it runs again and
    // finds itself failed), and members of the newest membership.
    let nodes = shape.node_ids();
    let world = simulation.world();
    let members = world
        .newest_membership()
        .map_or(NodeSet::EMPTY, |(_, members)| members);
    let survivors: Vec<NodeId> = nodes
        .iter()
        .copied()
        .filter(|&node| !world.is_stopped(node) && !world.is_paused(node) && members.contains(node))
        .collect();
    let stopped = stop_order;
    let (transfers, full_reads, schema_changes, verified) = {
        let shared = lock(&shared);
        (
            shared.transfers.clone(),
            shared.full_reads,
            shared.schema_changes,
            shared.verified.clone(),
        )
    };
    let verified_live = match verified {
        Some(Ok(())) => true,
        Some(Err(error)) if !survivors.is_empty() => panic!(
            "seed {seed}: nodes {survivors:?} still run, yet the cluster served no one at the \
             end: {error}"
        ),
        Some(Err(_)) => false,
        None => panic!("seed {seed}: the end-of-run check did not run"),
    };
    if verified_live {
        // What follows the last answers (COMPLETE, take-overs) settles.
        let until = simulation.world().now_us() + 300_000;
        simulation.run_until_us(&mut api_nodes, until);
        check_quiet_survivors(&simulation, &survivors);
    }

    let fired = simulation
        .world()
        .fired_faults()
        .iter()
        .map(|&(_, node, point, action)| (node, point, action))
        .collect();
    let restart = check_restart(&mut simulation, &transfers);
    let count = |wanted: fn(&Seen) -> bool| transfers.iter().filter(|t| wanted(&t.seen)).count();
    ChaosReport {
        seed,
        shape,
        faults,
        fired,
        transfers: (
            count(|seen| matches!(seen, Seen::Acknowledged(_))) as u64,
            count(|seen| *seen == Seen::Failed) as u64,
            count(|seen| *seen == Seen::Unknown) as u64,
        ),
        full_reads,
        schema_changes,
        survivors,
        stopped,
        verified_live,
        restart,
        trace_hash: simulation.world().trace_hash(),
        simulated_us: simulation.world().now_us(),
    }
}

/// How long past the workload's end the clients keep trying when no
/// transfer committed yet.
const LIVENESS_GRACE_US: u64 = 5_000_000;

/// Node restarts, as the angel or an operator would start a node again:
/// after half the kills and crashes at fault points, a moment later,
/// the node starts again from its files (or, one time in four, with
/// `--initial`). Drawn from a stream of their own, so the other faults
/// of a seed stay as they were. A restart of a node that runs does
/// nothing.
fn add_node_restarts(seed: u64, schedule: &mut Schedule) {
    use crate::nemesis::Fault;
    let mut random = XorShift::new(fmix64(seed ^ 0x4e52_e57a_0000_0001));
    let stops: Vec<(u64, NodeId)> = schedule
        .faults
        .iter()
        .filter_map(|&(at_us, fault)| match fault {
            Fault::Kill(node) | Fault::Arm(node, _, kernel::faults::FaultAction::Crash) => {
                Some((at_us, node))
            }
            _ => None,
        })
        .collect();
    for (at_us, node) in stops {
        if random.below(2) == 0 {
            continue;
        }
        let restart = if random.below(4) == 0 {
            Fault::RestartInitial(node)
        } else {
            Fault::Restart(node)
        };
        schedule.add(at_us + 500_000 + random.below(1_500_000), restart);
    }
}

/// The invariants that hold after every step.
fn check_invariants(simulation: &Simulation) {
    let world = simulation.world();
    if let Some((a, b)) = world.split_brain() {
        panic!(
            "split brain at {} us: node {a} runs in membership {:?} and node {b} in {:?}, each \
             without the other",
            world.now_us(),
            world.membership_of(a),
            world.membership_of(b)
        );
    }
    // Per (table, map version): the first running node's tc that routes
    // by it, and its map; every other must have the same chains.
    let mut maps: BTreeMap<(u32, u32), (NodeId, &PartitionMap)> = BTreeMap::new();
    for tc in simulation.tcs() {
        let node = kernel::Block::address(tc).node;
        if world.is_stopped(node) {
            continue;
        }
        for map in tc.routing_maps() {
            let (first, seen) = *maps
                .entry((map.table_id, map.version))
                .or_insert((node, map));
            let chains = |map: &PartitionMap| -> Vec<Vec<NodeId>> {
                let placements = map.partitions.iter();
                placements
                    .map(|placement| placement.replicas.clone())
                    .collect()
            };
            let same = seen.partitions.len() == map.partitions.len()
                && seen
                    .partitions
                    .iter()
                    .zip(&map.partitions)
                    .all(|(a, b)| a.replicas == b.replicas);
            assert!(
                same,
                "at {} us the tcs of nodes {first} and {node} route table {} by map version {} \
                 with different replica chains: {:?} and {:?}",
                world.now_us(),
                map.table_id,
                map.version,
                chains(seen),
                chains(map)
            );
        }
    }
}

/// The running nodes keep no transaction or operation record once
/// everything ended and settled, and agree on the schema.
fn check_quiet_survivors(simulation: &Simulation, survivors: &[NodeId]) {
    if let Err(disagreement) = simulation.schema_agreement(survivors) {
        panic!("the serving nodes disagree on the schema: {disagreement}");
    }
    for tc in simulation.tcs() {
        let address = kernel::Block::address(tc);
        assert!(
            !survivors.contains(&address.node) || tc.transactions_in_use() == 0,
            "tc {address} still has {} transaction records in use after every client ended",
            tc.transactions_in_use()
        );
    }
    for ldm in simulation.ldms() {
        let address = kernel::Block::address(ldm);
        assert!(
            !survivors.contains(&address.node) || ldm.operations_in_use() == 0,
            "ldm {address} still has {} operation records in use after every client ended",
            ldm.operations_in_use()
        );
        if survivors.contains(&address.node) {
            if let Err(problem) = ldm.check_ordered_indexes() {
                panic!("an ordered index differs from its rows: {problem}");
            }
        }
    }
}

/// Creates the tables and opens the accounts, durably, before any fault
/// (an API node of its own, run to its end).
fn set_up(simulation: &mut Simulation, api_nodes: &mut HostedApiNodes<()>) {
    api_nodes.spawn(
        NodeId(FIRST_API_NODE),
        &mut simulation.client_io(),
        |context| {
            let cluster = context
                .connect(ConnectOptions::default())
                .unwrap_or_else(|error| panic!("the set-up client cannot connect: {error}"));
            let accounts = create_kv_table(&cluster, "accounts");
            create_kv_table(&cluster, "receipts");
            let mut opening = cluster.transaction();
            for account in 0..ACCOUNTS {
                let balance = Value::from(OPENING_BALANCE.to_string().as_str());
                opening
                    .insert(&accounts, &[("k", Value::UInt(account)), ("v", balance)])
                    .expect("queue an account");
            }
            let outcome = opening
                .execute(Commit::Yes)
                .unwrap_or_else(|error| panic!("opening the accounts: {error}"));
            let gci = outcome.gci.expect("inserts commit in a GCI");
            cluster
                .wait_durable(gci)
                .unwrap_or_else(|error| panic!("waiting for the accounts to be durable: {error}"));
        },
    );
    drive(
        simulation,
        api_nodes,
        &mut Schedule::default(),
        RUN_LIMIT_US,
        &mut check_invariants,
    );
}

/// One workload client: transfers and full reads until `workload_end_us`.
fn client_main(
    index: u16,
    cluster: &Cluster,
    context: &HostedContext,
    shared: &Mutex<Shared>,
    workload_end_us: u64,
) {
    let mut random = XorShift::new(fmix64(context.seed ^ u64::from(index)));
    let accounts = cluster.table("accounts").expect("the accounts table");
    let receipts = cluster.table("receipts").expect("the receipts table");
    let nodes = cluster.data_nodes();
    let mut n = 0u64;
    let mut scratch_exists = false;
    // Past the workload's end, the clients go on until a transfer
    // commits (faults may have taken all of its time): the cluster that
    // serves at the end must have committed something once healed.
    let none_committed = || {
        let shared = lock(shared);
        !shared
            .transfers
            .iter()
            .any(|transfer| matches!(transfer.seen, Seen::Acknowledged(_)))
    };
    while context.now_us() < workload_end_us
        || (context.now_us() < workload_end_us + LIVENESS_GRACE_US && none_committed())
    {
        // The first client also creates and drops a scratch table now and
        // then, so that faults catch schema changes too (the master
        // dict's take-over: every block must end up agreeing on it).
        if index == 0 && random.below(10) == 0 {
            let changed = if scratch_exists {
                cluster.drop_table("scratch")
            } else {
                let definition = crate::harness::kv_table_definition("scratch");
                cluster.create_table(&definition).map(|_| ())
            };
            match changed.map_err(|error| error.code()) {
                Ok(()) => scratch_exists = !scratch_exists,
                Err(Some(ErrorCode::TableExists)) => scratch_exists = true,
                Err(Some(ErrorCode::UnknownTable)) => scratch_exists = false,
                Err(_) => context.sleep(BACKOFF),
            }
            lock(shared).schema_changes += 1;
            continue;
        }
        // A coordinator at random; any node when that one is down.
        let node = nodes[random.below(nodes.len() as u64) as usize];
        let transaction = match cluster.transaction_on_node(node) {
            Ok(transaction) => transaction,
            Err(_) => cluster.transaction(),
        };
        if random.below(8) == 0 {
            match read_balances(transaction, &accounts) {
                Ok(balances) => {
                    let total: i64 = balances.iter().sum();
                    assert!(
                        total == OPENING_BALANCE * ACCOUNTS as i64
                            && balances.iter().all(|&balance| balance >= 0),
                        "client {index} read balances {balances:?} in one transaction at {} us: \
                         they must add up to {} and none be negative",
                        context.now_us(),
                        OPENING_BALANCE * ACCOUNTS as i64
                    );
                    lock(shared).full_reads += 1;
                }
                Err(_) => context.sleep(BACKOFF),
            }
            continue;
        }
        let from = random.below(ACCOUNTS);
        let to = (from + 1 + random.below(ACCOUNTS - 1)) % ACCOUNTS;
        let mut planned = Transfer {
            id: u64::from(index + 1) * 1_000_000 + n,
            from,
            to,
            amount: 1 + random.below(50) as i64,
            seen: Seen::Failed,
        };
        n += 1;
        let result = transfer(transaction, &accounts, &receipts, &planned);
        planned.seen = match &result {
            Ok(Some(gci)) => Seen::Acknowledged(*gci),
            // Too little money: rolled back, nothing to record.
            Ok(None) => continue,
            Err(error) if error.is_outcome_unknown() => Seen::Unknown,
            Err(_) => Seen::Failed,
        };
        lock(shared).transfers.push(planned);
        if result.is_err() {
            context.sleep(BACKOFF);
        }
    }
}

/// The end-of-run check, by an API node that connects once every client
/// ended and the faults healed (as a new client would, to the nodes that
/// run).
fn verifier_main(cluster: &Cluster, shared: &Mutex<Shared>) {
    let transfers = lock(shared).transfers.clone();
    let tables = retried(
        || Ok((cluster.table("accounts")?, cluster.table("receipts")?)),
        "the tables",
    );
    let verified = tables
        .and_then(|(accounts, receipts)| verify_live(cluster, &accounts, &receipts, &transfers));
    lock(shared).verified = Some(verified);
}

/// Moves `transfer.amount` between two accounts and inserts the receipt,
/// in `transaction`. `Ok(None)` when the payer has too little (rolled
/// back); `Ok(Some(gci))` when committed.
fn transfer(
    mut transaction: client::Transaction<'_>,
    accounts: &Arc<Table>,
    receipts: &Arc<Table>,
    transfer: &Transfer,
) -> Result<Option<Gci>, ClientError> {
    let from = transaction.read(accounts, &[Value::UInt(transfer.from)], LockMode::Exclusive)?;
    let to = transaction.read(accounts, &[Value::UInt(transfer.to)], LockMode::Exclusive)?;
    transaction.execute(Commit::No)?;
    let (from_balance, to_balance) = (balance(&transaction, from), balance(&transaction, to));
    if from_balance < transfer.amount {
        transaction.rollback()?;
        return Ok(None);
    }
    let text = |balance: i64| Value::from(balance.to_string().as_str());
    transaction.update(
        accounts,
        &[Value::UInt(transfer.from)],
        &[("v", text(from_balance - transfer.amount))],
    )?;
    transaction.update(
        accounts,
        &[Value::UInt(transfer.to)],
        &[("v", text(to_balance + transfer.amount))],
    )?;
    let receipt = transfer.receipt();
    transaction.insert(
        receipts,
        &[
            ("k", Value::UInt(transfer.id)),
            ("v", Value::from(receipt.as_str())),
        ],
    )?;
    let outcome = transaction.execute(Commit::Yes)?;
    Ok(Some(outcome.gci.expect("a write commits in a GCI")))
}

fn balance(transaction: &client::Transaction<'_>, op: client::OpId) -> i64 {
    transaction
        .get(op)
        .and_then(|row| row.get("v")?.as_str().map(String::from))
        .expect("an account row holds a balance")
        .parse()
        .expect("a balance is a number")
}

/// Every balance, in one transaction under shared locks.
fn read_balances(
    mut transaction: client::Transaction<'_>,
    accounts: &Arc<Table>,
) -> Result<Vec<i64>, ClientError> {
    let ops: Vec<client::OpId> = (0..ACCOUNTS)
        .map(|account| transaction.read(accounts, &[Value::UInt(account)], LockMode::Shared))
        .collect::<Result<_, _>>()?;
    transaction.execute(Commit::Yes)?;
    Ok(ops
        .into_iter()
        .map(|op| balance(&transaction, op))
        .collect())
}

/// Retries `attempt` through temporary errors and lost connections for
/// a while (the cluster may still be agreeing a failure); the last error
/// if it never succeeds.
fn retried<T>(
    mut attempt: impl FnMut() -> Result<T, ClientError>,
    what: &str,
) -> Result<T, String> {
    let mut last = String::new();
    for _ in 0..40 {
        match attempt() {
            Ok(value) => return Ok(value),
            Err(error) => last = format!("{what}: {error}"),
        }
    }
    Err(last)
}

/// The receipts present among `ids`, with their text, read in
/// transactions of [`BATCH`] keys (a missing row fails its batch: that
/// batch is read key by key then).
fn present_receipts(
    cluster: &Cluster,
    receipts: &Arc<Table>,
    ids: &[u64],
) -> Result<BTreeMap<u64, String>, ClientError> {
    let mut present = BTreeMap::new();
    for chunk in ids.chunks(BATCH) {
        match read_receipts(cluster, receipts, chunk) {
            Ok(found) => present.extend(found),
            Err(error) if error.code() == Some(ErrorCode::NoSuchRow) => {
                for &id in chunk {
                    match read_receipts(cluster, receipts, &[id]) {
                        Ok(found) => present.extend(found),
                        Err(error) if error.code() == Some(ErrorCode::NoSuchRow) => {}
                        Err(error) => return Err(error),
                    }
                }
            }
            Err(error) => return Err(error),
        }
    }
    Ok(present)
}

/// The receipts `ids`, in one transaction.
fn read_receipts(
    cluster: &Cluster,
    receipts: &Arc<Table>,
    ids: &[u64],
) -> Result<Vec<(u64, String)>, ClientError> {
    let mut transaction = cluster.transaction();
    let ops: Vec<client::OpId> = ids
        .iter()
        .map(|&id| transaction.read(receipts, &[Value::UInt(id)], LockMode::CommittedRead))
        .collect::<Result<_, _>>()?;
    transaction.execute(Commit::Yes)?;
    Ok(ids
        .iter()
        .zip(ops)
        .filter_map(|(&id, op)| {
            let text = transaction.get(op)?.get("v")?.as_str()?.to_string();
            Some((id, text))
        })
        .collect())
}

/// The balances the present receipts make, checked against those read.
fn check_balances(
    transfers: &[Transfer],
    present: &BTreeMap<u64, String>,
    balances: &[i64],
) -> Result<(), String> {
    let mut expected = vec![OPENING_BALANCE; ACCOUNTS as usize];
    for transfer in transfers {
        if let Some(text) = present.get(&transfer.id) {
            if *text != transfer.receipt() {
                return Err(format!(
                    "receipt {} reads {text:?}, the transfer was {:?}",
                    transfer.id,
                    transfer.receipt()
                ));
            }
            expected[transfer.from as usize] -= transfer.amount;
            expected[transfer.to as usize] += transfer.amount;
        }
    }
    if balances != expected {
        return Err(format!(
            "the balances are {balances:?}, the {} receipts present make them {expected:?}",
            present.len()
        ));
    }
    Ok(())
}

/// The end-of-run check on the live cluster; `Err` only when it cannot
/// be reached (a wrong state panics).
fn verify_live(
    cluster: &Cluster,
    accounts: &Arc<Table>,
    receipts: &Arc<Table>,
    transfers: &[Transfer],
) -> Result<(), String> {
    let balances = retried(
        || read_balances(cluster.transaction(), accounts),
        "balances",
    )?;
    let ids: Vec<u64> = transfers.iter().map(|transfer| transfer.id).collect();
    let present = retried(|| present_receipts(cluster, receipts, &ids), "receipts")?;
    for transfer in transfers {
        match (transfer.seen, present.contains_key(&transfer.id)) {
            (Seen::Acknowledged(gci), false) => panic!(
                "transfer {} was acknowledged in GCI {gci}, and its receipt is gone",
                transfer.id
            ),
            (Seen::Failed, true) => panic!(
                "transfer {} failed as the client saw it, yet its receipt is there",
                transfer.id
            ),
            _ => {}
        }
    }
    if let Err(error) = check_balances(transfers, &present, &balances) {
        panic!("on the live cluster: {error}");
    }
    // No lock left behind: every account can be written.
    for account in 0..ACCOUNTS {
        let balance = Value::from(balances[account as usize].to_string().as_str());
        let written = retried(
            || {
                let mut transaction = cluster.transaction();
                transaction.update(accounts, &[Value::UInt(account)], &[("v", balance.clone())])?;
                transaction.execute(Commit::Yes)
            },
            "writing an account",
        );
        if let Err(error) = written {
            panic!("account {account} cannot be written after the faults healed: {error}");
        }
    }
    let report = retried(|| cluster.check_replicas(), "checking the replicas")?;
    assert_eq!(report.mismatches, 0, "the live replicas differ: {report}");
    Ok(())
}

/// The whole cluster crashes and restarts; the state read back must be
/// the committed prefix up to the restored GCI.
fn check_restart(simulation: &mut Simulation, transfers: &[Transfer]) -> RestartCheck {
    simulation.crash();
    simulation.start_nodes_settled();
    let nodes = simulation.shape().node_ids();
    let started: Vec<NodeId> = nodes
        .iter()
        .copied()
        .filter(|&node| simulation.world().node_started(node))
        .collect();
    let stale: Vec<NodeId> = nodes
        .iter()
        .copied()
        .filter(|node| !started.contains(node))
        .collect();
    assert!(
        !started.is_empty(),
        "no node started after the whole-cluster restart: {:?}",
        simulation.world().stopped()
    );
    let restored = simulation.world().restored_gci_of(started[0]);
    for &node in &started {
        assert_eq!(
            simulation.world().restored_gci_of(node),
            restored,
            "the nodes that started restored different GCIs"
        );
    }
    let seen = transfers.to_vec();
    let mut api_nodes: HostedApiNodes<(Vec<i64>, BTreeMap<u64, String>)> =
        HostedApiNodes::default();
    api_nodes.spawn(
        NodeId(RESTART_API_NODE),
        &mut simulation.client_io(),
        move |context| {
            let cluster = context
                .connect(ConnectOptions::default())
                .unwrap_or_else(|error| panic!("cannot connect after the restart: {error}"));
            let accounts = cluster.table("accounts").expect("the accounts table");
            let receipts = cluster.table("receipts").expect("the receipts table");
            let balances = retried(
                || read_balances(cluster.transaction(), &accounts),
                "balances",
            )
            .unwrap_or_else(|error| panic!("after the restart: {error}"));
            let ids: Vec<u64> = seen.iter().map(|transfer| transfer.id).collect();
            let present = retried(|| present_receipts(&cluster, &receipts, &ids), "receipts")
                .unwrap_or_else(|error| panic!("after the restart: {error}"));
            (balances, present)
        },
    );
    drive(
        simulation,
        &mut api_nodes,
        &mut Schedule::default(),
        RUN_LIMIT_US,
        &mut check_invariants,
    );
    let (balances, present) = api_nodes.take_results().pop().expect("one API node");
    for transfer in transfers {
        let there = present.contains_key(&transfer.id);
        match transfer.seen {
            Seen::Acknowledged(gci) if gci <= restored && !there => panic!(
                "transfer {} was acknowledged in GCI {gci}, the restart restored GCI {restored}, \
                 and its receipt is gone",
                transfer.id
            ),
            Seen::Acknowledged(gci) if gci > restored && there => panic!(
                "transfer {} committed in GCI {gci}, above the restored GCI {restored}, yet its \
                 receipt is there",
                transfer.id
            ),
            Seen::Failed if there => panic!(
                "transfer {} failed as the client saw it, yet its receipt is there after the \
                 restart",
                transfer.id
            ),
            _ => {}
        }
    }
    if let Err(error) = check_balances(transfers, &present, &balances) {
        panic!("after the restart to GCI {restored}: {error}");
    }
    RestartCheck {
        gci: restored,
        stale,
    }
}
