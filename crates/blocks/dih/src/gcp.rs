//! The GCI switch (NDB's GCP_PREPARE / GCP_COMMIT,
//! docs/design/durability.md §1).
//!
//! ```text
//!  master dih                      every tc of every node     other dihs
//!   |-- GcpPrepare{new} ---------------->|                          |
//!   |                                    |  hold new commit decisions
//!   |<------------------ GcpPrepareConf -|                          |
//!   |   (all tcs prepared)               |                          |
//!   |-- GcpCommit{new} ----------------->|  commits now get `new`; release
//!   |<------------------- GcpCommitConf -|                          |
//!   |   (all tcs switched: report LatestGci, arm the timer)         |
//!   |-- GcpCompleteRep{new} ------------------------------------------>|
//!   |                                    |        report LatestGci  |
//! ```
//!
//! Only the master (the president's dih) switches; the round covers every
//! tc of every data node, so one GCI holds cluster-wide. The master starts
//! in phase GLOBAL_CHECKPOINT, which runs only after the cluster is formed, so every node
//! is connected and every tc initialised before the first GcpCommit.
//!
//! Because no tc takes a commit decision between its prepare and its commit,
//! and the commit goes out only when every tc is prepared, a transaction
//! that commits after another one saw its result always gets a GCI at least
//! as large: no tc can still be handing out the old GCI once any tc hands
//! out the new one.
//!
//! Making a closed global checkpoint durable is `durability.rs`.
//!
//! A GCI's high part is the global checkpoint made durable; the low part is
//! an epoch within it. A switch advances the epoch every `epoch_interval_ms`
//! and the high part once `gcp_interval_ms` have passed since it last
//! advanced. Phase GLOBAL_CHECKPOINT commits the start GCI to every tc (tcs hold
//! commit decisions until they have one) before the first timed switch;
//! the other dihs end their phase GLOBAL_CHECKPOINT when they hear of that GCI (or at once
//! if they already have), so a node reports started only once its tcs can
//! commit.

use crate::Dih;
use kernel::answers::Answers;
use kernel::{Context, Report};
use signal::signals::{ContinueB, GcpCommit, GcpCompleteRep, GcpPrepare, StartPhaseConf};
use signal::{BlockRef, Envelope, Gci};

/// The start phase in which dih hands tcs their first GCI and starts
/// switching (membership's start module documents every phase).
pub const GCP_START_PHASE: u8 = signal::phases::GLOBAL_CHECKPOINT;

/// The first GCI of a cluster started with nothing on disk (a restart
/// starts above every GCI found, `restart.rs`).
pub const INITIAL_GCI: Gci = Gci::from_parts(1, 0);

/// dih's `ContinueB` jobs.
pub mod job {
    /// Time for the next GCI switch.
    pub const GCP_TIMER: u32 = 1;
}

/// Where the switch protocol stands.
#[derive(Clone, Copy, Debug)]
pub(crate) enum SwitchState {
    /// Before phase GLOBAL_CHECKPOINT: tcs have no GCI.
    NotStarted,
    /// Phase GLOBAL_CHECKPOINT: `gci` is being committed to every tc; `start_requester`
    /// gets the phase's conf once all have it.
    InitialCommit { gci: Gci, start_requester: BlockRef },
    /// Phase GLOBAL_CHECKPOINT at a non-master dih: waiting to hear from the master
    /// that every tc has the initial GCI; `start_requester` then gets the
    /// phase's conf.
    AwaitingMaster { start_requester: BlockRef },
    /// Phase GLOBAL_CHECKPOINT of a node restart: waiting for the master
    /// to include this node's tcs and ldms (`node_restart.rs`).
    AwaitingInclusion { start_requester: BlockRef },
    /// Between switches; at the master the timer is armed. A non-master
    /// dih stays here once started.
    Idle,
    /// Phase one: waiting for every tc to confirm it holds commit decisions.
    Preparing { new_gci: Gci },
    /// Phase two: waiting for every tc to confirm it moved to `gci`.
    Committing { gci: Gci },
    /// This dih became the master when the old one failed; it waits until
    /// every survivor handled that (master_takeover.rs).
    AwaitingTakeover,
    /// Master take-over: asking every live tc and dih where it stands.
    TakingOver(crate::master_takeover::TakeoverAnswers),
}

/// The switch protocol's state.
pub(crate) struct GlobalCheckpoint {
    pub(crate) state: SwitchState,
    /// The tcs that take part (every tc of every node at the master, none
    /// elsewhere), and who answered the current phase.
    pub(crate) tcs: Answers,
    /// The GCI every tc has switched to (at a non-master dih: the last one
    /// the master reported).
    pub(crate) latest: Gci,
    /// When the high part last advanced (ctx time).
    pub(crate) last_high_advance_ms: u64,
    /// Timed switches completed.
    pub(crate) switches: u64,
    pub(crate) epoch_interval_ms: u64,
    pub(crate) gcp_interval_ms: u64,
}

