//! dih: the distribution and global checkpoint block (NDB DBDIH).
//!
//! dih owns two things the rest of the node depends on:
//! - the distribution of each table (`distribution.rs`): which node group,
//!   replicas, ldm instance and redo log part hold each partition, computed
//!   once when dict creates the table (docs/design/data-and-routing.md §6);
//! - the GCI switch (`gcp.rs`): the two-phase protocol that moves every tc
//!   to the next global checkpoint id, so that no transaction gets a smaller
//!   GCI than one it depends on (docs/design/durability.md §1);
//! - durability (`durability.rs`): the master's rounds that make a closed
//!   global checkpoint durable (tcs flushed, ldm markers fsynced, every
//!   system file updated), and this node's system file (`system_file.rs`);
//! - the start (`restart.rs`): reading the system file, agreeing on the
//!   restored GCI, having the ldms restore, choosing the first GCI;
//! - master take-over (`master_takeover.rs`): when the master fails, the
//!   next president's dih learns where the switch and durability stood
//!   and carries on.
//!
//! This file holds the configuration, the block struct and its inbox: one
//! `match` naming every signal dih takes, as NDB's `addRecSignal` list does.
//!
//! The president's dih is the master (membership announces the president
//! with PRESIDENT_REP before phase INITIALISE): it alone switches GCIs, over every tc of every data node, and tells the
//! other dihs of each completed switch (`GcpCompleteRep`), which report the
//! GCI. Every dih computes the same partition maps from the same config;
//! only the master dict asks, so one dih decides each table's map.

mod distribution;
mod durability;
mod gcp;
mod master_takeover;
mod node_restart;
mod restart;
mod system_file;

#[cfg(test)]
mod durability_tests;
#[cfg(test)]
mod restart_tests;
#[cfg(test)]
mod tests;

pub use distribution::redo_parts_of_ldm;
pub use gcp::{job, GCP_START_PHASE, INITIAL_GCI};

use distribution::Distribution;
use gcp::GlobalCheckpoint;
use kernel::answers::Answers;
use kernel::node_failures::NodeFailures;
use kernel::Context;
use signal::phases;
use signal::schema::TableDef;
use signal::signals::{DiAddTabConf, FsConf, NodeFailRep, StartPhaseConf};
use signal::{codec, BlockKind, BlockRef, Envelope, Gci, NodeId, Signal};
use std::sync::Arc;

/// What dih needs to know of the node and the cluster.
#[derive(Clone, Debug)]
pub struct DihConfig {
    /// This block's address (node id, `BlockKind::Dih`, instance 0).
    pub address: BlockRef,
    /// tc instances on each data node (`BlockRef::new(node, Tc,
    /// 0..tc_instances)`); the master switches the GCI of all of them.
    pub tc_instances: u16,
    /// ldm instances on each data node.
    pub ldm_instances: u16,
    /// The cluster's data nodes with their node group, in config order
    /// (that order decides each group's replica order). Which of them is
    /// the president, whose dih is the master, membership announces
    /// (PRESIDENT_REP) when the cluster forms.
    pub data_nodes: Vec<(NodeId, u32)>,
    /// Replicas of each partition: the number of nodes in every node group.
    pub replicas: u8,
    /// Redo log parts per node; partitions are spread over them.
    pub redo_log_parts: u32,
    /// Time between GCI switches (NDB TimeBetweenEpochs).
    pub epoch_interval_ms: u64,
    /// Time after which a switch advances the high part, the unit made
    /// durable (NDB TimeBetweenGlobalCheckpoints).
    pub gcp_interval_ms: u64,
    /// No system file (config `diskless`): nothing is read or written, and
    /// every start is an initial start.
    pub diskless: bool,
}

