//! Unit tests of the codec: round trips of API and data-node signals,
//! corruption and garbage detected without panics, node-local signals
//! refused, every invalid data-node field refused, and the table-name
//! encoding (limits, malformed bytes, retry after OutOfSections).

use super::*;
use crate::attr::KeyHash;
use crate::error::ErrorCode;
use crate::ids::{BlockKind, BlockRef, Gci, NodeId, NodeSet, TransactionId};
use crate::section::{SectionPool, MAX_SECTION_BYTES};
use crate::signals::*;
use std::sync::Arc;

fn pool() -> &'static SectionPool {
    SectionPool::leak([64, 8, 2, 2, 1, 1])
}

/// Asserts that `decoder` gives back `envelope` and then nothing more.
fn assert_decodes_to(
    decoder: &mut SignalDecoder<'_>,
    envelope: &Envelope,
    pool: &'static SectionPool,
) {
    let decoded = decoder.next(pool).expect("decodes").expect("one signal");
    assert_eq!(decoded.from, envelope.from);
    assert_eq!(decoded.to, envelope.to);
    assert_eq!(
        format!("{:?}", decoded.signal),
        format!("{:?}", envelope.signal)
    );
    assert!(decoder.next(pool).expect("end").is_none());
}

fn round_trip(signal: Signal) {
    let pool = pool();
    let envelope = Envelope {
        from: BlockRef::new(NodeId(130), BlockKind::Api, 0),
        to: BlockRef::new(NodeId(2), BlockKind::Tc, 1),
        signal,
    };
    let mut out = Vec::new();
    let start = begin_frame(&mut out);
    encode_signal(&mut out, &envelope).expect("wire signal");
    finish_frame(&mut out, start, NodeId(130), 7, 3, 1);
    let header = parse_frame_header(&out).expect("valid").expect("complete");
    assert_eq!(header.sequence, 3);
    assert_eq!(header.incarnation, 7);
    let body = verify_frame(&out, &header).expect("crc");
    let mut decoder = SignalDecoder::new(body, header.signal_count, header.sender, NodeId(2));
    assert_decodes_to(&mut decoder, &envelope, pool);
}

#[test]
fn api_signals_round_trip() {
    let pool = pool();
    round_trip(
        TcKeyReq {
            transaction_id: TransactionId(99),
            client_op: 4,
            flags: tc_key_flags::START | tc_key_flags::COMMIT,
            kind: OperationKind::Update,
            lock: LockMode::Exclusive,
            table_id: 3,
            table_version: 1,
            key: pool.copy_from(b"key").expect("room"),
            attr: Some(pool.copy_from(b"attr").expect("room")),
        }
        .into(),
    );
    round_trip(
        TcKeyRef {
            transaction_id: TransactionId(1),
            client_op: 2,
            error: ErrorCode::DuplicateKey,
            index_id: 0,
        }
        .into(),
    );
    round_trip(
        TcKeyConf {
            transaction_id: TransactionId(1),
            operations: 8,
            committed: true,
            gci: Gci::from_parts(5, 6),
            map_version: 3,
            row: None,
        }
        .into(),
    );
    round_trip(
        TcKeyConf {
            transaction_id: TransactionId(1),
            operations: 1,
            committed: true,
            gci: Gci(0),
            map_version: 3,
            row: Some(ReadRow {
                client_op: 4,
                data: pool.copy_from(b"row bytes").expect("room"),
            }),
        }
        .into(),
    );
}

#[test]
fn corruption_is_detected_not_panicked_on() {
    let pool = pool();
    let envelope = Envelope {
        from: BlockRef::new(NodeId(130), BlockKind::Api, 0),
        to: BlockRef::new(NodeId(2), BlockKind::Tc, 0),
        signal: TcCommitReq {
            transaction_id: TransactionId(5),
        }
        .into(),
    };
    let mut out = Vec::new();
    let start = begin_frame(&mut out);
    encode_signal(&mut out, &envelope).expect("wire signal");
    finish_frame(&mut out, start, NodeId(130), 1, 0, 1);
    for position in 0..out.len() {
        let mut bad = out.clone();
        bad[position] ^= 0x40;
        let Ok(Some(header)) = parse_frame_header(&bad) else {
            continue;
        };
        if header.frame_bytes as usize != bad.len() {
            continue;
        }
        assert!(
            verify_frame(&bad, &header).is_err(),
            "flip at {position} undetected"
        );
    }
    // Garbage bodies decode to errors, never panics.
    let mut rng = stdx::mix::XorShift::new(1);
    for _ in 0..2000 {
        let len = rng.below(64) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        let mut decoder = SignalDecoder::new(&bytes, 3, NodeId(1), NodeId(2));
        while let Ok(Some(_)) = decoder.next(pool) {}
    }
}

