//! Agreeing that data nodes failed (docs/design/failures.md §3; NDB
//! QMGR's FAIL_REP, PREP_FAILREQ and COMMIT_FAILREQ).
//!
//! A node takes a peer for **failed** when the peer misses its heartbeats
//! (`heartbeat`) or the link to it breaks (`NodeLinkFailedRep` from the
//! transport). That is final for the peer's incarnation: the node asks
//! its transport to cut the links to it at once (`Report::CutLinks`), so
//! nothing from it arrives any more, and ignores whatever of it was
//! already on the way. It then tells the president, the lowest id among
//! the members it does not take for failed (all nodes start together, so
//! the lowest id is the oldest), which runs two steps:
//!
//! ```text
//!  member           president                 every proposed member
//!   |-- CmFailRep{failed} -->|                          |
//!   |                        |-- CmFailPrepareReq{id, live} -->|  cut links to the
//!   |                        |<- CmFailPrepareConf{id, failed} |  nodes left out
//!   |                        |  all prepared: survival rule    |
//!   |                        |-- CmFailCommitOrd{id, live} --->|  install
//!   |                        |   (or CmShutdownOrd: stop)      |
//! ```
//!
//! Membership ids rise: a proposal takes an id above any this president
//! prepared or installed, and a member refuses (CmFailPrepareRef) an id
//! no higher than one it prepared, so two proposals never share an id. A
//! member that takes more nodes for failed than the proposal leaves out
//! says so in its CONF, and the president proposes again without them:
//! every member installs the same members under the same id.
//!
//! When a participant dies at a step:
//! - a member before or during prepare: the president takes it for
//!   failed (heartbeats, or its link) and proposes again without it;
//! - a member after prepare: the same; the commit is sent to every
//!   proposed member, the dead one's copy is lost, and the next round
//!   removes it;
//! - the president, at any step: every member takes it for failed, the
//!   next lowest id becomes president in every member's view and runs
//!   the protocol again, with an id above any it prepared; a member that
//!   installed the old president's commit refuses nothing of it (the new
//!   id is higher) and reports what it takes for failed;
//! - a report, prepare or commit from a node already taken for failed, a
//!   commit with an id no higher than the installed one, or a CONF of a
//!   round already replaced: ignored.
//!
//! Before the survivors commit, the president applies the survival rule
//! (`survival`) against the last agreed membership; a side that may not
//! continue shuts down (CmShutdownOrd), and so does a node that finds
//! itself left out of a proposal or a commit: it was declared failed.
//! A side of exactly half with no node group whole asks the arbitrator
//! first (`arbitrate`, below): the president sends ARBITRATION_REQ to
//! its node's io service, which asks mgmd; a grant commits the round, a
//! refusal, no answer within `arbitration_timeout_ms` or no arbitrator
//! configured shuts the side down. The arbitrator grants one side only
//! per agreed membership, so two halves never both continue. When a
//! participant dies while the president waits: a member, so the president
//! takes it for failed and proposes again (the pending arbitration is
//! dropped; the next round asks again, for the smaller side, which the
//! arbitrator grants if it is part of the side it granted); the
//! president, so the next president runs the round and asks again.

use crate::start::StartState;
use crate::survival::{self, Verdict};
use crate::Membership;
use kernel::{Context, Report};
use signal::signals::{
    ArbitrationConf, ArbitrationReq, CmFailCommitOrd, CmFailPrepareConf, CmFailPrepareRef,
    CmFailPrepareReq, CmFailRep, CmShutdownOrd,
};
use signal::{BlockKind, BlockRef, NodeId, NodeSet};

