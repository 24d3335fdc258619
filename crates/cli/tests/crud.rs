//! Key-operation and schema semantics through the client against a real
//! data node (one node, two ldm threads): insert, read, update, write on
//! both of its paths, delete; the errors each refuses with and their class;
//! multi-operation transactions seeing their own writes; rollback; NULLs;
//! every column type round-tripping; a composite primary key; values the
//! client refuses and values only the data node can refuse (a stale or
//! forged definition); dropping and recreating tables under a client whose
//! cached definition went stale.
//!
//! One test, one cluster: the parts run in sequence on the same node, which
//! also shows that each part leaves the node able to serve the next.

mod common;

use client::{
    ClientError, Cluster, ColumnType, Commit, ErrorClass, ErrorCode, LockMode, Row, Table,
    TableDef, TransactionState, Value,
};
use common::{
    assert_no_row_in_any_lock_mode, code_of, column, create_table, definition, kv_definition,
    read_row, ClusterOptions, TestCluster,
};
use std::sync::Arc;

fn kv_values(cluster: &Cluster, table: &Arc<Table>, k: u64) -> (Value, Value) {
    let row = read_row(cluster, table, &[Value::UInt(k)])
        .unwrap_or_else(|error| panic!("read of kv {k}: {error}"));
    (
        row.get("v").cloned().expect("v"),
        row.get("n").cloned().expect("n"),
    )
}

fn insert_kv(cluster: &Cluster, table: &Arc<Table>, k: u64, v: &str, n: Value) {
    let mut transaction = cluster.transaction();
    transaction
        .insert(
            table,
            &[("k", Value::UInt(k)), ("v", Value::from(v)), ("n", n)],
        )
        .expect("valid insert");
    transaction
        .execute(Commit::Yes)
        .unwrap_or_else(|error| panic!("insert of kv {k}: {error}"));
}

#[test]
fn crud_transactions_types_and_schema_changes() {
    let cluster_processes = TestCluster::start(ClusterOptions {
        name: "crud",
        ..Default::default()
    });
    let cluster = cluster_processes.connect();
    let kv = create_table(&cluster, &kv_definition());

    single_operations(&cluster, &kv);
    multi_operation_transactions(&cluster, &kv);
    rollback_leaves_nothing(&cluster, &kv);
    large_transactions(&cluster, &kv);
    nulls_and_column_types(&cluster);
    composite_primary_key(&cluster);
    values_refused(&cluster, &kv);
    schema_changes(&cluster_processes, &cluster);
}

