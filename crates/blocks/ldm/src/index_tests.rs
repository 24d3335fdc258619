//! Secondary ordered indexes at one ldm (docs/design/0023-secondary-indexes.md):
//! kept equal to the live rows through inserts, updates that change the
//! indexed columns or not, deletes, aborts and several writes of a row in
//! one transaction, and scanned through SCAN_REQ in index order. Every
//! step ends with `assert_quiet`, which checks every index against the
//! rows.

use crate::tests::*;
use kernel::Context;
use signal::attr::AttrIter;
use signal::replica_check::decode_scan_batch;
use signal::scan_bounds::{self, ScanBounds};
use signal::scan_program::ProgramWriter;
use signal::schema::{IndexDef, TableDef};
use signal::signals::{scan_flags, LockMode, OperationKind, ScanReq};
use signal::{BlockKind, BlockRef, ErrorCode, NodeId, Signal, TransactionId};
use std::collections::BTreeMap;
use stdx::mix::XorShift;

pub(crate) const API: BlockRef = BlockRef::new(NodeId(200), BlockKind::Api, 0);
/// Index 1 over v; index 2 over (s, v), s NULL-able.
pub(crate) const BY_V: u32 = 1;
pub(crate) const BY_S_V: u32 = 2;

pub(crate) fn indexed_table() -> TableDef {
    let mut table = table();
    table.indexes = vec![
        IndexDef {
            id: BY_V,
            name: "by_v".into(),
            columns: vec![V],
            unique: None,
        },
        IndexDef {
            id: BY_S_V,
            name: "by_s_v".into(),
            columns: vec![S, V],
            unique: None,
        },
    ];
    table.validate().expect("valid");
    table
}

fn bench() -> Bench {
    Bench::build_with(16 * MIB, 1, LDM, indexed_table())
}

/// The model: k -> (v, s).
pub(crate) type Model = BTreeMap<i32, (i64, Option<Vec<u8>>)>;

/// The keys of partition `partition` through index `index`, whole, in
/// index order (several batches).
pub(crate) fn scan_index(b: &mut Bench, partition: u32, index: u32) -> Vec<i32> {
    scan_keys(b, API, partition, index, TransactionId(0), false)
}

/// The keys `from` reads from partition `partition` through index `index`
/// (or in row order, `scan_flags::ROW_ORDER`), whole, in the walk's order,
/// three rows a batch, seeing the own writes of `seen_as` (0: none).
pub(crate) fn scan_keys(
    b: &mut Bench,
    from: BlockRef,
    partition: u32,
    index: u32,
    seen_as: TransactionId,
    descending: bool,
) -> Vec<i32> {
    let mut keys = Vec::new();
    let mut resume: Option<(Vec<u8>, u32)> = None;
    loop {
        let mut bounds = Vec::new();
        let resume_key = resume.as_ref().map_or(&[][..], |(key, _)| key);
        scan_bounds::encode(
            ScanBounds {
                low: &[],
                high: &[],
                resume: resume_key,
            },
            &mut bounds,
        )
        .unwrap();
        if index == scan_flags::ROW_ORDER {
            // A full scan has no bounds.
            bounds.clear();
        }
        let mut flags = if resume.is_some() {
            scan_flags::RESUME
        } else {
            0
        };
        if descending {
            flags |= scan_flags::DESCENDING;
        }
        let signal = ScanReq {
            request_id: 1,
            table_id: TABLE_ID,
            table_version: b.table.version,
            partition,
            index,
            flags,
            max_rows: 3,
            max_bytes: 0,
            resume_row: resume.as_ref().map_or(0, |&(_, row)| row),
            transaction_id: seen_as,
            bounds: b.ctx.pool().copy_from(&bounds).unwrap(),
            program: b
                .ctx
                .pool()
                .copy_from(&ProgramWriter::new(&[K]).finish().unwrap())
                .unwrap(),
        };
        b.deliver(from, signal);
        let sent = b.ctx.sent.pop().expect("an answer");
        let Signal::ScanConf(conf) = sent.envelope.signal else {
            panic!("a scan batch, got {:?}", sent.envelope.signal)
        };
        for row in decode_scan_batch(conf.rows.as_slice()).unwrap() {
            let entry = AttrIter::new(&row.values).next().unwrap().unwrap();
            keys.push(i32::from_le_bytes(entry.value.unwrap().try_into().unwrap()));
        }
        if conf.done {
            return keys;
        }
        if index == scan_flags::ROW_ORDER {
            resume = Some((Vec::new(), conf.resume_row));
        } else {
            resume = Some((conf.resume_key.as_slice().to_vec(), conf.resume_row));
        }
    }
}

