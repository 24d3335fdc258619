//! Views (docs/design/0037-views.md): CREATE [OR REPLACE] VIEW, DROP
//! VIEW, and what a statement that names one reads.
//!
//! A view is a row of the system table `tessera$views`, keyed by the
//! cluster-style name `db/v`: its columns' names and its query's text.
//! Nothing about it is cached: a statement that names a table the
//! cluster does not have reads the row (one committed read), so a view
//! created, replaced or dropped on one SQL node is what every SQL node's
//! next statement sees, with no schema change for the others to miss.
//! Its query is compiled where it is named, as a derived table is, in the
//! view's database, with the privileges of whoever reads it (SQL SECURITY
//! INVOKER).

use crate::catalog::{cluster_name, Catalog, SqlTable};
use crate::error::{codes, SqlError, SqlResult};
use client::{ColumnDef, ColumnType, Commit, LockMode, TableDef};
use sqlparser::ast;
use std::sync::Arc;

/// The system table of views.
pub const VIEWS: &str = "tessera$views";

/// The most operators the views one statement names may hold together
/// (and so one view's query): a statement's stack is sized for
/// `parse::MAX_OPERATORS` in its own text, and this share more (a view's
/// compiling and evaluation nest in the statement's).
pub const MAX_VIEW_OPERATORS: usize = crate::parse::MAX_OPERATORS / 4;

/// Longest definition (JSON) a view's row holds.
const MAX_DEFINITION_BYTES: u16 = 16_000;

/// A view as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct View {
    /// Its database.
    pub database: String,
    /// Its name.
    pub name: String,
    /// Its columns' names, in order (as given, or the query's at CREATE).
    pub columns: Vec<String>,
    /// Its query, as text that parses back as the query it was.
    pub query: String,
    /// The account that created it (`'user'@'host'`), for SHOW CREATE
    /// VIEW; a reader's own privileges are what count.
    pub definer: String,
}

/// The definition of the system table.
pub fn system_table() -> TableDef {
    TableDef {
        name: VIEWS.into(),
        columns: vec![
            ColumnDef::new("name", ColumnType::VarChar(129), false),
            ColumnDef::new(
                "definition",
                ColumnType::VarBinary(MAX_DEFINITION_BYTES),
                false,
            ),
        ],
        primary_key: vec![0],
        ..crate::catalog::empty_def()
    }
}

impl View {
    fn encode(&self) -> SqlResult<Vec<u8>> {
        let json = serde_json::json!({
            "columns": self.columns,
            "query": self.query,
            "definer": self.definer,
        })
        .to_string()
        .into_bytes();
        if json.len() > MAX_DEFINITION_BYTES as usize {
            return Err(SqlError::unsupported(format!(
                "a view whose definition is longer than {MAX_DEFINITION_BYTES} bytes"
            )));
        }
        Ok(json)
    }

    fn decode(full: &str, json: &[u8]) -> Option<View> {
        let (database, name) = full.split_once('/')?;
        let value: serde_json::Value = serde_json::from_slice(json).ok()?;
        Some(View {
            database: database.to_string(),
            name: name.to_string(),
            columns: value["columns"]
                .as_array()?
                .iter()
                .map(|c| c.as_str().map(str::to_string))
                .collect::<Option<_>>()?,
            query: value["query"].as_str()?.to_string(),
            definer: value["definer"].as_str().unwrap_or("").to_string(),
        })
    }

    /// Its query, parsed.
    pub fn parsed(&self) -> SqlResult<ast::Query> {
        parse_query(&self.query).map_err(|error| {
            SqlError::new(
                codes::VIEW_INVALID,
                format!(
                    "View '{}.{}' references invalid table(s) or column(s) or function(s) or definer/invoker of view lack rights to use them ({})",
                    self.database, self.name, error.message
                ),
            )
        })
    }

