//! INDEX_SCANREQ at one ldm: ranges over the primary key's ordered index,
//! both directions, resumed batch by batch while rows change, and the
//! refusals of bad requests.

use crate::tests::*;
use kernel::Context;
use signal::attr::{AttrIter, AttrWriter};
use signal::replica_check::decode_scan_batch;
use signal::scan_bounds::{self, ScanBounds};
use signal::signals::{index_scan_flags, IndexScanReq, OperationKind};
use signal::{BlockKind, BlockRef, ErrorCode, NodeId, Section, Signal};
use std::ops::Bound;
use stdx::mix::XorShift;

const API: BlockRef = BlockRef::new(NodeId(200), BlockKind::Api, 0);

/// Attribute entries of a bound on the key column (empty: none).
fn key_entries(k: Option<i32>) -> Vec<u8> {
    let Some(k) = k else { return Vec::new() };
    let mut buffer = [0u8; 16];
    let mut writer = AttrWriter::new(&mut buffer);
    writer.push(K, Some(&k.to_le_bytes())).unwrap();
    let length = writer.len();
    buffer[..length].to_vec()
}

/// One scan request and its answer: the keys and row ids of the rows and
/// whether it was the last batch, or the refusal.
struct Request {
    partition: u32,
    low: Bound<i32>,
    high: Bound<i32>,
    descending: bool,
    resume: Option<(i32, u32)>,
    max_rows: u32,
}

fn bound_entries(bound: Bound<i32>) -> (Vec<u8>, bool) {
    match bound {
        Bound::Included(k) => (key_entries(Some(k)), true),
        Bound::Excluded(k) => (key_entries(Some(k)), false),
        Bound::Unbounded => (Vec::new(), false),
    }
}

fn request_signal(b: &Bench, request: &Request) -> IndexScanReq {
    let (low, low_inclusive) = bound_entries(request.low);
    let (high, high_inclusive) = bound_entries(request.high);
    let resume = key_entries(request.resume.map(|(k, _)| k));
    let mut bounds = Vec::new();
    scan_bounds::encode(
        ScanBounds {
            low: &low,
            high: &high,
            resume: &resume,
        },
        &mut bounds,
    )
    .unwrap();
    let mut flags = 0;
    if low_inclusive {
        flags |= index_scan_flags::LOW_INCLUSIVE;
    }
    if high_inclusive {
        flags |= index_scan_flags::HIGH_INCLUSIVE;
    }
    if request.descending {
        flags |= index_scan_flags::DESCENDING;
    }
    if request.resume.is_some() {
        flags |= index_scan_flags::RESUME;
    }
    IndexScanReq {
        request_id: 5,
        table_id: TABLE_ID,
        table_version: b.table.version,
        partition: request.partition,
        flags,
        max_rows: request.max_rows,
        resume_row: request.resume.map_or(0, |(_, row)| row),
        bounds: section_of(b, &bounds),
    }
}

fn section_of(b: &Bench, bytes: &[u8]) -> Section {
    b.ctx.pool().copy_from(bytes).expect("the pool has room")
}

type Answer = Result<(Vec<(i32, u32)>, bool), ErrorCode>;

fn answer(b: &mut Bench, signal: IndexScanReq) -> Answer {
    b.deliver(API, signal);
    let sent = b.ctx.sent.pop().expect("an answer");
    assert!(b.ctx.sent.is_empty());
    assert_eq!(sent.envelope.to, API);
    match sent.envelope.signal {
        Signal::IndexScanConf(conf) => {
            let rows = decode_scan_batch(conf.rows.as_slice()).expect("a well-formed batch");
            let keys = rows
                .iter()
                .map(|row| {
                    let first = AttrIter::new(&row.values).next().unwrap().unwrap();
                    assert_eq!(first.column, K);
                    let k = i32::from_le_bytes(first.value.unwrap().try_into().unwrap());
                    (k, row.row_id)
                })
                .collect();
            Ok((keys, conf.done))
        }
        Signal::IndexScanRef(refusal) => Err(refusal.error),
        other => panic!("expected an index scan answer, got {other:?}"),
    }
}

