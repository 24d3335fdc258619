//! A node restart's copy of partitions (docs/design/0018-node-restart.md,
//! decision 8; NDB's COPY_FRAGREQ): phase COPY_DATA at the restarting
//! node, and the primary's side.
//!
//! ```text
//!  restarting ldm (node N)               primary's ldm (same instance)
//!   |-- CopyFragReq{t, p, since} ---------->|  attach N: every write it prepares
//!   |                                       |  from now on runs on to N, last
//!   |                                       |  walk p by row id:
//!   |<-- CopyRowsReq{rows, done: false} ----|  rows and freed slots above `since`
//!   |  apply by row id                      |  (a row some operation holds is
//!   |--- CopyRowsConf --------------------->|   waited for, then copied)
//!   |<-- CopyRowsReq{rows, done: true} -----|
//!   |--- CopyRowsConf --------------------->|  (N stays attached)
//!   |  next partition; all copied: phase confirmed
//! ```
//!
//! A partition copied into empty (an initial node restart) builds its
//! ordered indexes from its rows once its copy is done, sorted, instead
//! of keeping them row by row meanwhile (`Partition::defer_ordered_indexes`).
//!
//! Why the rows meet the chain's writes in the right order: the primary
//! attaches N before its walk starts, so a write prepared after that
//! reaches N; a write prepared before holds its row (operation link set)
//! until it commits at the primary, and the walk waits for such rows, so
//! it copies what they committed. A copied row and a later write of it
//! leave the primary on the same link, in that order. While a partition
//! is being copied, N applies the chain's writes to it by row id, whatever
//! its slot holds (`applying`: an insert or update puts the image there, a
//! delete removes whatever is there), when they commit, without locks or
//! redo: the primary's lock orders them, and N is not restorable from its
//! own files until its first local checkpoint after the copy (so nothing
//! is logged, and no local checkpoint runs, while the node is starting).
//!
//! Entries of a CopyRowsReq, in row-id order: u32 row id, u8 what
//! ([`entry`]), u64 GCI, u32 image length, the image (a row's fixed part
//! then its var part, as a local checkpoint stores it).
//!
//! When a participant dies here: the restarting node, so the primary drops
//! the copy and detaches it (NODE_FAILREP); the primary, so the restarting
//! node copies the partition again from the next primary, from its start
//! (rows applied twice are the same rows); a CopyFragRef (the primary
//! lacks the partition, or its table's add is not there yet) is asked
//! again a moment later.

use crate::{Ldm, TableState};
use kernel::{send, Context, Report};
use rowstore::{Budget, RowIdCursor, SlotHolds};
use signal::signals::{CopyFragRef, CopyFragReq, CopyRowsConf, CopyRowsReq, StartPhaseConf};
use signal::{phases, BlockKind, BlockRef, Envelope, ErrorCode};
use std::collections::VecDeque;

/// What a copy entry says of its row id.
pub(crate) mod entry {
    /// The row, with its image.
    pub const ROW: u8 = 0;
    /// The slot is free (deleted at the GCI).
    pub const FREE: u8 = 1;
    /// Every slot of the row id's page is free (the page went back to
    /// DataMemory; the GCI is its newest delete).
    pub const FREE_PAGE: u8 = 2;
}

/// Bytes of entries per batch.
const BATCH_BYTES: usize = 32 * 1024;
/// Slots looked at per batch.
const BATCH_SLOTS: u32 = 4096;
/// Bytes before each entry's image.
const ENTRY_HEADER_BYTES: usize = 4 + 1 + 8 + 4;
/// How long the primary waits before looking again at a row an operation
/// holds, or for a free section.
const WAIT_MS: u64 = 1;
/// How long the walk waits for one held row before it logs which
/// operation holds it (once per row): an operation that outlives its
/// transaction would hold a copy, and the node's restart, for ever.
const HELD_REPORT_MS: u64 = 10_000;
/// How often a restarting ldm reports its copy's progress (and at the
/// end of each partition).
const PROGRESS_REPORT_MS: u64 = 500;
/// How long a restarting ldm waits before asking again.
const RETRY_MS: u64 = 100;