    /// SHOW CREATE VIEW's statement.
    pub fn create_statement(&self) -> String {
        let columns = match self.columns.is_empty() {
            true => String::new(),
            false => format!(
                " ({})",
                self.columns
                    .iter()
                    .map(|c| quoted(c))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        };
        format!(
            "CREATE ALGORITHM=UNDEFINED DEFINER={} SQL SECURITY INVOKER VIEW {}{columns} AS {}",
            self.definer,
            quoted(&self.name),
            self.query
        )
    }

    /// SHOW CREATE VIEW (and SHOW CREATE TABLE of a view).
    pub fn show_create(&self) -> crate::Response {
        crate::Response::text_rows(
            &[
                "View",
                "Create View",
                "character_set_client",
                "collation_connection",
            ],
            vec![vec![
                crate::value::Value::from(self.name.as_str()),
                crate::value::Value::from(self.create_statement().as_str()),
                crate::value::Value::from("utf8mb4"),
                crate::value::Value::from("utf8mb4_bin"),
            ]],
        )
    }
}

fn quoted(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// `text` parsed as a query, as a statement's text is: a panic of the
/// parser is a syntax error (`parse::quietly_caught`).
fn parse_query(text: &str) -> SqlResult<ast::Query> {
    let dialect = crate::dialect::TesseraDialect::new();
    let parsed = crate::parse::quietly_caught(|| {
        sqlparser::parser::Parser::new(&dialect)
            .try_with_sql(text)
            .and_then(|mut parser| parser.parse_query())
    });
    match parsed {
        Ok(Ok(query)) => Ok(*query),
        Ok(Err(error)) => Err(SqlError::parse(error.to_string())),
        Err(_) => Err(SqlError::parse("the parser gave up on a view's text")),
    }
}

/// The text `query` is kept as, which must parse back as the same query:
/// the parser prints a string's value without escaping its backslashes,
/// so they are doubled when that is what it takes (as a CHECK's clause,
/// `checks::clause_of`); a query that cannot be made to read back is
/// refused rather than kept as another query.
pub fn text_of(query: &ast::Query) -> SqlResult<String> {
    let printed = query.to_string();
    let reads_back = |text: &str| parse_query(text).is_ok_and(|parsed| parsed == *query);
    if reads_back(&printed) {
        return Ok(printed);
    }
    let escaped = printed.replace('\\', "\\\\");
    if reads_back(&escaped) {
        return Ok(escaped);
    }
    Err(SqlError::unsupported(
        "a view whose query's text does not read back as itself",
    ))
}

/// CREATE VIEW's view `database.name` of `query`, with the plan of its
/// query (whose tables the creator must be able to read), checked: its
/// columns named once each, as many as the query's.
pub fn definition(
    catalog: &Catalog,
    database: &str,
    name: &str,
    columns: &[ast::ViewColumnDef],
    query: &ast::Query,
    definer: String,
) -> SqlResult<(View, crate::plan::SelectPlan)> {
    let plan = crate::plan::view_query(query, catalog, database, name)?;
    let names: Vec<String> = match columns.is_empty() {
        true => plan.columns.iter().map(|c| c.name.clone()).collect(),
        false => columns.iter().map(|c| c.name.value.clone()).collect(),
    };
    if names.len() != plan.columns.len() {
        return Err(SqlError::new(
            codes::VIEW_WRONG_LIST,
            "View's SELECT and view's field list have different column counts",
        ));
    }
    for (at, column) in names.iter().enumerate() {
        if names[..at].iter().any(|c| c.eq_ignore_ascii_case(column)) {
            return Err(SqlError::new(
                codes::DUP_FIELDNAME,
                format!("Duplicate column name '{column}'"),
            ));
        }
    }
    let view = View {
        database: database.to_string(),
        name: name.to_string(),
        columns: names,
        query: text_of(query)?,
        definer,
    };
    if crate::parse::operators(&view.query) > MAX_VIEW_OPERATORS {
        return Err(SqlError::unsupported(format!(
            "a view of more than {MAX_VIEW_OPERATORS} operators"
        )));
    }
    Ok((view, plan))
}

/// What a write through a view goes to, when the view is one a write can
/// go through: a SELECT of one table's columns, each under its own name,
/// with a WHERE at most (no DISTINCT, grouping, ORDER BY, LIMIT or
/// join). The table's name (qualified), the alias its FROM gives it, and
/// the WHERE.
struct Writable {
    table: ast::ObjectName,
    alias: Option<ast::TableAlias>,
    selection: Option<ast::Expr>,
}

fn writable(view: &View) -> Option<Writable> {
    let query = view.parsed().ok()?;
    let plain_query = query.with.is_none()
        && query.order_by.is_none()
        && query.limit_clause.is_none()
        && query.fetch.is_none()
        && query.locks.is_empty();
    let ast::SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    let no_grouping = match &select.group_by {
        ast::GroupByExpr::Expressions(expressions, modifiers) => {
            expressions.is_empty() && modifiers.is_empty()
        }
        ast::GroupByExpr::All(_) => false,
    };
    let plain_select = select.distinct.is_none()
        && select.top.is_none()
        && select.having.is_none()
        && select.named_window.is_empty()
        && select.qualify.is_none()
        && no_grouping;
    let [from] = select.from.as_slice() else {
        return None;
    };
    let ast::TableFactor::Table {
        name,
        alias,
        args: None,
        ..
    } = &from.relation
    else {
        return None;
    };
    if !plain_query || !plain_select || !from.joins.is_empty() {
        return None;
    }
    // Each column under its own name, as the view names it.
    let mut own_names = Vec::new();
    for item in &select.projection {
        match item {
            // `*`: the table's columns, under their own names.
            ast::SelectItem::Wildcard(_) => own_names.push(None),
            ast::SelectItem::UnnamedExpr(ast::Expr::Identifier(column)) => {
                own_names.push(Some(column.value.clone()))
            }
            ast::SelectItem::ExprWithAlias {
                expr: ast::Expr::Identifier(column),
                alias,
            } if column.value.eq_ignore_ascii_case(&alias.value) => {
                own_names.push(Some(column.value.clone()))
            }
            _ => return None,
        }
    }
    let names_own = match own_names.contains(&None) {
        // `SELECT * FROM t` alone: the view's columns were the table's.
        true => own_names.len() == 1,
        false => {
            own_names.len() == view.columns.len()
                && own_names.iter().zip(&view.columns).all(|(own, named)| {
                    own.as_ref()
                        .is_some_and(|own| own.eq_ignore_ascii_case(named))
                })
        }
    };
    if !names_own {
        return None;
    }
    let table = match name.0.as_slice() {
        [_] => ast::ObjectName(vec![
            ast::ObjectNamePart::Identifier(ast::Ident::with_quote('`', view.database.clone())),
            name.0[0].clone(),
        ]),
        _ => name.clone(),
    };
    Some(Writable {
        table,
        alias: alias.clone(),
        selection: select.selection.clone(),
    })
}

impl View {
    /// Whether writes go through it (information_schema's IS_UPDATABLE).
    pub fn is_updatable(&self) -> bool {
        writable(self).is_some_and(|to| to.alias.is_none())
    }
}

/// The most views a write goes through to reach its table.
const MAX_WRITE_THROUGH: usize = 32;

/// `statement` (an INSERT, UPDATE or DELETE of one table) written to the
/// table under the view it names, when it names a view a write can go
/// through (`writable`); `None` when it names no view or one a write
/// cannot go through, which the planner has refused (1471, 1288). The
/// planner asks only after finding the name a view's (`plan::compile`). An INSERT without a column list gets the view's columns;
/// an UPDATE's or DELETE's WHERE is ANDed with the view's.
pub fn write_through(
    statement: &ast::Statement,
    catalog: &Catalog,
    database: Option<&str>,
) -> SqlResult<Option<ast::Statement>> {
    let mut current: Option<ast::Statement> = None;
    for _ in 0..MAX_WRITE_THROUGH {
        let this = current.as_ref().unwrap_or(statement);
        let Some(name) = write_target(this) else {
            return Ok(current);
        };
        let (target_database, target) = crate::plan::table_name(name, database)?;
        if catalog.table(&target_database, &target).is_ok() {
            return Ok(current);
        }
        let Some(view) = catalog.view(&target_database, &target)? else {
            return Ok(current);
        };
        let Some(writable) = writable(&view) else {
            return Ok(current);
        };
        current = Some(rewritten(this, &view, writable)?);
    }
    Err(SqlError::new(
        codes::VIEW_RECURSIVE,
        "a write goes through more than 32 views",
    ))
}

/// The one table an INSERT, UPDATE or DELETE names to write.
fn write_target(statement: &ast::Statement) -> Option<&ast::ObjectName> {
    match statement {
        ast::Statement::Insert(ast::Insert {
            table: ast::TableObject::TableName(name),
            ..
        }) => Some(name),
        ast::Statement::Update { table, .. } if table.joins.is_empty() => match &table.relation {
            ast::TableFactor::Table { name, .. } => Some(name),
            _ => None,
        },
        ast::Statement::Delete(delete) if delete.tables.is_empty() && delete.using.is_none() => {
            match &delete.from {
                ast::FromTable::WithFromKeyword(from) | ast::FromTable::WithoutKeyword(from)
                    if from.len() == 1 && from[0].joins.is_empty() =>
                {
                    match &from[0].relation {
                        ast::TableFactor::Table { name, .. } => Some(name),
                        _ => None,
                    }
                }
                _ => None,
            }
        }
        _ => None,
    }
}

fn rewritten(statement: &ast::Statement, view: &View, to: Writable) -> SqlResult<ast::Statement> {
    let both = |written: Option<&ast::Expr>| match (to.selection.clone(), written) {
        (None, written) => written.cloned(),
        (Some(view), None) => Some(view),
        (Some(view), Some(written)) => Some(ast::Expr::BinaryOp {
            left: Box::new(ast::Expr::Nested(Box::new(view))),
            op: ast::BinaryOperator::And,
            right: Box::new(ast::Expr::Nested(Box::new(written.clone()))),
        }),
    };
    // The statement's alias, else the view's name for its table (so
    // `v.c` still names a column); the view's WHERE then reads its own
    // table's columns unqualified.
    let relation = |alias: &Option<ast::TableAlias>| ast::TableFactor::Table {
        name: to.table.clone(),
        alias: alias.clone().or_else(|| {
            Some(ast::TableAlias {
                name: ast::Ident::new(view.name.clone()),
                columns: Vec::new(),
            })
        }),
        args: None,
        with_hints: Vec::new(),
        version: None,
        with_ordinality: false,
        partitions: Vec::new(),
        json_path: None,
        sample: None,
        index_hints: Vec::new(),
    };
    let view_alias_used = to.alias.is_some();
    if view_alias_used {
        // The view's WHERE names its table by an alias of its own.
        return Err(SqlError::unsupported(format!(
            "a write through view '{}', whose table has an alias",
            view.name
        )));
    }
    let mut statement = statement.clone();
    match &mut statement {
        ast::Statement::Insert(insert) => {
            insert.table = ast::TableObject::TableName(to.table.clone());
            if insert.columns.is_empty() {
                insert.columns = view
                    .columns
                    .iter()
                    .map(|c| ast::Ident::new(c.clone()))
                    .collect();
            }
        }
        ast::Statement::Update {
            table,
            assignments,
            selection,
            ..
        } => {
            for assignment in assignments.iter() {
                if let ast::AssignmentTarget::ColumnName(name) = &assignment.target {
                    let column = crate::plan::last_ident(name);
                    if !view.columns.iter().any(|c| c.eq_ignore_ascii_case(&column)) {
                        return Err(SqlError::bad_field(&column, "field list"));
                    }
                }
            }
            let ast::TableFactor::Table { alias, .. } = &table.relation else {
                unreachable!("write_target found a table")
            };
            table.relation = relation(alias);
            *selection = both(selection.as_ref());
        }
        ast::Statement::Delete(delete) => {
            let (ast::FromTable::WithFromKeyword(from) | ast::FromTable::WithoutKeyword(from)) =
                &mut delete.from;
            let ast::TableFactor::Table { alias, .. } = &from[0].relation else {
                unreachable!("write_target found a table")
            };
            from[0].relation = relation(alias);
            delete.selection = both(delete.selection.as_ref());
        }
        _ => unreachable!("write_target names a write"),
    }
    Ok(statement)
}

impl Catalog {
    /// What `database.name` names where a table or a view may stand: the
    /// table, else the view (`Err`), else 1146. The view's row is read
    /// before a table the cluster lacks is looked into for a TRUNCATE to
    /// finish (which a view's name never has), so that a statement
    /// reading a view makes one round trip fewer.
    pub fn table_or_view(
        &self,
        database: &str,
        name: &str,
    ) -> SqlResult<Result<Arc<SqlTable>, View>> {
        match self.load_table(database, name, false) {
            Err(error) if error.code == codes::NO_SUCH_TABLE => {}
            other => return other.map(Ok),
        }
        if let Some(view) = self.view(database, name)? {
            return Ok(Err(view));
        }
        match self.finish_truncate(database, name)? {
            true => self.table(database, name).map(Ok),
            false => Err(SqlError::no_such_table(database, name)),
        }
    }

    /// The view `database.name`, if there is one (read now, never cached).
    pub fn view(&self, database: &str, name: &str) -> SqlResult<Option<View>> {
        if crate::information_schema::is_it(database) {
            return Ok(None);
        }
        let full = cluster_name(database, name);
        let json = self.read_system_row(VIEWS, &full, |row| {
            row.and_then(|row| row.get("definition")?.as_bytes().map(<[u8]>::to_vec))
        })?;
        Ok(json.and_then(|json| View::decode(&full, &json)))
    }

    /// The views of `database` (every database's for `None`), sorted by
    /// database and name.
    pub fn views_of(&self, database: Option<&str>) -> SqlResult<Vec<View>> {
        let mut views: Vec<View> = self
            .system_rows(VIEWS)?
            .iter()
            .filter_map(|row| {
                let full = row.get("name")?.as_str()?;
                View::decode(full, row.get("definition")?.as_bytes()?)
            })
            .filter(|view| database.is_none_or(|database| view.database == database))
            .collect();
        views.sort_by(|a, b| (&a.database, &a.name).cmp(&(&b.database, &b.name)));
        Ok(views)
    }

    /// Creates `view` (replacing the one of its name with `or_replace`).
    /// 1050 when a table has its name, or a view and not `or_replace`.
    pub fn create_view(&self, view: &View, or_replace: bool) -> SqlResult<()> {
        self.require_database(&view.database)?;
        crate::catalog::check_name("table", &view.name)?;
        let full = cluster_name(&view.database, &view.name);
        let exists = || {
            SqlError::new(
                codes::TABLE_EXISTS,
                format!("Table '{}' already exists", view.name),
            )
        };
        if self.cluster().table(&full).is_ok() {
            return Err(exists());
        }
        let table = self.system_table(VIEWS)?;
        let row = [
            ("name", client::Value::from(full.as_str())),
            ("definition", client::Value::Bytes(view.encode()?)),
        ];
        let mut transaction = self.cluster().transaction();
        let written = match or_replace {
            true => transaction.write(&table, &row),
            false => transaction.insert(&table, &row),
        }
        .and_then(|_| transaction.execute(Commit::Yes));
        match written {
            Ok(_) => Ok(()),
            Err(error) if error.code() == Some(client::ErrorCode::DuplicateKey) => Err(exists()),
            Err(error) => Err(SqlError::from_client(&error, VIEWS)),
        }
    }

    /// Drops view `database.name`; whether there was one.
    pub fn drop_view(&self, database: &str, name: &str) -> SqlResult<bool> {
        let table = self.system_table(VIEWS)?;
        let key = [client::Value::from(cluster_name(database, name).as_str())];
        let mut transaction = self.cluster().transaction();
        let dropped: Result<bool, client::ClientError> = (|| {
            let read = transaction.read_if_exists(&table, &key, LockMode::Exclusive)?;
            transaction.execute(Commit::No)?;
            let found = transaction.get(read).is_some();
            if found {
                transaction.delete(&table, &key)?;
            }
            transaction.execute(Commit::Yes)?;
            Ok(found)
        })();
        dropped.map_err(|error| SqlError::from_client(&error, VIEWS))
    }

    /// The error a write naming `database.name` gets for `missing` (the
    /// table not found): a view's is 1288 (1471 for INSERT), not 1146.
    pub fn not_a_table(
        &self,
        database: &str,
        name: &str,
        command: &str,
        missing: SqlError,
    ) -> SqlError {
        if missing.code != codes::NO_SUCH_TABLE {
            return missing;
        }
        match self.view(database, name) {
            Ok(Some(_)) if command == "INSERT" => SqlError::new(
                codes::NON_INSERTABLE_TABLE,
                format!("The target table {name} of the INSERT is not insertable-into"),
            ),
            Ok(Some(_)) => SqlError::new(
                codes::NON_UPDATABLE_TABLE,
                format!("The target table {name} of the {command} is not updatable"),
            ),
            _ => missing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_definition_round_trips_and_its_text_reads_back() {
        let view = View {
            database: "shop".into(),
            name: "cheap".into(),
            columns: vec!["id".into(), "price".into()],
            query: "SELECT id, price FROM item WHERE price < 10".into(),
            definer: "'root'@'localhost'".into(),
        };
        let json = view.encode().unwrap();
        assert_eq!(View::decode("shop/cheap", &json), Some(view));
        // A backslash in a string is kept: the text reads back as itself.
        let query = parse_query(r"SELECT 'a\\b' REGEXP '^\\d$' AS m").unwrap();
        let text = text_of(&query).unwrap();
        assert_eq!(parse_query(&text).unwrap(), query);
        assert!(View::decode("no-slash", &json).is_none());
        assert!(View::decode("a/b", b"{\"columns\": 3}").is_none());
    }
}
