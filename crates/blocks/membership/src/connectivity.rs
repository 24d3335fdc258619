//! The connectivity check: whether a silent peer failed, or this node's
//! link to it (docs/design/0020-connectivity-check.md; NDB's QMGR
//! connectivity check).
//!
//! A suspicion (`heartbeat`) is not yet a failure. The suspecting node
//! asks every other member whether it still hears the suspect
//! (CM_PING_REQ, the suspect included) and waits two heartbeat intervals:
//!
//! ```text
//!  suspecting node            every other member          president
//!   |-- CmPingReq{suspect} -->|                               |
//!   |<- CmPingConf{hears} ----|                               |
//!   | the suspect answered: a late link, not a failure         |
//!   | nobody answered: this node is the one cut off: shut down |
//!   | nobody hears it: it failed (failure.rs)                  |
//!   | some hear it: a bad link --- CmLinkCutRep{suspect} ----->|
//!   |                                     gathers reports two intervals,
//!   |                                     chooses who leaves, takes it
//!   |                                     for failed (or leaves itself)
//! ```
//!
//! The president chooses, over every cut reported, the nodes that leave:
//! at least one end of each cut, keeping a node of every node group where
//! it can, as few as can be, then not itself, then the nodes that
//! reported the most cuts (a node that hears badly reports every peer).
//!
//! When a participant dies or stalls at a step:
//! - the suspect, during the check: nobody hears it; it is taken for
//!   failed as before the check existed;
//! - a member asked: its answer is missing; the check ends at its
//!   deadline with the answers it has (no answer at all: this node is
//!   the one cut off, and leaves);
//! - the president, before it settles a cut: the reporter, hearing
//!   nothing of it, leaves by itself four intervals after its report
//!   while the suspect stays silent; a report to a dead president is lost
//!   the same way;
//! - a ping or an answer that is late, duplicated or of a check already
//!   over: ignored (matched by check and suspect).
//!
//! While a node checks a suspicion it serves no reads (`lease`): the
//! president may settle it by taking this node out.

use crate::failure::Cause;
use crate::Membership;
use kernel::{Context, Report};
use signal::signals::{CmLinkCutRep, CmPingConf, CmPingReq};
use signal::{BlockKind, BlockRef, NodeId, NodeSet};

/// Heartbeat intervals a check waits for answers.
const ASKING_INTERVALS: u64 = 2;
/// Heartbeat intervals the president gathers cut reports before it
/// chooses.
const GATHERING_INTERVALS: u64 = 2;
/// Heartbeat intervals a reporter waits for the president to settle its
/// cut before it leaves by itself.
const REPORTED_INTERVALS: u64 = 4;

/// This node's checks and, at the president, the cuts reported to it.
#[derive(Default)]
pub(crate) struct Connectivity {
    next_check: u32,
    checks: Vec<Check>,
    /// At the president: reported cuts not settled yet, as (reporter,
    /// suspect).
    cuts: Vec<(NodeId, NodeId)>,
    /// At the president: when the cuts gathered are settled (ctx ms).
    settle_at_ms: Option<u64>,
}

/// One suspicion being checked.
struct Check {
    id: u32,
    suspect: NodeId,
    /// How long the suspect had been silent when suspected (for the log).
    silent_ms: u64,
    /// The members asked, the suspect left out.
    asked: NodeSet,
    /// Those that answered.
    answered: NodeSet,
    /// Those that answered that they hear the suspect.
    hearing: NodeSet,
    stage: Stage,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Waiting for answers until then (ctx ms).
    Asking { until_ms: u64 },
    /// Reported to the president as a cut; leaving by itself then.
    Reported { until_ms: u64 },
}

impl Connectivity {
    /// Whether this node checks a suspicion now.
    pub(crate) fn checking(&self) -> bool {
        !self.checks.is_empty()
    }
}

fn membership_of(node: NodeId) -> BlockRef {
    BlockRef::new(node, BlockKind::Membership, 0)
}

