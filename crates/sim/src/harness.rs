//! The in-process cluster harness: a test's client code runs as a hosted
//! API node (`hosted`) against the production blocks of a simulated
//! cluster, deterministically from a seed, in milliseconds.
//!
//! Use it to test the client and the data nodes together when the test is
//! about what they do, not about processes, sockets or real time (those
//! are the cluster tests' subject, crates/cli/tests, with real processes).
//! Unlike a fake data node, every answer comes from the real tc, ldm,
//! dih and dict; unlike real processes, a failure replays from its seed.
//!
//! ```
//! use client::{Commit, LockMode, Value};
//! use sim::harness::Harness;
//! let answer = Harness::new(7).run(|cluster, _| -> Result<_, client::ClientError> {
//!     let table = sim::harness::create_kv_table(cluster, "kv");
//!     let mut transaction = cluster.transaction();
//!     transaction.insert(&table, &[("k", Value::UInt(1)), ("v", Value::from("one"))])?;
//!     transaction.execute(Commit::Yes)?;
//!     let mut transaction = cluster.transaction();
//!     let op = transaction.read(&table, &[Value::UInt(1)], LockMode::CommittedRead)?;
//!     transaction.execute(Commit::Yes)?;
//!     Ok(transaction.get(op).and_then(|row| row.get("v")?.as_str().map(String::from)))
//! });
//! assert_eq!(answer.unwrap().as_deref(), Some("one"));
//! ```

use crate::config::{ClusterShape, NodeLimits};
use crate::hosted::{HostedApiNodes, HostedContext};
use crate::nemesis::{Fault, Schedule};
use crate::simulation::Simulation;
use client::{ClientError, Cluster, ColumnDef, ColumnType, ConnectOptions, Table, TableDef};
use signal::NodeId;
use std::sync::Arc;

/// The API node id the harness's client gets.
pub const HARNESS_API_NODE: NodeId = NodeId(200);

/// Simulated time a test's client code may take.
const RUN_LIMIT_US: u64 = 600_000_000;

/// A simulated cluster to run client code against.
pub struct Harness {
    seed: u64,
    shape: ClusterShape,
    limits: NodeLimits,
    options: ConnectOptions,
    /// Kills and pauses at simulated times.
    schedule: Schedule,
    /// Fault points armed from the start: the node is killed there.
    faults: Vec<(
        NodeId,
        kernel::faults::FaultPoint,
        kernel::faults::FaultAction,
    )>,
}

impl Harness {
    /// One data node, one replica, from `seed`.
    pub fn new(seed: u64) -> Harness {
        Harness {
            seed,
            shape: ClusterShape::default(),
            limits: NodeLimits::default(),
            options: ConnectOptions::default(),
            schedule: Schedule::default(),
            faults: Vec::new(),
        }
    }

    /// `data_nodes` data nodes with `replicas` replicas.
    pub fn nodes(mut self, data_nodes: u16, replicas: u16) -> Harness {
        self.shape = ClusterShape {
            data_nodes,
            replicas,
        };
        self
    }

    /// The nodes' record pools.
    pub fn limits(mut self, limits: NodeLimits) -> Harness {
        self.limits = limits;
        self
    }

    /// The client's connect options (timeouts count simulated time).
    pub fn connect_options(mut self, options: ConnectOptions) -> Harness {
        self.options = options;
        self
    }

    /// Kills data node `node` (as SIGKILL would: its links break, its
    /// unsynced writes are lost) once the simulated clock reaches `at_us`,
    /// whatever the client code is doing then.
    pub fn kill_at(mut self, node: NodeId, at_us: u64) -> Harness {
        self.schedule.add(at_us, Fault::Kill(node));
        self
    }

    /// Starts the stopped data node `node` again at `at_us` of simulated
    /// time: a node restart over its disk.
    pub fn restart_at(mut self, node: NodeId, at_us: u64) -> Harness {
        self.schedule.add(at_us, Fault::Restart(node));
        self
    }

    /// As [`Harness::restart_at`], with its files deleted first
    /// (`--initial`).
    pub fn restart_initial_at(mut self, node: NodeId, at_us: u64) -> Harness {
        self.schedule.add(at_us, Fault::RestartInitial(node));
        self
    }

    /// Injects `fault` once the simulated clock reaches `at_us`.
    pub fn fault_at(mut self, at_us: u64, fault: Fault) -> Harness {
        self.schedule.add(at_us, fault);
        self
    }

    /// Pauses data node `node` at `at_us` of simulated time for
    /// `duration_us` (as SIGSTOP and SIGCONT would).
    pub fn pause_at(mut self, node: NodeId, at_us: u64, duration_us: u64) -> Harness {
        self.schedule.add(at_us, Fault::Pause { node, duration_us });
        self
    }

