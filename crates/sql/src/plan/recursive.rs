//! WITH RECURSIVE: a recursive common table expression's query, `anchor
//! UNION [ALL] step ...`, compiled into the anchor's plan carrying the
//! recursive SELECTs, each of which reads the expression's name as the
//! rows of the step before (docs/design/0033-subqueries.md, "WITH
//! RECURSIVE").

use super::ctes::{names, Cte, Ctes, Working};
use super::{select_plan, SelectPlan};
use crate::catalog::Catalog;
use crate::error::{codes, SqlError, SqlResult};
use sqlparser::ast;
use std::rc::Rc;

/// The recursive SELECTs of `WITH RECURSIVE name AS (anchor UNION
/// [ALL] step ...)` (docs/design/0033-subqueries.md, "WITH RECURSIVE").
#[derive(Clone, Debug)]
pub struct RecursivePlan {
    /// The expression's name, for messages.
    pub name: String,
    /// The SELECTs that read the step before's rows, each once.
    pub steps: Vec<SelectPlan>,
    /// UNION DISTINCT: a row already made is not made again (and the
    /// recursion ends when a step makes only such rows).
    pub distinct: bool,
}

/// The plan of recursive expression `cte`: its non-recursive SELECTs
/// (the first ones, which do not name it) as one query, carrying the
/// recursive ones (`SelectPlan::recursive`); `None` when its query does
/// not name it after all (an ordinary expression of a WITH RECURSIVE).
/// Each recursive SELECT names the expression once, in its FROM, not on
/// the right of a LEFT JOIN, and has no aggregate or window function
/// (MySQL's rules, its errors).
pub(super) fn recursive_plan(
    cte: &Cte,
    visible: &Ctes,
    catalog: &Catalog,
    database: Option<&str>,
    placeholders: &mut Vec<(u64, u64)>,
) -> SqlResult<Option<SelectPlan>> {
    let query = &cte.query;
    let name = &cte.name;
    // Whether a query names the expression as a table, anywhere in it:
    // compiled with the name standing for a probe, which counts it (and
    // stops the compiling there). A column or alias of the name is not
    // a naming; compiling tells them apart where the text cannot.
    let names_itself = |query: &ast::Query, placeholders: &[(u64, u64)]| {
        let probe = Rc::new(Working {
            name: name.clone(),
            anchor: None,
            references: std::cell::Cell::new(0),
        });
        let mut scratch = placeholders.to_vec();
        let _ = select_plan(
            query,
            catalog,
            database,
            &[],
            &mut scratch,
            &visible.with_working(Rc::clone(&probe)),
        );
        probe.references.get() > 0
    };
    if !names_itself(query, placeholders) {
        return Ok(None);
    }
    if query.with.is_some()
        || query.order_by.is_some()
        || query.limit_clause.is_some()
        || !query.locks.is_empty()
    {
        return Err(SqlError::unsupported(
            "WITH, ORDER BY, LIMIT or a lock on the whole of a recursive common table expression",
        ));
    }
    let (operands, distinct_joins) = union_operands(&query.body).ok_or_else(|| {
        SqlError::new(
            codes::CTE_RECURSIVE_REQUIRES_UNION,
            format!("Recursive Common Table Expression '{name}' should contain a UNION"),
        )
    })?;
    let recursive: Vec<bool> = operands
        .iter()
        .map(|operand| {
            names(&operand.to_string(), name)
                && names_itself(&query_of((*operand).clone()), placeholders)
        })
        .collect();
    let anchors = recursive.iter().take_while(|r| !**r).count();
    if anchors == 0 || recursive[anchors..].iter().any(|r| !*r) {
        return Err(SqlError::new(
            codes::CTE_RECURSIVE_REQUIRES_NONRECURSIVE_FIRST,
            format!(
                "Recursive Common Table Expression '{name}' should have one or more \
                 non-recursive query blocks followed by one or more recursive ones"
            ),
        ));
    }
    // The non-recursive SELECTs as one query, joined as written.
    let mut body = operands[0].clone();
    for (operand, distinct) in operands[1..anchors].iter().zip(&distinct_joins) {
        body = ast::SetExpr::SetOperation {
            op: ast::SetOperator::Union,
            set_quantifier: match distinct {
                true => ast::SetQuantifier::Distinct,
                false => ast::SetQuantifier::All,
            },
            left: Box::new(body),
            right: Box::new((*operand).clone()),
        };
    }
    let mut anchor = select_plan(
        &query_of(body),
        catalog,
        database,
        &[],
        placeholders,
        visible,
    )?;
    name_columns(&mut anchor, &cte.columns)?;
    let working = Rc::new(Working {
        name: name.clone(),
        anchor: Some(anchor.clone()),
        references: std::cell::Cell::new(0),
    });
    let inside = visible.with_working(Rc::clone(&working));
    let mut steps = Vec::with_capacity(operands.len() - anchors);
    for operand in &operands[anchors..] {
        working.references.set(0);
        let step = select_plan(
            &query_of((*operand).clone()),
            catalog,
            database,
            &[],
            placeholders,
            &inside,
        )?;
        let refused = |code, what: &str| {
            Err(SqlError::new(
                code,
                format!("In recursive query block of Recursive Common Table Expression '{name}', {what}"),
            ))
        };
        let first_is_working = step.table.as_ref().is_some_and(|t| reads_working(&step, t));
        let joined_working: Vec<bool> = step
            .joins
            .iter()
            .map(|join| reads_working(&step, &join.table))
            .collect();
        let in_from = first_is_working as usize + joined_working.iter().filter(|w| **w).count();
        if working.references.get() != 1 || in_from != 1 {
            return refused(
                codes::CTE_RECURSIVE_REQUIRES_SINGLE_REFERENCE,
                "the recursive table must be referenced only once, and not in any subquery",
            );
        }
        if step.union.is_some() {
            return Err(SqlError::new(
                codes::CTE_RECURSIVE_REQUIRES_UNION,
                format!("Recursive Common Table Expression '{name}' should contain a UNION of single SELECTs"),
            ));
        }
        if step
            .joins
            .iter()
            .zip(&joined_working)
            .any(|(join, working)| *working && join.left)
        {
            return refused(
                codes::CTE_RECURSIVE_FORBIDDEN_JOIN_ORDER,
                "the recursive table must not be in the right argument of a LEFT JOIN",
            );
        }
        if !step.aggregates.is_empty() || !step.windows.is_empty() || !step.group_by.is_empty() {
            return Err(SqlError::new(
                codes::CTE_RECURSIVE_FORBIDS_AGGREGATION,
                format!(
                    "Recursive Common Table Expression '{name}' can contain neither aggregation \
                     nor window functions in recursive query block"
                ),
            ));
        }
        if step.columns.len() != anchor.columns.len() {
            return Err(SqlError::new(
                codes::WRONG_NUMBER_OF_COLUMNS_IN_SELECT,
                "The used SELECT statements have a different number of columns",
            ));
        }
        steps.push(step);
    }
    anchor.recursive = Some(Box::new(RecursivePlan {
        name: name.clone(),
        steps,
        distinct: distinct_joins[anchors - 1..].iter().any(|d| *d),
    }));
    Ok(Some(anchor))
}