impl Membership {
    /// The heartbeats suspect `node`, silent for `silent_ms`: check with
    /// the other members before taking it for failed.
    pub(crate) fn suspect(&mut self, node: NodeId, silent_ms: u64, ctx: &mut dyn Context) {
        let me = self.address.node;
        let alive = self.failures.alive();
        if !alive.contains(node) || self.connectivity.checks.iter().any(|c| c.suspect == node) {
            return;
        }
        let mut others = alive;
        others.remove(me);
        others.remove(node);
        if others.is_empty() {
            // Nobody to ask: the survival rule and the arbitrator decide.
            return self.heartbeats_missed(node, silent_ms, ctx);
        }
        let connectivity = &mut self.connectivity;
        connectivity.next_check = connectivity.next_check.wrapping_add(1);
        let id = connectivity.next_check;
        let interval = self.heartbeats.interval_ms();
        connectivity.checks.push(Check {
            id,
            suspect: node,
            silent_ms,
            asked: others,
            answered: NodeSet::EMPTY,
            hearing: NodeSet::EMPTY,
            stage: Stage::Asking {
                until_ms: ctx.now_ms() + ASKING_INTERVALS * interval,
            },
        });
        ctx.report(Report::Log(format!(
            "node {node} silent for {silent_ms} ms (missed {} heartbeats): asking {others} \
             whether they still hear it",
            self.heartbeats.missed_limit()
        )));
        let mut asked = others;
        asked.insert(node);
        self.send_to_members(asked, ctx, || CmPingReq {
            check: id,
            suspect: node,
        });
        self.publish_lease(ctx);
    }

    /// CM_PING_REQ: does this node still hear `suspect`?
    pub(crate) fn ping_requested(
        &mut self,
        from: BlockRef,
        check: u32,
        suspect: NodeId,
        ctx: &mut dyn Context,
    ) {
        let hears = suspect == self.address.node || self.heartbeats.hears(suspect, ctx.now_ms());
        let conf = CmPingConf {
            check,
            suspect,
            hears,
        };
        kernel::send(ctx, self.address, from, conf);
    }

    /// CM_PING_CONF: an answer to a check of this node.
    pub(crate) fn ping_answered(
        &mut self,
        from: BlockRef,
        check: u32,
        suspect: NodeId,
        hears: bool,
        ctx: &mut dyn Context,
    ) {
        let Some(index) = self
            .connectivity
            .checks
            .iter()
            .position(|c| c.id == check && c.suspect == suspect)
        else {
            return;
        };
        if from.node == suspect {
            return self.end_check(index, "it answered", ctx);
        }
        let entry = &mut self.connectivity.checks[index];
        if !entry.asked.contains(from.node) {
            return;
        }
        entry.answered.insert(from.node);
        if hears {
            entry.hearing.insert(from.node);
        }
        let asking = matches!(entry.stage, Stage::Asking { .. });
        if asking && entry.answered == entry.asked && entry.hearing.is_empty() {
            // Every member asked lost it too: no need to wait longer.
            self.conclude(index, ctx);
        }
    }

    /// The suspicion of the check at `index` is over without a failure.
    fn end_check(&mut self, index: usize, why: &str, ctx: &mut dyn Context) {
        let check = self.connectivity.checks.remove(index);
        self.heartbeats.clear_suspicion(check.suspect);
        ctx.report(Report::Log(format!(
            "node {} is not taken for failed: {why}",
            check.suspect
        )));
        self.publish_lease(ctx);
    }