/// What this node knows of the agreed membership and of failures.
pub(crate) struct Failures {
    /// The agreed membership's id: 0 while the cluster forms, 1 once
    /// formed, higher at each change.
    pub(crate) membership_id: u32,
    /// The agreed members.
    pub(crate) live: NodeSet,
    /// The agreed members still in their node restart: they hold no
    /// data that counts (docs/design/0018-node-restart.md).
    pub(crate) starting: NodeSet,
    /// The agreed members that came back by a node restart: last in every
    /// replica chain (`PartitionMap::routed`).
    pub(crate) returned: NodeSet,
    /// The agreed president: kept while it lives, then the lowest
    /// surviving id that is not starting ([`president_of`]).
    pub(crate) president: NodeId,
    /// At the president: the restarting node the round in flight admits.
    pub(crate) joining: Option<NodeId>,
    /// At the president: a starting member whose start the next rounds
    /// end (it ran every phase of its node restart).
    pub(crate) finishing: Option<NodeId>,
    /// Members this node takes for failed, not yet agreed out.
    pub(crate) failed: NodeSet,
    /// The configured node groups.
    pub(crate) groups: Vec<NodeSet>,
    /// The highest membership id this node prepared or installed.
    highest_prepared: u32,
    /// The highest membership id this node proposed as president.
    highest_proposed: u32,
    /// The round this node runs as president.
    round: Option<Round>,
    /// A round all members prepared whose side asked the arbitrator.
    arbitration: Option<PendingArbitration>,
    /// When this node first took a member for failed since the last
    /// membership it installed (ctx ms): the log says how long the change
    /// took to agree.
    detected_at_ms: Option<u64>,
    /// The last proposal not followed because it left out the president
    /// this node still heard (`prepare`): followed after all once this
    /// node takes that president for failed itself.
    ignored: Option<IgnoredProposal>,
}

/// A proposal a member did not follow yet ([`Failures::ignored`]).
#[derive(Clone, Copy, Debug)]
struct IgnoredProposal {
    from: BlockRef,
    membership_id: u32,
    live: NodeSet,
    starting: NodeSet,
}

/// A prepared round waiting for the arbitrator, at the president.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PendingArbitration {
    /// The proposed membership's id.
    membership_id: u32,
    /// Its members (this side).
    live: NodeSet,
    /// Those of them in their node restart.
    starting: NodeSet,
    /// Those of them that came back by a node restart.
    returned: NodeSet,
    /// When the side gives up waiting and shuts down (ctx ms).
    deadline_ms: u64,
}

/// How a side's president reaches the arbitrator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArbitrationSettings {
    /// An arbitrator is configured (`[mgmd] arbitration_rank` above 0).
    /// Without one, a side of exactly half shuts down.
    pub enabled: bool,
    /// How long the president waits for its answer.
    pub timeout_ms: u64,
}

/// A proposal in flight, at the president.
struct Round {
    membership_id: u32,
    live: NodeSet,
    starting: NodeSet,
    returned: NodeSet,
    /// Proposed members that have not prepared yet.
    waiting: NodeSet,
}

/// How a node came to be taken for failed, for the log.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Cause {
    /// It missed the limit of heartbeats in a row, silent for `silent_ms`.
    Heartbeats { silent_ms: u64 },
    /// The link to it broke.
    LinkBroken,
    /// Another member reported it.
    ReportedBy(NodeId),
    /// A proposal or a commit left it out.
    LeftOutBy(NodeId),
    /// It and the given member no longer hear each other while the
    /// others hear both: the president chose it to leave
    /// (`connectivity`).
    CutFrom(NodeId),
}

impl Failures {
    pub(crate) fn new(data_nodes: NodeSet, groups: Vec<NodeSet>) -> Failures {
        Failures {
            membership_id: 0,
            live: data_nodes,
            starting: NodeSet::EMPTY,
            returned: NodeSet::EMPTY,
            president: data_nodes.first().expect("a cluster has a data node"),
            joining: None,
            finishing: None,
            failed: NodeSet::EMPTY,
            groups,
            highest_prepared: 0,
            highest_proposed: 0,
            round: None,
            arbitration: None,
            detected_at_ms: None,
            ignored: None,
        }
    }

    /// The members this node does not take for failed.
    pub(crate) fn alive(&self) -> NodeSet {
        self.live.difference(self.failed)
    }

    /// The returned members of a round of `live` with `starting`: the
    /// agreed ones still members, and a node whose start the round ends;
    /// but a node group whose serving nodes are all returned has none
    /// before them, so they count as not returned (the chain order is
    /// then the map's, as it was: nothing moves).
    fn returned_after(&self, live: NodeSet, starting: NodeSet) -> NodeSet {
        let mut returned = self.returned.intersection(live);
        if let Some(finishing) = self.finishing.filter(|&node| live.contains(node)) {
            returned.insert(finishing);
        }
        for group in &self.groups {
            let serving = group.intersection(live).difference(starting);
            if serving.difference(returned).is_empty() {
                returned = returned.difference(*group);
            }
        }
        returned
    }

