//! Generated columns (MySQL 5.7's): `c type [GENERATED ALWAYS] AS
//! (expr) [VIRTUAL | STORED]`, declared in CREATE TABLE
//! (docs/design/0042-generated-columns.md). The expression's text is kept
//! with the table's SQL declarations, compiled over the row when the
//! catalog loads the table, and computed by the SQL node on every row an
//! INSERT, REPLACE, upsert or UPDATE writes, after the row's other
//! columns and before its CHECK constraints. Both kinds are stored in the
//! cluster (a VIRTUAL column too: it reads, orders and indexes as MySQL's
//! does, at the cost of its room in the row), so a generated column of a
//! JSON path's value can be indexed, MySQL's way to index JSON.
//!
//! An expression reads the row alone (3102 otherwise: no subquery,
//! parameter, session value, RAND() or SLEEP), only generated columns
//! declared before it (3107) and no AUTO_INCREMENT column (3109). A
//! statement may give a generated column no value but DEFAULT (3105).

use crate::catalog::{SqlColumn, SqlTable};
use crate::error::{codes, SqlError, SqlResult};
use crate::expr::{Compiler, Environment, Expr, Inputs};
use crate::value::{self, Value};
use sqlparser::ast;

/// ER_GENERATED_COLUMN_FUNCTION_IS_NOT_ALLOWED.
const DISALLOWED_FUNCTION: u16 = 3102;
/// ER_NON_DEFAULT_VALUE_FOR_GENERATED_COLUMN.
pub const VALUE_NOT_ALLOWED: u16 = 3105;
/// MariaDB's ER_WARNING_NON_DEFAULT_VALUE_FOR_GENERATED_COLUMN.
const VALUE_IGNORED: u16 = 1906;
/// ER_UNSUPPORTED_ACTION_ON_GENERATED_COLUMN.
const UNSUPPORTED_ACTION: u16 = 3106;
/// ER_GENERATED_COLUMN_NON_PRIOR.
const NOT_PRIOR: u16 = 3107;
/// ER_GENERATED_COLUMN_REF_AUTO_INC.
const REFERS_TO_AUTO_INCREMENT: u16 = 3109;

/// A generated column as declared: what the table's declarations keep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generated {
    /// The expression as SQL text (as SHOW CREATE TABLE prints it).
    pub expression: String,
    /// STORED (else VIRTUAL; both are stored here).
    pub stored: bool,
}

/// A table's generated column, compiled over its row.
#[derive(Clone, Debug)]
pub struct GeneratedColumn {
    /// Its index in the row.
    pub column: usize,
    /// The expression; the error that compiling it now gives, for a kept
    /// expression this SQL node cannot compile: the table's rows can
    /// still be read, and every write is refused with it.
    pub expression: Result<Expr, SqlError>,
}

/// The declaration of `column`'s `AS (expr) [VIRTUAL | STORED]` option.
pub fn declaration(
    column: &str,
    expression: &ast::Expr,
    mode: Option<ast::GeneratedExpressionMode>,
) -> SqlResult<Generated> {
    Ok(Generated {
        expression: crate::checks::clause_of(expression, column)?,
        stored: matches!(mode, Some(ast::GeneratedExpressionMode::Stored)),
    })
}

/// Checks the generated columns of a CREATE TABLE of `table` with
/// `columns` and `primary_key` before anything is created: each
/// expression compiles over the row and reads it alone, only earlier
/// generated columns and no AUTO_INCREMENT one; no VIRTUAL column is in
/// the primary key.
pub fn check_declared(table: &str, columns: &[SqlColumn], primary_key: &[u16]) -> SqlResult<()> {
    let scratch = crate::checks::scratch_table(table, columns);
    for (index, column) in columns.iter().enumerate() {
        let Some(generated) = &column.generated else {
            continue;
        };
        if column.default.is_some() || column.auto_increment {
            return Err(SqlError::new(
                codes::WRONG_USAGE,
                format!(
                    "Incorrect usage of DEFAULT or AUTO_INCREMENT and generated column '{}'",
                    column.name
                ),
            ));
        }
        if !generated.stored && primary_key.contains(&(index as u16)) {
            return Err(SqlError::new(
                UNSUPPORTED_ACTION,
                "'Defining a virtual generated column as primary key' is not supported for generated columns.",
            ));
        }
        let expression = compile_one(&scratch, index, generated)?;
        let mut refused = None;
        visit_columns(&expression, &mut |read| {
            let Some(other) = columns.get(read) else {
                return;
            };
            if other.generated.is_some() && read >= index {
                refused.get_or_insert(SqlError::new(
                    NOT_PRIOR,
                    "Generated column can refer only to generated columns defined prior to it.",
                ));
            } else if other.auto_increment {
                refused.get_or_insert(SqlError::new(
                    REFERS_TO_AUTO_INCREMENT,
                    format!(
                        "Generated column '{}' cannot refer to auto-increment column.",
                        column.name
                    ),
                ));
            }
        });
        if let Some(error) = refused {
            return Err(error);
        }
    }
    Ok(())
}

/// The generated columns of `table` compiled over its row (as the
/// catalog loads it), in column order.
pub fn compile(table: &SqlTable) -> Vec<GeneratedColumn> {
    table
        .columns
        .iter()
        .enumerate()
        .filter_map(|(index, column)| {
            let generated = column.generated.as_ref()?;
            Some(GeneratedColumn {
                column: index,
                expression: compile_one(table, index, generated),
            })
        })
        .collect()
}

