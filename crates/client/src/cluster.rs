//! `Cluster`: this process as an API node. Connecting asks mgmd for the
//! config and an API node id, connects to the data node(s) and registers;
//! the `Cluster` then hands out transactions and runs schema requests
//! (create, drop, get) against `dict`, caching table definitions.
//!
//! The mgmd connection stays open inside the `Cluster` for its whole life:
//! mgmd keeps the API node id allocated exactly as long as that connection
//! lives, so two processes can never share an id.

use crate::connection::{section_pool, FrameBuilder, NodeConnection};
use crate::dispatch::SchemaReply;
use crate::error::ClientError;
use crate::table::Table;
use crate::transaction::Transaction;
use signal::schema::TableDef;
use signal::signals::{CreateTabReq, DropTabReq, GetTabInfoReq};
use signal::{BlockKind, ErrorCode, NodeId, Section, Signal};
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long connecting and waiting may take.
///
/// ```
/// let options = client::ConnectOptions {
///     connect_timeout: std::time::Duration::from_secs(5),
///     ..Default::default()
/// };
/// assert_eq!(options.register_retry_interval.as_millis(), 100);
/// ```
#[derive(Clone, Debug)]
pub struct ConnectOptions {
    /// Longest wait for the data node to accept the connection and report
    /// itself started.
    pub connect_timeout: Duration,
    /// Pause between connection attempts and between API_REGREQs while the
    /// data node is still starting.
    pub register_retry_interval: Duration,
    /// Longest wait for the reply to a transaction or schema request; the
    /// outcome is unknown after it (`ClientError::Timeout`). Also the
    /// longest a write to a data node may block before the connection is
    /// given up.
    pub reply_timeout: Duration,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            connect_timeout: Duration::from_secs(30),
            register_retry_interval: Duration::from_millis(100),
            reply_timeout: Duration::from_secs(60),
        }
    }
}

/// A connection of this process, as an API node, to a cluster.
///
/// ```no_run
/// use client::{Cluster, Commit, Value};
/// let cluster = Cluster::connect("127.0.0.1:11860")?;
/// let table = cluster.table("accounts")?;
/// let mut transaction = cluster.transaction();
/// transaction.insert(&table, &[("id", Value::UInt(1)), ("balance", Value::Double(10.0))])?;
/// let outcome = transaction.execute(Commit::Yes)?;
/// println!("committed in GCI {:?}", outcome.gci);
/// # Ok::<(), client::ClientError>(())
/// ```
pub struct Cluster {
    api_node: NodeId,
    /// One per data node. This version connects to one data node; routing
    /// to several comes with partition-aware transactions.
    connections: Vec<NodeConnection>,
    options: ConnectOptions,
    transaction_counter: AtomicU64,
    request_counter: AtomicU32,
    tables: Mutex<HashMap<String, Arc<Table>>>,
    /// Holds the API node id allocation; never used after connecting.
    /// Declared last so it drops last: the id is freed only once every
    /// data-node connection using it is closed.
    _mgm: Option<Mutex<mgmd::client::MgmClient>>,
}

/// Transaction ids carry the API node id in the top 16 bits.
const TRANSACTION_COUNTER_MASK: u64 = (1 << 48) - 1;

impl Cluster {
    /// Connects through mgmd at `mgmd_addr` ("host:port") with default
    /// [`ConnectOptions`].
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// println!("API node {}", cluster.api_node());
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn connect(mgmd_addr: &str) -> Result<Cluster, ClientError> {
        Cluster::connect_with(mgmd_addr, ConnectOptions::default())
    }

    /// Connects through mgmd: fetches the config, allocates an API node id,
    /// connects to the data node and registers with it.
    ///
    /// ```no_run
    /// let options = client::ConnectOptions::default();
    /// let cluster = client::Cluster::connect_with("127.0.0.1:11860", options)?;
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn connect_with(mgmd_addr: &str, options: ConnectOptions) -> Result<Cluster, ClientError> {
        let mut mgm = mgmd::client::MgmClient::connect(mgmd_addr)?;
        let text = mgm.get_config()?;
        let config = config::ClusterConfig::from_toml_str(&text, "mgmd")
            .map_err(|error| ClientError::Config(error.to_string()))?;
        let data_node = config.data_nodes.first().ok_or_else(|| {
            ClientError::Config("the cluster config lists no data node".to_string())
        })?;
        let api_node = mgm.alloc_api_node()?;
        let addr = format!("{}:{}", data_node.host, data_node.port);
        let connection = NodeConnection::open(
            &addr,
            Some(NodeId(data_node.id)),
            NodeId(api_node),
            incarnation(),
            options.connect_timeout,
            options.register_retry_interval,
            options.reply_timeout,
        )?;
        Ok(Cluster::assemble(
            NodeId(api_node),
            Some(mgm),
            connection,
            options,
        ))
    }