    /// Whether a round is in flight or waits for the arbitrator.
    pub(crate) fn round_pending(&self) -> bool {
        self.round.is_some() || self.arbitration.is_some()
    }
}

/// The president of a membership `live` that follows one whose
/// president was `current` and whose starting members were `starting`:
/// the same president while it is a member, else the lowest member that
/// is not starting (the lowest member when all are). Every member
/// computes the same from the same agreed state, so a proposal's sender
/// can be checked against it.
pub(crate) fn president_of(live: NodeSet, current: NodeId, starting: NodeSet) -> NodeId {
    if live.contains(current) {
        return current;
    }
    live.difference(starting)
        .first()
        .or_else(|| live.first())
        .expect("a membership has a member")
}

fn membership_of(node: NodeId) -> BlockRef {
    BlockRef::new(node, BlockKind::Membership, 0)
}

impl Membership {
    /// Whether a signal from `node`'s membership may be handled: the node
    /// is a member this node does not take for failed.
    pub(crate) fn hears_from(&self, node: NodeId) -> bool {
        self.failures.alive().contains(node)
    }

    /// The cluster formed: membership 1 is every configured data node
    /// that is not stale (`formation.rs`).
    pub(crate) fn install_first_membership(&mut self, ctx: &mut dyn Context) {
        self.failures.membership_id = 1;
        self.failures.highest_prepared = 1;
        ctx.report(Report::Membership {
            membership_id: 1,
            live: self.failures.live,
        });
    }

    /// The transport lost its link to `node`.
    pub(crate) fn link_failed(&mut self, node: NodeId, incarnation: u32, ctx: &mut dyn Context) {
        if self.state == StartState::ShutDown {
            return;
        }
        if let Some((reason, waiting)) = self.formation.stale_exit.as_mut() {
            // A stale node: the nodes going on cut it once they installed
            // the membership without it.
            waiting.remove(node);
            if waiting.is_empty() {
                let reason = std::mem::take(reason);
                self.shut_down(reason, ctx);
            }
            return;
        }
        if self.failures.membership_id == 0 {
            // Nothing is agreed to fail over from while the cluster forms;
            // every node must take part in the start.
            self.shut_down(
                format!(
                    "the link to data node {node} (incarnation {incarnation}) broke while the \
                     cluster was forming; start the nodes again"
                ),
                ctx,
            );
            return;
        }
        // The node being admitted died before its admission was agreed
        // (its request to join was read just before its link broke). It
        // is no member yet, so it is not taken for failed; admitted, it
        // would be a dead member whose failure nothing finds (its link
        // is already gone, and a later incarnation's frames would pass
        // for its signs of life). The round is made again without it.
        if self.failures.joining == Some(node) {
            self.failures.joining = None;
            ctx.report(Report::Log(format!(
                "node {node} is gone before its admission was agreed (its link broke): \
                 not admitting it"
            )));
            if self.failures.round.is_some() {
                self.propose(ctx);
            }
            return;
        }
        // A failure already known and being agreed is not proposed again
        // (a report and the link's break both tell of one death).
        let news = self.take_for_failed(node, Cause::LinkBroken, ctx);
        self.follow_ignored(ctx);
        if news || self.failures.round.is_none() {
            self.push_failures(ctx);
        }
    }

    /// The heartbeats suspect `node`.
    pub(crate) fn heartbeats_missed(
        &mut self,
        node: NodeId,
        silent_ms: u64,
        ctx: &mut dyn Context,
    ) {
        let news = self.take_for_failed(node, Cause::Heartbeats { silent_ms }, ctx);
        self.follow_ignored(ctx);
        if news || self.failures.round.is_none() {
            self.push_failures(ctx);
        }
    }