/// Scans the whole range batch by batch, resuming after each batch's last
/// row; calls `between` after each batch (to change rows meanwhile).
fn scan_all(
    b: &mut Bench,
    mut request: Request,
    mut between: impl FnMut(&mut Bench),
) -> Vec<(i32, u32)> {
    let mut seen = Vec::new();
    loop {
        let signal = request_signal(b, &request);
        let (rows, done) = answer(b, signal).expect("a scan batch");
        assert!(rows.len() as u32 <= request.max_rows.max(1));
        seen.extend(&rows);
        if done {
            return seen;
        }
        request.resume = Some(*rows.last().expect("a batch that is not the last has rows"));
        between(b);
    }
}

fn keys_in(b: &Bench, partition: u32, live: &[i32], low: Bound<i32>, high: Bound<i32>) -> Vec<i32> {
    let mut keys: Vec<i32> = live
        .iter()
        .copied()
        .filter(|&k| b.route(k).0 == partition && (low, high).contains(&k))
        .collect();
    keys.sort_unstable();
    keys
}

trait Contains {
    fn contains(&self, k: &i32) -> bool;
}

impl Contains for (Bound<i32>, Bound<i32>) {
    fn contains(&self, k: &i32) -> bool {
        std::ops::RangeBounds::contains(self, k)
    }
}

#[test]
fn ranges_of_every_shape_match_the_rows_both_ways() {
    let mut b = Bench::with_memory(4 * MIB);
    let mut live = Vec::new();
    for k in (-60..60).filter(|k| k % 5 != 0) {
        b.insert((1000 + k) as u64, k, i64::from(k), None, None);
        live.push(k);
    }
    let mut random = XorShift::new(3);
    let draw = |random: &mut XorShift| -> Bound<i32> {
        let k = random.below(140) as i32 - 70;
        match random.below(3) {
            0 => Bound::Included(k),
            1 => Bound::Excluded(k),
            _ => Bound::Unbounded,
        }
    };
    for _ in 0..300 {
        let partition = random.below(2) as u32;
        let (low, high) = (draw(&mut random), draw(&mut random));
        let descending = random.below(2) == 0;
        let max_rows = 1 + random.below(9) as u32;
        let request = Request {
            partition,
            low,
            high,
            descending,
            resume: None,
            max_rows,
        };
        let found: Vec<i32> = scan_all(&mut b, request, |_| {})
            .iter()
            .map(|&(k, _)| k)
            .collect();
        let mut expected = keys_in(&b, partition, &live, low, high);
        if descending {
            expected.reverse();
        }
        assert_eq!(
            found, expected,
            "{low:?}..{high:?} descending {descending} by {max_rows}"
        );
    }
    b.assert_quiet();
}

/// Rows inserted and deleted between batches: every row that was there
/// for the whole scan is returned exactly once, nothing is returned twice,
/// and everything returned was there at some point.
#[test]
fn a_resumed_scan_sees_each_unchanged_row_once_while_rows_change() {
    let mut b = Bench::with_memory(4 * MIB);
    let mut live: Vec<i32> = Vec::new();
    let mut next_transaction = 1u64;
    for k in 0..200 {
        if k % 3 != 0 {
            b.insert(next_transaction, k, 0, None, None);
            next_transaction += 1;
            live.push(k);
        }
    }
    let mut random = XorShift::new(9);
    for round in 0..20 {
        let descending = round % 2 == 1;
        let before = live.clone();
        let mut ever = live.clone();
        let mut touched = Vec::new();
        let request = Request {
            partition: 0,
            low: Bound::Unbounded,
            high: Bound::Unbounded,
            descending,
            resume: None,
            max_rows: 7,
        };
        let found = scan_all(&mut b, request, |b| {
            for _ in 0..5 {
                let k = random.below(200) as i32;
                if let Some(at) = live.iter().position(|&x| x == k) {
                    b.write(next_transaction, OperationKind::Delete, k, None, gci(2));
                    live.swap_remove(at);
                } else {
                    b.insert(next_transaction, k, 1, None, None);
                    live.push(k);
                    ever.push(k);
                }
                next_transaction += 1;
                touched.push(k);
            }
        });
        let keys: Vec<i32> = found.iter().map(|&(k, _)| k).collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), keys.len(), "a row returned twice: {keys:?}");
        let mut ordered = keys.clone();
        if descending {
            ordered.reverse();
        }
        assert!(
            ordered.windows(2).all(|w| w[0] < w[1]),
            "out of order: {keys:?}"
        );
        for k in &keys {
            assert!(ever.contains(k), "row {k} was never there");
        }
        for k in before {
            if b.route(k).0 == 0 && !touched.contains(&k) {
                assert!(keys.contains(&k), "unchanged row {k} missed");
            }
        }
    }
    b.assert_quiet();
}

