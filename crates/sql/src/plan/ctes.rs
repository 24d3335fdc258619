//! Derived tables and common table expressions: the table a FROM
//! clause reads for `(SELECT ...) AS d` or a WITH's name, and the
//! expressions each query may name, a recursive one's own name inside
//! its query included (docs/design/0033-subqueries.md, "Derived
//! tables", "WITH RECURSIVE").

use super::SelectPlan;
use crate::catalog::{SqlColumn, SqlTable};
use crate::error::{codes, SqlError, SqlResult};
use crate::views::MAX_VIEW_OPERATORS;
use sqlparser::ast;
use std::sync::Arc;

/// One common table expression of a WITH: its name, column names (if
/// given) and query.
#[derive(Clone, Debug)]
pub struct Cte {
    pub(super) name: String,
    pub(super) columns: Vec<String>,
    pub(super) query: ast::Query,
    /// Of a WITH RECURSIVE, and its query names it.
    pub(super) recursive: bool,
}

/// Inside a recursive expression's recursive SELECTs, what its name
/// reads: the rows of the step before (docs/design/0033-subqueries.md,
/// "WITH RECURSIVE").
#[derive(Debug)]
pub(super) struct Working {
    pub(super) name: String,
    /// The non-recursive part's plan, whose columns the rows have;
    /// `None` while a query is only being probed for naming it (its
    /// compiling then stops at the first naming).
    pub(super) anchor: Option<SelectPlan>,
    /// How often the SELECT being compiled named it.
    pub(super) references: std::cell::Cell<usize>,
}

/// The common table expressions a query may name: those of every WITH
/// around it, inner ones after outer ones (a later one hides an earlier
/// of its name). Shared by the subqueries compiled inside (one copy of
/// each WITH's queries per statement).
#[derive(Clone, Debug, Default)]
pub struct Ctes {
    list: std::rc::Rc<[Cte]>,
    visible: usize,
    /// What the statement's compiling has spent so far, shared by all
    /// its `Ctes`.
    spent: std::rc::Rc<Spent>,
    /// Inside a recursive expression's query: the expression itself.
    working: Option<std::rc::Rc<Working>>,
    /// How many views' queries this query is inside.
    view_depth: usize,
    /// At CREATE VIEW, the view being made (its database and name): its
    /// query may not read it, through other views either (it would name
    /// itself), so the name is taken for a missing table, as MySQL does.
    defining: Option<std::rc::Rc<(String, String)>>,
}

/// What one statement's compiling has spent of what it may.
#[derive(Debug, Default)]
struct Spent {
    /// Namings of common table expressions: each compiles its query
    /// again, so expressions that name an earlier one twice would double
    /// the work at each level without a bound.
    named: std::cell::Cell<usize>,
    /// The operators of the views' queries expanded: one view's
    /// compiling can sit at the bottom of another's chain of operators,
    /// so their sum is bounded (`MAX_VIEW_OPERATORS`), as a statement's
    /// own text is.
    view_operators: std::cell::Cell<usize>,
    /// Derived queries compiled again with conditions pushed into them
    /// (design 0040): each compiles its whole query again, itself
    /// perhaps pushing further, so their number is bounded
    /// (`MAX_PUSHDOWNS`).
    pushdowns: std::cell::Cell<usize>,
}

/// What `Ctes::spent_so_far` reports and `Ctes::spend_as` sets: the
/// namings and view operators spent.
#[derive(Clone, Copy, Debug)]
pub(super) struct Spending {
    named: usize,
    view_operators: usize,
}

/// The most derived queries one statement compiles again with
/// conditions pushed into them; past it, the rest keep their first
/// plans.
const MAX_PUSHDOWNS: usize = 32;

/// The most views one may be inside (a view naming a view...): deeper
/// is taken for a view that names itself through others.
const MAX_VIEW_DEPTH: usize = 32;

