//! Running compiled plans with bound parameters in a transaction: the
//! rows fetched (`access`) checked against the WHERE clause, then
//! aggregated, sorted (a top-N when there is a LIMIT), made distinct and
//! limited in the SQL node; writes queued and executed in batches, the
//! last one committing when the statement runs in autocommit.

use crate::access::{self, Fetched, Request};
use crate::catalog::SqlTable;
use crate::decimal::Decimal;
use crate::error::{codes, SqlError, SqlResult};
use crate::expr::{Aggregate, AggregateFunction, Environment, Expr, Inputs};
use crate::locked_rows::LockedRows;
use crate::plan::{AccessPlan, IndexRange, JoinPlan, RangeEnd, SelectPlan, WritePlan};
use crate::result::Response;
use crate::types;
use crate::value;
use crate::value::Value;
use client::{ClientError, Commit, LockMode, LockWait, Transaction};
use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::cell::RefCell;
use std::cmp::Ordering;
use std::rc::Rc;
use std::sync::Arc;

mod insert;
mod recursive;
mod subqueries;
mod union;
mod windows;

pub use insert::insert;
use insert::{flush_if_unique, has_unique_index};
use recursive::recursive_rows;
use subqueries::{query_in_transaction, with_subqueries};
use union::union_rows;
use windows::compute_windows;

/// Most operations sent in one round trip of a long write.
const WRITE_BATCH: usize = 1000;

/// What a statement did, for SHOW STATUS.
#[derive(Clone, Copy, Debug, Default)]
pub struct StatementCounts {
    /// Rows the data nodes sent.
    pub fetched: u64,
    /// Rows sent to the client.
    pub sent: u64,
    /// Rows taken from the transaction's locked rows, unread (to write,
    /// or for a committed read by key).
    pub locked_rows_reused: u64,
    /// Committed reads made at the row's primary, outside the transaction.
    pub reads_at_primary: u64,
}

/// The inputs of a run.
pub struct Run<'a> {
    /// The transaction, shared with the statement's environment: a
    /// correlated subquery runs in it from inside an expression's
    /// evaluation (`WithSubqueries`). Each use borrows it for one call,
    /// never across an evaluation.
    pub transaction: &'a RefCell<Transaction<'static>>,
    /// How the statement's last round trip ends (Yes in autocommit).
    pub commit: Commit,
    /// Parameters by slot.
    pub params: &'a [Value],
    /// The session.
    pub environment: &'a dyn Environment,
    /// Counts to add to.
    pub counts: &'a mut StatementCounts,
    /// The rows the transaction holds locked, as it last saw them.
    pub locked: &'a mut LockedRows,
    /// Inside a recursive common table expression's step: the rows of
    /// the step before, which its recursive SELECTs read by its name.
    pub working: Option<Rc<Vec<Vec<Value>>>>,
}

/// Error 1317 if KILL QUERY asked the statement to stop.
fn check_interrupt(run: &Run<'_>) -> SqlResult<()> {
    match run.environment.interrupted() {
        true => Err(crate::expr::interrupted()),
        false => Ok(()),
    }
}

fn passes(filter: Option<&Expr>, row: &[Value], run: &Run<'_>) -> SqlResult<bool> {
    let Some(filter) = filter else {
        return Ok(true);
    };
    let inputs = Inputs {
        row,
        aggregates: &[],
        params: run.params,
    };
    Ok(value::truth(&filter.eval(&inputs, run.environment)?) == Some(true))
}

/// Rows of a SELECT on their way out: each joined row with the results
/// of its group's aggregates (empty without aggregates).
type Grouped = Vec<(Vec<Value>, Vec<Value>)>;

/// Runs a SELECT.
pub fn select(plan: &SelectPlan, run: &mut Run<'_>) -> SqlResult<Response> {
    if plan.limit_parameters.is_some() {
        return select(&plan.with_limits(run.params)?, run);
    }
    with_subqueries(&plan.subqueries, run, |run| match &plan.recursive {
        Some(recursive) => recursive_rows(plan, recursive, run),
        None => anchor_rows(plan, run),
    })
}

/// The rows `body` makes from several queries run in the statement's
/// transaction, none of them ending it; then (in autocommit) the commit,
/// after the last. A union's and a recursion's rows, as `columns`.
fn in_one_transaction(
    columns: &Arc<[crate::result::OutputColumn]>,
    run: &mut Run<'_>,
    body: impl FnOnce(&mut Run<'_>) -> SqlResult<Vec<Vec<Value>>>,
) -> SqlResult<Response> {
    let (commit, sent) = (run.commit, run.counts.sent);
    run.commit = Commit::No;
    let rows = body(run);
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
        columns: Arc::clone(columns),
        rows,
    })
}

/// A SELECT's rows, a UNION's whole, without a recursion it carries.
fn anchor_rows(plan: &SelectPlan, run: &mut Run<'_>) -> SqlResult<Response> {
    match &plan.union {
        None => select_rows(plan, run),
        Some(union) => union_rows(plan, union, run),
    }
}

/// `rows` without the repeats of an earlier row (DISTINCT: equal as
/// GROUP BY's values are, `value::group_key`).
fn remove_duplicates(rows: &mut Vec<Vec<Value>>) {
    let mut seen = HashSet::with_capacity(rows.len());
    rows.retain(|row| seen.insert(row_key(row)));
}

/// A row's values as one key, equal for rows DISTINCT calls equal.
fn row_key(row: &[Value]) -> Vec<u8> {
    let mut key = Vec::new();
    row.iter().for_each(|v| value::group_key(v, &mut key));
    key
}

