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
pub(crate) struct Answers {
    members: Vec<BlockRef>,
    answered: Vec<bool>,
    outstanding: usize,
}

impl Answers {
    /// A set of `members`, with no round running.
    pub(crate) fn new(members: Vec<BlockRef>) -> Answers {
        let answered = vec![true; members.len()];
        Answers {
            members,
            answered,
            outstanding: 0,
        }
    }

    /// Every member, in the order rounds address them.
    pub(crate) fn members(&self) -> &[BlockRef] {
        &self.members
    }

    /// Starts a round: no member has answered yet.
    pub(crate) fn start_round(&mut self) {
        assert_eq!(
            self.outstanding, 0,
            "a round started while {} answers of the previous one were missing",
            self.outstanding
        );
        self.answered.fill(false);
        self.outstanding = self.members.len();
    }

    /// Records `from`'s answer (`what` names the signal, for the panic
    /// message). Returns true when it was the last one missing.
    pub(crate) fn record(&mut self, from: BlockRef, what: &str) -> bool {
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
