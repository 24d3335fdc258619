//! Robustness of everything in `signal` that reads bytes from the network:
//! frames and signal records (`codec`), attribute and key sections
//! (`attr`, `key_hash`) and table definitions (`TableDef::decode`). Random
//! and adversarial inputs must give an error, never a panic, and whatever
//! is accepted must be well formed.

use signal::attr::{self, key_hash, AttrIter, AttrWriter, KeyHash, NULL_LENGTH};
use signal::codec::{
    begin_frame, decode_table_names, encode_signal, encode_table_names, finish_frame,
    parse_frame_header, verify_frame, SignalDecoder, WireError, FRAME_HEADER_BYTES,
    SIGNAL_HEAD_BYTES,
};
use signal::schema::{ColumnDef, ColumnType, TableDef, MAX_COLUMNS};
use signal::signals::*;
use signal::{BlockKind, BlockRef, Envelope, ErrorCode, Gci, NodeId, SectionPool, TransactionId};
use std::sync::Arc;
use stdx::mix::XorShift;

/// Signal numbers with a wire form (every class but node-local), from the
/// signal table.
fn wire_numbers() -> Vec<u16> {
    SIGNALS
        .iter()
        .filter(|signal| signal.class != SignalClass::Local)
        .map(|signal| signal.number)
        .collect()
}

fn pool() -> &'static SectionPool {
    SectionPool::leak([64, 16, 8, 4, 2, 2])
}

fn random_bytes(rng: &mut XorShift, max_len: u64) -> Vec<u8> {
    let len = rng.below(max_len + 1) as usize;
    (0..len).map(|_| rng.next_u64() as u8).collect()
}

/// A u32 that is often at an edge (0, small, around a limit, all ones).
fn edgy_u32(rng: &mut XorShift) -> u32 {
    match rng.below(6) {
        0 => 0,
        1 => rng.below(8) as u32,
        2 => u32::MAX - rng.below(4) as u32,
        3 => (1 << rng.below(32)) as u32,
        4 => 131_072 + rng.below(3) as u32 - 1,
        _ => rng.next_u64() as u32,
    }
}

/// 0 to 5 random names (UTF-8 of 0 to 12 characters, some beyond ASCII),
/// encoded as ListTablesConf carries them.
fn random_table_names(rng: &mut XorShift) -> Vec<u8> {
    const CHARACTERS: [char; 6] = ['t', 'Z', '_', '\u{e9}', '\u{2603}', '\u{1f980}'];
    let names: Vec<String> = (0..rng.below(6))
        .map(|_| {
            (0..rng.below(13))
                .map(|_| CHARACTERS[rng.below(CHARACTERS.len() as u64) as usize])
                .collect()
        })
        .collect();
    let mut bytes = Vec::new();
    encode_table_names(&mut bytes, names.iter().map(String::as_str)).expect("few short names");
    bytes
}

