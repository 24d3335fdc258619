//! Plans: a SELECT, INSERT, UPDATE or DELETE compiled once against the
//! catalog into what the executor runs, with its parameters left as
//! slots. The access path is chosen here from the WHERE clause's
//! conjuncts (docs/design/0027-sql-node.md, "Plans"):
//!
//! 1. every primary-key column equal to a constant: a key lookup;
//! 2. the primary key's one column IN a list: batched key lookups;
//! 3. every column of a unique index equal to a constant: a unique lookup;
//! 4. equalities on leading columns of the primary key or an ordered
//!    index and a range (BETWEEN, <, >, an OR of BETWEENs, an IN list) on
//!    the next: a range scan of that index;
//! 5. else a full scan.
//!
//! The WHERE clause is always evaluated again on the rows that come back,
//! so an access path only needs to return a superset; what of it the data
//! nodes can evaluate is pushed to them as a filter at execution, once
//! the parameters are known (`access`).

use crate::catalog::{Catalog, SqlTable};
use crate::error::{codes, SqlError, SqlResult};
use crate::expr::{Aggregate, AggregateFunction, Compiler, Expr};
use crate::result::{ColumnKind, OutputColumn};
use crate::types::SqlType;
use crate::value::Arithmetic;
use crate::value::Value;
use client::{CompareOp, LockMode};
use sqlparser::ast;
use std::sync::Arc;

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
#[derive(Debug)]
pub struct SelectPlan {
    /// The table (None without FROM).
    pub table: Option<Arc<SqlTable>>,
    /// How the rows are reached.
    pub access: AccessPlan,
    /// The WHERE clause.
    pub filter: Option<Expr>,
    /// The aggregates (over the table's rows); the output then reads them.
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
    /// FOR UPDATE / FOR SHARE.
    pub lock: LockMode,
    /// Columns the statement reads (the rest need not come back).
    pub needed: Vec<usize>,
}

/// A compiled INSERT.
#[derive(Debug)]
pub struct InsertPlan {
    /// The table.
    pub table: Arc<SqlTable>,
    /// The column each value of a row goes to.
    pub targets: Vec<usize>,
    /// The rows (`None`: DEFAULT).
    pub rows: Vec<Vec<Option<Expr>>>,
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
    /// An UPDATE of one row by its whole primary key whose assignments
    /// each add a constant to an INT or BIGINT column (`SET k = k + 1`):
    /// the columns and deltas, which an autocommit statement sends to the
    /// data node to add, in one round trip instead of a read and a write
    /// (`increments_of`).
    pub increments: Option<Vec<(usize, i64)>>,
}

/// A compiled statement of the data kind.
#[derive(Debug)]
pub enum Plan {
    /// SELECT.
    Select(SelectPlan),
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
            let (sql_table, alias) = single_table(table, catalog, database)?;
            let mut compiler = Compiler::new(Some(&sql_table), alias.as_deref());
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
                compiled_assignments.push((index, compiler.compile(&assignment.value)?));
            }
            write_plan(
                &sql_table,
                compiler,
                selection.as_ref(),
                limit.as_ref(),
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
                return Err(SqlError::unsupported("multi-table DELETE"));
            }
            let (sql_table, alias) = single_table(&from[0], catalog, database)?;
            let compiler = Compiler::new(Some(&sql_table), alias.as_deref());
            if !delete.order_by.is_empty() {
                return Err(SqlError::unsupported("DELETE ... ORDER BY"));
            }
            write_plan(
                &sql_table,
                compiler,
                delete.selection.as_ref(),
                delete.limit.as_ref(),
                Vec::new(),
            )?
        }
        _ => return Ok(None),
    }))
}

