//! Reaching a plan's rows once its parameters are known: key lookups in
//! one batch, unique lookups, range and full scans with the part of the
//! WHERE clause the data nodes can evaluate pushed to them as a filter,
//! only the columns the statement reads, and locks when asked
//! (FOR UPDATE, FOR SHARE, UPDATE and DELETE).
//!
//! Bounds and keys must be values of the column's type that compare as
//! the column's values do: `id = '5'` looks up 5, `id = 5.5` finds no row,
//! and a text column compared with a number (which MySQL compares as
//! doubles) cannot use its index: the access falls back to a full scan
//! and the WHERE check in the SQL node decides.

use crate::catalog::SqlColumn;
use crate::catalog::SqlTable;
use crate::error::{SqlError, SqlResult};
use crate::expr::{Environment, Expr, Inputs};
use crate::plan::{flip, split_and, AccessPlan, IndexRange};
use crate::types::{self, SqlType};
use crate::value;
use crate::value::Value;
use client::{
    Access, ClientError, Commit, CompareOp, Filter, KeyRange, LockMode, LockWait, ScanOptions,
    Transaction,
};
use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;

/// Rows fetched, with what it cost.
#[derive(Debug, Default)]
pub struct Fetched {
    /// The rows (every column; those not asked for are NULL).
    pub rows: Vec<Vec<Value>>,
    /// Rows the data nodes sent.
    pub fetched: u64,
    /// The row was read at its primary's data node, outside the
    /// transaction (`read_at_primary`).
    pub at_primary: bool,
}

impl Fetched {
    /// `rows`, read in the statement's transaction.
    fn of(rows: Vec<Vec<Value>>) -> Fetched {
        Fetched {
            fetched: rows.len() as u64,
            rows,
            at_primary: false,
        }
    }
}

/// What to fetch and how.
pub struct Request<'a> {
    /// The table.
    pub table: &'a Arc<SqlTable>,
    /// The access path.
    pub access: &'a AccessPlan,
    /// The WHERE clause (pushed where it can be; checked by the caller).
    pub filter: Option<&'a Expr>,
    /// Parameters by slot.
    pub params: &'a [Value],
    /// The lock to take on each row.
    pub lock: LockMode,
    /// What a row another transaction holds locked does to a locking
    /// read (NOWAIT, SKIP LOCKED).
    pub wait: LockWait,
    /// The columns needed (None: all).
    pub needed: Option<&'a [usize]>,
    /// Stop after this many rows, when the whole WHERE clause was pushed
    /// (the caller passes it only when no row can be dropped afterwards).
    pub limit: Option<u64>,
    /// Read a scan in its index's order, descending with `Some(true)`
    /// (the plan's `scan_order`), so that `limit` keeps the first rows of
    /// that order; `None`: in any order.
    pub order: Option<bool>,
    /// How the lookup batch executes: `Commit::Yes` when the statement
    /// ends with it (an autocommit read).
    pub commit: Commit,
}

/// A key value as a lookup can use it.
enum KeyValue {
    /// This value of the column's type, as the cluster stores it.
    Key(client::Value),
    /// No row can hold it (NULL, or a number no integer column holds).
    NoMatch,
    /// It compares with the column in a way a lookup cannot follow.
    Unusable,
}

fn key_value(value: &Value, column: &SqlColumn, zone: i64) -> KeyValue {
    let sql_type = &column.sql_type;
    if value.is_null() {
        return KeyValue::NoMatch;
    }
    if let Some(exact) = value::fit_exactly(value, sql_type) {
        return KeyValue::Key(types::store(&exact, sql_type, zone));
    }
    let numeric_column = sql_type.is_integer();
    match (value, numeric_column) {
        // A string or double against an integer column compares as a
        // double: only an integral one can match.
        (Value::Bytes(_) | Value::Double(_) | Value::Decimal(_), true) => {
            let x = value::to_f64(value);
            if x != x.trunc() {
                return KeyValue::NoMatch;
            }
            match value::fit_exactly(&Value::Double(x), sql_type) {
                Some(key) => KeyValue::Key(types::store(&key, sql_type, zone)),
                None => KeyValue::NoMatch,
            }
        }
        // Out of an integer column's range.
        (Value::Int(_) | Value::UInt(_), true) => KeyValue::NoMatch,
        _ => KeyValue::Unusable,
    }
}

