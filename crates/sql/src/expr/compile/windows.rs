//! Compiling window functions: `f(...) OVER (...)`, named windows and
//! their frames (docs/design/0029-joins-and-grouping.md, "Window
//! functions").

use super::{wrong_arguments, Compiler};
use crate::error::{codes, SqlError, SqlResult};
use crate::expr::{AggregateFunction, Expr, FrameBound, WindowFrame, WindowFunction, WindowKind};
use sqlparser::ast;

impl Compiler<'_> {
    /// `name(args) OVER (...)`, in a window slot of its own: allowed where
    /// aggregates are (the select list, ORDER BY), its arguments,
    /// PARTITION BY and ORDER BY over the (grouped) row, aggregates in
    /// them allowed, another window function not.
    pub(super) fn window_function(
        &mut self,
        name: &str,
        args: &[&ast::Expr],
        star: bool,
        over: &ast::WindowType,
    ) -> SqlResult<Expr> {
        if self.aggregates.is_none() {
            return Err(SqlError::new(
                codes::WINDOW_INVALID_USE,
                format!("You cannot use the window function '{name}' in this context."),
            ));
        }
        let spec = self.window_spec(over)?;
        let kind = match (name, args.len(), star) {
            ("ROW_NUMBER", 0, false) => WindowKind::RowNumber,
            ("RANK", 0, false) => WindowKind::Rank,
            ("DENSE_RANK", 0, false) => WindowKind::DenseRank,
            ("LAG", 1..=3, false) => WindowKind::Lag,
            ("LEAD", 1..=3, false) => WindowKind::Lead,
            ("FIRST_VALUE", 1, false) => WindowKind::FirstValue,
            ("LAST_VALUE", 1, false) => WindowKind::LastValue,
            ("NTH_VALUE", 2, false) => WindowKind::NthValue,
            ("NTILE", 1, false) => WindowKind::Ntile,
            ("PERCENT_RANK", 0, false) => WindowKind::PercentRank,
            ("CUME_DIST", 0, false) => WindowKind::CumeDist,
            ("COUNT", 0, true) => WindowKind::Aggregate(AggregateFunction::CountRows),
            ("COUNT", 1, false) => WindowKind::Aggregate(AggregateFunction::Count),
            ("SUM", 1, false) => WindowKind::Aggregate(AggregateFunction::Sum),
            ("AVG", 1, false) => WindowKind::Aggregate(AggregateFunction::Average),
            ("MIN", 1, false) => WindowKind::Aggregate(AggregateFunction::Min),
            ("MAX", 1, false) => WindowKind::Aggregate(AggregateFunction::Max),
            (
                "ROW_NUMBER" | "RANK" | "DENSE_RANK" | "LAG" | "LEAD" | "COUNT" | "SUM" | "AVG"
                | "MIN" | "MAX" | "FIRST_VALUE" | "LAST_VALUE" | "NTH_VALUE" | "NTILE"
                | "PERCENT_RANK" | "CUME_DIST",
                _,
                _,
            ) => return Err(wrong_arguments(name)),
            _ => return Err(SqlError::unsupported(format!("the window function {name}"))),
        };
        let before = self.windows.len();
        let arguments = args
            .iter()
            .map(|a| self.compile(a))
            .collect::<SqlResult<Vec<_>>>()?;
        let partition_by = spec
            .partition_by
            .iter()
            .map(|e| self.compile(e))
            .collect::<SqlResult<Vec<_>>>()?;
        let mut order_by = Vec::with_capacity(spec.order_by.len());
        for item in &spec.order_by {
            order_by.push((self.compile(&item.expr)?, item.options.asc == Some(false)));
        }
        if self.windows.len() != before {
            return Err(SqlError::new(
                codes::WINDOW_INVALID_USE,
                format!("You cannot nest a window function in the window function '{name}'."),
            ));
        }
        let frame = spec.window_frame.as_ref().map(window_frame).transpose()?;
        self.windows.push(WindowFunction {
            kind,
            arguments,
            partition_by,
            order_by,
            frame,
        });
        Ok(Expr::Window(self.windows.len() - 1))
    }

    /// The query's `WINDOW name AS (...)` definitions, which OVER may name.
    pub fn set_named_windows(&mut self, named: &[ast::NamedWindowDefinition]) {
        self.named_windows = named.to_vec();
    }

    /// The window OVER gives, a named window's definition merged in (as
    /// MySQL's: `OVER w` is w; `OVER (w ORDER BY ...)` adds what w leaves
    /// out, and may not write again what w has; w may name another).
    fn window_spec(&self, over: &ast::WindowType) -> SqlResult<ast::WindowSpec> {
        // `w` alone: a window that names w and adds nothing.
        let naming = |name: &ast::Ident| ast::WindowSpec {
            window_name: Some(name.clone()),
            partition_by: Vec::new(),
            order_by: Vec::new(),
            window_frame: None,
        };
        let mut spec = match over {
            ast::WindowType::WindowSpec(spec) => spec.clone(),
            ast::WindowType::NamedWindow(name) => naming(name),
        };
        // A chain of names ends within as many steps as there are names.
        for _ in 0..=self.named_windows.len() {
            let Some(name) = spec.window_name.take() else {
                return Ok(spec);
            };
            let definition = self
                .named_windows
                .iter()
                .find(|d| d.0.value.eq_ignore_ascii_case(&name.value))
                .ok_or_else(|| {
                    SqlError::new(
                        codes::WINDOW_NO_SUCH_WINDOW,
                        format!("Window name '{}' is not defined.", name.value),
                    )
                })?;
            let base = match &definition.1 {
                ast::NamedWindowExpr::WindowSpec(base) => base.clone(),
                ast::NamedWindowExpr::NamedWindow(other) => naming(other),
            };
            let refused = |code, what: &str| {
                Err(SqlError::new(
                    code,
                    format!("Window '{}': {what}", name.value),
                ))
            };
            if !spec.partition_by.is_empty() {
                return refused(
                    codes::WINDOW_NO_CHILD_PARTITIONING,
                    "a window that names another cannot have its own PARTITION BY",
                );
            }
            if !spec.order_by.is_empty() && !base.order_by.is_empty() {
                return refused(
                    codes::WINDOW_NO_REDEFINE_ORDER_BY,
                    "ORDER BY is in the window it names already",
                );
            }
            // `OVER w` (or a window naming w and adding nothing) is w,
            // its frame included; one that adds to w may not have one.
            let adds = !spec.order_by.is_empty() || spec.window_frame.is_some();
            if base.window_frame.is_some() && adds {
                return refused(
                    codes::WINDOW_NO_INHERIT_FRAME,
                    "a window with a frame cannot be named by another",
                );
            }
            spec = ast::WindowSpec {
                window_name: base.window_name,
                partition_by: base.partition_by,
                order_by: match spec.order_by.is_empty() {
                    true => base.order_by,
                    false => spec.order_by,
                },
                window_frame: spec.window_frame.or(base.window_frame),
            };
        }
        Err(SqlError::new(
            codes::WINDOW_CIRCULARITY,
            "There is a circularity in the window dependency graph.",
        ))
    }
}

