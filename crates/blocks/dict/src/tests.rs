//! dict's tests: golden traces of create and drop (the exact signals, with
//! the blocks' replies fed back) and of LIST_TABLES, the refusals
//! (duplicate name, bad definition, unknown table, not started, queue
//! full), the FIFO of concurrent requests, the busy ldm asked again after
//! 10 ms, and id reuse with the next version. The dict here is diskless;
//! `persistence_tests.rs` covers the schema file.

use crate::{Dict, DictConfig, DROP_RETRY_DELAY_MS, QUEUE_CAPACITY};
use kernel::testing::{delayed_line, deliver, line, RecordingContext};
use kernel::{Context, Report};
use signal::phases::{PHASES, SCHEMA};
use signal::schema::{ColumnDef, ColumnType, TableDef};
use signal::signals::{
    AddTabConf, ApiFailRep, CreateTabConf, CreateTabReq, DiAddTabConf, DiAddTabReq, DropTabConf,
    DropTabOrd, DropTabRep, DropTabReq, GetTabInfoReq, ListTablesConf, ListTablesReq, LqhAddTabReq,
    PartitionMap, SchemaRef, StartPhaseConf, StartPhaseReq, TcAddTabReq,
};
use signal::{codec, BlockKind, BlockRef, ErrorCode, NodeId, Signal};
use std::sync::Arc;

const NODE: NodeId = NodeId(1);
pub(crate) const DICT: BlockRef = BlockRef::new(NODE, BlockKind::Dict, 0);
const DIH: BlockRef = BlockRef::new(NODE, BlockKind::Dih, 0);
const MEMBERSHIP: BlockRef = BlockRef::new(NODE, BlockKind::Membership, 0);
pub(crate) const TC0: BlockRef = BlockRef::new(NODE, BlockKind::Tc, 0);
pub(crate) const LDM0: BlockRef = BlockRef::new(NODE, BlockKind::Ldm, 0);
pub(crate) const LDM1: BlockRef = BlockRef::new(NODE, BlockKind::Ldm, 1);
pub(crate) const API: BlockRef = BlockRef::new(NodeId(100), BlockKind::Api, 0);
const OTHER_API: BlockRef = BlockRef::new(NodeId(101), BlockKind::Api, 0);

fn new_dict() -> Dict {
    Dict::new(DictConfig {
        address: DICT,
        tc_instances: 1,
        ldm_instances: 2,
        data_nodes: vec![(NODE, 0)],
        replicas: 1,
        redo_log_parts: 2,
        diskless: true,
    })
    .announced()
}

/// A dict through all start phases, with an empty trace.
pub(crate) fn started() -> (Dict, RecordingContext) {
    let mut dict = new_dict();
    let mut ctx = RecordingContext::new();
    for &phase in PHASES {
        deliver(&mut dict, &mut ctx, MEMBERSHIP, StartPhaseReq { phase });
    }
    assert_eq!(
        ctx.take_trace(),
        PHASES
            .iter()
            .map(|&phase| line(DICT, MEMBERSHIP, StartPhaseConf { phase }))
            .collect::<Vec<_>>()
    );
    (dict, ctx)
}

/// A table as a client asks for it: no id, no version, default partitions.
pub(crate) fn definition(name: &str) -> TableDef {
    TableDef {
        indexes: Vec::new(),
        revision: 0,
        id: 0,
        version: 0,
        name: name.into(),
        columns: vec![
            ColumnDef {
                name: "k".into(),
                column_type: ColumnType::Int { unsigned: false },
                nullable: false,
            },
            ColumnDef {
                name: "v".into(),
                column_type: ColumnType::VarChar(20),
                nullable: true,
            },
        ],
        primary_key: vec![0],
        partitions: 0,
        partition_key: Vec::new(),
    }
}

/// The table as dict assigns it.
fn assigned(name: &str, id: u32, version: u32) -> Arc<TableDef> {
    Arc::new(TableDef {
        id,
        version,
        partitions: 2,
        ..definition(name)
    })
}

