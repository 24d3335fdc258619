//! One run of the harness (docs/design/0019-fault-harness.md): hosts, a
//! cluster of 4 data nodes (2 node groups of 2) under angels on them,
//! the chosen workloads' clients on two client hosts recording their
//! histories, and the nemesis drawing faults from the schedule and the
//! seed, one at a time, the cluster healed (every data node started)
//! between two. At the end everything is healed, the clients stop, the
//! set workloads read back what they added, the replicas are compared,
//! and every history is checked. `report` writes what the run saw.

use crate::check::Verdict;
use crate::cluster::{send_signal, HostedCluster};
use crate::history::{self, Completion, Op, OpType, Operation};
use crate::hosts::{Host, Network};
use crate::nemesis::{Fault, Kind, Schedule, Window};
use crate::workload::{self, on_host, Gate, Workload};
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The nemesis schedule's seed (and the clients').
    pub seed: u64,
    /// How long the clients and the nemesis run.
    pub time: Duration,
    pub schedule: Schedule,
    pub workloads: Vec<Workload>,
    /// Clients per workload (split over two client hosts).
    pub clients: u64,
    /// The report directory (made; must be empty or absent).
    pub dir: PathBuf,
    /// The `tessera` binary.
    pub tessera: PathBuf,
}

/// One workload's outcome.
#[derive(Debug)]
pub struct WorkloadReport {
    pub workload: Workload,
    pub verdict: Verdict,
    /// Its clients' operations by completion.
    pub ok: usize,
    pub fail: usize,
    pub info: usize,
    /// Its history, as recorded (with the harness's final read).
    pub history: Vec<Op>,
}

/// A whole-cluster restart as the run saw it: when the clients went on
/// after it, the GCI it restored, and the registers' values then.
#[derive(Clone, Debug)]
pub struct Epoch {
    pub at: u64,
    pub restored_gci: u64,
    pub registers: Option<Vec<Json>>,
}

/// What a run found.
#[derive(Debug)]
pub struct RunReport {
    pub options: RunOptions,
    pub workloads: Vec<WorkloadReport>,
    /// The replicas compared after healing (every replica of every
    /// partition holds the same rows).
    pub replicas: Verdict,
    pub windows: Vec<Window>,
    pub epochs: Vec<Epoch>,
    /// "at MS ms: what", one line per event.
    pub nemesis: Vec<String>,
    /// Whether the cluster healed after every fault and at the end.
    pub healed: bool,
    /// ns from the run's start to the clients' stop.
    pub duration: u64,
}

impl RunReport {
    /// Whether every verdict is valid and the cluster healed.
    pub fn valid(&self) -> bool {
        self.healed
            && self.replicas.valid
            && self.workloads.iter().all(|report| report.verdict.valid)
    }

    /// Faults applied, by kind.
    pub fn counts(&self) -> BTreeMap<Kind, usize> {
        let mut counts = BTreeMap::new();
        for window in &self.windows {
            *counts.entry(window.fault.kind()).or_insert(0) += 1;
        }
        counts
    }
}

/// A process number the harness's own operations use (no client's).
pub const HARNESS_PROCESS: u64 = 1 << 48;

/// Where a data node's proxy listens on its host.
const PROXY_PORT: u16 = 11871;

/// How long the cluster may take to heal after a fault.
const HEAL_TIMEOUT: Duration = Duration::from_secs(300);

/// The hosts and the cluster on them.
struct Stage<'n> {
    network: &'n Network,
    /// Data node id -> the proxy in front of it (long schedule).
    proxies: BTreeMap<u16, crate::proxy::Proxy>,
    /// The register workload runs (a whole-cluster restart reads the
    /// registers it restored).
    registers: bool,
    cluster: HostedCluster<'n>,
    /// Where the harness talks to the cluster from (a client host).
    observer: &'n Host,
    mgmd_host: &'n Host,
    clients: Vec<&'n Host>,
}

impl Stage<'_> {
    /// Runs `work` with a client of its own on the observer's host (the
    /// harness's set-up, restart reads, final reads and replica check).
    fn as_client<T: Send>(
        &self,
        work: impl FnOnce(&client::Cluster) -> Result<T, String> + Send,
    ) -> Result<T, String> {
        let mgmd = self.cluster.mgmd_addr();
        on_host(self.network, self.observer, || {
            let cluster =
                workload::connect(&mgmd, &Gate::default()).ok_or("no client could connect")?;
            work(&cluster)
        })
    }
}