fn eval_constant(expr: &Expr, params: &[Value], environment: &dyn Environment) -> SqlResult<Value> {
    let inputs = Inputs {
        row: &[],
        aggregates: &[],
        params,
    };
    expr.eval(&inputs, environment)
}

/// A key of `columns` from `exprs`, as the cluster stores it: `Ok(None)`
/// when no row can match, `Err(())` when a lookup cannot be used.
pub(crate) fn lookup_key(
    table: &SqlTable,
    columns: &[usize],
    exprs: &[Expr],
    params: &[Value],
    environment: &dyn Environment,
) -> SqlResult<Result<Option<Vec<client::Value>>, ()>> {
    let mut key = Vec::with_capacity(exprs.len());
    let zone = environment.zone_offset();
    for (column, expr) in columns.iter().zip(exprs) {
        let value = eval_constant(expr, params, environment)?;
        match key_value(&value, &table.columns[*column], zone) {
            KeyValue::Key(value) => key.push(value),
            KeyValue::NoMatch => return Ok(Ok(None)),
            KeyValue::Unusable => return Ok(Err(())),
        }
    }
    Ok(Ok(Some(key)))
}

/// Fetches the rows `request` names, in `transaction`.
pub fn fetch(
    request: &Request<'_>,
    transaction: &mut Transaction<'static>,
    environment: &dyn Environment,
) -> SqlResult<Fetched> {
    let table = request.table;
    if let Some(view) = table.view {
        // Made by the SQL node: every row, which the WHERE check narrows.
        finish_empty(transaction, request.commit, table)?;
        let rows = environment.view_rows(view, request.needed)?;
        return Ok(Fetched::of(rows));
    }
    if let Some(slot) = table.derived {
        // A derived table: its subquery's rows (run once per statement),
        // which the WHERE check narrows.
        let rows = environment.subquery_rows(slot, &[], request.params)?;
        finish_empty(transaction, request.commit, table)?;
        return Ok(Fetched::of(rows.as_ref().clone()));
    }
    // The name only when an error needs it: not formatted per statement.
    let refused = |error: ClientError| SqlError::from_client(&error, &table.cluster_name());
    let key_columns = table.key_columns();
    let zone = environment.zone_offset();
    let lookups = |keys: Vec<Vec<client::Value>>,
                   transaction: &mut Transaction<'static>|
     -> SqlResult<Fetched> {
        let mut ops = Vec::with_capacity(keys.len());
        for key in &keys {
            ops.push(
                transaction
                    .read_locking(&table.table, key, request.lock, request.wait)
                    .map_err(refused)?,
            );
        }
        transaction.execute(request.commit).map_err(refused)?;
        let rows: Vec<Vec<Value>> = ops
            .into_iter()
            .filter_map(|op| transaction.get(op).map(|row| load_row(table, row, zone)))
            .collect();
        Ok(Fetched::of(rows))
    };
    match request.access {
        AccessPlan::NoTable => Ok(Fetched::default()),
        AccessPlan::PrimaryKey(exprs) => {
            match lookup_key(table, &key_columns, exprs, request.params, environment)? {
                Ok(Some(key)) if request.lock == LockMode::CommittedRead => {
                    match environment.read_ahead(&table.table, &key) {
                        Some(row) => {
                            finish_empty(transaction, request.commit, table)?;
                            let rows: Vec<Vec<Value>> = row.into_iter().collect();
                            Ok(Fetched::of(rows))
                        }
                        None => match read_at_primary(request, &key, transaction, zone)? {
                            Some(fetched) => Ok(fetched),
                            None => lookups(vec![key], transaction),
                        },
                    }
                }
                Ok(Some(key)) => lookups(vec![key], transaction),
                Ok(None) => finish_empty(transaction, request.commit, table),
                Err(()) => scan(request, &AccessPlan::FullScan, transaction, environment),
            }
        }
        AccessPlan::PrimaryKeys(list) => {
            let mut keys = Vec::with_capacity(list.len());
            for exprs in list {
                match lookup_key(table, &key_columns, exprs, request.params, environment)? {
                    Ok(Some(key)) => keys.push(key),
                    Ok(None) => {}
                    Err(()) => {
                        return scan(request, &AccessPlan::FullScan, transaction, environment)
                    }
                }
            }
            // The same key twice is one row (IN (1, 1), or IN ('a', 'a ')
            // of a PAD SPACE column): keys compared as the cluster does.
            let canonical = |key: &[client::Value]| -> Vec<client::Value> {
                key.iter()
                    .zip(&key_columns)
                    .map(|(value, &column)| {
                        types::canonical_key_value(value.clone(), &table.columns[column].sql_type)
                    })
                    .collect()
            };
            let mut unique: Vec<Vec<client::Value>> = Vec::with_capacity(keys.len());
            let mut seen: Vec<Vec<client::Value>> = Vec::with_capacity(keys.len());
            for key in keys {
                let canonical = canonical(&key);
                if !seen.contains(&canonical) {
                    seen.push(canonical);
                    unique.push(key);
                }
            }
            if unique.is_empty() {
                return finish_empty(transaction, request.commit, table);
            }
            lookups(unique, transaction)
        }
        AccessPlan::UniqueKey { index, values } => {
            let Some(definition) = table.def().index(index) else {
                return scan(request, &AccessPlan::FullScan, transaction, environment);
            };
            let columns: Vec<usize> = definition.columns.iter().map(|c| *c as usize).collect();
            match lookup_key(table, &columns, values, request.params, environment)? {
                Ok(Some(key)) => {
                    let op = transaction
                        .read_unique(&table.table, index, &key, request.lock)
                        .map_err(refused)?;
                    transaction.execute(request.commit).map_err(refused)?;
                    let rows: Vec<Vec<Value>> = transaction
                        .get(op)
                        .map(|row| load_row(table, row, zone))
                        .into_iter()
                        .collect();
                    Ok(Fetched::of(rows))
                }
                Ok(None) => finish_empty(transaction, request.commit, table),
                Err(()) => scan(request, &AccessPlan::FullScan, transaction, environment),
            }
        }
        AccessPlan::Ranges { .. } | AccessPlan::FullScan => {
            scan(request, request.access, transaction, environment)
        }
    }
}