fn map_of(table_id: u32) -> Arc<PartitionMap> {
    Arc::new(PartitionMap {
        table_id,
        version: 1,
        bucket_partitions: vec![0, 1],
        partitions: Vec::new(),
    })
}

fn create_request(ctx: &RecordingContext, request_id: u32, table: &TableDef) -> CreateTabReq {
    CreateTabReq {
        request_id,
        definition: ctx
            .pool()
            .copy_from(&table.encode_to_vec())
            .expect("pool has room"),
    }
}

fn drop_request(ctx: &RecordingContext, request_id: u32, name: &[u8]) -> DropTabReq {
    DropTabReq {
        request_id,
        name: ctx.pool().copy_from(name).expect("pool has room"),
    }
}

fn get_request(ctx: &RecordingContext, request_id: u32, name: &[u8]) -> GetTabInfoReq {
    GetTabInfoReq {
        request_id,
        name: ctx.pool().copy_from(name).expect("pool has room"),
    }
}

pub(crate) fn schema_ref(request_id: u32, error: ErrorCode) -> SchemaRef {
    SchemaRef { request_id, error }
}

/// Feeds the replies of dih, the tc and the ldms to the running create of
/// table `table_id`.
fn answer_create(dict: &mut Dict, ctx: &mut RecordingContext, table_id: u32) {
    deliver(
        dict,
        ctx,
        DIH,
        DiAddTabConf {
            map: map_of(table_id),
        },
    );
    for block in [TC0, LDM0, LDM1] {
        deliver(dict, ctx, block, AddTabConf { table_id });
    }
}

/// Creates `name` end to end; returns the table's (id, version).
pub(crate) fn create(dict: &mut Dict, ctx: &mut RecordingContext, name: &str) -> (u32, u32) {
    let request = create_request(ctx, 9, &definition(name));
    deliver(dict, ctx, API, request);
    let table_id = match &ctx.sent[0].envelope.signal {
        Signal::DiAddTabReq(request) => request.table.id,
        other => panic!("expected DiAddTabReq, got {other:?}"),
    };
    answer_create(dict, ctx, table_id);
    let sent = ctx.sent.pop().expect("the create's reply");
    ctx.sent.clear();
    ctx.reports.clear();
    match sent.envelope.signal {
        Signal::CreateTabConf(conf) => (conf.table_id, conf.table_version),
        other => panic!("expected CreateTabConf, got {other:?}"),
    }
}

/// Drops `name` end to end, every block answering not busy.
fn drop_table(dict: &mut Dict, ctx: &mut RecordingContext, name: &str, table_id: u32) {
    let request = drop_request(ctx, 8, name.as_bytes());
    deliver(dict, ctx, API, request);
    for block in [TC0, LDM0, LDM1] {
        deliver(
            dict,
            ctx,
            block,
            DropTabRep {
                table_id,
                busy: false,
            },
        );
    }
    assert_eq!(
        ctx.take_trace().last(),
        Some(&line(DICT, API, DropTabConf { request_id: 8 }))
    );
    ctx.reports.clear();
}

/// Asks for `name`'s definition; returns it, or the refusal's trace.
pub(crate) fn get(
    dict: &mut Dict,
    ctx: &mut RecordingContext,
    name: &str,
) -> Result<TableDef, Vec<String>> {
    let request = get_request(ctx, 5, name.as_bytes());
    deliver(dict, ctx, API, request);
    if let [sent] = &ctx.sent[..] {
        if let Signal::GetTabInfoConf(conf) = &sent.envelope.signal {
            assert_eq!(sent.envelope.to, API);
            assert_eq!(conf.request_id, 5);
            assert_eq!(conf.schema_version, dict.schema_version());
            let table =
                TableDef::decode(conf.definition.as_slice()).expect("dict encodes valid tables");
            ctx.sent.clear();
            return Ok(table);
        }
    }
    Err(ctx.take_trace())
}

