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
use signal::{BlockKind, BlockRef, ErrorCode, NodeId, Signal};
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
        let signal = ScanReq {
            request_id: 1,
            table_id: TABLE_ID,
            table_version: b.table.version,
            partition,
            index,
            flags: if resume.is_some() {
                scan_flags::RESUME
            } else {
                0
            },
            max_rows: 3,
            max_bytes: 0,
            resume_row: resume.as_ref().map_or(0, |&(_, row)| row),
            bounds: b.ctx.pool().copy_from(&bounds).unwrap(),
            program: b
                .ctx
                .pool()
                .copy_from(&ProgramWriter::new(&[K]).finish().unwrap())
                .unwrap(),
        };
        b.deliver(API, signal);
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
        resume = Some((conf.resume_key.as_slice().to_vec(), conf.resume_row));
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
    if index == BY_V {
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
