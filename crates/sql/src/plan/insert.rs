//! INSERT (and REPLACE, INSERT IGNORE, ON DUPLICATE KEY UPDATE, INSERT ...
//! SET, INSERT ... SELECT) compiled into an `InsertPlan`: the target
//! columns, each row's expressions, the conflict rule and the SELECT that
//! feeds it (docs/design/0030-upserts.md).

use super::{compile_select, last_ident, table_name, Compiled, Conflict, InsertPlan, Plan};
use crate::catalog::{Catalog, SqlTable};
use crate::error::{codes, SqlError, SqlResult};
use crate::expr::{Compiler, Scope};
use sqlparser::ast;
use std::sync::Arc;

pub(super) fn compile_insert(
    insert: &ast::Insert,
    catalog: &Catalog,
    database: Option<&str>,
) -> SqlResult<Compiled> {
    let ast::TableObject::TableName(name) = &insert.table else {
        return Err(SqlError::unsupported("INSERT INTO a function"));
    };
    let current_database = database;
    let (database, table) = table_name(name, database)?;
    let sql_table = catalog
        .table(&database, &table)
        .map_err(|error| catalog.not_a_table(&database, &table, "INSERT", error))?;
    let column_of = |name: &str| {
        sql_table
            .column_index(name)
            .ok_or_else(|| SqlError::bad_field(name, "field list"))
    };
    // INSERT ... SET a = 1, b = 2 is one row.
    let set_row: Vec<(usize, &ast::Expr)> = insert
        .assignments
        .iter()
        .map(|assignment| match &assignment.target {
            ast::AssignmentTarget::ColumnName(name) => {
                Ok((column_of(&last_ident(name))?, &assignment.value))
            }
            _ => Err(SqlError::unsupported("tuple assignments")),
        })
        .collect::<SqlResult<_>>()?;
    let targets: Vec<usize> = if !set_row.is_empty() {
        set_row.iter().map(|(column, _)| *column).collect()
    } else if insert.columns.is_empty() {
        sql_table
            .visible_columns()
            .map(|(index, _)| index)
            .collect()
    } else {
        insert
            .columns
            .iter()
            .map(|ident| column_of(&ident.value))
            .collect::<SqlResult<_>>()?
    };
    for (i, target) in targets.iter().enumerate() {
        if targets[..i].contains(target) {
            return Err(SqlError::new(
                1110,
                format!(
                    "Column '{}' specified twice",
                    sql_table.columns[*target].name
                ),
            ));
        }
    }
    // The row alias's table, made before the compiler that borrows it.
    let aliased = insert
        .insert_alias
        .as_ref()
        .map(|alias| row_alias(&sql_table, &targets, alias))
        .transpose()?;
    let mut compiler = Compiler::new(None, None);
    let mut rows = Vec::new();
    let mut select = None;
    let mut parameter_order = None;
    let compile_value = |compiler: &mut Compiler<'_>, e: &ast::Expr| match e {
        // DEFAULT in VALUES: the column's default.
        ast::Expr::Identifier(ident)
            if ident.quote_style.is_none() && ident.value.eq_ignore_ascii_case("DEFAULT") =>
        {
            Ok(None)
        }
        other => compiler.compile(other).map(Some),
    };
    if !set_row.is_empty() {
        let row = set_row
            .iter()
            .map(|(_, e)| compile_value(&mut compiler, e))
            .collect::<SqlResult<Vec<_>>>()?;
        rows.push(row);
    } else {
        let source = insert
            .source
            .as_ref()
            .ok_or_else(|| SqlError::parse("INSERT without VALUES"))?;
        match source.body.as_ref() {
            ast::SetExpr::Values(values) => {
                for (number, row) in values.rows.iter().enumerate() {
                    if row.len() != targets.len() {
                        return Err(SqlError::new(
                            codes::WRONG_VALUE_COUNT_ON_ROW,
                            format!(
                                "Column count doesn't match value count at row {}",
                                number + 1
                            ),
                        ));
                    }
                    let compiled = row
                        .iter()
                        .map(|e| compile_value(&mut compiler, e))
                        .collect::<SqlResult<Vec<_>>>()?;
                    rows.push(compiled);
                }
            }
            ast::SetExpr::Select(_)
            | ast::SetExpr::Query(_)
            | ast::SetExpr::SetOperation { .. } => {
                let compiled = compile_select(source, catalog, current_database)?;
                let Plan::Select(plan) = compiled.plan else {
                    unreachable!("a query compiles to a SELECT")
                };
                if plan.output.len() != targets.len() {
                    return Err(SqlError::new(
                        codes::WRONG_VALUE_COUNT_ON_ROW,
                        "Column count doesn't match value count at row 1",
                    ));
                }
                parameter_order = Some(compiled.parameter_order);
                select = Some(plan);
            }
            other => return Err(SqlError::unsupported(format!("INSERT ... {other}"))),
        }
    }
    let conflict = match (&insert.on, insert.replace_into, insert.ignore) {
        (Some(ast::OnInsert::DuplicateKeyUpdate(assignments)), false, _) => {
            if select.is_some() {
                return Err(SqlError::unsupported(
                    "INSERT ... SELECT ... ON DUPLICATE KEY UPDATE",
                ));
            }
            // The existing row's columns, then VALUES(c): the new row's,
            // which MySQL 8.0.19's row alias names too (`AS new [(a, b)]
            // ... UPDATE c = new.a`; Rails 7.1 writes its upserts so).
            let width = sql_table.columns.len();
            let mut scopes = vec![Scope::new(&sql_table, None, 0)];
            if let Some((table, qualified_only)) = &aliased {
                let mut scope = Scope::new(table, None, width);
                scope.qualified_only = *qualified_only;
                scopes.push(scope);
            }
            compiler.set_scopes(scopes);
            compiler.set_values_offset(Some(width));
            let mut compiled = Vec::with_capacity(assignments.len());
            for assignment in assignments {
                let ast::AssignmentTarget::ColumnName(name) = &assignment.target else {
                    return Err(SqlError::unsupported("tuple assignments"));
                };
                let column = column_of(&last_ident(name))?;
                crate::generated::refuse_assignment(&sql_table, column)?;
                compiled.push((column, compiler.compile(&assignment.value)?));
            }
            Conflict::Update(compiled)
        }
        (Some(_), _, _) => return Err(SqlError::unsupported("this ON clause of INSERT")),
        (None, ..) if insert.insert_alias.is_some() => {
            return Err(SqlError::unsupported(
                "INSERT ... AS alias without ON DUPLICATE KEY UPDATE",
            ))
        }
        (None, true, _) => Conflict::Replace,
        (None, false, true) => Conflict::Ignore,
        (None, false, false) => Conflict::Error,
    };
    Ok(Compiled {
        through_view: false,
        parameter_order: parameter_order.unwrap_or_else(|| compiler.parameter_order()),
        plan: Plan::Insert(InsertPlan {
            table: sql_table,
            targets,
            rows,
            select,
            conflict,
        }),
    })
}

