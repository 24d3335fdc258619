//! Cluster configuration: parses and validates the TOML file that describes a
//! Tessera cluster (the management server, cluster-wide settings, thread
//! counts and the data nodes). It lives in its own crate so that mgmd, data
//! nodes and tools share one meaning of the file, and so every mistake is
//! caught once, before any process starts, with the key and line to fix.
//!
//! The file format is documented by `examples/cluster.toml`.

mod error;
mod tree;

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

pub use error::ConfigError;
use tree::{Ctx, Located, Table};

/// Smallest `data_memory` accepted at all: below this the pools a data node
/// sizes from it are too small to hold even the system tables.
pub const MIN_DATA_MEMORY: u64 = 16 << 20;
/// Smallest `data_memory` share per ldm thread: each ldm thread gets its own
/// slice of the row memory, and a slice below this is useless.
pub const MIN_DATA_MEMORY_PER_LDM: u64 = 4 << 20;
/// Data and mgmd node ids are 1..=127; API nodes get 128..=255.
pub const MAX_DATA_NODE_ID: u16 = 127;
/// The values `recovery_work` accepts; the ldm's `RECOVERY_WORK_RANGE`
/// (the config crate depends on no block, so the datanode's wiring tests
/// check that the two agree).
pub const RECOVERY_WORK_RANGE: RangeInclusive<u32> = 25..=100;

/// The whole cluster configuration, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    pub mgmd: MgmdConfig,
    pub cluster: ClusterSettings,
    pub threads: ThreadCounts,
    /// In file order; that order decides node groups.
    pub data_nodes: Vec<DataNodeConfig>,
}

/// `[mgmd]`: where the management server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MgmdConfig {
    /// Default 1.
    pub node_id: u16,
    pub host: String,
    pub port: u16,
    /// Key `arbitration_rank`, 0 or 1, default 1: 1 makes mgmd the
    /// arbitrator, which lets one side of a split of exactly half of the
    /// data nodes (no node group whole on either side) continue
    /// (docs/design/failures.md §4). 0 disables arbitration: such a side
    /// shuts down, always (never two sides serving).
    pub arbitration_rank: u8,
    /// Key `data_dir`, optional: where mgmd keeps what it must remember
    /// across its own restarts (each data node's start count, its
    /// arbitration grants). Relative to the config file's directory, as
    /// data nodes' are; absent: that directory itself.
    pub data_dir: Option<PathBuf>,
}

/// `[cluster]`: settings every data node must agree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    /// Key `replicas`, 1..=4, default 1.
    pub replicas: u8,
    /// Key `data_memory`: integer bytes or "64M"/"1G"/"512K"/"1T"; default 256M.
    pub data_memory_bytes: u64,
    /// Redo log parts per data node, 1..=64; at least the ldm thread count
    /// (each ldm thread writes parts of its own). Default: 4, or the ldm
    /// thread count if larger.
    pub redo_log_parts: u32,
    /// Files in each part's ring, 2..=1024; default 16 (with 16M files: 256 MiB a part, as NDB).
    /// Updates fill a part at several MB/s; the ring must hold what is
    /// written between two restorable local checkpoints.
    pub redo_log_files: u32,
    /// Bytes of each redo file, a multiple of 4K, 64K..=64G; default 16M.
    pub redo_log_file_size: u64,
    /// Bytes of memory buffering each part's redo until written, 1M..=1G;
    /// default 4M.
    pub redo_buffer: u64,
    /// Default 250: how often each data node sends a heartbeat to every
    /// other member (docs/design/failures.md §2, design 0020).
    pub heartbeat_interval_ms: u64,
    /// Default 4, 2..=100: heartbeats a data node may miss in a row before
    /// its watcher takes it for failed (with the defaults, within a
    /// second) and the survivors agree it out of the membership.
    pub heartbeat_missed: u32,
    /// Default 3000, 100..=60000: how long the president of a side of
    /// exactly half waits for the arbitrator's answer before its side
    /// shuts down (docs/design/failures.md §4).
    pub arbitration_timeout_ms: u64,
    /// Default 100: how often the GCI epoch (low half) switches.
    pub epoch_interval_ms: u64,
    /// Default 2000: how often the global checkpoint number (high half) advances.
    pub gcp_interval_ms: u64,
    /// Default 1200.
    pub lock_wait_timeout_ms: u64,
    /// Default 60000.
    pub inactive_transaction_timeout_ms: u64,
    /// Default 10000.
    pub max_operations_per_transaction: u32,
    /// Per data node, default 65536.
    pub max_concurrent_operations: u32,
    /// Per data node, default 4096.
    pub max_concurrent_transactions: u32,
    /// Default false.
    pub diskless: bool,
    /// Default true. False runs no local checkpoints: a restart replays the
    /// whole redo log, which is never trimmed (it fills). For tests of
    /// restore from redo alone and for comparison.
    pub local_checkpoints: bool,
    /// NDB's RecoveryWork, 25..=100, default 50: how much of each local
    /// checkpoint is written in full against the rows changed since the
    /// last one. Lower writes more per checkpoint and keeps fewer bytes on
    /// disk (less to read at a restart); higher writes less and keeps more.
    pub recovery_work: u32,
    /// Key `secret_file`: the file holding the cluster secret, which mgmd
    /// and the data nodes read and API nodes never see (docs/design/
    /// 0007-groundwork.md, "Authenticated admission"). Relative paths are
    /// made relative to the config file's directory, as `data_dir`s are.
    /// Optional here, because API nodes and tools parse configs too; mgmd
    /// and data nodes refuse to start without it.
    pub secret_file: Option<PathBuf>,
}

