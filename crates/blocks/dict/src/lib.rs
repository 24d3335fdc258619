//! dict: the schema block (NDB DBDICT).
//!
//! dict owns every table definition of the cluster, assigns table ids and
//! versions, and drives the schema operations that put a table on (or take
//! it off) every block: dih for its distribution, each tc for routing, each
//! ldm for storage. It counts the schema version clients compare against.
//!
//! Files by concern, as NDB's dbtux/:
//! - `lib.rs`: configuration, the block struct and its inbox (one `match`);
//! - `requests.rs`: API requests: checks, the FIFO of schema operations
//!   (one runs at a time), GET_TABINFO and LIST_TABLES;
//! - `create.rs`, `drop.rs`: the create and drop protocols;
//! - `alter.rs`: CREATE INDEX and DROP INDEX on a live table;
//! - `follower.rs`: a non-master dict learning tables from the master;
//! - `tables.rs`: the table registry;
//! - `persistence.rs`: the schema file, written after every create and
//!   drop before it is confirmed, and read at start;
//! - `restore.rs`: start phase RESTORE_SCHEMA, the agreed schema put back
//!   on this node's tcs and ldms;
//! - `schema_sync.rs`: the agreement of that phase, the master's schema
//!   sent to every other dict, which takes it in place of its own;
//! - `takeover.rs`: a new master dict finishing or undoing the schema
//!   change the failed master had under way.
//!
//! The president's dict is the master (membership announces the president
//! with PRESIDENT_REP before phase INITIALISE): it alone runs creates and drops, on the tcs and ldms of every
//! data node, then tells every other dict, so that each answers
//! GET_TABINFO and LIST_TABLES for every online table. The other dicts
//! refuse creates and drops with `NotMaster` (temporary: the client retries
//! at the president).
//!
//! Every dict keeps the schema in its own schema file, so a restart of the
//! whole cluster finds the tables again (docs/schema-file-format.md); at
//! that restart the master's file wins, as in NDB.

mod alter;
#[cfg(test)]
mod alter_tests;
mod create;
mod drop;
mod follower;
mod node_restart;
mod persistence;
mod requests;
mod restore;
mod schema_sync;
mod tables;
mod takeover;

#[cfg(test)]
mod cluster_tests;
#[cfg(test)]
mod persistence_tests;
#[cfg(test)]
mod robustness_tests;
#[cfg(test)]
mod schema_sync_tests;
#[cfg(test)]
mod tests;

pub use drop::DROP_RETRY_DELAY_MS;
pub use persistence::{FILE_RETRY_DELAY_MS, SCHEMA_FILE, SCHEMA_FILE_TEMPORARY};
pub use requests::QUEUE_CAPACITY;
pub use schema_sync::SYNC_RETRY_DELAY_MS;

use kernel::answers::Answers;
use kernel::node_failures::NodeFailures;
use kernel::{Context, Report};
use persistence::{SchemaFile, StoredSchema, FILE_RETRY_JOB};
use requests::{Operation, QueuedRequest};
use restore::Restore;
use schema_sync::{Incoming, Outgoing, SYNC_RETRY_JOB};
use signal::signals::{ContinueB, StartPhaseConf};
use signal::{codec, phases, BlockKind, BlockRef, Envelope, NodeId, NodeSet, Signal};
use std::collections::{HashSet, VecDeque};
use tables::Tables;

/// The start phase from which dict takes schema requests (membership's
/// start module documents every phase).
pub const SCHEMA_PHASE: u8 = signal::phases::SCHEMA;

/// Most partitions a table may ask for.
pub const MAX_PARTITIONS: u32 = 1024;

/// What dict needs to know of the node and the cluster.
#[derive(Clone, Debug)]
pub struct DictConfig {
    /// This block's address (node id, `BlockKind::Dict`, instance 0).
    pub address: BlockRef,
    /// tc instances on each data node.
    pub tc_instances: u16,
    /// ldm instances on each data node.
    pub ldm_instances: u16,
    /// The cluster's data nodes with their node group. Which is the
    /// president, whose dict is the master, membership announces.
    pub data_nodes: Vec<(NodeId, u32)>,
    /// Replicas of each partition (dih places them; kept so dict and dih
    /// share one shape of cluster config).
    pub replicas: u8,
    /// Redo log parts per node (dih assigns them; kept for the same reason).
    pub redo_log_parts: u32,
    /// True: keep the schema in memory only, never reading or writing the
    /// schema file (the cluster's `diskless` setting); every start is then
    /// an initial one. False (the default): write the schema file after
    /// every create and drop before confirming it, and read it at start.
    pub diskless: bool,
}

