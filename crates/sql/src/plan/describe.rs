//! The result column a select-list expression makes: its name and the
//! type the wire protocol announces for it (a typed driver reads values
//! by it, the binary protocol sends them as it says).

use crate::expr::{Aggregate, AggregateFunction, Compiler, Expr};
use crate::result::{ColumnKind, OutputColumn};
use crate::types::SqlType;
use crate::value::Value;

/// The result column an output expression makes.
pub(super) fn describe_output(expr: &Expr, name: &str, compiler: &Compiler<'_>) -> OutputColumn {
    // The table a joined row's column belongs to, and its own number.
    let column_of = |index: usize| {
        compiler.scopes().iter().find_map(|scope| {
            let local = index.checked_sub(scope.offset)?;
            (local < scope.table.columns.len()).then_some((scope, local))
        })
    };
    // The declared kind must fit every value the expression can give:
    // the binary protocol sends values as their column's type says.
    // Where the value's type is not certain, text.
    let kind = match expr {
        Expr::Column(index) => {
            if let Some((scope, local)) = column_of(*index) {
                let mut column = OutputColumn::of_column(scope.table, &scope.table.columns[local]);
                column.name = name.to_string();
                if let Some(alias) = scope.names.first() {
                    column.table = alias.clone();
                }
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
        Expr::Window(slot) => {
            use crate::expr::WindowKind as W;
            match compiler.window(*slot) {
                Some(window) => match window.kind {
                    W::RowNumber
                    | W::Rank
                    | W::DenseRank
                    | W::Ntile
                    | W::Aggregate(AggregateFunction::CountRows | AggregateFunction::Count) => {
                        ColumnKind::BigInt { unsigned: false }
                    }
                    W::PercentRank | W::CumeDist => ColumnKind::Double,
                    W::FirstValue | W::LastValue | W::NthValue => {
                        return describe_output(&window.arguments[0], name, compiler)
                    }
                    // The value of a row's argument: the argument's kind
                    // (LAG's default may be of another: text then).
                    W::Aggregate(AggregateFunction::Min | AggregateFunction::Max)
                    | W::Lag
                    | W::Lead
                        if window.arguments.len() < 3 =>
                    {
                        return describe_output(&window.arguments[0], name, compiler)
                    }
                    _ => ColumnKind::Text(255),
                },
                None => ColumnKind::Text(255),
            }
        }
        Expr::Aggregate(slot) => match compiler.aggregate(*slot) {
            Some(Aggregate {
                function: AggregateFunction::CountRows | AggregateFunction::Count,
                ..
            }) => ColumnKind::BigInt { unsigned: false },
            Some(Aggregate {
                function: AggregateFunction::GroupConcat,
                ..
            }) => ColumnKind::LongText(1 << 20),
            Some(Aggregate {
                argument: Some(Expr::Column(index)),
                function,
                ..
            }) if column_of(*index).is_some() => {
                let (scope, local) = column_of(*index).expect("checked");
                let sql_type = &scope.table.columns[local].sql_type;
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
        // Numbers as MySQL types them, so that a typed driver reads a
        // number (LAST_INSERT_ID(), @@autocommit); other variables are
        // text, whatever SET gave them.
        Expr::Session(
            crate::expr::SessionValue::LastInsertId | crate::expr::SessionValue::ConnectionId,
        ) => ColumnKind::BigInt { unsigned: true },
        Expr::Session(crate::expr::SessionValue::RowCount) => {
            ColumnKind::BigInt { unsigned: false }
        }
        Expr::Session(crate::expr::SessionValue::SystemVariable { name, .. })
            if matches!(
                name.as_str(),
                "autocommit" | "warning_count" | "error_count" | "in_transaction"
            ) =>
        {
            ColumnKind::BigInt { unsigned: false }
        }
        Expr::Session(crate::expr::SessionValue::Now(fsp)) => ColumnKind::DateTime(*fsp),
        Expr::Session(crate::expr::SessionValue::UtcNow) => ColumnKind::DateTime(0),
        Expr::Session(crate::expr::SessionValue::Today) => ColumnKind::Date,
        Expr::Session(crate::expr::SessionValue::TimeOfDay) => ColumnKind::Time(0),
        Expr::Session(crate::expr::SessionValue::Random(_)) => ColumnKind::Double,
        Expr::Session(crate::expr::SessionValue::Uuid) => ColumnKind::Text(36),
        Expr::Function(
            crate::expr::Function::DatePart(_)
            | crate::expr::Function::CharLength
            | crate::expr::Function::Locate
            | crate::expr::Function::DateDiff
            | crate::expr::Function::Length
            | crate::expr::Function::Sign
            | crate::expr::Function::Ascii
            | crate::expr::Function::FindInSet
            | crate::expr::Function::Field
            | crate::expr::Function::StrCmp
            | crate::expr::Function::TimestampDiff(_)
            | crate::expr::Function::Week
            | crate::expr::Function::YearWeek,
            _,
        ) => ColumnKind::BigInt { unsigned: false },
        Expr::Function(
            crate::expr::Function::Math(_)
            | crate::expr::Function::Log
            | crate::expr::Function::Power,
            _,
        ) => ColumnKind::Double,
        Expr::Function(crate::expr::Function::DateOf | crate::expr::Function::LastDay, _) => {
            ColumnKind::Date
        }
        Expr::Function(
            crate::expr::Function::FromUnixTime | crate::expr::Function::ConvertTz,
            _,
        ) => ColumnKind::DateTime(0),
        // STR_TO_DATE's type is its format's, when the format is known.
        Expr::Function(crate::expr::Function::StrToDate, arguments)
            if matches!(arguments.get(1), Some(Expr::Literal(Value::Bytes(_)))) =>
        {
            let Some(Expr::Literal(Value::Bytes(format))) = arguments.get(1) else {
                unreachable!("matched above")
            };
            use crate::functions::reading_dates::{read_kind, ReadKind};
            match read_kind(format) {
                ReadKind::Date => ColumnKind::Date,
                ReadKind::DateTime(fsp) => ColumnKind::DateTime(fsp),
                ReadKind::Time(fsp) => ColumnKind::Time(fsp),
            }
        }
        Expr::Function(crate::expr::Function::Cast(target), _) => {
            use crate::functions::CastTarget as C;
            match target {
                C::Signed => ColumnKind::BigInt { unsigned: false },
                C::Unsigned => ColumnKind::BigInt { unsigned: true },
                C::Decimal { precision, scale } => ColumnKind::Decimal {
                    precision: *precision,
                    scale: *scale,
                },
                C::Double => ColumnKind::Double,
                C::Char => ColumnKind::Text(255),
                C::Date => ColumnKind::Date,
                C::DateTime { fsp } => ColumnKind::DateTime(*fsp),
                C::Time { fsp } => ColumnKind::Time(*fsp),
            }
        }
        // Arithmetic gives integers or doubles, by its operands' values.
        _ => ColumnKind::Text(255),
    };
    OutputColumn::computed(name, kind)
}