impl ClusterSettings {
    /// Heartbeat intervals of silence after which a data node takes an
    /// API node for gone, and an API node a data node (twice the data
    /// nodes' `heartbeat_missed`: an API node's loss costs only its own
    /// transactions, and a client process may be starved of the CPU
    /// longer than a data node; docs/design/0017-api-heartbeats.md).
    pub fn api_heartbeat_missed(&self) -> u16 {
        u16::try_from(self.heartbeat_missed.saturating_mul(2)).unwrap_or(u16::MAX)
    }
}

impl Default for ClusterSettings {
    fn default() -> Self {
        ClusterSettings {
            replicas: 1,
            data_memory_bytes: 256 << 20,
            redo_log_parts: 4,
            redo_log_files: 16,
            redo_log_file_size: 16 << 20,
            redo_buffer: 4 << 20,
            heartbeat_interval_ms: 250,
            heartbeat_missed: 4,
            arbitration_timeout_ms: 3000,
            epoch_interval_ms: 100,
            gcp_interval_ms: 2000,
            lock_wait_timeout_ms: 1200,
            inactive_transaction_timeout_ms: 60_000,
            max_operations_per_transaction: 10_000,
            max_concurrent_operations: 65_536,
            max_concurrent_transactions: 4096,
            diskless: false,
            local_checkpoints: true,
            recovery_work: 50,
            secret_file: None,
        }
    }
}

/// `[threads]`: how many OS threads of each role a data node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadCounts {
    /// 1..=32.
    pub ldm: u32,
    /// 1..=32.
    pub tc: u32,
    /// 1..=8. A node runs one receive thread for now; a data node logs
    /// at start when this asks for more.
    pub recv: u32,
    /// 0..=8 (0: the sending thread sends itself). A node runs one send
    /// thread for now; a data node logs at start when this asks otherwise.
    pub send: u32,
    /// Always 1.
    pub main: u32,
    /// How long an idle thread spins before it sleeps, in microseconds.
    pub spin_us: u32,
    /// tc instance i runs on ldm thread i instead of a thread of its own
    /// (`tc` <= `ldm`): a key lookup then crosses no thread between the
    /// coordinator and the partition's owner, so there are fewer hand-offs
    /// and wake-ups, which is what costs most on a machine with few cores.
    pub tc_on_ldm: bool,
    /// The receive and send work runs on ldm thread 0, beside its blocks,
    /// instead of on threads of their own: a key lookup whose partition is
    /// on that thread then wakes one thread of the data node, not three.
    /// For machines with few cores, where wake-ups cost more than the work:
    /// on by default with 2 cores or fewer.
    pub network_on_ldm: bool,
}