/// Runs a SELECT whose subqueries (if any) its environment answers.
fn select_rows(plan: &SelectPlan, run: &mut Run<'_>) -> SqlResult<Response> {
    let rows = match &plan.table {
        None => {
            if run.commit != Commit::No {
                run.transaction
                    .borrow_mut()
                    .execute(run.commit)
                    .map_err(|e| SqlError::from_client(&e, ""))?;
            }
            // One empty row, which WHERE may take away (SELECT 1 WHERE 0).
            match passes(plan.filter.as_ref(), &[], run)? {
                true => vec![Vec::new()],
                false => Vec::new(),
            }
        }
        Some(table) => {
            let simple = plan.joins.is_empty() && plan.group_by.is_empty() && plan.having.is_none();
            if simple {
                if let Some(count) = pushed_count(plan, table, run)? {
                    let aggregates = [Value::Int(count as i64)];
                    let row = output_row(plan, &[], &aggregates, run)?;
                    let rows = match plan.limit == Some(0) || plan.offset > 0 {
                        true => Vec::new(),
                        false => vec![row],
                    };
                    run.counts.sent += rows.len() as u64;
                    return Ok(Response::Rows {
                        columns: Arc::clone(&plan.columns),
                        rows,
                    });
                }
            }
            let unordered = simple
                && plan.aggregates.is_empty()
                && plan.windows.is_empty()
                && !plan.distinct
                && plan.order_by.is_empty();
            let scan_ordered = plan.scan_order.is_some() && plan.limit.is_some();
            // With joins every fetch stays open; the statement's end
            // commits once they are all done.
            let commit = match plan.joins.is_empty() {
                true => run.commit,
                false => Commit::No,
            };
            let request = Request {
                table,
                access: &plan.access,
                filter: plan.scan_filter.as_ref(),
                params: run.params,
                lock: plan.lock,
                wait: plan.lock_wait,
                needed: Some(&plan.needed),
                // Unordered, or read in ORDER BY's order: the first
                // LIMIT + OFFSET rows are the answer's (they are still
                // sorted below, a no-op on so few).
                limit: match unordered || scan_ordered {
                    true => plan.limit.map(|limit| limit.saturating_add(plan.offset)),
                    false => None,
                },
                order: plan.scan_order.filter(|_| scan_ordered),
                commit,
            };
            let held = match plan.lock == LockMode::CommittedRead && run.commit == Commit::No {
                true => held_image_or_settle(table, &plan.access, run)?,
                false => {
                    settle(table, &plan.access, run)?;
                    None
                }
            };
            let rows = match held {
                Some(row) => {
                    run.counts.locked_rows_reused += 1;
                    vec![row]
                }
                None => fetch(&request, run)?,
            };
            if plan.lock == LockMode::Exclusive && !table.made_by_sql_node() {
                // Whole rows (a locked read returns every column), each
                // locked until the transaction ends. (A shared lock would
                // have to be upgraded by the write, which can wait: such
                // a row is read again.)
                let zone = run.environment.zone_offset();
                for row in &rows {
                    let key = key_of(table, row, zone);
                    run.locked
                        .remember(&run.transaction.borrow(), zone, table, &key, row);
                }
            }
            let mut kept = Vec::with_capacity(rows.len());
            for row in rows {
                if passes(plan.scan_filter.as_ref(), &row, run)? {
                    kept.push(row);
                }
            }
            if !plan.joins.is_empty() {
                for join in &plan.joins {
                    kept = join_rows(kept, join, plan, run)?;
                }
                kept = keep_passing(kept, plan.filter.as_ref(), run)?;
                if run.commit != Commit::No {
                    run.transaction
                        .borrow_mut()
                        .execute(run.commit)
                        .map_err(|e| SqlError::from_client(&e, &table.cluster_name()))?;
                }
            }
            kept
        }
    };
    let grouped: Grouped = if !plan.aggregates.is_empty() || !plan.group_by.is_empty() {
        group(plan, rows, run)?
    } else {
        rows.into_iter().map(|row| (row, Vec::new())).collect()
    };
    let mut grouped = match &plan.having {
        None => grouped,
        Some(having) => {
            let mut kept = Vec::with_capacity(grouped.len());
            for (row, aggregates) in grouped {
                let inputs = Inputs {
                    row: &row,
                    aggregates: &aggregates,
                    params: run.params,
                };
                if value::truth(&having.eval(&inputs, run.environment)?) == Some(true) {
                    kept.push((row, aggregates));
                }
            }
            kept
        }
    };
    if !plan.windows.is_empty() {
        compute_windows(plan, &mut grouped, run)?;
    }
    let mut out: Vec<Vec<Value>> = if plan.order_by.is_empty() {
        let mut out = Vec::with_capacity(grouped.len());
        for (row, aggregates) in &grouped {
            out.push(output_row(plan, row, aggregates, run)?);
        }
        out
    } else {
        sorted_output(plan, &grouped, run)?
    };
    if plan.distinct {
        remove_duplicates(&mut out);
    }
    let offset = (plan.offset as usize).min(out.len());
    out.drain(..offset);
    if let Some(limit) = plan.limit {
        out.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    }
    run.counts.sent += out.len() as u64;
    Ok(Response::Rows {
        columns: Arc::clone(&plan.columns),
        rows: out,
    })
}

/// The rows of `rows` that pass `filter`.
fn keep_passing(
    rows: Vec<Vec<Value>>,
    filter: Option<&Expr>,
    run: &Run<'_>,
) -> SqlResult<Vec<Vec<Value>>> {
    if filter.is_none() {
        return Ok(rows);
    }
    let mut kept = Vec::with_capacity(rows.len());
    for row in rows {
        if passes(filter, &row, run)? {
            kept.push(row);
        }
    }
    Ok(kept)
}

/// Most rows of the earlier tables whose keys into a joined table are
/// looked up in one round trip.
const JOIN_BATCH: usize = 1000;

/// `outer` followed by `inner` (or NULLs, `width` of them).
fn joined(outer: &[Value], inner: Option<&[Value]>, width: usize) -> Vec<Value> {
    let mut row = Vec::with_capacity(outer.len() + width);
    row.extend_from_slice(outer);
    match inner {
        Some(inner) => row.extend_from_slice(inner),
        None => row.resize(outer.len() + width, Value::Null),
    }
    row
}

