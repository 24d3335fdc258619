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
/// Longest column or index name, and longest part of a table name.
pub const MAX_NAME_BYTES: usize = 64;
/// The separator of a table name's two parts, `database/table` (the SQL
/// node's names; NDB's are `database/def/table`). A table name holds at
/// most one.
pub const TABLE_NAME_SEPARATOR: char = '/';
/// Most ordered indexes a table has besides its primary key's.
pub const MAX_INDEXES: usize = 16;
/// Most columns in an index.
pub const MAX_INDEX_COLUMNS: usize = 16;
/// The largest index number.
pub const MAX_INDEX_ID: u32 = u16::MAX as u32;

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

/// An ordered index of a table besides its primary key's
/// (docs/design/scans-and-indexes.md §2): kept in every partition replica
/// over the table's rows, entries ordered by the index's columns, then
/// by row id, so rows with equal values (NULLs too) each have an entry.
#[derive(Clone, PartialEq, Debug)]
pub struct IndexDef {
    /// The index's number in its table, 1 and up (0 is the primary key's
    /// ordered index); a scan names an index by it.
    pub id: u32,
    /// Name, unique among the table's indexes.
    pub name: String,
    /// Column ids, in index order.
    pub columns: Vec<u16>,
    /// A unique index: no two rows hold the same non-NULL values in its
    /// columns. Kept in a hidden table of its own besides the ordered
    /// index (docs/design/scans-and-indexes.md §5).
    pub unique: Option<UniqueTable>,
}

/// The hidden table of a unique index: keyed on the index's columns, its
/// rows hold the base row's primary key. Its id and version come from
/// the same counters as every table's (dict assigns both at create; a
/// create request leaves them 0), so no table id is ever shared.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct UniqueTable {
    /// The hidden table's id (0 in a create request).
    pub table_id: u32,
    /// Its version (0 in a create request: not assigned yet).
    pub table_version: u32,
}

impl UniqueTable {
    /// A unique index in a create request (dict assigns the table).
    pub const REQUESTED: UniqueTable = UniqueTable {
        table_id: 0,
        table_version: 0,
    };

    /// Whether dict assigned the hidden table.
    pub fn is_assigned(self) -> bool {
        self.table_version != 0
    }
}

/// A table as `dict` knows it.
///
/// ```
/// use signal::schema::{ColumnDef, ColumnType, TableDef};
/// let table = TableDef {
///     indexes: Vec::new(), revision: 0,
///     id: 0, version: 0, name: "t".into(), partitions: 0,
///     columns: vec![
///         ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: false }, nullable: false },
///         ColumnDef { name: "v".into(), column_type: ColumnType::VarChar(20), nullable: true },
///     ],
///     primary_key: vec![0],
///     partition_key: Vec::new(),
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
    /// The primary-key columns whose values alone place a row in a
    /// partition (NDB's `PARTITION BY KEY (w_id)`): rows that share them
    /// share a partition, so one transaction over them stays on one node
    /// group. Empty: the whole primary key (docs/design/data-and-routing.md,
    /// "canonical keys and the hash").
    pub partition_key: Vec<u16>,
    /// Number of partitions (0 in a create request: dict picks the default).
    pub partitions: u32,
    /// Ordered indexes besides the primary key's.
    pub indexes: Vec<IndexDef>,
    /// Rises with every change of the table's indexes (an online create
    /// or drop of one, docs/design/0024-online-index-changes.md), which
    /// leaves `version`, the one operations are checked against, alone. A
    /// new index takes the revision as its id, so no index id is ever
    /// reused in a table; at least every index's id (a create gets the
    /// highest).
    pub revision: u32,
}

