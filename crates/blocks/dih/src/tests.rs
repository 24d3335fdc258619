//! dih's tests: golden traces of the start and the GCI switch (the exact
//! signals, in order) on one node, the master's switch over 2 nodes x 2 tcs
//! and over 4 nodes, a non-master dih following the master's reports, the
//! high part advancing with simulated time (each closed global checkpoint
//! made durable by its round), and the shape of partition maps for one and
//! two node groups (every redo part of a partition belongs to the
//! partition's ldm instance). `durability_tests.rs` covers the start with
//! and without a system file, the durability rounds and the refusals.
//!
//! The configs here are diskless (no system file), so the start needs no
//! file answers; the helpers marked `pub(crate)` are shared with
//! `durability_tests.rs`.

use crate::{job, Dih, DihConfig};
use kernel::testing::{delayed_line, deliver, line, RecordingContext};
use kernel::{Context, Report};
use signal::partition::BUCKETS;
use signal::schema::{ColumnDef, ColumnType, TableDef};
use signal::signals::{
    ContinueB, CopyGciConf, CopyGciReq, CreateTabReq, DiAddTabConf, DiAddTabReq, GcpCommit,
    GcpCommitConf, GcpCompleteRep, GcpDurableRep, GcpFlushConf, GcpFlushReq, GcpPrepare,
    GcpPrepareConf, GcpSaveConf, GcpSaveReq, PartitionMap, PartitionPlacement, RestartGciOrd,
    RestartGciRep, RestoreConf, RestoreReq, RestoredRep, SchemaRef, StartPhaseConf, StartPhaseReq,
    SystemFileRep,
};
use signal::{phases, BlockKind, BlockRef, ErrorCode, Gci, NodeId, NodeSet, Signal};
use std::sync::Arc;

const NODE: NodeId = NodeId(1);
const DIH: BlockRef = BlockRef::new(NODE, BlockKind::Dih, 0);
const DICT: BlockRef = BlockRef::new(NODE, BlockKind::Dict, 0);
const MEMBERSHIP: BlockRef = BlockRef::new(NODE, BlockKind::Membership, 0);
const TC0: BlockRef = BlockRef::new(NODE, BlockKind::Tc, 0);
const TC1: BlockRef = BlockRef::new(NODE, BlockKind::Tc, 1);
const LDM0: BlockRef = BlockRef::new(NODE, BlockKind::Ldm, 0);
const LDM1: BlockRef = BlockRef::new(NODE, BlockKind::Ldm, 1);
pub(crate) const EPOCH_MS: u64 = 100;
pub(crate) const GCP_MS: u64 = 2000;

/// 2 tcs and 2 ldms per node, diskless.
pub(crate) fn config(
    data_nodes: Vec<(NodeId, u32)>,
    replicas: u8,
    redo_log_parts: u32,
) -> DihConfig {
    DihConfig {
        address: DIH,
        tc_instances: 2,
        ldm_instances: 2,
        data_nodes,
        replicas,
        redo_log_parts,
        epoch_interval_ms: EPOCH_MS,
        gcp_interval_ms: GCP_MS,
        diskless: true,
    }
}

fn single_node_dih() -> Dih {
    Dih::new(config(vec![(NODE, 0)], 1, 4)).announced()
}

pub(crate) fn timer() -> ContinueB {
    ContinueB {
        job: job::GCP_TIMER,
    }
}

pub(crate) fn dih_of(node: u16) -> BlockRef {
    BlockRef::new(NodeId(node), BlockKind::Dih, 0)
}

pub(crate) fn tc_of(node: u16, instance: u16) -> BlockRef {
    BlockRef::new(NodeId(node), BlockKind::Tc, instance)
}

pub(crate) fn ldm_of(node: u16, instance: u16) -> BlockRef {
    BlockRef::new(NodeId(node), BlockKind::Ldm, instance)
}

pub(crate) fn membership_of(node: u16) -> BlockRef {
    BlockRef::new(NodeId(node), BlockKind::Membership, 0)
}

/// Every tc of `nodes`, in the order the master addresses them.
pub(crate) fn tcs_of(nodes: &[u16]) -> Vec<BlockRef> {
    nodes
        .iter()
        .flat_map(|&node| [tc_of(node, 0), tc_of(node, 1)])
        .collect()
}

/// Every ldm of `nodes`, in the order the master addresses them.
pub(crate) fn ldms_of(nodes: &[u16]) -> Vec<BlockRef> {
    nodes
        .iter()
        .flat_map(|&node| [ldm_of(node, 0), ldm_of(node, 1)])
        .collect()
}

/// `signal` from `from` to each of `to`, as trace lines.
pub(crate) fn lines_to<S: Into<Signal>>(
    from: BlockRef,
    to: &[BlockRef],
    signal: impl Fn() -> S,
) -> Vec<String> {
    to.iter()
        .map(|&block| line(from, block, signal()))
        .collect()
}

/// Runs phases INITIALISE..=SCHEMA on a diskless dih of a cluster of
/// `nodes` (ascending ids), playing every other block: every dih reports
/// nothing on disk, every ldm restores nothing.
pub(crate) fn start_diskless_through_phase_5(
    dih: &mut Dih,
    ctx: &mut RecordingContext,
    nodes: &[u16],
) {
    let me = kernel::Block::address(dih);
    let membership = membership_of(me.node.0);
    let master = dih_of(nodes[0]);
    deliver(dih, ctx, membership, StartPhaseReq { phase: 1 });
    deliver(dih, ctx, membership, StartPhaseReq { phase: 2 });
    if dih.is_master() {
        for &node in nodes {
            let report = RestartGciRep {
                complete_gci: Gci(0),
                members: NodeSet::EMPTY,
            };
            deliver(dih, ctx, dih_of(node), report);
        }
    }
    let order = RestartGciOrd {
        restored_gci: Gci(0),
        stale: NodeSet::EMPTY,
    };
    deliver(dih, ctx, master, order);
    deliver(dih, ctx, membership, StartPhaseReq { phase: 3 });
    deliver(dih, ctx, membership, StartPhaseReq { phase: 4 });
    for instance in 0..2 {
        let conf = RestoreConf {
            highest_gci: Gci(0),
            replayed: 0,
        };
        deliver(dih, ctx, ldm_of(me.node.0, instance), conf);
    }
    if dih.is_master() {
        for &node in nodes {
            let report = RestoredRep {
                highest_gci: Gci(0),
            };
            deliver(dih, ctx, dih_of(node), report);
        }
    }
    deliver(dih, ctx, membership, StartPhaseReq { phase: 5 });
    let confs: Vec<String> = ctx
        .take_trace()
        .into_iter()
        .filter(|sent| sent.contains("StartPhaseConf"))
        .collect();
    assert_eq!(
        confs,
        (1..=5)
            .map(|phase| line(me, membership, StartPhaseConf { phase }))
            .collect::<Vec<_>>()
    );
    ctx.reports.clear();
}