/// A common table expression's columns named by its column list, if it
/// has one (1353 when the counts differ).
pub(super) fn name_columns(plan: &mut SelectPlan, names: &[String]) -> SqlResult<()> {
    if names.is_empty() {
        return Ok(());
    }
    if names.len() != plan.columns.len() {
        return Err(SqlError::new(
            codes::VIEW_WRONG_LIST,
            "In definition of view, derived table or common table expression, \
             SELECT list and column names list have different column counts",
        ));
    }
    let mut columns = plan.columns.to_vec();
    for (column, name) in columns.iter_mut().zip(names) {
        column.name = name.clone();
    }
    plan.columns = columns.into();
    Ok(())
}

/// Whether `table`, a table `step` reads, is the recursive expression's
/// rows of the step before.
fn reads_working(step: &SelectPlan, table: &crate::catalog::SqlTable) -> bool {
    table
        .derived
        .and_then(|slot| step.subqueries.get(slot))
        .is_some_and(|subquery| subquery.plan.working_table)
}

/// The SELECTs of `A UNION [ALL] B UNION [ALL] C ...` in order, and for
/// each after the first whether a UNION DISTINCT joins it; `None` for a
/// body that is not such a union (one SELECT, INTERSECT, EXCEPT).
fn union_operands(body: &ast::SetExpr) -> Option<(Vec<&ast::SetExpr>, Vec<bool>)> {
    let mut operands = Vec::new();
    let mut distinct = Vec::new();
    let mut at = body;
    while let ast::SetExpr::SetOperation {
        op,
        set_quantifier,
        left,
        right,
    } = at
    {
        if *op != ast::SetOperator::Union {
            return None;
        }
        distinct.push(!matches!(set_quantifier, ast::SetQuantifier::All));
        operands.push(right.as_ref());
        at = left;
    }
    operands.push(at);
    if operands.len() < 2 {
        return None;
    }
    operands.reverse();
    distinct.reverse();
    Some((operands, distinct))
}

/// `body` as a query of its own (a set operation's SELECT apart from
/// the whole's ORDER BY and LIMIT).
pub(super) fn query_of(body: ast::SetExpr) -> ast::Query {
    ast::Query {
        with: None,
        body: Box::new(body),
        order_by: None,
        limit_clause: None,
        fetch: None,
        locks: Vec::new(),
        for_clause: None,
        settings: None,
        format_clause: None,
        pipe_operators: Vec::new(),
    }
}
