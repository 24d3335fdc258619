//! membership's tests: the golden trace of a node start (the exact phase
//! requests, in order, and when each next phase begins) and API
//! registration before and after the node started.

use crate::start::{StartState, BEGIN};
use crate::{Membership, MembershipConfig};
use kernel::testing::{deliver, line, RecordingContext};
use kernel::{Context, Report};
use signal::signals::{
    ApiRegConf, ApiRegReq, CreateTabReq, DropTabReq, GetTabInfoReq, LockMode, OperationKind,
    StartPhaseConf, StartPhaseReq, TcCommitReq, TcKeyRef, TcKeyReq, TcRollbackReq,
};
use signal::{BlockKind, BlockRef, ErrorCode, NodeId, TransactionId};

const NODE: NodeId = NodeId(2);
const MEMBERSHIP: BlockRef = BlockRef::new(NODE, BlockKind::Membership, 0);
const DICT: BlockRef = BlockRef::new(NODE, BlockKind::Dict, 0);
const DIH: BlockRef = BlockRef::new(NODE, BlockKind::Dih, 0);
const TC0: BlockRef = BlockRef::new(NODE, BlockKind::Tc, 0);
const LDM0: BlockRef = BlockRef::new(NODE, BlockKind::Ldm, 0);
const LDM1: BlockRef = BlockRef::new(NODE, BlockKind::Ldm, 1);
const API: BlockRef = BlockRef::new(NodeId(100), BlockKind::Api, 0);

fn membership() -> Membership {
    Membership::new(MembershipConfig {
        address: MEMBERSHIP,
        tc_instances: 1,
        ldm_instances: 2,
    })
}

fn phase_requests(phase: u8) -> Vec<String> {
    [DICT, DIH, TC0, LDM0, LDM1]
        .into_iter()
        .map(|block| line(MEMBERSHIP, block, StartPhaseReq { phase }))
        .collect()
}

fn register(membership: &mut Membership, ctx: &mut RecordingContext) -> Vec<String> {
    deliver(
        membership,
        ctx,
        API,
        ApiRegReq {
            protocol_version: 1,
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

    for phase in 1..=3 {
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
        if phase < 3 {
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
    for phase in 1..=2 {
        for block in [DICT, DIH, TC0, LDM0, LDM1] {
            deliver(&mut membership, &mut ctx, block, StartPhaseConf { phase });
        }
    }
    ctx.take_trace();
    assert_eq!(
        register(&mut membership, &mut ctx),
        vec![not_started],
        "phase 3 is still running"
    );

    for block in [DICT, DIH, TC0, LDM0, LDM1] {
        deliver(
            &mut membership,
            &mut ctx,
            block,
            StartPhaseConf { phase: 3 },
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
            protocol_version: 1,
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
    for round in 0..3000 {
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
                Some(index) if index < 3 => {
                    let phase = index as u8 + 1;
                    for block in [DICT, DIH, TC0, LDM0, LDM1] {
                        deliver(&mut membership, &mut ctx, block, StartPhaseConf { phase });
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
                protocol_version: rng.next_u64() as u16,
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
                assert!(registration);
                assert_eq!(conf.started, membership.state() == StartState::Started);
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
