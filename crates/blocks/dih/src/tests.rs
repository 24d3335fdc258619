//! dih's tests: golden traces of the start and the GCI switch (the exact
//! signals, in order) on one node, the master's switch over 2 nodes x 2 tcs
//! and over 4 nodes, a non-master dih following the master's reports, the
//! high part advancing with simulated time, and the shape of partition
//! maps for one and two node groups.

use crate::{job, Dih, DihConfig};
use kernel::testing::{delayed_line, deliver, line, RecordingContext};
use kernel::{Context, Report};
use signal::partition::BUCKETS;
use signal::schema::{ColumnDef, ColumnType, TableDef};
use signal::signals::{
    ContinueB, CreateTabReq, DiAddTabConf, DiAddTabReq, GcpCommit, GcpCommitConf, GcpCompleteRep,
    GcpPrepare, GcpPrepareConf, PartitionMap, PartitionPlacement, SchemaRef, StartPhaseConf,
    StartPhaseReq,
};
use signal::{BlockKind, BlockRef, ErrorCode, Gci, NodeId, Signal};
use std::sync::Arc;

const NODE: NodeId = NodeId(1);
const DIH: BlockRef = BlockRef::new(NODE, BlockKind::Dih, 0);
const DICT: BlockRef = BlockRef::new(NODE, BlockKind::Dict, 0);
const MEMBERSHIP: BlockRef = BlockRef::new(NODE, BlockKind::Membership, 0);
const TC0: BlockRef = BlockRef::new(NODE, BlockKind::Tc, 0);
const TC1: BlockRef = BlockRef::new(NODE, BlockKind::Tc, 1);
const EPOCH_MS: u64 = 100;
const GCP_MS: u64 = 2000;

fn config(data_nodes: Vec<(NodeId, u32)>, replicas: u8, redo_log_parts: u32) -> DihConfig {
    DihConfig {
        address: DIH,
        tc_instances: 2,
        ldm_instances: 2,
        data_nodes,
        replicas,
        redo_log_parts,
        epoch_interval_ms: EPOCH_MS,
        gcp_interval_ms: GCP_MS,
    }
}

fn single_node_dih() -> Dih {
    Dih::new(config(vec![(NODE, 0)], 1, 4))
}

fn timer() -> ContinueB {
    ContinueB {
        job: job::GCP_TIMER,
    }
}

/// Runs start phases 1..=3 with every tc answering at once.
fn start(dih: &mut Dih, ctx: &mut RecordingContext) {
    for phase in 1..=3 {
        deliver(dih, ctx, MEMBERSHIP, StartPhaseReq { phase });
    }
    let gci = crate::INITIAL_GCI;
    deliver(dih, ctx, TC0, GcpCommitConf { gci });
    deliver(dih, ctx, TC1, GcpCommitConf { gci });
    ctx.sent.clear();
    ctx.reports.clear();
}

/// Fires the timer at the context's time and answers every phase.
fn switch(dih: &mut Dih, ctx: &mut RecordingContext) -> Gci {
    deliver(dih, ctx, DIH, timer());
    let new_gci = match &ctx.sent[0].envelope.signal {
        Signal::GcpPrepare(prepare) => prepare.new_gci,
        other => panic!("expected GcpPrepare, got {other:?}"),
    };
    for tc in [TC0, TC1] {
        deliver(dih, ctx, tc, GcpPrepareConf { new_gci });
    }
    for tc in [TC0, TC1] {
        deliver(dih, ctx, tc, GcpCommitConf { gci: new_gci });
    }
    ctx.sent.clear();
    assert_eq!(ctx.take_reports(), vec![Report::LatestGci(new_gci)]);
    new_gci
}

