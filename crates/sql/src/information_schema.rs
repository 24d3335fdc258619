//! `information_schema`: the views tools and ORMs read to learn the
//! schema (SCHEMATA, TABLES, COLUMNS, STATISTICS, and FILES, always
//! empty, which mysqldump asks for), with MySQL 8's columns. They are
//! tables the SQL node makes from its catalog when a statement reads
//! them: no cluster table holds them, every access path reads all their
//! rows, and the WHERE clause is checked in the SQL node as always. An
//! account sees only what it holds a privilege on (MySQL's rule).
//! SHOW INDEX and SHOW TABLE STATUS are queries of them
//! (docs/design/0032-introspection.md).

use crate::accounts::Grants;
use crate::catalog::{Catalog, SqlColumn, SqlTable};
use crate::error::SqlResult;
use crate::types::SqlType;
use crate::value::Value;
use std::sync::Arc;

/// The database's name.
pub const NAME: &str = "information_schema";

/// A view of information_schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// SCHEMATA: the databases.
    Schemata,
    /// TABLES: the tables.
    Tables,
    /// COLUMNS: every table's columns.
    Columns,
    /// STATISTICS: every index's columns.
    Statistics,
    /// FILES: tablespace files (none: Tessera keeps tables in memory).
    Files,
    /// PARTITIONS: a row per table (its partitions are the cluster's, not
    /// SQL's: MySQL's row for a table without SQL partitioning).
    Partitions,
    /// TRIGGERS: none (Tessera has no triggers).
    Triggers,
    /// TABLE_CONSTRAINTS: each table's primary key, unique indexes and
    /// CHECK constraints.
    TableConstraints,
    /// CHECK_CONSTRAINTS: each CHECK constraint's condition.
    CheckConstraints,
    /// KEY_COLUMN_USAGE: the columns of each primary key and unique
    /// index (ORMs read a table's keys here).
    KeyColumnUsage,
    /// REFERENTIAL_CONSTRAINTS: none (no foreign keys are built); there
    /// for the tools that read a table's foreign keys here (Rails'
    /// schema dumper).
    ReferentialConstraints,
    /// VIEWS: the views (docs/design/0037-views.md).
    Views,
}

const VIEWS: [(View, &str); 12] = [
    (View::Schemata, "SCHEMATA"),
    (View::Tables, "TABLES"),
    (View::Columns, "COLUMNS"),
    (View::Statistics, "STATISTICS"),
    (View::Files, "FILES"),
    (View::Partitions, "PARTITIONS"),
    (View::Triggers, "TRIGGERS"),
    (View::TableConstraints, "TABLE_CONSTRAINTS"),
    (View::CheckConstraints, "CHECK_CONSTRAINTS"),
    (View::KeyColumnUsage, "KEY_COLUMN_USAGE"),
    (View::ReferentialConstraints, "REFERENTIAL_CONSTRAINTS"),
    (View::Views, "VIEWS"),
];

/// Whether `database` is information_schema (any case, as MySQL).
pub fn is_it(database: &str) -> bool {
    database.eq_ignore_ascii_case(NAME)
}

/// The views' names.
pub fn view_names() -> Vec<&'static str> {
    VIEWS.iter().map(|(_, name)| *name).collect()
}

/// Text of up to `characters` characters: a VARCHAR up to 255, a TEXT
/// beyond (as MySQL declares its longer columns, COLUMN_TYPE's say).
fn text(name: &str, characters: u16) -> (String, SqlType) {
    let sql_type = match characters {
        0..=255 => SqlType::VarChar(characters),
        _ => SqlType::Text(characters),
    };
    (name.to_string(), sql_type)
}

fn number(name: &str) -> (String, SqlType) {
    (
        name.to_string(),
        SqlType::Integer {
            bytes: 8,
            unsigned: true,
        },
    )
}

