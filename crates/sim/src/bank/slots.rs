//! One API node's slots: each runs one plan at a time through the client,
//! all of them from one `AsyncSession`, and checks every answer against
//! the bank's model as it arrives.
//!
//! A slot with nothing to do in the current phase parks until the phase
//! moves on. A plan that fails with a temporary error is retried after a
//! back-off that grows with each failure. An abandoned transfer is held
//! (nothing sent) for longer than the tc's inactivity timeout, then
//! rolled back: by then the tc aborted it and the rollback finds nothing.
//!
//! After a crash every transaction fails: a commit whose answer was lost
//! is in doubt (`OutcomeUnknown`), and anything else did not commit
//! (the client says which); the slots then stop.

use super::{lock, Phase, Shared, State, INITIAL_BALANCE};
use crate::config::INACTIVE_TRANSACTION_TIMEOUT_MS;
use crate::hosted::HostedContext;
use crate::ledger::Written;
use crate::plans::{self, Ending, OperationKind, Plan};
use crate::rows::{self, Row};
use client::{
    AsyncSession, ClientError, Cluster, Commit, Completion, LockMode, OpId, Outcome, Table,
    Transaction, TransactionState, Value,
};
use signal::error::ErrorClass;
use signal::{ErrorCode, Gci};
use std::sync::Arc;
use std::time::Duration;
use stdx::mix::XorShift;

/// How long one plan may keep failing with temporary errors before the
/// run is declared stuck. Under overload (the tight-limits workload) the
/// tc admits whoever asks first, so one client may lose for seconds while
/// others commit; this limit only catches a plan that can never succeed
/// (a batch larger than the tc's operation records, say). A lost answer
/// ends in the client's reply timeout, which fails the run.
const RETRY_LIMIT_US: u64 = 120_000_000;
/// How long an abandoned transfer stays silent: well past the inactivity
/// timeout and the tc's scan for it.
const ABANDON_US: u64 = 2 * INACTIVE_TRANSACTION_TIMEOUT_MS * 1000;

/// The batch a slot's transaction has in flight.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Step {
    /// One committing batch (load, scratch, token, verify).
    Single,
    /// A transfer's reads (`Commit::No`).
    Reading,
    /// A transfer's writes alone (`Commit::No`): the ledger knows them.
    Writing,
    /// A transfer's commit (with its writes, or alone after them).
    Committing,
}

/// A slot's transaction in the session.
struct Job {
    /// Index into the API node's slots.
    local: usize,
    plan: Plan,
    step: Step,
    /// The operations of the batch in flight.
    ops: Vec<OpId>,
    /// A transfer's reads: (account, writer, balance).
    reads: Vec<(u32, u64, i64)>,
    /// The commit is `Commit::Durable`.
    durable: bool,
}

/// A slot as its API node runs it.
struct LocalSlot<'a> {
    /// The bank's index of the slot.
    slot: usize,
    /// A transaction of it is in the session (or held).
    busy: bool,
    /// An abandoned transfer, silent until `wake_at_us`.
    held: Option<(Transaction<'a>, Job)>,
    /// The slot starts its next plan (or ends its held one) at this time.
    wake_at_us: u64,
    retry: Option<Plan>,
    /// Times in a row the slot's plan failed with a temporary error.
    retries: u32,
    /// When the slot's plan first failed in this row of failures.
    retrying_since_us: Option<u64>,
}

struct Slots<'a, 'c> {
    context: &'c HostedContext,
    cluster: &'a Cluster,
    table: &'c Arc<Table>,
    shared: &'c Shared,
    random: XorShift,
    slots: Vec<LocalSlot<'a>>,
}

