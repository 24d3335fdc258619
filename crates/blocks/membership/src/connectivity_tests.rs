//! The connectivity check's golden traces (`connectivity.rs`): a
//! suspect that answers is not failed, a node that hears none of the
//! members it asks leaves, a suspect others still hear is a bad link the
//! president settles (or, without a settlement, the reporter leaves,
//! unless the suspect is the president: it asks again),
//! the president's choice of who leaves, and the read lease as the
//! earliest of every peer's acks.

use crate::failure_tests::formed;
use crate::tests::{
    formed_middle_node, heartbeat, heartbeat_timer, heartbeat_timer_of, membership_of,
    HEARTBEAT_MISSED, HEARTBEAT_MS,
};
use crate::Membership;
use kernel::testing::{deliver, line, RecordingContext};
use kernel::Report;
use signal::{BlockKind, BlockRef, NodeId, NodeSet};

fn set(ids: &[u16]) -> NodeSet {
    NodeSet::of(ids.iter().map(|&id| NodeId(id)))
}

/// Node 2 of nodes 1, 2 and 3 after node 1 missed its heartbeats: the
/// check (id 1) is asking node 3.
fn checking_node_1(ctx: &mut RecordingContext) -> Membership {
    let mut node = formed_middle_node(ctx);
    for _ in 0..HEARTBEAT_MISSED {
        heartbeat_timer(&mut node, ctx);
        deliver(&mut node, ctx, membership_of(3), heartbeat(1));
    }
    assert_eq!(node.suspected(), &[NodeId(1)]);
    ctx.take_trace();
    ctx.take_reports();
    node
}

#[test]
fn a_suspect_that_answers_the_check_is_not_taken_for_failed() {
    let mut ctx = RecordingContext::new();
    let mut node = checking_node_1(&mut ctx);
    // A late or foreign answer changes nothing.
    let answer = |check, hears| signal::signals::CmPingConf {
        check,
        suspect: NodeId(1),
        hears,
    };
    deliver(&mut node, &mut ctx, membership_of(3), answer(7, false));
    assert!(ctx.take_reports().is_empty() && ctx.take_trace().is_empty());
    deliver(&mut node, &mut ctx, membership_of(1), answer(1, true));
    let reports = ctx.take_reports();
    assert!(
        matches!(&reports[..], [Report::Log(line)] if line == "node 1 is not taken for failed: it answered"),
        "{reports:?}"
    );
    // Reads are served again (the lease of the heartbeats acked at 0).
    let ldm = BlockRef::new(NodeId(2), BlockKind::Ldm, 0);
    assert_eq!(
        ctx.take_trace(),
        [line(
            membership_of(2),
            ldm,
            signal::signals::ReadLeaseRep {
                valid_until_ms: u64::from(HEARTBEAT_MISSED - 1) * HEARTBEAT_MS
            }
        )]
    );
    // Its count starts again: suspected after another full limit.
    for _ in 0..HEARTBEAT_MISSED - 1 {
        heartbeat_timer(&mut node, &mut ctx);
        deliver(&mut node, &mut ctx, membership_of(3), heartbeat(1));
    }
    assert!(ctx.take_reports().is_empty());
}

#[test]
fn a_node_that_hears_none_of_the_members_it_asks_is_the_one_cut_off() {
    let mut ctx = RecordingContext::new();
    let mut node = checking_node_1(&mut ctx);
    // Node 3 stops answering too (its heartbeats stop): two intervals
    // later the check ends with no answer.
    for _ in 0..2 {
        heartbeat_timer(&mut node, &mut ctx);
    }
    let reports = ctx.take_reports();
    assert!(
        matches!(&reports[..], [Report::Shutdown(why)]
            if why.contains("none of the members it asked ({3}) answered")),
        "{reports:?}"
    );
}

