//! What a tc does when data nodes fail (docs/design/failures.md §6): it
//! routes around them. Every table's map loses the failed nodes'
//! replicas (the next replica in chain order becomes primary where the
//! primary failed) and takes the new membership's id as its version, so
//! the next reply tells each client to refresh its maps.
//!
//! Once every survivor refuses the failed nodes' signals
//! (NODE_FAIL_COMPLETE_REP), the tc ends the transactions they took part
//! in that it has not decided to commit: each is aborted on the live
//! replicas (ABORT enters at the first replica alive and skips the failed
//! ones, `ldm::abort`), and the client hears the temporary error
//! `NodeFailureAbort` (at once if it waits for a batch, else in answer to
//! its next operation, `abort.rs`), so a retry goes through the new
//! routes. An operation whose every replica failed (a read's primary)
//! counts as confirmed at once (`Tc::advance_operations`). Doing it
//! before then could cross a late prepare of a failed node at a survivor
//! that had not refused it yet: the abort would pass first and the
//! prepare would hold its lock forever.
//!
//! A transaction already decided keeps its outcome: an operation whose
//! COMMIT, COMPLETE or ABORT ran into the failed node is finished on the
//! live replicas by RESOLVE_REQ (`ldm::resolve`), sent at once for the
//! steps that start later, and at NODE_FAIL_COMPLETE_REP for those
//! already under way (its normal answer, if one still comes, is ignored:
//! from the same replica, it comes before the resolve's). A transaction
//! whose coordinator failed is coordinator take-over's
//! (docs/design/failures.md §7, `takeover`).

use crate::records::{AbortReply, OpPhase, TransactionState, NIL};
use crate::Tc;
use kernel::Context;
use signal::signals::{resolve_step, NodeFailRep, ResolveConf, ResolveReq};
use signal::{BlockKind, BlockRef, ErrorCode, NodeSet, Signal};

impl Tc {
    /// NODE_FAILREP: new operations route around the failed nodes.
    pub(crate) fn node_failed(
        &mut self,
        from: BlockRef,
        report: NodeFailRep,
        ctx: &mut dyn Context,
    ) {
        self.node_failures
            .install(self.config.address, from, &report, ctx);
        // Every change moves the routes: a failure takes replicas out, a
        // node restart's end puts one back, last in its chains.
        for route in self.tables.iter_mut().flatten() {
            let map = self.node_failures.route(&route.created);
            self.map_version = self.map_version.max(map.version);
            route.map = map;
        }
    }

    /// NODE_FAIL_COMPLETE_REP: every survivor refuses the failed nodes;
    /// abort the undecided transactions that had an operation on them.
    pub(crate) fn node_fail_complete(&mut self, membership_id: u32, ctx: &mut dyn Context) {
        if !self.node_failures.complete(membership_id) {
            return;
        }
        let failed = self.node_failures.failed();
        self.build_without(failed, ctx);
        let mut transaction = self.records.active_head;
        while transaction != NIL {
            let record = &self.records.transactions[transaction as usize];
            let next = record.next_active;
            let undecided = matches!(
                record.state,
                TransactionState::Idle
                    | TransactionState::Executing
                    | TransactionState::WaitingForGci
            );
            if !undecided {
                self.resolve_steps_under_way(transaction, failed, ctx);
            } else if self.transaction_touches(transaction, failed) {
                if record.state == TransactionState::WaitingForGci {
                    self.unlink_waiting_for_gci(transaction);
                }
                let reply = AbortReply::Error {
                    error: ErrorCode::NodeFailureAbort,
                    client_op: u32::MAX,
                };
                self.start_abort(transaction, reply, ctx);
            }
            transaction = next;
        }
        self.start_takeover(ctx);
    }

    /// Whether an operation of `transaction` that may hold something ran
    /// on a node of `failed`.
    fn transaction_touches(&self, transaction: u32, failed: NodeSet) -> bool {
        let mut op = self.records.transactions[transaction as usize].first_op;
        while op != NIL {
            let operation = &self.records.operations[op as usize];
            if matches!(operation.phase, OpPhase::Sent | OpPhase::Prepared)
                && operation.chain.touches(failed)
            {
                return true;
            }
            op = operation.next;
        }
        false
    }

    /// Takes `transaction` off the list of commit decisions waiting for
    /// the next GCI.
    fn unlink_waiting_for_gci(&mut self, transaction: u32) {
        let mut previous = NIL;
        let mut current = self.waiting_for_gci_head;
        while current != NIL && current != transaction {
            previous = current;
            current = self.records.transactions[current as usize].next_waiting_for_gci;
        }
        assert_eq!(
            current, transaction,
            "tc {}: transaction {transaction} waits for a GCI but is not on the list",
            self.config.address
        );
        let next = self.records.transactions[transaction as usize].next_waiting_for_gci;
        self.records.transactions[transaction as usize].next_waiting_for_gci = NIL;
        if previous == NIL {
            self.waiting_for_gci_head = next;
        } else {
            self.records.transactions[previous as usize].next_waiting_for_gci = next;
        }
        if self.waiting_for_gci_tail == transaction {
            self.waiting_for_gci_tail = previous;
        }
    }

