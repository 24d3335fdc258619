//! The signal table's group Membership and start phases: 240..=279 (room for heartbeats, node failure and arbitration): declarations in
//! `signal_table!`'s form (the signals module says what each part means),
//! handed on with the groups before them to the next group's macro, and
//! by the last to `signal_table!` itself. One file a group keeps the table
//! readable; the numbers and the order are the table's.

macro_rules! membership_signals {
    ($($declared:tt)*) => {
        restart_signals! {
            $($declared)*

            /// membership -> the membership of the lowest configured data node,
            /// which forms the cluster. This node is connected to every data node
            /// and asks to join; it says what its system file records, so that
            /// the start leaves out the nodes whose data is stale. A node
            /// restarting while the cluster runs sends it to every member it is
            /// connected to; the president admits it (design 0018).
            #[derive(Debug, PartialEq)]
            240 CmRegReq: Membership -> Membership, node {
                /// The joining node.
                node: NodeId,
                /// The latest GCI its system file records complete (0: none).
                complete_gci: Gci,
                /// The data nodes the file records alive at that GCI (empty: not
                /// recorded).
                members: NodeSet,
                /// The data nodes the sender is connected to (itself included):
                /// a node restart is admitted only when connected to every member.
                connected: NodeSet,
            }

            /// forming membership -> every membership. Every configured data node
            /// has registered: the cluster is formed without the stale nodes, and
            /// start phases may go on.
            #[derive(Debug, PartialEq)]
            241 CmRegConf: Membership -> Membership, node {
                /// The president (master of dih and dict): the lowest id that is
                /// not stale.
                president: NodeId,
                /// Nodes whose data ends before `restored_gci` (they failed before
                /// it was made durable): they take no part and shut down.
                stale: NodeSet,
                /// The highest GCI any node's system file records complete.
                restored_gci: Gci,
            }

            /// membership -> a block. Run start phase `phase`; answer with [`StartPhaseConf`].
            #[derive(Debug, PartialEq)]
            242 StartPhaseReq: Membership -> Any, local {
                /// Phase number (see membership's start module).
                phase: u8,
            }

            /// a block -> membership. Phase done on this block.
            #[derive(Debug, PartialEq)]
            243 StartPhaseConf: Any -> Membership, local {
                /// Echoed.
                phase: u8,
            }

            /// transport -> membership (local). A data node connected, with the
            /// incarnation its frames carry.
            #[derive(Debug, PartialEq)]
            244 NodeConnectedRep: Transport -> Membership, local {
                /// The peer.
                node: NodeId,
                /// Its incarnation.
                incarnation: u32,
            }

            /// transport -> tc, dict and membership. An API node disconnected:
            /// abort its transactions and forget its requests (membership stops
            /// telling it of node failures).
            #[derive(Debug, PartialEq)]
            245 ApiFailRep: Transport -> Tc | Dict | Membership, local {
                /// The API node.
                node: NodeId,
            }

            /// membership -> the blocks of its node that have a master (dih and
            /// dict). `president` is the president: the data node whose dih and
            /// dict are the masters. Membership is the one source of this fact:
            /// sent before phase INITIALISE, on the same link as the phase (so the
            /// block knows it before the node joins the cluster and hears from
            /// other nodes), and again whenever the president changes (master
            /// take-over, docs/design/failures.md).
            #[derive(Debug, PartialEq)]
            246 PresidentRep: Membership -> Dih | Dict, local {
                /// The president's node id.
                president: NodeId,
            }

            /// membership -> every other member's membership, every
            /// `heartbeat_interval_ms` once the cluster is formed (design 0020):
            /// a sign of life the receiver counts
            /// (docs/design/failures.md §2). A late, repeated or unexpected one
            /// changes nothing but the count. The receiver answers each with
            /// CM_HEARTBEAT_ACK (the sender's read lease, docs/design/failures.md
            /// §5).
            #[derive(Debug, PartialEq)]
            247 CmHeartbeat: Membership -> Membership, node {
                /// The sender's count of heartbeats sent (for logs).
                sequence: u32,
                /// When it was sent, by the sender's clock (echoed in the ack).
                sent_at_ms: u64,
            }

            /// transport -> membership. The established link to data node `node`
            /// (its incarnation `incarnation`) closed or broke. It is never
            /// reconnected in that incarnation: membership treats the node as
            /// failed (docs/design/failures.md §2).
            #[derive(Debug, PartialEq)]
            248 NodeLinkFailedRep: Transport -> Membership, local {
                /// The peer.
                node: NodeId,
                /// Its incarnation on the link that broke.
                incarnation: u32,
            }

            /// membership -> the president's membership. The sender takes `failed`
            /// for failed (each missed its heartbeats or lost its link to the
            /// sender) and asks the president to agree (docs/design/failures.md §3).
            /// `membership_id` is the sender's agreed membership. Repeated while
            /// the nodes are not agreed failed, to each new president.
            #[derive(Debug, PartialEq)]
            249 CmFailRep: Membership -> Membership, node {
                /// The sender's agreed membership id.
                membership_id: u32,
                /// The nodes the sender takes for failed.
                failed: NodeSet,
            }

            /// president's membership -> the membership of every node it proposes
            /// to keep. Step one of the failure protocol: the membership `live`
            /// under id `membership_id`. The receiver cuts its links to the nodes
            /// it leaves out, and answers CM_FAIL_PREPARE_CONF, or
            /// CM_FAIL_PREPARE_REF when it already prepared a higher id.
            #[derive(Debug, PartialEq)]
            250 CmFailPrepareReq: Membership -> Membership, node {
                /// The proposed membership's id.
                membership_id: u32,
                /// The proposed members.
                live: NodeSet,
                /// Those of `live` still in their node restart: they hold no
                /// data that counts (docs/design/0018-node-restart.md). A
                /// proposal that admits a restarting node adds it to both.
                starting: NodeSet,
                /// Those of `live` that came back by a node restart: they go last
                /// in every replica chain, after the nodes that did not.
                returned: NodeSet,
            }

            /// membership -> the president's membership. Prepared `membership_id`;
            /// `failed` is every node the sender takes for failed, so that the
            /// president can widen its proposal.
            #[derive(Debug, PartialEq)]
            251 CmFailPrepareConf: Membership -> Membership, node {
                /// The prepared membership's id.
                membership_id: u32,
                /// The nodes the sender takes for failed.
                failed: NodeSet,
            }

            /// membership -> the president's membership. A proposal with an id no
            /// higher than one the sender already prepared or installed: the
            /// president proposes again above `highest`.
            #[derive(Debug, PartialEq)]
            252 CmFailPrepareRef: Membership -> Membership, node {
                /// The refused proposal's id.
                membership_id: u32,
                /// The highest membership id the sender prepared or installed.
                highest: u32,
            }

            /// president's membership -> every member of `live`. Step two: every
            /// member prepared it and the survival rule let this side continue;
            /// install membership `membership_id`. The sender is its president.
            /// A node being admitted by a node restart gets it too: it is the
            /// answer to its CM_REGREQ.
            #[derive(Debug, PartialEq)]
            253 CmFailCommitOrd: Membership -> Membership, node {
                /// The new membership's id.
                membership_id: u32,
                /// Its members.
                live: NodeSet,
                /// Those of `live` still in their node restart.
                starting: NodeSet,
                /// Those of `live` that came back by a node restart.
                returned: NodeSet,
            }

            /// president's membership -> every member of `live`. Every member
            /// prepared it, but the survival rule (docs/design/failures.md §4)
            /// says this side must not continue: shut down. Each receiver works
            /// out why from the same rule, to say so.
            #[derive(Debug, PartialEq)]
            254 CmShutdownOrd: Membership -> Membership, node {
                /// The refused membership's id.
                membership_id: u32,
                /// The nodes on this side.
                live: NodeSet,
            }

            /// membership -> every block of its node (dict, dih, each tc, each ldm),
            /// in the order memberships are installed. The cluster agreed
            /// membership `membership_id` = `live`; the nodes of `failed` left it
            /// with this change. From now on the block handles nothing from them
            /// (what they sent before and is still queued is dropped), stops
            /// waiting for them, and answers NODE_FAIL_CONF. Work that needs the
            /// other survivors waits for NODE_FAIL_COMPLETE_REP
            /// (docs/design/failures.md §3).
            #[derive(Debug, PartialEq)]
            255 NodeFailRep: Membership -> Dih | Dict | Tc | Ldm, local {
                /// The new membership's id.
                membership_id: u32,
                /// Its members.
                live: NodeSet,
                /// The members of the previous membership left out of this one.
                failed: NodeSet,
                /// Its president: the node whose dih and dict are the masters.
                president: NodeId,
                /// Members still in their node restart (not readable, not yet
                /// restorable from their own files).
                starting: NodeSet,
                /// Members that came back by a node restart: last in every
                /// replica chain ([`PartitionMap::routed`]).
                returned: NodeSet,
            }

            /// block -> its node's membership. The block handled NODE_FAILREP
            /// `membership_id`: nothing from the failed nodes reaches it any more.
            #[derive(Debug, PartialEq)]
            256 NodeFailConf: Dih | Dict | Tc | Ldm -> Membership, local {
                /// Echoed.
                membership_id: u32,
            }

            /// membership -> the membership of every member of membership
            /// `membership_id`: every block of the sender handled the change.
            #[derive(Debug, PartialEq)]
            257 CmNodeFailHandledRep: Membership -> Membership, node {
                /// The membership the sender's blocks installed.
                membership_id: u32,
            }

            /// membership -> every block of its node. Every block of every member
            /// of membership `membership_id` handled it (and every earlier one):
            /// no survivor handles a signal of a failed node any more, so the
            /// survivors may finish what the failed nodes left (aborts, commits,
            /// take-overs) without a late signal of theirs crossing the work.
            #[derive(Debug, PartialEq)]
            258 NodeFailCompleteRep: Membership -> Dih | Dict | Tc | Ldm, local {
                /// The membership handled everywhere.
                membership_id: u32,
            }

            /// membership (the president of a side) -> its node's io service
            /// (`BlockKind::Io`: the io thread in production, the simulated
            /// arbitrator in `sim`). A failure or a split left `side` with exactly
            /// half of the nodes of membership `membership_id` (`before`) and no
            /// node group whole: ask the arbitrator (mgmd) whether `side` may
            /// continue (docs/design/failures.md §4). Answered with one
            /// ARBITRATION_CONF. Node-local: never encoded.
            #[derive(Debug, PartialEq)]
            259 ArbitrationReq: Membership -> Io, local {
                /// The agreed membership the side judged itself against.
                membership_id: u32,
                /// Its members.
                before: NodeSet,
                /// The nodes of this side.
                side: NodeSet,
            }

            /// io service -> membership: the arbitrator's answer to
            /// ARBITRATION_REQ (its fields echoed), or that it could not be had
            /// (`answered` false: unreachable, no arbitrator configured, or an
            /// error; the io service logs which). Node-local: never encoded.
            #[derive(Debug, PartialEq)]
            260 ArbitrationConf: Io -> Membership, local {
                /// Echoed.
                membership_id: u32,
                /// Echoed.
                side: NodeSet,
                /// The arbitrator answered.
                answered: bool,
                /// It let this side continue (false when not answered).
                granted: bool,
            }

            /// membership -> the membership that sent a CM_HEARTBEAT: it was
            /// heard. The heartbeat's sender extends its read lease from the time
            /// it sent it, by its own clock, so an ack that waited in a queue (a
            /// pause, a slow link) extends nothing that has run out
            /// (docs/design/failures.md §5).
            #[derive(Debug, PartialEq)]
            261 CmHeartbeatAck: Membership -> Membership, node {
                /// The heartbeat's `sent_at_ms`, echoed.
                sent_at_ms: u64,
            }

            /// membership -> every ldm of its node: reads may be served until
            /// `valid_until_ms` (ctx time, the node's clock), and not after: the
            /// node may have been declared failed and its partitions promoted
            /// elsewhere. 0 revokes the lease (a failure is being agreed);
            /// `u64::MAX` lifts it (no other data node could take over).
            /// Node-local: never encoded.
            #[derive(Debug, PartialEq)]
            262 ReadLeaseRep: Membership -> Ldm, local {
                /// Until when reads may be served.
                valid_until_ms: u64,
            }

            /// dih -> its node's membership, in start phase INITIALISE (before
            /// its conf): what the system file records, which membership carries
            /// to the cluster's formation. Node-local: never encoded.
            #[derive(Debug, PartialEq)]
            263 SystemFileRep: Dih -> Membership, local {
                /// The latest GCI the file records complete (0: none).
                complete_gci: Gci,
                /// The data nodes it records alive at that GCI (empty: not
                /// recorded).
                members: NodeSet,
            }

            /// stale node's membership -> the membership of every node going on,
            /// at a system restart: it heard the formation's verdict (CM_REGCONF
            /// naming it stale) and leaves. The receiver cuts its link, which
            /// tells the stale node everyone has let it go, and it shuts down.
            #[derive(Debug, PartialEq)]
            264 CmStaleRep: Membership -> Membership, node {
                /// The restored GCI its data ends before, echoed.
                restored_gci: Gci,
            }

            /// president's membership -> a node asking to join the running
            /// cluster (node restart, CM_REGREQ): not now. The node asks again a
            /// moment later (docs/design/0018-node-restart.md).
            #[derive(Debug, PartialEq)]
            265 CmRegRef: Membership -> Membership, node {
                /// Why (`signal::signals::join_refusal`).
                reason: u8,
            }

            /// restarting node's membership -> the president's membership: every
            /// phase of its node restart ran (it copied, checkpointed, and its
            /// system file records complete GCIs): end its start, a membership
            /// round without it among the starting members. Sent again every
            /// second, and to each new president, until a commit says so.
            #[derive(Debug, PartialEq)]
            266 CmNodeStartedReq: Membership -> Membership, node {
                /// The restarting node.
                node: NodeId,
            }

            /// io service -> membership, graceful stop
            /// (docs/design/0018-node-restart.md, "Graceful stop"): the node was
            /// asked to stop (SIGTERM, or mgmd's stop or restart): let the
            /// transactions its tcs coordinate finish first. Node-local: never
            /// encoded.
            #[derive(Debug, PartialEq)]
            267 NodeStopReq: Io -> Membership, local {
                /// How long the stop may wait for transactions, in ms.
                limit_ms: u64,
            }

            /// membership -> every tc of the node, graceful stop: begin no new
            /// transaction (a START is refused with NodeShuttingDown, which the
            /// client retries on another node), finish those begun, and answer
            /// with [`TcDrainConf`] once none is left. Node-local: never encoded.
            #[derive(Debug, PartialEq)]
            268 TcDrainReq: Membership -> Tc, local {}

            /// tc -> membership: no transaction left on this tc. Node-local:
            /// never encoded.
            #[derive(Debug, PartialEq)]
            269 TcDrainConf: Tc -> Membership, local {}

            /// membership -> every other member's membership: the sender stopped
            /// hearing `suspect` (it missed its heartbeats) and asks, before it
            /// takes it for failed, whether the receiver still hears it
            /// (docs/design/0020-connectivity-check.md). Answered with
            /// [`CmPingConf`]; `suspect` itself answers too, which clears the
            /// suspicion.
            #[derive(Debug, PartialEq)]
            270 CmPingReq: Membership -> Membership, node {
                /// The sender's check (echoed).
                check: u32,
                /// The member the sender no longer hears.
                suspect: NodeId,
            }

            /// membership -> the membership that sent a [`CmPingReq`]: whether
            /// this node heard from `suspect` within the last two heartbeat
            /// intervals (always true when this node is `suspect`).
            #[derive(Debug, PartialEq)]
            271 CmPingConf: Membership -> Membership, node {
                /// Echoed.
                check: u32,
                /// Echoed.
                suspect: NodeId,
                /// The answer.
                hears: bool,
            }

            /// membership -> the president's membership: the sender does not
            /// hear `suspect`, which other members still hear: the
            /// link between the two is bad, and one of them must leave. The
            /// president gathers such reports for a moment and chooses who
            /// (docs/design/0020-connectivity-check.md).
            #[derive(Debug, PartialEq)]
            272 CmLinkCutRep: Membership -> Membership, node {
                /// The sender's agreed membership id.
                membership_id: u32,
                /// The member the sender no longer hears.
                suspect: NodeId,
                /// The sender hears `suspect` again: drop the report (answered
                /// with [`CmLinkCutConf`]).
                withdraw: bool,
            }

            /// president's membership -> a member that withdrew its cut report of
            /// `suspect`: the report is dropped (or was not pending); the member
            /// may ack `suspect`'s heartbeats and serve reads again
            /// (docs/design/0020-connectivity-check.md).
            #[derive(Debug, PartialEq)]
            273 CmLinkCutConf: Membership -> Membership, node {
                /// Echoed.
                suspect: NodeId,
            }
        }
    };
}
