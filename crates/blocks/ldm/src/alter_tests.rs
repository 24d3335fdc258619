//! Index builds at one ldm (`alter.rs`): indexes added to a table that
//! holds rows, built a step at a time while rows are inserted, updated
//! and deleted between the steps, with writes prepared before the build
//! began committing during it; the build waits for those before it
//! answers, and then every index equals the rows (the model, the scans
//! and `check_ordered`). Also: a building index is not scanned, a change
//! rolled back mid-build drops it, DataMemory running out fails the build
//! cleanly, and a drop frees an index (a unique index's hidden table once
//! no operation uses it).

use crate::alter::job;
use crate::index_tests::{assert_unknown_index, check, indexed_table, Model, BY_V};
use crate::tests::*;
use kernel::testing::line;
use signal::attr::key_hash;
use signal::partition::bucket;
use signal::schema::{IndexDef, TableDef, UniqueTable};
use signal::signals::{
    AlterTabRef, AlterTabRep, ContinueB, LockMode, LqhAlterTabReq, OperationKind,
};
use signal::{ErrorCode, Signal};
use std::sync::Arc;
use stdx::mix::XorShift;

/// The test table at revision `revision` with the indexes `indexed_table`
/// has.
fn with_indexes(revision: u32) -> Arc<TableDef> {
    Arc::new(TableDef {
        revision,
        ..indexed_table()
    })
}

fn without_indexes(revision: u32) -> Arc<TableDef> {
    Arc::new(TableDef {
        revision,
        ..table()
    })
}

/// What the ldm sent after a signal: the build's next job (immediate or
/// delayed), its answer to dict, or nothing.
enum Next {
    Job,
    Answered(Signal),
}

fn next(b: &mut Bench) -> Next {
    let mut sent: Vec<_> = b.ctx.sent.drain(..).collect();
    assert_eq!(sent.len(), 1, "one signal after a build's step: {sent:?}");
    let sent = sent.pop().expect("one");
    match sent.envelope.signal {
        Signal::ContinueB(ContinueB { job: job::BUILD }) if sent.envelope.to == LDM => Next::Job,
        answer if sent.envelope.to == DICT => Next::Answered(answer),
        other => panic!("expected the build's job or its answer, got {other:?}"),
    }
}

fn step(b: &mut Bench) -> Next {
    b.deliver(LDM, ContinueB { job: job::BUILD });
    next(b)
}

fn insert_or_update(
    b: &mut Bench,
    model: &mut Model,
    t: u64,
    k: i32,
    v: i64,
    s: Option<Vec<u8>>,
) -> Op {
    let v_bytes = v.to_le_bytes();
    let attr = [(V, Some(&v_bytes[..])), (S, s.as_deref())];
    let kind = if model.contains_key(&k) {
        OperationKind::Update
    } else {
        OperationKind::Insert
    };
    let (op, _) = b.prepare(txn(t), kind, LockMode::Exclusive, k, Some(&attr));
    model.insert(k, (v, s));
    op
}

