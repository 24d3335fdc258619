//! Compiling the parser's expressions into [`Expr`]: names resolved
//! against the statement's tables (`Scope`, a join's tables end to end,
//! and the enclosing query's for a correlated subquery), `?` placeholders
//! numbered by their place in the text, aggregates and subqueries given
//! slots, functions and their arguments checked.

mod windows;

use super::rows;
use super::{
    fraction_digits, one_column, parameter_order_of, Aggregate, AggregateFunction, Expr, Function,
    GroupConcat, SessionValue, SubqueryTest, WindowFunction,
};
use crate::catalog::{SqlColumn, SqlTable};
use crate::error::{codes, SqlError, SqlResult};
use crate::functions::math::MathFunction;
use crate::functions::patterns::RegexpFunction;
use crate::functions::strings::DigestKind;
use crate::json::functions::JsonFunction;
use crate::value::{Arithmetic, Value};
use client::CompareOp;
use sqlparser::ast;

/// A table a compiler resolves column names in: its columns are the
/// row's from `offset` on (a join's row is its tables' rows end to end).
#[derive(Clone)]
pub struct Scope<'a> {
    /// The table.
    pub table: &'a SqlTable,
    /// The names it goes by: its name, or its alias when it has one.
    pub names: Vec<String>,
    /// Where its columns start in the row.
    pub offset: usize,
    /// Its columns are named only with its name before them (an
    /// INSERT's row alias without column aliases, whose columns have the
    /// table's names: unqualified, those are the existing row's).
    pub qualified_only: bool,
}

impl<'a> Scope<'a> {
    /// `table` at `offset`, known by `alias` if given, else its name.
    pub fn new(table: &'a SqlTable, alias: Option<&str>, offset: usize) -> Scope<'a> {
        let names = match alias {
            Some(alias) => vec![alias.to_string()],
            None => vec![table.name.clone()],
        };
        Scope {
            table,
            names,
            offset,
            qualified_only: false,
        }
    }
}

/// The scope, and its column, that row index `index` names in `scopes`
/// (a join's row is its tables' rows end to end).
pub fn column_at<'s, 'a>(
    scopes: &'s [Scope<'a>],
    index: usize,
) -> Option<(&'s Scope<'a>, &'a SqlColumn)> {
    scopes.iter().find_map(|scope| {
        let column = scope.table.columns.get(index.checked_sub(scope.offset)?)?;
        Some((scope, column))
    })
}

/// A compiler of expressions over the tables of a statement (or none).
pub struct Compiler<'a> {
    scopes: Vec<Scope<'a>>,
    /// The select list's aliases and their expressions, which HAVING and
    /// ORDER BY may name where no column has the name.
    aliases: Vec<(String, Expr)>,
    /// Columns a join's USING made one: unqualified, they name the
    /// first table's, not an ambiguous pair.
    merged: Vec<String>,
    /// In ON DUPLICATE KEY UPDATE, where `VALUES(c)` (the row that was
    /// to be inserted) starts in the row.
    values_offset: Option<usize>,
    /// In a subquery, the enclosing query's tables: a name none of its
    /// own has is looked for there, and is an `Outer` column.
    outer: Vec<Scope<'a>>,
    /// Where subqueries are compiled from (none: subqueries refused).
    catalog: Option<(&'a crate::catalog::Catalog, Option<&'a str>)>,
    /// The subqueries met, by slot.
    subqueries: Vec<crate::plan::SubqueryPlan>,
    /// The common table expressions its subqueries may name.
    ctes: crate::plan::Ctes,
    /// The placeholders met, by where they stand: (line, column).
    placeholders: Vec<(u64, u64)>,
    /// Aggregates are allowed and collected here.
    aggregates: Option<Vec<Aggregate>>,
    /// The window functions met, by slot (allowed where aggregates are).
    windows: Vec<WindowFunction>,
    /// The query's WINDOW clause.
    named_windows: Vec<ast::NamedWindowDefinition>,
    /// Where in the statement the compiler is, for messages.
    pub place: &'static str,
}

