//! dict's schema file: a create or drop is confirmed only once the file
//! holding it is in force (written under the temporary name, synced,
//! renamed), at the master and at every other dict; file errors and damaged
//! files stop the node with the file and offset; a dict started on a disk
//! holding a schema file puts its tables back on the local tcs and ldms in
//! RESTORE_SCHEMA and serves them; files larger than a section go in
//! chunks; a write waits for a free section; changes made during a write
//! wait for the next; a diskless dict touches no file.
//!
//! File requests are answered by a small in-memory [`Disk`] doing what the
//! io service does, or by hand where the test is about the answers.

use crate::persistence::{decode_stored_schema, FILE_RETRY_JOB};
use crate::{
    schema_sync_tests, Dict, DictConfig, FILE_RETRY_DELAY_MS, SCHEMA_FILE, SCHEMA_FILE_TEMPORARY,
};
use kernel::testing::{delayed_line, deliver, line, RecordingContext};
use kernel::{Block, Context, Report};
use signal::fs::{FileName, FsDone, FsErrorKind, FsOperation, OpenMode};
use signal::partition::BUCKETS;
use signal::phases::{self, PHASES};
use signal::schema::{ColumnDef, ColumnType, TableDef};
use signal::section::CLASS_SIZES;
use signal::signals::{
    AddTabConf, ContinueB, CreateTabConf, CreateTabReq, DiAddTabConf, DictAddTabReq, DropTabConf,
    DropTabOrd, DropTabRep, DropTabReq, FsConf, GetTabInfoReq, ListTablesReq, LqhAddTabReq,
    PartitionMap, PartitionPlacement, SchemaRef, StartPhaseConf, StartPhaseReq, TcAddTabReq,
};
use signal::{codec, BlockKind, BlockRef, ErrorCode, NodeId, SectionPool, Signal};
use std::collections::HashMap;
use std::sync::Arc;
use storage::schema_file::{self, Schema, StoredTable};

const NODE: NodeId = NodeId(1);
const DICT: BlockRef = BlockRef::new(NODE, BlockKind::Dict, 0);
const DIH: BlockRef = BlockRef::new(NODE, BlockKind::Dih, 0);
const IO: BlockRef = BlockRef::new(NODE, BlockKind::Io, 0);
const MEMBERSHIP: BlockRef = BlockRef::new(NODE, BlockKind::Membership, 0);
const TC0: BlockRef = BlockRef::new(NODE, BlockKind::Tc, 0);
const LDM0: BlockRef = BlockRef::new(NODE, BlockKind::Ldm, 0);
const LDM1: BlockRef = BlockRef::new(NODE, BlockKind::Ldm, 1);
const API: BlockRef = BlockRef::new(NodeId(100), BlockKind::Api, 0);

/// The dict of node 1, alone: one tc, two ldms.
fn config(diskless: bool) -> DictConfig {
    DictConfig {
        address: DICT,
        tc_instances: 1,
        ldm_instances: 2,
        data_nodes: vec![(NODE, 0)],
        replicas: 1,
        redo_log_parts: 2,
        diskless,
    }
}

/// The dict of node 1, alone, writing its schema file.
fn new_dict() -> Dict {
    Dict::new(config(false)).announced()
}

/// The dict of `node` in a cluster of nodes 1 and 2 (node 1 is the master).
fn dict_of_two(node: u16) -> Dict {
    Dict::new(DictConfig {
        address: BlockRef::new(NodeId(node), BlockKind::Dict, 0),
        tc_instances: 1,
        ldm_instances: 2,
        data_nodes: vec![(NodeId(1), 0), (NodeId(2), 0)],
        replicas: 2,
        redo_log_parts: 2,
        diskless: false,
    })
    .announced()
}

/// A node's files, kept as the io service keeps them (only what dict
/// uses), with a log of the operations performed.
#[derive(Default)]
pub(crate) struct Disk {
    pub(crate) files: HashMap<FileName, Vec<u8>>,
    pub(crate) log: Vec<String>,
}

/// An operation in a few words, for logs and assertions.
pub(crate) fn describe(operation: &FsOperation) -> String {
    match operation {
        FsOperation::Open { file, mode } => format!("open {file} {mode:?}"),
        FsOperation::SetLen { file, len } => format!("set_len {file} {len}"),
        FsOperation::Write { file, offset, data } => {
            format!("write {file} at {offset}: {} bytes", data.len())
        }
        FsOperation::Read { file, offset, len } => format!("read {file} at {offset}: {len} bytes"),
        FsOperation::Sync { file } => format!("sync {file}"),
        FsOperation::Rename { from, to } => format!("rename {from} to {to}"),
        other => format!("{other:?}"),
    }
}

