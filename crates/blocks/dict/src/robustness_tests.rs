//! Robustness of dict against what API nodes send: create requests whose
//! definitions are random bytes, mangled encodings or tables that break a
//! rule (no columns, bad names, huge partition counts), drops and lookups
//! of random names (invalid UTF-8 included), table listings (each sorted,
//! of valid names, none twice), transaction requests sent to
//! dict, and API nodes failing, while the other blocks (played by the test,
//! correctly and in random order) answer the schema operations in flight.
//! dict must not panic, must answer every request of a live API node
//! exactly once, and may only ever create valid tables. The dict is the
//! master of two data nodes; the other node's dict (a real one) follows,
//! and must end with the same tables (and list them alike) and schema
//! version.

use crate::{Dict, DictConfig, MAX_PARTITIONS};
use kernel::testing::{deliver, RecordingContext};
use kernel::Context;
use signal::phases::{self, PHASES};
use signal::schema::{ColumnDef, ColumnType, TableDef};
use signal::signals::*;
use signal::{codec, BlockKind, BlockRef, NodeId, Signal, TransactionId};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use stdx::mix::XorShift;

const NODE: NodeId = NodeId(1);
const DICT: BlockRef = BlockRef::new(NODE, BlockKind::Dict, 0);
const MEMBERSHIP: BlockRef = BlockRef::new(NODE, BlockKind::Membership, 0);
const FOLLOWER: BlockRef = BlockRef::new(NodeId(2), BlockKind::Dict, 0);
const APIS: [BlockRef; 3] = [
    BlockRef::new(NodeId(100), BlockKind::Api, 0),
    BlockRef::new(NodeId(101), BlockKind::Api, 0),
    BlockRef::new(NodeId(101), BlockKind::Api, 1),
];
const NAMES: [&str; 3] = ["t1", "t2", "T1"];

fn valid_table(rng: &mut XorShift) -> TableDef {
    let columns = (0..1 + rng.below(4))
        .map(|index| ColumnDef {
            name: format!("c{index}"),
            column_type: match rng.below(3) {
                0 => ColumnType::Int { unsigned: false },
                1 => ColumnType::Char(1 + rng.below(255) as u16),
                _ => ColumnType::VarBinary(1 + rng.below(16_000) as u16),
            },
            nullable: index > 0,
        })
        .collect();
    TableDef {
        indexes: Vec::new(),
        revision: 0,
        id: rng.next_u64() as u32,
        version: rng.next_u64() as u32,
        name: NAMES[rng.below(NAMES.len() as u64) as usize].into(),
        columns,
        primary_key: vec![0],
        partitions: match rng.below(6) {
            0 => MAX_PARTITIONS,
            1 => MAX_PARTITIONS + 1,
            2 => u32::MAX,
            3 => 1 + rng.below(8) as u32,
            _ => 0,
        },
        partition_key: Vec::new(),
    }
}

struct Fuzz {
    dict: Dict,
    ctx: RecordingContext,
    /// Node 2's dict, which learns tables from `dict`.
    follower: Dict,
    follower_ctx: RecordingContext,
    rng: XorShift,
    /// Signals dict sent to dih, the tcs and the ldms, not yet answered.
    to_blocks: Vec<(BlockRef, Signal)>,
    /// Requests of live API nodes that must be answered once.
    outstanding: HashSet<(BlockRef, u32)>,
    /// Requests of API nodes that failed since: may be answered, or not.
    orphaned: HashSet<(BlockRef, u32)>,
    next_request: u32,
    /// Answers by signal name.
    answers: HashMap<&'static str, u32>,
    /// Names of the tables dict started to create.
    creating: HashSet<String>,
}

