//! The bank: the simulator's workload, played by API nodes that run the
//! production `client` crate (`hosted`), as applications do.
//!
//! API node 0 creates the table (`Cluster::create_table`; after a
//! restart it describes the table the restart restored instead); the
//! others describe it. The bank's `slots` (concurrent transactions) are
//! spread over the API nodes, each of which runs its slots' transactions
//! from one `AsyncSession` (`slots`). They insert the accounts, run
//! transactions until `transactions` have ended, and finally read
//! everything back. Half the transactions start with a key hint (routed
//! by the client's map to the primary replica's node), the others round
//! robin over every tc.
//!
//! A transfer reads 2-4 random accounts under exclusive (sometimes
//! shared) locks, then writes new balances that sum to the old ones
//! (sometimes writing one account twice), its own id as `writer` and a
//! random-length note, and commits, now and then with `Commit::Durable`.
//! Some transfers end otherwise: a commit of its own after the writes, a
//! rollback after the reads or after the writes, or silence until the
//! tc's inactivity timeout aborts them. Conflicting transfers wait for
//! locks; deadlocks end by the lock-wait timeout, and a transaction that
//! fails with a temporary error (deadlock, out of records) is retried.
//! Scratch transactions insert, update, delete and read keys owned by one
//! slot, whose exact state the slot models, so every answer (including
//! DuplicateKey and NoSuchRow) is predicted. Token transactions insert and
//! delete a few keys every slot contends for. `plans` makes these choices.
//!
//! Every answer is checked as it arrives (see `ledger` for what reads
//! imply) and at the end: the balances add up, every account's writers form
//! one chain, scratch rows match the model, token inserts and deletes
//! balance, every transaction got its answer, and no commit the client
//! reported durable is above the complete GCI. GCIs never go down along a
//! chain of transactions that read or overwrote each other's writes: an
//! account's writers (the ledger), a token's delete after its insert (the
//! tokens' checker), and each scratch key's locking transactions after its
//! last write (the slot's model), whichever tcs of whichever nodes
//! coordinated them. API node 0 then runs the client's replica checker.
//!
//! What a real client cannot send (a rollback right behind a batch,
//! without waiting for its answer; operations arriving after an abort)
//! is scripted in tests/scenarios.rs with raw signals.
//!
//! Across a whole-cluster crash (`restart`): what the clients knew at the
//! crash (the client's own answers: a commit whose answer was lost is
//! `OutcomeUnknown`, in doubt; anything else that failed did not commit),
//! the check of the restored table against it, and a bank that continues
//! from the restored table (it describes the table instead of creating it
//! and inserts only the accounts the restart did not restore).

use crate::hosted::{HostedApiNodes, HostedContext};
use crate::ledger::{Ledger, Tokens};
use crate::plans::{self, Plan};
use crate::rows::Row;
use crate::simulation::Client;
use crate::world::ClientIo;
use client::{ClientError, Cluster, ConnectOptions, Table};
use signal::replica_check::ReplicaCheckReport;
use signal::{Envelope, ErrorCode, Gci, NodeId};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

mod restart;
mod slots;
pub use restart::CrashedBank;

/// Balance every account starts with.
pub const INITIAL_BALANCE: i64 = 1000;
/// Scratch keys each slot owns.
pub const SCRATCH_KEYS_PER_SLOT: u32 = 8;
/// The first scratch key (accounts are 0..accounts).
pub const SCRATCH_BASE: u32 = 1_000_000;
/// The first token key: keys every slot inserts and deletes.
pub const TOKEN_BASE: u32 = 2_000_000;
/// Token keys.
pub const TOKENS: u32 = 16;
/// The bank table's name.
pub const TABLE_NAME: &str = "bank";
/// Accounts inserted per loading transaction.
const LOAD_CHUNK: u32 = 10;
/// Accounts read per verifying transaction.
const VERIFY_CHUNK: u32 = 25;
/// The first API node id (API nodes have ids 128..=255).
const FIRST_API_NODE: u16 = 200;
/// How often an API node whose slots all wait for the phase to change
/// looks again (simulated time).
const PHASE_POLL: Duration = Duration::from_millis(1);
/// Simulated time the nodes get to finish what follows the last commits'
/// acknowledgements (COMPLETE at the backups) before the replica check.
const SETTLE_BEFORE_CHECK: Duration = Duration::from_millis(100);

