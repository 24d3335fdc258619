//! Unique indexes through the real client against a model
//! (docs/design/scans-and-indexes.md §5): a table with two unique indexes
//! (a VARCHAR one, PAD SPACE, NULL-able; and an INT, CHAR pair) and an
//! ordered one, on 2 nodes with 2 replicas. Random inserts, updates,
//! writes and deletes, each alone or two in one transaction: the model
//! says whether one repeats a unique value (DuplicateKey naming the index,
//! the whole transaction undone) or not; lookups by each unique index
//! return the model's row; a unique index is an ordered index too, and
//! its range scans return the model's rows in its order. At the end the
//! replica checker compares every hidden table with the rows.

use client::{ClientError, ColumnDef, ColumnType, Commit, IndexDef, TableDef, UniqueTable, Value};
use signal::signals::LockMode;
use sim::harness::Harness;
use std::collections::BTreeMap;
use stdx::mix::XorShift;

const K: usize = 0;
const EMAIL: usize = 1;
const A: usize = 2;
const B: usize = 3;
const V: usize = 4;
const NAMES: [&str; 5] = ["k", "email", "a", "b", "v"];
const COLUMNS: usize = 5;
/// The unique indexes: name and columns.
const UNIQUE: [(&str, &[usize]); 2] = [("by_email", &[EMAIL]), ("by_a_b", &[A, B])];

fn table_definition() -> TableDef {
    let types = [
        ColumnType::BigInt { unsigned: true },
        ColumnType::VarChar(6),
        ColumnType::Int { unsigned: false },
        ColumnType::Char(3),
        ColumnType::Int { unsigned: false },
    ];
    let mut indexes: Vec<IndexDef> = UNIQUE
        .iter()
        .enumerate()
        .map(|(at, (name, columns))| IndexDef {
            id: at as u32 + 1,
            name: (*name).into(),
            columns: columns.iter().map(|&column| column as u16).collect(),
            unique: Some(UniqueTable::REQUESTED),
        })
        .collect();
    indexes.push(IndexDef {
        id: 3,
        name: "by_v".into(),
        columns: vec![V as u16],
        unique: None,
    });
    TableDef {
        id: 0,
        version: 0,
        name: "people".into(),
        columns: (0..COLUMNS)
            .map(|column| ColumnDef::new(NAMES[column], types[column], column != K))
            .collect(),
        primary_key: vec![K as u16],
        partitions: 0,
        revision: 0,
        indexes,
        partition_key: Vec::new(),
    }
}

/// A random value for `column`: few distinct ones, so values repeat.
fn draw(random: &mut XorShift, column: usize) -> Value {
    if random.below(6) == 0 {
        return Value::Null;
    }
    match column {
        // Trailing spaces: the same key as without them (PAD SPACE).
        EMAIL => {
            let name = ["ann", "bob", "cy", "dee", "ed", "flo", "gus", "hal"];
            let mut text = name[random.below(8) as usize].as_bytes().to_vec();
            text.extend(std::iter::repeat_n(b' ', random.below(3) as usize));
            Value::Bytes(text)
        }
        A => Value::Int(random.below(3) as i64),
        B => Value::Bytes([b"x".as_slice(), b"y", b"zz"][random.below(3) as usize].to_vec()),
        V => Value::Int(random.below(5) as i64),
        _ => unreachable!(),
    }
}

/// A value as a unique key compares: text without trailing spaces.
fn canonical(value: &Value) -> Value {
    match value {
        Value::Bytes(bytes) => {
            let mut bytes = bytes.clone();
            while bytes.last() == Some(&b' ') {
                bytes.pop();
            }
            Value::Bytes(bytes)
        }
        other => other.clone(),
    }
}

/// A row's key in unique index `index`: `None` when a column is NULL.
fn unique_key(row: &[Value], index: usize) -> Option<Vec<Value>> {
    UNIQUE[index]
        .1
        .iter()
        .map(|&column| (!matches!(row[column], Value::Null)).then(|| canonical(&row[column])))
        .collect()
}

/// The unique indexes (by name) whose values `row` (of key `k`) repeats
/// in `model` (either may be the one refused when it repeats both).
fn repeated_indexes(model: &BTreeMap<u64, Vec<Value>>, k: u64, row: &[Value]) -> Vec<&'static str> {
    (0..UNIQUE.len())
        .filter(|&index| {
            unique_key(row, index).is_some_and(|key| {
                model.iter().any(|(&other, other_row)| {
                    other != k && unique_key(other_row, index) == Some(key.clone())
                })
            })
        })
        .map(|index| UNIQUE[index].0)
        .collect()
}

