//! A table as the client uses it: the definition fetched from `dict`, plus
//! the helpers that turn application values into key and attribute sections
//! and row data back into [`Row`]s.
//!
//! Column lookups by name scan the (at most 256) columns; hot loops pass
//! column ids (`u16`) instead, which cost nothing to resolve.

use crate::error::ClientError;
use crate::value::{checked_value, push_entry, Number, Value, WireRule};
use signal::attr::{AttrEntry, AttrIter, NULL_LENGTH};
use signal::schema::{ColumnType, IndexDef, TableDef, MAX_COLUMNS};
use signal::signals::{PartitionMap, PartitionPlacement};
use signal::ErrorCode;
use std::sync::{Arc, OnceLock};

/// Something that names a column: its name (`&str`, `String`) or its id
/// (`u16`, `usize`: the index in the table's columns).
///
/// ```
/// use client::{ColumnSelector, Table};
/// use signal::schema::{ColumnDef, ColumnType, TableDef};
/// let table = Table::new(TableDef {
///     indexes: Vec::new(), revision: 0,
///     id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
///     columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: false }, nullable: false }],
///     partition_key: Vec::new(),
/// });
/// assert_eq!("K".column_id(table.def()), Some(0));
/// assert_eq!(0u16.column_id(table.def()), Some(0));
/// assert_eq!(1u16.column_id(table.def()), None);
/// ```
pub trait ColumnSelector {
    /// The column's id in `table`, if it exists.
    fn column_id(&self, table: &TableDef) -> Option<u16>;
    /// How the column was named, for error messages.
    fn describe(&self) -> String;
}

impl ColumnSelector for str {
    fn column_id(&self, table: &TableDef) -> Option<u16> {
        table.column(self).map(|(id, _)| id)
    }
    fn describe(&self) -> String {
        format!("{self:?}")
    }
}

impl<T: ColumnSelector + ?Sized> ColumnSelector for &T {
    fn column_id(&self, table: &TableDef) -> Option<u16> {
        (**self).column_id(table)
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
}

impl ColumnSelector for String {
    fn column_id(&self, table: &TableDef) -> Option<u16> {
        self.as_str().column_id(table)
    }
    fn describe(&self) -> String {
        format!("{self:?}")
    }
}

impl ColumnSelector for u16 {
    fn column_id(&self, table: &TableDef) -> Option<u16> {
        ((*self as usize) < table.columns.len()).then_some(*self)
    }
    fn describe(&self) -> String {
        format!("#{self}")
    }
}

impl ColumnSelector for usize {
    fn column_id(&self, table: &TableDef) -> Option<u16> {
        u16::try_from(*self).ok().and_then(|id| id.column_id(table))
    }
    fn describe(&self) -> String {
        format!("#{self}")
    }
}

/// Marks a column as not given in [`Table::encode_row`]'s position table.
const ABSENT: u16 = u16::MAX;

/// A table definition with encoding helpers. Obtained from
/// `Cluster::table` (cached) or built from a [`TableDef`] in tests.
///
/// ```
/// use client::{Table, Value};
/// use signal::schema::{ColumnDef, ColumnType, TableDef};
/// let table = Table::new(TableDef {
///     indexes: Vec::new(), revision: 0,
///     id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
///     columns: vec![
///         ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: true }, nullable: false },
///         ColumnDef { name: "v".into(), column_type: ColumnType::VarChar(8), nullable: true },
///     ],
///     partition_key: Vec::new(),
/// });
/// let mut key = Vec::new();
/// table.encode_key(&[Value::UInt(5)], &mut key).unwrap();
/// assert_eq!(key, [0, 0, 4, 0, 5, 0, 0, 0]);
/// ```
pub struct Table {
    def: TableDef,
    /// The rule the definition breaks, if any (a definition built by hand
    /// rather than fetched from dict): such a table encodes nothing.
    invalid: Option<String>,
    /// The distribution, when fetched from dict (a hint for routing: the
    /// data nodes' dih is authoritative).
    map: Option<Arc<PartitionMap>>,
    /// The cluster's distribution version the map is known to be current for.
    map_version: u32,
    /// How each column's values are checked and read, by column id.
    wire_rules: Vec<WireRule>,
    /// The shape of a whole row, when every column is fixed-width.
    full_row: Option<FullRow>,
    /// Each unique index's hidden table (index id, table), placed by this
    /// table's map (docs/design/scans-and-indexes.md §5).
    unique_tables: Vec<(u32, Arc<Table>)>,
    /// A hidden table: its base table's name (whose map routes it).
    base: Option<String>,
}

impl Table {
    /// Wraps a definition (as fetched from `dict`, with id and version).
    /// A definition that breaks a rule of [`TableDef::validate`] makes a
    /// table whose encoders refuse with `BadTableDefinition`.
    ///
    /// ```
    /// # use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// # let def = TableDef { indexes: vec![], revision: 0, id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
    ///     partition_key: Vec::new(),
    /// #   columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Double, nullable: false }] };
    /// let table = client::Table::new(def);
    /// assert_eq!(table.name(), "t");
    /// ```
    pub fn new(def: TableDef) -> Table {
        let invalid = def.validate().err();
        Table::build(def, invalid, None, 0)
    }

    fn build(
        def: TableDef,
        invalid: Option<String>,
        map: Option<Arc<PartitionMap>>,
        map_version: u32,
    ) -> Table {
        // A valid table's hidden tables are valid but for their names,
        // which may be longer than a user's (they are never looked up).
        let unique_tables = match &invalid {
            Some(_) => Vec::new(),
            None => def
                .unique_indexes()
                .filter_map(|index| {
                    let hidden = def.unique_index_table(index)?;
                    // Placed by this table's map (routing reads only its
                    // placements, not the table id it names).
                    let mut table = Table::build(hidden, None, map.clone(), map_version);
                    table.base = Some(def.name.clone());
                    Some((index.id, Arc::new(table)))
                })
                .collect(),
        };
        let wire_rules = def
            .columns
            .iter()
            .map(|column| WireRule::of(column.column_type))
            .collect();
        let mut table = Table {
            def,
            invalid,
            map,
            map_version,
            wire_rules,
            full_row: None,
            unique_tables,
            base: None,
        };
        table.full_row = FullRow::of(&table);
        table
    }

