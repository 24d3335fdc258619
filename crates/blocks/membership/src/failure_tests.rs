//! The failure protocol's golden traces (`failure.rs`): a member reports
//! to the president, the president prepares, widens its proposal when a
//! member knows more, commits when every member prepared and the survival
//! rule lets the side continue, or orders it to shut down; a node left out
//! shuts down; stale and refused proposals; a link that breaks while the
//! cluster forms.

use crate::start::StartState;
use crate::tests::{
    connected, formed_by, formed_middle_node, local_blocks, member_of, membership_of,
    run_phase_one, ARBITRATION,
};
use crate::Membership;
use kernel::testing::{delayed_line, deliver, line, RecordingContext};
use kernel::Report;
use signal::signals::{
    ArbitrationConf, ArbitrationReq, CmFailCommitOrd, CmFailPrepareConf, CmFailPrepareRef,
    CmFailPrepareReq, CmFailRep, CmHeartbeat, CmNodeFailHandledRep, CmShutdownOrd, ContinueB,
    NodeFailCompleteRep, NodeFailConf, NodeFailRep, NodeLinkFailedRep,
};
use signal::{BlockKind, BlockRef, NodeId, NodeSet};

fn io_of(node: u16) -> BlockRef {
    BlockRef::new(NodeId(node), BlockKind::Io, 0)
}

fn arbitration_req(membership_id: u32, before: &[u16], side: &[u16]) -> ArbitrationReq {
    ArbitrationReq {
        membership_id,
        before: set(before),
        side: set(side),
    }
}

fn arbitration_conf(
    membership_id: u32,
    side: &[u16],
    answered: bool,
    granted: bool,
) -> ArbitrationConf {
    ArbitrationConf {
        membership_id,
        side: set(side),
        answered,
        granted,
    }
}

fn arbitration_timer() -> ContinueB {
    ContinueB {
        job: crate::formation::job::ARBITRATION_TIMER,
    }
}

fn set(ids: &[u16]) -> NodeSet {
    NodeSet::of(ids.iter().map(|&id| NodeId(id)))
}

fn link_failed(node: u16) -> NodeLinkFailedRep {
    NodeLinkFailedRep {
        node: NodeId(node),
        incarnation: 7,
    }
}

fn prepare(membership_id: u32, live: &[u16]) -> CmFailPrepareReq {
    CmFailPrepareReq {
        membership_id,
        live: set(live),
        starting: NodeSet::EMPTY,
        returned: NodeSet::EMPTY,
    }
}

fn commit(membership_id: u32, live: &[u16]) -> CmFailCommitOrd {
    CmFailCommitOrd {
        membership_id,
        live: set(live),
        starting: NodeSet::EMPTY,
        returned: NodeSet::EMPTY,
    }
}

fn prepared(membership_id: u32, failed: &[u16]) -> CmFailPrepareConf {
    CmFailPrepareConf {
        membership_id,
        failed: set(failed),
    }
}

/// Node `node` of a formed cluster of `nodes` (one node group).
pub(crate) fn formed(node: u16, nodes: &[u16], ctx: &mut RecordingContext) -> Membership {
    let mut member = member_of(node, nodes);
    let me = membership_of(node);
    run_phase_one(&mut member, ctx, node);
    for &peer in nodes.iter().filter(|&&peer| peer != node) {
        deliver(&mut member, ctx, me, connected(peer));
    }
    let president = nodes.iter().copied().min().expect("nodes");
    let formed = formed_by(NodeId(president));
    deliver(&mut member, ctx, membership_of(president), formed);
    ctx.take_trace();
    ctx.take_reports();
    member
}

fn shutdown_reason(reports: &[Report]) -> Option<&str> {
    reports.iter().find_map(|report| match report {
        Report::Shutdown(reason) => Some(reason.as_str()),
        _ => None,
    })
}

