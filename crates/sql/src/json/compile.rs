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
use sqlparser::ast;

/// Whether every value of `expr` is JSON: a column declared JSON, or a
/// JSON function that returns a document.
pub fn is_json(expr: &Expr, compiler: &Compiler<'_>) -> bool {
    let json_column = |scopes: &[crate::expr::Scope<'_>], index: usize| {
        crate::expr::column_at(scopes, index)
            .is_some_and(|(_, column)| matches!(column.sql_type, SqlType::Json(_)))
    };
    match expr {
        Expr::Column(index) => json_column(compiler.scopes(), *index),
        // The enclosing query's column, in a correlated subquery.
        Expr::Outer(index) => json_column(compiler.outer_scopes(), *index),
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

/// `expr` as a value put into a document: as it is when it is JSON; a
/// truth value (`boolean`: TRUE or FALSE as written, or a comparison or
/// other condition) made JSON's true or false, as MySQL makes it; else a
/// JSON scalar.
pub fn as_value(expr: Expr, boolean: bool, compiler: &Compiler<'_>) -> Expr {
    let function = match () {
        _ if is_json(&expr, compiler) => return expr,
        _ if boolean || is_condition(&expr) => JsonFunction::FromBoolean,
        _ => JsonFunction::FromSql,
    };
    Expr::Function(Function::Json(function), vec![expr])
}

/// Whether `expr` is written TRUE or FALSE (which compiles to 1 or 0).
pub fn is_boolean_literal(expr: &ast::Expr) -> bool {
    matches!(expr, ast::Expr::Value(value) if matches!(value.value, ast::Value::Boolean(_)))
}

/// Whether `expr` is a condition, whose value MySQL makes JSON's true or
/// false.
fn is_condition(expr: &Expr) -> bool {
    match expr {
        Expr::Compare(..)
        | Expr::NullSafeEqual(..)
        | Expr::And(..)
        | Expr::Or(..)
        | Expr::Xor(..)
        | Expr::Not(_)
        | Expr::IsNull(..)
        | Expr::Between { .. }
        | Expr::InList { .. }
        | Expr::Like { .. } => true,
        Expr::Subquery { test, .. } => !matches!(test, SubqueryTest::Scalar),
        Expr::Function(
            Function::Json(JsonFunction::Compare(_) | JsonFunction::NullSafeEqual),
            _,
        ) => true,
        _ => false,
    }
}

/// A call of `function` with its value arguments made JSON (`booleans`:
/// which arguments are written TRUE or FALSE).
pub fn call(
    function: JsonFunction,
    arguments: Vec<Expr>,
    booleans: &[bool],
    compiler: &Compiler<'_>,
) -> Expr {
    let arguments = arguments
        .into_iter()
        .enumerate()
        .map(|(index, argument)| match function.takes_value_at(index) {
            true => as_value(argument, booleans.get(index) == Some(&true), compiler),
            false => argument,
        })
        .collect();
    Expr::Function(Function::Json(function), arguments)
}

/// The comparison `left op right` (`booleans`: whether each side is
/// written TRUE or FALSE): by JSON's rules when either side is JSON, else
/// the ordinary one.
pub fn compare(
    op: CompareOp,
    left: Expr,
    right: Expr,
    booleans: [bool; 2],
    compiler: &Compiler<'_>,
) -> Expr {
    if !is_json(&left, compiler) && !is_json(&right, compiler) {
        return Expr::Compare(op, Box::new(left), Box::new(right));
    }
    call(
        JsonFunction::Compare(op),
        vec![left, right],
        &booleans,
        compiler,
    )
}

/// Whether any of `exprs` is JSON.
pub fn any_json<'e>(exprs: impl IntoIterator<Item = &'e Expr>, compiler: &Compiler<'_>) -> bool {
    exprs.into_iter().any(|expr| is_json(expr, compiler))
}

/// `expr [NOT] IN (list)` with a JSON side: an OR of JSON equalities,
/// which has IN's answer for NULLs too (NULL when nothing is equal and
/// some comparison is NULL), built balanced so that a long list nests
/// only logarithmically.
pub fn in_list(expr: Expr, list: Vec<Expr>, negated: bool, compiler: &Compiler<'_>) -> Expr {
    let equalities: Vec<Expr> = list
        .into_iter()
        .map(|item| compare(CompareOp::Equal, expr.clone(), item, [false; 2], compiler))
        .collect();
    // The parser gives IN at least one value.
    let any = crate::expr::balanced_or(equalities).unwrap_or(Expr::Literal(Value::Int(0)));
    match negated {
        true => Expr::Not(Box::new(any)),
        false => any,
    }
}

/// `expr [NOT] BETWEEN low AND high` with a JSON side: two JSON
/// comparisons.
pub fn between(expr: Expr, low: Expr, high: Expr, negated: bool, compiler: &Compiler<'_>) -> Expr {
    let above = compare(
        CompareOp::GreaterOrEqual,
        expr.clone(),
        low,
        [false; 2],
        compiler,
    );
    let below = compare(CompareOp::LessOrEqual, expr, high, [false; 2], compiler);
    let within = Expr::And(Box::new(above), Box::new(below));
    match negated {
        true => Expr::Not(Box::new(within)),
        false => within,
    }
}

/// `doc->path` (`unquoted`: `doc->>path`, JSON_UNQUOTE of it).
pub fn arrow(document: Expr, path: Expr, unquoted: bool) -> Expr {
    let extracted = Expr::Function(Function::Json(JsonFunction::Extract), vec![document, path]);
    match unquoted {
        true => Expr::Function(Function::Json(JsonFunction::Unquote), vec![extracted]),
        false => extracted,
    }
}
