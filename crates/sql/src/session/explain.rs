//! EXPLAIN: the access path and the work each table of a statement
//! gets, as the planner chose them, one row per table.

use super::Session;
use crate::error::SqlResult;
use crate::plan::{Plan, SelectPlan, SetStep, UnionPlan};
use crate::result::Response;
use crate::value::Value;
use sqlparser::ast;

impl Session {
    pub(super) fn explain(&mut self, statement: &ast::Statement) -> SqlResult<Response> {
        let compiled = self.compile(statement)?;
        self.authorize(&compiled.plan)?;
        let (table, access, steps) = match &compiled.plan {
            Plan::Select(select) => {
                let mut steps = Vec::new();
                if !select.group_by.is_empty() {
                    steps.push("group".to_string());
                }
                if !select.aggregates.is_empty() {
                    steps.push("aggregate".to_string());
                }
                if select.having.is_some() {
                    steps.push("having".to_string());
                }
                if !select.order_by.is_empty() {
                    steps.push(match (select.limit, select.scan_order) {
                        (Some(limit), Some(descending)) => format!(
                            "first {} in index order{}",
                            limit.saturating_add(select.offset),
                            if descending { " (descending)" } else { "" }
                        ),
                        (Some(limit), None) => {
                            format!("top-{} sort", limit.saturating_add(select.offset))
                        }
                        (None, _) => "sort".to_string(),
                    });
                }
                if select.distinct {
                    steps.push("distinct".to_string());
                }
                if select.limit.is_some() && select.order_by.is_empty() {
                    steps.push("limit".to_string());
                }
                let lock = match (select.lock, select.lock_wait) {
                    (client::LockMode::CommittedRead, _) => "",
                    (client::LockMode::Exclusive, client::LockWait::Wait) => " (locks: exclusive)",
                    (client::LockMode::Shared, client::LockWait::Wait) => " (locks: shared)",
                    (client::LockMode::Exclusive, client::LockWait::NoWait) => {
                        " (locks: exclusive, no wait)"
                    }
                    (client::LockMode::Shared, client::LockWait::NoWait) => {
                        " (locks: shared, no wait)"
                    }
                    (client::LockMode::Exclusive, client::LockWait::SkipLocked) => {
                        " (locks: exclusive, skipping locked rows)"
                    }
                    (client::LockMode::Shared, client::LockWait::SkipLocked) => {
                        " (locks: shared, skipping locked rows)"
                    }
                };
                (
                    select.table.as_ref().map(|t| t.name.clone()),
                    format!("{}{lock}", select.access.describe()),
                    steps,
                )
            }
            Plan::Insert(insert) => (
                Some(insert.table.name.clone()),
                format!(
                    "insert of {} row{}",
                    insert.rows.len(),
                    if insert.rows.len() == 1 { "" } else { "s" }
                ),
                Vec::new(),
            ),
            // A multi-table write: the join's first table, then its
            // joined ones below.
            Plan::Update(write) | Plan::Delete(write) if write.joined.is_some() => {
                let join = write.joined.as_deref().expect("matched above");
                let verb = match &compiled.plan {
                    Plan::Update(_) => "update",
                    _ => "delete",
                };
                (
                    join.table.as_ref().map(|t| t.name.clone()),
                    format!("{} (locks: exclusive)", join.access.describe()),
                    vec![format!(
                        "{verb} of {} by primary key, each row once",
                        write.table.name
                    )],
                )
            }
            Plan::Update(write) | Plan::Delete(write) => (
                Some(write.table.name.clone()),
                format!("{} (locks: exclusive)", write.access.describe()),
                vec![match &compiled.plan {
                    Plan::Update(update) if update.increments.is_some() => {
                        "increment by primary key at the data node (autocommit)".to_string()
                    }
                    Plan::Update(_) => "update by primary key".to_string(),
                    _ => "delete by primary key".to_string(),
                }],
            ),
        };
        let mut rows = vec![vec![
            table
                .map(|t| Value::from(t.as_str()))
                .unwrap_or(Value::Null),
            Value::from(access.as_str()),
            Value::from(steps.join(", ").as_str()),
        ]];
        // A joined table's row: how it is read for the earlier rows.
        let joining = match &compiled.plan {
            Plan::Select(select) => Some(&**select),
            Plan::Update(write) | Plan::Delete(write) => write.joined.as_deref(),
            Plan::Insert(_) => None,
        };
        if let Some(select) = joining {
            join_rows(select, "", &mut rows);
            derived_rows(select, &mut rows);
            // A set operation's later SELECTs, one row each (their
            // joins not shown), then how their rows combine and what is
            // done with the whole.
            if let Some(union) = &select.union {
                set_part_rows(union, "", &mut rows);
                let combined = describe_steps(union, "");
                let mut steps = vec![combined.as_str()];
                if !union.order_by.is_empty() {
                    steps.push("sort");
                }
                if union.limit.is_some() || union.offset > 0 {
                    steps.push("limit");
                }
                rows.push(vec![
                    Value::Null,
                    Value::from("union result"),
                    Value::from(steps.join(", ").as_str()),
                ]);
            }
        }
        Ok(Response::text_rows(&["table", "access", "sql_node"], rows))
    }
}

