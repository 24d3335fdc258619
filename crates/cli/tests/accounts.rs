//! Users, privileges and TLS through the mariadb client, as an operator
//! and an application meet them (docs/design/0031-users-and-grants.md):
//! an account created on one SQL node logs in on another; both auth
//! plugins, caching_sha2_password's full path over TLS and its fast path
//! after it; wrong passwords, missing grants and revoked ones refused
//! with MySQL's numbers; passwords changed and accounts dropped seen by
//! every SQL node; root without a password from loopback only; and
//! `--require-secure-transport`.

mod common;

use common::{mariadb_login, ClusterOptions, Login, SqlNode, TestCluster, TlsFiles};
use std::time::Duration;

/// The error number in the mariadb client's message (`ERROR 1045 ...`).
fn code(error: &str) -> u16 {
    error
        .split("ERROR ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|digits| digits.parse().ok())
        .unwrap_or_else(|| panic!("no error number in {error:?}"))
}

fn root(node: &SqlNode, sql: &str) -> String {
    mariadb_login(
        node,
        Login {
            user: "root",
            ..Login::default()
        },
        sql,
    )
    .unwrap_or_else(|error| panic!("root: {sql}: {error}"))
}

/// Waits past the second a session or SQL node may use a copy of its
/// grants for.
fn let_grants_reach_sessions() {
    std::thread::sleep(Duration::from_millis(1200));
}

#[test]
fn accounts_and_grants_hold_across_sql_nodes() {
    let cluster = TestCluster::start(ClusterOptions::pair("accounts"));
    let tls = TlsFiles::make("accounts");
    let first = SqlNode::start_with_tls(&cluster, &tls, false);
    let second = SqlNode::start_with_tls(&cluster, &tls, false);
    root(
        &first,
        "CREATE DATABASE shop; CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(20)); \
         INSERT INTO shop.items VALUES (1, 'pen'); \
         CREATE USER 'app'@'%' IDENTIFIED BY 'secret'; \
         CREATE USER 'legacy'@'%' IDENTIFIED WITH mysql_native_password BY 'old-pw'",
    );
    let app = |password: &'static str, tls: bool| Login {
        user: "app",
        password: Some(password),
        tls,
        ..Login::default()
    };
    let legacy = Login {
        user: "legacy",
        password: Some("old-pw"),
        ..Login::default()
    };

    // Created on the first node, known to the second; no grant yet.
    assert_eq!(mariadb_login(&second, legacy, "SELECT 1").unwrap(), "1\n");
    let denied = mariadb_login(&second, legacy, "SELECT * FROM shop.items").unwrap_err();
    assert_eq!(code(&denied), 1142, "{denied}");
    let denied = mariadb_login(&second, legacy, "USE shop").unwrap_err();
    assert_eq!(code(&denied), 1044, "{denied}");
    let wrong = Login {
        password: Some("nope"),
        ..legacy
    };
    assert_eq!(
        code(&mariadb_login(&second, wrong, "SELECT 1").unwrap_err()),
        1045
    );

    // caching_sha2_password: the first login to a SQL node sends the
    // password, over TLS only; after it the fast path needs none.
    // Refused without TLS: the client asks for an RSA key instead, which
    // this server does not offer (2061, the client's own error), or hears
    // the server's 1045 that says TLS is needed.
    let plain = mariadb_login(&second, app("secret", false), "SELECT 1").unwrap_err();
    assert!(
        code(&plain) == 2061 || (code(&plain) == 1045 && plain.contains("TLS")),
        "{plain}"
    );
    assert_eq!(
        mariadb_login(&second, app("secret", true), "SELECT CURRENT_USER()").unwrap(),
        "app@%\n"
    );
    assert_eq!(
        mariadb_login(&second, app("secret", false), "SELECT 2").unwrap(),
        "2\n"
    );
    let wrong = mariadb_login(&second, app("Secret", true), "SELECT 1").unwrap_err();
    assert_eq!(code(&wrong), 1045, "{wrong}");

    // Grants, given on one node, hold on the other.
    root(&first, "GRANT SELECT ON shop.* TO 'app'@'%'");
    let_grants_reach_sessions();
    assert_eq!(
        mariadb_login(&second, app("secret", false), "SELECT name FROM shop.items").unwrap(),
        "pen\n"
    );
    // A derived table and a UNION need the grants of the tables they read.
    assert_eq!(
        mariadb_login(
            &second,
            app("secret", false),
            "SELECT n FROM (SELECT name AS n FROM shop.items) AS d \
             UNION ALL SELECT name FROM shop.items"
        )
        .unwrap(),
        "pen\npen\n"
    );
    let denied = mariadb_login(
        &second,
        app("secret", false),
        "INSERT INTO shop.items VALUES (2, 'ink')",
    )
    .unwrap_err();
    assert_eq!(code(&denied), 1142, "{denied}");
    root(&first, "GRANT INSERT, UPDATE ON shop.items TO 'app'@'%'");
    let_grants_reach_sessions();
    mariadb_login(
        &second,
        app("secret", false),
        "INSERT INTO shop.items VALUES (2, 'ink'); UPDATE shop.items SET name = 'nib' WHERE id = 2",
    )
    .unwrap();
    let grants = mariadb_login(&second, app("secret", false), "SHOW GRANTS").unwrap();
    assert_eq!(
        grants,
        "GRANT USAGE ON *.* TO `app`@`%`\n\
         GRANT SELECT ON `shop`.* TO `app`@`%`\n\
         GRANT INSERT, UPDATE ON `shop`.`items` TO `app`@`%`\n"
    );
    let databases = mariadb_login(&second, app("secret", false), "SHOW DATABASES").unwrap();
    assert_eq!(
        databases, "information_schema\nshop\n",
        "only the databases it holds a privilege in, and information_schema"
    );
    let denied = mariadb_login(&second, app("secret", false), "CREATE USER 'x'@'%'").unwrap_err();
    assert_eq!(code(&denied), 1227, "{denied}");

    // A revoke reaches open sessions within a second.
    root(&first, "REVOKE SELECT ON shop.* FROM 'app'@'%'");
    let_grants_reach_sessions();
    let denied =
        mariadb_login(&second, app("secret", false), "SELECT * FROM shop.items").unwrap_err();
    assert_eq!(code(&denied), 1142, "{denied}");
    for sql in [
        "SELECT * FROM (SELECT name FROM shop.items) AS d",
        "SELECT 1 UNION SELECT name FROM shop.items",
    ] {
        let denied = mariadb_login(&second, app("secret", false), sql).unwrap_err();
        assert_eq!(code(&denied), 1142, "{sql}: {denied}");
    }

    // A password changed on the first node: the second node's fast path
    // for the old one is void.
    root(&first, "ALTER USER 'app'@'%' IDENTIFIED BY 'new-secret'");
    let old = mariadb_login(&second, app("secret", true), "SELECT 1").unwrap_err();
    assert_eq!(code(&old), 1045, "{old}");
    let no_fast_path = mariadb_login(&second, app("secret", false), "SELECT 1").unwrap_err();
    assert!(matches!(code(&no_fast_path), 1045 | 2061), "{no_fast_path}");
    assert_eq!(
        mariadb_login(&second, app("new-secret", true), "SELECT 3").unwrap(),
        "3\n"
    );

    // Dropped on one node, gone on the other; its grants with it.
    root(&first, "DROP USER 'app'@'%'");
    let gone = mariadb_login(&second, app("new-secret", true), "SELECT 1").unwrap_err();
    assert_eq!(code(&gone), 1045, "{gone}");
    root(&first, "CREATE USER 'app'@'%' IDENTIFIED BY 'again'");
    let grants = mariadb_login(&second, app("again", true), "SHOW GRANTS").unwrap();
    assert_eq!(grants, "GRANT USAGE ON *.* TO `app`@`%`\n");
    let exists = mariadb_login(
        &first,
        Login {
            user: "root",
            ..Login::default()
        },
        "CREATE USER 'app'@'%'",
    )
    .unwrap_err();
    assert_eq!(code(&exists), 1396, "{exists}");
}

