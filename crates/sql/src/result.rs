//! What a statement gives back: an OK with counts, or rows with their
//! columns' descriptions. The SQL node's connection encodes them in the
//! text or binary protocol; this crate knows no wire format.

use crate::catalog::{SqlColumn, SqlTable};
use client::{ColumnType, Value};

/// A result column's type, as the wire protocol describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnKind {
    /// A 32-bit integer (MySQL's INT: LONG on the wire).
    Int {
        /// UNSIGNED.
        unsigned: bool,
    },
    /// A 64-bit integer (LONGLONG).
    BigInt {
        /// UNSIGNED.
        unsigned: bool,
    },
    /// A double.
    Double,
    /// An exact number sent as text (MySQL's DECIMAL: what SUM of
    /// integers is).
    Decimal,
    /// Fixed-length text of at most n bytes (CHAR: STRING on the wire).
    Char(u32),
    /// Text of at most n bytes (VAR_STRING).
    Text(u32),
    /// Bytes of at most n (VAR_STRING, binary character set).
    Binary(u32),
    /// Always NULL.
    Null,
}

impl ColumnKind {
    /// The kind of a cluster column type.
    pub fn of(column_type: ColumnType) -> ColumnKind {
        match column_type {
            ColumnType::Int { unsigned } => ColumnKind::Int { unsigned },
            ColumnType::BigInt { unsigned } => ColumnKind::BigInt { unsigned },
            ColumnType::Double => ColumnKind::Double,
            ColumnType::Char(n) => ColumnKind::Char(n as u32),
            ColumnType::VarChar(n) => ColumnKind::Text(n as u32),
            ColumnType::VarBinary(n) => ColumnKind::Binary(n as u32),
        }
    }
}

/// A result column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputColumn {
    /// Its name (the alias if any).
    pub name: String,
    /// The column it comes from, if any.
    pub org_name: String,
    /// The table it comes from (empty when computed).
    pub table: String,
    /// The database it comes from.
    pub database: String,
    /// Its type.
    pub kind: ColumnKind,
    /// NOT NULL.
    pub not_null: bool,
    /// Part of the primary key.
    pub primary_key: bool,
    /// AUTO_INCREMENT.
    pub auto_increment: bool,
}

impl OutputColumn {
    /// A column of `table`.
    pub fn of_column(table: &SqlTable, column: &SqlColumn) -> OutputColumn {
        let index = table.column_index(&column.name).unwrap_or(0);
        OutputColumn {
            name: column.name.clone(),
            org_name: column.name.clone(),
            table: table.name.clone(),
            database: table.database.clone(),
            kind: ColumnKind::of(column.column_type),
            not_null: !column.nullable,
            primary_key: table.def().primary_key.contains(&(index as u16)),
            auto_increment: column.auto_increment,
        }
    }

    /// A computed column.
    pub fn computed(name: &str, kind: ColumnKind) -> OutputColumn {
        OutputColumn {
            name: name.to_string(),
            org_name: String::new(),
            table: String::new(),
            database: String::new(),
            kind,
            not_null: false,
            primary_key: false,
            auto_increment: false,
        }
    }

    /// A text column of SHOW output.
    pub fn text(name: &str) -> OutputColumn {
        OutputColumn::computed(name, ColumnKind::Text(1024))
    }
}

/// A statement's result.
#[derive(Clone, Debug, PartialEq)]
pub enum Response {
    /// Done, with counts.
    Ok {
        /// Rows changed (what MySQL reports as affected without
        /// CLIENT_FOUND_ROWS).
        affected_rows: u64,
        /// Rows an UPDATE matched (affected with CLIENT_FOUND_ROWS).
        matched_rows: u64,
        /// The AUTO_INCREMENT value the statement generated first (0: none).
        last_insert_id: u64,
        /// MySQL's info text ("Rows matched: 1  Changed: 1  Warnings: 0").
        info: String,
    },
    /// Rows.
    Rows {
        /// The columns (shared with the plan: not copied per statement).
        columns: std::sync::Arc<[OutputColumn]>,
        /// The rows, each a value per column.
        rows: Vec<Vec<Value>>,
    },
}

impl Response {
    /// An OK that changed nothing.
    pub fn ok() -> Response {
        Response::affected(0)
    }

    /// An OK that changed `rows` rows.
    pub fn affected(rows: u64) -> Response {
        Response::Ok {
            affected_rows: rows,
            matched_rows: rows,
            last_insert_id: 0,
            info: String::new(),
        }
    }

    /// Rows of text columns named `names`.
    pub fn text_rows(names: &[&str], rows: Vec<Vec<Value>>) -> Response {
        Response::Rows {
            columns: names
                .iter()
                .map(|name| OutputColumn::text(name))
                .collect::<Vec<_>>()
                .into(),
            rows,
        }
    }
}
