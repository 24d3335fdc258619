//! Table schema: column types, table definitions, their validation and their
//! binary encoding (carried in sections by CREATE_TAB_REQ and GET_TABINFO_CONF).
//!
//! `dict` owns the schema; this module only describes it, so that tc, ldm and
//! the client agree on what a table looks like.

use crate::codec::{Reader, Writer};
use std::fmt;

/// Largest CHAR(n).
pub const MAX_CHAR_BYTES: u16 = 255;
/// Largest VARCHAR(n) / VARBINARY(n).
pub const MAX_VAR_BYTES: u16 = 16_000;
/// Most columns in one table.
pub const MAX_COLUMNS: usize = 256;
/// Largest sum of column widths in one row (fixed + variable).
pub const MAX_ROW_BYTES: usize = 24_000;
/// Longest table or column name.
pub const MAX_NAME_BYTES: usize = 64;

/// The type of a column.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ColumnType {
    /// 32-bit integer.
    Int {
        /// UNSIGNED.
        unsigned: bool,
    },
    /// 64-bit integer.
    BigInt {
        /// UNSIGNED.
        unsigned: bool,
    },
    /// IEEE 754 double.
    Double,
    /// Fixed-length bytes, stored with trailing spaces removed (MySQL's CHAR).
    Char(u16),
    /// Variable-length text up to n bytes; compares ignoring trailing spaces.
    VarChar(u16),
    /// Variable-length bytes up to n bytes; compares exactly.
    VarBinary(u16),
}

impl ColumnType {
    /// Bytes of the column's storage when fixed-size (`None` for variable).
    pub fn fixed_width(self) -> Option<usize> {
        match self {
            ColumnType::Int { .. } => Some(4),
            ColumnType::BigInt { .. } | ColumnType::Double => Some(8),
            // CHAR stores its length (1 byte) and up to n bytes.
            ColumnType::Char(n) => Some(1 + n as usize),
            ColumnType::VarChar(_) | ColumnType::VarBinary(_) => None,
        }
    }

    /// Largest value length in bytes.
    pub fn max_value_bytes(self) -> usize {
        match self {
            ColumnType::Int { .. } => 4,
            ColumnType::BigInt { .. } | ColumnType::Double => 8,
            ColumnType::Char(n) | ColumnType::VarChar(n) | ColumnType::VarBinary(n) => n as usize,
        }
    }

    /// Whether trailing spaces are insignificant in comparisons and hashing.
    pub fn pads_spaces(self) -> bool {
        matches!(self, ColumnType::Char(_) | ColumnType::VarChar(_))
    }

    fn code(self) -> (u8, u16) {
        match self {
            ColumnType::Int { unsigned: false } => (1, 0),
            ColumnType::Int { unsigned: true } => (2, 0),
            ColumnType::BigInt { unsigned: false } => (3, 0),
            ColumnType::BigInt { unsigned: true } => (4, 0),
            ColumnType::Double => (5, 0),
            ColumnType::Char(n) => (6, n),
            ColumnType::VarChar(n) => (7, n),
            ColumnType::VarBinary(n) => (8, n),
        }
    }

    fn from_code(code: u8, length: u16) -> Option<ColumnType> {
        Some(match code {
            1 => ColumnType::Int { unsigned: false },
            2 => ColumnType::Int { unsigned: true },
            3 => ColumnType::BigInt { unsigned: false },
            4 => ColumnType::BigInt { unsigned: true },
            5 => ColumnType::Double,
            6 => ColumnType::Char(length),
            7 => ColumnType::VarChar(length),
            8 => ColumnType::VarBinary(length),
            _ => return None,
        })
    }
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ColumnType::Int { unsigned: false } => write!(f, "INT"),
            ColumnType::Int { unsigned: true } => write!(f, "INT UNSIGNED"),
            ColumnType::BigInt { unsigned: false } => write!(f, "BIGINT"),
            ColumnType::BigInt { unsigned: true } => write!(f, "BIGINT UNSIGNED"),
            ColumnType::Double => write!(f, "DOUBLE"),
            ColumnType::Char(n) => write!(f, "CHAR({n})"),
            ColumnType::VarChar(n) => write!(f, "VARCHAR({n})"),
            ColumnType::VarBinary(n) => write!(f, "VARBINARY({n})"),
        }
    }
}

