//! Schema statements: CREATE TABLE (the SQL types mapped to the
//! cluster's column types, DEFAULT, AUTO_INCREMENT, PRIMARY KEY, KEY,
//! INDEX, UNIQUE and CHECK clauses; ENGINE and other table options
//! accepted and ignored), CREATE [UNIQUE] INDEX, DROP INDEX, DROP TABLE, TRUNCATE.

use crate::catalog::{check_name, empty_def, Catalog, SqlColumn, SqlTable, HIDDEN_KEY};
use crate::checks::CheckDeclaration;
use crate::error::{codes, SqlError, SqlResult};
use crate::expr::{Compiler, Inputs};
use crate::types::{self, SqlType};
use crate::value;
use crate::value::Value;
use client::{ColumnDef, IndexDef, TableDef, UniqueTable};
use sqlparser::ast;

fn constant(expr: &ast::Expr) -> SqlResult<Value> {
    let mut compiler = Compiler::new(None, None);
    let compiled = compiler.compile(expr)?;
    struct NoSession;
    impl crate::expr::Environment for NoSession {
        fn session_value(&self, _: &crate::expr::SessionValue) -> SqlResult<Value> {
            Err(SqlError::unsupported("a session value in a DEFAULT"))
        }
    }
    let inputs = Inputs {
        row: &[],
        aggregates: &[],
        params: &[],
    };
    compiled.eval(&inputs, &NoSession)
}

pub(crate) fn index_columns(
    columns: &[ast::IndexColumn],
    table: &[SqlColumn],
) -> SqlResult<Vec<u16>> {
    let key = columns
        .iter()
        .map(|column| {
            let name = match &column.column.expr {
                ast::Expr::Identifier(ident) => ident.value.clone(),
                other => return Err(SqlError::unsupported(format!("index on {other}"))),
            };
            table
                .iter()
                .position(|c| c.name.eq_ignore_ascii_case(&name) && !c.is_hidden())
                .map(|i| i as u16)
                .ok_or_else(|| {
                    SqlError::new(
                        codes::KEY_COLUMN_DOES_NOT_EXIST,
                        format!("Key column '{name}' doesn't exist in table"),
                    )
                })
        })
        .collect::<SqlResult<Vec<u16>>>()?;
    refuse_json_key(&key, table)?;
    Ok(key)
}

/// 3152 for a key over a JSON column: MySQL indexes a document only
/// through a generated column of a path's value, which is not built.
fn refuse_json_key(key: &[u16], columns: &[SqlColumn]) -> SqlResult<()> {
    for column in key.iter().filter_map(|at| columns.get(*at as usize)) {
        if matches!(column.sql_type, SqlType::Json(_)) {
            return Err(SqlError::new(
                codes::JSON_USED_AS_KEY,
                format!(
                    "JSON column '{}' supports indexing only via generated columns on a specified JSON path.",
                    column.name
                ),
            ));
        }
    }
    Ok(())
}

/// The name MySQL gives an unnamed index: its first column's, with `_2`,
/// `_3`... after it while `indexes` holds that name.
pub fn unnamed_index_name(first_column: &str, indexes: &[IndexDef]) -> String {
    let mut name = first_column.to_string();
    let mut n = 2;
    while indexes.iter().any(|i| i.name.eq_ignore_ascii_case(&name)) {
        name = format!("{first_column}_{n}");
        n += 1;
    }
    name
}

/// Gives each TEXT and BLOB column declared without a size of its own
/// an equal share of the room the row's other columns leave (at most
/// what one VARCHAR holds): a row is stored whole, so that room is all
/// they can have (docs/design/0028-sql-types.md, "TEXT and BLOB").
fn allot_text_room(columns: &mut [SqlColumn]) {
    let unsized_column = |c: &SqlColumn| {
        matches!(
            c.sql_type,
            SqlType::Text(types::UNSIZED)
                | SqlType::Blob(types::UNSIZED)
                | SqlType::Json(types::UNSIZED)
        )
    };
    let count = columns.iter().filter(|c| unsized_column(c)).count();
    if count == 0 {
        return;
    }
    // As the cluster counts a row: each column's largest value and 2 bytes.
    let used: usize = columns
        .iter()
        .filter(|c| !unsized_column(c))
        .map(|c| c.storage().max_value_bytes() + 2)
        .sum::<usize>()
        + 2 * count;
    let room = client::MAX_ROW_BYTES.saturating_sub(used) / count;
    let each = room.clamp(1, client::MAX_VAR_BYTES as usize) as u16;
    for column in columns.iter_mut().filter(|c| unsized_column(c)) {
        column.sql_type = match column.sql_type {
            SqlType::Text(_) => SqlType::Text(each),
            SqlType::Json(_) => SqlType::Json(each),
            _ => SqlType::Blob(each),
        };
    }
}