impl Fuzz {
    fn new(seed: u64) -> Fuzz {
        let config = DictConfig {
            address: DICT,
            tc_instances: 2,
            ldm_instances: 2,
            data_nodes: vec![(NODE, 0), (FOLLOWER.node, 0)],
            replicas: 2,
            redo_log_parts: 2,
            diskless: true,
        };
        let mut follower = Dict::new(DictConfig {
            address: FOLLOWER,
            ..config.clone()
        })
        .announced();
        let mut follower_ctx = RecordingContext::new();
        for &phase in PHASES {
            let membership = BlockRef::new(FOLLOWER.node, BlockKind::Membership, 0);
            deliver(
                &mut follower,
                &mut follower_ctx,
                membership,
                StartPhaseReq { phase },
            );
        }
        follower_ctx.sent.clear();
        let mut fuzz = Fuzz {
            dict: Dict::new(config).announced(),
            ctx: RecordingContext::new(),
            follower,
            follower_ctx,
            rng: XorShift::new(seed),
            to_blocks: Vec::new(),
            outstanding: HashSet::new(),
            orphaned: HashSet::new(),
            next_request: 0,
            answers: HashMap::new(),
            creating: HashSet::new(),
        };
        for &phase in PHASES {
            fuzz.deliver(MEMBERSHIP, StartPhaseReq { phase });
            if phase == phases::RESTORE_SCHEMA {
                // The dicts agree on the schema before the next phase.
                let (block, request) = fuzz.to_blocks.pop().expect("the master's schema");
                assert!(fuzz.to_blocks.is_empty() && matches!(request, Signal::SchemaSyncReq(_)));
                fuzz.to_blocks.push((block, request));
                fuzz.block_answer();
                assert!(fuzz.follower.restoring.is_none() && fuzz.dict.restoring.is_none());
            }
        }
        fuzz
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.rng.below(bound)
    }

    fn deliver(&mut self, from: BlockRef, signal: impl Into<Signal>) {
        deliver(&mut self.dict, &mut self.ctx, from, signal);
        for sent in std::mem::take(&mut self.ctx.sent) {
            let to = sent.envelope.to;
            let request_id = match &sent.envelope.signal {
                Signal::CreateTabConf(conf) => Some(conf.request_id),
                Signal::DropTabConf(conf) => Some(conf.request_id),
                Signal::SchemaRef(refusal) => Some(refusal.request_id),
                Signal::GetTabInfoConf(conf) => {
                    let table = TableDef::decode(conf.definition.as_slice())
                        .expect("dict hands out valid definitions");
                    assert!(table.partitions >= 1 && table.partitions <= MAX_PARTITIONS);
                    Some(conf.request_id)
                }
                Signal::ListTablesConf(conf) => {
                    let names = codec::decode_table_names(conf.names.as_slice())
                        .expect("dict encodes valid names");
                    assert!(
                        names.windows(2).all(|pair| pair[0] < pair[1]),
                        "names sorted, none twice: {names:?}"
                    );
                    assert!(
                        names.iter().all(|&name| self.creating.contains(name)),
                        "only created tables: {names:?}"
                    );
                    assert_eq!(conf.schema_version, self.dict.schema_version());
                    Some(conf.request_id)
                }
                Signal::TcKeyRef(_) | Signal::StartPhaseConf(_) => None,
                Signal::DiAddTabReq(request) => {
                    assert_eq!(request.table.validate(), Ok(()));
                    assert!(request.table.partitions >= 1);
                    assert!(request.table.partitions <= MAX_PARTITIONS);
                    self.creating.insert(request.table.name.clone());
                    None
                }
                _ => None,
            };
            *self.answers.entry(sent.envelope.signal.name()).or_default() += 1;
            match (to.kind, request_id) {
                (BlockKind::Api, Some(request_id)) => {
                    let answered = self.outstanding.remove(&(to, request_id))
                        || self.orphaned.remove(&(to, request_id));
                    assert!(answered, "{to} got a second or unasked answer: {sent:?}");
                }
                (BlockKind::Api, None) => {}
                (BlockKind::Membership, None) => {}
                _ => self.to_blocks.push((to, sent.envelope.signal)),
            }
        }
    }

    fn random_bytes(&mut self, max: u64) -> Vec<u8> {
        let len = self.below(max + 1) as usize;
        (0..len).map(|_| self.rng.next_u64() as u8).collect()
    }