/// `ContinueB` jobs of the copy (beside the LCP's, `lcp::job`).
pub(crate) mod job {
    /// The primary sends the next batch of its copies.
    pub const SEND: u32 = 10;
    /// The restarting ldm asks its partition's primary again.
    pub const ASK_AGAIN: u32 = 11;
}

/// The copies this ldm runs.
#[derive(Default)]
pub(crate) struct Copies {
    /// As a primary: partitions being copied to a restarting node.
    outgoing: Vec<Outgoing>,
    /// A `job::SEND` is scheduled.
    send_pending: bool,
    /// As a restarting ldm: phase COPY_DATA.
    incoming: Option<Incoming>,
    /// As a restarting ldm: phase LOCAL_CHECKPOINT's requester and the
    /// partitions not checkpointed yet.
    checkpoint: Option<(BlockRef, Vec<(u32, u32)>)>,
}

struct Outgoing {
    to: BlockRef,
    table_id: u32,
    partition: u32,
    since_gci: u64,
    cursor: RowIdCursor,
    /// A batch is out and not confirmed.
    awaiting_conf: bool,
    /// The last batch went out.
    done: bool,
    /// The row the walk waits for (an operation holds it), and since
    /// when (ctx ms).
    held: Option<(u32, u64)>,
    /// That wait was logged.
    held_reported: bool,
}

struct Incoming {
    /// Gets the phase's conf.
    requester: BlockRef,
    /// Partitions this ldm holds (copied or not).
    partitions: u32,
    /// When progress was last reported (ctx ms).
    reported_ms: u64,
    /// Partitions still to copy, in order; the first is being copied.
    pending: VecDeque<(u32, u32)>,
    /// The ldm the first is copied from.
    source: Option<BlockRef>,
    /// A `job::ASK_AGAIN` is scheduled.
    retry_pending: bool,
    rows: u64,
    bytes: u64,
    started_ms: u64,
}

impl Ldm {
    /// Phase COPY_DATA: at a restarting node, copy every partition of
    /// this ldm from its primary; elsewhere nothing.
    pub(crate) fn copy_phase(&mut self, requester: BlockRef, ctx: &mut dyn Context) {
        if !self.node_failures.starting().contains(self.address.node) {
            let conf = StartPhaseConf {
                phase: phases::COPY_DATA,
            };
            return send(ctx, self.address, requester, conf);
        }
        let mut pending = VecDeque::new();
        for (table_id, table) in self.tables.iter().enumerate() {
            let Some(table) = table else { continue };
            for partition in table.partitions.iter().flatten() {
                pending.push_back((table_id as u32, partition.store.id));
            }
        }
        self.copies.incoming = Some(Incoming {
            requester,
            partitions: pending.len() as u32,
            reported_ms: ctx.now_ms(),
            pending,
            source: None,
            retry_pending: false,
            rows: 0,
            bytes: 0,
            started_ms: ctx.now_ms(),
        });
        self.copy_next(ctx);
    }

    /// Phase LOCAL_CHECKPOINT: at a restarting node, a local checkpoint
    /// of every partition (its first since the copy: in full, as after
    /// any restore); elsewhere nothing.
    pub(crate) fn checkpoint_phase(&mut self, requester: BlockRef, ctx: &mut dyn Context) {
        let partitions: Vec<(u32, u32)> = self
            .tables
            .iter()
            .enumerate()
            .filter_map(|(id, table)| Some((id as u32, table.as_ref()?)))
            .flat_map(|(id, table)| {
                let partitions = table.partitions.iter().flatten();
                partitions.map(move |partition| (id, partition.store.id))
            })
            .collect();
        let starting = self.node_failures.starting().contains(self.address.node);
        if !starting || !self.lcp_enabled() || partitions.is_empty() {
            let conf = StartPhaseConf {
                phase: phases::LOCAL_CHECKPOINT,
            };
            return send(ctx, self.address, requester, conf);
        }
        self.copies.checkpoint = Some((requester, partitions));
        self.lcp_kick(ctx);
    }

    /// Whether phase LOCAL_CHECKPOINT's checkpoints run.
    pub(crate) fn copy_checkpointing(&self) -> bool {
        self.copies.checkpoint.is_some()
    }

