//! Parsing: the MySQL statements the `sqlparser` crate's MySQL dialect
//! does not read rewritten to ones it does (`LOCK IN SHARE MODE` is
//! `FOR SHARE`, `SHOW FULL PROCESSLIST` is `SHOW PROCESSLIST`), then
//! parsed, and the parse kept by statement text: a parse costs tens of
//! microseconds, a hit a hash lookup.

use crate::dialect::TesseraDialect;
use crate::error::{SqlError, SqlResult};
use sqlparser::ast::Statement;
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

/// The stack a thread running statements needs: expressions are compiled,
/// evaluated and dropped recursively, one frame per operator of a chain
/// (`1+1+1+...` is as deep as it is long; the parser's nesting limit does
/// not see it), and [`MAX_OPERATORS`] of them must fit.
pub const STATEMENT_STACK_BYTES: usize = 64 << 20;

/// The most operators a statement may hold (outside string literals):
/// a longer chain is refused as too complex before the parser builds it,
/// so no text can overflow a worker's stack (MySQL refuses such text with
/// a stack overrun error).
pub const MAX_OPERATORS: usize = 20_000;

/// Operators in `text` outside quoted strings and names: symbols, and
/// the words AND, OR, XOR, DIV, MOD, NOT, BETWEEN, LIKE, IN, and UNION,
/// INTERSECT and EXCEPT (a set operation's SELECTs are a chain too, each
/// with a plan of its own).
pub(crate) fn operators(text: &str) -> usize {
    let mut count = 0;
    let mut quote: Option<u8> = None;
    let bytes = text.as_bytes();
    let mut word_start = None;
    for (at, &byte) in bytes.iter().enumerate() {
        if let Some(q) = quote {
            if byte == q {
                quote = None;
            }
            continue;
        }
        let in_word = byte.is_ascii_alphanumeric() || byte == b'_';
        match (in_word, word_start) {
            (true, None) => word_start = Some(at),
            (false, Some(start)) => {
                let word = &bytes[start..at];
                let operator = [
                    "AND",
                    "OR",
                    "XOR",
                    "DIV",
                    "MOD",
                    "NOT",
                    "BETWEEN",
                    "LIKE",
                    "IN",
                    "UNION",
                    "INTERSECT",
                    "EXCEPT",
                ]
                .iter()
                .any(|w| word.eq_ignore_ascii_case(w.as_bytes()));
                count += operator as usize;
                word_start = None;
            }
            _ => {}
        }
        match byte {
            b'\'' | b'"' | b'`' => quote = Some(byte),
            b'+' | b'-' | b'*' | b'/' | b'%' | b'=' | b'<' | b'>' | b'!' | b'&' | b'|' | b'^'
            | b'(' => count += 1,
            _ => {}
        }
    }
    count
}

/// Parses `text` (one statement or several separated by `;`).
///
/// The parser can panic on some input (sqlparser 0.59's MySQL dialect
/// unwraps the operand after `DIV`: `SELECT 1 DIV`): client text must
/// never take a worker down, so a panic is caught here and answered as
/// the syntax error it is. The parser holds no lock and shares nothing,
/// so nothing is left half-changed.
pub fn parse(text: &str) -> SqlResult<Vec<Statement>> {
    if operators(text) > MAX_OPERATORS {
        return Err(SqlError::parse(format!(
            "the statement is too complex: more than {MAX_OPERATORS} operators"
        )));
    }
    let rewritten = rewrite(text);
    let source = rewritten.as_deref().unwrap_or(text);
    let parsed = quietly_caught(|| Parser::parse_sql(&TesseraDialect::new(), source));
    match parsed {
        Ok(Ok(mut statements)) => {
            crate::column_names::name_select_items(source, &mut statements);
            Ok(statements)
        }
        Ok(Err(error)) => Err(SqlError::parse(
            error.to_string().trim_start_matches("sql parser error: "),
        )),
        Err(_) => Err(SqlError::parse("the parser gave up on this text")),
    }
}