    /// A table with its partition map, current as of the cluster's
    /// distribution version `map_version` (as `Cluster::table` builds it
    /// from GET_TABINFO_CONF).
    ///
    /// ```
    /// # use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// # let def = TableDef { indexes: vec![], revision: 0, id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
    ///     partition_key: Vec::new(),
    /// #   columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: false }, nullable: false }] };
    /// use signal::signals::{PartitionMap, PartitionPlacement};
    /// use signal::NodeId;
    /// let map = PartitionMap {
    ///     table_id: 1, version: 1,
    ///     bucket_partitions: vec![0; signal::partition::BUCKETS as usize],
    ///     partitions: vec![PartitionPlacement { node_group: 0, replicas: vec![NodeId(3), NodeId(2)], ldm_instance: 0, redo_part: 0 }],
    /// };
    /// let table = client::Table::with_map(def, map, 7);
    /// assert_eq!(table.map_version(), 7);
    /// let placement = table.placement(&[client::Value::Int(5)]).unwrap().expect("a map");
    /// assert_eq!(placement.replicas[0], NodeId(3), "the primary");
    /// ```
    pub fn with_map(def: TableDef, map: PartitionMap, map_version: u32) -> Table {
        let invalid = def.validate().err();
        Table::build(def, invalid, Some(Arc::new(map)), map_version)
    }

    /// Each unique index with its hidden table.
    pub fn unique_index_tables(&self) -> impl Iterator<Item = (&IndexDef, &Arc<Table>)> {
        self.unique_tables.iter().filter_map(|(id, table)| {
            let index = self.def.indexes.iter().find(|index| index.id == *id)?;
            Some((index, table))
        })
    }

    /// A unique index's hidden table: the name of its base table.
    pub(crate) fn base_table(&self) -> Option<&str> {
        self.base.as_deref()
    }

    /// The hidden table of unique index `index` (by name): keyed on the
    /// index's columns, its other columns the primary key's
    /// (`TableDef::unique_index_table`). Clients read it; only the data
    /// nodes write it.
    pub fn unique_index_table(&self, index: &str) -> Result<&Arc<Table>, ClientError> {
        let unknown = || ClientError::Invalid {
            code: ErrorCode::UnknownIndex,
            detail: format!("table {:?} has no unique index {index:?}", self.def.name),
        };
        let index = self.def.index(index).ok_or_else(unknown)?;
        self.unique_tables
            .iter()
            .find(|(id, _)| *id == index.id)
            .map(|(_, table)| table)
            .ok_or_else(unknown)
    }

    /// The partition map, when the table came from dict.
    ///
    /// ```
    /// # use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// # let def = TableDef { indexes: vec![], revision: 0, id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
    ///     partition_key: Vec::new(),
    /// #   columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Double, nullable: false }] };
    /// assert!(client::Table::new(def).map().is_none());
    /// ```
    pub fn map(&self) -> Option<&Arc<PartitionMap>> {
        self.map.as_ref()
    }

    /// The cluster distribution version the map is current for (0 without one).
    ///
    /// ```
    /// # use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// # let def = TableDef { indexes: vec![], revision: 0, id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
    ///     partition_key: Vec::new(),
    /// #   columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Double, nullable: false }] };
    /// assert_eq!(client::Table::new(def).map_version(), 0);
    /// ```
    pub fn map_version(&self) -> u32 {
        self.map_version
    }

    /// The partition holding `key` (one value per primary-key column):
    /// the key's distribution hash picks a bucket, the map the partition
    /// (without a map: the default round-robin map over the partitions).
    ///
    /// ```
    /// # use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// # let def = TableDef { indexes: vec![], revision: 0, id: 1, version: 1, name: "t".into(), partitions: 4, primary_key: vec![0],
    ///     partition_key: Vec::new(),
    /// #   columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: false }, nullable: false }] };
    /// let table = client::Table::new(def);
    /// assert!(table.partition(&[client::Value::Int(9)]).unwrap() < 4);
    /// ```
    pub fn partition(&self, key: &[Value]) -> Result<u32, ClientError> {
        let mut bytes = Vec::new();
        self.encode_key(key, &mut bytes)?;
        self.partition_of_key_section(&bytes)
    }

    /// The bucket (of the 3840 that partitions are made of) of `key`.
    pub(crate) fn bucket(&self, key: &[Value]) -> Result<u32, ClientError> {
        let mut bytes = Vec::new();
        self.encode_key(key, &mut bytes)?;
        self.bucket_of_key_section(&bytes)
    }

    /// The bucket of every row whose partition-key columns hold `values`
    /// (one per column, in the partition key's order): each such row
    /// hashes alike, so they all live in one partition. `None` for a
    /// table without a partition key of its own (its rows spread by the
    /// whole primary key), or values that do not fit the columns.
    pub(crate) fn bucket_of_partition_values<'a>(
        &self,
        values: impl ExactSizeIterator<Item = &'a Value>,
    ) -> Option<u32> {
        let def = &self.def;
        if def.partition_key.is_empty()
            || def.partition_key == def.primary_key
            || values.len() != def.partition_key.len()
        {
            return None;
        }
        let mut entries = Vec::new();
        for (&column, value) in def.partition_key.iter().zip(values) {
            // A definition the client refused to check names no column
            // here: no hint, rather than a panic.
            let column_def = def.columns.get(column as usize)?;
            crate::value::push_entry(
                &mut entries,
                column,
                column_def.column_type,
                column_def.nullable,
                value,
            )
            .ok()?;
        }
        let distribution = signal::attr::partition_key_hash(def, &entries).ok()?;
        Some(signal::partition::bucket(signal::attr::KeyHash(
            u64::from(distribution) << 32,
        )))
    }

    /// [`Table::bucket`] for an encoded key section.
    fn bucket_of_key_section(&self, key: &[u8]) -> Result<u32, ClientError> {
        let hash = signal::attr::key_hash(&self.def, key).map_err(|code| ClientError::Invalid {
            code,
            detail: format!("a key of table {:?}", self.def.name),
        })?;
        Ok(signal::partition::bucket(hash))
    }

    /// [`Table::partition`] for an encoded key section.
    pub(crate) fn partition_of_key_section(&self, key: &[u8]) -> Result<u32, ClientError> {
        let bucket = self.bucket_of_key_section(key)?;
        Ok(match &self.map {
            Some(map) => map.bucket_partitions[bucket as usize],
            None => {
                signal::partition::default_partition_of_bucket(bucket, self.def.partitions.max(1))
            }
        })
    }

