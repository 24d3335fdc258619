//! CHECK constraints (MySQL 8.0.16's): declared in CREATE TABLE, on a
//! column or the table, `[CONSTRAINT name] CHECK (expr) [[NOT]
//! ENFORCED]`; kept with the table's SQL declarations (their text, named
//! `t_chk_1`, `t_chk_2`... when unnamed, as MySQL names them), compiled
//! over the table's row when the catalog loads it, and checked on every
//! row an INSERT, REPLACE, upsert or UPDATE writes: a row for which an
//! enforced check is FALSE is error 3819 (a warning that leaves the row
//! out, with INSERT IGNORE); NULL passes, as in MySQL. ORMs declare them
//! (Django's positive integer fields: `CHECK (x >= 0)`).
//!
//! A check reads the row alone: a subquery, a parameter, a session value
//! (NOW(), RAND(), a variable) or SLEEP is refused when the table is
//! created (MySQL's 3814), so that a row's answer never changes.

use crate::catalog::{SqlColumn, SqlTable};
use crate::error::{SqlError, SqlResult};
use crate::expr::{Compiler, Environment, Expr, Function, Inputs};
use crate::value::{self, Value};
use sqlparser::ast;
use std::sync::Arc;

/// A check violated: MySQL's ER_CHECK_CONSTRAINT_VIOLATED.
pub const CHECK_VIOLATED: u16 = 3819;
/// A check that reads more than the row: ER_CHECK_CONSTRAINT_FUNCTION_IS_NOT_ALLOWED.
const NOT_THE_ROW_ALONE: u16 = 3814;
/// ER_CHECK_CONSTRAINT_DUP_NAME.
const DUPLICATE_NAME: u16 = 3822;

/// A CHECK constraint as declared: what the table's declarations keep.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckDeclaration {
    /// Its name.
    pub name: String,
    /// The condition as SQL text (as SHOW CREATE TABLE prints it).
    pub clause: String,
    /// Checked on writes (`NOT ENFORCED`: kept, not checked).
    pub enforced: bool,
}

/// A CHECK constraint of a table, compiled over its row.
#[derive(Clone, Debug)]
pub struct CheckConstraint {
    /// As declared.
    pub declaration: CheckDeclaration,
    /// The condition over the table's row; the error that compiling it
    /// now gives, for a kept condition this SQL node cannot compile (a
    /// newer or older node's rules): the table's rows can still be read,
    /// and every write is refused with it rather than left unchecked.
    pub condition: Result<Expr, SqlError>,
}

/// The CHECK constraints a CREATE TABLE of `table` with `columns`
/// declares, column ones first, each compiled once now so that an
/// unknown column (1054) or a condition that reads more than the row
/// (3814) is refused before anything is created.
pub fn declared(
    create: &ast::CreateTable,
    table: &str,
    columns: &[SqlColumn],
) -> SqlResult<Vec<CheckDeclaration>> {
    let mut found: Vec<(Option<String>, &ast::Expr, bool)> = Vec::new();
    for column in &create.columns {
        for option in &column.options {
            if let ast::ColumnOption::Check(expr) = &option.option {
                found.push((option.name.as_ref().map(|n| n.value.clone()), expr, true));
            }
        }
    }
    for constraint in &create.constraints {
        if let ast::TableConstraint::Check {
            name,
            expr,
            enforced,
        } = constraint
        {
            found.push((
                name.as_ref().map(|n| n.value.clone()),
                expr,
                enforced.unwrap_or(true),
            ));
        }
    }
    let scratch = scratch_table(table, columns);
    let mut declarations: Vec<CheckDeclaration> = Vec::with_capacity(found.len());
    let mut unnamed = 0;
    for (name, expr, enforced) in found {
        let name = name.unwrap_or_else(|| {
            unnamed += 1;
            format!("{table}_chk_{unnamed}")
        });
        if declarations
            .iter()
            .any(|d| d.name.eq_ignore_ascii_case(&name))
        {
            return Err(SqlError::new(
                DUPLICATE_NAME,
                format!("Duplicate check constraint name '{name}'."),
            ));
        }
        let declaration = CheckDeclaration {
            clause: clause_of(expr, &name)?,
            name,
            enforced,
        };
        compile_one(&scratch, &declaration)?;
        declarations.push(declaration);
    }
    Ok(declarations)
}

/// The text a condition is kept as, which must read back as the same
/// condition: the parser prints a string's value without escaping its
/// backslashes (`'^\\d'` would come back as `'^d'`), so they are
/// doubled, and the text is parsed again to prove it. One that cannot be
/// made to read back is refused rather than kept as another condition.
pub(crate) fn clause_of(expr: &ast::Expr, name: &str) -> SqlResult<String> {
    let printed = expr.to_string();
    let reads_back = |text: &str| parse(text, name).is_ok_and(|parsed| parsed == *expr);
    if reads_back(&printed) {
        return Ok(printed);
    }
    let escaped = printed.replace('\\', "\\\\");
    if reads_back(&escaped) {
        return Ok(escaped);
    }
    Err(SqlError::unsupported(format!(
        "check constraint '{name}': a condition whose text does not read back as itself"
    )))
}

