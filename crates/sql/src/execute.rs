//! Running compiled plans with bound parameters in a transaction: the
//! rows fetched (`access`) checked against the WHERE clause, then
//! aggregated, sorted (a top-N when there is a LIMIT), made distinct and
//! limited in the SQL node; writes queued and executed in batches, the
//! last one committing when the statement runs in autocommit.

use crate::access::{self, Fetched, Request};
use crate::auto_increment::AutoIncrement;
use crate::catalog::SqlTable;
use crate::decimal::Decimal;
use crate::error::{codes, SqlError, SqlResult};
use crate::expr::{Aggregate, AggregateFunction, Environment, Expr, Inputs};
use crate::locked_rows::LockedRows;
use crate::plan::{
    AccessPlan, Conflict, IndexRange, InsertPlan, JoinPlan, RangeEnd, SelectPlan, SubqueryPlan,
    WritePlan,
};
use crate::result::Response;
use crate::types;
use crate::value;
use crate::value::Value;
use client::{ClientError, Commit, LockMode, Transaction};
use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::collections::HashSet;
use std::rc::Rc;
use std::sync::Arc;

/// Most operations sent in one round trip of a long write.
const WRITE_BATCH: usize = 1000;

/// What a statement did, for SHOW STATUS.
#[derive(Clone, Copy, Debug, Default)]
pub struct StatementCounts {
    /// Rows the data nodes sent.
    pub fetched: u64,
    /// Rows sent to the client.
    pub sent: u64,
    /// Rows to write taken from the transaction's locked rows, unread.
    pub locked_rows_reused: u64,
}

/// The inputs of a run.
pub struct Run<'a> {
    /// The transaction.
    pub transaction: &'a mut Transaction<'static>,
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

/// An environment that answers a statement's subqueries (design 0033):
/// each runs as a query of its own in a cluster transaction of its own
/// (reads of committed rows, as the statement's own reads are), once when
/// it reads nothing of the enclosing row, else once for each distinct set
/// of the enclosing row's values it reads. Everything else is asked of
/// the statement's environment.
struct WithSubqueries<'a> {
    inner: &'a dyn Environment,
    subqueries: &'a [SubqueryPlan],
    /// For each slot, the enclosing row's columns it reads.
    reads: Vec<Vec<usize>>,
    cluster: &'static client::Cluster,
    /// For each slot, its rows by the values it read of the enclosing row.
    results: RefCell<Vec<HashMap<Vec<u8>, SubqueryRows>>>,
}

/// A subquery's rows, shared by the rows of the enclosing query that
/// asked for them.
type SubqueryRows = Rc<Vec<Vec<Value>>>;

impl<'a> WithSubqueries<'a> {
    fn new(
        inner: &'a dyn Environment,
        subqueries: &'a [SubqueryPlan],
        cluster: &'static client::Cluster,
    ) -> WithSubqueries<'a> {
        WithSubqueries {
            inner,
            subqueries,
            reads: subqueries
                .iter()
                .map(|s| crate::plan::outer_columns(&s.plan))
                .collect(),
            cluster,
            results: RefCell::new(vec![HashMap::new(); subqueries.len()]),
        }
    }
}

