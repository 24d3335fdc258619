//! A stale table: a client whose cached table (and map) went stale when
//! another client dropped and recreated it refreshes and carries on.

use crate::common::{code_of, column, create_table, key, keyed_definition, read_row, TestCluster};
use crate::keyed_row;
use crate::keys::spread_keys;
use client::{
    ClientError, Cluster, ColumnType, Commit, ErrorCode, LockMode, Table, TableDef, Value,
};
use std::sync::Arc;

fn stale_v1() -> TableDef {
    keyed_definition("stale", vec![column("v", ColumnType::VarChar(16), false)])
}

fn stale_v2() -> TableDef {
    let mut def = keyed_definition(
        "stale",
        vec![
            column("w", ColumnType::BigInt { unsigned: false }, true),
            column("v2", ColumnType::VarChar(8), false),
        ],
    );
    // Another partition count: another map.
    def.partitions = 8;
    def
}

fn is_stale(error: &ClientError) -> bool {
    matches!(
        error.code(),
        Some(ErrorCode::SchemaVersionMismatch | ErrorCode::UnknownTable)
    )
}

/// The error of a use of a stale definition.
fn stale_error<T: std::fmt::Debug>(result: Result<T, ClientError>) -> ClientError {
    let error = result.expect_err("a stale definition");
    assert!(is_stale(&error), "{error}");
    error
}

/// Inserts row `k` with `column` = `value` in a transaction of its own;
/// `what` names the commit.
fn insert_committed(
    cluster: &Cluster,
    table: &Arc<Table>,
    (k, column, value): (u32, &str, Value),
    what: &str,
) {
    let mut transaction = cluster.transaction();
    transaction
        .insert(table, &keyed_row(k, column, value))
        .expect("valid insert");
    transaction.execute(Commit::Yes).expect(what);
}

/// Runs `attempt` with `cluster`'s table `name`; on a stale-table error,
/// fetches the table again and runs it once more, which must succeed.
/// Whichever attempt succeeds must have used the `current` definition.
/// Returns the result and whether a refresh was needed.
fn with_refresh<T>(
    cluster: &Cluster,
    name: &str,
    current: &TableDef,
    what: &str,
    mut attempt: impl FnMut(&Arc<Table>) -> Result<T, ClientError>,
) -> (T, bool) {
    let is_current =
        |table: &Table| table.def().id == current.id && table.def().version == current.version;
    let table = cluster
        .table(name)
        .unwrap_or_else(|error| panic!("{what}: table {name}: {error}"));
    match attempt(&table) {
        Ok(value) => {
            assert!(
                is_current(&table),
                "{what}: a transaction with the stale definition {:?} succeeded (current {current:?})",
                table.def()
            );
            (value, false)
        }
        Err(error) if is_stale(&error) => {
            if error.code() == Some(ErrorCode::SchemaVersionMismatch) {
                assert!(error.is_temporary(), "{what}: a refresh-and-retry error");
            }
            let fresh = cluster
                .table(name)
                .unwrap_or_else(|error| panic!("{what}: table {name} again: {error}"));
            assert!(
                fresh.def().id != table.def().id || fresh.def().version != table.def().version,
                "{what}: the refreshed definition is the stale one: {:?}",
                fresh.def()
            );
            assert!(
                is_current(&fresh),
                "{what}: refreshed to {:?}, current {current:?}",
                fresh.def()
            );
            let value = attempt(&fresh)
                .unwrap_or_else(|error| panic!("{what}: after refreshing {name}: {error}"));
            (value, true)
        }
        Err(error) => panic!("{what}: {error}"),
    }
}

