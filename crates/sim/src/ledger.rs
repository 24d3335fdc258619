//! The checker of the bank workload: what every transaction wrote, whose
//! write every read saw, and what that implies.
//!
//! Every row carries the id of the transaction that last wrote it. So a
//! read names its writer, and the ledger can check, without knowing the
//! order in which replies reach the clients:
//! - the writer exists and wrote exactly the values read (no torn or
//!   invented rows), and was not aborted (no dirty reads);
//! - per account, committed writers form one chain from the initial insert:
//!   no two committed transactions both overwrote the same write (no lost
//!   updates), and the chain ends at the row read at the end;
//! - along a chain GCIs never go down: a transaction that read another's
//!   write commits in the same or a later GCI
//!   (docs/design/durability.md §1). A reader may hear of its commit before
//!   the writer does, so a check whose writer is still unconfirmed waits in
//!   `waiting_on` until it is.
//!
//! After a whole-cluster crash, `restart` checks the restored rows against
//! the ledger (the committed prefix up to the restored GCI) and seeds the
//! ledger the clients continue with.

use signal::Gci;
use std::collections::{BTreeMap, HashMap};

mod restart;

/// What became of a transaction that wrote.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Outcome {
    /// Sent; no answer yet.
    Pending,
    /// Committed in this GCI.
    Committed(Gci),
    /// Aborted or rolled back.
    Aborted,
}

/// One account's value as a transaction wrote it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Written {
    /// Account.
    pub account: u32,
    /// Balance written.
    pub balance: i64,
    /// Note written.
    pub note: Option<Vec<u8>>,
}

struct Record {
    outcome: Outcome,
    writes: Vec<Written>,
    /// (account, writer) of each account read before writing (none: an
    /// insert). After a crash, a row's writer leads back through these to
    /// the insert: the writes the row's value builds on.
    reads: Vec<(u32, u64)>,
}

/// The ledger of one run.
#[derive(Default)]
pub struct Ledger {
    records: HashMap<u64, Record>,
    /// (account, writer) -> the committed transaction that overwrote that write.
    successor: HashMap<(u32, u64), u64>,
    /// writer -> committed readers (with the account) whose GCI check waits
    /// for the writer's commit to be confirmed.
    waiting_on: HashMap<u64, Vec<(u64, u32)>>,
    /// Committed writes per account (the initial insert included).
    committed_writes: BTreeMap<u32, u64>,
    /// The initial insert of each account.
    first_writer: BTreeMap<u32, u64>,
}

impl Ledger {
    /// Records that `transaction`, having read `reads` (account, writer),
    /// is about to write `writes` (an insert reads nothing).
    pub fn will_write(
        &mut self,
        transaction: u64,
        reads: Vec<(u32, u64)>,
        writes: Vec<Written>,
    ) -> Result<(), String> {
        let previous = self.records.insert(
            transaction,
            Record {
                outcome: Outcome::Pending,
                writes,
                reads,
            },
        );
        match previous {
            None => Ok(()),
            Some(_) => Err(format!("transaction id {transaction:#x} used twice")),
        }
    }

    /// Whether `transaction` wrote through the ledger.
    pub fn knows(&self, transaction: u64) -> bool {
        self.records.contains_key(&transaction)
    }

    /// Checks a read of `account` that saw `writer`'s `balance` and `note`.
    pub fn check_read(
        &self,
        account: u32,
        writer: u64,
        balance: i64,
        note: &Option<Vec<u8>>,
    ) -> Result<(), String> {
        let Some(record) = self.records.get(&writer) else {
            return Err(format!(
                "account {account} names writer {writer:#x}, which no client ever sent"
            ));
        };
        if record.outcome == Outcome::Aborted {
            return Err(format!(
                "dirty read: account {account} shows the write of transaction {writer:#x}, which was aborted"
            ));
        }
        let Some(written) = record.writes.iter().find(|w| w.account == account) else {
            return Err(format!(
                "account {account} names writer {writer:#x}, which did not write it"
            ));
        };
        if written.balance != balance || &written.note != note {
            return Err(format!(
                "account {account} read balance {balance} note {:?} from writer {writer:#x}, \
                 which wrote balance {} note {:?}",
                note.as_ref().map(|n| n.len()),
                written.balance,
                written.note.as_ref().map(|n| n.len())
            ));
        }
        Ok(())
    }

