//! `Cluster`: this process as an API node. Connecting asks mgmd for the
//! config and an API node id, connects to every data node (one connection
//! and one receive thread each) and registers with each; the `Cluster` then
//! hands out transactions, routed to a tc of the node that holds the
//! primary of a key hint (or round robin over nodes and tc instances), and
//! runs schema requests against the president's `dict`, caching table
//! definitions with their partition maps.
//!
//! Map versions: every TCKEYCONF carries the cluster's distribution
//! version. One newer than any this client has seen makes every cached
//! table stale: the next `table()` or hinted transaction on it fetches the
//! table again (routing by a stale map only costs a hop: the tc routes to
//! the replicas itself).
//!
//! The mgmd connection stays open inside the `Cluster` for its whole life:
//! mgmd keeps the API node id allocated exactly as long as that connection
//! lives, so two processes can never share an id.

use crate::connection::{section_pool, FrameBuilder, NodeConnection};
use crate::dispatch::{Peers, SchemaReply};
use crate::environment::{Clock, Environment, Transport};
use crate::error::ClientError;
use crate::reconnect::{NodeSlot, Reconnector, Reopening};
use crate::session::AsyncSession;
use crate::table::Table;
use crate::tcp::TcpTransport;
use crate::transaction::{Body, Transaction};
use crate::value::Value;
use signal::schema::IndexChange;
use signal::schema::TableDef;
use signal::signals::{
    ApiToken, CreateIndexReq, CreateTabReq, DropIndexReq, DropTabReq, GetTabInfoReq, PartitionMap,
};
use signal::{BlockKind, ErrorCode, NodeId, Section, Signal};
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
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
    /// Longest wait for every data node to accept the connection and report
    /// itself started (the nodes are connected in parallel).
    pub connect_timeout: Duration,
    /// Pause between connection attempts and between API_REGREQs while a
    /// data node is still starting.
    pub register_retry_interval: Duration,
    /// Longest wait for the reply to a transaction or schema request; the
    /// outcome is unknown after it (`ClientError::Timeout`). Also the
    /// longest a write to a data node may block before the connection is
    /// given up.
    pub reply_timeout: Duration,
    /// Open a lost data-node connection again once the node is back (a
    /// thread per `Cluster`, `reconnect.rs`); off, a lost connection
    /// stays lost for the `Cluster`'s life.
    pub reconnect: bool,
    /// Data-node connections are read by whoever polls this receiver (an
    /// application's event loop) instead of a receive thread each.
    pub receiver: Option<Arc<crate::polled::Receiver>>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            connect_timeout: Duration::from_secs(30),
            register_retry_interval: Duration::from_millis(100),
            reply_timeout: Duration::from_secs(60),
            reconnect: true,
            receiver: None,
        }
    }
}

/// A connection of this process, as an API node, to a cluster.
///
/// ```no_run
/// use client::{Cluster, Commit, Value};
/// let cluster = Cluster::connect("127.0.0.1:11860")?;
/// let table = cluster.table("accounts")?;
/// // Runs on a tc of the node holding the primary replica of key 1.
/// let mut transaction = cluster.transaction_with_hint(&table, &[Value::UInt(1)])?;
/// transaction.insert(&table, &[("id", Value::UInt(1)), ("balance", Value::Double(10.0))])?;
/// let outcome = transaction.execute(Commit::Yes)?;
/// println!("committed in GCI {:?}", outcome.gci);
/// # Ok::<(), client::ClientError>(())
/// ```
pub struct Cluster {
    /// Declared first so that it stops before the connections drop.
    _heartbeat: Option<crate::heartbeat::Heartbeat>,
    /// Opens lost connections again (`reconnect.rs`); stopped first
    /// when the `Cluster` drops.
    reconnector: Option<Reconnector>,
    api_node: NodeId,
    /// One per data node of the config, in node id order (shared with the
    /// heartbeat and reconnecting threads).
    connections: Arc<[NodeSlot]>,
    /// Every (connection, tc instance) pair, for round robin.
    tc_slots: Vec<(usize, u16)>,
    options: ConnectOptions,
    transaction_counter: AtomicU64,
    /// Batches of key operations sent (`Cluster::executes`).
    executes: AtomicU64,
    request_counter: AtomicU32,
    /// The highest distribution version seen in any reply.
    map_version: AtomicU32,
    /// The connection whose dict last accepted a schema change.
    president_hint: AtomicUsize,
    tables: Mutex<HashMap<String, Arc<Table>>>,
    /// When fetching a fresher map for routing last failed: routing then
    /// keeps the stale map (a hint) rather than retrying every transaction.
    refresh_failed_at: Mutex<Option<Instant>>,
    /// Partition maps a scan found out of date (its node's connection
    /// lost, or the replica no longer the primary): table name -> (the
    /// highest map version found stale, when a newer one was last asked
    /// for). A scan-only client hears of a failover from no transaction's
    /// answer; routing asks dict again for such a table's map.
    stale_maps: Mutex<HashMap<String, (u32, Option<Instant>)>>,
    /// Whether `stale_maps` holds anything: routing a key (every
    /// transaction with a hint) looks no further when it does not.
    any_stale_map: AtomicBool,
    /// The time and the waits (the system's, or a simulator's).
    clock: Clock,
    /// mgmd, when connected through it: holds the API node id
    /// allocation, and tells which data nodes are down (the replica
    /// checker). Declared last so it drops last: the id is freed only
    /// once every data-node connection using it is closed.
    mgm: Option<Mutex<mgmclient::client::MgmClient>>,
}

