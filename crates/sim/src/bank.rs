//! The simulated API nodes and their workload: a bank.
//!
//! The clients speak the real protocol with the real signal types: every
//! API node registers with every data node (API_REGREQ), one creates the
//! table at the president (CREATE_TAB_REQ), one asks a random data node for
//! its definition and partition map (GET_TABINFO_REQ); they insert the
//! accounts, then run `slots` concurrent transactions at a time until
//! `transactions` have ended, and finally read everything back. Each
//! transaction goes to a random tc, half the time on the node of the
//! primary replica of its first key (found through the map, as a
//! distribution-aware client does), otherwise on any data node.
//!
//! A transfer reads 2-4 random accounts under exclusive (sometimes shared)
//! locks in one batch, then writes new balances that sum to the old ones
//! (sometimes writing one account twice), its own id as `writer` and a
//! random-length note, and commits. Some transfers end otherwise: commit by
//! a separate TC_COMMITREQ, roll back after the reads, after the writes or
//! right behind the reads without waiting, or go silent until the tc's
//! inactivity timeout aborts them. Conflicting transfers wait for locks;
//! deadlocks end by the lock-wait timeout, and a transaction that fails
//! with a temporary error (deadlock, out of records) is retried.
//! Scratch transactions insert, update, delete and read keys owned by one
//! slot, whose exact state the slot models, so every answer (including
//! DuplicateKey and NoSuchRow) is predicted. Token transactions insert and
//! delete a few keys every slot contends for. `plans` makes these choices.
//!
//! Every answer is checked as it arrives (see `ledger` for what reads
//! imply) and at the end: the balances add up, every account's writers form
//! one chain, scratch rows match the model, token inserts and deletes
//! balance, and every transaction got its answer. GCIs never go down along
//! a chain of transactions that read or overwrote each other's writes: an
//! account's writers (the ledger), a token's delete after its insert (the
//! tokens' checker), and each scratch key's locking transactions after its
//! last write (the slot's model), whichever tcs of whichever nodes
//! coordinated them. A second refusal of one
//! transaction is counted, not failed: `stray_refusals` when the tc had a
//! record for it (the tc answers each aborted batch once, so the tests
//! assert none; tests/scenarios.rs has the case that once did), and
//! `refusals_after_no_record` for the late operations of a batch whose
//! START was refused for lack of a transaction record (expected: there was
//! no record to remember that refusal in, so each later operation is
//! refused as UnknownTransaction).
//!
//! Across a whole-cluster crash (`restart`): what the clients knew at the
//! crash, the check of the restored table against it, and a bank that
//! continues from the restored table (it describes the table instead of
//! creating it and inserts only the accounts the restart did not restore).

use crate::ledger::{Ledger, Tokens, Written};
use crate::plans::{self, Ending, Plan};
use crate::rows::{self, Row};
use crate::simulation::Client;
use crate::world::ClientIo;
use signal::attr::key_hash;
use signal::error::ErrorClass;
use signal::partition::bucket;
use signal::schema::TableDef;
use signal::signals::*;
use signal::{
    BlockKind, BlockRef, Envelope, ErrorCode, Gci, NodeId, Section, Signal, TransactionId,
};
use std::collections::{BTreeMap, HashMap, VecDeque};

mod restart;
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
/// Accounts inserted per loading transaction.
const LOAD_CHUNK: u32 = 10;
/// Accounts read per verifying transaction.
const VERIFY_CHUNK: u32 = 25;
/// The first API node id (API nodes have ids 128..=255).
const FIRST_API_NODE: u16 = 200;
/// Client timer token of the watchdog; slots use their index.
const WATCHDOG: u64 = u64::MAX;
/// How often the watchdog looks.
const WATCHDOG_PERIOD_US: u64 = 1_000_000;
/// Longer than any timeout of the node: a transaction without an answer
/// for this long lost its reply.
const STUCK_TRANSACTION_US: u64 = 15_000_000;
/// How long one plan may keep failing with temporary errors before the
/// run is declared stuck. Under overload (the tight-limits workload) the tc
/// admits whoever asks first, so one client may lose for seconds while
/// others commit; this limit only catches a plan that can never succeed
/// (a batch larger than the tc's operation records, say). Lost answers and
/// a node that stops making progress have their own, shorter watchdogs.
const RETRY_LIMIT_US: u64 = 120_000_000;