#[test]
fn an_index_built_under_writes_equals_the_rows() {
    let mut b = Bench::build_with(16 * MIB, 1, LDM, table());
    let mut model = Model::new();
    let mut random = XorShift::new(17);
    let mut t = 0;
    for k in 0..3_000 {
        t += 1;
        let s = (k % 5 != 0).then(|| vec![b'a' + (k % 7) as u8]);
        let op = insert_or_update(&mut b, &mut model, t, k, i64::from(k % 11), s);
        b.commit_all(&[op], gci(2));
    }
    // Prepared before the build begins: an insert and an update that
    // move the new indexes' keys, committed while it runs.
    t += 1;
    let early_insert = insert_or_update(&mut b, &mut model, t, 5_000, 4, None);
    t += 1;
    let early_update = insert_or_update(&mut b, &mut model, t, 7, -9, Some(b"zz".to_vec()));
    b.deliver(
        DICT,
        LqhAlterTabReq {
            table: with_indexes(2),
        },
    );
    assert!(matches!(next(&mut b), Next::Job));

    // A building index is not scanned (no client can know it yet).
    assert_unknown_index(&mut b, BY_V);

    let mut steps = 0;
    let mut early = Some((early_insert, early_update));
    let answer = loop {
        match step(&mut b) {
            Next::Answered(answer) => break answer,
            Next::Job => steps += 1,
        }
        // Writes between the steps: inserts, updates moving either index,
        // deletes.
        for _ in 0..3 {
            t += 1;
            let k = random.below(3_200) as i32;
            match random.below(4) {
                0 if model.contains_key(&k) => {
                    let (op, _) =
                        b.prepare(txn(t), OperationKind::Delete, LockMode::Exclusive, k, None);
                    b.commit_all(&[op], gci(3));
                    model.remove(&k);
                }
                _ => {
                    let s = (random.below(3) != 0).then(|| vec![b'a' + random.below(26) as u8]);
                    let v = random.below(20) as i64 - 10;
                    let op = insert_or_update(&mut b, &mut model, t, k, v, s);
                    b.commit_all(&[op], gci(3));
                }
            }
        }
        // Halfway, the operations from before the build commit.
        if steps == 20 {
            let (insert, update) = early.take().unwrap();
            b.commit_all(&[insert, update], gci(3));
        }
    };
    assert!(steps > 20, "the build took {steps} steps");
    assert!(
        early.is_none(),
        "answered only after the early writes ended"
    );
    assert_eq!(
        format!("{answer:?}"),
        format!(
            "{:?}",
            Signal::from(AlterTabRep {
                table_id: TABLE_ID,
                revision: 2
            })
        )
    );
    b.table = with_indexes(2);
    check(&mut b, &model, "built");

    // Dropped again: scans of it are refused, and its nodes are freed.
    let nodes_in_use = b.ldm.memory.index_nodes().in_use();
    b.deliver(
        DICT,
        LqhAlterTabReq {
            table: without_indexes(3),
        },
    );
    assert_eq!(
        b.trace(),
        [line(
            LDM,
            DICT,
            AlterTabRep {
                table_id: TABLE_ID,
                revision: 3
            }
        )]
    );
    assert!(b.ldm.memory.index_nodes().in_use() < nodes_in_use);
    b.assert_quiet();
}

#[test]
fn a_build_waits_for_the_writes_prepared_before_it() {
    let mut b = Bench::build_with(16 * MIB, 1, LDM, table());
    let mut model = Model::new();
    let op = insert_or_update(&mut b, &mut model, 1, 1, 1, None);
    b.deliver(
        DICT,
        LqhAlterTabReq {
            table: with_indexes(1),
        },
    );
    assert!(matches!(next(&mut b), Next::Job));
    // The walks end at once (no committed row), but the insert prepared
    // before the build promised no node for the new indexes: the build
    // looks again later, as long as it runs.
    let mut delayed = 0;
    while delayed < 3 {
        b.deliver(LDM, ContinueB { job: job::BUILD });
        let sent: Vec<_> = b.ctx.sent.drain(..).collect();
        assert!(
            matches!(&sent[..], [one] if one.envelope.to == LDM),
            "{sent:?}"
        );
        if sent[0].delay_ms.is_some() {
            delayed += 1;
        }
    }
    b.commit_all(&[op], gci(2));
    assert!(matches!(
        step(&mut b),
        Next::Answered(Signal::AlterTabRep(_))
    ));
    b.table = with_indexes(1);
    check(&mut b, &model, "built");
}

#[test]
fn a_change_rolled_back_mid_build_drops_the_building_index() {
    let mut b = Bench::build_with(16 * MIB, 1, LDM, table());
    let mut model = Model::new();
    for k in 0..2_000 {
        let op = insert_or_update(&mut b, &mut model, k as u64 + 1, k, 1, None);
        b.commit_all(&[op], gci(2));
    }
    b.deliver(
        DICT,
        LqhAlterTabReq {
            table: with_indexes(1),
        },
    );
    assert!(matches!(next(&mut b), Next::Job));
    assert!(matches!(step(&mut b), Next::Job));
    // The same revision again (a new master): answered once, when built.
    b.deliver(
        DICT,
        LqhAlterTabReq {
            table: with_indexes(1),
        },
    );
    assert!(b.ctx.sent.is_empty());
    // The previous revision (a take-over undoing it): dropped at once.
    b.deliver(
        DICT,
        LqhAlterTabReq {
            table: without_indexes(0),
        },
    );
    assert_eq!(
        b.trace(),
        [line(
            LDM,
            DICT,
            AlterTabRep {
                table_id: TABLE_ID,
                revision: 0
            }
        )]
    );
    // The job still queued finds nothing to build.
    b.deliver(LDM, ContinueB { job: job::BUILD });
    assert!(b.ctx.sent.is_empty());
    assert!(
        b.ldm.tables[TABLE_ID as usize].as_ref().unwrap().partitions[0]
            .as_ref()
            .unwrap()
            .store
            .secondary_indexes()
            .is_empty()
    );
    b.assert_quiet();
}

