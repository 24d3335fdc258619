//! The signal table's group Schema between blocks and nodes: 200..=239 (room for index create and drop): declarations in
//! `signal_table!`'s form (the signals module says what each part means),
//! handed on with the groups before them to the next group's macro, and
//! by the last to `signal_table!` itself. One file a group keeps the table
//! readable; the numbers and the order are the table's.

macro_rules! schema_signals {
    ($($declared:tt)*) => {
        membership_signals! {
            $($declared)*

            /// dict -> dih. Work out the distribution of a new table.
            #[derive(Debug)]
            200 DiAddTabReq: Dict -> Dih, local {
                /// The table (partitions already decided).
                table: Arc<TableDef>,
            }

            /// dih -> dict. The table's distribution.
            #[derive(Debug)]
            201 DiAddTabConf: Dih -> Dict, local {
                /// The map.
                map: Arc<PartitionMap>,
            }

            /// dict -> tc. A table now exists; route its operations with `map`.
            #[derive(Debug)]
            202 TcAddTabReq: Dict -> Tc, node
                checked_by checks::tc_add_tab_req
            {
                /// Definition.
                table: Arc<TableDef>,
                /// Distribution.
                map: Arc<PartitionMap>,
            }

            /// dict -> ldm. Create the partitions of a table this ldm owns.
            #[derive(Debug)]
            203 LqhAddTabReq: Dict -> Ldm, node
                checked_by checks::lqh_add_tab_req
            {
                /// Definition.
                table: Arc<TableDef>,
                /// Distribution (the ldm creates the partitions whose placement names
                /// its own node and instance).
                map: Arc<PartitionMap>,
            }

            /// tc or ldm -> dict. The table is added.
            #[derive(Debug, PartialEq)]
            204 AddTabConf: Tc | Ldm | Dict -> Dict, node {
                /// Table.
                table_id: u32,
            }

            /// master dict -> tc, ldm or another dict. Forget a table (tc: refuse new
            /// operations; ldm: free its partitions once no operation uses them;
            /// dict: stop handing it out). A block that does not hold the table
            /// answers at once (a take-over drops a table wherever it may be).
            #[derive(Debug, PartialEq)]
            205 DropTabOrd: Dict -> Tc | Ldm | Dict, node {
                /// Table.
                table_id: u32,
            }

            /// tc, ldm or dict -> the master dict. Answer to [`DropTabOrd`].
            #[derive(Debug, PartialEq)]
            206 DropTabRep: Tc | Ldm | Dict -> Dict, node {
                /// Table.
                table_id: u32,
                /// True when operations still use the table: dict retries later.
                busy: bool,
            }

            /// master dict -> the other dicts. A table exists on every tc and ldm; keep
            /// its definition to answer GET_TABINFO. Answered with ADD_TAB_CONF.
            #[derive(Debug)]
            207 DictAddTabReq: Dict -> Dict, node
                checked_by checks::dict_add_tab_req
            {
                /// Schema version after the create.
                schema_version: u32,
                /// Definition.
                table: Arc<TableDef>,
                /// Distribution.
                map: Arc<PartitionMap>,
            }

            /// master dict -> every other dict, system restart (start phase
            /// RESTORE_SCHEMA; NDB's SCHEMA_INFO): one chunk of the master's schema,
            /// the bytes of its schema file (docs/schema-file-format.md). The master's
            /// schema wins: the other dict replaces its own with it (rewriting its
            /// schema file when they differ) before it gives its tcs and ldms the
            /// tables. Chunks go in order, one at a time, each answered with
            /// [`SchemaSyncConf`].
            #[derive(Debug, PartialEq)]
            208 SchemaSyncReq: Dict -> Dict, node
                checked_by checks::schema_sync_req
            {
                /// Bytes of the whole schema; 0: the master has no schema (no schema
                /// file, or diskless), sent as one empty chunk.
                total_bytes: u32,
                /// Where `data` starts within them.
                offset: u32,
                /// The chunk: at most `section::MAX_SECTION_BYTES`, ending within
                /// `total_bytes`, empty only when `total_bytes` is 0.
                data: Section,
            }

            /// dict -> master dict. Answer to [`SchemaSyncReq`]: `received` bytes of
            /// the schema have arrived. Below the total: send the chunk from there.
            /// Equal to the total (the answer to the last chunk): this dict has taken
            /// the master's schema, its schema file holds it and its tcs and ldms have
            /// every table of it.
            #[derive(Debug, PartialEq)]
            209 SchemaSyncConf: Dict -> Dict, node {
                /// Bytes of the schema received so far.
                received: u32,
            }

            /// new master dict -> every live tc, ldm and other dict, after the
            /// master dict failed and every survivor installed that failure (NDB's
            /// DICT_TAKEOVER_REQ; docs/design/0016-schema-takeover.md): which
            /// tables (id, version) do you hold? `tables` lists the new master's
            /// own; a dict sends the master a [`DictAddTabReq`] of each table it
            /// holds that the master lacks before it answers, so the master can
            /// roll the table forward. Answered with [`DictTakeoverConf`].
            #[derive(Debug, PartialEq)]
            210 DictTakeoverReq: Dict -> Tc | Ldm | Dict, node
                checked_by checks::dict_takeover_req
            {
                /// The membership whose failure of the master this take-over
                /// handles, echoed.
                membership_id: u32,
                /// The new master's tables: see `codec::encode_table_versions`.
                tables: Section,
            }

            /// tc, ldm or dict -> the new master dict. Answer to
            /// [`DictTakeoverReq`]: the tables this block holds.
            #[derive(Debug, PartialEq)]
            211 DictTakeoverConf: Tc | Ldm | Dict -> Dict, node
                checked_by checks::dict_takeover_conf
            {
                /// Echoed.
                membership_id: u32,
                /// A dict's schema version (0 from a tc or ldm).
                schema_version: u32,
                /// (table id, table version) of every table held: see
                /// `codec::encode_table_versions`.
                tables: Section,
            }

            /// new master dict -> every other live dict: the take-over is done;
            /// take this schema version (above any a dict had) and write it into
            /// the schema file. No answer: a dict that misses it (its node fails)
            /// is out of the cluster.
            #[derive(Debug, PartialEq)]
            212 DictTakeoverDoneOrd: Dict -> Dict, node {
                /// The schema version every dict has from now on.
                schema_version: u32,
            }

            /// master dict -> ldm. The table's indexes are now `table`'s (a
            /// higher or, rolling a change back, lower revision): build each new
            /// one over the rows of this ldm's partitions while writes go on, drop
            /// each one no longer named. Answered with [`AlterTabRep`] once every
            /// new index holds every row, or [`AlterTabRef`]; a repeat of the
            /// revision under way is answered once.
            #[derive(Debug)]
            213 LqhAlterTabReq: Dict -> Ldm, node {
                /// The definition with its new index list and revision.
                table: Arc<TableDef>,
            }

            /// ldm, tc or dict -> the master dict. The table's indexes are those
            /// of revision `revision` here.
            #[derive(Debug, PartialEq)]
            214 AlterTabRep: Ldm | Tc | Dict -> Dict, node {
                /// Table.
                table_id: u32,
                /// Echoed.
                revision: u32,
            }

            /// ldm -> the master dict. An index of revision `revision` could not
            /// be built (TableFull: DataMemory has no room for its entries); the
            /// ldm dropped it again.
            #[derive(Debug, PartialEq)]
            215 AlterTabRef: Ldm -> Dict, node {
                /// Table.
                table_id: u32,
                /// Echoed.
                revision: u32,
                /// Why.
                error: ErrorCode,
            }

            /// master dict -> the other dicts. Hand out `table` from now on (its
            /// indexes changed) and write it to the schema file; answered with
            /// [`AlterTabRep`]. At a master taking over, from another dict: a
            /// revision of a table higher than the master's.
            #[derive(Debug)]
            216 DictAlterTabReq: Dict -> Dict, node {
                /// Schema version after the change.
                schema_version: u32,
                /// The definition.
                table: Arc<TableDef>,
            }

            /// master dict -> tc. The table's indexes are now `table`'s (a higher
            /// or, rolling a change back, lower revision): keep the hidden tables
            /// of the unique indexes it names, and no others, from now on
            /// (docs/design/0026-unique-indexes.md). Answered with
            /// [`AlterTabRep`], once every transaction that wrote before it has
            /// ended when it starts the building of a unique index. A tc that
            /// does not hold the table answers too.
            #[derive(Debug)]
            217 TcAlterTabReq: Dict -> Tc, node {
                /// A unique index of `table` whose hidden rows are being built (0:
                /// none): its hidden rows are kept tolerantly, a delete removing
                /// only a hidden row that names its row.
                building: u32,
                /// The definition with its new index list and revision.
                table: Arc<TableDef>,
            }

            /// master dict -> a tc of its node. Insert the hidden row of every row
            /// of the table for unique index `index_id` (its tcs keep it, building,
            /// from every write since): in transactions of the tc's own, each row
            /// read with a shared lock. Answered with [`BuildUniqueConf`] once
            /// every row has its hidden row, or [`BuildUniqueRef`]: DuplicateKey
            /// when two rows hold one value, or the error that stopped it.
            #[derive(Debug, PartialEq)]
            218 BuildUniqueReq: Dict -> Tc, local {
                /// Table.
                table_id: u32,
                /// Its version.
                table_version: u32,
                /// The unique index.
                index_id: u32,
            }

            /// tc -> dict. Every row has its hidden row.
            #[derive(Debug, PartialEq)]
            219 BuildUniqueConf: Tc -> Dict, local {
                /// Echoed.
                table_id: u32,
                /// Echoed.
                index_id: u32,
                /// Rows the build inserted a hidden row for.
                rows: u64,
            }

            /// tc -> dict. The build stopped; the hidden rows it inserted stay
            /// (the dict drops the hidden table with the index).
            #[derive(Debug, PartialEq)]
            220 BuildUniqueRef: Tc -> Dict, local {
                /// Echoed.
                table_id: u32,
                /// Echoed.
                index_id: u32,
                /// Why: DuplicateKey when two rows hold one value.
                error: ErrorCode,
            }
        }
    };
}
