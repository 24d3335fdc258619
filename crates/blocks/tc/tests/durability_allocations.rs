//! The tc's durability bookkeeping keeps the no-allocation promise of the
//! tc thread (ARCHITECTURE.md, "Architecture invariants"): once warm,
//! write transactions counted in their GCI's commit phase, GCI switches,
//! the master dih's GCP_FLUSH_REQ and GCP_DURABLE_REP, API nodes' GCI
//! waits (held, answered, refused when full) and an API node's failure
//! make no heap allocation. The test installs the counting allocator and
//! drives one tc with the signals the other blocks would send.

use kernel::testing::one_node_map;
use kernel::testing::{deliver, RecordingContext};
use kernel::Context;
use signal::attr::AttrWriter;
use signal::schema::{ColumnDef, ColumnType, TableDef};
use signal::signals::*;
use signal::{BlockKind, BlockRef, Gci, NodeId, Signal, TransactionId};
use std::sync::Arc;
use stdx::alloc_counter::{thread_allocations, CountingAllocator};
use tc::{Tc, TcConfig};

// Counts heap allocations so the test can prove the measured rounds make none.
#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator(std::alloc::System);

const NODE: NodeId = NodeId(2);
const TC: BlockRef = BlockRef::new(NODE, BlockKind::Tc, 0);
const DIH: BlockRef = BlockRef::new(NODE, BlockKind::Dih, 0);
const DICT: BlockRef = BlockRef::new(NODE, BlockKind::Dict, 0);
const MEMBERSHIP: BlockRef = BlockRef::new(NODE, BlockKind::Membership, 0);
const API: BlockRef = BlockRef::new(NodeId(10), BlockKind::Api, 0);
const MAX_TRANSACTIONS: u32 = 8;

struct Driver {
    tc: Tc,
    ctx: RecordingContext,
    gci: Gci,
    next_transaction: u64,
    /// COMMITREQs not answered yet (keeping transactions in their commit phase).
    held_commits: Vec<Envelope>,
    /// Answers seen: GCP_FLUSH_CONF, GCI_WAIT_CONF, GCI_WAIT_REF.
    flush_confs: u64,
    wait_confs: u64,
    wait_refs: u64,
}

impl Driver {
    fn new() -> Driver {
        let table = TableDef {
            indexes: Vec::new(),
            revision: 0,
            id: 1,
            version: 1,
            name: "t".into(),
            columns: vec![ColumnDef {
                name: "k".into(),
                column_type: ColumnType::Int { unsigned: false },
                nullable: false,
            }],
            primary_key: vec![0],
            partitions: 2,
            partition_key: Vec::new(),
        };
        table.validate().expect("valid table");
        let map = one_node_map(&table, NODE, 2, |partition| partition);
        let mut driver = Driver {
            tc: Tc::new(TcConfig {
                address: TC,
                max_transactions: MAX_TRANSACTIONS,
                max_operations: 32,
                max_operations_per_transaction: 4,
                lock_wait_timeout_ms: 1200,
                inactive_transaction_timeout_ms: 5000,
                ldm_instances: 1,
            }),
            ctx: RecordingContext::new(),
            gci: Gci::from_parts(3, 0),
            next_transaction: 0,
            held_commits: Vec::with_capacity(64),
            flush_confs: 0,
            wait_confs: 0,
            wait_refs: 0,
        };
        for &phase in signal::phases::PHASES {
            driver.deliver(MEMBERSHIP, StartPhaseReq { phase });
        }
        driver.deliver(DIH, GcpCommit { gci: driver.gci });
        driver.deliver(
            DICT,
            TcAddTabReq {
                table: Arc::new(table),
                map: Arc::new(map),
            },
        );
        // Room for every signal of a round, so recording them never grows it.
        driver.ctx.sent.reserve(4096);
        driver.ctx.sent.clear();
        driver
    }

    fn deliver(&mut self, from: BlockRef, signal: impl Into<Signal>) {
        deliver(&mut self.tc, &mut self.ctx, from, signal);
    }

    /// Sends the two inserts of a new write transaction, the second
    /// committing.
    fn begin_write_transaction(&mut self) {
        self.next_transaction += 1;
        let transaction_id = TransactionId(u64::from(API.node.0) << 48 | self.next_transaction);
        for (client_op, flags) in [(0u32, tc_key_flags::START), (1, tc_key_flags::COMMIT)] {
            let mut key = self.ctx.pool().alloc(16).expect("pool has room");
            let k = (self.next_transaction as i32) * 2 + client_op as i32;
            let mut writer = AttrWriter::new(key.as_mut_slice());
            writer.push(0, Some(&k.to_le_bytes())).expect("fits");
            let used = writer.len();
            key.set_len(used);
            self.deliver(
                API,
                TcKeyReq {
                    transaction_id,
                    client_op,
                    flags,
                    kind: OperationKind::Insert,
                    lock: LockMode::Exclusive,
                    table_id: 1,
                    table_version: 1,
                    key,
                    attr: None,
                },
            );
        }
    }

