//! LQH_ALTER_TAB_REQ: a table's ordered indexes change while it is read
//! and written (docs/design/0024-online-index-changes.md).
//!
//! ```text
//!  master dict                         this ldm
//!   |-- LqhAlterTabReq{table r+1} ----->|  drop the indexes r+1 lacks; begin
//!   |                                   |  building those it adds, in every
//!   |                                   |  partition here (every commit keeps
//!   |                                   |  them from now on, tolerantly)
//!   |                                   |  ContinueB(BUILD): BUILD_ROWS rows
//!   |                                   |  of one partition a step, so key
//!   |                                   |  operations interleave
//!   |                                   |  walks done, and no operation
//!   |                                   |  prepared before the build began
//!   |                                   |  still runs: the indexes are built
//!   |<-- AlterTabRep{r+1} --------------|  (or AlterTabRef{TableFull}: dropped
//!   |                                   |   again, revision r back)
//! ```
//!
//! A unique index dropped alone takes its hidden table with it (design
//! 0026): the revision is answered once no operation uses that table
//! (the tcs stopped sending new ones before the ldms hear of the drop).
//!
//! Why an index is only finished once the operations prepared before its
//! build began are gone: those promised no node for it at prepare, so
//! their commits insert into it with whatever DataMemory has and may find
//! none (the build then fails, cleanly); an index that is finished takes
//! every commit's entries from promises, which must cover it.
//!
//! When a participant dies: the master, so this ldm keeps building (its
//! answer is lost) and the next master's take-over sends the revision it
//! decided on, which either matches (answered once built) or rolls the
//! change back (the building index is dropped at once); this ldm's node,
//! so its indexes die with its rows, and its restart builds every index
//! the definition then names from the rows it restores or copies.

use crate::Ldm;
use kernel::{send, Context, Report};
use signal::schema::TableDef;
use signal::signals::{
    AlterTabRef, AlterTabRep, ContinueB, LqhAlterTabReq, PartitionMap, PartitionPlacement,
};
use signal::{BlockRef, Envelope, ErrorCode};
use std::sync::Arc;

/// `ContinueB` jobs of index builds (beside the LCP's and the copy's).
pub(crate) mod job {
    /// The next step of the builds under way.
    pub const BUILD: u32 = 20;
}

/// Rows a build step adds to an index before the ldm thread moves on to
/// other signals.
pub const BUILD_ROWS: u32 = 256;

/// How long a build whose walks are done waits before it looks again
/// whether the operations prepared before it began are gone.
const OLD_OPERATIONS_POLL_MS: u64 = 5;

/// A change of one table's indexes under way here.
pub(crate) struct TableAlter {
    table_id: u32,
    /// The revision being built, and the definition before it (put back
    /// if the build fails).
    revision: u32,
    previous: Arc<TableDef>,
    /// The master dict to answer.
    requester: BlockRef,
    /// The indexes being built (ids).
    building: Vec<u32>,
}

/// The ldm's builds.
#[derive(Default)]
pub(crate) struct Builds {
    alters: Vec<TableAlter>,
    /// A BUILD job is queued or delayed: do not queue another.
    scheduled: bool,
}

impl Ldm {
    /// LQH_ALTER_TAB_REQ from the master dict.
    pub(crate) fn alter_table(
        &mut self,
        from: BlockRef,
        request: LqhAlterTabReq,
        ctx: &mut dyn Context,
    ) {
        let new = request.table;
        let (table_id, revision) = (new.id, new.revision);
        let refuse = |ctx: &mut dyn Context, error| {
            let me = self.address;
            send(
                ctx,
                me,
                from,
                AlterTabRef {
                    table_id,
                    revision,
                    error,
                },
            );
        };
        let Some(table) = self
            .tables
            .get_mut(table_id as usize)
            .and_then(Option::as_mut)
        else {
            return refuse(ctx, ErrorCode::UnknownTable);
        };
        if table.definition.version != new.version {
            return refuse(ctx, ErrorCode::SchemaVersionMismatch);
        }
        let under_way = self
            .builds
            .alters
            .iter()
            .position(|alter| alter.table_id == table_id);
        if let Some(at) = under_way {
            if self.builds.alters[at].revision == revision {
                // The same change again (a new master's take-over): one
                // answer, to whoever asked last, once it is built.
                self.builds.alters[at].requester = from;
                return;
            }
            // Another revision replaces the one being built (a take-over
            // rolling it back): its building indexes go below, as any
            // index `new` lacks.
            self.builds.alters.remove(at);
        }
        let previous = Arc::clone(&table.definition);
        let named = |id: u32| new.indexes.iter().any(|index| index.id == id);
        let mut building = Vec::new();
        for partition in table.partitions.iter_mut().flatten() {
            // (id, still being built) of each index the partition has.
            let held: Vec<(u32, bool)> = partition
                .store
                .secondary_indexes()
                .iter()
                .map(|index| (index.id, index.building.is_some()))
                .collect();
            for &(id, _) in held.iter().filter(|&&(id, _)| !named(id)) {
                partition.store.drop_secondary_index(&mut self.memory, id);
            }
            for index in &new.indexes {
                match held.iter().find(|&&(id, _)| id == index.id) {
                    // Built already.
                    Some((_, false)) => continue,
                    // Being built by a change this one replaces: its build
                    // goes on as this one's.
                    Some((_, true)) => {}
                    None => partition.store.begin_index_build(
                        &self.memory,
                        &table.layout,
                        index.id,
                        &index.columns,
                    ),
                }
                if !building.contains(&index.id) {
                    building.push(index.id);
                }
            }
        }
        table.definition = Arc::clone(&new);
        if !building.is_empty() {
            // Every operation in flight now was prepared without promising
            // the new indexes a node.
            table.operations_before_build = table.active_operations;
            table.build_epoch += 1;
            ctx.report(Report::Log(format!(
                "ldm {}: building index(es) {building:?} of table {table_id} (revision {revision})",
                self.address
            )));
        }
        let alter = TableAlter {
            table_id,
            revision,
            previous,
            requester: from,
            building,
        };
        self.add_named_hidden_tables(table_id, ctx);
        if alter.building.is_empty()
            && self.drop_unnamed_hidden_tables(table_id)
            && !self.hidden_tables_creating(table_id)
        {
            let me = self.address;
            return send(ctx, me, from, AlterTabRep { table_id, revision });
        }
        self.builds.alters.push(alter);
        self.schedule_build(0, ctx);
    }

