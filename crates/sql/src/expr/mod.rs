//! Expressions: compiled once from the parser's tree into [`Expr`]
//! (columns resolved to their index in the row, `?` placeholders to
//! parameter slots, aggregates to their result's slot: `compile`) and
//! evaluated per row with SQL's three-valued logic and MySQL's
//! conversions.
//!
//! Placeholders are numbered by where they stand in the statement's text,
//! not by the order the compiler meets them, so a statement's parts can
//! be compiled in any order.

use crate::error::{codes, SqlError, SqlResult};
use crate::value::Value;
use crate::value::{self, Arithmetic};
use client::CompareOp;
use std::cmp::Ordering;

mod compile;
mod rows;

use compile::wrong_arguments;
pub use compile::{column_at, Compiler, Scope};
pub use rows::balanced_or;

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
    /// The result of the window function in this slot: only while the
    /// query compiles, which then reads it as the aggregate slot after
    /// its aggregates' (`plan`: window values are appended to each row's
    /// aggregate results).
    Window(usize),
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
    /// `expr [NOT] IN (SELECT x ...)`, or a row's `(a, b) [NOT] IN
    /// (SELECT x, y ...)`, with IN's NULL rules.
    In {
        /// The value looked for (one), or the row's values.
        exprs: Vec<Expr>,
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

/// A RAND(n)'s seed and where it stands in the statement's text (which
/// tells two RAND(n) of one statement apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RandomSeed {
    /// n.
    pub seed: i64,
    /// The line and column of the call.
    pub at: (u64, u64),
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
    /// RAND(), or RAND(n) with a constant seed: the next value of the
    /// session's generator, or of this RAND(n)'s own generator, seeded
    /// with n when the statement first calls it (as MySQL's: each RAND(n)
    /// of a statement its own sequence). A new value each evaluation:
    /// never a constant.
    Random(Option<RandomSeed>),
    /// UUID(): a new version-1 UUID each evaluation.
    Uuid,
}

/// A scalar function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Function {
    /// A JSON function (`crate::json::functions`).
    Json(crate::json::functions::JsonFunction),
    /// LAST_INSERT_ID(x): x, which LAST_INSERT_ID() then answers and the
    /// statement reports as its insert id (the upsert idiom
    /// `ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)`).
    SetLastInsertId,
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
    /// GET_LOCK and its kin: the session's user-level locks
    /// (`crate::user_locks`).
    UserLock(crate::user_locks::UserLockFunction),
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
    /// SQRT, EXP, LN, LOG2, LOG10 (and LOG of one argument).
    Math(crate::functions::math::MathFunction),
    /// LOG(base, x).
    Log,
    /// POW(x, y), POWER.
    Power,
    /// SIGN(x).
    Sign,
    /// REPEAT(s, n).
    Repeat,
    /// SPACE(n).
    Space,
    /// REVERSE(s).
    Reverse,
    /// HEX(x).
    Hex,
    /// UNHEX(s).
    Unhex,
    /// MD5(s), SHA1(s), SHA2(s, bits).
    Digest(crate::functions::strings::DigestKind),
    /// ASCII(s).
    Ascii,
    /// FIND_IN_SET(s, list).
    FindInSet,
    /// FIELD(s, a, b, ...).
    Field,
    /// ELT(n, a, b, ...).
    Element,
    /// STRCMP(a, b).
    StrCmp,
    /// DATE_FORMAT(d, format).
    DateFormat,
    /// DAYNAME(d).
    DayName,
    /// MONTHNAME(d).
    MonthName,
    /// LAST_DAY(d).
    LastDay,
    /// FROM_UNIXTIME(seconds).
    FromUnixTime,
    /// TIMESTAMPDIFF(unit, a, b).
    TimestampDiff(crate::temporal::IntervalUnit),
    /// WEEK(d[, mode]), and WEEKOFYEAR(d) as WEEK(d, 3).
    Week,
    /// YEARWEEK(d[, mode]).
    YearWeek,
    /// STR_TO_DATE(text, format).
    StrToDate,
    /// CONVERT_TZ(d, from, to).
    ConvertTz,
    /// FORMAT(x, decimals[, locale]).
    Format,
    /// REGEXP, RLIKE and the REGEXP_ functions.
    Regexp(crate::functions::patterns::RegexpFunction),
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
    /// GROUP_CONCAT: the values' texts joined (see [`GroupConcat`]).
    GroupConcat,
    /// JSON_ARRAYAGG(x): a JSON array of the values (NULL as null); its
    /// argument is `JSON_ARRAY(x)`, whose element each row adds.
    JsonArrayAgg,
    /// JSON_OBJECTAGG(key, value): a JSON object of the pairs (the last
    /// of a key kept); its argument is `JSON_OBJECT(key, value)`, whose
    /// member each row adds (a NULL key is its error, 3158).
    JsonObjectAgg,
}