impl GlobalCheckpoint {
    pub(crate) fn new(
        tcs: Answers,
        epoch_interval_ms: u64,
        gcp_interval_ms: u64,
    ) -> GlobalCheckpoint {
        assert!(
            epoch_interval_ms > 0,
            "an epoch interval of 0 would switch GCIs in a busy loop"
        );
        GlobalCheckpoint {
            state: SwitchState::NotStarted,
            tcs,
            latest: Gci(0),
            last_high_advance_ms: 0,
            switches: 0,
            epoch_interval_ms,
            gcp_interval_ms,
        }
    }
}

impl Dih {
    /// Phase GLOBAL_CHECKPOINT: the master commits the initial GCI to every tc; the
    /// others wait until the master says it has.
    pub(crate) fn start_global_checkpoints(&mut self, requester: BlockRef, ctx: &mut dyn Context) {
        assert!(
            matches!(self.gcp.state, SwitchState::NotStarted),
            "dih {}: start phase {GCP_START_PHASE} ran twice (switch state {:?})",
            self.address,
            self.gcp.state
        );
        if !self.is_master() {
            if self.gcp.latest == Gci(0) {
                self.gcp.state = SwitchState::AwaitingMaster {
                    start_requester: requester,
                };
            } else {
                // The master finished its phase GLOBAL_CHECKPOINT before this node began.
                self.gcp.state = SwitchState::Idle;
                let conf = StartPhaseConf {
                    phase: GCP_START_PHASE,
                };
                kernel::send(ctx, self.address, requester, conf);
            }
            return;
        }
        // The start GCI goes into every system file first (durability.rs),
        // then to the tcs (`commit_initial_gci`).
        self.record_start_gci(requester, ctx);
    }

    /// At the master: the start GCI is recorded; commit it to every tc.
    pub(crate) fn commit_initial_gci(&mut self, requester: BlockRef, ctx: &mut dyn Context) {
        let start = self.restart.start_gci;
        self.gcp.last_high_advance_ms = ctx.now_ms();
        self.gcp.state = SwitchState::InitialCommit {
            gci: start,
            start_requester: requester,
        };
        self.send_to_tcs(ctx, |gci| GcpCommit { gci }, start);
    }

    /// The timer fired: start a switch unless one is running.
    pub(crate) fn gcp_timer(&mut self, ctx: &mut dyn Context) {
        assert!(
            self.is_master(),
            "dih {}: GCP timer at a dih that is not the master",
            self.address
        );
        if !matches!(self.gcp.state, SwitchState::Idle) {
            // A switch is running (or dih has not started): it arms the
            // next timer when it completes, so this one is not needed.
            return;
        }
        let now_ms = ctx.now_ms();
        let latest = self.gcp.latest;
        // The high part may run at most one ahead of what every system
        // file records as started (durability.rs): otherwise it waits for
        // the save round, and epochs go on meanwhile.
        let high_may_advance = latest.high() <= self.durability.recorded_started_high;
        let new_gci = if high_may_advance
            && now_ms.saturating_sub(self.gcp.last_high_advance_ms) >= self.gcp.gcp_interval_ms
        {
            self.gcp.last_high_advance_ms = now_ms;
            let high = latest
                .high()
                .checked_add(1)
                .expect("GCI high part exhausted (2^32 global checkpoints)");
            Gci::from_parts(high, 0)
        } else {
            let low = latest
                .low()
                .checked_add(1)
                .expect("GCI epoch exhausted: gcp_interval_ms / epoch_interval_ms exceeds 2^32");
            Gci::from_parts(latest.high(), low)
        };
        assert!(
            new_gci > latest,
            "GCIs strictly increase: {new_gci} after {latest}"
        );
        self.include_in_switch();
        self.gcp.state = SwitchState::Preparing { new_gci };
        self.send_to_tcs(ctx, |new_gci| GcpPrepare { new_gci }, new_gci);
        ctx.fault_point(kernel::faults::FaultPoint::GcpAfterPrepare);
    }

    /// A tc holds its commit decisions for `new_gci`.
    pub(crate) fn gcp_prepare_conf(&mut self, from: BlockRef, new_gci: Gci, ctx: &mut dyn Context) {
        let SwitchState::Preparing { new_gci: preparing } = self.gcp.state else {
            panic!(
                "dih {}: GcpPrepareConf {new_gci} from {from} while no prepare runs ({:?})",
                self.address, self.gcp.state
            );
        };
        assert_eq!(
            new_gci, preparing,
            "GcpPrepareConf from {from} confirms another GCI than the one being prepared"
        );
        if self.gcp.tcs.record(from, "GcpPrepareConf") {
            self.switch_step_done(ctx);
        }
    }

    /// A tc moved to `gci`.
    pub(crate) fn gcp_commit_conf(&mut self, from: BlockRef, gci: Gci, ctx: &mut dyn Context) {
        let committing = match self.gcp.state {
            SwitchState::InitialCommit { gci, .. } | SwitchState::Committing { gci } => gci,
            state => panic!(
                "dih {}: GcpCommitConf {gci} from {from} while no commit runs ({state:?})",
                self.address
            ),
        };
        assert_eq!(
            gci, committing,
            "GcpCommitConf from {from} confirms another GCI than the one being committed"
        );
        if self.gcp.tcs.record(from, "GcpCommitConf") {
            self.switch_step_done(ctx);
        }
    }