/// A valid wire signal with random fields.
fn random_wire_signal(rng: &mut XorShift, pool: &'static SectionPool) -> Signal {
    let section = |rng: &mut XorShift| {
        let bytes = random_bytes(rng, 300);
        pool.copy_from(&bytes).expect("test pool has room")
    };
    let error = ErrorCode::ALL[rng.below(ErrorCode::ALL.len() as u64) as usize];
    match rng.below(34) {
        0 => ApiRegReq {
            protocol_version: rng.next_u64() as u16,
            token: signal::signals::ApiToken::NONE,
        }
        .into(),
        1 => ApiRegConf {
            started: rng.below(2) == 1,
            tc_instances: rng.next_u64() as u16,
            heartbeat_interval_ms: rng.next_u64() as u32,
            api_heartbeat_missed: rng.next_u64() as u16,
        }
        .into(),
        2 => TcKeyReq {
            transaction_id: TransactionId(rng.next_u64()),
            client_op: edgy_u32(rng),
            flags: rng.below(8) as u8,
            kind: OperationKind::from_u8(1 + rng.below(5) as u8).expect("valid kind"),
            lock: LockMode::from_u8(rng.below(3) as u8).expect("valid lock"),
            table_id: edgy_u32(rng),
            table_version: edgy_u32(rng),
            key: section(rng),
            attr: (rng.below(2) == 1).then(|| section(rng)),
        }
        .into(),
        3 => TcKeyConf {
            transaction_id: TransactionId(rng.next_u64()),
            operations: edgy_u32(rng),
            committed: rng.below(2) == 1,
            gci: Gci(rng.next_u64()),
            map_version: edgy_u32(rng),
            row: None,
        }
        .into(),
        4 => TcKeyRef {
            transaction_id: TransactionId(rng.next_u64()),
            client_op: edgy_u32(rng),
            error,
            index_id: 0,
        }
        .into(),
        5 => TransIdAi {
            transaction_id: TransactionId(rng.next_u64()),
            client_op: edgy_u32(rng),
            data: section(rng),
        }
        .into(),
        6 => TcCommitReq {
            transaction_id: TransactionId(rng.next_u64()),
        }
        .into(),
        7 => TcRollbackReq {
            transaction_id: TransactionId(rng.next_u64()),
        }
        .into(),
        8 => TcRollbackConf {
            transaction_id: TransactionId(rng.next_u64()),
        }
        .into(),
        9 => CreateTabReq {
            request_id: edgy_u32(rng),
            definition: section(rng),
        }
        .into(),
        10 => CreateTabConf {
            request_id: edgy_u32(rng),
            table_id: edgy_u32(rng),
            table_version: edgy_u32(rng),
        }
        .into(),
        11 => SchemaRef {
            request_id: edgy_u32(rng),
            error,
        }
        .into(),
        12 => DropTabReq {
            request_id: edgy_u32(rng),
            name: section(rng),
        }
        .into(),
        13 => DropTabConf {
            request_id: edgy_u32(rng),
        }
        .into(),
        14 => GetTabInfoReq {
            request_id: edgy_u32(rng),
            name: section(rng),
        }
        .into(),
        15 => GetTabInfoConf {
            request_id: edgy_u32(rng),
            schema_version: edgy_u32(rng),
            definition: section(rng),
            map_version: edgy_u32(rng),
            map: section(rng),
        }
        .into(),
        16 => ListTablesReq {
            request_id: edgy_u32(rng),
        }
        .into(),
        17 => ListTablesConf {
            request_id: edgy_u32(rng),
            schema_version: edgy_u32(rng),
            names: pool
                .copy_from(&random_table_names(rng))
                .expect("test pool has room"),
        }
        .into(),
        _ => random_data_node_signal(rng, pool),
    }
}

/// 1 to 4 distinct node ids in 1..=255.
fn random_nodes(rng: &mut XorShift) -> Vec<NodeId> {
    let count = 1 + rng.below(4) as usize;
    let mut nodes = Vec::with_capacity(count);
    while nodes.len() < count {
        let node = NodeId(1 + rng.below(255) as u16);
        if !nodes.contains(&node) {
            nodes.push(node);
        }
    }
    nodes
}

/// A valid table (1 to 6 partitions) and a valid map for it.
fn random_table_and_map(rng: &mut XorShift) -> (Arc<TableDef>, Arc<PartitionMap>) {
    let mut table = random_table(rng);
    table.partitions = 1 + rng.below(6) as u32;
    table.validate().expect("random_table makes valid tables");
    let map = PartitionMap {
        table_id: table.id,
        version: edgy_u32(rng),
        bucket_partitions: (0..signal::partition::BUCKETS)
            .map(|_| rng.below(table.partitions as u64) as u32)
            .collect(),
        partitions: (0..table.partitions)
            .map(|_| PartitionPlacement {
                node_group: edgy_u32(rng),
                replicas: random_nodes(rng),
                ldm_instance: rng.next_u64() as u16,
                redo_part: edgy_u32(rng),
            })
            .collect(),
    };
    (Arc::new(table), Arc::new(map))
}

