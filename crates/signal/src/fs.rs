//! File names and file operations of the node-local file service (a block
//! reaches files only through `Context::fs_request`:
//! docs/design/processes-and-blocks.md §3, docs/design/0003-file-io.md).
//!
//! A block never names a path. It names a file *logically* ([`FileName`]:
//! a redo file of a log part, an LCP control or data file of a partition,
//! a copy of the system file, the schema file) or, for anything else, by a
//! short relative [`RelPath`] that the service places under `named/`. The
//! service (the io thread in production, the disk model in `sim`) maps the
//! name to a path inside the node's data directory with
//! [`FileName::relative_path`], so both agree on the layout:
//!
//! ```text
//! redo/<part>/<file>.redo         FileName::Redo { part, file }
//! lcp/<table>/<partition>/<copy>.ctl   FileName::LcpControl { .. }
//! lcp/<table>/<partition>/<file>.data  FileName::LcpData { .. }
//! system/<copy>.sys               FileName::System { copy }
//! schema/tables.schema            FileName::Schema { temporary: false }
//! schema/tables.schema.tmp        FileName::Schema { temporary: true }
//! named/<relpath>                 FileName::Named(relpath)
//! ```
//!
//! A [`RelPath`] is checked where it meets a file system (both services
//! call [`FileName::check`]), never trusted: one that could leave the data
//! directory (`..`, a leading `/`, empty components, characters outside
//! `[A-Za-z0-9._-]`) is answered with [`FsErrorKind::InvalidName`].

use crate::section::Section;
use std::fmt;

/// Longest [`RelPath`], in bytes (it lives inline in signals).
pub const REL_PATH_MAX: usize = 30;

/// Leaf name of the schema file in force ([`FileName::Schema`]).
const SCHEMA_LEAF: &str = "tables.schema";
/// Leaf name of the schema file being written, renamed over [`SCHEMA_LEAF`].
const SCHEMA_TEMPORARY_LEAF: &str = "tables.schema.tmp";

/// A short relative path, inline (no heap), for files that are not redo,
/// LCP or system files. Only its length is checked when built; its shape
/// is checked by the service ([`RelPath::is_valid`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RelPath {
    len: u8,
    bytes: [u8; REL_PATH_MAX],
}

impl RelPath {
    /// `None` when `path` is longer than [`REL_PATH_MAX`] bytes.
    pub fn new(path: &str) -> Option<RelPath> {
        if path.len() > REL_PATH_MAX {
            return None;
        }
        let mut bytes = [0u8; REL_PATH_MAX];
        bytes[..path.len()].copy_from_slice(path.as_bytes());
        Some(RelPath {
            len: path.len() as u8,
            bytes,
        })
    }

    /// The path (lossy for bytes that are not UTF-8, which never pass
    /// [`RelPath::is_valid`] anyway).
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or("<not utf-8>")
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// True when it stays inside the directory it is joined to: not empty,
    /// relative, components separated by single `/`, none `.` or `..`,
    /// only `[A-Za-z0-9._-]`.
    pub fn is_valid(&self) -> bool {
        let bytes = self.as_bytes();
        !bytes.is_empty()
            && bytes.split(|&b| b == b'/').all(|component| {
                !component.is_empty()
                    && component != b"."
                    && component != b".."
                    && component
                        .iter()
                        .all(|&b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
            })
    }
}

impl fmt::Debug for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// A file of the node, named logically. See the module doc for the layout.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub enum FileName {
    /// File `file` of redo log part `part` (the files of a part form its ring).
    Redo {
        /// Log part.
        part: u32,
        /// File number within the part.
        file: u32,
    },
    /// A control file of a partition's local checkpoints.
    LcpControl {
        /// Table id.
        table: u32,
        /// Partition.
        partition: u32,
        /// Which control file (LCPs alternate between copies).
        copy: u32,
    },
    /// A data file of a partition's local checkpoints.
    LcpData {
        /// Table id.
        table: u32,
        /// Partition.
        partition: u32,
        /// Data file number.
        file: u32,
    },
    /// A copy of the system file (complete GCIs; docs/design/durability.md §2).
    System {
        /// Which copy.
        copy: u32,
    },
    /// dict's schema file (every table; docs/schema-file-format.md), or
    /// the replacement written beside it and then renamed over it.
    Schema {
        /// `false`: `schema/tables.schema`, the file in force; `true`:
        /// `schema/tables.schema.tmp`, a new version being written.
        temporary: bool,
    },
    /// Any other file: `named/<path>`.
    Named(RelPath),
}

