//! The master dict's take-over (docs/design/0016-schema-takeover.md;
//! NDB's DICT_TAKEOVER): the president's dict failed, perhaps half-way
//! through a create or drop, and this dict, the new president's, is the
//! master now. It finds out what every survivor holds and makes each
//! table it finds either whole or gone:
//!
//! ```text
//!  new master dict          every live tc, ldm            other dicts
//!   | (every survivor installed the failure: NODE_FAIL_COMPLETE_REP)
//!   |-- DictTakeoverReq{its tables} -->|------------------------>|
//!   |<------------------------------------- DictAddTabReq -------|  each table
//!   |                                  |                         |  the master lacks
//!   |<-- DictTakeoverConf{tables} -----|<------------------------|
//!   |  decide: a table stays iff every live tc and ldm and at least
//!   |  one live dict hold it; the rest is dropped wherever it is
//!   |-- DropTabOrd -> tcs, then ldms, then dicts (each answers DropTabRep)
//!   |-- DictAddTabReq -> each dict lacking a table that stays (AddTabConf)
//!   |-- DictTakeoverDoneOrd{schema version} -> every other dict
//!   |  schema file written; queued creates and drops run
//! ```
//!
//! The rule matches every place a create or drop can stop (the table in
//! design 0016): a create that had not reached every tc and ldm, or no
//! dict, is rolled back; one that reached a dict is rolled forward (a
//! client may have found it there and written rows); a drop that reached
//! any tc or ldm is finished. It looks only at what the survivors hold,
//! so a take-over interrupted by the new master's own death is simply run
//! again by the next one. Nothing of the old master can arrive any more
//! (every survivor refuses its node), and the new master's client
//! requests wait in the queue until the take-over is done.
//!
//! When a participant dies: a tc, ldm or dict that fails stops being
//! waited for (its node left the cluster and rejoins by node restart,
//! which brings it the schema); the new master's death leaves the next
//! president's dict to take over from what the survivors hold then.

use crate::persistence::AfterSave;
use crate::tables::TableState;
use crate::Dict;
use kernel::{Context, Report};
use signal::codec::{decode_table_versions, encode_table_versions};
use signal::schema::TableDef;
use signal::signals::{
    ContinueB, DictAddTabReq, DictAlterTabReq, DictTakeoverConf, DictTakeoverDoneOrd,
    DictTakeoverReq, DropTabOrd, LqhAlterTabReq, PartitionMap, TcAlterTabReq,
};
use signal::{BlockKind, BlockRef, Envelope, NodeSet, Signal};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// dict's ContinueB job: ask the take-over query again (the section pool
/// was short).
pub(crate) const TAKEOVER_RETRY_JOB: u32 = 3;

