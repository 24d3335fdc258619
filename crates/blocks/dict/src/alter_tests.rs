//! dict's index changes (`alter.rs`) on one node with two ldms and a tc: the golden
//! traces of a create and a drop, a build an ldm could not finish rolled
//! back at every ldm, every refusal, and index ids never reused.

use crate::tests::{create, get, schema_ref, started, API, DICT, LDM0, LDM1, TC0};
use crate::Dict;
use kernel::testing::{deliver, line, RecordingContext};
use kernel::Context;
use signal::schema::{IndexChange, IndexDef, TableDef};
use signal::signals::{AlterTabConf, AlterTabRef, AlterTabRep, CreateIndexReq, DropIndexReq};
use signal::{ErrorCode, Signal};
use std::sync::Arc;

fn change(table: &str, index: &str, columns: &[&str]) -> IndexChange {
    IndexChange {
        table: table.into(),
        index: index.into(),
        columns: columns.iter().map(|&column| column.into()).collect(),
        unique: false,
    }
}

fn create_index(ctx: &RecordingContext, request_id: u32, change: &IndexChange) -> CreateIndexReq {
    CreateIndexReq {
        request_id,
        change: ctx.pool().copy_from(&change.encode_to_vec()).unwrap(),
    }
}

fn drop_index(ctx: &RecordingContext, request_id: u32, change: &IndexChange) -> DropIndexReq {
    DropIndexReq {
        request_id,
        change: ctx.pool().copy_from(&change.encode_to_vec()).unwrap(),
    }
}

/// The definition every ldm was sent (the same to both), checked.
fn sent_to_ldms(ctx: &mut RecordingContext) -> Arc<TableDef> {
    let sent: Vec<_> = ctx.sent.drain(..).collect();
    assert_eq!(sent.len(), 2, "one request per ldm: {sent:?}");
    let mut tables = sent.into_iter().map(|sent| match sent.envelope.signal {
        Signal::LqhAlterTabReq(request) => (sent.envelope.to, request.table),
        other => panic!("expected LqhAlterTabReq, got {other:?}"),
    });
    let (first, table) = tables.next().unwrap();
    let (second, again) = tables.next().unwrap();
    assert_eq!((first, second), (LDM0, LDM1));
    assert_eq!(table, again);
    table
}

/// The definition the tc was sent, checked.
fn sent_to_tc(ctx: &mut RecordingContext) -> Arc<TableDef> {
    let sent: Vec<_> = ctx.sent.drain(..).collect();
    assert_eq!(sent.len(), 1, "one request, to the tc: {sent:?}");
    let sent = sent.into_iter().next().unwrap();
    assert_eq!(sent.envelope.to, TC0);
    match sent.envelope.signal {
        Signal::TcAlterTabReq(request) => request.table,
        other => panic!("expected TcAlterTabReq, got {other:?}"),
    }
}

/// The tc confirms revision `revision` of table `table_id`.
fn tc_answers(dict: &mut Dict, ctx: &mut RecordingContext, table_id: u32, revision: u32) {
    deliver(dict, ctx, TC0, AlterTabRep { table_id, revision });
}

/// The tc takes the revision `ctx` last sent it.
fn switch_tc(dict: &mut Dict, ctx: &mut RecordingContext, expected: &TableDef) {
    let table = sent_to_tc(ctx);
    assert_eq!(*table, *expected, "the tc gets the ldms' revision");
    tc_answers(dict, ctx, table.id, table.revision);
}

fn answer_ldms(dict: &mut Dict, ctx: &mut RecordingContext, table: &TableDef) {
    for ldm in [LDM0, LDM1] {
        let report = AlterTabRep {
            table_id: table.id,
            revision: table.revision,
        };
        deliver(dict, ctx, ldm, report);
    }
}

