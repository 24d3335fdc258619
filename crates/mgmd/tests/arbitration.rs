//! mgmd as the arbitrator (`arbitrate`, docs/mgm-protocol.md;
//! docs/design/failures.md §4): one side per split is granted, whoever asks
//! first; requests are authenticated by a proof made with the cluster
//! secret; a malformed one gets an error and the connection stays usable.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use admission::{ArbitrationStatement, ClusterSecret};
use config::ClusterConfig;
use mgmd::client::{mac_to_hex, ArbitrationAnswer, MgmClient};
use mgmd::{start_server_with, MgmdError, MgmdHandle, ServerOptions};
use serde_json::{json, Value};
use signal::{NodeId, NodeSet};

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

[[data_node]]
id = 4
host = "127.0.0.1"
port = 11863
data_dir = "d4"

[[data_node]]
id = 5
host = "127.0.0.1"
port = 11864
data_dir = "d5"
"#;

/// The cluster secret of the in-process mgmd (its config names no file).
fn test_secret() -> ClusterSecret {
    ClusterSecret::from_bytes(b"mgmd arbitration tests: a secret of 32+ bytes")
        .expect("long enough")
}

/// Starts mgmd with `text` as its config on a port the OS picks.
fn start_with(text: &str) -> (MgmdHandle, String) {
    let config = ClusterConfig::from_toml_str(text, "test.toml").expect("test config is valid");
    let options = ServerOptions {
        bind_addr: Some("127.0.0.1:0".into()),
        secret: Some(test_secret()),
        ..Default::default()
    };
    let handle = start_server_with(config, text.to_owned(), options).expect("mgmd starts");
    let addr = handle.local_addr().to_string();
    (handle, addr)
}

fn start() -> (MgmdHandle, String) {
    start_with(CONFIG)
}

fn set(ids: &[u16]) -> NodeSet {
    NodeSet::of(ids.iter().map(|&id| NodeId(id)))
}

/// The proof node `node` makes for its request, with `secret`.
fn proof_with(
    secret: &ClusterSecret,
    node: u16,
    membership_id: u32,
    before: &[u16],
    side: &[u16],
) -> [u8; 32] {
    secret.arbitration_proof(&ArbitrationStatement {
        node: NodeId(node),
        membership_id,
        before: set(before),
        side: set(side),
    })
}

fn proof(node: u16, membership_id: u32, before: &[u16], side: &[u16]) -> [u8; 32] {
    proof_with(&test_secret(), node, membership_id, before, side)
}

/// Asks as a data node does: on a fresh connection, with a good proof.
fn ask(
    addr: &str,
    node: u16,
    membership_id: u32,
    before: &[u16],
    side: &[u16],
) -> ArbitrationAnswer {
    MgmClient::connect(addr)
        .expect("connect")
        .arbitrate(
            node,
            membership_id,
            before,
            side,
            &proof(node, membership_id, before, side),
        )
        .expect("an answer")
}

fn raw_connection(addr: &str) -> BufReader<TcpStream> {
    let stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    BufReader::new(stream)
}

/// Sends one request line and reads the one-line response.
fn raw_request(stream: &mut BufReader<TcpStream>, request: &Value) -> Value {
    let mut line = serde_json::to_vec(request).expect("serializes");
    line.push(b'\n');
    stream.get_mut().write_all(&line).expect("write");
    let mut response = String::new();
    stream.read_line(&mut response).expect("read");
    serde_json::from_str(&response).unwrap_or_else(|e| panic!("bad response {response:?}: {e}"))
}