impl ThreadCounts {
    /// The counts used for keys left out of `[threads]`, derived from the
    /// number of cores as RonDB does: half the cores run ldm threads. With
    /// 2 cores or fewer the network runs on ldm thread 0
    /// (`network_on_ldm`; measured in docs/benchmarks.md).
    pub fn automatic(cores: usize) -> ThreadCounts {
        let ldm = u32::try_from(cores / 2).unwrap_or(u32::MAX).clamp(2, 32);
        ThreadCounts {
            ldm,
            tc: (ldm / 2).max(1),
            recv: (ldm / 4).max(1),
            send: (ldm / 4).max(1),
            main: 1,
            spin_us: 0,
            tc_on_ldm: false,
            network_on_ldm: cores <= 2,
        }
    }
}

/// One `[[data_node]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataNodeConfig {
    pub id: u16,
    pub host: String,
    pub port: u16,
    /// Relative paths in a file read by `from_file` are made relative to the
    /// config file's directory.
    pub data_dir: PathBuf,
    /// Derived: index in file order / replicas.
    pub node_group: u32,
}

impl ClusterConfig {
    /// Reads and validates a config file; relative `data_dir`s are taken
    /// relative to the file's directory.
    pub fn from_file(path: &Path) -> Result<ClusterConfig, ConfigError> {
        let source_name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            source_name: source_name.clone(),
            line: None,
            key: String::new(),
            message: format!("cannot read the config file: {e}"),
        })?;
        let base = path.parent().unwrap_or(Path::new(""));
        parse(&text, &source_name, Some(base))
    }

    /// Validates config text; `source_name` only names it in errors.
    /// Relative `data_dir`s are left as written (relative to the process's
    /// working directory).
    pub fn from_toml_str(text: &str, source_name: &str) -> Result<ClusterConfig, ConfigError> {
        parse(text, source_name, None)
    }

    /// Like `from_toml_str`, but relative `data_dir`s are joined to
    /// `base_dir`, as `from_file` does with the file's directory. For a
    /// process that got the text from mgmd along with the file's directory.
    pub fn from_toml_str_relative_to(
        text: &str,
        source_name: &str,
        base_dir: &Path,
    ) -> Result<ClusterConfig, ConfigError> {
        parse(text, source_name, Some(base_dir))
    }

    /// Number of node groups: data nodes / replicas.
    pub fn node_groups(&self) -> u32 {
        let nodes = u32::try_from(self.data_nodes.len()).unwrap_or(u32::MAX);
        nodes / u32::from(self.cluster.replicas.max(1))
    }

    pub fn data_node(&self, id: u16) -> Option<&DataNodeConfig> {
        self.data_nodes.iter().find(|n| n.id == id)
    }
}

const ROOT_KEYS: &[&str] = &["mgmd", "cluster", "threads", "data_node"];
const MGMD_KEYS: &[&str] = &["node_id", "host", "port", "arbitration_rank", "data_dir"];
const CLUSTER_KEYS: &[&str] = &[
    "replicas",
    "data_memory",
    "redo_log_parts",
    "redo_log_files",
    "redo_log_file_size",
    "redo_buffer",
    "heartbeat_interval_ms",
    "heartbeat_missed",
    "arbitration_timeout_ms",
    "epoch_interval_ms",
    "gcp_interval_ms",
    "lock_wait_timeout_ms",
    "inactive_transaction_timeout_ms",
    "max_operations_per_transaction",
    "max_concurrent_operations",
    "max_concurrent_transactions",
    "diskless",
    "local_checkpoints",
    "recovery_work",
    "secret_file",
    // Refused with a hint: the config text is served to every client.
    "secret",
];
const THREAD_KEYS: &[&str] = &[
    "ldm",
    "tc",
    "recv",
    "send",
    "main",
    "spin_us",
    "tc_on_ldm",
    "network_on_ldm",
];
const DATA_NODE_KEYS: &[&str] = &["id", "host", "port", "data_dir"];

const U32_MAX: i64 = u32::MAX as i64;
const PORT_MAX: i64 = u16::MAX as i64;
const NODE_ID_MAX: i64 = MAX_DATA_NODE_ID as i64;

