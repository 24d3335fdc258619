//! Which data nodes are stale at a whole-cluster restart
//! (docs/design/0014-restart-after-failure.md,
//! docs/design/0015-start-without-stale-nodes.md): pure code shared by
//! membership, which leaves the stale nodes out of the cluster it forms,
//! and dih, which decides the restored GCI from the same reports.

use signal::{Gci, NodeId, NodeSet};

/// What the system files of the starting nodes say, judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The highest complete GCI any node reported: the one restored.
    pub restored: Gci,
    /// The nodes the files that record `restored` name alive at it
    /// (empty: none recorded, as in files of format version 1).
    pub members: NodeSet,
    /// The nodes whose data ends before `restored` and which were not
    /// alive when it was made durable: they failed before it, so their
    /// data is older than the cluster's.
    pub stale: NodeSet,
}

/// Judges `reported`: each node's (id, latest complete GCI, members its
/// file records alive at that GCI). A node inside the members but behind
/// (the cluster crashed during the round that wrote the GCI) is not
/// stale: its redo holds the restored GCI's records. Without recorded
/// members every node takes part. A node whose file records nothing
/// complete while the cluster restores a GCI (started with `--initial`,
/// its directory lost, or a node restart cut short after it voided its
/// file) is stale whatever the members: it has nothing to restore, and
/// rejoins by a node restart (docs/design/0018-node-restart.md).
pub fn judge(reported: &[(NodeId, Gci, NodeSet)]) -> Verdict {
    let restored = reported
        .iter()
        .map(|&(_, gci, _)| gci)
        .max()
        .unwrap_or(Gci(0));
    let members = reported
        .iter()
        .filter(|&&(_, gci, _)| gci == restored)
        .fold(NodeSet::EMPTY, |members, &(_, _, recorded)| {
            members.union(recorded)
        });
    let stale = NodeSet::of(
        reported
            .iter()
            .filter(|&&(node, gci, _)| {
                restored != Gci(0)
                    && gci < restored
                    && (gci == Gci(0) || !members.is_empty() && !members.contains(node))
            })
            .map(|&(node, _, _)| node),
    );
    Verdict {
        restored,
        members,
        stale,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[u16]) -> NodeSet {
        NodeSet::of(ids.iter().map(|&id| NodeId(id)))
    }

    #[test]
    fn a_node_that_failed_before_the_newest_complete_gci_is_stale() {
        let verdict = judge(&[
            (NodeId(1), Gci(7), set(&[1, 2])),
            (NodeId(2), Gci(9), set(&[2])),
            (NodeId(3), Gci(0), NodeSet::EMPTY),
        ]);
        assert_eq!(verdict.restored, Gci(9));
        assert_eq!(verdict.members, set(&[2]));
        assert_eq!(verdict.stale, set(&[1, 3]));
    }

    #[test]
    fn a_node_with_nothing_is_stale_even_among_the_members() {
        // Node 3 lost its files (or started with --initial) after GCI 9
        // recorded it alive: it has nothing to restore, and rejoins by a
        // node restart.
        let verdict = judge(&[
            (NodeId(2), Gci(9), set(&[2, 3])),
            (NodeId(3), Gci(0), NodeSet::EMPTY),
        ]);
        assert_eq!(verdict.stale, set(&[3]));
        // Nothing anywhere: an initial start, nobody stale.
        let verdict = judge(&[
            (NodeId(2), Gci(0), NodeSet::EMPTY),
            (NodeId(3), Gci(0), NodeSet::EMPTY),
        ]);
        assert_eq!(verdict.stale, NodeSet::EMPTY);
    }

    #[test]
    fn a_member_behind_the_newest_gci_is_not_stale() {
        // The crash came while the copy round wrote GCI 9: node 1 was alive
        // for it, and its redo holds it.
        let verdict = judge(&[
            (NodeId(1), Gci(8), set(&[1, 2])),
            (NodeId(2), Gci(9), set(&[1, 2])),
        ]);
        assert_eq!(verdict.stale, NodeSet::EMPTY);
    }

    #[test]
    fn files_without_members_make_no_node_stale() {
        let verdict = judge(&[
            (NodeId(1), Gci(8), NodeSet::EMPTY),
            (NodeId(2), Gci(9), NodeSet::EMPTY),
        ]);
        assert_eq!(verdict.stale, NodeSet::EMPTY);
        let initial = judge(&[(NodeId(1), Gci(0), NodeSet::EMPTY)]);
        assert_eq!((initial.restored, initial.stale), (Gci(0), NodeSet::EMPTY));
    }
}
