//! SCAN_REQ at one ldm: ranges over the primary key's ordered index and
//! full scans in row-id order, both resumed batch by batch while rows
//! change; filters, projections and counts against a model; the bound on
//! rows looked at per batch; and the refusals of bad requests.

use super::EXAMINE_PER_BATCH;
use crate::tests::*;
use kernel::Context;
use signal::attr::{AttrIter, AttrWriter};
use signal::replica_check::decode_scan_batch;
use signal::scan_bounds::{self, ScanBounds};
use signal::scan_program::{CompareOp, ProgramWriter};
use signal::signals::{scan_flags, OperationKind, ScanReq};
use signal::{BlockKind, BlockRef, ErrorCode, NodeId, Section, Signal, TransactionId};
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

/// One scan request.
#[derive(Clone)]
struct Request {
    partition: u32,
    /// A full scan in row-id order (no bounds) instead of the index.
    row_order: bool,
    low: Bound<i32>,
    high: Bound<i32>,
    descending: bool,
    /// Where the last answer said to resume: its key entries and row id.
    resume: Option<(Vec<u8>, u32)>,
    max_rows: u32,
    max_bytes: u32,
    program: Vec<u8>,
    count: bool,
    /// The transaction whose own writes the scan sees (0: none).
    transaction_id: TransactionId,
}

impl Request {
    fn index(partition: u32, low: Bound<i32>, high: Bound<i32>) -> Request {
        Request {
            partition,
            row_order: false,
            low,
            high,
            descending: false,
            resume: None,
            max_rows: 100,
            max_bytes: 0,
            program: ProgramWriter::new(&[]).finish().unwrap(),
            count: false,
            transaction_id: TransactionId(0),
        }
    }

    fn full(partition: u32) -> Request {
        Request {
            row_order: true,
            ..Request::index(partition, Bound::Unbounded, Bound::Unbounded)
        }
    }
}

fn bound_entries(bound: Bound<i32>) -> (Vec<u8>, bool) {
    match bound {
        Bound::Included(k) => (key_entries(Some(k)), true),
        Bound::Excluded(k) => (key_entries(Some(k)), false),
        Bound::Unbounded => (Vec::new(), false),
    }
}

fn request_signal(b: &Bench, request: &Request) -> ScanReq {
    let mut flags = 0;
    if request.resume.is_some() {
        flags |= scan_flags::RESUME;
    }
    if request.count {
        flags |= scan_flags::COUNT;
    }
    let mut bounds = Vec::new();
    if !request.row_order {
        let (low, low_inclusive) = bound_entries(request.low);
        let (high, high_inclusive) = bound_entries(request.high);
        let resume = request.resume.as_ref().map_or(&[][..], |(key, _)| key);
        scan_bounds::encode(
            ScanBounds {
                low: &low,
                high: &high,
                resume,
            },
            &mut bounds,
        )
        .unwrap();
        if low_inclusive {
            flags |= scan_flags::LOW_INCLUSIVE;
        }
        if high_inclusive {
            flags |= scan_flags::HIGH_INCLUSIVE;
        }
        if request.descending {
            flags |= scan_flags::DESCENDING;
        }
    }
    ScanReq {
        request_id: 5,
        table_id: TABLE_ID,
        table_version: b.table.version,
        partition: request.partition,
        index: if request.row_order {
            scan_flags::ROW_ORDER
        } else {
            0
        },
        flags,
        max_rows: request.max_rows,
        max_bytes: request.max_bytes,
        resume_row: request.resume.as_ref().map_or(0, |&(_, row)| row),
        transaction_id: request.transaction_id,
        bounds: section_of(b, &bounds),
        program: section_of(b, &request.program),
    }
}

fn section_of(b: &Bench, bytes: &[u8]) -> Section {
    b.ctx.pool().copy_from(bytes).expect("the pool has room")
}

/// An answer: each row's values (attribute entries) and row id, and the
/// rest of the conf.
#[derive(Debug)]
struct Answer {
    rows: Vec<(Vec<u8>, u32)>,
    done: bool,
    matched: u32,
    examined: u32,
    resume: (Vec<u8>, u32),
}

