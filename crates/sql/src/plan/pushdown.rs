//! Conditions pushed into derived tables and views
//! (docs/design/0040-derived-condition-pushdown.md): a WHERE conjunct
//! that reads one derived table's columns alone is given to that table's
//! query as well, which then plans with it, so that
//! `SELECT * FROM v WHERE id = 5` reads one row of v's table by its key
//! instead of computing all of v first.
//!
//! A pushed condition is only ever a copy: the enclosing query keeps
//! and checks every one of its own. So a query that cannot take one (a
//! LIMIT, a window function, a recursive expression, a condition on an
//! aggregate) ignores it, and the answer is the same either way.

use super::ctes::{Ctes, Spending};
use super::sources::{cte_plan, view_plan, Source};
use super::{and_of, collect_columns, select_plan_pushed, SelectPlan, SubqueryPlan};
use crate::catalog::Catalog;
use crate::expr::{Expr, Function, SessionValue};
use crate::result::{ColumnKind, OutputColumn};
use sqlparser::ast;

/// How a derived table of a FROM clause was compiled, to compile it
/// again with conditions pushed into it.
pub(super) enum Derivation<'q> {
    /// `(SELECT ...) AS d`.
    Subquery(&'q ast::Query),
    /// A view.
    View(crate::views::View),
    /// A common table expression (not a recursive one), by its name.
    Cte(&'q ast::ObjectName),
}

/// A derived table's recipe, and the statement's placeholder count and
/// spending before its first compiling (its own placeholders, if any,
/// are numbered from there, and must be again; its second compiling
/// spends from there too).
pub(super) struct Recipe<'q> {
    pub(super) derivation: Derivation<'q>,
    pub(super) placeholders_before: usize,
    pub(super) spent_before: Spending,
    /// Its first compiling was provisional (`FromEnclosing`): it is
    /// compiled again whether or not a condition reaches it.
    pub(super) provisional: bool,
}

/// What a derived query's compiling is given by the query that reads it.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct FromEnclosing<'a> {
    /// Conditions over its output columns, which the enclosing query
    /// checks too.
    pub(super) pushed: &'a [Expr],
    /// A first compiling for its columns, to be compiled again with the
    /// conditions once the enclosing query has compiled them: it pushes
    /// nothing into its own derived tables, which that second compiling
    /// does. Without it, a view of a view of a view, each with a WHERE,
    /// would compile each level's derived query twice for each compiling
    /// of the level above: twice as much work at each level.
    pub(super) provisional: bool,
}

/// Whether one of `conditions` (a WHERE, inner joins' ON clauses) may
/// read the derived table named `exposed` alone, judged from its text
/// before names are resolved: a conjunct with a column name, every
/// qualified one qualified by `exposed`, and no subquery. Wrong only
/// the safe way: a conjunct it picks may turn out to read another table
/// (an unqualified name), which costs a compiling, never a condition.
pub(super) fn might_take(conditions: &[&ast::Expr], exposed: &str) -> bool {
    fn conjuncts<'e>(expr: &'e ast::Expr, out: &mut Vec<&'e ast::Expr>) {
        match expr {
            ast::Expr::BinaryOp {
                left,
                op: ast::BinaryOperator::And,
                right,
            } => {
                conjuncts(left, out);
                conjuncts(right, out);
            }
            ast::Expr::Nested(inner) => conjuncts(inner, out),
            other => out.push(other),
        }
    }
    let mut parts = Vec::new();
    for condition in conditions {
        conjuncts(condition, &mut parts);
    }
    parts.iter().any(|part| {
        use sqlparser::keywords::Keyword;
        use sqlparser::tokenizer::{Token, Tokenizer};
        let text = part.to_string();
        let Ok(tokens) = Tokenizer::new(&sqlparser::dialect::MySqlDialect {}, &text).tokenize()
        else {
            return true;
        };
        let word = |at: usize| match tokens.get(at) {
            Some(Token::Word(word)) => Some(word),
            _ => None,
        };
        let (mut names, mut at) = (0, 0);
        while at < tokens.len() {
            let Some(first) = word(at) else {
                at += 1;
                continue;
            };
            if first.keyword == Keyword::SELECT {
                return false;
            }
            // A name, or a chain `a.b[.c]`: its part before the last is
            // its table.
            let mut chain = vec![first];
            while matches!(tokens.get(at + 1), Some(Token::Period)) {
                match word(at + 2) {
                    Some(next) => chain.push(next),
                    None => break,
                }
                at += 2;
            }
            at += 1;
            if let [.., table, _] = chain.as_slice() {
                if chain.len() > 3 || !table.value.eq_ignore_ascii_case(exposed) {
                    return false;
                }
            }
            names += 1;
        }
        names > 0
    })
}

