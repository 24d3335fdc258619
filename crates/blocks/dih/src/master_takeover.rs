//! Master take-over (docs/design/failures.md §8, design 0011; NDB's
//! DBDIH master take-over): when the president fails, the next president's
//! dih becomes the master and finishes what the old one left of the GCI
//! switch and the durability rounds.
//!
//! ```text
//!  new master dih                  every live tc          every live dih (itself too)
//!   |-- MasterGcpReq ------------------>|                       |
//!   |<----- MasterGcpTcConf{current, prepared}                  |
//!   |-- MasterGcpReq ------------------------------------------->|
//!   |<------------------ MasterGcpDihConf{latest, complete, started}
//!   |   latest = max current; complete = max complete; started = min started
//!   |-- CopyGciReq{complete, next} ----------------------------->|  every system file
//!   |-- GcpPrepare{next} / GcpCommit{next} -->|  (a switch, as gcp.rs)
//! ```
//!
//! - *Who and when:* every survivor takes the new president (the lowest
//!   live id, as membership chooses it) from NODE_FAILREP; its dih starts
//!   once every survivor handled the change (NODE_FAIL_COMPLETE_REP), so
//!   no signal of the old master can still reach a tc or dih.
//! - *The switch:* the old master committed a new GCI to the tcs only
//!   after every tc was prepared (holding commit decisions). So the tcs
//!   are either all on one GCI, or some on the new one and the rest
//!   holding. The new master switches every tc to `next`, one epoch above
//!   the highest GCI any tc has: no tc gets a lower GCI than any other tc
//!   handed out, and the held decisions go on.
//! - *Durability:* what the old master's round had done stays done (ldm
//!   markers, system files). The highest GCI any dih recorded complete was
//!   saved by every ldm before its copy began, so the new master records
//!   it in every system file again, with `next` as started: the high part
//!   may then advance as before (`gcp.rs`), and the next advance makes the
//!   closed global checkpoint durable, every GCI below it with it.
//! - *Failures during take-over:* a tc or dih that fails before answering
//!   is forgotten (the round completes without it); a new master that
//!   fails is taken over by the next one, from the start.

use crate::gcp::SwitchState;
use crate::Dih;
use kernel::answers::Answers;
use kernel::{send, Context, Report};
use signal::signals::{GcpPrepare, MasterGcpDihConf, MasterGcpReq, MasterGcpTcConf};
use signal::{BlockKind, BlockRef, Gci, NodeId, NodeSet};

/// What the new master has learnt so far.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TakeoverAnswers {
    /// The membership it runs for.
    pub(crate) membership_id: u32,
    /// The highest GCI a tc is on.
    pub(crate) latest: Gci,
    /// The highest GCI a dih recorded complete.
    pub(crate) complete: Gci,
    /// The lowest GCI every dih recorded as started.
    pub(crate) started: Option<Gci>,
}

impl Dih {
    /// At NODE_FAILREP: the master failed; `president`, the agreed
    /// president of `live`, is the new one. At that node, this dih
    /// becomes the master over the live nodes and waits for
    /// NODE_FAIL_COMPLETE_REP.
    pub(crate) fn master_failed(
        &mut self,
        live: NodeSet,
        president: NodeId,
        ctx: &mut dyn Context,
    ) {
        let old = self.master();
        self.master = Some(BlockRef::new(president, BlockKind::Dih, 0));
        ctx.report(Report::Log(format!(
            "the master dih (node {}) failed; node {president}'s dih takes over",
            old.node
        )));
        if !self.is_master() {
            return;
        }
        let tcs = crate::blocks_on(live.iter(), BlockKind::Tc, self.tc_instances);
        let ldms = crate::blocks_on(live.iter(), BlockKind::Ldm, self.ldm_instances);
        let dihs = crate::blocks_on(live.iter(), BlockKind::Dih, 1);
        let takeover_pending = self.durability.takeover_pending;
        self.gcp.tcs = Answers::new(tcs.clone());
        self.durability = crate::durability::Durability::new(tcs, ldms, dihs);
        self.durability.takeover_pending = takeover_pending;
        self.gcp.state = SwitchState::AwaitingTakeover;
    }

