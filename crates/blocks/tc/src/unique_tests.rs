//! How a tc keeps a unique index (`unique.rs`): the operations it adds to
//! a client's insert, update, delete and write of a table with a unique
//! index, the DuplicateKey naming the index, and the refusal of a
//! client's write to the hidden table. The test plays dict, dih, the ldms
//! and the API, as in `tests.rs`.

use crate::tests::{config, partition_map, txn, API, COMMIT, DICT, DIH, EXECUTE, G1, START, TC};
use crate::tests::{MEMBERSHIP, NODE};
use crate::{Tc, TcConfig};
use kernel::testing::{column, deliver, RecordingContext};
use signal::attr::AttrIter;
use signal::schema::{ColumnType, IndexDef, TableDef, UniqueTable};
use signal::signals::*;
use signal::{BlockRef, ErrorCode, Section, Signal, TransactionId};
use std::sync::Arc;

const TABLE: u32 = 3;
const VERSION: u32 = 7;
const HIDDEN: u32 = 4;
const HIDDEN_VERSION: u32 = 2;
const INDEX: u32 = 1;
/// The indexed column (VARCHAR, NULL allowed) and another one.
const EMAIL: u16 = 1;
const V: u16 = 2;

fn table() -> TableDef {
    let table = TableDef {
        id: TABLE,
        version: VERSION,
        name: "users".into(),
        columns: vec![
            column("k", ColumnType::Int { unsigned: false }, false),
            column("email", ColumnType::VarChar(20), true),
            column("v", ColumnType::Int { unsigned: false }, true),
        ],
        primary_key: vec![0],
        partitions: 2,
        indexes: vec![IndexDef {
            id: INDEX,
            name: "by_email".into(),
            columns: vec![EMAIL],
            unique: Some(UniqueTable {
                table_id: HIDDEN,
                table_version: HIDDEN_VERSION,
            }),
        }],
        revision: INDEX,
        partition_key: Vec::new(),
    };
    table.validate().expect("valid");
    table
}

