//! The signal table's group System restart: 280..=299 (room for node restart and copy of partitions): declarations in
//! `signal_table!`'s form (the signals module says what each part means),
//! handed on with the groups before them to the next group's macro, and
//! by the last to `signal_table!` itself. One file a group keeps the table
//! readable; the numbers and the order are the table's.

macro_rules! restart_signals {
    ($($declared:tt)*) => {
        local_services_signals! {
            $($declared)*

            /// dih -> master dih, system restart (start phase RESTART_GCI): what this
            /// node's system file says.
            #[derive(Debug, PartialEq)]
            280 RestartGciRep: Dih -> Dih, node {
                /// The latest GCI the system file records complete (0: no system file,
                /// the node has never made a GCI durable).
                complete_gci: Gci,
                /// The data nodes the file records alive at that GCI (empty: not
                /// recorded).
                members: NodeSet,
            }

            /// master dih -> every dih, system restart: the GCI the cluster restores.
            #[derive(Debug, PartialEq)]
            281 RestartGciOrd: Dih -> Dih, node {
                /// The restored GCI (0: initial start, nothing to restore).
                restored_gci: Gci,
                /// Nodes whose data is older than the restored GCI (they failed
                /// before it was made durable): they take no part, and wait for a
                /// node restart (docs/design/failures.md §9).
                stale: NodeSet,
            }

            /// dih -> master dih, system restart (start phase RESTORE_DATA): this node
            /// restored its data; new GCIs must start above `highest_gci`.
            #[derive(Debug, PartialEq)]
            282 RestoredRep: Dih -> Dih, node {
                /// The highest GCI found anywhere on this node's disk.
                highest_gci: Gci,
            }

            /// dih -> each ldm of its node. Restore from disk up to `restored_gci`
            /// (newest usable local checkpoint, then redo), rebuild the indexes,
            /// invalidate redo beyond it durably, then answer [`RestoreConf`].
            /// Node-local.
            #[derive(Debug, PartialEq)]
            283 RestoreReq: Dih -> Ldm, local {
                /// The GCI the cluster restores (0: initial start, format the redo log).
                restored_gci: Gci,
            }

            /// ldm -> dih. Restored and ready to log. Node-local.
            #[derive(Debug, PartialEq)]
            284 RestoreConf: Ldm -> Dih, local {
                /// The highest GCI found in this ldm's redo parts.
                highest_gci: Gci,
                /// Row changes replayed.
                replayed: u64,
            }

            /// restarting node's dih -> master dih, node restart (start phase
            /// GLOBAL_CHECKPOINT): take this node's tcs into the GCI switch and
            /// its ldms into the rounds that make GCIs durable
            /// (docs/design/0018-node-restart.md). Sent again to a new master.
            /// Answered with [`IncludeNodeConf`] once its tcs hold a GCI.
            #[derive(Debug, PartialEq)]
            285 IncludeNodeReq: Dih -> Dih, node {
                /// The restarting node.
                node: NodeId,
                /// 0 until its local checkpoints are written; then the first GCI
                /// its system file may record complete (phase RECORD_GCI): its
                /// dih takes part in the rounds' COPY_GCI from the first round of
                /// a GCI at least this one.
                system_file_from: Gci,
            }

            /// master dih -> the restarting node's dih: its tcs took part in the
            /// switch to `gci` and hold it; its ldms take part in the durability
            /// rounds from the next one on.
            #[derive(Debug, PartialEq)]
            286 IncludeNodeConf: Dih -> Dih, node {
                /// The GCI every tc holds now.
                gci: Gci,
            }

            /// restarting node's ldm -> the ldm of the partition's primary, node
            /// restart (phase COPY_DATA; docs/design/0018-node-restart.md): attach
            /// the sender's node to the partition (every write the primary
            /// prepares from now on runs on to it, last in its chain), then send
            /// it every row whose GCI is above `since_gci` and every slot freed
            /// above it, in row-id order ([`CopyRowsReq`]).
            #[derive(Debug, PartialEq)]
            287 CopyFragReq: Ldm -> Ldm, node {
                /// Table.
                table_id: u32,
                /// Partition.
                partition: u32,
                /// What the restarting node restored (0: nothing).
                since_gci: Gci,
            }

            /// primary's ldm -> restarting ldm: the copy is refused (no such
            /// partition here, or another copy of it runs); the restarting ldm
            /// asks the partition's primary again a moment later.
            #[derive(Debug, PartialEq)]
            288 CopyFragRef: Ldm -> Ldm, node {
                /// Echoed.
                table_id: u32,
                /// Echoed.
                partition: u32,
                /// Why.
                error: ErrorCode,
            }

            /// primary's ldm -> restarting ldm: a batch of the copy, in row-id
            /// order (`ldm::copy` documents the entries); `done` on the last.
            /// Answered with [`CopyRowsConf`] before the next batch is sent.
            #[derive(Debug, PartialEq)]
            289 CopyRowsReq: Ldm -> Ldm, node {
                /// Table.
                table_id: u32,
                /// Partition.
                partition: u32,
                /// Nothing follows this batch.
                done: bool,
                /// The entries.
                rows: Section,
            }

            /// restarting ldm -> primary's ldm: the batch is applied; send the
            /// next.
            #[derive(Debug, PartialEq)]
            290 CopyRowsConf: Ldm -> Ldm, node {
                /// Echoed.
                table_id: u32,
                /// Echoed.
                partition: u32,
            }
        }
    };
}
