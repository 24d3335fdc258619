//! The simulated disk of one data node (docs/design/testing.md §3: lost
//! unsynced writes, torn writes, bit flips, fsync errors), serving the same
//! [`FsOperation`]s as the production io thread, with the same names and
//! the same errors, deterministically from a seed.
//!
//! Each file keeps two images: `durable` (what the platter holds: the state
//! after the last successful sync) and `current` (what reads see: durable
//! plus the unsynced changes, kept in order as `pending`). A sync moves
//! `current` to `durable`. [`Disk::crash`] throws the page cache away: of
//! each file's unsynced changes, a random prefix (possibly none) reached
//! the platter in order, and the last of those may be torn (only a random
//! prefix of its bytes landed); the rest are lost. Creating, renaming and
//! deleting a file are durable when answered, as the io thread fsyncs the
//! directory before it answers.
//!
//! Faults drawn from the seed ([`DiskFaults`]): a sync may fail (and, as
//! on Linux after a failed fsync, the changes it should have made durable
//! are no longer guaranteed: a crash loses them), and a write may be stored
//! with one bit flipped. [`Disk::flip_bit`] corrupts a stored byte on
//! demand.
//!
//! Effects apply when the request is made; the answer arrives after a
//! simulated latency ([`Disk::completion_us`]), in request order per node,
//! as from the production io thread's single queue.

use signal::fs::{FileName, FsDone, FsError, FsErrorKind, FsOperation, OpenMode};
use signal::section::MAX_SECTION_BYTES;
use signal::SectionPool;
use std::collections::BTreeMap;
use stdx::mix::XorShift;

/// Latency of a read or write: [`DATA_LATENCY_MIN_US`] to [`DATA_LATENCY_MAX_US`].
pub const DATA_LATENCY_MIN_US: u64 = 10;
/// See [`DATA_LATENCY_MIN_US`].
pub const DATA_LATENCY_MAX_US: u64 = 100;
/// Latency of a sync: [`SYNC_LATENCY_MIN_US`] to [`SYNC_LATENCY_MAX_US`].
pub const SYNC_LATENCY_MIN_US: u64 = 200;
/// See [`SYNC_LATENCY_MIN_US`].
pub const SYNC_LATENCY_MAX_US: u64 = 2_000;
/// Latency of any other operation (open, delete, rename, list, resize):
/// up to this many microseconds, at least [`DATA_LATENCY_MIN_US`].
pub const META_LATENCY_MAX_US: u64 = 300;

/// Faults the disk injects, in parts per million of the operations they
/// can hit. Zero (the default) injects none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskFaults {
    /// A sync fails with an I/O error.
    pub sync_error_ppm: u32,
    /// A write is stored with one random bit flipped.
    pub bit_flip_ppm: u32,
}

/// An unsynced change of a file.
#[derive(Clone, Debug)]
enum Pending {
    Write { offset: u64, data: Vec<u8> },
    SetLen(u64),
}

#[derive(Clone, Debug, Default)]
struct SimFile {
    durable: Vec<u8>,
    current: Vec<u8>,
    pending: Vec<Pending>,
}

fn apply(image: &mut Vec<u8>, change: &Pending) {
    match change {
        Pending::Write { offset, data } => {
            let start = *offset as usize;
            let end = start + data.len();
            if image.len() < end {
                image.resize(end, 0);
            }
            image[start..end].copy_from_slice(data);
        }
        Pending::SetLen(len) => image.resize(*len as usize, 0),
    }
}

/// What a crash did to the disk, for tests and traces.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CrashOutcome {
    /// Unsynced changes that reached the platter whole.
    pub kept: usize,
    /// Unsynced writes that reached it torn.
    pub torn: usize,
    /// Unsynced changes lost.
    pub lost: usize,
}

/// One node's disk.
pub struct Disk {
    files: BTreeMap<FileName, SimFile>,
    rng: XorShift,
    faults: DiskFaults,
    busy_until_us: u64,
    pool: &'static SectionPool,
}

impl signal::fs::FileStore for Disk {
    fn perform(&mut self, operation: FsOperation) -> Result<FsDone, FsError> {
        Disk::perform(self, operation)
    }
}

impl Disk {
    /// Deletes every file (a node started with `--initial`).
    pub fn wipe(&mut self) {
        self.files.clear();
    }