/// At a diskless master of `nodes`: phases 1..=6 up to the initial
/// GcpCommit (the start GCI recorded by every dih), which is cleared.
pub(crate) fn start_until_initial_commit(dih: &mut Dih, ctx: &mut RecordingContext, nodes: &[u16]) {
    let me = kernel::Block::address(dih);
    start_diskless_through_phase_5(dih, ctx, nodes);
    deliver(
        dih,
        ctx,
        membership_of(me.node.0),
        StartPhaseReq {
            phase: phases::GLOBAL_CHECKPOINT,
        },
    );
    let copy = || CopyGciReq {
        complete_gci: Gci(0),
        started_gci: crate::INITIAL_GCI,
    };
    let dihs: Vec<BlockRef> = nodes.iter().map(|&node| dih_of(node)).collect();
    assert_eq!(ctx.take_trace(), lines_to(me, &dihs, copy));
    deliver(dih, ctx, me, copy());
    for &other in &dihs {
        let conf = CopyGciConf {
            complete_gci: Gci(0),
        };
        deliver(dih, ctx, other, conf);
    }
    let gci = crate::INITIAL_GCI;
    assert_eq!(
        ctx.take_trace(),
        [
            vec![line(
                me,
                me,
                CopyGciConf {
                    complete_gci: Gci(0)
                }
            )],
            lines_to(me, &tcs_of(nodes), || GcpCommit { gci }),
        ]
        .concat()
    );
    assert!(ctx.take_reports().is_empty(), "nothing new is complete");
}

/// A diskless master of `nodes`, started: every tc holds the initial GCI
/// (at ctx time 0), nothing left in the trace.
pub(crate) fn start_master(dih: &mut Dih, ctx: &mut RecordingContext, nodes: &[u16]) {
    start_until_initial_commit(dih, ctx, nodes);
    let gci = crate::INITIAL_GCI;
    for tc in tcs_of(nodes) {
        deliver(dih, ctx, tc, GcpCommitConf { gci });
    }
    ctx.sent.clear();
    assert_eq!(ctx.take_reports(), vec![Report::LatestGci(gci)]);
}

/// Runs phases 1..=6 on the single-node dih with every block answering at
/// once.
fn start(dih: &mut Dih, ctx: &mut RecordingContext) {
    start_master(dih, ctx, &[1]);
}

/// Fires the timer at the context's time and answers every phase from
/// every tc of `nodes`; returns the new GCI and what the master sent once
/// the last tc committed.
pub(crate) fn switch(
    dih: &mut Dih,
    ctx: &mut RecordingContext,
    nodes: &[u16],
) -> (Gci, Vec<String>) {
    let me = kernel::Block::address(dih);
    let tcs = tcs_of(nodes);
    deliver(dih, ctx, me, timer());
    let new_gci = match &ctx.sent[0].envelope.signal {
        Signal::GcpPrepare(prepare) => prepare.new_gci,
        other => panic!("expected GcpPrepare, got {other:?}"),
    };
    assert_eq!(
        ctx.take_trace(),
        lines_to(me, &tcs, || GcpPrepare { new_gci })
    );
    for &tc in &tcs {
        deliver(dih, ctx, tc, GcpPrepareConf { new_gci });
    }
    assert_eq!(
        ctx.take_trace(),
        lines_to(me, &tcs, || GcpCommit { gci: new_gci })
    );
    for &tc in &tcs {
        deliver(dih, ctx, tc, GcpCommitConf { gci: new_gci });
    }
    assert_eq!(ctx.take_reports(), vec![Report::LatestGci(new_gci)]);
    (new_gci, ctx.take_trace())
}

/// What the master of `nodes` sends when a switch to `gci` completes:
/// GcpCompleteRep to the other dihs, the next timer, and, when the switch
/// closed global checkpoint `previous`, the flush that starts its round.
pub(crate) fn after_switch(nodes: &[u16], previous: Gci, gci: Gci) -> Vec<String> {
    let me = dih_of(nodes[0]);
    let mut expected = lines_to(
        me,
        &nodes[1..]
            .iter()
            .map(|&node| dih_of(node))
            .collect::<Vec<_>>(),
        || GcpCompleteRep { gci },
    );
    expected.push(delayed_line(me, me, timer(), EPOCH_MS));
    if gci.high() > previous.high() {
        expected.extend(lines_to(me, &tcs_of(nodes), || GcpFlushReq {
            gci: previous,
        }));
    }
    expected
}

/// At the diskless master of `nodes`, with the GcpFlushReq{g} of a round
/// already sent: every tc, then every ldm, then every dih answers, and the
/// exact signals of each step are checked. `started` is what CopyGciReq
/// must carry (the master's latest GCI when the saves finished).
pub(crate) fn run_durability_round(
    dih: &mut Dih,
    ctx: &mut RecordingContext,
    nodes: &[u16],
    g: Gci,
    started: Gci,
) {
    let me = kernel::Block::address(dih);
    let (tcs, ldms) = (tcs_of(nodes), ldms_of(nodes));
    let dihs: Vec<BlockRef> = nodes.iter().map(|&node| dih_of(node)).collect();
    for &tc in tcs.iter().rev() {
        assert!(
            ctx.take_trace().is_empty(),
            "the save waits for every flush"
        );
        deliver(dih, ctx, tc, GcpFlushConf { gci: g });
    }
    assert_eq!(
        ctx.take_trace(),
        lines_to(me, &ldms, || GcpSaveReq { gci: g })
    );
    for &ldm in &ldms {
        assert!(ctx.take_trace().is_empty(), "the copy waits for every save");
        deliver(dih, ctx, ldm, GcpSaveConf { gci: g });
    }
    let copy = || CopyGciReq {
        complete_gci: g,
        started_gci: started,
    };
    assert_eq!(ctx.take_trace(), lines_to(me, &dihs, copy));
    // The master's own copy (diskless: answered at once).
    deliver(dih, ctx, me, copy());
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, me, CopyGciConf { complete_gci: g })]
    );
    assert_eq!(ctx.take_reports(), vec![Report::CompleteGci(g)]);
    for &other in dihs.iter().rev() {
        assert!(
            ctx.take_trace().is_empty(),
            "the durable report waits for every dih"
        );
        deliver(dih, ctx, other, CopyGciConf { complete_gci: g });
    }
    assert_eq!(
        ctx.take_trace(),
        lines_to(me, &tcs, || GcpDurableRep { gci: g })
    );
    assert_eq!(dih.complete_gci(), g);
}

