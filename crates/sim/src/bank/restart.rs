//! The bank across a whole-cluster crash: what the clients knew when the
//! cluster went down ([`CrashedBank`]), the check of the restored table
//! against it (docs/design/durability.md §5: the committed prefix up to the
//! restored GCI), and a bank that continues from the restored table
//! ([`Bank::resume`]).
//!
//! At the crash every transaction in flight fails, and the client says
//! how: a commit that was sent and never answered is `OutcomeUnknown`,
//! in doubt (it may have committed); anything else failed before it asked
//! to commit, so the ledger records it aborted, and a restored row showing
//! its write is a dirty read. A durable commit heard committed whose wait
//! for durability was cut counts as committed in its GCI.
//!
//! The accounts and tokens are judged by `ledger::restart`. A scratch key
//! belongs to one slot, which runs one transaction at a time, so its
//! committed writes are in order with non-decreasing GCIs: the restored
//! key must hold what the last of them up to the restored GCI left (or
//! what the slot's transaction in doubt would have left, if no write after
//! the restored GCI precedes it), deleted keys staying deleted. And the
//! balances of the restored accounts add up.

use super::{load_chunks, lock, Bank, BankOptions, ScratchState};
use super::{INITIAL_BALANCE, SCRATCH_KEYS_PER_SLOT};
use super::{TOKENS, TOKEN_BASE};
use crate::ledger::{Ledger, Tokens};
use crate::plans;
use crate::restored::{Restored, StoredRow};
use signal::Gci;
use std::collections::BTreeMap;

/// One slot's scratch keys over the crashed run.
struct ScratchHistory {
    /// Each key at the start of the run, with the GCI of its row.
    start: Vec<(ScratchState, Gci)>,
    /// Committed writes in order: (key index, GCI, state after).
    log: Vec<(u32, Gci, ScratchState)>,
    /// The slot's transaction in doubt, if it writes: (key index, state
    /// after it if it committed).
    in_doubt: Option<(u32, ScratchState)>,
}

/// What the clients knew when the cluster crashed.
pub struct CrashedBank {
    options: BankOptions,
    /// The table's id, if the clients heard it created or described it.
    table_id: Option<u32>,
    /// The clients created or described it in the run that crashed.
    described: bool,
    ledger: Ledger,
    tokens: Tokens,
    /// Token deletes in doubt, per key.
    token_deletes_in_doubt: BTreeMap<u32, u32>,
    scratch: Vec<ScratchHistory>,
    /// Transactions in doubt at the crash.
    in_doubt: u64,
    /// Transactions the clients heard commit, by GCI (for the report).
    committed_gcis: Vec<Gci>,
    /// The highest GCI of a commit the client reported durable.
    durable_gci: Gci,
}

impl Bank {
    /// What the clients knew at the crash, once every API node saw its
    /// transactions fail ([`Bank::lose_connections`]).
    pub fn crashed(self) -> CrashedBank {
        assert!(
            self.api_nodes.all_ended(),
            "the API nodes end before the crashed bank is taken"
        );
        let mut state = lock(&self.shared);
        let slots = std::mem::take(&mut state.slots);
        CrashedBank {
            options: state.options.clone(),
            table_id: state.table_id,
            described: state.described,
            ledger: std::mem::take(&mut state.ledger),
            tokens: std::mem::take(&mut state.tokens),
            token_deletes_in_doubt: std::mem::take(&mut state.token_deletes_in_doubt),
            scratch: slots
                .into_iter()
                .map(|slot| ScratchHistory {
                    start: slot.scratch_start,
                    log: slot.scratch_log,
                    in_doubt: slot.scratch_in_doubt,
                })
                .collect(),
            in_doubt: state.in_doubt,
            committed_gcis: std::mem::take(&mut state.committed_gcis),
            durable_gci: state.durable_gci,
        }
    }

