//! The SQL node's view of the schema, all of it kept in the cluster so
//! every SQL node sees the same (docs/design/0027-sql-node.md, "Schema"):
//!
//! - a SQL table `db.t` is the cluster table `db/t` (NDB names its tables
//!   `db/def/t` the same way);
//! - databases are the rows of the system table `tessera$databases`;
//! - what SQL declares that the cluster's definition has no place for
//!   (the declared type, `DEFAULT`, `AUTO_INCREMENT`) is a row of
//!   `tessera$tables`, keyed by the table's name and stamped with its id
//!   and version so a row left by a dropped table of the same name is
//!   never taken for the new one's; a table without its row (created by
//!   the native API, or a SQL node that died between the two writes) reads
//!   with the types its definition gives and no defaults;
//! - AUTO_INCREMENT values come from `tessera$auto_increment` in ranges
//!   (`auto_increment`).
//!
//! Definitions are cached per SQL node; a statement that finds its cached
//! definition stale (the table dropped and created again, or changed by
//! another SQL node) drops it from the cache and plans again.

use crate::checks::CheckDeclaration;
use crate::error::{codes, SqlError, SqlResult};
use crate::types::{self, SqlType};
use crate::value;
use crate::value::Value;
use client::{Cluster, ColumnDef, ColumnType, Commit, LockMode, Table, TableDef};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The system table of databases.
pub const DATABASES: &str = "tessera$databases";
/// The system table of SQL declarations.
pub const TABLES: &str = "tessera$tables";
/// The system table of AUTO_INCREMENT counters.
pub const AUTO_INCREMENT: &str = "tessera$auto_increment";

/// Longest declaration (JSON) a table's row holds.
const MAX_DECLARATION_BYTES: u16 = 16_000;

/// A column as SQL declared it.
#[derive(Clone, Debug, PartialEq)]
pub struct SqlColumn {
    /// Its name.
    pub name: String,
    /// Its SQL type (how the cluster stores it: `SqlType::storage`).
    pub sql_type: SqlType,
    /// NULL allowed.
    pub nullable: bool,
    /// The DEFAULT, fitted to the column (`None`: no DEFAULT clause).
    pub default: Option<Value>,
    /// AUTO_INCREMENT.
    pub auto_increment: bool,
    /// `AS (expr) [VIRTUAL | STORED]`: computed on every write
    /// (`crate::generated`).
    pub generated: Option<crate::generated::Generated>,
}

/// A SQL table: the cluster's table and its SQL declarations.
#[derive(Debug)]
pub struct SqlTable {
    /// Its database.
    pub database: String,
    /// Its name in the database.
    pub name: String,
    /// The cluster's table.
    pub table: Arc<Table>,
    /// Its columns, in the cluster definition's order.
    pub columns: Vec<SqlColumn>,
    /// The AUTO_INCREMENT column's index.
    pub auto_increment: Option<usize>,
    /// Its declarations row was found (else its columns read as their
    /// cluster types, with no defaults).
    pub declared: bool,
    /// An information_schema view: no cluster table, rows made by the
    /// SQL node.
    pub view: Option<crate::information_schema::View>,
    /// A derived table (`FROM (SELECT ...) AS d`): no cluster table, its
    /// rows those of the statement's subquery in this slot.
    pub derived: Option<usize>,
    /// Its CHECK constraints, compiled over its row.
    pub checks: Vec<crate::checks::CheckConstraint>,
    /// Its generated columns, compiled over its row, in column order.
    pub generated: Vec<crate::generated::GeneratedColumn>,
}

impl SqlTable {
    /// The cluster's definition.
    pub fn def(&self) -> &TableDef {
        self.table.def()
    }

