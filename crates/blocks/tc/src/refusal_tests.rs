//! tc refusal tests (docs/design/testing.md §2), on the `Bench` of `tests`:
//! requests before the start, for unknown or stale tables, with bad keys,
//! forged or misdirected, beyond the record pools or the operation limit,
//! and operations the receive thread dropped are refused with their error
//! code; none panics the tc and none keeps a record.

use crate::tests::*;
use crate::TcConfig;
use kernel::testing::line;
use signal::signals::*;
use signal::{BlockKind, BlockRef, ErrorCode, TransactionId};

// ---------------------------------------------------------------------------
// Refusals: none may panic, none may keep a record
// ---------------------------------------------------------------------------

#[test]
fn requests_before_start_are_refused_with_node_not_started() {
    let mut b = Bench::unstarted(config());
    let t = txn(API, 1);
    let request = b.insert(t, 4, START | COMMIT, 1);
    b.deliver(API, request);
    assert_eq!(
        b.trace(),
        vec![refusal_line(t, 4, ErrorCode::NodeNotStarted)]
    );
    // Every phase before the global checkpoint phase is not enough.
    for &phase in signal::phases::PHASES
        .iter()
        .filter(|&&phase| phase < signal::phases::GLOBAL_CHECKPOINT)
    {
        b.deliver(MEMBERSHIP, StartPhaseReq { phase });
    }
    b.trace();
    let request = b.insert(t, 4, START | COMMIT, 1);
    b.deliver(API, request);
    assert_eq!(
        b.trace(),
        vec![refusal_line(t, 4, ErrorCode::NodeNotStarted)]
    );
    b.assert_quiet();
}

fn assert_refused(b: &mut Bench, from: BlockRef, request: TcKeyReq, error: ErrorCode) {
    let (transaction_id, client_op) = (request.transaction_id, request.client_op);
    b.deliver(from, request);
    assert_eq!(
        b.trace(),
        vec![line(
            TC,
            from,
            TcKeyRef {
                transaction_id,
                client_op,
                error,
                index_id: 0
            }
        )]
    );
    b.assert_quiet();
}

#[test]
fn unknown_table_and_stale_table_version_are_refused() {
    let mut b = Bench::started(config());
    let t = txn(API, 1);
    let mut request = b.insert(t, 1, START | COMMIT, 1);
    request.table_id = 99;
    assert_refused(&mut b, API, request, ErrorCode::UnknownTable);
    let mut request = b.insert(t, 2, START | COMMIT, 1);
    request.table_id = 0;
    assert_refused(&mut b, API, request, ErrorCode::UnknownTable);
    let mut request = b.insert(t, 3, START | COMMIT, 1);
    request.table_version = TABLE_VERSION - 1;
    assert_refused(&mut b, API, request, ErrorCode::SchemaVersionMismatch);
}

#[test]
fn bad_keys_are_refused() {
    let mut b = Bench::started(config());
    let t = txn(API, 1);
    let mut request = b.insert(t, 1, START | COMMIT, 1);
    request.key = b.section(&[(0, None)]);
    assert_refused(&mut b, API, request, ErrorCode::NullNotAllowed);
    let mut request = b.insert(t, 2, START | COMMIT, 1);
    request.key = b.section(&[(0, Some(b"abc"))]);
    assert_refused(&mut b, API, request, ErrorCode::BadValue);
    let mut request = b.insert(t, 3, START | COMMIT, 1);
    request.key = b.section(&[(1, Some(&1i32.to_le_bytes()))]);
    assert_refused(&mut b, API, request, ErrorCode::BadRequest);
    let mut request = b.insert(t, 4, START | COMMIT, 1);
    request.key = b.section(&[]);
    assert_refused(&mut b, API, request, ErrorCode::NullNotAllowed);
}

#[test]
fn a_dropped_table_is_unknown() {
    let mut b = Bench::started(config());
    b.deliver(DICT, DropTabOrd { table_id: TABLE_ID });
    assert_eq!(
        b.trace(),
        vec![line(
            TC,
            DICT,
            DropTabRep {
                table_id: TABLE_ID,
                busy: false
            }
        )]
    );
    let request = b.insert(txn(API, 1), 1, START | COMMIT, 1);
    assert_refused(&mut b, API, request, ErrorCode::UnknownTable);
    // Dropping an unknown table is answered too.
    b.deliver(DICT, DropTabOrd { table_id: 1234 });
    assert_eq!(
        b.trace(),
        vec![line(
            TC,
            DICT,
            DropTabRep {
                table_id: 1234,
                busy: false
            }
        )]
    );
}