/// A window function of a query: `f(...) OVER (PARTITION BY ... ORDER BY
/// ...)`, computed over the query's rows once they are grouped and
/// HAVING has kept them (docs/design/0029-joins-and-grouping.md,
/// "Window functions").
#[derive(Clone, Debug, PartialEq)]
pub struct WindowFunction {
    /// What it computes.
    pub kind: WindowKind,
    /// Its arguments, over the (grouped) row.
    pub arguments: Vec<Expr>,
    /// PARTITION BY.
    pub partition_by: Vec<Expr>,
    /// ORDER BY within the partition, descending.
    pub order_by: Vec<(Expr, bool)>,
    /// The frame written (`ROWS` or `RANGE BETWEEN ...`); `None`: SQL's
    /// default, the partition's rows up to the current one's last peer
    /// with ORDER BY, the whole partition without.
    pub frame: Option<WindowFrame>,
}

/// A window's frame: the rows of its partition an aggregate or
/// FIRST_VALUE, LAST_VALUE, NTH_VALUE reads for each row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowFrame {
    /// ROWS (bounds count rows) or RANGE (bounds are peer groups: RANGE
    /// with offsets is not built).
    pub rows: bool,
    /// Where it begins.
    pub start: FrameBound,
    /// Where it ends (included).
    pub end: FrameBound,
}

/// One end of a window frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameBound {
    /// UNBOUNDED PRECEDING: the partition's first row.
    UnboundedPreceding,
    /// `n PRECEDING`.
    Preceding(u64),
    /// CURRENT ROW (with RANGE, its first or last peer).
    CurrentRow,
    /// `n FOLLOWING`.
    Following(u64),
    /// UNBOUNDED FOLLOWING: the partition's last row.
    UnboundedFollowing,
}

/// What a window function computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowKind {
    /// ROW_NUMBER(): 1, 2, ... in the partition's order.
    RowNumber,
    /// RANK(): 1 + the rows before with other ORDER BY values (gaps).
    Rank,
    /// DENSE_RANK(): 1 + the distinct ORDER BY values before.
    DenseRank,
    /// LAG(x[, n[, default]]): x of the row n before.
    Lag,
    /// LEAD(x[, n[, default]]): x of the row n after.
    Lead,
    /// COUNT, SUM, AVG, MIN, MAX over the frame.
    Aggregate(AggregateFunction),
    /// FIRST_VALUE(x): x of the frame's first row.
    FirstValue,
    /// LAST_VALUE(x): x of the frame's last row.
    LastValue,
    /// NTH_VALUE(x, n): x of the frame's nth row.
    NthValue,
    /// NTILE(n): the bucket, 1 to n, of n as equal as can be.
    Ntile,
    /// PERCENT_RANK(): (RANK() - 1) / (rows - 1).
    PercentRank,
    /// CUME_DIST(): the share of rows up to the current one's last peer.
    CumeDist,
}

impl WindowKind {
    /// Whether the function reads a frame (the others read the whole
    /// partition and ignore one written, as MySQL's do).
    pub fn reads_frame(self) -> bool {
        matches!(
            self,
            WindowKind::Aggregate(_)
                | WindowKind::FirstValue
                | WindowKind::LastValue
                | WindowKind::NthValue
        )
    }
}

