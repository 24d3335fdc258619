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
//!   |-- DictAlterTabReq{table, v} ---->|  its new indexes (`alter.rs`),
//!   |                                  |  schema file written
//!   |<------------------ AlterTabRep --|
//! ```
//!
//! Each confirmation waits until this dict's own schema file holds the
//! change (`persistence.rs`), so the master confirms its client only once
//! every node's file does.

use crate::persistence::AfterSave;
use crate::tables::TableState;
use crate::Dict;
use kernel::Context;
use signal::codec::decode_table_versions;
use signal::signals::{DictAddTabReq, DictAlterTabReq, DictTakeoverReq, DropTabRep};
use signal::BlockRef;
use std::collections::HashMap;
use std::sync::Arc;

impl Dict {
    /// Whether `from` is the master and this dict is not (a take-over's
    /// signals from any other dict are late, and ignored).
    fn is_from_other_master(&self, from: BlockRef) -> bool {
        self.master == Some(from) && !self.is_master()
    }

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

    /// The master dropped a table from every tc and ldm: forget it. A
    /// master taking over drops a table wherever it may be, so one this
    /// dict does not hold is confirmed at once.
    pub(crate) fn table_dropped(&mut self, from: BlockRef, table_id: u32, ctx: &mut dyn Context) {
        self.check_from_master(from, "DropTabOrd");
        if self.tables.by_id(table_id).is_none() {
            let report = DropTabRep {
                table_id,
                busy: false,
            };
            return kernel::send(ctx, self.address, from, report);
        }
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

impl Dict {
    /// A new master dict's take-over query (`takeover.rs`): first every
    /// table this dict holds that the master lacks (with its map, so the
    /// master can roll it forward), then which tables this dict holds.
    /// From a dict that is not the master here (a late signal of a
    /// take-over since taken over again) it is ignored.
    pub(crate) fn takeover_request(
        &mut self,
        from: BlockRef,
        request: DictTakeoverReq,
        ctx: &mut dyn Context,
    ) {
        if !self.is_from_other_master(from) {
            return;
        }
        // The codec checks the list on the wire.
        let Ok(masters) = decode_table_versions(request.tables.as_slice()) else {
            return;
        };
        let masters: HashMap<(u32, u32), u32> = masters
            .into_iter()
            .map(|(id, version, revision)| ((id, version), revision))
            .collect();
        let mine = self.table_versions();
        for &(id, version, revision) in &mine {
            let entry = self.tables.by_id(id).expect("listed just now");
            match masters.get(&(id, version)) {
                Some(&held) if held >= revision => {}
                Some(_) => {
                    // The master holds the table with indexes older than
                    // these: a change that reached this dict is finished.
                    let offer = DictAlterTabReq {
                        schema_version: self.schema_version,
                        table: Arc::clone(&entry.definition),
                    };
                    kernel::send(ctx, self.address, from, offer);
                }
                None => {
                    let offer = DictAddTabReq {
                        schema_version: self.schema_version,
                        table: Arc::clone(&entry.definition),
                        map: entry.map.clone().expect("an online table has its map"),
                    };
                    kernel::send(ctx, self.address, from, offer);
                }
            }
        }
        let (me, schema_version) = (self.address, self.schema_version);
        kernel::schema_takeover::answer(ctx, me, from, request, schema_version, mine.into_iter());
    }

    /// The master's take-over is done: take its schema version (above
    /// any this dict had) into the schema file.
    pub(crate) fn takeover_done(
        &mut self,
        from: BlockRef,
        schema_version: u32,
        ctx: &mut dyn Context,
    ) {
        if !self.is_from_other_master(from) {
            return;
        }
        if schema_version > self.schema_version {
            self.set_schema_version(schema_version, ctx);
            self.save_schema(AfterSave::Nothing, ctx);
        }
    }
}