/// What each index must hold for `partition`: keys ordered by (v, row id)
/// and by (s with NULL first and PAD SPACE, v, row id); row ids break
/// ties, so the model orders ties by the row ids the bench reports.
pub(crate) fn expected(b: &Bench, model: &Model, partition: u32, index: u32) -> Vec<i32> {
    let mut rows: Vec<(i32, i64, Option<Vec<u8>>, u32)> = model
        .iter()
        .filter(|(k, _)| b.route(**k).0 == partition)
        .map(|(k, (v, s))| {
            let trimmed = s.as_ref().map(|s| {
                let end = s.iter().rposition(|&c| c != b' ').map_or(0, |at| at + 1);
                s[..end].to_vec()
            });
            (*k, *v, trimmed, b.row_id(*k).expect("a live row"))
        })
        .collect();
    if index == 0 {
        rows.sort_by_key(|(k, ..)| *k);
    } else if index == BY_V {
        rows.sort_by_key(|(_, v, _, row)| (*v, *row));
    } else {
        rows.sort_by(|a, b| (&a.2, a.1, a.3).cmp(&(&b.2, b.1, b.3)));
    }
    rows.into_iter().map(|(k, ..)| k).collect()
}

pub(crate) fn check(b: &mut Bench, model: &Model, what: &str) {
    for partition in 0..2 {
        for index in [BY_V, BY_S_V] {
            assert_eq!(
                scan_index(b, partition, index),
                expected(b, model, partition, index),
                "{what}: partition {partition} index {index}"
            );
        }
    }
    b.assert_quiet();
}

#[test]
fn secondary_indexes_follow_inserts_updates_deletes_and_aborts() {
    let mut b = bench();
    let mut model = Model::new();
    let mut random = XorShift::new(5);
    let mut t = 1;
    for step in 0..400 {
        let k = random.below(40) as i32;
        let v = random.below(6) as i64 - 3;
        let s: Option<Vec<u8>> = match random.below(4) {
            0 => None,
            n => Some(vec![b'a' + n as u8; (n % 3) as usize + 1]),
        };
        let v_bytes = v.to_le_bytes();
        t += 1;
        let transaction = txn(t);
        let present = model.contains_key(&k);
        match random.below(6) {
            // Insert or full update.
            0 | 1 => {
                let attr = [(V, Some(&v_bytes[..])), (S, s.as_deref())];
                let kind = if present {
                    OperationKind::Update
                } else {
                    OperationKind::Insert
                };
                let (op, _) = b.prepare(transaction, kind, LockMode::Exclusive, k, Some(&attr));
                if random.below(5) == 0 {
                    b.abort(transaction, op.tc_op);
                } else {
                    b.commit_all(&[op], gci(3));
                    model.insert(k, (v, s));
                }
            }
            // An update of v only (index 1 and 2 move) or of b only (no
            // index moves).
            2 if present => {
                let only_b = random.below(2) == 0;
                let b_value = [7u8; 3];
                let attr: Vec<(u16, Option<&[u8]>)> = if only_b {
                    vec![(B, Some(&b_value[..]))]
                } else {
                    vec![(V, Some(&v_bytes[..]))]
                };
                let (op, _) = b.prepare(
                    transaction,
                    OperationKind::Update,
                    LockMode::Exclusive,
                    k,
                    Some(&attr),
                );
                b.commit_all(&[op], gci(3));
                if !only_b {
                    model.get_mut(&k).unwrap().0 = v;
                }
            }
            // Two updates of the row in one transaction, the second
            // moving it again.
            3 if present => {
                let first = (v + 1).to_le_bytes();
                let attr1 = [(V, Some(&first[..]))];
                let attr2 = [(V, Some(&v_bytes[..])), (S, s.as_deref())];
                let (op1, _) = b.prepare(
                    transaction,
                    OperationKind::Update,
                    LockMode::Exclusive,
                    k,
                    Some(&attr1),
                );
                let (op2, _) = b.prepare(
                    transaction,
                    OperationKind::Update,
                    LockMode::Exclusive,
                    k,
                    Some(&attr2),
                );
                if step % 2 == 0 {
                    b.commit_all(&[op1, op2], gci(3));
                    model.insert(k, (v, s));
                } else {
                    b.abort(transaction, op1.tc_op);
                    b.abort(transaction, op2.tc_op);
                }
            }
            // Delete, then maybe insert again in the same transaction.
            4 | 5 if present => {
                let (op1, _) = b.prepare(
                    transaction,
                    OperationKind::Delete,
                    LockMode::Exclusive,
                    k,
                    None,
                );
                if random.below(2) == 0 {
                    let attr = [(V, Some(&v_bytes[..])), (S, s.as_deref())];
                    let (op2, _) = b.prepare(
                        transaction,
                        OperationKind::Insert,
                        LockMode::Exclusive,
                        k,
                        Some(&attr),
                    );
                    b.commit_all(&[op1, op2], gci(3));
                    model.insert(k, (v, s));
                } else {
                    b.commit_all(&[op1], gci(3));
                    model.remove(&k);
                }
            }
            _ => continue,
        }
        if step % 10 == 0 {
            check(&mut b, &model, &format!("step {step}"));
        }
    }
    check(&mut b, &model, "the end");
}