/// The cluster definition and the SQL declarations of a CREATE TABLE:
/// its columns and its CHECK constraints.
pub fn table_definition(
    create: &ast::CreateTable,
    database: &str,
    table: &str,
) -> SqlResult<(TableDef, Vec<SqlColumn>, Vec<CheckDeclaration>)> {
    check_name("table", table)?;
    if create.query.is_some() {
        return Err(SqlError::unsupported("CREATE TABLE ... SELECT"));
    }
    // A table private to a session, dropped with it, is not built: made
    // as an ordinary table, it would be seen by every session and outlive
    // this one.
    if create.temporary {
        return Err(SqlError::unsupported("CREATE TEMPORARY TABLE"));
    }
    let mut columns = Vec::with_capacity(create.columns.len());
    let mut primary_key: Option<Vec<u16>> = None;
    let mut unique_columns = Vec::new();
    for (index, column) in create.columns.iter().enumerate() {
        if column.name.value.eq_ignore_ascii_case(HIDDEN_KEY) {
            return Err(SqlError::new(
                codes::WRONG_COLUMN_NAME,
                format!(
                    "Incorrect column name '{}' (the hidden key's)",
                    column.name.value
                ),
            ));
        }
        let sql_type = types::of_data_type(&column.data_type)?;
        let mut sql = SqlColumn {
            name: column.name.value.clone(),
            sql_type,
            nullable: true,
            default: None,
            auto_increment: false,
            generated: None,
        };
        for option in &column.options {
            match &option.option {
                ast::ColumnOption::Null => sql.nullable = true,
                ast::ColumnOption::NotNull => sql.nullable = false,
                ast::ColumnOption::Default(expr) => {
                    let value = constant(expr)?;
                    sql.default = Some(match value.is_null() {
                        true => Value::Null,
                        false => value::fit(&value, &sql.sql_type, &sql.name).map_err(|_| {
                            SqlError::new(1067, format!("Invalid default value for '{}'", sql.name))
                        })?,
                    });
                }
                ast::ColumnOption::Unique {
                    is_primary: true, ..
                } => {
                    if primary_key.replace(vec![index as u16]).is_some() {
                        return Err(SqlError::new(
                            codes::MULTIPLE_PRI_KEY,
                            "Multiple primary key defined",
                        ));
                    }
                }
                ast::ColumnOption::Unique {
                    is_primary: false, ..
                } => unique_columns.push(index as u16),
                ast::ColumnOption::DialectSpecific(tokens)
                    if tokens
                        .iter()
                        .any(|t| t.to_string().eq_ignore_ascii_case("AUTO_INCREMENT")) =>
                {
                    sql.auto_increment = true;
                }
                ast::ColumnOption::Comment(_)
                | ast::ColumnOption::CharacterSet(_)
                | ast::ColumnOption::Collation(_) => {}
                // Compiled with the table's others (`checks::declared`).
                ast::ColumnOption::Check(_) => {}
                // Checked once every column is known
                // (`generated::check_declared`).
                ast::ColumnOption::Generated {
                    generation_expr: Some(expression),
                    generation_expr_mode,
                    ..
                } => {
                    let declared = crate::generated::declaration(
                        &sql.name,
                        expression,
                        generation_expr_mode.clone(),
                    )?;
                    if sql.generated.replace(declared).is_some() {
                        return Err(SqlError::parse(format!(
                            "column '{}' is generated twice",
                            sql.name
                        )));
                    }
                }
                other => return Err(SqlError::unsupported(format!("column option {other}"))),
            }
        }
        if sql.auto_increment && !sql.sql_type.is_integer() {
            return Err(SqlError::new(
                1063,
                format!("Incorrect column specifier for column '{}'", sql.name),
            ));
        }
        columns.push(sql);
    }
    let mut indexes: Vec<IndexDef> = Vec::new();
    let mut add_index =
        |name: Option<String>, columns_of: Vec<u16>, unique: bool, columns: &[SqlColumn]| {
            let name = name.unwrap_or_else(|| {
                unnamed_index_name(&columns[columns_of[0] as usize].name, &indexes)
            });
            if indexes.iter().any(|i| i.name.eq_ignore_ascii_case(&name)) {
                return Err(SqlError::new(
                    codes::DUP_KEYNAME,
                    format!("Duplicate key name '{name}'"),
                ));
            }
            indexes.push(IndexDef {
                id: indexes.len() as u32 + 1,
                name,
                columns: columns_of,
                unique: unique.then_some(UniqueTable {
                    table_id: 0,
                    table_version: 0,
                }),
            });
            Ok(())
        };
    for column in unique_columns {
        add_index(None, vec![column], true, &columns)?;
    }
    for constraint in &create.constraints {
        match constraint {
            ast::TableConstraint::PrimaryKey { columns: key, .. } => {
                if primary_key.replace(index_columns(key, &columns)?).is_some() {
                    return Err(SqlError::new(
                        codes::MULTIPLE_PRI_KEY,
                        "Multiple primary key defined",
                    ));
                }
            }
            ast::TableConstraint::Unique {
                name,
                index_name,
                columns: of,
                ..
            } => {
                let name = index_name
                    .as_ref()
                    .or(name.as_ref())
                    .map(|n| n.value.clone());
                add_index(name, index_columns(of, &columns)?, true, &columns)?;
            }
            ast::TableConstraint::Index {
                name, columns: of, ..
            } => {
                add_index(
                    name.as_ref().map(|n| n.value.clone()),
                    index_columns(of, &columns)?,
                    false,
                    &columns,
                )?;
            }
            ast::TableConstraint::Check { .. } => {}
            other => return Err(SqlError::unsupported(format!("{other}"))),
        }
    }
    // A table without a primary key is keyed by a hidden column, last
    // (docs/design/0038-hidden-primary-key.md).
    let primary_key = primary_key.unwrap_or_else(|| {
        columns.push(SqlColumn {
            name: HIDDEN_KEY.to_string(),
            sql_type: SqlType::Integer {
                bytes: 8,
                unsigned: true,
            },
            nullable: false,
            default: None,
            auto_increment: false,
            generated: None,
        });
        vec![columns.len() as u16 - 1]
    });
    allot_text_room(&mut columns);
    for key in &primary_key {
        // A primary key column is NOT NULL, as MySQL makes it.
        columns[*key as usize].nullable = false;
    }
    if let Some(auto) = columns.iter().position(|c| c.auto_increment) {
        let keyed = primary_key.first() == Some(&(auto as u16))
            || indexes
                .iter()
                .any(|i| i.columns.first() == Some(&(auto as u16)));
        if !keyed || columns.iter().filter(|c| c.auto_increment).count() > 1 {
            return Err(SqlError::new(
                1075,
                "Incorrect table definition; there can be only one auto column and it must be defined as a key",
            ));
        }
    }
    let def = TableDef {
        name: crate::catalog::cluster_name(database, table),
        columns: columns
            .iter()
            .map(|c| ColumnDef::new(&c.name, c.storage(), c.nullable))
            .collect(),
        primary_key,
        indexes,
        revision: 0,
        ..empty_def()
    };
    def.validate().map_err(|reason| {
        let code = match reason.contains("row too large") {
            true => codes::TOO_BIG_ROWSIZE,
            false => 1005,
        };
        SqlError::new(
            code,
            format!("Can't create table '{database}.{table}': {reason}"),
        )
    })?;
    let keys = std::iter::once(&def.primary_key).chain(def.indexes.iter().map(|i| &i.columns));
    for key in keys {
        refuse_json_key(key, &columns)?;
    }
    crate::generated::check_declared(table, &columns, &def.primary_key)?;
    let checks = crate::checks::declared(create, table, &columns)?;
    Ok((def, columns, checks))
}