#[test]
fn bad_requests_are_refused_and_change_nothing() {
    let mut b = Bench::new();
    b.insert(1, 5, 5, None, None);
    let good = Request {
        partition: b.route(5).0,
        low: Bound::Included(0),
        high: Bound::Unbounded,
        descending: false,
        resume: None,
        max_rows: 10,
    };
    let ok = request_signal(&b, &good);
    assert_eq!(answer(&mut b, ok).map(|(rows, _)| rows.len()), Ok(1));

    let with = |b: &Bench, change: &dyn Fn(&mut IndexScanReq)| {
        let mut signal = request_signal(b, &good);
        change(&mut signal);
        signal
    };
    let bounds_of = |b: &Bench, low: &[u8], high: &[u8], resume: &[u8]| {
        let mut section = Vec::new();
        scan_bounds::encode(ScanBounds { low, high, resume }, &mut section).unwrap();
        section_of(b, &section)
    };
    let entries = |column: u16, value: Option<&[u8]>| {
        let mut buffer = [0u8; 32];
        let mut writer = AttrWriter::new(&mut buffer);
        writer.push(column, value).unwrap();
        let length = writer.len();
        buffer[..length].to_vec()
    };
    let cases: Vec<(&str, IndexScanReq, ErrorCode)> = vec![
        (
            "unknown flags",
            with(&b, &|s| s.flags = 0x80),
            ErrorCode::BadRequest,
        ),
        (
            "unknown table",
            with(&b, &|s| s.table_id = 99),
            ErrorCode::UnknownTable,
        ),
        (
            "stale version",
            with(&b, &|s| s.table_version = 7),
            ErrorCode::SchemaVersionMismatch,
        ),
        (
            "no such partition",
            with(&b, &|s| s.partition = 9),
            ErrorCode::UnknownTable,
        ),
        (
            "torn bounds",
            with(&b, &|s| s.bounds = section_of(&b, &[3, 0, 1])),
            ErrorCode::BadRequest,
        ),
        (
            "a bound on a column not in the index",
            with(&b, &|s| {
                s.bounds = bounds_of(&b, &entries(V, Some(&5i64.to_le_bytes())), &[], &[])
            }),
            ErrorCode::BadRequest,
        ),
        (
            "a bound of the wrong width",
            with(&b, &|s| {
                s.bounds = bounds_of(&b, &entries(K, Some(&[1, 2])), &[], &[])
            }),
            ErrorCode::BadValue,
        ),
        (
            "a NULL bound on a NOT NULL column",
            with(&b, &|s| {
                s.bounds = bounds_of(&b, &[], &entries(K, None), &[])
            }),
            ErrorCode::NullNotAllowed,
        ),
        (
            "two values for one key column",
            with(&b, &|s| {
                let mut twice = entries(K, Some(&1i32.to_le_bytes()));
                twice.extend(entries(K, Some(&2i32.to_le_bytes())));
                s.bounds = bounds_of(&b, &twice, &[], &[]);
            }),
            ErrorCode::BadRequest,
        ),
        (
            "RESUME without a resume key",
            with(&b, &|s| s.flags |= index_scan_flags::RESUME),
            ErrorCode::BadRequest,
        ),
        (
            "a resume key without RESUME",
            with(&b, &|s| {
                s.bounds = bounds_of(&b, &[], &[], &entries(K, Some(&1i32.to_le_bytes())))
            }),
            ErrorCode::BadRequest,
        ),
    ];
    for (what, signal, error) in cases {
        assert_eq!(answer(&mut b, signal), Err(error), "{what}");
    }
    // The read lease: a node whose lease ran out serves no scan.
    b.ldm.read_lease_until_ms = 0;
    let expired = request_signal(&b, &good);
    assert_eq!(answer(&mut b, expired), Err(ErrorCode::ReadLeaseExpired));
    b.ldm.read_lease_until_ms = u64::MAX;
    let ok = request_signal(&b, &good);
    assert_eq!(answer(&mut b, ok).map(|(rows, _)| rows.len()), Ok(1));
    b.assert_quiet();
}
