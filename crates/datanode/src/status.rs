//! What the data node tells the outside: its state, latest GCI, schema
//! version (reported by blocks through `Context::report`) and per-thread
//! counters, as the JSON pushed to mgmd (`tessera mgm -e show`, `all report
//! threads`).

use kernel::block_thread::ReportSink;
use kernel::stats::{ThreadRole, ThreadStats};
use kernel::waker::Waker;
use kernel::Report;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// One thread, as reports show it.
pub struct ThreadInfo {
    /// Name ("ldm0", "tc0", "main", "recv", "send", "io").
    pub name: String,
    /// Role.
    pub role: ThreadRole,
    /// Counters.
    pub stats: Arc<ThreadStats>,
    /// Its waker (counts wake-ups delivered to it).
    pub waker: Arc<Waker>,
    /// For ldm threads: partitions owned (of default-partitioned tables).
    pub partitions: Vec<u32>,
}

/// The node's published state.
pub struct NodeStatus {
    /// Start phases are done.
    pub started: AtomicBool,
    /// Latest GCI reported by dih.
    pub latest_gci: AtomicU64,
    /// Latest GCI recorded complete (durable) in the system files.
    pub complete_gci: AtomicU64,
    /// The GCI this node restored at its start (0: initial start).
    pub restored_gci: AtomicU64,
    /// Schema version reported by dict.
    pub schema_version: AtomicU32,
    /// Every thread.
    pub threads: Vec<ThreadInfo>,
    /// Process id serving data.
    pub pid: u32,
}

impl ReportSink for NodeStatus {
    fn report(&self, report: Report) {
        match report {
            Report::NodeStarted => {
                if !self.started.swap(true, Ordering::SeqCst) {
                    eprintln!("tessera node: started, serving");
                }
            }
            Report::LatestGci(gci) => self.latest_gci.store(gci.0, Ordering::Relaxed),
            Report::SchemaVersion(version) => self.schema_version.store(version, Ordering::Relaxed),
            Report::CompleteGci(gci) => self.complete_gci.store(gci.0, Ordering::Relaxed),
            Report::RestoredGci(gci) => self.restored_gci.store(gci.0, Ordering::Relaxed),
            Report::WaitingForNodes(missing) => {
                let nodes: Vec<String> = (0..128u32)
                    .filter(|id| missing & (1u128 << id) != 0)
                    .map(|id| id.to_string())
                    .collect();
                eprintln!(
                    "tessera node: waiting for data node(s) {} to connect: every data node \
                     takes part in a start (a restart needs each node's disk); start them",
                    nodes.join(", ")
                );
            }
            Report::Phase {
                name,
                elapsed_ms,
                count,
                unit,
            } => eprintln!("tessera node: {name}: {elapsed_ms} ms, {count} {unit}"),
        }
    }
}

impl NodeStatus {
    /// The status object pushed to mgmd.
    pub fn to_json(&self) -> Value {
        let threads: Vec<Value> = self
            .threads
            .iter()
            .map(|thread| {
                let stats = &thread.stats;
                let mut object = json!({
                    "name": thread.name,
                    "role": thread.role.name(),
                    "signals": ThreadStats::get(&stats.signals),
                    "sleeps": ThreadStats::get(&stats.sleeps),
                    "wakeups": thread.waker.wakeups(),
                    "allocations": ThreadStats::get(&stats.allocations),
                    "frames": ThreadStats::get(&stats.frames),
                    "bytes": ThreadStats::get(&stats.bytes),
                    "syscalls": ThreadStats::get(&stats.syscalls),
                });
                if thread.role == ThreadRole::Ldm {
                    object["partitions"] = json!(thread.partitions);
                }
                object
            })
            .collect();
        json!({
            "state": if self.started.load(Ordering::Relaxed) { "started" } else { "starting" },
            "latest_gci": self.latest_gci.load(Ordering::Relaxed),
            "latest_complete_gci": self.complete_gci.load(Ordering::Relaxed),
            "restored_gci": self.restored_gci.load(Ordering::Relaxed),
            "schema_version": self.schema_version.load(Ordering::Relaxed),
            "pid": self.pid,
            "threads": threads,
        })
    }
}
