//! ldm row tests (docs/design/data-and-routing.md, docs/design/testing.md
//! §2), on the `Bench` of `tests`: what inserts, updates, writes and deletes
//! do to rows, DataMemory exhaustion and its recovery, and the row header's
//! GCI.

use crate::tests::*;
use rowstore::RowState;
use signal::signals::*;
use signal::ErrorCode;

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
    // Nine pages: for each of the two partitions its fixed slots, hash
    // directory, hash elements and var parts, and one of ordered-index
    // nodes.
    let mut b = Bench::with_memory(9 * 32 * 1024);
    let mut inserted = Vec::new();
    let full_key = loop {
        let k = inserted.len() as i32;
        assert!(k < 100_000, "288 KiB must fill up");
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

    // Deleting rows of the full partition makes room for the refused key:
    // their slots and hash entries, and, once leaves merge, ordered-index
    // nodes (what ran out may be either).
    let (full_partition, _) = b.route(full_key);
    let victims: Vec<i32> = inserted
        .iter()
        .copied()
        .filter(|&k| b.route(k).0 == full_partition)
        .take(100)
        .collect();
    assert_eq!(victims.len(), 100, "rows in the full partition");
    for (n, &victim) in victims.iter().enumerate() {
        b.write(5 + n as u64, OperationKind::Delete, victim, None, gci(3));
        assert_eq!(b.read(victim), None);
    }
    b.insert(200, full_key, 1, None, None);
    assert_eq!(b.read(full_key), Some(row(full_key, 1, None, None)));
    assert_eq!(b.ldm.rows(TABLE_ID), inserted.len() as u64 - 100 + 1);
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

#[test]
fn reads_are_refused_once_the_read_lease_runs_out_and_writes_are_not() {
    let mut b = Bench::new();
    let membership = signal::BlockRef::new(b.ldm.address.node, signal::BlockKind::Membership, 0);
    let lease_refused = |answers: &[(u32, Answer)]| {
        matches!(answers, [(_, Answer::Ref(ErrorCode::ReadLeaseExpired))])
    };
    b.deliver(
        membership,
        ReadLeaseRep {
            valid_until_ms: 1_000,
        },
    );
    b.ctx.now_ms = 999;
    for lock in [
        LockMode::CommittedRead,
        LockMode::Shared,
        LockMode::Exclusive,
    ] {
        let request = b.request(txn(1), OperationKind::Read, lock, 5, None);
        let answers = b.send(request);
        assert!(
            !lease_refused(&answers),
            "{lock:?} read within the lease: {answers:?}"
        );
    }
    b.ctx.now_ms = 1_000;
    for lock in [
        LockMode::CommittedRead,
        LockMode::Shared,
        LockMode::Exclusive,
    ] {
        let request = b.request(txn(2), OperationKind::Read, lock, 5, None);
        let answers = b.send(request);
        assert!(
            lease_refused(&answers),
            "{lock:?} read after the lease: {answers:?}"
        );
    }
    // A write needs every replica of its chain, which a cut-off node
    // cannot reach: the lease does not apply to it.
    b.prepare(
        txn(3),
        OperationKind::Insert,
        LockMode::Exclusive,
        6,
        Some(&[(V, Some(&int(2)))]),
    );
    // Lifted (the node is alone in its membership).
    b.deliver(
        membership,
        ReadLeaseRep {
            valid_until_ms: u64::MAX,
        },
    );
    let request = b.request(
        txn(4),
        OperationKind::Read,
        LockMode::CommittedRead,
        5,
        None,
    );
    let answers = b.send(request);
    assert!(!lease_refused(&answers), "{answers:?}");
}

#[test]
fn an_increment_adds_to_integer_columns_within_their_range() {
    let mut b = Bench::new();
    b.insert(1, 1, 10, Some(b"text"), None);
    let delta = |d: i64| d.to_le_bytes();
    b.write(
        2,
        OperationKind::Increment,
        1,
        Some(&[(V, Some(&delta(5)))]),
        gci(2),
    );
    assert_eq!(b.read(1), Some(row(1, 15, Some(b"text"), None)));
    b.write(
        3,
        OperationKind::Increment,
        1,
        Some(&[(V, Some(&delta(-20)))]),
        gci(3),
    );
    assert_eq!(b.read(1), Some(row(1, -5, Some(b"text"), None)));
    b.write(
        4,
        OperationKind::Update,
        1,
        Some(&[(V, Some(&int(i64::MAX - 1)))]),
        gci(4),
    );
    let refused = |b: &mut Bench, t: u64, k: i32, values: &[(u16, Option<&[u8]>)]| {
        b.refused(
            txn(t),
            OperationKind::Increment,
            LockMode::Exclusive,
            k,
            Some(values),
        )
    };
    assert_eq!(
        refused(&mut b, 5, 1, &[(V, Some(&delta(2)))]),
        ErrorCode::ValueOutOfRange,
        "past the column type's range"
    );
    assert_eq!(
        refused(&mut b, 6, 1, &[(S, Some(&delta(1)))]),
        ErrorCode::BadValue,
        "not an integer column"
    );
    assert_eq!(
        refused(&mut b, 7, 1, &[(V, Some(&[1, 0, 0, 0]))]),
        ErrorCode::BadRequest,
        "a delta is 8 bytes"
    );
    assert_eq!(
        refused(&mut b, 8, 1, &[(K, Some(&delta(1)))]),
        ErrorCode::BadRequest,
        "the key does not change"
    );
    assert_eq!(
        refused(&mut b, 9, 2, &[(V, Some(&delta(1)))]),
        ErrorCode::NoSuchRow
    );
    assert_eq!(
        refused(
            &mut b,
            11,
            1,
            &[(V, Some(&delta(-1))), (V, Some(&delta(-1)))]
        ),
        ErrorCode::BadRequest,
        "a column twice"
    );
    // Refusals change nothing, and the lock each held is free again.
    assert_eq!(b.read(1), Some(row(1, i64::MAX - 1, Some(b"text"), None)));
    b.write(
        10,
        OperationKind::Increment,
        1,
        Some(&[(V, Some(&delta(1)))]),
        gci(5),
    );
    assert_eq!(b.read(1), Some(row(1, i64::MAX, Some(b"text"), None)));
    b.assert_quiet();
}

#[test]
fn an_increment_of_a_column_that_is_no_integer_is_refused_null_or_not() {
    // The bench's integer columns are NOT NULL and its nullable ones are
    // not integers: the type is checked first.
    let mut b = Bench::new();
    b.insert(1, 1, 10, None, None);
    assert_eq!(
        b.refused(
            txn(2),
            OperationKind::Increment,
            LockMode::Exclusive,
            1,
            Some(&[(B, Some(&1i64.to_le_bytes()))]),
        ),
        ErrorCode::BadValue,
        "column b is NULL, and no integer"
    );
}
