//! membership's tests: the golden trace of a node start (the exact phase
//! requests, in order, and when each next phase begins), cluster formation
//! with 2 and 4 data nodes (at the president and elsewhere, connections
//! reported before and after phase 1), and API registration before and
//! after the node started.

use crate::start::{StartState, BEGIN, INITIALISE, RECORD_GCI as LAST};
use crate::{Membership, MembershipConfig};
use kernel::testing::{delayed_line, deliver, line, RecordingContext};
use kernel::{Context, Report};
use signal::signals::{
    ApiRegConf, ApiRegReq, CmHeartbeat, CmRegConf, CmRegReq, ContinueB, CreateTabReq, DropTabReq,
    GetTabInfoReq, LockMode, NodeConnectedRep, NodeStopReq, OperationKind, PresidentRep,
    StartPhaseConf, StartPhaseReq, TcCommitReq, TcDrainConf, TcDrainReq, TcKeyRef, TcKeyReq,
    TcRollbackReq,
};
use signal::{BlockKind, BlockRef, ErrorCode, Gci, NodeId, NodeSet, TransactionId};

const NODE: NodeId = NodeId(2);
const MEMBERSHIP: BlockRef = BlockRef::new(NODE, BlockKind::Membership, 0);
const DICT: BlockRef = BlockRef::new(NODE, BlockKind::Dict, 0);
const DIH: BlockRef = BlockRef::new(NODE, BlockKind::Dih, 0);
const TC0: BlockRef = BlockRef::new(NODE, BlockKind::Tc, 0);
const LDM0: BlockRef = BlockRef::new(NODE, BlockKind::Ldm, 0);
const LDM1: BlockRef = BlockRef::new(NODE, BlockKind::Ldm, 1);
const API: BlockRef = BlockRef::new(NodeId(100), BlockKind::Api, 0);
pub(crate) const HEARTBEAT_MS: u64 = 250;
pub(crate) const HEARTBEAT_MISSED: u32 = 4;
pub(crate) const API_HEARTBEAT_MISSED: u16 = 8;
/// An arbitrator is configured, as by default.
pub(crate) const ARBITRATION: crate::ArbitrationSettings = crate::ArbitrationSettings {
    enabled: true,
    timeout_ms: 3000,
};

/// The membership of a one-node cluster (node 2, so its own president).
fn membership() -> Membership {
    membership_with_tcs(1)
}

/// The same, the node running `tc_instances` tcs.
fn membership_with_tcs(tc_instances: u16) -> Membership {
    Membership::new(MembershipConfig {
        address: MEMBERSHIP,
        tc_instances,
        ldm_instances: 2,
        data_nodes: vec![(NODE, 0)],
        heartbeat_interval_ms: HEARTBEAT_MS,
        heartbeat_missed: HEARTBEAT_MISSED,
        api_heartbeat_missed: API_HEARTBEAT_MISSED,
        arbitration: ARBITRATION,
        joining: false,
    })
}

/// A registration with no system file (an initial start), from a node
/// connected to every node of `cluster`.
pub(crate) fn registration(node: NodeId, cluster: &[u16]) -> CmRegReq {
    CmRegReq {
        node,
        complete_gci: Gci(0),
        members: NodeSet::EMPTY,
        connected: set(cluster),
    }
}

/// The cluster formed under `president`, no node stale.
pub(crate) fn formed_by(president: NodeId) -> CmRegConf {
    CmRegConf {
        president,
        stale: NodeSet::EMPTY,
        restored_gci: Gci(0),
    }
}

/// One-node cluster formation: the node registers with itself.
fn form_alone(membership: &mut Membership, ctx: &mut RecordingContext) {
    assert_eq!(
        ctx.take_trace(),
        vec![line(MEMBERSHIP, MEMBERSHIP, registration(NODE, &[2]))]
    );
    deliver(membership, ctx, MEMBERSHIP, registration(NODE, &[2]));
    assert_eq!(
        ctx.take_trace(),
        vec![line(MEMBERSHIP, MEMBERSHIP, formed_by(NODE))]
    );
    deliver(membership, ctx, MEMBERSHIP, formed_by(NODE));
    assert_eq!(
        ctx.take_reports(),
        vec![Report::Membership {
            membership_id: 1,
            live: NodeSet::of([NODE])
        }],
        "membership 1 is installed as the cluster forms"
    );
}

/// The phase's requests to every block; the first phase after the
/// cluster formed comes after the president's announcement to the blocks
/// that have a master.
fn phase_requests(phase: u8) -> Vec<String> {
    let mut lines = Vec::new();
    if phase == INITIALISE + 1 {
        for block in [DICT, DIH] {
            lines.push(line(MEMBERSHIP, block, PresidentRep { president: NODE }));
        }
    }
    lines.extend(
        [DICT, DIH, TC0, LDM0, LDM1]
            .into_iter()
            .map(|block| line(MEMBERSHIP, block, StartPhaseReq { phase })),
    );
    lines
}

fn register(membership: &mut Membership, ctx: &mut RecordingContext) -> Vec<String> {
    deliver(
        membership,
        ctx,
        API,
        ApiRegReq {
            protocol_version: signal::signals::API_PROTOCOL_VERSION,
            token: signal::signals::ApiToken::NONE,
        },
    );
    ctx.take_trace()
}

