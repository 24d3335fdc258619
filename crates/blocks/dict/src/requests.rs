//! Schema requests from API nodes: their checks, the FIFO in which
//! creates, drops and index changes wait their turn, GET_TABINFO and
//! LIST_TABLES.
//!
//! Everything here comes from the network, so nothing here panics on what a
//! request holds: a bad request gets a `SchemaRef` with an error code.
//! Creates and drops run on the master dict only; the others answer them
//! `NotMaster` before looking at them. Every dict answers GET_TABINFO and
//! LIST_TABLES.
//!
//! Creates and drops run one at a time. Each changes several blocks in
//! several round trips, and running them in sequence means no operation
//! sees a half-made table of another (a create and a drop of the same name
//! never interleave) and each schema version names exactly one change.
//! Checks that need no table state (decoding the definition, the name's
//! encoding) run on arrival, so a queued request holds no section.
//! GET_TABINFO and LIST_TABLES only read online tables and are answered at
//! once: tables being created or dropped are invisible to them.

use crate::tables::{TableEntry, TableState};
use crate::{Dict, MAX_PARTITIONS, SCHEMA_PHASE};
use kernel::{Context, Report};
use signal::schema::{IndexChange, TableDef};
use signal::signals::{
    AlterTabConf, CreateIndexReq, CreateTabConf, CreateTabReq, DropIndexReq, DropTabConf,
    DropTabReq, GetTabInfoConf, GetTabInfoReq, ListTablesConf, ListTablesReq, NodeFailRep,
    SchemaRef,
};
use signal::{BlockKind, BlockRef, ErrorCode, NodeId, Signal};
use std::sync::Arc;

/// Most schema requests waiting behind the running one; more get
/// `SchemaBusy` (temporary) so a flood of requests cannot grow dict.
pub const QUEUE_CAPACITY: usize = 64;

/// A create or drop waiting its turn.
pub(crate) struct QueuedRequest {
    /// Who asked (the reply goes there).
    pub(crate) requester: BlockRef,
    /// Client's number, echoed.
    pub(crate) request_id: u32,
    pub(crate) kind: RequestKind,
}

/// What a queued request asks.
pub(crate) enum RequestKind {
    /// Create this (decoded, checked) table.
    Create(TableDef),
    /// Drop the table with this name.
    Drop(String),
    /// Create the index (decoded, its names checked for form).
    CreateIndex(IndexChange),
    /// Drop the index.
    DropIndex(IndexChange),
}

/// The schema operation running.
pub(crate) enum Operation {
    /// Creating `table` (id, version and partitions assigned).
    Create {
        requester: BlockRef,
        request_id: u32,
        table: Arc<TableDef>,
        step: CreateStep,
    },
    /// Dropping table `table_id`.
    Drop {
        requester: BlockRef,
        request_id: u32,
        table_id: u32,
        step: DropStep,
    },
    /// Changing a table's indexes from `previous` to `new` (`alter.rs`).
    Alter {
        requester: BlockRef,
        request_id: u32,
        previous: Arc<TableDef>,
        new: Arc<TableDef>,
        step: AlterStep,
        /// Why an ldm could not build the index (the change is rolled
        /// back).
        error: Option<ErrorCode>,
    },
}

/// Where an index change stands.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum AlterStep {
    /// A create: waiting for every ldm to build the new index.
    Building,
    /// Waiting for every tc to take the new revision (after the ldms'
    /// build or roll-back, before the dicts; a drop: after the dicts,
    /// before the ldms), which then keeps the hidden tables of the unique
    /// indexes it names and no others.
    Switching,
    /// A unique index created on a live table: waiting for this node's
    /// tc to build its hidden rows (every tc keeps it, building, since
    /// `Switching`).
    Populating,
    /// Its hidden rows are built: waiting for every tc to keep it as any
    /// unique index (the same revision, nothing building).
    Settling,
    /// Waiting for every other dict to take the new revision.
    Announcing,
    /// A drop: waiting for every ldm to drop the index.
    Dropping,
    /// A create that failed (an ldm could not build the index, or two
    /// rows hold a new unique index's value): waiting for every tc to
    /// stop keeping it, under the next revision.
    RollingBackTcs,
    /// Then for every ldm to drop it again, under that revision (which the
    /// dicts then take).
    RollingBack,
    /// The new revision here; waiting for this dict's schema file.
    Saving,
}

/// Where a create stands.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum CreateStep {
    /// Waiting for dih's partition map.
    Distributing,
    /// Waiting for every tc and ldm of every node to add the table.
    Adding,
    /// Waiting for every other dict to take the table.
    Announcing,
    /// Online here; waiting for this dict's schema file to hold it.
    Saving,
}