/// The conditions of `pool` (conjuncts every joined row must meet) that
/// read only the columns of the source at `offset` (`width` of them),
/// renumbered over that source's own columns, and none that must not be
/// copied: a subquery (its slot is this query's), a column of an
/// enclosing query, or anything that may answer differently each time
/// it is evaluated.
pub(super) fn conditions_for(pool: &[Expr], offset: usize, width: usize) -> Vec<Expr> {
    pool.iter()
        .filter(|condition| {
            let mut read = Vec::new();
            collect_columns(condition, &mut read);
            !read.is_empty()
                && read.iter().all(|c| (offset..offset + width).contains(c))
                && copyable(condition)
        })
        .filter_map(|condition| {
            condition.transform(&mut |leaf| match leaf {
                Expr::Column(index) => Some(Expr::Column(index - offset)),
                other => Some(other.clone()),
            })
        })
        .collect()
}

/// Whether `expr` or one of its parts is one `wanted` picks.
fn any_part(expr: &Expr, wanted: &dyn Fn(&Expr) -> bool) -> bool {
    let mut found = wanted(expr);
    expr.for_each_child(&mut |child| found = found || any_part(child, wanted));
    found
}

/// Whether `expr` is random or has a side effect: RAND() (RAND(n)'s
/// sequence depends on the rows before), UUID(), SLEEP(),
/// LAST_INSERT_ID(x). Evaluated on other rows, or more often, it would
/// answer or leave behind something else.
fn volatile(expr: &Expr) -> bool {
    matches!(
        expr,
        Expr::Session(SessionValue::Random(_) | SessionValue::Uuid)
            | Expr::Function(
                Function::Sleep | Function::SetLastInsertId | Function::UserLock(_),
                _
            )
    )
}

/// Whether `expr` may be evaluated in another query, as often as it is
/// there, with the same answers: no subquery (its slot is this query's),
/// aggregate, window result or enclosing row's column, nothing
/// volatile, no user variable.
fn copyable(expr: &Expr) -> bool {
    !any_part(expr, &|part| {
        volatile(part)
            || matches!(
                part,
                Expr::Subquery { .. }
                    | Expr::Aggregate(_)
                    | Expr::Window(_)
                    | Expr::Outer(_)
                    | Expr::Session(SessionValue::UserVariable(_))
            )
    })
}

/// What of a SELECT decides which conditions pushed into it it can
/// apply (`Shape::applied`).
pub(super) struct Shape<'a> {
    /// Its output expressions.
    pub(super) output: &'a [Expr],
    /// Every other expression it evaluates (WHERE, ON, GROUP BY,
    /// HAVING, ORDER BY, aggregates' arguments): a query that evaluates
    /// anything volatile would do so on other rows, and takes nothing.
    pub(super) evaluated: &'a [&'a Expr],
    /// GROUP BY's expressions; `aggregated`: it has aggregates;
    /// `distinct`: SELECT DISTINCT.
    pub(super) group_by: &'a [Expr],
    pub(super) aggregated: bool,
    pub(super) distinct: bool,
    /// It has a LIMIT or OFFSET.
    pub(super) limited: bool,
    /// It has window functions.
    pub(super) windowed: bool,
}