#[test]
fn golden_trace_of_a_node_start() {
    let mut membership = membership();
    let mut ctx = RecordingContext::new();

    deliver(
        &mut membership,
        &mut ctx,
        MEMBERSHIP,
        StartPhaseReq { phase: BEGIN },
    );
    assert_eq!(ctx.take_trace(), phase_requests(1));

    for phase in 1..=LAST {
        // Answers arrive in any order; the next phase waits for the last.
        for block in [LDM1, DIH, TC0, DICT] {
            deliver(&mut membership, &mut ctx, block, StartPhaseConf { phase });
            assert!(
                ctx.take_trace().is_empty(),
                "phase {phase} still waits for ldm 0"
            );
        }
        assert_eq!(
            membership.state(),
            StartState::Running {
                index: phase as usize - 1
            }
        );
        deliver(&mut membership, &mut ctx, LDM0, StartPhaseConf { phase });
        if phase == 1 {
            assert_eq!(membership.state(), StartState::Forming);
            form_alone(&mut membership, &mut ctx);
        }
        if phase < LAST {
            assert_eq!(ctx.take_trace(), phase_requests(phase + 1));
            assert!(ctx.take_reports().is_empty());
        }
    }
    assert!(ctx.take_trace().is_empty(), "no phase after the last one");
    assert_eq!(ctx.take_reports(), vec![Report::NodeStarted]);
    assert_eq!(membership.state(), StartState::Started);
}

#[test]
fn api_registration_says_whether_the_node_serves() {
    let mut membership = membership();
    let mut ctx = RecordingContext::new();
    let not_started = line(
        MEMBERSHIP,
        API,
        ApiRegConf {
            started: false,
            tc_instances: 1,
            heartbeat_interval_ms: HEARTBEAT_MS as u32,
            api_heartbeat_missed: API_HEARTBEAT_MISSED,
        },
    );
    assert_eq!(
        register(&mut membership, &mut ctx),
        vec![not_started.clone()]
    );

    deliver(
        &mut membership,
        &mut ctx,
        MEMBERSHIP,
        StartPhaseReq { phase: BEGIN },
    );
    for phase in 1..LAST {
        for block in [DICT, DIH, TC0, LDM0, LDM1] {
            deliver(&mut membership, &mut ctx, block, StartPhaseConf { phase });
        }
        if phase == 1 {
            ctx.sent.retain(|sent| {
                let name = sent.envelope.signal.name();
                !name.starts_with("StartPhase") && name != "PresidentRep"
            });
            form_alone(&mut membership, &mut ctx);
        }
    }
    ctx.take_trace();
    assert_eq!(
        register(&mut membership, &mut ctx),
        vec![not_started],
        "the last phase is still running"
    );

    for block in [DICT, DIH, TC0, LDM0, LDM1] {
        deliver(
            &mut membership,
            &mut ctx,
            block,
            StartPhaseConf { phase: LAST },
        );
    }
    assert_eq!(
        register(&mut membership, &mut ctx),
        vec![line(
            MEMBERSHIP,
            API,
            ApiRegConf {
                started: true,
                tc_instances: 1,
                heartbeat_interval_ms: HEARTBEAT_MS as u32,
                api_heartbeat_missed: API_HEARTBEAT_MISSED,
            }
        )]
    );
}

#[test]
fn registration_from_a_data_node_block_is_ignored() {
    let mut membership = membership();
    let mut ctx = RecordingContext::new();
    deliver(
        &mut membership,
        &mut ctx,
        TC0,
        ApiRegReq {
            protocol_version: signal::signals::API_PROTOCOL_VERSION,
            token: signal::signals::ApiToken::NONE,
        },
    );
    assert!(ctx.take_trace().is_empty());
}

#[test]
fn misaddressed_transaction_request_gets_a_ref_not_a_panic() {
    let mut membership = membership();
    let mut ctx = RecordingContext::new();
    let transaction_id = TransactionId(100 << 48 | 1);
    let key = ctx.pool().copy_from(&[1, 2, 3, 4]).expect("pool has room");
    deliver(
        &mut membership,
        &mut ctx,
        API,
        TcKeyReq {
            transaction_id,
            client_op: 3,
            flags: 0,
            kind: OperationKind::Read,
            lock: LockMode::CommittedRead,
            table_id: 0,
            table_version: 1,
            key,
            attr: None,
        },
    );
    assert_eq!(
        ctx.take_trace(),
        vec![line(
            MEMBERSHIP,
            API,
            TcKeyRef {
                transaction_id,
                client_op: 3,
                error: ErrorCode::BadRequest,
                index_id: 0,
            }
        )]
    );
}

#[test]
#[should_panic(expected = "another phase")]
fn conf_for_another_phase_stops_the_node() {
    let mut membership = membership();
    let mut ctx = RecordingContext::new();
    deliver(
        &mut membership,
        &mut ctx,
        MEMBERSHIP,
        StartPhaseReq { phase: BEGIN },
    );
    deliver(&mut membership, &mut ctx, DICT, StartPhaseConf { phase: 2 });
}