#[test]
fn node_local_signals_are_refused_by_the_encoder() {
    let table = Arc::new(test_table());
    let local: Vec<Signal> = vec![
        StartPhaseReq { phase: 1 }.into(),
        StartPhaseConf { phase: 1 }.into(),
        ApiFailRep { node: NodeId(130) }.into(),
        NodeConnectedRep {
            node: NodeId(3),
            incarnation: 2,
        }
        .into(),
        ContinueB { job: 1 }.into(),
        DiAddTabReq {
            table: table.clone(),
        }
        .into(),
        DiAddTabConf {
            map: Arc::new(test_map(&table)),
        }
        .into(),
        FsReq {
            token: 1,
            operation: crate::fs::FsOperation::Sync {
                file: crate::fs::FileName::System { copy: 0 },
            },
        }
        .into(),
        FsConf {
            token: 1,
            result: Ok(crate::fs::FsDone::Synced),
        }
        .into(),
    ];
    for signal in local {
        let name = signal.name();
        let mut out = vec![9u8];
        let envelope = Envelope {
            from: BlockRef::new(NodeId(2), BlockKind::Dih, 0),
            to: BlockRef::new(NodeId(3), BlockKind::Membership, 0),
            signal,
        };
        assert_eq!(
            encode_signal(&mut out, &envelope),
            Err(WireError::NotWireSignal(name))
        );
        assert_eq!(out, vec![9u8], "{name}: nothing appended");
    }
}

fn test_table() -> crate::schema::TableDef {
    use crate::schema::{ColumnDef, ColumnType, TableDef};
    TableDef {
        indexes: Vec::new(),
        revision: 0,
        id: 5,
        version: 2,
        name: "accounts".into(),
        columns: vec![
            ColumnDef {
                name: "id".into(),
                column_type: ColumnType::BigInt { unsigned: true },
                nullable: false,
            },
            ColumnDef {
                name: "owner".into(),
                column_type: ColumnType::VarChar(40),
                nullable: true,
            },
        ],
        primary_key: vec![0],
        partitions: 3,
        partition_key: Vec::new(),
    }
}

fn test_map(table: &crate::schema::TableDef) -> PartitionMap {
    PartitionMap {
        table_id: table.id,
        version: 4,
        bucket_partitions: (0..crate::partition::BUCKETS)
            .map(|bucket| bucket % table.partitions)
            .collect(),
        partitions: (0..table.partitions)
            .map(|partition| PartitionPlacement {
                node_group: partition % 2,
                replicas: if partition == 0 {
                    vec![NodeId(2)]
                } else {
                    vec![NodeId(3), NodeId(2), NodeId(4), NodeId(5)]
                },
                ldm_instance: partition as u16,
                redo_part: partition * 7,
            })
            .collect(),
    }
}

/// Encodes and decodes one signal between data nodes 2 and 3.
fn round_trip_between_nodes(signal: Signal) {
    let pool = pool();
    let envelope = Envelope {
        from: BlockRef::new(NodeId(2), BlockKind::Ldm, 1),
        to: BlockRef::new(NodeId(3), BlockKind::Ldm, 0),
        signal,
    };
    let mut out = Vec::new();
    encode_signal(&mut out, &envelope).expect("wire signal");
    let mut decoder = SignalDecoder::new(&out, 1, NodeId(2), NodeId(3));
    assert_decodes_to(&mut decoder, &envelope, pool);
}

fn lqh_key_req(pool: &'static SectionPool, attr: bool) -> LqhKeyReq {
    LqhKeyReq {
        tc: BlockRef::new(NodeId(2), BlockKind::Tc, 1),
        tc_op: 17,
        chain: ReplicaChain::new(&[NodeId(2), NodeId(3), NodeId(9)]),
        position: 1,
        row_id: 0x0001_0002,
        previous_op: 44,
        transaction_id: TransactionId(130 << 48 | 5),
        kind: OperationKind::Insert,
        lock: LockMode::Exclusive,
        table_id: 5,
        partition: 2,
        hash: KeyHash(0xdead_beef_0bad_f00d),
        key: pool.copy_from(b"key bytes").expect("room"),
        attr: attr.then(|| pool.copy_from(b"after image").expect("room")),
        no_wait: false,
    }
}

