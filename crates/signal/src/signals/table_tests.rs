//! Tests of the signal table as a whole: numbers and names are unique,
//! every wire signal round-trips through the codec, every API request has
//! a receiver and a refusal (and nothing else has either), and the signal
//! list in docs/wire-format.md is the table's.

use super::*;
use crate::codec::{encode_signal, is_api_request, SignalDecoder};
use crate::ids::BlockKind;
use crate::section::SectionPool;
use std::collections::HashSet;

/// A value of a field type for [`sample_wire_signals`]: nonzero, and
/// valid for every check of the signal table (the few signals whose
/// checks tie fields together are fixed up by [`valid_samples`]).
pub(crate) trait Sample {
    fn sample(pool: &'static SectionPool) -> Self;
}

macro_rules! sample {
    ($($type:ty => $value:expr;)*) => {$(
        impl Sample for $type {
            fn sample(_pool: &'static SectionPool) -> Self {
                $value
            }
        }
    )*};
}

sample! {
    u8 => 1;
    u16 => 0x0102;
    u32 => 0x0304_0506;
    u64 => 0x0708_090a_0b0c_0d0e;
    bool => true;
    TransactionId => TransactionId(130 << 48 | 9);
    Gci => Gci(0x11_0000_0022);
    KeyHash => KeyHash(0xdead_beef_0bad_f00d);
    NodeId => NodeId(7);
    NodeSet => NodeSet::of([NodeId(1), NodeId(64), NodeId(65), NodeId(127)]);
    [u8; 16] => [0x5a; 16];
    [u8; 32] => [0xa5; 32];
    ApiToken => ApiToken { allocation: 0x1122_3344_5566_7788, mac: [0x3c; 32] };
    BlockRef => BlockRef::new(NodeId(3), BlockKind::Tc, 2);
    ReplicaChain => ReplicaChain::new(&[NodeId(2), NodeId(3), NodeId(9)]);
    OperationKind => OperationKind::Update;
    LockMode => LockMode::Shared;
    ErrorCode => ErrorCode::LockWaitTimeout;
    Arc<TableDef> => Arc::new(sample_table());
    Arc<PartitionMap> => Arc::new(sample_map());
}

impl Sample for Section {
    fn sample(pool: &'static SectionPool) -> Self {
        pool.copy_from(b"section bytes").expect("room")
    }
}

impl<T: Sample> Sample for Option<T> {
    fn sample(pool: &'static SectionPool) -> Self {
        Some(T::sample(pool))
    }
}

impl Sample for ReadRow {
    fn sample(pool: &'static SectionPool) -> Self {
        ReadRow {
            client_op: 12,
            data: Section::sample(pool),
        }
    }
}

fn sample_table() -> TableDef {
    use crate::schema::{ColumnDef, ColumnType};
    TableDef {
        indexes: Vec::new(),
        revision: 0,
        id: 5,
        version: 2,
        name: "accounts".into(),
        columns: vec![ColumnDef {
            name: "id".into(),
            column_type: ColumnType::BigInt { unsigned: true },
            nullable: false,
        }],
        primary_key: vec![0],
        partitions: 2,
        partition_key: Vec::new(),
    }
}

fn sample_map() -> PartitionMap {
    PartitionMap {
        table_id: 5,
        version: 4,
        bucket_partitions: (0..crate::partition::BUCKETS)
            .map(|bucket| bucket % 2)
            .collect(),
        partitions: (0..2)
            .map(|partition| PartitionPlacement {
                node_group: 0,
                replicas: vec![NodeId(2), NodeId(3)],
                ldm_instance: partition as u16,
                redo_part: partition,
            })
            .collect(),
    }
}

fn pool() -> &'static SectionPool {
    SectionPool::leak([256, 16, 4, 2, 1, 1])
}

/// Every wire signal's sample, with the fields that checks tie together
/// made consistent.
fn valid_samples(pool: &'static SectionPool) -> Vec<Signal> {
    let mut signals = sample_wire_signals(pool);
    for signal in &mut signals {
        match signal {
            Signal::ListTablesConf(conf) => {
                let mut names = Vec::new();
                crate::codec::encode_table_names(&mut names, ["a", "bc"]).expect("fits");
                conf.names = pool.copy_from(&names).expect("room");
            }
            Signal::DictTakeoverReq(request) => {
                let mut tables = Vec::new();
                crate::codec::encode_table_versions(
                    &mut tables,
                    [(0, 1, 0), (7, 3, 2)].into_iter(),
                )
                .expect("fits");
                request.tables = pool.copy_from(&tables).expect("room");
            }
            Signal::DictTakeoverConf(conf) => {
                let mut tables = Vec::new();
                crate::codec::encode_table_versions(&mut tables, [(2, 9, 1)].into_iter())
                    .expect("fits");
                conf.tables = pool.copy_from(&tables).expect("room");
            }
            Signal::SchemaSyncReq(request) => {
                request.offset = 0;
                request.total_bytes = request.data.len() as u32 + 5;
            }
            // Only a locking read may decline to wait.
            Signal::LqhKeyReq(request) => request.kind = OperationKind::Read,
            _ => {}
        }
    }
    signals
}

#[test]
fn numbers_and_names_are_unique_and_in_declaration_order() {
    let mut numbers = HashSet::new();
    let mut names = HashSet::new();
    for info in SIGNALS {
        assert!(
            numbers.insert(info.number),
            "{} repeats a number",
            info.name
        );
        assert!(names.insert(info.name), "{} declared twice", info.name);
    }
    // Grouped by protocol: numbers rise through the table.
    for pair in SIGNALS.windows(2) {
        assert!(
            pair[0].number < pair[1].number,
            "{} ({}) is declared after {} ({})",
            pair[1].name,
            pair[1].number,
            pair[0].name,
            pair[0].number
        );
    }
}