#[test]
#[should_panic(expected = "only the runtime")]
fn start_from_another_block_stops_the_node() {
    let mut membership = membership();
    let mut ctx = RecordingContext::new();
    deliver(
        &mut membership,
        &mut ctx,
        DIH,
        StartPhaseReq { phase: BEGIN },
    );
}

#[test]
fn random_api_requests_in_every_start_state_are_answered_never_panicked_on() {
    let mut rng = stdx::mix::XorShift::new(5);
    let mut membership = membership();
    let mut ctx = RecordingContext::new();
    let senders = [
        API,
        BlockRef::new(NodeId(200), BlockKind::Api, 3),
        BlockRef::new(NodeId(100), BlockKind::Tc, 0),
    ];
    let mut phase_index = None;
    for round in 0..6000 {
        // Move the start along now and then: before, during and after it.
        if round % 500 == 499 {
            match phase_index {
                None => {
                    deliver(
                        &mut membership,
                        &mut ctx,
                        MEMBERSHIP,
                        StartPhaseReq { phase: BEGIN },
                    );
                    phase_index = Some(0);
                }
                Some(index) if index < usize::from(LAST) => {
                    let phase = index as u8 + 1;
                    for block in [DICT, DIH, TC0, LDM0, LDM1] {
                        deliver(&mut membership, &mut ctx, block, StartPhaseConf { phase });
                    }
                    if phase == 1 {
                        ctx.sent.clear();
                        deliver(
                            &mut membership,
                            &mut ctx,
                            MEMBERSHIP,
                            registration(NODE, &[2]),
                        );
                        let president = NODE;
                        deliver(&mut membership, &mut ctx, MEMBERSHIP, formed_by(president));
                    }
                    phase_index = Some(index + 1);
                }
                Some(_) => {}
            }
            ctx.sent.clear();
            ctx.reports.clear();
        }
        let from = senders[rng.below(senders.len() as u64) as usize];
        let transaction_id = TransactionId(rng.next_u64());
        let bytes: Vec<u8> = (0..rng.below(20)).map(|_| rng.next_u64() as u8).collect();
        let section = ctx.pool().copy_from(&bytes).expect("pool has room");
        let request_id = rng.next_u64() as u32;
        let signal: signal::Signal = match rng.below(7) {
            0 => ApiRegReq {
                // Half in this build's version, half in any other.
                protocol_version: if rng.below(2) == 0 {
                    signal::signals::API_PROTOCOL_VERSION
                } else {
                    rng.next_u64() as u16
                },
                token: signal::signals::ApiToken::NONE,
            }
            .into(),
            1 => TcKeyReq {
                transaction_id,
                client_op: rng.next_u64() as u32,
                flags: rng.below(8) as u8,
                kind: OperationKind::Insert,
                lock: LockMode::Exclusive,
                table_id: rng.next_u64() as u32,
                table_version: 1,
                key: section,
                attr: None,
            }
            .into(),
            2 => TcCommitReq { transaction_id }.into(),
            3 => TcRollbackReq { transaction_id }.into(),
            4 => CreateTabReq {
                request_id,
                definition: section,
            }
            .into(),
            5 => DropTabReq {
                request_id,
                name: section,
            }
            .into(),
            _ => GetTabInfoReq {
                request_id,
                name: section,
            }
            .into(),
        };
        let registration = matches!(signal, signal::Signal::ApiRegReq(_));
        let known_version = matches!(
            &signal,
            signal::Signal::ApiRegReq(request)
                if request.protocol_version == signal::signals::API_PROTOCOL_VERSION
        );
        deliver(&mut membership, &mut ctx, from, signal);
        let sent: Vec<_> = ctx.sent.drain(..).collect();
        if registration && from.kind != BlockKind::Api {
            assert!(sent.is_empty(), "only API nodes register");
            continue;
        }
        let [answer] = &sent[..] else {
            panic!("one answer expected, got {sent:?}");
        };
        assert_eq!(answer.envelope.to, from);
        match &answer.envelope.signal {
            signal::Signal::ApiRegConf(conf) => {
                assert!(registration && known_version);
                assert_eq!(conf.started, membership.state() == StartState::Started);
            }
            // A registration in another protocol version is refused.
            signal::Signal::ApiRegRef(refusal) => {
                assert!(registration && !known_version);
                assert_eq!(refusal.error, ErrorCode::BadRequest)
            }
            signal::Signal::TcKeyRef(refusal) => assert_eq!(refusal.error, ErrorCode::BadRequest),
            signal::Signal::SchemaRef(refusal) => {
                assert_eq!(refusal.error, ErrorCode::BadRequest)
            }
            other => panic!("unexpected answer {other:?}"),
        }
    }
    assert_eq!(membership.state(), StartState::Started);
}

/// Membership of a node of a cluster of `nodes` (ids), one tc and one ldm.
pub(crate) fn member_of(node: u16, nodes: &[u16]) -> Membership {
    Membership::new(MembershipConfig {
        address: membership_of(node),
        tc_instances: 1,
        ldm_instances: 1,
        data_nodes: nodes.iter().map(|&id| (NodeId(id), 0)).collect(),
        heartbeat_interval_ms: HEARTBEAT_MS,
        heartbeat_missed: HEARTBEAT_MISSED,
        api_heartbeat_missed: API_HEARTBEAT_MISSED,
        arbitration: ARBITRATION,
        joining: false,
    })
}