#[test]
fn data_node_signals_round_trip() {
    let pool = pool();
    let table = Arc::new(test_table());
    let map = Arc::new(test_map(&table));
    let signals: Vec<Signal> = vec![
        lqh_key_req(pool, true).into(),
        lqh_key_req(pool, false).into(),
        LqhKeyReq {
            tc: BlockRef::new(NodeId(255), BlockKind::Tc, u16::MAX),
            chain: ReplicaChain::new(&[NodeId(255)]),
            position: 0,
            row_id: u32::MAX,
            previous_op: u32::MAX,
            kind: OperationKind::Read,
            lock: LockMode::CommittedRead,
            ..lqh_key_req(pool, false)
        }
        .into(),
        LqhKeyConf {
            tc_op: 1,
            ldm_op: 2,
            data: Some(pool.copy_from(b"row").expect("room")),
            released: true,
        }
        .into(),
        LqhKeyConf {
            tc_op: u32::MAX,
            ldm_op: 0,
            data: None,
            released: false,
        }
        .into(),
        LqhKeyRef {
            tc_op: 3,
            error: ErrorCode::NoSuchRow,
        }
        .into(),
        CommitReq {
            ldm_op: 4,
            tc_op: 5,
            transaction_id: TransactionId(6),
            gci: Gci::from_parts(7, 8),
        }
        .into(),
        CommitConf { tc_op: 9 }.into(),
        CompleteReq {
            ldm_op: 10,
            tc_op: 11,
            transaction_id: TransactionId(12),
        }
        .into(),
        CompleteConf { tc_op: 13 }.into(),
        AbortReq {
            tc: BlockRef::new(NodeId(3), BlockKind::Tc, 0),
            tc_op: 14,
            transaction_id: TransactionId(15),
        }
        .into(),
        AbortConf { tc_op: 16 }.into(),
        GcpPrepare {
            new_gci: Gci::from_parts(1, 2),
        }
        .into(),
        GcpPrepareConf {
            new_gci: Gci::from_parts(1, 2),
        }
        .into(),
        GcpCommit {
            gci: Gci::from_parts(3, 0),
        }
        .into(),
        GcpCommitConf { gci: Gci(u64::MAX) }.into(),
        GcpCompleteRep { gci: Gci(0) }.into(),
        GciWaitReq {
            request_id: 7,
            gci: Gci::from_parts(9, 3),
        }
        .into(),
        GciWaitConf {
            request_id: u32::MAX,
            complete_gci: Gci::from_parts(9, 4),
        }
        .into(),
        GciWaitRef {
            request_id: 1,
            error: ErrorCode::OutOfTransactionRecords,
        }
        .into(),
        GcpFlushReq {
            gci: Gci::from_parts(4, 19),
        }
        .into(),
        GcpFlushConf { gci: Gci(1) }.into(),
        GcpSaveReq { gci: Gci(2) }.into(),
        GcpSaveConf { gci: Gci(3) }.into(),
        CopyGciReq {
            complete_gci: Gci(4),
            started_gci: Gci::from_parts(5, 1),
        }
        .into(),
        CopyGciConf {
            complete_gci: Gci(5),
        }
        .into(),
        GcpDurableRep { gci: Gci(6) }.into(),
        RestartGciRep {
            complete_gci: Gci(7),
            members: NodeSet::of([NodeId(2), NodeId(127)]),
        }
        .into(),
        RestartGciOrd {
            restored_gci: Gci(8),
            stale: NodeSet::of([NodeId(3)]),
        }
        .into(),
        RestoredRep {
            highest_gci: Gci(u64::MAX),
        }
        .into(),
        TcAddTabReq {
            table: table.clone(),
            map: map.clone(),
        }
        .into(),
        LqhAddTabReq {
            table: table.clone(),
            map: map.clone(),
        }
        .into(),
        DictAddTabReq {
            table: table.clone(),
            map: map.clone(),
            schema_version: 77,
        }
        .into(),
        AddTabConf { table_id: 5 }.into(),
        DropTabOrd { table_id: 5 }.into(),
        DropTabRep {
            table_id: 5,
            busy: true,
        }
        .into(),
        DropTabRep {
            table_id: 6,
            busy: false,
        }
        .into(),
        CmRegReq {
            node: NodeId(4),
            complete_gci: Gci::from_parts(7, 3),
            members: NodeSet::of([NodeId(2), NodeId(4)]),
            connected: NodeSet::of([NodeId(1), NodeId(4)]),
        }
        .into(),
        CmRegConf {
            president: NodeId(2),
            stale: NodeSet::of([NodeId(3)]),
            restored_gci: Gci::from_parts(7, 3),
        }
        .into(),
        CmStaleRep {
            restored_gci: Gci::from_parts(7, 3),
        }
        .into(),
        ScanPartitionReq {
            request_id: 1,
            table_id: 5,
            partition: 2,
            start_row: 100,
            max_rows: 64,
        }
        .into(),
        ScanPartitionConf {
            request_id: 1,
            rows: pool.copy_from(b"rows").expect("room"),
            next_row: 164,
            done: true,
        }
        .into(),
        ScanPartitionRef {
            request_id: 1,
            error: ErrorCode::UnknownTable,
        }
        .into(),
    ];
    for signal in signals {
        round_trip_between_nodes(signal);
    }
}

/// Encodes `signal`, lets `mangle` change its body, and decodes.
fn decode_mangled(signal: Signal, mangle: impl FnOnce(&mut Vec<u8>)) -> WireError {
    let envelope = Envelope {
        from: BlockRef::new(NodeId(2), BlockKind::Tc, 0),
        to: BlockRef::new(NodeId(3), BlockKind::Ldm, 0),
        signal,
    };
    let mut out = Vec::new();
    encode_signal(&mut out, &envelope).expect("wire signal");
    let mut body = out.split_off(SIGNAL_HEAD_BYTES);
    mangle(&mut body);
    out[8..12].copy_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    let mut decoder = SignalDecoder::new(&out, 1, NodeId(2), NodeId(3));
    match decoder.next(pool()) {
        Err(error) => error,
        Ok(decoded) => panic!("mangled body decoded: {decoded:?}"),
    }
}

