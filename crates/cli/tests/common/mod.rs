//! Harness for the cluster tests: a real `tessera mgmd` and `tessera node`
//! processes (one data node by default, or N data nodes with R replicas,
//! each with two ldm threads and one tc thread) as child processes on
//! loopback, in a fresh directory, stopped when the `TestCluster` drops.
//! Data nodes have ids 2, 3, ... in config order; node group = index / R.
//!
//! Every test starts its own cluster, so tests running in parallel threads
//! never share state. Ports come from the kernel (bind port 0, read it,
//! drop); another process may take one in between, so a start that fails
//! with "address already in use" is retried with new ports.
//!
//! Timeouts here are generous upper bounds for a shared 2-core machine,
//! never assertions about speed.

// Each test binary includes this module and uses a different part of it.
#![allow(dead_code)]

use client::{
    ClientError, Cluster, ColumnDef, ColumnType, Commit, ErrorCode, LockMode, Row, Table, TableDef,
    Transaction, Value as ClientValue,
};
use mgmd::client::MgmClient;
use serde_json::Value;
use std::collections::BTreeSet;
use std::fs;
use std::io::{BufRead, Read};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// The binary under test, built by cargo for integration tests.
pub const TESSERA: &str = env!("CARGO_BIN_EXE_tessera");

/// Longest wait for a cluster to come up (mgmd listening, node started).
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Longest wait for a process to exit after SIGTERM before SIGKILL.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// Attempts at starting a cluster when a port was taken meanwhile.
const START_ATTEMPTS: u32 = 5;

/// ldm threads per data node in the generated config.
pub const LDM_THREADS: u32 = 2;

/// The first data node's id; the others follow.
pub const FIRST_DATA_NODE: u16 = 2;

/// The cluster secret's file in the cluster's directory (the config names it).
pub const SECRET_FILE: &str = "cluster.secret";

/// What to put in the generated config.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// Names the directory, so the logs of a failed test are easy to find.
    pub name: &'static str,
    /// `cluster.data_memory` (split evenly over the two ldm threads).
    pub data_memory: &'static str,
    /// `cluster.lock_wait_timeout_ms`.
    pub lock_wait_timeout_ms: u64,
    /// Data nodes (ids 2, 3, ...); a multiple of `replicas`.
    pub data_nodes: u16,
    /// `cluster.replicas`.
    pub replicas: u8,
    /// More `[cluster]` lines, verbatim (e.g. `"local_checkpoints = false\n"`).
    pub extra_cluster_lines: &'static str,
    /// More `[threads]` lines, verbatim (e.g. `"tc_on_ldm = true\n"`).
    pub extra_thread_lines: &'static str,
    /// Data node N listens on 127.0.0.N (and its links to other data nodes
    /// leave from it), so firewall rules can tell the nodes apart; mgmd
    /// stays on 127.0.0.1.
    pub node_hosts: bool,
    /// Data nodes run under an angel (`tessera node` without
    /// `--no-angel`): the child process is the angel, and mgmd's `pid` the
    /// node's.
    pub angels: bool,
}

impl ClusterOptions {
    /// Two data nodes of one node group (replicas 2), named `name`: the
    /// smallest cluster that can lose a node.
    pub fn pair(name: &'static str) -> ClusterOptions {
        ClusterOptions {
            name,
            data_nodes: 2,
            replicas: 2,
            ..ClusterOptions::default()
        }
    }
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            name: "cluster",
            data_memory: "32M",
            lock_wait_timeout_ms: 1200,
            data_nodes: 1,
            replicas: 1,
            extra_cluster_lines: "",
            extra_thread_lines: "",
            node_hosts: false,
            angels: false,
        }
    }
}

/// One `tessera node` of the cluster.
struct NodeProcess {
    id: u16,
    port: u16,
    child: Option<Child>,
}

/// A running mgmd and data nodes 2, 3, .... Dropping it stops them all
/// (SIGTERM, then SIGKILL) and, when the thread is panicking, prints every
/// process's log.
pub struct TestCluster {
    dir: PathBuf,
    mgmd_port: u16,
    replicas: u8,
    nodes: Vec<NodeProcess>,
    mgmd: Option<Child>,
    /// Set once the logs were printed, so they are not printed twice.
    logs_printed: bool,
    /// Set once started: a passing test's directory is removed on drop
    /// (a failed start attempt's is reused by the next attempt).
    remove_dir_on_drop: bool,
    /// Data node N listens on 127.0.0.N (`ClusterOptions::node_hosts`).
    node_hosts: bool,
    /// Data nodes run under angels (`ClusterOptions::angels`).
    angels: bool,
}

enum StartError {
    /// A port was taken by someone else between picking and binding it.
    PortTaken(String),
    Failed(String),
}

impl TestCluster {
    /// Writes a config into a fresh directory, starts mgmd and every data
    /// node and waits until mgmd reports each of them started.
    pub fn start(options: ClusterOptions) -> TestCluster {
        assert!(
            options.data_nodes >= 1
                && options.replicas >= 1
                && options
                    .data_nodes
                    .is_multiple_of(u16::from(options.replicas)),
            "{} data nodes cannot hold {} replicas",
            options.data_nodes,
            options.replicas
        );
        let dir = fresh_dir(options.name);
        let mut reasons = Vec::new();
        for _ in 0..START_ATTEMPTS {
            let ports = free_ports(1 + usize::from(options.data_nodes));
            let mut cluster = TestCluster {
                dir: dir.clone(),
                mgmd_port: ports[0],
                replicas: options.replicas,
                nodes: ports[1..]
                    .iter()
                    .zip(FIRST_DATA_NODE..)
                    .map(|(&port, id)| NodeProcess {
                        id,
                        port,
                        child: None,
                    })
                    .collect(),
                mgmd: None,
                logs_printed: false,
                remove_dir_on_drop: false,
                node_hosts: options.node_hosts,
                angels: options.angels,
            };
            match cluster.try_start(&options) {
                Ok(()) => {
                    cluster.remove_dir_on_drop = true;
                    return cluster;
                }
                Err(StartError::PortTaken(reason)) => {
                    cluster.stop_processes();
                    reasons.push(reason);
                }
                Err(StartError::Failed(reason)) => {
                    cluster.stop_processes();
                    cluster.print_logs();
                    panic!("cluster {:?} did not start: {reason}", options.name);
                }
            }
        }
        panic!(
            "cluster {:?} did not start in {START_ATTEMPTS} attempts, ports always taken: {reasons:?}",
            options.name
        );
    }

