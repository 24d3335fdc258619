//! The result column a select-list expression makes: its name and the
//! type the wire protocol announces for it (a typed driver reads values
//! by it, the binary protocol sends them as it says).
//!
//! The type is derived from the expression before any row is read, by
//! the rules the evaluator follows on values (`value::arithmetic`, the
//! functions, the accumulators): integers stay integers, an exact
//! number with an integer is exact, anything with a double or with
//! text (read as a number) is a double. So a driver that maps types
//! gets a number for `price * quantity`, as from MySQL, and the binary
//! protocol's conversion to the declared type never loses a value.
//! Where the type cannot be known (a parameter, a function whose type
//! depends on its argument's value), the column is text: every value has
//! a text form.

use crate::expr::{Aggregate, AggregateFunction, Compiler, Expr, Function, WindowKind};
use crate::functions::patterns::RegexpFunction;
use crate::result::{ColumnKind, OutputColumn};
use crate::value::{self, Arithmetic, Value};

/// The result column an output expression makes.
pub(super) fn describe_output(expr: &Expr, name: &str, compiler: &Compiler<'_>) -> OutputColumn {
    match expr {
        // A table's column keeps its table, its flags and its type.
        Expr::Column(index) => {
            if let Some(mut column) = table_column(*index, compiler) {
                column.name = name.to_string();
                return column;
            }
        }
        // A window function that gives one of its argument's values
        // describes that argument.
        Expr::Window(slot) => {
            if let Some(window) = compiler.window(*slot) {
                let gives_argument = match window.kind {
                    WindowKind::FirstValue | WindowKind::LastValue | WindowKind::NthValue => true,
                    // LAG's and LEAD's default may be of another kind.
                    WindowKind::Aggregate(AggregateFunction::Min | AggregateFunction::Max)
                    | WindowKind::Lag
                    | WindowKind::Lead => window.arguments.len() < 3,
                    _ => false,
                };
                if gives_argument {
                    return describe_output(&window.arguments[0], name, compiler);
                }
            }
        }
        _ => {}
    }
    let kind = kind_of(expr, compiler).unwrap_or(ColumnKind::Text(255));
    OutputColumn::computed(name, kind)
}

/// The column of a table (or of a derived table) that `index` names in
/// the compiler's scopes, described as its table declares it.
fn table_column(index: usize, compiler: &Compiler<'_>) -> Option<OutputColumn> {
    let (scope, column) = crate::expr::column_at(compiler.scopes(), index)?;
    let mut described = OutputColumn::of_column(scope.table, column);
    if let Some(alias) = scope.names.first() {
        described.table = alias.clone();
    }
    Some(described)
}

