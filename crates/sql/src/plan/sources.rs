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
    // A view's table is named as the view, in its database, whatever
    // its alias (`view`: its database and name).
    let mut derive_table =
        |view: Option<(&str, &str)>, alias: &str, plan: SelectPlan| -> SqlResult<TableOf> {
            if plan.lock != LockMode::CommittedRead {
                return Err(SqlError::unsupported("a locking read in a derived table"));
            }
            let (database, name) = view.unwrap_or(("", alias));
            let table = derived_table(database, name, &plan, derived_tables)?;
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
                derive_table(
                    None,
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
                derive_table(
                    None,
                    alias.as_ref().map_or(&cte.name, |a| &a.name.value),
                    plan,
                )
            }
            ast::TableFactor::Table { name, alias, .. } => {
                let (database, table) = table_name(name, database)?;
                if ctes.is_defining(&database, &table) {
                    return Err(SqlError::no_such_table(&database, &table));
                }
                let missing = match catalog.table(&database, &table) {
                    Ok(sql_table) => {
                        return Ok((
                            sql_table,
                            alias.as_ref().map(|a| a.name.value.clone()),
                            None,
                        ))
                    }
                    Err(error) if error.code == codes::NO_SUCH_TABLE => error,
                    Err(error) => return Err(error),
                };
                // Not a table: a view, or nothing.
                let Some(view) = catalog.view(&database, &table)? else {
                    return Err(missing);
                };
                let plan = view_plan(&view, catalog, placeholders, ctes)?;
                let alias = alias.as_ref().map_or(&view.name, |a| &a.name.value);
                derive_table(Some((&view.database, &view.name)), alias, plan)
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
                derive_table(None, &alias.name.value, plan)
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

/// The plan of `view`'s query, compiled in its database with its
/// columns' names; 1356 when it no longer compiles.
pub(crate) fn view_plan(
    view: &crate::views::View,
    catalog: &Catalog,
    placeholders: &mut Vec<(u64, u64)>,
    ctes: &Ctes,
) -> SqlResult<SelectPlan> {
    let inner = ctes.for_view(view)?;
    let query = view.parsed()?;
    let compiled = select_plan(
        &query,
        catalog,
        Some(&view.database),
        &[],
        placeholders,
        &inner,
    )
    .and_then(|mut plan| {
        recursive::name_columns(&mut plan, &view.columns)?;
        Ok(plan)
    });
    compiled.map_err(|error| match error.code {
        codes::NO_SUCH_TABLE | codes::BAD_FIELD | codes::VIEW_WRONG_LIST => SqlError::new(
            codes::VIEW_INVALID,
            format!(
                "View '{}.{}' references invalid table(s) or column(s) or function(s) or definer/invoker of view lack rights to use them",
                view.database, view.name
            ),
        ),
        _ => error,
    })
}

/// The table `view` reads as (for DESCRIBE and SHOW COLUMNS): its
/// columns with the types its query gives them.
pub fn view_table(view: &crate::views::View, catalog: &Catalog) -> SqlResult<Arc<SqlTable>> {
    let plan = view_plan(view, catalog, &mut Vec::new(), &Ctes::default())?;
    derived_table(&view.database, &view.name, &plan, 0)
}

/// The query of view `database.name`, compiled in `database` as CREATE
/// VIEW checks it: 1351 for a parameter, 1235 for a locking read, 1146
/// where it reads the view itself.
pub fn view_query(
    query: &ast::Query,
    catalog: &Catalog,
    database: &str,
    name: &str,
) -> SqlResult<SelectPlan> {
    let mut placeholders = Vec::new();
    let plan = select_plan(
        query,
        catalog,
        Some(database),
        &[],
        &mut placeholders,
        &Ctes::defining(database, name),
    )?;
    if !placeholders.is_empty() {
        return Err(SqlError::new(
            codes::VIEW_SELECT_VARIABLE,
            "View's SELECT contains a variable or parameter",
        ));
    }
    if plan.lock != LockMode::CommittedRead {
        return Err(SqlError::unsupported("a locking read in a view"));
    }
    Ok(plan)
}

/// A FROM clause's table: the table, its alias, and a derived table's
/// compiled query.
type TableOf = (Arc<SqlTable>, Option<String>, Option<SelectPlan>);