/// Where a drop stands.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum DropStep {
    /// Waiting for every tc to stop routing to the table.
    Coordinators,
    /// Waiting for every ldm to free the table's partitions.
    DataManagers,
    /// Waiting for every other dict to forget the table.
    Dictionaries,
    /// Removed here; waiting for this dict's schema file to lose it.
    Saving,
}

impl Dict {
    /// Answers `to`'s request `request_id` with `error`.
    pub(crate) fn refuse(
        &self,
        to: BlockRef,
        request_id: u32,
        error: ErrorCode,
        ctx: &mut dyn Context,
    ) {
        kernel::send(ctx, self.address, to, SchemaRef { request_id, error });
    }

    /// Refuses a create or drop at a dict that is not the master; true if
    /// so.
    fn refused_not_master(&self, from: BlockRef, request_id: u32, ctx: &mut dyn Context) -> bool {
        let master = self.is_master();
        if !master {
            self.refuse(from, request_id, ErrorCode::NotMaster, ctx);
        }
        !master
    }

    /// Refuses a request that arrived before the schema phase; true if so.
    fn refused_before_start(&self, from: BlockRef, request_id: u32, ctx: &mut dyn Context) -> bool {
        let started = self.phase >= SCHEMA_PHASE;
        if !started {
            self.refuse(from, request_id, ErrorCode::NodeNotStarted, ctx);
        }
        !started
    }

    pub(crate) fn create_table_request(
        &mut self,
        from: BlockRef,
        request: CreateTabReq,
        ctx: &mut dyn Context,
    ) {
        let request_id = request.request_id;
        if self.refused_not_master(from, request_id, ctx) {
            return;
        }
        if self.refused_before_start(from, request_id, ctx) {
            return;
        }
        let table = match TableDef::decode(request.definition.as_slice()) {
            Ok(table) if table.partitions <= MAX_PARTITIONS => table,
            _ => return self.refuse(from, request_id, ErrorCode::BadTableDefinition, ctx),
        };
        self.enqueue(from, request_id, RequestKind::Create(table), ctx);
    }

    pub(crate) fn drop_table_request(
        &mut self,
        from: BlockRef,
        request: DropTabReq,
        ctx: &mut dyn Context,
    ) {
        let request_id = request.request_id;
        if self.refused_not_master(from, request_id, ctx) {
            return;
        }
        if self.refused_before_start(from, request_id, ctx) {
            return;
        }
        let Ok(name) = std::str::from_utf8(request.name.as_slice()) else {
            // No table has a name that is not UTF-8.
            return self.refuse(from, request_id, ErrorCode::UnknownTable, ctx);
        };
        let name = name.to_owned();
        self.enqueue(from, request_id, RequestKind::Drop(name), ctx);
    }

    pub(crate) fn create_index_request(
        &mut self,
        from: BlockRef,
        request: CreateIndexReq,
        ctx: &mut dyn Context,
    ) {
        let request_id = request.request_id;
        if let Some(change) = self.index_change(from, request_id, &request.change, ctx) {
            self.enqueue(from, request_id, RequestKind::CreateIndex(change), ctx);
        }
    }

    pub(crate) fn drop_index_request(
        &mut self,
        from: BlockRef,
        request: DropIndexReq,
        ctx: &mut dyn Context,
    ) {
        let request_id = request.request_id;
        if let Some(change) = self.index_change(from, request_id, &request.change, ctx) {
            self.enqueue(from, request_id, RequestKind::DropIndex(change), ctx);
        }
    }

    /// The checks every index change gets on arrival, and its decoded
    /// section (`None`: refused).
    fn index_change(
        &self,
        from: BlockRef,
        request_id: u32,
        change: &signal::Section,
        ctx: &mut dyn Context,
    ) -> Option<IndexChange> {
        if self.refused_not_master(from, request_id, ctx)
            || self.refused_before_start(from, request_id, ctx)
        {
            return None;
        }
        match IndexChange::decode(change.as_slice()) {
            Ok(change) => Some(change),
            Err(_) => {
                self.refuse(from, request_id, ErrorCode::BadTableDefinition, ctx);
                None
            }
        }
    }

