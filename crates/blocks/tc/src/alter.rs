//! TC_ALTER_TAB_REQ: a table's index list changed (a new revision, design
//! 0024). The tc keeps the hidden tables of the unique indexes the
//! revision names (docs/design/0026-unique-indexes.md): a dropped unique
//! index's route goes at once, so no write from now on keeps its hidden
//! rows and no read reaches them; operations already sent go on (the
//! ldms drop the hidden table once none is left). Ordered indexes need
//! nothing here: the tc only follows the revision, which a master dict's
//! take-over compares.
//!
//! A unique index created on a live table arrives *building*: from then
//! on every write keeps its hidden rows, a delete of an old value only if
//! the hidden row names the row (`unique.rs`). The tc answers once every
//! transaction that began before the switch has ended, so that each row
//! a write of such a transaction inserted is committed, and each row it
//! changed is locked, before the build reads it (`unique_build.rs`).
//!
//! When a participant dies: the master, so the next master's take-over
//! sends the revision it decided on (this one again, or the one before
//! under a higher number); this tc's node, so its routes die with it and
//! its restart gets the definition the master then holds.

use crate::records::{TransactionState, NIL};
use crate::{TableRoute, Tc, UniqueIndex};
use kernel::{send, Context};
use signal::schema::TableDef;
use signal::signals::{AlterTabRep, PartitionMap, TcAlterTabReq};
use signal::BlockRef;
use std::sync::Arc;

/// Switches to a building unique index waiting for the transactions that
/// began before them.
#[derive(Default)]
pub(crate) struct Switches {
    /// Rises with every switch; each transaction notes it when it begins.
    pub(crate) epoch: u32,
    waiting: Vec<Switch>,
}

struct Switch {
    requester: BlockRef,
    table_id: u32,
    revision: u32,
    /// Transactions that began below it must end first.
    epoch: u32,
}

impl Tc {
    /// TC_ALTER_TAB_REQ from the master dict.
    pub(crate) fn alter_table(
        &mut self,
        from: BlockRef,
        request: TcAlterTabReq,
        ctx: &mut dyn Context,
    ) {
        let new = request.table;
        let (table_id, revision) = (new.id, new.revision);
        // A later revision of the table replaces a switch still waiting
        // (a take-over's, say): only the latest is answered.
        self.switches
            .waiting
            .retain(|switch| switch.table_id != table_id);
        let held = self
            .tables
            .get(table_id as usize)
            .and_then(Option::as_ref)
            .filter(|route| route.hidden_of.is_none() && route.definition.version == new.version);
        let mut starts_building = false;
        if let Some(route) = held {
            let created = Arc::clone(&route.created);
            let (mut unique, hidden) = self.unique_routes(&new, &created);
            let route = self.tables[table_id as usize]
                .as_mut()
                .expect("held a moment ago");
            for index in &mut unique {
                index.building = index.index_id == request.building;
                let was_building = route
                    .unique
                    .iter()
                    .any(|held| held.index_id == index.index_id && held.building);
                starts_building |= index.building && !was_building;
            }
            let dropped: Vec<u32> = route
                .unique
                .iter()
                .filter(|index| !unique.iter().any(|kept| kept.table_id == index.table_id))
                .map(|index| index.table_id)
                .collect();
            route.definition = Arc::clone(&new);
            let kept: Vec<u32> = route.unique.iter().map(|index| index.table_id).collect();
            route.unique = unique;
            for id in dropped {
                self.tables[id as usize] = None;
            }
            // A hidden table already routed keeps its route (and map).
            for hidden in hidden {
                if !kept.contains(&hidden.definition.id) {
                    self.set_route(hidden);
                }
            }
        }
        if starts_building {
            self.switches.epoch += 1;
            self.switches.waiting.push(Switch {
                requester: from,
                table_id,
                revision,
                epoch: self.switches.epoch,
            });
            return self.answer_switches(ctx);
        }
        // A table this tc does not hold (dropped since, or a late request)
        // has nothing to change.
        send(
            ctx,
            self.config.address,
            from,
            AlterTabRep { table_id, revision },
        );
    }

    /// Answers each switch no transaction from before it still runs in
    /// (looked at again at every timeout scan).
    pub(crate) fn answer_switches(&mut self, ctx: &mut dyn Context) {
        if self.switches.waiting.is_empty() {
            return;
        }
        // The lowest epoch a live transaction began under.
        let mut oldest = u32::MAX;
        let mut transaction = self.records.active_head;
        while transaction != NIL {
            let record = &self.records.transactions[transaction as usize];
            if record.state != TransactionState::Free {
                oldest = oldest.min(record.switch_epoch);
            }
            transaction = record.next_active;
        }
        let address = self.config.address;
        self.switches.waiting.retain(|switch| {
            if oldest < switch.epoch {
                return true;
            }
            let answer = AlterTabRep {
                table_id: switch.table_id,
                revision: switch.revision,
            };
            send(ctx, address, switch.requester, answer);
            false
        });
    }

    /// The unique indexes of `table` as this tc keeps them (none
    /// building), and their hidden tables' routes, placed by the base
    /// table's map `created` (docs/design/scans-and-indexes.md §5).
    pub(crate) fn unique_routes(
        &self,
        table: &TableDef,
        created: &PartitionMap,
    ) -> (Vec<UniqueIndex>, Vec<TableRoute>) {
        let mut unique = Vec::new();
        let mut routes = Vec::new();
        for index in table.unique_indexes() {
            let hidden = table
                .unique_index_table(index)
                .expect("a unique index has a hidden table");
            unique.push(UniqueIndex {
                index_id: index.id,
                columns: index.columns.clone(),
                table_id: hidden.id,
                table_version: hidden.version,
                building: false,
            });
            let created = Arc::new(PartitionMap {
                table_id: hidden.id,
                ..created.clone()
            });
            routes.push(TableRoute {
                definition: Arc::new(hidden),
                map: self.node_failures.route(&created),
                created,
                unique: Vec::new(),
                hidden_of: Some(table.id),
            });
        }
        (unique, routes)
    }
}