impl Disk {
    /// Performs one operation as the io service would.
    fn perform(
        &mut self,
        operation: FsOperation,
        pool: &'static SectionPool,
    ) -> Result<FsDone, signal::fs::FsError> {
        self.log.push(describe(&operation));
        let missing = |operation: &FsOperation| {
            operation.error(
                FsErrorKind::NotFound,
                "No such file or directory (os error 2)",
            )
        };
        Ok(match operation {
            FsOperation::Open { file, mode } => {
                if mode == OpenMode::Existing && !self.files.contains_key(&file) {
                    return Err(missing(&operation));
                }
                let size = self.files.entry(file).or_default().len() as u64;
                FsDone::Opened { size }
            }
            FsOperation::SetLen { file, len } => {
                let Some(bytes) = self.files.get_mut(&file) else {
                    return Err(missing(&operation));
                };
                bytes.resize(len as usize, 0);
                FsDone::LenSet
            }
            FsOperation::Write {
                file,
                offset,
                ref data,
            } => {
                let Some(bytes) = self.files.get_mut(&file) else {
                    return Err(missing(&operation));
                };
                let end = offset as usize + data.len();
                if bytes.len() < end {
                    bytes.resize(end, 0);
                }
                bytes[offset as usize..end].copy_from_slice(data.as_slice());
                FsDone::Written {
                    bytes: data.len() as u32,
                }
            }
            FsOperation::Read { file, offset, len } => {
                let Some(bytes) = self.files.get(&file) else {
                    return Err(missing(&operation));
                };
                let start = (offset as usize).min(bytes.len());
                let end = (start + len as usize).min(bytes.len());
                let data = pool.copy_from(&bytes[start..end]).expect("room to read");
                FsDone::Read { data }
            }
            FsOperation::Sync { file } => {
                if !self.files.contains_key(&file) {
                    return Err(missing(&operation));
                }
                FsDone::Synced
            }
            FsOperation::Rename { from, to } => {
                let Some(bytes) = self.files.remove(&from) else {
                    return Err(missing(&operation));
                };
                self.files.insert(to, bytes);
                FsDone::Renamed
            }
            other => panic!("dict does not use {other:?}"),
        })
    }

    /// Performs dict's one file request and answers it; returns what it was.
    pub(crate) fn answer_one(&mut self, dict: &mut Dict, ctx: &mut RecordingContext) -> String {
        let mut requests = ctx.take_fs_requests();
        assert_eq!(requests.len(), 1, "dict makes one file request at a time");
        let request = requests.pop().expect("one request");
        assert_eq!(request.from, dict.address());
        let io = BlockRef::new(dict.address().node, BlockKind::Io, 0);
        let pool = ctx.pool();
        let result = self.perform(request.operation, pool);
        let token = request.token;
        deliver(dict, ctx, io, FsConf { token, result });
        self.log.last().cloned().expect("logged")
    }

    /// Answers dict's file requests until it makes no more.
    pub(crate) fn serve(&mut self, dict: &mut Dict, ctx: &mut RecordingContext) {
        while !ctx.fs_requests.is_empty() {
            self.answer_one(dict, ctx);
        }
    }

    pub(crate) fn schema_file(&self) -> &[u8] {
        self.files.get(&SCHEMA_FILE).expect("a schema file")
    }
}

/// Runs every start phase, the disk and this node's tcs and ldms (for
/// restored tables) answering; checks each phase is confirmed.
fn start(dict: &mut Dict, ctx: &mut RecordingContext, disk: &mut Disk) {
    let membership = BlockRef::new(dict.address().node, BlockKind::Membership, 0);
    for &phase in PHASES {
        deliver(dict, ctx, membership, StartPhaseReq { phase });
        if phase == phases::RESTORE_SCHEMA && !dict.is_master() {
            // The master of these tests' clusters starts on an empty disk.
            schema_sync_tests::deliver_no_schema(dict, ctx);
        }
        let mut confirmed = false;
        loop {
            disk.serve(dict, ctx);
            let sent = std::mem::take(&mut ctx.sent);
            if sent.is_empty() {
                break;
            }
            for sent in sent {
                let to = sent.envelope.to;
                match sent.envelope.signal {
                    Signal::TcAddTabReq(TcAddTabReq { table, .. })
                    | Signal::LqhAddTabReq(LqhAddTabReq { table, .. }) => {
                        deliver(dict, ctx, to, AddTabConf { table_id: table.id })
                    }
                    Signal::StartPhaseConf(conf) => {
                        assert_eq!(conf.phase, phase);
                        confirmed = true;
                    }
                    // The other dict takes the master's schema.
                    Signal::SchemaSyncReq(request) => {
                        let conf = schema_sync_tests::taken(&request);
                        deliver(dict, ctx, to, conf)
                    }
                    Signal::SchemaSyncConf(_) => assert_eq!(Some(to), dict.master),
                    other => panic!("unexpected {other:?} at start"),
                }
            }
        }
        assert!(confirmed, "phase {phase} confirmed");
    }
    ctx.reports.clear();
}

/// A single-node dict through its start phases on an empty disk.
fn started() -> (Dict, RecordingContext, Disk) {
    let mut dict = new_dict();
    let mut ctx = RecordingContext::new();
    let mut disk = Disk::default();
    start(&mut dict, &mut ctx, &mut disk);
    (dict, ctx, disk)
}

