//! A Tessera cluster on separate hosts (`hosts`): mgmd on one host, each
//! data node on its own (under its angel, which restarts it when a
//! nemesis kills it), all from the real `tessera` binary, with a config
//! naming the hosts' addresses. Talking to mgmd goes through a thread on
//! a client host, as any client would.

use crate::hosts::{Host, Network};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// mgmd's port on its host; every data node listens on `DATA_PORT` on
/// its own.
pub const MGMD_PORT: u16 = 11860;
pub const DATA_PORT: u16 = 11861;

/// A data node as mgmd's `show` gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeView {
    pub id: u16,
    pub group: u64,
    /// "started", "starting", "failed", ...
    pub state: String,
    /// Its process (the angel's child), while it runs.
    pub pid: Option<u32>,
}

/// Sends `signal` to process `pid` (SIGKILL, SIGSTOP, SIGCONT).
pub fn send_signal(pid: u32, signal: libc::c_int) -> Result<(), String> {
    // SAFETY: kill(2) with a pid mgmd reported; at worst the process is gone.
    if unsafe { libc::kill(pid as libc::pid_t, signal) } == 0 {
        Ok(())
    } else {
        Err(format!(
            "kill({pid}, {signal}): {}",
            std::io::Error::last_os_error()
        ))
    }
}

/// The processes of a cluster on hosts; killed when dropped.
pub struct HostedCluster<'n> {
    network: &'n Network,
    dir: PathBuf,
    tessera: PathBuf,
    mgmd_host: Host,
    /// Data node id, its host, and its angel's process.
    nodes: Vec<(u16, Host, Option<Child>)>,
    mgmd: Option<Child>,
}

/// Where the `tessera` binary is: next to the running executable (or
/// its `deps` directory's parent, for a test), unless given.
pub fn find_tessera(given: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(path) = given {
        return Ok(path.to_path_buf());
    }
    let executable =
        std::env::current_exe().map_err(|error| format!("cannot find own executable: {error}"))?;
    let mut dir = executable.parent().map(Path::to_path_buf);
    while let Some(candidate_dir) = dir {
        let candidate = candidate_dir.join("tessera");
        if candidate.is_file() {
            return Ok(candidate);
        }
        dir = candidate_dir.parent().map(Path::to_path_buf);
        if dir.as_ref().is_some_and(|dir| dir.ends_with("target")) {
            break;
        }
    }
    Err(
        "cannot find the tessera binary next to this program: build it (cargo build -p cli) \
         or pass --tessera PATH"
            .to_string(),
    )
}

/// As [`find_tessera`]; when it is not there and this program was run
/// by cargo (`cargo run -p faults`, `cargo test -p faults`), builds it
/// first with the same profile, so that one command runs the harness
/// from a fresh clone.
pub fn find_or_build_tessera(given: Option<&Path>) -> Result<PathBuf, String> {
    let missing = match find_tessera(given) {
        Ok(path) => return Ok(path),
        Err(missing) => missing,
    };
    let Ok(cargo) = std::env::var("CARGO") else {
        return Err(missing);
    };
    let release = std::env::current_exe()
        .is_ok_and(|exe| exe.components().any(|part| part.as_os_str() == "release"));
    let mut build = std::process::Command::new(cargo);
    build.args(["build", "-p", "cli", "--bin", "tessera"]);
    if release {
        build.arg("--release");
    }
    eprintln!("faults: building the tessera binary first (cargo build -p cli)");
    let status = build
        .status()
        .map_err(|error| format!("cannot run cargo to build tessera: {error}"))?;
    if !status.success() {
        return Err(format!("building tessera failed ({status})"));
    }
    find_tessera(None)
}