/// The kind every value of `expr` fits, when it can be known before the
/// rows: `None` when it cannot (the caller declares text).
fn kind_of(expr: &Expr, compiler: &Compiler<'_>) -> Option<ColumnKind> {
    let integer = ColumnKind::BigInt { unsigned: false };
    Some(match expr {
        Expr::Column(index) => table_column(*index, compiler)?.kind,
        Expr::Literal(Value::Int(_)) => integer,
        Expr::Literal(Value::UInt(_)) => ColumnKind::BigInt { unsigned: true },
        Expr::Literal(Value::Double(_)) => ColumnKind::Double,
        Expr::Literal(Value::Decimal(x)) => ColumnKind::Decimal {
            precision: x.precision().max(x.scale() + 1),
            scale: x.scale(),
        },
        Expr::Literal(Value::Bytes(text)) => ColumnKind::Text(text.len().max(1) as u32),
        Expr::Literal(Value::Null) => ColumnKind::Null,
        Expr::Negate(operand) => match Number::of(&kind_of(operand, compiler)?)? {
            // `-x` is signed even for an UNSIGNED x.
            Number::Integer { digits, .. } => Number::Integer {
                unsigned: false,
                digits,
            },
            other => other,
        }
        .kind(),
        Expr::Arithmetic(operator, left, right) => {
            let left = Number::of(&kind_of(left, compiler)?)?;
            let right = Number::of(&kind_of(right, compiler)?)?;
            Number::arithmetic(*operator, left, right).kind()
        }
        // Truth values are integers: 1, 0 or NULL.
        Expr::Not(_)
        | Expr::Compare(..)
        | Expr::And(..)
        | Expr::Or(..)
        | Expr::Xor(..)
        | Expr::IsNull(..)
        | Expr::Between { .. }
        | Expr::InList { .. }
        | Expr::Like { .. }
        | Expr::NullSafeEqual(..) => integer,
        Expr::Subquery {
            test: crate::expr::SubqueryTest::Exists { .. } | crate::expr::SubqueryTest::In { .. },
            ..
        } => integer,
        // A scalar subquery's value is its one column's (or NULL).
        Expr::Subquery {
            slot,
            test: crate::expr::SubqueryTest::Scalar,
            ..
        } => {
            let subquery = compiler.subqueries().get(*slot)?;
            match &subquery.plan.columns[..] {
                [column] => column.kind.clone(),
                _ => return None,
            }
        }
        Expr::Session(session) => session_kind(session)?,
        Expr::Function(function, arguments) => function_kind(*function, arguments, compiler)?,
        Expr::Aggregate(slot) => {
            let Aggregate {
                function, argument, ..
            } = compiler.aggregate(*slot)?;
            aggregate_kind(*function, argument.as_ref(), compiler)?
        }
        Expr::Window(slot) => {
            let window = compiler.window(*slot)?;
            match window.kind {
                WindowKind::RowNumber
                | WindowKind::Rank
                | WindowKind::DenseRank
                | WindowKind::Ntile => integer,
                WindowKind::PercentRank | WindowKind::CumeDist => ColumnKind::Double,
                WindowKind::Aggregate(function) => {
                    aggregate_kind(function, window.arguments.first(), compiler)?
                }
                WindowKind::FirstValue | WindowKind::LastValue | WindowKind::NthValue => {
                    kind_of(window.arguments.first()?, compiler)?
                }
                WindowKind::Lag | WindowKind::Lead => {
                    let value = kind_of(window.arguments.first()?, compiler)?;
                    match window.arguments.get(2) {
                        Some(default) => value.unite(kind_of(default, compiler)?),
                        None => value,
                    }
                }
            }
        }
        _ => return None,
    })
}

/// The kind of a session value: numbers as MySQL types them, so that a
/// typed driver reads a number (LAST_INSERT_ID(), @@autocommit); other
/// variables are text, whatever SET gave them.
fn session_kind(session: &crate::expr::SessionValue) -> Option<ColumnKind> {
    use crate::expr::SessionValue as S;
    Some(match session {
        S::LastInsertId | S::ConnectionId => ColumnKind::BigInt { unsigned: true },
        S::RowCount => ColumnKind::BigInt { unsigned: false },
        // The counts the session keeps, and the variables whose default
        // is a number (SET keeps them numbers).
        S::SystemVariable { name, .. } => match name.as_str() {
            "warning_count" | "error_count" | "in_transaction" => {
                ColumnKind::BigInt { unsigned: false }
            }
            "last_insert_id" | "identity" => ColumnKind::BigInt { unsigned: true },
            name => match crate::variables::default_of(name)? {
                Value::Int(_) => ColumnKind::BigInt { unsigned: false },
                Value::UInt(_) => ColumnKind::BigInt { unsigned: true },
                _ => return None,
            },
        },
        S::Now(fsp) => ColumnKind::DateTime(*fsp),
        S::UtcNow => ColumnKind::DateTime(0),
        S::Today => ColumnKind::Date,
        S::TimeOfDay => ColumnKind::Time(0),
        S::Random(_) => ColumnKind::Double,
        S::Uuid => ColumnKind::Text(36),
        _ => return None,
    })
}

