//! The replica checker's check of a unique index against its table
//! (docs/design/scans-and-indexes.md §5): the hidden table must hold, for
//! every row whose indexed columns are all non-NULL, one row keyed on
//! those values naming that row's primary key, and nothing else. Values
//! compare as keys do (PAD SPACE text without trailing spaces).

use super::{Mismatch, MismatchKind, ReplicaCheckReport, ScanRow};
use crate::attr::{append_entry, canonical, key_hash, AttrIter};
use crate::partition::bucket;
use crate::schema::{IndexDef, TableDef};
use std::collections::BTreeMap;

/// A row with its partition.
pub type PlacedRow = (u32, ScanRow);

/// How a unique index disagrees with its table's rows.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum UniqueProblem {
    /// A row with non-NULL values in the index's columns has no hidden
    /// row (`table_id`, `partition` and `row_id` name the row).
    MissingHiddenRow,
    /// A hidden row names no row holding its values (`table_id`,
    /// `partition` and `row_id` name the hidden row).
    ExtraHiddenRow,
    /// Two rows hold the same values (the second one is named).
    Repeated,
    /// A hidden row sits in another partition than its key hashes to (no
    /// lookup would find it).
    Misplaced,
}

impl UniqueProblem {
    pub(super) fn name(self) -> &'static str {
        match self {
            UniqueProblem::MissingHiddenRow => "missing_hidden_row",
            UniqueProblem::ExtraHiddenRow => "extra_hidden_row",
            UniqueProblem::Repeated => "repeated",
            UniqueProblem::Misplaced => "misplaced",
        }
    }
}

/// A row's values of `columns` as keys compare (`None` when one is NULL
/// or missing).
fn key_of(table: &TableDef, columns: &[u16], row: &ScanRow) -> Option<Vec<Vec<u8>>> {
    columns
        .iter()
        .map(|&column| {
            let entry = AttrIter::new(&row.values)
                .filter_map(Result::ok)
                .find(|entry| entry.column == column)?;
            let column_type = table.columns[column as usize].column_type;
            Some(canonical(column_type, entry.value?).to_vec())
        })
        .collect()
}

/// The key section of `row` (its `key` columns' entries, in key order).
fn key_section(key: &[u16], row: &ScanRow) -> Option<Vec<u8>> {
    let mut section = Vec::new();
    for &column in key {
        let entry = AttrIter::new(&row.values)
            .filter_map(Result::ok)
            .find(|entry| entry.column == column)?;
        append_entry(&mut section, column, entry.value?).ok()?;
    }
    Some(section)
}

