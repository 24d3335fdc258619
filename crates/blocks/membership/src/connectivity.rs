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
//!   | the suspect heard again after the report:                 |
//!   |-- CmLinkCutRep{suspect, withdraw} ------------------------>| drops the cut
//!   |<- CmLinkCutConf{suspect} ---------------------------------|
//! ```
//!
//! The read lease stays safe whichever node the president takes out: a
//! node checking a suspicion serves no reads (`lease`), and a node that
//! reported a cut acks none of the suspect's heartbeats until the report
//! is settled or withdrawn, so the suspect's lease from it has run out by
//! the time anyone may act on the report. A heartbeat of the suspect
//! that arrives during the check ends it (it is not taken for failed),
//! also when the answers are in: a suspect it acked must not be failed
//! on that check.
//!
//! The president chooses, over every cut reported, the nodes that leave:
//! at least one end of each cut, by the survival rule's best verdict for
//! the rest, as few as can be, then the nodes that reported the most cuts
//! (a node that hears badly reports its peers), then not itself.
//!
//! When a participant dies or stalls at a step:
//! - the suspect, during the check: nobody hears it; it is taken for
//!   failed as before the check existed;
//! - a member asked: its answer is missing; the check ends at its
//!   deadline with the answers it has (no answer at all: this node is
//!   the one cut off, and leaves);
//! - the president, before it settles a cut: the reporter sends its
//!   report (or its withdrawal) again to the next president; one that
//!   hears nothing back within four intervals leaves by itself, unless
//!   the suspect is the president: it settles that cut itself (the
//!   report reaches it, or it misses the reporter and reports the cut
//!   itself), so the reporter asks again, and the two ends never both
//!   leave;
//! - a ping or an answer that is late, duplicated or of a check already
//!   over: ignored (matched by check and suspect).
//!
//! While a node checks a suspicion it serves no reads (`lease`): the
//! president may settle it by taking this node out.

use crate::failure::Cause;
use crate::survival;
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
/// cut before it leaves by itself (or, the suspect being the president,
/// asks again).
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
    /// When the suspect was last heard from as the check began: heard
    /// after that, it is alive.
    heard_before_ms: u64,
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
    /// Reported to president `to` as a cut; leaving by itself at
    /// `until_ms` if it is not settled.
    Reported { until_ms: u64, to: NodeId },
    /// The suspect was heard again after the report: the withdrawal went
    /// to president `to`, which answers once the cut is dropped.
    Withdrawing { until_ms: u64, to: NodeId },
}

impl Connectivity {
    /// Whether this node checks a suspicion now.
    pub(crate) fn checking(&self) -> bool {
        !self.checks.is_empty()
    }

