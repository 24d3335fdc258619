//! A dict that is not the master: it learns each table from the master
//! once every tc and ldm of the cluster has it, and forgets it when the
//! master has taken it off them, so that it answers GET_TABINFO for the
//! same online tables as the master, with the same schema version.
//!
//! ```text
//!  master dict                        this dict
//!   |-- DictAddTabReq{table, map, v} ->|  online, schema version v,
//!   |                                  |  schema file written
//!   |<-------------------- AddTabConf -|
//!   |-- DropTabOrd{table} ------------>|  removed, schema version + 1,
//!   |                                  |  schema file written
//!   |<-------- DropTabRep{busy: false} -|
//! ```
//!
//! Each confirmation waits until this dict's own schema file holds the
//! change (`persistence.rs`), so the master confirms its client only once
//! every node's file does.

use crate::persistence::AfterSave;
use crate::tables::TableState;
use crate::Dict;
use kernel::Context;
use signal::signals::DictAddTabReq;
use signal::BlockRef;

impl Dict {
    /// Checks that `from` is the master and this dict is not.
    pub(crate) fn check_from_master(&self, from: BlockRef, what: &str) {
        assert!(
            from == self.master() && !self.is_master(),
            "dict {}: {what} from {from}, but {} is the master",
            self.address,
            self.master()
        );
    }

    /// The master created a table: keep it to answer GET_TABINFO.
    pub(crate) fn table_added(
        &mut self,
        from: BlockRef,
        request: DictAddTabReq,
        ctx: &mut dyn Context,
    ) {
        self.check_from_master(from, "DictAddTabReq");
        assert_eq!(
            request.map.table_id, request.table.id,
            "DictAddTabReq from {from} with the map of another table"
        );
        let table_id = request.table.id;
        self.tables.insert_online(request.table, request.map);
        self.set_schema_version(request.schema_version, ctx);
        let confirm = AfterSave::ConfirmAdd {
            master: from,
            table_id,
        };
        self.save_schema(confirm, ctx);
    }

    /// The master dropped a table from every tc and ldm: forget it.
    pub(crate) fn table_dropped(&mut self, from: BlockRef, table_id: u32, ctx: &mut dyn Context) {
        self.check_from_master(from, "DropTabOrd");
        self.tables
            .change_state(table_id, TableState::Online, TableState::Dropping);
        self.tables.remove(table_id);
        self.bump_schema_version(ctx);
        let confirm = AfterSave::ConfirmDrop {
            master: from,
            table_id,
        };
        self.save_schema(confirm, ctx);
    }
}