    fn definition(&mut self) -> Vec<u8> {
        match self.below(6) {
            0 => self.random_bytes(60),
            1 => {
                let mut bytes = valid_table(&mut self.rng).encode_to_vec();
                let position = self.below(bytes.len() as u64) as usize;
                bytes[position] = self.rng.next_u64() as u8;
                bytes
            }
            2 => {
                let mut table = valid_table(&mut self.rng);
                match self.below(5) {
                    0 => table.columns.clear(),
                    1 => table.name = "bad name".into(),
                    2 => table.primary_key = vec![u16::MAX],
                    3 => table.columns[0].nullable = true,
                    _ => table.name = "x".repeat(65),
                }
                table.encode_to_vec()
            }
            _ => valid_table(&mut self.rng).encode_to_vec(),
        }
    }

    fn name(&mut self) -> Vec<u8> {
        match self.below(4) {
            0 => self.random_bytes(10),
            1 => vec![0xff, 0xfe],
            _ => NAMES[self.below(NAMES.len() as u64) as usize]
                .as_bytes()
                .to_vec(),
        }
    }

    fn api_request(&mut self) {
        let api = APIS[self.below(APIS.len() as u64) as usize];
        self.next_request += 1;
        let request_id = self.next_request;
        let pool = self.ctx.pool();
        let signal: Signal = match self.below(9) {
            0..=2 => {
                let definition = self.definition();
                CreateTabReq {
                    request_id,
                    definition: pool.copy_from(&definition).expect("pool has room"),
                }
                .into()
            }
            3 | 4 => {
                let name = self.name();
                DropTabReq {
                    request_id,
                    name: pool.copy_from(&name).expect("pool has room"),
                }
                .into()
            }
            5 => {
                let name = self.name();
                GetTabInfoReq {
                    request_id,
                    name: pool.copy_from(&name).expect("pool has room"),
                }
                .into()
            }
            6 => ListTablesReq { request_id }.into(),
            7 => {
                // Transaction requests addressed to dict.
                let transaction_id = TransactionId(u64::from(api.node.0) << 48);
                match self.below(3) {
                    0 => TcCommitReq { transaction_id }.into(),
                    1 => TcRollbackReq { transaction_id }.into(),
                    _ => TcKeyReq {
                        transaction_id,
                        client_op: 1,
                        flags: tc_key_flags::START,
                        kind: OperationKind::Read,
                        lock: LockMode::Shared,
                        table_id: 0,
                        table_version: 1,
                        key: pool.copy_from(b"key").expect("pool has room"),
                        attr: None,
                    }
                    .into(),
                }
            }
            _ => ApiRegReq {
                protocol_version: 1,
                token: signal::signals::ApiToken::NONE,
            }
            .into(),
        };
        if matches!(
            signal,
            Signal::CreateTabReq(_)
                | Signal::DropTabReq(_)
                | Signal::GetTabInfoReq(_)
                | Signal::ListTablesReq(_)
        ) {
            self.outstanding.insert((api, request_id));
        }
        self.deliver(api, signal);
    }

    /// One block answers one of dict's signals, as a correct block does.
    fn block_answer(&mut self) {
        if self.to_blocks.is_empty() {
            return;
        }
        let index = self.below(self.to_blocks.len() as u64) as usize;
        let (block, signal) = self.to_blocks.swap_remove(index);
        match signal {
            Signal::DiAddTabReq(request) => {
                let map = Arc::new(PartitionMap {
                    table_id: request.table.id,
                    version: 1,
                    bucket_partitions: Vec::new(),
                    partitions: Vec::new(),
                });
                self.deliver(block, DiAddTabConf { map });
            }
            Signal::TcAddTabReq(request) => {
                let table_id = request.table.id;
                self.deliver(block, AddTabConf { table_id });
            }
            Signal::LqhAddTabReq(request) => {
                let table_id = request.table.id;
                self.deliver(block, AddTabConf { table_id });
            }
            // The other dict answers for itself.
            signal @ (Signal::DictAddTabReq(_) | Signal::DropTabOrd(_)) if block == FOLLOWER => {
                deliver(&mut self.follower, &mut self.follower_ctx, DICT, signal);
                let [reply] = &mut self.follower_ctx.sent[..] else {
                    panic!("one reply from the follower");
                };
                assert_eq!(reply.envelope.to, DICT);
                let reply = self.follower_ctx.sent.pop().expect("one reply");
                self.deliver(FOLLOWER, reply.envelope.signal);
            }
            // At start: the master's schema ("no schema", diskless), which
            // ends the other dict's phase RESTORE_SCHEMA.
            Signal::SchemaSyncReq(request) if block == FOLLOWER => {
                deliver(&mut self.follower, &mut self.follower_ctx, DICT, request);
                for reply in std::mem::take(&mut self.follower_ctx.sent) {
                    match reply.envelope.to {
                        DICT => self.deliver(FOLLOWER, reply.envelope.signal),
                        to => assert_eq!(to.kind, BlockKind::Membership),
                    }
                }
            }
            Signal::DropTabOrd(order) => {
                let busy = block.kind == BlockKind::Ldm && self.below(4) == 0;
                let report = DropTabRep {
                    table_id: order.table_id,
                    busy,
                };
                self.deliver(block, report);
            }
            other => panic!("dict sent {} to {block}", other.name()),
        }
    }

