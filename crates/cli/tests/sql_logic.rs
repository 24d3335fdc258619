//! SQL behaviour files (`tests/slt/*.slt`, the sqllogictest format) run
//! against `tessera sql` and, as the oracle, against MariaDB on the same
//! machine: where the files expect one answer, both must give it. Known
//! differences are marked `onlyif tessera` / `onlyif mariadb` in the
//! files and listed in docs/design/0027-sql-node.md.
//!
//! The MariaDB side starts a private `mariadbd` (installed by .ci/run);
//! `TESSERA_SLT_WITHOUT_MARIADB=1` skips it on a machine without one,
//! saying so.
//!
//! A query's type letters are checked too: `I` for a column the server
//! announces as an integer, `R` for a DECIMAL, FLOAT or DOUBLE, `T` for
//! anything else (text, bytes, dates and times). A driver that maps
//! types reads a value by them, so both servers must agree. A new file
//! may leave them rough: `cargo test -p cli --test sql_logic --
//! --ignored retype` rewrites each query's letters to what MariaDB
//! announces.

mod common;

use common::{ClusterOptions, SqlNode, TestCluster};
use mysql_async::consts::ColumnType as WireType;
use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder, Value};
use sqllogictest::ColumnType as _;
use sqllogictest::{
    AsyncDB, DBOutput, DefaultColumnType, QueryExpect, Record, RecordOutput, Runner,
};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One connection, as the runner drives it.
struct Database {
    conn: Conn,
}

#[derive(Debug)]
struct Failure(String);

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failure {}

fn text(value: &Value) -> String {
    match value {
        Value::NULL => "NULL".into(),
        Value::Bytes(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::Int(x) => x.to_string(),
        Value::UInt(x) => x.to_string(),
        Value::Float(x) => x.to_string(),
        Value::Double(x) => x.to_string(),
        other => format!("{other:?}"),
    }
}

/// The letter a result column's wire type has in the files.
fn letter(column_type: WireType) -> DefaultColumnType {
    use WireType::*;
    match column_type {
        MYSQL_TYPE_TINY | MYSQL_TYPE_SHORT | MYSQL_TYPE_INT24 | MYSQL_TYPE_LONG
        | MYSQL_TYPE_LONGLONG | MYSQL_TYPE_YEAR => DefaultColumnType::Integer,
        MYSQL_TYPE_FLOAT | MYSQL_TYPE_DOUBLE | MYSQL_TYPE_DECIMAL | MYSQL_TYPE_NEWDECIMAL => {
            DefaultColumnType::FloatingPoint
        }
        _ => DefaultColumnType::Text,
    }
}

#[async_trait::async_trait]
impl AsyncDB for Database {
    type Error = Failure;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, Failure> {
        let mut result = self
            .conn
            .query_iter(sql)
            .await
            .map_err(|e| Failure(e.to_string()))?;
        let types: Vec<DefaultColumnType> = result
            .columns()
            .map(|columns| columns.iter().map(|c| letter(c.column_type())).collect())
            .unwrap_or_default();
        let affected = result.affected_rows();
        let rows: Vec<mysql_async::Row> =
            result.collect().await.map_err(|e| Failure(e.to_string()))?;
        if types.is_empty() {
            return Ok(DBOutput::StatementComplete(affected));
        }
        Ok(DBOutput::Rows {
            types,
            rows: rows
                .iter()
                .map(|row| {
                    (0..row.len())
                        .map(|i| text(&row.as_ref(i).cloned().unwrap_or(Value::NULL)))
                        .collect()
                })
                .collect(),
        })
    }

    async fn shutdown(&mut self) {}
}

async fn connect(port: u16, database: Option<String>) -> Result<Database, Failure> {
    let opts = OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some("root"))
        .db_name(database);
    let conn = Conn::new(opts).await.map_err(|e| Failure(e.to_string()))?;
    Ok(Database { conn })
}

fn files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slt");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "slt"))
        .collect();
    // `TESSERA_SLT_ONLY=a,b`: only the files named (while working on them).
    if let Ok(only) = std::env::var("TESSERA_SLT_ONLY") {
        files.retain(|path| {
            let stem = path.file_stem().unwrap().to_string_lossy();
            only.split(',').any(|name| name == stem)
        });
    }
    files.sort();
    assert!(!files.is_empty(), "no .slt files in {}", dir.display());
    files
}

