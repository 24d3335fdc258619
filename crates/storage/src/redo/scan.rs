//! scan: reads a part back after a crash. Finds where the records a restart
//! needs start, walks the chain of pages from there in LSN order, finds the
//! end of the log (the first break in the sequence) and decides whether the
//! break is a torn tail (cut it) or damage to durable pages (corruption:
//! stop the node). Then reads the records again, lazily, for replay.
//!
//! The rules, with examples, are `docs/redo-format.md` §6 and §7. In short:
//! the chain runs through consecutive page numbers, each page whole
//! (checksum), of the same or a later incarnation, with consecutive LSNs
//! (across incarnations too). It ends at the first page that is not such a
//! continuation: the first break in the LSN sequence. That end is
//! corruption when a valid page written after it says the broken page had
//! been made durable; otherwise it is a torn tail, and anything after it
//! was never durable.

use super::format::{
    check_file_header, decode_record_header, read_page, record_length, record_length_valid,
    record_view, PageHeader, PageRead, RecordHeader, RecordKind, RECORD_PREFIX_BYTES,
};
use super::{
    Location, Record, RedoError, RedoGeometry, FIRST_LSN, PAGE_BODY_BYTES, PAGE_BYTES,
    PAGE_HEADER_BYTES,
};

/// How the log ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndKind {
    /// On a record boundary, before a page that was never written in this
    /// lap (zeros, an older lap's page, or a page an earlier run left).
    Clean,
    /// Bytes were cut from `cut` on: a partial record, or a torn page.
    /// They were never durable, so nothing complete is lost.
    Torn {
        /// The first byte cut.
        cut: Location,
    },
}

/// Where the log ends and how a new run continues after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogEnd {
    /// How it ends.
    pub kind: EndKind,
    /// The last whole record's LSN (`None`: no whole record at all).
    pub last_lsn: Option<u64>,
    /// The first page number not in the log: a new run writes here.
    pub next_page: u64,
    /// The first LSN of a new run: the LSN after the last whole record.
    pub next_lsn: u64,
    /// A new run's incarnation: above every incarnation in the ring, so
    /// pages left beyond the end are never mistaken for the new run's.
    pub next_incarnation: u32,
    /// Pages below this were durable, by the log's own account.
    pub synced_page: u64,
    /// Valid pages after the end, left by a crash (not durable, superseded
    /// by the next run); for the restart's log.
    pub orphan_pages: u64,
}

/// What a scan found in a part. Holds no bytes: pass the same files to
/// [`PartScan::records`] or [`super::ReplayFilter`] to read the records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartScan {
    /// The part.
    pub part: u32,
    /// The ring's shape.
    pub geometry: RedoGeometry,
    /// The first LSN the restart needs (the restored checkpoint's redo start).
    pub start_lsn: u64,
    /// Where the log ends.
    pub end: LogEnd,
    /// The highest GCI the part marks complete (records from the start on,
    /// and what the start page says came before), minus those invalidated.
    pub last_complete_gci: Option<u64>,
    /// The highest GCI of any record from the start page on (new GCIs
    /// start above the highest found on disk).
    pub highest_gci: u64,
    /// Records from `start_lsn` to the end.
    pub records: u64,
    /// The page the walk starts from (`None`: the log is empty).
    start_page: Option<u64>,
    /// Invalidation records, in LSN order: (LSN, restored GCI).
    invalidations: Vec<(u64, u64)>,
    /// Per file, the first LSN of its first page if the walk entered it
    /// (for the tail of a resumed appender).
    file_start_lsn: Vec<u64>,
}

impl PartScan {
    /// The page the walk starts from.
    pub(crate) fn start_page(&self) -> Option<u64> {
        self.start_page
    }

    /// Per file, the first LSN of its first page, if the walk entered it.
    pub(crate) fn file_start_lsn(&self) -> &[u64] {
        &self.file_start_lsn
    }

    /// Invalidation records, in LSN order: (LSN, restored GCI).
    pub(crate) fn invalidations(&self) -> &[(u64, u64)] {
        &self.invalidations
    }