#[test]
fn golden_trace_of_start_and_two_switches() {
    let mut dih = single_node_dih();
    let mut ctx = RecordingContext::new();

    // INITIALISE: diskless, nothing to read.
    deliver(&mut dih, &mut ctx, MEMBERSHIP, StartPhaseReq { phase: 1 });
    assert!(ctx.take_fs_requests().is_empty(), "diskless reads no file");
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(
                DIH,
                MEMBERSHIP,
                SystemFileRep {
                    complete_gci: Gci(0),
                    members: NodeSet::EMPTY,
                }
            ),
            line(DIH, MEMBERSHIP, StartPhaseConf { phase: 1 })
        ]
    );

    // RESTART_GCI: the dih reports to the master, itself; the master
    // answers every dih (itself) with the restored GCI, 0: nothing on disk.
    deliver(&mut dih, &mut ctx, MEMBERSHIP, StartPhaseReq { phase: 2 });
    let report = || RestartGciRep {
        complete_gci: Gci(0),
        members: NodeSet::EMPTY,
    };
    assert_eq!(ctx.take_trace(), vec![line(DIH, DIH, report())]);
    deliver(&mut dih, &mut ctx, DIH, report());
    let order = || RestartGciOrd {
        restored_gci: Gci(0),
        stale: NodeSet::EMPTY,
    };
    assert_eq!(ctx.take_trace(), vec![line(DIH, DIH, order())]);
    deliver(&mut dih, &mut ctx, DIH, order());
    assert_eq!(
        ctx.take_trace(),
        vec![line(DIH, MEMBERSHIP, StartPhaseConf { phase: 2 })]
    );
    assert_eq!(ctx.take_reports(), vec![Report::RestoredGci(Gci(0))]);

    // RESTORE_SCHEMA is not dih's.
    deliver(&mut dih, &mut ctx, MEMBERSHIP, StartPhaseReq { phase: 3 });
    assert_eq!(
        ctx.take_trace(),
        vec![line(DIH, MEMBERSHIP, StartPhaseConf { phase: 3 })]
    );

    // RESTORE_DATA: every local ldm formats (restored GCI 0); then the
    // master hears this node's highest GCI.
    ctx.now_ms = 10;
    deliver(&mut dih, &mut ctx, MEMBERSHIP, StartPhaseReq { phase: 4 });
    let restore = || RestoreReq {
        restored_gci: Gci(0),
    };
    assert_eq!(ctx.take_trace(), lines_to(DIH, &[LDM0, LDM1], restore));
    ctx.now_ms = 25;
    let conf = |replayed| RestoreConf {
        highest_gci: Gci(0),
        replayed,
    };
    deliver(&mut dih, &mut ctx, LDM1, conf(3));
    assert!(ctx.take_trace().is_empty(), "one ldm has not restored");
    deliver(&mut dih, &mut ctx, LDM0, conf(4));
    let restored = || RestoredRep {
        highest_gci: Gci(0),
    };
    assert_eq!(ctx.take_trace(), vec![line(DIH, DIH, restored())]);
    assert_eq!(
        ctx.take_reports(),
        vec![Report::Phase {
            name: "restore data (all ldm threads)",
            elapsed_ms: 15,
            count: 7,
            unit: "row changes replayed",
        }]
    );
    deliver(&mut dih, &mut ctx, DIH, restored());
    assert_eq!(
        ctx.take_trace(),
        vec![line(DIH, MEMBERSHIP, StartPhaseConf { phase: 4 })]
    );

    // SCHEMA is dict's (dih answers maps in any phase).
    deliver(&mut dih, &mut ctx, MEMBERSHIP, StartPhaseReq { phase: 5 });
    assert_eq!(
        ctx.take_trace(),
        vec![line(DIH, MEMBERSHIP, StartPhaseConf { phase: 5 })]
    );

    // GLOBAL_CHECKPOINT: first every dih (itself) records the start GCI as
    // started, then the initial GCI goes to every tc; the conf waits for
    // them.
    ctx.now_ms = 0;
    let initial = Gci::from_parts(1, 0);
    deliver(
        &mut dih,
        &mut ctx,
        MEMBERSHIP,
        StartPhaseReq {
            phase: crate::GCP_START_PHASE,
        },
    );
    let copy = || CopyGciReq {
        complete_gci: Gci(0),
        started_gci: initial,
    };
    assert_eq!(ctx.take_trace(), vec![line(DIH, DIH, copy())]);
    deliver(&mut dih, &mut ctx, DIH, copy());
    let copied = || CopyGciConf {
        complete_gci: Gci(0),
    };
    assert_eq!(ctx.take_trace(), vec![line(DIH, DIH, copied())]);
    deliver(&mut dih, &mut ctx, DIH, copied());
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(DIH, TC0, GcpCommit { gci: initial }),
            line(DIH, TC1, GcpCommit { gci: initial }),
        ]
    );
    assert!(ctx.take_reports().is_empty());
    deliver(&mut dih, &mut ctx, TC1, GcpCommitConf { gci: initial });
    assert!(ctx.take_trace().is_empty(), "one tc is still without a GCI");
    deliver(&mut dih, &mut ctx, TC0, GcpCommitConf { gci: initial });
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(DIH, MEMBERSHIP, StartPhaseConf { phase: 6 }),
            delayed_line(DIH, DIH, timer(), EPOCH_MS),
        ]
    );
    assert_eq!(ctx.take_reports(), vec![Report::LatestGci(initial)]);
    assert_eq!(dih.latest_gci(), initial);
    assert_eq!(dih.switches(), 0, "the initial GCI is not a switch");
    assert_eq!(dih.complete_gci(), Gci(0), "nothing is complete yet");

    for (now_ms, new_gci) in [(100, Gci::from_parts(1, 1)), (200, Gci::from_parts(1, 2))] {
        ctx.now_ms = now_ms;
        deliver(&mut dih, &mut ctx, DIH, timer());
        assert_eq!(
            ctx.take_trace(),
            vec![
                line(DIH, TC0, GcpPrepare { new_gci }),
                line(DIH, TC1, GcpPrepare { new_gci }),
            ]
        );
        deliver(&mut dih, &mut ctx, TC0, GcpPrepareConf { new_gci });
        assert!(
            ctx.take_trace().is_empty(),
            "commit waits for every prepare"
        );
        deliver(&mut dih, &mut ctx, TC1, GcpPrepareConf { new_gci });
        assert_eq!(
            ctx.take_trace(),
            vec![
                line(DIH, TC0, GcpCommit { gci: new_gci }),
                line(DIH, TC1, GcpCommit { gci: new_gci }),
            ]
        );
        deliver(&mut dih, &mut ctx, TC0, GcpCommitConf { gci: new_gci });
        deliver(&mut dih, &mut ctx, TC1, GcpCommitConf { gci: new_gci });
        assert_eq!(
            ctx.take_trace(),
            vec![delayed_line(DIH, DIH, timer(), EPOCH_MS)],
            "an epoch switch closes no global checkpoint: no durability round"
        );
        assert_eq!(ctx.take_reports(), vec![Report::LatestGci(new_gci)]);
    }
    assert_eq!(dih.switches(), 2);
    assert_eq!(dih.latest_gci(), Gci::from_parts(1, 2));
}