/// The INT value of `column` in attribute entries, if there.
fn value_of(values: &[u8], column: u16) -> Option<i32> {
    AttrIter::new(values)
        .map(Result::unwrap)
        .find(|entry| entry.column == column)
        .map(|entry| i32::from_le_bytes(entry.value.unwrap().try_into().unwrap()))
}

fn answer(b: &mut Bench, signal: ScanReq) -> Result<Answer, ErrorCode> {
    b.deliver(API, signal);
    let sent = b.ctx.sent.pop().expect("an answer");
    assert!(b.ctx.sent.is_empty());
    assert_eq!(sent.envelope.to, API);
    match sent.envelope.signal {
        Signal::ScanConf(conf) => {
            let rows = decode_scan_batch(conf.rows.as_slice())
                .expect("a well-formed batch")
                .into_iter()
                .map(|row| (row.values, row.row_id))
                .collect();
            Ok(Answer {
                rows,
                done: conf.done,
                matched: conf.matched,
                examined: conf.examined,
                resume: (conf.resume_key.as_slice().to_vec(), conf.resume_row),
            })
        }
        Signal::ScanRef(refusal) => Err(refusal.error),
        other => panic!("expected a scan answer, got {other:?}"),
    }
}

/// Scans to the end batch by batch, resuming where each answer says;
/// calls `between` after each batch (to change rows meanwhile). The rows
/// and the sum of the batches' `matched`.
fn scan_all(
    b: &mut Bench,
    mut request: Request,
    mut between: impl FnMut(&mut Bench),
) -> (Vec<(Vec<u8>, u32)>, u64) {
    let mut seen = Vec::new();
    let mut matched = 0;
    loop {
        let signal = request_signal(b, &request);
        let batch = answer(b, signal).expect("a scan batch");
        assert!(batch.rows.len() as u32 <= request.max_rows.max(1));
        assert!(batch.examined <= EXAMINE_PER_BATCH);
        if !request.count {
            assert_eq!(batch.matched as usize, batch.rows.len());
        }
        matched += u64::from(batch.matched);
        seen.extend(batch.rows);
        if batch.done {
            return (seen, matched);
        }
        request.resume = Some(batch.resume);
        between(b);
    }
}

/// The keys of a scan to the end.
fn scan_keys(b: &mut Bench, request: Request) -> Vec<i32> {
    let (rows, _) = scan_all(b, request, |_| {});
    rows.iter()
        .map(|(values, _)| value_of(values, K).expect("rows carry their key"))
        .collect()
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
            descending,
            max_rows,
            ..Request::index(partition, low, high)
        };
        let found = scan_keys(&mut b, request);
        let mut expected = keys_in(&b, partition, &live, low, high);
        if descending {
            expected.reverse();
        }
        assert_eq!(
            found, expected,
            "{low:?}..{high:?} descending {descending} by {max_rows}"
        );
    }
    // A full scan returns the partition's rows, each once.
    for partition in 0..2 {
        let mut found = scan_keys(
            &mut b,
            Request {
                max_rows: 7,
                ..Request::full(partition)
            },
        );
        found.sort_unstable();
        let expected = keys_in(&b, partition, &live, Bound::Unbounded, Bound::Unbounded);
        assert_eq!(found, expected, "full scan of partition {partition}");
    }
    b.assert_quiet();
}

