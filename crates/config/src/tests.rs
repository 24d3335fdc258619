//! Unit tests of config parsing: a valid file, the shipped example, and one
//! test per kind of mistake, each checking the reported key and line.

use super::*;

const MGMD: &str = "[mgmd]\nhost = \"127.0.0.1\"\nport = 11860\n";
const NODE2: &str =
    "[[data_node]]\nid = 2\nhost = \"127.0.0.1\"\nport = 11861\ndata_dir = \"d2\"\n";
const NODE3: &str =
    "[[data_node]]\nid = 3\nhost = \"127.0.0.1\"\nport = 11862\ndata_dir = \"d3\"\n";

fn parse(text: &str) -> Result<ClusterConfig, ConfigError> {
    ClusterConfig::from_toml_str(text, "test.toml")
}

/// Parses `text`, expects an error, and checks its key, line and message.
#[track_caller]
fn expect_err(text: &str, key: &str, line: Option<usize>, message_part: &str) -> ConfigError {
    let e = match parse(text) {
        Ok(c) => panic!("expected an error for key {key}, got {c:?}"),
        Err(e) => e,
    };
    assert_eq!(e.key, key, "wrong key in {e}");
    assert_eq!(e.line, line, "wrong line in {e}");
    assert!(
        e.message.contains(message_part),
        "message {:?} lacks {:?}",
        e.message,
        message_part
    );
    let shown = e.to_string();
    assert!(shown.starts_with("test.toml"), "{shown}");
    assert!(shown.contains(key), "{shown}");
    if let Some(line) = line {
        assert!(shown.starts_with(&format!("test.toml:{line}: ")), "{shown}");
    }
    e
}

#[test]
fn minimal_file_gets_defaults() {
    let c = parse(&format!("{MGMD}{NODE2}")).expect("valid");
    assert_eq!(
        c.mgmd,
        MgmdConfig {
            node_id: 1,
            host: "127.0.0.1".into(),
            port: 11860,
            arbitration_rank: 1,
            data_dir: None,
        }
    );
    assert_eq!(c.cluster, ClusterSettings::default());
    assert_eq!(c.cluster.data_memory_bytes, 256 << 20);
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    assert_eq!(c.threads, ThreadCounts::automatic(cores));
    assert_eq!(c.data_nodes.len(), 1);
    assert_eq!(c.data_nodes[0].data_dir, PathBuf::from("d2"));
    assert_eq!(c.node_groups(), 1);
}

#[test]
fn full_file_with_two_node_groups() {
    let text = format!(
        "{MGMD}[cluster]\nreplicas = 2\ndata_memory = \"1G\"\nredo_log_parts = 8\n\
         redo_log_files = 3\nredo_log_file_size = \"1M\"\nredo_buffer = \"2M\"\n\
         heartbeat_interval_ms = 500\nheartbeat_missed = 6\narbitration_timeout_ms = 700\nepoch_interval_ms = 50\ngcp_interval_ms = 1000\n\
         lock_wait_timeout_ms = 300\ninactive_transaction_timeout_ms = 5000\n\
         max_operations_per_transaction = 7\nmax_concurrent_operations = 8\n\
         max_concurrent_transactions = 9\ndiskless = true\nrecovery_work = 75\n\
         [threads]\nldm = 4\ntc = 2\nrecv = 1\nsend = 0\nmain = 1\nspin_us = 50\n\
         {NODE2}{NODE3}\
         [[data_node]]\nid = 4\nhost = \"h4\"\nport = 1\ndata_dir = \"/abs/d4\"\n\
         [[data_node]]\nid = 5\nhost = \"h5\"\nport = 1\ndata_dir = \"d5\"\n"
    );
    let c = parse(&text).expect("valid");
    assert_eq!(
        c.cluster,
        ClusterSettings {
            replicas: 2,
            data_memory_bytes: 1 << 30,
            redo_log_parts: 8,
            redo_log_files: 3,
            redo_log_file_size: 1 << 20,
            redo_buffer: 2 << 20,
            heartbeat_interval_ms: 500,
            heartbeat_missed: 6,
            arbitration_timeout_ms: 700,
            epoch_interval_ms: 50,
            gcp_interval_ms: 1000,
            lock_wait_timeout_ms: 300,
            inactive_transaction_timeout_ms: 5000,
            max_operations_per_transaction: 7,
            max_concurrent_operations: 8,
            max_concurrent_transactions: 9,
            diskless: true,
            local_checkpoints: true,
            recovery_work: 75,
            secret_file: None,
        }
    );
    assert_eq!(
        c.threads,
        ThreadCounts {
            ldm: 4,
            tc: 2,
            recv: 1,
            send: 0,
            main: 1,
            spin_us: 50,
            tc_on_ldm: false,
            network_on_ldm: automatic_network_on_ldm(),
        }
    );
    assert_eq!(c.node_groups(), 2);
    let groups: Vec<(u16, u32)> = c.data_nodes.iter().map(|n| (n.id, n.node_group)).collect();
    assert_eq!(groups, vec![(2, 0), (3, 0), (4, 1), (5, 1)]);
    assert_eq!(c.data_node(4).map(|n| n.host.as_str()), Some("h4"));
    assert!(c.data_node(6).is_none());
}

