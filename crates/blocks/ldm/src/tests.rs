//! ldm block tests (docs/design/testing.md §2): one ldm alone, fed the
//! signals dict and the tc would send; the test plays both. Golden traces
//! check the exact answers, in order; behaviour tests check row values
//! (decoded with `AttrIter`), lock queues, aborts, DataMemory exhaustion,
//! var-size columns and the row header's GCI. After every scenario the ldm
//! must hold no operation record, no lock, no reserved slot and no stray
//! index entry. The `Bench` and its helpers are shared with `lock_tests`,
//! `row_tests` and `value_tests`; golden traces of the normal paths are
//! here.
//!
//! Partition maps are built as dih builds them for one node (node 2) with a
//! single ldm thread, so this ldm owns every partition; one test uses two
//! ldm threads to check that an ldm refuses partitions it does not own.

use crate::operation::NIL;
use crate::{Ldm, LdmConfig};
use kernel::testing::{column, one_node_map};
use kernel::testing::{deliver, line, RecordingContext};
use kernel::Context;
use rowstore::RowState;
use signal::attr::{key_hash, AttrIter, AttrWriter, KeyHash};
use signal::partition::bucket;
use signal::schema::{ColumnType, TableDef};
use signal::section::CLASS_SIZES;
use signal::signals::*;
use signal::{BlockKind, BlockRef, ErrorCode, Gci, NodeId, Section, Signal, TransactionId};
use std::sync::Arc;

pub(crate) const NODE: NodeId = NodeId(2);
pub(crate) const LDM: BlockRef = BlockRef::new(NODE, BlockKind::Ldm, 0);
pub(crate) const TC: BlockRef = BlockRef::new(NODE, BlockKind::Tc, 0);
pub(crate) const DICT: BlockRef = BlockRef::new(NODE, BlockKind::Dict, 0);

pub(crate) const TABLE_ID: u32 = 3;
/// Columns: k INT key, v BIGINT NOT NULL, s VARCHAR(40), b VARBINARY(600).
pub(crate) const K: u16 = 0;
pub(crate) const V: u16 = 1;
pub(crate) const S: u16 = 2;
pub(crate) const B: u16 = 3;
pub(crate) const S_MAX: usize = 40;
pub(crate) const B_MAX: usize = 600;

/// Section pool of `RecordingContext::new()`, per class.
pub(crate) const POOL_COUNTS: [usize; 6] = [64, 16, 8, 4, 2, 2];

pub(crate) const MIB: u64 = 1 << 20;

pub(crate) fn gci(n: u32) -> Gci {
    Gci::from_parts(7, n)
}

pub(crate) fn table() -> TableDef {
    let table = TableDef {
        indexes: Vec::new(),
        revision: 0,
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
        partition_key: Vec::new(),
    };
    table.validate().expect("test table is valid");
    table
}

/// The map dih makes for one node group of one node with `ldm_instances`
/// ldm threads.
pub(crate) fn partition_map(table: &TableDef, ldm_instances: u16) -> PartitionMap {
    one_node_map(table, NODE, ldm_instances, |partition| partition)
}

pub(crate) fn txn(n: u64) -> TransactionId {
    TransactionId(10 << 48 | n)
}

