//! Robustness of the tc against what API nodes send
//! (docs/design/testing.md §2, §5): random and adversarial TCKEYREQs (any
//! flags, kinds, lock modes, table ids and versions, keys of random bytes or
//! with wrong columns, forged transaction ids, senders that are not API
//! blocks), commits and rollbacks of transactions in any state, waits for
//! durable GCIs (any GCI, from any sender), API requests meant for other
//! blocks, and API nodes failing, all interleaved with the ldms' answers,
//! GCI switches, flushes and durable reports of the master dih, and timeout
//! scans. The test plays every other block, correctly; whatever the clients
//! send, the tc must not panic, must route only keys `key_hash` accepts, and
//! must end with every record free.

use crate::records::NIL;
use crate::{Tc, TcConfig, TIMEOUT_SCAN_JOB};
use kernel::testing::{column, one_node_map};
use kernel::testing::{deliver, RecordingContext};
use kernel::Context;
use signal::attr::{key_hash, AttrWriter};
use signal::partition::bucket;
use signal::schema::{ColumnType, TableDef};
use signal::signals::*;
use signal::{BlockKind, BlockRef, ErrorCode, Gci, NodeId, Section, Signal, TransactionId};
use std::collections::VecDeque;
use std::sync::Arc;
use stdx::mix::XorShift;

const NODE: NodeId = NodeId(2);
const TC: BlockRef = BlockRef::new(NODE, BlockKind::Tc, 0);
const DIH: BlockRef = BlockRef::new(NODE, BlockKind::Dih, 0);
const DICT: BlockRef = BlockRef::new(NODE, BlockKind::Dict, 0);
const MEMBERSHIP: BlockRef = BlockRef::new(NODE, BlockKind::Membership, 0);
const LDM_INSTANCES: u16 = 2;
const LOCK_WAIT_MS: u64 = 1200;
const INACTIVE_MS: u64 = 5000;
/// Section pool of `RecordingContext::new()`, per class.
const POOL_COUNTS: [usize; 6] = [64, 16, 8, 4, 2, 2];

/// The senders of client requests: two API nodes (one with two
/// instances), and blocks that are not API nodes.
const SENDERS: [BlockRef; 5] = [
    BlockRef::new(NodeId(10), BlockKind::Api, 0),
    BlockRef::new(NodeId(10), BlockKind::Api, 1),
    BlockRef::new(NodeId(11), BlockKind::Api, 0),
    BlockRef::new(NodeId(11), BlockKind::Dict, 0),
    BlockRef::new(NODE, BlockKind::Ldm, 1),
];

fn table() -> TableDef {
    let table = TableDef {
        indexes: Vec::new(),
        revision: 0,
        id: 3,
        version: 7,
        name: "t".into(),
        columns: vec![
            column("s", ColumnType::VarChar(6), false),
            column("k", ColumnType::Int { unsigned: false }, false),
            column("v", ColumnType::BigInt { unsigned: false }, true),
        ],
        primary_key: vec![1, 0],
        partitions: 3,
        partition_key: Vec::new(),
    };
    table.validate().expect("test table is valid");
    table
}

/// An ldm as the tc sees it: signals to answer in order, and LQHKEYREQs
/// it holds unanswered (waiting for a lock) until it answers or an ABORT
/// for them arrives.
#[derive(Default)]
struct FakeLdm {
    inbox: VecDeque<Signal>,
    waiting: Vec<LqhKeyReq>,
}

struct Fuzz {
    tc: Tc,
    ctx: RecordingContext,
    rng: XorShift,
    table: Arc<TableDef>,
    map: Arc<PartitionMap>,
    ldms: Vec<FakeLdm>,
    gci: Gci,
    gcp_prepared: bool,
    /// The GCP_FLUSH_REQ sent and not yet answered.
    flush_pending: Option<Gci>,
    /// The last GCI whose flush was answered (reported durable next).
    flushed: Option<Gci>,
    /// GCP_FLUSH_CONFs received.
    flushes: u32,
    /// Counts of what the clients got: (TcKeyConf, TcKeyRef, other).
    answers: (u32, u32, u32),
    next_ldm_op: u32,
}

