//! A connection's session: its database, autocommit, open transaction,
//! prepared statements and variables, and the dispatch of each statement
//! to what runs it (docs/design/0027-sql-node.md, "Transactions").
//!
//! Transactions: in autocommit each data statement is its own cluster
//! transaction, its last round trip committing; BEGIN (or autocommit off)
//! opens one that the statements share until COMMIT or ROLLBACK, begun
//! lazily at its first statement. Isolation is READ COMMITTED, as NDB's:
//! a plain SELECT reads committed rows without locks, FOR UPDATE and
//! FOR SHARE lock. An error that aborted the cluster transaction (a lock
//! wait timeout, a node failure) ends the SQL transaction: the client
//! hears 1205 or 1213 and starts again. A statement in autocommit that
//! failed with a temporary error before anything committed is retried
//! here, a few times, before the client hears of it.

use crate::accounts::{self, Account, Grants, Privileges};

use crate::diagnostics::{Diagnostics, Level};
use crate::error::{codes, SqlError, SqlResult};
use crate::execute::{self, Run, StatementCounts};
use crate::locked_rows::LockedRows;
use crate::plan::{self, table_name, AccessPlan, Compiled, Plan};
use crate::result::{OutputColumn, Response};
use crate::value::Value;
use crate::{access, ddl, show, value, Engine, Statistics};
use client::{Commit, LockMode, Transaction, TransactionState};
use foldhash::{HashMap, HashMapExt};
use sqlparser::ast;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use environment::{entropy_random, SessionView};

mod environment;
mod explain;
mod privileges;
mod schema;
use schema::{not_a_view, table_or_view};
mod settings;
mod transactions;
mod warnings;

/// Attempts of an autocommit statement that meets temporary errors.
const AUTOCOMMIT_ATTEMPTS: u32 = 4;

/// How long a session's copy of its grants is used before it is read
/// again.
const GRANTS_FRESH: Duration = Duration::from_secs(1);

/// A prepared statement.
#[derive(Clone)]
pub struct Prepared {
    /// The statement.
    statement: Arc<ast::Statement>,
    /// Its plan, for a data statement (compiled again when stale).
    compiled: Option<Arc<Compiled>>,
    /// Placeholders.
    pub params: usize,
    /// The result columns (empty when it returns none or they are only
    /// known when it runs).
    pub columns: Arc<[OutputColumn]>,
}

/// One connection's state.
pub struct Session {
    engine: Arc<Engine>,
    /// The connection id.
    id: u32,

    database: Option<String>,
    autocommit: bool,
    /// Inside BEGIN ... COMMIT (or with autocommit off).
    explicit: bool,
    /// The open transaction's savepoints, oldest first (design 0027,
    /// "Transactions": kept as names; ROLLBACK TO one rolls the whole
    /// transaction back).
    savepoints: Vec<String>,
    transaction: Option<Transaction<'static>>,
    variables: HashMap<String, Value>,
    user_variables: HashMap<String, Value>,
    last_insert_id: u64,
    /// The conditions the last statement raised (SHOW WARNINGS).
    diagnostics: std::cell::RefCell<Diagnostics>,
    /// The warning count of each statement of the last query.
    statement_warnings: Vec<u16>,
    /// The running statement computes values to store: a warning is an
    /// error (`Environment::set_storing`).
    storing: std::cell::Cell<bool>,
    /// What LAST_INSERT_ID(x) set during the running statement.
    insert_id_set: std::cell::Cell<Option<u64>>,
    row_count: i64,
    prepared: HashMap<u32, Prepared>,
    next_statement_id: u32,
    /// What the last statement fetched and sent.
    last_counts: StatementCounts,
    /// Rows fetched by this session's statements.
    fetched_total: u64,
    /// Set by KILL QUERY from another connection: the running statement
    /// stops at its next check (between rows and round trips).
    interrupt: Arc<AtomicBool>,
    /// Rows the key lookups of the running query's leading statements
    /// read together ahead of them (`read_lookups_ahead`); emptied before
    /// any other statement runs, and between queries.
    read_ahead: Vec<ReadAhead>,
    /// With autocommit off, a SELECT ran on its own (`run_compiled`):
    /// MySQL counts the session in a transaction from then on, until
    /// COMMIT or ROLLBACK, though it holds no cluster transaction.
    reads_in_transaction: bool,
    /// The rows the open transaction holds locked, as it last saw them.
    locked_rows: LockedRows,
    /// `transaction_allow_batching`: INSERTs inside a transaction wait
    /// for its next round trip.
    batch_inserts: bool,
    /// `time_zone` as seconds east of UTC.
    zone: i64,
    /// When the running statement began: NOW() is the same all through
    /// it, as MySQL's.
    statement_started: std::time::SystemTime,
    /// RAND()'s generator, seeded from the process's randomness when the
    /// session begins (the SQL node is at the edge: no block's
    /// determinism is at stake).
    random: std::cell::Cell<crate::functions::math::MySqlRandom>,
    /// The running statement's RAND(n) generators, one per call.
    seeded_random:
        std::cell::RefCell<HashMap<crate::expr::RandomSeed, crate::functions::math::MySqlRandom>>,
    /// UUID()'s last timestamp, so that two in one tick differ.
    uuid_last: std::cell::Cell<u64>,
    /// The account it logged in as.
    account: Account,
    /// What the account was granted, as read at `grants_read`.
    grants: Grants,
    grants_read: Instant,
}

/// A key lookup read ahead of its statement.
struct ReadAhead {
    table: Arc<client::Table>,
    /// The key as the cluster stores it.
    key: Vec<client::Value>,
    /// The row, or `None`: no row has the key.
    row: Option<Vec<Value>>,
}

