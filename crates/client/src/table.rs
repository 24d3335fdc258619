//! A table as the client uses it: the definition fetched from `dict`, plus
//! the helpers that turn application values into key and attribute sections
//! and row data back into [`Row`]s.
//!
//! Column lookups by name scan the (at most 256) columns; hot loops pass
//! column ids (`u16`) instead, which cost nothing to resolve.

use crate::error::ClientError;
use crate::value::{decode_value, push_entry, Value};
use signal::attr::AttrIter;
use signal::schema::{TableDef, MAX_COLUMNS};
use signal::signals::{PartitionMap, PartitionPlacement};
use signal::ErrorCode;
use std::sync::Arc;

/// Something that names a column: its name (`&str`, `String`) or its id
/// (`u16`, `usize`: the index in the table's columns).
///
/// ```
/// use client::{ColumnSelector, Table};
/// use signal::schema::{ColumnDef, ColumnType, TableDef};
/// let table = Table::new(TableDef {
///     id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
///     columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: false }, nullable: false }],
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
///     id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
///     columns: vec![
///         ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: true }, nullable: false },
///         ColumnDef { name: "v".into(), column_type: ColumnType::VarChar(8), nullable: true },
///     ],
/// });
/// let mut key = Vec::new();
/// table.encode_key(&[Value::UInt(5)], &mut key).unwrap();
/// assert_eq!(key, [0, 0, 4, 0, 5, 0, 0, 0]);
/// ```
#[derive(Debug)]
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
}

impl Table {
    /// Wraps a definition (as fetched from `dict`, with id and version).
    /// A definition that breaks a rule of [`TableDef::validate`] makes a
    /// table whose encoders refuse with `BadTableDefinition`.
    ///
    /// ```
    /// # use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// # let def = TableDef { id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
    /// #   columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Double, nullable: false }] };
    /// let table = client::Table::new(def);
    /// assert_eq!(table.name(), "t");
    /// ```
    pub fn new(def: TableDef) -> Table {
        let invalid = def.validate().err();
        Table {
            def,
            invalid,
            map: None,
            map_version: 0,
        }
    }

    /// A table with its partition map, current as of the cluster's
    /// distribution version `map_version` (as `Cluster::table` builds it
    /// from GET_TABINFO_CONF).
    ///
    /// ```
    /// # use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// # let def = TableDef { id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
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
        Table {
            map: Some(Arc::new(map)),
            map_version,
            ..Table::new(def)
        }
    }

    /// The partition map, when the table came from dict.
    ///
    /// ```
    /// # use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// # let def = TableDef { id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
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
    /// # let def = TableDef { id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
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
    /// # let def = TableDef { id: 1, version: 1, name: "t".into(), partitions: 4, primary_key: vec![0],
    /// #   columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: false }, nullable: false }] };
    /// let table = client::Table::new(def);
    /// assert!(table.partition(&[client::Value::Int(9)]).unwrap() < 4);
    /// ```
    pub fn partition(&self, key: &[Value]) -> Result<u32, ClientError> {
        let mut bytes = Vec::new();
        self.encode_key(key, &mut bytes)?;
        self.partition_of_key_section(&bytes)
    }

    /// [`Table::partition`] for an encoded key section.
    pub(crate) fn partition_of_key_section(&self, key: &[u8]) -> Result<u32, ClientError> {
        let hash = signal::attr::key_hash(&self.def, key).map_err(|code| ClientError::Invalid {
            code,
            detail: format!("a key of table {:?}", self.def.name),
        })?;
        let bucket = signal::partition::bucket(hash);
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
    /// # let def = TableDef { id: 1, version: 1, name: "t".into(), partitions: 4, primary_key: vec![0],
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
    /// # let def = TableDef { id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
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
    /// # let def = TableDef { id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
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
    /// # let def = TableDef { id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
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
    /// # let def = TableDef { id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
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
    /// # let def = TableDef { id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
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
    /// Columns the data does not mention are NULL.
    ///
    /// ```
    /// # use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// # let def = TableDef { id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
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
        let def = &table.def;
        let mut values = vec![Value::Null; def.columns.len()];
        for entry in AttrIter::new(data) {
            let entry = entry.map_err(|_| {
                ClientError::Protocol(format!("malformed row data for table {:?}", def.name))
            })?;
            let Some(column) = def.columns.get(entry.column as usize) else {
                return Err(ClientError::Protocol(format!(
                    "row data for table {:?} names column id {}, which it does not have",
                    def.name, entry.column
                )));
            };
            values[entry.column as usize] =
                decode_value(column.column_type, entry.value).map_err(|code| {
                    ClientError::Protocol(format!(
                        "row data for table {:?} column {:?}: {code}",
                        def.name, column.name
                    ))
                })?;
        }
        Ok(Row {
            table: Arc::clone(table),
            values,
        })
    }
}

/// One row read back, its values by column id and by name.
///
/// ```
/// # use signal::schema::{ColumnDef, ColumnType, TableDef};
/// # let def = TableDef { id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
/// #   columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: false }, nullable: false }] };
/// use client::{Table, Value};
/// use std::sync::Arc;
/// let table = Arc::new(Table::new(def));
/// let row = Table::decode_row(&table, &[]).unwrap();
/// assert_eq!(row.get(0u16), Some(&Value::Null));
/// ```
#[derive(Clone, Debug)]
pub struct Row {
    table: Arc<Table>,
    values: Vec<Value>,
}

impl Row {
    /// The value of `column` (by name or id); `None` if there is no such column.
    ///
    /// ```
    /// # use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// # let def = TableDef { id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
    /// #   columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: false }, nullable: false }] };
    /// # let table = std::sync::Arc::new(client::Table::new(def));
    /// let row = client::Table::decode_row(&table, &[]).unwrap();
    /// assert!(row.get("missing").is_none());
    /// ```
    pub fn get<C: ColumnSelector>(&self, column: C) -> Option<&Value> {
        let id = column.column_id(&self.table.def)?;
        self.values.get(id as usize)
    }

    /// All values, indexed by column id.
    ///
    /// ```
    /// # use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// # let def = TableDef { id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
    /// #   columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: false }, nullable: false }] };
    /// # let table = std::sync::Arc::new(client::Table::new(def));
    /// let row = client::Table::decode_row(&table, &[]).unwrap();
    /// assert_eq!(row.values().len(), 1);
    /// ```
    pub fn values(&self) -> &[Value] {
        &self.values
    }

    /// The table the row belongs to.
    ///
    /// ```
    /// # use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// # let def = TableDef { id: 1, version: 1, name: "t".into(), partitions: 1, primary_key: vec![0],
    /// #   columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: false }, nullable: false }] };
    /// # let table = std::sync::Arc::new(client::Table::new(def));
    /// let row = client::Table::decode_row(&table, &[]).unwrap();
    /// assert_eq!(row.table().name(), "t");
    /// ```
    pub fn table(&self) -> &Arc<Table> {
        &self.table
    }
}

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
