//! INSERT and its forms (REPLACE, INSERT IGNORE, ON DUPLICATE KEY UPDATE,
//! INSERT ... SELECT): rows evaluated, AUTO_INCREMENT and defaults
//! filled in, then inserted in batches, or, for the upsert forms, the
//! rows in their way read by primary and unique keys and each new row
//! decided in order (docs/design/0030-upserts.md). A plain INSERT's
//! writes may wait for the next round trip (design 0034).

use super::{
    check_interrupt, fit_column, flush, key_of, query_in_transaction, stored_columns, Run,
    WRITE_BATCH,
};
use crate::access;
use crate::auto_increment::AutoIncrement;
use crate::catalog::SqlTable;
use crate::diagnostics::Level;
use crate::error::{codes, SqlError, SqlResult};
use crate::expr::Inputs;
use crate::plan::{Conflict, InsertPlan};
use crate::result::Response;
use crate::types;
use crate::value;
use crate::value::Value;
use client::{ClientError, Commit, LockMode};
use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::sync::Arc;

/// Runs an INSERT (or REPLACE, INSERT IGNORE, ON DUPLICATE KEY UPDATE,
/// INSERT ... SELECT).
pub fn insert(
    plan: &InsertPlan,
    run: &mut Run<'_>,
    auto_increment: &AutoIncrement,
) -> SqlResult<Response> {
    // IGNORE makes what strict mode fails on a warning (MySQL's rule).
    let _storing = (!matches!(plan.conflict, Conflict::Ignore))
        .then(|| super::Storing::begin(run.environment));
    let table = &plan.table;
    let cluster = run.transaction.borrow().cluster();
    let width = table.columns.len();
    let mut rows: Vec<Vec<Option<Value>>> = Vec::with_capacity(plan.rows.len());
    match &plan.select {
        Some(select_plan) => {
            // The query runs in the statement's transaction; the inserts
            // commit it.
            for values in query_in_transaction(select_plan, run)? {
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
    // Per row, whether its AUTO_INCREMENT value was generated (empty when
    // none was).
    let mut generated_rows: Vec<bool> = Vec::new();
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
                let generated = generate(&row[column]);
                if generated {
                    row[column] = Some(Value::UInt(values.next().expect("one value per row")));
                }
                generated_rows.push(generated);
            }
        }
    }
    // The hidden key: a new value for every row (no statement names it).
    if let Some(hidden) = table.hidden_key() {
        let values = auto_increment.take_hidden(cluster, table, rows.len())?;
        for (row, value) in rows.iter_mut().zip(values) {
            row[hidden] = Some(Value::UInt(value));
        }
    }
    // Every column's value: given, or its DEFAULT, fitted to its type.
    let mut full: Vec<Vec<Value>> = Vec::with_capacity(rows.len());
    for row in rows {
        let mut values = Vec::with_capacity(width);
        for (index, given) in row.into_iter().enumerate() {
            let column = &table.columns[index];
            // A generated column is computed below, from the others.
            if column.generated.is_some() {
                if given.is_some() {
                    crate::generated::given_value(table, index, run.environment)?;
                }
                values.push(Value::Null);
                continue;
            }
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
        crate::generated::fill(table, &mut values, run.environment)?;
        full.push(values);
    }
    let count = full.len();
    // CHECK constraints, on every row before any is written (as MySQL
    // checks a row before its write, an upsert's too); INSERT IGNORE
    // leaves a violating row out with a warning (not counted as a
    // duplicate).
    let mut check_skipped = 0u64;
    if !table.checks.is_empty() {
        let mut kept = Vec::with_capacity(full.len());
        let mut kept_generated = Vec::with_capacity(generated_rows.len());
        for (number, row) in full.into_iter().enumerate() {
            match crate::checks::verify(table, &row, run.environment) {
                Ok(()) => {
                    kept.push(row);
                    if let Some(generated) = generated_rows.get(number) {
                        kept_generated.push(*generated);
                    }
                }
                Err(error)
                    if crate::checks::is_violation(&error)
                        && matches!(plan.conflict, Conflict::Ignore) =>
                {
                    run.environment
                        .raise(Level::Warning, error.code, &error.message);
                    check_skipped += 1;
                }
                Err(error) => return Err(error),
            }
        }
        full = kept;
        generated_rows = kept_generated;
    }
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
                    true => run
                        .locked
                        .settle_table(&mut run.transaction.borrow_mut(), table)?,
                    false => {
                        if run
                            .locked
                            .settle_key(&mut run.transaction.borrow_mut(), table, &key)?
                        {
                            waits = false;
                        }
                    }
                }
                let values = stored_columns(table, row, 0..width, zone);
                run.transaction
                    .borrow_mut()
                    .insert(&table.table, &values)
                    .map_err(|error| SqlError::from_client(&error, &table.cluster_name()))?;
                if waits {
                    run.locked.defer(&run.transaction.borrow(), table, &key);
                    // Writes wait a batch at most: a transaction of many
                    // INSERTs and no reads sends them as it goes.
                    if run.transaction.borrow().pending_operations() >= WRITE_BATCH {
                        check_interrupt(run)?;
                        flush(&mut run.transaction.borrow_mut(), Commit::No, table)?;
                    }
                }
                if (number + 1) % WRITE_BATCH == 0 && number + 1 < count {
                    check_interrupt(run)?;
                    flush(&mut run.transaction.borrow_mut(), Commit::No, table)?;
                }
            }
            (count as u64, count as u64)
        }
        conflict => {
            // The rows in the way are read: the waiting writes go first.
            run.locked
                .settle_table(&mut run.transaction.borrow_mut(), table)?;
            let mut affected = 0;
            let mut matched = 0;
            // The insert id is the first generated one of a row inserted
            // (none when every row was ignored or updated: the session's
            // stays as it was, as MySQL's).
            let mut first_inserted = None;
            for (number, chunk) in full.chunks(WRITE_BATCH).enumerate() {
                check_interrupt(run)?;
                let start = number * WRITE_BATCH;
                let generated = generated_rows
                    .get(start..start + chunk.len())
                    .unwrap_or(&[]);
                let outcome = upsert(table, chunk, conflict, run)?;
                affected += outcome.affected;
                matched += outcome.matched;
                if first_inserted.is_none() {
                    first_inserted = outcome
                        .inserted
                        .iter()
                        .find(|row| generated.get(**row) == Some(&true))
                        .map(|row| start + row);
                }
            }
            first_generated = match (first_inserted, table.auto_increment) {
                (Some(row), Some(column)) => full[row][column].as_u64().unwrap_or(0),
                _ => 0,
            };
            (affected, matched)
        }
    };
    if !waits {
        flush(&mut run.transaction.borrow_mut(), run.commit, table)?;
    }
    let skipped = count as u64 - matched.min(count as u64);
    Ok(Response::Ok {
        affected_rows: affected,
        matched_rows: matched,
        last_insert_id: first_generated,
        info: match count {
            1 => String::new(),
            _ => format!(
                "Records: {count}  Duplicates: {}  Warnings: {}",
                match plan.conflict {
                    Conflict::Ignore => skipped.saturating_sub(check_skipped),
                    _ => affected.saturating_sub(count as u64),
                },
                run.environment.warning_count()
            ),
        },
    })
}