    /// An LCP of `table`'s `partition` counted: phase LOCAL_CHECKPOINT
    /// ends when every partition has one.
    pub(crate) fn copy_partition_checkpointed(
        &mut self,
        table: u32,
        partition: u32,
        ctx: &mut dyn Context,
    ) {
        let Some((requester, remaining)) = self.copies.checkpoint.as_mut() else {
            return;
        };
        remaining.retain(|&pending| pending != (table, partition));
        if remaining.is_empty() {
            let requester = *requester;
            self.copies.checkpoint = None;
            ctx.report(Report::Log(format!(
                "ldm {}: node restart: every partition has a local checkpoint since the copy",
                self.address
            )));
            let conf = StartPhaseConf {
                phase: phases::LOCAL_CHECKPOINT,
            };
            send(ctx, self.address, requester, conf);
        }
    }

    /// The restarting ldm: ask for the first partition still to copy, or
    /// confirm the phase when none is left.
    fn copy_next(&mut self, ctx: &mut dyn Context) {
        let Some(incoming) = self.copies.incoming.as_mut() else {
            return;
        };
        let Some(&(table_id, partition)) = incoming.pending.front() else {
            let incoming = self.copies.incoming.take().expect("checked");
            ctx.report(Report::Log(format!(
                "ldm {}: node restart: copied {} rows ({} bytes) from the primaries in {} ms",
                self.address,
                incoming.rows,
                incoming.bytes,
                ctx.now_ms().saturating_sub(incoming.started_ms)
            )));
            let conf = StartPhaseConf {
                phase: phases::COPY_DATA,
            };
            return send(ctx, self.address, incoming.requester, conf);
        };
        let source = self.copy_source(table_id, partition);
        let incoming = self.copies.incoming.as_mut().expect("checked");
        incoming.source = source;
        let Some(source) = source else {
            // No live replica holds data to copy (a failure is being
            // agreed; the survival rule settles it): look again later.
            return self.copy_ask_again_later(ctx);
        };
        if let Some(state) = self.partition_state_mut(table_id, partition) {
            state.applying = true;
            // Copied into an empty partition (an initial node restart):
            // the ordered indexes are built from the rows once they are
            // all in, sorted, not kept row by row (as a restore does).
            // Nothing reads them meanwhile: a starting node serves no
            // scan, and the chain's writes are applied by row id.
            if state.store.ordered_indexes_empty() && !state.store.ordered_deferred() {
                state.store.defer_ordered_indexes();
            }
        }
        let since_gci = signal::Gci(self.restored_gci);
        let request = CopyFragReq {
            table_id,
            partition,
            since_gci,
        };
        send(ctx, self.address, source, request);
    }

    /// The ldm (of this instance) of the partition's primary now: the
    /// head of its chain as every tc routes it (`routed_chain`: members not starting, those
    /// that came back by a node restart last). Only the primary attaches
    /// a restarting node to the writes it prepares, so the copy must come
    /// from it and from no other replica.
    fn copy_source(&self, table_id: u32, partition: u32) -> Option<BlockRef> {
        let state = self.partition_state(table_id, partition)?;
        let serving = self
            .node_failures
            .live()
            .difference(self.node_failures.starting());
        let chain =
            signal::signals::routed_chain(&state.replicas, serving, self.node_failures.returned());
        chain
            .first()
            .map(|&node| BlockRef::new(node, BlockKind::Ldm, self.address.instance))
    }

    fn copy_ask_again_later(&mut self, ctx: &mut dyn Context) {
        let Some(incoming) = self.copies.incoming.as_mut() else {
            return;
        };
        if incoming.retry_pending {
            return;
        }
        incoming.retry_pending = true;
        let envelope = Envelope {
            from: self.address,
            to: self.address,
            signal: signal::signals::ContinueB {
                job: job::ASK_AGAIN,
            }
            .into(),
        };
        ctx.send_delayed(envelope, RETRY_MS);
    }

    /// A `ContinueB` of the copy.
    pub(crate) fn copy_continue(&mut self, job: u32, ctx: &mut dyn Context) {
        match job {
            job::SEND => {
                self.copies.send_pending = false;
                self.copy_send_batches(ctx);
            }
            job::ASK_AGAIN => {
                if let Some(incoming) = self.copies.incoming.as_mut() {
                    incoming.retry_pending = false;
                    self.copy_next(ctx);
                }
            }
            other => panic!("ldm {}: unknown copy job {other}", self.address),
        }
    }