#[test]
fn the_first_side_of_a_split_to_ask_is_granted_and_the_other_refused() {
    let (_server, addr) = start();
    let first = ask(&addr, 2, 5, &[2, 3], &[2]);
    assert!(first.granted, "{first:?}");
    assert_eq!(
        first.reason,
        "side {2} is the first side of membership 5 {2, 3} to ask: granted"
    );

    let other = ask(&addr, 3, 5, &[2, 3], &[3]);
    assert!(!other.granted, "{other:?}");
    assert_eq!(
        other.reason,
        "side {2} was granted for membership 5 {2, 3}; side {3} may not continue"
    );
    // Asking again changes nothing: the decision is the table's, not the
    // moment's.
    assert_eq!(ask(&addr, 3, 5, &[2, 3], &[3]), other);
    // The granted side asking again (a retry) is granted again.
    let again = ask(&addr, 2, 5, &[2, 3], &[2]);
    assert!(again.granted, "{again:?}");
    assert_eq!(
        again.reason,
        "side {2} was granted for membership 5 {2, 3}; side {2} is within it: granted"
    );

    // Four nodes split two and two: the side granted may ask again without
    // a node it lost since (its president died, another asks), and any of
    // its nodes may ask; the other side, or a side reaching into it, may not.
    assert!(ask(&addr, 4, 9, &[2, 3, 4, 5], &[4, 5]).granted);
    assert!(!ask(&addr, 2, 9, &[2, 3, 4, 5], &[2, 3]).granted);
    assert!(ask(&addr, 5, 9, &[2, 3, 4, 5], &[4, 5]).granted);
    assert!(ask(&addr, 5, 9, &[2, 3, 4, 5], &[5]).granted);
    let reaching = ask(&addr, 3, 9, &[2, 3, 4, 5], &[3, 4]);
    assert!(!reaching.granted, "{reaching:?}");
    assert!(
        reaching.reason.contains("side {4, 5} was granted"),
        "{reaching:?}"
    );
    assert!(!ask(&addr, 3, 9, &[2, 3, 4, 5], &[3]).granted);
}

#[test]
fn each_split_is_decided_on_its_own() {
    let (_server, addr) = start();
    assert!(ask(&addr, 2, 5, &[2, 3], &[2]).granted);
    // A later split (another membership id): the first to ask is granted,
    // whatever was granted before.
    assert!(ask(&addr, 3, 6, &[2, 3], &[3]).granted);
    assert!(!ask(&addr, 2, 6, &[2, 3], &[2]).granted);
    // The same id with other members is another membership.
    assert!(ask(&addr, 3, 5, &[3, 4], &[3]).granted);
    assert!(!ask(&addr, 4, 5, &[3, 4], &[4]).granted);
    // And the first split's decision stands.
    assert!(!ask(&addr, 3, 5, &[2, 3], &[3]).granted);
    assert!(ask(&addr, 2, 5, &[2, 3], &[2]).granted);
}

