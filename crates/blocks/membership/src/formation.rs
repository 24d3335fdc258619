//! Cluster formation (NDB QMGR's CM_REGREQ / CM_REGCONF, simplified for a
//! cluster whose data nodes all start together).
//!
//! ```text
//!  transport     membership (each node)              membership (lowest id)
//!   |-NodeConnectedRep->|  (any time, even before phase 0)     |
//!   |                   |  phase 1 done, every peer connected   |
//!   |                   |-- CmRegReq{node, complete GCI, ---->|  (it registers
//!   |                   |            members}                 |   too)
//!   |                   |<-- CmRegConf{president, stale, -----|  every node registered
//!   |                   |             restored GCI}           |
//!   |                   |  phases 2 and 3                       |
//! ```
//!
//! The lowest configured data node id forms the cluster. Each node
//! registers with what its system file records (dih reads it in phase 1
//! and tells membership, SYSTEM_FILE_REP); once every node has, the
//! forming node judges which are stale (`kernel::stale`: they failed
//! before the newest complete GCI was made durable, so their data is
//! older) and names the president: the lowest id that is not stale
//! (docs/design/0015-start-without-stale-nodes.md). Every node then
//! installs membership 1, the nodes that are not stale. A stale node
//! tells every node going on that it leaves (CM_STALE_REP), each cuts its
//! link once it installed membership 1 and heard that, and the stale node
//! shuts down, saying why, when every such link has broken. Leaving at
//! once could break a link before the forming node's conf crossed it (a
//! link is cut at once, ahead of signals still queued for it). The president's dih and dict are the masters:
//! membership announces it to them (PRESIDENT_REP) as the cluster forms,
//! before the phases that talk to other nodes (signals of other nodes'
//! dihs and dicts that arrive before it wait in those blocks). A node
//! registers only once it is connected to every other data node, so when
//! the forming node confirms, every node can reach every other: the
//! master dih may then switch GCIs on every tc and the master dict add
//! tables everywhere. A one-node cluster has no peer to wait for; it
//! still registers with itself, so one path serves all sizes.
//!
//! When a participant dies here: a link that breaks before the cluster
//! formed stops the start on the nodes that see it (every node must take
//! part; `failure.rs`). A stale node's links break because the others
//! cut them after installing membership 1 without it; one that dies
//! instead breaks its link too, so a stale node never waits forever for
//! a node that is gone.

use crate::start::{self, StartState, PHASES};
use crate::Membership;
use kernel::Context;
use signal::signals::{CmRegConf, CmRegReq, CmStaleRep, NodeConnectedRep, PresidentRep};
use signal::{BlockKind, BlockRef, Gci, NodeId, NodeSet};

/// What membership knows of the other data nodes.
pub(crate) struct Formation {
    /// The lowest configured id: it forms the cluster.
    forming: NodeId,
    /// What this node's system file records: its complete GCI and the
    /// members alive at it (dih's SYSTEM_FILE_REP, phase INITIALISE).
    system_file: (Gci, NodeSet),
    /// At the forming node: what each registered node's file records.
    reported: Vec<(NodeId, Gci, NodeSet)>,
    /// This node is stale: why it shuts down, once the links to these
    /// nodes (the ones going on) have broken.
    pub(crate) stale_exit: Option<(String, NodeSet)>,
    /// The stale nodes of the formed cluster (this node going on).
    stale: NodeSet,
    /// Stale nodes that said they leave (CM_STALE_REP), perhaps before
    /// this node heard the conf.
    leaving: NodeSet,
    /// Every data node, ascending: its incarnation once connected (this
    /// node counts as connected), and whether it registered (kept at the
    /// president only).
    nodes: Vec<NodeState>,
    /// This node sent its CmRegReq.
    registration_sent: bool,
    /// The cluster runs without this node: it asks to join by a node
    /// restart (`join.rs`) instead of forming a cluster.
    joining: bool,
    /// Joining: the nodes asked since the last retry.
    pub(crate) asked: NodeSet,
    /// Joining: a retry is scheduled.
    pub(crate) retry_armed: bool,
    /// Joining: the last refusal logged, so a repeated one is not.
    pub(crate) last_refusal: Option<u8>,
}