    /// An empty disk whose faults and latencies come from `seed`.
    pub fn new(seed: u64, pool: &'static SectionPool) -> Disk {
        Disk {
            files: BTreeMap::new(),
            rng: XorShift::new(seed),
            faults: DiskFaults::default(),
            busy_until_us: 0,
            pool,
        }
    }

    /// Sets the faults to inject from now on.
    pub fn set_faults(&mut self, faults: DiskFaults) {
        self.faults = faults;
    }

    fn chance(&mut self, ppm: u32) -> bool {
        ppm > 0 && self.rng.below(1_000_000) < u64::from(ppm)
    }

    /// When the answer to `operation`, requested at `now_us`, arrives: a
    /// random latency for its kind, never before the previous answer.
    pub fn completion_us(&mut self, now_us: u64, operation: &FsOperation) -> u64 {
        let (min, max) = match operation {
            FsOperation::Write { .. } | FsOperation::Read { .. } => {
                (DATA_LATENCY_MIN_US, DATA_LATENCY_MAX_US)
            }
            FsOperation::Sync { .. } => (SYNC_LATENCY_MIN_US, SYNC_LATENCY_MAX_US),
            _ => (DATA_LATENCY_MIN_US, META_LATENCY_MAX_US),
        };
        let done = (now_us + min + self.rng.below(max - min + 1)).max(self.busy_until_us);
        self.busy_until_us = done;
        done
    }

    /// The files on the disk, sorted.
    pub fn files(&self) -> impl Iterator<Item = &FileName> {
        self.files.keys()
    }

    /// What reads of `file` see now.
    pub fn contents(&self, file: &FileName) -> Option<&[u8]> {
        self.files.get(file).map(|f| f.current.as_slice())
    }

    /// What `file` holds as of its last successful sync.
    pub fn durable_contents(&self, file: &FileName) -> Option<&[u8]> {
        self.files.get(file).map(|f| f.durable.as_slice())
    }

    /// Flips bit `bit` (0..8) of byte `offset` of `file` as stored (both
    /// images): corruption at rest. False when the file has no such byte.
    pub fn flip_bit(&mut self, file: &FileName, offset: u64, bit: u8) -> bool {
        let Some(sim) = self.files.get_mut(file) else {
            return false;
        };
        let mask = 1u8 << (bit % 8);
        let mut flipped = false;
        for image in [&mut sim.durable, &mut sim.current] {
            if let Some(byte) = image.get_mut(offset as usize) {
                *byte ^= mask;
                flipped = true;
            }
        }
        flipped
    }

    /// The node crashed: the page cache is gone. See the module doc.
    pub fn crash(&mut self) -> CrashOutcome {
        let mut outcome = CrashOutcome::default();
        for sim in self.files.values_mut() {
            let pending = std::mem::take(&mut sim.pending);
            let reached = self.rng.below(pending.len() as u64 + 1) as usize;
            for (index, change) in pending.iter().enumerate() {
                if index >= reached {
                    outcome.lost += 1;
                    continue;
                }
                let last = index + 1 == reached;
                match change {
                    Pending::Write { offset, data } if last && self.rng.below(2) == 0 => {
                        let keep = self.rng.below(data.len() as u64 + 1) as usize;
                        let torn = Pending::Write {
                            offset: *offset,
                            data: data[..keep].to_vec(),
                        };
                        apply(&mut sim.durable, &torn);
                        outcome.torn += 1;
                    }
                    change => {
                        apply(&mut sim.durable, change);
                        outcome.kept += 1;
                    }
                }
            }
            sim.current = sim.durable.clone();
        }
        outcome
    }

    fn existing(
        &mut self,
        operation: &FsOperation,
        file: &FileName,
    ) -> Result<&mut SimFile, FsError> {
        match self.files.get_mut(file) {
            Some(sim) => Ok(sim),
            None => Err(operation.error(
                FsErrorKind::NotFound,
                "No such file or directory (os error 2)",
            )),
        }
    }