/// The dict block.
pub struct Dict {
    address: BlockRef,
    /// The master dict (the president's), once membership has announced
    /// the president (before phase RESTART_GCI).
    master: Option<BlockRef>,
    /// The data nodes.
    nodes: Vec<NodeId>,
    dih: BlockRef,
    /// Partitions of a table that does not ask for a count: one per ldm
    /// thread of every node group, so every thread of the cluster has work.
    default_partitions: u32,
    /// Highest start phase run.
    phase: u8,
    tables: Tables,
    /// Rises on every create and drop; clients compare against it.
    schema_version: u32,
    /// The schema operation running, if any.
    running: Option<Operation>,
    /// Schema operations waiting for the running one to finish, oldest first.
    queue: VecDeque<QueuedRequest>,
    /// Every tc of every data node and who answered the current round.
    tcs: Answers,
    /// Every ldm of every data node and who answered the current round.
    ldms: Answers,
    /// Every other data node's dict and who answered the current round.
    dicts: Answers,
    /// The agreed membership: nothing of a failed node is handled, and
    /// maps handed out leave its replicas out.
    node_failures: NodeFailures,
    /// Signals of other dicts that came before this node's membership
    /// announced the president: handled once it has.
    early: Vec<Envelope>,
    /// The schema file: the read or write under way, the changes waiting.
    schema_file: SchemaFile,
    /// What the schema file held at start, until RESTORE_SCHEMA uses it.
    stored_schema: Option<StoredSchema>,
    /// The schema file's bytes as read at start, until RESTORE_SCHEMA: the
    /// master sends them to the other dicts, which compare them with
    /// their own.
    stored_file: Option<Vec<u8>>,
    /// Phase RESTORE_SCHEMA, while it runs.
    restoring: Option<Restore>,
    /// The master, in RESTORE_SCHEMA: its schema on its way to the other
    /// dicts.
    outgoing: Option<Outgoing>,
    /// Another dict: the master's schema as it arrives.
    incoming: Incoming,
    /// The master's take-over of a failed master's role, while it runs.
    takeover: Option<takeover::Takeover>,
    /// tc and ldm instances on each data node.
    tc_instances: u16,
    ldm_instances: u16,
    /// At the master: starting members that took its schema
    /// (`node_restart.rs`).
    schema_sent_to: NodeSet,
}

impl Dict {
    /// A dict with no table, waiting for its start phases.
    pub fn new(config: DictConfig) -> Dict {
        assert_eq!(
            config.address.kind,
            BlockKind::Dict,
            "dict configured with a non-dict address {}",
            config.address
        );
        assert!(
            config.tc_instances > 0,
            "tables are routed by at least one tc"
        );
        assert!(
            config.ldm_instances > 0,
            "tables are stored by at least one ldm"
        );
        let node_groups = config
            .data_nodes
            .iter()
            .map(|&(_, group)| group)
            .collect::<HashSet<u32>>()
            .len() as u32;
        assert!(node_groups > 0, "a cluster needs at least one data node");
        let default_partitions = config.ldm_instances as u32 * node_groups;
        assert!(
            default_partitions <= MAX_PARTITIONS,
            "the default partition count {default_partitions} exceeds {MAX_PARTITIONS}"
        );
        let node = config.address.node;
        let mut nodes: Vec<NodeId> = config.data_nodes.iter().map(|&(node, _)| node).collect();
        nodes.sort_unstable();
        assert!(
            nodes.contains(&node),
            "dict {}: node {node} is not among the configured data nodes",
            config.address
        );
        let every = |kind: BlockKind, instances: u16| -> Vec<BlockRef> {
            nodes
                .iter()
                .flat_map(|&node| (0..instances).map(move |i| BlockRef::new(node, kind, i)))
                .collect()
        };
        let (tcs, ldms) = (
            every(BlockKind::Tc, config.tc_instances),
            every(BlockKind::Ldm, config.ldm_instances),
        );
        let dicts = nodes
            .iter()
            .filter(|&&other| other != node)
            .map(|&other| BlockRef::new(other, BlockKind::Dict, 0))
            .collect();
        Dict {
            address: config.address,
            master: None,
            nodes: nodes.clone(),
            dih: BlockRef::new(node, BlockKind::Dih, 0),
            default_partitions,
            phase: 0,
            tables: Tables::default(),
            schema_version: 1,
            running: None,
            queue: VecDeque::with_capacity(QUEUE_CAPACITY),
            tcs: Answers::new(tcs),
            ldms: Answers::new(ldms),
            dicts: Answers::new(dicts),
            node_failures: NodeFailures::default(),
            early: Vec::new(),
            schema_file: SchemaFile::new(config.diskless),
            stored_schema: None,
            stored_file: None,
            restoring: None,
            outgoing: None,
            incoming: Incoming::default(),
            takeover: None,
            tc_instances: config.tc_instances,
            ldm_instances: config.ldm_instances,
            schema_sent_to: NodeSet::EMPTY,
        }
    }