/// A valid signal of those data nodes exchange (and the partition scan).
fn random_data_node_signal(rng: &mut XorShift, pool: &'static SectionPool) -> Signal {
    let section = |rng: &mut XorShift| {
        let bytes = random_bytes(rng, 300);
        pool.copy_from(&bytes).expect("test pool has room")
    };
    let error = ErrorCode::ALL[rng.below(ErrorCode::ALL.len() as u64) as usize];
    let tc = |rng: &mut XorShift| {
        BlockRef::new(
            NodeId(1 + rng.below(255) as u16),
            BlockKind::Tc,
            rng.next_u64() as u16,
        )
    };
    let gci = |rng: &mut XorShift| Gci(rng.next_u64());
    let flag = |rng: &mut XorShift| rng.below(2) == 1;
    match rng.below(28) {
        0 => ScanPartitionReq {
            request_id: edgy_u32(rng),
            table_id: edgy_u32(rng),
            partition: edgy_u32(rng),
            start_row: edgy_u32(rng),
            max_rows: edgy_u32(rng),
        }
        .into(),
        1 => ScanPartitionConf {
            request_id: edgy_u32(rng),
            rows: section(rng),
            next_row: edgy_u32(rng),
            done: flag(rng),
        }
        .into(),
        2 => ScanPartitionRef {
            request_id: edgy_u32(rng),
            error,
        }
        .into(),
        3..=5 => {
            let chain = ReplicaChain::new(&random_nodes(rng));
            LqhKeyReq {
                tc: tc(rng),
                tc_op: edgy_u32(rng),
                chain,
                position: rng.below(chain.length as u64) as u8,
                row_id: edgy_u32(rng),
                previous_op: edgy_u32(rng),
                transaction_id: TransactionId(rng.next_u64()),
                kind: OperationKind::from_u8(1 + rng.below(5) as u8).expect("valid kind"),
                lock: LockMode::from_u8(rng.below(3) as u8).expect("valid lock"),
                table_id: edgy_u32(rng),
                partition: edgy_u32(rng),
                hash: KeyHash(rng.next_u64()),
                key: section(rng),
                attr: flag(rng).then(|| section(rng)),
                no_wait: false,
            }
            .into()
        }
        6 => LqhKeyConf {
            tc_op: edgy_u32(rng),
            ldm_op: edgy_u32(rng),
            data: flag(rng).then(|| section(rng)),
            released: flag(rng),
        }
        .into(),
        7 => LqhKeyRef {
            tc_op: edgy_u32(rng),
            error,
        }
        .into(),
        8 => CommitReq {
            ldm_op: edgy_u32(rng),
            tc_op: edgy_u32(rng),
            transaction_id: TransactionId(rng.next_u64()),
            gci: gci(rng),
        }
        .into(),
        9 => CommitConf {
            tc_op: edgy_u32(rng),
        }
        .into(),
        10 => CompleteReq {
            ldm_op: edgy_u32(rng),
            tc_op: edgy_u32(rng),
            transaction_id: TransactionId(rng.next_u64()),
        }
        .into(),
        11 => CompleteConf {
            tc_op: edgy_u32(rng),
        }
        .into(),
        12 => AbortReq {
            tc: tc(rng),
            tc_op: edgy_u32(rng),
            transaction_id: TransactionId(rng.next_u64()),
        }
        .into(),
        13 => AbortConf {
            tc_op: edgy_u32(rng),
        }
        .into(),
        14 => GcpPrepare { new_gci: gci(rng) }.into(),
        15 => GcpPrepareConf { new_gci: gci(rng) }.into(),
        16 => GcpCommit { gci: gci(rng) }.into(),
        17 => GcpCommitConf { gci: gci(rng) }.into(),
        18 => GcpCompleteRep { gci: gci(rng) }.into(),
        19 => {
            let (table, map) = random_table_and_map(rng);
            TcAddTabReq { table, map }.into()
        }
        20 => {
            let (table, map) = random_table_and_map(rng);
            LqhAddTabReq { table, map }.into()
        }
        21 => {
            let (table, map) = random_table_and_map(rng);
            DictAddTabReq {
                table,
                map,
                schema_version: edgy_u32(rng),
            }
            .into()
        }
        22 => AddTabConf {
            table_id: edgy_u32(rng),
        }
        .into(),
        23 => DropTabOrd {
            table_id: edgy_u32(rng),
        }
        .into(),
        24 => DropTabRep {
            table_id: edgy_u32(rng),
            busy: flag(rng),
        }
        .into(),
        25 => CmRegReq {
            node: NodeId(1 + rng.below(255) as u16),
            complete_gci: Gci(rng.next_u64()),
            members: random_node_set(rng),
            connected: random_node_set(rng),
        }
        .into(),
        _ => CmRegConf {
            president: NodeId(1 + rng.below(255) as u16),
            stale: random_node_set(rng),
            restored_gci: Gci(rng.next_u64()),
        }
        .into(),
    }
}

