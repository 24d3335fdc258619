//! The data node's receive and send threads against real TCP clients: API
//! requests reach the right blocks and replies reach the client; every rule
//! a peer can break closes that peer's connection only, and a registered
//! peer's close is reported to tc and dict.

mod common;

use common::{api, block, envelope, Client, TestNode, INCARNATION, OWN_NODE};
use signal::signals::*;
use signal::{BlockKind, Envelope, ErrorCode, Gci, NodeId, Signal, TransactionId};
use std::time::Duration;

const SECTIONS: [u32; 6] = [256, 64, 16, 16, 16, 4];

fn registration(node: u16) -> Envelope {
    envelope(
        api(node),
        block(BlockKind::Membership, 0),
        ApiRegReq {
            protocol_version: 1,
            token: common::token(node),
        },
    )
}

fn commit(node: u16, transaction: u64) -> Envelope {
    envelope(
        api(node),
        block(BlockKind::Tc, 0),
        TcCommitReq {
            transaction_id: TransactionId(transaction),
        },
    )
}

/// Registers `client` and checks membership got the request.
fn register(node: &mut TestNode, client: &mut Client) {
    let number = client.node.0;
    client.send(&[registration(number)]);
    let seen = node.next_signal();
    assert_eq!(seen.from, api(number));
    assert!(matches!(seen.signal, Signal::ApiRegReq(_)), "{seen:?}");
}

/// The next signal must be `TcCommitReq` of `transaction` from `node`.
fn expect_commit(node: &mut TestNode, from: u16, transaction: u64) {
    let seen = node.next_signal();
    assert_eq!(seen.from, api(from), "{seen:?}");
    match seen.signal {
        Signal::TcCommitReq(request) => {
            assert_eq!(request.transaction_id, TransactionId(transaction))
        }
        other => panic!("expected TcCommitReq, got {other:?}"),
    }
}

/// The next three signals must be `ApiFailRep` for `failed` to tc 0, dict
/// and membership.
fn expect_api_failure(node: &mut TestNode, failed: u16) {
    let mut receivers = Vec::new();
    for _ in 0..3 {
        let seen = node.next_signal();
        assert_eq!(seen.from, block(BlockKind::Membership, 0));
        assert_eq!(
            seen.signal.name(),
            "ApiFailRep",
            "expected ApiFailRep, got {seen:?}"
        );
        let Signal::ApiFailRep(report) = seen.signal else {
            unreachable!("checked by name");
        };
        assert_eq!(report.node, NodeId(failed));
        receivers.push(seen.to);
    }
    receivers.sort();
    let mut expected = vec![
        block(BlockKind::Tc, 0),
        block(BlockKind::Dict, 0),
        block(BlockKind::Membership, 0),
    ];
    expected.sort();
    assert_eq!(receivers, expected);
}