/// A stored key as bytes, equal when the values are (for finding equal
/// keys in a batch). Keys the cluster takes as equal may still differ
/// here ('a' and 'a ' of a PAD SPACE column, -0 and 0): they then cost a
/// lookup each, never a wrong row.
pub(crate) fn encode_stored_key(key: &[client::Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for value in key {
        match value {
            client::Value::Null => out.push(0),
            client::Value::Int(x) => {
                out.push(1);
                out.extend_from_slice(&x.to_le_bytes());
            }
            client::Value::UInt(x) => {
                out.push(2);
                out.extend_from_slice(&x.to_le_bytes());
            }
            client::Value::Double(x) => {
                out.push(3);
                out.extend_from_slice(&x.to_bits().to_le_bytes());
            }
            client::Value::Bytes(bytes) => {
                out.push(4);
                out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
                out.extend_from_slice(bytes);
            }
        }
    }
    out
}

/// A row as the cluster returned it, in SQL values (`types::load`),
/// each decoded straight from the row data.
pub(crate) fn load_row(table: &SqlTable, row: &client::Row, zone: i64) -> Vec<Value> {
    table
        .columns
        .iter()
        .enumerate()
        .map(|(index, column)| types::load(row.decode_value(index), &column.sql_type, zone))
        .collect()
}

/// A committed read of one key, in a transaction whose tc runs on
/// another data node than the key's primary replica, made by a
/// transaction of its own on the primary's node: the tc then reaches the
/// row on its own node, two messages instead of four (the transaction's
/// tc would send the read across to the primary's node and take its
/// answer back). Only while the transaction has written nothing to the
/// table, so no change of its own can be missed; both reads see the
/// latest committed row, as READ COMMITTED asks. The transaction may be
/// the user's or a statement's own (a join's inner lookups in
/// autocommit): it goes on either way. `None`: the read is made in the
/// transaction (docs/design/0034-fewer-round-trips.md §8).
fn read_at_primary(
    request: &Request<'_>,
    key: &[client::Value],
    transaction: &Transaction<'static>,
    zone: i64,
) -> SqlResult<Option<Fetched>> {
    let table = request.table;
    if request.commit != Commit::No || transaction.has_written(&table.table) {
        return Ok(None);
    }
    let refused = |error: ClientError| SqlError::from_client(&error, &table.cluster_name());
    // Placed by the key (its hash taken once, here): on the
    // transaction's own node, it is dropped unused, having sent nothing.
    let mut own = (transaction.cluster())
        .transaction_with_hint(&table.table, key)
        .map_err(refused)?;
    if own.node() == transaction.node() {
        return Ok(None);
    }
    let op = own
        .read_if_exists(&table.table, key, LockMode::CommittedRead)
        .map_err(refused)?;
    own.execute(Commit::Yes).map_err(refused)?;
    let rows: Vec<Vec<Value>> = own
        .get(op)
        .map(|row| load_row(table, row, zone))
        .into_iter()
        .collect();
    Ok(Some(Fetched {
        at_primary: true,
        ..Fetched::of(rows)
    }))
}

/// Ends the statement's round of `transaction` when no row needs fetching.
fn finish_empty(
    transaction: &mut Transaction<'static>,
    commit: Commit,
    table: &SqlTable,
) -> SqlResult<Fetched> {
    if commit != Commit::No {
        transaction
            .execute(commit)
            .map_err(|error| SqlError::from_client(&error, &table.cluster_name()))?;
    }
    Ok(Fetched::default())
}

/// The key ranges of `ranges` over `columns`: `Ok(None)` when no row can
/// be in any; `Err(())` when a bound cannot be used.
fn key_ranges(
    table: &SqlTable,
    columns: &[usize],
    ranges: &[IndexRange],
    params: &[Value],
    environment: &dyn Environment,
) -> SqlResult<Result<Vec<KeyRange>, ()>> {
    let mut out: Vec<Range> = Vec::new();
    'ranges: for range in ranges {
        let prefix = match lookup_key(table, columns, &range.prefix, params, environment)? {
            Ok(Some(prefix)) => prefix,
            Ok(None) => continue,
            Err(()) => return Ok(Err(())),
        };
        let next_type = columns
            .get(prefix.len())
            .map(|c| &table.columns[*c].sql_type);
        let mut ends = [None, None];
        for (slot, end) in [&range.low, &range.high].into_iter().enumerate() {
            let Some(end) = end else { continue };
            let Some(sql_type) = next_type.filter(|t| t.orders_as_stored()) else {
                return Ok(Err(()));
            };
            let value = eval_constant(&end.value, params, environment)?;
            if value.is_null() {
                continue 'ranges;
            }
            match value::fit_exactly(&value, sql_type) {
                Some(bound) => {
                    let stored = types::store(&bound, sql_type, environment.zone_offset());
                    ends[slot] = Some((stored, end.inclusive))
                }
                None => return Ok(Err(())),
            }
        }
        let [low, high] = ends;
        out.push((prefix, low, high));
    }
    merge_ranges(&mut out);
    Ok(Ok(out
        .into_iter()
        .map(|(prefix, low, high)| {
            let bound = |end: Option<(client::Value, bool)>| match end {
                None if prefix.is_empty() => Bound::Unbounded,
                None => Bound::Included(prefix.clone()),
                Some((value, inclusive)) => {
                    let mut values = prefix.clone();
                    values.push(value);
                    match inclusive {
                        true => Bound::Included(values),
                        false => Bound::Excluded(values),
                    }
                }
            };
            KeyRange {
                low: bound(low),
                high: bound(high),
            }
        })
        .collect()))
}

