//! The signal table's group Registration and admission: 1..=19: declarations in
//! `signal_table!`'s form (the signals module says what each part means),
//! handed on with the groups before them to the next group's macro, and
//! by the last to `signal_table!` itself. One file a group keeps the table
//! readable; the numbers and the order are the table's.

macro_rules! registration_signals {
    ($($declared:tt)*) => {
        transactions_signals! {
            $($declared)*

            /// API -> membership. An API node announces itself on a new connection.
            /// The first one, which must open the connection's first frame, is
            /// checked by the data node's receive thread before the connection is
            /// admitted: `token` must be the one mgmd issued with the frame's
            /// sender id (docs/design/0007-groundwork.md, "Authenticated
            /// admission"); otherwise API_REGREF `NotAdmitted` and the connection
            /// is closed.
            #[derive(Debug, PartialEq)]
            1 ApiRegReq: Api -> Membership, api_request
                refused_by ApiRegRef { }
            {
                /// Protocol version the client speaks.
                protocol_version: u16,
                /// What mgmd issued with the API node id.
                token: ApiToken,
            }

            /// membership -> API. Registration accepted; the node's shape for routing.
            #[derive(Debug, PartialEq)]
            2 ApiRegConf: Membership -> Api, api_reply {
                /// Whether the node has finished its start phases.
                started: bool,
                /// tc instances on the node (the client spreads transactions over them).
                tc_instances: u16,
                /// The cluster's heartbeat interval, milliseconds: the API node
                /// sends [`ApiHeartbeatReq`] on a connection idle this long.
                heartbeat_interval_ms: u32,
                /// Intervals of silence, in a row, after which either side takes
                /// the other for gone.
                api_heartbeat_missed: u16,
            }

            /// membership -> API. Registration refused: the request was malformed
            /// or sent to a block that does not register API nodes, or the
            /// client speaks another protocol version (membership), or its token
            /// is not one mgmd issued for its node id (the receive thread, before
            /// it closes the connection: `NotAdmitted`).
            #[derive(Debug, PartialEq)]
            3 ApiRegRef: Membership -> Api, api_reply {
                /// Why.
                error: ErrorCode,
            }

            /// Data node -> data node, the dialer's hello: the first frame on a
            /// link (sequence 0, this signal alone). Opens the handshake that
            /// proves both sides hold the cluster secret (docs/wire-format.md §7).
            /// Sent and consumed by the receive threads; no block sees it.
            #[derive(Debug, PartialEq)]
            4 LinkHelloReq: Transport -> Transport, node {
                /// Fresh random bytes the acceptor's proof must cover.
                challenge: [u8; 16],
            }

            /// Data node -> data node, the acceptor's hello (its first frame,
            /// sequence 0, this signal alone): its own challenge and its proof
            /// over both challenges.
            #[derive(Debug, PartialEq)]
            5 LinkHelloConf: Transport -> Transport, node {
                /// Fresh random bytes the dialer's proof must cover.
                challenge: [u8; 16],
                /// HMAC-SHA256 under the cluster secret (`admission::link_proof`).
                proof: [u8; 32],
            }

            /// Data node -> data node, the dialer's proof (its second frame,
            /// sequence 1, this signal alone); the acceptor admits the link on it.
            #[derive(Debug, PartialEq)]
            6 LinkProofRep: Transport -> Transport, node {
                /// HMAC-SHA256 under the cluster secret (`admission::link_proof`).
                proof: [u8; 32],
            }

            /// membership -> every API node registered with this data node: the
            /// cluster agreed that the data nodes of `failed` failed (membership
            /// `membership_id`). The client fails what waits on its connections to
            /// them and stops using them at once, instead of waiting for its reply
            /// timeout: a node that went silent (paused, cut off) keeps its
            /// connections open (docs/design/failures.md §10).
            #[derive(Debug, PartialEq)]
            7 ApiNodeFailRep: Membership -> Api, api_reply {
                /// The agreed membership without them.
                membership_id: u32,
                /// The data nodes that failed.
                failed: NodeSet,
            }

            /// API -> a data node, on a connection it has sent nothing else on for
            /// a heartbeat interval: a sign of life (docs/design/0017-api-heartbeats.md).
            /// The data node's receive thread answers it at once with
            /// [`ApiHeartbeatConf`], ahead of any queued work, and from the first
            /// one on closes the connection if the API node goes silent (the API
            /// node is taken for failed: its transactions are aborted). Membership
            /// answers one that reaches it the same way.
            #[derive(Debug, PartialEq)]
            8 ApiHeartbeatReq: Api -> Membership, api_request
                refused_by ApiRegRef { }
            {
                /// The API node's count of heartbeats sent on this connection
                /// (echoed; for logs).
                count: u32,
            }

            /// data node -> API. Answer to [`ApiHeartbeatReq`]: the API node
            /// counts any frame from the data node as a sign of life, this one
            /// included, and takes the data node for gone after its limit of
            /// silence.
            #[derive(Debug, PartialEq)]
            9 ApiHeartbeatConf: Membership -> Api, api_reply {
                /// Echoed.
                count: u32,
            }
        }
    };
}
