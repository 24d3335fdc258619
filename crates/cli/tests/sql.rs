//! `tessera sql` on a real cluster (two data nodes, replicas 2), reached
//! by the `mariadb` command-line client as a user would: the schema
//! sysbench creates, writes and reads of every access path, EXPLAIN of
//! each sysbench statement shape, the rows a statement fetched from the
//! data nodes (SHOW STATUS), transactions, MySQL's error numbers, the
//! root-from-loopback rule, and a malformed handshake that closes its
//! own connection and nothing else; and a SQL node killed in the middle
//! of a transaction, which leaves no lock and no write behind
//! (docs/design/0027-sql-node.md).

mod common;

use common::{
    mariadb, mysql_read_packet as read_packet, mysql_write_packet as write_packet, ClusterOptions,
    SqlNode, TestCluster,
};
use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn query(node: &SqlNode, sql: &str) -> String {
    mariadb(node, "root", sql).unwrap_or_else(|error| panic!("{sql}: {error}"))
}

fn error_of(node: &SqlNode, sql: &str) -> String {
    match mariadb(node, "root", sql) {
        Ok(output) => panic!("{sql} succeeded with {output:?}"),
        Err(error) => error,
    }
}

const SCHEMA: &str = "CREATE DATABASE sbtest; USE sbtest; CREATE TABLE sbtest1(
  id INTEGER NOT NULL AUTO_INCREMENT,
  k INTEGER DEFAULT '0' NOT NULL,
  c CHAR(120) DEFAULT '' NOT NULL,
  pad CHAR(60) DEFAULT '' NOT NULL,
  PRIMARY KEY (id)
) /*! ENGINE = innodb */; CREATE INDEX k_1 ON sbtest1(k)";