#[test]
fn invalid_data_node_fields_are_refused() {
    let pool = pool();
    // LqhKeyReq body: tc 0..5, tc op 5..9, chain length 9, slots 10..18,
    // position 18, ..., kind 35, lock 36, ..., key 53..66 (9 bytes), attr
    // flag 66.
    let request = || Signal::from(lqh_key_req(pool, true));
    type Mangle = Box<dyn FnOnce(&mut Vec<u8>)>;
    let byte = |at: usize, value: u8| -> Mangle { Box::new(move |b| b[at] = value) };
    let u16_at = |at: usize, value: u16| -> Mangle {
        Box::new(move |b| b[at..at + 2].copy_from_slice(&value.to_le_bytes()))
    };
    let bad = WireError::BadField;
    let cases: Vec<(&str, Mangle, WireError)> = vec![
        ("tc node 0", u16_at(0, 0), bad("LqhKeyReq tc")),
        (
            "tc kind ldm",
            byte(2, BlockKind::Ldm as u8),
            bad("tc block kind"),
        ),
        ("chain length 0", byte(9, 0), bad("replica chain length")),
        ("chain length 5", byte(9, 5), bad("replica chain length")),
        (
            "chain length 4 with an empty slot",
            byte(9, 4),
            bad("replica chain node"),
        ),
        (
            "chain length 2 with a used third slot",
            byte(9, 2),
            bad("unused replica chain slot"),
        ),
        (
            "a node twice",
            u16_at(12, 2),
            bad("replica chain node twice"),
        ),
        (
            "a node above 255",
            u16_at(12, 256),
            bad("replica chain node"),
        ),
        (
            "position past the chain",
            byte(18, 3),
            bad("chain position"),
        ),
        ("attr flag 2", byte(66, 2), bad("LqhKeyReq attr")),
        ("operation kind 0", byte(35, 0), bad("LqhKeyReq kind")),
        ("lock mode 3", byte(36, 3), bad("LqhKeyReq lock")),
        (
            "no_wait on an insert (its last byte)",
            Box::new(|b| {
                let last = b.len() - 1;
                b[last] = 1;
            }),
            bad("LqhKeyReq no_wait on no locking read"),
        ),
        (
            "truncated",
            Box::new(|b| b.truncate(50)),
            WireError::Truncated,
        ),
    ];
    for (case, mangle, expected) in cases {
        assert_eq!(decode_mangled(request(), mangle), expected, "{case}");
    }
    assert_eq!(
        decode_mangled(
            CmRegReq {
                node: NodeId(2),
                complete_gci: Gci(0),
                members: NodeSet::EMPTY,
                connected: NodeSet::EMPTY,
            }
            .into(),
            |b| b.fill(0),
        ),
        WireError::BadField("CmRegReq node")
    );
    assert_eq!(
        decode_mangled(
            DropTabRep {
                table_id: 1,
                busy: true
            }
            .into(),
            |b| b[4] = 7
        ),
        WireError::BadField("DropTabRep busy")
    );
    let table = Arc::new(test_table());
    let other_table = Arc::new(crate::schema::TableDef {
        id: 6,
        ..test_table()
    });
    let fewer_partitions = Arc::new(crate::schema::TableDef {
        partitions: 2,
        ..test_table()
    });
    let map = Arc::new(test_map(&table));
    let mismatched = [
        (other_table, "partition map of another table"),
        (fewer_partitions, "partition map partition count"),
    ];
    for (table, why) in mismatched {
        let request = TcAddTabReq {
            table,
            map: map.clone(),
        };
        assert_eq!(
            decode_mangled(request.into(), |_| {}),
            WireError::BadField(why)
        );
    }
    let request = LqhAddTabReq {
        table: table.clone(),
        map: map.clone(),
    };
    // The table name's first byte (table section: length 0..4, id,
    // version, partitions, name length 16..18, name 18..).
    assert_eq!(
        decode_mangled(request.into(), |b| b[18] = b'-'),
        WireError::BadField("table definition")
    );
    // Replica 2 of partition 1 made equal to replica 1.
    let mut broken = test_map(&table);
    broken.partitions[1].replicas[1] = NodeId(3);
    let mut bytes = Vec::new();
    encode_partition_map(&mut bytes, &broken);
    assert_eq!(
        decode_partition_map(&bytes),
        Err(WireError::BadField("partition map replica twice"))
    );
    broken.partitions[1].replicas[1] = NodeId(0);
    bytes.clear();
    encode_partition_map(&mut bytes, &broken);
    assert_eq!(
        decode_partition_map(&bytes),
        Err(WireError::BadField("partition map replica node"))
    );
}

#[test]
fn scan_partition_req_is_an_api_request() {
    assert!(is_api_request(ScanPartitionReq::NUMBER));
    assert!(!is_api_request(ScanPartitionConf::NUMBER));
    assert!(!is_api_request(LqhKeyReq::NUMBER));
}

#[test]
fn list_tables_req_is_an_api_request_and_its_conf_is_not() {
    assert!(is_api_request(ListTablesReq::NUMBER));
    assert!(!is_api_request(ListTablesConf::NUMBER));
    let request: Signal = ListTablesReq { request_id: 1 }.into();
    assert_eq!(
        (request.number(), request.name()),
        (ListTablesReq::NUMBER, "ListTablesReq")
    );
}

fn table_names(names: &[&str]) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_table_names(&mut bytes, names.iter().copied()).expect("the names fit");
    bytes
}