#[test]
fn golden_trace_of_a_failure_agreed_by_the_president() {
    // Node 2 of {1, 2, 3}: node 1 (the president) loses its link.
    let mut ctx = RecordingContext::new();
    let mut node = formed_middle_node(&mut ctx);
    let me = membership_of(2);
    assert_eq!(node.membership(), (1, set(&[1, 2, 3])));
    deliver(&mut node, &mut ctx, me, link_failed(1));
    let reports = ctx.take_reports();
    assert!(
        matches!(&reports[..], [Report::Log(line), Report::CutLinks(cut)]
            if line.starts_with("node 1 failed: its link broke") && *cut == set(&[1])),
        "{reports:?}"
    );
    // Its reads stop until the failure is agreed; node 2 is now the
    // lowest id alive: it proposes.
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(me, ldm_of(2), lease(0)),
            line(me, me, prepare(2, &[2, 3])),
            line(me, membership_of(3), prepare(2, &[2, 3])),
        ]
    );
    deliver(&mut node, &mut ctx, me, prepare(2, &[2, 3]));
    assert_eq!(ctx.take_trace(), vec![line(me, me, prepared(2, &[1]))]);
    deliver(&mut node, &mut ctx, me, prepared(2, &[1]));
    assert!(ctx.take_trace().is_empty(), "node 3 has not prepared");
    // A CONF for another id, or from a node not asked, changes nothing.
    deliver(&mut node, &mut ctx, membership_of(3), prepared(7, &[]));
    deliver(&mut node, &mut ctx, me, prepared(2, &[]));
    assert!(ctx.take_trace().is_empty());
    deliver(&mut node, &mut ctx, membership_of(3), prepared(2, &[1]));
    // Two of three nodes of one group: a majority, it continues.
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(me, me, commit(2, &[2, 3])),
            line(me, membership_of(3), commit(2, &[2, 3])),
        ]
    );
    deliver(&mut node, &mut ctx, me, commit(2, &[2, 3]));
    let reports = ctx.take_reports();
    assert!(
        matches!(&reports[..], [Report::Log(line), Report::Membership { membership_id: 2, live }]
            if line.starts_with("membership 2: {2, 3}, without {1}; president 2 (")
                && line.ends_with("ms after this node took the first of them for failed)")
                && *live == set(&[2, 3])),
        "{reports:?}"
    );
    assert_eq!(node.membership(), (2, set(&[2, 3])));
    assert_eq!(node.president(), NodeId(2));
    // Every block of the node hears of it, and confirms.
    let blocks = local_blocks(2);
    let failrep = || NodeFailRep {
        membership_id: 2,
        live: set(&[2, 3]),
        failed: set(&[1]),
        president: NodeId(2),
        starting: NodeSet::EMPTY,
        returned: NodeSet::EMPTY,
    };
    // And its reads run again under the lease its heartbeats got (from
    // the formation, at time 0).
    let formation_lease =
        u64::from(crate::tests::HEARTBEAT_MISSED - 1) * crate::tests::HEARTBEAT_MS;
    assert_eq!(
        ctx.take_trace(),
        blocks
            .iter()
            .map(|&block| line(me, block, failrep()))
            .chain([line(me, ldm_of(2), lease(formation_lease))])
            .collect::<Vec<_>>()
    );
    let confirmed = || NodeFailConf { membership_id: 2 };
    for &block in &blocks[..3] {
        deliver(&mut node, &mut ctx, block, confirmed());
    }
    // An older change's confirmation counts for nothing.
    deliver(
        &mut node,
        &mut ctx,
        blocks[3],
        NodeFailConf { membership_id: 1 },
    );
    assert!(
        ctx.take_trace().is_empty(),
        "the last block has not confirmed"
    );
    // Node 3 may have handled it first: its report waits for node 2's own.
    let handled = || CmNodeFailHandledRep { membership_id: 2 };
    deliver(&mut node, &mut ctx, membership_of(3), handled());
    assert!(ctx.take_trace().is_empty());
    deliver(&mut node, &mut ctx, blocks[3], confirmed());
    let mut expected = vec![line(me, membership_of(3), handled())];
    expected.extend(
        blocks
            .iter()
            .map(|&block| line(me, block, NodeFailCompleteRep { membership_id: 2 })),
    );
    assert_eq!(ctx.take_trace(), expected);
    // A repeated report changes nothing.
    deliver(&mut node, &mut ctx, membership_of(3), handled());
    assert!(ctx.take_trace().is_empty());
    // A commit repeated, or an older one, changes nothing.
    deliver(&mut node, &mut ctx, me, commit(2, &[2, 3]));
    assert!(ctx.take_reports().is_empty() && ctx.take_trace().is_empty());
    // Nothing from node 1 is heard any more.
    deliver(&mut node, &mut ctx, membership_of(1), prepare(9, &[1, 2]));
    deliver(
        &mut node,
        &mut ctx,
        membership_of(1),
        crate::tests::heartbeat(1),
    );
    assert!(ctx.take_reports().is_empty() && ctx.take_trace().is_empty());
    assert_eq!(node.state(), StartState::Running { index: 1 });
}