/// The run's clock and log.
struct Journal {
    start: Instant,
    lines: Mutex<Vec<String>>,
}

impl Journal {
    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    fn log(&self, line: impl Into<String>) {
        let line = format!(
            "at {} ms: {}",
            self.start.elapsed().as_millis(),
            line.into()
        );
        // Live, for a long run's watcher; the report keeps them all.
        eprintln!("nemesis {line}");
        self.lines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(line);
    }
}

/// Runs the harness. Call on a thread of its own: it moves that thread
/// into the run's private namespaces.
pub fn run(options: &RunOptions) -> Result<RunReport, String> {
    Network::isolate()?;
    let network = Network::new(&["mgmd", "n2", "n3", "n4", "n5", "c1", "c2"])?;
    let host = |name: &str| network.host(name).expect("made above");
    let data_hosts = [host("n2"), host("n3"), host("n4"), host("n5")];
    // The long schedule slows links: a proxy in front of each data node,
    // in the path of the others' connections from their first.
    let mut proxies = BTreeMap::new();
    if options.schedule.kinds().contains(&Kind::SlowLink) {
        for (index, &data_host) in data_hosts.iter().enumerate() {
            let others: Vec<&Host> = data_hosts
                .iter()
                .copied()
                .filter(|other| *other != data_host)
                .collect();
            let proxy = crate::proxy::Proxy::start(
                &network,
                data_host,
                crate::cluster::DATA_PORT,
                PROXY_PORT,
                &others,
            )?;
            proxies.insert(index as u16 + 2, proxy);
        }
    }
    let cluster = HostedCluster::start(
        &network,
        &options.tessera,
        &options.dir,
        host("mgmd"),
        &data_hosts,
        2,
    )?;
    let mut stage = Stage {
        network: &network,
        proxies,
        registers: options.workloads.contains(&Workload::Register),
        cluster,
        observer: host("c1"),
        mgmd_host: host("mgmd"),
        clients: vec![host("c1"), host("c2")],
    };
    stage
        .cluster
        .wait_started(stage.observer, Duration::from_secs(120))?;
    let mgmd = stage.cluster.mgmd_addr();
    stage.as_client(|cluster| {
        options
            .workloads
            .iter()
            .try_for_each(|workload| workload.set_up(cluster))
    })?;

    let journal = Journal {
        start: Instant::now(),
        lines: Mutex::new(Vec::new()),
    };
    let gate = Gate::default();
    let mut healed = true;
    let mut windows = Vec::new();
    let mut epochs = Vec::new();
    let histories: Vec<(Workload, Vec<Op>)> = std::thread::scope(|scope| {
        let mut clients = Vec::new();
        for &workload in &options.workloads {
            for slot in 0..options.clients {
                let host = stage.clients[slot as usize % stage.clients.len()];
                let (network, mgmd, gate, journal) = (&network, &mgmd, &gate, &journal);
                let (clients_count, seed) = (options.clients, options.seed);
                clients.push(scope.spawn(move || {
                    let ops = workload::run_client(
                        network,
                        host,
                        mgmd,
                        journal.start,
                        workload,
                        slot,
                        clients_count,
                        seed,
                        gate,
                    );
                    (workload, ops)
                }));
            }
        }
        healed = nemesis(
            &mut stage,
            options,
            &journal,
            &gate,
            &mut windows,
            &mut epochs,
        );
        // Healed or not: lift every fault and give the cluster its time.
        let _ = stage.network.heal();
        let _ = stage.cluster.start_mgmd();
        journal.log("the end: every fault lifted; waiting for every data node to be started");
        match stage.cluster.wait_started(stage.observer, HEAL_TIMEOUT) {
            Ok(()) => journal.log("every data node started"),
            Err(error) => {
                healed = false;
                journal.log(format!("NOT HEALED: {error}"));
                keep_show(&stage, &options.dir, &journal);
            }
        }
        // A little more load on the healed cluster.
        std::thread::sleep(Duration::from_secs(2));
        gate.stop();
        clients
            .into_iter()
            .filter_map(|client| client.join().ok())
            .collect()
    });
    let duration = journal.now();
    let mut by_workload: BTreeMap<Workload, Vec<Op>> = BTreeMap::new();
    for (workload, ops) in histories {
        by_workload.entry(workload).or_default().extend(ops);
    }
    let mut workloads = Vec::new();
    for &workload in &options.workloads {
        let mut ops = by_workload.remove(&workload).unwrap_or_default();
        ops.sort_by_key(|op| op.time);
        if matches!(workload, Workload::Set | Workload::Durable) {
            ops.extend(final_read(&stage, workload, &ops, &journal));
        }
        // Kept before it is checked: a history is what a failed or
        // interrupted check is read against.
        crate::report::save_history(&options.dir, workload, &ops)?;
        let verdict = check(workload, &ops, &epochs)?;
        let count = |op_type| {
            ops.iter()
                .filter(|op| op.op_type == op_type && op.process < HARNESS_PROCESS)
                .count()
        };
        workloads.push(WorkloadReport {
            workload,
            verdict,
            ok: count(OpType::Ok),
            fail: count(OpType::Fail),
            info: count(OpType::Info),
            history: ops,
        });
    }
    let replicas = compare_replicas(&stage);
    journal.log(format!("{replicas}"));
    let nemesis = journal
        .lines
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Ok(RunReport {
        options: options.clone(),
        workloads,
        replicas,
        windows,
        epochs,
        nemesis,
        healed,
        duration,
    })
}