    pub(crate) fn get_table_info(
        &mut self,
        from: BlockRef,
        request: GetTabInfoReq,
        ctx: &mut dyn Context,
    ) {
        let request_id = request.request_id;
        if self.refused_before_start(from, request_id, ctx) {
            return;
        }
        let online = std::str::from_utf8(request.name.as_slice())
            .ok()
            .and_then(|name| self.tables.by_name(name))
            .filter(|entry| entry.state == TableState::Online)
            .map(|entry: &TableEntry| {
                let map = entry
                    .map
                    .clone()
                    .expect("an online table has its distribution");
                (Arc::clone(&entry.definition), map)
            });
        let Some((table, map)) = online else {
            return self.refuse(from, request_id, ErrorCode::UnknownTable, ctx);
        };
        // The map as created, under the agreed membership: what the tcs
        // route with.
        let map = self.node_failures.route(&map);
        let mut map_bytes = Vec::new();
        signal::codec::encode_partition_map(&mut map_bytes, &map);
        let sections = ctx
            .pool()
            .copy_from(&table.encode_to_vec())
            .zip(ctx.pool().copy_from(&map_bytes));
        let Some((definition, map_section)) = sections else {
            return self.refuse(from, request_id, ErrorCode::OutOfSignalMemory, ctx);
        };
        let conf = GetTabInfoConf {
            request_id,
            schema_version: self.schema_version,
            definition,
            map_version: map.version,
            map: map_section,
        };
        kernel::send(ctx, self.address, from, conf);
    }

    /// LIST_TABLES: the names of the online tables, sorted, with the schema
    /// version they belong to. Names that do not fit one section (past
    /// 1 985 tables of 64-byte names) and an exhausted section pool are both
    /// refused with `OutOfSignalMemory`: a list with tables left out would
    /// let the replica checker skip them unnoticed.
    pub(crate) fn list_tables(
        &mut self,
        from: BlockRef,
        request: ListTablesReq,
        ctx: &mut dyn Context,
    ) {
        let request_id = request.request_id;
        if self.refused_before_start(from, request_id, ctx) {
            return;
        }
        let mut bytes = Vec::new();
        let names = signal::codec::encode_table_names(&mut bytes, self.tables.online_names())
            .ok()
            .and_then(|()| ctx.pool().copy_from(&bytes));
        let Some(names) = names else {
            return self.refuse(from, request_id, ErrorCode::OutOfSignalMemory, ctx);
        };
        let conf = ListTablesConf {
            request_id,
            schema_version: self.schema_version,
            names,
        };
        kernel::send(ctx, self.address, from, conf);
    }

    /// An API node is gone: its waiting requests are dropped. A running one
    /// finishes (undoing half a schema change is worse) and its reply goes
    /// out to nobody, harmlessly.
    pub(crate) fn api_failed(&mut self, node: NodeId) {
        self.queue.retain(|queued| queued.requester.node != node);
    }

    /// NODE_FAILREP: the nodes of `report.failed` left the cluster. A
    /// schema operation this dict runs as master stops waiting for their
    /// blocks, and later ones do not ask them (they rejoin by node
    /// restart, which brings them the schema). When the master dict
    /// failed, the new president's dict takes its role over and finishes
    /// or undoes what it had under way (`takeover.rs`).
    pub(crate) fn node_failed(
        &mut self,
        from: BlockRef,
        report: NodeFailRep,
        ctx: &mut dyn Context,
    ) {
        let failed = self.node_failures.install(self.address, from, &report, ctx);
        if failed.is_empty() {
            // A node restart's admission: the master sends it the schema
            // once no change runs, and takes none meanwhile.
            self.start_next(ctx);
            return;
        }
        if self
            .master
            .is_some_and(|master| failed.contains(master.node))
        {
            // The new president's dict is the master from now on: it
            // takes over (`takeover.rs`), then schema changes go on.
            let president = report.president;
            ctx.report(Report::Log(format!(
                "dict {}: the master dict (node {}) failed; node {president}'s dict is the \
                 master now",
                self.address,
                self.master().node,
            )));
            self.master = Some(BlockRef::new(president, BlockKind::Dict, 0));
            if self.is_master() && self.phase >= SCHEMA_PHASE {
                self.tcs.forget_nodes(failed);
                self.ldms.forget_nodes(failed);
                self.dicts.forget_nodes(failed);
                self.schema_sent_to = self.schema_sent_to.difference(failed);
                self.include_restarted_members();
                return self.start_takeover(report.membership_id, ctx);
            }
        }
        let tcs = self.tcs.forget_nodes(failed);
        let ldms = self.ldms.forget_nodes(failed);
        let dicts = self.dicts.forget_nodes(failed);
        // A node that restarts again needs the schema again.
        self.schema_sent_to = self.schema_sent_to.difference(failed);
        self.schema_sync_without(failed, ctx);
        self.takeover_without(failed, ctx);
        match &self.running {
            Some(Operation::Create { step, .. }) => match step {
                CreateStep::Adding if tcs || ldms => self.create_answered(ctx),
                CreateStep::Announcing if dicts => self.create_answered(ctx),
                _ => {}
            },
            Some(Operation::Drop { step, .. }) => match step {
                DropStep::Coordinators if tcs => self.drop_step_answered(ctx),
                DropStep::DataManagers if ldms => self.drop_step_answered(ctx),
                DropStep::Dictionaries if dicts => self.drop_step_answered(ctx),
                _ => {}
            },
            Some(Operation::Alter { step, .. }) => match step {
                AlterStep::Building | AlterStep::Dropping | AlterStep::RollingBack if ldms => {
                    self.alter_answered(ctx)
                }
                AlterStep::Switching | AlterStep::Settling | AlterStep::RollingBackTcs if tcs => {
                    self.alter_answered(ctx)
                }
                AlterStep::Announcing if dicts => self.alter_answered(ctx),
                _ => {}
            },
            None => {}
        }
    }