/// LIST_TABLES: the names and the schema version, or the refusal's trace.
fn list(dict: &mut Dict, ctx: &mut RecordingContext) -> Result<(Vec<String>, u32), Vec<String>> {
    deliver(dict, ctx, API, ListTablesReq { request_id: 6 });
    if let [sent] = &ctx.sent[..] {
        if let Signal::ListTablesConf(conf) = &sent.envelope.signal {
            assert_eq!(sent.envelope.to, API);
            assert_eq!(conf.request_id, 6);
            let names = codec::decode_table_names(conf.names.as_slice())
                .expect("dict encodes valid names")
                .into_iter()
                .map(String::from)
                .collect();
            let version = conf.schema_version;
            ctx.sent.clear();
            return Ok((names, version));
        }
    }
    Err(ctx.take_trace())
}

#[test]
fn golden_trace_of_list_tables() {
    let (mut dict, mut ctx) = started();
    deliver(&mut dict, &mut ctx, API, ListTablesReq { request_id: 1 });
    let Some(Signal::ListTablesConf(conf)) = ctx.sent.pop().map(|sent| sent.envelope.signal) else {
        panic!("no ListTablesConf");
    };
    let pool = ctx.pool();
    let expected = |request_id, schema_version, names: &[u8]| ListTablesConf {
        request_id,
        schema_version,
        names: pool.copy_from(names).expect("room"),
    };
    assert_eq!(conf, expected(1, 1, &[0, 0]), "no table yet");

    create(&mut dict, &mut ctx, "t2");
    create(&mut dict, &mut ctx, "T9");
    create(&mut dict, &mut ctx, "t10");
    deliver(
        &mut dict,
        &mut ctx,
        OTHER_API,
        ListTablesReq { request_id: 2 },
    );
    let names = [
        &[3, 0][..],
        &[2, 0, b'T', b'9'],
        &[3, 0, b't', b'1', b'0'],
        &[2, 0, b't', b'2'],
    ]
    .concat();
    let trace = ctx.take_trace();
    assert_eq!(
        trace,
        vec![line(DICT, OTHER_API, expected(2, 4, &names))],
        "sorted by byte value, to the asker"
    );
    assert!(trace[0].contains("Section(15 bytes)"), "{trace:?}");
    deliver(&mut dict, &mut ctx, API, ListTablesReq { request_id: 3 });
    let Some(Signal::ListTablesConf(conf)) = ctx.sent.pop().map(|sent| sent.envelope.signal) else {
        panic!("no ListTablesConf");
    };
    assert_eq!(conf, expected(3, 4, &names));
    assert!(ctx.take_reports().is_empty(), "listing changes nothing");
}

#[test]
fn tables_being_created_or_dropped_are_not_listed() {
    let (mut dict, mut ctx) = started();
    assert_eq!(create(&mut dict, &mut ctx, "t1"), (0, 1));
    assert_eq!(create(&mut dict, &mut ctx, "t2"), (1, 1));
    let request = drop_request(&ctx, 2, b"t1");
    deliver(&mut dict, &mut ctx, API, request);
    let request = create_request(&ctx, 3, &definition("t3"));
    deliver(&mut dict, &mut ctx, API, request);
    ctx.sent.clear();
    assert_eq!(
        list(&mut dict, &mut ctx),
        Ok((vec!["t2".to_string()], 3)),
        "t1 is being dropped, t3 waits to be created"
    );
    for block in [TC0, LDM0, LDM1] {
        let idle = DropTabRep {
            table_id: 0,
            busy: false,
        };
        deliver(&mut dict, &mut ctx, block, idle);
    }
    answer_create(&mut dict, &mut ctx, 0);
    ctx.sent.clear();
    assert_eq!(
        list(&mut dict, &mut ctx),
        Ok((vec!["t2".to_string(), "t3".to_string()], 5))
    );
}