fn definition(name: &str) -> TableDef {
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

/// The table as dict assigns it (two partitions: one per ldm).
pub(crate) fn assigned(name: &str, id: u32, version: u32) -> Arc<TableDef> {
    Arc::new(TableDef {
        id,
        version,
        partitions: 2,
        ..definition(name)
    })
}

/// A map as dih would make it: every bucket, two partitions on node 1.
pub(crate) fn map_of(table_id: u32) -> Arc<PartitionMap> {
    Arc::new(PartitionMap {
        table_id,
        version: 1,
        bucket_partitions: (0..BUCKETS).map(|bucket| bucket % 2).collect(),
        partitions: (0..2)
            .map(|partition| PartitionPlacement {
                node_group: 0,
                replicas: vec![NODE],
                ldm_instance: partition as u16,
                redo_part: partition,
            })
            .collect(),
    })
}

pub(crate) fn create_request(ctx: &RecordingContext, request_id: u32, name: &str) -> CreateTabReq {
    CreateTabReq {
        request_id,
        definition: ctx
            .pool()
            .copy_from(&definition(name).encode_to_vec())
            .expect("pool has room"),
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

/// Runs a create of `name` up to the point where every block has the
/// table; returns its id. The schema file write is then under way (unless
/// diskless).
fn create_until_saving(dict: &mut Dict, ctx: &mut RecordingContext, name: &str) -> u32 {
    let request = create_request(ctx, 7, name);
    deliver(dict, ctx, API, request);
    let table_id = match &ctx.sent[0].envelope.signal {
        Signal::DiAddTabReq(request) => request.table.id,
        other => panic!("expected DiAddTabReq, got {other:?}"),
    };
    deliver(
        dict,
        ctx,
        DIH,
        DiAddTabConf {
            map: map_of(table_id),
        },
    );
    for block in [TC0, LDM0] {
        deliver(dict, ctx, block, AddTabConf { table_id });
    }
    // What the last block's conf causes stays in the trace: nothing while
    // the schema file is written, the client's conf when diskless.
    ctx.sent.clear();
    deliver(dict, ctx, LDM1, AddTabConf { table_id });
    table_id
}

/// Creates `name` end to end, the disk answering; returns (id, version).
fn create(dict: &mut Dict, ctx: &mut RecordingContext, disk: &mut Disk, name: &str) -> (u32, u32) {
    create_until_saving(dict, ctx, name);
    disk.serve(dict, ctx);
    ctx.reports.clear();
    match ctx.sent.pop().map(|sent| sent.envelope.signal) {
        Some(Signal::CreateTabConf(conf)) => (conf.table_id, conf.table_version),
        other => panic!("expected CreateTabConf, got {other:?}"),
    }
}

/// Drops `name` end to end, every block idle, the disk answering.
fn drop_table(dict: &mut Dict, ctx: &mut RecordingContext, disk: &mut Disk, name: &str) {
    let request = drop_request(ctx, 8, name);
    deliver(dict, ctx, API, request);
    let table_id = match &ctx.sent[0].envelope.signal {
        Signal::DropTabOrd(order) => order.table_id,
        other => panic!("expected DropTabOrd, got {other:?}"),
    };
    for block in [TC0, LDM0, LDM1] {
        let idle = DropTabRep {
            table_id,
            busy: false,
        };
        deliver(dict, ctx, block, idle);
    }
    disk.serve(dict, ctx);
    assert_eq!(
        ctx.take_trace().last(),
        Some(&line(DICT, API, DropTabConf { request_id: 8 }))
    );
    ctx.reports.clear();
}

/// GET_TABINFO of `name`: the definition and the schema version, or the
/// refusal's code.
pub(crate) fn get(
    dict: &mut Dict,
    ctx: &mut RecordingContext,
    name: &str,
) -> Result<(TableDef, u32), ErrorCode> {
    let request = GetTabInfoReq {
        request_id: 5,
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
            let table = TableDef::decode(conf.definition.as_slice()).expect("a valid definition");
            let map = codec::decode_partition_map(conf.map.as_slice()).expect("a valid map");
            assert_eq!(map.table_id, table.id);
            Ok((table, conf.schema_version))
        }
        Signal::SchemaRef(refusal) => Err(refusal.error),
        other => panic!("unexpected answer {other:?}"),
    }
}

/// The schema file holding `tables` (id and version taken from each) at
/// `schema_version`, with `id_versions`, as dict must write it.
pub(crate) fn expected_file(
    schema_version: u32,
    id_versions: Vec<u32>,
    tables: &[Arc<TableDef>],
) -> Vec<u8> {
    let tables = tables
        .iter()
        .map(|table| {
            let mut map = Vec::new();
            codec::encode_partition_map(&mut map, &map_of(table.id));
            StoredTable {
                id: table.id,
                version: table.version,
                definition: table.encode_to_vec(),
                map,
            }
        })
        .collect();
    schema_file::encode(&Schema {
        schema_version,
        id_versions,
        tables,
    })
}

#[test]
fn a_create_is_confirmed_only_once_the_schema_file_holding_it_is_in_force() {
    let (mut dict, mut ctx, mut disk) = started();
    assert!(disk.files.is_empty(), "an initial start writes no file");
    assert_eq!(create_until_saving(&mut dict, &mut ctx, "t1"), 0);
    assert_eq!(
        ctx.take_reports(),
        vec![Report::SchemaVersion(2)],
        "online here, at the next schema version"
    );
    let expected = expected_file(2, vec![1], &[assigned("t1", 0, 1)]);
    let length = expected.len();
    let steps = [
        "open schema/tables.schema.tmp Create".to_string(),
        format!("set_len schema/tables.schema.tmp {length}"),
        format!("write schema/tables.schema.tmp at 0: {length} bytes"),
        "sync schema/tables.schema.tmp".to_string(),
    ];
    for step in steps {
        assert_eq!(disk.answer_one(&mut dict, &mut ctx), step);
        assert!(
            ctx.take_trace().is_empty(),
            "no confirmation before the file is in force (after {step})"
        );
    }
    assert_eq!(
        disk.answer_one(&mut dict, &mut ctx),
        "rename schema/tables.schema.tmp to schema/tables.schema"
    );
    assert_eq!(
        ctx.take_trace(),
        vec![line(
            DICT,
            API,
            CreateTabConf {
                request_id: 7,
                table_id: 0,
                table_version: 1
            }
        )]
    );
    assert!(ctx.take_fs_requests().is_empty());
    assert_eq!(disk.schema_file(), &expected[..]);
    assert!(!disk.files.contains_key(&SCHEMA_FILE_TEMPORARY));
    assert_eq!(
        get(&mut dict, &mut ctx, "t1"),
        Ok(((*assigned("t1", 0, 1)).clone(), 2))
    );
}

#[test]
fn a_drop_is_confirmed_only_once_the_schema_file_lacks_the_table() {
    let (mut dict, mut ctx, mut disk) = started();
    create(&mut dict, &mut ctx, &mut disk, "t1");
    create(&mut dict, &mut ctx, &mut disk, "t2");
    let request = drop_request(&ctx, 3, "t1");
    deliver(&mut dict, &mut ctx, API, request);
    for block in [TC0, LDM0, LDM1] {
        let idle = DropTabRep {
            table_id: 0,
            busy: false,
        };
        deliver(&mut dict, &mut ctx, block, idle);
    }
    ctx.sent.clear();
    assert_eq!(ctx.take_reports(), vec![Report::SchemaVersion(4)]);
    disk.log.clear();
    for _ in 0..4 {
        disk.answer_one(&mut dict, &mut ctx);
        assert!(ctx.take_trace().is_empty(), "after {:?}", disk.log);
    }
    disk.answer_one(&mut dict, &mut ctx);
    assert_eq!(
        ctx.take_trace(),
        vec![line(DICT, API, DropTabConf { request_id: 3 })]
    );
    assert_eq!(
        disk.schema_file(),
        &expected_file(4, vec![1, 1], &[assigned("t2", 1, 1)])[..],
        "id 0 keeps its last version, for the next table that takes it"
    );
}

#[test]
fn the_master_writes_its_file_after_every_other_dict_confirmed_from_its_own() {
    let mut master = dict_of_two(1);
    let mut master_ctx = RecordingContext::new();
    let mut master_disk = Disk::default();
    start(&mut master, &mut master_ctx, &mut master_disk);
    let mut follower = dict_of_two(2);
    let mut follower_ctx = RecordingContext::new();
    let mut follower_disk = Disk::default();
    start(&mut follower, &mut follower_ctx, &mut follower_disk);
    let master_ref = master.address();
    let follower_ref = follower.address();

    let request = create_request(&master_ctx, 1, "t1");
    deliver(&mut master, &mut master_ctx, API, request);
    deliver(
        &mut master,
        &mut master_ctx,
        DIH,
        DiAddTabConf { map: map_of(0) },
    );
    master_ctx.sent.clear();
    let blocks = [
        TC0,
        LDM0,
        LDM1,
        BlockRef::new(NodeId(2), BlockKind::Tc, 0),
        BlockRef::new(NodeId(2), BlockKind::Ldm, 0),
        BlockRef::new(NodeId(2), BlockKind::Ldm, 1),
    ];
    for block in blocks {
        deliver(
            &mut master,
            &mut master_ctx,
            block,
            AddTabConf { table_id: 0 },
        );
    }
    assert_eq!(master_ctx.sent.len(), 1, "only the announcement");
    let announce = master_ctx.sent.pop().expect("the announcement");
    assert_eq!(announce.envelope.to, follower_ref);
    assert!(
        master_ctx.take_fs_requests().is_empty(),
        "the master writes its file last"
    );

    // The follower: online, then its file, then its confirmation.
    let Signal::DictAddTabReq(request) = announce.envelope.signal else {
        panic!("expected DictAddTabReq");
    };
    assert_eq!(request.schema_version, 2);
    deliver(&mut follower, &mut follower_ctx, master_ref, request);
    assert!(follower_ctx.take_trace().is_empty(), "not before its file");
    assert_eq!(follower_ctx.take_reports(), vec![Report::SchemaVersion(2)]);
    follower_disk.serve(&mut follower, &mut follower_ctx);
    assert_eq!(
        follower_ctx.take_trace(),
        vec![line(follower_ref, master_ref, AddTabConf { table_id: 0 })]
    );
    let expected = expected_file(2, vec![1], &[assigned("t1", 0, 1)]);
    assert_eq!(follower_disk.schema_file(), &expected[..]);

    // The master: its own file now, then the client's conf.
    deliver(
        &mut master,
        &mut master_ctx,
        follower_ref,
        AddTabConf { table_id: 0 },
    );
    assert!(master_ctx.take_trace().is_empty());
    master_disk.serve(&mut master, &mut master_ctx);
    assert_eq!(
        master_ctx.take_trace(),
        vec![line(
            master_ref,
            API,
            CreateTabConf {
                request_id: 1,
                table_id: 0,
                table_version: 1
            }
        )]
    );
    assert_eq!(
        master_disk.schema_file(),
        follower_disk.schema_file(),
        "every node holds the same schema file"
    );

    // A drop: the follower confirms once its file lacks the table.
    deliver(
        &mut follower,
        &mut follower_ctx,
        master_ref,
        DropTabOrd { table_id: 0 },
    );
    assert!(follower_ctx.take_trace().is_empty(), "not before its file");
    follower_disk.serve(&mut follower, &mut follower_ctx);
    assert_eq!(
        follower_ctx.take_trace(),
        vec![line(
            follower_ref,
            master_ref,
            DropTabRep {
                table_id: 0,
                busy: false
            }
        )]
    );
    assert_eq!(
        follower_disk.schema_file(),
        &expected_file(3, vec![1], &[])[..]
    );
}

#[test]
fn changes_made_during_a_write_wait_for_the_next_write() {
    let mut follower = dict_of_two(2);
    let mut ctx = RecordingContext::new();
    let mut disk = Disk::default();
    start(&mut follower, &mut ctx, &mut disk);
    let master = BlockRef::new(NodeId(1), BlockKind::Dict, 0);
    let me = follower.address();
    let announce = |table: &str, id: u32, schema_version: u32| DictAddTabReq {
        table: assigned(table, id, 1),
        map: map_of(id),
        schema_version,
    };
    deliver(&mut follower, &mut ctx, master, announce("t1", 0, 2));
    assert_eq!(
        disk.answer_one(&mut follower, &mut ctx),
        "open schema/tables.schema.tmp Create"
    );
    // The master never sends this before the first is confirmed, but the
    // file code must not run two writes at once even so.
    deliver(&mut follower, &mut ctx, master, announce("t2", 1, 3));
    for _ in 0..4 {
        disk.answer_one(&mut follower, &mut ctx);
    }
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, master, AddTabConf { table_id: 0 })],
        "the first write held only t1"
    );
    disk.log.clear();
    disk.serve(&mut follower, &mut ctx);
    assert_eq!(
        disk.log.first().map(String::as_str),
        Some("open schema/tables.schema.tmp Create"),
        "a second write"
    );
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, master, AddTabConf { table_id: 1 })]
    );
    assert_eq!(
        disk.schema_file(),
        &expected_file(3, vec![1, 1], &[assigned("t1", 0, 1), assigned("t2", 1, 1)])[..]
    );
}

