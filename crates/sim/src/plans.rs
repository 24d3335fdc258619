//! What the bank's clients do, one transaction at a time: the plans (a
//! transfer, a scratch transaction, a token insert or delete, a load or a
//! verify) and the random choices that make them. `bank` runs them.
//!
//! Rates are chosen so every path is taken in each run of 10,000
//! transactions while lock waits stay a small part of the run: abandoned
//! transfers hold their locks for the whole inactivity timeout and shared
//! ones deadlock on the upgrade, so both stay rare.

use crate::bank::{SCRATCH_BASE, SCRATCH_KEYS_PER_SLOT};
use crate::rows;
use crate::world::ClientIo;
use signal::signals::{LockMode, OperationKind};
use signal::ErrorCode;

/// How a transfer ends.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Ending {
    /// The write batch carries COMMIT.
    Commit,
    /// The write batch executes; TC_COMMITREQ commits.
    SeparateCommit,
    /// TC_ROLLBACKREQ after the reads.
    RollbackAfterReads,
    /// TC_ROLLBACKREQ right behind the read batch, without waiting for its
    /// answer: the tc gets it while executing, or aborting for another
    /// reason, or after the end (and then answers TC_ROLLBACKCONF for an
    /// unknown transaction). Whatever came first, TC_ROLLBACKCONF is last.
    RollbackImpatiently,
    /// TC_ROLLBACKREQ after the writes executed.
    RollbackAfterWrites,
    /// Nothing after the reads: the inactivity timeout aborts it.
    Abandon,
}

/// One operation of a scratch transaction.
#[derive(Clone, Debug)]
pub(crate) struct ScratchOp {
    pub(crate) kind: OperationKind,
    pub(crate) lock: LockMode,
    /// Note to write (insert, update), or the note a read must see.
    pub(crate) note: Option<Vec<u8>>,
}

#[derive(Clone, Debug)]
pub(crate) enum Plan {
    Load {
        first: u32,
        count: u32,
    },
    Transfer {
        accounts: Vec<u32>,
        lock: LockMode,
        ending: Ending,
    },
    /// Operations on one key, sent as one batch with COMMIT.
    Scratch {
        key: u32,
        ops: Vec<ScratchOp>,
        /// What the key holds afterwards if the transaction commits
        /// (`None`: no row; `Some(note)`: a row with this note).
        after: Option<Option<Vec<u8>>>,
        /// The error (and failing op) the model predicts, if any.
        expect_error: Option<(ErrorCode, u32)>,
    },
    /// Insert a token (and read it back), or read it under lock and
    /// delete it; either may find the key in the other state.
    Token {
        key: u32,
        insert: bool,
    },
    /// Committed reads of accounts `first..first+count`.
    VerifyAccounts {
        first: u32,
        count: u32,
    },
    /// A committed read of a token key.
    VerifyToken {
        key: u32,
    },
}

/// A transfer of 2-4 distinct accounts of `accounts`, with its ending and lock mode.
pub(crate) fn transfer_plan(io: &mut ClientIo<'_>, accounts_in_table: u32) -> Plan {
    let count = 2 + io.below(3) as usize;
    let mut accounts = Vec::with_capacity(count);
    while accounts.len() < count {
        let account = io.below(u64::from(accounts_in_table)) as u32;
        if !accounts.contains(&account) {
            accounts.push(account);
        }
    }
    // Abandoned transfers hold their locks until the inactivity timeout
    // and shared ones deadlock on the upgrade: both cost seconds of
    // lock waits, so they stay rare.
    let ending = match io.below(1000) {
        0..=849 => Ending::Commit,
        850..=899 => Ending::SeparateCommit,
        900..=929 => Ending::RollbackAfterReads,
        930..=959 => Ending::RollbackAfterWrites,
        960..=996 => Ending::RollbackImpatiently,
        _ => Ending::Abandon,
    };
    let lock = if io.below(100) < 2 {
        // Shared then exclusive: two such transfers on one account
        // deadlock on the upgrade, which the lock-wait timeout ends.
        LockMode::Shared
    } else {
        LockMode::Exclusive
    };
    Plan::Transfer {
        accounts,
        lock,
        ending,
    }
}