/// The 1062 warning of a row INSERT IGNORE leaves out, worded as the
/// error would be: the key `row` repeats of `existing` (its primary key,
/// else the unique index whose values the two share) and `row`'s value.
fn duplicate_message(
    table: &SqlTable,
    row: &[Value],
    existing: &[Value],
    unique: &[(String, Vec<usize>)],
    zone: i64,
) -> String {
    let same = |columns: &[usize]| {
        columns.iter().all(|c| {
            stored_canonical(table, *c, &existing[*c], zone)
                == stored_canonical(table, *c, &row[*c], zone)
        })
    };
    let primary = table.key_columns();
    let (index, columns) = match same(&primary) {
        true => ("PRIMARY", primary.as_slice()),
        false => unique
            .iter()
            .find(|(_, columns)| same(columns))
            .map_or(("PRIMARY", primary.as_slice()), |(name, columns)| {
                (name.as_str(), columns.as_slice())
            }),
    };
    let mut entry = Vec::new();
    for (at, column) in columns.iter().enumerate() {
        if at > 0 {
            entry.push(b'-');
        }
        value::write_text(&row[*column], &mut entry);
    }
    format!(
        "Duplicate entry '{}' for key '{}.{index}'",
        String::from_utf8_lossy(&entry),
        table.name
    )
}