#[test]
#[should_panic(
    expected = "fatal: dict 1:dict#0: cannot write the schema file: sync of file \
                schema/tables.schema.tmp at offset 0: Input/output error (os error 5)"
)]
fn a_failed_sync_of_the_schema_file_stops_the_node() {
    let (mut dict, mut ctx, mut disk) = started();
    create_until_saving(&mut dict, &mut ctx, "t1");
    for _ in 0..3 {
        disk.answer_one(&mut dict, &mut ctx);
    }
    let request = ctx.take_fs_requests().pop().expect("the sync");
    let error = request
        .operation
        .error(FsErrorKind::Io, "Input/output error (os error 5)");
    let token = request.token;
    deliver(
        &mut dict,
        &mut ctx,
        IO,
        FsConf {
            token,
            result: Err(error),
        },
    );
}

#[test]
#[should_panic(expected = "cannot read the schema file: open of file schema/tables.schema")]
fn an_unreadable_schema_file_stops_the_node() {
    let mut dict = new_dict();
    let mut ctx = RecordingContext::new();
    deliver(
        &mut dict,
        &mut ctx,
        MEMBERSHIP,
        StartPhaseReq {
            phase: phases::INITIALISE,
        },
    );
    let request = ctx.take_fs_requests().pop().expect("the open");
    let error = request
        .operation
        .error(FsErrorKind::Io, "Permission denied (os error 13)");
    let token = request.token;
    deliver(
        &mut dict,
        &mut ctx,
        IO,
        FsConf {
            token,
            result: Err(error),
        },
    );
}