#[test]
fn a_list_that_does_not_fit_one_section_is_refused_not_cut_short() {
    let (mut dict, mut ctx) = started();
    // 2 + 1 985 * (2 + 64) bytes fit in 131 072; one name more does not.
    let name = |index: usize| format!("{index:0>64}");
    for index in 0..1985 {
        create(&mut dict, &mut ctx, &name(index));
    }
    let (names, version) = list(&mut dict, &mut ctx).expect("the longest list that fits");
    assert_eq!(names.len(), 1985);
    assert_eq!(names[0], name(0));
    assert_eq!(version, 1986);
    create(&mut dict, &mut ctx, &name(1985));
    assert_eq!(
        list(&mut dict, &mut ctx),
        Err(vec![line(
            DICT,
            API,
            schema_ref(6, ErrorCode::OutOfSignalMemory)
        )])
    );
    // Every large section held: the pool is exhausted, refused alike.
    drop_table(&mut dict, &mut ctx, &name(1985), 1985);
    let held: Vec<_> = std::iter::from_fn(|| ctx.pool().alloc(100_000)).collect();
    assert!(!held.is_empty());
    assert_eq!(
        list(&mut dict, &mut ctx),
        Err(vec![line(
            DICT,
            API,
            schema_ref(6, ErrorCode::OutOfSignalMemory)
        )])
    );
    drop(held);
    assert_eq!(
        list(&mut dict, &mut ctx).map(|(names, _)| names.len()),
        Ok(1985)
    );
}

#[test]
fn golden_trace_of_create() {
    let (mut dict, mut ctx) = started();
    let request = create_request(&ctx, 1, &definition("t1"));
    deliver(&mut dict, &mut ctx, API, request);
    let table = assigned("t1", 0, 1);
    assert_eq!(
        ctx.take_trace(),
        vec![line(
            DICT,
            DIH,
            DiAddTabReq {
                table: Arc::clone(&table)
            }
        )]
    );
    assert_eq!(
        get(&mut dict, &mut ctx, "t1"),
        Err(vec![line(
            DICT,
            API,
            schema_ref(5, ErrorCode::UnknownTable)
        )]),
        "a table being created is invisible"
    );

    let map = map_of(0);
    deliver(
        &mut dict,
        &mut ctx,
        DIH,
        DiAddTabConf {
            map: Arc::clone(&map),
        },
    );
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(
                DICT,
                TC0,
                TcAddTabReq {
                    table: Arc::clone(&table),
                    map: Arc::clone(&map)
                }
            ),
            line(
                DICT,
                LDM0,
                LqhAddTabReq {
                    table: Arc::clone(&table),
                    map: Arc::clone(&map)
                }
            ),
            line(
                DICT,
                LDM1,
                LqhAddTabReq {
                    table: Arc::clone(&table),
                    map: Arc::clone(&map)
                }
            ),
        ]
    );

    for block in [LDM1, TC0] {
        deliver(&mut dict, &mut ctx, block, AddTabConf { table_id: 0 });
        assert!(ctx.take_trace().is_empty(), "ldm 0 has not added the table");
    }
    deliver(&mut dict, &mut ctx, LDM0, AddTabConf { table_id: 0 });
    assert_eq!(
        ctx.take_trace(),
        vec![line(
            DICT,
            API,
            CreateTabConf {
                request_id: 1,
                table_id: 0,
                table_version: 1
            }
        )]
    );
    assert_eq!(ctx.take_reports(), vec![Report::SchemaVersion(2)]);
    assert_eq!(get(&mut dict, &mut ctx, "t1"), Ok((*table).clone()));
}