#[test]
fn partial_threads_table_fills_in_automatic_counts() {
    let c = parse(&format!("{MGMD}[threads]\nspin_us = 10\n{NODE2}")).expect("valid");
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let auto = ThreadCounts::automatic(cores);
    assert_eq!(
        c.threads,
        ThreadCounts {
            spin_us: 10,
            ..auto
        }
    );
}

#[test]
fn network_on_ldm_threads() {
    let c = parse(&format!("{MGMD}[threads]\nnetwork_on_ldm = true\n{NODE2}")).expect("valid");
    assert!(c.threads.network_on_ldm);
    let c = parse(&format!("{MGMD}[threads]\nnetwork_on_ldm = false\n{NODE2}")).expect("valid");
    assert!(!c.threads.network_on_ldm);
    let text = format!("{MGMD}[threads]\nnetwork_on_ldm = \"yes\"\n{NODE2}");
    let line = 1 + text
        .lines()
        .position(|l| l.starts_with("network_on_ldm"))
        .expect("line");
    expect_err(&text, "threads.network_on_ldm", Some(line), "a boolean");
}

#[test]
fn tc_on_ldm_threads() {
    let c = parse(&format!(
        "{MGMD}[threads]\nldm = 2\ntc = 2\ntc_on_ldm = true\n{NODE2}"
    ))
    .expect("valid");
    assert!(c.threads.tc_on_ldm);
    assert_eq!((c.threads.ldm, c.threads.tc), (2, 2));
    let text = format!("{MGMD}[threads]\nldm = 1\ntc = 2\ntc_on_ldm = true\n{NODE2}");
    let line = 1 + text
        .lines()
        .position(|l| l.starts_with("tc_on_ldm"))
        .expect("line");
    expect_err(
        &text,
        "threads.tc_on_ldm",
        Some(line),
        "tc (2) is above ldm (1)",
    );
    let text = format!("{MGMD}[threads]\ntc_on_ldm = 1\n{NODE2}");
    let line = 1 + text
        .lines()
        .position(|l| l.starts_with("tc_on_ldm"))
        .expect("line");
    expect_err(&text, "threads.tc_on_ldm", Some(line), "a boolean");
}

/// What a `[threads]` table without `network_on_ldm` gets on this machine.
fn automatic_network_on_ldm() -> bool {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    ThreadCounts::automatic(cores).network_on_ldm
}

#[test]
fn automatic_thread_counts() {
    let t = |cores| {
        let c = ThreadCounts::automatic(cores);
        (c.ldm, c.tc, c.recv, c.send, c.main, c.spin_us)
    };
    let network_on_ldm = |cores| ThreadCounts::automatic(cores).network_on_ldm;
    assert!(network_on_ldm(1) && network_on_ldm(2));
    assert!(!network_on_ldm(3) && !network_on_ldm(64));
    assert_eq!(t(1), (2, 1, 1, 1, 1, 0));
    assert_eq!(t(4), (2, 1, 1, 1, 1, 0));
    assert_eq!(t(8), (4, 2, 1, 1, 1, 0));
    assert_eq!(t(16), (8, 4, 2, 2, 1, 0));
    assert_eq!(t(64), (32, 16, 8, 8, 1, 0));
    assert_eq!(t(1000), (32, 16, 8, 8, 1, 0));
}