thread_local! {
    /// This thread is inside [`quietly_caught`].
    static CATCHING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `f`'s result, or `Err` if it panicked, without the panic's report:
/// a panic the parser makes on a client's text is that client's syntax
/// error, and must not reach the node's log (one line per statement,
/// for anyone who can connect). The process's own hook still reports
/// every other panic, on every other thread and outside `f`.
pub(crate) fn quietly_caught<T>(
    f: impl FnOnce() -> T + std::panic::UnwindSafe,
) -> std::thread::Result<T> {
    static QUIET_HOOK: std::sync::Once = std::sync::Once::new();
    QUIET_HOOK.call_once(|| {
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !CATCHING.with(|catching| catching.get()) {
                report(info);
            }
        }));
    });
    CATCHING.with(|catching| catching.set(true));
    let result = std::panic::catch_unwind(f);
    CATCHING.with(|catching| catching.set(false));
    result
}

/// The MySQL version executable comments are compared with: 8.0.36.
const COMMENT_VERSION: u32 = 80036;

/// `text` with MySQL's executable comments opened: `/*!40101 SET ... */`
/// runs its text on a server at or above that version (8.0.36 here: what
/// mysqldump's preamble relies on), `/*!...*/` always; `/*M!...*/` is
/// MariaDB's alone and stays a comment. Quoted text is left as it is.
/// `None` when there is none.
fn open_executable_comments(text: &str) -> Option<String> {
    if !text.contains("/*!") {
        return None;
    }
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut quote: Option<u8> = None;
    let mut at = 0;
    let mut copied = 0;
    let mut inside = false;
    let mut opened = false;
    while at < bytes.len() {
        let byte = bytes[at];
        if let Some(q) = quote {
            if byte == b'\\' && q != b'`' {
                at += 2;
                continue;
            }
            if byte == q {
                quote = None;
            }
            at += 1;
            continue;
        }
        match byte {
            b'\'' | b'"' | b'`' => quote = Some(byte),
            b'/' if bytes[at..].starts_with(b"/*!") && !inside => {
                out.push_str(&text[copied..at]);
                let mut start = at + 3;
                let digits = bytes[start..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit())
                    .count();
                let version: Option<u32> = match digits {
                    5 | 6 => text[start..start + digits].parse().ok(),
                    _ => None,
                };
                start += if version.is_some() { digits } else { 0 };
                opened = true;
                if version.is_some_and(|v| v > COMMENT_VERSION) {
                    // For a newer server: a comment here.
                    let end = text[start..]
                        .find("*/")
                        .map_or(text.len(), |e| start + e + 2);
                    out.push(' ');
                    at = end;
                    copied = end;
                    continue;
                }
                out.push(' ');
                inside = true;
                at = start;
                copied = start;
                continue;
            }
            b'*' if inside && bytes[at..].starts_with(b"*/") => {
                out.push_str(&text[copied..at]);
                out.push(' ');
                inside = false;
                at += 2;
                copied = at;
                continue;
            }
            _ => {}
        }
        at += 1;
    }
    out.push_str(&text[copied.min(text.len())..]);
    opened.then_some(out)
}

/// `text` with what the parser lacks replaced, or `None` when nothing
/// is. Only a whole statement or its very end is rewritten, never text
/// inside it (a string literal may hold the same words).
fn rewrite(text: &str) -> Option<String> {
    if let Some(opened) = open_executable_comments(text) {
        return Some(rewrite_statement(&opened).unwrap_or(opened));
    }
    rewrite_statement(text)
}

/// A name as SHOW statements give it: backticks taken off.
fn bare(name: &str) -> String {
    name.trim_matches('`').to_string()
}

/// A string literal of `text`.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "''"))
}

/// Whether `text`'s first word (after leading whitespace) is `word`, in
/// any case: the cheap test that keeps the rewrites below off the
/// statements they are not for (every statement passes them).
fn first_word_is(text: &str, word: &str) -> bool {
    let text = text.trim_start();
    text.get(..word.len())
        .is_some_and(|start| start.eq_ignore_ascii_case(word))
        && text[word.len()..]
            .chars()
            .next()
            .is_none_or(|next| !(next.is_ascii_alphanumeric() || next == '_'))
}