impl Fuzz {
    fn new(seed: u64) -> Fuzz {
        let table = Arc::new(table());
        let map = Arc::new(one_node_map(&table, NODE, LDM_INSTANCES, |partition| {
            partition
        }));
        let mut fuzz = Fuzz {
            tc: Tc::new(TcConfig {
                address: TC,
                max_transactions: 6,
                max_operations: 12,
                max_operations_per_transaction: 5,
                lock_wait_timeout_ms: LOCK_WAIT_MS,
                inactive_transaction_timeout_ms: INACTIVE_MS,
                ldm_instances: 1,
            }),
            ctx: RecordingContext::new(),
            rng: XorShift::new(seed),
            table: Arc::clone(&table),
            map: Arc::clone(&map),
            ldms: (0..LDM_INSTANCES).map(|_| FakeLdm::default()).collect(),
            gci: Gci::from_parts(5, 1),
            gcp_prepared: false,
            flush_pending: None,
            flushed: None,
            flushes: 0,
            answers: (0, 0, 0),
            next_ldm_op: 0,
        };
        for &phase in signal::phases::PHASES {
            fuzz.deliver(MEMBERSHIP, StartPhaseReq { phase });
        }
        fuzz.deliver(DIH, GcpCommit { gci: fuzz.gci });
        fuzz.deliver(DICT, TcAddTabReq { table, map });
        fuzz.answers = (0, 0, 0);
        fuzz
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.rng.below(bound)
    }

    fn deliver(&mut self, from: BlockRef, signal: impl Into<Signal>) {
        deliver(&mut self.tc, &mut self.ctx, from, signal);
        self.dispatch();
    }

    /// Takes what the tc sent: ldm-bound signals queue at their ldm, client
    /// answers are counted, the rest is checked and dropped.
    fn dispatch(&mut self) {
        for sent in std::mem::take(&mut self.ctx.sent) {
            let to = sent.envelope.to;
            match sent.envelope.signal {
                Signal::LqhKeyReq(request) => {
                    // Only keys the table accepts are routed, to their ldm.
                    let hash = key_hash(&self.table, request.key.as_slice())
                        .expect("the tc routed a key that key_hash refuses");
                    let partition = self.map.bucket_partitions[bucket(hash) as usize];
                    assert_eq!(request.partition, partition);
                    assert_eq!(request.hash, hash);
                    let placement = &self.map.partitions[partition as usize];
                    assert_eq!(to.instance, placement.ldm_instance);
                    self.ldms[to.instance as usize]
                        .inbox
                        .push_back(request.into());
                }
                signal @ (Signal::CommitReq(_) | Signal::CompleteReq(_) | Signal::AbortReq(_)) => {
                    assert_eq!(to.kind, BlockKind::Ldm);
                    self.ldms[to.instance as usize].inbox.push_back(signal);
                }
                Signal::GcpFlushConf(conf) => {
                    assert_eq!(
                        self.flush_pending.take(),
                        Some(conf.gci),
                        "GCP_FLUSH_CONF answers the pending flush, once"
                    );
                    self.flushed = Some(conf.gci);
                    self.flushes += 1;
                }
                Signal::TcKeyConf(_) => self.answers.0 += 1,
                Signal::TcKeyRef(_) => self.answers.1 += 1,
                Signal::TransIdAi(_)
                | Signal::ApiRegRef(_)
                | Signal::TcRollbackConf(_)
                | Signal::SchemaRef(_)
                | Signal::GciWaitConf(_)
                | Signal::GciWaitRef(_)
                | Signal::GcpPrepareConf(_)
                | Signal::GcpCommitConf(_) => self.answers.2 += 1,
                Signal::ContinueB(ContinueB {
                    job: TIMEOUT_SCAN_JOB,
                })
                | Signal::StartPhaseConf(_)
                | Signal::AddTabConf(_) => {}
                other => panic!("the tc sent {} to {to}", other.name()),
            }
        }
    }

    fn section(&self, bytes: &[u8]) -> Section {
        self.ctx.pool().copy_from(bytes).expect("pool has room")
    }