    /// `transaction` committed in `gci` after reading `reads` (account, writer)
    /// and overwriting them (an initial insert reads nothing).
    pub fn committed(
        &mut self,
        transaction: u64,
        gci: Gci,
        reads: &[(u32, u64)],
    ) -> Result<(), String> {
        let record = self
            .records
            .get_mut(&transaction)
            .ok_or_else(|| format!("commit of {transaction:#x}, which wrote nothing"))?;
        if record.outcome != Outcome::Pending {
            return Err(format!(
                "transaction {transaction:#x} ended twice ({:?}, then committed)",
                record.outcome
            ));
        }
        if gci == Gci(0) {
            return Err(format!(
                "transaction {transaction:#x} wrote and committed with GCI 0"
            ));
        }
        record.outcome = Outcome::Committed(gci);
        for written in &record.writes {
            *self.committed_writes.entry(written.account).or_default() += 1;
            if reads.is_empty() {
                self.first_writer.insert(written.account, transaction);
            }
        }
        for &(account, writer) in reads {
            if let Some(other) = self.successor.insert((account, writer), transaction) {
                return Err(format!(
                    "lost update: transactions {other:#x} and {transaction:#x} both overwrote \
                     the write of {writer:#x} to account {account}"
                ));
            }
            match self.records.get(&writer).map(|record| record.outcome) {
                Some(Outcome::Committed(writer_gci)) => {
                    check_order(writer, writer_gci, transaction, gci, account)?
                }
                Some(Outcome::Pending) => self
                    .waiting_on
                    .entry(writer)
                    .or_default()
                    .push((transaction, account)),
                Some(Outcome::Aborted) => {
                    return Err(format!(
                        "dirty read: {transaction:#x} committed over the write of aborted \
                         {writer:#x} to account {account}"
                    ))
                }
                None => return Err(format!("unknown writer {writer:#x}")),
            }
        }
        for (reader, account) in self.waiting_on.remove(&transaction).unwrap_or_default() {
            let Some(Outcome::Committed(reader_gci)) =
                self.records.get(&reader).map(|record| record.outcome)
            else {
                return Err(format!("reader {reader:#x} waits but is not committed"));
            };
            check_order(transaction, gci, reader, reader_gci, account)?;
        }
        Ok(())
    }

    /// `transaction` (which may have written) aborted or rolled back.
    pub fn aborted(&mut self, transaction: u64) -> Result<(), String> {
        if let Some(record) = self.records.get_mut(&transaction) {
            if record.outcome != Outcome::Pending {
                return Err(format!(
                    "transaction {transaction:#x} ended twice ({:?}, then aborted)",
                    record.outcome
                ));
            }
            record.outcome = Outcome::Aborted;
        }
        if let Some(readers) = self.waiting_on.remove(&transaction) {
            return Err(format!(
                "dirty read: {readers:x?} committed over writes of {transaction:#x}, which then aborted"
            ));
        }
        Ok(())
    }

    /// End of run: `final_writers` (account -> writer read last). Every
    /// account's committed writes form one chain ending there, and no GCI
    /// check is left waiting.
    pub fn check_end(&self, final_writers: &BTreeMap<u32, u64>) -> Result<(), String> {
        if let Some((writer, readers)) = self.waiting_on.iter().next() {
            return Err(format!(
                "{readers:x?} committed over writes of {writer:#x}, whose commit was never confirmed"
            ));
        }
        for (&account, &last) in final_writers {
            let Some(&first) = self.first_writer.get(&account) else {
                return Err(format!("account {account} was never inserted"));
            };
            let mut current = first;
            let mut length = 1u64;
            while let Some(&next) = self.successor.get(&(account, current)) {
                current = next;
                length += 1;
            }
            if current != last {
                return Err(format!(
                    "account {account}: the chain of committed writers ends at {current:#x}, \
                     but the row holds the write of {last:#x}"
                ));
            }
            let committed = self.committed_writes.get(&account).copied().unwrap_or(0);
            if committed != length {
                return Err(format!(
                    "account {account}: {committed} committed writes but a chain of {length}"
                ));
            }
        }
        Ok(())
    }
}

/// The checker of contended keys ("tokens") that every slot inserts and
/// deletes. A delete reads the row under its lock first, so it names the
/// insert it removes; then, whatever order replies arrive in:
/// - each insert is deleted at most once (no two deletes of one row);
/// - a deleted insert did not abort (no dirty reads);
/// - a delete commits in no earlier GCI than the insert it removed (it read
///   and overwrote that write); a delete heard of before its insert's
///   commit waits for it, as in the ledger;
/// - at the end, per key, committed inserts minus committed deletes is 1
///   if the row exists (and its writer is the one undeleted insert), else 0.
#[derive(Default)]
pub struct Tokens {
    /// insert transaction -> (key, outcome).
    inserts: HashMap<u64, (u32, Outcome)>,
    /// insert transaction -> the committed delete that removed its row,
    /// and the delete's GCI.
    deleter: HashMap<u64, (u64, Gci)>,
    committed_inserts: BTreeMap<u32, u64>,
    committed_deletes: BTreeMap<u32, u64>,
    /// insert transaction -> (the committed delete, its GCI) whose GCI
    /// check waits for the insert's commit to be confirmed.
    waiting_on: HashMap<u64, (u64, Gci)>,
}

