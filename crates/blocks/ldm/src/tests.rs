//! ldm block tests (docs/design/testing.md §2): one ldm alone, fed the
//! signals dict and the tc would send; the test plays both. Golden traces
//! check the exact answers, in order; behaviour tests check row values
//! (decoded with `AttrIter`), lock queues, aborts, DataMemory exhaustion,
//! var-size columns and the row header's GCI. After every scenario the ldm
//! must hold no operation record, no lock, no reserved slot and no stray
//! index entry.
//!
//! Partition maps are built as dih builds them for one node (node 2) with a
//! single ldm thread, so this ldm owns every partition; one test uses two
//! ldm threads to check that an ldm refuses partitions it does not own.

use crate::operation::NIL;
use crate::{Ldm, LdmConfig};
use kernel::testing::{deliver, line, RecordingContext};
use kernel::Context;
use rowstore::RowState;
use signal::attr::{key_hash, AttrIter, AttrWriter, KeyHash};
use signal::partition::{bucket, default_partition_of_bucket, BUCKETS};
use signal::schema::{ColumnDef, ColumnType, TableDef};
use signal::section::CLASS_SIZES;
use signal::signals::*;
use signal::{BlockKind, BlockRef, ErrorCode, Gci, NodeId, Section, Signal, TransactionId};
use std::sync::Arc;

const NODE: NodeId = NodeId(2);
const LDM: BlockRef = BlockRef::new(NODE, BlockKind::Ldm, 0);
const TC: BlockRef = BlockRef::new(NODE, BlockKind::Tc, 0);
const DICT: BlockRef = BlockRef::new(NODE, BlockKind::Dict, 0);

const TABLE_ID: u32 = 3;
/// Columns: k INT key, v BIGINT NOT NULL, s VARCHAR(40), b VARBINARY(600).
const K: u16 = 0;
const V: u16 = 1;
const S: u16 = 2;
const B: u16 = 3;
const S_MAX: usize = 40;
const B_MAX: usize = 600;

/// Section pool of `RecordingContext::new()`, per class.
const POOL_COUNTS: [usize; 6] = [64, 16, 8, 4, 2, 2];

const MIB: u64 = 1 << 20;

fn gci(n: u32) -> Gci {
    Gci::from_parts(7, n)
}

fn table() -> TableDef {
    let column = |name: &str, column_type, nullable| ColumnDef {
        name: name.into(),
        column_type,
        nullable,
    };
    let table = TableDef {
        id: TABLE_ID,
        version: 1,
        name: "rows".into(),
        columns: vec![
            column("k", ColumnType::Int { unsigned: false }, false),
            column("v", ColumnType::BigInt { unsigned: false }, false),
            column("s", ColumnType::VarChar(S_MAX as u16), true),
            column("b", ColumnType::VarBinary(B_MAX as u16), true),
        ],
        primary_key: vec![K],
        partitions: 2,
    };
    table.validate().expect("test table is valid");
    table
}

/// The map dih makes for one node group of one node with `ldm_instances`
/// ldm threads.
fn partition_map(table: &TableDef, ldm_instances: u16) -> PartitionMap {
    PartitionMap {
        table_id: table.id,
        version: 1,
        bucket_partitions: (0..BUCKETS)
            .map(|b| default_partition_of_bucket(b, table.partitions))
            .collect(),
        partitions: (0..table.partitions)
            .map(|p| PartitionPlacement {
                node_group: 0,
                replicas: vec![NODE],
                ldm_instance: (p % u32::from(ldm_instances)) as u16,
                redo_part: p,
            })
            .collect(),
    }
}

fn txn(n: u64) -> TransactionId {
    TransactionId(10 << 48 | n)
}

