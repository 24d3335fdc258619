//! What a statement gives back: an OK with counts, or rows with their
//! columns' descriptions. The SQL node's connection encodes them in the
//! text or binary protocol; this crate knows no wire format.

use crate::catalog::{SqlColumn, SqlTable};
use crate::types::SqlType;
use crate::value::Value;

/// A result column's type, as the wire protocol describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ColumnKind {
    /// An integer of 1, 2, 3 or 4 bytes (TINY, SHORT, INT24, LONG).
    Int {
        /// Its width in bytes.
        bytes: u8,
        /// UNSIGNED.
        unsigned: bool,
    },
    /// A 64-bit integer (LONGLONG).
    BigInt {
        /// UNSIGNED.
        unsigned: bool,
    },
    /// A single-precision float (FLOAT).
    Float,
    /// A double.
    Double,
    /// An exact number sent as text (NEWDECIMAL), with its precision
    /// and scale when known (what SUM of integers is: precision 65,
    /// scale 0).
    Decimal {
        /// Digits in all.
        precision: u8,
        /// Digits after the point.
        scale: u8,
    },
    /// DATE.
    Date,
    /// DATETIME with its fractional digits.
    DateTime(u8),
    /// TIMESTAMP with its fractional digits.
    Timestamp(u8),
    /// TIME with its fractional digits.
    Time(u8),
    /// YEAR.
    Year,
    /// Fixed-length text of at most n bytes (CHAR: STRING on the wire).
    Char(u32),
    /// Text of at most n bytes (VAR_STRING).
    Text(u32),
    /// TEXT: text of at most n bytes (BLOB on the wire, a text charset).
    LongText(u32),
    /// Bytes of at most n (VAR_STRING, binary character set).
    Binary(u32),
    /// BLOB: bytes of at most n (BLOB on the wire, binary charset).
    Blob(u32),
    /// ENUM: text (STRING with the ENUM flag), at most n bytes.
    Enum(u32),
    /// JSON: a document's normalized text (JSON on the wire, with the
    /// binary character set, as MySQL sends it).
    Json,
    /// Always NULL.
    Null,
}

impl ColumnKind {
    /// The type of a UNION's column whose SELECTs give `self` and
    /// `other`, as MySQL aggregates types, simplified: integers of one
    /// signedness give the wider, of both a DECIMAL(20); exact numbers a
    /// DECIMAL; numbers with a FLOAT or DOUBLE a DOUBLE; anything else
    /// text wide enough for either's text.
    pub fn unite(self, other: ColumnKind) -> ColumnKind {
        use ColumnKind::*;
        let integer = |kind: &ColumnKind| match kind {
            Int { unsigned, .. } | BigInt { unsigned } => Some(*unsigned),
            Year => Some(true),
            _ => None,
        };
        let exact = |kind: &ColumnKind| integer(kind).is_some() || matches!(kind, Decimal { .. });
        let number = |kind: &ColumnKind| exact(kind) || matches!(kind, Float | Double);
        let scale = |kind: &ColumnKind| match kind {
            Decimal { scale, .. } => *scale,
            _ => 0,
        };
        match (self, other) {
            (a, b) if a == b => a,
            (Null, kind) | (kind, Null) => kind,
            (
                Int { bytes: a, unsigned },
                Int {
                    bytes: b,
                    unsigned: other_unsigned,
                },
            ) if unsigned == other_unsigned => Int {
                bytes: a.max(b),
                unsigned,
            },
            (a, b) if integer(&a).is_some() && integer(&a) == integer(&b) => BigInt {
                unsigned: integer(&a) == Some(true),
            },
            (a, b) if integer(&a).is_some() && integer(&b).is_some() => Decimal {
                precision: 20,
                scale: 0,
            },
            (a, b) if exact(&a) && exact(&b) => Decimal {
                precision: 65,
                scale: scale(&a).max(scale(&b)),
            },
            (a, b) if number(&a) && number(&b) => Double,
            (a, b) => {
                let width = a.text_width().max(b.text_width());
                match (a, b) {
                    (LongText(_) | Blob(_) | Json, _) | (_, LongText(_) | Blob(_) | Json) => {
                        LongText(width)
                    }
                    _ => Text(width),
                }
            }
        }
    }

    /// Appends the text form of `value` in a column of this kind (`false`
    /// for NULL, which the protocol marks apart): a DECIMAL column's
    /// value shows the column's digits after the point, as MySQL's does
    /// (`CASE WHEN a THEN price ELSE 0 END` gives `0.00`).
    pub fn write_text(&self, value: &Value, out: &mut Vec<u8>) -> bool {
        if let ColumnKind::Decimal { scale, .. } = *self {
            let exact = match value {
                Value::Int(x) => crate::decimal::Decimal::from_integer(*x as i128),
                Value::UInt(x) => crate::decimal::Decimal::from_integer(*x as i128),
                Value::Decimal(x) => Some(*x),
                _ => None,
            };
            // Only ever more digits: a value is never rounded here.
            if let Some(padded) = exact
                .filter(|x| x.scale() < scale)
                .and_then(|x| x.rescale(scale))
            {
                return crate::value::write_text(&Value::Decimal(padded), out);
            }
        }
        crate::value::write_text(value, out)
    }