    /// `node` is failed for this node from now on: cut its links, stop
    /// heartbeating it. Nothing if it is not a member or already taken.
    pub(crate) fn take_for_failed(
        &mut self,
        node: NodeId,
        cause: Cause,
        ctx: &mut dyn Context,
    ) -> bool {
        if node == self.address.node || !self.failures.alive().contains(node) {
            return false;
        }
        self.failures.failed.insert(node);
        self.failures.detected_at_ms.get_or_insert(ctx.now_ms());
        // A failure comes first: a node being admitted asks again.
        self.failures.joining = None;
        let how = match cause {
            Cause::Heartbeats { silent_ms } => format!(
                "missed {} heartbeats in a row (silent for {silent_ms} ms)",
                self.heartbeats.missed_limit()
            ),
            Cause::LinkBroken => "its link broke".to_string(),
            Cause::ReportedBy(reporter) => format!("node {reporter} reported it failed"),
            Cause::LeftOutBy(president) => {
                format!("president {president} left it out of the membership")
            }
            Cause::CutFrom(peer) => format!(
                "the link between it and node {peer} is bad while the other members hear both; \
                 the president chose it to leave"
            ),
        };
        ctx.report(Report::Log(format!(
            "node {node} failed: {how}; membership {} without it is being agreed",
            self.failures.membership_id
        )));
        ctx.report(Report::CutLinks(NodeSet::of([node])));
        let now = ctx.now_ms();
        self.heartbeats.set_members(self.failures.alive(), now);
        // The other side may already be agreeing that this node failed.
        self.publish_lease(ctx);
        true
    }

    /// Follows the proposal not followed while the president was heard
    /// (`prepare`), now that this node takes that president for failed
    /// itself, if its proposer is alive here and nothing newer was
    /// installed since. Called from the handlers of this node's own
    /// evidence (a broken link, missed heartbeats, a report it believes),
    /// never from inside another proposal's handling.
    fn follow_ignored(&mut self, ctx: &mut dyn Context) {
        let Some(ignored) = self.failures.ignored else {
            return;
        };
        if self.failures.alive().contains(self.failures.president) {
            return;
        }
        self.failures.ignored = None;
        if !self.failures.alive().contains(ignored.from.node)
            || ignored.membership_id <= self.failures.membership_id
        {
            return;
        }
        self.prepare(
            ignored.from,
            ignored.membership_id,
            ignored.live,
            ignored.starting,
            ctx,
        );
    }

    /// The president in this node's view: the agreed one while this node
    /// does not take it for failed, else its successor among the members
    /// it takes for alive.
    pub(crate) fn acting_president(&self) -> NodeId {
        president_of(
            self.failures.alive(),
            self.failures.president,
            self.failures.starting,
        )
    }

    /// Gets the failures this node knows agreed: proposes them if it is
    /// the president, reports them to the president otherwise.
    pub(crate) fn push_failures(&mut self, ctx: &mut dyn Context) {
        if self.failures.failed.is_empty() || self.state == StartState::ShutDown {
            return;
        }
        let president = self.acting_president();
        if president == self.address.node {
            self.propose(ctx);
        } else {
            let report = CmFailRep {
                membership_id: self.failures.membership_id,
                failed: self.failures.failed,
            };
            kernel::send(ctx, self.address, membership_of(president), report);
        }
    }

    /// This node installed `membership_id` without preparing it (a
    /// restarting node's admission): no proposal at or below it is
    /// prepared from now on.
    pub(crate) fn note_prepared(&mut self, membership_id: u32) {
        let failures = &mut self.failures;
        failures.highest_prepared = failures.highest_prepared.max(membership_id);
    }

    /// As president: propose the members this node takes for alive (and
    /// the node being admitted, if any), under a new id (replacing any
    /// round in flight).
    pub(crate) fn propose(&mut self, ctx: &mut dyn Context) {
        let failures = &mut self.failures;
        let membership_id = failures
            .highest_prepared
            .max(failures.highest_proposed)
            .max(failures.membership_id)
            + 1;
        failures.highest_proposed = membership_id;
        // A round waiting for the arbitrator is replaced too: the next one
        // asks again if it needs to.
        failures.arbitration = None;
        let mut live = failures.alive();
        let mut starting = failures.starting.intersection(live);
        if let Some(finishing) = failures.finishing {
            starting.remove(finishing);
        }
        // The members prepare; a node being admitted only hears the commit.
        let waiting = live;
        if let Some(joining) = failures.joining {
            live.insert(joining);
            starting.insert(joining);
        }
        let returned = failures.returned_after(live, starting);
        failures.round = Some(Round {
            membership_id,
            live,
            starting,
            returned,
            waiting,
        });
        self.send_to_members(waiting, ctx, || CmFailPrepareReq {
            membership_id,
            live,
            starting,
            returned,
        });
        ctx.fault_point(kernel::faults::FaultPoint::FailureAfterPrepare);
    }