/// The row counts, sizes, times and checksum FILES and PARTITIONS share.
fn sizes_and_times() -> Vec<(String, SqlType)> {
    let mut columns: Vec<(String, SqlType)> = [
        "TABLE_ROWS",
        "AVG_ROW_LENGTH",
        "DATA_LENGTH",
        "MAX_DATA_LENGTH",
        "INDEX_LENGTH",
        "DATA_FREE",
    ]
    .iter()
    .map(|field| number(field))
    .collect();
    for field in ["CREATE_TIME", "UPDATE_TIME", "CHECK_TIME"] {
        columns.push((field.into(), SqlType::DateTime { fsp: 0 }));
    }
    columns.push(number("CHECKSUM"));
    columns
}

fn columns_of(view: View) -> Vec<(String, SqlType)> {
    let name = |n: &str| text(n, 64);
    match view {
        View::Schemata => vec![
            name("CATALOG_NAME"),
            name("SCHEMA_NAME"),
            name("DEFAULT_CHARACTER_SET_NAME"),
            name("DEFAULT_COLLATION_NAME"),
            text("SQL_PATH", 512),
            text("DEFAULT_ENCRYPTION", 3),
        ],
        View::Tables => vec![
            name("TABLE_CATALOG"),
            name("TABLE_SCHEMA"),
            name("TABLE_NAME"),
            name("TABLE_TYPE"),
            name("ENGINE"),
            number("VERSION"),
            text("ROW_FORMAT", 10),
            number("TABLE_ROWS"),
            number("AVG_ROW_LENGTH"),
            number("DATA_LENGTH"),
            number("MAX_DATA_LENGTH"),
            number("INDEX_LENGTH"),
            number("DATA_FREE"),
            number("AUTO_INCREMENT"),
            ("CREATE_TIME".into(), SqlType::DateTime { fsp: 0 }),
            ("UPDATE_TIME".into(), SqlType::DateTime { fsp: 0 }),
            ("CHECK_TIME".into(), SqlType::DateTime { fsp: 0 }),
            name("TABLE_COLLATION"),
            number("CHECKSUM"),
            text("CREATE_OPTIONS", 256),
            text("TABLE_COMMENT", 2048),
        ],
        View::Columns => vec![
            name("TABLE_CATALOG"),
            name("TABLE_SCHEMA"),
            name("TABLE_NAME"),
            name("COLUMN_NAME"),
            number("ORDINAL_POSITION"),
            text("COLUMN_DEFAULT", 4096),
            text("IS_NULLABLE", 3),
            name("DATA_TYPE"),
            number("CHARACTER_MAXIMUM_LENGTH"),
            number("CHARACTER_OCTET_LENGTH"),
            number("NUMERIC_PRECISION"),
            number("NUMERIC_SCALE"),
            number("DATETIME_PRECISION"),
            name("CHARACTER_SET_NAME"),
            name("COLLATION_NAME"),
            text("COLUMN_TYPE", 4096),
            text("COLUMN_KEY", 3),
            text("EXTRA", 256),
            text("PRIVILEGES", 154),
            text("COLUMN_COMMENT", 1024),
            text("GENERATION_EXPRESSION", 1024),
            number("SRS_ID"),
        ],
        View::Statistics => vec![
            name("TABLE_CATALOG"),
            name("TABLE_SCHEMA"),
            name("TABLE_NAME"),
            number("NON_UNIQUE"),
            name("INDEX_SCHEMA"),
            name("INDEX_NAME"),
            number("SEQ_IN_INDEX"),
            name("COLUMN_NAME"),
            text("COLLATION", 1),
            number("CARDINALITY"),
            number("SUB_PART"),
            text("PACKED", 10),
            text("NULLABLE", 3),
            text("INDEX_TYPE", 16),
            text("COMMENT", 16),
            text("INDEX_COMMENT", 1024),
            text("IS_VISIBLE", 3),
            text("EXPRESSION", 1024),
        ],
        View::Files => {
            let mut columns = vec![
                number("FILE_ID"),
                text("FILE_NAME", 4096),
                text("FILE_TYPE", 256),
            ];
            for field in [
                "TABLESPACE_NAME",
                "TABLE_CATALOG",
                "TABLE_SCHEMA",
                "TABLE_NAME",
                "LOGFILE_GROUP_NAME",
            ] {
                columns.push(name(field));
            }
            columns.push(number("LOGFILE_GROUP_NUMBER"));
            columns.push(name("ENGINE"));
            for field in [
                "FULLTEXT_KEYS",
                "DELETED_ROWS",
                "UPDATE_COUNT",
                "FREE_EXTENTS",
                "TOTAL_EXTENTS",
                "EXTENT_SIZE",
                "INITIAL_SIZE",
                "MAXIMUM_SIZE",
                "AUTOEXTEND_SIZE",
            ] {
                columns.push(number(field));
            }
            for field in [
                "CREATION_TIME",
                "LAST_UPDATE_TIME",
                "LAST_ACCESS_TIME",
                "RECOVER_TIME",
            ] {
                columns.push((field.into(), SqlType::DateTime { fsp: 0 }));
            }
            columns.push(number("TRANSACTION_COUNTER"));
            columns.push(number("VERSION"));
            columns.push(text("ROW_FORMAT", 10));
            columns.extend(sizes_and_times());
            columns.push(text("STATUS", 20));
            columns.push(text("EXTRA", 255));
            columns
        }
        View::Partitions => {
            let mut columns: Vec<(String, SqlType)> = [
                "TABLE_CATALOG",
                "TABLE_SCHEMA",
                "TABLE_NAME",
                "PARTITION_NAME",
                "SUBPARTITION_NAME",
            ]
            .iter()
            .map(|n| name(n))
            .collect();
            columns.push(number("PARTITION_ORDINAL_POSITION"));
            columns.push(number("SUBPARTITION_ORDINAL_POSITION"));
            columns.push(text("PARTITION_METHOD", 13));
            columns.push(text("SUBPARTITION_METHOD", 13));
            columns.push(text("PARTITION_EXPRESSION", 2048));
            columns.push(text("SUBPARTITION_EXPRESSION", 2048));
            columns.push(text("PARTITION_DESCRIPTION", 2048));
            columns.extend(sizes_and_times());
            columns.push(text("PARTITION_COMMENT", 2048));
            columns.push(text("NODEGROUP", 256));
            columns.push(name("TABLESPACE_NAME"));
            columns
        }
        View::TableConstraints => vec![
            name("CONSTRAINT_CATALOG"),
            name("CONSTRAINT_SCHEMA"),
            name("CONSTRAINT_NAME"),
            name("TABLE_SCHEMA"),
            name("TABLE_NAME"),
            text("CONSTRAINT_TYPE", 11),
            text("ENFORCED", 3),
        ],
        View::CheckConstraints => vec![
            name("CONSTRAINT_CATALOG"),
            name("CONSTRAINT_SCHEMA"),
            name("CONSTRAINT_NAME"),
            text("CHECK_CLAUSE", 4096),
        ],
        View::KeyColumnUsage => vec![
            name("CONSTRAINT_CATALOG"),
            name("CONSTRAINT_SCHEMA"),
            name("CONSTRAINT_NAME"),
            name("TABLE_CATALOG"),
            name("TABLE_SCHEMA"),
            name("TABLE_NAME"),
            name("COLUMN_NAME"),
            number("ORDINAL_POSITION"),
            number("POSITION_IN_UNIQUE_CONSTRAINT"),
            name("REFERENCED_TABLE_SCHEMA"),
            name("REFERENCED_TABLE_NAME"),
            name("REFERENCED_COLUMN_NAME"),
        ],
        View::ReferentialConstraints => vec![
            name("CONSTRAINT_CATALOG"),
            name("CONSTRAINT_SCHEMA"),
            name("CONSTRAINT_NAME"),
            name("UNIQUE_CONSTRAINT_CATALOG"),
            name("UNIQUE_CONSTRAINT_SCHEMA"),
            name("UNIQUE_CONSTRAINT_NAME"),
            text("MATCH_OPTION", 7),
            text("UPDATE_RULE", 11),
            text("DELETE_RULE", 11),
            name("TABLE_NAME"),
            name("REFERENCED_TABLE_NAME"),
        ],
        View::Views => vec![
            name("TABLE_CATALOG"),
            name("TABLE_SCHEMA"),
            name("TABLE_NAME"),
            text("VIEW_DEFINITION", 4096),
            text("CHECK_OPTION", 8),
            text("IS_UPDATABLE", 3),
            text("DEFINER", 288),
            text("SECURITY_TYPE", 7),
            name("CHARACTER_SET_CLIENT"),
            name("COLLATION_CONNECTION"),
        ],
        View::Triggers => {
            let mut columns: Vec<(String, SqlType)> = [
                "TRIGGER_CATALOG",
                "TRIGGER_SCHEMA",
                "TRIGGER_NAME",
                "EVENT_MANIPULATION",
                "EVENT_OBJECT_CATALOG",
                "EVENT_OBJECT_SCHEMA",
                "EVENT_OBJECT_TABLE",
            ]
            .iter()
            .map(|n| name(n))
            .collect();
            columns.push(number("ACTION_ORDER"));
            columns.push(text("ACTION_CONDITION", 1024));
            columns.push(text("ACTION_STATEMENT", 4096));
            for field in [
                "ACTION_ORIENTATION",
                "ACTION_TIMING",
                "ACTION_REFERENCE_OLD_TABLE",
                "ACTION_REFERENCE_NEW_TABLE",
                "ACTION_REFERENCE_OLD_ROW",
                "ACTION_REFERENCE_NEW_ROW",
            ] {
                columns.push(name(field));
            }
            columns.push(("CREATED".into(), SqlType::DateTime { fsp: 2 }));
            columns.push(text("SQL_MODE", 1024));
            columns.push(text("DEFINER", 288));
            for field in [
                "CHARACTER_SET_CLIENT",
                "COLLATION_CONNECTION",
                "DATABASE_COLLATION",
            ] {
                columns.push(name(field));
            }
            columns
        }
    }
}

