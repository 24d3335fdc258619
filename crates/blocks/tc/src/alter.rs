//! TC_ALTER_TAB_REQ: a table's index list changed (a new revision, design
//! 0024). The tc keeps the hidden tables of the unique indexes the
//! revision names (docs/design/0026-unique-indexes.md): a dropped unique
//! index's route goes at once, so no write from now on keeps its hidden
//! rows and no read reaches them; operations already sent go on (the
//! ldms drop the hidden table once none is left). Ordered indexes need
//! nothing here: the tc only follows the revision, which a master dict's
//! take-over compares.
//!
//! When a participant dies: the master, so the next master's take-over
//! sends the revision it decided on (this one again, or the one before
//! under a higher number); this tc's node, so its routes die with it and
//! its restart gets the definition the master then holds.

use crate::{TableRoute, Tc, UniqueIndex};
use kernel::{send, Context};
use signal::schema::TableDef;
use signal::signals::{AlterTabRep, PartitionMap, TcAlterTabReq};
use signal::BlockRef;
use std::sync::Arc;

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
        let held = self
            .tables
            .get(table_id as usize)
            .and_then(Option::as_ref)
            .filter(|route| route.hidden_of.is_none() && route.definition.version == new.version);
        if let Some(route) = held {
            let created = Arc::clone(&route.created);
            let (unique, hidden) = self.unique_routes(&new, &created);
            let route = self.tables[table_id as usize]
                .as_mut()
                .expect("held a moment ago");
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
        // A table this tc does not hold (dropped since, or a late request)
        // has nothing to change.
        send(
            ctx,
            self.config.address,
            from,
            AlterTabRep { table_id, revision },
        );
    }

    /// The unique indexes of `table` as this tc keeps them, and their
    /// hidden tables' routes, placed by the base table's map `created`
    /// (docs/design/scans-and-indexes.md §5).
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
