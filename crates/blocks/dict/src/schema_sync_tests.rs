//! The schema agreement of phase RESTORE_SCHEMA: the master's schema wins.
//! Dicts whose files say the same keep them (nothing written); a dict with
//! a table the master lacks (a create that reached its file, not the
//! master's) rewrites its file without it, never gives it to its tcs and
//! ldms, and takes a later create of the same id; a dict missing a table
//! gets it; a schema larger than a section goes in chunks to every other
//! dict; a chunk waits for a free section; a damaged or disordered
//! transfer stops the node; the master's schema may arrive before the
//! other dict's phase, and the master ends its phase only after every
//! other dict took its schema; diskless dicts agree on "no schema".
//!
//! Each node is a dict with its own [`Disk`]; the test plays every other
//! block (dih, tcs, ldms, membership) and carries the signals between the
//! dicts, when it chooses.

use crate::persistence_tests::{assigned, create_request, expected_file, get, map_of, Disk};
use crate::{Dict, DictConfig, SCHEMA_FILE, SYNC_RETRY_DELAY_MS};
use kernel::testing::{deliver, line, RecordingContext};
use kernel::{Context, Report};
use signal::phases::{self, PHASES};
use signal::schema::TableDef;
use signal::section::MAX_SECTION_BYTES;
use signal::signals::{
    AddTabConf, ContinueB, DiAddTabConf, SchemaSyncConf, SchemaSyncReq, StartPhaseConf,
    StartPhaseReq,
};
use signal::{BlockKind, BlockRef, Envelope, ErrorCode, NodeId, Signal};
use std::sync::Arc;

/// What another dict answers to a chunk of the master's schema when it
/// takes the schema as it comes: the bytes received up to the chunk's end
/// (at the last chunk, the whole schema).
pub(crate) fn taken(request: &SchemaSyncReq) -> SchemaSyncConf {
    SchemaSyncConf {
        received: request.offset + request.data.len() as u32,
    }
}

/// Hands another dict the master's "no schema" (the master's disk is
/// empty, or diskless).
pub(crate) fn deliver_no_schema(dict: &mut Dict, ctx: &mut RecordingContext) {
    let data = ctx.pool().copy_from(&[]).expect("pool has room");
    let master = dict.master();
    let request = SchemaSyncReq {
        total_bytes: 0,
        offset: 0,
        data,
    };
    deliver(dict, ctx, master, request);
}

/// Plays the other dicts of a dict in phase RESTORE_SCHEMA on a cluster
/// with no schema: the master hears each take its "no schema"; another
/// dict gets it.
pub(crate) fn agree_on_no_schema(dict: &mut Dict, ctx: &mut RecordingContext) {
    if !dict.is_master() {
        return deliver_no_schema(dict, ctx);
    }
    let confs: Vec<(BlockRef, SchemaSyncConf)> = ctx
        .sent
        .iter()
        .filter_map(|sent| match &sent.envelope.signal {
            Signal::SchemaSyncReq(request) => Some((sent.envelope.to, taken(request))),
            _ => None,
        })
        .collect();
    for (from, conf) in confs {
        deliver(dict, ctx, from, conf);
    }
}

const API: BlockRef = BlockRef::new(NodeId(100), BlockKind::Api, 0);

fn dict_ref(node: u16) -> BlockRef {
    BlockRef::new(NodeId(node), BlockKind::Dict, 0)
}

/// One data node: its dict, its disk, and what the test saw of it.
struct Node {
    dict: Dict,
    ctx: RecordingContext,
    disk: Disk,
    /// Tables given to this node's tcs and ldms: (block, table id).
    added: Vec<(BlockRef, u32)>,
    /// Phases the dict confirmed.
    confirmed: Vec<u8>,
    /// What its clients were answered.
    answers: Vec<Signal>,
    /// Phases membership asked for.
    requested: Vec<u8>,
}

impl Node {
    fn membership(&self) -> BlockRef {
        BlockRef::new(self.dict.address.node, BlockKind::Membership, 0)
    }

