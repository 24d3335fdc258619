//! CREATE INDEX and DROP INDEX on a table that holds rows and is written
//! meanwhile (docs/design/0024-online-index-changes.md): a change of the
//! table's index list, as a new revision of the same table (its version,
//! which operations are checked against, stays). Runs on the master dict
//! only.
//!
//! ```text
//!  create:
//!  API      master dict            every ldm               other dicts
//!   |-CreateIndexReq->|                 |                        |
//!   |                 |-LqhAlterTabReq{r+1}->|  build it over the rows
//!   |                 |<-AlterTabRep{r+1}----|  while writes go on
//!   |                 |  (every ldm built it; an AlterTabRef from any
//!   |                 |   sends every ldm, tc, then dict, r's indexes
//!   |                 |   as r+2, and the client is refused: revisions
//!   |                 |   only rise, so r+1's index id is never reused)
//!   |                 |-TcAlterTabReq{r+1}-->| every tc
//!   |                 |<-AlterTabRep{r+1}----|
//!   |                 |-- DictAlterTabReq{r+1, schema version + 1} --->|
//!   |                 |<-- AlterTabRep{r+1} ---------------------------|
//!   |                 |  r+1 here, schema file written
//!   |<-AlterTabConf---|
//!
//!  drop:
//!   |-DropIndexReq--->|-- DictAlterTabReq{r+1} ----------------------->|
//!   |                 |<-- AlterTabRep ---------------------------------|
//!   |                 |  r+1 here (no dict hands the index out now)
//!   |                 |-TcAlterTabReq{r+1}-->| every tc: a unique index's
//!   |                 |<-AlterTabRep{r+1}----| hidden rows are kept no more
//!   |                 |-LqhAlterTabReq{r+1}->|  drop it, nodes freed (and a
//!   |                 |<-AlterTabRep{r+1}----|  unique index's hidden table,
//!   |                 |                       once no operation uses it)
//!   |                 |  schema file written
//!   |<-AlterTabConf---|
//! ```
//!
//! The order makes an index visible only once complete on every replica,
//! and invisible before any replica loses it: no dict hands out a
//! definition naming an index some ldm lacks. A client holding an older
//! definition still works (its operations name the unchanged version);
//! a scan of an index an ldm no longer has is refused with UnknownIndex
//! and the client refreshes. The tcs follow every revision; what they do
//! with it is keep the hidden tables of the unique indexes it names
//! (docs/design/0026-unique-indexes.md).
//!
//! When a participant dies: an ldm or dict, so it is not waited for (its
//! node restarts with the definition the master holds then, building
//! every index it names from its rows); the master, so the next master's
//! take-over brings every ldm and dict to the highest revision any live
//! dict holds (`takeover.rs`): a create that reached a dict is finished,
//! one that reached none is rolled back at the ldms (under a revision
//! above every one held); a drop that reached a dict is finished.

use crate::persistence::AfterSave;
use crate::requests::{AlterStep, Operation};
use crate::Dict;
use kernel::faults::FaultPoint;
use kernel::{Context, Report};
use signal::schema::{IndexChange, IndexDef, TableDef, UniqueTable, MAX_INDEXES, MAX_INDEX_ID};
use signal::signals::{
    AlterTabRef, AlterTabRep, BuildUniqueConf, BuildUniqueRef, BuildUniqueReq, DictAlterTabReq,
    LqhAlterTabReq, TcAlterTabReq,
};
use signal::{BlockKind, BlockRef, ErrorCode};
use std::sync::Arc;

impl Dict {
    /// Starts creating (`create`) or dropping the index `change` names,
    /// or refuses it.
    pub(crate) fn start_index_change(
        &mut self,
        requester: BlockRef,
        request_id: u32,
        change: IndexChange,
        create: bool,
        ctx: &mut dyn Context,
    ) {
        let new = match create {
            true => self.table_with_index(&change),
            false => self.table_without_index(&change),
        };
        let new = match new {
            Ok(new) => Arc::new(new),
            Err(error) => return self.refuse(requester, request_id, error, ctx),
        };
        ctx.report(Report::Log(format!(
            "dict {}: {} index {} of table {} (revision {})",
            self.address,
            if create { "creating" } else { "dropping" },
            change.index,
            change.table,
            new.revision
        )));
        self.running = Some(Operation::Alter {
            requester,
            request_id,
            previous: self.online_definition(new.id),
            new: Arc::clone(&new),
            // A create builds at every ldm first; a drop goes to the
            // dicts first.
            step: if create {
                AlterStep::Building
            } else {
                AlterStep::Announcing
            },
            error: None,
        });
        if create {
            self.send_to_ldms(&new, ctx);
            ctx.fault_point(FaultPoint::IndexAfterBuildRequests);
        } else {
            self.announce_alter(ctx);
        }
    }

