//! The schema agreement of phase RESTORE_SCHEMA (`restore.rs`; NDB's
//! SCHEMA_INFO at a system restart): the master dict sends its schema, the
//! bytes of its schema file as read in phase INITIALISE (none: "no
//! schema"), to every other dict, which takes it in place of its own.
//!
//! ```text
//!  master dict                                             another dict
//!   |-- SchemaSyncReq{total, offset 0, chunk} ------------->|  kept
//!   |<------------------ SchemaSyncConf{received: offset 1} -|
//!   |-- SchemaSyncReq{total, offset 1, chunk} ------------->|  ... the last chunk:
//!   |                                      (its phase RESTORE_SCHEMA, when it comes)
//!   |                                          same bytes as its own file: kept as is;
//!   |                                          else decoded, its schema file rewritten
//!   |                                          with it; its tcs and ldms get the tables
//!   |<----------------------- SchemaSyncConf{received: total} -|
//! ```
//!
//! Chunks hold at most one section (`MAX_SECTION_BYTES`) and go one at a
//! time to each dict, each sent when the previous one is answered, so the
//! transfer holds at most one section per dict; when the pool has none
//! free, the chunk is sent again [`SYNC_RETRY_DELAY_MS`] later. "No
//! schema" is one empty chunk of total 0, and is the same schema as an
//! empty one of version 1 (what a dict writes when it takes "no schema"
//! in place of its own tables).
//!
//! The master may send before the other dict runs the phase: every node's
//! dict has read its file by then (phase RESTART_GCI, cluster-wide,
//! follows INITIALISE everywhere), and the chunks are kept until the phase
//! comes. The master confirms its own phase once every other dict has
//! confirmed the whole schema, so no create or drop starts (phase SCHEMA)
//! before every dict holds the agreed schema. A transfer that breaks its
//! order, or bytes that do not decode, stop the node naming what.

use crate::persistence::{chunk_end, decode_stored_schema, AfterSave, FILE_RETRY_DELAY_MS};
use crate::restore::RestoreStep;
use crate::Dict;
use kernel::Context;
use signal::signals::{ContinueB, SchemaSyncConf, SchemaSyncReq};
use signal::{BlockRef, Envelope, NodeSet};
use storage::schema_file::{self, Schema};

/// The `ContinueB` job that sends again the chunks that found no free
/// section.
pub(crate) const SYNC_RETRY_JOB: u32 = 2;
/// How long the master waits to try again a chunk that found no section.
pub const SYNC_RETRY_DELAY_MS: u64 = FILE_RETRY_DELAY_MS;

/// The master's schema on its way to the other dicts.
pub(crate) struct Outgoing {
    /// The master's schema file (empty: no schema).
    bytes: Vec<u8>,
    /// Each other dict and how far it is.
    dicts: Vec<(BlockRef, Progress)>,
    /// A `ContinueB` will send the waiting chunks.
    retry_scheduled: bool,
}

