//! Scans through the real client (`sim::harness`), against a model:
//! random inserts, updates and deletes on a table with a two-column key (a
//! signed INT and a PAD SPACE VARCHAR) and a NULL-able value, on 2 nodes
//! with 2 replicas, each step followed by scans: one or two primary-key
//! ranges with random bounds (whole or first-column keys, inclusive,
//! exclusive or open) or the whole table, both directions, merged or not,
//! with random filters, projections, limits, small batches, and counts.

use client::{
    Access, ColumnDef, ColumnType, Commit, CompareOp, Filter, KeyRange, ScanOptions, TableDef,
    Value,
};
use sim::harness::Harness;
use std::collections::BTreeMap;
use std::ops::Bound;
use stdx::mix::XorShift;

/// The model's key: `a`, then `b` without trailing spaces (PAD SPACE: "x"
/// and "x  " are one key), compared as bytes.
type Key = (i32, Vec<u8>);

/// A bound in the model: `a`, and `b` when the bound gives both columns.
type ModelBound = Bound<(i32, Option<Vec<u8>>)>;

/// `partition_key`: the table's (empty: spread by the whole key; `[0]`:
/// by `a` alone, so a range pinning `a` reaches one partition).
fn table_definition(partition_key: Vec<u16>) -> TableDef {
    let column = |name: &str, column_type, nullable| ColumnDef {
        name: name.into(),
        column_type,
        nullable,
    };
    TableDef {
        indexes: Vec::new(),
        revision: 0,
        id: 0,
        version: 0,
        name: "ranges".into(),
        columns: vec![
            column("a", ColumnType::Int { unsigned: false }, false),
            column("b", ColumnType::VarChar(12), false),
            column("v", ColumnType::BigInt { unsigned: false }, true),
        ],
        primary_key: vec![0, 1],
        partitions: 0,
        partition_key,
    }
}

fn trimmed(bytes: &[u8]) -> Vec<u8> {
    let end = bytes
        .iter()
        .rposition(|&byte| byte != b' ')
        .map_or(0, |at| at + 1);
    bytes[..end].to_vec()
}

fn draw_key(random: &mut XorShift) -> (i32, Vec<u8>) {
    let a = random.below(9) as i32 - 4;
    let alphabet = [b'a', b'b', b' ', b'!'];
    let b: Vec<u8> = (0..random.below(4))
        .map(|_| alphabet[random.below(alphabet.len() as u64) as usize])
        .collect();
    (a, b)
}

fn draw_bound(random: &mut XorShift) -> (Bound<Vec<Value>>, ModelBound) {
    let (a, b) = draw_key(random);
    let whole = random.below(2) == 0;
    let values = if whole {
        vec![Value::Int(i64::from(a)), Value::Bytes(b.clone())]
    } else {
        vec![Value::Int(i64::from(a))]
    };
    let model = (a, whole.then(|| trimmed(&b)));
    match random.below(3) {
        0 => (Bound::Included(values), Bound::Included(model)),
        1 => (Bound::Excluded(values), Bound::Excluded(model)),
        _ => (Bound::Unbounded, Bound::Unbounded),
    }
}

/// Whether `key` is above (`low`) or below (`high`) a model bound on one or
/// two columns.
fn within(
    key: &Key,
    low: &Bound<(i32, Option<Vec<u8>>)>,
    high: &Bound<(i32, Option<Vec<u8>>)>,
) -> bool {
    let compare = |bound: &(i32, Option<Vec<u8>>)| match &bound.1 {
        Some(b) => (key.0, &key.1).cmp(&(bound.0, b)),
        None => key.0.cmp(&bound.0),
    };
    let above_low = match low {
        Bound::Included(bound) => compare(bound).is_ge(),
        Bound::Excluded(bound) => compare(bound).is_gt(),
        Bound::Unbounded => true,
    };
    let below_high = match high {
        Bound::Included(bound) => compare(bound).is_le(),
        Bound::Excluded(bound) => compare(bound).is_lt(),
        Bound::Unbounded => true,
    };
    above_low && below_high
}

/// How the model sees a filter: true, false or unknown (`None`).
type Condition = Box<dyn Fn(&Key, Option<i64>) -> Option<bool>>;

