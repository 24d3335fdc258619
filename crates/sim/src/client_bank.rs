//! The bank through the real client: API nodes hosted by the simulator
//! (`hosted`), each a thread using the production `client` crate as an
//! application does, from registration to the replica check.
//!
//! API node 0 creates the table (`Cluster::create_table`) and loads the
//! accounts with sync transactions; every API node then runs transfers
//! from an `AsyncSession` with several in flight: read 2-4 random accounts
//! under exclusive locks (`Commit::No`), write balances that sum to the
//! old ones with the transaction's id as `writer`, and commit (now and
//! then `Commit::Durable`, which waits for the GCI to be durable; some
//! send the writes first and the commit on its own, some roll back after
//! the reads or after the writes). Half the transactions start with a key hint (routed
//! to the primary's node by the client's map), the rest round robin.
//! Conflicts end in the lock-wait timeout, a temporary error: the
//! transfer is counted and another starts.
//!
//! Every read is checked against the ledger (no dirty read, no lost
//! update, GCIs in order along each account's chain of writers), and at
//! the end API node 0 reads every account back (the balances add up, the
//! chains end where the rows say) and runs the client's replica checker.
//! The simulator then checks that the blocks hold no record, the rows are
//! all there on every replica and every section is back in the pool.
//!
//! With `crash_within_signals`, the whole cluster crashes at a moment
//! drawn from the seed after the accounts are loaded. Every connection of
//! the API nodes ends there: what the client answers is checked by class
//! (a transfer whose commit was sent is `OutcomeUnknown`: in doubt, or,
//! for a durable commit heard committed whose wait for durability was
//! cut, committed in its GCI; anything else failed before committing, so
//! aborted), and the API nodes end. The cluster restarts from its disks, and a fresh API node scans
//! the primary replica of every partition through the client: the
//! restored accounts must be the committed prefix up to the restored GCI
//! (`ledger::restart`), and their balances add up.

use crate::config::{ClusterShape, NodeLimits};
use crate::hosted::{HostedApiNodes, HostedContext};
use crate::ledger::{Ledger, Written};
use crate::restored::StoredRow;
use crate::rows;
use crate::simulation::Simulation;
use client::{
    AsyncSession, ClientError, Cluster, Commit, Completion, ConnectOptions, LockMode, OpId, Table,
    Transaction, TransactionState, Value,
};
use signal::{ErrorCode, Gci, NodeId};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use stdx::mix::XorShift;

/// The first hosted API node's id.
const FIRST_API_NODE: u16 = 200;
/// The API node that reads the table back after a restart.
const RESTART_CHECKER_API_NODE: u16 = 240;
/// Rows per scan batch when reading the restored table.
const SCAN_BATCH_ROWS: u32 = 1000;
/// Mixed into the seed for the crash moment's own random stream, so that
/// choosing it changes nothing else.
const CRASH_STREAM: u64 = 0xC4A5_0000_0000_0001;
/// Balance every account starts with.
const INITIAL_BALANCE: i64 = 1000;
/// Accounts inserted per loading transaction.
const LOAD_CHUNK: u32 = 10;
/// Accounts read per transaction at the end.
const VERIFY_CHUNK: u32 = 25;
/// How often a waiting API node looks again (simulated time).
const POLL_INTERVAL: Duration = Duration::from_millis(1);
/// Simulated time the whole run may take before it is declared stuck.
const RUN_LIMIT_US: u64 = 600_000_000;
/// Simulated time the nodes get to settle after the clients end.
const SETTLE_US: u64 = 3_000_000;

/// What the run does.
#[derive(Clone, Debug)]
pub struct ClientBankOptions {
    /// Data nodes and replicas.
    pub cluster: ClusterShape,
    /// The nodes' record pools.
    pub limits: NodeLimits,
    /// Hosted API nodes.
    pub api_nodes: u16,
    /// Accounts.
    pub accounts: u32,
    /// Transfers each API node ends (commits or aborts).
    pub transfers_per_api_node: u32,
    /// Transfers each API node keeps in flight.
    pub in_flight: usize,
    /// Crash the whole cluster within this many signals (drawn from the
    /// seed) after the accounts are loaded, restart it and check the
    /// restored table; `None`: no crash.
    pub crash_within_signals: Option<u64>,
}

