//! tc block tests (docs/design/testing.md §2): one tc alone, fed the signals
//! that membership, dih, dict, the ldms and the API would send; the test
//! plays all of them. Golden traces check the exact signals the tc sends, in
//! order; behaviour tests check refusals, timeouts, aborts and that every
//! transaction and operation record returns to its pool. Partition maps are
//! built as dih builds them (node 2, one node group, partitions spread over
//! two ldm instances), keys and hashes with `signal::attr`. The `Bench` and
//! its helpers are shared with `abort_tests`, `refusal_tests` and
//! `durability_tests`; golden traces of the normal paths are here.

use crate::records::{TransactionState, NIL};
use crate::{Tc, TcConfig, TIMEOUT_SCAN_JOB};
use kernel::testing::{column, one_node_map};
use kernel::testing::{delayed_line, deliver, line, RecordingContext};
use kernel::Context;
use signal::attr::{key_hash, AttrWriter, KeyHash};
use signal::partition::bucket;
use signal::schema::{ColumnType, TableDef};
use signal::signals::*;
use signal::{BlockKind, BlockRef, ErrorCode, Gci, NodeId, Section, Signal, TransactionId};
use std::sync::Arc;

pub(crate) const NODE: NodeId = NodeId(2);
pub(crate) const TC: BlockRef = BlockRef::new(NODE, BlockKind::Tc, 0);
pub(crate) const DIH: BlockRef = BlockRef::new(NODE, BlockKind::Dih, 0);
pub(crate) const DICT: BlockRef = BlockRef::new(NODE, BlockKind::Dict, 0);
pub(crate) const MEMBERSHIP: BlockRef = BlockRef::new(NODE, BlockKind::Membership, 0);
pub(crate) const API: BlockRef = BlockRef::new(NodeId(10), BlockKind::Api, 0);
pub(crate) const OTHER_API: BlockRef = BlockRef::new(NodeId(11), BlockKind::Api, 0);

pub(crate) const TABLE_ID: u32 = 3;
pub(crate) const TABLE_VERSION: u32 = 7;
pub(crate) const PARTITIONS: u32 = 2;
pub(crate) const LDM_INSTANCES: u16 = 2;
/// Column ids of the test table.
pub(crate) const V: u16 = 1;
pub(crate) const S: u16 = 2;

pub(crate) const G1: Gci = Gci::from_parts(5, 1);
pub(crate) const G2: Gci = Gci::from_parts(5, 2);
pub(crate) const LOCK_WAIT_MS: u64 = 1200;
pub(crate) const INACTIVE_MS: u64 = 5000;
/// (LOCK_WAIT_MS / 10).clamp(10, 100).
pub(crate) const SCAN_MS: u64 = 100;
pub(crate) const NO_OP: u32 = u32::MAX;

pub(crate) const START: u8 = tc_key_flags::START;
pub(crate) const EXECUTE: u8 = tc_key_flags::EXECUTE;
pub(crate) const COMMIT: u8 = tc_key_flags::COMMIT;