    /// Runs phase `phase` (the disk answering what it asks).
    fn phase(&mut self, phase: u8) {
        self.requested.push(phase);
        let membership = self.membership();
        deliver(
            &mut self.dict,
            &mut self.ctx,
            membership,
            StartPhaseReq { phase },
        );
    }

    fn tables_added(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self.added.iter().map(|&(_, id)| id).collect();
        ids.dedup();
        ids
    }
}

/// Data nodes 1..=n, node 1's dict the master.
struct Cluster {
    nodes: Vec<Node>,
    /// Signals between dicts, in send order, not delivered yet.
    network: Vec<Envelope>,
}

impl Cluster {
    /// `files[i]`: node i+1's schema file (None: none). Every dict has run
    /// INITIALISE (its file read) and RESTART_GCI.
    fn booted(files: Vec<Option<Vec<u8>>>, diskless: bool) -> Cluster {
        let data_nodes: Vec<(NodeId, u32)> = (1..=files.len() as u16)
            .map(|node| (NodeId(node), 0))
            .collect();
        let nodes = files
            .into_iter()
            .enumerate()
            .map(|(index, file)| {
                let dict = Dict::new(DictConfig {
                    address: dict_ref(index as u16 + 1),
                    tc_instances: 1,
                    ldm_instances: 2,
                    data_nodes: data_nodes.clone(),
                    replicas: 2,
                    redo_log_parts: 2,
                    diskless,
                })
                .announced();
                let mut disk = Disk::default();
                if let Some(file) = file {
                    disk.files.insert(SCHEMA_FILE, file);
                }
                Node {
                    dict,
                    ctx: RecordingContext::new(),
                    disk,
                    added: Vec::new(),
                    confirmed: Vec::new(),
                    answers: Vec::new(),
                    requested: Vec::new(),
                }
            })
            .collect();
        let mut cluster = Cluster {
            nodes,
            network: Vec::new(),
        };
        for index in 0..cluster.nodes.len() {
            for phase in [phases::INITIALISE, phases::RESTART_GCI] {
                cluster.nodes[index].phase(phase);
                cluster.local(index);
                assert_eq!(cluster.nodes[index].confirmed.last(), Some(&phase));
            }
            cluster.nodes[index].disk.log.clear();
        }
        assert!(cluster.network.is_empty());
        cluster
    }

    fn node(&mut self, node: u16) -> &mut Node {
        &mut self.nodes[node as usize - 1]
    }

    /// Node `index` runs until it waits for another node: its disk and
    /// blocks answer; what it sends another node's dict goes on the
    /// network.
    fn local(&mut self, index: usize) {
        let node = &mut self.nodes[index];
        let me = node.dict.address;
        loop {
            node.disk.serve(&mut node.dict, &mut node.ctx);
            let sent = std::mem::take(&mut node.ctx.sent);
            if sent.is_empty() {
                break;
            }
            for sent in sent {
                let to = sent.envelope.to;
                assert!(sent.delay_ms.is_none(), "unexpected delayed {sent:?}");
                match sent.envelope.signal {
                    Signal::TcAddTabReq(request) => {
                        node.added.push((to, request.table.id));
                        let conf = AddTabConf {
                            table_id: request.table.id,
                        };
                        deliver(&mut node.dict, &mut node.ctx, to, conf);
                    }
                    Signal::LqhAddTabReq(request) => {
                        node.added.push((to, request.table.id));
                        let conf = AddTabConf {
                            table_id: request.table.id,
                        };
                        deliver(&mut node.dict, &mut node.ctx, to, conf);
                    }
                    Signal::DiAddTabReq(request) => {
                        let map = map_of(request.table.id);
                        deliver(&mut node.dict, &mut node.ctx, to, DiAddTabConf { map });
                    }
                    Signal::StartPhaseConf(conf) => node.confirmed.push(conf.phase),
                    signal if to.kind == BlockKind::Api => node.answers.push(signal),
                    signal if to.kind == BlockKind::Dict && to != me => {
                        self.network.push(Envelope {
                            from: me,
                            to,
                            signal,
                        })
                    }
                    other => panic!("{me} sent {other:?} to {to}"),
                }
            }
        }
        node.ctx.reports.retain(|report| {
            matches!(report, Report::SchemaVersion(_)) || panic!("unexpected {report:?}")
        });
    }

