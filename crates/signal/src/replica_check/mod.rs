//! The replica checker's pure part, shared by `tessera mgm -e "check
//! replicas"` and the test helper: decoding `ScanPartitionConf` row batches
//! and comparing the replicas of one partition.
//!
//! A batch (`ScanPartitionConf::rows`, written by the ldm's scan) is a run
//! of rows, each
//!
//! ```text
//! row id (u32 LE) | GCI (u64 LE) | length (u32 LE) | `length` bytes of attribute entries
//! ```
//!
//! where the entries ([`crate::attr`]) are every column in column order, so
//! two replicas hold the same row exactly when the bytes are equal (the key
//! columns are among them). Only committed rows are listed, in row-id order.
//!
//! The comparison takes one partition's rows from each replica, the first
//! replica being the reference (normally the primary), and reports every
//! difference between the reference and each other replica: a row id on
//! one and not the other, a different row GCI, different values. Each
//! replica's ordered indexes are checked against that replica's rows
//! ([`ReplicaCheckReport::check_index`]): every live row once, in key
//! order, and nothing else.
//!
//! ```
//! use signal::replica_check::{ReplicaCheckReport, ReplicaRows};
//! use signal::NodeId;
//! let batch = [7u8, 0, 0, 0, 42, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
//! let mut primary = ReplicaRows::new(NodeId(1));
//! primary.push_batch(&batch).unwrap();
//! let mut backup = ReplicaRows::new(NodeId(2));
//! backup.push_batch(&batch).unwrap();
//! let mut report = ReplicaCheckReport::new();
//! report.check_partition(3, 0, &[primary, backup]).unwrap();
//! assert_eq!(
//!     report.to_json(),
//!     r#"{"partitions_checked":1,"rows_checked":1,"mismatches":0,"dead_nodes":[],"details":[]}"#
//! );
//! ```

mod unique;

pub use unique::UniqueProblem;

use crate::attr::AttrIter;
use crate::ids::{Gci, NodeId};
use crate::order;
use crate::schema::ColumnType;
use std::fmt;
use std::fmt::Write as _;

/// Bytes before each row's attribute entries: row id, GCI, length.
pub const ROW_PREFIX_BYTES: usize = 4 + 8 + 4;

/// Most mismatches a report keeps in [`ReplicaCheckReport::details`]; it
/// counts all of them in [`ReplicaCheckReport::mismatches`].
pub const MAX_DETAILS: usize = 100;

/// Why a batch or a replica's rows could not be checked.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ReplicaCheckError {
    /// The batch ends inside a row's 16-byte prefix that starts at `offset`.
    TruncatedPrefix {
        /// Where the row starts in the batch.
        offset: usize,
    },
    /// Row `row_id` says it has `length` bytes of values; `available` remain.
    TruncatedValues {
        /// The row.
        row_id: u32,
        /// Its length field.
        length: u32,
        /// Bytes left in the batch after its prefix.
        available: usize,
    },
    /// Row `row_id`'s values are not well-formed attribute entries.
    BadValues {
        /// The row.
        row_id: u32,
    },
    /// Replica `node` lists `row_id` after `previous`: row ids must
    /// strictly ascend.
    OutOfOrder {
        /// The replica.
        node: NodeId,
        /// The row before.
        previous: u32,
        /// The row that does not follow it.
        row_id: u32,
    },
}

impl fmt::Display for ReplicaCheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ReplicaCheckError::TruncatedPrefix { offset } => {
                write!(f, "scan batch ends inside the row at byte {offset}")
            }
            ReplicaCheckError::TruncatedValues {
                row_id,
                length,
                available,
            } => write!(
                f,
                "row {row_id} has {length} bytes of values but the scan batch has {available} left"
            ),
            ReplicaCheckError::BadValues { row_id } => {
                write!(f, "row {row_id} has malformed attribute entries")
            }
            ReplicaCheckError::OutOfOrder {
                node,
                previous,
                row_id,
            } => write!(
                f,
                "node {node} lists row {row_id} after row {previous}: rows must ascend"
            ),
        }
    }
}

impl std::error::Error for ReplicaCheckError {}

/// One row of a batch, borrowing its values from the batch.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ScanRowRef<'a> {
    /// Row id within the partition replica.
    pub row_id: u32,
    /// GCI of the row's last committed write.
    pub gci: Gci,
    /// Attribute entries of every column, in column order.
    pub values: &'a [u8],
}

impl ScanRowRef<'_> {
    /// The row with its values copied out of the batch.
    pub fn to_row(&self) -> ScanRow {
        ScanRow {
            row_id: self.row_id,
            gci: self.gci,
            values: self.values.to_vec(),
        }
    }
}

/// One row, owning its values (batches are sections that go back to their
/// pool, while a replica's rows are compared only once all are scanned).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ScanRow {
    /// Row id within the partition replica.
    pub row_id: u32,
    /// GCI of the row's last committed write.
    pub gci: Gci,
    /// Attribute entries of every column, in column order.
    pub values: Vec<u8>,
}

