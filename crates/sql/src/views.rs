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

use crate::catalog::{cluster_name, Catalog};
use crate::error::{codes, SqlError, SqlResult};
use client::{ColumnDef, ColumnType, Commit, LockMode, TableDef};
use sqlparser::ast;

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

impl Catalog {
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