#[test]
fn memory_strings() {
    use tree::parse_memory;
    assert_eq!(parse_memory("512K"), Ok(512 << 10));
    assert_eq!(parse_memory("64M"), Ok(64 << 20));
    assert_eq!(parse_memory("1g"), Ok(1 << 30));
    assert_eq!(parse_memory("2T"), Ok(2 << 40));
    assert_eq!(parse_memory(" 1048576 "), Ok(1 << 20));
    for bad in [
        "",
        "M",
        "12X",
        "1.5G",
        "-1M",
        "64 MB",
        "99999999999999999999",
        "99999999999T",
    ] {
        assert!(parse_memory(bad).is_err(), "{bad:?} should be rejected");
    }
}

#[test]
fn example_file_parses() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cluster.toml");
    let c = ClusterConfig::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        c.mgmd,
        MgmdConfig {
            node_id: 1,
            host: "127.0.0.1".into(),
            port: 11860,
            arbitration_rank: 1,
            data_dir: None,
        }
    );
    assert_eq!(
        c.cluster,
        ClusterSettings {
            secret_file: path.parent().map(|dir| dir.join("cluster.secret")),
            ..ClusterSettings::default()
        }
    );
    assert_eq!(
        c.threads,
        ThreadCounts {
            ldm: 2,
            tc: 1,
            recv: 1,
            send: 1,
            main: 1,
            spin_us: 0,
            tc_on_ldm: false,
            network_on_ldm: automatic_network_on_ldm(),
        }
    );
    assert_eq!(c.data_nodes.len(), 1);
    let node = &c.data_nodes[0];
    assert_eq!(
        (node.id, node.host.as_str(), node.port, node.node_group),
        (2, "127.0.0.1", 11861, 0)
    );
    // Relative data_dir is resolved against the file's directory.
    assert_eq!(
        node.data_dir,
        path.parent()
            .map(|p| p.join("data/node2"))
            .unwrap_or_default()
    );
}

#[test]
fn relative_data_dir_with_base() {
    let c = ClusterConfig::from_toml_str_relative_to(
        &format!("{MGMD}{NODE2}"),
        "x",
        Path::new("/etc/t"),
    )
    .expect("valid");
    assert_eq!(c.data_nodes[0].data_dir, PathBuf::from("/etc/t/d2"));
}

#[test]
fn secret_file_is_relative_to_the_config_and_an_inline_secret_is_refused() {
    let text = format!("{MGMD}[cluster]\nsecret_file = \"cluster.secret\"\n{NODE2}");
    let c =
        ClusterConfig::from_toml_str_relative_to(&text, "x", Path::new("/etc/t")).expect("valid");
    assert_eq!(
        c.cluster.secret_file,
        Some(PathBuf::from("/etc/t/cluster.secret"))
    );
    let absolute = format!("{MGMD}[cluster]\nsecret_file = \"/keys/s\"\n{NODE2}");
    let c = ClusterConfig::from_toml_str_relative_to(&absolute, "x", Path::new("/etc/t"))
        .expect("valid");
    assert_eq!(c.cluster.secret_file, Some(PathBuf::from("/keys/s")));
    expect_err(
        &format!("{MGMD}[cluster]\nsecret = \"0123456789abcdef0123456789abcdef\"\n{NODE2}"),
        "cluster.secret",
        Some(5),
        "must not be written in the config",
    );
    expect_err(
        &format!("{MGMD}[cluster]\nsecret_file = \" \"\n{NODE2}"),
        "cluster.secret_file",
        Some(5),
        "secret_file is empty",
    );
}

#[test]
fn missing_file_is_an_error() {
    let e = ClusterConfig::from_file(Path::new("/nonexistent/cluster.toml")).expect_err("no file");
    assert!(
        e.to_string()
            .starts_with("/nonexistent/cluster.toml: cannot read"),
        "{e}"
    );
}