impl Shape<'_> {
    /// The pushed conditions this query applies to its rows before it
    /// groups them, each output column replaced by its expression.
    ///
    /// Never with a LIMIT (the rows kept would be others) or window
    /// functions (they read the other rows). Where rows are grouped
    /// (GROUP BY, DISTINCT), only on grouping columns and only as a
    /// plain comparison with constants: rows of one group are equal
    /// under their collation (`'a'` and `'A'`, `'a'` and `'a '`), and
    /// the group shows one of them, so a condition that tells them apart
    /// (`BINARY c = 'A'`, LIKE with its trailing spaces) could keep
    /// another row of the group than the one shown, and change the
    /// answer. A comparison answers the same for every row of a group.
    pub(super) fn applied(&self, pushed: &[Expr]) -> Vec<Expr> {
        let holds_volatile = |expr: &Expr| any_part(expr, &volatile);
        if pushed.is_empty()
            || self.limited
            || self.windowed
            || self.output.iter().any(holds_volatile)
            || self.evaluated.iter().any(|expr| holds_volatile(expr))
        {
            return Vec::new();
        }
        let grouped_by = self.aggregated || !self.group_by.is_empty();
        let grouped = grouped_by || self.distinct;
        // An aggregate without GROUP BY is one group with no grouping
        // column: nothing is pushed there.
        let usable = |index: usize| {
            self.output
                .get(index)
                .is_some_and(|expr| copyable(expr) && (!grouped_by || self.group_by.contains(expr)))
        };
        pushed
            .iter()
            .filter(|condition| {
                let mut read = Vec::new();
                collect_columns(condition, &mut read);
                read.iter().all(|index| usable(*index)) && (!grouped || plain_comparison(condition))
            })
            .filter_map(|condition| {
                condition.transform(&mut |leaf| match leaf {
                    Expr::Column(index) => self.output.get(*index).cloned(),
                    other => Some(other.clone()),
                })
            })
            .collect()
    }
}

/// The conditions pushed into a set operation that go on to its
/// SELECTs: none under a LIMIT or OFFSET of the whole; under UNION ALL
/// alone (`all_union`) every one, each SELECT keeping what it can; where
/// rows are compared (UNION, INTERSECT, EXCEPT, with ALL or not: equal
/// under their collation, one of them shown), only plain comparisons,
/// as for a grouped query.
pub(super) fn for_set_operation(pushed: &[Expr], limited: bool, all_union: bool) -> Vec<Expr> {
    match limited {
        true => Vec::new(),
        false => pushed
            .iter()
            .filter(|condition| all_union || plain_comparison(condition))
            .cloned()
            .collect(),
    }
}

/// Whether the values of every column `pushed` reads stay as each of a
/// set operation's `parts` makes them: a text, floating or DECIMAL
/// column of the whole (`columns`) takes another SELECT's numbers as
/// its own type (`execute::union::united`), and a condition over the
/// value converted could answer otherwise than over the SELECT's own.
pub(super) fn values_kept(pushed: &[Expr], parts: &[SelectPlan], columns: &[OutputColumn]) -> bool {
    let mut read = Vec::new();
    for condition in pushed {
        collect_columns(condition, &mut read);
    }
    read.iter().all(|&index| {
        let Some(whole) = columns.get(index) else {
            return false;
        };
        let converting = matches!(
            whole.kind,
            ColumnKind::Text(_)
                | ColumnKind::LongText(_)
                | ColumnKind::Char(_)
                | ColumnKind::Double
                | ColumnKind::Float
                | ColumnKind::Decimal { .. }
        );
        !converting
            || parts.iter().all(|part| {
                part.columns
                    .get(index)
                    .is_some_and(|own| own.kind == whole.kind)
            })
    })
}

/// A comparison of columns with constants (`c = 5`, `c BETWEEN 1 AND 9`,
/// `c IN (1, 2)`, `c IS NULL`, `c <=> ?`): every operand a column or
/// free of columns.
fn plain_comparison(condition: &Expr) -> bool {
    let operand = |expr: &Expr| {
        matches!(expr, Expr::Column(_)) || {
            let mut read = Vec::new();
            collect_columns(expr, &mut read);
            read.is_empty()
        }
    };
    match condition {
        Expr::Compare(_, a, b) | Expr::NullSafeEqual(a, b) => operand(a) && operand(b),
        Expr::IsNull(a, _) => matches!(**a, Expr::Column(_)),
        Expr::Between {
            expr, low, high, ..
        } => operand(expr) && operand(low) && operand(high),
        Expr::InList { expr, list, .. } => operand(expr) && list.iter().all(operand),
        _ => false,
    }
}