impl<'n> HostedCluster<'n> {
    /// Writes the config into `dir` and starts mgmd on `mgmd_host` and a
    /// data node (ids 2, 3, ...) under its angel on each of `data_hosts`,
    /// without waiting (see [`HostedCluster::wait_started`]).
    pub fn start(
        network: &'n Network,
        tessera: &Path,
        dir: &Path,
        mgmd_host: &Host,
        data_hosts: &[&Host],
        replicas: u8,
    ) -> Result<HostedCluster<'n>, String> {
        std::fs::create_dir_all(dir).map_err(|error| format!("{}: {error}", dir.display()))?;
        // The processes run in it, and are told paths in it.
        let dir =
            &std::path::absolute(dir).map_err(|error| format!("{}: {error}", dir.display()))?;
        let secret = dir.join("cluster.secret");
        let made = std::process::Command::new(tessera)
            .arg("secret")
            .arg(&secret)
            .output()
            .map_err(|error| format!("cannot run {}: {error}", tessera.display()))?;
        if !made.status.success() {
            return Err(format!(
                "tessera secret: {}",
                String::from_utf8_lossy(&made.stderr)
            ));
        }
        let mut config = format!(
            "# Written by the fault harness (docs/design/0019-fault-harness.md).\n\
             [mgmd]\nnode_id = 1\nhost = \"{mgmd}\"\nport = {MGMD_PORT}\n\n\
             [cluster]\nreplicas = {replicas}\ndata_memory = \"256M\"\n\
             secret_file = \"cluster.secret\"\n\n\
             [threads]\nldm = 2\ntc = 1\nspin_us = 0\n",
            mgmd = mgmd_host.address
        );
        for (index, host) in data_hosts.iter().enumerate() {
            let id = index + 2;
            config.push_str(&format!(
                "\n[[data_node]]\nid = {id}\nhost = \"{}\"\nport = {DATA_PORT}\ndata_dir = \"node{id}\"\n",
                host.address
            ));
        }
        let config_path = dir.join("config.toml");
        std::fs::write(&config_path, config).map_err(|error| format!("the config: {error}"))?;
        let mut cluster = HostedCluster {
            network,
            dir: dir.to_path_buf(),
            tessera: tessera.to_path_buf(),
            mgmd_host: mgmd_host.clone(),
            nodes: Vec::new(),
            mgmd: None,
        };
        let config_arg = config_path.to_string_lossy().into_owned();
        cluster.mgmd =
            Some(cluster.spawn(mgmd_host, &["mgmd", "--config", &config_arg], "mgmd.log")?);
        // A data node that cannot reach mgmd at its start gives up.
        let deadline = Instant::now() + Duration::from_secs(30);
        while cluster.show(mgmd_host).is_err() {
            if Instant::now() >= deadline {
                return Err(format!(
                    "mgmd did not answer within 30 s (log in {})",
                    dir.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        for (index, host) in data_hosts.iter().enumerate() {
            let id = (index + 2) as u16;
            cluster.nodes.push((id, (*host).clone(), None));
            cluster.start_node(id)?;
        }
        Ok(cluster)
    }

    fn spawn(&self, host: &Host, args: &[&str], log: &str) -> Result<Child, String> {
        let log_path = self.dir.join(log);
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|error| format!("{}: {error}", log_path.display()))?;
        let error_file = log_file
            .try_clone()
            .map_err(|error| format!("{}: {error}", log_path.display()))?;
        let tessera = self.tessera.to_string_lossy().into_owned();
        let mut command = self.network.command(host, &tessera);
        // SAFETY: prctl(2) only, between fork and exec. The child dies
        // with the harness's thread that started it, even if the
        // harness is killed: no cluster is left running behind a run.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
        command
            .args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(error_file)
            .spawn()
            .map_err(|error| format!("cannot start {args:?} on {}: {error}", host.name))
    }

    /// Starts data node `id` (under its angel) again if it is not running.
    pub fn start_node(&mut self, id: u16) -> Result<(), String> {
        let mgmd = self.mgmd_addr();
        let index = self
            .nodes
            .iter()
            .position(|(node, _, _)| *node == id)
            .ok_or_else(|| format!("no data node {id}"))?;
        if let Some(child) = self.nodes[index].2.as_mut() {
            if child.try_wait().ok().flatten().is_none() {
                return Ok(());
            }
        }
        let host = self.nodes[index].1.clone();
        let id_text = id.to_string();
        let child = self.spawn(
            &host,
            &[
                "node",
                "--mgmd",
                &mgmd,
                "--node-id",
                &id_text,
                "--restarts",
                "1000",
            ],
            &format!("node{id}.log"),
        )?;
        self.nodes[index].2 = Some(child);
        Ok(())
    }

    /// mgmd's address.
    pub fn mgmd_addr(&self) -> String {
        format!("{}:{MGMD_PORT}", self.mgmd_host.address)
    }

    /// The data node ids.
    pub fn node_ids(&self) -> Vec<u16> {
        self.nodes.iter().map(|(id, _, _)| *id).collect()
    }

    /// The host of data node `id`.
    pub fn host_of(&self, id: u16) -> Option<&Host> {
        self.nodes
            .iter()
            .find(|(node, _, _)| *node == id)
            .map(|(_, host, _)| host)
    }

    /// The run's directory (config, logs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// mgmd's `show`, asked from a thread on `from`.
    pub fn show(&self, from: &Host) -> Result<serde_json::Value, String> {
        let addr = self.mgmd_addr();
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    self.network.enter(from)?;
                    mgmclient::client::MgmClient::connect(&addr)
                        .and_then(|mut mgm| mgm.show())
                        .map_err(|error| error.to_string())
                })
                .join()
                .map_err(|_| "the show thread panicked".to_string())?
        })
    }

    /// Whether mgmd shows every data node started (asked from `from`).
    pub fn all_started(&self, from: &Host) -> bool {
        self.show(from).is_ok_and(|show| {
            show["nodes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|node| node["type"] == "data")
                .all(|node| node["state"] == "started")
        })
    }

    /// Waits until mgmd shows every data node started (asked from `from`).
    pub fn wait_started(&self, from: &Host, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            let waiting: Vec<u64> = match self.show(from) {
                Ok(show) => show["nodes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|node| node["type"] == "data" && node["state"] != "started")
                    .filter_map(|node| node["id"].as_u64())
                    .collect(),
                Err(_) => self.node_ids().into_iter().map(u64::from).collect(),
            };
            if waiting.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "data nodes {waiting:?} were not started within {timeout:?} (logs in {})",
                    self.dir.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Each data node as mgmd shows it (asked from `from`).
    pub fn data_nodes(&self, from: &Host) -> Result<Vec<NodeView>, String> {
        let show = self.show(from)?;
        Ok(show["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|node| node["type"] == "data")
            .filter_map(|node| {
                Some(NodeView {
                    id: u16::try_from(node["id"].as_u64()?).ok()?,
                    group: node["group"].as_u64().unwrap_or(0),
                    state: node["state"].as_str().unwrap_or("").to_string(),
                    pid: node["pid"].as_u64().and_then(|pid| u32::try_from(pid).ok()),
                })
            })
            .collect())
    }

    /// The GCI the last whole-cluster start restored, as mgmd shows it.
    pub fn restored_gci(&self, from: &Host) -> Option<u64> {
        self.show(from).ok()?["restored_gci"].as_u64()
    }

    /// Runs an mgm command (`mgmclient::mgm`) from a thread on `from`,
    /// waiting for restarts as `--wait` does.
    pub fn mgm(&self, from: &Host, command: &str) -> Result<String, String> {
        let addr = self.mgmd_addr();
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    self.network.enter(from)?;
                    mgmclient::mgm::run_command_waiting(&addr, command, true, true)
                        .map_err(|error| error.to_string())
                })
                .join()
                .map_err(|_| "the mgm thread panicked".to_string())?
        })
    }

    /// Kills mgmd with SIGKILL (the arbitrator and the config server
    /// gone; data nodes and clients keep their links to each other).
    pub fn kill_mgmd(&mut self) -> Option<u32> {
        let mut mgmd = self.mgmd.take()?;
        let pid = mgmd.id();
        let _ = mgmd.kill();
        let _ = mgmd.wait();
        Some(pid)
    }

    /// Starts mgmd again on its host (after [`HostedCluster::kill_mgmd`]).
    pub fn start_mgmd(&mut self) -> Result<(), String> {
        if self.mgmd.is_some() {
            return Ok(());
        }
        let config = self.dir.join("config.toml").to_string_lossy().into_owned();
        let host = self.mgmd_host.clone();
        self.mgmd = Some(self.spawn(&host, &["mgmd", "--config", &config], "mgmd.log")?);
        Ok(())
    }

    /// The pid of data node `id`'s process (its angel's child), as mgmd
    /// shows it.
    pub fn node_pid(&self, from: &Host, id: u16) -> Option<u32> {
        let show = self.show(from).ok()?;
        let node = show["nodes"]
            .as_array()?
            .iter()
            .find(|node| node["type"] == "data" && node["id"] == id)?;
        node["pid"].as_u64().and_then(|pid| u32::try_from(pid).ok())
    }
}

impl Drop for HostedCluster<'_> {
    fn drop(&mut self) {
        // An angel killed takes its node with it (PR_SET_PDEATHSIG).
        for (_, _, child) in &mut self.nodes {
            if let Some(mut child) = child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if let Some(mut mgmd) = self.mgmd.take() {
            let _ = mgmd.kill();
            let _ = mgmd.wait();
        }
    }
}
