//! dict across data nodes: golden traces of a create and a drop run by the
//! master of 2 nodes (every tc and ldm of both, then the other dict) and of
//! 4 nodes, the other dicts refusing creates and drops with NotMaster,
//! learning tables from the master and answering GET_TABINFO and
//! LIST_TABLES with the master's schema version.

use crate::{schema_sync_tests, Dict, DictConfig, DROP_RETRY_DELAY_MS};
use kernel::testing::{delayed_line, deliver, line, RecordingContext};
use kernel::{Context, Report};
use signal::partition::BUCKETS;
use signal::phases::{self, PHASES};
use signal::schema::{ColumnDef, ColumnType, TableDef};
use signal::signals::{
    AddTabConf, CreateTabConf, CreateTabReq, DiAddTabConf, DiAddTabReq, DictAddTabReq, DropTabConf,
    DropTabOrd, DropTabRep, DropTabReq, GetTabInfoReq, ListTablesReq, LqhAddTabReq, PartitionMap,
    PartitionPlacement, SchemaRef, StartPhaseReq, TcAddTabReq,
};
use signal::{codec, BlockKind, BlockRef, ErrorCode, NodeId, Signal};
use std::sync::Arc;

const API: BlockRef = BlockRef::new(NodeId(100), BlockKind::Api, 0);

fn block(node: u16, kind: BlockKind, instance: u16) -> BlockRef {
    BlockRef::new(NodeId(node), kind, instance)
}

fn dict_of(node: u16) -> BlockRef {
    block(node, BlockKind::Dict, 0)
}

/// The dict of `node` in a cluster of `nodes` (one group per two nodes),
/// one tc and two ldms per node, through its start phases.
fn started_dict(node: u16, nodes: &[u16]) -> (Dict, RecordingContext) {
    let mut dict = Dict::new(DictConfig {
        address: dict_of(node),
        tc_instances: 1,
        ldm_instances: 2,
        data_nodes: nodes
            .iter()
            .enumerate()
            .map(|(index, &id)| (NodeId(id), index as u32 / 2))
            .collect(),
        replicas: 2,
        redo_log_parts: 2,
        diskless: true,
    })
    .announced();
    let mut ctx = RecordingContext::new();
    for &phase in PHASES {
        let membership = block(node, BlockKind::Membership, 0);
        deliver(&mut dict, &mut ctx, membership, StartPhaseReq { phase });
        if phase == phases::RESTORE_SCHEMA {
            schema_sync_tests::agree_on_no_schema(&mut dict, &mut ctx);
        }
    }
    ctx.sent.clear();
    (dict, ctx)
}

