//! Plans: a SELECT, INSERT, UPDATE or DELETE compiled once against the
//! catalog into what the executor runs, with its parameters left as
//! slots (docs/design/0027-sql-node.md, "Plans"). The access path is
//! chosen from the WHERE clause's conjuncts (`access_path`); INSERT's
//! forms compile in `insert`.
//!
//! The WHERE clause is always evaluated again on the rows that come back,
//! so an access path only needs to return a superset; what of it the data
//! nodes can evaluate is pushed to them as a filter at execution, once
//! the parameters are known (`access`).

use crate::catalog::{Catalog, SqlTable};
use crate::error::{codes, SqlError, SqlResult};
use crate::expr::{Aggregate, Compiler, Expr, Scope};
use crate::result::OutputColumn;
use crate::value::Value;
use client::{CompareOp, LockMode, LockWait};
use sqlparser::ast;
use std::sync::Arc;

mod access_path;
mod ctes;
mod describe;
mod insert;
mod joined_write;
mod outer_joins;
mod pushdown;
mod recursive;
mod sources;
mod union;
mod visit;
mod write;

use access_path::scan_order;
pub use access_path::{choose_access, flip, split_and};
pub use ctes::{Cte, Ctes};
use describe::describe_output;
use insert::compile_insert;
pub use recursive::RecursivePlan;
use sources::{sources, Source};
pub use sources::{view_query, view_table};
use union::union_plan;
pub use union::{SetKind, SetOperation, SetStep, UnionPlan};
use visit::has_correlated_subquery;
pub use visit::{outer_columns, reads_outer_anywhere};
use write::{joined, single_table, write_plan};

/// One end of a range.
#[derive(Clone, Debug, PartialEq)]
pub struct RangeEnd {
    /// The bound (a constant once bound).
    pub value: Expr,
    /// Whether the bound itself is in the range.
    pub inclusive: bool,
}

/// A range of an index: equal values for its first columns, then
/// optional ends on the next one.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexRange {
    /// Values of the leading columns.
    pub prefix: Vec<Expr>,
    /// The low end on the next column.
    pub low: Option<RangeEnd>,
    /// The high end on the next column.
    pub high: Option<RangeEnd>,
}

/// How a statement reaches its rows.
#[derive(Clone, Debug, PartialEq)]
pub enum AccessPlan {
    /// No table (SELECT without FROM).
    NoTable,
    /// One primary key.
    PrimaryKey(Vec<Expr>),
    /// Several primary keys, looked up in one batch.
    PrimaryKeys(Vec<Vec<Expr>>),
    /// A unique index's values.
    UniqueKey {
        /// The index.
        index: String,
        /// Its columns' values.
        values: Vec<Expr>,
    },
    /// Ranges of the primary key (`index` None) or of an ordered index.
    Ranges {
        /// The index (None: the primary key).
        index: Option<String>,
        /// The ranges.
        ranges: Vec<IndexRange>,
    },
    /// Every row.
    FullScan,
}