    /// Delivers what is on the network, in order.
    fn carry(&mut self) -> usize {
        let envelopes = std::mem::take(&mut self.network);
        let count = envelopes.len();
        for envelope in envelopes {
            let node = &mut self.nodes[envelope.to.node.0 as usize - 1];
            deliver(
                &mut node.dict,
                &mut node.ctx,
                envelope.from,
                envelope.signal,
            );
        }
        count
    }

    /// Runs every node and carries signals until nothing moves.
    fn settle(&mut self) {
        loop {
            for index in 0..self.nodes.len() {
                self.local(index);
            }
            if self.carry() == 0 {
                break;
            }
        }
    }

    /// Every node that has not yet runs phase RESTORE_SCHEMA, the master
    /// first, and the phase runs to its end everywhere.
    fn restore_schema(&mut self) {
        for index in 0..self.nodes.len() {
            if !self.nodes[index]
                .requested
                .contains(&phases::RESTORE_SCHEMA)
            {
                self.nodes[index].phase(phases::RESTORE_SCHEMA);
            }
            self.local(index);
        }
        self.settle();
        for node in &self.nodes {
            assert_eq!(
                node.confirmed.last(),
                Some(&phases::RESTORE_SCHEMA),
                "{} ended the phase",
                node.dict.address
            );
        }
    }

    /// The phases after RESTORE_SCHEMA, on every node.
    fn start_serving(&mut self) {
        for node in &mut self.nodes {
            for &phase in PHASES.iter().filter(|&&p| p > phases::RESTORE_SCHEMA) {
                node.phase(phase);
            }
            node.ctx.sent.clear();
        }
    }

    /// A create of `name` at the master, every block and dict answering;
    /// returns the CreateTabConf's (id, version).
    fn create(&mut self, name: &str) -> (u32, u32) {
        let request = create_request(&self.nodes[0].ctx, 3, name);
        let master = &mut self.nodes[0];
        deliver(&mut master.dict, &mut master.ctx, API, request);
        // The tcs and ldms of other nodes answer the master as its own do.
        self.settle();
        match self.nodes[0].answers.pop() {
            Some(Signal::CreateTabConf(conf)) => (conf.table_id, conf.table_version),
            other => panic!("expected CreateTabConf, got {other:?}"),
        }
    }
}

fn tables(names: &[(&str, u32, u32)]) -> Vec<Arc<TableDef>> {
    names
        .iter()
        .map(|&(name, id, version)| assigned(name, id, version))
        .collect()
}

/// What a restored node's tcs and ldms were given: each of its 3 blocks
/// got `ids`, one table at a time.
fn assert_added(node: &Node, ids: &[u32]) {
    let me = node.dict.address.node;
    let blocks = [
        BlockRef::new(me, BlockKind::Tc, 0),
        BlockRef::new(me, BlockKind::Ldm, 0),
        BlockRef::new(me, BlockKind::Ldm, 1),
    ];
    let expected: Vec<(BlockRef, u32)> = ids
        .iter()
        .flat_map(|&id| blocks.iter().map(move |&block| (block, id)))
        .collect();
    assert_eq!(node.added, expected, "{me}'s tcs and ldms");
}

/// The file operations but the reads of the schema file.
fn file_writes(disk: &Disk) -> Vec<String> {
    disk.log
        .iter()
        .filter(|entry| !entry.starts_with("read") && !entry.contains("Existing"))
        .cloned()
        .collect()
}