pub(crate) fn membership_of(node: u16) -> BlockRef {
    BlockRef::new(NodeId(node), BlockKind::Membership, 0)
}

pub(crate) fn local_blocks(node: u16) -> [BlockRef; 4] {
    let node = NodeId(node);
    [
        BlockRef::new(node, BlockKind::Dict, 0),
        BlockRef::new(node, BlockKind::Dih, 0),
        BlockRef::new(node, BlockKind::Tc, 0),
        BlockRef::new(node, BlockKind::Ldm, 0),
    ]
}

/// The phase's requests of node `node`'s membership to its blocks.
pub(crate) fn phase_requests_of(node: u16, phase: u8) -> Vec<String> {
    let mut lines = Vec::new();
    lines.extend(
        local_blocks(node)
            .into_iter()
            .map(|block| line(membership_of(node), block, StartPhaseReq { phase })),
    );
    lines
}

/// What node `node`'s membership sends once the cluster is formed (at
/// time 0): the president (node 1, the lowest id of every cluster here)
/// to dict and dih, the first heartbeat to every other member (`peers`),
/// the heartbeat timer, the first read lease to its ldm, and phase 2's
/// requests.
pub(crate) fn formed_requests_of(node: u16, peers: &[u16]) -> Vec<String> {
    let me = membership_of(node);
    let ldm = BlockRef::new(NodeId(node), BlockKind::Ldm, 0);
    let president = NodeId(1);
    let mut lines: Vec<String> = local_blocks(node)[..2]
        .iter()
        .map(|&block| line(me, block, PresidentRep { president }))
        .collect();
    lines.extend(
        peers
            .iter()
            .map(|&peer| line(me, membership_of(peer), heartbeat(1))),
    );
    lines.extend([
        delayed_line(me, me, ContinueB { job: 2 }, HEARTBEAT_MS),
        line(
            me,
            ldm,
            signal::signals::ReadLeaseRep {
                valid_until_ms: u64::from(HEARTBEAT_MISSED - 1) * HEARTBEAT_MS,
            },
        ),
    ]);
    lines.extend(phase_requests_of(node, 2));
    lines
}

/// Begins the start and answers phase 1 from every local block.
pub(crate) fn run_phase_one(membership: &mut Membership, ctx: &mut RecordingContext, node: u16) {
    let me = membership_of(node);
    deliver(membership, ctx, me, StartPhaseReq { phase: BEGIN });
    assert_eq!(ctx.take_trace(), phase_requests_of(node, 1));
    for block in local_blocks(node) {
        deliver(membership, ctx, block, StartPhaseConf { phase: 1 });
    }
}

pub(crate) fn connected(node: u16) -> NodeConnectedRep {
    NodeConnectedRep {
        node: NodeId(node),
        incarnation: 7,
    }
}

#[test]
fn golden_trace_of_two_node_formation_at_the_president() {
    let mut president = member_of(1, &[2, 1]);
    assert_eq!(
        president.president(),
        NodeId(1),
        "the lowest id, in any order"
    );
    let mut ctx = RecordingContext::new();
    let me = membership_of(1);

    // The peer's connection is reported before the start begins: kept.
    deliver(&mut president, &mut ctx, me, connected(2));
    assert!(ctx.take_trace().is_empty());
    run_phase_one(&mut president, &mut ctx, 1);
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, me, registration(NodeId(1), &[1, 2]))],
        "connected to every peer: registers at once"
    );
    assert_eq!(president.state(), StartState::Forming);

    deliver(
        &mut president,
        &mut ctx,
        me,
        registration(NodeId(1), &[1, 2]),
    );
    assert!(ctx.take_trace().is_empty(), "node 2 has not registered");
    deliver(
        &mut president,
        &mut ctx,
        membership_of(2),
        registration(NodeId(2), &[1, 2]),
    );
    let formed = formed_by(NodeId(1));
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(me, me, CmRegConf { ..formed }),
            line(me, membership_of(2), CmRegConf { ..formed }),
        ]
    );
    assert_eq!(president.state(), StartState::Forming);
    deliver(&mut president, &mut ctx, me, formed);
    assert_eq!(ctx.take_trace(), formed_requests_of(1, &[2]));
    assert_eq!(president.state(), StartState::Running { index: 1 });
}

#[test]
fn golden_trace_of_two_node_formation_at_the_other_node() {
    let mut node = member_of(2, &[1, 2]);
    let mut ctx = RecordingContext::new();
    let me = membership_of(2);
    run_phase_one(&mut node, &mut ctx, 2);
    assert_eq!(
        ctx.take_trace(),
        vec![waiting_report_timer(me)],
        "not connected to node 1 yet: waits, and will say so"
    );
    assert_eq!(node.state(), StartState::Forming);
    // The timer fires while node 1 is missing: node 1 is named, and the
    // report comes again later.
    deliver(&mut node, &mut ctx, me, waiting_report());
    assert_eq!(ctx.take_reports(), vec![Report::WaitingForNodes(1 << 1)]);
    assert_eq!(ctx.take_trace(), vec![waiting_report_timer(me)]);
    deliver(&mut node, &mut ctx, me, connected(1));
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, membership_of(1), registration(NodeId(2), &[1, 2]))]
    );
    deliver(&mut node, &mut ctx, me, connected(1));
    assert!(ctx.take_trace().is_empty(), "registers once");
    // Connected: a late timer reports nothing and stops.
    deliver(&mut node, &mut ctx, me, waiting_report());
    assert!(ctx.take_reports().is_empty() && ctx.take_trace().is_empty());
    deliver(&mut node, &mut ctx, membership_of(1), formed_by(NodeId(1)));
    assert_eq!(ctx.take_trace(), formed_requests_of(2, &[1]));
}