#[test]
fn a_member_reports_to_the_president_and_installs_its_commit() {
    // Node 3 of {1, 2, 3} loses node 2: it tells president 1.
    let mut ctx = RecordingContext::new();
    let mut node = formed(3, &[1, 2, 3], &mut ctx);
    let me = membership_of(3);
    deliver(&mut node, &mut ctx, me, link_failed(2));
    ctx.take_reports();
    let report = CmFailRep {
        membership_id: 1,
        failed: set(&[2]),
    };
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(me, ldm_of(3), lease(0)),
            line(me, membership_of(1), report)
        ]
    );
    // The president proposes; node 3 prepares and commits.
    deliver(&mut node, &mut ctx, membership_of(1), prepare(2, &[1, 3]));
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, membership_of(1), prepared(2, &[2]))]
    );
    // An older proposal now is refused with the highest prepared.
    deliver(&mut node, &mut ctx, membership_of(1), prepare(2, &[1, 3]));
    let refusal = CmFailPrepareRef {
        membership_id: 2,
        highest: 2,
    };
    assert_eq!(ctx.take_trace(), vec![line(me, membership_of(1), refusal)]);
    deliver(&mut node, &mut ctx, membership_of(1), commit(2, &[1, 3]));
    assert_eq!(node.membership(), (2, set(&[1, 3])));
    let trace = ctx.take_trace();
    assert_eq!(
        trace.len(),
        5,
        "NodeFailRep to each block, and the lease again: {trace:?}"
    );
    // This node's blocks and node 1's report complete it.
    for block in local_blocks(3) {
        deliver(
            &mut node,
            &mut ctx,
            block,
            NodeFailConf { membership_id: 2 },
        );
    }
    let handled = || CmNodeFailHandledRep { membership_id: 2 };
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, membership_of(1), handled())]
    );
    deliver(&mut node, &mut ctx, membership_of(1), handled());
    assert_eq!(
        ctx.take_trace().len(),
        4,
        "NodeFailCompleteRep to each block"
    );
}

