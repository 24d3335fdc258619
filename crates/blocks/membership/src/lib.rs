//! membership: start phases, cluster formation and API registration (NDB
//! QMGR+NDBCNTR).
//!
//! Membership brings the node's blocks up in order (`start.rs` documents the
//! phases), forms the cluster with the other data nodes between the first
//! and the second phase (`formation.rs`), and answers API nodes
//! registering, telling them whether the node serves yet and how many tcs
//! it has. Once the cluster is formed it sends and watches heartbeats in
//! the ring of data nodes and suspects a node that misses too many
//! (`heartbeat.rs`), checks with the other members whether they still
//! hear it (`connectivity.rs`), takes a node whose heartbeats or link failed for
//! failed and agrees the new membership with the other survivors through
//! the president (`failure.rs`), judging by the survival rule
//! (`survival.rs`) whether its side may continue; a node declared failed,
//! or on a side that may not continue, shuts down. Each agreed change goes
//! to every block of the node, and once every member's blocks handled
//! it, they hear that it is complete (`handling.rs`). The ldms serve
//! reads only under the read lease membership grants them (`lease.rs`).
//! A side of exactly
//! half asks the arbitrator before it continues (`failure.rs`,
//! docs/design/failures.md §4).
//!
//! This file holds the configuration, the block struct and its inbox (one
//! `match` naming every signal membership takes).

mod connectivity;
mod failure;
mod formation;
mod handling;
mod heartbeat;
mod join;
mod lease;
pub mod start;
mod stop;
mod survival;

#[cfg(test)]
mod connectivity_tests;
#[cfg(test)]
mod failure_tests;
#[cfg(test)]
mod tests;

pub use failure::ArbitrationSettings;
use failure::Failures;
use formation::Formation;
use handling::Handling;
use heartbeat::Heartbeats;
use kernel::answers::Answers;
use kernel::{Context, Report};
use signal::signals::{
    ApiHeartbeatConf, ApiRegConf, ApiRegRef, StartPhaseReq, API_PROTOCOL_VERSION,
};
use signal::{codec, BlockKind, BlockRef, Envelope, ErrorCode, NodeId, NodeSet, Signal};
use start::{StartState, PHASES};

/// What membership needs to know of the node.
#[derive(Clone, Debug)]
pub struct MembershipConfig {
    /// This block's address (node id, `BlockKind::Membership`, instance 0).
    pub address: BlockRef,
    /// tc instances on this node.
    pub tc_instances: u16,
    /// ldm instances on this node.
    pub ldm_instances: u16,
    /// Every data node of the cluster, this one included, with its node
    /// group. The lowest id is the first president (all nodes start
    /// together; after a failure, the lowest id left).
    pub data_nodes: Vec<(NodeId, u32)>,
    /// How often a heartbeat goes to the next data node of the ring.
    pub heartbeat_interval_ms: u64,
    /// Heartbeats a watched node may miss in a row before it is suspected.
    pub heartbeat_missed: u32,
    /// Heartbeat intervals of silence after which an API node and this
    /// data node take each other for gone (told to API nodes at
    /// registration).
    pub api_heartbeat_missed: u16,
    /// Whether a side of exactly half may ask an arbitrator, and how long
    /// it waits for the answer.
    pub arbitration: ArbitrationSettings,
    /// The cluster runs without this node (mgmd said so): it asks to
    /// join by a node restart instead of forming a cluster
    /// (docs/design/0018-node-restart.md).
    pub joining: bool,
}

/// The membership block.
pub struct Membership {
    address: BlockRef,
    tc_instances: u16,
    state: StartState,
    formation: Formation,
    heartbeats: Heartbeats,
    /// Suspicions being checked, and cuts reported to the president.
    connectivity: connectivity::Connectivity,
    failures: Failures,
    arbitration: ArbitrationSettings,
    /// The blocks' handling of each agreed change.
    handling: Handling,
    /// ldm instances on this node (each hears of the read lease).
    ldm_instances: u16,
    /// The read lease the ldms were told last.
    lease_published: Option<u64>,
    /// API nodes registered with this node (each hears of agreed node
    /// failures, API_NODE_FAILREP), until their connection ends.
    api_nodes: std::collections::BTreeSet<BlockRef>,
    /// Told to API nodes at registration.
    api_heartbeat_missed: u16,
    /// Every block of the node that runs start phases, and who answered the
    /// current one.
    blocks: Answers,
    /// A graceful stop, once asked for (`stop`).
    stop: stop::Stop,
}