impl Default for ClientBankOptions {
    fn default() -> ClientBankOptions {
        ClientBankOptions {
            cluster: ClusterShape::default(),
            limits: NodeLimits::default(),
            api_nodes: 2,
            accounts: 40,
            transfers_per_api_node: 200,
            in_flight: 4,
            crash_within_signals: None,
        }
    }
}

/// What a run saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientBankReport {
    /// Hash of every signal delivered (the same seed gives the same hash).
    pub trace_hash: u64,
    /// Signals delivered.
    pub signals_delivered: u64,
    /// Simulated time at the end.
    pub simulated_us: u64,
    /// Transfers committed.
    pub committed: u64,
    /// Of those, committed with `Commit::Durable`.
    pub durable: u64,
    /// Transfers that ended in a temporary error.
    pub aborted: u64,
    /// Transfers rolled back on purpose.
    pub rolled_back: u64,
    /// Sum of the balances read at the end.
    pub final_total: i64,
    /// Partitions whose replicas the client's checker compared.
    pub partitions_checked: u64,
    /// The crash and restart, when the options asked for one.
    pub restart: Option<RestartReport>,
}

/// What a crash and restart of a run left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestartReport {
    /// Complete (durable) GCI when the cluster crashed.
    pub complete_before: Gci,
    /// The GCI the restart restored.
    pub restored_gci: Gci,
    /// Transfers whose outcome the client reported unknown at the crash.
    pub in_doubt: u64,
    /// Of those, the ones the restored table shows committed.
    pub in_doubt_restored: u64,
    /// Accounts restored.
    pub accounts_restored: u64,
}

/// What the API nodes share (they take turns, so the lock is never contended).
#[derive(Default)]
struct Bank {
    ledger: Ledger,
    /// The accounts are loaded.
    loaded: bool,
    /// API nodes done with their transfers.
    finished: u16,
    /// The cluster crashed: connections end, the API nodes stop.
    crashed: bool,
    /// Transfers whose outcome the client reported unknown at the crash.
    in_doubt: u64,
    /// The highest GCI of a commit the client reported durable.
    durable_gci: Gci,
    committed: u64,
    durable: u64,
    aborted: u64,
    rolled_back: u64,
    final_total: i64,
    partitions_checked: u64,
}

type SharedBank = Arc<Mutex<Bank>>;

fn lock(bank: &SharedBank) -> std::sync::MutexGuard<'_, Bank> {
    bank.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs the bank through the real client from `seed`. Panics, naming the
/// seed, when a check fails.
pub fn run(seed: u64, options: &ClientBankOptions) -> ClientBankReport {
    assert!(
        options.api_nodes >= 1 && options.accounts >= 4 && options.in_flight >= 1,
        "the bank needs an API node, 4 accounts and a transfer in flight"
    );
    let mut simulation = Simulation::with_cluster(seed, options.cluster, options.limits, false);
    simulation.start_nodes();
    let bank = SharedBank::default();
    let mut api_nodes = HostedApiNodes::default();
    for index in 0..options.api_nodes {
        let (bank, options) = (Arc::clone(&bank), options.clone());
        let api_node = NodeId(FIRST_API_NODE + index);
        api_nodes.spawn(api_node, &mut simulation.client_io(), move |context| {
            api_node_work(context, index, &bank, &options)
        });
    }
    let mut crash_random = XorShift::new(seed ^ CRASH_STREAM);
    let mut crash_at = None;
    while !api_nodes.all_ended() {
        if let Some(within) = options.crash_within_signals {
            let delivered = simulation.world().delivered();
            if crash_at.is_none() && lock(&bank).loaded {
                crash_at = Some(delivered + crash_random.below(within + 1));
            }
            if crash_at.is_some_and(|at| delivered >= at) {
                return crash_and_restart(simulation, api_nodes, &bank, options);
            }
        }
        step_api_nodes(&mut simulation, &mut api_nodes);
    }
    let settle_until = simulation.world().now_us() + SETTLE_US;
    simulation.run_until_us(&mut api_nodes, settle_until);
    let (durable_gci, complete) = (lock(&bank).durable_gci, simulation.world().complete_gci());
    assert!(
        durable_gci <= complete,
        "seed {seed}: a commit in GCI {durable_gci} was reported durable, but GCI {complete} \
         is the latest complete one"
    );
    let table = api_nodes.take_results()[0].expect("API node 0 created the table");
    let replicas = u64::from(options.cluster.replicas);
    simulation.check_quiet(table, u64::from(options.accounts) * replicas);
    let (final_total, partitions_checked) = {
        let bank = lock(&bank);
        (bank.final_total, bank.partitions_checked)
    };
    report(&simulation, &bank, final_total, partitions_checked, None)
}