/// Joins `rows` (the earlier tables' joined rows) with `join`'s table: a
/// nested loop whose inner side is fetched once when its access reads no
/// earlier value, by batched key lookups when it is a primary key of
/// earlier values, else fetched for each earlier row with its values
/// bound (docs/design/0029-joins-and-grouping.md).
fn join_rows(
    rows: Vec<Vec<Value>>,
    join: &JoinPlan,
    plan: &SelectPlan,
    run: &mut Run<'_>,
) -> SqlResult<Vec<Vec<Value>>> {
    run.locked
        .settle_table(&mut run.transaction.borrow_mut(), &join.table)?;
    let width = join.table.columns.len();
    let mut out = Vec::new();
    // Pairs an earlier row with its candidates, keeping those the join's
    // condition accepts (or the earlier row alone, NULL-extended, for a
    // LEFT JOIN without one).
    let mut pair = |outer: &[Value], candidates: &[Vec<Value>], run: &Run<'_>| -> SqlResult<()> {
        let mut matched = false;
        for inner in candidates {
            let row = joined(outer, Some(inner), width);
            if passes(join.condition.as_ref(), &row, run)? {
                out.push(row);
                matched = true;
            }
        }
        if !matched && join.left {
            out.push(joined(outer, None, width));
        }
        Ok(())
    };
    if !join.correlated {
        let inner = fetch_joined(join, &join.access, plan, run)?;
        for outer in &rows {
            check_interrupt(run)?;
            pair(outer, &inner, run)?;
        }
        return Ok(out);
    }
    if let AccessPlan::PrimaryKey(exprs) = &join.access {
        for chunk in rows.chunks(JOIN_BATCH) {
            check_interrupt(run)?;
            let found = lookup_batch(join, exprs, chunk, plan, run)?;
            for (outer, row) in chunk.iter().zip(found) {
                pair(outer, row.as_slice(), run)?;
            }
        }
        return Ok(out);
    }
    for outer in &rows {
        check_interrupt(run)?;
        let access = bind_access(&join.access, outer);
        let inner = fetch_joined(join, &access, plan, run)?;
        pair(outer, &inner, run)?;
    }
    Ok(out)
}

/// `access` with the earlier tables' values of `outer` in place of its
/// `Outer` columns.
fn bind_access(access: &AccessPlan, outer: &[Value]) -> AccessPlan {
    let bind = |exprs: &[Expr]| exprs.iter().map(|e| e.bind_outer(outer)).collect();
    match access {
        AccessPlan::NoTable | AccessPlan::FullScan => access.clone(),
        AccessPlan::PrimaryKey(exprs) => AccessPlan::PrimaryKey(bind(exprs)),
        AccessPlan::PrimaryKeys(keys) => {
            AccessPlan::PrimaryKeys(keys.iter().map(|k| bind(k)).collect())
        }
        AccessPlan::UniqueKey { index, values } => AccessPlan::UniqueKey {
            index: index.clone(),
            values: bind(values),
        },
        AccessPlan::Ranges { index, ranges } => AccessPlan::Ranges {
            index: index.clone(),
            ranges: ranges
                .iter()
                .map(|range| IndexRange {
                    prefix: bind(&range.prefix),
                    low: range.low.as_ref().map(|end| RangeEnd {
                        value: end.value.bind_outer(outer),
                        inclusive: end.inclusive,
                    }),
                    high: range.high.as_ref().map(|end| RangeEnd {
                        value: end.value.bind_outer(outer),
                        inclusive: end.inclusive,
                    }),
                })
                .collect(),
        },
    }
}

/// The joined table's rows `access` reaches, those passing its own
/// conditions.
fn fetch_joined(
    join: &JoinPlan,
    access: &AccessPlan,
    plan: &SelectPlan,
    run: &mut Run<'_>,
) -> SqlResult<Vec<Vec<Value>>> {
    let request = Request {
        table: &join.table,
        access,
        filter: join.scan_filter.as_ref(),
        params: run.params,
        lock: plan.lock,
        wait: plan.lock_wait,
        needed: Some(&join.needed),
        limit: None,
        order: None,
        commit: Commit::No,
    };
    let rows = fetch(&request, run)?;
    keep_passing(rows, join.scan_filter.as_ref(), run)
}

/// The joined table's row for each of `outers` (none, or the one its
/// primary key names), every key of the batch read in one round trip.
fn lookup_batch(
    join: &JoinPlan,
    exprs: &[Expr],
    outers: &[Vec<Value>],
    plan: &SelectPlan,
    run: &mut Run<'_>,
) -> SqlResult<Vec<Vec<Vec<Value>>>> {
    let table = &join.table;
    let refused = |error: ClientError| SqlError::from_client(&error, &table.cluster_name());
    let key_columns = table.key_columns();
    let zone = run.environment.zone_offset();
    // Each earlier row's key; equal keys are read once.
    enum Slot {
        Key(usize),
        NoMatch,
        /// A value no lookup can use (compared as MySQL compares it, it
        /// may still match): every row is a candidate, the join's
        /// condition decides.
        Scan,
    }
    let mut slots: Vec<Slot> = Vec::with_capacity(outers.len());
    let mut keys: Vec<Vec<client::Value>> = Vec::new();
    let mut slot_of: HashMap<Vec<u8>, usize> = HashMap::new();
    for outer in outers {
        let bound: Vec<Expr> = exprs.iter().map(|e| e.bind_outer(outer)).collect();
        match access::lookup_key(table, &key_columns, &bound, run.params, run.environment)? {
            Ok(Some(key)) => {
                let encoded = access::encode_stored_key(&key);
                let slot = *slot_of.entry(encoded).or_insert_with(|| {
                    keys.push(key);
                    keys.len() - 1
                });
                slots.push(Slot::Key(slot));
            }
            Ok(None) => slots.push(Slot::NoMatch),
            Err(()) => slots.push(Slot::Scan),
        }
    }
    let mut ops = Vec::with_capacity(keys.len());
    for key in &keys {
        ops.push(
            run.transaction
                .borrow_mut()
                .read_locking(&table.table, key, plan.lock, plan.lock_wait)
                .map_err(refused)?,
        );
    }
    if !ops.is_empty() {
        run.transaction
            .borrow_mut()
            .execute(Commit::No)
            .map_err(refused)?;
    }
    let rows: Vec<Option<Vec<Value>>> = ops
        .into_iter()
        .map(|op| {
            run.transaction
                .borrow_mut()
                .get(op)
                .map(|row| access::load_row(table, row, zone))
        })
        .collect();
    run.counts.fetched += rows.iter().flatten().count() as u64;
    let mut found = Vec::with_capacity(outers.len());
    let mut everything: Option<Vec<Vec<Value>>> = None;
    for slot in slots {
        let candidates = match slot {
            Slot::Key(slot) => match &rows[slot] {
                Some(row) if passes(join.scan_filter.as_ref(), row, run)? => vec![row.clone()],
                _ => Vec::new(),
            },
            Slot::NoMatch => Vec::new(),
            Slot::Scan => {
                if everything.is_none() {
                    everything = Some(fetch_joined(join, &AccessPlan::FullScan, plan, run)?);
                }
                everything.clone().expect("fetched")
            }
        };
        found.push(candidates);
    }
    Ok(found)
}