/// An UPDATE (with `assignments`) or a DELETE (without): its WHERE and
/// LIMIT compiled, its access chosen.
fn write_plan(
    table: &Arc<SqlTable>,
    mut compiler: Compiler<'_>,
    selection: Option<&ast::Expr>,
    limit: Option<&ast::Expr>,
    assignments: Vec<(usize, Expr)>,
) -> SqlResult<Compiled> {
    compiler.place = "where clause";
    let filter = selection.map(|e| compiler.compile(e)).transpose()?;
    let limit = limit.map(constant_count).transpose()?;
    let update = !assignments.is_empty();
    let access = choose_access(table, filter.as_ref());
    let increments = match update && limit != Some(0) {
        true => increments_of(table, &access, filter.as_ref(), &assignments),
        false => None,
    };
    let write = WritePlan {
        table: Arc::clone(table),
        access,
        filter,
        assignments,
        limit,
        increments,
    };
    Ok(Compiled {
        parameter_order: compiler.parameter_order(),
        plan: match update {
            true => Plan::Update(write),
            false => Plan::Delete(write),
        },
    })
}

/// The increments an UPDATE is, when the data node can do it alone: the
/// WHERE clause is the primary key's equalities and nothing else (access
/// by the whole key, one conjunct per key column), and every assignment
/// is `c = c + n`, `c = n + c` or `c = c - n` with `n` a non-zero integer
/// constant and `c` a column stored as INT or BIGINT with no narrower SQL
/// range (TINYINT's is checked here, not by the data node), in no key
/// and no unique index, assigned once. A non-zero delta always changes
/// the row, so the statement changes the rows it matches, as MySQL counts
/// them; a sum out of range or a NULL column is refused by the data node
/// and the statement then runs as any UPDATE, for MySQL's answer.
fn increments_of(
    table: &SqlTable,
    access: &AccessPlan,
    filter: Option<&Expr>,
    assignments: &[(usize, Expr)],
) -> Option<Vec<(usize, i64)>> {
    let AccessPlan::PrimaryKey(_) = access else {
        return None;
    };
    if assignments.len() > client::MAX_INCREMENTS {
        return None;
    }
    let mut conjuncts = Vec::new();
    split_and(filter?, &mut conjuncts);
    let key_columns = table.key_columns();
    if conjuncts.len() != key_columns.len() {
        return None;
    }
    let in_unique_index = |column: usize| {
        table.def().indexes.iter().any(|index| {
            index.unique.is_some() && index.columns.iter().any(|&c| c as usize == column)
        })
    };
    let mut increments: Vec<(usize, i64)> = Vec::with_capacity(assignments.len());
    for (column, expr) in assignments {
        let (operation, left, right) = match expr {
            Expr::Arithmetic(operation, left, right) => (operation, &**left, &**right),
            _ => return None,
        };
        let constant = match (operation, left, right) {
            (Arithmetic::Add | Arithmetic::Subtract, Expr::Column(c), Expr::Literal(n))
                if c == column =>
            {
                n
            }
            (Arithmetic::Add, Expr::Literal(n), Expr::Column(c)) if c == column => n,
            _ => return None,
        };
        let magnitude = match constant {
            Value::Int(n) => *n,
            Value::UInt(n) => i64::try_from(*n).ok()?,
            _ => return None,
        };
        let delta = match operation {
            Arithmetic::Subtract => magnitude.checked_neg()?,
            _ => magnitude,
        };
        let sql_column = &table.columns[*column];
        // Only a type as wide as its storage: the data node checks the
        // sum against the stored type's range, not a narrower SQL one.
        let integer = matches!(sql_column.sql_type, SqlType::Integer { bytes: 4 | 8, .. });
        if delta == 0
            || !integer
            || key_columns.contains(column)
            || in_unique_index(*column)
            || increments.iter().any(|(seen, _)| seen == column)
        {
            return None;
        }
        increments.push((*column, delta));
    }
    Some(increments)
}

fn last_ident(name: &ast::ObjectName) -> String {
    name.0
        .last()
        .and_then(|part| part.as_ident())
        .map(|ident| ident.value.clone())
        .unwrap_or_default()
}

