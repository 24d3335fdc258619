//! Range scans over the primary key's ordered index through the real
//! client (`sim::harness`), against a model: random inserts, updates and
//! deletes on a table with a two-column key (a signed INT and a PAD SPACE
//! VARCHAR), on 2 nodes with 2 replicas, each step followed by scans with
//! random bounds (whole or first-column keys, inclusive, exclusive or
//! open), both directions, merged or not, with limits and small batches.

use client::{ColumnDef, ColumnType, Commit, KeyRange, ScanOptions, TableDef, Value};
use sim::harness::Harness;
use std::collections::BTreeMap;
use std::ops::Bound;
use stdx::mix::XorShift;

/// The model's key: `a`, then `b` without trailing spaces (PAD SPACE: "x"
/// and "x  " are one key), compared as bytes.
type Key = (i32, Vec<u8>);

/// A bound in the model: `a`, and `b` when the bound gives both columns.
type ModelBound = Bound<(i32, Option<Vec<u8>>)>;

fn table_definition() -> TableDef {
    let column = |name: &str, column_type, nullable| ColumnDef {
        name: name.into(),
        column_type,
        nullable,
    };
    TableDef {
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

#[test]
fn range_scans_match_a_model_through_changes() {
    let scans = Harness::new(21).nodes(2, 2).run(|cluster, _| {
        cluster.create_table(&table_definition()).expect("create");
        let table = cluster.table("ranges").expect("the table");
        let mut model: BTreeMap<Key, i64> = BTreeMap::new();
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
                    let row = [
                        ("a", key_values[0].clone()),
                        ("b", key_values[1].clone()),
                        ("v", Value::Int(step)),
                    ];
                    transaction.insert(&table, &row).unwrap();
                    model.insert(key, step);
                }
                Some(_) if random.below(2) == 0 => {
                    transaction.delete(&table, &key_values).unwrap();
                    model.remove(&key);
                }
                Some(_) => {
                    transaction
                        .update(&table, &key_values, &[("v", Value::Int(-step))])
                        .unwrap();
                    model.insert(key, -step);
                }
            }
            transaction
                .execute(Commit::Yes)
                .expect("the change commits");

            for _ in 0..3 {
                let (low, model_low) = draw_bound(&mut random);
                let (high, model_high) = draw_bound(&mut random);
                let options = ScanOptions {
                    descending: random.below(2) == 0,
                    ordered: random.below(4) != 0,
                    limit: (random.below(3) == 0).then(|| random.below(6)),
                    batch_rows: 1 + random.below(4) as u32,
                };
                let range = KeyRange { low, high };
                let found = cluster
                    .scan_primary_key(&table, &range, &options)
                    .expect("the scan");
                let mut keys: Vec<(Key, i64)> = found
                    .rows
                    .iter()
                    .map(|row| {
                        let a = row.get("a").and_then(Value::as_i64).unwrap() as i32;
                        let Some(Value::Bytes(b)) = row.get("b") else {
                            panic!("b is bytes")
                        };
                        let v = row.get("v").and_then(Value::as_i64).unwrap();
                        ((a, trimmed(b)), v)
                    })
                    .collect();
                let mut expected: Vec<(Key, i64)> = model
                    .iter()
                    .filter(|(key, _)| within(key, &model_low, &model_high))
                    .map(|(key, v)| (key.clone(), *v))
                    .collect();
                if options.descending {
                    expected.reverse();
                }
                if options.ordered {
                    if let Some(limit) = options.limit {
                        expected.truncate(limit as usize);
                    }
                    assert_eq!(keys, expected, "step {step}: {range:?} {options:?}");
                } else {
                    // Partition by partition: the same rows, in any order of
                    // partitions, each partition's in key order (checked by
                    // the ldm tests); a limit takes any of them.
                    keys.sort();
                    expected.sort();
                    match options.limit {
                        Some(limit) => {
                            assert_eq!(keys.len(), expected.len().min(limit as usize));
                            assert!(keys.iter().all(|row| expected.contains(row)));
                        }
                        None => assert_eq!(keys, expected, "step {step}: {range:?} {options:?}"),
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
    });
    assert_eq!(scans, 480);
}
