//! tc abort tests (docs/design/transactions.md, docs/design/testing.md
//! §2), on the `Bench` of `tests`: a refused or timed-out operation, a
//! rollback and an API node's failure abort what the transaction holds, on
//! every ldm, before the client hears once; late answers are dropped; a
//! batch that an abort ended is drained until its end.

use crate::records::TransactionState;
use crate::tests::*;
use kernel::testing::line;
use kernel::Context;
use signal::signals::*;
use signal::{BlockRef, ErrorCode, Gci, TransactionId};

// ---------------------------------------------------------------------------
// Aborts
// ---------------------------------------------------------------------------

#[test]
fn lqh_key_ref_aborts_the_other_prepared_operation_then_refuses() {
    let mut b = Bench::started(config());
    let t = txn(API, 1);
    let request = b.insert(t, 21, START, 1);
    b.deliver(API, request);
    let request = b.insert(t, 22, COMMIT, 2);
    b.deliver(API, request);
    let ops = b.take_lqh_key_reqs();
    let [(ldm1, op1), (ldm2, op2)] = ops[..] else {
        panic!("two LQHKEYREQs")
    };
    b.prepared(ldm1, op1, 50);
    b.refused_by_ldm(ldm2, op2, ErrorCode::DuplicateKey);
    assert_eq!(
        b.trace(),
        vec![abort_line(ldm1, op1, t)],
        "only the prepared operation holds something"
    );
    b.deliver(ldm1, AbortConf { tc_op: op1 });
    assert_eq!(
        b.trace(),
        vec![refusal_line(t, 22, ErrorCode::DuplicateKey)]
    );
    b.assert_quiet();
    assert_eq!(b.tc.counters().aborts, 1);
}

#[test]
fn lqh_key_ref_while_another_operation_is_in_flight_ignores_its_late_answer() {
    let mut b = Bench::started(config());
    let t = txn(API, 1);
    let request = b.insert(t, 1, START, 1);
    b.deliver(API, request);
    let request = b.insert(t, 2, COMMIT, 2);
    b.deliver(API, request);
    let ops = b.take_lqh_key_reqs();
    let [(ldm1, op1), (ldm2, op2)] = ops[..] else {
        panic!("two LQHKEYREQs")
    };
    b.refused_by_ldm(ldm1, op1, ErrorCode::TableFull);
    assert_eq!(
        b.trace(),
        vec![abort_line(ldm2, op2, t)],
        "the operation still in flight may hold a lock when it arrives"
    );
    // The ldm answered op2 before it saw the ABORT.
    b.prepared(ldm2, op2, 9);
    assert!(b.trace().is_empty(), "a late LQHKEYCONF is dropped");
    b.deliver(ldm2, AbortConf { tc_op: op2 });
    assert_eq!(b.trace(), vec![refusal_line(t, 1, ErrorCode::TableFull)]);
    b.assert_quiet();
}

#[test]
fn lock_wait_timeout_aborts_the_waiting_operation() {
    let mut b = Bench::started(config());
    b.ctx.now_ms = 1000;
    let t = txn(API, 1);
    let request = b.insert(t, 1, START | COMMIT, 1);
    b.deliver(API, request);
    let [(ldm, tc_op)] = b.take_lqh_key_reqs()[..] else {
        panic!("one LQHKEYREQ")
    };
    // The ldm queues the operation on a lock and says nothing.
    b.ctx.now_ms = 1000 + LOCK_WAIT_MS - 1;
    b.deliver(TC, scan());
    assert_eq!(b.trace(), vec![rearm()], "not yet");
    b.ctx.now_ms = 1000 + LOCK_WAIT_MS;
    b.deliver(TC, scan());
    assert_eq!(b.trace(), vec![abort_line(ldm, tc_op, t), rearm()]);
    b.deliver(ldm, AbortConf { tc_op });
    assert_eq!(
        b.trace(),
        vec![refusal_line(t, NO_OP, ErrorCode::LockWaitTimeout)]
    );
    b.assert_quiet();
    assert_eq!(b.tc.counters().lock_wait_timeouts, 1);
}

