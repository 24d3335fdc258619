//! End-to-end tests of the management protocol: an in-process mgmd on a free
//! loopback port, driven through the client library and through raw
//! sockets (for malformed input).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use config::ClusterConfig;
use mgmd::client::{DataNodeSession, MgmClient};
use mgmd::{mgm, start_server_with, MgmdError, MgmdHandle, ServerOptions, MAX_LINE_BYTES};
use serde_json::{json, Value};

const CONFIG: &str = r#"
[mgmd]
host = "127.0.0.1"
port = 11860

[cluster]
replicas = 2

[[data_node]]
id = 2
host = "127.0.0.1"
port = 11861
data_dir = "d2"

[[data_node]]
id = 3
host = "127.0.0.1"
port = 11862
data_dir = "d3"
"#;

/// Starts mgmd on 127.0.0.1 with a port the OS picks.
fn start() -> (MgmdHandle, String) {
    let config = ClusterConfig::from_toml_str(CONFIG, "test.toml").expect("test config is valid");
    let options = ServerOptions {
        bind_addr: Some("127.0.0.1:0".into()),
        secret: Some(test_secret()),
        ..Default::default()
    };
    let handle = start_server_with(config, CONFIG.to_owned(), options).expect("mgmd starts");
    let addr = handle.local_addr().to_string();
    (handle, addr)
}

/// Polls `condition` until it holds; the deadline only guards against a
/// hang, the tests do not depend on how long anything takes.
fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !condition() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn node(show: &Value, id: u64) -> Value {
    show["nodes"]
        .as_array()
        .and_then(|nodes| nodes.iter().find(|n| n["id"] == id))
        .cloned()
        .unwrap_or_else(|| panic!("node {id} missing from {show}"))
}

fn node_state(client: &mut MgmClient, id: u64) -> Value {
    node(&client.show().expect("show"), id)["state"].clone()
}

#[test]
fn get_config_round_trips() {
    let (_server, addr) = start();
    let mut client = MgmClient::connect(&addr).expect("connect");
    assert_eq!(client.get_config().expect("get_config"), CONFIG);
    let (session, text) = DataNodeSession::register(&addr, 2, 1).expect("register");
    assert_eq!(text, CONFIG);
    assert_eq!(session.node_id(), 2);
    assert_eq!(session.config_dir(), None);
}

