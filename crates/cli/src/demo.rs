//! `tessera demo`: a whole local cluster on loopback in one command. It
//! writes a config into its data directory, starts an mgmd and the data
//! nodes as child processes in its own process group, waits until every
//! node is started, starts a SQL node (`tessera sql`, on the last of its
//! ports), prints one `ready mgmd=... sql=...` line, and stops everything
//! it started on Ctrl-C or SIGTERM (or when a child dies). A new cluster
//! gets a new cluster secret in its data directory (`cluster.secret`).
//!
//! A data directory left by an earlier run is a cluster on disk: the demo
//! restarts it from there (its `config.toml`, its nodes' redo logs and
//! system files), recovering every transaction of a complete GCI.
//! `--initial` wipes it and starts from nothing.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Options of `tessera demo`.
#[derive(clap::Args, Debug)]
pub struct DemoOptions {
    /// First port; the demo uses only ports P to P+19.
    #[arg(long, default_value_t = 11860)]
    base_port: u16,
    /// Directory for the generated config, logs and data files; kept after
    /// exit, never deleted. A directory left by an earlier demo is
    /// restarted from disk. Default: a new directory under /tmp.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Wipe a non-empty data directory and start from nothing.
    #[arg(long)]
    initial: bool,
    /// Data nodes (a multiple of --replicas; node groups = data nodes / replicas).
    #[arg(long, default_value_t = 2)]
    data_nodes: u16,
    /// Replicas per partition (1 to 4).
    #[arg(long, default_value_t = 2)]
    replicas: u8,
    /// DataMemory per data node: the default holds TPC-C's one warehouse
    /// and a few minutes of its new orders (the README's example).
    #[arg(long, default_value = "512M")]
    data_memory: String,
}

