//! Answers: which blocks of a fixed set have answered the current round of a
//! protocol (every tc confirming GCP_PREPARE, say).
//!
//! Protocol rounds broadcast a request to a known set of blocks and go on
//! only when each has answered exactly once. Counting alone would let a
//! duplicate answer hide a missing one, so each member's answer is recorded
//! and a stranger's or a second answer stops the node: only blocks of this
//! cluster send these confirmations, so either is a bug (fail fast).

use signal::BlockRef;

/// The members of a protocol round and which of them have answered.
pub struct Answers {
    members: Vec<BlockRef>,
    answered: Vec<bool>,
    outstanding: usize,
}

impl Answers {
    /// A set of `members`, with no round running.
    pub fn new(members: Vec<BlockRef>) -> Answers {
        let answered = vec![true; members.len()];
        Answers {
            members,
            answered,
            outstanding: 0,
        }
    }

    /// Every member, in the order rounds address them.
    pub fn members(&self) -> &[BlockRef] {
        &self.members
    }

    /// Starts a round: no member has answered yet.
    pub fn start_round(&mut self) {
        assert_eq!(
            self.outstanding, 0,
            "a round started while {} answers of the previous one were missing",
            self.outstanding
        );
        self.answered.fill(false);
        self.outstanding = self.members.len();
    }

    /// True when every member answered the current round.
    pub fn is_complete(&self) -> bool {
        self.outstanding == 0
    }

    /// Adds `members` not in the set yet (the blocks of a node that
    /// rejoined). A round running waits for the members it asked, not for
    /// these: they count as having answered it.
    pub fn add_members(&mut self, members: &[BlockRef]) {
        for &member in members {
            if !self.members.contains(&member) {
                self.members.push(member);
                self.answered.push(true);
            }
        }
    }

    /// Removes every member on a node of `nodes` (they failed): the
    /// current round no longer waits for them, nor will later ones.
    /// Returns true when the round was waiting only for them, so it is
    /// now complete.
    pub fn forget_nodes(&mut self, nodes: signal::NodeSet) -> bool {
        let waiting = self.outstanding > 0;
        let mut position = 0;
        while position < self.members.len() {
            if nodes.contains(self.members[position].node) {
                self.members.remove(position);
                if !self.answered.remove(position) {
                    self.outstanding -= 1;
                }
            } else {
                position += 1;
            }
        }
        waiting && self.outstanding == 0
    }

    /// Whether `from` is a member that has answered this round (a late
    /// or repeated answer from a peer is then ignored, not recorded
    /// twice).
    pub fn has_answered(&self, from: BlockRef) -> bool {
        self.members
            .iter()
            .position(|&member| member == from)
            .is_some_and(|position| self.answered[position])
    }

    /// Records `from`'s answer (`what` names the signal, for the panic
    /// message). Returns true when it was the last one missing.
    pub fn record(&mut self, from: BlockRef, what: &str) -> bool {
        let Some(position) = self.members.iter().position(|&member| member == from) else {
            panic!("{what} from {from}, which is not part of this round");
        };
        assert!(
            !self.answered[position],
            "{what} from {from} twice in one round (or with no round running)"
        );
        self.answered[position] = true;
        self.outstanding -= 1;
        self.outstanding == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use signal::{BlockKind, NodeId};

    fn tcs() -> Vec<BlockRef> {
        (0..2)
            .map(|i| BlockRef::new(NodeId(1), BlockKind::Tc, i))
            .collect()
    }

    #[test]
    fn a_round_completes_with_the_last_missing_answer_in_any_order() {
        let members = tcs();
        let mut answers = Answers::new(members.clone());
        assert!(answers.is_complete());
        answers.start_round();
        assert!(!answers.is_complete());
        assert!(!answers.record(members[1], "Conf"));
        assert!(answers.record(members[0], "Conf"));
        assert!(answers.is_complete());
        answers.start_round();
        assert!(!answers.record(members[0], "Conf"));
    }

    #[test]
    fn forgetting_the_nodes_a_round_waits_for_completes_it() {
        let members = vec![
            BlockRef::new(NodeId(1), BlockKind::Tc, 0),
            BlockRef::new(NodeId(2), BlockKind::Tc, 0),
            BlockRef::new(NodeId(2), BlockKind::Tc, 1),
        ];
        let mut answers = Answers::new(members.clone());
        assert!(
            !answers.forget_nodes(signal::NodeSet::EMPTY),
            "no round runs"
        );
        answers.start_round();
        assert!(!answers.record(members[0], "Conf"));
        assert!(!answers.forget_nodes(signal::NodeSet::of([NodeId(3)])));
        assert!(answers.forget_nodes(signal::NodeSet::of([NodeId(2)])));
        assert_eq!(answers.members(), &members[..1]);
        answers.start_round();
        assert!(
            answers.record(members[0], "Conf"),
            "later rounds skip them too"
        );
    }

    #[test]
    #[should_panic(expected = "twice in one round")]
    fn a_second_answer_stops_the_node() {
        let members = tcs();
        let mut answers = Answers::new(members.clone());
        answers.start_round();
        answers.record(members[0], "Conf");
        answers.record(members[0], "Conf");
    }

    #[test]
    #[should_panic(expected = "not part of this round")]
    fn a_strangers_answer_stops_the_node() {
        let mut answers = Answers::new(tcs());
        answers.start_round();
        answers.record(BlockRef::new(NodeId(2), BlockKind::Tc, 0), "Conf");
    }
}