/// What the bank does.
#[derive(Clone, Debug)]
pub struct BankOptions {
    /// Transactions (transfers, scratch and token) to end before verifying.
    pub transactions: u64,
    /// Accounts.
    pub accounts: u32,
    /// Concurrent transactions (client slots).
    pub slots: u16,
    /// API nodes the slots are spread over.
    pub api_nodes: u16,
}

impl Default for BankOptions {
    fn default() -> BankOptions {
        BankOptions {
            transactions: 10_000,
            accounts: 200,
            slots: 16,
            api_nodes: 2,
        }
    }
}

/// What the clients counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BankCounters {
    /// Workload transactions (transfers, scratch, tokens) committed.
    pub committed: u64,
    /// Workload transactions aborted (refused) or rolled back.
    pub aborted: u64,
    /// Of `aborted`, the rollbacks (abandoned transfers included).
    pub rolled_back: u64,
    /// Of `aborted`, the refusals by error code number.
    pub aborts_by_code: BTreeMap<u16, u64>,
    /// Transactions of every phase the client heard commit.
    pub all_committed: u64,
    /// Transactions of every phase the tc aborted (refused after taking a
    /// record, rolled back, abandoned).
    pub all_aborted: u64,
    /// Transactions the tc refused before taking a record (out of records).
    pub refused_without_record: u64,
    /// Transactions started at a tc on the node of the primary replica of
    /// their first key.
    pub started_at_primary: u64,
    /// Transactions started at a tc on another node.
    pub started_elsewhere: u64,
    /// Transfers that committed.
    pub transfers_committed: u64,
    /// Of all commits, those with `Commit::Durable`.
    pub durable_commits: u64,
    /// The sum of balances read at the end.
    pub final_total_balance: i64,
    /// Scratch rows present at the end.
    pub scratch_rows: u64,
}

/// The bank's phases, in order; the slots move on together once each has
/// nothing left in the current one.
#[derive(Clone, Copy, PartialEq, Eq, Debug, PartialOrd, Ord)]
enum Phase {
    /// API nodes connect; API node 0 creates or describes the table.
    Connecting,
    Loading,
    Running,
    Verifying,
    /// Verified; API node 0 runs the replica checker.
    Checking,
    Done,
}

/// What a scratch key holds: `None` no row, `Some(note)` a row with this
/// note (`Some(None)`: a NULL note).
type ScratchState = Option<Option<Vec<u8>>>;

/// A slot as the bank sees it (the API node running it keeps the rest).
struct Slot {
    /// Scratch keys' states.
    scratch: Vec<ScratchState>,
    /// GCI of each scratch key's last committed write (a locking
    /// transaction on the key that follows commits in no earlier GCI).
    scratch_gci: Vec<Gci>,
    /// Each scratch key at the start of this bank's run (and the GCI of its
    /// row), then every committed write since: (key index, GCI, what the key
    /// holds after it). After a crash, the key must hold what the last
    /// write up to the restored GCI left (see `restart`).
    scratch_start: Vec<(ScratchState, Gci)>,
    scratch_log: Vec<(u32, Gci, ScratchState)>,
    /// A scratch transaction whose commit's outcome the client reported
    /// unknown at a crash: (key index, state after it if it committed).
    scratch_in_doubt: Option<(u32, ScratchState)>,
    /// No plan left in this phase, nothing in flight.
    parked: bool,
}

impl Slot {
    fn new() -> Slot {
        let keys = SCRATCH_KEYS_PER_SLOT as usize;
        Slot {
            scratch: vec![None; keys],
            scratch_gci: vec![Gci(0); keys],
            scratch_start: vec![(None, Gci(0)); keys],
            scratch_log: Vec::new(),
            scratch_in_doubt: None,
            parked: false,
        }
    }
}