impl Session {
    /// A session for connection `id` of `account` (authenticated), in
    /// `database` if given (which must exist, and where it must hold a
    /// privilege); `interrupt` is the flag KILL QUERY sets.
    pub fn new(
        engine: Arc<Engine>,
        id: u32,
        account: Account,
        database: Option<&str>,
        interrupt: Arc<AtomicBool>,
    ) -> SqlResult<Session> {
        let grants = engine.accounts.grants(&account)?;
        let mut session = Session {
            engine,
            id,
            account,
            grants,
            grants_read: Instant::now(),
            database: None,
            autocommit: true,
            explicit: false,
            savepoints: Vec::new(),
            transaction: None,
            variables: HashMap::new(),
            user_variables: HashMap::new(),
            zone: 0,
            statement_started: std::time::SystemTime::now(),
            random: std::cell::Cell::new(entropy_random()),
            seeded_random: std::cell::RefCell::new(HashMap::new()),
            uuid_last: std::cell::Cell::new(0),
            last_insert_id: 0,
            insert_id_set: std::cell::Cell::new(None),
            diagnostics: std::cell::RefCell::new(Diagnostics::default()),
            statement_warnings: Vec::new(),
            storing: std::cell::Cell::new(false),
            row_count: 0,
            prepared: HashMap::new(),
            next_statement_id: 1,
            last_counts: StatementCounts::default(),
            fetched_total: 0,
            interrupt,
            read_ahead: Vec::new(),
            reads_in_transaction: false,
            locked_rows: LockedRows::default(),
            batch_inserts: false,
        };
        if let Some(database) = database {
            session.use_database(database)?;
        }
        Ok(session)
    }

    /// The current database.
    pub fn database(&self) -> Option<&str> {
        self.database.as_deref()
    }

    /// Whether a transaction is open (SERVER_STATUS_IN_TRANS).
    pub fn in_transaction(&self) -> bool {
        // After BEGIN at once; with autocommit off, once a statement
        // opened one.
        (self.explicit && self.autocommit)
            || self.transaction.is_some()
            || self.reads_in_transaction
    }

    /// Seconds an idle connection is kept: `wait_timeout` (MySQL's
    /// default 28,800 unless the session set it).
    pub fn wait_timeout(&self) -> u64 {
        self.variables
            .get("wait_timeout")
            .and_then(|value| {
                value
                    .as_u64()
                    .or_else(|| value::display(value).parse().ok())
            })
            .unwrap_or(28_800)
    }

    /// Whether autocommit is on (SERVER_STATUS_AUTOCOMMIT).
    pub fn autocommit(&self) -> bool {
        self.autocommit
    }

    /// USE / COM_INIT_DB.
    pub fn use_database(&mut self, name: &str) -> SqlResult<()> {
        // COM_INIT_DB is a statement too: it begins its own diagnostics.
        self.diagnostics.get_mut().clear();
        self.engine.catalog.require_database(name)?;
        self.refresh_grants()?;
        if !self.grants.any_in(name) && !crate::information_schema::is_it(name) {
            return Err(self.database_denied(name));
        }
        self.database = Some(name.to_string());
        Ok(())
    }

    fn statistics(&self) -> &Statistics {
        &self.engine.statistics
    }

    /// Runs the statements of `text` (COM_QUERY): a result per statement,
    /// stopping at the first error, which is the last. Several statements
    /// only when the client allowed them (`multi`: CLIENT_MULTI_STATEMENTS),
    /// so text built by a client that did not cannot smuggle in a second.
    pub fn query(&mut self, text: &str, multi: bool) -> Vec<SqlResult<Response>> {
        self.statement_warnings.clear();
        if let Some(shown) = warnings::parse(text) {
            // SHOW WARNINGS and its kin read the last statement's
            // conditions and leave them.
            self.statistics().queries.fetch_add(1, Ordering::Relaxed);
            let response = self.show_diagnostics(shown);
            self.statement_warnings.push(0);
            return vec![Ok(response)];
        }
        if crate::parse::is_keys_switch(text) {
            self.statistics().queries.fetch_add(1, Ordering::Relaxed);
            self.diagnostics.get_mut().clear();
            return self.alone(Ok(Response::ok()));
        }
        if let Some((create, columns)) = crate::parse::partition_by_key(text) {
            self.statistics().queries.fetch_add(1, Ordering::Relaxed);
            self.diagnostics.get_mut().clear();
            let result = self.create_partitioned(&create, &columns);
            return self.alone(result);
        }
        if let Some(parsed) = accounts::parse(text) {
            self.statistics().queries.fetch_add(1, Ordering::Relaxed);
            self.diagnostics.get_mut().clear();
            let result = parsed.and_then(|statement| self.account_statement(&statement));
            return self.alone(result);
        }
        let statements = match self.engine.parse_cache.parse(text) {
            Ok(statements) => statements,
            Err(error) => {
                self.diagnostics.get_mut().clear();
                return self.alone(Err(error));
            }
        };
        if statements.is_empty() {
            self.diagnostics.get_mut().clear();
            return self.alone(Err(SqlError::new(1065, "Query was empty")));
        }
        if statements.len() > 1 && !multi {
            let error = SqlError::parse(
                "several statements in one query, and the client did not ask for them (CLIENT_MULTI_STATEMENTS)",
            );
            self.diagnostics.get_mut().clear();
            return self.alone(Err(error));
        }
        let (compiled, leading) = self.read_lookups_ahead(&statements);
        let mut results = Vec::with_capacity(statements.len());
        for (index, (statement, compiled)) in statements.iter().zip(compiled).enumerate() {
            if index == leading {
                // Past the statements read for: later ones read for
                // themselves (after a write, a SLEEP, ...).
                self.read_ahead.clear();
            }
            let result = self.run(statement, compiled, &[]);
            let failed = result.is_err();
            results.push(result);
            if failed {
                break;
            }
        }
        self.read_ahead.clear();
        results
    }