#[test]
fn golden_trace_of_start_and_two_switches() {
    let mut dih = single_node_dih();
    let mut ctx = RecordingContext::new();

    deliver(&mut dih, &mut ctx, MEMBERSHIP, StartPhaseReq { phase: 1 });
    deliver(&mut dih, &mut ctx, MEMBERSHIP, StartPhaseReq { phase: 2 });
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(DIH, MEMBERSHIP, StartPhaseConf { phase: 1 }),
            line(DIH, MEMBERSHIP, StartPhaseConf { phase: 2 }),
        ]
    );

    // Phase 3: the initial GCI goes to every tc; the conf waits for them.
    let initial = Gci::from_parts(1, 0);
    deliver(&mut dih, &mut ctx, MEMBERSHIP, StartPhaseReq { phase: 3 });
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(DIH, TC0, GcpCommit { gci: initial }),
            line(DIH, TC1, GcpCommit { gci: initial }),
        ]
    );
    deliver(&mut dih, &mut ctx, TC1, GcpCommitConf { gci: initial });
    assert!(ctx.take_trace().is_empty(), "one tc is still without a GCI");
    deliver(&mut dih, &mut ctx, TC0, GcpCommitConf { gci: initial });
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(DIH, MEMBERSHIP, StartPhaseConf { phase: 3 }),
            delayed_line(DIH, DIH, timer(), EPOCH_MS),
        ]
    );
    assert_eq!(ctx.take_reports(), vec![Report::LatestGci(initial)]);
    assert_eq!(dih.latest_gci(), initial);
    assert_eq!(dih.switches(), 0, "the initial GCI is not a switch");

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
            vec![delayed_line(DIH, DIH, timer(), EPOCH_MS)]
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
        let gci = switch(&mut dih, &mut ctx);
        assert!(
            gci > previous,
            "GCIs strictly increase: {gci} after {previous}"
        );
        previous = gci;
        if gci.low() == 0 {
            seen.push((ctx.now_ms, gci));
        }
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
    deliver(&mut dih, &mut ctx, MEMBERSHIP, StartPhaseReq { phase: 3 });
    let gci = crate::INITIAL_GCI;
    deliver(&mut dih, &mut ctx, TC0, GcpCommitConf { gci });
    deliver(&mut dih, &mut ctx, TC0, GcpCommitConf { gci });
}