/// The kind of a function's result, from its arguments' where it
/// follows them.
fn function_kind(
    function: Function,
    arguments: &[Expr],
    compiler: &Compiler<'_>,
) -> Option<ColumnKind> {
    let integer = ColumnKind::BigInt { unsigned: false };
    let argument = |at: usize| kind_of(arguments.get(at)?, compiler);
    // The kind that holds each of the arguments from `from` on.
    let united = |from: usize| {
        arguments
            .get(from..)?
            .iter()
            .try_fold(ColumnKind::Null, |kind, argument| {
                Some(kind.unite(kind_of(argument, compiler)?))
            })
    };
    Some(match function {
        Function::DatePart(_)
        | Function::CharLength
        | Function::Locate
        | Function::DateDiff
        | Function::Length
        | Function::Sign
        | Function::Ascii
        | Function::FindInSet
        | Function::Field
        | Function::StrCmp
        | Function::TimestampDiff(_)
        | Function::Week
        | Function::YearWeek
        | Function::Regexp(RegexpFunction::Like | RegexpFunction::Position) => integer,
        Function::SetLastInsertId
        | Function::UserLock(crate::user_locks::UserLockFunction::IsUsed) => {
            ColumnKind::BigInt { unsigned: true }
        }
        Function::UserLock(_) => integer,
        Function::Math(_) | Function::Log | Function::Power => ColumnKind::Double,
        // Whole seconds, or with microseconds when the time has them.
        Function::UnixTimestamp => match arguments.first() {
            None => integer,
            Some(Expr::Literal(text @ Value::Bytes(_))) => match value::datetime_of(text)? {
                datetime if datetime.clock().3 == 0 => integer,
                datetime => ColumnKind::Decimal {
                    precision: 11 + datetime.fsp.clamp(1, 6),
                    scale: datetime.fsp.clamp(1, 6),
                },
            },
            // The time's fractional digits, as the value has them.
            Some(time) => match kind_of(time, compiler)? {
                ColumnKind::Date | ColumnKind::DateTime(0) | ColumnKind::Timestamp(0) => integer,
                ColumnKind::DateTime(fsp) | ColumnKind::Timestamp(fsp) => ColumnKind::Decimal {
                    precision: 11 + fsp.min(6),
                    scale: fsp.min(6),
                },
                _ => return None,
            },
        },
        Function::DateOf | Function::LastDay => ColumnKind::Date,
        Function::FromUnixTime | Function::ConvertTz => ColumnKind::DateTime(0),
        // STR_TO_DATE's type is its format's, when the format is known.
        Function::StrToDate => {
            let Some(Expr::Literal(Value::Bytes(format))) = arguments.get(1) else {
                return None;
            };
            use crate::functions::reading_dates::{read_kind, ReadKind};
            match read_kind(format) {
                ReadKind::Date => ColumnKind::Date,
                ReadKind::DateTime(fsp) => ColumnKind::DateTime(fsp),
                ReadKind::Time(fsp) => ColumnKind::Time(fsp),
            }
        }
        Function::Cast(target) => {
            use crate::functions::CastTarget as C;
            match target {
                C::Signed => integer,
                C::Unsigned => ColumnKind::BigInt { unsigned: true },
                C::Decimal { precision, scale } => ColumnKind::Decimal { precision, scale },
                C::Double => ColumnKind::Double,
                C::Char => ColumnKind::Text(255),
                C::Date => ColumnKind::Date,
                C::DateTime { fsp } => ColumnKind::DateTime(fsp),
                C::Time { fsp } => ColumnKind::Time(fsp),
            }
        }
        Function::Json(json) if json.returns_json() => ColumnKind::Json,
        Function::Json(json) if json.returns_integer() => integer,
        Function::Json(_) => ColumnKind::LongText(u16::MAX as u32),
        // One of the arguments' values, as it is.
        Function::Coalesce | Function::Greatest | Function::Least => united(0)?,
        Function::If => united(1)?,
        Function::NullIf => argument(0)?,
        // Numbers whose kind follows their argument's.
        Function::Abs => match Number::of(&argument(0)?)? {
            Number::Null => ColumnKind::Null,
            number => number.kind(),
        },
        Function::Round | Function::Truncate => match Number::of(&argument(0)?)? {
            Number::Exact { precision, scale } => {
                // The digits kept: a constant's, else the argument's.
                let kept = match arguments.get(1) {
                    None => 0,
                    Some(Expr::Literal(Value::Int(digits))) => {
                        (*digits).clamp(0, scale as i64) as u8
                    }
                    Some(_) => scale,
                };
                Number::Exact {
                    precision: precision.saturating_sub(scale) + kept + 1,
                    scale: kept,
                }
                .kind()
            }
            number => number.kind(),
        },
        Function::Floor | Function::Ceiling => match Number::of(&argument(0)?)? {
            // A DECIMAL's floor is a BIGINT when it fits one, as the
            // evaluator gives it.
            Number::Exact { precision, scale } if precision.saturating_sub(scale) <= 18 => integer,
            Number::Exact { precision, scale } => Number::Exact {
                precision: precision.saturating_sub(scale) + 1,
                scale: 0,
            }
            .kind(),
            number => number.kind(),
        },
        _ => return None,
    })
}

