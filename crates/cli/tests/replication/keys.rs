//! Keys on every node: where a key's partition lives, and keys spread so
//! that consecutive ones change node group and primary.

use crate::common::{key, partition_of, TestCluster, LDM_THREADS};
use client::Table;
use std::collections::{BTreeMap, BTreeSet};

/// Where a key's partition lives: its node group and primary node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Slot {
    pub group: u32,
    pub primary: u16,
}

pub fn slot_of(processes: &TestCluster, table: &Table, k: u32) -> Slot {
    let partition = partition_of(table, &key(k));
    let replicas = processes.replicas_of_partition(partition);
    Slot {
        group: processes.group_of(replicas[0]),
        primary: replicas[0],
    }
}

/// Every slot of the cluster, ordered so that consecutive slots change
/// node group: the first primary of each group, then the second, ...
pub fn slot_order(processes: &TestCluster) -> Vec<Slot> {
    let groups = processes.groups();
    let mut slots = Vec::new();
    for position in 0..usize::from(processes.replicas()) {
        for (group, nodes) in groups.iter().enumerate() {
            slots.push(Slot {
                group: group as u32,
                primary: nodes[position],
            });
        }
    }
    slots
}

/// `count` keys from `from` upwards, taken round robin over every slot, so
/// any two consecutive keys are in different node groups (when there are
/// several) and the first `slots` keys cover every primary node.
pub fn spread_keys(processes: &TestCluster, table: &Table, from: u32, count: usize) -> Vec<u32> {
    let order = slot_order(processes);
    let mut pending: BTreeMap<Slot, Vec<u32>> = BTreeMap::new();
    let mut keys = Vec::new();
    let mut next = from;
    while keys.len() < count {
        let wanted = order[keys.len() % order.len()];
        if let Some(k) = pending.get_mut(&wanted).and_then(Vec::pop) {
            keys.push(k);
            continue;
        }
        let slot = slot_of(processes, table, next);
        if slot == wanted {
            keys.push(next);
        } else {
            pending.entry(slot).or_default().insert(0, next);
        }
        next += 1;
        assert!(
            next < from + 100_000,
            "no key of {wanted:?} among 100000 keys from {from}: is every node primary of a partition?"
        );
    }
    keys
}

/// The default partition count puts partitions (and primaries) on every
/// node group and every node.
pub fn assert_partitions_on_every_group(processes: &TestCluster, table: &Table) {
    let partitions = table.def().partitions;
    let groups = processes.groups().len() as u32;
    assert_eq!(
        partitions,
        groups * LDM_THREADS,
        "default partitions = node groups x ldm threads: {:?}",
        table.def()
    );
    let primaries: BTreeSet<u16> = (0..partitions)
        .map(|partition| processes.replicas_of_partition(partition)[0])
        .collect();
    assert_eq!(
        primaries,
        processes.node_ids().into_iter().collect(),
        "every data node is primary of some partition"
    );
}