/// The table an INSERT's row alias names (`AS new` or `AS new(a, b)`):
/// the new row's columns, under the table's names, or under the column
/// aliases for the statement's columns in order; and whether its columns
/// need the alias before them (no column aliases).
fn row_alias(
    table: &SqlTable,
    targets: &[usize],
    alias: &ast::InsertAliases,
) -> SqlResult<(SqlTable, bool)> {
    let name = last_ident(&alias.row_alias);
    let mut columns = table.columns.clone();
    let qualified_only = match alias.col_aliases.as_deref() {
        None | Some([]) => true,
        Some(names) => {
            if names.len() != targets.len() {
                return Err(SqlError::new(
                    codes::WRONG_VALUE_COUNT_ON_ROW,
                    "Column count doesn't match value count at row 1",
                ));
            }
            // Only the aliases name columns (an empty name matches none).
            for column in &mut columns {
                column.name.clear();
            }
            for (target, name) in targets.iter().zip(names) {
                columns[*target].name = name.value.clone();
            }
            false
        }
    };
    Ok((
        SqlTable {
            database: table.database.clone(),
            name,
            table: Arc::clone(&table.table),
            columns,
            auto_increment: None,
            declared: true,
            view: None,
            derived: None,
            checks: Vec::new(),
            generated: Vec::new(),
        },
        qualified_only,
    ))
}
