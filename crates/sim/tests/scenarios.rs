//! Scripted scenarios on the simulated node: one client sends exactly the
//! signals a test names, at the times it names, and the test looks at every
//! answer. Each scenario pins one behaviour of the tc and ldm blocks that
//! the random bank workload hits only by chance; a failing one is marked
//! `#[ignore]` with what goes wrong, until the block is fixed.

use signal::signals::*;
use signal::{BlockKind, BlockRef, Envelope, NodeId, Signal, TransactionId};
use sim::config::{NodeLimits, DATA_NODE, INACTIVE_TRANSACTION_TIMEOUT_MS, TC_INSTANCES};
use sim::rows;
use sim::{Client, ClientIo, Simulation};

const API: BlockRef = BlockRef::new(NodeId(200), BlockKind::Api, 0);
const TC: BlockRef = BlockRef::new(DATA_NODE, BlockKind::Tc, 0);

/// Keeps every signal the data node sends to the API node.
#[derive(Default)]
struct Recorder {
    inbox: Vec<(u64, Signal)>,
}

impl Client for Recorder {
    fn on_signal(&mut self, envelope: Envelope, io: &mut ClientIo<'_>) {
        self.inbox.push((io.now_us(), envelope.signal));
    }

    fn on_wake(&mut self, _token: u64, _io: &mut ClientIo<'_>) {}
}

/// A started node with the bank table, and a client registered with it.
struct Scenario {
    simulation: Simulation,
    client: Recorder,
    table: (u32, u32),
    next_transaction: u64,
}

impl Scenario {
    fn new(seed: u64) -> Scenario {
        Scenario::with_limits(seed, NodeLimits::default())
    }

    fn with_limits(seed: u64, limits: NodeLimits) -> Scenario {
        let trace = std::env::var_os("SIM_TRACE").is_some();
        let mut simulation = Simulation::with_limits(seed, limits, trace);
        simulation.start_nodes();
        let mut scenario = Scenario {
            simulation,
            client: Recorder::default(),
            table: (0, 0),
            next_transaction: 1,
        };
        scenario.send(
            BlockRef::new(DATA_NODE, BlockKind::Membership, 0),
            ApiRegReq {
                protocol_version: signal::signals::API_PROTOCOL_VERSION,
                token: signal::signals::ApiToken::NONE,
            },
        );
        scenario.run_ms(10);
        let definition = rows::bank_table().encode_to_vec();
        let definition = scenario
            .simulation
            .client_io()
            .pool()
            .copy_from(&definition)
            .expect("pool room");
        scenario.send(
            BlockRef::new(DATA_NODE, BlockKind::Dict, 0),
            CreateTabReq {
                request_id: 1,
                definition,
            },
        );
        scenario.run_ms(10);
        let created = scenario
            .client
            .inbox
            .iter()
            .find_map(|(_, signal)| match signal {
                Signal::CreateTabConf(conf) => Some((conf.table_id, conf.table_version)),
                _ => None,
            });
        scenario.table = created.expect("the table was created");
        scenario.client.inbox.clear();
        scenario
    }

    fn send(&mut self, to: BlockRef, signal: impl Into<Signal>) {
        self.simulation.client_io().send(Envelope {
            from: API,
            to,
            signal: signal.into(),
        });
    }

    fn run_ms(&mut self, milliseconds: u64) {
        let until = self.simulation.world().now_us() + milliseconds * 1000;
        self.simulation.run_until_us(&mut self.client, until);
    }

    fn new_transaction(&mut self) -> TransactionId {
        self.next_transaction += 1;
        TransactionId(u64::from(API.node.0) << 48 | self.next_transaction)
    }

    fn operation(
        &mut self,
        transaction_id: TransactionId,
        client_op: u32,
        flags: u8,
        kind: OperationKind,
        key: u32,
    ) {
        let pool = self.simulation.client_io().pool();
        let attr = match kind {
            OperationKind::Insert | OperationKind::Update | OperationKind::Write => {
                Some(rows::values_section(pool, 1, transaction_id.0, Some(b"x")))
            }
            _ => None,
        };
        let (table_id, table_version) = self.table;
        self.send(
            TC,
            TcKeyReq {
                transaction_id,
                client_op,
                flags,
                kind,
                lock: LockMode::Exclusive,
                table_id,
                table_version,
                key: rows::key_section(pool, key),
                attr,
            },
        );
    }

