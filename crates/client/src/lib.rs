//! client: the native API of Tessera (NDB API analogue). A process that
//! links it becomes an API node: it gets its config and node id from mgmd,
//! connects to every data node, and runs transactions of batched key
//! operations (sync, or many in flight per thread) and schema requests
//! over the signal wire format, routing each transaction to the node that
//! holds its key hint's primary replica.
//!
//! Codemap:
//! - `cluster`: [`Cluster`], connecting to every data node, routing
//!   (key hint -> primary's node), schema requests to the president, the
//!   table and partition-map cache, map versions.
//! - `transaction`: [`Transaction`]: queue operations, execute batches
//!   (the sync API), rollback; the batch and reply handling both APIs share.
//! - `session`: [`AsyncSession`], the async API: many transactions in
//!   flight from one thread, one write per data node for all their batches.
//! - `durable`: waiting until a GCI is durable ([`Cluster::wait_durable`]),
//!   which `Commit::Durable` does after the commit.
//! - `table`, `value`: [`Table`], [`Row`], [`Value`]: values to and from
//!   key and attribute sections, checked against column types.
//! - `replicas`: table lists and partition replica scans (replica checker).
//! - `connection`: one data-node connection: its frames, registration and
//!   receive side.
//! - `reconnect`: each data node's slot holding its current connection,
//!   and the thread that opens a lost one again once the node is back.
//! - `environment`: the seam to the world: the transport, the clock and
//!   the waits (TCP and the system clock, or a simulator's).
//! - `cooperative`: waits that suspend a task instead of blocking its
//!   thread, when a scheduler runs many tasks on one thread (the SQL
//!   node's connections); the condvar-or-waker every waiter waits on.
//! - `tcp`: the production transport, with a receive thread per connection.
//! - `polled`: [`Receiver`], the production transport's receive side read
//!   by an application's event loop instead (a thread stands in while no
//!   loop polls).
//! - `dispatch`: the in-flight table the receive threads answer into, and
//!   the inboxes replies are posted to.
//! - `id_hash`: the cheap hasher of the maps keyed by ids the client
//!   hands out (transaction and request ids).
//!
//! Architecture invariant: the client depends on `signal`, `config` and
//! `mgmclient`, never on a block; it reads the time, sleeps and waits
//! only through `environment::Clock` (whose system waits and sleeps are
//! `cooperative`'s).
//!
//! ```no_run
//! use client::{Cluster, Commit, Value};
//! use signal::signals::LockMode;
//! let cluster = Cluster::connect("127.0.0.1:11860")?;
//! let table = cluster.table("kv")?;
//! let mut transaction = cluster.transaction();
//! transaction.write(&table, &[("k", Value::UInt(1)), ("v", Value::from("one"))])?;
//! transaction.execute(Commit::Yes)?;
//! let mut transaction = cluster.transaction();
//! let op = transaction.read(&table, &[Value::UInt(1)], LockMode::CommittedRead)?;
//! transaction.execute(Commit::Yes)?;
//! assert_eq!(transaction.get(op).and_then(|row| row.get("v")?.as_str()), Some("one"));
//! # Ok::<(), client::ClientError>(())
//! ```

mod cluster;
mod connection;
pub mod cooperative;
mod dispatch;
mod durable;
pub mod environment;
mod error;
pub mod gather;
mod heartbeat;
mod id_hash;
mod polled;
mod reconnect;
mod replicas;
mod scan;
mod session;
mod table;
mod tcp;
mod transaction;
pub mod value;

pub use cluster::{Cluster, ConnectOptions};
pub use connection::PROTOCOL_VERSION;
pub use error::ClientError;
pub use polled::Receiver;
pub use replicas::{PartitionScan, ScannedRow};
pub use scan::{
    Access, Filter, KeyRange, ScanCursor, ScanOptions, ScanResult, ScanStatistics,
    DEFAULT_BATCH_ROWS,
};
pub use session::{AsyncSession, Completion};
/// The most columns one [`Transaction::increment`] adds to.
pub use signal::attr::MAX_INCREMENTS;
pub use signal::scan_program::CompareOp;
/// The most nodes, and the deepest nesting, of a scan filter the data
/// nodes take.
pub use signal::scan_program::{MAX_DEPTH as FILTER_MAX_DEPTH, MAX_NODES as FILTER_MAX_NODES};
pub use table::{ColumnSelector, Row, Table};
pub use transaction::{Commit, LockWait, OpId, Outcome, Transaction, TransactionState};
pub use value::Value;

// The signal types an application needs with this API, so that it can
// depend on `client` alone.
pub use signal::error::ErrorClass;
pub use signal::schema::{
    ColumnDef, ColumnType, IndexDef, TableDef, UniqueTable, MAX_COLUMNS, MAX_INDEXES,
    MAX_ROW_BYTES, MAX_VAR_BYTES,
};
pub use signal::signals::{ApiToken, LockMode};
pub use signal::{ErrorCode, Gci, TransactionId};