#[test]
fn syntax_error_has_line() {
    let e = expect_err(
        &format!("{MGMD}[cluster\n{NODE2}"),
        "",
        Some(4),
        "invalid table header",
    );
    assert!(!e.to_string().contains('\n'), "one line: {e}");
    expect_err(
        &format!("{MGMD}port = 1\n{NODE2}"),
        "",
        Some(4),
        "duplicate",
    );
}

#[test]
fn dotted_keys_are_rejected_with_a_line() {
    expect_err(
        &format!("{MGMD}[cluster]\nfoo.bar = 1\n{NODE2}"),
        "",
        Some(5),
        "dotted keys",
    );
}

#[test]
fn unknown_keys() {
    expect_err(
        &format!("{MGMD}colour = 1\n{NODE2}"),
        "mgmd.colour",
        Some(4),
        "unknown key",
    );
    expect_err(
        &format!("{MGMD}[cluster]\nreplica = 1\n{NODE2}"),
        "cluster.replica",
        Some(5),
        "unknown key",
    );
    expect_err(
        &format!("{MGMD}[threads]\nio = 1\n{NODE2}"),
        "threads.io",
        Some(5),
        "unknown key",
    );
    expect_err(
        &format!("{MGMD}{NODE2}datadir = \"x\"\n"),
        "data_node.datadir",
        Some(9),
        "unknown key",
    );
    expect_err(
        &format!("{MGMD}[sql]\nport = 3306\n{NODE2}"),
        "sql",
        Some(4),
        "unknown table",
    );
    expect_err(
        &format!("top = 1\n{MGMD}{NODE2}"),
        "top",
        Some(1),
        "unknown key",
    );
}

#[test]
fn wrong_types() {
    expect_err(
        "[mgmd]\nhost = \"h\"\nport = \"11860\"\n",
        "mgmd.port",
        Some(3),
        "expected an integer, found a string",
    );
    expect_err(
        "[mgmd]\nhost = 5\nport = 1\n",
        "mgmd.host",
        Some(2),
        "expected a string",
    );
    expect_err(
        &format!("{MGMD}[cluster]\ndiskless = 1\n{NODE2}"),
        "cluster.diskless",
        Some(5),
        "expected a boolean",
    );
    expect_err(
        &format!("{MGMD}[cluster]\nreplicas = 1.0\n{NODE2}"),
        "cluster.replicas",
        Some(5),
        "found a float",
    );
    expect_err(
        &format!("{MGMD}[cluster]\ndata_memory = true\n{NODE2}"),
        "cluster.data_memory",
        Some(5),
        "found a boolean",
    );
    expect_err(
        &format!("mgmd = 1\n{NODE2}"),
        "mgmd",
        Some(1),
        "expected a table",
    );
    expect_err(
        &format!("{MGMD}[data_node]\nid = 2\n"),
        "data_node",
        Some(4),
        "[[data_node]]",
    );
}

#[test]
fn missing_required_keys() {
    expect_err(NODE2, "mgmd", None, "missing required table [mgmd]");
    expect_err(
        &format!("\n[mgmd]\nport = 1\n{NODE2}"),
        "mgmd.host",
        Some(2),
        "missing required key",
    );
    expect_err(
        &format!("[mgmd]\nhost = \"h\"\n{NODE2}"),
        "mgmd.port",
        Some(1),
        "missing required key",
    );
    for key in ["id", "host", "port", "data_dir"] {
        let node: String = NODE2
            .lines()
            .filter(|l| !l.starts_with(key))
            .map(|l| format!("{l}\n"))
            .collect();
        expect_err(
            &format!("{MGMD}{node}"),
            &format!("data_node.{key}"),
            Some(4),
            "missing required key",
        );
    }
    expect_err(
        &format!("{MGMD}{NODE2}").replace(
            "host = \"127.0.0.1\"\nport = 11861",
            "host = \"\"\nport = 11861",
        ),
        "data_node.host",
        Some(6),
        "must not be empty",
    );
}