    fn enqueue(
        &mut self,
        requester: BlockRef,
        request_id: u32,
        kind: RequestKind,
        ctx: &mut dyn Context,
    ) {
        if self.queue.len() >= QUEUE_CAPACITY {
            return self.refuse(requester, request_id, ErrorCode::SchemaBusy, ctx);
        }
        self.queue.push_back(QueuedRequest {
            requester,
            request_id,
            kind,
        });
        self.start_next(ctx);
    }

    /// Starts queued requests until one keeps running (a request refused at
    /// its start, say for a taken name, finishes at once).
    pub(crate) fn start_next(&mut self, ctx: &mut dyn Context) {
        self.send_schema_to_restarting(ctx);
        while self.running.is_none() && !self.is_taking_over() {
            let Some(queued) = self.queue.pop_front() else {
                return;
            };
            if self.node_restart_in_progress() {
                // Until every starting member has started
                // (docs/design/0018-node-restart.md).
                let error = ErrorCode::NodeRestartInProgress;
                self.refuse(queued.requester, queued.request_id, error, ctx);
                continue;
            }
            match queued.kind {
                RequestKind::Create(table) => {
                    self.start_create(queued.requester, queued.request_id, table, ctx)
                }
                RequestKind::Drop(name) => {
                    self.start_drop(queued.requester, queued.request_id, &name, ctx)
                }
                RequestKind::CreateIndex(change) => {
                    self.start_index_change(queued.requester, queued.request_id, change, true, ctx)
                }
                RequestKind::DropIndex(change) => {
                    self.start_index_change(queued.requester, queued.request_id, change, false, ctx)
                }
            }
        }
    }

    /// This dict's schema file holds the running create or drop, the last
    /// step of either: answer its client, then start the next.
    pub(crate) fn operation_saved(&mut self, ctx: &mut dyn Context) {
        let (requester, conf): (BlockRef, Signal) = match &self.running {
            Some(Operation::Create {
                requester,
                request_id,
                table,
                step: CreateStep::Saving,
            }) => {
                let conf = CreateTabConf {
                    request_id: *request_id,
                    table_id: table.id,
                    table_version: table.version,
                };
                (*requester, conf.into())
            }
            Some(Operation::Drop {
                requester,
                request_id,
                step: DropStep::Saving,
                ..
            }) => {
                let conf = DropTabConf {
                    request_id: *request_id,
                };
                (*requester, conf.into())
            }
            Some(Operation::Alter {
                requester,
                request_id,
                new,
                step: AlterStep::Saving,
                error,
                ..
            }) => match error {
                // A build that failed, rolled back everywhere.
                Some(error) => {
                    let refusal = SchemaRef {
                        request_id: *request_id,
                        error: *error,
                    };
                    (*requester, refusal.into())
                }
                None => {
                    let conf = AlterTabConf {
                        request_id: *request_id,
                        revision: new.revision,
                    };
                    (*requester, conf.into())
                }
            },
            _ => panic!(
                "dict {}: the schema file was saved for a create or drop, but none waits for it",
                self.address
            ),
        };
        kernel::send(ctx, self.address, requester, conf);
        self.finish_operation(ctx);
    }

    /// The running operation finished: start the next.
    pub(crate) fn finish_operation(&mut self, ctx: &mut dyn Context) {
        assert!(self.running.is_some(), "a schema operation finished twice");
        self.running = None;
        self.start_next(ctx);
    }
}