#[test]
fn a_suspect_others_still_hear_is_a_bad_link_the_president_settles() {
    let mut ctx = RecordingContext::new();
    let mut node = checking_node_1(&mut ctx);
    let me = membership_of(2);
    deliver(
        &mut node,
        &mut ctx,
        membership_of(3),
        signal::signals::CmPingConf {
            check: 1,
            suspect: NodeId(1),
            hears: true,
        },
    );
    assert!(ctx.take_reports().is_empty(), "waits for the window");
    for _ in 0..2 {
        heartbeat_timer(&mut node, &mut ctx);
        deliver(&mut node, &mut ctx, membership_of(3), heartbeat(1));
    }
    // Node 3 hears node 1: node 2 asks president 1 which of them leaves.
    let reports = ctx.take_reports();
    assert!(
        matches!(&reports[..], [Report::Log(line)]
            if line.contains("{3} still hear it: a bad link; asking president 1")),
        "{reports:?}"
    );
    let report = || signal::signals::CmLinkCutRep {
        membership_id: 1,
        suspect: NodeId(1),
        withdraw: false,
    };
    assert!(ctx
        .take_trace()
        .contains(&line(me, membership_of(1), report())));
    // No settlement comes. The suspect is the president, which settles
    // this cut itself (it may choose to leave): node 2 does not leave too,
    // but asks again every four intervals (design 0019, finding 12).
    for round in 0..3 {
        for _ in 0..3 {
            heartbeat_timer(&mut node, &mut ctx);
            deliver(&mut node, &mut ctx, membership_of(3), heartbeat(1));
        }
        assert!(ctx.take_reports().is_empty());
        assert!(!ctx
            .take_trace()
            .iter()
            .any(|line| line.contains("CmLinkCutRep")));
        heartbeat_timer(&mut node, &mut ctx);
        assert!(ctx.take_reports().is_empty(), "round {round}");
        assert!(ctx
            .take_trace()
            .contains(&line(me, membership_of(1), report())));
        deliver(&mut node, &mut ctx, membership_of(3), heartbeat(1));
    }
}

/// Node 2 of 1, 2 and 3 (president 1) stopped hearing node 3, which node
/// 1 still hears: the cut is reported to node 1.
fn reported_cut_of_node_3(ctx: &mut RecordingContext) -> Membership {
    let mut node = formed_middle_node(ctx);
    for _ in 0..HEARTBEAT_MISSED {
        heartbeat_timer(&mut node, ctx);
        deliver(&mut node, ctx, membership_of(1), heartbeat(1));
    }
    assert_eq!(node.suspected(), &[NodeId(3)]);
    report_the_cut(&mut node, ctx, 3, 1);
    node
}

#[test]
fn a_reporter_whose_cut_to_another_member_is_not_settled_leaves_by_itself() {
    let mut ctx = RecordingContext::new();
    let mut node = reported_cut_of_node_3(&mut ctx);
    // The report may not have reached the president: four intervals
    // without a settlement and node 2 leaves by itself.
    for _ in 0..3 {
        heartbeat_timer(&mut node, &mut ctx);
        deliver(&mut node, &mut ctx, membership_of(1), heartbeat(1));
    }
    assert!(ctx.take_reports().is_empty());
    heartbeat_timer(&mut node, &mut ctx);
    let reports = ctx.take_reports();
    assert!(
        matches!(&reports[..], [Report::Shutdown(why)]
            if why.starts_with("this node does not hear node 3, which other members still hear")),
        "{reports:?}"
    );
}

#[test]
fn a_withdrawal_that_gets_no_answer_makes_the_reporter_leave() {
    let mut ctx = RecordingContext::new();
    let mut node = reported_cut_of_node_3(&mut ctx);
    deliver(&mut node, &mut ctx, membership_of(3), heartbeat(7));
    for _ in 0..5 {
        heartbeat_timer(&mut node, &mut ctx);
        deliver(&mut node, &mut ctx, membership_of(1), heartbeat(1));
    }
    let reports = ctx.take_reports();
    assert!(
        matches!(&reports[..], [Report::Shutdown(why)]
            if why.contains("the president did not confirm dropping the report")),
        "{reports:?}"
    );
}