#[test]
fn replicas_out_of_range() {
    expect_err(
        &format!("{MGMD}[cluster]\nreplicas = 0\n{NODE2}"),
        "cluster.replicas",
        Some(5),
        "between 1 and 4",
    );
    expect_err(
        &format!("{MGMD}[cluster]\nreplicas = 5\n{NODE2}"),
        "cluster.replicas",
        Some(5),
        "between 1 and 4",
    );
}

#[test]
fn no_data_nodes() {
    expect_err(MGMD, "data_node", None, "no data nodes");
    expect_err(
        &format!("data_node = []\n{MGMD}"),
        "data_node",
        None,
        "no data nodes",
    );
}

#[test]
fn data_nodes_not_a_multiple_of_replicas() {
    let e = expect_err(
        &format!("{MGMD}[cluster]\nreplicas = 2\n{NODE2}"),
        "cluster.replicas",
        Some(5),
        "multiple of replicas",
    );
    assert!(e.message.contains("1 data nodes"), "{e}");
}

#[test]
fn duplicate_node_ids() {
    let dup = NODE3.replace("id = 3", "id = 2");
    expect_err(
        &format!("{MGMD}{NODE2}{dup}"),
        "data_node.id",
        Some(10),
        "already used by the data node on line 5",
    );
    let as_mgmd = NODE2.replace("id = 2", "id = 1");
    expect_err(
        &format!("{MGMD}{as_mgmd}"),
        "data_node.id",
        Some(5),
        "already used by mgmd",
    );
    expect_err(
        &format!("[mgmd]\nnode_id = 2\nhost = \"h\"\nport = 1\n{NODE2}"),
        "data_node.id",
        Some(6),
        "mgmd's node_id (line 2)",
    );
}

#[test]
fn node_ids_out_of_range() {
    expect_err(
        &format!("{MGMD}{}", NODE2.replace("id = 2", "id = 128")),
        "data_node.id",
        Some(5),
        "API nodes",
    );
    expect_err(
        &format!("{MGMD}{}", NODE2.replace("id = 2", "id = 0")),
        "data_node.id",
        Some(5),
        "between 1 and 127",
    );
    expect_err(
        &format!("[mgmd]\nnode_id = 200\nhost = \"h\"\nport = 1\n{NODE2}"),
        "mgmd.node_id",
        Some(2),
        "API nodes",
    );
}

#[test]
fn duplicate_host_and_port() {
    let dup = NODE3.replace("11862", "11861");
    expect_err(
        &format!("{MGMD}{NODE2}{dup}"),
        "data_node.port",
        Some(12),
        "127.0.0.1:11861 is already used by data node 2 (line 7)",
    );
    let on_mgmd = NODE2.replace("11861", "11860");
    expect_err(
        &format!("{MGMD}{on_mgmd}"),
        "data_node.port",
        Some(7),
        "already used by mgmd (line 3)",
    );
    // Same port on another host is fine.
    parse(&format!(
        "{MGMD}{NODE2}{}",
        NODE3
            .replace("11862", "11861")
            .replace("127.0.0.1", "10.0.0.3")
    ))
    .expect("valid");
}

#[test]
fn port_zero_and_too_large() {
    expect_err(
        "[mgmd]\nhost = \"h\"\nport = 0\n",
        "mgmd.port",
        Some(3),
        "between 1 and 65535",
    );
    expect_err(
        &format!("{MGMD}{}", NODE2.replace("11861", "0")),
        "data_node.port",
        Some(7),
        "between 1 and 65535",
    );
    expect_err(
        &format!("{MGMD}{}", NODE2.replace("11861", "70000")),
        "data_node.port",
        Some(7),
        "between 1 and 65535",
    );
}

#[test]
fn bad_memory_string() {
    expect_err(
        &format!("{MGMD}[cluster]\ndata_memory = \"64X\"\n{NODE2}"),
        "cluster.data_memory",
        Some(5),
        "bad memory size",
    );
    expect_err(
        &format!("{MGMD}[cluster]\ndata_memory = -5\n{NODE2}"),
        "cluster.data_memory",
        Some(5),
        "negative",
    );
}