    /// The index of column `name` (case-insensitive, as MySQL's); the
    /// hidden key has none.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns
            .iter()
            .position(|column| column.name.eq_ignore_ascii_case(name) && !column.is_hidden())
    }

    /// The hidden key's index, when the table was created without a
    /// primary key.
    pub fn hidden_key(&self) -> Option<usize> {
        self.columns.iter().position(SqlColumn::is_hidden)
    }

    /// Its columns as SQL sees them: all but the hidden key, with their
    /// indexes (which are the cluster's column ids).
    pub fn visible_columns(&self) -> impl Iterator<Item = (usize, &SqlColumn)> {
        self.columns
            .iter()
            .enumerate()
            .filter(|(_, column)| !column.is_hidden())
    }

    /// The primary key's columns, by index.
    pub fn key_columns(&self) -> Vec<usize> {
        self.def().primary_key.iter().map(|c| *c as usize).collect()
    }

    /// The columns of ordered index `index`, or of the primary key for
    /// `None`, in the index's order; `None` when no such index exists.
    pub fn index_columns(&self, index: Option<&str>) -> Option<Vec<usize>> {
        match index {
            None => Some(self.key_columns()),
            Some(name) => Some(
                self.def()
                    .index(name)?
                    .columns
                    .iter()
                    .map(|c| *c as usize)
                    .collect(),
            ),
        }
    }

    /// A view's rows, read through its query (a derived table in the
    /// view's database, under its name).
    pub fn is_view(&self) -> bool {
        self.derived.is_some() && !self.database.is_empty()
    }

    /// Its rows are made by the SQL node (an information_schema view or a
    /// derived table): read whole, never locked, no access path but a
    /// full read.
    pub fn made_by_sql_node(&self) -> bool {
        self.view.is_some() || self.derived.is_some()
    }

    /// The cluster table's name, `database/name`.
    pub fn cluster_name(&self) -> String {
        cluster_name(&self.database, &self.name)
    }
}

/// Error 1044 for a change to information_schema, which no one may make
/// (its views are the SQL node's; root included, as in MySQL).
pub fn refuse_information_schema(database: &str) -> SqlResult<()> {
    match crate::information_schema::is_it(database) {
        true => Err(SqlError::new(
            codes::ACCESS_DENIED_FOR_DB,
            format!(
                "Access denied to database '{}': its views are made by the SQL node",
                crate::information_schema::NAME
            ),
        )),
        false => Ok(()),
    }
}

/// The cluster's name of SQL table `database.table`.
pub fn cluster_name(database: &str, table: &str) -> String {
    format!("{database}/{table}")
}

/// Checks a database or table name: MySQL allows more, the cluster
/// stores ASCII letters, digits, `_` and `$`, at most 64 bytes.
pub fn check_name(what: &str, name: &str) -> SqlResult<()> {
    let code = match what {
        "database" => codes::WRONG_DB_NAME,
        _ => codes::WRONG_TABLE_NAME,
    };
    if name.len() > 64 {
        return Err(SqlError::new(
            codes::TOO_LONG_IDENT,
            format!("Identifier name '{name}' is too long"),
        ));
    }
    let fine = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$');
    if !fine {
        return Err(SqlError::new(
            code,
            format!(
                "Incorrect {what} name '{name}' (Tessera takes ASCII letters, digits, '_' and '$')"
            ),
        ));
    }
    Ok(())
}

/// The column a cluster type reads as when no declaration is stored.
fn undeclared(column: &ColumnDef) -> SqlColumn {
    SqlColumn {
        name: column.name.clone(),
        sql_type: SqlType::of_storage(column.column_type),
        nullable: column.nullable,
        default: None,
        auto_increment: false,
        generated: None,
    }
}

/// The column a table created without a primary key is keyed by (NDB's
/// hidden key): unsigned 64-bit values from a counter of its own, never
/// shown to SQL (docs/design/0038-hidden-primary-key.md).
pub const HIDDEN_KEY: &str = "$PK";

impl SqlColumn {
    /// The hidden key: no statement names it, `*` leaves it out, and no
    /// description of the table shows it.
    pub fn is_hidden(&self) -> bool {
        self.name == HIDDEN_KEY
    }

    /// How the cluster stores it.
    pub fn storage(&self) -> client::ColumnType {
        self.sql_type.storage()
    }
}

/// The declarations of `columns` and `checks` as the JSON
/// `tessera$tables` keeps.
fn encode_declarations(columns: &[SqlColumn], checks: &[CheckDeclaration]) -> Vec<u8> {
    encode_declarations_with(columns, checks, None)
}