/// The nemesis: faults drawn from the schedule, one at a time, each
/// after the cluster healed from the last and a gap. False if the
/// cluster did not heal.
fn nemesis(
    stage: &mut Stage<'_>,
    options: &RunOptions,
    journal: &Journal,
    gate: &Gate,
    windows: &mut Vec<Window>,
    epochs: &mut Vec<Epoch>,
) -> bool {
    let mut random = stdx::mix::XorShift::new(options.seed);
    // Kinds are dealt from a shuffled deck: every kind of the schedule
    // once in each round, so even a short run has each.
    let mut deck: Vec<Kind> = Vec::new();
    loop {
        std::thread::sleep(Duration::from_millis(options.schedule.gap_ms(&mut random)));
        if journal.start.elapsed() >= options.time {
            return true;
        }
        let nodes = match stage.cluster.data_nodes(stage.observer) {
            Ok(nodes) if !nodes.is_empty() => nodes,
            other => {
                journal.log(format!("cannot see the data nodes: {other:?}"));
                return false;
            }
        };
        if deck.is_empty() {
            deck = options.schedule.kinds().to_vec();
            for index in (1..deck.len()).rev() {
                deck.swap(index, random.below(index as u64 + 1) as usize);
            }
        }
        let kind = deck.pop().expect("dealt above");
        let fault = Fault::draw(kind, &mut random, &nodes);
        journal.log(format!("start {}: {fault}", kind.name()));
        let start = journal.now();
        if let Err(error) = apply(stage, &fault, &nodes, journal, gate, epochs) {
            journal.log(format!("{} could not be applied: {error}", kind.name()));
        }
        let end = journal.now();
        journal.log(format!("end {}", kind.name()));
        settle(stage, &fault, &nodes);
        let healed = stage
            .cluster
            .wait_started(stage.observer, HEAL_TIMEOUT)
            .map(|()| journal.now());
        match &healed {
            Ok(_) => journal.log("healed: every data node started"),
            Err(error) => {
                journal.log(format!("NOT HEALED: {error}"));
                keep_show(stage, &options.dir, journal);
            }
        }
        windows.push(Window {
            fault,
            start,
            end,
            healed: healed.as_ref().ok().copied(),
        });
        if healed.is_err() {
            return false;
        }
    }
}

