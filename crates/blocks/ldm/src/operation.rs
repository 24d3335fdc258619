//! Operation records (NDB's LQH operation records): one per operation in
//! progress on this ldm, from LQHKEYREQ until COMPLETE (or, for a committed
//! read, until its answer). Sized from config at start; seizing one never
//! allocates. Each record's state is explicit
//! (docs/design/processes-and-blocks.md §2, docs/design/transactions.md §7).

use signal::attr::KeyHash;
use signal::signals::{LockMode, OperationKind, ReplicaChain};
use signal::{BlockKind, BlockRef, NodeId, Section, TransactionId};
use stdx::FixedMap;

/// No operation.
pub const NIL: u32 = u32::MAX;

/// Where an operation is in its life.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum OpState {
    /// Not in use.
    Free,
    /// Queued on a row lock.
    Waiting,
    /// Lock held, after-image kept, row untouched.
    Prepared,
    /// After-image installed (or nothing to install) at this GCI.
    Committed {
        /// The transaction's GCI.
        gci: u64,
    },
}

/// What the operation will do to the row at commit.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ImageKind {
    /// Nothing (a read).
    None,
    /// Install the after-image.
    Row,
    /// Delete the row.
    Deleted,
}

/// One operation record.
pub struct Operation {
    /// Life-cycle state.
    pub state: OpState,
    /// Transaction.
    pub transaction_id: TransactionId,
    /// The tc that sent it.
    pub tc: BlockRef,
    /// The tc's operation record.
    pub tc_op: u32,
    /// What it does.
    pub kind: OperationKind,
    /// Lock mode it holds or waits for (CommittedRead for lock-free reads).
    pub lock: LockMode,
    /// Table.
    pub table_id: u32,
    /// Partition.
    pub partition: u32,
    /// Key hash.
    pub hash: KeyHash,
    /// Row it is queued on or holds (slot reference), or NIL.
    pub row: u32,
    /// Key section (kept until prepared, for restarts after a lock wait).
    pub key: Option<Section>,
    /// Attribute section (kept until prepared).
    pub attr: Option<Section>,
    /// The after-image.
    pub image: Option<Section>,
    /// What commit does.
    pub image_kind: ImageKind,
    /// A var slot reserved at prepare for the after-image, or NIL.
    pub new_var: u32,
    /// Ordered-index nodes promised at prepare for an update that moves
    /// the row in secondary indexes (0: none).
    pub index_nodes: u8,
    /// Its table's build epoch when it was prepared (`alter`).
    pub build_epoch: u32,
    /// Whether its lock is granted (else it waits).
    pub granted: bool,
    /// The partition's replicas, primary first.
    pub chain: ReplicaChain,
    /// This replica's position in `chain` (0: primary).
    pub position: u8,
    /// The previous replica's operation record (NIL at the primary).
    pub previous_op: u32,
    /// At a backup: the row id the primary chose (NIL at the primary).
    pub target_row: u32,
    /// The prepare was passed on to the next replica (so is an abort).
    pub forwarded: bool,
    /// At the primary: this operation took a new row slot (an insert of an
    /// absent key); backups place the row with an Insert at the same id.
    pub new_row: bool,
    /// A write at a restarting node's partition being copied: applied by
    /// row id at commit, holding no lock and logging nothing (`copy`).
    pub applier: bool,
    /// A locking read asked not to wait: a lock not granted at once
    /// fails it with LockNotAvailable (NOWAIT, SKIP LOCKED).
    pub no_wait: bool,
    /// Next operation in the row's lock queue.
    pub next_in_row: u32,
    /// On its transaction's list of prepared row images here
    /// (`own_writes`): the neighbours there, NIL at the ends.
    pub(crate) written_prev: u32,
    pub(crate) written_next: u32,
    /// Whether it is on that list.
    pub(crate) written_listed: bool,
    /// Room reserved in a redo part for this write's record: (the ldm's
    /// local part index, record bytes). Given back at commit or release.
    pub redo_reservation: Option<(usize, usize)>,
    next_free: u32,
}

impl Operation {
    /// Whether this replica is the last of its chain (it answers the tc).
    pub fn is_last_replica(&self) -> bool {
        self.position + 1 >= self.chain.length
    }

    /// Records that this operation prepared the insert of a new row at
    /// `row` (it alone holds the row's lock) with after-image `image`.
    pub fn prepared_new_row(&mut self, row: u32, image: Section) {
        self.row = row;
        self.granted = true;
        self.next_in_row = NIL;
        self.image = Some(image);
        self.image_kind = ImageKind::Row;
        self.new_row = true;
        self.state = OpState::Prepared;
    }

    /// Records a write that a restarting node's partition being copied
    /// applies at commit by row id (`copy`): the primary's after-image
    /// (none for a delete), and no row or lock here.
    pub(crate) fn prepared_to_apply(&mut self, image: Option<Section>) -> crate::prepare::Outcome {
        self.image_kind = if self.kind == OperationKind::Delete {
            ImageKind::Deleted
        } else {
            ImageKind::Row
        };
        self.image = image;
        self.new_row = self.kind == OperationKind::Insert;
        self.state = OpState::Prepared;
        crate::prepare::Outcome::Done {
            data: None,
            released: false,
        }
    }