fn compile_one(table: &SqlTable, index: usize, generated: &Generated) -> SqlResult<Expr> {
    let name = &table.columns[index].name;
    let parsed = crate::checks::parse(&generated.expression, name)?;
    let mut compiler = Compiler::new(Some(table), None);
    compiler.place = "generated column function";
    let expression = compiler.compile(&parsed)?;
    if compiler.parameter_count() > 0 || !crate::checks::reads_the_row_alone(&expression) {
        return Err(SqlError::new(
            DISALLOWED_FUNCTION,
            format!("Expression of generated column '{name}' contains a disallowed function."),
        ));
    }
    Ok(expression)
}

/// Calls `visit` with each row column `expr` reads.
fn visit_columns(expr: &Expr, visit: &mut dyn FnMut(usize)) {
    if let Expr::Column(index) = expr {
        visit(*index);
    }
    expr.for_each_child(&mut |child| visit_columns(child, visit));
}

/// Computes `table`'s generated columns of `row` (its other columns
/// final), each fitted to its column's type, in column order.
pub fn fill(table: &SqlTable, row: &mut [Value], environment: &dyn Environment) -> SqlResult<()> {
    for generated in &table.generated {
        let column = &table.columns[generated.column];
        let expression = generated.expression.as_ref().map_err(|error| {
            SqlError::new(
                error.code,
                format!(
                    "Generated column '{}' cannot be computed here ({}): writes to '{}' are refused",
                    column.name, error.message, table.name
                ),
            )
        })?;
        let inputs = Inputs {
            row,
            aggregates: &[],
            params: &[],
        };
        let computed = expression.eval(&inputs, environment)?;
        // NOT NULL is the SQL node's to check here, as for any value it
        // fits: the row is queued, maybe batched, before the cluster sees it.
        if computed.is_null() && !column.nullable {
            return Err(SqlError::new(
                codes::BAD_NULL,
                format!("Column '{}' cannot be null", column.name),
            ));
        }
        row[generated.column] = value::fit(&computed, &column.sql_type, &column.name)?;
    }
    Ok(())
}

/// 3105: a statement gave generated column `column` a value.
pub fn value_not_allowed(table: &SqlTable, column: usize) -> SqlError {
    SqlError::new(
        VALUE_NOT_ALLOWED,
        format!(
            "The value specified for generated column '{}' in table '{}' is not allowed.",
            table.columns[column].name, table.name
        ),
    )
}

/// What a value a row of INSERT or REPLACE gave generated column
/// `column` does: in a strict `sql_mode` (the default), error 3105; in
/// another, it is ignored with warning 1906. That is MariaDB's rule, not
/// MySQL's (3105 in every mode): the mysqldump Debian ships is
/// MariaDB's, which dumps generated columns' values and sets
/// `SQL_MODE='NO_AUTO_VALUE_ON_ZERO'` before them (MySQL's leaves them
/// out, by DESCRIBE's Extra).
pub fn given_value(
    table: &SqlTable,
    column: usize,
    environment: &dyn Environment,
) -> SqlResult<()> {
    let mode = environment.session_value(&crate::expr::SessionValue::SystemVariable {
        name: "sql_mode".into(),
        global: false,
    })?;
    // TRADITIONAL is kept as written, not expanded into its modes.
    let mode = value::display(&mode).to_ascii_uppercase();
    if ["STRICT_TRANS_TABLES", "STRICT_ALL_TABLES", "TRADITIONAL"]
        .iter()
        .any(|strict| mode.contains(strict))
    {
        return Err(value_not_allowed(table, column));
    }
    environment.raise(
        crate::diagnostics::Level::Warning,
        VALUE_IGNORED,
        &format!(
            "The value specified for generated column '{}' in table '{}' has been ignored",
            table.columns[column].name, table.name
        ),
    );
    Ok(())
}

/// 3105 when an assignment (UPDATE's SET, an upsert's UPDATE) names
/// generated column `column` of `table`.
pub fn refuse_assignment(table: &SqlTable, column: usize) -> SqlResult<()> {
    match table.columns[column].generated.is_some() {
        true => Err(value_not_allowed(table, column)),
        false => Ok(()),
    }
}

/// The declaration as SHOW CREATE TABLE prints it after the type.
pub fn clause(generated: &Generated) -> String {
    format!(
        " GENERATED ALWAYS AS ({}) {}",
        generated.expression,
        match generated.stored {
            true => "STORED",
            false => "VIRTUAL",
        }
    )
}

/// DESCRIBE's and information_schema's EXTRA for it.
pub fn extra(generated: &Generated) -> &'static str {
    match generated.stored {
        true => "STORED GENERATED",
        false => "VIRTUAL GENERATED",
    }
}

/// The declaration as the table's declarations JSON keeps it.
pub fn to_json(generated: &Generated) -> serde_json::Value {
    serde_json::json!({ "expression": generated.expression, "stored": generated.stored })
}

/// The declaration the JSON keeps, if any. One this node cannot read
/// keeps the column generated, with an expression that does not compile:
/// writes to the table are refused rather than made with the column
/// left as a statement gives it.
pub fn from_json(json: Option<&serde_json::Value>) -> Option<Generated> {
    let json = json?;
    let expression = json
        .get("expression")
        .and_then(|e| e.as_str())
        .unwrap_or("(a generated column's expression this SQL node cannot read)");
    Some(Generated {
        expression: expression.to_string(),
        stored: json
            .get("stored")
            .and_then(|s| s.as_bool())
            .unwrap_or(false),
    })
}