/// COUNT(*) (or COUNT of a NOT NULL column) alone, with the whole WHERE
/// clause pushed: counted at the data nodes, no row sent.
fn pushed_count(plan: &SelectPlan, table: &SqlTable, run: &mut Run<'_>) -> SqlResult<Option<u64>> {
    let counts_rows = |aggregate: &Aggregate| match (aggregate.function, &aggregate.argument) {
        (AggregateFunction::CountRows, _) => true,
        (AggregateFunction::Count, Some(Expr::Column(index))) => {
            !aggregate.distinct && !table.columns[*index].nullable
        }
        _ => false,
    };
    let only_count = matches!(plan.aggregates.as_slice(), [one] if counts_rows(one));
    if !only_count || plan.lock != LockMode::CommittedRead {
        return Ok(None);
    }
    // The count sees the transaction's own writes, those waiting too.
    settle(table, &plan.access, run)?;
    let request = Request {
        table: plan.table.as_ref().expect("a table scan has a table"),
        access: &plan.access,
        filter: plan.filter.as_ref(),
        params: run.params,
        lock: plan.lock,
        wait: plan.lock_wait,
        needed: None,
        limit: None,
        order: None,
        commit: run.commit,
    };
    access::count(&request, &mut run.transaction.borrow_mut(), run.environment)
}

fn output_row(
    plan: &SelectPlan,
    row: &[Value],
    aggregates: &[Value],
    run: &Run<'_>,
) -> SqlResult<Vec<Value>> {
    let inputs = Inputs {
        row,
        aggregates,
        params: run.params,
    };
    plan.output
        .iter()
        .map(|e| e.eval(&inputs, run.environment))
        .collect()
}

/// The output rows in ORDER BY's order; with a LIMIT only the first
/// OFFSET + LIMIT are sorted (a top-N: partitioned in linear time, then
/// the few sorted).
fn sorted_output(plan: &SelectPlan, rows: &Grouped, run: &Run<'_>) -> SqlResult<Vec<Vec<Value>>> {
    let mut keyed: Vec<(Vec<Value>, usize)> = Vec::with_capacity(rows.len());
    for (index, (row, aggregates)) in rows.iter().enumerate() {
        let inputs = Inputs {
            row,
            aggregates,
            params: run.params,
        };
        keyed.push((sort_keys(&plan.order_by, &inputs, run)?, index));
    }
    let compare = |a: &(Vec<Value>, usize), b: &(Vec<Value>, usize)| -> Ordering {
        compare_sort_keys(&a.0, &b.0, plan.order_by.iter().map(|(_, d)| d)).then(a.1.cmp(&b.1))
    };
    // DISTINCT removes rows after the sort: every row must be sorted then.
    let wanted = match (plan.limit, plan.distinct) {
        (Some(limit), false) => {
            Some(usize::try_from(limit.saturating_add(plan.offset)).unwrap_or(usize::MAX))
        }
        _ => None,
    };
    match wanted {
        Some(wanted) if wanted < keyed.len() => {
            if wanted == 0 {
                keyed.clear();
            } else {
                keyed.select_nth_unstable_by(wanted - 1, compare);
                keyed.truncate(wanted);
            }
            keyed.sort_unstable_by(compare);
        }
        _ => keyed.sort_unstable_by(compare),
    }
    keyed
        .iter()
        .map(|(_, index)| {
            let (row, aggregates) = &rows[*index];
            output_row(plan, row, aggregates, run)
        })
        .collect()
}

/// A row's ORDER BY values.
fn sort_keys(
    order_by: &[(Expr, bool)],
    inputs: &Inputs<'_>,
    run: &Run<'_>,
) -> SqlResult<Vec<Value>> {
    order_by
        .iter()
        .map(|(expr, _)| expr.eval(inputs, run.environment))
        .collect()
}

/// How two rows' ORDER BY values compare, each pair ascending or
/// `descending`.
fn compare_sort_keys<'a>(
    a: &[Value],
    b: &[Value],
    descending: impl IntoIterator<Item = &'a bool>,
) -> Ordering {
    compare_in_order(
        a.iter()
            .zip(b)
            .zip(descending)
            .map(|((x, y), descending)| (x, y, *descending)),
    )
}

/// The first unequal pair's order, reversed where it is descending
/// (`Equal` when every pair is).
fn compare_in_order<'a>(pairs: impl Iterator<Item = (&'a Value, &'a Value, bool)>) -> Ordering {
    for (x, y, descending) in pairs {
        let ordering = value::order(x, y);
        let ordering = if descending {
            ordering.reverse()
        } else {
            ordering
        };
        if ordering != Ordering::Equal {
            return ordering;
        }
    }
    Ordering::Equal
}

/// One aggregate's running state over a group's rows.
#[derive(Clone)]
struct Accumulator {
    count: i64,
    /// Exact while every value is an integer or a DECIMAL (SUM and AVG
    /// are then DECIMALs, as MySQL's), else a double.
    exact_sum: Option<Decimal>,
    double_sum: f64,
    best: Option<Value>,
    /// The values seen, for DISTINCT.
    seen: HashSet<Vec<u8>>,
    /// GROUP_CONCAT's texts, each with its ORDER BY values.
    texts: Vec<(Vec<Value>, Vec<u8>)>,
}

/// The longest GROUP_CONCAT result: longer ones are cut there (MariaDB's
/// default `group_concat_max_len`, 1 MiB; MySQL's is 1 KiB).
const GROUP_CONCAT_MAX_BYTES: usize = 1 << 20;

impl Accumulator {
    fn new() -> Accumulator {
        Accumulator {
            count: 0,
            exact_sum: Decimal::from_integer(0),
            double_sum: 0.0,
            best: None,
            seen: HashSet::new(),
            texts: Vec::new(),
        }
    }