#[test]
fn list_tables_signals_round_trip() {
    let pool = pool();
    let long = "x".repeat(64);
    let names = ["accounts", "orders", "\u{e9}t\u{e9}", long.as_str()];
    let cases: Vec<Signal> = vec![
        ListTablesReq { request_id: 0 }.into(),
        ListTablesReq {
            request_id: u32::MAX,
        }
        .into(),
        ListTablesConf {
            request_id: 7,
            schema_version: 12,
            names: pool.copy_from(&table_names(&names)).expect("room"),
        }
        .into(),
        ListTablesConf {
            request_id: 8,
            schema_version: 1,
            names: pool.copy_from(&table_names(&[])).expect("room"),
        }
        .into(),
    ];
    for signal in cases {
        round_trip(signal);
    }
    // The body byte by byte (docs/wire-format.md).
    let envelope = Envelope {
        from: BlockRef::new(NodeId(2), BlockKind::Dict, 0),
        to: BlockRef::new(NodeId(130), BlockKind::Api, 3),
        signal: ListTablesConf {
            request_id: 7,
            schema_version: 12,
            names: pool.copy_from(&table_names(&["ab", "c"])).expect("room"),
        }
        .into(),
    };
    let mut out = Vec::new();
    encode_signal(&mut out, &envelope).expect("wire signal");
    let mut expected = vec![
        68, // ListTablesConf's number, docs/wire-format.md
        0,
        BlockKind::Api as u8,
        BlockKind::Dict as u8,
        3,
        0,
        0,
        0,
    ];
    expected.extend_from_slice(&(4u32 + 4 + 4 + 9).to_le_bytes());
    expected.extend_from_slice(&7u32.to_le_bytes());
    expected.extend_from_slice(&12u32.to_le_bytes());
    expected.extend_from_slice(&9u32.to_le_bytes());
    expected.extend_from_slice(&[2, 0, 2, 0, b'a', b'b', 1, 0, b'c']);
    assert_eq!(out, expected);
    let mut out = Vec::new();
    let request = Envelope {
        from: BlockRef::new(NodeId(130), BlockKind::Api, 3),
        to: BlockRef::new(NodeId(2), BlockKind::Dict, 0),
        signal: ListTablesReq { request_id: 5 }.into(),
    };
    encode_signal(&mut out, &request).expect("wire signal");
    assert_eq!(out[8..], [4, 0, 0, 0, 5, 0, 0, 0]);
}

#[test]
fn table_names_round_trip() {
    let long = "n".repeat(u16::MAX as usize);
    let cases: Vec<Vec<&str>> = vec![
        vec![],
        vec!["t"],
        vec!["a", "b", "a"],
        vec!["", "\u{1f980}", "T1", "t1"],
        vec![&long],
    ];
    for names in cases {
        let bytes = table_names(&names);
        assert_eq!(
            bytes.len(),
            2 + names.iter().map(|name| 2 + name.len()).sum::<usize>()
        );
        assert_eq!(decode_table_names(&bytes), Ok(names));
    }
    // Appends to what `out` holds.
    let mut out = vec![9];
    encode_table_names(&mut out, ["t"]).expect("fits");
    assert_eq!(out, [9, 1, 0, 1, 0, b't']);
}

#[test]
fn table_names_that_do_not_fit_are_refused_with_nothing_appended() {
    let long = "n".repeat(u16::MAX as usize + 1);
    let many = vec![""; u16::MAX as usize + 1];
    // Two names of 65 535 bytes are over 131 072 bytes with their
    // lengths and count.
    let huge = "h".repeat(u16::MAX as usize);
    let cases: Vec<(Vec<&str>, WireError)> = vec![
        (vec!["t", &long], WireError::BadField("table name length")),
        (many, WireError::BadField("table name count")),
        (
            vec![&huge, &huge, "t"],
            WireError::BadField("table names section"),
        ),
    ];
    for (names, expected) in cases {
        let mut out = vec![9];
        assert_eq!(encode_table_names(&mut out, names), Err(expected));
        assert_eq!(out, [9], "{expected:?}: nothing appended");
    }
    // The most empty names the count allows fit.
    let mut out = Vec::new();
    encode_table_names(&mut out, vec![""; u16::MAX as usize]).expect("fits");
    assert_eq!(
        decode_table_names(&out).map(|names| names.len()),
        Ok(65_535)
    );
}

#[test]
fn malformed_table_names_are_refused() {
    let good = table_names(&["ab", "c"]);
    let with = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut bytes = good.clone();
        edit(&mut bytes);
        bytes
    };
    let cases: Vec<(&str, Vec<u8>, WireError)> = vec![
        ("empty", Vec::new(), WireError::Truncated),
        ("half a count", vec![1], WireError::Truncated),
        (
            "count above the names",
            with(&|b| b[0] = 3),
            WireError::Truncated,
        ),
        (
            "count below the names",
            with(&|b| b[0] = 1),
            WireError::BadField("bytes after table names"),
        ),
        (
            "a byte after the names",
            with(&|b| b.push(0)),
            WireError::BadField("bytes after table names"),
        ),
        (
            "a length past the end",
            with(&|b| b[6] = 2),
            WireError::Truncated,
        ),
        (
            "half a length",
            with(&|b| b.truncate(7)),
            WireError::Truncated,
        ),
        (
            "a name cut short",
            with(&|b| b.truncate(8)),
            WireError::Truncated,
        ),
        (
            "invalid UTF-8",
            with(&|b| b[4] = 0xff),
            WireError::BadField("table name utf-8"),
        ),
        (
            "a lone continuation byte",
            with(&|b| b[8] = 0x80),
            WireError::BadField("table name utf-8"),
        ),
        (
            "half a two-byte character",
            with(&|b| b[5] = 0xc3),
            WireError::BadField("table name utf-8"),
        ),
    ];
    for (case, bytes, expected) in cases {
        assert_eq!(decode_table_names(&bytes), Err(expected), "{case}");
        // The same names inside a ListTablesConf refuse the signal.
        let pool = pool();
        let conf = ListTablesConf {
            request_id: 1,
            schema_version: 2,
            names: pool.copy_from(&bytes).expect("room"),
        };
        assert_eq!(decode_mangled(conf.into(), |_| {}), expected, "{case}");
    }
}