#[test]
fn four_node_formation_waits_for_every_connection_and_every_registration() {
    let nodes = [1, 2, 3, 4];
    let formed = formed_by(NodeId(1));

    // Node 3: connections before and after phase 1, in any order.
    let mut node = member_of(3, &nodes);
    let mut ctx = RecordingContext::new();
    let me = membership_of(3);
    deliver(&mut node, &mut ctx, me, connected(4));
    run_phase_one(&mut node, &mut ctx, 3);
    assert_eq!(ctx.take_trace(), vec![waiting_report_timer(me)]);
    deliver(&mut node, &mut ctx, me, connected(1));
    assert!(ctx.take_trace().is_empty(), "node 2 is not connected");
    deliver(&mut node, &mut ctx, me, waiting_report());
    assert_eq!(ctx.take_reports(), vec![Report::WaitingForNodes(1 << 2)]);
    ctx.take_trace();
    deliver(&mut node, &mut ctx, me, connected(2));
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, membership_of(1), registration(NodeId(3), &nodes))]
    );
    deliver(
        &mut node,
        &mut ctx,
        membership_of(1),
        CmRegConf { ..formed },
    );
    assert_eq!(ctx.take_trace(), formed_requests_of(3, &[1, 2, 4]));

    // The president: registrations in any order, the conf after the last.
    let mut president = member_of(1, &nodes);
    let mut ctx = RecordingContext::new();
    let me = membership_of(1);
    for id in [4, 2, 3] {
        deliver(&mut president, &mut ctx, me, connected(id));
    }
    for id in [3, 4] {
        let from = membership_of(id);
        deliver(
            &mut president,
            &mut ctx,
            from,
            registration(NodeId(id), &nodes),
        );
    }
    run_phase_one(&mut president, &mut ctx, 1);
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, me, registration(NodeId(1), &nodes))]
    );
    deliver(
        &mut president,
        &mut ctx,
        me,
        registration(NodeId(1), &nodes),
    );
    assert!(ctx.take_trace().is_empty(), "node 2 has not registered");
    let from = membership_of(2);
    deliver(
        &mut president,
        &mut ctx,
        from,
        registration(NodeId(2), &nodes),
    );
    assert_eq!(
        ctx.take_trace(),
        nodes
            .iter()
            .map(|&id| line(me, membership_of(id), CmRegConf { ..formed }))
            .collect::<Vec<_>>()
    );
    deliver(&mut president, &mut ctx, me, formed);
    assert_eq!(ctx.take_trace(), formed_requests_of(1, &[2, 3, 4]));
}

#[test]
fn registration_at_a_node_that_does_not_form_the_cluster_is_ignored() {
    let mut node = member_of(2, &[1, 2]);
    let mut ctx = RecordingContext::new();
    deliver(
        &mut node,
        &mut ctx,
        membership_of(1),
        registration(NodeId(1), &[1, 2]),
    );
    assert!(ctx.take_trace().is_empty());
    assert_eq!(node.state(), StartState::NotStarted);
}

#[test]
fn a_second_registration_is_ignored_never_a_panic() {
    let mut president = member_of(1, &[1, 2, 3]);
    let mut ctx = RecordingContext::new();
    let from = membership_of(2);
    deliver(
        &mut president,
        &mut ctx,
        from,
        registration(NodeId(2), &[1, 2, 3]),
    );
    deliver(
        &mut president,
        &mut ctx,
        from,
        registration(NodeId(2), &[1, 2, 3]),
    );
    assert!(ctx.take_trace().is_empty(), "node 3 has not registered");
    // Node 3 registers: one conf each, node 2 counted once.
    deliver(
        &mut president,
        &mut ctx,
        membership_of(3),
        registration(NodeId(3), &[1, 2, 3]),
    );
    assert!(
        ctx.take_trace().is_empty(),
        "node 1 itself has not registered"
    );
}

#[test]
#[should_panic(expected = "before this node registered")]
fn cluster_formed_before_registration_stops_the_node() {
    let mut node = member_of(2, &[1, 2]);
    let mut ctx = RecordingContext::new();
    run_phase_one(&mut node, &mut ctx, 2);
    deliver(&mut node, &mut ctx, membership_of(1), formed_by(NodeId(1)));
}

#[test]
#[should_panic(expected = "not a configured data node")]
fn connection_of_an_unknown_node_stops_the_node() {
    let mut node = member_of(2, &[1, 2]);
    let mut ctx = RecordingContext::new();
    deliver(&mut node, &mut ctx, membership_of(2), connected(9));
}

fn waiting_report() -> signal::signals::ContinueB {
    signal::signals::ContinueB {
        job: crate::formation::job::WAITING_REPORT,
    }
}

