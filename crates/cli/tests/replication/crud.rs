//! CRUD: every key operation and its refusals, on a key whose primary
//! replica is on each data node in turn.

use crate::common::{assert_no_row_in_any_lock_mode, code_of, key, TestCluster, LOCK_MODES};
use crate::keys::{slot_order, spread_keys};
use crate::kv::{assert_kv_row, kv_delete, kv_insert, kv_row, kv_update, kv_write};
use crate::{execute, keyed_row};
use client::{Cluster, Commit, ErrorClass, ErrorCode, LockMode, Table, TransactionState, Value};
use std::sync::Arc;

/// Every key operation and its refusals, on a key whose primary replica is
/// on each data node in turn (the transactions' tcs rotate over the nodes,
/// so most operations cross nodes).
pub fn crud_with_every_primary(processes: &TestCluster, cluster: &Cluster, kv: &Arc<Table>) {
    let slots = slot_order(processes);
    let keys = spread_keys(processes, kv, 1, slots.len());
    for (&k, slot) in keys.iter().zip(&slots) {
        let at = format!("key {k} ({slot:?})");
        let kk = key(k);

        // Insert, then read it back in every lock mode.
        let mut transaction = cluster.transaction();
        kv_insert(&mut transaction, kv, k, "one", 1);
        let outcome = execute(&mut transaction, Commit::Yes, format_args!("{at}: insert"));
        assert!(outcome.committed, "{at}: {outcome:?}");
        assert!(
            outcome.gci.is_some_and(|gci| gci.0 > 0),
            "{at}: a write commits in a GCI: {outcome:?}"
        );
        for lock in LOCK_MODES {
            let mut transaction = cluster.transaction();
            let op = transaction.read(kv, &kk, lock).expect("valid read");
            execute(
                &mut transaction,
                Commit::Yes,
                format_args!("{at}: {lock:?} read"),
            );
            let row = transaction.get(op).expect("a read row");
            assert_eq!(row.get("v"), Some(&Value::from("one")), "{at}: {lock:?}");
            assert_eq!(row.get("n"), Some(&Value::Int(1)), "{at}: {lock:?}");
        }

        // A duplicate insert: a constraint error naming the operation.
        let mut transaction = cluster.transaction();
        let op = transaction
            .insert(kv, &keyed_row(k, "v", Value::from("2")))
            .expect("valid insert");
        let error = transaction.execute(Commit::Yes).expect_err("duplicate key");
        assert_eq!(error.code(), Some(ErrorCode::DuplicateKey), "{at}: {error}");
        assert_eq!(error.class(), Some(ErrorClass::Constraint), "{at}");
        assert!(!error.is_temporary(), "{at}");
        assert_eq!(error.failed_op(), Some(op), "{at}");
        assert_eq!(transaction.state(), TransactionState::Aborted, "{at}");
        assert_kv_row(cluster, kv, k, "one", Some(1), &at);

        // Update changes only the columns it names.
        let mut transaction = cluster.transaction();
        kv_update(&mut transaction, kv, k, "uno");
        execute(&mut transaction, Commit::Yes, format_args!("{at}: update"));
        assert_kv_row(cluster, kv, k, "uno", Some(1), &at);

        // Write of a present key overwrites the columns it names (all).
        let mut transaction = cluster.transaction();
        kv_write(&mut transaction, kv, k, "w", None);
        execute(
            &mut transaction,
            Commit::Yes,
            format_args!("{at}: write over a row"),
        );
        assert_kv_row(cluster, kv, k, "w", None, &at);

        // Delete; then every operation that needs the row says NoSuchRow.
        let mut transaction = cluster.transaction();
        kv_delete(&mut transaction, kv, &[k]);
        execute(&mut transaction, Commit::Yes, format_args!("{at}: delete"));
        assert_eq!(
            code_of(kv_row(cluster, kv, k)),
            ErrorCode::NoSuchRow,
            "{at}"
        );
        let mut transaction = cluster.transaction();
        kv_update(&mut transaction, kv, k, "x");
        let error = transaction.execute(Commit::Yes).expect_err("no row");
        assert_eq!(error.code(), Some(ErrorCode::NoSuchRow), "{at}: {error}");
        assert_eq!(error.class(), Some(ErrorClass::Constraint), "{at}");
        let mut transaction = cluster.transaction();
        kv_delete(&mut transaction, kv, &[k]);
        assert_eq!(
            code_of(transaction.execute(Commit::Yes)),
            ErrorCode::NoSuchRow,
            "{at}: delete of a missing row"
        );
        assert_no_row_in_any_lock_mode(cluster, kv, &kk, &at);

        // Write of an absent key inserts.
        let mut transaction = cluster.transaction();
        kv_write(&mut transaction, kv, k, "again", Some(-5));
        execute(
            &mut transaction,
            Commit::Yes,
            format_args!("{at}: write of a missing row"),
        );
        assert_kv_row(cluster, kv, k, "again", Some(-5), &at);

        // Delete and insert again in one transaction, reading its own write.
        let mut transaction = cluster.transaction();
        kv_delete(&mut transaction, kv, &[k]);
        transaction
            .insert(kv, &keyed_row(k, "v", Value::from("re")))
            .expect("valid insert");
        let op = transaction
            .read(kv, &kk, LockMode::Exclusive)
            .expect("valid read");
        execute(
            &mut transaction,
            Commit::Yes,
            format_args!("{at}: delete + insert + read"),
        );
        assert_eq!(
            transaction.get(op).and_then(|row| row.get("v")),
            Some(&Value::from("re")),
            "{at}: the transaction reads its own insert"
        );
        assert_kv_row(cluster, kv, k, "re", None, &at);
    }
}
