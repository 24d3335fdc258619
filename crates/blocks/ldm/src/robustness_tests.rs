//! Robustness of the ldm against what clients put in key and attribute
//! sections (docs/design/testing.md §2, §5). The tc checks a key with
//! `key_hash` before routing it, and passes the attribute section on
//! untouched; so the ldm gets keys that `key_hash` accepted and attribute
//! sections of any bytes. Random and adversarial sections (repeated columns,
//! key columns with other values, values of the wrong size, CHAR values with
//! trailing spaces, unknown column ids up to 65535, projections that repeat
//! a column until the result does not fit, plain garbage) go through the Ldm
//! block with a `RecordingContext` against a few table shapes. A model of
//! the table predicts which operations must succeed and what every read
//! returns, so a bad input may neither crash the node nor change data.

use crate::{Ldm, LdmConfig};
use kernel::testing::{column, one_node_map};
use kernel::testing::{deliver, line, RecordingContext};
use kernel::Context;
use signal::attr::{self, key_hash, AttrIter, AttrWriter, KeyHash};
use signal::partition::bucket;
use signal::schema::{ColumnDef, ColumnType, TableDef};
use signal::section::CLASS_SIZES;
use signal::signals::*;
use signal::{BlockKind, BlockRef, ErrorCode, Gci, NodeId, Section, Signal, TransactionId};
use std::collections::HashMap;
use std::sync::Arc;
use stdx::mix::XorShift;

const NODE: NodeId = NodeId(2);
const LDM: BlockRef = BlockRef::new(NODE, BlockKind::Ldm, 0);
const TC: BlockRef = BlockRef::new(NODE, BlockKind::Tc, 0);
const DICT: BlockRef = BlockRef::new(NODE, BlockKind::Dict, 0);
/// Section pool of `RecordingContext::new()`, per class.
const POOL_COUNTS: [usize; 6] = [64, 16, 8, 4, 2, 2];
/// Distinct keys per table: few, so operations often meet existing rows.
const KEYS: u64 = 6;

/// The table shapes: mixed fixed and var columns with an INT key; a
/// composite CHAR + VARCHAR key in another order than the columns; more
/// than 64 var columns; many fixed columns with a CHAR(255) and a
/// VARBINARY key.
fn shapes() -> Vec<TableDef> {
    let table = |name: &str, columns: Vec<ColumnDef>, primary_key: Vec<u16>| {
        let table = TableDef {
            indexes: Vec::new(),
            revision: 0,
            id: 0,
            version: 1,
            name: name.into(),
            columns,
            primary_key,
            partitions: 2,
            partition_key: Vec::new(),
        };
        table.validate().expect("test tables are valid");
        table
    };
    let mut wide = vec![column("k", ColumnType::VarChar(8), false)];
    for index in 0..70 {
        let nullable = index != 40;
        wide.push(column(
            &format!("v{index}"),
            ColumnType::VarChar(1 + index % 3),
            nullable,
        ));
    }
    let mut fixed = vec![column("k", ColumnType::VarBinary(4), false)];
    for index in 0..10u16 {
        let column_type = match index % 4 {
            0 => ColumnType::Int { unsigned: true },
            1 => ColumnType::Double,
            2 => ColumnType::Char(255),
            _ => ColumnType::BigInt { unsigned: false },
        };
        fixed.push(column(&format!("f{index}"), column_type, index != 3));
    }
    vec![
        table(
            "mixed",
            vec![
                column("k", ColumnType::Int { unsigned: false }, false),
                column("v", ColumnType::BigInt { unsigned: false }, false),
                column("s", ColumnType::VarChar(40), true),
                column("b", ColumnType::VarBinary(600), true),
                column("c", ColumnType::Char(4), true),
            ],
            vec![0],
        ),
        table(
            "composite",
            vec![
                column("c", ColumnType::Char(3), false),
                column("d", ColumnType::Double, true),
                column("s", ColumnType::VarChar(5), false),
                column("n", ColumnType::Int { unsigned: false }, true),
            ],
            vec![2, 0],
        ),
        table("wide", wide, vec![0]),
        table("fixed", fixed, vec![0]),
    ]
}