#[test]
fn a_failing_operation_in_an_open_transaction_aborts_what_it_holds() {
    let mut b = Bench::started(config());
    let t = txn(API, 1);
    let request = b.insert(t, 1, START | EXECUTE, 1);
    b.deliver(API, request);
    let [(ldm, tc_op)] = b.take_lqh_key_reqs()[..] else {
        panic!("one LQHKEYREQ")
    };
    b.prepared(ldm, tc_op, 1);
    b.trace();
    let mut request = b.insert(t, 2, COMMIT, 2);
    request.table_version += 1;
    b.deliver(API, request);
    assert_eq!(b.trace(), vec![abort_line(ldm, tc_op, t)]);
    b.deliver(ldm, AbortConf { tc_op });
    assert_eq!(
        b.trace(),
        vec![refusal_line(t, 2, ErrorCode::SchemaVersionMismatch)]
    );
    b.assert_quiet();
}

#[test]
fn too_many_operations_in_one_transaction_aborts_it() {
    let mut b = Bench::started(TcConfig {
        max_operations_per_transaction: 3,
        ..config()
    });
    let t = txn(API, 1);
    for (client_op, k) in [(1, 1), (2, 2), (3, 3)] {
        let flags = if client_op == 1 { START } else { 0 };
        let request = b.insert(t, client_op, flags, k);
        b.deliver(API, request);
    }
    let ops = b.take_lqh_key_reqs();
    assert_eq!(ops.len(), 3);
    b.prepared(ops[0].0, ops[0].1, 100);
    let request = b.insert(t, 4, COMMIT, 4);
    b.deliver(API, request);
    assert_eq!(
        b.trace(),
        ops.iter()
            .map(|&(ldm, tc_op)| abort_line(ldm, tc_op, t))
            .collect::<Vec<_>>()
    );
    for &(ldm, tc_op) in &ops {
        b.deliver(ldm, AbortConf { tc_op });
    }
    assert_eq!(
        b.trace(),
        vec![refusal_line(t, 4, ErrorCode::TooManyOperations)]
    );
    b.assert_quiet();
}

/// The receive thread dropped an operation whose sections would have
/// taken the section pool's reserve (TCKEYREQ_DROPPED_REP): the tc treats
/// it as an operation it refused. The transaction aborts, the client hears
/// one TCKEYREF naming the dropped operation, and the tc holds nothing.
#[test]
fn an_operation_the_receive_thread_dropped_aborts_its_transaction() {
    let mut b = Bench::started(config());
    let t = txn(API, 1);
    let request = b.insert(t, 1, START, 1);
    b.deliver(API, request);
    let ops = b.take_lqh_key_reqs();
    assert_eq!(ops.len(), 1);
    b.deliver(
        API,
        TcKeyReqDroppedRep {
            transaction_id: t,
            client_op: 2,
            flags: EXECUTE,
            error: ErrorCode::OutOfSignalMemory,
        },
    );
    let (ldm, tc_op) = ops[0];
    assert_eq!(b.trace(), vec![abort_line(ldm, tc_op, t)]);
    b.deliver(ldm, AbortConf { tc_op });
    assert_eq!(
        b.trace(),
        vec![refusal_line(t, 2, ErrorCode::OutOfSignalMemory)]
    );
    // A dropped first operation of a new transaction: refused alone.
    let other = txn(API, 2);
    b.deliver(
        API,
        TcKeyReqDroppedRep {
            transaction_id: other,
            client_op: 1,
            flags: START | EXECUTE,
            error: ErrorCode::OutOfSignalMemory,
        },
    );
    assert_eq!(
        b.trace(),
        vec![refusal_line(other, 1, ErrorCode::OutOfSignalMemory)]
    );
    b.assert_quiet();
}