/// The view `name` (any case) as a table statements can read.
pub fn table(name: &str) -> Option<Arc<SqlTable>> {
    let (view, canonical) = VIEWS
        .iter()
        .find(|(_, view_name)| view_name.eq_ignore_ascii_case(name))?;
    let columns: Vec<SqlColumn> = columns_of(*view)
        .into_iter()
        .map(|(name, sql_type)| SqlColumn {
            name,
            sql_type,
            nullable: true,
            default: None,
            auto_increment: false,
            generated: None,
        })
        .collect();
    let def = crate::catalog::made_table_def(format!("{NAME}/{canonical}"), &columns);
    Some(Arc::new(SqlTable {
        database: NAME.to_string(),
        name: canonical.to_string(),
        table: Arc::new(client::Table::new(def)),
        columns,
        auto_increment: None,
        declared: true,
        view: Some(*view),
        derived: None,
        checks: Vec::new(),
        generated: Vec::new(),
    }))
}

/// What a view's rows are made from: the catalog, and what the reader
/// may see.
pub struct Source<'a> {
    /// The schema.
    pub catalog: &'a Catalog,
    /// The reader's grants.
    pub grants: &'a Grants,
    /// The columns the statement reads (`None`: all): a costly one (TABLES's
    /// row count) is computed only when read.
    pub needed: Option<&'a [usize]>,
}

