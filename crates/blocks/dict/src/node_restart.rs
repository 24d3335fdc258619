//! The master dict's part of a node restart
//! (docs/design/0018-node-restart.md, decision 7): the restarting node's
//! dict gets the master's schema as it is now, and no create or drop
//! runs while a node is starting.
//!
//! ```text
//!  membership        master dict                        restarting dict
//!   |-NodeFailRep{starting + N}->|  (after the create or drop under way)
//!   |                            |== schema, as at a restart ==> (schema_sync.rs)
//!   |                            |        its phase RESTORE_SCHEMA takes it, rewrites
//!   |                            |        its schema file, gives its tcs and ldms the tables
//!   |                            |<== SchemaSyncConf{all} ==========|
//!   |                            |  N's tcs, ldms and dict get every schema change again
//! ```
//!
//! The schema sent is the master's current one, encoded as its schema
//! file would hold it. Creates and drops are refused with the temporary
//! `NodeRestartInProgress` while any member is starting: a table created
//! during the copy would have partitions the copy does not know.
//!
//! When a participant dies here: the restarting node, so the transfer
//! stops (`schema_sync_without`) and its blocks are forgotten; the
//! master, so the next master (after its take-over) sends its schema to
//! every starting member, and a restarting dict that already took a
//! schema answers the new transfer at once (`schema_sync.rs`).

use crate::schema_sync::Outgoing;
use crate::Dict;
use kernel::{Context, Report};
use signal::{BlockKind, BlockRef, NodeId};
use storage::schema_file;

impl Dict {
    /// At the master, when no create or drop runs: send the schema to a
    /// starting member that has not got it from this master yet.
    pub(crate) fn send_schema_to_restarting(&mut self, ctx: &mut dyn Context) {
        if !self.is_master()
            || self.phase < crate::SCHEMA_PHASE
            || self.running.is_some()
            || self.is_taking_over()
            || self.outgoing.as_ref().is_some_and(Outgoing::is_busy)
        {
            return;
        }
        let waiting = self
            .node_failures
            .starting()
            .difference(self.schema_sent_to);
        let Some(node) = waiting.first() else {
            return;
        };
        let bytes = schema_file::encode(&self.schema_to_store());
        ctx.report(Report::Log(format!(
            "dict {}: sending the schema (version {}) to restarting node {node}",
            self.address, self.schema_version,
        )));
        let dict = BlockRef::new(node, BlockKind::Dict, 0);
        self.start_schema_transfer(bytes, vec![dict], ctx);
    }

    /// At the master: restarting node `node`'s dict took the schema, and
    /// its tcs and ldms hold every table: they take part in every schema
    /// change from now on.
    pub(crate) fn restarting_node_has_schema(&mut self, node: NodeId, ctx: &mut dyn Context) {
        self.schema_sent_to.insert(node);
        let nodes = [node];
        let every = |kind: BlockKind, instances: u16| -> Vec<BlockRef> {
            nodes
                .iter()
                .flat_map(|&node| (0..instances).map(move |i| BlockRef::new(node, kind, i)))
                .collect::<Vec<_>>()
        };
        self.tcs
            .add_members(&every(BlockKind::Tc, self.tc_instances));
        self.ldms
            .add_members(&every(BlockKind::Ldm, self.ldm_instances));
        self.dicts
            .add_members(&[BlockRef::new(node, BlockKind::Dict, 0)]);
        ctx.report(Report::Log(format!(
            "dict {}: restarting node {node} holds the schema",
            self.address
        )));
        self.send_schema_to_restarting(ctx);
    }

    /// At a dict becoming the master: every member that came back by a
    /// node restart since this dict forgot its blocks (the master that
    /// gave it the schema added them back; this dict, not the master
    /// then, never heard) takes part in every schema change again. A
    /// member still starting is left out: this master sends it the schema
    /// and adds it then (`restarting_node_has_schema`).
    pub(crate) fn include_restarted_members(&mut self) {
        let failed = self.node_failures.failed();
        let starting = self.node_failures.starting();
        let started: Vec<NodeId> = self
            .nodes
            .iter()
            .copied()
            .filter(|&node| !failed.contains(node) && !starting.contains(node))
            .collect();
        let every = |kind: BlockKind, instances: u16| -> Vec<BlockRef> {
            started
                .iter()
                .flat_map(|&node| (0..instances).map(move |i| BlockRef::new(node, kind, i)))
                .collect()
        };
        self.tcs
            .add_members(&every(BlockKind::Tc, self.tc_instances));
        self.ldms
            .add_members(&every(BlockKind::Ldm, self.ldm_instances));
        let dicts: Vec<BlockRef> = started
            .iter()
            .filter(|&&node| node != self.address.node)
            .map(|&node| BlockRef::new(node, BlockKind::Dict, 0))
            .collect();
        self.dicts.add_members(&dicts);
    }

    /// Whether creates and drops must wait: a member is in its node
    /// restart.
    pub(crate) fn node_restart_in_progress(&self) -> bool {
        !self.node_failures.starting().is_empty()
    }
}
