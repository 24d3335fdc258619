//! Running a recursive common table expression: its non-recursive part,
//! then its recursive SELECTs over the rows of the step before, until a
//! step makes no row (docs/design/0033-subqueries.md, "WITH RECURSIVE").

use super::union::united;
use super::{anchor_rows, check_interrupt, in_one_transaction, row_key, select, Run};
use crate::error::{codes, SqlError, SqlResult};
use crate::expr::SessionValue;
use crate::plan::{RecursivePlan, SelectPlan};
use crate::result::Response;
use crate::value::Value;
use std::collections::HashSet;
use std::rc::Rc;

/// The most bytes of values one recursive expression may hold, about:
/// its rows are kept in the SQL node's memory, and a recursion can make
/// them without end.
const MOST_RECURSIVE_BYTES: usize = 256 << 20;

/// About what a row's values take in memory.
fn row_bytes(row: &[Value]) -> usize {
    row.iter()
        .map(|value| match value {
            Value::Bytes(bytes) => std::mem::size_of::<Value>() + bytes.len(),
            _ => std::mem::size_of::<Value>(),
        })
        .sum::<usize>()
        + std::mem::size_of::<Vec<Value>>()
}

/// Runs `plan`, a recursive expression's non-recursive part carrying
/// `recursive`, in one transaction whose end (in autocommit) commits
/// after the last step.
pub(super) fn recursive_rows(
    plan: &SelectPlan,
    recursive: &RecursivePlan,
    run: &mut Run<'_>,
) -> SqlResult<Response> {
    in_one_transaction(&plan.columns, run, |run| iterate(plan, recursive, run))
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
    let mut bytes: usize = rows.iter().map(|row| row_bytes(row)).sum();
    // Each step's rows, shared with the next step as its working table
    // (never copied), all put together at the end.
    let mut made_by_steps: Vec<Rc<Vec<Vec<Value>>>> = vec![Rc::new(rows)];
    let mut steps = 0u64;
    while made_by_steps.last().is_some_and(|rows| !rows.is_empty()) {
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
        let working = Rc::clone(made_by_steps.last().expect("checked"));
        let mut made = Vec::new();
        for step in &recursive.steps {
            let before = run.working.replace(Rc::clone(&working));
            let answer = select(step, run);
            run.working = before;
            let Response::Rows { rows: mut more, .. } = answer? else {
                unreachable!("a query answers rows")
            };
            united(&mut more, &plan.columns);
            if recursive.distinct {
                more.retain(|row| seen.insert(row_key(row)));
            }
            bytes += more.iter().map(|row| row_bytes(row)).sum::<usize>();
            if bytes > MOST_RECURSIVE_BYTES {
                return Err(SqlError::unsupported(format!(
                    "a recursive common table expression ('{}') of more than {} MiB of rows",
                    recursive.name,
                    MOST_RECURSIVE_BYTES >> 20
                )));
            }
            made.append(&mut more);
        }
        made_by_steps.push(Rc::new(made));
    }
    let mut rows = Vec::with_capacity(made_by_steps.iter().map(|rows| rows.len()).sum());
    for made in made_by_steps {
        // The last holder of each step's rows: the steps are done.
        rows.extend(Rc::try_unwrap(made).unwrap_or_else(|shared| shared.as_ref().clone()));
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