    /// Whether this node reported a cut to `node` that is not settled or
    /// withdrawn yet: it acks none of `node`'s heartbeats meanwhile.
    pub(crate) fn reported(&self, node: NodeId) -> bool {
        self.checks.iter().any(|check| {
            check.suspect == node
                && matches!(
                    check.stage,
                    Stage::Reported { .. } | Stage::Withdrawing { .. }
                )
        })
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
        let interval = self.heartbeats.interval_ms();
        let heard_before_ms = self.heartbeats.last_heard_ms(node).unwrap_or(0);
        let connectivity = &mut self.connectivity;
        connectivity.next_check = connectivity.next_check.wrapping_add(1);
        let id = connectivity.next_check;
        connectivity.checks.push(Check {
            id,
            suspect: node,
            silent_ms,
            heard_before_ms,
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

    /// Whether the suspect of the check at `index` was heard after the
    /// check began (a heartbeat, which this node acked, or a frame).
    fn heard_again(&self, index: usize) -> bool {
        let check = &self.connectivity.checks[index];
        self.heartbeats
            .last_heard_ms(check.suspect)
            .is_some_and(|heard| heard > check.heard_before_ms)
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
        if self.heard_again(index) {
            // Alive after all; and acked, so it must not be failed now.
            return self.end_check(index, "it was heard again", ctx);
        }
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
        let president = self.acting_president();
        ctx.report(Report::Log(format!(
            "node {suspect} is silent to this node but {hearing} still hear it: a bad link; \
             asking president {president} which of the two leaves"
        )));
        self.send_cut_report(index, false, ctx);
    }

    /// Sends the check at `index`'s cut report (or its withdrawal) to the
    /// acting president, and waits four intervals for it to be settled.
    fn send_cut_report(&mut self, index: usize, withdraw: bool, ctx: &mut dyn Context) {
        let president = self.acting_president();
        let until_ms = ctx.now_ms() + REPORTED_INTERVALS * self.heartbeats.interval_ms();
        let check = &mut self.connectivity.checks[index];
        let suspect = check.suspect;
        check.stage = if withdraw {
            Stage::Withdrawing {
                until_ms,
                to: president,
            }
        } else {
            Stage::Reported {
                until_ms,
                to: president,
            }
        };
        let me = self.address.node;
        if president == me {
            if withdraw {
                self.drop_cut(me, suspect);
                return self.end_check(index, "it was heard again", ctx);
            }
            return self.cut_reported(me, suspect, false, ctx);
        }
        let report = CmLinkCutRep {
            membership_id: self.failures.membership_id,
            suspect,
            withdraw,
        };
        kernel::send(ctx, self.address, membership_of(president), report);
    }

    /// At the president: the cut `reporter` reported to `suspect` is no
    /// longer to be settled.
    fn drop_cut(&mut self, reporter: NodeId, suspect: NodeId) {
        let cuts = &mut self.connectivity.cuts;
        cuts.retain(|&cut| cut != (reporter, suspect));
        if cuts.is_empty() {
            self.connectivity.settle_at_ms = None;
        }
    }

    /// CM_LINK_CUT_CONF: the president dropped this node's withdrawn
    /// report of `suspect`.
    pub(crate) fn cut_withdrawn(&mut self, from: BlockRef, suspect: NodeId, ctx: &mut dyn Context) {
        let Some(index) = self.connectivity.checks.iter().position(|check| {
            check.suspect == suspect
                && matches!(check.stage, Stage::Withdrawing { to, .. } if to == from.node)
        }) else {
            return;
        };
        self.end_check(
            index,
            "it was heard again, and the president dropped the report",
            ctx,
        );
    }

    /// CM_LINK_CUT_REP (or this node's own): `reporter` does not hear
    /// `suspect`, which others do (gathered at the president), or, with
    /// `withdraw`, hears it again (the cut is dropped and the reporter
    /// told).
    pub(crate) fn cut_reported(
        &mut self,
        reporter: NodeId,
        suspect: NodeId,
        withdraw: bool,
        ctx: &mut dyn Context,
    ) {
        let alive = self.failures.alive();
        if self.acting_president() != self.address.node {
            // Not for this node: the reporter sends it again to the
            // president once it knows which node that is.
            return;
        }
        if withdraw {
            self.drop_cut(reporter, suspect);
            let conf = signal::signals::CmLinkCutConf { suspect };
            kernel::send(ctx, self.address, membership_of(reporter), conf);
            return;
        }
        if !alive.contains(reporter) || !alive.contains(suspect) || reporter == suspect {
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
            let heard_again = self.heard_again(index);
            let president = self.acting_president();
            let before = self.connectivity.checks.len();
            match stage {
                Stage::Asking { .. } if heard_again => {
                    self.end_check(index, "it was heard again", ctx)
                }
                Stage::Asking { until_ms } if now >= until_ms => self.conclude(index, ctx),
                Stage::Reported { .. } if heard_again => self.send_cut_report(index, true, ctx),
                Stage::Reported { to, .. } if to != president => {
                    self.send_cut_report(index, false, ctx)
                }
                Stage::Withdrawing { to, .. } if to != president => {
                    self.send_cut_report(index, true, ctx)
                }
                // The suspect is the president: it settles the cut itself,
                // taking out this node or leaving (it hears the report, or
                // misses this node and reports the cut to itself). Leaving
                // here as well would take both ends, which may be all of a
                // node group (design 0019, finding 12): ask again instead.
                Stage::Reported { until_ms, .. } if now >= until_ms && suspect == president => {
                    self.send_cut_report(index, false, ctx)
                }
                Stage::Withdrawing { until_ms, .. } if now >= until_ms && suspect == president => {
                    self.send_cut_report(index, true, ctx)
                }
                Stage::Reported { until_ms, .. } if now >= until_ms => {
                    return self.shut_down(
                        format!(
                            "this node does not hear node {suspect}, which other members \
                             still hear, and the president did not settle it: leaving so that \
                             the members left hear each other"
                        ),
                        ctx,
                    );
                }
                Stage::Withdrawing { until_ms, .. } if now >= until_ms => {
                    return self.shut_down(
                        format!(
                            "this node reported its link to node {suspect} bad, hears it again, \
                             and the president did not confirm dropping the report: leaving, as \
                             the president may still act on it"
                        ),
                        ctx,
                    );
                }
                _ => {}
            }
            if self.connectivity.checks.len() == before {
                index += 1;
            }
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
        let starting = self.failures.starting;
        let leaving = choose_leaving(&cuts, alive, me, starting, &self.failures.groups);
        if leaving.is_empty() {
            return;
        }
        let described: Vec<String> = cuts
            .iter()
            .map(|(reporter, suspect)| format!("{reporter} does not hear {suspect}"))
            .collect();
        if leaving.contains(me) {
            // Alone by the choice's order, unless nothing else does: a
            // president cannot lead the change that takes it out, and
            // handing the others to the next one races with the links
            // breaking. The others' cuts, if they stay, are reported again
            // to the next president.
            return self.shut_down(
                format!(
                    "as president, chose this node to leave (of {leaving}) so that the members \
                     left hear each other ({})",
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
/// suspect) has both ends left, choosing, in this order: the best verdict
/// of the survival rule for the nodes left (continue, then ask the
/// arbitrator, then shut down; `starting` members hold no data that
/// counts), as few nodes as can be, not `president` with other nodes (it
/// cannot lead a change that takes it out), the nodes that reported the
/// most cuts (a node that hears badly reports its links; the other end of
/// a link cut both ways would do as well), not `president`, the higher
/// ids. The reporter before the president: a president that hears badly
/// would otherwise take the healthy nodes out one report at a time.
pub(crate) fn choose_leaving(
    cuts: &[(NodeId, NodeId)],
    alive: NodeSet,
    president: NodeId,
    starting: NodeSet,
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
        let verdict = match survival::judge_counting_data(alive, left, starting, groups) {
            survival::Verdict::Continue(_) => 2,
            survival::Verdict::Arbitrate => 1,
            survival::Verdict::ShutDown(_) => 0,
        };
        let reported = open.iter().filter(|&&(a, _)| leaving.contains(a)).count();
        (
            verdict,
            std::cmp::Reverse(leaving.len()),
            // The president can leave alone, not lead its own removal
            // with others'.
            !(leaving.contains(president) && leaving.len() > 1),
            reported,
            !leaving.contains(president),
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