impl Tokens {
    /// `transaction` is about to insert `key`.
    pub fn will_insert(&mut self, transaction: u64, key: u32) {
        self.inserts.insert(transaction, (key, Outcome::Pending));
    }

    /// Checks a locked read of token `key` that saw `writer`'s row.
    pub fn check_read(&self, key: u32, writer: u64) -> Result<(), String> {
        match self.inserts.get(&writer) {
            Some(&(inserted, outcome)) if inserted == key && outcome != Outcome::Aborted => Ok(()),
            Some(&(inserted, outcome)) => Err(format!(
                "token {key} shows the insert {writer:#x} of token {inserted}, which is {outcome:?}"
            )),
            None => Err(format!(
                "token {key} names writer {writer:#x}, which never inserted"
            )),
        }
    }

    /// An insert of `key` committed in `gci`.
    pub fn insert_committed(&mut self, transaction: u64, gci: Gci) -> Result<(), String> {
        let Some(entry) = self.inserts.get_mut(&transaction) else {
            return Err(format!("commit of unknown token insert {transaction:#x}"));
        };
        if gci == Gci(0) || entry.1 != Outcome::Pending {
            return Err(format!(
                "token insert {transaction:#x} committed with GCI {gci} after {:?}",
                entry.1
            ));
        }
        entry.1 = Outcome::Committed(gci);
        let key = entry.0;
        *self.committed_inserts.entry(key).or_default() += 1;
        if let Some((delete, delete_gci)) = self.waiting_on.remove(&transaction) {
            check_order(transaction, gci, delete, delete_gci, key)?;
        }
        Ok(())
    }

    /// An insert aborted.
    pub fn insert_aborted(&mut self, transaction: u64) -> Result<(), String> {
        if let Some(entry) = self.inserts.get_mut(&transaction) {
            entry.1 = Outcome::Aborted;
        }
        match self.deleter.get(&transaction) {
            Some((delete, _)) => Err(format!(
                "dirty read: {delete:#x} deleted the row of token insert {transaction:#x}, which aborted"
            )),
            None => Ok(()),
        }
    }

    /// A delete of `key` committed after reading the row `insert` wrote.
    pub fn delete_committed(
        &mut self,
        transaction: u64,
        key: u32,
        insert: u64,
        gci: Gci,
    ) -> Result<(), String> {
        if gci == Gci(0) {
            return Err(format!(
                "token delete {transaction:#x} committed with GCI 0"
            ));
        }
        self.check_read(key, insert)?;
        match self.inserts.get(&insert) {
            Some(&(_, Outcome::Committed(insert_gci))) => {
                check_order(insert, insert_gci, transaction, gci, key)?
            }
            _ => {
                self.waiting_on.insert(insert, (transaction, gci));
            }
        }
        if let Some((other, _)) = self.deleter.insert(insert, (transaction, gci)) {
            return Err(format!(
                "token {key}: deletes {other:#x} and {transaction:#x} both removed the row of \
                 insert {insert:#x}"
            ));
        }
        *self.committed_deletes.entry(key).or_default() += 1;
        Ok(())
    }

    /// End of run: `rows` holds, per token key, the writer of the row read
    /// back, or `None` for no row.
    pub fn check_end(&self, rows: &BTreeMap<u32, Option<u64>>) -> Result<(), String> {
        if let Some((insert, (delete, _))) = self.waiting_on.iter().next() {
            return Err(format!(
                "delete {delete:#x} removed the row of insert {insert:#x}, whose commit was \
                 never confirmed"
            ));
        }
        for (&insert, &(delete, _)) in &self.deleter {
            match self.inserts.get(&insert) {
                Some((_, Outcome::Committed(_))) => {}
                other => {
                    return Err(format!(
                        "delete {delete:#x} removed insert {insert:#x}, which ended as {other:?}"
                    ))
                }
            }
        }
        for (&key, &row) in rows {
            let inserts = self.committed_inserts.get(&key).copied().unwrap_or(0);
            let deletes = self.committed_deletes.get(&key).copied().unwrap_or(0);
            let expected = u64::from(row.is_some());
            if inserts != deletes + expected {
                return Err(format!(
                    "token {key}: {inserts} committed inserts, {deletes} committed deletes, and \
                     the row is {}",
                    if row.is_some() { "there" } else { "gone" }
                ));
            }
            if let Some(writer) = row {
                self.check_read(key, writer)?;
                if let Some((delete, _)) = self.deleter.get(&writer) {
                    return Err(format!(
                        "token {key}: the row of insert {writer:#x} is there, but {delete:#x} deleted it"
                    ));
                }
            }
        }
        Ok(())
    }
}