    fn online_definition(&self, table_id: u32) -> Arc<TableDef> {
        let entry = self.tables.by_id(table_id).expect("checked just now");
        Arc::clone(&entry.definition)
    }

    /// The online table `change` names, with the index added as the next
    /// revision.
    fn table_with_index(&self, change: &IndexChange) -> Result<TableDef, ErrorCode> {
        let table = self.online_table(&change.table)?;
        if table.index(&change.index).is_some() {
            return Err(ErrorCode::IndexExists);
        }
        // A failed build's roll-back takes the revision after the new
        // index's.
        if table.indexes.len() >= MAX_INDEXES || table.revision + 1 >= MAX_INDEX_ID {
            return Err(ErrorCode::TooManyIndexes);
        }
        if change.columns.is_empty() {
            return Err(ErrorCode::BadTableDefinition);
        }
        let columns = change
            .columns
            .iter()
            .map(|name| table.column(name).map(|(id, _)| id))
            .collect::<Option<Vec<u16>>>()
            .ok_or(ErrorCode::UnknownColumn)?;
        let revision = table.revision + 1;
        // A unique index's hidden table takes the lowest free id, at that
        // id's next version, as at a table's create.
        let unique = change.unique.then(|| {
            let id = self.tables.lowest_free_ids(1)[0];
            UniqueTable {
                table_id: id,
                table_version: self.tables.next_version(id),
            }
        });
        let mut new = table.clone();
        new.indexes.push(IndexDef {
            id: revision,
            name: change.index.clone(),
            columns,
            unique,
        });
        new.revision = revision;
        // Columns named twice, say.
        new.validate().map_err(|_| ErrorCode::BadTableDefinition)?;
        Ok(new)
    }

    /// The online table `change` names, without the index, as the next
    /// revision.
    fn table_without_index(&self, change: &IndexChange) -> Result<TableDef, ErrorCode> {
        let table = self.online_table(&change.table)?;
        let Some(index) = table.index(&change.index) else {
            return Err(ErrorCode::UnknownIndex);
        };
        if table.revision >= MAX_INDEX_ID {
            return Err(ErrorCode::TooManyIndexes);
        }
        let id = index.id;
        let mut new = table.clone();
        new.indexes.retain(|index| index.id != id);
        new.revision = table.revision + 1;
        Ok(new)
    }

    fn online_table(&self, name: &str) -> Result<&TableDef, ErrorCode> {
        self.tables
            .by_name(name)
            .filter(|entry| entry.state == crate::tables::TableState::Online)
            .map(|entry| entry.definition.as_ref())
            .ok_or(ErrorCode::UnknownTable)
    }

    fn send_to_ldms(&mut self, table: &Arc<TableDef>, ctx: &mut dyn Context) {
        self.ldms.start_round();
        for &ldm in self.ldms.members() {
            let request = LqhAlterTabReq {
                table: Arc::clone(table),
            };
            kernel::send(ctx, self.address, ldm, request);
        }
    }

    /// Sends every tc the revision `table`, with the unique index whose
    /// hidden rows are being built (`building`, 0: none).
    fn send_to_tcs(&mut self, table: &Arc<TableDef>, building: u32, ctx: &mut dyn Context) {
        self.tcs.start_round();
        for &tc in self.tcs.members() {
            let request = TcAlterTabReq {
                building,
                table: Arc::clone(table),
            };
            kernel::send(ctx, self.address, tc, request);
        }
    }

    /// Tells every other dict the new revision (the highest node first,
    /// as a create announces), or moves on when there are none.
    fn announce_alter(&mut self, ctx: &mut dyn Context) {
        let Some(Operation::Alter { new, .. }) = &self.running else {
            unreachable!("announce_alter runs within an alter");
        };
        let new = Arc::clone(new);
        let schema_version = self.next_schema_version();
        self.dicts.start_round();
        for &dict in self.dicts.members().iter().rev() {
            let request = DictAlterTabReq {
                schema_version,
                table: Arc::clone(&new),
            };
            kernel::send(ctx, self.address, dict, request);
            let held = self.online_definition(new.id).indexes.len();
            let point = match new.indexes.len() {
                added if added > held => Some(FaultPoint::IndexAfterFirstAnnounce),
                dropped if dropped < held => Some(FaultPoint::IndexDropAfterFirstDictionary),
                // A roll-back: the same indexes under a new revision.
                _ => None,
            };
            if let Some(point) = point {
                ctx.fault_point(point);
            }
        }
        self.alter_answered(ctx);
    }