/// A take-over under way.
pub(crate) struct Takeover {
    /// The membership that left the old master out.
    membership_id: u32,
    step: Step,
    /// Every table some block holds: id -> (holder, version).
    held: BTreeMap<u32, Vec<(BlockRef, u32)>>,
    /// Tables other dicts hold and this one lacks, with their maps.
    offered: BTreeMap<u32, (Arc<TableDef>, Arc<PartitionMap>)>,
    /// Every tc's, ldm's and dict's index revision of each table it holds:
    /// id -> (holder, version, revision).
    revisions: BTreeMap<u32, Vec<(BlockRef, u32, u32)>>,
    /// Revisions of tables other dicts hold above this one's, the highest
    /// of each.
    offered_revisions: BTreeMap<u32, Arc<TableDef>>,
    /// The tables that stay, with the revision every tc, ldm and dict ends at.
    aligning: Vec<Arc<TableDef>>,
    /// The highest schema version any dict had.
    highest_schema_version: u32,
    /// The tables to drop everywhere.
    dropping: Vec<u32>,
    /// The tables that stay, with the other dicts that lack them.
    announcing: Vec<(Arc<TableDef>, Arc<PartitionMap>, Vec<BlockRef>)>,
    /// The answers the step waits for: (block, table id).
    pending: BTreeSet<(BlockRef, u32)>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Step {
    /// Until every survivor refuses the old master's signals.
    Waiting,
    /// Asked every live tc, ldm and dict what it holds.
    Querying,
    /// Dropping at the tcs, then the ldms, then the dicts.
    DroppingAt(BlockKind),
    /// Giving the tables that stay to the dicts that lack them.
    Announcing,
    /// Bringing every tc to each table's decided index revision, then
    /// (`Aligning`) every ldm and dict: the tcs first, so that no write
    /// keeps a unique index's hidden table an ldm is dropping.
    AligningTcs,
    Aligning,
    /// Waiting for this dict's schema file.
    Saving,
}

impl Dict {
    /// The old master failed and this dict is the master now: take over
    /// once every survivor has installed the failure.
    pub(crate) fn start_takeover(&mut self, membership_id: u32, ctx: &mut dyn Context) {
        assert!(
            self.takeover.is_none() && self.running.is_none(),
            "dict {}: becomes the master twice, or while running an operation",
            self.address
        );
        ctx.report(Report::Log(format!(
            "dict {}: taking over the master role (membership {membership_id}): asking every \
             survivor which tables it holds",
            self.address
        )));
        self.takeover = Some(Takeover {
            membership_id,
            step: Step::Waiting,
            held: BTreeMap::new(),
            offered: BTreeMap::new(),
            revisions: BTreeMap::new(),
            offered_revisions: BTreeMap::new(),
            aligning: Vec::new(),
            highest_schema_version: self.schema_version,
            dropping: Vec::new(),
            announcing: Vec::new(),
            pending: BTreeSet::new(),
        });
        self.takeover_query(ctx);
    }

    /// Every survivor handled a membership: the query goes out if the
    /// take-over waited for it.
    pub(crate) fn takeover_query(&mut self, ctx: &mut dyn Context) {
        let waiting = self
            .takeover
            .as_ref()
            .is_some_and(|takeover| takeover.step == Step::Waiting);
        if !waiting || !self.node_failures.all_complete() {
            return;
        }
        let mine = self.table_versions();
        let takeover = self.takeover.as_mut().expect("waiting, checked above");
        takeover.step = Step::Querying;
        let membership_id = takeover.membership_id;
        let mut bytes = Vec::new();
        encode_table_versions(&mut bytes, mine.iter().copied())
            .expect("a dict holds at most MAX_TABLE_VERSIONS tables (creates are refused past it)");
        let everyone: Vec<BlockRef> = [&self.tcs, &self.ldms, &self.dicts]
            .iter()
            .flat_map(|answers| answers.members().iter().copied())
            .collect();
        // Every section first, so that a short pool sends none and the
        // query goes out whole a little later.
        let sections: Option<Vec<_>> = everyone
            .iter()
            .map(|_| ctx.pool().copy_from(&bytes))
            .collect();
        let Some(sections) = sections else {
            takeover.step = Step::Waiting;
            let retry = Envelope {
                from: self.address,
                to: self.address,
                signal: ContinueB {
                    job: TAKEOVER_RETRY_JOB,
                }
                .into(),
            };
            return ctx.send_delayed(retry, kernel::schema_takeover::SECTION_RETRY_DELAY_MS);
        };
        for &(id, version, revision) in &mine {
            takeover
                .held
                .entry(id)
                .or_default()
                .push((self.address, version));
            let holders = takeover.revisions.entry(id).or_default();
            holders.push((self.address, version, revision));
        }
        self.tcs.start_round();
        self.ldms.start_round();
        self.dicts.start_round();
        for (block, tables) in everyone.into_iter().zip(sections) {
            let request = DictTakeoverReq {
                membership_id,
                tables,
            };
            kernel::send(ctx, self.address, block, request);
        }
        self.takeover_answered(ctx);
    }