    /// Takes one row's value of the aggregate's argument (with its
    /// GROUP_CONCAT ORDER BY values, `keys`).
    fn add(&mut self, aggregate: &Aggregate, value: Value, keys: Vec<Value>) {
        if value.is_null() {
            return;
        }
        if aggregate.distinct {
            let mut key = Vec::new();
            value::group_key(&value, &mut key);
            if !self.seen.insert(key) {
                return;
            }
        }
        self.count += 1;
        match aggregate.function {
            AggregateFunction::CountRows | AggregateFunction::Count => {}
            AggregateFunction::GroupConcat => {
                let mut text = Vec::new();
                value::write_text(&value, &mut text);
                self.texts.push((keys, text));
            }
            AggregateFunction::JsonArrayAgg | AggregateFunction::JsonObjectAgg => {
                if let Value::Bytes(text) = value {
                    self.texts.push((keys, text));
                }
            }
            AggregateFunction::Sum | AggregateFunction::Average => {
                if let Some(sum) = self.exact_sum {
                    self.exact_sum = match &value {
                        Value::Int(x) => {
                            Decimal::from_integer(*x as i128).and_then(|x| sum.checked_add(x))
                        }
                        Value::UInt(x) => {
                            Decimal::from_integer(*x as i128).and_then(|x| sum.checked_add(x))
                        }
                        Value::Decimal(x) => sum.checked_add(*x),
                        _ => None,
                    };
                }
                self.double_sum += value::to_f64(&value);
            }
            AggregateFunction::Min | AggregateFunction::Max => {
                let better = |current: &Value| {
                    let ordering = value::order(&value, current);
                    match aggregate.function {
                        AggregateFunction::Min => ordering == Ordering::Less,
                        _ => ordering == Ordering::Greater,
                    }
                };
                if self.best.as_ref().is_none_or(better) {
                    self.best = Some(value);
                }
            }
        }
    }

    /// The aggregate's result.
    fn finish(self, aggregate: &Aggregate) -> Value {
        match aggregate.function {
            AggregateFunction::CountRows | AggregateFunction::Count => Value::Int(self.count),
            AggregateFunction::Sum if self.count == 0 => Value::Null,
            AggregateFunction::Sum => match self.exact_sum {
                Some(sum) => Value::Decimal(sum),
                None => Value::Double(self.double_sum),
            },
            AggregateFunction::Average if self.count == 0 => Value::Null,
            AggregateFunction::Average => {
                let count = Decimal::from_integer(self.count as i128);
                match self
                    .exact_sum
                    .zip(count)
                    .and_then(|(sum, n)| sum.checked_div(n))
                {
                    Some(average) => Value::Decimal(average),
                    None => Value::Double(self.double_sum / self.count as f64),
                }
            }
            AggregateFunction::Min | AggregateFunction::Max => self.best.unwrap_or(Value::Null),
            AggregateFunction::JsonArrayAgg | AggregateFunction::JsonObjectAgg
                if self.texts.is_empty() =>
            {
                Value::Null
            }
            AggregateFunction::JsonArrayAgg | AggregateFunction::JsonObjectAgg => {
                crate::json::functions::aggregate(aggregate.function, &self.texts)
            }
            AggregateFunction::GroupConcat if self.texts.is_empty() => Value::Null,
            AggregateFunction::GroupConcat => {
                let concat = aggregate.concat.as_deref();
                let mut texts = self.texts;
                if let Some(order_by) = concat.map(|c| &c.order_by).filter(|o| !o.is_empty()) {
                    texts.sort_by(|(a, _), (b, _)| {
                        compare_sort_keys(a, b, order_by.iter().map(|(_, d)| d))
                    });
                }
                let separator = concat.map_or(&b","[..], |c| &c.separator[..]);
                let mut joined = Vec::new();
                for (at, (_, text)) in texts.iter().enumerate() {
                    if at > 0 {
                        joined.extend_from_slice(separator);
                    }
                    joined.extend_from_slice(text);
                    if joined.len() >= GROUP_CONCAT_MAX_BYTES {
                        joined.truncate(GROUP_CONCAT_MAX_BYTES);
                        break;
                    }
                }
                Value::Bytes(joined)
            }
        }
    }
}

/// `rows` in groups by GROUP BY's values, in the order each group was
/// first met: each group's first row and its aggregates' results.
/// Without GROUP BY the rows are one group, even when there are none
/// (`SELECT COUNT(*)` of no rows is one row, 0).
fn group(plan: &SelectPlan, rows: Vec<Vec<Value>>, run: &Run<'_>) -> SqlResult<Grouped> {
    let mut groups: Vec<(Vec<Value>, Vec<Accumulator>)> = Vec::new();
    let mut index_of: HashMap<Vec<u8>, usize> = HashMap::new();
    let fresh = || plan.aggregates.iter().map(|_| Accumulator::new()).collect();
    if plan.group_by.is_empty() {
        groups.push((Vec::new(), fresh()));
    }
    for (number, row) in rows.into_iter().enumerate() {
        if number % 1024 == 1023 {
            check_interrupt(run)?;
        }
        let inputs = Inputs {
            row: &row,
            aggregates: &[],
            params: run.params,
        };
        let slot = if plan.group_by.is_empty() {
            0
        } else {
            let mut key = Vec::new();
            for expr in &plan.group_by {
                value::group_key(&expr.eval(&inputs, run.environment)?, &mut key);
            }
            match index_of.get(&key) {
                Some(slot) => *slot,
                None => {
                    index_of.insert(key, groups.len());
                    groups.push((Vec::new(), fresh()));
                    groups.len() - 1
                }
            }
        };
        let (first, accumulators) = &mut groups[slot];
        for (aggregate, accumulator) in plan.aggregates.iter().zip(accumulators.iter_mut()) {
            let value = match &aggregate.argument {
                None => Value::Int(1),
                Some(argument) => argument.eval(&inputs, run.environment)?,
            };
            let keys = match aggregate.concat.as_deref() {
                Some(concat) if !value.is_null() => concat
                    .order_by
                    .iter()
                    .map(|(expr, _)| expr.eval(&inputs, run.environment))
                    .collect::<SqlResult<Vec<_>>>()?,
                _ => Vec::new(),
            };
            accumulator.add(aggregate, value, keys);
        }
        if first.is_empty() {
            *first = row;
        }
    }
    Ok(groups
        .into_iter()
        .map(|(first, accumulators)| {
            let results = plan
                .aggregates
                .iter()
                .zip(accumulators)
                .map(|(aggregate, accumulator)| accumulator.finish(aggregate))
                .collect();
            (first, results)
        })
        .collect())
}