fn definition(name: &str, partitions: u32) -> TableDef {
    TableDef {
        indexes: Vec::new(),
        revision: 0,
        id: 0,
        version: 0,
        name: name.into(),
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

fn map_of(table_id: u32) -> Arc<PartitionMap> {
    Arc::new(PartitionMap {
        table_id,
        version: 1,
        bucket_partitions: (0..BUCKETS).map(|bucket| bucket % 2).collect(),
        partitions: (0..2)
            .map(|p| PartitionPlacement {
                node_group: 0,
                replicas: vec![NodeId(1 + p as u16), NodeId(2 - p as u16)],
                ldm_instance: p as u16,
                redo_part: p,
            })
            .collect(),
    })
}

fn create_request(ctx: &RecordingContext, request_id: u32, table: &TableDef) -> CreateTabReq {
    let definition = table.encode_to_vec();
    CreateTabReq {
        request_id,
        definition: ctx.pool().copy_from(&definition).expect("pool has room"),
    }
}

fn drop_request(ctx: &RecordingContext, request_id: u32, name: &str) -> DropTabReq {
    DropTabReq {
        request_id,
        name: ctx
            .pool()
            .copy_from(name.as_bytes())
            .expect("pool has room"),
    }
}

/// GET_TABINFO of `name`: the definition, the map and the schema version,
/// or the refusal.
fn get(
    dict: &mut Dict,
    ctx: &mut RecordingContext,
    name: &str,
) -> Result<(TableDef, PartitionMap, u32), ErrorCode> {
    let request = GetTabInfoReq {
        request_id: 3,
        name: ctx
            .pool()
            .copy_from(name.as_bytes())
            .expect("pool has room"),
    };
    deliver(dict, ctx, API, request);
    let sent = ctx.sent.pop().expect("an answer");
    assert!(ctx.sent.is_empty());
    match sent.envelope.signal {
        Signal::GetTabInfoConf(conf) => {
            let table = TableDef::decode(conf.definition.as_slice()).expect("valid definition");
            let map = codec::decode_partition_map(conf.map.as_slice()).expect("valid map");
            assert_eq!(conf.map_version, map.version);
            Ok((table, map, conf.schema_version))
        }
        Signal::SchemaRef(refusal) => Err(refusal.error),
        other => panic!("unexpected answer {other:?}"),
    }
}

/// LIST_TABLES: the names and the schema version, or the refusal.
fn list(dict: &mut Dict, ctx: &mut RecordingContext) -> Result<(Vec<String>, u32), ErrorCode> {
    deliver(dict, ctx, API, ListTablesReq { request_id: 4 });
    let sent = ctx.sent.pop().expect("an answer");
    assert!(ctx.sent.is_empty());
    assert_eq!(sent.envelope.to, API);
    match sent.envelope.signal {
        Signal::ListTablesConf(conf) => {
            assert_eq!(conf.request_id, 4);
            let names = codec::decode_table_names(conf.names.as_slice()).expect("valid names");
            Ok((
                names.into_iter().map(String::from).collect(),
                conf.schema_version,
            ))
        }
        Signal::SchemaRef(refusal) => {
            assert_eq!(refusal.request_id, 4);
            Err(refusal.error)
        }
        other => panic!("unexpected answer {other:?}"),
    }
}

#[test]
fn golden_trace_of_a_create_across_two_nodes() {
    let (mut dict, mut ctx) = started_dict(1, &[1, 2]);
    assert!(dict.is_master());
    let me = dict_of(1);
    let dih = block(1, BlockKind::Dih, 0);
    let request = create_request(&ctx, 1, &definition("t1", 2));
    deliver(&mut dict, &mut ctx, API, request);
    let table = Arc::new(TableDef {
        id: 0,
        version: 1,
        ..definition("t1", 2)
    });
    assert_eq!(
        ctx.take_trace(),
        vec![line(
            me,
            dih,
            DiAddTabReq {
                table: Arc::clone(&table)
            }
        )],
        "the master's own dih maps the table"
    );

    let map = map_of(0);
    let conf = DiAddTabConf {
        map: Arc::clone(&map),
    };
    deliver(&mut dict, &mut ctx, dih, conf);
    let tcs = [block(1, BlockKind::Tc, 0), block(2, BlockKind::Tc, 0)];
    let ldms = [
        block(1, BlockKind::Ldm, 0),
        block(1, BlockKind::Ldm, 1),
        block(2, BlockKind::Ldm, 0),
        block(2, BlockKind::Ldm, 1),
    ];
    let table_and_map = || (Arc::clone(&table), Arc::clone(&map));
    let mut expected: Vec<String> = tcs
        .iter()
        .map(|&tc| {
            let (table, map) = table_and_map();
            line(me, tc, TcAddTabReq { table, map })
        })
        .collect();
    expected.extend(ldms.iter().map(|&ldm| {
        let (table, map) = table_and_map();
        line(me, ldm, LqhAddTabReq { table, map })
    }));
    assert_eq!(ctx.take_trace(), expected);

    // The second round starts only when every tc and ldm of both nodes has
    // the table.
    for &from in ldms.iter().rev().chain(&tcs[..1]) {
        deliver(&mut dict, &mut ctx, from, AddTabConf { table_id: 0 });
        assert!(ctx.take_trace().is_empty(), "node 2's tc is missing");
    }
    deliver(&mut dict, &mut ctx, tcs[1], AddTabConf { table_id: 0 });
    let (announced, announced_map) = table_and_map();
    assert_eq!(
        ctx.take_trace(),
        vec![line(
            me,
            dict_of(2),
            DictAddTabReq {
                table: announced,
                map: announced_map,
                schema_version: 2
            }
        )]
    );
    assert_eq!(
        get(&mut dict, &mut ctx, "t1"),
        Err(ErrorCode::UnknownTable),
        "online here once the other dict has it"
    );
    assert!(ctx.take_reports().is_empty());

    deliver(&mut dict, &mut ctx, dict_of(2), AddTabConf { table_id: 0 });
    assert_eq!(
        ctx.take_trace(),
        vec![line(
            me,
            API,
            CreateTabConf {
                request_id: 1,
                table_id: 0,
                table_version: 1
            }
        )]
    );
    assert_eq!(ctx.take_reports(), vec![Report::SchemaVersion(2)]);
    assert_eq!(
        get(&mut dict, &mut ctx, "t1"),
        Ok(((*table).clone(), (*map).clone(), 2))
    );
}

/// Runs a create of `name` at the master of a cluster, every block
/// answering; returns the DictAddTabReqs it sent (one per other dict).
fn create_everywhere(
    dict: &mut Dict,
    ctx: &mut RecordingContext,
    name: &str,
) -> Vec<(BlockRef, DictAddTabReq)> {
    let request = create_request(ctx, 9, &definition(name, 2));
    deliver(dict, ctx, API, request);
    let Signal::DiAddTabReq(request) = ctx.sent.remove(0).envelope.signal else {
        panic!("a create starts at dih");
    };
    let table_id = request.table.id;
    let dih = block(dict.address.node.0, BlockKind::Dih, 0);
    deliver(
        dict,
        ctx,
        dih,
        DiAddTabConf {
            map: map_of(table_id),
        },
    );
    for sent in std::mem::take(&mut ctx.sent) {
        deliver(dict, ctx, sent.envelope.to, AddTabConf { table_id });
    }
    let mut announced = Vec::new();
    for sent in std::mem::take(&mut ctx.sent) {
        let Signal::DictAddTabReq(request) = sent.envelope.signal else {
            panic!("expected DictAddTabReq, got {:?}", sent.envelope.signal);
        };
        announced.push((sent.envelope.to, request));
    }
    for (to, _) in &announced {
        deliver(dict, ctx, *to, AddTabConf { table_id });
    }
    match &ctx.sent[..] {
        [sent] => assert!(matches!(sent.envelope.signal, Signal::CreateTabConf(_))),
        other => panic!("expected the create's conf, got {other:?}"),
    }
    ctx.sent.clear();
    ctx.reports.clear();
    announced
}

#[test]
fn golden_trace_of_a_create_across_four_nodes() {
    let nodes = [1, 2, 3, 4];
    let (mut dict, mut ctx) = started_dict(1, &nodes);
    let me = dict_of(1);
    let request = create_request(&ctx, 1, &definition("t1", 2));
    deliver(&mut dict, &mut ctx, API, request);
    ctx.sent.clear();
    let map = map_of(0);
    let conf = DiAddTabConf {
        map: Arc::clone(&map),
    };
    deliver(&mut dict, &mut ctx, block(1, BlockKind::Dih, 0), conf);
    let receivers: Vec<BlockRef> = ctx.sent.drain(..).map(|sent| sent.envelope.to).collect();
    let mut expected: Vec<BlockRef> = nodes
        .iter()
        .map(|&node| block(node, BlockKind::Tc, 0))
        .collect();
    expected.extend(nodes.iter().flat_map(|&node| {
        [
            block(node, BlockKind::Ldm, 0),
            block(node, BlockKind::Ldm, 1),
        ]
    }));
    assert_eq!(
        receivers, expected,
        "every tc, then every ldm, node by node"
    );
    for to in expected {
        deliver(&mut dict, &mut ctx, to, AddTabConf { table_id: 0 });
    }
    let table = Arc::new(TableDef {
        id: 0,
        version: 1,
        ..definition("t1", 2)
    });
    // The other dicts hear of it highest node first (a master dying
    // part-way leaves its successor, the lowest, the one without it).
    assert_eq!(
        ctx.take_trace(),
        [4, 3, 2]
            .map(|node| line(
                me,
                dict_of(node),
                DictAddTabReq {
                    table: Arc::clone(&table),
                    map: Arc::clone(&map),
                    schema_version: 2
                }
            ))
            .to_vec()
    );
    for node in [4, 2] {
        deliver(
            &mut dict,
            &mut ctx,
            dict_of(node),
            AddTabConf { table_id: 0 },
        );
    }
    assert!(ctx.take_trace().is_empty(), "dict 3 has not answered");
    deliver(&mut dict, &mut ctx, dict_of(3), AddTabConf { table_id: 0 });
    assert_eq!(ctx.take_trace().len(), 1, "the create's conf");
}

#[test]
fn golden_trace_of_a_drop_across_two_nodes() {
    let (mut dict, mut ctx) = started_dict(1, &[1, 2]);
    let me = dict_of(1);
    create_everywhere(&mut dict, &mut ctx, "t1");
    let request = drop_request(&ctx, 4, "t1");
    deliver(&mut dict, &mut ctx, API, request);
    let order = || DropTabOrd { table_id: 0 };
    let idle = DropTabRep {
        table_id: 0,
        busy: false,
    };
    let tcs = [block(1, BlockKind::Tc, 0), block(2, BlockKind::Tc, 0)];
    assert_eq!(
        ctx.take_trace(),
        tcs.map(|tc| line(me, tc, order())).to_vec()
    );
    for tc in tcs {
        deliver(&mut dict, &mut ctx, tc, DropTabRep { ..idle });
    }
    let ldms = [
        block(1, BlockKind::Ldm, 0),
        block(1, BlockKind::Ldm, 1),
        block(2, BlockKind::Ldm, 0),
        block(2, BlockKind::Ldm, 1),
    ];
    assert_eq!(
        ctx.take_trace(),
        ldms.map(|ldm| line(me, ldm, order())).to_vec()
    );
    // Node 2's ldm 1 still has operations on the table: asked again.
    let busy = DropTabRep {
        table_id: 0,
        busy: true,
    };
    deliver(&mut dict, &mut ctx, ldms[3], busy);
    assert_eq!(
        ctx.take_trace(),
        vec![delayed_line(me, ldms[3], order(), DROP_RETRY_DELAY_MS)]
    );
    for ldm in ldms {
        deliver(&mut dict, &mut ctx, ldm, DropTabRep { ..idle });
    }
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, dict_of(2), order())],
        "the other dict forgets the table last"
    );
    assert!(ctx.take_reports().is_empty());
    deliver(&mut dict, &mut ctx, dict_of(2), DropTabRep { ..idle });
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, API, DropTabConf { request_id: 4 })]
    );
    assert_eq!(ctx.take_reports(), vec![Report::SchemaVersion(3)]);
    assert_eq!(get(&mut dict, &mut ctx, "t1"), Err(ErrorCode::UnknownTable));
}