/// Client A caches `stale` (definition and map); client B drops and
/// recreates it, first with the same columns, then with other columns
/// and another partition count. A's transactions with the old table are
/// refused as stale (and change nothing, not even their other operations
/// on another table); A fetches the table again and carries on.
pub fn stale_table_is_refreshed(processes: &TestCluster, a: &Cluster, b: &Cluster) {
    let side = create_table(
        b,
        &keyed_definition(
            "side",
            vec![column("v", ColumnType::Int { unsigned: false }, false)],
        ),
    );
    let side_a = a.table("side").expect("side");
    create_table(b, &stale_v1());
    let old = a.table("stale").expect("stale");
    let keys = spread_keys(processes, &old, 1, 4);
    let mut transaction = a.transaction();
    for &k in &keys {
        transaction
            .insert(&old, &keyed_row(k, "v", Value::from("before")))
            .expect("valid insert");
    }
    transaction
        .execute(Commit::Yes)
        .expect("A inserts into stale");

    // Same name, same columns: the id is reused with a new version.
    b.drop_table("stale").expect("B drops stale");
    let new = create_table(b, &stale_v1());
    assert!(
        new.def().id != old.def().id || new.def().version != old.def().version,
        "{:?} vs {:?}",
        new.def(),
        old.def()
    );
    insert_committed(
        b,
        &new,
        (keys[0], "v", Value::from("from B")),
        "B inserts into the new stale",
    );

    // A's transaction with the old definition: an operation on another
    // table first, then one on the stale table. All of it is refused.
    let side_key = spread_keys(processes, &side_a, 1, 2)[1];
    let mut transaction = a.transaction();
    transaction
        .insert(&side_a, &keyed_row(side_key, "v", Value::Int(1)))
        .expect("valid insert");
    transaction
        .update(&old, &key(keys[0]), &[("v", Value::from("stale"))])
        .expect("valid update");
    let error = stale_error(transaction.execute(Commit::Yes));
    eprintln!("stale table, same columns: {error}");
    assert_eq!(
        code_of(read_row(a, &side_a, &key(side_key))),
        ErrorCode::NoSuchRow,
        "the refused transaction's other operation is rolled back"
    );
    stale_error(read_row(a, &old, &key(keys[1])));

    // A refreshes and carries on: the same transaction again.
    let (rows, refreshed) = with_refresh(a, "stale", new.def(), "A after recreate", |table| {
        let mut transaction = a.transaction();
        transaction.insert(&side_a, &keyed_row(side_key, "v", Value::Int(1)))?;
        transaction.update(table, &key(keys[0]), &[("v", Value::from("A again"))])?;
        let reads: Vec<_> = keys[..1]
            .iter()
            .map(|&k| transaction.read(table, &key(k), LockMode::Exclusive))
            .collect::<Result<_, _>>()?;
        transaction.execute(Commit::Yes)?;
        Ok(reads
            .into_iter()
            .map(|op| transaction.get(op).and_then(|row| row.get("v")).cloned())
            .collect::<Vec<_>>())
    });
    assert_eq!(rows, vec![Some(Value::from("A again"))]);
    eprintln!("stale table: A's next use after recreating refreshed: {refreshed}");
    let current = a.table("stale").expect("stale");
    for &k in &keys[1..] {
        assert_eq!(
            code_of(read_row(a, &current, &key(k))),
            ErrorCode::NoSuchRow,
            "the recreated table starts empty (key {k})"
        );
    }
    assert_eq!(
        read_row(b, &new, &key(keys[0])).expect("B reads").get("v"),
        Some(&Value::from("A again"))
    );

    // Other columns and another partition count, while A holds `current`.
    b.drop_table("stale").expect("B drops stale again");
    let newer = create_table(b, &stale_v2());
    assert_eq!(newer.def().partitions, 8, "{:?}", newer.def());
    let error = stale_error(read_row(a, &current, &key(keys[0])));
    eprintln!("stale table, other columns: {error}");
    let mut transaction = a.transaction();
    transaction
        .insert(&current, &keyed_row(keys[1], "v", Value::from("old cols")))
        .expect("valid insert by the old definition");
    stale_error(transaction.execute(Commit::Yes));
    let newer_keys = spread_keys(processes, &newer, 1, 6);
    let (_, refreshed) = with_refresh(
        a,
        "stale",
        newer.def(),
        "A after the column change",
        |table| {
            let mut transaction = a.transaction();
            for &k in &newer_keys {
                transaction.insert(
                    table,
                    &[
                        ("k", Value::UInt(k.into())),
                        ("w", Value::Int(k.into())),
                        ("v2", Value::from("new cols")),
                    ],
                )?;
            }
            transaction.execute(Commit::Yes).map(|_| ())
        },
    );
    eprintln!("stale table: A's next use after the column change refreshed: {refreshed}");
    let fresh = a.table("stale").expect("stale");
    assert!(fresh.def().column("w").is_some(), "{:?}", fresh.def());
    assert_eq!(fresh.def().partitions, 8, "{:?}", fresh.def());
    for &k in &newer_keys {
        let row =
            read_row(b, &newer, &key(k)).unwrap_or_else(|error| panic!("B reads {k}: {error}"));
        assert_eq!(row.get("w"), Some(&Value::Int(k.into())));
        assert_eq!(row.get("v2"), Some(&Value::from("new cols")));
    }

    // The plain application loop: A has the table cached (and used it),
    // B recreates it (the same columns: A's code still fits), A's next
    // transaction takes the table from its cache, is refused as stale,
    // refreshes and carries on.
    let cached = a.table("stale").expect("stale");
    read_row(a, &cached, &key(newer_keys[0])).expect("A reads through its cache");
    b.drop_table("stale").expect("B drops stale a third time");
    let newest = create_table(b, &stale_v2());
    insert_committed(
        b,
        &newest,
        (newer_keys[0], "v2", Value::from("third")),
        "B inserts into the third stale",
    );
    let (seen, refreshed) =
        with_refresh(a, "stale", newest.def(), "A's next transaction", |table| {
            let mut transaction = a.transaction();
            let op = transaction.read(table, &key(newer_keys[0]), LockMode::Shared)?;
            transaction.insert(
                table,
                &keyed_row(newer_keys[1], "v2", Value::from("A third")),
            )?;
            transaction.execute(Commit::Yes)?;
            Ok(transaction.get(op).and_then(|row| row.get("v2")).cloned())
        });
    eprintln!("stale table: A's next transaction through its cache refreshed: {refreshed}");
    assert_eq!(seen, Some(Value::from("third")));
    assert_eq!(
        read_row(b, &newest, &key(newer_keys[1]))
            .expect("B reads A's row")
            .get("v2"),
        Some(&Value::from("A third"))
    );
    drop(side);
}
