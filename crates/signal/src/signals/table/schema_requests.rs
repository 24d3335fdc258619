//! The signal table's group Schema requests from API nodes: 60..=79: declarations in
//! `signal_table!`'s form (the signals module says what each part means),
//! handed on with the groups before them to the next group's macro, and
//! by the last to `signal_table!` itself. One file a group keeps the table
//! readable; the numbers and the order are the table's.

macro_rules! schema_requests_signals {
    ($($declared:tt)*) => {
        scans_signals! {
            $($declared)*

            /// API -> dict. Create a table from an encoded [`TableDef`] (id and version ignored).
            #[derive(Debug, PartialEq)]
            60 CreateTabReq: Api -> Dict, api_request
                refused_by SchemaRef { request_id }
            {
                /// Client's number for the request, echoed.
                request_id: u32,
                /// Encoded table definition.
                definition: Section,
            }

            /// dict -> API. The table exists on every block.
            #[derive(Debug, PartialEq)]
            61 CreateTabConf: Dict -> Api, api_reply {
                /// Echoed.
                request_id: u32,
                /// Assigned id.
                table_id: u32,
                /// Assigned version.
                table_version: u32,
            }

            /// dict -> API. A schema request failed (create, drop, get or list).
            #[derive(Debug, PartialEq)]
            62 SchemaRef: Dict -> Api, api_reply {
                /// Echoed.
                request_id: u32,
                /// Why.
                error: ErrorCode,
            }

            /// API -> dict. Drop the table with this name.
            #[derive(Debug, PartialEq)]
            63 DropTabReq: Api -> Dict, api_request
                refused_by SchemaRef { request_id }
            {
                /// Client's number for the request, echoed.
                request_id: u32,
                /// Table name bytes.
                name: Section,
            }

            /// dict -> API. The table is gone from every block.
            #[derive(Debug, PartialEq)]
            64 DropTabConf: Dict -> Api, api_reply {
                /// Echoed.
                request_id: u32,
            }

            /// API -> dict. Fetch a table's definition by name.
            #[derive(Debug, PartialEq)]
            65 GetTabInfoReq: Api -> Dict, api_request
                refused_by SchemaRef { request_id }
            {
                /// Client's number for the request, echoed.
                request_id: u32,
                /// Table name bytes.
                name: Section,
            }

            /// dict -> API. A table definition.
            #[derive(Debug, PartialEq)]
            66 GetTabInfoConf: Dict -> Api, api_reply {
                /// Echoed.
                request_id: u32,
                /// Schema version at the time of the answer.
                schema_version: u32,
                /// Encoded [`TableDef`] with id, version and partitions.
                definition: Section,
                /// The cluster's distribution version when the map was taken.
                map_version: u32,
                /// Encoded [`PartitionMap`] of the table (see `codec::encode_partition_map`).
                map: Section,
            }

            /// API -> dict (any data node's). List the online tables: how the replica
            /// checker finds every table without knowing their names. Refused with
            /// [`SchemaRef`] (NodeNotStarted before the dict's schema phase).
            #[derive(Debug, PartialEq)]
            67 ListTablesReq: Api -> Dict, api_request
                refused_by SchemaRef { request_id }
            {
                /// Client's number for the request, echoed.
                request_id: u32,
            }

            /// dict -> API. The names of the online tables (those GET_TABINFO finds;
            /// tables being created or dropped are left out), sorted by byte value.
            #[derive(Debug, PartialEq)]
            68 ListTablesConf: Dict -> Api, api_reply
                checked_by checks::list_tables_conf
            {
                /// Echoed.
                request_id: u32,
                /// Schema version at the time of the answer: the list is that
                /// version's tables.
                schema_version: u32,
                /// The names: u16 count, then per name a u16 byte length and that many
                /// bytes of UTF-8 (see `codec::encode_table_names` and
                /// `codec::decode_table_names`).
                names: Section,
            }

            /// API -> dict. Create an ordered index on a table that may hold rows
            /// and be written to (docs/design/0024-online-index-changes.md).
            #[derive(Debug, PartialEq)]
            69 CreateIndexReq: Api -> Dict, api_request
                refused_by SchemaRef { request_id }
            {
                /// Client's number for the request, echoed.
                request_id: u32,
                /// The table, the index's name and its columns by name: see
                /// [`crate::schema::IndexChange`].
                change: Section,
            }

            /// API -> dict. Drop an ordered index of a table.
            #[derive(Debug, PartialEq)]
            70 DropIndexReq: Api -> Dict, api_request
                refused_by SchemaRef { request_id }
            {
                /// Client's number for the request, echoed.
                request_id: u32,
                /// The table and the index's name (no columns): see
                /// [`crate::schema::IndexChange`].
                change: Section,
            }

            /// dict -> API. The index is built on every replica and every dict
            /// hands out the definition with it (a create), or is gone (a drop).
            #[derive(Debug, PartialEq)]
            71 AlterTabConf: Dict -> Api, api_reply {
                /// Echoed.
                request_id: u32,
                /// The table's revision after the change.
                revision: u32,
            }
        }
    };
}