/// One column.
#[derive(Clone, PartialEq, Debug)]
pub struct ColumnDef {
    /// Name, unique in the table.
    pub name: String,
    /// Type.
    pub column_type: ColumnType,
    /// Whether NULL is allowed (never for key columns).
    pub nullable: bool,
}

impl ColumnDef {
    /// A column NOT NULL (`nullable` false) or NULL-able.
    ///
    /// ```
    /// use signal::schema::{ColumnDef, ColumnType};
    /// let v = ColumnDef::new("v", ColumnType::BigInt { unsigned: false }, false);
    /// assert_eq!(v.name, "v");
    /// ```
    pub fn new(name: &str, column_type: ColumnType, nullable: bool) -> ColumnDef {
        ColumnDef {
            name: name.to_string(),
            column_type,
            nullable,
        }
    }
}

/// A table as `dict` knows it.
///
/// ```
/// use signal::schema::{ColumnDef, ColumnType, TableDef};
/// let table = TableDef {
///     id: 0, version: 0, name: "t".into(), partitions: 0,
///     columns: vec![
///         ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: false }, nullable: false },
///         ColumnDef { name: "v".into(), column_type: ColumnType::VarChar(20), nullable: true },
///     ],
///     primary_key: vec![0],
/// };
/// assert!(table.validate().is_ok());
/// let bytes = table.encode_to_vec();
/// assert_eq!(TableDef::decode(&bytes).unwrap(), table);
/// ```
#[derive(Clone, PartialEq, Debug)]
pub struct TableDef {
    /// Table id (assigned by dict; reused after a drop, with a new version).
    pub id: u32,
    /// Version of this id: a client whose cached version differs is stale.
    pub version: u32,
    /// Name, unique in the cluster.
    pub name: String,
    /// Columns in order; a column's id is its index.
    pub columns: Vec<ColumnDef>,
    /// Column ids of the primary key, in key order.
    pub primary_key: Vec<u16>,
    /// Number of partitions (0 in a create request: dict picks the default).
    pub partitions: u32,
}

impl TableDef {
    /// Checks every rule a table must follow; the error says which one failed.
    pub fn validate(&self) -> Result<(), String> {
        validate_name("table name", &self.name)?;
        if self.columns.is_empty() {
            return Err("a table needs at least one column".into());
        }
        if self.columns.len() > MAX_COLUMNS {
            return Err(format!("a table has at most {MAX_COLUMNS} columns"));
        }
        let mut row_bytes = 0usize;
        for (index, column) in self.columns.iter().enumerate() {
            validate_name("column name", &column.name)?;
            if self.columns[..index]
                .iter()
                .any(|other| other.name.eq_ignore_ascii_case(&column.name))
            {
                return Err(format!("duplicate column name {:?}", column.name));
            }
            match column.column_type {
                ColumnType::Char(n) if n == 0 || n > MAX_CHAR_BYTES => {
                    return Err(format!(
                        "column {:?}: CHAR length must be 1..={MAX_CHAR_BYTES}",
                        column.name
                    ))
                }
                ColumnType::VarChar(n) | ColumnType::VarBinary(n)
                    if n == 0 || n > MAX_VAR_BYTES =>
                {
                    return Err(format!(
                        "column {:?}: VARCHAR/VARBINARY length must be 1..={MAX_VAR_BYTES}",
                        column.name
                    ))
                }
                _ => {}
            }
            row_bytes += column.column_type.max_value_bytes() + 2;
        }
        if row_bytes > MAX_ROW_BYTES {
            return Err(format!(
                "row too large: columns add up to {row_bytes} bytes, at most {MAX_ROW_BYTES}"
            ));
        }
        if self.primary_key.is_empty() {
            return Err("a table needs a primary key".into());
        }
        for (position, &column) in self.primary_key.iter().enumerate() {
            let Some(def) = self.columns.get(column as usize) else {
                return Err(format!(
                    "primary key names column id {column}, which does not exist"
                ));
            };
            if def.nullable {
                return Err(format!(
                    "primary key column {:?} must be NOT NULL",
                    def.name
                ));
            }
            if self.primary_key[..position].contains(&column) {
                return Err(format!("primary key names column {:?} twice", def.name));
            }
        }
        Ok(())
    }