/// CREATE TABLE.
pub fn create_table(
    catalog: &Catalog,
    create: &ast::CreateTable,
    database: &str,
    table: &str,
    partition_by: &[String],
) -> SqlResult<Existed> {
    let (mut def, columns, checks) = table_definition(create, database, table)?;
    def.partitions = catalog.partitions();
    // PARTITION BY KEY (columns): they alone place a row (every one in
    // the primary key, as MySQL requires).
    for name in partition_by {
        let column = columns
            .iter()
            .position(|c| c.name.eq_ignore_ascii_case(name) && !c.is_hidden())
            .ok_or_else(|| {
                SqlError::new(
                    codes::KEY_COLUMN_DOES_NOT_EXIST,
                    format!("Field in list of fields for partition function not found in table: '{name}'"),
                )
            })? as u16;
        if !def.primary_key.contains(&column) {
            return Err(SqlError::new(
                1503,
                "A PRIMARY KEY must include all columns in the table's partitioning function",
            ));
        }
        if !def.partition_key.contains(&column) {
            def.partition_key.push(column);
        }
    }
    if def.partition_key.len() > 8 {
        return Err(SqlError::unsupported(
            "a partition key of more than 8 columns",
        ));
    }
    match catalog.create_table(database, table, &def, &columns, &checks) {
        Err(error) if error.code == codes::TABLE_EXISTS && create.if_not_exists => Ok(Some(error)),
        Err(error) => Err(error),
        Ok(()) => Ok(None),
    }
}

