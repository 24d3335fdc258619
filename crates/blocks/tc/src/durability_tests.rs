//! tc durability tests (docs/design/durability.md §2,
//! docs/design/testing.md §2), on the `Bench` of `tests`: the master dih's
//! GCP_FLUSH_REQ is answered once no transaction of its GCI or an earlier
//! one is still in its commit phase, and not held by later GCIs; API nodes'
//! GCI_WAIT_REQs are answered at once, when GCP_DURABLE_REP reports their
//! GCI complete, refused when the tc holds as many as it can, and dropped
//! when their API node fails.

use crate::tests::*;
use kernel::testing::line;
use signal::signals::*;
use signal::{BlockKind, BlockRef, ErrorCode, Gci, NodeId, TransactionId};

const G3: Gci = Gci::from_parts(6, 0);

fn flush_conf_line(gci: Gci) -> String {
    line(TC, DIH, GcpFlushConf { gci })
}

fn wait_conf_line(api: BlockRef, request_id: u32, complete_gci: Gci) -> String {
    line(
        TC,
        api,
        GciWaitConf {
            request_id,
            complete_gci,
        },
    )
}

fn wait_ref_line(to: BlockRef, request_id: u32, error: ErrorCode) -> String {
    line(TC, to, GciWaitRef { request_id, error })
}

/// A write transaction of `keys` (one insert each, the last committing),
/// every operation prepared: the tc has sent COMMIT for each. Returns the
/// (ldm, tc_op) of each operation.
fn committing(b: &mut Bench, transaction_id: TransactionId, keys: &[i32]) -> Vec<(BlockRef, u32)> {
    let api = BlockRef::new(transaction_id.api_node(), BlockKind::Api, 0);
    let last = keys.len() - 1;
    for (index, &k) in keys.iter().enumerate() {
        let mut flags = if index == 0 { START } else { 0 };
        if index == last {
            flags |= COMMIT;
        }
        let request = b.insert(transaction_id, index as u32, flags, k);
        b.deliver(api, request);
    }
    let operations = b.take_lqh_key_reqs();
    for &(ldm, tc_op) in &operations {
        b.prepared(ldm, tc_op, tc_op + 100);
    }
    let sent = b.trace();
    assert_eq!(sent.len(), keys.len(), "one COMMIT per operation: {sent:?}");
    assert!(
        sent.iter().all(|line| line.contains("CommitReq")),
        "{sent:?}"
    );
    operations
}

/// Plays the ldms: COMMITCONF, then COMPLETECONF once asked, for each.
fn commit_and_complete(b: &mut Bench, operations: &[(BlockRef, u32)]) {
    for &(ldm, tc_op) in operations {
        b.deliver(ldm, CommitConf { tc_op });
    }
    for &(ldm, tc_op) in operations {
        b.deliver(ldm, CompleteConf { tc_op });
    }
}

/// Moves the tc from its GCI to `gci`, as the master dih's switch does.
fn switch_to(b: &mut Bench, gci: Gci) {
    b.deliver(DIH, GcpPrepare { new_gci: gci });
    b.deliver(DIH, GcpCommit { gci });
    b.trace();
}

fn wait(b: &mut Bench, api: BlockRef, request_id: u32, gci: Gci) {
    b.deliver(api, GciWaitReq { request_id, gci });
}

#[test]
fn a_flush_with_nothing_in_its_commit_phase_is_answered_at_once() {
    let mut b = Bench::started(config());
    // A committed read commits with nothing to send: not counted.
    let t = txn(API, 1);
    let request = b.read(t, 0, START | COMMIT, 5);
    b.deliver(API, request);
    let [(ldm, tc_op)] = b.take_lqh_key_reqs()[..] else {
        panic!("one LQHKEYREQ")
    };
    b.deliver(
        ldm,
        LqhKeyConf {
            tc_op,
            ldm_op: 1,
            data: None,
            released: true,
        },
    );
    assert_eq!(b.trace(), vec![commit_conf_line(t, 1, Gci(0))]);
    switch_to(&mut b, G2);
    b.deliver(DIH, GcpFlushReq { gci: G1 });
    assert_eq!(b.trace(), vec![flush_conf_line(G1)]);
    b.assert_quiet();
}