    /// DictAddTabReq from another dict while this one asks: a table it
    /// holds and this dict lacks, with its map.
    pub(crate) fn takeover_offered(
        &mut self,
        from: BlockRef,
        request: DictAddTabReq,
        ctx: &mut dyn Context,
    ) {
        // Offers come ahead of each dict's answer on the same link, so
        // none reaches a master after its take-over decided.
        let Some(takeover) = &mut self.takeover else {
            return self.table_added(from, request, ctx);
        };
        if takeover.step != Step::Querying || from.kind != BlockKind::Dict {
            return;
        }
        takeover.highest_schema_version =
            takeover.highest_schema_version.max(request.schema_version);
        let higher = takeover
            .offered
            .get(&request.table.id)
            .is_none_or(|(held, _)| held.revision < request.table.revision);
        if higher {
            takeover
                .offered
                .insert(request.table.id, (request.table, request.map));
        }
    }

    /// DictAlterTabReq from another dict while this one asks: a table
    /// this dict holds at a lower index revision. Else (at a dict that is
    /// not the master) the master's index change.
    pub(crate) fn takeover_offered_revision(
        &mut self,
        from: BlockRef,
        request: DictAlterTabReq,
        ctx: &mut dyn Context,
    ) {
        let Some(takeover) = &mut self.takeover else {
            return self.table_altered(from, request, ctx);
        };
        if takeover.step != Step::Querying || from.kind != BlockKind::Dict {
            return;
        }
        let table = request.table;
        let higher = takeover
            .offered_revisions
            .get(&table.id)
            .is_none_or(|held| held.revision < table.revision);
        if higher {
            takeover.offered_revisions.insert(table.id, table);
        }
    }

    /// A tc's, ldm's or dict's tables.
    pub(crate) fn takeover_conf(
        &mut self,
        from: BlockRef,
        conf: DictTakeoverConf,
        ctx: &mut dyn Context,
    ) {
        let Some(takeover) = &mut self.takeover else {
            return;
        };
        if takeover.step != Step::Querying || conf.membership_id != takeover.membership_id {
            return;
        }
        // The codec checks the list on the wire, and a local one is ours.
        let Ok(tables) = decode_table_versions(conf.tables.as_slice()) else {
            return;
        };
        let answers = match from.kind {
            BlockKind::Tc => &mut self.tcs,
            BlockKind::Ldm => &mut self.ldms,
            BlockKind::Dict => &mut self.dicts,
            _ => return,
        };
        // From a block the round does not wait for (its node failed), or
        // a repeat: nothing to count.
        if !answers.members().contains(&from) || answers.has_answered(from) {
            return;
        }
        answers.record(from, "DictTakeoverConf");
        takeover.highest_schema_version = takeover.highest_schema_version.max(conf.schema_version);
        for (id, version, revision) in tables {
            takeover.held.entry(id).or_default().push((from, version));
            let holders = takeover.revisions.entry(id).or_default();
            holders.push((from, version, revision));
        }
        self.takeover_answered(ctx);
    }