/// Runs the demo until Ctrl-C / SIGTERM.
pub fn run(options: DemoOptions) -> Result<(), String> {
    if options.data_nodes == 0 || options.data_nodes > 18 {
        return Err(format!(
            "--data-nodes {} is out of range: the demo runs 1 to 18 data nodes in its 20 ports",
            options.data_nodes
        ));
    }
    if options.base_port > u16::MAX - 19 {
        return Err(format!(
            "--base-port {} leaves no room for 20 ports",
            options.base_port
        ));
    }
    let (data_dir, restart) = prepare_data_dir(&options)?;
    let config_path = data_dir.join("config.toml");
    let mgmd_port = if restart {
        let config = config::ClusterConfig::from_file(&config_path).map_err(|error| {
            format!(
                "cannot restart the cluster in {}: {error}",
                data_dir.display()
            )
        })?;
        eprintln!(
            "tessera demo: restarting the cluster in {} from disk ({} data nodes; \
             --data-nodes, --replicas, --data-memory and --base-port come from its config.toml)",
            data_dir.display(),
            config.data_nodes.len()
        );
        config.mgmd.port
    } else {
        write_config(&config_path, &options, &data_dir)?;
        options.base_port
    };
    let node_ids: Vec<u16> = config::ClusterConfig::from_file(&config_path)
        .map_err(|error| error.to_string())?
        .data_nodes
        .iter()
        .map(|node| node.id)
        .collect();

    // Our own process group: Ctrl-C in a terminal reaches every child too.
    // SAFETY: setpgid on ourselves has no memory-safety preconditions.
    unsafe {
        libc::setpgid(0, 0);
    }
    stdx::stop::on_signals();
    let executable =
        std::env::current_exe().map_err(|error| format!("cannot find own executable: {error}"))?;
    let mgmd_address = format!("127.0.0.1:{mgmd_port}");
    let mut children: Vec<(String, Child)> = Vec::new();
    let result = (|| {
        children.push((
            "mgmd".into(),
            spawn(
                &executable,
                &["mgmd", "--config", &config_path.to_string_lossy()],
                &data_dir.join("mgmd.log"),
            )?,
        ));
        wait_for_mgmd(&mgmd_address, &mut children)?;
        for &node in &node_ids {
            let node_id = node.to_string();
            let mut args = vec!["node", "--mgmd", &mgmd_address, "--node-id", &node_id];
            if !restart {
                args.push("--initial");
            }
            children.push((
                format!("node {node_id}"),
                spawn(
                    &executable,
                    &args,
                    &data_dir.join(format!("node{node_id}.log")),
                )?,
            ));
        }
        wait_for_started(&mgmd_address, node_ids.len(), &mut children, &data_dir)?;
        // The SQL node takes the last of the demo's ports.
        let sql_port = (mgmd_port + 19).to_string();
        children.push((
            "sql".into(),
            spawn(
                &executable,
                &["sql", "--mgmd", &mgmd_address, "--port", &sql_port],
                &data_dir.join("sql.log"),
            )?,
        ));
        let sql_address = format!("127.0.0.1:{sql_port}");
        wait_for_listener(&sql_address, &mut children, &data_dir)?;
        println!(
            "ready mgmd={mgmd_address} sql={sql_address} data_dir={} (try: tessera mgm --mgmd \
             {mgmd_address} -e show; mariadb -h 127.0.0.1 -P {sql_port} -u root; tessera bench \
             keylookup --mgmd {mgmd_address} --records 100000)",
            data_dir.display()
        );
        let _ = std::io::stdout().flush();
        // A node restart (a node its angel started again, or `mgm ...
        // restart`) shows as a live bar.
        let mut progress = crate::progress::RestartProgress::new();
        let mut looks = 0u32;
        while !stdx::stop::requested() {
            looks += 1;
            if looks.is_multiple_of(5) {
                show_restarts(&mgmd_address, &mut progress);
            }
            if let Some(name) = exited_child(&mut children) {
                let data_nodes_left = children
                    .iter()
                    .filter(|(other, _)| other.starts_with("node ") && *other != name)
                    .count();
                if name.starts_with("node ") && data_nodes_left > 0 {
                    // The survivors carry on if they can (the survival
                    // rule, the arbitrator); those that may not exit too.
                    eprintln!(
                        "tessera demo: {name} and its angel exited (see {}); the cluster \
                         carries on without it while every node group has a node left \
                         (tessera mgm --mgmd {mgmd_address} -e show); `tessera node --mgmd \
                         {mgmd_address} --node-id N` brings it back by a node restart",
                        data_dir.display()
                    );
                    children.retain(|(other, _)| *other != name);
                    continue;
                }
                return Err(format!(
                    "{name} exited; see the logs in {}",
                    data_dir.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    })();
    stop_children(&mut children);
    eprintln!("tessera demo: stopped");
    result
}

/// Waits until something listens on `address` (the SQL node, once it
/// has joined the cluster and made its system tables).
fn wait_for_listener(
    address: &str,
    children: &mut [(String, Child)],
    data_dir: &Path,
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if std::net::TcpStream::connect(address).is_ok() {
            return Ok(());
        }
        if let Some(name) = exited_child(children) {
            return Err(format!(
                "{name} exited; see the logs in {}",
                data_dir.display()
            ));
        }
        if Instant::now() > deadline || stdx::stop::requested() {
            return Err(format!(
                "the SQL node did not listen on {address}; see {}",
                data_dir.join("sql.log").display()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One look at mgmd's `show` for the progress of node restarts (mgmd
/// not answering just skips a look).
fn show_restarts(mgmd_address: &str, progress: &mut crate::progress::RestartProgress) {
    let Ok(show) = mgmd::client::MgmClient::connect(mgmd_address).and_then(|mut mgm| mgm.show())
    else {
        return;
    };
    for node in show["nodes"].as_array().into_iter().flatten() {
        if node["type"] != "data" {
            continue;
        }
        if let Some(id) = node["id"].as_u64().and_then(|id| u16::try_from(id).ok()) {
            progress.show(id, node);
        }
    }
}

/// The data directory, and whether it holds a cluster to restart.
fn prepare_data_dir(options: &DemoOptions) -> Result<(PathBuf, bool), String> {
    let data_dir = match &options.data_dir {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("tessera-demo-{}", std::process::id())),
    };
    if data_dir.exists() {
        let non_empty = fs::read_dir(&data_dir)
            .map_err(|error| format!("cannot read {}: {error}", data_dir.display()))?
            .next()
            .is_some();
        if non_empty {
            if !options.initial {
                if !data_dir.join("config.toml").exists() {
                    return Err(format!(
                        "data directory {} is not empty and holds no demo cluster \
                         (config.toml): use --initial to wipe it, or another --data-dir",
                        data_dir.display()
                    ));
                }
                let resolved = data_dir
                    .canonicalize()
                    .map_err(|error| format!("cannot resolve {}: {error}", data_dir.display()))?;
                return Ok((resolved, true));
            }
            for entry in fs::read_dir(&data_dir).map_err(|error| error.to_string())? {
                let path = entry.map_err(|error| error.to_string())?.path();
                let removed = if path.is_dir() {
                    fs::remove_dir_all(&path)
                } else {
                    fs::remove_file(&path)
                };
                removed.map_err(|error| format!("cannot wipe {}: {error}", path.display()))?;
            }
        }
    }
    fs::create_dir_all(&data_dir)
        .map_err(|error| format!("cannot create {}: {error}", data_dir.display()))?;
    data_dir
        .canonicalize()
        .map(|resolved| (resolved, false))
        .map_err(|error| format!("cannot resolve {}: {error}", data_dir.display()))
}

fn write_config(path: &Path, options: &DemoOptions, data_dir: &Path) -> Result<(), String> {
    let mut text = format!(
        "# Generated by `tessera demo`.\n[mgmd]\nnode_id = 1\nhost = \"127.0.0.1\"\nport = {}\n\n\
         [cluster]\nreplicas = {}\ndata_memory = \"{}\"\nsecret_file = \"{}\"\n\n\
         [threads]\nldm = 2\ntc = 1\nrecv = 1\nsend = 1\nmain = 1\nspin_us = 0\n",
        options.base_port,
        options.replicas,
        options.data_memory,
        data_dir.join(SECRET_FILE).display()
    );
    for node in 0..options.data_nodes {
        let id = 2 + node;
        text.push_str(&format!(
            "\n[[data_node]]\nid = {id}\nhost = \"127.0.0.1\"\nport = {}\ndata_dir = \"{}\"\n",
            options.base_port + 1 + node,
            data_dir.join(format!("node{id}")).display()
        ));
    }
    // Validate before starting anything, so a bad flag fails here.
    config::ClusterConfig::from_toml_str(&text, "demo config")
        .map_err(|error| error.to_string())?;
    // A new cluster gets a new secret (docs/design/0007-groundwork.md,
    // "Authenticated admission"); a restarted one keeps the one it has.
    let secret = data_dir.join(SECRET_FILE);
    if !secret.exists() {
        admission::ClusterSecret::create_file(&secret).map_err(|error| {
            format!(
                "cannot write the cluster secret {}: {error}",
                secret.display()
            )
        })?;
    }
    fs::write(path, text).map_err(|error| format!("cannot write {}: {error}", path.display()))
}

/// The demo's cluster secret, in its data directory.
const SECRET_FILE: &str = "cluster.secret";

fn spawn(executable: &Path, args: &[&str], log: &Path) -> Result<Child, String> {
    // Appended: a restarted cluster keeps the logs of its earlier runs.
    let log_file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|error| format!("cannot open {}: {error}", log.display()))?;
    let log_clone = log_file.try_clone().map_err(|error| error.to_string())?;
    Command::new(executable)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log_file)
        .stderr(log_clone)
        .spawn()
        .map_err(|error| format!("cannot start tessera {}: {error}", args.join(" ")))
}

fn exited_child(children: &mut [(String, Child)]) -> Option<String> {
    for (name, child) in children.iter_mut() {
        if let Ok(Some(_)) = child.try_wait() {
            return Some(name.clone());
        }
    }
    None
}

fn wait_for_mgmd(address: &str, children: &mut [(String, Child)]) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if mgmd::client::MgmClient::connect(address).is_ok() {
            return Ok(());
        }
        if let Some(name) = exited_child(children) {
            return Err(format!("{name} exited during start"));
        }
        if Instant::now() > deadline || stdx::stop::requested() {
            return Err(format!("mgmd did not come up at {address}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_for_started(
    address: &str,
    data_nodes: usize,
    children: &mut [(String, Child)],
    data_dir: &Path,
) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let started = mgmd::client::MgmClient::connect(address)
            .and_then(|mut client| client.show())
            .map(|show| {
                show["nodes"]
                    .as_array()
                    .map(|nodes| {
                        nodes
                            .iter()
                            .filter(|node| node["type"] == "data" && node["state"] == "started")
                            .count()
                    })
                    .unwrap_or(0)
            })
            .unwrap_or(0);
        if started >= data_nodes {
            return Ok(());
        }
        if let Some(name) = exited_child(children) {
            return Err(format!(
                "{name} exited during start; see {}",
                data_dir.display()
            ));
        }
        if Instant::now() > deadline || stdx::stop::requested() {
            return Err("data nodes did not start in time".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn stop_children(children: &mut [(String, Child)]) {
    for (_, child) in children.iter_mut().rev() {
        // SAFETY: kill(2) with a pid we spawned; no memory is touched.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    for (_, child) in children.iter_mut() {
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                _ if Instant::now() > deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
}