#[test]
fn a_node_id_registers_once_at_a_time() {
    let (_server, addr) = start();
    let (first, _) = DataNodeSession::register(&addr, 2, 1234).expect("first registration");
    let err = match DataNodeSession::register(&addr, 2, 5678) {
        Ok(_) => panic!("second registration of node 2 must fail"),
        Err(e) => e,
    };
    assert!(matches!(err, MgmdError::Refused(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        "mgmd: node id 2 is already in use by a running data node (pid 1234)"
    );

    let mut client = MgmClient::connect(&addr).expect("connect");
    assert_eq!(node(&client.show().expect("show"), 2)["start_count"], 1);
    drop(first);
    // Its session broke with no reason given: failed, unlike a node
    // never started.
    wait_until("node 2 to be failed", || {
        node_state(&mut client, 2) == "failed"
    });
    let down = node(&client.show().expect("show"), 2);
    assert_eq!(down["pid"], Value::Null);
    assert_eq!(down["start_count"], 1);

    let (_second, _) = DataNodeSession::register(&addr, 2, 5678).expect("re-registration");
    let up = node(&client.show().expect("show"), 2);
    assert_eq!(up["start_count"], 2);
    assert_eq!(up["pid"], 5678);
    assert_eq!(up["state"], "starting");

    // A node that says why it shuts down before it goes is shown so.
    let (mut third, _) = DataNodeSession::register(&addr, 3, 99).expect("node 3");
    third
        .push_status(&json!({"state": "shut down", "shutdown_reason": "president 2 declared this node failed"}))
        .expect("push");
    wait_until("node 3 to report shutting down", || {
        node_state(&mut client, 3) == "shut down"
    });
    drop(third);
    wait_until("node 3 to be shut down", || {
        node_state(&mut client, 3) == "shut_down"
    });
    let gone = node(&client.show().expect("show"), 3);
    assert_eq!(
        gone["shutdown_reason"],
        "president 2 declared this node failed"
    );
}

#[test]
fn unknown_node_ids_are_refused() {
    let (_server, addr) = start();
    for id in [1, 4, 128] {
        let err = match DataNodeSession::register(&addr, id, 1) {
            Ok(_) => panic!("node {id} is not a data node"),
            Err(e) => e.to_string(),
        };
        assert!(
            err.contains(&format!(
                "node id {id} is not a data node in the config (data nodes: 2, 3)"
            )),
            "{err}"
        );
    }
}

#[test]
fn api_node_ids_are_distinct_one_per_connection_and_released_on_close() {
    let (_server, addr) = start();
    let mut a = MgmClient::connect(&addr).expect("connect");
    let mut b = MgmClient::connect(&addr).expect("connect");
    assert_eq!(a.alloc_api_node().expect("alloc").node_id, 128);
    // One connection may not take the range: a second id is refused.
    let second = a.alloc_api_node().unwrap_err();
    assert!(
        second.to_string().contains("already holds API node id 128"),
        "{second}"
    );
    assert_eq!(b.alloc_api_node().expect("alloc").node_id, 129);

    let show = b.show().expect("show");
    let api: Vec<&Value> = show["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter(|n| n["type"] == "api")
        .collect();
    assert_eq!(api.len(), 2);
    assert!(api.iter().all(|n| n["state"] == "connected"));

    drop(a);
    wait_until("id 128 to be released", || {
        let show = b.show().expect("show");
        let count = show["nodes"]
            .as_array()
            .map_or(0, |n| n.iter().filter(|n| n["type"] == "api").count());
        count == 1
    });
    // Ids go round robin: a just-released id is not handed out again at once
    // (a data node may still have late replies for its previous owner).
    let mut holders = Vec::new();
    for expected in 130..=255 {
        let mut holder = MgmClient::connect(&addr).expect("connect");
        assert_eq!(holder.alloc_api_node().expect("alloc").node_id, expected);
        holders.push(holder);
    }
    // Wrapped: 128 is free again, 129 is still b's.
    let mut last = MgmClient::connect(&addr).expect("connect");
    assert_eq!(last.alloc_api_node().expect("alloc").node_id, 128);
    let mut none_left = MgmClient::connect(&addr).expect("connect");
    assert!(
        none_left.alloc_api_node().is_err(),
        "every id is in use now"
    );
}

/// Each id comes with a token the cluster secret made for that id and a
/// rising allocation number; a data node checks it with the secret alone.
#[test]
fn api_node_ids_come_with_tokens_of_the_cluster_secret() {
    let (_server, addr) = start();
    let secret = test_secret();
    let mut allocations = Vec::new();
    for _ in 0..3 {
        let mut client = MgmClient::connect(&addr).expect("connect");
        let allocation = client.alloc_api_node().expect("alloc");
        let node = signal::NodeId(allocation.node_id);
        assert!(
            secret.verify_api_token(node, &allocation.token),
            "the token is the secret's for {node}"
        );
        assert!(
            !secret.verify_api_token(signal::NodeId(allocation.node_id + 1), &allocation.token),
            "and for no other id"
        );
        allocations.push(allocation.token.allocation);
        // Dropped: the id is released, and the next allocation is newer.
    }
    assert!(
        allocations.windows(2).all(|pair| pair[0] < pair[1]),
        "allocation numbers rise: {allocations:?}"
    );
}

/// The secret is read from the file the config names and never served:
/// `get_config` answers with the config text, which holds only the name.
/// Without a secret, mgmd does not start, and says how to make one.
#[test]
fn the_secret_comes_from_its_file_is_never_served_and_is_required() {
    let dir = std::env::temp_dir().join(format!("tessera-mgmd-secret-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let secret_path = dir.join("cluster.secret");
    let _ = std::fs::remove_file(&secret_path);
    admission::ClusterSecret::create_file(&secret_path).expect("secret file");
    let secret_text = std::fs::read_to_string(&secret_path).expect("read back");
    let text = CONFIG.replace(
        "[cluster]\n",
        &format!(
            "[cluster]\nsecret_file = {:?}\n",
            secret_path.display().to_string()
        ),
    );
    let config = ClusterConfig::from_toml_str(&text, "test.toml").expect("valid");
    let options = ServerOptions {
        bind_addr: Some("127.0.0.1:0".into()),
        ..Default::default()
    };
    let handle = start_server_with(config, text.clone(), options).expect("mgmd starts");
    let addr = handle.local_addr().to_string();
    let mut client = MgmClient::connect(&addr).expect("connect");
    let served = client.get_config().expect("config");
    assert!(
        !served.contains(secret_text.trim()),
        "the config served holds the secret"
    );
    let allocation = client.alloc_api_node().expect("alloc");
    let secret = admission::ClusterSecret::load(&secret_path).expect("loads");
    assert!(secret.verify_api_token(signal::NodeId(allocation.node_id), &allocation.token));
    drop(handle);

    // No secret_file: refused at start.
    let config = ClusterConfig::from_toml_str(CONFIG, "test.toml").expect("valid");
    let options = ServerOptions {
        bind_addr: Some("127.0.0.1:0".into()),
        ..Default::default()
    };
    let error = match start_server_with(config, CONFIG.to_owned(), options) {
        Ok(_) => panic!("mgmd started without a cluster secret"),
        Err(error) => error.to_string(),
    };
    assert!(
        error.contains("names no cluster secret") && error.contains("tessera secret"),
        "{error}"
    );
    // A secret file that is too short: refused at start, naming the file.
    std::fs::write(dir.join("short.secret"), "hunter2\n").expect("write");
    let short = CONFIG.replace(
        "[cluster]\n",
        &format!(
            "[cluster]\nsecret_file = {:?}\n",
            dir.join("short.secret").display().to_string()
        ),
    );
    let config = ClusterConfig::from_toml_str(&short, "test.toml").expect("valid");
    let options = ServerOptions {
        bind_addr: Some("127.0.0.1:0".into()),
        ..Default::default()
    };
    let error = match start_server_with(config, short.clone(), options) {
        Ok(_) => panic!("mgmd started with a short secret"),
        Err(error) => error.to_string(),
    };
    assert!(
        error.contains("short.secret") && error.contains("at least 32"),
        "{error}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn show_reflects_pushed_status() {
    let (_server, addr) = start();
    let mut client = MgmClient::connect(&addr).expect("connect");
    let show = client.show().expect("show");
    assert_eq!(show["latest_gci"], 0);
    assert!(show.get("ok").is_none(), "client strips ok: {show}");
    assert_eq!(node(&show, 2)["state"], "not_connected");
    let mgmd = node(&show, 1);
    assert_eq!(mgmd["type"], "mgmd");
    assert_eq!(mgmd["pid"], std::process::id());

    let (session, _) = DataNodeSession::register(&addr, 3, 4321).expect("register");
    let _pusher = session.spawn_status_pusher(
        Duration::from_secs(3600),
        || json!({"state": "started", "latest_gci": (7u64 << 32) | 3, "threads": []}),
    );
    wait_until("node 3 to report started", || {
        node_state(&mut client, 3) == "started"
    });
    let show = client.show().expect("show");
    assert_eq!(show["latest_gci"], (7u64 << 32) | 3);
    let n3 = node(&show, 3);
    assert_eq!(
        n3,
        json!({"id": 3, "type": "data", "host": "127.0.0.1", "group": 0,
        "state": "started", "pid": 4321, "start_count": 1, "shutdown_reason": null,
        "membership_id": null, "start_phase": null, "copy_progress": null})
    );
    assert_eq!(node(&show, 2)["state"], "not_connected");

    let text = mgm::run_command(&addr, "show", false).expect("mgm show");
    let version = format!("tessera-{}", env!("CARGO_PKG_VERSION"));
    assert!(
        text.starts_with("Cluster Configuration\n---------------------\n[ndbd(NDB)]\t2 node(s)\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "id=3\t@127.0.0.1  ({version}, Nodegroup: 0, started, pid 4321)"
        )),
        "{text}"
    );
    assert!(
        text.contains("id=2\t(not connected, accepting connect from 127.0.0.1)"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "[ndb_mgmd(MGM)]\t1 node(s)\nid=1\t@127.0.0.1  ({version})"
        )),
        "{text}"
    );

    let json_text = mgm::run_command(&addr, "  SHOW ", true).expect("mgm show --json");
    assert!(!json_text.contains('\n'), "compact: {json_text}");
    let parsed: Value = serde_json::from_str(&json_text).expect("json output parses");
    assert!(parsed.get("ok").is_none());
    assert_eq!(node(&parsed, 3)["pid"], 4321);
}

#[test]
fn report_threads_asks_for_a_fresh_status() {
    let (_server, addr) = start();
    let mut client = MgmClient::connect(&addr).expect("connect");
    assert_eq!(
        client.report_threads().expect("report"),
        json!({"nodes": []})
    );

    let (session, _) = DataNodeSession::register(&addr, 2, 1).expect("register");
    let pushes = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&pushes);
    // The period is far beyond the test, so every push after the first is
    // a response to a refresh.
    let _pusher = session.spawn_status_pusher(Duration::from_secs(3600), move || {
        let generation = counter.fetch_add(1, Ordering::SeqCst);
        json!({"state": "started", "latest_gci": 1, "threads": [{"name": "ldm0", "generation": generation}]})
    });
    wait_until("the first status", || {
        node_state(&mut client, 2) == "started"
    });
    assert_eq!(pushes.load(Ordering::SeqCst), 1);

    let report = client.report_threads().expect("report");
    assert_eq!(
        report,
        json!({"nodes": [{"id": 2, "threads": [{"name": "ldm0", "generation": 1}]}]})
    );

    let text = mgm::run_command(&addr, "all   REPORT threads", false).expect("mgm report");
    assert_eq!(text, "id=2\tgeneration=2 name=ldm0");
    let json_text = mgm::run_command(&addr, "all report threads", true).expect("mgm report --json");
    let parsed: Value = serde_json::from_str(&json_text).expect("json");
    assert_eq!(
        parsed,
        json!({"nodes": [{"id": 2, "threads": [{"name": "ldm0", "generation": 3}]}]})
    );
}

#[test]
fn report_checkpoints_flattens_each_nodes_fresh_checkpoints_next_to_its_id() {
    let (_server, addr) = start();
    let mut client = MgmClient::connect(&addr).expect("connect");
    assert_eq!(
        client.report_checkpoints().expect("report"),
        json!({"nodes": []})
    );
    assert_eq!(
        mgm::run_command(&addr, "all report checkpoints", false).expect("mgm report"),
        "no data nodes connected"
    );

    let (session2, _) = DataNodeSession::register(&addr, 2, 1).expect("register 2");
    let pushes = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&pushes);
    // The period is far beyond the test, so every push after the first is
    // a response to a refresh.
    let _pusher2 = session2.spawn_status_pusher(Duration::from_secs(3600), move || {
        let generation = counter.fetch_add(1, Ordering::SeqCst);
        json!({"state": "started", "threads": [], "checkpoints": {
            "lcp_count": generation, "live_data_bytes": 10,
            "pacing": {"redo_fill_percent": 3, "busy_percent": 40, "reason": "keep up"}}})
    });
    // Node 3 pushes a status without checkpoints: only its id is shown.
    let (session3, _) = DataNodeSession::register(&addr, 3, 1).expect("register 3");
    let _pusher3 =
        session3.spawn_status_pusher(Duration::from_secs(3600), || json!({"state": "started"}));
    wait_until("both statuses", || {
        node_state(&mut client, 2) == "started" && node_state(&mut client, 3) == "started"
    });
    assert_eq!(pushes.load(Ordering::SeqCst), 1);

    let pacing = json!({"redo_fill_percent": 3, "busy_percent": 40, "reason": "keep up"});
    assert_eq!(
        client.report_checkpoints().expect("report"),
        json!({"nodes": [
            {"id": 2, "lcp_count": 1, "live_data_bytes": 10, "pacing": pacing},
            {"id": 3}
        ]})
    );
    let json_text =
        mgm::run_command(&addr, "ALL report  Checkpoints", true).expect("mgm report --json");
    let parsed: Value = serde_json::from_str(&json_text).expect("json");
    assert_eq!(
        parsed,
        json!({"nodes": [
            {"id": 2, "lcp_count": 2, "live_data_bytes": 10, "pacing": pacing},
            {"id": 3}
        ]})
    );
    let text = mgm::run_command(&addr, "all report checkpoints", false).expect("mgm report");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].starts_with("id=2\tlcp_count=3 ") && lines[0].ends_with("reason=keep up"),
        "{text}"
    );
    assert_eq!(lines[1], "id=3\t(no checkpoints reported)");
}