/// What every API node of the bank shares. They take turns (one runs at
/// a time, see `hosted`), so the lock is never contended and what they
/// do to it is the same for the same seed.
struct State {
    options: BankOptions,
    phase: Phase,
    /// The bank continues after a crash and restart (see `restart`).
    resumed: bool,
    /// The table's id, once created or described (in this run or, for a
    /// resumed bank, in an earlier one).
    table_id: Option<u32>,
    /// API node 0 created or described the table in this run.
    described: bool,
    slots: Vec<Slot>,
    /// Accounts still to insert, as (first, count) chunks.
    load_queue: VecDeque<(u32, u32)>,
    verify_queue: VecDeque<Plan>,
    started: u64,
    ended: u64,
    /// The accounts as read back at the end (account -> row).
    final_rows: BTreeMap<u32, Row>,
    /// Token key -> writer of the row read at the end (`None`: no row).
    final_tokens: BTreeMap<u32, Option<u64>>,
    ledger: Ledger,
    tokens: Tokens,
    /// Token deletes in doubt at a crash, per key.
    token_deletes_in_doubt: BTreeMap<u32, u32>,
    /// Transactions in doubt at a crash.
    in_doubt: u64,
    counters: BankCounters,
    /// The GCI of every writing transaction the clients heard commit.
    committed_gcis: Vec<Gci>,
    /// The highest GCI of a commit the client reported durable.
    durable_gci: Gci,
    /// The cluster crashed: the API nodes stop starting transactions and
    /// end once their transactions have failed.
    crashed: bool,
    replica_check: Option<ReplicaCheckReport>,
}

type Shared = Arc<Mutex<State>>;

fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The accounts of `accounts` as loading transactions insert them: runs
/// of consecutive accounts, at most [`LOAD_CHUNK`] per transaction.
fn load_chunks(accounts: impl IntoIterator<Item = u32>) -> VecDeque<(u32, u32)> {
    let mut chunks: VecDeque<(u32, u32)> = VecDeque::new();
    for account in accounts {
        match chunks.back_mut() {
            Some((first, count)) if *first + *count == account && *count < LOAD_CHUNK => {
                *count += 1
            }
            _ => chunks.push_back((account, 1)),
        }
    }
    chunks
}

/// The bank of one run (or of one part of a run between crashes): its
/// state and its hosted API nodes, the simulator's [`Client`].
pub struct Bank {
    shared: Shared,
    api_nodes: HostedApiNodes<()>,
}

impl Bank {
    /// A bank that has not started; [`Bank::begin`] starts its API nodes.
    pub fn new(options: BankOptions) -> Bank {
        assert!(
            options.api_nodes >= 1 && options.slots >= 1 && options.accounts >= 4,
            "the bank needs an API node, a slot and at least 4 accounts"
        );
        assert!(
            options.accounts <= SCRATCH_BASE,
            "accounts are the keys below the scratch keys"
        );
        let state = State {
            phase: Phase::Connecting,
            resumed: false,
            table_id: None,
            described: false,
            slots: (0..options.slots).map(|_| Slot::new()).collect(),
            load_queue: load_chunks(0..options.accounts),
            verify_queue: VecDeque::new(),
            started: 0,
            ended: 0,
            final_rows: BTreeMap::new(),
            final_tokens: BTreeMap::new(),
            ledger: Ledger::default(),
            tokens: Tokens::default(),
            token_deletes_in_doubt: BTreeMap::new(),
            in_doubt: 0,
            counters: BankCounters::default(),
            committed_gcis: Vec::new(),
            durable_gci: Gci(0),
            crashed: false,
            replica_check: None,
            options,
        };
        Bank {
            shared: Arc::new(Mutex::new(state)),
            api_nodes: HostedApiNodes::default(),
        }
    }

    /// Starts every API node (each connects to every data node).
    pub fn begin(&mut self, io: &mut ClientIo<'_>) {
        let api_nodes = lock(&self.shared).options.api_nodes;
        for index in 0..api_nodes {
            let shared = Arc::clone(&self.shared);
            let api_node = NodeId(FIRST_API_NODE + index);
            self.api_nodes.spawn(api_node, io, move |context| {
                api_node_main(&context, index, &shared)
            });
        }
    }

    /// Whether the run finished (everything verified, replicas checked,
    /// every API node ended).
    pub fn done(&self) -> bool {
        lock(&self.shared).phase == Phase::Done && self.api_nodes.all_ended()
    }

    /// Whether every API node ended (after a crash, once each has seen
    /// its transactions fail).
    pub fn api_nodes_ended(&self) -> bool {
        self.api_nodes.all_ended()
    }

    /// What the clients counted.
    pub fn counters(&self) -> BankCounters {
        lock(&self.shared).counters.clone()
    }

    /// The replica checker's report, once API node 0 ran it.
    pub fn replica_check(&self) -> Option<ReplicaCheckReport> {
        lock(&self.shared).replica_check.clone()
    }

    /// The highest GCI of a commit the client reported durable.
    pub fn durable_gci(&self) -> Gci {
        lock(&self.shared).durable_gci
    }