#[test]
fn a_build_datamemory_cannot_hold_fails_and_changes_nothing() {
    let mut b = Bench::build_with(MIB, 1, LDM, table());
    let mut model = Model::new();
    let mut k = 0;
    loop {
        let v_bytes = 1i64.to_le_bytes();
        let attr = [(V, Some(&v_bytes[..])), (S, Some(&b"0123456789"[..]))];
        let request = b.request(
            txn(1),
            OperationKind::Insert,
            LockMode::Exclusive,
            k,
            Some(&attr),
        );
        let tc_op = request.tc_op;
        match &b.send(request)[..] {
            [(_, Answer::Conf { ldm_op, .. })] => {
                let op = Op {
                    transaction_id: txn(1),
                    tc_op,
                    ldm_op: *ldm_op,
                };
                b.commit_all(&[op], gci(1));
                model.insert(k, (1, Some(b"0123456789".to_vec())));
            }
            [(_, Answer::Ref(ErrorCode::TableFull))] => break,
            other => panic!("insert of {k}: {other:?}"),
        }
        k += 1;
    }
    b.deliver(
        DICT,
        LqhAlterTabReq {
            table: with_indexes(1),
        },
    );
    assert!(matches!(next(&mut b), Next::Job));
    let answer = loop {
        if let Next::Answered(answer) = step(&mut b) {
            break answer;
        }
    };
    assert_eq!(
        format!("{answer:?}"),
        format!(
            "{:?}",
            Signal::from(AlterTabRef {
                table_id: TABLE_ID,
                revision: 1,
                error: ErrorCode::TableFull,
            })
        )
    );
    let table = b.ldm.tables[TABLE_ID as usize].as_ref().unwrap();
    assert_eq!(table.definition.revision, 0, "the old definition is back");
    assert!(table
        .partitions
        .iter()
        .flatten()
        .all(|p| p.store.secondary_indexes().is_empty()));
    b.assert_quiet();
    // The rows are all there.
    assert_eq!(b.ldm.rows(TABLE_ID), model.len() as u64);
}

#[test]
fn a_unique_index_dropped_alone_takes_its_hidden_table_once_no_operation_uses_it() {
    const HIDDEN: u32 = 9;
    let mut with_unique = table();
    with_unique.indexes.push(IndexDef {
        id: 1,
        name: "u_v".into(),
        columns: vec![V],
        unique: Some(UniqueTable {
            table_id: HIDDEN,
            table_version: 1,
        }),
    });
    with_unique.revision = 1;
    let hidden = with_unique
        .unique_index_table(&with_unique.indexes[0])
        .expect("a hidden table");
    let mut b = Bench::build_with(16 * MIB, 1, LDM, with_unique);
    assert!(b.ldm.tables[HIDDEN as usize].is_some());
    // The hidden row a tc writes for an insert of v = 5, prepared.
    let key = b.section(&[(0, Some(&5i64.to_le_bytes()))]);
    let hash = key_hash(&hidden, key.as_slice()).expect("a valid key");
    let mut request = b.request(txn(1), OperationKind::Insert, LockMode::Exclusive, 1, None);
    request.table_id = HIDDEN;
    request.partition = b.map.bucket_partitions[bucket(hash) as usize];
    request.hash = hash;
    request.key = key;
    request.attr = Some(b.section(&[(1, Some(&1i32.to_le_bytes()))]));
    let tc_op = request.tc_op;
    let ldm_op = match &b.send(request)[..] {
        [(_, Answer::Conf { ldm_op, .. })] => *ldm_op,
        other => panic!("expected the hidden insert prepared, got {other:?}"),
    };
    let op = Op {
        transaction_id: txn(1),
        tc_op,
        ldm_op,
    };

    // The index dropped: its ordered index at once, its hidden table only
    // once the operation on it is done.
    b.deliver(
        DICT,
        LqhAlterTabReq {
            table: without_indexes(2),
        },
    );
    assert!(matches!(next(&mut b), Next::Job));
    assert!(matches!(step(&mut b), Next::Job), "waits for the operation");
    assert!(b.ldm.tables[HIDDEN as usize].is_some());
    b.commit_all(&[op], gci(2));
    match step(&mut b) {
        Next::Answered(Signal::AlterTabRep(report)) => assert_eq!(report.revision, 2),
        Next::Answered(other) => panic!("expected AlterTabRep, got {other:?}"),
        Next::Job => panic!("the operation is done: the drop should finish"),
    }
    assert!(b.ldm.tables[HIDDEN as usize].is_none());
    let base = b.ldm.tables[TABLE_ID as usize].as_ref().expect("held");
    for partition in base.partitions.iter().flatten() {
        assert!(partition.store.secondary_indexes().is_empty());
    }
}
