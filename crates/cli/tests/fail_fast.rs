//! Fail fast (docs/design/processes-and-blocks.md): a panic on any thread
//! of a data node ends the whole process, as `Context::fatal` does, so a
//! node never keeps its sockets and its `started` state with a dead thread
//! behind them. The fault point `TESSERA_FAULT_PANIC_THREAD=<thread>` makes
//! that thread panic as it runs its first signal.

mod common;

use common::{ClusterOptions, TestCluster};

#[test]
fn a_panic_in_a_block_thread_ends_the_data_node_process() {
    let mut cluster = TestCluster::start(ClusterOptions {
        name: "fail_fast",
        ..ClusterOptions::default()
    });
    cluster.kill_data_nodes();
    cluster.spawn_data_node_with_env(2, &[("TESSERA_FAULT_PANIC_THREAD", "ldm0")]);
    let (status, log) = cluster.wait_for_exit(2);
    let status = status.unwrap_or_else(|| {
        panic!("the data node kept running after its ldm0 thread panicked; log:\n{log}")
    });
    assert_eq!(status.code(), Some(1), "exit status {status}; log:\n{log}");
    assert!(
        log.contains("panicking on purpose"),
        "the panic is printed; log:\n{log}"
    );
    assert!(
        log.contains("thread ldm0 panicked; stopping the node (fail fast)"),
        "the node says why it stops; log:\n{log}"
    );
}