    /// Registers the hidden table of each unique index `table_id`'s
    /// definition names that this ldm does not hold yet (one created on
    /// the live table, design 0026): empty, placed as the base table's
    /// partitions here, each with its empty first LCP written before the
    /// change is answered (`hidden_tables_creating`), so that a restart
    /// never reads an older table's files under its id.
    fn add_named_hidden_tables(&mut self, table_id: u32, ctx: &mut dyn Context) {
        let base = self.tables[table_id as usize]
            .as_ref()
            .expect("a table being altered is held");
        let definition = Arc::clone(&base.definition);
        let instance = self.address.instance;
        // The base table's placement of the partitions held here (the
        // others name no replica, so none is taken).
        let partitions = base
            .partitions
            .iter()
            .map(|partition| PartitionPlacement {
                node_group: 0,
                replicas: partition
                    .as_ref()
                    .map_or(Vec::new(), |partition| partition.replicas.clone()),
                ldm_instance: instance,
                redo_part: partition
                    .as_ref()
                    .map_or(0, |partition| partition.redo_part),
            })
            .collect();
        let map = PartitionMap {
            table_id,
            version: 0,
            bucket_partitions: Vec::new(),
            partitions,
        };
        for index in definition.unique_indexes() {
            let unique = index.unique.expect("a unique index");
            let held = self
                .tables
                .get(unique.table_id as usize)
                .is_some_and(Option::is_some);
            if held {
                continue;
            }
            let hidden = definition
                .unique_index_table(index)
                .expect("a unique index has a hidden table");
            self.register_table(Arc::new(hidden), &map, Some(table_id));
            self.lcp_create_tables(unique.table_id, vec![unique.table_id], None, ctx);
        }
    }

    /// Whether the first LCP of a hidden table of `table_id` is still
    /// being written.
    fn hidden_tables_creating(&self, table_id: u32) -> bool {
        let tables = self.tables.iter().enumerate();
        tables
            .filter(|(_, table)| {
                table
                    .as_ref()
                    .is_some_and(|table| table.hidden_of == Some(table_id))
            })
            .any(|(id, _)| self.lcp.creating(id as u32))
    }

    /// Drops the hidden tables of `table_id`'s unique indexes that its
    /// definition no longer names (design 0026), each once no operation
    /// uses it: the tcs stopped sending new ones before this revision came,
    /// and those in flight finish first. Returns whether none is left.
    fn drop_unnamed_hidden_tables(&mut self, table_id: u32) -> bool {
        let definition = Arc::clone(
            &self.tables[table_id as usize]
                .as_ref()
                .expect("a table being altered is held")
                .definition,
        );
        let named = |hidden: u32| {
            definition
                .unique_indexes()
                .any(|index| index.unique.is_some_and(|unique| unique.table_id == hidden))
        };
        let mut left = false;
        for id in 0..self.tables.len() {
            let Some(hidden) = self.tables[id].as_ref() else {
                continue;
            };
            if hidden.hidden_of != Some(table_id) || named(id as u32) {
                continue;
            }
            if hidden.active_operations > 0 || self.lcp.creating(id as u32) {
                left = true;
                continue;
            }
            let mut hidden = self.tables[id].take().expect("held just now");
            for partition in hidden.partitions.iter_mut().flatten() {
                partition.store.release(&mut self.memory);
            }
        }
        !left
    }

    fn schedule_build(&mut self, delay_ms: u64, ctx: &mut dyn Context) {
        if self.builds.scheduled {
            return;
        }
        self.builds.scheduled = true;
        let job = Envelope {
            from: self.address,
            to: self.address,
            signal: ContinueB { job: job::BUILD }.into(),
        };
        if delay_ms == 0 {
            ctx.send(job);
        } else {
            ctx.send_delayed(job, delay_ms);
        }
    }