#[test]
fn golden_trace_of_drop_with_a_busy_ldm() {
    let (mut dict, mut ctx) = started();
    assert_eq!(create(&mut dict, &mut ctx, "t1"), (0, 1));

    let request = drop_request(&ctx, 2, b"t1");
    deliver(&mut dict, &mut ctx, API, request);
    assert_eq!(
        ctx.take_trace(),
        vec![line(DICT, TC0, DropTabOrd { table_id: 0 })]
    );
    assert_eq!(
        get(&mut dict, &mut ctx, "t1"),
        Err(vec![line(
            DICT,
            API,
            schema_ref(5, ErrorCode::UnknownTable)
        )]),
        "a table being dropped is invisible"
    );

    deliver(
        &mut dict,
        &mut ctx,
        TC0,
        DropTabRep {
            table_id: 0,
            busy: false,
        },
    );
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(DICT, LDM0, DropTabOrd { table_id: 0 }),
            line(DICT, LDM1, DropTabOrd { table_id: 0 }),
        ]
    );

    deliver(
        &mut dict,
        &mut ctx,
        LDM0,
        DropTabRep {
            table_id: 0,
            busy: true,
        },
    );
    assert_eq!(
        ctx.take_trace(),
        vec![delayed_line(
            DICT,
            LDM0,
            DropTabOrd { table_id: 0 },
            DROP_RETRY_DELAY_MS
        )]
    );
    assert_eq!(DROP_RETRY_DELAY_MS, 10);
    deliver(
        &mut dict,
        &mut ctx,
        LDM1,
        DropTabRep {
            table_id: 0,
            busy: false,
        },
    );
    assert!(ctx.take_trace().is_empty(), "ldm 0 is still busy");
    deliver(
        &mut dict,
        &mut ctx,
        LDM0,
        DropTabRep {
            table_id: 0,
            busy: false,
        },
    );
    assert_eq!(
        ctx.take_trace(),
        vec![line(DICT, API, DropTabConf { request_id: 2 })]
    );
    assert_eq!(ctx.take_reports(), vec![Report::SchemaVersion(3)]);
    assert_eq!(dict.schema_version(), 3);
    assert!(get(&mut dict, &mut ctx, "t1").is_err());
}

#[test]
fn duplicate_name_is_refused() {
    let (mut dict, mut ctx) = started();
    create(&mut dict, &mut ctx, "t1");
    let request = create_request(&ctx, 4, &definition("t1"));
    deliver(&mut dict, &mut ctx, API, request);
    assert_eq!(
        ctx.take_trace(),
        vec![line(DICT, API, schema_ref(4, ErrorCode::TableExists))]
    );
    assert_eq!(dict.schema_version(), 2, "a refused create changes nothing");
}

#[test]
fn bad_definitions_are_refused() {
    let (mut dict, mut ctx) = started();
    let junk = CreateTabReq {
        request_id: 1,
        definition: ctx.pool().copy_from(&[0xff; 7]).expect("room"),
    };
    deliver(&mut dict, &mut ctx, API, junk);
    let no_key = TableDef {
        primary_key: Vec::new(),
        ..definition("t1")
    };
    let request = create_request(&ctx, 2, &no_key);
    deliver(&mut dict, &mut ctx, API, request);
    let too_many_partitions = TableDef {
        partitions: 1025,
        ..definition("t1")
    };
    let request = create_request(&ctx, 3, &too_many_partitions);
    deliver(&mut dict, &mut ctx, API, request);
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(DICT, API, schema_ref(1, ErrorCode::BadTableDefinition)),
            line(DICT, API, schema_ref(2, ErrorCode::BadTableDefinition)),
            line(DICT, API, schema_ref(3, ErrorCode::BadTableDefinition)),
        ]
    );
}

#[test]
fn requested_partition_count_is_kept() {
    let (mut dict, mut ctx) = started();
    let table = TableDef {
        partitions: 1024,
        ..definition("t1")
    };
    let request = create_request(&ctx, 1, &table);
    deliver(&mut dict, &mut ctx, API, request);
    match &ctx.sent[0].envelope.signal {
        Signal::DiAddTabReq(request) => assert_eq!(request.table.partitions, 1024),
        other => panic!("expected DiAddTabReq, got {other:?}"),
    }
}