/// Attribute entries to encode: (column, value or NULL).
type Entries<'a> = &'a [(u16, Option<&'a [u8]>)];

/// A decoded row or read result: (column, value) in order.
type Row = Vec<(u16, Option<Vec<u8>>)>;

fn decode(data: &Section) -> Row {
    AttrIter::new(data.as_slice())
        .map(|entry| {
            let entry = entry.expect("the ldm encodes valid entries");
            (entry.column, entry.value.map(<[u8]>::to_vec))
        })
        .collect()
}

/// The full row the ldm must return for these values.
fn row(k: i32, v: i64, s: Option<&[u8]>, b: Option<&[u8]>) -> Row {
    vec![
        (K, Some(k.to_le_bytes().to_vec())),
        (V, Some(v.to_le_bytes().to_vec())),
        (S, s.map(<[u8]>::to_vec)),
        (B, b.map(<[u8]>::to_vec)),
    ]
}

/// What one LQHKEYREQ got back.
#[derive(Debug)]
enum Answer {
    Conf {
        ldm_op: u32,
        data: Option<Row>,
        released: bool,
    },
    Ref(ErrorCode),
}

/// A prepared operation as the tc remembers it.
#[derive(Clone, Copy, Debug)]
struct Op {
    transaction_id: TransactionId,
    tc_op: u32,
    ldm_op: u32,
}

struct Bench {
    ldm: Ldm,
    ctx: RecordingContext,
    table: Arc<TableDef>,
    map: Arc<PartitionMap>,
    next_tc_op: u32,
}

impl Bench {
    fn new() -> Bench {
        Bench::with_memory(8 * MIB)
    }

    fn with_memory(data_memory_bytes: u64) -> Bench {
        Bench::build(data_memory_bytes, 1, LDM)
    }

    fn build(data_memory_bytes: u64, ldm_instances: u16, address: BlockRef) -> Bench {
        let table = Arc::new(table());
        let map = Arc::new(partition_map(&table, ldm_instances));
        let mut bench = Bench {
            ldm: Ldm::new(LdmConfig {
                address,
                data_memory_bytes,
                max_operations: 32,
                redo: None,
            }),
            ctx: RecordingContext::new(),
            table,
            map,
            next_tc_op: 0,
        };
        let (table, map) = (bench.table.clone(), bench.map.clone());
        bench.deliver(DICT, LqhAddTabReq { table, map });
        assert_eq!(
            bench.trace(),
            vec![line(address, DICT, AddTabConf { table_id: TABLE_ID })]
        );
        bench
    }

    fn deliver(&mut self, from: BlockRef, signal: impl Into<Signal>) {
        deliver(&mut self.ldm, &mut self.ctx, from, signal);
    }

    fn trace(&mut self) -> Vec<String> {
        self.ctx.take_trace()
    }

    fn section(&self, entries: Entries<'_>) -> Section {
        let bytes: usize = entries
            .iter()
            .map(|(_, value)| 4 + value.map_or(0, <[u8]>::len))
            .sum();
        let mut section = self.ctx.pool().alloc(bytes).expect("pool has room");
        let mut writer = AttrWriter::new(section.as_mut_slice());
        for &(column, value) in entries {
            writer.push(column, value).expect("fits");
        }
        assert_eq!(writer.len(), bytes);
        section
    }

    fn key(&self, k: i32) -> Section {
        self.section(&[(K, Some(&k.to_le_bytes()))])
    }

    /// The partition and hash the tc computes for key k.
    fn route(&self, k: i32) -> (u32, KeyHash) {
        let hash = key_hash(&self.table, self.key(k).as_slice()).expect("valid key");
        (self.map.bucket_partitions[bucket(hash) as usize], hash)
    }

    /// The LQHKEYREQ a tc sends; takes the next tc operation number.
    fn request(
        &mut self,
        transaction_id: TransactionId,
        kind: OperationKind,
        lock: LockMode,
        k: i32,
        attr: Option<Entries<'_>>,
    ) -> LqhKeyReq {
        let (partition, hash) = self.route(k);
        let tc_op = self.next_tc_op;
        self.next_tc_op += 1;
        LqhKeyReq {
            tc: TC,
            tc_op,
            chain: ReplicaChain::new(&[NODE]),
            position: 0,
            row_id: u32::MAX,
            previous_op: u32::MAX,
            transaction_id,
            kind,
            lock,
            table_id: TABLE_ID,
            partition,
            hash,
            key: self.key(k),
            attr: attr.map(|entries| self.section(entries)),
        }
    }

    /// Delivers `request`; returns every answer sent, by tc operation.
    fn send(&mut self, request: LqhKeyReq) -> Vec<(u32, Answer)> {
        self.deliver(TC, request);
        self.answers()
    }

    /// Drains the sent signals, which must all be LQHKEYCONF/REF to the tc.
    fn answers(&mut self) -> Vec<(u32, Answer)> {
        self.ctx
            .sent
            .drain(..)
            .map(|sent| {
                assert_eq!(sent.envelope.to, TC);
                assert_eq!(sent.delay_ms, None);
                match sent.envelope.signal {
                    Signal::LqhKeyConf(conf) => (
                        conf.tc_op,
                        Answer::Conf {
                            ldm_op: conf.ldm_op,
                            data: conf.data.as_ref().map(decode),
                            released: conf.released,
                        },
                    ),
                    Signal::LqhKeyRef(refusal) => (refusal.tc_op, Answer::Ref(refusal.error)),
                    other => panic!("expected LqhKeyConf or LqhKeyRef, got {other:?}"),
                }
            })
            .collect()
    }

    /// Prepares an operation that must be granted at once.
    fn prepare(
        &mut self,
        transaction_id: TransactionId,
        kind: OperationKind,
        lock: LockMode,
        k: i32,
        attr: Option<Entries<'_>>,
    ) -> (Op, Option<Row>) {
        let request = self.request(transaction_id, kind, lock, k, attr);
        let tc_op = request.tc_op;
        let answers = self.send(request);
        match &answers[..] {
            [(
                answered,
                Answer::Conf {
                    ldm_op,
                    data,
                    released: false,
                },
            )] if *answered == tc_op => (
                Op {
                    transaction_id,
                    tc_op,
                    ldm_op: *ldm_op,
                },
                data.clone(),
            ),
            other => panic!("expected a prepared LqhKeyConf for {kind:?} of {k}, got {other:?}"),
        }
    }

    /// Sends an operation that must queue on a lock (no answer).
    fn prepare_waits(
        &mut self,
        transaction_id: TransactionId,
        kind: OperationKind,
        lock: LockMode,
        k: i32,
        attr: Option<Entries<'_>>,
    ) -> u32 {
        let request = self.request(transaction_id, kind, lock, k, attr);
        let tc_op = request.tc_op;
        let answers = self.send(request);
        assert!(
            answers.is_empty(),
            "{kind:?} of {k} should wait, got {answers:?}"
        );
        tc_op
    }

    /// Sends an operation that must be refused.
    fn refused(
        &mut self,
        transaction_id: TransactionId,
        kind: OperationKind,
        lock: LockMode,
        k: i32,
        attr: Option<Entries<'_>>,
    ) -> ErrorCode {
        let request = self.request(transaction_id, kind, lock, k, attr);
        let tc_op = request.tc_op;
        match &self.send(request)[..] {
            [(answered, Answer::Ref(error))] if *answered == tc_op => *error,
            other => panic!("expected LqhKeyRef for {kind:?} of {k}, got {other:?}"),
        }
    }

    /// COMMIT; returns what else the ldm sent after the COMMITCONF
    /// (answers to operations that waited for the lock).
    fn commit(&mut self, op: Op, gci: Gci) -> Vec<(u32, Answer)> {
        self.deliver(
            TC,
            CommitReq {
                ldm_op: op.ldm_op,
                tc_op: op.tc_op,
                transaction_id: op.transaction_id,
                gci,
            },
        );
        let first = self.ctx.sent.remove(0);
        assert_eq!(
            format!("{:?}", first.envelope.signal),
            format!("{:?}", Signal::from(CommitConf { tc_op: op.tc_op }))
        );
        self.answers()
    }

    fn complete(&mut self, op: Op) {
        self.deliver(
            TC,
            CompleteReq {
                ldm_op: op.ldm_op,
                tc_op: op.tc_op,
                transaction_id: op.transaction_id,
            },
        );
        assert_eq!(
            self.trace(),
            vec![line(LDM, TC, CompleteConf { tc_op: op.tc_op })]
        );
    }

    /// Commits then completes every operation of a transaction, as the tc
    /// does; nothing else may be answered.
    fn commit_all(&mut self, ops: &[Op], gci: Gci) {
        for &op in ops {
            let others = self.commit(op, gci);
            assert!(others.is_empty(), "unexpected answers {others:?}");
        }
        for &op in ops {
            self.complete(op);
        }
    }

    fn abort(&mut self, transaction_id: TransactionId, tc_op: u32) -> Vec<(u32, Answer)> {
        self.deliver(
            TC,
            AbortReq {
                tc: TC,
                tc_op,
                transaction_id,
            },
        );
        let first = self.ctx.sent.remove(0);
        assert_eq!(
            format!("{:?}", first.envelope.signal),
            format!("{:?}", Signal::from(AbortConf { tc_op }))
        );
        self.answers()
    }

    /// A committed read: `Some(row)` or `None` for NoSuchRow.
    fn read(&mut self, k: i32) -> Option<Row> {
        let request = self.request(
            txn(999),
            OperationKind::Read,
            LockMode::CommittedRead,
            k,
            None,
        );
        let tc_op = request.tc_op;
        match self.send(request).pop() {
            Some((
                answered,
                Answer::Conf {
                    data: Some(data),
                    released: true,
                    ..
                },
            )) if answered == tc_op => Some(data),
            Some((answered, Answer::Ref(ErrorCode::NoSuchRow))) if answered == tc_op => None,
            other => panic!("unexpected answer to a committed read of {k}: {other:?}"),
        }
    }

    /// A one-operation transaction, committed at `gci`.
    fn write(&mut self, t: u64, kind: OperationKind, k: i32, attr: Option<Entries<'_>>, gci: Gci) {
        let (op, _) = self.prepare(txn(t), kind, LockMode::Exclusive, k, attr);
        self.commit_all(&[op], gci);
    }

    fn insert(&mut self, t: u64, k: i32, v: i64, s: Option<&[u8]>, b: Option<&[u8]>) {
        self.write(
            t,
            OperationKind::Insert,
            k,
            Some(&[(V, Some(&v.to_le_bytes())), (S, s), (B, b)]),
            gci(1),
        );
    }

    /// The row id key k has in its partition (via the hash index).
    fn row_id(&self, k: i32) -> Option<u32> {
        let (partition_id, hash) = self.route(k);
        let key = self.key(k);
        let table = self.ldm.tables[TABLE_ID as usize].as_ref().expect("table");
        let partition = &table.partitions[partition_id as usize]
            .as_ref()
            .expect("owned partition")
            .store;
        let memory = &self.ldm.memory;
        partition.index.lookup(memory, hash.index_hash(), |row| {
            partition.state(memory, row) != RowState::Free
                && table
                    .layout
                    .key_matches(partition.view(memory, &table.layout, row), key.as_slice())
        })
    }

    /// Nothing is held: no operation record, no queued restart, no lock on
    /// any row, no reserved slot, every indexed row live and every live row
    /// indexed, and every section back in the pool.
    fn assert_quiet(&mut self) {
        assert!(self.ctx.sent.is_empty(), "unanswered: {:?}", self.trace());
        assert_eq!(self.ldm.operations_in_use(), 0, "operation records leaked");
        assert!(self.ldm.restart.is_empty(), "restart queue not empty");
        let memory = &self.ldm.memory;
        for table in self.ldm.tables.iter().flatten() {
            assert_eq!(table.active_operations, 0, "table operation count leaked");
            for partition in table.partitions.iter().flatten() {
                let partition = &partition.store;
                let mut live = 0;
                partition
                    .fixed
                    .for_each_slot(|row| match partition.state(memory, row) {
                        RowState::Free => {}
                        RowState::Reserved => panic!("row {row} left reserved"),
                        RowState::Live => {
                            live += 1;
                            assert_eq!(
                                partition.op_link(memory, row),
                                NIL,
                                "lock leaked on row {row}"
                            );
                            partition.verify_checksum(memory, &table.layout, row);
                        }
                    });
                assert_eq!(
                    partition.rows(),
                    live,
                    "slots in use that are not live rows"
                );
                assert_eq!(
                    partition.index.len(),
                    live,
                    "index entries without live rows"
                );
                partition.index.for_each(memory, |_, row| {
                    assert_eq!(
                        partition.state(memory, row),
                        RowState::Live,
                        "index names row {row}"
                    );
                });
            }
        }
        for (class, &count) in POOL_COUNTS.iter().enumerate() {
            assert_eq!(
                self.ctx.pool().free_in_class(class),
                count,
                "sections of {} bytes leaked",
                CLASS_SIZES[class]
            );
        }
    }
}

fn int(v: i64) -> [u8; 8] {
    v.to_le_bytes()
}

// ---------------------------------------------------------------------------
// Golden traces
// ---------------------------------------------------------------------------

#[test]
fn golden_trace_of_insert_commit_complete_read_update_delete() {
    let mut b = Bench::new();
    let t1 = txn(1);
    let request = b.request(
        t1,
        OperationKind::Insert,
        LockMode::Exclusive,
        42,
        Some(&[(V, Some(&int(7))), (S, Some(b"hello"))]),
    );
    b.deliver(TC, request);
    assert_eq!(
        b.trace(),
        vec![line(
            LDM,
            TC,
            LqhKeyConf {
                tc_op: 0,
                ldm_op: 0,
                data: None,
                released: false
            }
        )]
    );
    assert_eq!(b.read(42), None, "a prepared insert is invisible");
    b.deliver(
        TC,
        CommitReq {
            ldm_op: 0,
            tc_op: 0,
            transaction_id: t1,
            gci: gci(1),
        },
    );
    assert_eq!(b.trace(), vec![line(LDM, TC, CommitConf { tc_op: 0 })]);
    b.deliver(
        TC,
        CompleteReq {
            ldm_op: 0,
            tc_op: 0,
            transaction_id: t1,
        },
    );
    assert_eq!(b.trace(), vec![line(LDM, TC, CompleteConf { tc_op: 0 })]);
    assert_eq!(b.ldm.operations_in_use(), 0);
    assert_eq!(b.ldm.rows(TABLE_ID), 1);

    // A committed read answers at once and keeps no record.
    let request = b.request(
        txn(2),
        OperationKind::Read,
        LockMode::CommittedRead,
        42,
        None,
    );
    b.deliver(TC, request);
    let expected = row(42, 7, Some(b"hello"), None);
    match &b.ctx.sent[..] {
        [sent] => match &sent.envelope.signal {
            Signal::LqhKeyConf(conf) => {
                assert_eq!(decode(conf.data.as_ref().expect("row data")), expected);
            }
            other => panic!("expected LqhKeyConf, got {other:?}"),
        },
        other => panic!("expected one answer, got {other:?}"),
    }
    let encoded = b.section(&[
        (K, Some(&42i32.to_le_bytes())),
        (V, Some(&int(7))),
        (S, Some(b"hello")),
        (B, None),
    ]);
    assert_eq!(
        b.trace(),
        vec![line(
            LDM,
            TC,
            LqhKeyConf {
                tc_op: 2,
                ldm_op: 0,
                data: Some(encoded),
                released: true
            }
        )]
    );
    assert_eq!(b.ldm.operations_in_use(), 0);

    // Update.
    let t3 = txn(3);
    let request = b.request(
        t3,
        OperationKind::Update,
        LockMode::Exclusive,
        42,
        Some(&[(V, Some(&int(8))), (B, Some(&[1, 2, 3]))]),
    );
    b.deliver(TC, request);
    assert_eq!(
        b.trace(),
        vec![line(
            LDM,
            TC,
            LqhKeyConf {
                tc_op: 3,
                ldm_op: 0,
                data: None,
                released: false
            }
        )]
    );
    assert_eq!(
        b.read(42),
        Some(expected),
        "a prepared update leaves the row as it was"
    );
    b.deliver(
        TC,
        CommitReq {
            ldm_op: 0,
            tc_op: 3,
            transaction_id: t3,
            gci: gci(2),
        },
    );
    assert_eq!(b.trace(), vec![line(LDM, TC, CommitConf { tc_op: 3 })]);
    assert_eq!(
        b.read(42),
        Some(row(42, 8, Some(b"hello"), Some(&[1, 2, 3])))
    );
    b.deliver(
        TC,
        CompleteReq {
            ldm_op: 0,
            tc_op: 3,
            transaction_id: t3,
        },
    );
    assert_eq!(b.trace(), vec![line(LDM, TC, CompleteConf { tc_op: 3 })]);

    // Delete.
    let t5 = txn(5);
    let request = b.request(t5, OperationKind::Delete, LockMode::Exclusive, 42, None);
    b.deliver(TC, request);
    assert_eq!(
        b.trace(),
        vec![line(
            LDM,
            TC,
            LqhKeyConf {
                tc_op: 6,
                ldm_op: 0,
                data: None,
                released: false
            }
        )]
    );
    assert!(
        b.read(42).is_some(),
        "a prepared delete leaves the row visible"
    );
    b.deliver(
        TC,
        CommitReq {
            ldm_op: 0,
            tc_op: 6,
            transaction_id: t5,
            gci: gci(3),
        },
    );
    assert_eq!(b.trace(), vec![line(LDM, TC, CommitConf { tc_op: 6 })]);
    b.deliver(
        TC,
        CompleteReq {
            ldm_op: 0,
            tc_op: 6,
            transaction_id: t5,
        },
    );
    assert_eq!(b.trace(), vec![line(LDM, TC, CompleteConf { tc_op: 6 })]);
    let request = b.request(
        txn(6),
        OperationKind::Read,
        LockMode::CommittedRead,
        42,
        None,
    );
    b.deliver(TC, request);
    assert_eq!(
        b.trace(),
        vec![line(
            LDM,
            TC,
            LqhKeyRef {
                tc_op: 8,
                error: ErrorCode::NoSuchRow
            }
        )]
    );
    assert_eq!(b.ldm.rows(TABLE_ID), 0);
    b.assert_quiet();
}

#[test]
fn golden_trace_of_a_lock_wait_ending_in_the_holders_commit() {
    let mut b = Bench::new();
    b.insert(1, 5, 50, Some(b"old"), None);
    // A prepares an update of 5 (granted).
    let (a, _) = b.prepare(
        txn(2),
        OperationKind::Update,
        LockMode::Exclusive,
        5,
        Some(&[(V, Some(&int(51))), (S, Some(b"new"))]),
    );
    // B's exclusive read gets no answer: it waits.
    let request = b.request(txn(3), OperationKind::Read, LockMode::Exclusive, 5, None);
    let b_tc_op = request.tc_op;
    b.deliver(TC, request);
    assert!(b.trace().is_empty(), "B waits for A's lock");
    assert_eq!(b.ldm.operations_in_use(), 2);
    // A commits: COMMITCONF first, then B's answer, with A's values.
    b.deliver(
        TC,
        CommitReq {
            ldm_op: a.ldm_op,
            tc_op: a.tc_op,
            transaction_id: a.transaction_id,
            gci: gci(2),
        },
    );
    let data = b.section(&[
        (K, Some(&5i32.to_le_bytes())),
        (V, Some(&int(51))),
        (S, Some(b"new")),
        (B, None),
    ]);
    let b_ldm_op = match &b.ctx.sent[1].envelope.signal {
        Signal::LqhKeyConf(conf) => {
            assert_eq!(
                decode(conf.data.as_ref().expect("row")),
                row(5, 51, Some(b"new"), None)
            );
            conf.ldm_op
        }
        other => panic!("expected B's LqhKeyConf, got {other:?}"),
    };
    assert_eq!(
        b.trace(),
        vec![
            line(LDM, TC, CommitConf { tc_op: a.tc_op }),
            line(
                LDM,
                TC,
                LqhKeyConf {
                    tc_op: b_tc_op,
                    ldm_op: b_ldm_op,
                    data: Some(data),
                    released: false
                }
            ),
        ]
    );
    b.complete(a);
    let op_b = Op {
        transaction_id: txn(3),
        tc_op: b_tc_op,
        ldm_op: b_ldm_op,
    };
    b.commit_all(&[op_b], gci(3));
    assert_eq!(b.read(5), Some(row(5, 51, Some(b"new"), None)));
    b.assert_quiet();
}

// ---------------------------------------------------------------------------
// Locks
// ---------------------------------------------------------------------------

#[test]
fn shared_locks_coexist_and_an_exclusive_lock_waits_for_all_of_them() {
    let mut b = Bench::new();
    b.insert(1, 9, 90, None, None);
    let (r1, d1) = b.prepare(txn(2), OperationKind::Read, LockMode::Shared, 9, None);
    let (r2, d2) = b.prepare(txn(3), OperationKind::Read, LockMode::Shared, 9, None);
    assert_eq!(d1, Some(row(9, 90, None, None)));
    assert_eq!(d2, d1);
    let writer = b.prepare_waits(
        txn(4),
        OperationKind::Update,
        LockMode::Exclusive,
        9,
        Some(&[(V, Some(&int(91)))]),
    );
    // A later shared request queues behind the waiting writer (FIFO).
    let late_reader = b.prepare_waits(txn(5), OperationKind::Read, LockMode::Shared, 9, None);
    // Committed reads ignore locks.
    assert_eq!(b.read(9), Some(row(9, 90, None, None)));

    assert!(
        b.commit(r1, gci(2)).is_empty(),
        "r2 still holds a shared lock"
    );
    b.complete(r1);
    let answers = b.commit(r2, gci(2));
    let [(
        tc_op,
        Answer::Conf {
            ldm_op,
            data: None,
            released: false,
        },
    )] = answers[..]
    else {
        panic!("the writer is granted, the late reader still waits: {answers:?}")
    };
    assert_eq!(tc_op, writer);
    let w = Op {
        transaction_id: txn(4),
        tc_op,
        ldm_op,
    };
    b.complete(r2);
    let answers = b.commit(w, gci(3));
    let [(
        tc_op,
        Answer::Conf {
            ldm_op,
            data: Some(ref data),
            released: false,
        },
    )] = answers[..]
    else {
        panic!("the late reader is granted: {answers:?}")
    };
    assert_eq!(tc_op, late_reader);
    assert_eq!(
        *data,
        row(9, 91, None, None),
        "the reader sees the writer's commit"
    );
    b.complete(w);
    b.commit_all(
        &[Op {
            transaction_id: txn(5),
            tc_op,
            ldm_op,
        }],
        gci(3),
    );
    b.assert_quiet();
}

#[test]
fn abort_of_a_waiting_operation_keeps_the_queue_intact() {
    let mut b = Bench::new();
    b.insert(1, 3, 30, None, None);
    let (holder, _) = b.prepare(
        txn(2),
        OperationKind::Update,
        LockMode::Exclusive,
        3,
        Some(&[(V, Some(&int(31)))]),
    );
    let first = b.prepare_waits(
        txn(3),
        OperationKind::Update,
        LockMode::Exclusive,
        3,
        Some(&[(V, Some(&int(32)))]),
    );
    let second = b.prepare_waits(txn(4), OperationKind::Read, LockMode::Exclusive, 3, None);
    // The first waiter times out at its tc and is aborted.
    assert!(
        b.abort(txn(3), first).is_empty(),
        "nothing else moves: the holder still holds"
    );
    assert_eq!(b.ldm.operations_in_use(), 2);
    // The holder commits; the second waiter is granted with the new value.
    let answers = b.commit(holder, gci(2));
    let [(
        tc_op,
        Answer::Conf {
            ldm_op,
            data: Some(ref data),
            released: false,
        },
    )] = answers[..]
    else {
        panic!("second waiter granted: {answers:?}")
    };
    assert_eq!(tc_op, second);
    assert_eq!(*data, row(3, 31, None, None));
    b.complete(holder);
    b.commit_all(
        &[Op {
            transaction_id: txn(4),
            tc_op,
            ldm_op,
        }],
        gci(2),
    );
    // Aborting something the ldm does not hold is confirmed all the same.
    assert!(b.abort(txn(3), first).is_empty());
    assert!(b.abort(txn(77), 12345).is_empty());
    b.assert_quiet();
}

#[test]
fn abort_of_the_holder_grants_the_waiter_the_unchanged_row() {
    let mut b = Bench::new();
    b.insert(1, 3, 30, Some(b"s"), None);
    let (holder, _) = b.prepare(
        txn(2),
        OperationKind::Update,
        LockMode::Exclusive,
        3,
        Some(&[(S, Some(&[b'x'; S_MAX]))]),
    );
    let waiter = b.prepare_waits(txn(3), OperationKind::Read, LockMode::Shared, 3, None);
    let answers = b.abort(txn(2), holder.tc_op);
    let [(
        tc_op,
        Answer::Conf {
            ldm_op,
            data: Some(ref data),
            released: false,
        },
    )] = answers[..]
    else {
        panic!("waiter granted: {answers:?}")
    };
    assert_eq!(tc_op, waiter);
    assert_eq!(*data, row(3, 30, Some(b"s"), None));
    b.commit_all(
        &[Op {
            transaction_id: txn(3),
            tc_op,
            ldm_op,
        }],
        gci(2),
    );
    b.assert_quiet();
}

#[test]
fn abort_of_a_prepared_insert_frees_its_slot_and_the_key_stays_absent() {
    let mut b = Bench::new();
    let (insert, _) = b.prepare(
        txn(1),
        OperationKind::Insert,
        LockMode::Exclusive,
        8,
        Some(&[(V, Some(&int(1))), (B, Some(&[9; 100]))]),
    );
    assert_eq!(b.ldm.rows(TABLE_ID), 1, "the insert holds a reserved slot");
    let slot = b.row_id(8).expect("indexed while prepared");
    // Another transaction's insert of the same key waits for the first.
    let second = b.prepare_waits(
        txn(2),
        OperationKind::Insert,
        LockMode::Exclusive,
        8,
        Some(&[(V, Some(&int(2)))]),
    );
    let committed_read = b.read(8);
    assert_eq!(committed_read, None, "reserved rows are invisible");
    let answers = b.abort(txn(1), insert.tc_op);
    let [(
        tc_op,
        Answer::Conf {
            ldm_op,
            data: None,
            released: false,
        },
    )] = answers[..]
    else {
        panic!("the second insert proceeds once the first is gone: {answers:?}")
    };
    assert_eq!(tc_op, second);
    assert_eq!(b.row_id(8), Some(slot), "the freed slot is taken again");
    let op = Op {
        transaction_id: txn(2),
        tc_op,
        ldm_op,
    };
    let answers = b.abort(txn(2), op.tc_op);
    assert!(answers.is_empty());
    assert_eq!(b.read(8), None);
    assert_eq!(b.row_id(8), None, "no index entry is left");
    assert_eq!(b.ldm.rows(TABLE_ID), 0);
    b.assert_quiet();
}

#[test]
fn waiters_on_a_row_deleted_by_the_holder_see_no_row() {
    let mut b = Bench::new();
    b.insert(1, 4, 40, None, None);
    let (delete, _) = b.prepare(txn(2), OperationKind::Delete, LockMode::Exclusive, 4, None);
    let update = b.prepare_waits(
        txn(3),
        OperationKind::Update,
        LockMode::Exclusive,
        4,
        Some(&[(V, Some(&int(1)))]),
    );
    let read = b.prepare_waits(txn(4), OperationKind::Read, LockMode::Shared, 4, None);
    let insert = b.prepare_waits(
        txn(5),
        OperationKind::Insert,
        LockMode::Exclusive,
        4,
        Some(&[(V, Some(&int(2)))]),
    );
    let answers = b.commit(delete, gci(2));
    let [(u, Answer::Ref(ErrorCode::NoSuchRow)), (r, Answer::Ref(ErrorCode::NoSuchRow)), (
        i,
        Answer::Conf {
            ldm_op,
            released: false,
            ..
        },
    )] = answers[..]
    else {
        panic!("update and read find no row, insert succeeds: {answers:?}")
    };
    assert_eq!((u, r, i), (update, read, insert));
    b.complete(delete);
    b.commit_all(
        &[Op {
            transaction_id: txn(5),
            tc_op: insert,
            ldm_op,
        }],
        gci(3),
    );
    assert_eq!(b.read(4), Some(row(4, 2, None, None)));
    b.assert_quiet();
}

#[test]
fn lock_upgrade_within_a_transaction_and_a_second_transaction_waiting_behind() {
    let mut b = Bench::new();
    b.insert(1, 6, 60, None, None);
    let (read, _) = b.prepare(txn(2), OperationKind::Read, LockMode::Shared, 6, None);
    let other = b.prepare_waits(
        txn(3),
        OperationKind::Update,
        LockMode::Exclusive,
        6,
        Some(&[(V, Some(&int(62)))]),
    );
    // The holder may upgrade: it already holds the row.
    let (update, _) = b.prepare(
        txn(2),
        OperationKind::Update,
        LockMode::Exclusive,
        6,
        Some(&[(V, Some(&int(61)))]),
    );
    assert!(b.commit(read, gci(2)).is_empty(), "the update still holds");
    let answers = b.commit(update, gci(2));
    let [(tc_op, Answer::Conf { ldm_op, .. })] = answers[..] else {
        panic!("the other transaction is granted: {answers:?}")
    };
    assert_eq!(tc_op, other);
    b.complete(read);
    b.complete(update);
    assert_eq!(b.read(6), Some(row(6, 61, None, None)));
    b.commit_all(
        &[Op {
            transaction_id: txn(3),
            tc_op,
            ldm_op,
        }],
        gci(3),
    );
    assert_eq!(b.read(6), Some(row(6, 62, None, None)));
    b.assert_quiet();
}

// ---------------------------------------------------------------------------
// Row semantics
// ---------------------------------------------------------------------------

#[test]
fn duplicate_key_and_no_such_row() {
    let mut b = Bench::new();
    b.insert(1, 1, 10, None, None);
    let values: &[(u16, Option<&[u8]>)] = &[(V, Some(&int(0)))];
    assert_eq!(
        b.refused(
            txn(2),
            OperationKind::Insert,
            LockMode::Exclusive,
            1,
            Some(values)
        ),
        ErrorCode::DuplicateKey
    );
    assert_eq!(
        b.refused(
            txn(3),
            OperationKind::Update,
            LockMode::Exclusive,
            2,
            Some(values)
        ),
        ErrorCode::NoSuchRow
    );
    assert_eq!(
        b.refused(txn(4), OperationKind::Delete, LockMode::Exclusive, 2, None),
        ErrorCode::NoSuchRow
    );
    assert_eq!(
        b.refused(txn(5), OperationKind::Read, LockMode::Shared, 2, None),
        ErrorCode::NoSuchRow
    );
    assert_eq!(
        b.refused(txn(6), OperationKind::Read, LockMode::Exclusive, 2, None),
        ErrorCode::NoSuchRow
    );
    assert_eq!(b.read(2), None);
    // A refused operation releases the lock it briefly held.
    let (update, _) = b.prepare(
        txn(7),
        OperationKind::Update,
        LockMode::Exclusive,
        1,
        Some(values),
    );
    b.commit_all(&[update], gci(2));
    // Write is an upsert.
    b.write(
        8,
        OperationKind::Write,
        1,
        Some(&[(V, Some(&int(11)))]),
        gci(3),
    );
    b.write(
        9,
        OperationKind::Write,
        2,
        Some(&[(V, Some(&int(20)))]),
        gci(3),
    );
    assert_eq!(b.read(1), Some(row(1, 11, None, None)));
    assert_eq!(b.read(2), Some(row(2, 20, None, None)));
    assert_eq!(b.ldm.rows(TABLE_ID), 2);
    b.assert_quiet();
}

#[test]
fn insert_update_read_in_one_transaction_sees_its_own_writes() {
    let mut b = Bench::new();
    let t = txn(1);
    let (insert, _) = b.prepare(
        t,
        OperationKind::Insert,
        LockMode::Exclusive,
        5,
        Some(&[(V, Some(&int(1))), (S, Some(b"a"))]),
    );
    let (update, _) = b.prepare(
        t,
        OperationKind::Update,
        LockMode::Exclusive,
        5,
        Some(&[(S, Some(&[b'z'; S_MAX])), (B, Some(&[7; 300]))]),
    );
    let (read, data) = b.prepare(t, OperationKind::Read, LockMode::Shared, 5, None);
    let expected = row(5, 1, Some(&[b'z'; S_MAX]), Some(&[7; 300]));
    assert_eq!(
        data,
        Some(expected.clone()),
        "a locked read sees the transaction's writes"
    );
    // A committed read of the same transaction also sees them ...
    let request = b.request(t, OperationKind::Read, LockMode::CommittedRead, 5, None);
    let answers = b.send(request);
    let [(
        _,
        Answer::Conf {
            data: Some(ref data),
            released: true,
            ..
        },
    )] = answers[..]
    else {
        panic!("own committed read: {answers:?}")
    };
    assert_eq!(*data, expected);
    // ... and other transactions do not.
    assert_eq!(b.read(5), None);
    b.commit_all(&[insert, update, read], gci(4));
    assert_eq!(b.read(5), Some(expected));
    b.assert_quiet();
}

#[test]
fn delete_then_insert_of_one_key_in_one_transaction_commits_the_new_row() {
    let mut b = Bench::new();
    b.insert(1, 5, 50, Some(b"old value"), Some(&[1; 10]));
    let t = txn(2);
    let (delete, _) = b.prepare(t, OperationKind::Delete, LockMode::Exclusive, 5, None);
    assert_eq!(
        b.refused(t, OperationKind::Read, LockMode::Shared, 5, None),
        ErrorCode::NoSuchRow
    );
    assert_eq!(
        b.refused(
            t,
            OperationKind::Update,
            LockMode::Exclusive,
            5,
            Some(&[(V, Some(&int(0)))])
        ),
        ErrorCode::NoSuchRow
    );
    let (insert, _) = b.prepare(
        t,
        OperationKind::Insert,
        LockMode::Exclusive,
        5,
        Some(&[(V, Some(&int(51))), (B, Some(&[2; 200]))]),
    );
    assert_eq!(
        b.read(5),
        Some(row(5, 50, Some(b"old value"), Some(&[1; 10])))
    );
    b.commit_all(&[delete, insert], gci(3));
    assert_eq!(
        b.read(5),
        Some(row(5, 51, None, Some(&[2; 200]))),
        "no value of the old row survives"
    );
    assert_eq!(b.ldm.rows(TABLE_ID), 1);
    b.assert_quiet();
}

#[test]
fn insert_then_delete_in_one_transaction_leaves_nothing() {
    let mut b = Bench::new();
    let t = txn(1);
    let (insert, _) = b.prepare(
        t,
        OperationKind::Insert,
        LockMode::Exclusive,
        5,
        Some(&[(V, Some(&int(1)))]),
    );
    let (delete, _) = b.prepare(t, OperationKind::Delete, LockMode::Exclusive, 5, None);
    b.commit_all(&[insert, delete], gci(2));
    assert_eq!(b.read(5), None);
    assert_eq!(b.ldm.rows(TABLE_ID), 0);
    b.assert_quiet();
}

#[test]
fn abort_of_a_transaction_with_several_operations_on_one_row() {
    let mut b = Bench::new();
    b.insert(1, 5, 50, Some(b"keep"), None);
    let t = txn(2);
    let (update, _) = b.prepare(
        t,
        OperationKind::Update,
        LockMode::Exclusive,
        5,
        Some(&[(B, Some(&[3; 500]))]),
    );
    let (delete, _) = b.prepare(t, OperationKind::Delete, LockMode::Exclusive, 5, None);
    let (insert, _) = b.prepare(
        t,
        OperationKind::Insert,
        LockMode::Exclusive,
        5,
        Some(&[(V, Some(&int(9)))]),
    );
    let (fresh, _) = b.prepare(
        t,
        OperationKind::Insert,
        LockMode::Exclusive,
        6,
        Some(&[(V, Some(&int(6))), (S, Some(b"new"))]),
    );
    let (fresh_update, _) = b.prepare(
        t,
        OperationKind::Update,
        LockMode::Exclusive,
        6,
        Some(&[(S, Some(&[b'q'; S_MAX]))]),
    );
    for op in [update, delete, insert, fresh, fresh_update] {
        assert!(b.abort(t, op.tc_op).is_empty());
    }
    assert_eq!(b.read(5), Some(row(5, 50, Some(b"keep"), None)));
    assert_eq!(b.read(6), None);
    assert_eq!(b.ldm.rows(TABLE_ID), 1);
    b.assert_quiet();
}

// ---------------------------------------------------------------------------
// DataMemory
// ---------------------------------------------------------------------------

#[test]
fn a_full_data_memory_refuses_inserts_and_recovers_after_deletes() {
    let mut b = Bench::with_memory(256 * 1024);
    let mut inserted = Vec::new();
    let full_key = loop {
        let k = inserted.len() as i32;
        assert!(k < 100_000, "256 KiB must fill up");
        let request = b.request(
            txn(1),
            OperationKind::Insert,
            LockMode::Exclusive,
            k,
            Some(&[(V, Some(&int(i64::from(k))))]),
        );
        let tc_op = request.tc_op;
        let answers = b.send(request);
        match answers[..] {
            [(
                _,
                Answer::Conf {
                    ldm_op,
                    released: false,
                    ..
                },
            )] => {
                b.commit_all(
                    &[Op {
                        transaction_id: txn(1),
                        tc_op,
                        ldm_op,
                    }],
                    gci(1),
                );
                inserted.push(k);
            }
            [(_, Answer::Ref(ErrorCode::TableFull))] => break k,
            _ => panic!("insert of {k}: {answers:?}"),
        }
    };
    assert!(inserted.len() > 100, "only {} rows fit", inserted.len());
    let (used, pages) = b.ldm.memory_pages();
    assert_eq!(used, pages, "every page is in use");
    assert_eq!(
        b.ldm.rows(TABLE_ID),
        inserted.len() as u64,
        "the refused insert left no slot"
    );
    b.assert_quiet();

    // Still fine: committed reads and locked reads of existing rows.
    for &k in inserted.iter().step_by(97) {
        assert_eq!(b.read(k), Some(row(k, i64::from(k), None, None)));
    }
    let (read, _) = b.prepare(
        txn(2),
        OperationKind::Read,
        LockMode::Exclusive,
        inserted[0],
        None,
    );
    b.commit_all(&[read], gci(2));
    // An update that keeps the var part's size class works ...
    b.write(
        3,
        OperationKind::Update,
        inserted[1],
        Some(&[(V, Some(&int(-1)))]),
        gci(2),
    );
    assert_eq!(b.read(inserted[1]), Some(row(inserted[1], -1, None, None)));
    // ... one that needs a bigger var slot is refused, and the row is intact.
    let big: &[u8] = &[5; B_MAX];
    assert_eq!(
        b.refused(
            txn(4),
            OperationKind::Update,
            LockMode::Exclusive,
            inserted[2],
            Some(&[(B, Some(big))])
        ),
        ErrorCode::TableFull
    );
    assert_eq!(
        b.read(inserted[2]),
        Some(row(inserted[2], i64::from(inserted[2]), None, None))
    );
    b.assert_quiet();

    // Deleting a row of the full partition makes room for the refused key.
    let (full_partition, _) = b.route(full_key);
    let victim = *inserted
        .iter()
        .find(|&&k| b.route(k).0 == full_partition)
        .expect("a row in the full partition");
    b.write(5, OperationKind::Delete, victim, None, gci(3));
    assert_eq!(b.read(victim), None);
    b.insert(6, full_key, 1, None, None);
    assert_eq!(b.read(full_key), Some(row(full_key, 1, None, None)));
    assert_eq!(b.ldm.rows(TABLE_ID), inserted.len() as u64);
    b.assert_quiet();
}

// ---------------------------------------------------------------------------
// Row header
// ---------------------------------------------------------------------------

#[test]
fn a_freed_slot_keeps_the_gci_of_the_delete() {
    let mut b = Bench::new();
    let k = 77;
    b.write(
        1,
        OperationKind::Insert,
        k,
        Some(&[(V, Some(&int(1)))]),
        gci(10),
    );
    let slot = b.row_id(k).expect("row");
    let (partition_id, _) = b.route(k);
    let header = |b: &Bench| {
        let partition = &b.ldm.tables[TABLE_ID as usize]
            .as_ref()
            .expect("table")
            .partitions[partition_id as usize]
            .as_ref()
            .expect("partition")
            .store;
        (
            partition.state(&b.ldm.memory, slot),
            partition.gci(&b.ldm.memory, slot),
        )
    };
    assert_eq!(header(&b), (RowState::Live, gci(10).0));
    b.write(
        2,
        OperationKind::Update,
        k,
        Some(&[(V, Some(&int(2)))]),
        gci(11),
    );
    assert_eq!(header(&b), (RowState::Live, gci(11).0));
    b.write(3, OperationKind::Delete, k, None, gci(12));
    assert_eq!(
        header(&b),
        (RowState::Free, gci(12).0),
        "the free slot remembers the delete"
    );
    // An aborted insert that took the slot leaves the delete's GCI.
    let (insert, _) = b.prepare(
        txn(4),
        OperationKind::Insert,
        LockMode::Exclusive,
        k,
        Some(&[(V, Some(&int(3)))]),
    );
    assert_eq!(b.row_id(k), Some(slot));
    assert_eq!(header(&b), (RowState::Reserved, gci(12).0));
    assert!(b.abort(txn(4), insert.tc_op).is_empty());
    assert_eq!(header(&b), (RowState::Free, gci(12).0));
    b.write(
        5,
        OperationKind::Insert,
        k,
        Some(&[(V, Some(&int(4)))]),
        gci(13),
    );
    assert_eq!(header(&b), (RowState::Live, gci(13).0));
    b.assert_quiet();
}

// ---------------------------------------------------------------------------
// Var-size columns and value checks
// ---------------------------------------------------------------------------

#[test]
fn var_columns_survive_updates_that_grow_and_shrink_them() {
    let mut b = Bench::new();
    b.insert(1, 1, 1, Some(b"ab"), Some(&[1; 10]));
    b.insert(2, 2, 2, None, None);
    type Step = (Option<Vec<u8>>, Option<Vec<u8>>);
    let steps: Vec<Step> = vec![
        (Some(vec![b's'; S_MAX]), Some(vec![2; 300])),
        (Some(b"x".to_vec()), None),
        (None, Some(vec![3; B_MAX])),
        (Some(Vec::new()), Some(Vec::new())),
        (Some(vec![b'y'; 17]), Some(vec![4; 33])),
    ];
    let mut v = 1;
    for (n, (s, bin)) in steps.into_iter().enumerate() {
        let g = gci(2 + n as u32);
        b.write(
            10 + n as u64,
            OperationKind::Update,
            1,
            Some(&[(S, s.as_deref()), (B, bin.as_deref())]),
            g,
        );
        assert_eq!(
            b.read(1),
            Some(row(1, v, s.as_deref(), bin.as_deref())),
            "step {n}"
        );
        // An update of a fixed column keeps both var values.
        b.write(
            20 + n as u64,
            OperationKind::Update,
            1,
            Some(&[(V, Some(&int(n as i64)))]),
            g,
        );
        assert_eq!(
            b.read(1),
            Some(row(1, n as i64, s.as_deref(), bin.as_deref())),
            "step {n}"
        );
        // Updating only s keeps b, and the other row is untouched.
        b.write(
            30 + n as u64,
            OperationKind::Update,
            1,
            Some(&[(S, Some(b"only s"))]),
            g,
        );
        assert_eq!(
            b.read(1),
            Some(row(1, n as i64, Some(b"only s"), bin.as_deref())),
            "step {n}"
        );
        assert_eq!(b.read(2), Some(row(2, 2, None, None)));
        v = n as i64;
    }
    b.assert_quiet();
}

#[test]
fn values_that_do_not_fit_are_refused() {
    let mut b = Bench::new();
    let long_s = [b'a'; S_MAX + 1];
    let long_b = [0u8; B_MAX + 1];
    assert_eq!(
        b.refused(
            txn(1),
            OperationKind::Insert,
            LockMode::Exclusive,
            1,
            Some(&[(V, Some(&int(1))), (S, Some(&long_s))])
        ),
        ErrorCode::ValueTooLong
    );
    assert_eq!(
        b.refused(
            txn(1),
            OperationKind::Insert,
            LockMode::Exclusive,
            1,
            Some(&[(V, Some(&int(1))), (B, Some(&long_b))])
        ),
        ErrorCode::ValueTooLong
    );
    assert_eq!(
        b.refused(
            txn(1),
            OperationKind::Insert,
            LockMode::Exclusive,
            1,
            Some(&[(V, None)])
        ),
        ErrorCode::NullNotAllowed
    );
    assert_eq!(
        b.refused(
            txn(1),
            OperationKind::Insert,
            LockMode::Exclusive,
            1,
            Some(&[(S, Some(b"no v"))])
        ),
        ErrorCode::NullNotAllowed,
        "a NOT NULL column without a value"
    );
    assert_eq!(
        b.refused(
            txn(1),
            OperationKind::Insert,
            LockMode::Exclusive,
            1,
            Some(&[(V, Some(&[1, 2, 3]))])
        ),
        ErrorCode::BadValue
    );
    assert_eq!(
        b.refused(
            txn(1),
            OperationKind::Insert,
            LockMode::Exclusive,
            1,
            Some(&[(V, Some(&int(1))), (9, None)])
        ),
        ErrorCode::UnknownColumn
    );
    assert_eq!(b.ldm.rows(TABLE_ID), 0);
    b.insert(2, 1, 1, Some(b"fine"), None);
    assert_eq!(
        b.refused(
            txn(3),
            OperationKind::Update,
            LockMode::Exclusive,
            1,
            Some(&[(V, None)])
        ),
        ErrorCode::NullNotAllowed
    );
    assert_eq!(
        b.refused(
            txn(3),
            OperationKind::Update,
            LockMode::Exclusive,
            1,
            Some(&[(S, Some(&long_s))])
        ),
        ErrorCode::ValueTooLong
    );
    assert_eq!(
        b.refused(
            txn(3),
            OperationKind::Update,
            LockMode::Exclusive,
            1,
            Some(&[(K, Some(&2i32.to_le_bytes()))])
        ),
        ErrorCode::BadRequest,
        "the key cannot change"
    );
    // Read projections (u16 column ids): a valid one, an unknown column, a
    // torn one.
    let projection = |b: &mut Bench, lock, columns: &[u8]| {
        let mut request = b.request(txn(3), OperationKind::Read, lock, 1, None);
        request.attr = Some(b.ctx.pool().copy_from(columns).expect("room"));
        b.send(request).pop().expect("an answer").1
    };
    let mut columns = Vec::new();
    columns.extend_from_slice(&S.to_le_bytes());
    columns.extend_from_slice(&K.to_le_bytes());
    let Answer::Conf {
        data: Some(data),
        released: true,
        ..
    } = projection(&mut b, LockMode::CommittedRead, &columns)
    else {
        panic!("projection read")
    };
    assert_eq!(
        data,
        vec![
            (S, Some(b"fine".to_vec())),
            (K, Some(1i32.to_le_bytes().to_vec()))
        ]
    );
    for lock in [LockMode::CommittedRead, LockMode::Shared] {
        let answer = projection(&mut b, lock, &9u16.to_le_bytes());
        assert!(
            matches!(answer, Answer::Ref(ErrorCode::UnknownColumn)),
            "{answer:?}"
        );
        let answer = projection(&mut b, lock, &[1]);
        assert!(
            matches!(answer, Answer::Ref(ErrorCode::BadRequest)),
            "{answer:?}"
        );
    }
    assert_eq!(b.read(1), Some(row(1, 1, Some(b"fine"), None)));
    b.assert_quiet();
}

// ---------------------------------------------------------------------------
// Ownership and schema
// ---------------------------------------------------------------------------

#[test]
fn partitions_of_another_ldm_and_unknown_tables_are_refused() {
    let ldm1 = BlockRef::new(NODE, BlockKind::Ldm, 1);
    let mut b = Bench::build(8 * MIB, 2, ldm1);
    // With two ldm threads, partition p belongs to instance p % 2.
    let foreign = (0..100)
        .find(|&k| b.route(k).0 == 0)
        .expect("a key of partition 0");
    let own = (0..100)
        .find(|&k| b.route(k).0 == 1)
        .expect("a key of partition 1");
    let insert = |b: &mut Bench, k: i32| {
        b.request(
            txn(1),
            OperationKind::Insert,
            LockMode::Exclusive,
            k,
            Some(&[(V, Some(&int(1)))]),
        )
    };
    let assert_unknown_table = |b: &mut Bench, request: LqhKeyReq| {
        let tc_op = request.tc_op;
        b.deliver(TC, request);
        assert_eq!(
            b.trace(),
            vec![line(
                ldm1,
                TC,
                LqhKeyRef {
                    tc_op,
                    error: ErrorCode::UnknownTable
                }
            )]
        );
    };
    let request = insert(&mut b, foreign);
    assert_unknown_table(&mut b, request);
    let mut request = insert(&mut b, own);
    request.table_id = 99;
    assert_unknown_table(&mut b, request);
    let mut request = insert(&mut b, own);
    request.partition = 7;
    assert_unknown_table(&mut b, request);
    // Start phases are confirmed.
    b.deliver(DICT, StartPhaseReq { phase: 1 });
    assert_eq!(
        b.trace(),
        vec![line(ldm1, DICT, StartPhaseConf { phase: 1 })]
    );
}

#[test]
fn drop_table_is_refused_while_operations_use_it() {
    let mut b = Bench::new();
    b.insert(1, 1, 1, Some(b"v"), Some(&[1; 100]));
    let (op, _) = b.prepare(
        txn(2),
        OperationKind::Update,
        LockMode::Exclusive,
        1,
        Some(&[(V, Some(&int(2)))]),
    );
    b.deliver(DICT, DropTabOrd { table_id: TABLE_ID });
    assert_eq!(
        b.trace(),
        vec![line(
            LDM,
            DICT,
            DropTabRep {
                table_id: TABLE_ID,
                busy: true
            }
        )]
    );
    b.commit_all(&[op], gci(2));
    b.assert_quiet();
    b.deliver(DICT, DropTabOrd { table_id: TABLE_ID });
    assert_eq!(
        b.trace(),
        vec![line(
            LDM,
            DICT,
            DropTabRep {
                table_id: TABLE_ID,
                busy: false
            }
        )]
    );
    assert_eq!(b.ldm.memory_pages().0, 0, "every page returned");
    let request = b.request(
        txn(3),
        OperationKind::Read,
        LockMode::CommittedRead,
        1,
        None,
    );
    let tc_op = request.tc_op;
    b.deliver(TC, request);
    assert_eq!(
        b.trace(),
        vec![line(
            LDM,
            TC,
            LqhKeyRef {
                tc_op,
                error: ErrorCode::UnknownTable
            }
        )]
    );
    // Re-created with the same id, it starts empty.
    let (table, map) = (b.table.clone(), b.map.clone());
    b.deliver(DICT, LqhAddTabReq { table, map });
    assert_eq!(
        b.trace(),
        vec![line(LDM, DICT, AddTabConf { table_id: TABLE_ID })]
    );
    assert_eq!(b.read(1), None);
    b.assert_quiet();
}

#[test]
fn out_of_operation_records_is_refused() {
    let mut b = Bench::new();
    b.insert(1, 1, 1, None, None);
    let (holder, _) = b.prepare(
        txn(2),
        OperationKind::Update,
        LockMode::Exclusive,
        1,
        Some(&[(V, Some(&int(2)))]),
    );
    let waiting: Vec<u32> = (0..31)
        .map(|n| {
            b.prepare_waits(
                txn(10 + n),
                OperationKind::Read,
                LockMode::Exclusive,
                1,
                None,
            )
        })
        .collect();
    assert_eq!(b.ldm.operations_in_use(), 32);
    assert_eq!(
        b.refused(txn(99), OperationKind::Read, LockMode::Exclusive, 1, None),
        ErrorCode::OutOfOperationRecords
    );
    assert_eq!(
        b.refused(
            txn(99),
            OperationKind::Read,
            LockMode::CommittedRead,
            1,
            None
        ),
        ErrorCode::OutOfOperationRecords,
        "a committed read needs a record too"
    );
    for (n, tc_op) in waiting.into_iter().enumerate() {
        assert!(b.abort(txn(10 + n as u64), tc_op).is_empty());
    }
    b.commit_all(&[holder], gci(2));
    assert_eq!(b.read(1), Some(row(1, 2, None, None)));
    b.assert_quiet();
}

/// Var slots are not visible to `assert_quiet`; a leak shows as DataMemory
/// pages in use growing while the same work repeats.
#[test]
fn repeated_aborts_and_var_class_changes_leak_no_memory() {
    let mut b = Bench::new();
    b.insert(1, 1, 1, Some(b"a"), Some(&[1; 20]));
    let round = |b: &mut Bench, n: u64| {
        let big: &[u8] = &[7; B_MAX];
        let g = gci(n as u32 + 2);
        // Aborted insert with a big var part.
        let (insert, _) = b.prepare(
            txn(n),
            OperationKind::Insert,
            LockMode::Exclusive,
            2,
            Some(&[(V, Some(&int(2))), (B, Some(big))]),
        );
        assert!(b.abort(txn(n), insert.tc_op).is_empty());
        // Aborted update that needed a new var class.
        let (update, _) = b.prepare(
            txn(n),
            OperationKind::Update,
            LockMode::Exclusive,
            1,
            Some(&[(B, Some(big))]),
        );
        assert!(b.abort(txn(n), update.tc_op).is_empty());
        // Committed grow and shrink.
        b.write(n, OperationKind::Update, 1, Some(&[(B, Some(big))]), g);
        b.write(n, OperationKind::Update, 1, Some(&[(B, Some(&[1; 20]))]), g);
        // Two updates in one transaction, both changing the class.
        let (u1, _) = b.prepare(
            txn(n),
            OperationKind::Update,
            LockMode::Exclusive,
            1,
            Some(&[(S, Some(&[b's'; S_MAX])), (B, Some(&[2; 300]))]),
        );
        let (u2, _) = b.prepare(
            txn(n),
            OperationKind::Update,
            LockMode::Exclusive,
            1,
            Some(&[(S, Some(b"a")), (B, Some(&[1; 20]))]),
        );
        b.commit_all(&[u1, u2], g);
        // Delete and insert of one key in one transaction, new class.
        let (delete, _) = b.prepare(txn(n), OperationKind::Delete, LockMode::Exclusive, 1, None);
        let (insert, _) = b.prepare(
            txn(n),
            OperationKind::Insert,
            LockMode::Exclusive,
            1,
            Some(&[(V, Some(&int(1))), (S, Some(b"a")), (B, Some(&[1; 20]))]),
        );
        b.commit_all(&[delete, insert], g);
        // Insert and delete of a new key.
        b.insert(n, 3, 3, Some(b"x"), Some(big));
        b.write(n, OperationKind::Delete, 3, None, g);
    };
    for n in 0..5 {
        round(&mut b, n);
    }
    let pages = b.ldm.memory_pages().0;
    for n in 5..300 {
        round(&mut b, n);
    }
    assert_eq!(
        b.ldm.memory_pages().0,
        pages,
        "pages in use grew: a var or fixed slot leaks"
    );
    assert_eq!(b.read(1), Some(row(1, 1, Some(b"a"), Some(&[1; 20]))));
    assert_eq!(b.ldm.rows(TABLE_ID), 1);
    b.assert_quiet();
}

/// Pages, once used by one var size class (or one partition), stay with it
/// until the table is dropped: after every row with a big var part is
/// deleted, the table is empty and yet a row with a small var part is
/// refused with TableFull, because no page can move to the small class.
#[test]
fn deleted_rows_free_memory_for_rows_of_another_var_size() {
    let mut b = Bench::with_memory(256 * 1024);
    let big: &[u8] = &[9; B_MAX];
    let mut inserted = Vec::new();
    loop {
        let k = inserted.len() as i32;
        assert!(k < 100_000, "256 KiB must fill up");
        let request = b.request(
            txn(1),
            OperationKind::Insert,
            LockMode::Exclusive,
            k,
            Some(&[(V, Some(&int(1))), (B, Some(big))]),
        );
        let tc_op = request.tc_op;
        match b.send(request)[..] {
            [(_, Answer::Conf { ldm_op, .. })] => {
                b.commit_all(
                    &[Op {
                        transaction_id: txn(1),
                        tc_op,
                        ldm_op,
                    }],
                    gci(1),
                );
                inserted.push(k);
            }
            [(_, Answer::Ref(ErrorCode::TableFull))] => break,
            ref other => panic!("insert of {k}: {other:?}"),
        }
    }
    for &k in &inserted {
        b.write(2, OperationKind::Delete, k, None, gci(2));
    }
    assert_eq!(b.ldm.rows(TABLE_ID), 0, "the table is empty");
    b.assert_quiet();
    let request = b.request(
        txn(3),
        OperationKind::Insert,
        LockMode::Exclusive,
        0,
        Some(&[(V, Some(&int(1))), (S, Some(b"small"))]),
    );
    let answers = b.send(request);
    assert!(
        matches!(answers[..], [(_, Answer::Conf { .. })]),
        "an insert into an empty table must succeed, got {answers:?} with {:?} pages in use",
        b.ldm.memory_pages()
    );
}

#[test]
fn an_insert_waiting_on_a_committed_insert_of_its_key_is_a_duplicate() {
    let mut b = Bench::new();
    let (first, _) = b.prepare(
        txn(1),
        OperationKind::Insert,
        LockMode::Exclusive,
        4,
        Some(&[(V, Some(&int(1)))]),
    );
    let second = b.prepare_waits(
        txn(2),
        OperationKind::Insert,
        LockMode::Exclusive,
        4,
        Some(&[(V, Some(&int(2)))]),
    );
    let reader = b.prepare_waits(txn(3), OperationKind::Read, LockMode::Shared, 4, None);
    let answers = b.commit(first, gci(2));
    let [(s, Answer::Ref(ErrorCode::DuplicateKey)), (
        r,
        Answer::Conf {
            ldm_op,
            data: Some(ref data),
            released: false,
        },
    )] = answers[..]
    else {
        panic!("duplicate for the second insert, the row for the reader: {answers:?}")
    };
    assert_eq!((s, r), (second, reader));
    assert_eq!(*data, row(4, 1, None, None));
    b.complete(first);
    b.commit_all(
        &[Op {
            transaction_id: txn(3),
            tc_op: r,
            ldm_op,
        }],
        gci(2),
    );
    assert_eq!(b.read(4), Some(row(4, 1, None, None)));
    b.assert_quiet();
}

/// SCAN_PARTITIONREQ (`scan.rs`): every committed row of a partition, in
/// row-id order, in batches of at most `max_rows` that resume at the
/// answer's `next_row`; a row whose insert is only prepared, and deleted
/// rows, are not shown.
#[test]
fn a_partition_scan_returns_the_committed_rows_in_batches_that_resume() {
    const API: BlockRef = BlockRef::new(NodeId(200), BlockKind::Api, 0);
    let mut b = Bench::new();
    for k in 0..40 {
        b.insert(k as u64, k, i64::from(k) * 3, Some(b"scan"), None);
    }
    for k in (0..40).step_by(7) {
        b.write(100 + k as u64, OperationKind::Delete, k, None, gci(2));
    }
    let (prepared, _) = b.prepare(
        txn(500),
        OperationKind::Insert,
        LockMode::Exclusive,
        1000,
        Some(&[(V, Some(&int(1)))]),
    );
    let scan = |b: &mut Bench, partition: u32, start_row: u32, max_rows: u32| {
        b.deliver(
            API,
            ScanPartitionReq {
                request_id: 9,
                table_id: TABLE_ID,
                partition,
                start_row,
                max_rows,
            },
        );
        let sent = b.ctx.sent.pop().expect("an answer");
        assert!(b.ctx.sent.is_empty());
        assert_eq!(sent.envelope.to, API);
        let Signal::ScanPartitionConf(conf) = sent.envelope.signal else {
            panic!("expected ScanPartitionConf, got {:?}", sent.envelope.signal);
        };
        let rows = signal::replica_check::decode_scan_batch(conf.rows.as_slice())
            .expect("a well-formed batch");
        (rows, conf.next_row, conf.done)
    };
    for partition in 0..2 {
        let mut expected: Vec<(u32, i32)> = (0..40)
            .filter(|k| k % 7 != 0 && b.route(*k).0 == partition)
            .map(|k| (b.row_id(k).expect("a live row"), k))
            .collect();
        expected.sort_unstable();
        let mut seen = Vec::new();
        let mut start_row = 0;
        let mut batches = 0;
        loop {
            let (rows, next_row, done) = scan(&mut b, partition, start_row, 3);
            assert!(rows.len() <= 3, "a batch holds at most max_rows rows");
            for row in &rows {
                assert!(row.row_id >= start_row, "rows from where the batch starts");
                seen.push((row.row_id, row.gci, row.values.clone()));
            }
            batches += 1;
            if done {
                assert_eq!(next_row, u32::MAX);
                break;
            }
            assert!(next_row > start_row, "a batch moves the cursor on");
            start_row = next_row;
        }
        assert!(batches >= expected.len().div_ceil(3));
        let ids: Vec<u32> = seen.iter().map(|(row_id, ..)| *row_id).collect();
        let expected_ids: Vec<u32> = expected.iter().map(|(row_id, _)| *row_id).collect();
        assert_eq!(
            ids, expected_ids,
            "every committed row once, in row-id order"
        );
        for ((_, gci_seen, values), (_, k)) in seen.iter().zip(&expected) {
            assert_eq!(*gci_seen, gci(1));
            let section = b.ctx.pool().copy_from(values).expect("pool has room");
            assert_eq!(Some(decode(&section)), b.read(*k), "row of key {k}");
        }
    }
    let (rows, next_row, done) = scan(&mut b, 0, u32::MAX, 10);
    assert!(rows.is_empty() && done && next_row == u32::MAX);
    b.abort(prepared.transaction_id, prepared.tc_op);
    b.assert_quiet();
}
