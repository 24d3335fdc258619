//! Derived tables and common table expressions: the table a FROM
//! clause reads for `(SELECT ...) AS d` or a WITH's name, and the
//! expressions each query may name (docs/design/0033-subqueries.md,
//! "Derived tables").

use super::SelectPlan;
use crate::catalog::{SqlColumn, SqlTable};
use crate::error::{codes, SqlError, SqlResult};
use sqlparser::ast;
use std::sync::Arc;

/// One common table expression of a WITH: its name, column names (if
/// given) and query.
#[derive(Clone, Debug)]
pub struct Cte {
    pub(super) name: String,
    pub(super) columns: Vec<String>,
    pub(super) query: ast::Query,
}

/// The common table expressions a query may name: those of every WITH
/// around it, inner ones after outer ones (a later one hides an earlier
/// of its name). Shared by the subqueries compiled inside (one copy of
/// each WITH's queries per statement).
#[derive(Clone, Debug, Default)]
pub struct Ctes {
    list: std::rc::Rc<[Cte]>,
    visible: usize,
    /// The statement's namings of common table expressions so far,
    /// shared by all its `Ctes`: each compiles its query again, so
    /// expressions that name an earlier one twice would double the work
    /// at each level without a bound.
    named: std::rc::Rc<std::cell::Cell<usize>>,
}

/// The most namings of common table expressions one statement may make.
const MAX_CTE_NAMINGS: usize = 1_000;

impl Ctes {
    /// These and `with`'s, each of which sees those before it.
    pub(super) fn with(&self, with: &ast::With) -> SqlResult<Ctes> {
        if with.recursive {
            return Err(SqlError::unsupported("WITH RECURSIVE"));
        }
        let mut list: Vec<Cte> = Vec::with_capacity(self.visible + with.cte_tables.len());
        list.extend_from_slice(&self.list[..self.visible]);
        let outer = list.len();
        for cte in &with.cte_tables {
            let name = cte.alias.name.value.clone();
            if list[outer..]
                .iter()
                .any(|c| c.name.eq_ignore_ascii_case(&name))
            {
                return Err(SqlError::new(
                    codes::NONUNIQ_TABLE,
                    format!("Not unique table/alias: '{name}'"),
                ));
            }
            list.push(Cte {
                name,
                columns: cte
                    .alias
                    .columns
                    .iter()
                    .map(|c| c.name.value.clone())
                    .collect(),
                query: (*cte.query).clone(),
            });
        }
        let visible = list.len();
        Ok(Ctes {
            list: list.into(),
            visible,
            named: std::rc::Rc::clone(&self.named),
        })
    }

    /// The expression `name` names (a one-part name), and those its own
    /// query may name: the ones before it.
    pub(super) fn find(&self, name: &ast::ObjectName) -> Option<(&Cte, Ctes)> {
        let [part] = name.0.as_slice() else {
            return None;
        };
        let ident = part.as_ident()?;
        let at = self.list[..self.visible]
            .iter()
            .rposition(|cte| cte.name.eq_ignore_ascii_case(&ident.value))?;
        let visible = Ctes {
            list: std::rc::Rc::clone(&self.list),
            visible: at,
            named: std::rc::Rc::clone(&self.named),
        };
        Some((&self.list[at], visible))
    }

    /// Counts one naming of an expression: an error past
    /// `MAX_CTE_NAMINGS` in the statement.
    pub(super) fn count_naming(&self) -> SqlResult<()> {
        let named = self.named.get() + 1;
        self.named.set(named);
        match named > MAX_CTE_NAMINGS {
            true => Err(SqlError::unsupported(format!(
                "more than {MAX_CTE_NAMINGS} namings of common table expressions in one statement"
            ))),
            false => Ok(()),
        }
    }
}

/// The table a derived table's rows are read as: named `alias`, its
/// columns the query's (each type as the result column's), its rows the
/// statement's subquery in `slot` (docs/design/0033-subqueries.md,
/// "Derived tables").
pub(super) fn derived_table(
    alias: &str,
    plan: &SelectPlan,
    slot: usize,
) -> SqlResult<Arc<SqlTable>> {
    let mut columns: Vec<SqlColumn> = Vec::with_capacity(plan.columns.len());
    for column in plan.columns.iter() {
        if columns
            .iter()
            .any(|c| c.name.eq_ignore_ascii_case(&column.name))
        {
            return Err(SqlError::new(
                codes::DUP_FIELDNAME,
                format!("Duplicate column name '{}'", column.name),
            ));
        }
        columns.push(SqlColumn {
            name: column.name.clone(),
            sql_type: column.kind.sql_type(),
            nullable: true,
            default: None,
            auto_increment: false,
        });
    }
    Ok(Arc::new(SqlTable {
        database: String::new(),
        name: alias.to_string(),
        table: Arc::new(client::Table::new(crate::catalog::made_table_def(
            alias.to_string(),
            &columns,
        ))),
        columns,
        auto_increment: None,
        declared: true,
        view: None,
        derived: Some(slot),
    }))
}
