//! The ledger and the tokens' checker across a whole-cluster crash: what
//! the restored rows must be (docs/design/durability.md §5: the committed
//! prefix up to the restored GCI), and the history a bank continues from
//! after the restart.
//!
//! At the crash, a transaction the clients heard commit has its GCI; one
//! still waiting for its answer is in doubt (it may have committed, in any
//! GCI); the others aborted. For each account, the restored row names its
//! writer, and the writer's reads lead back, write by write, to the insert:
//! the row *holds or builds on* each write of that path. Then:
//! - the row's writer wrote exactly these values and did not abort, the
//!   row carries the writer's GCI (when known), and no write on the path
//!   aborted or committed after the restored GCI (no lost-then-resurrected,
//!   dirty or too-new writes);
//! - every write the clients saw commit with a GCI up to the restored one
//!   is on the path (nothing durable lost), and no write on the path was
//!   overwritten by another committed transaction (no lost update);
//! - a transaction on the path of one account it wrote is on the path of
//!   every account it wrote (no transaction partly present);
//! - an absent account had no write committed up to the restored GCI.
//!
//! Tokens: a restored row's insert did not abort, committed no later than
//! the restored GCI, and was not deleted by a delete committed by then
//! (deleted rows stay deleted); each insert committed by then and not
//! deleted by then is the row, or was deleted by a delete still in doubt.

use super::{Ledger, Outcome, Record, Tokens, Written};
use crate::restored::StoredRow;
use signal::Gci;
use std::collections::{BTreeMap, BTreeSet};

impl Ledger {
    /// A ledger whose history is the restored accounts: each row's writer
    /// is a committed insert, in the row's GCI, of the rows naming it.
    pub fn seeded(accounts: &BTreeMap<u32, StoredRow>) -> Result<Ledger, String> {
        let mut ledger = Ledger::default();
        for (&account, stored) in accounts {
            let writer = stored.row.writer;
            let record = ledger.records.entry(writer).or_insert_with(|| Record {
                outcome: Outcome::Committed(stored.gci),
                writes: Vec::new(),
                reads: Vec::new(),
            });
            if record.outcome != Outcome::Committed(stored.gci) {
                return Err(format!(
                    "account {account} carries GCI {} for the write of {writer:#x}, another \
                     account {:?}: one transaction commits in one GCI",
                    stored.gci, record.outcome
                ));
            }
            record.writes.push(Written {
                account,
                balance: stored.row.balance,
                note: stored.row.note.clone(),
            });
            ledger.first_writer.insert(account, writer);
            ledger.committed_writes.insert(account, 1);
        }
        Ok(ledger)
    }

    /// Checks the restored accounts `0..accounts` against the ledger (see
    /// the module doc). `restored` is the GCI the cluster restored.
    /// Returns how many transactions in doubt the restored rows hold.
    pub fn check_restored(
        &self,
        accounts: u32,
        rows: &BTreeMap<u32, StoredRow>,
        restored: Gci,
    ) -> Result<u64, String> {
        // Every transaction that wrote each account, in id order.
        let mut writers: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        let mut ids: Vec<u64> = self.records.keys().copied().collect();
        ids.sort_unstable();
        for &id in &ids {
            for written in &self.records[&id].writes {
                writers.entry(written.account).or_default().push(id);
            }
        }
        if let Some((&account, _)) = rows.range(accounts..).next() {
            return Err(format!(
                "account {account} is restored, but there are {accounts}"
            ));
        }
        // transaction -> the accounts whose restored row holds or builds on its write.
        let mut present: BTreeMap<u64, BTreeSet<u32>> = BTreeMap::new();
        for account in 0..accounts {
            let path = match rows.get(&account) {
                Some(stored) => self.restored_path(account, stored, restored)?,
                None => Vec::new(),
            };
            for &id in writers.get(&account).map_or(&[][..], Vec::as_slice) {
                if let Outcome::Committed(gci) = self.records[&id].outcome {
                    if gci <= restored && !path.contains(&id) {
                        return Err(format!(
                            "account {account}: the write of {id:#x}, committed in GCI {gci} \
                             (restored GCI {restored}), is lost: the restored row {}",
                            match rows.get(&account) {
                                Some(stored) => format!(
                                    "holds the write of {:#x} (GCI {}), which does not build on it",
                                    stored.row.writer, stored.gci
                                ),
                                None => "is missing".into(),
                            }
                        ));
                    }
                }
            }
            for id in path {
                present.entry(id).or_default().insert(account);
            }
        }
        let mut in_doubt = 0;
        for (id, accounts_present) in present {
            in_doubt += u64::from(self.records[&id].outcome == Outcome::Pending);
            let written: BTreeSet<u32> = self.records[&id]
                .writes
                .iter()
                .map(|written| written.account)
                .collect();
            if accounts_present != written {
                return Err(format!(
                    "transaction {id:#x} ({:?}) is partly restored: it wrote accounts \
                     {written:?}, the restored rows hold or build on its write in {accounts_present:?} only",
                    self.records[&id].outcome
                ));
            }
        }
        Ok(in_doubt)
    }