/// The timer a forming node arms to say which nodes it waits for.
fn waiting_report_timer(me: BlockRef) -> String {
    delayed_line(
        me,
        me,
        waiting_report(),
        crate::formation::WAITING_REPORT_MS,
    )
}

/// Node 2 of a cluster of 1, 2 and 3, formed: it sends heartbeats to
/// nodes 1 and 3 and watches both.
pub(crate) fn formed_middle_node(ctx: &mut RecordingContext) -> Membership {
    let mut node = member_of(2, &[3, 1, 2]);
    let me = membership_of(2);
    run_phase_one(&mut node, ctx, 2);
    deliver(&mut node, ctx, me, connected(1));
    deliver(&mut node, ctx, me, connected(3));
    let formed = formed_by(NodeId(1));
    deliver(&mut node, ctx, membership_of(1), formed);
    assert_eq!(
        ctx.take_trace().last(),
        formed_requests_of(2, &[1, 3]).last(),
        "formed"
    );
    ctx.take_reports();
    node
}

/// Heartbeat `sequence`, sent at time 0.
pub(crate) fn heartbeat(sequence: u32) -> CmHeartbeat {
    CmHeartbeat {
        sequence,
        sent_at_ms: 0,
    }
}

pub(crate) fn heartbeat_timer(node: &mut Membership, ctx: &mut RecordingContext) {
    heartbeat_timer_of(node, ctx, 2);
}

/// One heartbeat interval later, node `id`'s heartbeat timer.
pub(crate) fn heartbeat_timer_of(node: &mut Membership, ctx: &mut RecordingContext, id: u16) {
    ctx.now_ms += HEARTBEAT_MS;
    let me = membership_of(id);
    deliver(node, ctx, me, ContinueB { job: 2 });
}

#[test]
fn heartbeats_go_to_every_member_and_a_silent_one_is_checked_then_taken_for_failed() {
    let mut ctx = RecordingContext::new();
    let mut node = formed_middle_node(&mut ctx);
    let me = membership_of(2);
    // Each interval: the next heartbeat to nodes 1 and 3, the next timer.
    let sent_at = |sequence: u32| CmHeartbeat {
        sequence,
        sent_at_ms: u64::from(sequence - 1) * HEARTBEAT_MS,
    };
    for sequence in 2..=4 {
        heartbeat_timer(&mut node, &mut ctx);
        assert_eq!(
            ctx.take_trace(),
            vec![
                line(me, membership_of(1), sent_at(sequence)),
                line(me, membership_of(3), sent_at(sequence)),
                delayed_line(me, me, ContinueB { job: 2 }, HEARTBEAT_MS),
            ]
        );
    }
    // Three missed, then nodes 1 and 3 are heard: the counts start again.
    deliver(&mut node, &mut ctx, membership_of(1), heartbeat(9));
    deliver(&mut node, &mut ctx, membership_of(3), heartbeat(9));
    assert!(node.suspected().is_empty());
    // Node 3 goes on; a heartbeat from another block of node 1 is no
    // sign of life of its membership.
    for _ in 0..HEARTBEAT_MISSED - 1 {
        heartbeat_timer(&mut node, &mut ctx);
        deliver(&mut node, &mut ctx, membership_of(3), heartbeat(1));
        let dih_of_1 = BlockRef::new(NodeId(1), BlockKind::Dih, 0);
        deliver(&mut node, &mut ctx, dih_of_1, heartbeat(1));
    }
    assert!(
        node.suspected().is_empty(),
        "missed {}",
        HEARTBEAT_MISSED - 1
    );
    assert!(ctx.take_reports().is_empty());
    ctx.take_trace();
    // The fourth: node 1 is suspected, and node 2 asks node 3 (and node
    // 1) whether it still hears it; no read is served meanwhile.
    heartbeat_timer(&mut node, &mut ctx);
    assert_eq!(node.suspected(), &[NodeId(1)]);
    let reports = ctx.take_reports();
    assert!(
        matches!(&reports[..], [Report::Log(line)]
            if line.starts_with("node 1 silent for") && line.contains("asking {3}")),
        "{reports:?}"
    );
    let ping = || signal::signals::CmPingReq {
        check: 1,
        suspect: NodeId(1),
    };
    let revoked = signal::signals::ReadLeaseRep { valid_until_ms: 0 };
    let ldm = BlockRef::new(NodeId(2), BlockKind::Ldm, 0);
    assert_eq!(
        ctx.take_trace()[3..],
        [
            line(me, membership_of(1), ping()),
            line(me, membership_of(3), ping()),
            line(me, ldm, revoked),
        ]
    );
    // Node 3 does not hear it either: taken for failed at once, and node
    // 2, the lowest id left, proposes the membership without node 1
    // (failure_tests has the protocol).
    let answer = signal::signals::CmPingConf {
        check: 1,
        suspect: NodeId(1),
        hears: false,
    };
    deliver(&mut node, &mut ctx, membership_of(3), answer);
    let reports = ctx.take_reports();
    assert!(
        matches!(&reports[..], [Report::Log(line), Report::CutLinks(cut)]
            if line.starts_with("node 1 failed: missed 4 heartbeats") && *cut == NodeSet::of([NodeId(1)])),
        "{reports:?}"
    );
    let proposal = || signal::signals::CmFailPrepareReq {
        membership_id: 2,
        live: NodeSet::of([NodeId(2), NodeId(3)]),
        starting: NodeSet::EMPTY,
        returned: NodeSet::EMPTY,
    };
    assert_eq!(
        ctx.take_trace(),
        [
            line(me, me, proposal()),
            line(me, membership_of(3), proposal())
        ]
    );
    // Suspected once; the heartbeats to node 3 go on; node 1 is no
    // longer heard at all.
    heartbeat_timer(&mut node, &mut ctx);
    deliver(&mut node, &mut ctx, membership_of(1), heartbeat(10));
    assert!(ctx.take_reports().is_empty());
    assert_eq!(node.suspected(), &[NodeId(1)]);
    assert_eq!(ctx.take_trace().len(), 2);
}