    /// The ldm holding this operation's partition on replica `position`.
    pub fn replica_ldm(&self, position: u8, instance: u16) -> BlockRef {
        BlockRef::new(
            self.chain.nodes[position as usize],
            BlockKind::Ldm,
            instance,
        )
    }

    fn empty(next_free: u32) -> Operation {
        Operation {
            state: OpState::Free,
            transaction_id: TransactionId(0),
            tc: BlockRef::new(NodeId(0), BlockKind::Tc, 0),
            tc_op: 0,
            kind: OperationKind::Read,
            lock: LockMode::CommittedRead,
            table_id: 0,
            partition: 0,
            hash: KeyHash(0),
            row: NIL,
            key: None,
            attr: None,
            image: None,
            image_kind: ImageKind::None,
            new_var: NIL,
            index_nodes: 0,
            build_epoch: 0,
            granted: false,
            chain: ReplicaChain::new(&[NodeId(0)]),
            position: 0,
            previous_op: NIL,
            target_row: NIL,
            forwarded: false,
            new_row: false,
            applier: false,
            no_wait: false,
            next_in_row: NIL,
            written_prev: NIL,
            written_next: NIL,
            written_listed: false,
            redo_reservation: None,
            next_free,
        }
    }
}

/// The pool of operation records.
pub struct OperationPool {
    records: Vec<Operation>,
    free_head: u32,
    in_use: u32,
    by_tc: FixedMap,
}

fn tc_key(tc: BlockRef, tc_op: u32) -> u64 {
    (tc.node.0 as u64) << 48 | (tc.instance as u64) << 32 | tc_op as u64
}

impl OperationPool {
    /// A pool of `capacity` records.
    pub fn new(capacity: u32) -> OperationPool {
        let capacity = capacity.max(1);
        let records = (0..capacity)
            .map(|index| Operation::empty(if index + 1 < capacity { index + 1 } else { NIL }))
            .collect();
        OperationPool {
            records,
            free_head: 0,
            in_use: 0,
            by_tc: FixedMap::with_capacity(capacity as usize),
        }
    }

    /// Records in use.
    pub fn in_use(&self) -> u32 {
        self.in_use
    }

    /// Seizes a record for operation `tc_op` of `tc`. `None` when all are in
    /// use, or when that tc operation already has one here (a tc bug).
    pub fn seize(&mut self, tc: BlockRef, tc_op: u32) -> Option<u32> {
        let index = self.free_head;
        if index == NIL {
            return None;
        }
        let key = tc_key(tc, tc_op);
        if self.by_tc.get(key).is_some() {
            return None;
        }
        let inserted = self.by_tc.insert(key, index);
        assert!(inserted.is_ok(), "by_tc map is sized to the pool");
        let record = &mut self.records[index as usize];
        self.free_head = record.next_free;
        *record = Operation::empty(NIL);
        record.tc = tc;
        record.tc_op = tc_op;
        record.state = OpState::Waiting;
        self.in_use += 1;
        Some(index)
    }

    /// The record of operation `tc_op` of `tc`.
    pub fn find_by_tc(&self, tc: BlockRef, tc_op: u32) -> Option<u32> {
        self.by_tc.get(tc_key(tc, tc_op))
    }

    /// Returns a record to the pool (its sections return to theirs).
    pub fn release(&mut self, index: u32) {
        let record = &mut self.records[index as usize];
        assert!(
            record.state != OpState::Free,
            "operation record {index} released twice"
        );
        let removed = self.by_tc.remove(tc_key(record.tc, record.tc_op));
        assert_eq!(
            removed,
            Some(index),
            "operation record {index} missing from the tc map"
        );
        *record = Operation::empty(self.free_head);
        self.free_head = index;
        self.in_use -= 1;
    }

    /// Every record in use, by index (a walk of the whole pool: for rare
    /// work such as a take-over's query, never per operation).
    pub fn in_use_indices(&self) -> impl Iterator<Item = u32> + '_ {
        self.records
            .iter()
            .enumerate()
            .filter(|(_, record)| record.state != OpState::Free)
            .map(|(index, _)| index as u32)
    }

    /// Whether `index` names a record in use.
    pub fn is_live(&self, index: u32) -> bool {
        (index as usize) < self.records.len() && self.records[index as usize].state != OpState::Free
    }
}

impl std::ops::Index<u32> for OperationPool {
    type Output = Operation;
    fn index(&self, index: u32) -> &Operation {
        &self.records[index as usize]
    }
}

impl std::ops::IndexMut<u32> for OperationPool {
    fn index_mut(&mut self, index: u32) -> &mut Operation {
        &mut self.records[index as usize]
    }
}