/// A row's (a, b, k), b NULL as empty (CHAR keeps no trailing spaces,
/// and the values drawn are never empty).
fn a_b_k(row: &client::Row) -> (i64, Vec<u8>, u64) {
    let values = row.values();
    let a = values[A].as_i64().expect("a in the range");
    let b = match &values[B] {
        Value::Bytes(b) => b.clone(),
        _ => Vec::new(),
    };
    (a, b, values[K].as_u64().expect("k"))
}

/// One change a transaction makes: the row's new value (`None`: deleted).
struct Change {
    k: u64,
    row: Option<Vec<Value>>,
}

#[test]
fn unique_indexes_match_a_model_through_changes() {
    let (commits, duplicates, lookups) = Harness::new(31).nodes(2, 2).run(|cluster, _| {
        cluster.create_table(&table_definition()).expect("create");
        let table = cluster.table("people").expect("the table");
        let mut model: BTreeMap<u64, Vec<Value>> = BTreeMap::new();
        let mut random = XorShift::new(31);
        let (mut commits, mut duplicates, mut lookups) = (0, 0, 0);
        for step in 0..300 {
            let mut transaction = cluster.transaction();
            // The model as this transaction leaves it, and the first
            // unique index it repeats.
            let mut after = model.clone();
            let mut refused: Vec<&str> = Vec::new();
            let operations = 1 + random.below(3);
            // Some operations join the batch of the one before them, on
            // the same row: the tc keeps one row's operations in the
            // client's order.
            let mut joining: Option<u64> = None;
            for operation in 0..operations {
                let k = joining.unwrap_or_else(|| random.below(12));
                let change = match after.get(&k) {
                    Some(_) if random.below(4) == 0 => {
                        transaction.delete(&table, &[Value::UInt(k)]).unwrap();
                        Change { k, row: None }
                    }
                    Some(row) if random.below(2) == 0 => {
                        let mut row = row.clone();
                        let column = 1 + random.below(4) as usize;
                        row[column] = draw(&mut random, column);
                        let set = [(NAMES[column], row[column].clone())];
                        transaction.update(&table, &[Value::UInt(k)], &set).unwrap();
                        Change { k, row: Some(row) }
                    }
                    existing => {
                        // A write of some columns (an upsert), or an insert
                        // of the whole row when there is none.
                        let mut row = existing.cloned().unwrap_or_else(|| {
                            let mut row = vec![Value::UInt(k)];
                            row.extend(std::iter::repeat_n(Value::Null, COLUMNS - 1));
                            row
                        });
                        let mut named = vec![("k", Value::UInt(k))];
                        for column in 1..COLUMNS {
                            if existing.is_none() || random.below(2) == 0 {
                                row[column] = draw(&mut random, column);
                                named.push((NAMES[column], row[column].clone()));
                            }
                        }
                        if existing.is_none() && random.below(2) == 0 {
                            transaction.insert(&table, &named).unwrap();
                        } else {
                            transaction.write(&table, &named).unwrap();
                        }
                        Change { k, row: Some(row) }
                    }
                };
                // The model checks each operation against the
                // transaction's earlier ones. Of a batch's operations on
                // one row, any that repeats a value may be the one refused
                // (the others run on as far as the refusal lets them).
                match change.row {
                    Some(row) => {
                        refused.extend(repeated_indexes(&after, change.k, &row));
                        after.insert(change.k, row);
                    }
                    None => {
                        after.remove(&change.k);
                    }
                }
                // The next operation joins this batch, on the same row; or
                // the batch runs now.
                joining = (operation + 1 < operations && random.below(2) == 0).then_some(k);
                if joining.is_some() {
                    continue;
                }
                let result = transaction.execute(Commit::No);
                if !refused.is_empty() {
                    break_with(result, &refused, step);
                    break;
                }
                result.unwrap_or_else(|error| panic!("step {step}: {error}"));
            }
            if refused.is_empty() {
                transaction
                    .execute(Commit::Yes)
                    .unwrap_or_else(|error| panic!("step {step}: commit: {error}"));
                model = after;
                commits += 1;
            } else {
                duplicates += 1;
            }

            // A unique index is an ordered index too: a range of a's
            // values, in (a, b) order, is the model's rows in that range.
            let low = random.below(3) as i64;
            let high = low + random.below(2) as i64;
            let range = [client::KeyRange {
                low: std::ops::Bound::Included(vec![Value::Int(low)]),
                high: std::ops::Bound::Included(vec![Value::Int(high)]),
            }];
            let options = client::ScanOptions {
                ordered: true,
                ..client::ScanOptions::default()
            };
            let scanned = cluster
                .scan(&table, client::Access::Index("by_a_b", &range), &options)
                .expect("a range of by_a_b");
            let found: Vec<(i64, Vec<u8>, u64)> = scanned.rows.iter().map(a_b_k).collect();
            let mut expected: Vec<(i64, Vec<u8>, u64)> = model
                .values()
                .filter_map(|row| match (&row[A], &row[B], &row[K]) {
                    (Value::Int(a), b, Value::UInt(k)) if (low..=high).contains(a) => {
                        let b = match b {
                            Value::Bytes(b) => b.clone(),
                            _ => Vec::new(),
                        };
                        Some((*a, b, *k))
                    }
                    _ => None,
                })
                .collect();
            expected.sort();
            // Rows of one a in b's order (NULL first), keys apart.
            let mut sorted = found.clone();
            sorted.sort();
            assert_eq!(sorted, expected, "step {step}: by_a_b in [{low}, {high}]");
            assert!(
                found
                    .windows(2)
                    .all(|pair| (pair[0].0, &pair[0].1) <= (pair[1].0, &pair[1].1)),
                "step {step}: by_a_b out of order: {found:?}"
            );

            // Look rows up by each unique index: values some row holds,
            // and some none does.
            for _ in 0..2 {
                let index = random.below(UNIQUE.len() as u64) as usize;
                let (name, columns) = UNIQUE[index];
                let values: Vec<Value> = match model.values().nth(random.below(12) as usize) {
                    Some(row) if random.below(3) != 0 => {
                        columns.iter().map(|&column| row[column].clone()).collect()
                    }
                    _ => columns
                        .iter()
                        .map(|&column| draw(&mut random, column))
                        .collect(),
                };
                if values.iter().any(|value| matches!(value, Value::Null)) {
                    continue;
                }
                let key: Vec<Value> = values.iter().map(canonical).collect();
                let expected = model
                    .values()
                    .find(|row| unique_key(row, index) == Some(key.clone()));
                let lock = [LockMode::CommittedRead, LockMode::Shared][random.below(2) as usize];
                let mut transaction = cluster.transaction();
                let found = transaction
                    .read_by_unique_index(&table, name, &values, lock)
                    .unwrap_or_else(|error| panic!("step {step}: lookup {name}: {error}"));
                let found = found.map(|row| row.values()[..COLUMNS].to_vec());
                assert_eq!(found.as_ref(), expected, "step {step}: {name} = {values:?}");
                transaction
                    .execute(Commit::Yes)
                    .expect("the lookup's commit");
                lookups += 1;
            }
        }
        let report = cluster.check_replicas().expect("the replica check");
        assert!(report.is_consistent(), "{report}");
        // The rows, then each hidden table's: as many as rows with values.
        let with_values = |index| {
            model
                .values()
                .filter(move |row| unique_key(row, index).is_some())
        };
        let expected = model.len() + with_values(0).count() + with_values(1).count();
        assert_eq!(report.rows_checked, expected as u64, "{report}");
        (commits, duplicates, lookups)
    });
    assert!(
        commits > 100 && duplicates > 20 && lookups > 300,
        "{commits} {duplicates} {lookups}"
    );
}

