//! Row constructors: `(a, b) = (1, 2)`, `(a, b) > (x, y)`, `(a, b) IN
//! ((1, 2), (3, 4))`, as ORMs write them for composite keys and keyset
//! pagination. They compile to what they mean element by element (an
//! AND of equalities, an OR of those for IN, the lexicographic order for
//! `<` and the rest), which gives MySQL's NULL answers: an element
//! comparison that is NULL leaves the whole NULL unless another element
//! decides it. A key lookup is then found in the ANDs and ORs by the
//! access planner as for a comparison written out by hand.
//!
//! Each element is compiled once and its compiled form copied where the
//! expansion needs it again: compiling a `?` twice would count it as two
//! parameters. A row has at most `MAX_ROW_WIDTH` elements (the
//! expansion's depth grows with its width, and evaluating it recurses),
//! and an IN list's alternatives are joined as a balanced tree of ORs,
//! so that a list of any length stays shallow.

use super::{Compiler, Expr};
use crate::error::{SqlError, SqlResult};
use client::CompareOp;
use sqlparser::ast;

/// The elements of a row constructor (`None` for a single value).
pub(super) fn row_of(expr: &ast::Expr) -> Option<&[ast::Expr]> {
    match expr {
        ast::Expr::Tuple(elements) => Some(elements),
        ast::Expr::Nested(inner) => row_of(inner),
        _ => None,
    }
}

/// The most elements a row constructor may have (a table has at most
/// 4,096 columns in MySQL; rows compared in SQL have a few).
const MAX_ROW_WIDTH: usize = 256;

/// MySQL's 1241: an operand with the wrong number of columns.
pub(super) fn wrong_width(columns: usize) -> SqlError {
    SqlError::new(1241, format!("Operand should contain {columns} column(s)"))
}

/// Whether `op` compares (the operators a row constructor takes).
pub(super) fn compares(op: &ast::BinaryOperator) -> bool {
    use ast::BinaryOperator as B;
    matches!(
        op,
        B::Eq | B::NotEq | B::Lt | B::LtEq | B::Gt | B::GtEq | B::Spaceship
    )
}

/// A compiled operand: a value, or a row of them.
#[derive(Clone)]
enum Operand {
    Value(Expr),
    Row(Vec<Operand>),
}

impl Operand {
    fn width(&self) -> usize {
        match self {
            Operand::Value(_) => 1,
            Operand::Row(elements) => elements.len(),
        }
    }
}

/// A comparison of rows, by its operator.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RowOp {
    Equal,
    NullSafeEqual,
    NotEqual,
    /// `<`, `<=`, `>`, `>=`: the order its last elements take.
    Order(CompareOp),
}

impl Compiler<'_> {
    /// `expr` compiled, row constructors kept as rows.
    fn operand(&mut self, expr: &ast::Expr) -> SqlResult<Operand> {
        Ok(match row_of(expr) {
            Some(elements) if elements.len() > MAX_ROW_WIDTH => {
                return Err(SqlError::unsupported(format!(
                    "a row of more than {MAX_ROW_WIDTH} values"
                )))
            }
            Some(elements) => Operand::Row(
                elements
                    .iter()
                    .map(|element| self.operand(element))
                    .collect::<SqlResult<_>>()?,
            ),
            None => Operand::Value(self.compile(expr)?),
        })
    }

    /// `left op right` where either side is a row constructor.
    pub(super) fn compare_rows(
        &mut self,
        left: &ast::Expr,
        op: &ast::BinaryOperator,
        right: &ast::Expr,
    ) -> SqlResult<Expr> {
        use ast::BinaryOperator as B;
        let op = match op {
            B::Eq => RowOp::Equal,
            B::Spaceship => RowOp::NullSafeEqual,
            B::NotEq => RowOp::NotEqual,
            B::Lt => RowOp::Order(CompareOp::Less),
            B::LtEq => RowOp::Order(CompareOp::LessOrEqual),
            B::Gt => RowOp::Order(CompareOp::Greater),
            B::GtEq => RowOp::Order(CompareOp::GreaterOrEqual),
            other => {
                return Err(SqlError::unsupported(format!(
                    "operator {other} between rows"
                )))
            }
        };
        let (left, right) = (self.operand(left)?, self.operand(right)?);
        compare(&left, op, &right)
    }

    /// `(a, b) [NOT] IN ((1, 2), (3, 4))`: an OR of row equalities.
    pub(super) fn row_in_list(
        &mut self,
        row: &ast::Expr,
        list: &[ast::Expr],
        negated: bool,
    ) -> SqlResult<Expr> {
        let row = self.operand(row)?;
        let mut alternatives = Vec::with_capacity(list.len());
        for item in list {
            alternatives.push(compare(&row, RowOp::Equal, &self.operand(item)?)?);
        }
        let any =
            balanced_or(alternatives).ok_or_else(|| SqlError::parse("IN () needs a value"))?;
        Ok(match negated {
            true => Expr::Not(Box::new(any)),
            false => any,
        })
    }
}

/// The OR of `terms` as a balanced tree (depth the logarithm of their
/// number); `None` for none.
pub fn balanced_or(mut terms: Vec<Expr>) -> Option<Expr> {
    while terms.len() > 1 {
        let mut paired = Vec::with_capacity(terms.len().div_ceil(2));
        let mut rest = terms.into_iter();
        while let Some(first) = rest.next() {
            paired.push(match rest.next() {
                Some(second) => Expr::Or(Box::new(first), Box::new(second)),
                None => first,
            });
        }
        terms = paired;
    }
    terms.pop()
}

/// `left op right`, element by element.
fn compare(left: &Operand, op: RowOp, right: &Operand) -> SqlResult<Expr> {
    let (lefts, rights) = match (left, right) {
        (Operand::Value(left), Operand::Value(right)) => {
            let (left, right) = (Box::new(left.clone()), Box::new(right.clone()));
            return Ok(match op {
                RowOp::Equal => Expr::Compare(CompareOp::Equal, left, right),
                RowOp::NullSafeEqual => Expr::NullSafeEqual(left, right),
                RowOp::NotEqual => Expr::Compare(CompareOp::NotEqual, left, right),
                RowOp::Order(order) => Expr::Compare(order, left, right),
            });
        }
        (Operand::Row(lefts), Operand::Row(rights)) if lefts.len() == rights.len() => {
            (lefts, rights)
        }
        // A row beside a value, or rows of different widths.
        _ => return Err(wrong_width(left.width())),
    };
    let last = lefts.len() - 1;
    let and = |a: Expr, b: Expr| Expr::And(Box::new(a), Box::new(b));
    let or = |a: Expr, b: Expr| Expr::Or(Box::new(a), Box::new(b));
    let mut whole = compare(&lefts[last], op, &rights[last])?;
    for index in (0..last).rev() {
        let (l, r) = (&lefts[index], &rights[index]);
        whole = match op {
            RowOp::Equal | RowOp::NullSafeEqual => and(compare(l, op, r)?, whole),
            RowOp::NotEqual => or(compare(l, op, r)?, whole),
            // The first element that differs decides: a < x, or a = x
            // and the rest in order; the last element takes the
            // operator as written (`<=` lets equal rows through).
            RowOp::Order(order) => {
                let strict = match order {
                    CompareOp::Less | CompareOp::LessOrEqual => CompareOp::Less,
                    _ => CompareOp::Greater,
                };
                let decided = compare(l, RowOp::Order(strict), r)?;
                let equal = compare(l, RowOp::Equal, r)?;
                or(decided, and(equal, whole))
            }
        };
    }
    Ok(whole)
}
