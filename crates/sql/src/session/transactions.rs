//! How a session's transaction ends: COMMIT (and the implicit commit
//! of BEGIN, DDL and SET autocommit), ROLLBACK, and the savepoints it
//! keeps by name (design 0027, "Transactions").

use super::Session;
use crate::error::{codes, SqlError, SqlResult};
use client::Commit;
use std::sync::atomic::Ordering;

impl Session {
    /// Rolls the open transaction back (ROLLBACK, and ROLLBACK TO a
    /// savepoint, which can do no less).
    pub(super) fn roll_back_open(&mut self) {
        self.reads_in_transaction = false;
        self.savepoints.clear();
        if let Some(mut transaction) = self.transaction.take() {
            let _ = transaction.rollback();
            self.statistics().rollbacks.fetch_add(1, Ordering::Relaxed);
        }
        self.explicit = !self.autocommit;
    }

    /// The position of savepoint `name` among the transaction's: 1305
    /// when it has none of that name.
    pub(super) fn savepoint(&self, name: &str) -> SqlResult<usize> {
        self.savepoints
            .iter()
            .position(|s| s.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                SqlError::new(
                    codes::SP_DOES_NOT_EXIST,
                    format!("SAVEPOINT {name} does not exist"),
                )
            })
    }

    /// Commits the open transaction (BEGIN, COMMIT, DDL and SET autocommit
    /// do, as MySQL's implicit commit).
    pub(super) fn commit_open(&mut self) -> SqlResult<()> {
        self.reads_in_transaction = false;
        self.savepoints.clear();
        let Some(mut transaction) = self.transaction.take() else {
            return Ok(());
        };
        self.explicit = false;
        if transaction.holds_nothing() {
            // Only committed reads (sysbench's read-only transactions): no
            // lock to release and nothing to commit. Dropped, it is rolled
            // back at the tc without a wait: one round trip fewer.
            drop(transaction);
            self.statistics().commits.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        // An error is of a write that waited for this round trip.
        let waiting = self.locked_rows.waiting_table(&transaction);
        match transaction.execute(Commit::Yes) {
            Ok(_) => {
                self.statistics().commits.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(error) => {
                let mut mapped = SqlError::from_client(&error, waiting.as_deref().unwrap_or(""));
                // A refused operation aborted the transaction: it was
                // rolled back, as a failed statement's is (an unknown
                // outcome is not said to be).
                if matches!(
                    error,
                    client::ClientError::Operation { .. }
                        | client::ClientError::DuplicateKey { .. }
                ) {
                    self.statistics().rollbacks.fetch_add(1, Ordering::Relaxed);
                    mapped
                        .message
                        .push_str(" (the transaction was rolled back)");
                }
                Err(mapped)
            }
        }
    }
}