#[test]
fn a_heartbeat_before_the_cluster_is_formed_is_a_sign_of_life_and_nothing_else() {
    let mut node = member_of(2, &[1, 2]);
    let mut ctx = RecordingContext::new();
    deliver(&mut node, &mut ctx, membership_of(1), heartbeat(1));
    run_phase_one(&mut node, &mut ctx, 2);
    deliver(&mut node, &mut ctx, membership_of(1), heartbeat(2));
    ctx.take_trace();
    assert!(ctx.take_reports().is_empty());
    assert!(node.suspected().is_empty());
}

fn set(ids: &[u16]) -> NodeSet {
    NodeSet::of(ids.iter().map(|&id| NodeId(id)))
}

/// A three-node cluster restarting after node 1 failed and nodes 2 and 3
/// made GCI 9 durable without it: node 1 (the lowest id) forms the
/// cluster, finds itself stale, names node 2 president and leaves itself
/// out.
#[test]
fn the_forming_node_leaves_out_stale_nodes_and_names_the_lowest_up_to_date_president() {
    let nodes = [1, 2, 3];
    let mut forming = member_of(1, &nodes);
    let mut ctx = RecordingContext::new();
    let me = membership_of(1);
    for peer in [2, 3] {
        deliver(&mut forming, &mut ctx, me, connected(peer));
    }
    run_phase_one(&mut forming, &mut ctx, 1);
    deliver(
        &mut forming,
        &mut ctx,
        local_blocks(1)[1],
        signal::signals::SystemFileRep {
            complete_gci: Gci(3),
            members: set(&[1, 2, 3]),
        },
    );
    ctx.take_trace();
    let reports = [
        (1, 3, &[1, 2, 3][..]),
        (2, 9, &[2, 3][..]),
        (3, 9, &[2, 3][..]),
    ];
    for (node, gci, members) in reports {
        let request = CmRegReq {
            node: NodeId(node),
            complete_gci: Gci(gci),
            members: set(members),
            connected: NodeSet::EMPTY,
        };
        deliver(&mut forming, &mut ctx, membership_of(node), request);
    }
    let formed = CmRegConf {
        president: NodeId(2),
        stale: set(&[1]),
        restored_gci: Gci(9),
    };
    assert_eq!(
        ctx.take_trace(),
        nodes
            .iter()
            .map(|&node| line(me, membership_of(node), CmRegConf { ..formed }))
            .collect::<Vec<_>>()
    );
    // The forming node itself is stale: it shuts down, saying why, once
    // both nodes going on cut its links (they installed membership 1).
    deliver(&mut forming, &mut ctx, me, formed);
    let leaves = || signal::signals::CmStaleRep {
        restored_gci: Gci(9),
    };
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(me, membership_of(2), leaves()),
            line(me, membership_of(3), leaves()),
        ],
        "it tells the nodes going on that it leaves, and runs no further phase"
    );
    assert_ne!(
        forming.state(),
        StartState::ShutDown,
        "node 3 has not cut it"
    );
    for peer in [2, 3] {
        assert!(ctx.take_reports().is_empty());
        let cut = signal::signals::NodeLinkFailedRep {
            node: NodeId(peer),
            incarnation: 7,
        };
        deliver(&mut forming, &mut ctx, me, cut);
    }
    assert_eq!(forming.state(), StartState::ShutDown);
    let reasons: Vec<String> = ctx
        .take_reports()
        .into_iter()
        .filter_map(|report| match report {
            Report::Shutdown(reason) => Some(reason),
            _ => None,
        })
        .collect();
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(
        reasons[0].contains("ends at GCI 0/3")
            && reasons[0].contains("before GCI 0/9")
            && reasons[0].contains("led by node 2")
            && reasons[0].contains("node restart"),
        "{reasons:?}"
    );
    assert!(ctx.take_trace().is_empty());
}