/// Rows inserted and deleted between batches: every row that was there
/// for the whole scan is returned exactly once, nothing is returned twice,
/// and everything returned was there at some point. For index scans both
/// ways and for full scans; with a filter that drops some rows, so that
/// batches end on rows they did not return.
#[test]
fn a_resumed_scan_sees_each_unchanged_row_once_while_rows_change() {
    let mut b = Bench::with_memory(4 * MIB);
    let mut live: Vec<i32> = Vec::new();
    let mut next_transaction = 1u64;
    for k in 0..200 {
        if k % 3 != 0 {
            b.insert(next_transaction, k, i64::from(k % 4), None, None);
            next_transaction += 1;
            live.push(k);
        }
    }
    let mut random = XorShift::new(9);
    for round in 0..30 {
        let descending = round % 3 == 1;
        let row_order = round % 3 == 2;
        let filtered = round % 2 == 1;
        let before = live.clone();
        let mut ever = live.clone();
        let mut touched = Vec::new();
        let mut program = ProgramWriter::new(&[]);
        if filtered {
            // v <> 3: inserts here write v 1, the first rows k % 4.
            program.compare(CompareOp::NotEqual, V, Some(&3i64.to_le_bytes()));
        }
        let request = Request {
            row_order,
            descending,
            max_rows: 7,
            program: program.finish().unwrap(),
            ..Request::index(0, Bound::Unbounded, Bound::Unbounded)
        };
        let (rows, _) = scan_all(&mut b, request, |b| {
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
        let keys: Vec<i32> = rows
            .iter()
            .map(|(values, _)| value_of(values, K).unwrap())
            .collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), keys.len(), "a row returned twice: {keys:?}");
        if !row_order {
            let mut ordered = keys.clone();
            if descending {
                ordered.reverse();
            }
            assert!(
                ordered.windows(2).all(|w| w[0] < w[1]),
                "out of order: {keys:?}"
            );
        }
        for k in &keys {
            assert!(ever.contains(k), "row {k} was never there");
        }
        for k in before {
            let dropped = filtered && k % 4 == 3;
            if b.route(k).0 == 0 && !touched.contains(&k) && !dropped {
                assert!(keys.contains(&k), "unchanged row {k} missed");
            }
        }
    }
    b.assert_quiet();
}

/// What the model says of a row (v, s): true, false or unknown (`None`).
type Condition = Box<dyn Fn(i64, Option<&[u8]>) -> Option<bool>>;

/// One random condition on v (BIGINT) or s (VARCHAR, NULL-able), written
/// into `program`, and what it says of a row (k, v, s): `None` unknown.
fn random_condition(random: &mut XorShift, program: &mut ProgramWriter, depth: u32) -> Condition {
    let ops = [
        CompareOp::Equal,
        CompareOp::NotEqual,
        CompareOp::Less,
        CompareOp::LessOrEqual,
        CompareOp::Greater,
        CompareOp::GreaterOrEqual,
    ];
    match random.below(if depth > 2 { 4 } else { 7 }) {
        0 | 1 => {
            let op = ops[random.below(6) as usize];
            let constant = random.below(20) as i64 - 10;
            program.compare(op, V, Some(&constant.to_le_bytes()));
            Box::new(move |v, _| Some(op.holds(v.cmp(&constant))))
        }
        2 => {
            let op = ops[random.below(6) as usize];
            let constant = [b'a' + random.below(4) as u8];
            program.compare(op, S, Some(&constant));
            Box::new(move |_, s| s.map(|s| op.holds(s.cmp(&constant[..]))))
        }
        3 => {
            if random.below(2) == 0 {
                program.is_null(S);
                Box::new(|_, s| Some(s.is_none()))
            } else {
                let first = b'a' + random.below(4) as u8;
                program.like(S, &[first, b'%']);
                Box::new(move |_, s| s.map(|s| s.first() == Some(&first)))
            }
        }
        4 => {
            program.not();
            let inner = random_condition(random, program, depth + 1);
            Box::new(move |v, s| inner(v, s).map(|t| !t))
        }
        kind => {
            let parts = 1 + random.below(3) as u16;
            if kind == 5 {
                program.and(parts);
            } else {
                program.or(parts);
            }
            let inner: Vec<_> = (0..parts)
                .map(|_| random_condition(random, program, depth + 1))
                .collect();
            let and = kind == 5;
            Box::new(move |v, s| {
                let truths: Vec<Option<bool>> = inner.iter().map(|part| part(v, s)).collect();
                let (stop, neutral) = if and { (false, true) } else { (true, false) };
                if truths.contains(&Some(stop)) {
                    Some(stop)
                } else if truths.contains(&None) {
                    None
                } else {
                    Some(neutral)
                }
            })
        }
    }
}