    /// The cross-check a restart makes per part: the part must mark the
    /// restored GCI complete (every ldm writes the marker into each of its
    /// parts before a GCI is recorded complete). Catches damage the
    /// end-of-log rule alone would take for a torn tail.
    pub fn check_reaches(&self, restored_gci: u64) -> Result<(), RedoError> {
        if restored_gci == 0
            || self
                .last_complete_gci
                .is_some_and(|last| last >= restored_gci)
        {
            return Ok(());
        }
        Err(RedoError::GciNotReached {
            part: self.part,
            restored_gci,
            last_complete_gci: self.last_complete_gci,
        })
    }

    /// The records from `start_lsn` to the end, in LSN order. `files` must
    /// be the bytes that were scanned.
    pub fn records<'a, F: AsRef<[u8]>>(
        &self,
        files: &'a [F],
    ) -> Result<RecordCursor<'a, F>, RedoError> {
        check_files(files, self.geometry, self.part)?;
        let walker = match self.start_page {
            Some(page) => Some(Walker::start(files, self.geometry, self.part, page)?),
            None => None,
        };
        let done = match self.end.last_lsn {
            Some(last) => last < self.start_lsn,
            None => true,
        };
        Ok(RecordCursor {
            walker,
            part: self.part,
            start_lsn: self.start_lsn,
            last_lsn: self.end.last_lsn.unwrap_or(0),
            done,
        })
    }
}

/// Reads a part: `files` are its files' bytes in file-index order (a file
/// may be shorter than configured: the missing bytes read as never
/// written), `start_lsn` the first LSN the restart needs.
pub fn scan_part<F: AsRef<[u8]>>(
    files: &[F],
    geometry: RedoGeometry,
    part: u32,
    start_lsn: u64,
) -> Result<PartScan, RedoError> {
    let start_lsn = start_lsn.max(FIRST_LSN);
    check_files(files, geometry, part)?;
    let survey = Survey::take(files, geometry, part, start_lsn);
    let Some(start_page) = survey.start_page else {
        return empty_chain(files, geometry, part, start_lsn, &survey);
    };

    let mut walker = Walker::start(files, geometry, part, start_page)?;
    let mut scan = PartScan {
        part,
        geometry,
        start_lsn,
        end: LogEnd {
            kind: EndKind::Clean,
            last_lsn: None,
            next_page: 0,
            next_lsn: 0,
            next_incarnation: 0,
            synced_page: 0,
            orphan_pages: 0,
        },
        last_complete_gci: None,
        highest_gci: 0,
        records: 0,
        start_page: Some(start_page),
        invalidations: Vec::new(),
        file_start_lsn: Vec::new(),
    };
    // (LSN, GCI) of each marker; what the start page says came before it
    // counts as a marker older than every record walked.
    let mut markers = Vec::new();
    if walker.page.header.complete_gci > 0 {
        markers.push((0, walker.page.header.complete_gci));
    }
    let mut last_lsn = None;
    let stop = loop {
        match walker.step()? {
            Step::End(stop) => break stop,
            Step::Record(header) => {
                last_lsn = Some(header.lsn);
                if header.lsn >= start_lsn {
                    scan.records += 1;
                }
                scan.highest_gci = scan.highest_gci.max(header.gci);
                match header.kind {
                    RecordKind::RowChange => {}
                    RecordKind::GciComplete => markers.push((header.lsn, header.gci)),
                    RecordKind::Invalidate => scan.invalidations.push((header.lsn, header.gci)),
                }
            }
        }
    };

    check_after_end(files, geometry, part, walker.incarnation, start_page, &stop)?;
    if walker.expected_lsn < start_lsn {
        return Err(RedoError::StartBeyondEnd {
            part,
            start_lsn,
            end_lsn: walker.expected_lsn,
        });
    }
    scan.last_complete_gci = last_complete(&markers, &scan.invalidations);
    scan.file_start_lsn = walker.file_start_lsn.clone();
    scan.end = LogEnd {
        kind: match stop.cut {
            Some(cut) => EndKind::Torn { cut },
            None => EndKind::Clean,
        },
        last_lsn,
        next_page: stop.page,
        next_lsn: walker.expected_lsn,
        next_incarnation: survey.max_incarnation.max(walker.incarnation) + 1,
        synced_page: walker.max_synced_page,
        orphan_pages: count_orphans(
            files,
            geometry,
            part,
            walker.incarnation,
            start_page,
            stop.page,
        ),
    };
    Ok(scan)
}