#[test]
fn unknown_table_on_drop_and_get() {
    let (mut dict, mut ctx) = started();
    let request = drop_request(&ctx, 1, b"nope");
    deliver(&mut dict, &mut ctx, API, request);
    let request = drop_request(&ctx, 2, &[0xc3, 0x28]);
    deliver(&mut dict, &mut ctx, API, request);
    let request = get_request(&ctx, 3, b"nope");
    deliver(&mut dict, &mut ctx, API, request);
    let request = get_request(&ctx, 4, &[0xff]);
    deliver(&mut dict, &mut ctx, API, request);
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(DICT, API, schema_ref(1, ErrorCode::UnknownTable)),
            line(DICT, API, schema_ref(2, ErrorCode::UnknownTable)),
            line(DICT, API, schema_ref(3, ErrorCode::UnknownTable)),
            line(DICT, API, schema_ref(4, ErrorCode::UnknownTable)),
        ]
    );
}

#[test]
fn requests_before_the_schema_phase_are_refused() {
    let mut dict = new_dict();
    let mut ctx = RecordingContext::new();
    let before: Vec<u8> = PHASES.iter().copied().filter(|&p| p < SCHEMA).collect();
    for &phase in &before {
        deliver(&mut dict, &mut ctx, MEMBERSHIP, StartPhaseReq { phase });
    }
    let request = create_request(&ctx, 1, &definition("t1"));
    deliver(&mut dict, &mut ctx, API, request);
    let request = drop_request(&ctx, 2, b"t1");
    deliver(&mut dict, &mut ctx, API, request);
    let request = get_request(&ctx, 3, b"t1");
    deliver(&mut dict, &mut ctx, API, request);
    deliver(&mut dict, &mut ctx, API, ListTablesReq { request_id: 4 });
    let mut expected: Vec<String> = before
        .iter()
        .map(|&phase| line(DICT, MEMBERSHIP, StartPhaseConf { phase }))
        .collect();
    for request_id in 1..=4 {
        expected.push(line(
            DICT,
            API,
            schema_ref(request_id, ErrorCode::NodeNotStarted),
        ));
    }
    assert_eq!(ctx.take_trace(), expected);
    deliver(
        &mut dict,
        &mut ctx,
        MEMBERSHIP,
        StartPhaseReq { phase: SCHEMA },
    );
    ctx.sent.clear();
    assert_eq!(list(&mut dict, &mut ctx), Ok((Vec::new(), 1)));
}

#[test]
fn concurrent_creates_run_one_after_the_other() {
    let (mut dict, mut ctx) = started();
    let first = create_request(&ctx, 1, &definition("t1"));
    deliver(&mut dict, &mut ctx, API, first);
    let second = create_request(&ctx, 2, &definition("t2"));
    deliver(&mut dict, &mut ctx, OTHER_API, second);
    assert_eq!(
        ctx.take_trace(),
        vec![line(
            DICT,
            DIH,
            DiAddTabReq {
                table: assigned("t1", 0, 1)
            }
        )],
        "the second create waits"
    );

    answer_create(&mut dict, &mut ctx, 0);
    let trace = ctx.take_trace();
    assert_eq!(
        trace[trace.len() - 2..],
        [
            line(
                DICT,
                API,
                CreateTabConf {
                    request_id: 1,
                    table_id: 0,
                    table_version: 1
                }
            ),
            line(
                DICT,
                DIH,
                DiAddTabReq {
                    table: assigned("t2", 1, 1)
                }
            ),
        ]
    );

    answer_create(&mut dict, &mut ctx, 1);
    assert_eq!(
        ctx.take_trace().last(),
        Some(&line(
            DICT,
            OTHER_API,
            CreateTabConf {
                request_id: 2,
                table_id: 1,
                table_version: 1
            }
        ))
    );
    assert_eq!(
        ctx.take_reports(),
        vec![Report::SchemaVersion(2), Report::SchemaVersion(3)]
    );
}