    /// The rows the table holds once verified: accounts, scratch rows and
    /// the tokens read back.
    pub fn rows_expected(&self) -> u64 {
        let state = lock(&self.shared);
        let tokens = state
            .final_tokens
            .values()
            .filter(|row| row.is_some())
            .count();
        u64::from(state.options.accounts) + state.scratch_rows() + tokens as u64
    }

    /// The table's id, once created or described.
    pub fn table_id(&self) -> Option<u32> {
        lock(&self.shared).table_id
    }

    /// Whether the clients created or described their table in this run
    /// (a resumed bank knows its id from before).
    pub fn described(&self) -> bool {
        lock(&self.shared).described
    }

    /// The accounts as read back at the end (account -> row).
    pub fn final_rows(&self) -> BTreeMap<u32, Row> {
        lock(&self.shared).final_rows.clone()
    }

    /// The cluster crashed (the simulation dropped everything in flight):
    /// every connection of the API nodes ends, and each API node gets its
    /// turn to see its transactions fail. Run the simulation until
    /// [`Bank::api_nodes_ended`], then take [`Bank::crashed`].
    pub fn lose_connections(&mut self, io: &mut ClientIo<'_>) {
        lock(&self.shared).crashed = true;
        self.api_nodes.lose_connections("the data node crashed", io);
    }
}

impl Client for Bank {
    fn on_signal(&mut self, envelope: Envelope, io: &mut ClientIo<'_>) {
        self.api_nodes.on_signal(envelope, io);
    }

    fn on_wake(&mut self, token: u64, io: &mut ClientIo<'_>) {
        self.api_nodes.on_wake(token, io);
    }
}

impl State {
    fn scratch_rows(&self) -> u64 {
        self.slots
            .iter()
            .flat_map(|slot| &slot.scratch)
            .filter(|key| key.is_some())
            .count() as u64
    }

    /// The next plan of slot `slot` in the current phase; `None` parks it.
    fn next_plan(&mut self, slot: usize, random: &mut stdx::mix::XorShift) -> Option<Plan> {
        match self.phase {
            Phase::Loading => self
                .load_queue
                .pop_front()
                .map(|(first, count)| Plan::Load { first, count }),
            Phase::Running if self.started < self.options.transactions => {
                self.started += 1;
                Some(match random.below(100) {
                    0..=69 => plans::transfer_plan(random, self.options.accounts),
                    70..=89 => plans::scratch_plan(random, slot, &self.slots[slot].scratch),
                    _ => Plan::Token {
                        key: TOKEN_BASE + random.below(u64::from(TOKENS)) as u32,
                        insert: random.below(2) == 0,
                    },
                })
            }
            Phase::Verifying => self.verify_queue.pop_front(),
            _ => None,
        }
    }

    /// Every slot parked: the phase's work is done; move on.
    fn maybe_advance(&mut self) {
        if self.crashed || !self.slots.iter().all(|slot| slot.parked) {
            return;
        }
        match self.phase {
            Phase::Loading => self.phase = Phase::Running,
            Phase::Running => {
                self.phase = Phase::Verifying;
                let accounts = self.options.accounts;
                for first in (0..accounts).step_by(VERIFY_CHUNK as usize) {
                    self.verify_queue.push_back(Plan::VerifyAccounts {
                        first,
                        count: VERIFY_CHUNK.min(accounts - first),
                    });
                }
                for slot in 0..self.slots.len() {
                    for index in 0..SCRATCH_KEYS_PER_SLOT {
                        let present = self.slots[slot].scratch[index as usize].clone();
                        let plan = plans::scratch_verify(slot, index, present);
                        self.verify_queue.push_back(plan);
                    }
                }
                for key in TOKEN_BASE..TOKEN_BASE + TOKENS {
                    self.verify_queue.push_back(Plan::VerifyToken { key });
                }
            }
            Phase::Verifying => {
                self.finish();
                self.phase = Phase::Checking;
                return;
            }
            _ => return,
        }
        for slot in &mut self.slots {
            slot.parked = false;
        }
    }