/// A range in stored values: the prefix, then the low and high ends.
type Range = (
    Vec<client::Value>,
    Option<(client::Value, bool)>,
    Option<(client::Value, bool)>,
);

/// Sorts ranges of one prefix by their low end and joins those that
/// overlap, so no row is read twice (MySQL's range optimizer does the
/// same: `k BETWEEN 1 AND 5 OR k BETWEEN 3 AND 9` reads 1..9 once).
fn merge_ranges(ranges: &mut Vec<Range>) {
    if ranges.len() < 2 || ranges.iter().any(|r| r.0 != ranges[0].0) {
        return;
    }
    let low_order =
        |a: &Option<(client::Value, bool)>, b: &Option<(client::Value, bool)>| match (a, b) {
            (None, None) => Ordering::Equal,
            (None, _) => Ordering::Less,
            (_, None) => Ordering::Greater,
            (Some((x, xi)), Some((y, yi))) => stored_order(x, y).then(yi.cmp(xi)),
        };
    ranges.sort_by(|a, b| low_order(&a.1, &b.1));
    let mut merged: Vec<Range> = Vec::with_capacity(ranges.len());
    for range in ranges.drain(..) {
        if let Some(last) = merged.last_mut() {
            // Overlapping or touching: the next low is at or below the last high.
            let touches = match (&last.2, &range.1) {
                (None, _) | (_, None) => true,
                (Some((high, high_inclusive)), Some((low, low_inclusive))) => {
                    match stored_order(low, high) {
                        Ordering::Less => true,
                        Ordering::Equal => *high_inclusive || *low_inclusive,
                        Ordering::Greater => false,
                    }
                }
            };
            if touches {
                let higher = match (&last.2, &range.2) {
                    (None, _) | (_, None) => None,
                    (Some(a), Some(b)) => Some(match stored_order(&a.0, &b.0) {
                        Ordering::Less => b.clone(),
                        Ordering::Greater => a.clone(),
                        Ordering::Equal => (a.0.clone(), a.1 || b.1),
                    }),
                };
                last.2 = higher;
                continue;
            }
        }
        merged.push(range);
    }
    *ranges = merged;
}