#[test]
fn idle_transaction_is_aborted_after_the_inactivity_timeout() {
    let mut b = Bench::started(config());
    b.ctx.now_ms = 1000;
    let t = txn(API, 1);
    let request = b.insert(t, 1, START | EXECUTE, 1);
    b.deliver(API, request);
    let [(ldm, tc_op)] = b.take_lqh_key_reqs()[..] else {
        panic!("one LQHKEYREQ")
    };
    b.prepared(ldm, tc_op, 5);
    assert_eq!(b.trace(), vec![batch_conf_line(t, 1)]);
    b.ctx.now_ms = 1000 + INACTIVE_MS - 1;
    b.deliver(TC, scan());
    assert_eq!(b.trace(), vec![rearm()], "not yet");
    b.ctx.now_ms = 1000 + INACTIVE_MS;
    b.deliver(TC, scan());
    assert_eq!(b.trace(), vec![abort_line(ldm, tc_op, t), rearm()]);
    b.deliver(ldm, AbortConf { tc_op });
    assert_eq!(
        b.trace(),
        vec![refusal_line(t, NO_OP, ErrorCode::TransactionInactive)]
    );
    b.assert_quiet();
    assert_eq!(b.tc.counters().inactivity_timeouts, 1);
    // The client comes back: its transaction is gone.
    let request = b.insert(t, 2, COMMIT, 2);
    b.deliver(API, request);
    assert_eq!(
        b.trace(),
        vec![refusal_line(t, 2, ErrorCode::UnknownTransaction)]
    );
}

/// A client that sends part of a batch (no EXECUTE yet) and then falls
/// silent while staying connected: its operations are prepared at the ldm
/// and hold their row locks. Neither timeout ever fires, because the lock
/// wait timeout needs an unanswered operation and the inactivity timeout
/// only looks at Idle transactions, while this one stays Executing with
/// nothing outstanding. The transaction record and the ldm's row lock leak
/// until the API node disconnects.
#[test]
fn an_open_batch_of_a_silent_client_is_aborted_by_the_inactivity_timeout() {
    let mut b = Bench::started(config());
    b.ctx.now_ms = 1000;
    let t = txn(API, 1);
    let request = b.insert(t, 1, START, 1);
    b.deliver(API, request);
    let [(ldm, tc_op)] = b.take_lqh_key_reqs()[..] else {
        panic!("one LQHKEYREQ")
    };
    b.prepared(ldm, tc_op, 5);
    assert!(b.trace().is_empty(), "the batch is not closed yet");
    b.ctx.now_ms = 1000 + LOCK_WAIT_MS + INACTIVE_MS;
    b.deliver(TC, scan());
    assert_eq!(
        b.trace(),
        vec![abort_line(ldm, tc_op, t), rearm()],
        "the silent client's locks must be released"
    );
    b.deliver(ldm, AbortConf { tc_op });
    b.assert_quiet();
}

#[test]
fn rollback_aborts_then_confirms() {
    let mut b = Bench::started(config());
    let t = txn(API, 1);
    let request = b.insert(t, 1, START | EXECUTE, 1);
    b.deliver(API, request);
    let [(ldm, tc_op)] = b.take_lqh_key_reqs()[..] else {
        panic!("one LQHKEYREQ")
    };
    b.prepared(ldm, tc_op, 5);
    b.trace();
    b.deliver(API, TcRollbackReq { transaction_id: t });
    assert_eq!(b.trace(), vec![abort_line(ldm, tc_op, t)]);
    b.deliver(ldm, AbortConf { tc_op });
    assert_eq!(
        b.trace(),
        vec![line(TC, API, TcRollbackConf { transaction_id: t })]
    );
    b.assert_quiet();
    // Rolling back what no longer exists succeeds at once.
    b.deliver(API, TcRollbackReq { transaction_id: t });
    assert_eq!(
        b.trace(),
        vec![line(TC, API, TcRollbackConf { transaction_id: t })]
    );
}

