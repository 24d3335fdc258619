//! Bad input must be refused clearly and hurt nobody else: a malformed
//! config stops `tessera mgmd` with the file, line and key to fix; a second
//! `tessera node` claiming a taken node id exits with a message naming the
//! id and the running node's pid while the first keeps serving; garbage on
//! the data node's port (or mgmd's) gets that connection closed while the
//! node stays up and clients connected before and after keep working.

mod common;

use client::{Cluster, ColumnType, Commit, ConnectOptions, Table, TableDef, Value};
use common::{
    column, create_table, fresh_dir, key, keyed_definition, read_row, run_tessera, ClusterOptions,
    TestCluster,
};
use signal::codec;
use signal::signals::{ApiRegReq, ApiToken, LinkHelloReq, LinkProofRep, API_PROTOCOL_VERSION};
use signal::{BlockKind, BlockRef, Envelope, NodeId, Signal};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

/// Upper bound for a command that should fail at once.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// Upper bound for the node to close a connection it got garbage on.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(30);

const GOOD_CONFIG: &str = "\
[mgmd]
node_id = 1
host = \"127.0.0.1\"
port = 1

[cluster]
replicas = 1
data_memory = \"16M\"
lock_wait_timeout_ms = 1200

[threads]
ldm = 2
tc = 1

[[data_node]]
id = 2
host = \"127.0.0.1\"
port = 2
data_dir = \"node2\"
";

/// 1-based line of the first line of `text` starting with `prefix`.
fn line_of(text: &str, prefix: &str) -> usize {
    text.lines()
        .position(|line| line.starts_with(prefix))
        .map(|index| index + 1)
        .unwrap_or_else(|| panic!("no line starting with {prefix:?}"))
}