impl Environment for WithSubqueries<'_> {
    fn session_value(&self, value: &crate::expr::SessionValue) -> SqlResult<Value> {
        self.inner.session_value(value)
    }

    fn interrupted(&self) -> bool {
        self.inner.interrupted()
    }

    fn read_ahead(
        &self,
        table: &client::Table,
        key: &[client::Value],
    ) -> Option<Option<Vec<Value>>> {
        self.inner.read_ahead(table, key)
    }

    fn table_changed(&self, table: &SqlTable) {
        self.inner.table_changed(table)
    }

    fn zone_offset(&self) -> i64 {
        self.inner.zone_offset()
    }

    fn batches_inserts(&self) -> bool {
        self.inner.batches_inserts()
    }

    fn view_rows(
        &self,
        view: crate::information_schema::View,
        needed: Option<&[usize]>,
    ) -> SqlResult<Vec<Vec<Value>>> {
        self.inner.view_rows(view, needed)
    }

    fn subquery_rows(
        &self,
        slot: usize,
        row: &[Value],
        params: &[Value],
    ) -> SqlResult<Rc<Vec<Vec<Value>>>> {
        let subquery = self.subqueries.get(slot).ok_or_else(|| {
            SqlError::new(
                codes::UNKNOWN_ERROR,
                format!("internal: no subquery {slot}"),
            )
        })?;
        let mut key = Vec::new();
        for column in &self.reads[slot] {
            value::group_key(row.get(*column).unwrap_or(&Value::Null), &mut key);
        }
        if let Some(rows) = self.results.borrow()[slot].get(&key) {
            return Ok(Rc::clone(rows));
        }
        let bound;
        let plan = match subquery.correlated {
            true => {
                bound = subquery.plan.bind_outer(row);
                &bound
            }
            false => &*subquery.plan,
        };
        let mut transaction = self.cluster.transaction();
        let mut counts = StatementCounts::default();
        let mut run = Run {
            transaction: &mut transaction,
            commit: Commit::Yes,
            params,
            environment: self,
            counts: &mut counts,
            locked: &mut LockedRows::default(),
        };
        let Response::Rows { rows, .. } = select(plan, &mut run)? else {
            unreachable!("a query answers rows")
        };
        let rows = Rc::new(rows);
        self.results.borrow_mut()[slot].insert(key, Rc::clone(&rows));
        Ok(rows)
    }
}

/// Runs a SELECT.
pub fn select(plan: &SelectPlan, run: &mut Run<'_>) -> SqlResult<Response> {
    with_subqueries(&plan.subqueries, run, |run| select_rows(plan, run))
}