#[test]
fn high_part_advances_after_the_gcp_interval() {
    let mut dih = single_node_dih();
    let mut ctx = RecordingContext::new();
    start(&mut dih, &mut ctx);

    let mut previous = dih.latest_gci();
    let mut seen = Vec::new();
    for tick in 1..=45u64 {
        ctx.now_ms = tick * EPOCH_MS;
        let (gci, trace) = switch(&mut dih, &mut ctx, &[1]);
        assert!(
            gci > previous,
            "GCIs strictly increase: {gci} after {previous}"
        );
        assert_eq!(trace, after_switch(&[1], previous, gci));
        if gci.low() == 0 {
            seen.push((ctx.now_ms, gci));
            // The closed global checkpoint is made durable before the
            // next switch (else the high part could not advance again).
            run_durability_round(&mut dih, &mut ctx, &[1], previous, gci);
        }
        previous = gci;
    }
    assert_eq!(
        seen,
        vec![
            (GCP_MS, Gci::from_parts(2, 0)),
            (2 * GCP_MS, Gci::from_parts(3, 0)),
        ]
    );
    // 3/0 at 4000 ms, then one epoch per 100 ms up to 4500 ms.
    assert_eq!(previous, Gci::from_parts(3, 5));
    assert_eq!(dih.switches(), 45);
    assert_eq!(dih.complete_gci(), Gci::from_parts(2, 19));
}

#[test]
fn timer_while_a_switch_runs_is_ignored() {
    let mut dih = single_node_dih();
    let mut ctx = RecordingContext::new();
    start(&mut dih, &mut ctx);
    ctx.now_ms = EPOCH_MS;
    deliver(&mut dih, &mut ctx, DIH, timer());
    assert_eq!(ctx.take_trace().len(), 2, "GcpPrepare to both tcs");
    deliver(&mut dih, &mut ctx, DIH, timer());
    assert!(ctx.take_trace().is_empty());
}

#[test]
fn timer_before_the_start_is_ignored() {
    let mut dih = single_node_dih();
    let mut ctx = RecordingContext::new();
    start_until_initial_commit(&mut dih, &mut ctx, &[1]);
    deliver(&mut dih, &mut ctx, DIH, timer());
    assert!(
        ctx.take_trace().is_empty(),
        "no switch while the initial GCI is being committed"
    );
}

#[test]
#[should_panic(expected = "confirms another GCI")]
fn prepare_conf_for_another_gci_stops_the_node() {
    let mut dih = single_node_dih();
    let mut ctx = RecordingContext::new();
    start(&mut dih, &mut ctx);
    deliver(&mut dih, &mut ctx, DIH, timer());
    deliver(
        &mut dih,
        &mut ctx,
        TC0,
        GcpPrepareConf {
            new_gci: Gci::from_parts(9, 9),
        },
    );
}

#[test]
#[should_panic(expected = "twice in one round")]
fn duplicate_commit_conf_stops_the_node() {
    let mut dih = single_node_dih();
    let mut ctx = RecordingContext::new();
    start_until_initial_commit(&mut dih, &mut ctx, &[1]);
    let gci = crate::INITIAL_GCI;
    deliver(&mut dih, &mut ctx, TC0, GcpCommitConf { gci });
    deliver(&mut dih, &mut ctx, TC0, GcpCommitConf { gci });
}

#[test]
#[should_panic(expected = "ran twice")]
fn phase_global_checkpoint_twice_stops_the_node() {
    let mut dih = single_node_dih();
    let mut ctx = RecordingContext::new();
    start(&mut dih, &mut ctx);
    deliver(
        &mut dih,
        &mut ctx,
        MEMBERSHIP,
        StartPhaseReq {
            phase: crate::GCP_START_PHASE,
        },
    );
}

fn table(id: u32, partitions: u32) -> TableDef {
    TableDef {
        indexes: Vec::new(),
        revision: 0,
        id,
        version: 1,
        name: "t".into(),
        columns: vec![ColumnDef {
            name: "k".into(),
            column_type: ColumnType::Int { unsigned: false },
            nullable: false,
        }],
        primary_key: vec![0],
        partitions,
        partition_key: Vec::new(),
    }
}

