//! Golden traces of the linear two-phase commit
//! (docs/design/transactions.md §3-§6) for 1, 2, 3 and 4 replicas: one tc
//! and one ldm per data node, signals delivered one at a time in the order
//! they were sent, every signal recorded. The traces pin the exact order:
//! LQHKEYREQ along the chain primary -> backups, the last replica confirms
//! to the tc; COMMIT from the last replica back to the primary, which
//! confirms; TCKEYCONF to the client; COMPLETE along the same way back.

use kernel::testing::RecordingContext;
use kernel::{Block, Context};
use ldm::{Ldm, LdmConfig};
use signal::attr::AttrWriter;
use signal::partition::BUCKETS;
use signal::schema::{ColumnDef, ColumnType, TableDef};
use signal::signals::*;
use signal::{BlockKind, BlockRef, Envelope, Gci, NodeId, Signal, TransactionId};
use std::collections::VecDeque;
use std::sync::Arc;
use tc::{Tc, TcConfig};

const API: BlockRef = BlockRef::new(NodeId(200), BlockKind::Api, 0);
const TC: BlockRef = BlockRef::new(NodeId(2), BlockKind::Tc, 0);

fn table() -> TableDef {
    TableDef {
        indexes: Vec::new(),
        revision: 0,
        id: 0,
        version: 1,
        name: "t".into(),
        columns: vec![
            ColumnDef {
                name: "k".into(),
                column_type: ColumnType::Int { unsigned: false },
                nullable: false,
            },
            ColumnDef {
                name: "v".into(),
                column_type: ColumnType::VarChar(20),
                nullable: true,
            },
        ],
        primary_key: vec![0],
        partitions: 1,
        partition_key: Vec::new(),
    }
}

struct Cluster {
    tc: Tc,
    ldms: Vec<Ldm>,
    queue: VecDeque<Envelope>,
    ctx: RecordingContext,
    trace: Vec<String>,
}

fn ldm_ref(node: u16) -> BlockRef {
    BlockRef::new(NodeId(node), BlockKind::Ldm, 0)
}

impl Cluster {
    fn new(replicas: u16) -> Cluster {
        let nodes: Vec<NodeId> = (0..replicas).map(|i| NodeId(2 + i)).collect();
        let mut cluster = Cluster {
            tc: Tc::new(TcConfig {
                address: TC,
                max_transactions: 16,
                max_operations: 64,
                max_operations_per_transaction: 64,
                lock_wait_timeout_ms: 1200,
                inactive_transaction_timeout_ms: 60_000,
                ldm_instances: 1,
            }),
            ldms: nodes
                .iter()
                .map(|&node| {
                    Ldm::new(LdmConfig {
                        address: BlockRef::new(node, BlockKind::Ldm, 0),
                        data_memory_bytes: 4 << 20,
                        max_operations: 64,
                        redo: None,
                    })
                })
                .collect(),
            queue: VecDeque::new(),
            ctx: RecordingContext::new(),
            trace: Vec::new(),
        };
        let table = Arc::new(table());
        let map = Arc::new(PartitionMap {
            table_id: 0,
            version: 1,
            bucket_partitions: vec![0; BUCKETS as usize],
            partitions: vec![PartitionPlacement {
                node_group: 0,
                replicas: nodes.clone(),
                ldm_instance: 0,
                redo_part: 0,
            }],
        });
        let dict = BlockRef::new(NodeId(2), BlockKind::Dict, 0);
        let dih = BlockRef::new(NodeId(2), BlockKind::Dih, 0);
        let membership = BlockRef::new(NodeId(2), BlockKind::Membership, 0);
        for phase in signal::phases::PHASES.iter().copied() {
            cluster.post(membership, TC, StartPhaseReq { phase });
        }
        cluster.post(
            dih,
            TC,
            GcpCommit {
                gci: Gci::from_parts(7, 0),
            },
        );
        cluster.post(
            dict,
            TC,
            TcAddTabReq {
                table: table.clone(),
                map: map.clone(),
            },
        );
        for node in &nodes {
            cluster.post(
                dict,
                ldm_ref(node.0),
                LqhAddTabReq {
                    table: table.clone(),
                    map: map.clone(),
                },
            );
        }
        cluster.run();
        cluster.trace.clear();
        cluster
    }

    fn post(&mut self, from: BlockRef, to: BlockRef, signal: impl Into<Signal>) {
        self.queue.push_back(Envelope {
            from,
            to,
            signal: signal.into(),
        });
    }

    /// Delivers signals in send order until none is left for a data-node
    /// block (signals to the API and to dict/dih/membership are recorded only).
    fn run(&mut self) {
        while let Some(envelope) = self.queue.pop_front() {
            self.trace.push(format!(
                "{} -> {}: {}",
                envelope.from,
                envelope.to,
                envelope.signal.name()
            ));
            match envelope.to.kind {
                BlockKind::Tc => self.tc.handle(envelope, &mut self.ctx),
                BlockKind::Ldm => {
                    let node = envelope.to.node.0 as usize - 2;
                    self.ldms[node].handle(envelope, &mut self.ctx);
                }
                _ => continue,
            }
            for sent in self.ctx.sent.drain(..) {
                if sent.delay_ms.is_none() {
                    self.queue.push_back(sent.envelope);
                }
            }
        }
    }