#[test]
fn the_president_widens_its_proposal_when_a_member_knows_more() {
    // President 1 of {1, 2, 3, 4} (one group) loses node 4; node 2 has
    // also lost node 3 by then.
    let mut ctx = RecordingContext::new();
    let mut president = formed(1, &[1, 2, 3, 4], &mut ctx);
    let me = membership_of(1);
    deliver(&mut president, &mut ctx, me, link_failed(4));
    ctx.take_reports();
    ctx.take_trace();
    deliver(&mut president, &mut ctx, me, prepare(2, &[1, 2, 3]));
    assert_eq!(ctx.take_trace(), vec![line(me, me, prepared(2, &[4]))]);
    deliver(&mut president, &mut ctx, me, prepared(2, &[4]));
    deliver(
        &mut president,
        &mut ctx,
        membership_of(2),
        prepared(2, &[3, 4]),
    );
    let reports = ctx.take_reports();
    assert!(
        matches!(&reports[..], [Report::Log(line), Report::CutLinks(cut)]
            if line.starts_with("node 3 failed: node 2 reported it") && *cut == set(&[3])),
        "{reports:?}"
    );
    // A new round, with a higher id, without node 3.
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(me, me, prepare(3, &[1, 2])),
            line(me, membership_of(2), prepare(3, &[1, 2])),
        ]
    );
    // The old round's last CONF is ignored.
    deliver(
        &mut president,
        &mut ctx,
        membership_of(3),
        prepared(2, &[4]),
    );
    assert!(ctx.take_trace().is_empty());
    deliver(&mut president, &mut ctx, me, prepare(3, &[1, 2]));
    assert_eq!(ctx.take_trace(), vec![line(me, me, prepared(3, &[3, 4]))]);
    deliver(&mut president, &mut ctx, me, prepared(3, &[3, 4]));
    deliver(
        &mut president,
        &mut ctx,
        membership_of(2),
        prepared(3, &[3, 4]),
    );
    // Two of four in one group: exactly half, so the arbitrator decides;
    // it refuses (it let the other half continue).
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(me, io_of(1), arbitration_req(1, &[1, 2, 3, 4], &[1, 2])),
            delayed_line(me, me, arbitration_timer(), ARBITRATION.timeout_ms / 4),
        ]
    );
    deliver(
        &mut president,
        &mut ctx,
        io_of(1),
        arbitration_conf(1, &[1, 2], true, false),
    );
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(
                me,
                me,
                CmShutdownOrd {
                    membership_id: 3,
                    live: set(&[1, 2])
                }
            ),
            line(
                me,
                membership_of(2),
                CmShutdownOrd {
                    membership_id: 3,
                    live: set(&[1, 2])
                }
            ),
        ]
    );
    deliver(
        &mut president,
        &mut ctx,
        me,
        CmShutdownOrd {
            membership_id: 3,
            live: set(&[1, 2]),
        },
    );
    let reports = ctx.take_reports();
    let reason = shutdown_reason(&reports).expect("shut down");
    assert!(
        reason.contains("lost nodes {3, 4}")
            && reason.contains("only the arbitrator could let it continue, and it did not"),
        "{reason}"
    );
    assert_eq!(president.state(), StartState::ShutDown);
    // Shut down: nothing more.
    deliver(&mut president, &mut ctx, me, link_failed(2));
    assert!(ctx.take_reports().is_empty() && ctx.take_trace().is_empty());
}

#[test]
fn a_refused_proposal_is_made_again_above_the_highest() {
    let mut ctx = RecordingContext::new();
    let mut president = formed(1, &[1, 2, 3], &mut ctx);
    let me = membership_of(1);
    deliver(&mut president, &mut ctx, me, link_failed(3));
    ctx.take_reports();
    ctx.take_trace();
    let refusal = CmFailPrepareRef {
        membership_id: 2,
        highest: 5,
    };
    deliver(&mut president, &mut ctx, membership_of(2), refusal);
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(me, me, prepare(6, &[1, 2])),
            line(me, membership_of(2), prepare(6, &[1, 2])),
        ]
    );
}

#[test]
fn a_node_left_out_of_a_proposal_shuts_down() {
    let mut ctx = RecordingContext::new();
    let mut node = formed(3, &[1, 2, 3], &mut ctx);
    deliver(&mut node, &mut ctx, membership_of(1), prepare(2, &[1, 2]));
    let reports = ctx.take_reports();
    let reason = shutdown_reason(&reports).expect("shut down");
    assert!(
        reason.starts_with("president 1 declared this node failed"),
        "{reason}"
    );
    assert_eq!(node.state(), StartState::ShutDown);
}

