//! Cluster formation (NDB QMGR's CM_REGREQ / CM_REGCONF, simplified for a
//! cluster whose data nodes all start together).
//!
//! ```text
//!  transport     membership (each node)              membership (president)
//!   |-NodeConnectedRep->|  (any time, even before phase 0)     |
//!   |                   |  phase 1 done, every peer connected   |
//!   |                   |-- CmRegReq{node} ------------------->|  (the president
//!   |                   |                                      |   registers too)
//!   |                   |<-- CmRegConf{president} -------------|  every node registered
//!   |                   |  phases 2 and 3                       |
//! ```
//!
//! The president is the lowest configured data node id (until node failures
//! can move it); its dih and dict are the masters. Membership is the one
//! source of that fact: it announces the president to its dih and dict
//! (PRESIDENT_REP) before phase INITIALISE, and they take it from there. A node registers only once it is connected to every
//! other data node, so when the president confirms, every node can reach
//! every other: the master dih may then switch GCIs on every tc and the
//! master dict add tables everywhere. A one-node cluster has no peer to
//! wait for; it still registers with itself, so one path serves all sizes.

use crate::start::{self, StartState, PHASES};
use crate::Membership;
use kernel::Context;
use signal::signals::{CmRegConf, CmRegReq, NodeConnectedRep};
use signal::{BlockKind, BlockRef, NodeId};

/// What membership knows of the other data nodes.
pub(crate) struct Formation {
    president: NodeId,
    /// Every data node, ascending: its incarnation once connected (this
    /// node counts as connected), and whether it registered (kept at the
    /// president only).
    nodes: Vec<NodeState>,
    /// This node sent its CmRegReq.
    registration_sent: bool,
}

struct NodeState {
    node: NodeId,
    incarnation: Option<u32>,
    registered: bool,
}

impl Formation {
    /// `me` among `data_nodes` (config order, any): checked, since a node
    /// missing from its own cluster would wait for itself forever.
    pub(crate) fn new(me: NodeId, data_nodes: &[NodeId]) -> Formation {
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
            president: sorted[0],
            nodes: sorted
                .into_iter()
                .map(|node| NodeState {
                    node,
                    incarnation: (node == me).then_some(0),
                    registered: false,
                })
                .collect(),
            registration_sent: false,
        }
    }

    pub(crate) fn president(&self) -> NodeId {
        self.president
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
        if state.incarnation.is_some() && formed {
            // The cluster formed already: a node coming back waits for node
            // restart (not built).
            return;
        }
        state.incarnation = Some(report.incarnation);
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
        if self.state != StartState::Forming
            || self.formation.registration_sent
            || !self.formation.all_connected()
        {
            return;
        }
        self.formation.registration_sent = true;
        let president = Self::membership_of(self.formation.president);
        let node = self.address.node;
        kernel::send(ctx, self.address, president, CmRegReq { node });
    }

    /// At the president: `node` is connected to every data node. Once all
    /// have registered, the cluster is formed.
    pub(crate) fn registration_request(
        &mut self,
        from: BlockRef,
        node: NodeId,
        ctx: &mut dyn Context,
    ) {
        let president = self.formation.president;
        assert_eq!(
            self.address.node, president,
            "membership {}: CmRegReq from {from}, but node {president} is the president",
            self.address
        );
        assert!(
            from == Self::membership_of(node),
            "membership {}: CmRegReq for node {node} from {from}: a node registers itself",
            self.address
        );
        let Some(state) = self.formation.node_mut(node) else {
            panic!(
                "membership {}: CmRegReq from node {node}, which is not a configured data node",
                self.address
            );
        };
        if state.registered {
            // A node that started again while the cluster runs: it waits
            // for node restart (not built), and the transport refuses it
            // once its old link broke.
            ctx.report(kernel::Report::Log(format!(
                "node {node} asked to join the running cluster again; node restart is not \
                 built, so it is not admitted"
            )));
            return;
        }
        state.registered = true;
        if !self.formation.nodes.iter().all(|state| state.registered) {
            return;
        }
        for index in 0..self.formation.nodes.len() {
            let to = Self::membership_of(self.formation.nodes[index].node);
            kernel::send(ctx, self.address, to, CmRegConf { president });
        }
    }

    /// The president formed the cluster: run the remaining phases.
    pub(crate) fn cluster_formed(
        &mut self,
        from: BlockRef,
        president: NodeId,
        ctx: &mut dyn Context,
    ) {
        assert!(
            from == Self::membership_of(self.formation.president)
                && president == self.formation.president,
            "membership {}: CmRegConf naming president {president} from {from}, but node {} \
             is the president",
            self.address,
            self.formation.president
        );
        assert!(
            self.state == StartState::Forming && self.formation.registration_sent,
            "membership {}: CmRegConf from {from} before this node registered ({:?})",
            self.address,
            self.state
        );
        self.install_first_membership(ctx);
        self.heartbeats.start(ctx);
        self.publish_lease(ctx);
        let initialise = PHASES
            .iter()
            .position(|&phase| phase == start::INITIALISE)
            .expect("INITIALISE is a phase");
        self.run_phase(initialise + 1, ctx);
    }
}