/// The kind of an aggregate's result over `argument`'s values.
fn aggregate_kind(
    function: AggregateFunction,
    argument: Option<&Expr>,
    compiler: &Compiler<'_>,
) -> Option<ColumnKind> {
    let number = |argument: Option<&Expr>| Number::of(&kind_of(argument?, compiler)?);
    Some(match function {
        AggregateFunction::CountRows | AggregateFunction::Count => {
            ColumnKind::BigInt { unsigned: false }
        }
        AggregateFunction::GroupConcat => ColumnKind::LongText(1 << 20),
        AggregateFunction::JsonArrayAgg | AggregateFunction::JsonObjectAgg => ColumnKind::Json,
        AggregateFunction::Min | AggregateFunction::Max => kind_of(argument?, compiler)?,
        // Exact sums and averages are DECIMALs (an integer sum may pass
        // 64 bits), as MySQL's; an average has 4 more digits after the
        // point than its values.
        AggregateFunction::Sum => match number(argument)? {
            Number::Integer { .. } | Number::Null => ColumnKind::Decimal,
            Number::Exact { scale, .. } => ColumnKind::Decimal {
                precision: 65,
                scale,
            },
            Number::Approximate => ColumnKind::Double,
        },
        AggregateFunction::Average => match number(argument)? {
            Number::Integer { .. } | Number::Null => ColumnKind::Decimal {
                precision: 65,
                scale: 4,
            },
            Number::Exact { scale, .. } => ColumnKind::Decimal {
                precision: 65,
                scale: (scale + 4).min(MAX_SCALE),
            },
            Number::Approximate => ColumnKind::Double,
        },
    })
}

/// The most digits after the point a DECIMAL has (MySQL's 30).
const MAX_SCALE: u8 = 30;
/// The most digits a DECIMAL has (MySQL's 65).
const MAX_PRECISION: u8 = 65;

/// What kind of number a value is when arithmetic reads it: the classes
/// `value::arithmetic` tells apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Number {
    /// An integer of at most `digits` digits.
    Integer { unsigned: bool, digits: u8 },
    /// A DECIMAL.
    Exact { precision: u8, scale: u8 },
    /// A double: a FLOAT, a DOUBLE, or text, a date or a time read as a
    /// number.
    Approximate,
    /// Always NULL.
    Null,
}

impl Number {
    /// How arithmetic reads a value of `kind`.
    fn of(kind: &ColumnKind) -> Option<Number> {
        Some(match kind {
            ColumnKind::Int { bytes, unsigned } => Number::Integer {
                unsigned: *unsigned,
                digits: match bytes {
                    1 => 3,
                    2 => 5,
                    3 => 8,
                    _ => 10,
                },
            },
            ColumnKind::BigInt { unsigned } => Number::Integer {
                unsigned: *unsigned,
                digits: if *unsigned { 20 } else { 19 },
            },
            // A YEAR's value is a signed integer.
            ColumnKind::Year => Number::Integer {
                unsigned: false,
                digits: 4,
            },
            ColumnKind::Decimal { precision, scale } => Number::Exact {
                precision: *precision,
                scale: *scale,
            },
            ColumnKind::Float
            | ColumnKind::Double
            | ColumnKind::Char(_)
            | ColumnKind::Text(_)
            | ColumnKind::LongText(_)
            | ColumnKind::Binary(_)
            | ColumnKind::Blob(_)
            | ColumnKind::Enum(_)
            | ColumnKind::Json
            | ColumnKind::Date
            | ColumnKind::DateTime(_)
            | ColumnKind::Timestamp(_)
            | ColumnKind::Time(_) => Number::Approximate,
            ColumnKind::Null => Number::Null,
        })
    }