#[test]
fn root_without_a_password_is_for_loopback_only() {
    // An address of this machine that is not loopback: root from it is
    // refused. A machine without one cannot show it; the test says so.
    let address = std::process::Command::new("hostname")
        .arg("-I")
        .output()
        .ok()
        .and_then(|output| {
            String::from_utf8_lossy(&output.stdout)
                .split_whitespace()
                .find(|a| {
                    a.parse::<std::net::Ipv4Addr>()
                        .is_ok_and(|ip| !ip.is_loopback())
                })
                .map(str::to_string)
        });
    let Some(address) = address else {
        eprintln!("root_without_a_password_is_for_loopback_only: no non-loopback IPv4 address here; only loopback checked");
        return;
    };
    let cluster = TestCluster::start(ClusterOptions::pair("root_loopback"));
    let node = SqlNode::start_with(&cluster, &["--bind", "0.0.0.0"]);
    assert_eq!(root(&node, "SELECT 1"), "1\n");
    let refused = mariadb_login(
        &node,
        Login {
            user: "root",
            host: Some(&address),
            ..Login::default()
        },
        "SELECT 1",
    )
    .unwrap_err();
    assert_eq!(code(&refused), 1045, "{refused}");
}

#[test]
fn require_secure_transport_refuses_plain_logins() {
    let cluster = TestCluster::start(ClusterOptions::pair("secure_transport"));
    let tls = TlsFiles::make("secure_transport");
    let node = SqlNode::start_with_tls(&cluster, &tls, true);
    let user = |tls| Login {
        user: "root",
        tls,
        ..Login::default()
    };
    let refused = mariadb_login(&node, user(false), "SELECT 1").unwrap_err();
    assert_eq!(code(&refused), 3159, "{refused}");
    assert_eq!(mariadb_login(&node, user(true), "SELECT 1").unwrap(), "1\n");
}