    /// The end-of-run checks of what the clients read back.
    fn finish(&mut self) {
        let accounts = self.options.accounts;
        if self.final_rows.len() != accounts as usize {
            self.fail(format!(
                "read back {} accounts of {accounts}",
                self.final_rows.len()
            ));
        }
        let total: i64 = self.final_rows.values().map(|row| row.balance).sum();
        self.counters.final_total_balance = total;
        let expected = INITIAL_BALANCE * i64::from(accounts);
        if total != expected {
            self.fail(format!("the balances add up to {total}, not {expected}"));
        }
        let final_writers = self
            .final_rows
            .iter()
            .map(|(&account, row)| (account, row.writer))
            .collect();
        self.check(self.ledger.check_end(&final_writers));
        if self.final_tokens.len() != TOKENS as usize {
            self.fail(format!(
                "read back {} tokens of {TOKENS}",
                self.final_tokens.len()
            ));
        }
        self.check(self.tokens.check_end(&self.final_tokens));
        self.counters.scratch_rows = self.scratch_rows();
    }

    fn fail(&self, message: String) -> ! {
        panic!(
            "bank invariant violated (phase {:?}, {} transactions ended): {message}",
            self.phase, self.ended
        );
    }

    fn check(&self, result: Result<(), String>) {
        if let Err(message) = result {
            self.fail(message);
        }
    }
}

/// One API node: connect, get the table, run this API node's slots
/// through every phase; API node 0 runs the replica checker at the end.
fn api_node_main(context: &HostedContext, index: u16, shared: &Shared) {
    let crashed = || lock(shared).crashed;
    let cluster = match context.connect(ConnectOptions::default()) {
        Ok(cluster) => cluster,
        Err(_) if crashed() => return,
        Err(error) => panic!("API node {}: connecting: {error}", context.api_node),
    };
    let table = if index == 0 {
        match establish_table(&cluster, shared) {
            Ok(table) => table,
            Err(_) if crashed() => return,
            Err(error) => panic!("API node 0: the bank table: {error}"),
        }
    } else {
        if !wait_for_phase(context, shared, Phase::Loading) {
            return;
        }
        match cluster.table(TABLE_NAME) {
            Ok(table) => table,
            Err(_) if crashed() => return,
            Err(error) => panic!("API node {}: describing: {error}", context.api_node),
        }
    };
    let api_nodes = lock(shared).options.api_nodes;
    let slots: Vec<usize> = (0..lock(shared).slots.len())
        .filter(|slot| slot % usize::from(api_nodes) == usize::from(index))
        .collect();
    slots::run(context, &cluster, &table, shared, &slots);
    if index != 0 {
        return;
    }
    // Every slot verified (or the cluster crashed): check the replicas.
    if !wait_for_phase(context, shared, Phase::Checking) {
        return;
    }
    context.sleep(SETTLE_BEFORE_CHECK);
    let report = cluster
        .check_replicas()
        .unwrap_or_else(|error| panic!("the replica checker failed to run: {error}"));
    let mut state = lock(shared);
    if !report.is_consistent() {
        state.fail(format!("replicas differ: {report}"));
    }
    state.replica_check = Some(report);
    state.phase = Phase::Done;
}

/// Waits until the bank's phase is `phase` or later; false if the
/// cluster crashed first.
fn wait_for_phase(context: &HostedContext, shared: &Shared, phase: Phase) -> bool {
    loop {
        {
            let state = lock(shared);
            if state.crashed {
                return false;
            }
            if state.phase >= phase {
                return true;
            }
        }
        context.sleep(PHASE_POLL);
    }
}

/// API node 0 creates the table, or, after a restart, describes what the
/// restart restored (a resumed bank that never heard its create confirmed
/// creates it, and describes it when told it exists); the other API
/// nodes describe it once the phase moves on.
fn establish_table(cluster: &Cluster, shared: &Shared) -> Result<Arc<Table>, ClientError> {
    let (resumed, known) = {
        let state = lock(shared);
        (state.resumed, state.table_id)
    };
    if !(resumed && known.is_some()) {
        match cluster.create_table(&crate::rows::bank_table()) {
            Ok(_) => {}
            Err(error) if resumed && error.code() == Some(ErrorCode::TableExists) => {}
            Err(error) => return Err(error),
        }
    }
    let table = cluster.table(TABLE_NAME)?;
    let mut state = lock(shared);
    let id = table.def().id;
    if state.table_id.is_some_and(|known| known != id) {
        state.fail(format!(
            "the table was {:?} before the restart and is {id} after",
            state.table_id
        ));
    }
    state.table_id = Some(id);
    state.described = true;
    state.phase = Phase::Loading;
    Ok(table)
}