    /// The writes the restored row of `account` holds or builds on, the
    /// row's writer first, back to the insert; an error if the row cannot
    /// be the state after a committed prefix.
    fn restored_path(
        &self,
        account: u32,
        stored: &StoredRow,
        restored: Gci,
    ) -> Result<Vec<u64>, String> {
        let row = &stored.row;
        self.check_read(account, row.writer, row.balance, &row.note)
            .map_err(|error| format!("restored {error}"))?;
        if stored.gci > restored {
            return Err(format!(
                "account {account}: the restored row (writer {:#x}) carries GCI {}, after the \
                 restored GCI {restored}",
                row.writer, stored.gci
            ));
        }
        if let Outcome::Committed(gci) = self.records[&row.writer].outcome {
            if gci != stored.gci {
                return Err(format!(
                    "account {account} holds the write of {:#x}, committed in GCI {gci}, but \
                     carries GCI {}",
                    row.writer, stored.gci
                ));
            }
        }
        let mut path = Vec::new();
        let mut current = row.writer;
        loop {
            let record = self.records.get(&current).ok_or_else(|| {
                format!("account {account}: the restored row builds on {current:#x}, unknown")
            })?;
            match record.outcome {
                Outcome::Aborted => {
                    return Err(format!(
                        "account {account}: the restored row (writer {:#x}) builds on the write \
                         of {current:#x}, which aborted",
                        row.writer
                    ))
                }
                Outcome::Committed(gci) if gci > restored => {
                    return Err(format!(
                        "account {account}: the restored row (writer {:#x}) holds or builds on \
                         the write of {current:#x}, committed in GCI {gci}, after the restored \
                         GCI {restored}",
                        row.writer
                    ))
                }
                Outcome::Committed(gci) if gci > stored.gci => {
                    return Err(format!(
                        "account {account}: the restored row carries GCI {}, but builds on the \
                         write of {current:#x}, committed later in GCI {gci}",
                        stored.gci
                    ))
                }
                _ => {}
            }
            if !record
                .writes
                .iter()
                .any(|written| written.account == account)
            {
                return Err(format!(
                    "account {account}: the restored row builds on {current:#x}, which did not \
                     write it"
                ));
            }
            path.push(current);
            if path.len() > self.records.len() {
                return Err(format!(
                    "account {account}: the writers read each other in a loop"
                ));
            }
            let Some(&(_, previous)) = record.reads.iter().find(|(read, _)| *read == account)
            else {
                break;
            };
            if let Some(&other) = self.successor.get(&(account, previous)) {
                if other != current {
                    return Err(format!(
                        "account {account}: the restored row builds on {current:#x}'s overwrite \
                         of {previous:#x}, but {other:#x} committed an overwrite of it too \
                         (lost update)"
                    ));
                }
            }
            current = previous;
        }
        Ok(path)
    }
}

impl Tokens {
    /// A checker whose history is the restored tokens: each row's insert
    /// committed in the row's GCI.
    pub fn seeded(tokens: &BTreeMap<u32, StoredRow>) -> Tokens {
        let mut seeded = Tokens::default();
        for (&key, stored) in tokens {
            seeded
                .inserts
                .insert(stored.row.writer, (key, Outcome::Committed(stored.gci)));
            seeded.committed_inserts.insert(key, 1);
        }
        seeded
    }