    /// The check at `index` has its answers (or its time is up).
    fn conclude(&mut self, index: usize, ctx: &mut dyn Context) {
        let check = &self.connectivity.checks[index];
        let (suspect, silent_ms, asked, answered, hearing) = (
            check.suspect,
            check.silent_ms,
            check.asked,
            check.answered,
            check.hearing,
        );
        let interval = self.heartbeats.interval_ms();
        if answered.is_empty() {
            return self.shut_down(
                format!(
                    "this node stopped hearing node {suspect}, and none of the members it asked \
                     ({asked}) answered within {} ms: it is the node cut off",
                    ASKING_INTERVALS * interval
                ),
                ctx,
            );
        }
        if hearing.is_empty() {
            self.connectivity.checks.remove(index);
            return self.heartbeats_missed(suspect, silent_ms, ctx);
        }
        let check = &mut self.connectivity.checks[index];
        check.stage = Stage::Reported {
            until_ms: ctx.now_ms() + REPORTED_INTERVALS * interval,
        };
        let president = self.acting_president();
        ctx.report(Report::Log(format!(
            "node {suspect} is silent to this node but {hearing} still hear it: a bad link; \
             asking president {president} which of the two leaves"
        )));
        if president == self.address.node {
            self.cut_reported(self.address.node, suspect, ctx);
        } else {
            let report = CmLinkCutRep {
                membership_id: self.failures.membership_id,
                suspect,
                hearing,
            };
            kernel::send(ctx, self.address, membership_of(president), report);
        }
    }

    /// CM_LINK_CUT_REP (or this node's own): `reporter` does not hear
    /// `suspect`, which others do. Gathered at the president.
    pub(crate) fn cut_reported(
        &mut self,
        reporter: NodeId,
        suspect: NodeId,
        ctx: &mut dyn Context,
    ) {
        let alive = self.failures.alive();
        if self.acting_president() != self.address.node
            || !alive.contains(reporter)
            || !alive.contains(suspect)
            || reporter == suspect
        {
            // Not for this node, or already settled: the reporter leaves
            // by itself if the cut stays.
            return;
        }
        let cuts = &mut self.connectivity.cuts;
        if !cuts.contains(&(reporter, suspect)) {
            cuts.push((reporter, suspect));
        }
        let interval = self.heartbeats.interval_ms();
        self.connectivity
            .settle_at_ms
            .get_or_insert(ctx.now_ms() + GATHERING_INTERVALS * interval);
    }

    /// The heartbeat timer: checks whose time is up, suspects heard
    /// again, and the president's cuts.
    pub(crate) fn connectivity_tick(&mut self, ctx: &mut dyn Context) {
        let now = ctx.now_ms();
        let mut index = 0;
        while index < self.connectivity.checks.len() {
            if self.state == crate::start::StartState::ShutDown {
                return;
            }
            let check = &self.connectivity.checks[index];
            let (suspect, stage) = (check.suspect, check.stage);
            if !self.failures.alive().contains(suspect) {
                // Settled: it is taken for failed.
                self.connectivity.checks.remove(index);
                self.publish_lease(ctx);
                continue;
            }
            if self.heartbeats.hears(suspect, now) {
                self.end_check(index, "it was heard again", ctx);
                continue;
            }
            match stage {
                Stage::Asking { until_ms } if now >= until_ms => {
                    let before = self.connectivity.checks.len();
                    self.conclude(index, ctx);
                    if self.connectivity.checks.len() < before {
                        continue;
                    }
                }
                Stage::Reported { until_ms } if now >= until_ms => {
                    return self.shut_down(
                        format!(
                            "this node does not hear node {suspect}, which other members \
                             still hear, and the president did not settle it: leaving so that \
                             the members left hear each other"
                        ),
                        ctx,
                    );
                }
                _ => {}
            }
            index += 1;
        }
        if self.connectivity.settle_at_ms.is_some_and(|at| now >= at) {
            self.settle_cuts(ctx);
        }
    }