fn single_operations(cluster: &Cluster, kv: &Arc<Table>) {
    insert_kv(cluster, kv, 1, "one", Value::Int(1));
    assert_eq!(
        kv_values(cluster, kv, 1),
        (Value::from("one"), Value::Int(1))
    );

    // A duplicate insert is a constraint error naming the failing operation.
    let mut transaction = cluster.transaction();
    let op = transaction
        .insert(kv, &[("k", Value::UInt(1)), ("v", Value::from("again"))])
        .expect("valid insert");
    let error = transaction.execute(Commit::Yes).expect_err("duplicate key");
    assert_eq!(error.code(), Some(ErrorCode::DuplicateKey), "{error}");
    assert_eq!(error.class(), Some(ErrorClass::Constraint));
    assert!(!error.is_temporary());
    assert_eq!(error.failed_op(), Some(op));
    assert_eq!(transaction.state(), TransactionState::Aborted);
    assert_eq!(
        code_of(transaction.execute(Commit::Yes)),
        ErrorCode::TransactionAborted,
        "an aborted transaction cannot be used again"
    );
    assert_eq!(
        kv_values(cluster, kv, 1),
        (Value::from("one"), Value::Int(1))
    );

    // Update changes only the columns it names.
    let mut transaction = cluster.transaction();
    transaction
        .update(kv, &[Value::UInt(1)], &[("v", Value::from("uno"))])
        .expect("valid update");
    transaction.execute(Commit::Yes).expect("update");
    assert_eq!(
        kv_values(cluster, kv, 1),
        (Value::from("uno"), Value::Int(1))
    );

    // Write of an absent key inserts; of a present key overwrites.
    let mut transaction = cluster.transaction();
    transaction
        .write(
            kv,
            &[
                ("k", Value::UInt(2)),
                ("v", Value::from("two")),
                ("n", Value::Null),
            ],
        )
        .expect("valid write");
    transaction.execute(Commit::Yes).expect("write inserts");
    assert_eq!(kv_values(cluster, kv, 2), (Value::from("two"), Value::Null));
    let mut transaction = cluster.transaction();
    transaction
        .write(
            kv,
            &[
                ("k", Value::UInt(2)),
                ("v", Value::from("dos")),
                ("n", Value::Int(-22)),
            ],
        )
        .expect("valid write");
    transaction.execute(Commit::Yes).expect("write overwrites");
    assert_eq!(
        kv_values(cluster, kv, 2),
        (Value::from("dos"), Value::Int(-22))
    );

    let mut transaction = cluster.transaction();
    transaction
        .delete(kv, &[Value::UInt(2)])
        .expect("valid delete");
    transaction.execute(Commit::Yes).expect("delete");
    assert_eq!(
        code_of(read_row(cluster, kv, &[Value::UInt(2)])),
        ErrorCode::NoSuchRow
    );

    // Missing rows: update, delete and read all say NoSuchRow (constraint).
    let mut transaction = cluster.transaction();
    transaction
        .update(kv, &[Value::UInt(2)], &[("v", Value::from("x"))])
        .expect("valid update");
    let error = transaction.execute(Commit::Yes).expect_err("no row");
    assert_eq!(error.code(), Some(ErrorCode::NoSuchRow), "{error}");
    assert_eq!(error.class(), Some(ErrorClass::Constraint));
    let mut transaction = cluster.transaction();
    transaction
        .delete(kv, &[Value::UInt(2)])
        .expect("valid delete");
    assert_eq!(
        code_of(transaction.execute(Commit::Yes)),
        ErrorCode::NoSuchRow
    );
    assert_no_row_in_any_lock_mode(cluster, kv, &[Value::UInt(999)], "key 999");

    // A failing operation aborts the whole batch: the insert before it is gone.
    let mut transaction = cluster.transaction();
    transaction
        .insert(kv, &[("k", Value::UInt(3)), ("v", Value::from("three"))])
        .expect("valid insert");
    let duplicate = transaction
        .insert(kv, &[("k", Value::UInt(1)), ("v", Value::from("dup"))])
        .expect("valid insert");
    let error = transaction.execute(Commit::Yes).expect_err("duplicate");
    assert_eq!(error.code(), Some(ErrorCode::DuplicateKey), "{error}");
    assert_eq!(error.failed_op(), Some(duplicate));
    assert_eq!(
        code_of(read_row(cluster, kv, &[Value::UInt(3)])),
        ErrorCode::NoSuchRow,
        "the aborted transaction's insert must not survive"
    );
}