#[test]
fn rollback_during_a_batch_drops_the_late_answers() {
    let mut b = Bench::started(config());
    let t = txn(API, 1);
    let request = b.read(t, 1, START, 1);
    b.deliver(API, request);
    let request = b.insert(t, 2, EXECUTE, 2);
    b.deliver(API, request);
    let ops = b.take_lqh_key_reqs();
    let [(ldm1, op1), (ldm2, op2)] = ops[..] else {
        panic!("two LQHKEYREQs")
    };
    b.deliver(API, TcRollbackReq { transaction_id: t });
    assert_eq!(
        b.trace(),
        vec![abort_line(ldm1, op1, t), abort_line(ldm2, op2, t),]
    );
    let data = b.section(&[(V, None)]);
    b.deliver(
        ldm1,
        LqhKeyConf {
            tc_op: op1,
            ldm_op: 1,
            data: Some(data),
            released: true,
        },
    );
    b.refused_by_ldm(ldm2, op2, ErrorCode::DuplicateKey);
    assert!(
        b.trace().is_empty(),
        "no TRANSIDAI, no TCKEYREF after a rollback"
    );
    b.deliver(ldm1, AbortConf { tc_op: op1 });
    b.deliver(ldm2, AbortConf { tc_op: op2 });
    assert_eq!(
        b.trace(),
        vec![line(TC, API, TcRollbackConf { transaction_id: t })]
    );
    b.assert_quiet();
}

#[test]
fn api_failure_aborts_that_clients_transactions_silently() {
    let mut b = Bench::started(config());
    // t1 idle with a prepared operation, t2 executing, t3 of another client.
    let (t1, t2, t3) = (txn(API, 1), txn(API, 2), txn(OTHER_API, 1));
    let request = b.insert(t1, 1, START | EXECUTE, 1);
    b.deliver(API, request);
    let [(ldm1, op1)] = b.take_lqh_key_reqs()[..] else {
        panic!("one LQHKEYREQ")
    };
    b.prepared(ldm1, op1, 1);
    b.trace();
    let request = b.insert(t2, 1, START | COMMIT, 2);
    b.deliver(API, request);
    let [(ldm2, op2)] = b.take_lqh_key_reqs()[..] else {
        panic!("one LQHKEYREQ")
    };
    let request = b.insert(t3, 1, START | EXECUTE, 3);
    b.deliver(OTHER_API, request);
    let [(ldm3, op3)] = b.take_lqh_key_reqs()[..] else {
        panic!("one LQHKEYREQ")
    };

    b.deliver(MEMBERSHIP, ApiFailRep { node: API.node });
    let mut trace = b.trace();
    trace.sort();
    let mut expected = vec![abort_line(ldm1, op1, t1), abort_line(ldm2, op2, t2)];
    expected.sort();
    assert_eq!(trace, expected);
    b.prepared(ldm2, op2, 2);
    b.deliver(ldm1, AbortConf { tc_op: op1 });
    b.deliver(ldm2, AbortConf { tc_op: op2 });
    assert!(b.trace().is_empty(), "nobody to answer");
    assert_eq!(
        b.tc.transactions_in_use(),
        1,
        "the other client's transaction lives on"
    );
    b.prepared(ldm3, op3, 3);
    assert_eq!(
        b.trace(),
        vec![line(
            TC,
            OTHER_API,
            TcKeyConf {
                transaction_id: t3,
                operations: 1,
                committed: false,
                gci: Gci(0),
                map_version: 1,
                row: None,
            }
        )]
    );
    b.deliver(OTHER_API, TcRollbackReq { transaction_id: t3 });
    b.deliver(ldm3, AbortConf { tc_op: op3 });
    assert_eq!(b.trace().len(), 2);
    b.assert_quiet();
}

