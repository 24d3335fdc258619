//! Row constructors: `(a, b) = (1, 2)`, `(a, b) > (x, y)`, `(a, b) IN
//! ((1, 2), (3, 4))`, as ORMs write them for composite keys and keyset
//! pagination. They compile to what they mean element by element (an
//! AND of equalities, an OR of those for IN, the lexicographic order for
//! `<` and the rest), which gives MySQL's NULL answers: an element
//! comparison that is NULL leaves the whole NULL unless another element
//! decides it. A key lookup is then found in the ANDs and ORs by the
//! access planner as for a comparison written out by hand.

use super::{Compiler, Expr};
use crate::error::{SqlError, SqlResult};
use sqlparser::ast;

/// The elements of a row constructor (`None` for a single value).
pub(super) fn row_of(expr: &ast::Expr) -> Option<&[ast::Expr]> {
    match expr {
        ast::Expr::Tuple(elements) => Some(elements),
        ast::Expr::Nested(inner) => row_of(inner),
        _ => None,
    }
}

/// MySQL's 1241: an operand with the wrong number of columns.
pub(super) fn wrong_width(columns: usize) -> SqlError {
    SqlError::new(1241, format!("Operand should contain {columns} column(s)"))
}

impl Compiler<'_> {
    /// `left op right` where either side is a row constructor.
    pub(super) fn compare_rows(
        &mut self,
        left: &ast::Expr,
        op: &ast::BinaryOperator,
        right: &ast::Expr,
    ) -> SqlResult<Expr> {
        let width = |expr: &ast::Expr| row_of(expr).map_or(1, <[ast::Expr]>::len);
        let (Some(lefts), Some(rights)) = (row_of(left), row_of(right)) else {
            // A row beside a single value: the value is one column.
            return Err(wrong_width(width(left).max(width(right))));
        };
        if lefts.len() != rights.len() {
            return Err(wrong_width(lefts.len()));
        }
        use ast::BinaryOperator as B;
        // Each pair compiled as its own comparison, so that rows of rows
        // work too.
        let pair = |compiler: &mut Self, index: usize, op: B| {
            compiler.compile(&ast::Expr::BinaryOp {
                left: Box::new(lefts[index].clone()),
                op,
                right: Box::new(rights[index].clone()),
            })
        };
        let last = lefts.len() - 1;
        match op {
            B::Eq | B::Spaceship => {
                let mut all = pair(self, last, op.clone())?;
                for index in (0..last).rev() {
                    all = Expr::And(Box::new(pair(self, index, op.clone())?), Box::new(all));
                }
                Ok(all)
            }
            B::NotEq => {
                let mut any = pair(self, last, B::NotEq)?;
                for index in (0..last).rev() {
                    any = Expr::Or(Box::new(pair(self, index, B::NotEq)?), Box::new(any));
                }
                Ok(any)
            }
            // The first element that differs decides: a < x, or a = x and
            // the rest in order; the last element takes the operator as
            // written (`<=` lets equal rows through).
            B::Lt | B::LtEq | B::Gt | B::GtEq => {
                let strict = match op {
                    B::Lt | B::LtEq => B::Lt,
                    _ => B::Gt,
                };
                let mut order = pair(self, last, op.clone())?;
                for index in (0..last).rev() {
                    let decided = pair(self, index, strict.clone())?;
                    let equal = pair(self, index, B::Eq)?;
                    order = Expr::Or(
                        Box::new(decided),
                        Box::new(Expr::And(Box::new(equal), Box::new(order))),
                    );
                }
                Ok(order)
            }
            other => Err(SqlError::unsupported(format!(
                "operator {other} between rows"
            ))),
        }
    }

    /// `(a, b) [NOT] IN ((1, 2), (3, 4))`: an OR of row equalities.
    pub(super) fn row_in_list(
        &mut self,
        row: &ast::Expr,
        list: &[ast::Expr],
        negated: bool,
    ) -> SqlResult<Expr> {
        let mut any: Option<Expr> = None;
        for item in list {
            let equal = self.compare_rows(row, &ast::BinaryOperator::Eq, item)?;
            any = Some(match any {
                None => equal,
                Some(before) => Expr::Or(Box::new(before), Box::new(equal)),
            });
        }
        let any = any.ok_or_else(|| SqlError::parse("IN () needs a value"))?;
        Ok(match negated {
            true => Expr::Not(Box::new(any)),
            false => any,
        })
    }
}

/// Whether `op` compares (the operators a row constructor takes).
pub(super) fn compares(op: &ast::BinaryOperator) -> bool {
    use ast::BinaryOperator as B;
    matches!(
        op,
        B::Eq | B::NotEq | B::Lt | B::LtEq | B::Gt | B::GtEq | B::Spaceship
    )
}