#[test]
fn bad_arbitration_requests_get_errors_and_the_connection_survives() {
    let (_server, addr) = start();
    let mut stream = raw_connection(&addr);
    let request = |node: Value, membership: Value, before: Value, side: Value, proof: Value| {
        json!({"req": "arbitrate", "node_id": node, "membership_id": membership,
               "before": before, "side": side, "proof": proof})
    };
    let good = |node: u16, side: &[u16]| json!(mac_to_hex(&proof(node, 5, &[2, 3], side)));
    let other_secret = ClusterSecret::from_bytes(&[b'z'; 40]).expect("long enough");
    let mut flipped = proof(3, 5, &[2, 3], &[3]);
    flipped[7] ^= 1;
    let cases: Vec<(Value, &str)> = vec![
        // Proofs: wrong bits, another secret's, made for another request.
        (
            request(json!(3), json!(5), json!([2, 3]), json!([3]), json!(mac_to_hex(&flipped))),
            "the proof of node 3 does not verify",
        ),
        (
            request(
                json!(3),
                json!(5),
                json!([2, 3]),
                json!([3]),
                json!(mac_to_hex(&proof_with(&other_secret, 3, 5, &[2, 3], &[3]))),
            ),
            "does not verify",
        ),
        (
            // Node 2's proof for side {2}, sent for side {3}.
            request(json!(3), json!(5), json!([2, 3]), json!([3]), good(2, &[2])),
            "does not verify",
        ),
        (
            request(json!(3), json!(5), json!([2, 3]), json!([3]), json!("abc")),
            "\"proof\", 64 hex digits",
        ),
        (
            request(json!(3), json!(5), json!([2, 3]), json!([3]), json!("g".repeat(64))),
            "\"proof\", 64 hex digits",
        ),
        (
            request(json!(3), json!(5), json!([2, 3]), json!([3]), Value::Null),
            "\"proof\", 64 hex digits",
        ),
        // Sets.
        (
            request(json!(3), json!(5), json!([2, 3]), json!([3, 4]), good(3, &[3])),
            "side {3, 4} is not a subset of the membership {2, 3} it split from (nodes {4} are not members)",
        ),
        (
            request(json!(2), json!(5), json!([2, 3]), json!([3]), good(3, &[3])),
            "node 2 asks for side {3}, which it is not on",
        ),
        (
            request(json!(3), json!(5), json!([2, 3]), json!([]), good(3, &[3])),
            "\"side\", the side asking to continue",
        ),
        (
            request(json!(3), json!(5), json!([2, 3]), json!(3), good(3, &[3])),
            "\"side\"",
        ),
        (
            request(json!(3), json!(5), json!([0, 2, 3]), json!([3]), good(3, &[3])),
            "\"before\", the members of that membership",
        ),
        (
            request(json!(3), json!(5), json!([2, 128]), json!([3]), good(3, &[3])),
            "\"before\"",
        ),
        (
            request(json!(3), json!(5), json!("2, 3"), json!([3]), good(3, &[3])),
            "\"before\"",
        ),
        (
            request(json!(3), json!(5), json!([2, 3.5]), json!([3]), good(3, &[3])),
            "\"before\"",
        ),
        // Node id and membership id.
        (
            request(json!(0), json!(5), json!([2, 3]), json!([3]), good(3, &[3])),
            "\"node_id\", the asking data node's id (1..=127)",
        ),
        (
            request(json!(128), json!(5), json!([2, 3]), json!([3]), good(3, &[3])),
            "\"node_id\"",
        ),
        (
            request(json!("3"), json!(5), json!([2, 3]), json!([3]), good(3, &[3])),
            "\"node_id\"",
        ),
        (
            request(json!(3), json!(0), json!([2, 3]), json!([3]), good(3, &[3])),
            "\"membership_id\", the id of the agreed membership that split (1..=4294967295)",
        ),
        (
            request(json!(3), json!(-5), json!([2, 3]), json!([3]), good(3, &[3])),
            "\"membership_id\"",
        ),
        (
            request(json!(3), json!(1u64 << 32), json!([2, 3]), json!([3]), good(3, &[3])),
            "\"membership_id\" 4294967296 is over 4294967295",
        ),
        (json!({"req": "arbitrate"}), "\"node_id\""),
    ];
    for (request, expected) in &cases {
        let response = raw_request(&mut stream, request);
        assert_eq!(response["ok"], false, "{request}: {response}");
        let error = response["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(expected),
            "{request}: {error:?} lacks {expected:?}"
        );
    }
    // None of them was a decision: node 3's side, which sent all the bad
    // requests, is granted on this same connection by its first good one.
    let response = raw_request(
        &mut stream,
        &request(json!(3), json!(5), json!([2, 3]), json!([3]), good(3, &[3])),
    );
    assert_eq!(response["ok"], true, "{response}");
    assert_eq!(response["granted"], true, "{response}");
    // The client reports an error as an error, not as a refusal.
    let mut client = MgmClient::connect(&addr).expect("connect");
    let error = client
        .arbitrate(2, 5, &[2, 3], &[2], &flipped)
        .expect_err("a bad proof is an error");
    assert!(matches!(error, MgmdError::Refused(_)), "{error:?}");
    assert!(!ask(&addr, 2, 5, &[2, 3], &[2]).granted);
}

#[test]
fn with_arbitration_rank_0_mgmd_grants_no_side() {
    let text = CONFIG.replace("port = 11860\n", "port = 11860\narbitration_rank = 0\n");
    assert!(text.contains("arbitration_rank = 0"));
    let (_server, addr) = start_with(&text);
    let refused = ArbitrationAnswer {
        granted: false,
        reason: "mgmd is not the arbitrator: arbitration_rank = 0 in its config".into(),
    };
    assert_eq!(ask(&addr, 2, 5, &[2, 3], &[2]), refused);
    assert_eq!(ask(&addr, 3, 5, &[2, 3], &[3]), refused);
    // Requests are still checked.
    let mut client = MgmClient::connect(&addr).expect("connect");
    let error = client
        .arbitrate(2, 5, &[2, 3], &[2], &[0; 32])
        .expect_err("a bad proof is an error");
    assert!(error.to_string().contains("does not verify"), "{error}");
}