#[test]
fn truncated_list_tables_bodies_are_refused() {
    let pool = pool();
    let conf = || ListTablesConf {
        request_id: 1,
        schema_version: 2,
        names: pool.copy_from(&table_names(&["t1", "t2"])).expect("room"),
    };
    // request id 0..4, schema version 4..8, section length 8..12, names.
    for keep in 0..22 {
        assert_eq!(
            decode_mangled(conf().into(), |b| b.truncate(keep)),
            WireError::Truncated,
            "ListTablesConf cut to {keep} bytes"
        );
    }
    assert_eq!(
        decode_mangled(conf().into(), |b| b[8..12]
            .copy_from_slice(&(MAX_SECTION_BYTES as u32 + 1).to_le_bytes())),
        WireError::BadField("section length")
    );
    assert_eq!(
        decode_mangled(conf().into(), |b| b.push(0)),
        WireError::BadField("bytes after signal fields")
    );
    for keep in 0..4 {
        assert_eq!(
            decode_mangled(ListTablesReq { request_id: 3 }.into(), |b| b.truncate(keep)),
            WireError::Truncated
        );
    }
    assert_eq!(
        decode_mangled(ListTablesReq { request_id: 3 }.into(), |b| b.push(0)),
        WireError::BadField("bytes after signal fields")
    );
}

#[test]
fn a_list_tables_conf_waiting_for_a_section_can_be_decoded_again() {
    let pool = SectionPool::leak([1, 1, 1, 1, 1, 1]);
    let envelope = Envelope {
        from: BlockRef::new(NodeId(2), BlockKind::Dict, 0),
        to: BlockRef::new(NodeId(3), BlockKind::Dict, 0),
        signal: ListTablesConf {
            request_id: 1,
            schema_version: 2,
            names: pool.copy_from(&table_names(&["t"])).expect("room"),
        }
        .into(),
    };
    let mut out = Vec::new();
    encode_signal(&mut out, &envelope).expect("wire signal");
    let mut decoder = SignalDecoder::new(&out, 1, NodeId(2), NodeId(3));
    // The only small section is the one the envelope still holds.
    assert_eq!(decoder.next(pool).err(), Some(WireError::OutOfSections));
    drop(envelope);
    let decoded = decoder.next(pool).expect("decodes").expect("one signal");
    let Signal::ListTablesConf(conf) = decoded.signal else {
        panic!("decoded {:?}", decoded.signal);
    };
    assert_eq!(decode_table_names(conf.names.as_slice()), Ok(vec!["t"]));
}

#[test]
fn mangled_table_names_never_panic() {
    let mut rng = stdx::mix::XorShift::new(7);
    let alphabet = ["t", "T1", "", "\u{e9}", "\u{1f980}x"];
    let mut decoded = 0;
    for _ in 0..20_000 {
        let names: Vec<&str> = (0..rng.below(4))
            .map(|_| alphabet[rng.below(alphabet.len() as u64) as usize])
            .collect();
        let mut bytes = table_names(&names);
        for _ in 0..rng.below(3) {
            let position = rng.below(bytes.len() as u64 + 1) as usize;
            match rng.below(3) {
                0 if position < bytes.len() => bytes[position] = rng.next_u64() as u8,
                1 => bytes.truncate(position),
                _ => bytes.insert(position, rng.below(4) as u8),
            }
        }
        if let Ok(names) = decode_table_names(&bytes) {
            decoded += 1;
            assert_eq!(table_names(&names), bytes, "decoding is exact");
        }
    }
    assert!(decoded > 1000, "only {decoded} inputs decoded");
}

#[test]
fn schema_sync_signals_round_trip() {
    let pool = pool();
    let chunk = |bytes: &[u8]| pool.copy_from(bytes).expect("room");
    let whole: Vec<u8> = (0..MAX_SECTION_BYTES).map(|i| i as u8).collect();
    let signals: Vec<Signal> = vec![
        // No schema at the master.
        SchemaSyncReq {
            total_bytes: 0,
            offset: 0,
            data: chunk(b""),
        }
        .into(),
        // The middle chunk of a larger schema.
        SchemaSyncReq {
            total_bytes: 300_000,
            offset: 131_072,
            data: chunk(b"schema bytes"),
        }
        .into(),
        // A whole section that ends the schema exactly.
        SchemaSyncReq {
            total_bytes: u32::MAX,
            offset: u32::MAX - MAX_SECTION_BYTES as u32,
            data: chunk(&whole),
        }
        .into(),
        SchemaSyncConf { received: 0 }.into(),
        SchemaSyncConf { received: u32::MAX }.into(),
    ];
    for signal in signals {
        let name = signal.name();
        assert!(
            [SchemaSyncReq::NUMBER, SchemaSyncConf::NUMBER].contains(&signal.number()),
            "{name} has its number"
        );
        assert!(!is_api_request(signal.number()), "{name} is not from APIs");
        round_trip_between_nodes(signal);
    }
}