    /// Key lookups batched across statements (docs/design/0027-sql-node.md,
    /// "Plans"): the leading statements of a multi-statement query that
    /// are each one key lookup without a lock, and would run on their own
    /// (no transaction holding anything: autocommit, or nothing written or
    /// locked yet), have their rows read in one cluster transaction, one
    /// round trip, before the first of them runs; each then takes its row
    /// from `read_ahead`. The run stops at the first other statement, so
    /// no write or SET comes between a read and its statement, and the
    /// client sent them all at once: reading them together is a READ
    /// COMMITTED execution of the query. Returns the statements' plans,
    /// as far as they were compiled, for `run` to reuse, and how many
    /// leading statements the rows read are for (only those may use them).
    fn read_lookups_ahead(
        &mut self,
        statements: &[ast::Statement],
    ) -> (Vec<Option<Arc<Compiled>>>, usize) {
        let mut compiled: Vec<Option<Arc<Compiled>>> = vec![None; statements.len()];
        let alone = self
            .transaction
            .as_ref()
            .is_none_or(|open| open.holds_nothing());
        if statements.len() < 2 || !alone {
            return (compiled, 0);
        }
        let mut lookups: Vec<(Arc<crate::catalog::SqlTable>, Vec<client::Value>)> = Vec::new();
        for (index, statement) in statements.iter().enumerate() {
            if !matches!(statement, ast::Statement::Query(_)) {
                break;
            }
            let Ok(plan) = self.compile(statement) else {
                break;
            };
            let lookup = match &plan.plan {
                Plan::Select(select) if select.lock == LockMode::CommittedRead => {
                    match (&select.table, &select.access) {
                        _ if !select.joins.is_empty()
                            || !select.group_by.is_empty()
                            || select.union.is_some() =>
                        {
                            None
                        }
                        (Some(table), AccessPlan::PrimaryKey(exprs)) => {
                            let view = SessionView { session: self };
                            match access::lookup_key(table, &table.key_columns(), exprs, &[], &view)
                            {
                                Ok(Ok(Some(key))) => Some((Arc::clone(table), key)),
                                _ => None,
                            }
                        }
                        _ => None,
                    }
                }
                _ => None,
            };
            compiled[index] = Some(plan);
            match lookup {
                Some(lookup) => lookups.push(lookup),
                None => break,
            }
        }
        let leading = lookups.len();
        if leading < 2 {
            return (compiled, 0);
        }
        let mut transaction = self.engine.cluster().transaction();
        let queued: Result<Vec<_>, _> = lookups
            .iter()
            .map(|(table, key)| {
                transaction.read_if_exists(&table.table, key, LockMode::CommittedRead)
            })
            .collect();
        // On any error the statements read for themselves (and report it).
        let Ok(reads) = queued else {
            return (compiled, 0);
        };
        if transaction.execute(Commit::Yes).is_err() {
            return (compiled, 0);
        }
        self.statistics()
            .lookups_read_ahead
            .fetch_add(lookups.len() as u64, Ordering::Relaxed);
        let zone = self.zone_offset();
        for ((table, key), read) in lookups.into_iter().zip(reads) {
            let row = transaction
                .get(read)
                .map(|row| access::load_row(&table, row, zone));
            self.read_ahead.push(ReadAhead {
                table: Arc::clone(&table.table),
                key,
                row,
            });
        }
        (compiled, leading)
    }

    /// COM_STMT_PREPARE: the statement's id, parameter count and columns.
    pub fn prepare(&mut self, text: &str) -> SqlResult<(u32, Prepared)> {
        self.diagnostics.get_mut().clear();
        let prepared = self.prepare_text(text);
        if let Err(error) = &prepared {
            self.diagnostics
                .get_mut()
                .raise(Level::Error, error.code, error.message.as_str());
        }
        prepared
    }

    fn prepare_text(&mut self, text: &str) -> SqlResult<(u32, Prepared)> {
        let mut statements = crate::parse::parse(text)?;
        if statements.len() != 1 {
            return Err(SqlError::new(
                codes::UNSUPPORTED_PS,
                "This command is not supported in the prepared statement protocol yet: one statement at a time",
            ));
        }
        let statement = Arc::new(statements.pop().expect("one statement"));
        let compiled = plan::compile(&statement, &self.engine.catalog, self.database.as_deref())?
            .map(Arc::new);
        let (params, columns) = match &compiled {
            Some(compiled) => (
                compiled.parameter_order.len(),
                match &compiled.plan {
                    Plan::Select(select) => Arc::clone(&select.columns),
                    _ => Arc::from(Vec::new()),
                },
            ),
            None => (
                count_placeholders(&statement.to_string()),
                Arc::from(Vec::new()),
            ),
        };
        if compiled.is_none() && params > 0 {
            return Err(SqlError::new(
                codes::UNSUPPORTED_PS,
                "This command is not supported in the prepared statement protocol yet: placeholders outside SELECT, INSERT, UPDATE and DELETE",
            ));
        }
        let prepared = Prepared {
            statement,
            compiled: compiled.filter(|compiled| !compiled.names_view()),
            params,
            columns,
        };
        let id = self.next_statement_id;
        self.next_statement_id = self.next_statement_id.wrapping_add(1).max(1);
        self.prepared.insert(id, prepared.clone());
        Ok((id, prepared))
    }

    /// The prepared statement `id`.
    pub fn prepared(&self, id: u32) -> Option<&Prepared> {
        self.prepared.get(&id)
    }

    /// COM_STMT_CLOSE.
    pub fn close_statement(&mut self, id: u32) {
        self.prepared.remove(&id);
    }