#[test]
fn the_client_round_trips_an_arbitration_on_one_connection() {
    let (_server, addr) = start();
    let mut client = MgmClient::connect(&addr).expect("connect");
    let granted = client
        .arbitrate(
            4,
            12,
            &[3, 2, 5, 4],
            &[5, 4],
            &proof(4, 12, &[2, 3, 4, 5], &[4, 5]),
        )
        .expect("granted");
    assert_eq!(
        granted,
        ArbitrationAnswer {
            granted: true,
            reason: "side {4, 5} is the first side of membership 12 {2, 3, 4, 5} to ask: granted"
                .into(),
        }
    );
    let refused = client
        .arbitrate(
            2,
            12,
            &[2, 3, 4, 5],
            &[2, 3],
            &proof(2, 12, &[2, 3, 4, 5], &[2, 3]),
        )
        .expect("refused");
    assert!(!refused.granted);
    assert_eq!(
        refused.reason,
        "side {4, 5} was granted for membership 12 {2, 3, 4, 5}; side {2, 3} may not continue"
    );
    // The connection is still usable for anything else.
    assert_eq!(client.get_config().expect("config"), CONFIG);
}

/// Both sides asking at once, each on its own connections: one side is
/// granted every time it asks, the other never.
#[test]
fn concurrent_requests_of_two_sides_grant_one() {
    let (_server, addr) = start();
    let threads: Vec<_> = (0..16)
        .map(|index| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let (node, side): (u16, &[u16]) = if index % 2 == 0 {
                    (2, &[2, 3])
                } else {
                    (4, &[4, 5])
                };
                (node, ask(&addr, node, 3, &[2, 3, 4, 5], side).granted)
            })
        })
        .collect();
    let answers: Vec<(u16, bool)> = threads
        .into_iter()
        .map(|thread| thread.join().expect("no panic"))
        .collect();
    let granted: Vec<u16> = answers.iter().filter(|a| a.1).map(|a| a.0).collect();
    assert_eq!(granted.len(), 8, "{answers:?}");
    assert!(
        granted.iter().all(|&node| node == granted[0]),
        "{answers:?}"
    );
}

/// The grant table is bounded: after 1024 newer splits, the oldest is
/// forgotten (and its other side could be granted); the rest are kept.
#[test]
fn only_the_most_recent_1024_grants_are_kept() {
    let (_server, addr) = start();
    let mut client = MgmClient::connect(&addr).expect("connect");
    for membership in 1..=1025 {
        let answer = client
            .arbitrate(
                2,
                membership,
                &[2, 3],
                &[2],
                &proof(2, membership, &[2, 3], &[2]),
            )
            .expect("answer");
        assert!(answer.granted, "{membership}: {answer:?}");
    }
    assert!(!ask(&addr, 3, 2, &[2, 3], &[3]).granted, "kept");
    assert!(!ask(&addr, 3, 1025, &[2, 3], &[3]).granted, "kept");
    assert!(ask(&addr, 3, 1, &[2, 3], &[3]).granted, "forgotten");
}

/// A whole-cluster restart starts membership ids again at 1: the grants
/// of the last run must not answer for the new one. The first data node
/// to register while no other is up starts a new run; while one stays
/// up, the run goes on.
#[test]
fn a_new_run_of_the_cluster_forgets_the_last_runs_grants() {
    let (_server, addr) = start();
    let register = |node: u16| {
        wait_for_registration(|| {
            mgmd::client::DataNodeSession::register(&addr, node, 100 + u32::from(node))
                .ok()
                .map(|(session, _)| session)
        })
    };
    // mgmd notices a closed session asynchronously.
    let wait_until_down = |node: u64| {
        wait_for_registration(|| {
            let show = MgmClient::connect(&addr).ok()?.show().ok()?;
            let state = show["nodes"]
                .as_array()?
                .iter()
                .find(|entry| entry["id"] == node)?["state"]
                .clone();
            (state != "starting").then_some(())
        })
    };
    let two = register(2);
    let three = register(3);
    assert!(ask(&addr, 2, 1, &[2, 3], &[2]).granted);
    // Node 3 restarts while node 2 runs: the same run.
    drop(three);
    wait_until_down(3);
    let three = register(3);
    assert!(!ask(&addr, 3, 1, &[2, 3], &[3]).granted);
    // Every node down, then up again: a new run, decided afresh.
    drop(two);
    drop(three);
    wait_until_down(2);
    wait_until_down(3);
    let _three = register(3);
    let _two = register(2);
    assert!(ask(&addr, 3, 1, &[2, 3], &[3]).granted);
    assert!(!ask(&addr, 2, 1, &[2, 3], &[2]).granted);
}

/// mgmd notices a closed session asynchronously: retry registering.
fn wait_for_registration<T>(mut attempt: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(value) = attempt() {
            return value;
        }
        assert!(std::time::Instant::now() < deadline, "never registered");
        std::thread::sleep(Duration::from_millis(10));
    }
}