    fn random_bytes(&mut self, max: u64) -> Vec<u8> {
        let len = self.below(max + 1) as usize;
        (0..len).map(|_| self.rng.next_u64() as u8).collect()
    }

    /// A key: valid for one of a few rows, or with columns swapped, NULL,
    /// a value too long, or random bytes.
    fn key(&mut self) -> Vec<u8> {
        let k = self.below(4) as i32;
        let s: Vec<u8> = match self.below(8) {
            0 => b"abcdefg".to_vec(),
            1 => b"ab    ".to_vec(),
            _ => b"ab".to_vec(),
        };
        let mut buffer = [0u8; 64];
        let mut writer = AttrWriter::new(&mut buffer);
        let k = k.to_le_bytes();
        let entries: Vec<(u16, Option<&[u8]>)> = match self.below(20) {
            0 => return self.random_bytes(20),
            1 => vec![(0, Some(&s)), (1, Some(&k))],
            2 => vec![(1, None), (0, Some(&s))],
            3 => vec![(1, Some(&k[..2])), (0, Some(&s))],
            4 => vec![(1, Some(&k))],
            5 => vec![(1, Some(&k)), (0, Some(&s)), (2, None)],
            _ => vec![(1, Some(&k)), (0, Some(&s))],
        };
        for (column, value) in entries {
            writer.push(column, value).expect("fits");
        }
        let used = writer.len();
        buffer[..used].to_vec()
    }

    fn transaction_id(&mut self, sender: BlockRef) -> TransactionId {
        let node = if self.below(20) == 0 {
            self.rng.next_u64() as u16
        } else {
            sender.node.0
        };
        TransactionId(u64::from(node) << 48 | self.below(8))
    }

    /// One request from a client (or something posing as one).
    fn client_request(&mut self) {
        // Mostly API nodes; now and then a block posing as one.
        let sender = match self.below(10) {
            0 => SENDERS[3 + self.below(2) as usize],
            _ => SENDERS[self.below(3) as usize],
        };
        let transaction_id = self.transaction_id(sender);
        let signal: Signal = match self.below(12) {
            0 => TcCommitReq { transaction_id }.into(),
            1 => TcRollbackReq { transaction_id }.into(),
            3 => {
                // Mostly near the current GCI, sometimes anything.
                let gci = match self.below(4) {
                    0 => Gci(self.rng.next_u64()),
                    _ => Gci((self.gci.0 + self.below(6)).saturating_sub(3)),
                };
                GciWaitReq {
                    request_id: self.rng.next_u64() as u32,
                    gci,
                }
                .into()
            }
            2 => {
                let name = self.random_bytes(8);
                match self.below(4) {
                    0 => ApiRegReq {
                        protocol_version: 1,
                        token: signal::signals::ApiToken::NONE,
                    }
                    .into(),
                    1 => CreateTabReq {
                        request_id: 1,
                        definition: self.section(&name),
                    }
                    .into(),
                    2 => DropTabReq {
                        request_id: 2,
                        name: self.section(&name),
                    }
                    .into(),
                    _ => GetTabInfoReq {
                        request_id: 3,
                        name: self.section(&name),
                    }
                    .into(),
                }
            }
            _ => {
                let key = self.key();
                let attr = match self.below(3) {
                    0 => None,
                    _ => Some(self.random_bytes(30)),
                };
                let flags = match self.below(6) {
                    0 => self.below(8) as u8,
                    1 => tc_key_flags::START | tc_key_flags::EXECUTE,
                    2 => tc_key_flags::START | tc_key_flags::COMMIT,
                    3 => tc_key_flags::COMMIT,
                    4 => tc_key_flags::EXECUTE,
                    _ => 0,
                };
                let (table_id, table_version) = match self.below(20) {
                    0 => (self.rng.next_u64() as u32, 7),
                    1 => (3, self.rng.next_u64() as u32),
                    2 => (u32::MAX, u32::MAX),
                    _ => (3, 7),
                };
                TcKeyReq {
                    transaction_id,
                    client_op: self.rng.next_u64() as u32,
                    flags,
                    kind: OperationKind::from_u8(1 + self.below(5) as u8).expect("valid kind"),
                    lock: LockMode::from_u8(self.below(3) as u8).expect("valid lock"),
                    table_id,
                    table_version,
                    key: self.section(&key),
                    attr: attr.map(|bytes| self.section(&bytes)),
                }
                .into()
            }
        };
        self.deliver(sender, signal);
    }

