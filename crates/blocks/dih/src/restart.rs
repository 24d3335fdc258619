//! dih's part of a start (docs/design/durability.md §5; the phases are in
//! `signal::phases`):
//!
//! - INITIALISE: read this node's system file (none: never started, or
//!   started with `--initial`, which wipes the data directory);
//! - RESTART_GCI: every dih tells the master the latest GCI its system file
//!   records complete, and the nodes alive when it was recorded; the
//!   master takes the highest as the restored GCI and tells every dih. A
//!   node outside the members recorded with that GCI failed before it
//!   (docs/design/failures.md §9): its data is older, so it is **stale**,
//!   takes no part and shuts down saying it needs a node restart, and
//!   the others start without it (their membership agrees it failed). A
//!   node with nothing on disk while the cluster restores a GCI is stale
//!   too: it rejoins by a node restart (docs/design/0018-node-restart.md);
//! - RESTORE_DATA: each ldm of the node restores up to the restored GCI (or
//!   formats its redo log when it is 0); the system file then records the
//!   restart; the master learns from every node the highest GCI it may
//!   ever have handed out, and new GCIs start one high part above.
//!
//! An initial start is the same path with restored GCI 0 and nothing on
//! disk; its first GCI is `INITIAL_GCI`.

use crate::gcp::INITIAL_GCI;
use crate::Dih;
use kernel::{send, Context, Report};
use signal::phases;
use signal::signals::{RestartGciOrd, RestartGciRep, RestoreReq, RestoredRep, SystemFileRep};
use signal::{BlockKind, BlockRef, Gci, NodeId, NodeSet};
use storage::system_file::SystemFile;

/// The restored GCI a master sends when it refuses the restart.
const REFUSED: Gci = Gci(u64::MAX);

/// What dih knows of the start in progress.
pub(crate) struct Restart {
    /// Who asked for the phase being run (membership).
    requester: Option<BlockRef>,
    /// The GCI the cluster restores (0: initial start).
    pub(crate) restored_gci: Gci,
    /// At the master: the first GCI of this run.
    pub(crate) start_gci: Gci,
    /// At the master: each node's latest complete GCI and the members its
    /// system file records with it, as reported.
    reported: Vec<(NodeId, Gci, NodeSet)>,
    /// At the master: the restored GCI is decided (the RESTORE_DATA round
    /// is open).
    decided: bool,
    /// At the master: the highest GCI any node may have handed out.
    highest: Gci,
    /// This node's ldms, and who restored.
    ldms: kernel::answers::Answers,
    /// The highest GCI this node's ldms found in redo.
    ldm_highest: Gci,
    restore_started_ms: u64,
    replayed: u64,
    /// At the master: the dihs that reported in the current phase.
    pub(crate) dihs: kernel::answers::Answers,
}

impl Restart {
    /// `all_dihs` report to the master; the master's first round (the
    /// restart GCI reports) is open from the start, since other nodes may
    /// report before the master runs the phase itself.
    pub(crate) fn new(node: NodeId, ldm_instances: u16, all_dihs: Vec<BlockRef>) -> Restart {
        // The master starts the round once it knows it is the master.
        let dihs = kernel::answers::Answers::new(all_dihs);
        Restart {
            requester: None,
            restored_gci: Gci(0),
            start_gci: INITIAL_GCI,
            reported: Vec::new(),
            decided: false,
            highest: Gci(0),
            ldms: kernel::answers::Answers::new(
                (0..ldm_instances)
                    .map(|instance| BlockRef::new(node, BlockKind::Ldm, instance))
                    .collect(),
            ),
            ldm_highest: Gci(0),
            restore_started_ms: 0,
            replayed: 0,
            dihs,
        }
    }
}

impl Dih {
    /// Phase INITIALISE: read the system file (the conf follows its answer).
    pub(crate) fn initialise(&mut self, requester: BlockRef, ctx: &mut dyn Context) {
        if self.diskless {
            self.report_system_file(ctx);
            return self.confirm_phase(requester, phases::INITIALISE, ctx);
        }
        self.restart.requester = Some(requester);
        self.system.read(self.address, ctx);
    }

    /// The system file was read.
    pub(crate) fn system_file_read(&mut self, ctx: &mut dyn Context) {
        let requester = self
            .restart
            .requester
            .take()
            .expect("the system file is read in phase INITIALISE");
        self.report_system_file(ctx);
        self.confirm_phase(requester, phases::INITIALISE, ctx);
    }

    /// This node's complete GCI and the members recorded with it (0 and
    /// none without a file).
    fn recorded_complete(&self) -> (Gci, NodeSet) {
        let record = self.system.record;
        let complete_gci = Gci(record.map_or(0, |record| record.latest_complete_gci));
        let members = record
            .and_then(|record| NodeSet::from_bits(record.members))
            .unwrap_or(NodeSet::EMPTY);
        (complete_gci, members)
    }