/// The report of a run that ended now.
fn report(
    simulation: &Simulation,
    bank: &SharedBank,
    final_total: i64,
    partitions_checked: u64,
    restart: Option<RestartReport>,
) -> ClientBankReport {
    let bank = lock(bank);
    ClientBankReport {
        trace_hash: simulation.world().trace_hash(),
        signals_delivered: simulation.world().delivered(),
        simulated_us: simulation.world().now_us(),
        committed: bank.committed,
        durable: bank.durable,
        aborted: bank.aborted,
        rolled_back: bank.rolled_back,
        final_total,
        partitions_checked,
        restart,
    }
}

/// Runs one event for `api_nodes`, within the run's time limit.
fn step_api_nodes<R: Send + 'static>(
    simulation: &mut Simulation,
    api_nodes: &mut HostedApiNodes<R>,
) {
    let seed = simulation.seed();
    assert!(
        simulation.world().now_us() < RUN_LIMIT_US,
        "seed {seed}: the API nodes did not finish within {RUN_LIMIT_US} us"
    );
    assert!(
        simulation.step(api_nodes),
        "seed {seed}: the simulation ran out of events before the API nodes ended"
    );
}

/// The whole cluster crashes now: the API nodes lose every connection and
/// end; the cluster restarts from its disks, and a fresh API node reads
/// the restored table back for the checks.
fn crash_and_restart(
    mut simulation: Simulation,
    mut api_nodes: HostedApiNodes<Option<u32>>,
    bank: &SharedBank,
    options: &ClientBankOptions,
) -> ClientBankReport {
    let seed = simulation.seed();
    let (complete_before, latest_before) = {
        let world = simulation.world();
        (world.complete_gci(), world.latest_gci())
    };
    lock(bank).crashed = true;
    simulation.crash();
    api_nodes.lose_connections("the data node crashed", &mut simulation.client_io());
    while !api_nodes.all_ended() {
        step_api_nodes(&mut simulation, &mut api_nodes);
    }
    simulation.start_nodes();
    let restored_gci = {
        let world = simulation.world();
        world.restored_gci_of(world.president())
    };
    let durable_gci = lock(bank).durable_gci;
    assert!(
        durable_gci <= restored_gci,
        "seed {seed}: a commit in GCI {durable_gci} was reported durable, but the restart \
         restored GCI {restored_gci}"
    );
    assert!(
        complete_before <= restored_gci && restored_gci <= latest_before,
        "seed {seed}: restored GCI {restored_gci}, but {complete_before} was complete and \
         {latest_before} the latest at the crash"
    );
    let mut checker = HostedApiNodes::default();
    checker.spawn(
        NodeId(RESTART_CHECKER_API_NODE),
        &mut simulation.client_io(),
        read_restored,
    );
    while !checker.all_ended() {
        step_api_nodes(&mut simulation, &mut checker);
    }
    let (table, rows) = checker.take_results().pop().expect("one checker");
    let in_doubt_restored = lock(bank)
        .ledger
        .check_restored(options.accounts, &rows, restored_gci)
        .unwrap_or_else(|error| {
            panic!(
                "seed {seed}: the restored table is not the committed prefix up to GCI \
                 {restored_gci}: {error}"
            )
        });
    let total: i64 = rows.values().map(|stored| stored.row.balance).sum();
    let expected = rows.len() as i64 * INITIAL_BALANCE;
    assert_eq!(
        total, expected,
        "seed {seed}: the restored balances add up to {total}"
    );
    let settle_until = simulation.world().now_us() + SETTLE_US;
    simulation.run_until_us(&mut checker, settle_until);
    if let Some(table) = table {
        let replicas = u64::from(options.cluster.replicas);
        simulation.check_quiet(table, rows.len() as u64 * replicas);
    }
    let restart = RestartReport {
        complete_before,
        restored_gci,
        in_doubt: lock(bank).in_doubt,
        in_doubt_restored,
        accounts_restored: rows.len() as u64,
    };
    report(&simulation, bank, total, 0, Some(restart))
}

