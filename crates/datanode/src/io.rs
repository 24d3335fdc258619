//! The io thread: the node's file service in production (NDB's NDBFS).
//!
//! Blocks never touch files (docs/design/processes-and-blocks.md §3); they
//! call `Context::fs_request`, which the block thread's context turns into
//! an [`FsReq`] addressed to `BlockKind::Io` and stages through the
//! job-queue mesh like any signal. The router sends it here. This thread
//! owns the node's data directory, performs each request with `std::fs`
//! (positioned reads and writes, `fdatasync`, a directory fsync after every
//! create, rename and delete) in arrival order, and answers with an
//! [`FsConf`] to the requesting block. An OS error is an answer, never a
//! panic: the block decides whether the node must stop.
//!
//! It lives in `datanode` rather than `kernel` or `transport` because it is
//! the only place that maps the node's config (its `data_dir`) to files;
//! the kernel stays free of file systems, and `transport` is about sockets.
//! It also takes membership's ARBITRATION_REQ, the one request a block
//! makes of mgmd, to the [`Arbiter`] (`arbiter.rs`), which asks on a
//! thread of its own and hands the answer back through this thread.
//! [`FileService`] is the part that does the work, separate from the
//! thread loop so it can be tested without a mesh.

use crate::arbiter::Arbiter;
use kernel::mesh::{Inbox, Outbox, Staging};
use kernel::stats::ThreadStats;
use signal::fs::{FileName, FsDone, FsError, FsErrorKind, FsOperation, OpenMode};
use signal::section::MAX_SECTION_BYTES;
use signal::signals::{FsConf, FsReq};
use signal::{BlockKind, BlockRef, Envelope, NodeId, SectionPool, Signal};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Requests taken from one queue before looking at the next.
const BATCH: usize = 64;

/// Performs file operations inside one directory, keeping files open
/// between operations.
pub struct FileService {
    root: PathBuf,
    open: HashMap<FileName, File>,
    pool: &'static SectionPool,
    stats: Arc<ThreadStats>,
}

/// The top-level directories the file service keeps a node's files in
/// (`signal::fs::DirName`'s roots). `--initial` deletes exactly these, so
/// anything else a user keeps in the data directory survives.
pub const NODE_DIRECTORIES: &[&str] = &["redo", "lcp", "system", "schema", "named"];

/// Deletes every file the node wrote in `root` (an initial start).
pub fn wipe_node_files(root: &Path) -> Result<(), String> {
    for directory in NODE_DIRECTORIES {
        let path = root.join(directory);
        match std::fs::remove_dir_all(&path) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(format!("cannot delete {}: {error}", path.display())),
        }
    }
    Ok(())
}

impl signal::fs::FileStore for FileService {
    fn perform(&mut self, operation: FsOperation) -> Result<FsDone, FsError> {
        FileService::perform(self, operation)
    }
}

impl FileService {
    /// A service for `root`, which is created (with its parents) if missing.
    pub fn new(
        root: &Path,
        pool: &'static SectionPool,
        stats: Arc<ThreadStats>,
    ) -> Result<FileService, String> {
        std::fs::create_dir_all(root)
            .map_err(|error| format!("cannot create data directory {}: {error}", root.display()))?;
        Ok(FileService {
            root: root.to_path_buf(),
            open: HashMap::new(),
            pool,
            stats,
        })
    }

    /// The data directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Performs one operation. Never panics on an OS error.
    pub fn perform(&mut self, operation: FsOperation) -> Result<FsDone, FsError> {
        operation.check_names()?;
        ThreadStats::add(&self.stats.signals, 1);
        let result = self.execute(&operation);
        result.map_err(|error| {
            let kind = match error.kind() {
                io::ErrorKind::NotFound => FsErrorKind::NotFound,
                io::ErrorKind::AlreadyExists => FsErrorKind::AlreadyExists,
                _ => FsErrorKind::Io,
            };
            operation.error(kind, error.to_string())
        })?
    }