    /// At the restarting ldm: the primary cannot copy the partition now.
    pub(crate) fn copy_refused(
        &mut self,
        from: BlockRef,
        refusal: CopyFragRef,
        ctx: &mut dyn Context,
    ) {
        let current = self.copies.incoming.as_ref().and_then(|incoming| {
            (incoming.source == Some(from)).then(|| incoming.pending.front().copied())?
        });
        if current != Some((refusal.table_id, refusal.partition)) {
            return;
        }
        ctx.report(Report::Log(format!(
            "ldm {}: {from} cannot copy table {} partition {} yet ({}); asking again",
            self.address,
            refusal.table_id,
            refusal.partition,
            refusal.error.message()
        )));
        self.copy_ask_again_later(ctx);
    }

    /// At the restarting ldm: a batch of the copy.
    pub(crate) fn copy_rows(
        &mut self,
        from: BlockRef,
        request: CopyRowsReq,
        ctx: &mut dyn Context,
    ) {
        let current = self.copies.incoming.as_ref().and_then(|incoming| {
            (incoming.source == Some(from)).then(|| incoming.pending.front().copied())?
        });
        if current != Some((request.table_id, request.partition)) {
            // From a source given up on (it failed, or the copy moved on).
            return;
        }
        let (rows, bytes) =
            match self.apply_copied(request.table_id, request.partition, request.rows.as_slice()) {
                Ok(counts) => counts,
                Err(error) => ctx.fatal(format!(
                "ldm {}: the copy of table {} partition {} from {from} cannot be applied: {error}",
                self.address, request.table_id, request.partition
            )),
            };
        let incoming = self.copies.incoming.as_mut().expect("checked");
        incoming.rows += rows;
        incoming.bytes += bytes;
        let now = ctx.now_ms();
        if request.done || now.saturating_sub(incoming.reported_ms) >= PROGRESS_REPORT_MS {
            incoming.reported_ms = now;
            let copied = incoming.partitions - incoming.pending.len() as u32;
            ctx.report(Report::CopyProgress {
                instance: self.address.instance,
                partitions_copied: copied + u32::from(request.done),
                partitions: incoming.partitions,
                rows: incoming.rows,
                bytes: incoming.bytes,
                elapsed_ms: now.saturating_sub(incoming.started_ms),
            });
        }
        let conf = CopyRowsConf {
            table_id: request.table_id,
            partition: request.partition,
        };
        send(ctx, self.address, from, conf);
        if request.done {
            if let Some(state) = self.partition_state_mut(request.table_id, request.partition) {
                state.applying = false;
            }
            self.copy_build_indexes(request.table_id, request.partition, ctx);
            let incoming = self.copies.incoming.as_mut().expect("checked");
            incoming.pending.pop_front();
            incoming.source = None;
            self.copy_next(ctx);
        }
    }

    /// The copy of a partition is done: builds the ordered indexes its
    /// copy deferred (`copy_next`), from its rows, sorted. DataMemory
    /// without room for them stops the node, as for the rows.
    fn copy_build_indexes(&mut self, table_id: u32, partition: u32, ctx: &mut dyn Context) {
        let Some(table) = self
            .tables
            .get_mut(table_id as usize)
            .and_then(Option::as_mut)
        else {
            return;
        };
        let Some(Some(state)) = table.partitions.get_mut(partition as usize) else {
            return;
        };
        let built = state
            .store
            .build_deferred_indexes(&mut self.memory, &table.layout);
        if built.is_err() {
            ctx.fatal(format!(
                "ldm {}: node restart: DataMemory is too small for the ordered indexes of \
                 table {table_id} partition {partition}",
                self.address
            ));
        }
    }