fn single_table(
    from: &ast::TableWithJoins,
    catalog: &Catalog,
    database: Option<&str>,
) -> SqlResult<(Arc<SqlTable>, Option<String>)> {
    if !from.joins.is_empty() {
        return Err(SqlError::unsupported("joins"));
    }
    match &from.relation {
        ast::TableFactor::Table { name, alias, .. } => {
            let (database, table) = table_name(name, database)?;
            let sql_table = catalog.table(&database, &table)?;
            Ok((sql_table, alias.as_ref().map(|a| a.name.value.clone())))
        }
        other => Err(SqlError::unsupported(format!("FROM {other}"))),
    }
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

fn compile_select(
    query: &ast::Query,
    catalog: &Catalog,
    database: Option<&str>,
) -> SqlResult<Compiled> {
    let ast::SetExpr::Select(select) = query.body.as_ref() else {
        return Err(SqlError::unsupported(format!("{}", query.body)));
    };
    if query.with.is_some() {
        return Err(SqlError::unsupported("WITH"));
    }
    let (table, alias) = match select.from.as_slice() {
        [] => (None, None),
        [from] => {
            let (table, alias) = single_table(from, catalog, database)?;
            (Some(table), alias)
        }
        _ => return Err(SqlError::unsupported("joins")),
    };
    let has_group_by = match &select.group_by {
        ast::GroupByExpr::Expressions(list, _) => !list.is_empty(),
        ast::GroupByExpr::All(_) => true,
    };
    if has_group_by || select.having.is_some() {
        return Err(SqlError::unsupported("GROUP BY"));
    }
    let mut compiler = Compiler::new(table.as_deref(), alias.as_deref());
    compiler.allow_aggregates();
    let mut output = Vec::new();
    let mut columns = Vec::new();
    let mut aliases = Vec::new();
    for item in &select.projection {
        match item {
            ast::SelectItem::Wildcard(_) | ast::SelectItem::QualifiedWildcard(..) => {
                let Some(table) = &table else {
                    return Err(SqlError::new(codes::NO_SUCH_TABLE, "No tables used"));
                };
                for (index, column) in table.columns.iter().enumerate() {
                    output.push(Expr::Column(index));
                    columns.push(OutputColumn::of_column(table, column));
                    aliases.push(column.name.clone());
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
                columns.push(describe_output(
                    &compiled,
                    &name,
                    table.as_deref(),
                    &compiler,
                ));
                aliases.push(name);
                output.push(compiled);
            }
            ast::SelectItem::ExprWithAlias { expr, alias } => {
                let compiled = compiler.compile(expr)?;
                columns.push(describe_output(
                    &compiled,
                    &alias.value,
                    table.as_deref(),
                    &compiler,
                ));
                aliases.push(alias.value.clone());
                output.push(compiled);
            }
        }
    }
    // Aggregates of the select list are known now; ORDER BY may add more.
    compiler.place = "where clause";
    let filter = {
        // WHERE holds no aggregate (error 1111); the select list's come back after.
        let saved = compiler.take_aggregates();
        let filter = select
            .selection
            .as_ref()
            .map(|e| compiler.compile(e))
            .transpose();
        compiler.set_aggregates(saved);
        filter?
    };
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
                // ORDER BY an output alias.
                ast::Expr::Identifier(ident)
                    if table
                        .as_ref()
                        .is_none_or(|t| t.column_index(&ident.value).is_none()) =>
                {
                    let position = aliases
                        .iter()
                        .position(|a| a.eq_ignore_ascii_case(&ident.value))
                        .ok_or_else(|| SqlError::bad_field(&ident.value, "order clause"))?;
                    output[position].clone()
                }
                other => compiler.compile(other)?,
            };
            order_by.push((expr, descending));
        }
    }
    let aggregates = compiler.take_aggregates();
    if !aggregates.is_empty() {
        // Without GROUP BY, every output column must be an aggregate or a
        // constant: a bare column would pick an arbitrary row's value.
        if let Some(bare) = output.iter().find(|e| reads_row_outside_aggregates(e)) {
            return Err(SqlError::new(
                1140,
                format!(
                    "In aggregated query without GROUP BY, expression {bare:?} is not an aggregate"
                ),
            ));
        }
    }
    let (limit, offset) = match &query.limit_clause {
        None => (None, 0),
        Some(ast::LimitClause::LimitOffset { limit, offset, .. }) => (
            limit.as_ref().map(constant_count).transpose()?,
            offset
                .as_ref()
                .map(|o| constant_count(&o.value))
                .transpose()?
                .unwrap_or(0),
        ),
        Some(ast::LimitClause::OffsetCommaLimit { offset, limit }) => {
            (Some(constant_count(limit)?), constant_count(offset)?)
        }
    };
    let lock = match query.locks.first().map(|lock| &lock.lock_type) {
        None => LockMode::CommittedRead,
        Some(ast::LockType::Update) => LockMode::Exclusive,
        Some(ast::LockType::Share) => LockMode::Shared,
    };
    let access = match &table {
        None => AccessPlan::NoTable,
        Some(table) => choose_access(table, filter.as_ref()),
    };
    let mut needed = Vec::new();
    let mut note = |e: &Expr| collect_columns(e, &mut needed);
    output.iter().for_each(&mut note);
    filter.iter().for_each(&mut note);
    order_by.iter().for_each(|(e, _)| note(e));
    aggregates
        .iter()
        .filter_map(|a| a.argument.as_ref())
        .for_each(&mut note);
    needed.sort_unstable();
    needed.dedup();
    Ok(Compiled {
        parameter_order: compiler.parameter_order(),
        plan: Plan::Select(SelectPlan {
            table,
            access,
            filter,
            aggregates,
            output,
            columns: columns.into(),
            distinct: matches!(select.distinct, Some(ast::Distinct::Distinct)),
            order_by,
            limit,
            offset,
            lock,
            needed,
        }),
    })
}

