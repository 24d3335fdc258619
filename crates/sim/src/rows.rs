//! The bank table, its rows as the client reads them, and the same rows in
//! the attribute encoding (signal::attr) for the scripted scenarios' raw
//! TCKEYREQ sections and TRANSID_AI rows.
//!
//! ```text
//! bank: id INT UNSIGNED (key) | balance BIGINT | writer BIGINT UNSIGNED | note VARCHAR(100) NULL
//! ```
//! `writer` holds the id of the transaction that last wrote the row, so a
//! reader knows whose write it saw (the checker in `ledger` builds on it);
//! `note` has a random length so that updates move var parts between size
//! classes.

use signal::attr::{AttrIter, AttrWriter};
use signal::schema::{ColumnDef, ColumnType, IndexDef, TableDef};
use signal::{Section, SectionPool};

/// Column ids.
pub const ID: u16 = 0;
/// See [`ID`].
pub const BALANCE: u16 = 1;
/// See [`ID`].
pub const WRITER: u16 = 2;
/// See [`ID`].
pub const NOTE: u16 = 3;

/// Longest note.
pub const NOTE_MAX_BYTES: usize = 100;

/// The table definition a create request carries (dict assigns id,
/// version and partitions).
pub fn bank_table() -> TableDef {
    let column = |name: &str, column_type, nullable| ColumnDef {
        name: name.into(),
        column_type,
        nullable,
    };
    // Two ordered indexes besides the primary key's, so that every
    // workload over the bank (chaos, crashes, restarts) keeps them through
    // its updates, restores and copies, and every check compares them
    // with the rows: balances move in the first at every transfer.
    let index = |id: u32, name: &str, columns: Vec<u16>| IndexDef {
        id,
        name: name.into(),
        columns,
        unique: None,
    };
    TableDef {
        indexes: vec![
            index(1, "by_balance", vec![BALANCE]),
            index(2, "by_writer_note", vec![WRITER, NOTE]),
        ],
        revision: 0,
        id: 0,
        version: 0,
        name: "bank".into(),
        columns: vec![
            column("id", ColumnType::Int { unsigned: true }, false),
            column("balance", ColumnType::BigInt { unsigned: false }, false),
            column("writer", ColumnType::BigInt { unsigned: true }, false),
            column("note", ColumnType::VarChar(NOTE_MAX_BYTES as u16), true),
        ],
        primary_key: vec![ID],
        partitions: 0,
        partition_key: Vec::new(),
    }
}

/// A row as read back.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Row {
    /// Key.
    pub id: u32,
    /// Balance.
    pub balance: i64,
    /// Transaction id of the last writer.
    pub writer: u64,
    /// The note (`None`: NULL).
    pub note: Option<Vec<u8>>,
}

fn section(pool: &'static SectionPool, bytes: &[u8]) -> Section {
    pool.copy_from(bytes)
        .expect("the simulated node's section pool is sized for the workload")
}

/// Bytes of a key in the attribute encoding.
const KEY_BYTES: usize = 8;

/// The key of row `id` in the attribute encoding (what a key section holds).
pub fn key_bytes(id: u32) -> [u8; KEY_BYTES] {
    let mut buffer = [0u8; KEY_BYTES];
    let mut writer = AttrWriter::new(&mut buffer);
    writer
        .push(ID, Some(&id.to_le_bytes()))
        .expect("an INT key fits 8 bytes");
    assert_eq!(writer.len(), KEY_BYTES, "an INT key takes 8 bytes");
    buffer
}

/// The key section of row `id`.
pub fn key_section(pool: &'static SectionPool, id: u32) -> Section {
    section(pool, &key_bytes(id))
}

/// The attribute section that sets every non-key column.
pub fn values_section(
    pool: &'static SectionPool,
    balance: i64,
    writer_id: u64,
    note: Option<&[u8]>,
) -> Section {
    let mut buffer = [0u8; 3 * 4 + 16 + NOTE_MAX_BYTES];
    let mut writer = AttrWriter::new(&mut buffer);
    let fits = "the buffer holds every column at its largest";
    writer
        .push(BALANCE, Some(&balance.to_le_bytes()))
        .expect(fits);
    writer
        .push(WRITER, Some(&writer_id.to_le_bytes()))
        .expect(fits);
    writer.push(NOTE, note).expect(fits);
    let used = writer.len();
    section(pool, &buffer[..used])
}

/// Decodes a full row (a read with no projection returns every column in order).
pub fn decode_row(data: &[u8]) -> Result<Row, String> {
    let mut id = None;
    let mut balance = None;
    let mut writer = None;
    let mut note = None;
    let mut seen = 0;
    for entry in AttrIter::new(data) {
        let entry = entry.map_err(|error| format!("undecodable row: {error}"))?;
        seen += 1;
        let fixed = |value: Option<&[u8]>, width: usize| -> Result<[u8; 8], String> {
            let value = value.ok_or_else(|| format!("column {} is NULL", entry.column))?;
            if value.len() != width {
                return Err(format!(
                    "column {} has {} bytes, not {width}",
                    entry.column,
                    value.len()
                ));
            }
            let mut bytes = [0u8; 8];
            bytes[..width].copy_from_slice(value);
            Ok(bytes)
        };
        match entry.column {
            ID => {
                let bytes = fixed(entry.value, 4)?;
                id = Some(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]));
            }
            BALANCE => balance = Some(i64::from_le_bytes(fixed(entry.value, 8)?)),
            WRITER => writer = Some(u64::from_le_bytes(fixed(entry.value, 8)?)),
            NOTE => note = Some(entry.value.map(<[u8]>::to_vec)),
            other => return Err(format!("unknown column {other} in a row")),
        }
    }
    match (id, balance, writer, note) {
        (Some(id), Some(balance), Some(writer), Some(note)) if seen == 4 => Ok(Row {
            id,
            balance,
            writer,
            note,
        }),
        _ => Err(format!("a row with {seen} columns, not the 4 of the table")),
    }
}

/// A row as the client read it.
pub fn from_client(row: &client::Row) -> Result<Row, String> {
    use client::Value;
    let id = row.get(ID).and_then(Value::as_u64);
    let balance = row.get(BALANCE).and_then(Value::as_i64);
    let writer = row.get(WRITER).and_then(Value::as_u64);
    let note = row
        .get(NOTE)
        .map(|note| note.as_bytes().map(<[u8]>::to_vec));
    match (id, balance, writer, note) {
        (Some(id), Some(balance), Some(writer), Some(note)) => Ok(Row {
            id: u32::try_from(id).map_err(|_| format!("key {id} is not a bank key"))?,
            balance,
            writer,
            note,
        }),
        _ => Err(format!("a row that is not a bank row: {row:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_written_as_sections_decodes_back() {
        let pool = SectionPool::leak([8, 8, 1, 1, 1, 1]);
        let key = key_section(pool, 7);
        let values = values_section(pool, -5, 9, Some(b"hello"));
        let mut row = key.as_slice().to_vec();
        row.extend_from_slice(values.as_slice());
        assert_eq!(
            decode_row(&row),
            Ok(Row {
                id: 7,
                balance: -5,
                writer: 9,
                note: Some(b"hello".to_vec())
            })
        );
        assert!(bank_table().validate().is_ok());
        assert!(decode_row(key.as_slice()).is_err());
    }
}