#[test]
fn api_requests_reach_their_blocks_and_replies_reach_the_client() {
    let mut node = TestNode::start(SECTIONS);
    let mut client = Client::connect(node.address, 130);
    client.send(&[registration(130)]);
    let key = node
        .pool
        .copy_from(b"\x00\x00\x04\x00\x2a\x00\x00\x00")
        .expect("room");
    let request = envelope(
        api(130),
        block(BlockKind::Tc, 0),
        TcKeyReq {
            transaction_id: TransactionId(130 << 48 | 1),
            client_op: 9,
            flags: tc_key_flags::START | tc_key_flags::COMMIT,
            kind: OperationKind::Read,
            lock: LockMode::CommittedRead,
            table_id: 3,
            table_version: 2,
            key: key.pool().copy_from(key.as_slice()).expect("room"),
            attr: None,
        },
    );
    // Two signals in one frame.
    client.send(&[request, commit(130, 5)]);

    let seen = node.next_signal();
    assert_eq!(seen.from, api(130));
    assert_eq!(seen.to, block(BlockKind::Membership, 0));
    assert!(
        matches!(
            seen.signal,
            Signal::ApiRegReq(ApiRegReq {
                protocol_version: 1,
                ..
            })
        ),
        "{seen:?}"
    );
    let seen = node.next_signal();
    assert_eq!(seen.from, api(130));
    assert_eq!(seen.to, block(BlockKind::Tc, 0));
    match &seen.signal {
        Signal::TcKeyReq(request) => {
            assert_eq!(request.client_op, 9);
            assert_eq!(request.table_id, 3);
            assert_eq!(request.key, key);
            assert!(request.attr.is_none());
        }
        other => panic!("expected TcKeyReq, got {other:?}"),
    }
    expect_commit(&mut node, 130, 5);
    assert!(node.registry.is_connected(NodeId(130)));

    let row = node.pool.copy_from(b"row bytes").expect("room");
    node.reply([
        envelope(
            block(BlockKind::Membership, 0),
            api(130),
            ApiRegConf {
                started: true,
                tc_instances: 1,
                heartbeat_interval_ms: 250,
                api_heartbeat_missed: 8,
            },
        ),
        envelope(
            block(BlockKind::Tc, 0),
            api(130),
            TransIdAi {
                transaction_id: TransactionId(130 << 48 | 1),
                client_op: 9,
                data: row,
            },
        ),
        envelope(
            block(BlockKind::Tc, 0),
            api(130),
            TcKeyConf {
                transaction_id: TransactionId(130 << 48 | 1),
                operations: 1,
                committed: true,
                gci: Gci::from_parts(4, 1),
                map_version: 0,
                row: None,
            },
        ),
    ]);
    let (header, registered) = client.receive();
    assert_eq!(header.sender, OWN_NODE);
    assert_eq!(header.incarnation, INCARNATION);
    assert_eq!(header.sequence, 0, "first frame of the connection");
    assert_eq!(registered.from, block(BlockKind::Membership, 0));
    assert_eq!(registered.to, api(130));
    assert!(matches!(
        registered.signal,
        Signal::ApiRegConf(ApiRegConf {
            started: true,
            tc_instances: 1,
            ..
        })
    ));
    let (_, data) = client.receive();
    match &data.signal {
        Signal::TransIdAi(reply) => assert_eq!(reply.data.as_slice(), b"row bytes"),
        other => panic!("expected TransIdAi, got {other:?}"),
    }
    let (_, conf) = client.receive();
    assert_eq!(conf.from, block(BlockKind::Tc, 0));
    assert!(matches!(
        conf.signal,
        Signal::TcKeyConf(TcKeyConf {
            committed: true,
            ..
        })
    ));

    // Later replies come in later frames with rising sequence numbers (the
    // client's assembler checks the order).
    node.reply([envelope(
        block(BlockKind::Tc, 0),
        api(130),
        TcRollbackConf {
            transaction_id: TransactionId(5),
        },
    )]);
    let (header, _) = client.receive();
    assert!(header.sequence >= 1);

    // A counter may be bumped just after the bytes it counts left, so wait.
    node.wait_until("transport counters match the traffic", counters_match);
}

fn counters_match(node: &TestNode) -> bool {
    use kernel::stats::ThreadStats;
    let recv = &node.recv_stats;
    let send = &node.send_stats;
    ThreadStats::get(&recv.frames) == 2
        && ThreadStats::get(&recv.signals) == 3
        && ThreadStats::get(&recv.bytes) > 0
        && ThreadStats::get(&recv.syscalls) >= 1
        && ThreadStats::get(&send.signals) == 4
        && ThreadStats::get(&send.frames) >= 2
        && ThreadStats::get(&send.bytes) > 0
        && ThreadStats::get(&send.syscalls) >= 2
}