/// As `encode_declarations`, with the definition of a TRUNCATE under way
/// (`"truncating"`, the encoded definition in hex): what a SQL node that
/// finds the cluster table gone creates again (`Catalog::table`).
fn encode_declarations_with(
    columns: &[SqlColumn],
    checks: &[CheckDeclaration],
    truncating: Option<&TableDef>,
) -> Vec<u8> {
    let list: Vec<serde_json::Value> = columns
        .iter()
        .map(|column| {
            let default = match &column.default {
                None => serde_json::Value::Null,
                Some(Value::Null) => serde_json::json!({ "null": true }),
                Some(value) => serde_json::json!({ "text": value::display(value) }),
            };
            let mut declared = serde_json::json!({
                "name": column.name,
                "declared": column.sql_type.declared(),
                "default": default,
                "auto_increment": column.auto_increment,
            });
            if let Some(generated) = &column.generated {
                declared["generated"] = crate::generated::to_json(generated);
            }
            declared
        })
        .collect();
    let mut json = serde_json::json!({ "columns": list });
    if !checks.is_empty() {
        json["checks"] = crate::checks::to_json(checks);
    }
    if let Some(def) = truncating {
        let hex: String = def
            .encode_to_vec()
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        json["truncating"] = serde_json::Value::String(hex);
    }
    json.to_string().into_bytes()
}

/// The definition a TRUNCATE under way left in the declarations `json`.
fn truncating_definition(json: &[u8]) -> Option<TableDef> {
    let parsed: serde_json::Value = serde_json::from_slice(json).ok()?;
    let hex = parsed.get("truncating")?.as_str()?;
    if hex.len() % 2 != 0 || !hex.is_ascii() {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&hex[at..at + 2], 16).ok())
        .collect();
    TableDef::decode(&bytes?).ok()
}

/// The columns of `def` with the declarations in `json` laid over them
/// (by name; a column the JSON does not know reads undeclared).
/// The CHECK constraints the declarations `json` keeps.
fn decode_checks(json: &[u8]) -> Vec<CheckDeclaration> {
    let parsed: Option<serde_json::Value> = serde_json::from_slice(json).ok();
    crate::checks::from_json(parsed.as_ref().and_then(|p| p.get("checks")))
}

fn decode_declarations(def: &TableDef, json: &[u8]) -> Option<Vec<SqlColumn>> {
    let parsed: serde_json::Value = serde_json::from_slice(json).ok()?;
    let list = parsed.get("columns")?.as_array()?;
    let mut columns: Vec<SqlColumn> = def.columns.iter().map(undeclared).collect();
    for entry in list {
        let name = entry.get("name")?.as_str()?;
        let Some(at) = columns.iter().position(|c| c.name == name) else {
            continue;
        };
        let (column, stored) = (&mut columns[at], def.columns[at].column_type);
        // A declaration that does not parse, or names a type the cluster
        // column cannot hold, is ignored: the column reads as its
        // cluster type.
        if let Some(sql_type) = entry
            .get("declared")
            .and_then(|d| d.as_str())
            .and_then(|declared| types::of_declaration(declared, stored))
        {
            column.sql_type = sql_type;
        }
        column.auto_increment = entry
            .get("auto_increment")
            .and_then(|a| a.as_bool())
            .unwrap_or(false);
        column.generated = crate::generated::from_json(entry.get("generated"));
        column.default = match entry.get("default") {
            Some(serde_json::Value::Object(object)) if object.contains_key("null") => {
                Some(Value::Null)
            }
            Some(serde_json::Value::Object(object)) => {
                let text = object.get("text")?.as_str()?;
                value::fit(&Value::from(text), &column.sql_type, name).ok()
            }
            _ => None,
        };
    }
    Some(columns)
}

/// The schema as SQL sees it, cached, over one cluster connection.
pub struct Catalog {
    cluster: &'static Cluster,
    /// Partitions of a table SQL creates (see [`Catalog::partitions`]).
    partitions: u32,
    /// Cached tables, with when they were read.
    tables: Mutex<HashMap<(String, String), Cached>>,
}

/// A cached table and when it was read.
type Cached = (Arc<SqlTable>, Instant);

/// How long a table read without its declarations row is trusted: the
/// row is written just after the table is created, so another SQL node
/// may read the table in between; it looks again after this.
const UNDECLARED_FOR: Duration = Duration::from_secs(1);