/// A start LSN for a restart that needs every record the part still holds
/// from its tail on: some partition of the part has no restorable local
/// checkpoint naming a redo start (its rows are in redo alone, which the
/// tail kept for it), or the part has no partition. In the ring's first
/// lap that is [`FIRST_LSN`]. Once the ring has wrapped, the oldest page in
/// it is not a possible start: a restart resuming after the end would find
/// the ring full, with no page for its invalidation record. So it is the first
/// record beginning in a page after the oldest one (valid pages only; the
/// oldest is the lowest page number, orphans beyond a crash's cut all have
/// higher ones). Row changes and markers never fill the last page before
/// the tail, so that page is at or before where the tail was: everything
/// from there to the end of the log is a chain [`scan_part`] can walk, and
/// its records before the tail are replayed harmlessly (replay is
/// idempotent). A part whose partitions all have restorable checkpoints
/// starts at the oldest of their redo starts instead.
pub fn oldest_start_lsn<F: AsRef<[u8]>>(
    files: &[F],
    geometry: RedoGeometry,
    part: u32,
) -> Result<u64, RedoError> {
    check_files(files, geometry, part)?;
    // (page number, LSN of the first record beginning in it) of valid pages.
    let mut pages = Vec::new();
    for position in 0..geometry.ring_pages() {
        if let PageRead::Valid { header, .. } = read_page(
            page_bytes(files, geometry, position),
            part,
            geometry,
            position,
        ) {
            pages.push((header.page, header.first_record_lsn()));
        }
    }
    let Some(oldest) = pages.iter().map(|&(page, _)| page).min() else {
        return Ok(FIRST_LSN);
    };
    if pages.iter().all(|&(page, _)| page < geometry.ring_pages()) {
        return Ok(FIRST_LSN);
    }
    Ok(pages
        .iter()
        .filter(|&&(page, _)| page > oldest)
        .filter_map(|&(_, lsn)| lsn)
        .min()
        .unwrap_or(FIRST_LSN))
}

/// The scan of a part with no page to start from: fine only when the
/// restart needs the log from its first record and the log has none (never
/// written, or its first page lost before any fsync).
fn empty_chain<F: AsRef<[u8]>>(
    files: &[F],
    geometry: RedoGeometry,
    part: u32,
    start_lsn: u64,
    survey: &Survey,
) -> Result<PartScan, RedoError> {
    if start_lsn > FIRST_LSN || survey.max_page >= geometry.ring_pages() {
        // The records the restart needs were there and are gone.
        return Err(RedoError::StartNotFound {
            part,
            start_lsn,
            oldest_lsn: survey.oldest_record_lsn,
        });
    }
    let first = geometry.location(0);
    let stop = match read_page(page_bytes(files, geometry, 0), part, geometry, 0) {
        PageRead::Unwritten => Stop {
            page: 0,
            cut: None,
            why: "the page was never written",
        },
        PageRead::Invalid(why) => Stop {
            page: 0,
            cut: Some(first),
            why,
        },
        PageRead::Valid { .. } => Stop {
            page: 0,
            cut: Some(first),
            why: "the page does not begin the log",
        },
    };
    // Pages after a lost first page are corruption or orphans by the same
    // rule as after any other break (the first run is incarnation 1).
    check_after_end(files, geometry, part, 1, 0, &stop)?;
    Ok(PartScan {
        part,
        geometry,
        start_lsn,
        end: LogEnd {
            kind: match stop.cut {
                Some(cut) => EndKind::Torn { cut },
                None => EndKind::Clean,
            },
            last_lsn: None,
            next_page: 0,
            next_lsn: FIRST_LSN,
            next_incarnation: survey.max_incarnation + 1,
            synced_page: 0,
            orphan_pages: count_orphans(files, geometry, part, 1, 0, 0),
        },
        last_complete_gci: None,
        highest_gci: 0,
        records: 0,
        start_page: None,
        invalidations: Vec::new(),
        file_start_lsn: vec![0; geometry.file_count() as usize],
    })
}