/// Whether `table` has a unique secondary index: writes of two rows can
/// then meet in it, so they must not share a round trip in which the
/// cluster may run them in either order.
pub(super) fn has_unique_index(table: &SqlTable) -> bool {
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
pub(super) fn flush_if_unique(run: &mut Run<'_>, table: &SqlTable) -> SqlResult<()> {
    if has_unique_index(table) {
        flush(&mut run.transaction.borrow_mut(), Commit::No, table)?;
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
) -> SqlResult<Upserted> {
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
                .borrow_mut()
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
                    .borrow_mut()
                    .read_unique(&table.table, name, &values, LockMode::Exclusive)
                    .map_err(refused)?,
            ));
        }
        by_unique.push(reads);
    }
    flush(&mut run.transaction.borrow_mut(), Commit::No, table)?;
    // What each key holds now: read, then as this statement changed it.
    let mut known: HashMap<Vec<u8>, Known> = HashMap::new();
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
            if let Some(found) = run.transaction.borrow().get(*handle) {
                let row = access::load_row(table, found, zone);
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
    let conflicts = |known: &HashMap<Vec<u8>, Known>, row: &[Value]| {
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
    let mut inserted = Vec::new();
    for (number, row) in rows.iter().enumerate() {
        let key = key_bytes(row);
        let in_the_way = conflicts(&known, row);
        // A key this statement already wrote: what is queued goes first,
        // so the operations on it run in order.
        let again = std::iter::once(&key)
            .chain(&in_the_way.iter().map(|r| key_bytes(r)).collect::<Vec<_>>())
            .any(|k| touched.contains(k));
        if again {
            flush(&mut run.transaction.borrow_mut(), Commit::No, table)?;
            touched.clear();
        }
        match conflict {
            _ if in_the_way.is_empty() => {
                let values = stored_columns(table, row, 0..width, zone);
                run.transaction
                    .borrow_mut()
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
                inserted.push(number);
            }
            Conflict::Ignore => {
                let message = duplicate_message(table, row, &in_the_way[0], &unique, zone);
                run.environment
                    .raise(Level::Warning, codes::DUP_ENTRY, &message);
            }
            Conflict::Replace => {
                let mut replaced_in_place = false;
                for existing in &in_the_way {
                    let existing_key = key_bytes(existing);
                    if existing_key == key {
                        replaced_in_place = true;
                        continue;
                    }
                    run.transaction
                        .borrow_mut()
                        .delete(&table.table, &key_of(table, existing, zone))
                        .map_err(refused)?;
                    known.insert(existing_key.clone(), Known { row: None });
                    touched.insert(existing_key);
                }
                if in_the_way.len() > usize::from(replaced_in_place) {
                    // The rows in the way hold the new row's unique values:
                    // their deletes must be done before it is written (a
                    // batch's operations on different rows run in any order).
                    flush(&mut run.transaction.borrow_mut(), Commit::No, table)?;
                    touched.clear();
                }
                let values = stored_columns(table, row, 0..width, zone);
                match replaced_in_place {
                    true => run.transaction.borrow_mut().write(&table.table, &values),
                    false => run.transaction.borrow_mut().insert(&table.table, &values),
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
                inserted.push(number);
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
                crate::generated::fill(table, &mut new, run.environment)?;
                crate::checks::verify(table, &new, run.environment)?;
                let changed: Vec<usize> = (0..width).filter(|i| existing[*i] != new[*i]).collect();
                let existing_key = key_bytes(existing);
                if changed.is_empty() {
                    matched += 1;
                    continue;
                }
                let key_changed = changed.iter().any(|c| table.key_columns().contains(c));
                if key_changed {
                    run.transaction
                        .borrow_mut()
                        .delete(&table.table, &key_of(table, existing, zone))
                        .map_err(refused)?;
                    // The new row may keep the old one's unique values.
                    flush_if_unique(run, table)?;
                    touched.clear();
                    let values = stored_columns(table, &new, 0..width, zone);
                    run.transaction
                        .borrow_mut()
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
                        .borrow_mut()
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
    flush(&mut run.transaction.borrow_mut(), Commit::No, table)?;
    Ok(Upserted {
        affected,
        matched,
        inserted,
    })
}

/// What `upsert` did with its rows.
struct Upserted {
    /// MySQL's affected rows: 1 an insert, 2 an update, 1 + deleted a
    /// REPLACE.
    affected: u64,
    /// The same, with updates that changed nothing counted.
    matched: u64,
    /// The rows (by number) written as new rows: inserted, or REPLACEd.
    inserted: Vec<usize>,
}

/// Column `column`'s `value` as the cluster stores and compares it in a
/// key (`types::canonical_key_value`).
fn stored_canonical(table: &SqlTable, column: usize, value: &Value, zone: i64) -> client::Value {
    let sql_type = &table.columns[column].sql_type;
    types::canonical_key_value(types::store(value, sql_type, zone), sql_type)
}
