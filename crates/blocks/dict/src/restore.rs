//! Phase RESTORE_SCHEMA: the dicts agree on one schema, the master's (as
//! NDB does at a system restart), and each puts it back into its registry,
//! with the schema version and every id's last version, and onto this
//! node's tcs and ldms the way a create puts a new table there. This runs
//! before the ldms restore their data (RESTORE_DATA), which needs the
//! partitions, and before any schema request is taken (SCHEMA).
//!
//! ```text
//!  membership        master dict                       this node's tcs and ldms
//!   |-StartPhaseReq{3}->|  registry and schema version from its own file
//!   |                   |== its schema to every other dict ==> (schema_sync.rs)
//!   |                   |-- TcAddTabReq{t} -------------->|  each tc
//!   |                   |-- LqhAddTabReq{t} ------------->|  each ldm
//!   |                   |<-- AddTabConf{t} ---------------|  from each
//!   |                   |   ... the next table ...
//!   |                   |  Report::SchemaVersion
//!   |                   |<== every other dict took it ===
//!   |<-StartPhaseConf{3}-|
//!
//!  membership        another dict
//!   |-StartPhaseReq{3}->|  waits for the master's schema (it may have come
//!   |                   |  already: it is kept until this phase)
//!   |                   |  differs from its own file: registry from the
//!   |                   |  master's, its schema file rewritten with it
//!   |                   |  tables to its tcs and ldms, as above
//!   |                   |== SchemaSyncConf{all} to the master ==>
//!   |<-StartPhaseConf{3}-|
//! ```
//!
//! A whole-cluster crash in the middle of a create or drop can leave the
//! dicts' files disagreeing (the change reached some files, not the
//! master's, which is written last). The master's file is then the one
//! that never confirmed the change to its client, so the change rolls back
//! (or forward) the same way on every node; without the agreement each
//! node's tcs and ldms would get different tables, and the master would
//! hand out a table id again that another node's ldm already has.
//!
//! Tables go to the local blocks one at a time, so the queues to the tcs
//! and ldms hold a bounded number of requests however many tables there
//! are. With no schema anywhere (an initial start, or diskless) the phase
//! still exchanges the master's "no schema" and ends at once.

use crate::persistence::StoredSchema;
use crate::tables::Tables;
use crate::Dict;
use kernel::answers::Answers;
use kernel::{Context, Report};
use signal::phases;
use signal::schema::TableDef;
use signal::signals::{LqhAddTabReq, PartitionMap, StartPhaseConf, TcAddTabReq};
use signal::{BlockKind, BlockRef};
use std::collections::VecDeque;
use std::sync::Arc;

/// Phase RESTORE_SCHEMA, while it runs.
pub(crate) struct Restore {
    /// Gets the phase's conf at the end.
    membership: BlockRef,
    pub(crate) step: RestoreStep,
    /// The tables still to add, in id order; the first is being added.
    tables: VecDeque<(Arc<TableDef>, Arc<PartitionMap>)>,
    /// This node's tcs and ldms, and which have added the first table.
    local: Answers,
    /// Report the schema version at the end (a schema was stored here or
    /// agreed on; an initial start reports nothing).
    report_version: bool,
}

/// Where the phase stands.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum RestoreStep {
    /// Another dict waits for the master's schema (`schema_sync.rs`).
    AwaitingSchema,
    /// Another dict writes the master's schema into its own schema file.
    Saving,
    /// This node's tcs and ldms are given the tables.
    Adding,
    /// The master's tcs and ldms have every table; the other dicts have
    /// not all taken its schema yet.
    AwaitingDicts,
}

impl Dict {
    /// Phase RESTORE_SCHEMA (see the module doc).
    pub(crate) fn restore_schema(&mut self, membership: BlockRef, ctx: &mut dyn Context) {
        assert!(
            self.restoring.is_none() && self.running.is_none(),
            "dict {}: phase RESTORE_SCHEMA runs once, before any schema operation",
            self.address
        );
        assert!(
            self.tables.stored().next().is_none(),
            "dict {}: the schema is restored into an empty registry",
            self.address
        );
        let node = self.address.node;
        let local = self
            .tcs
            .members()
            .iter()
            .chain(self.ldms.members())
            .copied()
            .filter(|block| block.node == node)
            .collect();
        self.restoring = Some(Restore {
            membership,
            step: RestoreStep::AwaitingSchema,
            tables: VecDeque::new(),
            local: Answers::new(local),
            report_version: false,
        });
        if self.is_master() {
            // The master's schema wins: its own, sent to every other dict.
            let stored = self.stored_schema.take();
            let report_version = stored.is_some();
            self.send_schema_to_dicts(ctx);
            self.install_agreed_schema(stored, report_version);
            self.add_restored_tables(ctx);
        } else {
            self.take_master_schema_if_arrived(ctx);
        }
    }

