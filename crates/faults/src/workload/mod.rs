//! Workloads: clients on client hosts running operations through the
//! native client against a hosted cluster, each recording its history
//! (`history::Op`): `invoke` before it sends, then `ok`, `fail` (the
//! transaction did not commit: the data node refused it, or it failed
//! before its commit was sent) or `info` (a commit whose answer was
//! lost or came too late: `ClientError::is_outcome_unknown`). After an
//! `info` the client goes on as a new process, as in Jepsen: the old
//! one may still be "running" its operation.
//!
//! - `register`: per key, reads, writes and compare-and-sets.
//! - `bank`: transfers between accounts and reads of every balance.
//! - `set` and `durable`: unique inserts, read back at the end; the
//!   durable workload commits with `Commit::Durable`.
//!
//! A [`Gate`] lets the runner hold every client between two operations
//! (across a whole-cluster restart, so the restored state can be read
//! with no client writing) and stop them.

pub mod bank;
pub mod register;
pub mod set;

use crate::history::{Op, OpType};
use crate::hosts::{Host, Network};
use client::{ClientError, Cluster, ConnectOptions, Outcome, TableDef};
use serde_json::Value as Json;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The workloads a run can choose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Workload {
    Bank,
    Set,
    Register,
    Durable,
}

impl Workload {
    pub const ALL: [Workload; 4] = [
        Workload::Bank,
        Workload::Set,
        Workload::Register,
        Workload::Durable,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Bank => "bank",
            Workload::Set => "set",
            Workload::Register => "register",
            Workload::Durable => "durable",
        }
    }

    /// A comma-separated list of names ("bank,register").
    pub fn parse_list(text: &str) -> Result<Vec<Workload>, String> {
        let mut chosen = Vec::new();
        for name in text
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
        {
            let workload = Workload::ALL
                .into_iter()
                .find(|workload| workload.name() == name)
                .ok_or_else(|| {
                    format!("no workload {name:?}: choose from bank, set, register, durable")
                })?;
            if !chosen.contains(&workload) {
                chosen.push(workload);
            }
        }
        if chosen.is_empty() {
            return Err("no workload chosen".into());
        }
        Ok(chosen)
    }

    /// Its table.
    pub fn table(self) -> TableDef {
        match self {
            Workload::Bank => bank::table(),
            Workload::Set => set::table("set"),
            Workload::Register => register::table(),
            Workload::Durable => set::table("durable"),
        }
    }

    /// Creates its table (and the bank's accounts), retrying temporary
    /// errors for a while.
    pub fn set_up(self, cluster: &Cluster) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let retry = |what: &str, attempt: &mut dyn FnMut() -> Result<(), ClientError>| loop {
            match attempt() {
                Ok(()) => return Ok(()),
                Err(error) if error.is_temporary() && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(error) => return Err(format!("{what} of {}: {error}", self.name())),
            }
        };
        retry(
            "creating the table",
            &mut || match cluster.create_table(&self.table()) {
                Ok(_) => Ok(()),
                Err(error) if error.code() == Some(client::ErrorCode::TableExists) => Ok(()),
                Err(error) => Err(error),
            },
        )?;
        if self == Workload::Bank {
            retry("the accounts", &mut || bank::open_accounts(cluster))?;
        }
        Ok(())
    }

    /// One operation by `client`, recorded.
    fn step(self, client: &mut Client<'_>) {
        match self {
            Workload::Bank => bank::step(client),
            Workload::Set => set::step(client, client::Commit::Yes),
            Workload::Register => register::step(client),
            Workload::Durable => set::step(client, client::Commit::Durable),
        }
    }
}

/// Holds clients between operations, and stops them.
#[derive(Debug, Default)]
pub struct Gate {
    hold: AtomicBool,
    stop: AtomicBool,
    /// Clients running (their loops not ended).
    running: AtomicUsize,
    /// Clients waiting at the gate.
    parked: AtomicUsize,
}