/// Up to 3 node ids in 1..=127, as a set.
fn random_node_set(rng: &mut XorShift) -> signal::NodeSet {
    let count = rng.below(4);
    signal::NodeSet::of((0..count).map(|_| NodeId(1 + rng.below(127) as u16)))
}

fn random_block(rng: &mut XorShift) -> BlockKind {
    BlockKind::from_u8(1 + rng.below(6) as u8).expect("valid block kind")
}

/// Appends one signal record: a valid one, or a head followed by a body
/// that is random, or a valid body mangled (truncated, extended, flipped,
/// a length field overwritten).
fn push_record(rng: &mut XorShift, pool: &'static SectionPool, out: &mut Vec<u8>) {
    let envelope = Envelope {
        from: BlockRef::new(NodeId(130), random_block(rng), rng.next_u64() as u16),
        to: BlockRef::new(NodeId(2), random_block(rng), rng.next_u64() as u16),
        signal: random_wire_signal(rng, pool),
    };
    let start = out.len();
    encode_signal(out, &envelope).expect("wire signals encode");
    match rng.below(6) {
        0 => {} // valid
        1 => {
            // Another signal number on this body.
            let number = if rng.below(4) == 0 {
                rng.next_u64() as u16
            } else {
                let numbers = wire_numbers();
                numbers[rng.below(numbers.len() as u64) as usize]
            };
            out[start..start + 2].copy_from_slice(&number.to_le_bytes());
        }
        2 => {
            // Random body bytes under a valid head.
            out.truncate(start + SIGNAL_HEAD_BYTES);
            let body = random_bytes(rng, 80);
            out.extend_from_slice(&body);
            let length = body.len() as u32;
            out[start + 8..start + 12].copy_from_slice(&length.to_le_bytes());
        }
        3 => {
            // A byte flipped anywhere in the record.
            let position = start + rng.below((out.len() - start) as u64) as usize;
            out[position] ^= 1 << rng.below(8);
        }
        4 => {
            // Body length off by a little or a lot.
            let length = edgy_u32(rng);
            out[start + 8..start + 12].copy_from_slice(&length.to_le_bytes());
        }
        _ => {
            // A u32 inside the body overwritten (often a section length).
            let body_len = out.len() - start - SIGNAL_HEAD_BYTES;
            if body_len >= 4 {
                let at = start + SIGNAL_HEAD_BYTES + rng.below(body_len as u64 - 3) as usize;
                out[at..at + 4].copy_from_slice(&edgy_u32(rng).to_le_bytes());
            }
        }
    }
}