/// A batch the model says repeats unique indexes `indexes`: refused with
/// DuplicateKey naming one of them.
fn break_with(result: Result<client::Outcome, ClientError>, indexes: &[&str], step: usize) {
    match result {
        Err(ClientError::DuplicateKey {
            index: Some(index), ..
        }) => {
            assert!(
                indexes.contains(&index.as_str()),
                "step {step}: {index} not in {indexes:?}"
            )
        }
        other => panic!("step {step}: expected a duplicate in {indexes:?}, got {other:?}"),
    }
}

/// Every row of `table`, once the replica checker found every replica
/// and hidden table consistent.
fn consistent_rows(
    cluster: &client::Cluster,
    table: &std::sync::Arc<client::Table>,
) -> client::ScanResult {
    let report = cluster.check_replicas().expect("the replica check");
    assert!(report.is_consistent(), "{report}");
    cluster
        .scan(
            table,
            client::Access::Table,
            &client::ScanOptions::default(),
        )
        .expect("a scan of every row")
}

/// The table "people", waiting until another client has created it.
fn people_once_created(
    cluster: &client::Cluster,
    context: &sim::hosted::HostedContext,
) -> std::sync::Arc<client::Table> {
    loop {
        match cluster.table("people") {
            Ok(table) => return table,
            Err(_) => context.sleep(std::time::Duration::from_millis(10)),
        }
    }
}