#[test]
fn out_of_transaction_records_is_refused_and_recovers() {
    let mut b = Bench::started(config());
    let mut open = Vec::new();
    for n in 1..=4 {
        let t = txn(API, n);
        let request = b.insert(t, 1, START | EXECUTE, n as i32);
        b.deliver(API, request);
        let [(ldm, tc_op)] = b.take_lqh_key_reqs()[..] else {
            panic!("one LQHKEYREQ")
        };
        open.push((t, ldm, tc_op));
    }
    let request = b.insert(txn(API, 5), 7, START | COMMIT, 5);
    b.deliver(API, request);
    assert_eq!(
        b.trace(),
        vec![refusal_line(
            txn(API, 5),
            7,
            ErrorCode::OutOfTransactionRecords
        )]
    );
    // Free one; the next transaction gets its record.
    let (t, ldm, tc_op) = open.remove(0);
    b.refused_by_ldm(ldm, tc_op, ErrorCode::DuplicateKey);
    assert_eq!(b.trace(), vec![refusal_line(t, 1, ErrorCode::DuplicateKey)]);
    let request = b.insert(txn(API, 5), 7, START | EXECUTE, 5);
    b.deliver(API, request);
    let [(ldm5, op5)] = b.take_lqh_key_reqs()[..] else {
        panic!("one LQHKEYREQ")
    };
    open.push((txn(API, 5), ldm5, op5));
    for (t, ldm, tc_op) in open {
        b.deliver(API, TcRollbackReq { transaction_id: t });
        b.deliver(ldm, AbortConf { tc_op });
    }
    b.assert_quiet();
}

#[test]
fn out_of_operation_records_aborts_the_transaction() {
    let mut b = Bench::started(TcConfig {
        max_operations: 2,
        ..config()
    });
    let (t1, t2) = (txn(API, 1), txn(API, 2));
    let request = b.insert(t1, 1, START, 1);
    b.deliver(API, request);
    let request = b.insert(t1, 2, 0, 2);
    b.deliver(API, request);
    let ops = b.take_lqh_key_reqs();
    let request = b.insert(t2, 1, START | COMMIT, 3);
    assert_refused_keeping(&mut b, request, ErrorCode::OutOfOperationRecords);
    // t1 is untouched and finishes.
    let request = b.insert(t1, 3, COMMIT, 4);
    b.deliver(API, request);
    assert_eq!(
        b.trace(),
        ops.iter()
            .map(|&(ldm, tc_op)| abort_line(ldm, tc_op, t1))
            .collect::<Vec<_>>(),
        "t1's third operation finds no record either"
    );
    for &(ldm, tc_op) in &ops {
        b.deliver(ldm, AbortConf { tc_op });
    }
    assert_eq!(
        b.trace(),
        vec![refusal_line(t1, 3, ErrorCode::OutOfOperationRecords)]
    );
    b.assert_quiet();
}

/// Like `assert_refused`, for a tc that still holds other transactions.
fn assert_refused_keeping(b: &mut Bench, request: TcKeyReq, error: ErrorCode) {
    let (transaction_id, client_op) = (request.transaction_id, request.client_op);
    let before = b.tc.transactions_in_use();
    b.deliver(API, request);
    assert_eq!(
        b.trace(),
        vec![refusal_line(transaction_id, client_op, error)]
    );
    assert_eq!(b.tc.transactions_in_use(), before);
}