    /// Arms fault point `point` on data node `node` once the cluster has
    /// started: the node is killed when it first reaches it.
    pub fn fault(self, node: NodeId, point: kernel::faults::FaultPoint) -> Harness {
        self.fault_with(node, point, kernel::faults::FaultAction::Crash)
    }

    /// As [`Harness::fault`], with `action` at the point (a crash, or a
    /// stall of the node's thread).
    pub fn fault_with(
        mut self,
        node: NodeId,
        point: kernel::faults::FaultPoint,
        action: kernel::faults::FaultAction,
    ) -> Harness {
        self.faults.push((node, point, action));
        self
    }

    /// Starts the cluster, connects a real client to every data node and
    /// runs `work` with it; returns what `work` returned. A panic in
    /// `work` fails the caller, naming the API node.
    pub fn run<R: Send + 'static>(
        self,
        work: impl FnOnce(&Cluster, &HostedContext) -> R + Send + 'static,
    ) -> R {
        self.run_and_report(work).0
    }

    /// As [`Harness::run`], returning also the fault points that fired,
    /// in order: (node, point).
    pub fn run_and_report<R: Send + 'static>(
        self,
        work: impl FnOnce(&Cluster, &HostedContext) -> R + Send + 'static,
    ) -> (R, Vec<(NodeId, kernel::faults::FaultPoint)>) {
        let work = std::sync::Mutex::new(Some(work));
        let (mut results, fired) = self.run_clients_and_report(1, move |_, cluster, context| {
            let work = work.lock().expect("one client").take().expect("one client");
            work(cluster, context)
        });
        (results.pop().expect("one API node, one result"), fired)
    }

    /// As [`Harness::run`], with `clients` API nodes (ids 200, 201, ...)
    /// running `work(index, ..)` side by side, each with its own client;
    /// returns their results in index order.
    pub fn run_clients<R: Send + 'static>(
        self,
        clients: u16,
        work: impl Fn(u16, &Cluster, &HostedContext) -> R + Send + Sync + 'static,
    ) -> Vec<R> {
        self.run_clients_and_report(clients, work).0
    }

    /// As [`Harness::run_clients`], returning also the fault points that
    /// fired, in order: (node, point).
    #[allow(clippy::type_complexity)]
    pub fn run_clients_and_report<R: Send + 'static>(
        self,
        clients: u16,
        work: impl Fn(u16, &Cluster, &HostedContext) -> R + Send + Sync + 'static,
    ) -> (Vec<R>, Vec<(NodeId, kernel::faults::FaultPoint)>) {
        let (results, fired, _) = self.run_clients_then(clients, work, |_| ());
        (results, fired)
    }

    /// As [`Harness::run_and_report`], then `inspect` looks at the
    /// simulated cluster as the client code left it (its blocks' state).
    #[allow(clippy::type_complexity)]
    pub fn run_then<R: Send + 'static, S>(
        self,
        work: impl FnOnce(&Cluster, &HostedContext) -> R + Send + 'static,
        inspect: impl FnOnce(&Simulation) -> S,
    ) -> (R, Vec<(NodeId, kernel::faults::FaultPoint)>, S) {
        let work = std::sync::Mutex::new(Some(work));
        let (mut results, fired, inspected) = self.run_clients_then(
            1,
            move |_, cluster, context| {
                let work = work.lock().expect("one client").take().expect("one client");
                work(cluster, context)
            },
            inspect,
        );
        let result = results.pop().expect("one API node, one result");
        (result, fired, inspected)
    }

    /// As [`Harness::run_clients_and_report`], then `inspect` looks at
    /// the simulated cluster as the clients left it.
    #[allow(clippy::type_complexity)]
    pub fn run_clients_then<R: Send + 'static, S>(
        self,
        clients: u16,
        work: impl Fn(u16, &Cluster, &HostedContext) -> R + Send + Sync + 'static,
        inspect: impl FnOnce(&Simulation) -> S,
    ) -> (Vec<R>, Vec<(NodeId, kernel::faults::FaultPoint)>, S) {
        let work = Arc::new(work);
        let mut simulation = Simulation::with_cluster(
            self.seed,
            self.shape,
            self.limits,
            std::env::var_os("TESSERA_HARNESS_TRACE").is_some(),
        );
        simulation.start_nodes();
        for &(node, point, action) in &self.faults {
            simulation.world_mut().arm_fault_with(node, point, action);
        }
        let mut api_nodes = HostedApiNodes::default();
        let options = self.options;
        let mut schedule = self.schedule;
        for index in 0..clients {
            let (options, work) = (options.clone(), work.clone());
            api_nodes.spawn(
                NodeId(HARNESS_API_NODE.0 + index),
                &mut simulation.client_io(),
                move |context| {
                    let cluster = context.connect(options).unwrap_or_else(|error| {
                        panic!("harness client {index} cannot connect: {error}")
                    });
                    work(index, &cluster, &context)
                },
            );
        }
        drive(
            &mut simulation,
            &mut api_nodes,
            &mut schedule,
            RUN_LIMIT_US,
            &mut |_| {},
        );
        let fired = simulation
            .world()
            .fired_faults()
            .iter()
            .map(|&(_, node, point, _)| (node, point))
            .collect();
        let inspected = inspect(&simulation);
        (api_nodes.take_results(), fired, inspected)
    }
}