/// The restart checker's API node: the table's id (if it was restored)
/// and every row of the primary replica of every partition, with its GCI.
fn read_restored(context: HostedContext) -> (Option<u32>, BTreeMap<u32, StoredRow>) {
    let fail = |what: &str, error: ClientError| -> ! {
        panic!("the restart checker: {what}: {error}");
    };
    let cluster = context
        .connect(ConnectOptions::default())
        .unwrap_or_else(|error| fail("connecting", error));
    let table = match cluster.table("bank") {
        Ok(table) => table,
        Err(error) if error.code() == Some(ErrorCode::UnknownTable) => {
            return (None, BTreeMap::new());
        }
        Err(error) => fail("describing the table", error),
    };
    let map = table.map().expect("a described table has a map").clone();
    let mut rows = BTreeMap::new();
    for (partition, placement) in map.partitions.iter().enumerate() {
        let primary = placement.replicas[0];
        let mut start = 0;
        loop {
            let batch = cluster
                .scan_partition(primary, &table, partition as u32, start, SCAN_BATCH_ROWS)
                .unwrap_or_else(|error| fail("scanning a partition", error));
            for scanned in batch.rows {
                let row = &scanned.row;
                let id = row.get(rows::ID).and_then(Value::as_u64);
                let balance = row.get(rows::BALANCE).and_then(Value::as_i64);
                let writer = row.get(rows::WRITER).and_then(Value::as_u64);
                let note = row
                    .get(rows::NOTE)
                    .and_then(|note| note.as_bytes().map(<[u8]>::to_vec));
                let (Some(id), Some(balance), Some(writer)) = (id, balance, writer) else {
                    panic!("a restored row reads back as {row:?}");
                };
                let id = id as u32;
                let stored = StoredRow {
                    row: rows::Row {
                        id,
                        balance,
                        writer,
                        note,
                    },
                    gci: scanned.gci,
                };
                assert!(
                    rows.insert(id, stored).is_none(),
                    "account {id} restored twice"
                );
            }
            if batch.done {
                break;
            }
            start = batch.next_row;
        }
    }
    (Some(table.def().id), rows)
}

/// One API node's life; API node 0 returns the table's id.
fn api_node_work(
    context: HostedContext,
    index: u16,
    bank: &SharedBank,
    options: &ClientBankOptions,
) -> Option<u32> {
    let api_node = context.api_node;
    let fail = |what: &str, error: ClientError| -> ! {
        panic!("API node {api_node}: {what}: {error}");
    };
    let cluster = context
        .connect(ConnectOptions::default())
        .unwrap_or_else(|error| fail("connecting", error));
    let table = if index == 0 {
        let table = create_and_load(&cluster, bank, options.accounts)
            .unwrap_or_else(|error| fail("creating and loading the table", error));
        lock(bank).loaded = true;
        table
    } else {
        while !lock(bank).loaded {
            context.sleep(POLL_INTERVAL);
        }
        cluster
            .table("bank")
            .unwrap_or_else(|error| fail("describing the table", error))
    };
    let mut random = XorShift::new(context.seed);
    Transfers {
        cluster: &cluster,
        table: &table,
        bank,
        random: &mut random,
        accounts: options.accounts,
    }
    .run(options.transfers_per_api_node, options.in_flight);
    lock(bank).finished += 1;
    if index != 0 {
        return None;
    }
    loop {
        let bank = lock(bank);
        if bank.crashed {
            return None;
        }
        if bank.finished == options.api_nodes {
            break;
        }
        drop(bank);
        context.sleep(POLL_INTERVAL);
    }
    verify(&cluster, &table, bank, options.accounts);
    Some(table.def().id)
}