/// The part of `filter` the data nodes can evaluate, with the parameters
/// bound, and whether that is all of it.
pub fn pushed_filter(
    table: &SqlTable,
    filter: &Expr,
    params: &[Value],
    environment: &dyn Environment,
) -> SqlResult<(Option<Filter>, bool)> {
    let mut conjuncts = Vec::new();
    split_and(filter, &mut conjuncts);
    let mut parts = Vec::new();
    let mut whole = true;
    for conjunct in conjuncts {
        match to_filter(table, conjunct, params, environment)? {
            Some(part) => parts.push(part),
            None => whole = false,
        }
    }
    let filter = match parts.len() {
        0 => None,
        1 => parts.pop(),
        _ => Some(Filter::And(parts)),
    };
    // A program too big for the data nodes is not pushed at all: the SQL
    // node's check of the WHERE clause does the whole work then.
    match filter {
        Some(filter) if !fits_a_program(&filter) => Ok((None, false)),
        filter => Ok((filter, whole)),
    }
}

/// Whether the data nodes take `filter`: at most
/// `client::FILTER_MAX_NODES` nodes, nested less than
/// `client::FILTER_MAX_DEPTH` deep.
fn fits_a_program(filter: &Filter) -> bool {
    fn measure(filter: &Filter, depth: usize, nodes: &mut usize) -> usize {
        *nodes += 1;
        match filter {
            Filter::And(parts) | Filter::Or(parts) => parts
                .iter()
                .map(|part| measure(part, depth + 1, nodes))
                .max()
                .unwrap_or(depth),
            Filter::Not(inner) => measure(inner, depth + 1, nodes),
            _ => depth,
        }
    }
    let mut nodes = 0;
    let depth = measure(filter, 1, &mut nodes);
    // A margin below the limits: the encoder may add nodes of its own.
    nodes * 2 <= client::FILTER_MAX_NODES && depth < client::FILTER_MAX_DEPTH
}

