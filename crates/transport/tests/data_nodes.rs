//! Connections between data nodes: two transport "nodes" in one process on
//! loopback connect (the lower id dials), tell their membership, and carry
//! internal signals both ways over the one connection of the pair; a data
//! node's old incarnation, a misbehaving data-node peer and a dial to a node
//! that is not up yet are handled without harm.

mod common;

use admission::{ClusterSecret, LinkRole, LinkStatement};
use common::{envelope, listen, test_secret, Client, TestNode};
use kernel::stats::ThreadStats;
use signal::attr::KeyHash;
use signal::signals::*;
use signal::{BlockKind, BlockRef, Envelope, Gci, NodeId, Signal, TransactionId};
use std::time::Duration;
use transport::recv::DataNodePeer;

const SECTIONS: [u32; 6] = [256, 64, 16, 16, 16, 4];

/// A data node that is configured but never reached (nothing listens on
/// port 1 of loopback).
fn unreachable(node: u16) -> DataNodePeer {
    DataNodePeer {
        node: NodeId(node),
        address: "127.0.0.1:1".parse().expect("address"),
    }
}

fn at(node: u16, kind: BlockKind, instance: u16) -> BlockRef {
    BlockRef::new(NodeId(node), kind, instance)
}

/// The next signal on `node` must be `NodeConnectedRep` for `peer` of
/// `incarnation`, from and to its own membership.
fn expect_connected(node: &mut TestNode, peer: u16, incarnation: u32) {
    let membership = at(node.node.0, BlockKind::Membership, 0);
    let seen = node.next_signal();
    assert_eq!(seen.to, membership, "{seen:?}");
    assert_eq!(seen.from, membership, "{seen:?}");
    match seen.signal {
        Signal::NodeConnectedRep(report) => assert_eq!(
            report,
            NodeConnectedRep {
                node: NodeId(peer),
                incarnation
            }
        ),
        other => panic!("expected NodeConnectedRep, got {other:?}"),
    }
}

/// The next signal on `node` must be `NodeLinkFailedRep` for `peer` of
/// `incarnation`, from and to its own membership.
fn expect_link_failed(node: &mut TestNode, peer: u16, incarnation: u32) {
    let membership = at(node.node.0, BlockKind::Membership, 0);
    let seen = node.next_signal();
    assert_eq!((seen.from, seen.to), (membership, membership), "{seen:?}");
    match seen.signal {
        Signal::NodeLinkFailedRep(report) => assert_eq!(
            report,
            NodeLinkFailedRep {
                node: NodeId(peer),
                incarnation
            }
        ),
        other => panic!("expected NodeLinkFailedRep, got {other:?}"),
    }
}

/// Waits a little and checks that no signal reached `node`'s blocks.
fn expect_quiet(node: &mut TestNode) {
    std::thread::sleep(Duration::from_millis(50));
    if let Some(seen) = node.try_next_signal() {
        panic!("unexpected signal {seen:?}");
    }
}

fn lqh_key_req(node: &TestNode) -> LqhKeyReq {
    LqhKeyReq {
        tc: at(1, BlockKind::Tc, 0),
        tc_op: 7,
        chain: ReplicaChain::new(&[NodeId(2), NodeId(1)]),
        position: 0,
        row_id: u32::MAX,
        previous_op: u32::MAX,
        transaction_id: TransactionId(130 << 48 | 9),
        kind: OperationKind::Insert,
        lock: LockMode::Exclusive,
        table_id: 3,
        partition: 1,
        hash: KeyHash(0x1234_5678_9abc_def0),
        key: node.pool.copy_from(b"key").expect("room"),
        attr: Some(node.pool.copy_from(b"row image").expect("room")),
        no_wait: false,
    }
}

/// A data node's signals that the section pool cannot take wait for
/// sections (blocks free them), never refused: they are part of protocols
/// (a replica's prepare, a GCP round) that must not lose a step. Nothing is
/// lost or reordered.
#[test]
fn a_data_nodes_signals_wait_for_sections_without_being_lost() {
    signals_wait_for_sections(false);
}