struct NodeState {
    node: NodeId,
    incarnation: Option<u32>,
    registered: bool,
}

impl Formation {
    /// `me` among `data_nodes` (config order, any): checked, since a node
    /// missing from its own cluster would wait for itself forever.
    pub(crate) fn new(me: NodeId, data_nodes: &[NodeId], joining: bool) -> Formation {
        let mut sorted = data_nodes.to_vec();
        sorted.sort_unstable();
        let count = sorted.len();
        sorted.dedup();
        assert_eq!(sorted.len(), count, "a data node is configured twice");
        assert!(
            sorted.contains(&me),
            "node {me} is not among the configured data nodes {data_nodes:?}"
        );
        Formation {
            forming: sorted[0],
            system_file: (Gci(0), NodeSet::EMPTY),
            reported: Vec::new(),
            stale_exit: None,
            stale: NodeSet::EMPTY,
            leaving: NodeSet::EMPTY,
            nodes: sorted
                .into_iter()
                .map(|node| NodeState {
                    node,
                    incarnation: (node == me).then_some(0),
                    registered: false,
                })
                .collect(),
            registration_sent: false,
            joining,
            asked: NodeSet::EMPTY,
            retry_armed: false,
            last_refusal: None,
        }
    }

    /// Whether this node joins a running cluster by a node restart.
    pub(crate) fn joining(&self) -> bool {
        self.joining
    }

    /// The data nodes connected to this one (itself included).
    pub(crate) fn connected(&self) -> NodeSet {
        NodeSet::of(
            self.nodes
                .iter()
                .filter(|state| state.incarnation.is_some())
                .map(|state| state.node),
        )
    }

    /// What this node's system file records: its complete GCI and the
    /// members alive at it.
    pub(crate) fn system_file_report(&self) -> (Gci, NodeSet) {
        self.system_file
    }

    /// dih read the system file: what it records goes with this node's
    /// registration.
    pub(crate) fn system_file_read(&mut self, complete_gci: Gci, members: NodeSet) {
        self.system_file = (complete_gci, members);
    }

    fn node_mut(&mut self, node: NodeId) -> Option<&mut NodeState> {
        self.nodes.iter_mut().find(|state| state.node == node)
    }

    pub(crate) fn all_connected(&self) -> bool {
        self.nodes.iter().all(|state| state.incarnation.is_some())
    }

    /// The data nodes not connected yet, as a bit set by node id.
    fn missing(&self) -> u128 {
        self.nodes
            .iter()
            .filter(|state| state.incarnation.is_none())
            .fold(0, |set, state| set | 1u128 << (state.node.0 % 128))
    }
}

/// How often a node that waits to form the cluster says which nodes it
/// waits for.
pub(crate) const WAITING_REPORT_MS: u64 = 5000;

/// membership's `ContinueB` jobs.
pub(crate) mod job {
    /// Time to say which data nodes the formation still waits for.
    pub const WAITING_REPORT: u32 = 1;
    /// Time for the next heartbeat (`heartbeat`).
    pub const HEARTBEAT: u32 = crate::heartbeat::JOB;
    /// Time to check whether the arbitrator is late (`failure`).
    pub const ARBITRATION_TIMER: u32 = 3;
    /// Time for a restarting node to ask to join again (`join`).
    pub const JOIN_RETRY: u32 = 4;
    /// A graceful stop's limit passed (`stop`).
    pub const STOP_LIMIT: u32 = 5;
}

impl Membership {
    fn membership_of(node: NodeId) -> BlockRef {
        BlockRef::new(node, BlockKind::Membership, 0)
    }