#[test]
fn a_dict_that_is_not_master_refuses_creates_and_drops_even_before_start() {
    let mut dict = Dict::new(DictConfig {
        address: dict_of(2),
        tc_instances: 1,
        ldm_instances: 1,
        data_nodes: vec![(NodeId(2), 0), (NodeId(1), 0)],
        replicas: 2,
        redo_log_parts: 1,
        diskless: true,
    })
    .announced();
    assert!(!dict.is_master(), "node 1 is the lowest id, in any order");
    let mut ctx = RecordingContext::new();
    let me = dict_of(2);
    let not_master = |request_id| SchemaRef {
        request_id,
        error: ErrorCode::NotMaster,
    };
    let request = create_request(&ctx, 1, &definition("t1", 0));
    deliver(&mut dict, &mut ctx, API, request);
    let request = drop_request(&ctx, 2, "t1");
    deliver(&mut dict, &mut ctx, API, request);
    let junk = CreateTabReq {
        request_id: 3,
        definition: ctx.pool().copy_from(b"junk").expect("room"),
    };
    deliver(&mut dict, &mut ctx, API, junk);
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(me, API, not_master(1)),
            line(me, API, not_master(2)),
            line(me, API, not_master(3)),
        ]
    );
    assert_eq!(
        get(&mut dict, &mut ctx, "t1"),
        Err(ErrorCode::NodeNotStarted),
        "GET_TABINFO is answered by every dict, once started"
    );
    assert_eq!(
        list(&mut dict, &mut ctx),
        Err(ErrorCode::NodeNotStarted),
        "LIST_TABLES too"
    );
}