#[test]
fn a_node_alone_of_three_shuts_down_as_a_minority() {
    // Node 3 of {1, 2, 3} loses both links (it was cut off).
    let mut ctx = RecordingContext::new();
    let mut node = formed(3, &[1, 2, 3], &mut ctx);
    let me = membership_of(3);
    deliver(&mut node, &mut ctx, me, link_failed(1));
    deliver(&mut node, &mut ctx, me, link_failed(2));
    ctx.take_reports();
    let trace = ctx.take_trace();
    assert_eq!(
        trace.last(),
        Some(&line(me, me, prepare(2, &[3]))),
        "{trace:#?}"
    );
    deliver(&mut node, &mut ctx, me, prepare(2, &[3]));
    assert_eq!(ctx.take_trace(), vec![line(me, me, prepared(2, &[1, 2]))]);
    deliver(&mut node, &mut ctx, me, prepared(2, &[1, 2]));
    let order = || CmShutdownOrd {
        membership_id: 2,
        live: set(&[3]),
    };
    assert_eq!(ctx.take_trace(), vec![line(me, me, order())]);
    deliver(&mut node, &mut ctx, me, order());
    let reports = ctx.take_reports();
    let reason = shutdown_reason(&reports).expect("shut down");
    assert!(
        reason.contains("has 1 of the 3 nodes, a minority"),
        "{reason}"
    );
}

#[test]
fn a_link_that_breaks_while_the_cluster_forms_stops_the_node() {
    let mut node = member_of(2, &[1, 2]);
    let mut ctx = RecordingContext::new();
    run_phase_one(&mut node, &mut ctx, 2);
    deliver(&mut node, &mut ctx, membership_of(2), connected(1));
    ctx.take_reports();
    deliver(&mut node, &mut ctx, membership_of(2), link_failed(1));
    let reports = ctx.take_reports();
    let reason = shutdown_reason(&reports).expect("shut down");
    assert!(
        reason.contains("broke while the cluster was forming"),
        "{reason}"
    );
}

/// Node `node` of a formed cluster of nodes 1 and 2 (one node group) whose link
/// to the other broke: it proposes itself alone, prepares, and asks the
/// arbitrator. Returns it with the trace and reports taken.
fn half_asking_the_arbitrator(
    node: u16,
    other: u16,
    arbitration: crate::ArbitrationSettings,
    ctx: &mut RecordingContext,
) -> Membership {
    let mut member = formed(node, &[1, 2], ctx);
    if !arbitration.enabled {
        member.arbitration = arbitration;
    }
    let me = membership_of(node);
    deliver(&mut member, ctx, me, link_failed(other));
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(me, ldm_of(node), lease(0)),
            line(me, me, prepare(2, &[node]))
        ]
    );
    deliver(&mut member, ctx, me, prepare(2, &[node]));
    assert_eq!(ctx.take_trace(), vec![line(me, me, prepared(2, &[other]))]);
    deliver(&mut member, ctx, me, prepared(2, &[other]));
    ctx.take_reports();
    member
}

#[test]
fn a_half_the_arbitrator_grants_commits_its_membership() {
    for (node, other) in [(1, 2), (2, 1)] {
        let mut ctx = RecordingContext::new();
        let mut member = half_asking_the_arbitrator(node, other, ARBITRATION, &mut ctx);
        let me = membership_of(node);
        assert_eq!(
            ctx.take_trace(),
            vec![
                line(me, io_of(node), arbitration_req(1, &[1, 2], &[node])),
                delayed_line(me, me, arbitration_timer(), ARBITRATION.timeout_ms / 4),
            ]
        );
        // An answer for another side or membership is not this one's.
        deliver(
            &mut member,
            &mut ctx,
            io_of(node),
            arbitration_conf(1, &[1, 2], true, true),
        );
        deliver(
            &mut member,
            &mut ctx,
            io_of(node),
            arbitration_conf(7, &[node], true, true),
        );
        assert!(ctx.take_trace().is_empty());
        deliver(
            &mut member,
            &mut ctx,
            io_of(node),
            arbitration_conf(1, &[node], true, true),
        );
        assert_eq!(ctx.take_trace(), vec![line(me, me, commit(2, &[node]))]);
        // A late second answer, or the timer, changes nothing.
        deliver(
            &mut member,
            &mut ctx,
            io_of(node),
            arbitration_conf(1, &[node], true, false),
        );
        deliver(&mut member, &mut ctx, me, arbitration_timer());
        assert!(ctx.take_trace().is_empty());
        deliver(&mut member, &mut ctx, me, commit(2, &[node]));
        assert_eq!(member.membership(), (2, set(&[node])));
        assert_ne!(member.state(), StartState::ShutDown);
    }
}

