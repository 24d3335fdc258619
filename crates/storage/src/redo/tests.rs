//! Tests of the redo format: round trips, the ring, the tail, the end of
//! the log (torn tail versus corruption), restarts, the GCI filter, and
//! fuzzing with random and damaged bytes (never a panic, never a record
//! that was not written).

use super::format::{seal_page, PageHeader};
use super::*;
use stdx::mix::XorShift;

const PART: u32 = 3;

/// 4 files of 32 redo pages: the smallest ring.
fn small_geometry() -> RedoGeometry {
    RedoGeometry::new(4, 33 * PAGE_BYTES as u64).expect("a valid test geometry")
}

fn config(geometry: RedoGeometry) -> AppenderConfig {
    AppenderConfig {
        geometry,
        part: PART,
        buffer_pages: 40,
        marker_reserve_pages: 4,
    }
}

fn formatted(geometry: RedoGeometry) -> Vec<Vec<u8>> {
    (0..geometry.file_count())
        .map(|file| {
            let mut bytes = vec![0u8; geometry.file_bytes() as usize];
            bytes[..PAGE_BYTES].copy_from_slice(&encode_file_header(geometry, PART, file));
            bytes
        })
        .collect()
}

/// A record as the tests remember it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Owned {
    Change {
        lsn: u64,
        gci: u64,
        table: u32,
        partition: u32,
        row_id: u32,
        operation: Operation,
        key: Vec<u8>,
        image: Vec<u8>,
    },
    Complete {
        lsn: u64,
        gci: u64,
    },
    Invalidate {
        lsn: u64,
        restored_gci: u64,
    },
}

impl Owned {
    fn of(record: &Record<'_>) -> Owned {
        match *record {
            Record::RowChange(change) => Owned::of_change(&change),
            Record::GciComplete { lsn, gci } => Owned::Complete { lsn, gci },
            Record::Invalidate { lsn, restored_gci } => Owned::Invalidate { lsn, restored_gci },
        }
    }

    fn of_change(change: &RowChange<'_>) -> Owned {
        let RowChange { lsn, change } = *change;
        Owned::Change {
            lsn,
            gci: change.gci,
            table: change.table,
            partition: change.partition,
            row_id: change.row_id,
            operation: change.operation,
            key: change.key.to_vec(),
            image: change.image.to_vec(),
        }
    }

    fn lsn(&self) -> u64 {
        match self {
            Owned::Change { lsn, .. }
            | Owned::Complete { lsn, .. }
            | Owned::Invalidate { lsn, .. } => *lsn,
        }
    }

    fn gci(&self) -> u64 {
        match self {
            Owned::Change { gci, .. } | Owned::Complete { gci, .. } => *gci,
            Owned::Invalidate { restored_gci, .. } => *restored_gci,
        }
    }
}

/// A part on an in-memory disk, with what was appended to it.
struct Log {
    geometry: RedoGeometry,
    appender: RedoAppender,
    buffer: Vec<u8>,
    files: Vec<Vec<u8>>,
    /// Every record appended, in LSN order.
    appended: Vec<Owned>,
    /// Records below this index are durable.
    durable: usize,
}

impl Log {
    fn new(geometry: RedoGeometry) -> Log {
        let config = config(geometry);
        Log {
            geometry,
            appender: RedoAppender::initial(config),
            buffer: vec![0u8; config.buffer_bytes()],
            files: formatted(geometry),
            appended: Vec::new(),
            durable: 0,
        }
    }

    /// The log after a restart from `files`, restoring `restored_gci`.
    fn restart(
        geometry: RedoGeometry,
        files: Vec<Vec<u8>>,
        start_lsn: u64,
        restored_gci: u64,
    ) -> Log {
        let scan = scan_part(&files, geometry, PART, start_lsn).expect("the log scans");
        let appended = read_all(&scan, &files);
        let config = config(geometry);
        let mut buffer = vec![0u8; config.buffer_bytes()];
        let appender =
            RedoAppender::resume(config, &scan, restored_gci, &mut buffer).expect("room to resume");
        let mut log = Log {
            geometry,
            appender,
            buffer,
            files,
            appended,
            durable: 0,
        };
        let invalidate_lsn = log.appender.next_lsn() - 1;
        log.appended.push(Owned::Invalidate {
            lsn: invalidate_lsn,
            restored_gci,
        });
        log.flush();
        log.sync();
        log
    }

    fn append(&mut self, change: Change<'_>) -> Result<u64, AppendError> {
        let lsn = self.appender.append_change(&mut self.buffer, &change)?;
        self.appended
            .push(Owned::of_change(&RowChange { lsn, change }));
        Ok(lsn)
    }

    fn append_random(
        &mut self,
        rng: &mut XorShift,
        gci: u64,
        big: bool,
    ) -> Result<u64, AppendError> {
        let (key, image, operation) = random_row(rng, big);
        self.append(Change {
            gci,
            table: rng.below(5) as u32 + 1,
            partition: rng.below(8) as u32,
            row_id: rng.next_u64() as u32,
            operation,
            key: &key,
            image: &image,
        })
    }

    fn marker(&mut self, gci: u64) -> u64 {
        let lsn = self
            .appender
            .append_gci_complete(&mut self.buffer, gci)
            .expect("room for a marker");
        self.appended.push(Owned::Complete { lsn, gci });
        lsn
    }

