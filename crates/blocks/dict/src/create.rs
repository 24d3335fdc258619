//! CREATE TABLE (NDB's CREATE_TAB): put a new table on every block of every
//! data node. Runs on the master dict only.
//!
//! ```text
//!  API       master dict        dih    every tc   every ldm   other dicts
//!   |-CreateTabReq->|            |    (of every node)            |
//!   |               |-DiAddTabReq->|         |          |          |
//!   |               |<-DiAddTabConf|         |          |          |
//!   |               |-- TcAddTabReq -------->|          |          |
//!   |               |-- LqhAddTabReq ------------------->|          |
//!   |               |<-- AddTabConf ---------|          |          |
//!   |               |<-- AddTabConf ---------------------|          |
//!   |               |   (every tc and ldm has it)                   |
//!   |               |-- DictAddTabReq{schema version + 1} ---------->|  online there,
//!   |               |                                                |  schema file written
//!   |               |<-- AddTabConf ---------------------------------|
//!   |               |  online here (schema version + 1),
//!   |               |  schema file written
//!   |<-CreateTabConf-|
//! ```
//!
//! The table is invisible (GET_TABINFO does not find it) on any dict until
//! every tc and ldm of the cluster has it, so no client can route an
//! operation to a block that would not know the table: the other dicts
//! learn it only in a second round, and the client's conf waits for them,
//! so the client that created a table finds it at every node. (Sending
//! DictAddTabReq with the first round would save a round trip but let a
//! client read the table's definition at one node and send an operation
//! to a tc or ldm that has not added it yet.)
//!
//! Every dict writes its schema file (`persistence.rs`) before it confirms,
//! the master last: a table confirmed to the client survives a restart of
//! the whole cluster, and the master's file, written last, never holds a
//! table that another dict's file lacks.

use crate::persistence::AfterSave;
use crate::requests::{CreateStep, Operation};
use crate::tables::TableState;
use crate::Dict;
use kernel::faults::FaultPoint;
use kernel::Context;
use signal::schema::{TableDef, UniqueTable};
use signal::signals::{DiAddTabConf, DiAddTabReq, DictAddTabReq, LqhAddTabReq, TcAddTabReq};
use signal::{BlockKind, BlockRef, ErrorCode};
use std::sync::Arc;

impl Dict {
    /// Starts creating `table` (decoded and checked on arrival).
    pub(crate) fn start_create(
        &mut self,
        requester: BlockRef,
        request_id: u32,
        table: TableDef,
        ctx: &mut dyn Context,
    ) {
        if self.tables.by_name(&table.name).is_some() {
            return self.refuse(requester, request_id, ErrorCode::TableExists, ctx);
        }
        // The table's id, then one for each unique index's hidden table.
        let hidden = table.unique_indexes().count();
        let ids = self.tables.lowest_free_ids(1 + hidden);
        if ids
            .iter()
            .any(|&id| id as usize >= signal::codec::MAX_TABLE_VERSIONS)
        {
            // A take-over lists every table in one section.
            return self.refuse(requester, request_id, ErrorCode::TooManyTables, ctx);
        }
        let id = ids[0];
        let mut table = table;
        for (index, &hidden_id) in table
            .indexes
            .iter_mut()
            .filter(|index| index.unique.is_some())
            .zip(&ids[1..])
        {
            index.unique = Some(UniqueTable {
                table_id: hidden_id,
                table_version: self.tables.next_version(hidden_id),
            });
        }
        let table = Arc::new(TableDef {
            id,
            version: self.tables.next_version(id),
            partitions: if table.partitions > 0 {
                table.partitions
            } else {
                self.default_partitions
            },
            // Index ids come from the revision from now on (`alter.rs`).
            revision: table
                .indexes
                .iter()
                .map(|index| index.id)
                .max()
                .unwrap_or(0),
            ..table
        });
        self.tables.insert_creating(Arc::clone(&table));
        self.running = Some(Operation::Create {
            requester,
            request_id,
            table: Arc::clone(&table),
            step: CreateStep::Distributing,
        });
        kernel::send(ctx, self.address, self.dih, DiAddTabReq { table });
    }