impl AccessPlan {
    /// What EXPLAIN calls it.
    pub fn describe(&self) -> String {
        match self {
            AccessPlan::NoTable => "no table".into(),
            AccessPlan::PrimaryKey(_) => "primary key lookup".into(),
            AccessPlan::PrimaryKeys(keys) => {
                format!("batched primary key lookups ({})", keys.len())
            }
            AccessPlan::UniqueKey { index, .. } => format!("unique index lookup ({index})"),
            AccessPlan::Ranges {
                index: None,
                ranges,
            } => {
                format!(
                    "primary key range scan ({} range{})",
                    ranges.len(),
                    plural(ranges.len())
                )
            }
            AccessPlan::Ranges {
                index: Some(index),
                ranges,
            } => format!(
                "index range scan ({index}, {} range{})",
                ranges.len(),
                plural(ranges.len())
            ),
            AccessPlan::FullScan => "full scan".into(),
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// A compiled SELECT.
#[derive(Clone, Debug)]
pub struct SelectPlan {
    /// Its subqueries, by slot (`Expr::Subquery`).
    pub subqueries: Vec<SubqueryPlan>,
    /// The first table (None without FROM).
    pub table: Option<Arc<SqlTable>>,
    /// How the first table's rows are reached.
    pub access: AccessPlan,
    /// The WHERE clause, over the joined row (with a join, the inner
    /// joins' ON clauses too).
    pub filter: Option<Expr>,
    /// The part of it on the first table alone, which its fetch pushes
    /// where it can (the whole WHERE without a join).
    pub scan_filter: Option<Expr>,
    /// The tables joined to the first, in order; a joined row is every
    /// table's row end to end.
    pub joins: Vec<JoinPlan>,
    /// Columns of the joined row.
    pub width: usize,
    /// GROUP BY's expressions.
    pub group_by: Vec<Expr>,
    /// HAVING, over a group's first row and its aggregates.
    pub having: Option<Expr>,
    /// The aggregates (over each group's rows); the output then reads them.
    pub aggregates: Vec<Aggregate>,
    /// The output expressions.
    pub output: Vec<Expr>,
    /// Their columns.
    pub columns: Arc<[OutputColumn]>,
    /// SELECT DISTINCT.
    pub distinct: bool,
    /// ORDER BY: expressions over the row (or the aggregates), descending.
    pub order_by: Vec<(Expr, bool)>,
    /// LIMIT.
    pub limit: Option<u64>,
    /// OFFSET.
    pub offset: u64,
    /// LIMIT or OFFSET given as `?` in a prepared statement: their
    /// slots, bound at each execution (`SelectPlan::with_limits`).
    /// Until then a LIMIT parameter stands in `limit` as `u64::MAX`, so
    /// that what the plan chose for a LIMIT holds.
    pub limit_parameters: Option<LimitParameters>,
    /// The access path's own order gives ORDER BY's (`Some(descending)`):
    /// a scan read in that order can stop after LIMIT + OFFSET rows (and
    /// a locking one lock only those), where any other must read every
    /// row to sort them (`scan_order`).
    pub scan_order: Option<bool>,
    /// FOR UPDATE / FOR SHARE.
    pub lock: LockMode,
    /// NOWAIT / SKIP LOCKED: what a row another transaction holds
    /// locked does to the locking read.
    pub lock_wait: LockWait,
    /// Columns of the first table the statement reads (the rest need not
    /// come back).
    pub needed: Vec<usize>,
    /// This SELECT is the first of a UNION, INTERSECT or EXCEPT: the
    /// others, and what is done with all their rows. `columns` are then
    /// the whole's.
    pub union: Option<Box<UnionPlan>>,
    /// This SELECT (with its union, if any) is the non-recursive part of
    /// a recursive common table expression: the recursive SELECTs that
    /// run over the rows of the step before until none come.
    pub recursive: Option<Box<RecursivePlan>>,
    /// This plan stands for a recursive common table expression's rows
    /// of the step before, inside its recursive SELECTs: never run, its
    /// rows given by the step (its `columns` are the expression's).
    pub working_table: bool,
    /// Its window functions, by slot: each row's results follow its
    /// aggregates' (`output` and `order_by` read window `w` as aggregate
    /// slot `aggregates.len() + w`).
    pub windows: Vec<crate::expr::WindowFunction>,
}

/// The parameter slots of a SELECT's `LIMIT ?` and `OFFSET ?`.
#[derive(Clone, Copy, Debug, Default)]
pub struct LimitParameters {
    /// LIMIT's slot.
    pub limit: Option<usize>,
    /// OFFSET's slot.
    pub offset: Option<usize>,
}

impl WritePlan {
    /// Its LIMIT, the parameter's value bound (error 1210 for a value
    /// that is not a count).
    pub fn limit_for(&self, params: &[Value]) -> SqlResult<Option<u64>> {
        match self.limit_parameter {
            Some(slot) => count_parameter(params, slot).map(Some),
            None => Ok(self.limit),
        }
    }
}

impl SelectPlan {
    /// The plan with its LIMIT and OFFSET parameters bound to `params`
    /// (by slot): error 1210 for a value that is not a count.
    pub fn with_limits(&self, params: &[Value]) -> SqlResult<SelectPlan> {
        let mut plan = self.clone();
        let Some(parameters) = plan.limit_parameters.take() else {
            return Ok(plan);
        };
        let count = |slot: usize| count_parameter(params, slot);
        if let Some(slot) = parameters.limit {
            plan.limit = Some(count(slot)?);
        }
        if let Some(slot) = parameters.offset {
            plan.offset = count(slot)?;
        }
        Ok(plan)
    }
}

/// What an INSERT does with a row whose primary key or unique index
/// value a row of the table already has.
#[derive(Debug)]
pub enum Conflict {
    /// Fails with 1062 (INSERT).
    Error,
    /// Skips the row (INSERT IGNORE).
    Ignore,
    /// Deletes the rows in the way, then inserts (REPLACE).
    Replace,
    /// Updates the row in the way with these assignments (ON DUPLICATE
    /// KEY UPDATE); they read the existing row as columns 0.., and the
    /// row that was to be inserted (`VALUES(c)`) after it.
    Update(Vec<(usize, Expr)>),
}

/// A compiled INSERT (or REPLACE).
#[derive(Debug)]
pub struct InsertPlan {
    /// The table.
    pub table: Arc<SqlTable>,
    /// The column each value of a row goes to.
    pub targets: Vec<usize>,
    /// The rows (`None`: DEFAULT).
    pub rows: Vec<Vec<Option<Expr>>>,
    /// INSERT ... SELECT: the rows are this query's.
    pub select: Option<Box<SelectPlan>>,
    /// What a row that meets an existing key does.
    pub conflict: Conflict,
}

/// A compiled UPDATE or DELETE.
#[derive(Debug)]
pub struct WritePlan {
    /// The table.
    pub table: Arc<SqlTable>,
    /// How the rows are reached.
    pub access: AccessPlan,
    /// The WHERE clause.
    pub filter: Option<Expr>,
    /// UPDATE's assignments (empty for DELETE).
    pub assignments: Vec<(usize, Expr)>,
    /// LIMIT.
    pub limit: Option<u64>,
    /// `LIMIT ?`: the parameter's slot, bound at each execution
    /// (`WritePlan::limit_for`).
    pub limit_parameter: Option<usize>,
    /// DELETE's ORDER BY: the rows are taken in this order (with LIMIT,
    /// the first ones).
    pub order_by: Vec<(Expr, bool)>,
    /// An UPDATE of one row by its whole primary key whose assignments
    /// each add a constant to an INT or BIGINT column (`SET k = k + 1`):
    /// the columns and deltas, which an autocommit statement sends to the
    /// data node to add, in one round trip instead of a read and a write
    /// (`increments_of`).
    pub increments: Option<Vec<(usize, i64)>>,
    /// The subqueries of its WHERE clause and assignments, by slot.
    pub subqueries: Vec<SubqueryPlan>,
    /// A multi-table UPDATE or DELETE: the join that finds the rows,
    /// locking them, whose output is the table's whole row and then each
    /// assignment's value (which the assignments, `Column(width + i)`,
    /// read); `access`, `filter` and the rest are then unused
    /// (`joined_write`).
    pub joined: Option<Box<SelectPlan>>,
}

/// A compiled statement of the data kind.
#[derive(Debug)]
pub enum Plan {
    /// SELECT.
    Select(Box<SelectPlan>),
    /// INSERT.
    Insert(InsertPlan),
    /// UPDATE.
    Update(WritePlan),
    /// DELETE.
    Delete(WritePlan),
}

/// A plan and how its parameters map to slots.
#[derive(Debug)]
pub struct Compiled {
    /// The plan.
    pub plan: Plan,
    /// For each slot, the parameter's position in the statement.
    pub parameter_order: Vec<usize>,
    /// A write that goes through a view to its table
    /// (`views::write_through`): compiled again at each execution, as a
    /// plan that reads one (`Compiled::names_view`).
    pub through_view: bool,
}

impl Compiled {
    /// The tables the plan reads or writes (to drop from the cache when stale).
    pub fn table(&self) -> Option<&Arc<SqlTable>> {
        match &self.plan {
            Plan::Select(select) => select.table.as_ref(),
            Plan::Insert(insert) => Some(&insert.table),
            Plan::Update(write) | Plan::Delete(write) => Some(&write.table),
        }
    }

    /// Whether the plan reads a view: its plan holds the view's query as
    /// it was when compiled, so a prepared statement compiles it again
    /// each time (a view replaced or dropped meanwhile, on any SQL node,
    /// is then seen).
    pub fn names_view(&self) -> bool {
        if self.through_view {
            return true;
        }
        fn reads_view(select: &SelectPlan) -> bool {
            select
                .table
                .iter()
                .chain(select.joins.iter().map(|join| &join.table))
                .any(|table| table.is_view())
                || select
                    .subqueries
                    .iter()
                    .any(|subquery| reads_view(&subquery.plan))
                || select
                    .union
                    .iter()
                    .flat_map(|union| union.all_parts())
                    .any(reads_view)
                || select
                    .recursive
                    .iter()
                    .flat_map(|recursive| &recursive.steps)
                    .any(reads_view)
        }
        match &self.plan {
            Plan::Select(select) => reads_view(select),
            Plan::Insert(insert) => insert.select.as_deref().is_some_and(reads_view),
            Plan::Update(write) | Plan::Delete(write) => {
                write
                    .subqueries
                    .iter()
                    .any(|subquery| reads_view(&subquery.plan))
                    || write.joined.as_deref().is_some_and(reads_view)
            }
        }
    }

    /// The parameters in slot order, from the values in statement order.
    pub fn bind(&self, params: &[Value]) -> SqlResult<Vec<Value>> {
        if params.len() != self.parameter_order.len() {
            return Err(SqlError::new(
                codes::WRONG_ARGUMENTS,
                format!(
                    "Incorrect arguments to EXECUTE: {} parameters for {} placeholders",
                    params.len(),
                    self.parameter_order.len()
                ),
            ));
        }
        Ok(self
            .parameter_order
            .iter()
            .map(|p| params[*p].clone())
            .collect())
    }
}

/// A table named in a statement, resolved against the current database.
pub fn table_name(name: &ast::ObjectName, database: Option<&str>) -> SqlResult<(String, String)> {
    let parts: Vec<&str> = name
        .0
        .iter()
        .filter_map(|part| part.as_ident().map(|ident| ident.value.as_str()))
        .collect();
    match parts.as_slice() {
        [table] => match database {
            Some(database) => Ok((database.to_string(), table.to_string())),
            None => Err(SqlError::new(codes::NO_DB, "No database selected")),
        },
        [database, table] => Ok((database.to_string(), table.to_string())),
        _ => Err(SqlError::parse(format!("bad table name {name}"))),
    }
}

/// Compiles a data statement (SELECT, INSERT, UPDATE, DELETE); `None`
/// for any other kind.
pub fn compile(
    statement: &ast::Statement,
    catalog: &Catalog,
    database: Option<&str>,
) -> SqlResult<Option<Compiled>> {
    match compile_statement(statement, catalog, database) {
        // A write to a view goes to its table (MySQL's updatable views):
        // looked for only once the planner found the name a view's
        // (`Catalog::not_a_table`), so a write to a table pays nothing.
        Err(missing)
            if matches!(
                missing.code,
                codes::NON_INSERTABLE_TABLE | codes::NON_UPDATABLE_TABLE
            ) =>
        {
            match crate::views::write_through(statement, catalog, database)? {
                Some(rewritten) => {
                    Ok(compile(&rewritten, catalog, database)?.map(|mut compiled| {
                        compiled.through_view = true;
                        compiled
                    }))
                }
                None => Err(missing),
            }
        }
        compiled => compiled,
    }
}

fn compile_statement(
    statement: &ast::Statement,
    catalog: &Catalog,
    database: Option<&str>,
) -> SqlResult<Option<Compiled>> {
    Ok(Some(match statement {
        ast::Statement::Query(query) => compile_select(query, catalog, database)?,
        ast::Statement::Insert(insert) => compile_insert(insert, catalog, database)?,
        ast::Statement::Update {
            table,
            assignments,
            from: None,
            selection,
            returning: None,
            or: None,
            limit,
        } => {
            if !table.joins.is_empty() {
                if limit.is_some() {
                    return Err(SqlError::new(
                        codes::WRONG_USAGE,
                        "Incorrect usage of UPDATE and LIMIT",
                    ));
                }
                return Ok(Some(joined(
                    std::slice::from_ref(table),
                    selection.as_ref(),
                    joined_write::Target::Assigned(assignments),
                    catalog,
                    database,
                    true,
                )?));
            }
            let (sql_table, alias) = single_table(table, catalog, database, "UPDATE")?;
            let mut compiler = Compiler::new(Some(&sql_table), alias.as_deref());
            compiler.set_subquery_context(catalog, database);
            compiler.place = "field list";
            let mut compiled_assignments = Vec::new();
            for assignment in assignments {
                let ast::AssignmentTarget::ColumnName(name) = &assignment.target else {
                    return Err(SqlError::unsupported("tuple assignments"));
                };
                let column = last_ident(name);
                let index = sql_table
                    .column_index(&column)
                    .ok_or_else(|| SqlError::bad_field(&column, "field list"))?;
                crate::generated::refuse_assignment(&sql_table, index)?;
                compiled_assignments.push((index, compiler.compile(&assignment.value)?));
            }
            write_plan(
                &sql_table,
                compiler,
                selection.as_ref(),
                limit.as_ref(),
                &[],
                compiled_assignments,
            )?
        }
        ast::Statement::Delete(delete) => {
            let from = match &delete.from {
                ast::FromTable::WithFromKeyword(from) | ast::FromTable::WithoutKeyword(from) => {
                    from
                }
            };
            if !delete.tables.is_empty() || delete.using.is_some() || from.len() != 1 {
                if delete.limit.is_some() || !delete.order_by.is_empty() {
                    return Err(SqlError::new(
                        codes::WRONG_USAGE,
                        "Incorrect usage of DELETE and ORDER BY or LIMIT",
                    ));
                }
                // `DELETE t FROM <join>`, or `DELETE FROM t USING <join>`.
                let (target, source) = match (&delete.tables[..], &delete.using) {
                    ([target], None) => (target, from),
                    ([], Some(using)) if from.len() == 1 && from[0].joins.is_empty() => {
                        let ast::TableFactor::Table { name, .. } = &from[0].relation else {
                            return Err(SqlError::unsupported("DELETE FROM a derived table"));
                        };
                        (name, using)
                    }
                    _ => {
                        return Err(SqlError::unsupported(
                            "DELETE of more than one table in one statement",
                        ))
                    }
                };
                return Ok(Some(joined(
                    source,
                    delete.selection.as_ref(),
                    joined_write::Target::Named(target),
                    catalog,
                    database,
                    false,
                )?));
            }
            let (sql_table, alias) = single_table(&from[0], catalog, database, "DELETE")?;
            let mut compiler = Compiler::new(Some(&sql_table), alias.as_deref());
            compiler.set_subquery_context(catalog, database);
            write_plan(
                &sql_table,
                compiler,
                delete.selection.as_ref(),
                delete.limit.as_ref(),
                &delete.order_by,
                Vec::new(),
            )?
        }
        _ => return Ok(None),
    }))
}

pub(crate) fn last_ident(name: &ast::ObjectName) -> String {
    name.0
        .last()
        .and_then(|part| part.as_ident())
        .map(|ident| ident.value.clone())
        .unwrap_or_default()
}

fn constant_count(expr: &ast::Expr) -> SqlResult<u64> {
    match expr {
        ast::Expr::Value(value) => match &value.value {
            ast::Value::Number(text, _) => text
                .parse()
                .map_err(|_| SqlError::parse(format!("bad LIMIT {text}"))),
            _ => Err(SqlError::unsupported(format!("LIMIT {expr}"))),
        },
        _ => Err(SqlError::unsupported(format!("LIMIT {expr}"))),
    }
}

/// The expressions a window function reads.
fn window_exprs(window: &crate::expr::WindowFunction) -> impl Iterator<Item = &Expr> {
    window
        .arguments
        .iter()
        .chain(&window.partition_by)
        .chain(window.order_by.iter().map(|(e, _)| e))
}

/// Whether `expr` reads a window function's result.
fn reads_window(expr: &Expr) -> bool {
    has_leaf(expr, |leaf| matches!(leaf, Expr::Window(_)))
}

/// Whether `expr` has a leaf (a column, an earlier table's column, a
/// window result) that `wanted` picks.
fn has_leaf(expr: &Expr, wanted: impl Fn(&Expr) -> bool) -> bool {
    let mut found = false;
    expr.transform(&mut |leaf| {
        found |= wanted(leaf);
        Some(leaf.clone())
    });
    found
}

/// The conjuncts of `expr` (an AND's parts), owned.
fn conjuncts_of(expr: Option<&Expr>) -> Vec<Expr> {
    let mut parts = Vec::new();
    if let Some(expr) = expr {
        split_and(expr, &mut parts);
    }
    parts.into_iter().cloned().collect()
}

/// The AND of `parts` (`None` when there are none).
fn and_of(parts: Vec<Expr>) -> Option<Expr> {
    parts
        .into_iter()
        .reduce(|a, b| Expr::And(Box::new(a), Box::new(b)))
}

/// `expr` over one table of a join's row (its columns at `offset`,
/// `width` of them): its columns renumbered from 0, an earlier table's
/// as `Outer`; `None` when it reads a later table.
fn localize(expr: &Expr, offset: usize, width: usize) -> Option<Expr> {
    expr.transform(&mut |leaf| match leaf {
        Expr::Column(index) if *index >= offset + width => None,
        Expr::Column(index) if *index >= offset => Some(Expr::Column(index - offset)),
        Expr::Column(index) => Some(Expr::Outer(*index)),
        other => Some(other.clone()),
    })
}

/// Whether `expr` reads an earlier table's column (`Outer`).
fn reads_outer(expr: &Expr) -> bool {
    has_leaf(expr, |leaf| matches!(leaf, Expr::Outer(_)))
}

/// The highest column `expr` reads, if any.
fn last_column(expr: &Expr) -> Option<usize> {
    let mut columns = Vec::new();
    collect_columns(expr, &mut columns);
    columns.into_iter().max()
}

/// How one joined table is read, for each row of the tables before it.
#[derive(Clone, Debug)]
pub struct JoinPlan {
    /// The table.
    pub table: Arc<SqlTable>,
    /// Where its columns start in the joined row.
    pub offset: usize,
    /// LEFT JOIN: a row of the earlier tables with no match is kept,
    /// this table's columns NULL.
    pub left: bool,
    /// How its rows are reached; `Outer` columns stand for the earlier
    /// tables' values (bound per row).
    pub access: AccessPlan,
    /// Whether `access` reads the earlier tables' values: else its rows
    /// are fetched once for all the earlier rows.
    pub correlated: bool,
    /// What a pair of an earlier row and one of this table's rows must
    /// satisfy to be joined (over the joined row): a LEFT JOIN's ON, an
    /// inner join's conditions that read this table and no later one.
    pub condition: Option<Expr>,
    /// The conditions on this table alone (its own column numbers), which
    /// the data nodes may evaluate.
    pub scan_filter: Option<Expr>,
    /// Its columns the statement reads.
    pub needed: Vec<usize>,
}

fn compile_select(
    query: &ast::Query,
    catalog: &Catalog,
    database: Option<&str>,
) -> SqlResult<Compiled> {
    let mut placeholders = Vec::new();
    let plan = select_plan(
        query,
        catalog,
        database,
        &[],
        &mut placeholders,
        &Ctes::default(),
    )?;
    Ok(Compiled {
        through_view: false,
        parameter_order: crate::expr::parameter_order_of(&placeholders),
        plan: Plan::Select(Box::new(plan)),
    })
}

/// A subquery of a statement: its plan, and whether it reads the
/// enclosing query's row (`Outer` columns), which makes it run once per
/// row instead of once (docs/design/0033-subqueries.md).
#[derive(Clone, Debug)]
pub struct SubqueryPlan {
    /// The query.
    pub plan: Box<SelectPlan>,
    /// It reads the enclosing query's row.
    pub correlated: bool,
    /// An UPDATE's assignment reads it: its values are to be stored, so
    /// a warning it raises is an error, also when it runs before the
    /// statement (design 0027, "Warnings").
    pub stored: bool,
}

/// Compiles a SELECT: over `outer`'s tables too when it is a subquery
/// (their columns become `Outer`), its placeholders numbered in
/// `placeholders` with the enclosing statement's.
pub(crate) fn select_plan(
    query: &ast::Query,
    catalog: &Catalog,
    database: Option<&str>,
    outer: &[Scope<'_>],
    placeholders: &mut Vec<(u64, u64)>,
    ctes: &Ctes,
) -> SqlResult<SelectPlan> {
    select_plan_pushed(
        query,
        catalog,
        database,
        outer,
        placeholders,
        ctes,
        pushdown::FromEnclosing::default(),
    )
}

/// `select_plan` of a derived table's query, with what the enclosing
/// query gives it (design 0040): conditions over its output columns
/// that the enclosing query checks on its rows too, which it applies
/// where they give the same rows, and whether this is a provisional
/// first compiling.
fn select_plan_pushed(
    query: &ast::Query,
    catalog: &Catalog,
    database: Option<&str>,
    outer: &[Scope<'_>],
    placeholders: &mut Vec<(u64, u64)>,
    ctes: &Ctes,
    from_enclosing: pushdown::FromEnclosing<'_>,
) -> SqlResult<SelectPlan> {
    let extended;
    let ctes = match &query.with {
        None => ctes,
        Some(with) => {
            extended = ctes.with(with)?;
            &extended
        }
    };
    let select = match query.body.as_ref() {
        ast::SetExpr::Select(select) => select,
        ast::SetExpr::SetOperation { .. } => {
            return union_plan(
                query,
                catalog,
                database,
                outer,
                placeholders,
                ctes,
                from_enclosing,
            )
        }
        // `(SELECT ...)`: the parenthesized query alone.
        ast::SetExpr::Query(inner)
            if query.order_by.is_none()
                && query.limit_clause.is_none()
                && query.locks.is_empty() =>
        {
            return select_plan_pushed(
                inner,
                catalog,
                database,
                outer,
                placeholders,
                ctes,
                from_enclosing,
            )
        }
        other => return Err(SqlError::unsupported(format!("{other}"))),
    };
    let mut sources = sources(
        &select.from,
        select.selection.as_ref(),
        catalog,
        database,
        placeholders,
        ctes,
    )?;
    let derived: Vec<SelectPlan> = sources
        .iter_mut()
        .filter_map(|s| s.derived.take())
        .collect();
    let mut scopes = Vec::with_capacity(sources.len());
    let mut offset = 0;
    for source in &sources {
        scopes.push(Scope::new(&source.table, source.alias.as_deref(), offset));
        offset += source.table.columns.len();
    }
    let width = offset;
    let offsets: Vec<usize> = scopes.iter().map(|s| s.offset).collect();
    let mut compiler = Compiler::over(scopes);
    compiler.set_merged(sources.iter().flat_map(|s| s.using.clone()).collect());
    compiler.set_outer(outer.to_vec());
    compiler.set_subquery_context(catalog, database);
    compiler.set_ctes(ctes.clone());
    compiler.take_placeholders_from(placeholders);
    compiler.allow_aggregates();
    compiler.set_named_windows(&select.named_window);
    // The derived tables' queries take the first subquery slots, in the
    // order `sources` numbered them.
    for plan in derived {
        compiler.add_subquery(plan);
    }
    let mut output = Vec::new();
    let mut columns = Vec::new();
    let mut aliases: Vec<(String, Expr)> = Vec::new();
    for item in &select.projection {
        match item {
            ast::SelectItem::Wildcard(_) | ast::SelectItem::QualifiedWildcard(..) => {
                if sources.is_empty() {
                    return Err(SqlError::new(codes::NO_SUCH_TABLE, "No tables used"));
                }
                // `t.*` (or `db.t.*`): the columns of the source named t.
                let qualifier = match item {
                    ast::SelectItem::QualifiedWildcard(
                        ast::SelectItemQualifiedWildcardKind::ObjectName(name),
                        _,
                    ) => Some(last_ident(name)),
                    ast::SelectItem::QualifiedWildcard(kind, _) => {
                        return Err(SqlError::unsupported(kind))
                    }
                    _ => None,
                };
                let mut any = false;
                for (source, offset) in sources.iter().zip(&offsets) {
                    let name = source.alias.as_deref().unwrap_or(&source.table.name);
                    if qualifier
                        .as_deref()
                        .is_some_and(|q| !q.eq_ignore_ascii_case(name))
                    {
                        continue;
                    }
                    any = true;
                    for (index, column) in source.table.visible_columns() {
                        // A USING column shows once, as the earlier table's.
                        let merged = source
                            .using
                            .iter()
                            .any(|u| u.eq_ignore_ascii_case(&column.name));
                        if merged && qualifier.is_none() {
                            continue;
                        }
                        output.push(Expr::Column(offset + index));
                        let mut described = OutputColumn::of_column(&source.table, column);
                        if let Some(alias) = &source.alias {
                            described.table = alias.clone();
                        }
                        columns.push(described);
                        aliases.push((column.name.clone(), Expr::Column(offset + index)));
                    }
                }
                if !any {
                    return Err(SqlError::new(
                        codes::BAD_TABLE,
                        format!("Unknown table '{}'", qualifier.unwrap_or_default()),
                    ));
                }
            }
            ast::SelectItem::UnnamedExpr(expr) => {
                let compiled = compiler.compile(expr)?;
                let name = match expr {
                    ast::Expr::Identifier(ident) => ident.value.clone(),
                    ast::Expr::CompoundIdentifier(parts) => {
                        parts.last().map(|p| p.value.clone()).unwrap_or_default()
                    }
                    other => other.to_string(),
                };
                columns.push(describe_output(&compiled, &name, &compiler));
                aliases.push((name, compiled.clone()));
                output.push(compiled);
            }
            ast::SelectItem::ExprWithAlias { expr, alias } => {
                let compiled = compiler.compile(expr)?;
                columns.push(describe_output(&compiled, &alias.value, &compiler));
                aliases.push((alias.value.clone(), compiled.clone()));
                output.push(compiled);
            }
        }
    }
    // WHERE and ON hold no aggregate (error 1111); the select list's come
    // back after.
    let saved = compiler.take_aggregates();
    compiler.place = "where clause";
    let filter = select
        .selection
        .as_ref()
        .map(|e| compiler.compile(e))
        .transpose();
    compiler.place = "on clause";
    let mut ons: Vec<Option<Expr>> = Vec::with_capacity(sources.len());
    for (index, source) in sources.iter().enumerate() {
        let mut parts = Vec::new();
        if let Some(on) = source.on {
            parts.push(compiler.compile(on)?);
        }
        // USING (c): the earlier tables' c equals this one's.
        for name in &source.using {
            let this = source
                .table
                .column_index(name)
                .map(|i| offsets[index] + i)
                .ok_or_else(|| SqlError::bad_field(name, "from clause"))?;
            let earlier = sources[..index]
                .iter()
                .zip(&offsets)
                .find_map(|(s, o)| s.table.column_index(name).map(|i| o + i))
                .ok_or_else(|| SqlError::bad_field(name, "from clause"))?;
            parts.push(Expr::Compare(
                CompareOp::Equal,
                Box::new(Expr::Column(earlier)),
                Box::new(Expr::Column(this)),
            ));
        }
        ons.push(and_of(parts));
    }
    let filter = filter?;
    compiler.place = "group statement";
    let mut group_by = Vec::new();
    if let ast::GroupByExpr::Expressions(list, modifiers) = &select.group_by {
        if !modifiers.is_empty() {
            return Err(SqlError::unsupported("GROUP BY modifiers"));
        }
        compiler.set_aliases(aliases.clone());
        for expr in list {
            group_by.push(match expr {
                ast::Expr::Value(value) if matches!(value.value, ast::Value::Number(..)) => {
                    let position = constant_count(expr)? as usize;
                    output
                        .get(position.wrapping_sub(1))
                        .cloned()
                        .ok_or_else(|| {
                            SqlError::bad_field(&position.to_string(), "group statement")
                        })?
                }
                other => compiler.compile(other)?,
            });
        }
    } else {
        return Err(SqlError::unsupported("GROUP BY ALL"));
    }
    if group_by.iter().any(|e| matches!(e, Expr::Aggregate(_))) {
        return Err(SqlError::new(
            codes::INVALID_GROUP_FUNC_USE,
            "Can't group on an aggregate",
        ));
    }
    compiler.set_aggregates(saved);
    compiler.set_aliases(aliases.clone());
    compiler.place = "having clause";
    let having = select
        .having
        .as_ref()
        .map(|e| compiler.compile(e))
        .transpose()?;
    compiler.place = "order clause";
    let mut order_by = Vec::new();
    if let Some(order) = &query.order_by {
        let ast::OrderByKind::Expressions(list) = &order.kind else {
            return Err(SqlError::unsupported("ORDER BY ALL"));
        };
        for item in list {
            let descending = item.options.asc == Some(false);
            let expr = match &item.expr {
                // ORDER BY 2: the second output column.
                ast::Expr::Value(value) if matches!(value.value, ast::Value::Number(..)) => {
                    let position = constant_count(&item.expr)? as usize;
                    output
                        .get(position.wrapping_sub(1))
                        .cloned()
                        .ok_or_else(|| SqlError::bad_field(&position.to_string(), "order clause"))?
                }
                other => compiler.compile(other)?,
            };
            order_by.push((expr, descending));
        }
    }
    let aggregates = compiler.take_aggregates();
    let windows = compiler.take_windows();
    let grouped = !aggregates.is_empty() || !group_by.is_empty();
    if grouped {
        // A window function's arguments, partitions and order are over
        // the grouped rows, as the select list is.
        let read: Vec<Expr> = output
            .iter()
            .cloned()
            .chain(windows.iter().flat_map(window_exprs).cloned())
            .collect();
        check_grouping(
            &read,
            having.as_ref(),
            &order_by,
            &group_by,
            &sources,
            &offsets,
        )?;
    }
    if having.as_ref().is_some_and(reads_window) || filter.as_ref().is_some_and(reads_window) {
        return Err(SqlError::new(
            codes::WINDOW_INVALID_USE,
            "You cannot use a window function in WHERE or HAVING.",
        ));
    }
    // Window results are read as the aggregate slots after the
    // aggregates' own: each row's aggregate results get them appended.
    let window_slot = |expr: &Expr| {
        expr.transform(&mut |leaf| match leaf {
            Expr::Window(slot) => Some(Expr::Aggregate(aggregates.len() + slot)),
            other => Some(other.clone()),
        })
        .expect("no leaf is refused")
    };
    let output: Vec<Expr> = output.iter().map(window_slot).collect();
    let order_by: Vec<(Expr, bool)> = order_by
        .iter()
        .map(|(expr, descending)| (window_slot(expr), *descending))
        .collect();
    let (limit, offset, limit_parameters) = select_limits(query, &mut compiler)?;
    let lock = match query.locks.first().map(|lock| &lock.lock_type) {
        None => LockMode::CommittedRead,
        Some(ast::LockType::Update) => LockMode::Exclusive,
        Some(ast::LockType::Share) => LockMode::Shared,
    };
    if query.locks.len() > 1 || query.locks.iter().any(|lock| lock.of.is_some()) {
        return Err(SqlError::unsupported(
            "FOR UPDATE OF a table, or more than one locking clause",
        ));
    }
    let lock_wait = match query.locks.first().and_then(|lock| lock.nonblock.as_ref()) {
        None => LockWait::Wait,
        Some(ast::NonBlock::Nowait) => LockWait::NoWait,
        Some(ast::NonBlock::SkipLocked) => LockWait::SkipLocked,
    };
    if lock != LockMode::CommittedRead && sources.iter().any(|s| s.table.derived.is_some()) {
        // Its rows are the SQL node's: nothing to lock them with.
        return Err(SqlError::unsupported(
            "FOR UPDATE or FOR SHARE of a derived table",
        ));
    }
    // Conditions an enclosing query pushed into this one, where they
    // give the same rows (no work for a query given none).
    let filter = match from_enclosing.pushed {
        [] => filter,
        pushed => {
            let evaluated: Vec<&Expr> = filter
                .iter()
                .chain(having.iter())
                .chain(group_by.iter())
                .chain(order_by.iter().map(|(expr, _)| expr))
                .chain(ons.iter().flatten())
                .chain(aggregates.iter().filter_map(|a| a.argument.as_ref()))
                .collect();
            let applied = pushdown::Shape {
                output: &output,
                evaluated: &evaluated,
                group_by: &group_by,
                aggregated: !aggregates.is_empty(),
                distinct: matches!(select.distinct, Some(ast::Distinct::Distinct)),
                limited: limit.is_some() || offset > 0 || limit_parameters.is_some(),
                windowed: !windows.is_empty(),
            }
            .applied(pushed);
            pushdown::with_applied(filter, applied)
        }
    };
    // A LEFT JOIN whose WHERE rejects the rows it adds with NULLs is an
    // inner join.
    let left: Vec<bool> = sources
        .iter()
        .zip(&offsets)
        .map(|(source, offset)| {
            source.left
                && !outer_joins::where_rejects_nulls_of(
                    filter.as_ref(),
                    *offset,
                    source.table.columns.len(),
                )
        })
        .collect();
    // The conditions every joined row must meet: WHERE and the inner
    // joins' ON clauses (a LEFT JOIN's ON only decides its matches).
    let mut pool = conjuncts_of(filter.as_ref());
    for (on, left) in ons.iter().zip(&left) {
        if !left {
            pool.extend(conjuncts_of(on.as_ref()));
        }
    }
    let mut needed_global = Vec::new();
    {
        let mut note = |e: &Expr| collect_columns(e, &mut needed_global);
        output.iter().for_each(&mut note);
        pool.iter().for_each(&mut note);
        ons.iter().flatten().for_each(&mut note);
        order_by.iter().for_each(|(e, _)| note(e));
        group_by.iter().for_each(&mut note);
        having.iter().for_each(&mut note);
        aggregates
            .iter()
            .filter_map(|a| a.argument.as_ref())
            .for_each(&mut note);
        aggregates
            .iter()
            .filter_map(|a| a.concat.as_deref())
            .flat_map(|c| c.order_by.iter().map(|(e, _)| e))
            .for_each(&mut note);
        windows.iter().flat_map(window_exprs).for_each(&mut note);
    }
    // What the correlated subqueries read of this query's row.
    for subquery in compiler_subqueries_peek(&compiler) {
        if subquery.correlated {
            needed_global.extend(outer_columns(&subquery.plan));
        }
    }
    needed_global.sort_unstable();
    needed_global.dedup();
    let needed_of = |offset: usize, columns: usize| -> Vec<usize> {
        needed_global
            .iter()
            .filter(|c| **c >= offset && **c < offset + columns)
            .map(|c| c - offset)
            .collect()
    };
    let (table, access, scan_filter, needed) = match sources.first() {
        None => (None, AccessPlan::NoTable, filter.clone(), Vec::new()),
        Some(first) => {
            let columns = first.table.columns.len();
            // A correlated subquery may read any table of the joined row:
            // it is checked on the whole row only, at the end.
            let own: Vec<Expr> = pool
                .iter()
                .filter(|c| last_column(c).is_none_or(|last| last < columns))
                .filter(|c| sources.len() == 1 || !has_correlated_subquery(c))
                .cloned()
                .collect();
            let scan_filter = match sources.len() {
                1 => filter.clone(),
                _ => and_of(own),
            };
            let access = choose_access(&first.table, scan_filter.as_ref());
            let access = access_path::for_lock_wait(access, lock_wait);
            (
                Some(Arc::clone(&first.table)),
                access,
                scan_filter,
                needed_of(0, columns),
            )
        }
    };
    let mut joins = Vec::new();
    for (index, source) in sources.iter().enumerate().skip(1) {
        let offset = offsets[index];
        let columns = source.table.columns.len();
        let end = offset + columns;
        let reads_this = |c: &&Expr| {
            let mut read = Vec::new();
            collect_columns(c, &mut read);
            read.iter().any(|i| *i >= offset && *i < end)
                && read.iter().all(|i| *i < end)
                && !has_correlated_subquery(c)
        };
        // What decides a match: a LEFT JOIN's own ON; for an inner join,
        // every condition on this table and the earlier ones.
        let deciding: Vec<Expr> = match left[index] {
            true => conjuncts_of(ons[index].as_ref()),
            false => pool.iter().filter(reads_this).cloned().collect(),
        };
        let local: Vec<Expr> = deciding
            .iter()
            .filter(|c| !has_correlated_subquery(c))
            .filter_map(|c| localize(c, offset, columns))
            .collect();
        let own: Vec<Expr> = local.iter().filter(|c| !reads_outer(c)).cloned().collect();
        let access = choose_access(&source.table, and_of(local).as_ref());
        let access = access_path::for_lock_wait(access, lock_wait);
        let correlated = access_reads_outer(&access);
        joins.push(JoinPlan {
            table: Arc::clone(&source.table),
            offset,
            left: left[index],
            access,
            correlated,
            condition: match left[index] {
                true => ons[index].clone(),
                false => and_of(deciding),
            },
            scan_filter: and_of(own),
            needed: needed_of(offset, columns),
        });
    }
    let mut subqueries = compiler.take_subqueries();
    compiler.give_placeholders_to(placeholders);
    if !from_enclosing.provisional {
        pushdown::push_into_derived(
            &sources,
            &offsets,
            &left,
            &pool,
            &mut subqueries,
            catalog,
            database,
            placeholders,
            ctes,
        );
    }
    let filter = match joins.is_empty() {
        true => filter,
        false => and_of(pool),
    };
    let distinct = matches!(select.distinct, Some(ast::Distinct::Distinct));
    let plain = joins.is_empty() && !grouped && having.is_none() && !distinct && windows.is_empty();
    // ORDER BY with a LIMIT over a whole table: read it in the order of
    // an index that gives ORDER BY's, so that the scan can stop at the
    // limit, and a locking read locks only the rows it returns (a queue's
    // `ORDER BY id LIMIT n FOR UPDATE SKIP LOCKED`).
    let limited = limit.is_some() || limit_parameters.is_some();
    let access = match (&table, &access) {
        (Some(table), AccessPlan::FullScan) if plain && limited => {
            access_path::ordered_whole(table, &order_by).unwrap_or(access)
        }
        _ => access,
    };
    let scan_order = match (&table, plain) {
        (Some(table), true) => scan_order(table, &access, &order_by),
        _ => None,
    };
    Ok(SelectPlan {
        subqueries,
        table,
        access,
        filter,
        scan_filter,
        joins,
        width,
        group_by,
        having,
        aggregates,
        output,
        columns: columns.into(),
        distinct,
        order_by,
        limit,
        offset,
        limit_parameters,
        scan_order,
        lock,
        lock_wait,
        needed,
        union: None,
        recursive: None,
        working_table: false,
        windows,
    })
}

/// A SELECT's LIMIT and OFFSET: constants, or `?` (a prepared
/// statement's parameters, numbered with the statement's others by
/// `compiler`), whose slots come back for the execution to bind.
/// The count a LIMIT or OFFSET parameter in `slot` gives: error 1210
/// for a value that is not one.
fn count_parameter(params: &[Value], slot: usize) -> SqlResult<u64> {
    let refused = || SqlError::new(codes::WRONG_ARGUMENTS, "Incorrect arguments to LIMIT");
    match params.get(slot).ok_or_else(refused)? {
        Value::Int(x) => u64::try_from(*x).map_err(|_| refused()),
        Value::UInt(x) => Ok(*x),
        Value::Bytes(text) => std::str::from_utf8(text)
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .ok_or_else(refused),
        _ => Err(refused()),
    }
}

/// Whether `expr` is a `?`.
fn is_placeholder(expr: &ast::Expr) -> bool {
    matches!(expr, ast::Expr::Value(value) if matches!(&value.value, ast::Value::Placeholder(text) if text == "?"))
}

fn select_limits(
    query: &ast::Query,
    compiler: &mut Compiler<'_>,
) -> SqlResult<(Option<u64>, u64, Option<LimitParameters>)> {
    let (limit, offset) = match &query.limit_clause {
        None => return Ok((None, 0, None)),
        Some(ast::LimitClause::LimitOffset { limit, offset, .. }) => {
            (limit.as_ref(), offset.as_ref().map(|o| &o.value))
        }
        Some(ast::LimitClause::OffsetCommaLimit { offset, limit }) => (Some(limit), Some(offset)),
    };
    let mut parameters = LimitParameters::default();
    let mut slot = |expr: &ast::Expr| -> SqlResult<Option<usize>> {
        if !is_placeholder(expr) {
            return Ok(None);
        }
        match compiler.compile(expr)? {
            Expr::Param(slot) => Ok(Some(slot)),
            other => unreachable!("a placeholder compiles to a parameter, not {other:?}"),
        }
    };
    let limit = match limit {
        None => None,
        Some(expr) => match slot(expr)? {
            Some(at) => {
                parameters.limit = Some(at);
                Some(u64::MAX)
            }
            None => Some(constant_count(expr)?),
        },
    };
    let offset = match offset {
        None => 0,
        Some(expr) => match slot(expr)? {
            Some(at) => {
                parameters.offset = Some(at);
                0
            }
            None => constant_count(expr)?,
        },
    };
    let bound = parameters.limit.is_some() || parameters.offset.is_some();
    Ok((limit, offset, bound.then_some(parameters)))
}

/// The subqueries a compiler has met so far.
fn compiler_subqueries_peek<'c>(compiler: &'c Compiler<'_>) -> &'c [SubqueryPlan] {
    compiler.subqueries()
}

/// Whether an access path reads an earlier table's values.
fn access_reads_outer(access: &AccessPlan) -> bool {
    let any = |exprs: &[Expr]| exprs.iter().any(reads_outer);
    match access {
        AccessPlan::NoTable | AccessPlan::FullScan => false,
        AccessPlan::PrimaryKey(exprs) => any(exprs),
        AccessPlan::PrimaryKeys(keys) => keys.iter().any(|k| any(k)),
        AccessPlan::UniqueKey { values, .. } => any(values),
        AccessPlan::Ranges { ranges, .. } => ranges.iter().any(|range| {
            any(&range.prefix)
                || [&range.low, &range.high]
                    .into_iter()
                    .flatten()
                    .any(|end| reads_outer(&end.value))
        }),
    }
}

/// ONLY_FULL_GROUP_BY: outside aggregates, the select list, HAVING and
/// ORDER BY may read only what is grouped on, or any column of a table
/// whose whole primary key is grouped on (it has one row per group).
/// Without GROUP BY, every output is an aggregate or a constant.
fn check_grouping(
    output: &[Expr],
    having: Option<&Expr>,
    order_by: &[(Expr, bool)],
    group_by: &[Expr],
    sources: &[Source<'_>],
    offsets: &[usize],
) -> SqlResult<()> {
    let mut grouped_columns = Vec::new();
    for expr in group_by {
        if let Expr::Column(index) = expr {
            grouped_columns.push(*index);
        }
    }
    let determined = |column: usize| {
        if grouped_columns.contains(&column) {
            return true;
        }
        sources.iter().zip(offsets).any(|(source, offset)| {
            let columns = source.table.columns.len();
            column >= *offset
                && column < offset + columns
                && source
                    .table
                    .key_columns()
                    .iter()
                    .all(|k| grouped_columns.contains(&(offset + k)))
        })
    };
    let check = |expr: &Expr, position: Option<usize>| -> SqlResult<()> {
        if group_by.iter().any(|g| g == expr) {
            return Ok(());
        }
        let mut read = Vec::new();
        collect_columns(expr, &mut read);
        if let Some(column) = read.into_iter().find(|c| !determined(*c)) {
            if group_by.is_empty() {
                return Err(SqlError::new(
                    codes::MIX_OF_GROUP_FUNC_AND_FIELDS,
                    "In aggregated query without GROUP BY, an expression of the select list reads a column outside an aggregate; this is incompatible with sql_mode=only_full_group_by",
                ));
            }
            let name = sources
                .iter()
                .zip(offsets)
                .find_map(|(source, offset)| {
                    let local = column.checked_sub(*offset)?;
                    source.table.columns.get(local).map(|c| c.name.clone())
                })
                .unwrap_or_default();
            let place = match position {
                Some(n) => format!("Expression #{n} of SELECT list"),
                None => "An expression of HAVING or ORDER BY".to_string(),
            };
            return Err(SqlError::new(
                codes::WRONG_FIELD_WITH_GROUP,
                format!("{place} is not in GROUP BY clause and contains nonaggregated column '{name}' which is not functionally dependent on columns in GROUP BY clause; this is incompatible with sql_mode=only_full_group_by"),
            ));
        }
        Ok(())
    };
    for (position, expr) in output.iter().enumerate() {
        check(expr, Some(position + 1))?;
    }
    if let Some(having) = having {
        check(having, None)?;
    }
    for (expr, _) in order_by {
        check(expr, None)?;
    }
    Ok(())
}

/// The columns `expr` reads (outside aggregates).
pub fn collect_columns(expr: &Expr, out: &mut Vec<usize>) {
    // A subquery's own columns are its own (not among its children); the
    // enclosing row's it reads are noted by `outer_columns`.
    match expr {
        Expr::Column(index) => out.push(*index),
        _ => expr.for_each_child(&mut |child| collect_columns(child, out)),
    }
}
