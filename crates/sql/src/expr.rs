//! Expressions: compiled once from the parser's tree into [`Expr`]
//! (columns resolved to their index in the row, `?` placeholders to
//! parameter slots, aggregates to their result's slot) and evaluated per
//! row with SQL's three-valued logic and MySQL's conversions.
//!
//! Placeholders are numbered by where they stand in the statement's text,
//! not by the order the compiler meets them, so a statement's parts can
//! be compiled in any order.

use crate::catalog::SqlTable;
use crate::error::{codes, SqlError, SqlResult};
use crate::value::Value;
use crate::value::{self, Arithmetic};
use client::CompareOp;
use sqlparser::ast;
use std::cmp::Ordering;

/// A compiled expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// The row's column at this index.
    Column(usize),
    /// A constant.
    Literal(Value),
    /// A parameter's slot (see [`Compiler::parameter_order`]).
    Param(usize),
    /// NOT.
    Not(Box<Expr>),
    /// Unary minus.
    Negate(Box<Expr>),
    /// Arithmetic.
    Arithmetic(Arithmetic, Box<Expr>, Box<Expr>),
    /// A comparison.
    Compare(CompareOp, Box<Expr>, Box<Expr>),
    /// `<=>`: equal, NULL-safe.
    NullSafeEqual(Box<Expr>, Box<Expr>),
    /// AND.
    And(Box<Expr>, Box<Expr>),
    /// OR.
    Or(Box<Expr>, Box<Expr>),
    /// XOR.
    Xor(Box<Expr>, Box<Expr>),
    /// IS [NOT] NULL.
    IsNull(Box<Expr>, bool),
    /// `expr [NOT] BETWEEN low AND high`.
    Between {
        /// The value tested.
        expr: Box<Expr>,
        /// The low end (included).
        low: Box<Expr>,
        /// The high end (included).
        high: Box<Expr>,
        /// NOT BETWEEN.
        negated: bool,
    },
    /// `expr [NOT] IN (list)`.
    InList {
        /// The value tested.
        expr: Box<Expr>,
        /// The list.
        list: Vec<Expr>,
        /// NOT IN.
        negated: bool,
    },
    /// `expr [NOT] LIKE pattern`.
    Like {
        /// The value tested.
        expr: Box<Expr>,
        /// The pattern.
        pattern: Box<Expr>,
        /// NOT LIKE.
        negated: bool,
    },
    /// A value of the session (`@@var`, `DATABASE()`, ...).
    Session(SessionValue),
    /// A scalar function.
    Function(Function, Vec<Expr>),
    /// The result of the aggregate in this slot.
    Aggregate(usize),
    /// A column of an earlier table of a join, in a later table's access
    /// path: a constant for each row of the earlier tables, bound to its
    /// value (`bind_outer`) before the path is used. In a subquery, a
    /// column of the enclosing query's row.
    Outer(usize),
    /// A subquery's result, tested: its one value, whether it has rows, or
    /// whether a value is among its values.
    Subquery {
        /// The subquery's slot in its statement.
        slot: usize,
        /// It reads the enclosing row (so it runs per row, and is no
        /// constant).
        correlated: bool,
        /// What is asked of it.
        test: SubqueryTest,
    },
}

/// What a subquery expression asks of the subquery's rows.
#[derive(Clone, Debug, PartialEq)]
pub enum SubqueryTest {
    /// `(SELECT x ...)`: its one value (NULL for no row, 1242 for more).
    Scalar,
    /// `[NOT] EXISTS (SELECT ...)`.
    Exists {
        /// NOT EXISTS.
        negated: bool,
    },
    /// `expr [NOT] IN (SELECT x ...)`, with IN's NULL rules.
    In {
        /// The value looked for.
        expr: Box<Expr>,
        /// NOT IN.
        negated: bool,
    },
}

/// Error 1241 unless a subquery gives one column.
fn one_column(columns: usize) -> SqlResult<()> {
    match columns {
        1 => Ok(()),
        _ => Err(SqlError::new(1241, "Operand should contain 1 column(s)")),
    }
}

/// For each slot, the parameter's position in the statement, from the
/// placeholders' places.
pub fn parameter_order_of(placeholders: &[(u64, u64)]) -> Vec<usize> {
    let mut by_place: Vec<usize> = (0..placeholders.len()).collect();
    by_place.sort_by_key(|slot| placeholders[*slot]);
    let mut order = vec![0; by_place.len()];
    for (position, slot) in by_place.into_iter().enumerate() {
        order[slot] = position;
    }
    order
}

/// What a session answers for an expression.
#[derive(Clone, Debug, PartialEq)]
pub enum SessionValue {
    /// `@@[scope.]name`.
    SystemVariable {
        /// The name, lower case.
        name: String,
        /// `@@global.`.
        global: bool,
    },
    /// `@name`.
    UserVariable(String),
    /// `DATABASE()`.
    Database,
    /// `LAST_INSERT_ID()`.
    LastInsertId,
    /// `CONNECTION_ID()`.
    ConnectionId,
    /// `VERSION()`.
    Version,
    /// `USER()`, `CURRENT_USER()`.
    User,
    /// `FOUND_ROWS()` / `ROW_COUNT()`.
    RowCount,
    /// NOW(fsp), CURRENT_TIMESTAMP: the statement's start in the session's
    /// zone.
    Now(u8),
    /// UTC_TIMESTAMP().
    UtcNow,
    /// CURDATE(), CURRENT_DATE.
    Today,
    /// CURTIME(), CURRENT_TIME.
    TimeOfDay,
}

/// A scalar function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Function {
    /// COALESCE and IFNULL: the first non-NULL argument.
    Coalesce,
    /// IF(c, a, b).
    If,
    /// CONCAT: NULL if any argument is.
    Concat,
    /// LENGTH in bytes.
    Length,
    /// UPPER.
    Upper,
    /// LOWER.
    Lower,
    /// ABS.
    Abs,
    /// SLEEP(seconds): waits, and answers 0; KILL QUERY ends it early
    /// with error 1317.
    Sleep,
    /// SUBSTRING(s, position[, length]).
    Substring,
    /// LEFT(s, n).
    Left,
    /// RIGHT(s, n).
    Right,
    /// CHAR_LENGTH: characters.
    CharLength,
    /// REPLACE(s, from, to).
    Replace,
    /// TRIM, LTRIM, RTRIM.
    Trim(crate::functions::Side),
    /// CONCAT_WS(separator, ...).
    ConcatWithSeparator,
    /// LPAD and RPAD.
    Pad {
        /// LPAD.
        left: bool,
    },
    /// LOCATE(needle, haystack[, start]) (and INSTR, its arguments swapped).
    Locate,
    /// ROUND(x[, d]).
    Round,
    /// TRUNCATE(x, d).
    Truncate,
    /// FLOOR.
    Floor,
    /// CEILING.
    Ceiling,
    /// GREATEST.
    Greatest,
    /// LEAST.
    Least,
    /// NULLIF(a, b).
    NullIf,
    /// DATE_ADD and DATE_SUB, `d + INTERVAL n unit`.
    DateAdd {
        /// The interval's unit.
        unit: crate::temporal::IntervalUnit,
        /// DATE_SUB.
        subtract: bool,
    },
    /// YEAR(), MONTH(), ... SECOND().
    DatePart(crate::functions::Part),
    /// DATE(x).
    DateOf,
    /// DATEDIFF(a, b).
    DateDiff,
    /// UNIX_TIMESTAMP(d).
    UnixTimestamp,
    /// CAST(x AS target).
    Cast(crate::functions::CastTarget),
}