#[test]
fn garbage_closes_its_connection_and_no_other() {
    let mut node = TestNode::start(SECTIONS);
    let mut good = Client::connect(node.address, 131);
    register(&mut node, &mut good);

    let mut bad = Client::connect(node.address, 132);
    bad.send_bytes(b"GET / HTTP/1.1\r\nHost: tessera\r\n\r\nand some more bytes to fill a header");
    bad.expect_closed();

    // A frame whose checksum does not match closes too.
    let mut corrupt = Client::connect(node.address, 133);
    let mut frame = corrupt.frame(&[registration(133)]);
    let last = frame.len() - 1;
    frame[last] ^= 0x55;
    corrupt.send_bytes(&frame);
    corrupt.expect_closed();

    // A frame that skips a sequence number closes too (after registering).
    let mut skipping = Client::connect(node.address, 134);
    register(&mut node, &mut skipping);
    let _skipped = skipping.frame(&[commit(134, 1)]);
    skipping.send(&[commit(134, 2)]);
    skipping.expect_closed();
    expect_api_failure(&mut node, 134);

    // Neither unregistered connection produced a signal: the next one the
    // blocks see is the good client's.
    good.send(&[commit(131, 77)]);
    expect_commit(&mut node, 131, 77);
    node.reply([envelope(
        block(BlockKind::Tc, 0),
        api(131),
        TcRollbackConf {
            transaction_id: TransactionId(77),
        },
    )]);
    let (_, reply) = good.receive();
    assert!(matches!(reply.signal, Signal::TcRollbackConf(_)));
}

/// One frame carrying a signal record the encoder would never produce.
fn raw_signal_frame(
    client: &mut Client,
    number: u16,
    to: signal::BlockRef,
    body: &[u8],
) -> Vec<u8> {
    let mut record = Vec::new();
    record.extend_from_slice(&number.to_le_bytes());
    record.push(to.kind as u8);
    record.push(BlockKind::Api as u8);
    record.extend_from_slice(&to.instance.to_le_bytes());
    record.extend_from_slice(&0u16.to_le_bytes());
    record.extend_from_slice(&(body.len() as u32).to_le_bytes());
    record.extend_from_slice(body);
    client.frame_with_records(&record, 1)
}