impl<'a> Compiler<'a> {
    /// A compiler over `table` (known as `alias` too).
    pub fn new(table: Option<&'a SqlTable>, alias: Option<&str>) -> Compiler<'a> {
        let scopes = table
            .map(|table| {
                let mut scope = Scope::new(table, None, 0);
                scope.names.extend(alias.map(str::to_string));
                scope
            })
            .into_iter()
            .collect();
        Compiler::over(scopes)
    }

    /// A compiler over several tables (a join's).
    pub fn over(scopes: Vec<Scope<'a>>) -> Compiler<'a> {
        Compiler {
            scopes,
            aliases: Vec::new(),
            merged: Vec::new(),
            values_offset: None,
            outer: Vec::new(),
            catalog: None,
            subqueries: Vec::new(),
            ctes: crate::plan::Ctes::default(),
            placeholders: Vec::new(),
            aggregates: None,
            windows: Vec::new(),
            named_windows: Vec::new(),
            place: "field list",
        }
    }

    /// The tables it resolves names in.
    pub fn scopes(&self) -> &[Scope<'a>] {
        &self.scopes
    }

    /// The enclosing query's scopes (a subquery's `Outer` columns).
    pub fn outer_scopes(&self) -> &[Scope<'a>] {
        &self.outer
    }

    /// The enclosing query's tables (for a subquery).
    pub fn set_outer(&mut self, outer: Vec<Scope<'a>>) {
        self.outer = outer;
    }

    /// Lets the compiler compile subqueries, over `catalog` in `database`.
    pub fn set_subquery_context(
        &mut self,
        catalog: &'a crate::catalog::Catalog,
        database: Option<&'a str>,
    ) {
        self.catalog = Some((catalog, database));
    }

    /// Lets the subqueries compiled here name `ctes` (the WITHs around).
    pub fn set_ctes(&mut self, ctes: crate::plan::Ctes) {
        self.ctes = ctes;
    }

    /// The subqueries met so far.
    pub fn subqueries(&self) -> &[crate::plan::SubqueryPlan] {
        &self.subqueries
    }

    /// Takes the subqueries met.
    pub fn take_subqueries(&mut self) -> Vec<crate::plan::SubqueryPlan> {
        std::mem::take(&mut self.subqueries)
    }

    /// Continues the numbering of `placeholders` (an enclosing
    /// statement's); give them back with `give_placeholders_to`.
    pub fn take_placeholders_from(&mut self, placeholders: &mut Vec<(u64, u64)>) {
        self.placeholders = std::mem::take(placeholders);
    }

    /// Hands the placeholders met back to the enclosing statement.
    pub fn give_placeholders_to(&mut self, placeholders: &mut Vec<(u64, u64)>) {
        *placeholders = std::mem::take(&mut self.placeholders);
    }

    /// Takes `plan` (a derived table's: it reads no enclosing row) as the
    /// next subquery slot, and returns the slot.
    pub fn add_subquery(&mut self, plan: crate::plan::SelectPlan) -> usize {
        self.subqueries.push(crate::plan::SubqueryPlan {
            plan: Box::new(plan),
            correlated: false,
            stored: false,
        });
        self.subqueries.len() - 1
    }

    /// An aggregate's argument and, for GROUP_CONCAT, its ORDER BY and
    /// SEPARATOR; `GROUP_CONCAT(a, b)` concatenates its arguments per row.
    fn aggregate_arguments(
        &mut self,
        aggregate: AggregateFunction,
        name: &str,
        args: &[&ast::Expr],
        clauses: &[ast::FunctionArgumentClause],
    ) -> SqlResult<(Option<Expr>, Option<Box<GroupConcat>>)> {
        let json = |function, arity: usize, compiler: &mut Self| -> SqlResult<_> {
            if args.len() != arity {
                return Err(wrong_arguments(name));
            }
            let compiled = args
                .iter()
                .map(|a| compiler.compile(a))
                .collect::<SqlResult<_>>()?;
            let booleans = json_booleans(args);
            Ok((
                Some(crate::json::compile::call(
                    function, compiled, &booleans, compiler,
                )),
                None,
            ))
        };
        match aggregate {
            AggregateFunction::JsonArrayAgg => return json(JsonFunction::Array, 1, self),
            AggregateFunction::JsonObjectAgg => return json(JsonFunction::Object, 2, self),
            _ => {}
        }
        if aggregate != AggregateFunction::GroupConcat {
            return match (aggregate, args) {
                (AggregateFunction::CountRows, []) => Ok((None, None)),
                (_, [argument]) => Ok((Some(self.compile(argument)?), None)),
                _ => Err(wrong_arguments(name)),
            };
        }
        let compiled: Vec<Expr> = args
            .iter()
            .map(|a| self.compile(a))
            .collect::<SqlResult<_>>()?;
        let argument = match compiled.len() {
            0 => return Err(wrong_arguments(name)),
            1 => compiled.into_iter().next().expect("one"),
            _ => Expr::Function(Function::Concat, compiled),
        };
        let mut concat = GroupConcat {
            order_by: Vec::new(),
            separator: b",".to_vec(),
        };
        for clause in clauses {
            match clause {
                ast::FunctionArgumentClause::OrderBy(items) => {
                    for item in items {
                        let descending = item.options.asc == Some(false);
                        concat
                            .order_by
                            .push((self.compile(&item.expr)?, descending));
                    }
                }
                ast::FunctionArgumentClause::Separator(separator) => {
                    let (ast::Value::SingleQuotedString(text)
                    | ast::Value::DoubleQuotedString(text)) = separator
                    else {
                        return Err(SqlError::unsupported(format!("SEPARATOR {separator}")));
                    };
                    concat.separator = text.as_bytes().to_vec();
                }
                other => return Err(SqlError::unsupported(format!("GROUP_CONCAT's {other}"))),
            }
        }
        Ok((Some(argument), Some(Box::new(concat))))
    }

    /// Compiles a subquery in a slot of its own: `Ok((slot, correlated,
    /// columns))`.
    fn subquery(&mut self, query: &ast::Query) -> SqlResult<(usize, bool, usize)> {
        let Some((catalog, database)) = self.catalog else {
            return Err(SqlError::unsupported("a subquery here"));
        };
        // One level of correlation: the enclosing query's own tables.
        let outer = self.scopes.clone();
        let mut placeholders = std::mem::take(&mut self.placeholders);
        let compiled = crate::plan::select_plan(
            query,
            catalog,
            database,
            &outer,
            &mut placeholders,
            &self.ctes,
        );
        self.placeholders = placeholders;
        let plan = compiled?;
        if plan.lock != client::LockMode::CommittedRead {
            return Err(SqlError::unsupported("a locking read in a subquery"));
        }
        let correlated = crate::plan::reads_outer_anywhere(&plan);
        let columns = plan.output.len();
        self.subqueries.push(crate::plan::SubqueryPlan {
            plan: Box::new(plan),
            correlated,
            stored: false,
        });
        Ok((self.subqueries.len() - 1, correlated, columns))
    }

    /// Resolves names in `scopes` from now on.
    pub fn set_scopes(&mut self, scopes: Vec<Scope<'a>>) {
        self.scopes = scopes;
    }

    /// Lets `VALUES(c)` name the column of the row to insert, which
    /// starts at `offset` (ON DUPLICATE KEY UPDATE).
    pub fn set_values_offset(&mut self, offset: Option<usize>) {
        self.values_offset = offset;
    }

    /// Names the columns a join's USING made one.
    pub fn set_merged(&mut self, merged: Vec<String>) {
        self.merged = merged;
    }

    /// Lets the next expressions name the select list's aliases (HAVING,
    /// ORDER BY), where no column has the name.
    pub fn set_aliases(&mut self, aliases: Vec<(String, Expr)>) {
        self.aliases = aliases;
    }

    /// Lets the next expressions hold aggregates (a query's select list,
    /// HAVING, ORDER BY).
    pub fn allow_aggregates(&mut self) {
        if self.aggregates.is_none() {
            self.aggregates = Some(Vec::new());
        }
    }

    /// Stops allowing aggregates and returns those met.
    pub fn take_aggregates(&mut self) -> Vec<Aggregate> {
        self.aggregates.take().unwrap_or_default()
    }

    /// Allows aggregates again, with `aggregates` as those met so far.
    pub fn set_aggregates(&mut self, aggregates: Vec<Aggregate>) {
        self.aggregates = Some(aggregates);
    }

    /// Takes the window functions met.
    pub fn take_windows(&mut self) -> Vec<WindowFunction> {
        std::mem::take(&mut self.windows)
    }

    /// The window function in `slot`.
    pub fn window(&self, slot: usize) -> Option<&WindowFunction> {
        self.windows.get(slot)
    }

    /// The aggregate in `slot`.
    pub fn aggregate(&self, slot: usize) -> Option<&Aggregate> {
        self.aggregates.as_ref()?.get(slot)
    }

    /// How many placeholders were met.
    pub fn parameter_count(&self) -> usize {
        self.placeholders.len()
    }

    /// For each slot, the parameter's position in the statement (0 is the
    /// first `?` in the text).
    pub fn parameter_order(&self) -> Vec<usize> {
        parameter_order_of(&self.placeholders)
    }

    /// The index in the row of the column named `name` (qualified by
    /// `qualifier`): 1054 when no table has it, 1052 when several do.
    pub fn column(&self, qualifier: Option<&str>, name: &str) -> SqlResult<usize> {
        let full = match qualifier {
            Some(q) => format!("{q}.{name}"),
            None => name.to_string(),
        };
        let mut found = self
            .scopes
            .iter()
            .filter(|scope| match qualifier {
                None => !scope.qualified_only,
                Some(q) => scope.names.iter().any(|n| n.eq_ignore_ascii_case(q)),
            })
            .filter_map(|scope| scope.table.column_index(name).map(|i| scope.offset + i));
        let first = found
            .next()
            .ok_or_else(|| SqlError::bad_field(&full, self.place))?;
        let merged =
            qualifier.is_none() && self.merged.iter().any(|m| m.eq_ignore_ascii_case(name));
        if found.next().is_some() && !merged {
            return Err(SqlError::new(
                codes::NON_UNIQ,
                format!("Column '{full}' in {} is ambiguous", self.place),
            ));
        }
        Ok(first)
    }

    /// A column of this query's tables, or else of the enclosing query's
    /// (an `Outer` column, in a subquery).
    fn column_or_outer(&self, qualifier: Option<&str>, name: &str) -> SqlResult<Expr> {
        match self.column(qualifier, name) {
            Ok(index) => Ok(Expr::Column(index)),
            Err(error) if error.code == codes::BAD_FIELD && !self.outer.is_empty() => {
                let enclosing = Compiler::over(self.outer.clone());
                match enclosing.column(qualifier, name) {
                    Ok(index) => Ok(Expr::Outer(index)),
                    Err(_) => Err(error),
                }
            }
            Err(error) => Err(error),
        }
    }

    /// Compiles `expr`.
    pub fn compile(&mut self, expr: &ast::Expr) -> SqlResult<Expr> {
        use ast::Expr as E;
        Ok(match expr {
            E::Identifier(ident) => self.identifier(None, ident)?,
            E::CompoundIdentifier(parts) => match parts.as_slice() {
                [first, name] if first.value.starts_with("@@") => {
                    system_variable(&format!("{}.{}", first.value, name.value))
                }
                [table, name] => self.column_or_outer(Some(&table.value), &name.value)?,
                [_database, table, name] => {
                    self.column_or_outer(Some(&table.value), &name.value)?
                }
                _ => return Err(SqlError::bad_field(&expr.to_string(), self.place)),
            },
            E::Value(value) => self.literal(value)?,
            E::Nested(inner) => self.compile(inner)?,
            E::UnaryOp { op, expr: inner } => {
                let inner = Box::new(self.compile(inner)?);
                match op {
                    ast::UnaryOperator::Not => Expr::Not(inner),
                    ast::UnaryOperator::Minus => match *inner {
                        Expr::Literal(Value::Int(x)) => Expr::Literal(Value::Int(-x)),
                        Expr::Literal(Value::Double(x)) => Expr::Literal(Value::Double(-x)),
                        other => Expr::Negate(Box::new(other)),
                    },
                    ast::UnaryOperator::Plus => *inner,
                    other => return Err(SqlError::unsupported(format!("operator {other}"))),
                }
            }
            E::BinaryOp {
                left,
                op: op @ (ast::BinaryOperator::Plus | ast::BinaryOperator::Minus),
                right,
            } if matches!(right.as_ref(), ast::Expr::Interval(_)) => {
                self.date_add(left, right, *op == ast::BinaryOperator::Minus)?
            }
            E::BinaryOp { left, op, right }
                if rows::compares(op)
                    && (rows::row_of(left).is_some() || rows::row_of(right).is_some()) =>
            {
                self.compare_rows(left, op, right)?
            }
            // A row anywhere else is one column too many.
            E::Tuple(_) => return Err(rows::wrong_width(1)),
            E::BinaryOp { left, op, right } => {
                let l = Box::new(self.compile(left)?);
                let r = Box::new(self.compile(right)?);
                use ast::BinaryOperator as B;
                match op {
                    B::Plus => Expr::Arithmetic(Arithmetic::Add, l, r),
                    B::Minus => Expr::Arithmetic(Arithmetic::Subtract, l, r),
                    B::Multiply => Expr::Arithmetic(Arithmetic::Multiply, l, r),
                    B::Divide => Expr::Arithmetic(Arithmetic::Divide, l, r),
                    B::Modulo => Expr::Arithmetic(Arithmetic::Modulo, l, r),
                    B::MyIntegerDivide => Expr::Arithmetic(Arithmetic::IntegerDivide, l, r),
                    B::Eq | B::NotEq | B::Lt | B::LtEq | B::Gt | B::GtEq => {
                        let op = match op {
                            B::Eq => CompareOp::Equal,
                            B::NotEq => CompareOp::NotEqual,
                            B::Lt => CompareOp::Less,
                            B::LtEq => CompareOp::LessOrEqual,
                            B::Gt => CompareOp::Greater,
                            _ => CompareOp::GreaterOrEqual,
                        };
                        // A JSON side compares by JSON's rules.
                        let booleans = [left, right]
                            .map(|side| crate::json::compile::is_boolean_literal(side));
                        crate::json::compile::compare(op, *l, *r, booleans, self)
                    }
                    B::Arrow => crate::json::compile::arrow(*l, *r, false),
                    B::LongArrow => crate::json::compile::arrow(*l, *r, true),
                    B::Spaceship if crate::json::compile::any_json([&*l, &*r], self) => {
                        crate::json::compile::call(
                            JsonFunction::NullSafeEqual,
                            vec![*l, *r],
                            &[false; 2],
                            self,
                        )
                    }
                    B::Spaceship => Expr::NullSafeEqual(l, r),
                    B::And => Expr::And(l, r),
                    B::Or => Expr::Or(l, r),
                    B::Xor => Expr::Xor(l, r),
                    other => return Err(SqlError::unsupported(format!("operator {other}"))),
                }
            }
            E::IsNull(inner) => Expr::IsNull(Box::new(self.compile(inner)?), false),
            E::IsNotNull(inner) => Expr::IsNull(Box::new(self.compile(inner)?), true),
            E::IsTrue(inner) => Expr::Compare(
                CompareOp::NotEqual,
                Box::new(Expr::Function(
                    Function::Coalesce,
                    vec![self.compile(inner)?, Expr::Literal(Value::Int(0))],
                )),
                Box::new(Expr::Literal(Value::Int(0))),
            ),
            E::IsFalse(inner) => Expr::Compare(
                CompareOp::Equal,
                Box::new(Expr::Function(
                    Function::Coalesce,
                    vec![self.compile(inner)?, Expr::Literal(Value::Int(1))],
                )),
                Box::new(Expr::Literal(Value::Int(0))),
            ),
            E::Between {
                expr: inner,
                negated,
                low,
                high,
            } => {
                let (inner, low, high) = (
                    self.compile(inner)?,
                    self.compile(low)?,
                    self.compile(high)?,
                );
                match crate::json::compile::any_json([&inner, &low, &high], self) {
                    true => crate::json::compile::between(inner, low, high, *negated, self),
                    false => Expr::Between {
                        expr: Box::new(inner),
                        low: Box::new(low),
                        high: Box::new(high),
                        negated: *negated,
                    },
                }
            }
            E::InList {
                expr: inner,
                list,
                negated,
            } if rows::row_of(inner).is_some()
                || list.iter().any(|e| rows::row_of(e).is_some()) =>
            {
                self.row_in_list(inner, list, *negated)?
            }
            E::InList {
                expr: inner,
                list,
                negated,
            } => {
                let inner = self.compile(inner)?;
                let list: Vec<Expr> = list
                    .iter()
                    .map(|e| self.compile(e))
                    .collect::<SqlResult<_>>()?;
                match crate::json::compile::any_json(std::iter::once(&inner).chain(&list), self) {
                    true => crate::json::compile::in_list(inner, list, *negated, self),
                    false => Expr::InList {
                        expr: Box::new(inner),
                        list,
                        negated: *negated,
                    },
                }
            }
            E::Like {
                negated,
                expr: inner,
                pattern,
                escape_char,
                any: false,
            } => Expr::Like {
                expr: Box::new(self.compile(inner)?),
                pattern: Box::new(match escape_char {
                    None => self.compile(pattern)?,
                    Some(escape) => like_with_escape(self.compile(pattern)?, escape)?,
                }),
                negated: *negated,
            },
            E::RLike {
                negated,
                expr: inner,
                pattern,
                ..
            } => {
                let matches = Expr::Function(
                    Function::Regexp(RegexpFunction::Like),
                    vec![self.compile(inner)?, self.compile(pattern)?],
                );
                match negated {
                    true => Expr::Not(Box::new(matches)),
                    false => matches,
                }
            }
            E::Subquery(query) => {
                let (slot, correlated, columns) = self.subquery(query)?;
                one_column(columns)?;
                Expr::Subquery {
                    slot,
                    correlated,
                    test: SubqueryTest::Scalar,
                }
            }
            E::Exists { subquery, negated } => {
                let (slot, correlated, _) = self.subquery(subquery)?;
                Expr::Subquery {
                    slot,
                    correlated,
                    test: SubqueryTest::Exists { negated: *negated },
                }
            }
            E::InSubquery {
                expr: inner,
                subquery,
                negated,
            } => {
                // A row is looked for among the subquery's rows, each of
                // its width.
                let tested = match rows::row_of(inner) {
                    Some(elements) => elements
                        .iter()
                        .map(|element| self.compile(element))
                        .collect::<SqlResult<Vec<_>>>()?,
                    None => vec![self.compile(inner)?],
                };
                let (slot, correlated, columns) = self.subquery(subquery)?;
                if columns != tested.len() {
                    return Err(rows::wrong_width(tested.len()));
                }
                Expr::Subquery {
                    slot,
                    correlated,
                    test: SubqueryTest::In {
                        exprs: tested,
                        negated: *negated,
                    },
                }
            }
            E::Function(function) => self.function(function)?,
            E::Cast {
                expr: inner,
                data_type,
                ..
            }
            | E::Convert {
                is_try: false,
                expr: inner,
                data_type: Some(data_type),
                charset: None,
                ..
            } => self.cast(inner, data_type)?,
            // Text is utf8mb4 already (and binary is its bytes).
            E::Convert {
                is_try: false,
                expr: inner,
                data_type: None,
                charset: Some(charset),
                ..
            } => match charset.to_string().to_ascii_lowercase().as_str() {
                "utf8mb4" | "utf8" | "utf8mb3" | "binary" => self.compile(inner)?,
                other => {
                    return Err(SqlError::unsupported(format!(
                        "CONVERT to character set {other}"
                    )))
                }
            },
            E::MemberOf(member) => {
                let value = self.compile(&member.value)?;
                let array = self.compile(&member.array)?;
                let boolean = crate::json::compile::is_boolean_literal(&member.value);
                crate::json::compile::call(
                    JsonFunction::MemberOf,
                    vec![value, array],
                    &[boolean, false],
                    self,
                )
            }
            E::TypedString(typed) => Expr::Literal(Self::typed_literal(typed)?),
            E::Case {
                operand,
                conditions,
                else_result,
                ..
            } => {
                // Nested IFs: CASE x WHEN v THEN r ... is IF(x = v, r, ...).
                let operand = operand.as_ref().map(|o| self.compile(o)).transpose()?;
                let mut result = match else_result {
                    Some(otherwise) => self.compile(otherwise)?,
                    None => Expr::Literal(Value::Null),
                };
                for branch in conditions.iter().rev() {
                    let condition = self.compile(&branch.condition)?;
                    let condition = match &operand {
                        Some(operand) => crate::json::compile::compare(
                            CompareOp::Equal,
                            operand.clone(),
                            condition,
                            [false; 2],
                            self,
                        ),
                        None => condition,
                    };
                    let then = self.compile(&branch.result)?;
                    result = Expr::Function(Function::If, vec![condition, then, result]);
                }
                result
            }
            E::Substring {
                expr: inner,
                substring_from,
                substring_for,
                ..
            } => {
                let mut args = vec![self.compile(inner)?];
                args.push(match substring_from {
                    Some(from) => self.compile(from)?,
                    None => Expr::Literal(Value::Int(1)),
                });
                if let Some(length) = substring_for {
                    args.push(self.compile(length)?);
                }
                Expr::Function(Function::Substring, args)
            }
            E::Trim {
                expr: inner,
                trim_where,
                trim_what,
                trim_characters: None,
            } => {
                use crate::functions::Side;
                let side = match trim_where {
                    Some(ast::TrimWhereField::Leading) => Side::Leading,
                    Some(ast::TrimWhereField::Trailing) => Side::Trailing,
                    _ => Side::Both,
                };
                let mut args = vec![self.compile(inner)?];
                if let Some(what) = trim_what {
                    args.push(self.compile(what)?);
                }
                Expr::Function(Function::Trim(side), args)
            }
            E::Ceil { expr: inner, .. } => {
                Expr::Function(Function::Ceiling, vec![self.compile(inner)?])
            }
            E::Floor { expr: inner, .. } => {
                Expr::Function(Function::Floor, vec![self.compile(inner)?])
            }
            other => return Err(SqlError::unsupported(format!("expression {other}"))),
        })
    }

    /// `date + INTERVAL amount unit` (or minus): DATE_ADD and DATE_SUB.
    /// A bare number for the interval is days (ADDDATE's short form).
    fn date_add(
        &mut self,
        date: &ast::Expr,
        interval: &ast::Expr,
        subtract: bool,
    ) -> SqlResult<Expr> {
        let (amount, unit) = match interval {
            ast::Expr::Interval(interval) => {
                let unit_name = interval
                    .leading_field
                    .as_ref()
                    .map(|field| field.to_string())
                    .unwrap_or_else(|| "DAY".into());
                let unit = crate::temporal::IntervalUnit::named(&unit_name)
                    .ok_or_else(|| SqlError::unsupported(format!("INTERVAL unit {unit_name}")))?;
                (self.compile(&interval.value)?, unit)
            }
            other => (self.compile(other)?, crate::temporal::IntervalUnit::Day),
        };
        Ok(Expr::Function(
            Function::DateAdd { unit, subtract },
            vec![self.compile(date)?, amount],
        ))
    }

    /// `DATE '2024-03-09'`, `TIME '10:30:00'`, `TIMESTAMP '2024-03-09
    /// 10:30:00'` (a DATETIME, as MySQL's): the value, read once; text
    /// that is not one is error 1525, as MySQL's.
    fn typed_literal(typed: &ast::TypedString) -> SqlResult<Value> {
        use crate::temporal::{Date, DateTime, Time};
        let text = match &typed.value.value {
            ast::Value::SingleQuotedString(text) | ast::Value::DoubleQuotedString(text) => text,
            other => {
                return Err(SqlError::unsupported(format!(
                    "{} {other}",
                    typed.data_type
                )))
            }
        };
        let (value, kind) = match &typed.data_type {
            // A date alone: a time after it is an error here, as in MySQL.
            ast::DataType::Date => (
                Date::parse(text)
                    .filter(|_| !text.contains(':'))
                    .map(Value::Date),
                "DATE",
            ),
            ast::DataType::Time(..) => (Time::parse(text).map(Value::Time), "TIME"),
            ast::DataType::Timestamp(..) | ast::DataType::Datetime(_) => {
                (DateTime::parse(text).map(Value::DateTime), "DATETIME")
            }
            other => return Err(SqlError::unsupported(format!("{other} '...' literals"))),
        };
        value.ok_or_else(|| {
            SqlError::new(
                codes::WRONG_VALUE,
                format!("Incorrect {kind} value: '{text}'"),
            )
        })
    }

    /// CAST's target type.
    /// CAST(inner AS data_type) and CONVERT(inner, data_type).
    fn cast(&mut self, inner: &ast::Expr, data_type: &ast::DataType) -> SqlResult<Expr> {
        let inner = self.compile(inner)?;
        if *data_type != ast::DataType::JSON {
            let target = Self::cast_target(data_type)?;
            return Ok(Expr::Function(Function::Cast(target), vec![inner]));
        }
        Ok(match crate::json::compile::is_json(&inner, self) {
            true => inner,
            false => Expr::Function(Function::Json(JsonFunction::Cast), vec![inner]),
        })
    }

    fn cast_target(data_type: &ast::DataType) -> SqlResult<crate::functions::CastTarget> {
        use crate::functions::CastTarget as C;
        use ast::DataType as D;
        let name = data_type.to_string().to_ascii_uppercase();
        Ok(match data_type {
            D::Signed | D::SignedInteger => C::Signed,
            D::Unsigned | D::UnsignedInteger => C::Unsigned,
            D::Double(_) | D::DoublePrecision | D::Real | D::Float(_) => C::Double,
            D::Char(_) | D::Character(_) | D::Varchar(_) | D::Binary(_) | D::Text => C::Char,
            D::Date => C::Date,
            D::Datetime(fsp) | D::Timestamp(fsp, _) => C::DateTime {
                fsp: fsp.unwrap_or(0).min(6) as u8,
            },
            D::Time(fsp, _) => C::Time {
                fsp: fsp.unwrap_or(0).min(6) as u8,
            },
            D::Decimal(_) | D::Numeric(_) | D::Dec(_) => {
                match crate::types::of_data_type(data_type)? {
                    crate::types::SqlType::Decimal { precision, scale } => {
                        C::Decimal { precision, scale }
                    }
                    _ => unreachable!("a DECIMAL type"),
                }
            }
            _ if name.starts_with("SIGNED") => C::Signed,
            _ if name.starts_with("UNSIGNED") => C::Unsigned,
            other => return Err(SqlError::unsupported(format!("CAST AS {other}"))),
        })
    }

    fn identifier(&mut self, qualifier: Option<&str>, ident: &ast::Ident) -> SqlResult<Expr> {
        let name = &ident.value;
        if ident.quote_style.is_none() {
            if name.starts_with("@@") {
                return Ok(system_variable(name));
            }
            if let Some(user) = name.strip_prefix('@') {
                return Ok(Expr::Session(SessionValue::UserVariable(
                    user.to_ascii_lowercase(),
                )));
            }
            match name.to_ascii_uppercase().as_str() {
                "TRUE" => return Ok(Expr::Literal(Value::Int(1))),
                "FALSE" => return Ok(Expr::Literal(Value::Int(0))),
                "CURRENT_USER" => return Ok(Expr::Session(SessionValue::User)),
                "CURRENT_TIMESTAMP" | "LOCALTIME" | "LOCALTIMESTAMP" => {
                    return Ok(Expr::Session(SessionValue::Now(0)))
                }
                "CURRENT_DATE" => return Ok(Expr::Session(SessionValue::Today)),
                "CURRENT_TIME" => return Ok(Expr::Session(SessionValue::TimeOfDay)),
                _ => {}
            }
        }
        match self.column_or_outer(qualifier, name) {
            Ok(expr) => Ok(expr),
            Err(error) if error.code == codes::BAD_FIELD && qualifier.is_none() => self
                .aliases
                .iter()
                .find(|(alias, _)| alias.eq_ignore_ascii_case(name))
                .map(|(_, expr)| expr.clone())
                .ok_or(error),
            Err(error) => Err(error),
        }
    }

    fn literal(&mut self, value: &ast::ValueWithSpan) -> SqlResult<Expr> {
        use ast::Value as V;
        Ok(Expr::Literal(match &value.value {
            V::Number(text, _) => number(text)?,
            V::SingleQuotedString(text) | V::DoubleQuotedString(text) => Value::from(text.as_str()),
            V::HexStringLiteral(hex) => Value::Bytes(decode_hex(hex)?),
            V::Boolean(b) => Value::Int(*b as i64),
            V::Null => Value::Null,
            V::Placeholder(text) if text == "?" => {
                let start = value.span.start;
                self.placeholders.push((start.line, start.column));
                return Ok(Expr::Param(self.placeholders.len() - 1));
            }
            other => return Err(SqlError::unsupported(format!("literal {other}"))),
        }))
    }

    fn function(&mut self, function: &ast::Function) -> SqlResult<Expr> {
        let name = function.name.to_string().to_ascii_uppercase();
        // What the parser takes around a call and nothing here computes
        // is refused, never ignored: `SUM(x) OVER ()` summed as a group
        // would be a wrong answer, not an error.
        if function.filter.is_some()
            || function.null_treatment.is_some()
            || !function.within_group.is_empty()
            || !matches!(function.parameters, ast::FunctionArguments::None)
        {
            return Err(SqlError::unsupported(format!("{function}")));
        }
        let mut clauses: &[ast::FunctionArgumentClause] = &[];
        let (args, distinct, star) = match &function.args {
            ast::FunctionArguments::None => (Vec::new(), false, false),
            ast::FunctionArguments::List(list) => {
                clauses = &list.clauses;
                let distinct = matches!(
                    list.duplicate_treatment,
                    Some(ast::DuplicateTreatment::Distinct)
                );
                let mut args = Vec::new();
                let mut star = false;
                for arg in &list.args {
                    match arg {
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => args.push(e),
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard) => star = true,
                        other => return Err(SqlError::unsupported(format!("argument {other}"))),
                    }
                }
                (args, distinct, star)
            }
            ast::FunctionArguments::Subquery(_) => return Err(SqlError::unsupported("subqueries")),
        };
        if let Some(over) = &function.over {
            if !clauses.is_empty() || distinct {
                return Err(SqlError::unsupported(format!("{function}")));
            }
            return self.window_function(&name, &args, star, over);
        }
        if !clauses.is_empty() && name != "GROUP_CONCAT" {
            return Err(SqlError::unsupported(format!("{function}")));
        }
        let aggregate = match name.as_str() {
            "GROUP_CONCAT" => Some(AggregateFunction::GroupConcat),
            "JSON_ARRAYAGG" => Some(AggregateFunction::JsonArrayAgg),
            "JSON_OBJECTAGG" => Some(AggregateFunction::JsonObjectAgg),
            "COUNT" if star => Some(AggregateFunction::CountRows),
            "COUNT" => Some(AggregateFunction::Count),
            "SUM" => Some(AggregateFunction::Sum),
            "MIN" => Some(AggregateFunction::Min),
            "MAX" => Some(AggregateFunction::Max),
            "AVG" => Some(AggregateFunction::Average),
            _ => None,
        };
        if let Some(aggregate) = aggregate {
            if self.aggregates.is_none() {
                return Err(SqlError::new(
                    codes::INVALID_GROUP_FUNC_USE,
                    "Invalid use of group function",
                ));
            }
            // An aggregate's argument is over the row, never another
            // aggregate.
            let saved = self.aggregates.take();
            let compiled = self.aggregate_arguments(aggregate, &name, &args, clauses);
            self.aggregates = saved;
            let (argument, concat) = compiled?;
            let list = self.aggregates.as_mut().expect("checked above");
            list.push(Aggregate {
                function: aggregate,
                argument,
                distinct,
                concat,
            });
            return Ok(Expr::Aggregate(list.len() - 1));
        }
        if name == "VALUES" {
            let (Some(offset), [ast::Expr::Identifier(column)]) =
                (self.values_offset, args.as_slice())
            else {
                return Err(SqlError::unsupported(
                    "VALUES() outside ON DUPLICATE KEY UPDATE",
                ));
            };
            return Ok(Expr::Column(offset + self.column(None, &column.value)?));
        }
        if matches!(
            name.as_str(),
            "DATE_ADD" | "ADDDATE" | "DATE_SUB" | "SUBDATE"
        ) {
            // Its INTERVAL argument is not an expression of its own.
            let subtract = name == "DATE_SUB" || name == "SUBDATE";
            let [date, amount] = args.as_slice() else {
                return Err(wrong_arguments(&name));
            };
            return self.date_add(date, amount, subtract);
        }
        if name == "TIMESTAMPDIFF" {
            // Its first argument is a unit, not an expression.
            let [ast::Expr::Identifier(unit), from, to] = args.as_slice() else {
                return Err(wrong_arguments(&name));
            };
            let unit = crate::temporal::IntervalUnit::named(&unit.value)
                .ok_or_else(|| SqlError::unsupported(format!("TIMESTAMPDIFF unit {unit}")))?;
            let (from, to) = (self.compile(from)?, self.compile(to)?);
            return Ok(Expr::Function(
                Function::TimestampDiff(unit),
                vec![from, to],
            ));
        }
        let session = |value| Ok(Expr::Session(value));
        let compiled: Vec<Expr> = args
            .iter()
            .map(|a| self.compile(a))
            .collect::<SqlResult<_>>()?;
        let arity = |n: usize| match compiled.len() == n {
            true => Ok(()),
            false => Err(wrong_arguments(&name)),
        };
        if let Some(json) = JsonFunction::named(&name, compiled.len()) {
            let json = json.map_err(|_| wrong_arguments(&name))?;
            return Ok(crate::json::compile::call(
                json,
                compiled,
                &json_booleans(&args),
                self,
            ));
        }
        if let Some(function) = crate::user_locks::UserLockFunction::named(&name, compiled.len()) {
            let function = function.map_err(|_| wrong_arguments(&name))?;
            return Ok(Expr::Function(Function::UserLock(function), compiled));
        }
        let scalar = match name.as_str() {
            "DATABASE" | "SCHEMA" => return arity(0).and(session(SessionValue::Database)),
            "LAST_INSERT_ID" if compiled.is_empty() => return session(SessionValue::LastInsertId),
            "LAST_INSERT_ID" => arity(1).map(|_| Function::SetLastInsertId)?,
            "CONNECTION_ID" => return arity(0).and(session(SessionValue::ConnectionId)),
            "VERSION" => return arity(0).and(session(SessionValue::Version)),
            "USER" | "CURRENT_USER" | "SESSION_USER" | "SYSTEM_USER" => {
                return arity(0).and(session(SessionValue::User))
            }
            "FOUND_ROWS" | "ROW_COUNT" => return arity(0).and(session(SessionValue::RowCount)),
            "COALESCE" if !compiled.is_empty() => Function::Coalesce,
            "IFNULL" => arity(2).map(|_| Function::Coalesce)?,
            "IF" => arity(3).map(|_| Function::If)?,
            "CONCAT" if !compiled.is_empty() => Function::Concat,
            "LENGTH" | "OCTET_LENGTH" => arity(1).map(|_| Function::Length)?,
            "UPPER" | "UCASE" => arity(1).map(|_| Function::Upper)?,
            "LOWER" | "LCASE" => arity(1).map(|_| Function::Lower)?,
            "ABS" => arity(1).map(|_| Function::Abs)?,
            "SLEEP" => arity(1).map(|_| Function::Sleep)?,
            "SUBSTRING" | "SUBSTR" | "MID" if (2..=3).contains(&compiled.len()) => {
                Function::Substring
            }
            "LEFT" => arity(2).map(|_| Function::Left)?,
            "RIGHT" => arity(2).map(|_| Function::Right)?,
            "CHAR_LENGTH" | "CHARACTER_LENGTH" => arity(1).map(|_| Function::CharLength)?,
            "REPLACE" => arity(3).map(|_| Function::Replace)?,
            "REGEXP_LIKE" if (2..=3).contains(&compiled.len()) => {
                Function::Regexp(RegexpFunction::Like)
            }
            "REGEXP_REPLACE" if compiled.len() > 3 => {
                return Err(SqlError::unsupported(
                    "REGEXP_REPLACE with a position, an occurrence or a match type",
                ))
            }
            "REGEXP_REPLACE" => arity(3).map(|_| Function::Regexp(RegexpFunction::Replace))?,
            "REGEXP_SUBSTR" | "REGEXP_INSTR" if compiled.len() > 2 => {
                return Err(SqlError::unsupported(format!(
                    "{name} with a position, an occurrence or a match type"
                )))
            }
            "REGEXP_SUBSTR" => arity(2).map(|_| Function::Regexp(RegexpFunction::Substring))?,
            "REGEXP_INSTR" => arity(2).map(|_| Function::Regexp(RegexpFunction::Position))?,
            "TRIM" => arity(1).map(|_| Function::Trim(crate::functions::Side::Both))?,
            "LTRIM" => arity(1).map(|_| Function::Trim(crate::functions::Side::Leading))?,
            "RTRIM" => arity(1).map(|_| Function::Trim(crate::functions::Side::Trailing))?,
            "CONCAT_WS" if compiled.len() >= 2 => Function::ConcatWithSeparator,
            "LPAD" => arity(3).map(|_| Function::Pad { left: true })?,
            "RPAD" => arity(3).map(|_| Function::Pad { left: false })?,
            "LOCATE" if (2..=3).contains(&compiled.len()) => Function::Locate,
            "INSTR" => {
                arity(2)?;
                let mut swapped = compiled;
                swapped.swap(0, 1);
                return Ok(Expr::Function(Function::Locate, swapped));
            }
            "ROUND" if (1..=2).contains(&compiled.len()) => Function::Round,
            "TRUNCATE" => arity(2).map(|_| Function::Truncate)?,
            "FLOOR" => arity(1).map(|_| Function::Floor)?,
            "CEIL" | "CEILING" => arity(1).map(|_| Function::Ceiling)?,
            "MOD" => {
                arity(2)?;
                let mut args = compiled.into_iter();
                let (a, b) = (args.next().expect("two"), args.next().expect("two"));
                return Ok(Expr::Arithmetic(
                    Arithmetic::Modulo,
                    Box::new(a),
                    Box::new(b),
                ));
            }
            "GREATEST" if compiled.len() >= 2 => Function::Greatest,
            "LEAST" if compiled.len() >= 2 => Function::Least,
            "NULLIF" => arity(2).map(|_| Function::NullIf)?,
            "YEAR" => arity(1).map(|_| Function::DatePart(crate::functions::Part::Year))?,
            "MONTH" => arity(1).map(|_| Function::DatePart(crate::functions::Part::Month))?,
            "DAY" | "DAYOFMONTH" => {
                arity(1).map(|_| Function::DatePart(crate::functions::Part::Day))?
            }
            "HOUR" => arity(1).map(|_| Function::DatePart(crate::functions::Part::Hour))?,
            "MINUTE" => arity(1).map(|_| Function::DatePart(crate::functions::Part::Minute))?,
            "SECOND" => arity(1).map(|_| Function::DatePart(crate::functions::Part::Second))?,
            "DATE" => arity(1).map(|_| Function::DateOf)?,
            "DAYOFWEEK" => {
                arity(1).map(|_| Function::DatePart(crate::functions::Part::DayOfWeek))?
            }
            "WEEKDAY" => arity(1).map(|_| Function::DatePart(crate::functions::Part::Weekday))?,
            "DAYOFYEAR" => {
                arity(1).map(|_| Function::DatePart(crate::functions::Part::DayOfYear))?
            }
            "QUARTER" => arity(1).map(|_| Function::DatePart(crate::functions::Part::Quarter))?,
            "DATE_FORMAT" => arity(2).map(|_| Function::DateFormat)?,
            "DAYNAME" => arity(1).map(|_| Function::DayName)?,
            "MONTHNAME" => arity(1).map(|_| Function::MonthName)?,
            "LAST_DAY" => arity(1).map(|_| Function::LastDay)?,
            "FROM_UNIXTIME" if compiled.len() == 2 => {
                // FROM_UNIXTIME(n, format): the moment, formatted.
                let mut args = compiled.into_iter();
                let (seconds, format) = (args.next().expect("two"), args.next().expect("two"));
                let moment = Expr::Function(Function::FromUnixTime, vec![seconds]);
                return Ok(Expr::Function(Function::DateFormat, vec![moment, format]));
            }
            "FROM_UNIXTIME" => arity(1).map(|_| Function::FromUnixTime)?,
            // Without a mode, the session's @@default_week_format.
            "WEEK" if compiled.len() == 1 => {
                let mut args = compiled;
                args.push(Expr::Session(SessionValue::SystemVariable {
                    name: "default_week_format".into(),
                    global: false,
                }));
                return Ok(Expr::Function(Function::Week, args));
            }
            "WEEK" if compiled.len() == 2 => Function::Week,
            "WEEKOFYEAR" => {
                // WEEK(d, 3): weeks from Monday, week 1 the first with
                // four days of the year.
                arity(1)?;
                let mut args = compiled;
                args.push(Expr::Literal(Value::Int(3)));
                return Ok(Expr::Function(Function::Week, args));
            }
            "YEARWEEK" if (1..=2).contains(&compiled.len()) => Function::YearWeek,
            "STR_TO_DATE" => arity(2).map(|_| Function::StrToDate)?,
            "CONVERT_TZ" => arity(3).map(|_| Function::ConvertTz)?,
            "FORMAT" if (2..=3).contains(&compiled.len()) => Function::Format,
            "SQRT" => arity(1).map(|_| Function::Math(MathFunction::SquareRoot))?,
            "EXP" => arity(1).map(|_| Function::Math(MathFunction::Exponential))?,
            "LN" => arity(1).map(|_| Function::Math(MathFunction::NaturalLog))?,
            "LOG" if compiled.len() == 1 => Function::Math(MathFunction::NaturalLog),
            "LOG" => arity(2).map(|_| Function::Log)?,
            "LOG2" => arity(1).map(|_| Function::Math(MathFunction::Log2))?,
            "LOG10" => arity(1).map(|_| Function::Math(MathFunction::Log10))?,
            "POW" | "POWER" => arity(2).map(|_| Function::Power)?,
            "SIGN" => arity(1).map(|_| Function::Sign)?,
            "REPEAT" => arity(2).map(|_| Function::Repeat)?,
            "SPACE" => arity(1).map(|_| Function::Space)?,
            "REVERSE" => arity(1).map(|_| Function::Reverse)?,
            "HEX" => arity(1).map(|_| Function::Hex)?,
            "UNHEX" => arity(1).map(|_| Function::Unhex)?,
            "MD5" => arity(1).map(|_| Function::Digest(DigestKind::Md5))?,
            "SHA1" | "SHA" => arity(1).map(|_| Function::Digest(DigestKind::Sha1))?,
            "SHA2" => arity(2).map(|_| Function::Digest(DigestKind::Sha2))?,
            "ASCII" => arity(1).map(|_| Function::Ascii)?,
            "FIND_IN_SET" => arity(2).map(|_| Function::FindInSet)?,
            "FIELD" if compiled.len() >= 2 => Function::Field,
            "ELT" if compiled.len() >= 2 => Function::Element,
            "STRCMP" => arity(2).map(|_| Function::StrCmp)?,
            "RAND" => {
                let start = function
                    .name
                    .0
                    .first()
                    .and_then(|part| part.as_ident())
                    .map_or((0, 0), |ident| {
                        (ident.span.start.line, ident.span.start.column)
                    });
                let seeded = |seed: i64| {
                    session(SessionValue::Random(Some(super::RandomSeed {
                        seed,
                        at: start,
                    })))
                };
                return match compiled.as_slice() {
                    [] => session(SessionValue::Random(None)),
                    [Expr::Literal(Value::Int(seed))] => seeded(*seed),
                    [Expr::Literal(Value::UInt(seed))] => seeded(*seed as i64),
                    [_] => Err(SqlError::unsupported("RAND of a seed that is not a number")),
                    _ => Err(wrong_arguments(&name)),
                };
            }
            "UUID" => return arity(0).and(session(SessionValue::Uuid)),
            "DATEDIFF" => arity(2).map(|_| Function::DateDiff)?,
            "UNIX_TIMESTAMP" if compiled.is_empty() => {
                return Ok(Expr::Function(
                    Function::UnixTimestamp,
                    // Whole seconds, as MySQL's UNIX_TIMESTAMP() is.
                    vec![Expr::Session(SessionValue::Now(0))],
                ));
            }
            "UNIX_TIMESTAMP" => arity(1).map(|_| Function::UnixTimestamp)?,
            "NOW" | "CURRENT_TIMESTAMP" | "LOCALTIME" | "LOCALTIMESTAMP" | "SYSDATE" => {
                return fraction_digits(&compiled, &name)
                    .map(|fsp| Expr::Session(SessionValue::Now(fsp)))
            }
            "UTC_TIMESTAMP" => return arity(0).and(session(SessionValue::UtcNow)),
            "CURDATE" | "CURRENT_DATE" => return arity(0).and(session(SessionValue::Today)),
            "CURTIME" | "CURRENT_TIME" => return arity(0).and(session(SessionValue::TimeOfDay)),

            _ => {
                return Err(SqlError::new(
                    codes::SP_DOES_NOT_EXIST,
                    format!("FUNCTION {} does not exist", function.name),
                ))
            }
        };
        Ok(Expr::Function(scalar, compiled))
    }
}

/// Which of `args` are written TRUE or FALSE (JSON makes them booleans).
fn json_booleans(args: &[&ast::Expr]) -> Vec<bool> {
    args.iter()
        .map(|arg| crate::json::compile::is_boolean_literal(arg))
        .collect()
}

pub(super) fn wrong_arguments(name: &str) -> SqlError {
    SqlError::new(
        codes::WRONG_PARAMCOUNT_TO_NATIVE_FCT,
        format!("Incorrect parameter count in the call to native function '{name}'"),
    )
}

fn system_variable(text: &str) -> Expr {
    let name = text.trim_start_matches("@@").to_ascii_lowercase();
    let (global, name) = match name.split_once('.') {
        Some(("global", rest)) => (true, rest.to_string()),
        Some(("session" | "local", rest)) => (false, rest.to_string()),
        _ => (false, name),
    };
    Expr::Session(SessionValue::SystemVariable { name, global })
}

/// A numeric literal: an integer when it is one and fits, else a double.
fn number(text: &str) -> SqlResult<Value> {
    if let Ok(x) = text.parse::<i64>() {
        return Ok(Value::Int(x));
    }
    if let Ok(x) = text.parse::<u64>() {
        return Ok(Value::UInt(x));
    }
    // Digits with a point are an exact DECIMAL (MySQL's literal rule);
    // with an exponent, a double.
    if !text.contains(['e', 'E']) {
        if let Some(decimal) = crate::decimal::Decimal::parse(text) {
            return Ok(Value::Decimal(decimal));
        }
    }
    text.parse::<f64>()
        .map(Value::Double)
        .map_err(|_| SqlError::parse(format!("bad number {text}")))
}

fn decode_hex(hex: &str) -> SqlResult<Vec<u8>> {
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(SqlError::parse(format!("bad hex literal X'{hex}'")));
    }
    let padded = if hex.len() % 2 == 1 {
        format!("0{hex}")
    } else {
        hex.to_string()
    };
    (0..padded.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&padded[i..i + 2], 16))
        .collect::<Result<_, _>>()
        .map_err(|_| SqlError::parse(format!("bad hex literal X'{hex}'")))
}