/// The dih block.
pub struct Dih {
    address: BlockRef,
    /// The master dih (the president's), once membership has announced
    /// the president (before phase RESTART_GCI).
    master: Option<BlockRef>,
    /// The data nodes, ascending.
    nodes: Vec<NodeId>,
    tc_instances: u16,
    ldm_instances: u16,
    /// Every other data node's dih, ascending (the master tells them of
    /// each switch).
    other_dihs: Vec<BlockRef>,
    distribution: Distribution,
    gcp: GlobalCheckpoint,
    durability: durability::Durability,
    restart: restart::Restart,
    system: system_file::SystemFileState,
    diskless: bool,
    /// The master whose CopyGciReq is being written, and its GCI.
    /// Its complete and started GCIs.
    copy_requester: Option<(BlockRef, Gci, Gci)>,
    /// A new master's CopyGciReq that came while the failed master's was
    /// being written (master take-over): written next.
    queued_copy: Option<(BlockRef, signal::signals::CopyGciReq)>,
    /// The highest GCI this node's system file records as started (what
    /// a new master asks every dih: master_takeover.rs).
    recorded_started: Gci,
    /// The system file update of phase RESTORE_DATA is in flight.
    restart_write_pending: bool,
    /// The agreed membership: nothing of a failed node is handled.
    node_failures: NodeFailures,
    /// Signals of other dihs that came before this node's membership
    /// announced the president (the cluster formed, and another node
    /// went on to its next phase first): handled once it has.
    early: Vec<Envelope>,
    /// At the master: a restarting node being taken into the GCI
    /// protocol (`node_restart.rs`).
    inclusion: Option<node_restart::Inclusion>,
    /// At a restarting node: phase COPY_DATA's requester while the system
    /// file is voided.
    void_requester: Option<BlockRef>,
    /// At a restarting node, from phase RECORD_GCI: the requester until
    /// the system file records a GCI, and the first GCI it may.
    record_from: Option<(Option<BlockRef>, Gci)>,
}

impl Dih {
    /// A dih that has not started: it answers start phases and, from phase
    /// 3 on, switches GCIs.
    pub fn new(config: DihConfig) -> Dih {
        assert_eq!(
            config.address.kind,
            BlockKind::Dih,
            "dih configured with a non-dih address {}",
            config.address
        );
        assert!(
            config.tc_instances > 0,
            "the GCI switch needs at least one tc to move"
        );
        let mut nodes: Vec<NodeId> = config.data_nodes.iter().map(|&(node, _)| node).collect();
        nodes.sort_unstable();
        let me = config.address.node;
        assert!(
            nodes.contains(&me),
            "dih {}: node {me} is not among the configured data nodes",
            config.address
        );
        let other_dihs = nodes
            .iter()
            .filter(|&&node| node != me)
            .map(|&node| BlockRef::new(node, BlockKind::Dih, 0))
            .collect();
        let all_dihs: Vec<BlockRef> = nodes
            .iter()
            .map(|&node| BlockRef::new(node, BlockKind::Dih, 0))
            .collect();
        Dih {
            address: config.address,
            master: None,
            nodes,
            tc_instances: config.tc_instances,
            ldm_instances: config.ldm_instances,
            other_dihs,
            distribution: Distribution::new(
                &config.data_nodes,
                config.replicas,
                config.ldm_instances,
                config.redo_log_parts,
            ),
            // The rounds' members are known once the president is
            // (`president_rep`): only the master's dih runs rounds.
            gcp: GlobalCheckpoint::new(
                Answers::new(Vec::new()),
                config.epoch_interval_ms,
                config.gcp_interval_ms,
            ),
            durability: durability::Durability::new(Vec::new(), Vec::new(), Vec::new()),
            restart: restart::Restart::new(me, config.ldm_instances, all_dihs),
            system: system_file::SystemFileState::new(me.0),
            diskless: config.diskless,
            copy_requester: None,
            queued_copy: None,
            recorded_started: Gci(0),
            restart_write_pending: false,
            node_failures: NodeFailures::default(),
            early: Vec::new(),
            inclusion: None,
            void_requester: None,
            record_from: None,
        }
    }

    /// True for the master dih (the president's), which switches GCIs.
    pub fn is_master(&self) -> bool {
        self.master == Some(self.address)
    }

    /// The master dih. Membership announces the president before any
    /// phase that talks to another node, so asking earlier is a bug.
    fn master(&self) -> BlockRef {
        self.master.unwrap_or_else(|| {
            panic!(
                "dih {}: the master is asked for before membership announced the president",
                self.address
            )
        })
    }

    /// As membership would have it, for block tests: the lowest configured
    /// data node is the president.
    #[cfg(test)]
    pub(crate) fn announced(mut self) -> Dih {
        let membership = BlockRef::new(self.address.node, BlockKind::Membership, 0);
        self.president_rep(membership, self.nodes[0]);
        self
    }

