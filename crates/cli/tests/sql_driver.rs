//! `tessera sql` through a MySQL client library (`mysql_async`), the way
//! an application reaches it: the driver's own connection queries,
//! prepared statements in the binary protocol with parameters and
//! results of every column type (NULLs included), a statement executed
//! again with other parameter values and types, transactions committed
//! and rolled back, multi-statement text queries, and MySQL's error
//! numbers and SQLSTATEs as the driver reports them
//! (docs/design/0027-sql-node.md).

mod common;

use common::{mysql_read_packet, mysql_write_packet, ClusterOptions, SqlNode, TestCluster};
use mysql_async::prelude::*;
use mysql_async::{Conn, Error, Opts, OptsBuilder, Row, TxOpts};

/// An item as the test reads it back: id, qty, price, name, code, blob_.
type ItemRow = (
    u64,
    Option<i32>,
    f64,
    String,
    Option<String>,
    Option<Vec<u8>>,
);

async fn connect(node: &SqlNode) -> Conn {
    let opts: Opts = OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(node.port)
        .user(Some("root"))
        .into();
    Conn::new(opts).await.expect("the driver connects")
}

fn server_code(error: &Error) -> (u16, String) {
    match error {
        Error::Server(server) => (server.code, server.state.clone()),
        other => panic!("not a server error: {other:?}"),
    }
}