/// What the bank does.
#[derive(Clone, Debug)]
pub struct BankOptions {
    /// Transactions (transfers and scratch) to end before verifying.
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
    /// Workload transactions (transfers and scratch) committed.
    pub committed: u64,
    /// Workload transactions aborted (TCKEYREF) or rolled back.
    pub aborted: u64,
    /// Of `aborted`, the rollbacks.
    pub rolled_back: u64,
    /// Of `aborted`, by error code number.
    pub aborts_by_code: BTreeMap<u16, u64>,
    /// Transactions of every phase the tc finished by committing.
    pub all_committed: u64,
    /// Transactions of every phase the tc finished by aborting.
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
    /// The sum of balances read at the end.
    pub final_total_balance: i64,
    /// Scratch rows present at the end.
    pub scratch_rows: u64,
    /// TCKEYREF UnknownTransaction for operations of a batch that reached
    /// the tc after it had aborted the transaction and answered already
    /// (see tests/scenarios.rs: a second answer the tc should not send).
    pub stray_refusals: u64,
    /// TCKEYREF UnknownTransaction for the later operations of a batch
    /// whose START the tc refused with OutOfTransactionRecords (expected).
    pub refusals_after_no_record: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    Registering,
    Creating,
    Describing,
    Loading,
    Running,
    Verifying,
    Done,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Step {
    /// One batch with COMMIT (load, scratch, verify).
    Single,
    /// A transfer's read batch.
    Reading,
    /// A transfer's write batch.
    Writing,
    /// TC_COMMITREQ sent.
    Committing,
    /// TC_ROLLBACKREQ sent.
    RollingBack,
    /// Silent, waiting for the inactivity abort.
    Abandoned,
    /// TC_ROLLBACKREQ sent behind the read batch; anything may come before
    /// TC_ROLLBACKCONF.
    RollingBackImpatiently,
}

struct Active {
    id: TransactionId,
    tc: BlockRef,
    plan: Plan,
    step: Step,
    started_us: u64,
    /// Operations sent in the current batch.
    batch_ops: u32,
    next_client_op: u32,
    /// TRANSID_AI rows of the current batch by client op.
    rows: BTreeMap<u32, Row>,
    /// A transfer's reads: (account, writer, balance).
    reads: Vec<(u32, u64, i64)>,
    /// An impatient rollback heard the tc refuse the transaction before it
    /// took a record.
    refused_without_record: bool,
}

struct Slot {
    api: BlockRef,
    /// Scratch keys' notes (`None` inside: NULL note); `None`: absent.
    scratch: Vec<Option<Option<Vec<u8>>>>,
    /// GCI of each scratch key's last committed write (a locking
    /// transaction on the key that follows commits in no earlier GCI).
    scratch_gci: Vec<Gci>,
    /// Each scratch key at the start of this bank's run (and the GCI of its
    /// row), then every committed write since: (key index, GCI, what the key
    /// holds after it). After a crash, the key must hold what the last
    /// write up to the restored GCI left (see `restart`).
    scratch_start: Vec<(ScratchState, Gci)>,
    scratch_log: Vec<(u32, Gci, ScratchState)>,
    active: Option<Active>,
    retry: Option<Plan>,
    /// Times in a row the slot's plan failed with a temporary error.
    retries: u32,
    /// When the slot's plan first failed in this row of failures.
    retrying_since_us: Option<u64>,
    /// No wake is scheduled: the slot waits for the phase to change.
    parked: bool,
}

/// The bank client of one run.
pub struct Bank {
    options: BankOptions,
    phase: Phase,
    apis: Vec<BlockRef>,
    registered: usize,
    /// tc instances of each data node, as its membership said.
    tc_instances: BTreeMap<NodeId, u16>,
    table: Option<(u32, u32)>,
    /// The table's definition and partition map, from GET_TABINFO_CONF.
    described: Option<(TableDef, PartitionMap)>,
    /// A resumed bank's table as an earlier run described it: the restart
    /// restored it with rows the clients know of, before they describe it
    /// again (a crash may come first; the table must still be read back).
    described_before: Option<(TableDef, PartitionMap)>,
    slots: Vec<Slot>,
    by_transaction: HashMap<u64, usize>,
    /// Transactions that ended by TCKEYREF -> (operations the client sent,
    /// refused before the tc took a record): the tc may refuse the late
    /// ones once more.
    refused: HashMap<u64, (u32, bool)>,
    counters_per_api: Vec<u64>,
    /// Accounts still to insert, as (first, count) chunks.
    load_queue: VecDeque<(u32, u32)>,
    /// The bank continues after a crash and restart: the table exists
    /// (it is described, not created) and holds what `restart` restored.
    resumed: bool,
    started: u64,
    ended: u64,
    last_progress_us: u64,
    verify_queue: VecDeque<Plan>,
    final_rows: BTreeMap<u32, Row>,
    /// Token key -> writer of the row read at the end (`None`: no row).
    final_tokens: BTreeMap<u32, Option<u64>>,
    ledger: Ledger,
    tokens: Tokens,
    counters: BankCounters,
    /// The GCI of every writing transaction the clients heard commit.
    committed_gcis: Vec<Gci>,
}

/// What a scratch key holds: `None` no row, `Some(note)` a row with this
/// note (`Some(None)`: a NULL note).
type ScratchState = Option<Option<Vec<u8>>>;

/// Name of the bank table, as GET_TABINFO_REQ asks for it.
const TABLE_NAME: &[u8] = b"bank";

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

impl Bank {
    /// A bank that has not sent anything yet; [`Bank::begin`] starts it.
    pub fn new(options: BankOptions) -> Bank {
        assert!(
            options.api_nodes >= 1 && options.slots >= 1 && options.accounts >= 4,
            "the bank needs an API node, a slot and at least 4 accounts"
        );
        let apis: Vec<BlockRef> = (0..options.api_nodes)
            .map(|index| BlockRef::new(NodeId(FIRST_API_NODE + index), BlockKind::Api, 0))
            .collect();
        let slots = (0..options.slots)
            .map(|index| Slot {
                api: apis[index as usize % apis.len()],
                scratch: vec![None; SCRATCH_KEYS_PER_SLOT as usize],
                scratch_gci: vec![Gci(0); SCRATCH_KEYS_PER_SLOT as usize],
                scratch_start: vec![(None, Gci(0)); SCRATCH_KEYS_PER_SLOT as usize],
                scratch_log: Vec::new(),
                active: None,
                retry: None,
                retries: 0,
                retrying_since_us: None,
                parked: true,
            })
            .collect();
        Bank {
            counters_per_api: vec![0; apis.len()],
            apis,
            phase: Phase::Registering,
            registered: 0,
            tc_instances: BTreeMap::new(),
            table: None,
            described: None,
            described_before: None,
            slots,
            by_transaction: HashMap::new(),
            refused: HashMap::new(),
            load_queue: load_chunks(0..options.accounts),
            resumed: false,
            started: 0,
            ended: 0,
            last_progress_us: 0,
            verify_queue: VecDeque::new(),
            final_rows: BTreeMap::new(),
            final_tokens: BTreeMap::new(),
            ledger: Ledger::default(),
            tokens: Tokens::default(),
            counters: BankCounters::default(),
            committed_gcis: Vec::new(),
            options,
        }
    }

    /// Registers every API node with every data node and arms the watchdog.
    pub fn begin(&mut self, io: &mut ClientIo<'_>) {
        let nodes = io.data_nodes().to_vec();
        for &api in &self.apis {
            for &node in &nodes {
                io.send(Envelope {
                    from: api,
                    to: BlockRef::new(node, BlockKind::Membership, 0),
                    signal: ApiRegReq {
                        protocol_version: 1,
                        token: signal::signals::ApiToken::NONE,
                    }
                    .into(),
                });
            }
        }
        self.last_progress_us = io.now_us();
        io.wake_after_us(WATCHDOG_PERIOD_US, WATCHDOG);
    }