fn parse(
    text: &str,
    source_name: &str,
    base_dir: Option<&Path>,
) -> Result<ClusterConfig, ConfigError> {
    let ctx = Ctx {
        text,
        source: source_name,
    };
    let doc =
        tree::parse_document(text).map_err(|(span, message)| ctx.error_at("", span, message))?;
    let root = Table::root(&ctx, &doc, ROOT_KEYS)?;

    let mgmd_value = root
        .get("mgmd")
        .ok_or_else(|| ctx.error("mgmd", None, "missing required table [mgmd]"))?;
    let (mgmd, mgmd_lines) =
        parse_mgmd(&Table::new(&ctx, "mgmd", mgmd_value, MGMD_KEYS)?, base_dir)?;

    let (cluster, cluster_lines) = match root.get("cluster") {
        Some(v) => parse_cluster(&Table::new(&ctx, "cluster", v, CLUSTER_KEYS)?, base_dir)?,
        None => (ClusterSettings::default(), ClusterLines::default()),
    };

    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let (threads, ldm_line) = match root.get("threads") {
        Some(v) => parse_threads(&Table::new(&ctx, "threads", v, THREAD_KEYS)?, cores)?,
        None => (ThreadCounts::automatic(cores), None),
    };

    let min_memory = MIN_DATA_MEMORY.max(MIN_DATA_MEMORY_PER_LDM * u64::from(threads.ldm));
    if cluster.data_memory_bytes < min_memory {
        let line = cluster_lines.data_memory.or(ldm_line);
        return Err(ctx.error(
            "cluster.data_memory",
            line,
            format!(
                "memory too small: {} is below the minimum of {} (16 MiB, and at least 4 MiB \
                 per ldm thread; this config has {} ldm threads)",
                show_bytes(cluster.data_memory_bytes),
                show_bytes(min_memory),
                threads.ldm
            ),
        ));
    }
    let mut cluster = cluster;
    check_redo(&ctx, &mut cluster, &cluster_lines, threads.ldm, ldm_line)?;
    if cluster.epoch_interval_ms > cluster.gcp_interval_ms {
        return Err(ctx.error(
            "cluster.epoch_interval_ms",
            cluster_lines.epoch.or(cluster_lines.gcp),
            format!(
                "epoch_interval_ms ({}) must not be greater than gcp_interval_ms ({}): a global \
                 checkpoint is made of whole epochs",
                cluster.epoch_interval_ms, cluster.gcp_interval_ms
            ),
        ));
    }

    let data_nodes = parse_data_nodes(
        &root,
        &mgmd,
        mgmd_lines,
        &cluster,
        cluster_lines.replicas,
        base_dir,
    )?;

    Ok(ClusterConfig {
        mgmd,
        cluster,
        threads,
        data_nodes,
    })
}

/// Checks the redo log's shape against the ldm thread count, and gives
/// `redo_log_parts` its default (4, or one per ldm thread if more).
fn check_redo(
    ctx: &Ctx<'_>,
    cluster: &mut ClusterSettings,
    lines: &ClusterLines,
    ldm_threads: u32,
    ldm_line: Option<usize>,
) -> Result<(), ConfigError> {
    match lines.redo_log_parts {
        None => cluster.redo_log_parts = cluster.redo_log_parts.max(ldm_threads),
        Some(line) if cluster.redo_log_parts < ldm_threads => {
            return Err(ctx.error(
                "cluster.redo_log_parts",
                Some(line).or(ldm_line),
                format!(
                    "redo_log_parts ({}) is below the ldm thread count ({ldm_threads}): each \
                     ldm thread writes redo parts of its own",
                    cluster.redo_log_parts
                ),
            ));
        }
        Some(_) => {}
    }
    let size = cluster.redo_log_file_size;
    let size_line = lines.redo_log_file_size;
    if !size.is_multiple_of(4096) || !(64 << 10..=64 << 30).contains(&size) {
        return Err(ctx.error(
            "cluster.redo_log_file_size",
            size_line,
            format!(
                "redo_log_file_size of {} must be a multiple of 4K between 64K and 64G",
                show_bytes(size)
            ),
        ));
    }
    // Each file's first page is its header; the ring needs 128 redo pages.
    let ring_pages = (size / 4096 - 1) * u64::from(cluster.redo_log_files);
    if ring_pages < 128 {
        return Err(ctx.error(
            "cluster.redo_log_file_size",
            size_line.or(lines.redo_log_files),
            format!(
                "a redo part of {} files of {} holds {ring_pages} redo pages; it needs at least \
                 128 (512K)",
                cluster.redo_log_files,
                show_bytes(size)
            ),
        ));
    }
    Ok(())
}