    /// Writes every closed page to the files.
    fn flush(&mut self) {
        while let Some(write) = self.appender.next_write() {
            assert!(write.buffer_offset + write.bytes <= self.buffer.len());
            assert!(write.file_offset + write.bytes as u64 <= self.geometry.file_bytes());
            assert_eq!(write.file_offset % PAGE_BYTES as u64, 0);
            let file = &mut self.files[write.file as usize];
            let at = write.file_offset as usize;
            file[at..at + write.bytes].copy_from_slice(
                &self.buffer[write.buffer_offset..write.buffer_offset + write.bytes],
            );
            self.appender.written(&write);
        }
    }

    fn sync(&mut self) {
        let through = self.appender.written_through();
        self.appender.synced(through);
    }

    /// What a GCP does per part: marker, close, write, fsync.
    fn complete(&mut self, gci: u64) {
        self.marker(gci);
        self.appender.close_page(&mut self.buffer);
        self.flush();
        self.sync();
        self.durable = self.appended.len();
    }

    fn scan(&self, start_lsn: u64) -> Result<PartScan, RedoError> {
        scan_part(&self.files, self.geometry, PART, start_lsn)
    }
}

fn random_row(rng: &mut XorShift, big: bool) -> (Vec<u8>, Vec<u8>, Operation) {
    let key: Vec<u8> = (0..1 + rng.below(40))
        .map(|_| rng.next_u64() as u8)
        .collect();
    let image_bytes = if big && rng.below(4) == 0 {
        rng.below(24_000) as usize
    } else {
        rng.below(700) as usize
    };
    let operation = match rng.below(3) {
        0 => Operation::Insert,
        1 => Operation::Update,
        _ => Operation::Delete,
    };
    let image = if operation == Operation::Delete {
        Vec::new()
    } else {
        (0..image_bytes).map(|_| rng.next_u64() as u8).collect()
    };
    (key, image, operation)
}

fn read_all<F: AsRef<[u8]>>(scan: &PartScan, files: &[F]) -> Vec<Owned> {
    let mut cursor = scan.records(files).expect("the cursor starts");
    let mut records = Vec::new();
    while let Some(record) = cursor.next_record().expect("records read back") {
        records.push(Owned::of(&record));
    }
    records
}

fn from_lsn(records: &[Owned], start_lsn: u64) -> Vec<Owned> {
    records
        .iter()
        .filter(|r| r.lsn() >= start_lsn)
        .cloned()
        .collect()
}

#[test]
fn geometry_refuses_bad_shapes() {
    assert!(RedoGeometry::new(1, 1 << 20).is_err(), "one file");
    assert!(RedoGeometry::new(4, 100_000).is_err(), "not whole pages");
    assert!(RedoGeometry::new(4, 4096).is_err(), "no redo page");
    assert!(RedoGeometry::new(2, 10 * 4096).is_err(), "ring too small");
    let geometry = small_geometry();
    assert_eq!(geometry.ring_pages(), 128);
    assert_eq!(
        geometry.location(0),
        Location {
            file: 0,
            offset: 4096
        }
    );
    assert_eq!(
        geometry.location(31),
        Location {
            file: 0,
            offset: 32 * 4096
        }
    );
    assert_eq!(
        geometry.location(32),
        Location {
            file: 1,
            offset: 4096
        }
    );
    assert_eq!(
        geometry.location(128 + 33),
        Location {
            file: 1,
            offset: 2 * 4096
        }
    );
}

#[test]
fn records_of_every_kind_and_size_round_trip() {
    let mut rng = XorShift::new(1);
    let mut log = Log::new(RedoGeometry::new(4, 257 * PAGE_BYTES as u64).expect("geometry"));
    let mut gci = 100;
    for round in 0..120 {
        log.append_random(&mut rng, gci, true).expect("room");
        if round % 7 == 6 {
            log.complete(gci);
            gci += 1;
        }
    }
    // Edge sizes: empty key and image, the largest row.
    let big = vec![0xAB; 24_000];
    let change = |operation, key: &'static [u8], image| Change {
        gci,
        table: 9,
        partition: 1,
        row_id: 77,
        operation,
        key,
        image,
    };
    log.append(change(Operation::Insert, b"", &[]))
        .expect("room");
    log.append(change(Operation::Update, b"k", &big))
        .expect("room");
    log.append(change(Operation::Delete, b"k", &[]))
        .expect("room");
    log.complete(gci);

    let scan = log.scan(FIRST_LSN).expect("scans");
    assert_eq!(scan.end.kind, EndKind::Clean);
    assert_eq!(read_all(&scan, &log.files), log.appended);
    assert_eq!(scan.records, log.appended.len() as u64);
    assert_eq!(scan.end.last_lsn, Some(log.appended.len() as u64));
    assert_eq!(scan.last_complete_gci, Some(gci));
    assert_eq!(scan.highest_gci, gci);
    assert_eq!(scan.end.orphan_pages, 0);
    assert_eq!(scan.end.next_lsn, log.appender.next_lsn());
    assert_eq!(scan.end.next_incarnation, 2);
    scan.check_reaches(gci).expect("the last GCI is marked");
}