    /// Every tc of the round answered (or the rest failed): the switch
    /// goes on to its next step.
    fn switch_step_done(&mut self, ctx: &mut dyn Context) {
        match self.gcp.state {
            SwitchState::Preparing { new_gci } => {
                self.gcp.state = SwitchState::Committing { gci: new_gci };
                self.send_to_tcs(ctx, |gci| GcpCommit { gci }, new_gci);
                ctx.fault_point(kernel::faults::FaultPoint::GcpAfterCommit);
            }
            SwitchState::InitialCommit {
                gci,
                start_requester,
            } => {
                self.switched(gci, ctx);
                self.tell_other_dihs(gci, ctx);
                kernel::send(
                    ctx,
                    self.address,
                    start_requester,
                    StartPhaseConf {
                        phase: GCP_START_PHASE,
                    },
                );
                self.arm_gcp_timer(ctx);
            }
            SwitchState::Committing { gci } => {
                let previous = self.gcp.latest;
                self.gcp.switches += 1;
                self.switched(gci, ctx);
                self.tell_other_dihs(gci, ctx);
                self.included_at(gci, ctx);
                self.arm_gcp_timer(ctx);
                if gci.high() > previous.high() {
                    // Every tc is past `previous`'s global checkpoint.
                    self.request_durable(previous, ctx);
                }
            }
            SwitchState::TakingOver(_) => self.master_takeover_step(ctx),
            state => unreachable!("dih {}: no switch step waits in {state:?}", self.address),
        }
    }

    /// At the master: the data nodes of `failed` left the cluster; the
    /// switch no longer waits for their tcs (a step that waited only for
    /// them is done), and the other dihs no longer hear of switches.
    pub(crate) fn switch_without(&mut self, failed: signal::NodeSet, ctx: &mut dyn Context) {
        if self.gcp.tcs.forget_nodes(failed) {
            self.switch_step_done(ctx);
        }
    }

    /// At a non-master dih: the master switched every tc to `gci`.
    pub(crate) fn gcp_complete_rep(&mut self, from: BlockRef, gci: Gci, ctx: &mut dyn Context) {
        assert!(
            from == self.master() && !self.is_master(),
            "dih {}: GcpCompleteRep {gci} from {from}, but {} is the master",
            self.address,
            self.master()
        );
        assert!(
            gci > self.gcp.latest,
            "GCIs strictly increase: {gci} after {}",
            self.gcp.latest
        );
        if self.gcp.latest != Gci(0) {
            self.gcp.switches += 1;
        }
        self.gcp.latest = gci;
        ctx.report(Report::LatestGci(gci));
        match self.gcp.state {
            // Heard before this node's phase GLOBAL_CHECKPOINT (the master's start may run
            // ahead): phase GLOBAL_CHECKPOINT will find the GCI and confirm at once.
            SwitchState::NotStarted | SwitchState::Idle | SwitchState::AwaitingInclusion { .. } => {
            }
            SwitchState::AwaitingMaster { start_requester } => {
                self.gcp.state = SwitchState::Idle;
                let conf = StartPhaseConf {
                    phase: GCP_START_PHASE,
                };
                kernel::send(ctx, self.address, start_requester, conf);
            }
            state => panic!(
                "dih {}: a non-master dih in switch state {state:?}",
                self.address
            ),
        }
    }

    /// The master tells every other dih that every tc is on `gci`.
    fn tell_other_dihs(&mut self, gci: Gci, ctx: &mut dyn Context) {
        for &dih in &self.other_dihs {
            kernel::send(ctx, self.address, dih, GcpCompleteRep { gci });
        }
    }

    /// Every tc is on `gci`.
    fn switched(&mut self, gci: Gci, ctx: &mut dyn Context) {
        assert!(
            gci > self.gcp.latest,
            "GCIs strictly increase: {gci} after {}",
            self.gcp.latest
        );
        self.gcp.latest = gci;
        self.gcp.state = SwitchState::Idle;
        ctx.report(Report::LatestGci(gci));
    }

    fn arm_gcp_timer(&mut self, ctx: &mut dyn Context) {
        ctx.send_delayed(
            Envelope {
                from: self.address,
                to: self.address,
                signal: ContinueB {
                    job: job::GCP_TIMER,
                }
                .into(),
            },
            self.gcp.epoch_interval_ms,
        );
    }

    /// Starts a round and sends `make(gci)` to every tc.
    fn send_to_tcs<S: Into<signal::Signal>>(
        &mut self,
        ctx: &mut dyn Context,
        make: fn(Gci) -> S,
        gci: Gci,
    ) {
        self.gcp.tcs.start_round();
        for &tc in self.gcp.tcs.members() {
            kernel::send(ctx, self.address, tc, make(gci));
        }
    }
}
