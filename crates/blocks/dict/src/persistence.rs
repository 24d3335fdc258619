//! This dict's schema file (`storage::schema_file`,
//! docs/schema-file-format.md), so that the tables survive a restart of the
//! whole cluster. Every dict, the master and the others, keeps its own copy
//! in its node's data directory: rewritten whole after each create and
//! drop, before the change is confirmed, and read back at start.
//!
//! **Writing** replaces the file atomically: the new file is written under
//! a temporary name, made durable, then renamed over the old one (the file
//! service fsyncs the directory after a rename, so the rename is durable
//! when answered). A crash leaves the old file or the new one, never a mix;
//! at worst a stray temporary file, which the next write cuts and
//! overwrites.
//!
//! ```text
//!  dict                                                 file service
//!   |-- Open{schema/tables.schema.tmp, Create} ------------->|
//!   |-- SetLen{tmp, length of the new file} ---------------->|  cuts what an interrupted
//!   |                                                        |  write left behind
//!   |-- Write{tmp, offset, at most 128 KiB} ---------------->|  until all is written
//!   |-- Sync{tmp} ------------------------------------------>|  the new file is durable
//!   |-- Rename{tmp -> schema/tables.schema} ---------------->|  and in force
//!   (every change the new file holds is confirmed)
//! ```
//!
//! Each request goes out when the previous one is answered, so a write
//! holds at most one section of the pool; when the pool has none free, the
//! request is made again [`FILE_RETRY_DELAY_MS`] later. One write runs at a
//! time: a change made meanwhile waits, and the next write (of the whole
//! schema as it is then) confirms every change that waited. The master
//! serialises schema changes, so in practice at most one waits. A failed
//! request is a storage fault (after a failed fsync the file's state is
//! unknown): the node stops through `Context::fatal` with the service's
//! error, which names the file and the offset.
//!
//! **Reading**, in phase INITIALISE: `Open{schema/tables.schema, Existing}`
//! gives the size (NotFound: no table was ever created here, an initial
//! start), then reads of at most 128 KiB fetch the file, which is decoded
//! and checked before the phase is confirmed. A damaged file stops the
//! node, naming the file and the offset of the damage. In phase
//! RESTORE_SCHEMA the dicts agree on the master's schema
//! (`schema_sync.rs`): another dict whose file differs rewrites it with the
//! master's, the same way as after a change; then the tables go back on
//! this node's tcs and ldms (`restore.rs`).
//!
//! With `DictConfig::diskless` nothing is read or written: changes are
//! confirmed at once and every start is an initial one.

use crate::{Dict, MAX_PARTITIONS};
use kernel::Context;
use signal::codec::{decode_partition_map, encode_partition_map};
use signal::fs::{FileName, FsDone, FsError, FsErrorKind, FsOperation, OpenMode};
use signal::phases;
use signal::schema::TableDef;
use signal::section::MAX_SECTION_BYTES;
use signal::signals::{
    AddTabConf, AlterTabRep, ContinueB, DropTabRep, FsConf, PartitionMap, StartPhaseConf,
};
use signal::{BlockKind, BlockRef, Envelope};
use std::collections::HashSet;
use std::sync::Arc;
use storage::schema_file::{self, Schema, StoredTable};

/// The schema file in force.
pub const SCHEMA_FILE: FileName = FileName::Schema { temporary: false };
/// The next schema file while it is written; renamed over [`SCHEMA_FILE`].
pub const SCHEMA_FILE_TEMPORARY: FileName = FileName::Schema { temporary: true };
/// How long dict waits to ask again for a file operation it could not make
/// (no free section for a write, or none for the io service to read into).
pub const FILE_RETRY_DELAY_MS: u64 = 10;
/// The `ContinueB` job that makes such a request again.
pub(crate) const FILE_RETRY_JOB: u32 = 1;

/// What waits for the schema file to hold a change.
#[derive(Debug)]
pub(crate) enum AfterSave {
    /// The master's running create or drop: answer its client
    /// (`Dict::operation_saved`).
    AnswerClient,
    /// A table the master announced is online here: confirm it.
    ConfirmAdd { master: BlockRef, table_id: u32 },
    /// A table the master dropped is gone here: confirm it.
    ConfirmDrop { master: BlockRef, table_id: u32 },
    /// A table's indexes the master changed are changed here: confirm it.
    ConfirmAlter {
        master: BlockRef,
        table_id: u32,
        revision: u32,
    },
    /// At a restart, this dict took the master's schema in place of its
    /// own: go on restoring (`schema_sync.rs`).
    AgreedSchema,
    /// A master's take-over decided every table: take schema requests
    /// again (`takeover.rs`).
    TakeoverDone,
    /// Nothing waits for it (a schema version a take-over raised).
    Nothing,
}

