//! Making a global checkpoint durable (docs/design/durability.md §2; NDB's
//! GCP_NODEFINISH, GCP_SAVEREQ and COPY_GCIREQ).
//!
//! ```text
//!  master dih            every tc        every ldm          every dih (itself too)
//!   |-- GcpFlushReq{g} ---->|  (all commits of GCIs <= g finished on every replica)
//!   |<---- GcpFlushConf ----|
//!   |-- GcpSaveReq{g} ---------------------->| "g complete" marker, write, fsync
//!   |<------------------------- GcpSaveConf -|
//!   |-- CopyGciReq{g, started} ----------------------------------->| system file, fsync x2
//!   |<------------------------------------------------ CopyGciConf -|
//!   |-- GcpDurableRep{g} -->|  (answers clients waiting for g)
//! ```
//!
//! A round starts when a switch advances the high part of the GCI: `g` is
//! the last GCI of the global checkpoint just closed (every tc has moved
//! past it, so no commit can still get it). One round runs at a time; a
//! newer GCI waiting for its round replaces an older one (marking g
//! complete marks every earlier GCI complete too).
//!
//! The system file also records `started`, the master's current GCI. The
//! switch never advances the high part more than one past the highest high
//! part every system file records as started (`gcp.rs`), so after a crash
//! new GCIs can start above every GCI ever handed out: at most one above
//! the recorded one (`restart.rs`).

use crate::Dih;
use kernel::{send, Context, Report};
use signal::signals::{
    CopyGciConf, CopyGciReq, GcpDurableRep, GcpFlushReq, GcpSaveReq, StartPhaseConf,
};
use signal::{BlockKind, BlockRef, Gci, NodeId, NodeSet};
use storage::system_file::SystemFile;

/// Where the master's round stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Round {
    /// No round runs.
    Idle,
    /// Waiting for every tc to finish the commits of GCIs up to `gci`.
    Flushing { gci: Gci },
    /// Every live tc finished them; a take-over of failed tcs'
    /// transactions (which may commit at `gci` or below) has not.
    AwaitingTakeover { gci: Gci },
    /// Waiting for every ldm to make its marker of `gci` durable.
    Saving { gci: Gci },
    /// Waiting for every dih to record `gci` complete in its system file.
    Copying { gci: Gci, started: Gci },
}

/// What the master's rounds know.
pub(crate) struct Durability {
    pub(crate) round: Round,
    /// The newest GCI waiting for a round.
    pending: Option<Gci>,
    /// The latest GCI recorded complete (at a non-master: the last one its
    /// system file recorded).
    pub(crate) complete: Gci,
    /// The highest high part every system file records as started.
    pub(crate) recorded_started_high: u32,
    /// Every tc, every ldm and every dih of the cluster (master only).
    pub(crate) tcs: kernel::answers::Answers,
    pub(crate) ldms: kernel::answers::Answers,
    pub(crate) dihs: kernel::answers::Answers,
    /// At the master's start: the phase requester to confirm once the
    /// first round (recording the start GCI) is done.
    pub(crate) start_requester: Option<BlockRef>,
    /// The membership whose take-over of failed tcs' transactions has
    /// not reported complete (0: none): no round gets past flushing
    /// until it does (docs/design/failures.md §7).
    pub(crate) takeover_pending: u32,
    /// Restarting nodes included in the GCI protocol whose tcs and ldms
    /// join the next round (`node_restart.rs`).
    pub(crate) joining: Vec<NodeId>,
    /// Restarting nodes whose dih joins the COPY_GCI of the first round
    /// of a GCI at least the one given.
    pub(crate) recording: Vec<(NodeId, Gci)>,
}