#[test]
fn schema_sync_chunks_outside_the_schema_are_refused() {
    let pool = pool();
    // Body: total 0..4, offset 4..8, data length 8..12, data 12..
    let request = |total_bytes: u32, offset: u32, data: &[u8]| -> Signal {
        SchemaSyncReq {
            total_bytes,
            offset,
            data: pool.copy_from(data).expect("room"),
        }
        .into()
    };
    let u32_at = |at: usize, value: u32| {
        move |b: &mut Vec<u8>| b[at..at + 4].copy_from_slice(&value.to_le_bytes())
    };
    let beyond = WireError::BadField("SchemaSyncReq chunk beyond the total");
    let empty = WireError::BadField("SchemaSyncReq empty chunk");
    assert_eq!(
        decode_mangled(request(10, 0, b"0123456789"), u32_at(0, 9)),
        beyond,
        "the chunk ends past the total"
    );
    assert_eq!(
        decode_mangled(request(10, 0, b"0123456789"), u32_at(4, 1)),
        beyond,
        "the chunk starts too late"
    );
    assert_eq!(
        decode_mangled(request(10, 0, b"0123456789"), u32_at(4, u32::MAX)),
        beyond,
        "offset + length overflows a u32"
    );
    assert_eq!(
        decode_mangled(request(10, 0, b"0123456789"), u32_at(0, 0)),
        beyond,
        "data with a total of 0"
    );
    assert_eq!(
        decode_mangled(request(0, 0, b""), u32_at(0, 5)),
        empty,
        "an empty chunk of a schema that has bytes"
    );
    assert_eq!(
        decode_mangled(request(10, 0, b"0123456789"), u32_at(8, 11)),
        WireError::Truncated,
        "a data length beyond the body"
    );
    assert_eq!(
        decode_mangled(
            request(10, 0, b"0123456789"),
            u32_at(8, MAX_SECTION_BYTES as u32 + 1)
        ),
        WireError::BadField("section length")
    );
    assert_eq!(
        decode_mangled(SchemaSyncConf { received: 1 }.into(), |b| b.truncate(3)),
        WireError::Truncated
    );
}

/// `next_for_api` gives a read's replies with the row in the frame, field
/// for field what `next` decodes, and every other signal as `next` does;
/// a truncated reply is an error either way.
#[test]
fn api_replies_decode_in_place_as_they_decode_owned() {
    let pool = pool();
    let row = |bytes: &[u8]| pool.copy_from(bytes).expect("room");
    let signals: Vec<Signal> = vec![
        TcKeyConf {
            transaction_id: TransactionId(9),
            operations: 1,
            committed: true,
            gci: Gci::from_parts(3, 4),
            map_version: 2,
            row: Some(ReadRow {
                client_op: 5,
                data: row(b"row of op 5"),
            }),
        }
        .into(),
        TcKeyConf {
            transaction_id: TransactionId(9),
            operations: 2,
            committed: false,
            gci: Gci(0),
            map_version: 2,
            row: None,
        }
        .into(),
        TransIdAi {
            transaction_id: TransactionId(9),
            client_op: 6,
            data: row(b"row of op 6"),
        }
        .into(),
        TcRollbackConf {
            transaction_id: TransactionId(9),
        }
        .into(),
    ];
    let mut out = Vec::new();
    let start = begin_frame(&mut out);
    let from = BlockRef::new(NodeId(2), BlockKind::Tc, 0);
    let to = BlockRef::new(NodeId(130), BlockKind::Api, 0);
    let count = signals.len() as u16;
    for signal in signals {
        encode_signal(&mut out, &Envelope { from, to, signal }).expect("wire signal");
    }
    finish_frame(&mut out, start, NodeId(2), 1, 1, count);
    let header = parse_frame_header(&out).expect("valid").expect("complete");
    let body = verify_frame(&out, &header).expect("crc");
    let mut owned = SignalDecoder::new(body, count, NodeId(2), NodeId(130));
    let mut in_place = SignalDecoder::new(body, count, NodeId(2), NodeId(130));
    let mut replies = 0;
    while let Some(envelope) = owned.next(pool).expect("decodes") {
        match in_place
            .next_for_api(pool)
            .expect("decodes")
            .expect("as many")
        {
            ForApi::Reply { to, reply } => {
                replies += 1;
                assert_eq!(to, envelope.to);
                let expected = match &envelope.signal {
                    Signal::TcKeyConf(conf) => ApiReply::TcKeyConf {
                        transaction_id: conf.transaction_id,
                        operations: conf.operations,
                        committed: conf.committed,
                        gci: conf.gci,
                        map_version: conf.map_version,
                        row: conf
                            .row
                            .as_ref()
                            .map(|row| (row.client_op, row.data.as_slice())),
                    },
                    Signal::TransIdAi(ai) => ApiReply::TransIdAi {
                        transaction_id: ai.transaction_id,
                        client_op: ai.client_op,
                        data: ai.data.as_slice(),
                    },
                    other => panic!("{other:?} decoded in place"),
                };
                assert_eq!(reply, expected);
            }
            ForApi::Signal(signal) => assert_eq!(
                format!("{:?}", signal.signal),
                format!("{:?}", envelope.signal)
            ),
        }
    }
    assert_eq!(replies, 3);
    assert!(in_place.next_for_api(pool).expect("end").is_none());

    // A reply cut short: the row's length runs past the record.
    let mut cut = Vec::new();
    let start = begin_frame(&mut cut);
    let signal: Signal = TransIdAi {
        transaction_id: TransactionId(9),
        client_op: 6,
        data: row(b"row of op 6"),
    }
    .into();
    encode_signal(&mut cut, &Envelope { from, to, signal }).expect("wire signal");
    // Shrink the record's body length so the row no longer fits in it.
    let body_length_at = start + FRAME_HEADER_BYTES + SIGNAL_HEAD_BYTES - 4;
    let shorter =
        u32::from_le_bytes(cut[body_length_at..body_length_at + 4].try_into().unwrap()) - 3;
    cut[body_length_at..body_length_at + 4].copy_from_slice(&shorter.to_le_bytes());
    cut.truncate(cut.len() - 3);
    finish_frame(&mut cut, start, NodeId(2), 1, 1, 1);
    let header = parse_frame_header(&cut).expect("valid").expect("complete");
    let body = verify_frame(&cut, &header).expect("crc");
    let mut owned = SignalDecoder::new(body, 1, NodeId(2), NodeId(130));
    let mut in_place = SignalDecoder::new(body, 1, NodeId(2), NodeId(130));
    assert!(owned.next(pool).is_err());
    assert!(in_place.next_for_api(pool).is_err());
}