/// `expr` as a data-node filter, when it is one with the same meaning.
fn to_filter(
    table: &SqlTable,
    expr: &Expr,
    params: &[Value],
    environment: &dyn Environment,
) -> SqlResult<Option<Filter>> {
    let column = |e: &Expr| match e {
        Expr::Column(index) => Some(*index),
        _ => None,
    };
    let constant = |column: usize, e: &Expr| -> SqlResult<Option<client::Value>> {
        if !e.is_constant() {
            return Ok(None);
        }
        let value = eval_constant(e, params, environment)?;
        if value.is_null() {
            return Ok(None);
        }
        let sql_type = &table.columns[column].sql_type;
        Ok(value::fit_exactly(&value, sql_type)
            .map(|exact| types::store(&exact, sql_type, environment.zone_offset())))
    };
    let name = |index: usize| table.columns[index].name.clone();
    Ok(match expr {
        Expr::Compare(op, a, b) => {
            let (index, op, k) = match (column(a), column(b)) {
                (Some(index), None) => (index, *op, b.as_ref()),
                (None, Some(index)) => (index, flip(*op), a.as_ref()),
                (Some(left), Some(right)) => {
                    let (lt, rt) = (
                        &table.columns[left].sql_type,
                        &table.columns[right].sql_type,
                    );
                    if signal_comparable(lt, rt) {
                        return Ok(Some(Filter::Columns {
                            left: name(left),
                            op: *op,
                            right: name(right),
                        }));
                    }
                    return Ok(None);
                }
                _ => return Ok(None),
            };
            let ordered = matches!(op, CompareOp::Equal | CompareOp::NotEqual)
                || table.columns[index].sql_type.orders_as_stored();
            if !ordered {
                return Ok(None);
            }
            constant(index, k)?.map(|value| Filter::compare(&name(index), op, value))
        }
        Expr::Between {
            expr,
            low,
            high,
            negated: false,
        } => match column(expr).filter(|i| table.columns[*i].sql_type.orders_as_stored()) {
            Some(index) => match (constant(index, low)?, constant(index, high)?) {
                (Some(low), Some(high)) => Some(Filter::And(vec![
                    Filter::compare(&name(index), CompareOp::GreaterOrEqual, low),
                    Filter::compare(&name(index), CompareOp::LessOrEqual, high),
                ])),
                _ => None,
            },
            None => None,
        },
        Expr::InList {
            expr,
            list,
            negated: false,
        } => match column(expr) {
            Some(index) => {
                let mut parts = Vec::with_capacity(list.len());
                for item in list {
                    match constant(index, item)? {
                        Some(value) => {
                            parts.push(Filter::compare(&name(index), CompareOp::Equal, value))
                        }
                        None => return Ok(None),
                    }
                }
                Some(Filter::Or(parts))
            }
            None => None,
        },
        Expr::IsNull(inner, negated) => column(inner).map(|index| match negated {
            false => Filter::IsNull(name(index)),
            true => Filter::IsNotNull(name(index)),
        }),
        Expr::And(a, b) => match (
            to_filter(table, a, params, environment)?,
            to_filter(table, b, params, environment)?,
        ) {
            (Some(a), Some(b)) => Some(Filter::And(vec![a, b])),
            _ => None,
        },
        Expr::Or(a, b) => match (
            to_filter(table, a, params, environment)?,
            to_filter(table, b, params, environment)?,
        ) {
            // A chain of ORs is one OR of many parts, not a deep tree.
            (Some(a), Some(b)) => {
                let mut parts = Vec::new();
                for part in [a, b] {
                    match part {
                        Filter::Or(inner) => parts.extend(inner),
                        other => parts.push(other),
                    }
                }
                Some(Filter::Or(parts))
            }
            _ => None,
        },
        _ => None,
    })
}