#[test]
fn a_driver_runs_prepared_statements_and_transactions() {
    let cluster = TestCluster::start(ClusterOptions::pair("sql_driver"));
    let node = SqlNode::start(&cluster);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut conn = connect(&node).await;
        conn.query_drop("CREATE DATABASE app").await.unwrap();
        conn.query_drop(
            "CREATE TABLE app.items (id BIGINT UNSIGNED NOT NULL PRIMARY KEY, \
             qty INT, price DOUBLE, name VARCHAR(40) NOT NULL, code CHAR(4), blob_ VARBINARY(8), \
             UNIQUE KEY by_name (name))",
        )
        .await
        .unwrap();
        conn.query_drop("USE app").await.unwrap();

        // Prepared inserts: one statement, many executions, NULLs.
        let insert = conn
            .prep("INSERT INTO items (id, qty, price, name, code, blob_) VALUES (?, ?, ?, ?, ?, ?)")
            .await
            .unwrap();
        for id in 1u64..=20 {
            let qty: Option<i32> = (id % 5 != 0).then_some(id as i32 * -3);
            let code: Option<String> = (id % 2 == 0).then(|| format!("c{id}"));
            conn.exec_drop(
                &insert,
                (
                    id,
                    qty,
                    id as f64 / 4.0,
                    format!("item {id}"),
                    code,
                    vec![id as u8, 0xFF],
                ),
            )
            .await
            .unwrap();
        }
        // The same statement with other parameter types: text for numbers.
        conn.exec_drop(
            &insert,
            ("21", "7", "2.5", "item 21", None::<String>, None::<Vec<u8>>),
        )
        .await
        .unwrap();

        // Reads in the binary protocol, typed.
        let row: Option<ItemRow> = conn
            .exec_first(
                "SELECT id, qty, price, name, code, blob_ FROM items WHERE id = ?",
                (4u64,),
            )
            .await
            .unwrap();
        assert_eq!(
            row,
            Some((
                4,
                Some(-12),
                1.0,
                "item 4".into(),
                Some("c4".into()),
                Some(vec![4, 0xFF])
            ))
        );
        let row: Option<(u64, Option<i32>, Option<String>)> = conn
            .exec_first("SELECT id, qty, code FROM items WHERE id = ?", (5u64,))
            .await
            .unwrap();
        assert_eq!(row, Some((5, None, None)));
        let row: Option<(u64, i32, f64)> = conn
            .exec_first(
                "SELECT id, qty, price FROM items WHERE name = ?",
                ("item 21",),
            )
            .await
            .unwrap();
        assert_eq!(row, Some((21, 7, 2.5)));
        let ids: Vec<u64> = conn
            .exec(
                "SELECT id FROM items WHERE id BETWEEN ? AND ? ORDER BY id DESC",
                (3u64, 6u64),
            )
            .await
            .unwrap();
        assert_eq!(ids, vec![6, 5, 4, 3]);
        // LIMIT and OFFSET as parameters (a driver's pagination), bound
        // at each execution of one prepared statement.
        let page = "SELECT id FROM items WHERE id BETWEEN ? AND ? ORDER BY id LIMIT ? OFFSET ?";
        let first: Vec<u64> = conn.exec(page, (3u64, 9u64, 2u64, 0u64)).await.unwrap();
        let second: Vec<u64> = conn.exec(page, (3u64, 9u64, 3u64, 2u64)).await.unwrap();
        assert_eq!((first, second), (vec![3, 4], vec![5, 6, 7]));
        let comma: Vec<u64> = conn
            .exec("SELECT id FROM items ORDER BY id DESC LIMIT ?, ?", (1u64, 2u64))
            .await
            .unwrap();
        assert_eq!(comma, vec![20, 19]);
        let negative = conn
            .exec::<u64, _, _>("SELECT id FROM items LIMIT ?", (-1i64,))
            .await
            .unwrap_err();
        assert_eq!(server_code(&negative).0, 1210, "{negative}");
        // A UNION's parameters are numbered across its SELECTs, and its
        // column comes back in the binary protocol as the union's type
        // (a BIGINT and a number's text: text).
        let united: Vec<(String,)> = conn
            .exec(
                "SELECT id FROM items WHERE id = ? UNION ALL SELECT name FROM items WHERE id = ? \
                 ORDER BY 1 LIMIT 5",
                (4u64, 2u64),
            )
            .await
            .unwrap();
        let name: Option<String> = conn
            .exec_first("SELECT name FROM items WHERE id = 2", ())
            .await
            .unwrap();
        let mut expected = vec!["4".to_string(), name.expect("item 2")];
        expected.sort();
        assert_eq!(united.into_iter().map(|(text,)| text).collect::<Vec<_>>(), expected);
        let (count, sum): (i64, i64) = conn
            .exec_first(
                "SELECT COUNT(*), SUM(qty) FROM items WHERE qty IS NOT NULL",
                (),
            )
            .await
            .unwrap()
            .unwrap();
        // qty = -3 id for ids not divisible by 5 (16 of 1..=20), and 7.
        let expected: i64 = (1..=20)
            .filter(|id| id % 5 != 0)
            .map(|id| id * -3)
            .sum::<i64>()
            + 7;
        assert_eq!((count, sum), (17, expected));

        // Text protocol, several statements in one query.
        let names: Vec<String> = conn
            .query("SELECT name FROM items WHERE id = 1; SELECT name FROM items WHERE id = 2")
            .await
            .unwrap();
        assert_eq!(names, vec!["item 1".to_string()]);
        // Their key lookups are read together, ahead of them: a row, no
        // row, a row; then a range, which reads for itself.
        let read_ahead = |rows: Vec<(String, String)>| -> u64 {
            rows.first().expect("the counter").1.parse().expect("a number")
        };
        let before = read_ahead(
            conn.query("SHOW GLOBAL STATUS LIKE 'Tessera_lookups_read_ahead'")
                .await
                .unwrap(),
        );
        let mut result = conn
            .query_iter(
                "SELECT name FROM items WHERE id = 7; SELECT name FROM items WHERE id = 4242; \
                 SELECT name, qty FROM items WHERE id = 8; SELECT id FROM items WHERE id BETWEEN 9 AND 10",
            )
            .await
            .unwrap();
        let first: Vec<String> = result.collect().await.unwrap();
        let missing: Vec<String> = result.collect().await.unwrap();
        let third: Vec<(String, i32)> = result.collect().await.unwrap();
        let range: Vec<u64> = result.collect().await.unwrap();
        drop(result);
        assert_eq!(first, vec!["item 7".to_string()]);
        assert!(missing.is_empty());
        assert_eq!(third, vec![("item 8".to_string(), -24)]);
        assert_eq!(range, vec![9, 10]);
        let after = read_ahead(
            conn.query("SHOW GLOBAL STATUS LIKE 'Tessera_lookups_read_ahead'")
                .await
                .unwrap(),
        );
        assert_eq!(after - before, 3, "the three lookups were read ahead");
        // Only the leading reads use what was read: a read after a write
        // of the same row reads it again.
        let mut result = conn
            .query_iter(
                "SELECT name FROM items WHERE id = 7; SELECT name FROM items WHERE id = 8; \
                 UPDATE items SET name = 'item 7b' WHERE id = 7; SELECT name FROM items WHERE id = 7",
            )
            .await
            .unwrap();
        let _: Vec<String> = result.collect().await.unwrap();
        let _: Vec<String> = result.collect().await.unwrap();
        let _: Vec<Row> = result.collect().await.unwrap();
        let after_write: Vec<String> = result.collect().await.unwrap();
        drop(result);
        assert_eq!(after_write, vec!["item 7b".to_string()]);
        let mut result = conn
            .query_iter("UPDATE items SET qty = 0 WHERE id = 1; SELECT qty FROM items WHERE id = 1")
            .await
            .unwrap();
        assert_eq!(result.affected_rows(), 1);
        let _: Vec<Row> = result.collect().await.unwrap();
        let qty: Vec<i32> = result.collect().await.unwrap();
        assert_eq!(qty, vec![0]);
        drop(result);

        // Transactions: a rollback leaves nothing, a commit keeps all.
        let mut transaction = conn.start_transaction(TxOpts::default()).await.unwrap();
        transaction
            .exec_drop("UPDATE items SET name = ? WHERE id = ?", ("renamed", 1u64))
            .await
            .unwrap();
        transaction
            .exec_drop("DELETE FROM items WHERE id = ?", (2u64,))
            .await
            .unwrap();
        transaction.rollback().await.unwrap();
        let name: Option<String> = conn
            .exec_first("SELECT name FROM items WHERE id = 1", ())
            .await
            .unwrap();
        assert_eq!(name.as_deref(), Some("item 1"));
        let mut transaction = conn.start_transaction(TxOpts::default()).await.unwrap();
        let locked: Option<i32> = transaction
            .exec_first("SELECT qty FROM items WHERE id = ? FOR UPDATE", (3u64,))
            .await
            .unwrap();
        assert_eq!(locked, Some(-9));
        transaction
            .exec_drop("UPDATE items SET qty = qty + 100 WHERE id = ?", (3u64,))
            .await
            .unwrap();
        transaction.commit().await.unwrap();
        let qty: Option<i32> = conn
            .exec_first("SELECT qty FROM items WHERE id = 3", ())
            .await
            .unwrap();
        assert_eq!(qty, Some(91));

        // Errors as the driver sees them.
        let duplicate = conn
            .exec_drop(
                &insert,
                (1u64, 1, 1.0, "other", None::<String>, None::<Vec<u8>>),
            )
            .await
            .unwrap_err();
        assert_eq!(server_code(&duplicate), (1062, "23000".into()));
        // The key is named as MySQL 8 names it: table.key, no database.
        assert!(
            format!("{duplicate}").contains("for key 'items.PRIMARY'"),
            "{duplicate}"
        );
        let unique = conn
            .exec_drop(
                &insert,
                (99u64, 1, 1.0, "item 3", None::<String>, None::<Vec<u8>>),
            )
            .await
            .unwrap_err();
        assert_eq!(server_code(&unique).0, 1062);
        let message = format!("{unique}");
        assert!(message.contains("for key 'items.") && !message.contains('/'), "{message}");
        let overflow = conn
            .query_drop("SELECT 18446744073709551615 + 1")
            .await
            .unwrap_err();
        assert_eq!(server_code(&overflow), (1690, "22003".into()));
        // A connection pool's check.
        let dual: Option<i64> = conn.query_first("SELECT 1 FROM DUAL").await.unwrap();
        assert_eq!(dual, Some(1));
        // The upsert idiom: the OK packet's insert id is the updated row's.
        conn.query_drop(
            "CREATE TABLE app.tags (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, \
             name VARCHAR(20) NOT NULL, UNIQUE KEY by_name (name))",
        )
        .await
        .unwrap();
        let upsert = "INSERT INTO app.tags (name) VALUES (?) \
                      ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)";
        conn.exec_drop(upsert, ("red",)).await.unwrap();
        conn.exec_drop(upsert, ("blue",)).await.unwrap();
        let blue = conn.last_insert_id();
        conn.exec_drop(upsert, ("red",)).await.unwrap();
        assert_eq!(conn.last_insert_id(), Some(1));
        conn.exec_drop(upsert, ("blue",)).await.unwrap();
        assert_eq!(conn.last_insert_id(), blue);
        // Session numbers come typed as numbers, for drivers that map
        // result types (a string '1' is not the number 1 to them).
        let typed: Vec<Row> = conn
            .query("SELECT LAST_INSERT_ID(), @@autocommit, CONNECTION_ID()")
            .await
            .unwrap();
        for column in typed[0].columns_ref() {
            assert_eq!(
                column.column_type(),
                mysql_async::consts::ColumnType::MYSQL_TYPE_LONGLONG,
                "{}",
                column.name_str()
            );
        }
        // Unaliased expressions are named by their text as written, as
        // MySQL names them: a client reading rows by name finds them.
        let named: Vec<Row> = conn
            .query("SELECT count(*), 1+1, 'ok', CONCAT('a',name), id /* c */ + 1, name FROM items WHERE id = 1 GROUP BY id, name")
            .await
            .unwrap();
        let names: Vec<String> = named[0]
            .columns_ref()
            .iter()
            .map(|c| c.name_str().into_owned())
            .collect();
        assert_eq!(
            names,
            ["count(*)", "1+1", "ok", "CONCAT('a',name)", "id  + 1", "name"]
        );
        let prepared: Vec<Row> = conn
            .exec("SELECT upper( name ), ? + 1 FROM items WHERE id = ?", (1, 1))
            .await
            .unwrap();
        let names: Vec<String> = prepared[0]
            .columns_ref()
            .iter()
            .map(|c| c.name_str().into_owned())
            .collect();
        assert_eq!(names, ["upper( name )", "? + 1"]);
        // Computed columns are typed as MySQL types them, so that the
        // binary protocol sends numbers a driver reads as numbers: an
        // integer sum, an exact quotient, a double, a DECIMAL CASE whose
        // other branch is 0 (shown with the column's digits).
        use mysql_async::consts::ColumnType as Wire;
        let (qty, price): (i64, f64) = conn
            .exec_first("SELECT qty, price FROM items WHERE id = ?", (2u64,))
            .await
            .unwrap()
            .unwrap();
        let computed: Vec<Row> = conn
            .exec(
                "SELECT qty * 2, qty / 4, price + 1, \
                 CASE WHEN id = 1 THEN CAST(qty AS DECIMAL(6,2)) ELSE 0 END, SUM(qty) \
                 FROM items WHERE id = ? GROUP BY id, qty, price",
                (2u64,),
            )
            .await
            .unwrap();
        let types: Vec<Wire> = computed[0]
            .columns_ref()
            .iter()
            .map(|c| c.column_type())
            .collect();
        assert_eq!(
            types,
            [
                Wire::MYSQL_TYPE_LONGLONG,
                Wire::MYSQL_TYPE_NEWDECIMAL,
                Wire::MYSQL_TYPE_DOUBLE,
                Wire::MYSQL_TYPE_NEWDECIMAL,
                Wire::MYSQL_TYPE_NEWDECIMAL,
            ]
        );
        let values = computed[0].clone().unwrap();
        assert_eq!(values[0], mysql_async::Value::Int(qty * 2));
        assert_eq!(
            values[1],
            mysql_async::Value::Bytes(format!("{:.4}", qty as f64 / 4.0).into_bytes())
        );
        assert_eq!(values[2], mysql_async::Value::Double(price + 1.0));
        assert_eq!(values[3], mysql_async::Value::Bytes(b"0.00".to_vec()));
        assert_eq!(values[4], mysql_async::Value::Bytes(qty.to_string().into_bytes()));
        // JSON is described as MySQL describes it: type JSON with the
        // binary character set (drivers read it as UTF-8 text); `->>`
        // gives text.
        let documents: Vec<Row> = conn
            .exec(
                "SELECT JSON_OBJECT('id', id, 'name', name), \
                 JSON_OBJECT('n', name)->>'$.n' FROM items WHERE id = ?",
                (2u64,),
            )
            .await
            .unwrap();
        let described: Vec<(Wire, u16)> = documents[0]
            .columns_ref()
            .iter()
            .map(|c| (c.column_type(), c.character_set()))
            .collect();
        assert_eq!(
            described,
            [(Wire::MYSQL_TYPE_JSON, 63), (Wire::MYSQL_TYPE_BLOB, 46)]
        );
        let values = documents[0].clone().unwrap();
        assert_eq!(
            values[0],
            mysql_async::Value::Bytes(b"{\"id\": 2, \"name\": \"item 2\"}".to_vec())
        );
        assert_eq!(values[1], mysql_async::Value::Bytes(b"item 2".to_vec()));
        // A row comparison with placeholders (keyset pagination): each
        // `?` is one parameter, however the comparison expands.
        let page: Vec<u64> = conn
            .exec(
                "SELECT id FROM items WHERE (id, name) > (?, ?) ORDER BY id LIMIT 2",
                (3u64, "item 3"),
            )
            .await
            .unwrap();
        assert_eq!(page, [4, 5]);
        let missing = conn.query_drop("SELECT * FROM nowhere").await.unwrap_err();
        assert_eq!(server_code(&missing), (1146, "42S02".into()));
        let syntax = conn.query_drop("SELEKT 1").await.unwrap_err();
        assert_eq!(server_code(&syntax), (1064, "42000".into()));
        let null = conn
            .exec_drop(
                "INSERT INTO items (id, name) VALUES (?, ?)",
                (50u64, None::<String>),
            )
            .await
            .unwrap_err();
        assert_eq!(server_code(&null).0, 1048);
        // The connection is fine after errors.
        let one: Option<i64> = conn.query_first("SELECT 1").await.unwrap();
        assert_eq!(one, Some(1));
        // LIMIT ? in UPDATE and DELETE, bound at each execution.
        conn.exec_drop("UPDATE items SET qty = 100 WHERE id > ? LIMIT ?", (15u64, 2u64))
            .await
            .unwrap();
        assert_eq!(conn.affected_rows(), 2);
        let updated: Option<i64> = conn
            .query_first("SELECT COUNT(*) FROM items WHERE qty = 100")
            .await
            .unwrap();
        assert_eq!(updated, Some(2));
        let before: Option<i64> = conn.query_first("SELECT COUNT(*) FROM items").await.unwrap();
        conn.exec_drop("DELETE FROM items WHERE id > ? ORDER BY id DESC LIMIT ?", (15u64, 3u64))
            .await
            .unwrap();
        assert_eq!(conn.affected_rows(), 3);
        let after: Option<i64> = conn.query_first("SELECT COUNT(*) FROM items").await.unwrap();
        assert_eq!(after, before.map(|n| n - 3));
        let highest: Option<u64> = conn.query_first("SELECT MAX(id) FROM items").await.unwrap();
        assert!(highest.is_some_and(|id| id <= 18), "the highest ids went first: {highest:?}");
        let refused = conn
            .exec_drop("DELETE FROM items WHERE id > ? LIMIT ?", (15u64, -1i64))
            .await
            .unwrap_err();
        assert_eq!(server_code(&refused).0, 1210);
        conn.disconnect().await.unwrap();
    });
    let single = SqlNode::start_with_threads(&cluster, 1);
    a_lock_wait_does_not_hold_the_only_thread(&single);
    a_client_that_does_not_read_holds_up_nobody(&single);
}

