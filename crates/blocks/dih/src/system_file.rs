//! This node's system file (docs/design/durability.md §2, §5; format in
//! docs/system-file-format.md, logic in `storage::system_file`): read once
//! at start (phase INITIALISE), rewritten when the master records a GCI
//! complete (COPY_GCIREQ) and when a restart has restored the node.
//!
//! An update writes the older copy, fsyncs, writes the other copy, fsyncs
//! (`WritePlan`); the five requests go to the io thread at once (it keeps
//! their order) and the update is done when the last is answered. One
//! update at a time: the master runs one COPY_GCI round at a time, and the
//! restart's update comes before the first. Any I/O error, a record of
//! another node, or both copies damaged stops the node.

use kernel::{Context, Report};
use signal::fs::{FileName, FsDone, FsError, FsErrorKind, FsOperation, OpenMode};
use signal::BlockRef;
use storage::system_file::{choose, SystemFile, WritePlan, FILE_BYTES, SLOT_BYTES};

/// The one system file of a node (both copies live in it).
const FILE: FileName = FileName::System { copy: 0 };

/// Tokens of dih's io requests.
pub(crate) mod token {
    /// The read at start.
    pub const READ: u64 = 1;
    /// A step of an update; the last step answers with `UPDATE_DONE`.
    pub const UPDATE_STEP: u64 = 2;
    /// The last step of an update.
    pub const UPDATE_DONE: u64 = 3;
}

/// What the node's system file holds, and the update in progress.
pub(crate) struct SystemFileState {
    node_id: u16,
    /// The newest record (read at start or last written); `None` before the
    /// first one (an initial start).
    pub(crate) record: Option<SystemFile>,
    /// The file exists on disk.
    exists: bool,
    plan: WritePlan,
    /// An update is in flight.
    updating: bool,
}

impl SystemFileState {
    pub(crate) fn new(node_id: u16) -> SystemFileState {
        SystemFileState {
            node_id,
            record: None,
            exists: false,
            plan: WritePlan::initial(),
            updating: false,
        }
    }

    /// Asks for the file's bytes (phase INITIALISE).
    pub(crate) fn read(&self, address: BlockRef, ctx: &mut dyn Context) {
        ctx.fs_request(
            address,
            token::READ,
            FsOperation::Read {
                file: FILE,
                offset: 0,
                len: FILE_BYTES as u32,
            },
        );
    }

    /// The read's answer: remember the newest valid record. A missing file
    /// is an initial start; damage to both copies stops the node.
    pub(crate) fn read_answered(
        &mut self,
        result: Result<FsDone, FsError>,
        address: BlockRef,
        ctx: &mut dyn Context,
    ) {
        let data = match result {
            Ok(FsDone::Read { data }) => data,
            Ok(other) => panic!("dih {address}: system file read answered with {other:?}"),
            Err(FsError {
                kind: FsErrorKind::NotFound,
                ..
            }) => return,
            Err(error) => ctx.fatal(format!(
                "dih {address}: cannot read the system file, the node stops: {error}"
            )),
        };
        self.exists = true;
        let bytes = data.as_slice();
        let copy_a = &bytes[..bytes.len().min(SLOT_BYTES)];
        let copy_b = bytes.get(SLOT_BYTES..).unwrap_or(&[]);
        match choose(copy_a, copy_b) {
            Ok(chosen) => {
                if let Some(offset) = chosen.damaged_file_offset() {
                    ctx.report(Report::Log(format!(
                        "dih {address}: system file {FILE} has a damaged copy at offset \
                         {offset}; using the other copy (the next update rewrites it)"
                    )));
                }
                if chosen.file.node_id != self.node_id {
                    ctx.fatal(format!(
                        "dih {address}: system file {FILE} belongs to node {}, not node {}: \
                         the data directory is another node's",
                        chosen.file.node_id, self.node_id
                    ));
                }
                self.record = Some(chosen.file);
                self.plan = chosen.next_write;
            }
            // Every update writes copy A, fsyncs, then copy B, so a file
            // that does not reach copy B's end was never updated in full
            // and its copy A is not valid: the very first update did not
            // finish, nothing was ever recorded (an initial start that
            // crashed before serving anything).
            Err(_) if bytes.len() < FILE_BYTES => {
                ctx.report(Report::Log(format!(
                    "dih {address}: system file {FILE} holds no finished update (its first \
                     write was cut short); starting as if it did not exist"
                )));
            }
            Err(error) => ctx.fatal(format!(
                "dih {address}: system file {FILE} is damaged, the node stops: {error}"
            )),
        }
    }

    /// Writes `record` (both copies, each fsynced); `UPDATE_DONE` answers
    /// when it is durable.
    pub(crate) fn update(&mut self, record: SystemFile, address: BlockRef, ctx: &mut dyn Context) {
        assert!(
            !self.updating,
            "dih {address}: a system file update while another runs: updates are serialised \
             by the master's rounds"
        );
        assert_eq!(
            record.node_id, self.node_id,
            "a node writes only its own record"
        );
        self.updating = true;
        let mut steps = Vec::with_capacity(5);
        if !self.exists {
            steps.push(FsOperation::Open {
                file: FILE,
                mode: OpenMode::Create,
            });
        }
        let bytes = self.plan.encode(&record);
        for slot in [self.plan.first, self.plan.second()] {
            let data = ctx
                .pool()
                .copy_from(&bytes)
                .expect("the section pool has room for a 512-byte system file copy");
            steps.push(FsOperation::Write {
                file: FILE,
                offset: slot.file_offset(),
                data,
            });
            steps.push(FsOperation::Sync { file: FILE });
        }
        let last = steps.len() - 1;
        for (index, step) in steps.into_iter().enumerate() {
            let token = if index == last {
                token::UPDATE_DONE
            } else {
                token::UPDATE_STEP
            };
            ctx.fs_request(address, token, step);
        }
        self.exists = true;
        self.plan = self.plan.completed();
        self.record = Some(record);
    }

    /// A step of an update was answered; true when the update is durable.
    pub(crate) fn update_answered(
        &mut self,
        token: u64,
        result: Result<FsDone, FsError>,
        address: BlockRef,
        ctx: &mut dyn Context,
    ) -> bool {
        if let Err(error) = result {
            ctx.fatal(format!(
                "dih {address}: writing the system file failed, the node stops: {error}"
            ));
        }
        if token == token::UPDATE_DONE {
            self.updating = false;
            return true;
        }
        false
    }
}