/// A directory of the node, for [`FsOperation::List`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub enum DirName {
    /// The files of a redo log part.
    Redo {
        /// Log part.
        part: u32,
    },
    /// The LCP control and data files of a partition.
    Lcp {
        /// Table id.
        table: u32,
        /// Partition.
        partition: u32,
    },
    /// The system file copies.
    System,
    /// The schema file and its replacement.
    Schema,
    /// `named/<path>`; `None` is `named/` itself.
    Named(Option<RelPath>),
}

impl DirName {
    /// The directory's path relative to the data directory (no trailing `/`).
    pub fn relative_path(&self) -> String {
        match self {
            DirName::Redo { part } => format!("redo/{part}"),
            DirName::Lcp { table, partition } => format!("lcp/{table}/{partition}"),
            DirName::System => "system".into(),
            DirName::Schema => "schema".into(),
            DirName::Named(None) => "named".into(),
            DirName::Named(Some(path)) => format!("named/{}", path.as_str()),
        }
    }

    /// Checks a `Named` directory's path ([`RelPath::is_valid`]).
    pub fn check(&self) -> Result<(), FsErrorKind> {
        match self {
            DirName::Named(Some(path)) if !path.is_valid() => Err(FsErrorKind::InvalidName),
            _ => Ok(()),
        }
    }

    /// The file of this directory whose last path component is `leaf`, or
    /// `None` for a name this layout never makes (a stray file, ignored by
    /// listings).
    pub fn file(&self, leaf: &str) -> Option<FileName> {
        let number = |suffix: &str| -> Option<u32> {
            let digits = leaf.strip_suffix(suffix)?;
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            digits.parse().ok()
        };
        match *self {
            DirName::Redo { part } => Some(FileName::Redo {
                part,
                file: number(".redo")?,
            }),
            DirName::Lcp { table, partition } => {
                if let Some(copy) = number(".ctl") {
                    Some(FileName::LcpControl {
                        table,
                        partition,
                        copy,
                    })
                } else {
                    Some(FileName::LcpData {
                        table,
                        partition,
                        file: number(".data")?,
                    })
                }
            }
            DirName::System => Some(FileName::System {
                copy: number(".sys")?,
            }),
            DirName::Schema => match leaf {
                SCHEMA_LEAF => Some(FileName::Schema { temporary: false }),
                SCHEMA_TEMPORARY_LEAF => Some(FileName::Schema { temporary: true }),
                _ => None,
            },
            DirName::Named(dir) => {
                let path = match dir {
                    None => RelPath::new(leaf)?,
                    Some(dir) => RelPath::new(&format!("{}/{leaf}", dir.as_str()))?,
                };
                path.is_valid().then_some(FileName::Named(path))
            }
        }
    }
}

impl FileName {
    /// The directory holding the file.
    pub fn dir(&self) -> DirName {
        match *self {
            FileName::Redo { part, .. } => DirName::Redo { part },
            FileName::LcpControl {
                table, partition, ..
            }
            | FileName::LcpData {
                table, partition, ..
            } => DirName::Lcp { table, partition },
            FileName::System { .. } => DirName::System,
            FileName::Schema { .. } => DirName::Schema,
            FileName::Named(path) => {
                let text = path.as_str();
                DirName::Named(
                    text.rfind('/')
                        .and_then(|slash| RelPath::new(&text[..slash])),
                )
            }
        }
    }