#[test]
fn forged_and_misdirected_requests_are_bad_requests() {
    let mut b = Bench::started(config());
    // The transaction id names API node 11, but node 10 sends it.
    let request = b.insert(txn(OTHER_API, 1), 1, START | COMMIT, 1);
    assert_refused(&mut b, API, request, ErrorCode::BadRequest);
    // A block that is not an API node.
    let request = b.insert(
        TransactionId(u64::from(NODE.0) << 48 | 1),
        1,
        START | COMMIT,
        1,
    );
    assert_refused(&mut b, DICT, request, ErrorCode::BadRequest);
    // An operation for a transaction that was never started.
    let request = b.insert(txn(API, 2), 1, COMMIT, 1);
    assert_refused(&mut b, API, request, ErrorCode::UnknownTransaction);

    // START for a transaction that exists, and another API instance of the
    // same node using it: refused without harming it.
    let t = txn(API, 3);
    let request = b.insert(t, 1, START | EXECUTE, 1);
    b.deliver(API, request);
    let [(ldm, tc_op)] = b.take_lqh_key_reqs()[..] else {
        panic!("one LQHKEYREQ")
    };
    let request = b.insert(t, 2, START | EXECUTE, 2);
    assert_refused_keeping(&mut b, request, ErrorCode::BadRequest);
    let twin = BlockRef::new(API.node, BlockKind::Api, 1);
    let request = b.insert(t, 3, EXECUTE, 3);
    b.deliver(twin, request);
    assert_eq!(
        b.trace(),
        vec![line(
            TC,
            twin,
            TcKeyRef {
                transaction_id: t,
                client_op: 3,
                error: ErrorCode::BadRequest,
                index_id: 0
            }
        )]
    );
    b.deliver(twin, TcCommitReq { transaction_id: t });
    assert_eq!(
        b.trace(),
        vec![line(
            TC,
            twin,
            TcKeyRef {
                transaction_id: t,
                client_op: NO_OP,
                error: ErrorCode::UnknownTransaction,
                index_id: 0
            }
        )]
    );
    // An operation after the batch closed is refused; the batch goes on.
    let request = b.insert(t, 4, EXECUTE, 4);
    assert_refused_keeping(&mut b, request, ErrorCode::BadRequest);
    b.prepared(ldm, tc_op, 1);
    assert_eq!(b.trace(), vec![batch_conf_line(t, 1)]);
    b.deliver(API, TcCommitReq { transaction_id: t });
    b.deliver(ldm, CommitConf { tc_op });
    b.deliver(ldm, CompleteConf { tc_op });
    b.trace();
    b.assert_quiet();
}

#[test]
fn rollback_of_a_committing_transaction_is_refused() {
    let mut b = Bench::started(config());
    b.deliver(DIH, GcpPrepare { new_gci: G2 });
    b.trace();
    let t = txn(API, 1);
    let request = b.insert(t, 1, START | COMMIT, 1);
    b.deliver(API, request);
    let [(ldm, tc_op)] = b.take_lqh_key_reqs()[..] else {
        panic!("one LQHKEYREQ")
    };
    b.prepared(ldm, tc_op, 1);
    b.deliver(API, TcRollbackReq { transaction_id: t });
    assert_eq!(
        b.trace(),
        vec![refusal_line(t, NO_OP, ErrorCode::BadRequest)],
        "the commit was decided (waiting for its GCI)"
    );
    b.deliver(DIH, GcpCommit { gci: G2 });
    b.deliver(ldm, CommitConf { tc_op });
    b.deliver(ldm, CompleteConf { tc_op });
    let trace = b.trace();
    assert!(trace.contains(&commit_conf_line(t, 1, G2)));
    b.assert_quiet();
}

#[test]
fn many_transactions_reuse_records() {
    let mut b = Bench::started(TcConfig {
        max_transactions: 1,
        max_operations: 2,
        ..config()
    });
    for n in 1..=50u64 {
        let t = txn(API, n);
        let request = b.insert(t, 1, START, n as i32);
        b.deliver(API, request);
        let request = b.insert(t, 2, COMMIT, n as i32 + 1000);
        b.deliver(API, request);
        let ops = b.take_lqh_key_reqs();
        for (i, &(ldm, tc_op)) in ops.iter().enumerate() {
            b.prepared(ldm, tc_op, i as u32);
        }
        for &(ldm, tc_op) in &ops {
            b.deliver(ldm, CommitConf { tc_op });
        }
        for &(ldm, tc_op) in &ops {
            b.deliver(ldm, CompleteConf { tc_op });
        }
        let trace = b.trace();
        assert_eq!(trace.len(), 2 + 1 + 2, "COMMIT x2, TCKEYCONF, COMPLETE x2");
        b.assert_quiet();
    }
    assert_eq!(b.tc.counters().commits, 50);
}