/// Lines of mgmd keys that later cross-checks point at.
#[derive(Clone, Copy)]
struct MgmdLines {
    node_id: Option<usize>,
    port: usize,
}

fn parse_mgmd(
    t: &Table<'_>,
    base_dir: Option<&Path>,
) -> Result<(MgmdConfig, MgmdLines), ConfigError> {
    let node_id = t
        .integer::<u16>("node_id", 1, NODE_ID_MAX)
        .map_err(api_id_hint)?;
    let host = t.required_string("host")?;
    let port = t
        .integer::<u16>("port", 1, PORT_MAX)?
        .ok_or_else(|| t.missing("port"))?;
    let arbitration_rank = t.integer::<u8>("arbitration_rank", 0, 1)?;
    let data_dir = t.string("data_dir")?.map(|dir| {
        let dir = PathBuf::from(dir.value);
        match base_dir {
            Some(base) if dir.is_relative() => base.join(dir),
            _ => dir,
        }
    });
    Ok((
        MgmdConfig {
            node_id: node_id.map_or(1, |n| n.value),
            host: host.value.to_owned(),
            port: port.value,
            arbitration_rank: arbitration_rank.map_or(1, |n| n.value),
            data_dir,
        },
        MgmdLines {
            node_id: node_id.map(|n| n.line),
            port: port.line,
        },
    ))
}

/// Adds why ids stop at 127 to a node id range error.
fn api_id_hint(mut e: ConfigError) -> ConfigError {
    if e.message.starts_with("must be between") {
        e.message.push_str(" (ids 128-255 are for API nodes)");
    }
    e
}

/// Lines of cluster keys that later cross-checks point at.
#[derive(Default, Clone, Copy)]
struct ClusterLines {
    replicas: Option<usize>,
    data_memory: Option<usize>,
    epoch: Option<usize>,
    gcp: Option<usize>,
    /// Set when `redo_log_parts` was given (else it follows the ldm count).
    redo_log_parts: Option<usize>,
    redo_log_file_size: Option<usize>,
    redo_log_files: Option<usize>,
}