    /// A bank that continues after a restart from the table `restored`
    /// holds, which `crashed.check` accepted: its API nodes connect again,
    /// describe the table instead of creating it (or create it, if they
    /// never heard it created: then the restart may have kept it, and they
    /// describe it when told it exists), insert only the accounts the
    /// restart did not restore, then run `options` (the same accounts,
    /// slots and API nodes as before).
    pub fn resume(crashed: &CrashedBank, restored: &Restored, options: BankOptions) -> Bank {
        let same = |a: &BankOptions, b: &BankOptions| {
            (a.accounts, a.slots, a.api_nodes) == (b.accounts, b.slots, b.api_nodes)
        };
        assert!(
            same(&crashed.options, &options),
            "a resumed bank has the accounts, slots and API nodes of the crashed one"
        );
        let bank = Bank::new(options);
        {
            let mut state = lock(&bank.shared);
            state.resumed = true;
            state.table_id = crashed.table_id;
            state.ledger = Ledger::seeded(&restored.accounts)
                .unwrap_or_else(|error| panic!("resuming the bank: {error}"));
            state.tokens = Tokens::seeded(&restored.tokens);
            let accounts = state.options.accounts;
            state.load_queue = load_chunks(
                (0..accounts).filter(|account| !restored.accounts.contains_key(account)),
            );
            for (index, slot) in state.slots.iter_mut().enumerate() {
                for key_index in 0..SCRATCH_KEYS_PER_SLOT {
                    let key = plans::scratch_key(index, key_index);
                    let (scratch, gci) = match restored.scratch.get(&key) {
                        Some(stored) => (Some(stored.row.note.clone()), stored.gci),
                        // Deleted (or never inserted) by the restored GCI.
                        None => (None, restored.gci),
                    };
                    slot.scratch[key_index as usize] = scratch.clone();
                    slot.scratch_gci[key_index as usize] = gci;
                    slot.scratch_start[key_index as usize] = (scratch, gci);
                }
            }
        }
        bank
    }
}

impl CrashedBank {
    /// Whether the clients created or described their table in the run
    /// that crashed.
    pub fn described(&self) -> bool {
        self.described
    }

    /// The highest GCI of a commit the client reported durable.
    pub fn durable_gci(&self) -> Gci {
        self.durable_gci
    }

    /// Transactions in doubt at the crash.
    pub fn in_doubt(&self) -> u64 {
        self.in_doubt
    }

    /// Transactions the clients heard commit with a GCI above `gci`: lost
    /// by a restart that restored `gci` (allowed: they were not durable).
    pub fn committed_after(&self, gci: Gci) -> u64 {
        self.committed_gcis.iter().filter(|&&g| g > gci).count() as u64
    }

    /// Transactions the clients heard commit.
    pub fn committed(&self) -> u64 {
        self.committed_gcis.len() as u64
    }

    /// Checks the restored table against what the clients knew (see the
    /// module doc and `ledger::restart`). Returns how many transactions in
    /// doubt at the crash the restored table holds.
    pub fn check(&self, restored: &Restored) -> Result<u64, String> {
        let gci = restored.gci;
        let accounts = self.options.accounts;
        let mut in_doubt = self
            .ledger
            .check_restored(accounts, &restored.accounts, gci)?;
        let total: i64 = restored
            .accounts
            .values()
            .map(|stored| stored.row.balance)
            .sum();
        let expected = INITIAL_BALANCE * restored.accounts.len() as i64;
        if total != expected {
            return Err(format!(
                "the {} restored accounts' balances add up to {total}, not {expected}",
                restored.accounts.len()
            ));
        }
        in_doubt += self.tokens.check_restored(
            TOKEN_BASE..TOKEN_BASE + TOKENS,
            &restored.tokens,
            &self.token_deletes_in_doubt,
            gci,
        )?;
        let mut scratch_keys = 0;
        for (slot, history) in self.scratch.iter().enumerate() {
            for key_index in 0..SCRATCH_KEYS_PER_SLOT {
                let key = plans::scratch_key(slot, key_index);
                let row = restored.scratch.get(&key);
                in_doubt += u64::from(check_scratch_key(key, key_index, history, row, gci)?);
                scratch_keys += 1;
            }
        }
        if let Some(&key) = restored
            .scratch
            .keys()
            .find(|&&key| key >= plans::scratch_key(0, 0) + scratch_keys)
        {
            return Err(format!(
                "scratch key {key}, which no slot owns, is restored"
            ));
        }
        Ok(in_doubt)
    }
}

