//! Multi-row transactions: 2 to 8 rows whose keys alternate node groups
//! and primaries, and one of 256 rows on every node.

use crate::common::TestCluster;
use crate::keys::{slot_of, spread_keys};
use crate::kv::{kv_delete, kv_insert, kv_reads, kv_snapshot, kv_update, kv_values, kv_write};
use crate::{execute, keyed_row};
use client::{Cluster, Commit, ErrorCode, LockMode, Table, TransactionState, Value};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Transactions of 2 to 8 rows whose keys alternate node groups and
/// primaries: all-or-nothing commit, failure and rollback; uncommitted
/// writes invisible to another API node, visible to their own transaction.
pub fn multi_row_transactions(processes: &TestCluster, a: &Cluster, b: &Cluster, kv: &Arc<Table>) {
    let groups = processes.groups().len();
    for rows in 2..=8usize {
        let keys = spread_keys(processes, kv, 100_000 * rows as u32, rows + 1);
        let (keys, extra) = (&keys[..rows], keys[rows]);
        let at = format!("{rows} rows {keys:?}");
        let spanned: BTreeSet<u32> = keys
            .iter()
            .map(|&k| slot_of(processes, kv, k).group)
            .collect();
        assert_eq!(spanned.len(), groups.min(rows), "{at}: node groups spanned");
        let original: Vec<_> = (0..rows)
            .map(|i| Some(kv_values(&format!("r{rows}-{i}"), Some(i as i64))))
            .collect();

        // All inserted in one transaction, read back in one by another API node.
        let mut transaction = a.transaction();
        for (i, &k) in keys.iter().enumerate() {
            kv_insert(&mut transaction, kv, k, &format!("r{rows}-{i}"), i as i64);
        }
        let outcome = execute(&mut transaction, Commit::Yes, format_args!("{at}: insert"));
        assert!(
            outcome.committed && outcome.gci.is_some(),
            "{at}: {outcome:?}"
        );
        assert_eq!(kv_snapshot(b, kv, keys), original, "{at}: after insert");

        // Uncommitted updates: the transaction sees them, B does not;
        // rolled back, nothing changed.
        let mut transaction = a.transaction();
        for &k in keys {
            kv_update(&mut transaction, kv, k, "uncommitted");
        }
        let own = kv_reads(&mut transaction, kv, keys, LockMode::Exclusive);
        execute(
            &mut transaction,
            Commit::No,
            format_args!("{at}: update batch"),
        );
        for op in own {
            assert_eq!(
                transaction.get(op).and_then(|row| row.get("v")),
                Some(&Value::from("uncommitted")),
                "{at}: own writes"
            );
        }
        assert_eq!(kv_snapshot(b, kv, keys), original, "{at}: no dirty reads");
        transaction
            .rollback()
            .unwrap_or_else(|error| panic!("{at}: rollback: {error}"));
        assert_eq!(transaction.state(), TransactionState::Aborted, "{at}");
        assert_eq!(kv_snapshot(b, kv, keys), original, "{at}: rolled back");

        // The last operation fails (a duplicate in another node group than
        // the one before it): nothing of the transaction stays.
        let mut transaction = a.transaction();
        for &k in &keys[..rows - 1] {
            kv_update(&mut transaction, kv, k, "lost");
        }
        kv_insert(&mut transaction, kv, extra, "lost", 0);
        let duplicate = transaction
            .insert(kv, &keyed_row(keys[rows - 1], "v", Value::from("dup")))
            .expect("valid insert");
        let error = transaction.execute(Commit::Yes).expect_err("duplicate");
        assert_eq!(error.code(), Some(ErrorCode::DuplicateKey), "{at}: {error}");
        assert_eq!(error.failed_op(), Some(duplicate), "{at}");
        assert_eq!(kv_snapshot(b, kv, keys), original, "{at}: atomic abort");
        assert_eq!(
            kv_snapshot(b, kv, &[extra]),
            vec![None],
            "{at}: atomic abort"
        );

        // Two batches, then commit: every row changes.
        let mut transaction = a.transaction();
        for &k in &keys[..rows / 2] {
            kv_update(&mut transaction, kv, k, "two");
        }
        execute(
            &mut transaction,
            Commit::No,
            format_args!("{at}: first batch"),
        );
        for &k in &keys[rows / 2..] {
            kv_write(&mut transaction, kv, k, "two", None);
        }
        execute(
            &mut transaction,
            Commit::Yes,
            format_args!("{at}: second batch"),
        );
        // n as inserted in the first half, NULL (written) in the second.
        let n = |i: usize| if i < rows / 2 { Some(i as i64) } else { None };
        let expected: Vec<_> = (0..rows).map(|i| Some(kv_values("two", n(i)))).collect();
        assert_eq!(kv_snapshot(b, kv, keys), expected, "{at}: two batches");

        // Mixed: delete the first row, insert a new one, update the rest.
        let mut transaction = a.transaction();
        kv_delete(&mut transaction, kv, &keys[..1]);
        kv_insert(&mut transaction, kv, extra, "new", 77);
        for &k in &keys[1..] {
            kv_update(&mut transaction, kv, k, "mixed");
        }
        execute(&mut transaction, Commit::Yes, format_args!("{at}: mixed"));
        let mut expected: Vec<_> = (0..rows)
            .map(|i| (i > 0).then(|| kv_values("mixed", n(i))))
            .collect();
        expected.push(Some(kv_values("new", Some(77))));
        let mut all = keys.to_vec();
        all.push(extra);
        assert_eq!(kv_snapshot(b, kv, &all), expected, "{at}: mixed");

        // Every row deleted in one transaction (except for 8 rows, left
        // for the replica check).
        if rows < 8 {
            let mut transaction = a.transaction();
            kv_delete(&mut transaction, kv, &all[1..]);
            execute(
                &mut transaction,
                Commit::Yes,
                format_args!("{at}: delete all"),
            );
            assert_eq!(
                kv_snapshot(b, kv, &all),
                vec![None; rows + 1],
                "{at}: deleted"
            );
        }
    }

    // One transaction of many rows on every node: inserted, read back,
    // updated and deleted, each in one batch.
    let keys: Vec<u32> = (900_000..900_256).collect();
    let bulk = |v: &str| -> Vec<_> {
        keys.iter()
            .map(|&k| Some(kv_values(v, Some(k.into()))))
            .collect()
    };
    let mut transaction = a.transaction();
    for &k in &keys {
        kv_insert(&mut transaction, kv, k, "bulk", k.into());
    }
    execute(&mut transaction, Commit::Yes, "bulk insert");
    assert_eq!(kv_snapshot(b, kv, &keys), bulk("bulk"), "bulk insert");
    let mut transaction = a.transaction();
    for &k in &keys {
        kv_update(&mut transaction, kv, k, "bulk2");
    }
    execute(&mut transaction, Commit::Yes, "bulk update");
    assert_eq!(kv_snapshot(b, kv, &keys), bulk("bulk2"), "bulk update");
    let mut transaction = a.transaction();
    kv_delete(&mut transaction, kv, &keys);
    execute(&mut transaction, Commit::Yes, "bulk delete");
    assert_eq!(
        kv_snapshot(b, kv, &keys),
        vec![None; keys.len()],
        "bulk delete"
    );
}