    /// The file's path relative to the data directory.
    pub fn relative_path(&self) -> String {
        match self {
            FileName::Redo { part, file } => format!("redo/{part}/{file}.redo"),
            FileName::LcpControl {
                table,
                partition,
                copy,
            } => format!("lcp/{table}/{partition}/{copy}.ctl"),
            FileName::LcpData {
                table,
                partition,
                file,
            } => format!("lcp/{table}/{partition}/{file}.data"),
            FileName::System { copy } => format!("system/{copy}.sys"),
            FileName::Schema { temporary: false } => format!("schema/{SCHEMA_LEAF}"),
            FileName::Schema { temporary: true } => format!("schema/{SCHEMA_TEMPORARY_LEAF}"),
            FileName::Named(path) => format!("named/{}", path.as_str()),
        }
    }

    /// Checks a `Named` file's path ([`RelPath::is_valid`]); logical names
    /// are always valid.
    pub fn check(&self) -> Result<(), FsErrorKind> {
        match self {
            FileName::Named(path) if !path.is_valid() => Err(FsErrorKind::InvalidName),
            _ => Ok(()),
        }
    }
}

impl fmt::Display for FileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.relative_path())
    }
}

/// How [`FsOperation::Open`] treats an existing or missing file.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum OpenMode {
    /// The file must exist ([`FsErrorKind::NotFound`] otherwise).
    Existing,
    /// Open it, creating it (empty) and its directories when missing.
    Create,
    /// Create it; [`FsErrorKind::AlreadyExists`] when it exists.
    CreateNew,
}

/// One file operation. Operations of one node run in the order the
/// service receives them; each is answered by one [`FsConf`] with the
/// request's token. Write, Read, Sync and SetLen open an existing file as
/// needed (an `Open` first is only needed to create one); a missing file
/// is [`FsErrorKind::NotFound`].
///
/// [`FsConf`]: crate::signals::FsConf
#[derive(Debug)]
pub enum FsOperation {
    /// Open or create `file`. Answer: [`FsDone::Opened`] with its size. A
    /// created file and its directory entry are durable when answered.
    Open {
        /// The file.
        file: FileName,
        /// Existing, create, or create new.
        mode: OpenMode,
    },
    /// Write `data` at `offset`. Answer: [`FsDone::Written`]. Volatile
    /// until a [`FsOperation::Sync`] of the file is answered.
    Write {
        /// The file.
        file: FileName,
        /// Byte offset.
        offset: u64,
        /// The bytes (returned to the pool by the service).
        data: Section,
    },
    /// Read up to `len` bytes at `offset`. Answer: [`FsDone::Read`], short
    /// at the end of the file. `len` is at most the largest section.
    Read {
        /// The file.
        file: FileName,
        /// Byte offset.
        offset: u64,
        /// Bytes wanted.
        len: u32,
    },
    /// Make every write and size change of `file` durable (fdatasync).
    /// Answer: [`FsDone::Synced`]. An error means the writes since the last
    /// successful sync may be lost: the node must stop (fail-fast).
    Sync {
        /// The file.
        file: FileName,
    },
    /// Truncate or extend (with zeros) `file` to `len` bytes. Answer:
    /// [`FsDone::LenSet`]. Volatile until synced.
    SetLen {
        /// The file.
        file: FileName,
        /// New length.
        len: u64,
    },
    /// Reserve space so the file is at least `len` bytes (posix_fallocate;
    /// never shrinks). Answer: [`FsDone::Allocated`].
    Allocate {
        /// The file.
        file: FileName,
        /// Length to reserve.
        len: u64,
    },
    /// Forget the service's open handle of `file` (no effect on data).
    /// Answer: [`FsDone::Closed`], also when it was not open.
    Close {
        /// The file.
        file: FileName,
    },
    /// Delete `file`; durable when answered. Answer: [`FsDone::Deleted`];
    /// a missing file is [`FsErrorKind::NotFound`].
    Delete {
        /// The file.
        file: FileName,
    },
    /// Rename `from` to `to` (replacing `to`); durable when answered.
    /// Answer: [`FsDone::Renamed`].
    Rename {
        /// Existing file.
        from: FileName,
        /// New name.
        to: FileName,
    },
    /// The files of `dir` this layout knows, sorted. Answer:
    /// [`FsDone::Listed`]; a missing directory lists nothing.
    List {
        /// The directory.
        dir: DirName,
    },
}