impl Membership {
    /// A membership waiting for the runtime's phase 0.
    pub fn new(config: MembershipConfig) -> Membership {
        assert_eq!(
            config.address.kind,
            BlockKind::Membership,
            "membership configured with a non-membership address {}",
            config.address
        );
        let node = config.address.node;
        let mut blocks = vec![
            BlockRef::new(node, BlockKind::Dict, 0),
            BlockRef::new(node, BlockKind::Dih, 0),
        ];
        blocks.extend((0..config.tc_instances).map(|i| BlockRef::new(node, BlockKind::Tc, i)));
        blocks.extend((0..config.ldm_instances).map(|i| BlockRef::new(node, BlockKind::Ldm, i)));
        let nodes: Vec<NodeId> = config.data_nodes.iter().map(|&(node, _)| node).collect();
        let formation = Formation::new(config.address.node, &nodes, config.joining);
        let all = NodeSet::of(nodes.iter().copied());
        let mut groups: Vec<(u32, NodeSet)> = Vec::new();
        for &(node, group) in &config.data_nodes {
            match groups.iter_mut().find(|(id, _)| *id == group) {
                Some((_, members)) => members.insert(node),
                None => groups.push((group, NodeSet::of([node]))),
            }
        }
        groups.sort_by_key(|&(id, _)| id);
        Membership {
            address: config.address,
            tc_instances: config.tc_instances,
            state: StartState::NotStarted,
            heartbeats: Heartbeats::new(
                config.address,
                all,
                config.heartbeat_interval_ms,
                config.heartbeat_missed,
            ),
            connectivity: connectivity::Connectivity::default(),
            failures: Failures::new(all, groups.into_iter().map(|(_, set)| set).collect()),
            formation,
            arbitration: config.arbitration,
            handling: Handling::new(),
            ldm_instances: config.ldm_instances,
            // An ldm serves reads without limit until told otherwise.
            lease_published: Some(u64::MAX),
            api_nodes: std::collections::BTreeSet::new(),
            api_heartbeat_missed: config.api_heartbeat_missed,
            blocks: Answers::new(blocks),
            stop: stop::Stop::default(),
        }
    }

    /// Where the start stands.
    pub fn state(&self) -> StartState {
        self.state
    }

    /// The president: the data node whose dih and dict are the masters
    /// (agreed with the membership: the first is the lowest id that is
    /// not stale, and it is kept while it lives).
    pub fn president(&self) -> NodeId {
        self.failures.president
    }

    /// Members of the agreed membership still in their node restart.
    pub fn starting(&self) -> NodeSet {
        self.failures.starting
    }

    /// At the president: the restarting node whose admission it is
    /// agreeing now, if any.
    pub fn joining(&self) -> Option<NodeId> {
        self.failures.joining
    }

    /// The agreed membership: its id (0 while the cluster forms) and members.
    pub fn membership(&self) -> (u32, NodeSet) {
        (self.failures.membership_id, self.failures.live)
    }

    /// The data nodes this node suspected of having failed (each missed
    /// too many heartbeats in a row), in order.
    pub fn suspected(&self) -> &[NodeId] {
        self.heartbeats.suspected()
    }

    /// Phase 0 from the runtime: run the first phase.
    fn begin(&mut self, from: BlockRef, phase: u8, ctx: &mut dyn Context) {
        assert!(
            from == self.address && phase == start::BEGIN,
            "membership {}: StartPhaseReq {{ phase: {phase} }} from {from}: only the runtime \
             begins a start, with phase {} from membership itself",
            self.address,
            start::BEGIN
        );
        assert_eq!(
            self.state,
            StartState::NotStarted,
            "membership {}: the node was asked to start twice",
            self.address
        );
        self.run_phase(0, ctx);
    }