    /// Sends `signal()` to the membership of every node of `members`.
    pub(crate) fn send_to_members<S: Into<signal::Signal>>(
        &self,
        members: NodeSet,
        ctx: &mut dyn Context,
        signal: impl Fn() -> S,
    ) {
        for node in members.iter() {
            kernel::send(ctx, self.address, membership_of(node), signal());
        }
    }

    /// A member reports nodes it takes for failed.
    pub(crate) fn fail_report(&mut self, from: BlockRef, failed: NodeSet, ctx: &mut dyn Context) {
        // Reports go to the president; one reaching another member comes
        // from a node that took the president for failed and takes this
        // node for the next one. While this node still hears the
        // president, that was the reporter's own link (perhaps cut by the
        // president choosing it to leave): not believed, as its proposals
        // are not (`prepare`).
        if self.president_still_heard(ctx) {
            ctx.report(Report::Log(format!(
                "ignored node {}'s report of failed nodes {failed}: it was meant for a next \
                 president, and this node still hears president {}",
                from.node, self.failures.president
            )));
            return;
        }
        let mut news = false;
        for node in failed.iter() {
            news |= self.take_for_failed(node, Cause::ReportedBy(from.node), ctx);
        }
        self.follow_ignored(ctx);
        if news || self.failures.round.is_none() {
            self.push_failures(ctx);
        }
    }

    /// Step one at a proposed member.
    pub(crate) fn prepare(
        &mut self,
        from: BlockRef,
        membership_id: u32,
        live: NodeSet,
        starting: NodeSet,
        ctx: &mut dyn Context,
    ) {
        if self.left_out(from, membership_id, live, ctx) {
            return;
        }
        if !self.follows_protocol(from.node, live, starting) {
            ctx.report(Report::Log(format!(
                "ignored a proposal of membership {membership_id} = {live} (starting \
                 {starting}) from node {}",
                from.node
            )));
            return;
        }
        // A proposal that makes its proposer president by leaving out this
        // node's president, which this node still hears, comes from a node
        // that lost only its own link to the president: perhaps because
        // the president chose it to leave over a bad link and cut it. It
        // is not followed (a president that really failed is soon silent
        // to every member, or its links broke at every member); the
        // proposer is left out by the president's own round, and meanwhile
        // its round waits for answers that do not come.
        let president = self.failures.president;
        if from.node != president && !live.contains(president) && self.president_still_heard(ctx) {
            ctx.report(Report::Log(format!(
                "ignored node {}'s proposal of membership {membership_id} = {live}: it leaves \
                 out president {president}, which this node still hears",
                from.node
            )));
            self.failures.ignored = Some(IgnoredProposal {
                from,
                membership_id,
                live,
                starting,
            });
            return;
        }
        if membership_id <= self.failures.highest_prepared {
            self.failures.ignored = None;
            let refusal = CmFailPrepareRef {
                membership_id,
                highest: self.failures.highest_prepared,
            };
            kernel::send(ctx, self.address, from, refusal);
            return;
        }
        // A proposal followed (or refused above) replaces any ignored one.
        self.failures.ignored = None;
        for node in self.failures.alive().difference(live).iter() {
            self.take_for_failed(node, Cause::LeftOutBy(from.node), ctx);
        }
        self.failures.highest_prepared = self.failures.highest_prepared.max(membership_id);
        let conf = CmFailPrepareConf {
            membership_id,
            failed: self.failures.failed,
        };
        kernel::send(ctx, self.address, from, conf);
    }

    /// Whether this node is not the president and still hears the agreed
    /// president (it takes it for alive and heard from it lately).
    fn president_still_heard(&self, ctx: &dyn Context) -> bool {
        let president = self.failures.president;
        president != self.address.node
            && self.failures.alive().contains(president)
            && self.heartbeats.heard_lately(president, ctx.now_ms())
    }

