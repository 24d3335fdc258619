//! UNION: the SELECTs of `A UNION [ALL | DISTINCT] B ...` compiled into
//! the first one's plan (docs/design/0029-joins-and-grouping.md,
//! "UNION").

use super::{constant_count, select_plan, Ctes, SelectPlan, UnionPlan};
use crate::catalog::Catalog;
use crate::error::{codes, SqlError, SqlResult};
use crate::expr::Scope;
use crate::result::OutputColumn;
use client::LockMode;
use sqlparser::ast;

/// A query's LIMIT and OFFSET (constants).
fn limit_and_offset(query: &ast::Query) -> SqlResult<(Option<u64>, u64)> {
    Ok(match &query.limit_clause {
        None => (None, 0),
        Some(ast::LimitClause::LimitOffset { limit, offset, .. }) => (
            limit.as_ref().map(constant_count).transpose()?,
            offset
                .as_ref()
                .map(|o| constant_count(&o.value))
                .transpose()?
                .unwrap_or(0),
        ),
        Some(ast::LimitClause::OffsetCommaLimit { offset, limit }) => {
            (Some(constant_count(limit)?), constant_count(offset)?)
        }
    })
}

/// Compiles `SELECT ... UNION [ALL | DISTINCT] SELECT ...`: each SELECT
/// on its own (a parenthesized one with its own ORDER BY and LIMIT),
/// the first carrying the rest, their columns' types made one, and the
/// ORDER BY and LIMIT of the whole, whose ORDER BY names output columns
/// by name or position (as MySQL's: a union's rows have no tables).
pub(super) fn union_plan(
    query: &ast::Query,
    catalog: &Catalog,
    database: Option<&str>,
    outer: &[Scope<'_>],
    placeholders: &mut Vec<(u64, u64)>,
    ctes: &Ctes,
) -> SqlResult<SelectPlan> {
    if !query.locks.is_empty() {
        return Err(SqlError::unsupported("FOR UPDATE or FOR SHARE of a UNION"));
    }
    let operands = union_operands(&query.body)?;
    let mut parts = Vec::with_capacity(operands.len());
    for (operand, distinct) in operands {
        let plan = match operand {
            ast::SetExpr::Query(inner) => {
                select_plan(inner, catalog, database, outer, placeholders, ctes)?
            }
            select => {
                // The SELECT alone: the ORDER BY, LIMIT and the rest
                // written after the last SELECT are the whole's.
                let part = ast::Query {
                    with: None,
                    body: Box::new(select.clone()),
                    order_by: None,
                    limit_clause: None,
                    fetch: None,
                    locks: Vec::new(),
                    for_clause: None,
                    settings: None,
                    format_clause: None,
                    pipe_operators: Vec::new(),
                };
                select_plan(&part, catalog, database, outer, placeholders, ctes)?
            }
        };
        if plan.lock != LockMode::CommittedRead {
            return Err(SqlError::unsupported("FOR UPDATE or FOR SHARE in a UNION"));
        }
        parts.push((plan, distinct));
    }
    let mut columns: Vec<OutputColumn> = parts[0].0.columns.to_vec();
    for (part, _) in &parts[1..] {
        if part.columns.len() != columns.len() {
            return Err(SqlError::new(
                codes::WRONG_NUMBER_OF_COLUMNS_IN_SELECT,
                "The used SELECT statements have a different number of columns",
            ));
        }
        for (column, other) in columns.iter_mut().zip(part.columns.iter()) {
            column.unite(other);
        }
    }
    let mut order_by = Vec::new();
    if let Some(order) = &query.order_by {
        let ast::OrderByKind::Expressions(list) = &order.kind else {
            return Err(SqlError::unsupported("ORDER BY ALL"));
        };
        for item in list {
            let position = match &item.expr {
                ast::Expr::Value(value) if matches!(value.value, ast::Value::Number(..)) => {
                    let position = constant_count(&item.expr)? as usize;
                    position
                        .checked_sub(1)
                        .filter(|at| *at < columns.len())
                        .ok_or_else(|| SqlError::bad_field(&position.to_string(), "order clause"))?
                }
                ast::Expr::Identifier(name) => columns
                    .iter()
                    .position(|c| c.name.eq_ignore_ascii_case(&name.value))
                    .ok_or_else(|| SqlError::bad_field(&name.value, "order clause"))?,
                other => {
                    return Err(SqlError::unsupported(format!(
                        "ORDER BY {other} of a UNION (name an output column)"
                    )))
                }
            };
            order_by.push((position, item.options.asc == Some(false)));
        }
    }
    let (limit, offset) = limit_and_offset(query)?;
    let mut parts = parts.into_iter();
    let (mut first, _) = parts.next().expect("a UNION has two SELECTs or more");
    first.columns = columns.into();
    first.union = Some(Box::new(UnionPlan {
        parts: parts.collect(),
        order_by,
        limit,
        offset,
    }));
    Ok(first)
}

/// The SELECTs of a UNION in order, each with whether UNION DISTINCT
/// joins it to those before (for the first, unused). The parser builds
/// `A UNION B UNION C` leaning left; its left spine is walked in a loop,
/// so a long union takes no stack.
fn union_operands(body: &ast::SetExpr) -> SqlResult<Vec<(&ast::SetExpr, bool)>> {
    let mut operands = Vec::new();
    let mut at = body;
    loop {
        match at {
            ast::SetExpr::SetOperation {
                op: ast::SetOperator::Union,
                set_quantifier,
                left,
                right,
            } => {
                let distinct = match set_quantifier {
                    ast::SetQuantifier::All => false,
                    ast::SetQuantifier::Distinct | ast::SetQuantifier::None => true,
                    other => return Err(SqlError::unsupported(format!("UNION {other}"))),
                };
                operands.push((right.as_ref(), distinct));
                at = left;
            }
            first => {
                operands.push((first, true));
                break;
            }
        }
    }
    operands.reverse();
    for (operand, _) in &operands {
        match operand {
            ast::SetExpr::Select(_) | ast::SetExpr::Query(_) => {}
            ast::SetExpr::SetOperation { op, .. } => {
                return Err(SqlError::unsupported(format!("{op}")))
            }
            other => return Err(SqlError::unsupported(format!("UNION of {other}"))),
        }
    }
    Ok(operands)
}