    /// Whether the run finished (everything verified).
    pub fn done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// What the clients counted.
    pub fn counters(&self) -> &BankCounters {
        &self.counters
    }

    /// The scratch rows the model says exist.
    pub fn scratch_rows_expected(&self) -> u64 {
        self.slots
            .iter()
            .flat_map(|slot| &slot.scratch)
            .filter(|key| key.is_some())
            .count() as u64
    }

    /// The rows the table holds once verified: accounts, scratch rows and
    /// the tokens read back.
    pub fn rows_expected(&self) -> u64 {
        let tokens = self
            .final_tokens
            .values()
            .filter(|row| row.is_some())
            .count();
        u64::from(self.options.accounts) + self.scratch_rows_expected() + tokens as u64
    }

    /// The table's id, once created.
    pub fn table_id(&self) -> Option<u32> {
        self.table.map(|(id, _)| id)
    }

    /// The table's definition and partition map, once described.
    pub fn described_table(&self) -> Option<(&TableDef, &PartitionMap)> {
        self.described.as_ref().map(|(table, map)| (table, map))
    }

    /// The accounts as read back at the end (account -> row).
    pub fn final_rows(&self) -> &BTreeMap<u32, Row> {
        &self.final_rows
    }

    /// The node of the primary replica of `key`'s partition.
    fn primary_of(&self, key: u32) -> NodeId {
        let (table, map) = self
            .described
            .as_ref()
            .expect("transactions start once the table is described");
        let hash = key_hash(table, &rows::key_bytes(key)).expect("a bank key is a valid key");
        let partition = map.bucket_partitions[bucket(hash) as usize];
        map.partitions[partition as usize].replicas[0]
    }

    fn fail(&self, io: &ClientIo<'_>, message: String) -> ! {
        panic!(
            "bank invariant violated at {} us (phase {:?}, {} transactions ended): {message}",
            io.now_us(),
            self.phase,
            self.ended
        );
    }

    fn check(&self, io: &ClientIo<'_>, result: Result<(), String>) {
        if let Err(message) = result {
            self.fail(io, message);
        }
    }

    // ---- phases ----------------------------------------------------------

    fn api_registered(&mut self, from: BlockRef, conf: ApiRegConf, io: &mut ClientIo<'_>) {
        if self.phase != Phase::Registering || !conf.started || conf.tc_instances == 0 {
            self.fail(
                io,
                format!("unexpected {conf:?} from {from} in phase {:?}", self.phase),
            );
        }
        let previous = self.tc_instances.insert(from.node, conf.tc_instances);
        if previous.is_some_and(|count| count != conf.tc_instances) {
            self.fail(
                io,
                format!("node {} told API nodes different tc counts", from.node),
            );
        }
        self.registered += 1;
        if self.registered < self.apis.len() * io.data_nodes().len() {
            return;
        }
        if self.resumed && self.table.is_some() {
            // The restarted cluster restored the table: describe it.
            return self.describe(io);
        }
        self.phase = Phase::Creating;
        let definition = rows::bank_table().encode_to_vec();
        let definition = io
            .pool()
            .copy_from(&definition)
            .expect("the section pool holds a table definition");
        // Schema changes run at the president's dict.
        io.send(Envelope {
            from: self.apis[0],
            to: BlockRef::new(io.data_node(), BlockKind::Dict, 0),
            signal: CreateTabReq {
                request_id: 1,
                definition,
            }
            .into(),
        });
    }

    fn table_created(&mut self, conf: CreateTabConf, io: &mut ClientIo<'_>) {
        if self.phase != Phase::Creating || conf.request_id != 1 {
            self.fail(io, format!("unexpected {conf:?} in phase {:?}", self.phase));
        }
        self.table = Some((conf.table_id, conf.table_version));
        self.describe(io);
    }

    /// A schema request was refused. Only a resumed bank whose clients
    /// crashed before they heard their create confirmed may hear that the
    /// table exists (the create was durable): it describes the table.
    fn schema_refused(&mut self, from: BlockRef, refusal: SchemaRef, io: &mut ClientIo<'_>) {
        let table_was_created = self.resumed
            && self.phase == Phase::Creating
            && refusal.request_id == 1
            && refusal.error == ErrorCode::TableExists;
        if !table_was_created {
            self.fail(
                io,
                format!("{refusal:?} from {from} in phase {:?}", self.phase),
            );
        }
        self.describe(io);
    }

    /// Asks a random data node's dict for the table's definition and map.
    fn describe(&mut self, io: &mut ClientIo<'_>) {
        self.phase = Phase::Describing;
        // Every dict holds the table once the create is confirmed (or the
        // restart restored it): ask any.
        let node = io.random_data_node();
        let api = self.apis[io.below(self.apis.len() as u64) as usize];
        let name = io
            .pool()
            .copy_from(TABLE_NAME)
            .expect("the section pool holds a table name");
        io.send(Envelope {
            from: api,
            to: BlockRef::new(node, BlockKind::Dict, 0),
            signal: GetTabInfoReq {
                request_id: 2,
                name,
            }
            .into(),
        });
    }

    fn table_described(&mut self, from: BlockRef, conf: GetTabInfoConf, io: &mut ClientIo<'_>) {
        if self.phase != Phase::Describing || conf.request_id != 2 {
            self.fail(
                io,
                format!(
                    "unexpected GetTabInfoConf from {from} in phase {:?}",
                    self.phase
                ),
            );
        }
        let table = match TableDef::decode(conf.definition.as_slice()) {
            Ok(table) => table,
            Err(error) => self.fail(io, format!("GetTabInfoConf from {from}: {error}")),
        };
        let map = match signal::codec::decode_partition_map(conf.map.as_slice()) {
            Ok(map) => map,
            Err(error) => self.fail(io, format!("GetTabInfoConf from {from}: map {error:?}")),
        };
        if self.table.is_none() && self.resumed {
            // Created before a crash whose clients never heard (see
            // `schema_refused`): the table is what the restart restored.
            self.table = Some((table.id, table.version));
        }
        let nodes = io.data_nodes();
        let consistent = Some((table.id, table.version)) == self.table
            && map.table_id == table.id
            && !map.partitions.is_empty()
            && map.partitions.len() == table.partitions as usize
            && map.bucket_partitions.len() == signal::partition::BUCKETS as usize
            && map
                .bucket_partitions
                .iter()
                .all(|&partition| (partition as usize) < map.partitions.len())
            && map.partitions.iter().all(|placement| {
                !placement.replicas.is_empty()
                    && placement.replicas.iter().all(|node| nodes.contains(node))
            });
        if !consistent {
            self.fail(
                io,
                format!(
                    "GetTabInfoConf from {from}: table {} version {} with map {map:?}, created as \
                     {:?}",
                    table.id, table.version, self.table
                ),
            );
        }
        self.described = Some((table, map));
        self.phase = Phase::Loading;
        self.wake_parked(io);
    }

