//! Running a UNION: each SELECT in turn in one transaction, their
//! values made of the union's column types, duplicates out where a
//! UNION DISTINCT says, then the whole's ORDER BY and LIMIT
//! (docs/design/0029-joins-and-grouping.md, "UNION").

use super::{check_interrupt, compare_in_order, remove_duplicates, select, select_rows, Run};
use crate::decimal::Decimal;
use crate::error::{SqlError, SqlResult};
use crate::plan::{SelectPlan, UnionPlan};
use crate::result::{ColumnKind, OutputColumn, Response};
use crate::value::{self, Value};
use client::Commit;
use std::sync::Arc;

/// Runs a UNION (`first` and `union`'s SELECTs, each on its own) in
/// one transaction, whose end (in autocommit) commits after the last:
/// the rows of each in turn, a UNION DISTINCT taking the duplicates out
/// of all the rows so far (as MySQL's: a DISTINCT union wins over the
/// ALL unions to its left), then the whole's ORDER BY and LIMIT.
pub(super) fn union_rows(
    first: &SelectPlan,
    union: &UnionPlan,
    run: &mut Run<'_>,
) -> SqlResult<Response> {
    let (commit, sent) = (run.commit, run.counts.sent);
    run.commit = Commit::No;
    let rows = union_parts(first, union, run);
    run.commit = commit;
    let mut rows = rows?;
    if commit != Commit::No {
        run.transaction
            .borrow_mut()
            .execute(commit)
            .map_err(|error| SqlError::from_client(&error, ""))?;
    }
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
    run.counts.sent = sent + rows.len() as u64;
    Ok(Response::Rows {
        columns: Arc::clone(&first.columns),
        rows,
    })
}

/// The rows of a UNION's SELECTs, duplicates taken out where a UNION
/// DISTINCT says: the last DISTINCT union's takes them out of every row
/// before it, once, and the UNION ALLs after it only add.
fn union_parts(
    first: &SelectPlan,
    union: &UnionPlan,
    run: &mut Run<'_>,
) -> SqlResult<Vec<Vec<Value>>> {
    let Response::Rows { mut rows, .. } = select_rows(first, run)? else {
        unreachable!("a query answers rows")
    };
    united(&mut rows, &first.columns);
    let last_distinct = union.parts.iter().rposition(|(_, distinct)| *distinct);
    for (at, (part, _)) in union.parts.iter().enumerate() {
        check_interrupt(run)?;
        let Response::Rows { rows: mut more, .. } = select(part, run)? else {
            unreachable!("a query answers rows")
        };
        united(&mut more, &first.columns);
        rows.extend(more);
        if Some(at) == last_distinct {
            remove_duplicates(&mut rows);
        }
    }
    Ok(rows)
}

/// `rows` of one SELECT of a UNION with their values in the union's
/// column types where these differ in kind: numbers in a text column as
/// their text, in a DOUBLE column as doubles, in a DECIMAL at its
/// scale, so that `SELECT 1 UNION SELECT '1'` is one row, as in MySQL,
/// and ORDER BY compares like with like.
fn united(rows: &mut [Vec<Value>], columns: &[OutputColumn]) {
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