/// Random filters, projections and counts over both walks, against the
/// rows the test wrote.
#[test]
fn filters_projections_and_counts_match_a_model() {
    let mut b = Bench::with_memory(4 * MIB);
    let mut model: Vec<(i32, i64, Option<Vec<u8>>)> = Vec::new();
    let mut random = XorShift::new(21);
    for k in 0..300 {
        let v = random.below(20) as i64 - 10;
        let s = match random.below(5) {
            0 => None,
            n => Some(vec![b'a' + (n - 1) as u8, b'a' + random.below(3) as u8]),
        };
        b.insert(k as u64 + 1, k, v, s.as_deref(), None);
        model.push((k, v, s));
    }
    for round in 0..200 {
        let partition = random.below(2) as u32;
        let projection: Vec<u16> = match random.below(3) {
            0 => Vec::new(),
            1 => vec![K],
            _ => vec![S, K],
        };
        let mut program = ProgramWriter::new(&projection);
        let condition = random_condition(&mut random, &mut program, 0);
        let count = random.below(4) == 0;
        let row_order = random.below(2) == 0;
        let request = Request {
            row_order,
            max_rows: 1 + random.below(20) as u32,
            program: program.finish().unwrap(),
            count,
            ..Request::index(partition, Bound::Unbounded, Bound::Unbounded)
        };
        let (rows, matched) = scan_all(&mut b, request, |_| {});
        let mut expected: Vec<i32> = model
            .iter()
            .filter(|(k, v, s)| {
                b.route(*k).0 == partition && condition(*v, s.as_deref()) == Some(true)
            })
            .map(|(k, _, _)| *k)
            .collect();
        expected.sort_unstable();
        assert_eq!(matched, expected.len() as u64, "round {round}: count");
        if count {
            assert!(rows.is_empty(), "a count returns no rows");
            continue;
        }
        let mut keys = Vec::new();
        for (values, _) in &rows {
            let columns: Vec<u16> = AttrIter::new(values).map(|e| e.unwrap().column).collect();
            let wanted = if projection.is_empty() {
                vec![K, V, S, B]
            } else {
                projection.clone()
            };
            assert_eq!(columns, wanted, "round {round}: the projected columns");
            keys.push(value_of(values, K).unwrap());
        }
        if row_order {
            keys.sort_unstable();
        }
        assert_eq!(keys, expected, "round {round}");
    }
    b.assert_quiet();
}

/// A filter that takes nothing still ends each batch after
/// EXAMINE_PER_BATCH rows, and the scan resumes and ends right.
#[test]
fn a_batch_looks_at_a_bounded_number_of_rows() {
    let mut b = Bench::with_memory(32 * MIB);
    let rows = 2 * EXAMINE_PER_BATCH as i32 + 2_000;
    for k in 0..rows {
        b.insert(k as u64 + 1, k, i64::from(k), None, None);
    }
    for row_order in [false, true] {
        let partition = 0;
        let in_partition = (0..rows).filter(|&k| b.route(k).0 == partition).count() as u64;
        assert!(in_partition > u64::from(EXAMINE_PER_BATCH));
        // v < 0 holds for no row; v >= 0 for every one (counted).
        for (constant_op, expected) in [
            (CompareOp::Less, 0),
            (CompareOp::GreaterOrEqual, in_partition),
        ] {
            let mut program = ProgramWriter::new(&[]);
            program.compare(constant_op, V, Some(&0i64.to_le_bytes()));
            let mut request = Request {
                row_order,
                program: program.finish().unwrap(),
                count: expected > 0,
                ..Request::index(partition, Bound::Unbounded, Bound::Unbounded)
            };
            let mut batches = 0;
            let mut matched = 0;
            let mut examined = 0;
            loop {
                let signal = request_signal(&b, &request);
                let batch = answer(&mut b, signal).unwrap();
                batches += 1;
                assert!(batch.rows.is_empty());
                matched += u64::from(batch.matched);
                examined += u64::from(batch.examined);
                if batch.done {
                    break;
                }
                assert_eq!(batch.examined, EXAMINE_PER_BATCH);
                request.resume = Some(batch.resume);
            }
            assert_eq!(matched, expected);
            assert_eq!(examined, in_partition);
            assert_eq!(batches, in_partition.div_ceil(u64::from(EXAMINE_PER_BATCH)));
        }
    }
    b.assert_quiet();
}