#[test]
fn a_record_split_at_every_offset_round_trips() {
    // The second record starts `room` bytes before the end of page 0, so
    // its header, key or image is split at every possible byte.
    for room in 0..=RECORD_HEADER_BYTES + 20 {
        let mut log = Log::new(small_geometry());
        let filler = vec![7u8; PAGE_BODY_BYTES - room - RECORD_HEADER_BYTES];
        let change = |image| Change {
            gci: 1,
            table: 1,
            partition: 0,
            row_id: 5,
            operation: Operation::Insert,
            key: b"key",
            image,
        };
        log.append(Change {
            key: b"",
            ..change(&filler)
        })
        .expect("room");
        log.append(change(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]))
            .expect("room");
        log.complete(1);
        let scan = log.scan(FIRST_LSN).expect("scans");
        assert_eq!(read_all(&scan, &log.files), log.appended, "room {room}");
        assert_eq!(scan.end.kind, EndKind::Clean, "room {room}");
    }
}

#[test]
fn the_ring_wraps_and_keeps_what_the_tail_needs() {
    let mut rng = XorShift::new(2);
    let mut log = Log::new(small_geometry());
    let mut gci = 1;
    let mut tail_lsn = FIRST_LSN;
    let mut full = 0;
    for round in 0..3000u64 {
        match log.append_random(&mut rng, gci, round % 50 == 0) {
            Ok(_) => {}
            Err(AppendError::BufferFull) => panic!("the test flushes every GCI"),
            Err(AppendError::LogFull) => {
                // A checkpoint "completes": everything but the last 40
                // records is no longer needed.
                full += 1;
                tail_lsn = log.appender.next_lsn().saturating_sub(40).max(tail_lsn);
                log.appender.set_tail(tail_lsn);
                continue;
            }
        }
        if round % 5 == 4 {
            log.complete(gci);
            gci += 1;
        }
    }
    log.complete(gci);
    assert!(full > 0, "the log filled up");
    assert!(
        log.appender.written_through() > 4 * log.geometry.ring_pages(),
        "the ring wrapped several times"
    );
    let scan = log.scan(tail_lsn).expect("scans");
    assert_eq!(
        read_all(&scan, &log.files),
        from_lsn(&log.appended, tail_lsn)
    );
    assert_eq!(scan.end.kind, EndKind::Clean);
    assert_eq!(scan.last_complete_gci, Some(gci));
}

#[test]
fn the_tail_is_never_overwritten_and_markers_use_the_reserve() {
    let mut rng = XorShift::new(3);
    let mut log = Log::new(small_geometry());
    let full_at = loop {
        match log.append_random(&mut rng, 1, false) {
            Ok(_) => log.flush(),
            Err(AppendError::LogFull) => break log.appender.next_lsn(),
            Err(AppendError::BufferFull) => unreachable!("flushed after every record"),
        }
    };
    // Nothing was appended by the refused record; the log is full to the
    // marker reserve.
    assert_eq!(log.appender.next_lsn(), full_at);
    let reserve = u64::from(config(log.geometry).marker_reserve_pages);
    assert!(log.appender.pages_in_use() + reserve + 1 >= log.geometry.ring_pages());
    // GCIs go on completing from the reserve.
    for gci in 1..=3 {
        log.complete(gci);
    }
    assert_eq!(
        log.append_random(&mut rng, 4, false),
        Err(AppendError::LogFull)
    );
    // The whole log from LSN 1 is intact.
    let scan = log.scan(FIRST_LSN).expect("scans");
    assert_eq!(read_all(&scan, &log.files), log.appended);
    // A tail inside the first file frees nothing; a tail past it frees it.
    log.appender.set_tail(2);
    assert_eq!(
        log.append_random(&mut rng, 4, false),
        Err(AppendError::LogFull)
    );
    let needed = log.appender.next_lsn();
    log.appender.set_tail(needed);
    assert!(log.append_random(&mut rng, 4, false).is_ok());
    log.complete(4);
    let scan = log.scan(needed).expect("scans");
    assert_eq!(read_all(&scan, &log.files), from_lsn(&log.appended, needed));
}

#[test]
fn the_buffer_fills_until_pages_are_written() {
    let mut rng = XorShift::new(4);
    let mut log = Log::new(small_geometry());
    let refused = loop {
        if let Err(error) = log.append_random(&mut rng, 1, false) {
            break error;
        }
    };
    assert_eq!(refused, AppendError::BufferFull);
    log.flush();
    assert!(log.append_random(&mut rng, 1, false).is_ok());
}

/// Records up to a durable GCI, then one more record of about `size` bytes
/// that spans pages, written but never synced. Returns the log, the index
/// of the last record and where its bytes are (file, start, end).
fn log_with_unsynced_last_record(size: usize) -> (Log, usize, u32, usize, usize) {
    let mut rng = XorShift::new(5);
    let mut log = Log::new(small_geometry());
    for _ in 0..30 {
        log.append_random(&mut rng, 1, false).expect("room");
    }
    log.complete(1);
    for _ in 0..3 {
        log.append_random(&mut rng, 2, false).expect("room");
    }
    let image = vec![0x5A; size];
    log.append(Change {
        gci: 2,
        table: 1,
        partition: 0,
        row_id: 9,
        operation: Operation::Update,
        key: b"last",
        image: &image,
    })
    .expect("room");
    log.appender.close_page(&mut log.buffer);
    log.flush();
    let scan = log.scan(FIRST_LSN).expect("scans");
    let mut cursor = scan.records(&log.files).expect("cursor");
    let mut start = None;
    while let Some(record) = cursor.next_record().expect("reads") {
        if record.lsn() == log.appended.len() as u64 {
            start = cursor.location();
        }
    }
    let start = start.expect("the last record is there before the tear");
    // Its end: it spans into the next page(s), so count body bytes.
    let bytes = RECORD_HEADER_BYTES + 4 + size;
    let mut end = start.offset as usize;
    let mut left = bytes;
    loop {
        let in_page = PAGE_BYTES - end % PAGE_BYTES;
        if left <= in_page {
            end += left;
            break;
        }
        left -= in_page;
        end += in_page + PAGE_HEADER_BYTES;
    }
    let last = log.appended.len() - 1;
    (log, last, start.file, start.offset as usize, end)
}