/// SHOW INDEX and SHOW TABLE STATUS as the queries of information_schema
/// they are (MySQL's columns and names); `None` for other text.
fn show_as_query(trimmed: &str) -> Option<String> {
    if !first_word_is(trimmed, "SHOW") {
        return None;
    }
    let words: Vec<&str> = trimmed.split_whitespace().collect();
    let upper: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
    let upper: Vec<&str> = upper.iter().map(String::as_str).collect();
    let database_of = |rest: &[&str], rest_upper: &[&str]| -> Option<(String, usize)> {
        match rest_upper.first() {
            Some(&"FROM") | Some(&"IN") => Some((literal(&bare(rest.get(1)?)), 2)),
            _ => Some(("DATABASE()".to_string(), 0)),
        }
    };
    match upper.as_slice() {
        ["SHOW", "INDEX" | "INDEXES" | "KEYS", "FROM" | "IN", ..] => {
            let named = bare(words.get(3)?);
            // `FROM db.t` or `FROM t [FROM db]`.
            let (database, table, used) = match named.split_once('.') {
                Some((database, table)) => (literal(&bare(database)), bare(table), 4),
                None => {
                    let (database, more) = database_of(&words[4..], &upper[4..])?;
                    (database, named, 4 + more)
                }
            };
            if used != words.len() {
                return None;
            }
            Some(format!(
                "SELECT `TABLE_NAME` AS `Table`, `NON_UNIQUE` AS `Non_unique`, `INDEX_NAME` AS `Key_name`, \
                 `SEQ_IN_INDEX` AS `Seq_in_index`, `COLUMN_NAME` AS `Column_name`, `COLLATION` AS `Collation`, \
                 `CARDINALITY` AS `Cardinality`, `SUB_PART` AS `Sub_part`, `PACKED` AS `Packed`, \
                 `NULLABLE` AS `Null`, `INDEX_TYPE` AS `Index_type`, `COMMENT` AS `Comment`, \
                 `INDEX_COMMENT` AS `Index_comment`, `IS_VISIBLE` AS `Visible`, `EXPRESSION` AS `Expression` \
                 FROM information_schema.`STATISTICS` WHERE `TABLE_SCHEMA` = {database} AND `TABLE_NAME` = {}",
                literal(&table)
            ))
        }
        ["SHOW", "TABLE", "STATUS", ..] => {
            let (database, used) = database_of(&words[3..], &upper[3..])?;
            let rest = &upper[3 + used..];
            let like = match rest {
                [] => String::new(),
                ["LIKE", ..] => {
                    // The pattern is the quoted rest of the text.
                    let at = trimmed.to_ascii_uppercase().rfind("LIKE")? + 4;
                    format!(" AND `TABLE_NAME` LIKE {}", trimmed[at..].trim())
                }
                _ => return None,
            };
            Some(format!(
                "SELECT `TABLE_NAME` AS `Name`, `ENGINE` AS `Engine`, `VERSION` AS `Version`, \
                 `ROW_FORMAT` AS `Row_format`, `TABLE_ROWS` AS `Rows`, `AVG_ROW_LENGTH` AS `Avg_row_length`, \
                 `DATA_LENGTH` AS `Data_length`, `MAX_DATA_LENGTH` AS `Max_data_length`, \
                 `INDEX_LENGTH` AS `Index_length`, `DATA_FREE` AS `Data_free`, \
                 `AUTO_INCREMENT` AS `Auto_increment`, `CREATE_TIME` AS `Create_time`, \
                 `UPDATE_TIME` AS `Update_time`, `CHECK_TIME` AS `Check_time`, \
                 `TABLE_COLLATION` AS `Collation`, `CHECKSUM` AS `Checksum`, \
                 `CREATE_OPTIONS` AS `Create_options`, `TABLE_COMMENT` AS `Comment` \
                 FROM information_schema.`TABLES` WHERE `TABLE_SCHEMA` = {database}{like}"
            ))
        }
        _ => None,
    }
}