fn placement(
    node_group: u32,
    replicas: &[u16],
    ldm_instance: u16,
    redo_part: u32,
) -> PartitionPlacement {
    PartitionPlacement {
        node_group,
        replicas: replicas.iter().map(|&node| NodeId(node)).collect(),
        ldm_instance,
        redo_part,
    }
}

fn add_table(dih: &mut Dih, table: TableDef) -> Arc<PartitionMap> {
    let mut ctx = RecordingContext::new();
    deliver(
        dih,
        &mut ctx,
        DICT,
        DiAddTabReq {
            table: Arc::new(table),
        },
    );
    assert_eq!(ctx.sent.len(), 1);
    let sent = ctx.sent.pop().expect("one reply");
    assert_eq!(sent.envelope.to, DICT);
    match sent.envelope.signal {
        Signal::DiAddTabConf(DiAddTabConf { map }) => map,
        other => panic!("expected DiAddTabConf, got {other:?}"),
    }
}

/// Every partition's redo part exists and is one of its ldm instance's
/// own parts (`part % ldm_instances == ldm_instance`: one writer per part).
fn assert_redo_parts_belong_to_their_ldm(map: &PartitionMap, ldm_instances: u16, parts: u32) {
    for (partition, placement) in map.partitions.iter().enumerate() {
        assert!(
            placement.redo_part < parts,
            "partition {partition}: redo part {} of {parts}",
            placement.redo_part
        );
        assert!(placement.ldm_instance < ldm_instances);
        assert_eq!(
            placement.redo_part % u32::from(ldm_instances),
            u32::from(placement.ldm_instance),
            "partition {partition}: redo part {} is not ldm {}'s",
            placement.redo_part,
            placement.ldm_instance
        );
        assert!(
            crate::redo_parts_of_ldm(placement.ldm_instance, ldm_instances, parts)
                .contains(&placement.redo_part)
        );
    }
}

#[test]
fn map_for_one_node_group_rotates_primaries_and_spreads_ldms() {
    let mut dih = Dih::new(config(vec![(NodeId(1), 0), (NodeId(2), 0)], 2, 4)).announced();
    let map = add_table(&mut dih, table(7, 4));
    assert_eq!(map.table_id, 7);
    assert_eq!(map.version, 1);
    assert_eq!(
        map.partitions,
        vec![
            // ldm 0 owns parts 0 and 2, ldm 1 parts 1 and 3.
            placement(0, &[1, 2], 0, 0),
            placement(0, &[2, 1], 1, 1),
            // Second round: each ldm instance takes the other replica
            // order, so every ldm thread of every node is primary once,
            // and its next redo part.
            placement(0, &[2, 1], 0, 2),
            placement(0, &[1, 2], 1, 3),
        ]
    );
    assert_redo_parts_belong_to_their_ldm(&map, 2, 4);
    assert_eq!(map.bucket_partitions.len(), BUCKETS as usize);
    for (bucket, &partition) in map.bucket_partitions.iter().enumerate() {
        assert_eq!(partition, bucket as u32 % 4);
    }
}

#[test]
fn map_for_two_node_groups_alternates_groups() {
    let nodes = vec![
        (NodeId(1), 0),
        (NodeId(2), 0),
        (NodeId(3), 1),
        (NodeId(4), 1),
    ];
    let mut dih = Dih::new(config(nodes, 2, 2)).announced();
    let map = add_table(&mut dih, table(3, 8));
    // Two parts for two ldm instances: each ldm writes only its own part.
    assert_eq!(
        map.partitions,
        vec![
            placement(0, &[1, 2], 0, 0),
            placement(1, &[3, 4], 0, 0),
            placement(0, &[2, 1], 1, 1),
            placement(1, &[4, 3], 1, 1),
            placement(0, &[2, 1], 0, 0),
            placement(1, &[4, 3], 0, 0),
            placement(0, &[1, 2], 1, 1),
            placement(1, &[3, 4], 1, 1),
        ]
    );
    assert_redo_parts_belong_to_their_ldm(&map, 2, 2);
    assert_eq!(map.bucket_partitions[..10], [0, 1, 2, 3, 4, 5, 6, 7, 0, 1]);
}

#[test]
fn map_with_an_uneven_share_of_parts_rotates_each_ldm_over_its_own() {
    // 5 parts for 2 ldm instances: ldm 0 owns 0, 2, 4 and ldm 1 owns 1, 3.
    assert_eq!(crate::redo_parts_of_ldm(0, 2, 5), vec![0, 2, 4]);
    assert_eq!(crate::redo_parts_of_ldm(1, 2, 5), vec![1, 3]);
    let mut dih = Dih::new(config(vec![(NodeId(1), 0), (NodeId(2), 0)], 2, 5)).announced();
    let map = add_table(&mut dih, table(9, 12));
    let parts: Vec<(u16, u32)> = map
        .partitions
        .iter()
        .map(|placement| (placement.ldm_instance, placement.redo_part))
        .collect();
    assert_eq!(
        parts,
        vec![
            (0, 0),
            (1, 1),
            (0, 2),
            (1, 3),
            (0, 4),
            (1, 1),
            (0, 0),
            (1, 3),
            (0, 2),
            (1, 1),
            (0, 4),
            (1, 3),
        ]
    );
    assert_redo_parts_belong_to_their_ldm(&map, 2, 5);
}