    /// Checks the restored tokens of `keys` (see the module doc).
    /// `deletes_in_doubt` counts, per key, the deletes still unanswered at
    /// the crash. Returns how many restored rows hold an insert in doubt.
    pub fn check_restored(
        &self,
        keys: std::ops::Range<u32>,
        rows: &BTreeMap<u32, StoredRow>,
        deletes_in_doubt: &BTreeMap<u32, u32>,
        restored: Gci,
    ) -> Result<u64, String> {
        let mut in_doubt = 0;
        let deleted_by_then =
            |insert: u64| matches!(self.deleter.get(&insert), Some(&(_, gci)) if gci <= restored);
        for key in keys {
            // Inserts committed by the restored GCI and not deleted by then.
            let mut standing: Vec<u64> = self
                .inserts
                .iter()
                .filter(|&(&insert, &(inserted, outcome))| {
                    inserted == key
                        && matches!(outcome, Outcome::Committed(gci) if gci <= restored)
                        && !deleted_by_then(insert)
                })
                .map(|(&insert, _)| insert)
                .collect();
            standing.sort_unstable();
            if let Some(stored) = rows.get(&key) {
                let writer = stored.row.writer;
                self.check_read(key, writer)
                    .map_err(|error| format!("restored {error}"))?;
                if stored.gci > restored {
                    return Err(format!(
                        "token {key}: the restored row of insert {writer:#x} carries GCI {}, \
                         after the restored GCI {restored}",
                        stored.gci
                    ));
                }
                match self.inserts[&writer].1 {
                    Outcome::Pending => in_doubt += 1,
                    Outcome::Committed(gci) if gci != stored.gci => {
                        return Err(format!(
                            "token {key}: the restored row of insert {writer:#x}, committed in \
                             GCI {gci}, carries GCI {}",
                            stored.gci
                        ))
                    }
                    _ => {}
                }
                if let Some(&(delete, gci)) = self.deleter.get(&writer) {
                    if gci <= restored {
                        return Err(format!(
                            "token {key}: the row of insert {writer:#x} is restored, but \
                             {delete:#x} deleted it in GCI {gci} (restored GCI {restored})"
                        ));
                    }
                }
                standing.retain(|&insert| insert != writer);
            }
            let in_doubt = deletes_in_doubt.get(&key).copied().unwrap_or(0);
            if standing.len() > in_doubt as usize {
                return Err(format!(
                    "token {key}: inserts {standing:x?} committed by the restored GCI {restored} \
                     and were not deleted by then, but the restored row is {} ({in_doubt} \
                     deletes in doubt)",
                    match rows.get(&key) {
                        Some(stored) => format!("the insert of {:#x}", stored.row.writer),
                        None => "gone".into(),
                    }
                ));
            }
        }
        Ok(in_doubt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::Row;

    fn write(account: u32, balance: i64) -> Vec<Written> {
        vec![Written {
            account,
            balance,
            note: None,
        }]
    }

    fn stored(account: u32, writer: u64, balance: i64, gci: u64) -> StoredRow {
        StoredRow {
            row: Row {
                id: account,
                balance,
                writer,
                note: None,
            },
            gci: Gci(gci),
        }
    }

    fn rows(list: &[StoredRow]) -> BTreeMap<u32, StoredRow> {
        list.iter().map(|row| (row.row.id, row.clone())).collect()
    }

    /// Account 0: 1 inserts (GCI 4), 2 overwrites (5), 3 overwrites (7);
    /// 4 read 2's write and is in doubt.
    fn chain() -> Ledger {
        let mut ledger = Ledger::default();
        ledger.will_write(1, vec![], write(0, 10)).unwrap();
        ledger.committed(1, Gci(4), &[]).unwrap();
        ledger.will_write(2, vec![(0, 1)], write(0, 11)).unwrap();
        ledger.committed(2, Gci(5), &[(0, 1)]).unwrap();
        ledger.will_write(3, vec![(0, 2)], write(0, 12)).unwrap();
        ledger.committed(3, Gci(7), &[(0, 2)]).unwrap();
        ledger.will_write(4, vec![(0, 2)], write(0, 13)).unwrap();
        ledger
    }

    #[test]
    fn the_restored_account_is_the_last_write_up_to_the_restored_gci() {
        let ledger = chain();
        let check = |row: Option<StoredRow>, restored: u64| {
            let rows = rows(row.as_slice());
            ledger.check_restored(1, &rows, Gci(restored))
        };
        assert_eq!(check(Some(stored(0, 2, 11, 5)), 5), Ok(0));
        assert_eq!(check(Some(stored(0, 2, 11, 5)), 6), Ok(0));
        assert_eq!(check(Some(stored(0, 3, 12, 7)), 7), Ok(0));
        assert_eq!(check(None, 3), Ok(0));
        // A durable write lost: 2 committed in GCI 5.
        assert!(check(Some(stored(0, 1, 10, 4)), 5).is_err());
        assert!(check(None, 4).is_err());
        // A write after the restored GCI came back.
        assert!(check(Some(stored(0, 3, 12, 7)), 6).is_err());
        // The row carries another GCI than its writer committed in.
        assert!(check(Some(stored(0, 2, 11, 6)), 6).is_err());
        // Values no writer wrote.
        assert!(check(Some(stored(0, 2, 12, 5)), 5).is_err());
    }

    #[test]
    fn a_transaction_in_doubt_may_be_restored_unless_it_lost_an_update() {
        let ledger = chain();
        let check =
            |row: StoredRow, restored: u64| ledger.check_restored(1, &rows(&[row]), Gci(restored));
        // 4 overwrote 2 in doubt; 3 committed an overwrite of 2 as well,
        // so 4 cannot have committed.
        assert!(check(stored(0, 4, 13, 6), 6).is_err());
        // Without 3, 4 may have committed (in GCI 5 or 6).
        let mut ledger = Ledger::default();
        ledger.will_write(1, vec![], write(0, 10)).unwrap();
        ledger.committed(1, Gci(4), &[]).unwrap();
        ledger.will_write(4, vec![(0, 1)], write(0, 13)).unwrap();
        let restored = |ledger: &Ledger, row: StoredRow, gci: u64| {
            ledger.check_restored(1, &rows(&[row]), Gci(gci))
        };
        assert_eq!(restored(&ledger, stored(0, 4, 13, 5), 6), Ok(1));
        assert_eq!(restored(&ledger, stored(0, 1, 10, 4), 6), Ok(0));
        // Not with a GCI before the write it read.
        assert!(restored(&ledger, stored(0, 4, 13, 3), 6).is_err());
        // An aborted transaction is never restored.
        ledger.aborted(4).unwrap();
        assert!(restored(&ledger, stored(0, 4, 13, 5), 6).is_err());
    }

    #[test]
    fn a_transaction_is_restored_whole_or_not_at_all() {
        let mut ledger = Ledger::default();
        ledger.will_write(1, vec![], write(0, 10)).unwrap();
        ledger.will_write(2, vec![], write(1, 10)).unwrap();
        ledger.committed(1, Gci(4), &[]).unwrap();
        ledger.committed(2, Gci(4), &[]).unwrap();
        let mut both = write(0, 7);
        both.extend(write(1, 13));
        ledger.will_write(3, vec![(0, 1), (1, 2)], both).unwrap();
        let before = [stored(0, 1, 10, 4), stored(1, 2, 10, 4)];
        let after = [stored(0, 3, 7, 5), stored(1, 3, 13, 5)];
        assert_eq!(ledger.check_restored(2, &rows(&before), Gci(5)), Ok(0));
        assert_eq!(ledger.check_restored(2, &rows(&after), Gci(5)), Ok(1));
        let half = [stored(0, 3, 7, 5), stored(1, 2, 10, 4)];
        let error = ledger.check_restored(2, &rows(&half), Gci(5)).unwrap_err();
        assert!(error.contains("partly restored"), "{error}");
    }

    #[test]
    fn a_seeded_ledger_continues_from_the_restored_rows() {
        let restored = rows(&[stored(0, 3, 7, 5), stored(1, 3, 13, 5), stored(2, 1, 10, 4)]);
        let mut ledger = Ledger::seeded(&restored).unwrap();
        ledger.check_read(1, 3, 13, &None).unwrap();
        ledger.will_write(9, vec![(1, 3)], write(1, 14)).unwrap();
        ledger.committed(9, Gci(8), &[(1, 3)]).unwrap();
        let end = BTreeMap::from([(0, 3), (1, 9), (2, 1)]);
        ledger.check_end(&end).unwrap();
        // One transaction, two GCIs: not a committed state.
        let torn = rows(&[stored(0, 3, 7, 5), stored(1, 3, 13, 6)]);
        assert!(Ledger::seeded(&torn).is_err());
    }

    #[test]
    fn restored_tokens_keep_deleted_rows_deleted_and_inserted_rows_there() {
        let mut tokens = Tokens::default();
        tokens.will_insert(1, 9);
        tokens.insert_committed(1, Gci(4)).unwrap();
        tokens.delete_committed(2, 9, 1, Gci(6)).unwrap();
        let none = BTreeMap::new();
        let check = |row: Option<StoredRow>, in_doubt: &BTreeMap<u32, u32>, restored: u64| {
            tokens.check_restored(9..10, &rows(row.as_slice()), in_doubt, Gci(restored))
        };
        let row = || Some(stored(9, 1, 0, 4));
        assert_eq!(check(row(), &none, 5), Ok(0));
        assert_eq!(check(None, &none, 6), Ok(0));
        // Deleted by the restored GCI, yet back.
        assert!(check(row(), &none, 6).is_err());
        // Inserted by the restored GCI and not deleted by then, yet gone,
        // unless a delete in doubt removed it.
        assert!(check(None, &none, 5).is_err());
        assert_eq!(check(None, &BTreeMap::from([(9, 1)]), 5), Ok(0));
        // Inserted after the restored GCI, yet there.
        assert!(check(row(), &none, 3).is_err());
    }
}