/// The form a value is stored in: CHAR loses trailing spaces.
fn stored(column_type: ColumnType, value: &[u8]) -> Vec<u8> {
    match column_type {
        ColumnType::Char(_) => attr::canonical(column_type, value).to_vec(),
        _ => value.to_vec(),
    }
}

type Values = Vec<Option<Vec<u8>>>;

/// An LQHKEYCONF: the ldm's operation, the row data, whether released.
type Prepared = (u32, Option<Vec<u8>>, bool);

/// One ldm with one table, the tc's part played by the test, and a model
/// of the committed rows keyed by the canonical key.
struct Fuzz {
    ldm: Ldm,
    ctx: RecordingContext,
    table: Arc<TableDef>,
    map: Arc<PartitionMap>,
    rng: XorShift,
    model: HashMap<Vec<u8>, Values>,
    next_tc_op: u32,
    next_transaction: u64,
    /// Outcomes seen: (accepted, refused) writes and reads.
    writes: (u32, u32),
    reads: (u32, u32),
}

impl Fuzz {
    fn new(table: TableDef, seed: u64) -> Fuzz {
        let table = Arc::new(table);
        let map = Arc::new(one_node_map(&table, NODE, 1, |partition| partition));
        let mut fuzz = Fuzz {
            ldm: Ldm::new(LdmConfig {
                address: LDM,
                data_memory_bytes: 16 << 20,
                max_operations: 8,
                redo: None,
            }),
            ctx: RecordingContext::new(),
            table: Arc::clone(&table),
            map: Arc::clone(&map),
            rng: XorShift::new(seed),
            model: HashMap::new(),
            next_tc_op: 0,
            next_transaction: 0,
            writes: (0, 0),
            reads: (0, 0),
        };
        deliver(
            &mut fuzz.ldm,
            &mut fuzz.ctx,
            DICT,
            LqhAddTabReq { table, map },
        );
        assert!(matches!(
            fuzz.ctx.sent.pop().map(|sent| sent.envelope.signal),
            Some(Signal::AddTabConf(_))
        ));
        fuzz
    }

    fn section(&self, bytes: &[u8]) -> Section {
        self.ctx.pool().copy_from(bytes).expect("pool has room")
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.rng.below(bound)
    }

    /// Bytes of a value for `column_type`: a valid one mostly, sometimes
    /// one byte too long, empty or with trailing spaces.
    fn value_for(&mut self, column_type: ColumnType, seed: u64) -> Vec<u8> {
        let max = column_type.max_value_bytes();
        let mut value: Vec<u8> = match column_type.fixed_width() {
            Some(width) if !matches!(column_type, ColumnType::Char(_)) => (0..width)
                .map(|i| (seed as u8).wrapping_add(i as u8))
                .collect(),
            _ => {
                let len = (seed as usize % (max + 1)).min(max);
                (0..len)
                    .map(|i| b'a' + ((seed as usize + i) % 26) as u8)
                    .collect()
            }
        };
        // About one value in a row is made invalid, so that full rows are
        // often valid however many columns the table has.
        let columns = self.table.columns.len() as u64;
        match self.below(4 * columns) {
            0 => value.push(b'x'),
            1 => value.clear(),
            2 if column_type.pads_spaces() => value.extend_from_slice(b"  "),
            n if n < 3 + columns && column_type.pads_spaces() => {
                while value.len() < max {
                    value.push(b' ');
                }
            }
            _ => {}
        }
        value
    }

    /// The key of key number `index`, with trailing spaces on CHAR and
    /// VARCHAR values now and then (the same key for the table).
    fn key_values(&mut self, index: u64) -> Vec<(u16, Vec<u8>)> {
        let table = Arc::clone(&self.table);
        table
            .primary_key
            .iter()
            .map(|&column| {
                let column_type = table.columns[column as usize].column_type;
                let max = column_type.max_value_bytes();
                let mut value: Vec<u8> = match column_type.fixed_width() {
                    Some(width) if !matches!(column_type, ColumnType::Char(_)) => {
                        let mut value = vec![0u8; width];
                        value[0] = index as u8;
                        value
                    }
                    _ => {
                        let len = (1 + index as usize % 3).min(max);
                        vec![b'k' + index as u8; len]
                    }
                };
                if column_type.pads_spaces() && self.below(3) == 0 {
                    while value.len() < max && self.below(2) == 0 {
                        value.push(b' ');
                    }
                }
                (column, value)
            })
            .collect()
    }