/// A random filter on v (NULL-able BIGINT) and b (VARCHAR), or none.
fn draw_filter(random: &mut XorShift) -> (Option<Filter>, Condition) {
    let c = random.below(9) as i64 - 4;
    match random.below(6) {
        0 => (
            Some(Filter::compare("v", CompareOp::Greater, Value::Int(c))),
            Box::new(move |_, v| v.map(|v| v > c)),
        ),
        1 => (
            Some(Filter::IsNull("v".into())),
            Box::new(|_, v| Some(v.is_none())),
        ),
        2 => (
            // NOT (v <= c) OR b LIKE 'a%'
            Some(Filter::Or(vec![
                Filter::Not(Box::new(Filter::compare(
                    "v",
                    CompareOp::LessOrEqual,
                    Value::Int(c),
                ))),
                Filter::like("b", "a%"),
            ])),
            Box::new(move |key, v| {
                let first = v.map(|v| v > c);
                let second = Some(key.1.first() == Some(&b'a'));
                match (first, second) {
                    (Some(true), _) | (_, Some(true)) => Some(true),
                    (Some(false), Some(false)) => Some(false),
                    _ => None,
                }
            }),
        ),
        3 => (
            // a < v AND b <> 'b' (PAD SPACE: "b " is "b")
            Some(Filter::And(vec![
                Filter::Columns {
                    left: "a".into(),
                    op: CompareOp::Less,
                    right: "v".into(),
                },
                Filter::compare("b", CompareOp::NotEqual, Value::Bytes(b"b".to_vec())),
            ])),
            Box::new(|key, v| {
                let first = v.map(|v| i64::from(key.0) < v);
                let second = Some(key.1 != b"b");
                match (first, second) {
                    (Some(false), _) | (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                }
            }),
        ),
        _ => (None, Box::new(|_, _| Some(true))),
    }
}

#[test]
fn scans_match_a_model_through_changes() {
    assert_eq!(scans_match_a_model(Vec::new()), 480);
}

/// With a partition key (`a`), the same answers, and a range whose bounds
/// agree on `a` reads one partition.
#[test]
fn scans_of_a_partitioned_table_match_a_model_and_prune() {
    assert_eq!(scans_match_a_model(vec![0]), 480);
}

fn scans_match_a_model(partition_key: Vec<u16>) -> usize {
    let partitioned = !partition_key.is_empty();
    Harness::new(21).nodes(2, 2).run(move |cluster, _| {
        cluster
            .create_table(&table_definition(partition_key.clone()))
            .expect("create");
        let table = cluster.table("ranges").expect("the table");
        let mut model: BTreeMap<Key, Option<i64>> = BTreeMap::new();
        let mut random = XorShift::new(21);
        let mut scans = 0;
        for step in 0..160 {
            // A change: insert a new key, update or delete a present one.
            let (a, b) = draw_key(&mut random);
            let key_values = [Value::Int(i64::from(a)), Value::Bytes(b.clone())];
            let key = (a, trimmed(&b));
            let mut transaction = cluster.transaction();
            match model.get(&key) {
                None => {
                    // Every fifth row's v is NULL.
                    let v = (step % 5 != 0).then_some(step % 13 - 6);
                    let row = [
                        ("a", key_values[0].clone()),
                        ("b", key_values[1].clone()),
                        ("v", v.map_or(Value::Null, Value::Int)),
                    ];
                    transaction.insert(&table, &row).unwrap();
                    model.insert(key, v);
                }
                Some(_) if random.below(2) == 0 => {
                    transaction.delete(&table, &key_values).unwrap();
                    model.remove(&key);
                }
                Some(_) => {
                    transaction
                        .update(&table, &key_values, &[("v", Value::Int(6 - step % 13))])
                        .unwrap();
                    model.insert(key, Some(6 - step % 13));
                }
            }
            transaction
                .execute(Commit::Yes)
                .expect("the change commits");

            for _ in 0..3 {
                let whole_table = random.below(5) == 0;
                let mut ranges = Vec::new();
                let mut model_ranges = Vec::new();
                for _ in 0..1 + random.below(2) {
                    let (low, model_low) = draw_bound(&mut random);
                    let (high, model_high) = draw_bound(&mut random);
                    ranges.push(KeyRange { low, high });
                    model_ranges.push((model_low, model_high));
                }
                let (filter, condition) = draw_filter(&mut random);
                let project = random.below(4) == 0;
                let options = ScanOptions {
                    descending: !whole_table && random.below(2) == 0,
                    ordered: random.below(4) != 0,
                    limit: (random.below(3) == 0).then(|| random.below(6)),
                    batch_rows: 1 + random.below(4) as u32,
                    filter,
                    columns: project.then(|| vec!["b".to_string(), "a".to_string()]),
                    ..ScanOptions::default()
                };
                let access = if whole_table {
                    Access::Table
                } else {
                    Access::PrimaryKey(&ranges)
                };
                // The model's answer, range by range.
                let taken = |key: &Key, v: &Option<i64>| condition(key, *v) == Some(true);
                let mut expected: Vec<(Key, Option<i64>)> = Vec::new();
                let in_ranges: Vec<Vec<(Key, Option<i64>)>> = if whole_table {
                    vec![model.iter().map(|(key, v)| (key.clone(), *v)).collect()]
                } else {
                    model_ranges
                        .iter()
                        .map(|(low, high)| {
                            let mut rows: Vec<_> = model
                                .iter()
                                .filter(|(key, _)| within(key, low, high))
                                .map(|(key, v)| (key.clone(), *v))
                                .collect();
                            if options.descending {
                                rows.reverse();
                            }
                            rows
                        })
                        .collect()
                };
                for rows in in_ranges {
                    expected.extend(rows.into_iter().filter(|(key, v)| taken(key, v)));
                }
                if random.below(5) == 0 {
                    let count = cluster.count(&table, access, &options).expect("the count");
                    assert_eq!(
                        count,
                        expected.len() as u64,
                        "step {step}: count {ranges:?} {options:?}"
                    );
                    scans += 1;
                    continue;
                }
                let found = cluster.scan(&table, access, &options).expect("the scan");
                // Both bounds give the same `a`: every row has it.
                let pinned = |range: &KeyRange| match (&range.low, &range.high) {
                    (
                        Bound::Included(low) | Bound::Excluded(low),
                        Bound::Included(high) | Bound::Excluded(high),
                    ) => low[0] == high[0],
                    _ => false,
                };
                if partitioned && !whole_table && ranges.iter().all(pinned) {
                    assert!(
                        found.partitions_scanned <= ranges.len() as u32,
                        "step {step}: {ranges:?} read {} partitions",
                        found.partitions_scanned
                    );
                }
                let mut keys: Vec<(Key, Option<i64>)> = found
                    .rows
                    .iter()
                    .map(|row| {
                        let a = row.get("a").and_then(Value::as_i64).unwrap() as i32;
                        let Some(Value::Bytes(b)) = row.get("b") else {
                            panic!("b is bytes")
                        };
                        let v = row.get("v").and_then(Value::as_i64);
                        ((a, trimmed(b)), v)
                    })
                    .collect();
                if project {
                    // Columns not asked for read as NULL.
                    for row in &mut expected {
                        row.1 = None;
                    }
                }
                if options.ordered && !whole_table {
                    // Range by range, each merged into key order; a limit
                    // cuts the whole.
                    if let Some(limit) = options.limit {
                        expected.truncate(limit as usize);
                    }
                    assert_eq!(keys, expected, "step {step}: {ranges:?} {options:?}");
                } else {
                    // Partition by partition: the same rows, in any order;
                    // a limit takes any of them.
                    keys.sort();
                    expected.sort();
                    match options.limit {
                        Some(limit) => {
                            assert_eq!(keys.len(), expected.len().min(limit as usize));
                            assert!(keys.iter().all(|row| expected.contains(row)));
                        }
                        None => assert_eq!(keys, expected, "step {step}: {ranges:?} {options:?}"),
                    }
                }
                scans += 1;
            }
        }
        // A range of one whole key reads one partition with one request.
        let (key, _) = model.iter().next().expect("rows");
        let values = vec![Value::Int(i64::from(key.0)), Value::Bytes(key.1.clone())];
        let one = KeyRange {
            low: Bound::Included(values.clone()),
            high: Bound::Included(values),
        };
        let found = cluster
            .scan_primary_key(&table, &one, &ScanOptions::default())
            .expect("the scan");
        assert_eq!(found.rows.len(), 1);
        assert_eq!(
            (found.partitions_scanned, found.requests),
            (1, 1),
            "pruned to one partition"
        );
        let all = cluster
            .scan_primary_key(&table, &KeyRange::all(), &ScanOptions::default())
            .expect("the scan");
        assert!(
            all.partitions_scanned > 1,
            "an open range reads every partition"
        );
        scans
    })
}