    /// Whether a proposal of `live` (with `starting`) from `proposer`
    /// keeps the protocol, judged by this node's agreed membership: the
    /// proposer is the proposal's president, a proposal adds at most one
    /// node, a restarting one (a node restart's admission), and a node
    /// starts only by being added.
    fn follows_protocol(&self, proposer: NodeId, live: NodeSet, starting: NodeSet) -> bool {
        let current = &self.failures;
        let added = live.difference(current.live);
        added.len() <= 1
            && added.is_subset(starting)
            && starting.is_subset(live)
            && starting.is_subset(current.starting.union(added))
            && president_of(live, current.president, current.starting) == proposer
    }

    /// At the president: a member prepared.
    pub(crate) fn prepared(
        &mut self,
        from: BlockRef,
        membership_id: u32,
        failed: NodeSet,
        ctx: &mut dyn Context,
    ) {
        let Some(round) = self.failures.round.as_mut() else {
            return;
        };
        if round.membership_id != membership_id || !round.waiting.contains(from.node) {
            return;
        }
        round.waiting.remove(from.node);
        let (live, starting, returned, all_prepared) = (
            round.live,
            round.starting,
            round.returned,
            round.waiting.is_empty(),
        );
        if !failed.intersection(live).is_empty() {
            // The member knows of failures this proposal keeps: propose
            // again without them.
            for node in failed.intersection(live).iter() {
                self.take_for_failed(node, Cause::ReportedBy(from.node), ctx);
            }
            self.propose(ctx);
            return;
        }
        if !all_prepared {
            return;
        }
        self.failures.round = None;
        let before = self.failures.live;
        if before.is_subset(live) {
            // Nothing left: a node restart's admission (or a restarting
            // node found started).
            return self.commit_round(membership_id, live, starting, returned, ctx);
        }
        let verdict = survival::judge_counting_data(
            before,
            live,
            self.failures.starting,
            &self.failures.groups,
        );
        match verdict {
            Verdict::Continue(_) => self.commit_round(membership_id, live, starting, returned, ctx),
            Verdict::ShutDown(_) => self.refuse_round(membership_id, live, ctx),
            Verdict::Arbitrate => self.arbitrate(membership_id, live, starting, returned, ctx),
        }
    }

    fn commit_round(
        &mut self,
        membership_id: u32,
        live: NodeSet,
        starting: NodeSet,
        returned: NodeSet,
        ctx: &mut dyn Context,
    ) {
        self.send_to_members(live, ctx, || CmFailCommitOrd {
            membership_id,
            live,
            starting,
            returned,
        });
        ctx.fault_point(kernel::faults::FaultPoint::FailureAfterCommit);
    }

    fn refuse_round(&mut self, membership_id: u32, live: NodeSet, ctx: &mut dyn Context) {
        self.send_to_members(live, ctx, || CmShutdownOrd {
            membership_id,
            live,
        });
    }

    /// At the president, every member of a side of exactly half prepared:
    /// only the arbitrator may let it continue. Nothing is committed (no
    /// block hears of the failure, so no replica is promoted and no GCI
    /// completes) until it answers.
    fn arbitrate(
        &mut self,
        membership_id: u32,
        live: NodeSet,
        starting: NodeSet,
        returned: NodeSet,
        ctx: &mut dyn Context,
    ) {
        let before = self.failures.live;
        if !self.arbitration.enabled {
            ctx.report(Report::Log(format!(
                "membership {membership_id} = {live} holds exactly half of {before} and no node \
                 group whole; no arbitrator is configured (arbitration_rank = 0), so this side \
                 shuts down"
            )));
            self.refuse_round(membership_id, live, ctx);
            return;
        }
        ctx.report(Report::Log(format!(
            "membership {membership_id} = {live} holds exactly half of {before} and no node \
             group whole: asking the arbitrator"
        )));
        self.failures.arbitration = Some(PendingArbitration {
            membership_id,
            live,
            starting,
            returned,
            deadline_ms: ctx.now_ms() + self.arbitration.timeout_ms,
        });
        let io = BlockRef::new(self.address.node, BlockKind::Io, 0);
        let request = ArbitrationReq {
            membership_id: self.failures.membership_id,
            before,
            side: live,
        };
        kernel::send(ctx, self.address, io, request);
        self.arm_arbitration_timer(ctx);
    }