    fn path(&self, file: &FileName) -> PathBuf {
        self.root.join(file.relative_path())
    }

    /// The open handle of an existing file.
    fn handle(&mut self, file: FileName) -> io::Result<&File> {
        if !self.open.contains_key(&file) {
            let handle = OpenOptions::new()
                .read(true)
                .write(true)
                .open(self.path(&file))?;
            self.open.insert(file, handle);
        }
        Ok(&self.open[&file])
    }

    /// Fsyncs a directory, so the entries created, renamed or deleted in
    /// it survive a crash.
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        ThreadStats::add(&self.stats.syscalls, 1);
        File::open(dir)?.sync_all()
    }

    /// Creates the directories of `file` that are missing, each made
    /// durable in its parent.
    fn ensure_parent(&self, file: &FileName) -> io::Result<()> {
        let relative = file.dir().relative_path();
        let mut dir = self.root.clone();
        for component in relative.split('/') {
            let parent = dir.clone();
            dir.push(component);
            match std::fs::create_dir(&dir) {
                Ok(()) => self.sync_dir(&parent)?,
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// `Ok(Err(..))` is an error the service found itself (not the OS's).
    fn execute(&mut self, operation: &FsOperation) -> io::Result<Result<FsDone, FsError>> {
        Ok(Ok(match *operation {
            FsOperation::Open { file, mode } => {
                let path = self.path(&file);
                let mut options = OpenOptions::new();
                options.read(true).write(true);
                let created = match mode {
                    OpenMode::Existing => false,
                    OpenMode::Create => !path.exists(),
                    OpenMode::CreateNew => true,
                };
                if created {
                    self.ensure_parent(&file)?;
                    match mode {
                        OpenMode::CreateNew => options.create_new(true),
                        _ => options.create(true),
                    };
                }
                let handle = options.open(&path)?;
                if created {
                    let parent = path.parent().unwrap_or(&self.root).to_path_buf();
                    self.sync_dir(&parent)?;
                }
                let size = handle.metadata()?.len();
                self.open.insert(file, handle);
                FsDone::Opened { size }
            }
            FsOperation::Write {
                file,
                offset,
                ref data,
            } => {
                self.handle(file)?.write_all_at(data.as_slice(), offset)?;
                ThreadStats::add(&self.stats.bytes, data.len() as u64);
                FsDone::Written {
                    bytes: data.len() as u32,
                }
            }
            FsOperation::Read { file, offset, len } => {
                let len = len as usize;
                if len > MAX_SECTION_BYTES {
                    return Ok(Err(operation.error(
                        FsErrorKind::TooLarge,
                        format!("a read of {len} bytes exceeds the largest section ({MAX_SECTION_BYTES})"),
                    )));
                }
                let pool = self.pool;
                let handle = self.handle(file)?;
                let Some(mut data) = pool.alloc(len) else {
                    return Ok(Err(operation.error(
                        FsErrorKind::NoBuffer,
                        format!("no section of {len} bytes free for the data read"),
                    )));
                };
                let mut read = 0;
                while read < len {
                    match handle.read_at(&mut data.as_mut_slice()[read..], offset + read as u64) {
                        Ok(0) => break,
                        Ok(count) => read += count,
                        Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                        Err(error) => return Err(error),
                    }
                }
                data.set_len(read);
                ThreadStats::add(&self.stats.bytes, read as u64);
                FsDone::Read { data }
            }
            FsOperation::Sync { file } => {
                ThreadStats::add(&self.stats.syscalls, 1);
                self.handle(file)?.sync_data()?;
                FsDone::Synced
            }
            FsOperation::SetLen { file, len } => {
                self.handle(file)?.set_len(len)?;
                FsDone::LenSet
            }
            FsOperation::Allocate { file, len } => {
                let handle = self.handle(file)?;
                if handle.metadata()?.len() < len {
                    let len = i64::try_from(len).map_err(|_| {
                        io::Error::new(io::ErrorKind::InvalidInput, "length too large")
                    })?;
                    // SAFETY: the descriptor is open for as long as `handle`.
                    let errno = unsafe { libc::posix_fallocate(handle.as_raw_fd(), 0, len) };
                    match errno {
                        0 => {}
                        // File systems without fallocate: extend instead.
                        libc::EOPNOTSUPP | libc::EINVAL => handle.set_len(len as u64)?,
                        errno => return Err(io::Error::from_raw_os_error(errno)),
                    }
                }
                FsDone::Allocated
            }
            FsOperation::Close { file } => {
                self.open.remove(&file);
                FsDone::Closed
            }
            FsOperation::Delete { file } => {
                self.open.remove(&file);
                let path = self.path(&file);
                std::fs::remove_file(&path)?;
                self.sync_dir(path.parent().unwrap_or(&self.root))?;
                FsDone::Deleted
            }
            FsOperation::Rename { from, to } => {
                self.open.remove(&from);
                self.open.remove(&to);
                self.ensure_parent(&to)?;
                let (from_path, to_path) = (self.path(&from), self.path(&to));
                std::fs::rename(&from_path, &to_path)?;
                let from_dir = from_path.parent().unwrap_or(&self.root);
                let to_dir = to_path.parent().unwrap_or(&self.root);
                self.sync_dir(to_dir)?;
                if from_dir != to_dir {
                    self.sync_dir(from_dir)?;
                }
                FsDone::Renamed
            }
            FsOperation::List { dir } => {
                let path = self.root.join(dir.relative_path());
                let entries = match std::fs::read_dir(&path) {
                    Ok(entries) => entries,
                    Err(error) if error.kind() == io::ErrorKind::NotFound => {
                        return Ok(Ok(FsDone::Listed { files: Vec::new() }))
                    }
                    Err(error) => return Err(error),
                };
                let mut files = Vec::new();
                for entry in entries {
                    let entry = entry?;
                    if !entry.file_type()?.is_file() {
                        continue;
                    }
                    if let Some(file) = entry.file_name().to_str().and_then(|leaf| dir.file(leaf)) {
                        files.push(file);
                    }
                }
                files.sort();
                FsDone::Listed { files }
            }
        }))
    }
}

/// Everything the io thread needs.
pub struct IoThreadSetup {
    /// This node (the service's address is `node:io#0`).
    pub node: NodeId,
    /// Receiving side of the mesh.
    pub inbox: Inbox,
    /// Sending side of the mesh.
    pub outbox: Outbox,
    /// Set to stop the thread.
    pub shutdown: Arc<AtomicBool>,
    /// Counters (shared with the service's).
    pub stats: Arc<ThreadStats>,
    /// Asks mgmd for arbitration, with the receiver of its answers (and
    /// of the runtime's stop request, which takes the same way in).
    pub arbiter: (Arbiter, std::sync::mpsc::Receiver<Envelope>),
}

/// Serves file requests until `shutdown` is set. Call on the thread itself.
pub fn run_io_thread(setup: IoThreadSetup, mut service: FileService) {
    let IoThreadSetup {
        node,
        mut inbox,
        mut outbox,
        shutdown,
        stats,
        arbiter: (arbiter, arbitration_answers),
    } = setup;
    let address = BlockRef::new(node, BlockKind::Io, 0);
    inbox.waker.bind_current_thread();
    let waker = inbox.waker.clone();
    while !shutdown.load(Ordering::Relaxed) {
        let mut handled = inbox.drain(BATCH, |envelope| {
            let (token, operation) = match envelope.signal {
                Signal::FsReq(FsReq { token, operation }) => (token, operation),
                Signal::ArbitrationReq(request) => {
                    arbiter.ask(envelope.from, request, waker.clone());
                    return;
                }
                other => panic!(
                    "signal {} from {} reached the io thread, which serves only FsReq and \
                     ArbitrationReq",
                    other.name(),
                    envelope.from
                ),
            };
            let answer = Envelope {
                from: address,
                to: envelope.from,
                signal: FsConf {
                    token,
                    result: service.perform(operation),
                }
                .into(),
            };
            if let Staging::Local(answer) | Staging::NoRoute(answer) = outbox.stage(answer) {
                panic!("the io thread cannot answer {}: no route", answer.to);
            }
        });
        while let Ok(answer) = arbitration_answers.try_recv() {
            handled += 1;
            if let Staging::Local(answer) | Staging::NoRoute(answer) = outbox.stage(answer) {
                panic!("the io thread cannot answer {}: no route", answer.to);
            }
        }
        let blocked = outbox.flush();
        stats
            .allocations
            .store(stdx::alloc_counter::thread_allocations(), Ordering::Relaxed);
        if handled > 0 {
            continue;
        }
        if blocked {
            std::thread::yield_now();
            continue;
        }
        inbox.waker.prepare_sleep();
        if inbox.has_pending() {
            inbox.waker.cancel_sleep();
            continue;
        }
        ThreadStats::add(&stats.sleeps, 1);
        inbox.waker.park(Duration::from_millis(1000));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use signal::fs::{DirName, RelPath};

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tessera-io-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn service(dir: &Path) -> FileService {
        let pool = SectionPool::leak([8, 4, 4, 2, 2, 2]);
        FileService::new(dir, pool, Arc::new(ThreadStats::default())).expect("temp dir")
    }

    const REDO: FileName = FileName::Redo { part: 1, file: 0 };

    #[test]
    fn write_sync_read_back_list_and_delete() {
        let dir = temp_dir("roundtrip");
        let mut fs = service(&dir.join("node2"));
        let opened = fs.perform(FsOperation::Open {
            file: REDO,
            mode: OpenMode::Create,
        });
        assert_eq!(opened, Ok(FsDone::Opened { size: 0 }));
        let data = fs.pool.copy_from(b"hello redo").expect("room");
        assert_eq!(
            fs.perform(FsOperation::Write {
                file: REDO,
                offset: 100,
                data,
            }),
            Ok(FsDone::Written { bytes: 10 })
        );
        assert_eq!(
            fs.perform(FsOperation::Sync { file: REDO }),
            Ok(FsDone::Synced)
        );
        // Read past the end: short.
        match fs.perform(FsOperation::Read {
            file: REDO,
            offset: 96,
            len: 64,
        }) {
            Ok(FsDone::Read { data }) => assert_eq!(data.as_slice(), b"\0\0\0\0hello redo"),
            other => panic!("read gave {other:?}"),
        }
        assert_eq!(
            std::fs::read(dir.join("node2/redo/1/0.redo")).expect("on disk")[100..],
            *b"hello redo"
        );
        // A second service (a restart) finds the file and its size.
        let mut again = service(&dir.join("node2"));
        assert_eq!(
            again.perform(FsOperation::Open {
                file: REDO,
                mode: OpenMode::Existing,
            }),
            Ok(FsDone::Opened { size: 110 })
        );
        std::fs::write(dir.join("node2/redo/1/stray"), b"x").expect("stray file");
        assert_eq!(
            again.perform(FsOperation::List {
                dir: DirName::Redo { part: 1 }
            }),
            Ok(FsDone::Listed { files: vec![REDO] })
        );
        assert_eq!(
            again.perform(FsOperation::SetLen { file: REDO, len: 4 }),
            Ok(FsDone::LenSet)
        );
        assert_eq!(
            again.perform(FsOperation::Allocate {
                file: REDO,
                len: 1 << 16
            }),
            Ok(FsDone::Allocated)
        );
        assert_eq!(
            std::fs::metadata(dir.join("node2/redo/1/0.redo"))
                .map(|m| m.len())
                .ok(),
            Some(1 << 16)
        );
        let system = FileName::System { copy: 0 };
        assert_eq!(
            again.perform(FsOperation::Rename {
                from: REDO,
                to: system
            }),
            Ok(FsDone::Renamed)
        );
        assert_eq!(
            again.perform(FsOperation::Delete { file: system }),
            Ok(FsDone::Deleted)
        );
        assert_eq!(
            again.perform(FsOperation::List {
                dir: DirName::System
            }),
            Ok(FsDone::Listed { files: vec![] })
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn errors_are_answers_naming_file_and_offset() {
        let dir = temp_dir("errors");
        let mut fs = service(&dir);
        let error = fs
            .perform(FsOperation::Read {
                file: REDO,
                offset: 4096,
                len: 16,
            })
            .expect_err("missing file");
        assert_eq!(error.kind, FsErrorKind::NotFound);
        assert_eq!(error.offset, 4096);
        assert!(
            error
                .to_string()
                .starts_with("read of file redo/1/0.redo at offset 4096: No such file"),
            "{error}"
        );
        let escape = FileName::Named(RelPath::new("../../etc/passwd").expect("short"));
        for operation in [
            FsOperation::Open {
                file: escape,
                mode: OpenMode::Create,
            },
            FsOperation::Delete { file: escape },
            FsOperation::List {
                dir: DirName::Named(RelPath::new("..")),
            },
        ] {
            let error = fs.perform(operation).expect_err("escapes");
            assert_eq!(error.kind, FsErrorKind::InvalidName, "{error}");
        }
        assert!(!dir.join("../etc").exists());
        let named = FileName::Named(RelPath::new("a/b").expect("short"));
        assert!(fs
            .perform(FsOperation::Open {
                file: named,
                mode: OpenMode::CreateNew
            })
            .is_ok());
        assert_eq!(
            fs.perform(FsOperation::Open {
                file: named,
                mode: OpenMode::CreateNew
            })
            .map_err(|error| error.kind),
            Err(FsErrorKind::AlreadyExists)
        );
        assert_eq!(
            fs.perform(FsOperation::Read {
                file: named,
                offset: 0,
                len: MAX_SECTION_BYTES as u32 + 1
            })
            .map_err(|error| error.kind),
            Err(FsErrorKind::TooLarge)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The whole path: a block on a block thread calls `fs_request`, the
/// request crosses the mesh to the io thread, the answer comes back as a
/// signal.
#[cfg(test)]
mod end_to_end {
    use super::*;
    use kernel::block_thread::{self, BlockThreadSetup, ReportSink};
    use kernel::mesh::{self, Router};
    use kernel::stats::ThreadRole;
    use kernel::{Block, Context, Report};
    use signal::signals::ContinueB;
    use std::sync::mpsc;
    use std::time::Instant;

    const NODE: NodeId = NodeId(2);
    const LDM: BlockRef = BlockRef::new(NODE, BlockKind::Ldm, 0);
    const FILE: FileName = FileName::Redo { part: 0, file: 3 };

    struct NoReports;
    impl ReportSink for NoReports {
        fn report(&self, _: Report) {}
    }

    /// Opens, writes, syncs and reads back, then reads a missing file, and
    /// sends each answer to the test.
    struct Writer(mpsc::Sender<(u64, Result<FsDone, FsError>)>);

    impl Block for Writer {
        fn address(&self) -> BlockRef {
            LDM
        }

        fn handle(&mut self, envelope: Envelope, ctx: &mut dyn Context) {
            let (token, result) = match envelope.signal {
                Signal::ContinueB(_) => {
                    let mode = OpenMode::Create;
                    ctx.fs_request(LDM, 1, FsOperation::Open { file: FILE, mode });
                    let data = ctx.pool().copy_from(b"record").expect("room");
                    ctx.fs_request(
                        LDM,
                        2,
                        FsOperation::Write {
                            file: FILE,
                            offset: 8,
                            data,
                        },
                    );
                    ctx.fs_request(LDM, 3, FsOperation::Sync { file: FILE });
                    let read = FsOperation::Read {
                        file: FILE,
                        offset: 8,
                        len: 6,
                    };
                    ctx.fs_request(LDM, 4, read);
                    let missing = FileName::Redo { part: 9, file: 9 };
                    ctx.fs_request(LDM, 5, FsOperation::Sync { file: missing });
                    return;
                }
                Signal::FsConf(FsConf { token, result }) => (token, result),
                other => panic!("unexpected {other:?}"),
            };
            assert_eq!(envelope.from, BlockRef::new(NODE, BlockKind::Io, 0));
            self.0.send((token, result)).expect("test listens");
        }
    }

    #[test]
    fn a_block_reaches_files_through_its_context_and_the_io_thread() {
        let dir = std::env::temp_dir().join(format!("tessera-io-e2e-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let router = Router {
            own_node: NODE,
            tc_threads: vec![],
            ldm_threads: vec![0],
            main_thread: 0,
            send_thread: 2,
            io_thread: Some(1),
        };
        let mut ports = mesh::build(3, router).into_iter();
        let (block_inbox, block_outbox) = ports.next().expect("block thread");
        let (io_inbox, io_outbox) = ports.next().expect("io thread");
        let wakers = [block_inbox.waker.clone(), io_inbox.waker.clone()];
        let (_driver_inbox, mut driver) = ports.next().expect("driver");
        let pool = SectionPool::leak([8, 4, 4, 2, 2, 2]);
        let shutdown = Arc::new(AtomicBool::new(false));
        let io_stats = Arc::new(ThreadStats::default());
        let service = FileService::new(&dir, pool, io_stats.clone()).expect("temp dir");
        let io_setup = IoThreadSetup {
            node: NODE,
            inbox: io_inbox,
            outbox: io_outbox,
            shutdown: shutdown.clone(),
            stats: io_stats.clone(),
            arbiter: crate::arbiter::Arbiter::new(
                NODE,
                "127.0.0.1:1".into(),
                None,
                admission::ClusterSecret::from_bytes(&[7; 32]).expect("a secret"),
            ),
        };
        let io = std::thread::spawn(move || run_io_thread(io_setup, service));
        let (answers, answered) = mpsc::channel();
        let setup = BlockThreadSetup {
            name: "ldm0".into(),
            role: ThreadRole::Ldm,
            inbox: block_inbox,
            outbox: block_outbox,
            pool,
            epoch: Instant::now(),
            stats: Arc::new(ThreadStats::default()),
            reports: Arc::new(NoReports),
            shutdown: shutdown.clone(),
            spin_us: 0,
            seed: 1,
            signs_of_life: Arc::new(kernel::liveness::SignsOfLife::new(1)),
            network: None,
        };
        let blocks: Vec<Box<dyn Block>> = vec![Box::new(Writer(answers))];
        let block = std::thread::spawn(move || block_thread::run(setup, blocks));
        let start = Envelope {
            from: LDM,
            to: LDM,
            signal: ContinueB { job: 0 }.into(),
        };
        assert!(driver.stage(start).not_staged().is_none());
        driver.flush();

        let mut results = Vec::new();
        for _ in 0..5 {
            results.push(
                answered
                    .recv_timeout(Duration::from_secs(10))
                    .expect("an answer"),
            );
        }
        shutdown.store(true, Ordering::SeqCst);
        wakers.iter().for_each(|waker| waker.wake());
        io.join().expect("io thread");
        block.join().expect("block thread");

        let tokens: Vec<u64> = results.iter().map(|(token, _)| *token).collect();
        assert_eq!(tokens, [1, 2, 3, 4, 5], "answered in request order");
        assert_eq!(results[0].1, Ok(FsDone::Opened { size: 0 }));
        assert_eq!(results[1].1, Ok(FsDone::Written { bytes: 6 }));
        assert_eq!(results[2].1, Ok(FsDone::Synced));
        match &results[3].1 {
            Ok(FsDone::Read { data }) => assert_eq!(data.as_slice(), b"record"),
            other => panic!("read gave {other:?}"),
        }
        let error = results[4].1.as_ref().expect_err("missing file");
        assert_eq!(error.kind, FsErrorKind::NotFound);
        assert!(error.to_string().contains("redo/9/9.redo"), "{error}");
        assert_eq!(ThreadStats::get(&io_stats.signals), 5);
        assert_eq!(ThreadStats::get(&io_stats.bytes), 12);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