#[test]
fn queued_create_of_a_name_being_created_is_refused_when_its_turn_comes() {
    let (mut dict, mut ctx) = started();
    let first = create_request(&ctx, 1, &definition("t1"));
    deliver(&mut dict, &mut ctx, API, first);
    let second = create_request(&ctx, 2, &definition("t1"));
    deliver(&mut dict, &mut ctx, OTHER_API, second);
    ctx.sent.clear();
    answer_create(&mut dict, &mut ctx, 0);
    assert_eq!(
        ctx.take_trace()[3..],
        [
            line(
                DICT,
                API,
                CreateTabConf {
                    request_id: 1,
                    table_id: 0,
                    table_version: 1
                }
            ),
            line(DICT, OTHER_API, schema_ref(2, ErrorCode::TableExists)),
        ]
    );
}

#[test]
fn failed_api_node_loses_its_queued_requests() {
    let (mut dict, mut ctx) = started();
    let running = create_request(&ctx, 1, &definition("t1"));
    deliver(&mut dict, &mut ctx, API, running);
    let queued = create_request(&ctx, 2, &definition("t2"));
    deliver(&mut dict, &mut ctx, OTHER_API, queued);
    deliver(
        &mut dict,
        &mut ctx,
        DICT,
        ApiFailRep {
            node: OTHER_API.node,
        },
    );
    ctx.sent.clear();
    answer_create(&mut dict, &mut ctx, 0);
    assert_eq!(
        ctx.take_trace().last(),
        Some(&line(
            DICT,
            API,
            CreateTabConf {
                request_id: 1,
                table_id: 0,
                table_version: 1
            }
        )),
        "nothing starts after the running create"
    );
}

#[test]
fn full_queue_answers_schema_busy() {
    let (mut dict, mut ctx) = started();
    for request_id in 0..=QUEUE_CAPACITY as u32 {
        let request = create_request(&ctx, request_id, &definition(&format!("t{request_id}")));
        deliver(&mut dict, &mut ctx, API, request);
    }
    assert_eq!(ctx.take_trace().len(), 1, "one create runs, the rest wait");
    let request = create_request(&ctx, 999, &definition("late"));
    deliver(&mut dict, &mut ctx, API, request);
    assert_eq!(
        ctx.take_trace(),
        vec![line(DICT, API, schema_ref(999, ErrorCode::SchemaBusy))]
    );
}

#[test]
fn dropped_id_is_reused_with_the_next_version() {
    let (mut dict, mut ctx) = started();
    assert_eq!(create(&mut dict, &mut ctx, "t1"), (0, 1));
    assert_eq!(create(&mut dict, &mut ctx, "t2"), (1, 1));
    drop_table(&mut dict, &mut ctx, "t1", 0);
    assert_eq!(
        create(&mut dict, &mut ctx, "t3"),
        (0, 2),
        "lowest free id, next version"
    );
    assert_eq!(create(&mut dict, &mut ctx, "t4"), (2, 1));
    drop_table(&mut dict, &mut ctx, "t3", 0);
    assert_eq!(create(&mut dict, &mut ctx, "t1"), (0, 3));
    assert_eq!(dict.schema_version(), 1 + 7);
    assert_eq!(
        get(&mut dict, &mut ctx, "t1").map(|t| (t.id, t.version)),
        Ok((0, 3))
    );
    assert_eq!(
        get(&mut dict, &mut ctx, "t2").map(|t| (t.id, t.version)),
        Ok((1, 1))
    );
}

#[test]
#[should_panic(expected = "for another table")]
fn add_tab_conf_for_another_table_stops_the_node() {
    let (mut dict, mut ctx) = started();
    let request = create_request(&ctx, 1, &definition("t1"));
    deliver(&mut dict, &mut ctx, API, request);
    deliver(&mut dict, &mut ctx, DIH, DiAddTabConf { map: map_of(0) });
    deliver(&mut dict, &mut ctx, TC0, AddTabConf { table_id: 5 });
}