#[test]
fn the_president_takes_out_the_node_that_hears_badly() {
    // Node 1, president of 1, 2 and 3, hears both; node 3 reports it
    // does not hear node 2, then node 1 (one node hearing badly).
    let mut ctx = RecordingContext::new();
    let mut president = formed(1, &[1, 2, 3], &mut ctx);
    let me = membership_of(1);
    let cut = |suspect| signal::signals::CmLinkCutRep {
        membership_id: 1,
        suspect: NodeId(suspect),
        withdraw: false,
    };
    deliver(&mut president, &mut ctx, membership_of(3), cut(2));
    deliver(&mut president, &mut ctx, membership_of(3), cut(2));
    heartbeat_timer_of(&mut president, &mut ctx, 1);
    deliver(&mut president, &mut ctx, membership_of(2), heartbeat(1));
    deliver(&mut president, &mut ctx, membership_of(3), heartbeat(1));
    assert!(ctx.take_reports().is_empty(), "gathers two intervals");
    heartbeat_timer_of(&mut president, &mut ctx, 1);
    let reports = ctx.take_reports();
    assert!(
        matches!(&reports[..], [Report::Log(line), Report::CutLinks(cut), ..]
            if line.starts_with("node 3 failed: the link between it and node 2 is bad")
                && *cut == NodeSet::of([NodeId(3)])),
        "{reports:?}"
    );
    let proposal = signal::signals::CmFailPrepareReq {
        membership_id: 2,
        live: NodeSet::of([NodeId(1), NodeId(2)]),
        starting: NodeSet::EMPTY,
        returned: NodeSet::EMPTY,
    };
    assert!(ctx
        .take_trace()
        .contains(&line(me, membership_of(2), proposal)));
}

#[test]
fn the_nodes_chosen_to_leave_close_every_cut_keeping_a_node_of_every_group() {
    use crate::connectivity::choose_leaving;
    let n = NodeId;
    let all = set(&[2, 3, 4, 5]);
    let groups = [set(&[2, 3]), set(&[4, 5])];
    // One node hearing nobody: it, however it is reported.
    let lossy = [(n(3), n(2)), (n(3), n(4)), (n(3), n(5))];
    assert_eq!(
        choose_leaving(&lossy, all, n(2), NodeSet::EMPTY, &groups),
        set(&[3])
    );
    // One cut: the reporter.
    assert_eq!(
        choose_leaving(&[(n(3), n(2))], all, n(2), NodeSet::EMPTY, &groups),
        set(&[3])
    );
    // The president reporting: it leaves (it may be the one that hears
    // badly; taking the other end out would leave it to do it again).
    assert_eq!(
        choose_leaving(&[(n(2), n(3))], all, n(2), NodeSet::EMPTY, &groups),
        set(&[2])
    );
    assert_eq!(
        choose_leaving(&[(n(4), n(5))], all, n(2), NodeSet::EMPTY, &groups),
        set(&[4])
    );
    // A majority ring (2-4 and 3-5 cut, each reported both ways): one
    // end of each, a node of each group kept.
    let ring = [(n(2), n(4)), (n(4), n(2)), (n(3), n(5)), (n(5), n(3))];
    let leaving = choose_leaving(&ring, all, n(2), NodeSet::EMPTY, &groups);
    assert_eq!(leaving.len(), 2, "{leaving}");
    let left = all.difference(leaving);
    assert!(
        groups
            .iter()
            .all(|group| !group.intersection(left).is_empty()),
        "{leaving}"
    );
    assert!(ring
        .iter()
        .all(|&(a, b)| !(left.contains(a) && left.contains(b))));
    // The same ring with one report lost on a cut link (5's of 2): the
    // president reported more, but cannot lead a change that takes it out
    // with another node: the other two ends leave.
    let lopsided = [(n(2), n(5)), (n(4), n(3)), (n(3), n(4))];
    assert_eq!(
        choose_leaving(&lopsided, all, n(2), NodeSet::EMPTY, &groups),
        set(&[3, 5])
    );
    // Cuts to a node already gone are settled.
    assert!(choose_leaving(&lossy, set(&[2, 4, 5]), n(2), NodeSet::EMPTY, &groups).is_empty());
}

#[test]
fn the_read_lease_is_the_earliest_of_every_peers_acks() {
    let mut ctx = RecordingContext::new();
    ctx.now_ms = 1_000;
    let mut member = formed(1, &[1, 2, 3], &mut ctx);
    let me = membership_of(1);
    let ldm = BlockRef::new(NodeId(1), BlockKind::Ldm, 0);
    let lease_ms = u64::from(HEARTBEAT_MISSED - 1) * HEARTBEAT_MS;
    let ack = |sent_at_ms| signal::signals::CmHeartbeatAck { sent_at_ms };
    // Node 2 acks: node 3 has not, and may suspect node 1 first.
    deliver(&mut member, &mut ctx, membership_of(2), ack(1_250));
    assert!(ctx.take_trace().is_empty());
    deliver(&mut member, &mut ctx, membership_of(3), ack(1_500));
    assert_eq!(
        ctx.take_trace(),
        vec![line(
            me,
            ldm,
            signal::signals::ReadLeaseRep {
                valid_until_ms: 1_250 + lease_ms
            }
        )]
    );
}