/// One scratch key: the restored row is the state after the last committed
/// write up to the restored GCI `gci`, or after the transaction in doubt
/// (then true: the restored table holds that transaction).
fn check_scratch_key(
    key: u32,
    key_index: u32,
    history: &ScratchHistory,
    row: Option<&StoredRow>,
    gci: Gci,
) -> Result<bool, String> {
    let (mut state, mut state_gci) = history.start[key_index as usize].clone();
    let mut written_after = false;
    for (_, write_gci, after) in history.log.iter().filter(|(index, ..)| *index == key_index) {
        if *write_gci <= gci {
            state = after.clone();
            state_gci = *write_gci;
        } else {
            written_after = true;
        }
    }
    let in_doubt = match &history.in_doubt {
        Some((index, after)) if *index == key_index && !written_after => Some(after),
        _ => None,
    };
    let restored: ScratchState = row.map(|stored| stored.row.note.clone());
    if let Some(stored) = row {
        if stored.gci > gci {
            return Err(format!(
                "scratch key {key} is restored with GCI {}, after the restored GCI {gci}",
                stored.gci
            ));
        }
        if stored.row.balance != 0 || stored.row.writer != 0 {
            return Err(format!(
                "scratch key {key} is restored as {:?}: scratch rows have balance 0 and writer 0",
                stored.row
            ));
        }
    }
    let as_committed = restored == state
        && row.is_none_or(|stored| state_gci == Gci(0) || stored.gci == state_gci);
    let as_in_doubt = in_doubt.is_some_and(|after| {
        restored == *after && row.is_none_or(|stored| stored.gci >= state_gci)
    });
    if as_committed || as_in_doubt {
        return Ok(!as_committed);
    }
    let describe = |state: &ScratchState| match state {
        None => "no row".to_string(),
        Some(note) => format!(
            "a row with a note of {:?} bytes",
            note.as_ref().map(Vec::len)
        ),
    };
    Err(format!(
        "scratch key {key}: restored {}{}, but the last write committed by the restored GCI \
         {gci} left {} (GCI {state_gci}){}",
        describe(&restored),
        row.map_or(String::new(), |stored| format!(" in GCI {}", stored.gci)),
        describe(&state),
        match in_doubt {
            Some(after) => format!(
                ", and the transaction in doubt would leave {}",
                describe(after)
            ),
            None => String::new(),
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::Row;

    fn row(note: &[u8], gci: u64) -> StoredRow {
        StoredRow {
            row: Row {
                id: 7,
                balance: 0,
                writer: 0,
                note: Some(note.to_vec()),
            },
            gci: Gci(gci),
        }
    }

    fn check(history: &ScratchHistory, row: Option<StoredRow>, gci: u64) -> Result<bool, String> {
        check_scratch_key(7, 0, history, row.as_ref(), Gci(gci))
    }

    /// Key 0: inserted with note "a" in GCI 4, deleted in GCI 6; key 1
    /// written in GCI 5 (another key: no effect on key 0).
    fn history(in_doubt: Option<(u32, ScratchState)>) -> ScratchHistory {
        ScratchHistory {
            start: vec![(None, Gci(0)), (None, Gci(0))],
            log: vec![
                (0, Gci(4), Some(Some(b"a".to_vec()))),
                (1, Gci(5), Some(None)),
                (0, Gci(6), None),
            ],
            in_doubt,
        }
    }

    #[test]
    fn a_scratch_key_holds_its_last_write_up_to_the_restored_gci() {
        let plain = history(None);
        assert_eq!(check(&plain, None, 3), Ok(false));
        assert_eq!(check(&plain, Some(row(b"a", 4)), 5), Ok(false));
        assert_eq!(check(&plain, None, 6), Ok(false));
        // Lost insert, resurrected delete, another note, another GCI.
        assert!(check(&plain, None, 5).is_err());
        assert!(check(&plain, Some(row(b"a", 4)), 6).is_err());
        assert!(check(&plain, Some(row(b"b", 4)), 5).is_err());
        assert!(check(&plain, Some(row(b"a", 5)), 5).is_err());
        assert!(check(&plain, Some(row(b"a", 4)), 3).is_err());
    }

    #[test]
    fn a_scratch_transaction_in_doubt_may_be_restored_after_the_last_write() {
        let doubt = history(Some((0, Some(Some(b"c".to_vec())))));
        assert_eq!(check(&doubt, Some(row(b"c", 7)), 7), Ok(true));
        assert_eq!(check(&doubt, None, 7), Ok(false));
        // Not before the delete it followed.
        assert!(check(&doubt, Some(row(b"c", 5)), 7).is_err());
        // Not if a write after the restored GCI came before it.
        assert!(check(&doubt, Some(row(b"c", 5)), 5).is_err());
        // Not with a GCI after the restored one.
        assert!(check(&doubt, Some(row(b"c", 8)), 7).is_err());
    }
}
