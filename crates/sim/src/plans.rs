//! What the bank's slots do, one transaction at a time: the plans (a
//! transfer, a scratch transaction, a token insert or delete, a load or a
//! verify) and the random choices that make them. `bank::slots` runs them
//! through the client.
//!
//! Rates are chosen so every path is taken in each run of 10,000
//! transactions while lock waits stay a small part of the run: abandoned
//! transfers hold their locks for the whole inactivity timeout and shared
//! ones deadlock on the upgrade, so both stay rare.

use crate::bank::{SCRATCH_BASE, SCRATCH_KEYS_PER_SLOT};
use crate::rows;
use client::LockMode;
use signal::ErrorCode;
use stdx::mix::XorShift;

/// How a transfer ends.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Ending {
    /// The write batch commits.
    Commit,
    /// The write batch executes (`Commit::No`); a batch of its own commits.
    SeparateCommit,
    /// A rollback after the reads.
    RollbackAfterReads,
    /// A rollback after the writes executed.
    RollbackAfterWrites,
    /// Nothing after the reads for longer than the inactivity timeout,
    /// which aborts it; the client then rolls back (nothing to roll back).
    Abandon,
}

/// What an operation does.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum OperationKind {
    Insert,
    Update,
    Delete,
    Read,
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
    /// Operations on one key, sent as one committing batch.
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
pub(crate) fn transfer_plan(random: &mut XorShift, accounts_in_table: u32) -> Plan {
    let count = 2 + random.below(3) as usize;
    let mut accounts = Vec::with_capacity(count);
    while accounts.len() < count {
        let account = random.below(u64::from(accounts_in_table)) as u32;
        if !accounts.contains(&account) {
            accounts.push(account);
        }
    }
    // Abandoned transfers hold their locks until the inactivity timeout
    // and shared ones deadlock on the upgrade: both cost seconds of
    // lock waits, so they stay rare.
    let ending = match random.below(1000) {
        0..=869 => Ending::Commit,
        870..=919 => Ending::SeparateCommit,
        920..=954 => Ending::RollbackAfterReads,
        955..=996 => Ending::RollbackAfterWrites,
        _ => Ending::Abandon,
    };
    let lock = if random.below(100) < 2 {
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
pub(crate) fn random_note(random: &mut XorShift) -> Option<Vec<u8>> {
    if random.below(10) == 0 {
        return None;
    }
    let length = random.below(rows::NOTE_MAX_BYTES as u64 + 1) as usize;
    let first = random.below(26) as u8;
    Some((0..length).map(|i| b'a' + (first + i as u8) % 26).collect())
}

/// Scratch key `index` of slot `slot`.
pub(crate) fn scratch_key(slot: usize, index: u32) -> u32 {
    SCRATCH_BASE + slot as u32 * SCRATCH_KEYS_PER_SLOT + index
}

/// A scratch transaction on one of the slot's keys, whose outcome the
/// slot's model (`scratch`, the state of each of its keys) predicts.
pub(crate) fn scratch_plan(
    random: &mut XorShift,
    slot: usize,
    scratch: &[Option<Option<Vec<u8>>>],
) -> Plan {
    let index = random.below(u64::from(SCRATCH_KEYS_PER_SLOT)) as u32;
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
    let roll = random.below(100);
    let (ops, after, expect_error) = match current {
        None => match roll {
            0..=49 => {
                let note = random_note(random);
                (
                    vec![op(OperationKind::Insert, note.clone())],
                    Some(note),
                    None,
                )
            }
            50..=69 => {
                let note = random_note(random);
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
                let new_note = random_note(random);
                (
                    vec![op(OperationKind::Update, new_note.clone())],
                    Some(new_note),
                    None,
                )
            }
            50..=64 => (
                vec![op(OperationKind::Insert, random_note(random))],
                Some(note),
                Some((ErrorCode::DuplicateKey, 0)),
            ),
            65..=79 => {
                let new_note = random_note(random);
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