    /// The column kind that holds numbers of this class.
    fn kind(self) -> ColumnKind {
        match self {
            Number::Integer { unsigned, .. } => ColumnKind::BigInt { unsigned },
            Number::Exact { precision, scale } => {
                let scale = scale.min(MAX_SCALE);
                ColumnKind::Decimal {
                    precision: precision.clamp(scale + 1, MAX_PRECISION),
                    scale,
                }
            }
            Number::Approximate => ColumnKind::Double,
            Number::Null => ColumnKind::Null,
        }
    }

    /// An integer as the DECIMAL arithmetic reads it as beside one.
    fn exact(self) -> Option<(u8, u8)> {
        match self {
            Number::Integer { digits, .. } => Some((digits, 0)),
            Number::Exact { precision, scale } => Some((precision, scale)),
            Number::Approximate | Number::Null => None,
        }
    }

    /// The class of `left operator right`, as `value::arithmetic` gives it.
    fn arithmetic(operator: Arithmetic, left: Number, right: Number) -> Number {
        use Number::*;
        // NULL gives NULL whatever the other operand: the other's class
        // (as if beside an integer) is as good as any.
        let (left, right) = match (left, right) {
            (Null, Null) => return Null,
            (Null, other) | (other, Null) => (
                Integer {
                    unsigned: false,
                    digits: 1,
                },
                other,
            ),
            operands => operands,
        };
        if operator == Arithmetic::IntegerDivide {
            return Integer {
                unsigned: false,
                digits: 19,
            };
        }
        if let (
            Integer {
                unsigned: left_unsigned,
                digits: left_digits,
            },
            Integer {
                unsigned: right_unsigned,
                digits: right_digits,
            },
        ) = (left, right)
        {
            // The digits the result may have (a BIGINT's 20 at most: past
            // that the evaluator refuses it with 1690), which an exact
            // number the integer later meets takes as its precision.
            let digits = match operator {
                Arithmetic::Multiply => left_digits.saturating_add(right_digits),
                Arithmetic::Add | Arithmetic::Subtract => {
                    left_digits.max(right_digits).saturating_add(1)
                }
                _ => left_digits.max(right_digits),
            }
            .min(20);
            match operator {
                // With an UNSIGNED operand a sum, difference or product
                // is UNSIGNED.
                Arithmetic::Add | Arithmetic::Subtract | Arithmetic::Multiply => {
                    return Integer {
                        unsigned: left_unsigned || right_unsigned,
                        digits,
                    }
                }
                Arithmetic::Modulo => {
                    return Integer {
                        unsigned: false,
                        digits,
                    }
                }
                Arithmetic::Divide | Arithmetic::IntegerDivide => {}
            }
        }
        let (Some((left_precision, left_scale)), Some((right_precision, right_scale))) =
            (left.exact(), right.exact())
        else {
            return Approximate;
        };
        let whole = |precision: u8, scale: u8| precision.saturating_sub(scale);
        let (precision, scale) = match operator {
            Arithmetic::Add | Arithmetic::Subtract => {
                let scale = left_scale.max(right_scale);
                let whole =
                    whole(left_precision, left_scale).max(whole(right_precision, right_scale));
                (whole.saturating_add(1).saturating_add(scale), scale)
            }
            Arithmetic::Multiply => (
                left_precision.saturating_add(right_precision),
                left_scale.saturating_add(right_scale),
            ),
            // 4 more digits after the point than the dividend.
            Arithmetic::Divide => (
                left_precision.saturating_add(right_scale).saturating_add(4),
                left_scale.saturating_add(4),
            ),
            Arithmetic::Modulo | Arithmetic::IntegerDivide => (
                left_precision.max(right_precision),
                left_scale.max(right_scale),
            ),
        };
        Exact { precision, scale }
    }
}