    /// COM_STMT_EXECUTE with `params` in statement order.
    pub fn execute(&mut self, id: u32, params: &[Value]) -> SqlResult<Response> {
        self.statement_warnings.clear();
        let Some((statement, compiled)) = self
            .prepared
            .get(&id)
            .map(|p| (Arc::clone(&p.statement), p.compiled.clone()))
        else {
            let error = SqlError::new(
                codes::UNKNOWN_STMT_HANDLER,
                format!("Unknown prepared statement handler ({id}) given to mysqld_stmt_execute"),
            );
            self.statistics().error(error.code);
            let diagnostics = self.diagnostics.get_mut();
            diagnostics.clear();
            diagnostics.raise(Level::Error, error.code, error.message.as_str());
            return Err(error);
        };
        let result = self.run(&statement, compiled, params);
        if let Err(error) = &result {
            if error.schema_changed {
                // The plan named a table since changed: plan again next time.
                if let Some(entry) = self.prepared.get_mut(&id) {
                    entry.compiled = None;
                }
            }
        }
        result
    }

    /// The connection closes: an open transaction rolls back, and the
    /// session's user-level locks are released.
    pub fn end(&mut self) {
        if let Some(mut transaction) = self.transaction.take() {
            let _ = transaction.rollback();
        }
        self.engine.user_locks.release_all(self.id);
        self.explicit = false;
        self.savepoints.clear();
        self.reads_in_transaction = false;
    }

    /// Runs one statement, counting it.
    fn run(
        &mut self,
        statement: &ast::Statement,
        compiled: Option<Arc<Compiled>>,
        params: &[Value],
    ) -> SqlResult<Response> {
        let statistics = &self.engine.statistics;
        statistics.queries.fetch_add(1, Ordering::Relaxed);
        // A statement that reads the diagnostics leaves them; any other
        // begins its own.
        self.storing.set(false);
        let diagnostic = warnings::reads_diagnostics(statement);
        if !diagnostic {
            self.diagnostics.get_mut().clear();
        }
        // A KILL QUERY that came between statements stops nothing.
        self.interrupt.store(false, Ordering::Relaxed);
        self.statement_started = std::time::SystemTime::now();
        self.seeded_random.borrow_mut().clear();
        // SHOW STATUS reports the last data statement's counts: only a
        // data statement replaces them.
        self.insert_id_set.set(None);
        let mut result = self.dispatch(statement, compiled, params);
        // LAST_INSERT_ID(x) sets the insert id the statement reports and
        // the session remembers.
        if let (Some(id), Ok(response)) = (self.insert_id_set.take(), &mut result) {
            self.last_insert_id = id;
            if let Response::Ok { last_insert_id, .. } = response {
                *last_insert_id = id;
            }
        }
        if let Err(error) = &mut result {
            self.word_duplicate(error);
        }
        if let Err(error) = &result {
            self.diagnostics
                .get_mut()
                .raise(Level::Error, error.code, error.message.as_str());
        }
        // A diagnostic statement raised nothing of its own (its packets
        // say 0, as MySQL's).
        let raised = match diagnostic {
            true => 0,
            false => self.warning_count(),
        };
        self.statement_warnings.push(raised);
        let statistics = &self.engine.statistics;
        match &result {
            Ok(Response::Ok { affected_rows, .. }) => self.row_count = *affected_rows as i64,
            Ok(Response::Rows { .. }) => self.row_count = -1,
            Err(error) => {
                self.row_count = -1;
                statistics.error(error.code);
            }
        }
        result
    }

    /// A 1062's value as SQL shows it, with its key's column types from
    /// the catalog (the error was made where only stored values are known).
    fn word_duplicate(&self, error: &mut SqlError) {
        let catalog = &self.engine.catalog;
        error.word_duplicate(
            |duplicate| {
                let (database, name) = duplicate.table.split_once('/')?;
                let table = catalog.table(database, name).ok()?;
                let columns = table.index_columns(duplicate.index.as_deref())?;
                columns
                    .iter()
                    .map(|&column| Some(table.columns.get(column)?.sql_type.clone()))
                    .collect()
            },
            self.zone_offset(),
        );
    }

    /// CREATE USER, DROP USER, ALTER USER, GRANT, REVOKE, SHOW GRANTS.
    fn account_statement(&mut self, statement: &accounts::Statement) -> SqlResult<Response> {
        self.refresh_grants()?;
        if !matches!(statement, accounts::Statement::ShowGrants { .. }) {
            // An account change commits the open transaction, as DDL does.
            self.commit_open()?;
        }
        let engine = Arc::clone(&self.engine);
        let database = self.database.clone();
        engine
            .accounts
            .run(statement, &self.account, &self.grants, database.as_deref())
    }