#[test]
fn a_flush_waits_for_the_last_commit_phase_of_its_gci_and_not_for_later_gcis() {
    let mut b = Bench::started(config());
    let (k1, k2) = (
        1,
        (2..100)
            .find(|&k| b.ldm_of(k) != b.ldm_of(1))
            .expect("both ldms used"),
    );
    // Two transactions commit in G1, one of them with two operations.
    let (t1, t2, t3) = (txn(API, 1), txn(API, 2), txn(OTHER_API, 3));
    let first = committing(&mut b, t1, &[k1, k2]);
    let second = committing(&mut b, t2, &[3]);
    switch_to(&mut b, G2);
    // One more in G2: it must not hold the flush of G1.
    let third = committing(&mut b, t3, &[4]);
    assert_eq!(b.tc.transactions_in_commit_phase(), 3);

    b.deliver(DIH, GcpFlushReq { gci: G1 });
    assert!(b.trace().is_empty(), "G1 commits are still in flight");
    // Half of t1's operations committed: still in its commit phase.
    b.deliver(first[0].0, CommitConf { tc_op: first[0].1 });
    assert!(b.trace().is_empty());
    b.deliver(first[1].0, CommitConf { tc_op: first[1].1 });
    let trace = b.trace();
    assert!(
        !trace.contains(&flush_conf_line(G1)),
        "t2 is still committing: {trace:?}"
    );
    assert_eq!(trace[0], commit_conf_line(t1, 2, G1));
    // The last G1 commit phase ends: the client hears first, then the dih.
    b.deliver(second[0].0, CommitConf { tc_op: second[0].1 });
    let trace = b.trace();
    assert_eq!(trace.first(), Some(&commit_conf_line(t2, 1, G1)));
    assert_eq!(trace.last(), Some(&flush_conf_line(G1)));
    assert_eq!(
        trace
            .iter()
            .filter(|line| line.contains("GcpFlushConf"))
            .count(),
        1
    );
    assert_eq!(b.tc.transactions_in_commit_phase(), 1, "t3 of G2 remains");

    // The same for G2 (after the switch past it).
    switch_to(&mut b, G3);
    b.deliver(DIH, GcpFlushReq { gci: G2 });
    assert!(b.trace().is_empty(), "t3 of G2 is still committing");
    b.deliver(third[0].0, CommitConf { tc_op: third[0].1 });
    let trace = b.trace();
    assert_eq!(trace.last(), Some(&flush_conf_line(G2)));

    // COMPLETE is not part of the commit phase.
    for &(ldm, tc_op) in first.iter().chain(&second).chain(&third) {
        b.deliver(ldm, CompleteConf { tc_op });
    }
    assert!(b.trace().is_empty());
    b.assert_quiet();
}

#[test]
fn a_commit_held_for_the_gci_switch_counts_in_the_new_gci() {
    let mut b = Bench::started(config());
    b.deliver(DIH, GcpPrepare { new_gci: G2 });
    b.trace();
    let t = txn(API, 1);
    let request = b.insert(t, 0, START | COMMIT, 7);
    b.deliver(API, request);
    let [(ldm, tc_op)] = b.take_lqh_key_reqs()[..] else {
        panic!("one LQHKEYREQ")
    };
    b.prepared(ldm, tc_op, 1);
    assert_eq!(
        b.tc.transactions_in_commit_phase(),
        0,
        "no commit decision before GCP_COMMIT"
    );
    b.deliver(DIH, GcpCommit { gci: G2 });
    b.trace();
    assert_eq!(b.tc.transactions_in_commit_phase(), 1);
    // Its GCI is G2: a flush of G1 does not wait for it.
    b.deliver(DIH, GcpFlushReq { gci: G1 });
    assert_eq!(b.trace(), vec![flush_conf_line(G1)]);
    commit_and_complete(&mut b, &[(ldm, tc_op)]);
    b.trace();
    b.assert_quiet();
}