/// The schema file as read at start, decoded and checked, waiting for
/// phase RESTORE_SCHEMA.
#[derive(Debug)]
pub(crate) struct StoredSchema {
    /// The schema version after the last change the file holds.
    pub(crate) schema_version: u32,
    /// Index = table id: the version that id last had.
    pub(crate) id_versions: Vec<u32>,
    /// Every table, in id order.
    pub(crate) tables: Vec<(Arc<TableDef>, Arc<PartitionMap>)>,
}

/// Where the schema file stands for this dict.
pub(crate) struct SchemaFile {
    /// No file is ever read or written.
    diskless: bool,
    work: FileWork,
    /// Changes made while a write ran; the next write holds them all.
    waiting: Vec<AfterSave>,
    /// The token of the request the file service has not answered yet.
    in_flight: Option<u64>,
    /// The token of the next request.
    next_token: u64,
    /// A `ContinueB` will make the current step's request again.
    retry_scheduled: bool,
}

impl SchemaFile {
    pub(crate) fn new(diskless: bool) -> SchemaFile {
        SchemaFile {
            diskless,
            work: FileWork::Idle,
            waiting: Vec::new(),
            in_flight: None,
            next_token: 1,
            retry_scheduled: false,
        }
    }
}

/// What the file service is doing for dict.
enum FileWork {
    Idle,
    /// Reading the schema file in phase INITIALISE; `membership` gets the
    /// phase's conf when it is read.
    Reading {
        membership: BlockRef,
        step: ReadStep,
        /// What has been read so far.
        bytes: Vec<u8>,
    },
    /// Writing a new schema file; `after` waits until it is in force.
    Writing {
        /// The whole new file.
        bytes: Vec<u8>,
        step: WriteStep,
        after: Vec<AfterSave>,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ReadStep {
    /// Opening the file, to learn its size.
    Open,
    /// Reading the next bytes of a file of `size` bytes.
    Read { size: u64 },
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum WriteStep {
    /// Opening (creating) the temporary file.
    Open,
    /// Setting its length to the new file's.
    SetLen,
    /// Writing the bytes from `offset` (at most one section's worth).
    Write { offset: usize },
    /// Making it durable.
    Sync,
    /// Renaming it over the schema file.
    Rename,
}

/// The end of the chunk written from `offset` of a file of `length` bytes.
pub(crate) fn chunk_end(offset: usize, length: usize) -> usize {
    (offset + MAX_SECTION_BYTES).min(length)
}

impl Dict {
    /// The schema just changed in memory: once the schema file holds the
    /// change, do `after`. At once when diskless.
    pub(crate) fn save_schema(&mut self, after: AfterSave, ctx: &mut dyn Context) {
        if self.schema_file.diskless {
            return self.after_save(after, ctx);
        }
        self.schema_file.waiting.push(after);
        match self.schema_file.work {
            FileWork::Idle => self.start_write(ctx),
            // Its end starts the next write, which holds this change.
            FileWork::Writing { .. } => {}
            FileWork::Reading { .. } => panic!(
                "dict {}: the schema changed before the schema file was read",
                self.address
            ),
        }
    }

    /// Writes the whole schema as it is now; confirms every waiting change
    /// once the file is in force.
    fn start_write(&mut self, ctx: &mut dyn Context) {
        let bytes = schema_file::encode(&self.schema_to_store());
        let after = std::mem::take(&mut self.schema_file.waiting);
        self.schema_file.work = FileWork::Writing {
            bytes,
            step: WriteStep::Open,
            after,
        };
        self.request_file_operation(ctx);
    }

    /// The schema as the file stores it: the version, every id's last
    /// version and every table past its creation, in the encodings of the
    /// wire.
    pub(crate) fn schema_to_store(&self) -> Schema {
        let tables = self
            .tables
            .stored()
            .map(|entry| {
                let map = entry
                    .map
                    .as_ref()
                    .expect("a table past its creation has its distribution");
                let mut map_bytes = Vec::new();
                encode_partition_map(&mut map_bytes, map);
                StoredTable {
                    id: entry.definition.id,
                    version: entry.definition.version,
                    definition: entry.definition.encode_to_vec(),
                    map: map_bytes,
                }
            })
            .collect();
        Schema {
            schema_version: self.schema_version,
            id_versions: self.tables.id_versions().to_vec(),
            tables,
        }
    }

    /// Asks the file service for the current step's operation.
    fn request_file_operation(&mut self, ctx: &mut dyn Context) {
        assert!(
            self.schema_file.in_flight.is_none(),
            "dict {}: one file request at a time",
            self.address
        );
        let operation = match &self.schema_file.work {
            FileWork::Idle => unreachable!("a file request needs a read or a write"),
            FileWork::Reading {
                step: ReadStep::Open,
                ..
            } => FsOperation::Open {
                file: SCHEMA_FILE,
                mode: OpenMode::Existing,
            },
            FileWork::Reading {
                step: ReadStep::Read { size },
                bytes,
                ..
            } => {
                let offset = bytes.len() as u64;
                let len = size.saturating_sub(offset).min(MAX_SECTION_BYTES as u64);
                FsOperation::Read {
                    file: SCHEMA_FILE,
                    offset,
                    len: len as u32,
                }
            }
            FileWork::Writing { step, bytes, .. } => match *step {
                WriteStep::Open => FsOperation::Open {
                    file: SCHEMA_FILE_TEMPORARY,
                    mode: OpenMode::Create,
                },
                WriteStep::SetLen => FsOperation::SetLen {
                    file: SCHEMA_FILE_TEMPORARY,
                    len: bytes.len() as u64,
                },
                WriteStep::Write { offset } => {
                    let chunk = &bytes[offset..chunk_end(offset, bytes.len())];
                    let Some(data) = ctx.pool().copy_from(chunk) else {
                        // Sections come back as signals finish: try again soon.
                        return self.retry_file_request_later(ctx);
                    };
                    FsOperation::Write {
                        file: SCHEMA_FILE_TEMPORARY,
                        offset: offset as u64,
                        data,
                    }
                }
                WriteStep::Sync => FsOperation::Sync {
                    file: SCHEMA_FILE_TEMPORARY,
                },
                WriteStep::Rename => FsOperation::Rename {
                    from: SCHEMA_FILE_TEMPORARY,
                    to: SCHEMA_FILE,
                },
            },
        };
        let token = self.schema_file.next_token;
        self.schema_file.next_token += 1;
        self.schema_file.in_flight = Some(token);
        ctx.fs_request(self.address, token, operation);
    }

    fn retry_file_request_later(&mut self, ctx: &mut dyn Context) {
        if self.schema_file.retry_scheduled {
            return;
        }
        self.schema_file.retry_scheduled = true;
        let retry = Envelope {
            from: self.address,
            to: self.address,
            signal: ContinueB {
                job: FILE_RETRY_JOB,
            }
            .into(),
        };
        ctx.send_delayed(retry, FILE_RETRY_DELAY_MS);
    }

    /// The `ContinueB` of [`FILE_RETRY_JOB`]: make the request again.
    pub(crate) fn retry_file_request(&mut self, ctx: &mut dyn Context) {
        assert!(
            self.schema_file.retry_scheduled,
            "dict {}: a file retry that was never scheduled",
            self.address
        );
        self.schema_file.retry_scheduled = false;
        self.request_file_operation(ctx);
    }

    /// The file service answered the request in flight.
    pub(crate) fn file_answer(&mut self, from: BlockRef, conf: FsConf, ctx: &mut dyn Context) {
        assert!(
            from.kind == BlockKind::Io && from.node == self.address.node,
            "dict {}: FsConf from {from}: only this node's io service answers file requests",
            self.address
        );
        let in_flight = self.schema_file.in_flight.take();
        assert_eq!(
            in_flight,
            Some(conf.token),
            "dict {}: FsConf with token {}, which is not the request in flight ({in_flight:?})",
            self.address,
            conf.token
        );
        match self.schema_file.work {
            FileWork::Reading { .. } => self.read_answer(conf.result, ctx),
            FileWork::Writing { .. } => self.write_answer(conf.result, ctx),
            FileWork::Idle => unreachable!("a request is in flight only while reading or writing"),
        }
    }

    fn write_answer(&mut self, result: Result<FsDone, FsError>, ctx: &mut dyn Context) {
        let done = match result {
            Ok(done) => done,
            Err(error) => ctx.fatal(format!(
                "dict {}: cannot write the schema file: {error}",
                self.address
            )),
        };
        let FileWork::Writing { bytes, step, .. } = &mut self.schema_file.work else {
            unreachable!("write_answer runs while writing");
        };
        let next = match (*step, done) {
            (WriteStep::Open, FsDone::Opened { .. }) => WriteStep::SetLen,
            (WriteStep::SetLen, FsDone::LenSet) => WriteStep::Write { offset: 0 },
            (WriteStep::Write { offset }, FsDone::Written { bytes: written }) => {
                let end = chunk_end(offset, bytes.len());
                assert_eq!(
                    written as usize,
                    end - offset,
                    "the file service writes a whole chunk or fails"
                );
                if end < bytes.len() {
                    WriteStep::Write { offset: end }
                } else {
                    WriteStep::Sync
                }
            }
            (WriteStep::Sync, FsDone::Synced) => WriteStep::Rename,
            (WriteStep::Rename, FsDone::Renamed) => return self.write_done(ctx),
            (step, done) => panic!(
                "dict {}: the file service answered {done:?} to the schema file's {step:?}",
                self.address
            ),
        };
        *step = next;
        self.request_file_operation(ctx);
    }

    /// The new schema file is in force: confirm what it holds, then write
    /// again if the schema changed meanwhile.
    fn write_done(&mut self, ctx: &mut dyn Context) {
        let FileWork::Writing { after, .. } =
            std::mem::replace(&mut self.schema_file.work, FileWork::Idle)
        else {
            unreachable!("write_done ends a write");
        };
        for change in after {
            self.after_save(change, ctx);
        }
        let idle = matches!(self.schema_file.work, FileWork::Idle);
        if idle && !self.schema_file.waiting.is_empty() {
            self.start_write(ctx);
        }
    }

    fn after_save(&mut self, change: AfterSave, ctx: &mut dyn Context) {
        match change {
            AfterSave::AnswerClient => self.operation_saved(ctx),
            AfterSave::ConfirmAdd { master, table_id } => {
                kernel::send(ctx, self.address, master, AddTabConf { table_id })
            }
            AfterSave::ConfirmDrop { master, table_id } => {
                let report = DropTabRep {
                    table_id,
                    busy: false,
                };
                kernel::send(ctx, self.address, master, report)
            }
            AfterSave::ConfirmAlter {
                master,
                table_id,
                revision,
            } => {
                let report = AlterTabRep { table_id, revision };
                kernel::send(ctx, self.address, master, report)
            }
            AfterSave::AgreedSchema => self.agreed_schema_saved(ctx),
            AfterSave::TakeoverDone => self.takeover_saved(ctx),
            AfterSave::Nothing => {}
        }
    }

    /// Phase INITIALISE: read the schema file; `membership` hears once it
    /// is read and checked. At once when diskless.
    pub(crate) fn read_schema_file(&mut self, membership: BlockRef, ctx: &mut dyn Context) {
        if self.schema_file.diskless {
            return self.schema_file_read(membership, None, ctx);
        }
        assert!(
            matches!(self.schema_file.work, FileWork::Idle) && self.stored_schema.is_none(),
            "dict {}: the schema file is read once, at start",
            self.address
        );
        self.schema_file.work = FileWork::Reading {
            membership,
            step: ReadStep::Open,
            bytes: Vec::new(),
        };
        self.request_file_operation(ctx);
    }

    fn read_answer(&mut self, result: Result<FsDone, FsError>, ctx: &mut dyn Context) {
        let FileWork::Reading {
            membership,
            step,
            bytes,
        } = &mut self.schema_file.work
        else {
            unreachable!("read_answer runs while reading");
        };
        let membership = *membership;
        match (*step, result) {
            (ReadStep::Open, Err(error)) if error.kind == FsErrorKind::NotFound => {
                // No table was ever created on this node: an initial start.
                self.schema_file.work = FileWork::Idle;
                return self.schema_file_read(membership, None, ctx);
            }
            (ReadStep::Read { .. }, Err(error)) if error.kind == FsErrorKind::NoBuffer => {
                return self.retry_file_request_later(ctx);
            }
            (_, Err(error)) => ctx.fatal(format!(
                "dict {}: cannot read the schema file: {error}",
                self.address
            )),
            (ReadStep::Open, Ok(FsDone::Opened { size })) => *step = ReadStep::Read { size },
            (ReadStep::Read { .. }, Ok(FsDone::Read { data })) => {
                bytes.extend_from_slice(data.as_slice());
                // A short read before `size` means the file shrank while
                // read: decoding then finds it cut short.
                if data.is_empty() {
                    *step = ReadStep::Read {
                        size: bytes.len() as u64,
                    };
                }
            }
            (step, Ok(done)) => panic!(
                "dict {}: the file service answered {done:?} to the schema file's {step:?}",
                self.address
            ),
        }
        let ReadStep::Read { size } = *step else {
            unreachable!("an opened file is read");
        };
        if (bytes.len() as u64) < size {
            return self.request_file_operation(ctx);
        }
        let bytes = std::mem::take(bytes);
        self.schema_file.work = FileWork::Idle;
        self.schema_file_read(membership, Some(bytes), ctx);
    }

    /// The schema file is read (`None`: there is none): keep what it holds,
    /// and its bytes, for RESTORE_SCHEMA (where the master sends them to the
    /// other dicts, `schema_sync.rs`) and confirm phase INITIALISE. A damaged file stops
    /// the node.
    fn schema_file_read(
        &mut self,
        membership: BlockRef,
        bytes: Option<Vec<u8>>,
        ctx: &mut dyn Context,
    ) {
        if let Some(bytes) = bytes {
            match decode_stored_schema(&bytes) {
                Ok(stored) => {
                    self.stored_schema = Some(stored);
                    self.stored_file = Some(bytes);
                }
                Err(damage) => ctx.fatal(format!(
                    "dict {}: the schema file {SCHEMA_FILE} is unusable at offset {}: {}",
                    self.address, damage.offset, damage.reason
                )),
            }
        }
        let conf = StartPhaseConf {
            phase: phases::INITIALISE,
        };
        kernel::send(ctx, self.address, membership, conf);
    }
}

/// Where a schema file is unusable, and why.
#[derive(Debug)]
pub(crate) struct Damage {
    /// Byte offset in the file.
    pub(crate) offset: usize,
    pub(crate) reason: String,
}

/// Decodes a schema file and checks what `storage` cannot see: that every
/// definition and map decodes, agrees with the entry holding it, and that
/// names are unique. Never panics: bad bytes are a [`Damage`].
pub(crate) fn decode_stored_schema(bytes: &[u8]) -> Result<StoredSchema, Damage> {
    let schema = schema_file::decode(bytes).map_err(|error| Damage {
        offset: error.offset(),
        reason: error.to_string(),
    })?;
    let mut names = HashSet::with_capacity(schema.tables.len());
    // Unique indexes' hidden tables: ids no table and no other index holds.
    let mut hidden_ids = HashSet::new();
    let mut tables = Vec::with_capacity(schema.tables.len());
    for (index, stored) in schema.tables.iter().enumerate() {
        let damage = |reason: String| Damage {
            offset: schema.table_offset(index),
            reason: format!("table {}: {reason}", stored.id),
        };
        let definition = TableDef::decode(&stored.definition)
            .map_err(|error| damage(format!("the definition does not decode: {error}")))?;
        if (definition.id, definition.version) != (stored.id, stored.version) {
            return Err(damage(format!(
                "the definition is of table {} version {}, stored as version {}",
                definition.id, definition.version, stored.version
            )));
        }
        if !(1..=MAX_PARTITIONS).contains(&definition.partitions) {
            return Err(damage(format!(
                "{} partitions, outside 1..={MAX_PARTITIONS}",
                definition.partitions
            )));
        }
        let map = decode_partition_map(&stored.map)
            .map_err(|error| damage(format!("the partition map does not decode: {error}")))?;
        if map.table_id != stored.id {
            return Err(damage(format!(
                "the partition map is of table {}",
                map.table_id
            )));
        }
        if map.partitions.len() != definition.partitions as usize {
            return Err(damage(format!(
                "the partition map places {} partitions, the definition has {}",
                map.partitions.len(),
                definition.partitions
            )));
        }
        if !names.insert(definition.name.clone()) {
            return Err(damage(format!(
                "the name {:?} is stored twice",
                definition.name
            )));
        }
        for index in definition.unique_indexes() {
            let unique = index.unique.expect("a unique index");
            let id = unique.table_id;
            let last_version = schema.id_versions.get(id as usize);
            if !unique.is_assigned() || last_version != Some(&unique.table_version) {
                return Err(damage(format!(
                    "unique index {}'s hidden table {id} version {} is not its id's last \
                     version",
                    index.id, unique.table_version
                )));
            }
            if schema.tables.iter().any(|other| other.id == id) || !hidden_ids.insert(id) {
                return Err(damage(format!(
                    "unique index {}'s hidden table id {id} is another table's",
                    index.id
                )));
            }
        }
        tables.push((Arc::new(definition), Arc::new(map)));
    }
    Ok(StoredSchema {
        schema_version: schema.schema_version,
        id_versions: schema.id_versions,
        tables,
    })
}