#[test]
fn a_torn_last_record_is_cut_at_every_truncation_point() {
    let (log, last, file, start, end) = log_with_unsynced_last_record(5000);
    let written_end = end.next_multiple_of(PAGE_BYTES);
    for tear in start..end {
        // The write stopped at byte `tear`: the rest of its pages is zero
        // (or, second case, the file itself ends there).
        let mut zeroed = log.files.clone();
        zeroed[file as usize][tear..written_end].fill(0);
        let mut short: Vec<&[u8]> = log.files.iter().map(|f| &f[..]).collect();
        short[file as usize] = &log.files[file as usize][..tear];
        for (case, files) in [
            ("zeroed", zeroed.iter().map(|f| &f[..]).collect::<Vec<_>>()),
            ("short", short.clone()),
        ] {
            let scan = scan_part(&files, log.geometry, PART, FIRST_LSN)
                .unwrap_or_else(|error| panic!("tear at {tear} ({case}): {error}"));
            let records = read_all(&scan, &files);
            assert!(
                records.len() <= last,
                "tear at {tear} ({case}): the torn record is cut"
            );
            assert!(
                records.len() >= log.durable,
                "tear at {tear} ({case}): durable records stay"
            );
            assert_eq!(
                records[..],
                log.appended[..records.len()],
                "tear at {tear} ({case})"
            );
            match scan.end.kind {
                EndKind::Torn { cut } => {
                    assert!(
                        cut.file == file && (cut.offset as usize) <= tear,
                        "tear at {tear} ({case}): cut at {cut}"
                    );
                }
                EndKind::Clean => {}
            }
        }
    }
    // Untorn, the record is there.
    let scan = scan_part(&log.files, log.geometry, PART, FIRST_LSN).expect("scans");
    assert_eq!(read_all(&scan, &log.files), log.appended);
}

#[test]
fn a_cut_partial_record_is_reported_at_its_first_byte() {
    let (log, last, file, start, end) = log_with_unsynced_last_record(5000);
    // Lose the last page of the record only.
    let mut files = log.files.clone();
    let last_page = (end - 1) / PAGE_BYTES * PAGE_BYTES;
    files[file as usize][last_page..last_page + PAGE_BYTES].fill(0);
    let scan = scan_part(&files, log.geometry, PART, FIRST_LSN).expect("scans");
    assert_eq!(
        scan.end.kind,
        EndKind::Torn {
            cut: Location {
                file,
                offset: start as u64
            }
        }
    );
    assert_eq!(read_all(&scan, &files), log.appended[..last]);
}

#[test]
fn a_flipped_byte_in_durable_pages_is_corruption_naming_the_offset() {
    let mut rng = XorShift::new(6);
    let mut log = Log::new(small_geometry());
    let mut round = 0;
    while log.appender.written_through() < 50 {
        log.append_random(&mut rng, round / 10 + 1, false)
            .expect("room");
        if round % 10 == 9 {
            log.complete(round / 10 + 1);
        }
        round += 1;
    }
    for (page, byte) in [
        (5u64, 0usize),
        (10, 4),
        (12, 30),
        (20, 64),
        (20, 2000),
        (30, 4095),
    ] {
        let at = log.geometry.location(page);
        let mut files = log.files.clone();
        files[at.file as usize][at.offset as usize + byte] ^= 0x10;
        match scan_part(&files, log.geometry, PART, FIRST_LSN) {
            Err(error @ RedoError::Corrupt { .. }) => {
                let RedoError::Corrupt {
                    at: found,
                    page: found_page,
                    ..
                } = &error
                else {
                    unreachable!()
                };
                assert_eq!((*found, *found_page), (at, page), "page {page} byte {byte}");
                let message = error.to_string();
                assert!(
                    message.contains(&format!("file {} offset {}", at.file, at.offset)),
                    "{message}"
                );
            }
            other => panic!("page {page} byte {byte}: expected corruption, got {other:?}"),
        }
    }
}

