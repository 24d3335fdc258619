//! The access path a statement's WHERE clause allows, chosen from its
//! conjuncts (docs/design/0027-sql-node.md, "Plans"):
//!
//! 1. every primary-key column equal to a constant: a key lookup;
//! 2. the primary key's one column IN a list: batched key lookups;
//! 3. every column of a unique index equal to a constant: a unique lookup;
//! 4. equalities on leading columns of the primary key or an ordered
//!    index and a range (BETWEEN, <, >, an OR of BETWEENs, an IN list) on
//!    the next: a range scan of that index;
//! 5. else a full scan.
//!
//! And whether a range scan's order already is the ORDER BY's
//! (`scan_order`), so that a LIMIT can stop it early (design 0034).

use super::{AccessPlan, IndexRange, RangeEnd};
use crate::catalog::SqlTable;
use crate::expr::Expr;
use crate::types::SqlType;
use client::{CompareOp, LockWait};

/// Whether the SQL node's sort orders values of `sql_type` as an
/// ordered index does: numbers, dates and times, and PAD SPACE text (not
/// ENUM, whose members' numbers are indexed; not binary strings, which
/// the index orders byte by byte where the sort pads them; not floats,
/// whose -0 and +0 the two may place apart).
fn sorts_as_indexed(sql_type: &SqlType) -> bool {
    sql_type.is_integer()
        || sql_type.is_text()
        || matches!(
            sql_type,
            SqlType::Decimal { .. }
                | SqlType::Date
                | SqlType::DateTime { .. }
                | SqlType::Timestamp { .. }
                | SqlType::Time { .. }
                | SqlType::Year
        )
}

/// Whether reading `access` in its index's order (ascending or, with
/// `Some(true)`, descending) gives `order_by`'s order: one range of the
/// primary key or an ordered index, and ORDER BY naming plain columns of
/// that index in its order, each after the range's leading equalities
/// (columns the range pins may come anywhere: all its rows share their
/// value), all in one direction, and of types the SQL node sorts as the
/// index orders them (`sorts_as_indexed`). Rows equal on every ORDER BY column may come
/// in any order, as SQL allows.
pub(super) fn scan_order(
    table: &SqlTable,
    access: &AccessPlan,
    order_by: &[(Expr, bool)],
) -> Option<bool> {
    let AccessPlan::Ranges { index, ranges } = access else {
        return None;
    };
    let [range] = ranges.as_slice() else {
        return None;
    };
    if order_by.is_empty() {
        return None;
    }
    let columns = table.index_columns(index.as_deref())?;
    let pinned = &columns[..range.prefix.len().min(columns.len())];
    let mut next = pinned.len();
    let mut direction = None;
    for (expr, descending) in order_by {
        let Expr::Column(column) = expr else {
            return None;
        };
        if !sorts_as_indexed(&table.columns.get(*column)?.sql_type) {
            return None;
        }
        if pinned.contains(column) {
            continue;
        }
        if columns.get(next) != Some(column) || *direction.get_or_insert(*descending) != *descending
        {
            return None;
        }
        next += 1;
    }
    Some(direction.unwrap_or(false))
}

/// A scan of all of `table` in the order of its primary key or of an
/// ordered index, when that order is `order_by`'s (`scan_order`).
pub(super) fn ordered_whole(table: &SqlTable, order_by: &[(Expr, bool)]) -> Option<AccessPlan> {
    if order_by.is_empty() || table.made_by_sql_node() {
        return None;
    }
    let whole = |index: Option<String>| AccessPlan::Ranges {
        index,
        ranges: vec![IndexRange {
            prefix: Vec::new(),
            low: None,
            high: None,
        }],
    };
    std::iter::once(None)
        .chain(
            table
                .def()
                .indexes
                .iter()
                .map(|index| Some(index.name.clone())),
        )
        .map(whole)
        .find(|access| scan_order(table, access, order_by).is_some())
}

/// `access` for a locking read that `wait`s as asked: a read through a
/// unique index is two reads the tc makes, which always wait for their
/// locks, so NOWAIT and SKIP LOCKED lock the rows a scan of the index
/// finds instead.
pub(super) fn for_lock_wait(access: AccessPlan, wait: LockWait) -> AccessPlan {
    match access {
        AccessPlan::UniqueKey { index, values } if wait != LockWait::Wait => AccessPlan::Ranges {
            index: Some(index),
            ranges: vec![IndexRange {
                prefix: values,
                low: None,
                high: None,
            }],
        },
        other => other,
    }
}