    /// Where the partition holding `key` lives (replicas in chain order,
    /// primary first); `None` without a map.
    ///
    /// ```
    /// # use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// # let def = TableDef { indexes: vec![], revision: 0, id: 1, version: 1, name: "t".into(), partitions: 4, primary_key: vec![0],
    ///     partition_key: Vec::new(),
    /// #   columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: false }, nullable: false }] };
    /// let table = client::Table::new(def);
    /// assert!(table.placement(&[client::Value::Int(9)]).unwrap().is_none());
    /// ```
    pub fn placement(&self, key: &[Value]) -> Result<Option<&PartitionPlacement>, ClientError> {
        let partition = self.partition(key)?;
        Ok(self
            .map
            .as_ref()
            .and_then(|map| map.partitions.get(partition as usize)))
    }

    /// `Err` when the definition breaks a rule: encoding against it could
    /// name columns that do not exist.
    fn check_definition(&self) -> Result<(), ClientError> {
        match &self.invalid {
            None => Ok(()),
            Some(rule) => Err(ClientError::Invalid {
                code: ErrorCode::BadTableDefinition,
                detail: format!("table {:?}: {rule}", self.def.name),
            }),
        }
    }

    /// The definition.
    ///
    /// ```
    /// # use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// # let def = TableDef { indexes: vec![], revision: 0, id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
    ///     partition_key: Vec::new(),
    /// #   columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Double, nullable: false }] };
    /// let table = client::Table::new(def);
    /// assert_eq!(table.def().columns.len(), 1);
    /// ```
    pub fn def(&self) -> &TableDef {
        &self.def
    }

    /// The table's name.
    ///
    /// ```
    /// # use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// # let def = TableDef { indexes: vec![], revision: 0, id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
    ///     partition_key: Vec::new(),
    /// #   columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Double, nullable: false }] };
    /// assert_eq!(client::Table::new(def).name(), "t");
    /// ```
    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// The id of `column`, or an `Invalid` error with code UnknownColumn.
    ///
    /// ```
    /// # use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// # let def = TableDef { indexes: vec![], revision: 0, id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
    ///     partition_key: Vec::new(),
    /// #   columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Double, nullable: false }] };
    /// let table = client::Table::new(def);
    /// assert_eq!(table.column_id("k").unwrap(), 0);
    /// assert!(table.column_id("nope").is_err());
    /// ```
    pub fn column_id<C: ColumnSelector>(&self, column: C) -> Result<u16, ClientError> {
        column
            .column_id(&self.def)
            .ok_or_else(|| ClientError::Invalid {
                code: ErrorCode::UnknownColumn,
                detail: format!(
                    "table {:?} has no column {}",
                    self.def.name,
                    column.describe()
                ),
            })
    }

    fn value_error(&self, code: ErrorCode, column: u16, what: &str) -> ClientError {
        let name = self
            .def
            .columns
            .get(column as usize)
            .map_or("?", |def| def.name.as_str());
        ClientError::Invalid {
            code,
            detail: format!("table {:?} column {name:?}{what}", self.def.name),
        }
    }

    fn push(&self, out: &mut Vec<u8>, column: u16, value: &Value) -> Result<(), ClientError> {
        let def = &self.def.columns[column as usize];
        push_entry(out, column, def.column_type, def.nullable, value)
            .map_err(|code| self.value_error(code, column, &format!(" value {value}")))
    }

    /// Appends the key section for `key`: one value per primary-key column,
    /// in key order.
    ///
    /// ```
    /// # use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// # let def = TableDef { indexes: vec![], revision: 0, id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
    ///     partition_key: Vec::new(),
    /// #   columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: false }, nullable: false }] };
    /// let table = client::Table::new(def);
    /// let mut key = Vec::new();
    /// assert!(table.encode_key(&[], &mut key).is_err(), "one value per key column");
    /// ```
    pub fn encode_key(&self, key: &[Value], out: &mut Vec<u8>) -> Result<(), ClientError> {
        self.check_definition()?;
        if key.len() != self.def.primary_key.len() {
            return Err(ClientError::Invalid {
                code: ErrorCode::BadRequest,
                detail: format!(
                    "table {:?} has {} primary-key column(s), the key gave {} value(s)",
                    self.def.name,
                    self.def.primary_key.len(),
                    key.len()
                ),
            });
        }
        // Room for every entry at once (a number's is at most 8 bytes):
        // a key encoded into a fresh vector, as callers that keep keys do,
        // would otherwise grow it entry by entry.
        out.reserve(
            key.iter()
                .map(|value| {
                    signal::attr::entry_bytes(match value {
                        Value::Bytes(bytes) => bytes.len(),
                        _ => 8,
                    })
                })
                .sum(),
        );
        let start = out.len();
        for (&column, value) in self.def.primary_key.iter().zip(key) {
            if let Err(error) = self.push(out, column, value) {
                out.truncate(start);
                return Err(error);
            }
        }
        Ok(())
    }

    /// Appends the attribute section for `values` (any columns, any order)
    /// to `attr`. With `key_out`, the values are a whole row (insert,
    /// write): every primary-key column and every NOT NULL column must be
    /// given, and the key section is appended to `key_out` as well. Without
    /// it (update), primary-key columns may not be changed.
    ///
    /// ```
    /// # use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// # let def = TableDef { indexes: vec![], revision: 0, id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
    ///     partition_key: Vec::new(),
    /// #   columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: false }, nullable: false }] };
    /// use client::Value;
    /// let table = client::Table::new(def);
    /// let (mut attr, mut key) = (Vec::new(), Vec::new());
    /// table.encode_row(&[("k", Value::Int(1))], &mut attr, Some(&mut key)).unwrap();
    /// assert_eq!(attr, key);
    /// ```
    pub fn encode_row<C: ColumnSelector>(
        &self,
        values: &[(C, Value)],
        attr: &mut Vec<u8>,
        key_out: Option<&mut Vec<u8>>,
    ) -> Result<(), ClientError> {
        self.check_definition()?;
        let attr_start = attr.len();
        let result = self.encode_row_inner(values, attr, key_out);
        if result.is_err() {
            attr.truncate(attr_start);
        }
        result
    }