/// An aggregate function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggregateFunction {
    /// COUNT(*).
    CountRows,
    /// COUNT(expr): non-NULL values.
    Count,
    /// SUM.
    Sum,
    /// MIN.
    Min,
    /// MAX.
    Max,
    /// AVG.
    Average,
}

/// An aggregate of a query: its function and argument (over the table's row).
#[derive(Clone, Debug, PartialEq)]
pub struct Aggregate {
    /// The function.
    pub function: AggregateFunction,
    /// Its argument (none for COUNT(*)).
    pub argument: Option<Expr>,
    /// `COUNT(DISTINCT x)` and the like.
    pub distinct: bool,
}

/// What an evaluation needs beyond the row: the parameters and the session.
pub trait Environment {
    /// The value of a session expression.
    fn session_value(&self, value: &SessionValue) -> SqlResult<Value>;

    /// Whether the statement was asked to stop (KILL QUERY).
    fn interrupted(&self) -> bool {
        false
    }

    /// The row a read without a lock of `key` in `table` returns, when the
    /// statements of one query had their key lookups read together ahead
    /// of them (`Some(None)`: no such row); `None`: not read ahead.
    fn read_ahead(
        &self,
        _table: &client::Table,
        _key: &[client::Value],
    ) -> Option<Option<Vec<Value>>> {
        None
    }

    /// The session's time zone as seconds east of UTC (TIMESTAMP values
    /// are stored in UTC and shown in it).
    fn zone_offset(&self) -> i64 {
        0
    }

    /// Whether the session lets a transaction's INSERTs wait for its next
    /// round trip (`transaction_allow_batching`, design 0034).
    fn batches_inserts(&self) -> bool {
        false
    }

    /// The rows of subquery `slot` of the running statement, for the
    /// enclosing query's `row` (a correlated subquery reads it).
    fn subquery_rows(
        &self,
        slot: usize,
        _row: &[Value],
        _params: &[Value],
    ) -> SqlResult<std::rc::Rc<Vec<Vec<Value>>>> {
        Err(SqlError::unsupported(format!("subquery {slot} here")))
    }

    /// The rows of an information_schema view, as the session may see
    /// them; `needed` the columns read (`None`: all).
    fn view_rows(
        &self,
        _view: crate::information_schema::View,
        _needed: Option<&[usize]>,
    ) -> SqlResult<Vec<Vec<Value>>> {
        Ok(Vec::new())
    }

    /// The cluster refused a statement in a way that says `table`'s
    /// definition changed since it was planned: forget it, so that the
    /// next statements are planned from the current one.
    fn table_changed(&self, _table: &crate::catalog::SqlTable) {}
}

/// A table a compiler resolves column names in: its columns are the
/// row's from `offset` on (a join's row is its tables' rows end to end).
#[derive(Clone)]
pub struct Scope<'a> {
    /// The table.
    pub table: &'a SqlTable,
    /// The names it goes by: its name, or its alias when it has one.
    pub names: Vec<String>,
    /// Where its columns start in the row.
    pub offset: usize,
}

impl<'a> Scope<'a> {
    /// `table` at `offset`, known by `alias` if given, else its name.
    pub fn new(table: &'a SqlTable, alias: Option<&str>, offset: usize) -> Scope<'a> {
        let names = match alias {
            Some(alias) => vec![alias.to_string()],
            None => vec![table.name.clone()],
        };
        Scope {
            table,
            names,
            offset,
        }
    }
}

/// A compiler of expressions over the tables of a statement (or none).
pub struct Compiler<'a> {
    scopes: Vec<Scope<'a>>,
    /// The select list's aliases and their expressions, which HAVING and
    /// ORDER BY may name where no column has the name.
    aliases: Vec<(String, Expr)>,
    /// Columns a join's USING made one: unqualified, they name the
    /// first table's, not an ambiguous pair.
    merged: Vec<String>,
    /// In ON DUPLICATE KEY UPDATE, where `VALUES(c)` (the row that was
    /// to be inserted) starts in the row.
    values_offset: Option<usize>,
    /// In a subquery, the enclosing query's tables: a name none of its
    /// own has is looked for there, and is an `Outer` column.
    outer: Vec<Scope<'a>>,
    /// Where subqueries are compiled from (none: subqueries refused).
    catalog: Option<(&'a crate::catalog::Catalog, Option<&'a str>)>,
    /// The subqueries met, by slot.
    subqueries: Vec<crate::plan::SubqueryPlan>,
    /// The placeholders met, by where they stand: (line, column).
    placeholders: Vec<(u64, u64)>,
    /// Aggregates are allowed and collected here.
    aggregates: Option<Vec<Aggregate>>,
    /// Where in the statement the compiler is, for messages.
    pub place: &'static str,
}

