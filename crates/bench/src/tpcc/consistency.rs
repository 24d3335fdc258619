//! tpcc's consistency check after the run (TPC-C clause 3.3.2.1-4): the
//! figures fetched with GROUP BY queries on one connection, compared in
//! Rust (money as exact cents), each failed condition reported with the
//! first offending warehouse or district.

use super::values::{format_cents, parse_cents};
use crate::mysql::Connection;
use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

/// The verdict of the consistency check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Consistency {
    /// Conditions 1 to 4 hold.
    Ok,
    /// One entry per failed condition ("condition 2: warehouse 1 district
    /// 3: ..."), or why the check could not run.
    Failed(Vec<String>),
}

/// A district: (warehouse id, district id).
pub(super) type DistrictKey = (u32, u32);

/// A district's new_order rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct NewOrderFigures {
    pub(super) max_order_id: u64,
    pub(super) min_order_id: u64,
    pub(super) count: u64,
}

/// A district's orders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct OrderFigures {
    pub(super) max_order_id: u64,
    /// SUM(o_ol_cnt).
    pub(super) order_line_count_sum: u64,
}

/// What the conditions compare.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Figures {
    /// w_ytd per warehouse, cents.
    pub(super) warehouse_ytd: BTreeMap<u32, i64>,
    /// SUM(d_ytd) per warehouse, cents.
    pub(super) district_ytd_sum: BTreeMap<u32, i64>,
    /// d_next_o_id per district.
    pub(super) next_order_id: BTreeMap<DistrictKey, u64>,
    /// Per district that has orders.
    pub(super) orders: BTreeMap<DistrictKey, OrderFigures>,
    /// Per district that has new_order rows.
    pub(super) new_orders: BTreeMap<DistrictKey, NewOrderFigures>,
    /// COUNT(*) of order_line per district that has any.
    pub(super) order_lines: BTreeMap<DistrictKey, u64>,
}

/// Checks conditions 1 to 4 on `connection`'s database.
pub(super) fn check(connection: &mut Connection) -> Consistency {
    match fetch(connection) {
        Ok(figures) => verdict(&figures),
        Err(error) => Consistency::Failed(vec![format!("could not check consistency: {error}")]),
    }
}

/// The verdict on `figures`.
pub(super) fn verdict(figures: &Figures) -> Consistency {
    let failures: Vec<String> = [
        condition_1(figures),
        condition_2(figures),
        condition_3(figures),
        condition_4(figures),
    ]
    .into_iter()
    .flatten()
    .collect();
    if failures.is_empty() {
        Consistency::Ok
    } else {
        Consistency::Failed(failures)
    }
}

/// The figures, read with one query per table.
fn fetch(connection: &mut Connection) -> Result<Figures, String> {
    let mut query = |sql: &str| {
        connection
            .query(sql)
            .map(|result| result.rows)
            .map_err(|error| format!("{sql}: {error}"))
    };
    let mut figures = Figures::default();
    for row in query("SELECT w_id, w_ytd FROM warehouse")? {
        figures
            .warehouse_ytd
            .insert(number(&row, 0)?, cents(&row, 1)?);
    }
    for row in query("SELECT d_w_id, SUM(d_ytd) FROM district GROUP BY d_w_id")? {
        figures
            .district_ytd_sum
            .insert(number(&row, 0)?, cents(&row, 1)?);
    }
    for row in query("SELECT d_w_id, d_id, d_next_o_id FROM district")? {
        figures
            .next_order_id
            .insert((number(&row, 0)?, number(&row, 1)?), number(&row, 2)?);
    }
    for row in query(
        "SELECT o_w_id, o_d_id, MAX(o_id), SUM(o_ol_cnt) FROM orders GROUP BY o_w_id, o_d_id",
    )? {
        figures.orders.insert(
            (number(&row, 0)?, number(&row, 1)?),
            OrderFigures {
                max_order_id: number(&row, 2)?,
                order_line_count_sum: number(&row, 3)?,
            },
        );
    }
    for row in query(
        "SELECT no_w_id, no_d_id, MAX(no_o_id), MIN(no_o_id), COUNT(*) FROM new_order \
         GROUP BY no_w_id, no_d_id",
    )? {
        figures.new_orders.insert(
            (number(&row, 0)?, number(&row, 1)?),
            NewOrderFigures {
                max_order_id: number(&row, 2)?,
                min_order_id: number(&row, 3)?,
                count: number(&row, 4)?,
            },
        );
    }
    for row in query("SELECT ol_w_id, ol_d_id, COUNT(*) FROM order_line GROUP BY ol_w_id, ol_d_id")?
    {
        figures
            .order_lines
            .insert((number(&row, 0)?, number(&row, 1)?), number(&row, 2)?);
    }
    Ok(figures)
}

