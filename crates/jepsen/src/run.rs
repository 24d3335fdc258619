//! One run of the harness: hosts, a cluster of 4 data nodes (2 node
//! groups of 2) on them, register clients on two client hosts recording
//! their histories, and a nemesis killing data nodes (their angels
//! restart them; one at a time: only when every node is started) on a
//! schedule drawn from the seed; then everything is
//! healed, every node started again, and the histories checked. The run
//! directory keeps the config, every process's log, the history
//! (`history.jsonl`) and the nemesis log (`nemesis.log`).

use crate::check::Verdict;
use crate::cluster::HostedCluster;
use crate::history::{self, Op};
use crate::hosts::Network;
use crate::workload;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The nemesis schedule's seed.
    pub seed: u64,
    /// How long the clients and the nemesis run.
    pub time: Duration,
    /// Register clients (split over two client hosts).
    pub clients: u64,
    /// Mean time between kills (each drawn from half to one and a half
    /// of it).
    pub kill_every: Duration,
    /// The run's directory (made; must be empty or absent).
    pub dir: PathBuf,
    /// The `tessera` binary.
    pub tessera: PathBuf,
}

/// What a run found.
#[derive(Debug)]
pub struct RunReport {
    pub verdicts: Vec<Verdict>,
    /// "at MS ms: what", one line per fault.
    pub nemesis: Vec<String>,
    pub dir: PathBuf,
}

impl RunReport {
    /// Whether every verdict is valid.
    pub fn valid(&self) -> bool {
        self.verdicts.iter().all(|verdict| verdict.valid)
    }
}

/// Runs the harness. Call on a thread of its own: it moves that thread
/// into the run's private namespaces.
pub fn run(options: &RunOptions) -> Result<RunReport, String> {
    Network::isolate()?;
    let network = Network::new(&["mgmd", "n2", "n3", "n4", "n5", "c1", "c2"])?;
    let host = |name: &str| network.host(name).expect("made above");
    let (client_a, client_b) = (host("c1"), host("c2"));
    let cluster = HostedCluster::start(
        &network,
        &options.tessera,
        &options.dir,
        host("mgmd"),
        &[host("n2"), host("n3"), host("n4"), host("n5")],
        2,
    )?;
    cluster.wait_started(client_a, Duration::from_secs(120))?;
    let mgmd = cluster.mgmd_addr();
    workload::set_up_register(&network, client_a, &mgmd)?;

    let start = Instant::now();
    let stop_clients = AtomicBool::new(false);
    let nemesis_log = Mutex::new(Vec::new());
    let log = |line: String| {
        let at = start.elapsed().as_millis();
        nemesis_log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(format!("at {at} ms: {line}"));
    };
    let histories: Vec<Vec<Op>> = std::thread::scope(|scope| {
        let clients: Vec<_> = (0..options.clients)
            .map(|slot| {
                let host = if slot % 2 == 0 { client_a } else { client_b };
                let (network, mgmd, stop) = (&network, &mgmd, &stop_clients);
                let (clients, seed) = (options.clients, options.seed);
                scope.spawn(move || {
                    workload::register_client(network, host, mgmd, start, slot, clients, seed, stop)
                })
            })
            .collect();
        // The nemesis, on this thread.
        let mut random = stdx::mix::XorShift::new(options.seed);
        let ids = cluster.node_ids();
        let mean = options.kill_every.as_millis().max(1) as u64;
        let mut next = start + Duration::from_millis(mean / 2 + random.below(mean));
        while start.elapsed() < options.time {
            // One data node down at a time: killing the other node of a
            // group before the first is back would stop the whole
            // cluster, and a whole-cluster restart loses the commits not
            // yet durable (the durability window) by design: that is the
            // full-cluster-kill nemesis's business, with the durable
            // workload, not this one's.
            if Instant::now() >= next && !cluster.all_started(client_a) {
                next = Instant::now() + Duration::from_millis(200);
            } else if Instant::now() >= next {
                let id = ids[random.below(ids.len() as u64) as usize];
                match cluster.node_pid(client_a, id) {
                    Some(pid) => {
                        // SAFETY: kill(2) with a pid mgmd reported.
                        unsafe {
                            libc::kill(pid as libc::pid_t, libc::SIGKILL);
                        }
                        log(format!(
                            "kill -9 data node {id} (pid {pid}); its angel restarts it"
                        ));
                    }
                    None => log(format!("data node {id} has no pid now: not killed")),
                }
                next = Instant::now() + Duration::from_millis(mean / 2 + random.below(mean));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        log("heal: no more faults; waiting for every data node to be started".into());
        let healed = cluster.wait_started(client_a, Duration::from_secs(300));
        log(match &healed {
            Ok(()) => "every data node started".into(),
            Err(error) => format!("not healed: {error}"),
        });
        // A little more load on the healed cluster.
        std::thread::sleep(Duration::from_secs(2));
        stop_clients.store(true, Ordering::SeqCst);
        clients
            .into_iter()
            .map(|client| client.join().unwrap_or_default())
            .collect()
    });
    let mut ops: Vec<Op> = histories.into_iter().flatten().collect();
    ops.sort_by_key(|op| op.time);
    let text: Vec<String> = ops.iter().map(Op::to_line).collect();
    let history_path = options.dir.join("history.jsonl");
    std::fs::write(&history_path, text.join("\n") + "\n")
        .map_err(|error| format!("{}: {error}", history_path.display()))?;
    let nemesis = nemesis_log
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    std::fs::write(options.dir.join("nemesis.log"), nemesis.join("\n") + "\n")
        .map_err(|error| format!("the nemesis log: {error}"))?;
    let operations = history::pair(&ops)?;
    let verdicts = vec![crate::check::register::check(&operations)];
    Ok(RunReport {
        verdicts,
        nemesis,
        dir: options.dir.clone(),
    })
}