/// Checks and converts `value` for column `index` of `table`: its type
/// (`value::fit`), NOT NULL.
pub fn fit_column(table: &SqlTable, index: usize, value: &Value) -> SqlResult<Value> {
    let column = &table.columns[index];
    if value.is_null() {
        if !column.nullable {
            return Err(SqlError::new(
                codes::BAD_NULL,
                format!("Column '{}' cannot be null", column.name),
            ));
        }
        return Ok(Value::Null);
    }
    value::fit(value, &column.sql_type, &column.name)
}

/// Executes what is queued in `transaction` (a round trip), mapping errors.
fn flush(
    transaction: &mut Transaction<'static>,
    commit: Commit,
    table: &SqlTable,
) -> SqlResult<()> {
    transaction
        .execute(commit)
        .map(|_| ())
        .map_err(|error: ClientError| SqlError::from_client(&error, &table.cluster_name()))
}

/// The rows an UPDATE or DELETE writes, and whether they are the one row
/// its key names as the transaction holds it locked (unread:
/// `locked_rows`).
fn rows_to_write(plan: &WritePlan, run: &mut Run<'_>) -> SqlResult<(Vec<Vec<Value>>, bool)> {
    let table = &plan.table;
    if let Some(join) = &plan.joined {
        // A multi-table write: the join's rows, locked, each row of the
        // table once (the first of its key), the assignments' values
        // after it. They are values to store: a warning computing them
        // is an error (strict mode), as in a single-table UPDATE.
        let environment = run.environment;
        let _storing = (!plan.assignments.is_empty()).then(|| Storing::begin(environment));
        let rows = subqueries::query_in_transaction(join, run)?;
        check_interrupt(run)?;
        let key_columns = table.key_columns();
        let mut seen = HashSet::with_capacity(rows.len());
        let rows = rows
            .into_iter()
            .filter(|row| {
                let key: Vec<Value> = key_columns.iter().map(|&c| row[c].clone()).collect();
                // A LEFT JOIN's missing row (its key NULL, which no
                // stored row's is) is no row to write.
                !key.iter().any(Value::is_null) && seen.insert(row_key(&key))
            })
            .collect();
        return Ok((rows, false));
    }
    let limit = plan.limit_for(run.params)?;
    if let Some(key) = settle(table, &plan.access, run)? {
        let zone = run.environment.zone_offset();
        let held = run.locked.get(&run.transaction.borrow(), zone, table, &key);
        if let Some(row) = held {
            run.counts.locked_rows_reused += 1;
            let rows = match passes(plan.filter.as_ref(), &row, run)? {
                true if limit != Some(0) => vec![row],
                _ => Vec::new(),
            };
            return Ok((rows, true));
        }
    }
    let request = Request {
        table: &plan.table,
        access: &plan.access,
        filter: plan.filter.as_ref(),
        params: run.params,
        lock: LockMode::Exclusive,
        wait: LockWait::Wait,
        needed: None,
        limit: None,
        order: None,
        commit: Commit::No,
    };
    let rows = fetch(&request, run)?;
    check_interrupt(run)?;
    let mut kept = Vec::with_capacity(rows.len());
    // With ORDER BY, every row that passes is kept, then the first ones
    // by the order.
    let cut_early = plan.order_by.is_empty();
    for row in rows {
        if cut_early && limit.is_some_and(|limit| kept.len() as u64 >= limit) {
            break;
        }
        if passes(plan.filter.as_ref(), &row, run)? {
            kept.push(row);
        }
    }
    if !plan.order_by.is_empty() {
        let mut keyed = Vec::with_capacity(kept.len());
        for row in kept {
            let inputs = Inputs {
                row: &row,
                aggregates: &[],
                params: run.params,
            };
            keyed.push((sort_keys(&plan.order_by, &inputs, run)?, row));
        }
        keyed.sort_by(|a, b| compare_sort_keys(&a.0, &b.0, plan.order_by.iter().map(|(_, d)| d)));
        kept = keyed.into_iter().map(|(_, row)| row).collect();
        if let Some(limit) = limit {
            kept.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        }
    }
    Ok((kept, false))
}

/// The rows `request` names, fetched in the run's transaction, with
/// what it cost counted.
fn fetch(request: &Request<'_>, run: &mut Run<'_>) -> SqlResult<Vec<Vec<Value>>> {
    let Fetched {
        rows,
        fetched,
        at_primary,
    } = access::fetch(request, &mut run.transaction.borrow_mut(), run.environment)?;
    run.counts.fetched += fetched;
    run.counts.reads_at_primary += u64::from(at_primary);
    Ok(rows)
}

/// The key `access` names when it is a primary key of literals and
/// parameters: `Ok(Some(key))`, or `Ok(None)` when no row can match.
/// `Err(())` for any other access, and for a key whose value may change
/// between evaluations, as `RAND()`'s (the fetch evaluates it again).
fn constant_key(
    table: &SqlTable,
    access: &crate::plan::AccessPlan,
    run: &Run<'_>,
) -> SqlResult<Result<Option<Vec<client::Value>>, ()>> {
    let crate::plan::AccessPlan::PrimaryKey(exprs) = access else {
        return Ok(Err(()));
    };
    if !exprs
        .iter()
        .all(|expr| matches!(expr, Expr::Literal(_) | Expr::Param(_)))
    {
        return Ok(Err(()));
    }
    access::lookup_key(
        table,
        &table.key_columns(),
        exprs,
        run.params,
        run.environment,
    )
}