/// Column `index` of `row` as a whole number (a SUM of integers may print
/// as a decimal with zero places: "12.0000" is 12).
fn number<T: FromStr>(row: &[Option<String>], index: usize) -> Result<T, String> {
    let text = row
        .get(index)
        .and_then(Option::as_deref)
        .ok_or_else(|| format!("column {} is NULL or missing", index + 1))?;
    let whole = match text.split_once('.') {
        Some((whole, fraction)) if fraction.bytes().all(|byte| byte == b'0') => whole,
        _ => text,
    };
    whole
        .trim()
        .parse()
        .map_err(|_| format!("column {} is not a whole number: {text:?}", index + 1))
}

/// Column `index` of `row` as cents.
fn cents(row: &[Option<String>], index: usize) -> Result<i64, String> {
    let text = row
        .get(index)
        .and_then(Option::as_deref)
        .ok_or_else(|| format!("column {} is NULL or missing", index + 1))?;
    parse_cents(text).ok_or_else(|| format!("column {} is not money: {text:?}", index + 1))
}

/// " (and N more)" when other places fail the same condition.
fn and_more(others: usize, what: &str) -> String {
    match others {
        0 => String::new(),
        _ => format!(" (and {others} more {what})"),
    }
}

/// The first failure of a condition with a count of the others.
fn first_of(condition: u32, failures: Vec<String>, what: &str) -> Option<String> {
    let others = failures.len().checked_sub(1)?;
    let first = failures.into_iter().next()?;
    Some(format!(
        "condition {condition}: {first}{}",
        and_more(others, what)
    ))
}

/// Condition 1 (clause 3.3.2.1): W_YTD = sum(D_YTD) per warehouse.
pub(super) fn condition_1(figures: &Figures) -> Option<String> {
    let failures = figures
        .warehouse_ytd
        .iter()
        .filter_map(|(warehouse_id, &ytd)| {
            let sum = figures
                .district_ytd_sum
                .get(warehouse_id)
                .copied()
                .unwrap_or(0);
            (sum != ytd).then(|| {
                format!(
                    "warehouse {warehouse_id}: w_ytd {} != SUM(d_ytd) {}",
                    format_cents(ytd),
                    format_cents(sum)
                )
            })
        })
        .collect();
    first_of(1, failures, "warehouses")
}

/// Condition 2 (clause 3.3.2.2): D_NEXT_O_ID - 1 = max(O_ID) =
/// max(NO_O_ID) per district; a district without new orders is held to
/// the first equality alone.
pub(super) fn condition_2(figures: &Figures) -> Option<String> {
    let failures = figures
        .next_order_id
        .iter()
        .filter_map(|(&(warehouse_id, district_id), &next_order_id)| {
            let expected = next_order_id.saturating_sub(1);
            let max_order_id = figures
                .orders
                .get(&(warehouse_id, district_id))
                .map_or(0, |orders| orders.max_order_id);
            let place = format!("warehouse {warehouse_id} district {district_id}");
            if max_order_id != expected {
                return Some(format!(
                    "{place}: d_next_o_id - 1 = {expected} but MAX(o_id) = {max_order_id}"
                ));
            }
            let new_orders = figures.new_orders.get(&(warehouse_id, district_id))?;
            (new_orders.max_order_id != expected).then(|| {
                format!(
                    "{place}: d_next_o_id - 1 = {expected} but MAX(no_o_id) = {}",
                    new_orders.max_order_id
                )
            })
        })
        .collect();
    first_of(2, failures, "districts")
}

/// Condition 3 (clause 3.3.2.3): max(NO_O_ID) - min(NO_O_ID) + 1 = the
/// number of new_order rows per district (no gaps).
pub(super) fn condition_3(figures: &Figures) -> Option<String> {
    let failures = figures
        .new_orders
        .iter()
        .filter_map(|(&(warehouse_id, district_id), new_orders)| {
            let span = (new_orders.max_order_id + 1).saturating_sub(new_orders.min_order_id);
            (span != new_orders.count).then(|| {
                format!(
                    "warehouse {warehouse_id} district {district_id}: MAX(no_o_id) - \
                     MIN(no_o_id) + 1 = {span} but COUNT(*) = {}",
                    new_orders.count
                )
            })
        })
        .collect();
    first_of(3, failures, "districts")
}

/// Condition 4 (clause 3.3.2.4): sum(O_OL_CNT) = the number of order_line
/// rows per district.
pub(super) fn condition_4(figures: &Figures) -> Option<String> {
    let districts: BTreeSet<DistrictKey> = figures
        .orders
        .keys()
        .chain(figures.order_lines.keys())
        .copied()
        .collect();
    let failures = districts
        .into_iter()
        .filter_map(|(warehouse_id, district_id)| {
            let ordered = figures
                .orders
                .get(&(warehouse_id, district_id))
                .map_or(0, |orders| orders.order_line_count_sum);
            let lines = figures
                .order_lines
                .get(&(warehouse_id, district_id))
                .copied()
                .unwrap_or(0);
            (ordered != lines).then(|| {
                format!(
                    "warehouse {warehouse_id} district {district_id}: SUM(o_ol_cnt) = {ordered} \
                     but COUNT(*) of order_line = {lines}"
                )
            })
        })
        .collect();
    first_of(4, failures, "districts")
}