impl Source<'_> {
    fn visible_databases(&self) -> SqlResult<Vec<String>> {
        Ok(self
            .catalog
            .databases()?
            .into_iter()
            .filter(|database| self.grants.any_in(database))
            .collect())
    }

    /// Every table the reader holds a privilege on, database by database.
    fn visible_tables(&self) -> SqlResult<Vec<Arc<SqlTable>>> {
        let mut tables = Vec::new();
        for database in self.visible_databases()? {
            let mut names = self.catalog.tables_of(&database)?;
            names.sort();
            for name in names {
                if self
                    .grants
                    .at(&database, &name)
                    .without(crate::accounts::Privileges::GRANT_OPTION)
                    .is_empty()
                {
                    continue;
                }
                // A table dropped since it was listed is skipped.
                if let Ok(table) = self.catalog.table(&database, &name) {
                    tables.push(table);
                }
            }
        }
        Ok(tables)
    }

    /// Every view the reader holds a privilege on, database by database.
    fn visible_views(&self) -> SqlResult<Vec<crate::views::View>> {
        let databases = self.visible_databases()?;
        Ok(self
            .catalog
            .views_of(None)?
            .into_iter()
            .filter(|view| {
                databases.contains(&view.database)
                    && !self
                        .grants
                        .at(&view.database, &view.name)
                        .without(crate::accounts::Privileges::GRANT_OPTION)
                        .is_empty()
            })
            .collect())
    }

    fn needs(&self, column: usize) -> bool {
        self.needed.is_none_or(|needed| needed.contains(&column))
    }
}