    /// The transport connected to a peer data node (possibly before the
    /// start began: it is remembered).
    pub(crate) fn node_connected(&mut self, report: NodeConnectedRep, ctx: &mut dyn Context) {
        let me = self.address.node;
        assert_ne!(
            report.node, me,
            "membership {}: NodeConnectedRep for this node itself",
            self.address
        );
        let formed = self.failures.membership_id > 0;
        let Some(state) = self.formation.node_mut(report.node) else {
            panic!(
                "membership {}: NodeConnectedRep for node {}, which is not a configured data node",
                self.address, report.node
            );
        };
        state.incarnation = Some(report.incarnation);
        if formed {
            // A node coming back asks to join (`join.rs`).
            return;
        }
        self.register_when_connected(ctx);
    }

    /// While forming: say which data nodes are not connected, and look
    /// again later (an operator who started only some nodes learns which
    /// are missing instead of watching a silent wait).
    pub(crate) fn waiting_report(&mut self, ctx: &mut dyn Context) {
        if self.state != StartState::Forming || self.formation.all_connected() {
            return;
        }
        ctx.report(kernel::Report::WaitingForNodes(self.formation.missing()));
        self.arm_waiting_report(ctx);
    }

    pub(crate) fn arm_waiting_report(&mut self, ctx: &mut dyn Context) {
        let envelope = signal::Envelope {
            from: self.address,
            to: self.address,
            signal: signal::signals::ContinueB {
                job: job::WAITING_REPORT,
            }
            .into(),
        };
        ctx.send_delayed(envelope, WAITING_REPORT_MS);
    }

    /// After phase 1, once every peer is connected: ask the president to
    /// let this node join.
    pub(crate) fn register_when_connected(&mut self, ctx: &mut dyn Context) {
        if self.formation.joining && self.state == StartState::Forming {
            return self.ask_to_join(ctx);
        }
        if self.state != StartState::Forming
            || self.formation.registration_sent
            || !self.formation.all_connected()
        {
            return;
        }
        self.formation.registration_sent = true;
        let forming = Self::membership_of(self.formation.forming);
        let node = self.address.node;
        let (complete_gci, members) = self.formation.system_file;
        let request = CmRegReq {
            node,
            complete_gci,
            members,
            connected: self.formation.connected(),
        };
        kernel::send(ctx, self.address, forming, request);
    }

    /// At the forming node: `node` is connected to every data node. Once
    /// all have registered, the cluster is formed without the stale ones.
    pub(crate) fn registration_request(
        &mut self,
        from: BlockRef,
        request: CmRegReq,
        ctx: &mut dyn Context,
    ) {
        let forming = self.formation.forming;
        let node = request.node;
        if from != Self::membership_of(node) || self.formation.node_mut(node).is_none() {
            ctx.report(kernel::Report::Log(format!(
                "ignored a registration for node {node} from {from}: a configured data node \
                 registers itself"
            )));
            return;
        }
        if self.failures.membership_id > 0 {
            // The cluster runs: a node restart asks to join it.
            return self.join_request(from, request, ctx);
        }
        if self.address.node != forming || self.formation.joining {
            // Asked by a restarting node while this node forms (or joins)
            // itself: only a running cluster's president admits one.
            return;
        }
        let state = self.formation.node_mut(node).expect("checked above");
        if state.registered {
            // Registered twice while forming: a repeated request.
            return;
        }
        state.registered = true;
        self.formation
            .reported
            .push((node, request.complete_gci, request.members));
        if !self.formation.nodes.iter().all(|state| state.registered) {
            return;
        }
        let verdict = kernel::stale::judge(&self.formation.reported);
        let president = self
            .formation
            .nodes
            .iter()
            .map(|state| state.node)
            .find(|&node| !verdict.stale.contains(node))
            .expect("a node with the newest complete GCI is never stale");
        for index in 0..self.formation.nodes.len() {
            let to = Self::membership_of(self.formation.nodes[index].node);
            let conf = CmRegConf {
                president,
                stale: verdict.stale,
                restored_gci: verdict.restored,
            };
            kernel::send(ctx, self.address, to, conf);
        }
    }