/// For a committed read: the row its primary key names, from the image
/// of it the transaction holds locked (`locked_rows`): no other
/// transaction can have changed it, and the image carries this
/// transaction's own writes of it, those still waiting for a round trip
/// included, so it is what a read would return, without one (and the
/// waiting writes go on waiting). `None` when there is no such image,
/// after settling as `settle` does (the key evaluated once for both).
fn held_image_or_settle(
    table: &SqlTable,
    access: &crate::plan::AccessPlan,
    run: &mut Run<'_>,
) -> SqlResult<Option<Vec<Value>>> {
    let key = constant_key(table, access, run)?;
    if let (Ok(Some(key)), false) = (&key, table.made_by_sql_node()) {
        let zone = run.environment.zone_offset();
        let held = run.locked.get(&run.transaction.borrow(), zone, table, key);
        if let Some(row) = held {
            return Ok(Some(row));
        }
    }
    settle_for(table, key, run)?;
    Ok(None)
}

/// Sends the writes waiting in the transaction (`locked_rows`) that the
/// coming fetch of `table` by `access` could meet: those of the row its
/// key names, or of any row of the table for any other access (and for a
/// key whose value may change between evaluations). The key, when it
/// names one row and is settled alone.
fn settle(
    table: &SqlTable,
    access: &crate::plan::AccessPlan,
    run: &mut Run<'_>,
) -> SqlResult<Option<Vec<client::Value>>> {
    let key = constant_key(table, access, run)?;
    settle_for(table, key, run)
}

/// `settle` for the key `constant_key` gave.
fn settle_for(
    table: &SqlTable,
    key: Result<Option<Vec<client::Value>>, ()>,
    run: &mut Run<'_>,
) -> SqlResult<Option<Vec<client::Value>>> {
    match key {
        Ok(Some(key)) => {
            run.locked
                .settle_key(&mut run.transaction.borrow_mut(), table, &key)?;
            Ok(Some(key))
        }
        Ok(None) => Ok(None),
        Err(()) => {
            run.locked
                .settle_table(&mut run.transaction.borrow_mut(), table)?;
            Ok(None)
        }
    }
}

/// The primary key of `row`, as the cluster stores it.
fn key_of(table: &SqlTable, row: &[Value], zone: i64) -> Vec<client::Value> {
    table
        .def()
        .primary_key
        .iter()
        .map(|c| {
            types::store(
                &row[*c as usize],
                &table.columns[*c as usize].sql_type,
                zone,
            )
        })
        .collect()
}

/// Columns `columns` of `row`, as the cluster stores them.
fn stored_columns(
    table: &SqlTable,
    row: &[Value],
    columns: impl Iterator<Item = usize>,
    zone: i64,
) -> Vec<(u16, client::Value)> {
    columns
        .map(|i| {
            let stored = types::store(&row[i], &table.columns[i].sql_type, zone);
            (i as u16, stored)
        })
        .collect()
}

/// Runs an UPDATE.
pub fn update(plan: &WritePlan, run: &mut Run<'_>) -> SqlResult<Response> {
    with_subqueries(&plan.subqueries, run, |run| update_rows(plan, run))
}

/// While it lives, the statement's values are being computed to be
/// stored: a warning is an error (MySQL's strict mode, design 0027,
/// "Warnings").
pub(crate) struct Storing<'a>(&'a dyn Environment);

impl<'a> Storing<'a> {
    pub(crate) fn begin(environment: &'a dyn Environment) -> Storing<'a> {
        environment.set_storing(true);
        Storing(environment)
    }
}

impl Drop for Storing<'_> {
    fn drop(&mut self) {
        self.0.set_storing(false);
    }
}

/// The row `old` with the UPDATE's assignments applied, each value
/// fitted to its column.
fn new_values(plan: &WritePlan, old: &[Value], run: &Run<'_>) -> SqlResult<Vec<Value>> {
    let _storing = Storing::begin(run.environment);
    // A joined write's row goes on past the table's with the values the
    // assignments read.
    let mut new = old.to_vec();
    for (column, expr) in &plan.assignments {
        // Each assignment sees the ones before it (MySQL's order).
        let inputs = Inputs {
            row: &new,
            aggregates: &[],
            params: run.params,
        };
        let value = expr.eval(&inputs, run.environment)?;
        new[*column] = fit_column(&plan.table, *column, &value)?;
    }
    new.truncate(plan.table.columns.len());
    crate::generated::fill(&plan.table, &mut new, run.environment)?;
    crate::checks::verify(&plan.table, &new, run.environment)?;
    Ok(new)
}

