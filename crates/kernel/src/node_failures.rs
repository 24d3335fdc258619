//! What a block knows of agreed data node failures
//! (docs/design/failures.md §3): the membership its node installed, the
//! nodes that left it, and whether every survivor has handled the change.
//!
//! Membership sends each installed change to every block (`NodeFailRep`);
//! from then on the block handles nothing from the failed nodes, whatever
//! is still queued of theirs included: [`NodeFailures::refuses`] is the
//! inbox's first test. Once every survivor's blocks have done the same,
//! membership says so (`NodeFailCompleteRep`) and the block may finish
//! what the failed nodes left with the other survivors.

use signal::signals::{NodeFailConf, NodeFailRep};
use signal::{BlockKind, BlockRef, NodeSet};

use crate::Context;

/// One block's view of the agreed membership.
#[derive(Clone, Copy, Debug, Default)]
pub struct NodeFailures {
    /// The installed membership's id (0: none heard since the start; the
    /// formed cluster's first membership is every configured data node).
    membership_id: u32,
    /// Every data node that left a membership since this node started.
    failed: NodeSet,
    /// The installed membership's members (empty before the first
    /// change: every configured data node).
    live: NodeSet,
    /// The highest membership id every survivor handled.
    complete: u32,
    /// The installed membership's president (None before the first
    /// change).
    president: Option<signal::NodeId>,
    /// Members still in their node restart.
    starting: NodeSet,
    /// Members that came back by a node restart.
    returned: NodeSet,
    /// A node restarting: until its admission is installed, signals from
    /// other data nodes are refused (a late one meant for its previous
    /// incarnation must not reach this one). Its own node's id.
    awaiting_admission: Option<signal::NodeId>,
}

impl NodeFailures {
    /// Whether a signal from `from` must be dropped: it comes from a data
    /// node agreed failed (its late signals, still queued, included).
    #[inline]
    pub fn refuses(&self, from: BlockRef) -> bool {
        from.kind != BlockKind::Api
            && (self.failed.contains(from.node)
                || self.awaiting_admission.is_some_and(|own| from.node != own))
    }

    /// This node restarts into a running cluster: other data nodes' signals
    /// are refused until the membership that admits it is installed
    /// (docs/design/0018-node-restart.md).
    pub fn await_admission(&mut self, own: signal::NodeId) {
        self.awaiting_admission = Some(own);
    }

    /// Every data node agreed failed since this node started and not
    /// admitted again since (by a node restart).
    pub fn failed(&self) -> NodeSet {
        self.failed
    }

    /// The installed membership's members (empty before the first
    /// change).
    pub fn live(&self) -> NodeSet {
        self.live
    }

    /// The president of the installed membership, as membership agreed
    /// it (None before the first change).
    pub fn president(&self) -> Option<signal::NodeId> {
        self.president
    }

    /// Members of the installed membership still in their node restart
    /// (docs/design/0018-node-restart.md).
    pub fn starting(&self) -> NodeSet {
        self.starting
    }

    /// Members of the installed membership that came back by a node
    /// restart: last in every replica chain.
    pub fn returned(&self) -> NodeSet {
        self.returned
    }

    /// The map to route with under the installed membership: `created`
    /// (the map as created) as it stands after the agreed changes
    /// (`PartitionMap::routed`); `created` itself before the first.
    pub fn route(
        &self,
        created: &std::sync::Arc<signal::signals::PartitionMap>,
    ) -> std::sync::Arc<signal::signals::PartitionMap> {
        if self.membership_id == 0 {
            return std::sync::Arc::clone(created);
        }
        let serving = self.live.difference(self.starting);
        let routed = created.routed(serving, self.returned, self.membership_id);
        std::sync::Arc::new(routed)
    }

    /// The installed membership's id (0 before the first change).
    pub fn membership_id(&self) -> u32 {
        self.membership_id
    }

    /// Whether every survivor handled every change this block installed.
    pub fn all_complete(&self) -> bool {
        self.complete >= self.membership_id
    }

    /// Installs `report` from `from` (the node's membership) and confirms
    /// it to membership, as `me`. Returns the nodes newly failed (empty
    /// for a report already installed).
    pub fn install(
        &mut self,
        me: BlockRef,
        from: BlockRef,
        report: &NodeFailRep,
        ctx: &mut dyn Context,
    ) -> NodeSet {
        assert!(
            from.node == me.node && from.kind == BlockKind::Membership,
            "{me}: NodeFailRep from {from}: only this node's membership installs memberships"
        );
        assert!(
            report.live.contains(me.node),
            "{me}: membership {} = {} leaves this node out, and membership shuts the node \
             down instead of installing it",
            report.membership_id,
            report.live
        );
        let newly = report.failed.difference(self.failed);
        self.awaiting_admission = None;
        if report.membership_id > self.membership_id {
            self.membership_id = report.membership_id;
            // A node listed live again was admitted by a node restart, in
            // a new incarnation: its signals count from now on.
            self.failed = self.failed.union(report.failed).difference(report.live);
            self.live = report.live;
            self.president = Some(report.president);
            self.starting = report.starting;
            self.returned = report.returned;
        }
        crate::send(
            ctx,
            me,
            from,
            NodeFailConf {
                membership_id: report.membership_id,
            },
        );
        newly
    }

    /// Every survivor handled membership `membership_id` and every earlier
    /// one. Returns whether this moved the completion.
    pub fn complete(&mut self, membership_id: u32) -> bool {
        let moved = membership_id > self.complete;
        self.complete = self.complete.max(membership_id);
        moved
    }
}
