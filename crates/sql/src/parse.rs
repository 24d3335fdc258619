//! Parsing: the MySQL statements the `sqlparser` crate's MySQL dialect
//! does not read rewritten to ones it does (`LOCK IN SHARE MODE` is
//! `FOR SHARE`, `SHOW FULL PROCESSLIST` is `SHOW PROCESSLIST`), then
//! parsed, and the parse kept by statement text: a parse costs tens of
//! microseconds, a hit a hash lookup.

use crate::error::{SqlError, SqlResult};
use sqlparser::ast::Statement;
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Most statements the cache keeps; it starts again empty when full.
const CACHE_ENTRIES: usize = 4096;
/// Longest text cached (a bulk INSERT is parsed once anyway).
const CACHE_TEXT_BYTES: usize = 4096;

/// Parsed statements by text.
#[derive(Default)]
pub struct Cache {
    entries: Mutex<HashMap<String, Arc<Vec<Statement>>>>,
}

impl Cache {
    /// The statements of `text`.
    pub fn parse(&self, text: &str) -> SqlResult<Arc<Vec<Statement>>> {
        if text.len() <= CACHE_TEXT_BYTES {
            if let Some(hit) = self.entries.lock().expect("parse cache lock").get(text) {
                return Ok(Arc::clone(hit));
            }
        }
        let parsed = Arc::new(parse(text)?);
        if text.len() <= CACHE_TEXT_BYTES {
            let mut entries = self.entries.lock().expect("parse cache lock");
            if entries.len() >= CACHE_ENTRIES {
                entries.clear();
            }
            entries.insert(text.to_string(), Arc::clone(&parsed));
        }
        Ok(parsed)
    }
}

/// Parses `text` (one statement or several separated by `;`).
///
/// The parser can panic on some input (sqlparser 0.59's MySQL dialect
/// unwraps the operand after `DIV`: `SELECT 1 DIV`): client text must
/// never take a worker down, so a panic is caught here and answered as
/// the syntax error it is. The parser holds no lock and shares nothing,
/// so nothing is left half-changed.
pub fn parse(text: &str) -> SqlResult<Vec<Statement>> {
    let rewritten = rewrite(text);
    let source = rewritten.as_deref().unwrap_or(text);
    let parsed = std::panic::catch_unwind(|| Parser::parse_sql(&MySqlDialect {}, source));
    match parsed {
        Ok(Ok(statements)) => Ok(statements),
        Ok(Err(error)) => Err(SqlError::parse(
            error.to_string().trim_start_matches("sql parser error: "),
        )),
        Err(_) => Err(SqlError::parse("the parser gave up on this text")),
    }
}

/// `text` with what the parser lacks replaced, or `None` when nothing
/// is. Only a whole statement or its very end is rewritten, never text
/// inside it (a string literal may hold the same words).
fn rewrite(text: &str) -> Option<String> {
    let trimmed = text.trim_end_matches(|c: char| c.is_whitespace() || c == ';');
    if trimmed
        .trim_start()
        .eq_ignore_ascii_case("SHOW FULL PROCESSLIST")
    {
        return Some("SHOW PROCESSLIST".into());
    }
    let suffix = "LOCK IN SHARE MODE";
    let cut = trimmed.len().checked_sub(suffix.len())?;
    let tail = trimmed.get(cut..)?;
    let separated = trimmed[..cut].ends_with(|c: char| c.is_whitespace());
    (tail.eq_ignore_ascii_case(suffix) && separated)
        .then(|| format!("{}FOR SHARE", &trimmed[..cut]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mysql_isms_parse() {
        assert!(parse("SELECT c FROM t WHERE id = 1 LOCK IN SHARE MODE").is_ok());
        assert!(parse("show full processlist").is_ok());
        // Inside a literal the words stay.
        assert_eq!(rewrite("SELECT 'lock in share mode x'"), None);
        assert_eq!(parse("SELECT 1; SELECT 2").unwrap().len(), 2);
        assert_eq!(parse("SELEC 1").unwrap_err().code, 1064);
        // The parser panics on this one; the caller gets 1064.
        assert_eq!(parse("SELECT 1 DIV").unwrap_err().code, 1064);
    }
}

#[cfg(test)]
mod fuzz {
    use super::*;
    use crate::expr::{Compiler, Environment, Inputs, SessionValue};
    use client::Value;
    use proptest::prelude::*;

    /// Pieces of SQL, so generated text reaches past the tokenizer.
    const PIECES: &[&str] = &[
        "SELECT",
        "INSERT",
        "INTO",
        "VALUES",
        "UPDATE",
        "SET",
        "DELETE",
        "FROM",
        "WHERE",
        "AND",
        "OR",
        "NOT",
        "BETWEEN",
        "IN",
        "(",
        ")",
        ",",
        ";",
        "?",
        "*",
        "+",
        "-",
        "/",
        "%",
        "=",
        "<",
        ">=",
        "<=>",
        "t",
        "id",
        "k",
        "c",
        "'x'",
        "'\\''",
        "1",
        "-9223372036854775808",
        "18446744073709551616",
        "1e308",
        "NULL",
        "ORDER BY",
        "LIMIT",
        "DISTINCT",
        "COUNT(*)",
        "SUM(k)",
        "@@version",
        "@a",
        "LOCK IN SHARE MODE",
        "FOR UPDATE",
        "CREATE TABLE",
        "PRIMARY KEY",
        "INT",
        "CHAR(300)",
        "DIV",
        "LIKE",
        "'%_\\\\'",
        "IS NULL",
        "CONCAT(",
        "/*!",
        "*/",
        "--",
        "\n",
        "`",
        "\"",
    ];

    struct NoSession;
    impl Environment for NoSession {
        fn session_value(&self, _: &SessionValue) -> SqlResult<Value> {
            Ok(Value::Null)
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn any_text_parses_or_is_refused(text in ".{0,200}") {
            let _ = parse(&text);
        }

        #[test]
        fn sql_shaped_text_parses_compiles_and_evaluates_without_panic(
            pieces in proptest::collection::vec(proptest::sample::select(PIECES), 0..40),
            params in proptest::collection::vec(any::<i64>(), 0..8),
        ) {
            let text = pieces.join(" ");
            let _ = parse(&text);
            // As an expression: compiled with no table and evaluated.
            let dialect = MySqlDialect {};
            let expr = std::panic::catch_unwind(|| {
                Parser::new(&dialect).try_with_sql(&text).ok()?.parse_expr().ok()
            });
            if let Ok(Some(expr)) = expr {
                let mut compiler = Compiler::new(None, None);
                if let Ok(compiled) = compiler.compile(&expr) {
                    let bound: Vec<Value> = (0..compiler.parameter_count())
                        .map(|i| params.get(i).map_or(Value::Null, |x| Value::Int(*x)))
                        .collect();
                    let inputs = Inputs { row: &[], aggregates: &[], params: &bound };
                    let _ = compiled.eval(&inputs, &NoSession);
                }
            }
        }
    }
}
