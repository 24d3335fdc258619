//! A session's schema statements: CREATE TABLE (of columns, LIKE, AS
//! SELECT, PARTITION BY KEY), ALTER TABLE, CREATE VIEW, and DROP of
//! tables, views, databases and indexes, with the privileges each needs
//! (the work itself is `ddl`'s, `alter_table`'s, `views`' and
//! `catalog`'s).

use super::{object_name, Session};
use crate::accounts::Privileges;
use crate::catalog::{Catalog, SqlTable};
use crate::error::{codes, SqlError, SqlResult};
use crate::plan::{self, table_name, Plan};
use crate::result::Response;
use crate::{ddl, views};
use sqlparser::ast;
use std::sync::Arc;

impl Session {
    /// CREATE TABLE: of columns, LIKE another table, or AS SELECT.
    pub(super) fn create_table(&mut self, create: &ast::CreateTable) -> SqlResult<Response> {
        let engine = Arc::clone(&self.engine);
        let catalog = &engine.catalog;
        let (database, table) = table_name(&create.name, self.database.as_deref())?;
        self.require("CREATE", &database, &table, Privileges::CREATE)?;
        self.commit_open()?;
        if let Some(
            ast::CreateTableLikeKind::Plain(like) | ast::CreateTableLikeKind::Parenthesized(like),
        ) = &create.like
        {
            let (source_database, source) = table_name(&like.name, self.database.as_deref())?;
            self.require("SELECT", &source_database, &source, Privileges::SELECT)?;
            let source = catalog.table(&source_database, &source)?;
            let existed =
                ddl::create_table_like(catalog, &database, &table, &source, create.if_not_exists)?;
            self.note(existed);
            return Ok(Response::ok());
        }
        if let Some(query) = &create.query {
            return self.create_table_select(create, query, &database, &table);
        }
        let existed = ddl::create_table(catalog, create, &database, &table, &[])?;
        self.note(existed);
        Ok(Response::ok())
    }

    /// CREATE TABLE ... [AS] SELECT: the table made with the query's
    /// columns after its own (`ddl::create_for_query`), then filled by an
    /// INSERT ... SELECT in a transaction of its own. A failed INSERT
    /// drops the table again. Not MySQL 8's atomic CREATE ... SELECT: the
    /// table is seen while it fills, and a SQL node that dies between the
    /// two leaves it (docs/design/0027-sql-node.md).
    fn create_table_select(
        &mut self,
        create: &ast::CreateTable,
        query: &ast::Query,
        database: &str,
        table: &str,
    ) -> SqlResult<Response> {
        let engine = Arc::clone(&self.engine);
        let catalog = &engine.catalog;
        let compiled = self.compile(&ast::Statement::Query(Box::new(query.clone())))?;
        let Plan::Select(select) = &compiled.plan else {
            return Err(SqlError::parse("CREATE TABLE ... SELECT needs a query"));
        };
        if !compiled.parameter_order.is_empty() {
            return Err(SqlError::new(
                codes::UNSUPPORTED_PS,
                "This command is not supported in the prepared statement protocol yet: placeholders in CREATE TABLE ... SELECT",
            ));
        }
        self.authorize(&compiled.plan)?;
        let made = ddl::create_for_query(create, &select.columns)?;
        let existed = ddl::create_table(catalog, &made, database, table, &[])?;
        if existed.is_some() {
            // IF NOT EXISTS over a table that exists: no row goes in.
            self.note(existed);
            return Ok(Response::ok());
        }
        let quoted = |name: &str| format!("`{}`", name.replace('`', "``"));
        let columns: Vec<String> = select.columns.iter().map(|c| quoted(&c.name)).collect();
        let text = format!(
            "INSERT INTO {}.{} ({}) SELECT 1",
            quoted(database),
            quoted(table),
            columns.join(", ")
        );
        let filled = crate::parse::parse(&text).and_then(|mut statements| {
            let Some(ast::Statement::Insert(mut insert)) = statements.pop() else {
                return Err(SqlError::parse("CREATE TABLE ... SELECT's INSERT"));
            };
            insert.source = Some(Box::new(query.clone()));
            let result = self.run(&ast::Statement::Insert(insert), None, &[]);
            // DDL commits as it ends (MySQL's implicit commit).
            result.and_then(|response| self.commit_open().map(|()| response))
        });
        if filled.is_err() {
            self.roll_back_open();
            let _ = catalog.drop_table(database, table);
        }
        filled
    }

    /// CREATE TABLE ... PARTITION BY KEY (columns).
    pub(super) fn create_partitioned(
        &mut self,
        text: &str,
        columns: &[String],
    ) -> SqlResult<Response> {
        let statements = crate::parse::parse(text)?;
        let [ast::Statement::CreateTable(create)] = statements.as_slice() else {
            return Err(SqlError::parse("PARTITION BY KEY ends one CREATE TABLE"));
        };
        let (database, table) = table_name(&create.name, self.database.as_deref())?;
        self.require("CREATE", &database, &table, Privileges::CREATE)?;
        self.commit_open()?;
        let engine = Arc::clone(&self.engine);
        let existed = ddl::create_table(&engine.catalog, create, &database, &table, columns)?;
        self.note(existed);
        Ok(Response::ok())
    }

    /// ALTER TABLE (docs/design/0036-alter-table.md).
    pub(super) fn alter_table(
        &mut self,
        name: &ast::ObjectName,
        if_exists: bool,
        operations: &[ast::AlterTableOperation],
    ) -> SqlResult<Response> {
        let engine = Arc::clone(&self.engine);
        let catalog = &engine.catalog;
        let (database, table) = table_name(name, self.database.as_deref())?;
        self.require("ALTER", &database, &table, Privileges::ALTER)?;
        self.commit_open()?;
        match crate::alter_table::alter_table(
            catalog,
            &engine.auto_increment,
            &database,
            &table,
            operations,
        ) {
            Err(error) if error.code == codes::NO_SUCH_TABLE && if_exists => {
                self.note(Some(error));
                Ok(Response::ok())
            }
            result => result.map(|()| Response::ok()),
        }
    }