impl FsOperation {
    /// The operation's name, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            FsOperation::Open { .. } => "open",
            FsOperation::Write { .. } => "write",
            FsOperation::Read { .. } => "read",
            FsOperation::Sync { .. } => "sync",
            FsOperation::SetLen { .. } => "set_len",
            FsOperation::Allocate { .. } => "allocate",
            FsOperation::Close { .. } => "close",
            FsOperation::Delete { .. } => "delete",
            FsOperation::Rename { .. } => "rename",
            FsOperation::List { .. } => "list",
        }
    }

    /// What an error of this operation names: the file (or directory) and
    /// the offset (0 when the operation has none).
    pub fn target(&self) -> (FsTarget, u64) {
        match *self {
            FsOperation::Write { file, offset, .. } | FsOperation::Read { file, offset, .. } => {
                (FsTarget::File(file), offset)
            }
            FsOperation::SetLen { file, len } | FsOperation::Allocate { file, len } => {
                (FsTarget::File(file), len)
            }
            FsOperation::Open { file, .. }
            | FsOperation::Sync { file }
            | FsOperation::Close { file }
            | FsOperation::Delete { file }
            | FsOperation::Rename { from: file, .. } => (FsTarget::File(file), 0),
            FsOperation::List { dir } => (FsTarget::Dir(dir), 0),
        }
    }

    /// An error of this operation.
    pub fn error(&self, kind: FsErrorKind, message: impl Into<String>) -> FsError {
        let (target, offset) = self.target();
        FsError {
            operation: self.name(),
            target,
            offset,
            kind,
            message: message.into(),
        }
    }

    /// Checks every name the operation carries.
    pub fn check_names(&self) -> Result<(), FsError> {
        let checked = match self {
            FsOperation::Rename { from, to } => from.check().and_then(|()| to.check()),
            FsOperation::List { dir } => dir.check(),
            _ => match self.target().0 {
                FsTarget::File(file) => file.check(),
                FsTarget::Dir(dir) => dir.check(),
            },
        };
        checked.map_err(|kind| {
            self.error(
                kind,
                "the name would leave the data directory or is malformed",
            )
        })
    }
}

/// What performs a node's file operations, one at a time in order: the io
/// thread's file service over the data directory in production
/// (`datanode::io::FileService`) and the simulated disk (`sim::disk::Disk`,
/// writes volatile until synced, crashes and faults from a seed). Both
/// answer every operation alike (a test runs the same operations against
/// both), so a block sees the same files in tests as in production.
pub trait FileStore {
    /// Performs `operation`; an OS or disk error is an `Err`, never a panic.
    fn perform(&mut self, operation: FsOperation) -> Result<FsDone, FsError>;
}

/// What an operation did.
#[derive(Debug, PartialEq)]
pub enum FsDone {
    /// Opened; the file's size in bytes.
    Opened {
        /// Size.
        size: u64,
    },
    /// Written (all bytes).
    Written {
        /// Bytes written.
        bytes: u32,
    },
    /// The bytes read (fewer than asked at the end of the file).
    Read {
        /// The data.
        data: Section,
    },
    /// Durable.
    Synced,
    /// Resized.
    LenSet,
    /// Space reserved.
    Allocated,
    /// Handle forgotten.
    Closed,
    /// Deleted.
    Deleted,
    /// Renamed.
    Renamed,
    /// The directory's files, sorted.
    Listed {
        /// The files.
        files: Vec<FileName>,
    },
}