fn create_and_load(
    cluster: &Cluster,
    bank: &SharedBank,
    accounts: u32,
) -> Result<Arc<Table>, ClientError> {
    cluster.create_table(&rows::bank_table())?;
    let table = cluster.table("bank")?;
    for first in (0..accounts).step_by(LOAD_CHUNK as usize) {
        let mut transaction = cluster.transaction();
        let writer = transaction.id().0;
        let mut writes = Vec::new();
        for account in first..(first + LOAD_CHUNK).min(accounts) {
            transaction.insert(
                &table,
                &[
                    (rows::ID, Value::UInt(account.into())),
                    (rows::BALANCE, Value::Int(INITIAL_BALANCE)),
                    (rows::WRITER, Value::UInt(writer)),
                ],
            )?;
            writes.push(Written {
                account,
                balance: INITIAL_BALANCE,
                note: None,
            });
        }
        check(lock(bank).ledger.will_write(writer, Vec::new(), writes));
        let outcome = transaction.execute(Commit::Yes)?;
        let gci = outcome.gci.expect("an insert commits in a GCI");
        check(lock(bank).ledger.committed(writer, gci, &[]));
    }
    Ok(table)
}

/// A transfer in flight: what it read, and which step it is at.
struct Transfer {
    accounts: Vec<u32>,
    reads: Vec<OpId>,
    /// (account, writer) read, once the reads are answered.
    read: Vec<(u32, u64)>,
    /// The batch in flight.
    step: Step,
    /// What follows the writes.
    ending: Ending,
    /// The commit is `Commit::Durable`.
    durable: bool,
}

/// The batch a transfer has in flight.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Step {
    /// The locking reads (`Commit::No`).
    Reading,
    /// The writes alone (`Commit::No`): the ledger knows them.
    Writing,
    /// The commit (with the writes, or alone after them).
    Committing,
}

/// How a transfer ends once it wrote.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ending {
    /// Writes and commit in one batch.
    Commit,
    /// Writes, then a commit of its own (TC_COMMITREQ).
    SeparateCommit,
    /// Writes, then a rollback.
    RollbackAfterWrites,
}

struct Transfers<'a> {
    cluster: &'a Cluster,
    table: &'a Arc<Table>,
    bank: &'a SharedBank,
    random: &'a mut XorShift,
    accounts: u32,
}

impl<'a> Transfers<'a> {
    fn run(&mut self, count: u32, in_flight: usize) {
        let mut session: AsyncSession<'a, Transfer> = self.cluster.session();
        let mut started = 0;
        let mut ended = 0;
        let mut done = Vec::new();
        while ended < count {
            if lock(self.bank).crashed {
                if session.in_flight() == 0 {
                    return;
                }
            } else {
                while started < count && session.in_flight() < in_flight {
                    self.start(&mut session);
                    started += 1;
                }
            }
            session.poll(Duration::from_secs(1), &mut done);
            for completion in done.drain(..) {
                if self.step(&mut session, completion) {
                    ended += 1;
                }
            }
        }
    }

    fn start(&mut self, session: &mut AsyncSession<'a, Transfer>) {
        let count = 2 + self.random.below(3) as usize;
        let mut accounts = Vec::with_capacity(count);
        while accounts.len() < count {
            let account = self.random.below(u64::from(self.accounts)) as u32;
            if !accounts.contains(&account) {
                accounts.push(account);
            }
        }
        let mut transaction = if self.random.below(2) == 0 {
            let hint = [Value::UInt(accounts[0].into())];
            self.cluster
                .transaction_with_hint(self.table, &hint)
                .expect("a key hint of the right type")
        } else {
            self.cluster.transaction()
        };
        let reads = accounts
            .iter()
            .map(|&account| {
                let key = [Value::UInt(account.into())];
                transaction
                    .read(self.table, &key, LockMode::Exclusive)
                    .expect("a read of a valid key")
            })
            .collect();
        let transfer = Transfer {
            accounts,
            reads,
            read: Vec::new(),
            step: Step::Reading,
            ending: Ending::Commit,
            durable: false,
        };
        session.execute(transaction, Commit::No, transfer);
    }

