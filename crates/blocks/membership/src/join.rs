//! A node restart's admission into the running cluster
//! (docs/design/0018-node-restart.md, decisions 1, 4 and 6).
//!
//! ```text
//!  restarting node N                 president P             every member
//!   | phase INITIALISE                    |                        |
//!   |-- CmRegReq{N, connected} ---------->|  (to every member N is
//!   |   (every second until admitted)     |   connected to; only P
//!   |                                     |   answers)
//!   |<- CmRegRef{reason} -----------------|  not now: asks again later
//!   |                                     |-- CmFailPrepareReq{id, live + N, starting + N} ->|
//!   |                                     |<- CmFailPrepareConf -----------------------------|
//!   |<- CmFailCommitOrd{id, live + N, starting + N} --|-- the same to every member -------->|
//!   | install: a starting member          |                        |
//! ```
//!
//! The admission is a membership round like a failure's (`failure.rs`),
//! under the same ids, so a join and a failure are ordered: a failure
//! found while a join's round runs replaces the round without the
//! joining node, which asks again. The president admits one node at a
//! time, only when no change is being agreed or handled (so every
//! member has handled the joining node's earlier failure: nothing of its
//! old incarnation is left in any block), and only a node connected to
//! every member. A starting member holds no data that counts
//! (`survival::judge_counting_data`).
//!
//! When a participant dies here: the joining node before the commit,
//! the president hears its link break and makes the round again without
//! it (`Membership::link_failed`; admitted, it would be a dead member
//! whose failure nothing finds); if its link to the president still
//! stands, the members install a membership with it and then find it
//! failed like any member (its heartbeats stop, its links break); a
//! member, the president's round is replaced by a failure round without
//! the joining node; the president, the next president runs the failure
//! round and the joining node, refused by no one and admitted by no one,
//! asks the new president at its next retry.

use crate::start::StartState;
use crate::Membership;
use kernel::{Context, Report};
use signal::signals::{join_refusal, CmNodeStartedReq, CmRegRef, CmRegReq, PresidentRep};
use signal::{BlockKind, BlockRef, NodeId, NodeSet};

/// How often a restarting node asks to join while it is not admitted.
pub(crate) const JOIN_RETRY_MS: u64 = 1000;

impl Membership {
    /// At a restarting node, after phase INITIALISE and whenever another
    /// data node connects: ask every connected node not asked since the
    /// last retry.
    pub(crate) fn ask_to_join(&mut self, ctx: &mut dyn Context) {
        let me = self.address.node;
        let connected = self.formation.connected();
        let (complete_gci, members) = self.formation.system_file_report();
        for node in connected.difference(self.formation.asked).iter() {
            if node == me {
                continue;
            }
            let request = CmRegReq {
                node: me,
                complete_gci,
                members,
                connected,
            };
            kernel::send(ctx, self.address, membership_of(node), request);
        }
        self.formation.asked = connected;
        self.arm_join_retry(ctx);
    }

    /// The retry timer: ask every connected node again, unless admitted;
    /// once every phase ran, ask the president again to end the start.
    pub(crate) fn ask_to_join_again(&mut self, ctx: &mut dyn Context) {
        self.formation.retry_armed = false;
        if self.state == StartState::Admitted {
            return self.ask_to_finish(ctx);
        }
        if self.state != StartState::Forming || self.failures.membership_id > 0 {
            return;
        }
        self.formation.asked = NodeSet::EMPTY;
        self.ask_to_join(ctx);
    }

    /// At a restarting node: the president refused it for now.
    pub(crate) fn join_refused(&mut self, from: BlockRef, reason: u8, ctx: &mut dyn Context) {
        if !self.formation.joining() || self.failures.membership_id > 0 {
            return;
        }
        if self.formation.last_refusal != Some(reason) {
            self.formation.last_refusal = Some(reason);
            ctx.report(Report::Log(format!(
                "president {} does not admit this node yet: {}; asking again every {} ms",
                from.node,
                join_refusal::describe(reason),
                JOIN_RETRY_MS
            )));
        }
    }

    /// At a member of the running cluster: a restarting node asks to
    /// join. Only the president answers: by proposing a membership with
    /// the node as a starting member, or by CmRegRef.
    pub(crate) fn join_request(
        &mut self,
        from: BlockRef,
        request: CmRegReq,
        ctx: &mut dyn Context,
    ) {
        let node = request.node;
        if node == self.address.node || self.acting_president() != self.address.node {
            return;
        }
        if self.failures.joining == Some(node) {
            return; // Asked again while its round runs.
        }
        let failures = &self.failures;
        let changing = failures.round_pending()
            || !failures.failed.is_empty()
            || self.handling.completed() < failures.membership_id
            || failures.live.contains(node);
        let refusal = if self.state != StartState::Started {
            Some(join_refusal::PRESIDENT_NOT_STARTED)
        } else if changing {
            // (A member still holding the node's old incarnation, too:
            // its failure is about to be agreed.)
            Some(join_refusal::MEMBERSHIP_CHANGING)
        } else if failures.joining.is_some() || !failures.starting.is_empty() {
            Some(join_refusal::ANOTHER_NODE_STARTING)
        } else if !failures
            .live
            .is_subset(request.connected.union(NodeSet::of([node])))
        {
            Some(join_refusal::NOT_CONNECTED)
        } else {
            None
        };
        if let Some(reason) = refusal {
            kernel::send(ctx, self.address, from, CmRegRef { reason });
            return;
        }
        ctx.report(Report::Log(format!(
            "node {node} asks to rejoin the cluster (node restart, its files record GCI {} \
             complete): admitting it as a starting member",
            request.complete_gci
        )));
        self.failures.joining = Some(node);
        self.propose(ctx);
    }