#[test]
fn a_repeated_flush_request_is_answered_once_drained() {
    let mut b = Bench::started(config());
    let t = txn(API, 1);
    let operations = committing(&mut b, t, &[1]);
    switch_to(&mut b, G2);
    b.deliver(DIH, GcpFlushReq { gci: G1 });
    b.deliver(DIH, GcpFlushReq { gci: G1 });
    assert!(b.trace().is_empty());
    commit_and_complete(&mut b, &operations);
    let trace = b.trace();
    assert_eq!(
        trace
            .iter()
            .filter(|line| **line == flush_conf_line(G1))
            .count(),
        1,
        "{trace:?}"
    );
    b.assert_quiet();
}

#[test]
#[should_panic(expected = "one GCI at a time")]
fn a_second_flush_for_another_gci_while_one_is_pending_is_a_broken_invariant() {
    let mut b = Bench::started(config());
    committing(&mut b, txn(API, 1), &[1]);
    switch_to(&mut b, G3);
    b.deliver(DIH, GcpFlushReq { gci: G1 });
    b.deliver(DIH, GcpFlushReq { gci: G2 });
}

#[test]
fn a_gci_wait_up_to_the_complete_gci_is_answered_at_once() {
    let mut b = Bench::started(config());
    // Nothing complete yet: GCI 0 (a commit that wrote nothing) is.
    wait(&mut b, API, 1, Gci(0));
    assert_eq!(b.trace(), vec![wait_conf_line(API, 1, Gci(0))]);
    b.deliver(DIH, GcpDurableRep { gci: G2 });
    assert!(b.trace().is_empty(), "nobody waits");
    assert_eq!(b.tc.complete_gci(), G2);
    wait(&mut b, API, 2, G1);
    wait(&mut b, OTHER_API, 3, G2);
    assert_eq!(
        b.trace(),
        vec![wait_conf_line(API, 2, G2), wait_conf_line(OTHER_API, 3, G2)]
    );
    b.assert_quiet();
}

#[test]
fn a_gci_wait_is_answered_once_its_gci_is_reported_complete() {
    let mut b = Bench::started(config());
    wait(&mut b, API, 1, G2);
    wait(&mut b, OTHER_API, 2, G3);
    wait(&mut b, API, 3, G1);
    assert!(b.trace().is_empty());
    assert_eq!(b.tc.gci_waits_held(), 3);
    b.deliver(DIH, GcpDurableRep { gci: G2 });
    let mut trace = b.trace();
    trace.sort();
    assert_eq!(
        trace,
        vec![wait_conf_line(API, 1, G2), wait_conf_line(API, 3, G2)],
        "every wait up to G2, with the complete GCI"
    );
    // An older report (overtaken) changes nothing.
    b.deliver(DIH, GcpDurableRep { gci: G1 });
    assert!(b.trace().is_empty());
    assert_eq!(b.tc.complete_gci(), G2);
    b.deliver(DIH, GcpDurableRep { gci: G3 });
    assert_eq!(b.trace(), vec![wait_conf_line(OTHER_API, 2, G3)]);
    b.assert_quiet();
}

#[test]
fn gci_waits_beyond_capacity_are_refused_and_room_returns() {
    let mut b = Bench::started(config());
    let capacity = config().max_transactions;
    for request_id in 0..capacity {
        wait(&mut b, API, request_id, G2);
    }
    assert!(b.trace().is_empty());
    wait(&mut b, OTHER_API, 99, G2);
    assert_eq!(
        b.trace(),
        vec![wait_ref_line(OTHER_API, 99, ErrorCode::TooManyGciWaits)]
    );
    // A wait that is answered at once needs no room.
    wait(&mut b, OTHER_API, 100, Gci(0));
    assert_eq!(b.trace(), vec![wait_conf_line(OTHER_API, 100, Gci(0))]);
    b.deliver(DIH, GcpDurableRep { gci: G2 });
    assert_eq!(b.trace().len(), capacity as usize);
    wait(&mut b, OTHER_API, 101, G3);
    assert!(b.trace().is_empty(), "room again");
    assert_eq!(b.tc.gci_waits_held(), 1);
    b.deliver(DIH, GcpDurableRep { gci: G3 });
    assert_eq!(b.trace(), vec![wait_conf_line(OTHER_API, 101, G3)]);
    b.assert_quiet();
}