/// What a CREATE ... IF NOT EXISTS found in its way: the error it would
/// have been without IF NOT EXISTS, now a note (`None`: created).
pub type Existed = Option<SqlError>;

/// CREATE [UNIQUE] INDEX.
pub fn create_index(
    catalog: &Catalog,
    create: &ast::CreateIndex,
    database: &str,
    table: &str,
) -> SqlResult<Existed> {
    let Some(name) = &create.name else {
        return Err(SqlError::parse("CREATE INDEX needs a name"));
    };
    match add_index(
        catalog,
        database,
        table,
        &name.to_string(),
        &create.columns,
        create.unique,
    ) {
        Err(error) if error.code == codes::DUP_KEYNAME && create.if_not_exists => Ok(Some(error)),
        Err(error) => Err(error),
        Ok(()) => Ok(None),
    }
}

/// Builds index `index` over `columns` of `database.table`, unique or
/// not, on the live table (docs/design/0024-online-index-changes.md).
pub fn add_index(
    catalog: &Catalog,
    database: &str,
    table: &str,
    index: &str,
    columns: &[ast::IndexColumn],
    unique: bool,
) -> SqlResult<()> {
    let sql_table = catalog.table(database, table)?;
    let columns: Vec<String> = index_columns(columns, &sql_table.columns)?
        .into_iter()
        .map(|c| sql_table.columns[c as usize].name.clone())
        .collect();
    let names: Vec<&str> = columns.iter().map(String::as_str).collect();
    let cluster = catalog.cluster();
    let full = sql_table.cluster_name();
    let created = match unique {
        true => cluster.create_unique_index(&full, index, &names),
        false => cluster.create_index(&full, index, &names),
    };
    catalog.invalidate(database, table);
    match created {
        Ok(_) => Ok(()),
        Err(error) if error.code() == Some(client::ErrorCode::IndexExists) => Err(SqlError::new(
            codes::DUP_KEYNAME,
            format!("Duplicate key name '{index}'"),
        )),
        Err(error) if error.code() == Some(client::ErrorCode::DuplicateKey) => Err(SqlError::new(
            codes::DUP_ENTRY,
            format!("Duplicate entry for key '{table}.{index}': two rows hold one value"),
        )),
        Err(error) => Err(SqlError::from_client(&error, &full)),
    }
}

/// DROP INDEX name ON table.
pub fn drop_index(catalog: &Catalog, database: &str, table: &str, index: &str) -> SqlResult<()> {
    let sql_table = catalog.table(database, table)?;
    let full = sql_table.cluster_name();
    let dropped = catalog.cluster().drop_index(&full, index);
    catalog.invalidate(database, table);
    match dropped {
        Ok(()) => Ok(()),
        Err(error) if error.code() == Some(client::ErrorCode::UnknownIndex) => Err(SqlError::new(
            codes::CANT_DROP_FIELD_OR_KEY,
            format!("Can't DROP '{index}'; check that column/key exists"),
        )),
        Err(error) => Err(SqlError::from_client(&error, &full)),
    }
}