    /// True for the master dict (the president's), which runs creates and
    /// drops.
    pub fn is_master(&self) -> bool {
        self.master == Some(self.address)
    }

    /// The master dict. Membership announces the president before any
    /// phase that talks to another node, so asking earlier is a bug.
    fn master(&self) -> BlockRef {
        self.master.unwrap_or_else(|| {
            panic!(
                "dict {}: the master is asked for before membership announced the president",
                self.address
            )
        })
    }

    /// As membership would have it, for block tests: the lowest configured
    /// data node is the president.
    #[cfg(test)]
    pub(crate) fn announced(mut self) -> Dict {
        let membership = BlockRef::new(self.address.node, BlockKind::Membership, 0);
        let president = *self.nodes.iter().min().expect("a data node");
        self.president_rep(membership, president);
        self
    }

    /// PRESIDENT_REP from this node's membership: `president`'s dict is
    /// the master, which alone runs creates and drops.
    fn president_rep(&mut self, from: BlockRef, president: NodeId) {
        assert!(
            from.node == self.address.node && from.kind == BlockKind::Membership,
            "dict {}: PresidentRep from {from}: only this node's membership announces it",
            self.address
        );
        let master = BlockRef::new(president, BlockKind::Dict, 0);
        match self.master {
            Some(known) if known == master => {}
            Some(known) => panic!(
                "dict {}: PRESIDENT_REP moved the president from {} to {president}: \
                 membership announces it once, at formation; a later one comes with \
                 NODE_FAILREP",
                self.address, known.node
            ),
            None => {
                assert!(
                    self.nodes.contains(&president),
                    "dict {}: president {president} is not a configured data node",
                    self.address
                );
                self.master = Some(master);
            }
        }
    }

    /// The schema version: 1 at start, +1 on every create and drop (the
    /// same on every dict once the change is done).
    pub fn schema_version(&self) -> u32 {
        self.schema_version
    }

    /// (id, version) of every online table (what GET_TABINFO finds), in
    /// id order: a take-over's answer, and what the simulator compares.
    pub fn table_versions(&self) -> Vec<(u32, u32, u32)> {
        let online = self.tables.stored();
        online
            .filter(|entry| entry.state == tables::TableState::Online)
            .map(|entry| {
                let definition = &entry.definition;
                (definition.id, definition.version, definition.revision)
            })
            .collect()
    }

    /// (hidden table id, base table id) of every unique index of the
    /// online tables, for the simulator's schema agreement.
    pub fn hidden_tables(&self) -> Vec<(u32, u32)> {
        let online = self.tables.stored();
        online
            .filter(|entry| entry.state == tables::TableState::Online)
            .flat_map(|entry| {
                let definition = &entry.definition;
                let hidden = definition.unique_indexes().filter_map(|index| index.unique);
                hidden.map(|unique| (unique.table_id, definition.id))
            })
            .collect()
    }

    /// Whether a take-over of the master role is under way.
    pub fn is_taking_over(&self) -> bool {
        self.takeover.is_some()
    }

    /// A start phase: dict reads its schema file in INITIALISE and, in
    /// RESTORE_SCHEMA, agrees with the other dicts on the master's schema
    /// and puts its tables back; each confirms when done. Other phases are
    /// confirmed at once.
    fn start_phase(&mut self, from: BlockRef, phase: u8, ctx: &mut dyn Context) {
        self.phase = self.phase.max(phase);
        match phase {
            phases::INITIALISE => self.read_schema_file(from, ctx),
            phases::RESTORE_SCHEMA => self.restore_schema(from, ctx),
            _ => kernel::send(ctx, self.address, from, StartPhaseConf { phase }),
        }
    }

    /// The schema version after the next create or drop.
    fn next_schema_version(&self) -> u32 {
        self.schema_version
            .checked_add(1)
            .expect("schema version exhausted (2^32 schema changes)")
    }

    /// A create or drop finished.
    fn bump_schema_version(&mut self, ctx: &mut dyn Context) {
        self.set_schema_version(self.next_schema_version(), ctx);
    }

    fn set_schema_version(&mut self, version: u32, ctx: &mut dyn Context) {
        assert!(
            version > self.schema_version,
            "dict {}: schema version {version} after {}",
            self.address,
            self.schema_version
        );
        self.schema_version = version;
        ctx.report(Report::SchemaVersion(version));
    }
}

impl kernel::Block for Dict {
    fn address(&self) -> BlockRef {
        self.address
    }