    /// At the president: choose who leaves so that no reported cut is
    /// left between members.
    fn settle_cuts(&mut self, ctx: &mut dyn Context) {
        self.connectivity.settle_at_ms = None;
        let cuts = std::mem::take(&mut self.connectivity.cuts);
        if self.acting_president() != self.address.node {
            return;
        }
        let me = self.address.node;
        let alive = self.failures.alive();
        let leaving = choose_leaving(&cuts, alive, me, &self.failures.groups);
        if leaving.is_empty() {
            return;
        }
        let described: Vec<String> = cuts
            .iter()
            .map(|(reporter, suspect)| format!("{reporter} does not hear {suspect}"))
            .collect();
        if leaving.contains(me) {
            // The others chosen go to the next president, which takes
            // them for failed with this node once its link breaks.
            let mut others = leaving;
            others.remove(me);
            let left = alive.difference(leaving);
            if let (false, Some(next)) = (others.is_empty(), left.first()) {
                let report = signal::signals::CmFailRep {
                    membership_id: self.failures.membership_id,
                    failed: others,
                };
                kernel::send(ctx, self.address, membership_of(next), report);
            }
            return self.shut_down(
                format!(
                    "as president, chose this node to leave (with {leaving}) so that the \
                     members left hear each other ({})",
                    described.join(", ")
                ),
                ctx,
            );
        }
        for node in leaving.iter() {
            let peer = cuts
                .iter()
                .find_map(|&(a, b)| {
                    if a == node {
                        Some(b)
                    } else if b == node {
                        Some(a)
                    } else {
                        None
                    }
                })
                .expect("a node chosen to leave is an end of a cut");
            self.take_for_failed(node, Cause::CutFrom(peer), ctx);
        }
        self.push_failures(ctx);
    }
}

/// Up to this many nodes at the ends of the cuts, every way of closing
/// them is weighed; beyond, one node at a time.
const EXHAUSTIVE_ENDS: u32 = 12;

/// The nodes to take out of `alive` so that no cut of `cuts` (reporter,
/// suspect) has both ends left, choosing, in this order: a node of every
/// group in `groups` kept, as few nodes as can be, not `president`, the
/// nodes that reported the most cuts (the one that hears badly reports
/// them all), the higher ids.
pub(crate) fn choose_leaving(
    cuts: &[(NodeId, NodeId)],
    alive: NodeSet,
    president: NodeId,
    groups: &[NodeSet],
) -> NodeSet {
    let open: Vec<(NodeId, NodeId)> = cuts
        .iter()
        .copied()
        .filter(|&(a, b)| a != b && alive.contains(a) && alive.contains(b))
        .collect();
    if open.is_empty() {
        return NodeSet::EMPTY;
    }
    let ends: Vec<NodeId> = NodeSet::of(open.iter().flat_map(|&(a, b)| [a, b]))
        .iter()
        .collect();
    let closes = |leaving: NodeSet| {
        open.iter()
            .all(|&(a, b)| leaving.contains(a) || leaving.contains(b))
    };
    let weigh = |leaving: NodeSet| {
        let left = alive.difference(leaving);
        let keeps_groups = groups
            .iter()
            .all(|group| group.is_empty() || !group.intersection(left).is_empty());
        let reported = open.iter().filter(|&&(a, _)| leaving.contains(a)).count();
        (
            keeps_groups,
            std::cmp::Reverse(leaving.len()),
            !leaving.contains(president),
            reported,
            leaving.bits(),
        )
    };
    if ends.len() as u32 <= EXHAUSTIVE_ENDS {
        return (1u32..(1 << ends.len()))
            .map(|mask| {
                NodeSet::of(
                    ends.iter()
                        .enumerate()
                        .filter(|&(bit, _)| mask & (1 << bit) != 0)
                        .map(|(_, &node)| node),
                )
            })
            .filter(|&leaving| closes(leaving))
            .max_by_key(|&leaving| weigh(leaving))
            .expect("taking every end closes every cut");
    }
    // Many ends: one at a time, the node in the most open cuts first.
    let mut leaving = NodeSet::EMPTY;
    while !closes(leaving) {
        let chosen = ends
            .iter()
            .copied()
            .filter(|&node| !leaving.contains(node))
            .max_by_key(|&node| {
                let in_cuts = open
                    .iter()
                    .filter(|&&(a, b)| {
                        (a == node || b == node) && !leaving.contains(a) && !leaving.contains(b)
                    })
                    .count();
                let mut with = leaving;
                with.insert(node);
                (in_cuts, weigh(with))
            })
            .expect("an open cut has an end left");
        leaving.insert(chosen);
    }
    leaving
}