/// Runs a SELECT whose subqueries (if any) its environment answers.
fn select_rows(plan: &SelectPlan, run: &mut Run<'_>) -> SqlResult<Response> {
    let rows = match &plan.table {
        None => {
            if run.commit != Commit::No {
                run.transaction
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
            let unordered =
                simple && plan.aggregates.is_empty() && !plan.distinct && plan.order_by.is_empty();
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
            settle(table, &plan.access, run)?;
            let Fetched { rows, fetched } =
                access::fetch(&request, run.transaction, run.environment)?;
            run.counts.fetched += fetched;
            if plan.lock == LockMode::Exclusive && table.view.is_none() {
                // Whole rows (a locked read returns every column), each
                // locked until the transaction ends. (A shared lock would
                // have to be upgraded by the write, which can wait: such
                // a row is read again.)
                let zone = run.environment.zone_offset();
                for row in &rows {
                    let key = key_of(table, row, zone);
                    run.locked.remember(run.transaction, zone, table, &key, row);
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
    let grouped = match &plan.having {
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
        let mut seen = HashSet::with_capacity(out.len());
        out.retain(|row| {
            let mut key = Vec::new();
            row.iter().for_each(|v| value::group_key(v, &mut key));
            seen.insert(key)
        });
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
    run.locked.settle_table(run.transaction, &join.table)?;
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
        needed: Some(&join.needed),
        limit: None,
        order: None,
        commit: Commit::No,
    };
    let Fetched { rows, fetched } = access::fetch(&request, run.transaction, run.environment)?;
    run.counts.fetched += fetched;
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
    let mut slot_of: std::collections::HashMap<Vec<u8>, usize> = Default::default();
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
                .read_if_exists(&table.table, key, plan.lock)
                .map_err(refused)?,
        );
    }
    if !ops.is_empty() {
        run.transaction.execute(Commit::No).map_err(refused)?;
    }
    let rows: Vec<Option<Vec<Value>>> = ops
        .into_iter()
        .map(|op| {
            run.transaction
                .get(op)
                .map(|row| access::load_row(table, row.values().to_vec(), zone))
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
    let request = Request {
        table: plan.table.as_ref().expect("a table scan has a table"),
        access: &plan.access,
        filter: plan.filter.as_ref(),
        params: run.params,
        lock: plan.lock,
        needed: None,
        limit: None,
        order: None,
        commit: run.commit,
    };
    access::count(&request, run.transaction, run.environment)
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
        let keys = plan
            .order_by
            .iter()
            .map(|(e, _)| e.eval(&inputs, run.environment))
            .collect::<SqlResult<Vec<_>>>()?;
        keyed.push((keys, index));
    }
    let compare = |a: &(Vec<Value>, usize), b: &(Vec<Value>, usize)| -> Ordering {
        for ((x, y), (_, descending)) in a.0.iter().zip(&b.0).zip(&plan.order_by) {
            let ordering = value::order(x, y);
            let ordering = if *descending {
                ordering.reverse()
            } else {
                ordering
            };
            if ordering != Ordering::Equal {
                return ordering;
            }
        }
        a.1.cmp(&b.1)
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

/// One aggregate's running state over a group's rows.
struct Accumulator {
    count: i64,
    /// Exact while every value is an integer or a DECIMAL (SUM and AVG
    /// are then DECIMALs, as MySQL's), else a double.
    exact_sum: Option<Decimal>,
    double_sum: f64,
    best: Option<Value>,
    /// The values seen, for DISTINCT.
    seen: HashSet<Vec<u8>>,
}

impl Accumulator {
    fn new() -> Accumulator {
        Accumulator {
            count: 0,
            exact_sum: Decimal::from_integer(0),
            double_sum: 0.0,
            best: None,
            seen: HashSet::new(),
        }
    }

    /// Takes one row's value of the aggregate's argument.
    fn add(&mut self, aggregate: &Aggregate, value: Value) {
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
        }
    }
}

/// `rows` in groups by GROUP BY's values, in the order each group was
/// first met: each group's first row and its aggregates' results.
/// Without GROUP BY the rows are one group, even when there are none
/// (`SELECT COUNT(*)` of no rows is one row, 0).
fn group(plan: &SelectPlan, rows: Vec<Vec<Value>>, run: &Run<'_>) -> SqlResult<Grouped> {
    let mut groups: Vec<(Vec<Value>, Vec<Accumulator>)> = Vec::new();
    let mut index_of: std::collections::HashMap<Vec<u8>, usize> = Default::default();
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
            accumulator.add(aggregate, value);
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

/// Runs an INSERT (or REPLACE, INSERT IGNORE, ON DUPLICATE KEY UPDATE,
/// INSERT ... SELECT).
pub fn insert(
    plan: &InsertPlan,
    run: &mut Run<'_>,
    auto_increment: &AutoIncrement,
) -> SqlResult<Response> {
    let table = &plan.table;
    let cluster = run.transaction.cluster();
    let width = table.columns.len();
    let mut rows: Vec<Vec<Option<Value>>> = Vec::with_capacity(plan.rows.len());
    match &plan.select {
        Some(select_plan) => {
            // The query runs in the statement's transaction; the inserts
            // commit it.
            let mut query = Run {
                transaction: run.transaction,
                commit: Commit::No,
                params: run.params,
                environment: run.environment,
                counts: run.counts,
                locked: run.locked,
            };
            let Response::Rows { rows: selected, .. } = select(select_plan, &mut query)? else {
                unreachable!("a SELECT answers rows")
            };
            for values in selected {
                let mut row: Vec<Option<Value>> = vec![None; width];
                for (target, value) in plan.targets.iter().zip(values) {
                    row[*target] = Some(value);
                }
                rows.push(row);
            }
        }
        None => {
            let inputs = Inputs {
                row: &[],
                aggregates: &[],
                params: run.params,
            };
            for exprs in &plan.rows {
                let mut row: Vec<Option<Value>> = vec![None; width];
                for (target, expr) in plan.targets.iter().zip(exprs) {
                    if let Some(expr) = expr {
                        row[*target] = Some(expr.eval(&inputs, run.environment)?);
                    }
                }
                rows.push(row);
            }
        }
    }
    // AUTO_INCREMENT: NULL, 0 or no value generates one; an explicit one
    // moves the counter past it.
    let mut first_generated = 0;
    if let Some(column) = table.auto_increment {
        let generate = |value: &Option<Value>| match value {
            None | Some(Value::Null) => true,
            Some(value) => value.as_i64() == Some(0) || value::to_f64(value) == 0.0,
        };
        let wanted = rows.iter().filter(|row| generate(&row[column])).count();
        let mut highest_explicit = None;
        for row in &rows {
            if let Some(value) = &row[column] {
                if !generate(&row[column]) {
                    let fitted = fit_column(table, column, value)?;
                    if let Some(x) = fitted.as_u64() {
                        highest_explicit = highest_explicit.max(Some(x));
                    }
                }
            }
        }
        if let Some(highest) = highest_explicit {
            auto_increment.note_explicit(cluster, table, highest)?;
        }
        if wanted > 0 {
            let values = auto_increment.take(cluster, table, wanted)?;
            first_generated = values[0];
            let mut values = values.into_iter();
            for row in &mut rows {
                if generate(&row[column]) {
                    row[column] = Some(Value::UInt(values.next().expect("one value per row")));
                }
            }
        }
    }
    // Every column's value: given, or its DEFAULT, fitted to its type.
    let mut full: Vec<Vec<Value>> = Vec::with_capacity(rows.len());
    for row in rows {
        let mut values = Vec::with_capacity(width);
        for (index, given) in row.into_iter().enumerate() {
            let column = &table.columns[index];
            let value = match given {
                Some(value) => value,
                None => match &column.default {
                    Some(default) => default.clone(),
                    None if column.nullable => Value::Null,
                    None => {
                        return Err(SqlError::new(
                            codes::NO_DEFAULT_FOR_FIELD,
                            format!("Field '{}' doesn't have a default value", column.name),
                        ))
                    }
                },
            };
            values.push(fit_column(table, index, &value)?);
        }
        full.push(values);
    }
    let count = full.len();
    // With transaction_allow_batching, a plain INSERT inside a transaction
    // goes with the next round trip, as NDB's SQL node batches it: a
    // duplicate key then fails that statement or the COMMIT, rolling the
    // transaction back (design 0034).
    let unique = has_unique_index(table);
    let mut waits = matches!(plan.conflict, Conflict::Error)
        && !unique
        && run.commit == Commit::No
        && count <= WRITE_BATCH
        && run.environment.batches_inserts();
    let (affected, matched) = match &plan.conflict {
        Conflict::Error => {
            let zone = run.environment.zone_offset();
            for (number, row) in full.iter().enumerate() {
                // A row whose write waits (a deleted key) goes first; with
                // a unique index, any of the table's waiting writes. Once
                // a key of this statement had a write waiting (a row
                // deleted, or a key repeated in the statement), the
                // statement runs its rows at once, so that a duplicate
                // among them fails it and not a later one.
                let key = key_of(table, row, zone);
                match unique {
                    true => run.locked.settle_table(run.transaction, table)?,
                    false => {
                        if run.locked.settle_key(run.transaction, table, &key)? {
                            waits = false;
                        }
                    }
                }
                let values = stored_columns(table, row, 0..width, zone);
                run.transaction
                    .insert(&table.table, &values)
                    .map_err(|error| SqlError::from_client(&error, &table.cluster_name()))?;
                if waits {
                    run.locked.defer(run.transaction, table, &key);
                    // Writes wait a batch at most: a transaction of many
                    // INSERTs and no reads sends them as it goes.
                    if run.transaction.pending_operations() >= WRITE_BATCH {
                        check_interrupt(run)?;
                        flush(run.transaction, Commit::No, table)?;
                    }
                }
                if (number + 1) % WRITE_BATCH == 0 && number + 1 < count {
                    check_interrupt(run)?;
                    flush(run.transaction, Commit::No, table)?;
                }
            }
            (count as u64, count as u64)
        }
        conflict => {
            // The rows in the way are read: the waiting writes go first.
            run.locked.settle_table(run.transaction, table)?;
            let mut affected = 0;
            let mut matched = 0;
            for chunk in full.chunks(WRITE_BATCH) {
                check_interrupt(run)?;
                let (a, m) = upsert(table, chunk, conflict, run)?;
                affected += a;
                matched += m;
            }
            (affected, matched)
        }
    };
    if !waits {
        flush(run.transaction, run.commit, table)?;
    }
    let skipped = count as u64 - matched.min(count as u64);
    Ok(Response::Ok {
        affected_rows: affected,
        matched_rows: matched,
        last_insert_id: first_generated,
        info: match count {
            1 => String::new(),
            _ => format!(
                "Records: {count}  Duplicates: {}  Warnings: 0",
                match plan.conflict {
                    Conflict::Ignore => skipped,
                    _ => affected.saturating_sub(count as u64),
                }
            ),
        },
    })
}

/// Whether `table` has a unique secondary index: writes of two rows can
/// then meet in it, so they must not share a round trip in which the
/// cluster may run them in either order.
fn has_unique_index(table: &SqlTable) -> bool {
    table
        .def()
        .indexes
        .iter()
        .any(|index| index.unique.is_some())
}

/// Executes what is queued when `table` has unique indexes: a delete
/// that must be done before an insert of the same unique values (a
/// batch's operations on different rows run in any order, and the
/// insert's unique index row would meet the deleted row's).
fn flush_if_unique(run: &mut Run<'_>, table: &SqlTable) -> SqlResult<()> {
    if has_unique_index(table) {
        flush(run.transaction, Commit::No, table)?;
    }
    Ok(())
}

/// A row of `table` as it stands for an upsert: read before the
/// statement, or as the statement left it.
struct Known {
    row: Option<Vec<Value>>,
}

/// Inserts `rows` (fitted, complete) into `table`, each meeting an
/// existing key as `conflict` says; returns (affected, matched) rows as
/// MySQL counts them: an insert 1, a REPLACE 1 plus the rows it deleted,
/// an update 2 (1 matched when it changed nothing), a skipped row 0.
///
/// Every existing row the new rows' keys name, by primary key and by
/// each unique index, is read first with an exclusive lock, all in one
/// round trip; the rows are then decided in order, each seeing what the
/// ones before it did (docs/design/0030-upserts.md). A row another
/// transaction inserts meanwhile makes the insert fail with 1062, which
/// an autocommit statement retries.
fn upsert(
    table: &Arc<SqlTable>,
    rows: &[Vec<Value>],
    conflict: &Conflict,
    run: &mut Run<'_>,
) -> SqlResult<(u64, u64)> {
    let refused = |error: ClientError| SqlError::from_client(&error, &table.cluster_name());
    let zone = run.environment.zone_offset();
    let width = table.columns.len();
    let unique: Vec<(String, Vec<usize>)> = table
        .def()
        .indexes
        .iter()
        .filter(|index| index.unique.is_some())
        .map(|index| {
            let columns = index.columns.iter().map(|c| *c as usize).collect();
            (index.name.clone(), columns)
        })
        .collect();
    // Read what every row's keys name.
    let mut by_key: Vec<client::OpId> = Vec::with_capacity(rows.len());
    let mut by_unique: Vec<Vec<Option<client::OpId>>> = Vec::with_capacity(rows.len());
    for row in rows {
        let key = key_of(table, row, zone);
        by_key.push(
            run.transaction
                .read_if_exists(&table.table, &key, LockMode::Exclusive)
                .map_err(refused)?,
        );
        let mut reads = Vec::with_capacity(unique.len());
        for (name, columns) in &unique {
            // A NULL never conflicts in a unique index.
            if columns.iter().any(|c| row[*c].is_null()) {
                reads.push(None);
                continue;
            }
            let values: Vec<client::Value> = columns
                .iter()
                .map(|c| types::store(&row[*c], &table.columns[*c].sql_type, zone))
                .collect();
            reads.push(Some(
                run.transaction
                    .read_unique(&table.table, name, &values, LockMode::Exclusive)
                    .map_err(refused)?,
            ));
        }
        by_unique.push(reads);
    }
    flush(run.transaction, Commit::No, table)?;
    // What each key holds now: read, then as this statement changed it.
    let mut known: std::collections::HashMap<Vec<u8>, Known> = Default::default();
    // Keys as the cluster compares them (`types::canonical_key_value`).
    let key_bytes = |row: &[Value]| {
        let key: Vec<client::Value> = table
            .key_columns()
            .into_iter()
            .map(|c| stored_canonical(table, c, &row[c], zone))
            .collect();
        access::encode_stored_key(&key)
    };
    for (handle, reads) in by_key.iter().zip(&by_unique) {
        for handle in std::iter::once(Some(handle)).chain(reads.iter().map(Option::as_ref)) {
            let Some(handle) = handle else { continue };
            if let Some(found) = run.transaction.get(*handle) {
                let row = access::load_row(table, found.values().to_vec(), zone);
                known
                    .entry(key_bytes(&row))
                    .or_insert(Known { row: Some(row) });
            }
        }
    }
    for row in rows {
        known.entry(key_bytes(row)).or_insert(Known { row: None });
    }
    // The existing row that `row`'s primary key or a unique value names.
    let conflicts = |known: &std::collections::HashMap<Vec<u8>, Known>, row: &[Value]| {
        let mut found: Vec<Vec<Value>> = Vec::new();
        if let Some(Known {
            row: Some(existing),
        }) = known.get(&key_bytes(row))
        {
            found.push(existing.clone());
        }
        for (_, columns) in &unique {
            if columns.iter().any(|c| row[*c].is_null()) {
                continue;
            }
            for entry in known.values() {
                let Some(existing) = &entry.row else { continue };
                let same = columns.iter().all(|c| {
                    stored_canonical(table, *c, &existing[*c], zone)
                        == stored_canonical(table, *c, &row[*c], zone)
                });
                if same
                    && !found
                        .iter()
                        .any(|f| key_of(table, f, zone) == key_of(table, existing, zone))
                {
                    found.push(existing.clone());
                }
            }
        }
        found
    };
    let mut touched: HashSet<Vec<u8>> = HashSet::new();
    let mut affected = 0u64;
    let mut matched = 0u64;
    for row in rows {
        let key = key_bytes(row);
        let in_the_way = conflicts(&known, row);
        // A key this statement already wrote: what is queued goes first,
        // so the operations on it run in order.
        let again = std::iter::once(&key)
            .chain(&in_the_way.iter().map(|r| key_bytes(r)).collect::<Vec<_>>())
            .any(|k| touched.contains(k));
        if again {
            flush(run.transaction, Commit::No, table)?;
            touched.clear();
        }
        match conflict {
            _ if in_the_way.is_empty() => {
                let values = stored_columns(table, row, 0..width, zone);
                run.transaction
                    .insert(&table.table, &values)
                    .map_err(refused)?;
                known.insert(
                    key.clone(),
                    Known {
                        row: Some(row.clone()),
                    },
                );
                touched.insert(key);
                affected += 1;
                matched += 1;
            }
            Conflict::Ignore => {}
            Conflict::Replace => {
                let mut replaced_in_place = false;
                for existing in &in_the_way {
                    let existing_key = key_bytes(existing);
                    if existing_key == key {
                        replaced_in_place = true;
                        continue;
                    }
                    run.transaction
                        .delete(&table.table, &key_of(table, existing, zone))
                        .map_err(refused)?;
                    known.insert(existing_key.clone(), Known { row: None });
                    touched.insert(existing_key);
                }
                if in_the_way.len() > usize::from(replaced_in_place) {
                    // The rows in the way hold the new row's unique values:
                    // their deletes must be done before it is written (a
                    // batch's operations on different rows run in any order).
                    flush(run.transaction, Commit::No, table)?;
                    touched.clear();
                }
                let values = stored_columns(table, row, 0..width, zone);
                match replaced_in_place {
                    true => run.transaction.write(&table.table, &values),
                    false => run.transaction.insert(&table.table, &values),
                }
                .map_err(refused)?;
                known.insert(
                    key.clone(),
                    Known {
                        row: Some(row.clone()),
                    },
                );
                touched.insert(key);
                let deleted = in_the_way.len() as u64;
                affected += 1 + deleted;
                matched += 1 + deleted;
            }
            Conflict::Update(assignments) => {
                let existing = &in_the_way[0];
                let mut new = existing.clone();
                for (column, expr) in assignments {
                    // Each assignment sees the ones before it; VALUES(c)
                    // reads the row that was to be inserted.
                    let mut both = new.clone();
                    both.extend_from_slice(row);
                    let inputs = Inputs {
                        row: &both,
                        aggregates: &[],
                        params: run.params,
                    };
                    let value = expr.eval(&inputs, run.environment)?;
                    new[*column] = fit_column(table, *column, &value)?;
                }
                let changed: Vec<usize> = (0..width).filter(|i| existing[*i] != new[*i]).collect();
                let existing_key = key_bytes(existing);
                if changed.is_empty() {
                    matched += 1;
                    continue;
                }
                let key_changed = changed.iter().any(|c| table.key_columns().contains(c));
                if key_changed {
                    run.transaction
                        .delete(&table.table, &key_of(table, existing, zone))
                        .map_err(refused)?;
                    // The new row may keep the old one's unique values.
                    flush_if_unique(run, table)?;
                    touched.clear();
                    let values = stored_columns(table, &new, 0..width, zone);
                    run.transaction
                        .insert(&table.table, &values)
                        .map_err(refused)?;
                    known.insert(existing_key.clone(), Known { row: None });
                    touched.insert(existing_key);
                    let new_key = key_bytes(&new);
                    known.insert(new_key.clone(), Known { row: Some(new) });
                    touched.insert(new_key);
                } else {
                    let set = stored_columns(table, &new, changed.into_iter(), zone);
                    run.transaction
                        .update(&table.table, &key_of(table, existing, zone), &set)
                        .map_err(refused)?;
                    known.insert(existing_key.clone(), Known { row: Some(new) });
                    touched.insert(existing_key);
                }
                affected += 2;
                matched += 2;
            }
            Conflict::Error => unreachable!("plain inserts do not come here"),
        }
    }
    // What is queued goes before the next chunk reads: a row it inserts
    // must be seen there.
    flush(run.transaction, Commit::No, table)?;
    Ok((affected, matched))
}

/// Column `column`'s `value` as the cluster stores and compares it in a
/// key (`types::canonical_key_value`).
fn stored_canonical(table: &SqlTable, column: usize, value: &Value, zone: i64) -> client::Value {
    let sql_type = &table.columns[column].sql_type;
    types::canonical_key_value(types::store(value, sql_type, zone), sql_type)
}

/// The rows an UPDATE or DELETE writes, and whether they are the one row
/// its key names as the transaction holds it locked (unread:
/// `locked_rows`).
fn rows_to_write(plan: &WritePlan, run: &mut Run<'_>) -> SqlResult<(Vec<Vec<Value>>, bool)> {
    let table = &plan.table;
    if let Some(key) = settle(table, &plan.access, run)? {
        let zone = run.environment.zone_offset();
        if let Some(row) = run.locked.get(run.transaction, zone, table, &key) {
            run.counts.locked_rows_reused += 1;
            let rows = match passes(plan.filter.as_ref(), &row, run)? {
                true if plan.limit != Some(0) => vec![row],
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
        needed: None,
        limit: None,
        order: None,
        commit: Commit::No,
    };
    let Fetched { rows, fetched } = access::fetch(&request, run.transaction, run.environment)?;
    run.counts.fetched += fetched;
    check_interrupt(run)?;
    let mut kept = Vec::with_capacity(rows.len());
    for row in rows {
        if plan.limit.is_some_and(|limit| kept.len() as u64 >= limit) {
            break;
        }
        if passes(plan.filter.as_ref(), &row, run)? {
            kept.push(row);
        }
    }
    Ok((kept, false))
}

/// Sends the writes waiting in the transaction (`locked_rows`) that the
/// coming fetch of `table` by `access` could meet: those of the row its
/// key names, or of any row of the table for any other access (and for a
/// key whose value may change between evaluations, as `RAND()`'s: the
/// fetch evaluates it again). The key, when it names one row and is
/// settled alone.
fn settle(
    table: &SqlTable,
    access: &crate::plan::AccessPlan,
    run: &mut Run<'_>,
) -> SqlResult<Option<Vec<client::Value>>> {
    if let crate::plan::AccessPlan::PrimaryKey(exprs) = access {
        if exprs
            .iter()
            .all(|expr| matches!(expr, Expr::Literal(_) | Expr::Param(_)))
        {
            let key = access::lookup_key(
                table,
                &table.key_columns(),
                exprs,
                run.params,
                run.environment,
            )?;
            match key {
                Ok(Some(key)) => {
                    run.locked.settle_key(run.transaction, table, &key)?;
                    return Ok(Some(key));
                }
                Ok(None) => return Ok(None),
                Err(()) => {}
            }
        }
    }
    run.locked.settle_table(run.transaction, table)?;
    Ok(None)
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

/// Runs `body` with `subqueries` answered by the run's environment.
fn with_subqueries(
    subqueries: &[SubqueryPlan],
    run: &mut Run<'_>,
    body: impl FnOnce(&mut Run<'_>) -> SqlResult<Response>,
) -> SqlResult<Response> {
    if subqueries.is_empty() {
        return body(run);
    }
    let cluster = run.transaction.cluster();
    let environment = WithSubqueries::new(run.environment, subqueries, cluster);
    let mut inner = Run {
        transaction: run.transaction,
        commit: run.commit,
        params: run.params,
        environment: &environment,
        counts: run.counts,
        locked: run.locked,
    };
    body(&mut inner)
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
    for (number, old) in rows.iter().enumerate() {
        matched += 1;
        let mut new = old.clone();
        for (column, expr) in &plan.assignments {
            // Each assignment sees the ones before it (MySQL's order).
            let inputs = Inputs {
                row: &new,
                aggregates: &[],
                params: run.params,
            };
            let value = expr.eval(&inputs, run.environment)?;
            new[*column] = fit_column(table, *column, &value)?;
        }
        // Fitted to the column, a new value has the old one's form: equal
        // values are equal Values (as MySQL, an unchanged row is matched,
        // not changed).
        let differs = |i: usize| old[i] != new[i];
        let changed_columns: Vec<usize> = (0..new.len()).filter(|i| differs(*i)).collect();
        let old_key = key_of(table, old, zone);
        if changed_columns.is_empty() {
            // Read with an exclusive lock (or remembered so): held.
            run.locked
                .remember(run.transaction, zone, table, &old_key, old);
            continue;
        }
        changed += 1;
        if changed_columns.iter().any(|c| key_columns.contains(c)) {
            // A new primary key is a new row: delete, then insert.
            deferrable = false;
            run.locked.forget(table, &old_key);
            run.transaction
                .delete(&table.table, &old_key)
                .map_err(refused)?;
            // The new row may keep the old one's unique values.
            flush_if_unique(run, table)?;
            // Nor may it share a batch with a waiting write of its key.
            run.locked
                .settle_key(run.transaction, table, &key_of(table, &new, zone))?;
            let values = stored_columns(table, &new, 0..new.len(), zone);
            run.transaction
                .insert(&table.table, &values)
                .map_err(refused)?;
        } else {
            let set = stored_columns(table, &new, changed_columns.iter().copied(), zone);
            run.transaction
                .update(&table.table, &old_key, &set)
                .map_err(refused)?;
            // The row as this transaction leaves it (should the update
            // fail, the transaction ends and the image with it).
            run.locked
                .remember(run.transaction, zone, table, &old_key, &new);
            if deferrable {
                run.locked.defer(run.transaction, table, &old_key);
            }
        }
        if (number + 1) % WRITE_BATCH == 0 {
            check_interrupt(run)?;
            flush(run.transaction, Commit::No, table)?;
        }
    }
    if !deferrable {
        flush(run.transaction, run.commit, table)?;
    }
    Ok(Response::Ok {
        affected_rows: changed,
        matched_rows: matched,
        last_insert_id: 0,
        info: format!("Rows matched: {matched}  Changed: {changed}  Warnings: 0"),
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
    if run.commit != Commit::Yes || run.transaction.state() != TransactionState::Idle {
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
        .increment(&table.table, &key, &deltas)
        .map_err(refused)?;
    let changed = match run.transaction.execute(Commit::Yes) {
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
            *run.transaction = run.transaction.cluster().transaction();
            return Ok(None);
        }
        Err(error) => return Err(refused(error)),
    };
    Ok(Some(Response::Ok {
        affected_rows: changed,
        matched_rows: changed,
        last_insert_id: 0,
        info: format!("Rows matched: {changed}  Changed: {changed}  Warnings: 0"),
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
        if deferrable {
            run.locked.defer(run.transaction, table, &key);
        }
        run.transaction
            .delete(&table.table, &key)
            .map_err(|error| SqlError::from_client(&error, &table.cluster_name()))?;
        if (number + 1) % WRITE_BATCH == 0 {
            check_interrupt(run)?;
            flush(run.transaction, Commit::No, table)?;
        }
    }
    if !deferrable {
        flush(run.transaction, run.commit, table)?;
    }
    Ok(Response::affected(rows.len() as u64))
}