impl TableDef {
    /// Checks every rule a table must follow; the error says which one failed.
    pub fn validate(&self) -> Result<(), String> {
        validate_table_name(&self.name)?;
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
        for (position, column) in self.partition_key.iter().enumerate() {
            if !self.primary_key.contains(column) {
                return Err(format!(
                    "partition key column {column} is not in the primary key"
                ));
            }
            if self.partition_key[..position].contains(column) {
                return Err(format!("partition key column {column} is named twice"));
            }
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
        self.validate_indexes()
    }

    fn validate_indexes(&self) -> Result<(), String> {
        if self.indexes.len() > MAX_INDEXES {
            return Err(format!("a table has at most {MAX_INDEXES} indexes"));
        }
        for (position, index) in self.indexes.iter().enumerate() {
            validate_name("index name", &index.name)?;
            if index.name.eq_ignore_ascii_case("PRIMARY") {
                return Err("an index may not be named PRIMARY (the primary key's)".into());
            }
            if self.indexes[..position]
                .iter()
                .any(|other| other.name.eq_ignore_ascii_case(&index.name))
            {
                return Err(format!("duplicate index name {:?}", index.name));
            }
            if index.id == 0
                || index.id > MAX_INDEX_ID
                || self.indexes[..position]
                    .iter()
                    .any(|other| other.id == index.id)
            {
                return Err(format!(
                    "index {:?}: ids are 1..={MAX_INDEX_ID}, one per index",
                    index.name
                ));
            }
            if index.columns.is_empty() || index.columns.len() > MAX_INDEX_COLUMNS {
                return Err(format!(
                    "index {:?} must have 1..={MAX_INDEX_COLUMNS} columns",
                    index.name
                ));
            }
            for (at, &column) in index.columns.iter().enumerate() {
                let Some(def) = self.columns.get(column as usize) else {
                    return Err(format!(
                        "index {:?} names column id {column}, which does not exist",
                        index.name
                    ));
                };
                if index.columns[..at].contains(&column) {
                    return Err(format!(
                        "index {:?} names column {:?} twice",
                        index.name, def.name
                    ));
                }
            }
            if let Some(unique) = index.unique {
                self.validate_unique(position, index, unique)?;
            }
        }
        Ok(())
    }

    /// A unique index's hidden table: its row fits, and an assigned table
    /// id is this table's own and no other index's.
    fn validate_unique(
        &self,
        position: usize,
        index: &IndexDef,
        unique: UniqueTable,
    ) -> Result<(), String> {
        let columns = index.columns.iter().chain(&self.primary_key);
        if index.columns.len() + self.primary_key.len() > MAX_COLUMNS {
            return Err(format!(
                "unique index {:?}: its columns and the primary key's are more than \
                 {MAX_COLUMNS}",
                index.name
            ));
        }
        let row_bytes: usize = columns
            .map(|&column| self.columns[column as usize].column_type.max_value_bytes() + 2)
            .sum();
        if row_bytes > MAX_ROW_BYTES {
            return Err(format!(
                "unique index {:?}: its columns and the primary key add up to {row_bytes} \
                 bytes, at most {MAX_ROW_BYTES}",
                index.name
            ));
        }
        if !unique.is_assigned() {
            return Ok(());
        }
        let shared = unique.table_id == self.id
            || self.indexes[..position]
                .iter()
                .filter_map(|other| other.unique)
                .any(|other| other.is_assigned() && other.table_id == unique.table_id);
        if shared {
            return Err(format!(
                "unique index {:?}: its hidden table id {} is taken",
                index.name, unique.table_id
            ));
        }
        Ok(())
    }

    /// The unique indexes, in index order.
    pub fn unique_indexes(&self) -> impl Iterator<Item = &IndexDef> {
        self.indexes.iter().filter(|index| index.unique.is_some())
    }

    /// The hidden table of unique index `index` of this table (`None` for
    /// an index that is not unique): keyed on the index's columns, NOT
    /// NULL (a row with a NULL in them has no entry; SQL allows many), its
    /// other columns the base table's primary key in key order, so hidden
    /// column `index.columns.len() + i` is primary-key column i. It has as
    /// many partitions as the base table and is placed by the base
    /// table's map, by the hash of its own key. Every block and client
    /// derives it the same way from the base definition; it is never
    /// sent or stored on its own. Its name (`t#unique#1`) and its
    /// primary-key columns' (`#primary0`) hold a `#`, which no user's
    /// name may, so they never clash with a user's.
    pub fn unique_index_table(&self, index: &IndexDef) -> Option<TableDef> {
        let unique = index.unique?;
        let key = index.columns.iter().map(|&column| {
            let base = &self.columns[column as usize];
            ColumnDef::new(&base.name, base.column_type, false)
        });
        let primary = self.primary_key.iter().enumerate().map(|(at, &column)| {
            let base = &self.columns[column as usize];
            ColumnDef::new(&format!("#primary{at}"), base.column_type, false)
        });
        Some(TableDef {
            id: unique.table_id,
            version: unique.table_version,
            name: format!("{}#unique#{}", self.name, index.id),
            columns: key.chain(primary).collect(),
            primary_key: (0..index.columns.len() as u16).collect(),
            partitions: self.partitions,
            indexes: Vec::new(),
            revision: 0,
            partition_key: Vec::new(),
        })
    }

    /// The index named `name` (case-insensitive).
    pub fn index(&self, name: &str) -> Option<&IndexDef> {
        self.indexes
            .iter()
            .find(|index| index.name.eq_ignore_ascii_case(name))
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
        writer.u16(self.indexes.len() as u16);
        for index in &self.indexes {
            writer.u32(index.id);
            writer.bytes16(index.name.as_bytes());
            writer.u16(index.columns.len() as u16);
            for &column in &index.columns {
                writer.u16(column);
            }
        }
        writer.u32(self.revision);
        let unique: Vec<_> = self
            .indexes
            .iter()
            .filter_map(|index| Some((index.id, index.unique?)))
            .collect();
        // Definitions without unique indexes or a partition key end at the
        // revision, as they did before unique indexes existed; one with a
        // partition key has the unique section (maybe empty) before it.
        if !unique.is_empty() || !self.partition_key.is_empty() {
            writer.u16(unique.len() as u16);
            for (index_id, table) in unique {
                writer.u32(index_id);
                writer.u32(table.table_id);
                writer.u32(table.table_version);
            }
        }
        if !self.partition_key.is_empty() {
            writer.u16(self.partition_key.len() as u16);
            for &column in &self.partition_key {
                writer.u16(column);
            }
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
        // Definitions written before indexes existed end here.
        let mut indexes = Vec::new();
        if !reader.is_empty() {
            let index_count = reader.u16().map_err(malformed)? as usize;
            if index_count > MAX_INDEXES {
                return Err(format!("a table has at most {MAX_INDEXES} indexes"));
            }
            for _ in 0..index_count {
                let id = reader.u32().map_err(malformed)?;
                let name = reader.string16().map_err(malformed)?;
                let column_count = reader.u16().map_err(malformed)? as usize;
                if column_count > MAX_INDEX_COLUMNS {
                    return Err(format!("an index has at most {MAX_INDEX_COLUMNS} columns"));
                }
                let mut columns = Vec::with_capacity(column_count);
                for _ in 0..column_count {
                    columns.push(reader.u16().map_err(malformed)?);
                }
                indexes.push(IndexDef {
                    id,
                    name,
                    columns,
                    unique: None,
                });
            }
        }
        // Definitions written before index changes existed end here: their
        // revision is their highest index id.
        let revision = if reader.is_empty() {
            indexes.iter().map(|index| index.id).max().unwrap_or(0)
        } else {
            reader.u32().map_err(malformed)?
        };
        if !reader.is_empty() {
            let count = reader.u16().map_err(malformed)? as usize;
            for _ in 0..count {
                let index_id = reader.u32().map_err(malformed)?;
                let table = UniqueTable {
                    table_id: reader.u32().map_err(malformed)?,
                    table_version: reader.u32().map_err(malformed)?,
                };
                let index = indexes
                    .iter_mut()
                    .find(|index| index.id == index_id)
                    .ok_or_else(|| format!("unique index {index_id} is no index of the table"))?;
                if index.unique.replace(table).is_some() {
                    return Err(format!("index {index_id} is unique twice"));
                }
            }
        }
        let mut partition_key = Vec::new();
        if !reader.is_empty() {
            let count = reader.u16().map_err(malformed)? as usize;
            if count > MAX_COLUMNS {
                return Err("partition key too long".into());
            }
            for _ in 0..count {
                partition_key.push(reader.u16().map_err(malformed)?);
            }
        }
        if !reader.is_empty() {
            return Err("trailing bytes after table definition".into());
        }
        let table = TableDef {
            indexes,
            revision,
            id,
            version,
            name,
            columns,
            primary_key,
            partition_key,
            partitions,
        };
        table.validate()?;
        Ok(table)
    }
}

/// An online index change as a client asks it (CreateIndexReq with
/// columns, DropIndexReq without): everything by name, so a client needs
/// no current definition to ask, and dict resolves the names against the
/// table as it is when the change runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexChange {
    /// The table.
    pub table: String,
    /// The index.
    pub index: String,
    /// Its columns in index order (empty to drop).
    pub columns: Vec<String>,
    /// Create a unique index (docs/design/0026-unique-indexes.md): one
    /// that refuses a value two rows would hold.
    pub unique: bool,
}

impl IndexChange {
    /// Encodes (format in docs/wire-format.md).
    pub fn encode_to_vec(&self) -> Vec<u8> {
        let mut buffer = Vec::new();
        let mut writer = Writer::new(&mut buffer);
        writer.bytes16(self.table.as_bytes());
        writer.bytes16(self.index.as_bytes());
        writer.u16(self.columns.len() as u16);
        for column in &self.columns {
            writer.bytes16(column.as_bytes());
        }
        // A trailing flag, only when set: an older change reads as one
        // of an ordered index.
        if self.unique {
            writer.u8(1);
        }
        buffer
    }