/// Iterates the rows of a batch, checking bounds and that each row's values
/// are well-formed attribute entries. After an error it yields nothing more.
pub struct ScanBatch<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> ScanBatch<'a> {
    /// Iterates `bytes` (a `ScanPartitionConf`'s rows).
    pub fn new(bytes: &'a [u8]) -> ScanBatch<'a> {
        ScanBatch { bytes, offset: 0 }
    }

    fn fail(
        &mut self,
        error: ReplicaCheckError,
    ) -> Option<Result<ScanRowRef<'a>, ReplicaCheckError>> {
        self.offset = self.bytes.len();
        Some(Err(error))
    }
}

impl<'a> Iterator for ScanBatch<'a> {
    type Item = Result<ScanRowRef<'a>, ReplicaCheckError>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = &self.bytes[self.offset..];
        if rest.is_empty() {
            return None;
        }
        let Some((prefix, after)) = rest.split_first_chunk::<ROW_PREFIX_BYTES>() else {
            return self.fail(ReplicaCheckError::TruncatedPrefix {
                offset: self.offset,
            });
        };
        let row_id = u32::from_le_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
        let mut gci = [0u8; 8];
        gci.copy_from_slice(&prefix[4..12]);
        let gci = Gci(u64::from_le_bytes(gci));
        let length = u32::from_le_bytes([prefix[12], prefix[13], prefix[14], prefix[15]]);
        let Some(values) = after.get(..length as usize) else {
            return self.fail(ReplicaCheckError::TruncatedValues {
                row_id,
                length,
                available: after.len(),
            });
        };
        if AttrIter::new(values).any(|entry| entry.is_err()) {
            return self.fail(ReplicaCheckError::BadValues { row_id });
        }
        self.offset += ROW_PREFIX_BYTES + values.len();
        Some(Ok(ScanRowRef {
            row_id,
            gci,
            values,
        }))
    }
}

/// Decodes a whole batch into owned rows; `Err` at the first malformed row.
pub fn decode_scan_batch(bytes: &[u8]) -> Result<Vec<ScanRow>, ReplicaCheckError> {
    ScanBatch::new(bytes)
        .map(|row| row.map(|row| row.to_row()))
        .collect()
}

/// The rows of one partition replica, gathered batch by batch.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ReplicaRows {
    /// The data node holding the replica.
    pub node: NodeId,
    /// Its committed rows, row ids strictly ascending.
    pub rows: Vec<ScanRow>,
}

impl ReplicaRows {
    /// No rows yet, from `node`.
    pub fn new(node: NodeId) -> ReplicaRows {
        ReplicaRows {
            node,
            rows: Vec::new(),
        }
    }

    /// Appends the rows of the next batch and returns how many it held.
    /// `Err` (and nothing appended) when the batch is malformed or its row
    /// ids do not ascend past those already held.
    pub fn push_batch(&mut self, batch: &[u8]) -> Result<usize, ReplicaCheckError> {
        let rows = decode_scan_batch(batch)?;
        let mut previous = self.rows.last().map(|row| row.row_id);
        for row in &rows {
            check_order(self.node, previous, row.row_id)?;
            previous = Some(row.row_id);
        }
        let count = rows.len();
        self.rows.extend(rows);
        Ok(count)
    }
}

fn check_order(node: NodeId, previous: Option<u32>, row_id: u32) -> Result<(), ReplicaCheckError> {
    match previous {
        Some(previous) if row_id <= previous => Err(ReplicaCheckError::OutOfOrder {
            node,
            previous,
            row_id,
        }),
        _ => Ok(()),
    }
}

/// How a replica differs from the reference replica.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MismatchKind {
    /// The row is on `present_on` and not on `missing_on` (one of them is
    /// the reference).
    MissingRow {
        /// Replica that has the row.
        present_on: NodeId,
        /// Replica that lacks it.
        missing_on: NodeId,
    },
    /// Both have the row with different row GCIs.
    Gci {
        /// The reference replica.
        reference: NodeId,
        /// Its GCI for the row.
        reference_gci: Gci,
        /// The other replica.
        node: NodeId,
        /// Its GCI for the row.
        gci: Gci,
    },
    /// A replica's ordered index disagrees with its rows (the index's
    /// entries are read through an index scan of that replica).
    Index {
        /// The replica.
        node: NodeId,
        /// The index (0: the primary key's).
        index: u32,
        /// What is wrong.
        problem: IndexProblem,
    },
    /// A unique index's hidden table disagrees with the table's rows.
    Unique {
        /// The index.
        index: u32,
        /// What is wrong.
        problem: UniqueProblem,
    },
    /// Both have the row with different values (key columns included).
    Values {
        /// The reference replica.
        reference: NodeId,
        /// The other replica.
        node: NodeId,
        /// The first column whose entry differs, when the two rows'
        /// entries differ at a column both list.
        column: Option<u16>,
    },
}