    /// The SQL type a derived table's column of this kind reads as.
    pub fn sql_type(&self) -> SqlType {
        let length = |n: u32| n.min(u16::MAX as u32) as u16;
        match self {
            ColumnKind::Int { bytes, unsigned } => SqlType::Integer {
                bytes: *bytes,
                unsigned: *unsigned,
            },
            ColumnKind::BigInt { unsigned } => SqlType::Integer {
                bytes: 8,
                unsigned: *unsigned,
            },
            ColumnKind::Float => SqlType::Float,
            ColumnKind::Double => SqlType::Double,
            ColumnKind::Decimal { precision, scale } => SqlType::Decimal {
                precision: *precision,
                scale: *scale,
            },
            ColumnKind::Date => SqlType::Date,
            ColumnKind::DateTime(fsp) => SqlType::DateTime { fsp: *fsp },
            ColumnKind::Timestamp(fsp) => SqlType::Timestamp { fsp: *fsp },
            ColumnKind::Time(fsp) => SqlType::Time { fsp: *fsp },
            ColumnKind::Year => SqlType::Year,
            ColumnKind::Char(n) => SqlType::Char(length(*n)),
            ColumnKind::Text(n) | ColumnKind::Enum(n) => SqlType::VarChar(length(*n)),
            ColumnKind::LongText(n) => SqlType::Text(length(*n)),
            ColumnKind::Binary(n) => SqlType::VarBinary(length(*n)),
            ColumnKind::Blob(n) => SqlType::Blob(length(*n)),
            ColumnKind::Json => SqlType::Json(u16::MAX),
            ColumnKind::Null => SqlType::VarChar(0),
        }
    }

    /// The most characters a value of this kind shows as text.
    fn text_width(&self) -> u32 {
        match self {
            ColumnKind::Int { .. } | ColumnKind::BigInt { .. } => 20,
            ColumnKind::Float | ColumnKind::Double => 23,
            ColumnKind::Decimal { precision, .. } => *precision as u32 + 2,
            ColumnKind::Date => 10,
            ColumnKind::DateTime(_) | ColumnKind::Timestamp(_) => 26,
            ColumnKind::Time(_) => 17,
            ColumnKind::Year => 4,
            ColumnKind::Char(n)
            | ColumnKind::Text(n)
            | ColumnKind::LongText(n)
            | ColumnKind::Binary(n)
            | ColumnKind::Blob(n)
            | ColumnKind::Enum(n) => *n,
            ColumnKind::Json => u16::MAX as u32,
            ColumnKind::Null => 0,
        }
    }

    /// A DECIMAL of unknown precision (a sum, an average).
    #[allow(non_upper_case_globals)]
    pub const Decimal: ColumnKind = ColumnKind::Decimal {
        precision: 65,
        scale: 0,
    };

    /// The kind of a SQL column type.
    pub fn of(sql_type: &SqlType) -> ColumnKind {
        match sql_type {
            SqlType::Integer { bytes: 8, unsigned } => ColumnKind::BigInt {
                unsigned: *unsigned,
            },
            SqlType::Integer { bytes, unsigned } => ColumnKind::Int {
                bytes: *bytes,
                unsigned: *unsigned,
            },
            SqlType::Float => ColumnKind::Float,
            SqlType::Double => ColumnKind::Double,
            SqlType::Decimal { precision, scale } => ColumnKind::Decimal {
                precision: *precision,
                scale: *scale,
            },
            SqlType::Date => ColumnKind::Date,
            SqlType::DateTime { fsp } => ColumnKind::DateTime(*fsp),
            SqlType::Timestamp { fsp } => ColumnKind::Timestamp(*fsp),
            SqlType::Time { fsp } => ColumnKind::Time(*fsp),
            SqlType::Year => ColumnKind::Year,
            SqlType::Char(n) => ColumnKind::Char(*n as u32),
            SqlType::VarChar(n) => ColumnKind::Text(*n as u32),
            SqlType::Text(n) => ColumnKind::LongText(*n as u32),
            SqlType::VarBinary(n) => ColumnKind::Binary(*n as u32),
            SqlType::Blob(n) => ColumnKind::Blob(*n as u32),
            SqlType::Enum(members) => {
                ColumnKind::Enum(members.iter().map(|m| m.len()).max().unwrap_or(1) as u32)
            }
            SqlType::Json(_) => ColumnKind::Json,
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
            kind: ColumnKind::of(&column.sql_type),
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

    /// This column as a UNION's, whose later SELECT gives `other` in its
    /// place: the first SELECT's name, a type that holds both (as
    /// [`ColumnKind::unite`]), NOT NULL only if both are.
    pub fn unite(&mut self, other: &OutputColumn) {
        self.kind = self.kind.clone().unite(other.kind.clone());
        self.not_null &= other.not_null;
        self.primary_key = false;
        self.auto_increment = false;
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