    /// A key section the tc would pass on: one of the `KEYS` keys, or
    /// random bytes that `key_hash` happened to accept (else `None`: the
    /// tc refuses it and the ldm never sees it).
    fn key(&mut self) -> Option<Vec<u8>> {
        if self.below(10) == 0 {
            let len = self.below(24) as usize;
            let bytes: Vec<u8> = (0..len).map(|_| self.rng.next_u64() as u8).collect();
            return key_hash(&self.table, &bytes).is_ok().then_some(bytes);
        }
        let index = self.below(KEYS);
        let values = self.key_values(index);
        Some(encode(values.iter().map(|(c, v)| (*c, Some(&v[..])))))
    }

    /// An attribute section to write: a full row of valid values, then
    /// perturbations (unknown columns, NULLs, wrong sizes, repeats, key
    /// columns with equal or other values); or plain garbage.
    fn changes(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        let table = Arc::clone(&self.table);
        let columns = table.columns.len() as u64;
        match self.below(12) {
            0 => return None,
            1 => {
                let len = self.below(40) as usize;
                return Some((0..len).map(|_| self.rng.next_u64() as u8).collect());
            }
            _ => {}
        }
        let mut entries: Vec<(u16, Option<Vec<u8>>)> = Vec::new();
        if self.below(3) != 0 {
            for (index, def) in table.columns.iter().enumerate() {
                if table.primary_key.contains(&(index as u16)) && self.below(4) != 0 {
                    continue;
                }
                let seed = self.rng.next_u64();
                let value = self.value_for(def.column_type, seed);
                entries.push((index as u16, Some(value)));
            }
        }
        for _ in 0..self.below(5) {
            let column = match self.below(8) {
                0 => columns as u16 + self.below(3) as u16,
                1 => u16::MAX,
                _ => self.below(columns) as u16,
            };
            let value = match table.columns.get(column as usize) {
                _ if self.below(6) == 0 => None,
                Some(def) if table.primary_key.contains(&column) && self.below(2) == 0 => {
                    // The key's own value, maybe padded: allowed unchanged.
                    let position = table.primary_key.iter().position(|&k| k == column);
                    let key_value = position
                        .and_then(|p| AttrIter::new(key).nth(p))
                        .and_then(Result::ok)
                        .and_then(|entry| entry.value)
                        .map(<[u8]>::to_vec);
                    match key_value {
                        Some(mut value) if def.column_type.pads_spaces() => {
                            value.push(b' ');
                            Some(value)
                        }
                        other => other,
                    }
                }
                Some(def) => {
                    let seed = self.rng.next_u64();
                    Some(self.value_for(def.column_type, seed))
                }
                None => Some(vec![1, 2, 3]),
            };
            let at = self.below(entries.len() as u64 + 1) as usize;
            entries.insert(at, (column, value));
        }
        let mut bytes = encode(entries.iter().map(|(c, v)| (*c, v.as_deref())));
        match self.below(16) {
            0 if !bytes.is_empty() => {
                let cut = self.below(bytes.len() as u64) as usize;
                bytes.truncate(cut);
            }
            1 => bytes.extend_from_slice(&[0, 0, 0xFE, 0xFF]),
            _ => {}
        }
        Some(bytes)
    }

    /// A read projection: none, empty, valid or unknown column ids,
    /// columns repeated until the result outgrows its section, odd length.
    fn projection(&mut self) -> Option<Vec<u8>> {
        let columns = self.table.columns.len() as u64;
        let ids: Vec<u16> = match self.below(8) {
            0 => return None,
            1 => Vec::new(),
            2 => {
                let widest = (0..columns as usize)
                    .max_by_key(|&c| self.table.columns[c].column_type.max_value_bytes())
                    .unwrap_or(0);
                vec![widest as u16; 2 * columns as usize + self.below(3) as usize]
            }
            3 => vec![u16::MAX, 0],
            4 => vec![columns as u16],
            _ => (0..1 + self.below(6))
                .map(|_| self.below(columns) as u16)
                .collect(),
        };
        let mut bytes: Vec<u8> = ids.iter().flat_map(|id| id.to_le_bytes()).collect();
        if self.below(10) == 0 {
            bytes.push(7);
        }
        Some(bytes)
    }