    /// The arbitrator's answer (or that there was none).
    pub(crate) fn arbitration_answered(&mut self, conf: ArbitrationConf, ctx: &mut dyn Context) {
        let Some(pending) = self.failures.arbitration else {
            return; // A round replaced since, or given up on.
        };
        if conf.membership_id != self.failures.membership_id || conf.side != pending.live {
            return;
        }
        self.failures.arbitration = None;
        let PendingArbitration {
            membership_id,
            live,
            starting,
            returned,
            ..
        } = pending;
        if conf.granted {
            ctx.report(Report::Log(format!(
                "the arbitrator let membership {membership_id} = {live} continue"
            )));
            self.commit_round(membership_id, live, starting, returned, ctx);
        } else {
            let what = if conf.answered {
                "refused it (it let the other side continue)"
            } else {
                "could not be reached"
            };
            ctx.report(Report::Log(format!(
                "the arbitrator {what}: membership {membership_id} = {live} shuts down"
            )));
            self.refuse_round(membership_id, live, ctx);
        }
    }

    /// The arbitration timer: a side whose arbitrator has not answered by
    /// the deadline shuts down.
    pub(crate) fn arbitration_timer(&mut self, ctx: &mut dyn Context) {
        let Some(pending) = self.failures.arbitration else {
            return;
        };
        if ctx.now_ms() < pending.deadline_ms {
            self.arm_arbitration_timer(ctx);
            return;
        }
        self.failures.arbitration = None;
        ctx.report(Report::Log(format!(
            "the arbitrator did not answer within {} ms: membership {} = {} shuts down",
            self.arbitration.timeout_ms, pending.membership_id, pending.live
        )));
        self.refuse_round(pending.membership_id, pending.live, ctx);
    }

    fn arm_arbitration_timer(&self, ctx: &mut dyn Context) {
        let envelope = signal::Envelope {
            from: self.address,
            to: self.address,
            signal: signal::signals::ContinueB {
                job: crate::formation::job::ARBITRATION_TIMER,
            }
            .into(),
        };
        // Checked often enough to give up close to the deadline, whatever
        // the timeout.
        ctx.send_delayed(envelope, (self.arbitration.timeout_ms / 4).max(1));
    }

    /// At the president: a member had prepared a higher id already.
    pub(crate) fn prepare_refused(
        &mut self,
        membership_id: u32,
        highest: u32,
        ctx: &mut dyn Context,
    ) {
        let Some(round) = &self.failures.round else {
            return;
        };
        if round.membership_id != membership_id {
            return;
        }
        self.failures.highest_prepared = self.failures.highest_prepared.max(highest);
        self.propose(ctx);
    }