fn table(id: u32, partitions: u32) -> TableDef {
    TableDef {
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

#[test]
fn map_for_one_node_group_rotates_primaries_and_spreads_ldms() {
    let mut dih = Dih::new(config(vec![(NodeId(1), 0), (NodeId(2), 0)], 2, 4));
    let map = add_table(&mut dih, table(7, 4));
    assert_eq!(map.table_id, 7);
    assert_eq!(map.version, 1);
    assert_eq!(
        map.partitions,
        vec![
            placement(0, &[1, 2], 0, 0),
            placement(0, &[2, 1], 1, 1),
            // Second round: each ldm instance takes the other replica
            // order, so every ldm thread of every node is primary once.
            placement(0, &[2, 1], 0, 2),
            placement(0, &[1, 2], 1, 3),
        ]
    );
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
    let mut dih = Dih::new(config(nodes, 2, 2));
    let map = add_table(&mut dih, table(3, 8));
    assert_eq!(
        map.partitions,
        vec![
            placement(0, &[1, 2], 0, 0),
            placement(1, &[3, 4], 0, 1),
            placement(0, &[2, 1], 1, 0),
            placement(1, &[4, 3], 1, 1),
            placement(0, &[2, 1], 0, 0),
            placement(1, &[4, 3], 0, 1),
            placement(0, &[1, 2], 1, 0),
            placement(1, &[3, 4], 1, 1),
        ]
    );
    assert_eq!(map.bucket_partitions[..10], [0, 1, 2, 3, 4, 5, 6, 7, 0, 1]);
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
    Dih::new(config(vec![(NodeId(1), 0), (NodeId(1), 0)], 2, 1));
}

fn dih_of(node: u16) -> BlockRef {
    BlockRef::new(NodeId(node), BlockKind::Dih, 0)
}

fn tc_of(node: u16, instance: u16) -> BlockRef {
    BlockRef::new(NodeId(node), BlockKind::Tc, instance)
}

fn membership_of(node: u16) -> BlockRef {
    BlockRef::new(NodeId(node), BlockKind::Membership, 0)
}

/// The dih of `node` in a cluster of `nodes` (id, node group), 2 tcs each.
fn cluster_dih(node: u16, nodes: &[(u16, u32)], replicas: u8) -> Dih {
    Dih::new(DihConfig {
        address: dih_of(node),
        data_nodes: nodes
            .iter()
            .map(|&(id, group)| (NodeId(id), group))
            .collect(),
        ..config(Vec::new(), replicas, 2)
    })
}

const TWO_NODES: [(u16, u32); 2] = [(2, 0), (1, 0)];
const FOUR_NODES: [(u16, u32); 4] = [(1, 0), (2, 0), (3, 1), (4, 1)];

#[test]
fn golden_trace_of_the_masters_start_and_switch_over_two_nodes() {
    let mut dih = cluster_dih(1, &TWO_NODES, 2);
    assert!(dih.is_master(), "node 1 is the lowest id");
    let mut ctx = RecordingContext::new();
    let (me, membership) = (dih_of(1), membership_of(1));
    let tcs = [tc_of(1, 0), tc_of(1, 1), tc_of(2, 0), tc_of(2, 1)];
    for phase in 1..=2 {
        deliver(&mut dih, &mut ctx, membership, StartPhaseReq { phase });
    }
    ctx.sent.clear();

    // Phase 3: the initial GCI goes to every tc of both nodes.
    let initial = Gci::from_parts(1, 0);
    deliver(&mut dih, &mut ctx, membership, StartPhaseReq { phase: 3 });
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
        "phase 3 waits for the other node's last tc"
    );
    deliver(&mut dih, &mut ctx, tcs[3], GcpCommitConf { gci: initial });
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(me, dih_of(2), GcpCompleteRep { gci: initial }),
            line(me, membership, StartPhaseConf { phase: 3 }),
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
    let tcs: Vec<BlockRef> = (1..=4)
        .flat_map(|node| [tc_of(node, 0), tc_of(node, 1)])
        .collect();
    deliver(
        &mut dih,
        &mut ctx,
        membership_of(1),
        StartPhaseReq { phase: 3 },
    );
    let gci = crate::INITIAL_GCI;
    assert_eq!(
        ctx.take_trace(),
        tcs.iter()
            .map(|&tc| line(me, tc, GcpCommit { gci }))
            .collect::<Vec<_>>()
    );
    for &tc in &tcs {
        deliver(&mut dih, &mut ctx, tc, GcpCommitConf { gci });
    }
    let trace = ctx.take_trace();
    assert_eq!(
        trace[..3],
        [2, 3, 4].map(|node| line(me, dih_of(node), GcpCompleteRep { gci }))
    );
    assert_eq!(trace.len(), 5, "then the phase's conf and the timer");
}

#[test]
fn golden_trace_of_a_non_master_dih_following_the_master() {
    let mut dih = cluster_dih(2, &TWO_NODES, 2);
    assert!(!dih.is_master());
    let mut ctx = RecordingContext::new();
    let (me, membership, master) = (dih_of(2), membership_of(2), dih_of(1));
    for phase in 1..=3 {
        deliver(&mut dih, &mut ctx, membership, StartPhaseReq { phase });
    }
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(me, membership, StartPhaseConf { phase: 1 }),
            line(me, membership, StartPhaseConf { phase: 2 }),
        ],
        "no GCP of its own: phase 3 waits for the master"
    );
    let initial = crate::INITIAL_GCI;
    deliver(&mut dih, &mut ctx, master, GcpCompleteRep { gci: initial });
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, membership, StartPhaseConf { phase: 3 })]
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
}

#[test]
fn a_non_master_dih_that_heard_of_the_initial_gci_before_phase_3_confirms_at_once() {
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
        StartPhaseReq { phase: 3 },
    );
    assert_eq!(
        ctx.take_trace(),
        vec![line(
            dih_of(3),
            membership_of(3),
            StartPhaseConf { phase: 3 }
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
    let mut dih = Dih::new(config(nodes, 2, 4));
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
}