    /// The forming node formed the cluster: install membership 1 (every
    /// node that is not stale) and run the remaining phases, or shut down
    /// if this node is stale.
    pub(crate) fn cluster_formed(
        &mut self,
        from: BlockRef,
        conf: CmRegConf,
        ctx: &mut dyn Context,
    ) {
        assert!(
            from == Self::membership_of(self.formation.forming),
            "membership {}: CmRegConf from {from}, but node {} forms the cluster",
            self.address,
            self.formation.forming
        );
        assert!(
            self.state == StartState::Forming && self.formation.registration_sent,
            "membership {}: CmRegConf from {from} before this node registered ({:?})",
            self.address,
            self.state
        );
        let me = self.address.node;
        if conf.stale.contains(me) {
            let (own, _) = self.formation.system_file;
            let reason = format!(
                "this node's data ends at GCI {own}: it failed before GCI {} was made durable \
                 by the nodes that carried on, so it takes no part in this start (the cluster \
                 starts without it, led by node {}); bringing it back needs a node restart: \
                 start it again once the cluster runs, and it copies from the live nodes",
                conf.restored_gci, conf.president
            );
            // It tells every node going on that it leaves, and shuts down
            // once each has cut its link: leaving at once could break a
            // link before the forming node's conf crossed it (the conf
            // this node sent, when it is the forming node, goes first on
            // each link).
            let waiting = self.failures.live.difference(conf.stale);
            self.formation.stale_exit = Some((reason, waiting));
            self.send_to_members(waiting, ctx, || CmStaleRep {
                restored_gci: conf.restored_gci,
            });
            return;
        }
        let live = self.failures.live.difference(conf.stale);
        self.failures.live = live;
        self.failures.president = conf.president;
        self.install_first_membership(ctx);
        // The masters' blocks learn the president before the next phase,
        // on the same link as its request.
        for &block in self.blocks.members() {
            if matches!(block.kind, BlockKind::Dih | BlockKind::Dict) {
                kernel::send(
                    ctx,
                    self.address,
                    block,
                    PresidentRep {
                        president: conf.president,
                    },
                );
            }
        }
        if !conf.stale.is_empty() {
            ctx.report(kernel::Report::Log(format!(
                "restoring GCI {}: node(s) {} failed before it was made durable, so their data \
                 is older; the cluster starts without them, led by node {}",
                conf.restored_gci, conf.stale, conf.president
            )));
            // Every block stops waiting for them, as for a failure.
            self.tell_blocks(1, live, conf.stale, ctx);
            self.formation.stale = conf.stale;
            self.cut_leaving(ctx);
        }
        let now = ctx.now_ms();
        self.heartbeats.set_members(live, now);
        self.begin_as_member(ctx);
    }

    /// A member at last (the cluster formed, or a node restart was
    /// admitted): heartbeats start, the ldms get their read lease, and the
    /// phases after formation run.
    pub(crate) fn begin_as_member(&mut self, ctx: &mut dyn Context) {
        self.heartbeats.start(ctx);
        self.publish_lease(ctx);
        let initialise = PHASES
            .iter()
            .position(|&phase| phase == start::INITIALISE)
            .expect("INITIALISE is a phase");
        self.run_phase(initialise + 1, ctx);
    }

    /// CM_STALE_REP: stale node `node` heard it is stale and leaves.
    /// Handled before the inbox's test of the membership (the node is
    /// outside it by then).
    pub(crate) fn stale_node_leaves(&mut self, node: NodeId, ctx: &mut dyn Context) {
        self.formation.leaving.insert(node);
        self.cut_leaving(ctx);
    }

    /// Cuts the links of the stale nodes that said they leave, once this
    /// node installed the membership without them: the stale node shuts
    /// down when every node going on has.
    fn cut_leaving(&mut self, ctx: &mut dyn Context) {
        let cut = self.formation.leaving.intersection(self.formation.stale);
        if cut.is_empty() {
            return;
        }
        self.formation.leaving = self.formation.leaving.difference(cut);
        ctx.report(kernel::Report::CutLinks(cut));
    }
}