/// At an up-to-date node of the same start: membership 1 is nodes 2 and
/// 3, node 2 is the president, every block hears that node 1 is out (as
/// for a failure), and the heartbeats leave it out.
#[test]
fn an_up_to_date_node_installs_the_membership_without_the_stale_ones() {
    let nodes = [1, 2, 3];
    let mut node = member_of(3, &nodes);
    let mut ctx = RecordingContext::new();
    let me = membership_of(3);
    for peer in [1, 2] {
        deliver(&mut node, &mut ctx, me, connected(peer));
    }
    run_phase_one(&mut node, &mut ctx, 3);
    ctx.take_trace();
    let formed = CmRegConf {
        president: NodeId(2),
        stale: set(&[1]),
        restored_gci: Gci(9),
    };
    deliver(&mut node, &mut ctx, membership_of(1), formed);
    assert_eq!(node.state(), StartState::Running { index: 1 });
    assert_eq!(node.membership(), (1, set(&[2, 3])));
    assert_eq!(node.president(), NodeId(2));
    assert!(
        !ctx.take_reports()
            .iter()
            .any(|report| matches!(report, Report::CutLinks(_))),
        "the stale node's link stays until it says it heard the verdict"
    );
    let trace = ctx.take_trace();
    for block in &local_blocks(3)[..2] {
        let announced = line(
            me,
            *block,
            PresidentRep {
                president: NodeId(2),
            },
        );
        assert!(trace.contains(&announced), "{trace:?}");
    }
    for block in local_blocks(3) {
        let out = line(
            me,
            block,
            signal::signals::NodeFailRep {
                membership_id: 1,
                live: set(&[2, 3]),
                failed: set(&[1]),
                president: NodeId(2),
                starting: NodeSet::EMPTY,
                returned: NodeSet::EMPTY,
            },
        );
        assert!(trace.contains(&out), "{trace:?}");
    }
    assert!(
        trace.contains(&line(me, membership_of(2), heartbeat(1))),
        "node 3 heartbeats node 2: {trace:?}"
    );
    assert!(
        !trace.iter().any(|line| line.contains("-> 1:membership")),
        "nothing goes to the stale node: {trace:?}"
    );
    // It heard the verdict and leaves: its link is cut, its signal to shut
    // down.
    let leaves = signal::signals::CmStaleRep {
        restored_gci: Gci(9),
    };
    deliver(&mut node, &mut ctx, membership_of(1), leaves);
    assert_eq!(ctx.take_reports(), vec![Report::CutLinks(set(&[1]))]);
    // Its link breaking later is no failure of this membership.
    deliver(
        &mut node,
        &mut ctx,
        me,
        signal::signals::NodeLinkFailedRep {
            node: NodeId(1),
            incarnation: 7,
        },
    );
    assert_eq!(node.membership(), (1, set(&[2, 3])));
    assert_ne!(node.state(), StartState::ShutDown);
}

/// A graceful stop: every local tc is asked to drain; the stop may go on
/// once each answered, or when the limit passes with one still busy; a
/// repeated request, or a conf after the report, changes nothing.
#[test]
fn a_graceful_stop_waits_for_every_tc_or_the_limit() {
    let io = BlockRef::new(NODE, BlockKind::Io, 0);
    let tc1 = BlockRef::new(NODE, BlockKind::Tc, 1);
    let two_tcs = || membership_with_tcs(2);
    let limit = delayed_line(
        MEMBERSHIP,
        MEMBERSHIP,
        ContinueB {
            job: crate::formation::job::STOP_LIMIT,
        },
        5_000,
    );
    let stop = || NodeStopReq { limit_ms: 5_000 };

    // Both tcs answer.
    let mut membership = two_tcs();
    let mut ctx = RecordingContext::new();
    deliver(&mut membership, &mut ctx, io, stop());
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(MEMBERSHIP, TC0, TcDrainReq {}),
            line(MEMBERSHIP, tc1, TcDrainReq {}),
            limit.clone(),
        ]
    );
    assert!(matches!(&ctx.take_reports()[..], [Report::Log(_)]));
    deliver(
        &mut membership,
        &mut ctx,
        io,
        NodeStopReq { limit_ms: 5_000 },
    );
    assert!(ctx.take_trace().is_empty(), "a repeated request is ignored");
    deliver(&mut membership, &mut ctx, TC0, TcDrainConf {});
    assert!(ctx.take_reports().is_empty(), "tc 1 has not answered");
    deliver(&mut membership, &mut ctx, tc1, TcDrainConf {});
    assert_eq!(
        ctx.take_reports(),
        vec![Report::ReadyToStop { drained: true }]
    );
    let timer = ContinueB {
        job: crate::formation::job::STOP_LIMIT,
    };
    deliver(&mut membership, &mut ctx, MEMBERSHIP, timer);
    assert!(ctx.take_reports().is_empty(), "reported once");

    // One tc still busy at the limit.
    let mut membership = two_tcs();
    let mut ctx = RecordingContext::new();
    deliver(&mut membership, &mut ctx, io, stop());
    ctx.take_trace();
    ctx.take_reports();
    deliver(&mut membership, &mut ctx, tc1, TcDrainConf {});
    let timer = ContinueB {
        job: crate::formation::job::STOP_LIMIT,
    };
    deliver(&mut membership, &mut ctx, MEMBERSHIP, timer);
    let reports = ctx.take_reports();
    assert!(
        matches!(
            &reports[..],
            [Report::Log(line), Report::ReadyToStop { drained: false }] if line.contains("[0]")
        ),
        "{reports:?}"
    );
    deliver(&mut membership, &mut ctx, TC0, TcDrainConf {});
    assert!(ctx.take_reports().is_empty(), "reported once");
}