/// Runs the slots `slots` (the bank's indices) until the phase reaches
/// `Checking` or the cluster crashed and every transaction failed.
pub(super) fn run(
    context: &HostedContext,
    cluster: &Cluster,
    table: &Arc<Table>,
    shared: &Shared,
    slots: &[usize],
) {
    let mut runner = Slots {
        context,
        cluster,
        table,
        shared,
        random: XorShift::new(context.seed),
        slots: slots
            .iter()
            .map(|&slot| LocalSlot {
                slot,
                busy: false,
                held: None,
                wake_at_us: 0,
                retry: None,
                retries: 0,
                retrying_since_us: None,
            })
            .collect(),
    };
    runner.run();
}

impl<'a> Slots<'a, '_> {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        lock(self.shared)
    }

    fn run(&mut self) {
        let mut session: AsyncSession<'a, Job> = self.cluster.session();
        let mut done = Vec::new();
        loop {
            let (phase, crashed) = {
                let state = self.state();
                (state.phase, state.crashed)
            };
            if crashed {
                self.end_held_after_crash();
                if session.in_flight() == 0 {
                    return;
                }
            } else if phase >= Phase::Checking {
                return;
            } else {
                self.start_due(&mut session);
            }
            let now = self.context.now_us();
            let next_wake = self
                .slots
                .iter()
                .filter(|slot| !slot.busy || slot.held.is_some())
                .map(|slot| slot.wake_at_us)
                .min();
            let parked_only = next_wake.is_none_or(|at| at <= now);
            let wait = match next_wake {
                // Every slot without a transaction waits for the phase.
                _ if parked_only => super::PHASE_POLL,
                Some(at) => Duration::from_micros(at - now),
                None => super::PHASE_POLL,
            };
            if session.in_flight() == 0 {
                self.context.sleep(wait);
                continue;
            }
            session.poll(wait, &mut done);
            for completion in done.drain(..) {
                self.answered(&mut session, completion);
            }
        }
    }

    /// Starts the next plan of every idle slot whose pause is over, and
    /// ends the abandoned transfers whose silence is over.
    fn start_due(&mut self, session: &mut AsyncSession<'a, Job>) {
        let now = self.context.now_us();
        for local in 0..self.slots.len() {
            let slot = &mut self.slots[local];
            if slot.wake_at_us > now {
                continue;
            }
            if let Some((transaction, job)) = slot.held.take() {
                self.end_abandoned(transaction, job);
                continue;
            }
            if slot.busy {
                continue;
            }
            let index = slot.slot;
            let plan = match slot.retry.take() {
                Some(plan) => Some(plan),
                None => {
                    let mut state = lock(self.shared);
                    let plan = state.next_plan(index, &mut self.random);
                    if plan.is_none() {
                        state.slots[index].parked = true;
                        state.maybe_advance();
                    }
                    plan
                }
            };
            match plan {
                Some(plan) => self.start(session, local, plan),
                // Parked: looks again after the next poll.
                None => self.slots[local].wake_at_us = now,
            }
        }
    }

    /// Starts `plan` for slot `local`: its first batch goes into the
    /// session.
    fn start(&mut self, session: &mut AsyncSession<'a, Job>, local: usize, plan: Plan) {
        let first_key = match &plan {
            Plan::Load { first, .. } | Plan::VerifyAccounts { first, .. } => *first,
            Plan::Transfer { accounts, .. } => accounts[0],
            Plan::Scratch { key, .. } | Plan::Token { key, .. } | Plan::VerifyToken { key } => *key,
        };
        let hint = [Value::UInt(first_key.into())];
        let mut transaction = if self.random.below(2) == 0 {
            self.cluster
                .transaction_with_hint(self.table, &hint)
                .expect("a key hint of the right type")
        } else {
            self.cluster.transaction()
        };
        let primary = self
            .cluster
            .primary_node(self.table, &hint)
            .expect("a bank key is a valid key");
        {
            let mut state = self.state();
            if primary == Some(transaction.node()) {
                state.counters.started_at_primary += 1;
            } else {
                state.counters.started_elsewhere += 1;
            }
        }
        let id = transaction.id().0;
        let mut job = Job {
            local,
            plan,
            step: Step::Single,
            ops: Vec::new(),
            reads: Vec::new(),
            durable: false,
        };
        let table = self.table;
        let key = |id: u32| [Value::UInt(id.into())];
        let fail = |error: ClientError| -> ! { panic!("transaction {id:#x}: {error}") };
        match &job.plan {
            Plan::Load { first, count } => {
                let mut writes = Vec::new();
                for account in *first..first + count {
                    let note = plans::random_note(&mut self.random);
                    let values = row_values(account, INITIAL_BALANCE, id, note.clone());
                    let op = transaction
                        .insert(table, &values)
                        .unwrap_or_else(|e| fail(e));
                    job.ops.push(op);
                    writes.push(Written {
                        account,
                        balance: INITIAL_BALANCE,
                        note,
                    });
                }
                let mut state = self.state();
                let result = state.ledger.will_write(id, Vec::new(), writes);
                state.check(result);
            }
            Plan::Transfer { accounts, lock, .. } => {
                job.step = Step::Reading;
                for &account in accounts {
                    let op = transaction.read(table, &key(account), *lock);
                    job.ops.push(op.unwrap_or_else(|e| fail(e)));
                }
            }
            Plan::Scratch {
                key: scratch, ops, ..
            } => {
                for op in ops {
                    let id = match op.kind {
                        OperationKind::Insert => {
                            let values = row_values(*scratch, 0, 0, op.note.clone());
                            transaction.insert(table, &values)
                        }
                        OperationKind::Update => {
                            let note = [(rows::NOTE, note_value(op.note.clone()))];
                            transaction.update(table, &key(*scratch), &note)
                        }
                        OperationKind::Delete => transaction.delete(table, &key(*scratch)),
                        OperationKind::Read => transaction.read(table, &key(*scratch), op.lock),
                    };
                    job.ops.push(id.unwrap_or_else(|e| fail(e)));
                }
            }
            Plan::Token { key: token, insert } => {
                if *insert {
                    let note = plans::random_note(&mut self.random);
                    let values = row_values(*token, 0, id, note);
                    let op = transaction.insert(table, &values);
                    job.ops.push(op.unwrap_or_else(|e| fail(e)));
                    self.state().tokens.will_insert(id, *token);
                }
                let read = transaction.read(table, &key(*token), LockMode::Exclusive);
                job.ops.push(read.unwrap_or_else(|e| fail(e)));
                if !insert {
                    let delete = transaction.delete(table, &key(*token));
                    job.ops.push(delete.unwrap_or_else(|e| fail(e)));
                }
            }
            Plan::VerifyAccounts { first, count } => {
                for account in *first..first + count {
                    let op = transaction.read(table, &key(account), LockMode::CommittedRead);
                    job.ops.push(op.unwrap_or_else(|e| fail(e)));
                }
            }
            Plan::VerifyToken { key: token } => {
                let op = transaction.read(table, &key(*token), LockMode::CommittedRead);
                job.ops.push(op.unwrap_or_else(|e| fail(e)));
            }
        }
        let commit = if job.step == Step::Single {
            Commit::Yes
        } else {
            Commit::No
        };
        self.slots[local].busy = true;
        session.execute(transaction, commit, job);
    }

    /// A batch was answered (or failed).
    fn answered(&mut self, session: &mut AsyncSession<'a, Job>, completion: Completion<'a, Job>) {
        let Completion {
            transaction,
            user: job,
            result,
        } = completion;
        match result {
            Ok(outcome) => self.succeeded(session, transaction, job, outcome),
            Err(error) => self.failed(transaction, job, error),
        }
    }

    fn succeeded(
        &mut self,
        session: &mut AsyncSession<'a, Job>,
        transaction: Transaction<'a>,
        mut job: Job,
        outcome: Outcome,
    ) {
        let id = transaction.id().0;
        match (&job.plan, job.step) {
            (Plan::Transfer { .. }, Step::Reading) => {
                return self.transfer_read(session, transaction, job);
            }
            (Plan::Transfer { ending, .. }, Step::Writing) => {
                if *ending == Ending::SeparateCommit {
                    job.step = Step::Committing;
                    let commit = job.commit();
                    return session.execute(transaction, commit, job);
                }
                return self.roll_back(transaction, job);
            }
            _ => {}
        }
        let gci = match (outcome.committed, outcome.gci) {
            (true, gci) => gci.unwrap_or(Gci(0)),
            (false, _) => self.state().fail(format!(
                "transaction {id:#x} answered {outcome:?} to its commit"
            )),
        };
        if job.durable && !outcome.durable {
            self.state()
                .fail(format!("durable transaction {id:#x} answered {outcome:?}"));
        }
        self.committed(&transaction, &job, gci, outcome.durable);
        self.ended(job.local, false);
    }

    /// The reads of a transfer are answered: checks them, then writes, or
    /// ends the transfer another way.
    fn transfer_read(
        &mut self,
        session: &mut AsyncSession<'a, Job>,
        mut transaction: Transaction<'a>,
        mut job: Job,
    ) {
        let id = transaction.id().0;
        let Plan::Transfer {
            ref accounts,
            ending,
            ..
        } = job.plan
        else {
            unreachable!("only transfers have a read step")
        };
        let mut reads = Vec::with_capacity(accounts.len());
        {
            let state = self.state();
            for (&account, &op) in accounts.iter().zip(&job.ops) {
                let row = read_row(&transaction, op)
                    .unwrap_or_else(|error| state.fail(format!("transfer {id:#x}: {error}")));
                if row.id != account {
                    state.fail(format!("read account {account} but got row {}", row.id));
                }
                state.check(
                    state
                        .ledger
                        .check_read(account, row.writer, row.balance, &row.note),
                );
                reads.push((account, row.writer, row.balance));
            }
        }
        job.reads = reads;
        match ending {
            Ending::RollbackAfterReads => return self.roll_back(transaction, job),
            Ending::Abandon => {
                let slot = &mut self.slots[job.local];
                slot.wake_at_us = self.context.now_us() + ABANDON_US;
                slot.held = Some((transaction, job));
                return;
            }
            Ending::Commit | Ending::SeparateCommit | Ending::RollbackAfterWrites => {}
        }
        // New balances: random amounts that sum to zero.
        let count = job.reads.len();
        let mut amounts: Vec<i64> = (0..count - 1)
            .map(|_| self.random.below(201) as i64 - 100)
            .collect();
        amounts.push(-amounts.iter().sum::<i64>());
        let table = self.table;
        let fail = |error: ClientError| -> ! { panic!("transfer {id:#x}: {error}") };
        job.ops.clear();
        if self.random.below(10) == 0 {
            // Write the first account twice: the ldm must install only the
            // transaction's last image of the row.
            let (account, _, _) = job.reads[0];
            let junk = update_values(-999_999, id, Some(b"junk".to_vec()));
            let key = [Value::UInt(account.into())];
            transaction
                .update(table, &key, &junk)
                .unwrap_or_else(|e| fail(e));
        }
        let mut writes = Vec::with_capacity(count);
        for (&(account, _, balance), amount) in job.reads.iter().zip(amounts) {
            let note = plans::random_note(&mut self.random);
            let new_balance = balance + amount;
            let key = [Value::UInt(account.into())];
            // A quarter of the writes set the balance read (over any junk
            // written above), the writer and the note, and let the data
            // node add the amount (an increment, on the transaction's own
            // image of the row after the update): the balance the ledger
            // expects is the same. Chosen from the ids, so the seeds'
            // random streams stay as they were.
            if (id ^ u64::from(account)) % 4 == 0 {
                let values = update_values(balance, id, note.clone());
                transaction
                    .update(table, &key, &values)
                    .unwrap_or_else(|e| fail(e));
                transaction
                    .increment(table, &key, &[(rows::BALANCE, amount)])
                    .unwrap_or_else(|e| fail(e));
            } else {
                let values = update_values(new_balance, id, note.clone());
                transaction
                    .update(table, &key, &values)
                    .unwrap_or_else(|e| fail(e));
            }
            writes.push(Written {
                account,
                balance: new_balance,
                note,
            });
        }
        let reads = job
            .reads
            .iter()
            .map(|&(account, writer, _)| (account, writer))
            .collect();
        {
            let mut state = self.state();
            let result = state.ledger.will_write(id, reads, writes);
            state.check(result);
        }
        job.durable = self.random.below(8) == 0;
        if ending == Ending::Commit {
            job.step = Step::Committing;
            let commit = job.commit();
            session.execute(transaction, commit, job);
        } else {
            job.step = Step::Writing;
            session.execute(transaction, Commit::No, job);
        }
    }

    /// A transfer rolls back after its reads or writes (a sync rollback:
    /// the other slots' answers wait in the session).
    fn roll_back(&mut self, mut transaction: Transaction<'a>, job: Job) {
        let id = transaction.id().0;
        match transaction.rollback() {
            Ok(()) => {
                let mut state = self.state();
                state.counters.all_aborted += 1;
                if state.phase == Phase::Running {
                    state.counters.aborted += 1;
                    state.counters.rolled_back += 1;
                }
            }
            Err(error) if self.state().crashed && error.is_temporary() => {}
            Err(error) => self
                .state()
                .fail(format!("rollback of {id:#x} ({:?}): {error}", job.plan)),
        }
        // Not committed either way: a lost connection aborts it too.
        self.forget_writes(id);
        self.ended(job.local, false);
    }

    /// An abandoned transfer's silence is over: the tc aborted it for
    /// inactivity, and the rollback finds nothing to roll back.
    fn end_abandoned(&mut self, mut transaction: Transaction<'a>, job: Job) {
        let id = transaction.id().0;
        match transaction.rollback() {
            Ok(()) => {
                let mut state = self.state();
                // The tc's abort (inactivity), which the client never heard
                // (no batch of it was waiting).
                state.counters.all_aborted += 1;
                state.counters.aborted += 1;
                state.counters.rolled_back += 1;
            }
            Err(error) if self.state().crashed && error.is_temporary() => {}
            Err(error) => self
                .state()
                .fail(format!("rollback of abandoned {id:#x}: {error}")),
        }
        self.ended(job.local, false);
    }

    /// The cluster crashed: held transfers end (their connection is gone;
    /// they wrote nothing).
    fn end_held_after_crash(&mut self) {
        for local in 0..self.slots.len() {
            if let Some((transaction, job)) = self.slots[local].held.take() {
                drop(transaction);
                self.ended(job.local, false);
            }
        }
    }

    /// The ledger's record of `id`'s writes (if any) goes: it did not
    /// commit.
    fn forget_writes(&self, id: u64) {
        let mut state = self.state();
        if state.ledger.knows(id) {
            let result = state.ledger.aborted(id);
            state.check(result);
        }
    }

    /// A committed transaction: the model learns what it did.
    fn committed(&mut self, transaction: &Transaction<'a>, job: &Job, gci: Gci, durable: bool) {
        let id = transaction.id().0;
        let slot = self.slots[job.local].slot;
        let mut state = self.state();
        state.counters.all_committed += 1;
        if gci != Gci(0) {
            state.committed_gcis.push(gci);
        }
        if durable && gci != Gci(0) {
            state.counters.durable_commits += 1;
            state.durable_gci = state.durable_gci.max(gci);
        }
        match &job.plan {
            Plan::Load { .. } => {
                let result = state.ledger.committed(id, gci, &[]);
                state.check(result);
            }
            Plan::Transfer { .. } => {
                let reads: Vec<(u32, u64)> = job
                    .reads
                    .iter()
                    .map(|&(account, writer, _)| (account, writer))
                    .collect();
                let result = state.ledger.committed(id, gci, &reads);
                state.check(result);
                state.counters.transfers_committed += 1;
            }
            Plan::Scratch {
                key,
                ops,
                after,
                expect_error,
            } => {
                if let Some((error, op)) = expect_error {
                    state.fail(format!(
                        "scratch key {key}: {ops:?} committed, but the model predicts {error:?} \
                         at op {op}"
                    ));
                }
                let locks = ops.iter().any(|op| op.lock != LockMode::CommittedRead);
                if locks != (gci != Gci(0)) {
                    state.fail(format!(
                        "scratch key {key}: {ops:?} committed with GCI {gci}"
                    ));
                }
                for (position, op) in ops.iter().enumerate() {
                    if op.kind != OperationKind::Read {
                        continue;
                    }
                    let row = read_row(transaction, job.ops[position]);
                    match &row {
                        Ok(row) if row.id == *key && row.balance == 0 && row.note == op.note => {}
                        _ => state.fail(format!(
                            "scratch key {key}: op {position} of {ops:?} read {row:?}, the \
                             model says the note is {:?}",
                            op.note
                        )),
                    }
                }
                // Verifying reads change nothing, and any slot may run them.
                if state.phase != Phase::Verifying {
                    let index = (key - plans::scratch_key(slot, 0)) as usize;
                    state.slots[slot].scratch[index] = after.clone();
                    // A locking transaction on the key read or overwrote the
                    // last write to it: its GCI is no smaller.
                    let last = state.slots[slot].scratch_gci[index];
                    if gci != Gci(0) && gci < last {
                        state.fail(format!(
                            "GCI order: scratch key {key}: {ops:?} committed in GCI {gci}, \
                             before the key's last write in {last}"
                        ));
                    }
                    if ops.iter().any(|op| op.kind != OperationKind::Read) {
                        state.slots[slot].scratch_gci[index] = gci;
                        let after = after.clone();
                        state.slots[slot]
                            .scratch_log
                            .push((index as u32, gci, after));
                    }
                }
            }
            Plan::Token { key, insert } => {
                let read_op = job.ops[usize::from(*insert)];
                let row = read_row(transaction, read_op)
                    .unwrap_or_else(|error| state.fail(format!("token {key}: {error}")));
                let result = if *insert {
                    if row.writer != id {
                        state.fail(format!(
                            "token {key}: an insert read back {row:?}, not its own row"
                        ));
                    }
                    state.tokens.insert_committed(id, gci)
                } else {
                    state.tokens.delete_committed(id, *key, row.writer, gci)
                };
                state.check(result);
            }
            Plan::VerifyToken { key } => {
                let row = read_row(transaction, job.ops[0])
                    .unwrap_or_else(|error| state.fail(format!("token {key}: {error}")));
                state.final_tokens.insert(*key, Some(row.writer));
            }
            Plan::VerifyAccounts { first, count } => {
                if gci != Gci(0) {
                    state.fail(format!("committed reads committed with GCI {gci}"));
                }
                for (account, &op) in (*first..first + count).zip(&job.ops) {
                    let row = read_row(transaction, op).unwrap_or_else(|error| {
                        state.fail(format!("account {account} at the end: {error}"))
                    });
                    state.check(state.ledger.check_read(
                        account,
                        row.writer,
                        row.balance,
                        &row.note,
                    ));
                    state.final_rows.insert(account, row);
                }
            }
        }
        if state.phase == Phase::Running {
            state.counters.committed += 1;
        }
    }

    /// A batch failed: the tc refused it, or the cluster crashed.
    fn failed(&mut self, transaction: Transaction<'a>, job: Job, error: ClientError) {
        let id = transaction.id().0;
        let heard_committed = transaction.state() == TransactionState::Committed;
        match (error, transaction.commit_gci()) {
            (ClientError::Operation { code, op, .. }, _) => {
                self.refused(transaction, job, code, op)
            }
            (ClientError::DuplicateKey { op, .. }, _) => {
                self.refused(transaction, job, ErrorCode::DuplicateKey, op)
            }
            // A durable commit heard committed whose wait for durability
            // failed (refused, or cut by a crash): committed in its GCI,
            // its durability unconfirmed.
            (ClientError::OutcomeUnknown { .. }, Some(gci)) if heard_committed => {
                self.committed(&transaction, &job, gci, false);
                self.ended(job.local, false);
            }
            (error, _) if self.state().crashed => self.failed_at_crash(transaction, job, error),
            (error, _) => self.state().fail(format!(
                "transaction {id:#x} ({:?}, step {:?}): {error}",
                job.plan, job.step
            )),
        }
    }

    /// The tc refused the transaction with `code` (at operation `op`).
    fn refused(
        &mut self,
        transaction: Transaction<'a>,
        job: Job,
        code: ErrorCode,
        op: Option<OpId>,
    ) {
        let id = transaction.id().0;
        drop(transaction);
        let slot = &self.slots[job.local];
        let mut retry = None;
        {
            let mut state = lock(self.shared);
            // Refused before the tc took a record: the tc aborted nothing.
            if code == ErrorCode::OutOfTransactionRecords {
                state.counters.refused_without_record += 1;
            } else {
                state.counters.all_aborted += 1;
            }
            if state.phase == Phase::Running {
                state.counters.aborted += 1;
                *state
                    .counters
                    .aborts_by_code
                    .entry(code as u16)
                    .or_default() += 1;
            }
            if state.ledger.knows(id) {
                let result = state.ledger.aborted(id);
                state.check(result);
            }
            let temporary = code.class() == ErrorClass::Temporary;
            match (&job.plan, job.step) {
                (Plan::Token { key, insert }, _) => {
                    let expected = if *insert {
                        ErrorCode::DuplicateKey
                    } else {
                        ErrorCode::NoSuchRow
                    };
                    if code != expected && !temporary {
                        state.fail(format!("token {key}: refused with {code:?}"));
                    }
                    if *insert {
                        let result = state.tokens.insert_aborted(id);
                        state.check(result);
                    }
                }
                (Plan::VerifyToken { key }, _) if code == ErrorCode::NoSuchRow => {
                    state.final_tokens.insert(*key, None);
                }
                (plan, step)
                    if temporary
                        && code != ErrorCode::TransactionInactive
                        && !(code == ErrorCode::LockWaitTimeout
                            && step == Step::Writing
                            && matches!(
                                plan,
                                Plan::Transfer {
                                    lock: LockMode::Exclusive,
                                    ..
                                }
                            )) =>
                {
                    // Out of records, or a deadlock: retry the whole plan
                    // (the model did not change, the transaction left
                    // nothing). A lock wait is possible in the write step
                    // only for shared reads upgrading to exclusive.
                    retry = Some(plan.clone());
                }
                (
                    Plan::Scratch {
                        expect_error: Some((expected, position)),
                        key,
                        ..
                    },
                    _,
                ) => {
                    let at = job.ops.get(*position as usize).copied();
                    if *expected != code || op != at {
                        state.fail(format!(
                            "scratch key {key}: refused with {code:?} at {op:?}, the model \
                             predicts {expected:?} at {at:?}"
                        ));
                    }
                }
                (plan, step) => {
                    state.fail(format!("{code:?} at {op:?} for {plan:?} in step {step:?}"))
                }
            }
            if let Some(plan) = &retry {
                let now = self.context.now_us();
                let since = slot.retrying_since_us.unwrap_or(now);
                if now - since > RETRY_LIMIT_US {
                    state.fail(format!(
                        "{plan:?} kept failing for {} ms, last with {code:?}",
                        (now - since) / 1000
                    ));
                }
            }
        }
        let retrying = retry.is_some();
        if retrying {
            let now = self.context.now_us();
            let slot = &mut self.slots[job.local];
            slot.retrying_since_us.get_or_insert(now);
            slot.retries += 1;
            slot.retry = retry;
        }
        self.ended(job.local, retrying);
    }

    /// The cluster crashed under the transaction: a commit whose answer
    /// was lost is in doubt; anything else did not commit.
    fn failed_at_crash(&mut self, transaction: Transaction<'a>, job: Job, error: ClientError) {
        let id = transaction.id().0;
        let slot = self.slots[job.local].slot;
        let mut state = self.state();
        match error {
            ClientError::OutcomeUnknown { .. } => {
                state.in_doubt += 1;
                match &job.plan {
                    Plan::Scratch {
                        key,
                        ops,
                        after,
                        expect_error: None,
                    } if ops.iter().any(|op| op.kind != OperationKind::Read) => {
                        let index = key - plans::scratch_key(slot, 0);
                        state.slots[slot].scratch_in_doubt = Some((index, after.clone()));
                    }
                    Plan::Token { key, insert: false } => {
                        *state.token_deletes_in_doubt.entry(*key).or_default() += 1;
                    }
                    // The ledger and the tokens keep the writes pending.
                    _ => {}
                }
            }
            error if error.is_temporary() => {
                if state.ledger.knows(id) {
                    let result = state.ledger.aborted(id);
                    state.check(result);
                }
                if let Plan::Token { insert: true, .. } = job.plan {
                    let result = state.tokens.insert_aborted(id);
                    state.check(result);
                }
            }
            error => state.fail(format!(
                "transaction {id:#x} ({:?}, step {:?}) at the crash: {error}",
                job.plan, job.step
            )),
        }
        drop(state);
        self.ended(job.local, false);
    }

    /// The slot's transaction ended: think a little (back off, more after
    /// each failure, when retrying), then go on.
    fn ended(&mut self, local: usize, retrying: bool) {
        self.state().ended += 1;
        let now = self.context.now_us();
        let slot = &mut self.slots[local];
        slot.busy = false;
        let pause_us = if retrying {
            // Transfers that deadlocked should not meet again, and clients
            // refused for lack of records should not spin while the
            // records are held.
            self.random.below(1000 << slot.retries.min(5))
        } else {
            slot.retries = 0;
            slot.retrying_since_us = None;
            self.random.below(200)
        };
        slot.wake_at_us = now + pause_us;
    }
}