#[test]
fn redo_parts_of_every_ldm_partition_the_parts_and_maps_use_only_their_own() {
    for ldm_instances in 1..=4u16 {
        for parts in u32::from(ldm_instances)..=9 {
            let mut owned: Vec<u32> = (0..ldm_instances)
                .flat_map(|instance| crate::redo_parts_of_ldm(instance, ldm_instances, parts))
                .collect();
            owned.sort_unstable();
            assert_eq!(
                owned,
                (0..parts).collect::<Vec<_>>(),
                "{ldm_instances} ldms, {parts} parts: every part has exactly one ldm"
            );
            for (nodes, replicas) in [
                (vec![(NodeId(1), 0)], 1),
                (vec![(NodeId(1), 0), (NodeId(2), 1)], 1),
                (
                    vec![
                        (NodeId(1), 0),
                        (NodeId(2), 0),
                        (NodeId(3), 1),
                        (NodeId(4), 1),
                    ],
                    2,
                ),
            ] {
                let groups = nodes.len() as u32 / u32::from(replicas);
                let mut dih = Dih::new(DihConfig {
                    ldm_instances,
                    ..config(nodes, replicas, parts)
                })
                .announced();
                let partitions = groups * u32::from(ldm_instances) * 3 + 1;
                let map = add_table(&mut dih, table(1, partitions));
                assert_redo_parts_belong_to_their_ldm(&map, ldm_instances, parts);
                // Within a group, each ldm spreads its partitions evenly
                // over its own parts.
                for group in 0..groups {
                    for instance in 0..ldm_instances {
                        let own = crate::redo_parts_of_ldm(instance, ldm_instances, parts);
                        let counts: Vec<usize> = own
                            .iter()
                            .map(|&part| {
                                map.partitions
                                    .iter()
                                    .filter(|placement| {
                                        placement.node_group == group
                                            && placement.ldm_instance == instance
                                            && placement.redo_part == part
                                    })
                                    .count()
                            })
                            .collect();
                        let (min, max) = (
                            counts.iter().min().copied().unwrap_or(0),
                            counts.iter().max().copied().unwrap_or(0),
                        );
                        assert!(
                            max - min <= 1,
                            "{ldm_instances} ldms, {parts} parts, group {group}, ldm \
                             {instance}: uneven parts {counts:?}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn misaddressed_api_request_gets_a_ref_not_a_panic() {
    let mut dih = single_node_dih();
    let mut ctx = RecordingContext::new();
    let api = BlockRef::new(NodeId(50), BlockKind::Api, 0);
    let definition = ctx.pool().copy_from(b"junk").expect("pool has room");
    deliver(
        &mut dih,
        &mut ctx,
        api,
        CreateTabReq {
            request_id: 5,
            definition,
        },
    );
    assert_eq!(
        ctx.take_trace(),
        vec![line(
            DIH,
            api,
            SchemaRef {
                request_id: 5,
                error: ErrorCode::BadRequest
            }
        )]
    );
}

#[test]
#[should_panic(expected = "configured twice")]
fn configuration_naming_a_node_twice_stops_the_node() {
    Dih::new(config(vec![(NodeId(1), 0), (NodeId(1), 0)], 2, 2)).announced();
}

#[test]
#[should_panic(expected = "3 redo log parts for 4 ldm instances")]
fn fewer_redo_parts_than_ldm_instances_stops_the_node() {
    Dih::new(DihConfig {
        ldm_instances: 4,
        ..config(vec![(NodeId(1), 0)], 1, 3)
    })
    .announced();
}

/// The dih of `node` in a cluster of `nodes` (id, node group), 2 tcs and
/// 2 ldms each, diskless, told by membership that the lowest id is the
/// president.
pub(crate) fn cluster_dih(node: u16, nodes: &[(u16, u32)], replicas: u8) -> Dih {
    unannounced_cluster_dih(node, nodes, replicas).announced()
}

/// As [`cluster_dih`], before membership announced the president.
fn unannounced_cluster_dih(node: u16, nodes: &[(u16, u32)], replicas: u8) -> Dih {
    Dih::new(DihConfig {
        address: dih_of(node),
        data_nodes: nodes
            .iter()
            .map(|&(id, group)| (NodeId(id), group))
            .collect(),
        ..config(Vec::new(), replicas, 2)
    })
}

#[test]
fn the_master_is_the_president_membership_announces() {
    // Membership names node 2, not the lowest id: its dih is the master.
    for (node, master) in [(1, false), (2, true)] {
        let mut dih = unannounced_cluster_dih(node, &TWO_NODES, 2);
        let mut ctx = RecordingContext::new();
        assert!(!dih.is_master(), "no master before the announcement");
        let president = signal::signals::PresidentRep {
            president: NodeId(2),
        };
        deliver(&mut dih, &mut ctx, membership_of(node), president);
        assert_eq!(dih.is_master(), master, "dih of node {node}");
        // Announced again (the same president): nothing changes.
        let again = signal::signals::PresidentRep {
            president: NodeId(2),
        };
        deliver(&mut dih, &mut ctx, membership_of(node), again);
        assert_eq!(dih.is_master(), master);
        assert!(ctx.take_trace().is_empty());
    }
}

#[test]
#[should_panic(expected = "announces it once, at formation")]
fn a_second_president_rep_naming_another_president_stops_the_node() {
    let mut dih = cluster_dih(2, &TWO_NODES, 2);
    let mut ctx = RecordingContext::new();
    let president = signal::signals::PresidentRep {
        president: NodeId(2),
    };
    deliver(&mut dih, &mut ctx, membership_of(2), president);
}

pub(crate) const TWO_NODES: [(u16, u32); 2] = [(2, 0), (1, 0)];
const FOUR_NODES: [(u16, u32); 4] = [(1, 0), (2, 0), (3, 1), (4, 1)];

#[test]
fn golden_trace_of_the_masters_start_and_switch_over_two_nodes() {
    let mut dih = cluster_dih(1, &TWO_NODES, 2);
    assert!(dih.is_master(), "node 1 is the lowest id");
    let mut ctx = RecordingContext::new();
    let (me, membership) = (dih_of(1), membership_of(1));
    let tcs = [tc_of(1, 0), tc_of(1, 1), tc_of(2, 0), tc_of(2, 1)];
    start_diskless_through_phase_5(&mut dih, &mut ctx, &[1, 2]);

    // Phase GLOBAL_CHECKPOINT: both dihs record the start GCI, then the
    // initial GCI goes to every tc of both nodes.
    let initial = Gci::from_parts(1, 0);
    deliver(&mut dih, &mut ctx, membership, StartPhaseReq { phase: 6 });
    let copy = || CopyGciReq {
        complete_gci: Gci(0),
        started_gci: initial,
    };
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, dih_of(1), copy()), line(me, dih_of(2), copy())]
    );
    deliver(&mut dih, &mut ctx, me, copy());
    let copied = || CopyGciConf {
        complete_gci: Gci(0),
    };
    assert_eq!(ctx.take_trace(), vec![line(me, me, copied())]);
    deliver(&mut dih, &mut ctx, dih_of(2), copied());
    assert!(
        ctx.take_trace().is_empty(),
        "the master has not recorded the start GCI yet"
    );
    deliver(&mut dih, &mut ctx, me, copied());
    assert_eq!(
        ctx.take_trace(),
        tcs.iter()
            .map(|&tc| line(me, tc, GcpCommit { gci: initial }))
            .collect::<Vec<_>>()
    );
    for &tc in &tcs[..3] {
        deliver(&mut dih, &mut ctx, tc, GcpCommitConf { gci: initial });
    }
    assert!(
        ctx.take_trace().is_empty(),
        "phase 6 waits for the other node's last tc"
    );
    deliver(&mut dih, &mut ctx, tcs[3], GcpCommitConf { gci: initial });
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(me, dih_of(2), GcpCompleteRep { gci: initial }),
            line(me, membership, StartPhaseConf { phase: 6 }),
            delayed_line(me, me, timer(), EPOCH_MS),
        ]
    );
    assert_eq!(ctx.take_reports(), vec![Report::LatestGci(initial)]);

    // A switch: prepare everywhere, then commit everywhere, then tell dih 2.
    ctx.now_ms = EPOCH_MS;
    let new_gci = Gci::from_parts(1, 1);
    deliver(&mut dih, &mut ctx, me, timer());
    assert_eq!(
        ctx.take_trace(),
        tcs.iter()
            .map(|&tc| line(me, tc, GcpPrepare { new_gci }))
            .collect::<Vec<_>>()
    );
    for &tc in tcs.iter().rev() {
        assert!(
            ctx.take_trace().is_empty(),
            "commit waits for every prepare"
        );
        deliver(&mut dih, &mut ctx, tc, GcpPrepareConf { new_gci });
    }
    assert_eq!(
        ctx.take_trace(),
        tcs.iter()
            .map(|&tc| line(me, tc, GcpCommit { gci: new_gci }))
            .collect::<Vec<_>>()
    );
    for &tc in &[tcs[2], tcs[0], tcs[3], tcs[1]] {
        assert!(ctx.take_trace().is_empty(), "waits for every commit");
        deliver(&mut dih, &mut ctx, tc, GcpCommitConf { gci: new_gci });
    }
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(me, dih_of(2), GcpCompleteRep { gci: new_gci }),
            delayed_line(me, me, timer(), EPOCH_MS),
        ]
    );
    assert_eq!(ctx.take_reports(), vec![Report::LatestGci(new_gci)]);
    assert_eq!((dih.latest_gci(), dih.switches()), (new_gci, 1));
}