fn multi_operation_transactions(cluster: &Cluster, kv: &Arc<Table>) {
    let mut transaction = cluster.transaction();
    // One batch: insert, update and read the same new row.
    transaction
        .insert(kv, &[("k", Value::UInt(10)), ("v", Value::from("a"))])
        .expect("valid insert");
    transaction
        .update(kv, &[Value::UInt(10)], &[("v", Value::from("b"))])
        .expect("valid update");
    let first_read = transaction
        .read(kv, &[Value::UInt(10)], LockMode::Exclusive)
        .expect("valid read");
    let outcome = transaction.execute(Commit::No).expect("first batch");
    assert!(!outcome.committed);
    assert_eq!(
        transaction.get(first_read).and_then(|row| row.get("v")),
        Some(&Value::from("b")),
        "a transaction sees its own insert and update"
    );
    assert_eq!(
        transaction.get(first_read).and_then(|row| row.get("n")),
        Some(&Value::Null)
    );

    // Others do not see the uncommitted insert.
    assert_eq!(
        code_of(read_row(cluster, kv, &[Value::UInt(10)])),
        ErrorCode::NoSuchRow,
        "an uncommitted insert is invisible to other transactions"
    );

    // Second batch: delete and insert again, read, change another row.
    transaction
        .delete(kv, &[Value::UInt(10)])
        .expect("valid delete");
    transaction
        .insert(
            kv,
            &[
                ("k", Value::UInt(10)),
                ("v", Value::from("c")),
                ("n", Value::Int(10)),
            ],
        )
        .expect("valid insert");
    let second_read = transaction
        .read(kv, &[Value::UInt(10)], LockMode::CommittedRead)
        .expect("valid read");
    transaction
        .update(kv, &[Value::UInt(1)], &[("n", Value::Int(100))])
        .expect("valid update");
    let outcome = transaction.execute(Commit::Yes).expect("second batch");
    assert!(outcome.committed);
    assert!(outcome.gci.is_some(), "a committed write has a GCI");
    assert_eq!(transaction.state(), TransactionState::Committed);
    assert_eq!(
        transaction.get(second_read).and_then(|row| row.get("v")),
        Some(&Value::from("c"))
    );
    assert_eq!(
        transaction.get(first_read).and_then(|row| row.get("v")),
        Some(&Value::from("b")),
        "rows of earlier batches stay readable"
    );
    assert_eq!(
        kv_values(cluster, kv, 10),
        (Value::from("c"), Value::Int(10))
    );
    assert_eq!(
        kv_values(cluster, kv, 1),
        (Value::from("uno"), Value::Int(100))
    );
    assert!(
        transaction.execute(Commit::Yes).is_err(),
        "a committed transaction cannot execute again"
    );

    // A read-only transaction commits without a GCI.
    let mut transaction = cluster.transaction();
    transaction
        .read(kv, &[Value::UInt(1)], LockMode::Shared)
        .expect("valid read");
    let outcome = transaction.execute(Commit::Yes).expect("read commits");
    assert!(outcome.committed);
}

fn rollback_leaves_nothing(cluster: &Cluster, kv: &Arc<Table>) {
    let mut transaction = cluster.transaction();
    transaction
        .insert(kv, &[("k", Value::UInt(20)), ("v", Value::from("new"))])
        .expect("valid insert");
    transaction
        .update(kv, &[Value::UInt(1)], &[("v", Value::from("changed"))])
        .expect("valid update");
    transaction
        .delete(kv, &[Value::UInt(10)])
        .expect("valid delete");
    transaction.execute(Commit::No).expect("batch");
    transaction.rollback().expect("rollback");
    assert_eq!(transaction.state(), TransactionState::Aborted);
    assert_eq!(
        code_of(read_row(cluster, kv, &[Value::UInt(20)])),
        ErrorCode::NoSuchRow
    );
    assert_eq!(
        kv_values(cluster, kv, 1),
        (Value::from("uno"), Value::Int(100))
    );
    assert_eq!(
        kv_values(cluster, kv, 10),
        (Value::from("c"), Value::Int(10))
    );

    // Operations queued but never executed are dropped by rollback.
    let mut transaction = cluster.transaction();
    transaction
        .insert(kv, &[("k", Value::UInt(21)), ("v", Value::from("never"))])
        .expect("valid insert");
    transaction
        .rollback()
        .expect("rollback of an unsent transaction");
    assert_eq!(
        code_of(read_row(cluster, kv, &[Value::UInt(21)])),
        ErrorCode::NoSuchRow
    );

    // The rolled-back rows are not locked: they can be written at once.
    insert_kv(cluster, kv, 20, "after", Value::Null);
    let mut transaction = cluster.transaction();
    transaction
        .delete(kv, &[Value::UInt(20)])
        .expect("valid delete");
    transaction.execute(Commit::Yes).expect("delete");
}