#[test]
fn api_failure_during_commit_finishes_the_commit_without_replies() {
    let mut b = Bench::started(config());
    let t = txn(API, 1);
    let request = b.insert(t, 1, START | COMMIT, 1);
    b.deliver(API, request);
    let [(ldm, tc_op)] = b.take_lqh_key_reqs()[..] else {
        panic!("one LQHKEYREQ")
    };
    b.prepared(ldm, tc_op, 1);
    b.trace();
    b.deliver(MEMBERSHIP, ApiFailRep { node: API.node });
    assert!(b.trace().is_empty(), "a decided commit is not aborted");
    b.deliver(ldm, CommitConf { tc_op });
    assert_eq!(
        b.trace(),
        vec![line(
            TC,
            ldm,
            CompleteReq {
                ldm_op: 1,
                tc_op,
                transaction_id: t
            }
        )],
        "COMPLETE still runs, the TCKEYCONF is dropped"
    );
    b.deliver(ldm, CompleteConf { tc_op });
    b.assert_quiet();
}

/// The client streams a batch; an early operation fails. The client hears
/// of the abort once (one TCKEYREF): the rest of the batch, whether it
/// arrives while the abort runs or after, is dropped, not executed and not
/// refused once more; the operation closing the batch releases the record.
#[test]
fn operations_arriving_after_the_batch_failed_are_dropped_until_the_batch_ends() {
    let (mut b, t, ldm1, op1) = aborting_in_an_open_batch();
    // Aborting: the rest of the batch is dropped.
    let request = b.insert(t, 3, 0, 3);
    b.deliver(API, request);
    assert!(b.trace().is_empty());
    b.deliver(ldm1, AbortConf { tc_op: op1 });
    assert_eq!(b.trace(), vec![refusal_line(t, 2, ErrorCode::DuplicateKey)]);
    assert_awaiting_batch_end(&b, t);
    // Aborted: still dropped, sections and all.
    let free = b.ctx.pool().free_in_class(0);
    let request = b.insert(t, 4, 0, 4);
    b.deliver(API, request);
    assert!(b.trace().is_empty());
    assert_eq!(b.ctx.pool().free_in_class(0), free, "sections freed");
    assert_awaiting_batch_end(&b, t);
    // The batch's last operation ends the wait, silently.
    let request = b.insert(t, 5, COMMIT, 5);
    b.deliver(API, request);
    assert!(b.trace().is_empty());
    b.assert_quiet();
    assert_eq!(b.tc.counters().aborts, 1);
}

fn assert_awaiting_batch_end(b: &Bench, t: TransactionId) {
    assert_eq!(
        b.transaction_state(t),
        Some(TransactionState::AbortedAwaitingBatchEnd)
    );
    assert_eq!(b.tc.transactions_in_use(), 1);
    assert_eq!(b.tc.records.operations_in_use, 0, "operations released");
}

/// A transaction whose open batch failed at its second operation (a
/// duplicate key) while its first was prepared: the ABORT of the first,
/// `op1` at `ldm1`, is on its way.
fn aborting_in_an_open_batch() -> (Bench, TransactionId, BlockRef, u32) {
    let mut b = Bench::started(config());
    let t = txn(API, 1);
    let request = b.insert(t, 1, START, 1);
    b.deliver(API, request);
    let request = b.insert(t, 2, 0, 2);
    b.deliver(API, request);
    let [(ldm1, op1), (ldm2, op2)] = b.take_lqh_key_reqs()[..] else {
        panic!("two LQHKEYREQs")
    };
    b.prepared(ldm1, op1, 1);
    b.refused_by_ldm(ldm2, op2, ErrorCode::DuplicateKey);
    assert_eq!(b.trace(), vec![abort_line(ldm1, op1, t)]);
    (b, t, ldm1, op1)
}