/// Random writes, deletes and updates of 20 rows with values that repeat
/// until `until_us` of simulated time, each committed alone: how many
/// ended each way.
fn random_writes(
    cluster: &client::Cluster,
    table: &std::sync::Arc<client::Table>,
    random: &mut XorShift,
    until_us: u64,
    context: &sim::hosted::HostedContext,
) -> BTreeMap<&'static str, u32> {
    let mut outcomes = BTreeMap::<&'static str, u32>::new();
    while context.now_us() < until_us {
        let k = random.below(20);
        let mut transaction = cluster.transaction();
        let queued = match random.below(5) {
            0 => transaction.delete(table, &[Value::UInt(k)]),
            1 => {
                let email = draw(random, EMAIL);
                transaction.update(table, &[Value::UInt(k)], &[("email", email)])
            }
            _ => {
                let named: Vec<(&str, Value)> = std::iter::once(("k", Value::UInt(k)))
                    .chain((1..COLUMNS).map(|column| (NAMES[column], draw(random, column))))
                    .collect();
                transaction.write(table, &named)
            }
        };
        queued.expect("queued");
        let outcome = match transaction.execute(Commit::Yes) {
            Ok(_) => "committed",
            Err(ClientError::DuplicateKey { index: Some(_), .. }) => "duplicate",
            Err(error) if error.code() == Some(client::ErrorCode::NoSuchRow) => "no row",
            Err(ClientError::OutcomeUnknown { .. }) => "unknown",
            Err(error) if error.is_temporary() => {
                context.sleep(std::time::Duration::from_millis(5));
                "temporary"
            }
            Err(error) => panic!("an unexpected error: {error:?}"),
        };
        *outcomes.entry(outcome).or_default() += 1;
    }
    outcomes
}

/// Writes of four clients that move unique values between rows while
/// data node `victim` dies (its tcs' transactions taken over, its replicas routed around):
/// whatever each transaction's outcome, the hidden tables end equal to
/// the rows (the replica checker), no value is held twice, and every row
/// is found through each index by its values.
fn unique_values_survive_the_death_of(victim: u16, seed: u64) {
    const CLIENTS: u16 = 4;
    let work =
        move |client: u16, cluster: &client::Cluster, context: &sim::hosted::HostedContext| {
            // Client 0 creates the table, the others wait for it.
            if client == 0 {
                cluster.create_table(&table_definition()).expect("create");
            }
            let table = people_once_created(cluster, context);
            let mut random = XorShift::new(seed + u64::from(client));
            let outcomes = random_writes(cluster, &table, &mut random, 4_000_000, context);
            if client != 0 {
                return (outcomes, 0);
            }
            // The others have stopped by now.
            context.sleep(std::time::Duration::from_secs(1));
            // Every row is found by its values through each index.
            let rows = consistent_rows(cluster, &table);
            let mut checked = 0;
            for row in &rows.rows {
                let values = row.values();
                for (index, (name, columns)) in UNIQUE.iter().enumerate() {
                    if unique_key(values, index).is_none() {
                        continue;
                    }
                    let key: Vec<Value> = columns.iter().map(|&c| values[c].clone()).collect();
                    let mut transaction = cluster.transaction();
                    let found = transaction
                        .read_by_unique_index(&table, name, &key, LockMode::CommittedRead)
                        .expect("a lookup");
                    let found = found.map(|found| found.values()[K].clone());
                    assert_eq!(
                        found.as_ref(),
                        Some(&values[K]),
                        "seed {seed}: {name} {key:?}"
                    );
                    checked += 1;
                }
            }
            (outcomes, checked)
        };
    // Transactions of the dead node's tcs the survivors took over.
    let taken_over = |simulation: &sim::Simulation| -> u64 {
        let counters = simulation.tcs().map(|tc| tc.counters());
        counters
            .map(|counters| counters.takeover_commits + counters.takeover_aborts)
            .sum()
    };
    let (results, _, taken_over) = Harness::new(seed)
        .nodes(2, 2)
        .kill_at(signal::NodeId(victim), 1_500_000)
        .run_clients_then(CLIENTS, work, taken_over);
    let mut outcomes = BTreeMap::<&str, u32>::new();
    for (client_outcomes, _) in &results {
        for (outcome, count) in client_outcomes {
            *outcomes.entry(outcome).or_default() += count;
        }
    }
    let checked = results[0].1;
    eprintln!(
        "seed {seed}, node {victim} killed: {outcomes:?}, {taken_over} taken over, {checked} lookups"
    );
    assert!(taken_over > 0, "no transaction was in flight at the death");
    assert!(
        outcomes["committed"] > 50 && outcomes["duplicate"] > 5,
        "{outcomes:?}"
    );
    assert!(checked > 5);
}