/// Decodes every signal of `body`; returns how many decoded.
fn decode_all(body: &[u8], count: u16, pool: &'static SectionPool) -> Result<usize, WireError> {
    let mut decoder = SignalDecoder::new(body, count, NodeId(130), NodeId(2));
    let mut decoded = 0;
    while let Some(envelope) = decoder.next(pool)? {
        assert!(
            wire_numbers().contains(&envelope.signal.number()),
            "decoded {} which has no wire form",
            envelope.signal.name()
        );
        match &envelope.signal {
            Signal::TcKeyReq(request) => {
                assert_eq!(request.flags & !tc_key_flags::ALL, 0, "undefined flags");
            }
            Signal::LqhKeyReq(request) => {
                let nodes = request.chain.as_slice();
                assert!((1..=4).contains(&nodes.len()), "chain length");
                assert!(request.position < request.chain.length, "chain position");
                assert!(nodes.iter().all(|node| (1..=255).contains(&node.0)));
                assert_eq!(request.tc.kind, BlockKind::Tc);
            }
            Signal::ListTablesConf(conf) => {
                decode_table_names(conf.names.as_slice()).expect("decoded names are checked");
            }
            Signal::TcAddTabReq(TcAddTabReq { table, map })
            | Signal::LqhAddTabReq(LqhAddTabReq { table, map })
            | Signal::DictAddTabReq(DictAddTabReq { table, map, .. }) => {
                table.validate().expect("decoded tables are valid");
                assert_eq!(map.table_id, table.id);
                assert_eq!(map.partitions.len(), table.partitions as usize);
                assert!(map
                    .bucket_partitions
                    .iter()
                    .all(|&partition| partition < table.partitions));
            }
            _ => {}
        }
        decoded += 1;
    }
    Ok(decoded)
}

#[test]
fn random_and_mangled_frames_decode_to_errors_never_panics() {
    let pool = pool();
    let mut rng = XorShift::new(0x5eed_c0dec);
    let mut outcomes = [0usize; 2];
    for round in 0..20_000 {
        let mut frame = Vec::new();
        let start = begin_frame(&mut frame);
        let records = 1 + rng.below(4);
        for _ in 0..records {
            push_record(&mut rng, pool, &mut frame);
        }
        // The count in the header may disagree with the records.
        let count = match rng.below(4) {
            0 => rng.next_u64() as u16,
            1 => records as u16 + 1,
            _ => records as u16,
        };
        finish_frame(&mut frame, start, NodeId(130), 1, round, count);
        let header = parse_frame_header(&frame)
            .expect("a finished frame has a valid header")
            .expect("and is complete");
        let body = verify_frame(&frame, &header).expect("and a valid CRC");
        let result = decode_all(body, header.signal_count, pool);
        outcomes[result.is_ok() as usize] += 1;
        assert!(
            !matches!(result, Err(WireError::OutOfSections)),
            "every section is dropped at once, so the pool never runs dry"
        );
        // The whole frame, corrupted: header checks or the CRC catch it.
        let mut bad = frame.clone();
        for _ in 0..1 + rng.below(3) {
            let position = rng.below(bad.len() as u64) as usize;
            bad[position] = rng.next_u64() as u8;
        }
        bad.truncate(bad.len() - rng.below(2) as usize * rng.below(bad.len() as u64) as usize);
        if let Ok(Some(header)) = parse_frame_header(&bad) {
            if header.frame_bytes as usize == bad.len() {
                if let Ok(body) = verify_frame(&bad, &header) {
                    let _ = decode_all(body, header.signal_count, pool);
                }
            }
        }
    }
    assert!(outcomes[0] > 1000 && outcomes[1] > 1000, "{outcomes:?}");
    for class in 0..6 {
        assert_eq!(
            pool.free_in_class(class),
            [64, 16, 8, 4, 2, 2][class],
            "sections leaked"
        );
    }
}

#[test]
fn random_bytes_are_never_a_frame_header_that_panics() {
    let mut rng = XorShift::new(77);
    for _ in 0..50_000 {
        let mut bytes = random_bytes(&mut rng, 64);
        if rng.below(2) == 0 && bytes.len() >= 8 {
            bytes[0..4].copy_from_slice(b"TSRA");
            bytes[4..6].copy_from_slice(&1u16.to_le_bytes());
            bytes[6..8].copy_from_slice(&(FRAME_HEADER_BYTES as u16).to_le_bytes());
        }
        if let Ok(Some(header)) = parse_frame_header(&bytes) {
            assert!(header.frame_bytes as usize >= FRAME_HEADER_BYTES);
            let _ = verify_frame(&bytes, &header);
        }
    }
}