/// How an ordered index disagrees with the rows of its replica.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum IndexProblem {
    /// A live row has no entry.
    MissingEntry,
    /// An entry names no live row, or names one more than once.
    ExtraEntry,
    /// The entry comes before one with a smaller key (or the same key and
    /// a larger row id).
    OutOfOrder,
    /// The row read through the index differs from the row.
    Values,
}

impl IndexProblem {
    fn name(self) -> &'static str {
        match self {
            IndexProblem::MissingEntry => "missing_entry",
            IndexProblem::ExtraEntry => "extra_entry",
            IndexProblem::OutOfOrder => "out_of_order",
            IndexProblem::Values => "values",
        }
    }
}

/// One difference between two replicas of a partition, or between a
/// replica's rows and its index.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Mismatch {
    /// Table.
    pub table_id: u32,
    /// Partition.
    pub partition: u32,
    /// Row id within the partition.
    pub row_id: u32,
    /// What differs.
    pub kind: MismatchKind,
}

impl Mismatch {
    /// Appends the mismatch as a JSON object:
    ///
    /// ```text
    /// {"kind":"missing_row","table_id":T,"partition":P,"row_id":R,"present_on":N,"missing_on":N}
    /// {"kind":"gci","table_id":T,"partition":P,"row_id":R,"reference_node":N,"reference_gci":G,"node":N,"gci":G}
    /// {"kind":"values","table_id":T,"partition":P,"row_id":R,"reference_node":N,"node":N,"column":C or null}
    /// {"kind":"unique","table_id":T,"partition":P,"row_id":R,"index":I,"problem":"missing_hidden_row"}
    /// ```
    ///
    /// GCIs are the full 64-bit value (as `show` prints `latest_gci`).
    pub fn write_json(&self, out: &mut String) {
        let kind = match self.kind {
            MismatchKind::MissingRow { .. } => "missing_row",
            MismatchKind::Gci { .. } => "gci",
            MismatchKind::Values { .. } => "values",
            MismatchKind::Index { .. } => "index",
            MismatchKind::Unique { .. } => "unique",
        };
        // Writing to a String cannot fail.
        let _ = write!(
            out,
            r#"{{"kind":"{kind}","table_id":{},"partition":{},"row_id":{}"#,
            self.table_id, self.partition, self.row_id
        );
        let _ = match self.kind {
            MismatchKind::MissingRow {
                present_on,
                missing_on,
            } => write!(
                out,
                r#","present_on":{present_on},"missing_on":{missing_on}}}"#
            ),
            MismatchKind::Gci {
                reference,
                reference_gci,
                node,
                gci,
            } => write!(
                out,
                r#","reference_node":{reference},"reference_gci":{},"node":{node},"gci":{}}}"#,
                reference_gci.0, gci.0
            ),
            MismatchKind::Index {
                node,
                index,
                problem,
            } => write!(
                out,
                r#","node":{node},"index":{index},"problem":"{}"}}"#,
                problem.name()
            ),
            MismatchKind::Unique { index, problem } => {
                write!(out, r#","index":{index},"problem":"{}"}}"#, problem.name())
            }
            MismatchKind::Values {
                reference,
                node,
                column,
            } => match column {
                Some(column) => write!(
                    out,
                    r#","reference_node":{reference},"node":{node},"column":{column}}}"#
                ),
                None => write!(
                    out,
                    r#","reference_node":{reference},"node":{node},"column":null}}"#
                ),
            },
        };
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "table {} partition {} row {}: ",
            self.table_id, self.partition, self.row_id
        )?;
        match self.kind {
            MismatchKind::MissingRow {
                present_on,
                missing_on,
            } => write!(f, "on node {present_on}, missing on node {missing_on}"),
            MismatchKind::Gci {
                reference,
                reference_gci,
                node,
                gci,
            } => write!(
                f,
                "GCI {reference_gci} on node {reference}, {gci} on node {node}"
            ),
            MismatchKind::Index {
                node,
                index,
                problem,
            } => write!(f, "index {index} on node {node}: {}", problem.name()),
            MismatchKind::Unique { index, problem } => {
                write!(f, "unique index {index}: {}", problem.name())
            }
            MismatchKind::Values {
                reference,
                node,
                column,
            } => {
                write!(f, "values differ between node {reference} and node {node}")?;
                match column {
                    Some(column) => write!(f, " (first at column {column})"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// The outcome of checking any number of partitions.
#[derive(Clone, Default, PartialEq, Eq, Debug)]
pub struct ReplicaCheckReport {
    /// Partitions compared.
    pub partitions_checked: u64,
    /// Distinct row ids compared, summed over partitions (a row held by
    /// every replica counts once).
    pub rows_checked: u64,
    /// Every mismatch found.
    pub mismatches: u64,
    /// The first [`MAX_DETAILS`] mismatches.
    pub details: Vec<Mismatch>,
    /// Data nodes failed or shut down when the check ran: their replicas
    /// are dead, left out of every map, and not compared (the live
    /// replicas are).
    pub dead_nodes: Vec<u16>,
}

impl ReplicaCheckReport {
    /// Nothing checked yet.
    pub fn new() -> ReplicaCheckReport {
        ReplicaCheckReport::default()
    }

    /// True when no mismatch was found.
    pub fn is_consistent(&self) -> bool {
        self.mismatches == 0
    }

    /// Compares the replicas of partition `partition` of table `table_id`.
    /// `replicas[0]` is the reference (normally the primary); every other
    /// replica is compared with it, row by row. `Err` (and the report left
    /// unchanged) when a replica's row ids do not strictly ascend.
    pub fn check_partition(
        &mut self,
        table_id: u32,
        partition: u32,
        replicas: &[ReplicaRows],
    ) -> Result<(), ReplicaCheckError> {
        for replica in replicas {
            let mut previous = None;
            for row in &replica.rows {
                check_order(replica.node, previous, row.row_id)?;
                previous = Some(row.row_id);
            }
        }
        self.partitions_checked += 1;
        let Some((reference, others)) = replicas.split_first() else {
            return Ok(());
        };
        // Merge all replicas by row id; `cursors[i]` is replica i's next row.
        let mut cursors = vec![0usize; replicas.len()];
        let head = |cursors: &[usize], i: usize| replicas[i].rows.get(cursors[i]);
        while let Some(row_id) = (0..replicas.len())
            .filter_map(|i| head(&cursors, i).map(|row| row.row_id))
            .min()
        {
            self.rows_checked += 1;
            let mismatch = |kind| Mismatch {
                table_id,
                partition,
                row_id,
                kind,
            };
            let reference_row = head(&cursors, 0).filter(|row| row.row_id == row_id);
            for (index, other) in others.iter().enumerate() {
                let other_row = head(&cursors, index + 1).filter(|row| row.row_id == row_id);
                let kinds = match (reference_row, other_row) {
                    (None, None) => [None, None],
                    (Some(_), None) => [
                        Some(MismatchKind::MissingRow {
                            present_on: reference.node,
                            missing_on: other.node,
                        }),
                        None,
                    ],
                    (None, Some(_)) => [
                        Some(MismatchKind::MissingRow {
                            present_on: other.node,
                            missing_on: reference.node,
                        }),
                        None,
                    ],
                    (Some(ours), Some(theirs)) => [
                        (ours.gci != theirs.gci).then_some(MismatchKind::Gci {
                            reference: reference.node,
                            reference_gci: ours.gci,
                            node: other.node,
                            gci: theirs.gci,
                        }),
                        (ours.values != theirs.values).then(|| MismatchKind::Values {
                            reference: reference.node,
                            node: other.node,
                            column: first_differing_column(&ours.values, &theirs.values),
                        }),
                    ],
                };
                for kind in kinds.into_iter().flatten() {
                    self.record(mismatch(kind));
                }
            }
            for (i, cursor) in cursors.iter_mut().enumerate() {
                if replicas[i]
                    .rows
                    .get(*cursor)
                    .is_some_and(|row| row.row_id == row_id)
                {
                    *cursor += 1;
                }
            }
        }
        Ok(())
    }

    /// Compares one replica's ordered index with its rows: `index_rows`
    /// are the rows an index scan of the replica returned, in index order
    /// (every column, with row ids), `key` the index's columns and their
    /// types. Every live row must be there exactly once, in key order
    /// (then row id), with the row's values.
    pub fn check_index(
        &mut self,
        (table_id, partition): (u32, u32),
        (index, key): (u32, &[(u16, ColumnType)]),
        replica: &ReplicaRows,
        index_rows: &[ScanRow],
    ) {
        let node = replica.node;
        let mut record = |row_id, problem| {
            self.record(Mismatch {
                table_id,
                partition,
                row_id,
                kind: MismatchKind::Index {
                    node,
                    index,
                    problem,
                },
            })
        };
        let key_of = |row: &ScanRow| -> Vec<Option<Vec<u8>>> {
            key.iter()
                .map(|&(column, _)| {
                    AttrIter::new(&row.values)
                        .filter_map(Result::ok)
                        .find(|entry| entry.column == column)
                        .and_then(|entry| entry.value.map(<[u8]>::to_vec))
                })
                .collect()
        };
        let types: Vec<ColumnType> = key.iter().map(|&(_, column_type)| column_type).collect();
        let mut previous: Option<(Vec<Option<Vec<u8>>>, u32)> = None;
        let mut seen = std::collections::BTreeSet::new();
        for row in index_rows {
            let this = key_of(row);
            let well_formed = this.iter().zip(&types).all(|(value, &column_type)| {
                value
                    .as_deref()
                    .is_none_or(|value| crate::attr::check_value(column_type, value).is_ok())
            });
            if !well_formed {
                // Not a value of its column: no order to check it by.
                record(row.row_id, IndexProblem::Values);
                continue;
            }
            if let Some((before, before_row)) = &previous {
                let order = order::compare_keys(&types, &key_refs(before), &key_refs(&this))
                    .then(before_row.cmp(&row.row_id));
                if order != std::cmp::Ordering::Less {
                    record(row.row_id, IndexProblem::OutOfOrder);
                }
            }
            previous = Some((this, row.row_id));
            let live = replica
                .rows
                .binary_search_by_key(&row.row_id, |live| live.row_id);
            match live {
                Ok(at) if seen.insert(row.row_id) => {
                    if replica.rows[at].values != row.values {
                        record(row.row_id, IndexProblem::Values);
                    }
                }
                _ => record(row.row_id, IndexProblem::ExtraEntry),
            }
        }
        for live in &replica.rows {
            if !seen.contains(&live.row_id) {
                record(live.row_id, IndexProblem::MissingEntry);
            }
        }
    }

    /// Counts `mismatch`, keeping it while fewer than [`MAX_DETAILS`] are.
    pub fn record(&mut self, mismatch: Mismatch) {
        self.mismatches += 1;
        if self.details.len() < MAX_DETAILS {
            self.details.push(mismatch);
        }
    }

    /// The report as one JSON object, written by hand (`signal` has no JSON
    /// dependency):
    ///
    /// ```text
    /// {"partitions_checked":N,"rows_checked":M,"mismatches":K,"details":[...]}
    /// ```
    ///
    /// with each detail as [`Mismatch::write_json`] writes it. Every value is
    /// a number, `null` or a fixed ASCII name, so nothing needs escaping.
    pub fn to_json(&self) -> String {
        let mut out = format!(
            r#"{{"partitions_checked":{},"rows_checked":{},"mismatches":{},"dead_nodes":{:?},"details":["#,
            self.partitions_checked, self.rows_checked, self.mismatches, self.dead_nodes
        );
        for (index, mismatch) in self.details.iter().enumerate() {
            if index > 0 {
                out.push(',');
            }
            mismatch.write_json(&mut out);
        }
        out.push_str("]}");
        out
    }
}

impl fmt::Display for ReplicaCheckReport {
    /// A summary line, then one line per kept mismatch.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "checked {} partitions, {} rows: {} mismatches",
            self.partitions_checked, self.rows_checked, self.mismatches
        )?;
        if !self.dead_nodes.is_empty() {
            write!(
                f,
                "; the replicas on data node(s) {:?} are dead (failed or shut down): only the \
                 live replicas were compared",
                self.dead_nodes
            )?;
        }
        for mismatch in &self.details {
            write!(f, "\n  {mismatch}")?;
        }
        let hidden = self.mismatches.saturating_sub(self.details.len() as u64);
        if hidden > 0 {
            write!(f, "\n  ... and {hidden} more")?;
        }
        Ok(())
    }
}

/// A key's values as `order::compare_keys` takes them.
fn key_refs(key: &[Option<Vec<u8>>]) -> Vec<Option<&[u8]>> {
    key.iter().map(Option::as_deref).collect()
}

/// The column (as the reference `a` names it) of the first entry at which
/// `a` and `b` differ, when both list an entry there.
fn first_differing_column(a: &[u8], b: &[u8]) -> Option<u16> {
    let mut a = AttrIter::new(a);
    let mut b = AttrIter::new(b);
    loop {
        match (a.next(), b.next()) {
            (Some(Ok(ours)), Some(Ok(theirs))) if ours != theirs => return Some(ours.column),
            (Some(Ok(_)), Some(Ok(_))) => {}
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::AttrWriter;

    #[test]
    fn an_index_is_checked_against_its_replicas_rows() {
        let row = |row_id, key: i32| ScanRow {
            row_id,
            gci: Gci::from_parts(1, 0),
            values: values(key, None),
        };
        let mut replica = ReplicaRows::new(NodeId(2));
        replica.rows = vec![row(1, 30), row(2, 10), row(5, 20)];
        let key = [(0u16, ColumnType::Int { unsigned: false })];
        let check = |index_rows: &[ScanRow]| {
            let mut report = ReplicaCheckReport::new();
            report.check_index((3, 0), (0, &key), &replica, index_rows);
            report
                .details
                .iter()
                .map(|mismatch| match mismatch.kind {
                    MismatchKind::Index { problem, .. } => (mismatch.row_id, problem),
                    other => panic!("{other:?}"),
                })
                .collect::<Vec<_>>()
        };
        // In key order, every row once: consistent.
        assert_eq!(check(&[row(2, 10), row(5, 20), row(1, 30)]), []);
        // A row missing, one out of order, one twice, one not live, one
        // whose values differ.
        assert_eq!(
            check(&[row(5, 20), row(2, 10)]),
            [
                (2, IndexProblem::OutOfOrder),
                (1, IndexProblem::MissingEntry)
            ]
        );
        assert_eq!(
            check(&[row(2, 10), row(2, 10), row(5, 20), row(7, 25), row(1, 31)]),
            [
                (2, IndexProblem::OutOfOrder),
                (2, IndexProblem::ExtraEntry),
                (7, IndexProblem::ExtraEntry),
                (1, IndexProblem::Values)
            ]
        );
        let mut report = ReplicaCheckReport::new();
        report.check_index((3, 0), (0, &key), &replica, &[row(2, 10)]);
        let mut json = String::new();
        report.details[0].write_json(&mut json);
        assert_eq!(
            json,
            r#"{"kind":"index","table_id":3,"partition":0,"row_id":1,"node":2,"index":0,"problem":"missing_entry"}"#
        );
    }

    /// Entries for an INT key column 0 and a nullable VARCHAR column 1.
    fn values(key: i32, text: Option<&[u8]>) -> Vec<u8> {
        let mut buffer = [0u8; 128];
        let mut writer = AttrWriter::new(&mut buffer);
        writer.push(0, Some(&key.to_le_bytes())).unwrap();
        writer.push(1, text).unwrap();
        let used = writer.len();
        buffer[..used].to_vec()
    }

    fn row(row_id: u32, gci: u64, key: i32, text: &[u8]) -> ScanRow {
        ScanRow {
            row_id,
            gci: Gci(gci),
            values: values(key, Some(text)),
        }
    }

    fn encode(rows: &[ScanRow]) -> Vec<u8> {
        let mut out = Vec::new();
        for row in rows {
            out.extend_from_slice(&row.row_id.to_le_bytes());
            out.extend_from_slice(&row.gci.0.to_le_bytes());
            out.extend_from_slice(&(row.values.len() as u32).to_le_bytes());
            out.extend_from_slice(&row.values);
        }
        out
    }

    fn replica(node: u16, rows: Vec<ScanRow>) -> ReplicaRows {
        ReplicaRows {
            node: NodeId(node),
            rows,
        }
    }

    fn sample() -> Vec<ScanRow> {
        vec![
            row(0, Gci::from_parts(5, 1).0, 10, b"ten"),
            row(3, Gci::from_parts(5, 2).0, 11, b"eleven"),
            row(4, Gci::from_parts(6, 0).0, 12, b""),
        ]
    }

    fn check(replicas: &[ReplicaRows]) -> ReplicaCheckReport {
        let mut report = ReplicaCheckReport::new();
        report.check_partition(7, 2, replicas).unwrap();
        report
    }

    #[test]
    fn batches_round_trip_borrowed_and_owned() {
        let mut rows = sample();
        rows.push(ScanRow {
            row_id: u32::MAX,
            gci: Gci(u64::MAX),
            values: values(-1, None),
        });
        let batch = encode(&rows);
        assert_eq!(decode_scan_batch(&batch), Ok(rows.clone()));
        let borrowed: Vec<ScanRowRef<'_>> = ScanBatch::new(&batch).map(Result::unwrap).collect();
        assert_eq!(borrowed.len(), rows.len());
        assert_eq!(borrowed[1].values, &rows[1].values[..]);
        assert_eq!(borrowed[3].gci, Gci(u64::MAX));
        assert_eq!(decode_scan_batch(&[]), Ok(Vec::new()));
    }

    #[test]
    fn a_row_with_no_values_decodes() {
        let batch = encode(&[ScanRow {
            row_id: 1,
            gci: Gci(2),
            values: Vec::new(),
        }]);
        assert_eq!(
            decode_scan_batch(&batch).unwrap()[0].values,
            Vec::<u8>::new()
        );
    }

    #[test]
    fn malformed_batches_are_errors() {
        let batch = encode(&sample());
        let first = ROW_PREFIX_BYTES + sample()[0].values.len();
        // Cut inside the second row's prefix.
        assert_eq!(
            decode_scan_batch(&batch[..first + 5]),
            Err(ReplicaCheckError::TruncatedPrefix { offset: first })
        );
        // Cut inside the second row's values.
        assert_eq!(
            decode_scan_batch(&batch[..first + ROW_PREFIX_BYTES + 3]),
            Err(ReplicaCheckError::TruncatedValues {
                row_id: 3,
                length: sample()[1].values.len() as u32,
                available: 3,
            })
        );
        // A length far past the end (no overflow, no panic).
        let mut huge = batch.clone();
        huge[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            decode_scan_batch(&huge),
            Err(ReplicaCheckError::TruncatedValues { row_id: 0, .. })
        ));
        // Values that are not attribute entries: an entry claims more bytes.
        let mut bad = batch.clone();
        bad[ROW_PREFIX_BYTES + 2..ROW_PREFIX_BYTES + 4].copy_from_slice(&100u16.to_le_bytes());
        assert_eq!(
            decode_scan_batch(&bad),
            Err(ReplicaCheckError::BadValues { row_id: 0 })
        );
        // A dangling partial entry header inside a row.
        let short = encode(&[ScanRow {
            row_id: 9,
            gci: Gci(1),
            values: vec![0, 0, 4],
        }]);
        assert_eq!(
            decode_scan_batch(&short),
            Err(ReplicaCheckError::BadValues { row_id: 9 })
        );
        // The iterator stops after an error.
        let mut iter = ScanBatch::new(&batch[..first + 5]);
        assert!(iter.next().unwrap().is_ok());
        assert!(iter.next().unwrap().is_err());
        assert!(iter.next().is_none());
    }

    #[test]
    fn every_truncation_of_a_batch_is_an_error_not_a_panic() {
        let batch = encode(&sample());
        let mut ends = vec![0];
        let mut offset = 0;
        for row in sample() {
            offset += ROW_PREFIX_BYTES + row.values.len();
            ends.push(offset);
        }
        for cut in 0..batch.len() {
            let result = decode_scan_batch(&batch[..cut]);
            assert_eq!(result.is_ok(), ends.contains(&cut), "cut at {cut}");
        }
    }

    #[test]
    fn push_batch_accumulates_and_checks_order() {
        let rows = sample();
        let mut replica = ReplicaRows::new(NodeId(1));
        assert_eq!(replica.push_batch(&encode(&rows[..2])), Ok(2));
        assert_eq!(replica.push_batch(&encode(&rows[2..])), Ok(1));
        assert_eq!(replica.push_batch(&[]), Ok(0));
        assert_eq!(replica.rows, rows);
        // A batch that goes back is refused whole.
        assert_eq!(
            replica.push_batch(&encode(&[row(9, 1, 1, b"x"), row(3, 1, 1, b"x")])),
            Err(ReplicaCheckError::OutOfOrder {
                node: NodeId(1),
                previous: 9,
                row_id: 3,
            })
        );
        assert_eq!(
            replica.push_batch(&encode(&rows[2..])),
            Err(ReplicaCheckError::OutOfOrder {
                node: NodeId(1),
                previous: 4,
                row_id: 4,
            })
        );
        assert_eq!(replica.rows, rows);
        // A malformed batch appends nothing.
        let mut bad = encode(&[row(8, 1, 1, b"x")]);
        bad.pop();
        assert!(replica.push_batch(&bad).is_err());
        assert_eq!(replica.rows, rows);
    }

    #[test]
    fn equal_replicas_have_no_mismatches() {
        let report = check(&[
            replica(1, sample()),
            replica(2, sample()),
            replica(3, sample()),
        ]);
        assert_eq!(
            report,
            ReplicaCheckReport {
                partitions_checked: 1,
                rows_checked: 3,
                mismatches: 0,
                details: Vec::new(),
                dead_nodes: Vec::new(),
            }
        );
        assert!(report.is_consistent());
        assert_eq!(
            report.to_json(),
            r#"{"partitions_checked":1,"rows_checked":3,"mismatches":0,"dead_nodes":[],"details":[]}"#
        );
        assert_eq!(
            report.to_string(),
            "checked 1 partitions, 3 rows: 0 mismatches"
        );
        let with_dead = ReplicaCheckReport {
            dead_nodes: vec![3],
            ..report.clone()
        };
        assert!(with_dead.to_json().contains(r#""dead_nodes":[3]"#));
        assert!(with_dead
            .to_string()
            .contains("the replicas on data node(s) [3] are dead"));
        // Empty partitions and a lone replica are fine too.
        let mut report = check(&[replica(1, Vec::new()), replica(2, Vec::new())]);
        report
            .check_partition(7, 3, &[replica(1, sample())])
            .unwrap();
        report.check_partition(7, 4, &[]).unwrap();
        assert_eq!((report.partitions_checked, report.rows_checked), (3, 3));
        assert!(report.is_consistent());
    }

    #[test]
    fn a_row_missing_on_either_side_is_a_mismatch() {
        let mut fewer = sample();
        fewer.remove(1);
        let report = check(&[replica(1, sample()), replica(2, fewer.clone())]);
        assert_eq!(report.rows_checked, 3);
        assert_eq!(
            report.details,
            vec![Mismatch {
                table_id: 7,
                partition: 2,
                row_id: 3,
                kind: MismatchKind::MissingRow {
                    present_on: NodeId(1),
                    missing_on: NodeId(2),
                },
            }]
        );
        assert_eq!(
            report.to_json(),
            concat!(
                r#"{"partitions_checked":1,"rows_checked":3,"mismatches":1,"dead_nodes":[],"details":["#,
                r#"{"kind":"missing_row","table_id":7,"partition":2,"row_id":3,"present_on":1,"missing_on":2}"#,
                "]}"
            )
        );
        // Missing on the reference, including past its last row.
        let mut more = sample();
        more.push(row(20, 1, 99, b"extra"));
        let report = check(&[replica(1, fewer), replica(2, more)]);
        assert_eq!(report.rows_checked, 4);
        let missing: Vec<_> = report
            .details
            .iter()
            .map(|mismatch| (mismatch.row_id, mismatch.kind))
            .collect();
        let on_two = MismatchKind::MissingRow {
            present_on: NodeId(2),
            missing_on: NodeId(1),
        };
        assert_eq!(missing, vec![(3, on_two), (20, on_two)]);
        // A replica with no rows at all.
        let report = check(&[replica(1, sample()), replica(2, Vec::new())]);
        assert_eq!(report.mismatches, 3);
    }

    #[test]
    fn a_different_gci_is_a_mismatch() {
        let mut other = sample();
        other[2].gci = Gci::from_parts(6, 1);
        let report = check(&[replica(1, sample()), replica(4, other)]);
        assert_eq!(
            report.details,
            vec![Mismatch {
                table_id: 7,
                partition: 2,
                row_id: 4,
                kind: MismatchKind::Gci {
                    reference: NodeId(1),
                    reference_gci: Gci::from_parts(6, 0),
                    node: NodeId(4),
                    gci: Gci::from_parts(6, 1),
                },
            }]
        );
        let six = Gci::from_parts(6, 0).0;
        let json = report.to_json();
        assert!(
            json.contains(&format!(
                r#"{{"kind":"gci","table_id":7,"partition":2,"row_id":4,"reference_node":1,"reference_gci":{six},"node":4,"gci":{}}}"#,
                six + 1
            )),
            "{json}"
        );
    }

    #[test]
    fn different_values_or_keys_are_mismatches() {
        let mut other = sample();
        other[0].values = values(10, Some(b"TEN"));
        other[1].values = values(99, Some(b"eleven"));
        other[2].values = values(12, None);
        let report = check(&[replica(1, sample()), replica(2, other)]);
        let columns: Vec<_> = report
            .details
            .iter()
            .map(|mismatch| match mismatch.kind {
                MismatchKind::Values {
                    reference,
                    node,
                    column,
                } => {
                    assert_eq!((reference, node), (NodeId(1), NodeId(2)));
                    (mismatch.row_id, column)
                }
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(columns, vec![(0, Some(1)), (3, Some(0)), (4, Some(1))]);
        assert!(report.to_json().contains(
            r#"{"kind":"values","table_id":7,"partition":2,"row_id":3,"reference_node":1,"node":2,"column":0}"#
        ));
        // Entries that stop early: no column to name.
        let mut short = sample();
        short[0].values.truncate(8);
        let report = check(&[replica(1, sample()), replica(2, short)]);
        assert_eq!(
            report.details[0].kind,
            MismatchKind::Values {
                reference: NodeId(1),
                node: NodeId(2),
                column: None,
            }
        );
        assert!(report.to_json().contains(r#""column":null}"#));
    }

    #[test]
    fn gci_and_values_both_count_and_each_replica_is_compared() {
        let mut bad = sample();
        bad[0].gci = Gci(1);
        bad[0].values = values(10, Some(b"ten!"));
        let report = check(&[replica(1, sample()), replica(2, sample()), replica(3, bad)]);
        assert_eq!(report.mismatches, 2);
        assert!(matches!(
            report.details[0].kind,
            MismatchKind::Gci {
                node: NodeId(3),
                ..
            }
        ));
        assert!(matches!(
            report.details[1].kind,
            MismatchKind::Values {
                node: NodeId(3),
                ..
            }
        ));
        // Each mismatch also reads as a line.
        let text = report.to_string();
        assert!(
            text.starts_with("checked 1 partitions, 3 rows: 2 mismatches"),
            "{text}"
        );
        assert!(
            text.contains("table 7 partition 2 row 0: values differ between node 1 and node 3"),
            "{text}"
        );
    }

    #[test]
    fn unordered_replica_rows_are_errors_and_change_nothing() {
        let mut unordered = sample();
        unordered.swap(0, 1);
        let mut report = ReplicaCheckReport::new();
        assert_eq!(
            report.check_partition(7, 2, &[replica(1, sample()), replica(2, unordered)]),
            Err(ReplicaCheckError::OutOfOrder {
                node: NodeId(2),
                previous: 3,
                row_id: 0,
            })
        );
        assert_eq!(report, ReplicaCheckReport::new());
    }

    #[test]
    fn details_are_capped_but_every_mismatch_counts() {
        let rows: Vec<ScanRow> = (0..250).map(|id| row(id, 1, id as i32, b"v")).collect();
        let report = check(&[replica(1, rows), replica(2, Vec::new())]);
        assert_eq!(report.mismatches, 250);
        assert_eq!(report.details.len(), MAX_DETAILS);
        assert_eq!(
            report.details[MAX_DETAILS - 1].row_id,
            MAX_DETAILS as u32 - 1
        );
        assert!(report.to_json().starts_with(
            r#"{"partitions_checked":1,"rows_checked":250,"mismatches":250,"dead_nodes":[],"details":[{"#
        ));
        assert!(report.to_string().ends_with("... and 150 more"));
    }
}