    fn run_phase(&mut self, index: usize, ctx: &mut dyn Context) {
        self.state = StartState::Running { index };
        self.blocks.start_round();
        let phase = PHASES[index];
        if self.formation.joining() {
            // A node restart's phases are shown as they run (a system
            // restart's are logged by the blocks that do the work).
            ctx.report(Report::StartPhase {
                phase,
                node_restart: true,
            });
        }
        for &block in self.blocks.members() {
            kernel::send(ctx, self.address, block, StartPhaseReq { phase });
        }
    }

    fn phase_conf(&mut self, from: BlockRef, phase: u8, ctx: &mut dyn Context) {
        let StartState::Running { index } = self.state else {
            panic!(
                "membership {}: StartPhaseConf {{ phase: {phase} }} from {from} while no phase runs ({:?})",
                self.address, self.state
            );
        };
        assert_eq!(
            phase, PHASES[index],
            "StartPhaseConf from {from} answers another phase than the one running"
        );
        if !self.blocks.record(from, "StartPhaseConf") {
            return;
        }
        if PHASES[index] == start::INITIALISE {
            // The later phases talk to other nodes: form the cluster first.
            self.state = StartState::Forming;
            if !self.formation.all_connected() {
                self.arm_waiting_report(ctx);
            }
            self.register_when_connected(ctx);
        } else if index + 1 < PHASES.len() {
            self.run_phase(index + 1, ctx);
        } else if self.failures.starting.contains(self.address.node) {
            self.state = StartState::Admitted;
            ctx.report(Report::Log(
                "node restart: every phase ran; asking the president to end the start".to_string(),
            ));
            self.ask_to_finish(ctx);
        } else {
            self.state = StartState::Started;
            ctx.report(Report::NodeStarted);
        }
    }

    /// API registration: from the network, so it never panics.
    fn api_registration(&mut self, from: BlockRef, protocol_version: u16, ctx: &mut dyn Context) {
        if from.kind != BlockKind::Api {
            // Only API nodes register; there is no REF to tell anyone else.
            return;
        }
        if protocol_version != API_PROTOCOL_VERSION {
            let refusal = ApiRegRef {
                error: ErrorCode::BadRequest,
            };
            kernel::send(ctx, self.address, from, refusal);
            return;
        }
        let conf = ApiRegConf {
            // Before started, the client retries until it is.
            started: self.state == StartState::Started,
            tc_instances: self.tc_instances,
            heartbeat_interval_ms: u32::try_from(self.heartbeats.interval_ms()).unwrap_or(u32::MAX),
            api_heartbeat_missed: self.api_heartbeat_missed,
        };
        self.api_nodes.insert(from);
        kernel::send(ctx, self.address, from, conf);
    }
}

impl kernel::Block for Membership {
    fn address(&self) -> BlockRef {
        self.address
    }