    fn encode_row_inner<C: ColumnSelector>(
        &self,
        values: &[(C, Value)],
        attr: &mut Vec<u8>,
        key_out: Option<&mut Vec<u8>>,
    ) -> Result<(), ClientError> {
        // Index of each column's value in `values`; a stack table because
        // this runs for every written row.
        let mut position = [ABSENT; MAX_COLUMNS];
        for (index, (column, value)) in values.iter().enumerate() {
            let id = self.column_id(column)?;
            if position[id as usize] != ABSENT {
                return Err(self.value_error(ErrorCode::BadRequest, id, " given twice"));
            }
            if key_out.is_none() && self.def.primary_key.contains(&id) {
                return Err(self.value_error(
                    ErrorCode::BadRequest,
                    id,
                    " is part of the primary key and cannot be updated",
                ));
            }
            position[id as usize] = index as u16;
            self.push(attr, id, value)?;
        }
        let Some(key_out) = key_out else {
            return Ok(());
        };
        for (id, column) in self.def.columns.iter().enumerate() {
            if !column.nullable && position[id] == ABSENT {
                return Err(self.value_error(ErrorCode::NullNotAllowed, id as u16, " not given"));
            }
        }
        let key_start = key_out.len();
        for &column in &self.def.primary_key {
            let value = &values[position[column as usize] as usize].1;
            if let Err(error) = self.push(key_out, column, value) {
                key_out.truncate(key_start);
                return Err(error);
            }
        }
        Ok(())
    }

    /// Decodes row data (attribute entries, as in TRANSID_AI) into a [`Row`].
    /// Columns the data does not mention are NULL. The data is checked
    /// against the table here (every error is found now); the values are
    /// built when first asked for ([`Row::get`], [`Row::values`]), and
    /// [`Row::get_u64`] reads a number without building them.
    ///
    /// ```
    /// # use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// # let def = TableDef { indexes: vec![], revision: 0, id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
    ///     partition_key: Vec::new(),
    /// #   columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: false }, nullable: false }] };
    /// use client::{Table, Value};
    /// use std::sync::Arc;
    /// let table = Arc::new(Table::new(def));
    /// let mut data = Vec::new();
    /// table.encode_key(&[Value::Int(3)], &mut data).unwrap();
    /// let row = Table::decode_row(&table, &data).unwrap();
    /// assert_eq!(row.get("k"), Some(&Value::Int(3)));
    /// ```
    pub fn decode_row(table: &Arc<Table>, data: &[u8]) -> Result<Row, ClientError> {
        Table::decode_row_into(table, data, RowStorage::default())
    }

    /// [`Table::decode_row`] into `storage` (the memory of a row no longer
    /// needed, see [`Row::into_storage`]).
    pub(crate) fn decode_row_into(
        table: &Arc<Table>,
        data: &[u8],
        storage: RowStorage,
    ) -> Result<Row, ClientError> {
        let RowStorage {
            data: mut kept,
            mut spans,
        } = storage;
        match &table.full_row {
            Some(full_row) if full_row.matches(data) => full_row.spans(data, &mut spans),
            _ => table.entry_spans(data, &mut spans)?,
        }
        kept.clear();
        kept.extend_from_slice(data);
        Ok(Row {
            table: Arc::clone(table),
            data: kept,
            spans,
            values: OnceLock::new(),
        })
    }

    /// Checks the entries of row data against the table and sets `spans`
    /// to where each column's value is (every column NULL until its entry
    /// comes; a column given twice keeps its last value).
    fn entry_spans(&self, data: &[u8], spans: &mut Vec<Span>) -> Result<(), ClientError> {
        spans.clear();
        spans.resize(self.wire_rules.len(), Span::NULL);
        let spans_by_column = &mut spans[..];
        let rules = &self.wire_rules[..spans_by_column.len()];
        for entry in AttrIter::new(data) {
            let Ok(AttrEntry { column, value }) = entry else {
                return Err(self.malformed_row());
            };
            let id = column as usize;
            if id >= spans_by_column.len() {
                return Err(self.unknown_column_in_row(column));
            }
            spans_by_column[id] = match value {
                None => Span::NULL,
                Some(value) => {
                    let rule = rules[id];
                    if let Err(code) = rule.check(value) {
                        return Err(self.bad_value_in_row(id, code));
                    }
                    // Entries are u16 long and sections far below 4 GiB.
                    let start = (value.as_ptr() as usize - data.as_ptr() as usize) as u32;
                    Span::new(start, value, rule.number)
                }
            };
        }
        Ok(())
    }

    #[cold]
    fn malformed_row(&self) -> ClientError {
        ClientError::Protocol(format!("malformed row data for table {:?}", self.def.name))
    }

    #[cold]
    fn unknown_column_in_row(&self, column: u16) -> ClientError {
        ClientError::Protocol(format!(
            "row data for table {:?} names column id {column}, which it does not have",
            self.def.name
        ))
    }

    #[cold]
    fn bad_value_in_row(&self, id: usize, code: ErrorCode) -> ClientError {
        ClientError::Protocol(format!(
            "row data for table {:?} column {:?}: {code}",
            self.def.name, self.def.columns[id].name
        ))
    }
}

impl std::fmt::Debug for Table {
    /// The definition and map; the decoding aids derived from the
    /// definition are left out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("def", &self.def)
            .field("invalid", &self.invalid)
            .field("map", &self.map)
            .field("map_version", &self.map_version)
            .finish()
    }
}

/// Where one column's value is in a row's data, and the value as an
/// unsigned integer if it is one (read while checking it, so that
/// [`Row::get_u64`] is a lookup).
#[derive(Clone, Copy, PartialEq, Debug)]
struct Span {
    /// Valid when `is_unsigned`.
    unsigned: u64,
    start: u32,
    /// `NULL_LENGTH`: NULL (never a value's length, see `value`).
    length: u16,
    is_unsigned: bool,
}

impl Span {
    const NULL: Span = Span {
        unsigned: 0,
        start: 0,
        length: NULL_LENGTH,
        is_unsigned: false,
    };

    /// The span of `value` (checked), found at `start`.
    #[inline]
    fn new(start: u32, value: &[u8], number: Number) -> Span {
        let unsigned = number.as_u64(value);
        Span {
            unsigned: unsigned.unwrap_or(0),
            start,
            length: value.len() as u16,
            is_unsigned: unsigned.is_some(),
        }
    }
}