    fn step(&mut self) {
        match self.below(20) {
            0..=8 => self.api_request(),
            9..=18 => self.block_answer(),
            _ => {
                let api = APIS[self.below(APIS.len() as u64) as usize];
                let failed: Vec<_> = self
                    .outstanding
                    .iter()
                    .filter(|(to, _)| to.node == api.node)
                    .copied()
                    .collect();
                for request in failed {
                    self.outstanding.remove(&request);
                    self.orphaned.insert(request);
                }
                self.deliver(MEMBERSHIP, ApiFailRep { node: api.node });
            }
        }
    }
}

#[test]
fn random_schema_requests_never_crash_dict_and_are_each_answered_once() {
    for seed in 0..6 {
        let mut fuzz = Fuzz::new(seed);
        for _ in 0..4000 {
            fuzz.step();
        }
        while !fuzz.to_blocks.is_empty() {
            fuzz.block_answer();
        }
        assert!(
            fuzz.outstanding.is_empty(),
            "seed {seed}: unanswered requests {:?}",
            fuzz.outstanding
        );
        assert_eq!(
            fuzz.follower.schema_version(),
            fuzz.dict.schema_version(),
            "seed {seed}: the follower missed a schema change"
        );
        for name in NAMES {
            let lookup = |dict: &mut Dict, ctx: &mut RecordingContext| {
                let request = GetTabInfoReq {
                    request_id: 0,
                    name: ctx.pool().copy_from(name.as_bytes()).expect("room"),
                };
                deliver(dict, ctx, APIS[0], request);
                let reply = ctx.sent.pop().expect("an answer");
                match reply.envelope.signal {
                    Signal::GetTabInfoConf(conf) => Some(conf.definition.as_slice().to_vec()),
                    _ => None,
                }
            };
            assert_eq!(
                lookup(&mut fuzz.follower, &mut fuzz.follower_ctx),
                lookup(&mut fuzz.dict, &mut fuzz.ctx),
                "seed {seed}: the dicts disagree on table {name}"
            );
        }
        let list = |dict: &mut Dict, ctx: &mut RecordingContext| {
            deliver(dict, ctx, APIS[0], ListTablesReq { request_id: 0 });
            let reply = ctx.sent.pop().expect("an answer");
            let Signal::ListTablesConf(conf) = reply.envelope.signal else {
                panic!("a started dict lists its tables: {reply:?}");
            };
            (conf.schema_version, conf.names.as_slice().to_vec())
        };
        assert_eq!(
            list(&mut fuzz.follower, &mut fuzz.follower_ctx),
            list(&mut fuzz.dict, &mut fuzz.ctx),
            "seed {seed}: the dicts list different tables"
        );
        let count = |name| fuzz.answers.get(name).copied().unwrap_or(0);
        assert!(
            count("CreateTabConf") > 50
                && count("DictAddTabReq") == count("CreateTabConf")
                && count("DropTabConf") > 50
                && count("GetTabInfoConf") > 25
                && count("ListTablesConf") > 100
                && count("SchemaRef") > 500
                && count("TcKeyRef") > 100,
            "seed {seed}: too few of some answer: {:?}",
            fuzz.answers
        );
    }
}