    fn try_start(&mut self, options: &ClusterOptions) -> Result<(), StartError> {
        let secret = self.dir.join(SECRET_FILE);
        if !secret.exists() {
            admission::ClusterSecret::create_file(&secret)
                .map_err(|error| StartError::Failed(format!("cannot write the secret: {error}")))?;
        }
        let config = self.dir.join("config.toml");
        fs::write(&config, self.config_text(options))
            .map_err(|error| StartError::Failed(format!("cannot write the config: {error}")))?;
        let config_arg = config.to_string_lossy().into_owned();
        self.mgmd = Some(spawn_logged(
            &["mgmd", "--config", &config_arg],
            &self.dir.join("mgmd.log"),
        ));
        let deadline = Instant::now() + START_TIMEOUT;
        let mgmd_addr = self.mgmd_addr();
        loop {
            if let Some(status) = try_wait(self.mgmd.as_mut()) {
                return Err(self.start_failure("mgmd", status, "mgmd.log"));
            }
            // The log line proves that this mgmd, not some other process
            // that took the port, is the one listening.
            if read_log(&self.dir.join("mgmd.log")).contains("listening on")
                && MgmClient::connect(&mgmd_addr).is_ok()
            {
                break;
            }
            if Instant::now() > deadline {
                return Err(StartError::Failed(format!(
                    "mgmd did not listen on {mgmd_addr} within {START_TIMEOUT:?}"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.spawn_data_nodes();
        self.wait_data_nodes_started(deadline)
    }

    /// Starts every data node process not running (a node restarts from
    /// its data directory if it holds anything).
    fn spawn_data_nodes(&mut self) {
        let mgmd_addr = self.mgmd_addr();
        for index in 0..self.nodes.len() {
            if self.nodes[index].child.is_some() {
                continue;
            }
            let id = self.nodes[index].id.to_string();
            let log = self.dir.join(format!("node{id}.log"));
            // No angel unless asked for: a test that kills a node means it
            // to stay down.
            let mut args = vec!["node", "--mgmd", &mgmd_addr, "--node-id", &id];
            if !self.angels {
                args.push("--no-angel");
            }
            self.nodes[index].child = Some(spawn_logged(&args, &log));
        }
    }

    /// Waits until mgmd reports every data node process started.
    fn wait_data_nodes_started(&mut self, deadline: Instant) -> Result<(), StartError> {
        let mgmd_addr = self.mgmd_addr();
        loop {
            for index in 0..self.nodes.len() {
                let id = self.nodes[index].id;
                if let Some(status) = try_wait(self.nodes[index].child.as_mut()) {
                    return Err(self.start_failure(
                        &format!("node {id}"),
                        status,
                        &format!("node{id}.log"),
                    ));
                }
            }
            if let Some(status) = try_wait(self.mgmd.as_mut()) {
                return Err(StartError::Failed(format!(
                    "mgmd exited with {status} while the data nodes were starting"
                )));
            }
            let mut waiting_for = Vec::new();
            match MgmClient::connect(&mgmd_addr).and_then(|mut mgm| mgm.show()) {
                Ok(show) => {
                    for node in &self.nodes {
                        // Under an angel, the node's pid is the angel's child's.
                        let started = data_node(&show, node.id.into()).is_some_and(|shown| {
                            shown["state"] == "started"
                                && (self.angels
                                    || shown["pid"].as_u64() == node_pid_of(node).map(u64::from))
                        });
                        if !started {
                            waiting_for.push(node.id);
                        }
                    }
                    if waiting_for.is_empty() {
                        return Ok(());
                    }
                }
                Err(_) => waiting_for.extend(self.nodes.iter().map(|node| node.id)),
            }
            if Instant::now() > deadline {
                return Err(StartError::Failed(format!(
                    "data nodes {waiting_for:?} were not started within {START_TIMEOUT:?}"
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGKILLs every data node at once (a whole-cluster crash) and waits
    /// until each is gone. mgmd keeps running.
    pub fn kill_data_nodes(&mut self) {
        for node in &self.nodes {
            if let Some(pid) = node_pid_of(node) {
                send_signal(pid, libc::SIGKILL);
            }
        }
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let _ = child.wait();
            }
        }
    }

    /// Starts every data node again from its data directory (a system
    /// restart) and waits until each is started.
    pub fn restart_data_nodes(&mut self) {
        self.spawn_data_nodes();
        if let Err(StartError::Failed(reason) | StartError::PortTaken(reason)) =
            self.wait_data_nodes_started(Instant::now() + START_TIMEOUT)
        {
            self.print_logs();
            panic!("the cluster did not restart from disk: {reason}");
        }
    }

    /// Starts every data node again from its data directory and waits
    /// until data node `id` exits (within `START_TIMEOUT`): for restarts
    /// that must fail. Returns its exit status and its log.
    pub fn restart_expecting_exit(&mut self, id: u16) -> (Option<ExitStatus>, String) {
        self.spawn_data_nodes();
        self.wait_for_exit(id)
    }

    /// Waits until data node `id` exits (within `START_TIMEOUT`); returns
    /// its exit status (`None` if it still runs) and its log.
    pub fn wait_for_exit(&mut self, id: u16) -> (Option<ExitStatus>, String) {
        let node = self
            .nodes
            .iter_mut()
            .find(|node| node.id == id)
            .unwrap_or_else(|| panic!("no data node {id}"));
        let status = node
            .child
            .as_mut()
            .and_then(|child| wait_timeout(child, START_TIMEOUT));
        if status.is_some() {
            node.child = None;
        }
        (status, read_log(&self.dir.join(format!("node{id}.log"))))
    }

    /// Waits until data node `id`'s log holds `text` (within
    /// `START_TIMEOUT`): a membership it agreed, a phase it reached.
    pub fn wait_for_log(&self, id: u16, text: &str) {
        let deadline = Instant::now() + START_TIMEOUT;
        while !self.node_log_of(id).contains(text) {
            assert!(
                Instant::now() < deadline,
                "data node {id} never logged {text:?}:\n{}",
                self.node_log_of(id)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until mgmd shows data node `id` started (within
    /// `START_TIMEOUT`), whatever the other nodes do.
    pub fn wait_until_started(&self, id: u16) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let show = self.show();
            if data_node(&show, id.into()).is_some_and(|node| node["state"] == "started") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "data node {id} never started: {show}\n{}",
                self.node_log_of(id)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Starts data node `id` alone again (the others stay down), without
    /// waiting for anything.
    pub fn spawn_data_node(&mut self, id: u16) {
        self.spawn_data_node_with_env(id, &[]);
    }

    /// Starts data node `id` alone again with `--initial` (its files
    /// deleted first), without waiting for anything.
    pub fn spawn_data_node_initial(&mut self, id: u16) {
        self.spawn_node_process(id, &["--no-angel", "--initial"], &[]);
    }

    /// Kills mgmd (SIGKILL) and waits until it is gone; the data nodes
    /// go on without it.
    pub fn kill_mgmd(&mut self) {
        if let Some(mut mgmd) = self.mgmd.take() {
            let _ = mgmd.kill();
            let _ = mgmd.wait();
        }
    }

    /// Starts mgmd again on its config and port (after `kill_mgmd`), its
    /// log in `mgmd-again.log`, and waits until it listens.
    pub fn start_mgmd_again(&mut self) {
        assert!(self.mgmd.is_none(), "mgmd still runs");
        let config = self.dir.join("config.toml").to_string_lossy().into_owned();
        let log = self.dir.join("mgmd-again.log");
        self.mgmd = Some(spawn_logged(&["mgmd", "--config", &config], &log));
        let deadline = Instant::now() + START_TIMEOUT;
        while !(read_log(&log).contains("listening on")
            && MgmClient::connect(&self.mgmd_addr()).is_ok())
        {
            assert!(
                try_wait(self.mgmd.as_mut()).is_none(),
                "mgmd exited at its new start:\n{}",
                read_log(&log)
            );
            assert!(
                Instant::now() < deadline,
                "mgmd did not listen again within {START_TIMEOUT:?}:\n{}",
                read_log(&log)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts data node `id` under an angel (`tessera node` without
    /// `--no-angel`), with `extra` arguments, without waiting for
    /// anything: the child is the angel.
    pub fn spawn_data_node_with_angel(&mut self, id: u16, extra: &[&str]) {
        self.spawn_node_process(id, extra, &[]);
    }

    /// As [`TestCluster::spawn_data_node`], with more environment variables
    /// for the process (fault points).
    pub fn spawn_data_node_with_env(&mut self, id: u16, env: &[(&str, &str)]) {
        self.spawn_node_process(id, &["--no-angel"], env);
    }

    /// Starts `tessera node --mgmd .. --node-id ID` with `extra` arguments
    /// and `env`, logging to the node's log, without waiting.
    fn spawn_node_process(&mut self, id: u16, extra: &[&str], env: &[(&str, &str)]) {
        let mgmd_addr = self.mgmd_addr();
        let log = self.dir.join(format!("node{id}.log"));
        let node = self
            .nodes
            .iter_mut()
            .find(|node| node.id == id)
            .unwrap_or_else(|| panic!("no data node {id}"));
        assert!(node.child.is_none(), "data node {id} runs already");
        let id = id.to_string();
        let mut args = vec!["node", "--mgmd", &mgmd_addr, "--node-id", &id];
        args.extend_from_slice(extra);
        node.child = Some(spawn_logged_with_env(&args, &log, env));
    }

    /// The cluster secret the processes were started with: a test that
    /// holds it can admit itself as mgmd would (tokens, link proofs).
    pub fn secret(&self) -> admission::ClusterSecret {
        admission::ClusterSecret::load(&self.dir.join(SECRET_FILE)).expect("the cluster's secret")
    }

    /// The data directory of data node `id` (the config names it
    /// `node<id>` under the cluster's directory).
    pub fn data_dir_of(&self, id: u16) -> PathBuf {
        self.dir.join(format!("node{id}"))
    }

    fn start_failure(&self, who: &str, status: ExitStatus, log: &str) -> StartError {
        let text = read_log(&self.dir.join(log));
        if text.to_lowercase().contains("address already in use") {
            StartError::PortTaken(format!("{who}: {}", text.trim()))
        } else {
            StartError::Failed(format!("{who} exited with {status} during start"))
        }
    }

    fn config_text(&self, options: &ClusterOptions) -> String {
        let mut text = format!(
            "# Generated by the cli cluster tests.\n\
             [mgmd]\nnode_id = 1\nhost = \"127.0.0.1\"\nport = {mgmd_port}\n\n\
             [cluster]\nreplicas = {replicas}\ndata_memory = \"{data_memory}\"\n\
             lock_wait_timeout_ms = {lock_wait}\nsecret_file = \"{SECRET_FILE}\"\n{extra}\n\
             [threads]\nldm = {LDM_THREADS}\ntc = 1\nrecv = 1\nsend = 1\nmain = 1\nspin_us = 0\n\
             {thread_lines}",
            mgmd_port = self.mgmd_port,
            replicas = options.replicas,
            data_memory = options.data_memory,
            lock_wait = options.lock_wait_timeout_ms,
            extra = options.extra_cluster_lines,
            thread_lines = options.extra_thread_lines,
        );
        for node in &self.nodes {
            text.push_str(&format!(
                "\n[[data_node]]\nid = {id}\nhost = \"{host}\"\nport = {port}\ndata_dir = \"node{id}\"\n",
                id = node.id,
                host = self.host_of(node.id),
                port = node.port,
            ));
        }
        text
    }

    /// mgmd's address, `127.0.0.1:PORT`.
    pub fn mgmd_addr(&self) -> String {
        format!("127.0.0.1:{}", self.mgmd_port)
    }

    /// Data node 2's address, `127.0.0.1:PORT`.
    pub fn node_addr(&self) -> String {
        self.node_addr_of(FIRST_DATA_NODE)
    }

    /// Data node `id`'s address, `HOST:PORT`.
    pub fn node_addr_of(&self, id: u16) -> String {
        format!("{}:{}", self.host_of(id), self.node(id).port)
    }

    /// The address data node `id` listens on.
    pub fn host_of(&self, id: u16) -> String {
        if self.node_hosts {
            format!("127.0.0.{id}")
        } else {
            "127.0.0.1".into()
        }
    }

    /// The pid of the `tessera node` process with id 2.
    pub fn node_pid(&self) -> u32 {
        self.node_pid_of(FIRST_DATA_NODE)
    }

    /// The pid of the `tessera node` process with id `id`.
    pub fn node_pid_of(&self, id: u16) -> u32 {
        node_pid_of(self.node(id)).expect("node started")
    }

    /// The data node ids, in config order.
    pub fn node_ids(&self) -> Vec<u16> {
        self.nodes.iter().map(|node| node.id).collect()
    }

    /// `cluster.replicas`.
    pub fn replicas(&self) -> u8 {
        self.replicas
    }

    /// Node group of data node `id` (config index / replicas).
    pub fn group_of(&self, id: u16) -> u32 {
        let index = self
            .nodes
            .iter()
            .position(|node| node.id == id)
            .unwrap_or_else(|| panic!("no data node {id}"));
        (index / usize::from(self.replicas)) as u32
    }

    /// The data nodes of each node group, in config order.
    pub fn groups(&self) -> Vec<Vec<u16>> {
        self.node_ids()
            .chunks(usize::from(self.replicas))
            .map(<[u16]>::to_vec)
            .collect()
    }

    fn node(&self, id: u16) -> &NodeProcess {
        self.nodes
            .iter()
            .find(|node| node.id == id)
            .unwrap_or_else(|| panic!("no data node {id}"))
    }

    /// The cluster's directory (config and logs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every log (mgmd's, then each data node's), with headers.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        let names = std::iter::once("mgmd.log".to_string())
            .chain(self.nodes.iter().map(|node| format!("node{}.log", node.id)));
        for name in names {
            out.push_str(&format!("----- {} -----\n", self.dir.join(&name).display()));
            out.push_str(&read_log(&self.dir.join(&name)));
            out.push('\n');
        }
        out
    }

    /// Data node 2's log so far.
    pub fn node_log(&self) -> String {
        self.node_log_of(FIRST_DATA_NODE)
    }

    /// Data node `id`'s log so far.
    pub fn node_log_of(&self, id: u16) -> String {
        read_log(&self.dir.join(format!("node{id}.log")))
    }

    fn print_logs(&mut self) {
        if !self.logs_printed {
            self.logs_printed = true;
            eprintln!("{}", self.logs());
        }
    }

    /// Whether data node 2's process is still running.
    pub fn node_is_running(&mut self) -> bool {
        self.node_is_running_of(FIRST_DATA_NODE)
    }

    /// Whether data node `id`'s process is still running.
    pub fn node_is_running_of(&mut self, id: u16) -> bool {
        let node = self
            .nodes
            .iter_mut()
            .find(|node| node.id == id)
            .unwrap_or_else(|| panic!("no data node {id}"));
        try_wait(node.child.as_mut()).is_none()
    }

    /// The data nodes holding `partition` of a table, primary first, as
    /// dih's default map places it (mirrors `blocks/dih/src/distribution.rs`:
    /// group = p % groups, round = p / groups, ldm = round % ldm threads,
    /// the group's nodes rotated by (ldm + round / ldm threads) % replicas).
    /// Tests use it to pick keys on every node and group; the data nodes
    /// route by their own map, so a drift here only costs coverage.
    pub fn replicas_of_partition(&self, partition: u32) -> Vec<u16> {
        let groups = self.groups();
        let group = &groups[(partition % groups.len() as u32) as usize];
        let round = partition / groups.len() as u32;
        let ldm = round % LDM_THREADS;
        let rotation = ((ldm + round / LDM_THREADS) % u32::from(self.replicas)) as usize;
        (0..group.len())
            .map(|position| group[(position + rotation) % group.len()])
            .collect()
    }

    /// `tessera mgm --mgmd ADDR -e COMMAND --json`, run to completion.
    pub fn mgm_json(&self, command: &str) -> Finished {
        run_tessera(
            &["mgm", "--mgmd", &self.mgmd_addr(), "-e", command, "--json"],
            Duration::from_secs(300),
        )
    }

    /// `tessera mgm --mgmd ADDR -e COMMAND`, run to completion: the text
    /// an operator reads.
    pub fn mgm_text(&self, command: &str) -> Finished {
        run_tessera(
            &["mgm", "--mgmd", &self.mgmd_addr(), "-e", command],
            Duration::from_secs(300),
        )
    }

    /// A client (API node) connected through mgmd.
    pub fn connect(&self) -> Cluster {
        Cluster::connect(&self.mgmd_addr())
            .unwrap_or_else(|error| panic!("client cannot connect: {error}"))
    }

    /// `show`, as mgmd answers it.
    pub fn show(&self) -> Value {
        MgmClient::connect(&self.mgmd_addr())
            .and_then(|mut mgm| mgm.show())
            .unwrap_or_else(|error| panic!("mgm show: {error}"))
    }

    /// `all report threads`, as mgmd answers it.
    pub fn report_threads(&self) -> Value {
        MgmClient::connect(&self.mgmd_addr())
            .and_then(|mut mgm| mgm.report_threads())
            .unwrap_or_else(|error| panic!("mgm all report threads: {error}"))
    }

    /// Asserts that every data node process runs and mgmd still shows each
    /// started with the same pid and start count 1 (none restarted).
    pub fn assert_node_serving(&mut self) {
        for id in self.node_ids() {
            assert!(
                self.node_is_running_of(id),
                "the process of data node {id} exited"
            );
        }
        let show = self.show();
        for id in self.node_ids() {
            let node =
                data_node(&show, id.into()).unwrap_or_else(|| panic!("no node {id} in {show}"));
            assert_eq!(node["state"], "started", "node {id}: {show}");
            assert_eq!(node["pid"], self.node_pid_of(id), "node {id}: {show}");
            assert_eq!(node["start_count"], 1, "node {id}: {show}");
        }
    }

    /// Stops every data node, then mgmd, with SIGTERM; returns data node
    /// 2's exit status (or `None` if it needed SIGKILL).
    pub fn shutdown(self) -> Option<ExitStatus> {
        self.shutdown_all()
            .into_iter()
            .find(|(id, _)| *id == FIRST_DATA_NODE)
            .and_then(|(_, status)| status)
    }

    /// Stops every data node (SIGTERM to all, then waiting for each), then
    /// mgmd; returns each data node's exit status (`None`: needed SIGKILL).
    pub fn shutdown_all(mut self) -> Vec<(u16, Option<ExitStatus>)> {
        let statuses = self.stop_nodes();
        terminate(self.mgmd.take());
        statuses
    }

    fn stop_nodes(&mut self) -> Vec<(u16, Option<ExitStatus>)> {
        // Signal all first, so that no node waits out its peers' stops.
        for node in &mut self.nodes {
            if let Some(child) = node.child.as_mut() {
                if let Ok(None) = child.try_wait() {
                    send_signal(child.id(), libc::SIGTERM);
                }
            }
        }
        self.nodes
            .iter_mut()
            .filter_map(|node| Some((node.id, node.child.take()?)))
            .map(|(id, child)| (id, terminate(Some(child))))
            .collect()
    }

    fn stop_processes(&mut self) {
        for (id, status) in self.stop_nodes() {
            if status.is_none() {
                // Only reported: the test's own assertions decide its outcome.
                eprintln!(
                    "note: data node {id} in {} needed SIGKILL",
                    self.dir.display()
                );
            }
        }
        terminate(self.mgmd.take());
    }
}

fn node_pid_of(node: &NodeProcess) -> Option<u32> {
    node.child.as_ref().map(Child::id)
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        self.stop_processes();
        if std::thread::panicking() {
            self.print_logs();
        } else if self.remove_dir_on_drop {
            // Keep nothing of a passing test; a failing one keeps its logs.
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// Node `id` of type data in a `show` answer.
pub fn data_node(show: &Value, id: u64) -> Option<&Value> {
    show["nodes"]
        .as_array()?
        .iter()
        .find(|node| node["type"] == "data" && node["id"] == id)
}

/// The pid and start count mgmd shows for data node `id`, once started.
pub fn started_pid(cluster: &TestCluster, id: u16) -> Option<(u64, u64)> {
    let show = cluster.show();
    let node = data_node(&show, id.into())?;
    if node["state"] != "started" {
        return None;
    }
    Some((node["pid"].as_u64()?, node["start_count"].as_u64()?))
}

/// Waits (within twice `START_TIMEOUT`: a node restart copies under
/// load) until data node `id` is started with a pid other than `old`
/// (its angel, or a test, started it again); its pid and start count.
pub fn wait_started_again(cluster: &TestCluster, id: u16, old: u64) -> (u64, u64) {
    let deadline = Instant::now() + 2 * START_TIMEOUT;
    loop {
        if let Some((pid, count)) = started_pid(cluster, id) {
            if pid != old {
                return (pid, count);
            }
        }
        assert!(
            Instant::now() < deadline,
            "node {id} was not started again:\n{}",
            cluster.node_log_of(id)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A new empty directory under cargo's temporary directory for tests.
pub fn fresh_dir(name: &str) -> PathBuf {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cli-cluster-tests")
        .join(format!(
            "{name}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)
        .unwrap_or_else(|error| panic!("cannot create {}: {error}", dir.display()));
    dir
}

/// Where test clusters' ports come from: below the kernel's ephemeral
/// range (32768 and up on Linux), from which a port given by `bind(0)`
/// would come. While a node of a test restarts, its port is free, and an
/// outgoing connection anywhere on the machine could take it as its local
/// end: the node could not listen on it again ("address already in use").
const TEST_PORTS: std::ops::Range<u32> = 20_000..32_000;

/// The next candidate port of this process (test binaries running side
/// by side start at different places, by pid).
static NEXT_PORT: AtomicU32 = AtomicU32::new(0);

/// A listener on a port of [`TEST_PORTS`] nobody listens on right now.
fn bind_test_port() -> TcpListener {
    let span = TEST_PORTS.end - TEST_PORTS.start;
    let start = std::process::id().wrapping_mul(7_919) % span;
    for _ in 0..span {
        let next = NEXT_PORT.fetch_add(1, Ordering::Relaxed);
        let port = TEST_PORTS.start + (start + next) % span;
        if let Ok(listener) = TcpListener::bind(("127.0.0.1", port as u16)) {
            return listener;
        }
    }
    panic!("no free loopback port in {TEST_PORTS:?}")
}

/// The first of `count` consecutive ports nobody listens on right now,
/// taken from this process's counter as a whole, so no other test of the
/// process is handed one of them (a demo uses the twenty ports from its
/// base port, and names only the first).
pub fn free_port_block(count: u32) -> u16 {
    assert!(count > 0, "a block holds at least one port");
    let span = TEST_PORTS.end - TEST_PORTS.start;
    let start = std::process::id().wrapping_mul(7_919) % span;
    for _ in 0..span / count {
        let first = (start + NEXT_PORT.fetch_add(count, Ordering::Relaxed)) % span;
        if first + count > span {
            continue; // would wrap past the range's end
        }
        let first = TEST_PORTS.start + first;
        let all_free = (first..first + count)
            .map(|port| TcpListener::bind(("127.0.0.1", port as u16)))
            .collect::<Result<Vec<_>, _>>()
            .is_ok();
        if all_free {
            return first as u16;
        }
    }
    panic!("no {count} consecutive free loopback ports in {TEST_PORTS:?}")
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    bind_test_port().local_addr().expect("bound").port()
}

/// `count` different free ports (all held while the next is picked).
fn free_ports(count: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..count).map(|_| bind_test_port()).collect();
    listeners
        .iter()
        .map(|listener| listener.local_addr().expect("bound").port())
        .collect()
}

fn spawn_logged(args: &[&str], log: &Path) -> Child {
    spawn_logged_with_env(args, log, &[])
}

fn spawn_logged_with_env(args: &[&str], log: &Path, env: &[(&str, &str)]) -> Child {
    // Appended: a restarted node's log keeps its earlier runs.
    let file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap_or_else(|error| panic!("cannot open {}: {error}", log.display()));
    let file_for_stderr = file.try_clone().expect("log file handle");
    Command::new(TESSERA)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(file_for_stderr)
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start tessera {args:?}: {error}"))
}

fn read_log(path: &Path) -> String {
    fs::read(path)
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default()
}

fn try_wait(child: Option<&mut Child>) -> Option<ExitStatus> {
    child.and_then(|child| child.try_wait().ok().flatten())
}

/// SIGTERM, wait up to `STOP_TIMEOUT`, then SIGKILL. Returns the exit
/// status when the process exited on its own (or had already exited).
pub fn terminate(child: Option<Child>) -> Option<ExitStatus> {
    let mut child = child?;
    if let Ok(Some(status)) = child.try_wait() {
        return Some(status);
    }
    send_signal(child.id(), libc::SIGTERM);
    if let Some(status) = wait_timeout(&mut child, STOP_TIMEOUT) {
        return Some(status);
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Sends `signal` to process `pid` (one this test started).
pub fn send_signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) touches no memory of ours.
    unsafe {
        libc::kill(pid as libc::pid_t, signal);
    }
}

/// Stops process `pid` (SIGSTOP) and waits until every one of its
/// threads is stopped: kill(2) only queues the signal, and a thread on a
/// CPU may go on for a moment (long enough to answer a request).
pub fn stop_process(pid: u32) {
    send_signal(pid, libc::SIGSTOP);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap_or_else(|error| panic!("the threads of process {pid}: {error}"));
        let all_stopped = tasks.flatten().all(|task| {
            let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
            // The state follows the command name's closing parenthesis.
            let state = stat.rsplit_once(") ").map(|(_, rest)| rest.chars().next());
            matches!(state, Some(Some('T' | 't')) | None)
        });
        if all_stopped {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "process {pid} did not stop within 30 s of SIGSTOP"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Waits for `child` to exit, at most `timeout`.
pub fn wait_timeout(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether process `pid` exists and is not a zombie.
pub fn process_alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the first field after the parenthesised name.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// What a finished `tessera` command printed.
#[derive(Debug)]
pub struct Finished {
    /// Exit status.
    pub status: ExitStatus,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Runs `tessera args` to completion (killed and failed after `timeout`).
pub fn run_tessera(args: &[&str], timeout: Duration) -> Finished {
    let mut child = Command::new(TESSERA)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start tessera {args:?}: {error}"));
    let stdout = read_in_background(child.stdout.take().expect("piped"));
    let stderr = read_in_background(child.stderr.take().expect("piped"));
    let status = match wait_timeout(&mut child, timeout) {
        Some(status) => status,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "tessera {args:?} did not finish within {timeout:?}; stderr: {}",
                stderr.join().unwrap_or_default()
            );
        }
    };
    Finished {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

fn read_in_background(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// The error code of a failed client call, failing the test on success.
pub fn code_of<T: std::fmt::Debug>(result: Result<T, ClientError>) -> ErrorCode {
    match result {
        Ok(value) => panic!("expected an error, got {value:?}"),
        Err(error) => error
            .code()
            .unwrap_or_else(|| panic!("error without a code: {error}")),
    }
}

/// The threads of node 2 in an `all report threads` answer.
pub fn threads_of_node2(report: &Value) -> Vec<Value> {
    threads_of_node(report, FIRST_DATA_NODE)
}

/// The threads of data node `id` in an `all report threads` answer.
pub fn threads_of_node(report: &Value, id: u16) -> Vec<Value> {
    report["nodes"]
        .as_array()
        .and_then(|nodes| nodes.iter().find(|node| node["id"] == id))
        .and_then(|node| node["threads"].as_array())
        .cloned()
        .unwrap_or_else(|| panic!("no threads of node {id} in {report}"))
}

/// The partition of `key` in `table`: its distribution hash's bucket,
/// through the default (round-robin) bucket map.
pub fn partition_of(table: &Table, key: &[ClientValue]) -> u32 {
    let mut bytes = Vec::new();
    table
        .encode_key(key, &mut bytes)
        .unwrap_or_else(|error| panic!("key {key:?} of {}: {error}", table.name()));
    let hash = signal::attr::key_hash(table.def(), &bytes)
        .unwrap_or_else(|code| panic!("hash of key {key:?} of {}: {code}", table.name()));
    signal::partition::default_partition_of_bucket(
        signal::partition::bucket(hash),
        table.def().partitions,
    )
}

/// A column of a table definition.
pub fn column(name: &str, column_type: ColumnType, nullable: bool) -> ColumnDef {
    ColumnDef {
        name: name.into(),
        column_type,
        nullable,
    }
}

/// A definition for `create_table`: id, version and partitions are left
/// for the data node to choose.
pub fn definition(name: &str, columns: Vec<ColumnDef>, primary_key: Vec<u16>) -> TableDef {
    TableDef {
        indexes: Vec::new(),
        revision: 0,
        id: 0,
        version: 0,
        name: name.into(),
        columns,
        primary_key,
        partitions: 0,
        partition_key: Vec::new(),
    }
}

/// Table `name` keyed by `k INT UNSIGNED NOT NULL`, followed by `columns`.
pub fn keyed_definition(name: &str, columns: Vec<ColumnDef>) -> TableDef {
    let mut all = vec![column("k", ColumnType::Int { unsigned: true }, false)];
    all.extend(columns);
    definition(name, all, vec![0])
}

/// The primary key `k` of a table made by `keyed_definition`.
pub fn key(k: u32) -> [ClientValue; 1] {
    [ClientValue::UInt(k.into())]
}

/// `kv`: k INT UNSIGNED key, v VARCHAR(32) NOT NULL, n BIGINT NULL.
pub fn kv_definition() -> TableDef {
    keyed_definition(
        "kv",
        vec![
            column("v", ColumnType::VarChar(32), false),
            column("n", ColumnType::BigInt { unsigned: false }, true),
        ],
    )
}

/// Creates the table through `cluster` and returns it as `cluster` sees it.
pub fn create_table(cluster: &Cluster, definition: &TableDef) -> Arc<Table> {
    let name = &definition.name;
    cluster
        .create_table(definition)
        .unwrap_or_else(|error| panic!("create {name}: {error}"));
    cluster
        .table(name)
        .unwrap_or_else(|error| panic!("table {name} after creating it: {error}"))
}

/// Writes `k` -> "value k" in `kv_definition`'s table through any data
/// node, retrying errors (a failure being handled) until `deadline`.
pub fn write_settled(cluster: &Cluster, table: &Arc<Table>, k: u32, deadline: Instant) {
    loop {
        let mut transaction = cluster.transaction();
        let text = format!("value {k}");
        transaction
            .write(
                table,
                &[
                    ("k", ClientValue::UInt(k.into())),
                    ("v", ClientValue::from(text.as_str())),
                ],
            )
            .expect("a valid write");
        match transaction.execute(Commit::Yes) {
            Ok(_) => return,
            Err(error) if Instant::now() < deadline => {
                eprintln!("write {k}: {error}; retrying");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(error) => panic!("write {k} never succeeded: {error}"),
        }
    }
}

/// A committed read of `key`, in a transaction of its own.
pub fn read_row(
    cluster: &Cluster,
    table: &Arc<Table>,
    key: &[ClientValue],
) -> Result<Row, ClientError> {
    let mut transaction = cluster.transaction();
    let op = transaction.read(table, key, LockMode::CommittedRead)?;
    transaction.execute(Commit::Yes)?;
    Ok(transaction
        .get(op)
        .cloned()
        .expect("a read that succeeded has a row"))
}

/// How many data nodes an `mgm -e show --json` answer lists.
pub fn data_nodes_in(show: &Value) -> usize {
    show["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter(|node| node["type"] == "data")
        .count()
}

/// JSON printed by a command (`--json`); `what` names it in a failure.
pub fn parse_json(text: &str, what: &str) -> Value {
    serde_json::from_str(text.trim()).unwrap_or_else(|error| panic!("{what}: {error}: {text:?}"))
}

/// The roles of a data node's threads in an `all report threads` answer.
pub fn assert_thread_roles(threads: &[Value], what: impl std::fmt::Display) {
    let roles: BTreeSet<&str> = threads
        .iter()
        .map(|thread| thread["role"].as_str().expect("role"))
        .collect();
    assert_eq!(
        roles,
        BTreeSet::from(["ldm", "tc", "main", "recv", "send", "io"]),
        "{what}"
    );
}

/// Every lock mode a read can take.
pub const LOCK_MODES: [LockMode; 3] = [
    LockMode::CommittedRead,
    LockMode::Shared,
    LockMode::Exclusive,
];

/// A read of `key` fails with NoSuchRow in every lock mode.
pub fn assert_no_row_in_any_lock_mode(
    cluster: &Cluster,
    table: &Arc<Table>,
    key: &[ClientValue],
    what: &str,
) {
    for lock in LOCK_MODES {
        let mut transaction = cluster.transaction();
        transaction.read(table, key, lock).expect("valid read");
        assert_eq!(
            code_of(transaction.execute(Commit::Yes)),
            ErrorCode::NoSuchRow,
            "{what}: {lock:?} read of a missing row"
        );
    }
}

// ---------------------------------------------------------------------
// Lock conflicts on `acct` rows (conflicts.rs, replication.rs)

/// How long to give a blocked request to (wrongly) come back before the
/// blocker commits. Not an assertion about speed: B may only answer after
/// A commits, so waiting longer can only catch more bugs.
pub const OBSERVE: Duration = Duration::from_millis(500);

/// Upper bound for any answer.
pub const ANSWER: Duration = Duration::from_secs(60);

/// Every balance of `acct` rows 0..`count`, read under shared locks in
/// one transaction.
pub fn read_balances(
    cluster: &Cluster,
    accounts: &Arc<Table>,
    count: u32,
) -> Result<Vec<i64>, ClientError> {
    let mut transaction = cluster.transaction();
    let ops = (0..count)
        .map(|k| transaction.read(accounts, &key(k), LockMode::Shared))
        .collect::<Result<Vec<_>, _>>()?;
    transaction.execute(Commit::Yes)?;
    Ok(ops
        .into_iter()
        .map(|op| {
            transaction
                .get(op)
                .and_then(|row| row.get("v")?.as_i64())
                .expect("an account row has v")
        })
        .collect())
}

/// `acct`: k INT UNSIGNED key, v BIGINT NOT NULL.
pub fn acct_definition() -> TableDef {
    keyed_definition(
        "acct",
        vec![column("v", ColumnType::BigInt { unsigned: false }, false)],
    )
}

/// Queues an update of `acct` row `k` to `v`.
pub fn set(transaction: &mut Transaction<'_>, table: &Arc<Table>, k: u32, v: i64) {
    transaction
        .update(table, &key(k), &[("v", ClientValue::Int(v))])
        .expect("valid update");
}

/// Executes a locking read of `acct` row `k` (batch only, no commit) and
/// returns v.
pub fn locked_read(
    transaction: &mut Transaction<'_>,
    table: &Arc<Table>,
    k: u32,
    lock: LockMode,
) -> Result<i64, ClientError> {
    let op = transaction.read(table, &key(k), lock)?;
    transaction.execute(Commit::No)?;
    Ok(transaction
        .get(op)
        .and_then(|row| row.get("v"))
        .and_then(ClientValue::as_i64)
        .expect("a read row has v"))
}

/// Runs `waiter` on another thread, checks that it has not answered
/// after `OBSERVE` (it is queued behind a lock), runs `release` and
/// returns what the waiter got.
pub fn wait_behind<T: Send + std::fmt::Debug>(
    what: &str,
    waiter: impl FnOnce() -> T + Send,
    release: impl FnOnce(),
) -> T {
    std::thread::scope(|scope| {
        let (sender, receiver) = mpsc::channel();
        scope.spawn(move || {
            let _ = sender.send(waiter());
        });
        match receiver.recv_timeout(OBSERVE) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            other => panic!("{what}: answered while the row was locked: {other:?}"),
        }
        release();
        receiver
            .recv_timeout(ANSWER)
            .unwrap_or_else(|error| panic!("{what}: no answer after the release: {error}"))
    })
}

/// The GCI the cluster restored at its last start, as `mgm -e show` has
/// it: as `H/L` text (what `bench keylookup --restored-gci` takes) and as
/// a number.
pub fn restored_gci(cluster: &TestCluster) -> (String, u64) {
    let show = cluster.show();
    let gci = show["restored_gci"]
        .as_u64()
        .unwrap_or_else(|| panic!("show has no restored_gci: {show}"));
    (format!("{}/{}", gci >> 32, gci & 0xFFFF_FFFF), gci)
}

/// Appends a restart line (`r H/L`, see crates/bench/src/ledger.rs) to the
/// ledger: commits of the killed run above the restored GCI were rolled
/// back, so the ledger must not require them from now on.
pub fn record_restart(ledger: &str, restored: &str) {
    use std::io::Write;
    let mut file = fs::OpenOptions::new()
        .append(true)
        .open(ledger)
        .unwrap_or_else(|error| panic!("cannot open the ledger {ledger}: {error}"));
    writeln!(file, "r {restored}").expect("append the restart to the ledger");
}

/// Runs `attempt` until it succeeds, retrying temporary errors (a failure
/// being handled) for up to `within`; panics with `what` on any other
/// error, or once that time is up.
pub fn settled<T>(
    what: &str,
    within: std::time::Duration,
    mut attempt: impl FnMut() -> Result<T, client::ClientError>,
) -> T {
    let deadline = std::time::Instant::now() + within;
    loop {
        match attempt() {
            Ok(value) => return value,
            Err(error) if error.is_temporary() && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(error) => panic!("{what}: {error}"),
        }
    }
}

/// A `tessera sql` child process, killed on drop.
pub struct SqlNode {
    child: Child,
    /// Its MySQL port.
    pub port: u16,
    /// Kept open, so the node never writes to a closed pipe.
    _stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl SqlNode {
    /// Starts one for `cluster` and waits until it listens.
    pub fn start(cluster: &TestCluster) -> SqlNode {
        SqlNode::start_with(cluster, &[])
    }

    /// As `start`, with `threads` event loops serving connections.
    pub fn start_with_threads(cluster: &TestCluster, threads: usize) -> SqlNode {
        SqlNode::start_with(cluster, &["--threads", &threads.to_string()])
    }

    /// As `start`, offering TLS with the certificate and key `files`
    /// makes (and, with `require_secure`, refusing logins without it).
    pub fn start_with_tls(
        cluster: &TestCluster,
        files: &TlsFiles,
        require_secure: bool,
    ) -> SqlNode {
        let certificate = files.certificate.to_string_lossy().into_owned();
        let key = files.key.to_string_lossy().into_owned();
        let mut extra = vec![
            "--tls-cert",
            certificate.as_str(),
            "--tls-key",
            key.as_str(),
        ];
        if require_secure {
            extra.push("--require-secure-transport");
        }
        SqlNode::start_with(cluster, &extra)
    }

    /// As `start`, with `extra` arguments for `tessera sql`.
    pub fn start_with(cluster: &TestCluster, extra: &[&str]) -> SqlNode {
        let port = free_port();
        let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args([
                "sql",
                "--mgmd",
                &cluster.mgmd_addr(),
                "--port",
                &port.to_string(),
            ])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("tessera sql starts");
        let mut line = String::new();
        let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout piped"));
        stdout
            .read_line(&mut line)
            .expect("tessera sql prints its address");
        assert!(
            line.contains("sql node listening on"),
            "unexpected first line {line:?}"
        );
        SqlNode {
            child,
            port,
            _stdout: stdout,
        }
    }
}

impl SqlNode {
    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and waits for it to be gone.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for SqlNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A self-signed certificate and its key for a SQL node's TLS, made with
/// the openssl command (.ci/run installs it) in a directory of their own.
pub struct TlsFiles {
    /// The certificate (PEM).
    pub certificate: std::path::PathBuf,
    /// Its key (PEM).
    pub key: std::path::PathBuf,
}

impl TlsFiles {
    /// Makes them under the system's temporary directory, named for `test`.
    pub fn make(test: &str) -> TlsFiles {
        let dir = std::env::temp_dir().join(format!("tessera-tls-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let certificate = dir.join("cert.pem");
        let key = dir.join("key.pem");
        let status = Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=localhost",
                "-keyout",
            ])
            .arg(&key)
            .arg("-out")
            .arg(&certificate)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("the openssl command is installed (.ci/run installs it)");
        assert!(status.success(), "openssl made a certificate");
        TlsFiles { certificate, key }
    }
}

/// How `mariadb_login` connects.
#[derive(Clone, Copy, Debug, Default)]
pub struct Login<'a> {
    /// The user.
    pub user: &'a str,
    /// The password (`None`: none given).
    pub password: Option<&'a str>,
    /// Over TLS (the certificate not verified).
    pub tls: bool,
    /// The database to start in.
    pub database: Option<&'a str>,
    /// The address to connect to (`None`: 127.0.0.1).
    pub host: Option<&'a str>,
}

/// Runs `sql` with the mariadb client logged in as `login` says
/// (tab-separated, no headers); `Ok(stdout)` or `Err(stderr)`.
pub fn mariadb_login(node: &SqlNode, login: Login<'_>, sql: &str) -> Result<String, String> {
    let mut command = Command::new("mariadb");
    command.args([
        "-h",
        login.host.unwrap_or("127.0.0.1"),
        "-P",
        &node.port.to_string(),
        "-u",
        login.user,
        "--batch",
        "--skip-column-names",
        "--connect-timeout=20",
    ]);
    if let Some(password) = login.password {
        command.arg(format!("--password={password}"));
    }
    match login.tls {
        true => command.args(["--ssl", "--ssl-verify-server-cert=0"]),
        false => command.arg("--skip-ssl"),
    };
    if let Some(database) = login.database {
        command.arg(database);
    }
    let output = command
        .args(["-e", sql])
        .output()
        .expect("the mariadb client is installed (.ci/run installs it)");
    match output.status.success() {
        true => Ok(String::from_utf8_lossy(&output.stdout).into_owned()),
        false => Err(String::from_utf8_lossy(&output.stderr).into_owned()),
    }
}

/// Runs `sql` with the mariadb client (tab-separated, no headers);
/// `Ok(stdout)` or `Err(stderr)`.
pub fn mariadb(node: &SqlNode, user: &str, sql: &str) -> Result<String, String> {
    let output = Command::new("mariadb")
        .args([
            "-h",
            "127.0.0.1",
            "-P",
            &node.port.to_string(),
            "-u",
            user,
            "--batch",
            "--skip-column-names",
            "-e",
            sql,
        ])
        .output()
        .expect("the mariadb client is installed (.ci/run installs it)");
    match output.status.success() {
        true => Ok(String::from_utf8_lossy(&output.stdout).into_owned()),
        false => Err(String::from_utf8_lossy(&output.stderr).into_owned()),
    }
}

/// One MySQL protocol packet off `stream`: its sequence id and payload.
pub fn mysql_read_packet(stream: &mut std::net::TcpStream) -> (u8, Vec<u8>) {
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).unwrap();
    let length = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
    let mut payload = vec![0u8; length];
    stream.read_exact(&mut payload).unwrap();
    (header[3], payload)
}

/// One MySQL protocol packet onto `stream`.
pub fn mysql_write_packet(stream: &mut std::net::TcpStream, sequence: u8, payload: &[u8]) {
    use std::io::Write;
    let mut packet = (payload.len() as u32).to_le_bytes()[..3].to_vec();
    packet.push(sequence);
    packet.extend_from_slice(payload);
    stream.write_all(&packet).unwrap();
}
