//! ldm value tests (docs/design/data-and-routing.md, docs/design/testing.md
//! §2), on the `Bench` of `tests`: var-size columns, the checks of every
//! value against its column, and which partitions and tables an ldm owns.

use crate::tests::*;
use kernel::testing::line;
use kernel::Context;
use signal::signals::*;
use signal::{BlockKind, BlockRef, ErrorCode, NodeId, Signal};

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