#[test]
fn an_api_failure_drops_that_nodes_gci_waits() {
    let mut b = Bench::started(config());
    wait(&mut b, API, 1, G2);
    wait(&mut b, OTHER_API, 2, G2);
    wait(&mut b, API, 3, G3);
    b.deliver(MEMBERSHIP, ApiFailRep { node: API.node });
    assert!(b.trace().is_empty());
    assert_eq!(b.tc.gci_waits_held(), 1);
    b.deliver(DIH, GcpDurableRep { gci: G3 });
    assert_eq!(b.trace(), vec![wait_conf_line(OTHER_API, 2, G3)]);
    b.assert_quiet();
}

#[test]
fn gci_waits_before_start_or_from_a_block_are_refused() {
    let mut b = Bench::unstarted(config());
    wait(&mut b, API, 1, G1);
    assert_eq!(
        b.trace(),
        vec![wait_ref_line(API, 1, ErrorCode::NodeNotStarted)]
    );
    let mut b = Bench::started(config());
    let posing = BlockRef::new(NodeId(11), BlockKind::Dict, 0);
    wait(&mut b, posing, 2, G2);
    assert_eq!(
        b.trace(),
        vec![wait_ref_line(posing, 2, ErrorCode::BadRequest)]
    );
    // Any GCI, even one far in the future, is just held.
    wait(&mut b, API, 3, Gci(u64::MAX));
    assert!(b.trace().is_empty());
    b.deliver(DIH, GcpDurableRep { gci: Gci(u64::MAX) });
    assert_eq!(b.trace(), vec![wait_conf_line(API, 3, Gci(u64::MAX))]);
    b.assert_quiet();
}

#[test]
fn a_wait_for_a_gci_that_a_whole_cluster_restart_rolled_back_is_refused_for_good() {
    // The cluster restored 3/7; every GCI it had handed out up to 4/x was
    // lost, and the new run starts at 5/0.
    let restored = Gci::from_parts(3, 7);
    let start = Gci::from_parts(5, 0);
    let mut b = Bench::unstarted(config());
    for &phase in signal::phases::PHASES {
        b.deliver(MEMBERSHIP, StartPhaseReq { phase });
    }
    b.deliver(DIH, GcpDurableRep { gci: restored });
    b.deliver(DIH, GcpCommit { gci: start });
    b.trace();
    let rolled_back = [
        Gci::from_parts(3, 8),
        Gci::from_parts(4, 0),
        Gci::from_parts(4, u32::MAX),
    ];
    for (request_id, &gci) in rolled_back.iter().enumerate() {
        wait(&mut b, API, request_id as u32, gci);
        assert_eq!(
            b.trace(),
            vec![wait_ref_line(
                API,
                request_id as u32,
                ErrorCode::GciRolledBack
            )],
            "GCI {gci} was rolled back"
        );
    }
    // The restored GCI and what came before it are complete.
    wait(&mut b, API, 10, restored);
    wait(&mut b, API, 11, Gci::from_parts(2, 3));
    assert_eq!(
        b.trace(),
        vec![
            wait_conf_line(API, 10, restored),
            wait_conf_line(API, 11, restored)
        ]
    );
    // This run's GCIs are waited for, also once later GCIs pass the
    // rolled-back ones.
    wait(&mut b, API, 12, start);
    assert!(b.trace().is_empty(), "held until {start} is complete");
    let later = Gci::from_parts(6, 2);
    switch_to(&mut b, later);
    b.deliver(DIH, GcpDurableRep { gci: later });
    assert_eq!(b.trace(), vec![wait_conf_line(API, 12, later)]);
    wait(&mut b, API, 13, Gci::from_parts(4, 1));
    assert_eq!(
        b.trace(),
        vec![wait_ref_line(API, 13, ErrorCode::GciRolledBack)],
        "still rolled back once the complete GCI passed it"
    );
    b.assert_quiet();
}