/// The rows of `view`.
pub fn rows(view: View, source: &Source<'_>) -> SqlResult<Vec<Vec<Value>>> {
    let text = |t: &str| Value::from(t);
    let number = |n: u64| Value::UInt(n);
    Ok(match view {
        View::Schemata => {
            let mut names = vec![NAME.to_string()];
            names.extend(source.visible_databases()?);
            names
                .into_iter()
                .map(|name| {
                    vec![
                        text("def"),
                        text(&name),
                        text("utf8mb4"),
                        text("utf8mb4_bin"),
                        Value::Null,
                        text("NO"),
                    ]
                })
                .collect()
        }
        View::Tables => {
            let mut rows = Vec::new();
            for name in view_names() {
                let mut row = vec![
                    text("def"),
                    text(NAME),
                    text(name),
                    text("SYSTEM VIEW"),
                    Value::Null,
                    number(10),
                    Value::Null,
                ];
                row.resize(21, Value::Null);
                row[17] = text("utf8mb4_bin");
                row[19] = text("");
                row[20] = text("");
                rows.push(row);
            }
            for table in source.visible_tables()? {
                // The count is a scan of the table at the data nodes:
                // only when the statement reads it.
                let count = match source.needs(7) {
                    true => source
                        .catalog
                        .cluster()
                        .count(
                            &table.table,
                            client::Access::Table,
                            &client::ScanOptions::default(),
                        )
                        .map(Value::UInt)
                        .unwrap_or(Value::Null),
                    false => Value::Null,
                };
                rows.push(vec![
                    text("def"),
                    text(&table.database),
                    text(&table.name),
                    text("BASE TABLE"),
                    text("ndbcluster"),
                    number(10),
                    text("Dynamic"),
                    count,
                    number(0),
                    number(0),
                    number(0),
                    number(0),
                    number(0),
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    text("utf8mb4_bin"),
                    Value::Null,
                    text(""),
                    text(""),
                ]);
            }
            for view in source.visible_views()? {
                let mut row = vec![
                    text("def"),
                    text(&view.database),
                    text(&view.name),
                    text("VIEW"),
                ];
                row.resize(21, Value::Null);
                row[20] = text("VIEW");
                rows.push(row);
            }
            rows
        }
        View::Views => source
            .visible_views()?
            .into_iter()
            .map(|view| {
                vec![
                    text("def"),
                    text(&view.database),
                    text(&view.name),
                    text(&view.query),
                    text("NONE"),
                    text(if view.is_updatable() { "YES" } else { "NO" }),
                    text(&view.definer.replace('`', "")),
                    text("INVOKER"),
                    text("utf8mb4"),
                    text("utf8mb4_bin"),
                ]
            })
            .collect(),
        View::Columns => {
            let mut rows = Vec::new();
            let views = source.visible_views()?.into_iter().filter_map(|view| {
                // Its columns as its query types them; a view whose query
                // no longer compiles has none to show.
                crate::plan::view_table(&view, source.catalog).ok()
            });
            for table in source.visible_tables()?.into_iter().chain(views) {
                for (position, column) in table.visible_columns() {
                    rows.push(column_row(&table, position, column));
                }
            }
            rows
        }
        View::Statistics => {
            let mut rows = Vec::new();
            for table in source.visible_tables()? {
                rows.extend(index_rows(&table));
            }
            rows
        }
        View::Files | View::Triggers | View::ReferentialConstraints => Vec::new(),
        View::TableConstraints => {
            let mut rows = Vec::new();
            for table in source.visible_tables()? {
                let row = |name: &str, kind: &str, enforced: bool| {
                    vec![
                        text("def"),
                        text(&table.database),
                        text(name),
                        text(&table.database),
                        text(&table.name),
                        text(kind),
                        text(if enforced { "YES" } else { "NO" }),
                    ]
                };
                for (name, _) in keys_of(&table) {
                    let kind = match name == "PRIMARY" {
                        true => "PRIMARY KEY",
                        false => "UNIQUE",
                    };
                    rows.push(row(&name, kind, true));
                }
                for check in &table.checks {
                    let declaration = &check.declaration;
                    rows.push(row(&declaration.name, "CHECK", declaration.enforced));
                }
            }
            rows
        }
        View::CheckConstraints => {
            let mut rows = Vec::new();
            for table in source.visible_tables()? {
                for check in &table.checks {
                    rows.push(vec![
                        text("def"),
                        text(&table.database),
                        text(&check.declaration.name),
                        text(&check.declaration.clause),
                    ]);
                }
            }
            rows
        }
        View::KeyColumnUsage => {
            let mut rows = Vec::new();
            for table in source.visible_tables()? {
                for (name, columns) in keys_of(&table) {
                    for (position, column) in columns.iter().enumerate() {
                        let mut row = vec![
                            text("def"),
                            text(&table.database),
                            text(&name),
                            text("def"),
                            text(&table.database),
                            text(&table.name),
                            text(&table.columns[*column as usize].name),
                            number(position as u64 + 1),
                        ];
                        row.resize(12, Value::Null);
                        rows.push(row);
                    }
                }
            }
            rows
        }
        View::Partitions => {
            let mut rows = Vec::new();
            for table in source.visible_tables()? {
                let mut row = vec![text("def"), text(&table.database), text(&table.name)];
                row.resize(25, Value::Null);
                row[22] = text("");
                row[23] = text("default");
                rows.push(row);
            }
            rows
        }
    })
}