#[test]
fn valid_signals_round_trip_exactly() {
    let pool = pool();
    let mut rng = XorShift::new(3);
    for _ in 0..2000 {
        let envelope = Envelope {
            from: BlockRef::new(NodeId(130), random_block(&mut rng), rng.next_u64() as u16),
            to: BlockRef::new(NodeId(2), random_block(&mut rng), rng.next_u64() as u16),
            signal: random_wire_signal(&mut rng, pool),
        };
        let mut body = Vec::new();
        encode_signal(&mut body, &envelope).expect("encodes");
        let mut decoder = SignalDecoder::new(&body, 1, NodeId(130), NodeId(2));
        let decoded = decoder.next(pool).expect("decodes").expect("one signal");
        assert_eq!(decoded.from, envelope.from);
        assert_eq!(decoded.to, envelope.to);
        assert_eq!(
            format!("{:?}", decoded.signal),
            format!("{:?}", envelope.signal)
        );
        // Debug shows a section's length only: compare the names' bytes.
        if let (Signal::ListTablesConf(decoded), Signal::ListTablesConf(sent)) =
            (&decoded.signal, &envelope.signal)
        {
            assert_eq!(decoded, sent);
        }
        assert!(decoder.next(pool).expect("end").is_none());
    }
}

// ---------------------------------------------------------------------------
// Attribute sections and keys
// ---------------------------------------------------------------------------

fn column(name: &str, column_type: ColumnType, nullable: bool) -> ColumnDef {
    ColumnDef {
        name: name.into(),
        column_type,
        nullable,
    }
}

/// A few table shapes: one INT key; a composite CHAR + VARCHAR key (key
/// order differs from column order); a VARBINARY key and a DOUBLE key.
fn tables() -> Vec<TableDef> {
    let table = |name: &str, columns: Vec<ColumnDef>, primary_key: Vec<u16>| {
        let table = TableDef {
            indexes: Vec::new(),
            revision: 0,
            id: 1,
            version: 1,
            name: name.into(),
            columns,
            primary_key,
            partitions: 4,
            partition_key: Vec::new(),
        };
        table.validate().expect("test tables are valid");
        table
    };
    vec![
        table(
            "ints",
            vec![
                column("k", ColumnType::Int { unsigned: false }, false),
                column("v", ColumnType::BigInt { unsigned: true }, true),
            ],
            vec![0],
        ),
        table(
            "composite",
            vec![
                column("v", ColumnType::Double, true),
                column("c", ColumnType::Char(4), false),
                column("s", ColumnType::VarChar(6), false),
            ],
            vec![2, 1],
        ),
        table(
            "bytes",
            vec![
                column("b", ColumnType::VarBinary(5), false),
                column("d", ColumnType::Double, false),
                column("x", ColumnType::Char(1), true),
            ],
            vec![0, 1],
        ),
    ]
}

/// A value of a random length around what `column_type` takes.
fn random_value(rng: &mut XorShift, column_type: ColumnType) -> Vec<u8> {
    let max = column_type.max_value_bytes();
    let len = match rng.below(4) {
        0 => max,
        1 => max + 1 + rng.below(3) as usize,
        _ => rng.below(max as u64 + 1) as usize,
    };
    (0..len)
        .map(|_| match rng.below(3) {
            0 => b' ',
            1 => b'a',
            _ => rng.next_u64() as u8,
        })
        .collect()
}

