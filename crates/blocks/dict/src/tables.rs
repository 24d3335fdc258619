//! The table registry: every table dict knows, by id and by name, with the
//! state of its schema operation and the version counter of each id.
//!
//! Ids are reused after a drop (the lowest free id is taken, as NDB does) so
//! ids stay small and dense for the tcs' and ldms' table arrays; the version
//! counter of an id survives the drop, so a recreated table gets version+1
//! and a client holding the old definition is told it is stale.

use signal::schema::{TableDef, UniqueTable};
use signal::signals::PartitionMap;
use std::collections::HashMap;
use std::sync::Arc;

/// Where a table stands.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum TableState {
    /// Being created: not yet on every block, invisible to clients.
    Creating,
    /// On every block; clients see it.
    Online,
    /// Being dropped: invisible to clients, still on some blocks.
    Dropping,
}

/// One table.
pub(crate) struct TableEntry {
    pub(crate) definition: Arc<TableDef>,
    pub(crate) state: TableState,
    /// The distribution, once dih has placed the table.
    pub(crate) map: Option<Arc<PartitionMap>>,
}

/// Tables by id and name, and the last version of each id.
#[derive(Default)]
pub(crate) struct Tables {
    /// Index = table id.
    entries: Vec<Option<TableEntry>>,
    names: HashMap<String, u32>,
    /// Index = table id: the version the id last had (0: never used).
    versions: Vec<u32>,
    /// The ids unique indexes' hidden tables hold: hidden id -> base id
    /// (docs/design/scans-and-indexes.md §5). A hidden table has no entry
    /// of its own; it comes and goes with its base table's.
    hidden: HashMap<u32, u32>,
}

impl Tables {
    /// The table named `name`, in any state.
    pub(crate) fn by_name(&self, name: &str) -> Option<&TableEntry> {
        let &id = self.names.get(name)?;
        let entry = self.entries[id as usize].as_ref();
        assert!(
            entry.is_some(),
            "name {name:?} maps to table id {id}, which is free"
        );
        entry
    }