    /// Handles an answered batch; true when the transfer ended.
    fn step(
        &mut self,
        session: &mut AsyncSession<'a, Transfer>,
        completion: Completion<'a, Transfer>,
    ) -> bool {
        let Completion {
            transaction,
            user: mut transfer,
            result,
        } = completion;
        let id = transaction.id().0;
        let writing = transfer.step != Step::Reading;
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(ClientError::OutcomeUnknown { .. }) if lock(self.bank).crashed && writing => {
                let mut bank = lock(self.bank);
                match (transaction.state(), transaction.commit_gci()) {
                    // A durable commit heard committed, its durability
                    // unconfirmed: committed in that GCI for the checks.
                    (TransactionState::Committed, Some(gci)) => {
                        check(bank.ledger.committed(id, gci, &transfer.read));
                        bank.committed += 1;
                    }
                    // In doubt: the ledger keeps it pending for the
                    // restart's check.
                    _ => bank.in_doubt += 1,
                }
                return true;
            }
            Err(error) if error.is_temporary() => {
                // Failed before its commit was sent (a lost connection
                // included): the transfer did not commit.
                if writing {
                    check(lock(self.bank).ledger.aborted(id));
                }
                lock(self.bank).aborted += 1;
                return true;
            }
            Err(error) => panic!("transfer {id:#x} failed: {error}"),
        };
        match (transfer.step, transfer.ending) {
            (Step::Reading, _) => return self.write(session, transaction, transfer),
            (Step::Writing, Ending::SeparateCommit) => {
                transfer.step = Step::Committing;
                session.execute(transaction, transfer.commit(), transfer);
                return false;
            }
            (Step::Writing, _) => return self.roll_back_writes(transaction),
            (Step::Committing, _) => {}
        }
        let gci = match (outcome.committed, outcome.gci) {
            (true, Some(gci)) => gci,
            _ => panic!("transfer {id:#x} answered {outcome:?} to its commit"),
        };
        if transfer.durable && !outcome.durable {
            panic!("durable transfer {id:#x} answered {outcome:?}");
        }
        let mut bank = lock(self.bank);
        check(bank.ledger.committed(id, gci, &transfer.read));
        bank.committed += 1;
        if outcome.durable {
            bank.durable += 1;
            bank.durable_gci = bank.durable_gci.max(gci);
        }
        true
    }

    /// The writes of a transfer that rolls back after them are answered:
    /// rolls back; the ledger records the abort.
    fn roll_back_writes(&mut self, mut transaction: Transaction<'a>) -> bool {
        let id = transaction.id().0;
        match transaction.rollback() {
            Ok(()) => lock(self.bank).rolled_back += 1,
            Err(error) if lock(self.bank).crashed && error.is_temporary() => {
                lock(self.bank).aborted += 1;
            }
            Err(error) => panic!("rollback of {id:#x} after its writes: {error}"),
        }
        // Not committed either way: a lost connection aborts it too.
        check(lock(self.bank).ledger.aborted(id));
        true
    }

    /// The reads are answered: checks them and sends the writes and the
    /// commit, or rolls back (then the transfer ended: true).
    fn write(
        &mut self,
        session: &mut AsyncSession<'a, Transfer>,
        mut transaction: Transaction<'a>,
        mut transfer: Transfer,
    ) -> bool {
        let id = transaction.id().0;
        let mut balances = Vec::new();
        for (&account, &op) in transfer.accounts.iter().zip(&transfer.reads) {
            let row = transaction
                .get(op)
                .unwrap_or_else(|| panic!("transfer {id:#x}: account {account} is missing"));
            let balance = row.get(rows::BALANCE).and_then(Value::as_i64);
            let writer = row.get(rows::WRITER).and_then(Value::as_u64);
            let note = row
                .get(rows::NOTE)
                .and_then(|note| note.as_bytes().map(<[u8]>::to_vec));
            let (Some(balance), Some(writer)) = (balance, writer) else {
                panic!("transfer {id:#x}: account {account} reads back as {row:?}");
            };
            check(
                lock(self.bank)
                    .ledger
                    .check_read(account, writer, balance, &note),
            );
            transfer.read.push((account, writer));
            balances.push(balance);
        }
        if balances.iter().any(|&balance| balance < 0) {
            panic!("transfer {id:#x} read a negative balance: {balances:?}");
        }
        if self.random.below(20) == 0 {
            match transaction.rollback() {
                Ok(()) => lock(self.bank).rolled_back += 1,
                Err(error) if lock(self.bank).crashed && error.is_temporary() => {
                    lock(self.bank).aborted += 1;
                }
                Err(error) => panic!("rollback of {id:#x}: {error}"),
            }
            return true;
        }
        // Move a random amount from the first account to the others.
        let amount = self.random.below(balances[0] as u64 + 1) as i64;
        let share = amount / (balances.len() as i64 - 1);
        balances[0] -= share * (balances.len() as i64 - 1);
        for balance in &mut balances[1..] {
            *balance += share;
        }
        let mut writes = Vec::new();
        for (&account, &balance) in transfer.accounts.iter().zip(&balances) {
            let note = (self.random.below(3) == 0)
                .then(|| vec![b'n'; self.random.below(rows::NOTE_MAX_BYTES as u64) as usize]);
            let values = [
                (rows::BALANCE, Value::Int(balance)),
                (rows::WRITER, Value::UInt(id)),
                (rows::NOTE, note.clone().map_or(Value::Null, Value::Bytes)),
            ];
            transaction
                .update(self.table, &[Value::UInt(account.into())], &values)
                .unwrap_or_else(|error| panic!("transfer {id:#x}: {error}"));
            writes.push(Written {
                account,
                balance,
                note,
            });
        }
        check(
            lock(self.bank)
                .ledger
                .will_write(id, transfer.read.clone(), writes),
        );
        transfer.durable = self.random.below(4) == 0;
        transfer.ending = match self.random.below(100) {
            0..=7 => Ending::SeparateCommit,
            8..=11 => Ending::RollbackAfterWrites,
            _ => Ending::Commit,
        };
        if transfer.ending == Ending::Commit {
            transfer.step = Step::Committing;
            session.execute(transaction, transfer.commit(), transfer);
        } else {
            transfer.step = Step::Writing;
            session.execute(transaction, Commit::No, transfer);
        }
        false
    }
}

