//! Telling the node's blocks of each agreed membership change, and
//! knowing when every survivor's blocks have handled it (NDB's
//! NODE_FAILREP and NF_COMPLETEREP; docs/design/failures.md §3).
//!
//! ```text
//!  membership (each member)          its blocks           other members
//!   | install m (failure.rs)           |                        |
//!   |-- NodeFailRep{m, live, failed} ->|  refuse the failed nodes' signals
//!   |<------------ NodeFailConf{m} ----|  (every block)         |
//!   |-- CmNodeFailHandledRep{m} ------------------------------->|
//!   |<-------------------------------- CmNodeFailHandledRep{m} -|
//!   |  every member handled m:         |                        |
//!   |-- NodeFailCompleteRep{m} ------->|  finish what the failed nodes left
//! ```
//!
//! Two steps because a block's first reaction is local (stop waiting for
//! the failed nodes, refuse what they sent) while finishing their work
//! (aborting or committing the transactions they took part in, taking
//! over their coordinators) talks to the blocks of other survivors: a
//! request that reached a survivor before that survivor refused the
//! failed nodes could cross a late signal of theirs (a prepare that
//! arrives after the abort). After NodeFailCompleteRep no survivor
//! handles anything of the failed nodes.
//!
//! When a participant dies here: a member that never reports is taken
//! for failed and agreed out (failure.rs); the next membership's change
//! is handled in turn, and its completion covers every earlier one (a
//! block treats NodeFailCompleteRep m as complete for every id up to m).
//! A report from a node this node no longer hears from is dropped by the
//! inbox; one for an id above this node's is kept until this node
//! installs it.

use crate::Membership;
use kernel::answers::Answers;
use kernel::Context;
use signal::signals::{CmNodeFailHandledRep, NodeFailCompleteRep, NodeFailRep};
use signal::{BlockRef, NodeId, NodeSet, NODE_SET_MAX};

/// Where the handling of membership changes stands at this node.
pub(crate) struct Handling {
    /// The change the node's own blocks are handling, and which of them
    /// confirmed it.
    local: Option<(u32, Answers)>,
    /// The highest membership id each node's blocks handled, by node id
    /// (this node's included).
    handled: Vec<u32>,
    /// The highest membership id announced complete to the blocks.
    completed: u32,
}

impl Handling {
    pub(crate) fn new() -> Handling {
        Handling {
            local: None,
            handled: vec![0; usize::from(NODE_SET_MAX) + 1],
            completed: 0,
        }
    }

    /// The highest membership id announced complete to the blocks.
    pub(crate) fn completed(&self) -> u32 {
        self.completed
    }

    fn handled_by(&self, node: NodeId) -> u32 {
        self.handled[usize::from(node.0)]
    }
}

impl Membership {
    /// Membership `membership_id` = `live` is installed: tell every block
    /// of the node, which confirm once they refuse `failed`.
    pub(crate) fn tell_blocks(
        &mut self,
        membership_id: u32,
        live: NodeSet,
        failed: NodeSet,
        ctx: &mut dyn Context,
    ) {
        let mut blocks = Answers::new(self.blocks.members().to_vec());
        blocks.start_round();
        for &block in blocks.members() {
            let report = NodeFailRep {
                membership_id,
                live,
                failed,
                president: self.failures.president,
                starting: self.failures.starting,
                returned: self.failures.returned,
            };
            kernel::send(ctx, self.address, block, report);
        }
        // A change still being handled is covered by this one: each block
        // handles them in order, so its confirming this one confirms both.
        self.handling.local = Some((membership_id, blocks));
    }

    /// A block of this node handled membership `membership_id`.
    pub(crate) fn block_handled(
        &mut self,
        from: BlockRef,
        membership_id: u32,
        ctx: &mut dyn Context,
    ) {
        assert_eq!(
            from.node, self.address.node,
            "membership {}: NodeFailConf from {from}, a block of another node",
            self.address
        );
        let Some((handling, blocks)) = self.handling.local.as_mut() else {
            return;
        };
        if *handling != membership_id || !blocks.record(from, "NodeFailConf") {
            // An earlier change, overtaken by the one being handled, or
            // not the last block to confirm.
            return;
        }
        self.handling.local = None;
        let live = self.failures.live;
        self.send_to_members(
            live.difference(NodeSet::of([self.address.node])),
            ctx,
            || CmNodeFailHandledRep { membership_id },
        );
        self.member_handled(self.address.node, membership_id, ctx);
    }

    /// `node`'s blocks handled membership `membership_id`.
    pub(crate) fn member_handled(
        &mut self,
        node: NodeId,
        membership_id: u32,
        ctx: &mut dyn Context,
    ) {
        let slot = &mut self.handling.handled[usize::from(node.0)];
        *slot = (*slot).max(membership_id);
        self.complete_if_handled(ctx);
    }

    /// Announces the installed membership complete once every member
    /// handled it (a member's failure may be what completes it).
    pub(crate) fn complete_if_handled(&mut self, ctx: &mut dyn Context) {
        let current = self.failures.membership_id;
        if self.handling.completed >= current || self.handling.local.is_some() {
            return;
        }
        let live = self.failures.live;
        if live
            .iter()
            .any(|member| self.handling.handled_by(member) < current)
        {
            return;
        }
        self.handling.completed = current;
        for &block in self.blocks.members() {
            let report = NodeFailCompleteRep {
                membership_id: current,
            };
            kernel::send(ctx, self.address, block, report);
        }
    }
}