/// Whether a scan of partition 0 through index `index` is refused with
/// UnknownIndex (an index the table lacks, or one still being built).
pub(crate) fn assert_unknown_index(b: &mut Bench, index: u32) {
    let signal = ScanReq {
        request_id: 1,
        table_id: TABLE_ID,
        table_version: b.table.version,
        partition: 0,
        index,
        flags: 0,
        max_rows: 3,
        max_bytes: 0,
        resume_row: 0,
        transaction_id: TransactionId(0),
        bounds: b.ctx.pool().copy_from(&[0, 0, 0, 0, 0, 0]).unwrap(),
        program: b
            .ctx
            .pool()
            .copy_from(&ProgramWriter::new(&[]).finish().unwrap())
            .unwrap(),
    };
    b.deliver(API, signal);
    match b.ctx.sent.pop().map(|sent| sent.envelope.signal) {
        Some(Signal::ScanRef(refusal)) => assert_eq!(refusal.error, ErrorCode::UnknownIndex),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_index_the_table_does_not_have_is_refused() {
    let mut b = bench();
    assert_unknown_index(&mut b, 3);
    b.assert_quiet();
}

/// Two updates of one row in one transaction whose COMMITs reach the
/// primary in the wrong order (possible when the replica chain changed
/// between them): the later image stays, the earlier installs nothing,
/// and its var slot and index promise are given back.
#[test]
fn a_later_write_committed_first_is_not_undone_by_an_earlier_one() {
    let mut b = bench();
    b.insert(1, 7, 1, Some(b"a"), None);
    let transaction = txn(2);
    let (first, second) = (10i64.to_le_bytes(), 20i64.to_le_bytes());
    let long = [b'x'; 30];
    let attr1 = [(V, Some(&first[..])), (S, Some(&long[..]))];
    let attr2 = [(V, Some(&second[..])), (S, Some(&b"b"[..]))];
    let (op1, _) = b.prepare(
        transaction,
        OperationKind::Update,
        LockMode::Exclusive,
        7,
        Some(&attr1),
    );
    let (op2, _) = b.prepare(
        transaction,
        OperationKind::Update,
        LockMode::Exclusive,
        7,
        Some(&attr2),
    );
    assert!(b.commit(op2, gci(3)).is_empty());
    assert!(b.commit(op1, gci(3)).is_empty());
    b.complete(op2);
    b.complete(op1);
    assert_eq!(b.read(7), Some(row(7, 20, Some(b"b"), None)));
    let mut model = Model::new();
    model.insert(7, (20, Some(b"b".to_vec())));
    check(&mut b, &model, "after the commits out of order");
}

/// The API node of the transactions `txn` makes.
const OWNER: BlockRef = BlockRef::new(NodeId(10), BlockKind::Api, 0);

/// A scan naming an open transaction sees its prepared writes (inserts,
/// updates in place and moving the row in an index, deletes, several
/// writes of one row) in every walk, forwards and backwards, resumed
/// every three rows, and not another open transaction's inserts; a scan
/// naming no transaction, or another one, sees only what is committed;
/// after an abort or a commit both agree.
#[test]
fn a_transactions_scans_see_its_own_prepared_writes() {
    let mut b = bench();
    let mut committed = Model::new();
    let mut random = XorShift::new(11);
    let mut t = 1;
    for round in 0..80 {
        t += 1;
        let transaction = txn(t);
        let mut own = committed.clone();
        let mut ops = Vec::new();
        // Another transaction's prepared inserts, of keys no one else
        // writes, which no scan here may show.
        let other = txn(t + (1 << 30));
        let other_ops: Vec<_> = (0..2)
            .map(|i| {
                let k = 1000 + round * 2 + i;
                let v = (i as i64).to_le_bytes();
                let attr = [(V, Some(&v[..])), (S, Some(&b"zz"[..]))];
                b.prepare(
                    other,
                    OperationKind::Insert,
                    LockMode::Exclusive,
                    k,
                    Some(&attr),
                )
                .0
            })
            .collect();
        for _ in 0..1 + random.below(6) {
            let k = random.below(24) as i32;
            let v = random.below(6) as i64 - 3;
            let v_bytes = v.to_le_bytes();
            let s: Option<Vec<u8>> = match random.below(4) {
                0 => None,
                n => Some(vec![b'a' + n as u8; (n % 3) as usize + 1]),
            };
            let moved = [(V, Some(&v_bytes[..])), (S, s.as_deref())];
            let b_value = [9u8; 2];
            let in_place = [(B, Some(&b_value[..]))];
            let (kind, attr): (OperationKind, Option<Entries<'_>>) =
                match (own.contains_key(&k), random.below(3)) {
                    (false, _) => (OperationKind::Insert, Some(&moved)),
                    (true, 0) => (OperationKind::Update, Some(&moved)),
                    (true, 1) => (OperationKind::Update, Some(&in_place)),
                    (true, _) => (OperationKind::Delete, None),
                };
            let (op, _) = b.prepare(transaction, kind, LockMode::Exclusive, k, attr);
            ops.push(op);
            match (kind, attr) {
                (OperationKind::Delete, _) => {
                    own.remove(&k);
                }
                (_, Some(attr)) if attr.len() == 2 => {
                    own.insert(k, (v, s));
                }
                _ => {}
            }
        }
        for partition in 0..2 {
            for index in [0, BY_V, BY_S_V] {
                for descending in [false, true] {
                    let what = format!(
                        "round {round}, partition {partition}, index {index}, descending {descending}"
                    );
                    let mut mine = expected(&b, &own, partition, index);
                    let mut theirs = expected(&b, &committed, partition, index);
                    if descending {
                        mine.reverse();
                        theirs.reverse();
                    }
                    let seen = scan_keys(&mut b, OWNER, partition, index, transaction, descending);
                    assert_eq!(seen, mine, "{what}: the transaction's own scan");
                    let seen = scan_keys(&mut b, OWNER, partition, index, txn(1 << 40), descending);
                    assert_eq!(seen, theirs, "{what}: another transaction's scan");
                    let seen =
                        scan_keys(&mut b, API, partition, index, TransactionId(0), descending);
                    assert_eq!(seen, theirs, "{what}: a scan of committed rows");
                }
            }
            let sorted = |mut keys: Vec<i32>| {
                keys.sort_unstable();
                keys
            };
            let in_partition = |b: &Bench, model: &Model| -> Vec<i32> {
                model
                    .keys()
                    .copied()
                    .filter(|&k| b.route(k).0 == partition)
                    .collect()
            };
            let seen = scan_keys(
                &mut b,
                OWNER,
                partition,
                scan_flags::ROW_ORDER,
                transaction,
                false,
            );
            assert_eq!(
                sorted(seen),
                in_partition(&b, &own),
                "round {round}: own full scan"
            );
            let seen = scan_keys(
                &mut b,
                API,
                partition,
                scan_flags::ROW_ORDER,
                TransactionId(0),
                false,
            );
            assert_eq!(
                sorted(seen),
                in_partition(&b, &committed),
                "round {round}: full scan"
            );
        }
        for op in other_ops.iter().rev() {
            b.abort(other, op.tc_op);
        }
        if random.below(4) == 0 {
            for op in ops.iter().rev() {
                b.abort(transaction, op.tc_op);
            }
        } else {
            b.commit_all(&ops, gci(3));
            committed = own;
        }
        check(&mut b, &committed, &format!("round {round}"));
    }
}

/// A scan naming a transaction of another API node is refused: one client
/// must not read another's uncommitted writes.
#[test]
fn a_scan_naming_another_api_nodes_transaction_is_refused() {
    let mut b = bench();
    let (op, _) = b.prepare(
        txn(2),
        OperationKind::Insert,
        LockMode::Exclusive,
        1,
        Some(&[(V, Some(&5i64.to_le_bytes()))]),
    );
    let signal = ScanReq {
        request_id: 1,
        table_id: TABLE_ID,
        table_version: b.table.version,
        partition: b.route(1).0,
        index: BY_V,
        flags: 0,
        max_rows: 10,
        max_bytes: 0,
        resume_row: 0,
        transaction_id: txn(2),
        bounds: b.ctx.pool().copy_from(&[0, 0, 0, 0, 0, 0]).unwrap(),
        program: b
            .ctx
            .pool()
            .copy_from(&ProgramWriter::new(&[K]).finish().unwrap())
            .unwrap(),
    };
    b.deliver(API, signal);
    let sent = b.ctx.sent.pop().expect("an answer");
    match sent.envelope.signal {
        Signal::ScanRef(refused) => assert_eq!(refused.error, ErrorCode::BadRequest),
        other => panic!("refused, got {other:?}"),
    }
    b.abort(txn(2), op.tc_op);
    b.assert_quiet();
}