/// Runs every file against the server on `port`, each in a database of
/// its own; `label` is what `onlyif` and `skipif` name.
fn run_files(port: u16, label: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Every file runs, so that one run shows each file's first failure.
    let failures = runtime.block_on(async {
        let mut failures = Vec::new();
        for file in files() {
            let name = format!("slt_{}", file.file_stem().unwrap().to_string_lossy());
            let mut setup = connect(port, None).await.unwrap();
            setup
                .conn
                .query_drop(format!("DROP DATABASE IF EXISTS {name}"))
                .await
                .unwrap();
            setup
                .conn
                .query_drop(format!("CREATE DATABASE {name}"))
                .await
                .unwrap();
            let mut runner = Runner::new(move || connect(port, Some(name.clone())));
            runner.add_label(label);
            runner.add_label("mysql");
            runner.with_column_validator(sqllogictest::strict_column_validator);
            if let Err(error) = runner.run_file_async(&file).await {
                failures.push(format!("{label}: {}: {error}", file.display()));
            }
        }
        failures
    });
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Runs every file against the server on `port` and rewrites the type
/// letters of each query it answers to what it announced (a query the
/// server skips keeps its letters).
fn retype_files(port: u16, label: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        for file in files() {
            let name = format!("slt_{}", file.file_stem().unwrap().to_string_lossy());
            let mut setup = connect(port, None).await.unwrap();
            for statement in [
                format!("DROP DATABASE IF EXISTS {name}"),
                format!("CREATE DATABASE {name}"),
            ] {
                setup.conn.query_drop(statement).await.unwrap();
            }
            let mut runner = Runner::new(move || connect(port, Some(name.clone())));
            runner.add_label(label);
            runner.add_label("mysql");
            let records = sqllogictest::parse_file::<DefaultColumnType>(&file).unwrap();
            let mut lines: Vec<String> = std::fs::read_to_string(&file)
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect();
            let mut changed = 0;
            for record in records {
                let Record::Query {
                    loc,
                    expected: QueryExpect::Results { types, .. },
                    ..
                } = &record
                else {
                    runner.apply_record(record).await;
                    continue;
                };
                let (loc, expected) = (loc.clone(), types.clone());
                if let RecordOutput::Query {
                    types, error: None, ..
                } = runner.apply_record(record).await
                {
                    if types != expected {
                        let line = &mut lines[loc.line() as usize - 1];
                        let mut words: Vec<&str> = line.split(' ').collect();
                        assert_eq!(words[0], "query", "{}: {line}", loc);
                        let letters: String = types.iter().map(|t| t.to_char()).collect();
                        words[1] = &letters;
                        *line = words.join(" ");
                        changed += 1;
                    }
                }
            }
            if changed > 0 {
                eprintln!("{}: {changed} queries retyped", file.display());
                std::fs::write(&file, lines.join("\n") + "\n").unwrap();
            }
        }
    });
}

/// Rewrites the files' type letters to MariaDB's (see the module's
/// comment); run by hand, never in CI.
#[test]
#[ignore]
fn retype_the_files_from_mariadb() {
    let mariadb = MariaDb::start();
    retype_files(mariadb.port, "mariadb");
}

/// A private MariaDB server, stopped on drop.
struct MariaDb {
    child: Child,
    port: u16,
    _dir: PathBuf,
}

impl MariaDb {
    fn start() -> MariaDb {
        let dir = std::env::temp_dir().join(format!("tessera-slt-mariadb-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let user =
            String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
        let user = user.trim();
        let installed = Command::new("mariadb-install-db")
            .args([
                "--no-defaults",
                &format!("--datadir={}", dir.join("data").display()),
                &format!("--user={user}"),
            ])
            .arg("--auth-root-authentication-method=normal")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("mariadb-install-db is installed (.ci/run installs mariadb-server)");
        assert!(installed.success(), "mariadb-install-db failed");
        let port = common::free_port();
        let mariadbd = if Path::new("/usr/sbin/mariadbd").exists() {
            "/usr/sbin/mariadbd"
        } else {
            "mariadbd"
        };
        let child = Command::new(mariadbd)
            .args([
                "--no-defaults",
                &format!("--datadir={}", dir.join("data").display()),
                &format!("--socket={}", dir.join("mariadb.sock").display()),
                &format!("--port={port}"),
                "--bind-address=127.0.0.1",
                &format!("--user={user}"),
                "--innodb-buffer-pool-size=64M",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("mariadbd starts");
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "mariadbd did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        MariaDb {
            child,
            port,
            _dir: dir,
        }
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self._dir);
    }
}

#[test]
fn sql_behaviour_files_pass_on_tessera_and_on_mariadb() {
    let cluster = TestCluster::start(ClusterOptions::pair("sql_logic"));
    let node = SqlNode::start(&cluster);
    run_files(node.port, "tessera");
    if std::env::var_os("TESSERA_SLT_WITHOUT_MARIADB").is_some() {
        eprintln!("TESSERA_SLT_WITHOUT_MARIADB is set: the files were not checked against MariaDB");
        return;
    }
    let mariadb = MariaDb::start();
    run_files(mariadb.port, "mariadb");
}
