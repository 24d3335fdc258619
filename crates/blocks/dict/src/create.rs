//! CREATE TABLE (NDB's CREATE_TAB): put a new table on every block.
//!
//! ```text
//!  API          dict                  dih        each tc    each ldm
//!   |-CreateTabReq->|                    |           |          |
//!   |               |-- DiAddTabReq ---->|           |          |
//!   |               |<-- DiAddTabConf ---|           |          |
//!   |               |-- TcAddTabReq ---------------->|          |
//!   |               |-- LqhAddTabReq ---------------------------->|
//!   |               |<-- AddTabConf -----------------|          |
//!   |               |<-- AddTabConf ------------------------------|
//!   |<-CreateTabConf-|  (schema version + 1)
//! ```
//!
//! The table is invisible (GET_TABINFO does not find it) until every tc and
//! ldm has it, so no client can route an operation to a block that would
//! not know the table.

use crate::requests::{CreateStep, Operation};
use crate::tables::TableState;
use crate::Dict;
use kernel::Context;
use signal::schema::TableDef;
use signal::signals::{CreateTabConf, DiAddTabConf, DiAddTabReq, LqhAddTabReq, TcAddTabReq};
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
        let id = self.tables.lowest_free_id();
        let table = Arc::new(TableDef {
            id,
            version: self.tables.next_version(id),
            partitions: if table.partitions > 0 {
                table.partitions
            } else {
                self.default_partitions
            },
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

    /// dih placed the partitions: add the table to every tc and ldm.
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
    }

    /// A tc or ldm added the table; the last one makes it online.
    pub(crate) fn add_table_conf(&mut self, from: BlockRef, table_id: u32, ctx: &mut dyn Context) {
        let Some(Operation::Create {
            requester,
            request_id,
            table,
            step,
        }) = &self.running
        else {
            panic!(
                "dict {}: AddTabConf from {from} while no create runs",
                self.address
            );
        };
        assert_eq!(
            *step,
            CreateStep::Adding,
            "AddTabConf from {from} before the table was sent"
        );
        assert_eq!(
            table_id, table.id,
            "AddTabConf from {from} for another table than the one being created"
        );
        let (requester, request_id, table) = (*requester, *request_id, Arc::clone(table));
        match from.kind {
            BlockKind::Tc => self.tcs.record(from, "AddTabConf"),
            BlockKind::Ldm => self.ldms.record(from, "AddTabConf"),
            _ => panic!(
                "dict {}: AddTabConf from {from}, which is neither tc nor ldm",
                self.address
            ),
        };
        if !(self.tcs.is_complete() && self.ldms.is_complete()) {
            return;
        }
        self.tables
            .change_state(table.id, TableState::Creating, TableState::Online);
        self.bump_schema_version(ctx);
        let conf = CreateTabConf {
            request_id,
            table_id: table.id,
            table_version: table.version,
        };
        kernel::send(ctx, self.address, requester, conf);
        self.finish_operation(ctx);
    }
}
