//! A session's warnings (docs/design/0027-sql-node.md, "Warnings"): the
//! counts its packets carry, and the statements that read the
//! diagnostics area rather than clear it: SHOW WARNINGS, SHOW ERRORS
//! (each with `LIMIT [offset,] count`), SHOW COUNT(*) WARNINGS and
//! ERRORS, read from their text (the parser knows only some of these
//! forms), and a SELECT without tables that reads `@@warning_count` or
//! `@@error_count`.

use super::Session;
use crate::diagnostics::Level;
use crate::error::{SqlError, SqlResult};
use crate::result::{OutputColumn, Response};
use crate::value::Value;
use sqlparser::ast;
use std::sync::Arc;

impl Session {
    /// The outcome of a query that ran no statement through `run` (a
    /// parse error, an account statement): its error counted and kept
    /// for SHOW WARNINGS.
    pub(super) fn alone(&mut self, result: SqlResult<Response>) -> Vec<SqlResult<Response>> {
        if let Err(error) = &result {
            self.statistics().error(error.code);
            self.diagnostics
                .get_mut()
                .raise(Level::Error, error.code, error.message.as_str());
        }
        self.statement_warnings.push(self.warning_count());
        vec![result]
    }

    /// Conditions the last statement raised: the warning count of its
    /// OK or EOF packet (`@@warning_count`).
    pub fn warning_count(&self) -> u16 {
        self.diagnostics.borrow().count().min(u16::MAX as usize) as u16
    }

    /// The warning count the OK or EOF packet of the `index`th statement
    /// of the last query or execution says (its statements all ran
    /// before their responses are sent): the conditions it raised.
    pub fn warnings_of(&self, index: usize) -> u16 {
        self.statement_warnings.get(index).copied().unwrap_or(0)
    }

    /// SHOW WARNINGS, SHOW ERRORS, SHOW COUNT(*) WARNINGS or ERRORS.
    pub(super) fn show_diagnostics(&self, shown: Shown) -> Response {
        let diagnostics = self.diagnostics.borrow();
        match shown {
            Shown::Count { errors } => {
                let (name, count) = match errors {
                    true => ("@@session.error_count", diagnostics.errors()),
                    false => ("@@session.warning_count", diagnostics.count()),
                };
                Response::Rows {
                    columns: Arc::from(vec![OutputColumn::computed(
                        name,
                        crate::result::ColumnKind::BigInt { unsigned: false },
                    )]),
                    rows: vec![vec![Value::Int(count as i64)]],
                }
            }
            Shown::List {
                errors,
                offset,
                limit,
            } => Response::Rows {
                columns: Arc::from(vec![
                    OutputColumn::computed("Level", crate::result::ColumnKind::Text(7)),
                    OutputColumn::computed(
                        "Code",
                        crate::result::ColumnKind::BigInt { unsigned: true },
                    ),
                    OutputColumn::computed("Message", crate::result::ColumnKind::Text(512)),
                ]),
                rows: diagnostics.rows(errors, offset, limit),
            },
        }
    }

    /// What a statement's IF EXISTS or IF NOT EXISTS turned from an error
    /// into a note (MySQL's: `DROP TABLE IF EXISTS` of no table, 1051).
    pub(super) fn note(&self, passed: Option<SqlError>) {
        if let Some(error) = passed {
            self.diagnostics
                .borrow_mut()
                .raise(Level::Note, error.code, error.message);
        }
    }
}

/// What a diagnostic SHOW asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Shown {
    /// SHOW WARNINGS (all conditions) or SHOW ERRORS (`errors`).
    List {
        errors: bool,
        offset: usize,
        limit: Option<usize>,
    },
    /// SHOW COUNT(*) WARNINGS or ERRORS.
    Count { errors: bool },
}

/// `text` as one of the diagnostic SHOWs, if it is one.
pub(super) fn parse(text: &str) -> Option<Shown> {
    let text = text.trim().trim_end_matches(';').trim_end();
    if !text
        .get(..4)
        .is_some_and(|word| word.eq_ignore_ascii_case("SHOW"))
    {
        return None;
    }
    // Words, with `(`, `*`, `)` and `,` words of their own.
    let spaced: String = text
        .chars()
        .flat_map(|c| match c {
            '(' | ')' | '*' | ',' => vec![' ', c, ' '],
            c => vec![c],
        })
        .collect();
    let words: Vec<String> = spaced
        .split_whitespace()
        .map(str::to_ascii_uppercase)
        .collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let which = |word: &str| match word {
        "WARNINGS" => Some(false),
        "ERRORS" => Some(true),
        _ => None,
    };
    let number = |word: &str| word.parse::<usize>().ok();
    match words.as_slice() {
        ["SHOW", "COUNT", "(", "*", ")", word] => Some(Shown::Count {
            errors: which(word)?,
        }),
        ["SHOW", word] => Some(Shown::List {
            errors: which(word)?,
            offset: 0,
            limit: None,
        }),
        ["SHOW", word, "LIMIT", count] => Some(Shown::List {
            errors: which(word)?,
            offset: 0,
            limit: Some(number(count)?),
        }),
        ["SHOW", word, "LIMIT", offset, ",", count] => Some(Shown::List {
            errors: which(word)?,
            offset: number(offset)?,
            limit: Some(number(count)?),
        }),
        _ => None,
    }
}

/// Whether `statement` reads the diagnostics of the one before and must
/// leave them: SHOW WARNINGS or ERRORS as the parser has them, and a
/// SELECT without tables naming `warning_count` or `error_count`.
pub(super) fn reads_diagnostics(statement: &ast::Statement) -> bool {
    match statement {
        ast::Statement::ShowVariable { variable } => {
            matches!(variable.as_slice(), [word] if word.value.eq_ignore_ascii_case("WARNINGS")
                || word.value.eq_ignore_ascii_case("ERRORS"))
        }
        ast::Statement::Query(query) => {
            let ast::SetExpr::Select(select) = query.body.as_ref() else {
                return false;
            };
            if !select.from.is_empty() {
                return false;
            }
            let text = statement.to_string().to_ascii_lowercase();
            text.contains("warning_count") || text.contains("error_count")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diagnostic_shows_are_read_from_their_text() {
        let list = |errors, offset, limit| {
            Some(Shown::List {
                errors,
                offset,
                limit,
            })
        };
        assert_eq!(parse("show warnings"), list(false, 0, None));
        assert_eq!(parse("SHOW ERRORS;"), list(true, 0, None));
        assert_eq!(parse("SHOW WARNINGS LIMIT 2"), list(false, 0, Some(2)));
        assert_eq!(parse("SHOW WARNINGS LIMIT 1, 3"), list(false, 1, Some(3)));
        assert_eq!(
            parse("SHOW COUNT( * ) WARNINGS"),
            Some(Shown::Count { errors: false })
        );
        assert_eq!(
            parse("show count(*) errors"),
            Some(Shown::Count { errors: true })
        );
        assert_eq!(parse("SHOW TABLES"), None);
        assert_eq!(parse("SHOW WARNINGS LIMIT x"), None);
        assert_eq!(parse("SELECT 1"), None);
        assert_eq!(parse("SHO"), None);
    }
}
