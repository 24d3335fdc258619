//! EXPLAIN: the access path and the work each table of a statement
//! gets, as the planner chose them, one row per table.

use super::Session;
use crate::error::SqlResult;
use crate::plan::Plan;
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
                let lock = match select.lock {
                    client::LockMode::Exclusive => " (locks: exclusive)",
                    client::LockMode::Shared => " (locks: shared)",
                    _ => "",
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
        if let Plan::Select(select) = &compiled.plan {
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
                    Value::from(format!("{kind}: {how}")),
                    Value::from(""),
                ]);
            }
            // A UNION's later SELECTs, one row each (their joins not
            // shown), then what is done with all their rows.
            if let Some(union) = &select.union {
                for (part, distinct) in &union.parts {
                    let kind = if *distinct {
                        "union distinct"
                    } else {
                        "union all"
                    };
                    rows.push(vec![
                        part.table
                            .as_ref()
                            .map_or(Value::Null, |t| Value::from(t.name.as_str())),
                        Value::from(format!("{kind}: {}", part.access.describe())),
                        Value::from(""),
                    ]);
                }
                let mut steps = Vec::new();
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
