//! Partition maps: where each partition of a new table lives
//! (docs/design/data-and-routing.md §6).
//!
//! A key hashes to one of `partition::BUCKETS` buckets; the map takes
//! buckets to partitions round robin, and each partition to a placement:
//!
//! ```text
//! groups = number of node groups, p = partition, round = p / groups
//! node_group   = p % groups               consecutive partitions spread over groups
//! ldm_instance = round % ldm_instances    then over the ldm threads of each node
//! redo_part    = ldm_instance + ldm_instances x (round / ldm_instances
//!                % parts of the instance) and over that ldm's redo parts
//! replicas     = the group's nodes in config order, rotated by
//!                (ldm_instance + round / ldm_instances) % replicas
//! ```
//!
//! The rotation makes each node of a group primary for an equal share of
//! the group's partitions, and spreads those primaries over its ldm
//! threads: the partitions one ldm instance holds in a group (rounds l,
//! l + ldm_instances, ...) rotate through every replica order in turn.
//! (Rotating by `round % replicas` alone would, with as many ldm threads as
//! replicas, make each ldm thread primary for all its partitions on one
//! node and backup for all of them on the other, however many partitions
//! the table has; committed reads, which go to primaries, would then use
//! half the cluster's ldm threads.) With the default partition count
//! (groups x ldm threads) each ldm instance holds one partition per group,
//! round / ldm_instances is 0 and the rotation is ldm_instance % replicas:
//! every ldm thread is primary on one node only. A table with groups x ldm
//! threads x replicas partitions (NDB's default, one primary per ldm thread
//! of every node) has every ldm thread of every node primary for one.
//!
//! Every node computes the same maps from the same config; a map version
//! of 1 means "as created".
//!
//! Redo part `r` belongs to ldm instance `r % ldm_instances` (config
//! guarantees at least one part per instance), so every part has one
//! writer: [`redo_parts_of_ldm`] lists an instance's parts, and a partition
//! goes to one of its own ldm's parts, rotating as the instance gets more.
//!
//! The placement is fixed at creation (a partition's redo part never follows
//! later thread-count changes); the map's version rises when it changes.

use signal::partition::{default_partition_of_bucket, BUCKETS};
use signal::schema::TableDef;
use signal::signals::{PartitionMap, PartitionPlacement};
use signal::NodeId;

/// The redo parts ldm instance `instance` of `ldm_instances` writes: `r`
/// with `r % ldm_instances == instance`.
pub fn redo_parts_of_ldm(instance: u16, ldm_instances: u16, redo_log_parts: u32) -> Vec<u32> {
    (u32::from(instance)..redo_log_parts)
        .step_by(usize::from(ldm_instances))
        .collect()
}

/// The part of the `index`th partition (in one node group) of ldm `instance`.
fn redo_part_of(instance: u32, index: u32, ldm_instances: u32, redo_log_parts: u32) -> u32 {
    let parts_of_instance = (redo_log_parts - instance).div_ceil(ldm_instances);
    instance + ldm_instances * (index % parts_of_instance)
}

/// The cluster's shape, as partition placement needs it.
pub(crate) struct Distribution {
    /// Nodes of each node group (index = group id), in config order.
    group_nodes: Vec<Vec<NodeId>>,
    replicas: u8,
    ldm_instances: u16,
    redo_log_parts: u32,
}

impl Distribution {
    /// Checks the cluster's shape: the config service validated it, so a
    /// violation here is a wiring bug and stops the node.
    pub(crate) fn new(
        data_nodes: &[(NodeId, u32)],
        replicas: u8,
        ldm_instances: u16,
        redo_log_parts: u32,
    ) -> Distribution {
        assert!(
            !data_nodes.is_empty(),
            "a cluster needs at least one data node"
        );
        assert!(
            (1..=4).contains(&replicas),
            "replicas must be 1..=4, configured {replicas}"
        );
        assert!(
            ldm_instances > 0,
            "partitions need at least one ldm instance"
        );
        assert!(
            redo_log_parts >= u32::from(ldm_instances),
            "{redo_log_parts} redo log parts for {ldm_instances} ldm instances: config \
             validation gives every ldm instance a part of its own"
        );
        let groups = data_nodes
            .iter()
            .map(|&(_, group)| group)
            .max()
            .unwrap_or(0) as usize
            + 1;
        // Checked before the vector below is sized by it.
        assert!(
            groups <= data_nodes.len(),
            "node group ids must be 0..groups, but {} data nodes name group {}",
            data_nodes.len(),
            groups - 1
        );
        let mut group_nodes: Vec<Vec<NodeId>> = vec![Vec::new(); groups];
        for (index, &(node, group)) in data_nodes.iter().enumerate() {
            assert!(
                !data_nodes[..index].iter().any(|&(other, _)| other == node),
                "data node {node} is configured twice"
            );
            group_nodes[group as usize].push(node);
        }
        for (group, nodes) in group_nodes.iter().enumerate() {
            // Partitions go to group p % groups, so group ids must be dense.
            assert!(
                !nodes.is_empty(),
                "node group {group} has no data node: group ids must be 0..{groups}"
            );
            assert_eq!(
                nodes.len(),
                replicas as usize,
                "node group {group} has {} data nodes, but every group holds one per replica ({replicas})",
                nodes.len()
            );
        }
        Distribution {
            group_nodes,
            replicas,
            ldm_instances,
            redo_log_parts,
        }
    }

    /// The map of a new table (version 1).
    pub(crate) fn partition_map(&self, table: &TableDef) -> PartitionMap {
        assert!(
            table.partitions > 0,
            "dict decides the partition count before asking dih for table {}",
            table.id
        );
        let groups = self.group_nodes.len() as u32;
        let partitions = (0..table.partitions)
            .map(|partition| {
                let node_group = partition % groups;
                let round = partition / groups;
                let nodes = &self.group_nodes[node_group as usize];
                let ldm_instances = self.ldm_instances as u32;
                let ldm_instance = round % ldm_instances;
                let rotation =
                    ((ldm_instance + round / ldm_instances) % self.replicas as u32) as usize;
                PartitionPlacement {
                    node_group,
                    replicas: (0..nodes.len())
                        .map(|position| nodes[(position + rotation) % nodes.len()])
                        .collect(),
                    ldm_instance: ldm_instance as u16,
                    redo_part: redo_part_of(
                        ldm_instance,
                        round / ldm_instances,
                        ldm_instances,
                        self.redo_log_parts,
                    ),
                }
            })
            .collect();
        PartitionMap {
            table_id: table.id,
            version: 1,
            bucket_partitions: (0..BUCKETS)
                .map(|bucket| default_partition_of_bucket(bucket, table.partitions))
                .collect(),
            partitions,
        }
    }
}