    /// The canonical form of a key the model files rows under.
    fn canonical_key(&self, key: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for (entry, &column) in AttrIter::new(key).zip(&self.table.primary_key) {
            let entry = entry.expect("keys reaching the ldm parse");
            let column_type = self.table.columns[column as usize].column_type;
            let value = attr::canonical(column_type, entry.value.expect("key values are set"));
            out.extend_from_slice(&(value.len() as u16).to_le_bytes());
            out.extend_from_slice(value);
        }
        out
    }

    /// The row a write of `changes` with `key` makes from `base` (`None`:
    /// from nothing), or `None` when the ldm must refuse it.
    fn expected_image(&self, key: &[u8], base: Option<&Values>, changes: &[u8]) -> Option<Values> {
        let table = &self.table;
        let mut row: Values = match base {
            Some(base) => base.clone(),
            None => vec![None; table.columns.len()],
        };
        let key_entries: Vec<_> = AttrIter::new(key).map(|e| e.expect("valid key")).collect();
        for (entry, &column) in key_entries.iter().zip(&table.primary_key) {
            let column_type = table.columns[column as usize].column_type;
            row[column as usize] = entry.value.map(|value| stored(column_type, value));
        }
        for entry in AttrIter::new(changes) {
            let entry = entry.ok()?;
            let def = table.columns.get(entry.column as usize)?;
            if let Some(position) = table.primary_key.iter().position(|&k| k == entry.column) {
                let given = entry.value?;
                let key_value = key_entries[position].value?;
                if !attr::key_values_equal(def.column_type, given, key_value) {
                    return None;
                }
                continue;
            }
            match entry.value {
                Some(value) => {
                    attr::check_value(def.column_type, value).ok()?;
                    row[entry.column as usize] = Some(stored(def.column_type, value));
                }
                None if def.nullable => row[entry.column as usize] = None,
                None => return None,
            }
        }
        let complete = table
            .columns
            .iter()
            .zip(&row)
            .all(|(def, value)| def.nullable || value.is_some());
        complete.then_some(row)
    }

    /// What a read with `projection` of `row` returns, or `None` when the
    /// ldm must refuse it (bad projection, or a result too large).
    fn expected_read(&self, row: &Values, projection: &[u8]) -> Option<Vec<u8>> {
        let columns: Vec<u16> = if projection.is_empty() {
            (0..row.len() as u16).collect()
        } else {
            if !projection.len().is_multiple_of(2) {
                return None;
            }
            projection
                .chunks_exact(2)
                .map(|pair| u16::from_le_bytes([pair[0], pair[1]]))
                .collect()
        };
        let mut entries = Vec::new();
        for column in columns {
            let value = row.get(column as usize)?;
            entries.push((column, value.as_deref()));
        }
        let read_max: usize = self
            .table
            .columns
            .iter()
            .map(|def| attr::entry_bytes(def.column_type.max_value_bytes()))
            .sum();
        let bytes = encode(entries.into_iter());
        (bytes.len() <= read_max).then_some(bytes)
    }

    fn route(&self, key: &[u8]) -> (u32, KeyHash) {
        let hash = key_hash(&self.table, key).expect("only keys the tc accepts reach the ldm");
        (self.map.bucket_partitions[bucket(hash) as usize], hash)
    }