/// The access path for `filter` over `table` (see the module's list).
pub fn choose_access(table: &SqlTable, filter: Option<&Expr>) -> AccessPlan {
    if table.made_by_sql_node() {
        // Its rows come whole from the SQL node: no key to look up.
        return AccessPlan::FullScan;
    }
    let mut conjuncts = Vec::new();
    if let Some(filter) = filter {
        split_and(filter, &mut conjuncts);
    }
    let equal_to = |column: usize| equal_in(&conjuncts, column);
    let def = table.def();
    let key = table.key_columns();
    // 1. The whole primary key.
    if let Some(values) = key.iter().map(|c| equal_to(*c)).collect::<Option<Vec<_>>>() {
        return AccessPlan::PrimaryKey(values);
    }
    // 2. A one-column primary key IN a list.
    if let [column] = key.as_slice() {
        let list = conjuncts.iter().find_map(|c| match c {
            Expr::InList {
                expr,
                list,
                negated: false,
            } if matches!(expr.as_ref(), Expr::Column(x) if x == column)
                && list.iter().all(Expr::is_constant) =>
            {
                Some(list.clone())
            }
            _ => None,
        });
        if let Some(list) = list {
            return AccessPlan::PrimaryKeys(list.into_iter().map(|v| vec![v]).collect());
        }
    }
    // 2'. An OR of conjunctions that each fix the whole primary key:
    // `(a, b) IN ((1, 2), (3, 4))` as it compiles.
    if let Some(keys) = conjuncts.iter().find_map(|c| keys_of_disjunction(c, &key)) {
        return AccessPlan::PrimaryKeys(keys);
    }
    // 3. A unique index, whole.
    for index in &def.indexes {
        if index.unique.is_none() {
            continue;
        }
        let values = index
            .columns
            .iter()
            .map(|c| equal_to(*c as usize))
            .collect::<Option<Vec<_>>>();
        if let Some(values) = values {
            return AccessPlan::UniqueKey {
                index: index.name.clone(),
                values,
            };
        }
    }
    // 4. Ranges: the primary key first, then the indexes; the one whose
    // ranges fix the most leading columns wins.
    let mut best: Option<(usize, AccessPlan)> = None;
    let candidates = std::iter::once((None, key.clone())).chain(def.indexes.iter().map(|index| {
        (
            Some(index.name.clone()),
            index.columns.iter().map(|c| *c as usize).collect(),
        )
    }));
    for (index, columns) in candidates {
        let mut prefix = Vec::new();
        for column in &columns {
            match equal_to(*column) {
                Some(value) => prefix.push(value),
                None => break,
            }
        }
        let next = columns.get(prefix.len()).copied();
        let ranges = next.and_then(|column| ranges_on(&conjuncts, column));
        let (score, ranges) = match ranges {
            Some(ranges) => (
                prefix.len() * 2 + 1,
                ranges
                    .into_iter()
                    .map(|(low, high)| IndexRange {
                        prefix: prefix.clone(),
                        low,
                        high,
                    })
                    .collect(),
            ),
            None if !prefix.is_empty() => (
                prefix.len() * 2,
                vec![IndexRange {
                    prefix: prefix.clone(),
                    low: None,
                    high: None,
                }],
            ),
            None => continue,
        };
        if best
            .as_ref()
            .is_none_or(|(best_score, _)| score > *best_score)
        {
            best = Some((score, AccessPlan::Ranges { index, ranges }));
        }
    }
    match best {
        Some((_, access)) => access,
        None => AccessPlan::FullScan,
    }
}

/// The constant a conjunct sets `column` equal to.
fn equal_in(conjuncts: &[&Expr], column: usize) -> Option<Expr> {
    conjuncts.iter().find_map(|c| match c {
        Expr::Compare(CompareOp::Equal, a, b) => match (a.as_ref(), b.as_ref()) {
            (Expr::Column(x), k) | (k, Expr::Column(x)) if *x == column && k.is_constant() => {
                Some(k.clone())
            }
            _ => None,
        },
        _ => None,
    })
}

/// The keys on `columns` an OR names when each of its terms fixes every
/// one of them: `(a = 1 AND b = 2) OR (a = 3 AND b = 4)`.
fn keys_of_disjunction(expr: &Expr, columns: &[usize]) -> Option<Vec<Vec<Expr>>> {
    let Expr::Or(..) = expr else {
        return None;
    };
    let mut terms = Vec::new();
    split_or(expr, &mut terms);
    terms
        .into_iter()
        .map(|term| {
            let mut conjuncts = Vec::new();
            split_and(term, &mut conjuncts);
            columns
                .iter()
                .map(|column| equal_in(&conjuncts, *column))
                .collect()
        })
        .collect()
}

/// The terms of an OR tree.
fn split_or<'e>(expr: &'e Expr, out: &mut Vec<&'e Expr>) {
    match expr {
        Expr::Or(a, b) => {
            split_or(a, out);
            split_or(b, out);
        }
        other => out.push(other),
    }
}

/// The conjuncts of an AND tree.
pub fn split_and<'e>(expr: &'e Expr, out: &mut Vec<&'e Expr>) {
    match expr {
        Expr::And(a, b) => {
            split_and(a, out);
            split_and(b, out);
        }
        other => out.push(other),
    }
}

type Ends = (Option<RangeEnd>, Option<RangeEnd>);

