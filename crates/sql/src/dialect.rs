//! The SQL dialect statements are parsed in: sqlparser's MySQL dialect,
//! with `DIV` and `MOD` as the operators MySQL has them, of `*`'s
//! precedence and left to right. The MySQL dialect reads everything
//! after `DIV` as its divisor (`7 DIV 2 + 1` as `7 DIV 3`, and `WHERE id
//! DIV 10 = 5` as a division by a comparison) and has no `MOD` operator
//! at all.
//!
//! The wrapper tells the parser it is the MySQL dialect (`dialect()`),
//! so every MySQL rule the parser applies by dialect still holds, and
//! passes each of the MySQL dialect's own choices through.

use sqlparser::ast::{BinaryOperator, Expr, Statement};
use sqlparser::dialect::{Dialect, MySqlDialect, Precedence};
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::Token;
use std::any::TypeId;

/// MySQL as Tessera parses it.
#[derive(Debug)]
pub struct TesseraDialect {
    mysql: MySqlDialect,
}

impl TesseraDialect {
    /// The dialect.
    pub const fn new() -> TesseraDialect {
        TesseraDialect {
            mysql: MySqlDialect {},
        }
    }
}

impl Default for TesseraDialect {
    fn default() -> Self {
        TesseraDialect::new()
    }
}

impl Dialect for TesseraDialect {
    fn dialect(&self) -> TypeId {
        TypeId::of::<MySqlDialect>()
    }

    fn parse_infix(
        &self,
        parser: &mut Parser,
        expr: &Expr,
        _precedence: u8,
    ) -> Option<Result<Expr, ParserError>> {
        let op = if parser.parse_keyword(Keyword::DIV) {
            BinaryOperator::MyIntegerDivide
        } else if parser.parse_keyword(Keyword::MOD) {
            BinaryOperator::Modulo
        } else {
            return None;
        };
        // The divisor binds as tightly as `*`'s right operand does.
        let right = match parser.parse_subexpr(self.prec_value(Precedence::MulDivModOp)) {
            Ok(right) => right,
            Err(error) => return Some(Err(error)),
        };
        Some(Ok(Expr::BinaryOp {
            left: Box::new(expr.clone()),
            op,
            right: Box::new(right),
        }))
    }

    fn get_next_precedence(&self, parser: &Parser) -> Option<Result<u8, ParserError>> {
        match &parser.peek_token_ref().token {
            Token::Word(word) if word.keyword == Keyword::MOD => {
                Some(Ok(self.prec_value(Precedence::MulDivModOp)))
            }
            // `j->'$.a' = 1` is `(j->'$.a') = 1`: MySQL's JSON operators
            // bind to their column (the parser ranks them below `=`).
            Token::Arrow | Token::LongArrow => Some(Ok(self.prec_value(Precedence::DoubleColon))),
            _ => self.mysql.get_next_precedence(parser),
        }
    }

    // The MySQL dialect's own choices, passed through.

    fn is_identifier_start(&self, ch: char) -> bool {
        self.mysql.is_identifier_start(ch)
    }

    fn is_identifier_part(&self, ch: char) -> bool {
        self.mysql.is_identifier_part(ch)
    }

    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        self.mysql.is_delimited_identifier_start(ch)
    }

    fn identifier_quote_style(&self, identifier: &str) -> Option<char> {
        self.mysql.identifier_quote_style(identifier)
    }

    fn supports_string_literal_backslash_escape(&self) -> bool {
        self.mysql.supports_string_literal_backslash_escape()
    }

    fn supports_string_literal_concatenation(&self) -> bool {
        self.mysql.supports_string_literal_concatenation()
    }

    fn ignores_wildcard_escapes(&self) -> bool {
        self.mysql.ignores_wildcard_escapes()
    }

    fn supports_numeric_prefix(&self) -> bool {
        self.mysql.supports_numeric_prefix()
    }

    fn parse_statement(&self, parser: &mut Parser) -> Option<Result<Statement, ParserError>> {
        if parser.parse_keywords(&[Keyword::ALTER, Keyword::TABLE]) {
            return Some(alter_table(parser));
        }
        self.mysql.parse_statement(parser)
    }

    fn parse_prefix(&self, parser: &mut Parser) -> Option<Result<Expr, ParserError>> {
        self.mysql.parse_prefix(parser)
    }

    fn require_interval_qualifier(&self) -> bool {
        self.mysql.require_interval_qualifier()
    }

    fn supports_limit_comma(&self) -> bool {
        self.mysql.supports_limit_comma()
    }

    fn supports_create_table_select(&self) -> bool {
        self.mysql.supports_create_table_select()
    }

    fn supports_insert_set(&self) -> bool {
        self.mysql.supports_insert_set()
    }

    fn supports_user_host_grantee(&self) -> bool {
        self.mysql.supports_user_host_grantee()
    }

    fn is_table_factor_alias(
        &self,
        explicit: bool,
        keyword: &Keyword,
        parser: &mut Parser,
    ) -> bool {
        self.mysql.is_table_factor_alias(explicit, keyword, parser)
    }

    fn supports_table_hints(&self) -> bool {
        self.mysql.supports_table_hints()
    }

    fn requires_single_line_comment_whitespace(&self) -> bool {
        self.mysql.requires_single_line_comment_whitespace()
    }

    fn supports_match_against(&self) -> bool {
        self.mysql.supports_match_against()
    }

    fn supports_set_names(&self) -> bool {
        self.mysql.supports_set_names()
    }

    fn supports_comma_separated_set_assignments(&self) -> bool {
        self.mysql.supports_comma_separated_set_assignments()
    }

    fn supports_data_type_signed_suffix(&self) -> bool {
        self.mysql.supports_data_type_signed_suffix()
    }

    fn supports_cross_join_constraint(&self) -> bool {
        self.mysql.supports_cross_join_constraint()
    }
}

