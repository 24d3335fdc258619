//! What a restarted cluster holds: the bank table's rows as the client's
//! partition scan reads them back after a whole-cluster crash and restart
//! (every replica compared first by the client's replica checker), each
//! with the GCI of its last commit, sorted by kind of key.
//!
//! `bank::CrashedBank::check` compares them with what the clients knew at
//! the crash (docs/design/durability.md §5: after a system restart the state
//! is the committed prefix up to the restored GCI), and `Bank::resume`
//! continues the workload from them.

use crate::bank::{SCRATCH_BASE, TABLE_NAME, TOKENS, TOKEN_BASE};
use crate::hosted::{HostedApiNodes, HostedContext};
use crate::rows::{self, Row};
use crate::simulation::Simulation;
use client::{ClientError, ConnectOptions};
use signal::{ErrorCode, Gci, NodeId};
use std::collections::BTreeMap;

/// The API node that reads the table back after a restart.
const READER_API_NODE: u16 = 240;
/// Rows per scan batch.
const SCAN_BATCH_ROWS: u32 = 1000;
/// Simulated time the reader may take.
const READ_LIMIT_US: u64 = 60_000_000;

/// A row of a primary replica as the partition scan read it: its row id
/// and the row with its GCI.
pub type ScannedRow = (u32, StoredRow);

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
    pub fn from_rows(gci: Gci, scanned: &[ScannedRow]) -> Result<Restored, String> {
        let mut restored = Restored {
            gci,
            ..Restored::default()
        };
        for (row_id, stored) in scanned {
            let row = &stored.row;
            let key = row.id;
            if stored.gci > gci {
                return Err(format!(
                    "key {key} (row {row_id}) carries GCI {}, above the restored GCI {gci}: a \
                     change that was not durable came back",
                    stored.gci
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
            if let Some(other) = kind.insert(key, stored.clone()) {
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

/// Reads the bank table back through the client, as a hosted API node:
/// the client's replica checker compares every replica of every
/// partition (a difference fails the run), then the primaries are
/// scanned. Empty when the cluster has no bank table.
pub fn read_back(simulation: &mut Simulation) -> Vec<ScannedRow> {
    let mut reader = HostedApiNodes::default();
    reader.spawn(
        NodeId(READER_API_NODE),
        &mut simulation.client_io(),
        read_table,
    );
    let limit = simulation.world().now_us() + READ_LIMIT_US;
    while !reader.all_ended() {
        assert!(
            simulation.step(&mut reader),
            "the simulation ran out of events while the table was read back"
        );
        assert!(
            simulation.world().now_us() < limit,
            "reading the table back took over {} simulated seconds",
            READ_LIMIT_US / 1_000_000
        );
    }
    reader.take_results().pop().expect("one reader")
}

/// The reader's API node.
fn read_table(context: HostedContext) -> Vec<ScannedRow> {
    let fail = |what: &str, error: ClientError| -> ! {
        panic!("reading the table back: {what}: {error}");
    };
    let cluster = context
        .connect(ConnectOptions::default())
        .unwrap_or_else(|error| fail("connecting", error));
    let table = match cluster.table(TABLE_NAME) {
        Ok(table) => table,
        Err(error) if error.code() == Some(ErrorCode::UnknownTable) => return Vec::new(),
        Err(error) => fail("describing the table", error),
    };
    let check = cluster
        .check_replicas()
        .unwrap_or_else(|error| fail("the replica checker", error));
    assert!(check.is_consistent(), "replicas differ: {check}");
    let map = table.map().expect("a described table has a map").clone();
    let mut rows = Vec::new();
    for (partition, placement) in map.partitions.iter().enumerate() {
        let primary = placement.replicas[0];
        let mut start = 0;
        loop {
            let batch = cluster
                .scan_partition(primary, &table, partition as u32, start, SCAN_BATCH_ROWS)
                .unwrap_or_else(|error| fail("scanning a partition", error));
            for scanned in batch.rows {
                let row = rows::from_client(&scanned.row)
                    .unwrap_or_else(|error| panic!("reading the table back: {error}"));
                rows.push((
                    scanned.row_id,
                    StoredRow {
                        row,
                        gci: scanned.gci,
                    },
                ));
            }
            if batch.done {
                break;
            }
            start = batch.next_row;
        }
    }
    rows
}
