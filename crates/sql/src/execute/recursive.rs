//! Running a recursive common table expression: its non-recursive part,
//! then its recursive SELECTs over the rows of the step before, until a
//! step makes no row (docs/design/0033-subqueries.md, "WITH RECURSIVE").

use super::union::united;
use super::{anchor_rows, check_interrupt, row_key, select, Run};
use crate::error::{codes, SqlError, SqlResult};
use crate::expr::SessionValue;
use crate::plan::{RecursivePlan, SelectPlan};
use crate::result::Response;
use crate::value::Value;
use client::Commit;
use std::collections::HashSet;
use std::rc::Rc;
use std::sync::Arc;

/// The most rows one recursive expression may hold: its rows are kept
/// in the SQL node's memory, and a recursion can make them without end.
const MAX_RECURSIVE_ROWS: usize = 10_000_000;

/// Runs `plan`, a recursive expression's non-recursive part carrying
/// `recursive`, in one transaction whose end (in autocommit) commits
/// after the last step.
pub(super) fn recursive_rows(
    plan: &SelectPlan,
    recursive: &RecursivePlan,
    run: &mut Run<'_>,
) -> SqlResult<Response> {
    let (commit, sent) = (run.commit, run.counts.sent);
    run.commit = Commit::No;
    let rows = iterate(plan, recursive, run);
    run.commit = commit;
    let rows = rows?;
    if commit != Commit::No {
        run.transaction
            .borrow_mut()
            .execute(commit)
            .map_err(|error| SqlError::from_client(&error, ""))?;
    }
    run.counts.sent = sent + rows.len() as u64;
    Ok(Response::Rows {
        columns: Arc::clone(&plan.columns),
        rows,
    })
}

/// The expression's rows: the non-recursive part's, then each step's,
/// every step's recursive SELECTs reading the step before's rows (with
/// UNION DISTINCT, only the rows not made before, which also ends the
/// recursion when a step makes nothing new). Values take the
/// non-recursive part's column types.
fn iterate(
    plan: &SelectPlan,
    recursive: &RecursivePlan,
    run: &mut Run<'_>,
) -> SqlResult<Vec<Vec<Value>>> {
    let Response::Rows { mut rows, .. } = anchor_rows(plan, run)? else {
        unreachable!("a query answers rows")
    };
    united(&mut rows, &plan.columns);
    let mut seen = HashSet::new();
    if recursive.distinct {
        rows.retain(|row| seen.insert(row_key(row)));
    }
    let most_steps = most_steps(run)?;
    let mut working = Rc::new(rows.clone());
    let mut steps = 0u64;
    while !working.is_empty() {
        check_interrupt(run)?;
        steps += 1;
        if steps > most_steps {
            return Err(SqlError::new(
                codes::CTE_MAX_RECURSION_DEPTH,
                format!(
                    "Recursive query aborted after {steps} iterations. Try increasing \
                     @@cte_max_recursion_depth to a larger value."
                ),
            ));
        }
        let mut made = Vec::new();
        for step in &recursive.steps {
            let before = run.working.replace(Rc::clone(&working));
            let answer = select(step, run);
            run.working = before;
            let Response::Rows { rows: mut more, .. } = answer? else {
                unreachable!("a query answers rows")
            };
            united(&mut more, &plan.columns);
            made.append(&mut more);
        }
        if recursive.distinct {
            made.retain(|row| seen.insert(row_key(row)));
        }
        if rows.len() + made.len() > MAX_RECURSIVE_ROWS {
            return Err(SqlError::unsupported(format!(
                "a recursive common table expression ('{}') of more than {MAX_RECURSIVE_ROWS} rows",
                recursive.name
            )));
        }
        rows.extend(made.iter().cloned());
        working = Rc::new(made);
    }
    Ok(rows)
}

/// `@@cte_max_recursion_depth`: the most steps a recursion may take.
fn most_steps(run: &Run<'_>) -> SqlResult<u64> {
    let value = run
        .environment
        .session_value(&SessionValue::SystemVariable {
            name: "cte_max_recursion_depth".to_string(),
            global: false,
        })?;
    Ok(match value {
        Value::Int(n) => n.max(0) as u64,
        Value::UInt(n) => n,
        other => crate::value::display(&other).parse().unwrap_or(1000),
    })
}
