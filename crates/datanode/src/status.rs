//! What the data node tells the outside: its state, latest GCI, schema
//! version and each ldm's local checkpoint counters and pacing (reported
//! by blocks through `Context::report`) and per-thread counters, as the
//! JSON pushed to mgmd (`tessera mgm -e show`, `all report threads`, `all
//! report checkpoints`).

use kernel::block_thread::ReportSink;
use kernel::stats::{ThreadRole, ThreadStats};
use kernel::waker::Waker;
use kernel::{CheckpointReport, Report};
use serde_json::{json, Value};
use std::cmp::Reverse;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use transport::ConnectionRegistry;

/// The exit code of a data node that shut down because it was declared
/// failed or its side of a split may not continue (docs/design/failures.md
/// §4): not an error of the node, and not to be restarted blindly.
pub const SHUTDOWN_EXIT_CODE: i32 = 3;

/// How long a shutting-down node waits before it exits, so that the status
/// pusher (every 250 ms) tells mgmd why.
const SHUTDOWN_LINGER: Duration = Duration::from_millis(600);

/// One thread, as reports show it.
pub struct ThreadInfo {
    /// Name ("ldm0", "tc0", "main", "recv", "send", "io"; "recv (on ldm0)"
    /// and "send (on ldm0)" with `network_on_ldm`).
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
    /// The latest checkpoint report of each ldm instance.
    pub checkpoints: CheckpointReports,
    /// The node's connections: membership cuts failed nodes through it.
    pub connections: Arc<ConnectionRegistry>,
    /// The agreed membership: id (0 while forming) and member ids.
    pub membership: Mutex<(u32, Vec<u16>)>,
    /// Why the node shut down, once it did.
    pub shutdown_reason: Mutex<Option<String>>,
    /// A node restart's phase running now (0: none reported).
    pub start_phase: std::sync::atomic::AtomicU8,
    /// A node restart's copy so far, by ldm instance.
    pub copy_progress: Mutex<Vec<Option<CopyProgress>>>,
    /// A graceful stop may go on: the tcs finished their transactions,
    /// or the limit passed.
    pub ready_to_stop: AtomicBool,
    /// When the node's threads began: the log gives each phase of a node
    /// restart, and the start's end, as seconds since.
    pub began: std::time::Instant,
    /// When the log last told the copy's progress.
    pub copy_logged_at: Mutex<Option<std::time::Instant>>,
}

/// One ldm instance's copy of a node restart so far.
#[derive(Clone, Copy, Debug, Default)]
pub struct CopyProgress {
    /// Partitions copied.
    pub partitions_copied: u32,
    /// Partitions it holds.
    pub partitions: u32,
    /// Rows applied.
    pub rows: u64,
    /// Bytes of rows applied.
    pub bytes: u64,
    /// Since its copy began.
    pub elapsed_ms: u64,
}

impl ReportSink for NodeStatus {
    /// A storage fault stops the node. Before it started, the fault is in
    /// its own files, read to restore them: starting it again the same
    /// way would only fail again, so it exits with
    /// [`crate::DAMAGED_FILES_EXIT_CODE`] (its angel does not restart it)
    /// and says what to do.
    fn fatal(&self, node: signal::NodeId, message: &str) -> ! {
        eprintln!("tessera node {node}: fatal: {message}");
        if self.started.load(Ordering::SeqCst) {
            std::process::exit(1);
        }
        eprintln!(
            "tessera node {node}: its own files cannot be restored. If another node of its node \
             group runs, start this one with --initial: its files are deleted and it copies \
             every row from the live replicas (a node restart). With its whole node group down, \
             --initial would lose that group's rows: repair or restore the files instead"
        );
        std::process::exit(crate::DAMAGED_FILES_EXIT_CODE);
    }