/// A note of random length (sometimes NULL), so var parts change size class.
pub(crate) fn random_note(io: &mut ClientIo<'_>) -> Option<Vec<u8>> {
    if io.below(10) == 0 {
        return None;
    }
    let length = io.below(rows::NOTE_MAX_BYTES as u64 + 1) as usize;
    let first = io.below(26) as u8;
    Some((0..length).map(|i| b'a' + (first + i as u8) % 26).collect())
}

/// Scratch key `index` of slot `slot`.
pub(crate) fn scratch_key(slot: usize, index: u32) -> u32 {
    SCRATCH_BASE + slot as u32 * SCRATCH_KEYS_PER_SLOT + index
}

/// A scratch transaction on one of the slot's keys, whose outcome the
/// slot's model (`scratch`, the state of each of its keys) predicts.
pub(crate) fn scratch_plan(
    io: &mut ClientIo<'_>,
    slot: usize,
    scratch: &[Option<Option<Vec<u8>>>],
) -> Plan {
    let index = io.below(u64::from(SCRATCH_KEYS_PER_SLOT)) as u32;
    let key = scratch_key(slot, index);
    let current = scratch[index as usize].clone();
    let op = |kind, note| ScratchOp {
        kind,
        lock: LockMode::Exclusive,
        note,
    };
    let read = |lock, note| ScratchOp {
        kind: OperationKind::Read,
        lock,
        note,
    };
    let roll = io.below(100);
    let (ops, after, expect_error) = match current {
        None => match roll {
            0..=49 => {
                let note = random_note(io);
                (
                    vec![op(OperationKind::Insert, note.clone())],
                    Some(note),
                    None,
                )
            }
            50..=69 => {
                let note = random_note(io);
                (
                    vec![
                        op(OperationKind::Insert, note.clone()),
                        read(LockMode::Exclusive, note),
                        op(OperationKind::Delete, None),
                    ],
                    None,
                    None,
                )
            }
            70..=84 => (
                vec![op(OperationKind::Delete, None)],
                None,
                Some((ErrorCode::NoSuchRow, 0)),
            ),
            _ => (
                vec![read(LockMode::CommittedRead, None)],
                None,
                Some((ErrorCode::NoSuchRow, 0)),
            ),
        },
        Some(note) => match roll {
            0..=29 => (vec![op(OperationKind::Delete, None)], None, None),
            30..=49 => {
                let new_note = random_note(io);
                (
                    vec![op(OperationKind::Update, new_note.clone())],
                    Some(new_note),
                    None,
                )
            }
            50..=64 => (
                vec![op(OperationKind::Insert, random_note(io))],
                Some(note),
                Some((ErrorCode::DuplicateKey, 0)),
            ),
            65..=79 => {
                let new_note = random_note(io);
                (
                    vec![
                        op(OperationKind::Delete, None),
                        op(OperationKind::Insert, new_note.clone()),
                        read(LockMode::Exclusive, new_note.clone()),
                    ],
                    Some(new_note),
                    None,
                )
            }
            _ => {
                let lock = if roll < 90 {
                    LockMode::CommittedRead
                } else {
                    LockMode::Shared
                };
                (vec![read(lock, note.clone())], Some(note), None)
            }
        },
    };
    Plan::Scratch {
        key,
        ops,
        after,
        expect_error,
    }
}

/// A committed read of one scratch key, checked against the model
/// (`present`: the key's state).
pub(crate) fn scratch_verify(slot: usize, index: u32, present: Option<Option<Vec<u8>>>) -> Plan {
    Plan::Scratch {
        key: scratch_key(slot, index),
        ops: vec![ScratchOp {
            kind: OperationKind::Read,
            lock: LockMode::CommittedRead,
            note: present.clone().flatten(),
        }],
        expect_error: present.is_none().then_some((ErrorCode::NoSuchRow, 0)),
        after: present,
    }
}