#[test]
fn the_master_of_four_nodes_switches_all_eight_tcs_and_tells_three_dihs() {
    let mut dih = cluster_dih(1, &FOUR_NODES, 2);
    let mut ctx = RecordingContext::new();
    let me = dih_of(1);
    let nodes = [1, 2, 3, 4];
    let tcs = tcs_of(&nodes);
    assert_eq!(tcs.len(), 8);
    start_diskless_through_phase_5(&mut dih, &mut ctx, &nodes);
    deliver(
        &mut dih,
        &mut ctx,
        membership_of(1),
        StartPhaseReq { phase: 6 },
    );
    let gci = crate::INITIAL_GCI;
    let dihs = nodes.map(dih_of);
    let copy = || CopyGciReq {
        complete_gci: Gci(0),
        started_gci: gci,
    };
    assert_eq!(ctx.take_trace(), lines_to(me, &dihs, copy));
    for &each in dihs.iter().rev() {
        assert!(ctx.take_trace().is_empty(), "waits for every dih's copy");
        deliver(
            &mut dih,
            &mut ctx,
            each,
            CopyGciConf {
                complete_gci: Gci(0),
            },
        );
    }
    assert_eq!(ctx.take_trace(), lines_to(me, &tcs, || GcpCommit { gci }));
    for &tc in &tcs {
        deliver(&mut dih, &mut ctx, tc, GcpCommitConf { gci });
    }
    let trace = ctx.take_trace();
    assert_eq!(
        trace[..3],
        [2, 3, 4].map(|node| line(me, dih_of(node), GcpCompleteRep { gci }))
    );
    assert_eq!(trace.len(), 5, "then the phase's conf and the timer");
    assert_eq!(ctx.take_reports(), vec![Report::LatestGci(gci)]);

    // The first closed global checkpoint's round covers all 8 tcs, all 8
    // ldms and all 4 dihs.
    let mut previous = gci;
    for tick in 1..=20 {
        ctx.now_ms = tick * EPOCH_MS;
        let (gci, trace) = switch(&mut dih, &mut ctx, &nodes);
        assert_eq!(trace, after_switch(&nodes, previous, gci));
        previous = gci;
    }
    assert_eq!(previous, Gci::from_parts(2, 0));
    run_durability_round(
        &mut dih,
        &mut ctx,
        &nodes,
        Gci::from_parts(1, 19),
        Gci::from_parts(2, 0),
    );
}