fn reads_row_outside_aggregates(expr: &Expr) -> bool {
    let mut columns = Vec::new();
    collect_columns(expr, &mut columns);
    !columns.is_empty()
}

/// The columns `expr` reads (outside aggregates).
pub fn collect_columns(expr: &Expr, out: &mut Vec<usize>) {
    match expr {
        Expr::Column(index) => out.push(*index),
        Expr::Literal(_) | Expr::Param(_) | Expr::Session(_) | Expr::Aggregate(_) => {}
        Expr::Not(e) | Expr::Negate(e) | Expr::IsNull(e, _) => collect_columns(e, out),
        Expr::Arithmetic(_, a, b)
        | Expr::Compare(_, a, b)
        | Expr::NullSafeEqual(a, b)
        | Expr::And(a, b)
        | Expr::Or(a, b)
        | Expr::Xor(a, b)
        | Expr::Like {
            expr: a,
            pattern: b,
            ..
        } => {
            collect_columns(a, out);
            collect_columns(b, out);
        }
        Expr::Between {
            expr, low, high, ..
        } => {
            collect_columns(expr, out);
            collect_columns(low, out);
            collect_columns(high, out);
        }
        Expr::InList { expr, list, .. } => {
            collect_columns(expr, out);
            list.iter().for_each(|e| collect_columns(e, out));
        }
        Expr::Function(_, args) => args.iter().for_each(|e| collect_columns(e, out)),
    }
}

