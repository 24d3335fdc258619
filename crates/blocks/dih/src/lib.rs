//! dih: the distribution and global checkpoint block (NDB DBDIH).
//!
//! dih owns two things the rest of the node depends on:
//! - the distribution of each table (`distribution.rs`): which node group,
//!   replicas, ldm instance and redo log part hold each partition, computed
//!   once when dict creates the table (DESIGN.md §3);
//! - the GCI switch (`gcp.rs`): the two-phase protocol that moves every tc
//!   to the next global checkpoint id, so that no transaction gets a smaller
//!   GCI than one it depends on (DESIGN.md §5).
//!
//! This file holds the configuration, the block struct and its inbox: one
//! `match` naming every signal dih takes, as NDB's `addRecSignal` list does.
//!
//! Today every node's dih switches the GCI of its own node's tcs. A cluster
//! of several data nodes needs one master dih (the president's) driving the
//! tcs of every node; that arrives with membership's president election.

mod distribution;
mod gcp;

#[cfg(test)]
mod tests;

pub use gcp::{job, GCP_START_PHASE, INITIAL_GCI};

use distribution::Distribution;
use gcp::GlobalCheckpoint;
use kernel::answers::Answers;
use kernel::Context;
use signal::schema::TableDef;
use signal::signals::{DiAddTabConf, StartPhaseConf};
use signal::{codec, refusal, BlockKind, BlockRef, Envelope, Gci, NodeId, Signal};
use std::sync::Arc;

/// What dih needs to know of the node and the cluster.
#[derive(Clone, Debug)]
pub struct DihConfig {
    /// This block's address (node id, `BlockKind::Dih`, instance 0).
    pub address: BlockRef,
    /// tc instances on this node (`BlockRef::new(node, Tc, 0..tc_instances)`).
    pub tc_instances: u16,
    /// ldm instances on each data node.
    pub ldm_instances: u16,
    /// The cluster's data nodes with their node group, in config order
    /// (that order decides each group's replica order).
    pub data_nodes: Vec<(NodeId, u32)>,
    /// Replicas of each partition: the number of nodes in every node group.
    pub replicas: u8,
    /// Redo log parts per node; partitions are spread over them.
    pub redo_log_parts: u32,
    /// Time between GCI switches (NDB TimeBetweenEpochs).
    pub epoch_interval_ms: u64,
    /// Time after which a switch advances the high part, the unit made
    /// durable (NDB TimeBetweenGlobalCheckpoints).
    pub gcp_interval_ms: u64,
}

/// The dih block.
pub struct Dih {
    address: BlockRef,
    distribution: Distribution,
    gcp: GlobalCheckpoint,
}

impl Dih {
    /// A dih that has not started: it answers start phases and, from phase
    /// 3 on, switches GCIs.
    pub fn new(config: DihConfig) -> Dih {
        assert_eq!(
            config.address.kind,
            BlockKind::Dih,
            "dih configured with a non-dih address {}",
            config.address
        );
        assert!(
            config.tc_instances > 0,
            "the GCI switch needs at least one tc to move"
        );
        let tcs = (0..config.tc_instances)
            .map(|instance| BlockRef::new(config.address.node, BlockKind::Tc, instance))
            .collect();
        Dih {
            address: config.address,
            distribution: Distribution::new(
                &config.data_nodes,
                config.replicas,
                config.ldm_instances,
                config.redo_log_parts,
            ),
            gcp: GlobalCheckpoint::new(
                Answers::new(tcs),
                config.epoch_interval_ms,
                config.gcp_interval_ms,
            ),
        }
    }

    /// The GCI all tcs have switched to (0 before start phase 3 completes).
    pub fn latest_gci(&self) -> Gci {
        self.gcp.latest
    }

    /// GCI switches completed since start (the initial GCI is not one).
    pub fn switches(&self) -> u64 {
        self.gcp.switches
    }

    fn start_phase(&mut self, from: BlockRef, phase: u8, ctx: &mut dyn Context) {
        if phase == GCP_START_PHASE {
            // The conf waits until every tc holds its first GCI: after the
            // last phase the node serves, and tcs cannot commit without one.
            self.start_global_checkpoints(from, ctx);
        } else {
            kernel::send(ctx, self.address, from, StartPhaseConf { phase });
        }
    }

    fn add_table(&mut self, from: BlockRef, table: &TableDef, ctx: &mut dyn Context) {
        assert_eq!(
            from.kind,
            BlockKind::Dict,
            "DiAddTabReq from {from}: only dict adds tables"
        );
        let map = self.distribution.partition_map(table);
        kernel::send(ctx, self.address, from, DiAddTabConf { map: Arc::new(map) });
    }
}

impl kernel::Block for Dih {
    fn address(&self) -> BlockRef {
        self.address
    }

    fn handle(&mut self, envelope: Envelope, ctx: &mut dyn Context) {
        let from = envelope.from;
        match envelope.signal {
            Signal::StartPhaseReq(request) => self.start_phase(from, request.phase, ctx),
            Signal::ContinueB(continue_b) => match continue_b.job {
                job::GCP_TIMER => self.gcp_timer(ctx),
                other => panic!(
                    "dih {}: unknown ContinueB job {other} from {from}",
                    self.address
                ),
            },
            Signal::GcpPrepareConf(conf) => self.gcp_prepare_conf(from, conf.new_gci, ctx),
            Signal::GcpCommitConf(conf) => self.gcp_commit_conf(from, conf.gci, ctx),
            Signal::DiAddTabReq(request) => self.add_table(from, &request.table, ctx),
            other if codec::is_api_request(other.number()) => {
                if let Some(reply) = refusal::refuse_api_request(&other) {
                    kernel::send(ctx, self.address, from, reply);
                }
            }
            other => panic!(
                "dih {}: unexpected signal {} from {from}",
                self.address,
                other.name()
            ),
        }
    }
}