    fn ldm_ref(instance: usize) -> BlockRef {
        BlockRef::new(NODE, BlockKind::Ldm, instance as u16)
    }

    /// Answers an LQHKEYREQ as a correct ldm may: prepared (with row data
    /// for reads), or refused.
    fn answer(&mut self, instance: usize, request: LqhKeyReq) {
        let ldm = Fuzz::ldm_ref(instance);
        if self.below(5) == 0 {
            let error = [
                ErrorCode::NoSuchRow,
                ErrorCode::DuplicateKey,
                ErrorCode::BadRequest,
                ErrorCode::TableFull,
            ][self.below(4) as usize];
            let refusal = LqhKeyRef {
                tc_op: request.tc_op,
                error,
            };
            return self.deliver(ldm, refusal);
        }
        let read = request.kind == OperationKind::Read;
        let data = read.then(|| self.section(b"\x00\x00\x02\x00ab"));
        self.next_ldm_op += 1;
        let conf = LqhKeyConf {
            tc_op: request.tc_op,
            ldm_op: self.next_ldm_op,
            data,
            released: read && request.lock == LockMode::CommittedRead,
        };
        self.deliver(ldm, conf);
    }

    /// The ldm `instance` takes the next signal of its inbox.
    fn ldm_step(&mut self, instance: usize) {
        let ldm = Fuzz::ldm_ref(instance);
        let Some(signal) = self.ldms[instance].inbox.pop_front() else {
            return;
        };
        match signal {
            Signal::LqhKeyReq(request) => {
                if self.below(4) == 0 {
                    self.ldms[instance].waiting.push(request);
                } else {
                    self.answer(instance, request);
                }
            }
            Signal::CommitReq(request) => self.deliver(
                ldm,
                CommitConf {
                    tc_op: request.tc_op,
                },
            ),
            Signal::CompleteReq(request) => self.deliver(
                ldm,
                CompleteConf {
                    tc_op: request.tc_op,
                },
            ),
            Signal::AbortReq(request) => {
                self.ldms[instance]
                    .waiting
                    .retain(|waiting| waiting.tc_op != request.tc_op);
                self.deliver(
                    ldm,
                    AbortConf {
                        tc_op: request.tc_op,
                    },
                );
            }
            other => unreachable!("only ldm signals are queued, not {other:?}"),
        }
    }

    /// A lock wait ends: a waiting LQHKEYREQ is answered.
    fn lock_granted(&mut self, instance: usize) {
        let waiting = &mut self.ldms[instance].waiting;
        if waiting.is_empty() {
            return;
        }
        let index = self.rng.below(waiting.len() as u64) as usize;
        let request = self.ldms[instance].waiting.swap_remove(index);
        self.answer(instance, request);
    }

    fn gcp_step(&mut self) {
        if self.gcp_prepared {
            self.gcp_prepared = false;
            let gci = self.gci;
            self.deliver(DIH, GcpCommit { gci });
            // Every tc is past the previous GCI now: it may be flushed,
            // and the last one flushed reported durable.
            if let Some(flushed) = self.flushed.take() {
                self.deliver(DIH, GcpDurableRep { gci: flushed });
            }
            if self.flush_pending.is_none() {
                let previous = Gci(gci.0 - 1);
                self.flush_pending = Some(previous);
                self.deliver(DIH, GcpFlushReq { gci: previous });
            }
        } else {
            self.gcp_prepared = true;
            self.gci = Gci(self.gci.0 + 1);
            let new_gci = self.gci;
            self.deliver(DIH, GcpPrepare { new_gci });
        }
    }

    fn scan(&mut self, advance_ms: u64) {
        self.ctx.now_ms += advance_ms;
        self.deliver(
            TC,
            ContinueB {
                job: TIMEOUT_SCAN_JOB,
            },
        );
    }