    /// Applies a batch's entries by row id. Returns the rows and bytes
    /// applied.
    fn apply_copied(
        &mut self,
        table_id: u32,
        partition: u32,
        mut entries: &[u8],
    ) -> Result<(u64, u64), String> {
        let (mut rows, mut bytes) = (0, 0);
        while !entries.is_empty() {
            if entries.len() < ENTRY_HEADER_BYTES {
                return Err(format!(
                    "an entry header cut short ({} bytes)",
                    entries.len()
                ));
            }
            let row_id = u32::from_le_bytes(entries[0..4].try_into().expect("4 bytes"));
            let what = entries[4];
            let gci = u64::from_le_bytes(entries[5..13].try_into().expect("8 bytes"));
            let length = u32::from_le_bytes(entries[13..17].try_into().expect("4 bytes")) as usize;
            let rest = &entries[ENTRY_HEADER_BYTES..];
            if rest.len() < length {
                return Err(format!(
                    "row {row_id}: an image of {length} bytes cut short"
                ));
            }
            let image = &rest[..length];
            entries = &rest[length..];
            match what {
                entry::ROW => {
                    self.restore_put_row(table_id, partition, row_id, gci, image, None)?;
                    rows += 1;
                    bytes += length as u64;
                }
                entry::FREE => self.restore_remove_row(table_id, partition, row_id, gci)?,
                entry::FREE_PAGE => {
                    let slots = self.slots_per_page(table_id, partition);
                    let bits = rowstore::slots::SLOT_BITS;
                    let page_start = row_id >> bits << bits;
                    for slot in 0..slots {
                        self.restore_remove_row(table_id, partition, page_start + slot, gci)?;
                    }
                }
                other => return Err(format!("row {row_id}: unknown entry kind {other}")),
            }
        }
        Ok((rows, bytes))
    }

    fn slots_per_page(&self, table_id: u32, partition: u32) -> u32 {
        self.partition_state(table_id, partition)
            .map_or(0, |state| state.store.fixed.slots_per_page())
    }

    /// At the primary: a restarting node asks for a partition's copy.
    pub(crate) fn copy_fragment(
        &mut self,
        from: BlockRef,
        request: CopyFragReq,
        ctx: &mut dyn Context,
    ) {
        let me = self.address;
        let refuse = |ctx: &mut dyn Context, error| {
            let refusal = CopyFragRef {
                table_id: request.table_id,
                partition: request.partition,
                error,
            };
            send(ctx, me, from, refusal);
        };
        let starting = self.node_failures.starting().contains(from.node);
        if from.kind != BlockKind::Ldm || from.instance != self.address.instance || !starting {
            return refuse(ctx, ErrorCode::BadRequest);
        }
        // Only the primary attaches the node to the writes it prepares:
        // a replica the asker took for the primary by an older view says
        // no, and the asker asks again once the views agree.
        if self.copy_source(request.table_id, request.partition) != Some(me) {
            let known = self
                .partition_state(request.table_id, request.partition)
                .is_some();
            return refuse(
                ctx,
                if known {
                    ErrorCode::NotPrimary
                } else {
                    ErrorCode::UnknownTable
                },
            );
        }
        let Some(state) = self.partition_state_mut(request.table_id, request.partition) else {
            return refuse(ctx, ErrorCode::UnknownTable);
        };
        // From now on every write prepared here runs on to the node.
        state.attached = Some(from.node);
        // One copy per partition: a new request replaces an older one (its
        // node restarted again).
        self.copies.outgoing.retain(|copy| {
            (copy.table_id, copy.partition) != (request.table_id, request.partition)
        });
        ctx.report(Report::Log(format!(
            "ldm {}: copying table {} partition {} to restarting node {} (rows changed above \
             GCI {})",
            self.address, request.table_id, request.partition, from.node, request.since_gci
        )));
        self.copies.outgoing.push(Outgoing {
            to: from,
            table_id: request.table_id,
            partition: request.partition,
            since_gci: request.since_gci.0,
            cursor: RowIdCursor::new(0).visiting_freed_pages(),
            awaiting_conf: false,
            done: false,
            held: None,
            held_reported: false,
        });
        self.copy_send_batches(ctx);
    }