fn large_transactions(cluster: &Cluster, kv: &Arc<Table>) {
    // Many operations in one batch (more than fit in one frame's worth of
    // small signals), each key's row read back in one batch too.
    const COUNT: u32 = 2000;
    let keys = 100_000..100_000 + COUNT;
    let mut transaction = cluster.transaction();
    for k in keys.clone() {
        transaction
            .insert(
                kv,
                &[
                    ("k", Value::UInt(k.into())),
                    ("v", Value::from(format!("bulk {k}"))),
                    ("n", Value::Int(k.into())),
                ],
            )
            .expect("valid insert");
    }
    transaction
        .execute(Commit::Yes)
        .expect("2000 inserts in one batch");
    let mut transaction = cluster.transaction();
    let ops: Vec<_> = keys
        .clone()
        .map(|k| {
            transaction
                .read(kv, &[Value::UInt(k.into())], LockMode::Shared)
                .expect("valid read")
        })
        .collect();
    transaction
        .execute(Commit::Yes)
        .expect("2000 reads in one batch");
    for (op, k) in ops.into_iter().zip(keys.clone()) {
        let row = transaction.get(op).expect("row");
        assert_eq!(row.get("v"), Some(&Value::from(format!("bulk {k}"))));
        assert_eq!(row.get("n"), Some(&Value::Int(k.into())));
    }

    // Past max_operations_per_transaction (10000 by default): refused,
    // permanent, and nothing of it stays.
    let mut transaction = cluster.transaction();
    for k in 200_000..210_001u32 {
        transaction
            .insert(kv, &[("k", Value::UInt(k.into())), ("v", Value::from("x"))])
            .expect("valid insert");
    }
    let error = transaction
        .execute(Commit::Yes)
        .expect_err("10001 operations in one transaction");
    assert_eq!(error.code(), Some(ErrorCode::TooManyOperations), "{error}");
    assert!(!error.is_temporary());
    for k in [200_000, 205_000, 210_000] {
        assert_eq!(
            code_of(read_row(cluster, kv, &[Value::UInt(k)])),
            ErrorCode::NoSuchRow,
            "key {k} of the refused transaction"
        );
    }

    let mut transaction = cluster.transaction();
    for k in keys {
        transaction
            .delete(kv, &[Value::UInt(k.into())])
            .expect("valid delete");
    }
    transaction
        .execute(Commit::Yes)
        .expect("2000 deletes in one batch");
    assert_eq!(
        code_of(read_row(cluster, kv, &[Value::UInt(100_000)])),
        ErrorCode::NoSuchRow
    );
}

/// Compares values, doubles by bit pattern (so -0.0 and 0.0 differ).
fn assert_same_values(actual: &Row, expected: &[(&str, Value)], what: &str) {
    for (name, want) in expected {
        let got = actual
            .get(*name)
            .unwrap_or_else(|| panic!("{what}: no column {name}"));
        let same = match (got, want) {
            (Value::Double(a), Value::Double(b)) => a.to_bits() == b.to_bits(),
            (a, b) => a == b,
        };
        assert!(same, "{what}: column {name}: got {got:?}, want {want:?}");
    }
}