impl Catalog {
    /// A catalog over `cluster`, creating the system tables if this is
    /// the first SQL node the cluster has seen.
    pub fn open(cluster: &'static Cluster) -> SqlResult<Catalog> {
        let mut catalog = Catalog {
            cluster,
            partitions: 0,
            tables: Mutex::new(HashMap::new()),
        };
        catalog.create_system_tables()?;
        // The cluster's default (node groups x ldm threads, as the system
        // table got) times the replicas: every ldm thread of every node is
        // primary for a partition (NDB's default), so reads, which go to
        // primaries, use every data node. With the default alone and one
        // ldm thread, every primary of a table sits on one node.
        let system = catalog.system_table(DATABASES)?;
        let replicas = system
            .map()
            .and_then(|map| map.partitions.first())
            .map_or(1, |placement| placement.replicas.len() as u32);
        catalog.partitions = (system.def().partitions * replicas).clamp(1, 1024);
        Ok(catalog)
    }

    /// How many partitions a table SQL creates gets.
    pub fn partitions(&self) -> u32 {
        self.partitions
    }

    /// The cluster connection.
    pub fn cluster(&self) -> &'static Cluster {
        self.cluster
    }

    fn create_system_tables(&self) -> SqlResult<()> {
        let varchar = |name: &str, n| ColumnDef::new(name, ColumnType::VarChar(n), false);
        let unsigned = |name: &str| ColumnDef::new(name, ColumnType::Int { unsigned: true }, false);
        let big = |name: &str| ColumnDef::new(name, ColumnType::BigInt { unsigned: true }, false);
        let system = [
            TableDef {
                name: DATABASES.into(),
                columns: vec![varchar("name", 64)],
                primary_key: vec![0],
                ..empty_def()
            },
            TableDef {
                name: TABLES.into(),
                columns: vec![
                    varchar("name", 129),
                    unsigned("id"),
                    unsigned("version"),
                    ColumnDef::new(
                        "declarations",
                        ColumnType::VarBinary(MAX_DECLARATION_BYTES),
                        false,
                    ),
                ],
                primary_key: vec![0],
                ..empty_def()
            },
            TableDef {
                name: AUTO_INCREMENT.into(),
                columns: vec![big("table_key"), big("next")],
                primary_key: vec![0],
                ..empty_def()
            },
        ]
        .into_iter()
        .chain([
            crate::views::system_table(),
            crate::user_locks::system_table(),
        ])
        .chain(crate::accounts::system_tables());
        for def in system {
            match self.cluster.table(&def.name) {
                Ok(_) => continue,
                Err(error) if error.code() == Some(client::ErrorCode::UnknownTable) => {}
                Err(error) => return Err(SqlError::from_client(&error, &def.name)),
            }
            match self.cluster.create_table(&def) {
                Ok(_) => {}
                // Another SQL node created it first.
                Err(error) if error.code() == Some(client::ErrorCode::TableExists) => {}
                Err(error) => return Err(SqlError::from_client(&error, &def.name)),
            }
        }
        Ok(())
    }

    pub(crate) fn system_table(&self, name: &str) -> SqlResult<Arc<Table>> {
        self.cluster
            .table(name)
            .map_err(|error| SqlError::from_client(&error, name))
    }

    /// The SQL table `database.name`, from the cache or the cluster.
    pub fn table(&self, database: &str, name: &str) -> SqlResult<Arc<SqlTable>> {
        self.load_table(database, name, true)
    }

    /// `table`; with `finish_truncates` false, a table the cluster lacks
    /// is 1146 at once, without looking for a TRUNCATE to finish.
    pub(crate) fn load_table(
        &self,
        database: &str,
        name: &str,
        finish_truncates: bool,
    ) -> SqlResult<Arc<SqlTable>> {
        if crate::information_schema::is_it(database) {
            return crate::information_schema::table(name)
                .ok_or_else(|| SqlError::no_such_table(database, name));
        }
        let key = (database.to_string(), name.to_string());
        if let Some((table, read_at)) = self.tables.lock().expect("catalog lock").get(&key) {
            if table.declared || read_at.elapsed() < UNDECLARED_FOR {
                return Ok(Arc::clone(table));
            }
        }
        let full = cluster_name(database, name);
        let table = match self.cluster.table(&full) {
            Ok(table) => table,
            Err(error) if error.code() == Some(client::ErrorCode::UnknownTable) => {
                // A TRUNCATE that dropped the table and never created it
                // again (its SQL node died between): finished here.
                if finish_truncates && self.finish_truncate(database, name)? {
                    return self.table(database, name);
                }
                return Err(SqlError::no_such_table(database, name));
            }
            Err(error) => return Err(SqlError::from_client(&error, &full)),
        };
        let declarations = self.declarations(&full, table.def())?;
        let declared = declarations.is_some();
        let (columns, checks) = declarations.unwrap_or_else(|| {
            (
                table.def().columns.iter().map(undeclared).collect(),
                Vec::new(),
            )
        });
        let auto_increment = columns.iter().position(|column| column.auto_increment);
        let mut sql_table = SqlTable {
            database: database.to_string(),
            name: name.to_string(),
            table,
            columns,
            auto_increment,
            declared,
            view: None,
            derived: None,
            checks: Vec::new(),
            generated: Vec::new(),
        };
        sql_table.checks = crate::checks::compile(&sql_table, &checks);
        sql_table.generated = crate::generated::compile(&sql_table);
        let sql_table = Arc::new(sql_table);
        self.tables
            .lock()
            .expect("catalog lock")
            .insert(key, (Arc::clone(&sql_table), Instant::now()));
        Ok(sql_table)
    }

    /// Forgets the cached `database.name` (it changed or was dropped).
    pub fn invalidate(&self, database: &str, name: &str) {
        self.tables
            .lock()
            .expect("catalog lock")
            .remove(&(database.to_string(), name.to_string()));
        self.cluster.invalidate_table(&cluster_name(database, name));
    }

    /// The declarations row of cluster table `full`, when it is this
    /// table's (same id and version).
    fn declarations(
        &self,
        full: &str,
        def: &TableDef,
    ) -> SqlResult<Option<(Vec<SqlColumn>, Vec<CheckDeclaration>)>> {
        Ok(match self.declarations_row(full)? {
            Some((id, version, json)) if id == def.id as u64 && version == def.version as u64 => {
                decode_declarations(def, &json).map(|columns| (columns, decode_checks(&json)))
            }
            _ => None,
        })
    }

    /// Creates the table `def` (named `database/table`) with its SQL
    /// declarations. The database must exist.
    pub fn create_table(
        &self,
        database: &str,
        table: &str,
        def: &TableDef,
        columns: &[SqlColumn],
        checks: &[CheckDeclaration],
    ) -> SqlResult<()> {
        self.require_database(database)?;
        if self.view(database, table)?.is_some() {
            return Err(SqlError::new(
                codes::TABLE_EXISTS,
                format!("Table '{table}' already exists"),
            ));
        }
        let full = cluster_name(database, table);
        let created = self
            .cluster
            .create_table(def)
            .map_err(|error| match error.code() {
                Some(client::ErrorCode::TableExists) => SqlError::new(
                    codes::TABLE_EXISTS,
                    format!("Table '{table}' already exists"),
                ),
                Some(client::ErrorCode::BadTableDefinition) => {
                    SqlError::new(codes::WRONG_TABLE_NAME, format!("{error}"))
                }
                _ => SqlError::from_client(&error, &full),
            })?;
        let json = encode_declarations(columns, checks);
        if let Err(error) = self.write_declarations(&full, created.id, created.version, &json) {
            // The table without its declarations would read with no
            // defaults: undo it rather than leave it half made.
            let _ = self.cluster.drop_table(&full);
            return Err(error);
        }
        self.invalidate(database, table);
        Ok(())
    }

    /// TRUNCATE's first half: records the table's definition (`def`, ids
    /// cleared) in its declarations row as a TRUNCATE under way, then
    /// drops the cluster table. [`Catalog::finish_truncate`] creates it
    /// again, from this call's SQL node or, should that die between the
    /// two, from whichever SQL node next finds the table gone: a TRUNCATE
    /// never leaves the table dropped.
    pub fn begin_truncate(
        &self,
        database: &str,
        table: &str,
        def: &TableDef,
        columns: &[SqlColumn],
        checks: &[CheckDeclaration],
    ) -> SqlResult<()> {
        let full = cluster_name(database, table);
        let current = self
            .cluster
            .table(&full)
            .map_err(|error| SqlError::from_client(&error, &full))?;
        self.write_declarations(
            &full,
            current.def().id,
            current.def().version,
            &encode_declarations_with(columns, checks, Some(def)),
        )?;
        self.invalidate(database, table);
        match self.cluster.drop_table(&full) {
            Ok(()) => {}
            Err(error) if error.code() == Some(client::ErrorCode::UnknownTable) => {}
            Err(error) => return Err(SqlError::from_client(&error, &full)),
        }
        // The old table's AUTO_INCREMENT counter goes (best effort, as in
        // DROP): the new table counts from 1, as after MySQL's TRUNCATE.
        for key in [
            auto_increment_key(current.def()),
            hidden_key_counter(current.def()),
        ] {
            let _ = self.delete_row(AUTO_INCREMENT, client::Value::UInt(key));
        }
        Ok(())
    }

    /// TRUNCATE's second half, or the end of one whose SQL node died:
    /// when `database.table`'s declarations row holds a TRUNCATE under
    /// way and the cluster table is gone, creates it again (empty) with
    /// its declarations. Returns whether there was one (true also when
    /// another SQL node created it first).
    pub fn finish_truncate(&self, database: &str, table: &str) -> SqlResult<bool> {
        let full = cluster_name(database, table);
        let Some((_, _, json)) = self.declarations_row(&full)? else {
            return Ok(false);
        };
        let Some(def) = truncating_definition(&json) else {
            return Ok(false);
        };
        let columns = decode_declarations(&def, &json)
            .unwrap_or_else(|| def.columns.iter().map(undeclared).collect());
        match self.create_table(database, table, &def, &columns, &decode_checks(&json)) {
            Ok(()) => Ok(true),
            Err(error) if error.code == codes::TABLE_EXISTS => {
                self.invalidate(database, table);
                Ok(true)
            }
            Err(error) => Err(error),
        }
    }

    /// Cluster table `full`'s declarations row, whatever table it names:
    /// (table id, version, declarations JSON).
    fn declarations_row(&self, full: &str) -> SqlResult<Option<(u64, u64, Vec<u8>)>> {
        self.read_system_row(TABLES, full, |row| {
            row.map(|row| {
                let json = row.get("declarations").and_then(|d| d.as_bytes());
                (
                    row.get_u64("id").unwrap_or(0),
                    row.get_u64("version").unwrap_or(0),
                    json.unwrap_or(b"").to_vec(),
                )
            })
        })
    }

    /// Reads the row of system table `system` whose key is `key` (a
    /// committed read in a transaction of its own) and hands it to `then`.
    pub(crate) fn read_system_row<T>(
        &self,
        system: &str,
        key: &str,
        then: impl FnOnce(Option<&client::Row>) -> T,
    ) -> SqlResult<T> {
        let table = self.system_table(system)?;
        let mut transaction = self.cluster.transaction();
        let read = transaction
            .read_if_exists(&table, &[client::Value::from(key)], LockMode::CommittedRead)
            .map_err(|error| SqlError::from_client(&error, system))?;
        transaction
            .execute(Commit::Yes)
            .map_err(|error| SqlError::from_client(&error, system))?;
        Ok(then(transaction.get(read)))
    }

    /// Writes cluster table `full`'s declarations row.
    fn write_declarations(&self, full: &str, id: u32, version: u32, json: &[u8]) -> SqlResult<()> {
        let tables = self.system_table(TABLES)?;
        let mut transaction = self.cluster.transaction();
        transaction
            .write(
                &tables,
                &[
                    ("name", client::Value::from(full)),
                    ("id", client::Value::UInt(id as u64)),
                    ("version", client::Value::UInt(version as u64)),
                    ("declarations", client::Value::Bytes(json.to_vec())),
                ],
            )
            .and_then(|_| transaction.execute(Commit::Yes))
            .map(|_| ())
            .map_err(|error| SqlError::from_client(&error, TABLES))
    }

    /// Drops `database.table` and its rows in the system tables.
    pub fn drop_table(&self, database: &str, table: &str) -> SqlResult<()> {
        let full = cluster_name(database, table);
        let dropped = self.cluster.table(&full).map(|t| t.def().clone());
        self.invalidate(database, table);
        match self.cluster.drop_table(&full) {
            Ok(()) => {}
            Err(error) if error.code() == Some(client::ErrorCode::UnknownTable) => {
                // A TRUNCATE under way (its SQL node died after the drop)
                // is a table to drop: its row goes.
                let truncating = self
                    .declarations_row(&full)?
                    .is_some_and(|(_, _, json)| truncating_definition(&json).is_some());
                if !truncating {
                    return Err(SqlError::new(
                        codes::BAD_TABLE,
                        format!("Unknown table '{database}.{table}'"),
                    ));
                }
            }
            Err(error) => return Err(SqlError::from_client(&error, &full)),
        }
        // The system rows go best-effort: a row left behind names an id
        // and version no table has again.
        let _ = self.delete_row(TABLES, client::Value::from(full.as_str()));
        if let Ok(def) = dropped {
            for key in [auto_increment_key(&def), hidden_key_counter(&def)] {
                let _ = self.delete_row(AUTO_INCREMENT, client::Value::UInt(key));
            }
        }
        self.invalidate(database, table);
        Ok(())
    }

    fn delete_row(&self, system: &str, key: client::Value) -> Result<(), client::ClientError> {
        let table = self.cluster.table(system)?;
        let mut transaction = self.cluster.transaction();
        let read =
            transaction.read_if_exists(&table, std::slice::from_ref(&key), LockMode::Exclusive)?;
        transaction.execute(Commit::No)?;
        if transaction.get(read).is_some() {
            transaction.delete(&table, &[key])?;
        }
        transaction.execute(Commit::Yes)?;
        Ok(())
    }

    /// The databases, sorted.
    pub fn databases(&self) -> SqlResult<Vec<String>> {
        let mut names: Vec<String> = self
            .system_rows(DATABASES)?
            .iter()
            .filter_map(|row| row.get("name")?.as_str().map(str::to_string))
            .collect();
        names.sort();
        Ok(names)
    }

    /// Every row of system table `system` (a committed scan).
    pub(crate) fn system_rows(&self, system: &str) -> SqlResult<Vec<client::Row>> {
        let table = self.system_table(system)?;
        self.cluster
            .scan(
                &table,
                client::Access::Table,
                &client::ScanOptions::default(),
            )
            .map(|scanned| scanned.rows)
            .map_err(|error| SqlError::from_client(&error, system))
    }

    /// Whether database `name` exists.
    pub fn database_exists(&self, name: &str) -> SqlResult<bool> {
        if crate::information_schema::is_it(name) {
            return Ok(true);
        }
        self.read_system_row(DATABASES, name, |row| row.is_some())
    }

    /// Error 1049 unless database `name` exists.
    pub fn require_database(&self, name: &str) -> SqlResult<()> {
        match self.database_exists(name)? {
            true => Ok(()),
            false => Err(SqlError::new(
                codes::BAD_DB,
                format!("Unknown database '{name}'"),
            )),
        }
    }

    /// Creates database `name`; `Ok(false)` when it existed and
    /// `if_not_exists` was given.
    pub fn create_database(&self, name: &str, if_not_exists: bool) -> SqlResult<bool> {
        refuse_information_schema(name)?;
        check_name("database", name)?;
        let table = self.system_table(DATABASES)?;
        let mut transaction = self.cluster.transaction();
        let inserted = transaction
            .insert(&table, &[("name", client::Value::from(name))])
            .and_then(|_| transaction.execute(Commit::Yes));
        match inserted {
            Ok(_) => Ok(true),
            Err(error) if error.code() == Some(client::ErrorCode::DuplicateKey) => {
                match if_not_exists {
                    true => Ok(false),
                    false => Err(SqlError::new(
                        codes::DB_CREATE_EXISTS,
                        format!("Can't create database '{name}'; database exists"),
                    )),
                }
            }
            Err(error) => Err(SqlError::from_client(&error, DATABASES)),
        }
    }

    /// Drops database `name` and every table in it; the number of tables
    /// dropped, or `None` when it did not exist and `if_exists` was given.
    pub fn drop_database(&self, name: &str, if_exists: bool) -> SqlResult<Option<usize>> {
        refuse_information_schema(name)?;
        if !self.database_exists(name)? {
            return match if_exists {
                true => Ok(None),
                false => Err(SqlError::new(
                    codes::DB_DROP_EXISTS,
                    format!("Can't drop database '{name}'; database doesn't exist"),
                )),
            };
        }
        for view in self.views_of(Some(name))? {
            self.drop_view(name, &view.name)?;
        }
        let tables = self.tables_of(name)?;
        for table in &tables {
            match self.drop_table(name, table) {
                Ok(()) => {}
                Err(error) if error.code == codes::BAD_TABLE => {}
                Err(error) => return Err(error),
            }
        }
        self.delete_row(DATABASES, client::Value::from(name))
            .map_err(|error| SqlError::from_client(&error, DATABASES))?;
        Ok(Some(tables.len()))
    }

    /// The tables of database `name`, sorted.
    pub fn tables_of(&self, database: &str) -> SqlResult<Vec<String>> {
        if crate::information_schema::is_it(database) {
            return Ok(crate::information_schema::view_names()
                .into_iter()
                .map(str::to_string)
                .collect());
        }
        let names = self
            .cluster
            .list_tables()
            .map_err(|error| SqlError::from_client(&error, "(every table)"))?;
        let prefix = format!("{database}/");
        Ok(names
            .iter()
            .filter_map(|name| name.strip_prefix(&prefix).map(str::to_string))
            .collect())
    }
}