#[test]
fn dicts_whose_files_agree_keep_them_and_restore_the_same_tables() {
    let file = expected_file(3, vec![1, 1], &tables(&[("t1", 0, 1), ("t2", 1, 1)]));
    let mut cluster = Cluster::booted(vec![Some(file.clone()), Some(file.clone())], false);

    cluster.node(1).phase(phases::RESTORE_SCHEMA);
    cluster.local(0);
    // The master sent its file and gave its own blocks the tables, but
    // ends its phase only once the other dict took its schema.
    assert_added(cluster.node(1), &[0, 1]);
    assert!(!cluster.node(1).confirmed.contains(&phases::RESTORE_SCHEMA));
    let [Envelope {
        to,
        signal: Signal::SchemaSyncReq(request),
        ..
    }] = &cluster.network[..]
    else {
        panic!("one chunk to the other dict: {:?}", cluster.network);
    };
    assert_eq!(*to, dict_ref(2));
    assert_eq!(
        (request.total_bytes, request.offset),
        (file.len() as u32, 0)
    );
    assert_eq!(request.data.as_slice(), &file[..]);

    cluster.restore_schema();
    for node in 1..=2 {
        let node = cluster.node(node);
        assert_added(node, &[0, 1]);
        assert_eq!(node.dict.schema_version(), 3);
        assert_eq!(node.ctx.take_reports(), vec![Report::SchemaVersion(3)]);
        assert!(file_writes(&node.disk).is_empty(), "no file written");
        assert_eq!(node.disk.schema_file(), &file[..]);
    }
}

#[test]
fn a_dict_holding_a_table_the_master_lacks_drops_it_and_takes_its_id_again() {
    // A create of t2 reached node 2's file, not the master's (written
    // last): the client never heard of it.
    let master_file = expected_file(2, vec![1], &tables(&[("t1", 0, 1)]));
    let follower_file = expected_file(3, vec![1, 1], &tables(&[("t1", 0, 1), ("t2", 1, 1)]));
    let mut cluster = Cluster::booted(vec![Some(master_file.clone()), Some(follower_file)], false);
    cluster.restore_schema();

    let follower = cluster.node(2);
    assert_added(follower, &[0]);
    assert_eq!(follower.dict.schema_version(), 2);
    assert_eq!(follower.ctx.take_reports(), vec![Report::SchemaVersion(2)]);
    assert_eq!(
        follower.disk.schema_file(),
        &master_file[..],
        "the master's schema, byte for byte"
    );
    assert_eq!(
        file_writes(&follower.disk),
        vec![
            "open schema/tables.schema.tmp Create".to_string(),
            format!("set_len schema/tables.schema.tmp {}", master_file.len()),
            format!(
                "write schema/tables.schema.tmp at 0: {} bytes",
                master_file.len()
            ),
            "sync schema/tables.schema.tmp".to_string(),
            "rename schema/tables.schema.tmp to schema/tables.schema".to_string(),
        ]
    );
    assert!(file_writes(&cluster.node(1).disk).is_empty());

    cluster.start_serving();
    let follower = cluster.node(2);
    assert_eq!(
        get(&mut follower.dict, &mut follower.ctx, "t2"),
        Err(ErrorCode::UnknownTable)
    );
    assert_eq!(
        get(&mut follower.dict, &mut follower.ctx, "t1"),
        Ok(((*assigned("t1", 0, 1)).clone(), 2))
    );

    // The client creates again: the master hands out id 1 (version 1, as
    // its file knows no earlier table 1); every dict takes it.
    assert_eq!(cluster.create("t3"), (1, 1));
    let expected = expected_file(3, vec![1, 1], &tables(&[("t1", 0, 1), ("t3", 1, 1)]));
    for node in 1..=2 {
        assert_eq!(cluster.node(node).disk.schema_file(), &expected[..]);
        assert_eq!(cluster.node(node).dict.schema_version(), 3);
    }
    let follower = cluster.node(2);
    assert_eq!(
        get(&mut follower.dict, &mut follower.ctx, "t3"),
        Ok(((*assigned("t3", 1, 1)).clone(), 3))
    );
}

