//! Lock conflicts across nodes: the lock held on another node than the
//! waiter's tc.

use crate::common::{
    acct_definition, create_table, key, locked_read, read_row, set, wait_behind, TestCluster,
};
use crate::keys::{slot_order, spread_keys};
use crate::{execute, keyed_row};
use client::{Cluster, Commit, ErrorCode, LockMode, Table, TransactionState, Value};
use std::sync::Arc;

fn acct_value(cluster: &Cluster, table: &Arc<Table>, k: u32) -> i64 {
    read_row(cluster, table, &key(k))
        .unwrap_or_else(|error| panic!("read acct {k}: {error}"))
        .get("v")
        .and_then(Value::as_i64)
        .expect("v")
}

/// A holds a row (its primary on each node in turn, A's and B's tcs
/// rotating over the nodes, so the holder's lock, A's tc and B's tc are
/// on different nodes in most rounds): B's committed read does not wait
/// and sees the old value, B's exclusive read waits until A commits and
/// then sees A's value. A lock wait timeout aborts the waiter and releases
/// the locks it held on another node; a deadlock across nodes ends with
/// at least one side timed out.
pub fn lock_conflicts_across_nodes(processes: &TestCluster, a: &Cluster, b: &Cluster) {
    let table_a = create_table(a, &acct_definition());
    let table_b = b.table("acct").expect("acct");
    let slots = slot_order(processes);
    let keys = spread_keys(processes, &table_a, 1, slots.len());
    let mut transaction = a.transaction();
    for &k in &keys {
        transaction
            .insert(&table_a, &keyed_row(k, "v", Value::Int(0)))
            .expect("valid insert");
    }
    transaction.execute(Commit::Yes).expect("insert acct rows");

    // Each key twice: consecutive transactions start on different tcs.
    let mut value = 0;
    for round in 0..2 {
        for (&k, slot) in keys.iter().zip(&slots) {
            let at = format!("round {round}, key {k} ({slot:?})");
            let before = acct_value(a, &table_a, k);
            value += 1;
            let mut holder = a.transaction();
            set(&mut holder, &table_a, k, value);
            execute(&mut holder, Commit::No, format_args!("{at}: A holds"));
            assert_eq!(
                acct_value(b, &table_b, k),
                before,
                "{at}: B's committed read neither waits nor sees A's update"
            );
            let seen = wait_behind(
                &format!("{at}: B's exclusive read"),
                || {
                    let mut transaction = b.transaction();
                    let seen = locked_read(&mut transaction, &table_b, k, LockMode::Exclusive);
                    let committed = transaction.execute(Commit::Yes).map(|_| ());
                    (
                        seen.map_err(|error| error.to_string()),
                        committed.map_err(|error| error.to_string()),
                    )
                },
                || {
                    execute(&mut holder, Commit::Yes, format_args!("{at}: A commits"));
                },
            );
            assert_eq!(
                seen,
                (Ok(value), Ok(())),
                "{at}: B sees A's committed value"
            );
        }
    }

    // Lock wait timeout: A holds x; B takes y (another node's primary),
    // then waits for x until it times out, which releases y.
    for (x, y) in [(keys[0], keys[1]), (keys[1], keys[0])] {
        let at = format!("timeout: A holds {x}, B holds {y}");
        let (x_before, y_before) = (acct_value(a, &table_a, x), acct_value(a, &table_a, y));
        let mut holder = a.transaction();
        set(&mut holder, &table_a, x, 1000 + i64::from(x));
        execute(&mut holder, Commit::No, format_args!("{at}: A holds x"));
        let mut waiter = b.transaction();
        set(&mut waiter, &table_b, y, -1);
        execute(&mut waiter, Commit::No, format_args!("{at}: B holds y"));
        set(&mut waiter, &table_b, x, -1);
        let error = waiter
            .execute(Commit::Yes)
            .expect_err("B cannot get x while A holds it");
        assert_eq!(
            error.code(),
            Some(ErrorCode::LockWaitTimeout),
            "{at}: {error}"
        );
        assert!(error.is_temporary(), "{at}");
        assert_eq!(waiter.state(), TransactionState::Aborted, "{at}");
        // y is free again (else this read would time out) and unchanged.
        let mut check = a.transaction();
        assert_eq!(
            locked_read(&mut check, &table_a, y, LockMode::Exclusive)
                .unwrap_or_else(|error| panic!("{at}: y is not released: {error}")),
            y_before,
            "{at}: B's update of y is rolled back"
        );
        check.execute(Commit::Yes).expect("commit the read of y");
        execute(&mut holder, Commit::Yes, format_args!("{at}: A commits x"));
        assert_eq!(acct_value(b, &table_b, x), 1000 + i64::from(x), "{at}");
        assert_ne!(x_before, 1000 + i64::from(x), "{at}: x changed");
    }

    // A deadlock across nodes: A holds x and wants y, B holds y and wants
    // x. At least one times out; if one commits, its update is the value.
    let (x, y) = (keys[0], keys[1]);
    let mut first = a.transaction();
    set(&mut first, &table_a, x, 2001);
    first.execute(Commit::No).expect("A holds x");
    let mut second = b.transaction();
    set(&mut second, &table_b, y, 2002);
    second.execute(Commit::No).expect("B holds y");
    let (result_a, result_b) = std::thread::scope(|scope| {
        let other = scope.spawn(move || {
            set(&mut second, &table_b, x, 2002);
            second.execute(Commit::Yes).map_err(|error| error.code())
        });
        set(&mut first, &table_a, y, 2001);
        let mine = first.execute(Commit::Yes).map_err(|error| error.code());
        (mine, other.join().expect("B's thread"))
    });
    let ok_or_timeout = |result: &Result<client::Outcome, Option<ErrorCode>>| {
        result.is_ok() || *result == Err(Some(ErrorCode::LockWaitTimeout))
    };
    assert!(
        (result_a.is_err() || result_b.is_err())
            && ok_or_timeout(&result_a)
            && ok_or_timeout(&result_b),
        "deadlock: A {result_a:?}, B {result_b:?}"
    );
    let (vx, vy) = (acct_value(a, &table_a, x), acct_value(a, &table_a, y));
    match (&result_a, &result_b) {
        (Ok(_), _) => assert_eq!((vx, vy), (2001, 2001), "A won"),
        (_, Ok(_)) => assert_eq!((vx, vy), (2002, 2002), "B won"),
        _ => assert!(
            vx != 2001 && vx != 2002 && vy != 2001 && vy != 2002,
            "both aborted"
        ),
    }
}