#[test]
fn memory_too_small() {
    expect_err(
        &format!("{MGMD}[cluster]\ndata_memory = \"8M\"\n[threads]\nldm = 2\n{NODE2}"),
        "cluster.data_memory",
        Some(5),
        "memory too small",
    );
    // 4 MiB per ldm thread: 8 ldm threads need 32 MiB.
    expect_err(
        &format!("{MGMD}[cluster]\ndata_memory = \"24M\"\n[threads]\nldm = 8\n{NODE2}"),
        "cluster.data_memory",
        Some(5),
        "memory too small: 24 MiB is below the minimum of 32 MiB",
    );
    parse(&format!(
        "{MGMD}[cluster]\ndata_memory = \"32M\"\n[threads]\nldm = 8\n{NODE2}"
    ))
    .expect("exactly the minimum is fine");
}

#[test]
fn thread_counts_out_of_range() {
    let cases = [
        ("ldm", "0", "between 1 and 32"),
        ("ldm", "33", "between 1 and 32"),
        ("tc", "0", "between 1 and 32"),
        ("tc", "33", "between 1 and 32"),
        ("recv", "0", "between 1 and 8"),
        ("recv", "9", "between 1 and 8"),
        ("send", "9", "between 0 and 8"),
        ("send", "-1", "between 0 and 8"),
        ("main", "2", "must be 1"),
        ("main", "0", "must be 1"),
        ("spin_us", "-1", "between 0 and"),
    ];
    for (key, value, message) in cases {
        expect_err(
            &format!("{MGMD}[threads]\n{key} = {value}\n{NODE2}"),
            &format!("threads.{key}"),
            Some(5),
            message,
        );
    }
}

#[test]
fn zero_intervals_timeouts_and_limits() {
    for key in [
        "redo_log_parts",
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
    ] {
        expect_err(
            &format!("{MGMD}[cluster]\n{key} = 0\n{NODE2}"),
            &format!("cluster.{key}"),
            Some(5),
            "got 0",
        );
    }
    expect_err(
        &format!("{MGMD}[cluster]\nredo_log_parts = 65\n{NODE2}"),
        "cluster.redo_log_parts",
        Some(5),
        "between 1 and 64",
    );
    expect_err(
        &format!("{MGMD}[cluster]\nmax_concurrent_operations = 4294967296\n{NODE2}"),
        "cluster.max_concurrent_operations",
        Some(5),
        "between 1 and 4294967295",
    );
}

#[test]
fn epoch_longer_than_gcp() {
    expect_err(
        &format!("{MGMD}[cluster]\nepoch_interval_ms = 3000\n{NODE2}"),
        "cluster.epoch_interval_ms",
        Some(5),
        "must not be greater than gcp_interval_ms (2000)",
    );
    expect_err(
        &format!("{MGMD}[cluster]\ngcp_interval_ms = 50\n{NODE2}"),
        "cluster.epoch_interval_ms",
        Some(5),
        "epoch_interval_ms (100)",
    );
}

#[test]
fn error_display_format() {
    let e = ConfigError {
        source_name: "c.toml".into(),
        line: Some(3),
        key: "cluster.replicas".into(),
        message: "bad".into(),
    };
    assert_eq!(e.to_string(), "c.toml:3: cluster.replicas: bad");
    let e = ConfigError { line: None, ..e };
    assert_eq!(e.to_string(), "c.toml: cluster.replicas: bad");
}