#[test]
fn a_dict_missing_tables_of_the_master_gets_them() {
    let master_file = expected_file(4, vec![1, 2], &tables(&[("t1", 0, 1), ("t2", 1, 2)]));
    let behind = expected_file(2, vec![1], &tables(&[("t1", 0, 1)]));
    for follower_file in [Some(behind), None] {
        let had_file = follower_file.is_some();
        let mut cluster = Cluster::booted(vec![Some(master_file.clone()), follower_file], false);
        cluster.restore_schema();
        let follower = cluster.node(2);
        assert_added(follower, &[0, 1]);
        assert_eq!(follower.dict.schema_version(), 4);
        assert_eq!(follower.ctx.take_reports(), vec![Report::SchemaVersion(4)]);
        assert_eq!(
            follower.disk.schema_file(),
            &master_file[..],
            "had a file: {had_file}"
        );
        cluster.start_serving();
        let follower = cluster.node(2);
        assert_eq!(
            get(&mut follower.dict, &mut follower.ctx, "t2"),
            Ok(((*assigned("t2", 1, 2)).clone(), 4))
        );
    }
}

#[test]
fn a_master_without_a_schema_empties_the_other_dicts_schema() {
    // The first create ever reached node 2's file only.
    let follower_file = expected_file(2, vec![1], &tables(&[("t1", 0, 1)]));
    let mut cluster = Cluster::booted(vec![None, Some(follower_file)], false);
    cluster.restore_schema();
    let Cluster { nodes, .. } = &mut cluster;
    assert_added(&nodes[0], &[]);
    assert_added(&nodes[1], &[]);
    assert!(nodes[0].ctx.take_reports().is_empty(), "an initial start");
    assert_eq!(nodes[1].ctx.take_reports(), vec![Report::SchemaVersion(1)]);
    assert_eq!(nodes[1].dict.schema_version(), 1);
    assert_eq!(
        nodes[1].disk.schema_file(),
        &expected_file(1, vec![], &[])[..],
        "no table, no id used: an empty schema"
    );

    cluster.start_serving();
    assert_eq!(cluster.create("t1"), (0, 1));
    let expected = expected_file(2, vec![1], &tables(&[("t1", 0, 1)]));
    for node in 1..=2 {
        assert_eq!(cluster.node(node).disk.schema_file(), &expected[..]);
    }

    // At the next restart the empty schema and "no schema" are the same:
    // node 2 writes nothing.
    let mut cluster = Cluster::booted(vec![None, Some(expected_file(1, vec![], &[]))], false);
    cluster.restore_schema();
    assert!(file_writes(&cluster.node(2).disk).is_empty());
}

#[test]
fn a_schema_larger_than_a_section_goes_to_every_dict_in_chunks() {
    let names: Vec<String> = (0..12).map(|i| format!("t{i}")).collect();
    let many: Vec<Arc<TableDef>> = names
        .iter()
        .enumerate()
        .map(|(id, name)| assigned(name, id as u32, 1))
        .collect();
    let file = expected_file(13, vec![1; 12], &many);
    let chunks = file.len().div_ceil(MAX_SECTION_BYTES);
    assert!(chunks >= 2, "the test needs a file of several sections");
    let mut cluster = Cluster::booted(vec![Some(file.clone()), None, None], false);
    for index in 0..3 {
        cluster.nodes[index].phase(phases::RESTORE_SCHEMA);
    }
    // Chunk by chunk: each answered before the next goes.
    let mut offsets = Vec::new();
    loop {
        for index in 0..3 {
            cluster.local(index);
        }
        for envelope in &cluster.network {
            match &envelope.signal {
                Signal::SchemaSyncReq(request) => {
                    assert_eq!(request.total_bytes, file.len() as u32);
                    let offset = request.offset as usize;
                    let end = (offset + MAX_SECTION_BYTES).min(file.len());
                    assert_eq!(request.data.as_slice(), &file[offset..end]);
                    offsets.push((envelope.to.node.0, offset));
                }
                Signal::SchemaSyncConf(_) => assert_eq!(envelope.to, dict_ref(1)),
                other => panic!("unexpected {other:?}"),
            }
        }
        if cluster.carry() == 0 {
            break;
        }
    }
    let sent: Vec<usize> = (0..chunks).map(|chunk| chunk * MAX_SECTION_BYTES).collect();
    for node in [2, 3] {
        let to_node: Vec<usize> = offsets
            .iter()
            .filter(|&&(to, _)| to == node)
            .map(|&(_, offset)| offset)
            .collect();
        assert_eq!(to_node, sent, "the chunks node {node} got");
        let node = cluster.node(node);
        assert_eq!(node.disk.schema_file(), &file[..]);
        assert_eq!(node.tables_added(), (0..12).collect::<Vec<u32>>());
        assert_eq!(node.confirmed.last(), Some(&phases::RESTORE_SCHEMA));
    }
    assert_eq!(
        cluster.node(1).confirmed.last(),
        Some(&phases::RESTORE_SCHEMA)
    );
}

