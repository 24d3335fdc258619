//! Walking a plan's expressions: visiting and mapping every one (a
//! correlated subquery's plan bound to its enclosing row), and what
//! they read of an enclosing query.

use super::{window_exprs, AccessPlan, IndexRange, RangeEnd, SelectPlan};
use crate::expr::Expr;
use crate::value::Value;

/// Calls `visit` on every expression of an access path.
fn visit_access(access: &AccessPlan, visit: &mut dyn FnMut(&Expr)) {
    match access {
        AccessPlan::NoTable | AccessPlan::FullScan => {}
        AccessPlan::PrimaryKey(exprs) => exprs.iter().for_each(&mut *visit),
        AccessPlan::PrimaryKeys(keys) => keys.iter().flatten().for_each(&mut *visit),
        AccessPlan::UniqueKey { values, .. } => values.iter().for_each(&mut *visit),
        AccessPlan::Ranges { ranges, .. } => {
            for range in ranges {
                range.prefix.iter().for_each(&mut *visit);
                for end in [&range.low, &range.high].into_iter().flatten() {
                    visit(&end.value);
                }
            }
        }
    }
}

/// An access path with `map` applied to each expression.
fn map_access(access: &AccessPlan, map: &mut dyn FnMut(&Expr) -> Expr) -> AccessPlan {
    fn all(exprs: &[Expr], map: &mut dyn FnMut(&Expr) -> Expr) -> Vec<Expr> {
        exprs.iter().map(map).collect()
    }
    match access {
        AccessPlan::NoTable | AccessPlan::FullScan => access.clone(),
        AccessPlan::PrimaryKey(exprs) => AccessPlan::PrimaryKey(all(exprs, map)),
        AccessPlan::PrimaryKeys(keys) => {
            AccessPlan::PrimaryKeys(keys.iter().map(|k| all(k, map)).collect())
        }
        AccessPlan::UniqueKey { index, values } => AccessPlan::UniqueKey {
            index: index.clone(),
            values: all(values, map),
        },
        AccessPlan::Ranges { index, ranges } => {
            let mut mapped = Vec::with_capacity(ranges.len());
            for range in ranges {
                let end = |end: &Option<RangeEnd>, map: &mut dyn FnMut(&Expr) -> Expr| {
                    end.as_ref().map(|end| RangeEnd {
                        value: map(&end.value),
                        inclusive: end.inclusive,
                    })
                };
                mapped.push(IndexRange {
                    prefix: all(&range.prefix, map),
                    low: end(&range.low, map),
                    high: end(&range.high, map),
                });
            }
            AccessPlan::Ranges {
                index: index.clone(),
                ranges: mapped,
            }
        }
    }
}

impl SelectPlan {
    /// Calls `visit` on every expression of the plan (its subqueries'
    /// aside).
    pub fn visit_exprs(&self, visit: &mut dyn FnMut(&Expr)) {
        visit_access(&self.access, visit);
        for expr in self
            .filter
            .iter()
            .chain(&self.scan_filter)
            .chain(&self.group_by)
            .chain(&self.having)
            .chain(&self.output)
            .chain(self.order_by.iter().map(|(e, _)| e))
            .chain(self.aggregates.iter().filter_map(|a| a.argument.as_ref()))
            .chain(
                self.aggregates
                    .iter()
                    .filter_map(|a| a.concat.as_deref())
                    .flat_map(|c| c.order_by.iter().map(|(e, _)| e)),
            )
        {
            visit(expr);
        }
        for join in &self.joins {
            visit_access(&join.access, visit);
            for expr in join.condition.iter().chain(&join.scan_filter) {
                visit(expr);
            }
        }
        for part in self.union.iter().flat_map(|union| union.all_parts()) {
            part.visit_exprs(visit);
        }
        for step in self.recursive.iter().flat_map(|r| &r.steps) {
            step.visit_exprs(visit);
        }
        for expr in self.windows.iter().flat_map(window_exprs) {
            visit(expr);
        }
    }

    /// The plan with `map` applied to every expression (its subqueries'
    /// aside).
    pub fn map_exprs(&self, map: &mut dyn FnMut(&Expr) -> Expr) -> SelectPlan {
        let mut plan = self.clone();
        plan.access = map_access(&self.access, map);
        plan.filter = self.filter.as_ref().map(&mut *map);
        plan.scan_filter = self.scan_filter.as_ref().map(&mut *map);
        plan.group_by = self.group_by.iter().map(&mut *map).collect();
        plan.having = self.having.as_ref().map(&mut *map);
        plan.output = self.output.iter().map(&mut *map).collect();
        plan.order_by = self.order_by.iter().map(|(e, d)| (map(e), *d)).collect();
        for aggregate in &mut plan.aggregates {
            aggregate.argument = aggregate.argument.as_ref().map(&mut *map);
            if let Some(concat) = &mut aggregate.concat {
                for (expr, _) in &mut concat.order_by {
                    *expr = map(expr);
                }
            }
        }
        for join in &mut plan.joins {
            join.access = map_access(&join.access, map);
            join.condition = join.condition.as_ref().map(&mut *map);
            join.scan_filter = join.scan_filter.as_ref().map(&mut *map);
        }
        if let Some(union) = &mut plan.union {
            union.map_parts(&mut |part| part.map_exprs(map));
        }
        if let Some(recursive) = &mut plan.recursive {
            for step in &mut recursive.steps {
                *step = step.map_exprs(map);
            }
        }
        for window in &mut plan.windows {
            for expr in window.arguments.iter_mut().chain(&mut window.partition_by) {
                *expr = map(expr);
            }
            for (expr, _) in &mut window.order_by {
                *expr = map(expr);
            }
        }
        plan
    }

    /// The plan of a correlated subquery for one row of the enclosing
    /// query: its `Outer` columns replaced by that row's values.
    pub fn bind_outer(&self, row: &[Value]) -> SelectPlan {
        self.map_exprs(&mut |e| e.bind_outer(row))
    }
}

/// The enclosing row's columns a subquery's plan reads (`Outer`).
pub fn outer_columns(plan: &SelectPlan) -> Vec<usize> {
    let mut found = Vec::new();
    plan.visit_exprs(&mut |expr| {
        expr.transform(&mut |leaf| {
            if let Expr::Outer(index) = leaf {
                found.push(*index);
            }
            Some(leaf.clone())
        });
    });
    found.sort_unstable();
    found.dedup();
    found
}

/// Whether `expr` holds a subquery that reads the enclosing row (which
/// may be any of a join's tables: it is evaluated on the whole row).
pub(super) fn has_correlated_subquery(expr: &Expr) -> bool {
    match expr {
        Expr::Subquery {
            correlated: true, ..
        } => true,
        _ => {
            let mut found = false;
            expr.for_each_child(&mut |child| found |= has_correlated_subquery(child));
            found
        }
    }
}

/// The subquery slots `expr` reads, into `slots`.
pub(super) fn subquery_slots(expr: &Expr, slots: &mut Vec<usize>) {
    if let Expr::Subquery { slot, .. } = expr {
        slots.push(*slot);
    }
    expr.for_each_child(&mut |child| subquery_slots(child, slots));
}

/// Whether a plan reads the enclosing query's row anywhere.
pub fn reads_outer_anywhere(plan: &SelectPlan) -> bool {
    !outer_columns(plan).is_empty()
}
