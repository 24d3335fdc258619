//! Secondary ordered indexes through the real client against a model
//! (docs/design/0023-secondary-indexes.md): a table with an index over
//! every column type (signed and unsigned integers, DOUBLE, CHAR and
//! VARCHAR with PAD SPACE, VARBINARY, NULL-able or not, one and two
//! columns) on 2 nodes with 2 replicas; random inserts, updates and
//! deletes, one to three a transaction, each followed by scans of random
//! indexes with random bounds on one or two leading columns (NULL bounds
//! too), both directions, merged or not, with filters, projections and
//! limits, and counts: half of them from inside the transaction before
//! it commits or rolls back, which must see its own writes (design 0035),
//! the others after it committed. At
//! the end the replica checker compares every replica's indexes with its
//! rows.

use client::{
    Access, ColumnDef, ColumnType, Commit, CompareOp, Filter, IndexDef, KeyRange, Row, ScanOptions,
    TableDef, Value,
};
use sim::harness::Harness;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::ops::Bound;
use stdx::mix::XorShift;

/// Column ids.
const K: usize = 0;
const I: usize = 1;
const U: usize = 2;
const D: usize = 3;
const C: usize = 4;
const VC: usize = 5;
const VB: usize = 6;
const NAMES: [&str; 7] = ["k", "i", "u", "d", "c", "vc", "vb"];
const TYPES: [ColumnType; 7] = [
    ColumnType::BigInt { unsigned: true },
    ColumnType::Int { unsigned: false },
    ColumnType::Int { unsigned: true },
    ColumnType::Double,
    ColumnType::Char(4),
    ColumnType::VarChar(6),
    ColumnType::VarBinary(4),
];
/// The indexes: name and columns.
const INDEXES: [(&str, &[usize]); 5] = [
    ("by_i", &[I]),
    ("by_d_u", &[D, U]),
    ("by_c", &[C]),
    ("by_vc_i", &[VC, I]),
    ("by_vb", &[VB]),
];

fn table_definition() -> TableDef {
    TableDef {
        id: 0,
        version: 0,
        name: "shapes".into(),
        columns: (0..7)
            .map(|column| ColumnDef {
                name: NAMES[column].into(),
                column_type: TYPES[column],
                // k, u and vc are NOT NULL.
                nullable: !matches!(column, K | U | VC),
            })
            .collect(),
        primary_key: vec![0],
        partitions: 0,
        revision: 0,
        indexes: INDEXES
            .iter()
            .enumerate()
            .map(|(at, (name, columns))| IndexDef {
                id: at as u32 + 1,
                name: (*name).into(),
                columns: columns.iter().map(|&column| column as u16).collect(),
                unique: None,
            })
            .collect(),
        partition_key: Vec::new(),
    }
}

/// A random value for `column` (NULL sometimes where allowed).
fn draw(random: &mut XorShift, column: usize) -> Value {
    let nullable = !matches!(column, K | U | VC);
    if nullable && random.below(5) == 0 {
        return Value::Null;
    }
    let text = |random: &mut XorShift, most: u64| {
        // A tab sorts below the padding space, '!' above it.
        let alphabet = [b'a', b'b', b' ', b'\t', b'!'];
        Value::Bytes(
            (0..random.below(most + 1))
                .map(|_| alphabet[random.below(5) as usize])
                .collect(),
        )
    };
    match column {
        I => Value::Int(random.below(7) as i64 - 3),
        U => Value::UInt(random.below(4)),
        D => Value::Double([-1.5, -0.0, 0.0, 2.25, 1e10][random.below(5) as usize]),
        // CHAR keeps no trailing spaces (MySQL's CHAR).
        C => match text(random, 3) {
            Value::Bytes(mut bytes) => {
                while bytes.last() == Some(&b' ') {
                    bytes.pop();
                }
                Value::Bytes(bytes)
            }
            other => other,
        },
        VC => text(random, 4),
        VB => Value::Bytes(
            (0..random.below(3))
                .map(|_| random.below(3) as u8)
                .collect(),
        ),
        _ => unreachable!(),
    }
}

/// PAD SPACE: as if the shorter were padded with spaces.
fn padded(a: &[u8], b: &[u8]) -> Ordering {
    let length = a.len().max(b.len());
    let at = |s: &[u8], i: usize| s.get(i).copied().unwrap_or(b' ');
    (0..length)
        .map(|i| at(a, i).cmp(&at(b, i)))
        .find(|order| *order != Ordering::Equal)
        .unwrap_or(Ordering::Equal)
}

