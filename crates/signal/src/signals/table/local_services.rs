//! The signal table's group Node-local services: 300..=319: declarations in
//! `signal_table!`'s form (the signals module says what each part means),
//! handed on with the groups before them to the next group's macro, and
//! by the last to `signal_table!` itself. One file a group keeps the table
//! readable; the numbers and the order are the table's.

macro_rules! local_services_signals {
    ($($declared:tt)*) => {
        signal_table! {
            $($declared)*

            /// A block to itself, delayed: periodic work (NDB's CONTINUEB).
            #[derive(Debug, PartialEq)]
            300 ContinueB: Any -> Any, local {
                /// Which periodic job (block-specific).
                job: u32,
            }

            /// a block -> the node's io service (`BlockKind::Io`: the io thread in
            /// production, the disk model in `sim`), sent by `Context::fs_request`,
            /// never by `send`. Perform one file operation in the node's data
            /// directory; answered with one [`FsConf`] carrying `token`. Requests run
            /// in the order they arrive. Node-local: never encoded.
            #[derive(Debug)]
            301 FsReq: Any -> Io, local {
                /// The requester's number for the request, echoed.
                token: u64,
                /// What to do.
                operation: FsOperation,
            }

            /// io service -> the block that sent [`FsReq`]. The operation is done, or
            /// failed with the file, offset and OS error text. The service never
            /// panics on an OS error; the block decides (an fsync error or a bad
            /// checksum stops the node, docs/design/durability.md §6). Node-local: never encoded.
            #[derive(Debug)]
            302 FsConf: Io -> Any, local {
                /// Echoed.
                token: u64,
                /// The outcome.
                result: Result<FsDone, FsError>,
            }
        }
    };
}