    fn handle(&mut self, envelope: Envelope, ctx: &mut dyn Context) {
        let from = envelope.from;
        if self.state == StartState::ShutDown {
            // Nothing more in this incarnation (production exits; the
            // simulator stops delivering).
            return;
        }
        if let Signal::CmStaleRep(_) = envelope.signal {
            if from.kind == BlockKind::Membership && from.node != self.address.node {
                self.stale_node_leaves(from.node, ctx);
            }
            return;
        }
        if let Signal::CmRegReq(request) = envelope.signal {
            // From a node outside the membership, when it restarts.
            if from.kind == BlockKind::Membership {
                self.registration_request(from, request, ctx);
            }
            return;
        }
        if from.kind == BlockKind::Membership
            && from.node != self.address.node
            && !self.hears_from(from.node)
        {
            // From a node taken for failed: its links are cut, and what it
            // sent before is refused.
            return;
        }
        match envelope.signal {
            Signal::ApiRegReq(request) => {
                self.api_registration(from, request.protocol_version, ctx)
            }
            // The receive thread answers API heartbeats; one that reaches
            // membership (the simulator has no receive thread) is answered
            // the same way.
            Signal::ApiHeartbeatReq(request) if from.kind == BlockKind::Api => {
                let conf = ApiHeartbeatConf {
                    count: request.count,
                };
                kernel::send(ctx, self.address, from, conf);
            }
            Signal::StartPhaseReq(request) => self.begin(from, request.phase, ctx),
            Signal::StartPhaseConf(conf) => self.phase_conf(from, conf.phase, ctx),
            Signal::NodeConnectedRep(report) => self.node_connected(report, ctx),
            Signal::NodeLinkFailedRep(report) => {
                self.link_failed(report.node, report.incarnation, ctx)
            }
            Signal::CmRegConf(conf) => self.cluster_formed(from, conf, ctx),
            Signal::CmRegRef(refusal) => self.join_refused(from, refusal.reason, ctx),
            Signal::CmNodeStartedReq(request) => self.started_request(from, request.node, ctx),
            Signal::SystemFileRep(report) if from.node == self.address.node => self
                .formation
                .system_file_read(report.complete_gci, report.members),
            Signal::CmHeartbeat(heartbeat) => self.heartbeat(from, heartbeat.sent_at_ms, ctx),
            Signal::CmHeartbeatAck(ack) => self.heartbeat_acked(from, ack.sent_at_ms, ctx),
            Signal::CmPingReq(request) => {
                self.ping_requested(from, request.check, request.suspect, ctx)
            }
            Signal::CmPingConf(conf) => {
                self.ping_answered(from, conf.check, conf.suspect, conf.hears, ctx)
            }
            Signal::CmLinkCutRep(report) => {
                self.cut_reported(from.node, report.suspect, report.withdraw, ctx)
            }
            Signal::CmLinkCutConf(conf) => self.cut_withdrawn(from, conf.suspect, ctx),
            Signal::CmFailRep(report) => self.fail_report(from, report.failed, ctx),
            Signal::CmFailPrepareReq(request) => self.prepare(
                from,
                request.membership_id,
                request.live,
                request.starting,
                ctx,
            ),
            Signal::CmFailPrepareConf(conf) => {
                self.prepared(from, conf.membership_id, conf.failed, ctx)
            }
            Signal::CmFailPrepareRef(refusal) => {
                self.prepare_refused(refusal.membership_id, refusal.highest, ctx)
            }
            Signal::CmFailCommitOrd(order) => self.commit(
                from,
                order.membership_id,
                order.live,
                order.starting,
                order.returned,
                ctx,
            ),
            Signal::NodeFailConf(conf) => self.block_handled(from, conf.membership_id, ctx),
            Signal::CmNodeFailHandledRep(report) => {
                self.member_handled(from.node, report.membership_id, ctx)
            }
            Signal::CmShutdownOrd(order) => {
                self.shutdown_ordered(from, order.membership_id, order.live, ctx)
            }
            Signal::ApiFailRep(report) if from.node == self.address.node => {
                self.api_nodes.retain(|api| api.node != report.node);
            }
            Signal::NodeStopReq(request)
                if from.node == self.address.node && from.kind == BlockKind::Io =>
            {
                self.stop_requested(request.limit_ms, ctx)
            }
            Signal::TcDrainConf(_)
                if from.node == self.address.node && from.kind == BlockKind::Tc =>
            {
                self.tc_drained(from.instance, ctx)
            }
            Signal::ArbitrationConf(conf) if from.node == self.address.node => {
                self.arbitration_answered(conf, ctx)
            }
            Signal::ContinueB(continue_b) if from == self.address => match continue_b.job {
                formation::job::WAITING_REPORT => self.waiting_report(ctx),
                formation::job::ARBITRATION_TIMER => self.arbitration_timer(ctx),
                formation::job::JOIN_RETRY => self.ask_to_join_again(ctx),
                formation::job::STOP_LIMIT => self.stop_limit(ctx),
                formation::job::HEARTBEAT => {
                    for (node, silent_ms) in self.heartbeats.tick(ctx) {
                        self.suspect(node, silent_ms, ctx);
                    }
                    self.connectivity_tick(ctx);
                }
                other => panic!("membership {}: unknown ContinueB job {other}", self.address),
            },
            other if codec::is_api_request(other.number()) => {
                if let Some(reply) = other.refusal() {
                    kernel::send(ctx, self.address, from, reply);
                }
            }
            other => panic!(
                "membership {}: unexpected signal {} from {from}",
                self.address,
                other.name()
            ),
        }
    }
}