    /// If every live block answered the query: decide, and start applying.
    fn takeover_answered(&mut self, ctx: &mut dyn Context) {
        let Some(takeover) = &mut self.takeover else {
            return;
        };
        let complete =
            self.tcs.is_complete() && self.ldms.is_complete() && self.dicts.is_complete();
        if takeover.step != Step::Querying || !complete {
            return;
        }
        let failed = self.node_failures.failed();
        let live = |block: &BlockRef| !failed.contains(block.node);
        let mut dicts: Vec<BlockRef> = self.dicts.members().to_vec();
        dicts.push(self.address);
        for (&id, holders) in &takeover.held {
            let holders: Vec<(BlockRef, u32)> = holders
                .iter()
                .copied()
                .filter(|(block, _)| live(block))
                .collect();
            let holds = |block: &BlockRef, version: u32| holders.contains(&(*block, version));
            // The version every live tc and ldm holds, if one does.
            let whole = holders
                .iter()
                .map(|&(_, version)| version)
                .find(|&version| {
                    self.tcs.members().iter().all(|tc| holds(tc, version))
                        && self.ldms.members().iter().all(|ldm| holds(ldm, version))
                        && dicts.iter().any(|dict| holds(dict, version))
                });
            let definition = whole.and_then(|version| match self.tables.by_id(id) {
                Some(entry) if entry.definition.version == version => Some((
                    Arc::clone(&entry.definition),
                    entry.map.clone().expect("an online table has its map"),
                )),
                Some(_) => None,
                None => takeover
                    .offered
                    .get(&id)
                    .filter(|(table, _)| table.version == version)
                    .cloned(),
            });
            match (whole, definition) {
                (Some(version), Some((table, map))) => {
                    let table = chosen_revision(takeover, id, version, table, &live);
                    takeover.aligning.push(Arc::clone(&table));
                    let lacking: Vec<BlockRef> = self
                        .dicts
                        .members()
                        .iter()
                        .copied()
                        .filter(|dict| !holds(dict, version))
                        .collect();
                    if !lacking.is_empty() || !holds(&self.address, version) {
                        takeover.announcing.push((table, map, lacking));
                    }
                }
                _ => {
                    // A later create of this id must not reuse a version
                    // some block held.
                    let highest = holders.iter().map(|&(_, version)| version).max();
                    self.tables.note_version(id, highest.unwrap_or(0));
                    takeover.dropping.push(id);
                }
            }
        }
        ctx.report(Report::Log(format!(
            "dict {}: schema take-over: {} table(s) kept, {} rolled forward, {} dropped",
            self.address,
            takeover.held.len() - takeover.dropping.len() - takeover.announcing.len(),
            takeover.announcing.len(),
            takeover.dropping.len(),
        )));
        takeover.step = Step::DroppingAt(BlockKind::Tc);
        self.takeover_send_drops(ctx);
    }

    /// Sends DropTabOrd of every table being dropped to every live block
    /// of the step's kind (a block that does not hold it answers at once),
    /// or moves on when there is nothing to wait for.
    fn takeover_send_drops(&mut self, ctx: &mut dyn Context) {
        let takeover = self.takeover.as_mut().expect("a take-over runs");
        let Step::DroppingAt(kind) = takeover.step else {
            unreachable!("drops are sent in a dropping step");
        };
        let blocks = match kind {
            BlockKind::Tc => self.tcs.members(),
            BlockKind::Ldm => self.ldms.members(),
            _ => self.dicts.members(),
        };
        for &block in blocks {
            for &table_id in &takeover.dropping {
                takeover.pending.insert((block, table_id));
                kernel::send(ctx, self.address, block, DropTabOrd { table_id });
            }
        }
        self.takeover_step_done(ctx);
    }

    /// DropTabRep or AddTabConf from `from` for `table_id` during the
    /// take-over; `busy`: the ldm still finishes operations on it.
    pub(crate) fn takeover_answer(
        &mut self,
        from: BlockRef,
        table_id: u32,
        busy: bool,
        ctx: &mut dyn Context,
    ) {
        let takeover = self.takeover.as_mut().expect("a take-over runs");
        if !takeover.pending.contains(&(from, table_id)) {
            return;
        }
        if busy {
            let again = Envelope {
                from: self.address,
                to: from,
                signal: DropTabOrd { table_id }.into(),
            };
            ctx.send_delayed(again, crate::DROP_RETRY_DELAY_MS);
            return;
        }
        takeover.pending.remove(&(from, table_id));
        self.takeover_step_done(ctx);
    }