/// The highest marked GCI that no later invalidation voids.
fn last_complete(markers: &[(u64, u64)], invalidations: &[(u64, u64)]) -> Option<u64> {
    markers
        .iter()
        .filter(|&&(lsn, gci)| {
            !invalidations
                .iter()
                .any(|&(invalidation_lsn, restored)| invalidation_lsn > lsn && gci > restored)
        })
        .map(|&(_, gci)| gci)
        .max()
}

fn check_files<F: AsRef<[u8]>>(
    files: &[F],
    geometry: RedoGeometry,
    part: u32,
) -> Result<(), RedoError> {
    if files.len() != geometry.file_count() as usize {
        return Err(RedoError::FileHeader {
            part,
            file: files.len().min(geometry.file_count() as usize) as u32,
            reason: format!(
                "{} files were read, the ring has {}",
                files.len(),
                geometry.file_count()
            ),
        });
    }
    for (index, file) in files.iter().enumerate() {
        let bytes = file.as_ref();
        let fault = |reason| RedoError::FileHeader {
            part,
            file: index as u32,
            reason,
        };
        if bytes.len() as u64 > geometry.file_bytes() {
            return Err(fault(format!(
                "the file is {} bytes, longer than the configured {}",
                bytes.len(),
                geometry.file_bytes()
            )));
        }
        check_file_header(bytes, geometry, part, index as u32).map_err(fault)?;
    }
    Ok(())
}

/// The bytes of the page at ring position `position` (fewer than a page,
/// or none, when the file is short).
fn page_bytes<F: AsRef<[u8]>>(files: &[F], geometry: RedoGeometry, position: u64) -> &[u8] {
    let location = geometry.location(position);
    let file = files[location.file as usize].as_ref();
    let start = (location.offset as usize).min(file.len());
    let end = (start + PAGE_BYTES).min(file.len());
    &file[start..end]
}

/// One pass over every ring position, before the walk.
struct Survey {
    /// The page holding the record the walk starts with: of the pages where
    /// a record with an LSN not above the start LSN begins, the one of the
    /// highest incarnation, then the greatest such LSN. Preferring the
    /// incarnation keeps pages an earlier run left beyond its end (which
    /// may repeat LSNs of the run after it) out of the choice.
    start_page: Option<u64>,
    /// The highest incarnation in the ring.
    max_incarnation: u32,
    /// The highest page number in the ring.
    max_page: u64,
    /// The lowest LSN a record starts with in any page.
    oldest_record_lsn: Option<u64>,
}

impl Survey {
    fn take<F: AsRef<[u8]>>(
        files: &[F],
        geometry: RedoGeometry,
        part: u32,
        start_lsn: u64,
    ) -> Survey {
        let mut survey = Survey {
            start_page: None,
            max_incarnation: 0,
            max_page: 0,
            oldest_record_lsn: None,
        };
        // (incarnation, first record LSN, page) of the best start so far.
        let mut best: Option<(u32, u64, u64)> = None;
        for position in 0..geometry.ring_pages() {
            let PageRead::Valid { header, .. } = read_page(
                page_bytes(files, geometry, position),
                part,
                geometry,
                position,
            ) else {
                continue;
            };
            survey.max_incarnation = survey.max_incarnation.max(header.incarnation);
            survey.max_page = survey.max_page.max(header.page);
            let Some(record_lsn) = header.first_record_lsn() else {
                continue;
            };
            survey.oldest_record_lsn = Some(
                survey
                    .oldest_record_lsn
                    .map_or(record_lsn, |o| o.min(record_lsn)),
            );
            let candidate = (header.incarnation, record_lsn, header.page);
            if record_lsn <= start_lsn && best.is_none_or(|best| candidate > best) {
                best = Some(candidate);
            }
        }
        survey.start_page = best.map(|(_, _, page)| page);
        survey
    }
}