    fn dispatch(
        &mut self,
        statement: &ast::Statement,
        compiled: Option<Arc<Compiled>>,
        params: &[Value],
    ) -> SqlResult<Response> {
        use ast::Statement as S;
        let engine = Arc::clone(&self.engine);
        let catalog = &engine.catalog;
        match statement {
            S::Query(_) | S::Insert(_) | S::Update { .. } | S::Delete(_) => {
                self.run_data(statement, compiled, params)
            }
            S::Explain {
                statement: inner, ..
            } => self.explain(inner),
            S::StartTransaction { .. } => {
                self.commit_open()?;
                self.explicit = true;
                Ok(Response::ok())
            }
            S::Commit { .. } => {
                self.commit_open()?;
                self.explicit = !self.autocommit;
                Ok(Response::ok())
            }
            S::Savepoint { name } => {
                // Outside a transaction a savepoint ends with the
                // statement, as MySQL's.
                if self.explicit || !self.autocommit {
                    self.savepoints
                        .retain(|s| !s.eq_ignore_ascii_case(&name.value));
                    self.savepoints.push(name.value.clone());
                }
                Ok(Response::ok())
            }
            S::ReleaseSavepoint { name } => {
                let at = self.savepoint(&name.value)?;
                self.savepoints.truncate(at);
                Ok(Response::ok())
            }
            S::Rollback {
                savepoint: Some(name),
                ..
            } => {
                self.savepoint(&name.value)?;
                // The cluster cannot undo part of a transaction: all of it
                // rolls back, and the error says so (as NDB's engine
                // refuses a partial rollback), never leaving the writes
                // after the savepoint to commit.
                self.roll_back_open();
                Err(SqlError::unsupported(format!(
                    "ROLLBACK TO SAVEPOINT {} (the transaction was rolled back)",
                    name.value
                )))
            }
            S::Rollback {
                savepoint: None, ..
            } => {
                self.roll_back_open();
                Ok(Response::ok())
            }
            S::Set(set) => self.set(set),
            S::Use(ast::Use::Object(name) | ast::Use::Database(name) | ast::Use::Schema(name)) => {
                self.use_database(name.to_string().trim_matches('`'))?;
                Ok(Response::ok())
            }
            S::CreateDatabase {
                db_name,
                if_not_exists,
                ..
            }
            | S::CreateSchema {
                schema_name: ast::SchemaName::Simple(db_name),
                if_not_exists,
                ..
            } => {
                let name = object_name(db_name);
                self.require("CREATE", &name, "*", Privileges::CREATE)?;
                let created = catalog.create_database(&name, *if_not_exists)?;
                if !created {
                    self.note(Some(SqlError::new(
                        codes::DB_CREATE_EXISTS,
                        format!("Can't create database '{name}'; database exists"),
                    )));
                }
                Ok(Response::affected(created as u64))
            }
            S::Drop {
                object_type,
                if_exists,
                names,
                table,
                ..
            } => self.drop_objects(*object_type, *if_exists, names, table.as_ref()),
            S::CreateTable(create) => self.create_table(create),
            S::AlterTable {
                name,
                if_exists,
                operations,
                ..
            } => self.alter_table(name, *if_exists, operations),
            S::CreateView {
                or_replace,
                name,
                columns,
                query,
                materialized: false,
                temporary: false,
                ..
            } => self.create_view(*or_replace, name, columns, query),
            S::CreateIndex(create) => {
                let (database, table) = table_name(&create.table_name, self.database.as_deref())?;
                self.require("INDEX", &database, &table, Privileges::INDEX)?;
                self.commit_open()?;
                let existed = ddl::create_index(catalog, create, &database, &table)?;
                self.note(existed);
                Ok(Response::ok())
            }
            S::Truncate { table_names, .. } => {
                self.commit_open()?;
                for target in table_names {
                    let (database, table) = table_name(&target.name, self.database.as_deref())?;
                    self.require("DROP", &database, &table, Privileges::DROP)?;
                    ddl::truncate(catalog, &database, &table)?;
                }
                Ok(Response::ok())
            }
            S::ShowDatabases { show_options, .. } | S::ShowSchemas { show_options, .. } => {
                let shown = show::databases(
                    catalog,
                    like_filter_position(show_options.filter_position.as_ref()),
                )?;
                // Only the databases the account holds a privilege in.
                self.refresh_grants()?;
                Ok(match shown {
                    Response::Rows { columns, rows } => Response::Rows {
                        columns,
                        rows: rows
                            .into_iter()
                            .filter(|row| {
                                row.first().and_then(Value::as_str).is_some_and(|name| {
                                    self.grants.any_in(name)
                                        || crate::information_schema::is_it(name)
                                })
                            })
                            .collect(),
                    },
                    other => other,
                })
            }
            S::ShowTables {
                full, show_options, ..
            } => {
                let database = match &show_options.show_in {
                    Some(ast::ShowStatementIn {
                        parent_name: Some(name),
                        ..
                    }) => name.to_string(),
                    _ => self.current_database()?.to_string(),
                };
                show::tables(
                    catalog,
                    &database,
                    *full,
                    like_filter_position(show_options.filter_position.as_ref()),
                )
            }
            S::ShowCreate {
                obj_type: ast::ShowCreateObject::Table,
                obj_name,
            } => {
                let (database, table) = table_name(obj_name, self.database.as_deref())?;
                self.require_any(&database, &table)?;
                match catalog.table_or_view(&database, &table)? {
                    Ok(table) => Ok(show::create_table(&table)),
                    // A view's is its CREATE VIEW, as MySQL shows it.
                    Err(view) => Ok(view.show_create()),
                }
            }
            S::ShowCreate {
                obj_type: ast::ShowCreateObject::View,
                obj_name,
            } => {
                let (database, view) = table_name(obj_name, self.database.as_deref())?;
                self.require_any(&database, &view)?;
                match catalog.view(&database, &view)? {
                    Some(view) => Ok(view.show_create()),
                    None => {
                        catalog.table(&database, &view)?;
                        Err(not_a_view(&database, &view))
                    }
                }
            }
            S::ExplainTable {
                table_name: name, ..
            } => {
                let (database, table) = table_name(name, self.database.as_deref())?;
                self.require_any(&database, &table)?;
                Ok(show::columns(&*table_or_view(catalog, &database, &table)?))
            }
            S::ShowColumns { show_options, .. } => {
                let Some(ast::ShowStatementIn {
                    parent_name: Some(name),
                    ..
                }) = &show_options.show_in
                else {
                    return Err(SqlError::parse("SHOW COLUMNS needs FROM table"));
                };
                let (database, table) = table_name(name, self.database.as_deref())?;
                self.require_any(&database, &table)?;
                Ok(show::columns(&*table_or_view(catalog, &database, &table)?))
            }
            S::ShowVariables { filter, global, .. } => {
                Ok(self.show_variables(filter.as_ref(), *global))
            }
            S::ShowStatus { filter, global, .. } => Ok(self.show_status(filter.as_ref(), *global)),
            S::ShowVariable { variable } => {
                let words: Vec<String> = variable
                    .iter()
                    .map(|w| w.value.to_ascii_uppercase())
                    .collect();
                match words
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .as_slice()
                {
                    ["PROCESSLIST"] => Ok(self.processlist()),
                    [which @ ("WARNINGS" | "ERRORS")] => {
                        Ok(self.show_diagnostics(warnings::Shown::List {
                            errors: *which == "ERRORS",
                            offset: 0,
                            limit: None,
                        }))
                    }
                    ["ENGINES"] => Ok(Response::text_rows(
                        &[
                            "Engine",
                            "Support",
                            "Comment",
                            "Transactions",
                            "XA",
                            "Savepoints",
                        ],
                        vec![[
                            "ndbcluster",
                            "DEFAULT",
                            "Tessera: distributed, in memory, synchronously replicated",
                            "YES",
                            "NO",
                            "NO",
                        ]
                        .iter()
                        .map(|s| Value::from(*s))
                        .collect()],
                    )),
                    _ => Err(SqlError::unsupported(format!("SHOW {}", words.join(" ")))),
                }
            }
            // Accepted, taking no lock (docs/design/0031-users-and-grants.md,
            // "LOCK TABLES"): a table lock would not hold on the cluster's
            // other SQL nodes (NDB's are per SQL node too); mysqldump's
            // dumps take read locks and their restores write locks.
            S::LockTables { tables } => {
                for lock in tables {
                    let table = lock.table.value.clone();
                    let database = self.current_database()?.to_string();
                    let needed = match lock.lock_type {
                        ast::LockTableType::Write { .. } => Privileges::INSERT,
                        ast::LockTableType::Read { .. } => Privileges::SELECT,
                    };
                    self.require("LOCK TABLES", &database, &table, needed)?;
                    table_or_view(catalog, &database, &table)?;
                }
                Ok(Response::ok())
            }
            S::UnlockTables => Ok(Response::ok()),
            S::Kill { modifier, id } => {
                let query_only = matches!(modifier, Some(ast::KillType::Query));
                let id = u32::try_from(*id).unwrap_or(0);
                // Another account's connection only for an administrator
                // (MySQL's CONNECTION_ADMIN; here, CREATE USER on *.*).
                let owner = self
                    .engine
                    .server
                    .processes()
                    .into_iter()
                    .find(|process| process.id == id)
                    .map(|process| process.user);
                if owner
                    .as_deref()
                    .is_some_and(|user| user != self.account.user)
                    && !self.is_administrator()
                {
                    return Err(SqlError::new(
                        1095,
                        format!("You are not owner of thread {id}"),
                    ));
                }
                match self.engine.server.kill(id, query_only) {
                    true => Ok(Response::ok()),
                    false => Err(SqlError::new(
                        codes::NO_SUCH_THREAD,
                        format!("Unknown thread id: {id}"),
                    )),
                }
            }
            other => Err(SqlError::unsupported(first_words(&other.to_string()))),
        }
    }