impl Durability {
    pub(crate) fn new(tcs: Vec<BlockRef>, ldms: Vec<BlockRef>, dihs: Vec<BlockRef>) -> Durability {
        Durability {
            round: Round::Idle,
            pending: None,
            complete: Gci(0),
            recorded_started_high: 0,
            tcs: kernel::answers::Answers::new(tcs),
            ldms: kernel::answers::Answers::new(ldms),
            dihs: kernel::answers::Answers::new(dihs),
            start_requester: None,
            takeover_pending: 0,
            joining: Vec::new(),
            recording: Vec::new(),
        }
    }
}

impl Dih {
    /// At the master, after a switch closed global checkpoint `gci`'s high
    /// part: make it durable when the running round (if any) is done.
    pub(crate) fn request_durable(&mut self, gci: Gci, ctx: &mut dyn Context) {
        if gci <= self.durability.complete {
            return;
        }
        if self.durability.round == Round::Idle {
            self.start_flush(gci, ctx);
        } else {
            self.durability.pending = Some(gci);
        }
    }

    fn start_flush(&mut self, gci: Gci, ctx: &mut dyn Context) {
        for node in std::mem::take(&mut self.durability.joining) {
            let nodes = [node].into_iter();
            let tcs = crate::blocks_on(nodes.clone(), BlockKind::Tc, self.tc_instances);
            let ldms = crate::blocks_on(nodes, BlockKind::Ldm, self.ldm_instances);
            self.durability.tcs.add_members(&tcs);
            self.durability.ldms.add_members(&ldms);
        }
        let recording = std::mem::take(&mut self.durability.recording);
        for (node, from) in recording {
            if gci >= from {
                let dih = BlockRef::new(node, BlockKind::Dih, 0);
                self.durability.dihs.add_members(&[dih]);
            } else {
                self.durability.recording.push((node, from));
            }
        }
        self.durability.round = Round::Flushing { gci };
        self.durability.tcs.start_round();
        for &tc in self.durability.tcs.members() {
            send(ctx, self.address, tc, GcpFlushReq { gci });
        }
    }

    /// A tc finished the commits of GCIs up to `gci`.
    pub(crate) fn gcp_flush_conf(&mut self, from: BlockRef, gci: Gci, ctx: &mut dyn Context) {
        assert_eq!(
            self.durability.round,
            Round::Flushing { gci },
            "dih {}: GcpFlushConf {gci} from {from} outside its round",
            self.address
        );
        if self.durability.tcs.record(from, "GcpFlushConf") {
            self.flushed(gci, ctx);
        }
    }

    /// Every tc finished the commits of GCIs up to `gci`; and the
    /// transactions of failed tcs, once their take-over is complete.
    fn flushed(&mut self, gci: Gci, ctx: &mut dyn Context) {
        if self.durability.takeover_pending != 0 {
            self.durability.round = Round::AwaitingTakeover { gci };
            return;
        }
        self.durability.round = Round::Saving { gci };
        self.durability.ldms.start_round();
        for &ldm in self.durability.ldms.members() {
            send(ctx, self.address, ldm, GcpSaveReq { gci });
        }
    }

    /// An ldm made the marker of `gci` durable in all its parts.
    pub(crate) fn gcp_save_conf(&mut self, from: BlockRef, gci: Gci, ctx: &mut dyn Context) {
        assert_eq!(
            self.durability.round,
            Round::Saving { gci },
            "dih {}: GcpSaveConf {gci} from {from} outside its round",
            self.address
        );
        if self.durability.ldms.record(from, "GcpSaveConf") {
            ctx.fault_point(kernel::faults::FaultPoint::GcpBeforeCopy);
            self.start_copy(gci, self.gcp.latest, ctx);
        }
    }

    /// Asks every dih to record `gci` complete and `started` started.
    pub(crate) fn start_copy(&mut self, gci: Gci, started: Gci, ctx: &mut dyn Context) {
        self.durability.round = Round::Copying { gci, started };
        self.durability.dihs.start_round();
        for &dih in self.durability.dihs.members() {
            send(
                ctx,
                self.address,
                dih,
                CopyGciReq {
                    complete_gci: gci,
                    started_gci: started,
                },
            );
        }
    }