/// Decides whether the end the walk found is a torn tail or corruption.
fn check_after_end<F: AsRef<[u8]>>(
    files: &[F],
    geometry: RedoGeometry,
    part: u32,
    incarnation: u32,
    start_page: u64,
    stop: &Stop,
) -> Result<(), RedoError> {
    let corrupt = |reason: String| RedoError::Corrupt {
        part,
        at: geometry.location(stop.page),
        page: stop.page,
        reason,
    };
    // A page written after the end (by this run, or a later run that the
    // chain does not reach) that records the end as durable proves the
    // break is damage, not a crash. Without such a page, what follows the
    // break was never known durable: a later run's first page alone does
    // not prove it either (power may have failed during that run's first
    // fsync), and whatever it voided is voided again by the next run.
    for page in stop.page..start_page + geometry.ring_pages() {
        let position = page % geometry.ring_pages();
        let PageRead::Valid { header, .. } = read_page(
            page_bytes(files, geometry, position),
            part,
            geometry,
            position,
        ) else {
            continue;
        };
        if header.page > stop.page
            && header.incarnation >= incarnation
            && header.synced_page > stop.page
        {
            return Err(corrupt(format!(
                "the log breaks here ({}), but page {} ({}), written after it, records every \
                 page below {} as durable",
                stop.why,
                header.page,
                geometry.location(header.page),
                header.synced_page
            )));
        }
    }
    Ok(())
}

/// Valid pages of the last run after the end (never durable).
fn count_orphans<F: AsRef<[u8]>>(
    files: &[F],
    geometry: RedoGeometry,
    part: u32,
    incarnation: u32,
    start_page: u64,
    end_page: u64,
) -> u64 {
    let mut orphans = 0;
    for page in end_page..start_page + geometry.ring_pages() {
        let position = page % geometry.ring_pages();
        if let PageRead::Valid { header, .. } = read_page(
            page_bytes(files, geometry, position),
            part,
            geometry,
            position,
        ) {
            if header.page >= end_page && header.incarnation >= incarnation {
                orphans += 1;
            }
        }
    }
    orphans
}

/// Where the chain stops.
#[derive(Clone, Copy, Debug)]
struct Stop {
    /// The first page number not in the chain.
    page: u64,
    /// The first byte cut, when something is (a partial record, a torn page).
    cut: Option<Location>,
    /// Why the page is not a continuation (for messages).
    why: &'static str,
}

/// What one step of the walk found.
enum Step {
    /// A whole record (its header); the bytes are at [`Walker::current`].
    Record(RecordHeader),
    /// The end of the chain.
    End(Stop),
}