#[test]
fn an_unknown_request_lists_the_known_ones() {
    let (_server, addr) = start();
    let stream = TcpStream::connect(&addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut stream = BufReader::new(stream);
    let response = raw_request(&mut stream, b"{\"req\": \"report_everything\"}\n");
    assert_eq!(
        response,
        json!({"ok": false, "error": "unknown request \"report_everything\"; known requests: \
            get_config, register_data_node, status, alloc_api_node, show, report_threads, \
            report_checkpoints, arbitrate, fault, restart_node, stop_node, start_node, \
            angel_wait"})
    );
}

/// mgmd restarting does not lose a running data node: its status pusher
/// registers again with the new mgmd, keeping its start count, and
/// pushes on.
#[test]
fn the_status_pusher_comes_back_to_a_restarted_mgmd() {
    let (server, addr) = start();
    let (session, _) = DataNodeSession::register(&addr, 2, 1).expect("register");
    let _pusher =
        session.spawn_status_pusher(Duration::from_millis(20), || json!({"state": "started"}));
    server.shutdown();
    let config = ClusterConfig::from_toml_str(CONFIG, "test.toml").expect("valid");
    let options = ServerOptions {
        bind_addr: Some(addr.clone()),
        secret: Some(test_secret()),
        ..Default::default()
    };
    let _server = start_server_with(config, CONFIG.to_owned(), options).expect("mgmd again");
    let mut client = MgmClient::connect(&addr).expect("connect");
    wait_until("node 2 back and started", || {
        node_state(&mut client, 2) == "started"
    });
    let show = client.show().expect("show");
    assert_eq!(node(&show, 2)["start_count"], 1, "{show}");
}

/// Sends a raw line and reads the one-line response.
fn raw_request(stream: &mut BufReader<TcpStream>, line: &[u8]) -> Value {
    stream.get_mut().write_all(line).expect("write");
    let mut response = String::new();
    stream.read_line(&mut response).expect("read");
    serde_json::from_str(&response).unwrap_or_else(|e| panic!("bad response {response:?}: {e}"))
}

#[test]
fn malformed_lines_get_errors_and_the_connection_survives() {
    let (_server, addr) = start();
    let stream = TcpStream::connect(&addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut stream = BufReader::new(stream);
    let bad: [&[u8]; 9] = [
        b"this is not json\n",
        b"\n",
        b"[1, 2]\n",
        b"{\"req\": 5}\n",
        b"{\"req\": \"frobnicate\"}\n",
        b"\xff\xfe{}\n",
        b"{\"req\": \"register_data_node\"}\n",
        b"{\"req\": \"register_data_node\", \"node_id\": 2, \"pid\": -1}\n",
        b"{\"req\": \"status\", \"status\": {\"state\": \"started\"}}\n",
    ];
    for line in bad {
        let response = raw_request(&mut stream, line);
        assert_eq!(
            response["ok"],
            false,
            "{}: {response}",
            String::from_utf8_lossy(line)
        );
        assert!(
            response["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{response}"
        );
    }
    let response = raw_request(&mut stream, b"{\"req\": \"get_config\"}\r\n");
    assert_eq!(response, json!({"ok": true, "config": CONFIG}));
}

#[test]
fn an_overlong_line_closes_only_that_connection() {
    let (_server, addr) = start();
    let mut stream = TcpStream::connect(&addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    // Exactly one byte over the limit and no newline: the server reads all
    // of it, so it closes cleanly and its error line is not lost to a reset.
    stream
        .write_all(&vec![b'x'; MAX_LINE_BYTES + 1])
        .expect("write");
    let mut rest = String::new();
    stream
        .read_to_string(&mut rest)
        .expect("server answers, then closes");
    let response: Value = serde_json::from_str(rest.trim_end()).expect("one JSON line");
    assert_eq!(response["ok"], false);
    assert!(
        response["error"]
            .as_str()
            .is_some_and(|e| e.contains("longer than")),
        "{response}"
    );

    let mut client = MgmClient::connect(&addr).expect("server still serves");
    assert_eq!(client.get_config().expect("get_config"), CONFIG);
}

#[test]
fn connect_errors_are_clear() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    drop(listener);
    let err = match MgmClient::connect(&addr) {
        Ok(_) => panic!("nothing listens on {addr}"),
        Err(e) => e.to_string(),
    };
    assert_eq!(
        err,
        format!("cannot connect to mgmd at {addr}: connection refused")
    );
}

#[test]
fn bind_errors_are_clear() {
    let (_server, addr) = start();
    let config = ClusterConfig::from_toml_str(CONFIG, "test.toml").expect("valid");
    let options = ServerOptions {
        bind_addr: Some(addr.clone()),
        secret: Some(test_secret()),
        ..Default::default()
    };
    let err = match start_server_with(config, CONFIG.to_owned(), options) {
        Ok(_) => panic!("the port is taken"),
        Err(e) => e.to_string(),
    };
    assert_eq!(
        err,
        format!("cannot listen on {addr}: address already in use")
    );
}

/// A random JSON value, nested at most `depth` deep.
fn random_json(rng: &mut stdx::mix::XorShift, depth: u32) -> Value {
    match rng.below(if depth == 0 { 6 } else { 8 }) {
        0 => Value::Null,
        1 => json!(rng.below(2) == 1),
        2 => json!(rng.below(8)),
        3 => json!(rng.next_u64()),
        4 => json!(-(rng.below(1000) as i64)),
        5 => json!(["state", "started", "", "threads", "é\u{0}"][rng.below(5) as usize]),
        6 => Value::Array(
            (0..rng.below(4))
                .map(|_| random_json(rng, depth - 1))
                .collect(),
        ),
        _ => {
            let keys = ["state", "threads", "latest_gci", "req", "x"];
            Value::Object(
                (0..rng.below(4))
                    .map(|_| {
                        let key = keys[rng.below(keys.len() as u64) as usize].to_owned();
                        (key, random_json(rng, depth - 1))
                    })
                    .collect(),
            )
        }
    }
}

/// A request line: a well-formed request with random fields, such a
/// request mangled, JSON of another shape, deep nesting or random bytes.
/// Never `report_threads` nor `report_checkpoints` (they wait for data
/// nodes), nor a newline.
fn random_line(rng: &mut stdx::mix::XorShift) -> Vec<u8> {
    let requests = [
        "get_config",
        "register_data_node",
        "status",
        "alloc_api_node",
        "show",
        "arbitrate",
        "fault",
        "frobnicate",
        "",
    ];
    let mut request = serde_json::Map::new();
    let req = match rng.below(10) {
        0 => random_json(rng, 2),
        _ => json!(requests[rng.below(requests.len() as u64) as usize]),
    };
    request.insert("req".into(), req);
    for field in ["node_id", "pid", "status"] {
        if rng.below(2) == 0 {
            let value = match (field, rng.below(3)) {
                ("node_id", 0) => json!(2 + rng.below(3)),
                ("status", 0) => json!({ "state": "started", "latest_gci": rng.next_u64() }),
                _ => random_json(rng, 3),
            };
            request.insert(field.into(), value);
        }
    }
    let mut line = serde_json::to_vec(&Value::Object(request)).expect("serializes");
    match rng.below(8) {
        0 => {
            let position = rng.below(line.len() as u64) as usize;
            line[position] = rng.next_u64() as u8;
        }
        1 => line.truncate(rng.below(line.len() as u64) as usize),
        2 => line = (0..rng.below(40)).map(|_| rng.next_u64() as u8).collect(),
        3 => {
            let depth = rng.below(5000) as usize;
            line = [vec![b'['; depth], vec![b']'; depth]].concat();
        }
        4 => line = serde_json::to_vec(&random_json(rng, 3)).expect("serializes"),
        _ => {}
    }
    for byte in &mut line {
        if *byte == b'\n' {
            *byte = b' ';
        }
    }
    line.push(b'\n');
    line
}

#[test]
fn random_lines_get_one_answer_or_none_and_never_stop_the_server() {
    let (_server, addr) = start();
    let stream = TcpStream::connect(&addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut stream = BufReader::new(stream);
    let mut rng = stdx::mix::XorShift::new(0x3a9d);
    let mut answered = [0u32; 2];
    for round in 0..3000 {
        let line = random_line(&mut rng);
        // An unknown request as a marker: its error names it, and every
        // line before that answer answers the random line (a status push
        // of a registered data node gets none).
        let marker = format!("marker-{round}");
        let sentinel = format!("{{\"req\": \"{marker}\"}}\n");
        let writer = stream.get_mut();
        writer.write_all(&line).expect("write");
        writer.write_all(sentinel.as_bytes()).expect("write");
        let mut answers = Vec::new();
        loop {
            let mut response = String::new();
            stream.read_line(&mut response).expect("the server answers");
            let response: Value = serde_json::from_str(&response).unwrap_or_else(|e| {
                panic!(
                    "bad response {response:?} to {}: {e}",
                    String::from_utf8_lossy(&line)
                )
            });
            if response["error"]
                .as_str()
                .is_some_and(|error| error.contains(&format!("\"{marker}\"")))
            {
                break;
            }
            answers.push(response);
        }
        assert!(
            answers.len() <= 1,
            "{} answers to {}: {answers:?}",
            answers.len(),
            String::from_utf8_lossy(&line)
        );
        if let Some(answer) = answers.first() {
            let ok = answer["ok"].as_bool().unwrap_or_else(|| {
                panic!(
                    "answer without \"ok\" to {}: {answer}",
                    String::from_utf8_lossy(&line)
                )
            });
            if !ok {
                assert!(
                    answer["error"].as_str().is_some_and(|e| !e.is_empty()),
                    "{answer}"
                );
            }
            answered[ok as usize] += 1;
        }
    }
    assert!(answered[0] > 1000 && answered[1] > 100, "{answered:?}");
    let mut client = MgmClient::connect(&addr).expect("the server still serves");
    assert_eq!(client.get_config().expect("get_config"), CONFIG);
    client.show().expect("show");
}

/// Every per-connection resource is bounded: at most `max_connections`
/// connections (one more is closed as it is accepted, the others are
/// served on), and a connection that sends no first line is closed after
/// the first-line timeout, freeing its slot. After its first line a
/// connection may stay idle (an API node holds its id that way).
#[test]
fn connections_are_capped_and_silent_ones_are_closed() {
    let config = ClusterConfig::from_toml_str(CONFIG, "test.toml").expect("valid");
    let options = ServerOptions {
        bind_addr: Some("127.0.0.1:0".into()),
        secret: Some(test_secret()),
        max_connections: Some(3),
        first_line_timeout: Some(Duration::from_millis(300)),
        ..Default::default()
    };
    let handle = start_server_with(config, CONFIG.to_owned(), options).expect("mgmd starts");
    let addr = handle.local_addr().to_string();
    let closed_by_server = |stream: &mut std::net::TcpStream| {
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("read timeout");
        let mut byte = [0u8; 1];
        match std::io::Read::read(stream, &mut byte) {
            Ok(0) => true,
            Err(error) => error.kind() == std::io::ErrorKind::ConnectionReset,
            Ok(_) => false,
        }
    };
    let mut a = MgmClient::connect(&addr).expect("connect");
    a.show().expect("served");
    let mut b = MgmClient::connect(&addr).expect("connect");
    b.show().expect("served");
    // Silent: closed after the first-line timeout.
    let mut silent = std::net::TcpStream::connect(&addr).expect("connect");
    assert!(
        closed_by_server(&mut silent),
        "a silent connection is closed"
    );
    // Its slot is free again: a third client is served; a fourth is not.
    // The client that finds the slot free keeps it (a probe that closed
    // would hold it until the server noticed).
    let mut third = None;
    wait_until("the silent connection's slot to be free", || {
        let Ok(mut client) = MgmClient::connect(&addr) else {
            return false;
        };
        let served = client.show().is_ok();
        if served {
            third = Some(client);
        }
        served
    });
    let mut c = third.expect("served");
    let mut fourth = std::net::TcpStream::connect(&addr).expect("the OS accepts it");
    let _ = std::io::Write::write_all(&mut fourth, b"{\"req\": \"show\"}\n");
    assert!(
        closed_by_server(&mut fourth),
        "a connection over the cap is closed"
    );
    // The others are served on, idle or not.
    std::thread::sleep(Duration::from_millis(400));
    a.show()
        .expect("an idle connection past the first line is kept");
    b.show().expect("served");
    c.show().expect("served");
}

/// The cluster secret of the in-process mgmd (its config names no file).
fn test_secret() -> admission::ClusterSecret {
    admission::ClusterSecret::from_bytes(b"mgmd tests: a cluster secret of 32+ bytes")
        .expect("long enough")
}

// What mgmd remembers across its own restart (its state file): each
// data node's start count (the node's incarnation, which must only
// rise) and its arbitration grants; a running data node registering
// again on a new session keeps its start count; a damaged state file
// stops mgmd from starting; a silent data node session ends.

fn state_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mgmd-restart-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn start_in(dir: &Path, silence: Option<Duration>) -> Result<(MgmdHandle, String), String> {
    let config = ClusterConfig::from_toml_str(CONFIG, "test.toml").expect("valid");
    let options = ServerOptions {
        bind_addr: Some("127.0.0.1:0".into()),
        secret: Some(test_secret()),
        state_dir: Some(dir.to_path_buf()),
        data_node_silence: silence,
        ..Default::default()
    };
    let handle =
        start_server_with(config, CONFIG.to_owned(), options).map_err(|error| error.to_string())?;
    let addr = handle.local_addr().to_string();
    Ok((handle, addr))
}

/// Registers node `id`, retrying while mgmd has not yet seen its last
/// session end.
fn register_retrying(addr: &str, id: u16) -> DataNodeSession {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        match DataNodeSession::register(addr, id, 100 + u32::from(id)) {
            Ok((session, _)) => return session,
            Err(error) => {
                assert!(std::time::Instant::now() < deadline, "{error}");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

fn request_on_new_connection(addr: &str, request: &Value) -> (BufReader<TcpStream>, Value) {
    let stream = TcpStream::connect(addr).expect("connect");
    let mut reader = BufReader::new(stream);
    let mut line = serde_json::to_vec(request).expect("json");
    line.push(b'\n');
    reader.get_mut().write_all(&line).expect("write");
    let mut answer = String::new();
    reader.read_line(&mut answer).expect("read");
    (reader, serde_json::from_str(&answer).expect("an answer"))
}

fn proof(node: u16, membership_id: u32, before: &[u16], side: &[u16]) -> [u8; 32] {
    let set = |ids: &[u16]| signal::NodeSet::of(ids.iter().map(|&id| signal::NodeId(id)));
    test_secret().arbitration_proof(&admission::ArbitrationStatement {
        node: signal::NodeId(node),
        membership_id,
        before: set(before),
        side: set(side),
    })
}

fn granted(addr: &str, node: u16, side: &[u16]) -> bool {
    MgmClient::connect(addr)
        .expect("connect")
        .arbitrate(node, 1, &[2, 3], side, &proof(node, 1, &[2, 3], side))
        .expect("an answer")
        .granted
}

#[test]
fn start_counts_rise_across_an_mgmd_restart_and_a_reattached_node_keeps_its_own() {
    let dir = state_dir("counts");
    let (server, addr) = start_in(&dir, None).expect("starts");
    assert_eq!(register_retrying(&addr, 2).start_count(), 1);
    assert_eq!(register_retrying(&addr, 2).start_count(), 2);
    let _three = register_retrying(&addr, 3);
    drop(server);

    let (server, addr) = start_in(&dir, None).expect("starts again");
    // A node that was running comes back with the count it runs with.
    let (_session, answer) = request_on_new_connection(
        &addr,
        &json!({"req": "register_data_node", "node_id": 3, "pid": 103, "start_count": 9}),
    );
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(answer["start_count"], 9, "{answer}");
    // A fresh start of node 2 goes on from where the last mgmd was.
    assert_eq!(register_retrying(&addr, 2).start_count(), 3);
    // The reattached count is remembered too.
    drop(server);
    let (_server, addr) = start_in(&dir, None).expect("starts a third time");
    assert_eq!(register_retrying(&addr, 3).start_count(), 10);
    let (_, bad) = request_on_new_connection(
        &addr,
        &json!({"req": "register_data_node", "node_id": 2, "pid": 1, "start_count": 0}),
    );
    assert_eq!(bad["ok"], false, "{bad}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_grant_made_before_an_mgmd_restart_still_refuses_the_other_side() {
    let dir = state_dir("grants");
    let (server, addr) = start_in(&dir, None).expect("starts");
    let _two = register_retrying(&addr, 2);
    assert!(granted(&addr, 2, &[2]));
    drop(server);
    let (_server, addr) = start_in(&dir, None).expect("starts again");
    assert!(!granted(&addr, 3, &[3]), "the other half of the same split");
    assert!(granted(&addr, 2, &[2]), "the granted half asking again");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_damaged_state_file_stops_mgmd_from_starting_saying_why() {
    let dir = state_dir("damaged");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("mgmd-1.state.json"), "{ not json").unwrap();
    let error = start_in(&dir, None).err().expect("refused");
    assert!(error.contains("damaged"), "{error}");
    assert!(error.contains("start counts"), "{error}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_silent_data_node_session_ends_and_the_node_can_register_again() {
    let dir = state_dir("silence");
    let (_server, addr) = start_in(&dir, Some(Duration::from_millis(300))).expect("starts");
    // Registered, then silent (no status pushes): as a node cut off.
    let _silent = register_retrying(&addr, 2);
    let mut client = MgmClient::connect(&addr).expect("connect");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let show = client.show().expect("show");
        let state = show["nodes"]
            .as_array()
            .and_then(|nodes| nodes.iter().find(|node| node["id"] == 2))
            .map(|node| node["state"].clone());
        if state == Some(json!("failed")) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{show}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(register_retrying(&addr, 2).start_count(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_node_starting_just_after_mgmd_restarted_hears_of_the_nodes_still_running() {
    let dir = state_dir("grace");
    let (server, addr) = start_in(&dir, None).expect("starts");
    let _two = register_retrying(&addr, 2);
    let _three = register_retrying(&addr, 3);
    drop(server);

    // mgmd again; node 2 starts fresh at once, while node 3, which ran
    // on, registers again a moment later (its session's retry) and says
    // it is started.
    let (_server, addr) = start_in(&dir, None).expect("starts again");
    let fresh = {
        let addr = addr.clone();
        std::thread::spawn(move || {
            request_on_new_connection(
                &addr,
                &json!({"req": "register_data_node", "node_id": 2, "pid": 202}),
            )
            .1
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let (mut three, answer) = request_on_new_connection(
        &addr,
        &json!({"req": "register_data_node", "node_id": 3, "pid": 103, "start_count": 1}),
    );
    assert_eq!(answer["ok"], true, "{answer}");
    let mut status = serde_json::to_vec(
        &json!({"req": "status", "status": {"state": "started", "latest_gci": 1, "threads": []}}),
    )
    .expect("json");
    status.push(b'\n');
    three.get_mut().write_all(&status).expect("push a status");
    let answer = fresh.join().expect("the fresh registration");
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(
        answer["cluster_running"], true,
        "node 2 must rejoin the running cluster, not start a new one: {answer}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