impl<'a> Compiler<'a> {
    /// A compiler over `table` (known as `alias` too).
    pub fn new(table: Option<&'a SqlTable>, alias: Option<&str>) -> Compiler<'a> {
        let scopes = table
            .map(|table| {
                let mut scope = Scope::new(table, None, 0);
                scope.names.extend(alias.map(str::to_string));
                scope
            })
            .into_iter()
            .collect();
        Compiler::over(scopes)
    }

    /// A compiler over several tables (a join's).
    pub fn over(scopes: Vec<Scope<'a>>) -> Compiler<'a> {
        Compiler {
            scopes,
            aliases: Vec::new(),
            merged: Vec::new(),
            values_offset: None,
            outer: Vec::new(),
            catalog: None,
            subqueries: Vec::new(),
            placeholders: Vec::new(),
            aggregates: None,
            place: "field list",
        }
    }

    /// The tables it resolves names in.
    pub fn scopes(&self) -> &[Scope<'a>] {
        &self.scopes
    }

    /// The enclosing query's tables (for a subquery).
    pub fn set_outer(&mut self, outer: Vec<Scope<'a>>) {
        self.outer = outer;
    }

    /// Lets the compiler compile subqueries, over `catalog` in `database`.
    pub fn set_subquery_context(
        &mut self,
        catalog: &'a crate::catalog::Catalog,
        database: Option<&'a str>,
    ) {
        self.catalog = Some((catalog, database));
    }

    /// The subqueries met so far.
    pub fn subqueries(&self) -> &[crate::plan::SubqueryPlan] {
        &self.subqueries
    }

    /// Takes the subqueries met.
    pub fn take_subqueries(&mut self) -> Vec<crate::plan::SubqueryPlan> {
        std::mem::take(&mut self.subqueries)
    }

    /// Continues the numbering of `placeholders` (an enclosing
    /// statement's); give them back with `give_placeholders_to`.
    pub fn take_placeholders_from(&mut self, placeholders: &mut Vec<(u64, u64)>) {
        self.placeholders = std::mem::take(placeholders);
    }

    /// Hands the placeholders met back to the enclosing statement.
    pub fn give_placeholders_to(&mut self, placeholders: &mut Vec<(u64, u64)>) {
        *placeholders = std::mem::take(&mut self.placeholders);
    }

    /// Compiles a subquery in a slot of its own: `Ok((slot, correlated,
    /// columns))`.
    fn subquery(&mut self, query: &ast::Query) -> SqlResult<(usize, bool, usize)> {
        let Some((catalog, database)) = self.catalog else {
            return Err(SqlError::unsupported("a subquery here"));
        };
        // One level of correlation: the enclosing query's own tables.
        let outer = self.scopes.clone();
        let mut placeholders = std::mem::take(&mut self.placeholders);
        let compiled =
            crate::plan::select_plan(query, catalog, database, &outer, &mut placeholders);
        self.placeholders = placeholders;
        let plan = compiled?;
        if plan.lock != client::LockMode::CommittedRead {
            return Err(SqlError::unsupported("a locking read in a subquery"));
        }
        let correlated = crate::plan::reads_outer_anywhere(&plan);
        let columns = plan.output.len();
        self.subqueries.push(crate::plan::SubqueryPlan {
            plan: Box::new(plan),
            correlated,
        });
        Ok((self.subqueries.len() - 1, correlated, columns))
    }

    /// Resolves names in `scopes` from now on.
    pub fn set_scopes(&mut self, scopes: Vec<Scope<'a>>) {
        self.scopes = scopes;
    }

    /// Lets `VALUES(c)` name the column of the row to insert, which
    /// starts at `offset` (ON DUPLICATE KEY UPDATE).
    pub fn set_values_offset(&mut self, offset: Option<usize>) {
        self.values_offset = offset;
    }

    /// Names the columns a join's USING made one.
    pub fn set_merged(&mut self, merged: Vec<String>) {
        self.merged = merged;
    }

    /// Lets the next expressions name the select list's aliases (HAVING,
    /// ORDER BY), where no column has the name.
    pub fn set_aliases(&mut self, aliases: Vec<(String, Expr)>) {
        self.aliases = aliases;
    }

    /// Lets the next expressions hold aggregates (a query's select list,
    /// HAVING, ORDER BY).
    pub fn allow_aggregates(&mut self) {
        if self.aggregates.is_none() {
            self.aggregates = Some(Vec::new());
        }
    }

    /// Stops allowing aggregates and returns those met.
    pub fn take_aggregates(&mut self) -> Vec<Aggregate> {
        self.aggregates.take().unwrap_or_default()
    }

    /// Allows aggregates again, with `aggregates` as those met so far.
    pub fn set_aggregates(&mut self, aggregates: Vec<Aggregate>) {
        self.aggregates = Some(aggregates);
    }

    /// The aggregate in `slot`.
    pub fn aggregate(&self, slot: usize) -> Option<&Aggregate> {
        self.aggregates.as_ref()?.get(slot)
    }

    /// How many placeholders were met.
    pub fn parameter_count(&self) -> usize {
        self.placeholders.len()
    }

    /// For each slot, the parameter's position in the statement (0 is the
    /// first `?` in the text).
    pub fn parameter_order(&self) -> Vec<usize> {
        parameter_order_of(&self.placeholders)
    }

    /// The index in the row of the column named `name` (qualified by
    /// `qualifier`): 1054 when no table has it, 1052 when several do.
    pub fn column(&self, qualifier: Option<&str>, name: &str) -> SqlResult<usize> {
        let full = match qualifier {
            Some(q) => format!("{q}.{name}"),
            None => name.to_string(),
        };
        let mut found = self
            .scopes
            .iter()
            .filter(|scope| {
                qualifier.is_none_or(|q| scope.names.iter().any(|n| n.eq_ignore_ascii_case(q)))
            })
            .filter_map(|scope| scope.table.column_index(name).map(|i| scope.offset + i));
        let first = found
            .next()
            .ok_or_else(|| SqlError::bad_field(&full, self.place))?;
        let merged =
            qualifier.is_none() && self.merged.iter().any(|m| m.eq_ignore_ascii_case(name));
        if found.next().is_some() && !merged {
            return Err(SqlError::new(
                codes::NON_UNIQ,
                format!("Column '{full}' in {} is ambiguous", self.place),
            ));
        }
        Ok(first)
    }

    /// A column of this query's tables, or else of the enclosing query's
    /// (an `Outer` column, in a subquery).
    fn column_or_outer(&self, qualifier: Option<&str>, name: &str) -> SqlResult<Expr> {
        match self.column(qualifier, name) {
            Ok(index) => Ok(Expr::Column(index)),
            Err(error) if error.code == codes::BAD_FIELD && !self.outer.is_empty() => {
                let enclosing = Compiler::over(self.outer.clone());
                match enclosing.column(qualifier, name) {
                    Ok(index) => Ok(Expr::Outer(index)),
                    Err(_) => Err(error),
                }
            }
            Err(error) => Err(error),
        }
    }

    /// Compiles `expr`.
    pub fn compile(&mut self, expr: &ast::Expr) -> SqlResult<Expr> {
        use ast::Expr as E;
        Ok(match expr {
            E::Identifier(ident) => self.identifier(None, ident)?,
            E::CompoundIdentifier(parts) => match parts.as_slice() {
                [first, name] if first.value.starts_with("@@") => {
                    system_variable(&format!("{}.{}", first.value, name.value))
                }
                [table, name] => self.column_or_outer(Some(&table.value), &name.value)?,
                [_database, table, name] => {
                    self.column_or_outer(Some(&table.value), &name.value)?
                }
                _ => return Err(SqlError::bad_field(&expr.to_string(), self.place)),
            },
            E::Value(value) => self.literal(value)?,
            E::Nested(inner) => self.compile(inner)?,
            E::UnaryOp { op, expr: inner } => {
                let inner = Box::new(self.compile(inner)?);
                match op {
                    ast::UnaryOperator::Not => Expr::Not(inner),
                    ast::UnaryOperator::Minus => match *inner {
                        Expr::Literal(Value::Int(x)) => Expr::Literal(Value::Int(-x)),
                        Expr::Literal(Value::Double(x)) => Expr::Literal(Value::Double(-x)),
                        other => Expr::Negate(Box::new(other)),
                    },
                    ast::UnaryOperator::Plus => *inner,
                    other => return Err(SqlError::unsupported(format!("operator {other}"))),
                }
            }
            E::BinaryOp {
                left,
                op: op @ (ast::BinaryOperator::Plus | ast::BinaryOperator::Minus),
                right,
            } if matches!(right.as_ref(), ast::Expr::Interval(_)) => {
                self.date_add(left, right, *op == ast::BinaryOperator::Minus)?
            }
            E::BinaryOp { left, op, right } => {
                let l = Box::new(self.compile(left)?);
                let r = Box::new(self.compile(right)?);
                use ast::BinaryOperator as B;
                match op {
                    B::Plus => Expr::Arithmetic(Arithmetic::Add, l, r),
                    B::Minus => Expr::Arithmetic(Arithmetic::Subtract, l, r),
                    B::Multiply => Expr::Arithmetic(Arithmetic::Multiply, l, r),
                    B::Divide => Expr::Arithmetic(Arithmetic::Divide, l, r),
                    B::Modulo => Expr::Arithmetic(Arithmetic::Modulo, l, r),
                    B::MyIntegerDivide => Expr::Arithmetic(Arithmetic::IntegerDivide, l, r),
                    B::Eq => Expr::Compare(CompareOp::Equal, l, r),
                    B::NotEq => Expr::Compare(CompareOp::NotEqual, l, r),
                    B::Lt => Expr::Compare(CompareOp::Less, l, r),
                    B::LtEq => Expr::Compare(CompareOp::LessOrEqual, l, r),
                    B::Gt => Expr::Compare(CompareOp::Greater, l, r),
                    B::GtEq => Expr::Compare(CompareOp::GreaterOrEqual, l, r),
                    B::Spaceship => Expr::NullSafeEqual(l, r),
                    B::And => Expr::And(l, r),
                    B::Or => Expr::Or(l, r),
                    B::Xor => Expr::Xor(l, r),
                    other => return Err(SqlError::unsupported(format!("operator {other}"))),
                }
            }
            E::IsNull(inner) => Expr::IsNull(Box::new(self.compile(inner)?), false),
            E::IsNotNull(inner) => Expr::IsNull(Box::new(self.compile(inner)?), true),
            E::IsTrue(inner) => Expr::Compare(
                CompareOp::NotEqual,
                Box::new(Expr::Function(
                    Function::Coalesce,
                    vec![self.compile(inner)?, Expr::Literal(Value::Int(0))],
                )),
                Box::new(Expr::Literal(Value::Int(0))),
            ),
            E::IsFalse(inner) => Expr::Compare(
                CompareOp::Equal,
                Box::new(Expr::Function(
                    Function::Coalesce,
                    vec![self.compile(inner)?, Expr::Literal(Value::Int(1))],
                )),
                Box::new(Expr::Literal(Value::Int(0))),
            ),
            E::Between {
                expr: inner,
                negated,
                low,
                high,
            } => Expr::Between {
                expr: Box::new(self.compile(inner)?),
                low: Box::new(self.compile(low)?),
                high: Box::new(self.compile(high)?),
                negated: *negated,
            },
            E::InList {
                expr: inner,
                list,
                negated,
            } => Expr::InList {
                expr: Box::new(self.compile(inner)?),
                list: list
                    .iter()
                    .map(|e| self.compile(e))
                    .collect::<SqlResult<_>>()?,
                negated: *negated,
            },
            E::Like {
                negated,
                expr: inner,
                pattern,
                escape_char: None,
                any: false,
            } => Expr::Like {
                expr: Box::new(self.compile(inner)?),
                pattern: Box::new(self.compile(pattern)?),
                negated: *negated,
            },
            E::Subquery(query) => {
                let (slot, correlated, columns) = self.subquery(query)?;
                one_column(columns)?;
                Expr::Subquery {
                    slot,
                    correlated,
                    test: SubqueryTest::Scalar,
                }
            }
            E::Exists { subquery, negated } => {
                let (slot, correlated, _) = self.subquery(subquery)?;
                Expr::Subquery {
                    slot,
                    correlated,
                    test: SubqueryTest::Exists { negated: *negated },
                }
            }
            E::InSubquery {
                expr: inner,
                subquery,
                negated,
            } => {
                let tested = Box::new(self.compile(inner)?);
                let (slot, correlated, columns) = self.subquery(subquery)?;
                one_column(columns)?;
                Expr::Subquery {
                    slot,
                    correlated,
                    test: SubqueryTest::In {
                        expr: tested,
                        negated: *negated,
                    },
                }
            }
            E::Function(function) => self.function(function)?,
            E::Cast {
                expr: inner,
                data_type,
                ..
            } => Expr::Function(
                Function::Cast(Self::cast_target(data_type)?),
                vec![self.compile(inner)?],
            ),
            E::Case {
                operand,
                conditions,
                else_result,
                ..
            } => {
                // Nested IFs: CASE x WHEN v THEN r ... is IF(x = v, r, ...).
                let operand = operand.as_ref().map(|o| self.compile(o)).transpose()?;
                let mut result = match else_result {
                    Some(otherwise) => self.compile(otherwise)?,
                    None => Expr::Literal(Value::Null),
                };
                for branch in conditions.iter().rev() {
                    let condition = self.compile(&branch.condition)?;
                    let condition = match &operand {
                        Some(operand) => Expr::Compare(
                            CompareOp::Equal,
                            Box::new(operand.clone()),
                            Box::new(condition),
                        ),
                        None => condition,
                    };
                    let then = self.compile(&branch.result)?;
                    result = Expr::Function(Function::If, vec![condition, then, result]);
                }
                result
            }
            E::Substring {
                expr: inner,
                substring_from,
                substring_for,
                ..
            } => {
                let mut args = vec![self.compile(inner)?];
                args.push(match substring_from {
                    Some(from) => self.compile(from)?,
                    None => Expr::Literal(Value::Int(1)),
                });
                if let Some(length) = substring_for {
                    args.push(self.compile(length)?);
                }
                Expr::Function(Function::Substring, args)
            }
            E::Trim {
                expr: inner,
                trim_where,
                trim_what,
                trim_characters: None,
            } => {
                use crate::functions::Side;
                let side = match trim_where {
                    Some(ast::TrimWhereField::Leading) => Side::Leading,
                    Some(ast::TrimWhereField::Trailing) => Side::Trailing,
                    _ => Side::Both,
                };
                let mut args = vec![self.compile(inner)?];
                if let Some(what) = trim_what {
                    args.push(self.compile(what)?);
                }
                Expr::Function(Function::Trim(side), args)
            }
            E::Ceil { expr: inner, .. } => {
                Expr::Function(Function::Ceiling, vec![self.compile(inner)?])
            }
            E::Floor { expr: inner, .. } => {
                Expr::Function(Function::Floor, vec![self.compile(inner)?])
            }
            other => return Err(SqlError::unsupported(format!("expression {other}"))),
        })
    }

    /// `date + INTERVAL amount unit` (or minus): DATE_ADD and DATE_SUB.
    /// A bare number for the interval is days (ADDDATE's short form).
    fn date_add(
        &mut self,
        date: &ast::Expr,
        interval: &ast::Expr,
        subtract: bool,
    ) -> SqlResult<Expr> {
        let (amount, unit) = match interval {
            ast::Expr::Interval(interval) => {
                let unit_name = interval
                    .leading_field
                    .as_ref()
                    .map(|field| field.to_string())
                    .unwrap_or_else(|| "DAY".into());
                let unit = crate::temporal::IntervalUnit::named(&unit_name)
                    .ok_or_else(|| SqlError::unsupported(format!("INTERVAL unit {unit_name}")))?;
                (self.compile(&interval.value)?, unit)
            }
            other => (self.compile(other)?, crate::temporal::IntervalUnit::Day),
        };
        Ok(Expr::Function(
            Function::DateAdd { unit, subtract },
            vec![self.compile(date)?, amount],
        ))
    }

    /// CAST's target type.
    fn cast_target(data_type: &ast::DataType) -> SqlResult<crate::functions::CastTarget> {
        use crate::functions::CastTarget as C;
        use ast::DataType as D;
        let name = data_type.to_string().to_ascii_uppercase();
        Ok(match data_type {
            D::Signed | D::SignedInteger => C::Signed,
            D::Unsigned | D::UnsignedInteger => C::Unsigned,
            D::Double(_) | D::DoublePrecision | D::Real | D::Float(_) => C::Double,
            D::Char(_) | D::Character(_) | D::Varchar(_) | D::Binary(_) | D::Text => C::Char,
            D::Date => C::Date,
            D::Datetime(fsp) | D::Timestamp(fsp, _) => C::DateTime {
                fsp: fsp.unwrap_or(0).min(6) as u8,
            },
            D::Time(fsp, _) => C::Time {
                fsp: fsp.unwrap_or(0).min(6) as u8,
            },
            D::Decimal(_) | D::Numeric(_) | D::Dec(_) => {
                match crate::types::of_data_type(data_type)? {
                    crate::types::SqlType::Decimal { precision, scale } => {
                        C::Decimal { precision, scale }
                    }
                    _ => unreachable!("a DECIMAL type"),
                }
            }
            _ if name.starts_with("SIGNED") => C::Signed,
            _ if name.starts_with("UNSIGNED") => C::Unsigned,
            other => return Err(SqlError::unsupported(format!("CAST AS {other}"))),
        })
    }

    fn identifier(&mut self, qualifier: Option<&str>, ident: &ast::Ident) -> SqlResult<Expr> {
        let name = &ident.value;
        if ident.quote_style.is_none() {
            if name.starts_with("@@") {
                return Ok(system_variable(name));
            }
            if let Some(user) = name.strip_prefix('@') {
                return Ok(Expr::Session(SessionValue::UserVariable(
                    user.to_ascii_lowercase(),
                )));
            }
            match name.to_ascii_uppercase().as_str() {
                "TRUE" => return Ok(Expr::Literal(Value::Int(1))),
                "FALSE" => return Ok(Expr::Literal(Value::Int(0))),
                "CURRENT_USER" => return Ok(Expr::Session(SessionValue::User)),
                "CURRENT_TIMESTAMP" | "LOCALTIME" | "LOCALTIMESTAMP" => {
                    return Ok(Expr::Session(SessionValue::Now(0)))
                }
                "CURRENT_DATE" => return Ok(Expr::Session(SessionValue::Today)),
                "CURRENT_TIME" => return Ok(Expr::Session(SessionValue::TimeOfDay)),
                _ => {}
            }
        }
        match self.column_or_outer(qualifier, name) {
            Ok(expr) => Ok(expr),
            Err(error) if error.code == codes::BAD_FIELD && qualifier.is_none() => self
                .aliases
                .iter()
                .find(|(alias, _)| alias.eq_ignore_ascii_case(name))
                .map(|(_, expr)| expr.clone())
                .ok_or(error),
            Err(error) => Err(error),
        }
    }

    fn literal(&mut self, value: &ast::ValueWithSpan) -> SqlResult<Expr> {
        use ast::Value as V;
        Ok(Expr::Literal(match &value.value {
            V::Number(text, _) => number(text)?,
            V::SingleQuotedString(text) | V::DoubleQuotedString(text) => Value::from(text.as_str()),
            V::HexStringLiteral(hex) => Value::Bytes(decode_hex(hex)?),
            V::Boolean(b) => Value::Int(*b as i64),
            V::Null => Value::Null,
            V::Placeholder(text) if text == "?" => {
                let start = value.span.start;
                self.placeholders.push((start.line, start.column));
                return Ok(Expr::Param(self.placeholders.len() - 1));
            }
            other => return Err(SqlError::unsupported(format!("literal {other}"))),
        }))
    }

    fn function(&mut self, function: &ast::Function) -> SqlResult<Expr> {
        let name = function.name.to_string().to_ascii_uppercase();
        let (args, distinct, star) = match &function.args {
            ast::FunctionArguments::None => (Vec::new(), false, false),
            ast::FunctionArguments::List(list) => {
                let distinct = matches!(
                    list.duplicate_treatment,
                    Some(ast::DuplicateTreatment::Distinct)
                );
                let mut args = Vec::new();
                let mut star = false;
                for arg in &list.args {
                    match arg {
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => args.push(e),
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard) => star = true,
                        other => return Err(SqlError::unsupported(format!("argument {other}"))),
                    }
                }
                (args, distinct, star)
            }
            ast::FunctionArguments::Subquery(_) => return Err(SqlError::unsupported("subqueries")),
        };
        let aggregate = match name.as_str() {
            "COUNT" if star => Some(AggregateFunction::CountRows),
            "COUNT" => Some(AggregateFunction::Count),
            "SUM" => Some(AggregateFunction::Sum),
            "MIN" => Some(AggregateFunction::Min),
            "MAX" => Some(AggregateFunction::Max),
            "AVG" => Some(AggregateFunction::Average),
            _ => None,
        };
        if let Some(aggregate) = aggregate {
            if self.aggregates.is_none() {
                return Err(SqlError::new(
                    codes::INVALID_GROUP_FUNC_USE,
                    "Invalid use of group function",
                ));
            }
            let argument = match (aggregate, args.as_slice()) {
                (AggregateFunction::CountRows, []) => None,
                (_, [argument]) => {
                    // An aggregate's argument is over the row, never another
                    // aggregate.
                    let saved = self.aggregates.take();
                    let compiled = self.compile(argument);
                    self.aggregates = saved;
                    Some(compiled?)
                }
                _ => return Err(wrong_arguments(&name)),
            };
            let list = self.aggregates.as_mut().expect("checked above");
            list.push(Aggregate {
                function: aggregate,
                argument,
                distinct,
            });
            return Ok(Expr::Aggregate(list.len() - 1));
        }
        if name == "VALUES" {
            let (Some(offset), [ast::Expr::Identifier(column)]) =
                (self.values_offset, args.as_slice())
            else {
                return Err(SqlError::unsupported(
                    "VALUES() outside ON DUPLICATE KEY UPDATE",
                ));
            };
            return Ok(Expr::Column(offset + self.column(None, &column.value)?));
        }
        if matches!(
            name.as_str(),
            "DATE_ADD" | "ADDDATE" | "DATE_SUB" | "SUBDATE"
        ) {
            // Its INTERVAL argument is not an expression of its own.
            let subtract = name == "DATE_SUB" || name == "SUBDATE";
            let [date, amount] = args.as_slice() else {
                return Err(wrong_arguments(&name));
            };
            return self.date_add(date, amount, subtract);
        }
        let session = |value| Ok(Expr::Session(value));
        let compiled: Vec<Expr> = args
            .iter()
            .map(|a| self.compile(a))
            .collect::<SqlResult<_>>()?;
        let arity = |n: usize| match compiled.len() == n {
            true => Ok(()),
            false => Err(wrong_arguments(&name)),
        };
        let scalar = match name.as_str() {
            "DATABASE" | "SCHEMA" => return arity(0).and(session(SessionValue::Database)),
            "LAST_INSERT_ID" => return arity(0).and(session(SessionValue::LastInsertId)),
            "CONNECTION_ID" => return arity(0).and(session(SessionValue::ConnectionId)),
            "VERSION" => return arity(0).and(session(SessionValue::Version)),
            "USER" | "CURRENT_USER" | "SESSION_USER" | "SYSTEM_USER" => {
                return arity(0).and(session(SessionValue::User))
            }
            "FOUND_ROWS" | "ROW_COUNT" => return arity(0).and(session(SessionValue::RowCount)),
            "COALESCE" if !compiled.is_empty() => Function::Coalesce,
            "IFNULL" => arity(2).map(|_| Function::Coalesce)?,
            "IF" => arity(3).map(|_| Function::If)?,
            "CONCAT" if !compiled.is_empty() => Function::Concat,
            "LENGTH" | "OCTET_LENGTH" => arity(1).map(|_| Function::Length)?,
            "UPPER" | "UCASE" => arity(1).map(|_| Function::Upper)?,
            "LOWER" | "LCASE" => arity(1).map(|_| Function::Lower)?,
            "ABS" => arity(1).map(|_| Function::Abs)?,
            "SLEEP" => arity(1).map(|_| Function::Sleep)?,
            "SUBSTRING" | "SUBSTR" | "MID" if (2..=3).contains(&compiled.len()) => {
                Function::Substring
            }
            "LEFT" => arity(2).map(|_| Function::Left)?,
            "RIGHT" => arity(2).map(|_| Function::Right)?,
            "CHAR_LENGTH" | "CHARACTER_LENGTH" => arity(1).map(|_| Function::CharLength)?,
            "REPLACE" => arity(3).map(|_| Function::Replace)?,
            "TRIM" => arity(1).map(|_| Function::Trim(crate::functions::Side::Both))?,
            "LTRIM" => arity(1).map(|_| Function::Trim(crate::functions::Side::Leading))?,
            "RTRIM" => arity(1).map(|_| Function::Trim(crate::functions::Side::Trailing))?,
            "CONCAT_WS" if compiled.len() >= 2 => Function::ConcatWithSeparator,
            "LPAD" => arity(3).map(|_| Function::Pad { left: true })?,
            "RPAD" => arity(3).map(|_| Function::Pad { left: false })?,
            "LOCATE" if (2..=3).contains(&compiled.len()) => Function::Locate,
            "INSTR" => {
                arity(2)?;
                let mut swapped = compiled;
                swapped.swap(0, 1);
                return Ok(Expr::Function(Function::Locate, swapped));
            }
            "ROUND" if (1..=2).contains(&compiled.len()) => Function::Round,
            "TRUNCATE" => arity(2).map(|_| Function::Truncate)?,
            "FLOOR" => arity(1).map(|_| Function::Floor)?,
            "CEIL" | "CEILING" => arity(1).map(|_| Function::Ceiling)?,
            "MOD" => {
                arity(2)?;
                let mut args = compiled.into_iter();
                let (a, b) = (args.next().expect("two"), args.next().expect("two"));
                return Ok(Expr::Arithmetic(
                    Arithmetic::Modulo,
                    Box::new(a),
                    Box::new(b),
                ));
            }
            "GREATEST" if compiled.len() >= 2 => Function::Greatest,
            "LEAST" if compiled.len() >= 2 => Function::Least,
            "NULLIF" => arity(2).map(|_| Function::NullIf)?,
            "YEAR" => arity(1).map(|_| Function::DatePart(crate::functions::Part::Year))?,
            "MONTH" => arity(1).map(|_| Function::DatePart(crate::functions::Part::Month))?,
            "DAY" | "DAYOFMONTH" => {
                arity(1).map(|_| Function::DatePart(crate::functions::Part::Day))?
            }
            "HOUR" => arity(1).map(|_| Function::DatePart(crate::functions::Part::Hour))?,
            "MINUTE" => arity(1).map(|_| Function::DatePart(crate::functions::Part::Minute))?,
            "SECOND" => arity(1).map(|_| Function::DatePart(crate::functions::Part::Second))?,
            "DATE" => arity(1).map(|_| Function::DateOf)?,
            "DATEDIFF" => arity(2).map(|_| Function::DateDiff)?,
            "UNIX_TIMESTAMP" if compiled.is_empty() => {
                return Ok(Expr::Function(
                    Function::UnixTimestamp,
                    vec![Expr::Session(SessionValue::Now(6))],
                ))
            }
            "UNIX_TIMESTAMP" => arity(1).map(|_| Function::UnixTimestamp)?,
            "NOW" | "CURRENT_TIMESTAMP" | "LOCALTIME" | "LOCALTIMESTAMP" | "SYSDATE" => {
                return fraction_digits(&compiled, &name)
                    .map(|fsp| Expr::Session(SessionValue::Now(fsp)))
            }
            "UTC_TIMESTAMP" => return arity(0).and(session(SessionValue::UtcNow)),
            "CURDATE" | "CURRENT_DATE" => return arity(0).and(session(SessionValue::Today)),
            "CURTIME" | "CURRENT_TIME" => return arity(0).and(session(SessionValue::TimeOfDay)),

            _ => {
                return Err(SqlError::new(
                    1305,
                    format!("FUNCTION {} does not exist", function.name),
                ))
            }
        };
        Ok(Expr::Function(scalar, compiled))
    }
}

fn wrong_arguments(name: &str) -> SqlError {
    SqlError::new(
        1582,
        format!("Incorrect parameter count in the call to native function '{name}'"),
    )
}

fn system_variable(text: &str) -> Expr {
    let name = text.trim_start_matches("@@").to_ascii_lowercase();
    let (global, name) = match name.split_once('.') {
        Some(("global", rest)) => (true, rest.to_string()),
        Some(("session" | "local", rest)) => (false, rest.to_string()),
        _ => (false, name),
    };
    Expr::Session(SessionValue::SystemVariable { name, global })
}

/// A numeric literal: an integer when it is one and fits, else a double.
fn number(text: &str) -> SqlResult<Value> {
    if let Ok(x) = text.parse::<i64>() {
        return Ok(Value::Int(x));
    }
    if let Ok(x) = text.parse::<u64>() {
        return Ok(Value::UInt(x));
    }
    // Digits with a point are an exact DECIMAL (MySQL's literal rule);
    // with an exponent, a double.
    if !text.contains(['e', 'E']) {
        if let Some(decimal) = crate::decimal::Decimal::parse(text) {
            return Ok(Value::Decimal(decimal));
        }
    }
    text.parse::<f64>()
        .map(Value::Double)
        .map_err(|_| SqlError::parse(format!("bad number {text}")))
}

fn decode_hex(hex: &str) -> SqlResult<Vec<u8>> {
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(SqlError::parse(format!("bad hex literal X'{hex}'")));
    }
    let padded = if hex.len() % 2 == 1 {
        format!("0{hex}")
    } else {
        hex.to_string()
    };
    (0..padded.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&padded[i..i + 2], 16))
        .collect::<Result<_, _>>()
        .map_err(|_| SqlError::parse(format!("bad hex literal X'{hex}'")))
}