    /// The names of the online tables (those clients see), sorted by byte
    /// value.
    pub(crate) fn online_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .entries
            .iter()
            .flatten()
            .filter(|entry| entry.state == TableState::Online)
            .map(|entry| entry.definition.name.as_str())
            .collect();
        names.sort_unstable();
        names
    }

    /// The table with id `table_id`.
    pub(crate) fn by_id(&self, table_id: u32) -> Option<&TableEntry> {
        self.entries.get(table_id as usize)?.as_ref()
    }

    /// The lowest `count` ids no table (hidden ones too) holds.
    pub(crate) fn lowest_free_ids(&self, count: usize) -> Vec<u32> {
        let taken = |id: u32| {
            self.entries.get(id as usize).is_some_and(Option::is_some)
                || self.hidden.contains_key(&id)
        };
        (0..=u32::MAX)
            .filter(|&id| !taken(id))
            .take(count)
            .collect()
    }

    /// Takes the ids and versions of `definition`'s unique indexes' hidden
    /// tables.
    fn register_hidden(&mut self, definition: &TableDef) {
        for index in definition.unique_indexes() {
            let unique = index.unique.expect("a unique index");
            self.register_hidden_table(definition.id, unique);
        }
    }

    fn register_hidden_table(&mut self, base: u32, unique: UniqueTable) {
        let id = unique.table_id as usize;
        assert!(
            unique.is_assigned()
                && self.entries.get(id).is_none_or(Option::is_none)
                && !self.hidden.contains_key(&unique.table_id),
            "hidden table id {id} of table {base} is taken"
        );
        if self.entries.len() <= id {
            self.entries.resize_with(id + 1, || None);
            self.versions.resize(id + 1, 0);
        }
        assert!(
            unique.table_version >= self.versions[id],
            "hidden table id {id} gets version {}, below its last one",
            unique.table_version
        );
        self.versions[id] = unique.table_version;
        self.hidden.insert(unique.table_id, base);
    }

    /// The version a table created with id `table_id` gets.
    pub(crate) fn next_version(&self, table_id: u32) -> u32 {
        let last = self.versions.get(table_id as usize).copied().unwrap_or(0);
        last.checked_add(1)
            .expect("table id version exhausted (2^32 recreations)")
    }

    /// Registers a table being created.
    pub(crate) fn insert_creating(&mut self, definition: Arc<TableDef>) {
        assert_eq!(
            definition.version,
            self.next_version(definition.id),
            "table id {} must get the version after its last one",
            definition.id
        );
        self.insert(definition);
    }

    /// Registers `definition` in state Creating; its version is above any
    /// its id had here.
    fn insert(&mut self, definition: Arc<TableDef>) {
        let id = definition.id as usize;
        assert!(
            self.by_id(definition.id).is_none() && !self.hidden.contains_key(&definition.id),
            "table id {id} is taken"
        );
        assert!(
            definition.version >= self.next_version(definition.id),
            "table id {id} gets version {}, not above its last one",
            definition.version
        );
        if self.entries.len() <= id {
            self.entries.resize_with(id + 1, || None);
            self.versions.resize(id + 1, 0);
        }
        let previous = self.names.insert(definition.name.clone(), definition.id);
        assert!(
            previous.is_none(),
            "table name {:?} is taken",
            definition.name
        );
        self.versions[id] = definition.version;
        self.register_hidden(&definition);
        self.entries[id] = Some(TableEntry {
            definition,
            state: TableState::Creating,
            map: None,
        });
    }

    /// Registers a table the master dict created, online at once. Its
    /// version is above any its id had here; it may skip some (a master
    /// dict's take-over drops a table created at some blocks and no dict,
    /// and its successor's version of the id counts past it).
    pub(crate) fn insert_online(&mut self, definition: Arc<TableDef>, map: Arc<PartitionMap>) {
        let id = definition.id;
        self.insert(definition);
        self.set_map(id, map);
        self.change_state(id, TableState::Creating, TableState::Online);
    }

    /// Replaces online table `table_id`'s definition with `definition`:
    /// the same table (id, version, name, columns) with other indexes.
    pub(crate) fn replace_definition(&mut self, definition: Arc<TableDef>) {
        let entry = self.entries[definition.id as usize]
            .as_mut()
            .unwrap_or_else(|| panic!("table {} altered but does not exist", definition.id));
        assert!(
            entry.definition.version == definition.version
                && entry.definition.name == definition.name
                && entry.definition.columns == definition.columns,
            "table {}: an index change replaced the table itself",
            definition.id
        );
        let previous = std::mem::replace(&mut entry.definition, Arc::clone(&definition));
        // The hidden tables of unique indexes dropped free their ids; those
        // of unique indexes created take theirs.
        let hidden = |table: &TableDef| -> Vec<UniqueTable> {
            table
                .unique_indexes()
                .filter_map(|index| index.unique)
                .collect()
        };
        let (before, after) = (hidden(&previous), hidden(&definition));
        for unique in before.iter().filter(|unique| !after.contains(unique)) {
            let base = self.hidden.remove(&unique.table_id);
            assert_eq!(base, Some(definition.id), "hidden table registry disagrees");
        }
        for &unique in after.iter().filter(|unique| !before.contains(unique)) {
            self.register_hidden_table(definition.id, unique);
        }
    }

    /// Records the distribution dih chose for table `table_id`.
    pub(crate) fn set_map(&mut self, table_id: u32, map: Arc<PartitionMap>) {
        let entry = self.entries[table_id as usize]
            .as_mut()
            .unwrap_or_else(|| panic!("map for table {table_id}, which does not exist"));
        entry.map = Some(map);
    }

    /// Moves table `table_id` from state `from` to `to`.
    pub(crate) fn change_state(&mut self, table_id: u32, from: TableState, to: TableState) {
        let entry = self.entries[table_id as usize]
            .as_mut()
            .unwrap_or_else(|| panic!("table {table_id} changes state but does not exist"));
        assert_eq!(
            entry.state, from,
            "table {table_id} is not in the state its operation left it in"
        );
        entry.state = to;
    }

    /// The tables the schema file holds, in id order: every table from the
    /// moment it is online until it is removed (a table being created is
    /// not in it yet; one being dropped still is).
    pub(crate) fn stored(&self) -> impl Iterator<Item = &TableEntry> {
        self.entries
            .iter()
            .flatten()
            .filter(|entry| entry.state != TableState::Creating)
    }

    /// Index = table id: the version each id last had (0: never used).
    pub(crate) fn id_versions(&self) -> &[u32] {
        &self.versions
    }

    /// The registry as the schema file recorded it: every table online,
    /// and the last version of every id (so a new table never reuses an
    /// id's version). The file was checked when decoded (ids in order,
    /// versions matching, names unique), so a violation here is a bug.
    pub(crate) fn restored(
        id_versions: Vec<u32>,
        tables: Vec<(Arc<TableDef>, Arc<PartitionMap>)>,
    ) -> Tables {
        let mut restored = Tables {
            entries: Vec::new(),
            names: HashMap::with_capacity(tables.len()),
            versions: Vec::new(),
            hidden: HashMap::new(),
        };
        restored.entries.resize_with(id_versions.len(), || None);
        for (definition, map) in tables {
            let id = definition.id as usize;
            assert_eq!(
                id_versions.get(id),
                Some(&definition.version),
                "restored table {id} must have its id's last version"
            );
            assert!(
                restored.entries[id].is_none(),
                "restored table id {id} twice"
            );
            let previous = restored
                .names
                .insert(definition.name.clone(), definition.id);
            assert!(
                previous.is_none(),
                "restored table name {:?} twice",
                definition.name
            );
            for index in definition.unique_indexes() {
                let unique = index.unique.expect("a unique index");
                let previous = restored.hidden.insert(unique.table_id, definition.id);
                assert!(
                    previous.is_none()
                        && id_versions.get(unique.table_id as usize) == Some(&unique.table_version),
                    "restored hidden table {} twice or without its id's last version",
                    unique.table_id
                );
            }
            restored.entries[id] = Some(TableEntry {
                definition,
                state: TableState::Online,
                map: Some(map),
            });
        }
        restored.versions = id_versions;
        restored
    }

    /// Makes the next version of id `table_id` come after `version` (one
    /// a take-over found on some block).
    pub(crate) fn note_version(&mut self, table_id: u32, version: u32) {
        let id = table_id as usize;
        if self.versions.len() <= id {
            self.versions.resize(id + 1, 0);
            self.entries.resize_with(id + 1, || None);
        }
        self.versions[id] = self.versions[id].max(version);
    }

    /// Forgets a dropped table (its id's version counter stays).
    pub(crate) fn remove(&mut self, table_id: u32) {
        let entry = self.entries[table_id as usize]
            .take()
            .unwrap_or_else(|| panic!("table {table_id} removed but does not exist"));
        assert_eq!(
            entry.state,
            TableState::Dropping,
            "only a dropping table is removed"
        );
        let removed = self.names.remove(&entry.definition.name);
        assert_eq!(removed, Some(table_id), "name and id registries disagree");
        for index in entry.definition.unique_indexes() {
            let unique = index.unique.expect("a unique index");
            let base = self.hidden.remove(&unique.table_id);
            assert_eq!(base, Some(table_id), "hidden table registry disagrees");
        }
    }
}
