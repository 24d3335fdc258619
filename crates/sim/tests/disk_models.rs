//! The two disks behind `signal::fs::FileStore` answer alike: the io
//! thread's file service over a real directory (production) and the
//! simulated disk (sim, no faults injected) run the same seeded sequence of
//! file operations (opens in every mode, writes, reads across the end,
//! syncs, resizes, allocations, closes, renames, deletes and listings, on
//! existing and missing files) and must give the same answers: the same
//! bytes read, sizes, listings and error kinds (messages differ). A block
//! then sees the same files under the simulator as in a data node.

use datanode::io::FileService;
use kernel::stats::ThreadStats;
use signal::fs::{DirName, FileName, FileStore, FsDone, FsOperation, OpenMode};
use signal::SectionPool;
use sim::disk::Disk;
use std::sync::Arc;
use stdx::mix::XorShift;

/// The files the sequence touches: a few of each kind, in two directories.
fn files() -> Vec<FileName> {
    vec![
        FileName::Redo { part: 0, file: 0 },
        FileName::Redo { part: 0, file: 1 },
        FileName::Redo { part: 1, file: 0 },
        FileName::LcpControl {
            table: 3,
            partition: 1,
            copy: 0,
        },
        FileName::LcpData {
            table: 3,
            partition: 1,
            file: 2,
        },
        FileName::System { copy: 0 },
        FileName::Schema { temporary: true },
        FileName::Schema { temporary: false },
    ]
}

fn directories() -> Vec<DirName> {
    vec![
        DirName::Redo { part: 0 },
        DirName::Redo { part: 1 },
        DirName::Lcp {
            table: 3,
            partition: 1,
        },
    ]
}

/// One random operation; `pool` holds a write's bytes.
fn operation(rng: &mut XorShift, pool: &'static SectionPool) -> FsOperation {
    let files = files();
    let file = files[rng.below(files.len() as u64) as usize];
    match rng.below(11) {
        0 | 1 => FsOperation::Open {
            file,
            mode: [OpenMode::Existing, OpenMode::Create, OpenMode::CreateNew]
                [rng.below(3) as usize],
        },
        2..=4 => {
            let len = rng.below(3000) as usize;
            let bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            FsOperation::Write {
                file,
                offset: rng.below(6000),
                data: pool.copy_from(&bytes).expect("room"),
            }
        }
        5 => FsOperation::Read {
            file,
            offset: rng.below(8000),
            len: rng.below(4000) as u32 + 1,
        },
        6 => FsOperation::Sync { file },
        7 => FsOperation::SetLen {
            file,
            len: rng.below(9000),
        },
        8 => FsOperation::Allocate {
            file,
            len: rng.below(9000),
        },
        9 => {
            if rng.below(2) == 0 {
                FsOperation::Delete { file }
            } else {
                FsOperation::Close { file }
            }
        }
        _ => {
            if rng.below(2) == 0 {
                let to = files[rng.below(files.len() as u64) as usize];
                FsOperation::Rename { from: file, to }
            } else {
                let directories = directories();
                FsOperation::List {
                    dir: directories[rng.below(directories.len() as u64) as usize],
                }
            }
        }
    }
}

/// What an answer says, without the parts that may differ (error texts).
fn summary(answer: Result<FsDone, signal::fs::FsError>) -> String {
    match answer {
        Ok(FsDone::Read { data }) => format!("read {:?}", data.as_slice()),
        Ok(done) => format!("{done:?}"),
        Err(error) => format!(
            "error {:?} of {} at {:?} offset {}",
            error.kind, error.operation, error.target, error.offset
        ),
    }
}

#[test]
fn the_production_and_the_simulated_disk_answer_every_operation_alike() {
    let pool = SectionPool::leak([64, 64, 64, 16, 4, 2]);
    let directory =
        std::env::temp_dir().join(format!("tessera-disk-models-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    // The sequences cover what matters: data read back, errors, listings.
    let (mut reads_with_data, mut errors, mut listings_with_files) = (0, 0, 0);
    for seed in 1..=20u64 {
        let root = directory.join(seed.to_string());
        let mut production = FileService::new(&root, pool, Arc::new(ThreadStats::default()))
            .expect("a data directory");
        let mut simulated = Disk::new(seed, pool);
        let stores: [&mut dyn FileStore; 2] = [&mut production, &mut simulated];
        let [production, simulated] = stores;
        let mut rng = XorShift::new(seed);
        for step in 0..300 {
            // The same operation twice: generated from two equal streams.
            let state = rng.clone();
            let on_production = operation(&mut rng, pool);
            let mut again = state;
            let on_simulated = operation(&mut again, pool);
            let described = format!("{on_production:?}");
            let expected = summary(production.perform(on_production));
            let found = summary(simulated.perform(on_simulated));
            assert_eq!(
                found, expected,
                "seed {seed} step {step}: {described}: the simulated disk answered otherwise"
            );
            reads_with_data += usize::from(found.starts_with("read [") && found != "read []");
            errors += usize::from(found.starts_with("error"));
            listings_with_files +=
                usize::from(found.starts_with("Listed") && !found.contains("files: []"));
        }
    }
    let _ = std::fs::remove_dir_all(&directory);
    assert!(
        reads_with_data > 50 && errors > 50 && listings_with_files > 20,
        "the sequences read data {reads_with_data} times, failed {errors} times and listed \
         files {listings_with_files} times"
    );
}