/// The row a data node sends for a read of a table whose columns are all
/// fixed-width: every column, in id order, so always the same entry
/// headers at the same places. A row is recognized as one by comparing
/// its bytes outside values with a template's, a word at a time, which
/// saves walking its entries one by one; anything else (a NULL, another
/// order) takes the entry walk.
#[derive(Debug)]
struct FullRow {
    /// A whole row with zero values, as `push_entry` encodes it.
    template: Vec<u8>,
    /// 0xFF on the template's bytes outside values, 0 on value bytes.
    header_mask: Vec<u8>,
    /// Where each column's value is in such a row, by column id.
    spans: Vec<Span>,
    /// The integer columns, by how their values read, as (column id,
    /// offset of the value): a loop per kind needs no per-column dispatch.
    unsigned_32: Vec<(usize, usize)>,
    unsigned_64: Vec<(usize, usize)>,
    signed_32: Vec<(usize, usize)>,
    signed_64: Vec<(usize, usize)>,
}

impl FullRow {
    /// The shape of `table`'s whole rows; `None` if a column has no fixed
    /// width (or the definition cannot be encoded).
    fn of(table: &Table) -> Option<FullRow> {
        let mut template = Vec::new();
        for (id, column) in table.def.columns.iter().enumerate() {
            let zero = match column.column_type {
                ColumnType::Int { unsigned: true } | ColumnType::BigInt { unsigned: true } => {
                    Value::UInt(0)
                }
                ColumnType::Int { .. } | ColumnType::BigInt { .. } => Value::Int(0),
                ColumnType::Double => Value::Double(0.0),
                ColumnType::Char(_) | ColumnType::VarChar(_) | ColumnType::VarBinary(_) => {
                    return None
                }
            };
            let id = u16::try_from(id).ok()?;
            push_entry(
                &mut template,
                id,
                column.column_type,
                column.nullable,
                &zero,
            )
            .ok()?;
        }
        // Where the values are, as the entry walk finds them: the layout
        // stays signal::attr's business.
        let mut spans = Vec::new();
        table.entry_spans(&template, &mut spans).ok()?;
        let mut header_mask = vec![0xFF; template.len()];
        for span in &spans {
            let start = span.start as usize;
            header_mask[start..start + span.length as usize].fill(0);
        }
        let mut full_row = FullRow {
            template,
            header_mask,
            spans: Vec::new(),
            unsigned_32: Vec::new(),
            unsigned_64: Vec::new(),
            signed_32: Vec::new(),
            signed_64: Vec::new(),
        };
        for (id, (span, rule)) in spans.iter().zip(&table.wire_rules).enumerate() {
            let at = (id, span.start as usize);
            match rule.number {
                Number::UInt32 => full_row.unsigned_32.push(at),
                Number::UInt64 => full_row.unsigned_64.push(at),
                Number::Int32 => full_row.signed_32.push(at),
                Number::Int64 => full_row.signed_64.push(at),
                Number::NotInteger => {}
            }
        }
        full_row.spans = spans;
        Some(full_row)
    }

    /// Whether `data` is a whole row: as long as the template, with the
    /// same bytes outside values. Parsing it would then find the
    /// template's entries, each of a length its column's type allows.
    fn matches(&self, data: &[u8]) -> bool {
        if data.len() != self.template.len() {
            return false;
        }
        let word = |bytes: &[u8]| u64::from_le_bytes(bytes.try_into().unwrap_or([0; 8]));
        let mut difference = 0;
        let words = data
            .chunks_exact(8)
            .zip(self.template.chunks_exact(8))
            .zip(self.header_mask.chunks_exact(8));
        for ((data, template), mask) in words {
            difference |= (word(data) ^ word(template)) & word(mask);
        }
        let tail = data.len() - data.len() % 8;
        let bytes = data[tail..]
            .iter()
            .zip(&self.template[tail..])
            .zip(&self.header_mask[tail..]);
        for ((data, template), mask) in bytes {
            difference |= u64::from((data ^ template) & mask);
        }
        difference == 0
    }

    /// The spans of a row that [`FullRow::matches`]: the template's, with
    /// the row's numbers.
    fn spans(&self, data: &[u8], spans: &mut Vec<Span>) {
        spans.clear();
        spans.extend_from_slice(&self.spans);
        // The template's integers are 0: unsigned, as every unsigned
        // column's value is; a signed one is unsigned when not negative.
        for &(column, offset) in &self.unsigned_32 {
            if let (Some(span), Some(bytes)) = (spans.get_mut(column), bytes_at(data, offset)) {
                span.unsigned = u64::from(u32::from_le_bytes(bytes));
            }
        }
        for &(column, offset) in &self.unsigned_64 {
            if let (Some(span), Some(bytes)) = (spans.get_mut(column), bytes_at(data, offset)) {
                span.unsigned = u64::from_le_bytes(bytes);
            }
        }
        for &(column, offset) in &self.signed_32 {
            if let (Some(span), Some(bytes)) = (spans.get_mut(column), bytes_at(data, offset)) {
                let unsigned = u64::try_from(i32::from_le_bytes(bytes)).ok();
                span.unsigned = unsigned.unwrap_or(0);
                span.is_unsigned = unsigned.is_some();
            }
        }
        for &(column, offset) in &self.signed_64 {
            if let (Some(span), Some(bytes)) = (spans.get_mut(column), bytes_at(data, offset)) {
                let unsigned = u64::try_from(i64::from_le_bytes(bytes)).ok();
                span.unsigned = unsigned.unwrap_or(0);
                span.is_unsigned = unsigned.is_some();
            }
        }
    }
}

/// The `N` bytes of `data` at `offset`, if it has them.
#[inline]
fn bytes_at<const N: usize>(data: &[u8], offset: usize) -> Option<[u8; N]> {
    data.get(offset..offset.checked_add(N)?)?.try_into().ok()
}

/// The memory of a row, kept for the next row decoded.
#[derive(Default, Debug)]
pub(crate) struct RowStorage {
    data: Vec<u8>,
    spans: Vec<Span>,
}

