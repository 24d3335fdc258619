//! A SELECT's FROM clause: its tables in order, each a table of the
//! catalog, a derived table, a common table expression (recursive or
//! not) or, inside a recursive one, its rows of the step before, with
//! the joins' kinds and conditions.

use super::ctes::{derived_table, Cte, Ctes};
use super::pushdown::{might_take, Derivation, FromEnclosing, Recipe};
use super::{last_ident, recursive, select_plan, select_plan_pushed, table_name, SelectPlan};
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
    /// How to compile that query again with conditions pushed into it
    /// (not for a recursive expression's).
    pub(super) recipe: Option<Recipe<'q>>,
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

/// The tables of `from`; `selection` is the WHERE clause, whose
/// conditions may be pushed into a derived table (design 0040).
pub(super) fn sources<'q>(
    from: &'q [ast::TableWithJoins],
    selection: Option<&ast::Expr>,
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
    let mut derive_table = |view: Option<(&str, &str)>,
                            alias: &str,
                            plan: SelectPlan,
                            recipe: Option<Recipe<'q>>|
     -> SqlResult<TableOf<'q>> {
        if plan.lock != LockMode::CommittedRead {
            return Err(SqlError::unsupported("a locking read in a derived table"));
        }
        let (database, name) = view.unwrap_or(("", alias));
        let table = derived_table(database, name, &plan, derived_tables)?;
        derived_tables += 1;
        Ok((table, Some(alias.to_string()), Some(plan), recipe))
    };
    // The WHERE's and the inner joins' ON conditions: a derived table
    // one of them may be pushed into is compiled first provisionally,
    // to be compiled again once they are known.
    let mut conditions: Vec<&ast::Expr> = selection.into_iter().collect();
    for item in from {
        for join in &item.joins {
            use ast::JoinOperator as J;
            if let J::Join(c) | J::Inner(c) | J::CrossJoin(c) | J::StraightJoin(c) =
                &join.join_operator
            {
                if let ast::JoinConstraint::On(on) = c {
                    conditions.push(on);
                }
            }
        }
    }
    let mut table_of = |factor: &'q ast::TableFactor, left: bool| -> SqlResult<TableOf<'q>> {
        let placeholders_before = placeholders.len();
        let spent_before = ctes.spent_so_far();
        let exposed = match factor {
            ast::TableFactor::Table { name, alias, .. } => alias
                .as_ref()
                .map_or_else(|| last_ident(name), |a| a.name.value.clone()),
            ast::TableFactor::Derived { alias, .. } => alias
                .as_ref()
                .map(|a| a.name.value.clone())
                .unwrap_or_default(),
            _ => String::new(),
        };
        let provisional = !left && might_take(&conditions, &exposed);
        let from_enclosing = FromEnclosing {
            pushed: &[],
            provisional,
        };
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
                    None,
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
                let (plan, recipe) = match recursive {
                    Some(mut plan) => {
                        recursive::name_columns(&mut plan, &cte.columns)?;
                        (plan, None)
                    }
                    None => {
                        let plan = cte_plan(
                            cte,
                            &visible,
                            catalog,
                            database,
                            placeholders,
                            from_enclosing,
                        )?;
                        let recipe = Recipe {
                            derivation: Derivation::Cte(name),
                            placeholders_before,
                            spent_before,
                            provisional,
                        };
                        (plan, Some(recipe))
                    }
                };
                derive_table(
                    None,
                    alias.as_ref().map_or(&cte.name, |a| &a.name.value),
                    plan,
                    recipe,
                )
            }
            ast::TableFactor::Table { name, alias, .. } => {
                let (database, table) = table_name(name, database)?;
                if ctes.is_defining(&database, &table) {
                    return Err(SqlError::no_such_table(&database, &table));
                }
                // A table, else a view, else 1146.
                let view = match catalog.table_or_view(&database, &table)? {
                    Ok(sql_table) => {
                        return Ok((
                            sql_table,
                            alias.as_ref().map(|a| a.name.value.clone()),
                            None,
                            None,
                        ))
                    }
                    Err(view) => view,
                };
                let plan = view_plan(&view, catalog, placeholders, ctes, from_enclosing)?;
                let alias = alias.as_ref().map_or(&view.name, |a| &a.name.value).clone();
                let (database, name) = (view.database.clone(), view.name.clone());
                let recipe = Recipe {
                    derivation: Derivation::View(view),
                    placeholders_before,
                    spent_before,
                    provisional,
                };
                derive_table(Some((&database, &name)), &alias, plan, Some(recipe))
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
                let plan = select_plan_pushed(
                    subquery,
                    catalog,
                    database,
                    &[],
                    placeholders,
                    ctes,
                    from_enclosing,
                )?;
                let recipe = Recipe {
                    derivation: Derivation::Subquery(subquery),
                    placeholders_before,
                    spent_before,
                    provisional,
                };
                derive_table(None, &alias.name.value, plan, Some(recipe))
            }
            other => Err(SqlError::unsupported(format!("FROM {other}"))),
        }
    };
    if is_dual(from) {
        return Ok(Vec::new());
    }
    let mut sources = Vec::new();
    for item in from {
        let (table, alias, derived, recipe) = table_of(&item.relation, false)?;
        sources.push(Source {
            table,
            alias,
            left: false,
            on: None,
            using: Vec::new(),
            derived,
            recipe,
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
            let (table, alias, derived, recipe) = table_of(&join.relation, left)?;
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
                recipe,
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

/// The plan of common table expression `cte` (not a recursive one's),
/// compiled with the expressions it may name (`visible`) and what the
/// query naming it gives it, its columns named by its column list.
pub(super) fn cte_plan(
    cte: &Cte,
    visible: &Ctes,
    catalog: &Catalog,
    database: Option<&str>,
    placeholders: &mut Vec<(u64, u64)>,
    from_enclosing: FromEnclosing<'_>,
) -> SqlResult<SelectPlan> {
    let mut plan = select_plan_pushed(
        &cte.query,
        catalog,
        database,
        &[],
        placeholders,
        visible,
        from_enclosing,
    )?;
    recursive::name_columns(&mut plan, &cte.columns)?;
    Ok(plan)
}

/// The plan of `view`'s query, compiled in its database with its
/// columns' names and what the query reading it gives it (design
/// 0040); 1356 when it no longer compiles.
pub(super) fn view_plan(
    view: &crate::views::View,
    catalog: &Catalog,
    placeholders: &mut Vec<(u64, u64)>,
    ctes: &Ctes,
    from_enclosing: FromEnclosing<'_>,
) -> SqlResult<SelectPlan> {
    let inner = ctes.for_view(view)?;
    let query = view.parsed()?;
    let compiled = select_plan_pushed(
        &query,
        catalog,
        Some(&view.database),
        &[],
        placeholders,
        &inner,
        from_enclosing,
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
    let plan = view_plan(
        view,
        catalog,
        &mut Vec::new(),
        &Ctes::default(),
        FromEnclosing::default(),
    )?;
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
/// compiled query and how to compile it again.
type TableOf<'q> = (
    Arc<SqlTable>,
    Option<String>,
    Option<SelectPlan>,
    Option<Recipe<'q>>,
);