    /// ContinueB(BUILD): one step of the first build that has rows left
    /// to walk; a build whose walks are done finishes once no operation
    /// prepared before it runs.
    pub(crate) fn build_step(&mut self, ctx: &mut dyn Context) {
        self.builds.scheduled = false;
        let mut at = 0;
        let mut waiting = false;
        while at < self.builds.alters.len() {
            match self.build_one_step(at) {
                Step::Walked => return self.schedule_build(0, ctx),
                Step::Failed => self.build_failed(at, ctx),
                Step::WalksDone => {
                    let alter = &self.builds.alters[at];
                    let table_id = alter.table_id;
                    let table = self.tables[table_id as usize]
                        .as_ref()
                        .expect("a table being altered is held (a drop ends its build)");
                    if table.operations_before_build > 0
                        || !self.drop_unnamed_hidden_tables(table_id)
                        || self.hidden_tables_creating(table_id)
                    {
                        waiting = true;
                        at += 1;
                    } else {
                        self.build_done(at, ctx);
                    }
                }
            }
        }
        if waiting {
            self.schedule_build(OLD_OPERATIONS_POLL_MS, ctx);
        }
    }

    /// Walks up to BUILD_ROWS rows of the first partition of build `at`
    /// that has rows left.
    fn build_one_step(&mut self, at: usize) -> Step {
        let alter = &self.builds.alters[at];
        let table = self.tables[alter.table_id as usize]
            .as_mut()
            .expect("a table being altered is held (a drop ends its build)");
        for partition in table.partitions.iter_mut().flatten() {
            for &id in &alter.building {
                let build = partition
                    .store
                    .secondary_indexes()
                    .iter()
                    .find(|index| index.id == id)
                    .and_then(|index| index.building)
                    .expect("an index being built is in every partition of its table here");
                if build.failed {
                    return Step::Failed;
                }
                if build.next_row.is_none() {
                    continue;
                }
                let step = partition.store.build_index_step(
                    &mut self.memory,
                    &table.layout,
                    id,
                    BUILD_ROWS,
                );
                return match step {
                    Ok(_) => Step::Walked,
                    Err(_) => Step::Failed,
                };
            }
        }
        Step::WalksDone
    }

    /// Build `at` holds every row in every partition, and every commit
    /// from now on promised its nodes: finish it and answer.
    fn build_done(&mut self, at: usize, ctx: &mut dyn Context) {
        let (alter, table) = take_alter(&mut self.builds, &mut self.tables, at);
        for partition in table.partitions.iter_mut().flatten() {
            for &id in &alter.building {
                partition.store.finish_index_build(id);
            }
        }
        if !alter.building.is_empty() {
            ctx.report(Report::Log(format!(
                "ldm {}: index(es) {:?} of table {} built (revision {})",
                self.address, alter.building, alter.table_id, alter.revision
            )));
        }
        let answer = AlterTabRep {
            table_id: alter.table_id,
            revision: alter.revision,
        };
        send(ctx, self.address, alter.requester, answer);
    }

    /// DataMemory had no node for an entry of build `at`: drop its
    /// indexes, put the previous definition back, and say so.
    fn build_failed(&mut self, at: usize, ctx: &mut dyn Context) {
        let (alter, table) = take_alter(&mut self.builds, &mut self.tables, at);
        for partition in table.partitions.iter_mut().flatten() {
            for &id in &alter.building {
                partition.store.drop_secondary_index(&mut self.memory, id);
            }
        }
        // The definition before the change, naming only the indexes still
        // here (one it replaced may have been building those now gone).
        let mut previous = TableDef::clone(&alter.previous);
        previous
            .indexes
            .retain(|index| !alter.building.contains(&index.id));
        table.definition = Arc::new(previous);
        ctx.report(Report::Log(format!(
            "ldm {}: index(es) {:?} of table {} could not be built: DataMemory is full",
            self.address, alter.building, alter.table_id
        )));
        let refusal = AlterTabRef {
            table_id: alter.table_id,
            revision: alter.revision,
            error: ErrorCode::TableFull,
        };
        send(ctx, self.address, alter.requester, refusal);
    }

    /// Table `table_id` is being dropped: its build, if any, ends
    /// unanswered (the drop supersedes the change).
    pub(crate) fn forget_build(&mut self, table_id: u32) {
        self.builds
            .alters
            .retain(|alter| alter.table_id != table_id);
    }
}

/// Build `at`, ended, and its table (from the ldm's fields, so that its
/// DataMemory stays free to borrow).
fn take_alter<'t>(
    builds: &mut Builds,
    tables: &'t mut [Option<crate::TableState>],
    at: usize,
) -> (TableAlter, &'t mut crate::TableState) {
    let alter = builds.alters.remove(at);
    let table = tables[alter.table_id as usize]
        .as_mut()
        .expect("a table being altered is held (a drop ends its build)");
    (alter, table)
}

/// What one step of a build did.
enum Step {
    /// Added rows to an index; more may be left.
    Walked,
    /// Every walk has seen every row.
    WalksDone,
    /// DataMemory had no node for an entry.
    Failed,
}