/// A key section for `table`: mostly well formed, sometimes with a
/// column out of order, a NULL, a value of the wrong size, a missing or
/// extra entry.
fn random_key(rng: &mut XorShift, table: &TableDef) -> Vec<u8> {
    let mut buffer = vec![0u8; 4096];
    let mut writer = AttrWriter::new(&mut buffer);
    let mut columns = table.primary_key.clone();
    match rng.below(8) {
        0 => columns.reverse(),
        1 => {
            columns.pop();
        }
        2 => columns.push(rng.below(4) as u16),
        3 => columns[0] = rng.next_u64() as u16,
        _ => {}
    }
    for column in columns {
        let column_type = table
            .columns
            .get(column as usize)
            .map_or(ColumnType::VarBinary(9), |def| def.column_type);
        let value = random_value(rng, column_type);
        let value = (rng.below(16) != 0).then_some(&value[..]);
        writer
            .push(column, value)
            .expect("the buffer is large enough");
    }
    let used = writer.len();
    buffer.truncate(used);
    buffer
}

#[test]
fn attribute_sections_of_random_bytes_iterate_within_bounds() {
    let mut rng = XorShift::new(11);
    for _ in 0..50_000 {
        let mut bytes = random_bytes(&mut rng, 40);
        if rng.below(2) == 0 && bytes.len() >= 4 {
            // A plausible length field, so that whole entries occur.
            let length = match rng.below(3) {
                0 => NULL_LENGTH,
                1 => rng.below(8) as u16,
                _ => (bytes.len() - 4) as u16,
            };
            bytes[2..4].copy_from_slice(&length.to_le_bytes());
        }
        let mut consumed = 0;
        let mut entries = 0;
        for entry in AttrIter::new(&bytes) {
            entries += 1;
            assert!(entries <= bytes.len() / 4 + 1, "the iterator must end");
            match entry {
                Ok(entry) => consumed += attr::entry_bytes(entry.value.map_or(0, <[u8]>::len)),
                Err(error) => {
                    assert_eq!(error, ErrorCode::BadRequest);
                    break;
                }
            }
        }
        assert!(consumed <= bytes.len());
    }
}

#[test]
fn key_hash_refuses_every_malformed_key_and_accepts_well_formed_ones() {
    let mut rng = XorShift::new(12);
    let mut accepted = 0;
    for table in tables() {
        for _ in 0..20_000 {
            let key = if rng.below(4) == 0 {
                random_bytes(&mut rng, 40)
            } else {
                random_key(&mut rng, &table)
            };
            let Ok(hash) = key_hash(&table, &key) else {
                continue;
            };
            accepted += 1;
            // Accepted: exactly the key columns, in order, not NULL, fitting.
            let entries: Vec<_> = AttrIter::new(&key)
                .collect::<Result<_, _>>()
                .expect("an accepted key parses");
            assert_eq!(entries.len(), table.primary_key.len());
            for (entry, &column) in entries.iter().zip(&table.primary_key) {
                assert_eq!(entry.column, column);
                let value = entry.value.expect("key values are not NULL");
                let column_type = table.columns[column as usize].column_type;
                assert_eq!(attr::check_value(column_type, value), Ok(()));
            }
            // Trailing spaces on CHAR/VARCHAR values do not change the hash.
            let mut padded = vec![0u8; key.len() + 64];
            let mut writer = AttrWriter::new(&mut padded);
            for entry in &entries {
                let column_type = table.columns[entry.column as usize].column_type;
                let mut value = attr::canonical(column_type, entry.value.unwrap_or(&[])).to_vec();
                if column_type.pads_spaces() {
                    while value.len() < column_type.max_value_bytes() {
                        value.push(b' ');
                    }
                }
                writer.push(entry.column, Some(&value)).expect("fits");
            }
            let used = writer.len();
            assert_eq!(key_hash(&table, &padded[..used]), Ok(hash));
        }
    }
    assert!(accepted > 5000, "too few valid keys generated: {accepted}");
}

// ---------------------------------------------------------------------------
// Table definitions
// ---------------------------------------------------------------------------