/// One row read back, its values by column id and by name.
///
/// ```
/// # use signal::schema::{ColumnDef, ColumnType, TableDef};
/// # let def = TableDef { indexes: vec![], revision: 0, id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
///     partition_key: Vec::new(),
/// #   columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: false }, nullable: false }] };
/// use client::{Table, Value};
/// use std::sync::Arc;
/// let table = Arc::new(Table::new(def));
/// let row = Table::decode_row(&table, &[]).unwrap();
/// assert_eq!(row.get(0u16), Some(&Value::Null));
/// ```
#[derive(Clone)]
pub struct Row {
    table: Arc<Table>,
    /// The row data as received (checked against the table).
    data: Vec<u8>,
    /// Each column's value in `data`, by column id (one per column).
    spans: Vec<Span>,
    /// The values by column id, built on first use: a reader that checks
    /// numbers with [`Row::get_u64`] never pays for them.
    values: OnceLock<Vec<Value>>,
}

impl Row {
    /// The value of `column` (by name or id); `None` if there is no such column.
    ///
    /// ```
    /// # use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// # let def = TableDef { indexes: vec![], revision: 0, id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
    ///     partition_key: Vec::new(),
    /// #   columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: false }, nullable: false }] };
    /// # let table = std::sync::Arc::new(client::Table::new(def));
    /// let row = client::Table::decode_row(&table, &[]).unwrap();
    /// assert!(row.get("missing").is_none());
    /// ```
    pub fn get<C: ColumnSelector>(&self, column: C) -> Option<&Value> {
        let id = column.column_id(&self.table.def)?;
        self.values().get(id as usize)
    }

    /// The value of `column` as an unsigned integer, read straight from the
    /// row data: `row.get(column).and_then(Value::as_u64)` without
    /// building any [`Value`] (`None` for no such column, NULL, a negative
    /// number or a column that is not an integer).
    ///
    /// ```
    /// # use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// # let def = TableDef { indexes: vec![], revision: 0, id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
    ///     partition_key: Vec::new(),
    /// #   columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: false }, nullable: false }] };
    /// use client::{Table, Value};
    /// let table = std::sync::Arc::new(Table::new(def));
    /// let mut data = Vec::new();
    /// table.encode_key(&[Value::Int(3)], &mut data).unwrap();
    /// let row = Table::decode_row(&table, &data).unwrap();
    /// assert_eq!(row.get_u64("k"), Some(3));
    /// assert_eq!(row.get_u64(7u16), None);
    /// ```
    pub fn get_u64<C: ColumnSelector>(&self, column: C) -> Option<u64> {
        let id = column.column_id(&self.table.def)?;
        let span = self.spans.get(id as usize)?;
        span.is_unsigned.then_some(span.unsigned)
    }

    /// All values, indexed by column id.
    ///
    /// ```
    /// # use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// # let def = TableDef { indexes: vec![], revision: 0, id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
    ///     partition_key: Vec::new(),
    /// #   columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: false }, nullable: false }] };
    /// # let table = std::sync::Arc::new(client::Table::new(def));
    /// let row = client::Table::decode_row(&table, &[]).unwrap();
    /// assert_eq!(row.values().len(), 1);
    /// ```
    pub fn values(&self) -> &[Value] {
        self.values.get_or_init(|| self.decode_values())
    }

    fn decode_values(&self) -> Vec<Value> {
        (0..self.spans.len().min(self.table.def.columns.len()))
            .map(|column| self.decode_value(column))
            .collect()
    }

    /// Column `column`'s value (by column id), decoded from the row data
    /// without touching [`Row::values`]: for a caller that converts each
    /// value into its own vector (no vector of these in between). NULL
    /// for a column the table does not have.
    ///
    /// ```
    /// # use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// # let def = TableDef { indexes: vec![], revision: 0, id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
    ///     partition_key: Vec::new(),
    /// #   columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: false }, nullable: true }] };
    /// # let table = std::sync::Arc::new(client::Table::new(def));
    /// let row = client::Table::decode_row(&table, &[]).unwrap();
    /// assert_eq!(row.decode_value(0), client::Value::Null);
    /// assert_eq!(row.decode_value(7), client::Value::Null);
    /// ```
    pub fn decode_value(&self, column: usize) -> Value {
        let (Some(&span), Some(definition)) =
            (self.spans.get(column), self.table.def.columns.get(column))
        else {
            return Value::Null;
        };
        match self.bytes_of(span) {
            None => Value::Null,
            Some(bytes) => checked_value(definition.column_type, bytes),
        }
    }

    /// The values by column id, taken out of the row: what
    /// [`Row::values`] shows, without copying them.
    ///
    /// ```
    /// # use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// # let def = TableDef { indexes: vec![], revision: 0, id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
    ///     partition_key: Vec::new(),
    /// #   columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: false }, nullable: true }] };
    /// # let table = std::sync::Arc::new(client::Table::new(def));
    /// let row = client::Table::decode_row(&table, &[]).unwrap();
    /// assert_eq!(row.into_values(), vec![client::Value::Null]);
    /// ```
    pub fn into_values(mut self) -> Vec<Value> {
        self.values();
        self.values.take().unwrap_or_default()
    }

    /// The table the row belongs to.
    ///
    /// ```
    /// # use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// # let def = TableDef { indexes: vec![], revision: 0, id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
    ///     partition_key: Vec::new(),
    /// #   columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: false }, nullable: false }] };
    /// # let table = std::sync::Arc::new(client::Table::new(def));
    /// let row = client::Table::decode_row(&table, &[]).unwrap();
    /// assert_eq!(row.table().name(), "t");
    /// ```
    pub fn table(&self) -> &Arc<Table> {
        &self.table
    }

    /// Column `column`'s value as the row data holds it, the bytes a data
    /// node's filter compares (`None`: NULL or no such column).
    pub(crate) fn raw(&self, column: usize) -> Option<&[u8]> {
        self.bytes_of(*self.spans.get(column)?)
    }

    /// The bytes of a non-NULL value (`None`: NULL).
    fn bytes_of(&self, span: Span) -> Option<&[u8]> {
        if span.length == NULL_LENGTH {
            return None;
        }
        let start = span.start as usize;
        self.data.get(start..start + span.length as usize)
    }

    /// The row's memory, for the next row decoded.
    pub(crate) fn into_storage(self) -> RowStorage {
        RowStorage {
            data: self.data,
            spans: self.spans,
        }
    }
}

impl std::fmt::Debug for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Row")
            .field("table", &self.table)
            .field("values", &self.values())
            .finish()
    }
}

/// Rows go to and are shared between threads: building their values on
/// first use must not take that away.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Row>();
};