fn parse_cluster(
    t: &Table<'_>,
    base_dir: Option<&Path>,
) -> Result<(ClusterSettings, ClusterLines), ConfigError> {
    let d = ClusterSettings::default();
    if let Some(inline) = t.string("secret")? {
        return Err(t.ctx().error(
            "cluster.secret",
            Some(inline.line),
            "the cluster secret must not be written in the config: mgmd serves the config \
             text to every client; put it in a file and name the file with secret_file",
        ));
    }
    let secret_file = match t.string("secret_file")? {
        Some(file) if file.value.trim().is_empty() => {
            return Err(t.ctx().error(
                "cluster.secret_file",
                Some(file.line),
                "secret_file is empty: name the file holding the cluster secret",
            ))
        }
        Some(file) => {
            let path = PathBuf::from(file.value);
            Some(match base_dir {
                Some(base) if path.is_relative() => base.join(path),
                _ => path,
            })
        }
        None => None,
    };
    let mut lines = ClusterLines::default();
    let replicas = t.integer::<u8>("replicas", 1, 4)?;
    lines.replicas = replicas.map(|r| r.line);
    let data_memory = t.memory("data_memory")?;
    lines.data_memory = data_memory.map(|m| m.line);
    let epoch = t.integer::<u64>("epoch_interval_ms", 1, i64::MAX)?;
    lines.epoch = epoch.map(|e| e.line);
    let gcp = t.integer::<u64>("gcp_interval_ms", 1, i64::MAX)?;
    lines.gcp = gcp.map(|g| g.line);
    fn or<T>(v: Option<Located<T>>, default: T) -> T {
        v.map_or(default, |l| l.value)
    }
    let redo_log_parts = t.integer("redo_log_parts", 1, 64)?;
    lines.redo_log_parts = redo_log_parts.map(|p| p.line);
    let redo_log_files = t.integer("redo_log_files", 2, 1024)?;
    lines.redo_log_files = redo_log_files.map(|f| f.line);
    let redo_log_file_size = t.memory("redo_log_file_size")?;
    lines.redo_log_file_size = redo_log_file_size.map(|s| s.line);
    let redo_buffer = t.memory("redo_buffer")?;
    if let Some(buffer) = redo_buffer {
        if !(1 << 20..=1 << 30).contains(&buffer.value) {
            return Err(t.ctx().error(
                "cluster.redo_buffer",
                Some(buffer.line),
                format!(
                    "redo_buffer of {} is outside 1M..=1G (it must hold the largest redo \
                     record, and is allocated per redo part)",
                    show_bytes(buffer.value)
                ),
            ));
        }
    }
    let settings = ClusterSettings {
        replicas: or(replicas, d.replicas),
        data_memory_bytes: or(data_memory, d.data_memory_bytes),
        redo_log_parts: or(redo_log_parts, d.redo_log_parts),
        redo_log_files: or(redo_log_files, d.redo_log_files),
        redo_log_file_size: or(redo_log_file_size, d.redo_log_file_size),
        redo_buffer: or(redo_buffer, d.redo_buffer),
        heartbeat_interval_ms: or(
            t.integer("heartbeat_interval_ms", 1, i64::MAX)?,
            d.heartbeat_interval_ms,
        ),
        heartbeat_missed: or(t.integer("heartbeat_missed", 2, 100)?, d.heartbeat_missed),
        arbitration_timeout_ms: or(
            t.integer("arbitration_timeout_ms", 100, 60_000)?,
            d.arbitration_timeout_ms,
        ),
        epoch_interval_ms: or(epoch, d.epoch_interval_ms),
        gcp_interval_ms: or(gcp, d.gcp_interval_ms),
        lock_wait_timeout_ms: or(
            t.integer("lock_wait_timeout_ms", 1, i64::MAX)?,
            d.lock_wait_timeout_ms,
        ),
        inactive_transaction_timeout_ms: or(
            t.integer("inactive_transaction_timeout_ms", 1, i64::MAX)?,
            d.inactive_transaction_timeout_ms,
        ),
        max_operations_per_transaction: or(
            t.integer("max_operations_per_transaction", 1, U32_MAX)?,
            d.max_operations_per_transaction,
        ),
        max_concurrent_operations: or(
            t.integer("max_concurrent_operations", 1, U32_MAX)?,
            d.max_concurrent_operations,
        ),
        max_concurrent_transactions: or(
            t.integer("max_concurrent_transactions", 1, U32_MAX)?,
            d.max_concurrent_transactions,
        ),
        diskless: or(t.boolean("diskless")?, d.diskless),
        local_checkpoints: or(t.boolean("local_checkpoints")?, d.local_checkpoints),
        recovery_work: or(
            t.integer(
                "recovery_work",
                i64::from(*RECOVERY_WORK_RANGE.start()),
                i64::from(*RECOVERY_WORK_RANGE.end()),
            )?,
            d.recovery_work,
        ),
        secret_file,
    };
    Ok((settings, lines))
}

/// Returns the counts and the line of `ldm`, if given.
fn parse_threads(
    t: &Table<'_>,
    cores: usize,
) -> Result<(ThreadCounts, Option<usize>), ConfigError> {
    let auto = ThreadCounts::automatic(cores);
    let ldm = t.integer::<u32>("ldm", 1, 32)?;
    let pick = |v: Option<Located<u32>>, default: u32| v.map_or(default, |l| l.value);
    let counts = ThreadCounts {
        ldm: pick(ldm, auto.ldm),
        tc: pick(t.integer("tc", 1, 32)?, auto.tc),
        recv: pick(t.integer("recv", 1, 8)?, auto.recv),
        send: pick(t.integer("send", 0, 8)?, auto.send),
        main: pick(t.integer("main", 1, 1)?, auto.main),
        spin_us: pick(t.integer("spin_us", 0, U32_MAX)?, auto.spin_us),
        tc_on_ldm: auto.tc_on_ldm,
        network_on_ldm: t
            .boolean("network_on_ldm")?
            .map_or(auto.network_on_ldm, |value| value.value),
    };
    let mut counts = counts;
    if let Some(tc_on_ldm) = t.boolean("tc_on_ldm")? {
        if tc_on_ldm.value && counts.tc > counts.ldm {
            return Err(t.ctx().error(
                "threads.tc_on_ldm",
                Some(tc_on_ldm.line),
                format!(
                    "tc_on_ldm = true runs each tc instance on an ldm thread, but tc ({}) is \
                     above ldm ({}): lower tc or raise ldm",
                    counts.tc, counts.ldm
                ),
            ));
        }
        counts.tc_on_ldm = tc_on_ldm.value;
    }
    Ok((counts, ldm.map(|l| l.line)))
}