#[test]
#[should_panic(expected = "is not the request in flight")]
fn an_answer_to_a_request_never_made_stops_the_node() {
    let (mut dict, mut ctx, _) = started();
    let stray = FsConf {
        token: 99,
        result: Ok(FsDone::Synced),
    };
    deliver(&mut dict, &mut ctx, IO, stray);
}

/// Starts a dict on `disk` up to (not including) RESTORE_SCHEMA, feeding
/// the schema file's Open and Read answers by hand.
fn read_at_start(disk: &Disk) -> (Dict, RecordingContext) {
    let mut dict = new_dict();
    let mut ctx = RecordingContext::new();
    deliver(
        &mut dict,
        &mut ctx,
        MEMBERSHIP,
        StartPhaseReq {
            phase: phases::INITIALISE,
        },
    );
    let file = disk.schema_file().to_vec();
    let open = ctx.take_fs_requests().pop().expect("the open");
    assert_eq!(
        describe(&open.operation),
        "open schema/tables.schema Existing"
    );
    let opened = FsConf {
        token: open.token,
        result: Ok(FsDone::Opened {
            size: file.len() as u64,
        }),
    };
    deliver(&mut dict, &mut ctx, IO, opened);
    let read = ctx.take_fs_requests().pop().expect("the read");
    assert_eq!(
        describe(&read.operation),
        format!("read schema/tables.schema at 0: {} bytes", file.len())
    );
    assert!(
        ctx.take_trace().is_empty(),
        "not confirmed before it is read"
    );
    let data = ctx.pool().copy_from(&file).expect("room");
    let answer = FsConf {
        token: read.token,
        result: Ok(FsDone::Read { data }),
    };
    deliver(&mut dict, &mut ctx, IO, answer);
    assert_eq!(
        ctx.take_trace(),
        vec![line(
            DICT,
            MEMBERSHIP,
            StartPhaseConf {
                phase: phases::INITIALISE
            }
        )]
    );
    deliver(
        &mut dict,
        &mut ctx,
        MEMBERSHIP,
        StartPhaseReq {
            phase: phases::RESTART_GCI,
        },
    );
    ctx.sent.clear();
    assert!(ctx.take_fs_requests().is_empty());
    (dict, ctx)
}

