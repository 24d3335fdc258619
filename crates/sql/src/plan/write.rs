//! UPDATE and DELETE plans: a single table's WHERE, ORDER BY and LIMIT
//! compiled and its access path chosen, the increments an UPDATE can
//! leave to the data node, and a multi-table write's join
//! (`joined_write`).

use super::access_path::{choose_access, split_and};
use super::{
    constant_count, is_placeholder, joined_write, table_name, visit, AccessPlan, Compiled, Plan,
    WritePlan,
};
use crate::catalog::{Catalog, SqlTable};
use crate::error::{SqlError, SqlResult};
use crate::expr::{Compiler, Expr};
use crate::types::SqlType;
use crate::value::Arithmetic;
use crate::value::Value;
use sqlparser::ast;
use std::sync::Arc;

/// A multi-table UPDATE (`update`) or DELETE, compiled.
pub(super) fn joined(
    from: &[ast::TableWithJoins],
    selection: Option<&ast::Expr>,
    target: joined_write::Target<'_>,
    catalog: &Catalog,
    database: Option<&str>,
    update: bool,
) -> SqlResult<Compiled> {
    let mut placeholders = Vec::new();
    let write = joined_write::joined_write(
        from,
        selection,
        target,
        catalog,
        database,
        &mut placeholders,
    )?;
    Ok(Compiled {
        through_view: false,
        parameter_order: crate::expr::parameter_order_of(&placeholders),
        plan: match update {
            true => Plan::Update(write),
            false => Plan::Delete(write),
        },
    })
}

/// An UPDATE (with `assignments`) or a DELETE (without): its WHERE,
/// ORDER BY (DELETE's) and LIMIT (a count or `?`) compiled, its access
/// chosen.
pub(super) fn write_plan(
    table: &Arc<SqlTable>,
    mut compiler: Compiler<'_>,
    selection: Option<&ast::Expr>,
    limit: Option<&ast::Expr>,
    order: &[ast::OrderByExpr],
    assignments: Vec<(usize, Expr)>,
) -> SqlResult<Compiled> {
    compiler.place = "where clause";
    let filter = selection.map(|e| compiler.compile(e)).transpose()?;
    compiler.place = "order clause";
    let mut order_by = Vec::with_capacity(order.len());
    for item in order {
        order_by.push((
            compiler.compile(&item.expr)?,
            item.options.asc == Some(false),
        ));
    }
    let (limit, limit_parameter) = match limit {
        Some(expr) if is_placeholder(expr) => match compiler.compile(expr)? {
            Expr::Param(slot) => (None, Some(slot)),
            other => unreachable!("a placeholder compiles to a parameter, not {other:?}"),
        },
        Some(expr) => (Some(constant_count(expr)?), None),
        None => (None, None),
    };
    let update = !assignments.is_empty();
    let access = choose_access(table, filter.as_ref());
    // A CHECK constraint is checked, and a generated column computed, on
    // the new row here, which the data node's increment never shows.
    let increments = match update
        && limit != Some(0)
        && limit_parameter.is_none()
        && table.checks.is_empty()
        && table.generated.is_empty()
    {
        true => increments_of(table, &access, filter.as_ref(), &assignments),
        false => None,
    };
    let mut subqueries = compiler.take_subqueries();
    // A subquery an assignment reads gives a value to store: what it
    // raises is an error (strict mode), wherever it runs.
    let mut stored = Vec::new();
    for (_, expr) in &assignments {
        visit::subquery_slots(expr, &mut stored);
    }
    for slot in stored {
        if let Some(subquery) = subqueries.get_mut(slot) {
            subquery.stored = true;
        }
    }
    let write = WritePlan {
        table: Arc::clone(table),
        access,
        filter,
        assignments,
        limit,
        limit_parameter,
        order_by,
        increments,
        subqueries,
        joined: None,
    };
    Ok(Compiled {
        through_view: false,
        parameter_order: compiler.parameter_order(),
        plan: match update {
            true => Plan::Update(write),
            false => Plan::Delete(write),
        },
    })
}

/// The increments an UPDATE is, when the data node can do it alone: the
/// WHERE clause is the primary key's equalities and nothing else (access
/// by the whole key, one conjunct per key column), and every assignment
/// is `c = c + n`, `c = n + c` or `c = c - n` with `n` a non-zero integer
/// constant and `c` a column stored as INT or BIGINT with no narrower SQL
/// range (TINYINT's is checked here, not by the data node), in no key
/// and no unique index, assigned once. A non-zero delta always changes
/// the row, so the statement changes the rows it matches, as MySQL counts
/// them; a sum out of range or a NULL column is refused by the data node
/// and the statement then runs as any UPDATE, for MySQL's answer.
fn increments_of(
    table: &SqlTable,
    access: &AccessPlan,
    filter: Option<&Expr>,
    assignments: &[(usize, Expr)],
) -> Option<Vec<(usize, i64)>> {
    let AccessPlan::PrimaryKey(_) = access else {
        return None;
    };
    if assignments.len() > client::MAX_INCREMENTS {
        return None;
    }
    let mut conjuncts = Vec::new();
    split_and(filter?, &mut conjuncts);
    let key_columns = table.key_columns();
    if conjuncts.len() != key_columns.len() {
        return None;
    }
    let in_unique_index = |column: usize| {
        table.def().indexes.iter().any(|index| {
            index.unique.is_some() && index.columns.iter().any(|&c| c as usize == column)
        })
    };
    let mut increments: Vec<(usize, i64)> = Vec::with_capacity(assignments.len());
    for (column, expr) in assignments {
        let (operation, left, right) = match expr {
            Expr::Arithmetic(operation, left, right) => (operation, &**left, &**right),
            _ => return None,
        };
        let constant = match (operation, left, right) {
            (Arithmetic::Add | Arithmetic::Subtract, Expr::Column(c), Expr::Literal(n))
                if c == column =>
            {
                n
            }
            (Arithmetic::Add, Expr::Literal(n), Expr::Column(c)) if c == column => n,
            _ => return None,
        };
        let magnitude = match constant {
            Value::Int(n) => *n,
            Value::UInt(n) => i64::try_from(*n).ok()?,
            _ => return None,
        };
        let delta = match operation {
            Arithmetic::Subtract => magnitude.checked_neg()?,
            _ => magnitude,
        };
        let sql_column = &table.columns[*column];
        // Only a type as wide as its storage: the data node checks the
        // sum against the stored type's range, not a narrower SQL one.
        let integer = matches!(sql_column.sql_type, SqlType::Integer { bytes: 4 | 8, .. });
        if delta == 0
            || !integer
            || key_columns.contains(column)
            || in_unique_index(*column)
            || increments.iter().any(|(seen, _)| seen == column)
        {
            return None;
        }
        increments.push((*column, delta));
    }
    Some(increments)
}

/// The one table `command` (UPDATE or DELETE) writes, and its alias.
pub(super) fn single_table(
    from: &ast::TableWithJoins,
    catalog: &Catalog,
    database: Option<&str>,
    command: &str,
) -> SqlResult<(Arc<SqlTable>, Option<String>)> {
    if !from.joins.is_empty() {
        return Err(SqlError::unsupported("joins"));
    }
    match &from.relation {
        ast::TableFactor::Table { name, alias, .. } => {
            let (database, table) = table_name(name, database)?;
            let sql_table = catalog
                .table(&database, &table)
                .map_err(|error| catalog.not_a_table(&database, &table, command, error))?;
            Ok((sql_table, alias.as_ref().map(|a| a.name.value.clone())))
        }
        other => Err(SqlError::unsupported(format!("FROM {other}"))),
    }
}
