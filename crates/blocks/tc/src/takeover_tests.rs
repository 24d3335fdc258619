//! Coordinator take-over (`takeover.rs`): the president's first tc asks
//! every ldm of every survivor for the failed tcs' operations once every
//! survivor handled the failure, commits each transaction some replica
//! committed (with that GCI, then completes it) and aborts the rest, over
//! the live replicas; ignores answers of an earlier run, duplicates and
//! answers for transactions it never took over; and tells the master dih
//! when all are finished.

use crate::tests::{config, DIH, LDM_INSTANCES, MEMBERSHIP, TC};
use crate::Tc;
use kernel::testing::{deliver, line, RecordingContext};
use signal::signals::*;
use signal::{BlockKind, BlockRef, Gci, NodeId, NodeSet, TransactionId};

const G: Gci = Gci::from_parts(9, 3);

fn ldm(node: u16, instance: u16) -> BlockRef {
    BlockRef::new(NodeId(node), BlockKind::Ldm, instance)
}

/// Node 3 failed out of {2, 3, 4}; the tc (node 2, the president) has
/// handled it everywhere and sent its query.
fn taking_over() -> (Tc, RecordingContext) {
    let mut tc = Tc::new(config());
    let mut ctx = RecordingContext::new();
    deliver(
        &mut tc,
        &mut ctx,
        MEMBERSHIP,
        NodeFailRep {
            membership_id: 2,
            live: NodeSet::of([NodeId(2), NodeId(4)]),
            failed: NodeSet::of([NodeId(3)]),
            president: NodeId(2),
            starting: NodeSet::EMPTY,
            returned: NodeSet::EMPTY,
        },
    );
    ctx.take_trace();
    deliver(
        &mut tc,
        &mut ctx,
        MEMBERSHIP,
        NodeFailCompleteRep { membership_id: 2 },
    );
    let query = || TakeoverReq {
        membership_id: 2,
        failed: NodeSet::of([NodeId(3)]),
    };
    let expected: Vec<String> = [2, 4]
        .iter()
        .flat_map(|&node| {
            (0..LDM_INSTANCES).map(move |instance| line(TC, ldm(node, instance), query()))
        })
        .collect();
    assert_eq!(ctx.take_trace(), expected);
    (tc, ctx)
}

fn op_rep(
    membership_id: u32,
    tc_op: u32,
    transaction_id: TransactionId,
    state: u8,
    gci: Gci,
) -> TakeoverOpRep {
    TakeoverOpRep {
        membership_id,
        tc: DEAD_TC,
        tc_op,
        transaction_id,
        chain: ReplicaChain::new(&[NodeId(3), NodeId(2), NodeId(4)]),
        state,
        gci,
    }
}

const DEAD_TC: BlockRef = BlockRef::new(NodeId(3), BlockKind::Tc, 1);
const T1: TransactionId = TransactionId(10 << 48 | 1);
const T2: TransactionId = TransactionId(10 << 48 | 2);

fn resolve(tc_op: u32, transaction_id: TransactionId, step: u8, gci: Gci) -> ResolveReq {
    ResolveReq {
        tc: DEAD_TC,
        reply_to: TC,
        tc_op,
        transaction_id,
        chain: ReplicaChain::new(&[NodeId(2), NodeId(4)]),
        step,
        gci,
    }
}

fn conf(tc_op: u32, transaction_id: TransactionId, step: u8) -> ResolveConf {
    ResolveConf {
        tc: DEAD_TC,
        tc_op,
        transaction_id,
        step,
    }
}

