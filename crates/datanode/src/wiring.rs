//! From config to blocks: how many instances of each block a data node
//! runs and how each is sized. Production (`runtime`) and the simulator
//! both build a node's blocks here, so the simulator runs exactly the
//! production blocks with production sizing.

use config::{ClusterConfig, ClusterSettings};
use dict::{Dict, DictConfig};
use dih::{Dih, DihConfig};
use ldm::{Ldm, LdmConfig};
use membership::{Membership, MembershipConfig};
use signal::{BlockKind, BlockRef, NodeId};
use tc::{Tc, TcConfig};

/// The blocks of one data node, not yet placed on threads.
pub struct NodeBlocks {
    /// One per ldm thread.
    pub ldms: Vec<Ldm>,
    /// One per tc thread.
    pub tcs: Vec<Tc>,
    /// Distribution and GCI switch.
    pub dih: Dih,
    /// Schema.
    pub dict: Dict,
    /// Start phases, API registration.
    pub membership: Membership,
}

/// Builds the blocks of data node `node` as `config` describes it.
pub fn build_blocks(config: &ClusterConfig, node: NodeId) -> Result<NodeBlocks, String> {
    if config.data_node(node.0).is_none() {
        return Err(format!("node {node} is not a data node in the config"));
    }
    let settings = &config.cluster;
    let ldm_instances = config.threads.ldm as u16;
    let tc_instances = config.threads.tc as u16;
    let data_nodes: Vec<(NodeId, u32)> = config
        .data_nodes
        .iter()
        .map(|data_node| (NodeId(data_node.id), data_node.node_group))
        .collect();
    let ldms = (0..ldm_instances)
        .map(|instance| {
            Ldm::new(LdmConfig {
                address: BlockRef::new(node, BlockKind::Ldm, instance),
                data_memory_bytes: settings.data_memory_bytes / ldm_instances as u64,
                max_operations: settings.max_concurrent_operations,
            })
        })
        .collect();
    let tcs = (0..tc_instances)
        .map(|instance| {
            let address = BlockRef::new(node, BlockKind::Tc, instance);
            Tc::new(tc_config(settings, address, tc_instances))
        })
        .collect();
    let dih = Dih::new(DihConfig {
        address: BlockRef::new(node, BlockKind::Dih, 0),
        tc_instances,
        ldm_instances,
        data_nodes: data_nodes.clone(),
        replicas: settings.replicas,
        redo_log_parts: settings.redo_log_parts,
        epoch_interval_ms: settings.epoch_interval_ms,
        gcp_interval_ms: settings.gcp_interval_ms,
    });
    let dict = Dict::new(DictConfig {
        address: BlockRef::new(node, BlockKind::Dict, 0),
        tc_instances,
        ldm_instances,
        data_nodes,
        replicas: settings.replicas,
        redo_log_parts: settings.redo_log_parts,
    });
    let membership = Membership::new(MembershipConfig {
        address: BlockRef::new(node, BlockKind::Membership, 0),
        tc_instances,
        ldm_instances,
    });
    Ok(NodeBlocks {
        ldms,
        tcs,
        dih,
        dict,
        membership,
    })
}

/// How each of a node's `tc_instances` tcs is sized: an equal share of the
/// node's transaction and operation records.
fn tc_config(settings: &ClusterSettings, address: BlockRef, tc_instances: u16) -> TcConfig {
    let max_operations = (settings.max_concurrent_operations / tc_instances as u32).max(1);
    TcConfig {
        address,
        max_transactions: (settings.max_concurrent_transactions / tc_instances as u32).max(1),
        max_operations,
        // A transaction takes all its operation records from its tc's
        // share. One larger than the share could never run: it would get
        // the temporary OutOfOperationRecords, and a client that retries
        // temporary errors would retry it forever. Capped at the share, it
        // gets the permanent TooManyOperations instead.
        max_operations_per_transaction: settings.max_operations_per_transaction.min(max_operations),
        lock_wait_timeout_ms: settings.lock_wait_timeout_ms,
        inactive_transaction_timeout_ms: settings.inactive_transaction_timeout_ms,
    }
}

/// The partitions (of a table with the default partition count) that ldm
/// instance `ldm` of a node in `node_group` owns: partition p lives in group
/// p % groups, on ldm (p / groups) % ldm_instances (dih's default map).
pub fn default_partitions_of_ldm(config: &ClusterConfig, node_group: u32, ldm: u32) -> Vec<u32> {
    let groups = config.node_groups().max(1);
    let ldm_instances = config.threads.ldm.max(1);
    (0..groups * ldm_instances)
        .filter(|p| p % groups == node_group && (p / groups) % ldm_instances == ldm)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transaction_may_not_have_more_operations_than_its_tcs_share_of_records() {
        let settings = ClusterSettings {
            max_concurrent_operations: 100,
            max_operations_per_transaction: 10_000,
            ..ClusterSettings::default()
        };
        let address = BlockRef::new(NodeId(2), BlockKind::Tc, 0);
        let config = tc_config(&settings, address, 4);
        assert_eq!(config.max_operations, 25);
        assert_eq!(config.max_operations_per_transaction, 25);
        let settings = ClusterSettings {
            max_operations_per_transaction: 10,
            ..settings
        };
        let config = tc_config(&settings, address, 4);
        assert_eq!(
            config.max_operations_per_transaction, 10,
            "a smaller limit stays"
        );
    }
}