    /// Sends one LQHKEYREQ; returns the answer.
    fn send(
        &mut self,
        transaction_id: TransactionId,
        kind: OperationKind,
        lock: LockMode,
        key: &[u8],
        attr: Option<&[u8]>,
    ) -> (u32, Result<Prepared, ErrorCode>) {
        let (partition, hash) = self.route(key);
        let tc_op = self.next_tc_op;
        self.next_tc_op += 1;
        let request = LqhKeyReq {
            tc: TC,
            tc_op,
            chain: ReplicaChain::new(&[NODE]),
            position: 0,
            row_id: u32::MAX,
            previous_op: u32::MAX,
            transaction_id,
            kind,
            lock,
            table_id: self.table.id,
            partition,
            hash,
            key: self.section(key),
            attr: attr.map(|bytes| self.section(bytes)),
            no_wait: false,
        };
        deliver(&mut self.ldm, &mut self.ctx, TC, request);
        let answer = self.ctx.sent.pop().expect("every LQHKEYREQ is answered");
        assert!(self.ctx.sent.is_empty(), "one answer per request");
        assert_eq!(answer.envelope.to, TC);
        let result = match answer.envelope.signal {
            Signal::LqhKeyConf(conf) => {
                assert_eq!(conf.tc_op, tc_op);
                let data = conf.data.map(|data| data.as_slice().to_vec());
                Ok((conf.ldm_op, data, conf.released))
            }
            Signal::LqhKeyRef(refusal) => {
                assert_eq!(refusal.tc_op, tc_op);
                Err(refusal.error)
            }
            other => panic!("expected LqhKeyConf or LqhKeyRef, got {other:?}"),
        };
        (tc_op, result)
    }

    fn expect_signal(&mut self, what: &str) {
        let sent = self.ctx.sent.pop().expect(what);
        assert!(self.ctx.sent.is_empty(), "only {what}");
        assert_eq!(sent.envelope.signal.name(), what);
    }

    fn commit(&mut self, transaction_id: TransactionId, tc_op: u32, ldm_op: u32) {
        let gci = Gci::from_parts(1, tc_op);
        let commit = CommitReq {
            ldm_op,
            tc_op,
            transaction_id,
            gci,
        };
        deliver(&mut self.ldm, &mut self.ctx, TC, commit);
        self.expect_signal("CommitConf");
        let complete = CompleteReq {
            ldm_op,
            tc_op,
            transaction_id,
        };
        deliver(&mut self.ldm, &mut self.ctx, TC, complete);
        self.expect_signal("CompleteConf");
    }

    fn abort(&mut self, transaction_id: TransactionId, tc_op: u32) {
        let abort = AbortReq {
            tc: TC,
            tc_op,
            transaction_id,
        };
        deliver(&mut self.ldm, &mut self.ctx, TC, abort);
        self.expect_signal("AbortConf");
    }

    fn transaction(&mut self) -> TransactionId {
        self.next_transaction += 1;
        TransactionId(130 << 48 | self.next_transaction)
    }

    /// One random operation, checked against the model.
    fn step(&mut self) {
        let Some(key) = self.key() else {
            return;
        };
        let canonical = self.canonical_key(&key);
        let transaction_id = self.transaction();
        let existing = self.model.get(&canonical).cloned();
        let kind = OperationKind::from_u8(1 + self.below(5) as u8).expect("valid kind");
        if kind == OperationKind::Read {
            let lock = LockMode::from_u8(self.below(3) as u8).expect("valid lock");
            let projection = self.projection();
            let expected = existing
                .as_ref()
                .and_then(|row| self.expected_read(row, projection.as_deref().unwrap_or(&[])));
            let (tc_op, answer) =
                self.send(transaction_id, kind, lock, &key, projection.as_deref());
            match (answer, expected) {
                (Ok((ldm_op, data, released)), Some(expected)) => {
                    self.reads.0 += 1;
                    assert_eq!(data, Some(expected), "read of {key:?} {projection:?}");
                    assert_eq!(released, lock == LockMode::CommittedRead);
                    if !released {
                        // A locked read holds its lock until commit or abort.
                        if self.below(2) == 0 {
                            self.commit(transaction_id, tc_op, ldm_op);
                        } else {
                            self.abort(transaction_id, tc_op);
                        }
                    }
                }
                (Err(_), None) => self.reads.1 += 1,
                (answer, expected) => panic!(
                    "read of {key:?} with projection {projection:?}: ldm answered {answer:?}, \
                     model expected {expected:?}"
                ),
            }
            return;
        }
        let changes = self.changes(&key);
        let expected = match (kind, &existing) {
            (OperationKind::Insert, Some(_)) => None,
            (OperationKind::Update | OperationKind::Delete, None) => None,
            (OperationKind::Delete, Some(_)) => Some(None),
            (_, base) => self
                .expected_image(&key, base.as_ref(), changes.as_deref().unwrap_or(&[]))
                .map(Some),
        };
        let (tc_op, answer) = self.send(
            transaction_id,
            kind,
            LockMode::Exclusive,
            &key,
            changes.as_deref(),
        );
        match (answer, expected) {
            (Ok((ldm_op, None, false)), Some(after)) => {
                self.writes.0 += 1;
                if self.below(4) == 0 {
                    self.abort(transaction_id, tc_op);
                } else {
                    self.commit(transaction_id, tc_op, ldm_op);
                    match after {
                        Some(row) => self.model.insert(canonical.clone(), row),
                        None => self.model.remove(&canonical),
                    };
                }
            }
            (Err(_), None) => self.writes.1 += 1,
            (answer, expected) => panic!(
                "{kind:?} of {key:?} with changes {changes:?} on {existing:?}: ldm answered \
                 {answer:?}, model expected {expected:?}"
            ),
        }
        self.check_key(&key, &canonical);
    }

