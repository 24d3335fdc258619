//! Window functions' values: each over the query's grouped rows, by
//! partition and order, appended to each row's aggregate results
//! (docs/design/0029-joins-and-grouping.md, "Window functions").

use super::{check_interrupt, compare_sort_keys, Accumulator, Grouped, Run};
use crate::error::{codes, SqlError, SqlResult};
use crate::expr::{Aggregate, Expr, Inputs};
use crate::plan::SelectPlan;
use crate::value::{self, Value};
use std::cmp::Ordering;

/// One row's part in a window function: its partition's key, its
/// ORDER BY values, its arguments, and where it stands among the rows.
struct WindowRow {
    partition: Vec<u8>,
    order: Vec<Value>,
    arguments: Vec<Value>,
    index: usize,
}

/// Each window function's value for each of `rows` (the grouped rows
/// HAVING kept, with their aggregate results), appended to the row's
/// aggregate results in slot order, where the select list and ORDER BY
/// read them (docs/design/0029-joins-and-grouping.md, "Window
/// functions").
pub(super) fn compute_windows(
    plan: &SelectPlan,
    rows: &mut Grouped,
    run: &Run<'_>,
) -> SqlResult<()> {
    for window in &plan.windows {
        check_interrupt(run)?;
        let mut keyed = Vec::with_capacity(rows.len());
        for (index, (row, aggregates)) in rows.iter().enumerate() {
            let inputs = Inputs {
                row,
                aggregates,
                params: run.params,
            };
            let eval = |expr: &Expr| expr.eval(&inputs, run.environment);
            let mut partition = Vec::new();
            for expr in &window.partition_by {
                value::group_key(&eval(expr)?, &mut partition);
            }
            keyed.push(WindowRow {
                partition,
                order: window
                    .order_by
                    .iter()
                    .map(|(e, _)| eval(e))
                    .collect::<SqlResult<_>>()?,
                arguments: window
                    .arguments
                    .iter()
                    .map(eval)
                    .collect::<SqlResult<_>>()?,
                index,
            });
        }
        let descending: Vec<bool> = window.order_by.iter().map(|(_, d)| *d).collect();
        // Stable: rows the ORDER BY does not tell apart keep their order.
        keyed.sort_by(|a, b| {
            a.partition
                .cmp(&b.partition)
                .then_with(|| compare_sort_keys(&a.order, &b.order, &descending))
        });
        let mut values = vec![Value::Null; rows.len()];
        for partition in keyed.chunk_by(|a, b| a.partition == b.partition) {
            window_values(window, partition, &descending, &mut values)?;
        }
        for ((_, aggregates), value) in rows.iter_mut().zip(values) {
            aggregates.push(value);
        }
    }
    Ok(())
}

/// `window`'s values for one partition's rows, in its order, into
/// `values` by each row's index.
fn window_values(
    window: &crate::expr::WindowFunction,
    partition: &[WindowRow],
    descending: &[bool],
    values: &mut [Value],
) -> SqlResult<()> {
    use crate::expr::WindowKind as W;
    let peers = |a: &WindowRow, b: &WindowRow| {
        compare_sort_keys(&a.order, &b.order, descending) == Ordering::Equal
    };
    match window.kind {
        W::RowNumber => {
            for (at, row) in partition.iter().enumerate() {
                values[row.index] = Value::Int(at as i64 + 1);
            }
        }
        W::Rank | W::DenseRank => {
            let (mut rank, mut dense) = (0, 0);
            for (at, row) in partition.iter().enumerate() {
                if at == 0 || !peers(&partition[at - 1], row) {
                    rank = at as i64 + 1;
                    dense += 1;
                }
                values[row.index] = Value::Int(match window.kind {
                    W::Rank => rank,
                    _ => dense,
                });
            }
        }
        W::Lag | W::Lead => {
            for (at, row) in partition.iter().enumerate() {
                let offset = match row.arguments.get(1) {
                    None => 1,
                    Some(offset) => match offset {
                        Value::Int(n) if *n >= 0 => *n as usize,
                        Value::UInt(n) => usize::try_from(*n).unwrap_or(usize::MAX),
                        _ => {
                            return Err(SqlError::new(
                                codes::WRONG_ARGUMENTS,
                                "Incorrect arguments to LAG or LEAD: the offset is a count",
                            ))
                        }
                    },
                };
                let target = match window.kind {
                    W::Lag => at.checked_sub(offset),
                    _ => at.checked_add(offset),
                };
                values[row.index] = match target.and_then(|t| partition.get(t)) {
                    Some(other) => other.arguments[0].clone(),
                    None => row.arguments.get(2).cloned().unwrap_or(Value::Null),
                };
            }
        }
        W::Aggregate(function) => {
            let aggregate = Aggregate {
                function,
                argument: None,
                distinct: false,
                concat: None,
            };
            let argument =
                |row: &WindowRow| row.arguments.first().cloned().unwrap_or(Value::Int(1));
            // Without ORDER BY the frame is the whole partition; with it,
            // the rows up to the current one and its peers.
            let frames: Vec<&[WindowRow]> = match window.order_by.is_empty() {
                true => vec![partition],
                false => partition.chunk_by(|a, b| peers(a, b)).collect(),
            };
            let mut accumulator = Accumulator::new();
            for frame in frames {
                for row in frame {
                    accumulator.add(&aggregate, argument(row), Vec::new());
                }
                let value = accumulator.clone().finish(&aggregate);
                for row in frame {
                    values[row.index] = value.clone();
                }
            }
        }
    }
    Ok(())
}
