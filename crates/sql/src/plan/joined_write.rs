//! Multi-table UPDATE and DELETE (docs/design/0039-joined-writes.md):
//! `UPDATE a JOIN b ON ... SET a.x = b.y WHERE ...`, `DELETE a FROM a
//! JOIN b ON ... WHERE ...` and `DELETE FROM a USING a JOIN b ...`, which
//! write one of the joined tables (the target).
//!
//! The join is compiled as a SELECT of the same FROM and WHERE that
//! locks what it reads (FOR UPDATE), its output the target's whole row
//! (every column, the hidden key too: what the write is keyed by) and
//! then each assignment's value. The write plan runs it and writes the
//! target's rows, each once however many rows of the others it joined
//! (MySQL's rule), with its assignments reading those values.

use super::{last_ident, select_plan, Ctes, WritePlan};
use crate::catalog::SqlTable;
use crate::error::{codes, SqlError, SqlResult};
use crate::expr::Expr;
use crate::result::OutputColumn;
use client::LockMode;
use sqlparser::ast;
use std::sync::Arc;

/// The written table's part of a joined write: which source it is.
pub(super) enum Target<'s> {
    /// UPDATE: the table the assignments name (each `t.c`, or a `c` that
    /// one source alone has).
    Assigned(&'s [ast::Assignment]),
    /// DELETE: the one table named before FROM (`DELETE a FROM ...`).
    Named(&'s ast::ObjectName),
}

/// The plan of a joined write over `from` (its tables and joins) with
/// WHERE `selection`, writing `target`; `placeholders` are the
/// statement's.
pub(super) fn joined_write(
    from: &[ast::TableWithJoins],
    selection: Option<&ast::Expr>,
    target: Target<'_>,
    catalog: &crate::catalog::Catalog,
    database: Option<&str>,
    placeholders: &mut Vec<(u64, u64)>,
) -> SqlResult<WritePlan> {
    // `SELECT <each assignment's value> FROM <from> WHERE <selection>
    // FOR UPDATE`, made from a parsed template so that every part keeps
    // its place in the statement (parameters are numbered by it).
    let mut query = template()?;
    let ast::SetExpr::Select(select) = query.body.as_mut() else {
        unreachable!("the template is a SELECT")
    };
    select.from = from.to_vec();
    select.selection = selection.cloned();
    let assignments = match &target {
        Target::Assigned(assignments) => *assignments,
        Target::Named(_) => &[],
    };
    select.projection = match assignments.is_empty() {
        true => vec![ast::SelectItem::UnnamedExpr(ast::Expr::value(
            ast::Value::Number("1".into(), false),
        ))],
        false => assignments
            .iter()
            .map(|a| ast::SelectItem::UnnamedExpr(a.value.clone()))
            .collect(),
    };
    let mut plan = select_plan(
        &query,
        catalog,
        database,
        &[],
        placeholders,
        &Ctes::default(),
    )?;
    if !plan.aggregates.is_empty() || !plan.group_by.is_empty() {
        return Err(SqlError::new(
            codes::INVALID_GROUP_FUNC_USE,
            "Invalid use of group function",
        ));
    }
    // The sources in the joined row's order, with their offsets.
    let mut sources: Vec<(Arc<SqlTable>, usize, Option<usize>)> = Vec::new();
    if let Some(table) = &plan.table {
        sources.push((Arc::clone(table), 0, None));
    }
    for (at, join) in plan.joins.iter().enumerate() {
        sources.push((Arc::clone(&join.table), join.offset, Some(at)));
    }
    let names = source_names(from);
    let at = match &target {
        Target::Named(name) => {
            let wanted = last_ident(name);
            names
                .iter()
                .position(|name| name.eq_ignore_ascii_case(&wanted))
                .ok_or_else(|| {
                    SqlError::new(
                        codes::UNKNOWN_TABLE,
                        format!("Unknown table '{wanted}' in MULTI DELETE"),
                    )
                })?
        }
        Target::Assigned(assignments) => assigned_source(assignments, &names, &sources)?,
    };
    let (table, offset, join) = sources
        .get(at)
        .cloned()
        .ok_or_else(|| SqlError::unsupported("a joined write of a derived table"))?;
    if table.made_by_sql_node() {
        return Err(SqlError::unsupported(
            "a joined write of a view, derived table or information_schema table",
        ));
    }
    // Every column of the target is read (its key above all).
    let all: Vec<usize> = (0..table.columns.len()).collect();
    match join {
        None => plan.needed = all,
        Some(join) => plan.joins[join].needed = all,
    }
    let width = table.columns.len();
    let mut output: Vec<Expr> = (0..width).map(|c| Expr::Column(offset + c)).collect();
    let mut columns: Vec<OutputColumn> = table
        .columns
        .iter()
        .map(|column| OutputColumn::of_column(&table, column))
        .collect();
    let mut compiled_assignments = Vec::with_capacity(assignments.len());
    if !assignments.is_empty() {
        for (number, assignment) in assignments.iter().enumerate() {
            let name = assigned_column(assignment)?.1;
            let column = table
                .column_index(&name)
                .ok_or_else(|| SqlError::bad_field(&name, "field list"))?;
            crate::generated::refuse_assignment(&table, column)?;
            compiled_assignments.push((column, Expr::Column(width + number)));
        }
        output.append(&mut plan.output);
        columns.extend(plan.columns.iter().cloned());
    }
    plan.output = output;
    plan.columns = columns.into();
    plan.lock = LockMode::Exclusive;
    Ok(WritePlan {
        table,
        access: super::AccessPlan::FullScan,
        filter: None,
        assignments: compiled_assignments,
        limit: None,
        limit_parameter: None,
        order_by: Vec::new(),
        increments: None,
        subqueries: Vec::new(),
        joined: Some(Box::new(plan)),
    })
}

fn template() -> SqlResult<ast::Query> {
    let mut statements = crate::parse::parse("SELECT 1 FROM DUAL FOR UPDATE")?;
    match statements.pop() {
        Some(ast::Statement::Query(query)) => Ok(*query),
        _ => unreachable!("the template is a query"),
    }
}

/// The names the FROM clause's tables go by, in order: alias, else name.
fn source_names(from: &[ast::TableWithJoins]) -> Vec<String> {
    let name_of = |factor: &ast::TableFactor| match factor {
        ast::TableFactor::Table { name, alias, .. } => alias
            .as_ref()
            .map_or_else(|| last_ident(name), |alias| alias.name.value.clone()),
        ast::TableFactor::Derived { alias, .. } => alias
            .as_ref()
            .map_or_else(String::new, |alias| alias.name.value.clone()),
        _ => String::new(),
    };
    from.iter()
        .flat_map(|item| {
            std::iter::once(name_of(&item.relation))
                .chain(item.joins.iter().map(|join| name_of(&join.relation)))
        })
        .collect()
}

/// An assignment's table qualifier (if written) and column.
fn assigned_column(assignment: &ast::Assignment) -> SqlResult<(Option<String>, String)> {
    let ast::AssignmentTarget::ColumnName(name) = &assignment.target else {
        return Err(SqlError::unsupported("tuple assignments"));
    };
    let parts: Vec<String> = name
        .0
        .iter()
        .filter_map(|part| part.as_ident().map(|ident| ident.value.clone()))
        .collect();
    match parts.as_slice() {
        [column] => Ok((None, column.clone())),
        [.., table, column] => Ok((Some(table.clone()), column.clone())),
        [] => Err(SqlError::parse("an assignment without a column")),
    }
}

/// The source every assignment writes: one table, or 1235.
fn assigned_source(
    assignments: &[ast::Assignment],
    names: &[String],
    sources: &[(Arc<SqlTable>, usize, Option<usize>)],
) -> SqlResult<usize> {
    let mut target: Option<usize> = None;
    for assignment in assignments {
        let (qualifier, column) = assigned_column(assignment)?;
        let at = match qualifier {
            Some(qualifier) => names
                .iter()
                .position(|name| name.eq_ignore_ascii_case(&qualifier))
                .ok_or_else(|| {
                    SqlError::bad_field(&format!("{qualifier}.{column}"), "field list")
                })?,
            None => {
                let mut having = sources
                    .iter()
                    .enumerate()
                    .filter(|(_, (table, ..))| table.column_index(&column).is_some())
                    .map(|(at, _)| at);
                let first = having
                    .next()
                    .ok_or_else(|| SqlError::bad_field(&column, "field list"))?;
                if having.next().is_some() {
                    return Err(SqlError::new(
                        codes::NON_UNIQ,
                        format!("Column '{column}' in field list is ambiguous"),
                    ));
                }
                first
            }
        };
        if target.is_some_and(|target| target != at) {
            return Err(SqlError::unsupported(
                "UPDATE of more than one table in one statement",
            ));
        }
        target = Some(at);
    }
    target.ok_or_else(|| SqlError::parse("UPDATE without SET"))
}