    /// PRESIDENT_REP from this node's membership: `president`'s dih is the
    /// master. The master's rounds cover every tc, ldm and dih of the
    /// cluster; the other dihs take part in none.
    fn president_rep(&mut self, from: BlockRef, president: NodeId) {
        assert!(
            from.node == self.address.node && from.kind == BlockKind::Membership,
            "dih {}: PresidentRep from {from}: only this node's membership announces it",
            self.address
        );
        let master = BlockRef::new(president, BlockKind::Dih, 0);
        match self.master {
            Some(known) if known == master => return,
            Some(known) => panic!(
                "dih {}: PRESIDENT_REP moved the president from {} to {president}: membership \
                 announces it once, at formation; a later one comes with NODE_FAILREP",
                self.address, known.node
            ),
            None => {}
        }
        assert!(
            self.nodes.contains(&president),
            "dih {}: president {president} is not a configured data node",
            self.address
        );
        self.master = Some(master);
        if !self.is_master() {
            return;
        }
        let nodes = self.nodes.iter().copied();
        let tcs = blocks_on(nodes.clone(), BlockKind::Tc, self.tc_instances);
        let ldms = blocks_on(nodes.clone(), BlockKind::Ldm, self.ldm_instances);
        let dihs = blocks_on(nodes, BlockKind::Dih, 1);
        self.gcp.tcs = Answers::new(tcs.clone());
        self.durability = durability::Durability::new(tcs, ldms, dihs);
        self.restart.dihs.start_round();
    }

    /// The GCI every tc of the cluster has switched to, as far as this dih
    /// knows (0 until the initial GCI is on every tc).
    pub fn latest_gci(&self) -> Gci {
        self.gcp.latest
    }

    /// GCI switches completed since start (the initial GCI is not one); at
    /// a non-master dih, those it heard of.
    pub fn switches(&self) -> u64 {
        self.gcp.switches
    }

    /// The latest GCI recorded complete in the system files (as far as
    /// this dih knows).
    pub fn complete_gci(&self) -> Gci {
        self.durability.complete
    }

    fn start_phase(&mut self, from: BlockRef, phase: u8, ctx: &mut dyn Context) {
        match phase {
            phases::INITIALISE => self.initialise(from, ctx),
            phases::RESTART_GCI if self.is_node_restart() => self.own_restart_gci(from, ctx),
            phases::RESTART_GCI => self.report_restart_gci(from, ctx),
            phases::RESTORE_DATA => self.restore_data(from, ctx),
            GCP_START_PHASE if self.is_node_restart() => self.ask_inclusion(from, ctx),
            phases::COPY_DATA if self.is_node_restart() => self.void_system_file(from, ctx),
            phases::RECORD_GCI if self.is_node_restart() => self.ask_recording(from, ctx),
            // The conf waits until every tc of the cluster holds its first
            // GCI: after the last phase the node serves, and tcs cannot
            // commit without one.
            GCP_START_PHASE => self.start_global_checkpoints(from, ctx),
            _ => kernel::send(ctx, self.address, from, StartPhaseConf { phase }),
        }
    }

    /// An io answer: the system file's read or a step of an update.
    fn fs_answer(&mut self, conf: FsConf, ctx: &mut dyn Context) {
        if conf.token == system_file::token::READ {
            self.system.read_answered(conf.result, self.address, ctx);
            return self.system_file_read(ctx);
        }
        if !self
            .system
            .update_answered(conf.token, conf.result, self.address, ctx)
        {
            return;
        }
        if self.restart_write_pending {
            self.restart_write_pending = false;
            self.node_restored(ctx);
        } else if self.void_requester.is_some() {
            self.system_file_voided(ctx);
        } else {
            self.copy_written(ctx);
        }
    }

    /// NODE_FAILREP: the nodes of `report.failed` left the cluster. The
    /// master's rounds stop waiting for their blocks; GCIs are made
    /// durable only once their transactions are taken over. A failed
    /// master is succeeded by the new president's dih
    /// (`master_takeover.rs`).
    fn node_failed(&mut self, from: BlockRef, report: NodeFailRep, ctx: &mut dyn Context) {
        let failed = self.node_failures.install(self.address, from, &report, ctx);
        if failed.is_empty() {
            return;
        }
        self.other_dihs.retain(|dih| !failed.contains(dih.node));
        self.hold_for_takeover(report.membership_id);
        if self.is_master() {
            // A node that fails during the start is not waited for.
            self.restart_without(failed, ctx);
        }
        if self
            .master
            .is_some_and(|master| failed.contains(master.node))
        {
            // Starting members take no part in the GCI protocol until
            // their node restart includes them.
            let members = report.live.difference(report.starting);
            self.master_failed(members, report.president, ctx);
            if self.is_node_restart() && !matches!(self.gcp.state, gcp::SwitchState::NotStarted) {
                // A restarting node asks the new master to take it in
                // again (it left starting members out).
                self.send_inclusion_request(ctx);
            }
        }
        if self.is_master() {
            self.inclusion_without(failed);
            self.switch_without(failed, ctx);
            self.durability_without(failed, ctx);
            // A take-over waiting only for the failed nodes' answers.
            self.master_takeover_step(ctx);
        }
    }