#[test]
fn every_wire_signal_round_trips() {
    let pool = pool();
    let signals = valid_samples(pool);
    let wire: Vec<&SignalInfo> = SIGNALS
        .iter()
        .filter(|info| info.class != SignalClass::Local)
        .collect();
    assert_eq!(signals.len(), wire.len(), "one sample per wire signal");
    for (signal, info) in signals.into_iter().zip(wire) {
        assert_eq!((signal.number(), signal.name()), (info.number, info.name));
        let envelope = Envelope {
            from: BlockRef::new(NodeId(2), BlockKind::Dict, 0),
            to: BlockRef::new(NodeId(3), BlockKind::Tc, 1),
            signal,
        };
        let mut out = Vec::new();
        encode_signal(&mut out, &envelope).expect("a wire signal encodes");
        let mut decoder = SignalDecoder::new(&out, 1, NodeId(2), NodeId(3));
        let decoded = decoder
            .next(pool)
            .unwrap_or_else(|error| panic!("{} does not decode: {error}", info.name))
            .expect("one signal");
        assert_eq!(
            format!("{:?}", decoded.signal),
            format!("{:?}", envelope.signal),
            "{} changed on its way",
            info.name
        );
        assert!(decoder.next(pool).expect("end").is_none());
        // Every byte of the body is a field: cutting the last one fails.
        let mut short = out.clone();
        short.pop();
        let body_bytes = u32::from_le_bytes(short[8..12].try_into().unwrap()) - 1;
        short[8..12].copy_from_slice(&body_bytes.to_le_bytes());
        let mut decoder = SignalDecoder::new(&short, 1, NodeId(2), NodeId(3));
        assert!(
            decoder.next(pool).is_err(),
            "{} decodes without its last byte",
            info.name
        );
    }
}

#[test]
fn every_api_request_has_a_receiver_and_a_refusal_and_nothing_else_does() {
    let pool = pool();
    let mut api_requests = 0;
    for signal in valid_samples(pool) {
        let name = signal.name();
        let info = SIGNALS
            .iter()
            .find(|info| info.name == name)
            .expect("declared");
        let is_request = info.class == SignalClass::ApiRequest;
        assert_eq!(is_api_request(signal.number()), is_request, "{name}");
        assert_eq!(signal.api_receiver().is_some(), is_request, "{name}");
        match signal.refusal() {
            Some(refusal) => {
                assert!(is_request, "{name} is not an API request but has a refusal");
                api_requests += 1;
                let refusal_info = SIGNALS
                    .iter()
                    .find(|info| info.number == refusal.number())
                    .expect("the refusal is declared");
                assert_eq!(
                    refusal_info.class,
                    SignalClass::ApiReply,
                    "{name} is refused with {}, which an API node does not receive",
                    refusal.name()
                );
                assert_eq!(info.refused_with, Some(refusal.name()));
                assert!(
                    format!("{refusal:?}").contains("BadRequest"),
                    "{name}'s refusal says BadRequest: {refusal:?}"
                );
            }
            None => assert!(!is_request, "the API request {name} has no refusal"),
        }
    }
    assert!(api_requests >= 10, "the API requests were found");
}

#[test]
fn local_signals_have_no_wire_form() {
    for info in SIGNALS {
        let local = info.class == SignalClass::Local;
        let mut reader = crate::codec::Reader::new(&[]);
        let decoded = decode_body(
            info.number,
            &mut reader,
            crate::codec::Sections::all(pool()),
        );
        if local {
            assert!(
                matches!(decoded, Err(crate::codec::WireError::UnknownSignal(_))),
                "{} is node-local but its number decodes",
                info.name
            );
        } else {
            assert!(
                !matches!(decoded, Err(crate::codec::WireError::UnknownSignal(_))),
                "{} has a wire form but its number is unknown",
                info.name
            );
        }
    }
}

/// The signal list in docs/wire-format.md, as the table renders it.
fn rendered_signal_list() -> String {
    let mut out = String::from(
        "| number | signal | class | sender -> receiver | refused with |\n\
         |---:|---|---|---|---|\n",
    );
    for info in SIGNALS {
        let class = match info.class {
            SignalClass::ApiRequest => "API request",
            SignalClass::ApiReply => "API reply",
            SignalClass::Node => "between nodes",
            SignalClass::Local => "node-local",
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} -> {} | {} |\n",
            info.number,
            info.name,
            class,
            info.from.join(", "),
            info.to.join(", "),
            info.refused_with.unwrap_or("")
        ));
    }
    out
}

const LIST_START: &str = "<!-- signal list: generated from the signal table -->\n";
const LIST_END: &str = "<!-- end of signal list -->";

/// The list in docs/wire-format.md is the table's. After changing the
/// table, `TESSERA_WRITE_DOCS=1 cargo test -p signal signal_list` rewrites it.
#[test]
fn the_signal_list_in_the_docs_is_the_table() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/wire-format.md");
    let text = std::fs::read_to_string(path).expect("docs/wire-format.md");
    let start = text.find(LIST_START).expect("the list's start marker") + LIST_START.len();
    let end = start + text[start..].find(LIST_END).expect("the list's end marker");
    let rendered = rendered_signal_list();
    if std::env::var_os("TESSERA_WRITE_DOCS").is_some() {
        let updated = format!("{}{}{}", &text[..start], rendered, &text[end..]);
        std::fs::write(path, updated).expect("write docs/wire-format.md");
        return;
    }
    assert_eq!(
        text[start..end],
        rendered,
        "docs/wire-format.md's signal list differs from the signal table: \
         run TESSERA_WRITE_DOCS=1 cargo test -p signal signal_list"
    );
}