    fn insert_and_commit(&mut self, k: i32) {
        self.insert(k, tc_key_flags::START | tc_key_flags::COMMIT);
    }

    fn insert(&mut self, k: i32, flags: u8) {
        let pool = self.ctx.pool();
        let mut key = pool.alloc(8).expect("section");
        let used = {
            let mut writer = AttrWriter::new(key.as_mut_slice());
            writer.push(0, Some(&k.to_le_bytes())).expect("fits");
            writer.len()
        };
        key.set_len(used);
        let mut attr = pool.alloc(16).expect("section");
        let used = {
            let mut writer = AttrWriter::new(attr.as_mut_slice());
            writer.push(1, Some(b"value")).expect("fits");
            writer.len()
        };
        attr.set_len(used);
        self.post(
            API,
            TC,
            TcKeyReq {
                transaction_id: TransactionId(200 << 48 | 1),
                client_op: 0,
                flags,
                kind: OperationKind::Insert,
                lock: LockMode::Exclusive,
                table_id: 0,
                table_version: 1,
                key,
                attr: Some(attr),
            },
        );
        self.run();
    }
}

fn expected(replicas: u16) -> Vec<String> {
    let tc = "2:tc#0";
    let api = "200:api#0";
    let ldm = |i: u16| format!("{}:ldm#0", 2 + i);
    let mut lines = vec![
        format!("{api} -> {tc}: TcKeyReq"),
        format!("{tc} -> {}: LqhKeyReq", ldm(0)),
    ];
    for i in 1..replicas {
        lines.push(format!("{} -> {}: LqhKeyReq", ldm(i - 1), ldm(i)));
    }
    lines.push(format!("{} -> {tc}: LqhKeyConf", ldm(replicas - 1)));
    lines.push(format!("{tc} -> {}: CommitReq", ldm(replicas - 1)));
    for i in (1..replicas).rev() {
        lines.push(format!("{} -> {}: CommitReq", ldm(i), ldm(i - 1)));
    }
    lines.push(format!("{} -> {tc}: CommitConf", ldm(0)));
    lines.push(format!("{tc} -> {api}: TcKeyConf"));
    lines.push(format!("{tc} -> {}: CompleteReq", ldm(replicas - 1)));
    for i in (1..replicas).rev() {
        lines.push(format!("{} -> {}: CompleteReq", ldm(i), ldm(i - 1)));
    }
    lines.push(format!("{} -> {tc}: CompleteConf", ldm(0)));
    lines
}

#[test]
fn insert_and_commit_run_the_chain_in_the_exact_order_for_one_to_four_replicas() {
    for replicas in 1..=4u16 {
        let mut cluster = Cluster::new(replicas);
        cluster.insert_and_commit(42);
        assert_eq!(cluster.trace, expected(replicas), "replicas = {replicas}");
        for (position, ldm) in cluster.ldms.iter().enumerate() {
            assert_eq!(
                ldm.rows(0),
                1,
                "replica {position} of {replicas} holds the row"
            );
            assert_eq!(
                ldm.operations_in_use(),
                0,
                "replica {position} released its record"
            );
        }
        assert_eq!(cluster.tc.transactions_in_use(), 0);
    }
}

#[test]
fn rollback_of_a_prepared_insert_runs_the_abort_down_the_chain() {
    for replicas in 1..=4u16 {
        let mut cluster = Cluster::new(replicas);
        cluster.insert(42, tc_key_flags::START | tc_key_flags::EXECUTE);
        for ldm in &cluster.ldms {
            assert_eq!(ldm.rows(0), 1, "the prepared insert holds a reserved slot");
        }
        cluster.trace.clear();
        cluster.post(
            API,
            TC,
            TcRollbackReq {
                transaction_id: TransactionId(200 << 48 | 1),
            },
        );
        cluster.run();
        let ldm = |i: u16| format!("{}:ldm#0", 2 + i);
        let mut expected = vec![
            "200:api#0 -> 2:tc#0: TcRollbackReq".to_string(),
            format!("2:tc#0 -> {}: AbortReq", ldm(0)),
        ];
        for i in 1..replicas {
            expected.push(format!("{} -> {}: AbortReq", ldm(i - 1), ldm(i)));
        }
        expected.push(format!("{} -> 2:tc#0: AbortConf", ldm(replicas - 1)));
        expected.push("2:tc#0 -> 200:api#0: TcRollbackConf".to_string());
        assert_eq!(cluster.trace, expected, "replicas = {replicas}");
        for (position, ldm) in cluster.ldms.iter().enumerate() {
            assert_eq!(
                ldm.rows(0),
                0,
                "replica {position} of {replicas} freed the slot"
            );
            assert_eq!(
                ldm.operations_in_use(),
                0,
                "replica {position} released its record"
            );
        }
        assert_eq!(cluster.tc.transactions_in_use(), 0);
    }
}