    /// CREATE [OR REPLACE] VIEW (docs/design/0037-views.md).
    pub(super) fn create_view(
        &mut self,
        or_replace: bool,
        name: &ast::ObjectName,
        columns: &[ast::ViewColumnDef],
        query: &ast::Query,
    ) -> SqlResult<Response> {
        let engine = Arc::clone(&self.engine);
        let catalog = &engine.catalog;
        let (database, view) = table_name(name, self.database.as_deref())?;
        self.require("CREATE VIEW", &database, &view, Privileges::CREATE)?;
        if or_replace {
            // Replacing a view drops it (MySQL asks for DROP too).
            self.require("CREATE VIEW", &database, &view, Privileges::DROP)?;
        }
        self.commit_open()?;
        let definer = format!(
            "`{}`@`{}`",
            self.account.user.replace('`', "``"),
            self.account.host.replace('`', "``")
        );
        let (definition, plan) =
            views::definition(catalog, &database, &view, columns, query, definer)?;
        // The creator reads what the view reads.
        self.authorize(&Plan::Select(Box::new(plan)))?;
        catalog.create_view(&definition, or_replace)?;
        Ok(Response::ok())
    }

    /// DROP TABLE's and DROP VIEW's answer when `missing` were not there:
    /// 1051 naming them, or with IF EXISTS a note of it.
    fn unknown_tables(&mut self, missing: &[String], if_exists: bool) -> SqlResult<Response> {
        let unknown = SqlError::new(
            codes::BAD_TABLE,
            format!("Unknown table '{}'", missing.join(",")),
        );
        match (missing.is_empty(), if_exists) {
            (true, _) => Ok(Response::ok()),
            (false, false) => Err(unknown),
            (false, true) => {
                self.note(Some(unknown));
                Ok(Response::ok())
            }
        }
    }

    pub(super) fn drop_objects(
        &mut self,
        object_type: ast::ObjectType,
        if_exists: bool,
        names: &[ast::ObjectName],
        table: Option<&ast::ObjectName>,
    ) -> SqlResult<Response> {
        let engine = Arc::clone(&self.engine);
        let catalog = &engine.catalog;
        self.commit_open()?;
        match object_type {
            ast::ObjectType::Table => {
                let mut missing = Vec::new();
                for name in names {
                    let (database, table) = table_name(name, self.database.as_deref())?;
                    self.require("DROP", &database, &table, Privileges::DROP)?;
                    match catalog.drop_table(&database, &table) {
                        Ok(()) => {}
                        Err(error) if error.code == codes::BAD_TABLE => {
                            missing.push(format!("{database}.{table}"))
                        }
                        Err(error) => return Err(error),
                    }
                }
                self.unknown_tables(&missing, if_exists)
            }
            ast::ObjectType::View => {
                // Every name checked before the first view goes.
                let mut named = Vec::with_capacity(names.len());
                for name in names {
                    let (database, view) = table_name(name, self.database.as_deref())?;
                    self.require("DROP", &database, &view, Privileges::DROP)?;
                    if catalog.view(&database, &view)?.is_none()
                        && catalog.table(&database, &view).is_ok()
                    {
                        return Err(not_a_view(&database, &view));
                    }
                    named.push((database, view));
                }
                let mut missing = Vec::new();
                for (database, view) in named {
                    if !catalog.drop_view(&database, &view)? {
                        missing.push(format!("{database}.{view}"));
                    }
                }
                self.unknown_tables(&missing, if_exists)
            }
            ast::ObjectType::Database | ast::ObjectType::Schema => {
                let [name] = names else {
                    return Err(SqlError::parse("DROP DATABASE names one database"));
                };
                let name = object_name(name);
                self.require("DROP", &name, "*", Privileges::DROP)?;
                let dropped = catalog.drop_database(&name, if_exists)?;
                if self.database.as_deref() == Some(name.as_str()) && dropped.is_some() {
                    self.database = None;
                }
                if dropped.is_none() {
                    self.note(Some(SqlError::new(
                        codes::DB_DROP_EXISTS,
                        format!("Can't drop database '{name}'; database doesn't exist"),
                    )));
                }
                Ok(Response::affected(dropped.unwrap_or(0) as u64))
            }
            ast::ObjectType::Index => {
                let Some(table) = table else {
                    return Err(SqlError::parse("DROP INDEX needs ON table"));
                };
                let (database, table) = table_name(table, self.database.as_deref())?;
                self.require("INDEX", &database, &table, Privileges::INDEX)?;
                for name in names {
                    ddl::drop_index(catalog, &database, &table, &name.to_string())?;
                }
                Ok(Response::ok())
            }
            other => Err(SqlError::unsupported(format!("DROP {other}"))),
        }
    }
}

/// The table `database.table`, or the table a view of that name reads
/// as (DESCRIBE and SHOW COLUMNS of a view).
pub(super) fn table_or_view(
    catalog: &Catalog,
    database: &str,
    table: &str,
) -> SqlResult<Arc<SqlTable>> {
    match catalog.table_or_view(database, table)? {
        Ok(table) => Ok(table),
        Err(view) => plan::view_table(&view, catalog),
    }
}

/// 1347: `database.name` is a table where a view was named.
pub(super) fn not_a_view(database: &str, name: &str) -> SqlError {
    SqlError::new(
        codes::WRONG_OBJECT,
        format!("'{database}.{name}' is not of type 'VIEW'"),
    )
}