/// A written frame: ROWS with its bounds, or RANGE with UNBOUNDED and
/// CURRENT ROW bounds (RANGE with offsets and GROUPS are not built). A
/// frame may not begin UNBOUNDED FOLLOWING nor end UNBOUNDED PRECEDING;
/// an offset is an integer constant, 0 or more.
fn window_frame(frame: &ast::WindowFrame) -> SqlResult<WindowFrame> {
    let rows = match frame.units {
        ast::WindowFrameUnits::Rows => true,
        ast::WindowFrameUnits::Range => false,
        ast::WindowFrameUnits::Groups => return Err(SqlError::unsupported("GROUPS frames")),
    };
    let bound = |bound: &ast::WindowFrameBound| -> SqlResult<FrameBound> {
        let offset = |expr: &ast::Expr| -> SqlResult<u64> {
            if !rows {
                return Err(SqlError::unsupported(
                    "RANGE frames with an offset (n PRECEDING or FOLLOWING)",
                ));
            }
            match expr {
                ast::Expr::Value(value) => match &value.value {
                    ast::Value::Number(digits, _) => digits.parse::<u64>().ok(),
                    _ => None,
                },
                _ => None,
            }
            .ok_or_else(|| {
                SqlError::new(
                    codes::WINDOW_FRAME_ILLEGAL,
                    format!("Window frame offset {expr} is not an integer constant of 0 or more"),
                )
            })
        };
        Ok(match bound {
            ast::WindowFrameBound::CurrentRow => FrameBound::CurrentRow,
            ast::WindowFrameBound::Preceding(None) => FrameBound::UnboundedPreceding,
            ast::WindowFrameBound::Preceding(Some(n)) => FrameBound::Preceding(offset(n)?),
            ast::WindowFrameBound::Following(None) => FrameBound::UnboundedFollowing,
            ast::WindowFrameBound::Following(Some(n)) => FrameBound::Following(offset(n)?),
        })
    };
    let start = bound(&frame.start_bound)?;
    let end = match &frame.end_bound {
        Some(end) => bound(end)?,
        None => FrameBound::CurrentRow,
    };
    if start == FrameBound::UnboundedFollowing {
        return Err(SqlError::new(
            codes::WINDOW_FRAME_START_ILLEGAL,
            "Window frame start cannot be UNBOUNDED FOLLOWING.",
        ));
    }
    if end == FrameBound::UnboundedPreceding {
        return Err(SqlError::new(
            codes::WINDOW_FRAME_END_ILLEGAL,
            "Window frame end cannot be UNBOUNDED PRECEDING.",
        ));
    }
    Ok(WindowFrame { rows, start, end })
}
