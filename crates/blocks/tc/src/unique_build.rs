//! BUILD_UNIQUE_REQ: the hidden rows of a unique index created on a table
//! that holds rows and is written meanwhile (docs/design/0026-unique-indexes.md,
//! "Creating one on a live table"). The tcs keep the index, building,
//! from every write since their switch; this build inserts the hidden row
//! of each row that was there before, in transactions of this tc's own
//! (NDB's TRIX and DBUTIL run such a build through DBTC the same way).
//!
//! ```text
//!  WALKERS partitions at a time (a walker each), BATCH_ROWS rows a batch:
//!   ScanPartitionReq -> its primary ldm     the rows' primary keys (committed)
//!   round 1: shared reads of the rows       each row's indexed values now,
//!            (IGNORE_MISSING)               locked to the commit
//!   round 2: shared reads of their hidden   none: to insert; naming the row:
//!            rows (IGNORE_MISSING)          a write's trigger got there
//!                                           first; naming another row: a
//!                                           duplicate, the build stops
//!   round 3: the missing hidden rows' inserts, COMMIT
//! ```
//!
//! A row's lock is held from round 1 to the commit, so no write changes it
//! between its read and its hidden row's insert; a write of it after the
//! commit is one the tcs keep the index for. A row a committed-read scan
//! cannot see (inserted by a transaction still running) is one a
//! transaction from after the switch inserted, with its hidden row: the
//! switch waited for every transaction from before it (`alter.rs`). Two
//! rows of one batch with one value are a duplicate too; two of batches
//! of different walkers both insert, and one insert fails with
//! DuplicateKey: its batch runs again and its round 2 finds the other.
//!
//! When something fails: an aborted round (a lock wait timeout, a node
//! failure, a hidden row inserted meanwhile by another writer: round 2
//! then sees it) runs the batch again from round 1, a few times with a
//! growing delay before the build gives up with the error; a scan refused
//! or lost with its node is sent again to the partition's primary under
//! the routes as they are then. While a node failure is handled the walk
//! waits, and then starts again from the first partition: a transaction
//! from before the switch on the failed node's tc, which no switch waited
//! for, is finished by this tc's take-over, and may put a row behind the
//! walk. This tc's node dying takes the master dict with it (the build
//! runs beside it), whose take-over rolls the index back.
//!
//! The build answers once the GCI of its last batch is durable: the dicts
//! then write the index into their schema files, and a restart must find
//! every hidden row the build inserted.

use crate::{Tc, UniqueIndex};
use kernel::{send, Context, Report};
use signal::attr::{append_entry, key_values_equal, AttrIter};
use signal::error::ErrorClass;
use signal::replica_check::ScanBatch;
use signal::signals::*;
use signal::{BlockKind, BlockRef, Envelope, ErrorCode, Gci, NodeSet, TransactionId};

/// A build's next steps: the walkers whose time has come take their next
/// batch (or a failed one again). Each batch starts from this job, which
/// the thread runs behind what arrived meanwhile (the block thread's rule
/// for a CONTINUEB a block sends itself): the build's signals all stay on
/// the thread when the tc runs on the ldm's, and chained directly they
/// kept key operations from other clients waiting, and their replies in
/// the outbox, for as long as the build ran.
pub const UNIQUE_BUILD_JOB: u32 = 2;

/// Rows a batch takes (fewer when the tc's pools are small: a batch's
/// transaction holds up to three operations a row).
const BATCH_ROWS: u32 = 32;

/// Partitions walked at once, each by a walker with one batch in flight.
const WALKERS: u32 = 4;

/// Rounds a batch may fail in a row before the build gives up.
const MAX_ATTEMPTS: u32 = 20;

/// How often a build waiting for a node failure's handling looks again.
const FAILURE_POLL_MS: u64 = 20;

/// One row of a batch.
struct BatchRow {
    /// Its primary key's entries, as a key section carries them.
    key: Vec<u8>,
    /// Its primary key's values, for the hidden row.
    primary: Vec<Vec<u8>>,
    /// Its indexed values under the lock (round 1): `None` not read yet
    /// or no row any more; an inner `None` a NULL.
    values: Option<Vec<Option<Vec<u8>>>>,
    /// Its hidden row's primary-key entries (round 2), if there is one.
    hidden: Option<Vec<u8>>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    /// The partition scan `request` is in flight at `ldm`.
    Scanning {
        ldm: BlockRef,
        request: u32,
    },
    Locking,
    Checking,
    Inserting,
    /// Waiting for the build's job to take the next batch (or the failed
    /// one again) from `ready_at_ms` on.
    Waiting,
    /// No partition left to take.
    Idle,
}