    fn handle(&mut self, envelope: Envelope, ctx: &mut dyn Context) {
        let from = envelope.from;
        if self.node_failures.refuses(from) {
            return;
        }
        if self.master.is_none() && from.kind == BlockKind::Dict && from.node != self.address.node {
            self.early.push(envelope);
            return;
        }
        match envelope.signal {
            // From API nodes: never panic.
            Signal::CreateTabReq(request) => self.create_table_request(from, request, ctx),
            Signal::DropTabReq(request) => self.drop_table_request(from, request, ctx),
            Signal::CreateIndexReq(request) => self.create_index_request(from, request, ctx),
            Signal::DropIndexReq(request) => self.drop_index_request(from, request, ctx),
            Signal::GetTabInfoReq(request) => self.get_table_info(from, request, ctx),
            Signal::ListTablesReq(request) => self.list_tables(from, request, ctx),
            // From dih, and from the tcs, ldms and dicts of every node.
            Signal::DiAddTabConf(conf) => self.distribution_conf(from, conf, ctx),
            Signal::AddTabConf(conf) if self.restoring.is_some() => {
                self.restored_table_added(from, conf.table_id, ctx)
            }
            Signal::AddTabConf(conf) if self.is_taking_over() => {
                self.takeover_answer(from, conf.table_id, false, ctx)
            }
            Signal::AddTabConf(conf) => self.add_table_conf(from, conf.table_id, ctx),
            Signal::DropTabRep(report) if self.is_taking_over() => {
                self.takeover_answer(from, report.table_id, report.busy, ctx)
            }
            Signal::DropTabRep(report) => self.drop_table_report(from, report, ctx),
            Signal::AlterTabRep(report) if self.is_taking_over() => {
                self.takeover_aligned(from, report.table_id, report.revision, ctx)
            }
            Signal::AlterTabRep(report) => self.alter_report(from, report, ctx),
            Signal::AlterTabRef(refusal) if self.is_taking_over() => {
                self.takeover_aligned(from, refusal.table_id, refusal.revision, ctx)
            }
            Signal::AlterTabRef(refusal) => self.alter_refused(from, refusal, ctx),
            Signal::BuildUniqueConf(conf) => self.unique_index_built(conf, ctx),
            Signal::BuildUniqueRef(refusal) => self.unique_index_refused(refusal, ctx),
            Signal::DictTakeoverConf(conf) => self.takeover_conf(from, conf, ctx),
            // From the master dict (at the others; at a master taking
            // over, from the other dicts).
            Signal::DictAddTabReq(request) => self.takeover_offered(from, request, ctx),
            Signal::DictAlterTabReq(request) => self.takeover_offered_revision(from, request, ctx),
            Signal::DropTabOrd(order) => self.table_dropped(from, order.table_id, ctx),
            Signal::DictTakeoverReq(request) => self.takeover_request(from, request, ctx),
            Signal::DictTakeoverDoneOrd(order) => {
                self.takeover_done(from, order.schema_version, ctx)
            }
            Signal::SchemaSyncReq(request) => self.schema_sync_req(from, request, ctx),
            // From the other dicts (at the master).
            Signal::SchemaSyncConf(conf) => self.schema_sync_conf(from, conf, ctx),
            Signal::StartPhaseReq(request) => self.start_phase(from, request.phase, ctx),
            Signal::PresidentRep(report) => {
                self.president_rep(from, report.president);
                for early in std::mem::take(&mut self.early) {
                    self.handle(early, ctx);
                }
            }
            Signal::ApiFailRep(report) => self.api_failed(report.node),
            Signal::NodeFailRep(report) => self.node_failed(from, report, ctx),
            Signal::NodeFailCompleteRep(report) => {
                self.node_failures.complete(report.membership_id);
                self.takeover_query(ctx);
            }
            // From this node's file service, and from dict itself.
            Signal::FsConf(conf) => self.file_answer(from, conf, ctx),
            Signal::ContinueB(ContinueB {
                job: FILE_RETRY_JOB,
            }) if from == self.address => self.retry_file_request(ctx),
            Signal::ContinueB(ContinueB {
                job: SYNC_RETRY_JOB,
            }) if from == self.address => self.retry_schema_chunks(ctx),
            Signal::ContinueB(ContinueB {
                job: takeover::TAKEOVER_RETRY_JOB,
            }) if from == self.address => self.takeover_query(ctx),
            other if codec::is_api_request(other.number()) => {
                if let Some(reply) = other.refusal() {
                    kernel::send(ctx, self.address, from, reply);
                }
            }
            other => panic!(
                "dict {}: unexpected signal {} from {from}",
                self.address,
                other.name()
            ),
        }
    }
}