#[test]
fn malformed_config_stops_mgmd_with_file_line_and_key() {
    let dir = fresh_dir("bad-config");
    // (case, replace this line prefix's line with, expected key in message)
    let cases: [(&str, &str, &str, Option<&str>); 6] = [
        (
            "wrong type",
            "replicas = 1",
            "replicas = \"two\"",
            Some("cluster.replicas"),
        ),
        (
            "misspelt key",
            "lock_wait_timeout_ms",
            "lock_wait_timeot_ms = 1200",
            Some("cluster.lock_wait_timeot_ms"),
        ),
        ("out of range", "ldm = 2", "ldm = 0", Some("threads.ldm")),
        (
            "bad size",
            "data_memory",
            "data_memory = \"lots\"",
            Some("cluster.data_memory"),
        ),
        (
            "negative port",
            "port = 2",
            "port = -5",
            Some("data_node.port"),
        ),
        ("TOML syntax", "[threads]", "[threads", None),
    ];
    for (index, (case, prefix, replacement, key)) in cases.into_iter().enumerate() {
        let line = line_of(GOOD_CONFIG, prefix);
        let text: String = GOOD_CONFIG
            .lines()
            .enumerate()
            .map(|(number, original)| {
                if number + 1 == line {
                    format!("{replacement}\n")
                } else {
                    format!("{original}\n")
                }
            })
            .collect();
        let path = dir.join(format!("bad{index}.toml"));
        std::fs::write(&path, &text).expect("write config");
        let finished = run_tessera(
            &["mgmd", "--config", &path.to_string_lossy()],
            COMMAND_TIMEOUT,
        );
        assert!(
            !finished.status.success(),
            "{case}: mgmd accepted a bad config: {finished:?}"
        );
        let location = format!("bad{index}.toml:{line}:");
        assert!(
            finished.stderr.contains(&location),
            "{case}: the message must name the file and line ({location}): {:?}",
            finished.stderr
        );
        if let Some(key) = key {
            assert!(
                finished.stderr.contains(key),
                "{case}: the message must name the key {key}: {:?}",
                finished.stderr
            );
        }
    }

    let missing = dir.join("missing.toml");
    let finished = run_tessera(
        &["mgmd", "--config", &missing.to_string_lossy()],
        COMMAND_TIMEOUT,
    );
    assert!(!finished.status.success());
    assert!(
        finished.stderr.contains("missing.toml"),
        "{:?}",
        finished.stderr
    );

    // No mgmd to register with.
    let nobody = format!("127.0.0.1:{}", common::free_port());
    let finished = run_tessera(
        &["node", "--mgmd", &nobody, "--node-id", "2"],
        COMMAND_TIMEOUT,
    );
    assert!(!finished.status.success(), "{finished:?}");
    assert!(
        finished.stderr.contains("cannot register node 2 with mgmd"),
        "{:?}",
        finished.stderr
    );

    // Bad command lines are refused by the argument parser.
    for args in [
        &["node", "--mgmd", "127.0.0.1:1", "--node-id", "two"][..],
        &["mgmd"][..],
        &[
            "bench",
            "keylookup",
            "--mgmd",
            "127.0.0.1:1",
            "--phases",
            "insert,fly",
        ][..],
    ] {
        let finished = run_tessera(args, COMMAND_TIMEOUT);
        assert!(!finished.status.success(), "{args:?}: {finished:?}");
        assert!(
            !finished.stderr.trim().is_empty(),
            "{args:?} explains itself"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn table_definition() -> TableDef {
    keyed_definition("t", vec![column("v", ColumnType::VarChar(64), false)])
}

/// Writes `k` and reads it back through `cluster`.
fn round_trip(cluster: &Cluster, table: &Arc<Table>, k: u32, what: &str) {
    let mut transaction = cluster.transaction();
    transaction
        .write(
            table,
            &[("k", Value::UInt(k.into())), ("v", Value::from(what))],
        )
        .expect("valid write");
    transaction
        .execute(Commit::Yes)
        .unwrap_or_else(|error| panic!("{what}: write: {error}"));
    let row =
        read_row(cluster, table, &key(k)).unwrap_or_else(|error| panic!("{what}: read: {error}"));
    assert_eq!(row.get("v"), Some(&Value::from(what)));
}

/// A frame with a correct header and checksum around `body`.
fn framed(sender: u16, signal_count: u16, body: &[u8]) -> Vec<u8> {
    framed_at(sender, signal_count, body, 0)
}

/// [`framed`] with sequence number `sequence`.
fn framed_at(sender: u16, signal_count: u16, body: &[u8], sequence: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let start = codec::begin_frame(&mut out);
    out.extend_from_slice(body);
    codec::finish_frame(&mut out, start, NodeId(sender), 7, sequence, signal_count);
    out
}

/// A frame of one signal from `from` to `to`, with sequence `sequence`.
fn signal_frame(from: BlockRef, to: BlockRef, signal: Signal, sequence: u64) -> Vec<u8> {
    let mut body = Vec::new();
    codec::encode_signal(&mut body, &Envelope { from, to, signal }).expect("a wire signal");
    framed_at(from.node.0, 1, &body, sequence)
}

/// An API node's first frame: API_REGREQ as `api_node` with `token`.
fn registration_frame(api_node: u16, token: ApiToken) -> Vec<u8> {
    let registration = ApiRegReq {
        protocol_version: API_PROTOCOL_VERSION,
        token,
    };
    signal_frame(
        BlockRef::new(NodeId(api_node), BlockKind::Api, 0),
        BlockRef::new(NodeId(2), BlockKind::Membership, 0),
        registration.into(),
        0,
    )
}

/// A data node's link handshake as dialer `claimed` to `target` without
/// the cluster secret: the hello, then a made-up proof.
fn link_claim(claimed: u16, target: u16) -> Vec<u8> {
    let from = BlockRef::new(NodeId(claimed), BlockKind::Membership, 0);
    let to = BlockRef::new(NodeId(target), BlockKind::Membership, 0);
    let mut frames = signal_frame(from, to, LinkHelloReq { challenge: [3; 16] }.into(), 0);
    frames.extend(signal_frame(
        from,
        to,
        LinkProofRep { proof: [9; 32] }.into(),
        1,
    ));
    frames
}

fn pseudo_random_bytes(count: usize, mut state: u64) -> Vec<u8> {
    (0..count)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// The payloads, each sent on a connection of its own.
fn garbage() -> Vec<(&'static str, Vec<u8>)> {
    let mut absurd_length = Vec::new();
    absurd_length.extend_from_slice(b"TSRA");
    absurd_length.extend_from_slice(&codec::FRAME_VERSION.to_le_bytes());
    absurd_length.extend_from_slice(&(codec::FRAME_HEADER_BYTES as u16).to_le_bytes());
    absurd_length.extend_from_slice(&u32::MAX.to_le_bytes());
    absurd_length.resize(codec::FRAME_HEADER_BYTES, 0);
    let mut bad_checksum = framed(200, 1, &pseudo_random_bytes(64, 3));
    bad_checksum[40] ^= 0xff;
    vec![
        (
            "random bytes",
            pseudo_random_bytes(4096, 0x1234_5678_9abc_def1),
        ),
        (
            "an HTTP request",
            b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: curl/8.0\r\nAccept: */*\r\n\r\n"
                .to_vec(),
        ),
        ("a frame header with an absurd length", absurd_length),
        ("a frame with a bad checksum", bad_checksum),
        (
            "a well-framed random signal",
            framed(200, 1, &pseudo_random_bytes(64, 7)),
        ),
        (
            "a frame claiming 3 signals with none inside",
            framed(201, 3, &[]),
        ),
        (
            "a frame from the node's own id",
            framed(2, 1, &pseudo_random_bytes(40, 11)),
        ),
    ]
}

/// Sends `payload` on a new connection to `addr` and waits for the peer to
/// close it. Returns whether it did (end of stream or reset).
fn send_and_expect_close(addr: &str, payload: &[u8]) -> Result<(), String> {
    let mut stream = TcpStream::connect(addr).map_err(|error| format!("connect: {error}"))?;
    stream
        .set_read_timeout(Some(CLOSE_TIMEOUT))
        .map_err(|error| error.to_string())?;
    // The node may close before reading everything: a failed write is fine.
    let _ = stream.write_all(payload);
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return Ok(()),
            // Whatever the node answers before closing is not examined.
            Ok(_) => continue,
            Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(format!("still open after {CLOSE_TIMEOUT:?}"))
            }
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return Ok(()),
        }
    }
}

#[test]
fn taken_node_id_and_garbage_leave_the_node_serving() {
    let mut processes = TestCluster::start(ClusterOptions {
        name: "bad-input",
        ..Default::default()
    });
    let before = processes.connect();
    let table_before = create_table(&before, &table_definition());
    round_trip(&before, &table_before, 1, "first");

    // A second node claiming id 2.
    let finished = run_tessera(
        &["node", "--mgmd", &processes.mgmd_addr(), "--node-id", "2"],
        COMMAND_TIMEOUT,
    );
    assert!(
        !finished.status.success(),
        "a second node 2 must not start: {finished:?}"
    );
    assert!(
        finished.stderr.contains("node id 2 is already in use")
            && finished
                .stderr
                .contains(&format!("pid {}", processes.node_pid())),
        "the message names the id and the running node: {:?}",
        finished.stderr
    );
    processes.assert_node_serving();
    round_trip(&before, &table_before, 1, "after dup id");

    // A node id the config does not have.
    let finished = run_tessera(
        &["node", "--mgmd", &processes.mgmd_addr(), "--node-id", "5"],
        COMMAND_TIMEOUT,
    );
    assert!(!finished.status.success(), "{finished:?}");
    assert!(
        finished.stderr.contains("node id 5 is not a data node"),
        "{:?}",
        finished.stderr
    );
    processes.assert_node_serving();

    // The earlier client keeps a transaction open (a row locked) across
    // all the garbage: nothing another connection sends may abort it.
    round_trip(&before, &table_before, 100, "locked");
    let mut open = before.transaction();
    open.update(
        &table_before,
        &[Value::UInt(100)],
        &[("v", Value::from("committed at the end"))],
    )
    .expect("valid update");
    open.execute(Commit::No).expect("lock row 100");

    // Garbage on the data node's port.
    let mut payloads = garbage();
    payloads.push((
        "a frame claiming the earlier client's node id",
        framed(before.api_node(), 1, &pseudo_random_bytes(64, 13)),
    ));
    for (what, payload) in &payloads {
        if let Err(problem) = send_and_expect_close(&processes.node_addr(), payload) {
            panic!("{what}: the node did not drop the connection: {problem}");
        }
        processes.assert_node_serving();
        assert!(
            before.is_connected(),
            "{what}: the earlier client was cut off"
        );
        round_trip(&before, &table_before, 1, what);
        let after = processes.connect();
        let table_after = after.table("t").expect("t");
        round_trip(&after, &table_after, 2, what);
    }
    open.execute(Commit::Yes)
        .expect("the open transaction survives other connections' garbage");
    round_trip(&before, &table_before, 100, "row 100 is free again");

    // Clients closing their own connections are logged too; count the others.
    let closes = processes
        .node_log()
        .lines()
        .filter(|line| {
            line.contains("closed connection from") && !line.contains("peer closed the connection")
        })
        .count();
    assert!(
        closes >= payloads.len(),
        "the node logs why it dropped each connection ({closes} of {}): {}",
        payloads.len(),
        processes.node_log()
    );

    // Garbage on mgmd's port: malformed lines get error answers, a line
    // over mgmd's limit gets the connection closed, and mgmd keeps serving.
    {
        let mut stream = TcpStream::connect(processes.mgmd_addr()).expect("connect to mgmd");
        stream
            .set_read_timeout(Some(CLOSE_TIMEOUT))
            .expect("read timeout");
        let mut junk = vec![0xff; 30_000];
        junk.extend_from_slice(b"\n{not json\n\"a string\"\n[1,2]\n");
        stream.write_all(&junk).expect("mgmd reads malformed lines");
        let mut answer = [0u8; 256];
        assert!(
            stream.read(&mut answer).is_ok_and(|length| length > 0),
            "mgmd answers a malformed line"
        );
    }
    if let Err(problem) =
        send_and_expect_close(&processes.mgmd_addr(), &vec![b'x'; (1 << 20) + 4096])
    {
        panic!("mgmd kept a connection sending an endless line: {problem}");
    }
    processes.assert_node_serving();
    round_trip(&processes.connect(), &table_before, 3, "after mgmd garbage");

    // And the node still stops cleanly on SIGTERM.
    let status = processes.shutdown();
    assert!(
        status.is_some_and(|status| status.success()),
        "the data node exits 0 on SIGTERM: {status:?}"
    );
}

/// Admission across real processes (docs/design/0007-groundwork.md,
/// "Authenticated admission"), on two data nodes holding each other's
/// replicas: on every data node's port, a peer that claims an API node id
/// without the token mgmd issued with it (none, forged, another id's), or a
/// data node's id without the cluster secret, or sends garbage, is closed;
/// so is random input on mgmd's; after each, every node serves on, the
/// earlier client's writes (which cross the link between the data nodes)
/// included. Without mgmd, a client is admitted on a token made with the
/// secret, and refused with none.
#[test]
fn impostors_and_garbage_on_every_port_leave_every_node_serving() {
    let mut processes = TestCluster::start(ClusterOptions::pair("admission"));
    let secret = processes.secret();
    let before = processes.connect();
    let table = create_table(&before, &table_definition());
    round_trip(&before, &table, 1, "first");

    // mgmd hands ids out from 128 up: 250 was issued to nobody.
    let unissued = 250;
    let mut forged = secret.api_token(NodeId(unissued), 1);
    forged.mac[5] ^= 0x10;
    let mut payloads: Vec<(&str, Vec<u8>)> = garbage();
    payloads.extend([
        (
            "an API node id with no token",
            registration_frame(unissued, ApiToken::NONE),
        ),
        (
            "an API node id with a forged token",
            registration_frame(unissued, forged),
        ),
        (
            "an API node id with another id's token",
            registration_frame(unissued, secret.api_token(NodeId(unissued - 1), 1)),
        ),
        (
            "the earlier client's id with another id's token",
            registration_frame(before.api_node(), secret.api_token(NodeId(unissued), 1)),
        ),
        ("data node 2's id with a bare hello", framed(2, 0, &[])),
        ("data node 2's id without the secret", link_claim(2, 3)),
        ("data node 3's id without the secret", link_claim(3, 2)),
    ]);
    for id in processes.node_ids() {
        for (what, payload) in &payloads {
            if let Err(problem) = send_and_expect_close(&processes.node_addr_of(id), payload) {
                panic!("{what}, to data node {id}: the node kept the connection: {problem}");
            }
            processes.assert_node_serving();
            assert!(
                before.is_connected(),
                "{what}: the earlier client was cut off"
            );
            round_trip(&before, &table, 1, what);
        }
    }
    let after = processes.connect();
    round_trip(&after, &after.table("t").expect("t"), 2, "a new client");

    // Random bytes on mgmd's port: answered (error lines) or closed, and
    // mgmd serves on.
    {
        let mut stream = TcpStream::connect(processes.mgmd_addr()).expect("connect to mgmd");
        stream
            .set_read_timeout(Some(CLOSE_TIMEOUT))
            .expect("read timeout");
        let _ = stream.write_all(&pseudo_random_bytes(200_000, 0x0bad_cafe_f00d_d00d));
        let _ = stream.shutdown(std::net::Shutdown::Write);
        let mut answers = Vec::new();
        let _ = stream.read_to_end(&mut answers);
    }
    processes.assert_node_serving();
    round_trip(
        &processes.connect(),
        &table,
        3,
        "after random bytes to mgmd",
    );

    // Without mgmd: no token is refused, a token of the secret admitted.
    let addresses = [processes.node_addr_of(2), processes.node_addr_of(3)];
    let addresses: Vec<&str> = addresses.iter().map(String::as_str).collect();
    let options = ConnectOptions {
        connect_timeout: Duration::from_secs(20),
        ..ConnectOptions::default()
    };
    let refused = match Cluster::connect_direct_many(&addresses, 251, options.clone()) {
        Ok(_) => panic!("a client without a token was admitted"),
        Err(error) => error.to_string(),
    };
    assert!(
        refused.contains("error 4024"),
        "refused with NotAdmitted: {refused}"
    );
    let direct = Cluster::connect_direct_with_token(
        &addresses,
        251,
        secret.api_token(NodeId(251), 1),
        options,
    )
    .expect("a token made with the cluster secret is admitted");
    round_trip(&direct, &direct.table("t").expect("t"), 4, "direct");
    processes.assert_node_serving();
}