    /// A committed read of the whole row matches the model.
    fn check_key(&mut self, key: &[u8], canonical: &[u8]) {
        let transaction_id = self.transaction();
        let (_, answer) = self.send(
            transaction_id,
            OperationKind::Read,
            LockMode::CommittedRead,
            key,
            None,
        );
        let expected = self.model.get(canonical).map(|row| {
            self.expected_read(row, &[])
                .expect("a whole row always fits its read section")
        });
        match (answer, expected) {
            (Ok((_, data, true)), Some(expected)) => assert_eq!(data, Some(expected)),
            (Err(ErrorCode::NoSuchRow), None) => {}
            (answer, expected) => {
                panic!("row of {key:?}: ldm has {answer:?}, model has {expected:?}")
            }
        }
    }

    /// Nothing is held and every section is back in the pool.
    fn assert_quiet(&self) {
        assert!(self.ctx.sent.is_empty());
        assert_eq!(self.ldm.operations_in_use(), 0, "operation records leaked");
        for (class, &count) in POOL_COUNTS.iter().enumerate() {
            assert_eq!(
                self.ctx.pool().free_in_class(class),
                count,
                "sections of {} bytes leaked",
                CLASS_SIZES[class]
            );
        }
        assert_eq!(self.ldm.rows(self.table.id), self.model.len() as u64);
    }
}

fn encode<'a>(entries: impl Iterator<Item = (u16, Option<&'a [u8]>)>) -> Vec<u8> {
    let mut buffer = vec![0u8; 1 << 16];
    let mut writer = AttrWriter::new(&mut buffer);
    for (column, value) in entries {
        writer.push(column, value).expect("test sections fit");
    }
    let used = writer.len();
    buffer.truncate(used);
    buffer
}

#[test]
fn random_and_adversarial_sections_never_crash_the_ldm_or_change_data_wrongly() {
    for (seed, table) in shapes().into_iter().enumerate() {
        let name = table.name.clone();
        let mut fuzz = Fuzz::new(table, 0xF022 + seed as u64);
        for _ in 0..20_000 {
            fuzz.step();
        }
        fuzz.assert_quiet();
        let (writes, reads) = (fuzz.writes, fuzz.reads);
        assert!(
            writes.0 > 1000 && writes.1 > 1000 && reads.0 > 250 && reads.1 > 250,
            "table {name}: too few of each outcome: writes {writes:?}, reads {reads:?}"
        );
    }
}