/// A statement waiting for a row lock suspends its task, not its thread.
/// With one thread serving every connection, the transaction holding the
/// lock must still get to commit (and SHOW PROCESSLIST be answered
/// meanwhile), and the waiting statement then goes on instead of timing
/// out (1205).
fn a_lock_wait_does_not_hold_the_only_thread(single: &SqlNode) {
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    };
    // The holder's connection lives in one runtime throughout.
    let holder_runtime = runtime();
    let mut holder = holder_runtime.block_on(async {
        let mut holder = connect(single).await;
        holder
            .query_drop("CREATE TABLE app.locks (id INT PRIMARY KEY, v INT)")
            .await
            .unwrap();
        holder
            .query_drop("INSERT INTO app.locks VALUES (1, 0)")
            .await
            .unwrap();
        holder.query_drop("BEGIN").await.unwrap();
        holder
            .query_drop("UPDATE app.locks SET v = 1 WHERE id = 1")
            .await
            .unwrap();
        holder
    });
    let port = single.port;
    let waiter = std::thread::spawn(move || {
        runtime().block_on(async {
            let opts: Opts = OptsBuilder::default()
                .ip_or_hostname("127.0.0.1")
                .tcp_port(port)
                .user(Some("root"))
                .into();
            let mut waiter = Conn::new(opts).await.expect("the driver connects");
            let updated = waiter
                .query_drop("UPDATE app.locks SET v = v + 10 WHERE id = 1")
                .await;
            let value: Option<i32> = waiter
                .query_first("SELECT v FROM app.locks WHERE id = 1")
                .await
                .unwrap();
            (updated, value)
        })
    });
    holder_runtime.block_on(async {
        // The update is running: its task waits on the lock. The one
        // thread answers this meanwhile.
        let started = std::time::Instant::now();
        loop {
            let processes: Vec<Row> = holder.query("SHOW PROCESSLIST").await.unwrap();
            let waiting = processes.iter().any(|process| {
                let command: Option<String> = process.get("Command");
                let info: Option<Option<String>> = process.get("Info");
                command.as_deref() == Some("Query")
                    && info.flatten().is_some_and(|info| info.contains("v + 10"))
            });
            if waiting {
                break;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "the update never showed as running: {processes:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // Time for it to reach the data node's lock queue (were it not
        // there yet, the commit would simply come first).
        std::thread::sleep(std::time::Duration::from_millis(100));
        holder
            .query_drop("COMMIT")
            .await
            .expect("the lock holder commits while a statement waits for its lock");
    });
    let (updated, value) = waiter.join().expect("waiter thread");
    updated.expect("the waiting update goes on once the lock is free");
    assert_eq!(value, Some(11), "both updates applied, in order");
}

/// A client that asks for a large result and does not read it: its
/// task waits for the socket to drain, suspended, and the one thread
/// serving every connection answers another client meanwhile. A write
/// that blocked the thread would hold the other client's answer until
/// the write timed out and closed the slow connection, whose rows then
/// could not all be read.
fn a_client_that_does_not_read_holds_up_nobody(single: &SqlNode) {
    const ROWS: usize = 1000;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut writer = runtime.block_on(async {
        let mut writer = connect(single).await;
        writer
            .query_drop("CREATE TABLE app.wide (id INT PRIMARY KEY, body TEXT NOT NULL)")
            .await
            .unwrap();
        // 8 MB of rows: more than the server's socket send buffer (4 MB
        // at most here) and the slow client's small receive buffer hold.
        let body = "x".repeat(8000);
        for batch in 0..ROWS / 100 {
            let rows: Vec<String> = (0..100)
                .map(|row| format!("({}, '{body}')", batch * 100 + row))
                .collect();
            writer
                .query_drop(format!("INSERT INTO app.wide VALUES {}", rows.join(", ")))
                .await
                .unwrap();
        }
        writer
    });
    // The slow client, on a raw socket with a small receive buffer: logs
    // in, asks for every row, and reads nothing.
    let mut slow = std::net::TcpStream::connect(("127.0.0.1", single.port)).unwrap();
    set_receive_buffer(&slow, 4096);
    let (_, greeting) = mysql_read_packet(&mut slow);
    assert_eq!(greeting[0], 10, "protocol 10");
    let capabilities: u32 = 0x200 | 0x8000 | 0x80000;
    let mut response = capabilities.to_le_bytes().to_vec();
    response.extend_from_slice(&(1u32 << 24).to_le_bytes());
    response.push(45);
    response.extend_from_slice(&[0; 23]);
    response.extend_from_slice(b"root\0");
    response.push(0);
    response.extend_from_slice(b"mysql_native_password\0");
    mysql_write_packet(&mut slow, 1, &response);
    let (_, ok) = mysql_read_packet(&mut slow);
    assert_eq!(ok[0], 0x00, "logged in: {ok:?}");
    mysql_write_packet(&mut slow, 0, b"\x03SELECT id, body FROM app.wide");
    // Another client is answered while those rows wait.
    runtime.block_on(async {
        let answer: Option<i64> = writer
            .query_first("SELECT COUNT(*) FROM app.wide WHERE id < 10")
            .await
            .expect("answered while another client's result waits to be read");
        assert_eq!(answer, Some(10));
    });
    // Then the slow client reads, with room to read fast: the column
    // count, two columns, EOF, the rows, EOF; every row there.
    set_receive_buffer(&slow, 4 << 20);
    let mut eofs = 0;
    let mut rows = 0;
    let mut first = true;
    while eofs < 2 {
        let (_, packet) = mysql_read_packet(&mut slow);
        assert_ne!(packet[0], 0xFF, "an error instead of rows: {packet:?}");
        if first {
            first = false;
        } else if packet[0] == 0xFE && packet.len() < 9 {
            eofs += 1;
        } else if eofs == 1 {
            rows += 1;
        }
    }
    assert_eq!(rows, ROWS, "every row reached the slow client");
    runtime.block_on(async {
        writer.query_drop("DROP TABLE app.wide").await.unwrap();
    });
}

/// Shrinks `stream`'s receive buffer (and so the window its peer may
/// fill).
fn set_receive_buffer(stream: &std::net::TcpStream, bytes: libc::c_int) {
    use std::os::fd::AsRawFd;
    // SAFETY: a live socket and a c_int option value of its size.
    let done = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&bytes as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(done, 0, "setsockopt SO_RCVBUF");
}