/// One partition's walk.
struct Walker {
    /// The walk (`UniqueBuild::generation`) it takes partitions for.
    generation: u32,
    /// The partition it walks, and where its next batch starts.
    partition: Option<u32>,
    next_row: u32,
    /// The scan said the batch is the partition's last.
    partition_done: bool,
    /// The batch: none between batches; kept after a failed round, to
    /// run it again.
    rows: Vec<BatchRow>,
    /// Round 2's rows, then round 3's.
    inserting: Vec<usize>,
    phase: Phase,
    ready_at_ms: u64,
    transaction: TransactionId,
    attempts: u32,
}

impl Walker {
    fn new(generation: u32) -> Walker {
        Walker {
            generation,
            partition: None,
            next_row: 0,
            partition_done: false,
            rows: Vec::new(),
            inserting: Vec::new(),
            phase: Phase::Waiting,
            ready_at_ms: 0,
            transaction: TransactionId(0),
            attempts: 0,
        }
    }

    /// A round's transaction is open at the tc.
    fn in_transaction(&self) -> bool {
        matches!(
            self.phase,
            Phase::Locking | Phase::Checking | Phase::Inserting
        )
    }
}

/// The build this tc runs (at most one at a time: dict runs one index
/// change at a time).
pub(crate) struct UniqueBuild {
    requester: BlockRef,
    table_id: u32,
    table_version: u32,
    partitions: u32,
    index: UniqueIndex,
    walkers: Vec<Walker>,
    /// The next partition no walker of this walk has taken.
    next_partition: u32,
    /// Rises each time the walk starts again from the first partition.
    generation: u32,
    /// The membership the walk began under: a change of it (a node
    /// failed, its tc's transactions taken over) starts the walk again
    /// once settled, since a transaction from before the switch, taken
    /// over, may commit a row behind the walk.
    membership_id: u32,
    inserted: u64,
    /// The highest GCI a batch committed in: the build answers once it is
    /// durable, so that a restart never finds the index without them.
    last_gci: Gci,
    /// Every partition walked: waiting for `last_gci` to be durable.
    walked: bool,
    /// When the build's job queued last is due (none queued: `None`):
    /// a walker waiting for a later time needs no other.
    job_due: Option<u64>,
}

/// The tc's count of the builds' transactions and scans (their ids), kept
/// across builds so that a late answer of an earlier build's never
/// matches.
#[derive(Default)]
pub(crate) struct BuildTransactions {
    transactions: u64,
    scans: u32,
}

impl Tc {
    /// BUILD_UNIQUE_REQ from the master dict of this node.
    pub(crate) fn build_unique(
        &mut self,
        from: BlockRef,
        request: BuildUniqueReq,
        ctx: &mut dyn Context,
    ) {
        if let Some(build) = self.unique_build.take() {
            // Replaced: a master dict runs one change at a time, so the
            // one before was abandoned (its answer would go nowhere).
            self.roll_back_build_transactions(&build, ctx);
        }
        let refuse = |ctx: &mut dyn Context, me: BlockRef, error| {
            let refusal = BuildUniqueRef {
                table_id: request.table_id,
                index_id: request.index_id,
                error,
            };
            send(ctx, me, from, refusal);
        };
        let me = self.config.address;
        let Some(route) = self
            .tables
            .get(request.table_id as usize)
            .and_then(Option::as_ref)
            .filter(|route| route.definition.version == request.table_version)
        else {
            return refuse(ctx, me, ErrorCode::UnknownTable);
        };
        let Some(index) = route
            .unique
            .iter()
            .find(|index| index.index_id == request.index_id && index.building)
        else {
            return refuse(ctx, me, ErrorCode::UnknownIndex);
        };
        let index = UniqueIndex {
            index_id: index.index_id,
            columns: index.columns.clone(),
            table_id: index.table_id,
            table_version: index.table_version,
            building: true,
        };
        let partitions = route.definition.partitions;
        ctx.report(Report::Log(format!(
            "tc {me}: building the hidden rows of unique index {} of table {}",
            request.index_id, request.table_id
        )));
        let walkers = WALKERS.min(partitions).max(1);
        self.unique_build = Some(UniqueBuild {
            requester: from,
            table_id: request.table_id,
            table_version: request.table_version,
            partitions,
            index,
            walkers: (0..walkers).map(|_| Walker::new(0)).collect(),
            next_partition: 0,
            generation: 0,
            membership_id: self.node_failures.membership_id(),
            inserted: 0,
            last_gci: Gci(0),
            walked: false,
            job_due: None,
        });
        self.build_step(ctx);
    }