    /// Tells membership what the system file records, before the conf of
    /// phase INITIALISE: the cluster's formation leaves the stale nodes
    /// out (docs/design/0015-start-without-stale-nodes.md).
    fn report_system_file(&self, ctx: &mut dyn Context) {
        let (complete_gci, members) = self.recorded_complete();
        let membership = BlockRef::new(self.address.node, BlockKind::Membership, 0);
        send(
            ctx,
            self.address,
            membership,
            SystemFileRep {
                complete_gci,
                members,
            },
        );
    }

    /// Phase RESTART_GCI: report the system file's complete GCI to the master.
    pub(crate) fn report_restart_gci(&mut self, requester: BlockRef, ctx: &mut dyn Context) {
        self.restart.requester = Some(requester);
        let (complete_gci, members) = self.recorded_complete();
        send(
            ctx,
            self.address,
            self.master(),
            RestartGciRep {
                complete_gci,
                members,
            },
        );
    }

    /// At the master: a node's complete GCI and the members recorded with it.
    pub(crate) fn restart_gci_rep(
        &mut self,
        from: BlockRef,
        report: RestartGciRep,
        ctx: &mut dyn Context,
    ) {
        assert!(
            self.is_master(),
            "dih {}: RestartGciRep from {from}, but the master is {}",
            self.address,
            self.master()
        );
        self.restart
            .reported
            .push((from.node, report.complete_gci, report.members));
        if self.restart.dihs.record(from, "RestartGciRep") {
            self.decide_restart_gci(ctx);
        }
    }

    /// At the master, once every dih reported (or failed): the restored
    /// GCI, and which nodes are too old to take part.
    fn decide_restart_gci(&mut self, ctx: &mut dyn Context) {
        let reported = &self.restart.reported;
        let kernel::stale::Verdict {
            restored,
            members,
            stale,
        } = kernel::stale::judge(reported);
        let empty: Vec<NodeId> = reported
            .iter()
            .filter(|&&(node, gci, _)| gci == Gci(0) && !stale.contains(node))
            .map(|&(node, _, _)| node)
            .collect();
        let me = self.address.node;
        let decision = if stale.contains(me) {
            // Formation leaves stale nodes out and names the lowest id
            // that is not stale president (docs/design/0015), so the
            // master is never stale; if the reports disagree with what
            // formation saw, refuse rather than restore older data.
            ctx.report(Report::Log(format!(
                "dih {}: system restart refused: GCI {restored} was made durable by nodes \
                 {members}, and this node ({me}), the master, failed before it; the cluster's \
                 formation should have left it out, so the system files changed during the \
                 start. Start the nodes again.",
                self.address
            )));
            REFUSED
        } else if restored != Gci(0) && !empty.is_empty() {
            ctx.report(Report::Log(format!(
                "dih {}: system restart of GCI {restored} refused: node(s) {empty:?} have no \
                 complete GCI on disk, yet the start did not leave them out as stale (they \
                 rejoin by a node restart); the reports changed during the start. Start the \
                 nodes again.",
                self.address
            )));
            REFUSED
        } else {
            if !stale.is_empty() {
                ctx.report(Report::Log(format!(
                    "dih {}: restoring GCI {restored}, which nodes {members} made durable; \
                     node(s) {stale} failed before it, so their data is older: they take no \
                     part and wait for a node restart, and the cluster starts without them",
                    self.address
                )));
            }
            restored
        };
        // Every dih hears the decision before it can report its restore:
        // the next round starts now, whatever phase this node is in. The
        // stale nodes will not report.
        self.restart.decided = true;
        self.restart.dihs.start_round();
        let everyone: Vec<BlockRef> = self.restart.dihs.members().to_vec();
        let stale = if decision == REFUSED {
            NodeSet::EMPTY
        } else {
            stale
        };
        self.restart.dihs.forget_nodes(stale);
        for dih in everyone {
            send(
                ctx,
                self.address,
                dih,
                RestartGciOrd {
                    restored_gci: decision,
                    stale,
                },
            );
        }
    }

    /// At the master: data nodes failed during the start. Their dihs are
    /// not waited for; a round they alone held up completes.
    pub(crate) fn restart_without(&mut self, failed: NodeSet, ctx: &mut dyn Context) {
        if !self.restart.dihs.forget_nodes(failed) {
            return;
        }
        if self.restart.decided {
            self.every_node_restored(ctx);
        } else {
            self.decide_restart_gci(ctx);
        }
    }

    /// Every dih: the restored GCI is decided.
    pub(crate) fn restart_gci_ord(
        &mut self,
        from: BlockRef,
        order: RestartGciOrd,
        ctx: &mut dyn Context,
    ) {
        assert_eq!(
            from,
            self.master(),
            "dih {}: RestartGciOrd from {from}, but {} is the master",
            self.address,
            self.master()
        );
        let restored = order.restored_gci;
        if order.stale.contains(self.address.node) {
            let own = self
                .system
                .record
                .map_or(0, |record| record.latest_complete_gci);
            ctx.report(Report::Shutdown(format!(
                "this node's data ends at GCI {}: it failed before GCI {restored} was made \
                 durable by the nodes that carried on, so it takes no part in this start; \
                 bringing it back needs a node restart: start it again once the cluster runs, \
                 and it copies from the live nodes",
                Gci(own)
            )));
            return;
        }
        if restored == REFUSED {
            ctx.fatal(format!(
                "dih {}: the master ({}) refused the system restart; its log says why",
                self.address,
                self.master()
            ));
        }
        self.restart.restored_gci = restored;
        ctx.report(Report::RestoredGci(restored));
        let requester = self
            .restart
            .requester
            .take()
            .expect("RestartGciOrd answers phase RESTART_GCI");
        self.confirm_phase(requester, phases::RESTART_GCI, ctx);
    }