    fn report(&self, report: Report) {
        match report {
            Report::NodeStarted => {
                if !self.started.swap(true, Ordering::SeqCst) {
                    eprintln!(
                        "tessera node: started, serving (at {:.2} s)",
                        self.began.elapsed().as_secs_f64()
                    );
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
            Report::Log(line) => eprintln!("tessera node: {line}"),
            Report::Checkpoints(report) => self.checkpoints.record(report),
            Report::CutLinks(nodes) => {
                for node in nodes.iter() {
                    self.connections.cut(node);
                }
            }
            Report::Membership {
                membership_id,
                live,
            } => {
                let members = live.iter().map(|node| node.0).collect();
                *self
                    .membership
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = (membership_id, members);
            }
            Report::Shutdown(reason) => self.shut_down(reason),
            Report::ReadyToStop { drained } => {
                if drained {
                    eprintln!("tessera node: stopping: every transaction of this node finished");
                }
                self.ready_to_stop.store(true, Ordering::SeqCst);
            }
            Report::StartPhase {
                phase,
                node_restart,
            } => {
                self.start_phase.store(phase, Ordering::Relaxed);
                if node_restart {
                    eprintln!(
                        "tessera node: node restart: phase {} (at {:.2} s)",
                        signal::phases::name(phase),
                        self.began.elapsed().as_secs_f64()
                    );
                }
            }
            Report::CopyProgress {
                instance,
                partitions_copied,
                partitions,
                rows,
                bytes,
                elapsed_ms,
            } => {
                let mut progress = self
                    .copy_progress
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                let index = usize::from(instance);
                if index >= progress.len() {
                    progress.resize(index + 1, None);
                }
                progress[index] = Some(CopyProgress {
                    partitions_copied,
                    partitions,
                    rows,
                    bytes,
                    elapsed_ms,
                });
                drop(progress);
                self.log_copy_progress();
            }
        }
    }
}

/// How often the log tells a node restart's copy so far.
const COPY_LOG_INTERVAL: Duration = Duration::from_secs(2);

impl NodeStatus {
    /// Tells the copy so far in the log, every [`COPY_LOG_INTERVAL`] at
    /// most (the ldms report every half second).
    fn log_copy_progress(&self) {
        let now = std::time::Instant::now();
        {
            let mut logged = self
                .copy_logged_at
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if logged.is_some_and(|at| now.duration_since(at) < COPY_LOG_INTERVAL) {
                return;
            }
            *logged = Some(now);
        }
        let progress = self.copy_progress_json();
        let number = |name: &str| progress[name].as_f64().unwrap_or(0.0);
        eprintln!(
            "tessera node: node restart: copy: {}/{} partitions, {} rows, {:.1} MB copied, {:.0} \
             rows/s, {:.1} MB/s, ~{:.0} s left",
            progress["partitions_copied"],
            progress["partitions"],
            progress["rows"],
            number("bytes") / 1e6,
            number("rows_per_second"),
            number("bytes_per_second") / 1e6,
            number("estimated_seconds_left"),
        );
    }

    /// A node restart's copy so far, summed over the ldm instances: rows
    /// and bytes copied, per second, partitions copied of all, and the
    /// time left at that pace by partitions (`null` before any copy).
    fn copy_progress_json(&self) -> Value {
        let progress = self
            .copy_progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let reports: Vec<_> = progress.iter().flatten().collect();
        if reports.is_empty() {
            return Value::Null;
        }
        let mut sum = CopyProgress::default();
        for report in &reports {
            sum.partitions_copied += report.partitions_copied;
            sum.partitions += report.partitions;
            sum.rows += report.rows;
            sum.bytes += report.bytes;
            sum.elapsed_ms = sum.elapsed_ms.max(report.elapsed_ms);
        }
        let (copied, partitions, rows, bytes) =
            (sum.partitions_copied, sum.partitions, sum.rows, sum.bytes);
        let elapsed_ms = sum.elapsed_ms;
        let seconds = (elapsed_ms as f64 / 1000.0).max(0.001);
        let left = if copied == 0 || copied >= partitions {
            0.0
        } else {
            seconds * f64::from(partitions - copied) / f64::from(copied)
        };
        json!({
            "partitions_copied": copied,
            "partitions": partitions,
            "rows": rows,
            "bytes": bytes,
            "rows_per_second": (rows as f64 / seconds).round(),
            "bytes_per_second": (bytes as f64 / seconds).round(),
            "estimated_seconds_left": (left * 10.0).round() / 10.0,
        })
    }

    /// Stops serving now (every connection closed, none admitted), lets
    /// the status pusher tell mgmd why, and exits with
    /// [`SHUTDOWN_EXIT_CODE`]. Runs on the block thread that reported it,
    /// which does nothing else meanwhile.
    fn shut_down(&self, reason: String) -> ! {
        eprintln!("tessera node: shutting down: {reason}");
        self.connections.close_all();
        *self
            .shutdown_reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(reason);
        std::thread::sleep(SHUTDOWN_LINGER);
        std::process::exit(SHUTDOWN_EXIT_CODE);
    }

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
        let shutdown_reason = self
            .shutdown_reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let state = match (&shutdown_reason, self.started.load(Ordering::Relaxed)) {
            (Some(_), _) => "shut down",
            (None, true) => "started",
            (None, false) => "starting",
        };
        let (membership_id, members) = self
            .membership
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let start_phase = match self.start_phase.load(Ordering::Relaxed) {
            _ if self.started.load(Ordering::Relaxed) => Value::Null,
            0 => Value::Null,
            phase => json!(signal::phases::name(phase)),
        };
        json!({
            "state": state,
            "start_phase": start_phase,
            "copy_progress": self.copy_progress_json(),
            "shutdown_reason": shutdown_reason,
            "membership_id": membership_id,
            "members": members,
            "latest_gci": self.latest_gci.load(Ordering::Relaxed),
            "latest_complete_gci": self.complete_gci.load(Ordering::Relaxed),
            "restored_gci": self.restored_gci.load(Ordering::Relaxed),
            "schema_version": self.schema_version.load(Ordering::Relaxed),
            "pid": self.pid,
            // Whether an angel would start it again (mgm's restarts need one).
            "angel": std::env::var_os("TESSERA_ANGEL_CHILD").is_some(),
            "threads": threads,
            "checkpoints": self.checkpoints.to_json(),
        })
    }
}

/// What the node says of an ldm's pacing before that ldm reported.
const NOT_STARTED: &str = "not started";

/// The latest `CheckpointReport` of each ldm instance, by instance. The ldm
/// threads write it (after each local checkpoint and about once a second),
/// the status pusher reads it: a mutex held for a copy is cheap at that
/// rate.
pub struct CheckpointReports {
    latest: Mutex<Vec<Option<CheckpointReport>>>,
}

impl CheckpointReports {
    /// Room for `ldm_instances` reports, made now so that recording one on
    /// an ldm thread never allocates.
    pub fn new(ldm_instances: usize) -> CheckpointReports {
        CheckpointReports {
            latest: Mutex::new(vec![None; ldm_instances]),
        }
    }