/// A transaction whose open batch failed at its first operation (a
/// duplicate key): the client was refused and the record awaits the rest
/// of the batch. At `now_ms` 1000.
fn aborted_in_an_open_batch() -> (Bench, TransactionId) {
    let mut b = Bench::started(config());
    b.ctx.now_ms = 1000;
    let t = txn(API, 1);
    let request = b.insert(t, 1, START, 1);
    b.deliver(API, request);
    let [(ldm, tc_op)] = b.take_lqh_key_reqs()[..] else {
        panic!("one LQHKEYREQ")
    };
    b.refused_by_ldm(ldm, tc_op, ErrorCode::DuplicateKey);
    assert_eq!(b.trace(), vec![refusal_line(t, 1, ErrorCode::DuplicateKey)]);
    assert_awaiting_batch_end(&b, t);
    (b, t)
}

#[test]
fn a_batch_that_never_ends_after_its_abort_is_released_by_the_inactivity_timeout() {
    let (mut b, t) = aborted_in_an_open_batch();
    // One more operation of the batch, at 2000: the client is not silent.
    b.ctx.now_ms = 2000;
    let request = b.insert(t, 2, 0, 2);
    b.deliver(API, request);
    b.ctx.now_ms = 2000 + INACTIVE_MS - 1;
    b.deliver(TC, scan());
    assert_eq!(b.trace(), vec![rearm()], "not yet");
    assert_awaiting_batch_end(&b, t);
    b.ctx.now_ms = 2000 + INACTIVE_MS;
    b.deliver(TC, scan());
    assert_eq!(b.trace(), vec![rearm()], "released silently");
    b.assert_quiet();
    assert_eq!(b.tc.counters().inactivity_timeouts, 0, "nothing aborted");
    assert_eq!(b.tc.counters().aborts, 1);
}

#[test]
fn api_failure_releases_a_transaction_awaiting_its_batch_end() {
    let (mut b, _) = aborted_in_an_open_batch();
    b.deliver(
        MEMBERSHIP,
        ApiFailRep {
            node: OTHER_API.node,
        },
    );
    assert_eq!(b.tc.transactions_in_use(), 1, "another client's failure");
    b.deliver(MEMBERSHIP, ApiFailRep { node: API.node });
    assert!(b.trace().is_empty());
    b.assert_quiet();
}

#[test]
fn rollback_of_a_transaction_awaiting_its_batch_end_confirms_and_releases() {
    let (mut b, t) = aborted_in_an_open_batch();
    b.deliver(API, TcRollbackReq { transaction_id: t });
    assert_eq!(
        b.trace(),
        vec![line(TC, API, TcRollbackConf { transaction_id: t })]
    );
    b.assert_quiet();
}

/// The batch's last operation arrives while the abort still runs: nothing
/// is left to wait for, so the abort releases the record with its refusal.
#[test]
fn a_batch_that_ends_while_its_abort_runs_is_released_with_the_refusal() {
    let (mut b, t, ldm1, op1) = aborting_in_an_open_batch();
    let request = b.insert(t, 3, EXECUTE | COMMIT, 3);
    b.deliver(API, request);
    assert!(b.trace().is_empty());
    b.deliver(ldm1, AbortConf { tc_op: op1 });
    assert_eq!(b.trace(), vec![refusal_line(t, 2, ErrorCode::DuplicateKey)]);
    b.assert_quiet();
}