    /// Rows a batch takes with this tc's pools (the walkers' batches run
    /// at once).
    fn batch_rows(&self) -> u32 {
        let by_transaction = self.config.max_operations_per_transaction / 3;
        let by_pool = self.config.max_operations / (4 * WALKERS);
        BATCH_ROWS.min(by_transaction).min(by_pool).max(1)
    }

    /// CONTINUEB(UNIQUE_BUILD_JOB), or the build's start: every waiting
    /// walker whose time has come takes its next batch; the job comes
    /// back for those whose time has not.
    pub(crate) fn build_step(&mut self, ctx: &mut dyn Context) {
        let now = ctx.now_ms();
        let Some(build) = self.unique_build.as_mut() else {
            return;
        };
        build.job_due = None;
        let ready: Vec<usize> = (0..build.walkers.len())
            .filter(|&w| {
                let walker = &build.walkers[w];
                walker.phase == Phase::Waiting && walker.ready_at_ms <= now
            })
            .collect();
        for w in ready {
            if self.unique_build.is_none() {
                return; // Ended by an earlier walker's step.
            }
            self.walker_step(w, ctx);
        }
        let Some(build) = self.unique_build.as_ref() else {
            return;
        };
        let later = build
            .walkers
            .iter()
            .filter(|walker| walker.phase == Phase::Waiting)
            .map(|walker| walker.ready_at_ms)
            .min();
        if let Some(at) = later {
            self.schedule_build_job(at.saturating_sub(now), ctx);
        }
    }

    fn schedule_build_job(&mut self, delay_ms: u64, ctx: &mut dyn Context) {
        let due = ctx.now_ms() + delay_ms;
        let Some(build) = self.unique_build.as_mut() else {
            return;
        };
        if build.job_due.is_some_and(|queued| queued <= due) {
            return;
        }
        build.job_due = Some(due);
        let me = self.config.address;
        let job = Envelope {
            from: me,
            to: me,
            signal: ContinueB {
                job: UNIQUE_BUILD_JOB,
            }
            .into(),
        };
        match delay_ms {
            0 => ctx.send(job),
            delay => ctx.send_delayed(job, delay),
        }
    }

    /// Walker `w` waits for the job, `delay_ms` from now.
    fn walker_waits(&mut self, w: usize, delay_ms: u64, ctx: &mut dyn Context) {
        let now = ctx.now_ms();
        let build = self.unique_build.as_mut().expect("a build runs");
        let walker = &mut build.walkers[w];
        walker.phase = Phase::Waiting;
        walker.ready_at_ms = now + delay_ms;
        self.schedule_build_job(delay_ms, ctx);
    }

    /// Walker `w`'s next batch: the failed one again, the next of its
    /// partition, or the first of the next partition nobody took.
    fn walker_step(&mut self, w: usize, ctx: &mut dyn Context) {
        if !self.build_may_walk() {
            // Not counted as an attempt: the failure is handled soon.
            return self.walker_waits(w, FAILURE_POLL_MS, ctx);
        }
        let build = self.unique_build.as_mut().expect("a build runs");
        let generation = build.generation;
        let walker = &mut build.walkers[w];
        if walker.generation != generation {
            *walker = Walker::new(generation);
        }
        if !walker.rows.is_empty() {
            return self.run_batch(w, ctx);
        }
        if walker.partition.is_none() || walker.partition_done {
            if build.next_partition >= build.partitions {
                build.walkers[w].phase = Phase::Idle;
                return self.build_walked(ctx);
            }
            let walker = &mut build.walkers[w];
            walker.partition = Some(build.next_partition);
            walker.next_row = 0;
            walker.partition_done = false;
            build.next_partition += 1;
        }
        self.scan_next_batch(w, ctx);
    }