#[test]
fn the_mariadb_client_runs_sysbench_shaped_sql() {
    let cluster = TestCluster::start(ClusterOptions::pair("sql"));
    let node = SqlNode::start(&cluster);
    assert!(query(&node, "SELECT @@version_comment LIMIT 1").contains("Tessera"));
    query(&node, SCHEMA);
    // 200 rows in one statement, ids generated: k = id % 10, c = 'c<id>'.
    let values: Vec<String> = (1..=200)
        .map(|i| format!("({}, 'c{i}', 'p')", i % 10))
        .collect();
    query(
        &node,
        &format!(
            "INSERT INTO sbtest.sbtest1 (k, c, pad) VALUES {}",
            values.join(",")
        ),
    );
    let db = |sql: &str| query(&node, &format!("USE sbtest; {sql}"));
    assert_eq!(db("SELECT c FROM sbtest1 WHERE id = 7"), "c7\n");
    assert_eq!(
        db("SELECT COUNT(*), SUM(k), MIN(id), MAX(id) FROM sbtest1"),
        "200\t900\t1\t200\n"
    );
    assert_eq!(
        db("SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN 11 AND 20"),
        "45\n"
    );
    assert_eq!(
        db("SELECT c FROM sbtest1 WHERE id BETWEEN 11 AND 13 ORDER BY c DESC"),
        "c13\nc12\nc11\n"
    );
    assert_eq!(
        db("SELECT DISTINCT k FROM sbtest1 WHERE id BETWEEN 1 AND 30 ORDER BY k LIMIT 3"),
        "0\n1\n2\n"
    );
    assert_eq!(
        db("SELECT COUNT(k) FROM sbtest1 WHERE k BETWEEN 1 AND 2 OR k BETWEEN 2 AND 3"),
        "60\n"
    );
    assert_eq!(
        db("SELECT id FROM sbtest1 WHERE id IN (3, 500, 3, 4) ORDER BY id"),
        "3\n4\n"
    );
    assert_eq!(db("SELECT id FROM sbtest1 WHERE c = 'c150'"), "150\n");

    // The plan of each sysbench statement shape, and what it fetched.
    let explain = |sql: &str| db(&format!("EXPLAIN {sql}"));
    assert!(explain("SELECT c FROM sbtest1 WHERE id=1").contains("primary key lookup"));
    assert!(explain("SELECT c FROM sbtest1 WHERE id BETWEEN 1 AND 100")
        .contains("primary key range scan"));
    assert!(explain("SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN 1 AND 100").contains("aggregate"));
    assert!(
        explain("SELECT c FROM sbtest1 WHERE id BETWEEN 1 AND 100 ORDER BY c").contains("sort")
    );
    assert!(
        explain("SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN 1 AND 100 ORDER BY c")
            .contains("distinct")
    );
    let increment = explain("UPDATE sbtest1 SET k=k+1 WHERE id=1");
    assert!(increment.contains("primary key lookup"), "{increment}");
    assert!(
        increment.contains("increment by primary key at the data node"),
        "{increment}"
    );
    assert!(explain("UPDATE sbtest1 SET c='x' WHERE id=1").contains("\tupdate by primary key"));
    assert!(explain("DELETE FROM sbtest1 WHERE id=1").contains("primary key lookup"));
    assert!(
        explain("SELECT COUNT(k) FROM sbtest1 WHERE k BETWEEN 1 AND 2 OR k BETWEEN 5 AND 6")
            .contains("index range scan (k_1, 2 ranges)")
    );
    assert!(explain("SELECT c FROM sbtest1 WHERE pad = 'x'").contains("full scan"));
    let fetched = |sql: &str| -> u64 {
        let out = db(&format!(
            "{sql}; SHOW STATUS LIKE 'Tessera_last_statement_rows_fetched'"
        ));
        out.lines()
            .last()
            .and_then(|l| l.split('\t').nth(1))
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(fetched("SELECT c FROM sbtest1 WHERE id = 5"), 1);
    assert!(fetched("SELECT c FROM sbtest1 WHERE id BETWEEN 1 AND 100") <= 100);
    assert_eq!(
        fetched("SELECT c FROM sbtest1 WHERE id BETWEEN 1 AND 100"),
        100
    );

    // sysbench's update_index: no row read, one round trip.
    assert_eq!(fetched("UPDATE sbtest1 SET k=k+1 WHERE id=3"), 0);
    assert_eq!(
        fetched("UPDATE sbtest1 SET k=k+1 WHERE id=3 AND c <> ''"),
        1
    );
    // A queue's head read with a lock (TPC-C's Delivery): each partition
    // sends at most the limit, as for the same read without a lock, not a
    // batch of the 190 rows that follow.
    let head = "SELECT c FROM sbtest1 WHERE id >= 10 ORDER BY id LIMIT 1";
    let unlocked = fetched(head);
    let locked = fetched(&format!("BEGIN; {head} FOR UPDATE"));
    assert!(
        locked <= unlocked && unlocked < 20,
        "LIMIT 1 received {unlocked} rows, with FOR UPDATE {locked}"
    );

    // Writes: by key, a rollback that leaves the row, a commit that keeps it.
    db("UPDATE sbtest1 SET k=k+1 WHERE id=1; DELETE FROM sbtest1 WHERE id=2");
    assert_eq!(db("SELECT k FROM sbtest1 WHERE id = 1"), "2\n");
    assert_eq!(db("SELECT COUNT(*) FROM sbtest1 WHERE id = 2"), "0\n");
    db("BEGIN; UPDATE sbtest1 SET c='gone' WHERE id=3; ROLLBACK");
    assert_eq!(db("SELECT c FROM sbtest1 WHERE id = 3"), "c3\n");
    db("START TRANSACTION; SELECT c FROM sbtest1 WHERE id=3 FOR UPDATE; UPDATE sbtest1 SET c='kept' WHERE id=3; COMMIT");
    assert_eq!(db("SELECT c FROM sbtest1 WHERE id = 3"), "kept\n");
    db("INSERT INTO sbtest1 (id, k, c, pad) VALUES (2, 0, 'back', '')");
    assert_eq!(db("SELECT c FROM sbtest1 WHERE id = 2"), "back\n");
    // The next generated id is above every explicit one.
    db("INSERT INTO sbtest1 (id, k, c, pad) VALUES (1000, 0, 'x', '')");
    let id: u64 =
        db("INSERT INTO sbtest1 (k, c, pad) VALUES (0, 'y', ''); SELECT LAST_INSERT_ID()")
            .trim()
            .parse()
            .unwrap();
    assert!(id > 1000, "generated {id}");

    // MySQL's error numbers.
    assert!(error_of(
        &node,
        "USE sbtest; INSERT INTO sbtest1 (id, k) VALUES (1, 0)"
    )
    .contains("ERROR 1062"));
    assert!(error_of(&node, "USE sbtest; SELECT * FROM nothing").contains("ERROR 1146"));
    assert!(error_of(&node, "USE nothing").contains("ERROR 1049"));
    assert!(error_of(&node, "SELECT * FROM sbtest1").contains("ERROR 1046"));
    assert!(error_of(&node, "USE sbtest; SELECT nope FROM sbtest1").contains("ERROR 1054"));
    assert!(error_of(&node, "SELEC 1").contains("ERROR 1064"));
    // Text the parser panics on (caught: a syntax error), and text nested
    // past its depth limit.
    assert!(error_of(&node, "SELECT 1 DIV").contains("ERROR 1064"));
    let deep = format!("SELECT {}1{}", "(".repeat(5000), ")".repeat(5000));
    assert!(error_of(&node, &deep).contains("ERROR 1064"));
    assert!(error_of(
        &node,
        "USE sbtest; CREATE TABLE sbtest1 (a INT PRIMARY KEY)"
    )
    .contains("ERROR 1050"));
    assert!(error_of(&node, "CREATE DATABASE sbtest").contains("ERROR 1007"));
    let denied = mariadb(&node, "bob", "SELECT 1").unwrap_err();
    assert!(denied.contains("ERROR 1045"), "{denied}");

    // Edges: WHERE without FROM, LIMIT to the end, a literal the parser
    // takes but is no hex, a chain of operators past the limit.
    assert_eq!(db("SELECT 1 WHERE 1 = 0"), "");
    assert_eq!(
        db("SELECT id FROM sbtest1 WHERE id < 5 ORDER BY id LIMIT 1, 18446744073709551615"),
        "2\n3\n4\n"
    );
    assert!(error_of(&node, "SELECT X'éa'").contains("ERROR 1064"));
    let chain = format!("SELECT {}1", "1 + ".repeat(sql::MAX_OPERATORS + 1));
    assert!(error_of(&node, &chain).contains("ERROR 1064"));
    // A write that fails inside a transaction rolls all of it back: its
    // first row, queued before the second failed, never commits.
    let long = "x".repeat(200);
    let output = std::process::Command::new("mariadb")
        .args(["-h", "127.0.0.1", "-P", &node.port.to_string(), "-u", "root", "--force", "sbtest"])
        .arg("-e")
        .arg(format!("BEGIN; INSERT INTO sbtest1 (id, k, c) VALUES (5000, 1, 'a'), (5001, 1, '{long}'); COMMIT"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("ERROR 1406") && stderr.contains("rolled back"),
        "{stderr}"
    );
    assert_eq!(db("SELECT COUNT(*) FROM sbtest1 WHERE id = 5000"), "0\n");

    // KILL QUERY stops a running statement (SLEEP checks between steps),
    // and the connection goes on.
    assert_eq!(query(&node, "SELECT SLEEP(0.1)"), "0\n");
    let sleeper = std::process::Command::new("mariadb")
        .args([
            "-h",
            "127.0.0.1",
            "-P",
            &node.port.to_string(),
            "-u",
            "root",
        ])
        .args(["-e", "SELECT SLEEP(300); SELECT 'still here'"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let id = loop {
        assert!(
            Instant::now() < deadline,
            "the SLEEP never showed in SHOW PROCESSLIST"
        );
        let processes = query(&node, "SHOW PROCESSLIST");
        let sleeping = processes
            .lines()
            .find(|line| line.contains("SLEEP(300)"))
            .and_then(|line| line.split('\t').next().map(str::to_string));
        if let Some(id) = sleeping {
            break id;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    query(&node, &format!("KILL QUERY {id}"));
    let stopped = sleeper.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&stopped.stderr);
    assert!(stderr.contains("ERROR 1317"), "{stderr}");
    assert!(error_of(&node, "KILL 999999").contains("ERROR 1094"));

    // SHOW PROCESSLIST names the statement running: the SHOW itself.
    let processes = query(&node, "SHOW PROCESSLIST");
    assert!(processes.contains("SHOW PROCESSLIST"), "{processes}");

    // SHOW and DESCRIBE.
    assert!(query(&node, "SHOW DATABASES").contains("sbtest"));
    assert_eq!(db("SHOW TABLES"), "sbtest1\n");
    assert!(db("DESCRIBE sbtest1").starts_with("id\tint\tNO\tPRI\tNULL\tauto_increment\n"));
    assert!(db("SHOW CREATE TABLE sbtest1").contains("KEY `k_1` (`k`)"));

    // A malformed handshake closes that connection; the server serves on.
    let mut stream = TcpStream::connect(("127.0.0.1", node.port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    read_packet(&mut stream);
    write_packet(&mut stream, 1, &[0xde, 0xad, 0xbe]);
    let started = Instant::now();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the connection stayed open"
    );
    assert_eq!(query(&node, "SELECT 1 + 1"), "2\n");

    // A client that speaks caching_sha2_password (MySQL 8's default) logs
    // in as root without a password, and is then served.
    for plugin in ["caching_sha2_password", "mysql_native_password"] {
        let mut stream = TcpStream::connect(("127.0.0.1", node.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let (_, greeting) = read_packet(&mut stream);
        assert_eq!(greeting[0], 10, "protocol 10");
        let capabilities: u32 = 0x200 | 0x8000 | 0x80000 | 0x200000;
        let mut response = capabilities.to_le_bytes().to_vec();
        response.extend_from_slice(&(1u32 << 24).to_le_bytes());
        response.push(45);
        response.extend_from_slice(&[0; 23]);
        response.extend_from_slice(b"root\0");
        response.push(0); // an empty auth response, length-encoded
        response.extend_from_slice(plugin.as_bytes());
        response.push(0);
        write_packet(&mut stream, 1, &response);
        let (_, ok) = read_packet(&mut stream);
        assert_eq!(ok[0], 0x00, "{plugin}: not an OK: {ok:?}");
        // Without CLIENT_MULTI_STATEMENTS a second statement is refused.
        write_packet(&mut stream, 0, b"\x03SELECT 1; DROP DATABASE sbtest");
        let (_, refused) = read_packet(&mut stream);
        assert_eq!(refused[0], 0xFF, "{plugin}: not an error: {refused:?}");
        write_packet(&mut stream, 0, b"\x03SELECT 40 + 2");
        let (_, columns) = read_packet(&mut stream);
        assert_eq!(columns, [1], "{plugin}: one column");
        // The rest of the result: its column, EOF, the row, EOF.
        let rest: Vec<Vec<u8>> = (0..4).map(|_| read_packet(&mut stream).1).collect();
        assert_eq!(rest[2], b"\x0242", "{plugin}: the row");
        // Idle past its wait_timeout, the connection is closed.
        write_packet(&mut stream, 0, b"\x03SET SESSION wait_timeout = 1");
        let (_, set) = read_packet(&mut stream);
        assert_eq!(set[0], 0x00, "{plugin}: SET answered {set:?}");
        let mut after = Vec::new();
        stream
            .read_to_end(&mut after)
            .expect("the server closes the idle connection (the read times out if not)");
    }

    // TRUNCATE and DROP DATABASE.
    db("TRUNCATE TABLE sbtest1");
    assert_eq!(db("SELECT COUNT(*) FROM sbtest1"), "0\n");
    query(&node, "DROP DATABASE sbtest");
    assert!(!query(&node, "SHOW DATABASES").contains("sbtest"));
}

#[test]
fn a_sql_node_killed_mid_transaction_leaves_no_lock_and_no_write_behind() {
    let cluster = TestCluster::start(ClusterOptions::pair("sql_kill"));
    let mut first = SqlNode::start(&cluster);
    let second = SqlNode::start(&cluster);
    query(
        &first,
        "CREATE DATABASE d; CREATE TABLE d.t (id INT PRIMARY KEY, v INT); INSERT INTO d.t VALUES (1, 0)",
    );
    // A transaction on the first SQL node updates the row (locking it)
    // and waits.
    let mut holder = std::process::Command::new("mariadb")
        .args([
            "-h",
            "127.0.0.1",
            "-P",
            &first.port.to_string(),
            "-u",
            "root",
        ])
        .args([
            "-e",
            "BEGIN; UPDATE d.t SET v = 1 WHERE id = 1; SELECT SLEEP(300)",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !query(&first, "SHOW PROCESSLIST").contains("SLEEP(300)") {
        assert!(
            Instant::now() < deadline,
            "the holder never reached its SLEEP"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    first.kill();
    // The cluster finds the API node gone and aborts its transaction: the
    // lock goes, and the update never commits. Until then the second SQL
    // node's update waits for the lock and may time out (1205): again.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match mariadb(&second, "root", "UPDATE d.t SET v = v + 10 WHERE id = 1") {
            Ok(_) => break,
            Err(error) if error.contains("1205") || error.contains("1213") => {
                assert!(Instant::now() < deadline, "the lock never went: {error}");
            }
            Err(error) => panic!("update on the second SQL node: {error}"),
        }
    }
    assert_eq!(query(&second, "SELECT v FROM d.t WHERE id = 1"), "10\n");
    // Its client heard its SQL node go.
    let _ = holder.wait();

    // A TRUNCATE whose SQL node died between its drop and its create: the
    // next SQL node to find the table gone finishes it, declarations and
    // all, the AUTO_INCREMENT counting from 1 again.
    query(
        &second,
        "CREATE TABLE d.counted (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(10) DEFAULT 'x', KEY by_name (name)); \
         INSERT INTO d.counted (name) VALUES ('a'), ('b')",
    );
    let described = query(&second, "DESCRIBE d.counted");
    let engine = engine_beside(&cluster);
    interrupted_truncate(&engine, "d", "counted");
    assert_eq!(query(&second, "SELECT COUNT(*) FROM d.counted"), "0\n");
    assert_eq!(query(&second, "DESCRIBE d.counted"), described);
    query(&second, "INSERT INTO d.counted (name) VALUES ('c')");
    assert_eq!(query(&second, "SELECT id, name FROM d.counted"), "1\tc\n");
    // One that is dropped before anyone finished it is dropped.
    interrupted_truncate(&engine, "d", "counted");
    query(&second, "DROP TABLE d.counted");
    assert!(error_of(&second, "SELECT * FROM d.counted").contains("1146"));
}

/// `SELECT ... ORDER BY <the key's order> LIMIT 1 FOR UPDATE` (a queue's
/// head, TPC-C's Delivery) reads in key order and locks the one row it
/// returns: another transaction may change the rows behind it meanwhile.
#[test]
fn a_locking_read_with_limit_in_key_order_locks_only_the_rows_it_returns() {
    let cluster = TestCluster::start(ClusterOptions::pair("sql_queue"));
    let node = SqlNode::start(&cluster);
    query(
        &node,
        "CREATE DATABASE q; CREATE TABLE q.queue (shard INT NOT NULL, id INT NOT NULL, v INT, \
         PRIMARY KEY (shard, id)) PARTITION BY KEY (shard); \
         INSERT INTO q.queue VALUES (1, 1, 0), (1, 2, 0), (1, 3, 0), (2, 1, 0)",
    );
    let engine = engine_beside(&cluster);
    let session = |id| root_session(&engine, id, "q");
    let run = run_one;
    let (mut holder, mut other) = (session(1), session(2));
    run(&mut holder, "START TRANSACTION");
    let head = run(
        &mut holder,
        "SELECT id FROM queue WHERE shard = 1 ORDER BY id LIMIT 1 FOR UPDATE",
    );
    assert!(format!("{head:?}").contains("Int(1)"), "{head:?}");
    // The rows behind the head are free: this does not wait (a lock held
    // on them would end it in a lock wait timeout, 1205).
    run(
        &mut other,
        "UPDATE queue SET v = 5 WHERE shard = 1 AND id = 3",
    );
    // The head is deleted as the transaction holds it, without a read.
    let reused = |session: &mut sql::Session| global_status(session, "Tessera_locked_rows_reused");
    let before = reused(&mut holder);
    run(&mut holder, "DELETE FROM queue WHERE shard = 1 AND id = 1");
    assert_eq!(reused(&mut holder), before + 1);
    run(&mut holder, "COMMIT");
    assert_eq!(
        query(
            &node,
            "SELECT id, v FROM q.queue WHERE shard = 1 ORDER BY id"
        ),
        "2\t0\n3\t5\n"
    );
}

/// SKIP LOCKED and NOWAIT, as a job queue's consumers use them: while
/// one transaction holds the queue's head, another takes the next rows
/// (by a scan, by key and through a unique index) without waiting, and a
/// NOWAIT read of a held row fails at once with MySQL's 3572, rolling
/// its transaction back; the holder's rows and commit are untouched.
#[test]
fn skip_locked_takes_the_rows_no_other_holds_and_nowait_fails_at_once() {
    let cluster = TestCluster::start(ClusterOptions::pair("sql_skip_locked"));
    let node = SqlNode::start(&cluster);
    query(
        &node,
        "CREATE DATABASE j; CREATE TABLE j.jobs (id INT PRIMARY KEY, name VARCHAR(20), \
         state VARCHAR(10), UNIQUE KEY by_name (name)); \
         INSERT INTO j.jobs VALUES (1, 'a', 'new'), (2, 'b', 'new'), (3, 'c', 'new'), \
         (4, 'd', 'new'), (5, 'e', 'new')",
    );
    let engine = engine_beside(&cluster);
    let session = |id| root_session(&engine, id, "j");
    let (mut holder, mut worker) = (session(1), session(2));
    let ids = |response: &sql::Response| -> Vec<String> {
        let sql::Response::Rows { rows, .. } = response else {
            panic!("rows: {response:?}");
        };
        rows.iter().map(|row| format!("{:?}", row[0])).collect()
    };
    run_one(&mut holder, "START TRANSACTION");
    let held = run_one(
        &mut holder,
        "SELECT id FROM jobs ORDER BY id LIMIT 2 FOR UPDATE SKIP LOCKED",
    );
    assert_eq!(ids(&held), ["Int(1)", "Int(2)"]);
    // The next consumer skips the held rows, by a scan, by key and
    // through the unique index, and goes on in its transaction.
    run_one(&mut worker, "START TRANSACTION");
    let next = run_one(
        &mut worker,
        "SELECT id FROM jobs WHERE state = 'new' ORDER BY id LIMIT 2 FOR UPDATE SKIP LOCKED",
    );
    assert_eq!(ids(&next), ["Int(3)", "Int(4)"]);
    let by_key = run_one(
        &mut worker,
        "SELECT id FROM jobs WHERE id IN (1, 5) FOR UPDATE SKIP LOCKED",
    );
    assert_eq!(ids(&by_key), ["Int(5)"]);
    let by_name = run_one(
        &mut worker,
        "SELECT id FROM jobs WHERE name = 'b' FOR SHARE SKIP LOCKED",
    );
    assert!(ids(&by_name).is_empty(), "{by_name:?}");
    run_one(
        &mut worker,
        "UPDATE jobs SET state = 'taken' WHERE id IN (3, 4)",
    );
    run_one(&mut worker, "COMMIT");
    // NOWAIT: the held row is 3572 at once; a free row reads as ever.
    let mut impatient = session(3);
    let free = run_one(
        &mut impatient,
        "SELECT id FROM jobs WHERE id = 5 FOR UPDATE NOWAIT",
    );
    assert_eq!(ids(&free), ["Int(5)"]);
    run_one(&mut impatient, "START TRANSACTION");
    let mut results = impatient.query("SELECT id FROM jobs WHERE id = 1 FOR UPDATE NOWAIT", false);
    let error = results
        .pop()
        .unwrap()
        .expect_err("a NOWAIT read of a held row");
    assert_eq!(error.code, 3572, "{error:?}");
    let explained = query(
        &node,
        "EXPLAIN SELECT id FROM j.jobs FOR UPDATE SKIP LOCKED",
    );
    assert!(explained.contains("skipping locked rows"), "{explained}");
    run_one(
        &mut holder,
        "UPDATE jobs SET state = 'taken' WHERE id IN (1, 2)",
    );
    run_one(&mut holder, "COMMIT");
    assert_eq!(
        query(&node, "SELECT id, state FROM j.jobs ORDER BY id"),
        "1\ttaken\n2\ttaken\n3\ttaken\n4\ttaken\n5\tnew\n"
    );
}

/// A committed read in a transaction, of a row whose primary replica is
/// on another data node than the transaction's tc, is made at that node
/// by a transaction of its own, and sees what any committed read sees;
/// once the transaction writes to the table, its reads of the table stay
/// in it and see its own changes.
#[test]
fn committed_reads_of_a_table_the_transaction_has_not_written_go_to_the_primary() {
    let cluster = TestCluster::start(ClusterOptions::pair("sql_primary_reads"));
    let node = SqlNode::start(&cluster);
    let values: Vec<String> = (1..=16).map(|k| format!("({k}, {k})")).collect();
    query(
        &node,
        &format!(
            "CREATE DATABASE p; CREATE TABLE p.t (k INT PRIMARY KEY, v INT); \
             INSERT INTO p.t VALUES {}; CREATE TABLE p.u (k INT PRIMARY KEY, v INT); \
             INSERT INTO p.u VALUES (1, 1)",
            values.join(", ")
        ),
    );
    let engine = engine_beside(&cluster);
    let session = |id| root_session(&engine, id, "p");
    let run = |session: &mut sql::Session, sql: &str| format!("{:?}", run_one(session, sql));
    let at_primary =
        |session: &mut sql::Session| global_status(session, "Tessera_reads_at_primary");
    let read_all = |session: &mut sql::Session, expected: &dyn Fn(i64) -> i64| {
        // Key 1 last: a write of it may be waiting.
        for k in (1..=16).rev() {
            let row = run(session, &format!("SELECT v FROM t WHERE k = {k}"));
            assert!(
                row.contains(&format!("Int({})", expected(k))),
                "k = {k}: {row}"
            );
        }
    };
    let (mut reader, mut writer) = (session(1), session(2));
    // A write holds the transaction to its tc (a transaction that holds
    // nothing is begun afresh at each statement's key).
    run(&mut reader, "START TRANSACTION");
    run(&mut reader, "UPDATE u SET v = 2 WHERE k = 1");
    let before = at_primary(&mut reader);
    read_all(&mut reader, &|k| k);
    let elsewhere = at_primary(&mut reader) - before;
    // The transaction's tc is on one of the two nodes; the keys' primaries
    // are on both.
    assert!(
        elsewhere > 0 && elsewhere < 16,
        "{elsewhere} of 16 read at the primary"
    );
    // Another transaction's commit is seen on both paths (READ COMMITTED).
    run(&mut writer, "UPDATE t SET v = v + 100");
    read_all(&mut reader, &|k| k + 100);
    // The transaction's own change of the table is read in it.
    run(&mut reader, "UPDATE t SET v = v + 1000");
    let before = at_primary(&mut reader);
    read_all(&mut reader, &|k| k + 1100);
    assert_eq!(at_primary(&mut reader), before);
    run(&mut reader, "ROLLBACK");
    assert_eq!(
        query(&node, "SELECT SUM(v) FROM p.t"),
        format!("{}\n", (1..=16).map(|k| k + 100).sum::<i64>())
    );
    // A write still waiting for a round trip (of a row the transaction
    // holds) counts as written too.
    run(&mut reader, "START TRANSACTION");
    run(&mut reader, "UPDATE u SET v = 3 WHERE k = 1");
    run(&mut reader, "SELECT v FROM t WHERE k = 1 FOR UPDATE");
    run(&mut reader, "UPDATE t SET v = 5000 WHERE k = 1");
    let before = at_primary(&mut reader);
    read_all(&mut reader, &|k| if k == 1 { 5000 } else { k + 100 });
    assert_eq!(at_primary(&mut reader), before);
    // The held row is read from the transaction's image of it, its
    // waiting write included, without a round trip: COMMIT carries the
    // write.
    let reused = |session: &mut sql::Session| global_status(session, "Tessera_locked_rows_reused");
    let before = reused(&mut reader);
    let row = run(&mut reader, "SELECT v FROM t WHERE k = 1");
    assert!(row.contains("Int(5000)"), "{row}");
    assert_eq!(reused(&mut reader), before + 1);
    run(&mut reader, "COMMIT");
    assert_eq!(query(&node, "SELECT v FROM p.t WHERE k = 1"), "5000\n");
}

/// A transaction whose first statement reaches its rows by a range whose
/// equality prefix gives the partition key one value (TPC-C's Delivery:
/// the oldest new order of a district, FOR UPDATE, then its order lines)
/// runs on the tc of that partition's primary, as one begun by a primary
/// key does: a committed read of a row with the same partition key in
/// another table (placed alike) is then made in the transaction, at its
/// own tc, never at the primary by a transaction of its own. Covered: a
/// one-column partition key and a two-column one in another order than
/// the primary key's, ranges of the primary key and of a secondary
/// index, several ranges of one prefix, and a list of primary keys
/// (placed by the first).
#[test]
fn a_transaction_begun_by_a_range_of_one_partition_runs_at_its_primary() {
    let cluster = TestCluster::start(ClusterOptions::pair("sql_partition_hint"));
    let node = SqlNode::start(&cluster);
    let shards = 16;
    let stock: Vec<String> = (1..=shards)
        .flat_map(|w| (1..=3).map(move |id| format!("({w}, {id}, 0)")))
        .collect();
    let district: Vec<String> = (1..=shards).map(|w| format!("({w}, {w})")).collect();
    let lines: Vec<String> = (1..=shards)
        .flat_map(|w| (1..=3).map(move |o| format!("({w}, 7, {o}, {o})")))
        .collect();
    let districts: Vec<String> = (1..=shards).map(|w| format!("({w}, 7, {w})")).collect();
    query(
        &node,
        &format!(
            "CREATE DATABASE h; CREATE TABLE h.stock (w INT NOT NULL, id INT NOT NULL, v INT, \
             PRIMARY KEY (w, id)) PARTITION BY KEY (w); INSERT INTO h.stock VALUES {}; \
             CREATE TABLE h.district (w INT NOT NULL PRIMARY KEY, v INT) PARTITION BY KEY (w); \
             INSERT INTO h.district VALUES {}; \
             CREATE TABLE h.lines (w INT NOT NULL, d INT NOT NULL, o INT NOT NULL, x INT, \
             PRIMARY KEY (w, d, o), KEY by_x (d, w, x)) PARTITION BY KEY (d, w); \
             INSERT INTO h.lines VALUES {}; \
             CREATE TABLE h.districts (w INT NOT NULL, d INT NOT NULL, v INT, \
             PRIMARY KEY (w, d)) PARTITION BY KEY (d, w); INSERT INTO h.districts VALUES {}",
            stock.join(", "),
            district.join(", "),
            lines.join(", "),
            districts.join(", ")
        ),
    );
    let engine = engine_beside(&cluster);
    let mut session = root_session(&engine, 1, "h");
    let at_primary =
        |session: &mut sql::Session| global_status(session, "Tessera_reads_at_primary");
    let mut elsewhere = 0;
    for w in 1..=shards {
        let by_w = |w: i64| format!("SELECT v FROM district WHERE w = {w}");
        let by_dw = |w: i64| format!("SELECT v FROM districts WHERE w = {w} AND d = 7");
        let stock_of = |w: i64| format!("SELECT w FROM stock WHERE w = {w} AND id = 1");
        let cases: [(String, &dyn Fn(i64) -> String); 8] = [
            (
                format!("SELECT v FROM district WHERE w IN ({w}, 999) FOR UPDATE"),
                &stock_of,
            ),
            (
                format!("SELECT id FROM stock WHERE w = {w} ORDER BY id LIMIT 1 FOR UPDATE"),
                &by_w,
            ),
            (
                format!("UPDATE stock SET v = v + 1 WHERE w = {w} AND id >= 2"),
                &by_w,
            ),
            (
                format!("DELETE FROM stock WHERE w = {w} AND id BETWEEN 2 AND 3"),
                &by_w,
            ),
            (
                format!("UPDATE stock SET v = v + 1 WHERE w = {w} AND id IN (2, 3)"),
                &by_w,
            ),
            (
                format!("UPDATE stock SET v = v + 1 WHERE w = {w} AND (id < 2 OR id > 2)"),
                &by_w,
            ),
            (
                format!(
                    "SELECT o FROM lines WHERE w = {w} AND d = 7 ORDER BY o LIMIT 1 FOR UPDATE"
                ),
                &by_dw,
            ),
            (
                format!("SELECT o FROM lines WHERE d = 7 AND w = {w} AND x >= 2 FOR UPDATE"),
                &by_dw,
            ),
        ];
        for (first, read) in cases {
            run_one(&mut session, "START TRANSACTION");
            run_one(&mut session, &first);
            let before = at_primary(&mut session);
            let row = run_one(&mut session, &read(w));
            assert!(format!("{row:?}").contains(&format!("Int({w})")), "{row:?}");
            assert_eq!(at_primary(&mut session), before, "{first}");
            // The other partitions are on both nodes: some of their rows
            // are read at their primary (so the check above can fail).
            for other in (1..=shards).filter(|other| *other != w) {
                run_one(&mut session, &read(other));
            }
            elsewhere += at_primary(&mut session) - before;
            run_one(&mut session, "ROLLBACK");
        }
    }
    assert!(
        elsewhere > 0,
        "no read of another partition was made at its primary"
    );
    assert_eq!(
        query(&node, "SELECT COUNT(*), SUM(v) FROM h.stock"),
        format!("{}\t0\n", shards * 3)
    );
}

/// A write of a held row waits in the transaction for its next round
/// trip (design 0034), and the SQL node notes its key so that another
/// operation on that row sends it first. Once another statement's round
/// trips sent the queue, the note is forgotten: an INSERT of the key
/// deleted earlier, after a later write was queued, costs one round trip
/// (its own, carrying the later write), not a second one to send a write
/// that no longer waits. `Tessera_execute_count` counts the round trips;
/// the engine here has its cluster connection to itself.
#[test]
fn a_write_sent_by_another_statement_no_longer_counts_as_waiting() {
    let cluster = TestCluster::start(ClusterOptions::pair("sql_waiting_writes"));
    let node = SqlNode::start(&cluster);
    query(
        &node,
        "CREATE DATABASE w; CREATE TABLE w.t (k INT NOT NULL PRIMARY KEY, v INT); \
         INSERT INTO w.t VALUES (1, 1), (2, 2), (3, 3); \
         CREATE TABLE w.other (k INT NOT NULL PRIMARY KEY, v INT); \
         INSERT INTO w.other VALUES (1, 1)",
    );
    let engine = engine_beside(&cluster);
    let mut session = root_session(&engine, 1, "w");
    let run = run_one;
    let executes = |session: &mut sql::Session| global_status(session, "Tessera_execute_count");
    run(&mut session, "START TRANSACTION");
    run(&mut session, "SELECT v FROM t WHERE k = 1 FOR UPDATE");
    run(&mut session, "SELECT v FROM t WHERE k = 2 FOR UPDATE");
    // Held: the delete waits for the next round trip.
    let before = executes(&mut session);
    run(&mut session, "DELETE FROM t WHERE k = 1");
    assert_eq!(
        executes(&mut session),
        before,
        "the delete of a held row waits"
    );
    // A row not held is read, then written: the delete goes with the read.
    run(&mut session, "UPDATE other SET v = v + 1 WHERE k = 1");
    // A second held row's write waits in a new queue.
    let before = executes(&mut session);
    run(&mut session, "UPDATE t SET v = 20 WHERE k = 2");
    assert_eq!(
        executes(&mut session),
        before,
        "the update of a held row waits"
    );
    run(&mut session, "INSERT INTO t VALUES (1, 100)");
    assert_eq!(
        executes(&mut session),
        before + 1,
        "the INSERT takes one round trip: the deleted key's write went before"
    );
    run(&mut session, "COMMIT");
    assert_eq!(
        query(&node, "SELECT k, v FROM w.t ORDER BY k"),
        "1\t100\n2\t20\n3\t3\n"
    );
    assert_eq!(query(&node, "SELECT v FROM w.other"), "2\n");
}

/// A session of the built-in root on `engine`, in `database`.
fn root_session(engine: &std::sync::Arc<sql::Engine>, id: u32, database: &str) -> sql::Session {
    sql::Session::new(
        std::sync::Arc::clone(engine),
        id,
        sql::accounts::Account::built_in_root(),
        Some(database),
        std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
    )
    .expect("a session")
}

/// Runs one statement in `session`; it must succeed.
fn run_one(session: &mut sql::Session, sql: &str) -> sql::Response {
    let mut results = session.query(sql, false);
    assert_eq!(results.len(), 1, "{sql}");
    results
        .pop()
        .unwrap()
        .unwrap_or_else(|error| panic!("{sql}: {error:?}"))
}

/// The value of the global status variable `name`, a count.
fn global_status(session: &mut sql::Session, name: &str) -> u64 {
    let status = run_one(session, &format!("SHOW GLOBAL STATUS LIKE '{name}'"));
    let sql::Response::Rows { rows, .. } = status else {
        panic!("SHOW STATUS answers rows: {status:?}");
    };
    rows[0][1].as_str().unwrap().parse::<u64>().unwrap()
}

/// An SQL engine in this process, over its own connection to `cluster`.
fn engine_beside(cluster: &TestCluster) -> std::sync::Arc<sql::Engine> {
    struct NoConnections;
    impl sql::Server for NoConnections {
        fn processes(&self) -> Vec<sql::Process> {
            Vec::new()
        }
        fn kill(&self, _id: u32, _query_only: bool) -> bool {
            false
        }
    }
    let connection = client::Cluster::connect(&cluster.mgmd_addr()).expect("connect");
    let connection: &'static client::Cluster = Box::leak(Box::new(connection));
    sql::Engine::new(connection, std::sync::Arc::new(NoConnections)).expect("engine")
}

/// The first half of a TRUNCATE of `database.table` (its definition
/// recorded, the table dropped), as a SQL node that died before the
/// second leaves it.
fn interrupted_truncate(engine: &sql::Engine, database: &str, table: &str) {
    let sql_table = engine.catalog.table(database, table).expect("the table");
    let mut def = sql_table.def().clone();
    (def.id, def.version, def.revision) = (0, 0, 0);
    let checks: Vec<sql::checks::CheckDeclaration> = sql_table
        .checks
        .iter()
        .map(|check| check.declaration.clone())
        .collect();
    engine
        .catalog
        .begin_truncate(database, table, &def, &sql_table.columns, &checks)
        .expect("the first half");
}

/// A view made on one SQL node is read on another at once; replaced or
/// dropped there, it is read as it is now by a statement the first
/// prepared before. A reader needs a privilege on the view and SELECT on
/// the tables it reads (SQL SECURITY INVOKER; docs/design/0037-views.md).
#[test]
fn views_are_shared_by_every_sql_node_and_read_with_the_readers_privileges() {
    let cluster = TestCluster::start(ClusterOptions::pair("sql_views"));
    let first = SqlNode::start(&cluster);
    let second = SqlNode::start(&cluster);
    query(
        &first,
        "CREATE DATABASE v; CREATE TABLE v.t (id INT PRIMARY KEY, secret INT); \
         INSERT INTO v.t VALUES (1, 10), (2, 20), (3, 30); \
         CREATE VIEW v.open AS SELECT id FROM v.t",
    );
    assert_eq!(
        query(&second, "SELECT * FROM v.open ORDER BY id"),
        "1\n2\n3\n"
    );

    let engine = engine_beside(&cluster);
    let mut session = root_session(&engine, 1, "v");
    let (statement, _) = session
        .prepare("SELECT COUNT(*) FROM open WHERE id > ?")
        .expect("prepared");
    let count = |session: &mut sql::Session| match session
        .execute(statement, &[sql::value::Value::Int(0)])
    {
        Ok(sql::Response::Rows { rows, .. }) => Ok(rows[0][0].clone()),
        Ok(other) => panic!("rows expected: {other:?}"),
        Err(error) => Err(error.code),
    };
    assert_eq!(count(&mut session), Ok(sql::value::Value::Int(3)));
    query(
        &second,
        "CREATE OR REPLACE VIEW v.open AS SELECT id FROM v.t WHERE id >= 2",
    );
    assert_eq!(count(&mut session), Ok(sql::value::Value::Int(2)));
    query(&second, "DROP VIEW v.open");
    assert_eq!(count(&mut session), Err(1146));

    query(
        &first,
        "CREATE VIEW v.ids AS SELECT id FROM v.t; \
         CREATE USER 'viewer'@'%' IDENTIFIED WITH mysql_native_password BY 'pw'; GRANT SELECT ON v.ids TO 'viewer'@'%'",
    );
    let viewer = |sql: &str| {
        common::mariadb_login(
            &second,
            common::Login {
                user: "viewer",
                password: Some("pw"),
                tls: false,
                database: Some("v"),
                host: None,
            },
            sql,
        )
    };
    // The view alone is not enough: its table is read as the reader.
    let refused = viewer("SELECT COUNT(*) FROM ids").unwrap_err();
    assert!(refused.contains("1142"), "{refused}");
    query(&first, "GRANT SELECT ON v.t TO 'viewer'@'%'");
    assert_eq!(viewer("SELECT COUNT(*) FROM ids").unwrap(), "3\n");
    // A view of a table the creator cannot read is refused, as is one
    // without CREATE.
    query(
        &first,
        "CREATE TABLE v.hidden (id INT PRIMARY KEY); GRANT CREATE ON v.* TO 'viewer'@'%'",
    );
    let refused = viewer("CREATE VIEW peek AS SELECT id FROM hidden").unwrap_err();
    assert!(refused.contains("1142"), "{refused}");
    viewer("CREATE VIEW mine AS SELECT id FROM t WHERE id = 1").unwrap();
    assert_eq!(query(&first, "SELECT * FROM v.mine"), "1\n");
    assert!(query(&first, "SHOW CREATE VIEW v.mine").contains("SQL SECURITY INVOKER VIEW `mine`"));
}

/// A multi-table UPDATE prepared with parameters in its ON, SET and
/// WHERE takes them in the statement's order, and a table without a
/// primary key (keyed by its hidden one) is written through a join.
#[test]
fn a_prepared_joined_update_binds_its_parameters_in_statement_order() {
    let cluster = TestCluster::start(ClusterOptions::pair("sql_joined_update"));
    let node = SqlNode::start(&cluster);
    query(
        &node,
        "CREATE DATABASE j; CREATE TABLE j.a (id INT PRIMARY KEY, v INT); \
         CREATE TABLE j.b (a_id INT, kind INT, w INT); \
         INSERT INTO j.a VALUES (1, 0), (2, 0); \
         INSERT INTO j.b VALUES (1, 7, 10), (2, 8, 20), (2, 7, 30)",
    );
    let engine = engine_beside(&cluster);
    let mut session = root_session(&engine, 1, "j");
    let (statement, _) = session
        .prepare("UPDATE a JOIN b ON b.a_id = a.id AND b.kind = ? SET a.v = b.w + ? WHERE a.id > ?")
        .expect("prepared");
    let values = [7, 1, 1].map(sql::value::Value::Int);
    match session.execute(statement, &values) {
        Ok(sql::Response::Ok { affected_rows, .. }) => assert_eq!(affected_rows, 1),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        query(&node, "SELECT id, v FROM j.a ORDER BY id"),
        "1\t0\n2\t31\n"
    );
    // The table without a key, written through the join.
    query(
        &node,
        "UPDATE j.b JOIN j.a ON j.a.id = j.b.a_id SET w = w + a.v WHERE a.id = 2; \
         DELETE j.b FROM j.b JOIN j.a ON j.a.id = j.b.a_id WHERE b.kind = 8",
    );
    assert_eq!(
        query(&node, "SELECT a_id, kind, w FROM j.b ORDER BY a_id, kind"),
        "1\t7\t10\n2\t7\t61\n"
    );
    let explained = query(
        &node,
        "EXPLAIN UPDATE j.a JOIN j.b ON b.a_id = a.id SET a.v = b.w",
    );
    assert!(
        explained.contains("update of a by primary key, each row once"),
        "{explained}"
    );
}

/// A condition on a view's or a derived table's column reaches the
/// table below (design 0040): EXPLAIN shows the key lookup or index
/// range in the view's own query, not where a LIMIT or the NULL side of
/// a LEFT JOIN forbids it; and a prepared statement whose placeholders
/// stand both inside a derived table and in the condition pushed into
/// it binds each where it stands.
#[test]
fn conditions_on_views_and_derived_tables_reach_their_tables() {
    let cluster = TestCluster::start(ClusterOptions::pair("sql_pushdown"));
    let node = SqlNode::start(&cluster);
    query(
        &node,
        "CREATE DATABASE p; CREATE TABLE p.t (id INT PRIMARY KEY, g INT, v INT, KEY (g)); \
         INSERT INTO p.t VALUES (1, 1, 10), (2, 1, 20), (3, 2, 30), (4, 2, 40); \
         CREATE VIEW p.everything AS SELECT * FROM p.t; \
         CREATE VIEW p.sums AS SELECT g, SUM(v) AS total FROM p.t GROUP BY g; \
         CREATE VIEW p.first_two AS SELECT id FROM p.t ORDER BY id LIMIT 2; \
         CREATE VIEW p.over_view (k) AS SELECT id FROM p.everything; \
         CREATE VIEW p.level1 AS SELECT id, v FROM p.t WHERE v > 0; \
         CREATE VIEW p.level2 AS SELECT id, v FROM p.level1 WHERE v > 1; \
         CREATE VIEW p.level3 AS SELECT id, v FROM p.level2 WHERE v > 2; \
         CREATE VIEW p.both AS SELECT id, v FROM p.t WHERE g = 1 \
           UNION ALL SELECT id, v FROM p.t WHERE g = 2",
    );
    let explain = |sql: &str| query(&node, &format!("USE p; EXPLAIN {sql}"));
    let shown = explain("SELECT v FROM everything WHERE id = 3");
    assert!(
        shown.contains("t\tin everything: primary key lookup"),
        "{shown}"
    );
    let shown = explain("SELECT total FROM sums WHERE g = 2");
    assert!(
        shown.contains("t\tin sums: index range scan (g, 1 range)"),
        "{shown}"
    );
    // On an aggregate: above the grouping, every row grouped.
    let shown = explain("SELECT g FROM sums WHERE total > 50");
    assert!(shown.contains("t\tin sums: full scan"), "{shown}");
    // Under a LIMIT: read in key order to the limit, as without it.
    let shown = explain("SELECT id FROM first_two WHERE id = 3");
    assert!(
        shown.contains("t\tin first_two: primary key range scan (1 range)"),
        "{shown}"
    );
    let shown = explain("SELECT k FROM over_view WHERE k = 4");
    assert!(
        shown.contains("everything\tin over_view: full scan"),
        "{shown}"
    );
    assert!(
        shown.contains("t\tin everything: primary key lookup"),
        "{shown}"
    );
    // Each level's own WHERE and the statement's reach the table.
    let shown = explain("SELECT v FROM level3 WHERE id = 2");
    assert!(
        shown.contains("t\tin level1: primary key lookup"),
        "{shown}"
    );
    assert_eq!(query(&node, "SELECT v FROM p.level3 WHERE id = 2"), "20\n");
    // Each SELECT of a UNION ALL.
    let shown = explain("SELECT v FROM both WHERE id = 3");
    assert!(
        shown.contains("t\tin both: select 1: primary key lookup"),
        "{shown}"
    );
    assert!(
        shown.contains("t\tin both: select 2: primary key lookup"),
        "{shown}"
    );
    assert_eq!(query(&node, "SELECT v FROM p.both WHERE id = 3"), "30\n");
    let shown = explain("SELECT * FROM (SELECT id, v FROM t) AS d WHERE d.id IN (1, 2)");
    assert!(
        shown.contains("t\tin d: batched primary key lookups (2)"),
        "{shown}"
    );
    // The NULL side of a LEFT JOIN takes nothing, unless the WHERE
    // rejects its NULL rows: then it is an inner join.
    let shown = explain(
        "SELECT * FROM t LEFT JOIN everything AS e ON e.id = t.g WHERE e.id = 1 OR e.id IS NULL",
    );
    assert!(
        shown.contains("everything\tleft join: full scan, once"),
        "{shown}"
    );
    assert!(shown.contains("t\tin everything: full scan"), "{shown}");
    let shown = explain("SELECT * FROM t LEFT JOIN everything AS e ON e.id = t.g WHERE e.id = 1");
    assert!(
        shown.contains("everything\tjoin: full scan, once"),
        "{shown}"
    );
    assert!(
        shown.contains("t\tin everything: primary key lookup"),
        "{shown}"
    );
    let shown = explain("SELECT * FROM t AS a LEFT JOIN t AS b ON b.g = a.id WHERE b.id = 2");
    assert!(
        shown.contains("t\tjoin: primary key lookup, once"),
        "{shown}"
    );
    assert_eq!(query(&node, "SELECT total FROM p.sums WHERE g = 2"), "70\n");
    // The data nodes sent the one row, not the table.
    let fetched = query(
        &node,
        "USE p; SELECT v FROM everything WHERE id = 3; \
         SHOW STATUS LIKE 'Tessera_last_statement_rows_fetched'",
    );
    assert!(
        fetched.ends_with("Tessera_last_statement_rows_fetched\t1\n"),
        "{fetched}"
    );
    assert_eq!(query(&node, "SELECT id FROM p.first_two WHERE id = 3"), "");

    let engine = engine_beside(&cluster);
    let mut session = root_session(&engine, 1, "p");
    let mut rows_of = |sql: &str, values: &[i64]| -> Vec<Vec<sql::value::Value>> {
        let (statement, _) = session.prepare(sql).expect("prepared");
        let values: Vec<sql::value::Value> =
            values.iter().map(|v| sql::value::Value::Int(*v)).collect();
        match session.execute(statement, &values) {
            Ok(sql::Response::Rows { rows, .. }) => rows,
            other => panic!("{sql}: {other:?}"),
        }
    };
    use sql::value::Value::Int;
    assert_eq!(
        rows_of(
            "SELECT d.id, d.v FROM (SELECT id, v FROM t WHERE v > ?) AS d WHERE d.id = ?",
            &[15, 3]
        ),
        vec![vec![Int(3), Int(30)]]
    );
    assert_eq!(
        rows_of(
            "SELECT d.id FROM (SELECT id, v FROM t WHERE v > ?) AS d WHERE d.id = ?",
            &[35, 3]
        ),
        Vec::<Vec<sql::value::Value>>::new()
    );
    assert_eq!(
        rows_of(
            "WITH c AS (SELECT id, v + ? AS w FROM t) SELECT id, w FROM c WHERE id = ? AND w > ?",
            &[100, 2, 0]
        ),
        vec![vec![Int(2), Int(120)]]
    );
    assert_eq!(
        rows_of("SELECT v FROM everything WHERE id = ?", &[4]),
        vec![vec![Int(40)]]
    );
}

/// The value of a one-row, one-column answer of `session`, or its error
/// number.
fn scalar(session: &mut sql::Session, sql: &str) -> Result<sql::value::Value, u16> {
    let mut results = session.query(sql, false);
    assert_eq!(results.len(), 1, "{sql}");
    match results.pop().unwrap() {
        Ok(sql::Response::Rows { mut rows, .. }) => Ok(rows.remove(0).remove(0)),
        Ok(other) => panic!("{sql}: rows expected, got {other:?}"),
        Err(error) => Err(error.code),
    }
}

/// User-level locks are the cluster's: a lock taken through one SQL node
/// is held on every other, stays held while its holder idles longer than
/// the data nodes' inactivity timeout, and goes when its holder's session
/// ends or its SQL node dies. Two sessions that would wait for each
/// other's locks are a deadlock, refused at once
/// (docs/design/0043-user-locks.md).
#[test]
fn user_level_locks_are_held_across_sql_nodes_until_their_holder_goes() {
    let cluster = TestCluster::start(ClusterOptions {
        extra_cluster_lines: "inactive_transaction_timeout_ms = 2000\n",
        ..ClusterOptions::pair("sql_user_locks")
    });
    let mut first = SqlNode::start(&cluster);
    let second = SqlNode::start(&cluster);
    // A migration tool's client on the first SQL node takes the lock
    // and works (sleeps) while holding it.
    let mut holder = std::process::Command::new("mariadb")
        .args([
            "-h",
            "127.0.0.1",
            "-P",
            &first.port.to_string(),
            "-u",
            "root",
        ])
        .args(["-e", "SELECT GET_LOCK('migrations', 0), SLEEP(300)"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while query(&second, "SELECT IS_FREE_LOCK('migrations')") != "0\n" {
        assert!(Instant::now() < deadline, "the holder never took its lock");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        query(
            &second,
            "SELECT GET_LOCK('migrations', 0), IS_USED_LOCK('migrations') IS NOT NULL"
        ),
        "0\t1\n"
    );
    // Idle for longer than the data nodes let a transaction idle: the
    // lock's transaction is kept alive.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(
        query(
            &second,
            "SELECT GET_LOCK('migrations', 0.5), IS_FREE_LOCK('migrations')"
        ),
        "0\t0\n"
    );
    // Its SQL node dies: the cluster ends its transactions, and the lock
    // is free for a waiter on the other.
    first.kill();
    assert_eq!(
        query(
            &second,
            "SELECT GET_LOCK('migrations', 120), IS_USED_LOCK('migrations') = CONNECTION_ID()"
        ),
        "1\t1\n"
    );
    let _ = holder.wait();

    // Two sessions of one SQL node, each holding the lock the other is
    // about to wait for: one of the two waits is refused with 3058, and
    // once its session lets go the other is granted.
    query(&second, "CREATE DATABASE locks");
    let engine = engine_beside(&cluster);
    let sessions: Vec<sql::Session> = (1..=2)
        .map(|id| root_session(&engine, id, "locks"))
        .collect();
    // Both hold their first lock before either waits.
    let both_hold = std::sync::Arc::new(std::sync::Barrier::new(2));
    let waits: Vec<_> = sessions
        .into_iter()
        .zip([("a", "b"), ("b", "a")])
        .map(|(mut session, (mine, wanted))| {
            let mine = format!("SELECT GET_LOCK('{mine}', 0)");
            let wanted = format!("SELECT GET_LOCK('{wanted}', 120)");
            let both_hold = std::sync::Arc::clone(&both_hold);
            std::thread::spawn(move || {
                assert_eq!(scalar(&mut session, &mine), Ok(sql::value::Value::Int(1)));
                both_hold.wait();
                let answer = scalar(&mut session, &wanted);
                if answer.is_err() {
                    scalar(&mut session, "SELECT RELEASE_ALL_LOCKS()").unwrap();
                }
                (answer, session)
            })
        })
        .collect();
    let answers: Vec<(Result<sql::value::Value, u16>, sql::Session)> =
        waits.into_iter().map(|wait| wait.join().unwrap()).collect();
    let mut codes: Vec<_> = answers.iter().map(|(answer, _)| answer.clone()).collect();
    codes.sort_by_key(|answer| answer.is_ok());
    assert_eq!(codes, vec![Err(3058), Ok(sql::value::Value::Int(1))]);

    // A session that ends lets go of its locks.
    drop(answers);
    let mut session = root_session(&engine, 3, "locks");
    assert_eq!(
        scalar(&mut session, "SELECT GET_LOCK('jobs', 0)"),
        Ok(sql::value::Value::Int(1))
    );
    assert_eq!(query(&second, "SELECT IS_FREE_LOCK('jobs')"), "0\n");
    drop(session);
    assert_eq!(
        query(
            &second,
            "SELECT GET_LOCK('jobs', 0), IS_FREE_LOCK('a'), IS_FREE_LOCK('b')"
        ),
        "1\t1\t1\n"
    );
}