#[test]
fn golden_trace_of_create_and_drop_index() {
    let (mut dict, mut ctx) = started();
    let (table_id, version) = create(&mut dict, &mut ctx, "t1");
    let before = dict.schema_version();

    let request = create_index(&ctx, 3, &change("t1", "by_v", &["V"]));
    deliver(&mut dict, &mut ctx, API, request);
    let new = sent_to_ldms(&mut ctx);
    let expected_index = IndexDef {
        id: 1,
        name: "by_v".into(),
        columns: vec![1],
        unique: None,
    };
    assert_eq!((new.id, new.version, new.revision), (table_id, version, 1));
    assert_eq!(new.indexes, std::slice::from_ref(&expected_index));
    // Until every ldm built it, clients get the table without it.
    assert!(get(&mut dict, &mut ctx, "t1").unwrap().indexes.is_empty());
    deliver(
        &mut dict,
        &mut ctx,
        LDM0,
        AlterTabRep {
            table_id,
            revision: 1,
        },
    );
    assert!(ctx.sent.is_empty(), "one ldm of two answered");
    deliver(
        &mut dict,
        &mut ctx,
        LDM1,
        AlterTabRep {
            table_id,
            revision: 1,
        },
    );
    // Then the tc, then (no other dicts here) the answer.
    switch_tc(&mut dict, &mut ctx, &new);
    assert_eq!(
        ctx.take_trace(),
        [line(
            DICT,
            API,
            AlterTabConf {
                request_id: 3,
                revision: 1
            }
        )]
    );
    assert_eq!(dict.schema_version(), before + 1);
    let fetched = get(&mut dict, &mut ctx, "t1").unwrap();
    assert_eq!((fetched.version, fetched.revision), (version, 1));
    assert_eq!(fetched.indexes, [expected_index]);

    // Dropped: gone from the definition first, then from the tc, then
    // from every ldm.
    let request = drop_index(&ctx, 4, &change("t1", "BY_V", &[]));
    deliver(&mut dict, &mut ctx, API, request);
    let new = sent_to_tc(&mut ctx);
    assert_eq!((new.revision, new.indexes.len()), (2, 0));
    assert!(get(&mut dict, &mut ctx, "t1").unwrap().indexes.is_empty());
    tc_answers(&mut dict, &mut ctx, table_id, 2);
    assert_eq!(sent_to_ldms(&mut ctx), new);
    answer_ldms(&mut dict, &mut ctx, &new);
    assert_eq!(
        ctx.take_trace(),
        [line(
            DICT,
            API,
            AlterTabConf {
                request_id: 4,
                revision: 2
            }
        )]
    );

    // A new index never takes a dropped one's id.
    let request = create_index(&ctx, 5, &change("t1", "by_v", &["v", "k"]));
    deliver(&mut dict, &mut ctx, API, request);
    let new = sent_to_ldms(&mut ctx);
    assert_eq!(new.indexes[0].id, 3);
    assert_eq!(new.indexes[0].columns, [1, 0]);
}

#[test]
fn a_build_an_ldm_could_not_finish_is_rolled_back_everywhere() {
    let (mut dict, mut ctx) = started();
    let (table_id, _) = create(&mut dict, &mut ctx, "t1");
    let before = dict.schema_version();
    let request = create_index(&ctx, 3, &change("t1", "by_v", &["v"]));
    deliver(&mut dict, &mut ctx, API, request);
    let new = sent_to_ldms(&mut ctx);
    deliver(
        &mut dict,
        &mut ctx,
        LDM0,
        AlterTabRef {
            table_id,
            revision: new.revision,
            error: ErrorCode::TableFull,
        },
    );
    // A late or repeated answer of another revision changes nothing.
    deliver(
        &mut dict,
        &mut ctx,
        LDM0,
        AlterTabRep {
            table_id,
            revision: 7,
        },
    );
    assert!(ctx.sent.is_empty());
    deliver(
        &mut dict,
        &mut ctx,
        LDM1,
        AlterTabRep {
            table_id,
            revision: new.revision,
        },
    );
    // The tc first (no write may keep a hidden table the ldms drop),
    // then the ldms.
    let back = sent_to_tc(&mut ctx);
    assert_eq!(
        (back.revision, back.indexes.len()),
        (2, 0),
        "the old indexes, under a revision above the failed one's"
    );
    tc_answers(&mut dict, &mut ctx, table_id, 2);
    assert_eq!(sent_to_ldms(&mut ctx), back);
    answer_ldms(&mut dict, &mut ctx, &back);
    assert_eq!(
        ctx.take_trace(),
        [line(DICT, API, schema_ref(3, ErrorCode::TableFull))]
    );
    assert_eq!(dict.schema_version(), before + 1, "the revision moved on");
    let fetched = get(&mut dict, &mut ctx, "t1").unwrap();
    assert_eq!((fetched.revision, fetched.indexes.len()), (2, 0));
    // The next change runs, and the failed index's id is not reused.
    let request = create_index(&ctx, 4, &change("t1", "by_v", &["v"]));
    deliver(&mut dict, &mut ctx, API, request);
    let again = sent_to_ldms(&mut ctx);
    assert_eq!((again.revision, again.indexes[0].id), (3, 3));
}