#[test]
fn a_hole_in_pages_never_synced_is_a_torn_tail() {
    // A power loss writes back the page cache in any order: pages written
    // after the last fsync may be missing while later ones made it. Nothing
    // there was durable, so it is a torn tail, not corruption.
    let mut rng = XorShift::new(7);
    let mut log = Log::new(small_geometry());
    for _ in 0..20 {
        log.append_random(&mut rng, 1, false).expect("room");
    }
    log.complete(1);
    let durable_pages = log.appender.written_through();
    while log.appender.written_through() < durable_pages + 8 {
        log.append_random(&mut rng, 2, false).expect("room");
        log.flush();
    }
    let hole = durable_pages + 2;
    assert!(log.appender.written_through() > hole + 3);
    let at = log.geometry.location(hole);
    log.files[at.file as usize][at.offset as usize..at.offset as usize + PAGE_BYTES].fill(0xEE);

    let scan = log.scan(FIRST_LSN).expect("a torn tail, not corruption");
    // Cut at the hole, or at the start of a record that runs into it.
    match scan.end.kind {
        EndKind::Torn { cut } => assert!(cut <= at && cut.offset + PAGE_BYTES as u64 > at.offset),
        EndKind::Clean => panic!("the hole is torn"),
    }
    assert_eq!(scan.end.next_page, hole);
    assert!(scan.end.orphan_pages >= 3);
    let kept = read_all(&scan, &log.files);
    assert!(kept.len() >= log.durable);
    assert_eq!(kept[..], log.appended[..kept.len()]);
    scan.check_reaches(1).expect("GCI 1 is intact");

    // The restart writes past the hole over the orphans' page numbers; the
    // orphans, of the earlier incarnation, never join the log.
    let mut log = Log::restart(log.geometry, log.files, FIRST_LSN, 1);
    for _ in 0..5 {
        log.append_random(&mut rng, 3, false).expect("room");
    }
    log.complete(3);
    let scan = log.scan(FIRST_LSN).expect("scans");
    assert_eq!(read_all(&scan, &log.files), log.appended);
    assert_eq!(scan.end.kind, EndKind::Clean);
    assert_eq!(scan.end.next_incarnation, 3);
}