fn parse_data_nodes(
    root: &Table<'_>,
    mgmd: &MgmdConfig,
    mgmd_lines: MgmdLines,
    cluster: &ClusterSettings,
    replicas_line: Option<usize>,
    base_dir: Option<&Path>,
) -> Result<Vec<DataNodeConfig>, ConfigError> {
    let ctx = root.ctx();
    let no_nodes = || {
        ctx.error(
            "data_node",
            None,
            "no data nodes: add at least one [[data_node]] table",
        )
    };
    let list = root.get("data_node").ok_or_else(no_nodes)?;
    let tree::Value::Array(items) = list.get_ref() else {
        return Err(ctx.error_at(
            "data_node",
            Some(list.span()),
            "expected an array of tables: write each data node as [[data_node]]",
        ));
    };
    if items.is_empty() {
        return Err(no_nodes());
    }

    // Where each id and host:port was first claimed, to name it in errors.
    let mgmd_owner = match mgmd_lines.node_id {
        Some(line) => format!("mgmd's node_id (line {line})"),
        None => "mgmd (its default node_id)".to_owned(),
    };
    let mut ids: Vec<(u16, String)> = vec![(mgmd.node_id, mgmd_owner)];
    let mut endpoints: Vec<(String, u16, String)> = vec![(
        mgmd.host.clone(),
        mgmd.port,
        format!("mgmd (line {})", mgmd_lines.port),
    )];

    let replicas = usize::from(cluster.replicas.max(1));
    let mut nodes = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let t = Table::new(ctx, "data_node", item, DATA_NODE_KEYS)?;
        let id = t
            .integer::<u16>("id", 1, NODE_ID_MAX)
            .map_err(api_id_hint)?
            .ok_or_else(|| t.missing("id"))?;
        let host = t.required_string("host")?;
        let port = t
            .integer::<u16>("port", 1, PORT_MAX)?
            .ok_or_else(|| t.missing("port"))?;
        let data_dir = t.required_string("data_dir")?;

        if let Some((_, owner)) = ids.iter().find(|(other, _)| *other == id.value) {
            return Err(ctx.error(
                "data_node.id",
                Some(id.line),
                format!("node id {} is already used by {owner}", id.value),
            ));
        }
        ids.push((id.value, format!("the data node on line {}", id.line)));

        if let Some((_, _, owner)) = endpoints
            .iter()
            .find(|(h, p, _)| *p == port.value && h.eq_ignore_ascii_case(host.value))
        {
            return Err(ctx.error(
                "data_node.port",
                Some(port.line),
                format!("{}:{} is already used by {owner}", host.value, port.value),
            ));
        }
        endpoints.push((
            host.value.to_owned(),
            port.value,
            format!("data node {} (line {})", id.value, port.line),
        ));

        let dir = PathBuf::from(data_dir.value);
        let data_dir = match base_dir {
            Some(base) if dir.is_relative() => base.join(dir),
            _ => dir,
        };
        nodes.push(DataNodeConfig {
            id: id.value,
            host: host.value.to_owned(),
            port: port.value,
            data_dir,
            node_group: u32::try_from(index / replicas).unwrap_or(u32::MAX),
        });
    }

    if nodes.len() % replicas != 0 {
        return Err(ctx.error(
            "cluster.replicas",
            replicas_line,
            format!(
                "{} data nodes cannot be split into node groups of {} replicas: the number of \
                 data nodes must be a multiple of replicas",
                nodes.len(),
                replicas
            ),
        ));
    }
    Ok(nodes)
}

/// Human form of a byte count for messages ("16 MiB").
fn show_bytes(bytes: u64) -> String {
    const UNITS: [(u32, &str); 4] = [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")];
    for (shift, unit) in UNITS {
        if bytes >= 1 << shift && bytes.trailing_zeros() >= shift {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests;