/// A joined table's row each: how it is read for the earlier rows
/// (`within`: the derived table the join is in, if any).
fn join_rows(select: &SelectPlan, within: &str, rows: &mut Vec<Vec<Value>>) {
    for join in &select.joins {
        let how = match (join.correlated, &join.access) {
            (false, access) => format!("{}, once", access.describe()),
            (true, crate::plan::AccessPlan::PrimaryKey(_)) => {
                "primary key lookups, batched over the earlier rows".to_string()
            }
            (true, access) => format!("{} for each earlier row", access.describe()),
        };
        let kind = if join.left { "left join" } else { "join" };
        rows.push(vec![
            Value::from(join.table.name.as_str()),
            Value::from(format!("{within}{kind}: {how}")),
            Value::from(""),
        ]);
    }
}

/// For each derived table or view `select` reads, the rows of its own
/// query's tables, marked `in name:` (how a condition pushed into it
/// changed their access shows here; design 0040).
fn derived_rows(select: &SelectPlan, rows: &mut Vec<Vec<Value>>) {
    let tables = select
        .table
        .iter()
        .chain(select.joins.iter().map(|j| &j.table));
    for table in tables {
        let Some(inner) = table
            .derived
            .and_then(|slot| select.subqueries.get(slot))
            .map(|subquery| &*subquery.plan)
        else {
            continue;
        };
        if inner.working_table || inner.recursive.is_some() {
            continue;
        }
        let within = format!("in {}: ", table.name);
        // A set operation's SELECTs, each numbered.
        let parts = std::iter::once(inner).chain(
            inner
                .union
                .as_ref()
                .map(|union| union.all_parts())
                .unwrap_or_default(),
        );
        for (number, part) in parts.enumerate() {
            let within = match inner.union {
                Some(_) => format!("{within}select {}: ", number + 1),
                None => within.clone(),
            };
            rows.push(vec![
                part.table
                    .as_ref()
                    .map_or(Value::Null, |t| Value::from(t.name.as_str())),
                Value::from(format!("{within}{}", part.access.describe())),
                Value::from(""),
            ]);
            join_rows(part, &within, rows);
            derived_rows(part, rows);
        }
    }
}

/// One row for each SELECT of a set operation after the first, named
/// by its number (`select 3`; `select 1.2` for the second of a
/// parenthesized first operand's).
fn set_part_rows(union: &UnionPlan, prefix: &str, rows: &mut Vec<Vec<Value>>) {
    if let Some((own, _)) = &union.first_set {
        set_part_rows(own, &format!("{prefix}1."), rows);
    }
    for (n, part) in union.parts.iter().enumerate() {
        rows.push(vec![
            part.table
                .as_ref()
                .map_or(Value::Null, |t| Value::from(t.name.as_str())),
            Value::from(format!(
                "select {prefix}{}: {}",
                n + 2,
                part.access.describe()
            )),
            Value::from(""),
        ]);
    }
}

/// A set operation's steps as an expression of its SELECTs' numbers
/// (`1 union all (2 intersect 3)`), for EXPLAIN.
fn describe_steps(union: &UnionPlan, prefix: &str) -> String {
    // Each result so far, and whether it needs parentheses as a left
    // operand (a parenthesized first operand's) or as a right one (any
    // combination: the steps lean left).
    let mut described: Vec<(String, bool, bool)> = Vec::new();
    for step in &union.steps {
        match step {
            SetStep::Rows(0) if union.first_set.is_some() => {
                let (own, _) = union.first_set.as_ref().expect("checked");
                let text = describe_steps(own, &format!("{prefix}1."));
                described.push((text, true, true));
            }
            SetStep::Rows(n) => described.push((format!("{prefix}{}", n + 1), false, false)),
            SetStep::Combine(operation) => {
                let (right, _, right_combined) = described.pop().expect("a right side");
                let (left, left_nested, _) = described.pop().expect("a left side");
                let wrapped = |text: String, wrap: bool| match wrap {
                    true => format!("({text})"),
                    false => text,
                };
                let text = format!(
                    "{} {} {}",
                    wrapped(left, left_nested),
                    operation.describe(),
                    wrapped(right, right_combined)
                );
                described.push((text, false, true));
            }
        }
    }
    described.pop().map(|(text, ..)| text).unwrap_or_default()
}
