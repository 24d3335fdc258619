//! The keylookup table's rows: what a writer stores and how a reader checks
//! it, whatever mix of writes produced the row.
//!
//! ```text
//! k INT UNSIGNED (key) | round BIGINT UNSIGNED | c0 .. c(N-1) INT UNSIGNED
//! c_i = fmix64(fmix64(round ^ k * K1) ^ (i + 1) * K2) as u32
//! ```
//! Every write takes a fresh round, unique across processes (a random
//! 32-bit process tag above a 32-bit counter), so a row names the write
//! that produced it and updates stay blind writes; every other value is a
//! function of key and round, so a reader checks a row without knowing
//! which write it should see. A torn row (columns from two writes), a row
//! under the wrong key or a lost column all fail.

use client::{ColumnDef, ColumnType, IndexDef, Row, TableDef, Value};
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU32, Ordering};
use stdx::mix::fmix64;

/// Column id of the key.
pub(crate) const KEY_COLUMN: u16 = 0;
/// Column id of the round.
pub(crate) const ROUND_COLUMN: u16 = 1;
/// Column id of c0.
pub(crate) const FIRST_VALUE_COLUMN: u16 = 2;

/// The table definition for `columns` value columns.
pub(crate) fn table_definition(name: &str, columns: u32) -> TableDef {
    let column = |name: String, column_type| ColumnDef {
        name,
        column_type,
        nullable: false,
    };
    let int = ColumnType::Int { unsigned: true };
    let mut definition = TableDef {
        indexes: Vec::new(),
        revision: 0,
        id: 0,
        version: 0,
        name: name.to_string(),
        partitions: 0,
        primary_key: vec![KEY_COLUMN],
        columns: vec![
            column("k".into(), int),
            column("round".into(), ColumnType::BigInt { unsigned: true }),
        ],
        partition_key: Vec::new(),
    };
    definition
        .columns
        .extend((0..columns).map(|index| column(format!("c{index}"), int)));
    definition
}

/// `count` ordered indexes, one on each of c0, c1, ... (named `by_c0`...).
pub(crate) fn value_indexes(count: u32) -> Vec<IndexDef> {
    (0..count)
        .map(|index| IndexDef {
            id: index + 1,
            name: format!("by_c{index}"),
            columns: vec![FIRST_VALUE_COLUMN + index as u16],
            unique: None,
        })
        .collect()
}

/// Whether an existing table has the shape keylookup needs (ids, versions
/// and partitions may differ).
pub(crate) fn same_shape(existing: &TableDef, wanted: &TableDef) -> bool {
    existing.columns == wanted.columns && existing.primary_key == wanted.primary_key
}

/// The number of value columns of an existing keylookup table, or `None`
/// if the table does not have a keylookup table's shape.
pub(crate) fn value_columns_of(existing: &TableDef) -> Option<u32> {
    let columns = u32::try_from(existing.columns.len().checked_sub(2)?).ok()?;
    same_shape(existing, &table_definition(&existing.name, columns)).then_some(columns)
}

/// The value of column c`index` in the row of `key` written in `round`.
pub(crate) fn column_value(key: u32, round: u64, index: u32) -> u32 {
    column_value_of(row_mix(key, round), index)
}

/// The part of every column value that depends on the row only (computed
/// once per row when checking all of its columns).
fn row_mix(key: u32, round: u64) -> u64 {
    fmix64(round ^ (key as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F))
}

/// Column c`index`'s value given the row's [`row_mix`].
fn column_value_of(row_mix: u64, index: u32) -> u32 {
    fmix64(row_mix ^ (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)) as u32
}

/// The whole row of `key` written in `round`, by column id.
pub(crate) fn row_values(key: u32, round: u64, columns: u32) -> Vec<(u16, Value)> {
    let mut values = Vec::with_capacity(columns as usize + 2);
    values.push((KEY_COLUMN, Value::UInt(key as u64)));
    values.push((ROUND_COLUMN, Value::UInt(round)));
    values.extend((0..columns).map(|index| {
        (
            FIRST_VALUE_COLUMN + index as u16,
            Value::UInt(column_value(key, round, index) as u64),
        )
    }));
    values
}