/// Runs `simulation` until every API node of `api_nodes` has ended:
/// injects the faults of `schedule` as the clock reaches them, ends the
/// API nodes' connections to each data node that stops (killed, at a
/// fault point, shut down), and calls `after_step` after every event (to
/// check invariants). Panics, naming the seed, when the API nodes have
/// not ended by `limit_us` of simulated time.
pub(crate) fn drive<R: Send + 'static>(
    simulation: &mut Simulation,
    api_nodes: &mut HostedApiNodes<R>,
    schedule: &mut Schedule,
    limit_us: u64,
    after_step: &mut dyn FnMut(&Simulation),
) {
    let mut stopped = std::collections::BTreeSet::new();
    while !api_nodes.all_ended() {
        for (_, fault) in schedule.inject_due(simulation) {
            if let Fault::CutClients(data_node) = fault {
                for api in api_nodes.api_node_ids() {
                    simulation.world_mut().cut_api_link(api, data_node);
                }
                let io = &mut simulation.client_io();
                api_nodes.lose_connections_to(data_node, "connection reset", io);
            }
            if let Fault::Restart(data_node) | Fault::RestartInitial(data_node) = fault {
                // Runs again: its next stop is news, and clients may
                // connect to it.
                stopped.remove(&data_node);
                api_nodes.data_node_back(data_node);
            }
        }
        let newly: Vec<NodeId> = simulation
            .world()
            .stopped()
            .keys()
            .copied()
            .filter(|node| !stopped.contains(node))
            .collect();
        for node in newly {
            stopped.insert(node);
            api_nodes.lose_connections_to(node, "stopped", &mut simulation.client_io());
        }
        assert!(
            simulation.world().now_us() < limit_us,
            "seed {}: the client code did not end within {limit_us} us of simulated time",
            simulation.seed()
        );
        assert!(
            simulation.step(api_nodes),
            "seed {}: the simulation ran out of events while the client code waits",
            simulation.seed()
        );
        after_step(simulation);
    }
}

/// The definition of table `name` with `columns` (name, type,
/// NULL-able), keyed on the first, without indexes.
pub fn table_definition(name: &str, columns: &[(&str, ColumnType, bool)]) -> TableDef {
    TableDef {
        indexes: Vec::new(),
        revision: 0,
        id: 0,
        version: 0,
        name: name.into(),
        columns: columns
            .iter()
            .map(|&(name, column_type, nullable)| ColumnDef {
                name: name.into(),
                column_type,
                nullable,
            })
            .collect(),
        primary_key: vec![0],
        partitions: 0,
        partition_key: Vec::new(),
    }
}

/// The definition of table `name`: k BIGINT UNSIGNED primary key, v
/// VARCHAR(64) NULL.
pub fn kv_table_definition(name: &str) -> TableDef {
    table_definition(
        name,
        &[
            ("k", ColumnType::BigInt { unsigned: true }, false),
            ("v", ColumnType::VarChar(64), true),
        ],
    )
}

/// Inserts `k` -> "value k" into a [`kv_table_definition`] table in its
/// own transaction, retrying temporary errors; an unknown outcome is
/// settled by retrying too (a duplicate key then means the first attempt
/// committed). False if it never committed in 50 attempts; a permanent
/// error panics.
pub fn insert_settled(cluster: &Cluster, table: &Arc<Table>, k: u64) -> bool {
    let mut retried = false;
    for _ in 0..50 {
        let mut transaction = cluster.transaction();
        let v = client::Value::from(format!("value {k}").as_str());
        let result = transaction
            .insert(table, &[("k", client::Value::UInt(k)), ("v", v)])
            .and_then(|_| transaction.execute(client::Commit::Yes));
        match result {
            Ok(_) => return true,
            Err(error) if error.code() == Some(client::ErrorCode::DuplicateKey) && retried => {
                return true
            }
            Err(error)
                if error.is_temporary() || matches!(error, ClientError::OutcomeUnknown { .. }) =>
            {
                retried = true;
            }
            Err(error) => panic!("insert {k}: {error:?}"),
        }
    }
    false
}

/// Creates table `name` ([`kv_table_definition`]) and returns it with its
/// partition map.
pub fn create_kv_table(cluster: &Cluster, name: &str) -> Arc<Table> {
    let created: Result<Arc<Table>, ClientError> = cluster
        .create_table(&kv_table_definition(name))
        .and_then(|_| cluster.table(name));
    created.unwrap_or_else(|error| panic!("creating table {name:?}: {error}"))
}
