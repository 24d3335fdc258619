//! A SELECT's FROM clause: its tables in order, each a table of the
//! catalog, a derived table, a common table expression (recursive or
//! not) or, inside a recursive one, its rows of the step before, with
//! the joins' kinds and conditions.

use super::ctes::{derived_table, Ctes};
use super::{last_ident, recursive, select_plan, table_name, SelectPlan};
use crate::catalog::{Catalog, SqlTable};
use crate::error::{codes, SqlError, SqlResult};
use client::LockMode;
use sqlparser::ast;
use std::sync::Arc;

/// A table of a SELECT's FROM clause, before compiling.
pub(super) struct Source<'q> {
    pub(super) table: Arc<SqlTable>,
    pub(super) alias: Option<String>,
    /// LEFT JOIN (else an inner join, or the first table).
    pub(super) left: bool,
    /// Its ON clause.
    pub(super) on: Option<&'q ast::Expr>,
    /// USING's columns.
    pub(super) using: Vec<String>,
    /// A derived table's query, compiled: it goes to the statement's
    /// subqueries, in the slot `table.derived` names.
    pub(super) derived: Option<SelectPlan>,
}

/// The tables of a FROM clause, in order: the first, then each joined.
/// `FROM DUAL`: no table (MySQL's word for a SELECT of constants; pools
/// validate connections with `SELECT 1 FROM DUAL`). A quoted `DUAL` is a
/// table's name.
fn is_dual(from: &[ast::TableWithJoins]) -> bool {
    let [ast::TableWithJoins {
        relation: ast::TableFactor::Table {
            name, alias: None, ..
        },
        joins,
    }] = from
    else {
        return false;
    };
    let [part] = name.0.as_slice() else {
        return false;
    };
    joins.is_empty()
        && part.as_ident().is_some_and(|ident| {
            ident.quote_style.is_none() && ident.value.eq_ignore_ascii_case("DUAL")
        })
}

pub(super) fn sources<'q>(
    from: &'q [ast::TableWithJoins],
    catalog: &Catalog,
    database: Option<&str>,
    placeholders: &mut Vec<(u64, u64)>,
    ctes: &Ctes,
) -> SqlResult<Vec<Source<'q>>> {
    let mut derived_tables = 0;
    // A derived table's (or a common table expression's) plan as a
    // table named `alias`, in the next subquery slot.
    let mut derive = |alias: &str, plan: SelectPlan| -> SqlResult<TableOf> {
        if plan.lock != LockMode::CommittedRead {
            return Err(SqlError::unsupported("a locking read in a derived table"));
        }
        let table = derived_table(alias, &plan, derived_tables)?;
        derived_tables += 1;
        Ok((table, Some(alias.to_string()), Some(plan)))
    };
    let mut table_of = |factor: &ast::TableFactor| -> SqlResult<TableOf> {
        match factor {
            // A common table expression: a derived table of its query,
            // compiled where it is named (each naming its own run).
            // Inside a recursive expression's recursive SELECT, its own
            // name: the rows of the step before.
            ast::TableFactor::Table { name, alias, .. } if ctes.working(name).is_some() => {
                let working = ctes.working(name).expect("found above");
                working.references.set(working.references.get() + 1);
                let Some(mut plan) = working.anchor.clone() else {
                    return Err(SqlError::new(
                        codes::UNKNOWN_ERROR,
                        "internal: a probe for a recursive expression's name",
                    ));
                };
                plan.working_table = true;
                derive(
                    alias.as_ref().map_or(&working.name, |a| &a.name.value),
                    plan,
                )
            }
            ast::TableFactor::Table { name, alias, .. } if ctes.find(name).is_some() => {
                let (cte, visible) = ctes.find(name).expect("found above");
                ctes.count_naming()?;
                let recursive = match cte.recursive {
                    true => {
                        recursive::recursive_plan(cte, &visible, catalog, database, placeholders)?
                    }
                    false => None,
                };
                let mut plan = match recursive {
                    Some(plan) => plan,
                    None => {
                        select_plan(&cte.query, catalog, database, &[], placeholders, &visible)?
                    }
                };
                recursive::name_columns(&mut plan, &cte.columns)?;
                derive(alias.as_ref().map_or(&cte.name, |a| &a.name.value), plan)
            }
            ast::TableFactor::Table { name, alias, .. } => {
                let (database, table) = table_name(name, database)?;
                let sql_table = catalog.table(&database, &table)?;
                Ok((
                    sql_table,
                    alias.as_ref().map(|a| a.name.value.clone()),
                    None,
                ))
            }
            ast::TableFactor::Derived {
                lateral: false,
                subquery,
                alias,
            } => {
                let Some(alias) = alias else {
                    return Err(SqlError::new(
                        codes::DERIVED_MUST_HAVE_ALIAS,
                        "Every derived table must have its own alias",
                    ));
                };
                if !alias.columns.is_empty() {
                    return Err(SqlError::unsupported("a derived table's column list"));
                }
                // Its own query: no enclosing row to read (not LATERAL).
                let plan = select_plan(subquery, catalog, database, &[], placeholders, ctes)?;
                derive(&alias.name.value, plan)
            }
            other => Err(SqlError::unsupported(format!("FROM {other}"))),
        }
    };
    if is_dual(from) {
        return Ok(Vec::new());
    }
    let mut sources = Vec::new();
    for item in from {
        let (table, alias, derived) = table_of(&item.relation)?;
        sources.push(Source {
            table,
            alias,
            left: false,
            on: None,
            using: Vec::new(),
            derived,
        });
        for join in &item.joins {
            use ast::JoinOperator as J;
            let (left, constraint) = match &join.join_operator {
                J::Join(c) | J::Inner(c) | J::CrossJoin(c) | J::StraightJoin(c) => (false, c),
                J::Left(c) | J::LeftOuter(c) => (true, c),
                other => {
                    let text = format!("{other:?}");
                    let kind = text.split('(').next().unwrap_or("this");
                    return Err(SqlError::unsupported(format!("{kind} joins")));
                }
            };
            let (table, alias, derived) = table_of(&join.relation)?;
            let (on, using) = match constraint {
                ast::JoinConstraint::On(on) => (Some(on), Vec::new()),
                ast::JoinConstraint::Using(columns) => {
                    (None, columns.iter().map(last_ident).collect())
                }
                ast::JoinConstraint::None => (None, Vec::new()),
                ast::JoinConstraint::Natural => return Err(SqlError::unsupported("NATURAL joins")),
            };
            sources.push(Source {
                table,
                alias,
                left,
                on,
                using,
                derived,
            });
        }
    }
    for (index, source) in sources.iter().enumerate() {
        let name = source.alias.as_deref().unwrap_or(&source.table.name);
        let repeated = sources[..index].iter().any(|earlier| {
            earlier
                .alias
                .as_deref()
                .unwrap_or(&earlier.table.name)
                .eq_ignore_ascii_case(name)
        });
        if repeated {
            return Err(SqlError::new(
                codes::NONUNIQ_TABLE,
                format!("Not unique table/alias: '{name}'"),
            ));
        }
    }
    Ok(sources)
}

/// A FROM clause's table: the table, its alias, and a derived table's
/// compiled query.
type TableOf = (Arc<SqlTable>, Option<String>, Option<SelectPlan>);