fn nulls_and_column_types(cluster: &Cluster) {
    let created = cluster
        .create_table(&definition(
            "types",
            vec![
                column("id", ColumnType::BigInt { unsigned: true }, false),
                column("ch", ColumnType::Char(10), true),
                column("vc", ColumnType::VarChar(100), true),
                column("vb", ColumnType::VarBinary(300), true),
                column("d", ColumnType::Double, true),
                column("bu", ColumnType::BigInt { unsigned: true }, true),
                column("bi", ColumnType::BigInt { unsigned: false }, true),
                column("i", ColumnType::Int { unsigned: false }, true),
                column("iu", ColumnType::Int { unsigned: true }, true),
            ],
            vec![0],
        ))
        .expect("create types");
    assert!(created.id > 0 || created.version > 0 || created.partitions > 0);
    let types = cluster.table("types").expect("types exists");

    let binary: Vec<u8> = (0..300u32).map(|i| (i * 7 % 256) as u8).collect();
    let rows: Vec<Vec<(&str, Value)>> = vec![
        vec![
            ("id", Value::UInt(u64::MAX)),
            ("ch", Value::from("abcdefghij")),
            ("vc", Value::from("héllo wörld ✓ – trailing  ")),
            ("vb", Value::from(binary.clone())),
            ("d", Value::Double(-1.5e300)),
            ("bu", Value::UInt(u64::MAX)),
            ("bi", Value::Int(i64::MIN)),
            ("i", Value::Int(i32::MIN.into())),
            ("iu", Value::UInt(u32::MAX.into())),
        ],
        vec![
            ("id", Value::UInt(0)),
            ("ch", Value::Null),
            ("vc", Value::Null),
            ("vb", Value::Null),
            ("d", Value::Null),
            ("bu", Value::Null),
            ("bi", Value::Null),
            ("i", Value::Null),
            ("iu", Value::Null),
        ],
        vec![
            ("id", Value::UInt(1)),
            ("ch", Value::from("")),
            ("vc", Value::from("")),
            ("vb", Value::from(Vec::new())),
            ("d", Value::Double(-0.0)),
            ("bu", Value::UInt(0)),
            ("bi", Value::Int(i64::MAX)),
            ("i", Value::Int(i32::MAX.into())),
            ("iu", Value::UInt(0)),
        ],
        vec![
            ("id", Value::UInt(2)),
            ("ch", Value::from("x")),
            ("vc", Value::from(" ")),
            ("vb", Value::from(&b"\0\0 \xff  "[..])),
            ("d", Value::Double(f64::INFINITY)),
            ("bu", Value::UInt(1 << 63)),
            ("bi", Value::Int(-1)),
            ("i", Value::Int(-1)),
            ("iu", Value::UInt(1)),
        ],
        vec![
            ("id", Value::UInt(3)),
            ("d", Value::Double(f64::MIN_POSITIVE / 4.0)),
        ],
    ];
    let mut transaction = cluster.transaction();
    for row in &rows {
        transaction.insert(&types, row).expect("valid insert");
    }
    transaction.execute(Commit::Yes).expect("insert typed rows");
    for row in &rows {
        let key = row[0].1.clone();
        let got = read_row(cluster, &types, std::slice::from_ref(&key))
            .unwrap_or_else(|error| panic!("read types {key}: {error}"));
        assert_same_values(&got, row, &format!("types row {key}"));
    }
    // Columns left out of an insert are NULL, not empty.
    let sparse = read_row(cluster, &types, &[Value::UInt(3)]).expect("read");
    for name in ["ch", "vc", "vb", "bu", "bi", "i", "iu"] {
        assert_eq!(sparse.get(name), Some(&Value::Null), "column {name}");
    }

    // CHAR drops trailing spaces; VARCHAR and VARBINARY keep them.
    let mut transaction = cluster.transaction();
    transaction
        .update(
            &types,
            &[Value::UInt(2)],
            &[
                ("ch", Value::from("ab   ")),
                ("vc", Value::from("pad  ")),
                ("vb", Value::from("pad  ")),
            ],
        )
        .expect("valid update");
    transaction.execute(Commit::Yes).expect("update");
    let padded = read_row(cluster, &types, &[Value::UInt(2)]).expect("read");
    assert_eq!(padded.get("ch"), Some(&Value::from("ab")), "CHAR");
    assert_eq!(padded.get("vc"), Some(&Value::from("pad  ")), "VARCHAR");
    assert_eq!(padded.get("vb"), Some(&Value::from("pad  ")), "VARBINARY");

    // NULL in, value in, NULL again.
    for value in [Value::Double(2.5), Value::Null] {
        let mut transaction = cluster.transaction();
        transaction
            .update(&types, &[Value::UInt(0)], &[("d", value.clone())])
            .expect("valid update");
        transaction.execute(Commit::Yes).expect("update");
        let got = read_row(cluster, &types, &[Value::UInt(0)]).expect("read");
        assert_eq!(got.get("d"), Some(&value));
        assert_eq!(got.get("vc"), Some(&Value::Null), "other columns untouched");
    }
}