    /// Every dih: record the master's GCIs in this node's system file.
    pub(crate) fn copy_gci_req(
        &mut self,
        from: BlockRef,
        request: CopyGciReq,
        ctx: &mut dyn Context,
    ) {
        assert_eq!(
            from,
            self.master(),
            "dih {}: CopyGciReq from {from}, but {} is the master",
            self.address,
            self.master()
        );
        if let Some((requester, _, _)) = self.copy_requester {
            // Only a new master sends while the old one's copy is being
            // written (master take-over): it is written next.
            assert!(
                self.node_failures.failed().contains(requester.node),
                "dih {}: CopyGciReq while the previous one is being written",
                self.address
            );
            self.queued_copy = Some((from, request));
            return;
        }
        if self.diskless {
            self.recorded_started = self.recorded_started.max(request.started_gci);
            self.copied(from, request.complete_gci, ctx);
            return;
        }
        let previous = self
            .system
            .record
            .unwrap_or_else(|| SystemFile::initial(self.address.node.0));
        // The members recorded with a complete GCI are the nodes alive
        // now: the master copies it to every live node's file, and a node
        // that failed before gets none of it (docs/design/failures.md §9).
        // A node in its node restart is not one: its data is not whole
        // yet (docs/design/0018-node-restart.md).
        let members = if self.node_failures.membership_id() == 0 {
            self.other_dihs
                .iter()
                .fold(NodeSet::of([self.address.node]), |members, dih| {
                    members.union(NodeSet::of([dih.node]))
                })
        } else {
            self.node_failures
                .live()
                .difference(self.node_failures.starting())
        };
        let record = SystemFile {
            latest_complete_gci: previous.latest_complete_gci.max(request.complete_gci.0),
            highest_started_gci: previous.highest_started_gci.max(request.started_gci.0),
            members: if request.complete_gci.0 >= previous.latest_complete_gci {
                members.bits()
            } else {
                previous.members
            },
            ..previous
        };
        self.copy_requester = Some((from, request.complete_gci, request.started_gci));
        self.system.update(record, self.address, ctx);
    }

    /// The system file update of a CopyGciReq is durable.
    pub(crate) fn copy_written(&mut self, ctx: &mut dyn Context) {
        let (master, gci, started) = self
            .copy_requester
            .take()
            .expect("a system file update finished with no CopyGciReq waiting");
        self.recorded_started = self.recorded_started.max(started);
        if !self.node_failures.failed().contains(master.node) {
            self.copied(master, gci, ctx);
            self.recorded_again(gci, ctx);
        } else if gci > self.durability.complete {
            // Recorded for a master that failed since: its successor
            // learns it from this dih (MASTER_GCP_DIH_CONF).
            self.durability.complete = gci;
            ctx.report(Report::CompleteGci(gci));
        }
        if let Some((from, request)) = self.queued_copy.take() {
            self.copy_gci_req(from, request, ctx);
        }
    }

    fn copied(&mut self, master: BlockRef, gci: Gci, ctx: &mut dyn Context) {
        if gci > self.durability.complete {
            self.durability.complete = gci;
            ctx.report(Report::CompleteGci(gci));
        }
        send(ctx, self.address, master, CopyGciConf { complete_gci: gci });
    }

    /// A dih recorded `gci` complete.
    pub(crate) fn copy_gci_conf(&mut self, from: BlockRef, gci: Gci, ctx: &mut dyn Context) {
        let Round::Copying {
            gci: copying,
            started,
        } = self.durability.round
        else {
            panic!(
                "dih {}: CopyGciConf {gci} from {from} while no copy runs ({:?})",
                self.address, self.durability.round
            );
        };
        assert_eq!(
            gci, copying,
            "CopyGciConf from {from} confirms another GCI than the one being copied"
        );
        if self.durability.dihs.record(from, "CopyGciConf") {
            self.copied_everywhere(gci, started, ctx);
        }
    }