/// What the page after the current one is to the chain.
enum Follow<'a> {
    /// The next page of the same run.
    Same(Page<'a>),
    /// The first page of a later run.
    NewIncarnation(Page<'a>),
    /// Not written since: zeros, an older lap, or an earlier run's page.
    Stale(&'static str),
    /// Something that is not a continuation: torn, damaged, misplaced.
    Bad(&'static str),
}

#[derive(Clone, Copy)]
struct Page<'a> {
    header: PageHeader,
    body: &'a [u8],
}

/// Where the current record's bytes are.
#[derive(Clone, Copy)]
enum Source<'a> {
    /// In one page of the files.
    Direct(&'a [u8]),
    /// Gathered from several pages into the scratch buffer.
    Scratch,
}

enum Taken<'a> {
    Record(Source<'a>, u64, Location),
    /// A partial record was dropped at the start of a new incarnation.
    Restart,
    End(Stop),
}

/// Walks the chain of pages from a start page, record by record.
struct Walker<'a, F> {
    files: &'a [F],
    geometry: RedoGeometry,
    part: u32,
    page: Page<'a>,
    /// Next byte of the current page's body.
    position: usize,
    incarnation: u32,
    /// The LSN the next record must have.
    expected_lsn: u64,
    /// The next record must be the invalidation a new incarnation begins with.
    incarnation_start: bool,
    max_synced_page: u64,
    /// Per file, the first LSN of its first page, for files entered.
    file_start_lsn: Vec<u64>,
    /// Records that run over pages are gathered here (grows to the largest
    /// record once; the walk allocates nothing else per record).
    scratch: Vec<u8>,
    /// The record the last step found: header, bytes, first byte's place.
    current: Option<(RecordHeader, Source<'a>, Location)>,
}

impl<'a, F: AsRef<[u8]>> Walker<'a, F> {
    fn start(
        files: &'a [F],
        geometry: RedoGeometry,
        part: u32,
        start_page: u64,
    ) -> Result<Walker<'a, F>, RedoError> {
        let position = start_page % geometry.ring_pages();
        let corrupt = || RedoError::Corrupt {
            part,
            at: geometry.location(start_page),
            page: start_page,
            reason: "the start page changed since the part was scanned".to_string(),
        };
        let PageRead::Valid { header, body } = read_page(
            page_bytes(files, geometry, position),
            part,
            geometry,
            position,
        ) else {
            return Err(corrupt());
        };
        let Some(first_record_lsn) = header.first_record_lsn() else {
            return Err(corrupt());
        };
        if header.page != start_page {
            return Err(corrupt());
        }
        let mut walker = Walker {
            files,
            geometry,
            part,
            page: Page { header, body },
            position: header.continuation,
            incarnation: header.incarnation,
            expected_lsn: first_record_lsn,
            incarnation_start: false,
            max_synced_page: 0,
            file_start_lsn: vec![0; geometry.file_count() as usize],
            scratch: Vec::new(),
            current: None,
        };
        walker.enter(Page { header, body }, header.continuation);
        Ok(walker)
    }

    /// The record the last `Step::Record` found.
    fn current(&self) -> Option<Record<'_>> {
        let (header, source, _) = self.current.as_ref()?;
        let bytes = match source {
            Source::Direct(bytes) => *bytes,
            Source::Scratch => &self.scratch[..],
        };
        Some(record_view(header, bytes))
    }

    fn corrupt(&self, page: u64, at: Location, reason: String) -> RedoError {
        RedoError::Corrupt {
            part: self.part,
            at,
            page,
            reason,
        }
    }

    fn at_page(&self, page: u64, reason: String) -> RedoError {
        self.corrupt(page, self.geometry.location(page), reason)
    }

    /// Where byte `offset` of the current page's body is.
    fn location_in_page(&self, offset: usize) -> Location {
        let page = self.geometry.location(self.page.header.page);
        Location {
            file: page.file,
            offset: page.offset + (PAGE_HEADER_BYTES + offset) as u64,
        }
    }

    fn follow(&self, number: u64) -> Follow<'a> {
        let position = number % self.geometry.ring_pages();
        let bytes = page_bytes(self.files, self.geometry, position);
        match read_page(bytes, self.part, self.geometry, position) {
            PageRead::Unwritten => Follow::Stale("the page was never written"),
            PageRead::Invalid(why) => Follow::Bad(why),
            PageRead::Valid { header, body } => {
                let page = Page { header, body };
                if header.page < number {
                    Follow::Stale("the page is from an older lap of the ring")
                } else if header.page > number {
                    Follow::Bad("the page is from a later lap of the ring")
                } else if header.incarnation < self.incarnation {
                    Follow::Stale("the page was left by an earlier run")
                } else if header.incarnation > self.incarnation {
                    Follow::NewIncarnation(page)
                } else {
                    Follow::Same(page)
                }
            }
        }
    }

    fn enter(&mut self, page: Page<'a>, position: usize) {
        self.max_synced_page = self.max_synced_page.max(page.header.synced_page);
        if page
            .header
            .page
            .is_multiple_of(self.geometry.pages_per_file())
        {
            let file = self.geometry.file_of(page.header.page);
            self.file_start_lsn[file] = page.header.first_lsn;
        }
        self.page = page;
        self.position = position;
    }

    fn enter_incarnation(&mut self, page: Page<'a>) -> Result<(), RedoError> {
        let number = page.header.page;
        if page.header.continuation != 0 {
            return Err(self.at_page(
                number,
                "the first page of a new incarnation continues a record".to_string(),
            ));
        }
        if page.header.first_lsn != self.expected_lsn {
            return Err(self.at_page(
                number,
                format!(
                    "a new incarnation starts at LSN {} where LSN {} comes next",
                    page.header.first_lsn, self.expected_lsn
                ),
            ));
        }
        self.incarnation = page.header.incarnation;
        self.incarnation_start = true;
        self.enter(page, 0);
        Ok(())
    }

    fn step(&mut self) -> Result<Step, RedoError> {
        self.current = None;
        loop {
            if self.position == self.page.body.len() {
                let number = self.page.header.page + 1;
                match self.follow(number) {
                    Follow::Same(page) => {
                        if page.header.continuation != 0 {
                            return Err(self.at_page(
                                number,
                                "the page continues a record, but the page before ends on a \
                                 record boundary"
                                    .to_string(),
                            ));
                        }
                        if page.header.first_lsn != self.expected_lsn {
                            return Err(self.at_page(
                                number,
                                format!(
                                    "the page starts at LSN {} where LSN {} comes next",
                                    page.header.first_lsn, self.expected_lsn
                                ),
                            ));
                        }
                        self.enter(page, 0);
                    }
                    Follow::NewIncarnation(page) => self.enter_incarnation(page)?,
                    Follow::Stale(why) => {
                        return Ok(Step::End(Stop {
                            page: number,
                            cut: None,
                            why,
                        }))
                    }
                    Follow::Bad(why) => {
                        return Ok(Step::End(Stop {
                            page: number,
                            cut: Some(self.geometry.location(number)),
                            why,
                        }))
                    }
                }
                continue;
            }
            match self.take_record()? {
                Taken::Restart => continue,
                Taken::End(stop) => return Ok(Step::End(stop)),
                Taken::Record(source, first_page, location) => {
                    return self.finish(source, first_page, location)
                }
            }
        }
    }

    /// Takes the record that starts at the current position, gathering it
    /// from the following pages when it runs over.
    fn take_record(&mut self) -> Result<Taken<'a>, RedoError> {
        let first_page = self.page.header.page;
        let location = self.location_in_page(self.position);
        let body: &'a [u8] = self.page.body;
        let here = &body[self.position..];
        let mut length = None;
        if here.len() >= RECORD_PREFIX_BYTES {
            let stated = record_length(here);
            if !record_length_valid(stated) {
                return Err(self.corrupt(
                    first_page,
                    location,
                    format!("a record states a length of {stated} bytes"),
                ));
            }
            if stated <= here.len() {
                self.position += stated;
                return Ok(Taken::Record(
                    Source::Direct(&here[..stated]),
                    first_page,
                    location,
                ));
            }
            length = Some(stated);
        }
        // The record runs on into the next pages; only a full page ends
        // inside a record (a page closed early ends on a boundary).
        if body.len() != PAGE_BODY_BYTES {
            return Err(self.corrupt(
                first_page,
                location,
                "a record runs past the end of a page that was closed early".to_string(),
            ));
        }
        self.scratch.clear();
        self.scratch.extend_from_slice(here);
        self.position = body.len();
        loop {
            let number = self.page.header.page + 1;
            let page = match self.follow(number) {
                Follow::Same(page) => page,
                Follow::NewIncarnation(page) => {
                    // A restart cut this partial record and began its run here.
                    self.enter_incarnation(page)?;
                    return Ok(Taken::Restart);
                }
                Follow::Stale(why) | Follow::Bad(why) => {
                    return Ok(Taken::End(Stop {
                        page: number,
                        cut: Some(location),
                        why,
                    }))
                }
            };
            if page.header.first_lsn != self.expected_lsn {
                return Err(self.at_page(
                    number,
                    format!(
                        "the page continues LSN {} where LSN {} is in progress",
                        page.header.first_lsn, self.expected_lsn
                    ),
                ));
            }
            let before = self.scratch.len();
            let continuation = page.header.continuation;
            self.scratch.extend_from_slice(&page.body[..continuation]);
            self.enter(page, continuation);
            let total = match length {
                Some(total) => total,
                None if self.scratch.len() >= RECORD_PREFIX_BYTES => {
                    let stated = record_length(&self.scratch);
                    if !record_length_valid(stated) {
                        return Err(self.corrupt(
                            first_page,
                            location,
                            format!("a record states a length of {stated} bytes"),
                        ));
                    }
                    length = Some(stated);
                    stated
                }
                None => {
                    return Err(self.at_page(
                        number,
                        "a page continues a record with too few bytes to hold its length"
                            .to_string(),
                    ))
                }
            };
            let owed = total.saturating_sub(before);
            if continuation != owed.min(PAGE_BODY_BYTES) || owed == 0 {
                return Err(self.at_page(
                    number,
                    format!(
                        "the page continues a record with {continuation} bytes where {owed} \
                         are owed"
                    ),
                ));
            }
            if self.scratch.len() == total {
                return Ok(Taken::Record(Source::Scratch, first_page, location));
            }
        }
    }

    /// Checks a whole record and makes it the current one.
    fn finish(
        &mut self,
        source: Source<'a>,
        first_page: u64,
        location: Location,
    ) -> Result<Step, RedoError> {
        let decoded = match source {
            Source::Direct(bytes) => decode_record_header(bytes),
            Source::Scratch => decode_record_header(&self.scratch),
        };
        // The pages holding the record are whole, so a bad record in them
        // was written bad: damage or a bug, never a torn write.
        let header = decoded.map_err(|why| self.corrupt(first_page, location, why.to_string()))?;
        if self.incarnation_start {
            if header.kind != RecordKind::Invalidate {
                return Err(self.corrupt(
                    first_page,
                    location,
                    "a new incarnation does not begin with an invalidation record".to_string(),
                ));
            }
            self.incarnation_start = false;
        }
        if header.lsn != self.expected_lsn {
            return Err(self.corrupt(
                first_page,
                location,
                format!(
                    "a record has LSN {} where LSN {} comes next",
                    header.lsn, self.expected_lsn
                ),
            ));
        }
        self.expected_lsn += 1;
        self.current = Some((header, source, location));
        Ok(Step::Record(header))
    }
}

