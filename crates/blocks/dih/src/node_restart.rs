//! dih's part of a node restart (docs/design/0018-node-restart.md): the
//! restarting node's phases, and the master taking its tcs and ldms into
//! the GCI protocol.
//!
//! At the restarting node (membership admitted it as a starting member,
//! so its NODE_FAILREP lists it in `starting`):
//! - RESTART_GCI: no agreement: the node restores what its own system
//!   file records complete (0: none, or `--initial`);
//! - RESTORE_DATA: its ldms restore up to that GCI as in a system
//!   restart; the master is not told (the cluster's GCIs are already far
//!   above);
//! - GLOBAL_CHECKPOINT: it asks the master to include it:
//!
//! ```text
//!  restarting dih                   master dih                 its tcs
//!   |-- IncludeNodeReq{node} -------->|  (waits for the switch to be idle)
//!   |                                 |-- GcpPrepare{g} ------->|  with every other tc
//!   |                                 |-- GcpCommit{g} -------->|
//!   |<------------- IncludeNodeConf{g}|  its ldms join the next durability round
//! ```
//!
//! Its dih hears of each switch from then on (GCP_COMPLETE_REP), but its
//! system file records no complete GCI until the node is restorable on
//! its own: until then a whole-cluster restart finds it stale.
//! - COPY_DATA: before the copy, its system file is rewritten to record
//!   nothing complete: the local checkpoints of the next phase overwrite
//!   what it restored from, so a crash from here on must restart it empty
//!   (an initial node restart), never from half-new files;
//! - RECORD_GCI: once its ldms wrote a local checkpoint of every
//!   partition, it asks the master again, naming the first GCI its file
//!   may record (its latest GCI, which every checkpoint's rows are at or
//!   below); the master adds its dih to the COPY_GCI of the first round
//!   of a GCI at least that, and the phase ends when the file records it.
//!
//! When a participant dies here: the restarting node, so the master
//! forgets its blocks (they fail like any node's) and the inclusion with
//! them; the master, so the new master (which leaves starting members out
//! of its take-over) hears the request again: the restarting dih sends it
//! again to each new master until its node has started, so its tcs and
//! ldms (and, past RECORD_GCI, its system file) are taken in again.

use crate::gcp::SwitchState;
use crate::Dih;
use kernel::{send, Context, Report};
use signal::phases;
use signal::signals::{IncludeNodeConf, IncludeNodeReq};
use signal::{BlockKind, BlockRef, Gci, NodeId, NodeSet};

/// The master's inclusion of a restarting node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Inclusion {
    /// Asked for; its tcs join the next switch.
    Asked { node: NodeId },
    /// Its tcs take part in the switch running now; the conf goes out
    /// when it commits.
    Switching { node: NodeId },
}

impl Inclusion {
    fn node(self) -> NodeId {
        match self {
            Inclusion::Asked { node } | Inclusion::Switching { node } => node,
        }
    }
}

impl Dih {
    /// Whether this node is in a node restart: the membership that
    /// admitted it lists it as starting.
    pub(crate) fn is_node_restart(&self) -> bool {
        self.node_failures.starting().contains(self.address.node)
    }

    /// Phase RESTART_GCI of a node restart: restore what this node's own
    /// system file records complete.
    pub(crate) fn own_restart_gci(&mut self, requester: BlockRef, ctx: &mut dyn Context) {
        let restored = Gci(self
            .system
            .record
            .map_or(0, |record| record.latest_complete_gci));
        self.restart.restored_gci = restored;
        ctx.report(Report::Log(format!(
            "dih {}: node restart: restoring this node's own data up to GCI {restored}, then \
             copying what changed since from the live replicas",
            self.address
        )));
        ctx.report(Report::RestoredGci(restored));
        self.confirm_phase(requester, phases::RESTART_GCI, ctx);
    }

    /// Phase GLOBAL_CHECKPOINT of a node restart: ask the master to take
    /// this node's tcs and ldms into the GCI protocol.
    pub(crate) fn ask_inclusion(&mut self, requester: BlockRef, ctx: &mut dyn Context) {
        assert!(
            matches!(self.gcp.state, SwitchState::NotStarted),
            "dih {}: start phase GLOBAL_CHECKPOINT ran twice (switch state {:?})",
            self.address,
            self.gcp.state
        );
        self.gcp.state = SwitchState::AwaitingInclusion {
            start_requester: requester,
        };
        self.send_inclusion_request(ctx);
    }

    /// Sends (again) the inclusion request to the master.
    pub(crate) fn send_inclusion_request(&self, ctx: &mut dyn Context) {
        let request = IncludeNodeReq {
            node: self.address.node,
            system_file_from: self.record_from.map_or(Gci(0), |(_, from)| from),
        };
        send(ctx, self.address, self.master(), request);
    }

    /// Phase COPY_DATA of a node restart: the system file records nothing
    /// complete from now on (the conf follows the write).
    pub(crate) fn void_system_file(&mut self, requester: BlockRef, ctx: &mut dyn Context) {
        if self.diskless {
            return self.confirm_phase(requester, phases::COPY_DATA, ctx);
        }
        let previous = self
            .system
            .record
            .unwrap_or_else(|| storage::system_file::SystemFile::initial(self.address.node.0));
        let record = storage::system_file::SystemFile {
            latest_complete_gci: 0,
            members: 0,
            ..previous
        };
        self.void_requester = Some(requester);
        self.system.update(record, self.address, ctx);
    }