    /// Asks the primary of walker `w`'s partition for its next rows.
    fn scan_next_batch(&mut self, w: usize, ctx: &mut dyn Context) {
        let max_rows = self.batch_rows();
        let me = self.config.address;
        self.build_transactions.scans = self.build_transactions.scans.wrapping_add(1);
        let request_id = self.build_transactions.scans;
        let build = self.unique_build.as_mut().expect("a build runs");
        let Some(route) = self
            .tables
            .get(build.table_id as usize)
            .and_then(Option::as_ref)
            .filter(|route| route.definition.version == build.table_version)
        else {
            return self.end_build(Err(ErrorCode::UnknownTable), ctx);
        };
        let walker = &mut build.walkers[w];
        let partition = walker.partition.expect("a walker scans its partition");
        let placement = &route.map.partitions[partition as usize];
        let Some(&primary) = placement.replicas.first() else {
            // No replica of it alive: the cluster has stopped.
            return self.end_build(Err(ErrorCode::NodeFailureAbort), ctx);
        };
        let ldm = BlockRef::new(primary, BlockKind::Ldm, placement.ldm_instance);
        walker.phase = Phase::Scanning {
            ldm,
            request: request_id,
        };
        let request = ScanPartitionReq {
            request_id,
            table_id: build.table_id,
            partition,
            start_row: walker.next_row,
            max_rows,
        };
        send(ctx, me, ldm, request);
    }

    /// The walker whose scan `request` ldm `from` answers.
    fn scanning_walker(&self, from: BlockRef, request: u32) -> Option<usize> {
        let build = self.unique_build.as_ref()?;
        build
            .walkers
            .iter()
            .position(|walker| walker.phase == Phase::Scanning { ldm: from, request })
    }

    /// The walker whose round's transaction is `transaction_id`.
    fn transacting_walker(&self, transaction_id: TransactionId) -> Option<usize> {
        let build = self.unique_build.as_ref()?;
        build
            .walkers
            .iter()
            .position(|walker| walker.in_transaction() && walker.transaction == transaction_id)
    }

    /// SCAN_PARTITIONCONF: the batch's rows, then round 1.
    pub(crate) fn build_scanned(
        &mut self,
        from: BlockRef,
        conf: ScanPartitionConf,
        ctx: &mut dyn Context,
    ) {
        let Some(w) = self.scanning_walker(from, conf.request_id) else {
            return;
        };
        let build = self.unique_build.as_mut().expect("found a walker");
        let Some(route) = self.tables[build.table_id as usize].as_ref() else {
            return self.end_build(Err(ErrorCode::UnknownTable), ctx);
        };
        let primary_key = &route.definition.primary_key;
        let mut rows = Vec::new();
        for row in ScanBatch::new(conf.rows.as_slice()) {
            let Ok(row) = row else {
                // Our own ldm's bytes: a bug, but the build just stops.
                return self.end_build(Err(ErrorCode::BadRequest), ctx);
            };
            let mut key = Vec::new();
            let mut primary = Vec::new();
            for &column in primary_key {
                let entry = AttrIter::new(row.values)
                    .filter_map(Result::ok)
                    .find(|entry| entry.column == column);
                let Some(value) = entry.and_then(|entry| entry.value) else {
                    return self.end_build(Err(ErrorCode::BadRequest), ctx);
                };
                if append_entry(&mut key, column, value).is_err() {
                    return self.end_build(Err(ErrorCode::BadRequest), ctx);
                }
                primary.push(value.to_vec());
            }
            rows.push(BatchRow {
                key,
                primary,
                values: None,
                hidden: None,
            });
        }
        let walker = &mut build.walkers[w];
        walker.next_row = conf.next_row;
        walker.partition_done = conf.done;
        walker.rows = rows;
        walker.attempts = 0;
        if walker.rows.is_empty() {
            return self.batch_done(w, ctx);
        }
        self.run_batch(w, ctx);
    }

    /// SCAN_PARTITIONREF: asked again after a pause, at the primary then.
    pub(crate) fn build_scan_refused(
        &mut self,
        from: BlockRef,
        refusal: ScanPartitionRef,
        ctx: &mut dyn Context,
    ) {
        let Some(w) = self.scanning_walker(from, refusal.request_id) else {
            return;
        };
        if refusal.error.class() != ErrorClass::Temporary {
            return self.end_build(Err(refusal.error), ctx);
        }
        self.retry_batch(w, refusal.error, ctx);
    }

