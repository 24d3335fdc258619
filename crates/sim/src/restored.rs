//! What a restarted cluster holds: the bank table's rows as the production
//! partition scan reads them back after a whole-cluster crash and restart
//! (every replica compared first, `replicas`), each with the GCI of its
//! last commit, sorted by kind of key.
//!
//! `bank::CrashedBank::check` compares them with what the clients knew at
//! the crash (docs/design/durability.md §5: after a system restart the state
//! is the committed prefix up to the restored GCI), and `Bank::resume`
//! continues the workload from them.

use crate::bank::{SCRATCH_BASE, TOKENS, TOKEN_BASE};
use crate::rows::{self, Row};
use signal::replica_check::ScanRow;
use signal::Gci;
use std::collections::BTreeMap;

/// A row read back with the GCI of the transaction that last wrote it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredRow {
    /// The row's columns.
    pub row: Row,
    /// The GCI the row carries (of its last committed change).
    pub gci: Gci,
}

/// The bank table after a restart, by kind of key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Restored {
    /// The GCI the cluster restored.
    pub gci: Gci,
    /// Accounts (keys below [`SCRATCH_BASE`]).
    pub accounts: BTreeMap<u32, StoredRow>,
    /// Scratch keys (from [`SCRATCH_BASE`] to [`TOKEN_BASE`]).
    pub scratch: BTreeMap<u32, StoredRow>,
    /// Token keys ([`TOKEN_BASE`] and the [`TOKENS`] after it).
    pub tokens: BTreeMap<u32, StoredRow>,
}

impl Restored {
    /// Sorts the scanned rows (of the primary replicas) by key. A row that
    /// does not decode, a key twice, a key no client writes, or a row
    /// newer than the restored GCI is an error.
    pub fn from_rows(gci: Gci, scanned: &[ScanRow]) -> Result<Restored, String> {
        let mut restored = Restored {
            gci,
            ..Restored::default()
        };
        for scanned in scanned {
            let row = rows::decode_row(&scanned.values)
                .map_err(|error| format!("row {} read back: {error}", scanned.row_id))?;
            let key = row.id;
            if scanned.gci > gci {
                return Err(format!(
                    "key {key} (row {}) carries GCI {}, above the restored GCI {gci}: a change \
                     that was not durable came back",
                    scanned.row_id, scanned.gci
                ));
            }
            let kind = if key < SCRATCH_BASE {
                &mut restored.accounts
            } else if key < TOKEN_BASE {
                &mut restored.scratch
            } else if key < TOKEN_BASE + TOKENS {
                &mut restored.tokens
            } else {
                return Err(format!(
                    "key {key}, which no client writes, is in the table"
                ));
            };
            let stored = StoredRow {
                row,
                gci: scanned.gci,
            };
            if let Some(other) = kind.insert(key, stored) {
                return Err(format!(
                    "key {key} is in the table twice (once as {other:?})"
                ));
            }
        }
        Ok(restored)
    }

    /// Rows restored.
    pub fn rows(&self) -> usize {
        self.accounts.len() + self.scratch.len() + self.tokens.len()
    }
}
