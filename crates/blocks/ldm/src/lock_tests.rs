//! ldm lock tests (docs/design/transactions.md, docs/design/testing.md §2),
//! on the `Bench` of `tests`: lock queues per row, shared and exclusive
//! modes, waiters granted in order, lock-wait timeouts and aborts that
//! release what a transaction held.

use crate::tests::*;
use signal::signals::*;
use signal::ErrorCode;

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