#[test]
#[should_panic(expected = "while no drop runs")]
fn stray_drop_report_stops_the_node() {
    let (mut dict, mut ctx) = started();
    deliver(
        &mut dict,
        &mut ctx,
        LDM0,
        DropTabRep {
            table_id: 0,
            busy: false,
        },
    );
}

/// The table a create asks dih to place.
fn placed(ctx: &RecordingContext) -> Arc<TableDef> {
    match &ctx.sent[0].envelope.signal {
        Signal::DiAddTabReq(request) => Arc::clone(&request.table),
        other => panic!("expected DiAddTabReq, got {other:?}"),
    }
}

/// A unique index's hidden table takes the next free id with that id's
/// next version, and no other table takes it while its base table lives;
/// a drop of the base table frees both. The index cannot be dropped alone.
#[test]
fn a_unique_index_reserves_its_hidden_table_id_until_its_table_is_dropped() {
    let (mut dict, mut ctx) = started();
    let mut with_unique = definition("u");
    with_unique.indexes.push(signal::schema::IndexDef {
        id: 1,
        name: "by_v".into(),
        columns: vec![1],
        unique: Some(signal::schema::UniqueTable::REQUESTED),
    });
    let request = create_request(&ctx, 9, &with_unique);
    deliver(&mut dict, &mut ctx, API, request);
    let table = placed(&ctx);
    let unique = table.indexes[0].unique.expect("unique");
    assert_eq!((table.id, unique.table_id, unique.table_version), (0, 1, 1));
    answer_create(&mut dict, &mut ctx, table.id);
    ctx.sent.clear();
    // The next table skips the hidden id.
    let (next, _) = create(&mut dict, &mut ctx, "t2");
    assert_eq!(next, 2);
    // Dropped alone (after the tc, every ldm drops it and its hidden
    // table): its hidden table's id is free again, at its next version.
    let change = signal::schema::IndexChange {
        table: "u".into(),
        index: "by_v".into(),
        columns: Vec::new(),
        unique: false,
    };
    let request = signal::signals::DropIndexReq {
        request_id: 4,
        change: ctx.pool().copy_from(&change.encode_to_vec()).unwrap(),
    };
    deliver(&mut dict, &mut ctx, API, request);
    for expected in [vec![TC0], vec![LDM0, LDM1]] {
        let sent: Vec<_> = ctx.sent.drain(..).collect();
        let to: Vec<BlockRef> = sent.iter().map(|sent| sent.envelope.to).collect();
        assert_eq!(to, expected);
        for sent in sent {
            let table = match sent.envelope.signal {
                Signal::TcAlterTabReq(request) => request.table,
                Signal::LqhAlterTabReq(request) => request.table,
                other => panic!("expected an alter request, got {other:?}"),
            };
            assert!(table.indexes.is_empty());
            let report = signal::signals::AlterTabRep {
                table_id: table.id,
                revision: table.revision,
            };
            deliver(&mut dict, &mut ctx, sent.envelope.to, report);
        }
    }
    assert_eq!(
        ctx.take_trace(),
        vec![line(
            DICT,
            API,
            signal::signals::AlterTabConf {
                request_id: 4,
                revision: 2
            }
        )]
    );
    let (freed, version) = create(&mut dict, &mut ctx, "t3");
    assert_eq!(
        (freed, version),
        (1, 2),
        "id 1 was the hidden table's, at version 1"
    );
    // Then dropped itself, and created again: its id at its next version,
    // the hidden table at the next free id.
    drop_table(&mut dict, &mut ctx, "u", 0);
    let request = create_request(&ctx, 9, &with_unique);
    deliver(&mut dict, &mut ctx, API, request);
    let table = placed(&ctx);
    let unique = table.indexes[0].unique.expect("unique");
    assert_eq!(
        (
            table.id,
            table.version,
            unique.table_id,
            unique.table_version
        ),
        (0, 2, 3, 1)
    );
}