    /// Round 1 of walker `w`'s batch (again).
    fn run_batch(&mut self, w: usize, ctx: &mut dyn Context) {
        self.build_transactions.transactions += 1;
        let own = u64::from(self.config.address.node.0) << 48;
        let instance = u64::from(self.config.address.instance) << 40;
        let transaction = TransactionId(own | instance | self.build_transactions.transactions);
        let build = self.unique_build.as_mut().expect("a build runs");
        let projection: Vec<u8> = build
            .index
            .columns
            .iter()
            .flat_map(|column| column.to_le_bytes())
            .collect();
        let (table_id, table_version) = (build.table_id, build.table_version);
        let walker = &mut build.walkers[w];
        for row in &mut walker.rows {
            row.values = None;
            row.hidden = None;
        }
        walker.transaction = transaction;
        walker.phase = Phase::Locking;
        let requests: Vec<(usize, Vec<u8>, Vec<u8>)> = walker
            .rows
            .iter()
            .enumerate()
            .map(|(at, row)| (at, row.key.clone(), projection.clone()))
            .collect();
        self.send_round(w, table_id, table_version, requests, LockMode::Shared, ctx);
    }

    /// Sends one round of walker `w`: a read (`lock`, tolerating a missing
    /// row) or, with `LockMode::Exclusive`, an insert per (batch row, key,
    /// attributes), to this tc itself, numbered by the row; the last
    /// closes the batch (and commits, for inserts).
    fn send_round(
        &mut self,
        w: usize,
        table_id: u32,
        table_version: u32,
        requests: Vec<(usize, Vec<u8>, Vec<u8>)>,
        lock: LockMode,
        ctx: &mut dyn Context,
    ) {
        let me = self.config.address;
        let build = self.unique_build.as_ref().expect("a build runs");
        let walker = &build.walkers[w];
        let transaction_id = walker.transaction;
        let first_round = walker.phase == Phase::Locking;
        let insert = lock == LockMode::Exclusive;
        let count = requests.len();
        let mut sections = Vec::with_capacity(count);
        for (row, key, attr) in &requests {
            let pool = ctx.pool();
            match (pool.copy_from(key), pool.copy_from(attr)) {
                (Some(key), Some(attr)) => sections.push((*row, key, attr)),
                // The pool is short: nothing of the round is sent (an open
                // transaction is rolled back), and the batch runs again.
                _ => return self.retry_batch(w, ErrorCode::OutOfSignalMemory, ctx),
            }
        }
        for (at, (row, key, attr)) in sections.into_iter().enumerate() {
            let mut flags = if insert {
                0
            } else {
                tc_key_flags::IGNORE_MISSING
            };
            if at == 0 && first_round {
                flags |= tc_key_flags::START;
            }
            if at + 1 == count {
                flags |= if insert {
                    tc_key_flags::COMMIT
                } else {
                    tc_key_flags::EXECUTE
                };
            }
            let request = TcKeyReq {
                transaction_id,
                client_op: row as u32,
                flags,
                kind: if insert {
                    OperationKind::Insert
                } else {
                    OperationKind::Read
                },
                lock,
                table_id,
                table_version,
                key,
                attr: Some(attr),
            };
            send(ctx, me, me, request);
        }
    }

    /// TRANSID_AI of a build's transaction: a row of round 1 or 2.
    pub(crate) fn build_row(&mut self, read: TransIdAi) {
        let Some(w) = self.transacting_walker(read.transaction_id) else {
            return;
        };
        let build = self.unique_build.as_mut().expect("found a walker");
        let columns = &build.index.columns;
        let walker = &mut build.walkers[w];
        let Some(row) = walker.rows.get_mut(read.client_op as usize) else {
            return;
        };
        match walker.phase {
            Phase::Locking => {
                let mut values = vec![None; columns.len()];
                for entry in AttrIter::new(read.data.as_slice()).filter_map(Result::ok) {
                    let at = columns.iter().position(|&c| c == entry.column);
                    if let Some(at) = at {
                        values[at] = entry.value.map(<[u8]>::to_vec);
                    }
                }
                row.values = Some(values);
            }
            Phase::Checking => row.hidden = Some(read.data.as_slice().to_vec()),
            _ => {}
        }
    }