#[cfg(test)]
mod tests {
    use super::*;
    use signal::schema::{ColumnDef, ColumnType};

    fn table() -> Arc<Table> {
        let column = |name: &str, column_type, nullable| ColumnDef {
            name: name.into(),
            column_type,
            nullable,
        };
        Arc::new(Table::new(TableDef {
            indexes: Vec::new(),
            revision: 0,
            id: 4,
            version: 2,
            name: "accounts".into(),
            partitions: 2,
            // Key order differs from column order on purpose.
            primary_key: vec![1, 0],
            columns: vec![
                column("region", ColumnType::VarChar(4), false),
                column("id", ColumnType::BigInt { unsigned: true }, false),
                column("balance", ColumnType::Double, false),
                column("note", ColumnType::VarBinary(3), true),
            ],
            partition_key: Vec::new(),
        }))
    }

    #[test]
    fn key_sections_follow_key_order_and_match_the_signal_hash() {
        let table = table();
        let mut key = Vec::new();
        table
            .encode_key(&[Value::UInt(9), Value::from("eu")], &mut key)
            .unwrap();
        let entries: Vec<_> = AttrIter::new(&key).map(Result::unwrap).collect();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].column, 1);
        assert_eq!(entries[0].value, Some(&9u64.to_le_bytes()[..]));
        assert_eq!(entries[1].column, 0);
        assert_eq!(entries[1].value, Some(&b"eu"[..]));
        // The data node checks and hashes keys with this function.
        assert!(signal::attr::key_hash(table.def(), &key).is_ok());
    }

    #[test]
    fn bad_keys_are_refused_and_leave_the_buffer_alone() {
        let table = table();
        let mut key = vec![1, 2];
        let error = table
            .encode_key(&[Value::UInt(9), Value::from("europe")], &mut key)
            .unwrap_err();
        assert_eq!(error.code(), Some(ErrorCode::ValueTooLong));
        assert!(error.to_string().contains("region"), "{error}");
        assert_eq!(key, [1, 2]);
        let error = table.encode_key(&[Value::UInt(9)], &mut key).unwrap_err();
        assert_eq!(error.code(), Some(ErrorCode::BadRequest));
        let error = table
            .encode_key(&[Value::Null, Value::from("eu")], &mut key)
            .unwrap_err();
        assert_eq!(error.code(), Some(ErrorCode::NullNotAllowed));
    }

    #[test]
    fn whole_rows_yield_attr_and_key_sections() {
        let table = table();
        let (mut attr, mut key) = (Vec::new(), Vec::new());
        table
            .encode_row(
                &[
                    ("balance", Value::Double(2.5)),
                    ("ID", Value::UInt(7)),
                    ("region", Value::from("us")),
                ],
                &mut attr,
                Some(&mut key),
            )
            .unwrap();
        let mut expected_key = Vec::new();
        table
            .encode_key(&[Value::UInt(7), Value::from("us")], &mut expected_key)
            .unwrap();
        assert_eq!(key, expected_key);
        let row = Table::decode_row(&table, &attr).unwrap();
        assert_eq!(row.get("balance"), Some(&Value::Double(2.5)));
        assert_eq!(row.get(1u16), Some(&Value::UInt(7)));
        assert_eq!(row.get("note"), Some(&Value::Null));
        assert_eq!(row.get("region").and_then(Value::as_str), Some("us"));
    }

    #[test]
    fn row_rules_are_checked_before_sending() {
        let table = table();
        let mut attr = Vec::new();
        let mut key = Vec::new();
        let missing = table
            .encode_row(&[("id", Value::UInt(1))], &mut attr, Some(&mut key))
            .unwrap_err();
        assert_eq!(missing.code(), Some(ErrorCode::NullNotAllowed));
        let twice = table
            .encode_row(
                &[(2u16, Value::Double(1.0)), (2u16, Value::Double(2.0))],
                &mut attr,
                None,
            )
            .unwrap_err();
        assert_eq!(twice.code(), Some(ErrorCode::BadRequest));
        let key_update = table
            .encode_row(&[("id", Value::UInt(1))], &mut attr, None)
            .unwrap_err();
        assert!(
            key_update.to_string().contains("primary key"),
            "{key_update}"
        );
        let unknown = table
            .encode_row(&[("colour", Value::UInt(1))], &mut attr, None)
            .unwrap_err();
        assert_eq!(unknown.code(), Some(ErrorCode::UnknownColumn));
        assert!(attr.is_empty(), "failed encodes leave nothing behind");
        table
            .encode_row(&[("note", Value::Null)], &mut attr, None)
            .unwrap();
        assert_eq!(attr, [3, 0, 0xFF, 0xFF]);
    }

    /// A table whose columns are all fixed-width: whole rows take the
    /// template comparison.
    fn numbers() -> Arc<Table> {
        let column = |name: &str, column_type, nullable| ColumnDef {
            name: name.into(),
            column_type,
            nullable,
        };
        Arc::new(Table::new(TableDef {
            indexes: Vec::new(),
            revision: 0,
            id: 5,
            version: 1,
            name: "numbers".into(),
            partitions: 1,
            primary_key: vec![0],
            columns: vec![
                column("k", ColumnType::Int { unsigned: true }, false),
                column("small", ColumnType::Int { unsigned: false }, true),
                column("big", ColumnType::BigInt { unsigned: false }, true),
                column("huge", ColumnType::BigInt { unsigned: true }, true),
                column("real", ColumnType::Double, true),
            ],
            partition_key: Vec::new(),
        }))
    }

    #[test]
    fn whole_rows_decode_as_the_entry_walk_decodes_them() {
        let table = numbers();
        let full_row = table.full_row.as_ref().expect("fixed-width columns");
        assert!(
            self::table().full_row.is_none(),
            "a VARCHAR has no one width"
        );
        let mut rng = stdx::mix::XorShift::new(33);
        for round in 0..3_000 {
            let mut values = vec![
                (0u16, Value::UInt(rng.below(1 << 32))),
                (1, Value::Int(rng.next_u64() as i32 as i64)),
                (2, Value::Int(rng.next_u64() as i64)),
                (3, Value::UInt(rng.next_u64())),
                (4, Value::Double(rng.next_u64() as f64 / 7.0)),
            ];
            // Whole rows in id order; then other orders and NULLs, which
            // take the entry walk.
            let whole = round % 3 == 0;
            if !whole {
                values.swap(1, 1 + rng.below(4) as usize);
                if round % 3 == 1 {
                    values[1 + rng.below(4) as usize].1 = Value::Null;
                }
            }
            let (mut data, mut key) = (Vec::new(), Vec::new());
            table
                .encode_row(&values, &mut data, Some(&mut key))
                .unwrap();
            let in_id_order = values.windows(2).all(|pair| pair[0].0 < pair[1].0);
            let no_null = values.iter().all(|(_, value)| !value.is_null());
            assert_eq!(full_row.matches(&data), in_id_order && no_null);
            let row = Table::decode_row(&table, &data).unwrap();
            let mut walked = Vec::new();
            table.entry_spans(&data, &mut walked).unwrap();
            assert_eq!(row.spans, walked);
            for (column, value) in &values {
                assert_eq!(row.get(*column), Some(value));
                assert_eq!(row.get_u64(*column), value.as_u64(), "{value:?}");
            }
            // A changed entry header is no whole row: the walk judges it.
            let mut damaged = data.clone();
            damaged[rng.below(4) as usize] ^= 1 << rng.below(8);
            assert!(!full_row.matches(&damaged));
            if let Ok(row) = Table::decode_row(&table, &damaged) {
                table.entry_spans(&damaged, &mut walked).unwrap();
                assert_eq!(row.spans, walked);
            }
        }
    }

    #[test]
    fn a_decoded_row_reuses_the_memory_of_an_earlier_one() {
        let table = numbers();
        let values = [
            (0u16, Value::UInt(1)),
            (1, Value::Int(-1)),
            (2, Value::Int(2)),
            (3, Value::UInt(3)),
            (4, Value::Double(0.5)),
        ];
        let (mut data, mut key) = (Vec::new(), Vec::new());
        table
            .encode_row(&values, &mut data, Some(&mut key))
            .unwrap();
        let first = Table::decode_row(&table, &data).unwrap();
        let storage = first.into_storage();
        let (data_memory, spans_memory) = (storage.data.as_ptr(), storage.spans.as_ptr());
        let second = Table::decode_row_into(&table, &data, storage).unwrap();
        assert_eq!(second.data.as_ptr(), data_memory);
        assert_eq!(second.spans.as_ptr(), spans_memory);
        assert_eq!(second.get_u64("small"), None, "negative");
        assert_eq!(second.get_u64("real"), None, "not an integer");
        assert_eq!(second.get("real"), Some(&Value::Double(0.5)));
        assert_eq!(second.values().len(), 5);
    }

    #[test]
    fn malformed_row_data_is_a_protocol_error() {
        let table = table();
        for bad in [
            &[1u8, 0, 9][..],
            &[9, 0, 0, 0][..],
            &[2, 0, 3, 0, 1, 2, 3][..],
        ] {
            let error = Table::decode_row(&table, bad).unwrap_err();
            assert!(matches!(error, ClientError::Protocol(_)), "{error}");
        }
    }

    #[test]
    fn random_row_data_decodes_to_a_row_or_a_protocol_error() {
        let table = table();
        let mut rng = stdx::mix::XorShift::new(21);
        let mut decoded = 0;
        for _ in 0..20_000 {
            let mut data = Vec::new();
            if rng.below(4) == 0 {
                data = (0..rng.below(24)).map(|_| rng.next_u64() as u8).collect();
            } else {
                // Entries with plausible and implausible column ids and lengths.
                for _ in 0..rng.below(6) {
                    let column = match rng.below(6) {
                        0 => rng.next_u64() as u16,
                        _ => rng.below(5) as u16,
                    };
                    let length = match rng.below(5) {
                        0 => signal::attr::NULL_LENGTH,
                        1 => rng.next_u64() as u16,
                        _ => rng.below(10) as u16,
                    };
                    data.extend_from_slice(&column.to_le_bytes());
                    data.extend_from_slice(&length.to_le_bytes());
                    let present = if length == signal::attr::NULL_LENGTH {
                        0
                    } else {
                        (length as u64).min(rng.below(12))
                    };
                    data.extend((0..present).map(|_| rng.next_u64() as u8));
                }
            }
            match Table::decode_row(&table, &data) {
                Ok(row) => {
                    decoded += 1;
                    assert_eq!(row.values().len(), table.def().columns.len());
                    for (value, column) in row.values().iter().zip(&table.def().columns) {
                        if let Value::Bytes(bytes) = value {
                            assert!(bytes.len() <= column.column_type.max_value_bytes());
                        }
                    }
                }
                Err(error) => assert!(matches!(error, ClientError::Protocol(_)), "{error}"),
            }
        }
        assert!(decoded > 1000, "too few rows decoded: {decoded}");
    }

    #[test]
    fn a_table_built_from_an_invalid_definition_refuses_to_encode() {
        let valid = table().def().clone();
        let column = |name: String, nullable| ColumnDef {
            name,
            column_type: ColumnType::Int { unsigned: false },
            nullable,
        };
        let broken = [
            TableDef {
                primary_key: vec![9],
                ..valid.clone()
            },
            TableDef {
                primary_key: vec![3],
                ..valid.clone()
            },
            TableDef {
                primary_key: Vec::new(),
                ..valid.clone()
            },
            TableDef {
                columns: (0..300).map(|i| column(format!("c{i}"), i > 0)).collect(),
                primary_key: vec![0],
                ..valid.clone()
            },
        ];
        for def in broken {
            let table = Arc::new(Table::new(def));
            let key = [Value::UInt(1)];
            let row = [(299usize, Value::Int(1)), (0, Value::Int(2))];
            let (mut attr, mut key_out) = (Vec::new(), Vec::new());
            let results = [
                table.encode_key(&key, &mut key_out),
                table.encode_row(&row, &mut attr, Some(&mut key_out)),
                table.encode_row(&row, &mut attr, None),
            ];
            for result in results {
                let error = result.expect_err("an invalid definition encodes nothing");
                assert_eq!(error.code(), Some(ErrorCode::BadTableDefinition), "{error}");
            }
            assert!(attr.is_empty() && key_out.is_empty());
            // Decoding needs no valid definition: ids are checked one by one.
            assert!(Table::decode_row(&table, &[0, 0, 0xFF, 0xFF]).is_ok());
        }
    }
}