fn check_order(
    writer: u64,
    writer_gci: Gci,
    reader: u64,
    reader_gci: Gci,
    account: u32,
) -> Result<(), String> {
    if reader_gci < writer_gci {
        return Err(format!(
            "GCI order: {reader:#x} read the write of {writer:#x} to key {account} but \
             committed in GCI {reader_gci}, before the writer's {writer_gci}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_catch_double_deletes_and_lost_inserts() {
        let mut tokens = Tokens::default();
        tokens.will_insert(1, 9);
        tokens.insert_committed(1, Gci(3)).unwrap();
        tokens.delete_committed(2, 9, 1, Gci(3)).unwrap();
        assert!(tokens.delete_committed(3, 9, 1, Gci(4)).is_err());

        let mut tokens = Tokens::default();
        tokens.will_insert(1, 9);
        tokens.will_insert(2, 9);
        tokens.insert_committed(1, Gci(3)).unwrap();
        tokens.insert_committed(2, Gci(3)).unwrap();
        // Two inserts committed with no delete between: one row is lost.
        assert!(tokens.check_end(&BTreeMap::from([(9, Some(2))])).is_err());

        let mut tokens = Tokens::default();
        tokens.will_insert(1, 9);
        tokens.delete_committed(2, 9, 1, Gci(3)).unwrap();
        assert!(tokens.insert_aborted(1).is_err());

        // A delete in an earlier GCI than the insert it removed, whichever
        // commit the clients heard of first.
        let mut tokens = Tokens::default();
        tokens.will_insert(1, 9);
        tokens.insert_committed(1, Gci(5)).unwrap();
        assert!(tokens.delete_committed(2, 9, 1, Gci(4)).is_err());
        let mut tokens = Tokens::default();
        tokens.will_insert(1, 9);
        tokens.delete_committed(2, 9, 1, Gci(4)).unwrap();
        assert!(tokens.insert_committed(1, Gci(5)).is_err());
        let mut tokens = Tokens::default();
        tokens.will_insert(1, 9);
        tokens.delete_committed(2, 9, 1, Gci(5)).unwrap();
        tokens.insert_committed(1, Gci(5)).unwrap();
        tokens.check_end(&BTreeMap::from([(9, None)])).unwrap();
    }

    fn write(account: u32, balance: i64) -> Vec<Written> {
        vec![Written {
            account,
            balance,
            note: None,
        }]
    }

    #[test]
    fn a_chain_with_a_late_writer_confirmation_checks_out() {
        let mut ledger = Ledger::default();
        ledger.will_write(1, vec![], write(5, 10)).unwrap();
        ledger.committed(1, Gci(4), &[]).unwrap();
        ledger.will_write(2, vec![(5, 1)], write(5, 11)).unwrap();
        ledger.check_read(5, 1, 10, &None).unwrap();
        ledger.will_write(3, vec![(5, 2)], write(5, 12)).unwrap();
        // 3 read 2's write and heard of its commit first.
        ledger.committed(3, Gci(6), &[(5, 2)]).unwrap();
        ledger.committed(2, Gci(5), &[(5, 1)]).unwrap();
        ledger
            .check_end(&BTreeMap::from([(5, 3)]))
            .expect("one chain 1 -> 2 -> 3");
    }

    #[test]
    fn lost_updates_dirty_reads_and_gci_inversions_are_caught() {
        let mut ledger = Ledger::default();
        ledger.will_write(1, vec![], write(5, 10)).unwrap();
        ledger.committed(1, Gci(4), &[]).unwrap();
        ledger.will_write(2, vec![(5, 1)], write(5, 11)).unwrap();
        ledger.will_write(3, vec![(5, 1)], write(5, 12)).unwrap();
        ledger.committed(2, Gci(5), &[(5, 1)]).unwrap();
        assert!(ledger.committed(3, Gci(5), &[(5, 1)]).is_err());

        let mut ledger = Ledger::default();
        ledger.will_write(1, vec![], write(5, 10)).unwrap();
        ledger.aborted(1).unwrap();
        assert!(ledger.check_read(5, 1, 10, &None).is_err());

        let mut ledger = Ledger::default();
        ledger.will_write(1, vec![], write(5, 10)).unwrap();
        ledger.committed(1, Gci(7), &[]).unwrap();
        ledger.will_write(2, vec![(5, 1)], write(5, 11)).unwrap();
        assert!(ledger.committed(2, Gci(6), &[(5, 1)]).is_err());
    }
}