/// One random line of TOML-ish text: headers (known, unknown, dotted,
/// arrays of tables), known and unknown keys with values of every type and
/// at every edge, and broken syntax.
fn random_line(rng: &mut stdx::mix::XorShift) -> String {
    const HEADERS: &[&str] = &[
        "[mgmd]",
        "[cluster]",
        "[threads]",
        "[[data_node]]",
        "[[mgmd]]",
        "[data_node]",
        "[cluster.sub]",
        "[x]",
        "[",
        "[[]]",
    ];
    const KEYS: &[&str] = &[
        "node_id",
        "host",
        "port",
        "replicas",
        "data_memory",
        "redo_log_parts",
        "heartbeat_interval_ms",
        "heartbeat_missed",
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
        "ldm",
        "tc",
        "recv",
        "send",
        "main",
        "spin_us",
        "id",
        "data_dir",
        "a.b",
        "\"quoted key\"",
        "mgmd",
        "data_node",
    ];
    const VALUES: &[&str] = &[
        "0",
        "1",
        "2",
        "3",
        "-1",
        "127",
        "128",
        "255",
        "65535",
        "65536",
        "4294967295",
        "4294967296",
        "9223372036854775807",
        "-9223372036854775808",
        "99999999999999999999",
        "0x10",
        "1_000",
        "1.5",
        "inf",
        "nan",
        "true",
        "false",
        "\"\"",
        "\"127.0.0.1\"",
        "\"::1\"",
        "\"64M\"",
        "\"1T\"",
        "\"16383T\"",
        "\"16384T\"",
        "\"99999999999999999999\"",
        "\"18446744073709551615\"",
        "\"K\"",
        "\" 8 g \"",
        "\"\\u0000\"",
        "[]",
        "[1, \"a\"]",
        "{}",
        "{ id = 2 }",
        "1979-05-27",
        "'literal'",
        "\"unterminated",
        "",
    ];
    match rng.below(12) {
        0..=2 => HEADERS[rng.below(HEADERS.len() as u64) as usize].to_owned(),
        3 => {
            let depth = rng.below(3000) as usize;
            format!("deep = {}{}", "[".repeat(depth), "]".repeat(depth))
        }
        4 => (0..rng.below(20))
            .map(|_| char::from_u32(rng.below(0x80) as u32).unwrap_or('?'))
            .collect(),
        _ => format!(
            "{} = {}",
            KEYS[rng.below(KEYS.len() as u64) as usize],
            VALUES[rng.below(VALUES.len() as u64) as usize]
        ),
    }
}

#[test]
fn random_toml_ish_text_is_refused_with_a_located_error_or_accepted_valid() {
    let mut rng = stdx::mix::XorShift::new(0xC0F1);
    let base = format!("{MGMD}{NODE2}{NODE3}").replace("[mgmd]", "[mgmd]\nnode_id = 1");
    let mut accepted = 0;
    for _ in 0..20_000 {
        let mut lines: Vec<String> = base.lines().map(str::to_owned).collect();
        for _ in 0..1 + rng.below(3) {
            let position = rng.below(lines.len() as u64 + 1) as usize;
            match rng.below(3) {
                0 if position < lines.len() => {
                    lines.remove(position);
                }
                1 if position < lines.len() => lines[position] = random_line(&mut rng),
                _ => lines.insert(position, random_line(&mut rng)),
            }
        }
        let text = lines.join(if rng.below(8) == 0 { "\r\n" } else { "\n" });
        match parse(&text) {
            Ok(config) => {
                accepted += 1;
                assert!(!config.data_nodes.is_empty());
                assert!((1..=4).contains(&config.cluster.replicas));
                assert_eq!(
                    config.data_nodes.len() % usize::from(config.cluster.replicas),
                    0
                );
                assert!(config.cluster.data_memory_bytes >= MIN_DATA_MEMORY);
                assert!(config.cluster.epoch_interval_ms <= config.cluster.gcp_interval_ms);
                assert!(RECOVERY_WORK_RANGE.contains(&config.cluster.recovery_work));
                assert!((1..=32).contains(&config.threads.ldm));
                for node in &config.data_nodes {
                    assert!((1..=MAX_DATA_NODE_ID).contains(&node.id));
                    assert_ne!(node.port, 0);
                }
            }
            Err(error) => {
                assert!(!error.message.is_empty(), "{error:?} for {text:?}");
                if let Some(line) = error.line {
                    assert!(
                        line >= 1 && line <= lines.len() + 1,
                        "line {line} of {} in {error}",
                        lines.len()
                    );
                }
                assert!(error.to_string().starts_with("test.toml"));
            }
        }
    }
    assert!(accepted > 100, "too few texts survived: {accepted}");
}

#[test]
fn a_key_without_a_value_at_the_very_end_is_named() {
    // toml reports this one with an empty message.
    expect_err(
        &format!("{MGMD}{NODE2}port ="),
        "",
        Some(9),
        "a key without a value",
    );
}