#[test]
fn an_update_of_a_var_column_beyond_the_64th_changes_exactly_that_column() {
    let table = shapes().remove(2);
    assert!(
        table.columns.len() > 66,
        "the wide table has > 64 var columns"
    );
    let mut fuzz = Fuzz::new(table, 1);
    let key = encode([(0u16, Some(&b"k"[..]))].into_iter());
    let canonical = fuzz.canonical_key(&key);
    // Insert with every column set: v40 is NOT NULL; v62..v65 hold values.
    let full: Vec<(u16, Vec<u8>)> = (1..fuzz.table.columns.len() as u16)
        .map(|column| (column, vec![b'0' + (column % 10) as u8]))
        .collect();
    let insert = encode(full.iter().map(|(c, v)| (*c, Some(&v[..]))));
    let transaction_id = fuzz.transaction();
    let (tc_op, answer) = fuzz.send(
        transaction_id,
        OperationKind::Insert,
        LockMode::Exclusive,
        &key,
        Some(&insert),
    );
    let (ldm_op, _, _) = answer.expect("insert of a full row");
    fuzz.commit(transaction_id, tc_op, ldm_op);
    let row = fuzz
        .expected_image(&key, None, &insert)
        .expect("valid insert");
    fuzz.model.insert(canonical.clone(), row);
    fuzz.check_key(&key, &canonical);
    // Column 66 is var column 65: update it alone.
    let update = encode([(66u16, Some(&b"zz"[..]))].into_iter());
    let transaction_id = fuzz.transaction();
    let (tc_op, answer) = fuzz.send(
        transaction_id,
        OperationKind::Update,
        LockMode::Exclusive,
        &key,
        Some(&update),
    );
    let (ldm_op, _, _) = answer.expect("update of one column");
    fuzz.commit(transaction_id, tc_op, ldm_op);
    let base = fuzz.model[&canonical].clone();
    let row = fuzz
        .expected_image(&key, Some(&base), &update)
        .expect("valid update");
    assert_eq!(row[66].as_deref(), Some(&b"zz"[..]));
    fuzz.model.insert(canonical.clone(), row);
    fuzz.check_key(&key, &canonical);
    fuzz.assert_quiet();
}

#[test]
fn api_requests_addressed_to_the_ldm_are_refused_not_panicked_on() {
    let mut fuzz = Fuzz::new(shapes().remove(0), 3);
    let api = BlockRef::new(NodeId(130), BlockKind::Api, 0);
    let transaction_id = TransactionId(130 << 48 | 1);
    let requests: Vec<Signal> = vec![
        TcKeyReq {
            transaction_id,
            client_op: 4,
            flags: tc_key_flags::START,
            kind: OperationKind::Read,
            lock: LockMode::CommittedRead,
            table_id: 0,
            table_version: 1,
            key: fuzz.section(b"\x00\x00\x04\x00\x01\x00\x00\x00"),
            attr: None,
        }
        .into(),
        TcCommitReq { transaction_id }.into(),
        TcRollbackReq { transaction_id }.into(),
        CreateTabReq {
            request_id: 5,
            definition: fuzz.section(b"garbage"),
        }
        .into(),
        DropTabReq {
            request_id: 6,
            name: fuzz.section(b"t"),
        }
        .into(),
        GetTabInfoReq {
            request_id: 7,
            name: fuzz.section(b"t"),
        }
        .into(),
        ApiRegReq {
            protocol_version: 1,
            token: signal::signals::ApiToken::NONE,
        }
        .into(),
    ];
    for request in requests {
        deliver(&mut fuzz.ldm, &mut fuzz.ctx, api, request);
    }
    let refused = |client_op| TcKeyRef {
        transaction_id,
        client_op,
        error: ErrorCode::BadRequest,
        index_id: 0,
    };
    let schema_refused = |request_id| SchemaRef {
        request_id,
        error: ErrorCode::BadRequest,
    };
    assert_eq!(
        fuzz.ctx.take_trace(),
        vec![
            line(LDM, api, refused(4)),
            line(LDM, api, refused(u32::MAX)),
            line(LDM, api, refused(u32::MAX)),
            line(LDM, api, schema_refused(5)),
            line(LDM, api, schema_refused(6)),
            line(LDM, api, schema_refused(7)),
            line(
                LDM,
                api,
                ApiRegRef {
                    error: ErrorCode::BadRequest
                }
            ),
        ]
    );
    fuzz.assert_quiet();
}