#[test]
fn a_half_the_arbitrator_refuses_or_cannot_answer_shuts_down() {
    for answered in [true, false] {
        let mut ctx = RecordingContext::new();
        let mut member = half_asking_the_arbitrator(1, 2, ARBITRATION, &mut ctx);
        let me = membership_of(1);
        ctx.take_trace();
        deliver(
            &mut member,
            &mut ctx,
            io_of(1),
            arbitration_conf(1, &[1], answered, false),
        );
        let order = || CmShutdownOrd {
            membership_id: 2,
            live: set(&[1]),
        };
        assert_eq!(ctx.take_trace(), vec![line(me, me, order())]);
        let logs = format!("{:?}", ctx.take_reports());
        let said = if answered {
            "refused it"
        } else {
            "could not be reached"
        };
        assert!(logs.contains(said), "{logs}");
        deliver(&mut member, &mut ctx, me, order());
        let reports = ctx.take_reports();
        let reason = shutdown_reason(&reports).expect("shut down");
        assert!(
            reason.contains("only the arbitrator could let it continue"),
            "{reason}"
        );
        assert_eq!(member.state(), StartState::ShutDown);
    }
}

#[test]
fn a_half_whose_arbitrator_is_silent_shuts_down_at_the_deadline() {
    let mut ctx = RecordingContext::new();
    let mut member = half_asking_the_arbitrator(2, 1, ARBITRATION, &mut ctx);
    let me = membership_of(2);
    ctx.take_trace();
    // Before the deadline the timer only re-arms.
    ctx.now_ms += ARBITRATION.timeout_ms - 1;
    deliver(&mut member, &mut ctx, me, arbitration_timer());
    assert_eq!(
        ctx.take_trace(),
        vec![delayed_line(
            me,
            me,
            arbitration_timer(),
            ARBITRATION.timeout_ms / 4
        )]
    );
    ctx.now_ms += 1;
    deliver(&mut member, &mut ctx, me, arbitration_timer());
    let order = CmShutdownOrd {
        membership_id: 2,
        live: set(&[2]),
    };
    assert_eq!(ctx.take_trace(), vec![line(me, me, order)]);
    assert!(format!("{:?}", ctx.take_reports()).contains("did not answer within 3000 ms"));
    // The answer, too late, is ignored.
    deliver(
        &mut member,
        &mut ctx,
        io_of(2),
        arbitration_conf(1, &[2], true, true),
    );
    assert!(ctx.take_trace().is_empty());
}

#[test]
fn without_an_arbitrator_a_half_shuts_down_without_asking() {
    let mut ctx = RecordingContext::new();
    let disabled = crate::ArbitrationSettings {
        enabled: false,
        timeout_ms: 3000,
    };
    let _member = half_asking_the_arbitrator(1, 2, disabled, &mut ctx);
    let order = CmShutdownOrd {
        membership_id: 2,
        live: set(&[1]),
    };
    assert_eq!(
        ctx.take_trace(),
        vec![line(membership_of(1), membership_of(1), order)]
    );
}

fn ldm_of(node: u16) -> BlockRef {
    BlockRef::new(NodeId(node), BlockKind::Ldm, 0)
}

fn lease(valid_until_ms: u64) -> signal::signals::ReadLeaseRep {
    signal::signals::ReadLeaseRep { valid_until_ms }
}