impl Drop for Cluster {
    /// Closes every data-node connection, even one something still holds
    /// a reference to (a transaction leaked with `mem::forget`): the data
    /// nodes must see this API node go, and end its transactions.
    fn drop(&mut self) {
        // No connection opened again from here on.
        drop(self.reconnector.take());
        for slot in self.connections.iter() {
            slot.get().shut_down();
        }
    }
}

/// Transaction ids carry the API node id in the top 16 bits.
const TRANSACTION_COUNTER_MASK: u64 = (1 << 48) - 1;

/// How long routing keeps a stale map after fetching a fresh one failed.
const REFRESH_RETRY_INTERVAL: Duration = Duration::from_secs(1);

/// How often routing asks dict again for the map of a table whose map a
/// scan found stale, while dict still hands out that one (a failure not
/// agreed yet).
const STALE_MAP_RETRY: Duration = Duration::from_millis(20);

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
    /// connects to every data node of the config and registers with each.
    /// A data node that is not up yet is retried until the connect timeout;
    /// connecting fails if any data node cannot be reached by then, except
    /// one that mgmd reports failed or shut down: the cluster carries on
    /// without it, and so does the client (it fails if every data node is
    /// down).
    ///
    /// ```no_run
    /// let options = client::ConnectOptions::default();
    /// let cluster = client::Cluster::connect_with("127.0.0.1:11860", options)?;
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn connect_with(mgmd_addr: &str, options: ConnectOptions) -> Result<Cluster, ClientError> {
        let mut mgm = mgmclient::client::MgmClient::connect(mgmd_addr)?;
        let text = mgm.get_config()?;
        let config = config::ClusterConfig::from_toml_str(&text, "mgmd")
            .map_err(|error| ClientError::Config(error.to_string()))?;
        if config.data_nodes.is_empty() {
            return Err(ClientError::Config(
                "the cluster config lists no data node".to_string(),
            ));
        }
        let down = data_nodes_down(&mgm.show()?);
        if config.data_nodes.iter().all(|node| down.contains(&node.id)) {
            return Err(ClientError::Config(format!(
                "mgmd reports every data node failed or shut down ({down:?})"
            )));
        }
        let allocation = mgm.alloc_api_node()?;
        let api_node = NodeId(allocation.node_id);
        let address = |node: &config::DataNodeConfig| format!("{}:{}", node.host, node.port);
        let targets: Vec<(String, Option<NodeId>)> = config
            .data_nodes
            .iter()
            .filter(|node| !down.contains(&node.id))
            .map(|node| (address(node), Some(NodeId(node.id))))
            .collect();
        let opening = Opening::tcp(&options, allocation.token);
        let mut connections = open_all(&opening, &targets, api_node, &options)?;
        // The nodes down now: reached once they are up (`reconnect.rs`).
        let tc_instances = connections
            .iter()
            .map(|connection| connection.tc_instances)
            .max()
            .unwrap_or(1);
        for node in config
            .data_nodes
            .iter()
            .filter(|node| down.contains(&node.id))
        {
            connections.push(NodeConnection::not_open(
                &address(node),
                NodeId(node.id),
                api_node,
                allocation.token,
                tc_instances,
                format!("data node {} was down when this client connected", node.id),
            ));
        }
        Cluster::assemble(api_node, Some(mgm), connections, options, opening)
    }

    /// Connects straight to a data node at `data_node_addr` as API node
    /// `api_node_id`, skipping mgmd, with no token: only test stand-ins
    /// for data nodes (`fakenode`) take it; a real data node refuses it
    /// (ApiRegRef `NotAdmitted`), and
    /// [`Cluster::connect_direct_with_token`] is the way to reach one.
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
        Cluster::connect_direct_many(&[data_node_addr], api_node_id, options)
    }

    /// [`Cluster::connect_direct`] to several data nodes at once (their ids
    /// come from their registration answers).
    ///
    /// ```no_run
    /// let options = client::ConnectOptions::default();
    /// let cluster = client::Cluster::connect_direct_many(
    ///     &["127.0.0.1:11861", "127.0.0.1:11862"], 200, options)?;
    /// assert_eq!(cluster.data_nodes().len(), 2);
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn connect_direct_many(
        data_node_addrs: &[&str],
        api_node_id: u16,
        options: ConnectOptions,
    ) -> Result<Cluster, ClientError> {
        Cluster::connect_direct_with_token(data_node_addrs, api_node_id, ApiToken::NONE, options)
    }

    /// [`Cluster::connect_direct_many`] presenting `token`, which must be
    /// the one mgmd's secret makes for `api_node_id`
    /// (`admission::ClusterSecret::api_token`): data nodes admit an API
    /// node on its token alone, without asking mgmd. For tests and tools
    /// that hold the cluster secret; nothing then stops two processes from
    /// using the same id.
    pub fn connect_direct_with_token(
        data_node_addrs: &[&str],
        api_node_id: u16,
        token: ApiToken,
        options: ConnectOptions,
    ) -> Result<Cluster, ClientError> {
        if data_node_addrs.is_empty() {
            return Err(ClientError::Usage("no data node address given".into()));
        }
        let targets: Vec<(String, Option<NodeId>)> = data_node_addrs
            .iter()
            .map(|addr| (addr.to_string(), None))
            .collect();
        let opening = Opening::tcp(&options, token);
        let connections = open_all(&opening, &targets, NodeId(api_node_id), &options)?;
        Cluster::assemble(NodeId(api_node_id), None, connections, options, opening)
    }

    /// Connects as API node `api_node_id` to the data nodes `data_nodes`
    /// (address and node id) in `environment`: its transport carries the
    /// bytes and its driver tells the time and takes the turns. This is
    /// how the simulator runs the real client (docs/design/testing.md §3);
    /// the connections open one after the other, so the run is the same
    /// for the same seed.
    pub fn connect_in(
        environment: &Environment,
        data_nodes: &[(&str, u16)],
        api_node_id: u16,
        options: ConnectOptions,
    ) -> Result<Cluster, ClientError> {
        if data_nodes.is_empty() {
            return Err(ClientError::Usage("no data node given".into()));
        }
        let targets: Vec<(String, Option<NodeId>)> = data_nodes
            .iter()
            .map(|&(addr, node)| (addr.to_string(), Some(NodeId(node))))
            .collect();
        let opening = Opening {
            transport: Arc::clone(&environment.transport),
            clock: Clock::Driven(Arc::clone(&environment.driver)),
            incarnation: environment.incarnation,
            token: environment.token,
        };
        let connections = open_all(&opening, &targets, NodeId(api_node_id), &options)?;
        Cluster::assemble(NodeId(api_node_id), None, connections, options, opening)
    }

    fn assemble(
        api_node: NodeId,
        mgm: Option<mgmclient::client::MgmClient>,
        mut connections: Vec<NodeConnection>,
        options: ConnectOptions,
        opening: Opening,
    ) -> Result<Cluster, ClientError> {
        let Opening {
            transport,
            clock,
            incarnation,
            token,
        } = opening;
        connections.sort_by_key(|connection| connection.node().0);
        for pair in connections.windows(2) {
            if pair[0].node() == pair[1].node() {
                return Err(ClientError::Config(format!(
                    "{} and {} are both data node {}",
                    pair[0].addr,
                    pair[1].addr,
                    pair[0].node()
                )));
            }
        }
        let peers = Arc::new(Peers::default());
        for connection in &connections {
            peers.set(connection.node(), &connection.dispatch);
            connection.dispatch.set_peers(&peers);
        }
        let tc_slots = connections
            .iter()
            .enumerate()
            .flat_map(|(index, connection)| {
                (0..connection.tc_instances).map(move |instance| (index, instance))
            })
            .collect();
        let connections: Arc<[NodeSlot]> = connections.into_iter().map(NodeSlot::new).collect();
        // A simulated client has no thread of its own (`heartbeat.rs`).
        let heartbeat = if clock.is_driven() {
            None
        } else {
            crate::heartbeat::Heartbeat::start(&connections)
        };
        let reconnector = if clock.is_driven() || !options.reconnect {
            None
        } else {
            Reconnector::start(
                &connections,
                Reopening {
                    transport,
                    clock: clock.clone(),
                    incarnation,
                    api_node,
                    token,
                    retry_interval: options.register_retry_interval,
                    peers,
                },
            )
        };
        Ok(Cluster {
            _heartbeat: heartbeat,
            reconnector,
            api_node,
            connections,
            tc_slots,
            options,
            // Start the counter somewhere unpredictable: an API node id is
            // reused by the next process that asks mgmd for one, and its
            // transaction ids must not collide with the previous owner's
            // transactions that a tc may still be aborting.
            transaction_counter: AtomicU64::new(
                (u64::from(incarnation) << 16) & (TRANSACTION_COUNTER_MASK >> 1),
            ),
            executes: AtomicU64::new(0),
            // Same reason as the transaction counter: a reused API node id
            // must not meet late schema replies meant for its previous owner.
            request_counter: AtomicU32::new(incarnation),
            map_version: AtomicU32::new(0),
            president_hint: AtomicUsize::new(0),
            tables: Mutex::new(HashMap::new()),
            refresh_failed_at: Mutex::new(None),
            stale_maps: Mutex::new(HashMap::new()),
            any_stale_map: AtomicBool::new(false),
            clock,
            mgm: mgm.map(Mutex::new),
        })
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

    /// The batches of key operations this connection's transactions sent
    /// to the data nodes so far (each execute and each commit that had
    /// something to send): its round trips for key operations, scans
    /// apart. NDB's `Ndb_execute_count`.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// let table = cluster.table("t")?;
    /// let before = cluster.executes();
    /// let mut transaction = cluster.transaction();
    /// transaction.delete(&table, &[client::Value::UInt(1)])?;
    /// transaction.execute(client::Commit::Yes)?;
    /// assert_eq!(cluster.executes(), before + 1);
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn executes(&self) -> u64 {
        self.executes.load(Ordering::Relaxed)
    }

    /// Counts a batch of key operations sent.
    pub(crate) fn count_execute(&self) {
        self.executes.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether every data-node connection is up. A lost one is opened
    /// again once its node is back (unless [`ConnectOptions::reconnect`]
    /// is off); meanwhile transactions go to the nodes connected.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// assert!(cluster.is_connected());
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn is_connected(&self) -> bool {
        self.connections
            .iter()
            .all(|slot| slot.get().is_connected())
    }

    /// Whether the connection to data node `node` is up.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// assert!(cluster.is_node_connected(signal::NodeId(2)));
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn is_node_connected(&self, node: NodeId) -> bool {
        self.connection_index(node)
            .is_some_and(|index| self.connection(index).is_connected())
    }

    /// The data nodes of this cluster (connected or not), in id order.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// println!("{:?}", cluster.data_nodes());
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn data_nodes(&self) -> Vec<NodeId> {
        self.connections.iter().map(NodeSlot::node).collect()
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

    /// tc instances of the first data node, as it reported on registration.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// assert!(cluster.tc_instances() >= 1);
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn tc_instances(&self) -> u16 {
        self.connection(0).tc_instances
    }

    /// tc instances of data node `node` (`None`: not a data node of this cluster).
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// assert!(cluster.tc_instances_on(signal::NodeId(2)).is_some());
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn tc_instances_on(&self, node: NodeId) -> Option<u16> {
        self.connection_index(node)
            .map(|index| self.connection(index).tc_instances)
    }

    /// The highest distribution (partition map) version any reply carried.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// println!("map version {}", cluster.map_version());
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn map_version(&self) -> u32 {
        self.map_version.load(Ordering::Acquire)
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
            .map(|slot| slot.get().dispatch.in_flight())
            .sum()
    }

    /// An async session: many transactions in flight from the calling
    /// thread, see [`AsyncSession`].
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// let session = cluster.session::<u64>();
    /// assert_eq!(session.in_flight(), 0);
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn session<T>(&self) -> AsyncSession<'_, T> {
        AsyncSession::new(self)
    }

    /// The client's time and waits.
    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    fn next_transaction(&self) -> (signal::TransactionId, u64) {
        let counter = (self.transaction_counter.fetch_add(1, Ordering::Relaxed) + 1)
            & TRANSACTION_COUNTER_MASK;
        let id = signal::TransactionId(((self.api_node.0 as u64) << 48) | counter);
        (id, counter)
    }

    /// Starts a transaction on the next tc in round robin over every data
    /// node and its tc instances (skipping lost connections). Nothing is
    /// sent until it executes.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// let transaction = cluster.transaction();
    /// println!("{:?} on node {}", transaction.id(), transaction.node());
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn transaction(&self) -> Transaction<'_> {
        let (id, counter) = self.next_transaction();
        let (connection, tc_instance) = self.round_robin(counter);
        Transaction::new(self, id, connection, tc_instance, Body::take())
    }

    /// Starts a transaction on a tc of the data node holding the primary
    /// replica of `key` in `table` (the first connected replica if the
    /// primary's connection is lost; round robin without a map). Every
    /// operation of the transaction goes to that tc, whatever its key:
    /// the tc routes each to its replicas. Of the node's tc instances it
    /// picks the one numbered like the ldm instance that holds the
    /// partition: with `tc_on_ldm` that tc runs on the very thread of the
    /// key's ldm, so the lookup never crosses threads in the data node.
    ///
    /// ```no_run
    /// use client::Value;
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// let table = cluster.table("t")?;
    /// let transaction = cluster.transaction_with_hint(&table, &[Value::UInt(42)])?;
    /// println!("key 42 runs on node {}", transaction.node());
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn transaction_with_hint(
        &self,
        table: &Arc<Table>,
        key: &[Value],
    ) -> Result<Transaction<'_>, ClientError> {
        // Encoded into the transaction's bytes, where an operation on the
        // same key finds it.
        let mut body = Body::take();
        let encoded = body.encode_hint(table, key)?;
        let placement = self.placement_of_key_section(table, encoded)?;
        Ok(self.transaction_at(placement, body))
    }

    /// Starts a transaction on the tc of the data node holding the
    /// primary replica of the rows whose partition-key columns hold
    /// `values` (in the partition key's order): for a first statement
    /// that reaches its rows by a range pinning the partition key, not by
    /// one primary key (NDB's distribution awareness for a scan of one
    /// partition). Round robin, as [`Cluster::transaction`], when the
    /// table has no partition key of its own, `values` do not fit it, or
    /// there is no map of the table: a hint only places the tc, every
    /// operation is routed by its own key.
    ///
    /// ```no_run
    /// use client::Value;
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// let table = cluster.table("db/order_line")?;
    /// let transaction = cluster.transaction_with_partition_hint(&table, &[Value::Int(3)]);
    /// println!("warehouse 3's rows are coordinated on node {}", transaction.node());
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn transaction_with_partition_hint(
        &self,
        table: &Arc<Table>,
        values: &[Value],
    ) -> Transaction<'_> {
        let placement = table
            .bucket_of_partition_values(values.iter())
            .and_then(|bucket| self.placement_of_bucket(table, bucket));
        self.transaction_at(placement, Body::take())
    }

    /// A transaction on the tc that holds `placement`'s partition (the
    /// first connected replica, primary first), numbered like its ldm
    /// instance; round robin without one.
    fn transaction_at(
        &self,
        placement: Option<(Arc<PartitionMap>, u32)>,
        body: Box<Body>,
    ) -> Transaction<'_> {
        let (id, counter) = self.next_transaction();
        let connection = placement.and_then(|(map, partition)| {
            let placement = &map.partitions[partition as usize];
            placement
                .replicas
                .iter()
                .filter_map(|&node| self.connection_index(node))
                .find(|&index| self.connections[index].with(NodeConnection::takes_transactions))
                .map(|index| (index, placement.ldm_instance))
        });
        let (connection, tc_instance) = match connection {
            Some((index, ldm_instance)) => {
                let instances = self.connection(index).tc_instances.max(1);
                (index, ldm_instance % instances)
            }
            None => self.round_robin(counter),
        };
        Transaction::new(self, id, connection, tc_instance, body)
    }

    /// Starts a transaction on a tc of data node `node` (round robin over
    /// its tc instances): for programs that group work by node themselves.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// let transaction = cluster.transaction_on_node(signal::NodeId(2))?;
    /// assert_eq!(transaction.node(), signal::NodeId(2));
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn transaction_on_node(&self, node: NodeId) -> Result<Transaction<'_>, ClientError> {
        let index = self.connection_index(node).ok_or_else(|| {
            ClientError::Usage(format!("{node} is not a data node of this cluster"))
        })?;
        let (id, counter) = self.next_transaction();
        let instances = u64::from(self.connection(index).tc_instances.max(1));
        Ok(Transaction::new(
            self,
            id,
            index,
            (counter % instances) as u16,
            Body::take(),
        ))
    }

    /// The data node holding the primary replica of `key` in `table`, by
    /// the freshest map this client has (fetching one if the cached map is
    /// stale); `None` when the table has no map.
    ///
    /// ```no_run
    /// use client::Value;
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// let table = cluster.table("t")?;
    /// println!("{:?}", cluster.primary_node(&table, &[Value::UInt(42)])?);
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn primary_node(
        &self,
        table: &Table,
        key: &[Value],
    ) -> Result<Option<NodeId>, ClientError> {
        let mut bytes = Vec::new();
        table.encode_key(key, &mut bytes)?;
        Ok(self
            .placement_of_key_section(table, &bytes)?
            .map(|(map, partition)| map.partitions[partition as usize].replicas[0]))
    }

    /// The routing map of `table` and the partition of the encoded key.
    fn placement_of_key_section(
        &self,
        table: &Table,
        key: &[u8],
    ) -> Result<Option<(Arc<PartitionMap>, u32)>, ClientError> {
        let hash =
            signal::attr::key_hash(table.def(), key).map_err(|code| ClientError::Invalid {
                code,
                detail: format!("a key of table {:?}", table.name()),
            })?;
        Ok(self.placement_of_bucket(table, signal::partition::bucket(hash)))
    }

    /// The routing map of `table` and the partition of `bucket`; `None`
    /// when the table has no map.
    fn placement_of_bucket(&self, table: &Table, bucket: u32) -> Option<(Arc<PartitionMap>, u32)> {
        let map = self.routing_map(table)?;
        let partition = map.bucket_partitions[bucket as usize];
        debug_assert!(
            (partition as usize) < map.partitions.len(),
            "decode_partition_map checks every bucket names a partition"
        );
        Some((map, partition))
    }

    /// The freshest map of `table` at hand: its own if it is current, else
    /// the cache's or a newly fetched one of the same table (same id and
    /// version); a stale map when nothing fresher can be had.
    pub(crate) fn routing_map(&self, table: &Table) -> Option<Arc<PartitionMap>> {
        if let Some(base) = table.base_table() {
            // A unique index's hidden table goes where its base table's
            // map says, as fresh as that table's.
            let cached = self.cached_tables().get(base).cloned();
            return match cached {
                Some(base)
                    if base.unique_index_tables().any(|(_, hidden)| {
                        hidden.def().id == table.def().id
                            && hidden.def().version == table.def().version
                    }) =>
                {
                    self.routing_map(&base)
                }
                _ => table.map().cloned(),
            };
        }
        if let Some(map) = self.fresher_than_stale(table) {
            return Some(map);
        }
        let known = self.map_version();
        if table.map().is_some() && table.map_version() >= known {
            return table.map().cloned();
        }
        let same_table = |other: &Table| {
            other.def().id == table.def().id && other.def().version == table.def().version
        };
        let cached = self.cached_tables().get(table.name()).cloned();
        let fresher = match cached {
            Some(cached) if cached.map_version() >= known => Some(cached),
            _ if self.may_refresh() => match self.table(table.name()) {
                Ok(fetched) => Some(fetched),
                Err(_) => {
                    *self
                        .refresh_failed_at
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) = Some(self.clock.now());
                    None
                }
            },
            _ => None,
        };
        match fresher {
            Some(fresher) if same_table(&fresher) && fresher.map().is_some() => {
                fresher.map().cloned()
            }
            _ => table.map().cloned(),
        }
    }

    /// A scan found `map` of table `name` out of date (see `stale_maps`).
    pub(crate) fn map_is_stale(&self, name: &str, map: &PartitionMap) {
        let mut stale = self
            .stale_maps
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let entry = stale.entry(name.to_owned()).or_insert((map.version, None));
        entry.0 = entry.0.max(map.version);
        self.any_stale_map.store(true, Ordering::Release);
    }

    /// For a table whose map a scan found out of date: a map newer than
    /// that one, asked of dict at most every STALE_MAP_RETRY while none
    /// is to be had (the failure may not be agreed yet). `None`: the
    /// table's map was not found stale, or nothing newer is known yet.
    fn fresher_than_stale(&self, table: &Table) -> Option<Arc<PartitionMap>> {
        if !self.any_stale_map.load(Ordering::Acquire) {
            return None;
        }
        let name = table.name();
        let (stale, asked) = *self
            .stale_maps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)?;
        let newer = |candidate: &Table| {
            let same = candidate.def().id == table.def().id
                && candidate.def().version == table.def().version;
            candidate
                .map()
                .filter(|map| same && map.version > stale)
                .cloned()
        };
        if let Some(map) = self
            .cached_tables()
            .get(name)
            .and_then(|cached| newer(cached))
        {
            return Some(map);
        }
        let now = self.clock.now();
        if asked.is_some_and(|asked| now.saturating_duration_since(asked) < STALE_MAP_RETRY) {
            return None;
        }
        if let Some(entry) = self
            .stale_maps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(name)
        {
            entry.1 = Some(now);
        }
        self.invalidate_table(name);
        let fetched = self.table(name).ok()?;
        let map = newer(&fetched)?;
        // A newer map is cached now: the mark has done its work.
        let mut stale = self
            .stale_maps
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if stale
            .get(name)
            .is_some_and(|&(version, _)| version < map.version)
        {
            stale.remove(name);
            if stale.is_empty() {
                self.any_stale_map.store(false, Ordering::Release);
            }
        }
        Some(map)
    }

    fn may_refresh(&self) -> bool {
        match *self
            .refresh_failed_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
        {
            None => true,
            Some(failed) => {
                self.clock.now().saturating_duration_since(failed) >= REFRESH_RETRY_INTERVAL
            }
        }
    }

    /// A reply carried distribution version `version`: a newer one than
    /// seen before makes every cached table stale.
    pub(crate) fn observe_map_version(&self, version: u32) {
        if version > self.map_version.load(Ordering::Relaxed) {
            self.map_version.fetch_max(version, Ordering::AcqRel);
        }
    }

    fn round_robin(&self, counter: u64) -> (usize, u16) {
        let slots = self.tc_slots.len();
        let start = (counter % slots as u64) as usize;
        (0..slots)
            .map(|step| self.tc_slots[(start + step) % slots])
            .find(|&(connection, _)| {
                self.connections[connection].with(NodeConnection::takes_transactions)
            })
            .or_else(|| {
                (0..slots)
                    .map(|step| self.tc_slots[(start + step) % slots])
                    .find(|&(connection, _)| {
                        self.connections[connection].with(NodeConnection::is_connected)
                    })
            })
            // Every connection is lost: sending will say so.
            .unwrap_or(self.tc_slots[start])
    }

    pub(crate) fn connection_index(&self, node: NodeId) -> Option<usize> {
        self.connections.iter().position(|slot| slot.node() == node)
    }

    /// The connection now in slot `index` (it may be lost).
    pub(crate) fn connection(&self, index: usize) -> Arc<NodeConnection> {
        self.connections[index].get()
    }

    /// A new request id (schema requests, scans, GCI waits).
    pub(crate) fn next_request_id(&self) -> u32 {
        self.request_counter.fetch_add(1, Ordering::Relaxed)
    }

    /// Some tc (connection index, instance), round robin, preferring
    /// connected nodes: where a request any tc can answer goes.
    pub(crate) fn any_tc(&self) -> (usize, u16) {
        self.round_robin(self.transaction_counter.load(Ordering::Relaxed))
    }

    /// The tc to ask whether a GCI is durable: `preferred` (connection
    /// index, tc instance) while its connection is up, else a tc of the
    /// next connected node in id order (every tc learns the complete GCI).
    /// `ConnectionLost` (naming the preferred node) when none is up.
    pub(crate) fn durable_wait_tc(
        &self,
        preferred: (usize, u16),
    ) -> Result<(usize, u16), ClientError> {
        let (start, instance) = preferred;
        let nodes = self.connections.len();
        (0..nodes)
            .map(|step| (start + step) % nodes)
            .find(|&index| self.connection(index).is_connected())
            .map(|index| {
                let instances = self.connection(index).tc_instances.max(1);
                (index, instance % instances)
            })
            .ok_or_else(|| {
                let connection = self.connection(start % nodes);
                connection.lost(connection.dispatch.closed_reason().unwrap_or_default())
            })
    }

    /// Creates a table and returns its definition as `dict` stored it (with
    /// id, version and partitions). The definition is cached for
    /// [`Cluster::table`].
    ///
    /// ```no_run
    /// use signal::schema::{ColumnDef, ColumnType, TableDef};
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// let created = cluster.create_table(&TableDef {
    ///     indexes: Vec::new(), revision: 0,
    ///     id: 0, version: 0, name: "t".into(), partitions: 0, primary_key: vec![0],
    ///     columns: vec![ColumnDef { name: "k".into(), column_type: ColumnType::Int { unsigned: true }, nullable: false }],
    ///     partition_key: Vec::new(),
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
        let reply = self.schema_request(&definition.name, false, |request_id| {
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
        let reply = self.schema_request(name, false, |request_id| {
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

    /// Creates the ordered index `index` over `columns` (in index order)
    /// on table `table`, which may hold rows and be written meanwhile:
    /// every data node builds it over its rows, and it is usable once
    /// complete on every replica, when this returns. The new definition
    /// is fetched for [`Cluster::table`].
    /// Errors: `IndexExists`, `UnknownTable`, `UnknownColumn`,
    /// `TooManyIndexes`, `TableFull` (DataMemory has no room for the
    /// index: nothing changed).
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// cluster.create_index("t", "by_name", &["name"])?;
    /// let table = cluster.table("t")?;
    /// assert!(table.def().index("by_name").is_some());
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn create_index(
        &self,
        table: &str,
        index: &str,
        columns: &[&str],
    ) -> Result<(), ClientError> {
        self.index_change(table, index, columns, Change::Create { unique: false })
    }

    /// Creates the unique index `index` of table `table` on `columns`
    /// while the table is read and written (docs/design/0026-unique-indexes.md):
    /// every row's values are checked, and from its return on no two
    /// rows hold the same values in them (rows with a NULL in one are
    /// not held to it). Errors as [`Cluster::create_index`], and
    /// `DuplicateKey` when two rows hold the same values: the table is
    /// left as it was, without the index.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// cluster.create_unique_index("users", "by_email", &["email"])?;
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn create_unique_index(
        &self,
        table: &str,
        index: &str,
        columns: &[&str],
    ) -> Result<(), ClientError> {
        self.index_change(table, index, columns, Change::Create { unique: true })
    }

    /// Drops the index `index` of table `table`: no definition handed
    /// out names it from then on, and every data node frees it (a unique
    /// index's hidden table too, once no write keeps it).
    /// Errors: `UnknownIndex`, `UnknownTable`.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// cluster.drop_index("t", "by_name")?;
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn drop_index(&self, table: &str, index: &str) -> Result<(), ClientError> {
        self.index_change(table, index, &[], Change::Drop)
    }

    fn index_change(
        &self,
        table: &str,
        index: &str,
        columns: &[&str],
        change: Change,
    ) -> Result<(), ClientError> {
        let create = matches!(change, Change::Create { .. });
        if create && columns.is_empty() {
            return Err(ClientError::Invalid {
                code: ErrorCode::BadTableDefinition,
                detail: format!("index {index:?} on table {table:?}: name at least one column"),
            });
        }
        let change = IndexChange {
            table: table.to_owned(),
            index: index.to_owned(),
            columns: columns.iter().map(|&column| column.to_owned()).collect(),
            unique: matches!(change, Change::Create { unique: true }),
        };
        let bytes = change.encode_to_vec();
        // The dict checks the names again; here a bad one is the caller's
        // mistake, said before anything is sent.
        IndexChange::decode(&bytes).map_err(|message| ClientError::Invalid {
            code: ErrorCode::BadTableDefinition,
            detail: format!("index {index:?} on table {table:?}: {message}"),
        })?;
        let reply = self.schema_request(table, false, |request_id| {
            let change = section_from(&bytes)?;
            Ok(if create {
                CreateIndexReq { request_id, change }.into()
            } else {
                DropIndexReq { request_id, change }.into()
            })
        })?;
        self.invalidate_table(table);
        match reply {
            SchemaReply::Altered => Ok(()),
            other => Err(unexpected_reply(table, other)),
        }
    }

    /// The table `name` with its partition map: from the cache while its
    /// map is current, else fetched from `dict` (then cached).
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// let table = cluster.table("t")?;
    /// println!("{} columns", table.def().columns.len());
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn table(&self, name: &str) -> Result<Arc<Table>, ClientError> {
        let known = self.map_version();
        if let Some(table) = self.cached_tables().get(name) {
            if table.map_version() >= known {
                return Ok(Arc::clone(table));
            }
        }
        let reply = self.schema_request(name, true, |request_id| {
            Ok(GetTabInfoReq {
                request_id,
                name: section_from(name.as_bytes())?,
            }
            .into())
        })?;
        let SchemaReply::Info {
            definition,
            map_version,
            map,
        } = reply
        else {
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
        let map = signal::codec::decode_partition_map(&map).map_err(|error| {
            ClientError::Protocol(format!("partition map of table {name:?}: {error}"))
        })?;
        if map.table_id != def.id {
            return Err(ClientError::Protocol(format!(
                "the partition map of table {name:?} (id {}) is for table id {}",
                def.id, map.table_id
            )));
        }
        self.observe_map_version(map_version);
        // Current as of the version known when asking, even if the answer
        // carries an older one (a node a step behind): otherwise every
        // later lookup would ask again. A stale map only costs a hop.
        let table = Arc::new(Table::with_map(def, map, map_version.max(known)));
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
        if let Some(base) = stale.base_table() {
            // A unique index's hidden table is as stale as its base
            // table, whose definition it came with.
            let holds = tables.get(base).is_some_and(|cached| {
                cached.unique_index_tables().any(|(_, hidden)| {
                    hidden.def().id == stale.def().id && hidden.def().version == stale.def().version
                })
            });
            if holds {
                tables.remove(base);
            }
            return;
        }
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

    /// Sends one schema request to dict, on the president first (the node
    /// that last took a schema change, at first the lowest node id), and
    /// on the next node in id order after NotMaster. An `idempotent`
    /// request (a fetch) also moves on from a lost connection. A refusal
    /// becomes `ClientError::Schema`.
    pub(crate) fn schema_request(
        &self,
        table: &str,
        idempotent: bool,
        build: impl Fn(u32) -> Result<Signal, ClientError>,
    ) -> Result<SchemaReply, ClientError> {
        let nodes = self.connections.len();
        let start = self.president_hint.load(Ordering::Relaxed) % nodes;
        let mut last_error = None;
        for step in 0..nodes {
            let index = (start + step) % nodes;
            let connection = self.connection(index);
            if !connection.is_connected() {
                let reason = connection.dispatch.closed_reason().unwrap_or_default();
                last_error = Some(connection.lost(reason));
                continue;
            }
            match self.request_on(&connection, (BlockKind::Dict, 0), table, &build) {
                Err(error) if error.code() == Some(ErrorCode::NotMaster) => {
                    last_error = Some(error);
                }
                Err(error @ ClientError::ConnectionLost { .. }) if idempotent => {
                    last_error = Some(error);
                }
                result => {
                    if !idempotent && result.is_ok() {
                        self.president_hint.store(index, Ordering::Relaxed);
                    }
                    return result;
                }
            }
        }
        Err(last_error.expect("a cluster has at least one data node"))
    }

    /// Sends one request to block `to` of `connection`'s node and waits
    /// for its answer; a refusal becomes `ClientError::Schema` about `table`.
    pub(crate) fn request_on(
        &self,
        connection: &Arc<NodeConnection>,
        to: (BlockKind, u16),
        table: &str,
        build: &impl Fn(u32) -> Result<Signal, ClientError>,
    ) -> Result<SchemaReply, ClientError> {
        let request_id = self.next_request_id();
        let slot = connection
            .dispatch
            .register_request(request_id)
            .map_err(|reason| connection.lost(reason))?;
        let result = (|| {
            let mut frames = FrameBuilder::default();
            frames.push(&connection.envelope(to.0, to.1, build(request_id)?))?;
            connection.send(&mut frames)?;
            let deadline = self.clock.now() + self.options.reply_timeout;
            let (mut reply, done) = slot.wait_until(&self.clock, deadline, Option::is_some);
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

/// How connections are opened: by which transport, on which clock, with
/// which incarnation and token.
struct Opening {
    transport: Arc<dyn Transport>,
    clock: Clock,
    incarnation: u32,
    token: ApiToken,
}

impl Opening {
    /// TCP, the system clock and a fresh incarnation: a real process.
    fn tcp(options: &ConnectOptions, token: ApiToken) -> Opening {
        Opening {
            token,
            transport: Arc::new(TcpTransport {
                retry_interval: options.register_retry_interval,
                write_timeout: options.reply_timeout,
                receiver: options.receiver.clone(),
            }),
            clock: Clock::System,
            // One incarnation for every connection of this process's life.
            incarnation: incarnation(),
        }
    }
}

/// Opens a connection to every target (in parallel on the system clock;
/// one after the other on a driver's), each retried until the connect
/// timeout; the first failure in target order is the error.
impl Cluster {
    /// The data nodes failed or shut down now, as mgmd reports them
    /// (none known for a client connected without mgmd).
    pub(crate) fn data_nodes_down_now(&self) -> Result<Vec<u16>, ClientError> {
        let Some(mgm) = &self.mgm else {
            return Ok(Vec::new());
        };
        let show = mgm
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .show()?;
        Ok(data_nodes_down(&show))
    }
}

/// The data nodes mgmd's `show` reports failed or shut down.
fn data_nodes_down(show: &serde_json::Value) -> Vec<u16> {
    let nodes = show.get("nodes").and_then(serde_json::Value::as_array);
    nodes
        .into_iter()
        .flatten()
        .filter(|node| node.get("type").and_then(serde_json::Value::as_str) == Some("data"))
        .filter(|node| {
            matches!(
                node.get("state").and_then(serde_json::Value::as_str),
                Some("failed" | "shut_down" | "stopped")
            )
        })
        .filter_map(|node| node.get("id").and_then(serde_json::Value::as_u64))
        .filter_map(|id| u16::try_from(id).ok())
        .collect()
}

fn open_all(
    opening: &Opening,
    targets: &[(String, Option<NodeId>)],
    api_node: NodeId,
    options: &ConnectOptions,
) -> Result<Vec<NodeConnection>, ClientError> {
    let open = |(addr, node): &(String, Option<NodeId>)| {
        NodeConnection::open(
            opening.transport.as_ref(),
            &opening.clock,
            addr,
            *node,
            api_node,
            opening.token,
            opening.incarnation,
            options.connect_timeout,
            options.register_retry_interval,
        )
    };
    let results: Vec<Result<NodeConnection, ClientError>> =
        if targets.len() == 1 || opening.clock.is_driven() {
            targets.iter().map(open).collect()
        } else {
            std::thread::scope(|scope| {
                let threads: Vec<_> = targets
                    .iter()
                    .map(|target| scope.spawn(move || open(target)))
                    .collect();
                threads
                    .into_iter()
                    .map(|thread| match thread.join() {
                        Ok(result) => result,
                        Err(panic) => std::panic::resume_unwind(panic),
                    })
                    .collect()
            })
        };
    // Connections opened before a failure close as the vector drops.
    results.into_iter().collect()
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

pub(crate) fn unexpected_reply(table: &str, reply: SchemaReply) -> ClientError {
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

/// An index change a client asks for.
#[derive(Clone, Copy)]
enum Change {
    Create { unique: bool },
    Drop,
}