    /// The column named `name` (case-insensitive), with its id.
    pub fn column(&self, name: &str) -> Option<(u16, &ColumnDef)> {
        self.columns
            .iter()
            .enumerate()
            .find(|(_, column)| column.name.eq_ignore_ascii_case(name))
            .map(|(index, column)| (index as u16, column))
    }

    /// Encodes into `writer` (format in docs/wire-format.md).
    pub fn encode(&self, writer: &mut Writer<'_>) {
        writer.u32(self.id);
        writer.u32(self.version);
        writer.u32(self.partitions);
        writer.bytes16(self.name.as_bytes());
        writer.u16(self.columns.len() as u16);
        for column in &self.columns {
            let (code, length) = column.column_type.code();
            writer.u8(code);
            writer.u16(length);
            writer.u8(column.nullable as u8);
            writer.bytes16(column.name.as_bytes());
        }
        writer.u16(self.primary_key.len() as u16);
        for &column in &self.primary_key {
            writer.u16(column);
        }
    }

    /// Encodes into a new vector (schema operations only; not a hot path).
    pub fn encode_to_vec(&self) -> Vec<u8> {
        let mut buffer = Vec::new();
        self.encode(&mut Writer::new(&mut buffer));
        buffer
    }

    /// Decodes and validates bytes from the network.
    pub fn decode(bytes: &[u8]) -> Result<TableDef, String> {
        let mut reader = Reader::new(bytes);
        let malformed = |_| "malformed table definition".to_string();
        let id = reader.u32().map_err(malformed)?;
        let version = reader.u32().map_err(malformed)?;
        let partitions = reader.u32().map_err(malformed)?;
        let name = reader.string16().map_err(malformed)?;
        let column_count = reader.u16().map_err(malformed)? as usize;
        if column_count > MAX_COLUMNS {
            return Err(format!("a table has at most {MAX_COLUMNS} columns"));
        }
        let mut columns = Vec::with_capacity(column_count);
        for _ in 0..column_count {
            let code = reader.u8().map_err(malformed)?;
            let length = reader.u16().map_err(malformed)?;
            let nullable = reader.u8().map_err(malformed)? != 0;
            let name = reader.string16().map_err(malformed)?;
            let column_type = ColumnType::from_code(code, length)
                .ok_or_else(|| format!("unknown column type code {code}"))?;
            columns.push(ColumnDef {
                name,
                column_type,
                nullable,
            });
        }
        let key_count = reader.u16().map_err(malformed)? as usize;
        if key_count > MAX_COLUMNS {
            return Err("primary key too long".into());
        }
        let mut primary_key = Vec::with_capacity(key_count);
        for _ in 0..key_count {
            primary_key.push(reader.u16().map_err(malformed)?);
        }
        if !reader.is_empty() {
            return Err("trailing bytes after table definition".into());
        }
        let table = TableDef {
            id,
            version,
            name,
            columns,
            primary_key,
            partitions,
        };
        table.validate()?;
        Ok(table)
    }
}

fn validate_name(what: &str, name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(format!("{what} must be 1..={MAX_NAME_BYTES} bytes"));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
    {
        return Err(format!(
            "{what} {name:?} may hold only ASCII letters, digits, '_' and '$'"
        ));
    }
    Ok(())
}