/// How two values of `column` compare in the indexes' order.
fn compare(column: usize, a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Null, _) => Ordering::Less,
        (_, Value::Null) => Ordering::Greater,
        (Value::Int(a), Value::Int(b)) => a.cmp(b),
        (Value::UInt(a), Value::UInt(b)) => a.cmp(b),
        (Value::Double(a), Value::Double(b)) => a.partial_cmp(b).expect("no NaN"),
        (Value::Bytes(a), Value::Bytes(b)) if matches!(column, C | VC) => padded(a, b),
        (Value::Bytes(a), Value::Bytes(b)) => a.cmp(b),
        other => panic!("values of different kinds: {other:?}"),
    }
}

/// How a row's index key compares with a bound's values (a leading run).
fn compare_prefix(columns: &[usize], row: &[Value], bound: &[Value]) -> Ordering {
    columns
        .iter()
        .zip(bound)
        .map(|(&column, value)| compare(column, &row[column], value))
        .find(|order| *order != Ordering::Equal)
        .unwrap_or(Ordering::Equal)
}

fn within(columns: &[usize], row: &[Value], range: &KeyRange) -> bool {
    let above = match &range.low {
        Bound::Included(low) => compare_prefix(columns, row, low).is_ge(),
        Bound::Excluded(low) => compare_prefix(columns, row, low).is_gt(),
        Bound::Unbounded => true,
    };
    let below = match &range.high {
        Bound::Included(high) => compare_prefix(columns, row, high).is_le(),
        Bound::Excluded(high) => compare_prefix(columns, row, high).is_lt(),
        Bound::Unbounded => true,
    };
    above && below
}

fn draw_bound(random: &mut XorShift, columns: &[usize]) -> Bound<Vec<Value>> {
    let count = 1 + random.below(columns.len() as u64) as usize;
    let values: Vec<Value> = columns[..count]
        .iter()
        .map(|&column| draw(random, column))
        .collect();
    match random.below(3) {
        0 => Bound::Included(values),
        1 => Bound::Excluded(values),
        _ => Bound::Unbounded,
    }
}

fn values_of(row: &Row) -> Vec<Value> {
    (0..7).map(|column| row.values()[column].clone()).collect()
}

fn key_of(row: &[Value]) -> u64 {
    row[K].as_u64().expect("k")
}