#[test]
fn mysqldump_dumps_and_restores_as_accounts_without_root() {
    let cluster = TestCluster::start(ClusterOptions::pair("mysqldump"));
    let tls = TlsFiles::make("mysqldump");
    let node = SqlNode::start_with_tls(&cluster, &tls, false);
    root(
        &node,
        "CREATE DATABASE shop; CREATE DATABASE copy; \
         CREATE TABLE shop.items (id INT NOT NULL PRIMARY KEY, code VARCHAR(12) NOT NULL, \
         price DECIMAL(8,2), made DATETIME(3), note TEXT, attrs JSON, \
         doubled DECIMAL(9,2) AS (price * 2) STORED, UNIQUE KEY by_code (code), \
         KEY by_price (price), CONSTRAINT price_sane CHECK (price > -100)); \
         INSERT INTO shop.items VALUES \
         (1, 'a', 1.50, '2024-01-31 10:30:00.250', 'it''s', '{\"tag\": \"x\"}', DEFAULT), \
         (2, 'b', NULL, NULL, NULL, NULL, DEFAULT), \
         (3, 'c', -7, '1999-12-31 23:59:59', 'tab\there', '[1, \"ü\"]', DEFAULT); \
         CREATE VIEW shop.cheap AS SELECT code, price*2 FROM items WHERE price < 5; \
         CREATE USER 'backup'@'%' IDENTIFIED BY 'b-pw'; GRANT SELECT ON shop.* TO 'backup'@'%'; \
         CREATE USER 'loader'@'%' IDENTIFIED WITH mysql_native_password BY 'l-pw'; \
         GRANT ALL ON copy.* TO 'loader'@'%'",
    );
    let backup = Login {
        user: "backup",
        password: Some("b-pw"),
        tls: true,
        database: Some("shop"),
        ..Login::default()
    };
    let indexes = mariadb_login(&node, backup, "SHOW INDEX FROM items").unwrap();
    let keys: Vec<Vec<&str>> = indexes
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            vec![
                fields[0], fields[1], fields[2], fields[3], fields[4], fields[10],
            ]
        })
        .collect();
    assert_eq!(
        keys,
        vec![
            vec!["items", "0", "PRIMARY", "1", "id", "BTREE"],
            vec!["items", "0", "by_code", "1", "code", "BTREE"],
            vec!["items", "1", "by_price", "1", "price", "BTREE"],
        ]
    );
    let status = mariadb_login(&node, backup, "SHOW TABLE STATUS LIKE 'item%'").unwrap();
    let fields: Vec<&str> = status.trim_end().split('\t').collect();
    assert_eq!(
        &fields[..5],
        ["items", "ndbcluster", "10", "Dynamic", "3"],
        "{status}"
    );

    let port = node.port.to_string();
    let dump = std::process::Command::new("mysqldump")
        .args([
            "-h",
            "127.0.0.1",
            "-P",
            &port,
            "-u",
            "backup",
            "--password=b-pw",
        ])
        .args(["--ssl", "--ssl-verify-server-cert=0", "shop"])
        .output()
        .expect("mysqldump is installed with the mariadb client");
    assert!(
        dump.status.success(),
        "mysqldump: {}",
        String::from_utf8_lossy(&dump.stderr)
    );
    let restore = std::process::Command::new("mariadb")
        .args([
            "-h",
            "127.0.0.1",
            "-P",
            &port,
            "-u",
            "loader",
            "--password=l-pw",
        ])
        .args(["--skip-ssl", "copy"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = restore.stdin.as_ref().unwrap();
        stdin.write_all(&dump.stdout).unwrap();
    }
    let restored = restore.wait_with_output().unwrap();
    assert!(
        restored.status.success(),
        "restore: {}",
        String::from_utf8_lossy(&restored.stderr)
    );
    let read = |database: &str| {
        root(
            &node,
            &format!(
                "SELECT * FROM {database}.items ORDER BY id; SHOW CREATE TABLE {database}.items"
            ),
        )
    };
    assert_eq!(read("copy"), read("shop"));
    // The view, made again in the database it was restored into.
    let view = |database: &str| {
        root(
            &node,
            &format!(
                "SELECT * FROM {database}.cheap ORDER BY code; SHOW FULL TABLES FROM {database}"
            ),
        )
    };
    assert_eq!(view("copy"), view("shop"));
    assert_eq!(
        view("copy"),
        "a\t3.00\nc\t-14.00\ncheap\tVIEW\nitems\tBASE TABLE\n"
    );
    assert!(read("copy").contains("2024-01-31 10:30:00.250"));
    assert!(
        read("copy").contains("CONSTRAINT `price_sane` CHECK"),
        "{}",
        read("copy")
    );
    // The dump gives the generated column's values, and sets a sql_mode
    // that is not strict, in which they are ignored and computed again;
    // the JSON documents come back as they were.
    assert!(
        read("copy").contains("GENERATED ALWAYS AS (price * 2) STORED"),
        "{}",
        read("copy")
    );
    assert!(read("copy").contains("3.00"), "{}", read("copy"));
    assert!(read("copy").contains("[1, \"ü\"]"), "{}", read("copy"));
}