/// A table's keys, as the constraint views name them: `PRIMARY` and its
/// columns, then each unique index's.
fn keys_of(table: &SqlTable) -> Vec<(String, Vec<u16>)> {
    let def = table.def();
    // A hidden key is no key SQL shows.
    let primary = table.hidden_key().is_none();
    std::iter::once(("PRIMARY".to_string(), def.primary_key.clone()))
        .filter(|_| primary)
        .chain(
            def.indexes
                .iter()
                .filter(|index| index.unique.is_some())
                .map(|index| (index.name.clone(), index.columns.clone())),
        )
        .collect()
}

/// COLUMNS's row of one column.
fn column_row(table: &SqlTable, position: usize, column: &SqlColumn) -> Vec<Value> {
    let text = |t: &str| Value::from(t);
    let number = |n: u64| Value::UInt(n);
    let declared = column.sql_type.declared();
    let data_type = declared
        .split(['(', ' '])
        .next()
        .unwrap_or(&declared)
        .to_string();
    let (character_length, precision, scale, datetime_precision) = match &column.sql_type {
        SqlType::Char(n)
        | SqlType::VarChar(n)
        | SqlType::Text(n)
        | SqlType::VarBinary(n)
        | SqlType::Blob(n) => (Some(*n as u64), None, None, None),
        SqlType::Json(_) => (None, None, None, None),
        SqlType::Enum(members) => (
            Some(members.iter().map(|m| m.len()).max().unwrap_or(0) as u64),
            None,
            None,
            None,
        ),
        SqlType::Integer { bytes, unsigned } => {
            let digits: u64 = match (bytes, unsigned) {
                (1, _) => 3,
                (2, _) => 5,
                (3, _) => 7,
                (4, _) => 10,
                (_, true) => 20,
                _ => 19,
            };
            (None, Some(digits), Some(0), None)
        }
        SqlType::Float => (None, Some(12), None, None),
        SqlType::Double => (None, Some(22), None, None),
        SqlType::Decimal { precision, scale } => {
            (None, Some(*precision as u64), Some(*scale as u64), None)
        }
        SqlType::DateTime { fsp } | SqlType::Timestamp { fsp } | SqlType::Time { fsp } => {
            (None, None, None, Some(*fsp as u64))
        }
        SqlType::Date | SqlType::Year => (None, None, None, None),
    };
    let is_text = column.sql_type.is_text() || matches!(column.sql_type, SqlType::Enum(_));
    // VARCHAR counts characters, of up to 4 bytes each.
    let octet_length = match &column.sql_type {
        SqlType::VarChar(n) => Some(*n as u64 * crate::types::BYTES_PER_CHARACTER as u64),
        _ => character_length,
    };
    let key = crate::show::key_of(table, position);
    vec![
        text("def"),
        text(&table.database),
        text(&table.name),
        text(&column.name),
        number(position as u64 + 1),
        match &column.default {
            None | Some(Value::Null) => Value::Null,
            Some(value) => Value::from(crate::value::display(value)),
        },
        text(if column.nullable { "YES" } else { "NO" }),
        Value::from(data_type),
        character_length.map_or(Value::Null, number),
        octet_length.map_or(Value::Null, number),
        precision.map_or(Value::Null, number),
        scale.map_or(Value::Null, number),
        datetime_precision.map_or(Value::Null, number),
        if is_text {
            text("utf8mb4")
        } else {
            Value::Null
        },
        if is_text {
            text("utf8mb4_bin")
        } else {
            Value::Null
        },
        Value::from(declared),
        text(key),
        text(match (&column.generated, column.auto_increment) {
            (Some(generated), _) => crate::generated::extra(generated),
            (None, true) => "auto_increment",
            (None, false) => "",
        }),
        text("select,insert,update,references"),
        text(""),
        text(
            column
                .generated
                .as_ref()
                .map_or("", |g| g.expression.as_str()),
        ),
        Value::Null,
    ]
}