/// `clause` parsed as an expression.
pub(crate) fn parse(clause: &str, name: &str) -> SqlResult<ast::Expr> {
    let dialect = crate::dialect::TesseraDialect::new();
    sqlparser::parser::Parser::new(&dialect)
        .try_with_sql(clause)
        .and_then(|mut parser| parser.parse_expr())
        .map_err(|error| SqlError::parse(format!("check constraint '{name}': {error}")))
}

/// A table of `columns` to compile checks over before the table exists.
pub(crate) fn scratch_table(name: &str, columns: &[SqlColumn]) -> SqlTable {
    SqlTable {
        database: String::new(),
        name: name.to_string(),
        table: Arc::new(client::Table::new(crate::catalog::made_table_def(
            name.to_string(),
            columns,
        ))),
        columns: columns.to_vec(),
        auto_increment: None,
        declared: true,
        view: None,
        derived: None,
        checks: Vec::new(),
        generated: Vec::new(),
    }
}

/// The declarations compiled over `table`'s row (as the catalog loads
/// the table).
pub fn compile(table: &SqlTable, declarations: &[CheckDeclaration]) -> Vec<CheckConstraint> {
    declarations
        .iter()
        .map(|declaration| CheckConstraint {
            declaration: declaration.clone(),
            condition: compile_one(table, declaration),
        })
        .collect()
}

fn compile_one(table: &SqlTable, declaration: &CheckDeclaration) -> SqlResult<Expr> {
    let parsed = parse(&declaration.clause, &declaration.name)?;
    let mut compiler = Compiler::new(Some(table), None);
    compiler.place = "check constraint";
    let condition = compiler.compile(&parsed)?;
    if compiler.parameter_count() > 0 || !reads_the_row_alone(&condition) {
        return Err(SqlError::new(
            NOT_THE_ROW_ALONE,
            format!(
                "An expression of a check constraint '{}' contains disallowed function.",
                declaration.name
            ),
        ));
    }
    Ok(condition)
}

/// Whether `condition` reads nothing but the row's columns and constants.
pub(crate) fn reads_the_row_alone(condition: &Expr) -> bool {
    let outside = matches!(
        condition,
        Expr::Session(_)
            | Expr::Param(_)
            | Expr::Subquery { .. }
            | Expr::Aggregate(_)
            | Expr::Window(_)
            | Expr::Outer(_)
            | Expr::Function(
                Function::Sleep | Function::SetLastInsertId | Function::UserLock(_),
                _
            )
    );
    let mut alone = !outside;
    condition.for_each_child(&mut |child| alone &= reads_the_row_alone(child));
    alone
}

/// Error 3819 unless every enforced check of `table` holds for `row`
/// (a NULL holds: only FALSE fails).
pub fn verify(table: &SqlTable, row: &[Value], environment: &dyn Environment) -> SqlResult<()> {
    for check in table.checks.iter().filter(|c| c.declaration.enforced) {
        let inputs = Inputs {
            row,
            aggregates: &[],
            params: &[],
        };
        let condition = check.condition.as_ref().map_err(|error| {
            SqlError::new(
                error.code,
                format!(
                    "Check constraint '{}' cannot be evaluated here ({}): writes to '{}' are refused",
                    check.declaration.name, error.message, table.name
                ),
            )
        })?;
        if value::truth(&condition.eval(&inputs, environment)?) == Some(false) {
            return Err(SqlError::new(
                CHECK_VIOLATED,
                format!("Check constraint '{}' is violated.", check.declaration.name),
            ));
        }
    }
    Ok(())
}

/// Whether `error` is a violated check (INSERT IGNORE makes it a warning).
pub fn is_violation(error: &SqlError) -> bool {
    error.code == CHECK_VIOLATED
}

/// The declarations as the table's declarations JSON keeps them.
pub fn to_json(declarations: &[CheckDeclaration]) -> serde_json::Value {
    serde_json::Value::Array(
        declarations
            .iter()
            .map(|d| {
                serde_json::json!({
                    "name": d.name,
                    "clause": d.clause,
                    "enforced": d.enforced,
                })
            })
            .collect(),
    )
}

/// The declarations the JSON keeps (none when it has none).
pub fn from_json(json: Option<&serde_json::Value>) -> Vec<CheckDeclaration> {
    let Some(list) = json.and_then(|j| j.as_array()) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|entry| {
            Some(CheckDeclaration {
                name: entry.get("name")?.as_str()?.to_string(),
                clause: entry.get("clause")?.as_str()?.to_string(),
                enforced: entry
                    .get("enforced")
                    .and_then(|e| e.as_bool())
                    .unwrap_or(true),
            })
        })
        .collect()
}
