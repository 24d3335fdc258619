//! Heartbeats between API nodes and data nodes, against real processes
//! (docs/design/0017-api-heartbeats.md): a client that does nothing for
//! longer than the silence limit stays connected (its heartbeats and the
//! data node's answers keep each side from taking the other for gone),
//! and a client waiting on a data node that stopped (SIGSTOP: its socket
//! stays open, nothing answers) fails once the heartbeats stop, not at
//! its reply timeout.

mod common;

use client::{Cluster, Commit, ConnectOptions, Value};
use common::{
    acct_definition, create_table, send_signal, stop_process, ClusterOptions, TestCluster,
};
use std::time::Duration;

#[test]
fn an_idle_client_stays_connected_and_a_silent_data_node_fails_its_waiters() {
    let cluster = TestCluster::start(ClusterOptions {
        name: "api-heartbeats",
        ..ClusterOptions::default()
    });
    // Ten minutes: a wait that ended by the reply timeout would be seen.
    let options = ConnectOptions {
        reply_timeout: Duration::from_secs(600),
        ..ConnectOptions::default()
    };
    let client = Cluster::connect_with(&cluster.mgmd_addr(), options)
        .unwrap_or_else(|error| panic!("client cannot connect: {error}"));
    let table = create_table(&client, &acct_definition());

    // Idle past the limit of silence (8 intervals of 250 ms by default).
    std::thread::sleep(Duration::from_secs(4));
    assert!(client.is_connected(), "an idle client was taken for gone");
    let mut write = client.transaction();
    write
        .insert(&table, &[("k", Value::UInt(1)), ("v", Value::Int(1))])
        .expect("a valid insert");
    write
        .execute(Commit::Yes)
        .expect("a write after idling on the same connection");
    drop(write);

    // The data node stops: its socket stays open and says nothing.
    let pid = cluster.node_pid();
    stop_process(pid);
    let mut stuck = client.transaction();
    stuck
        .insert(&table, &[("k", Value::UInt(2)), ("v", Value::Int(2))])
        .expect("a valid insert");
    let result = stuck.execute(Commit::Yes);
    send_signal(pid, libc::SIGCONT);
    let error = match result {
        Ok(_) => panic!("a write through a stopped data node was acknowledged"),
        Err(error) => error.to_string(),
    };
    assert!(
        error.contains("sent nothing for") && error.contains("heartbeat intervals"),
        "the wait ended for another reason than the data node's silence: {error}"
    );
}