/// A dear filter ends batches on work before rows: a LIKE that backtracks
/// over long values.
#[test]
fn a_batch_takes_a_bounded_amount_of_filter_work() {
    let mut b = Bench::with_memory(16 * MIB);
    let long = vec![b'a'; B_MAX];
    let rows = 200;
    for k in 0..rows {
        b.insert(k as u64 + 1, k, 0, None, Some(&long));
    }
    // '%aaa...ab' never matches, and at every place in the value matches
    // the run of a's before failing at the b.
    let mut pattern = vec![b'%'];
    pattern.resize(signal::scan_program::MAX_PATTERN_BYTES - 1, b'a');
    pattern.push(b'b');
    let mut program = ProgramWriter::new(&[]);
    program.like(B, &pattern);
    let mut request = Request {
        row_order: true,
        program: program.finish().unwrap(),
        ..Request::full(0)
    };
    let in_partition = (0..rows).filter(|&k| b.route(k).0 == 0).count() as u64;
    let (mut batches, mut examined) = (0, 0);
    loop {
        let signal = request_signal(&b, &request);
        let batch = answer(&mut b, signal).unwrap();
        batches += 1;
        examined += u64::from(batch.examined);
        assert!(batch.rows.is_empty());
        if batch.done {
            break;
        }
        request.resume = Some(batch.resume);
    }
    assert_eq!(examined, in_partition);
    assert!(
        batches > 3,
        "{batches} batches for {in_partition} dear rows"
    );
    b.assert_quiet();
}

#[test]
fn bad_requests_are_refused_and_change_nothing() {
    let mut b = Bench::new();
    b.insert(1, 5, 5, None, None);
    let good = Request::index(b.route(5).0, Bound::Included(0), Bound::Unbounded);
    let ok = request_signal(&b, &good);
    assert_eq!(answer(&mut b, ok).map(|batch| batch.rows.len()), Ok(1));

    let with = |b: &Bench, change: &dyn Fn(&mut ScanReq)| {
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
    let program_of = |b: &Bench, build: &dyn Fn(&mut ProgramWriter)| {
        let mut program = ProgramWriter::new(&[]);
        build(&mut program);
        section_of(b, &program.finish().unwrap())
    };
    let cases: Vec<(&str, ScanReq, ErrorCode)> = vec![
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
            "no such index",
            with(&b, &|s| s.index = 1),
            ErrorCode::UnknownIndex,
        ),
        (
            "bounds on a row-order scan",
            with(&b, &|s| s.index = scan_flags::ROW_ORDER),
            ErrorCode::BadRequest,
        ),
        (
            "a descending row-order scan",
            with(&b, &|s| {
                s.index = scan_flags::ROW_ORDER;
                s.bounds = section_of(&b, &[]);
                s.flags = scan_flags::DESCENDING;
            }),
            ErrorCode::BadRequest,
        ),
        (
            "a batch over the largest",
            with(&b, &|s| s.max_bytes = scan_flags::MAX_BATCH_BYTES + 1),
            ErrorCode::ScanBatchTooLarge,
        ),
        (
            "a batch too small for one row",
            with(&b, &|s| s.max_bytes = 20),
            ErrorCode::RowTooLarge,
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
            with(&b, &|s| s.flags |= scan_flags::RESUME),
            ErrorCode::BadRequest,
        ),
        (
            "a resume key without RESUME",
            with(&b, &|s| {
                s.bounds = bounds_of(&b, &[], &[], &entries(K, Some(&1i32.to_le_bytes())))
            }),
            ErrorCode::BadRequest,
        ),
        (
            "a filter on a column the table lacks",
            with(&b, &|s| s.program = program_of(&b, &|p| p.is_null(9))),
            ErrorCode::UnknownColumn,
        ),
        (
            "a filter constant of the wrong width",
            with(&b, &|s| {
                s.program = program_of(&b, &|p| p.compare(CompareOp::Equal, V, Some(&[1])))
            }),
            ErrorCode::BadValue,
        ),
        (
            "LIKE on a number",
            with(&b, &|s| s.program = program_of(&b, &|p| p.like(V, b"1%"))),
            ErrorCode::BadFilter,
        ),
        (
            "a torn program",
            with(&b, &|s| s.program = section_of(&b, &[0, 0, 1, 2])),
            ErrorCode::BadFilter,
        ),
        (
            "a projection of a column the table lacks",
            with(&b, &|s| {
                s.program = section_of(&b, &ProgramWriter::new(&[K, 7]).finish().unwrap())
            }),
            ErrorCode::UnknownColumn,
        ),
    ];
    for (what, signal, error) in cases {
        assert_eq!(answer(&mut b, signal).map(|_| ()), Err(error), "{what}");
    }
    // The read lease: a node whose lease ran out serves no scan.
    b.ldm.read_lease_until_ms = 0;
    let expired = request_signal(&b, &good);
    assert_eq!(
        answer(&mut b, expired).map(|_| ()),
        Err(ErrorCode::ReadLeaseExpired)
    );
    b.ldm.read_lease_until_ms = u64::MAX;
    let ok = request_signal(&b, &good);
    assert_eq!(answer(&mut b, ok).map(|batch| batch.rows.len()), Ok(1));
    b.assert_quiet();
}