/// ALTER TABLE after its two words, with what sqlparser's MySQL dialect
/// does not read: `DROP KEY name` (DROP INDEX's other spelling), and the
/// table options (`ENGINE = e`, `[DEFAULT] CHARSET`/`CHARACTER SET`,
/// `COLLATE`, `COMMENT`, `ROW_FORMAT`, `CONVERT TO CHARACTER SET c
/// [COLLATE k]`), each kept as a one-option `SetOptionsParens` (the only
/// operation that carries a key and a value) for the SQL node to accept
/// or refuse.
fn alter_table(parser: &mut Parser) -> Result<Statement, ParserError> {
    use sqlparser::ast::{AlterTableOperation, Ident, SqlOption};
    let if_exists = parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
    let name = parser.parse_object_name(false)?;
    let option = |key: &str, value: Expr| AlterTableOperation::SetOptionsParens {
        options: vec![SqlOption::KeyValue {
            key: Ident::new(key),
            value,
        }],
    };
    let operations = parser.parse_comma_separated(|parser| {
        if parser.parse_keywords(&[Keyword::DROP, Keyword::KEY]) {
            return Ok(AlterTableOperation::DropIndex {
                name: parser.parse_identifier()?,
            });
        }
        if parser.parse_keywords(&[Keyword::CONVERT, Keyword::TO]) {
            if !parser.parse_keywords(&[Keyword::CHARACTER, Keyword::SET]) {
                parser.expect_keyword_is(Keyword::CHARSET)?;
            }
            let charset = parser.parse_expr()?;
            if parser.parse_keyword(Keyword::COLLATE) {
                parser.parse_expr()?;
            }
            return Ok(option("CHARACTER SET", charset));
        }
        let key = if parser.parse_keywords(&[Keyword::CHARACTER, Keyword::SET])
            || parser.parse_keywords(&[Keyword::DEFAULT, Keyword::CHARACTER, Keyword::SET])
            || parser.parse_keywords(&[Keyword::DEFAULT, Keyword::CHARSET])
        {
            "CHARACTER SET"
        } else if parser.parse_keywords(&[Keyword::DEFAULT, Keyword::COLLATE]) {
            "COLLATE"
        } else if let Some(keyword) = parser.parse_one_of_keywords(&[
            Keyword::ENGINE,
            Keyword::CHARSET,
            Keyword::COLLATE,
            Keyword::COMMENT,
            Keyword::ROW_FORMAT,
        ]) {
            match keyword {
                Keyword::ENGINE => "ENGINE",
                Keyword::CHARSET => "CHARACTER SET",
                Keyword::COLLATE => "COLLATE",
                Keyword::COMMENT => "COMMENT",
                _ => "ROW_FORMAT",
            }
        } else {
            return parser.parse_alter_table_operation();
        };
        let _ = parser.consume_token(&Token::Eq);
        Ok(option(key, parser.parse_expr()?))
    })?;
    Ok(Statement::AlterTable {
        name,
        if_exists,
        only: false,
        operations,
        location: None,
        on_cluster: None,
        iceberg: false,
        end_token: sqlparser::ast::helpers::attached_token::AttachedToken::empty(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expression(sql: &str) -> String {
        let statements =
            Parser::parse_sql(&TesseraDialect::new(), &format!("SELECT {sql}")).unwrap();
        let Statement::Query(query) = &statements[0] else {
            panic!("a query")
        };
        let sqlparser::ast::SetExpr::Select(select) = query.body.as_ref() else {
            panic!("a select")
        };
        format!("{:?}", select.projection[0])
    }

    #[test]
    fn div_and_mod_bind_as_multiplication_does() {
        // `7 DIV 2 + 1` is `(7 DIV 2) + 1`: the sum is the outer operator.
        let sum = expression("7 DIV 2 + 1");
        assert!(sum.contains("op: Plus") && sum.find("MyIntegerDivide") < sum.find("op: Plus"));
        // Left to right among `*`, `DIV`, `MOD`: `8 DIV 2 * 3` is `(8 DIV 2) * 3`.
        let product = expression("8 DIV 2 * 3");
        assert!(product.starts_with("UnnamedExpr(BinaryOp { left: BinaryOp"));
        let modulo = expression("7 MOD 4 = 3");
        assert!(modulo.contains("op: Modulo") && modulo.contains("op: Eq"));
        assert!(modulo.starts_with("UnnamedExpr(BinaryOp { left: BinaryOp"));
        // The function MOD is still a function.
        assert!(expression("MOD(7, 4)").contains("Function"));
        // A missing divisor is an error, not a panic.
        assert!(Parser::parse_sql(&TesseraDialect::new(), "SELECT 1 DIV").is_err());
    }
}