    /// If the step has every answer: the next step.
    fn takeover_step_done(&mut self, ctx: &mut dyn Context) {
        let takeover = self.takeover.as_mut().expect("a take-over runs");
        if !takeover.pending.is_empty() {
            return;
        }
        match takeover.step {
            Step::DroppingAt(BlockKind::Tc) => {
                takeover.step = Step::DroppingAt(BlockKind::Ldm);
                self.takeover_send_drops(ctx);
            }
            Step::DroppingAt(BlockKind::Ldm) => {
                takeover.step = Step::DroppingAt(BlockKind::Dict);
                for &table_id in &takeover.dropping {
                    if self.tables.by_id(table_id).is_some() {
                        self.tables.change_state(
                            table_id,
                            TableState::Online,
                            TableState::Dropping,
                        );
                        self.tables.remove(table_id);
                    }
                }
                self.takeover_send_drops(ctx);
            }
            Step::DroppingAt(_) => {
                takeover.step = Step::Announcing;
                // Above every dict's version, and above what each one's
                // own bump per drop can have made of it.
                let changes = takeover.dropping.len() + takeover.announcing.len();
                let mut version = takeover.highest_schema_version + changes as u32;
                for (table, map, lacking) in std::mem::take(&mut takeover.announcing) {
                    if self.tables.by_id(table.id).is_none() {
                        self.tables
                            .insert_online(Arc::clone(&table), Arc::clone(&map));
                    }
                    for dict in lacking {
                        version += 1;
                        takeover.pending.insert((dict, table.id));
                        let request = DictAddTabReq {
                            schema_version: version,
                            table: Arc::clone(&table),
                            map: Arc::clone(&map),
                        };
                        kernel::send(ctx, self.address, dict, request);
                    }
                }
                takeover.highest_schema_version = version;
                self.takeover_step_done(ctx);
            }
            Step::Announcing => {
                takeover.step = Step::AligningTcs;
                self.takeover_align(ctx);
            }
            Step::AligningTcs => {
                takeover.step = Step::Aligning;
                self.takeover_align(ctx);
            }
            Step::Aligning => {
                takeover.step = Step::Saving;
                let schema_version = takeover.highest_schema_version + 1;
                for &dict in self.dicts.members() {
                    kernel::send(
                        ctx,
                        self.address,
                        dict,
                        DictTakeoverDoneOrd { schema_version },
                    );
                }
                if schema_version > self.schema_version {
                    self.set_schema_version(schema_version, ctx);
                }
                self.save_schema(AfterSave::TakeoverDone, ctx);
            }
            Step::Waiting | Step::Querying | Step::Saving => {}
        }
    }

    /// Brings every live tc, ldm and dict holding a table that stays to the
    /// revision decided for it (`chosen_revision`): a change of indexes
    /// that reached a dict is finished, one that reached none is undone.
    fn takeover_align(&mut self, ctx: &mut dyn Context) {
        let takeover = self.takeover.as_mut().expect("a take-over runs");
        let failed = self.node_failures.failed();
        let schema_version = takeover.highest_schema_version;
        let tcs = takeover.step == Step::AligningTcs;
        let mut changes = 0;
        let tables = match tcs {
            true => takeover.aligning.clone(),
            false => std::mem::take(&mut takeover.aligning),
        };
        for table in tables {
            let holders = takeover.revisions.get(&table.id).into_iter().flatten();
            let holders = holders.filter(|(block, ..)| (block.kind == BlockKind::Tc) == tcs);
            for &(block, version, revision) in holders {
                // An ldm at the decided revision is asked too: it answers
                // once a unique index's hidden table that revision drops
                // is gone (in use, it may still be there), so the id is
                // free before any create can take it again.
                let aligned = revision == table.revision && block.kind != BlockKind::Ldm;
                if version != table.version || aligned || failed.contains(block.node) {
                    continue;
                }
                changes += 1;
                if block == self.address {
                    self.tables.replace_definition(Arc::clone(&table));
                    continue;
                }
                takeover.pending.insert((block, table.id));
                let signal: Signal = match block.kind {
                    BlockKind::Ldm => LqhAlterTabReq {
                        table: Arc::clone(&table),
                    }
                    .into(),
                    // Nothing building: a unique index reaches a dict
                    // only once built, and one no dict holds is undone.
                    BlockKind::Tc => TcAlterTabReq {
                        building: 0,
                        table: Arc::clone(&table),
                    }
                    .into(),
                    _ => DictAlterTabReq {
                        schema_version,
                        table: Arc::clone(&table),
                    }
                    .into(),
                };
                kernel::send(ctx, self.address, block, signal);
            }
        }
        if changes > 0 {
            ctx.report(Report::Log(format!(
                "dict {}: schema take-over: {changes} holder(s) of a table asked for its \
                 decided index revision",
                self.address
            )));
        }
        self.takeover_step_done(ctx);
    }

