//! sql: the SQL engine of `tessera sql`, MySQL's dialect over the
//! cluster's native API. It parses with the `sqlparser` crate, plans and
//! executes with its own planner and executor (key lookups and scans of
//! the client API, sorting and aggregation in the SQL node), and keeps
//! its schema in the cluster, so any number of SQL nodes serve one
//! cluster (docs/design/0027-sql-node.md). It knows no wire format: the
//! `sqlnode` crate speaks MySQL's protocol and calls a [`Session`] per
//! connection.
//!
//! Codemap:
//! - `session`: [`Session`], a connection's state (database, autocommit,
//!   its open transaction, prepared statements, variables) and the
//!   statement dispatch;
//! - `parse`: MySQL-isms the parser lacks rewritten, and the parse cache;
//! - `plan`: statements compiled into plans, the access path chosen;
//! - `access`: reaching a plan's rows (lookups, scans, pushed filters);
//! - `execute`: running plans (WHERE, aggregates, ORDER BY, writes);
//! - `expr`: expressions compiled and evaluated; `value`: SQL's rules
//!   for values;
//! - `catalog`: databases, tables and their SQL declarations in the
//!   cluster's system tables; `auto_increment`: ranges of values;
//! - `ddl`, `show`, `variables`: schema statements, SHOW, system
//!   variables;
//! - `result`, `error`: what a statement returns.
//!
//! Architecture invariant: the engine depends on `client` (never on a
//! block or the wire protocol); a SQL node's only state is caches and its
//! connections' sessions.

mod access;
pub mod accounts;
mod alter_table;
mod auto_increment;
pub mod catalog;
pub mod checks;
mod column_names;
mod ddl;
pub mod decimal;
pub mod diagnostics;
pub mod dialect;
pub mod error;
mod execute;
pub mod expr;
pub mod functions;
pub mod generated;
pub mod information_schema;
pub mod json;
pub mod locked_rows;
mod parse;
pub mod plan;
pub mod result;
mod session;
mod show;
pub mod temporal;
pub mod types;
pub mod user_locks;
pub mod value;
pub mod variables;
pub mod views;

pub use error::{codes, SqlError, SqlResult};
pub use parse::{MAX_OPERATORS, STATEMENT_STACK_BYTES};
pub use result::{ColumnKind, OutputColumn, Response};
pub use session::{Prepared, Session};

use auto_increment::AutoIncrement;
use catalog::Catalog;
use client::Cluster;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A connection as SHOW PROCESSLIST lists it.
#[derive(Clone, Debug)]
pub struct Process {
    /// The connection id.
    pub id: u32,
    /// The user.
    pub user: String,
    /// The client's address.
    pub host: String,
    /// The current database.
    pub database: Option<String>,
    /// What it does: "Query", "Sleep", ...
    pub command: &'static str,
    /// Seconds in that state.
    pub seconds: u64,
    /// The statement running, if any.
    pub info: Option<String>,
}

/// What the engine asks of the server that runs it.
pub trait Server: Send + Sync {
    /// The connections.
    fn processes(&self) -> Vec<Process>;
    /// KILL `id` (only its running statement when `query_only`); false
    /// when there is no such connection.
    fn kill(&self, id: u32, query_only: bool) -> bool;
}

/// Counters of the whole SQL node (SHOW GLOBAL STATUS).
#[derive(Default)]
pub struct Statistics {
    /// Statements run.
    pub queries: AtomicU64,
    /// SELECTs.
    pub selects: AtomicU64,
    /// INSERTs.
    pub inserts: AtomicU64,
    /// UPDATEs.
    pub updates: AtomicU64,
    /// DELETEs.
    pub deletes: AtomicU64,
    /// Transactions committed (explicit COMMIT and autocommit writes).
    pub commits: AtomicU64,
    /// Transactions rolled back.
    pub rollbacks: AtomicU64,
    /// Rows the data nodes sent.
    pub rows_fetched: AtomicU64,
    /// Rows sent to clients.
    pub rows_sent: AtomicU64,
    /// Statements retried after a temporary error in autocommit.
    pub retries: AtomicU64,
    /// Key lookups of a query's statements read together, in one round
    /// trip, ahead of the statements (multi-statement COM_QUERY).
    pub lookups_read_ahead: AtomicU64,
    /// Rows an UPDATE, DELETE or committed read by key took from what
    /// its transaction holds locked instead of reading them
    /// (`locked_rows`).
    pub locked_rows_reused: AtomicU64,
    /// Committed reads in a transaction made by a transaction of their
    /// own on the row's primary's data node (`access`).
    pub reads_at_primary: AtomicU64,
    /// Errors by MySQL error number.
    pub errors: Mutex<BTreeMap<u16, u64>>,
}

impl Statistics {
    /// Counts one error.
    pub fn error(&self, code: u16) {
        *self
            .errors
            .lock()
            .expect("errors lock")
            .entry(code)
            .or_default() += 1;
    }

    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// What every session of a SQL node shares.
pub struct Engine {
    /// The schema.
    pub catalog: Catalog,
    /// Users and privileges.
    pub accounts: accounts::Accounts,
    /// caching_sha2_password's fast-path cache of this SQL node.
    pub fast_auth: accounts::FastAuthCache,
    auto_increment: AutoIncrement,
    /// GET_LOCK's locks held by this SQL node's sessions.
    pub user_locks: Arc<user_locks::UserLocks>,
    /// Counters.
    pub statistics: Statistics,
    parse_cache: parse::Cache,
    server: Arc<dyn Server>,
    started: Instant,
}

impl Engine {
    /// An engine over `cluster` (which lives as long as the process),
    /// creating the cluster's SQL system tables if they are missing.
    pub fn new(cluster: &'static Cluster, server: Arc<dyn Server>) -> SqlResult<Arc<Engine>> {
        Ok(Arc::new(Engine {
            catalog: Catalog::open(cluster)?,
            accounts: accounts::Accounts::new(cluster),
            fast_auth: accounts::FastAuthCache::default(),
            auto_increment: AutoIncrement::default(),
            user_locks: user_locks::UserLocks::new(cluster),
            statistics: Statistics::default(),
            parse_cache: parse::Cache::default(),
            server,
            started: Instant::now(),
        }))
    }

    /// The cluster connection.
    pub fn cluster(&self) -> &'static Cluster {
        self.catalog.cluster()
    }

    /// Seconds since the engine started.
    pub fn uptime(&self) -> u64 {
        self.started.elapsed().as_secs()
    }
}