/// The key of a table's AUTO_INCREMENT counter: its id and version, so a
/// table created again under a name starts from 1.
pub fn auto_increment_key(def: &TableDef) -> u64 {
    (def.id as u64) << 32 | def.version as u64
}

/// The key of the counter a table's hidden key takes its values from: its
/// AUTO_INCREMENT counter's key with the top bit set (table ids are the
/// lowest free, far below 2^31, so the two never meet).
pub fn hidden_key_counter(def: &TableDef) -> u64 {
    auto_increment_key(def) | 1 << 63
}

/// A definition with nothing in it, to fill with `..`.
/// The cluster definition of a table whose rows the SQL node makes (an
/// information_schema view, a derived table): `columns`, and the key a
/// definition needs, never used (such a table is read whole).
pub fn made_table_def(name: String, columns: &[SqlColumn]) -> TableDef {
    TableDef {
        name,
        columns: columns
            .iter()
            .enumerate()
            .map(|(index, c)| ColumnDef::new(&c.name, c.storage(), index != 0))
            .collect(),
        primary_key: vec![0],
        ..empty_def()
    }
}

pub fn empty_def() -> TableDef {
    TableDef {
        id: 0,
        version: 0,
        name: String::new(),
        columns: Vec::new(),
        primary_key: Vec::new(),
        partitions: 0,
        indexes: Vec::new(),
        revision: 0,
        partition_key: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_round_trip_and_a_missing_column_reads_undeclared() {
        let def = TableDef {
            name: "db/t".into(),
            columns: vec![
                ColumnDef::new("id", ColumnType::Int { unsigned: false }, false),
                ColumnDef::new("k", ColumnType::Int { unsigned: false }, false),
                ColumnDef::new("c", ColumnType::Char(10), true),
            ],
            primary_key: vec![0],
            ..empty_def()
        };
        let mut columns: Vec<SqlColumn> = def.columns.iter().map(undeclared).collect();
        columns[0].auto_increment = true;
        columns[1].default = Some(Value::Int(0));
        columns[1].sql_type = SqlType::Integer {
            bytes: 1,
            unsigned: false,
        };
        columns[2].default = Some(Value::Null);
        let json = encode_declarations(&columns[..2], &[]);
        let decoded = decode_declarations(&def, &json).unwrap();
        assert_eq!(decoded[..2], columns[..2]);
        assert_eq!(decoded[2], undeclared(&def.columns[2]));
        assert!(decode_checks(&json).is_empty());
        let checks = [CheckDeclaration {
            name: "t_chk_1".into(),
            clause: "k >= 0".into(),
            enforced: true,
        }];
        let json = encode_declarations(&columns, &checks);
        assert_eq!(decode_declarations(&def, &json).unwrap(), columns);
        assert_eq!(decode_checks(&json), checks);
        assert!(truncating_definition(&json).is_none());
        // A TRUNCATE under way keeps the definition beside them.
        let json = encode_declarations_with(&columns, &checks, Some(&def));
        assert_eq!(decode_declarations(&def, &json).unwrap(), columns);
        assert_eq!(decode_checks(&json), checks);
        assert_eq!(truncating_definition(&json), Some(def));
        assert!(truncating_definition(br#"{"columns":[],"truncating":"0g"}"#).is_none());
        assert!(truncating_definition(br#"{"columns":[],"truncating":"00"}"#).is_none());
    }

    #[test]
    fn names_outside_the_cluster_alphabet_are_refused() {
        assert!(check_name("database", "sbtest").is_ok());
        assert_eq!(
            check_name("database", "my-db").unwrap_err().code,
            codes::WRONG_DB_NAME
        );
        assert_eq!(
            check_name("table", &"t".repeat(65)).unwrap_err().code,
            codes::TOO_LONG_IDENT
        );
    }
}