    /// At the primary: the restarting node applied a batch.
    pub(crate) fn copy_rows_applied(
        &mut self,
        from: BlockRef,
        conf: CopyRowsConf,
        ctx: &mut dyn Context,
    ) {
        let Some(position) = self.copies.outgoing.iter().position(|copy| {
            copy.to == from && (copy.table_id, copy.partition) == (conf.table_id, conf.partition)
        }) else {
            return;
        };
        let copy = &mut self.copies.outgoing[position];
        copy.awaiting_conf = false;
        if copy.done {
            self.copies.outgoing.swap_remove(position);
            return;
        }
        self.copy_send_batches(ctx);
    }

    /// At the primary: nodes failed; their copies end and they are
    /// attached no more.
    pub(crate) fn copy_without(&mut self, failed: signal::NodeSet) {
        self.copies
            .outgoing
            .retain(|copy| !failed.contains(copy.to.node));
        for table in self.tables.iter_mut().flatten() {
            for partition in table.partitions.iter_mut().flatten() {
                if partition.attached.is_some_and(|node| failed.contains(node)) {
                    partition.attached = None;
                }
            }
        }
    }

    /// At the restarting ldm: the source of the partition being copied
    /// failed: copy it again from the next primary.
    pub(crate) fn copy_source_failed(&mut self, failed: signal::NodeSet, ctx: &mut dyn Context) {
        let Some(incoming) = self.copies.incoming.as_mut() else {
            return;
        };
        if incoming
            .source
            .is_some_and(|source| failed.contains(source.node))
        {
            incoming.source = None;
            self.copy_next(ctx);
        }
    }

    /// At the primary: sends the next batch of every copy not waiting for
    /// a conf; one that meets a held row, or finds no section, tries again
    /// a moment later.
    fn copy_send_batches(&mut self, ctx: &mut dyn Context) {
        let mut wait = false;
        for index in 0..self.copies.outgoing.len() {
            let copy = &self.copies.outgoing[index];
            if copy.awaiting_conf || copy.done {
                continue;
            }
            let Some(mut section) = ctx.pool().alloc_leaving_reserve(BATCH_BYTES) else {
                wait = true;
                continue;
            };
            let (used, finished, held) = self.fill_batch(index, section.as_mut_slice());
            if let (0, Some(row)) = (used, held) {
                // Nothing to send before the held row: look again soon.
                self.copy_waits_for(index, row, ctx);
                wait = true;
                continue;
            }
            section.set_len(used);
            let copy = &mut self.copies.outgoing[index];
            copy.held = None;
            copy.awaiting_conf = true;
            copy.done = finished;
            let request = CopyRowsReq {
                table_id: copy.table_id,
                partition: copy.partition,
                done: finished,
                rows: section,
            };
            send(ctx, self.address, copy.to, request);
            if !finished {
                ctx.fault_point(kernel::faults::FaultPoint::CopyAfterBatch);
            }
        }
        if wait && !self.copies.send_pending {
            self.copies.send_pending = true;
            let envelope = Envelope {
                from: self.address,
                to: self.address,
                signal: signal::signals::ContinueB { job: job::SEND }.into(),
            };
            ctx.send_delayed(envelope, WAIT_MS);
        }
    }

    /// At the primary: copy `index`'s walk waits for `row`, which an
    /// operation holds. A wait longer than [`HELD_REPORT_MS`] is logged
    /// once, with the operation, so that one left holding a row is found.
    fn copy_waits_for(&mut self, index: usize, row: u32, ctx: &mut dyn Context) {
        let now = ctx.now_ms();
        let copy = &mut self.copies.outgoing[index];
        let since = match copy.held {
            Some((held_row, since)) if held_row == row => since,
            _ => {
                copy.held = Some((row, now));
                copy.held_reported = false;
                return;
            }
        };
        if copy.held_reported || now.saturating_sub(since) < HELD_REPORT_MS {
            return;
        }
        copy.held_reported = true;
        let (to, table_id, partition) = (copy.to, copy.table_id, copy.partition);
        let holder = match self.partition_state(table_id, partition) {
            Some(state) => state.store.op_link(&self.memory, row),
            None => crate::operation::NIL,
        };
        let described = if holder == crate::operation::NIL {
            "no operation (a reserved slot without one)".to_string()
        } else {
            let operation = &self.operations[holder];
            format!(
                "operation {holder}: {:?} {:?} of transaction {:?} from {} (its op {}),                  {:?}, replica {} of {:?}, forwarded {}, granted {}",
                operation.state,
                operation.kind,
                operation.transaction_id,
                operation.tc,
                operation.tc_op,
                operation.lock,
                operation.position,
                operation.chain,
                operation.forwarded,
                operation.granted
            )
        };
        ctx.report(Report::Log(format!(
            "{}: the copy of table {table_id} partition {partition} to {to} has waited {} ms              for row {row}, held by {described}",
            self.address,
            now.saturating_sub(since)
        )));
    }