    /// Phase RESTORE_DATA: every local ldm restores (or formats its redo).
    pub(crate) fn restore_data(&mut self, requester: BlockRef, ctx: &mut dyn Context) {
        self.restart.requester = Some(requester);
        self.restart.restore_started_ms = ctx.now_ms();
        self.restart.ldms.start_round();
        let restored_gci = self.restart.restored_gci;
        for &ldm in self.restart.ldms.members() {
            send(ctx, self.address, ldm, RestoreReq { restored_gci });
        }
    }

    /// An ldm restored.
    pub(crate) fn restore_conf(
        &mut self,
        from: BlockRef,
        highest: Gci,
        replayed: u64,
        ctx: &mut dyn Context,
    ) {
        self.restart.ldm_highest = self.restart.ldm_highest.max(highest);
        self.restart.replayed += replayed;
        if !self.restart.ldms.record(from, "RestoreConf") {
            return;
        }
        ctx.report(Report::Phase {
            name: "restore data (all ldm threads)",
            elapsed_ms: ctx.now_ms().saturating_sub(self.restart.restore_started_ms),
            count: self.restart.replayed,
            unit: "row changes replayed",
        });
        if self.diskless {
            return self.node_restored(ctx);
        }
        // Record the restart: a later crash restores at least this GCI.
        let previous = self.system.record;
        let restored = self.restart.restored_gci.0;
        let record = match previous {
            Some(previous) => SystemFile {
                start_count: previous.start_count.saturating_add(1),
                latest_complete_gci: previous.latest_complete_gci.max(restored),
                // A file that missed the last COPY_GCI may record less
                // started than the restored GCI; a record never says more
                // is complete than was started.
                highest_started_gci: previous.highest_started_gci.max(restored),
                ..previous
            },
            None => SystemFile::initial(self.address.node.0),
        };
        self.restart_write_pending = true;
        self.system.update(record, self.address, ctx);
    }

    /// This node is restored and its system file says so: tell the master
    /// the highest GCI it may have handed out.
    pub(crate) fn node_restored(&mut self, ctx: &mut dyn Context) {
        // The switch never runs more than one high part ahead of what the
        // system files record as started (gcp.rs, durability.rs).
        let started_bound = match self.system.record {
            Some(record) if record.highest_started_gci != 0 => {
                Gci::from_parts(Gci(record.highest_started_gci).high() + 1, u32::MAX)
            }
            _ => Gci(0),
        };
        let highest = self
            .restart
            .ldm_highest
            .max(self.restart.restored_gci)
            .max(started_bound);
        if self.is_node_restart() {
            // The cluster's GCIs run far above this node's: nothing to tell.
            let requester = self
                .restart
                .requester
                .take()
                .expect("the restore runs in phase RESTORE_DATA");
            return self.confirm_phase(requester, phases::RESTORE_DATA, ctx);
        }
        send(
            ctx,
            self.address,
            self.master(),
            RestoredRep {
                highest_gci: highest,
            },
        );
        if !self.is_master() {
            let requester = self
                .restart
                .requester
                .take()
                .expect("the restore runs in phase RESTORE_DATA");
            self.confirm_phase(requester, phases::RESTORE_DATA, ctx);
        }
    }

    /// At the master: a node is restored. Once all are, the first GCI of
    /// this run is one high part above every GCI any of them handed out.
    pub(crate) fn restored_rep(&mut self, from: BlockRef, highest: Gci, ctx: &mut dyn Context) {
        assert!(
            self.is_master(),
            "dih {}: RestoredRep from {from}, but the master is {}",
            self.address,
            self.master()
        );
        self.restart.highest = self.restart.highest.max(highest);
        if self.restart.dihs.record(from, "RestoredRep") {
            self.every_node_restored(ctx);
        }
    }

    /// At the master: every node restored (or failed).
    fn every_node_restored(&mut self, ctx: &mut dyn Context) {
        self.restart.start_gci = if self.restart.highest == Gci(0) {
            INITIAL_GCI
        } else {
            let high = self
                .restart
                .highest
                .high()
                .checked_add(1)
                .expect("GCI high part exhausted (2^32 global checkpoints)");
            Gci::from_parts(high, 0)
        };
        let requester = self
            .restart
            .requester
            .take()
            .expect("the restore runs in phase RESTORE_DATA");
        self.confirm_phase(requester, phases::RESTORE_DATA, ctx);
    }
}