#[test]
fn subqueries_kill_and_the_process_list_respect_privileges() {
    let cluster = TestCluster::start(ClusterOptions::pair("privileged_reads"));
    let tls = TlsFiles::make("privileged_reads");
    let node = SqlNode::start_with_tls(&cluster, &tls, false);
    root(
        &node,
        "CREATE DATABASE shop; CREATE DATABASE hr; \
         CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(200)); \
         CREATE TABLE hr.secrets (id INT PRIMARY KEY, pay INT); \
         INSERT INTO hr.secrets VALUES (1, 100); \
         CREATE USER 'app'@'%' IDENTIFIED WITH mysql_native_password BY 'pw'; \
         GRANT SELECT, INSERT, DELETE ON shop.* TO 'app'@'%'",
    );
    let app = Login {
        user: "app",
        password: Some("pw"),
        ..Login::default()
    };
    // No way around a missing grant through a subquery.
    for sql in [
        "SELECT (SELECT pay FROM hr.secrets WHERE id = 1)",
        "SELECT id FROM shop.items WHERE id IN (SELECT id FROM hr.secrets)",
        "DELETE FROM shop.items WHERE EXISTS (SELECT 1 FROM hr.secrets WHERE pay > 50)",
        "INSERT INTO shop.items SELECT id, 'x' FROM hr.secrets",
        "EXPLAIN SELECT * FROM hr.secrets",
    ] {
        let denied = mariadb_login(&node, app, sql).unwrap_err();
        assert_eq!(code(&denied), 1142, "{sql}: {denied}");
    }
    // Another account's connection: neither seen nor ended.
    let list = mariadb_login(&node, app, "SHOW PROCESSLIST").unwrap();
    assert!(list.lines().all(|line| line.contains("\tapp\t")), "{list}");
    // Root's connection, open meanwhile.
    let mut root_connection = bench::mysql::Connection::connect(&bench::mysql::ConnectOptions {
        address: format!("127.0.0.1:{}", node.port),
        user: "root".into(),
        password: String::new(),
        database: None,
        prepared: false,
        batching: false,
    })
    .unwrap();
    let root_id = root_connection
        .query("SELECT CONNECTION_ID()")
        .unwrap()
        .scalar()
        .unwrap()
        .to_string();
    let list = mariadb_login(&node, app, "SHOW PROCESSLIST").unwrap();
    assert!(!list.contains("\troot\t"), "{list}");
    let refused = mariadb_login(&node, app, &format!("KILL {root_id}")).unwrap_err();
    assert_eq!(code(&refused), 1095, "{refused}");
    assert!(
        root_connection.query("SELECT 1").is_ok(),
        "root's connection lives"
    );
    // Over TLS, a statement (110 KB) and a result larger than TLS's
    // buffers (16 KiB in, 64 KiB out by default).
    let rows: Vec<String> = (0..700)
        .map(|id| format!("({id}, '{}')", "x".repeat(150)))
        .collect();
    let tls_app = Login { tls: true, ..app };
    mariadb_login(
        &node,
        tls_app,
        &format!("INSERT INTO shop.items VALUES {}", rows.join(", ")),
    )
    .unwrap();
    let all = mariadb_login(&node, tls_app, "SELECT * FROM shop.items").unwrap();
    assert_eq!(all.lines().count(), 700);
    // Root may not be dropped: root would be the built-in account again.
    let refused = mariadb_login(
        &node,
        Login {
            user: "root",
            ..Login::default()
        },
        "DROP USER 'root'@'localhost'",
    )
    .unwrap_err();
    assert_eq!(code(&refused), 1396, "{refused}");
    // Root for other hosts is another account: loopback's root stays.
    root(&node, "CREATE USER 'root'@'10.%' IDENTIFIED BY 'elsewhere'");
    assert_eq!(root(&node, "SELECT 1"), "1\n");
}