    /// The voided system file is written.
    pub(crate) fn system_file_voided(&mut self, ctx: &mut dyn Context) {
        let requester = self
            .void_requester
            .take()
            .expect("the void write runs in phase COPY_DATA");
        ctx.report(Report::Log(format!(
            "dih {}: node restart: the system file records nothing complete until this node's \
             local checkpoints after the copy cover a GCI it records",
            self.address
        )));
        self.confirm_phase(requester, phases::COPY_DATA, ctx);
    }

    /// Phase RECORD_GCI of a node restart: the master is asked to record
    /// complete GCIs in this node's system file, from this node's latest
    /// GCI on (every row of its checkpoints has a GCI at or below it).
    pub(crate) fn ask_recording(&mut self, requester: BlockRef, ctx: &mut dyn Context) {
        let from = self.gcp.latest.max(Gci(1));
        if self.diskless {
            return self.confirm_phase(requester, phases::RECORD_GCI, ctx);
        }
        self.record_from = Some((Some(requester), from));
        self.send_inclusion_request(ctx);
    }

    /// At a restarting node: the master recorded `gci` in this node's
    /// system file; the phase RECORD_GCI waiting for it ends.
    pub(crate) fn recorded_again(&mut self, gci: Gci, ctx: &mut dyn Context) {
        let Some((requester, from)) = self.record_from.as_mut() else {
            return;
        };
        if gci < *from {
            return;
        }
        if let Some(requester) = requester.take() {
            ctx.report(Report::Log(format!(
                "dih {}: node restart: the system file records GCI {gci} complete: this node \
                 restores on its own from here",
                self.address
            )));
            self.confirm_phase(requester, phases::RECORD_GCI, ctx);
        }
    }

    /// At the restarting node: the master included it at `gci`.
    pub(crate) fn include_node_conf(&mut self, from: BlockRef, gci: Gci, ctx: &mut dyn Context) {
        let SwitchState::AwaitingInclusion { start_requester } = self.gcp.state else {
            // A conf from a master that failed meanwhile, or repeated.
            return;
        };
        if from != self.master() {
            return;
        }
        self.gcp.state = SwitchState::Idle;
        if gci > self.gcp.latest {
            self.gcp.latest = gci;
            ctx.report(Report::LatestGci(gci));
        }
        ctx.report(Report::Log(format!(
            "dih {}: node restart: this node's tcs and ldms take part in the GCI protocol from \
             GCI {gci}",
            self.address
        )));
        self.confirm_phase(start_requester, phases::GLOBAL_CHECKPOINT, ctx);
    }

    /// At the master: a restarting node asks to be included. Repeated
    /// requests (it asks each new master) and requests of a node that is
    /// not a starting member are ignored.
    pub(crate) fn include_node_req(
        &mut self,
        from: BlockRef,
        request: IncludeNodeReq,
        ctx: &mut dyn Context,
    ) {
        let node = request.node;
        if !self.is_master()
            || from != BlockRef::new(node, BlockKind::Dih, 0)
            || !self.node_failures.starting().contains(node)
        {
            return;
        }
        if request.system_file_from > Gci(0) {
            let from = request.system_file_from;
            self.durability
                .recording
                .retain(|&(other, _)| other != node);
            self.durability.recording.push((node, from));
            ctx.report(Report::Log(format!(
                "dih {}: restarting node {node}'s system file records complete GCIs from the \
                 round of GCI {from} on",
                self.address
            )));
        }
        if self
            .inclusion
            .is_some_and(|inclusion| inclusion.node() == node)
        {
            return;
        }
        ctx.report(Report::Log(format!(
            "dih {}: including restarting node {node} in the GCI protocol at the next switch",
            self.address
        )));
        self.inclusion = Some(Inclusion::Asked { node });
        // A master that switches nothing yet (its own start still runs)
        // takes it at its first timed switch, like any.
    }

    /// At the master, as a timed switch starts: the tcs of a node asking
    /// to be included take part in it.
    pub(crate) fn include_in_switch(&mut self) {
        let Some(Inclusion::Asked { node }) = self.inclusion else {
            return;
        };
        let tcs = crate::blocks_on([node].into_iter(), BlockKind::Tc, self.tc_instances);
        self.gcp.tcs.add_members(&tcs);
        self.inclusion = Some(Inclusion::Switching { node });
    }

    /// At the master, once a switch to `gci` committed on every tc: a
    /// node whose tcs took part is included; its ldms and tcs join the
    /// durability rounds from the next one, its dih hears of switches.
    pub(crate) fn included_at(&mut self, gci: Gci, ctx: &mut dyn Context) {
        let Some(Inclusion::Switching { node }) = self.inclusion else {
            return;
        };
        self.inclusion = None;
        let dih = BlockRef::new(node, BlockKind::Dih, 0);
        if !self.other_dihs.contains(&dih) {
            self.other_dihs.push(dih);
            self.other_dihs.sort_unstable();
        }
        self.durability.joining.push(node);
        send(ctx, self.address, dih, IncludeNodeConf { gci });
    }

    /// At the master: failed nodes are included no more.
    pub(crate) fn inclusion_without(&mut self, failed: NodeSet) {
        if self
            .inclusion
            .is_some_and(|inclusion| failed.contains(inclusion.node()))
        {
            self.inclusion = None;
        }
        self.durability
            .joining
            .retain(|&joining| !failed.contains(joining));
        self.durability
            .recording
            .retain(|&(node, _)| !failed.contains(node));
    }
}