    fn wake_parked(&mut self, io: &mut ClientIo<'_>) {
        for (index, slot) in self.slots.iter_mut().enumerate() {
            if slot.parked {
                slot.parked = false;
                let delay_us = io.below(100);
                io.wake_after_us(delay_us, index as u64);
            }
        }
    }

    /// Every slot parked: the phase's work is done; move on.
    fn maybe_advance(&mut self, io: &mut ClientIo<'_>) {
        if !self.slots.iter().all(|slot| slot.parked) {
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
                        let plan = plans::scratch_verify(
                            slot,
                            index,
                            self.slots[slot].scratch[index as usize].clone(),
                        );
                        self.verify_queue.push_back(plan);
                    }
                }
                for key in TOKEN_BASE..TOKEN_BASE + TOKENS {
                    self.verify_queue.push_back(Plan::VerifyToken { key });
                }
            }
            Phase::Verifying => {
                self.finish(io);
                self.phase = Phase::Done;
                return;
            }
            _ => return,
        }
        self.wake_parked(io);
    }

    fn finish(&mut self, io: &mut ClientIo<'_>) {
        let accounts = self.options.accounts;
        if self.final_rows.len() != accounts as usize {
            self.fail(
                io,
                format!("read back {} accounts of {accounts}", self.final_rows.len()),
            );
        }
        let total: i64 = self.final_rows.values().map(|row| row.balance).sum();
        self.counters.final_total_balance = total;
        let expected = INITIAL_BALANCE * i64::from(accounts);
        if total != expected {
            self.fail(
                io,
                format!("the balances add up to {total}, not {expected}"),
            );
        }
        let final_writers = self
            .final_rows
            .iter()
            .map(|(&account, row)| (account, row.writer))
            .collect();
        self.check(io, self.ledger.check_end(&final_writers));
        if self.final_tokens.len() != TOKENS as usize {
            self.fail(
                io,
                format!("read back {} tokens of {TOKENS}", self.final_tokens.len()),
            );
        }
        self.check(io, self.tokens.check_end(&self.final_tokens));
        self.counters.scratch_rows = self.scratch_rows_expected();
        if let Some((id, _)) = self.by_transaction.iter().next() {
            self.fail(io, format!("transaction {id:#x} still open at the end"));
        }
    }

    // ---- starting transactions --------------------------------------------

    fn on_slot_wake(&mut self, slot: usize, io: &mut ClientIo<'_>) {
        if self.slots[slot].active.is_some() {
            self.fail(io, format!("slot {slot} woke with a transaction open"));
        }
        let plan = match self.slots[slot].retry.take() {
            Some(plan) => Some(plan),
            None => self.next_plan(slot, io),
        };
        match plan {
            Some(plan) => self.start(slot, plan, io),
            None => {
                self.slots[slot].parked = true;
                self.maybe_advance(io);
            }
        }
    }

    fn next_plan(&mut self, slot: usize, io: &mut ClientIo<'_>) -> Option<Plan> {
        match self.phase {
            Phase::Loading => self
                .load_queue
                .pop_front()
                .map(|(first, count)| Plan::Load { first, count }),
            Phase::Running if self.started < self.options.transactions => {
                self.started += 1;
                Some(match io.below(100) {
                    0..=69 => plans::transfer_plan(io, self.options.accounts),
                    70..=89 => plans::scratch_plan(io, slot, &self.slots[slot].scratch),
                    _ => Plan::Token {
                        key: TOKEN_BASE + io.below(u64::from(TOKENS)) as u32,
                        insert: io.below(2) == 0,
                    },
                })
            }
            Phase::Verifying => self.verify_queue.pop_front(),
            _ => None,
        }
    }

    fn new_transaction_id(&mut self, slot: usize) -> TransactionId {
        let api = self.slots[slot].api;
        let index = (api.node.0 - FIRST_API_NODE) as usize;
        self.counters_per_api[index] += 1;
        TransactionId(u64::from(api.node.0) << 48 | self.counters_per_api[index])
    }

    /// A tc for a transaction whose first key is `key`: half the time on
    /// the node of the key's primary replica, otherwise on any data node.
    fn choose_tc(&mut self, key: u32, io: &mut ClientIo<'_>) -> BlockRef {
        let primary = self.primary_of(key);
        let node = if io.below(2) == 0 {
            primary
        } else {
            io.random_data_node()
        };
        if node == primary {
            self.counters.started_at_primary += 1;
        } else {
            self.counters.started_elsewhere += 1;
        }
        let instances = self.tc_instances.get(&node).copied().unwrap_or(0);
        if instances == 0 {
            self.fail(io, format!("node {node} registered no tc"));
        }
        let instance = io.below(u64::from(instances)) as u16;
        BlockRef::new(node, BlockKind::Tc, instance)
    }

    fn start(&mut self, slot: usize, plan: Plan, io: &mut ClientIo<'_>) {
        let id = self.new_transaction_id(slot);
        let first_key = match &plan {
            Plan::Load { first, .. } | Plan::VerifyAccounts { first, .. } => *first,
            Plan::Transfer { accounts, .. } => accounts[0],
            Plan::Scratch { key, .. } | Plan::Token { key, .. } | Plan::VerifyToken { key } => *key,
        };
        let tc = self.choose_tc(first_key, io);
        self.by_transaction.insert(id.0, slot);
        let mut active = Active {
            id,
            tc,
            plan,
            step: Step::Single,
            started_us: io.now_us(),
            batch_ops: 0,
            next_client_op: 0,
            rows: BTreeMap::new(),
            reads: Vec::new(),
            refused_without_record: false,
        };
        let pool = io.pool();
        let mut batch: Vec<(OperationKind, LockMode, u32, Option<Section>)> = Vec::new();
        match &active.plan {
            Plan::Load { first, count } => {
                let mut writes = Vec::new();
                for account in *first..first + count {
                    let note = plans::random_note(io);
                    let values = rows::values_section(pool, INITIAL_BALANCE, id.0, note.as_deref());
                    batch.push((
                        OperationKind::Insert,
                        LockMode::Exclusive,
                        account,
                        Some(values),
                    ));
                    writes.push(Written {
                        account,
                        balance: INITIAL_BALANCE,
                        note,
                    });
                }
                let result = self.ledger.will_write(id.0, Vec::new(), writes);
                self.check(io, result);
            }
            Plan::Transfer { accounts, lock, .. } => {
                active.step = Step::Reading;
                for &account in accounts {
                    batch.push((OperationKind::Read, *lock, account, None));
                }
            }
            Plan::Scratch { key, ops, .. } => {
                for op in ops {
                    let attr = match op.kind {
                        OperationKind::Insert => {
                            Some(rows::values_section(pool, 0, 0, op.note.as_deref()))
                        }
                        OperationKind::Update => Some(rows::note_section(pool, op.note.as_deref())),
                        _ => None,
                    };
                    batch.push((op.kind, op.lock, *key, attr));
                }
            }
            Plan::Token { key, insert: true } => {
                let note = plans::random_note(io);
                let values = rows::values_section(pool, 0, id.0, note.as_deref());
                batch.push((
                    OperationKind::Insert,
                    LockMode::Exclusive,
                    *key,
                    Some(values),
                ));
                batch.push((OperationKind::Read, LockMode::Exclusive, *key, None));
                self.tokens.will_insert(id.0, *key);
            }
            Plan::Token { key, insert: false } => {
                batch.push((OperationKind::Read, LockMode::Exclusive, *key, None));
                batch.push((OperationKind::Delete, LockMode::Exclusive, *key, None));
            }
            Plan::VerifyAccounts { first, count } => {
                for account in *first..first + count {
                    batch.push((OperationKind::Read, LockMode::CommittedRead, account, None));
                }
            }
            Plan::VerifyToken { key } => {
                batch.push((OperationKind::Read, LockMode::CommittedRead, *key, None));
            }
        }
        let commit = active.step == Step::Single;
        self.send_batch(slot, &mut active, batch, true, commit, io);
        if let Plan::Transfer {
            ending: Ending::RollbackImpatiently,
            ..
        } = active.plan
        {
            active.step = Step::RollingBackImpatiently;
            let request = TcRollbackReq {
                transaction_id: active.id,
            };
            self.send_control(slot, &active, request.into(), io);
        }
        self.slots[slot].active = Some(active);
    }

    fn send_batch(
        &self,
        slot: usize,
        active: &mut Active,
        batch: Vec<(OperationKind, LockMode, u32, Option<Section>)>,
        first_batch: bool,
        commit: bool,
        io: &mut ClientIo<'_>,
    ) {
        let (table_id, table_version) =
            self.table.expect("the table exists before any transaction");
        let count = batch.len();
        active.batch_ops = count as u32;
        active.rows.clear();
        for (position, (kind, lock, key, attr)) in batch.into_iter().enumerate() {
            let mut flags = 0;
            if first_batch && position == 0 {
                flags |= tc_key_flags::START;
            }
            if position + 1 == count {
                flags |= tc_key_flags::EXECUTE;
                if commit {
                    flags |= tc_key_flags::COMMIT;
                }
            }
            let client_op = active.next_client_op;
            active.next_client_op += 1;
            io.send(Envelope {
                from: self.slots[slot].api,
                to: active.tc,
                signal: TcKeyReq {
                    transaction_id: active.id,
                    client_op,
                    flags,
                    kind,
                    lock,
                    table_id,
                    table_version,
                    key: rows::key_section(io.pool(), key),
                    attr,
                }
                .into(),
            });
        }
    }

    fn send_control(&self, slot: usize, active: &Active, signal: Signal, io: &mut ClientIo<'_>) {
        io.send(Envelope {
            from: self.slots[slot].api,
            to: active.tc,
            signal,
        });
    }

    // ---- answers -----------------------------------------------------------

    fn slot_of(&self, id: TransactionId, what: &str, io: &ClientIo<'_>) -> usize {
        match self.by_transaction.get(&id.0) {
            Some(&slot) => slot,
            None => self.fail(
                io,
                format!("{what} for transaction {:#x}, which no slot has open", id.0),
            ),
        }
    }

    fn take_active(&mut self, slot: usize) -> Active {
        self.slots[slot]
            .active
            .take()
            .expect("a slot found by transaction id has it open")
    }

    fn trans_id_ai(&mut self, ai: TransIdAi, io: &mut ClientIo<'_>) {
        let slot = self.slot_of(ai.transaction_id, "TRANSID_AI", io);
        let row = match rows::decode_row(ai.data.as_slice()) {
            Ok(row) => row,
            Err(error) => self.fail(io, error),
        };
        let active = self.slots[slot]
            .active
            .as_mut()
            .expect("slot has the transaction open");
        let (first_of_batch, end_of_batch) = (
            active.next_client_op - active.batch_ops,
            active.next_client_op,
        );
        let in_batch = (first_of_batch..end_of_batch).contains(&ai.client_op);
        let duplicate = in_batch && active.rows.insert(ai.client_op, row).is_some();
        if !in_batch {
            let message = format!(
                "TRANSID_AI for op {} of {:#x}, outside the batch {first_of_batch}..{end_of_batch}",
                ai.client_op, ai.transaction_id.0
            );
            self.fail(io, message);
        }
        if duplicate {
            let message = format!(
                "two TRANSID_AI for op {} of {:#x}",
                ai.client_op, ai.transaction_id.0
            );
            self.fail(io, message);
        }
    }

    fn tc_key_conf(&mut self, mut conf: TcKeyConf, io: &mut ClientIo<'_>) {
        if let Some(row) = conf.row.take() {
            // The last read's row, carried by the committing TCKEYCONF.
            let ai = TransIdAi {
                transaction_id: conf.transaction_id,
                client_op: row.client_op,
                data: row.data,
            };
            self.trans_id_ai(ai, io);
        }
        let slot = self.slot_of(conf.transaction_id, "TCKEYCONF", io);
        let mut active = self.take_active(slot);
        if active.step == Step::RollingBackImpatiently {
            // The reads finished before the rollback arrived.
            if conf.committed || conf.operations != active.batch_ops {
                self.fail(io, format!("{conf:?} while rolling back impatiently"));
            }
            self.slots[slot].active = Some(active);
            return;
        }
        let expected_ops = match active.step {
            Step::Committing => 0,
            _ => active.batch_ops,
        };
        if conf.operations != expected_ops {
            self.fail(
                io,
                format!(
                    "{conf:?} in step {:?} confirms {} operations, not {expected_ops}",
                    active.step, conf.operations
                ),
            );
        }
        let commit_expected = match (&active.plan, active.step) {
            (_, Step::Single | Step::Committing) => true,
            (Plan::Transfer { ending, .. }, Step::Writing) => *ending == Ending::Commit,
            (_, Step::Reading) => false,
            _ => self.fail(io, format!("{conf:?} in step {:?}", active.step)),
        };
        if conf.committed != commit_expected {
            self.fail(
                io,
                format!(
                    "{conf:?} in step {:?}: committed should be {commit_expected}",
                    active.step
                ),
            );
        }
        match active.step {
            Step::Reading => self.transfer_read(slot, active, io),
            Step::Writing if !conf.committed => {
                let Plan::Transfer { ending, .. } = active.plan else {
                    unreachable!("only transfers write in two batches")
                };
                if ending == Ending::SeparateCommit {
                    active.step = Step::Committing;
                    let request = TcCommitReq {
                        transaction_id: active.id,
                    };
                    self.send_control(slot, &active, request.into(), io);
                } else {
                    active.step = Step::RollingBack;
                    let request = TcRollbackReq {
                        transaction_id: active.id,
                    };
                    self.send_control(slot, &active, request.into(), io);
                }
                self.slots[slot].active = Some(active);
            }
            _ => self.committed(slot, active, conf.gci, io),
        }
    }

    /// The read batch of a transfer answered: check what it saw, then write.
    fn transfer_read(&mut self, slot: usize, mut active: Active, io: &mut ClientIo<'_>) {
        let Plan::Transfer {
            ref accounts,
            ending,
            ..
        } = active.plan
        else {
            unreachable!("only transfers have a read step")
        };
        let first_op = active.next_client_op - active.batch_ops;
        let mut reads = Vec::with_capacity(accounts.len());
        for (position, &account) in accounts.iter().enumerate() {
            let Some(row) = active.rows.get(&(first_op + position as u32)) else {
                self.fail(
                    io,
                    format!(
                        "TCKEYCONF of {:#x} before the row of account {account}",
                        active.id.0
                    ),
                );
            };
            if row.id != account {
                self.fail(io, format!("read account {account} but got row {}", row.id));
            }
            self.check(
                io,
                self.ledger
                    .check_read(account, row.writer, row.balance, &row.note),
            );
            reads.push((account, row.writer, row.balance));
        }
        active.reads = reads;
        match ending {
            Ending::RollbackAfterReads => {
                active.step = Step::RollingBack;
                let request = TcRollbackReq {
                    transaction_id: active.id,
                };
                self.send_control(slot, &active, request.into(), io);
            }
            Ending::Abandon => active.step = Step::Abandoned,
            Ending::RollbackImpatiently => {
                unreachable!("an impatient rollback leaves the read step at once")
            }
            Ending::Commit | Ending::SeparateCommit | Ending::RollbackAfterWrites => {
                // New balances: random amounts that sum to zero.
                let count = active.reads.len();
                let mut amounts: Vec<i64> =
                    (0..count - 1).map(|_| io.below(201) as i64 - 100).collect();
                amounts.push(-amounts.iter().sum::<i64>());
                let pool = io.pool();
                let mut batch = Vec::with_capacity(count + 1);
                let mut writes = Vec::with_capacity(count);
                if io.below(10) == 0 {
                    // Write the first account twice: the ldm must install
                    // only the transaction's last image of the row.
                    let (account, _, _) = active.reads[0];
                    let junk = rows::values_section(pool, -999_999, active.id.0, Some(b"junk"));
                    batch.push((
                        OperationKind::Update,
                        LockMode::Exclusive,
                        account,
                        Some(junk),
                    ));
                }
                for (&(account, _, balance), amount) in active.reads.iter().zip(amounts) {
                    let note = plans::random_note(io);
                    let new_balance = balance + amount;
                    batch.push((
                        OperationKind::Update,
                        LockMode::Exclusive,
                        account,
                        Some(rows::values_section(
                            pool,
                            new_balance,
                            active.id.0,
                            note.as_deref(),
                        )),
                    ));
                    writes.push(Written {
                        account,
                        balance: new_balance,
                        note,
                    });
                }
                let reads = active
                    .reads
                    .iter()
                    .map(|&(account, writer, _)| (account, writer))
                    .collect();
                let result = self.ledger.will_write(active.id.0, reads, writes);
                self.check(io, result);
                active.step = Step::Writing;
                self.send_batch(
                    slot,
                    &mut active,
                    batch,
                    false,
                    ending == Ending::Commit,
                    io,
                );
            }
        }
        self.slots[slot].active = Some(active);
    }

    fn committed(&mut self, slot: usize, active: Active, gci: Gci, io: &mut ClientIo<'_>) {
        self.counters.all_committed += 1;
        if gci != Gci(0) {
            self.committed_gcis.push(gci);
        }
        match &active.plan {
            Plan::Load { .. } => {
                let result = self.ledger.committed(active.id.0, gci, &[]);
                self.check(io, result);
            }
            Plan::Transfer { .. } => {
                let reads: Vec<(u32, u64)> = active
                    .reads
                    .iter()
                    .map(|&(account, writer, _)| (account, writer))
                    .collect();
                let result = self.ledger.committed(active.id.0, gci, &reads);
                self.check(io, result);
                self.counters.transfers_committed += 1;
            }
            Plan::Scratch {
                key,
                ops,
                after,
                expect_error,
            } => {
                if let Some((error, op)) = expect_error {
                    self.fail(
                        io,
                        format!(
                            "scratch key {key}: {ops:?} committed, but the model predicts \
                             {error:?} at op {op}"
                        ),
                    );
                }
                let locks = ops.iter().any(|op| op.lock != LockMode::CommittedRead);
                if locks != (gci != Gci(0)) {
                    self.fail(
                        io,
                        format!("scratch key {key}: {ops:?} committed with GCI {gci}"),
                    );
                }
                let after = after.clone();
                let first_op = active.next_client_op - active.batch_ops;
                for (position, op) in ops.iter().enumerate() {
                    if op.kind != OperationKind::Read {
                        continue;
                    }
                    let row = active.rows.get(&(first_op + position as u32));
                    match row {
                        Some(row) if row.id == *key && row.balance == 0 && row.note == op.note => {}
                        _ => self.fail(
                            io,
                            format!(
                                "scratch key {key}: op {position} of {ops:?} read {row:?}, the \
                                 model says the note is {:?}",
                                op.note
                            ),
                        ),
                    }
                }
                // Verifying reads change nothing, and any slot may run them.
                if self.phase != Phase::Verifying {
                    let index = (key - plans::scratch_key(slot, 0)) as usize;
                    self.slots[slot].scratch[index] = after;
                    // A locking transaction on the key read or overwrote the
                    // last write to it: its GCI is no smaller.
                    let last = self.slots[slot].scratch_gci[index];
                    if gci != Gci(0) && gci < last {
                        self.fail(
                            io,
                            format!(
                                "GCI order: scratch key {key}: {ops:?} committed in GCI {gci}, \
                                 before the key's last write in {last}"
                            ),
                        );
                    }
                    if ops.iter().any(|op| op.kind != OperationKind::Read) {
                        self.slots[slot].scratch_gci[index] = gci;
                        let after = self.slots[slot].scratch[index].clone();
                        self.slots[slot]
                            .scratch_log
                            .push((index as u32, gci, after));
                    }
                }
            }
            Plan::Token { key, insert } => {
                let first_op = active.next_client_op - active.batch_ops;
                let read_op = first_op + u32::from(*insert);
                let Some(row) = active.rows.get(&read_op) else {
                    self.fail(io, format!("token {key}: committed without its row"));
                };
                let result = if *insert {
                    if row.writer != active.id.0 {
                        self.fail(
                            io,
                            format!("token {key}: an insert read back {row:?}, not its own row"),
                        );
                    }
                    self.tokens.insert_committed(active.id.0, gci)
                } else {
                    self.tokens
                        .delete_committed(active.id.0, *key, row.writer, gci)
                };
                self.check(io, result);
            }
            Plan::VerifyToken { key } => {
                let first_op = active.next_client_op - active.batch_ops;
                let Some(row) = active.rows.get(&first_op) else {
                    self.fail(io, format!("token {key}: read without a row"));
                };
                self.final_tokens.insert(*key, Some(row.writer));
            }
            Plan::VerifyAccounts { first, count } => {
                if gci != Gci(0) {
                    self.fail(io, format!("committed reads committed with GCI {gci}"));
                }
                let first_op = active.next_client_op - active.batch_ops;
                for account in *first..first + count {
                    let Some(row) = active.rows.get(&(first_op + account - first)) else {
                        self.fail(io, format!("no row for account {account} at the end"));
                    };
                    self.check(
                        io,
                        self.ledger
                            .check_read(account, row.writer, row.balance, &row.note),
                    );
                    self.final_rows.insert(account, row.clone());
                }
            }
        }
        if self.phase == Phase::Running {
            self.counters.committed += 1;
        }
        self.ended(slot, active, io);
    }

    fn tc_key_ref(&mut self, refusal: TcKeyRef, io: &mut ClientIo<'_>) {
        let earlier = self.refused.get(&refusal.transaction_id.0).copied();
        if let Some((sent, without_record)) = earlier {
            if refusal.error == ErrorCode::UnknownTransaction && refusal.client_op < sent {
                // A late operation of a batch the tc had already refused
                // (see `stray_refusals`), counted rather than failed. (An
                // impatient rollback keeps its transaction open past the
                // first refusal.)
                if without_record {
                    self.counters.refusals_after_no_record += 1;
                } else {
                    self.counters.stray_refusals += 1;
                }
                return;
            }
        }
        let slot = self.slot_of(refusal.transaction_id, "TCKEYREF", io);
        let mut active = self.take_active(slot);
        // Refused before the tc took a record: the tc aborted nothing.
        let without_record = refusal.error == ErrorCode::OutOfTransactionRecords;
        self.refused
            .insert(active.id.0, (active.next_client_op, without_record));
        if active.step == Step::RollingBackImpatiently {
            // An abort (a lock-wait timeout, out of records) beat the
            // rollback; the tc will still answer the rollback, for a
            // transaction it no longer knows.
            if refusal.error.class() != ErrorClass::Temporary {
                self.fail(io, format!("{refusal:?} while rolling back impatiently"));
            }
            active.refused_without_record = without_record;
            self.slots[slot].active = Some(active);
            return;
        }
        if without_record {
            self.counters.refused_without_record += 1;
        } else {
            self.counters.all_aborted += 1;
        }
        if self.phase == Phase::Running {
            self.counters.aborted += 1;
            *self
                .counters
                .aborts_by_code
                .entry(refusal.error as u16)
                .or_default() += 1;
        }
        let result = self.ledger.aborted(active.id.0);
        self.check(io, result);
        let error = refusal.error;
        let retry = match (&active.plan, active.step) {
            (
                Plan::Transfer {
                    ending: Ending::Abandon,
                    ..
                },
                Step::Abandoned,
            ) if error == ErrorCode::TransactionInactive => None,
            (Plan::Token { key, insert }, _) => {
                let expected = if *insert {
                    ErrorCode::DuplicateKey
                } else {
                    ErrorCode::NoSuchRow
                };
                if error != expected && error.class() != ErrorClass::Temporary {
                    self.fail(io, format!("token {key}: {refusal:?}"));
                }
                if *insert {
                    let result = self.tokens.insert_aborted(active.id.0);
                    self.check(io, result);
                }
                None
            }
            (Plan::VerifyToken { key }, _) if error == ErrorCode::NoSuchRow => {
                self.final_tokens.insert(*key, None);
                None
            }
            (plan, step)
                if error.class() == ErrorClass::Temporary
                    && error != ErrorCode::TransactionInactive
                    && matches!(step, Step::Single | Step::Reading | Step::Writing)
                    && !(error == ErrorCode::LockWaitTimeout
                        && step == Step::Writing
                        && matches!(
                            plan,
                            Plan::Transfer {
                                lock: LockMode::Exclusive,
                                ..
                            }
                        )) =>
            {
                // Out of records, or a deadlock: retry the whole plan (the
                // model did not change, the transaction left nothing). A
                // lock wait is possible in the write step only for shared
                // reads upgrading to exclusive.
                Some(plan.clone())
            }
            (
                Plan::Scratch {
                    expect_error: Some(expected),
                    key,
                    ..
                },
                _,
            ) => {
                if *expected != (error, refusal.client_op) {
                    self.fail(
                        io,
                        format!("scratch key {key}: {refusal:?}, the model predicts {expected:?}"),
                    );
                }
                None
            }
            (plan, step) => self.fail(io, format!("{refusal:?} for {plan:?} in step {step:?}")),
        };
        if let Some(plan) = retry {
            let now = io.now_us();
            let since = *self.slots[slot].retrying_since_us.get_or_insert(now);
            if now - since > RETRY_LIMIT_US {
                self.fail(
                    io,
                    format!(
                        "{plan:?} kept failing for {} ms, last with {refusal:?}",
                        (now - since) / 1000
                    ),
                );
            }
            self.slots[slot].retries += 1;
            self.slots[slot].retry = Some(plan);
        }
        self.ended(slot, active, io);
    }

    fn rollback_conf(&mut self, conf: TcRollbackConf, io: &mut ClientIo<'_>) {
        let slot = self.slot_of(conf.transaction_id, "TC_ROLLBACKCONF", io);
        let active = self.take_active(slot);
        if !matches!(
            active.step,
            Step::RollingBack | Step::RollingBackImpatiently
        ) {
            self.fail(io, format!("{conf:?} in step {:?}", active.step));
        }
        if active.refused_without_record {
            self.counters.refused_without_record += 1;
        } else {
            self.counters.all_aborted += 1;
        }
        if self.phase == Phase::Running {
            self.counters.aborted += 1;
            self.counters.rolled_back += 1;
        }
        let result = self.ledger.aborted(active.id.0);
        self.check(io, result);
        self.ended(slot, active, io);
    }

    /// The transaction's last answer arrived: think a little, then go on.
    fn ended(&mut self, slot: usize, active: Active, io: &mut ClientIo<'_>) {
        self.by_transaction.remove(&active.id.0);
        self.ended += 1;
        self.last_progress_us = io.now_us();
        let pause_us = if self.slots[slot].retry.is_some() {
            // Back off, more after each failure: transfers that deadlocked
            // should not meet again, and clients refused for lack of
            // records should not spin while the records are held.
            io.below(1000 << self.slots[slot].retries.min(5))
        } else {
            self.slots[slot].retries = 0;
            self.slots[slot].retrying_since_us = None;
            io.below(200)
        };
        io.wake_after_us(pause_us, slot as u64);
    }

    fn watchdog(&mut self, io: &mut ClientIo<'_>) {
        let now = io.now_us();
        for (index, slot) in self.slots.iter().enumerate() {
            if let Some(active) = &slot.active {
                if now - active.started_us > STUCK_TRANSACTION_US {
                    self.fail(
                        io,
                        format!(
                            "slot {index}: transaction {:#x} ({:?}, step {:?}) has had no answer \
                             for {} ms: a reply was lost",
                            active.id.0,
                            active.plan,
                            active.step,
                            (now - active.started_us) / 1000
                        ),
                    );
                }
            }
        }
        if self.phase != Phase::Done {
            if now - self.last_progress_us > STUCK_TRANSACTION_US {
                self.fail(io, "no transaction ended for 15 simulated seconds".into());
            }
            io.wake_after_us(WATCHDOG_PERIOD_US, WATCHDOG);
        }
    }
}