/// The values an evaluation reads: the row, the aggregates' results, the
/// parameters (by slot).
pub struct Inputs<'a> {
    /// The table's row (empty without a table).
    pub row: &'a [Value],
    /// The aggregates' results.
    pub aggregates: &'a [Value],
    /// Parameter values by slot.
    pub params: &'a [Value],
}

impl Expr {
    /// Whether the expression reads no column and no aggregate: a
    /// constant once its parameters are bound.
    pub fn is_constant(&self) -> bool {
        match self {
            Expr::Column(_) | Expr::Aggregate(_) => false,
            Expr::Subquery {
                correlated: true, ..
            } => false,
            _ => {
                let mut constant = true;
                self.for_each_child(&mut |child| constant &= child.is_constant());
                constant
            }
        }
    }

    /// Calls `visit` on each expression directly inside this one (an IN
    /// subquery's left operand included; a subquery's own plan is not an
    /// expression of this query).
    pub fn for_each_child(&self, visit: &mut dyn FnMut(&Expr)) {
        match self {
            Expr::Column(_)
            | Expr::Literal(_)
            | Expr::Param(_)
            | Expr::Session(_)
            | Expr::Aggregate(_)
            | Expr::Outer(_) => {}
            Expr::Not(e) | Expr::Negate(e) | Expr::IsNull(e, _) => visit(e),
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
                visit(a);
                visit(b);
            }
            Expr::Between {
                expr, low, high, ..
            } => {
                visit(expr);
                visit(low);
                visit(high);
            }
            Expr::InList { expr, list, .. } => {
                visit(expr);
                list.iter().for_each(visit);
            }
            Expr::Function(_, args) => args.iter().for_each(visit),
            Expr::Subquery { test, .. } => {
                if let SubqueryTest::In { expr, .. } = test {
                    visit(expr);
                }
            }
        }
    }

    /// The expression with each column (`Column` and `Outer`) replaced by
    /// what `leaf` makes of it; `None` when `leaf` refuses one.
    pub fn transform(&self, leaf: &mut dyn FnMut(&Expr) -> Option<Expr>) -> Option<Expr> {
        let mut boxed = |e: &Expr| e.transform(leaf).map(Box::new);
        Some(match self {
            Expr::Column(_) | Expr::Outer(_) => return leaf(self),
            Expr::Literal(_) | Expr::Param(_) | Expr::Session(_) | Expr::Aggregate(_) => {
                self.clone()
            }
            Expr::Not(e) => Expr::Not(boxed(e)?),
            Expr::Negate(e) => Expr::Negate(boxed(e)?),
            Expr::IsNull(e, negated) => Expr::IsNull(boxed(e)?, *negated),
            Expr::Arithmetic(op, a, b) => Expr::Arithmetic(*op, boxed(a)?, boxed(b)?),
            Expr::Compare(op, a, b) => Expr::Compare(*op, boxed(a)?, boxed(b)?),
            Expr::NullSafeEqual(a, b) => Expr::NullSafeEqual(boxed(a)?, boxed(b)?),
            Expr::And(a, b) => Expr::And(boxed(a)?, boxed(b)?),
            Expr::Or(a, b) => Expr::Or(boxed(a)?, boxed(b)?),
            Expr::Xor(a, b) => Expr::Xor(boxed(a)?, boxed(b)?),
            Expr::Between {
                expr,
                low,
                high,
                negated,
            } => Expr::Between {
                expr: boxed(expr)?,
                low: boxed(low)?,
                high: boxed(high)?,
                negated: *negated,
            },
            Expr::InList {
                expr,
                list,
                negated,
            } => Expr::InList {
                expr: boxed(expr)?,
                list: list
                    .iter()
                    .map(|e| e.transform(leaf))
                    .collect::<Option<_>>()?,
                negated: *negated,
            },
            Expr::Like {
                expr,
                pattern,
                negated,
            } => Expr::Like {
                expr: boxed(expr)?,
                pattern: boxed(pattern)?,
                negated: *negated,
            },
            Expr::Function(function, args) => Expr::Function(
                *function,
                args.iter()
                    .map(|e| e.transform(leaf))
                    .collect::<Option<_>>()?,
            ),
            Expr::Subquery {
                slot,
                correlated,
                test,
            } => Expr::Subquery {
                slot: *slot,
                correlated: *correlated,
                test: match test {
                    SubqueryTest::In { expr, negated } => SubqueryTest::In {
                        expr: boxed(expr)?,
                        negated: *negated,
                    },
                    other => other.clone(),
                },
            },
        })
    }

    /// The expression with every `Outer` column replaced by its value in
    /// `outer` (the earlier tables' part of a join's row).
    pub fn bind_outer(&self, outer: &[Value]) -> Expr {
        self.transform(&mut |leaf| {
            Some(match leaf {
                Expr::Outer(index) => {
                    Expr::Literal(outer.get(*index).cloned().unwrap_or(Value::Null))
                }
                other => other.clone(),
            })
        })
        .expect("binding refuses no column")
    }

    /// Evaluates the expression.
    pub fn eval(&self, inputs: &Inputs<'_>, environment: &dyn Environment) -> SqlResult<Value> {
        let eval = |e: &Expr| e.eval(inputs, environment);
        Ok(match self {
            Expr::Column(index) => inputs.row.get(*index).cloned().unwrap_or(Value::Null),
            Expr::Literal(value) => value.clone(),
            Expr::Param(slot) => inputs.params.get(*slot).cloned().unwrap_or(Value::Null),
            Expr::Aggregate(slot) => inputs.aggregates.get(*slot).cloned().unwrap_or(Value::Null),
            Expr::Outer(index) => {
                return Err(SqlError::new(
                    codes::UNKNOWN_ERROR,
                    format!("internal: outer column {index} evaluated unbound"),
                ))
            }
            Expr::Not(e) => value::boolean(value::truth(&eval(e)?).map(|t| !t)),
            Expr::Negate(e) => value::negate(&eval(e)?)?,
            Expr::Arithmetic(op, a, b) => value::arithmetic(*op, &eval(a)?, &eval(b)?)?,
            Expr::Compare(op, a, b) => {
                let ordering = value::compare(&eval(a)?, &eval(b)?);
                value::boolean(ordering.map(|o| compare_holds(*op, o)))
            }
            Expr::NullSafeEqual(a, b) => {
                let (a, b) = (eval(a)?, eval(b)?);
                value::boolean(Some(match (a.is_null(), b.is_null()) {
                    (true, true) => true,
                    (false, false) => value::compare(&a, &b) == Some(Ordering::Equal),
                    _ => false,
                }))
            }
            Expr::And(a, b) => {
                let a = value::truth(&eval(a)?);
                if a == Some(false) {
                    return Ok(Value::Int(0));
                }
                let b = value::truth(&eval(b)?);
                value::boolean(match (a, b) {
                    (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                })
            }
            Expr::Or(a, b) => {
                let a = value::truth(&eval(a)?);
                if a == Some(true) {
                    return Ok(Value::Int(1));
                }
                let b = value::truth(&eval(b)?);
                value::boolean(match (a, b) {
                    (_, Some(true)) => Some(true),
                    (Some(false), Some(false)) => Some(false),
                    _ => None,
                })
            }
            Expr::Xor(a, b) => {
                let (a, b) = (value::truth(&eval(a)?), value::truth(&eval(b)?));
                value::boolean(a.zip(b).map(|(a, b)| a != b))
            }
            Expr::IsNull(e, negated) => value::boolean(Some(eval(e)?.is_null() != *negated)),
            Expr::Between {
                expr,
                low,
                high,
                negated,
            } => {
                let x = eval(expr)?;
                let above = value::compare(&x, &eval(low)?).map(|o| o != Ordering::Less);
                let below = value::compare(&x, &eval(high)?).map(|o| o != Ordering::Greater);
                let inside = match (above, below) {
                    (Some(false), _) | (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                };
                value::boolean(inside.map(|t| t != *negated))
            }
            Expr::InList {
                expr,
                list,
                negated,
            } => {
                let x = eval(expr)?;
                let found = membership(&x, list.iter().map(eval))?;
                value::boolean(found.map(|t| t != *negated))
            }
            Expr::Like {
                expr,
                pattern,
                negated,
            } => {
                let (x, p) = (eval(expr)?, eval(pattern)?);
                if x.is_null() || p.is_null() {
                    return Ok(Value::Null);
                }
                let text = |v: &Value| match v {
                    Value::Bytes(bytes) => bytes.clone(),
                    other => value::display(other).into_bytes(),
                };
                value::boolean(Some(like(&text(&x), &text(&p)) != *negated))
            }
            Expr::Session(value) => environment.session_value(value)?,
            Expr::Function(function, args) => {
                let mut values = Vec::with_capacity(args.len());
                for arg in args {
                    values.push(eval(arg)?);
                }
                apply(*function, values, environment)?
            }
            Expr::Subquery { slot, test, .. } => {
                let rows = environment.subquery_rows(*slot, inputs.row, inputs.params)?;
                match test {
                    SubqueryTest::Scalar => match rows.as_slice() {
                        [] => Value::Null,
                        [row] => row.first().cloned().unwrap_or(Value::Null),
                        _ => return Err(SqlError::new(1242, "Subquery returns more than 1 row")),
                    },
                    SubqueryTest::Exists { negated } => {
                        value::boolean(Some(rows.is_empty() == *negated))
                    }
                    SubqueryTest::In { expr, negated } => {
                        // IN's rules: a match is true; else any NULL (in
                        // the list or looked for) makes it unknown.
                        let x = eval(expr)?;
                        let items = rows
                            .iter()
                            .map(|row| Ok(row.first().cloned().unwrap_or(Value::Null)));
                        let found = membership(&x, items)?;
                        value::boolean(found.map(|t| t != *negated))
                    }
                }
            }
        })
    }
}

/// NOW()'s fractional digits: none, or a constant 0 to 6.
fn fraction_digits(args: &[Expr], name: &str) -> SqlResult<u8> {
    match args {
        [] => Ok(0),
        [Expr::Literal(value)] => match value.as_u64() {
            Some(fsp) if fsp <= 6 => Ok(fsp as u8),
            _ => Err(SqlError::new(
                1426,
                format!("Too-big precision specified for '{name}'. Maximum is 6."),
            )),
        },
        _ => Err(wrong_arguments(name)),
    }
}

/// Whether `x` is among `items`, by IN's rules: a match is true;
/// otherwise a NULL (looked for, or among them) makes it unknown; no items
/// is false.
fn membership(
    x: &Value,
    items: impl IntoIterator<Item = SqlResult<Value>>,
) -> SqlResult<Option<bool>> {
    let mut found = Some(false);
    for item in items {
        match value::compare(x, &item?) {
            Some(Ordering::Equal) => return Ok(Some(true)),
            None => found = None,
            Some(_) => {}
        }
    }
    Ok(found)
}

/// The error of a statement stopped by KILL QUERY.
pub fn interrupted() -> SqlError {
    SqlError::new(codes::QUERY_INTERRUPTED, "Query execution was interrupted")
}

/// Whether `ordering` satisfies `op`.
pub fn compare_holds(op: CompareOp, ordering: Ordering) -> bool {
    match op {
        CompareOp::Equal => ordering == Ordering::Equal,
        CompareOp::NotEqual => ordering != Ordering::Equal,
        CompareOp::Less => ordering == Ordering::Less,
        CompareOp::LessOrEqual => ordering != Ordering::Greater,
        CompareOp::Greater => ordering == Ordering::Greater,
        CompareOp::GreaterOrEqual => ordering != Ordering::Less,
    }
}

fn apply(
    function: Function,
    values: Vec<Value>,
    environment: &dyn Environment,
) -> SqlResult<Value> {
    Ok(match function {
        Function::Coalesce
        | Function::If
        | Function::Concat
        | Function::Length
        | Function::Upper
        | Function::Lower
        | Function::Abs
        | Function::Sleep => return apply_basic(function, values, environment),
        other => crate::functions::apply(other, &values, environment.zone_offset())?,
    })
}

/// The first functions: SLEEP, COALESCE, IF, CONCAT, LENGTH, UPPER,
/// LOWER, ABS.
fn apply_basic(
    function: Function,
    mut values: Vec<Value>,
    environment: &dyn Environment,
) -> SqlResult<Value> {
    Ok(match function {
        Function::Sleep => {
            let seconds = value::to_f64(&values[0]);
            if !seconds.is_finite() || seconds < 0.0 {
                return Err(SqlError::new(
                    codes::WRONG_ARGUMENTS,
                    "Incorrect arguments to sleep.",
                ));
            }
            // Slept in short steps, so KILL QUERY is heard within one.
            let deadline = std::time::Instant::now()
                + std::time::Duration::from_secs_f64(seconds.min(365.0 * 86_400.0));
            loop {
                if environment.interrupted() {
                    return Err(interrupted());
                }
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    break Value::Int(0);
                }
                client::cooperative::sleep(left.min(std::time::Duration::from_millis(10)));
            }
        }
        Function::Coalesce => values
            .into_iter()
            .find(|v| !v.is_null())
            .unwrap_or(Value::Null),
        Function::If => {
            let otherwise = values.pop().unwrap_or(Value::Null);
            let then = values.pop().unwrap_or(Value::Null);
            match values.first().and_then(value::truth) {
                Some(true) => then,
                _ => otherwise,
            }
        }
        Function::Concat => {
            let mut out = Vec::new();
            for v in &values {
                if !value::write_text(v, &mut out) {
                    return Ok(Value::Null);
                }
            }
            Value::Bytes(out)
        }
        Function::Length => match &values[0] {
            Value::Null => Value::Null,
            v => {
                let mut out = Vec::new();
                value::write_text(v, &mut out);
                Value::Int(out.len() as i64)
            }
        },
        Function::Upper | Function::Lower => match &values[0] {
            Value::Null => Value::Null,
            v => {
                let text = value::display(v);
                Value::from(match function {
                    Function::Upper => text.to_uppercase(),
                    _ => text.to_lowercase(),
                })
            }
        },
        Function::Abs => match &values[0] {
            Value::Null => Value::Null,
            Value::Int(x) => Value::Int(
                x.checked_abs()
                    .ok_or_else(|| SqlError::new(1690, "BIGINT value is out of range in abs()"))?,
            ),
            Value::UInt(x) => Value::UInt(*x),
            v => Value::Double(value::to_f64(v).abs()),
        },
        other => unreachable!("{other:?} is evaluated by the functions module"),
    })
}

