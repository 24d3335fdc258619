//! Real MySQL drivers against `tessera sql`: the Go driver
//! (go-sql-driver/mysql) and MySQL Connector/J each run a small
//! application workload (`tests/drivers/`: a schema, prepared CRUD in
//! transactions, AUTO_INCREMENT keys, a join with grouping, an upsert,
//! every result checked) as a non-root caching_sha2_password user over
//! TLS. Connector/J runs it twice: with server-side prepared statements
//! (the binary protocol) and with its own client-side ones.
//!
//! The programs are built here: Go's modules and Maven's artifacts come
//! from their registries the first time (.ci/run installs Go's toolchain
//! with the machine and Maven with apt).

mod common;

use common::{mariadb_login, ClusterOptions, Login, SqlNode, TestCluster, TlsFiles};
use std::path::{Path, PathBuf};
use std::process::Command;

fn drivers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/drivers")
}

/// Runs `command`; its output when it succeeds, else the test fails with it.
fn run(what: &str, command: &mut Command) -> String {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("{what}: cannot start: {error}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    stdout
}

/// A server, a database and a user for the workloads.
fn prepared_server(test: &'static str) -> (TestCluster, SqlNode) {
    let cluster = TestCluster::start(ClusterOptions::pair(test));
    let tls = TlsFiles::make(test);
    let node = SqlNode::start_with_tls(&cluster, &tls, false);
    mariadb_login(
        &node,
        Login {
            user: "root",
            ..Login::default()
        },
        "CREATE DATABASE appdb; CREATE USER 'app'@'%' IDENTIFIED BY 'secret'; \
         GRANT ALL ON appdb.* TO 'app'@'%'",
    )
    .expect("root sets up the application's account");
    (cluster, node)
}

fn connection_args(node: &SqlNode) -> Vec<String> {
    [
        "--host",
        "127.0.0.1",
        "--port",
        &node.port.to_string(),
        "--user",
        "app",
        "--password",
        "secret",
        "--database",
        "appdb",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[test]
fn the_go_driver_runs_an_application_workload() {
    let (_cluster, node) = prepared_server("driver_go");
    let binary = std::env::temp_dir().join(format!("tessera-go-driver-{}", std::process::id()));
    run(
        "go build",
        Command::new("go")
            .current_dir(drivers_dir().join("go"))
            .args(["build", "-buildvcs=false", "-o"])
            .arg(&binary),
    );
    let output = run(
        "the Go workload",
        Command::new(&binary)
            .args(connection_args(&node))
            .arg("--tls"),
    );
    let _ = std::fs::remove_file(&binary);
    assert!(
        output.trim_end().ends_with("driver workload: ok"),
        "{output}"
    );
}

#[test]
fn connector_j_runs_an_application_workload() {
    let (_cluster, node) = prepared_server("driver_java");
    let java = drivers_dir().join("java");
    run(
        "mvn package",
        Command::new("mvn")
            .current_dir(&java)
            .args(["-q", "-B", "package"]),
    );
    for prepare in ["server", "client"] {
        let output = run(
            &format!("the Java workload (prepare={prepare})"),
            Command::new("java")
                .current_dir(&java)
                .args(["-jar", "target/driver-workload.jar"])
                .args(connection_args(&node))
                .args(["--prepare", prepare, "--tls", "yes"]),
        );
        assert!(
            output.trim_end().ends_with("driver workload: ok"),
            "prepare={prepare}: {output}"
        );
    }
}