fn composite_primary_key(cluster: &Cluster) {
    // Key order (b, a) differs from column order (a, b).
    let pairs = create_table(
        cluster,
        &definition(
            "pairs",
            vec![
                column("a", ColumnType::VarChar(20), false),
                column("b", ColumnType::Int { unsigned: false }, false),
                column("c", ColumnType::Double, true),
            ],
            vec![1, 0],
        ),
    );
    let entries = [(1, "x", 1.0), (1, "y", 2.0), (2, "x", 3.0), (-7, "", 4.0)];
    let mut transaction = cluster.transaction();
    for (b, a, c) in entries {
        transaction
            .insert(
                &pairs,
                &[
                    ("a", Value::from(a)),
                    ("b", Value::Int(b)),
                    ("c", Value::Double(c)),
                ],
            )
            .expect("valid insert");
    }
    transaction.execute(Commit::Yes).expect("insert pairs");
    for (b, a, c) in entries {
        let row = read_row(cluster, &pairs, &[Value::Int(b), Value::from(a)])
            .unwrap_or_else(|error| panic!("read ({b}, {a:?}): {error}"));
        assert_eq!(row.get("a"), Some(&Value::from(a)));
        assert_eq!(row.get("b"), Some(&Value::Int(b)));
        assert_eq!(row.get("c"), Some(&Value::Double(c)));
    }
    assert_eq!(
        code_of(read_row(
            cluster,
            &pairs,
            &[Value::Int(2), Value::from("y")]
        )),
        ErrorCode::NoSuchRow
    );
    // VARCHAR keys compare without trailing spaces (PAD SPACE).
    let padded = read_row(cluster, &pairs, &[Value::Int(1), Value::from("x   ")])
        .expect("a key with trailing spaces finds the row");
    assert_eq!(padded.get("c"), Some(&Value::Double(1.0)));
    let mut transaction = cluster.transaction();
    transaction
        .insert(&pairs, &[("a", Value::from("x ")), ("b", Value::Int(1))])
        .expect("valid insert");
    assert_eq!(
        code_of(transaction.execute(Commit::Yes)),
        ErrorCode::DuplicateKey
    );
    // Too few key values is refused before sending.
    let mut transaction = cluster.transaction();
    let error = transaction
        .read(&pairs, &[Value::Int(1)], LockMode::CommittedRead)
        .expect_err("one value for a two-column key");
    assert!(!error.is_temporary(), "{error}");

    let mut transaction = cluster.transaction();
    transaction
        .delete(&pairs, &[Value::Int(1), Value::from("x")])
        .expect("valid delete");
    transaction.execute(Commit::Yes).expect("delete");
    assert_eq!(
        code_of(read_row(
            cluster,
            &pairs,
            &[Value::Int(1), Value::from("x")]
        )),
        ErrorCode::NoSuchRow
    );
    for (b, a) in [(1, "y"), (2, "x"), (-7, "")] {
        read_row(cluster, &pairs, &[Value::Int(b), Value::from(a)])
            .unwrap_or_else(|error| panic!("({b}, {a:?}) must survive: {error}"));
    }
}

/// A copy of `table`'s definition (same id and version, so the data node
/// accepts it as current) with `change` applied: what a buggy or hostile
/// client could send, to show the data node checks values itself.
fn forged(table: &Arc<Table>, change: impl FnOnce(&mut TableDef)) -> Arc<Table> {
    let mut def = table.def().clone();
    change(&mut def);
    Arc::new(Table::new(def))
}

