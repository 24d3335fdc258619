//! The survival rule (docs/design/failures.md §4): after a failure or a
//! split, may the side that agreed a new membership go on serving?
//!
//! Judged against the last agreed membership (`before`), never against
//! the configured cluster, so that a cluster that already lost a node
//! judges its next failure by the nodes it still had. Pure code: the
//! president applies it before committing a membership, and every node
//! told to shut down applies it again to say why.

use signal::NodeSet;
use std::fmt;

/// What the rule decides for one side.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Verdict {
    /// The side goes on serving.
    Continue(Reason),
    /// The side must shut down.
    ShutDown(Reason),
    /// Exactly half of the nodes and no node group whole on either
    /// side: only the arbitrator can decide.
    Arbitrate,
}

/// Why a side continues or shuts down.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Reason {
    /// The side has no node of node group `group`: some data is not there.
    LacksNodeGroup { group: usize, nodes: NodeSet },
    /// The side holds every live node of node group `group`, so no other
    /// side can hold all the data.
    HoldsNodeGroup { group: usize },
    /// The side has more than half of the nodes.
    Majority { side: u32, of: u32 },
    /// The side has less than half of the nodes.
    Minority { side: u32, of: u32 },
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Reason::LacksNodeGroup { group, nodes } => write!(
                f,
                "this side has no node of node group {group} (its live nodes were {nodes}), so \
                 some data is not here"
            ),
            Reason::HoldsNodeGroup { group } => write!(
                f,
                "this side holds every live node of node group {group}, so no other side has \
                 all the data"
            ),
            Reason::Majority { side, of } => {
                write!(f, "this side has {side} of the {of} nodes, a majority")
            }
            Reason::Minority { side, of } => {
                write!(f, "this side has {side} of the {of} nodes, a minority")
            }
        }
    }
}

/// The verdict for `side` (a subset of `before`, the last agreed
/// membership), where `groups` are the configured node groups.
pub(crate) fn judge(before: NodeSet, side: NodeSet, groups: &[NodeSet]) -> Verdict {
    assert!(
        side.is_subset(before) && !side.is_empty(),
        "a side {side} judged against membership {before}: it must be a non-empty part of it"
    );
    let live_groups = groups
        .iter()
        .map(|group| group.intersection(before))
        .enumerate()
        .filter(|(_, live)| !live.is_empty());
    for (group, live) in live_groups.clone() {
        if live.intersection(side).is_empty() {
            return Verdict::ShutDown(Reason::LacksNodeGroup { group, nodes: live });
        }
    }
    for (group, live) in live_groups {
        if live.is_subset(side) {
            return Verdict::Continue(Reason::HoldsNodeGroup { group });
        }
    }
    let (side, of) = (side.len(), before.len());
    match (2 * side).cmp(&of) {
        std::cmp::Ordering::Greater => Verdict::Continue(Reason::Majority { side, of }),
        std::cmp::Ordering::Less => Verdict::ShutDown(Reason::Minority { side, of }),
        std::cmp::Ordering::Equal => Verdict::Arbitrate,
    }
}

/// The verdict for `side` when the members `starting` of `before` are
/// in their node restart: they hold no data that counts, so a side is
/// judged by its other nodes alone (docs/design/0018-node-restart.md): a
/// side whose only node of a group is starting lacks that group.
pub(crate) fn judge_counting_data(
    before: NodeSet,
    side: NodeSet,
    starting: NodeSet,
    groups: &[NodeSet],
) -> Verdict {
    let counted_before = before.difference(starting);
    let counted_side = side.difference(starting);
    if counted_side.is_empty() {
        let lacking = groups
            .iter()
            .map(|group| group.intersection(counted_before))
            .enumerate()
            .find(|(_, live)| !live.is_empty());
        if let Some((group, nodes)) = lacking {
            return Verdict::ShutDown(Reason::LacksNodeGroup { group, nodes });
        }
    }
    judge(counted_before, counted_side, groups)
}

#[cfg(test)]
mod tests {
    use super::*;
    use signal::NodeId;

    fn set(ids: &[u16]) -> NodeSet {
        NodeSet::of(ids.iter().map(|&id| NodeId(id)))
    }

    #[test]
    fn one_node_group_of_two_needs_the_arbitrator_when_split() {
        let groups = [set(&[1, 2])];
        assert_eq!(judge(set(&[1, 2]), set(&[1]), &groups), Verdict::Arbitrate);
        assert_eq!(judge(set(&[1, 2]), set(&[2]), &groups), Verdict::Arbitrate);
        assert_eq!(
            judge(set(&[1, 2]), set(&[1, 2]), &groups),
            Verdict::Continue(Reason::HoldsNodeGroup { group: 0 })
        );
    }

    #[test]
    fn two_groups_of_two_survive_one_node_per_group_and_not_a_whole_group() {
        let groups = [set(&[1, 2]), set(&[3, 4])];
        let all = set(&[1, 2, 3, 4]);
        // One node of a group fails: the rest holds the other group whole.
        assert_eq!(
            judge(all, set(&[1, 3, 4]), &groups),
            Verdict::Continue(Reason::HoldsNodeGroup { group: 1 })
        );
        // Then one of the other group: judged against {1, 3, 4}, the side
        // {1, 3} holds group 0's last live node.
        assert_eq!(
            judge(set(&[1, 3, 4]), set(&[1, 3]), &groups),
            Verdict::Continue(Reason::HoldsNodeGroup { group: 0 })
        );
        // Then the last node of group 0: nothing of it is left.
        assert_eq!(
            judge(set(&[1, 3]), set(&[3]), &groups),
            Verdict::ShutDown(Reason::LacksNodeGroup {
                group: 0,
                nodes: set(&[1])
            })
        );
        // A split down the middle of both groups: exactly half, no group
        // whole on either side.
        assert_eq!(judge(all, set(&[1, 3]), &groups), Verdict::Arbitrate);
        // A side that lost a whole group shuts down, the other continues.
        assert_eq!(
            judge(all, set(&[3, 4]), &groups),
            Verdict::ShutDown(Reason::LacksNodeGroup {
                group: 0,
                nodes: set(&[1, 2])
            })
        );
    }

    #[test]
    fn a_starting_node_holds_no_data_that_counts() {
        let groups = [set(&[1, 2])];
        // Node 2 restarts; node 1 fails: node 2 alone has no data.
        assert_eq!(
            judge_counting_data(set(&[1, 2]), set(&[2]), set(&[2]), &groups),
            Verdict::ShutDown(Reason::LacksNodeGroup {
                group: 0,
                nodes: set(&[1])
            })
        );
        // Node 2 fails while restarting: node 1 holds the group whole.
        assert_eq!(
            judge_counting_data(set(&[1, 2]), set(&[1]), set(&[2]), &groups),
            Verdict::Continue(Reason::HoldsNodeGroup { group: 0 })
        );
        // Three replicas, one restarting: the other two split, and
        // neither holds a majority of the two that count.
        let groups = [set(&[1, 2, 3])];
        assert_eq!(
            judge_counting_data(set(&[1, 2, 3]), set(&[1, 3]), set(&[3]), &groups),
            Verdict::Arbitrate
        );
    }

    #[test]
    fn three_replicas_decide_by_majority() {
        let groups = [set(&[1, 2, 3])];
        let all = set(&[1, 2, 3]);
        assert_eq!(
            judge(all, set(&[1, 2]), &groups),
            Verdict::Continue(Reason::Majority { side: 2, of: 3 })
        );
        assert_eq!(
            judge(all, set(&[3]), &groups),
            Verdict::ShutDown(Reason::Minority { side: 1, of: 3 })
        );
    }
}