    /// AlterTabRep from an ldm or (announcing) a dict.
    pub(crate) fn alter_report(
        &mut self,
        from: BlockRef,
        report: AlterTabRep,
        ctx: &mut dyn Context,
    ) {
        let Some(Operation::Alter { new, step, .. }) = &self.running else {
            // A late answer of a change a take-over decided: nothing waits.
            return;
        };
        if report.table_id != new.id || report.revision != new.revision {
            return;
        }
        let answers = match (*step, from.kind) {
            (
                AlterStep::Building | AlterStep::Dropping | AlterStep::RollingBack,
                BlockKind::Ldm,
            ) => &mut self.ldms,
            (
                AlterStep::Switching | AlterStep::Settling | AlterStep::RollingBackTcs,
                BlockKind::Tc,
            ) => &mut self.tcs,
            (AlterStep::Announcing, BlockKind::Dict) => &mut self.dicts,
            _ => return,
        };
        if answers.members().contains(&from) && !answers.has_answered(from) {
            answers.record(from, "AlterTabRep");
            self.alter_answered(ctx);
        }
    }

    /// AlterTabRef from an ldm: its build failed (it dropped the index
    /// again), and every ldm is rolled back once all have answered. In a
    /// step that builds nothing (an ldm that does not hold the table, which
    /// a change of a table every ldm holds never meets) it still counts
    /// as the ldm's answer, so the change cannot hang on it.
    pub(crate) fn alter_refused(
        &mut self,
        from: BlockRef,
        refusal: AlterTabRef,
        ctx: &mut dyn Context,
    ) {
        let address = self.address;
        let Some(Operation::Alter {
            new, step, error, ..
        }) = &mut self.running
        else {
            return;
        };
        let wanted = matches!(
            *step,
            AlterStep::Building | AlterStep::Dropping | AlterStep::RollingBack
        ) && from.kind == BlockKind::Ldm
            && refusal.table_id == new.id
            && refusal.revision == new.revision;
        if !wanted || !self.ldms.members().contains(&from) || self.ldms.has_answered(from) {
            return;
        }
        if *step == AlterStep::Building {
            error.get_or_insert(refusal.error);
        } else {
            ctx.report(Report::Log(format!(
                "dict {address}: ldm {from} refused revision {} of table {} ({:?}) while the \
                 change was at {step:?}",
                refusal.revision, refusal.table_id, refusal.error
            )));
        }
        self.ldms.record(from, "AlterTabRef");
        self.alter_answered(ctx);
    }

    /// An answer came, or the blocks the step waits for failed: the next
    /// step once the round is complete.
    pub(crate) fn alter_answered(&mut self, ctx: &mut dyn Context) {
        let Some(Operation::Alter {
            new,
            previous,
            step,
            error,
            ..
        }) = &mut self.running
        else {
            unreachable!("alter_answered runs within an alter");
        };
        let dropping = new.indexes.len() < previous.indexes.len();
        // A unique index this change creates: its hidden rows are built
        // between the tcs' switch and the dicts' announce.
        let building = created_unique_index(previous, new);
        match *step {
            AlterStep::Building if self.ldms.is_complete() => {
                if error.is_some() {
                    return self.roll_back_alter(ctx);
                }
                *step = AlterStep::Switching;
                let new = Arc::clone(new);
                self.send_to_tcs(&new, building.unwrap_or(0), ctx)
            }
            AlterStep::Switching if self.tcs.is_complete() => {
                let new = Arc::clone(new);
                if dropping {
                    // No tc keeps a dropped unique index's hidden rows now:
                    // the ldms may drop its table.
                    *step = AlterStep::Dropping;
                    return self.send_to_ldms(&new, ctx);
                }
                if let Some(index_id) = building {
                    // Every tc keeps the index from every write now, and
                    // no transaction from before runs: the rows that were
                    // there get their hidden rows.
                    *step = AlterStep::Populating;
                    let builder = BlockRef::new(self.address.node, BlockKind::Tc, 0);
                    let request = BuildUniqueReq {
                        table_id: new.id,
                        table_version: new.version,
                        index_id,
                    };
                    kernel::send(ctx, self.address, builder, request);
                    return ctx.fault_point(FaultPoint::UniqueIndexAfterBuildRequest);
                }
                *step = AlterStep::Announcing;
                self.announce_alter(ctx)
            }
            AlterStep::Settling if self.tcs.is_complete() => {
                *step = AlterStep::Announcing;
                self.announce_alter(ctx)
            }
            AlterStep::RollingBackTcs if self.tcs.is_complete() => {
                // No tc keeps the failed index: every ldm drops it (a
                // unique index's hidden table with it).
                *step = AlterStep::RollingBack;
                let back = Arc::clone(new);
                self.send_to_ldms(&back, ctx)
            }
            AlterStep::RollingBack if self.ldms.is_complete() => {
                // The other dicts and this one take the roll-back's
                // revision too; the client is refused once it is saved.
                *step = AlterStep::Announcing;
                self.announce_alter(ctx)
            }
            AlterStep::Announcing if self.dicts.is_complete() => {
                let new = Arc::clone(new);
                *step = if dropping {
                    AlterStep::Switching
                } else {
                    AlterStep::Saving
                };
                self.tables.replace_definition(Arc::clone(&new));
                self.bump_schema_version(ctx);
                if dropping {
                    return self.send_to_tcs(&new, 0, ctx);
                }
                self.save_schema(AfterSave::AnswerClient, ctx);
            }
            AlterStep::Dropping if self.ldms.is_complete() => {
                *step = AlterStep::Saving;
                self.save_schema(AfterSave::AnswerClient, ctx);
            }
            _ => {}
        }
    }