/// What makes `table` again, empty: its definition with the ids the
/// cluster gives cleared, its columns and its CHECK constraints.
fn made_again(table: &SqlTable) -> (TableDef, Vec<SqlColumn>, Vec<CheckDeclaration>) {
    let mut def = table.def().clone();
    def.id = 0;
    def.version = 0;
    def.revision = 0;
    for index in &mut def.indexes {
        if let Some(unique) = &mut index.unique {
            *unique = UniqueTable {
                table_id: 0,
                table_version: 0,
            };
        }
    }
    let checks = table
        .checks
        .iter()
        .map(|check| check.declaration.clone())
        .collect();
    (def, table.columns.clone(), checks)
}

/// CREATE TABLE `database.table` LIKE `source`: the same columns,
/// indexes, CHECK constraints (those named after the source, `s_chk_n`,
/// named after the new table) and partitioning, empty.
pub fn create_table_like(
    catalog: &Catalog,
    database: &str,
    table: &str,
    source: &SqlTable,
    if_not_exists: bool,
) -> SqlResult<Existed> {
    check_name("table", table)?;
    if source.made_by_sql_node() {
        return Err(SqlError::unsupported(
            "CREATE TABLE ... LIKE a view or an information_schema table",
        ));
    }
    let (mut def, columns, mut checks) = made_again(source);
    def.name = crate::catalog::cluster_name(database, table);
    let generated = format!("{}_chk_", source.name);
    for check in &mut checks {
        if let Some(number) = check.name.strip_prefix(&generated) {
            check.name = format!("{table}_chk_{number}");
        }
    }
    match catalog.create_table(database, table, &def, &columns, &checks) {
        Err(error) if error.code == codes::TABLE_EXISTS && if_not_exists => Ok(Some(error)),
        Err(error) => Err(error),
        Ok(()) => Ok(None),
    }
}

/// The CREATE TABLE of CREATE TABLE ... SELECT: `create`'s own columns,
/// then each of the query's `columns` it does not declare, typed as the
/// query's result column (MySQL's rule), and no query.
pub fn create_for_query(
    create: &ast::CreateTable,
    columns: &[crate::result::OutputColumn],
) -> SqlResult<ast::CreateTable> {
    let mut made = create.clone();
    made.query = None;
    for (at, column) in columns.iter().enumerate() {
        if columns[..at]
            .iter()
            .any(|earlier| earlier.name.eq_ignore_ascii_case(&column.name))
        {
            return Err(SqlError::new(
                codes::DUP_FIELDNAME,
                format!("Duplicate column name '{}'", column.name),
            ));
        }
        if made
            .columns
            .iter()
            .any(|declared| declared.name.value.eq_ignore_ascii_case(&column.name))
        {
            continue;
        }
        let declared = column.kind.sql_type().declared();
        let dialect = crate::dialect::TesseraDialect::new();
        let data_type = sqlparser::parser::Parser::new(&dialect)
            .try_with_sql(&declared)
            .and_then(|mut parser| parser.parse_data_type())
            .map_err(|error| {
                SqlError::unsupported(format!(
                    "a column of type {declared} from a query ({error})"
                ))
            })?;
        made.columns.push(ast::ColumnDef {
            name: ast::Ident::with_quote('`', column.name.clone()),
            data_type,
            options: Vec::new(),
        });
    }
    Ok(made)
}

/// TRUNCATE: the table dropped and created again empty, as NDB does it
/// (its AUTO_INCREMENT counter starts again from 1).
pub fn truncate(catalog: &Catalog, database: &str, table: &str) -> SqlResult<()> {
    let sql_table = catalog.table(database, table)?;
    let (def, columns, checks) = made_again(&sql_table);
    // In two halves, the definition recorded before the drop: a SQL node
    // that dies between them leaves the TRUNCATE for the next one that
    // finds the table gone to finish, never the table dropped.
    catalog.begin_truncate(database, table, &def, &columns, &checks)?;
    catalog.finish_truncate(database, table)?;
    Ok(())
}