/// A CREATE TABLE's `PARTITION BY KEY (columns) [PARTITIONS n]` clause
/// (or mysqldump's `/*!50100 PARTITION BY KEY (...) */`): the text
/// without it, and the columns. The cluster places rows by those columns
/// alone (NDB's practice; its partitions are the cluster's own, so a
/// count asked for is not kept). `None` when there is none.
pub fn partition_by_key(text: &str) -> Option<(String, Vec<String>)> {
    let opened = open_executable_comments(text);
    let text = opened.as_deref().unwrap_or(text);
    let trimmed = text.trim_end_matches(|c: char| c.is_whitespace() || c == ';');
    if !trimmed
        .trim_start()
        .get(..12)
        .is_some_and(|start| start.eq_ignore_ascii_case("CREATE TABLE"))
    {
        return None;
    }
    let upper = trimmed.to_ascii_uppercase();
    let at = upper.rfind("PARTITION BY")?;
    let clause = upper[at..].split_whitespace().collect::<Vec<_>>().join(" ");
    // LINEAR KEY is KEY to the cluster: its hash is its own anyway.
    let after_key = clause
        .strip_prefix("PARTITION BY KEY")
        .or_else(|| clause.strip_prefix("PARTITION BY LINEAR KEY"))?;
    let open = trimmed[at..].find('(')? + at;
    let close = trimmed[open..].find(')')? + open;
    let columns: Vec<String> = trimmed[open + 1..close]
        .split(',')
        .map(|c| c.trim().trim_matches('`').to_string())
        .filter(|c| !c.is_empty())
        .collect();
    let rest = trimmed[close + 1..].split_whitespace().collect::<Vec<_>>();
    let rest_ok = match rest.as_slice() {
        [] => true,
        [word, count] => word.eq_ignore_ascii_case("PARTITIONS") && count.parse::<u32>().is_ok(),
        _ => false,
    };
    if columns.is_empty() || !rest_ok || !after_key.trim_start().starts_with('(') {
        return None;
    }
    Some((trimmed[..at].to_string(), columns))
}

/// Whether `text` is `ALTER TABLE t DISABLE KEYS` or `... ENABLE KEYS`
/// (executable comments opened): MyISAM's switch for its non-unique
/// indexes, which mysqldump's dumps send around their INSERTs; InnoDB
/// and NDB keep every index current and do nothing, nor does Tessera.
pub fn is_keys_switch(text: &str) -> bool {
    let opened = open_executable_comments(text);
    let text = opened.as_deref().unwrap_or(text);
    if !first_word_is(text, "ALTER") {
        return false;
    }
    let words: Vec<String> = text
        .trim_end_matches(|c: char| c.is_whitespace() || c == ';')
        .split_whitespace()
        .map(str::to_ascii_uppercase)
        .collect();
    matches!(
        words
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice(),
        ["ALTER", "TABLE", _, "DISABLE" | "ENABLE", "KEYS"]
    )
}

/// A SELECT without the hints right after its keyword that change no
/// result (`SQL_NO_CACHE`, which mysqldump sends, `SQL_CACHE`,
/// `SQL_BUFFER_RESULT`, `SQL_SMALL_RESULT`, `SQL_BIG_RESULT`,
/// `HIGH_PRIORITY`); `None` when it has none.
fn without_select_hints(text: &str) -> Option<String> {
    const HINTS: [&str; 6] = [
        "SQL_NO_CACHE",
        "SQL_CACHE",
        "SQL_BUFFER_RESULT",
        "SQL_SMALL_RESULT",
        "SQL_BIG_RESULT",
        "HIGH_PRIORITY",
    ];
    let (keyword, rest) = text.split_once(char::is_whitespace)?;
    if !keyword.eq_ignore_ascii_case("SELECT") {
        return None;
    }
    let rest = rest.trim_start();
    let (word, after) = rest.split_once(char::is_whitespace)?;
    HINTS
        .iter()
        .any(|hint| hint.eq_ignore_ascii_case(word))
        .then(|| format!("SELECT {after}"))
}