impl Client for Bank {
    fn on_signal(&mut self, envelope: Envelope, io: &mut ClientIo<'_>) {
        let from = envelope.from;
        if !self.apis.contains(&envelope.to) {
            self.fail(
                io,
                format!("a signal for {}, which is not a bank API node", envelope.to),
            );
        }
        match envelope.signal {
            Signal::ApiRegConf(conf) => self.api_registered(from, conf, io),
            Signal::CreateTabConf(conf) => self.table_created(conf, io),
            Signal::SchemaRef(refusal) => self.schema_refused(from, refusal, io),
            Signal::GetTabInfoConf(conf) => self.table_described(from, conf, io),
            Signal::TcKeyConf(conf) => self.tc_key_conf(conf, io),
            Signal::TcKeyRef(refusal) => self.tc_key_ref(refusal, io),
            Signal::TransIdAi(ai) => self.trans_id_ai(ai, io),
            Signal::TcRollbackConf(conf) => self.rollback_conf(conf, io),
            other => self.fail(
                io,
                format!("unexpected {} from {from}: {other:?}", other.name()),
            ),
        }
    }

    fn on_wake(&mut self, token: u64, io: &mut ClientIo<'_>) {
        if token == WATCHDOG {
            self.watchdog(io);
        } else {
            self.on_slot_wake(token as usize, io);
        }
    }
}