/// GROUP_CONCAT's ORDER BY and SEPARATOR.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupConcat {
    /// The order of the values within the group: expressions over the
    /// row, descending.
    pub order_by: Vec<(Expr, bool)>,
    /// Between two values (',' unless SEPARATOR gives another).
    pub separator: Vec<u8>,
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
    /// GROUP_CONCAT's order and separator (`None` for the others).
    pub concat: Option<Box<GroupConcat>>,
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

    /// Runs a user-level lock function (GET_LOCK, ...) for the session.
    fn user_lock(
        &self,
        _function: crate::user_locks::UserLockFunction,
        _arguments: &[Value],
    ) -> SqlResult<Value> {
        Err(SqlError::unsupported("user-level locks here"))
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

    /// LAST_INSERT_ID(x) ran: the session's insert id is to be `id` once
    /// the statement is done.
    fn set_last_insert_id(&self, _id: u64) {}

    /// The evaluation met what MySQL makes a warning (a division by
    /// zero): recorded for SHOW WARNINGS, or, while the statement
    /// computes values to store (`set_storing`), the statement's error,
    /// as in MySQL's strict mode.
    fn warn(&self, _code: u16, _message: &str) -> SqlResult<()> {
        Ok(())
    }

    /// Records a condition for SHOW WARNINGS as it is (a row INSERT
    /// IGNORE left out is a warning, whatever the statement stores).
    fn raise(&self, _level: crate::diagnostics::Level, _code: u16, _message: &str) {}

    /// The conditions the statement raised so far (the info text's
    /// "Warnings: n").
    fn warning_count(&self) -> usize {
        0
    }

    /// Whether the values computed from now on are to be stored (an
    /// INSERT's, an UPDATE's SET): a warning is then an error.
    fn set_storing(&self, _storing: bool) {}
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
            Expr::Column(_) | Expr::Aggregate(_) | Expr::Window(_) => false,
            Expr::Subquery {
                correlated: true, ..
            } => false,
            // A new value each row: `WHERE RAND() < 0.1` samples rows.
            Expr::Session(SessionValue::Random(_) | SessionValue::Uuid) => false,
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
            | Expr::Window(_)
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
                if let SubqueryTest::In { exprs, .. } = test {
                    exprs.iter().for_each(visit);
                }
            }
        }
    }

    /// The expression with each column (`Column` and `Outer`) and window
    /// result (`Window`) replaced by what `leaf` makes of it; `None` when
    /// `leaf` refuses one.
    pub fn transform(&self, leaf: &mut dyn FnMut(&Expr) -> Option<Expr>) -> Option<Expr> {
        let mut boxed = |e: &Expr| e.transform(leaf).map(Box::new);
        Some(match self {
            Expr::Column(_) | Expr::Outer(_) | Expr::Window(_) => return leaf(self),
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
                    SubqueryTest::In { exprs, negated } => SubqueryTest::In {
                        exprs: exprs
                            .iter()
                            .map(|e| e.transform(leaf))
                            .collect::<Option<_>>()?,
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
            Expr::Window(slot) => {
                return Err(SqlError::new(
                    codes::UNKNOWN_ERROR,
                    format!("internal: window function {slot} evaluated before its query planned"),
                ))
            }
            Expr::Not(e) => value::boolean(value::truth(&eval(e)?).map(|t| !t)),
            Expr::Negate(e) => value::negate(&eval(e)?)?,
            Expr::Arithmetic(op, a, b) => {
                let (a, b) = (eval(a)?, eval(b)?);
                let result = value::arithmetic(*op, &a, &b)?;
                let divides = matches!(
                    op,
                    Arithmetic::Divide | Arithmetic::IntegerDivide | Arithmetic::Modulo
                );
                if divides && result.is_null() && !a.is_null() && !b.is_null() {
                    // NULL from two values: the divisor was zero.
                    environment.warn(codes::DIVISION_BY_ZERO, "Division by 0")?;
                }
                result
            }
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
                    SubqueryTest::In { exprs, negated } => {
                        // IN's rules: a match is true; else any NULL (in
                        // the list or looked for) makes it unknown.
                        let found = match exprs.as_slice() {
                            [expr] => {
                                let x = eval(expr)?;
                                let items = rows
                                    .iter()
                                    .map(|row| Ok(row.first().cloned().unwrap_or(Value::Null)));
                                membership(&x, items)?
                            }
                            exprs => {
                                let looked_for =
                                    exprs.iter().map(eval).collect::<SqlResult<Vec<_>>>()?;
                                row_membership(&looked_for, &rows)
                            }
                        };
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

/// Whether the row `x` is among `rows`, by IN's rules on rows: a row
/// matches when every element is equal; a row with no unequal element
/// but a NULL comparison makes the answer unknown unless another row
/// matches.
fn row_membership(x: &[Value], rows: &[Vec<Value>]) -> Option<bool> {
    let mut found = Some(false);
    for row in rows {
        let mut equal = Some(true);
        for (a, b) in x.iter().zip(row) {
            match value::compare(a, b) {
                Some(Ordering::Equal) => {}
                None => equal = None,
                Some(_) => {
                    equal = Some(false);
                    break;
                }
            }
        }
        match equal {
            Some(true) => return Some(true),
            None => found = None,
            Some(false) => {}
        }
    }
    found
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
        Function::SetLastInsertId => {
            let value = values.into_iter().next().unwrap_or(Value::Null);
            // MySQL keeps the argument as a BIGINT UNSIGNED (NULL as 0).
            let id = match &value {
                Value::Null => 0,
                other => match crate::functions::apply(
                    Function::Cast(crate::functions::CastTarget::Unsigned),
                    std::slice::from_ref(other),
                    0,
                )? {
                    Value::UInt(id) => id,
                    other => other.as_u64().unwrap_or(0),
                },
            };
            environment.set_last_insert_id(id);
            // The value kept, as MySQL returns it (`LAST_INSERT_ID(-1)` is
            // 18446744073709551615): what its BIGINT UNSIGNED column holds.
            match value {
                Value::Null => Value::Null,
                _ => Value::UInt(id),
            }
        }
        Function::StrToDate => {
            let read = crate::functions::apply(function, &values, environment.zone_offset())?;
            if read.is_null() && !values.iter().any(Value::is_null) {
                // Text that is no date by the format: NULL and 1411, an
                // error where the value is stored (MySQL's strict mode).
                let mut text = Vec::new();
                value::write_text(&values[0], &mut text);
                environment.warn(
                    codes::WRONG_VALUE_FOR_TYPE,
                    &format!(
                        "Incorrect datetime value: '{}' for function str_to_date",
                        String::from_utf8_lossy(&text)
                    ),
                )?;
            }
            read
        }
        Function::Format => {
            if let Some(locale) = values.get(2).filter(|l| !l.is_null()) {
                let mut name = Vec::new();
                value::write_text(locale, &mut name);
                if !crate::functions::math::known_locale(&name) {
                    environment.raise(
                        crate::diagnostics::Level::Warning,
                        codes::UNKNOWN_LOCALE,
                        &format!("Unknown locale: '{}'", String::from_utf8_lossy(&name)),
                    );
                }
            }
            crate::functions::apply(function, &values, environment.zone_offset())?
        }
        Function::Json(json) => crate::json::functions::apply(json, &values)?,
        Function::UserLock(function) => environment.user_lock(function, &values)?,
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
                // One character for one, as MySQL maps case: a character
                // whose other case is several (ß, upper) stays as it is.
                fn one_for_one(mut mapped: impl Iterator<Item = char>, c: char) -> char {
                    match (mapped.next(), mapped.next()) {
                        (Some(other), None) => other,
                        _ => c,
                    }
                }
                let text = value::display(v);
                let mapped: String = text
                    .chars()
                    .map(|c| match function {
                        Function::Upper => one_for_one(c.to_uppercase(), c),
                        _ => one_for_one(c.to_lowercase(), c),
                    })
                    .collect();
                Value::from(mapped)
            }
        },
        Function::Abs => match &values[0] {
            Value::Null => Value::Null,
            Value::Int(x) => Value::Int(x.checked_abs().ok_or_else(|| {
                SqlError::new(
                    codes::DATA_OUT_OF_RANGE,
                    format!("BIGINT value is out of range in 'abs({x})'"),
                )
            })?),
            Value::UInt(x) => Value::UInt(*x),
            Value::Decimal(x) => Value::Decimal(x.abs()),
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
        let dialect = crate::dialect::TesseraDialect::new();
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
    fn rows_are_bounded_and_long_lists_of_rows_stay_shallow() {
        let wide = vec!["1"; 300].join(", ");
        let error = eval_sql(&format!("({wide}) = ({wide})"), &[]).unwrap_err();
        assert_eq!(error.code, codes::NOT_SUPPORTED_YET);
        // An OR chain this long would overflow the test thread's stack
        // when evaluated: the alternatives are a balanced tree.
        let list: Vec<String> = (0..100_000).map(|i| format!("({i}, {i})")).collect();
        let list = list.join(", ");
        let found = eval_sql(&format!("(99999, 99999) IN ({list})"), &[]).unwrap();
        assert_eq!(found, Value::Int(1));
        let missing = eval_sql(&format!("(5, 6) IN ({list})"), &[]).unwrap();
        assert_eq!(missing, Value::Int(0));
        // One `?` is one parameter, however often the expansion reads it.
        let order = eval_sql("(1, 2) < (?, ?)", &[Value::Int(1), Value::Int(3)]).unwrap();
        assert_eq!(order, Value::Int(1));
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