/// Attribute entries to encode: (column, value or NULL).
pub(crate) type Entries<'a> = &'a [(u16, Option<&'a [u8]>)];

/// A decoded row or read result: (column, value) in order.
pub(crate) type Row = Vec<(u16, Option<Vec<u8>>)>;

pub(crate) fn decode(data: &Section) -> Row {
    AttrIter::new(data.as_slice())
        .map(|entry| {
            let entry = entry.expect("the ldm encodes valid entries");
            (entry.column, entry.value.map(<[u8]>::to_vec))
        })
        .collect()
}

/// The full row the ldm must return for these values.
pub(crate) fn row(k: i32, v: i64, s: Option<&[u8]>, b: Option<&[u8]>) -> Row {
    vec![
        (K, Some(k.to_le_bytes().to_vec())),
        (V, Some(v.to_le_bytes().to_vec())),
        (S, s.map(<[u8]>::to_vec)),
        (B, b.map(<[u8]>::to_vec)),
    ]
}

/// What one LQHKEYREQ got back.
#[derive(Debug)]
pub(crate) enum Answer {
    Conf {
        ldm_op: u32,
        data: Option<Row>,
        released: bool,
    },
    Ref(ErrorCode),
}

/// A prepared operation as the tc remembers it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Op {
    pub(crate) transaction_id: TransactionId,
    pub(crate) tc_op: u32,
    pub(crate) ldm_op: u32,
}

pub(crate) struct Bench {
    pub(crate) ldm: Ldm,
    pub(crate) ctx: RecordingContext,
    pub(crate) table: Arc<TableDef>,
    pub(crate) map: Arc<PartitionMap>,
    pub(crate) next_tc_op: u32,
}

impl Bench {
    pub(crate) fn new() -> Bench {
        Bench::with_memory(8 * MIB)
    }

    pub(crate) fn with_memory(data_memory_bytes: u64) -> Bench {
        Bench::build(data_memory_bytes, 1, LDM)
    }

    pub(crate) fn build(data_memory_bytes: u64, ldm_instances: u16, address: BlockRef) -> Bench {
        Bench::build_with(data_memory_bytes, ldm_instances, address, table())
    }

    /// A bench whose table is `table` (the test table with indexes, say).
    pub(crate) fn build_with(
        data_memory_bytes: u64,
        ldm_instances: u16,
        address: BlockRef,
        table: TableDef,
    ) -> Bench {
        let table = Arc::new(table);
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

    pub(crate) fn deliver(&mut self, from: BlockRef, signal: impl Into<Signal>) {
        deliver(&mut self.ldm, &mut self.ctx, from, signal);
    }

    pub(crate) fn trace(&mut self) -> Vec<String> {
        self.ctx.take_trace()
    }

    pub(crate) fn section(&self, entries: Entries<'_>) -> Section {
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

    pub(crate) fn key(&self, k: i32) -> Section {
        self.section(&[(K, Some(&k.to_le_bytes()))])
    }

    /// The partition and hash the tc computes for key k.
    pub(crate) fn route(&self, k: i32) -> (u32, KeyHash) {
        let hash = key_hash(&self.table, self.key(k).as_slice()).expect("valid key");
        (self.map.bucket_partitions[bucket(hash) as usize], hash)
    }

    /// The LQHKEYREQ a tc sends; takes the next tc operation number.
    pub(crate) fn request(
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
            no_wait: false,
        }
    }

    /// Delivers `request`; returns every answer sent, by tc operation.
    pub(crate) fn send(&mut self, request: LqhKeyReq) -> Vec<(u32, Answer)> {
        self.deliver(TC, request);
        self.answers()
    }

    /// Drains the sent signals, which must all be LQHKEYCONF/REF to the tc.
    pub(crate) fn answers(&mut self) -> Vec<(u32, Answer)> {
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
    pub(crate) fn prepare(
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
    pub(crate) fn prepare_waits(
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
    pub(crate) fn refused(
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
    pub(crate) fn commit(&mut self, op: Op, gci: Gci) -> Vec<(u32, Answer)> {
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

    pub(crate) fn complete(&mut self, op: Op) {
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
    pub(crate) fn commit_all(&mut self, ops: &[Op], gci: Gci) {
        for &op in ops {
            let others = self.commit(op, gci);
            assert!(others.is_empty(), "unexpected answers {others:?}");
        }
        for &op in ops {
            self.complete(op);
        }
    }

    pub(crate) fn abort(
        &mut self,
        transaction_id: TransactionId,
        tc_op: u32,
    ) -> Vec<(u32, Answer)> {
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
    pub(crate) fn read(&mut self, k: i32) -> Option<Row> {
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
    pub(crate) fn write(
        &mut self,
        t: u64,
        kind: OperationKind,
        k: i32,
        attr: Option<Entries<'_>>,
        gci: Gci,
    ) {
        let (op, _) = self.prepare(txn(t), kind, LockMode::Exclusive, k, attr);
        self.commit_all(&[op], gci);
    }

    pub(crate) fn insert(&mut self, t: u64, k: i32, v: i64, s: Option<&[u8]>, b: Option<&[u8]>) {
        self.write(
            t,
            OperationKind::Insert,
            k,
            Some(&[(V, Some(&v.to_le_bytes())), (S, s), (B, b)]),
            gci(1),
        );
    }

    /// The row id key k has in its partition (via the hash index).
    pub(crate) fn row_id(&self, k: i32) -> Option<u32> {
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
    pub(crate) fn assert_quiet(&mut self) {
        assert!(self.ctx.sent.is_empty(), "unanswered: {:?}", self.trace());
        assert_eq!(self.ldm.operations_in_use(), 0, "operation records leaked");
        assert!(self.ldm.restart.is_empty(), "restart queue not empty");
        let memory = &self.ldm.memory;
        for table in self.ldm.tables.iter().flatten() {
            assert_eq!(table.active_operations, 0, "table operation count leaked");
            assert_eq!(
                table.operations_before_build, 0,
                "operations from before an index build counted with none in flight"
            );
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
                let ordered = partition
                    .check_ordered(memory, &table.layout)
                    .unwrap_or_else(|problem| panic!("ordered index: {problem}"));
                assert_eq!(ordered, live, "ordered-index entries");
            }
        }
        assert_eq!(
            memory.index_nodes().reserved(),
            0,
            "ordered-index nodes still reserved with nothing prepared"
        );
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

pub(crate) fn int(v: i64) -> [u8; 8] {
    v.to_le_bytes()
}

// ---------------------------------------------------------------------------
// Golden traces
// ---------------------------------------------------------------------------

#[test]
pub(crate) fn golden_trace_of_insert_commit_complete_read_update_delete() {
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
pub(crate) fn golden_trace_of_a_lock_wait_ending_in_the_holders_commit() {
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
