//! The server as a data node's registration sees it (through the
//! management client crate's `DataNodeSession`).

use mgmd::client::DataNodeSession;
use mgmd::{start_server_with, MgmdError, ServerOptions};
use std::time::{Duration, Instant};

const CONFIG: &str = r#"
[mgmd]
host = "127.0.0.1"
port = 11860

[[data_node]]
id = 2
host = "127.0.0.1"
port = 11861
data_dir = "d2"
"#;

#[test]
fn the_start_count_rises_on_every_registration() {
    let config = config::ClusterConfig::from_toml_str(CONFIG, "test.toml").expect("test config");
    let options = ServerOptions {
        bind_addr: Some("127.0.0.1:0".into()),
        secret: Some(test_secret()),
        ..Default::default()
    };
    let handle = start_server_with(config, CONFIG.to_owned(), options).expect("mgmd starts");
    let addr = handle.local_addr().to_string();
    for expected in 1..=3 {
        let deadline = Instant::now() + Duration::from_secs(20);
        // mgmd frees the id once it sees the previous session close.
        let session = loop {
            match DataNodeSession::register(&addr, 2, 1) {
                Ok((session, _)) => break session,
                Err(MgmdError::Refused(_)) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(error) => panic!("registration failed: {error}"),
            }
        };
        assert_eq!(session.start_count(), expected);
    }
}

/// The cluster secret of the in-process mgmd (its config names no file).
fn test_secret() -> admission::ClusterSecret {
    admission::ClusterSecret::from_bytes(b"mgmd tests: a cluster secret of 32+ bytes")
        .expect("long enough")
}