#[test]
fn a_restarted_dict_puts_the_stored_tables_back_and_serves_them() {
    let (mut before, mut ctx, mut disk) = started();
    create(&mut before, &mut ctx, &mut disk, "t1");
    create(&mut before, &mut ctx, &mut disk, "t2");
    create(&mut before, &mut ctx, &mut disk, "t3");
    drop_table(&mut before, &mut ctx, &mut disk, "t2");
    assert_eq!(before.schema_version(), 5);
    drop(before);

    let (mut dict, mut ctx) = read_at_start(&disk);
    deliver(
        &mut dict,
        &mut ctx,
        MEMBERSHIP,
        StartPhaseReq {
            phase: phases::RESTORE_SCHEMA,
        },
    );
    for table in [assigned("t1", 0, 1), assigned("t3", 2, 1)] {
        let map = map_of(table.id);
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
            ],
            "table {} goes to this node's tc and ldms",
            table.name
        );
        for block in [LDM1, TC0, LDM0] {
            assert!(
                ctx.take_trace().is_empty(),
                "the next table waits for every block to add {}",
                table.name
            );
            deliver(
                &mut dict,
                &mut ctx,
                block,
                AddTabConf { table_id: table.id },
            );
        }
    }
    assert_eq!(
        ctx.take_trace(),
        vec![line(
            DICT,
            MEMBERSHIP,
            StartPhaseConf {
                phase: phases::RESTORE_SCHEMA
            }
        )]
    );
    assert_eq!(ctx.take_reports(), vec![Report::SchemaVersion(5)]);
    assert_eq!(dict.schema_version(), 5);
    for phase in [
        phases::RESTORE_DATA,
        phases::SCHEMA,
        phases::GLOBAL_CHECKPOINT,
    ] {
        deliver(&mut dict, &mut ctx, MEMBERSHIP, StartPhaseReq { phase });
    }
    ctx.sent.clear();
    assert!(
        ctx.take_fs_requests().is_empty(),
        "nothing written at start"
    );

    assert_eq!(
        get(&mut dict, &mut ctx, "t1"),
        Ok(((*assigned("t1", 0, 1)).clone(), 5))
    );
    assert_eq!(
        get(&mut dict, &mut ctx, "t3"),
        Ok(((*assigned("t3", 2, 1)).clone(), 5))
    );
    assert_eq!(get(&mut dict, &mut ctx, "t2"), Err(ErrorCode::UnknownTable));
    deliver(&mut dict, &mut ctx, API, ListTablesReq { request_id: 6 });
    let Some(Signal::ListTablesConf(conf)) = ctx.sent.pop().map(|sent| sent.envelope.signal) else {
        panic!("no ListTablesConf");
    };
    let names = codec::decode_table_names(conf.names.as_slice()).expect("valid names");
    assert_eq!((names, conf.schema_version), (vec!["t1", "t3"], 5));

    // The registry goes on from where it was: the free id 1 with its next
    // version, names still taken.
    assert_eq!(create(&mut dict, &mut ctx, &mut disk, "t4"), (1, 2));
    let request = create_request(&ctx, 9, "t1");
    deliver(&mut dict, &mut ctx, API, request);
    assert_eq!(
        ctx.take_trace(),
        vec![line(
            DICT,
            API,
            SchemaRef {
                request_id: 9,
                error: ErrorCode::TableExists
            }
        )]
    );
    drop_table(&mut dict, &mut ctx, &mut disk, "t1");
    assert_eq!(
        disk.schema_file(),
        &expected_file(
            7,
            vec![1, 2, 1],
            &[assigned("t4", 1, 2), assigned("t3", 2, 1)]
        )[..]
    );
}