    /// Sends the COMMIT, COMPLETE or ABORT of each operation of
    /// `transaction` under way through a chain that lost a node again,
    /// as RESOLVE_REQ over the live replicas.
    fn resolve_steps_under_way(
        &mut self,
        transaction: u32,
        failed: NodeSet,
        ctx: &mut dyn Context,
    ) {
        let record = &self.records.transactions[transaction as usize];
        let (transaction_id, gci) = (record.transaction_id, record.gci);
        let address = self.config.address;
        // Operations whose every replica failed (a read's primary): what
        // they held went with the node, and none is left to answer.
        let mut gone = Vec::new();
        let mut op = record.first_op;
        while op != NIL {
            let operation = &self.records.operations[op as usize];
            let next = operation.next;
            let step = match operation.phase {
                OpPhase::Committing => Some(resolve_step::COMMIT),
                OpPhase::Completing => Some(resolve_step::COMPLETE),
                OpPhase::Aborting => Some(resolve_step::ABORT),
                _ => None,
            };
            let step = step.filter(|_| !operation.resolving && operation.chain.touches(failed));
            if let Some(step) = step.filter(|_| operation.chain.all_failed(failed)) {
                gone.push((op, step));
            } else if let Some(step) = step {
                let request = ResolveReq {
                    tc: address,
                    reply_to: address,
                    tc_op: op,
                    transaction_id,
                    chain: operation.chain,
                    step,
                    gci: if step == resolve_step::COMMIT {
                        gci
                    } else {
                        signal::Gci(0)
                    },
                };
                self.send_resolve(op, &request.into(), ctx);
            }
            op = next;
        }
        // Confirmed as their answers would have: each may move the
        // transaction on (or end it), so only once the walk is done.
        for (op, step) in gone {
            match step {
                resolve_step::COMMIT => self.commit_confirmed(op, ctx),
                resolve_step::COMPLETE => self.complete_confirmed(op),
                _ => self.abort_confirmed(op, ctx),
            }
        }
    }

    /// Sends `request` (a COMMIT, COMPLETE or RESOLVE_REQ of operation
    /// `op`) as RESOLVE_REQ over the live replicas of its chain, into the
    /// end its step starts from; the operation then waits for
    /// RESOLVE_CONF.
    pub(crate) fn send_resolve(&mut self, op: u32, request: &Signal, ctx: &mut dyn Context) {
        let operation = &mut self.records.operations[op as usize];
        let transaction_id =
            self.records.transactions[operation.transaction as usize].transaction_id;
        let (step, gci) = match request {
            Signal::CommitReq(commit) => (resolve_step::COMMIT, commit.gci),
            Signal::CompleteReq(_) => (resolve_step::COMPLETE, signal::Gci(0)),
            Signal::ResolveReq(resolve) => (resolve.step, resolve.gci),
            other => unreachable!(
                "tc {}: {} is not resolved",
                self.config.address,
                other.name()
            ),
        };
        let live = operation
            .chain
            .without(self.node_failures.failed())
            .unwrap_or_else(|| {
                panic!(
                    "tc {}: every replica of an operation's chain failed, and the survival \
                     rule lets no side without a whole node group continue",
                    self.config.address
                )
            });
        operation.resolving = true;
        let entry = if step == resolve_step::ABORT {
            live.primary()
        } else {
            live.last()
        };
        let target = BlockRef::new(entry, BlockKind::Ldm, operation.primary.instance);
        let resolve = ResolveReq {
            tc: self.config.address,
            reply_to: self.config.address,
            tc_op: op,
            transaction_id,
            chain: live,
            step,
            gci,
        };
        kernel::send(ctx, self.config.address, target, resolve);
    }

    /// RESOLVE_CONF: the step is done on every live replica of the
    /// operation; it moves on as the normal answer would have moved it.
    pub(crate) fn resolve_conf(&mut self, conf: ResolveConf, ctx: &mut dyn Context) {
        if conf.tc != self.config.address {
            // An operation of a failed tc this one took over.
            return self.takeover_resolve_conf(conf, ctx);
        }
        let Some(operation) = self.records.operations.get_mut(conf.tc_op as usize) else {
            return;
        };
        let expected = match conf.step {
            resolve_step::COMMIT => OpPhase::Committing,
            resolve_step::COMPLETE => OpPhase::Completing,
            _ => OpPhase::Aborting,
        };
        let current = operation.transaction != NIL
            && operation.resolving
            && operation.phase == expected
            && self.records.transactions[operation.transaction as usize].transaction_id
                == conf.transaction_id;
        if !current {
            // A duplicate, or for an operation finished since.
            return;
        }
        // Moved on as by a normal answer; a next step through the same
        // chain goes out as a resolve again (`Tc::advance_operations`).
        operation.resolving = false;
        match conf.step {
            resolve_step::COMMIT => self.commit_confirmed(conf.tc_op, ctx),
            resolve_step::COMPLETE => self.complete_confirmed(conf.tc_op),
            _ => self.abort_confirmed(conf.tc_op, ctx),
        }
    }
}