/// Why an operation failed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FsErrorKind {
    /// The file does not exist.
    NotFound,
    /// [`OpenMode::CreateNew`] on an existing file.
    AlreadyExists,
    /// A [`RelPath`] that would leave the data directory or is malformed.
    InvalidName,
    /// A read larger than the largest section.
    TooLarge,
    /// The section pool had no buffer for the data read.
    NoBuffer,
    /// Any other OS error (an fsync failure, a full disk, ...).
    Io,
}

/// What a file or directory error names.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FsTarget {
    /// A file.
    File(FileName),
    /// A directory.
    Dir(DirName),
}

impl fmt::Display for FsTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FsTarget::File(file) => write!(f, "file {}", file.relative_path()),
            FsTarget::Dir(dir) => write!(f, "directory {}", dir.relative_path()),
        }
    }
}

/// A failed operation: which, on what, where, why (the OS's words).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FsError {
    /// The operation ([`FsOperation::name`]).
    pub operation: &'static str,
    /// The file or directory.
    pub target: FsTarget,
    /// Byte offset (or length for set_len/allocate; 0 when none).
    pub offset: u64,
    /// Classified cause.
    pub kind: FsErrorKind,
    /// The OS error text (or the service's).
    pub message: String,
}

impl fmt::Display for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of {} at offset {}: {}",
            self.operation, self.target, self.offset, self.message
        )
    }
}

impl std::error::Error for FsError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(path: &str) -> FileName {
        FileName::Named(RelPath::new(path).expect("short"))
    }

    #[test]
    fn rel_paths_that_leave_the_directory_are_invalid() {
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a//b",
            "a/./b",
            "a/",
            "a b",
            "a\\b",
        ] {
            assert!(!RelPath::new(bad).expect("short").is_valid(), "{bad:?}");
        }
        for good in ["x", "a/b.c", "under_score-1/v.2"] {
            assert!(RelPath::new(good).expect("short").is_valid(), "{good:?}");
        }
        assert!(RelPath::new(&"x".repeat(REL_PATH_MAX + 1)).is_none());
        assert_eq!(named("../x").check(), Err(FsErrorKind::InvalidName));
    }

    #[test]
    fn every_file_is_found_again_in_its_directory() {
        let files = [
            FileName::Redo { part: 3, file: 12 },
            FileName::LcpControl {
                table: 7,
                partition: 2,
                copy: 1,
            },
            FileName::LcpData {
                table: 7,
                partition: 2,
                file: 40,
            },
            FileName::System { copy: 0 },
            FileName::Schema { temporary: false },
            FileName::Schema { temporary: true },
            named("top"),
            named("deep/er/file.bin"),
        ];
        for file in files {
            let path = file.relative_path();
            let dir = file.dir();
            let (parent, leaf) = path.rsplit_once('/').expect("a file is in a directory");
            assert_eq!(parent, dir.relative_path(), "{file:?}");
            assert_eq!(dir.file(leaf), Some(file), "{file:?}");
        }
        assert_eq!(DirName::Redo { part: 0 }.file("x.redo"), None);
        assert_eq!(DirName::System.file("+1.sys"), None);
        assert_eq!(DirName::Schema.file("tables.schema.old"), None);
        assert_eq!(
            FileName::Schema { temporary: true }.relative_path(),
            "schema/tables.schema.tmp"
        );
    }

    #[test]
    fn errors_name_operation_file_and_offset() {
        let op = FsOperation::Read {
            file: FileName::Redo { part: 1, file: 2 },
            offset: 4096,
            len: 10,
        };
        let error = op.error(FsErrorKind::NotFound, "No such file or directory");
        assert_eq!(
            error.to_string(),
            "read of file redo/1/2.redo at offset 4096: No such file or directory"
        );
        let escape = FsOperation::Rename {
            from: named("ok"),
            to: named("../../x"),
        };
        assert_eq!(
            escape.check_names().map_err(|error| error.kind),
            Err(FsErrorKind::InvalidName)
        );
    }
}