#[test]
fn index_scans_match_a_model_through_changes() {
    let scans = Harness::new(23).nodes(2, 2).run(|cluster, _| {
        cluster.create_table(&table_definition()).expect("create");
        let table = cluster.table("shapes").expect("the table");
        let mut model: BTreeMap<u64, Vec<Value>> = BTreeMap::new();
        let mut random = XorShift::new(23);
        let mut scans = 0;
        for step in 0..150 {
            // One to three changes in one transaction (a row may change
            // twice), seen by the scans below either from inside the
            // transaction before it ends, or once it committed.
            let mut own = model.clone();
            let mut transaction = cluster.transaction();
            for _ in 0..1 + random.below(3) {
                let k = random.below(40);
                match own.get(&k) {
                    Some(_) if random.below(3) == 0 => {
                        transaction.delete(&table, &[Value::UInt(k)]).unwrap();
                        own.remove(&k);
                    }
                    Some(row) => {
                        // Change one or two columns, indexed or not.
                        let mut row = row.clone();
                        let mut changes = Vec::new();
                        let first = 1 + random.below(6) as usize;
                        let second = 1 + (first + random.below(5) as usize) % 6;
                        for column in [first, second]
                            .into_iter()
                            .take(1 + random.below(2) as usize)
                        {
                            row[column] = draw(&mut random, column);
                            changes.push((NAMES[column], row[column].clone()));
                        }
                        transaction
                            .update(&table, &[Value::UInt(k)], &changes)
                            .unwrap();
                        own.insert(k, row);
                    }
                    None => {
                        let mut row = vec![Value::UInt(k)];
                        row.extend((1..7).map(|column| draw(&mut random, column)));
                        let named: Vec<(&str, Value)> = (0..7)
                            .map(|column| (NAMES[column], row[column].clone()))
                            .collect();
                        transaction.insert(&table, &named).unwrap();
                        own.insert(k, row);
                    }
                }
            }
            let inside = random.below(2) == 0;
            if inside {
                // Sometimes the first scan executes what is queued.
                if random.below(2) == 0 {
                    transaction
                        .execute(Commit::No)
                        .expect("the changes prepare");
                }
            } else {
                transaction
                    .execute(Commit::Yes)
                    .expect("the changes commit");
                model = own.clone();
            }
            let seen = if inside { &own } else { &model };

            for _ in 0..3 {
                let (name, columns) = INDEXES[random.below(INDEXES.len() as u64) as usize];
                let range = KeyRange {
                    low: draw_bound(&mut random, columns),
                    high: draw_bound(&mut random, columns),
                };
                // A filter on a column of no index, sometimes.
                let filter_u = (random.below(3) == 0).then(|| random.below(4));
                let options = ScanOptions {
                    descending: random.below(2) == 0,
                    ordered: random.below(4) != 0,
                    limit: (random.below(4) == 0).then(|| random.below(5)),
                    batch_rows: 1 + random.below(3) as u32,
                    filter: filter_u
                        .map(|u| Filter::compare("u", CompareOp::LessOrEqual, Value::UInt(u))),
                    columns: (random.below(4) == 0)
                        .then(|| vec!["k".to_string(), "vb".to_string()]),
                    ..ScanOptions::default()
                };
                let ranges = [range.clone()];
                let access = Access::Index(name, &ranges);
                let order = |a: &Vec<Value>, b: &Vec<Value>| {
                    columns
                        .iter()
                        .map(|&column| compare(column, &a[column], &b[column]))
                        .find(|order| *order != Ordering::Equal)
                        .unwrap_or(Ordering::Equal)
                };
                let mut expected: Vec<Vec<Value>> = seen
                    .values()
                    .filter(|row| within(columns, row, &range))
                    .filter(|row| filter_u.is_none_or(|u| row[U].as_u64().unwrap() <= u))
                    .cloned()
                    .collect();
                expected.sort_by(|a, b| order(a, b).then(key_of(a).cmp(&key_of(b))));
                if options.descending {
                    expected.reverse();
                }
                if random.below(5) == 0 {
                    let count = match inside {
                        true => transaction.count(&table, access, &options),
                        false => cluster.count(&table, access, &options),
                    }
                    .expect("count");
                    assert_eq!(
                        count,
                        expected.len() as u64,
                        "step {step}: count {name} {range:?}"
                    );
                    scans += 1;
                    continue;
                }
                let found = match inside {
                    true => transaction.scan(&table, access, &options),
                    false => cluster.scan(&table, access, &options),
                }
                .expect("the scan");
                let found: Vec<Vec<Value>> = found.rows.iter().map(values_of).collect();
                let limit = options.limit.map_or(usize::MAX, |limit| limit as usize);
                let context =
                    format!("step {step} (inside {inside}): {name} {range:?} {options:?}");
                assert_eq!(found.len(), expected.len().min(limit), "{context}");
                // Every row found is one the model has, with the columns
                // asked for (the others NULL).
                for row in &found {
                    let k = key_of(row);
                    let mut model_row = seen[&k].clone();
                    if options.columns.is_some() {
                        for column in [I, U, D, C, VC] {
                            if !(options.ordered && columns.contains(&column)) {
                                model_row[column] = Value::Null;
                            }
                        }
                    }
                    assert_eq!(row, &model_row, "{context}: row {k}");
                }
                if options.ordered {
                    // In index order (rows of equal keys in any order), and
                    // the same keys as the model's first rows.
                    let direction = |order: Ordering| {
                        if options.descending {
                            order.reverse()
                        } else {
                            order
                        }
                    };
                    for pair in found.windows(2) {
                        assert!(
                            direction(order(&pair[0], &pair[1])) != Ordering::Greater,
                            "{context}: out of order"
                        );
                    }
                    for (row, model_row) in found.iter().zip(&expected) {
                        assert_eq!(order(row, model_row), Ordering::Equal, "{context}");
                    }
                }
                // Each row once, and every row when there is no limit.
                let mut found_keys: Vec<u64> = found.iter().map(|row| key_of(row)).collect();
                found_keys.sort_unstable();
                let before = found_keys.len();
                found_keys.dedup();
                assert_eq!(found_keys.len(), before, "{context}: a row twice");
                let mut expected_keys: Vec<u64> = expected.iter().map(|row| key_of(row)).collect();
                expected_keys.sort_unstable();
                if options.limit.is_none() {
                    assert_eq!(found_keys, expected_keys, "{context}");
                } else {
                    assert!(
                        found_keys
                            .iter()
                            .all(|k| expected_keys.binary_search(k).is_ok()),
                        "{context}: a row outside the range"
                    );
                }
                scans += 1;
            }
            if inside {
                // Rolled back one time in four, else committed: the
                // committed rows become what the transaction saw.
                if random.below(4) == 0 {
                    transaction.rollback().expect("the rollback");
                } else {
                    transaction
                        .execute(Commit::Yes)
                        .expect("the changes commit");
                    model = own;
                }
            }
        }
        let report = cluster.check_replicas().expect("the replica check");
        assert!(report.is_consistent(), "{report}");
        scans
    });
    assert_eq!(scans, 450);
}