    fn add_table(&mut self, from: BlockRef, table: &TableDef, ctx: &mut dyn Context) {
        assert_eq!(
            from.kind,
            BlockKind::Dict,
            "DiAddTabReq from {from}: only dict adds tables"
        );
        let map = self.distribution.partition_map(table);
        kernel::send(ctx, self.address, from, DiAddTabConf { map: Arc::new(map) });
    }
}

/// Instances `0..instances` of block `kind` on each of `nodes`.
pub(crate) fn blocks_on(
    nodes: impl Iterator<Item = NodeId>,
    kind: BlockKind,
    instances: u16,
) -> Vec<BlockRef> {
    nodes
        .flat_map(|node| (0..instances).map(move |instance| BlockRef::new(node, kind, instance)))
        .collect()
}

impl kernel::Block for Dih {
    fn address(&self) -> BlockRef {
        self.address
    }

    fn handle(&mut self, envelope: Envelope, ctx: &mut dyn Context) {
        let from = envelope.from;
        if self.node_failures.refuses(from) {
            return;
        }
        if self.master.is_none() && from.kind == BlockKind::Dih && from.node != self.address.node {
            self.early.push(envelope);
            return;
        }
        match envelope.signal {
            Signal::StartPhaseReq(request) => self.start_phase(from, request.phase, ctx),
            Signal::PresidentRep(report) => {
                self.president_rep(from, report.president);
                for early in std::mem::take(&mut self.early) {
                    self.handle(early, ctx);
                }
            }
            Signal::ContinueB(continue_b) => match continue_b.job {
                job::GCP_TIMER => self.gcp_timer(ctx),
                other => panic!(
                    "dih {}: unknown ContinueB job {other} from {from}",
                    self.address
                ),
            },
            Signal::GcpPrepareConf(conf) => self.gcp_prepare_conf(from, conf.new_gci, ctx),
            Signal::GcpCommitConf(conf) => self.gcp_commit_conf(from, conf.gci, ctx),
            Signal::GcpCompleteRep(report) => self.gcp_complete_rep(from, report.gci, ctx),
            Signal::GcpFlushConf(conf) => self.gcp_flush_conf(from, conf.gci, ctx),
            Signal::TakeoverCompleteRep(report) => self.takeover_complete(from, report, ctx),
            Signal::GcpSaveConf(conf) => self.gcp_save_conf(from, conf.gci, ctx),
            Signal::CopyGciReq(request) => self.copy_gci_req(from, request, ctx),
            Signal::CopyGciConf(conf) => self.copy_gci_conf(from, conf.complete_gci, ctx),
            Signal::RestartGciRep(report) => self.restart_gci_rep(from, report, ctx),
            Signal::RestartGciOrd(order) => self.restart_gci_ord(from, order, ctx),
            Signal::RestoreConf(conf) => {
                self.restore_conf(from, conf.highest_gci, conf.replayed, ctx)
            }
            Signal::RestoredRep(report) => self.restored_rep(from, report.highest_gci, ctx),
            Signal::IncludeNodeReq(request) => self.include_node_req(from, request, ctx),
            Signal::IncludeNodeConf(conf) => self.include_node_conf(from, conf.gci, ctx),
            Signal::FsConf(conf) => self.fs_answer(conf, ctx),
            Signal::DiAddTabReq(request) => self.add_table(from, &request.table, ctx),
            Signal::NodeFailRep(report) => self.node_failed(from, report, ctx),
            Signal::NodeFailCompleteRep(report) => {
                self.node_failures.complete(report.membership_id);
                self.start_master_takeover(ctx);
            }
            Signal::MasterGcpReq(request) => self.master_gcp_req(from, request, ctx),
            Signal::MasterGcpTcConf(conf) => self.master_gcp_tc_conf(from, conf, ctx),
            Signal::MasterGcpDihConf(conf) => self.master_gcp_dih_conf(from, conf, ctx),
            other if codec::is_api_request(other.number()) => {
                if let Some(reply) = other.refusal() {
                    kernel::send(ctx, self.address, from, reply);
                }
            }
            other => panic!(
                "dih {}: unexpected signal {} from {from}",
                self.address,
                other.name()
            ),
        }
    }
}