    /// Connects straight to a data node at `data_node_addr` as API node
    /// `api_node_id`, skipping mgmd. For tests and tools only: nothing
    /// stops two processes from using the same id this way.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect_direct("127.0.0.1:11861", 200)?;
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn connect_direct(data_node_addr: &str, api_node_id: u16) -> Result<Cluster, ClientError> {
        Cluster::connect_direct_with(data_node_addr, api_node_id, ConnectOptions::default())
    }

    /// [`Cluster::connect_direct`] with options.
    ///
    /// ```no_run
    /// let options = client::ConnectOptions::default();
    /// let cluster = client::Cluster::connect_direct_with("127.0.0.1:11861", 200, options)?;
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn connect_direct_with(
        data_node_addr: &str,
        api_node_id: u16,
        options: ConnectOptions,
    ) -> Result<Cluster, ClientError> {
        let connection = NodeConnection::open(
            data_node_addr,
            None,
            NodeId(api_node_id),
            incarnation(),
            options.connect_timeout,
            options.register_retry_interval,
            options.reply_timeout,
        )?;
        Ok(Cluster::assemble(
            NodeId(api_node_id),
            None,
            connection,
            options,
        ))
    }

    fn assemble(
        api_node: NodeId,
        mgm: Option<mgmd::client::MgmClient>,
        connection: NodeConnection,
        options: ConnectOptions,
    ) -> Cluster {
        Cluster {
            api_node,
            connections: vec![connection],
            options,
            // Start the counter somewhere unpredictable: an API node id is
            // reused by the next process that asks mgmd for one, and its
            // transaction ids must not collide with the previous owner's
            // transactions that a tc may still be aborting.
            transaction_counter: AtomicU64::new(
                (u64::from(incarnation()) << 16) & (TRANSACTION_COUNTER_MASK >> 1),
            ),
            // Same reason as the transaction counter: a reused API node id
            // must not meet late schema replies meant for its previous owner.
            request_counter: AtomicU32::new(incarnation()),
            tables: Mutex::new(HashMap::new()),
            _mgm: mgm.map(Mutex::new),
        }
    }

    /// This process's API node id.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// assert!(cluster.api_node() >= 128);
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn api_node(&self) -> u16 {
        self.api_node.0
    }

    /// Whether every data-node connection is still up. A lost connection
    /// is not re-established by this version: connect a new `Cluster`.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// assert!(cluster.is_connected());
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn is_connected(&self) -> bool {
        self.connections.iter().all(NodeConnection::is_connected)
    }

    /// The options the cluster was connected with.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// println!("{:?}", cluster.options().reply_timeout);
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn options(&self) -> &ConnectOptions {
        &self.options
    }

    /// tc instances of the (first) data node, as it reported on registration.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// assert!(cluster.tc_instances() >= 1);
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn tc_instances(&self) -> u16 {
        self.connections[0].tc_instances
    }

    /// Requests and transactions waiting for replies (diagnostics, tests).
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// assert_eq!(cluster.in_flight(), 0);
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn in_flight(&self) -> usize {
        self.connections
            .iter()
            .map(|connection| connection.dispatch.in_flight())
            .sum()
    }