/// The whole-statement and tail rewrites of [`rewrite`].
fn rewrite_statement(text: &str) -> Option<String> {
    let trimmed = text.trim_end_matches(|c: char| c.is_whitespace() || c == ';');
    if let Some(query) = show_as_query(trimmed.trim_start()) {
        return Some(query);
    }
    if let Some(plain) = without_select_hints(trimmed.trim_start()) {
        return Some(rewrite_statement(&plain).unwrap_or(plain));
    }
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
    fn a_first_word_is_a_whole_word_in_any_case() {
        assert!(first_word_is("  show index from t", "SHOW"));
        assert!(first_word_is("SHOW", "SHOW"));
        assert!(first_word_is("Alter\ttable t", "ALTER"));
        assert!(!first_word_is("SHOWS", "SHOW"));
        assert!(!first_word_is("show_x", "SHOW"));
        assert!(!first_word_is("SELECT 1", "SHOW"));
        assert!(!first_word_is("SH", "SHOW"));
        // Not a char boundary: no panic, no match.
        assert!(!first_word_is("séle", "SEL"));
        assert!(is_keys_switch("/*!40000 ALTER TABLE `t` DISABLE KEYS */"));
        assert!(!is_keys_switch("SELECT 'ALTER TABLE t DISABLE KEYS'"));
    }

    #[test]
    fn executable_comments_run_up_to_our_version() {
        let open = |text| {
            open_executable_comments(text)
                .map(|t| t.split_whitespace().collect::<Vec<_>>().join(" "))
        };
        assert_eq!(
            open("/*!40101 SET @x = 1 */").as_deref(),
            Some("SET @x = 1")
        );
        assert_eq!(
            open("SELECT /*!40001 SQL_NO_CACHE */ * FROM t").as_deref(),
            Some("SELECT SQL_NO_CACHE * FROM t")
        );
        assert_eq!(open("/*!90000 SET @x = 1 */").as_deref(), Some(""));
        assert_eq!(open("SELECT '/*!40101 not a comment */'"), None);
        assert_eq!(open("SELECT 1"), None);
        assert_eq!(parse("/*!40101 SET @x = 1 */").unwrap().len(), 1);
    }

    /// `SELECT 1 + 1 + ... + 1` of `terms` operators, parsed, compiled
    /// and evaluated on a thread with a statement's stack.
    fn chain_on_a_statement_stack(terms: usize) -> crate::value::Value {
        let text = format!("SELECT {}1", "1 + ".repeat(terms));
        std::thread::Builder::new()
            .stack_size(STATEMENT_STACK_BYTES)
            .spawn(move || {
                let dialect = TesseraDialect::new();
                let statements = Parser::parse_sql(&dialect, &text).unwrap();
                let sqlparser::ast::Statement::Query(query) = &statements[0] else {
                    panic!("a query");
                };
                let sqlparser::ast::SetExpr::Select(select) = query.body.as_ref() else {
                    panic!("a select");
                };
                let sqlparser::ast::SelectItem::UnnamedExpr(expr) = &select.projection[0] else {
                    panic!("an expression");
                };
                let mut compiler = crate::expr::Compiler::new(None, None);
                let compiled = compiler.compile(expr).unwrap();
                struct NoSession;
                impl crate::expr::Environment for NoSession {
                    fn session_value(
                        &self,
                        _: &crate::expr::SessionValue,
                    ) -> SqlResult<crate::value::Value> {
                        Ok(crate::value::Value::Null)
                    }
                }
                let inputs = crate::expr::Inputs {
                    row: &[],
                    aggregates: &[],
                    params: &[],
                };
                compiled.eval(&inputs, &NoSession).unwrap()
            })
            .unwrap()
            .join()
            .unwrap()
    }

    #[test]
    fn the_longest_operator_chain_allowed_runs_on_a_statement_stack() {
        let chain = |terms: usize| format!("SELECT {}1", "1 + ".repeat(terms));
        assert_eq!(parse(&chain(MAX_OPERATORS + 1)).unwrap_err().code, 1064);
        assert!(parse(&chain(MAX_OPERATORS - 10)).is_ok());
        assert_eq!(
            chain_on_a_statement_stack(MAX_OPERATORS - 10),
            crate::value::Value::Int(MAX_OPERATORS as i64 - 9)
        );
        // A view's operators (at most a quarter of a statement's) can
        // nest at the bottom of the statement's own chain.
        let terms = MAX_OPERATORS + crate::views::MAX_VIEW_OPERATORS;
        assert_eq!(
            chain_on_a_statement_stack(terms),
            crate::value::Value::Int(terms as i64 + 1)
        );
    }

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
        // A union's SELECTs count as a chain's operators.
        let union = |parts: usize| vec!["SELECT 1"; parts].join(" UNION ALL ");
        assert!(parse(&union(1_000)).is_ok());
        assert_eq!(parse(&union(MAX_OPERATORS + 2)).unwrap_err().code, 1064);
        let intersect = |parts: usize| vec!["SELECT 1"; parts].join(" INTERSECT ");
        assert!(parse(&intersect(1_000)).is_ok());
        assert_eq!(parse(&intersect(MAX_OPERATORS + 2)).unwrap_err().code, 1064);
        let except = vec!["SELECT 1"; MAX_OPERATORS + 2].join(" EXCEPT ALL ");
        assert_eq!(parse(&except).unwrap_err().code, 1064);
    }
}

#[cfg(test)]
mod fuzz {
    use super::*;
    use crate::expr::{Compiler, Environment, Inputs, SessionValue};
    use crate::value::Value;
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
            let dialect = TesseraDialect::new();
            let expr = quietly_caught(|| {
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
