//! ALTER TABLE: the changes a live table takes without its rows being
//! rewritten (docs/design/0036-alter-table.md): indexes added and dropped
//! (the cluster's online index builds), the AUTO_INCREMENT counter moved,
//! and the table options MySQL tools send (ENGINE, CHARSET, COLLATE,
//! COMMENT, ROW_FORMAT, ALGORITHM, LOCK), which change nothing here as
//! they change nothing at CREATE TABLE. What would rewrite the rows or
//! change what other SQL nodes hold cached (columns, the primary key,
//! CHECK constraints, foreign keys, a new name) is refused with 1235,
//! naming the clause, before anything is changed.

use crate::auto_increment::AutoIncrement;
use crate::catalog::Catalog;
use crate::ddl::{self, unnamed_index_name};
use crate::error::{codes, SqlError, SqlResult};
use client::IndexDef;
use sqlparser::ast::{self, AlterTableOperation as Op, TableConstraint};

/// One index to build.
struct NewIndex<'s> {
    name: String,
    columns: &'s [ast::IndexColumn],
    unique: bool,
}

/// What an ALTER TABLE asks, checked against the table as it is.
#[derive(Default)]
struct Changes<'s> {
    added: Vec<NewIndex<'s>>,
    dropped: Vec<String>,
    auto_increment: Option<u64>,
}

/// ALTER TABLE `database.table` with `operations`.
pub fn alter_table(
    catalog: &Catalog,
    auto_increment: &AutoIncrement,
    database: &str,
    table: &str,
    operations: &[Op],
) -> SqlResult<()> {
    let sql_table = catalog.table(database, table)?;
    let changes = changes(&sql_table.def().indexes, operations)?;
    // Every index name is checked before the first change: a statement
    // that would fail on a name fails having changed nothing.
    let mut indexes: Vec<IndexDef> = sql_table.def().indexes.clone();
    for name in &changes.dropped {
        let Some(at) = indexes
            .iter()
            .position(|index| index.name.eq_ignore_ascii_case(name))
        else {
            return Err(SqlError::new(
                codes::CANT_DROP_FIELD_OR_KEY,
                format!("Can't DROP INDEX `{name}`; check that it exists"),
            ));
        };
        indexes.remove(at);
    }
    let mut names: Vec<String> = indexes.iter().map(|index| index.name.clone()).collect();
    for added in &changes.added {
        // Its columns exist (1072) and are columns (not expressions).
        ddl::index_columns(added.columns, &sql_table.columns)?;
        if names
            .iter()
            .any(|name| name.eq_ignore_ascii_case(&added.name))
        {
            return Err(SqlError::new(
                codes::DUP_KEYNAME,
                format!("Duplicate key name '{}'", added.name),
            ));
        }
        names.push(added.name.clone());
    }
    // Indexes whose names are free now are built first, so that a build
    // that fails (a unique index over duplicate values) has dropped
    // nothing; then the drops; then the builds that reuse a dropped name.
    let reuses = |added: &NewIndex| {
        changes
            .dropped
            .iter()
            .any(|name| name.eq_ignore_ascii_case(&added.name))
    };
    let mut built: Vec<&str> = Vec::new();
    let build = |added: &NewIndex, built: &mut Vec<_>| -> SqlResult<()> {
        ddl::add_index(
            catalog,
            database,
            table,
            &added.name,
            added.columns,
            added.unique,
        )
        .map_err(|error| undo(catalog, database, table, built, error))
    };
    for added in changes.added.iter().filter(|added| !reuses(added)) {
        build(added, &mut built)?;
        built.push(&added.name);
    }
    for name in &changes.dropped {
        ddl::drop_index(catalog, database, table, name)
            .map_err(|error| undo(catalog, database, table, &built, error))?;
    }
    // From here a failure cannot give the dropped indexes back: the
    // builds before stay, and the error says which index failed.
    for added in changes.added.iter().filter(|added| reuses(added)) {
        build(added, &mut Vec::new())?;
    }
    if let Some(value) = changes.auto_increment {
        let sql_table = catalog.table(database, table)?;
        if sql_table.auto_increment.is_some() {
            auto_increment.raise(catalog.cluster(), &sql_table, value)?;
        }
    }
    Ok(())
}