#[test]
fn a_dict_that_is_not_master_learns_and_forgets_tables_from_the_master() {
    let (mut master, mut master_ctx) = started_dict(1, &[1, 2]);
    let (mut other, mut ctx) = started_dict(2, &[1, 2]);
    assert_eq!(
        get(&mut other, &mut ctx, "t1"),
        Err(ErrorCode::UnknownTable)
    );
    assert_eq!(list(&mut other, &mut ctx), Ok((Vec::new(), 1)));
    let me = dict_of(2);
    let master_dict = dict_of(1);

    let [(to, request)]: [_; 1] = create_everywhere(&mut master, &mut master_ctx, "t1")
        .try_into()
        .expect("one other dict");
    assert_eq!(to, me);
    let (table, map) = (Arc::clone(&request.table), Arc::clone(&request.map));
    deliver(&mut other, &mut ctx, master_dict, request);
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, master_dict, AddTabConf { table_id: 0 })]
    );
    assert_eq!(ctx.take_reports(), vec![Report::SchemaVersion(2)]);
    assert_eq!(
        get(&mut other, &mut ctx, "t1"),
        Ok(((*table).clone(), (*map).clone(), 2)),
        "the definition, the map and the master's schema version"
    );
    assert_eq!(other.schema_version(), master.schema_version());
    assert_eq!(
        list(&mut other, &mut ctx),
        Ok((vec!["t1".to_string()], 2)),
        "the master's tables and schema version"
    );
    assert_eq!(
        list(&mut other, &mut ctx),
        list(&mut master, &mut master_ctx)
    );

    deliver(
        &mut other,
        &mut ctx,
        master_dict,
        DropTabOrd { table_id: 0 },
    );
    assert_eq!(
        ctx.take_trace(),
        vec![line(
            me,
            master_dict,
            DropTabRep {
                table_id: 0,
                busy: false
            }
        )]
    );
    assert_eq!(ctx.take_reports(), vec![Report::SchemaVersion(3)]);
    assert_eq!(
        get(&mut other, &mut ctx, "t1"),
        Err(ErrorCode::UnknownTable)
    );
    assert_eq!(list(&mut other, &mut ctx), Ok((Vec::new(), 3)));

    // The id comes back with its next version, as at the master.
    let recreated = DictAddTabReq {
        table: Arc::new(TableDef {
            id: 0,
            version: 2,
            ..definition("t2", 2)
        }),
        map: map_of(0),
        schema_version: 4,
    };
    deliver(&mut other, &mut ctx, master_dict, recreated);
    ctx.sent.clear();
    assert_eq!(
        get(&mut other, &mut ctx, "t2").map(|(table, _, version)| (table.version, version)),
        Ok((2, 4))
    );
    assert_eq!(list(&mut other, &mut ctx), Ok((vec!["t2".to_string()], 4)));
}

#[test]
#[should_panic(expected = "is the master")]
fn dict_add_tab_req_at_the_master_stops_the_node() {
    let (mut dict, mut ctx) = started_dict(1, &[1, 2]);
    let request = DictAddTabReq {
        table: Arc::new(definition("t1", 2)),
        map: map_of(0),
        schema_version: 2,
    };
    deliver(&mut dict, &mut ctx, dict_of(2), request);
}

#[test]
#[should_panic(expected = "is the master")]
fn drop_order_from_a_dict_that_is_not_master_stops_the_node() {
    let (mut dict, mut ctx) = started_dict(2, &[1, 2, 3, 4]);
    deliver(&mut dict, &mut ctx, dict_of(3), DropTabOrd { table_id: 0 });
}