    /// Fills `buffer` with copy `index`'s next entries. Returns the bytes
    /// used, whether the walk reached the partition's end, and the row it
    /// stopped at if an operation holds it.
    fn fill_batch(&mut self, index: usize, buffer: &mut [u8]) -> (usize, bool, Option<u32>) {
        let Ldm {
            memory,
            tables,
            copies,
            ..
        } = self;
        let copy = &mut copies.outgoing[index];
        let Some(TableState {
            layout, partitions, ..
        }) = tables.get(copy.table_id as usize).and_then(Option::as_ref)
        else {
            // The table was dropped (no schema change runs while a node
            // starts, so only by a master take-over): nothing to copy.
            return (0, true, None);
        };
        let Some(Some(state)) = partitions.get(copy.partition as usize) else {
            return (0, true, None);
        };
        let store = &state.store;
        let since = copy.since_gci;
        let mut budget = Budget::new(BATCH_SLOTS, usize::MAX);
        let mut used = 0;
        let put = |buffer: &mut [u8],
                   used: &mut usize,
                   row: u32,
                   what: u8,
                   gci: u64,
                   image: (&[u8], &[u8])|
         -> bool {
            let length = image.0.len() + image.1.len();
            let end = *used + ENTRY_HEADER_BYTES + length;
            if end > buffer.len() {
                return false;
            }
            let entry = &mut buffer[*used..end];
            entry[0..4].copy_from_slice(&row.to_le_bytes());
            entry[4] = what;
            entry[5..13].copy_from_slice(&gci.to_le_bytes());
            entry[13..17].copy_from_slice(&(length as u32).to_le_bytes());
            entry[17..17 + image.0.len()].copy_from_slice(image.0);
            entry[17 + image.0.len()..].copy_from_slice(image.1);
            *used = end;
            true
        };
        loop {
            if budget.is_spent() {
                return (used, false, None);
            }
            let Some(slot) = copy.cursor.peek(store, memory) else {
                return (used, true, None);
            };
            let row = slot.row_id;
            budget.charge(1, 0);
            match slot.holds {
                SlotHolds::FreedPage { gci } => {
                    if gci > since
                        && !put(buffer, &mut used, row, entry::FREE_PAGE, gci, (&[], &[]))
                    {
                        return (used, false, None);
                    }
                    copy.cursor.skip_page();
                }
                SlotHolds::Reserved { .. } => return (used, false, Some(row)),
                SlotHolds::Committed { .. }
                    if store.op_link(memory, row) != crate::operation::NIL =>
                {
                    return (used, false, Some(row))
                }
                SlotHolds::Committed { gci } => {
                    if gci > since {
                        let view = store.view(memory, layout, row);
                        let var = &view.var[..layout.var_part_bytes(view.var)];
                        if !put(buffer, &mut used, row, entry::ROW, gci, (view.fixed, var)) {
                            return (used, false, None);
                        }
                    }
                    copy.cursor.advance();
                }
                SlotHolds::Free { gci } => {
                    if gci > since && !put(buffer, &mut used, row, entry::FREE, gci, (&[], &[])) {
                        return (used, false, None);
                    }
                    copy.cursor.advance();
                }
            }
        }
    }

    fn partition_state(&self, table_id: u32, partition: u32) -> Option<&crate::PartitionState> {
        self.tables
            .get(table_id as usize)?
            .as_ref()?
            .partitions
            .get(partition as usize)?
            .as_ref()
    }

    fn partition_state_mut(
        &mut self,
        table_id: u32,
        partition: u32,
    ) -> Option<&mut crate::PartitionState> {
        self.tables
            .get_mut(table_id as usize)?
            .as_mut()?
            .partitions
            .get_mut(partition as usize)?
            .as_mut()
    }
}