#[test]
fn unique_indexes_survive_the_death_of_a_data_node() {
    unique_values_survive_the_death_of(3, 41);
}

#[test]
fn unique_indexes_survive_the_death_of_the_president() {
    unique_values_survive_the_death_of(2, 43);
}

/// A unique index dropped alone while two clients write rows whose values
/// repeat: after the drop no write is refused for its values, no tc, ldm
/// or dict holds its hidden table, the other unique index still holds
/// exactly the rows' values (the replica checker), and every block is at
/// the drop's revision.
#[test]
fn a_unique_index_dropped_under_writes_is_gone_and_the_other_one_kept() {
    const WRITERS: u16 = 2;
    let work = |client: u16, cluster: &client::Cluster, context: &sim::hosted::HostedContext| {
        if client == 0 {
            cluster.create_table(&table_definition()).expect("create");
        }
        let table = people_once_created(cluster, context);
        let hidden = table
            .unique_index_table("by_email")
            .expect("by_email's table")
            .def()
            .id;
        assert_eq!(hidden, 1, "by_email's table has the id the check looks at");
        if client == WRITERS {
            // The dropper, once the writers have been at it a while.
            context.sleep(std::time::Duration::from_secs(1));
            cluster
                .drop_index("people", "by_email")
                .expect("drop by_email");
            let dropped_at = context.now_us();
            cluster.invalidate_table("people");
            let fresh = cluster.table("people").expect("the table");
            assert!(fresh.unique_index_table("by_email").is_err());
            assert!(fresh.unique_index_table("by_a_b").is_ok());
            return (BTreeMap::new(), dropped_at, hidden);
        }
        let mut random = XorShift::new(51 + u64::from(client));
        let before = random_writes(cluster, &table, &mut random, 1_000_000, context);
        let after = random_writes(cluster, &table, &mut random, 3_000_000, context);
        let mut outcomes = before;
        for (outcome, count) in after {
            *outcomes.entry(outcome).or_default() += count;
        }
        if client == 0 {
            context.sleep(std::time::Duration::from_millis(500));
            // Emails repeat now that nothing keeps them unique.
            let rows = consistent_rows(cluster, &table);
            let emails: Vec<Value> = rows
                .rows
                .iter()
                .map(|row| canonical(&row.values()[EMAIL]))
                .filter(|email| !matches!(email, Value::Null))
                .collect();
            let distinct: std::collections::BTreeSet<String> =
                emails.iter().map(|email| format!("{email:?}")).collect();
            assert!(
                distinct.len() < emails.len(),
                "no email repeats after the drop: {emails:?}"
            );
        }
        (outcomes, 0, hidden)
    };
    // Every tc's, ldm's and dict's revision of the table, and whether any
    // ldm still holds the dropped index's hidden table.
    // The hidden table's id: the table's first free id after the base's.
    let hidden = 1;
    let after = move |simulation: &sim::Simulation| {
        let mut revisions = std::collections::BTreeSet::new();
        for tc in simulation.tcs() {
            revisions.extend(tc.table_versions());
        }
        for ldm in simulation.ldms() {
            revisions.extend(ldm.table_versions());
        }
        for dict in simulation.dicts() {
            revisions.extend(dict.table_versions());
        }
        (
            revisions,
            simulation
                .ldms()
                .map(|ldm| ldm.partitions_of(hidden))
                .collect::<Vec<_>>(),
        )
    };
    let (results, _, (revisions, held)) =
        Harness::new(53)
            .nodes(2, 2)
            .run_clients_then(WRITERS + 1, work, after);
    assert!(
        results[WRITERS as usize].1 > 0,
        "the drop finished while the writers wrote"
    );
    let mut outcomes = BTreeMap::<&str, u32>::new();
    for (client_outcomes, ..) in &results {
        for (outcome, count) in client_outcomes {
            *outcomes.entry(outcome).or_default() += count;
        }
    }
    eprintln!("{outcomes:?}; revisions {revisions:?}");
    assert!(outcomes["committed"] > 50, "{outcomes:?}");
    assert_eq!(
        revisions.len(),
        1,
        "every block at one revision of the one table: {revisions:?}"
    );
    assert!(
        held.iter().all(Vec::is_empty),
        "an ldm still holds the hidden table: {held:?}"
    );
}
