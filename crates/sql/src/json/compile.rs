//! What the expression compiler does for JSON: knowing which
//! expressions are JSON before any row is read (a JSON column, a JSON
//! function's result), so that a value put into a document or compared
//! with one is read by JSON's rules (`j->'$.name' = 'Bob'` compares the
//! JSON string "Bob"; `JSON_OBJECT('a', j)` nests the document, not its
//! text), and the `->` and `->>` operators.

use super::functions::JsonFunction;
use crate::expr::{AggregateFunction, Compiler, Expr, Function, SubqueryTest};
use crate::result::ColumnKind;
use crate::types::SqlType;
use crate::value::Value;
use client::CompareOp;

/// Whether every value of `expr` is JSON: a column declared JSON, or a
/// JSON function that returns a document.
pub fn is_json(expr: &Expr, compiler: &Compiler<'_>) -> bool {
    match expr {
        Expr::Column(index) => compiler.scopes().iter().any(|scope| {
            index
                .checked_sub(scope.offset)
                .and_then(|local| scope.table.columns.get(local))
                .is_some_and(|column| matches!(column.sql_type, SqlType::Json(_)))
        }),
        Expr::Function(Function::Json(function), _) => function.returns_json(),
        // One of its arguments as it is: JSON when each that can be is.
        Expr::Function(Function::Coalesce, arguments) => {
            arguments.iter().all(|a| is_json(a, compiler) || is_null(a))
                && arguments.iter().any(|a| is_json(a, compiler))
        }
        Expr::Function(Function::If, arguments) => {
            arguments[1..].iter().all(|a| is_json(a, compiler) || is_null(a))
                && arguments[1..].iter().any(|a| is_json(a, compiler))
        }
        Expr::Aggregate(slot) => compiler.aggregate(*slot).is_some_and(|aggregate| {
            match aggregate.function {
                AggregateFunction::JsonArrayAgg | AggregateFunction::JsonObjectAgg => true,
                AggregateFunction::Min | AggregateFunction::Max => aggregate
                    .argument
                    .as_ref()
                    .is_some_and(|argument| is_json(argument, compiler)),
                _ => false,
            }
        }),
        // A subquery of one JSON column.
        Expr::Subquery {
            slot,
            test: SubqueryTest::Scalar,
            ..
        } => compiler.subqueries().get(*slot).is_some_and(|subquery| {
            matches!(&subquery.plan.columns[..], [column] if column.kind == ColumnKind::Json)
        }),
        _ => false,
    }
}

fn is_null(expr: &Expr) -> bool {
    matches!(expr, Expr::Literal(Value::Null))
}

/// `expr` as a value put into a document: as it is when it is JSON, else
/// made a JSON scalar.
pub fn as_value(expr: Expr, compiler: &Compiler<'_>) -> Expr {
    match is_json(&expr, compiler) {
        true => expr,
        false => Expr::Function(Function::Json(JsonFunction::FromSql), vec![expr]),
    }
}

/// A call of `function` with its value arguments made JSON.
pub fn call(function: JsonFunction, arguments: Vec<Expr>, compiler: &Compiler<'_>) -> Expr {
    let arguments = arguments
        .into_iter()
        .enumerate()
        .map(|(index, argument)| match function.takes_value_at(index) {
            true => as_value(argument, compiler),
            false => argument,
        })
        .collect();
    Expr::Function(Function::Json(function), arguments)
}

/// The comparison `left op right`: by JSON's rules when either side is
/// JSON, else the ordinary one.
pub fn compare(op: CompareOp, left: Expr, right: Expr, compiler: &Compiler<'_>) -> Expr {
    if !is_json(&left, compiler) && !is_json(&right, compiler) {
        return Expr::Compare(op, Box::new(left), Box::new(right));
    }
    call(JsonFunction::Compare(op), vec![left, right], compiler)
}

/// `doc->path` (`unquoted`: `doc->>path`, JSON_UNQUOTE of it).
pub fn arrow(document: Expr, path: Expr, unquoted: bool) -> Expr {
    let extracted = Expr::Function(Function::Json(JsonFunction::Extract), vec![document, path]);
    match unquoted {
        true => Expr::Function(Function::Json(JsonFunction::Unquote), vec![extracted]),
        false => extracted,
    }
}