#[test]
fn bad_index_changes_are_refused_with_their_error() {
    let (mut dict, mut ctx) = started();
    create(&mut dict, &mut ctx, "t1");
    let request = create_index(&ctx, 1, &change("t1", "by_v", &["v"]));
    deliver(&mut dict, &mut ctx, API, request);
    let new = sent_to_ldms(&mut ctx);
    answer_ldms(&mut dict, &mut ctx, &new);
    switch_tc(&mut dict, &mut ctx, &new);
    ctx.sent.clear();
    let creates = [
        (change("nope", "x", &["v"]), ErrorCode::UnknownTable),
        (change("t1", "BY_V", &["k"]), ErrorCode::IndexExists),
        (change("t1", "x", &["w"]), ErrorCode::UnknownColumn),
        (
            change("t1", "x", &["v", "V"]),
            ErrorCode::BadTableDefinition,
        ),
        (change("t1", "x", &[]), ErrorCode::BadTableDefinition),
    ];
    for (request_id, (bad, error)) in (10..).zip(creates) {
        let request = create_index(&ctx, request_id, &bad);
        deliver(&mut dict, &mut ctx, API, request);
        assert_eq!(
            ctx.take_trace(),
            [line(DICT, API, schema_ref(request_id, error))],
            "{bad:?}"
        );
    }
    let drops = [
        (change("nope", "by_v", &[]), ErrorCode::UnknownTable),
        (change("t1", "by_w", &[]), ErrorCode::UnknownIndex),
    ];
    for (request_id, (bad, error)) in (20..).zip(drops) {
        let request = drop_index(&ctx, request_id, &bad);
        deliver(&mut dict, &mut ctx, API, request);
        assert_eq!(
            ctx.take_trace(),
            [line(DICT, API, schema_ref(request_id, error))],
            "{bad:?}"
        );
    }
    // Bytes that are no index change, and names no table can have.
    let garbage = CreateIndexReq {
        request_id: 30,
        change: ctx.pool().copy_from(&[1, 2, 3]).unwrap(),
    };
    deliver(&mut dict, &mut ctx, API, garbage);
    let primary = create_index(&ctx, 31, &change("t1", "PRIMARY", &["v"]));
    deliver(&mut dict, &mut ctx, API, primary);
    assert_eq!(
        ctx.take_trace(),
        [
            line(DICT, API, schema_ref(30, ErrorCode::BadTableDefinition)),
            line(DICT, API, schema_ref(31, ErrorCode::BadTableDefinition)),
        ]
    );
    // Sixteen indexes at most.
    for (request_id, at) in (40..).zip(1..16) {
        let name = format!("i{at}");
        let request = create_index(&ctx, request_id, &change("t1", &name, &["k"]));
        deliver(&mut dict, &mut ctx, API, request);
        let new = sent_to_ldms(&mut ctx);
        answer_ldms(&mut dict, &mut ctx, &new);
        switch_tc(&mut dict, &mut ctx, &new);
        ctx.sent.clear();
    }
    let request = create_index(&ctx, 60, &change("t1", "one_more", &["k"]));
    deliver(&mut dict, &mut ctx, API, request);
    assert_eq!(
        ctx.take_trace(),
        [line(DICT, API, schema_ref(60, ErrorCode::TooManyIndexes))]
    );
    assert_eq!(get(&mut dict, &mut ctx, "t1").unwrap().indexes.len(), 16);
    // An ldm's answer with no change running is ignored.
    let late = AlterTabRep {
        table_id: 0,
        revision: 99,
    };
    deliver(&mut dict, &mut ctx, LDM0, late);
    assert!(ctx.sent.is_empty());
}