impl Outgoing {
    /// Whether a transfer is under way (or a retry of one is scheduled).
    pub(crate) fn is_busy(&self) -> bool {
        self.retry_scheduled
            || self
                .dicts
                .iter()
                .any(|(_, progress)| *progress != Progress::Done)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Progress {
    /// The chunk from `offset` waits for a free section.
    ToSend { offset: usize },
    /// The chunk from `offset` is sent and not answered yet.
    Sent { offset: usize },
    /// The dict took the whole schema.
    Done,
}

/// The master's schema arriving at another dict.
#[derive(Debug, Default)]
pub(crate) enum Incoming {
    /// Nothing has arrived.
    #[default]
    Nothing,
    /// Chunks are arriving: `bytes` of `total`.
    Arriving { total: u32, bytes: Vec<u8> },
    /// Every chunk arrived; kept until phase RESTORE_SCHEMA takes it.
    Arrived { bytes: Vec<u8> },
    /// Taken by phase RESTORE_SCHEMA; `total` is confirmed at its end.
    Taken { total: u32 },
}

/// "No schema" is an empty schema of version 1: two schema files that say
/// the same, byte for byte.
fn same_schema(mine: &[u8], master: &[u8]) -> bool {
    let empty = || {
        schema_file::encode(&Schema {
            schema_version: 1,
            id_versions: Vec::new(),
            tables: Vec::new(),
        })
    };
    match (mine.is_empty(), master.is_empty()) {
        (false, false) | (true, true) => mine == master,
        (true, false) => master == empty(),
        (false, true) => mine == empty(),
    }
}

impl Dict {
    /// The master, in phase RESTORE_SCHEMA: its schema file's bytes go to
    /// every other dict.
    pub(crate) fn send_schema_to_dicts(&mut self, ctx: &mut dyn Context) {
        let bytes = self.stored_file.take().unwrap_or_default();
        let dicts = self.dicts.members().to_vec();
        self.start_schema_transfer(bytes, dicts, ctx);
    }

    /// The master: `bytes` (a schema file's) go to each of `dicts`, chunk
    /// by chunk (a restart's agreement, or a restarting node's schema:
    /// `node_restart.rs`).
    pub(crate) fn start_schema_transfer(
        &mut self,
        bytes: Vec<u8>,
        dicts: Vec<BlockRef>,
        ctx: &mut dyn Context,
    ) {
        assert!(
            u32::try_from(bytes.len()).is_ok(),
            "dict {}: a schema of {} bytes does not fit a SchemaSyncReq",
            self.address,
            bytes.len()
        );
        assert!(
            !self.outgoing.as_ref().is_some_and(Outgoing::is_busy),
            "dict {}: a schema transfer started while another runs",
            self.address
        );
        let dicts = dicts
            .into_iter()
            .map(|dict| (dict, Progress::ToSend { offset: 0 }))
            .collect();
        self.outgoing = Some(Outgoing {
            bytes,
            dicts,
            retry_scheduled: false,
        });
        self.send_schema_chunks(ctx);
    }

    /// Sends every chunk that waits for a section; those that find none
    /// are sent again later.
    fn send_schema_chunks(&mut self, ctx: &mut dyn Context) {
        let me = self.address;
        let outgoing = self
            .outgoing
            .as_mut()
            .expect("chunks are sent while the schema is sent");
        let total = outgoing.bytes.len();
        let mut short = false;
        for (dict, progress) in &mut outgoing.dicts {
            let Progress::ToSend { offset } = *progress else {
                continue;
            };
            let chunk = &outgoing.bytes[offset..chunk_end(offset, total)];
            let Some(data) = ctx.pool().copy_from(chunk) else {
                short = true;
                continue;
            };
            let request = SchemaSyncReq {
                total_bytes: total as u32,
                offset: offset as u32,
                data,
            };
            kernel::send(ctx, me, *dict, request);
            *progress = Progress::Sent { offset };
        }
        if short && !outgoing.retry_scheduled {
            // Sections come back as signals finish: try again soon.
            outgoing.retry_scheduled = true;
            let retry = Envelope {
                from: me,
                to: me,
                signal: ContinueB {
                    job: SYNC_RETRY_JOB,
                }
                .into(),
            };
            ctx.send_delayed(retry, SYNC_RETRY_DELAY_MS);
        }
    }

    /// The `ContinueB` of [`SYNC_RETRY_JOB`].
    pub(crate) fn retry_schema_chunks(&mut self, ctx: &mut dyn Context) {
        let outgoing = self.outgoing.as_mut();
        assert!(
            outgoing.as_ref().is_some_and(|o| o.retry_scheduled),
            "dict {}: a schema chunk retry that was never scheduled",
            self.address
        );
        if let Some(outgoing) = outgoing {
            outgoing.retry_scheduled = false;
        }
        self.send_schema_chunks(ctx);
    }

    /// The master: another dict received a chunk, or (all of it) took the
    /// schema.
    pub(crate) fn schema_sync_conf(
        &mut self,
        from: BlockRef,
        conf: SchemaSyncConf,
        ctx: &mut dyn Context,
    ) {
        let me = self.address;
        let Some(outgoing) = self.outgoing.as_mut() else {
            panic!("dict {me}: SchemaSyncConf from {from} while no schema is sent");
        };
        let total = outgoing.bytes.len();
        let Some((_, progress)) = outgoing.dicts.iter_mut().find(|(dict, _)| *dict == from) else {
            panic!("dict {me}: SchemaSyncConf from {from}, which is not another dict");
        };
        let Progress::Sent { offset } = *progress else {
            panic!("dict {me}: SchemaSyncConf from {from} with no chunk unanswered ({progress:?})");
        };
        let end = chunk_end(offset, total);
        assert_eq!(
            conf.received as usize, end,
            "dict {me}: SchemaSyncConf from {from} for {} bytes, the chunk sent ends at {end}",
            conf.received
        );
        if end < total {
            *progress = Progress::ToSend { offset: end };
            return self.send_schema_chunks(ctx);
        }
        *progress = Progress::Done;
        self.end_restore_if_agreed(ctx);
    }

    /// The master: the dicts of `failed` left the cluster during the start
    /// (a node too old to take part, docs/design/failures.md §9); the
    /// agreement goes on without them.
    pub(crate) fn schema_sync_without(&mut self, failed: NodeSet, ctx: &mut dyn Context) {
        let Some(outgoing) = self.outgoing.as_mut() else {
            return;
        };
        let before = outgoing.dicts.len();
        outgoing
            .dicts
            .retain(|(dict, _)| !failed.contains(dict.node));
        if outgoing.dicts.len() != before {
            self.end_restore_if_agreed(ctx);
        }
    }

    /// The master ends phase RESTORE_SCHEMA once its tcs and ldms have the
    /// tables and every other dict took its schema.
    pub(crate) fn end_restore_if_agreed(&mut self, ctx: &mut dyn Context) {
        if self.restoring.is_none() && self.phase >= crate::SCHEMA_PHASE {
            return self.end_transfer_to_restarting(ctx);
        }
        let local_done = self
            .restoring
            .as_ref()
            .is_some_and(|restore| restore.step == RestoreStep::AwaitingDicts);
        let dicts_done = self.outgoing.as_ref().is_some_and(|outgoing| {
            outgoing
                .dicts
                .iter()
                .all(|(_, progress)| *progress == Progress::Done)
        });
        if local_done && dicts_done {
            // A retry still scheduled finds nothing to send.
            let outgoing = self.outgoing.as_mut().expect("checked");
            outgoing.bytes = Vec::new();
            if !outgoing.retry_scheduled {
                self.outgoing = None;
            }
            self.end_restore(ctx);
        }
    }

    /// The master, after a restarting node's transfer moved: once its dict
    /// took the whole schema, the node takes part in schema changes.
    fn end_transfer_to_restarting(&mut self, ctx: &mut dyn Context) {
        let Some(outgoing) = self.outgoing.as_mut() else {
            return;
        };
        let done: Vec<BlockRef> = outgoing
            .dicts
            .iter()
            .filter(|(_, progress)| *progress == Progress::Done)
            .map(|&(dict, _)| dict)
            .collect();
        if done.len() < outgoing.dicts.len() {
            return;
        }
        outgoing.dicts.clear();
        outgoing.bytes = Vec::new();
        if !outgoing.retry_scheduled {
            self.outgoing = None;
        }
        for dict in done {
            self.restarting_node_has_schema(dict.node, ctx);
        }
        // None left (the node failed): the next starting node, if any.
        self.send_schema_to_restarting(ctx);
    }

    /// Another dict: a chunk of the master's schema. Kept until phase
    /// RESTORE_SCHEMA; every chunk but the last is confirmed at once.
    pub(crate) fn schema_sync_req(
        &mut self,
        from: BlockRef,
        request: SchemaSyncReq,
        ctx: &mut dyn Context,
    ) {
        self.check_from_master(from, "SchemaSyncReq");
        let me = self.address;
        let SchemaSyncReq {
            total_bytes: total,
            offset,
            data,
        } = request;
        let damaged = |ctx: &mut dyn Context, what: String| -> ! {
            ctx.fatal(format!(
                "dict {me}: the schema sent by the master {from} is damaged: {what}"
            ))
        };
        let chunk = data.as_slice();
        let end = u64::from(offset) + chunk.len() as u64;
        if end > u64::from(total) || chunk.is_empty() != (total == 0) {
            damaged(
                ctx,
                format!(
                    "a chunk of {} bytes at offset {offset} of a schema of {total} bytes",
                    chunk.len()
                ),
            );
        }
        if offset == 0 {
            match self.incoming {
                // A node restart's new master sends its schema again: the
                // one taken is the same (no change runs while a node
                // starts).
                Incoming::Taken { .. } => {
                    return kernel::send(ctx, me, from, SchemaSyncConf { received: total })
                }
                // The master failed during its transfer; the next one
                // starts over.
                _ => {
                    self.incoming = Incoming::Arriving {
                        total,
                        bytes: Vec::new(),
                    };
                }
            }
        }
        let bytes = match &mut self.incoming {
            Incoming::Arriving {
                total: expected,
                bytes,
            } if *expected == total && bytes.len() as u64 == u64::from(offset) => bytes,
            Incoming::Nothing => damaged(
                ctx,
                format!("its first chunk starts at offset {offset}, not 0"),
            ),
            Incoming::Arriving {
                total: expected,
                bytes,
            } => damaged(
                ctx,
                format!(
                    "a chunk at offset {offset} of a schema of {total} bytes follows {} bytes \
                     of a schema of {expected} bytes",
                    bytes.len()
                ),
            ),
            Incoming::Arrived { .. } | Incoming::Taken { .. } => damaged(
                ctx,
                format!("a chunk at offset {offset} after the whole schema arrived"),
            ),
        };
        bytes.extend_from_slice(chunk);
        let received = bytes.len() as u32;
        if received < total {
            return kernel::send(ctx, me, from, SchemaSyncConf { received });
        }
        let bytes = std::mem::take(bytes);
        self.incoming = Incoming::Arrived { bytes };
        self.take_master_schema_if_arrived(ctx);
    }

    /// Another dict, once the master's schema arrived and phase
    /// RESTORE_SCHEMA runs: the master's schema in place of its own (its
    /// schema file rewritten when they differ), then its tcs and ldms.
    pub(crate) fn take_master_schema_if_arrived(&mut self, ctx: &mut dyn Context) {
        let waiting = self
            .restoring
            .as_ref()
            .is_some_and(|restore| restore.step == RestoreStep::AwaitingSchema);
        if !waiting || !matches!(self.incoming, Incoming::Arrived { .. }) {
            return;
        }
        let Incoming::Arrived { bytes } = std::mem::take(&mut self.incoming) else {
            unreachable!("checked");
        };
        self.incoming = Incoming::Taken {
            total: bytes.len() as u32,
        };
        let mine = self.stored_file.take().unwrap_or_default();
        let own = self.stored_schema.take();
        if same_schema(&mine, &bytes) {
            let report_version = own.is_some();
            self.install_agreed_schema(own, report_version);
            return self.add_restored_tables(ctx);
        }
        let agreed = if bytes.is_empty() {
            None
        } else {
            match decode_stored_schema(&bytes) {
                Ok(stored) => Some(stored),
                Err(damage) => ctx.fatal(format!(
                    "dict {}: the schema sent by the master {} is unusable at offset {}: {}",
                    self.address,
                    self.master(),
                    damage.offset,
                    damage.reason
                )),
            }
        };
        // The version changes (or the tables do): say so.
        self.install_agreed_schema(agreed, true);
        self.restoring.as_mut().expect("restoring").step = RestoreStep::Saving;
        self.save_schema(AfterSave::AgreedSchema, ctx);
    }

    /// Another dict's schema file holds the master's schema.
    pub(crate) fn agreed_schema_saved(&mut self, ctx: &mut dyn Context) {
        let step = self.restoring.as_ref().map(|restore| restore.step);
        assert_eq!(
            step,
            Some(RestoreStep::Saving),
            "dict {}: the agreed schema is saved while restoring",
            self.address
        );
        self.add_restored_tables(ctx);
    }

    /// Another dict took the master's schema: its file and its tcs and ldms
    /// hold it.
    pub(crate) fn confirm_master_schema(&mut self, ctx: &mut dyn Context) {
        let Incoming::Taken { total } = self.incoming else {
            unreachable!("the master's schema is confirmed once taken");
        };
        kernel::send(
            ctx,
            self.address,
            self.master(),
            SchemaSyncConf { received: total },
        );
    }
}
