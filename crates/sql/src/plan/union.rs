//! UNION, INTERSECT and EXCEPT: the SELECTs of `A UNION [ALL |
//! DISTINCT] B INTERSECT C ...` compiled into the first one's plan, with
//! the steps that combine their rows (docs/design/0029-joins-and-grouping.md,
//! "UNION, INTERSECT and EXCEPT").

use super::pushdown::{self, FromEnclosing};
use super::{constant_count, select_plan_pushed, Ctes, SelectPlan};
use crate::catalog::Catalog;
use crate::error::{codes, SqlError, SqlResult};
use crate::expr::{Expr, Scope};
use crate::result::OutputColumn;
use client::LockMode;
use sqlparser::ast;
use std::sync::Arc;

/// The SELECTs after the first of a UNION, INTERSECT or EXCEPT, how
/// their rows combine, and the order and LIMIT of the whole
/// (docs/design/0029-joins-and-grouping.md, "UNION, INTERSECT and
/// EXCEPT").
#[derive(Clone, Debug)]
pub struct UnionPlan {
    /// Each SELECT after the first, in the order written.
    pub parts: Vec<SelectPlan>,
    /// How the SELECTs' rows combine, in postfix order: SELECT `n`'s
    /// rows (0 the first, `n` `parts[n - 1]`), or the two results
    /// before combined by an operation.
    pub steps: Vec<SetStep>,
    /// When the first SELECT is itself a parenthesized set operation,
    /// `(A UNION B) INTERSECT C`'s `A UNION B`: its own steps and the
    /// columns its rows compare as (the first plan carries this one).
    pub first_set: Option<(Box<UnionPlan>, Arc<[OutputColumn]>)>,
    /// ORDER BY of the whole: output column positions, descending.
    pub order_by: Vec<(usize, bool)>,
    /// LIMIT of the whole.
    pub limit: Option<u64>,
    /// OFFSET of the whole.
    pub offset: u64,
}

impl UnionPlan {
    /// Every SELECT after the first, those of a parenthesized first set
    /// operation's included.
    pub fn all_parts(&self) -> Vec<&SelectPlan> {
        let mut parts: Vec<&SelectPlan> = self.parts.iter().collect();
        let mut nested = self.first_set.as_ref();
        while let Some((own, _)) = nested {
            parts.extend(&own.parts);
            nested = own.first_set.as_ref();
        }
        parts
    }

    /// Every SELECT after the first (as `all_parts`) replaced by `map`'s.
    pub fn map_parts(&mut self, map: &mut dyn FnMut(&SelectPlan) -> SelectPlan) {
        for part in &mut self.parts {
            *part = map(part);
        }
        if let Some((own, _)) = &mut self.first_set {
            own.map_parts(map);
        }
    }
}

/// One step of combining a set operation's SELECTs (`UnionPlan::steps`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetStep {
    /// The rows of SELECT `n` (0 the first).
    Rows(usize),
    /// The two results before, the earlier on the left, made one.
    Combine(SetOperation),
}

/// UNION, INTERSECT or EXCEPT, and whether of all rows (`ALL`) or of
/// distinct ones (`DISTINCT`, the default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetOperation {
    pub kind: SetKind,
    pub all: bool,
}

/// Which set operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetKind {
    Union,
    Intersect,
    Except,
}

impl SetOperation {
    /// As SQL writes it: `union all`, `intersect`...
    pub fn describe(self) -> &'static str {
        match (self.kind, self.all) {
            (SetKind::Union, false) => "union",
            (SetKind::Union, true) => "union all",
            (SetKind::Intersect, false) => "intersect",
            (SetKind::Intersect, true) => "intersect all",
            (SetKind::Except, false) => "except",
            (SetKind::Except, true) => "except all",
        }
    }
}

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