impl Transfer {
    /// The commit this transfer asks for.
    fn commit(&self) -> Commit {
        if self.durable {
            Commit::Durable
        } else {
            Commit::Yes
        }
    }
}

/// Reads every account back: the balances add up and each account's chain
/// of writers ends where its row says. Then runs the replica checker.
fn verify(cluster: &Cluster, table: &Arc<Table>, bank: &SharedBank, accounts: u32) {
    let mut total = 0;
    let mut writers = BTreeMap::new();
    for first in (0..accounts).step_by(VERIFY_CHUNK as usize) {
        let mut transaction = cluster.transaction();
        let ops: Vec<(u32, OpId)> = (first..(first + VERIFY_CHUNK).min(accounts))
            .map(|account| {
                let key = [Value::UInt(account.into())];
                let op = transaction.read(table, &key, LockMode::CommittedRead);
                (account, op.expect("a read of a valid key"))
            })
            .collect();
        transaction
            .execute(Commit::Yes)
            .unwrap_or_else(|error| panic!("reading the accounts back: {error}"));
        for (account, op) in ops {
            let row = transaction
                .get(op)
                .unwrap_or_else(|| panic!("account {account} is gone at the end"));
            let balance = row.get(rows::BALANCE).and_then(Value::as_i64);
            let writer = row.get(rows::WRITER).and_then(Value::as_u64);
            let (Some(balance), Some(writer)) = (balance, writer) else {
                panic!("account {account} reads back as {row:?}");
            };
            total += balance;
            writers.insert(account, writer);
        }
    }
    let expected = i64::from(accounts) * INITIAL_BALANCE;
    assert_eq!(
        total, expected,
        "the balances add up to {total}, not {expected}"
    );
    check(lock(bank).ledger.check_end(&writers));
    let report = cluster
        .check_replicas()
        .unwrap_or_else(|error| panic!("the replica check failed to run: {error}"));
    assert_eq!(report.mismatches, 0, "replicas differ: {report}");
    let mut bank = lock(bank);
    bank.final_total = total;
    bank.partitions_checked = report.partitions_checked;
}

fn check(result: Result<(), String>) {
    if let Err(message) = result {
        panic!("{message}");
    }
}