    /// dih placed the partitions: add the table to every tc and ldm of
    /// every node.
    pub(crate) fn distribution_conf(
        &mut self,
        from: BlockRef,
        conf: DiAddTabConf,
        ctx: &mut dyn Context,
    ) {
        let Some(Operation::Create { table, step, .. }) = &mut self.running else {
            panic!(
                "dict {}: DiAddTabConf from {from} while no create runs",
                self.address
            );
        };
        assert_eq!(
            from, self.dih,
            "DiAddTabConf from {from}: only dih places tables"
        );
        assert_eq!(
            *step,
            CreateStep::Distributing,
            "DiAddTabConf twice for one create"
        );
        assert_eq!(
            conf.map.table_id, table.id,
            "dih mapped another table than the one being created"
        );
        *step = CreateStep::Adding;
        let table = Arc::clone(table);
        self.tables.set_map(table.id, Arc::clone(&conf.map));
        self.tcs.start_round();
        self.ldms.start_round();
        for &tc in self.tcs.members() {
            let request = TcAddTabReq {
                table: Arc::clone(&table),
                map: Arc::clone(&conf.map),
            };
            kernel::send(ctx, self.address, tc, request);
        }
        for &ldm in self.ldms.members() {
            let request = LqhAddTabReq {
                table: Arc::clone(&table),
                map: Arc::clone(&conf.map),
            };
            kernel::send(ctx, self.address, ldm, request);
        }
        ctx.fault_point(FaultPoint::CreateAfterAddRequests);
    }

    /// A tc, ldm or (in the second round) dict added the table; the last
    /// tc or ldm starts the second round, the last dict makes it online.
    pub(crate) fn add_table_conf(&mut self, from: BlockRef, table_id: u32, ctx: &mut dyn Context) {
        let Some(Operation::Create { table, step, .. }) = &mut self.running else {
            panic!(
                "dict {}: AddTabConf from {from} while no create runs",
                self.address
            );
        };
        assert_eq!(
            table_id, table.id,
            "AddTabConf from {from} for another table than the one being created"
        );
        match (*step, from.kind) {
            (CreateStep::Adding, BlockKind::Tc) => self.tcs.record(from, "AddTabConf"),
            (CreateStep::Adding, BlockKind::Ldm) => self.ldms.record(from, "AddTabConf"),
            (CreateStep::Announcing, BlockKind::Dict) => self.dicts.record(from, "AddTabConf"),
            (step, _) => panic!(
                "dict {}: AddTabConf from {from} while the create is at {step:?}",
                self.address
            ),
        };
        self.create_answered(ctx);
    }

    /// An answer came, or the blocks it waited for failed: the last tc or
    /// ldm starts the second round, the last dict makes the table online.
    pub(crate) fn create_answered(&mut self, ctx: &mut dyn Context) {
        let Some(Operation::Create { table, step, .. }) = &mut self.running else {
            unreachable!("create_answered runs within a create");
        };
        let table = Arc::clone(table);
        if *step == CreateStep::Adding {
            if !(self.tcs.is_complete() && self.ldms.is_complete()) {
                return;
            }
            if !self.dicts.members().is_empty() {
                *step = CreateStep::Announcing;
                return self.announce(table, ctx);
            }
        } else if !self.dicts.is_complete() {
            return;
        }
        self.create_done(ctx);
    }

    /// Every tc and ldm has the table: tell the other dicts.
    fn announce(&mut self, table: Arc<TableDef>, ctx: &mut dyn Context) {
        let map = self
            .tables
            .by_id(table.id)
            .and_then(|entry| entry.map.clone())
            .expect("a table being added has its distribution");
        let schema_version = self.next_schema_version();
        self.dicts.start_round();
        // Highest node first: a master that dies after the first has told
        // a dict other than its successor's (the harder take-over).
        for &dict in self.dicts.members().iter().rev() {
            let request = DictAddTabReq {
                table: Arc::clone(&table),
                map: Arc::clone(&map),
                schema_version,
            };
            kernel::send(ctx, self.address, dict, request);
            ctx.fault_point(FaultPoint::CreateAfterFirstAnnounce);
        }
    }

    /// The table is on every block of the cluster (and in every other
    /// dict's schema file): online here, then into this dict's schema file.
    /// The client is told once that file is durable
    /// (`Dict::operation_saved`), so a table confirmed to a client is in
    /// every node's schema file.
    fn create_done(&mut self, ctx: &mut dyn Context) {
        let Some(Operation::Create { table, step, .. }) = &mut self.running else {
            unreachable!("create_done runs within a create");
        };
        *step = CreateStep::Saving;
        let table_id = table.id;
        self.tables
            .change_state(table_id, TableState::Creating, TableState::Online);
        self.bump_schema_version(ctx);
        self.save_schema(AfterSave::AnswerClient, ctx);
    }
}