#[test]
fn the_read_lease_runs_from_each_acked_heartbeats_send_time() {
    let mut ctx = RecordingContext::new();
    let mut member = member_of(1, &[1, 2]);
    let me = membership_of(1);
    run_phase_one(&mut member, &mut ctx, 1);
    deliver(&mut member, &mut ctx, me, connected(2));
    ctx.take_trace();
    ctx.now_ms = 1_000;
    deliver(&mut member, &mut ctx, me, formed_by(NodeId(1)));
    // Formed: every node just heard from every other.
    let lease_ms = u64::from(crate::tests::HEARTBEAT_MISSED - 1) * crate::tests::HEARTBEAT_MS;
    let trace = ctx.take_trace();
    assert!(
        trace.contains(&line(me, ldm_of(1), lease(1_000 + lease_ms))),
        "{trace:?}"
    );
    // An ack runs the lease from its heartbeat's send time.
    let ack = |sent_at_ms| signal::signals::CmHeartbeatAck { sent_at_ms };
    ctx.now_ms = 1_400;
    deliver(&mut member, &mut ctx, membership_of(2), ack(1_250));
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, ldm_of(1), lease(1_250 + lease_ms))]
    );
    // An old ack (it waited out a pause) extends nothing.
    ctx.now_ms = 9_000;
    deliver(&mut member, &mut ctx, membership_of(2), ack(1_100));
    assert!(ctx.take_trace().is_empty());
    // A heartbeat is acked with its own send time.
    deliver(
        &mut member,
        &mut ctx,
        membership_of(2),
        CmHeartbeat {
            sequence: 3,
            sent_at_ms: 777,
        },
    );
    assert_eq!(ctx.take_trace(), vec![line(me, membership_of(2), ack(777))]);
    // A failure being agreed revokes the lease: the other side may be
    // agreeing that this node failed.
    deliver(&mut member, &mut ctx, me, link_failed(2));
    let trace = ctx.take_trace();
    assert!(trace.contains(&line(me, ldm_of(1), lease(0))), "{trace:?}");
    deliver(&mut member, &mut ctx, me, prepare(2, &[1]));
    deliver(&mut member, &mut ctx, me, prepared(2, &[2]));
    deliver(
        &mut member,
        &mut ctx,
        io_of(1),
        arbitration_conf(1, &[1], true, true),
    );
    ctx.take_trace();
    // Agreed alone: nobody can take over, reads are served again.
    deliver(&mut member, &mut ctx, me, commit(2, &[1]));
    let trace = ctx.take_trace();
    assert!(
        trace.contains(&line(me, ldm_of(1), lease(u64::MAX))),
        "{trace:?}"
    );
}

/// An API node registered with a node hears of each agreed failure
/// (API_NODE_FAILREP), so it stops waiting on a node that went silent;
/// once its connection ended (API_FAILREP), it is told nothing more.
#[test]
fn registered_api_nodes_hear_of_agreed_failures_until_they_disconnect() {
    let api = BlockRef::new(NodeId(200), BlockKind::Api, 0);
    for disconnected in [false, true] {
        let mut ctx = RecordingContext::new();
        let mut node = formed(1, &[1, 2, 3], &mut ctx);
        let me = membership_of(1);
        let registration = signal::signals::ApiRegReq {
            protocol_version: signal::signals::API_PROTOCOL_VERSION,
            token: signal::signals::ApiToken::NONE,
        };
        deliver(&mut node, &mut ctx, api, registration);
        if disconnected {
            let gone = signal::signals::ApiFailRep { node: NodeId(200) };
            deliver(&mut node, &mut ctx, me, gone);
        }
        ctx.take_trace();
        deliver(&mut node, &mut ctx, me, link_failed(3));
        deliver(&mut node, &mut ctx, me, prepared(2, &[3]));
        deliver(&mut node, &mut ctx, membership_of(2), prepared(2, &[3]));
        ctx.take_trace();
        deliver(&mut node, &mut ctx, me, commit(2, &[1, 2]));
        let told = line(
            me,
            api,
            signal::signals::ApiNodeFailRep {
                membership_id: 2,
                failed: set(&[3]),
            },
        );
        let trace = ctx.take_trace();
        assert_eq!(trace.contains(&told), !disconnected, "{trace:#?}");
    }
}

