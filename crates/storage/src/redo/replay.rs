//! replay: which row changes of a scanned part a restart applies. Records of
//! GCI g and g+1 interleave in a part (docs/design/durability.md §3), so the
//! log is not cut at an LSN but filtered by GCI: a change is applied when
//! its GCI is at most the restored GCI, and no later invalidation record (a
//! restart that restored a lower GCI) voided it.
//!
//! Idempotence is the applier's job, and is what makes this filter enough:
//! every change carries the full after-image and the row id, so the applier
//! makes an insert or update overwrite whatever the row id holds (inserting
//! it if missing) and makes a delete of a missing row do nothing. Changes
//! older than the restored checkpoint, or replayed twice after a crash
//! during replay, then leave the same final state.

use super::format::RecordKind;
use super::scan::{PartScan, RecordCursor};
use super::{Location, Record, RedoError, RowChange};

/// The row changes of a scanned part to apply for `restored_gci`, in LSN
/// order.
pub struct ReplayFilter<'a, F> {
    cursor: RecordCursor<'a, F>,
    restored_gci: u64,
    /// (invalidation LSN, the lowest restored GCI of it and every later
    /// invalidation): a change before that LSN with a higher GCI is void.
    voids: Vec<(u64, u64)>,
    /// The first entry of `voids` after the current record.
    next_void: usize,
}

impl<'a, F: AsRef<[u8]>> ReplayFilter<'a, F> {
    /// The filter over `files` (the bytes `scan` read).
    pub fn new(
        scan: &PartScan,
        files: &'a [F],
        restored_gci: u64,
    ) -> Result<ReplayFilter<'a, F>, RedoError> {
        let mut voids: Vec<(u64, u64)> = scan.invalidations().to_vec();
        let mut lowest = u64::MAX;
        for void in voids.iter_mut().rev() {
            lowest = lowest.min(void.1);
            void.1 = lowest;
        }
        Ok(ReplayFilter {
            cursor: scan.records(files)?,
            restored_gci,
            voids,
            next_void: 0,
        })
    }

    /// The next change to apply, `None` after the last.
    pub fn next_change(&mut self) -> Result<Option<RowChange<'_>>, RedoError> {
        loop {
            let Some(header) = self.cursor.advance()? else {
                return Ok(None);
            };
            if header.kind != RecordKind::RowChange {
                continue;
            }
            while self
                .voids
                .get(self.next_void)
                .is_some_and(|&(lsn, _)| lsn < header.lsn)
            {
                self.next_void += 1;
            }
            let limit = match self.voids.get(self.next_void) {
                Some(&(_, lowest)) => lowest.min(self.restored_gci),
                None => self.restored_gci,
            };
            if header.gci <= limit {
                return match self.cursor.current() {
                    Some(Record::RowChange(change)) => Ok(Some(change)),
                    _ => unreachable!("the cursor stands on the row change it just returned"),
                };
            }
        }
    }

    /// Where the change last returned starts (for a message about it).
    pub fn location(&self) -> Option<Location> {
        self.cursor.location()
    }
}
