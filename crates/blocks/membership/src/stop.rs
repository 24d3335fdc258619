//! A graceful stop (docs/design/0018-node-restart.md, "Graceful stop"):
//! the node was asked to stop (SIGTERM, mgmd's `node N stop` or
//! `restart`). Before it goes, its tcs begin no new transaction and
//! finish those begun, so that no client of this node is left with a
//! commit whose outcome it cannot know:
//!
//! ```text
//!   io --NODE_STOP_REQ{limit}--> membership --TC_DRAIN_REQ--> every local tc
//!                                membership <--TC_DRAIN_CONF-- (none left)
//!   membership: Report::ReadyToStop{drained}   (all answered, or the limit)
//! ```
//!
//! Node-local only: the other nodes learn of the stop as of any failure,
//! when the links close. If the node dies while it drains, that is a
//! crash like any other; a peer's failure meanwhile is handled as
//! always (the draining tcs still take part). A tc whose transactions
//! outlast the limit (a client holding one open) does not hold the stop
//! up: the runtime stops at the limit, and those transactions end as at
//! a crash.

use crate::formation::job;
use crate::Membership;
use kernel::{Context, Report};
use signal::signals::{ContinueB, TcDrainReq};
use signal::{BlockKind, BlockRef, Envelope};

/// Where a graceful stop stands.
#[derive(Debug, Default)]
pub(crate) struct Stop {
    /// A stop was asked for.
    asked: bool,
    /// tc instances that have not answered TC_DRAIN_REQ.
    waiting: Vec<u16>,
    /// Report::ReadyToStop was made.
    reported: bool,
}

impl Membership {
    /// NODE_STOP_REQ from this node's io service. A repeated request
    /// changes nothing.
    pub(crate) fn stop_requested(&mut self, limit_ms: u64, ctx: &mut dyn Context) {
        if self.stop.asked {
            return;
        }
        self.stop.asked = true;
        self.stop.waiting = (0..self.tc_instances).collect();
        let me = self.address.node;
        for instance in 0..self.tc_instances {
            let tc = BlockRef::new(me, BlockKind::Tc, instance);
            kernel::send(ctx, self.address, tc, TcDrainReq {});
        }
        ctx.send_delayed(
            Envelope {
                from: self.address,
                to: self.address,
                signal: ContinueB {
                    job: job::STOP_LIMIT,
                }
                .into(),
            },
            limit_ms,
        );
        ctx.report(Report::Log(format!(
            "stopping: the tcs begin no new transaction and finish theirs (at most {limit_ms} ms)"
        )));
        self.ready_if_drained(ctx);
    }

    /// TC_DRAIN_CONF from local tc `instance`.
    pub(crate) fn tc_drained(&mut self, instance: u16, ctx: &mut dyn Context) {
        self.stop.waiting.retain(|&waiting| waiting != instance);
        self.ready_if_drained(ctx);
    }

    /// The stop's limit passed.
    pub(crate) fn stop_limit(&mut self, ctx: &mut dyn Context) {
        if self.stop.asked && !self.stop.reported {
            self.stop.reported = true;
            ctx.report(Report::Log(format!(
                "stopping: tc instance(s) {:?} still run transactions at the limit",
                self.stop.waiting
            )));
            ctx.report(Report::ReadyToStop { drained: false });
        }
    }

    fn ready_if_drained(&mut self, ctx: &mut dyn Context) {
        if self.stop.asked && !self.stop.reported && self.stop.waiting.is_empty() {
            self.stop.reported = true;
            ctx.report(Report::ReadyToStop { drained: true });
        }
    }
}