#[test]
fn damage_before_a_later_run_is_corruption() {
    let mut rng = XorShift::new(8);
    let mut log = Log::new(small_geometry());
    for _ in 0..20 {
        log.append_random(&mut rng, 1, false).expect("room");
    }
    log.complete(1);
    let restart_page = log.appender.written_through();
    let mut log = Log::restart(log.geometry, log.files, FIRST_LSN, 1);
    for _ in 0..10 {
        log.append_random(&mut rng, 2, false).expect("room");
    }
    log.complete(2);
    // The restart's invalidation page is lost: the run after it cannot be
    // reached, and it was durable (the restart fsynced it).
    let at = log.geometry.location(restart_page);
    log.files[at.file as usize][at.offset as usize + 100] ^= 1;
    match log.scan(FIRST_LSN) {
        Err(RedoError::Corrupt { page, .. }) => assert_eq!(page, restart_page),
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn unwritten_records_after_a_crash_end_the_log_cleanly_or_torn() {
    let mut rng = XorShift::new(9);
    let mut log = Log::new(small_geometry());
    for _ in 0..50 {
        log.append_random(&mut rng, 1, true).expect("room");
        // Only full pages go out: the head page stays in memory.
        log.flush();
    }
    let scan = log.scan(FIRST_LSN).expect("scans");
    let kept = read_all(&scan, &log.files);
    assert!(
        kept.len() < log.appended.len(),
        "the head page was never written"
    );
    assert_eq!(kept[..], log.appended[..kept.len()]);
}

#[test]
fn replay_yields_the_changes_up_to_the_restored_gci_in_lsn_order() {
    let mut rng = XorShift::new(10);
    let mut log = Log::new(small_geometry());
    // GCIs g and g+1 interleave before g's marker.
    for g in 10..16u64 {
        for _ in 0..12 {
            let gci = g + rng.below(2);
            log.append_random(&mut rng, gci, false).expect("room");
        }
        log.complete(g);
    }
    let scan = log.scan(FIRST_LSN).expect("scans");
    for restored in [0, 9, 10, 12, 15, 16, 99] {
        let mut replay = ReplayFilter::new(&scan, &log.files, restored).expect("replay");
        let mut got = Vec::new();
        while let Some(change) = replay.next_change().expect("reads") {
            got.push(Owned::of_change(&change));
        }
        let wanted: Vec<Owned> = log
            .appended
            .iter()
            .filter(|r| matches!(r, Owned::Change { gci, .. } if *gci <= restored))
            .cloned()
            .collect();
        assert_eq!(got, wanted, "restored {restored}");
    }
}

#[test]
fn an_invalidation_voids_earlier_changes_above_the_restored_gci() {
    let mut rng = XorShift::new(11);
    let mut log = Log::new(small_geometry());
    for _ in 0..10 {
        let gci = 5 + rng.below(2);
        log.append_random(&mut rng, gci, false).expect("room");
    }
    log.complete(5);
    for _ in 0..10 {
        log.append_random(&mut rng, 6, false).expect("room");
    }
    log.complete(6);
    // The crash came before GCI 6 was recorded complete anywhere: the
    // cluster restores GCI 5, and new GCIs start above 6.
    let first = log.scan(FIRST_LSN).expect("scans");
    assert_eq!(first.highest_gci, 6);
    let mut log = Log::restart(log.geometry, log.files, FIRST_LSN, 5);
    for _ in 0..10 {
        log.append_random(&mut rng, 7, false).expect("room");
    }
    log.complete(7);
    let scan = log.scan(FIRST_LSN).expect("scans");
    assert_eq!(scan.last_complete_gci, Some(7));
    scan.check_reaches(7).expect("GCI 7 is marked");
    let mut replay = ReplayFilter::new(&scan, &log.files, 7).expect("replay");
    let mut got = Vec::new();
    while let Some(change) = replay.next_change().expect("reads") {
        got.push(Owned::of_change(&change));
    }
    let invalidate_lsn = log
        .appended
        .iter()
        .find_map(|r| match r {
            Owned::Invalidate { lsn, .. } => Some(*lsn),
            _ => None,
        })
        .expect("the restart invalidated");
    let wanted: Vec<Owned> = log
        .appended
        .iter()
        .filter(|r| matches!(r, Owned::Change { .. }))
        .filter(|r| r.gci() <= 5 || r.lsn() > invalidate_lsn)
        .cloned()
        .collect();
    assert_eq!(got, wanted);
    assert!(got.iter().all(|r| r.gci() != 6), "GCI 6 never happened");
}

#[test]
fn check_reaches_refuses_a_part_without_the_restored_gci() {
    let mut log = Log::new(small_geometry());
    log.complete(5);
    let scan = log.scan(FIRST_LSN).expect("scans");
    scan.check_reaches(5).expect("marked");
    let error = scan.check_reaches(6).expect_err("GCI 6 is not marked");
    assert!(error.to_string().contains("GCI 6"), "{error}");
    // A marker before the start page still counts (the page header carries it).
    let mut rng = XorShift::new(12);
    for _ in 0..50 {
        log.append_random(&mut rng, 6, false).expect("room");
    }
    log.complete(6);
    let after_six = log.appender.next_lsn();
    for _ in 0..50 {
        log.append_random(&mut rng, 7, false).expect("room");
    }
    log.appender.close_page(&mut log.buffer);
    log.flush();
    let scan = log.scan(after_six + 20).expect("scans");
    assert_eq!(scan.last_complete_gci, Some(6));
    scan.check_reaches(6)
        .expect("GCI 6 was marked before the start");
}

#[test]
fn restarts_in_a_row_keep_every_record() {
    let mut rng = XorShift::new(13);
    let mut log = Log::new(small_geometry());
    for gci in 1..=4 {
        for _ in 0..15 {
            log.append_random(&mut rng, gci, false).expect("room");
        }
        log.complete(gci);
        let appended = log.appended.clone();
        log = Log::restart(log.geometry, log.files, FIRST_LSN, gci);
        assert_eq!(log.appended[..appended.len()], appended[..]);
    }
    let scan = log.scan(FIRST_LSN).expect("scans");
    assert_eq!(read_all(&scan, &log.files), log.appended);
    assert_eq!(scan.end.next_incarnation, 6);
}

#[test]
fn the_start_lsn_selects_the_records_a_restart_needs() {
    let mut rng = XorShift::new(14);
    let mut log = Log::new(small_geometry());
    for _ in 0..100 {
        log.append_random(&mut rng, 1, false).expect("room");
    }
    log.complete(1);
    let last = log.appended.len() as u64;
    for start in [1, 2, 50, last, last + 1] {
        let scan = log.scan(start).expect("scans");
        assert_eq!(read_all(&scan, &log.files), from_lsn(&log.appended, start));
    }
    assert!(matches!(
        log.scan(last + 2),
        Err(RedoError::StartBeyondEnd { .. })
    ));
    // Once the ring has wrapped past LSN 1, it is gone.
    log.appender.set_tail(last + 1);
    while log.appender.written_through() < 2 * log.geometry.ring_pages() {
        match log.append_random(&mut rng, 2, false) {
            Ok(_) => log.flush(),
            Err(_) => {
                let next = log.appender.next_lsn();
                log.appender.set_tail(next);
            }
        }
    }
    log.complete(2);
    assert!(matches!(
        log.scan(1),
        Err(RedoError::StartNotFound {
            oldest_lsn: Some(_),
            ..
        })
    ));
}

#[test]
fn file_headers_are_checked() {
    let geometry = small_geometry();
    let log = Log::new(geometry);
    let other = RedoGeometry::new(4, 65 * PAGE_BYTES as u64).expect("geometry");
    assert!(matches!(
        scan_part(&log.files, other, PART, 1),
        Err(RedoError::FileHeader { file: 0, .. })
    ));
    assert!(matches!(
        scan_part(&log.files, geometry, PART + 1, 1),
        Err(RedoError::FileHeader { .. })
    ));
    assert!(matches!(
        scan_part(&log.files[..3], geometry, PART, 1),
        Err(RedoError::FileHeader { file: 3, .. })
    ));
    let mut files = log.files.clone();
    files[2][9] ^= 1;
    let error = scan_part(&files, geometry, PART, 1).expect_err("damaged header");
    assert!(error.to_string().contains("file 2 offset 0"), "{error}");
    let mut files = log.files.clone();
    files[1].push(0);
    assert!(scan_part(&files, geometry, PART, 1).is_err());
    // A fresh part scans as empty.
    let scan = scan_part(&log.files, geometry, PART, 1).expect("empty");
    assert_eq!(scan.end.kind, EndKind::Clean);
    assert_eq!(scan.end.last_lsn, None);
    assert_eq!(read_all(&scan, &log.files), Vec::new());
}

/// Pages with a valid checksum but arbitrary fields and bodies: what only a
/// writer bug (or a checksum collision) could produce.
fn random_sealed_page(rng: &mut XorShift, geometry: RedoGeometry, position: u64) -> Vec<u8> {
    let mut page = vec![0u8; PAGE_BYTES];
    let used = match rng.below(3) {
        0 => PAGE_BODY_BYTES,
        _ => rng.below(PAGE_BODY_BYTES as u64 + 1) as usize,
    };
    let continuation = if rng.below(2) == 0 {
        0
    } else {
        rng.below(used as u64 + 1) as usize
    };
    let body = &mut page[PAGE_HEADER_BYTES..PAGE_HEADER_BYTES + used];
    let mut at = 0;
    while at < body.len() {
        // Record-like bytes: a plausible length now and then.
        let piece = (rng.below(200) as usize + 1).min(body.len() - at);
        for byte in &mut body[at..at + piece] {
            *byte = rng.next_u64() as u8;
        }
        if piece >= 8 && rng.below(2) == 0 {
            let length = 48 + rng.below(9000) as u32;
            body[at + 4..at + 8].copy_from_slice(&length.to_le_bytes());
        }
        at += piece;
    }
    let lap = rng.below(3);
    let header = PageHeader {
        used,
        continuation,
        part: PART,
        incarnation: 1 + rng.below(3) as u32,
        page: lap * geometry.ring_pages() + position,
        first_lsn: 1 + rng.below(200),
        synced_page: rng.below(300),
        complete_gci: rng.below(5),
    };
    seal_page(&mut page, &header);
    page
}

fn exercise(files: &[Vec<u8>], geometry: RedoGeometry, start_lsn: u64) -> Option<Vec<Owned>> {
    let scan = scan_part(files, geometry, PART, start_lsn).ok()?;
    let _ = scan.check_reaches(3);
    let mut records = Vec::new();
    let mut cursor = scan.records(files).ok()?;
    while let Ok(Some(record)) = cursor.next_record() {
        records.push(Owned::of(&record));
    }
    if let Ok(mut replay) = ReplayFilter::new(&scan, files, 2) {
        while let Ok(Some(_)) = replay.next_change() {}
    }
    Some(records)
}

#[test]
fn random_bytes_never_panic() {
    let geometry = small_geometry();
    let mut rng = XorShift::new(15);
    for _ in 0..150 {
        let mut files = formatted(geometry);
        for position in 0..geometry.ring_pages() {
            let at = geometry.location(position);
            let page =
                &mut files[at.file as usize][at.offset as usize..at.offset as usize + PAGE_BYTES];
            match rng.below(4) {
                0 => {}
                1 => page
                    .iter_mut()
                    .for_each(|byte| *byte = rng.next_u64() as u8),
                _ => page.copy_from_slice(&random_sealed_page(&mut rng, geometry, position)),
            }
        }
        exercise(&files, geometry, 1 + rng.below(150));
    }
}

#[test]
fn damaged_logs_never_panic_and_never_invent_records() {
    let geometry = small_geometry();
    let mut rng = XorShift::new(16);
    let mut log = Log::new(geometry);
    for round in 0..300 {
        log.append_random(&mut rng, round / 20 + 1, round % 40 == 0)
            .expect("room");
        if round % 20 == 19 {
            log.complete(round / 20 + 1);
        }
        log.flush();
    }
    for _ in 0..300 {
        let mut files = log.files.clone();
        for _ in 0..1 + rng.below(4) {
            let file = rng.below(u64::from(geometry.file_count())) as usize;
            let offset = PAGE_BYTES + rng.below(geometry.file_bytes() - PAGE_BYTES as u64) as usize;
            if offset >= files[file].len() {
                continue;
            }
            match rng.below(3) {
                0 => files[file][offset] ^= 1 << rng.below(8),
                1 => {
                    let end = (offset + rng.below(5000) as usize).min(files[file].len());
                    files[file][offset..end].fill(0);
                }
                _ => files[file].truncate(offset),
            }
        }
        let start = 1 + rng.below(log.appended.len() as u64);
        if let Some(records) = exercise(&files, geometry, start) {
            let wanted = from_lsn(&log.appended, start);
            assert!(records.len() <= wanted.len());
            assert_eq!(
                records[..],
                wanted[..records.len()],
                "only written records, in order"
            );
        }
    }
}

#[test]
fn a_resumed_log_whose_tail_is_inside_a_file_still_wraps() {
    // After a restart the tail is the page the restored checkpoint's redo
    // starts in, often mid-file; the head comes round to that file again
    // and the tail must still move past it.
    let geometry = small_geometry();
    let mut rng = XorShift::new(17);
    let mut log = Log::new(geometry);
    while log.appender.written_through() < 45 {
        log.append_random(&mut rng, 1, false).expect("room");
        log.flush();
    }
    log.complete(1);
    let start = log.appended[log.appended.len() * 3 / 4].lsn();
    let mut log = Log::restart(geometry, log.files, start, 1);
    let mut tail = start;
    let mut gci = 2;
    let mut refused_in_a_row = 0;
    while log.appender.written_through() < 4 * geometry.ring_pages() {
        match log.append_random(&mut rng, gci, false) {
            Ok(_) => refused_in_a_row = 0,
            Err(AppendError::LogFull) => {
                refused_in_a_row += 1;
                assert!(refused_in_a_row < 3, "the tail must move");
                tail = log.appender.next_lsn() - 20;
                log.appender.set_tail(tail);
            }
            Err(AppendError::BufferFull) => unreachable!("flushed after every record"),
        }
        log.flush();
        if rng.below(10) == 0 {
            log.complete(gci);
            gci += 1;
        }
    }
    log.complete(gci);
    let scan = log.scan(tail).expect("scans");
    assert_eq!(read_all(&scan, &log.files), from_lsn(&log.appended, tail));
    assert_eq!(scan.last_complete_gci, Some(gci));
}

#[test]
fn a_lost_first_page_before_any_fsync_leaves_an_empty_log() {
    let geometry = small_geometry();
    let mut rng = XorShift::new(18);
    let mut log = Log::new(geometry);
    while log.appender.written_through() < 6 {
        log.append_random(&mut rng, 1, false).expect("room");
        log.flush();
    }
    let at = geometry.location(0);
    log.files[at.file as usize][at.offset as usize + 7] ^= 1;
    let scan = log.scan(FIRST_LSN).expect("nothing was durable");
    assert_eq!(scan.end.kind, EndKind::Torn { cut: at });
    assert!(scan.end.orphan_pages >= 5);
    assert_eq!(read_all(&scan, &log.files), Vec::new());
    // A checkpoint that needs later records cannot be restored from it.
    assert!(matches!(log.scan(5), Err(RedoError::StartNotFound { .. })));
    // The restart begins the log again at page 0, LSN 1, above the orphans'
    // incarnation; the orphans, repeating its LSNs, never join it.
    let mut log = Log::restart(geometry, log.files, FIRST_LSN, 0);
    assert_eq!(
        log.appended,
        vec![Owned::Invalidate {
            lsn: 1,
            restored_gci: 0
        }]
    );
    for _ in 0..3 {
        log.append_random(&mut rng, 1, false).expect("room");
    }
    log.complete(1);
    for start in [1, 3] {
        let scan = log.scan(start).expect("scans");
        assert_eq!(read_all(&scan, &log.files), from_lsn(&log.appended, start));
        assert_eq!(scan.end.kind, EndKind::Clean);
    }
    // Had the first page been fsynced, losing it is corruption.
    let mut log = Log::new(geometry);
    log.append_random(&mut rng, 1, false).expect("room");
    log.complete(1);
    log.append_random(&mut rng, 2, false).expect("room");
    log.complete(2);
    log.files[at.file as usize][at.offset as usize + 7] ^= 1;
    assert!(matches!(
        log.scan(FIRST_LSN),
        Err(RedoError::Corrupt { page: 0, .. })
    ));
}

#[test]
fn power_lost_during_a_restarts_first_fsync_is_a_torn_tail() {
    // The restart read the unsynced tail from the page cache and wrote its
    // invalidation page, then power failed before its fsync completed: the
    // old tail has a hole, the new page made it. Nothing durable was lost.
    let geometry = small_geometry();
    let mut rng = XorShift::new(19);
    let mut log = Log::new(geometry);
    for _ in 0..20 {
        log.append_random(&mut rng, 1, false).expect("room");
    }
    log.complete(1);
    let durable = log.appended.clone();
    let hole = log.appender.written_through() + 1;
    while log.appender.written_through() < hole + 3 {
        log.append_random(&mut rng, 2, false).expect("room");
        log.flush();
    }
    let scan = log.scan(FIRST_LSN).expect("scans");
    let config = config(geometry);
    let mut buffer = vec![0u8; config.buffer_bytes()];
    let mut appender = RedoAppender::resume(config, &scan, 1, &mut buffer).expect("room");
    while let Some(write) = appender.next_write() {
        let at = write.file_offset as usize;
        log.files[write.file as usize][at..at + write.bytes]
            .copy_from_slice(&buffer[write.buffer_offset..write.buffer_offset + write.bytes]);
        appender.written(&write);
    }
    let at = geometry.location(hole);
    log.files[at.file as usize][at.offset as usize..at.offset as usize + PAGE_BYTES].fill(0);
    let scan = log.scan(FIRST_LSN).expect("a torn tail");
    assert!(matches!(scan.end.kind, EndKind::Torn { .. }));
    assert_eq!(scan.end.next_incarnation, 3);
    let kept = read_all(&scan, &log.files);
    assert_eq!(kept[..durable.len()], durable[..]);
    let mut log = Log::restart(geometry, log.files, FIRST_LSN, 1);
    log.append_random(&mut rng, 3, false).expect("room");
    log.complete(3);
    let scan = log.scan(FIRST_LSN).expect("scans");
    assert_eq!(read_all(&scan, &log.files), log.appended);
}

#[test]
fn the_oldest_start_reads_everything_the_ring_still_holds() {
    let geometry = small_geometry();
    let mut rng = XorShift::new(23);
    let mut log = Log::new(geometry);
    // The first lap: the oldest start is the first LSN.
    for _ in 0..50 {
        log.append_random(&mut rng, 1, false).expect("room");
    }
    log.complete(1);
    assert_eq!(oldest_start_lsn(&log.files, geometry, PART), Ok(FIRST_LSN));
    // Wrap the ring a few times, moving the tail as checkpoints would.
    let mut tail = FIRST_LSN;
    let mut gci = 2;
    while log.appender.written_through() < 3 * geometry.ring_pages() + 7 {
        if log.append_random(&mut rng, gci, false) == Err(AppendError::LogFull) {
            tail = log.appender.next_lsn() - 30;
            log.appender.set_tail(tail);
        }
        log.flush();
        if rng.below(8) == 0 {
            log.complete(gci);
            gci += 1;
        }
    }
    log.complete(gci);
    let oldest = oldest_start_lsn(&log.files, geometry, PART).expect("reads");
    assert!(
        oldest > FIRST_LSN && oldest <= tail,
        "{oldest} vs tail {tail}"
    );
    let scan = log.scan(oldest).expect("the oldest start scans");
    assert_eq!(read_all(&scan, &log.files), from_lsn(&log.appended, oldest));
    assert_eq!(scan.last_complete_gci, Some(gci));
    // A restart from there keeps working.
    let restarted = Log::restart(geometry, log.files.clone(), oldest, gci);
    assert_eq!(restarted.appender.next_lsn(), log.appender.next_lsn() + 1);
}