/// SQL LIKE: `%` any run, `_` one character (a UTF-8 character), `\`
/// escapes the next; compared as bytes otherwise.
pub fn like(value: &[u8], pattern: &[u8]) -> bool {
    // Iterative matching with one backtrack point, linear in practice.
    let (mut v, mut p) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    let char_len = |bytes: &[u8], at: usize| -> usize {
        let lead = bytes[at];
        match lead {
            0x00..=0x7F => 1,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        }
        .min(bytes.len() - at)
    };
    while v < value.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'%' => {
                    star = Some((p, v));
                    p += 1;
                    continue;
                }
                b'_' => {
                    v += char_len(value, v);
                    p += 1;
                    continue;
                }
                b'\\' if p + 1 < pattern.len() && pattern[p + 1] == value[v] => {
                    v += 1;
                    p += 2;
                    continue;
                }
                c if c != b'\\' && c == value[v] => {
                    v += 1;
                    p += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((star_p, star_v)) => {
                let next = star_v + char_len(value, star_v);
                star = Some((star_p, next));
                p = star_p + 1;
                v = next;
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|c| *c == b'%')
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoSession;
    impl Environment for NoSession {
        fn session_value(&self, _: &SessionValue) -> SqlResult<Value> {
            Ok(Value::Null)
        }
    }

    fn eval_sql(sql: &str, params: &[Value]) -> SqlResult<Value> {
        let dialect = sqlparser::dialect::MySqlDialect {};
        let expr = sqlparser::parser::Parser::new(&dialect)
            .try_with_sql(sql)
            .unwrap()
            .parse_expr()
            .unwrap();
        let mut compiler = Compiler::new(None, None);
        let compiled = compiler.compile(&expr)?;
        let order = compiler.parameter_order();
        let bound: Vec<Value> = order
            .iter()
            .map(|position| params[*position].clone())
            .collect();
        let inputs = Inputs {
            row: &[],
            aggregates: &[],
            params: &bound,
        };
        compiled.eval(&inputs, &NoSession)
    }

    #[test]
    fn three_valued_logic_and_mysql_conversions() {
        assert_eq!(eval_sql("1 + 2 * 3", &[]), Ok(Value::Int(7)));
        assert_eq!(eval_sql("NULL AND 0", &[]), Ok(Value::Int(0)));
        assert_eq!(eval_sql("NULL OR 0", &[]), Ok(Value::Null));
        assert_eq!(eval_sql("'10' = 10", &[]), Ok(Value::Int(1)));
        assert_eq!(eval_sql("5 BETWEEN 1 AND NULL", &[]), Ok(Value::Null));
        assert_eq!(eval_sql("5 IN (1, NULL, 5)", &[]), Ok(Value::Int(1)));
        assert_eq!(eval_sql("5 NOT IN (1, NULL)", &[]), Ok(Value::Null));
        assert_eq!(eval_sql("NULL <=> NULL", &[]), Ok(Value::Int(1)));
        assert_eq!(eval_sql("CONCAT('a', 1, 'b')", &[]), Ok(Value::from("a1b")));
        assert_eq!(eval_sql("IFNULL(NULL, 3)", &[]), Ok(Value::Int(3)));
    }

    #[test]
    fn placeholders_are_numbered_by_their_place_in_the_text() {
        let params = [Value::Int(10), Value::Int(3)];
        assert_eq!(eval_sql("? - ?", &params), Ok(Value::Int(7)));
    }

    #[test]
    fn like_matches_as_mysql() {
        assert!(like(b"abc", b"a%"));
        assert!(like(b"abc", b"%c"));
        assert!(like(b"abc", b"a_c"));
        assert!(!like(b"abc", b"a_"));
        assert!(like(b"a%c", b"a\\%c"));
        assert!(!like(b"abc", b"a\\%c"));
        assert!(like(b"", b"%"));
        assert!(like(b"mississippi", b"%ss%ss%"));
    }
}
