//! A unique index on real data nodes (docs/design/scans-and-indexes.md
//! §5) through a node restart and a whole-cluster restart: its hidden
//! table is copied to the restarting node with the other partitions,
//! restored from the local checkpoints and the redo log with them, and
//! kept from there on. Checked by looking rows up through it, by writes
//! of a repeated value (refused, naming the index), and by `check
//! replicas`, which compares every replica of the hidden table and the
//! hidden rows with the table's rows. Then it is dropped alone, and stays
//! dropped through another whole-cluster restart; and created again on
//! the live table, refused while two rows repeat a value.

mod common;

use client::{
    ClientError, Cluster, ColumnType, Commit, IndexDef, LockMode, Table, UniqueTable, Value,
};
use common::{column, keyed_definition, send_signal, ClusterOptions, TestCluster};
use serde_json::Value as Json;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const ROWS: u32 = 2_000;

/// k -> email (`None`: NULL).
type Emails = BTreeMap<u32, Option<String>>;

/// Runs `attempt` until it succeeds, retrying temporary errors (a failure
/// being handled) for up to a minute.
fn settled<T>(what: &str, attempt: impl FnMut() -> Result<T, ClientError>) -> T {
    common::settled(what, Duration::from_secs(60), attempt)
}

/// Writes k's email (its whole row).
fn set(cluster: &Cluster, table: &Arc<Table>, k: u32, email: Option<&str>) {
    settled(&format!("set {k}"), || {
        let mut transaction = cluster.transaction();
        let email = email.map_or(Value::Null, Value::from);
        transaction.write(table, &[("k", Value::UInt(k.into())), ("email", email)])?;
        transaction.execute(Commit::Yes).map(|_| ())
    });
}

fn email(k: u32) -> Option<String> {
    (!k.is_multiple_of(10)).then(|| format!("user{k}@example.com"))
}

/// Every row is found through the index by its email, and a write of
/// another row with a taken email is refused naming the index.
fn assert_index_serves(cluster: &Cluster, emails: &Emails, when: &str) {
    cluster.invalidate_table("users");
    let table = cluster.table("users").expect("the table");
    for (&k, value) in emails.iter().step_by(37) {
        let Some(value) = value else { continue };
        let found = settled("a lookup", || {
            let mut transaction = cluster.transaction();
            let values = [Value::from(value.as_str())];
            let row =
                transaction.read_by_unique_index(&table, "by_email", &values, LockMode::Shared)?;
            transaction.execute(Commit::Yes)?;
            Ok(row)
        });
        let found = found.and_then(|row| row.get("k").and_then(Value::as_u64));
        assert_eq!(found, Some(u64::from(k)), "{when}: {value}");
    }
    let missing = settled("a lookup of no row", || {
        let mut transaction = cluster.transaction();
        let values = [Value::from("nobody@example.com")];
        transaction.read_by_unique_index(&table, "by_email", &values, LockMode::CommittedRead)
    });
    assert!(missing.is_none(), "{when}");
    let (&taken_by, taken) = emails
        .iter()
        .find(|(_, email)| email.is_some())
        .expect("an email");
    let other = emails
        .keys()
        .find(|&&k| k != taken_by)
        .copied()
        .expect("another row");
    let mut transaction = cluster.transaction();
    let taken = Value::from(taken.as_deref().expect("some"));
    transaction
        .update(
            &table,
            &[Value::UInt(other.into())],
            &[("email", taken.clone())],
        )
        .unwrap();
    match transaction.execute(Commit::Yes) {
        Err(ClientError::DuplicateKey {
            index: Some(index),
            entry,
            ..
        }) => {
            assert_eq!(index, "by_email");
            assert_eq!(entry, vec![taken], "{when}: the value repeated");
        }
        other => panic!("{when}: a repeated email: {other:?}"),
    }
}

fn check_replicas(cluster: &TestCluster, emails: &Emails, when: &str) {
    check_replicas_of(cluster, emails, true, when);
}

/// `check replicas` finds no mismatch, and checks the rows and (`indexed`)
/// one hidden row for each email.
fn check_replicas_of(cluster: &TestCluster, emails: &Emails, indexed: bool, when: &str) {
    let check = cluster.mgm_json("check replicas");
    let check: Json = serde_json::from_str(check.stdout.trim())
        .unwrap_or_else(|error| panic!("check replicas printed no JSON ({error})"));
    assert_eq!(check["mismatches"], 0, "{when}: {check}");
    let hidden = match indexed {
        true => emails.values().filter(|email| email.is_some()).count(),
        false => 0,
    };
    assert_eq!(
        check["rows_checked"],
        emails.len() + hidden,
        "{when}: {check}"
    );
}

