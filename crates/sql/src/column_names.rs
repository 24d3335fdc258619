//! The names MySQL gives a query's unaliased select-list expressions:
//! their text as the client wrote it (`1+1`, `CONCAT('a',name)`,
//! `upper( name )`), comments left out; a string literal's value (`SELECT
//! 'ok'` is a column `ok`); at most 255 characters. A client reading
//! rows by column name (a dictionary cursor, an ORM's raw query) finds
//! them as it would on MySQL (docs/design/0027-sql-node.md, "Column
//! names").
//!
//! The parser keeps no text, so the names are read from the statement's
//! tokens, right after parsing, and written into its tree as aliases.
//! Only the first SELECT of each query statement (or CREATE VIEW's
//! query) names the columns;
//! when its tokens cannot be matched to its items one for one the items
//! keep the parser's rendering.

use crate::dialect::TesseraDialect;
use sqlparser::ast::{self, Statement};
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Location, Token, TokenWithSpan, Tokenizer, Whitespace};
use std::ops::Range;

/// The longest name given (MariaDB's; longer text is cut).
const MOST_CHARACTERS: usize = 255;

/// Gives each unaliased expression of the first SELECT of each query in
/// `statements` (parsed from `source`) its MySQL name as an alias.
pub fn name_select_items(source: &str, statements: &mut [Statement]) {
    if !statements.iter().any(needs_names) {
        return;
    }
    let Ok(tokens) = Tokenizer::new(&TesseraDialect::new(), source).tokenize_with_location() else {
        return;
    };
    let offsets = byte_offsets(source, &tokens);
    // The tokens of each statement: split at the semicolons outside
    // parentheses, empty statements left out as the parser leaves them.
    let mut segments: Vec<Range<usize>> = Vec::new();
    let (mut depth, mut start) = (0i64, 0);
    for (at, token) in tokens.iter().enumerate() {
        match token.token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            Token::SemiColon if depth == 0 => {
                segments.push(start..at);
                start = at + 1;
            }
            _ => {}
        }
    }
    segments.push(start..tokens.len());
    segments.retain(|segment| {
        tokens[segment.clone()]
            .iter()
            .any(|t| !matches!(t.token, Token::Whitespace(_)))
    });
    if segments.len() != statements.len() {
        return;
    }
    for (statement, segment) in statements.iter_mut().zip(segments) {
        if !needs_names(statement) {
            continue;
        }
        let Some(query) = query_of(statement) else {
            continue;
        };
        let ast::SetExpr::Select(select) = first_select(&mut query.body) else {
            continue;
        };
        let Some(items) = select_items(&tokens, segment) else {
            continue;
        };
        if items.len() != select.projection.len() {
            continue;
        }
        for (item, range) in select.projection.iter_mut().zip(items) {
            let ast::SelectItem::UnnamedExpr(expr) = item else {
                continue;
            };
            let Some(name) = name_of(expr, &tokens[range.clone()], &offsets[range], source) else {
                continue;
            };
            let expr = std::mem::replace(expr, ast::Expr::Value(ast::Value::Null.into()));
            *item = ast::SelectItem::ExprWithAlias {
                expr,
                alias: ast::Ident::with_quote('`', name),
            };
        }
    }
}

/// Whether `statement` is a query whose first SELECT has an unaliased
/// expression that is not a column (a column is named by itself).
fn needs_names(statement: &Statement) -> bool {
    let query = match statement {
        Statement::Query(query) | Statement::CreateView { query, .. } => query,
        Statement::CreateTable(ast::CreateTable {
            query: Some(query), ..
        }) => query,
        _ => return false,
    };
    let mut body = query.body.as_ref();
    while let ast::SetExpr::SetOperation { left, .. } = body {
        body = left;
    }
    let ast::SetExpr::Select(select) = body else {
        return false;
    };
    select
        .projection
        .iter()
        .any(|item| matches!(item, ast::SelectItem::UnnamedExpr(expr) if !is_column(expr)))
}

/// The query of a query statement, or of CREATE VIEW or CREATE TABLE
/// ... SELECT (whose columns are named as its query's would be).
fn query_of(statement: &mut Statement) -> Option<&mut ast::Query> {
    match statement {
        Statement::Query(query) | Statement::CreateView { query, .. } => Some(query),
        Statement::CreateTable(ast::CreateTable {
            query: Some(query), ..
        }) => Some(query),
        _ => None,
    }
}