    /// Every dih recorded `gci` complete and `started` started.
    fn copied_everywhere(&mut self, gci: Gci, started: Gci, ctx: &mut dyn Context) {
        self.durability.round = Round::Idle;
        self.durability.recorded_started_high =
            self.durability.recorded_started_high.max(started.high());
        if gci != Gci(0) {
            // At a restart's first round too: clients may wait for GCIs of
            // the previous run, which the restored GCI makes complete.
            for &tc in self.durability.tcs.members() {
                send(ctx, self.address, tc, GcpDurableRep { gci });
            }
        }
        if let Some(requester) = self.durability.start_requester.take() {
            // The start GCI is recorded: hand it to the tcs (gcp.rs).
            self.commit_initial_gci(requester, ctx);
        }
        if let Some(next) = self.durability.pending.take() {
            if next > self.durability.complete {
                self.start_flush(next, ctx);
            }
        }
    }

    /// At the master: the data nodes of `failed` left the cluster. The
    /// round no longer waits for their blocks, nor will later ones; a
    /// step that waited only for them is done. The survivors hold a live
    /// replica of every partition (the survival rule), so their markers
    /// and system files make a global checkpoint durable.
    pub(crate) fn durability_without(&mut self, failed: signal::NodeSet, ctx: &mut dyn Context) {
        let durability = &mut self.durability;
        let flushed = durability.tcs.forget_nodes(failed);
        let saved = durability.ldms.forget_nodes(failed);
        let copied = durability.dihs.forget_nodes(failed);
        match durability.round {
            Round::Flushing { gci } if flushed => self.flushed(gci, ctx),
            Round::Saving { gci } if saved => self.start_copy(gci, self.gcp.latest, ctx),
            Round::Copying { gci, started } if copied => self.copied_everywhere(gci, started, ctx),
            _ => {}
        }
    }

    /// Node failures agreed as membership `membership_id`: their tcs'
    /// transactions are being taken over, and may commit in GCIs not yet
    /// durable; hold rounds at flushing until the take-over reports.
    pub(crate) fn hold_for_takeover(&mut self, membership_id: u32) {
        self.durability.takeover_pending = self.durability.takeover_pending.max(membership_id);
    }

    /// TAKEOVER_COMPLETE_REP from this node's tc: the transactions of the
    /// tcs failed up to membership `membership_id` are finished. A report
    /// of an earlier membership (a take-over started again since) holds on.
    pub(crate) fn takeover_complete(
        &mut self,
        from: BlockRef,
        report: signal::signals::TakeoverCompleteRep,
        ctx: &mut dyn Context,
    ) {
        ctx.report(Report::Log(format!(
            "dih {}: take-over for membership {} complete ({} committed, {} aborted, by {from})",
            self.address, report.membership_id, report.committed, report.aborted
        )));
        if report.membership_id < self.durability.takeover_pending {
            return;
        }
        self.durability.takeover_pending = 0;
        if let Round::AwaitingTakeover { gci } = self.durability.round {
            self.flushed(gci, ctx);
        }
    }

    /// The master's phase GLOBAL_CHECKPOINT begins by recording the start
    /// GCI in every system file (so that a crash right after cannot reuse
    /// a GCI handed out from here on), then commits it to every tc.
    pub(crate) fn record_start_gci(&mut self, requester: BlockRef, ctx: &mut dyn Context) {
        self.durability.start_requester = Some(requester);
        let complete = self.restart.restored_gci;
        self.start_copy(complete, self.restart.start_gci, ctx);
    }

    /// Confirms a phase to membership.
    pub(crate) fn confirm_phase(&self, requester: BlockRef, phase: u8, ctx: &mut dyn Context) {
        send(ctx, self.address, requester, StartPhaseConf { phase });
    }
}