impl ReplicaCheckReport {
    /// Checks unique index `index` of `table`: `rows` are the table's
    /// rows and `hidden_rows` its hidden table's, each with its partition
    /// (from the reference replica of every partition), placed by
    /// `bucket_partitions` (the table's map).
    pub fn check_unique_index(
        &mut self,
        table: &TableDef,
        index: &IndexDef,
        (rows, hidden_rows): (&[PlacedRow], &[PlacedRow]),
        bucket_partitions: &[u32],
    ) {
        let Some(hidden) = table.unique_index_table(index) else {
            return;
        };
        let mut record = |table_id, partition, row_id, problem| {
            self.record(Mismatch {
                table_id,
                partition,
                row_id,
                kind: MismatchKind::Unique {
                    index: index.id,
                    problem,
                },
            })
        };
        // Index values -> the primary key of the row holding them.
        let mut expected: BTreeMap<Vec<Vec<u8>>, Vec<Vec<u8>>> = BTreeMap::new();
        let mut first_holder = BTreeMap::new();
        for (partition, row) in rows {
            let Some(key) = key_of(table, &index.columns, row) else {
                continue;
            };
            let primary = key_of(table, &table.primary_key, row).unwrap_or_default();
            // A repeated value: the first row keeps it (its hidden row is
            // the right one), the second is reported.
            if expected.contains_key(&key) {
                record(table.id, *partition, row.row_id, UniqueProblem::Repeated);
                continue;
            }
            expected.insert(key.clone(), primary);
            first_holder.insert(key, (*partition, row.row_id));
        }
        let hidden_key: Vec<u16> = hidden.primary_key.clone();
        let hidden_primary: Vec<u16> =
            (hidden_key.len() as u16..hidden.columns.len() as u16).collect();
        let mut found = std::collections::BTreeSet::new();
        for (partition, row) in hidden_rows {
            let placed = key_section(&hidden_key, row)
                .and_then(|key| key_hash(&hidden, &key).ok())
                .and_then(|hash| bucket_partitions.get(bucket(hash) as usize));
            if placed != Some(partition) {
                record(hidden.id, *partition, row.row_id, UniqueProblem::Misplaced);
                continue;
            }
            let key = key_of(&hidden, &hidden_key, row);
            let primary = key_of(&hidden, &hidden_primary, row);
            let names_its_row = match (&key, &primary) {
                (Some(key), Some(primary)) => expected.get(key) == Some(primary),
                _ => false,
            };
            if names_its_row && found.insert(key.clone()) {
                continue;
            }
            record(
                hidden.id,
                *partition,
                row.row_id,
                UniqueProblem::ExtraHiddenRow,
            );
        }
        for (key, (partition, row_id)) in first_holder {
            if !found.contains(&Some(key)) {
                record(table.id, partition, row_id, UniqueProblem::MissingHiddenRow);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::AttrWriter;
    use crate::schema::{ColumnDef, ColumnType, UniqueTable};
    use crate::Gci;

    fn table() -> TableDef {
        TableDef {
            id: 1,
            version: 1,
            name: "t".into(),
            columns: vec![
                ColumnDef::new("k", ColumnType::Int { unsigned: false }, false),
                ColumnDef::new("e", ColumnType::VarChar(8), true),
            ],
            primary_key: vec![0],
            partitions: 1,
            indexes: vec![IndexDef {
                id: 1,
                name: "by_e".into(),
                columns: vec![1],
                unique: Some(UniqueTable {
                    table_id: 2,
                    table_version: 1,
                }),
            }],
            revision: 1,
            partition_key: Vec::new(),
        }
    }

    fn row(row_id: u32, entries: &[(u16, Option<&[u8]>)]) -> (u32, ScanRow) {
        let mut values = vec![0; 64];
        let mut writer = AttrWriter::new(&mut values);
        for &(column, value) in entries {
            writer.push(column, value).unwrap();
        }
        let used = writer.len();
        values.truncate(used);
        let gci = Gci(1);
        (
            0,
            ScanRow {
                row_id,
                gci,
                values,
            },
        )
    }

    fn problems(
        rows: &[(u32, ScanRow)],
        hidden: &[(u32, ScanRow)],
    ) -> Vec<(u32, u32, UniqueProblem)> {
        let table = table();
        let mut report = ReplicaCheckReport::new();
        // One partition: every row is where its key hashes to.
        let one_partition = vec![0; crate::partition::BUCKETS as usize];
        report.check_unique_index(&table, &table.indexes[0], (rows, hidden), &one_partition);
        report
            .details
            .iter()
            .map(|mismatch| match mismatch.kind {
                MismatchKind::Unique { problem, .. } => {
                    (mismatch.table_id, mismatch.row_id, problem)
                }
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_unique_index_must_name_each_row_with_values_once() {
        let one = 1i32.to_le_bytes();
        let two = 2i32.to_le_bytes();
        let rows = [
            row(10, &[(0, Some(&one)), (1, Some(b"ann"))]),
            row(11, &[(0, Some(&two)), (1, None)]),
        ];
        // Trailing spaces: the same key.
        let good = [row(5, &[(0, Some(b"ann  ")), (1, Some(&one))])];
        assert_eq!(problems(&rows, &good), vec![]);
        assert_eq!(
            problems(&rows, &[]),
            vec![(1, 10, UniqueProblem::MissingHiddenRow)]
        );
        let wrong_row = [row(5, &[(0, Some(b"ann")), (1, Some(&two))])];
        assert_eq!(
            problems(&rows, &wrong_row),
            vec![
                (2, 5, UniqueProblem::ExtraHiddenRow),
                (1, 10, UniqueProblem::MissingHiddenRow)
            ]
        );
        let twice = [
            good[0].clone(),
            row(6, &[(0, Some(b"ann")), (1, Some(&one))]),
        ];
        assert_eq!(
            problems(&rows, &twice),
            vec![(2, 6, UniqueProblem::ExtraHiddenRow)]
        );
        let repeated = [
            rows[0].clone(),
            row(12, &[(0, Some(&two)), (1, Some(b"ann"))]),
        ];
        assert_eq!(
            problems(&repeated, &good),
            vec![(1, 12, UniqueProblem::Repeated)]
        );
        // A hidden row in a partition its key does not hash to.
        let mut misplaced = good.clone();
        misplaced[0].0 = 1;
        assert_eq!(
            problems(&rows, &misplaced),
            vec![
                (2, 5, UniqueProblem::Misplaced),
                (1, 10, UniqueProblem::MissingHiddenRow)
            ]
        );
    }
}