/// What a forged definition lets through the client: a description, the
/// table, the row to insert and the code the data node must refuse it with.
type NodeCase = (
    &'static str,
    Arc<Table>,
    Vec<(&'static str, Value)>,
    ErrorCode,
);

fn values_refused(cluster: &Cluster, kv: &Arc<Table>) {
    let longest = "x".repeat(32);
    insert_kv(cluster, kv, 30, &longest, Value::Null);
    assert_eq!(kv_values(cluster, kv, 30).0, Value::from(longest.as_str()));

    // Too long: refused by the client, permanent, nothing sent.
    let mut transaction = cluster.transaction();
    let error = transaction
        .insert(
            kv,
            &[("k", Value::UInt(31)), ("v", Value::from("y".repeat(33)))],
        )
        .expect_err("33 bytes in VARCHAR(32)");
    assert_eq!(error.code(), Some(ErrorCode::ValueTooLong), "{error}");
    assert_eq!(error.class(), Some(ErrorClass::Permanent));
    assert!(!error.is_temporary());
    let error = transaction
        .update(
            kv,
            &[Value::UInt(30)],
            &[("v", Value::from("y".repeat(40)))],
        )
        .expect_err("40 bytes in VARCHAR(32)");
    assert_eq!(error.code(), Some(ErrorCode::ValueTooLong), "{error}");
    assert_eq!(
        transaction.pending_operations(),
        0,
        "refused operations are not queued"
    );
    transaction.execute(Commit::Yes).expect("empty commit");
    let types = cluster.table("types").expect("types");
    let mut transaction = cluster.transaction();
    for (name, value) in [
        ("ch", Value::from("12345678901")),
        ("vb", Value::from(vec![0u8; 301])),
    ] {
        let error = transaction
            .update(&types, &[Value::UInt(1)], &[(name, value)])
            .expect_err("too long");
        assert_eq!(
            error.code(),
            Some(ErrorCode::ValueTooLong),
            "{name}: {error}"
        );
    }

    // Other values the client refuses, with their codes.
    let mut transaction = cluster.transaction();
    let cases: Vec<(&str, Result<client::OpId, ClientError>, ErrorCode)> = vec![
        (
            "NULL in NOT NULL",
            transaction.update(kv, &[Value::UInt(30)], &[("v", Value::Null)]),
            ErrorCode::NullNotAllowed,
        ),
        (
            "NOT NULL column left out of an insert",
            transaction.insert(kv, &[("k", Value::UInt(32))]),
            ErrorCode::NullNotAllowed,
        ),
        (
            "out of range for INT UNSIGNED",
            transaction.insert(kv, &[("k", Value::UInt(1 << 40)), ("v", Value::from("z"))]),
            ErrorCode::BadValue,
        ),
        (
            "unknown column",
            transaction.update(kv, &[Value::UInt(30)], &[("nope", Value::Int(1))]),
            ErrorCode::UnknownColumn,
        ),
    ];
    for (what, result, code) in cases {
        let error = result.expect_err(what);
        assert_eq!(error.code(), Some(code), "{what}: {error}");
        assert!(!error.is_temporary(), "{what}");
    }
    drop(transaction);

    // The data node checks for itself: a definition claiming a longer
    // VARCHAR, a nullable key-less column, or a wider INT gets past the
    // client but not past the node, and the transaction is aborted.
    let wider = forged(kv, |def| {
        def.columns[1].column_type = ColumnType::VarChar(64)
    });
    let nullable = forged(kv, |def| def.columns[1].nullable = true);
    let bigger_int = forged(kv, |def| {
        def.columns[2].column_type = ColumnType::BigInt { unsigned: true };
        def.columns[0].column_type = ColumnType::BigInt { unsigned: true };
    });
    let node_cases: Vec<NodeCase> = vec![
        (
            "value too long",
            wider,
            vec![("k", Value::UInt(33)), ("v", Value::from("w".repeat(40)))],
            ErrorCode::ValueTooLong,
        ),
        (
            "NULL in NOT NULL",
            nullable,
            vec![("k", Value::UInt(33)), ("v", Value::Null)],
            ErrorCode::NullNotAllowed,
        ),
        (
            "8-byte key value for INT",
            bigger_int,
            vec![("k", Value::UInt(33)), ("v", Value::from("w"))],
            ErrorCode::BadValue,
        ),
    ];
    for (what, table, row, code) in node_cases {
        let mut transaction = cluster.transaction();
        transaction
            .update(kv, &[Value::UInt(30)], &[("n", Value::Int(5))])
            .expect("valid update");
        transaction
            .insert(&table, &row)
            .expect("the client lets it pass");
        let error = transaction
            .execute(Commit::Yes)
            .expect_err("the data node refuses it");
        assert_eq!(error.code(), Some(code), "{what}: {error}");
        assert_eq!(error.class(), Some(ErrorClass::Permanent), "{what}");
        assert_eq!(
            code_of(read_row(cluster, kv, &[Value::UInt(33)])),
            ErrorCode::NoSuchRow,
            "{what}: nothing inserted"
        );
        assert_eq!(
            kv_values(cluster, kv, 30).1,
            Value::Null,
            "{what}: the update in the same transaction is rolled back"
        );
    }

    // A table id the node does not have.
    let unknown = forged(kv, |def| {
        def.id = 4000;
        def.name = "ghost".into();
    });
    let mut transaction = cluster.transaction();
    transaction
        .read(&unknown, &[Value::UInt(1)], LockMode::CommittedRead)
        .expect("valid read");
    let error = transaction
        .execute(Commit::Yes)
        .expect_err("unknown table id");
    assert_eq!(error.code(), Some(ErrorCode::UnknownTable), "{error}");
    assert_eq!(error.class(), Some(ErrorClass::Permanent));
}

fn schema_changes(processes: &TestCluster, cluster: &Cluster) {
    // Unknown names.
    let error = cluster.table("missing").expect_err("no such table");
    assert_eq!(error.code(), Some(ErrorCode::UnknownTable), "{error}");
    assert_eq!(error.class(), Some(ErrorClass::Permanent));
    assert_eq!(
        code_of(cluster.drop_table("missing")),
        ErrorCode::UnknownTable
    );
    assert_eq!(
        code_of(cluster.create_table(&kv_definition())),
        ErrorCode::TableExists
    );

    // A second client caches kv, which the first drops.
    let other = processes.connect();
    let stale_kv = other.table("kv").expect("kv");
    read_row(&other, &stale_kv, &[Value::UInt(1)]).expect("kv row 1 readable");
    cluster.drop_table("kv").expect("drop kv");
    let error = read_row(&other, &stale_kv, &[Value::UInt(1)]).expect_err("kv is gone");
    assert_eq!(error.code(), Some(ErrorCode::UnknownTable), "{error}");
    assert_eq!(
        code_of(other.table("kv")),
        ErrorCode::UnknownTable,
        "the stale definition is no longer cached"
    );
    assert_eq!(code_of(cluster.table("kv")), ErrorCode::UnknownTable);
    assert_eq!(code_of(cluster.drop_table("kv")), ErrorCode::UnknownTable);

    // Recreated under the same name: both clients use the new table, empty.
    cluster.create_table(&kv_definition()).expect("recreate kv");
    let new_kv = other.table("kv").expect("the new kv");
    assert_eq!(
        code_of(read_row(&other, &new_kv, &[Value::UInt(1)])),
        ErrorCode::NoSuchRow,
        "a recreated table starts empty"
    );
    insert_kv(&other, &new_kv, 1, "fresh", Value::Null);
    let kv = cluster.table("kv").expect("kv");
    assert_eq!(
        kv_values(cluster, &kv, 1),
        (Value::from("fresh"), Value::Null)
    );

    // Dropped and recreated with other columns while the second client
    // holds the old definition: its next operation is refused as stale
    // (SchemaVersionMismatch when the id is reused, else UnknownTable),
    // and fetching the table again gives the new definition.
    let stale_types = other.table("types").expect("types");
    cluster.drop_table("types").expect("drop types");
    cluster
        .create_table(&definition(
            "types",
            vec![
                column("id", ColumnType::BigInt { unsigned: true }, false),
                column("w", ColumnType::VarChar(8), true),
            ],
            vec![0],
        ))
        .expect("recreate types");
    let error = read_row(&other, &stale_types, &[Value::UInt(1)]).expect_err("stale definition");
    assert!(
        matches!(
            error.code(),
            Some(ErrorCode::SchemaVersionMismatch | ErrorCode::UnknownTable)
        ),
        "{error}"
    );
    if error.code() == Some(ErrorCode::SchemaVersionMismatch) {
        assert!(error.is_temporary(), "a refresh-and-retry error");
    }
    let fresh_types = other.table("types").expect("the new types");
    assert!(
        fresh_types.def().column("w").is_some(),
        "{:?}",
        fresh_types.def()
    );
    assert!(
        fresh_types.def().id != stale_types.def().id
            || fresh_types.def().version != stale_types.def().version
    );
    let mut transaction = other.transaction();
    transaction
        .insert(
            &fresh_types,
            &[("id", Value::UInt(1)), ("w", Value::from("new"))],
        )
        .expect("valid insert");
    transaction
        .execute(Commit::Yes)
        .expect("the new definition works");
    let row = read_row(
        cluster,
        &cluster.table("types").expect("types"),
        &[Value::UInt(1)],
    )
    .expect("read the new row");
    assert_eq!(row.get("w"), Some(&Value::from("new")));
}
