//! Window functions' values: each over the query's grouped rows, by
//! partition and order, appended to each row's aggregate results
//! (docs/design/0029-joins-and-grouping.md, "Window functions").

use super::{check_interrupt, compare_sort_keys, Accumulator, Grouped, Run};
use crate::error::{codes, SqlError, SqlResult};
use crate::expr::{Aggregate, Expr, Inputs, WindowFrame};
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
            window_values(window, partition, &descending, &mut values, run)?;
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
    run: &Run<'_>,
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
        W::Ntile => {
            let count = partition.len();
            for (at, row) in partition.iter().enumerate() {
                let buckets = positive_count(&row.arguments[0], "ntile")?.min(count.max(1));
                // The first `count % buckets` buckets hold one row more.
                let (small, larger) = (count / buckets, count % buckets);
                let in_larger = larger * (small + 1);
                let bucket = match at < in_larger {
                    true => at / (small + 1),
                    false => larger + (at - in_larger) / small.max(1),
                };
                values[row.index] = Value::Int(bucket as i64 + 1);
            }
        }
        W::PercentRank | W::CumeDist => {
            let count = partition.len();
            let mut at = 0;
            for group in partition.chunk_by(|a, b| peers(a, b)) {
                let value = match window.kind {
                    W::PercentRank if count > 1 => at as f64 / (count - 1) as f64,
                    W::PercentRank => 0.0,
                    _ => (at + group.len()) as f64 / count as f64,
                };
                for row in group {
                    values[row.index] = Value::Double(value);
                }
                at += group.len();
            }
        }
        W::FirstValue | W::LastValue | W::NthValue => {
            let frames = frames(window, partition, descending);
            for (row, (low, high)) in partition.iter().zip(frames) {
                let position = match window.kind {
                    W::FirstValue => Some(low),
                    W::LastValue => high.checked_sub(1),
                    _ => low.checked_add(positive_count(&row.arguments[1], "nth_value")? - 1),
                };
                values[row.index] = match position.filter(|at| *at >= low && *at < high) {
                    Some(at) => partition[at].arguments[0].clone(),
                    None => Value::Null,
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
            let frames = frames(window, partition, descending);
            // A frame that grows at one end only is summed once, a row at
            // a time; one that slides is summed afresh for each row.
            let growing_forward = frames.iter().all(|(low, _)| *low == 0);
            let growing_backward = frames.iter().all(|(_, high)| *high == partition.len());
            let mut accumulator = Accumulator::new();
            if growing_forward {
                let mut added = 0;
                for (row, (_, high)) in partition.iter().zip(&frames) {
                    while added < *high {
                        accumulator.add(&aggregate, argument(&partition[added]), Vec::new());
                        added += 1;
                    }
                    values[row.index] = accumulator.clone().finish(&aggregate);
                }
            } else if growing_backward {
                let mut lowest = partition.len();
                for (row, (low, _)) in partition.iter().zip(&frames).rev() {
                    while lowest > *low {
                        lowest -= 1;
                        accumulator.add(&aggregate, argument(&partition[lowest]), Vec::new());
                    }
                    values[row.index] = accumulator.clone().finish(&aggregate);
                }
            } else {
                for (row, (low, high)) in partition.iter().zip(&frames) {
                    // Wide sliding frames cost rows times width: KILL
                    // QUERY is heard between rows.
                    check_interrupt(run)?;
                    let mut accumulator = Accumulator::new();
                    for framed in partition.get(*low..*high).unwrap_or_default() {
                        accumulator.add(&aggregate, argument(framed), Vec::new());
                    }
                    values[row.index] = accumulator.finish(&aggregate);
                }
            }
        }
    }
    Ok(())
}

/// Each row's frame in its partition (in the partition's order), as
/// positions `low..high` (empty when the bounds cross). Without a frame
/// written: with ORDER BY, up to the current row's last peer; without,
/// the whole partition (SQL's default).
fn frames(
    window: &crate::expr::WindowFunction,
    partition: &[WindowRow],
    descending: &[bool],
) -> Vec<(usize, usize)> {
    use crate::expr::FrameBound as B;
    let default = WindowFrame {
        rows: false,
        start: B::UnboundedPreceding,
        end: match window.order_by.is_empty() {
            true => B::UnboundedFollowing,
            false => B::CurrentRow,
        },
    };
    let frame = window.frame.unwrap_or(default);
    let count = partition.len();
    // Each row's peer group, as positions: RANGE's CURRENT ROW is the
    // group's first row at the start and its last at the end.
    let mut groups = Vec::with_capacity(count);
    let mut at = 0;
    for group in partition
        .chunk_by(|a, b| compare_sort_keys(&a.order, &b.order, descending) == Ordering::Equal)
    {
        groups.extend(std::iter::repeat_n((at, at + group.len()), group.len()));
        at += group.len();
    }
    let position = |at: usize, bound: B, start: bool| -> usize {
        let offset = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        match bound {
            B::UnboundedPreceding => 0,
            B::UnboundedFollowing => count,
            B::CurrentRow if frame.rows => at + (!start) as usize,
            B::CurrentRow => match start {
                true => groups[at].0,
                false => groups[at].1,
            },
            B::Preceding(n) => (at + (!start) as usize).saturating_sub(offset(n)),
            B::Following(n) => (at + (!start) as usize)
                .saturating_add(offset(n))
                .min(count),
        }
    };
    (0..count)
        .map(|at| {
            let low = position(at, frame.start, true).min(count);
            let high = position(at, frame.end, false);
            (low, high.max(low))
        })
        .collect()
}

/// A positive integer argument (NTILE's buckets, NTH_VALUE's n), or
/// error 1210.
fn positive_count(value: &Value, function: &str) -> SqlResult<usize> {
    match value {
        Value::Int(n) if *n > 0 => Ok(*n as usize),
        Value::UInt(n) if *n > 0 => Ok(usize::try_from(*n).unwrap_or(usize::MAX)),
        _ => Err(SqlError::new(
            codes::WRONG_ARGUMENTS,
            format!("Incorrect arguments to {function}"),
        )),
    }
}
