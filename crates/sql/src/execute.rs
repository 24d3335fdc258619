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
use crate::plan::{InsertPlan, SelectPlan, WritePlan};
use crate::result::Response;
use crate::types;
use crate::value;
use crate::value::Value;
use client::{ClientError, Commit, LockMode, Transaction};
use std::cmp::Ordering;
use std::collections::HashSet;
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

/// Runs a SELECT.
pub fn select(plan: &SelectPlan, run: &mut Run<'_>) -> SqlResult<Response> {
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
            let unordered =
                plan.aggregates.is_empty() && !plan.distinct && plan.order_by.is_empty();
            let request = Request {
                table,
                access: &plan.access,
                filter: plan.filter.as_ref(),
                params: run.params,
                lock: plan.lock,
                needed: Some(&plan.needed),
                limit: match unordered {
                    true => plan.limit.map(|limit| limit.saturating_add(plan.offset)),
                    false => None,
                },
                commit: run.commit,
            };
            let Fetched { rows, fetched } =
                access::fetch(&request, run.transaction, run.environment)?;
            run.counts.fetched += fetched;
            let mut kept = Vec::with_capacity(rows.len());
            for row in rows {
                if passes(plan.filter.as_ref(), &row, run)? {
                    kept.push(row);
                }
            }
            kept
        }
    };
    let mut out: Vec<Vec<Value>> = if !plan.aggregates.is_empty() {
        let results = aggregate(&plan.aggregates, &rows, run)?;
        vec![output_row(plan, &[], &results, run)?]
    } else if plan.order_by.is_empty() {
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            out.push(output_row(plan, row, &[], run)?);
        }
        out
    } else {
        sorted_output(plan, &rows, run)?
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
fn sorted_output(
    plan: &SelectPlan,
    rows: &[Vec<Value>],
    run: &Run<'_>,
) -> SqlResult<Vec<Vec<Value>>> {
    let mut keyed: Vec<(Vec<Value>, usize)> = Vec::with_capacity(rows.len());
    for (index, row) in rows.iter().enumerate() {
        let inputs = Inputs {
            row,
            aggregates: &[],
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
        .map(|(_, index)| output_row(plan, &rows[*index], &[], run))
        .collect()
}

/// The aggregates' results over `rows`.
fn aggregate(
    aggregates: &[Aggregate],
    rows: &[Vec<Value>],
    run: &Run<'_>,
) -> SqlResult<Vec<Value>> {
    let mut results = Vec::with_capacity(aggregates.len());
    for aggregate in aggregates {
        let mut count: i64 = 0;
        // Exact while every value is an integer or a DECIMAL (SUM and AVG
        // are then DECIMALs, as MySQL's), else a double.
        let mut exact_sum: Option<Decimal> = Decimal::from_integer(0);
        let mut double_sum = 0f64;
        let mut best: Option<Value> = None;
        let mut seen = HashSet::new();
        for row in rows {
            let value = match &aggregate.argument {
                None => Value::Int(1),
                Some(argument) => {
                    let inputs = Inputs {
                        row,
                        aggregates: &[],
                        params: run.params,
                    };
                    argument.eval(&inputs, run.environment)?
                }
            };
            if value.is_null() {
                continue;
            }
            if aggregate.distinct {
                let mut key = Vec::new();
                value::group_key(&value, &mut key);
                if !seen.insert(key) {
                    continue;
                }
            }
            count += 1;
            if let Some(sum) = exact_sum {
                exact_sum = match &value {
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
            double_sum += value::to_f64(&value);
            let better = |current: &Value| {
                let ordering = value::order(&value, current);
                match aggregate.function {
                    AggregateFunction::Min => ordering == Ordering::Less,
                    _ => ordering == Ordering::Greater,
                }
            };
            if matches!(
                aggregate.function,
                AggregateFunction::Min | AggregateFunction::Max
            ) && best.as_ref().is_none_or(better)
            {
                best = Some(value);
            }
        }
        results.push(match aggregate.function {
            AggregateFunction::CountRows | AggregateFunction::Count => Value::Int(count),
            AggregateFunction::Sum if count == 0 => Value::Null,
            AggregateFunction::Sum => match exact_sum {
                Some(sum) => Value::Decimal(sum),
                None => Value::Double(double_sum),
            },
            AggregateFunction::Average if count == 0 => Value::Null,
            AggregateFunction::Average => {
                match exact_sum
                    .and_then(|sum| sum.checked_div(Decimal::from_integer(count as i128)?))
                {
                    Some(average) => Value::Decimal(average),
                    None => Value::Double(double_sum / count as f64),
                }
            }
            AggregateFunction::Min | AggregateFunction::Max => best.unwrap_or(Value::Null),
        });
    }
    Ok(results)
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

/// Runs an INSERT; returns the response and the first generated
/// AUTO_INCREMENT value.
pub fn insert(
    plan: &InsertPlan,
    run: &mut Run<'_>,
    auto_increment: &AutoIncrement,
) -> SqlResult<Response> {
    let table = &plan.table;
    let cluster = run.transaction.cluster();
    let width = table.columns.len();
    let mut rows: Vec<Vec<Option<Value>>> = Vec::with_capacity(plan.rows.len());
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
    let count = rows.len();
    let zone = run.environment.zone_offset();
    for (number, row) in rows.into_iter().enumerate() {
        let mut values: Vec<(u16, client::Value)> = Vec::with_capacity(width);
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
            let fitted = fit_column(table, index, &value)?;
            values.push((index as u16, types::store(&fitted, &column.sql_type, zone)));
        }
        run.transaction
            .insert(&table.table, &values)
            .map_err(|error| SqlError::from_client(&error, &table.cluster_name()))?;
        if (number + 1) % WRITE_BATCH == 0 && number + 1 < count {
            check_interrupt(run)?;
            flush(run.transaction, Commit::No, table)?;
        }
    }
    flush(run.transaction, run.commit, table)?;
    let count = count as u64;
    Ok(Response::Ok {
        affected_rows: count,
        matched_rows: count,
        last_insert_id: first_generated,
        info: match count {
            1 => String::new(),
            _ => format!("Records: {count}  Duplicates: 0  Warnings: 0"),
        },
    })
}

/// The rows an UPDATE or DELETE changes, locked.
fn rows_to_write(plan: &WritePlan, run: &mut Run<'_>) -> SqlResult<Vec<Vec<Value>>> {
    let request = Request {
        table: &plan.table,
        access: &plan.access,
        filter: plan.filter.as_ref(),
        params: run.params,
        lock: LockMode::Exclusive,
        needed: None,
        limit: None,
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
    Ok(kept)
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
    if let Some(increments) = &plan.increments {
        if let Some(response) = increment_by_key(plan, increments, run)? {
            return Ok(response);
        }
    }
    let table = &plan.table;
    let rows = rows_to_write(plan, run)?;
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
        if changed_columns.is_empty() {
            continue;
        }
        changed += 1;
        if changed_columns.iter().any(|c| key_columns.contains(c)) {
            // A new primary key is a new row: delete, then insert.
            run.transaction
                .delete(&table.table, &key_of(table, old, zone))
                .map_err(refused)?;
            let values = stored_columns(table, &new, 0..new.len(), zone);
            run.transaction
                .insert(&table.table, &values)
                .map_err(refused)?;
        } else {
            let set = stored_columns(table, &new, changed_columns.iter().copied(), zone);
            run.transaction
                .update(&table.table, &key_of(table, old, zone), &set)
                .map_err(refused)?;
        }
        if (number + 1) % WRITE_BATCH == 0 {
            check_interrupt(run)?;
            flush(run.transaction, Commit::No, table)?;
        }
    }
    flush(run.transaction, run.commit, table)?;
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
    let table = &plan.table;
    let rows = rows_to_write(plan, run)?;
    let zone = run.environment.zone_offset();
    for (number, row) in rows.iter().enumerate() {
        run.transaction
            .delete(&table.table, &key_of(table, row, zone))
            .map_err(|error| SqlError::from_client(&error, &table.cluster_name()))?;
        if (number + 1) % WRITE_BATCH == 0 {
            check_interrupt(run)?;
            flush(run.transaction, Commit::No, table)?;
        }
    }
    flush(run.transaction, run.commit, table)?;
    Ok(Response::affected(rows.len() as u64))
}
