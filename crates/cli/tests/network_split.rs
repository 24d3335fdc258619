//! A real network split between the two data nodes of a cluster
//! (docs/design/failures.md §4, design 0012), on this machine: the test
//! thread moves into a network namespace of its own (`unshare -n`), so
//! its loopback and firewall rules vanish with it; data node N listens
//! on 127.0.0.N and its links to the other node leave from there; mgmd
//! (the arbitrator) stays on 127.0.0.1, reachable by both. nftables rules
//! then drop the traffic between the data nodes, both ways or one way,
//! or cut one data node off from everything (its requests to mgmd leave
//! from its own address too). Exactly one side must go on (the one the
//! arbitrator grants; an isolated node cannot reach it), the other shuts
//! down saying why, and the cluster takes writes.
//!
//! Needs root and nftables (CI installs it). Where either is missing the
//! test fails with a message saying so: it never passes silently.

mod common;

use common::{create_table, data_node, kv_definition, ClusterOptions, TestCluster};
use std::process::Command;
use std::time::{Duration, Instant};

/// Moves the calling thread (and every process and thread it starts from
/// now on) into a new network namespace with loopback up.
fn private_network() {
    // SAFETY: geteuid(2) reads a process attribute.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "the network split test needs root (network namespaces and nftables)"
    );
    let nft = Command::new("nft").arg("--version").output();
    assert!(
        nft.as_ref().is_ok_and(|output| output.status.success()),
        "the network split test needs nftables (`apt-get install nftables`): {nft:?}"
    );
    // SAFETY: unshare(2) changes this thread's namespaces only.
    let unshared = unsafe { libc::unshare(libc::CLONE_NEWNET) };
    assert_eq!(
        unshared,
        0,
        "unshare(CLONE_NEWNET): {}",
        std::io::Error::last_os_error()
    );
    run("ip", &["link", "set", "lo", "up"]);
}

fn run(program: &str, args: &[&str]) {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("cannot run {program}: {error}"));
    assert!(
        output.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Drops every packet from `from` to `to` (127.0.0.N addresses).
fn drop_traffic(from: u16, to: u16) {
    add_rule(&format!(
        "ip saddr 127.0.0.{from} ip daddr 127.0.0.{to} drop"
    ));
}

/// Adds `rule` to the input chain of the test's own table (made on first
/// use).
fn add_rule(rule: &str) {
    // `add` of an existing table or chain changes nothing.
    run("nft", &["add", "table", "inet", "split"]);
    run(
        "nft",
        &[
            "add",
            "chain",
            "inet",
            "split",
            "input",
            "{ type filter hook input priority 0 ; }",
        ],
    );
    let mut args = vec!["add", "rule", "inet", "split", "input"];
    args.extend(rule.split(' '));
    run("nft", &args);
}

/// How the test cuts the network.
enum Cut<'a> {
    /// Drops the traffic of each (from, to) pair of data nodes.
    Between(&'a [(u16, u16)]),
    /// Cuts data node N off from everything: the other node and mgmd.
    Isolate(u16),
}

/// Cuts a 2-node cluster's network as `cut` says and checks that exactly
/// one side goes on; returns the node that did.
fn split(cut: Cut<'_>, name: &'static str) -> u16 {
    private_network();
    let mut cluster = TestCluster::start(ClusterOptions {
        node_hosts: true,
        ..ClusterOptions::pair(name)
    });
    let client = cluster.connect();
    let table = create_table(&client, &kv_definition());
    drop(client);
    match cut {
        Cut::Between(directions) => {
            for &(from, to) in directions {
                drop_traffic(from, to);
            }
        }
        Cut::Isolate(node) => {
            add_rule(&format!("ip saddr 127.0.0.{node} drop"));
            add_rule(&format!("ip daddr 127.0.0.{node} drop"));
        }
    }
    // One node exits (the side the arbitrator did not grant); the other
    // runs on.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (loser, winner) = loop {
        let two = cluster.node_is_running_of(2);
        let three = cluster.node_is_running_of(3);
        match (two, three) {
            (true, false) => break (3, 2),
            (false, true) => break (2, 3),
            (false, false) => panic!("both sides shut down:\n{}", cluster.logs()),
            (true, true) => {}
        }
        assert!(
            Instant::now() < deadline,
            "neither side shut down:\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let (status, log) = cluster.wait_for_exit(loser);
    assert_eq!(status.and_then(|status| status.code()), Some(3), "{log}");
    assert!(log.contains("only the arbitrator"), "{log}");
    let show = cluster.show();
    let state = |id: u16| data_node(&show, id.into()).map(|node| node["state"].clone());
    assert_eq!(state(loser), Some("shut_down".into()), "{show}");
    assert_eq!(state(winner), Some("started".into()), "{show}");
    // The winner takes writes.
    let client = cluster.connect();
    let table = client.table(table.name()).expect("the table");
    common::write_settled(&client, &table, 1, Instant::now() + Duration::from_secs(60));
    eprintln!("network split {name}: node {winner} went on, node {loser} shut down");
    winner
}

#[test]
fn a_split_of_two_data_nodes_leaves_exactly_one_side() {
    split(Cut::Between(&[(2, 3), (3, 2)]), "split-both-ways");
}

#[test]
fn a_one_way_cut_between_two_data_nodes_leaves_exactly_one_side() {
    split(Cut::Between(&[(3, 2)]), "split-one-way");
}

/// Each side cut off in turn (from the other node and from mgmd, the
/// arbitrator): the side that can still reach the arbitrator goes on, the
/// isolated one cannot get its answer and shuts down.
#[test]
fn the_side_cut_off_from_the_arbitrator_shuts_down_whichever_it_is() {
    for (isolated, name) in [(2, "isolate-2"), (3, "isolate-3")] {
        let expected = if isolated == 2 { 3 } else { 2 };
        // Each run in a thread of its own: a namespace of its own.
        let winner = std::thread::spawn(move || split(Cut::Isolate(isolated), name))
            .join()
            .expect("the split run");
        assert_eq!(winner, expected, "node {isolated} was cut off");
    }
}