/// Node 4 of {2, 3, 4, 5}, president 2: a proposal from node 3 that
/// leaves 2 out, or a report from node 3 that 2 failed (node 3 lost only
/// its own link to 2, perhaps cut by 2 choosing it to leave), is not
/// followed while node 4 still hears 2; once 2 is silent to node 4 too,
/// it is.
#[test]
fn a_member_that_still_hears_its_president_follows_no_one_who_left_it_out() {
    let mut ctx = RecordingContext::new();
    let mut node = formed(4, &[2, 3, 4, 5], &mut ctx);
    let from_3 = membership_of(3);
    deliver(
        &mut node,
        &mut ctx,
        from_3,
        CmFailRep {
            membership_id: 1,
            failed: set(&[2]),
        },
    );
    deliver(&mut node, &mut ctx, from_3, prepare(2, &[3, 4, 5]));
    let reports = ctx.take_reports();
    assert!(
        matches!(&reports[..], [Report::Log(report), Report::Log(proposal)]
            if report.starts_with("ignored node 3's report of failed nodes {2}")
                && proposal.starts_with("ignored node 3's proposal of membership 2")),
        "{reports:?}"
    );
    assert!(ctx.take_trace().is_empty(), "no answer, no report onwards");
    assert_eq!(node.membership(), (1, set(&[2, 3, 4, 5])));
    // The president's own proposal, leaving node 3 out, is followed.
    deliver(
        &mut node,
        &mut ctx,
        membership_of(2),
        prepare(2, &[2, 4, 5]),
    );
    let trace = ctx.take_trace();
    assert!(
        trace.contains(&line(membership_of(4), membership_of(2), prepared(2, &[3]))),
        "{trace:?}"
    );
    // Once node 4 takes node 2 for failed itself (its link breaks), the
    // proposal it did not follow is followed.
    let mut ctx = RecordingContext::new();
    let mut node = formed(4, &[2, 3, 4, 5], &mut ctx);
    deliver(&mut node, &mut ctx, from_3, prepare(2, &[3, 4, 5]));
    assert!(ctx.take_trace().is_empty());
    deliver(&mut node, &mut ctx, membership_of(4), link_failed(2));
    let trace = ctx.take_trace();
    assert!(
        trace.contains(&line(membership_of(4), from_3, prepared(2, &[2]))),
        "{trace:?}"
    );
    // Followed the president's own proposal in between, node 4 drops the
    // ignored one: the president failing later does not bring it back.
    let mut ctx = RecordingContext::new();
    let mut node = formed(4, &[2, 3, 4, 5], &mut ctx);
    deliver(&mut node, &mut ctx, from_3, prepare(2, &[3, 4, 5]));
    deliver(
        &mut node,
        &mut ctx,
        membership_of(2),
        prepare(3, &[2, 4, 5]),
    );
    ctx.take_trace();
    deliver(&mut node, &mut ctx, membership_of(4), link_failed(2));
    let trace = ctx.take_trace();
    assert!(
        !trace.iter().any(|sent| sent.contains("-> 3:membership")),
        "the stale proposal is not followed: {trace:?}"
    );
    // Had node 2 been silent to node 4 for longer than a member counts as
    // hearing (3 intervals with 4 missed), node 3's proposal would have
    // been followed at once.
    let mut ctx = RecordingContext::new();
    let mut node = formed(4, &[2, 3, 4, 5], &mut ctx);
    ctx.now_ms = 4 * crate::tests::HEARTBEAT_MS;
    deliver(&mut node, &mut ctx, from_3, prepare(2, &[3, 4, 5]));
    let trace = ctx.take_trace();
    assert!(
        trace.contains(&line(membership_of(4), from_3, prepared(2, &[2]))),
        "{trace:?}"
    );
}