#[test]
fn a_unique_index_survives_a_node_restart_and_a_whole_cluster_restart() {
    let mut cluster = TestCluster::start(ClusterOptions::pair("unique_index"));
    let client = cluster.connect();
    let mut definition = keyed_definition(
        "users",
        vec![
            column("email", ColumnType::VarChar(40), true),
            column("n", ColumnType::BigInt { unsigned: false }, true),
        ],
    );
    definition.indexes.push(IndexDef {
        id: 1,
        name: "by_email".into(),
        columns: vec![1],
        unique: Some(UniqueTable::REQUESTED),
    });
    let table = common::create_table(&client, &definition);
    let mut emails = Emails::new();
    for k in 0..ROWS {
        set(&client, &table, k, email(k).as_deref());
        emails.insert(k, email(k));
    }
    assert_index_serves(&client, &emails, "loaded");
    check_replicas(&cluster, &emails, "loaded");

    // Node 3 dies; emails move while it is down; it restarts and copies
    // the hidden table with the rest.
    let victim = 3u16;
    send_signal(cluster.node_pid_of(victim), libc::SIGKILL);
    let _ = cluster.wait_for_exit(victim);
    cluster.wait_for_log(2, &format!("without {{{victim}}}"));
    for k in (0..ROWS).step_by(7) {
        let moved = (!k.is_multiple_of(3)).then(|| format!("moved{k}@example.com"));
        set(&client, &table, k, moved.as_deref());
        emails.insert(k, moved);
    }
    cluster.spawn_data_node(victim);
    cluster.wait_until_started(victim);
    assert_index_serves(&client, &emails, "after the node restart");
    check_replicas(&cluster, &emails, "after the node restart");

    // Durable, then every data node killed and restarted from disk.
    let last = settled("a durable write", || {
        let mut transaction = client.transaction();
        transaction.write(
            &table,
            &[
                ("k", Value::UInt(0)),
                ("email", Value::from("last@example.com")),
            ],
        )?;
        transaction.commit_durable()
    });
    emails.insert(0, Some("last@example.com".into()));
    assert!(last.gci.is_some());
    drop(table);
    drop(client);
    cluster.kill_data_nodes();
    cluster.restart_data_nodes();
    let client = cluster.connect();
    assert_index_serves(&client, &emails, "after the whole-cluster restart");
    check_replicas(&cluster, &emails, "after the whole-cluster restart");

    // Dropped alone: emails may repeat, no hidden rows are left, and a
    // whole-cluster restart brings neither the index nor its rows back.
    client
        .drop_index("users", "by_email")
        .expect("drop the unique index");
    client.invalidate_table("users");
    let table = client.table("users").expect("the table");
    assert!(table.unique_index_table("by_email").is_err());
    let repeated = emails[&1].clone();
    settled("a durable repeated email", || {
        let mut transaction = client.transaction();
        let email = Value::from(repeated.as_deref().expect("row 1 has an email"));
        transaction.write(&table, &[("k", Value::UInt(2)), ("email", email)])?;
        transaction.commit_durable()
    });
    emails.insert(2, repeated);
    check_replicas_of(&cluster, &emails, false, "after the drop");
    drop(table);
    drop(client);
    cluster.kill_data_nodes();
    cluster.restart_data_nodes();
    let client = cluster.connect();
    let table = client.table("users").expect("the table after the restart");
    assert!(table.def().indexes.is_empty(), "{:?}", table.def().indexes);
    check_replicas_of(&cluster, &emails, false, "after the drop and a restart");

    // Created again on the live table: refused while rows 1 and 2 repeat
    // an email (the table left as it was), then built once they do not.
    let refused = client.create_unique_index("users", "by_email", &["email"]);
    assert_eq!(
        refused.as_ref().err().and_then(ClientError::code),
        Some(client::ErrorCode::DuplicateKey),
        "{refused:?}"
    );
    client.invalidate_table("users");
    let table = client.table("users").expect("the table");
    assert!(table.def().indexes.is_empty(), "{:?}", table.def().indexes);
    check_replicas_of(&cluster, &emails, false, "after the refused create");
    set(&client, &table, 2, email(2).as_deref());
    emails.insert(2, email(2));
    client
        .create_unique_index("users", "by_email", &["email"])
        .expect("created on the live table");
    assert_index_serves(&client, &emails, "created on the live table");
    check_replicas(&cluster, &emails, "created on the live table");
}