    /// Starts a transaction. Nothing is sent until it executes.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// let transaction = cluster.transaction();
    /// println!("{:?}", transaction.id());
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn transaction(&self) -> Transaction<'_> {
        let counter = (self.transaction_counter.fetch_add(1, Ordering::Relaxed) + 1)
            & TRANSACTION_COUNTER_MASK;
        let connection = 0;
        let tc_instances = self.connections[connection].tc_instances.max(1) as u64;
        let tc_instance = (counter % tc_instances) as u16;
        let id = signal::TransactionId(((self.api_node.0 as u64) << 48) | counter);
        Transaction::new(self, id, connection, tc_instance)
    }

    pub(crate) fn connection(&self, index: usize) -> &NodeConnection {
        &self.connections[index]
    }

    /// Creates a table and returns its definition as `dict` stored it (with
    /// id, version and partitions). The definition is cached for
    /// [`Cluster::table`].
    ///
    /// ```no_run
    /// use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// let created = cluster.create_table(&TableDef {
    ///     id: 0, version: 0, name: "t".into(), partitions: 0, primary_key: vec![0],
    ///     columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: true }, nullable: false }],
    /// })?;
    /// println!("table id {}", created.id);
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn create_table(&self, definition: &TableDef) -> Result<TableDef, ClientError> {
        definition
            .validate()
            .map_err(|message| ClientError::Invalid {
                code: ErrorCode::BadTableDefinition,
                detail: format!("table {:?}: {message}", definition.name),
            })?;
        let bytes = definition.encode_to_vec();
        let reply = self.schema_request(&definition.name, |request_id| {
            Ok(CreateTabReq {
                request_id,
                definition: section_from(&bytes)?,
            }
            .into())
        })?;
        match reply {
            SchemaReply::Created => {}
            other => return Err(unexpected_reply(&definition.name, other)),
        }
        // The stored definition (partitions chosen by dict) comes by name,
        // the same path every other client uses.
        self.invalidate_table(&definition.name);
        Ok(self.table(&definition.name)?.def().clone())
    }

    /// Drops the table `name` and forgets its cached definition.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// cluster.drop_table("t")?;
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn drop_table(&self, name: &str) -> Result<(), ClientError> {
        self.invalidate_table(name);
        let reply = self.schema_request(name, |request_id| {
            Ok(DropTabReq {
                request_id,
                name: section_from(name.as_bytes())?,
            }
            .into())
        })?;
        match reply {
            SchemaReply::Dropped => Ok(()),
            other => Err(unexpected_reply(name, other)),
        }
    }

    /// The table `name`: from the cache, or fetched from `dict` (then cached).
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// let table = cluster.table("t")?;
    /// println!("{} columns", table.def().columns.len());
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn table(&self, name: &str) -> Result<Arc<Table>, ClientError> {
        if let Some(table) = self.cached_tables().get(name) {
            return Ok(Arc::clone(table));
        }
        let reply = self.schema_request(name, |request_id| {
            Ok(GetTabInfoReq {
                request_id,
                name: section_from(name.as_bytes())?,
            }
            .into())
        })?;
        let SchemaReply::Info { definition } = reply else {
            return Err(unexpected_reply(name, reply));
        };
        let def = TableDef::decode(&definition).map_err(|message| {
            ClientError::Protocol(format!("definition of table {name:?}: {message}"))
        })?;
        if def.name != name {
            return Err(ClientError::Protocol(format!(
                "asked for table {name:?}, got the definition of {:?}",
                def.name
            )));
        }
        let table = Arc::new(Table::new(def));
        self.cached_tables()
            .insert(name.to_string(), Arc::clone(&table));
        Ok(table)
    }

    /// Forgets the cached definition of `name`; the next [`Cluster::table`]
    /// fetches it again.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// cluster.invalidate_table("t");
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn invalidate_table(&self, name: &str) {
        self.cached_tables().remove(name);
    }

    /// Forgets the cached definition of `name` only if it is still the one
    /// with this id and version (a newer one may already be cached).
    pub(crate) fn invalidate_stale_table(&self, stale: &Table) {
        let mut tables = self.cached_tables();
        let is_same = tables.get(stale.name()).is_some_and(|cached| {
            cached.def().id == stale.def().id && cached.def().version == stale.def().version
        });
        if is_same {
            tables.remove(stale.name());
        }
    }

    fn cached_tables(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Table>>> {
        self.tables.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends one schema request to dict on the first data node and waits
    /// for its answer. A refusal becomes `ClientError::Schema`.
    fn schema_request(
        &self,
        table: &str,
        build: impl FnOnce(u32) -> Result<Signal, ClientError>,
    ) -> Result<SchemaReply, ClientError> {
        let connection = &self.connections[0];
        let request_id = self.request_counter.fetch_add(1, Ordering::Relaxed);
        let slot = connection
            .dispatch
            .register_request(request_id)
            .map_err(|reason| connection.lost(reason))?;
        let result = (|| {
            let mut frames = FrameBuilder::default();
            frames.push(&connection.envelope(BlockKind::Dict, 0, build(request_id)?))?;
            connection.send(&mut frames)?;
            let deadline = Instant::now() + self.options.reply_timeout;
            let (mut reply, done) = slot.wait_until(deadline, Option::is_some);
            match reply.take() {
                Some(SchemaReply::Refused(code)) => Err(ClientError::Schema {
                    code,
                    table: table.to_string(),
                }),
                Some(SchemaReply::Lost(reason)) => Err(connection.lost(reason)),
                Some(reply) => Ok(reply),
                None => {
                    debug_assert!(!done, "a finished wait has a reply");
                    Err(ClientError::Timeout {
                        what: "a schema request",
                        waited: self.options.reply_timeout,
                    })
                }
            }
        })();
        connection.dispatch.unregister_request(request_id);
        result
    }
}

/// Copies bytes into a section of the client's pool.
pub(crate) fn section_from(bytes: &[u8]) -> Result<Section, ClientError> {
    section_pool().copy_from(bytes).ok_or_else(|| {
        if bytes.len() > signal::section::MAX_SECTION_BYTES {
            ClientError::Invalid {
                code: ErrorCode::RowTooLarge,
                detail: format!("a request section of {} bytes", bytes.len()),
            }
        } else {
            // Sections are in use by rows not yet consumed: a burst, so retry.
            ClientError::Invalid {
                code: ErrorCode::OutOfSignalMemory,
                detail: "client section pool exhausted".to_string(),
            }
        }
    })
}

fn unexpected_reply(table: &str, reply: SchemaReply) -> ClientError {
    ClientError::Protocol(format!(
        "unexpected answer to a schema request about table {table:?}: {reply:?}"
    ))
}

/// A number that differs between runs of this process: the frame header's
/// incarnation, so the data node can tell a restarted API node from a
/// late frame of its previous life.
fn incarnation() -> u32 {
    // RandomState is seeded randomly per process; mixing in time and pid
    // also separates processes that start at the same instant.
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    if let Ok(since_epoch) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        hasher.write_u128(since_epoch.as_nanos());
    }
    hasher.finish() as u32
}