    /// AlterTabRep or AlterTabRef from a tc, ldm or dict the take-over
    /// aligned.
    pub(crate) fn takeover_aligned(
        &mut self,
        from: BlockRef,
        table_id: u32,
        _revision: u32,
        ctx: &mut dyn Context,
    ) {
        let takeover = self.takeover.as_mut().expect("a take-over runs");
        let aligning = matches!(takeover.step, Step::AligningTcs | Step::Aligning);
        if aligning && takeover.pending.remove(&(from, table_id)) {
            self.takeover_step_done(ctx);
        }
    }

    /// This dict's schema file holds what the take-over decided: take
    /// schema requests again.
    pub(crate) fn takeover_saved(&mut self, ctx: &mut dyn Context) {
        let takeover = self.takeover.take().expect("a take-over was saving");
        assert_eq!(takeover.step, Step::Saving, "the take-over saves last");
        ctx.report(Report::Log(format!(
            "dict {}: schema take-over done at schema version {}",
            self.address, self.schema_version
        )));
        self.start_next(ctx);
    }

    /// Nodes failed during the take-over: their blocks are not waited for.
    pub(crate) fn takeover_without(&mut self, failed: NodeSet, ctx: &mut dyn Context) {
        let Some(takeover) = &mut self.takeover else {
            return;
        };
        takeover
            .pending
            .retain(|(block, _)| !failed.contains(block.node));
        for (_, _, lacking) in &mut takeover.announcing {
            lacking.retain(|dict| !failed.contains(dict.node));
        }
        match takeover.step {
            Step::Waiting | Step::Saving => {}
            Step::Querying => self.takeover_answered(ctx),
            Step::DroppingAt(_) | Step::Announcing | Step::AligningTcs | Step::Aligning => {
                self.takeover_step_done(ctx)
            }
        }
    }
}

/// The definition a table that stays ends at: the index list of the
/// highest revision any live dict holds of its version `version` (a
/// change of indexes that reached a dict had been built on every ldm, or,
/// a drop, may be handed out by nobody any more; one that reached no dict
/// was seen by no client). `table` is the one the decision found (this
/// dict's, or one offered); a higher revision comes from the dict that
/// offered it. When some ldm holds or builds a revision above that one
/// (a create that reached no dict), the table moves on to a revision
/// above every one held, with the dicts' index list: revisions only
/// rise, so an index id an ldm once had is never given to another index.
fn chosen_revision(
    takeover: &Takeover,
    id: u32,
    version: u32,
    table: Arc<TableDef>,
    live: &impl Fn(&BlockRef) -> bool,
) -> Arc<TableDef> {
    let held = || {
        takeover
            .revisions
            .get(&id)
            .into_iter()
            .flatten()
            .filter(move |(block, held, _)| *held == version && live(block))
    };
    let highest = held()
        .filter(|(block, ..)| block.kind == BlockKind::Dict)
        .map(|&(_, _, revision)| revision)
        .max()
        .unwrap_or(table.revision);
    let chosen = if table.revision >= highest {
        table
    } else {
        match takeover.offered_revisions.get(&id) {
            Some(offered) if offered.version == version && offered.revision == highest => {
                Arc::clone(offered)
            }
            // The dict holding it failed before its offer came: the
            // highest revision a live holder offered is all there is.
            _ => table,
        }
    };
    let above_all = held().map(|&(_, _, revision)| revision).max();
    match above_all {
        Some(above) if above > chosen.revision => Arc::new(TableDef {
            revision: above + 1,
            ..TableDef::clone(&chosen)
        }),
        _ => chosen,
    }
}