#[test]
fn no_schema_file_is_an_initial_start() {
    let mut dict = new_dict();
    let mut ctx = RecordingContext::new();
    let mut disk = Disk::default();
    for phase in [
        phases::INITIALISE,
        phases::RESTART_GCI,
        phases::RESTORE_SCHEMA,
    ] {
        deliver(&mut dict, &mut ctx, MEMBERSHIP, StartPhaseReq { phase });
        disk.serve(&mut dict, &mut ctx);
        assert_eq!(
            ctx.take_trace(),
            vec![line(DICT, MEMBERSHIP, StartPhaseConf { phase })]
        );
    }
    assert_eq!(disk.log, vec!["open schema/tables.schema Existing"]);
    assert!(
        ctx.take_reports().is_empty(),
        "schema version 1, as initial"
    );
    assert_eq!(dict.schema_version(), 1);
}

#[test]
#[should_panic(
    expected = "the schema file schema/tables.schema is unusable at offset 12: checksum"
)]
fn a_damaged_schema_file_stops_the_node_naming_file_and_offset() {
    let (mut dict, mut ctx, mut disk) = started();
    create(&mut dict, &mut ctx, &mut disk, "t1");
    let file = disk.files.get_mut(&SCHEMA_FILE).expect("written");
    file[300] ^= 0x04;
    read_at_start(&disk);
}

#[test]
fn schema_files_larger_than_a_section_go_in_chunks() {
    let (mut dict, mut ctx, mut disk) = started();
    let section = *CLASS_SIZES.last().expect("classes");
    // Past one section by more than a table, so still past it after a drop.
    let mut names = Vec::new();
    while names.len() < 2 || disk.schema_file().len() <= section {
        let name = format!("t{}", names.len());
        create(&mut dict, &mut ctx, &mut disk, &name);
        names.push(name);
    }
    let name = format!("t{}", names.len());
    create(&mut dict, &mut ctx, &mut disk, &name);
    names.push(name);
    let length = disk.schema_file().len();
    disk.log.clear();
    drop_table(&mut dict, &mut ctx, &mut disk, "t0");
    let length_after = disk.schema_file().len();
    assert!(length_after > section, "still two chunks");
    assert_eq!(
        disk.log[2..4],
        [
            format!("write schema/tables.schema.tmp at 0: {section} bytes"),
            format!(
                "write schema/tables.schema.tmp at {section}: {} bytes",
                length_after - section
            ),
        ]
    );
    assert!(length > length_after);

    // A restart reads it back in chunks too.
    let mut restarted = new_dict();
    let mut ctx = RecordingContext::new();
    disk.log.clear();
    start(&mut restarted, &mut ctx, &mut disk);
    assert_eq!(
        disk.log,
        vec![
            "open schema/tables.schema Existing".to_string(),
            format!("read schema/tables.schema at 0: {section} bytes"),
            format!(
                "read schema/tables.schema at {section}: {} bytes",
                length_after - section
            ),
        ]
    );
    assert_eq!(restarted.schema_version(), dict.schema_version());
    assert_eq!(
        get(&mut restarted, &mut ctx, "t0"),
        Err(ErrorCode::UnknownTable)
    );
    let last = names.last().expect("tables");
    assert!(get(&mut restarted, &mut ctx, last).is_ok());
}

#[test]
fn a_write_waits_for_a_free_section() {
    let (mut dict, mut ctx, mut disk) = started();
    create_until_saving(&mut dict, &mut ctx, "t1");
    disk.answer_one(&mut dict, &mut ctx);
    // Every section large enough for the file is held elsewhere.
    let length = expected_file(2, vec![1], &[assigned("t1", 0, 1)]).len();
    let held: Vec<_> = std::iter::from_fn(|| ctx.pool().alloc(length)).collect();
    assert!(!held.is_empty());
    assert_eq!(
        disk.answer_one(&mut dict, &mut ctx),
        format!("set_len schema/tables.schema.tmp {length}")
    );
    assert!(
        ctx.take_fs_requests().is_empty(),
        "no section for the write"
    );
    let retry = ContinueB {
        job: FILE_RETRY_JOB,
    };
    assert_eq!(
        ctx.take_trace(),
        vec![delayed_line(DICT, DICT, retry, FILE_RETRY_DELAY_MS)]
    );
    drop(held);
    deliver(
        &mut dict,
        &mut ctx,
        DICT,
        ContinueB {
            job: FILE_RETRY_JOB,
        },
    );
    assert_eq!(
        disk.answer_one(&mut dict, &mut ctx),
        format!("write schema/tables.schema.tmp at 0: {length} bytes")
    );
    disk.serve(&mut dict, &mut ctx);
    assert!(matches!(
        ctx.sent.pop().map(|sent| sent.envelope.signal),
        Some(Signal::CreateTabConf(_))
    ));
}