impl Gate {
    /// Whether the clients are to stop.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Stops every client after its current operation.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Holds every client after its current operation; returns once all
    /// wait (or `timeout` passed: false).
    pub fn hold(&self, timeout: Duration) -> bool {
        self.hold.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + timeout;
        while self.parked.load(Ordering::SeqCst) < self.running.load(Ordering::SeqCst) {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    /// Lets held clients go on.
    pub fn release(&self) {
        self.hold.store(false, Ordering::SeqCst);
    }

    /// Waits here while the gate holds (a client between operations).
    fn pass(&self) {
        if !self.hold.load(Ordering::SeqCst) {
            return;
        }
        self.parked.fetch_add(1, Ordering::SeqCst);
        while self.hold.load(Ordering::SeqCst) && !self.stopped() {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.parked.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How long a client waits for an answer before the outcome is unknown
/// (`info`): long enough for a failover (about a second), short enough
/// that a paused node does not stall a client for the run.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// Connects from the calling thread (on its host), retrying for a
/// while: a nemesis may be at work.
pub fn connect(mgmd: &str, gate: &Gate) -> Option<Cluster> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !gate.stopped() && Instant::now() < deadline {
        let options = ConnectOptions {
            reply_timeout: REPLY_TIMEOUT,
            ..ConnectOptions::default()
        };
        if let Ok(cluster) = Cluster::connect_with(mgmd, options) {
            return Some(cluster);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    None
}

/// Runs `work` on a thread that has entered `host` (as a program on
/// that host would), returning its result.
pub fn on_host<T: Send>(
    network: &Network,
    host: &Host,
    work: impl FnOnce() -> Result<T, String> + Send,
) -> Result<T, String> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                network.enter(host)?;
                work()
            })
            .join()
            .map_err(|_| format!("a thread on {} panicked", host.name))?
    })
}

/// One client: its connection, its random choices and its history.
pub struct Client<'c> {
    pub cluster: &'c Cluster,
    pub random: stdx::mix::XorShift,
    /// The client's number within its workload (0..clients).
    pub slot: u64,
    /// Operations this client invoked.
    pub invoked: u64,
    start: Instant,
    process: u64,
    /// Added to the process number after an `info` (the client count).
    stride: u64,
    ops: Vec<Op>,
    /// The invocation's key, for its completion.
    key: Option<u64>,
}

impl Client<'_> {
    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Records the invocation of `f`.
    pub fn invoke(&mut self, f: &str, key: Option<u64>, value: Json) {
        let time = self.now();
        self.invoked += 1;
        self.key = key;
        self.ops.push(Op {
            process: self.process,
            op_type: OpType::Invoke,
            f: f.into(),
            key,
            value,
            time,
            error: None,
            gci: None,
        });
    }

    /// Records the completion of the invoked `f`, with the error that
    /// ended it if any. After an error the client pauses a little: a
    /// node just lost fails every request at once, and a tight loop of
    /// failures says nothing more.
    pub fn complete(
        &mut self,
        op_type: OpType,
        f: &str,
        value: Json,
        error: Option<&ClientError>,
        gci: Option<u64>,
    ) {
        let time = self.now();
        self.ops.push(Op {
            process: self.process,
            op_type,
            f: f.into(),
            key: self.key,
            value,
            time,
            error: error.map(ToString::to_string),
            gci,
        });
        if op_type == OpType::Info {
            self.process += self.stride;
        }
        if error.is_some() {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Records a write's end from its commit's result: `ok` with its
    /// GCI, `info` when the outcome is unknown (or committed with the
    /// wait for durability failed), `fail` otherwise.
    pub fn committed(
        &mut self,
        f: &str,
        value: Json,
        result: Result<Outcome, ClientError>,
        committed_anyway: bool,
    ) {
        match result {
            Ok(outcome) => {
                let gci = outcome.gci.map(|gci| gci.0);
                self.complete(OpType::Ok, f, value, None, gci);
            }
            Err(error) if error.is_outcome_unknown() || committed_anyway => {
                self.complete(OpType::Info, f, value, Some(&error), None)
            }
            Err(error) => self.complete(OpType::Fail, f, value, Some(&error), None),
        }
    }
}

/// Runs `workload`'s operations from a thread on `host` until the gate
/// stops; returns its history. `slot` numbers the client (0..`clients`)
/// within its workload.
#[allow(clippy::too_many_arguments)]
pub fn run_client(
    network: &Network,
    host: &Host,
    mgmd: &str,
    start: Instant,
    workload: Workload,
    slot: u64,
    clients: u64,
    seed: u64,
    gate: &Gate,
) -> Vec<Op> {
    gate.running.fetch_add(1, Ordering::SeqCst);
    let ops = (|| {
        if network.enter(host).is_err() {
            return Vec::new();
        }
        let Some(cluster) = connect(mgmd, gate) else {
            return Vec::new();
        };
        let mut client = Client {
            cluster: &cluster,
            random: stdx::mix::XorShift::new(
                seed ^ (slot + 1).wrapping_mul(0x9E37_79B9) ^ ((workload as u64) << 40),
            ),
            slot,
            invoked: 0,
            start,
            process: slot,
            stride: clients,
            ops: Vec::new(),
            key: None,
        };
        while !gate.stopped() {
            gate.pass();
            if gate.stopped() {
                break;
            }
            workload.step(&mut client);
        }
        client.ops
    })();
    gate.running.fetch_sub(1, Ordering::SeqCst);
    ops
}

impl Client<'_> {
    /// Table `name`, or `None` (after a short sleep) while it cannot be
    /// fetched: nothing is invoked then.
    pub fn table(&self, name: &str) -> Option<std::sync::Arc<client::Table>> {
        match self.cluster.table(name) {
            Ok(table) => Some(table),
            Err(_) => {
                std::thread::sleep(Duration::from_millis(200));
                None
            }
        }
    }
}