pub(crate) type Entries<'a> = &'a [(u16, Option<&'a [u8]>)];

pub(crate) fn table() -> TableDef {
    let table = TableDef {
        indexes: Vec::new(),
        revision: 0,
        id: TABLE_ID,
        version: TABLE_VERSION,
        name: "accounts".into(),
        columns: vec![
            column("k", ColumnType::Int { unsigned: false }, false),
            column("v", ColumnType::BigInt { unsigned: false }, true),
            column("s", ColumnType::VarChar(20), true),
        ],
        primary_key: vec![0],
        partitions: PARTITIONS,
        partition_key: Vec::new(),
    };
    table.validate().expect("test table is valid");
    table
}

/// The map dih makes for one node group of one node (node 2) with
/// `LDM_INSTANCES` ldm threads and four redo log parts.
pub(crate) fn partition_map(table: &TableDef) -> PartitionMap {
    one_node_map(table, NODE, LDM_INSTANCES, |partition| partition % 4)
}

/// Attribute entries `entries` in a section of `ctx`'s pool.
pub(crate) fn section_of(ctx: &RecordingContext, entries: Entries<'_>) -> Section {
    let mut section = ctx.pool().alloc(128).expect("pool has room");
    let mut writer = AttrWriter::new(section.as_mut_slice());
    for &(column, value) in entries {
        writer.push(column, value).expect("fits");
    }
    let used = writer.len();
    section.set_len(used);
    section
}

pub(crate) fn txn(api: BlockRef, n: u64) -> TransactionId {
    TransactionId(u64::from(api.node.0) << 48 | n)
}

pub(crate) fn config() -> TcConfig {
    TcConfig {
        address: TC,
        max_transactions: 4,
        max_operations: 16,
        max_operations_per_transaction: 8,
        lock_wait_timeout_ms: LOCK_WAIT_MS,
        inactive_transaction_timeout_ms: INACTIVE_MS,
        ldm_instances: LDM_INSTANCES,
    }
}

pub(crate) fn scan() -> ContinueB {
    ContinueB {
        job: TIMEOUT_SCAN_JOB,
    }
}

pub(crate) fn rearm() -> String {
    delayed_line(TC, TC, scan(), SCAN_MS)
}

/// The trace line of the TCKEYREF the tc sends the API.
pub(crate) fn refusal_line(
    transaction_id: TransactionId,
    client_op: u32,
    error: ErrorCode,
) -> String {
    line(
        TC,
        API,
        TcKeyRef {
            transaction_id,
            client_op,
            error,
            index_id: 0,
        },
    )
}

/// The trace line of the TCKEYCONF that answers a batch without committing.
pub(crate) fn batch_conf_line(transaction_id: TransactionId, operations: u32) -> String {
    line(
        TC,
        API,
        TcKeyConf {
            transaction_id,
            operations,
            committed: false,
            gci: Gci(0),
            map_version: 1,
            row: None,
        },
    )
}

/// The trace line of the TCKEYCONF that acknowledges a commit.
pub(crate) fn commit_conf_line(transaction_id: TransactionId, operations: u32, gci: Gci) -> String {
    conf_line(transaction_id, operations, gci, None)
}

/// The trace line of the TCKEYCONF that acknowledges a commit and carries
/// the row of the read that answered last.
pub(crate) fn commit_conf_with_row_line(
    transaction_id: TransactionId,
    operations: u32,
    gci: Gci,
    row: ReadRow,
) -> String {
    conf_line(transaction_id, operations, gci, Some(row))
}

pub(crate) fn conf_line(
    transaction_id: TransactionId,
    operations: u32,
    gci: Gci,
    row: Option<ReadRow>,
) -> String {
    line(
        TC,
        API,
        TcKeyConf {
            transaction_id,
            operations,
            committed: true,
            gci,
            map_version: 1,
            row,
        },
    )
}

/// The trace line of the ABORT the tc sends `ldm` for its operation `tc_op`.
pub(crate) fn abort_line(ldm: BlockRef, tc_op: u32, transaction_id: TransactionId) -> String {
    line(
        TC,
        ldm,
        AbortReq {
            tc: TC,
            tc_op,
            transaction_id,
        },
    )
}

pub(crate) struct Bench {
    pub(crate) tc: Tc,
    pub(crate) ctx: RecordingContext,
    table: Arc<TableDef>,
    /// The map the table is added with (replaced before `start`, a test
    /// places its partitions elsewhere).
    pub(crate) map: Arc<PartitionMap>,
}

impl Bench {
    /// A tc that has not run its start phases.
    pub(crate) fn unstarted(config: TcConfig) -> Bench {
        let table = table();
        let map = partition_map(&table);
        Bench {
            tc: Tc::new(config),
            ctx: RecordingContext::new(),
            table: Arc::new(table),
            map: Arc::new(map),
        }
    }

    /// A started tc at GCI `G1` that knows the table.
    pub(crate) fn started(config: TcConfig) -> Bench {
        let mut bench = Bench::unstarted(config);
        bench.start();
        bench.ctx.sent.clear();
        bench
    }

    pub(crate) fn start(&mut self) {
        for &phase in signal::phases::PHASES {
            self.deliver(MEMBERSHIP, StartPhaseReq { phase });
        }
        self.deliver(DIH, GcpCommit { gci: G1 });
        let (table, map) = (self.table.clone(), self.map.clone());
        self.deliver(DICT, TcAddTabReq { table, map });
    }

    pub(crate) fn deliver(&mut self, from: BlockRef, signal: impl Into<Signal>) {
        deliver(&mut self.tc, &mut self.ctx, from, signal);
    }

    pub(crate) fn trace(&mut self) -> Vec<String> {
        self.ctx.take_trace()
    }

    pub(crate) fn section(&self, entries: Entries<'_>) -> Section {
        section_of(&self.ctx, entries)
    }

    pub(crate) fn key(&self, k: i32) -> Section {
        self.section(&[(0, Some(&k.to_le_bytes()))])
    }

    /// Where dih's map sends key `k`: (primary ldm, partition, hash).
    pub(crate) fn route(&self, k: i32) -> (BlockRef, u32, KeyHash) {
        let hash = key_hash(&self.table, self.key(k).as_slice()).expect("valid key");
        let partition = self.map.bucket_partitions[bucket(hash) as usize];
        let placement = &self.map.partitions[partition as usize];
        let ldm = BlockRef::new(
            placement.replicas[0],
            BlockKind::Ldm,
            placement.ldm_instance,
        );
        (ldm, partition, hash)
    }

    pub(crate) fn ldm_of(&self, k: i32) -> BlockRef {
        self.route(k).0
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn key_req(
        &self,
        transaction_id: TransactionId,
        client_op: u32,
        flags: u8,
        kind: OperationKind,
        lock: LockMode,
        k: i32,
        attr: Option<Entries<'_>>,
    ) -> TcKeyReq {
        TcKeyReq {
            transaction_id,
            client_op,
            flags,
            kind,
            lock,
            table_id: TABLE_ID,
            table_version: TABLE_VERSION,
            key: self.key(k),
            attr: attr.map(|entries| self.section(entries)),
        }
    }

    /// An insert of (k, v) as the API sends it.
    pub(crate) fn insert(
        &self,
        transaction_id: TransactionId,
        client_op: u32,
        flags: u8,
        k: i32,
    ) -> TcKeyReq {
        let v = i64::from(k) * 100;
        self.key_req(
            transaction_id,
            client_op,
            flags,
            OperationKind::Insert,
            LockMode::Exclusive,
            k,
            Some(&[(V, Some(&v.to_le_bytes())), (S, Some(b"x"))]),
        )
    }

    /// A committed read of k.
    pub(crate) fn read(
        &self,
        transaction_id: TransactionId,
        client_op: u32,
        flags: u8,
        k: i32,
    ) -> TcKeyReq {
        self.key_req(
            transaction_id,
            client_op,
            flags,
            OperationKind::Read,
            LockMode::CommittedRead,
            k,
            None,
        )
    }

    /// The trace line of the LQHKEYREQ the tc must send for an insert of k.
    pub(crate) fn insert_line(&self, tc_op: u32, transaction_id: TransactionId, k: i32) -> String {
        let request = self.insert(transaction_id, 0, 0, k);
        self.lqh_line(tc_op, request)
    }

    pub(crate) fn lqh_line(&self, tc_op: u32, request: TcKeyReq) -> String {
        let k = i32::from_le_bytes(request.key.as_slice()[4..8].try_into().expect("INT key"));
        let (ldm, partition, hash) = self.route(k);
        line(
            TC,
            ldm,
            LqhKeyReq {
                tc: TC,
                tc_op,
                chain: ReplicaChain::new(&[NODE]),
                position: 0,
                row_id: u32::MAX,
                previous_op: u32::MAX,
                transaction_id: request.transaction_id,
                kind: request.kind,
                lock: request.lock,
                table_id: request.table_id,
                partition,
                hash,
                key: request.key,
                attr: request.attr,
                no_wait: false,
            },
        )
    }

    /// Drains the sent signals, which must all be LQHKEYREQs; returns
    /// (ldm, tc_op) of each.
    pub(crate) fn take_lqh_key_reqs(&mut self) -> Vec<(BlockRef, u32)> {
        self.ctx
            .sent
            .drain(..)
            .map(|sent| match sent.envelope.signal {
                Signal::LqhKeyReq(request) => (sent.envelope.to, request.tc_op),
                other => panic!("expected LqhKeyReq, got {other:?}"),
            })
            .collect()
    }

    /// Plays the ldm: LQHKEYCONF for a prepared operation.
    pub(crate) fn prepared(&mut self, ldm: BlockRef, tc_op: u32, ldm_op: u32) {
        self.deliver(
            ldm,
            LqhKeyConf {
                tc_op,
                ldm_op,
                data: None,
                released: false,
            },
        );
    }

    /// Plays the ldm: LQHKEYREF for an operation.
    pub(crate) fn refused_by_ldm(&mut self, ldm: BlockRef, tc_op: u32, error: ErrorCode) {
        self.deliver(ldm, LqhKeyRef { tc_op, error });
    }

    pub(crate) fn transaction_state(
        &self,
        transaction_id: TransactionId,
    ) -> Option<TransactionState> {
        self.tc
            .records
            .find(transaction_id)
            .map(|index| self.tc.records.transactions[index as usize].state)
    }

    /// Every record is back in its pool and nothing is queued.
    pub(crate) fn assert_quiet(&self) {
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
        assert_eq!(self.tc.waiting_for_gci_tail, NIL, "commits still held");
        assert_eq!(
            self.tc.transactions_in_commit_phase(),
            0,
            "commit phases still counted"
        );
        assert_eq!(
            self.tc.durability.pending_flush, None,
            "a GCP_FLUSH_REQ unanswered"
        );
        assert_eq!(self.tc.gci_waits_held(), 0, "GCI waits still held");
    }
}

// ---------------------------------------------------------------------------
// Golden traces
// ---------------------------------------------------------------------------

#[test]
pub(crate) fn golden_trace_of_start_and_a_committed_two_operation_write_batch() {
    let mut b = Bench::unstarted(config());
    for &phase in signal::phases::PHASES {
        b.deliver(MEMBERSHIP, StartPhaseReq { phase });
        let conf = line(TC, MEMBERSHIP, StartPhaseConf { phase });
        // The first phase also arms the periodic timeout scan.
        let expected = if phase == signal::phases::INITIALISE {
            vec![rearm(), conf]
        } else {
            vec![conf]
        };
        assert_eq!(b.trace(), expected, "phase {phase}");
    }
    b.deliver(DIH, GcpCommit { gci: G1 });
    assert_eq!(b.trace(), vec![line(TC, DIH, GcpCommitConf { gci: G1 })]);
    let (table, map) = (b.table.clone(), b.map.clone());
    b.deliver(DICT, TcAddTabReq { table, map });
    assert_eq!(
        b.trace(),
        vec![line(TC, DICT, AddTabConf { table_id: TABLE_ID })]
    );

    // Two keys on different ldms, so the trace shows the routing too.
    let (k1, k2) = (
        1,
        (2..100)
            .find(|&k| b.ldm_of(k) != b.ldm_of(1))
            .expect("both ldms used"),
    );
    let (ldm1, ldm2) = (b.ldm_of(k1), b.ldm_of(k2));
    let t = txn(API, 1);
    let request = b.insert(t, 11, START, k1);
    b.deliver(API, request);
    assert_eq!(b.trace(), vec![b.insert_line(0, t, k1)]);
    let request = b.insert(t, 12, COMMIT, k2);
    b.deliver(API, request);
    assert_eq!(b.trace(), vec![b.insert_line(1, t, k2)]);

    b.prepared(ldm1, 0, 40);
    assert!(
        b.trace().is_empty(),
        "the batch waits for its second operation"
    );
    b.prepared(ldm2, 1, 41);
    assert_eq!(
        b.trace(),
        vec![
            line(
                TC,
                ldm1,
                CommitReq {
                    ldm_op: 40,
                    tc_op: 0,
                    transaction_id: t,
                    gci: G1
                }
            ),
            line(
                TC,
                ldm2,
                CommitReq {
                    ldm_op: 41,
                    tc_op: 1,
                    transaction_id: t,
                    gci: G1
                }
            ),
        ]
    );
    b.deliver(ldm1, CommitConf { tc_op: 0 });
    assert!(
        b.trace().is_empty(),
        "the client hears once every operation committed"
    );
    b.deliver(ldm2, CommitConf { tc_op: 1 });
    assert_eq!(
        b.trace(),
        vec![
            commit_conf_line(t, 2, G1),
            line(
                TC,
                ldm1,
                CompleteReq {
                    ldm_op: 40,
                    tc_op: 0,
                    transaction_id: t
                }
            ),
            line(
                TC,
                ldm2,
                CompleteReq {
                    ldm_op: 41,
                    tc_op: 1,
                    transaction_id: t
                }
            ),
        ]
    );
    b.deliver(ldm1, CompleteConf { tc_op: 0 });
    assert_eq!(
        b.tc.transactions_in_use(),
        1,
        "released only after the last COMPLETECONF"
    );
    b.deliver(ldm2, CompleteConf { tc_op: 1 });
    assert!(b.trace().is_empty());
    b.assert_quiet();
    let counters = b.tc.counters();
    assert_eq!(
        (counters.commits, counters.aborts, counters.operations),
        (1, 0, 2)
    );
}

#[test]
pub(crate) fn committed_reads_with_commit_answer_data_before_the_conf_and_send_no_commit() {
    let mut b = Bench::started(config());
    let t = txn(API, 1);
    let request = b.read(t, 1, START, 5);
    let expected = b.lqh_line(0, b.read(t, 1, 0, 5));
    b.deliver(API, request);
    let request = b.read(t, 2, COMMIT, 6);
    let expected2 = b.lqh_line(1, b.read(t, 2, 0, 6));
    b.deliver(API, request);
    assert_eq!(b.trace(), vec![expected, expected2]);

    let row = |k: i32| b.section(&[(0, Some(&k.to_le_bytes())), (V, None)]);
    let (data5, data6) = (row(5), row(6));
    let (ldm5, ldm6) = (b.ldm_of(5), b.ldm_of(6));
    let expected_data5 = line(
        TC,
        API,
        TransIdAi {
            transaction_id: t,
            client_op: 1,
            data: row(5),
        },
    );
    let expected_conf = commit_conf_with_row_line(
        t,
        2,
        Gci(0),
        ReadRow {
            client_op: 2,
            data: row(6),
        },
    );
    b.deliver(
        ldm5,
        LqhKeyConf {
            tc_op: 0,
            ldm_op: 7,
            data: Some(data5),
            released: true,
        },
    );
    assert_eq!(b.trace(), vec![expected_data5]);
    b.deliver(
        ldm6,
        LqhKeyConf {
            tc_op: 1,
            ldm_op: 8,
            data: Some(data6),
            released: true,
        },
    );
    assert_eq!(
        b.trace(),
        vec![expected_conf],
        "nothing was written: no COMMIT, no COMPLETE, GCI 0; the last \
         read's row rides in the TCKEYCONF"
    );
    b.assert_quiet();
}

/// Delivers GCP_PREPARE for `gci` and checks the tc's answer: commit
/// decisions are held from now until GCP_COMMIT.
pub(crate) fn gcp_prepare(b: &mut Bench, gci: Gci) {
    b.deliver(DIH, GcpPrepare { new_gci: gci });
    assert_eq!(
        b.trace(),
        vec![line(TC, DIH, GcpPrepareConf { new_gci: gci })]
    );
}

/// A single committed read whose commit decision waits for GCP_COMMIT
/// keeps its row until the TCKEYCONF that carries it.
#[test]
pub(crate) fn a_held_single_read_keeps_its_row_for_the_conf() {
    let mut b = Bench::started(config());
    gcp_prepare(&mut b, G2);
    let t = txn(API, 1);
    let request = b.read(t, 1, START | COMMIT, 5);
    let expected = b.lqh_line(0, b.read(t, 1, 0, 5));
    b.deliver(API, request);
    assert_eq!(b.trace(), vec![expected]);
    let row = |k: i32| b.section(&[(0, Some(&k.to_le_bytes())), (V, None)]);
    let data = row(5);
    let conf = commit_conf_with_row_line(
        t,
        1,
        Gci(0),
        ReadRow {
            client_op: 1,
            data: row(5),
        },
    );
    let ldm = b.ldm_of(5);
    b.deliver(
        ldm,
        LqhKeyConf {
            tc_op: 0,
            ldm_op: 7,
            data: Some(data),
            released: true,
        },
    );
    assert!(b.trace().is_empty(), "held until GCP_COMMIT");
    b.deliver(DIH, GcpCommit { gci: G2 });
    let trace = b.trace();
    assert!(trace.contains(&conf), "{trace:?}");
    b.assert_quiet();
}

#[test]
pub(crate) fn commit_decisions_are_held_between_gcp_prepare_and_gcp_commit() {
    let mut b = Bench::started(config());
    gcp_prepare(&mut b, G2);
    let t = txn(API, 1);
    let request = b.insert(t, 1, START | COMMIT, 9);
    b.deliver(API, request);
    let [(ldm, tc_op)] = b.take_lqh_key_reqs()[..] else {
        panic!("one LQHKEYREQ")
    };
    b.prepared(ldm, tc_op, 3);
    assert!(
        b.trace().is_empty(),
        "no COMMIT between GCP_PREPARE and GCP_COMMIT"
    );
    assert_eq!(
        b.transaction_state(t),
        Some(TransactionState::WaitingForGci)
    );
    // A scan meanwhile changes nothing (a held commit is not idle).
    b.ctx.now_ms = INACTIVE_MS * 2;
    b.deliver(TC, scan());
    assert_eq!(b.trace(), vec![rearm()]);

    b.deliver(DIH, GcpCommit { gci: G2 });
    assert_eq!(
        b.trace(),
        vec![
            line(TC, DIH, GcpCommitConf { gci: G2 }),
            line(
                TC,
                ldm,
                CommitReq {
                    ldm_op: 3,
                    tc_op,
                    transaction_id: t,
                    gci: G2
                }
            ),
        ]
    );
    b.deliver(ldm, CommitConf { tc_op });
    assert_eq!(
        b.trace(),
        vec![
            commit_conf_line(t, 1, G2),
            line(
                TC,
                ldm,
                CompleteReq {
                    ldm_op: 3,
                    tc_op,
                    transaction_id: t
                }
            ),
        ]
    );
    b.deliver(ldm, CompleteConf { tc_op });
    b.assert_quiet();
}

#[test]
pub(crate) fn commits_before_the_first_gcp_commit_wait_for_it_in_arrival_order() {
    let mut b = Bench::unstarted(config());
    for &phase in signal::phases::PHASES {
        b.deliver(MEMBERSHIP, StartPhaseReq { phase });
    }
    let (table, map) = (b.table.clone(), b.map.clone());
    b.deliver(DICT, TcAddTabReq { table, map });
    b.ctx.sent.clear();
    let (t1, t2) = (txn(API, 1), txn(API, 2));
    let mut prepared = Vec::new();
    for (t, k) in [(t1, 1), (t2, 2)] {
        let request = b.insert(t, 1, START | COMMIT, k);
        b.deliver(API, request);
        let [(ldm, tc_op)] = b.take_lqh_key_reqs()[..] else {
            panic!("one LQHKEYREQ")
        };
        b.prepared(ldm, tc_op, tc_op + 100);
        prepared.push((t, ldm, tc_op));
    }
    assert!(b.trace().is_empty(), "no GCI yet: commits wait");
    b.deliver(DIH, GcpCommit { gci: G1 });
    let mut expected = vec![line(TC, DIH, GcpCommitConf { gci: G1 })];
    for &(t, ldm, tc_op) in &prepared {
        expected.push(line(
            TC,
            ldm,
            CommitReq {
                ldm_op: tc_op + 100,
                tc_op,
                transaction_id: t,
                gci: G1,
            },
        ));
    }
    assert_eq!(b.trace(), expected);
    for &(_, ldm, tc_op) in &prepared {
        b.deliver(ldm, CommitConf { tc_op });
        b.deliver(ldm, CompleteConf { tc_op });
    }
    b.assert_quiet();
}

#[test]
pub(crate) fn two_batches_then_tc_commit_req() {
    let mut b = Bench::started(config());
    let t = txn(API, 1);
    let request = b.insert(t, 1, START | EXECUTE, 1);
    b.deliver(API, request);
    let [(ldm1, op1)] = b.take_lqh_key_reqs()[..] else {
        panic!("one LQHKEYREQ")
    };
    b.prepared(ldm1, op1, 1);
    assert_eq!(b.trace(), vec![batch_conf_line(t, 1)]);
    let request = b.insert(t, 2, EXECUTE, 2);
    b.deliver(API, request);
    let [(ldm2, op2)] = b.take_lqh_key_reqs()[..] else {
        panic!("one LQHKEYREQ")
    };
    b.prepared(ldm2, op2, 2);
    assert_eq!(b.trace(), vec![batch_conf_line(t, 1)]);
    b.deliver(API, TcCommitReq { transaction_id: t });
    assert_eq!(
        b.trace(),
        vec![
            line(
                TC,
                ldm1,
                CommitReq {
                    ldm_op: 1,
                    tc_op: op1,
                    transaction_id: t,
                    gci: G1
                }
            ),
            line(
                TC,
                ldm2,
                CommitReq {
                    ldm_op: 2,
                    tc_op: op2,
                    transaction_id: t,
                    gci: G1
                }
            ),
        ]
    );
    b.deliver(ldm1, CommitConf { tc_op: op1 });
    b.deliver(ldm2, CommitConf { tc_op: op2 });
    assert_eq!(
        b.trace(),
        vec![
            commit_conf_line(t, 0, G1),
            line(
                TC,
                ldm1,
                CompleteReq {
                    ldm_op: 1,
                    tc_op: op1,
                    transaction_id: t
                }
            ),
            line(
                TC,
                ldm2,
                CompleteReq {
                    ldm_op: 2,
                    tc_op: op2,
                    transaction_id: t
                }
            ),
        ]
    );
    b.deliver(ldm1, CompleteConf { tc_op: op1 });
    b.deliver(ldm2, CompleteConf { tc_op: op2 });
    b.assert_quiet();
}

#[test]
pub(crate) fn locking_reads_are_committed_to_release_their_locks() {
    let mut b = Bench::started(config());
    let t = txn(API, 1);
    let request = b.key_req(
        t,
        1,
        START | COMMIT,
        OperationKind::Read,
        LockMode::Shared,
        4,
        None,
    );
    b.deliver(API, request);
    let [(ldm, tc_op)] = b.take_lqh_key_reqs()[..] else {
        panic!("one LQHKEYREQ")
    };
    let data = b.section(&[(V, None)]);
    let expected_conf = commit_conf_with_row_line(
        t,
        1,
        G1,
        ReadRow {
            client_op: 1,
            data: b.section(&[(V, None)]),
        },
    );
    b.deliver(
        ldm,
        LqhKeyConf {
            tc_op,
            ldm_op: 6,
            data: Some(data),
            released: false,
        },
    );
    assert_eq!(
        b.trace(),
        vec![line(
            TC,
            ldm,
            CommitReq {
                ldm_op: 6,
                tc_op,
                transaction_id: t,
                gci: G1
            }
        )],
        "the row waits for the commit's TCKEYCONF"
    );
    b.deliver(ldm, CommitConf { tc_op });
    let trace = b.trace();
    assert!(trace.contains(&expected_conf), "{trace:?}");
    b.deliver(ldm, CompleteConf { tc_op });
    b.assert_quiet();
}