    /// The schema every dict agreed on (`None`: none, as at an initial
    /// start) goes into the registry; its tables wait to be added to this
    /// node's tcs and ldms.
    pub(crate) fn install_agreed_schema(
        &mut self,
        agreed: Option<StoredSchema>,
        report_version: bool,
    ) {
        let restore = self
            .restoring
            .as_mut()
            .expect("the schema is agreed on while restoring");
        restore.report_version = report_version;
        match agreed {
            Some(stored) => {
                self.tables = Tables::restored(stored.id_versions, stored.tables.clone());
                self.schema_version = stored.schema_version;
                restore.tables = stored.tables.into();
            }
            None => {
                self.tables = Tables::default();
                self.schema_version = 1;
                restore.tables.clear();
            }
        }
    }

    /// Gives the agreed tables to this node's tcs and ldms, one at a time.
    pub(crate) fn add_restored_tables(&mut self, ctx: &mut dyn Context) {
        let restore = self
            .restoring
            .as_mut()
            .expect("tables are added back only while restoring");
        restore.step = RestoreStep::Adding;
        self.add_next_restored_table(ctx);
    }

    /// Adds the next table to this node's tcs and ldms, or ends the local
    /// part of the phase when none is left.
    fn add_next_restored_table(&mut self, ctx: &mut dyn Context) {
        let restore = self
            .restoring
            .as_mut()
            .expect("tables are added back only while restoring");
        let Some((table, map)) = restore.tables.front() else {
            if restore.report_version {
                ctx.report(Report::SchemaVersion(self.schema_version));
            }
            return self.local_blocks_restored(ctx);
        };
        restore.local.start_round();
        for &block in restore.local.members() {
            let (table, map) = (Arc::clone(table), Arc::clone(map));
            match block.kind {
                BlockKind::Tc => kernel::send(ctx, self.address, block, TcAddTabReq { table, map }),
                BlockKind::Ldm => {
                    kernel::send(ctx, self.address, block, LqhAddTabReq { table, map })
                }
                other => unreachable!("only tcs and ldms take tables, not a {other:?}"),
            }
        }
    }

    /// A tc or ldm of this node added the table being restored.
    pub(crate) fn restored_table_added(
        &mut self,
        from: BlockRef,
        table_id: u32,
        ctx: &mut dyn Context,
    ) {
        let restore = self
            .restoring
            .as_mut()
            .expect("AddTabConf is routed here only while restoring");
        let adding = restore.tables.front().map(|(table, _)| table.id);
        assert!(
            restore.step == RestoreStep::Adding && adding == Some(table_id),
            "dict {}: AddTabConf from {from} for table {table_id} while restoring table \
             {adding:?} at {:?}",
            self.address,
            restore.step
        );
        if restore.local.record(from, "AddTabConf") {
            restore.tables.pop_front();
            self.add_next_restored_table(ctx);
        }
    }

    /// This node's tcs and ldms have every agreed table. Another dict tells
    /// the master it took its schema and ends the phase; the master ends it
    /// once every other dict has.
    fn local_blocks_restored(&mut self, ctx: &mut dyn Context) {
        if self.is_master() {
            let restore = self.restoring.as_mut().expect("restoring");
            restore.step = RestoreStep::AwaitingDicts;
            self.end_restore_if_agreed(ctx);
        } else {
            self.confirm_master_schema(ctx);
            self.end_restore(ctx);
        }
    }

    /// Confirms phase RESTORE_SCHEMA.
    pub(crate) fn end_restore(&mut self, ctx: &mut dyn Context) {
        let restore = self
            .restoring
            .take()
            .expect("the restore ends while it runs");
        let conf = StartPhaseConf {
            phase: phases::RESTORE_SCHEMA,
        };
        kernel::send(ctx, self.address, restore.membership, conf);
    }
}