    /// Plays the ldms until the tc waits for nothing from them: prepares
    /// and completes each operation, and commits it too with
    /// `answer_commits` (else keeps its COMMITREQ for later). Counts the
    /// answers meant for the dih and the API node.
    fn settle(&mut self, answer_commits: bool, scratch: &mut Vec<Envelope>) {
        if answer_commits {
            scratch.append(&mut self.held_commits);
        }
        loop {
            scratch.extend(self.ctx.sent.drain(..).map(|sent| sent.envelope));
            if scratch.is_empty() {
                return;
            }
            for envelope in scratch.drain(..) {
                let ldm = envelope.to;
                match envelope.signal {
                    Signal::LqhKeyReq(request) => self.deliver(
                        ldm,
                        LqhKeyConf {
                            tc_op: request.tc_op,
                            ldm_op: request.tc_op,
                            data: None,
                            released: false,
                        },
                    ),
                    Signal::CommitReq(request) if answer_commits => self.deliver(
                        ldm,
                        CommitConf {
                            tc_op: request.tc_op,
                        },
                    ),
                    signal @ Signal::CommitReq(_) => self.held_commits.push(Envelope {
                        from: envelope.from,
                        to: ldm,
                        signal,
                    }),
                    Signal::CompleteReq(request) => self.deliver(
                        ldm,
                        CompleteConf {
                            tc_op: request.tc_op,
                        },
                    ),
                    Signal::GcpFlushConf(_) => self.flush_confs += 1,
                    Signal::GciWaitConf(_) => self.wait_confs += 1,
                    Signal::GciWaitRef(_) => self.wait_refs += 1,
                    _ => {}
                }
            }
        }
    }

    /// One round: GCI waits (one refused: the list is full), a transaction
    /// in its commit phase across the GCI switch, a flush held until it
    /// commits, the durable report that answers the waits, and a wait
    /// dropped with its failed API node.
    fn round(&mut self, scratch: &mut Vec<Envelope>) {
        let previous = self.gci;
        for request_id in 0..=MAX_TRANSACTIONS {
            self.deliver(
                API,
                GciWaitReq {
                    request_id,
                    gci: previous,
                },
            );
        }
        self.begin_write_transaction();
        self.settle(false, scratch);
        self.gci = Gci(self.gci.0 + 1);
        let gci = self.gci;
        self.deliver(DIH, GcpPrepare { new_gci: gci });
        self.begin_write_transaction();
        self.settle(false, scratch);
        self.deliver(DIH, GcpCommit { gci });
        self.deliver(DIH, GcpFlushReq { gci: previous });
        self.settle(false, scratch);
        assert_eq!(self.tc.transactions_in_commit_phase(), 2);
        self.settle(true, scratch);
        self.deliver(DIH, GcpDurableRep { gci: previous });
        self.deliver(
            API,
            GciWaitReq {
                request_id: 99,
                gci: Gci(u64::MAX),
            },
        );
        self.deliver(MEMBERSHIP, ApiFailRep { node: API.node });
        self.settle(true, scratch);
    }
}

#[test]
fn durability_bookkeeping_makes_no_heap_allocation_once_warm() {
    const ROUNDS: u64 = 200;
    let mut driver = Driver::new();
    let mut scratch = Vec::with_capacity(4096);
    driver.round(&mut scratch);
    let before = thread_allocations();
    for _ in 0..ROUNDS {
        driver.round(&mut scratch);
    }
    let allocations = thread_allocations() - before;
    assert_eq!(
        driver.tc.transactions_in_use(),
        0,
        "every transaction ended"
    );
    assert_eq!(driver.tc.transactions_in_commit_phase(), 0);
    assert_eq!(driver.tc.gci_waits_held(), 0);
    let rounds = ROUNDS + 1;
    assert_eq!(driver.tc.counters().commits, rounds * 2);
    assert_eq!(driver.flush_confs, rounds, "one flush answered per round");
    assert_eq!(
        (driver.wait_confs, driver.wait_refs),
        (rounds * u64::from(MAX_TRANSACTIONS), rounds),
        "every held wait answered, the one beyond capacity refused"
    );
    assert_eq!(
        allocations, 0,
        "commit phases, flushes, durable reports and GCI waits must not allocate"
    );
}