    /// Performs one operation, as the io thread would.
    pub fn perform(&mut self, operation: FsOperation) -> Result<FsDone, FsError> {
        operation.check_names()?;
        let op = &operation;
        Ok(match operation {
            FsOperation::Open { file, mode } => {
                let exists = self.files.contains_key(&file);
                match (mode, exists) {
                    (OpenMode::Existing, false) => {
                        return Err(op.error(
                            FsErrorKind::NotFound,
                            "No such file or directory (os error 2)",
                        ))
                    }
                    (OpenMode::CreateNew, true) => {
                        return Err(
                            op.error(FsErrorKind::AlreadyExists, "File exists (os error 17)")
                        )
                    }
                    _ => {}
                }
                let sim = self.files.entry(file).or_default();
                FsDone::Opened {
                    size: sim.current.len() as u64,
                }
            }
            FsOperation::Write {
                file,
                offset,
                ref data,
            } => {
                let mut bytes = data.as_slice().to_vec();
                if !bytes.is_empty() && self.chance(self.faults.bit_flip_ppm) {
                    let bit = self.rng.below(bytes.len() as u64 * 8);
                    bytes[(bit / 8) as usize] ^= 1 << (bit % 8);
                }
                let sim = self.existing(op, &file)?;
                let change = Pending::Write {
                    offset,
                    data: bytes,
                };
                apply(&mut sim.current, &change);
                sim.pending.push(change);
                FsDone::Written {
                    bytes: data.len() as u32,
                }
            }
            FsOperation::Read { file, offset, len } => {
                let len = len as usize;
                if len > MAX_SECTION_BYTES {
                    return Err(op.error(
                        FsErrorKind::TooLarge,
                        format!("a read of {len} bytes exceeds the largest section ({MAX_SECTION_BYTES})"),
                    ));
                }
                let pool = self.pool;
                let sim = self.existing(op, &file)?;
                let start = (offset as usize).min(sim.current.len());
                let end = (start + len).min(sim.current.len());
                let Some(data) = pool.copy_from(&sim.current[start..end]) else {
                    return Err(op.error(
                        FsErrorKind::NoBuffer,
                        format!("no section of {len} bytes free for the data read"),
                    ));
                };
                FsDone::Read { data }
            }
            FsOperation::Sync { file } => {
                self.existing(op, &file)?;
                let failed = self.chance(self.faults.sync_error_ppm);
                let sim = self.existing(op, &file)?;
                if failed {
                    // As Linux after a failed fsync: the changes are no
                    // longer dirty, yet not durable; a crash loses them.
                    sim.pending.clear();
                    return Err(op.error(
                        FsErrorKind::Io,
                        "Input/output error (os error 5) (simulated)",
                    ));
                }
                sim.pending.clear();
                sim.durable = sim.current.clone();
                FsDone::Synced
            }
            FsOperation::SetLen { file, len } => {
                let sim = self.existing(op, &file)?;
                let change = Pending::SetLen(len);
                apply(&mut sim.current, &change);
                sim.pending.push(change);
                FsDone::LenSet
            }
            FsOperation::Allocate { file, len } => {
                let sim = self.existing(op, &file)?;
                if (sim.current.len() as u64) < len {
                    // Reserved space is metadata made durable with the file.
                    let change = Pending::SetLen(len);
                    apply(&mut sim.current, &change);
                    sim.pending.push(change);
                }
                FsDone::Allocated
            }
            FsOperation::Close { .. } => FsDone::Closed,
            FsOperation::Delete { file } => {
                self.existing(op, &file)?;
                self.files.remove(&file);
                FsDone::Deleted
            }
            FsOperation::Rename { from, to } => {
                self.existing(op, &from)?;
                let sim = self.files.remove(&from).expect("checked above");
                self.files.insert(to, sim);
                FsDone::Renamed
            }
            FsOperation::List { dir } => FsDone::Listed {
                files: self
                    .files
                    .keys()
                    .filter(|file| file.dir() == dir)
                    .copied()
                    .collect(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use signal::fs::{DirName, RelPath};

    const FILE: FileName = FileName::Redo { part: 0, file: 0 };

    fn pool() -> &'static SectionPool {
        SectionPool::leak([64, 8, 4, 2, 2, 2])
    }

    fn disk(seed: u64) -> Disk {
        let mut disk = Disk::new(seed, pool());
        let opened = disk.perform(FsOperation::Open {
            file: FILE,
            mode: OpenMode::Create,
        });
        assert_eq!(opened, Ok(FsDone::Opened { size: 0 }));
        disk
    }

    fn write(disk: &mut Disk, offset: u64, bytes: &[u8]) {
        let data = disk.pool.copy_from(bytes).expect("room");
        let written = disk.perform(FsOperation::Write {
            file: FILE,
            offset,
            data,
        });
        assert_eq!(
            written,
            Ok(FsDone::Written {
                bytes: bytes.len() as u32
            })
        );
    }

    fn read(disk: &mut Disk, offset: u64, len: u32) -> Vec<u8> {
        match disk.perform(FsOperation::Read {
            file: FILE,
            offset,
            len,
        }) {
            Ok(FsDone::Read { data }) => data.as_slice().to_vec(),
            other => panic!("read gave {other:?}"),
        }
    }

    #[test]
    fn synced_writes_survive_a_crash_and_unsynced_ones_do_not_all() {
        let mut disk = disk(1);
        write(&mut disk, 0, b"durable!");
        assert_eq!(
            disk.perform(FsOperation::Sync { file: FILE }),
            Ok(FsDone::Synced)
        );
        write(&mut disk, 8, b"volatile");
        assert_eq!(
            read(&mut disk, 0, 64),
            b"durable!volatile",
            "reads see unsynced writes"
        );
        assert_eq!(disk.durable_contents(&FILE), Some(&b"durable!"[..]));
        disk.crash();
        let after = disk.contents(&FILE).expect("file survives").to_vec();
        assert!(
            after.starts_with(b"durable!"),
            "synced data kept: {after:?}"
        );
        assert!(
            b"durable!volatile".starts_with(&after),
            "at most a prefix of the unsynced write: {after:?}"
        );
    }

    /// Over many seeds, every outcome of the crash rule happens, and only
    /// those: the unsynced writes reach the disk in order up to some point,
    /// the last one reached possibly torn.
    #[test]
    fn a_crash_keeps_an_ordered_prefix_of_unsynced_writes_the_last_maybe_torn() {
        let (mut all_lost, mut torn, mut all_kept) = (0, 0, 0);
        for seed in 0..400 {
            let mut disk = disk(seed);
            write(&mut disk, 0, b"AAAA");
            write(&mut disk, 4, b"BBBB");
            write(&mut disk, 8, b"CCCC");
            let outcome = disk.crash();
            assert_eq!(outcome.kept + outcome.torn + outcome.lost, 3);
            let after = disk.contents(&FILE).expect("file").to_vec();
            assert!(
                b"AAAABBBBCCCC".starts_with(&after),
                "seed {seed}: {after:?}"
            );
            let whole = 4 * outcome.kept;
            match outcome.torn {
                0 => assert_eq!(after.len(), whole, "seed {seed}: {outcome:?}"),
                1 => assert!((whole..=whole + 4).contains(&after.len()), "seed {seed}"),
                _ => panic!("seed {seed}: only the last write reached may be torn"),
            }
            match after.len() {
                0 if outcome.torn == 0 => all_lost += 1,
                12 if outcome.torn == 0 => all_kept += 1,
                _ => torn += usize::from(outcome.torn > 0),
            }
            // The crash made the image durable: a second crash changes nothing.
            disk.crash();
            assert_eq!(disk.contents(&FILE), Some(&after[..]));
        }
        assert!(
            all_lost > 0 && torn > 0 && all_kept > 0,
            "{all_lost} {torn} {all_kept}"
        );
    }

    #[test]
    fn unsynced_size_changes_are_volatile_and_creation_is_durable() {
        let mut disk = disk(3);
        write(&mut disk, 0, b"0123456789");
        assert_eq!(
            disk.perform(FsOperation::Sync { file: FILE }),
            Ok(FsDone::Synced)
        );
        assert_eq!(
            disk.perform(FsOperation::SetLen { file: FILE, len: 2 }),
            Ok(FsDone::LenSet)
        );
        assert_eq!(read(&mut disk, 0, 64), b"01");
        // Seed 3 decides; either the truncation reached the disk or not.
        disk.crash();
        let after = disk.contents(&FILE).expect("created files are durable");
        assert!(after == b"01" || after == b"0123456789", "{after:?}");
    }

    #[test]
    fn same_seed_same_crash() {
        let run = |seed| {
            let mut disk = disk(seed);
            for i in 0..20u8 {
                write(&mut disk, u64::from(i) * 3, &[i; 5]);
            }
            let outcome = disk.crash();
            (outcome, disk.contents(&FILE).expect("file").to_vec())
        };
        assert_eq!(run(42), run(42));
    }

    #[test]
    fn a_failed_sync_is_an_error_and_its_writes_are_lost_in_a_crash() {
        let mut disk = disk(5);
        disk.set_faults(DiskFaults {
            sync_error_ppm: 1_000_000,
            bit_flip_ppm: 0,
        });
        write(&mut disk, 0, b"lost");
        let error = disk
            .perform(FsOperation::Sync { file: FILE })
            .expect_err("injected");
        assert_eq!(error.kind, FsErrorKind::Io);
        assert!(
            error
                .to_string()
                .starts_with("sync of file redo/0/0.redo at offset 0"),
            "{error}"
        );
        assert_eq!(read(&mut disk, 0, 4), b"lost", "still in the page cache");
        disk.crash();
        assert_eq!(disk.contents(&FILE), Some(&[][..]));
    }

    #[test]
    fn bit_flips_corrupt_writes_and_stored_bytes() {
        let mut disk = disk(6);
        disk.set_faults(DiskFaults {
            sync_error_ppm: 0,
            bit_flip_ppm: 1_000_000,
        });
        write(&mut disk, 0, &[0u8; 16]);
        let stored = read(&mut disk, 0, 16);
        assert_eq!(stored.iter().map(|b| b.count_ones()).sum::<u32>(), 1);
        disk.set_faults(DiskFaults::default());
        assert_eq!(
            disk.perform(FsOperation::Sync { file: FILE }),
            Ok(FsDone::Synced)
        );
        let before = read(&mut disk, 0, 16);
        assert!(disk.flip_bit(&FILE, 3, 7));
        let after = read(&mut disk, 0, 16);
        assert_eq!(before[3] ^ after[3], 0x80);
        disk.crash();
        assert_eq!(
            disk.contents(&FILE),
            Some(&after[..]),
            "the flip is at rest"
        );
        assert!(!disk.flip_bit(&FILE, 16, 0));
    }

    #[test]
    fn errors_and_metadata_match_the_io_thread() {
        let mut disk = disk(7);
        let missing = FileName::System { copy: 1 };
        let error = disk
            .perform(FsOperation::Read {
                file: missing,
                offset: 512,
                len: 8,
            })
            .expect_err("missing");
        assert_eq!((error.kind, error.offset), (FsErrorKind::NotFound, 512));
        let escape = FileName::Named(RelPath::new("../x").expect("short"));
        let refused = disk.perform(FsOperation::Open {
            file: escape,
            mode: OpenMode::Create,
        });
        assert_eq!(
            refused.map_err(|error| error.kind),
            Err(FsErrorKind::InvalidName)
        );
        assert_eq!(
            disk.perform(FsOperation::Open {
                file: FILE,
                mode: OpenMode::CreateNew
            })
            .map_err(|error| error.kind),
            Err(FsErrorKind::AlreadyExists)
        );
        assert_eq!(
            disk.perform(FsOperation::Rename {
                from: FILE,
                to: missing
            }),
            Ok(FsDone::Renamed)
        );
        assert_eq!(
            disk.perform(FsOperation::List {
                dir: DirName::System
            }),
            Ok(FsDone::Listed {
                files: vec![missing]
            })
        );
        assert_eq!(
            disk.perform(FsOperation::List {
                dir: DirName::Redo { part: 0 }
            }),
            Ok(FsDone::Listed { files: vec![] })
        );
        assert_eq!(
            disk.perform(FsOperation::Delete { file: missing }),
            Ok(FsDone::Deleted)
        );
        disk.crash();
        assert_eq!(disk.files().count(), 0, "the delete was durable");
    }

    #[test]
    fn answers_come_in_request_order_after_a_latency() {
        let mut disk = disk(8);
        let sync = FsOperation::Sync { file: FILE };
        let close = FsOperation::Close { file: FILE };
        let first = disk.completion_us(1_000, &sync);
        assert!((1_000 + SYNC_LATENCY_MIN_US..=1_000 + SYNC_LATENCY_MAX_US).contains(&first));
        let second = disk.completion_us(1_000, &close);
        assert!(second >= first, "a quick operation waits behind a slow one");
    }
}