#[test]
fn the_masters_schema_arriving_before_the_other_dicts_phase_waits_for_it() {
    let file = expected_file(2, vec![1], &tables(&[("t1", 0, 1)]));
    let mut cluster = Cluster::booted(vec![Some(file.clone()), None], false);
    cluster.node(1).phase(phases::RESTORE_SCHEMA);
    cluster.local(0);
    assert_eq!(cluster.carry(), 1, "the master's one chunk");
    cluster.local(1);
    let follower = cluster.node(2);
    assert!(
        follower.added.is_empty() && follower.disk.log.is_empty(),
        "kept until its phase"
    );
    assert!(
        cluster.network.is_empty(),
        "the last chunk is answered once taken"
    );
    assert!(!cluster.node(1).confirmed.contains(&phases::RESTORE_SCHEMA));

    cluster.node(2).phase(phases::RESTORE_SCHEMA);
    cluster.local(1);
    assert_eq!(cluster.node(2).disk.schema_file(), &file[..]);
    assert_added(cluster.node(2), &[0]);
    assert_eq!(
        cluster.node(2).confirmed.last(),
        Some(&phases::RESTORE_SCHEMA)
    );
    let conf = SchemaSyncConf {
        received: file.len() as u32,
    };
    assert_eq!(
        cluster
            .network
            .iter()
            .map(|envelope| format!("{envelope:?}"))
            .collect::<Vec<_>>(),
        vec![format!(
            "{:?}",
            Envelope {
                from: dict_ref(2),
                to: dict_ref(1),
                signal: conf.into()
            }
        )]
    );
    cluster.settle();
    assert_eq!(
        cluster.node(1).confirmed.last(),
        Some(&phases::RESTORE_SCHEMA)
    );

    // The other order: the other dict waits in its phase for the master.
    let mut cluster = Cluster::booted(vec![Some(file.clone()), None], false);
    cluster.node(2).phase(phases::RESTORE_SCHEMA);
    cluster.local(1);
    assert!(cluster.network.is_empty() && cluster.node(2).confirmed.len() == 2);
    cluster.restore_schema();
    assert_eq!(cluster.node(2).disk.schema_file(), &file[..]);
}

#[test]
fn diskless_dicts_agree_on_no_schema_and_touch_no_file() {
    let mut cluster = Cluster::booted(vec![None, None, None], true);
    cluster.restore_schema();
    for node in &mut cluster.nodes {
        assert!(node.disk.log.is_empty() && node.ctx.fs_requests.is_empty());
        assert!(node.added.is_empty() && node.ctx.take_reports().is_empty());
    }
    cluster.start_serving();
    assert_eq!(cluster.create("t1"), (0, 1));
}

#[test]
fn a_chunk_waits_for_a_free_section() {
    let file = expected_file(2, vec![1], &tables(&[("t1", 0, 1)]));
    let mut cluster = Cluster::booted(vec![Some(file.clone()), None], false);
    let pool = cluster.node(1).ctx.pool();
    let mut held = Vec::new();
    while let Some(section) = pool.alloc(file.len()) {
        held.push(section);
    }
    let master = cluster.node(1);
    master.phase(phases::RESTORE_SCHEMA);
    let me = dict_ref(1);
    let retry = master.ctx.sent.remove(0);
    assert_eq!(retry.delay_ms, Some(SYNC_RETRY_DELAY_MS));
    assert_eq!(
        format!("{:?}", retry.envelope),
        format!(
            "{:?}",
            Envelope {
                from: me,
                to: me,
                signal: ContinueB { job: 2 }.into()
            }
        )
    );
    assert!(
        master
            .ctx
            .sent
            .iter()
            .all(|sent| !matches!(sent.envelope.signal, Signal::SchemaSyncReq(_))),
        "no chunk without a section"
    );
    drop(held);
    deliver(&mut master.dict, &mut master.ctx, me, ContinueB { job: 2 });
    cluster.local(0);
    let [Envelope {
        to,
        signal: Signal::SchemaSyncReq(_),
        ..
    }] = &cluster.network[..]
    else {
        panic!("the chunk, sent now: {:?}", cluster.network);
    };
    assert_eq!(*to, dict_ref(2));
    cluster.restore_schema();
    assert_eq!(cluster.node(2).disk.schema_file(), &file[..]);
}