/// A locking read asked to tolerate a missing row (a locking scan's,
/// `tc_key_flags::IGNORE_MISSING`) answers the batch without it when the
/// primary says NoSuchRow, and the transaction commits; another error,
/// or a read without the flag, aborts as always.
#[test]
fn a_read_that_ignores_a_missing_row_goes_on_without_it() {
    use signal::signals::tc_key_flags::IGNORE_MISSING;
    let mut b = Bench::started(config());
    let t = txn(API, 1);
    let mut read = b.read(t, 31, START | IGNORE_MISSING, 1);
    read.lock = LockMode::Exclusive;
    b.deliver(API, read);
    let request = b.insert(t, 32, EXECUTE, 2);
    b.deliver(API, request);
    let ops = b.take_lqh_key_reqs();
    let [(ldm1, op1), (ldm2, op2)] = ops[..] else {
        panic!("two LQHKEYREQs")
    };
    b.refused_by_ldm(ldm1, op1, ErrorCode::NoSuchRow);
    assert_eq!(
        b.trace(),
        Vec::<String>::new(),
        "no abort: the insert is awaited"
    );
    b.prepared(ldm2, op2, 70);
    assert_eq!(b.trace(), vec![batch_conf_line(t, 2)]);
    assert_eq!(b.transaction_state(t), Some(TransactionState::Idle));
    b.deliver(API, TcRollbackReq { transaction_id: t });
    assert_eq!(b.trace(), vec![abort_line(ldm2, op2, t)]);
    b.deliver(ldm2, AbortConf { tc_op: op2 });
    b.trace();
    b.assert_quiet();

    // Another error aborts, flag or not.
    let t = txn(API, 2);
    let mut read = b.read(t, 41, START | EXECUTE | IGNORE_MISSING, 1);
    read.lock = LockMode::Shared;
    b.deliver(API, read);
    let [(ldm, op)] = b.take_lqh_key_reqs()[..] else {
        panic!("one LQHKEYREQ")
    };
    b.refused_by_ldm(ldm, op, ErrorCode::LockWaitTimeout);
    assert_eq!(
        b.trace(),
        vec![refusal_line(t, 41, ErrorCode::LockWaitTimeout)]
    );
    b.assert_quiet();
}

/// A bench whose partitions have a replica on node 3 too, with a
/// transaction of one prepared insert, idle, that node 3's failure is
/// aborting: its ldm and operation.
fn aborted_between_batches(t: TransactionId) -> (Bench, BlockRef, u32) {
    use signal::{NodeId, NodeSet};
    let mut b = Bench::unstarted(config());
    let mut map = (*b.map).clone();
    for placement in &mut map.partitions {
        placement.replicas = vec![NODE, NodeId(3)];
    }
    b.map = std::sync::Arc::new(map);
    b.start();
    b.ctx.sent.clear();
    let request = b.insert(t, 7, START | EXECUTE, 1);
    b.deliver(API, request);
    let [(ldm, op)] = b.take_lqh_key_reqs()[..] else {
        panic!("one LQHKEYREQ")
    };
    b.prepared(ldm, op, 40);
    b.trace();
    let membership_id = 2;
    b.deliver(
        MEMBERSHIP,
        NodeFailRep {
            membership_id,
            live: NodeSet::of([NODE]),
            failed: NodeSet::of([NodeId(3)]),
            president: NODE,
            starting: NodeSet::EMPTY,
            returned: NodeSet::EMPTY,
        },
    );
    b.deliver(MEMBERSHIP, NodeFailCompleteRep { membership_id });
    b.trace();
    (b, ldm, op)
}

#[test]
fn a_commit_of_a_transaction_a_node_failure_aborted_between_batches_hears_why() {
    let t = txn(API, 1);
    let (mut b, ldm, op) = aborted_between_batches(t);
    b.deliver(ldm, AbortConf { tc_op: op });
    b.trace();
    // The client, between batches, commits: it hears the abort's error,
    // not that the transaction is unknown, and the record is free.
    b.deliver(API, TcCommitReq { transaction_id: t });
    let refused: Vec<String> = b
        .trace()
        .into_iter()
        .filter(|line| line.contains("TcKeyRef"))
        .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(refused[0].contains("NodeFailureAbort"), "{refused:?}");
    assert_eq!(b.tc.transactions_in_use(), 0);
}

#[test]
fn a_rollback_while_a_node_failure_aborts_the_transaction_is_answered() {
    let t = txn(API, 1);
    let (mut b, ldm, op) = aborted_between_batches(t);
    b.deliver(API, TcRollbackReq { transaction_id: t });
    assert!(b.trace().is_empty(), "answered once the abort ends");
    b.deliver(ldm, AbortConf { tc_op: op });
    assert_eq!(
        b.trace(),
        [line(TC, API, TcRollbackConf { transaction_id: t })]
    );
    assert_eq!(b.tc.transactions_in_use(), 0);
}