/// The result column an output expression makes.
fn describe_output(
    expr: &Expr,
    name: &str,
    table: Option<&SqlTable>,
    compiler: &Compiler<'_>,
) -> OutputColumn {
    // The declared kind must fit every value the expression can give:
    // the binary protocol sends values as their column's type says.
    // Where the value's type is not certain, text.
    let kind = match expr {
        Expr::Column(index) => {
            if let Some(table) = table {
                let mut column = OutputColumn::of_column(table, &table.columns[*index]);
                column.name = name.to_string();
                return column;
            }
            ColumnKind::Text(255)
        }
        Expr::Literal(Value::Int(_)) => ColumnKind::BigInt { unsigned: false },
        Expr::Literal(Value::UInt(_)) => ColumnKind::BigInt { unsigned: true },
        Expr::Literal(Value::Double(_)) => ColumnKind::Double,
        Expr::Literal(Value::Decimal(x)) => ColumnKind::Decimal {
            precision: x.precision().max(x.scale() + 1),
            scale: x.scale(),
        },
        Expr::Literal(Value::Null) => ColumnKind::Null,
        Expr::Aggregate(slot) => match compiler.aggregate(*slot) {
            Some(Aggregate {
                function: AggregateFunction::CountRows | AggregateFunction::Count,
                ..
            }) => ColumnKind::BigInt { unsigned: false },
            Some(Aggregate {
                argument: Some(Expr::Column(index)),
                function,
                ..
            }) if table.is_some() => {
                let sql_type = &table.expect("checked").columns[*index].sql_type;
                match (function, sql_type) {
                    (_, SqlType::Double | SqlType::Float) => ColumnKind::Double,
                    // Exact sums and averages are DECIMALs (an integer sum
                    // may pass 64 bits), as MySQL's.
                    (AggregateFunction::Sum | AggregateFunction::Average, t)
                        if t.is_integer() || matches!(t, SqlType::Decimal { .. }) =>
                    {
                        ColumnKind::Decimal
                    }
                    (AggregateFunction::Sum | AggregateFunction::Average, _) => ColumnKind::Double,
                    _ => ColumnKind::of(sql_type),
                }
            }
            _ => ColumnKind::Text(255),
        },
        Expr::Compare(..)
        | Expr::And(..)
        | Expr::Or(..)
        | Expr::Xor(..)
        | Expr::Not(_)
        | Expr::IsNull(..)
        | Expr::Between { .. }
        | Expr::InList { .. }
        | Expr::Like { .. }
        | Expr::NullSafeEqual(..) => ColumnKind::BigInt { unsigned: false },
        // Arithmetic gives integers or doubles, by its operands' values.
        _ => ColumnKind::Text(255),
    };
    OutputColumn::computed(name, kind)
}

/// The access path for `filter` over `table` (see the module's list).
pub fn choose_access(table: &SqlTable, filter: Option<&Expr>) -> AccessPlan {
    let mut conjuncts = Vec::new();
    if let Some(filter) = filter {
        split_and(filter, &mut conjuncts);
    }
    let equal_to = |column: usize| -> Option<Expr> {
        conjuncts.iter().find_map(|c| match c {
            Expr::Compare(CompareOp::Equal, a, b) => match (a.as_ref(), b.as_ref()) {
                (Expr::Column(x), k) | (k, Expr::Column(x)) if *x == column && k.is_constant() => {
                    Some(k.clone())
                }
                _ => None,
            },
            _ => None,
        })
    };
    let def = table.def();
    let key = table.key_columns();
    // 1. The whole primary key.
    if let Some(values) = key.iter().map(|c| equal_to(*c)).collect::<Option<Vec<_>>>() {
        return AccessPlan::PrimaryKey(values);
    }
    // 2. A one-column primary key IN a list.
    if let [column] = key.as_slice() {
        let list = conjuncts.iter().find_map(|c| match c {
            Expr::InList {
                expr,
                list,
                negated: false,
            } if matches!(expr.as_ref(), Expr::Column(x) if x == column)
                && list.iter().all(Expr::is_constant) =>
            {
                Some(list.clone())
            }
            _ => None,
        });
        if let Some(list) = list {
            return AccessPlan::PrimaryKeys(list.into_iter().map(|v| vec![v]).collect());
        }
    }
    // 3. A unique index, whole.
    for index in &def.indexes {
        if index.unique.is_none() {
            continue;
        }
        let values = index
            .columns
            .iter()
            .map(|c| equal_to(*c as usize))
            .collect::<Option<Vec<_>>>();
        if let Some(values) = values {
            return AccessPlan::UniqueKey {
                index: index.name.clone(),
                values,
            };
        }
    }
    // 4. Ranges: the primary key first, then the indexes; the one whose
    // ranges fix the most leading columns wins.
    let mut best: Option<(usize, AccessPlan)> = None;
    let candidates = std::iter::once((None, key.clone())).chain(def.indexes.iter().map(|index| {
        (
            Some(index.name.clone()),
            index.columns.iter().map(|c| *c as usize).collect(),
        )
    }));
    for (index, columns) in candidates {
        let mut prefix = Vec::new();
        for column in &columns {
            match equal_to(*column) {
                Some(value) => prefix.push(value),
                None => break,
            }
        }
        let next = columns.get(prefix.len()).copied();
        let ranges = next.and_then(|column| ranges_on(&conjuncts, column));
        let (score, ranges) = match ranges {
            Some(ranges) => (
                prefix.len() * 2 + 1,
                ranges
                    .into_iter()
                    .map(|(low, high)| IndexRange {
                        prefix: prefix.clone(),
                        low,
                        high,
                    })
                    .collect(),
            ),
            None if !prefix.is_empty() => (
                prefix.len() * 2,
                vec![IndexRange {
                    prefix: prefix.clone(),
                    low: None,
                    high: None,
                }],
            ),
            None => continue,
        };
        if best
            .as_ref()
            .is_none_or(|(best_score, _)| score > *best_score)
        {
            best = Some((score, AccessPlan::Ranges { index, ranges }));
        }
    }
    match best {
        Some((_, access)) => access,
        None => AccessPlan::FullScan,
    }
}