#[test]
#[should_panic(
    expected = "fatal: dict 2:dict#0: the schema sent by the master 1:dict#0 is unusable at \
                offset 12: checksum mismatch"
)]
fn a_damaged_schema_from_the_master_stops_the_node() {
    let file = expected_file(2, vec![1], &tables(&[("t1", 0, 1)]));
    let mut cluster = Cluster::booted(vec![Some(file), None], false);
    cluster.node(1).phase(phases::RESTORE_SCHEMA);
    cluster.local(0);
    let Some(Signal::SchemaSyncReq(request)) = cluster.network.get_mut(0).map(|e| &mut e.signal)
    else {
        panic!("the master's chunk");
    };
    request.data.as_mut_slice()[100] ^= 0x10;
    cluster.carry();
    cluster.node(2).phase(phases::RESTORE_SCHEMA);
}

#[test]
#[should_panic(
    expected = "fatal: dict 2:dict#0: the schema sent by the master 1:dict#0 is damaged: a chunk \
                at offset 5 of a schema of 20 bytes follows 5 bytes of a schema of 10 bytes"
)]
fn a_transfer_out_of_order_stops_the_node() {
    let mut cluster = Cluster::booted(vec![None, None], false);
    let follower = cluster.node(2);
    let chunk = |total_bytes: u32, offset: u32| SchemaSyncReq {
        total_bytes,
        offset,
        data: follower.ctx.pool().copy_from(b"bytes").expect("room"),
    };
    let (first, second) = (chunk(10, 0), chunk(20, 5));
    deliver(&mut follower.dict, &mut follower.ctx, dict_ref(1), first);
    assert_eq!(
        follower.ctx.take_trace(),
        vec![line(
            dict_ref(2),
            dict_ref(1),
            SchemaSyncConf { received: 5 }
        )]
    );
    deliver(&mut follower.dict, &mut follower.ctx, dict_ref(1), second);
}

#[test]
#[should_panic(
    expected = "fatal: dict 2:dict#0: the schema sent by the master 1:dict#0 is damaged: its \
                first chunk starts at offset 5, not 0"
)]
fn a_transfer_that_does_not_start_at_0_stops_the_node() {
    let mut cluster = Cluster::booted(vec![None, None], false);
    let follower = cluster.node(2);
    let request = SchemaSyncReq {
        total_bytes: 10,
        offset: 5,
        data: follower.ctx.pool().copy_from(b"bytes").expect("room"),
    };
    deliver(&mut follower.dict, &mut follower.ctx, dict_ref(1), request);
}

#[test]
fn the_phase_conf_of_the_other_dict_follows_its_confirmation_to_the_master() {
    let mut cluster = Cluster::booted(vec![None, None], true);
    cluster.node(2).phase(phases::RESTORE_SCHEMA);
    let follower = cluster.node(2);
    deliver_no_schema(&mut follower.dict, &mut follower.ctx);
    assert_eq!(
        follower.ctx.take_trace(),
        vec![
            line(dict_ref(2), dict_ref(1), SchemaSyncConf { received: 0 }),
            line(
                dict_ref(2),
                BlockRef::new(NodeId(2), BlockKind::Membership, 0),
                StartPhaseConf {
                    phase: phases::RESTORE_SCHEMA
                }
            ),
        ]
    );
}