    /// Decodes bytes from the network and checks the names' form and the
    /// column count (at most [`MAX_INDEX_COLUMNS`]); whether they exist is
    /// dict's to find out.
    pub fn decode(bytes: &[u8]) -> Result<IndexChange, String> {
        let mut reader = Reader::new(bytes);
        let malformed = |_| "malformed index change".to_string();
        let table = reader.string16().map_err(malformed)?;
        let index = reader.string16().map_err(malformed)?;
        let count = reader.u16().map_err(malformed)? as usize;
        if count > MAX_INDEX_COLUMNS {
            return Err(format!("an index has at most {MAX_INDEX_COLUMNS} columns"));
        }
        let mut columns = Vec::with_capacity(count);
        for _ in 0..count {
            columns.push(reader.string16().map_err(malformed)?);
        }
        let unique = match reader.is_empty() {
            true => false,
            false => match reader.u8().map_err(malformed)? {
                1 => true,
                flag => return Err(format!("bad unique flag {flag} in index change")),
            },
        };
        if !reader.is_empty() {
            return Err("trailing bytes after index change".into());
        }
        validate_table_name(&table)?;
        validate_name("index name", &index)?;
        if index.eq_ignore_ascii_case("PRIMARY") {
            return Err("an index may not be named PRIMARY (the primary key's)".into());
        }
        for column in &columns {
            validate_name("column name", column)?;
        }
        Ok(IndexChange {
            table,
            index,
            columns,
            unique,
        })
    }
}

/// A table name: a name as [`validate_name`] checks, or two of them joined
/// by [`TABLE_NAME_SEPARATOR`] (a SQL database's table).
pub fn validate_table_name(name: &str) -> Result<(), String> {
    match name.split_once(TABLE_NAME_SEPARATOR) {
        None => validate_name("table name", name),
        Some((database, table)) => {
            validate_name("database name", database)?;
            validate_name("table name", table)
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn table(indexes: Vec<IndexDef>) -> TableDef {
        TableDef {
            id: 4,
            version: 2,
            name: "t".into(),
            columns: vec![
                ColumnDef::new("k", ColumnType::Int { unsigned: false }, false),
                ColumnDef::new("a", ColumnType::VarChar(10), true),
                ColumnDef::new("b", ColumnType::Double, true),
            ],
            primary_key: vec![0],
            partitions: 2,
            revision: indexes.iter().map(|index| index.id).max().unwrap_or(0),
            indexes,
            partition_key: Vec::new(),
        }
    }

    fn index(id: u32, name: &str, columns: &[u16]) -> IndexDef {
        IndexDef {
            id,
            name: name.into(),
            columns: columns.to_vec(),
            unique: None,
        }
    }

    #[test]
    fn a_table_name_may_name_its_database_once() {
        assert!(validate_table_name("sbtest1").is_ok());
        assert!(validate_table_name("sbtest/sbtest1").is_ok());
        for bad in [
            "/t",
            "db/",
            "a/b/c",
            "db/t-1",
            &format!("{}/t", "d".repeat(65)),
        ] {
            assert!(validate_table_name(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn indexes_round_trip_and_old_definitions_still_decode() {
        let with = table(vec![index(1, "by_a", &[1]), index(2, "by_b_a", &[2, 1])]);
        assert_eq!(with.validate(), Ok(()));
        assert_eq!(TableDef::decode(&with.encode_to_vec()), Ok(with.clone()));
        assert_eq!(with.index("BY_A").map(|index| index.id), Some(1));
        // A definition written before indexes existed: no index count.
        let without = table(Vec::new());
        let mut old = without.encode_to_vec();
        old.truncate(old.len() - 6);
        assert_eq!(TableDef::decode(&old), Ok(without));
        // One written before index changes existed: no revision, which is
        // then the highest index id.
        let mut old = with.encode_to_vec();
        old.truncate(old.len() - 4);
        assert_eq!(TableDef::decode(&old), Ok(with.clone()));
        let revised = TableDef {
            revision: 9,
            ..with.clone()
        };
        assert_eq!(TableDef::decode(&revised.encode_to_vec()), Ok(revised));
        // Every cut of the new form is refused or decodes to a valid table.
        let bytes = with.encode_to_vec();
        for cut in 0..bytes.len() {
            if let Ok(table) = TableDef::decode(&bytes[..cut]) {
                assert_eq!(table.validate(), Ok(()));
            }
        }
    }

    #[test]
    fn unique_indexes_round_trip_and_derive_their_hidden_table() {
        let mut unique = index(2, "by_b_a", &[2, 1]);
        unique.unique = Some(UniqueTable {
            table_id: 9,
            table_version: 3,
        });
        let with = table(vec![index(1, "by_a", &[1]), unique]);
        assert_eq!(with.validate(), Ok(()));
        assert_eq!(TableDef::decode(&with.encode_to_vec()), Ok(with.clone()));
        assert_eq!(with.unique_indexes().count(), 1);
        assert_eq!(with.unique_index_table(&with.indexes[0]), None);
        let hidden = with.unique_index_table(&with.indexes[1]).expect("unique");
        assert_eq!((hidden.id, hidden.version), (9, 3));
        assert_eq!(hidden.name, "t#unique#2");
        assert_eq!(hidden.primary_key, vec![0, 1]);
        let columns: Vec<(&str, ColumnType, bool)> = hidden
            .columns
            .iter()
            .map(|column| (column.name.as_str(), column.column_type, column.nullable))
            .collect();
        assert_eq!(
            columns,
            vec![
                ("b", ColumnType::Double, false),
                ("a", ColumnType::VarChar(10), false),
                ("#primary0", ColumnType::Int { unsigned: false }, false)
            ]
        );
        // A hidden table id that is the table's own, or another index's.
        let mut own = with.clone();
        own.indexes[1].unique = Some(UniqueTable {
            table_id: 4,
            table_version: 1,
        });
        assert!(own.validate().unwrap_err().contains("is taken"));
        // A create request's (not yet assigned) ids are never taken.
        let mut requested = with.clone();
        requested.indexes[0].unique = Some(UniqueTable::REQUESTED);
        requested.indexes[1].unique = Some(UniqueTable::REQUESTED);
        assert_eq!(requested.validate(), Ok(()));
        // A hidden table of more than MAX_COLUMNS columns is refused.
        let mut wide = table(Vec::new());
        wide.columns = (0..MAX_COLUMNS)
            .map(|at| {
                ColumnDef::new(
                    &format!("c{at}"),
                    ColumnType::Int { unsigned: false },
                    false,
                )
            })
            .collect();
        wide.primary_key = (0..MAX_COLUMNS as u16).collect();
        wide.indexes = vec![unique_on(&[0])];
        assert!(wide.validate().unwrap_err().contains("more than"));
        // A unique entry naming no index does not decode.
        let mut bytes = with.encode_to_vec();
        let at = bytes.len() - 12;
        bytes[at..at + 4].copy_from_slice(&7u32.to_le_bytes());
        assert!(TableDef::decode(&bytes).unwrap_err().contains("no index"));
    }

    fn unique_on(columns: &[u16]) -> IndexDef {
        IndexDef {
            unique: Some(UniqueTable::REQUESTED),
            ..index(1, "u", columns)
        }
    }

    #[test]
    fn index_changes_round_trip_and_bad_ones_are_refused() {
        let change = IndexChange {
            table: "t".into(),
            index: "by_a".into(),
            columns: vec!["a".into(), "b".into()],
            unique: false,
        };
        let bytes = change.encode_to_vec();
        assert_eq!(IndexChange::decode(&bytes), Ok(change.clone()));
        for cut in 0..bytes.len() {
            assert!(IndexChange::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(IndexChange::decode(&trailing).is_err());
        // Unique: one byte more, and nothing after it.
        let unique = IndexChange {
            unique: true,
            ..change.clone()
        };
        let unique_bytes = unique.encode_to_vec();
        assert_eq!(unique_bytes.len(), bytes.len() + 1);
        assert_eq!(IndexChange::decode(&unique_bytes), Ok(unique));
        let mut trailing = unique_bytes.clone();
        trailing.push(1);
        assert!(IndexChange::decode(&trailing).is_err());
        let bad = |edit: &dyn Fn(&mut IndexChange)| {
            let mut bad = change.clone();
            edit(&mut bad);
            IndexChange::decode(&bad.encode_to_vec()).unwrap_err()
        };
        assert!(bad(&|c| c.index = "primary".into()).contains("PRIMARY"));
        assert!(bad(&|c| c.table = "a b".into()).contains("table name"));
        assert!(bad(&|c| c.columns = vec!["x".into(); 17]).contains("at most 16"));
        assert!(bad(&|c| c.columns = vec![String::new()]).contains("column name"));
    }

    #[test]
    fn bad_indexes_are_refused_with_the_rule() {
        let cases = [
            (vec![index(1, "PRIMARY", &[1])], "PRIMARY"),
            (
                vec![index(1, "x", &[1]), index(2, "X", &[2])],
                "duplicate index name",
            ),
            (
                vec![index(1, "x", &[1]), index(1, "y", &[2])],
                "one per index",
            ),
            (vec![index(0, "x", &[1])], "one per index"),
            (vec![index(MAX_INDEX_ID + 1, "x", &[1])], "one per index"),
            (vec![index(1, "x", &[])], "columns"),
            (vec![index(1, "x", &[7])], "does not exist"),
            (vec![index(1, "x", &[1, 1])], "twice"),
            (vec![index(1, "bad name", &[1])], "index name"),
        ];
        for (indexes, rule) in cases {
            let error = table(indexes.clone()).validate().unwrap_err();
            assert!(error.contains(rule), "{indexes:?}: {error}");
        }
        let many = (1..=MAX_INDEXES as u32 + 1)
            .map(|id| index(id, &format!("i{id}"), &[1]))
            .collect();
        assert!(table(many).validate().is_err());
    }
}