#[test]
fn golden_trace_of_a_non_master_dih_following_the_master() {
    let mut dih = cluster_dih(2, &TWO_NODES, 2);
    assert!(!dih.is_master());
    let mut ctx = RecordingContext::new();
    let (me, membership, master) = (dih_of(2), membership_of(2), dih_of(1));
    let ldms = [ldm_of(2, 0), ldm_of(2, 1)];

    deliver(&mut dih, &mut ctx, membership, StartPhaseReq { phase: 1 });
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(
                me,
                membership,
                SystemFileRep {
                    complete_gci: Gci(0),
                    members: NodeSet::EMPTY,
                }
            ),
            line(me, membership, StartPhaseConf { phase: 1 })
        ]
    );
    // RESTART_GCI: report to the master; the conf waits for its order.
    deliver(&mut dih, &mut ctx, membership, StartPhaseReq { phase: 2 });
    assert_eq!(
        ctx.take_trace(),
        vec![line(
            me,
            master,
            RestartGciRep {
                complete_gci: Gci(0),
                members: NodeSet::EMPTY,
            }
        )]
    );
    deliver(
        &mut dih,
        &mut ctx,
        master,
        RestartGciOrd {
            restored_gci: Gci(0),
            stale: NodeSet::EMPTY,
        },
    );
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, membership, StartPhaseConf { phase: 2 })]
    );
    assert_eq!(ctx.take_reports(), vec![Report::RestoredGci(Gci(0))]);
    deliver(&mut dih, &mut ctx, membership, StartPhaseReq { phase: 3 });
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, membership, StartPhaseConf { phase: 3 })]
    );
    // RESTORE_DATA: the local ldms only; then the report to the master and,
    // at a non-master, the conf at once.
    deliver(&mut dih, &mut ctx, membership, StartPhaseReq { phase: 4 });
    assert_eq!(
        ctx.take_trace(),
        lines_to(me, &ldms, || RestoreReq {
            restored_gci: Gci(0)
        })
    );
    for &ldm in &ldms {
        let conf = RestoreConf {
            highest_gci: Gci(0),
            replayed: 0,
        };
        deliver(&mut dih, &mut ctx, ldm, conf);
    }
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(
                me,
                master,
                RestoredRep {
                    highest_gci: Gci(0)
                }
            ),
            line(me, membership, StartPhaseConf { phase: 4 }),
        ]
    );
    ctx.reports.clear();
    deliver(&mut dih, &mut ctx, membership, StartPhaseReq { phase: 5 });
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, membership, StartPhaseConf { phase: 5 })]
    );
    deliver(&mut dih, &mut ctx, membership, StartPhaseReq { phase: 6 });
    assert!(
        ctx.take_trace().is_empty(),
        "no GCP of its own: phase 6 waits for the master"
    );
    // The master's start copy: diskless, confirmed at once.
    let initial = crate::INITIAL_GCI;
    deliver(
        &mut dih,
        &mut ctx,
        master,
        CopyGciReq {
            complete_gci: Gci(0),
            started_gci: initial,
        },
    );
    assert_eq!(
        ctx.take_trace(),
        vec![line(
            me,
            master,
            CopyGciConf {
                complete_gci: Gci(0)
            }
        )]
    );
    assert!(ctx.take_reports().is_empty());
    deliver(&mut dih, &mut ctx, master, GcpCompleteRep { gci: initial });
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, membership, StartPhaseConf { phase: 6 })]
    );
    assert_eq!(ctx.take_reports(), vec![Report::LatestGci(initial)]);
    for low in 1..=3 {
        let gci = Gci::from_parts(1, low);
        deliver(&mut dih, &mut ctx, master, GcpCompleteRep { gci });
        assert!(ctx.take_trace().is_empty(), "a follower sends nothing");
        assert_eq!(ctx.take_reports(), vec![Report::LatestGci(gci)]);
    }
    assert_eq!(
        (dih.latest_gci(), dih.switches()),
        (Gci::from_parts(1, 3), 3)
    );
    // A round's copy: recorded (diskless: at once) and confirmed.
    let g = Gci::from_parts(1, 3);
    deliver(
        &mut dih,
        &mut ctx,
        master,
        CopyGciReq {
            complete_gci: g,
            started_gci: Gci::from_parts(2, 0),
        },
    );
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, master, CopyGciConf { complete_gci: g })]
    );
    assert_eq!(ctx.take_reports(), vec![Report::CompleteGci(g)]);
    assert_eq!(dih.complete_gci(), g);
}

#[test]
fn a_non_master_dih_that_heard_of_the_initial_gci_before_phase_6_confirms_at_once() {
    let mut dih = cluster_dih(3, &FOUR_NODES, 2);
    let mut ctx = RecordingContext::new();
    let gci = crate::INITIAL_GCI;
    deliver(&mut dih, &mut ctx, dih_of(1), GcpCompleteRep { gci });
    assert_eq!(ctx.take_reports(), vec![Report::LatestGci(gci)]);
    assert!(ctx.take_trace().is_empty());
    deliver(
        &mut dih,
        &mut ctx,
        membership_of(3),
        StartPhaseReq {
            phase: phases::GLOBAL_CHECKPOINT,
        },
    );
    assert_eq!(
        ctx.take_trace(),
        vec![line(
            dih_of(3),
            membership_of(3),
            StartPhaseConf { phase: 6 }
        )]
    );
}

#[test]
#[should_panic(expected = "is the master")]
fn gcp_complete_rep_from_a_dih_that_is_not_master_stops_the_node() {
    let mut dih = cluster_dih(3, &FOUR_NODES, 2);
    let mut ctx = RecordingContext::new();
    let gci = crate::INITIAL_GCI;
    deliver(&mut dih, &mut ctx, dih_of(2), GcpCompleteRep { gci });
}

#[test]
#[should_panic(expected = "is the master")]
fn gcp_complete_rep_at_the_master_stops_the_node() {
    let mut dih = cluster_dih(1, &TWO_NODES, 2);
    let mut ctx = RecordingContext::new();
    let gci = crate::INITIAL_GCI;
    deliver(&mut dih, &mut ctx, dih_of(1), GcpCompleteRep { gci });
}

#[test]
#[should_panic(expected = "not the master")]
fn gcp_timer_at_a_non_master_dih_stops_the_node() {
    let mut dih = cluster_dih(2, &TWO_NODES, 2);
    let mut ctx = RecordingContext::new();
    deliver(&mut dih, &mut ctx, dih_of(2), timer());
}

#[test]
fn a_table_with_a_partition_per_ldm_thread_of_every_node_spreads_primaries_over_every_thread() {
    // As many ldm threads as replicas: the case rotating by round alone
    // gets wrong (an ldm thread primary on one node only).
    let nodes = FOUR_NODES.iter().map(|&(id, g)| (NodeId(id), g)).collect();
    let mut dih = Dih::new(config(nodes, 2, 4)).announced();
    // 2 groups x 2 ldm threads x 2 replicas.
    let map = add_table(&mut dih, table(1, 8));
    let mut primaries: Vec<(NodeId, u16)> = map
        .partitions
        .iter()
        .map(|placement| (placement.replicas[0], placement.ldm_instance))
        .collect();
    primaries.sort_unstable();
    let every_thread: Vec<(NodeId, u16)> = (1..=4)
        .flat_map(|node| (0..2).map(move |ldm| (NodeId(node), ldm)))
        .collect();
    assert_eq!(primaries, every_thread);
    assert_redo_parts_belong_to_their_ldm(&map, 2, 4);
}
