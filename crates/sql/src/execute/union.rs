//! Running a UNION, INTERSECT or EXCEPT: each SELECT in turn in one
//! transaction, their values made of the whole's column types, their
//! rows combined as the plan's steps say, then the whole's ORDER BY and
//! LIMIT (docs/design/0029-joins-and-grouping.md, "UNION, INTERSECT and
//! EXCEPT").

use super::{
    check_interrupt, compare_in_order, in_one_transaction, remove_duplicates, row_key, select,
    select_rows, Run,
};
use crate::decimal::Decimal;
use crate::error::SqlResult;
use crate::plan::{SelectPlan, SetKind, SetOperation, SetStep, UnionPlan};
use crate::result::{ColumnKind, OutputColumn, Response};
use crate::value::{self, Value};
use std::collections::HashMap;

/// Runs a set operation (`first` and `union`'s SELECTs, each on its
/// own) in one transaction, whose end (in autocommit) commits after the
/// last: the rows of each in turn, combined as the steps say (a UNION
/// DISTINCT takes the duplicates out of all the rows to its left, so it
/// wins over the UNION ALLs there, as in MySQL), then the whole's ORDER
/// BY and LIMIT.
pub(super) fn union_rows(
    first: &SelectPlan,
    union: &UnionPlan,
    run: &mut Run<'_>,
) -> SqlResult<Response> {
    in_one_transaction(&first.columns, run, |run| {
        set_rows(first, &first.columns, union, run)
    })
}

/// The rows of a set operation whose values compare as `columns`:
/// its SELECTs' rows combined, then its ORDER BY and LIMIT.
fn set_rows(
    first: &SelectPlan,
    columns: &[OutputColumn],
    union: &UnionPlan,
    run: &mut Run<'_>,
) -> SqlResult<Vec<Vec<Value>>> {
    let mut rows = union_parts(first, columns, union, run)?;
    if !union.order_by.is_empty() {
        rows.sort_by(|a, b| {
            compare_in_order(
                union
                    .order_by
                    .iter()
                    .map(|&(column, descending)| (&a[column], &b[column], descending)),
            )
        });
    }
    let offset = (union.offset as usize).min(rows.len());
    rows.drain(..offset);
    if let Some(limit) = union.limit {
        rows.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    }
    Ok(rows)
}

/// The rows of a set operation's SELECTs combined as its steps say
/// (postfix: each SELECT's rows pushed, each operation taking the two
/// results before it), each SELECT's values first made of the whole's
/// column types so that rows compare alike.
fn union_parts(
    first: &SelectPlan,
    columns: &[OutputColumn],
    union: &UnionPlan,
    run: &mut Run<'_>,
) -> SqlResult<Vec<Vec<Value>>> {
    let mut results: Vec<Vec<Vec<Value>>> = Vec::new();
    for step in &union.steps {
        check_interrupt(run)?;
        match *step {
            SetStep::Rows(n) => {
                let mut rows = match (n, &union.first_set) {
                    (0, Some((own, own_columns))) => set_rows(first, own_columns, own, run)?,
                    (n, _) => {
                        let answer = match n {
                            0 => select_rows(first, run)?,
                            n => select(&union.parts[n - 1], run)?,
                        };
                        let Response::Rows { rows, .. } = answer else {
                            unreachable!("a query answers rows")
                        };
                        rows
                    }
                };
                united(&mut rows, columns);
                results.push(rows);
            }
            SetStep::Combine(operation) => {
                let right = results.pop().expect("a set operation has a right side");
                let left = results.last_mut().expect("a set operation has a left side");
                combine(left, right, operation);
            }
        }
    }
    let rows = results
        .pop()
        .expect("a set operation's steps leave one result");
    assert!(
        results.is_empty(),
        "a set operation's steps leave one result"
    );
    Ok(rows)
}

/// `left` made `left <operation> right`. Rows are equal as DISTINCT
/// compares them (NULL equal to NULL). UNION ALL keeps every row of
/// both; INTERSECT ALL a row as often as both have it; EXCEPT ALL as
/// often as `left` has it more than `right` does; without ALL each
/// result keeps one row of each value.
fn combine(left: &mut Vec<Vec<Value>>, right: Vec<Vec<Value>>, operation: SetOperation) {
    match operation.kind {
        SetKind::Union => left.extend(right),
        SetKind::Intersect | SetKind::Except => {
            let mut counts: HashMap<Vec<u8>, usize> = HashMap::with_capacity(right.len());
            for row in &right {
                *counts.entry(row_key(row)).or_default() += 1;
            }
            let intersect = operation.kind == SetKind::Intersect;
            left.retain(|row| match counts.get_mut(&row_key(row)) {
                // Without ALL the count is never used up: every equal
                // row of `left` matches, and the duplicates go below.
                Some(count) if *count > 0 => {
                    if operation.all {
                        *count -= 1;
                    }
                    intersect
                }
                _ => !intersect,
            });
        }
    }
    if !operation.all {
        remove_duplicates(left);
    }
}

/// `rows` of one SELECT of a UNION with their values in the union's
/// column types where these differ in kind: numbers in a text column as
/// their text, in a DOUBLE column as doubles, in a DECIMAL at its
/// scale, so that `SELECT 1 UNION SELECT '1'` is one row, as in MySQL,
/// and ORDER BY compares like with like.
pub(super) fn united(rows: &mut [Vec<Value>], columns: &[OutputColumn]) {
    for (at, column) in columns.iter().enumerate() {
        let convert: fn(&Value, u8) -> Option<Value> = match column.kind {
            ColumnKind::Text(_) | ColumnKind::LongText(_) | ColumnKind::Char(_) => {
                |value, _| match value {
                    Value::Bytes(_) => None,
                    other => {
                        let mut bytes = Vec::new();
                        value::write_text(other, &mut bytes);
                        Some(Value::Bytes(bytes))
                    }
                }
            }
            ColumnKind::Double | ColumnKind::Float => |value, _| match value {
                Value::Double(_) => None,
                other => Some(Value::Double(value::to_f64(other))),
            },
            ColumnKind::Decimal { .. } => |value, scale| {
                let decimal = match value {
                    Value::Decimal(decimal) if decimal.scale() == scale => return None,
                    Value::Decimal(decimal) => *decimal,
                    Value::Int(x) => Decimal::from_integer(*x as i128)?,
                    Value::UInt(x) => Decimal::from_integer(*x as i128)?,
                    _ => return None,
                };
                decimal.rescale(scale).map(Value::Decimal)
            },
            _ => continue,
        };
        let scale = match column.kind {
            ColumnKind::Decimal { scale, .. } => scale,
            _ => 0,
        };
        for row in rows.iter_mut() {
            if let Some(value) = row.get_mut(at).filter(|value| !value.is_null()) {
                if let Some(converted) = convert(value, scale) {
                    *value = converted;
                }
            }
        }
    }
}