/// Checks a row read for `key` and returns its round; the error says what
/// is wrong.
pub(crate) fn verify(row: &Row, key: u32, columns: u32) -> Result<u64, String> {
    // Numbers straight from the row data, by column id (no values built).
    let read_key = row.get_u64(KEY_COLUMN);
    if read_key != Some(key as u64) {
        return Err(format!("key {key}: row holds k = {read_key:?}"));
    }
    let Some(round) = row.get_u64(ROUND_COLUMN) else {
        return Err(format!("key {key}: round is {:?}", row.get(ROUND_COLUMN)));
    };
    let row_mix = row_mix(key, round);
    for index in 0..columns {
        let expected = column_value_of(row_mix, index) as u64;
        let found = row.get_u64(FIRST_VALUE_COLUMN + index as u16);
        if found != Some(expected) {
            return Err(format!(
                "key {key} round {round:#x}: c{index} = {found:?}, expected {expected}"
            ));
        }
    }
    Ok(round)
}

/// Hands out round numbers: a random 32-bit tag per process (never 0, so
/// no round is 0) above a 32-bit counter, so that benchmark processes
/// writing one table choose different rounds (two processes share a tag
/// with odds of 1 in 4 billion) and a process writes 2^32 rows before a
/// round repeats.
pub(crate) struct Rounds {
    tag: u64,
    counter: AtomicU32,
}

impl Rounds {
    pub(crate) fn new() -> Rounds {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        if let Ok(since_epoch) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)
        {
            hasher.write_u128(since_epoch.as_nanos());
        }
        let tag = (hasher.finish() as u32).max(1);
        Rounds {
            tag: u64::from(tag) << 32,
            counter: AtomicU32::new(0),
        }
    }

    pub(crate) fn next(&self) -> u64 {
        self.tag | u64::from(self.counter.fetch_add(1, Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use client::Table;
    use std::sync::Arc;

    fn table(columns: u32) -> Arc<Table> {
        let mut definition = table_definition("keylookup", columns);
        definition.id = 1;
        definition.version = 1;
        Arc::new(Table::new(definition))
    }

    fn encoded_row(table: &Arc<Table>, values: &[(u16, Value)]) -> Row {
        let mut attr = Vec::new();
        let mut key = Vec::new();
        table
            .encode_row(values, &mut attr, Some(&mut key))
            .expect("row fits the table");
        Table::decode_row(table, &attr).expect("decodes")
    }

    #[test]
    fn a_written_row_verifies_and_any_change_is_caught() {
        let table = table(25);
        assert!(table.def().validate().is_ok());
        let values = row_values(42, 0x0300_0007_0000_0001, 25);
        assert_eq!(values.len(), 27);
        let row = encoded_row(&table, &values);
        assert_eq!(verify(&row, 42, 25), Ok(0x0300_0007_0000_0001));
        assert!(verify(&row, 43, 25).is_err(), "wrong key");

        let mut torn = values.clone();
        torn[10].1 = row_values(42, 0x0300_0007_0000_0002, 25)[10].1.clone();
        let error = verify(&encoded_row(&table, &torn), 42, 25).unwrap_err();
        assert!(error.contains("c8"), "{error}");

        let mut other_round = values;
        other_round[1].1 = Value::UInt(0x0300_0007_0000_0002);
        assert!(verify(&encoded_row(&table, &other_round), 42, 25).is_err());
    }

    #[test]
    fn rounds_are_distinct_and_shapes_compare_without_ids() {
        let rounds = Rounds::new();
        let first = rounds.next();
        let second = rounds.next();
        assert_ne!(first, second);
        assert_eq!(first >> 32, second >> 32, "one tag per process");
        assert_ne!(first >> 32, 0);
        assert_ne!(
            Rounds::new().next() >> 32,
            first >> 32,
            "tags differ (1 in 2^32 to collide)"
        );
        let wanted = table_definition("keylookup", 25);
        let mut stored = wanted.clone();
        stored.id = 9;
        stored.version = 4;
        stored.partitions = 8;
        assert!(same_shape(&stored, &wanted));
        assert!(!same_shape(&table_definition("keylookup", 24), &wanted));
        assert_eq!(value_columns_of(&stored), Some(25));
        let mut other = stored.clone();
        other.columns[1].column_type = ColumnType::Int { unsigned: true };
        assert_eq!(
            value_columns_of(&other),
            None,
            "a 32-bit round is another shape"
        );
        other.columns.truncate(1);
        assert_eq!(value_columns_of(&other), None);
        assert_ne!(column_value(1, 2, 0), column_value(1, 2, 1));
        assert_ne!(column_value(1, 2, 0), column_value(2, 1, 0));
    }
}