/// The most namings of common table expressions one statement may make.
const MAX_CTE_NAMINGS: usize = 1_000;

impl Ctes {
    /// These and `with`'s, each of which sees those before it.
    pub(super) fn with(&self, with: &ast::With) -> SqlResult<Ctes> {
        let mut list: Vec<Cte> = Vec::with_capacity(self.visible + with.cte_tables.len());
        list.extend_from_slice(&self.list[..self.visible]);
        let outer = list.len();
        for cte in &with.cte_tables {
            let name = cte.alias.name.value.clone();
            if list[outer..]
                .iter()
                .any(|c| c.name.eq_ignore_ascii_case(&name))
            {
                return Err(SqlError::new(
                    codes::NONUNIQ_TABLE,
                    format!("Not unique table/alias: '{name}'"),
                ));
            }
            list.push(Cte {
                name,
                columns: cte
                    .alias
                    .columns
                    .iter()
                    .map(|c| c.name.value.clone())
                    .collect(),
                recursive: with.recursive && names(&cte.query.to_string(), &cte.alias.name.value),
                query: (*cte.query).clone(),
            });
        }
        let visible = list.len();
        Ok(Ctes {
            list: list.into(),
            visible,
            spent: std::rc::Rc::clone(&self.spent),
            working: self.working.clone(),
            view_depth: self.view_depth,
            defining: self.defining.clone(),
        })
    }

    /// These, with `working` what its name reads (a recursive
    /// expression's own query).
    pub(super) fn with_working(&self, working: std::rc::Rc<Working>) -> Ctes {
        Ctes {
            working: Some(working),
            ..self.clone()
        }
    }

    /// The recursive expression `name` names inside its own query.
    pub(super) fn working(&self, name: &ast::ObjectName) -> Option<&Working> {
        let [part] = name.0.as_slice() else {
            return None;
        };
        let ident = part.as_ident()?;
        self.working
            .as_deref()
            .filter(|working| working.name.eq_ignore_ascii_case(&ident.value))
    }

    /// The expression `name` names (a one-part name), and those its own
    /// query may name: the ones before it.
    pub(super) fn find(&self, name: &ast::ObjectName) -> Option<(&Cte, Ctes)> {
        let [part] = name.0.as_slice() else {
            return None;
        };
        let ident = part.as_ident()?;
        let at = self.list[..self.visible]
            .iter()
            .rposition(|cte| cte.name.eq_ignore_ascii_case(&ident.value))?;
        let visible = Ctes {
            list: std::rc::Rc::clone(&self.list),
            visible: at,
            spent: std::rc::Rc::clone(&self.spent),
            working: self.working.clone(),
            view_depth: self.view_depth,
            defining: self.defining.clone(),
        };
        Some((&self.list[at], visible))
    }

    /// What the query of view `database.name`, named here, may name: no
    /// common table expression of the statement (a view's query is its
    /// own), counted as a naming. 1462 past `MAX_VIEW_DEPTH` views deep.
    pub(super) fn for_view(&self, view: &crate::views::View) -> SqlResult<Ctes> {
        let (database, name) = (&view.database, &view.name);
        self.count_naming()?;
        let operators = self.spent.view_operators.get() + crate::parse::operators(&view.query);
        self.spent.view_operators.set(operators);
        if operators > MAX_VIEW_OPERATORS {
            return Err(SqlError::unsupported(format!(
                "views of more than {MAX_VIEW_OPERATORS} operators together in one statement"
            )));
        }
        if self.view_depth >= MAX_VIEW_DEPTH {
            return Err(SqlError::new(
                codes::VIEW_RECURSIVE,
                format!("`{database}`.`{name}` contains view recursion"),
            ));
        }
        Ok(Ctes {
            list: Vec::new().into(),
            visible: 0,
            spent: std::rc::Rc::clone(&self.spent),
            working: None,
            view_depth: self.view_depth + 1,
            defining: self.defining.clone(),
        })
    }