/// Attribute entries: (column, value or NULL).
type Entries<'a> = &'a [(u16, Option<&'a [u8]>)];

struct Bench {
    tc: Tc,
    ctx: RecordingContext,
}

/// What the tc sent an ldm, decoded.
#[derive(Debug, PartialEq)]
struct Sent {
    ldm: BlockRef,
    tc_op: u32,
    table_id: u32,
    kind: OperationKind,
    lock: LockMode,
    key: Vec<(u16, Option<Vec<u8>>)>,
    attr: Option<Vec<(u16, Option<Vec<u8>>)>>,
    /// The attribute section's bytes (a read's projection: column ids).
    raw_attr: Option<Vec<u8>>,
}

fn entries(section: &[u8]) -> Vec<(u16, Option<Vec<u8>>)> {
    AttrIter::new(section)
        .map(|entry| {
            let entry = entry.expect("well formed");
            (entry.column, entry.value.map(<[u8]>::to_vec))
        })
        .collect()
}

fn int(k: i32) -> Option<Vec<u8>> {
    Some(k.to_le_bytes().to_vec())
}

fn text(s: &str) -> Option<Vec<u8>> {
    Some(s.as_bytes().to_vec())
}

impl Bench {
    fn new() -> Bench {
        // A write of a table with a unique index takes up to four
        // operation records.
        let config = TcConfig {
            max_operations: 64,
            max_operations_per_transaction: 32,
            ..config()
        };
        let mut bench = Bench {
            tc: Tc::new(config),
            ctx: RecordingContext::new(),
        };
        for &phase in signal::phases::PHASES {
            bench.deliver(MEMBERSHIP, StartPhaseReq { phase });
        }
        bench.deliver(DIH, GcpCommit { gci: G1 });
        let table = table();
        let map = Arc::new(partition_map(&table));
        let table = Arc::new(table);
        bench.deliver(DICT, TcAddTabReq { table, map });
        bench.ctx.sent.clear();
        bench
    }

    fn deliver(&mut self, from: BlockRef, signal: impl Into<Signal>) {
        deliver(&mut self.tc, &mut self.ctx, from, signal);
    }

    fn section(&self, entries: Entries<'_>) -> Section {
        crate::tests::section_of(&self.ctx, entries)
    }

    fn request(
        &self,
        t: TransactionId,
        kind: OperationKind,
        k: i32,
        attr: Option<Entries<'_>>,
    ) -> TcKeyReq {
        TcKeyReq {
            transaction_id: t,
            client_op: 0,
            flags: START | EXECUTE,
            kind,
            lock: LockMode::Exclusive,
            table_id: TABLE,
            table_version: VERSION,
            key: self.section(&[(0, Some(&k.to_le_bytes()))]),
            attr: attr.map(|entries| self.section(entries)),
        }
    }

    /// Every signal sent since the last call: the LQHKEYREQs decoded, the
    /// rest as they are.
    fn take(&mut self) -> (Vec<Sent>, Vec<Signal>) {
        let mut requests = Vec::new();
        let mut others = Vec::new();
        for sent in self.ctx.sent.drain(..) {
            match sent.envelope.signal {
                Signal::LqhKeyReq(request) => requests.push(Sent {
                    ldm: sent.envelope.to,
                    tc_op: request.tc_op,
                    table_id: request.table_id,
                    kind: request.kind,
                    lock: request.lock,
                    key: entries(request.key.as_slice()),
                    attr: (request.kind != OperationKind::Read)
                        .then(|| request.attr.as_ref().map(|attr| entries(attr.as_slice())))
                        .flatten(),
                    raw_attr: request.attr.map(|attr| attr.as_slice().to_vec()),
                }),
                other => others.push(other),
            }
        }
        (requests, others)
    }

    /// Plays the ldm: LQHKEYREF for `sent`.
    fn refused(&mut self, sent: &Sent, error: ErrorCode) {
        let refusal = LqhKeyRef {
            tc_op: sent.tc_op,
            error,
        };
        self.deliver(sent.ldm, refusal);
    }

    fn prepared(&mut self, sent: &Sent, data: Option<Entries<'_>>) {
        let data = data.map(|entries| self.section(entries));
        let conf = LqhKeyConf {
            tc_op: sent.tc_op,
            ldm_op: 100 + sent.tc_op,
            data,
            released: false,
        };
        self.deliver(sent.ldm, conf);
    }
}

/// What an update that moves a row's value sends: the write, the old
/// hidden row's delete, the new one's insert.
const MOVED: [(u32, OperationKind); 3] = [
    (TABLE, OperationKind::Update),
    (HIDDEN, OperationKind::Delete),
    (HIDDEN, OperationKind::Insert),
];

/// The COMMITs among `others`.
fn commits(others: &[Signal]) -> usize {
    let commit = |signal: &&Signal| matches!(signal, Signal::CommitReq(_));
    others.iter().filter(commit).count()
}

/// (table, kind) of each operation sent.
fn shape(sent: &[Sent]) -> Vec<(u32, OperationKind)> {
    sent.iter().map(|sent| (sent.table_id, sent.kind)).collect()
}

fn batch_answered(others: &[Signal], t: TransactionId) {
    assert!(
        matches!(
            others,
            [Signal::TcKeyConf(TcKeyConf { transaction_id, operations: 1, committed: false, .. })]
                if *transaction_id == t
        ),
        "expected one TCKEYCONF for the client's one operation, got {others:?}"
    );
}

/// The one signal sent, when it is a TCKEYREF.
fn only_refusal(others: &[Signal]) -> Option<&TcKeyRef> {
    match others {
        [Signal::TcKeyRef(refusal)] => Some(refusal),
        _ => None,
    }
}

#[test]
fn an_insert_inserts_the_hidden_row_in_the_same_transaction() {
    let mut b = Bench::new();
    let t = txn(API, 1);
    let email: &[u8] = b"ada@x";
    let request = b.request(t, OperationKind::Insert, 5, Some(&[(EMAIL, Some(email))]));
    b.deliver(API, request);
    let (sent, others) = b.take();
    assert!(others.is_empty());
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(
        (sent[0].table_id, sent[0].kind),
        (TABLE, OperationKind::Insert)
    );
    // The hidden row: key the email (hidden column 0), then the primary key
    // (hidden column 1).
    assert_eq!(sent[1].table_id, HIDDEN);
    assert_eq!(sent[1].kind, OperationKind::Insert);
    assert_eq!(sent[1].key, vec![(0, text("ada@x"))]);
    assert_eq!(sent[1].attr, Some(vec![(1, int(5))]));
    b.prepared(&sent[0], None);
    assert!(b.take().1.is_empty(), "answered before the hidden insert");
    b.prepared(&sent[1], None);
    batch_answered(&b.take().1, t);
}

#[test]
fn an_insert_with_a_null_in_the_index_has_no_hidden_row() {
    let mut b = Bench::new();
    let t = txn(API, 1);
    let v: &[u8] = &1i32.to_le_bytes();
    // Left out, and NULL: no hidden row either way.
    for attr in [vec![(V, Some(v))], vec![(EMAIL, None), (V, Some(v))]] {
        let request = b.request(t, OperationKind::Insert, 5, Some(&attr));
        b.deliver(API, request);
        let (sent, _) = b.take();
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert_eq!(sent[0].table_id, TABLE);
        b.prepared(&sent[0], None);
        batch_answered(&b.take().1, t);
        b.deliver(API, TcRollbackReq { transaction_id: t });
        b.take();
        // (the rollback's ABORT answered)
        b.deliver(
            sent[0].ldm,
            AbortConf {
                tc_op: sent[0].tc_op,
            },
        );
        b.take();
    }
    assert_eq!(b.tc.transactions_in_use(), 0);
}

#[test]
fn a_duplicate_value_aborts_with_duplicate_key_naming_the_index() {
    let mut b = Bench::new();
    let t = txn(API, 1);
    let email: &[u8] = b"ada@x";
    let request = b.request(t, OperationKind::Insert, 5, Some(&[(EMAIL, Some(email))]));
    b.deliver(API, request);
    let (sent, _) = b.take();
    b.prepared(&sent[0], None);
    b.refused(&sent[1], ErrorCode::DuplicateKey);
    // The base insert is aborted; the hidden one held nothing.
    let (_, others) = b.take();
    assert!(
        matches!(&others[..], [Signal::AbortReq(abort)] if abort.tc_op == sent[0].tc_op),
        "{others:?}"
    );
    b.deliver(
        sent[0].ldm,
        AbortConf {
            tc_op: sent[0].tc_op,
        },
    );
    let (_, others) = b.take();
    assert_eq!(
        only_refusal(&others),
        Some(&TcKeyRef {
            transaction_id: t,
            client_op: 0,
            error: ErrorCode::DuplicateKey,
            index_id: INDEX,
        })
    );
}

#[test]
fn an_update_of_the_indexed_column_reads_the_row_then_moves_its_hidden_row() {
    let mut b = Bench::new();
    let t = txn(API, 1);
    let new: &[u8] = b"bob@x";
    let request = b.request(t, OperationKind::Update, 5, Some(&[(EMAIL, Some(new))]));
    b.deliver(API, request);
    let (sent, others) = b.take();
    assert!(others.is_empty());
    // First the row's indexed columns, read with an exclusive lock.
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(
        (sent[0].table_id, sent[0].kind, sent[0].lock),
        (TABLE, OperationKind::Read, LockMode::Exclusive)
    );
    assert_eq!(
        sent[0].raw_attr,
        Some(EMAIL.to_le_bytes().to_vec()),
        "projection"
    );
    let old: &[u8] = b"ada@x";
    b.prepared(&sent[0], Some(&[(EMAIL, Some(old))]));
    let (then, others) = b.take();
    assert!(others.is_empty(), "nothing to the client: {others:?}");
    assert_eq!(shape(&then), MOVED.to_vec());
    assert_eq!(then[1].key, vec![(0, text("ada@x"))]);
    assert_eq!(then[2].key, vec![(0, text("bob@x"))]);
    assert_eq!(then[2].attr, Some(vec![(1, int(5))]));
    for sent in &then {
        b.prepared(sent, None);
    }
    batch_answered(&b.take().1, t);
    // Commit: every operation, the read's lock too, commits.
    b.deliver(API, TcCommitReq { transaction_id: t });
    let (_, others) = b.take();
    assert_eq!(commits(&others), 4, "{others:?}");
}

#[test]
fn an_update_that_leaves_the_index_alone_is_sent_as_it_is() {
    let mut b = Bench::new();
    let t = txn(API, 1);
    let v: &[u8] = &9i32.to_le_bytes();
    let request = b.request(t, OperationKind::Update, 5, Some(&[(V, Some(v))]));
    b.deliver(API, request);
    let (sent, _) = b.take();
    assert_eq!(sent.len(), 1);
    assert_eq!(
        (sent[0].table_id, sent[0].kind),
        (TABLE, OperationKind::Update)
    );
    // Same value with other trailing spaces (PAD SPACE): the same key,
    // so the hidden row stays.
    let t = txn(API, 2);
    let same: &[u8] = b"ada@x  ";
    let request = b.request(t, OperationKind::Update, 6, Some(&[(EMAIL, Some(same))]));
    b.deliver(API, request);
    let (sent, _) = b.take();
    let old: &[u8] = b"ada@x";
    b.prepared(&sent[0], Some(&[(EMAIL, Some(old))]));
    let (then, _) = b.take();
    assert_eq!(shape(&then), vec![(TABLE, OperationKind::Update)]);
}

#[test]
fn an_increment_of_an_indexed_column_is_refused_and_of_another_sent_as_it_is() {
    let mut b = Bench::new();
    let delta: &[u8] = &1i64.to_le_bytes();
    // The index is kept from new values, which an increment does not
    // carry: refused before anything is sent.
    let t = txn(API, 1);
    let request = b.request(
        t,
        OperationKind::Increment,
        5,
        Some(&[(EMAIL, Some(delta))]),
    );
    b.deliver(API, request);
    let (sent, others) = b.take();
    assert!(sent.is_empty(), "{sent:?}");
    assert_eq!(
        only_refusal(&others).map(|refusal| refusal.error),
        Some(ErrorCode::BadRequest)
    );
    let t = txn(API, 2);
    let request = b.request(t, OperationKind::Increment, 5, Some(&[(V, Some(delta))]));
    b.deliver(API, request);
    let (sent, _) = b.take();
    assert_eq!(shape(&sent), vec![(TABLE, OperationKind::Increment)]);
}

#[test]
fn a_delete_removes_the_hidden_row_and_a_write_of_a_missing_row_inserts_it() {
    let mut b = Bench::new();
    let t = txn(API, 1);
    let request = b.request(t, OperationKind::Delete, 5, None);
    b.deliver(API, request);
    let (sent, _) = b.take();
    assert_eq!(sent[0].kind, OperationKind::Read);
    let old: &[u8] = b"ada@x";
    b.prepared(&sent[0], Some(&[(EMAIL, Some(old))]));
    let (then, _) = b.take();
    assert_eq!(
        shape(&then),
        vec![
            (TABLE, OperationKind::Delete),
            (HIDDEN, OperationKind::Delete)
        ]
    );
    assert_eq!(then[1].key, vec![(0, text("ada@x"))]);

    // A write whose row is not there: the read finds nothing, the write
    // goes as an insert, alone; prepared, the hidden row follows.
    let t = txn(API, 2);
    let email: &[u8] = b"eve@x";
    let request = b.request(t, OperationKind::Write, 6, Some(&[(EMAIL, Some(email))]));
    b.deliver(API, request);
    let (sent, _) = b.take();
    assert_eq!(sent[0].kind, OperationKind::Read);
    b.refused(&sent[0], ErrorCode::NoSuchRow);
    let (insert, _) = b.take();
    assert_eq!(shape(&insert), vec![(TABLE, OperationKind::Insert)]);
    b.prepared(&insert[0], None);
    let (hidden, others) = b.take();
    assert!(others.is_empty(), "{others:?}");
    assert_eq!(shape(&hidden), vec![(HIDDEN, OperationKind::Insert)]);
    assert_eq!(hidden[0].key, vec![(0, text("eve@x"))]);
    b.prepared(&hidden[0], None);
    batch_answered(&b.take().1, t);
}

#[test]
fn a_write_whose_row_another_transaction_inserted_meanwhile_updates_it() {
    let mut b = Bench::new();
    let t = txn(API, 1);
    let email: &[u8] = b"eve@x";
    let request = b.request(t, OperationKind::Write, 6, Some(&[(EMAIL, Some(email))]));
    b.deliver(API, request);
    let (sent, _) = b.take();
    b.refused(&sent[0], ErrorCode::NoSuchRow);
    let (insert, _) = b.take();
    // The row is there by now: the insert is refused at the primary...
    b.refused(&insert[0], ErrorCode::DuplicateKey);
    // ... and the write reads the row again, then updates it.
    let (again, others) = b.take();
    assert!(others.is_empty(), "no abort: {others:?}");
    assert_eq!(shape(&again), vec![(TABLE, OperationKind::Read)]);
    let old: &[u8] = b"old@x";
    b.prepared(&again[0], Some(&[(EMAIL, Some(old))]));
    let (then, _) = b.take();
    assert_eq!(shape(&then), MOVED.to_vec());
    for sent in &then {
        b.prepared(sent, None);
    }
    batch_answered(&b.take().1, t);
}

#[test]
fn a_delete_of_a_row_that_is_not_there_fails_as_without_an_index() {
    let mut b = Bench::new();
    let t = txn(API, 1);
    let request = b.request(t, OperationKind::Delete, 5, None);
    b.deliver(API, request);
    let (sent, _) = b.take();
    b.refused(&sent[0], ErrorCode::NoSuchRow);
    let (more, others) = b.take();
    assert!(more.is_empty());
    assert_eq!(
        only_refusal(&others),
        Some(&TcKeyRef {
            transaction_id: t,
            client_op: 0,
            error: ErrorCode::NoSuchRow,
            index_id: 0,
        })
    );
    assert_eq!(b.tc.transactions_in_use(), 0);
}

#[test]
fn clients_may_read_a_hidden_table_but_never_write_it() {
    let mut b = Bench::new();
    let t = txn(API, 1);
    let email: &[u8] = b"ada@x";
    let mut read = b.request(t, OperationKind::Read, 0, None);
    read.table_id = HIDDEN;
    read.table_version = HIDDEN_VERSION;
    read.key = b.section(&[(0, Some(email))]);
    read.flags |= COMMIT;
    b.deliver(API, read);
    let (sent, _) = b.take();
    assert_eq!(
        (sent[0].table_id, sent[0].kind),
        (HIDDEN, OperationKind::Read)
    );
    b.refused(&sent[0], ErrorCode::NoSuchRow);
    b.take();

    let t = txn(API, 2);
    let mut insert = b.request(
        t,
        OperationKind::Insert,
        0,
        Some(&[(1, Some(&5i32.to_le_bytes()))]),
    );
    insert.table_id = HIDDEN;
    insert.table_version = HIDDEN_VERSION;
    insert.key = b.section(&[(0, Some(email))]);
    b.deliver(API, insert);
    let (sent, others) = b.take();
    assert!(sent.is_empty());
    assert_eq!(
        only_refusal(&others),
        Some(&TcKeyRef {
            transaction_id: t,
            client_op: 0,
            error: ErrorCode::BadRequest,
            index_id: 0,
        })
    );
    assert_eq!(b.tc.transactions_in_use(), 0);
    let _ = (TC, NODE);
}

#[test]
fn a_drop_takes_the_hidden_table_with_it_and_a_take_over_hears_only_the_base() {
    let mut b = Bench::new();
    assert_eq!(b.tc.table_versions(), vec![(TABLE, VERSION, INDEX)]);
    b.deliver(DICT, DropTabOrd { table_id: TABLE });
    b.take();
    assert!(b.tc.tables.iter().all(Option::is_none));
}

#[test]
fn a_revision_without_the_unique_index_stops_keeping_it_and_one_with_it_starts_again() {
    let mut b = Bench::new();
    let with = Arc::new(table());
    let without = Arc::new(TableDef {
        indexes: Vec::new(),
        revision: INDEX + 1,
        ..table()
    });
    b.deliver(
        DICT,
        TcAlterTabReq {
            building: 0,
            table: without,
        },
    );
    let (_, others) = b.take();
    let answered = |others: &[Signal], table_id, revision| {
        matches!(others, [Signal::AlterTabRep(report)]
            if *report == AlterTabRep { table_id, revision })
    };
    assert!(answered(&others, TABLE, INDEX + 1), "{others:?}");
    assert_eq!(b.tc.table_versions(), vec![(TABLE, VERSION, INDEX + 1)]);
    assert!(b.tc.tables[HIDDEN as usize].is_none(), "its route is gone");
    // A write is sent as it is; a read of the hidden table is refused.
    let email: &[u8] = b"ada@x";
    let insert = b.request(
        txn(API, 1),
        OperationKind::Insert,
        5,
        Some(&[(EMAIL, Some(email))]),
    );
    b.deliver(API, insert);
    let (sent, _) = b.take();
    assert_eq!(shape(&sent), [(TABLE, OperationKind::Insert)]);
    let t = txn(API, 2);
    b.deliver(API, through_index(&b, t, email, LockMode::Shared, 0));
    let refusal = only_refusal(&b.take().1).expect("refused").error;
    assert_eq!(refusal, ErrorCode::UnknownTable);
    // Back (a take-over rolling the drop back, say): kept again.
    let back = Arc::new(TableDef {
        revision: INDEX + 2,
        ..TableDef::clone(&with)
    });
    b.deliver(
        DICT,
        TcAlterTabReq {
            building: 0,
            table: back,
        },
    );
    b.take();
    let insert = b.request(
        txn(API, 3),
        OperationKind::Insert,
        6,
        Some(&[(EMAIL, Some(b"bob@x".as_slice()))]),
    );
    b.deliver(API, insert);
    let (sent, _) = b.take();
    assert_eq!(
        shape(&sent),
        [
            (TABLE, OperationKind::Insert),
            (HIDDEN, OperationKind::Insert)
        ]
    );
    // A revision of a table the tc does not hold is answered all the same.
    let other = Arc::new(TableDef { id: 40, ..table() });
    b.deliver(
        DICT,
        TcAlterTabReq {
            building: 0,
            table: other,
        },
    );
    let (_, others) = b.take();
    assert!(answered(&others, 40, INDEX), "{others:?}");
}

#[test]
fn a_later_operation_on_the_same_row_waits_for_the_before_image_write() {
    let mut b = Bench::new();
    let t = txn(API, 1);
    let (y, z): (&[u8], &[u8]) = (b"y@x", b"z@x");
    let mut first = b.request(t, OperationKind::Update, 5, Some(&[(EMAIL, Some(y))]));
    first.flags = START;
    b.deliver(API, first);
    // Another row's read goes at once; the same row's update and read
    // wait, in order.
    let mut other = b.request(t, OperationKind::Read, 6, None);
    other.flags = 0;
    b.deliver(API, other);
    let mut second = b.request(t, OperationKind::Update, 5, Some(&[(EMAIL, Some(z))]));
    second.flags = 0;
    b.deliver(API, second);
    let mut read = b.request(t, OperationKind::Read, 5, None);
    read.flags = EXECUTE;
    b.deliver(API, read);
    let (sent, _) = b.take();
    let kinds_and_keys: Vec<_> = sent.iter().map(|s| (s.kind, s.key.clone())).collect();
    assert_eq!(
        kinds_and_keys,
        vec![
            (OperationKind::Read, vec![(0, int(5))]),
            (OperationKind::Read, vec![(0, int(6))])
        ],
        "the before-image, then the other row's read"
    );
    let old: &[u8] = b"x@x";
    b.prepared(&sent[0], Some(&[(EMAIL, Some(old))]));
    // The first write with its hidden rows, then the second update's
    // before-image read (sent after the first write, so the ldm answers
    // it with the first write's value, played here): the read of row 5
    // still waits behind it.
    let (then, _) = b.take();
    assert_eq!(
        shape(&then),
        [&MOVED[..], &[(TABLE, OperationKind::Read)]].concat()
    );
    b.prepared(&then[3], Some(&[(EMAIL, Some(y))]));
    let (last, _) = b.take();
    assert_eq!(
        shape(&last),
        [&MOVED[..], &[(TABLE, OperationKind::Read)]].concat(),
        "the second write moves y to z, then the waiting read goes"
    );
    assert_eq!(last[1].key, vec![(0, text("y@x"))]);
    assert_eq!(last[2].key, vec![(0, text("z@x"))]);
    for sent in then[..3].iter().chain(&last).chain(&sent[1..]) {
        b.prepared(sent, None);
    }
    let (_, others) = b.take();
    assert!(
        matches!(
            &others[..],
            [Signal::TcKeyConf(TcKeyConf { operations: 4, .. })]
        ),
        "the client's four operations answered once: {others:?}"
    );
}

#[test]
fn an_abort_drops_the_operations_waiting_for_a_before_image() {
    let mut b = Bench::new();
    let t = txn(API, 1);
    let mut delete = b.request(t, OperationKind::Delete, 5, None);
    delete.flags = START;
    b.deliver(API, delete);
    let email: &[u8] = b"a@x";
    let mut insert = b.request(t, OperationKind::Insert, 5, Some(&[(EMAIL, Some(email))]));
    insert.flags = EXECUTE;
    b.deliver(API, insert);
    let (sent, _) = b.take();
    assert_eq!(sent.len(), 1, "the insert waits for the delete: {sent:?}");
    b.refused(&sent[0], ErrorCode::NoSuchRow);
    let (more, others) = b.take();
    assert!(more.is_empty(), "the waiting insert was dropped: {more:?}");
    assert!(only_refusal(&others).is_some_and(|r| r.error == ErrorCode::NoSuchRow));
    assert_eq!(b.tc.transactions_in_use(), 0);
    assert_eq!(b.tc.records.operations_in_use, 0);
}

#[test]
fn a_unique_index_of_primary_key_columns_leaves_other_updates_alone() {
    let mut b = Bench::new();
    // The table again, its unique index on the key column.
    let mut table = table();
    table.indexes[0].columns = vec![0];
    let map = Arc::new(partition_map(&table));
    b.deliver(DICT, DropTabOrd { table_id: TABLE });
    b.deliver(
        DICT,
        TcAddTabReq {
            table: Arc::new(table),
            map,
        },
    );
    b.take();
    let t = txn(API, 1);
    let v: &[u8] = &3i32.to_le_bytes();
    let request = b.request(t, OperationKind::Update, 5, Some(&[(V, Some(v))]));
    b.deliver(API, request);
    let (sent, _) = b.take();
    assert_eq!(shape(&sent), vec![(TABLE, OperationKind::Update)]);
}

#[test]
fn a_waiting_operation_that_commits_the_batch_commits_it() {
    let mut b = Bench::new();
    let t = txn(API, 1);
    let (y, z): (&[u8], &[u8]) = (b"y@x", b"z@x");
    let mut first = b.request(t, OperationKind::Update, 5, Some(&[(EMAIL, Some(y))]));
    first.flags = START;
    b.deliver(API, first);
    let mut last = b.request(t, OperationKind::Update, 5, Some(&[(EMAIL, Some(z))]));
    last.flags = COMMIT;
    b.deliver(API, last);
    let (read, _) = b.take();
    assert_eq!(shape(&read), vec![(TABLE, OperationKind::Read)]);
    let old: &[u8] = b"x@x";
    b.prepared(&read[0], Some(&[(EMAIL, Some(old))]));
    let (then, _) = b.take();
    b.prepared(&then[3], Some(&[(EMAIL, Some(y))]));
    let (last, _) = b.take();
    assert_eq!(shape(&last), MOVED.to_vec());
    for sent in then[..3].iter().chain(&last) {
        b.prepared(sent, None);
    }
    // Every operation prepared: the commit goes to all eight (the two
    // before-images' locks too).
    let (_, others) = b.take();
    assert_eq!(commits(&others), 8, "{others:?}");
}

#[test]
fn an_operation_waits_behind_the_insert_a_write_of_a_missing_row_became() {
    let mut b = Bench::new();
    let t = txn(API, 1);
    let email: &[u8] = b"eve@x";
    let mut write = b.request(t, OperationKind::Write, 6, Some(&[(EMAIL, Some(email))]));
    write.flags = START;
    b.deliver(API, write);
    let mut read = b.request(t, OperationKind::Read, 6, None);
    read.flags = EXECUTE;
    b.deliver(API, read);
    let (sent, _) = b.take();
    assert_eq!(
        shape(&sent),
        vec![(TABLE, OperationKind::Read)],
        "the read waits"
    );
    b.refused(&sent[0], ErrorCode::NoSuchRow);
    let (insert, _) = b.take();
    assert_eq!(
        shape(&insert),
        vec![(TABLE, OperationKind::Insert)],
        "still waits"
    );
    b.prepared(&insert[0], None);
    let (then, _) = b.take();
    assert_eq!(
        shape(&then),
        vec![
            (HIDDEN, OperationKind::Insert),
            (TABLE, OperationKind::Read)
        ],
        "the hidden row, then the read that waited"
    );
}

/// A read through the unique index as the client sends it: the hidden
/// table named, the key the index's values.
fn through_index(b: &Bench, t: TransactionId, email: &[u8], lock: LockMode, flags: u8) -> TcKeyReq {
    let mut read = b.request(t, OperationKind::Read, 0, None);
    read.table_id = HIDDEN;
    read.table_version = HIDDEN_VERSION;
    read.key = b.section(&[(0, Some(email))]);
    read.lock = lock;
    read.flags = START | EXECUTE | tc_key_flags::THROUGH_UNIQUE_INDEX | flags;
    read
}

#[test]
fn a_read_through_the_unique_index_reads_the_hidden_row_then_the_row() {
    let mut b = Bench::new();
    let t = txn(API, 1);
    let email: &[u8] = b"ada@x";
    b.deliver(API, through_index(&b, t, email, LockMode::Shared, 0));
    let (sent, _) = b.take();
    assert_eq!(shape(&sent), vec![(HIDDEN, OperationKind::Read)]);
    assert_eq!(sent[0].lock, LockMode::Shared);
    assert_eq!(
        sent[0].raw_attr,
        Some(1u16.to_le_bytes().to_vec()),
        "the key column"
    );
    b.prepared(&sent[0], Some(&[(1, Some(&5i32.to_le_bytes()))]));
    let (row, _) = b.take();
    assert_eq!(shape(&row), vec![(TABLE, OperationKind::Read)]);
    assert_eq!(
        (row[0].key.clone(), row[0].lock),
        (vec![(0, int(5))], LockMode::Shared)
    );
    let five: &[u8] = &5i32.to_le_bytes();
    b.prepared(&row[0], Some(&[(0, Some(five)), (EMAIL, Some(email))]));
    let (_, others) = b.take();
    assert!(
        matches!(
            &others[..],
            [Signal::TransIdAi(row), Signal::TcKeyConf(TcKeyConf { operations: 1, .. })]
                if row.client_op == 0
        ),
        "the row, then the batch's one operation: {others:?}"
    );
}

#[test]
fn a_read_through_the_unique_index_of_no_row_answers_none_or_fails() {
    let mut b = Bench::new();
    let email: &[u8] = b"nobody@x";
    // Asked to tolerate it: no row, the transaction goes on.
    let t = txn(API, 1);
    let read = through_index(
        &b,
        t,
        email,
        LockMode::CommittedRead,
        tc_key_flags::IGNORE_MISSING,
    );
    b.deliver(API, read);
    let (sent, _) = b.take();
    b.refused(&sent[0], ErrorCode::NoSuchRow);
    batch_answered(&b.take().1, t);
    // Not asked to: NoSuchRow, as a key read of a missing row.
    let t = txn(API, 2);
    b.deliver(API, through_index(&b, t, email, LockMode::CommittedRead, 0));
    let (sent, _) = b.take();
    b.refused(&sent[0], ErrorCode::NoSuchRow);
    let (_, others) = b.take();
    assert!(only_refusal(&others).is_some_and(|r| r.error == ErrorCode::NoSuchRow));
}

#[test]
fn a_committed_read_through_the_index_of_a_row_that_moved_answers_none() {
    let mut b = Bench::new();
    let t = txn(API, 1);
    let email: &[u8] = b"ada@x";
    let read = through_index(
        &b,
        t,
        email,
        LockMode::CommittedRead,
        tc_key_flags::IGNORE_MISSING,
    );
    b.deliver(API, read);
    let (sent, _) = b.take();
    b.prepared(&sent[0], Some(&[(1, Some(&5i32.to_le_bytes()))]));
    let (row, _) = b.take();
    // The row holds another email by the time it is read.
    let moved: &[u8] = b"bob@x";
    b.prepared(
        &row[0],
        Some(&[(0, Some(&5i32.to_le_bytes())), (EMAIL, Some(moved))]),
    );
    batch_answered(&b.take().1, t);
}

#[test]
fn only_a_read_of_a_hidden_table_goes_through_an_index() {
    let mut b = Bench::new();
    let t = txn(API, 1);
    let mut read = b.request(t, OperationKind::Read, 5, None);
    read.flags |= tc_key_flags::THROUGH_UNIQUE_INDEX;
    b.deliver(API, read);
    let (sent, others) = b.take();
    assert!(sent.is_empty());
    assert!(only_refusal(&others).is_some_and(|r| r.error == ErrorCode::BadRequest));
}

#[test]
fn a_table_dropped_between_a_lookups_two_reads_aborts_it() {
    let mut b = Bench::new();
    let t = txn(API, 1);
    let email: &[u8] = b"ada@x";
    b.deliver(API, through_index(&b, t, email, LockMode::Shared, 0));
    let (sent, _) = b.take();
    // The drop reaches the tc first (it drops routes at once), the ldm's
    // answer after.
    b.deliver(DICT, DropTabOrd { table_id: TABLE });
    b.take();
    b.prepared(&sent[0], Some(&[(1, Some(&5i32.to_le_bytes()))]));
    let (more, others) = b.take();
    assert!(more.is_empty(), "{more:?}");
    assert!(
        others
            .iter()
            .any(|signal| matches!(signal, Signal::AbortReq(_))),
        "the hidden read's lock released: {others:?}"
    );
    b.deliver(
        sent[0].ldm,
        AbortConf {
            tc_op: sent[0].tc_op,
        },
    );
    let (_, others) = b.take();
    assert!(only_refusal(&others).is_some_and(|r| r.error == ErrorCode::UnknownTable));
}

#[test]
fn a_table_dropped_between_a_before_image_and_its_write_aborts_it() {
    let mut b = Bench::new();
    let t = txn(API, 1);
    let new: &[u8] = b"bob@x";
    let request = b.request(t, OperationKind::Update, 5, Some(&[(EMAIL, Some(new))]));
    b.deliver(API, request);
    let (sent, _) = b.take();
    b.deliver(DICT, DropTabOrd { table_id: TABLE });
    b.take();
    let old: &[u8] = b"ada@x";
    b.prepared(&sent[0], Some(&[(EMAIL, Some(old))]));
    let (more, others) = b.take();
    assert!(more.is_empty(), "{more:?}");
    b.deliver(
        sent[0].ldm,
        AbortConf {
            tc_op: sent[0].tc_op,
        },
    );
    let (_, after) = b.take();
    let refusal = only_refusal(&after).or_else(|| only_refusal(&others));
    assert!(
        refusal.is_some_and(|r| r.error == ErrorCode::UnknownTable),
        "{others:?} {after:?}"
    );
}

/// The table at the next revision, its unique index being built.
fn building(b: &mut Bench) -> Vec<Signal> {
    let table = Arc::new(TableDef {
        revision: INDEX + 1,
        ..table()
    });
    b.deliver(
        DICT,
        TcAlterTabReq {
            building: INDEX,
            table,
        },
    );
    b.take().1
}

fn switched(others: &[Signal]) -> bool {
    matches!(others, [Signal::AlterTabRep(report)]
        if *report == AlterTabRep { table_id: TABLE, revision: INDEX + 1 })
}

#[test]
fn while_a_unique_index_is_built_a_delete_removes_only_a_hidden_row_naming_its_row() {
    let mut b = Bench::new();
    assert!(switched(&building(&mut b)), "nothing ran before: at once");
    // (k, its email, what its hidden row names: None no hidden row).
    let cases: [(i32, &[u8], Option<i32>); 3] = [
        (5, b"ada@x", Some(5)),
        (6, b"bob@x", None),
        (7, b"cat@x", Some(8)),
    ];
    for (n, (k, email, named)) in cases.into_iter().enumerate() {
        let t = txn(API, 1 + n as u64);
        let request = b.request(t, OperationKind::Delete, k, None);
        b.deliver(API, request);
        let (read, _) = b.take();
        b.prepared(&read[0], Some(&[(EMAIL, Some(email))]));
        // The delete, and an exclusive read of the hidden row first.
        let (sent, others) = b.take();
        assert!(others.is_empty(), "{others:?}");
        assert_eq!(
            shape(&sent),
            [
                (TABLE, OperationKind::Delete),
                (HIDDEN, OperationKind::Read)
            ]
        );
        assert_eq!(sent[1].lock, LockMode::Exclusive);
        assert_eq!(sent[1].key, vec![(0, Some(email.to_vec()))]);
        b.prepared(&sent[0], None);
        match named {
            Some(holder) => b.prepared(&sent[1], Some(&[(1, int(holder).as_deref())])),
            None => b.refused(&sent[1], ErrorCode::NoSuchRow),
        }
        let (then, others) = b.take();
        if named == Some(k) {
            // It names the row: deleted.
            assert_eq!(shape(&then), [(HIDDEN, OperationKind::Delete)]);
            assert!(others.is_empty());
            b.prepared(&then[0], None);
            batch_answered(&b.take().1, t);
        } else {
            // Not built yet, or another row's (a repeat the build will
            // find): left alone.
            assert!(then.is_empty(), "k {k}: {then:?}");
            batch_answered(&others, t);
        }
    }
}

#[test]
fn a_switch_to_a_building_unique_index_waits_for_the_transactions_from_before_it() {
    let mut b = Bench::new();
    // A transaction from before: an insert, prepared, not committed.
    let early = txn(API, 1);
    let request = b.request(
        early,
        OperationKind::Insert,
        5,
        Some(&[(EMAIL, Some(b"ada@x".as_slice()))]),
    );
    b.deliver(API, request);
    let (sent, _) = b.take();
    for sent in &sent {
        b.prepared(sent, None);
    }
    batch_answered(&b.take().1, early);
    assert!(building(&mut b).is_empty(), "waits for the insert's end");
    // One that begins after the switch does not hold it back.
    let late = txn(API, 2);
    let request = b.request(late, OperationKind::Read, 9, None);
    b.deliver(API, request);
    b.take();
    let scan = || ContinueB {
        job: crate::TIMEOUT_SCAN_JOB,
    };
    b.deliver(TC, scan());
    let (_, others) = b.take();
    assert!(!others
        .iter()
        .any(|signal| matches!(signal, Signal::AlterTabRep(_))));
    // The early one ends: the next timeout scan answers.
    b.deliver(
        API,
        TcRollbackReq {
            transaction_id: early,
        },
    );
    let (_, others) = b.take();
    let aborts: Vec<(BlockRef, u32)> = others
        .iter()
        .filter_map(|signal| match signal {
            Signal::AbortReq(abort) => Some(abort.tc_op),
            _ => None,
        })
        .zip(&sent)
        .map(|(tc_op, sent)| (sent.ldm, tc_op))
        .collect();
    assert_eq!(aborts.len(), 2, "{others:?}");
    for (ldm, tc_op) in aborts {
        b.deliver(ldm, AbortConf { tc_op });
    }
    b.take();
    b.deliver(TC, scan());
    let (_, others) = b.take();
    assert!(
        others.iter().any(
            |signal| matches!(signal, Signal::AlterTabRep(report) if report.revision == INDEX + 1)
        ),
        "{others:?}"
    );
}
