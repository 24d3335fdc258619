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
pub fn parse(text: &str) -> SqlResult<Vec<Statement>> {
    let rewritten = rewrite(text);
    let statements = Parser::parse_sql(&MySqlDialect {}, rewritten.as_deref().unwrap_or(text))
        .map_err(|error| {
            SqlError::parse(error.to_string().trim_start_matches("sql parser error: "))
        })?;
    Ok(statements)
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
    }
}