    /// The answers so far, as names with the error, if any.
    fn answers(&self) -> Vec<String> {
        self.client
            .inbox
            .iter()
            .map(|(_, signal)| match signal {
                Signal::TcKeyRef(refusal) => {
                    format!("TcKeyRef op {} {:?}", refusal.client_op, refusal.error)
                }
                Signal::TcKeyConf(conf) => format!("TcKeyConf committed {}", conf.committed),
                other => other.name().to_string(),
            })
            .collect()
    }

    fn records_in_use(&self) -> (u32, u32) {
        (
            self.simulation
                .tcs()
                .map(|tc| tc.transactions_in_use())
                .sum(),
            self.simulation
                .ldms()
                .map(|ldm| ldm.operations_in_use())
                .sum(),
        )
    }
}

#[test]
fn a_committed_insert_and_a_failed_one_answer_once_each() {
    let mut scenario = Scenario::new(11);
    let first = scenario.new_transaction();
    let flags = tc_key_flags::START | tc_key_flags::COMMIT | tc_key_flags::EXECUTE;
    scenario.operation(first, 0, flags, OperationKind::Insert, 5);
    scenario.run_ms(5);
    let second = scenario.new_transaction();
    scenario.operation(second, 0, flags, OperationKind::Insert, 5);
    scenario.run_ms(5);
    assert_eq!(
        scenario.answers(),
        vec!["TcKeyConf committed true", "TcKeyRef op 0 DuplicateKey"]
    );
    assert_eq!(scenario.records_in_use(), (0, 0));
}

/// Seen in the bank workload (seed 2, at 4 ms): a batch [Read (START),
/// Delete (EXECUTE|COMMIT)] of a key that does not exist. The read's
/// LQHKEYREF reached the tc before the batch's second TCKEYREQ; the tc
/// aborted, answered TCKEYREF NoSuchRow for op 0 and released the
/// transaction; then the second TCKEYREQ arrived and got its own TCKEYREF
/// UnknownTransaction for op 1: while the abort ran, the tc dropped such
/// late operations silently, once it was done it refused each, so the
/// client heard of one aborted transaction once or several times, depending
/// on timing. NDB answers one batch with one reply (the API ignores late
/// operations of an aborted transaction by id, and DBTC answers a late
/// EXECUTE with TCROLLBACKREP). Now the tc keeps the aborted transaction's
/// record until the batch's last operation arrives and drops the rest.
#[test]
fn operations_arriving_after_an_abort_get_no_second_refusal() {
    let mut scenario = Scenario::new(12);
    let transaction = scenario.new_transaction();
    scenario.operation(transaction, 0, tc_key_flags::START, OperationKind::Read, 77);
    // The network delays the rest of the batch past the abort.
    scenario.run_ms(1);
    let flags = tc_key_flags::EXECUTE | tc_key_flags::COMMIT;
    scenario.operation(transaction, 1, flags, OperationKind::Delete, 77);
    scenario.run_ms(5);
    assert_eq!(scenario.records_in_use(), (0, 0));
    assert_eq!(scenario.answers(), vec!["TcKeyRef op 0 NoSuchRow"]);
}

/// A rollback sent right behind a batch, without waiting for its answer
/// (the real client waits, so only a raw client sends this): the tc gets
/// it while the batch executes, or after an abort for another reason
/// (here a read of a missing key), or after the batch's answer. Whatever
/// came first, TC_ROLLBACKCONF is the last answer and comes once, no
/// record is left and the row lock is gone.
#[test]
fn a_rollback_right_behind_a_batch_is_answered_last_and_releases_everything() {
    let mut scenario = Scenario::new(14);
    let insert = scenario.new_transaction();
    let commit = tc_key_flags::START | tc_key_flags::COMMIT | tc_key_flags::EXECUTE;
    scenario.operation(insert, 0, commit, OperationKind::Insert, 9);
    scenario.run_ms(5);
    scenario.client.inbox.clear();
    let execute = tc_key_flags::START | tc_key_flags::EXECUTE;
    for (key, delay_ms) in [(9, 0), (77, 0), (9, 1), (77, 1)] {
        let impatient = scenario.new_transaction();
        scenario.operation(impatient, 0, execute, OperationKind::Read, key);
        scenario.run_ms(delay_ms);
        scenario.send(
            TC,
            TcRollbackReq {
                transaction_id: impatient,
            },
        );
        scenario.run_ms(5);
        let answers = scenario.answers();
        assert_eq!(
            answers.last().map(String::as_str),
            Some("TcRollbackConf"),
            "key {key}, rollback after {delay_ms} ms: {answers:?}"
        );
        let rollbacks = answers.iter().filter(|a| *a == "TcRollbackConf").count();
        assert_eq!(rollbacks, 1, "key {key}: {answers:?}");
        assert!(
            !answers
                .iter()
                .any(|a| a.starts_with("TcKeyConf committed true")),
            "key {key}: {answers:?}"
        );
        assert_eq!(scenario.records_in_use(), (0, 0), "key {key}: {answers:?}");
        scenario.client.inbox.clear();
    }
    // The exclusive lock on key 9 is gone: another transaction takes it.
    let next = scenario.new_transaction();
    scenario.operation(next, 0, commit, OperationKind::Update, 9);
    scenario.run_ms(5);
    assert_eq!(scenario.answers(), vec!["TcKeyConf committed true"]);
}

/// A client that sends operations of a batch but never the one flagged
/// EXECUTE (it hangs, or is slow) holds its locks; the inactivity timeout
/// must end the transaction as it does for an idle one. (Found by this
/// scenario: the tc's timeout scan once looked at an Executing transaction
/// only while operations were outstanding, so this one kept its record and
/// its row lock for good.)
#[test]
fn a_client_silent_in_the_middle_of_a_batch_is_aborted_by_the_inactivity_timeout() {
    let mut scenario = Scenario::new(13);
    let insert = scenario.new_transaction();
    let flags = tc_key_flags::START | tc_key_flags::COMMIT | tc_key_flags::EXECUTE;
    scenario.operation(insert, 0, flags, OperationKind::Insert, 9);
    scenario.run_ms(5);
    let silent = scenario.new_transaction();
    scenario.operation(silent, 0, tc_key_flags::START, OperationKind::Read, 9);
    scenario.run_ms(2 * INACTIVE_TRANSACTION_TIMEOUT_MS);
    assert_eq!(
        scenario.answers(),
        vec![
            "TcKeyConf committed true",
            "TransIdAi",
            "TcKeyRef op 4294967295 TransactionInactive"
        ]
    );
    assert_eq!(scenario.records_in_use(), (0, 0));
}

/// A batch with more operations than its tc has operation records can
/// never run. (Found by the tight-limits workload: such a transaction got
/// the temporary OutOfOperationRecords, so a client that retries temporary
/// errors retried it forever; the node now caps each tc's operations per
/// transaction at its share of the records, a permanent error.)
#[test]
fn a_batch_larger_than_the_tcs_operation_records_is_refused_as_too_many_operations() {
    let limits = NodeLimits {
        max_concurrent_operations: 64,
        max_concurrent_transactions: 16,
        ..NodeLimits::default()
    };
    let share = limits.max_concurrent_operations / u32::from(TC_INSTANCES);
    let mut scenario = Scenario::with_limits(14, limits);
    let transaction = scenario.new_transaction();
    for client_op in 0..=share {
        let flags = match client_op {
            0 => tc_key_flags::START,
            op if op == share => tc_key_flags::EXECUTE | tc_key_flags::COMMIT,
            _ => 0,
        };
        scenario.operation(
            transaction,
            client_op,
            flags,
            OperationKind::Insert,
            500 + client_op,
        );
    }
    scenario.run_ms(10);
    assert_eq!(
        scenario.answers(),
        vec![format!("TcKeyRef op {share} TooManyOperations")]
    );
    assert_eq!(scenario.records_in_use(), (0, 0));
}
