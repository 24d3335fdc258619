//! The scan phases of keylookup: `range` (sysbench's range select: 100
//! consecutive keys through the primary key's ordered index) and `scan`
//! (a full scan of the table with a filter, evaluated at the data nodes,
//! that takes 1% of the rows). Every row either returns is verified.

use super::{Expectation, KeySource, PhaseContext, WorkerStats};
use crate::rows;
use client::{Access, CompareOp, Filter, KeyRange, ScanOptions, Value};
use std::ops::Bound;
use std::time::Instant;

/// Keys per range of the `range` phase (sysbench's default range size).
pub const RANGE_ROWS: u64 = 100;

/// One thread of the `range` phase: ranges of `RANGE_ROWS` keys from its
/// key source (the start of each range), each scanned in key order and
/// every row verified.
pub(super) fn run_ranges(
    context: &PhaseContext<'_>,
    mut source: KeySource,
    started: Instant,
) -> WorkerStats {
    let mut stats = WorkerStats::new();
    let records = context.records;
    let options = ScanOptions {
        batch_rows: RANGE_ROWS as u32,
        ..ScanOptions::default()
    };
    loop {
        let now = Instant::now();
        // A range within the thread's share of the keys (one pass), or
        // anywhere (random ranges).
        let (first, end) = match &mut source {
            KeySource::Pass { next, end } => {
                if *next >= *end {
                    break;
                }
                let first = *next;
                *next = (first + RANGE_ROWS).min(*end);
                (first, *next)
            }
            KeySource::Random {
                random, deadline, ..
            } => {
                if now >= *deadline {
                    break;
                }
                let first = random.below(records.saturating_sub(RANGE_ROWS).max(1));
                (first, (first + RANGE_ROWS).min(records))
            }
        };
        let range = KeyRange {
            low: Bound::Included(vec![Value::UInt(first)]),
            high: Bound::Excluded(vec![Value::UInt(end)]),
        };
        let began = Instant::now();
        match context
            .cluster
            .scan_primary_key(context.table, &range, &options)
        {
            Ok(result) => {
                let _ = stats
                    .latency_us
                    .record(began.elapsed().as_micros().max(1) as u64);
                stats.committed_at(began.duration_since(started));
                stats.operations += result.rows.len() as u64;
                let verdict = range_verdict(context, first, end, &result.rows);
                if let Err(description) = verdict {
                    stats.mismatch(description);
                } else {
                    stats.verified += result.rows.len() as u64;
                }
            }
            Err(error) => {
                stats.count_error(&error);
                if stats.no_connection_left(context) {
                    break;
                }
            }
        }
    }
    stats
}

/// Whether `rows`, scanned for keys first..end, are right: in key order,
/// each row proving itself, and every key there once the keys are
/// present (none once they are deleted).
fn range_verdict(
    context: &PhaseContext<'_>,
    first: u64,
    end: u64,
    rows: &[client::Row],
) -> Result<(), String> {
    let mut previous = None;
    for row in rows {
        // Straight from the row data, as `rows::verify` reads (no values
        // built: the first version built every row's, a tenth of the
        // client's time in malloc and free).
        let key = row
            .get_u64(0u16)
            .ok_or_else(|| format!("range {first}..{end}: a row without its key"))?;
        if key < first || key >= end || previous.is_some_and(|previous| previous >= key) {
            return Err(format!("range {first}..{end}: key {key} out of place"));
        }
        previous = Some(key);
        rows::verify(row, key as u32, context.columns)
            .map_err(|error| format!("range {first}..{end}: {error}"))?;
    }
    match context.expectation {
        Expectation::Present if rows.len() as u64 != end - first => Err(format!(
            "range {first}..{end}: {} rows of {}",
            rows.len(),
            end - first
        )),
        Expectation::Absent if !rows.is_empty() => Err(format!(
            "range {first}..{end}: {} rows found after they were deleted",
            rows.len()
        )),
        _ => Ok(()),
    }
}

/// Share of the rows the `scan` phase's filter takes: 1 in this many.
pub const SCAN_SHARE: u64 = 100;

/// One thread of the `scan` phase: full scans of the table, each with a
/// filter taking a window of `records / SCAN_SHARE` consecutive keys (the
/// thread's own window in one pass, one scan a thread; random windows for
/// `duration_s`). Operations count the rows the data nodes looked at,
/// transactions the scans; the rows returned are verified and, once the
/// keys are present, must be the whole window.
pub(super) fn run_scans(
    context: &PhaseContext<'_>,
    mut source: KeySource,
    started: Instant,
) -> WorkerStats {
    let mut stats = WorkerStats::new();
    let records = context.records;
    let window = (records / SCAN_SHARE).max(1);
    let key_column = context.table.def().primary_key[0] as usize;
    let key_name = context.table.def().columns[key_column].name.clone();
    loop {
        let first = match &mut source {
            KeySource::Pass { next, end } => {
                if *next >= *end {
                    break;
                }
                let first = *next;
                // One scan a thread in a pass.
                *next = *end;
                first
            }
            KeySource::Random {
                random, deadline, ..
            } => {
                if Instant::now() >= *deadline {
                    break;
                }
                random.below(records.saturating_sub(window).max(1))
            }
        };
        let end = (first + window).min(records);
        let options = ScanOptions {
            filter: Some(Filter::And(vec![
                Filter::compare(&key_name, CompareOp::GreaterOrEqual, Value::UInt(first)),
                Filter::compare(&key_name, CompareOp::Less, Value::UInt(end)),
            ])),
            batch_rows: 1024,
            ..ScanOptions::default()
        };
        let began = Instant::now();
        match context.cluster.scan(context.table, Access::Table, &options) {
            Ok(mut result) => {
                let _ = stats
                    .latency_us
                    .record(began.elapsed().as_micros().max(1) as u64);
                stats.committed_at(began.duration_since(started));
                stats.operations += result.examined;
                // Row order is no key order: sort before checking.
                result
                    .rows
                    .sort_by_key(|row| row.get(key_column as u16).and_then(Value::as_u64));
                match range_verdict(context, first, end, &result.rows) {
                    Err(description) => stats.mismatch(description),
                    Ok(()) => stats.verified += result.rows.len() as u64,
                }
            }
            Err(error) => {
                stats.count_error(&error);
                if stats.no_connection_left(context) {
                    break;
                }
            }
        }
    }
    stats
}