    /// TCKEYCONF of a build's transaction: the round is done.
    pub(crate) fn build_round_done(&mut self, conf: TcKeyConf, ctx: &mut dyn Context) {
        let Some(w) = self.transacting_walker(conf.transaction_id) else {
            return;
        };
        let build = self.unique_build.as_mut().expect("found a walker");
        match build.walkers[w].phase {
            Phase::Locking => self.check_hidden_rows(w, ctx),
            Phase::Checking => self.insert_hidden_rows(w, ctx),
            Phase::Inserting if conf.committed => {
                build.inserted += build.walkers[w].inserting.len() as u64;
                build.last_gci = build.last_gci.max(conf.gci);
                self.batch_done(w, ctx);
            }
            _ => {}
        }
    }

    /// Round 2: the hidden rows of walker `w`'s rows whose values are all
    /// set; a value two rows of the batch hold is a duplicate at once.
    fn check_hidden_rows(&mut self, w: usize, ctx: &mut dyn Context) {
        let build = self.unique_build.as_mut().expect("a build runs");
        let Some(hidden) = self.tables[build.index.table_id as usize].as_ref() else {
            return self.end_build(Err(ErrorCode::UnknownTable), ctx);
        };
        let definition = &hidden.definition;
        let types: Vec<_> = (0..build.index.columns.len())
            .map(|at| definition.columns[at].column_type)
            .collect();
        let walker = &mut build.walkers[w];
        let indexed = |row: &BatchRow| -> Option<Vec<Vec<u8>>> {
            row.values.as_ref()?.iter().cloned().collect()
        };
        let keys: Vec<Option<Vec<Vec<u8>>>> = walker.rows.iter().map(indexed).collect();
        let same = |a: &[Vec<u8>], b: &[Vec<u8>]| {
            types
                .iter()
                .zip(a.iter().zip(b))
                .all(|(&column_type, (a, b))| key_values_equal(column_type, a, b))
        };
        for (at, key) in keys.iter().enumerate() {
            let Some(key) = key else { continue };
            let repeated = keys[..at].iter().flatten().any(|other| same(other, key));
            if repeated {
                return self.end_build(Err(ErrorCode::DuplicateKey), ctx);
            }
        }
        let first = build.index.columns.len() as u16;
        let projection: Vec<u8> = (first..definition.columns.len() as u16)
            .flat_map(u16::to_le_bytes)
            .collect();
        let mut requests = Vec::new();
        for (at, key) in keys.iter().enumerate() {
            let Some(key) = key else { continue };
            let mut bytes = Vec::new();
            for (column, value) in key.iter().enumerate() {
                if append_entry(&mut bytes, column as u16, value).is_err() {
                    return self.end_build(Err(ErrorCode::BadRequest), ctx);
                }
            }
            requests.push((at, bytes, projection.clone()));
        }
        let walker = &mut build.walkers[w];
        walker.phase = Phase::Checking;
        walker.inserting = requests.iter().map(|&(at, ..)| at).collect();
        if requests.is_empty() {
            return self.commit_batch(w, ctx);
        }
        let (table_id, table_version) = (build.index.table_id, build.index.table_version);
        self.send_round(w, table_id, table_version, requests, LockMode::Shared, ctx);
    }