/// A column, written bare, qualified or in parentheses.
fn is_column(expr: &ast::Expr) -> bool {
    match expr {
        ast::Expr::Identifier(_) | ast::Expr::CompoundIdentifier(_) => true,
        ast::Expr::Nested(inner) => is_column(inner),
        _ => false,
    }
}

/// The leftmost SELECT of a set operation's tree.
fn first_select(body: &mut ast::SetExpr) -> &mut ast::SetExpr {
    match body {
        ast::SetExpr::SetOperation { left, .. } => first_select(left),
        other => other,
    }
}

/// The token ranges of each item of the statement's first SELECT (the
/// statement's tokens `segment`) at the top level (past a WITH's
/// parenthesized queries), or `None` when there is no such SELECT (a
/// parenthesized first one).
fn select_items(tokens: &[TokenWithSpan], segment: Range<usize>) -> Option<Vec<Range<usize>>> {
    let mut depth = 0i64;
    let mut at = segment.start
        + tokens[segment.clone()].iter().position(|token| {
            match &token.token {
                Token::LParen => depth += 1,
                Token::RParen => depth -= 1,
                _ => {}
            }
            depth == 0 && keyword(token) == Some(Keyword::SELECT)
        })?
        + 1;
    // The SELECT's modifiers.
    while at < segment.end {
        let token = &tokens[at];
        let modifier = match &token.token {
            Token::Whitespace(_) => true,
            Token::Word(word) if word.quote_style.is_none() => [
                "ALL",
                "DISTINCT",
                "DISTINCTROW",
                "HIGH_PRIORITY",
                "STRAIGHT_JOIN",
                "SQL_SMALL_RESULT",
                "SQL_BIG_RESULT",
                "SQL_BUFFER_RESULT",
                "SQL_NO_CACHE",
                "SQL_CALC_FOUND_ROWS",
            ]
            .iter()
            .any(|m| word.value.eq_ignore_ascii_case(m)),
            _ => false,
        };
        if !modifier {
            break;
        }
        at += 1;
    }
    let mut items = Vec::new();
    let (mut depth, mut start) = (0i64, at);
    while at < segment.end {
        let token = &tokens[at];
        match &token.token {
            Token::LParen => depth += 1,
            Token::RParen if depth == 0 => break,
            Token::RParen => depth -= 1,
            Token::Comma if depth == 0 => {
                items.push(start..at);
                start = at + 1;
            }
            _ if depth == 0 && ends_select_list(token) => break,
            _ => {}
        }
        at += 1;
    }
    items.push(start..at);
    Some(items)
}

/// A word that ends a select list at its level.
fn ends_select_list(token: &TokenWithSpan) -> bool {
    matches!(
        keyword(token),
        Some(
            Keyword::FROM
                | Keyword::WHERE
                | Keyword::GROUP
                | Keyword::HAVING
                | Keyword::ORDER
                | Keyword::LIMIT
                | Keyword::WINDOW
                | Keyword::INTO
                | Keyword::FOR
                | Keyword::LOCK
                | Keyword::UNION
                | Keyword::INTERSECT
                | Keyword::EXCEPT
                | Keyword::MINUS
        )
    )
}

/// An unquoted word's keyword.
fn keyword(token: &TokenWithSpan) -> Option<Keyword> {
    match &token.token {
        Token::Word(word) if word.quote_style.is_none() => Some(word.keyword),
        _ => None,
    }
}