impl Job {
    /// The commit this transfer asks for.
    fn commit(&self) -> Commit {
        if self.durable {
            Commit::Durable
        } else {
            Commit::Yes
        }
    }
}

/// Every column of a bank row.
fn row_values(id: u32, balance: i64, writer: u64, note: Option<Vec<u8>>) -> Vec<(u16, Value)> {
    vec![
        (rows::ID, Value::UInt(id.into())),
        (rows::BALANCE, Value::Int(balance)),
        (rows::WRITER, Value::UInt(writer)),
        (rows::NOTE, note_value(note)),
    ]
}

/// The non-key columns of a bank row.
fn update_values(balance: i64, writer: u64, note: Option<Vec<u8>>) -> Vec<(u16, Value)> {
    vec![
        (rows::BALANCE, Value::Int(balance)),
        (rows::WRITER, Value::UInt(writer)),
        (rows::NOTE, note_value(note)),
    ]
}

fn note_value(note: Option<Vec<u8>>) -> Value {
    note.map_or(Value::Null, Value::Bytes)
}

/// The row operation `op` read.
fn read_row(transaction: &Transaction<'_>, op: OpId) -> Result<Row, String> {
    let row = transaction
        .get(op)
        .ok_or_else(|| format!("no row for {op:?}"))?;
    rows::from_client(row)
}