fn update_rows(plan: &WritePlan, run: &mut Run<'_>) -> SqlResult<Response> {
    if let Some(increments) = &plan.increments {
        if let Some(response) = increment_by_key(plan, increments, run)? {
            return Ok(response);
        }
    }
    let table = &plan.table;
    let (rows, held) = rows_to_write(plan, run)?;
    // A held row's new values can fail on nothing but a unique index
    // (design 0034): the write may wait for the next round trip.
    let mut deferrable = held && run.commit == Commit::No && !has_unique_index(table);
    let key_columns = table.key_columns();
    let (mut matched, mut changed) = (0u64, 0u64);
    let name = table.cluster_name();
    let refused = |error: ClientError| SqlError::from_client(&error, &name);
    let zone = run.environment.zone_offset();
    // With subqueries, every row's new values before any row is written:
    // a subquery in an assignment, run in the open transaction, reads the
    // rows as they were before the statement (as MariaDB's UPDATE of a
    // table its subquery reads does). Without, each row's as it comes (no
    // second copy of every row).
    let mut computed = match plan.subqueries.is_empty() {
        true => None,
        false => {
            let mut news = Vec::with_capacity(rows.len());
            for (number, old) in rows.iter().enumerate() {
                if number % WRITE_BATCH == WRITE_BATCH - 1 {
                    check_interrupt(run)?;
                }
                news.push(new_values(plan, old, run)?);
            }
            Some(news.into_iter())
        }
    };
    for (number, read) in rows.iter().enumerate() {
        let new = match computed.as_mut().and_then(Iterator::next) {
            Some(new) => new,
            None => new_values(plan, read, run)?,
        };
        // The table's row (a joined write's goes on with other values).
        let old = &read[..new.len()];
        matched += 1;
        // Fitted to the column, a new value has the old one's form: equal
        // values are equal Values (as MySQL, an unchanged row is matched,
        // not changed).
        let differs = |i: usize| old[i] != new[i];
        let changed_columns: Vec<usize> = (0..new.len()).filter(|i| differs(*i)).collect();
        let old_key = key_of(table, old, zone);
        if changed_columns.is_empty() {
            // Read with an exclusive lock (or remembered so): held.
            run.locked
                .remember(&run.transaction.borrow(), zone, table, &old_key, old);
            continue;
        }
        changed += 1;
        if changed_columns.iter().any(|c| key_columns.contains(c)) {
            // A new primary key is a new row: delete, then insert.
            deferrable = false;
            run.locked.forget(table, &old_key);
            run.transaction
                .borrow_mut()
                .delete(&table.table, &old_key)
                .map_err(refused)?;
            // The new row may keep the old one's unique values.
            flush_if_unique(run, table)?;
            // Nor may it share a batch with a waiting write of its key.
            run.locked.settle_key(
                &mut run.transaction.borrow_mut(),
                table,
                &key_of(table, &new, zone),
            )?;
            let values = stored_columns(table, &new, 0..new.len(), zone);
            run.transaction
                .borrow_mut()
                .insert(&table.table, &values)
                .map_err(refused)?;
        } else {
            let set = stored_columns(table, &new, changed_columns.iter().copied(), zone);
            run.transaction
                .borrow_mut()
                .update(&table.table, &old_key, &set)
                .map_err(refused)?;
            // The row as this transaction leaves it (should the update
            // fail, the transaction ends and the image with it).
            run.locked
                .remember(&run.transaction.borrow(), zone, table, &old_key, &new);
            if deferrable {
                run.locked.defer(&run.transaction.borrow(), table, &old_key);
            }
        }
        if (number + 1) % WRITE_BATCH == 0 {
            check_interrupt(run)?;
            flush(&mut run.transaction.borrow_mut(), Commit::No, table)?;
        }
    }
    if !deferrable {
        flush(&mut run.transaction.borrow_mut(), run.commit, table)?;
    }
    Ok(Response::Ok {
        affected_rows: changed,
        matched_rows: matched,
        last_insert_id: 0,
        info: format!(
            "Rows matched: {matched}  Changed: {changed}  Warnings: {}",
            run.environment.warning_count()
        ),
    })
}

/// An autocommit UPDATE whose plan is increments (`WritePlan::increments`)
/// done by the data node in one round trip; `None` when it must run as any
/// UPDATE: inside a transaction (where a missing row would abort the whole
/// transaction), with a key that cannot be looked up, or when the data
/// node refused the sums (a NULL column, a sum out of range: the general
/// path then gives MySQL's answer, in a new transaction, the refused one
/// having changed nothing).
fn increment_by_key(
    plan: &WritePlan,
    increments: &[(usize, i64)],
    run: &mut Run<'_>,
) -> SqlResult<Option<Response>> {
    use client::TransactionState;
    let crate::plan::AccessPlan::PrimaryKey(exprs) = &plan.access else {
        return Ok(None);
    };
    if run.commit != Commit::Yes || run.transaction.borrow().state() != TransactionState::Idle {
        return Ok(None);
    }
    let table = &plan.table;
    let key = match access::lookup_key(
        table,
        &table.key_columns(),
        exprs,
        run.params,
        run.environment,
    )? {
        Ok(Some(key)) => key,
        Ok(None) | Err(()) => return Ok(None),
    };
    let deltas: Vec<(u16, i64)> = increments
        .iter()
        .map(|&(column, delta)| (column as u16, delta))
        .collect();
    let refused = |error: ClientError| SqlError::from_client(&error, &table.cluster_name());
    run.transaction
        .borrow_mut()
        .increment(&table.table, &key, &deltas)
        .map_err(refused)?;
    let executed = run.transaction.borrow_mut().execute(Commit::Yes);
    let changed = match executed {
        Ok(_) => 1,
        Err(error) if error.code() == Some(client::ErrorCode::NoSuchRow) => 0,
        // A NULL or a sum out of range (MySQL's answer is the general
        // path's), or refused by the tc: a unique index on the column
        // that this plan's definition predates (added since, or by
        // another SQL node). The refused transaction changed nothing.
        Err(error)
            if matches!(
                error.code(),
                Some(client::ErrorCode::ValueOutOfRange | client::ErrorCode::BadRequest)
            ) =>
        {
            if error.code() == Some(client::ErrorCode::BadRequest) {
                // Planned again from the current definition next time.
                run.environment.table_changed(table);
            }
            let fresh = run.transaction.borrow().cluster().transaction();
            *run.transaction.borrow_mut() = fresh;
            return Ok(None);
        }
        Err(error) => return Err(refused(error)),
    };
    Ok(Some(Response::Ok {
        affected_rows: changed,
        matched_rows: changed,
        last_insert_id: 0,
        info: format!(
            "Rows matched: {changed}  Changed: {changed}  Warnings: {}",
            run.environment.warning_count()
        ),
    }))
}

/// Runs a DELETE.
pub fn delete(plan: &WritePlan, run: &mut Run<'_>) -> SqlResult<Response> {
    with_subqueries(&plan.subqueries, run, |run| delete_rows(plan, run))
}

fn delete_rows(plan: &WritePlan, run: &mut Run<'_>) -> SqlResult<Response> {
    let table = &plan.table;
    let (rows, held) = rows_to_write(plan, run)?;
    // Deleting a held row cannot fail on the data: it may wait for the
    // next round trip (design 0034).
    let deferrable = held && run.commit == Commit::No;
    let zone = run.environment.zone_offset();
    for (number, row) in rows.iter().enumerate() {
        let key = key_of(table, row, zone);
        run.locked.forget(table, &key);
        run.transaction
            .borrow_mut()
            .delete(&table.table, &key)
            .map_err(|error| SqlError::from_client(&error, &table.cluster_name()))?;
        if deferrable {
            run.locked.defer(&run.transaction.borrow(), table, &key);
        }
        if (number + 1) % WRITE_BATCH == 0 {
            check_interrupt(run)?;
            flush(&mut run.transaction.borrow_mut(), Commit::No, table)?;
        }
    }
    if !deferrable {
        flush(&mut run.transaction.borrow_mut(), run.commit, table)?;
    }
    Ok(Response::affected(rows.len() as u64))
}
