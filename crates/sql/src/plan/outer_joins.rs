//! A LEFT JOIN whose WHERE rejects the rows it would add with NULLs is
//! an inner join, and is planned as one (docs/design/0029-joins-and-
//! grouping.md, "LEFT JOIN"): `a LEFT JOIN b ON b.a_id = a.id WHERE
//! b.state = 'open'` keeps no row of `a` without a `b`, so `b` may be
//! read by the WHERE's conditions on it too (a key, an index range), and
//! conditions may enter it when it is a view or derived table (design
//! 0040). ORMs write this shape: a relation eager-loaded with a LEFT
//! JOIN and filtered on the joined table.

use super::access_path::split_and;
use crate::expr::Expr;

/// Whether a conjunct of `filter` (the WHERE) rejects every row whose
/// columns from `offset` (`width` of them) are all NULL.
pub(super) fn where_rejects_nulls_of(filter: Option<&Expr>, offset: usize, width: usize) -> bool {
    let mut conjuncts = Vec::new();
    if let Some(filter) = filter {
        split_and(filter, &mut conjuncts);
    }
    conjuncts
        .into_iter()
        .any(|condition| rejects_nulls_of(condition, offset, width))
}

/// Whether `condition`, a conjunct of the WHERE, is never TRUE when the
/// columns from `offset` (`width` of them) are all NULL: a comparison,
/// BETWEEN, IN, LIKE or IS NOT NULL of one of them (or of arithmetic on
/// one, which is NULL too). A function (COALESCE, IF, CASE...) may make
/// a value of NULL, and is not looked into.
fn rejects_nulls_of(condition: &Expr, offset: usize, width: usize) -> bool {
    let null = |expr: &Expr| is_null_when_null(expr, offset, width);
    match condition {
        Expr::Compare(_, a, b) => null(a) || null(b),
        Expr::Between {
            expr,
            low,
            high,
            negated,
        } => null(expr) || (!negated && (null(low) || null(high))),
        Expr::InList { expr, .. } | Expr::Like { expr, .. } => null(expr),
        Expr::IsNull(expr, true) => null(expr),
        _ => false,
    }
}

/// Whether `expr` is NULL whenever the columns from `offset` (`width`
/// of them) are: one of them, or arithmetic or a minus sign on one.
fn is_null_when_null(expr: &Expr, offset: usize, width: usize) -> bool {
    match expr {
        Expr::Column(index) => (offset..offset + width).contains(index),
        Expr::Arithmetic(_, a, b) => {
            is_null_when_null(a, offset, width) || is_null_when_null(b, offset, width)
        }
        Expr::Negate(a) => is_null_when_null(a, offset, width),
        _ => false,
    }
}