    /// Round 3: each hidden row found must name its row (else two rows
    /// hold the value); the missing ones are inserted, and the batch
    /// commits.
    fn insert_hidden_rows(&mut self, w: usize, ctx: &mut dyn Context) {
        let build = self.unique_build.as_mut().expect("a build runs");
        let Some(hidden) = self.tables[build.index.table_id as usize].as_ref() else {
            return self.end_build(Err(ErrorCode::UnknownTable), ctx);
        };
        let definition = &hidden.definition;
        let first = build.index.columns.len();
        let walker = &mut build.walkers[w];
        let read: Vec<usize> = std::mem::take(&mut walker.inserting);
        let mut missing = Vec::new();
        for &at in &read {
            let row = &walker.rows[at];
            match &row.hidden {
                None => missing.push(at),
                Some(entries) => {
                    let names_the_row = AttrIter::new(entries).count() == row.primary.len()
                        && AttrIter::new(entries)
                            .map(|entry| entry.ok())
                            .zip(row.primary.iter().enumerate())
                            .all(|(entry, (at, value))| {
                                entry.is_some_and(|entry| {
                                    let column = first + at;
                                    entry.column as usize == column
                                        && entry.value.is_some_and(|found| {
                                            let column_type =
                                                definition.columns[column].column_type;
                                            key_values_equal(column_type, found, value)
                                        })
                                })
                            });
                    if !names_the_row {
                        return self.end_build(Err(ErrorCode::DuplicateKey), ctx);
                    }
                }
            }
        }
        let mut requests = Vec::new();
        for &at in &missing {
            let row = &walker.rows[at];
            let values = row.values.as_ref().expect("read in round 1");
            let mut key = Vec::new();
            let mut attr = Vec::new();
            let encoded = values
                .iter()
                .enumerate()
                .try_for_each(|(column, value)| {
                    let value = value.as_deref().expect("every value set");
                    append_entry(&mut key, column as u16, value)
                })
                .and_then(|()| {
                    row.primary.iter().enumerate().try_for_each(|(at, value)| {
                        append_entry(&mut attr, (first + at) as u16, value)
                    })
                });
            if encoded.is_err() {
                return self.end_build(Err(ErrorCode::BadRequest), ctx);
            }
            requests.push((at, key, attr));
        }
        walker.inserting = missing;
        if requests.is_empty() {
            return self.commit_batch(w, ctx);
        }
        walker.phase = Phase::Inserting;
        let (table_id, table_version) = (build.index.table_id, build.index.table_version);
        self.send_round(
            w,
            table_id,
            table_version,
            requests,
            LockMode::Exclusive,
            ctx,
        );
    }

    /// A batch with nothing to insert commits its locks away.
    fn commit_batch(&mut self, w: usize, ctx: &mut dyn Context) {
        let build = self.unique_build.as_mut().expect("a build runs");
        let walker = &mut build.walkers[w];
        walker.phase = Phase::Inserting;
        walker.inserting.clear();
        let me = self.config.address;
        let request = TcCommitReq {
            transaction_id: walker.transaction,
        };
        send(ctx, me, me, request);
    }

    /// Walker `w`'s batch committed (or was empty): its next one, from the
    /// build's job.
    fn batch_done(&mut self, w: usize, ctx: &mut dyn Context) {
        let build = self.unique_build.as_mut().expect("a build runs");
        let walker = &mut build.walkers[w];
        walker.rows.clear();
        walker.attempts = 0;
        self.walker_waits(w, 0, ctx);
    }

    /// TCKEYREF of a build's transaction (aborted by the tc).
    pub(crate) fn build_round_refused(&mut self, refusal: TcKeyRef, ctx: &mut dyn Context) {
        let Some(w) = self.transacting_walker(refusal.transaction_id) else {
            return;
        };
        // Nothing is open at the tc any more.
        let build = self.unique_build.as_mut().expect("found a walker");
        build.walkers[w].phase = Phase::Waiting;
        let error = refusal.error;
        let retried = error == ErrorCode::DuplicateKey || error.class() == ErrorClass::Temporary;
        if !retried {
            return self.end_build(Err(error), ctx);
        }
        self.retry_batch(w, error, ctx);
    }

    /// Walker `w`'s round or scan failed with `error`: its batch runs
    /// again after a pause growing with the attempts, the build ending
    /// after too many.
    fn retry_batch(&mut self, w: usize, error: ErrorCode, ctx: &mut dyn Context) {
        let me = self.config.address;
        let build = self.unique_build.as_mut().expect("a build runs");
        let walker = &mut build.walkers[w];
        if walker.in_transaction() {
            let request = TcRollbackReq {
                transaction_id: walker.transaction,
            };
            send(ctx, me, me, request);
        }
        // Answers of the failed round still on their way are told apart
        // by the transaction id.
        walker.transaction = TransactionId(0);
        walker.phase = Phase::Waiting;
        walker.attempts += 1;
        if walker.attempts > MAX_ATTEMPTS {
            return self.end_build(Err(error), ctx);
        }
        let delay = 10 * u64::from(walker.attempts);
        self.walker_waits(w, delay, ctx);
    }

    /// A walker found no partition left: once every walker has, the build
    /// waits for its last GCI to be durable.
    fn build_walked(&mut self, ctx: &mut dyn Context) {
        let build = self.unique_build.as_mut().expect("a build runs");
        if build
            .walkers
            .iter()
            .all(|walker| walker.phase == Phase::Idle)
        {
            build.walked = true;
            self.build_durable(ctx);
        }
    }