#[test]
fn a_diskless_dict_touches_no_file() {
    let mut dict = Dict::new(config(true)).announced();
    let mut ctx = RecordingContext::new();
    let mut disk = Disk::default();
    start(&mut dict, &mut ctx, &mut disk);
    assert_eq!(
        create(&mut dict, &mut ctx, &mut disk, "t1"),
        (0, 1),
        "confirmed at once"
    );
    assert_eq!(
        get(&mut dict, &mut ctx, "t1").map(|(_, version)| version),
        Ok(2)
    );
    drop_table(&mut dict, &mut ctx, &mut disk, "t1");
    assert!(disk.log.is_empty() && disk.files.is_empty());
}

/// What `storage` cannot check, dict does: definitions and maps that
/// decode and agree with their entry, unique names. Each is refused with
/// the offset of the table's entry.
#[test]
fn stored_tables_that_do_not_decode_or_agree_are_refused_with_their_offset() {
    let table = |id: u32, name: &str| {
        let mut map = Vec::new();
        codec::encode_partition_map(&mut map, &map_of(id));
        StoredTable {
            id,
            version: 1,
            definition: assigned(name, id, 1).encode_to_vec(),
            map,
        }
    };
    let good = Schema {
        schema_version: 3,
        id_versions: vec![1, 1],
        tables: vec![table(0, "a"), table(1, "b")],
    };
    let stored = decode_stored_schema(&schema_file::encode(&good)).expect("a good file");
    assert_eq!(stored.tables.len(), 2);
    assert_eq!(stored.tables[1].0.name, "b");

    let cases: Vec<(Schema, &str)> = vec![
        (
            {
                let mut schema = good.clone();
                schema.tables[1].definition = b"junk".to_vec();
                schema
            },
            "definition does not decode",
        ),
        (
            {
                let mut schema = good.clone();
                schema.tables[1].definition = assigned("b", 0, 1).encode_to_vec();
                schema
            },
            "the definition is of table 0",
        ),
        (
            {
                let mut schema = good.clone();
                schema.tables[1].map.truncate(10);
                schema
            },
            "partition map does not decode",
        ),
        (
            {
                let mut schema = good.clone();
                codec::encode_partition_map(
                    {
                        schema.tables[1].map.clear();
                        &mut schema.tables[1].map
                    },
                    &map_of(0),
                );
                schema
            },
            "the partition map is of table 0",
        ),
        (
            {
                let mut schema = good.clone();
                schema.tables[1].definition = assigned("a", 1, 1).encode_to_vec();
                schema
            },
            "stored twice",
        ),
        (
            with_unique(&good, 0, 1),
            "hidden table id 0 is another table's",
        ),
        (with_unique(&good, 2, 3), "is not its id's last version"),
    ];
    for (schema, reason) in cases {
        let damage = match decode_stored_schema(&schema_file::encode(&schema)) {
            Ok(_) => panic!("{reason}: accepted"),
            Err(damage) => damage,
        };
        assert_eq!(damage.offset, schema.table_offset(1), "{reason}");
        assert!(
            damage.reason.contains(reason),
            "{reason}: {}",
            damage.reason
        );
        assert!(damage.reason.starts_with("table 1: "), "{}", damage.reason);
    }
}

/// `good` with a unique index on table 1's `v`, its hidden table
/// `hidden_id` at `version` (the file's last version of that id is 1).
fn with_unique(good: &Schema, hidden_id: u32, version: u32) -> Schema {
    let mut schema = good.clone();
    schema.id_versions = vec![1, 1, 1];
    let mut definition = (*assigned("b", 1, 1)).clone();
    definition.indexes.push(signal::schema::IndexDef {
        id: 1,
        name: "by_v".into(),
        columns: vec![1],
        unique: Some(signal::schema::UniqueTable {
            table_id: hidden_id,
            table_version: version,
        }),
    });
    definition.revision = 1;
    schema.tables[1].definition = definition.encode_to_vec();
    schema
}

#[test]
fn a_stored_unique_index_is_read_back_with_its_hidden_table() {
    let good = {
        let (mut dict, mut ctx, mut disk) = started();
        create(&mut dict, &mut ctx, &mut disk, "a");
        create(&mut dict, &mut ctx, &mut disk, "b");
        schema_file::decode(disk.schema_file()).expect("a written file")
    };
    let schema = with_unique(&good, 2, 1);
    let stored = decode_stored_schema(&schema_file::encode(&schema)).expect("a good file");
    let unique = stored.tables[1].0.indexes[0].unique;
    assert_eq!(unique.map(|unique| unique.table_id), Some(2));
}

/// A file dict wrote, then damaged: every single flipped byte and every
/// truncation is refused, none panics.
#[test]
fn every_flipped_byte_or_cut_of_a_written_file_is_refused() {
    let (mut dict, mut ctx, mut disk) = started();
    create(&mut dict, &mut ctx, &mut disk, "t1");
    create(&mut dict, &mut ctx, &mut disk, "t2");
    let file = disk.schema_file().to_vec();
    assert!(decode_stored_schema(&file).is_ok());
    for at in (0..file.len()).step_by(7) {
        let mut flipped = file.clone();
        flipped[at] ^= 0x5a;
        let damage = decode_stored_schema(&flipped).expect_err("a flipped byte is found");
        assert!(damage.offset < file.len());
        assert!(decode_stored_schema(&file[..at]).is_err(), "cut at {at}");
    }
}