/// Whether the data nodes compare two columns of these types as SQL does.
fn signal_comparable(a: &SqlType, b: &SqlType) -> bool {
    a.stored_alike(b)
}

/// How two stored values of one column compare: as the cluster orders
/// them (the stored forms order as their SQL values do).
fn stored_order(a: &client::Value, b: &client::Value) -> Ordering {
    value::order(
        &Value::from_stored(a.clone()),
        &Value::from_stored(b.clone()),
    )
}

/// A range or full scan, locked or committed.
fn scan(
    request: &Request<'_>,
    access: &AccessPlan,
    transaction: &mut Transaction<'static>,
    environment: &dyn Environment,
) -> SqlResult<Fetched> {
    let table = request.table;
    // The name only when an error needs it: not formatted per statement.
    let refused = |error: ClientError| SqlError::from_client(&error, &table.cluster_name());
    let zone = environment.zone_offset();
    let (filter, whole) = match request.filter {
        Some(filter) => pushed_filter(table, filter, request.params, environment)?,
        None => (None, true),
    };
    let columns = request.needed.and_then(|needed| {
        (needed.len() < table.columns.len() && !needed.is_empty()).then(|| {
            needed
                .iter()
                .map(|i| table.columns[*i].name.clone())
                .collect()
        })
    });
    let options = ScanOptions {
        ordered: false,
        limit: if whole { request.limit } else { None },
        filter,
        columns,
        ..ScanOptions::default()
    };
    let (ranges, index) = match access {
        AccessPlan::Ranges { index, ranges } => {
            let Some(columns) = table.index_columns(index.as_deref()) else {
                return scan(request, &AccessPlan::FullScan, transaction, environment);
            };
            match key_ranges(table, &columns, ranges, request.params, environment)? {
                Ok(key_ranges) if key_ranges.is_empty() => {
                    return finish_empty(transaction, request.commit, table)
                }
                Ok(key_ranges) => (Some(key_ranges), index.clone()),
                Err(()) => (None, None),
            }
        }
        _ => (None, None),
    };
    // In order across the partitions (their rows merged), and from the
    // top for a descending one; with several ranges (walked one after
    // another) only unordered, and then no row may be left out.
    let options = match (request.order, &ranges) {
        (Some(descending), Some(ranges)) if ranges.len() == 1 => ScanOptions {
            ordered: true,
            descending,
            ..options
        },
        (Some(_), _) => ScanOptions {
            limit: None,
            ..options
        },
        (None, _) => options,
    };
    let access = match (&ranges, &index) {
        (Some(ranges), None) => Access::PrimaryKey(ranges),
        (Some(ranges), Some(index)) => Access::Index(index, ranges),
        (None, _) => Access::Table,
    };
    let result = if request.lock == LockMode::CommittedRead {
        transaction.scan(&table.table, access, &options)
    } else {
        let options = ScanOptions {
            columns: None,
            ..options
        };
        transaction.scan_locked_waiting(&table.table, access, &options, request.lock, request.wait)
    }
    .map_err(refused)?;
    finish_empty(transaction, request.commit, table)?;
    let rows = result
        .rows
        .iter()
        .map(|row| load_row(table, row, zone))
        .collect();
    // The rows the data nodes sent, those a limit left unread included.
    Ok(Fetched {
        rows,
        fetched: result.matched,
        at_primary: false,
    })
}