/// Waits until the cluster has seen the fault, so that "every data
/// node started" afterwards means healed from it, not not noticed yet:
/// a killed node's process replaced (its angel started it again), and
/// after any fault twice the detection time for the cluster to act on
/// what it did.
fn settle(stage: &Stage<'_>, fault: &Fault, before: &[crate::cluster::NodeView]) {
    let killed: Vec<(u16, Option<u32>)> = match fault {
        Fault::Kill { node } => before
            .iter()
            .filter(|view| view.id == *node)
            .map(|view| (view.id, view.pid))
            .collect(),
        Fault::ClusterKill => before.iter().map(|view| (view.id, view.pid)).collect(),
        _ => Vec::new(),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !killed.is_empty() && Instant::now() < deadline {
        let replaced = stage.cluster.data_nodes(stage.observer).is_ok_and(|now| {
            killed.iter().all(|(id, pid)| {
                now.iter()
                    .any(|view| view.id == *id && (view.pid != *pid || view.state != "started"))
            })
        });
        if replaced {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(2));
}

/// Keeps mgmd's `show` (every node's state, start phase and copy
/// progress) in the report as `not-healed-<ms>.json`: what a run that
/// did not heal was waiting for.
fn keep_show(stage: &Stage<'_>, dir: &std::path::Path, journal: &Journal) {
    let name = format!("not-healed-{}.json", journal.start.elapsed().as_millis());
    match stage.cluster.show(stage.observer) {
        Ok(show) => {
            let _ = std::fs::write(dir.join(&name), show.to_string() + "\n");
            journal.log(format!("mgmd's show kept in {name}"));
        }
        Err(error) => journal.log(format!("mgmd's show could not be read: {error}")),
    }
}

/// Applies one fault and lifts it (the healing is the caller's wait).
fn apply(
    stage: &mut Stage<'_>,
    fault: &Fault,
    nodes: &[crate::cluster::NodeView],
    journal: &Journal,
    gate: &Gate,
    epochs: &mut Vec<Epoch>,
) -> Result<(), String> {
    let pid_of = |node: u16| {
        nodes
            .iter()
            .find(|view| view.id == node)
            .and_then(|view| view.pid)
            .ok_or_else(|| format!("data node {node} has no process now"))
    };
    match fault {
        Fault::Kill { node } => send_signal(pid_of(*node)?, libc::SIGKILL),
        Fault::Pause { node, millis } => {
            let pid = pid_of(*node)?;
            send_signal(pid, libc::SIGSTOP)?;
            std::thread::sleep(Duration::from_millis(*millis));
            send_signal(pid, libc::SIGCONT)
        }
        Fault::Partition { shape, millis } => {
            let ids: Vec<u16> = nodes.iter().map(|view| view.id).collect();
            let node_host = |id: u16| {
                stage
                    .cluster
                    .host_of(id)
                    .expect("every drawn node is the cluster's")
            };
            let result = (|| {
                if let crate::nemesis::Shape::Loss { node, percent } = shape {
                    for &other in ids.iter().filter(|&&other| other != *node) {
                        stage
                            .network
                            .lose(node_host(other), node_host(*node), *percent)?;
                    }
                }
                for (from, to) in shape.cuts(&node_host, stage.mgmd_host, &stage.clients, &ids) {
                    stage.network.cut(from, to)?;
                }
                std::thread::sleep(Duration::from_millis(*millis));
                Ok(())
            })();
            stage.network.heal()?;
            result
        }
        Fault::KillMgmd { millis } => {
            stage.cluster.kill_mgmd();
            std::thread::sleep(Duration::from_millis(*millis));
            stage.cluster.start_mgmd()
        }
        Fault::SlowLink { node, link, millis } => {
            let proxy = stage
                .proxies
                .get(node)
                .ok_or_else(|| format!("data node {node} has no proxy"))?;
            proxy.set(*link);
            std::thread::sleep(Duration::from_millis(*millis));
            proxy.set(crate::proxy::Link::default());
            Ok(())
        }
        Fault::RollingRestart => stage.cluster.mgm(stage.observer, "all restart").map(|_| ()),
        Fault::ClusterKill => {
            for view in nodes {
                if let Some(pid) = view.pid {
                    let _ = send_signal(pid, libc::SIGKILL);
                }
            }
            // The clients wait, between two operations, until the
            // restored state is read: a whole-cluster restart keeps the
            // commits up to the GCI it restores, and the registers
            // start again from what it restored.
            if !gate.hold(Duration::from_secs(120)) {
                journal.log("the clients did not stop for the restart in 120 s");
            }
            let restored = (|| {
                stage.cluster.wait_started(stage.observer, HEAL_TIMEOUT)?;
                let restored_gci = stage
                    .cluster
                    .restored_gci(stage.observer)
                    .ok_or("mgmd shows no restored GCI")?;
                let registers = if stage.registers {
                    Some(
                        stage
                            .as_client(|cluster| retry(|| workload::register::read_all(cluster)))?,
                    )
                } else {
                    None
                };
                Ok::<_, String>((restored_gci, registers))
            })();
            let result = restored.map(|(restored_gci, registers)| {
                journal.log(format!(
                    "the cluster restarted from GCI {restored_gci}; clients go on"
                ));
                epochs.push(Epoch {
                    at: journal.now(),
                    restored_gci,
                    registers,
                });
            });
            gate.release();
            result
        }
    }
}

/// `attempt` until it succeeds or a minute passed (the cluster just
/// healed: a temporary error or a node still settling is expected).
fn retry<T>(mut attempt: impl FnMut() -> Result<T, client::ClientError>) -> Result<T, String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match attempt() {
            Ok(value) => return Ok(value),
            Err(error) if Instant::now() >= deadline => return Err(error.to_string()),
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

/// The set workloads' final read, as the harness's operation (invoke
/// and ok, or fail with the error).
fn final_read(stage: &Stage<'_>, workload: Workload, ops: &[Op], journal: &Journal) -> Vec<Op> {
    let attempted: Vec<u64> = ops
        .iter()
        .filter(|op| op.op_type == OpType::Invoke && op.f == "add")
        .filter_map(|op| op.value.as_u64())
        .collect();
    let record = |op_type, value, error: Option<String>| Op {
        process: HARNESS_PROCESS,
        op_type,
        f: "read".into(),
        key: None,
        value,
        time: journal.now(),
        error,
        gci: None,
    };
    let invoke = record(OpType::Invoke, Json::Null, None);
    let read = stage.as_client(|cluster| {
        retry(|| workload::set::final_read(cluster, workload.name(), &attempted))
    });
    let completion = match read {
        Ok(elements) => record(OpType::Ok, Json::from(elements), None),
        Err(error) => record(OpType::Fail, Json::Null, Some(error)),
    };
    vec![invoke, completion]
}

/// Every replica of every partition compared (rows and their GCIs).
fn compare_replicas(stage: &Stage<'_>) -> Verdict {
    let result = stage.as_client(|cluster| retry(|| cluster.check_replicas()));
    match result {
        Ok(report) if report.mismatches == 0 => {
            Verdict::valid("replicas", report.rows_checked as usize)
        }
        Ok(report) => Verdict::invalid(
            "replicas",
            report.rows_checked as usize,
            format!("replicas differ: {report}"),
        ),
        Err(error) => Verdict::invalid(
            "replicas",
            0,
            format!("the replicas could not be compared: {error}"),
        ),
    }
}

/// A workload's checker on its history, with what whole-cluster
/// restarts promise (see [`adjust_for_restarts`]).
fn check(workload: Workload, ops: &[Op], epochs: &[Epoch]) -> Result<Verdict, String> {
    let mut operations = history::pair(ops)?;
    adjust_for_restarts(workload, &mut operations, epochs);
    Ok(match workload {
        Workload::Bank => crate::check::bank::check(&operations, workload::bank::TOTAL),
        Workload::Set => crate::check::set::check(&operations),
        Workload::Durable => crate::check::set::check_named(&operations, "durable"),
        Workload::Register => crate::check::register::check(&operations),
    })
}

/// What a whole-cluster restart promises, applied to a history before
/// its check (docs/design/0019-fault-harness.md, decision 6): it keeps
/// every commit of a GCI up to the one it restored, and none after.
/// - set: an add acknowledged before the restart with a later GCI may
///   be gone: it counts as unknown (one with an earlier GCI must be
///   there, as any acknowledged add).
/// - register: the restart writes each register's restored value, at
///   the instant the clients went on (they were held while it was
///   read): a register's history is linearizable across a restart when
///   it is on either side of it.
/// - durable: nothing: `Commit::Durable` promises its commits survive.
/// - bank: nothing: any restored state must be balanced.
fn adjust_for_restarts(workload: Workload, operations: &mut Vec<Operation>, epochs: &[Epoch]) {
    match workload {
        Workload::Set => {
            for operation in operations.iter_mut() {
                let lost = epochs.iter().any(|epoch| {
                    operation.completion == Completion::Ok
                        && operation.f == "add"
                        && operation.ret < epoch.at
                        && operation.gci.is_some_and(|gci| gci > epoch.restored_gci)
                });
                if lost {
                    operation.completion = Completion::Info;
                    operation.ret = u64::MAX;
                }
            }
        }
        Workload::Register => {
            for (index, epoch) in epochs.iter().enumerate() {
                for (key, value) in epoch.registers.iter().flatten().enumerate() {
                    operations.push(Operation {
                        process: HARNESS_PROCESS + (index * 1000 + key) as u64,
                        f: "write".into(),
                        key: Some(key as u64),
                        input: value.clone(),
                        output: Json::Null,
                        completion: Completion::Ok,
                        call: epoch.at,
                        ret: epoch.at,
                        gci: None,
                    });
                }
            }
        }
        Workload::Durable | Workload::Bank => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::parse;

    fn epoch(at: u64, restored_gci: u64, registers: Option<Vec<Json>>) -> Epoch {
        Epoch {
            at,
            restored_gci,
            registers,
        }
    }

    #[test]
    fn a_whole_cluster_restart_may_lose_only_the_adds_of_later_gcis() {
        // Element 1 committed in GCI 5, element 2 in GCI 9; the restart
        // at 100 restored GCI 7; the final read has element 1 only.
        let history = |read: &str| {
            parse(&format!(
                r#"
{{"process":0,"type":"invoke","f":"add","value":1,"time":1}}
{{"process":0,"type":"ok","f":"add","value":1,"time":2,"gci":5}}
{{"process":0,"type":"invoke","f":"add","value":2,"time":3}}
{{"process":0,"type":"ok","f":"add","value":2,"time":4,"gci":9}}
{{"process":9,"type":"invoke","f":"read","value":null,"time":200}}
{{"process":9,"type":"ok","f":"read","value":{read},"time":201}}
"#
            ))
            .unwrap()
        };
        let epochs = [epoch(100, 7, None)];
        assert!(
            check(Workload::Set, &history("[1]"), &epochs)
                .unwrap()
                .valid
        );
        // Element 1's GCI was restored: losing it is an anomaly.
        let lost = check(Workload::Set, &history("[2]"), &epochs).unwrap();
        assert!(!lost.valid, "{lost}");
        // Without the restart, losing element 2 is one too.
        assert!(!check(Workload::Set, &history("[1]"), &[]).unwrap().valid);
        // The durable workload's adds are promised to survive any restart.
        let durable = check(Workload::Durable, &history("[1]"), &epochs).unwrap();
        assert!(!durable.valid, "{durable}");
    }

    #[test]
    fn registers_start_again_from_what_the_restart_restored() {
        // A write of 4 acknowledged, lost by the restart at 100 (the
        // register read 3 then), and read after it.
        let history = |after: i64| {
            parse(&format!(
                r#"
{{"process":0,"type":"invoke","f":"write","key":0,"value":3,"time":1}}
{{"process":0,"type":"ok","f":"write","key":0,"value":3,"time":2,"gci":5}}
{{"process":0,"type":"invoke","f":"write","key":0,"value":4,"time":3}}
{{"process":0,"type":"ok","f":"write","key":0,"value":4,"time":4,"gci":9}}
{{"process":1,"type":"invoke","f":"read","key":0,"value":null,"time":5}}
{{"process":1,"type":"ok","f":"read","key":0,"value":4,"time":6}}
{{"process":1,"type":"invoke","f":"read","key":0,"value":null,"time":200}}
{{"process":1,"type":"ok","f":"read","key":0,"value":{after},"time":201}}
"#
            ))
            .unwrap()
        };
        let epochs = [epoch(100, 7, Some(vec![Json::from(3)]))];
        assert!(
            check(Workload::Register, &history(3), &epochs)
                .unwrap()
                .valid
        );
        assert!(
            !check(Workload::Register, &history(4), &epochs)
                .unwrap()
                .valid
        );
        assert!(!check(Workload::Register, &history(3), &[]).unwrap().valid);
    }
}