    /// Step two at a member: install the new membership.
    pub(crate) fn commit(
        &mut self,
        from: BlockRef,
        membership_id: u32,
        live: NodeSet,
        starting: NodeSet,
        returned: NodeSet,
        ctx: &mut dyn Context,
    ) {
        if self.formation.joining() && self.failures.membership_id == 0 {
            // This node's admission by a node restart.
            return self.admitted(from, membership_id, (live, starting, returned), ctx);
        }
        if membership_id <= self.failures.membership_id {
            return;
        }
        if self.left_out(from, membership_id, live, ctx) {
            return;
        }
        let removed = self.failures.live.difference(live);
        let added = live.difference(self.failures.live);
        let ended = self
            .failures
            .starting
            .difference(starting)
            .intersection(live);
        if !removed.is_empty() && starting.contains(self.address.node) {
            // This node restarts: a partition it copied (or copies) may
            // have lost the primary it was attached to, and writes through
            // the new primary would pass it by. Its restart starts over
            // (docs/design/0018-node-restart.md).
            self.shut_down(
                format!(
                    "node(s) {removed} failed while this node was in its node restart; start \
                     it again and it restarts from what it has"
                ),
                ctx,
            );
            return;
        }
        self.failures.ignored = None;
        for node in removed.iter() {
            self.take_for_failed(node, Cause::LeftOutBy(from.node), ctx);
        }
        let failures = &mut self.failures;
        failures.membership_id = membership_id;
        failures.highest_prepared = failures.highest_prepared.max(membership_id);
        failures.live = live;
        failures.starting = starting;
        failures.returned = returned;
        failures.president = from.node;
        failures.failed = failures.failed.difference(removed);
        if failures.joining.is_some_and(|node| live.contains(node)) {
            failures.joining = None;
        }
        if failures
            .finishing
            .is_some_and(|node| !starting.contains(node))
        {
            failures.finishing = None;
        }
        let took = self
            .failures
            .detected_at_ms
            .take()
            .map(|at| {
                format!(
                    " ({} ms after this node took the first of them for failed)",
                    ctx.now_ms().saturating_sub(at)
                )
            })
            .unwrap_or_default();
        let change = if !added.is_empty() {
            format!("node {added} rejoins by a node restart")
        } else if removed.is_empty() && !ended.is_empty() {
            format!("node {ended} finished its node restart")
        } else {
            format!("without {removed}")
        };
        ctx.report(Report::Log(format!(
            "membership {membership_id}: {live}, {change}; president {}{took}",
            from.node
        )));
        ctx.report(Report::Membership {
            membership_id,
            live,
        });
        self.tell_blocks(membership_id, live, removed, ctx);
        if !added.is_empty() {
            let now = ctx.now_ms();
            self.heartbeats.set_members(self.failures.alive(), now);
            self.heartbeats.start_if_formed(ctx);
        }
        self.publish_lease(ctx);
        // Clients waiting on a node that went silent would wait for their
        // reply timeout: tell them.
        for &api in &self.api_nodes {
            let report = signal::signals::ApiNodeFailRep {
                membership_id,
                failed: removed,
            };
            kernel::send(ctx, self.address, api, report);
        }
        self.start_ended_if_listed(ctx);
        // Failures found since the proposal: the next round.
        if self.failures.round.is_none() {
            self.push_failures(ctx);
        }
    }

    /// The president found that this side may not continue.
    pub(crate) fn shutdown_ordered(
        &mut self,
        from: BlockRef,
        membership_id: u32,
        live: NodeSet,
        ctx: &mut dyn Context,
    ) {
        let before = self.failures.live;
        if membership_id <= self.failures.membership_id
            || !live.is_subset(before)
            || live.is_empty()
        {
            return;
        }
        let verdict = survival::judge_counting_data(
            before,
            live,
            self.failures.starting,
            &self.failures.groups,
        );
        let why = match verdict {
            Verdict::ShutDown(reason) => reason.to_string(),
            Verdict::Arbitrate => format!(
                "this side has {} of the {} nodes and no node group whole, so only the \
                 arbitrator could let it continue, and it did not (refused, unreachable or not \
                 configured: president {}'s log says which)",
                live.len(),
                before.len(),
                from.node
            ),
            Verdict::Continue(reason) => format!(
                "president {} ordered it, though by this node's rule {reason}",
                from.node
            ),
        };
        self.shut_down(
            format!(
                "membership {} lost nodes {}: {why}",
                self.failures.membership_id,
                before.difference(live)
            ),
            ctx,
        );
    }

    /// A proposal or commit from `from` that leaves this node out: it was
    /// declared failed, so it shuts down. Returns whether it did.
    fn left_out(
        &mut self,
        from: BlockRef,
        membership_id: u32,
        live: NodeSet,
        ctx: &mut dyn Context,
    ) -> bool {
        if live.contains(self.address.node) {
            return false;
        }
        self.shut_down(
            format!(
                "president {} declared this node failed (membership {membership_id} is \
                 {live}); it may not serve again in this incarnation",
                from.node
            ),
            ctx,
        );
        true
    }

    /// Stops serving for good in this incarnation.
    pub(crate) fn shut_down(&mut self, reason: String, ctx: &mut dyn Context) {
        if self.state == StartState::ShutDown {
            return;
        }
        self.state = StartState::ShutDown;
        self.failures.round = None;
        self.failures.arbitration = None;
        ctx.report(Report::Shutdown(reason));
    }
}