/// `filter` with `applied` ANDed to it.
pub(super) fn with_applied(filter: Option<Expr>, applied: Vec<Expr>) -> Option<Expr> {
    match applied.is_empty() {
        true => filter,
        false => and_of(filter.into_iter().chain(applied).collect()),
    }
}

/// Compiles again, with the conditions of `pool` that read it alone,
/// each derived table of `sources` that is not on the NULL side of a
/// LEFT JOIN (`left`, as planned: there, a row it no longer has would be NULL-extended
/// instead of dropped), and those whose first compiling was provisional
/// (`FromEnclosing`), and puts each new plan in its subquery slot. One
/// that does not compile again alike keeps its first plan, as do those
/// past the statement's `MAX_PUSHDOWNS`.
#[allow(clippy::too_many_arguments)]
pub(super) fn push_into_derived(
    sources: &[Source<'_>],
    offsets: &[usize],
    left: &[bool],
    pool: &[Expr],
    subqueries: &mut [SubqueryPlan],
    catalog: &Catalog,
    database: Option<&str>,
    placeholders: &[(u64, u64)],
    ctes: &Ctes,
) {
    for ((source, offset), left) in sources.iter().zip(offsets).zip(left) {
        let (Some(recipe), Some(slot)) = (&source.recipe, source.table.derived) else {
            continue;
        };
        let pushed = match left {
            true => Vec::new(),
            false => conditions_for(pool, *offset, source.table.columns.len()),
        };
        let Some(subquery) = subqueries.get_mut(slot) else {
            continue;
        };
        // A provisional first compiling skipped only pushing into its own
        // derived tables: without any, it is the plan.
        if pushed.is_empty() && !(recipe.provisional && has_derived_table(&subquery.plan)) {
            continue;
        }
        if !ctes.take_pushdown() {
            return;
        }
        // Compiled against a copy of the placeholders up to its first
        // compiling's: its own must take the slots they took then (a
        // deterministic compiling does), or the first plan stays.
        let before = recipe.placeholders_before.min(placeholders.len());
        let mut scratch = placeholders[..before].to_vec();
        let spent = ctes.spent_so_far();
        ctes.spend_as(recipe.spent_before);
        let compiled = compile_again(recipe, &pushed, catalog, database, &mut scratch, ctes);
        ctes.spend_as(spent);
        let numbered_alike =
            placeholders[before..].starts_with(scratch.get(before..).unwrap_or(&[]));
        if let (Ok(plan), true) = (compiled, numbered_alike) {
            if plan.columns.len() == subquery.plan.columns.len() {
                *subquery.plan = plan;
            }
        }
    }
}

/// Whether `plan` reads a derived table, view or common table
/// expression of its own.
fn has_derived_table(plan: &SelectPlan) -> bool {
    let own = |plan: &SelectPlan| {
        plan.table.iter().any(|t| t.derived.is_some())
            || plan.joins.iter().any(|j| j.table.derived.is_some())
    };
    own(plan)
        || plan
            .union
            .as_ref()
            .is_some_and(|union| union.all_parts().into_iter().any(own))
}

/// `recipe`'s derived table compiled again with `pushed`.
fn compile_again(
    recipe: &Recipe<'_>,
    pushed: &[Expr],
    catalog: &Catalog,
    database: Option<&str>,
    placeholders: &mut Vec<(u64, u64)>,
    ctes: &Ctes,
) -> crate::error::SqlResult<SelectPlan> {
    let from_enclosing = FromEnclosing {
        pushed,
        provisional: false,
    };
    match &recipe.derivation {
        Derivation::Subquery(query) => select_plan_pushed(
            query,
            catalog,
            database,
            &[],
            placeholders,
            ctes,
            from_enclosing,
        ),
        Derivation::View(view) => view_plan(view, catalog, placeholders, ctes, from_enclosing),
        Derivation::Cte(name) => {
            let Some((cte, visible)) = ctes.find(name) else {
                return Err(crate::error::SqlError::unsupported("a vanished expression"));
            };
            cte_plan(
                cte,
                &visible,
                catalog,
                database,
                placeholders,
                from_enclosing,
            )
        }
    }
}