/// `error`, after dropping the indexes `built` by this statement (so a
/// failed ALTER TABLE leaves the table's indexes as they were).
fn undo(
    catalog: &Catalog,
    database: &str,
    table: &str,
    built: &[&str],
    error: SqlError,
) -> SqlError {
    for name in built.iter().rev() {
        if let Err(undone) = ddl::drop_index(catalog, database, table, name) {
            return SqlError::new(
                error.code,
                format!(
                    "{} (and index `{name}`, built by this statement, could not be dropped again: {})",
                    error.message, undone.message
                ),
            );
        }
    }
    error
}

/// The changes `operations` ask of a table with `indexes`, or the first
/// one Tessera refuses.
fn changes<'s>(indexes: &[IndexDef], operations: &'s [Op]) -> SqlResult<Changes<'s>> {
    let mut changes = Changes::default();
    for operation in operations {
        match operation {
            Op::AddConstraint { constraint, .. } => {
                let (name, columns, unique) = match constraint {
                    TableConstraint::Index { name, columns, .. } => (name.as_ref(), columns, false),
                    TableConstraint::Unique {
                        name,
                        index_name,
                        columns,
                        ..
                    } => (index_name.as_ref().or(name.as_ref()), columns, true),
                    TableConstraint::PrimaryKey { .. } => {
                        return Err(SqlError::new(
                            codes::MULTIPLE_PRI_KEY,
                            "Multiple primary key defined (every Tessera table has one)",
                        ))
                    }
                    other => return Err(refused(&format!("ADD {other}"))),
                };
                let Some(first) = columns.first() else {
                    return Err(SqlError::parse("an index needs a column"));
                };
                let name = match name {
                    Some(name) => name.value.clone(),
                    None => {
                        let ast::Expr::Identifier(column) = &first.column.expr else {
                            return Err(SqlError::unsupported(format!(
                                "index on {}",
                                first.column.expr
                            )));
                        };
                        // Named as CREATE TABLE names it, past the
                        // indexes the statement adds before it too.
                        let mut taken = indexes.to_vec();
                        taken.extend(changes.added.iter().map(|added| IndexDef {
                            id: 0,
                            name: added.name.clone(),
                            columns: Vec::new(),
                            unique: None,
                        }));
                        unnamed_index_name(&column.value, &taken)
                    }
                };
                changes.added.push(NewIndex {
                    name,
                    columns,
                    unique,
                });
            }
            Op::DropIndex { name } if name.value.eq_ignore_ascii_case("PRIMARY") => {
                return Err(refused("DROP PRIMARY KEY"))
            }
            Op::DropIndex { name } => changes.dropped.push(name.value.clone()),
            Op::AutoIncrement { value, .. } => {
                let ast::Value::Number(digits, _) = &value.value else {
                    return Err(SqlError::parse("AUTO_INCREMENT takes a number"));
                };
                let value = digits
                    .parse::<u64>()
                    .map_err(|_| SqlError::parse(format!("AUTO_INCREMENT = {digits}")))?;
                changes.auto_increment = Some(value);
            }
            // Index builds never block writes (LOCK=NONE) and never copy
            // rows: every algorithm named is what happens anyway.
            Op::Algorithm { .. } | Op::Lock { .. } => {}
            // The table options (`dialect::alter_table`): at CREATE TABLE
            // they are accepted and change nothing; so here.
            Op::SetOptionsParens { .. } => {}
            other => return Err(refused(&other.to_string())),
        }
    }
    Ok(changes)
}

/// 1235 for an ALTER TABLE clause Tessera does not make.
fn refused(clause: &str) -> SqlError {
    SqlError::unsupported(format!("ALTER TABLE ... {clause}"))
}