#[test]
fn table_versions_round_trip_and_malformed_lists_are_refused() {
    let tables = [(0, 1, 0), (7, 3, 9), (u32::MAX, u32::MAX, u32::MAX)];
    let mut good = Vec::new();
    encode_table_versions(&mut good, tables.into_iter()).expect("fits");
    assert_eq!(decode_table_versions(&good), Ok(tables.to_vec()));
    let mut empty = Vec::new();
    encode_table_versions(&mut empty, std::iter::empty::<(u32, u32, u32)>()).expect("fits");
    assert_eq!(decode_table_versions(&empty), Ok(Vec::new()));
    let with = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut bytes = good.clone();
        edit(&mut bytes);
        bytes
    };
    let cases: Vec<(&str, Vec<u8>, WireError)> = vec![
        ("empty", Vec::new(), WireError::Truncated),
        (
            "count above the entries",
            with(&|b| b[0] = 4),
            WireError::Truncated,
        ),
        (
            "part of an entry",
            with(&|b| b.truncate(b.len() - 4)),
            WireError::Truncated,
        ),
        (
            "count below the entries",
            with(&|b| b[0] = 2),
            WireError::BadField("bytes after table versions"),
        ),
        (
            "a count no section holds",
            with(&|b| b[..4].copy_from_slice(&u32::MAX.to_le_bytes())),
            WireError::BadField("table versions count"),
        ),
    ];
    for (what, bytes, expected) in cases {
        assert_eq!(decode_table_versions(&bytes), Err(expected), "{what}");
    }
    let too_many = (0..MAX_TABLE_VERSIONS as u32 + 1).map(|id| (id, 1, 0));
    let mut out = vec![9];
    assert_eq!(
        encode_table_versions(&mut out, too_many),
        Err(WireError::BadField("table versions section"))
    );
    assert_eq!(out, [9], "a refused list leaves the bytes as they were");
}

#[test]
fn ignore_missing_is_taken_on_reads_and_refused_on_writes() {
    let pool = pool();
    let request = |kind, lock| TcKeyReq {
        transaction_id: TransactionId(99),
        client_op: 4,
        flags: tc_key_flags::START | tc_key_flags::EXECUTE | tc_key_flags::IGNORE_MISSING,
        kind,
        lock,
        table_id: 3,
        table_version: 1,
        key: pool.copy_from(b"key").expect("room"),
        attr: None,
    };
    round_trip(request(OperationKind::Read, LockMode::Exclusive).into());
    assert_eq!(
        decode_mangled(
            request(OperationKind::Delete, LockMode::Exclusive).into(),
            |_| {}
        ),
        WireError::BadField("TcKeyReq a read's flag on a write")
    );
}

#[test]
fn no_wait_and_skip_locked_are_taken_on_locking_reads_only() {
    let pool = pool();
    let request = |flags, kind, lock| TcKeyReq {
        transaction_id: TransactionId(99),
        client_op: 4,
        flags: tc_key_flags::START | tc_key_flags::EXECUTE | flags,
        kind,
        lock,
        table_id: 3,
        table_version: 1,
        key: pool.copy_from(b"key").expect("room"),
        attr: None,
    };
    for flag in [tc_key_flags::NO_WAIT, tc_key_flags::SKIP_LOCKED] {
        round_trip(request(flag, OperationKind::Read, LockMode::Shared).into());
        let refused = [
            (
                request(flag, OperationKind::Read, LockMode::CommittedRead),
                "TcKeyReq NO_WAIT or SKIP_LOCKED on no locking read",
            ),
            (
                request(flag, OperationKind::Update, LockMode::Exclusive),
                "TcKeyReq NO_WAIT or SKIP_LOCKED on no locking read",
            ),
            (
                request(
                    flag | tc_key_flags::THROUGH_UNIQUE_INDEX,
                    OperationKind::Read,
                    LockMode::Exclusive,
                ),
                "TcKeyReq NO_WAIT or SKIP_LOCKED through a unique index",
            ),
        ];
        for (request, why) in refused {
            assert_eq!(
                decode_mangled(request.into(), |_| {}),
                WireError::BadField(why)
            );
        }
    }
}