/// The same with node 2's receive and send loops run by the thread that
/// consumes its blocks' signals (`network_on_ldm`): the frame waits, held,
/// while the loop returns, since the sections it needs are freed only by
/// that thread. Waiting inside the loop would hang this test for ever, so a
/// watchdog ends the process instead.
#[test]
fn on_the_blocks_thread_a_data_nodes_signals_wait_for_sections_without_waiting_for_the_thread() {
    let finished = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watched = finished.clone();
    std::thread::spawn(move || {
        std::thread::sleep(common::PATIENCE * 2);
        if !watched.load(std::sync::atomic::Ordering::Relaxed) {
            eprintln!("the receive loop beside the blocks waited for them: hung");
            std::process::abort();
        }
    });
    signals_wait_for_sections(true);
    finished.store(true, std::sync::atomic::Ordering::Relaxed);
}

fn signals_wait_for_sections(beside_blocks: bool) {
    let (listener_1, listener_2) = (listen(), listen());
    let peers = vec![
        DataNodePeer {
            node: NodeId(1),
            address: listener_1.local_addr().expect("address"),
        },
        DataNodePeer {
            node: NodeId(2),
            address: listener_2.local_addr().expect("address"),
        },
    ];
    let mut node_1 = TestNode::start_data_node(NodeId(1), 11, listener_1, peers.clone(), SECTIONS);
    // Two small sections: one LqhKeyReq (key and attr) at a time.
    let small = [2, 1, 1, 1, 1, 1];
    let mut node_2 = TestNode::start_with(NodeId(2), 22, listener_2, peers, small, beside_blocks);
    // Node 2's loops run only when the test looks at it: node 1 dials it,
    // so both must be looked at until they are connected.
    let mut connected = (false, false);
    let deadline = std::time::Instant::now() + common::PATIENCE;
    while connected != (true, true) {
        assert!(
            std::time::Instant::now() < deadline,
            "the nodes never connected"
        );
        if !connected.0 {
            if let Some(seen) = node_1.try_next_signal() {
                connected.0 = is_connected(&seen, 1, 2, 22);
            }
        }
        if !connected.1 {
            if let Some(seen) = node_2.try_next_signal() {
                connected.1 = is_connected(&seen, 2, 1, 11);
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    node_1.wait_until("node 2 registered on node 1", |node| {
        node.registry.connected_nodes() == vec![NodeId(2)]
    });
    let requests: Vec<Envelope> = (0..4)
        .map(|tc_op| {
            envelope(
                at(1, BlockKind::Tc, 0),
                at(2, BlockKind::Ldm, 0),
                LqhKeyReq {
                    tc_op,
                    ..lqh_key_req(&node_1)
                },
            )
        })
        .collect();
    node_1.reply(requests);
    for tc_op in 0..4 {
        let seen = node_2.next_signal();
        let Signal::LqhKeyReq(request) = seen.signal else {
            panic!("expected LqhKeyReq, got {seen:?}");
        };
        assert_eq!(request.tc_op, tc_op, "signals keep their order");
        // Held until the next is taken: the pool has room for one.
        for _ in 0..20 {
            std::thread::sleep(Duration::from_millis(1));
            assert!(
                node_2.try_next_signal().is_none(),
                "a section appeared from an exhausted pool"
            );
        }
        drop(request);
    }
    node_2.wait_until("node 1 registered on node 2", |node| {
        node.registry.connected_nodes() == vec![NodeId(1)]
    });
}

/// Whether `seen` is node `node`'s NodeConnectedRep for `peer` of
/// `incarnation`.
fn is_connected(seen: &Envelope, node: u16, peer: u16, incarnation: u32) -> bool {
    let membership = at(node, BlockKind::Membership, 0);
    assert_eq!((seen.from, seen.to), (membership, membership), "{seen:?}");
    match &seen.signal {
        Signal::NodeConnectedRep(rep) => {
            assert_eq!((rep.node, rep.incarnation), (NodeId(peer), incarnation));
            true
        }
        other => panic!("expected NodeConnectedRep, got {other:?}"),
    }
}

#[test]
fn two_data_nodes_connect_and_exchange_internal_signals() {
    let (listener_1, listener_2) = (listen(), listen());
    let address_1 = listener_1.local_addr().expect("address");
    let address_2 = listener_2.local_addr().expect("address");
    let peers = vec![
        DataNodePeer {
            node: NodeId(1),
            address: address_1,
        },
        DataNodePeer {
            node: NodeId(2),
            address: address_2,
        },
    ];
    let mut node_1 = TestNode::start_data_node(NodeId(1), 11, listener_1, peers.clone(), SECTIONS);
    let mut node_2 = TestNode::start_data_node(NodeId(2), 22, listener_2, peers, SECTIONS);
    expect_connected(&mut node_1, 2, 22);
    expect_connected(&mut node_2, 1, 11);
    node_1.wait_until("node 2 registered on node 1", |node| {
        node.registry.connected_nodes() == vec![NodeId(2)]
    });
    node_2.wait_until("node 1 registered on node 2", |node| {
        node.registry.connected_nodes() == vec![NodeId(1)]
    });

    // tc on node 1 -> ldm on node 2 (the dialer's first signal frame
    // follows its hello).
    let request = lqh_key_req(&node_1);
    node_1.reply([envelope(
        at(1, BlockKind::Tc, 0),
        at(2, BlockKind::Ldm, 0),
        request,
    )]);
    let seen = node_2.next_signal();
    assert_eq!(seen.from, at(1, BlockKind::Tc, 0));
    assert_eq!(seen.to, at(2, BlockKind::Ldm, 0));
    let Signal::LqhKeyReq(received) = seen.signal else {
        panic!("expected LqhKeyReq, got {seen:?}");
    };
    let expected = lqh_key_req(&node_1);
    assert_eq!(
        format!("{received:?}"),
        format!("{expected:?}"),
        "every field arrives"
    );

    // ldm on node 2 -> tc on node 1, on the same connection (the acceptor's
    // first signal frame follows its hello too).
    node_2.reply([envelope(
        at(2, BlockKind::Ldm, 0),
        at(1, BlockKind::Tc, 0),
        LqhKeyConf {
            tc_op: 7,
            ldm_op: 40,
            data: None,
            released: false,
        },
    )]);
    let seen = node_1.next_signal();
    assert_eq!(seen.from, at(2, BlockKind::Ldm, 0));
    assert_eq!(seen.to, at(1, BlockKind::Tc, 0));
    let Signal::LqhKeyConf(conf) = seen.signal else {
        panic!("expected LqhKeyConf, got {seen:?}");
    };
    assert_eq!((conf.tc_op, conf.ldm_op, conf.released), (7, 40, false));

    // Many signals per write: a burst goes out in few frames, in order.
    let burst = 3000u32;
    let frames_before = ThreadStats::get(&node_2.recv_stats.frames);
    node_1.reply((0..burst).map(|tc_op| {
        envelope(
            at(1, BlockKind::Tc, 0),
            at(2, BlockKind::Ldm, 0),
            CommitReq {
                ldm_op: tc_op,
                tc_op,
                transaction_id: TransactionId(1),
                gci: Gci::from_parts(1, 0),
            },
        )
    }));
    for expected in 0..burst {
        let seen = node_2.next_signal();
        let Signal::CommitReq(commit) = seen.signal else {
            panic!("expected CommitReq, got {seen:?}");
        };
        assert_eq!(commit.tc_op, expected, "signals keep their order");
    }
    let frames = ThreadStats::get(&node_2.recv_stats.frames) - frames_before;
    assert!(
        u64::from(burst) / frames >= 10,
        "{frames} frames for {burst} signals: not batched"
    );
    assert_eq!(node_1.registry.connected_nodes(), vec![NodeId(2)]);
    assert_eq!(node_2.registry.connected_nodes(), vec![NodeId(1)]);

    // Node 2 stops: node 1 unregisters and cuts it, and tells membership
    // (which takes it for failed).
    drop(node_2);
    expect_link_failed(&mut node_1, 2, 22);
    assert!(!node_1.registry.is_connected(NodeId(2)));
    expect_quiet(&mut node_1);
}

#[test]
fn the_dialer_retries_until_the_other_node_is_up() {
    // Reserve a port, then free it: node 1 finds nobody there at first.
    let reserved = listen();
    let address_2 = reserved.local_addr().expect("address");
    drop(reserved);
    let listener_1 = listen();
    let address_1 = listener_1.local_addr().expect("address");
    let peers = vec![
        DataNodePeer {
            node: NodeId(1),
            address: address_1,
        },
        DataNodePeer {
            node: NodeId(2),
            address: address_2,
        },
    ];
    let mut node_1 = TestNode::start_data_node(NodeId(1), 3, listener_1, peers.clone(), SECTIONS);
    // Several refused dials.
    std::thread::sleep(Duration::from_millis(350));
    expect_quiet(&mut node_1);
    let listener_2 = std::net::TcpListener::bind(address_2).expect("the port is free again");
    let mut node_2 = TestNode::start_data_node(NodeId(2), 4, listener_2, peers, SECTIONS);
    expect_connected(&mut node_1, 2, 4);
    expect_connected(&mut node_2, 1, 3);
}

#[test]
fn a_broken_data_node_link_is_reported_once_and_never_made_again() {
    // Node 4 accepts nodes 1, 2 and 3 (lower ids) and dials node 5 (never
    // up).
    let mut node_4 = TestNode::start_data_node(
        NodeId(4),
        44,
        listen(),
        vec![
            unreachable(1),
            unreachable(2),
            unreachable(3),
            unreachable(5),
        ],
        SECTIONS,
    );

    // Node 1, incarnation 5: the handshake both ways, membership told.
    let mut client = Client::connect_as(node_4.address, 1, 5);
    let hello = client.link_handshake(NodeId(4), &test_secret());
    assert_eq!(
        (hello.sender, hello.incarnation, hello.sequence),
        (NodeId(4), 44, 0)
    );
    expect_connected(&mut node_4, 1, 5);
    node_4.wait_until("node 1 registered", |node| {
        node.registry.is_connected(NodeId(1))
    });
    // Signals both ways; node 4's frames continue after its hello.
    client.send(&[envelope(
        at(1, BlockKind::Ldm, 0),
        at(4, BlockKind::Tc, 0),
        CommitConf { tc_op: 3 },
    )]);
    let seen = node_4.next_signal();
    assert_eq!(seen.from, at(1, BlockKind::Ldm, 0));
    assert!(matches!(
        seen.signal,
        Signal::CommitConf(CommitConf { tc_op: 3 })
    ));
    node_4.reply([envelope(
        at(4, BlockKind::Dih, 0),
        at(1, BlockKind::Tc, 0),
        GcpPrepare {
            new_gci: Gci::from_parts(2, 0),
        },
    )]);
    let (header, reply) = client.receive();
    assert_eq!(header.sequence, 1, "the first frame after the hello");
    assert!(matches!(reply.signal, Signal::GcpPrepare(_)), "{reply:?}");

    // The connection drops: unregistered, cut, membership told once.
    drop(client);
    expect_link_failed(&mut node_4, 1, 5);
    assert!(!node_4.registry.is_connected(NodeId(1)));
    assert!(node_4.registry.is_cut(NodeId(1)));

    // Node 1 is never admitted again by this process: not the same
    // incarnation (the signals lost in between would go unnoticed), not an
    // older one, and not a newer one (node restart is not built).
    for incarnation in [5, 4, 6] {
        let mut again = Client::connect_as(node_4.address, 1, incarnation);
        again.send_link_hello(NodeId(4));
        again.expect_closed();
    }
    expect_quiet(&mut node_4);
    assert!(!node_4.registry.is_connected(NodeId(1)));

    // Node 2: a data-node signal from an API block closes its link, which
    // is a failure like any other.
    let mut from_api_block = Client::connect_as(node_4.address, 2, 7);
    from_api_block.link_handshake(NodeId(4), &test_secret());
    expect_connected(&mut node_4, 2, 7);
    from_api_block.send(&[envelope(
        at(2, BlockKind::Api, 0),
        at(4, BlockKind::Tc, 0),
        CommitConf { tc_op: 1 },
    )]);
    from_api_block.expect_closed();
    expect_link_failed(&mut node_4, 2, 7);

    // Node 3: a signal to a block that does not exist closes it.
    let mut to_no_block = Client::connect_as(node_4.address, 3, 6);
    to_no_block.link_handshake(NodeId(4), &test_secret());
    expect_connected(&mut node_4, 3, 6);
    to_no_block.send(&[envelope(
        at(3, BlockKind::Ldm, 0),
        at(4, BlockKind::Tc, 4),
        CommitConf { tc_op: 1 },
    )]);
    to_no_block.expect_closed();
    expect_link_failed(&mut node_4, 3, 6);

    // Node 5 has the higher id: node 4 dials it, so a connection from it
    // is refused.
    let mut wrong_way = Client::connect_as(node_4.address, 5, 1);
    wrong_way.send_link_hello(NodeId(4));
    wrong_way.expect_closed();
    expect_quiet(&mut node_4);

    // API nodes are served as before, and still may not send internal
    // signals.
    let mut api_client = Client::connect(node_4.address, 130);
    api_client.send(&[envelope(
        at(130, BlockKind::Api, 0),
        at(4, BlockKind::Membership, 0),
        ApiRegReq {
            protocol_version: 1,
            token: common::token(130),
        },
    )]);
    let seen = node_4.next_signal();
    assert!(matches!(seen.signal, Signal::ApiRegReq(_)), "{seen:?}");
    api_client.send(&[envelope(
        at(130, BlockKind::Api, 0),
        at(4, BlockKind::Tc, 0),
        CommitConf { tc_op: 1 },
    )]);
    api_client.expect_closed();
    // tc, dict and membership hear of it.
    let failures: Vec<Envelope> = (0..3).map(|_| node_4.next_signal()).collect();
    assert!(
        failures.iter().all(|seen| matches!(
            seen.signal,
            Signal::ApiFailRep(ApiFailRep { node: NodeId(130) })
        )),
        "{failures:?}"
    );
}

/// A data node cut by membership (`ConnectionRegistry::cut`, for a node
/// taken for failed on its heartbeats): its connection is shut down, the
/// peer sees the close, membership is not told again, and it is not
/// admitted again.
#[test]
fn a_data_node_cut_by_membership_is_closed_and_refused() {
    let mut node_2 =
        TestNode::start_data_node(NodeId(2), 22, listen(), vec![unreachable(1)], SECTIONS);
    let mut client = Client::connect_as(node_2.address, 1, 5);
    client.link_handshake(NodeId(2), &test_secret());
    expect_connected(&mut node_2, 1, 5);
    node_2.wait_until("node 1 registered", |node| {
        node.registry.is_connected(NodeId(1))
    });
    assert!(node_2.registry.cut(NodeId(1)));
    client.expect_closed();
    node_2.wait_until("node 1 unregistered", |node| {
        !node.registry.is_connected(NodeId(1))
    });
    expect_quiet(&mut node_2);
    let mut again = Client::connect_as(node_2.address, 1, 6);
    again.send_link_hello(NodeId(2));
    again.expect_closed();
    expect_quiet(&mut node_2);
}

/// Admission between data nodes (docs/wire-format.md §7): a process without
/// the cluster secret cannot take a data node's id, whether it dials
/// (claiming a node that dials this one) or answers a dial (at a data
/// node's address); the old bare hello is not enough, and one that starts
/// the handshake and never finishes loses its slot. The node's membership
/// hears of none of them, and the real peer is admitted after them all.
#[test]
fn a_peer_without_the_cluster_secret_cannot_claim_a_data_node_id() {
    let wrong_secret =
        ClusterSecret::from_bytes(b"another cluster's secret, 32 bytes and more").expect("long");
    let fake_3 = listen();
    let node_3 = DataNodePeer {
        node: NodeId(3),
        address: fake_3.local_addr().expect("address"),
    };
    let mut node_2 = TestNode::start_data_node(
        NodeId(2),
        22,
        listen(),
        vec![unreachable(1), node_3],
        SECTIONS,
    );
    let membership = |node: u16| at(node, BlockKind::Membership, 0);

    // Claims node 1 with another secret: answered, then closed on its proof.
    let mut impostor = Client::connect_as(node_2.address, 1, 5);
    let challenge = impostor.send_link_hello(NodeId(2));
    let (header, answer) = impostor.receive();
    let Signal::LinkHelloConf(answer) = answer.signal else {
        panic!("expected LinkHelloConf, got {answer:?}");
    };
    let proof = wrong_secret.link_proof(&LinkStatement {
        role: LinkRole::Dialer,
        prover: NodeId(1),
        verifier: NodeId(2),
        prover_incarnation: 5,
        verifier_incarnation: header.incarnation,
        prover_challenge: challenge,
        verifier_challenge: answer.challenge,
    });
    impostor.send(&[envelope(
        membership(1),
        membership(2),
        LinkProofRep { proof },
    )]);
    impostor.expect_closed();
    expect_quiet(&mut node_2);
    assert!(!node_2.registry.is_connected(NodeId(1)));

    // The hello of old (a frame of no signals) is no longer enough, and
    // neither are signals in place of the handshake.
    let mut bare = Client::connect_as(node_2.address, 1, 5);
    bare.send(&[]);
    bare.expect_closed();
    let mut eager = Client::connect_as(node_2.address, 1, 5);
    eager.send(&[envelope(
        at(1, BlockKind::Ldm, 0),
        at(2, BlockKind::Tc, 0),
        CommitConf { tc_op: 1 },
    )]);
    eager.expect_closed();
    // Nor an API registration under a data node's id, token or not.
    let mut posing = Client::connect_as(node_2.address, 1, 5);
    posing.send(&[envelope(
        at(1, BlockKind::Api, 0),
        membership(2),
        ApiRegReq {
            protocol_version: 1,
            token: common::test_secret().api_token(NodeId(1), 1),
        },
    )]);
    posing.expect_closed();
    expect_quiet(&mut node_2);

    // A hello that is never followed by a proof: closed by the identify
    // timeout.
    let mut stalled = Client::connect_as(node_2.address, 1, 5);
    stalled.send_link_hello(NodeId(2));
    let _hello = stalled.receive();
    stalled.expect_closed();
    expect_quiet(&mut node_2);

    // Dialed: whatever answers at node 3's address must prove the secret.
    let (stream, _) = fake_3.accept().expect("node 2 dials node 3");
    let mut answerer = Client::on_stream(stream, 3, 1);
    let (header, hello) = answerer.receive();
    let Signal::LinkHelloReq(hello) = hello.signal else {
        panic!("expected LinkHelloReq, got {hello:?}");
    };
    let challenge = [7u8; 16];
    let proof = wrong_secret.link_proof(&LinkStatement {
        role: LinkRole::Acceptor,
        prover: NodeId(3),
        verifier: NodeId(2),
        prover_incarnation: 1,
        verifier_incarnation: header.incarnation,
        prover_challenge: challenge,
        verifier_challenge: hello.challenge,
    });
    answerer.send(&[envelope(
        membership(3),
        membership(2),
        LinkHelloConf { challenge, proof },
    )]);
    answerer.expect_closed();
    expect_quiet(&mut node_2);
    assert!(!node_2.registry.is_connected(NodeId(3)));
    drop(fake_3);

    // The real node 1 is admitted after all of them.
    let mut real = Client::connect_as(node_2.address, 1, 5);
    real.link_handshake(NodeId(2), &test_secret());
    expect_connected(&mut node_2, 1, 5);
    assert!(node_2.registry.is_connected(NodeId(1)));
}
