//! A dict that is not the master: it learns each table from the master
//! once every tc and ldm of the cluster has it, and forgets it when the
//! master has taken it off them, so that it answers GET_TABINFO for the
//! same online tables as the master, with the same schema version.
//!
//! ```text
//!  master dict                        this dict
//!   |-- DictAddTabReq{table, map, v} ->|  online, schema version v
//!   |<-------------------- AddTabConf -|
//!   |-- DropTabOrd{table} ------------>|  removed, schema version + 1
//!   |<-------- DropTabRep{busy: false} -|
//! ```

use crate::tables::TableState;
use crate::Dict;
use kernel::Context;
use signal::signals::{AddTabConf, DictAddTabReq, DropTabRep};
use signal::BlockRef;

impl Dict {
    /// Checks that `from` is the master and this dict is not.
    fn check_from_master(&self, from: BlockRef, what: &str) {
        assert!(
            from == self.master && !self.is_master(),
            "dict {}: {what} from {from}, but {} is the master",
            self.address,
            self.master
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
        kernel::send(ctx, self.address, from, AddTabConf { table_id });
    }

    /// The master dropped a table from every tc and ldm: forget it.
    pub(crate) fn table_dropped(&mut self, from: BlockRef, table_id: u32, ctx: &mut dyn Context) {
        self.check_from_master(from, "DropTabOrd");
        self.tables
            .change_state(table_id, TableState::Online, TableState::Dropping);
        self.tables.remove(table_id);
        self.bump_schema_version(ctx);
        let report = DropTabRep {
            table_id,
            busy: false,
        };
        kernel::send(ctx, self.address, from, report);
    }
}