#[test]
fn a_president_every_other_member_reports_leaves_itself() {
    // Nodes 2 and 3 both stop hearing president 1 (it hears badly, or
    // its links out are bad): one node leaving closes both cuts, and it
    // is the president.
    let mut ctx = RecordingContext::new();
    let mut president = formed(1, &[1, 2, 3], &mut ctx);
    let cut = signal::signals::CmLinkCutRep {
        membership_id: 1,
        suspect: NodeId(1),
        withdraw: false,
    };
    deliver(&mut president, &mut ctx, membership_of(2), cut);
    let cut = signal::signals::CmLinkCutRep {
        membership_id: 1,
        suspect: NodeId(1),
        withdraw: false,
    };
    deliver(&mut president, &mut ctx, membership_of(3), cut);
    for _ in 0..2 {
        heartbeat_timer_of(&mut president, &mut ctx, 1);
        deliver(&mut president, &mut ctx, membership_of(2), heartbeat(1));
        deliver(&mut president, &mut ctx, membership_of(3), heartbeat(1));
    }
    let reports = ctx.take_reports();
    assert!(
        matches!(&reports[..], [Report::Shutdown(why)]
            if why.starts_with("as president, chose this node to leave (of {1})")),
        "{reports:?}"
    );
}

/// Node 2 checking node 1 (president of 1, 2, 3) with node 3 answering
/// that it hears node 1: after the window, the cut is reported to node 1.
fn reported_cut_of_node_1(ctx: &mut RecordingContext) -> Membership {
    let mut node = checking_node_1(ctx);
    report_the_cut(&mut node, ctx, 1, 3);
    node
}

/// Node 2, checking `suspect` (check 1), hears from `witness` that it
/// still hears the suspect: after the window, it reports the cut to
/// president 1.
fn report_the_cut(node: &mut Membership, ctx: &mut RecordingContext, suspect: u16, witness: u16) {
    let hears = signal::signals::CmPingConf {
        check: 1,
        suspect: NodeId(suspect),
        hears: true,
    };
    deliver(node, ctx, membership_of(witness), hears);
    for _ in 0..2 {
        heartbeat_timer(node, ctx);
        deliver(node, ctx, membership_of(witness), heartbeat(1));
    }
    let report = signal::signals::CmLinkCutRep {
        membership_id: 1,
        suspect: NodeId(suspect),
        withdraw: false,
    };
    assert!(ctx
        .take_trace()
        .contains(&line(membership_of(2), membership_of(1), report)));
    ctx.take_reports();
}

#[test]
fn a_reported_suspect_heard_again_is_not_acked_until_the_president_drops_the_report() {
    let mut ctx = RecordingContext::new();
    let mut node = reported_cut_of_node_1(&mut ctx);
    let me = membership_of(2);
    let ldm = BlockRef::new(NodeId(2), BlockKind::Ldm, 0);
    // Node 1 is heard again: its heartbeat gets no ack (its lease from
    // node 2 must stay run out while the president may act on the report).
    deliver(&mut node, &mut ctx, membership_of(1), heartbeat(7));
    assert!(ctx.take_trace().is_empty(), "no ack");
    // The next tick withdraws the report; reads stay refused meanwhile.
    heartbeat_timer(&mut node, &mut ctx);
    let withdrawal = signal::signals::CmLinkCutRep {
        membership_id: 1,
        suspect: NodeId(1),
        withdraw: true,
    };
    let trace = ctx.take_trace();
    assert!(
        trace.contains(&line(me, membership_of(1), withdrawal)),
        "{trace:#?}"
    );
    assert!(
        !trace.iter().any(|line| line.contains("ReadLeaseRep")),
        "{trace:#?}"
    );
    deliver(&mut node, &mut ctx, membership_of(1), heartbeat(8));
    assert!(ctx.take_trace().is_empty(), "still no ack");
    // An answer from another node than the president changes nothing.
    let conf = || signal::signals::CmLinkCutConf { suspect: NodeId(1) };
    deliver(&mut node, &mut ctx, membership_of(3), conf());
    assert!(ctx.take_reports().is_empty());
    // The president's answer ends the check: reads and acks again.
    deliver(&mut node, &mut ctx, membership_of(1), conf());
    let reports = ctx.take_reports();
    assert!(
        matches!(&reports[..], [Report::Log(line)] if line.contains("the president dropped the report")),
        "{reports:?}"
    );
    assert!(ctx
        .take_trace()
        .iter()
        .any(|line| line.starts_with(&format!("{me} -> {ldm} ReadLeaseRep"))));
    deliver(&mut node, &mut ctx, membership_of(1), heartbeat(9));
    assert_eq!(
        ctx.take_trace(),
        [line(
            me,
            membership_of(1),
            signal::signals::CmHeartbeatAck { sent_at_ms: 0 }
        )]
    );
}