#[test]
fn golden_trace_of_a_takeover_that_commits_one_transaction_and_aborts_another() {
    let (mut tc, mut ctx) = taking_over();
    use takeover_state::{COMMITTED, PREPARED};
    // T1 committed on node 4 only (its commit ran from the last replica
    // back and stopped at the failed primary); T2 prepared on both.
    deliver(
        &mut tc,
        &mut ctx,
        ldm(2, 1),
        op_rep(2, 7, T1, PREPARED, Gci(0)),
    );
    deliver(
        &mut tc,
        &mut ctx,
        ldm(2, 1),
        op_rep(2, 9, T2, PREPARED, Gci(0)),
    );
    deliver(&mut tc, &mut ctx, ldm(4, 1), op_rep(2, 7, T1, COMMITTED, G));
    deliver(
        &mut tc,
        &mut ctx,
        ldm(4, 1),
        op_rep(2, 9, T2, PREPARED, Gci(0)),
    );
    // An earlier run's answer counts for nothing.
    deliver(&mut tc, &mut ctx, ldm(4, 0), op_rep(1, 5, T2, COMMITTED, G));
    deliver(
        &mut tc,
        &mut ctx,
        ldm(4, 0),
        TakeoverConf {
            membership_id: 1,
            operations: 1,
        },
    );
    for (node, instance, operations) in [(2, 0, 0), (2, 1, 2), (4, 0, 0)] {
        deliver(
            &mut tc,
            &mut ctx,
            ldm(node, instance),
            TakeoverConf {
                membership_id: 2,
                operations,
            },
        );
        assert!(
            ctx.take_trace().is_empty(),
            "nothing is decided before every ldm answered"
        );
    }
    deliver(
        &mut tc,
        &mut ctx,
        ldm(4, 1),
        TakeoverConf {
            membership_id: 2,
            operations: 2,
        },
    );
    // Commit enters at the last live replica, abort at the first.
    assert_eq!(
        ctx.take_trace(),
        [
            line(TC, ldm(4, 1), resolve(7, T1, resolve_step::COMMIT, G)),
            line(TC, ldm(2, 1), resolve(9, T2, resolve_step::ABORT, Gci(0))),
        ]
    );
    deliver(
        &mut tc,
        &mut ctx,
        ldm(2, 1),
        conf(7, T1, resolve_step::COMMIT),
    );
    assert_eq!(
        ctx.take_trace(),
        [line(
            TC,
            ldm(4, 1),
            resolve(7, T1, resolve_step::COMPLETE, Gci(0))
        )]
    );
    // A duplicate, and an answer for a step not under way.
    deliver(
        &mut tc,
        &mut ctx,
        ldm(2, 1),
        conf(7, T1, resolve_step::COMMIT),
    );
    deliver(
        &mut tc,
        &mut ctx,
        ldm(2, 1),
        conf(9, T2, resolve_step::COMMIT),
    );
    deliver(
        &mut tc,
        &mut ctx,
        ldm(4, 1),
        conf(9, T2, resolve_step::ABORT),
    );
    assert!(ctx.take_trace().is_empty());
    deliver(
        &mut tc,
        &mut ctx,
        ldm(2, 1),
        conf(7, T1, resolve_step::COMPLETE),
    );
    assert_eq!(
        ctx.take_trace(),
        [line(
            TC,
            DIH,
            TakeoverCompleteRep {
                membership_id: 2,
                committed: 1,
                aborted: 1
            }
        )]
    );
    let counters = tc.counters();
    assert_eq!(
        (counters.takeover_commits, counters.takeover_aborts),
        (1, 1)
    );
}

#[test]
fn a_takeover_with_nothing_to_take_over_reports_at_once() {
    let (mut tc, mut ctx) = taking_over();
    for node in [2, 4] {
        for instance in 0..LDM_INSTANCES {
            deliver(
                &mut tc,
                &mut ctx,
                ldm(node, instance),
                TakeoverConf {
                    membership_id: 2,
                    operations: 0,
                },
            );
        }
    }
    assert_eq!(
        ctx.take_trace(),
        [line(
            TC,
            DIH,
            TakeoverCompleteRep {
                membership_id: 2,
                committed: 0,
                aborted: 0
            }
        )]
    );
}

#[test]
fn only_the_presidents_first_tc_takes_over() {
    for address in [
        BlockRef::new(NodeId(2), BlockKind::Tc, 1),
        BlockRef::new(NodeId(4), BlockKind::Tc, 0),
    ] {
        let mut tc = Tc::new(crate::TcConfig {
            address,
            ..config()
        });
        let mut ctx = RecordingContext::new();
        let membership = BlockRef::new(address.node, BlockKind::Membership, 0);
        deliver(
            &mut tc,
            &mut ctx,
            membership,
            NodeFailRep {
                membership_id: 2,
                live: NodeSet::of([NodeId(2), NodeId(4)]),
                failed: NodeSet::of([NodeId(3)]),
                president: NodeId(2),
                starting: NodeSet::EMPTY,
                returned: NodeSet::EMPTY,
            },
        );
        ctx.take_trace();
        deliver(
            &mut tc,
            &mut ctx,
            membership,
            NodeFailCompleteRep { membership_id: 2 },
        );
        assert!(ctx.take_trace().is_empty(), "{address} sends nothing");
    }
}