    /// Keeps `report` as its instance's latest (growing the table if the
    /// instance is beyond the count given to `new`).
    pub fn record(&self, report: CheckpointReport) {
        let mut latest = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        let index = report.instance as usize;
        if index >= latest.len() {
            latest.resize(index + 1, None);
        }
        latest[index] = Some(report);
    }

    /// The `"checkpoints"` object of the status: the counters summed over
    /// the ldm instances, and `"pacing"`: the speeds summed, the fullest
    /// redo and the busiest thread, the reason of the ldm with the fullest
    /// redo (the one most likely to hold the node back), and each ldm's
    /// own pacing under `"ldms"`.
    pub fn to_json(&self) -> Value {
        // Copied out so the ldm threads wait for a copy, not for the JSON.
        let latest: Vec<Option<CheckpointReport>> = self
            .latest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let reported = || latest.iter().flatten();
        let sum = |field: fn(&CheckpointReport) -> u64| {
            reported().fold(0u64, |total, report| total.saturating_add(field(report)))
        };
        let max = |field: fn(&CheckpointReport) -> u32| reported().map(field).max().unwrap_or(0);
        // The fullest redo; of equally full ones, the lowest instance.
        let reason = reported()
            .min_by_key(|report| (Reverse(report.pacing.redo_fill_percent), report.instance))
            .map_or(NOT_STARTED, |report| report.pacing.reason);
        let ldms: Vec<Value> = latest
            .iter()
            .enumerate()
            .map(|(index, report)| {
                let pacing = report.map(|report| report.pacing).unwrap_or_default();
                json!({
                    "instance": index,
                    "speed_bytes_per_second": pacing.speed_bytes_per_second,
                    "keep_up_bytes_per_second": pacing.keep_up_bytes_per_second,
                    "change_bytes_per_second": pacing.change_bytes_per_second,
                    "redo_fill_percent": pacing.redo_fill_percent,
                    "busy_percent": pacing.busy_percent,
                    "reason": if report.is_some() { pacing.reason } else { NOT_STARTED },
                })
            })
            .collect();
        json!({
            "lcp_count": sum(|report| report.lcp_count),
            "lcp_bytes_written": sum(|report| report.lcp_bytes_written),
            "changed_row_bytes": sum(|report| report.changed_row_bytes),
            "checkpoint_disk_bytes": sum(|report| report.checkpoint_disk_bytes),
            "live_data_bytes": sum(|report| report.live_data_bytes),
            "pacing": {
                "speed_bytes_per_second": sum(|report| report.pacing.speed_bytes_per_second),
                "keep_up_bytes_per_second": sum(|report| report.pacing.keep_up_bytes_per_second),
                "change_bytes_per_second": sum(|report| report.pacing.change_bytes_per_second),
                "redo_fill_percent": max(|report| report.pacing.redo_fill_percent),
                "busy_percent": max(|report| report.pacing.busy_percent),
                "reason": reason,
                "ldms": ldms,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernel::PacingReport;

    fn node_status(ldm_instances: usize) -> NodeStatus {
        NodeStatus {
            started: AtomicBool::new(false),
            latest_gci: AtomicU64::new(0),
            complete_gci: AtomicU64::new(0),
            restored_gci: AtomicU64::new(0),
            schema_version: AtomicU32::new(0),
            threads: Vec::new(),
            pid: 1,
            checkpoints: CheckpointReports::new(ldm_instances),
            connections: Arc::new(ConnectionRegistry::new()),
            membership: Mutex::new((0, Vec::new())),
            shutdown_reason: Mutex::new(None),
            start_phase: std::sync::atomic::AtomicU8::new(0),
            copy_progress: Mutex::new(Vec::new()),
            ready_to_stop: AtomicBool::new(false),
            began: std::time::Instant::now(),
            copy_logged_at: Mutex::new(None),
        }
    }

    fn not_started_ldm(instance: u32) -> Value {
        json!({"instance": instance, "speed_bytes_per_second": 0, "keep_up_bytes_per_second": 0,
               "change_bytes_per_second": 0, "redo_fill_percent": 0, "busy_percent": 0,
               "reason": "not started"})
    }

    #[test]
    fn before_any_report_the_counters_are_zero_and_pacing_not_started() {
        let status = node_status(2);
        assert_eq!(
            status.to_json()["checkpoints"],
            json!({
                "lcp_count": 0, "lcp_bytes_written": 0, "changed_row_bytes": 0,
                "checkpoint_disk_bytes": 0, "live_data_bytes": 0,
                "pacing": {
                    "speed_bytes_per_second": 0, "keep_up_bytes_per_second": 0,
                    "change_bytes_per_second": 0, "redo_fill_percent": 0, "busy_percent": 0,
                    "reason": "not started",
                    "ldms": [not_started_ldm(0), not_started_ldm(1)],
                },
            })
        );
    }

    #[test]
    fn counters_and_speeds_are_summed_fill_and_busy_are_the_maxima() {
        let status = node_status(3);
        let report =
            |instance: u32, base: u64, redo_fill_percent: u32, busy_percent: u32, reason| {
                CheckpointReport {
                    instance,
                    lcp_count: base,
                    lcp_bytes_written: base * 10,
                    changed_row_bytes: base * 100,
                    checkpoint_disk_bytes: base * 1000,
                    live_data_bytes: base * 10_000,
                    pacing: PacingReport {
                        speed_bytes_per_second: base * 2,
                        keep_up_bytes_per_second: base * 3,
                        change_bytes_per_second: base * 4,
                        redo_fill_percent,
                        busy_percent,
                        reason,
                    },
                }
            };
        status.report(Report::Checkpoints(report(0, 1, 5, 90, "busy")));
        // A later report of an instance replaces its earlier one.
        status.report(Report::Checkpoints(report(2, 7, 1, 1, "idle")));
        status.report(Report::Checkpoints(report(2, 3, 20, 10, "redo filling")));
        let checkpoints = status.to_json()["checkpoints"].clone();
        assert_eq!(checkpoints["lcp_count"], 4);
        assert_eq!(checkpoints["lcp_bytes_written"], 40);
        assert_eq!(checkpoints["changed_row_bytes"], 400);
        assert_eq!(checkpoints["checkpoint_disk_bytes"], 4000);
        assert_eq!(checkpoints["live_data_bytes"], 40_000);
        let pacing = &checkpoints["pacing"];
        assert_eq!(pacing["speed_bytes_per_second"], 8);
        assert_eq!(pacing["keep_up_bytes_per_second"], 12);
        assert_eq!(pacing["change_bytes_per_second"], 16);
        assert_eq!(pacing["redo_fill_percent"], 20);
        assert_eq!(pacing["busy_percent"], 90);
        assert_eq!(
            pacing["reason"], "redo filling",
            "the fullest redo's reason"
        );
        assert_eq!(
            pacing["ldms"],
            json!([
                {"instance": 0, "speed_bytes_per_second": 2, "keep_up_bytes_per_second": 3,
                 "change_bytes_per_second": 4, "redo_fill_percent": 5, "busy_percent": 90,
                 "reason": "busy"},
                not_started_ldm(1),
                {"instance": 2, "speed_bytes_per_second": 6, "keep_up_bytes_per_second": 9,
                 "change_bytes_per_second": 12, "redo_fill_percent": 20, "busy_percent": 10,
                 "reason": "redo filling"},
            ])
        );
    }

    #[test]
    fn equally_full_redo_takes_the_lowest_instances_reason_and_instances_beyond_the_count_grow_the_table(
    ) {
        let status = node_status(1);
        let report = |instance, reason| CheckpointReport {
            instance,
            pacing: PacingReport {
                reason,
                ..PacingReport::default()
            },
            ..CheckpointReport::default()
        };
        status.report(Report::Checkpoints(report(3, "keep up")));
        status.report(Report::Checkpoints(report(1, "idle")));
        let pacing = status.to_json()["checkpoints"]["pacing"].clone();
        assert_eq!(pacing["reason"], "idle");
        let ldms = pacing["ldms"].as_array().expect("ldms").clone();
        assert_eq!(ldms.len(), 4);
        assert_eq!(ldms[0], not_started_ldm(0));
        assert_eq!(ldms[3]["reason"], "keep up");
    }
}