#[test]
fn a_withdrawal_to_the_president_it_suspected_is_sent_again_until_answered() {
    let mut ctx = RecordingContext::new();
    let mut node = reported_cut_of_node_1(&mut ctx);
    deliver(&mut node, &mut ctx, membership_of(1), heartbeat(7));
    let withdrawal = line(
        membership_of(2),
        membership_of(1),
        signal::signals::CmLinkCutRep {
            membership_id: 1,
            suspect: NodeId(1),
            withdraw: true,
        },
    );
    let mut sent = 0;
    for _ in 0..9 {
        heartbeat_timer(&mut node, &mut ctx);
        deliver(&mut node, &mut ctx, membership_of(3), heartbeat(1));
        let trace = ctx.take_trace();
        sent += trace.iter().filter(|&entry| *entry == withdrawal).count();
    }
    // Sent at the first tick, and again four and eight intervals later;
    // node 2 stays (the president settles the cut, whichever it is).
    assert_eq!(sent, 3);
    assert!(ctx.take_reports().is_empty());
    let conf = signal::signals::CmLinkCutConf { suspect: NodeId(1) };
    deliver(&mut node, &mut ctx, membership_of(1), conf);
    let reports = ctx.take_reports();
    assert!(
        matches!(&reports[..], [Report::Log(line)] if line.contains("the president dropped the report")),
        "{reports:?}"
    );
}

#[test]
fn the_president_drops_a_withdrawn_cut_and_answers() {
    let mut ctx = RecordingContext::new();
    let mut president = formed(1, &[1, 2, 3], &mut ctx);
    let me = membership_of(1);
    let cut = |withdraw| signal::signals::CmLinkCutRep {
        membership_id: 1,
        suspect: NodeId(2),
        withdraw,
    };
    deliver(&mut president, &mut ctx, membership_of(3), cut(false));
    deliver(&mut president, &mut ctx, membership_of(3), cut(true));
    assert_eq!(
        ctx.take_trace(),
        [line(
            me,
            membership_of(3),
            signal::signals::CmLinkCutConf { suspect: NodeId(2) }
        )]
    );
    for _ in 0..3 {
        heartbeat_timer_of(&mut president, &mut ctx, 1);
        deliver(&mut president, &mut ctx, membership_of(2), heartbeat(1));
        deliver(&mut president, &mut ctx, membership_of(3), heartbeat(1));
    }
    assert!(ctx.take_reports().is_empty(), "nobody is taken out");
}

#[test]
fn a_suspect_heard_before_the_last_answer_is_not_taken_for_failed() {
    let mut ctx = RecordingContext::new();
    let mut node = checking_node_1(&mut ctx);
    // Node 1's heartbeat arrives (and is acked), then node 3 says it does
    // not hear node 1: the check must not fail a node it just acked.
    deliver(&mut node, &mut ctx, membership_of(1), heartbeat(5));
    let lost = signal::signals::CmPingConf {
        check: 1,
        suspect: NodeId(1),
        hears: false,
    };
    deliver(&mut node, &mut ctx, membership_of(3), lost);
    let reports = ctx.take_reports();
    assert!(
        matches!(&reports[..], [Report::Log(line)] if line == "node 1 is not taken for failed: it was heard again"),
        "{reports:?}"
    );
}

#[test]
fn the_choice_of_who_leaves_does_not_count_starting_nodes() {
    use crate::connectivity::choose_leaving;
    let n = NodeId;
    let groups = [set(&[2, 3]), set(&[4, 5])];
    // Node 5 is in its node restart: node 4 is its group's only data.
    // Node 4 reports it does not hear node 3: node 3 leaves, not node 4.
    let leaving = choose_leaving(
        &[(n(4), n(3))],
        set(&[2, 3, 4, 5]),
        n(2),
        set(&[5]),
        &groups,
    );
    assert_eq!(leaving, set(&[3]));
}