    /// A GCI became durable (GCP_DURABLE_REP), or the walk ended: the
    /// build answers once its last batch's GCI is.
    pub(crate) fn build_durable(&mut self, ctx: &mut dyn Context) {
        let complete = self.durability.complete_gci;
        let Some(build) = self.unique_build.as_ref() else {
            return;
        };
        if !build.walked || build.last_gci > complete {
            return;
        }
        // A node failure meanwhile: the walk starts again once it is
        // handled (`build_may_walk`), as a walker's next batch would.
        let membership_id = build.membership_id;
        let settled = self.node_failures.all_complete() && !self.takeover_running();
        if !settled || self.node_failures.membership_id() != membership_id {
            let build = self.unique_build.as_mut().expect("a build runs");
            build.walked = false;
            for walker in &mut build.walkers {
                walker.phase = Phase::Waiting;
                walker.ready_at_ms = 0;
            }
            return self.schedule_build_job(FAILURE_POLL_MS, ctx);
        }
        let rows = build.inserted;
        self.end_build(Ok(rows), ctx);
    }

    /// Whether the walk may go on: no node failure is being handled here
    /// (every change installed is complete, no take-over of a failed
    /// tc's transactions runs). After one, the walk starts again from
    /// the first partition: a transaction from before the switch that a
    /// take-over committed may have put a row behind it (rows that have
    /// their hidden row are only read again).
    fn build_may_walk(&mut self) -> bool {
        if !self.node_failures.all_complete() || self.takeover_running() {
            return false;
        }
        let membership_id = self.node_failures.membership_id();
        let build = self.unique_build.as_mut().expect("a build runs");
        if build.membership_id != membership_id {
            self.counters.unique_build_restarts += 1;
            build.membership_id = membership_id;
            build.generation += 1;
            build.next_partition = 0;
            for walker in &mut build.walkers {
                if walker.phase == Phase::Idle {
                    walker.phase = Phase::Waiting;
                }
            }
        }
        true
    }

    /// Data nodes failed: a scan waiting on one of them is asked again
    /// (the build's transactions hear of it from the tc as any client's).
    pub(crate) fn build_without(&mut self, failed: NodeSet, ctx: &mut dyn Context) {
        let Some(build) = self.unique_build.as_ref() else {
            return;
        };
        let lost: Vec<usize> = (0..build.walkers.len())
            .filter(|&w| {
                matches!(build.walkers[w].phase,
                    Phase::Scanning { ldm, .. } if failed.contains(ldm.node))
            })
            .collect();
        for w in lost {
            self.walker_waits(w, FAILURE_POLL_MS, ctx);
        }
    }

    /// Rolls back every transaction a walker's round left open.
    fn roll_back_build_transactions(&mut self, build: &UniqueBuild, ctx: &mut dyn Context) {
        let me = self.config.address;
        for walker in build
            .walkers
            .iter()
            .filter(|walker| walker.in_transaction())
        {
            let request = TcRollbackReq {
                transaction_id: walker.transaction,
            };
            send(ctx, me, me, request);
        }
    }

    /// The build is over: `Ok(rows inserted)` or why it stopped.
    fn end_build(&mut self, result: Result<u64, ErrorCode>, ctx: &mut dyn Context) {
        let build = self.unique_build.take().expect("a build runs");
        let me = self.config.address;
        let (table_id, index_id) = (build.table_id, build.index.index_id);
        match result {
            Ok(rows) => {
                ctx.report(Report::Log(format!(
                    "tc {me}: unique index {index_id} of table {table_id}: {rows} hidden rows \
                     built"
                )));
                let conf = BuildUniqueConf {
                    table_id,
                    index_id,
                    rows,
                };
                send(ctx, me, build.requester, conf);
            }
            Err(error) => {
                self.roll_back_build_transactions(&build, ctx);
                ctx.report(Report::Log(format!(
                    "tc {me}: unique index {index_id} of table {table_id}: the build stopped \
                     ({error:?})"
                )));
                let refusal = BuildUniqueRef {
                    table_id,
                    index_id,
                    error,
                };
                send(ctx, me, build.requester, refusal);
            }
        }
    }
}