#[test]
fn redo_log_parts_follow_the_ldm_threads() {
    // Unset: 4, or one per ldm thread if more.
    let c = parse(&format!(
        "{MGMD}[threads]\nldm = 6\n[cluster]\ndata_memory = \"64M\"\n{NODE2}"
    ))
    .expect("valid");
    assert_eq!(c.cluster.redo_log_parts, 6);
    let c = parse(&format!("{MGMD}[threads]\nldm = 2\n{NODE2}")).expect("valid");
    assert_eq!(c.cluster.redo_log_parts, 4);
    // Set below the ldm threads: each ldm thread needs parts of its own.
    expect_err(
        &format!("{MGMD}[cluster]\nredo_log_parts = 2\n[threads]\nldm = 3\n{NODE2}"),
        "cluster.redo_log_parts",
        Some(5),
        "below the ldm thread count (3)",
    );
}

#[test]
fn redo_log_shape_is_checked() {
    expect_err(
        &format!("{MGMD}[cluster]\nredo_log_file_size = \"100000\"\n{NODE2}"),
        "cluster.redo_log_file_size",
        Some(5),
        "multiple of 4K",
    );
    expect_err(
        &format!("{MGMD}[cluster]\nredo_log_file_size = \"64K\"\nredo_log_files = 2\n{NODE2}"),
        "cluster.redo_log_file_size",
        Some(5),
        "at least 128",
    );
    expect_err(
        &format!("{MGMD}[cluster]\nredo_buffer = \"64K\"\n{NODE2}"),
        "cluster.redo_buffer",
        Some(5),
        "outside 1M..=1G",
    );
    expect_err(
        &format!("{MGMD}[cluster]\nredo_log_files = 1\n{NODE2}"),
        "cluster.redo_log_files",
        Some(5),
        "between",
    );
}

#[test]
fn recovery_work_is_checked() {
    // Default: NDB's RecoveryWork default.
    let c = parse(&format!("{MGMD}{NODE2}")).expect("valid");
    assert_eq!(c.cluster.recovery_work, 50);
    // Valid values, the bounds included.
    for value in [25, 60, 100] {
        let c = parse(&format!(
            "{MGMD}[cluster]\nrecovery_work = {value}\n{NODE2}"
        ))
        .expect("valid");
        assert_eq!(c.cluster.recovery_work, value);
    }
    // Out of range, low and high: the message names the allowed range.
    for (value, got) in [
        ("24", "got 24"),
        ("10", "got 10"),
        ("101", "got 101"),
        ("-1", "got -1"),
    ] {
        let e = expect_err(
            &format!("{MGMD}[cluster]\nrecovery_work = {value}\n{NODE2}"),
            "cluster.recovery_work",
            Some(5),
            "must be between 25 and 100",
        );
        assert!(e.message.contains(got), "{e}");
    }
    // Wrong types.
    for (value, found) in [
        ("\"50\"", "found a string"),
        ("50.0", "found a float"),
        ("true", "found a boolean"),
    ] {
        expect_err(
            &format!("{MGMD}[cluster]\nrecovery_work = {value}\n{NODE2}"),
            "cluster.recovery_work",
            Some(5),
            &format!("expected an integer, {found}"),
        );
    }
}

#[test]
fn arbitration_rank_is_0_or_1_and_the_timeout_is_bounded() {
    let with_rank = |rank: &str| {
        parse(&format!(
            "[mgmd]\nhost = \"127.0.0.1\"\nport = 11860\narbitration_rank = {rank}\n{NODE2}"
        ))
    };
    assert_eq!(with_rank("0").expect("valid").mgmd.arbitration_rank, 0);
    assert_eq!(with_rank("1").expect("valid").mgmd.arbitration_rank, 1);
    let error = with_rank("2").expect_err("rank 2 is refused").to_string();
    assert!(error.contains("arbitration_rank"), "{error}");
    let error = parse(&format!(
        "{MGMD}[cluster]\narbitration_timeout_ms = 50\n{NODE2}"
    ))
    .expect_err("a timeout below 100 ms is refused")
    .to_string();
    assert!(error.contains("arbitration_timeout_ms"), "{error}");
}