/// The records of a scanned part from its start LSN to its end, read again
/// from the files (and checked again: what was read before the scan
/// decided must still be there).
pub struct RecordCursor<'a, F> {
    walker: Option<Walker<'a, F>>,
    part: u32,
    start_lsn: u64,
    last_lsn: u64,
    done: bool,
}

impl<'a, F: AsRef<[u8]>> RecordCursor<'a, F> {
    /// The next record, `None` after the last.
    pub fn next_record(&mut self) -> Result<Option<Record<'_>>, RedoError> {
        if self.advance()?.is_none() {
            return Ok(None);
        }
        Ok(self.current())
    }

    /// Moves to the next record and returns its header (no borrow, so a
    /// caller can decide before looking at the bytes).
    pub(crate) fn advance(&mut self) -> Result<Option<RecordHeader>, RedoError> {
        loop {
            if self.done {
                return Ok(None);
            }
            let Some(walker) = self.walker.as_mut() else {
                return Ok(None);
            };
            match walker.step()? {
                Step::Record(header) => {
                    if header.lsn >= self.last_lsn {
                        self.done = true;
                    }
                    if header.lsn >= self.start_lsn {
                        return Ok(Some(header));
                    }
                }
                Step::End(stop) => {
                    self.done = true;
                    return Err(RedoError::Corrupt {
                        part: self.part,
                        at: stop.cut.unwrap_or(walker.geometry.location(stop.page)),
                        page: stop.page,
                        reason: format!(
                            "the log ends before LSN {}, where it ended when scanned",
                            self.last_lsn
                        ),
                    });
                }
            }
        }
    }

    /// The record `advance` moved to.
    pub(crate) fn current(&self) -> Option<Record<'_>> {
        self.walker.as_ref()?.current()
    }

    /// Where the last record returned starts (for messages about it).
    pub fn location(&self) -> Option<Location> {
        let (_, _, location) = self.walker.as_ref()?.current.as_ref()?;
        Some(*location)
    }
}