    /// At the restarting node: the president's commit admits it as a
    /// starting member.
    pub(crate) fn admitted(
        &mut self,
        from: BlockRef,
        membership_id: u32,
        (live, starting, returned): (NodeSet, NodeSet, NodeSet),
        ctx: &mut dyn Context,
    ) {
        let me = self.address.node;
        if self.state != StartState::Forming || !live.contains(me) || !starting.contains(me) {
            ctx.report(Report::Log(format!(
                "ignored membership {membership_id} = {live} (starting {starting}) from node {}: \
                 this node was not being admitted",
                from.node
            )));
            return;
        }
        let configured = self.failures.live;
        let failures = &mut self.failures;
        failures.membership_id = membership_id;
        failures.live = live;
        failures.starting = starting;
        failures.returned = returned;
        failures.president = from.node;
        failures.failed = NodeSet::EMPTY;
        self.note_prepared(membership_id);
        ctx.report(Report::Log(format!(
            "membership {membership_id}: {live}; admitted by president {} as a starting member \
             (node restart)",
            from.node
        )));
        ctx.report(Report::Membership {
            membership_id,
            live,
        });
        for &block in self.blocks.members() {
            if matches!(block.kind, BlockKind::Dih | BlockKind::Dict) {
                let report = PresidentRep {
                    president: from.node,
                };
                kernel::send(ctx, self.address, block, report);
            }
        }
        // The blocks refuse the nodes that are not members, as after a
        // failure.
        self.tell_blocks(membership_id, live, configured.difference(live), ctx);
        let now = ctx.now_ms();
        self.heartbeats.set_members(live, now);
        // The phases after formation, in their node-restart form (each
        // block sees itself starting in the membership it was told).
        self.begin_as_member(ctx);
    }
}

impl Membership {
    /// At a restarting node that ran every phase: ask the president to
    /// end its start (again every retry interval until a commit does).
    pub(crate) fn ask_to_finish(&mut self, ctx: &mut dyn Context) {
        let me = self.address.node;
        if !self.failures.starting.contains(me) {
            return;
        }
        let president = self.acting_president();
        let request = CmNodeStartedReq { node: me };
        kernel::send(ctx, self.address, membership_of(president), request);
        self.arm_join_retry(ctx);
    }

    fn arm_join_retry(&mut self, ctx: &mut dyn Context) {
        if self.formation.retry_armed {
            return;
        }
        self.formation.retry_armed = true;
        let envelope = signal::Envelope {
            from: self.address,
            to: self.address,
            signal: signal::signals::ContinueB {
                job: crate::formation::job::JOIN_RETRY,
            }
            .into(),
        };
        ctx.send_delayed(envelope, JOIN_RETRY_MS);
    }

    /// At the president: a starting member ran every phase of its node
    /// restart; the next round ends its start (a round under way, or a
    /// failure being agreed, goes first: the node asks again).
    pub(crate) fn started_request(&mut self, from: BlockRef, node: NodeId, ctx: &mut dyn Context) {
        if from != membership_of(node)
            || self.acting_president() != self.address.node
            || !self.failures.starting.contains(node)
            || self.failures.round_pending()
            || self.failures.finishing.is_some()
        {
            return;
        }
        ctx.report(Report::Log(format!(
            "node {node} finished its node restart (copied, checkpointed, records complete \
             GCIs): ending its start"
        )));
        self.failures.finishing = Some(node);
        self.propose(ctx);
    }

    /// At a restarting node, after a commit: a membership that no longer
    /// lists it as starting ends its start.
    pub(crate) fn start_ended_if_listed(&mut self, ctx: &mut dyn Context) {
        let me = self.address.node;
        if self.state == StartState::Admitted && !self.failures.starting.contains(me) {
            self.state = StartState::Started;
            ctx.report(Report::Log(
                "node restart done: this node is a full member again".to_string(),
            ));
            ctx.report(Report::NodeStarted);
        }
    }
}

fn membership_of(node: NodeId) -> BlockRef {
    BlockRef::new(node, BlockKind::Membership, 0)
}