/// The conjuncts of an AND tree.
pub fn split_and<'e>(expr: &'e Expr, out: &mut Vec<&'e Expr>) {
    match expr {
        Expr::And(a, b) => {
            split_and(a, out);
            split_and(b, out);
        }
        other => out.push(other),
    }
}

type Ends = (Option<RangeEnd>, Option<RangeEnd>);

/// The ranges on `column` the conjuncts give: one from BETWEEN or
/// comparisons (their intersection is left to the WHERE check: the first
/// low and high found bound the scan), several from an IN list or an OR
/// of BETWEENs and equalities.
fn ranges_on(conjuncts: &[&Expr], column: usize) -> Option<Vec<Ends>> {
    let is_column = |e: &Expr| matches!(e, Expr::Column(x) if *x == column);
    let end = |value: &Expr, inclusive| {
        Some(RangeEnd {
            value: value.clone(),
            inclusive,
        })
    };
    let mut low = None;
    let mut high = None;
    for conjunct in conjuncts {
        match conjunct {
            Expr::Between {
                expr,
                low: l,
                high: h,
                negated: false,
            } if is_column(expr) && l.is_constant() && h.is_constant() => {
                return Some(vec![(end(l, true), end(h, true))]);
            }
            Expr::Compare(op, a, b) => {
                let (op, k) = match (a.as_ref(), b.as_ref()) {
                    (x, k) if is_column(x) && k.is_constant() => (*op, k),
                    (k, x) if is_column(x) && k.is_constant() => (flip(*op), k),
                    _ => continue,
                };
                match op {
                    CompareOp::Greater if low.is_none() => low = end(k, false),
                    CompareOp::GreaterOrEqual if low.is_none() => low = end(k, true),
                    CompareOp::Less if high.is_none() => high = end(k, false),
                    CompareOp::LessOrEqual if high.is_none() => high = end(k, true),
                    _ => {}
                }
            }
            Expr::InList {
                expr,
                list,
                negated: false,
            } if is_column(expr) && list.iter().all(Expr::is_constant) => {
                return Some(list.iter().map(|k| (end(k, true), end(k, true))).collect());
            }
            Expr::Or(..) => {
                if let Some(ranges) = or_ranges(conjunct, column) {
                    return Some(ranges);
                }
            }
            _ => {}
        }
    }
    match (low, high) {
        (None, None) => None,
        ends => Some(vec![ends]),
    }
}