    /// What CREATE VIEW's query for view `database.name` may name.
    pub(super) fn defining(database: &str, name: &str) -> Ctes {
        Ctes {
            defining: Some(std::rc::Rc::new((database.to_string(), name.to_string()))),
            ..Ctes::default()
        }
    }

    /// Whether `database.name` is the view being made.
    pub(super) fn is_defining(&self, database: &str, name: &str) -> bool {
        self.defining
            .as_deref()
            .is_some_and(|(d, n)| d == database && n.eq_ignore_ascii_case(name))
    }

    /// Counts one naming of an expression: an error past
    /// `MAX_CTE_NAMINGS` in the statement.
    pub(super) fn count_naming(&self) -> SqlResult<()> {
        let named = self.spent.named.get() + 1;
        self.spent.named.set(named);
        match named > MAX_CTE_NAMINGS {
            true => Err(SqlError::unsupported(format!(
                "more than {MAX_CTE_NAMINGS} namings of common table expressions in one statement"
            ))),
            false => Ok(()),
        }
    }

    /// The namings and view operators the statement has spent so far.
    pub(super) fn spent_so_far(&self) -> Spending {
        Spending {
            named: self.spent.named.get(),
            view_operators: self.spent.view_operators.get(),
        }
    }

    /// Sets what the statement has spent to `spending`: a derived query
    /// compiled again with conditions pushed into it spends from where
    /// its first compiling began, and the statement's count is then put
    /// back, so compiling it twice spends no more of the bounds than
    /// compiling it once.
    pub(super) fn spend_as(&self, spending: Spending) {
        self.spent.named.set(spending.named);
        self.spent.view_operators.set(spending.view_operators);
    }

    /// Takes one of the statement's `MAX_PUSHDOWNS`; false when none is
    /// left.
    pub(super) fn take_pushdown(&self) -> bool {
        let taken = self.spent.pushdowns.get();
        self.spent.pushdowns.set(taken + 1);
        taken < MAX_PUSHDOWNS
    }
}

/// The table a derived table's rows are read as: named `alias`, its
/// columns the query's (each type as the result column's), its rows the
/// statement's subquery in `slot` (docs/design/0033-subqueries.md,
/// "Derived tables"). A view's is in its `database`, under its name
/// (`SqlTable::is_view`); a derived table's database is empty.
pub(super) fn derived_table(
    database: &str,
    alias: &str,
    plan: &SelectPlan,
    slot: usize,
) -> SqlResult<Arc<SqlTable>> {
    let mut columns: Vec<SqlColumn> = Vec::with_capacity(plan.columns.len());
    for column in plan.columns.iter() {
        if columns
            .iter()
            .any(|c| c.name.eq_ignore_ascii_case(&column.name))
        {
            return Err(SqlError::new(
                codes::DUP_FIELDNAME,
                format!("Duplicate column name '{}'", column.name),
            ));
        }
        columns.push(SqlColumn {
            name: column.name.clone(),
            sql_type: column.kind.sql_type(),
            nullable: true,
            default: None,
            auto_increment: false,
            generated: None,
        });
    }
    Ok(Arc::new(SqlTable {
        database: database.to_string(),
        name: alias.to_string(),
        table: Arc::new(client::Table::new(crate::catalog::made_table_def(
            alias.to_string(),
            &columns,
        ))),
        columns,
        auto_increment: None,
        declared: true,
        view: None,
        derived: Some(slot),
        checks: Vec::new(),
        generated: Vec::new(),
    }))
}

/// Whether `text` (a query as SQL) holds `name` as a word of its own,
/// compared without case: a query that may name a recursive expression.
/// A column of that name counts too; compiling tells (`Working`).
pub(super) fn names(text: &str, name: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    let lower = text.to_lowercase();
    let name = name.to_lowercase();
    lower.match_indices(&name).any(|(at, _)| {
        let before = lower[..at].chars().next_back();
        let after = lower[at + name.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}