/// A table definition with random (mostly valid) columns and key.
fn random_table(rng: &mut XorShift) -> TableDef {
    let column_count = 1 + rng.below(12) as usize;
    let columns = (0..column_count)
        .map(|index| {
            let n = 1 + rng.below(300) as u16;
            let column_type = match rng.below(8) {
                0 => ColumnType::Int { unsigned: false },
                1 => ColumnType::Int { unsigned: true },
                2 => ColumnType::BigInt { unsigned: false },
                3 => ColumnType::BigInt { unsigned: true },
                4 => ColumnType::Double,
                5 => ColumnType::Char(n.min(255)),
                6 => ColumnType::VarChar(n),
                _ => ColumnType::VarBinary(n),
            };
            column(&format!("c{index}"), column_type, index > 0)
        })
        .collect();
    TableDef {
        indexes: Vec::new(),
        revision: 0,
        id: rng.next_u64() as u32,
        version: rng.next_u64() as u32,
        name: format!("t{}", rng.below(1000)),
        columns,
        primary_key: vec![0],
        partitions: edgy_u32(rng),
        partition_key: Vec::new(),
    }
}

#[test]
fn table_definitions_from_random_and_mangled_bytes_are_refused_or_valid() {
    let mut rng = XorShift::new(13);
    let mut accepted = 0;
    for _ in 0..30_000 {
        let bytes = match rng.below(3) {
            0 => random_bytes(&mut rng, 120),
            _ => {
                let mut bytes = random_table(&mut rng).encode_to_vec();
                for _ in 0..1 + rng.below(3) {
                    let position = rng.below(bytes.len() as u64) as usize;
                    match rng.below(4) {
                        0 => bytes[position] = rng.next_u64() as u8,
                        1 => bytes.truncate(position),
                        2 => bytes.insert(position, rng.next_u64() as u8),
                        _ => {
                            if position + 2 <= bytes.len() {
                                let value = rng.next_u64() as u16;
                                bytes[position..position + 2].copy_from_slice(&value.to_le_bytes());
                            }
                        }
                    }
                    if bytes.is_empty() {
                        break;
                    }
                }
                bytes
            }
        };
        let Ok(table) = TableDef::decode(&bytes) else {
            continue;
        };
        accepted += 1;
        assert_eq!(table.validate(), Ok(()));
        assert!(!table.columns.is_empty() && table.columns.len() <= MAX_COLUMNS);
        assert_eq!(TableDef::decode(&table.encode_to_vec()), Ok(table));
    }
    assert!(accepted > 100, "too few definitions survived: {accepted}");
}

#[test]
fn table_definitions_that_break_a_rule_are_refused_with_the_rule() {
    let valid = random_table(&mut XorShift::new(1));
    let refused = |change: &dyn Fn(&mut TableDef), rule: &str| {
        let mut table = valid.clone();
        change(&mut table);
        let error = TableDef::decode(&table.encode_to_vec()).expect_err(rule);
        assert!(error.contains(rule), "{error:?} does not name {rule:?}");
    };
    refused(&|t| t.columns.clear(), "at least one column");
    refused(&|t| t.name.clear(), "table name");
    refused(&|t| t.name = "a b".into(), "may hold only");
    refused(&|t| t.name = "x".repeat(65), "1..=64");
    refused(&|t| t.primary_key.clear(), "primary key");
    refused(&|t| t.primary_key = vec![0, 0], "twice");
    refused(&|t| t.primary_key = vec![u16::MAX], "does not exist");
    refused(&|t| t.columns[0].nullable = true, "NOT NULL");
    refused(
        &|t| t.columns[0].column_type = ColumnType::Char(0),
        "CHAR length",
    );
    refused(
        &|t| t.columns[0].column_type = ColumnType::VarChar(16_001),
        "VARCHAR/VARBINARY length",
    );
    refused(
        &|t| {
            t.columns = (0..MAX_COLUMNS + 1)
                .map(|i| column(&format!("c{i}"), ColumnType::Double, false))
                .collect()
        },
        "at most",
    );
    refused(
        &|t| {
            t.columns = (0..3)
                .map(|i| column(&format!("c{i}"), ColumnType::VarBinary(16_000), false))
                .collect()
        },
        "row too large",
    );
    refused(
        &|t| t.columns.push(column("C0", ColumnType::Double, true)),
        "duplicate column",
    );
}