/// An OR of BETWEENs and equalities on `column`, as its ranges.
fn or_ranges(expr: &Expr, column: usize) -> Option<Vec<Ends>> {
    let is_column = |e: &Expr| matches!(e, Expr::Column(x) if *x == column);
    let end = |value: &Expr| {
        Some(RangeEnd {
            value: value.clone(),
            inclusive: true,
        })
    };
    match expr {
        Expr::Or(a, b) => {
            let mut ranges = or_ranges(a, column)?;
            ranges.extend(or_ranges(b, column)?);
            Some(ranges)
        }
        Expr::Between {
            expr,
            low,
            high,
            negated: false,
        } if is_column(expr) && low.is_constant() && high.is_constant() => {
            Some(vec![(end(low), end(high))])
        }
        Expr::Compare(CompareOp::Equal, a, b) => match (a.as_ref(), b.as_ref()) {
            (x, k) | (k, x) if is_column(x) && k.is_constant() => Some(vec![(end(k), end(k))]),
            _ => None,
        },
        _ => None,
    }
}

/// `k op column` as `column op' k`.
pub fn flip(op: CompareOp) -> CompareOp {
    match op {
        CompareOp::Less => CompareOp::Greater,
        CompareOp::LessOrEqual => CompareOp::GreaterOrEqual,
        CompareOp::Greater => CompareOp::Less,
        CompareOp::GreaterOrEqual => CompareOp::LessOrEqual,
        other => other,
    }
}

fn compile_insert(
    insert: &ast::Insert,
    catalog: &Catalog,
    database: Option<&str>,
) -> SqlResult<Compiled> {
    if insert.on.is_some() || insert.ignore || insert.replace_into || !insert.assignments.is_empty()
    {
        return Err(SqlError::unsupported(
            "INSERT IGNORE, REPLACE, ON DUPLICATE KEY UPDATE and INSERT ... SET",
        ));
    }
    let ast::TableObject::TableName(name) = &insert.table else {
        return Err(SqlError::unsupported("INSERT INTO a function"));
    };
    let (database, table) = table_name(name, database)?;
    let sql_table = catalog.table(&database, &table)?;
    let targets: Vec<usize> = if insert.columns.is_empty() {
        (0..sql_table.columns.len()).collect()
    } else {
        insert
            .columns
            .iter()
            .map(|ident| {
                sql_table
                    .column_index(&ident.value)
                    .ok_or_else(|| SqlError::bad_field(&ident.value, "field list"))
            })
            .collect::<SqlResult<_>>()?
    };
    for (i, target) in targets.iter().enumerate() {
        if targets[..i].contains(target) {
            return Err(SqlError::new(
                1110,
                format!(
                    "Column '{}' specified twice",
                    sql_table.columns[*target].name
                ),
            ));
        }
    }
    let source = insert
        .source
        .as_ref()
        .ok_or_else(|| SqlError::parse("INSERT without VALUES"))?;
    let ast::SetExpr::Values(values) = source.body.as_ref() else {
        return Err(SqlError::unsupported("INSERT ... SELECT"));
    };
    let mut compiler = Compiler::new(None, None);
    let mut rows = Vec::with_capacity(values.rows.len());
    for (number, row) in values.rows.iter().enumerate() {
        if row.len() != targets.len() {
            return Err(SqlError::new(
                codes::WRONG_VALUE_COUNT_ON_ROW,
                format!(
                    "Column count doesn't match value count at row {}",
                    number + 1
                ),
            ));
        }
        let compiled = row
            .iter()
            .map(|e| match e {
                // DEFAULT in VALUES: the column's default.
                ast::Expr::Identifier(ident)
                    if ident.quote_style.is_none()
                        && ident.value.eq_ignore_ascii_case("DEFAULT") =>
                {
                    Ok(None)
                }
                other => compiler.compile(other).map(Some),
            })
            .collect::<SqlResult<Vec<_>>>()?;
        rows.push(compiled);
    }
    Ok(Compiled {
        parameter_order: compiler.parameter_order(),
        plan: Plan::Insert(InsertPlan {
            table: sql_table,
            targets,
            rows,
        }),
    })
}