/// Requests of random fields, bounds and programs (some well formed, most
/// not) on a table with rows: each gets a SCAN_CONF or a SCAN_REF, none
/// a panic, and nothing is left held.
#[test]
fn random_requests_are_answered_never_panicked_on() {
    let mut b = Bench::with_memory(4 * MIB);
    for k in 0..60 {
        b.insert(k as u64 + 1, k, i64::from(k) - 30, Some(b"text"), None);
    }
    let mut random = XorShift::new(77);
    let good_program = {
        let mut program = ProgramWriter::new(&[K, S]);
        program.and(2);
        program.compare(CompareOp::Greater, V, Some(&0i64.to_le_bytes()));
        program.like(S, b"t%");
        program.finish().unwrap()
    };
    let good_bounds = {
        let mut bounds = Vec::new();
        let low = key_entries(Some(5));
        scan_bounds::encode(
            ScanBounds {
                low: &low,
                high: &[],
                resume: &[],
            },
            &mut bounds,
        )
        .unwrap();
        bounds
    };
    let mut answered = 0;
    for _ in 0..5_000 {
        let mangle = |bytes: &[u8], random: &mut XorShift| -> Vec<u8> {
            let mut bytes = bytes.to_vec();
            match random.below(4) {
                0 => {}
                1 if !bytes.is_empty() => {
                    let at = random.below(bytes.len() as u64) as usize;
                    bytes[at] = random.below(256) as u8;
                }
                2 => bytes.truncate(random.below(bytes.len() as u64 + 1) as usize),
                _ => {
                    bytes = (0..random.below(40))
                        .map(|_| random.below(256) as u8)
                        .collect()
                }
            }
            bytes
        };
        let bounds = mangle(&good_bounds, &mut random);
        let program = mangle(&good_program, &mut random);
        let signal = ScanReq {
            request_id: 9,
            table_id: TABLE_ID,
            table_version: b.table.version,
            partition: random.below(3) as u32,
            index: [0, 1, scan_flags::ROW_ORDER, random.next_u64() as u32]
                [random.below(4) as usize],
            flags: random.below(64) as u8,
            max_rows: random.below(5) as u32,
            max_bytes: [0, 20, 100, 4096, scan_flags::MAX_BATCH_BYTES, u32::MAX]
                [random.below(6) as usize],
            resume_row: [0, 3, u32::MAX, random.next_u64() as u32][random.below(4) as usize],
            // None, one of the sender's (that wrote nothing here), anyone's.
            transaction_id: TransactionId(
                [
                    0,
                    (API.node.0 as u64) << 48 | random.below(1000),
                    random.next_u64(),
                ][random.below(3) as usize],
            ),
            bounds: section_of(&b, &bounds),
            program: section_of(&b, &program),
        };
        b.deliver(API, signal);
        let sent = b.ctx.sent.pop().expect("an answer");
        assert!(b.ctx.sent.is_empty());
        match sent.envelope.signal {
            Signal::ScanConf(conf) => {
                decode_scan_batch(conf.rows.as_slice()).expect("well-formed rows");
                answered += 1;
            }
            Signal::ScanRef(_) => {}
            other => panic!("{other:?}"),
        }
    }
    assert!(answered > 10, "some requests were well formed: {answered}");
    b.assert_quiet();
}