    /// The create failed (`error` says why): back to the previous indexes,
    /// under a revision above the one that failed, so that the failed
    /// index's id is never handed out again (revisions only rise). The
    /// tcs first, so no write keeps a hidden table the ldms then drop.
    fn roll_back_alter(&mut self, ctx: &mut dyn Context) {
        let Some(Operation::Alter {
            new,
            previous,
            step,
            ..
        }) = &mut self.running
        else {
            unreachable!("roll_back_alter runs within an alter");
        };
        *step = AlterStep::RollingBackTcs;
        // The failed unique index's hidden table was registered at the
        // tcs and ldms under its (id, version): the next table at that id
        // takes the version after it.
        if let Some(index_id) = created_unique_index(previous, new) {
            let index = new.indexes.iter().find(|index| index.id == index_id);
            let unique = index.and_then(|index| index.unique);
            if let Some(unique) = unique {
                self.tables
                    .note_version(unique.table_id, unique.table_version);
            }
        }
        *new = Arc::new(TableDef {
            revision: new.revision + 1,
            ..TableDef::clone(previous)
        });
        let back = Arc::clone(new);
        self.send_to_tcs(&back, 0, ctx)
    }

    /// BUILD_UNIQUE_CONF from this node's tc: every row has its hidden
    /// row; the tcs keep the index as any from now on.
    pub(crate) fn unique_index_built(&mut self, conf: BuildUniqueConf, ctx: &mut dyn Context) {
        let Some(Operation::Alter { new, step, .. }) = &mut self.running else {
            return;
        };
        if *step != AlterStep::Populating || conf.table_id != new.id {
            return;
        }
        ctx.report(Report::Log(format!(
            "dict {}: unique index {} of table {}: {} hidden rows built",
            self.address, conf.index_id, conf.table_id, conf.rows
        )));
        *step = AlterStep::Settling;
        let new = Arc::clone(new);
        self.send_to_tcs(&new, 0, ctx)
    }

    /// BUILD_UNIQUE_REF from this node's tc: two rows hold a value (or the
    /// build could not go on): the index is rolled back everywhere.
    pub(crate) fn unique_index_refused(&mut self, refusal: BuildUniqueRef, ctx: &mut dyn Context) {
        let Some(Operation::Alter {
            new, step, error, ..
        }) = &mut self.running
        else {
            return;
        };
        if *step != AlterStep::Populating || refusal.table_id != new.id {
            return;
        }
        ctx.report(Report::Log(format!(
            "dict {}: unique index {} of table {} not created ({:?})",
            self.address, refusal.index_id, refusal.table_id, refusal.error
        )));
        error.get_or_insert(refusal.error);
        self.roll_back_alter(ctx)
    }

    /// At a dict that is not the master: the master changed a table's
    /// indexes; hand out the new definition from now on.
    pub(crate) fn table_altered(
        &mut self,
        from: BlockRef,
        request: DictAlterTabReq,
        ctx: &mut dyn Context,
    ) {
        self.check_from_master(from, "DictAlterTabReq");
        let table = request.table;
        let (table_id, revision) = (table.id, table.revision);
        // The same table (this id's version, name and columns): only its
        // indexes may differ.
        let held = self.tables.by_id(table_id).is_some_and(|entry| {
            let held = &entry.definition;
            held.version == table.version
                && held.name == table.name
                && held.columns == table.columns
        });
        if !held {
            // A take-over aligns only tables every dict holds; a late
            // change of a table since dropped has nothing to change.
            let report = AlterTabRep { table_id, revision };
            return kernel::send(ctx, self.address, from, report);
        }
        self.tables.replace_definition(table);
        if request.schema_version > self.schema_version {
            self.set_schema_version(request.schema_version, ctx);
        }
        let confirm = AfterSave::ConfirmAlter {
            master: from,
            table_id,
            revision,
        };
        self.save_schema(confirm, ctx);
    }
}

/// The unique index `new` adds to `previous`, if it adds one.
fn created_unique_index(previous: &TableDef, new: &TableDef) -> Option<u32> {
    let added = new
        .indexes
        .iter()
        .find(|index| !previous.indexes.iter().any(|held| held.id == index.id))?;
    added.unique.map(|_| added.id)
}