/// STATISTICS's rows of one table: the primary key's columns, then each
/// index's, in order.
fn index_rows(table: &SqlTable) -> Vec<Vec<Value>> {
    let text = |t: &str| Value::from(t);
    let number = |n: u64| Value::UInt(n);
    let def = table.def();
    let mut indexes: Vec<(&str, bool, &[u16])> = Vec::new();
    // A hidden key is no index SQL shows.
    if table.hidden_key().is_none() {
        indexes.push(("PRIMARY", true, &def.primary_key));
    }
    for index in &def.indexes {
        indexes.push((&index.name, index.unique.is_some(), &index.columns));
    }
    let mut rows = Vec::new();
    for (name, unique, columns) in indexes {
        for (sequence, column) in columns.iter().enumerate() {
            let column = &table.columns[*column as usize];
            rows.push(vec![
                text("def"),
                text(&table.database),
                text(&table.name),
                number(u64::from(!unique)),
                text(&table.database),
                text(name),
                number(sequence as u64 + 1),
                text(&column.name),
                text("A"),
                Value::Null,
                Value::Null,
                Value::Null,
                text(if column.nullable { "YES" } else { "" }),
                text("BTREE"),
                text(""),
                text(""),
                text("YES"),
                Value::Null,
            ]);
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_view_reads_with_its_columns() {
        for name in view_names() {
            let table = table(&name.to_ascii_lowercase()).expect("a view");
            assert_eq!(table.name, name);
            assert!(table.view.is_some());
            let valid = table.def().validate();
            assert!(valid.is_ok(), "{name}: {valid:?}");
        }
        assert!(table("NOPE").is_none());
        assert!(is_it("INFORMATION_SCHEMA"));
    }
}