    fn step(&mut self) {
        match self.below(20) {
            0..=6 => self.client_request(),
            7..=12 => {
                let instance = self.below(u64::from(LDM_INSTANCES)) as usize;
                self.ldm_step(instance);
            }
            13 | 14 => {
                let instance = self.below(u64::from(LDM_INSTANCES)) as usize;
                self.lock_granted(instance);
            }
            15 => self.gcp_step(),
            16 | 17 => {
                let advance = self.below(700);
                self.scan(advance);
            }
            18 => {
                let node = SENDERS[self.below(SENDERS.len() as u64) as usize].node;
                self.deliver(MEMBERSHIP, ApiFailRep { node });
            }
            _ => {
                // A partition moving between ldm queues is not a thing;
                // instead, let both ldms catch up completely.
                for instance in 0..LDM_INSTANCES as usize {
                    while !self.ldms[instance].inbox.is_empty() {
                        self.ldm_step(instance);
                    }
                }
            }
        }
    }

    /// Every client goes away and every block catches up: nothing may be
    /// left in the tc.
    fn drain(&mut self) {
        for sender in SENDERS {
            self.deliver(MEMBERSHIP, ApiFailRep { node: sender.node });
        }
        if self.gcp_prepared {
            self.gcp_step();
        }
        for _ in 0..100 {
            for instance in 0..LDM_INSTANCES as usize {
                while !self.ldms[instance].inbox.is_empty() {
                    self.ldm_step(instance);
                }
                while !self.ldms[instance].waiting.is_empty() {
                    self.lock_granted(instance);
                }
            }
            self.scan(INACTIVE_MS);
        }
        for ldm in &self.ldms {
            assert!(ldm.inbox.is_empty() && ldm.waiting.is_empty());
        }
        assert_eq!(
            self.tc.transactions_in_use(),
            0,
            "transaction records leaked"
        );
        assert_eq!(
            self.tc.records.operations_in_use, 0,
            "operation records leaked"
        );
        assert_eq!(self.tc.records.active_head, NIL, "active list not empty");
        assert_eq!(self.tc.waiting_for_gci_head, NIL, "commits still held");
        assert_eq!(self.tc.transactions_in_commit_phase(), 0);
        assert_eq!(self.flush_pending, None, "a flush was never answered");
        assert_eq!(self.tc.gci_waits_held(), 0, "waits of failed API nodes");
        for (class, &count) in POOL_COUNTS.iter().enumerate() {
            assert_eq!(
                self.ctx.pool().free_in_class(class),
                count,
                "sections leaked"
            );
        }
    }
}

#[test]
fn random_client_requests_never_crash_the_tc_or_leak_records() {
    for seed in 0..8 {
        let mut fuzz = Fuzz::new(seed);
        for _ in 0..10_000 {
            fuzz.step();
        }
        fuzz.drain();
        let (confs, refs, others) = fuzz.answers;
        assert!(
            confs > 100
                && refs > 1000
                && others > 400
                && fuzz.tc.counters().commits > 40
                && fuzz.flushes > 20,
            "seed {seed}: too few of each answer: {:?} (commits {}, flushes {})",
            fuzz.answers,
            fuzz.tc.counters().commits,
            fuzz.flushes
        );
    }
}

#[test]
fn api_requests_for_other_blocks_are_refused_not_panicked_on() {
    let mut fuzz = Fuzz::new(1);
    let api = SENDERS[0];
    let name = fuzz.section(b"t");
    fuzz.deliver(
        api,
        CreateTabReq {
            request_id: 9,
            definition: name,
        },
    );
    fuzz.deliver(
        api,
        ApiRegReq {
            protocol_version: 1,
            token: signal::signals::ApiToken::NONE,
        },
    );
    let name = fuzz.section(b"t");
    fuzz.deliver(
        api,
        GetTabInfoReq {
            request_id: 10,
            name,
        },
    );
    // Two SchemaRefs and an ApiRegRef (counted as other answers).
    assert_eq!(fuzz.answers, (0, 0, 3));
    fuzz.drain();
}