/// The lock wait timeout is measured from the start of the batch, not from
/// when the unanswered operation was sent: a client that sends a batch's
/// operations over more than `lock_wait_timeout_ms` has its last operation
/// aborted as a deadlock although it waited only briefly.
#[test]
fn lock_wait_timeout_counts_from_the_unanswered_operation() {
    let mut b = Bench::started(config());
    let t = txn(API, 1);
    let request = b.insert(t, 1, START, 1);
    b.deliver(API, request);
    let [(ldm1, op1)] = b.take_lqh_key_reqs()[..] else {
        panic!("one LQHKEYREQ")
    };
    b.prepared(ldm1, op1, 1);
    b.ctx.now_ms = LOCK_WAIT_MS - 50;
    let request = b.insert(t, 2, EXECUTE, 2);
    b.deliver(API, request);
    let [(ldm2, op2)] = b.take_lqh_key_reqs()[..] else {
        panic!("one LQHKEYREQ")
    };
    // op2 has waited 100 ms.
    b.ctx.now_ms = LOCK_WAIT_MS + 50;
    b.deliver(TC, scan());
    assert_eq!(
        b.trace(),
        vec![rearm()],
        "no operation waited a whole lock wait timeout"
    );
    b.prepared(ldm2, op2, 2);
    b.deliver(API, TcRollbackReq { transaction_id: t });
    b.deliver(ldm1, AbortConf { tc_op: op1 });
    b.deliver(ldm2, AbortConf { tc_op: op2 });
    b.assert_quiet();
}

// ---------------------------------------------------------------------------
// A graceful stop: nothing new begins, what began finishes
// ---------------------------------------------------------------------------

#[test]
fn a_draining_tc_refuses_new_transactions_finishes_begun_ones_then_says_so() {
    let mut b = Bench::started(config());
    let begun = txn(API, 1);
    let request = b.insert(begun, 1, START | EXECUTE, 1);
    b.deliver(API, request);
    let [(ldm, op)] = b.take_lqh_key_reqs()[..] else {
        panic!("one LQHKEYREQ")
    };
    b.prepared(ldm, op, 1);
    assert_eq!(b.trace(), vec![batch_conf_line(begun, 1)]);

    // Asked to drain with a transaction open: no answer yet.
    b.deliver(MEMBERSHIP, TcDrainReq {});
    assert_eq!(b.trace(), Vec::<String>::new());
    // A new transaction is refused, with an error the client retries.
    let fresh = txn(API, 2);
    let request = b.insert(fresh, 1, START | COMMIT, 2);
    b.deliver(API, request);
    assert_eq!(
        b.trace(),
        vec![refusal_line(fresh, 1, ErrorCode::NodeShuttingDown)]
    );
    assert!(ErrorCode::NodeShuttingDown.class() == signal::error::ErrorClass::Temporary);
    // A scan while it is open: still no answer.
    b.deliver(TC, scan());
    assert_eq!(b.trace(), vec![rearm()]);

    // The begun transaction commits as always.
    b.deliver(
        API,
        TcCommitReq {
            transaction_id: begun,
        },
    );
    b.trace();
    b.deliver(ldm, CommitConf { tc_op: op });
    b.trace();
    b.deliver(ldm, CompleteConf { tc_op: op });
    b.assert_quiet();
    // The next scan finds it drained, and says so once.
    b.deliver(TC, scan());
    assert_eq!(
        b.trace(),
        vec![rearm(), line(TC, MEMBERSHIP, TcDrainConf {})]
    );
    b.deliver(TC, scan());
    assert_eq!(b.trace(), vec![rearm()]);
    // A repeated request changes nothing: it was answered.
    b.deliver(MEMBERSHIP, TcDrainReq {});
    assert_eq!(b.trace(), Vec::<String>::new());
}

/// An answer from another node's ldm for an operation that awaits none
/// (a late signal meant for this node's previous incarnation) is
/// dropped, never panicked on.
#[test]
fn late_ldm_answers_from_another_node_are_dropped() {
    let mut b = Bench::started(config());
    let remote = BlockRef::new(signal::NodeId(3), BlockKind::Ldm, 0);
    b.deliver(
        remote,
        LqhKeyConf {
            tc_op: 3,
            ldm_op: 9,
            released: false,
            data: None,
        },
    );
    b.deliver(
        remote,
        LqhKeyRef {
            tc_op: 5,
            error: ErrorCode::NoSuchRow,
        },
    );
    assert_eq!(b.trace(), Vec::<String>::new());
    assert_eq!(b.tc.counters().stray_ldm_answers, 2);
    b.assert_quiet();
}