    fn current_database(&self) -> SqlResult<&str> {
        self.database
            .as_deref()
            .ok_or_else(|| SqlError::new(codes::NO_DB, "No database selected"))
    }

    /// Runs a data statement with its transaction, retrying an
    /// autocommit statement after a temporary error, and planning again
    /// once when its plan's table changed.
    fn run_data(
        &mut self,
        statement: &ast::Statement,
        compiled: Option<Arc<Compiled>>,
        params: &[Value],
    ) -> SqlResult<Response> {
        let mut compiled = match compiled {
            Some(compiled) => compiled,
            None => self.compile(statement)?,
        };
        self.authorize(&compiled.plan)?;
        let mut replanned = false;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let autocommit = !self.explicit && self.autocommit;
            if !self.autocommit {
                // With autocommit off every statement is in a transaction.
                self.explicit = true;
            }
            // An attempt again raises its conditions again: only the
            // last attempt's stand.
            if attempt > 1 {
                self.diagnostics.get_mut().clear();
            }
            let result = self.run_compiled(&compiled, params, autocommit);
            let Err(error) = result else {
                return result;
            };
            if error.schema_changed && !replanned {
                replanned = true;
                if let Some(table) = compiled.table() {
                    self.engine.catalog.invalidate(&table.database, &table.name);
                }
                compiled = self.compile(statement)?;
                // A name may read other tables now (a table made a view).
                self.authorize(&compiled.plan)?;
                if autocommit {
                    continue;
                }
            }
            // An upsert that met a row inserted since it looked: again,
            // now that the row is there to be seen.
            let raced = error.code == codes::DUP_ENTRY
                && matches!(&compiled.plan, Plan::Insert(insert)
                    if !matches!(insert.conflict, crate::plan::Conflict::Error));
            let retry = autocommit
                && (error.code == codes::LOCK_DEADLOCK || raced)
                && attempt < AUTOCOMMIT_ATTEMPTS;
            if !retry {
                return Err(error);
            }
            self.statistics().retries.fetch_add(1, Ordering::Relaxed);
            client::cooperative::sleep(Duration::from_millis(5 << attempt));
        }
    }

    fn compile(&self, statement: &ast::Statement) -> SqlResult<Arc<Compiled>> {
        match plan::compile(statement, &self.engine.catalog, self.database.as_deref())? {
            Some(compiled) => Ok(Arc::new(compiled)),
            None => Err(SqlError::unsupported(first_words(&statement.to_string()))),
        }
    }

    /// Runs a compiled statement in the session's transaction, or on its
    /// own when it reads without a lock and the transaction holds nothing
    /// yet (no write, no lock; docs/design/0027-sql-node.md, "Reads in a
    /// transaction"): READ COMMITTED reads the same rows either way, and
    /// on its own the read goes to the tc of its key's primary and commits
    /// with its answer, where the transaction would have begun on the
    /// first statement's node and needed a commit at its end.
    fn run_compiled(
        &mut self,
        compiled: &Compiled,
        params: &[Value],
        autocommit: bool,
    ) -> SqlResult<Response> {
        let unlocked_read = matches!(
            &compiled.plan,
            Plan::Select(select) if select.lock == LockMode::CommittedRead
        );
        let alone = !autocommit
            && unlocked_read
            && self
                .transaction
                .as_ref()
                .is_none_or(|open| open.holds_nothing());
        if !alone {
            return self.run_in_transaction(compiled, params, autocommit);
        }
        let open = self.transaction.take();
        self.reads_in_transaction |= !autocommit && !self.autocommit;
        let result = self.run_in_transaction(compiled, params, true);
        debug_assert!(
            self.transaction.is_none(),
            "a statement run on its own leaves no transaction"
        );
        self.transaction = open;
        result
    }

    fn run_in_transaction(
        &mut self,
        compiled: &Compiled,
        params: &[Value],
        autocommit: bool,
    ) -> SqlResult<Response> {
        let bound = compiled.bind(params)?;
        let transaction = RefCell::new(match self.transaction.take() {
            Some(open) => open,
            None => self.begin_for(compiled, &bound),
        });
        let commit = if autocommit { Commit::Yes } else { Commit::No };
        let mut counts = StatementCounts::default();
        // Out of the session while the run borrows it as its environment.
        let mut locked = std::mem::take(&mut self.locked_rows);
        let result = {
            let view = SessionView { session: self };
            let mut run = Run {
                transaction: &transaction,
                commit,
                params: &bound,
                environment: &view,
                counts: &mut counts,
                locked: &mut locked,
                working: None,
            };
            match &compiled.plan {
                Plan::Select(select) => execute::select(select, &mut run),
                Plan::Insert(insert) => {
                    let result = execute::insert(insert, &mut run, &self.engine.auto_increment);
                    // Upserts and REPLACE change rows without their images.
                    run.locked.forget_table(&insert.table);
                    result
                }
                Plan::Update(write) => execute::update(write, &mut run),
                Plan::Delete(write) => execute::delete(write, &mut run),
            }
        };
        self.locked_rows = locked;
        self.last_counts = counts;
        let statistics = &self.engine.statistics;
        Statistics::add(&statistics.rows_fetched, counts.fetched);
        Statistics::add(&statistics.rows_sent, counts.sent);
        Statistics::add(&statistics.locked_rows_reused, counts.locked_rows_reused);
        Statistics::add(&statistics.reads_at_primary, counts.reads_at_primary);
        self.fetched_total += counts.fetched;
        let counter = match &compiled.plan {
            Plan::Select(_) => &statistics.selects,
            Plan::Insert(_) => &statistics.inserts,
            Plan::Update(_) => &statistics.updates,
            Plan::Delete(_) => &statistics.deletes,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let mut transaction = transaction.into_inner();
        let state = transaction.state();
        match (&result, autocommit) {
            (Ok(response), true) => {
                if let Response::Ok { last_insert_id, .. } = response {
                    if *last_insert_id != 0 {
                        self.last_insert_id = *last_insert_id;
                    }
                }
                if state == TransactionState::Committed && !matches!(compiled.plan, Plan::Select(_))
                {
                    statistics.commits.fetch_add(1, Ordering::Relaxed);
                }
            }
            (Ok(response), false) => {
                if let Response::Ok { last_insert_id, .. } = response {
                    if *last_insert_id != 0 {
                        self.last_insert_id = *last_insert_id;
                    }
                }
                self.transaction = Some(transaction);
            }
            (Err(_), _) => {
                let wrote = !matches!(compiled.plan, Plan::Select(_));
                let ended = match state {
                    // A read that failed queued nothing: an explicit
                    // transaction goes on.
                    TransactionState::Idle | TransactionState::Active if !autocommit && !wrote => {
                        self.transaction = Some(transaction);
                        false
                    }
                    // A write that failed may have queued, or sent, part
                    // of its rows: the whole transaction rolls back (NDB's
                    // rule), so half a statement never commits.
                    TransactionState::Idle | TransactionState::Active => {
                        let _ = transaction.rollback();
                        true
                    }
                    // Aborted or unknown: the transaction is over.
                    _ => true,
                };
                if ended {
                    statistics.rollbacks.fetch_add(1, Ordering::Relaxed);
                    if !autocommit {
                        // As after InnoDB's deadlock rollback, the session
                        // is out of the transaction; the error says so.
                        self.explicit = !self.autocommit;
                        self.reads_in_transaction = false;
                        self.savepoints.clear();
                        return result.map_err(|mut error| {
                            error.message.push_str(" (the transaction was rolled back)");
                            error
                        });
                    }
                }
            }
        }
        result
    }

    /// A new transaction for `compiled`, on the tc of the data node that
    /// holds the primary replica of its rows when the statement names one
    /// key (or a list of keys: the first's), or ranges whose equality
    /// prefix gives the table's partition key one value (NDB's
    /// distribution awareness: the statement's operations, and the
    /// commit of what it writes, then never cross between data nodes),
    /// else on any.
    fn begin_for(&self, compiled: &Compiled, params: &[Value]) -> Transaction<'static> {
        let cluster = self.engine.cluster();
        let (table, access) = match &compiled.plan {
            Plan::Select(select) => match &select.table {
                Some(table) => (table, &select.access),
                None => return cluster.transaction(),
            },
            Plan::Update(write) | Plan::Delete(write) => (&write.table, &write.access),
            Plan::Insert(insert) => {
                let Some(row) = insert.rows.first() else {
                    return cluster.transaction();
                };
                let exprs: Option<Vec<&crate::expr::Expr>> = insert
                    .table
                    .def()
                    .primary_key
                    .iter()
                    .map(|key| {
                        let position = insert.targets.iter().position(|t| *t == *key as usize)?;
                        row[position].as_ref()
                    })
                    .collect();
                match exprs {
                    Some(exprs) => {
                        return self.hinted(&insert.table, HintColumns::PrimaryKey, exprs, params)
                    }
                    None => return cluster.transaction(),
                }
            }
        };
        match access {
            crate::plan::AccessPlan::PrimaryKey(exprs) => self.hinted(
                table,
                HintColumns::PrimaryKey,
                exprs.iter().collect(),
                params,
            ),
            // Several keys (IN): each is routed by itself, the first
            // places the transaction (as NDB's first key does).
            crate::plan::AccessPlan::PrimaryKeys(keys) => match keys.first() {
                Some(exprs) => self.hinted(
                    table,
                    HintColumns::PrimaryKey,
                    exprs.iter().collect(),
                    params,
                ),
                None => cluster.transaction(),
            },
            crate::plan::AccessPlan::Ranges { index, ranges } => {
                let Some(columns) = table.index_columns(index.as_deref()) else {
                    return cluster.transaction();
                };
                // The partition key's values, when every range's equality
                // prefix gives them, and gives the same ones (an IN list
                // on a later column makes several ranges of one prefix).
                let exprs: Option<Vec<&crate::expr::Expr>> = table
                    .def()
                    .partition_key
                    .iter()
                    .map(|column| {
                        let position = columns.iter().position(|c| *c == *column as usize)?;
                        let first = ranges.first()?.prefix.get(position)?;
                        ranges
                            .iter()
                            .all(|range| range.prefix.get(position) == Some(first))
                            .then_some(first)
                    })
                    .collect();
                match exprs {
                    Some(exprs) if !exprs.is_empty() => {
                        self.hinted(table, HintColumns::PartitionKey, exprs, params)
                    }
                    _ => cluster.transaction(),
                }
            }
            _ => cluster.transaction(),
        }
    }

    /// A transaction on the tc that holds the row(s) whose `columns` hold
    /// the values of `exprs`; on any tc when a value does not fit its
    /// column exactly (the statement then finds no row by it anyway).
    fn hinted(
        &self,
        table: &crate::catalog::SqlTable,
        columns: HintColumns,
        exprs: Vec<&crate::expr::Expr>,
        params: &[Value],
    ) -> Transaction<'static> {
        let cluster = self.engine.cluster();
        let view = SessionView { session: self };
        let inputs = crate::expr::Inputs {
            row: &[],
            aggregates: &[],
            params,
        };
        let zone = self.zone_offset();
        let column_ids = match columns {
            HintColumns::PrimaryKey => &table.def().primary_key,
            HintColumns::PartitionKey => &table.def().partition_key,
        };
        let values: Option<Vec<client::Value>> = column_ids
            .iter()
            .zip(exprs)
            .map(|(column, expr)| {
                let value = expr.eval(&inputs, &view).ok()?;
                let sql_type = &table.columns[*column as usize].sql_type;
                let exact = value::fit_exactly(&value, sql_type)?;
                Some(crate::types::store(&exact, sql_type, zone))
            })
            .collect();
        match (values, columns) {
            (Some(key), HintColumns::PrimaryKey) => cluster
                .transaction_with_hint(&table.table, &key)
                .unwrap_or_else(|_| cluster.transaction()),
            (Some(values), HintColumns::PartitionKey) => {
                cluster.transaction_with_partition_hint(&table.table, &values)
            }
            (None, _) => cluster.transaction(),
        }
    }

    /// Whether the account administers the SQL node: sees and ends every
    /// connection (CREATE USER on *.*, root's).
    fn is_administrator(&self) -> bool {
        self.account.is_root() || self.grants.allows("*", "*", Privileges::CREATE_USER)
    }

    fn processlist(&self) -> Response {
        let everyone = self.is_administrator();
        let rows = self
            .engine
            .server
            .processes()
            .into_iter()
            // Another account's connections only for an administrator
            // (MySQL's PROCESS privilege).
            .filter(|p| everyone || p.user == self.account.user)
            .map(|p| {
                vec![
                    Value::UInt(p.id as u64),
                    Value::from(p.user.as_str()),
                    Value::from(p.host.as_str()),
                    p.database
                        .as_deref()
                        .map(Value::from)
                        .unwrap_or(Value::Null),
                    Value::from(p.command),
                    Value::UInt(p.seconds),
                    Value::from(""),
                    p.info
                        .as_deref()
                        .map(|info| Value::from(crate::accounts::masked(info)))
                        .unwrap_or(Value::Null),
                ]
            })
            .collect();
        Response::text_rows(
            &[
                "Id", "User", "Host", "db", "Command", "Time", "State", "Info",
            ],
            rows,
        )
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.end();
    }
}