/// Compiles `SELECT ... UNION | INTERSECT | EXCEPT [ALL | DISTINCT]
/// SELECT ...`: each SELECT on its own (a parenthesized one with its own
/// ORDER BY and LIMIT), the first carrying the rest, their columns'
/// types made one, and the ORDER BY and LIMIT of the whole, whose ORDER
/// BY names output columns by name or position (as MySQL's: the rows of
/// a set operation have no tables). Conditions an enclosing query pushes
/// into it go to each SELECT (design 0040).
pub(super) fn union_plan(
    query: &ast::Query,
    catalog: &Catalog,
    database: Option<&str>,
    outer: &[Scope<'_>],
    placeholders: &mut Vec<(u64, u64)>,
    ctes: &Ctes,
    from_enclosing: FromEnclosing<'_>,
) -> SqlResult<SelectPlan> {
    if !query.locks.is_empty() {
        return Err(SqlError::unsupported(
            "FOR UPDATE or FOR SHARE of a UNION, INTERSECT or EXCEPT",
        ));
    }
    let (operands, steps) = set_steps(&query.body)?;
    let pushed = pushdown::for_set_operation(
        from_enclosing.pushed,
        query.limit_clause.is_some(),
        steps.iter().all(|step| match step {
            SetStep::Rows(_) => true,
            SetStep::Combine(operation) => operation.kind == SetKind::Union && operation.all,
        }),
    );
    let (placeholders_before, spent_before) = (placeholders.len(), ctes.spent_so_far());
    let compile_parts = |pushed: &[Expr], placeholders: &mut Vec<(u64, u64)>| {
        let from_enclosing = FromEnclosing {
            pushed,
            provisional: from_enclosing.provisional,
        };
        let mut parts = Vec::with_capacity(operands.len());
        for operand in &operands {
            let owned;
            let part = match operand {
                ast::SetExpr::Query(inner) => &**inner,
                select => {
                    // The SELECT alone: the ORDER BY, LIMIT and the rest
                    // written after the last SELECT are the whole's.
                    owned = super::recursive::query_of((*select).clone());
                    &owned
                }
            };
            let plan = select_plan_pushed(
                part,
                catalog,
                database,
                outer,
                placeholders,
                ctes,
                from_enclosing,
            )?;
            if plan.lock != LockMode::CommittedRead {
                return Err(SqlError::unsupported(
                    "FOR UPDATE or FOR SHARE in a UNION, INTERSECT or EXCEPT",
                ));
            }
            parts.push(plan);
        }
        SqlResult::Ok(parts)
    };
    let mut parts = compile_parts(&pushed, placeholders)?;
    let mut columns = united_columns(&parts)?;
    if !pushdown::values_kept(&pushed, &parts, &columns) {
        // A SELECT's values of a column the conditions read are made
        // another type's in the whole (`united`), where the conditions
        // could answer otherwise: compiled again without them, from
        // where the first compiling began.
        placeholders.truncate(placeholders_before);
        ctes.spend_as(spent_before);
        parts = compile_parts(&[], placeholders)?;
        columns = united_columns(&parts)?;
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
                        "ORDER BY {other} of a UNION, INTERSECT or EXCEPT (name an output column)"
                    )))
                }
            };
            order_by.push((position, item.options.asc == Some(false)));
        }
    }
    let (limit, offset) = limit_and_offset(query)?;
    let mut parts = parts.into_iter();
    let mut first = parts
        .next()
        .expect("a set operation has two SELECTs or more");
    let own_columns = std::mem::replace(&mut first.columns, columns.into());
    let first_set = first.union.take().map(|own| (own, own_columns));
    first.union = Some(Box::new(UnionPlan {
        parts: parts.collect(),
        steps,
        first_set,
        order_by,
        limit,
        offset,
    }));
    Ok(first)
}

/// The columns of a set operation of `parts`: each one's type made
/// one with the others'.
fn united_columns(parts: &[SelectPlan]) -> SqlResult<Vec<OutputColumn>> {
    let mut columns: Vec<OutputColumn> = parts[0].columns.to_vec();
    for part in &parts[1..] {
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
    Ok(columns)
}

/// The SELECTs of a set operation in the order written, and the steps
/// that combine their rows in postfix order (`UnionPlan::steps`). The
/// parser builds `A UNION B UNION C` leaning left and gives INTERSECT
/// the tighter binding (`A UNION B INTERSECT C` is `A UNION (B
/// INTERSECT C)`, as in MySQL and MariaDB); the tree is walked with a
/// stack of its own, so a long chain takes no thread stack.
fn set_steps(body: &ast::SetExpr) -> SqlResult<(Vec<&ast::SetExpr>, Vec<SetStep>)> {
    enum Visit<'a> {
        Enter(&'a ast::SetExpr),
        Combine(SetOperation),
    }
    let mut operands = Vec::new();
    let mut steps = Vec::new();
    let mut pending = vec![Visit::Enter(body)];
    while let Some(visit) = pending.pop() {
        match visit {
            Visit::Enter(ast::SetExpr::SetOperation {
                op,
                set_quantifier,
                left,
                right,
            }) => {
                let kind = match op {
                    ast::SetOperator::Union => SetKind::Union,
                    ast::SetOperator::Intersect => SetKind::Intersect,
                    ast::SetOperator::Except => SetKind::Except,
                    ast::SetOperator::Minus => {
                        return Err(SqlError::parse(
                            "MINUS is not a set operation here; EXCEPT is",
                        ))
                    }
                };
                let all = match set_quantifier {
                    ast::SetQuantifier::All => true,
                    ast::SetQuantifier::Distinct | ast::SetQuantifier::None => false,
                    other => return Err(SqlError::unsupported(format!("{op} {other}"))),
                };
                pending.push(Visit::Combine(SetOperation { kind, all }));
                pending.push(Visit::Enter(right));
                pending.push(Visit::Enter(left));
            }
            Visit::Enter(operand @ (ast::SetExpr::Select(_) | ast::SetExpr::Query(_))) => {
                steps.push(SetStep::Rows(operands.len()));
                operands.push(operand);
            }
            Visit::Enter(other) => {
                return Err(SqlError::unsupported(format!("a set operation of {other}")))
            }
            Visit::Combine(operation) => steps.push(SetStep::Combine(operation)),
        }
    }
    Ok((operands, steps))
}