#[test]
fn signals_an_api_node_may_not_send_close_the_connection() {
    let mut node = TestNode::start(SECTIONS);
    // (what is wrong, the frame, signals of the frame valid before the fault:
    // those are delivered, and the failure report follows them).
    type Case = (&'static str, Box<dyn Fn(&mut Client) -> Vec<u8>>, u64);
    let cases: Vec<Case> = vec![
        (
            "a reply signal (TcKeyConf) from the client",
            Box::new(|client| {
                let number = client.node.0;
                client.frame(&[envelope(
                    api(number),
                    block(BlockKind::Tc, 0),
                    TcKeyConf {
                        transaction_id: TransactionId(1),
                        operations: 1,
                        committed: false,
                        gci: Gci(0),
                        map_version: 0,
                        row: None,
                    },
                )])
            }),
            0,
        ),
        (
            "a sender block that is not an API block",
            Box::new(|client| {
                let number = client.node.0;
                client.frame(&[envelope(
                    signal::BlockRef::new(NodeId(number), BlockKind::Tc, 0),
                    block(BlockKind::Tc, 0),
                    TcCommitReq {
                        transaction_id: TransactionId(1),
                    },
                )])
            }),
            0,
        ),
        (
            "a tc instance that does not exist",
            Box::new(|client| {
                let number = client.node.0;
                client.frame(&[envelope(
                    api(number),
                    block(BlockKind::Tc, 5),
                    TcCommitReq {
                        transaction_id: TransactionId(1),
                    },
                )])
            }),
            0,
        ),
        (
            "a block that does not take the signal",
            Box::new(|client| {
                let number = client.node.0;
                client.frame(&[envelope(
                    api(number),
                    block(BlockKind::Dict, 0),
                    TcCommitReq {
                        transaction_id: TransactionId(1),
                    },
                )])
            }),
            0,
        ),
        (
            "an unknown signal number",
            Box::new(|client| raw_signal_frame(client, 999, block(BlockKind::Tc, 0), &[])),
            0,
        ),
        (
            "a TcKeyReq with an invalid lock mode",
            Box::new(|client| {
                let mut body = Vec::new();
                body.extend_from_slice(&1u64.to_le_bytes()); // transaction
                body.extend_from_slice(&0u32.to_le_bytes()); // client_op
                body.extend_from_slice(&[0, OperationKind::Read as u8, 9, 0]);
                body.extend_from_slice(&[0; 8]); // table id and version
                body.extend_from_slice(&0u32.to_le_bytes()); // empty key
                raw_signal_frame(client, 10, block(BlockKind::Tc, 0), &body)
            }),
            0,
        ),
        (
            "a signal count larger than the frame holds",
            Box::new(|client| {
                let number = client.node.0;
                let mut record = Vec::new();
                let commit = commit(number, 1);
                signal::codec::encode_signal(&mut record, &commit).expect("wire signal");
                client.frame_with_records(&record, 2)
            }),
            1,
        ),
    ];
    for (index, (case, make, delivered)) in cases.iter().enumerate() {
        let number = 140 + index as u16;
        let mut client = Client::connect(node.address, number);
        register(&mut node, &mut client);
        let frame = make(&mut client);
        client.send_bytes(&frame);
        client.expect_closed();
        for _ in 0..*delivered {
            expect_commit(&mut node, number, 1);
        }
        expect_api_failure(&mut node, number);
        assert!(
            !node.registry.is_connected(NodeId(number)),
            "{case}: still registered"
        );
    }
    // The thread is still up and serving.
    let mut client = Client::connect(node.address, 150);
    register(&mut node, &mut client);
}

#[test]
fn a_disconnect_is_reported_to_tc_and_dict_and_the_node_may_reconnect() {
    let mut node = TestNode::start(SECTIONS);
    let mut client = Client::connect(node.address, 160);
    register(&mut node, &mut client);
    assert!(node.registry.is_connected(NodeId(160)));
    drop(client);
    expect_api_failure(&mut node, 160);
    node.wait_until("node 160 unregistered", |node| {
        !node.registry.is_connected(NodeId(160))
    });

    // A new connection for the same node starts again at sequence 0.
    let mut again = Client::connect(node.address, 160);
    register(&mut node, &mut again);
    // Signals for a node with no connection are dropped, not fatal; the
    // one after it (same queue, so handled later) still arrives.
    node.reply([
        envelope(
            block(BlockKind::Tc, 0),
            api(250),
            TcRollbackConf {
                transaction_id: TransactionId(1),
            },
        ),
        envelope(
            block(BlockKind::Membership, 0),
            api(160),
            ApiRegConf {
                started: true,
                tc_instances: 1,
                heartbeat_interval_ms: 250,
                api_heartbeat_missed: 8,
            },
        ),
    ]);
    let (header, reply) = again.receive();
    assert_eq!(header.sequence, 0);
    assert!(matches!(reply.signal, Signal::ApiRegConf(_)), "{reply:?}");
}

#[test]
fn a_second_connection_for_a_connected_node_is_refused() {
    let mut node = TestNode::start(SECTIONS);
    let mut first = Client::connect(node.address, 170);
    register(&mut node, &mut first);

    let mut second = Client::connect(node.address, 170);
    second.send(&[registration(170)]);
    second.expect_closed();

    // A client claiming the data node's own id is refused as well.
    let mut impostor = Client::connect(node.address, OWN_NODE.0);
    impostor.send(&[registration(OWN_NODE.0)]);
    impostor.expect_closed();

    // Neither refusal reached a block or reported a failure, and the first
    // connection still works both ways.
    first.send(&[commit(170, 3)]);
    expect_commit(&mut node, 170, 3);
    assert!(node.registry.is_connected(NodeId(170)));
    node.reply([envelope(
        block(BlockKind::Tc, 0),
        api(170),
        TcRollbackConf {
            transaction_id: TransactionId(3),
        },
    )]);
    let (header, _) = first.receive();
    assert_eq!(header.sequence, 0);
}

#[test]
fn an_api_request_the_section_pool_cannot_take_is_refused_not_waited_for() {
    // Two small sections only (the reserve of a class this small is 0):
    // the third TcKeyReq finds none and, from an API node, is not waited
    // for, which would stall every other connection, but dropped and
    // reported to its tc, which aborts the transaction and answers the
    // client. Nothing is lost or reordered; with room again, requests go
    // through.
    let mut node = TestNode::start([2, 1, 1, 1, 1, 1]);
    let mut client = Client::connect(node.address, 180);
    register(&mut node, &mut client);
    let client_pool = signal::SectionPool::leak([16, 1, 1, 1, 1, 1]);
    let request = |client_op| {
        envelope(
            api(180),
            block(BlockKind::Tc, 0),
            TcKeyReq {
                transaction_id: TransactionId(1),
                client_op,
                flags: tc_key_flags::EXECUTE,
                kind: OperationKind::Read,
                lock: LockMode::Shared,
                table_id: 1,
                table_version: 1,
                key: client_pool.copy_from(b"k").expect("room"),
                attr: None,
            },
        )
    };
    let requests: Vec<Envelope> = (0..6).map(request).collect();
    client.send(&requests);
    let mut held = Vec::new();
    for client_op in 0..6 {
        let seen = node.next_signal();
        assert_eq!(seen.from, api(180));
        assert_eq!(seen.to, block(BlockKind::Tc, 0));
        match seen.signal {
            Signal::TcKeyReq(request) if client_op < 2 => {
                assert_eq!(request.client_op, client_op, "signals keep their order");
                held.push(request);
            }
            Signal::TcKeyReqDroppedRep(dropped) if client_op >= 2 => assert_eq!(
                dropped,
                TcKeyReqDroppedRep {
                    transaction_id: TransactionId(1),
                    client_op,
                    flags: tc_key_flags::EXECUTE,
                    error: ErrorCode::OutOfSignalMemory,
                }
            ),
            other => panic!("operation {client_op}: unexpected {other:?}"),
        }
    }
    held.clear();
    client.send(&[request(6)]);
    let seen = node.next_signal();
    assert!(
        matches!(&seen.signal, Signal::TcKeyReq(request) if request.client_op == 6),
        "{seen:?}"
    );
    assert!(node.registry.is_connected(NodeId(180)));
}

/// A connection that never says who it is does not keep one of the node's
/// few connection slots: it is closed after the identify timeout, and the
/// node goes on serving the others.
#[test]
fn a_connection_that_never_identifies_itself_is_closed() {
    let mut node = TestNode::start([16, 4, 1, 1, 1, 1]);
    let mut silent = std::net::TcpStream::connect(node.address).expect("connect");
    silent
        .set_read_timeout(Some(common::PATIENCE))
        .expect("read timeout");
    let mut client = Client::connect(node.address, 181);
    register(&mut node, &mut client);
    let mut byte = [0u8; 1];
    // End of stream (or a reset), not the read timeout.
    match std::io::Read::read(&mut silent, &mut byte) {
        Ok(0) => {}
        Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("the silent connection was not closed by the node: {other:?}"),
    }
    // The identified client is served on.
    client.send(&[commit(181, 3)]);
    expect_commit(&mut node, 181, 3);
    assert!(node.registry.is_connected(NodeId(181)));
}

/// Admission (docs/design/0007-groundwork.md, "Authenticated admission"):
/// a peer that claims an API node id without the token mgmd issued with it
/// is answered API_REGREF `NotAdmitted` and closed; none of its signals
/// reaches a block, and the node serves the admitted clients on.
#[test]
fn an_api_node_id_claimed_without_its_token_is_refused_and_closed() {
    let mut node = TestNode::start(SECTIONS);
    let mut good = Client::connect(node.address, 140);
    register(&mut node, &mut good);

    let registration_with = |node: u16, token: ApiToken| {
        envelope(
            api(node),
            block(BlockKind::Membership, 0),
            ApiRegReq {
                protocol_version: 1,
                token,
            },
        )
    };
    let mut forged = common::token(141);
    forged.mac[0] ^= 1;
    let newer = common::test_secret().api_token(NodeId(143), 9);
    let older = common::test_secret().api_token(NodeId(143), 8);
    // (what, claimed id, first frame)
    let cases: Vec<(&str, u16, Vec<Envelope>)> = vec![
        (
            "no token",
            141,
            vec![registration_with(141, ApiToken::NONE)],
        ),
        ("a forged token", 141, vec![registration_with(141, forged)]),
        (
            "another id's token",
            142,
            vec![registration_with(142, common::token(141))],
        ),
        (
            "the admitted client's id with another id's token",
            140,
            vec![registration_with(140, common::token(141))],
        ),
        (
            "a request before any registration",
            141,
            vec![commit(141, 1), registration_with(141, common::token(141))],
        ),
    ];
    for (what, claimed, signals) in cases {
        let mut impostor = Client::connect(node.address, claimed);
        impostor.send(&signals);
        let (_, answer) = impostor.receive();
        assert!(
            matches!(
                answer.signal,
                Signal::ApiRegRef(ApiRegRef {
                    error: ErrorCode::NotAdmitted
                })
            ),
            "{what}: {answer:?}"
        );
        impostor.expect_closed();
        // Nothing of it reached a block; the admitted client is served on.
        good.send(&[commit(140, 5)]);
        expect_commit(&mut node, 140, 5);
        assert!(node.registry.is_connected(NodeId(140)), "{what}");
        assert!(!node.registry.is_connected(NodeId(claimed)) || claimed == 140);
    }

    // A token of a newer allocation of an id retires the older ones.
    let mut holder = Client::connect(node.address, 143);
    holder.send(&[registration_with(143, newer)]);
    assert!(matches!(node.next_signal().signal, Signal::ApiRegReq(_)));
    drop(holder);
    expect_api_failure(&mut node, 143);
    let mut stale = Client::connect(node.address, 143);
    stale.send(&[registration_with(143, older)]);
    let (_, answer) = stale.receive();
    assert!(
        matches!(answer.signal, Signal::ApiRegRef(_)),
        "an older allocation's token: {answer:?}"
    );
    stale.expect_closed();
    // The same allocation may reconnect.
    let mut again = Client::connect(node.address, 143);
    again.send(&[registration_with(143, newer)]);
    assert!(matches!(node.next_signal().signal, Signal::ApiRegReq(_)));
    assert!(node.registry.is_connected(NodeId(143)));
}

/// Before it is admitted, a connection may send only small frames (an
/// unknown peer cannot make the node buffer megabytes): a first frame of
/// a valid registration followed by hundreds of requests is refused whole.
#[test]
fn a_large_first_frame_closes_the_connection() {
    let mut node = TestNode::start(SECTIONS);
    let mut good = Client::connect(node.address, 150);
    register(&mut node, &mut good);
    let mut large = Client::connect(node.address, 151);
    let mut signals = vec![registration(151)];
    signals.extend((0..600).map(|transaction| commit(151, transaction)));
    let frame = large.frame(&signals);
    assert!(frame.len() > 8192, "a frame of {} bytes", frame.len());
    large.send_bytes(&frame);
    large.expect_closed();
    // Nothing of it reached a block; the other client is served on.
    good.send(&[commit(150, 1)]);
    expect_commit(&mut node, 150, 1);
    assert!(!node.registry.is_connected(NodeId(151)));
}

#[test]
fn a_slow_reader_gets_every_byte_in_order() {
    let mut node = TestNode::start([256, 64, 16, 16, 64, 4]);
    let mut client = Client::connect(node.address, 190);
    register(&mut node, &mut client);
    // More than loopback socket buffers hold, so writes would block and the
    // send thread must wait for WRITABLE.
    let rows = 300u32;
    let payload = vec![0xA5u8; 30_000];
    let pool = node.pool;
    let mut sent = 0;
    while sent < rows {
        let Some(mut data) = pool.copy_from(&payload) else {
            // The send thread frees sections as it encodes them.
            std::thread::sleep(Duration::from_millis(1));
            continue;
        };
        data.as_mut_slice()[..4].copy_from_slice(&sent.to_le_bytes());
        node.reply([envelope(
            block(BlockKind::Tc, 0),
            api(190),
            TransIdAi {
                transaction_id: TransactionId(1),
                client_op: sent,
                data,
            },
        )]);
        sent += 1;
    }
    std::thread::sleep(Duration::from_millis(50));
    for expected in 0..rows {
        let (_, reply) = client.receive();
        let Signal::TransIdAi(row) = reply.signal else {
            panic!("expected TransIdAi, got {reply:?}");
        };
        assert_eq!(row.client_op, expected);
        assert_eq!(row.data.len(), payload.len());
        assert_eq!(&row.data.as_slice()[..4], &expected.to_le_bytes());
    }
    assert!(node.registry.is_connected(NodeId(190)));
}

#[test]
fn many_small_replies_are_batched_into_frames() {
    let mut node = TestNode::start(SECTIONS);
    let mut client = Client::connect(node.address, 200);
    register(&mut node, &mut client);
    let replies = 5000u64;
    node.reply((0..replies).map(|transaction| {
        envelope(
            block(BlockKind::Tc, 0),
            api(200),
            TcRollbackConf {
                transaction_id: TransactionId(transaction),
            },
        )
    }));
    for expected in 0..replies {
        let (_, reply) = client.receive();
        let Signal::TcRollbackConf(conf) = reply.signal else {
            panic!("expected TcRollbackConf, got {reply:?}");
        };
        assert_eq!(conf.transaction_id, TransactionId(expected));
    }
    let frames = kernel::stats::ThreadStats::get(&node.send_stats.frames);
    assert!(
        frames < replies / 10,
        "{frames} frames for {replies} signals: not batched"
    );
}

#[test]
fn a_partition_scan_request_goes_to_an_ldm_and_nowhere_else() {
    let mut node = TestNode::start(SECTIONS);
    let mut client = Client::connect(node.address, 220);
    register(&mut node, &mut client);
    let scan = |to| {
        envelope(
            api(220),
            to,
            ScanPartitionReq {
                request_id: 4,
                table_id: 1,
                partition: 0,
                start_row: 0,
                max_rows: 10,
            },
        )
    };
    client.send(&[scan(block(BlockKind::Ldm, 0))]);
    let seen = node.next_signal();
    assert_eq!(seen.to, block(BlockKind::Ldm, 0));
    assert!(
        matches!(
            seen.signal,
            Signal::ScanPartitionReq(ScanPartitionReq { request_id: 4, .. })
        ),
        "{seen:?}"
    );
    let rows = node.pool.copy_from(b"rows").expect("room");
    node.reply([envelope(
        block(BlockKind::Ldm, 0),
        api(220),
        ScanPartitionConf {
            request_id: 4,
            rows,
            next_row: 10,
            done: true,
        },
    )]);
    let (_, reply) = client.receive();
    match reply.signal {
        Signal::ScanPartitionConf(conf) => {
            assert_eq!((conf.request_id, conf.next_row, conf.done), (4, 10, true));
            assert_eq!(conf.rows.as_slice(), b"rows");
        }
        other => panic!("expected ScanPartitionConf, got {other:?}"),
    }
    // To a tc it is misaddressed.
    client.send(&[scan(block(BlockKind::Tc, 0))]);
    client.expect_closed();
    expect_api_failure(&mut node, 220);
}

/// API heartbeats (docs/design/0017-api-heartbeats.md): the receive
/// thread answers API_HEARTBEAT_REQ itself, from membership's address,
/// without a block seeing it; an API node that heartbeats and then falls
/// silent for the limit (4 intervals of 50 ms here) loses its connection
/// and is reported failed as any lost API node is; one that never
/// heartbeats (a tool speaking the protocol by hand) is never timed out.
#[test]
fn an_api_node_that_heartbeats_is_answered_and_taken_for_gone_once_silent() {
    let mut node = TestNode::start(SECTIONS);
    let mut quiet = Client::connect(node.address, 161);
    register(&mut node, &mut quiet);
    let mut client = Client::connect(node.address, 160);
    register(&mut node, &mut client);
    client.send(&[envelope(
        api(160),
        block(BlockKind::Membership, 0),
        ApiHeartbeatReq { count: 7 },
    )]);
    let (_, answer) = client.receive();
    assert_eq!(answer.from, block(BlockKind::Membership, 0));
    assert_eq!(answer.to, api(160));
    assert!(
        matches!(
            answer.signal,
            Signal::ApiHeartbeatConf(ApiHeartbeatConf { count: 7 })
        ),
        "{answer:?}"
    );
    // Silent from now on: the next thing any block hears is the failure.
    client.expect_closed();
    expect_api_failure(&mut node, 160);
    assert!(
        node.registry.is_connected(NodeId(161)),
        "a client that never heartbeated is not timed out"
    );
}