/// The ranges on `column` the conjuncts give: one from BETWEEN or
/// comparisons (their intersection is left to the WHERE check: the first
/// low and high found bound the scan), several from an IN list or an OR
/// of BETWEENs and equalities.
fn ranges_on(conjuncts: &[&Expr], column: usize) -> Option<Vec<Ends>> {
    let is_column = |e: &Expr| matches!(e, Expr::Column(x) if *x == column);
    let end = |value: &Expr, inclusive| {
        Some(RangeEnd {
            value: value.clone(),
            inclusive,
        })
    };
    let mut low = None;
    let mut high = None;
    for conjunct in conjuncts {
        match conjunct {
            Expr::Between {
                expr,
                low: l,
                high: h,
                negated: false,
            } if is_column(expr) && l.is_constant() && h.is_constant() => {
                return Some(vec![(end(l, true), end(h, true))]);
            }
            Expr::Compare(op, a, b) => {
                let (op, k) = match (a.as_ref(), b.as_ref()) {
                    (x, k) if is_column(x) && k.is_constant() => (*op, k),
                    (k, x) if is_column(x) && k.is_constant() => (flip(*op), k),
                    _ => continue,
                };
                match op {
                    CompareOp::Greater if low.is_none() => low = end(k, false),
                    CompareOp::GreaterOrEqual if low.is_none() => low = end(k, true),
                    CompareOp::Less if high.is_none() => high = end(k, false),
                    CompareOp::LessOrEqual if high.is_none() => high = end(k, true),
                    _ => {}
                }
            }
            Expr::InList {
                expr,
                list,
                negated: false,
            } if is_column(expr) && list.iter().all(Expr::is_constant) => {
                return Some(list.iter().map(|k| (end(k, true), end(k, true))).collect());
            }
            Expr::Or(..) => {
                if let Some(ranges) = or_ranges(conjunct, column) {
                    return Some(ranges);
                }
                if let Some((l, h)) = or_hull(conjunct, column) {
                    if low.is_none() {
                        low = l;
                    }
                    if high.is_none() {
                        high = h;
                    }
                }
            }
            _ => {}
        }
    }
    match (low, high) {
        (None, None) => None,
        ends => Some(vec![ends]),
    }
}

/// One range on `column` holding every row an OR lets through, when each
/// of its terms bounds the column from the same constant: what a row
/// comparison compiles to, `(a, b) > (x, y)` being `a > x OR (a = x AND
/// b > y)`, whose rows all have `a >= x` (keyset pagination starts its
/// scan there). The WHERE check then takes the rows the OR does.
fn or_hull(expr: &Expr, column: usize) -> Option<Ends> {
    let mut terms = Vec::new();
    split_or(expr, &mut terms);
    let mut hull: Option<Ends> = None;
    for term in terms {
        let mut conjuncts = Vec::new();
        split_and(term, &mut conjuncts);
        // A term that fixes the column is the range [k, k].
        let ends = match equal_in(&conjuncts, column) {
            Some(k) => {
                let end = Some(RangeEnd {
                    value: k,
                    inclusive: true,
                });
                (end.clone(), end)
            }
            None => match ranges_on(&conjuncts, column)?.as_slice() {
                [ends] => ends.clone(),
                _ => return None,
            },
        };
        hull = Some(match hull {
            None => ends,
            Some((low, high)) => (merge_end(low, ends.0)?, merge_end(high, ends.1)?),
        });
    }
    hull
}

/// The looser of two ends from one constant: unbounded if either is, and
/// inclusive if either is; `None` (no hull) when the constants differ.
fn merge_end(a: Option<RangeEnd>, b: Option<RangeEnd>) -> Option<Option<RangeEnd>> {
    match (a, b) {
        (Some(a), Some(b)) if a.value == b.value => Some(Some(RangeEnd {
            value: a.value,
            inclusive: a.inclusive || b.inclusive,
        })),
        (Some(_), Some(_)) => None,
        _ => Some(None),
    }
}

/// An OR of BETWEENs and equalities on `column`, as its ranges.
fn or_ranges(expr: &Expr, column: usize) -> Option<Vec<Ends>> {
    let is_column = |e: &Expr| matches!(e, Expr::Column(x) if *x == column);
    let end = |value: &Expr| {
        Some(RangeEnd {
            value: value.clone(),
            inclusive: true,
        })
    };
    match expr {
        Expr::Or(a, b) => {
            let mut ranges = or_ranges(a, column)?;
            ranges.extend(or_ranges(b, column)?);
            Some(ranges)
        }
        Expr::Between {
            expr,
            low,
            high,
            negated: false,
        } if is_column(expr) && low.is_constant() && high.is_constant() => {
            Some(vec![(end(low), end(high))])
        }
        Expr::Compare(CompareOp::Equal, a, b) => match (a.as_ref(), b.as_ref()) {
            (x, k) | (k, x) if is_column(x) && k.is_constant() => Some(vec![(end(k), end(k))]),
            _ => None,
        },
        _ => None,
    }
}

/// `k op column` as `column op' k`.
pub fn flip(op: CompareOp) -> CompareOp {
    match op {
        CompareOp::Less => CompareOp::Greater,
        CompareOp::LessOrEqual => CompareOp::GreaterOrEqual,
        CompareOp::Greater => CompareOp::Less,
        CompareOp::GreaterOrEqual => CompareOp::LessOrEqual,
        other => other,
    }
}