/// A one-part name as written, its quotes off (`shop`, `` `shop` ``).
fn object_name(name: &ast::ObjectName) -> String {
    name.0
        .last()
        .and_then(|part| part.as_ident())
        .map_or_else(|| name.to_string(), |ident| ident.value.clone())
}

/// The LIKE pattern of a SHOW statement's filter.
fn like_filter(filter: Option<&ast::ShowStatementFilter>) -> Option<&str> {
    match filter {
        Some(ast::ShowStatementFilter::Like(pattern)) => Some(pattern.as_str()),
        _ => None,
    }
}

fn like_filter_position(position: Option<&ast::ShowStatementFilterPosition>) -> Option<&str> {
    match position {
        Some(
            ast::ShowStatementFilterPosition::Infix(filter)
            | ast::ShowStatementFilterPosition::Suffix(filter),
        ) => like_filter(Some(filter)),
        None => None,
    }
}

/// The first words of a statement, for an "unsupported" message.
fn first_words(text: &str) -> String {
    text.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// `?` placeholders outside quotes.
fn count_placeholders(text: &str) -> usize {
    let mut count = 0;
    let mut quote: Option<char> = None;
    for c in text.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"' | '`') => quote = Some(c),
            (None, '?') => count += 1,
            _ => {}
        }
    }
    count
}

/// Which of a table's columns a transaction's hint gives values for.
#[derive(Clone, Copy)]
enum HintColumns {
    /// The whole primary key: the hint is one row.
    PrimaryKey,
    /// The partition key alone: the rows of one partition.
    PartitionKey,
}