/// How many rows the data nodes count for `request` (COUNT(*) with the
/// whole WHERE clause pushed): `None` when the count cannot be pushed.
pub fn count(
    request: &Request<'_>,
    transaction: &mut Transaction<'static>,
    environment: &dyn Environment,
) -> SqlResult<Option<u64>> {
    let table = request.table;
    if table.made_by_sql_node() {
        return Ok(None);
    }
    let (filter, whole) = match request.filter {
        Some(filter) => pushed_filter(table, filter, request.params, environment)?,
        None => (None, true),
    };
    if !whole || request.lock != LockMode::CommittedRead {
        return Ok(None);
    }
    let ranges = match request.access {
        AccessPlan::Ranges { index, ranges } => {
            let Some(columns) = table.index_columns(index.as_deref()) else {
                return Ok(None);
            };
            match key_ranges(table, &columns, ranges, request.params, environment)? {
                Ok(key_ranges) => Some((key_ranges, index.clone())),
                Err(()) => return Ok(None),
            }
        }
        AccessPlan::FullScan => None,
        _ => return Ok(None),
    };
    if let Some((ranges, _)) = &ranges {
        if ranges.is_empty() {
            finish_empty(transaction, request.commit, table)?;
            return Ok(Some(0));
        }
    }
    let access = match &ranges {
        Some((ranges, None)) => Access::PrimaryKey(ranges),
        Some((ranges, Some(index))) => Access::Index(index, ranges),
        None => Access::Table,
    };
    let options = ScanOptions {
        filter,
        ..ScanOptions::default()
    };
    let counted = transaction
        .count(&table.table, access, &options)
        .map_err(|error| SqlError::from_client(&error, &table.cluster_name()))?;
    finish_empty(transaction, request.commit, table)?;
    Ok(Some(counted))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(low: i64, high: i64) -> Range {
        (
            Vec::new(),
            Some((client::Value::Int(low), true)),
            Some((client::Value::Int(high), true)),
        )
    }

    #[test]
    fn overlapping_ranges_merge_and_apart_ones_stay() {
        let mut ranges = vec![
            range(10, 20),
            range(1, 5),
            range(4, 8),
            range(30, 40),
            range(20, 25),
        ];
        merge_ranges(&mut ranges);
        assert_eq!(ranges, vec![range(1, 8), range(10, 25), range(30, 40)]);
    }

    fn column(sql_type: SqlType) -> SqlColumn {
        SqlColumn {
            name: "c".into(),
            sql_type,
            nullable: true,
            default: None,
            auto_increment: false,
            generated: None,
        }
    }

    #[test]
    fn a_key_compared_across_types_finds_what_mysql_finds() {
        let int = column(SqlType::Integer {
            bytes: 4,
            unsigned: false,
        });
        assert!(matches!(
            key_value(&Value::from("5"), &int, 0),
            KeyValue::Key(client::Value::Int(5))
        ));
        assert!(matches!(
            key_value(&Value::Double(5.5), &int, 0),
            KeyValue::NoMatch
        ));
        assert!(matches!(
            key_value(&Value::Int(1 << 40), &int, 0),
            KeyValue::NoMatch
        ));
        assert!(matches!(
            key_value(&Value::Int(5), &column(SqlType::Char(4)), 0),
            KeyValue::Unusable
        ));
        assert!(matches!(
            key_value(&Value::Null, &int, 0),
            KeyValue::NoMatch
        ));
        // A DATE key from text; a datetime with a time of day is no date.
        let date = column(SqlType::Date);
        let packed = crate::temporal::Date::new(2024, 1, 31).unwrap().pack();
        assert!(matches!(
            key_value(&Value::from("2024-01-31"), &date, 0),
            KeyValue::Key(client::Value::Int(k)) if k == packed
        ));
        assert!(matches!(
            key_value(&Value::from("2024-01-31 10:00:00"), &date, 0),
            KeyValue::Unusable
        ));
        // A DECIMAL(5,2) key: 1.5 is 150 stored; 1.505 is in no row.
        let decimal = column(SqlType::Decimal {
            precision: 5,
            scale: 2,
        });
        assert!(matches!(
            key_value(&Value::from("1.5"), &decimal, 0),
            KeyValue::Key(client::Value::Int(150))
        ));
        assert!(matches!(
            key_value(&Value::Double(1.505), &decimal, 0),
            KeyValue::Unusable
        ));
    }
}