    /// At NODE_FAIL_COMPLETE_REP: a new master whose change every survivor
    /// handled asks every live tc and dih where they stand.
    pub(crate) fn start_master_takeover(&mut self, ctx: &mut dyn Context) {
        if !matches!(self.gcp.state, SwitchState::AwaitingTakeover)
            || !self.node_failures.all_complete()
        {
            return;
        }
        let membership_id = self.node_failures.membership_id();
        self.gcp.state = SwitchState::TakingOver(TakeoverAnswers {
            membership_id,
            latest: self.gcp.latest,
            complete: self.durability.complete,
            started: None,
        });
        self.gcp.tcs.start_round();
        self.durability.dihs.start_round();
        let request = || MasterGcpReq { membership_id };
        for &tc in self.gcp.tcs.members() {
            send(ctx, self.address, tc, request());
        }
        for &dih in self.durability.dihs.members() {
            send(ctx, self.address, dih, request());
        }
        ctx.fault_point(kernel::faults::FaultPoint::MasterTakeoverAfterQuery);
    }

    /// At every dih: where this one stands, for the new master.
    pub(crate) fn master_gcp_req(
        &mut self,
        from: BlockRef,
        request: MasterGcpReq,
        ctx: &mut dyn Context,
    ) {
        if from != self.master() {
            ctx.report(Report::Log(format!(
                "dih {}: ignored MASTER_GCP_REQ from {from}: the master is {}",
                self.address,
                self.master()
            )));
            return;
        }
        let conf = MasterGcpDihConf {
            membership_id: request.membership_id,
            latest: self.gcp.latest,
            complete: self.durability.complete,
            started: self.recorded_started,
        };
        send(ctx, self.address, from, conf);
    }

    /// A tc's answer.
    pub(crate) fn master_gcp_tc_conf(
        &mut self,
        from: BlockRef,
        conf: MasterGcpTcConf,
        ctx: &mut dyn Context,
    ) {
        let SwitchState::TakingOver(mut answers) = self.gcp.state else {
            return; // Not taking over (a late answer of an earlier run).
        };
        if conf.membership_id != answers.membership_id {
            return;
        }
        answers.latest = answers.latest.max(conf.current_gci);
        self.gcp.state = SwitchState::TakingOver(answers);
        if self.gcp.tcs.record(from, "MasterGcpTcConf") {
            self.master_takeover_step(ctx);
        }
    }

    /// A dih's answer.
    pub(crate) fn master_gcp_dih_conf(
        &mut self,
        from: BlockRef,
        conf: MasterGcpDihConf,
        ctx: &mut dyn Context,
    ) {
        let SwitchState::TakingOver(mut answers) = self.gcp.state else {
            return;
        };
        if conf.membership_id != answers.membership_id {
            return;
        }
        answers.latest = answers.latest.max(conf.latest);
        answers.complete = answers.complete.max(conf.complete);
        answers.started = Some(
            answers
                .started
                .map_or(conf.started, |s| s.min(conf.started)),
        );
        self.gcp.state = SwitchState::TakingOver(answers);
        if self.durability.dihs.record(from, "MasterGcpDihConf") {
            self.master_takeover_step(ctx);
        }
    }

    /// Once every tc and dih answered (or failed): record the complete GCI
    /// and the next one as started everywhere, and switch every tc to it.
    pub(crate) fn master_takeover_step(&mut self, ctx: &mut dyn Context) {
        let SwitchState::TakingOver(answers) = self.gcp.state else {
            return;
        };
        if !self.gcp.tcs.is_complete() || !self.durability.dihs.is_complete() {
            return;
        }
        let latest = answers.latest;
        let next = Gci::from_parts(
            latest.high(),
            latest
                .low()
                .checked_add(1)
                .expect("GCI epoch exhausted at master take-over"),
        );
        ctx.report(Report::Log(format!(
            "dih {}: master take-over: tcs at {latest}, {} complete; switching to {next}",
            self.address, answers.complete
        )));
        self.gcp.latest = latest;
        self.gcp.last_high_advance_ms = ctx.now_ms();
        self.durability.complete = answers.complete;
        self.durability.recorded_started_high = answers.started.map_or(0, Gci::high);
        self.start_copy(answers.complete, next, ctx);
        self.gcp.state = SwitchState::Preparing { new_gci: next };
        self.gcp.tcs.start_round();
        for &tc in self.gcp.tcs.members() {
            send(ctx, self.address, tc, GcpPrepare { new_gci: next });
        }
    }
}