/// The name MySQL gives `expr`, written as `tokens`: a string literal's
/// value, else the text as written without comments, trimmed and cut to
/// [`MOST_CHARACTERS`]. `None` for a column, named by itself.
fn name_of(
    expr: &ast::Expr,
    tokens: &[TokenWithSpan],
    offsets: &[Range<usize>],
    source: &str,
) -> Option<String> {
    if is_column(expr) {
        return None;
    }
    let string = |expr: &ast::Expr| match expr {
        ast::Expr::Value(value) => match &value.value {
            ast::Value::SingleQuotedString(text)
            | ast::Value::DoubleQuotedString(text)
            | ast::Value::NationalStringLiteral(text) => Some(text.clone()),
            _ => None,
        },
        _ => None,
    };
    // A string literal, `_utf8mb4'x'` too: its value.
    let name = match expr {
        ast::Expr::Prefixed { value, .. } => string(value),
        other => string(other),
    };
    let name = match name {
        Some(name) => name,
        None => {
            let mut text = String::new();
            for (token, range) in tokens.iter().zip(offsets) {
                if let Token::Whitespace(
                    Whitespace::SingleLineComment { .. } | Whitespace::MultiLineComment(_),
                ) = token.token
                {
                    continue;
                }
                text.push_str(source.get(range.clone())?);
            }
            text.trim().to_string()
        }
    };
    if name.is_empty() && !matches!(expr, ast::Expr::Value(_)) {
        return None;
    }
    Some(name.chars().take(MOST_CHARACTERS).collect())
}

/// Each token's byte range in `source`, from the tokenizer's lines and
/// columns (counted in characters), worked out in one pass.
fn byte_offsets(source: &str, tokens: &[TokenWithSpan]) -> Vec<Range<usize>> {
    let mut ranges = Vec::with_capacity(tokens.len());
    let mut chars = source.char_indices();
    let mut here = Location { line: 1, column: 1 };
    let mut byte = 0;
    let mut advance_to = |target: Location, here: &mut Location, byte: &mut usize| {
        while (here.line, here.column) < (target.line, target.column) {
            let Some((at, c)) = chars.next() else {
                break;
            };
            *byte = at + c.len_utf8();
            if c == '\n' {
                here.line += 1;
                here.column = 1;
            } else {
                here.column += 1;
            }
        }
    };
    for token in tokens {
        advance_to(token.span.start, &mut here, &mut byte);
        let start = byte;
        advance_to(token.span.end, &mut here, &mut byte);
        ranges.push(start..byte);
    }
    ranges
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(sql: &str) -> Vec<String> {
        let mut statements =
            sqlparser::parser::Parser::parse_sql(&TesseraDialect::new(), sql).unwrap();
        name_select_items(sql, &mut statements);
        let Statement::Query(query) = &statements[0] else {
            panic!("a query")
        };
        let ast::SetExpr::Select(select) = first_select(&mut query.body.clone()).clone() else {
            panic!("a select")
        };
        select
            .projection
            .iter()
            .map(|item| match item {
                ast::SelectItem::ExprWithAlias { alias, .. } => alias.value.clone(),
                other => format!("({other})"),
            })
            .collect()
    }

    #[test]
    fn unaliased_expressions_are_named_by_their_text() {
        assert_eq!(
            names(
                "SELECT count(*), 1+1, 'lit', CONCAT('a',name), (id), upper( name ) , n.id FROM n"
            ),
            [
                "count(*)",
                "1+1",
                "lit",
                "CONCAT('a',name)",
                "((id))",
                "upper( name )",
                "(n.id)"
            ]
        );
        assert_eq!(
            names("SELECT DISTINCT id /* c */ + 1, 'it''s', x AS y, -3 FROM t WHERE a = 1"),
            ["id  + 1", "it's", "y", "-3"]
        );
        // Past a WITH, in a union's first SELECT, over lines, with é.
        assert_eq!(
            names(
                "WITH w AS (SELECT 1 AS a, 2 AS b) SELECT a+b, 'é'||'x' FROM w UNION SELECT 1, 2"
            ),
            ["a+b", "'é'||'x'"]
        );
        assert_eq!(
            names("SELECT\n  é\n   +   2 , 1 -- c\n FROM t"),
            ["é\n   +   2", "1"]
        );
        // Each statement of several its own.
        let sql = "SELECT 1+1; SELECT 2+2 FROM t";
        let mut statements =
            sqlparser::parser::Parser::parse_sql(&TesseraDialect::new(), sql).unwrap();
        name_select_items(sql, &mut statements);
        assert!(statements[1].to_string().contains("AS `2+2`"));
        // A long one is cut.
        let long = format!("SELECT {}", vec!["1"; 200].join("+"));
        assert_eq!(names(&long)[0].chars().count(), MOST_CHARACTERS);
    }
}