/// A LIKE pattern with an ESCAPE character, turned into the backslash
/// escapes `like` reads: the escape character makes the next character
/// literal, a backslash is then an ordinary character; `ESCAPE ''` has
/// no escape character at all. The pattern must be a constant here.
fn like_with_escape(pattern: Expr, escape: &ast::Value) -> SqlResult<Expr> {
    let escape = match escape {
        ast::Value::SingleQuotedString(text) | ast::Value::DoubleQuotedString(text) => text,
        _ => return Err(SqlError::parse("ESCAPE takes a quoted character")),
    };
    let escape = match escape.chars().collect::<Vec<char>>().as_slice() {
        [] => None,
        [one] => Some(*one),
        _ => return Err(SqlError::new(1210, "Incorrect arguments to ESCAPE")),
    };
    let Expr::Literal(Value::Bytes(bytes)) = &pattern else {
        return match pattern {
            Expr::Literal(Value::Null) => Ok(pattern),
            _ => Err(SqlError::unsupported(
                "LIKE ... ESCAPE with a pattern that is not a constant",
            )),
        };
    };
    if escape == Some('\\') {
        return Ok(pattern);
    }
    let text = String::from_utf8_lossy(bytes);
    let mut rewritten = String::with_capacity(text.len() + 4);
    let mut characters = text.chars();
    while let Some(c) = characters.next() {
        match c {
            c if Some(c) == escape => match characters.next() {
                Some(next) => {
                    rewritten.push('\\');
                    rewritten.push(next);
                }
                // A trailing escape character stands for itself.
                None => {
                    rewritten.push('\\');
                    rewritten.push(c);
                }
            },
            '\\' => rewritten.push_str("\\\\"),
            c => rewritten.push(c),
        }
    }
    Ok(Expr::Literal(Value::from(rewritten)))
}
