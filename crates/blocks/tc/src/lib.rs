//! tc: the transaction coordinator block (NDB's DBTC), one instance per tc
//! thread (docs/design/transactions.md).
//!
//! A client's batch arrives as TCKEYREQs; each operation is routed by its
//! key's hash to the ldm owning its partition (LQHKEYREQ). When the batch is
//! prepared, the tc either answers (TCKEYCONF) or, asked to commit, takes
//! the current GCI at the commit decision, sends COMMIT to every operation,
//! acknowledges the client with the GCI, then sends COMPLETE. Any failure
//! aborts the whole transaction and releases every lock; the client hears
//! of it once, by one TCKEYREF for the batch (the rest of a batch still
//! arriving is dropped: `TransactionState::AbortedAwaitingBatchEnd`).
//! GCP_PREPARE makes
//! the tc hold new commit decisions until GCP_COMMIT hands out the next GCI,
//! which is what keeps dependent transactions' GCIs ordered
//! (docs/design/durability.md §1).
//!
//! Split by concern: `records` (pools), `execute` (batches), `commit`
//! (commit, complete, GCP), `abort` (abort, timeouts, API failure),
//! `durability` (commit phases per GCI for the master dih's GCP_FLUSH_REQ,
//! the complete GCI and API nodes' GCI_WAIT_REQs), `failover` (routes and
//! transactions when data nodes fail), `takeover` (the transactions of a
//! failed node's tcs), `unique` (keeping unique indexes' hidden tables
//! in the transactions that write their base tables), `unique_read`
//! (reads through a unique index in one round trip), `alter` (a table's
//! index list changing: the hidden tables it keeps), `unique_build` (the
//! hidden rows of a unique index created on a table that holds rows).

mod abort;
#[cfg(test)]
mod abort_tests;
mod alter;
mod commit;
mod durability;
#[cfg(test)]
mod durability_tests;
mod execute;
mod failover;
pub mod records;
#[cfg(test)]
mod refusal_tests;
#[cfg(test)]
mod robustness_tests;
mod takeover;
#[cfg(test)]
mod takeover_tests;
#[cfg(test)]
mod tests;
mod unique;
mod unique_build;
mod unique_read;
#[cfg(test)]
mod unique_tests;

use durability::Durability;
use kernel::node_failures::NodeFailures;
use kernel::{send, Block, Context};
use records::{OpPhase, Records, TcOperation, NIL};
use signal::schema::TableDef;
use signal::signals::*;
use signal::{codec, BlockKind, BlockRef, Envelope, ErrorCode, Gci, Signal, TransactionId};
use std::sync::Arc;

/// Periodic job: the timeout scan.
pub const TIMEOUT_SCAN_JOB: u32 = 1;

/// How to build a tc instance.
#[derive(Clone, Debug)]
pub struct TcConfig {
    /// This instance's address.
    pub address: BlockRef,
    /// Transaction records.
    pub max_transactions: u32,
    /// Operation records.
    pub max_operations: u32,
    /// Most operations in one transaction.
    pub max_operations_per_transaction: u32,
    /// Longest wait for the ldms during a batch before aborting (deadlock).
    pub lock_wait_timeout_ms: u64,
    /// Longest client silence inside a transaction before aborting.
    pub inactive_transaction_timeout_ms: u64,
    /// ldm instances per data node (a take-over asks each of them).
    pub ldm_instances: u16,
}

pub(crate) struct TableRoute {
    pub(crate) definition: Arc<TableDef>,
    /// The map as created (dict's).
    pub(crate) created: Arc<PartitionMap>,
    /// The map routed with: `created` under the agreed membership
    /// (`NodeFailures::route`).
    pub(crate) map: Arc<PartitionMap>,
    /// The table's unique indexes, which its writes keep (`unique.rs`).
    pub(crate) unique: Vec<UniqueIndex>,
    /// A unique index's hidden table: its base table's id. Clients may
    /// read it, never write it.
    pub(crate) hidden_of: Option<u32>,
}

/// A unique index as a tc keeps it.
pub(crate) struct UniqueIndex {
    pub(crate) index_id: u32,
    /// The base table's columns, in index order.
    pub(crate) columns: Vec<u16>,
    /// The hidden table's id and version.
    pub(crate) table_id: u32,
    pub(crate) table_version: u32,
    /// Its hidden rows are being built (design 0026): a delete of an old
    /// value removes the hidden row only if it names the row.
    pub(crate) building: bool,
}

/// Counters for reports and tests.
#[derive(Clone, Copy, Default, Debug)]
pub struct TcCounters {
    /// Transactions committed.
    pub commits: u64,
    /// Transactions aborted.
    pub aborts: u64,
    /// Operations executed.
    pub operations: u64,
    /// Aborts by lock wait timeout.
    pub lock_wait_timeouts: u64,
    /// Aborts by inactivity.
    pub inactivity_timeouts: u64,
    /// Transactions of failed tcs this tc committed by take-over.
    pub takeover_commits: u64,
    /// Transactions of failed tcs this tc aborted by take-over.
    pub takeover_aborts: u64,
    /// LQHKEYCONF/REF from another node's ldm for an operation that
    /// awaited none (late signals), dropped.
    pub stray_ldm_answers: u64,
    /// Walks of a unique index's build started again after a node
    /// failure (`unique_build.rs`).
    pub unique_build_restarts: u64,
}

/// The tc block.
pub struct Tc {
    pub(crate) config: TcConfig,
    pub(crate) records: Records,
    pub(crate) tables: Vec<Option<TableRoute>>,
    pub(crate) started: bool,
    /// The GCI new commits get; zero until the first GCP_COMMIT.
    pub(crate) current_gci: Gci,
    /// Between GCP_PREPARE and GCP_COMMIT: hold commit decisions.
    pub(crate) gcp_prepared: bool,
    pub(crate) waiting_for_gci_head: u32,
    pub(crate) waiting_for_gci_tail: u32,
    pub(crate) counters: TcCounters,
    /// The newest partition map version this tc routes with; every reply to
    /// a client carries it so a client with older maps refreshes them.
    pub(crate) map_version: u32,
    /// Commit phases per GCI, the pending flush, the complete GCI and the
    /// API nodes waiting for it.
    pub(crate) durability: Durability,
    /// The agreed membership: nothing of a failed node is handled, and
    /// routes leave its replicas out.
    pub(crate) node_failures: NodeFailures,
    /// The take-over of failed tcs' transactions this tc runs, if any.
    pub(crate) takeover: takeover::Takeover,
    /// The node is stopping gracefully: who asked (the local
    /// membership). No new transaction begins; TC_DRAIN_CONF goes back
    /// once none is left.
    pub(crate) draining: Option<BlockRef>,
    /// TC_DRAIN_CONF was sent.
    pub(crate) drained: bool,
    /// Unique index builds' switches waiting for the transactions from
    /// before them (`alter.rs`).
    pub(crate) switches: alter::Switches,
    /// The hidden rows of a unique index this tc builds, if any
    /// (`unique_build.rs`).
    pub(crate) unique_build: Option<unique_build::UniqueBuild>,
    pub(crate) build_transactions: unique_build::BuildTransactions,
}

impl Tc {
    /// Builds a tc with its pools.
    pub fn new(config: TcConfig) -> Tc {
        Tc {
            records: Records::new(config.max_transactions, config.max_operations),
            // One wait per transaction record: an API node waits for the
            // GCI of a commit it made.
            durability: Durability::new(config.max_transactions as usize),
            config,
            tables: Vec::new(),
            started: false,
            current_gci: Gci(0),
            gcp_prepared: false,
            waiting_for_gci_head: NIL,
            waiting_for_gci_tail: NIL,
            counters: TcCounters::default(),
            map_version: 0,
            node_failures: NodeFailures::default(),
            takeover: takeover::Takeover::default(),
            draining: None,
            drained: false,
            switches: alter::Switches::default(),
            unique_build: None,
            build_transactions: unique_build::BuildTransactions::default(),
        }
    }

    /// Counters so far.
    pub fn counters(&self) -> TcCounters {
        self.counters
    }

    /// Transactions in use.
    pub fn transactions_in_use(&self) -> u32 {
        self.records.transactions_in_use
    }

    /// The partition map this tc routes each known table by (for the
    /// simulator's check that tcs of one membership agree on every
    /// partition's primary).
    pub fn routing_maps(&self) -> impl Iterator<Item = &PartitionMap> {
        self.tables.iter().flatten().map(|route| route.map.as_ref())
    }

    /// (id, version, index revision) of every table this tc routes: its
    /// answer to a master dict's take-over, and what the simulator
    /// compares.
    pub fn table_versions(&self) -> Vec<(u32, u32, u32)> {
        let tables = self.tables.iter().enumerate();
        tables
            .filter_map(|(id, route)| {
                let route = route.as_ref().filter(|route| route.hidden_of.is_none())?;
                let definition = &route.definition;
                Some((id as u32, definition.version, definition.revision))
            })
            .collect()
    }

    /// (id, base table id) of every unique index's hidden table this tc
    /// routes, for the simulator's schema agreement.
    pub fn hidden_tables(&self) -> Vec<(u32, u32)> {
        let tables = self.tables.iter().enumerate();
        tables
            .filter_map(|(id, route)| Some((id as u32, route.as_ref()?.hidden_of?)))
            .collect()
    }

    /// A graceful stop: once no transaction is left, tells the membership
    /// that asked (looked at again at every timeout scan).
    fn answer_if_drained(&mut self, ctx: &mut dyn Context) {
        if let Some(requester) = self.draining {
            if !self.drained && self.records.transactions_in_use == 0 {
                self.drained = true;
                send(ctx, self.config.address, requester, TcDrainConf {});
            }
        }
    }

    /// Runs the timeout scan again after its period.
    fn schedule_timeout_scan(&self, ctx: &mut dyn Context) {
        let address = self.config.address;
        let period = (self.config.lock_wait_timeout_ms / 10).clamp(10, 100);
        ctx.send_delayed(
            Envelope {
                from: address,
                to: address,
                signal: ContinueB {
                    job: TIMEOUT_SCAN_JOB,
                }
                .into(),
            },
            period,
        );
    }

    /// Answers `to`'s request about a whole transaction (TC_COMMITREQ,
    /// TC_ROLLBACKREQ) with a TCKEYREF that names no operation.
    pub(crate) fn refuse_whole_transaction(
        &self,
        ctx: &mut dyn Context,
        to: BlockRef,
        transaction_id: TransactionId,
        error: ErrorCode,
    ) {
        let refusal = TcKeyRef {
            transaction_id,
            client_op: u32::MAX,
            error,
            index_id: 0,
        };
        send(ctx, self.config.address, to, refusal);
    }

    /// Moves every operation of `transaction` that is in one of the phases
    /// `from` on to `to`, sending its ldm the signal `signal` builds from
    /// the operation's index and record. Returns how many were sent: the
    /// answers the new phase waits for.
    pub(crate) fn advance_operations(
        &mut self,
        transaction: u32,
        from: &[OpPhase],
        to: OpPhase,
        signal: impl Fn(u32, &TcOperation) -> Signal,
        ctx: &mut dyn Context,
    ) -> u32 {
        let mut sent = 0;
        let failed = self.node_failures.failed();
        let mut op = self.records.transactions[transaction as usize].first_op;
        while op != NIL {
            let operation = &mut self.records.operations[op as usize];
            if from.contains(&operation.phase) {
                if operation.chain.all_failed(failed) {
                    // Every replica of the operation failed (a read runs
                    // on its primary alone): what it held there went with
                    // the node, and nothing alive is left to tell. It
                    // counts as confirmed at once.
                    operation.phase = if to == OpPhase::Committing {
                        OpPhase::Committed
                    } else {
                        OpPhase::Released
                    };
                    op = operation.next;
                    continue;
                }
                operation.phase = to;
                if to != OpPhase::Aborting && operation.chain.touches(failed) {
                    // The normal signal would stop at the failed node.
                    let request = signal(op, operation);
                    self.send_resolve(op, &request, ctx);
                    sent += 1;
                    op = self.records.operations[op as usize].next;
                    continue;
                }
                // ABORT enters the replica chain at the primary (it follows
                // the prepare down the chain, never overtaking it); COMMIT
                // and COMPLETE enter at the last replica and run back up.
                let target = if to == OpPhase::Aborting {
                    // Past a failed primary: the first replica alive.
                    operation
                        .chain
                        .without(failed)
                        .map_or(operation.primary, |live| {
                            BlockRef::new(
                                live.primary(),
                                BlockKind::Ldm,
                                operation.primary.instance,
                            )
                        })
                } else {
                    operation.ldm
                };
                send(ctx, self.config.address, target, signal(op, operation));
                sent += 1;
                if to == OpPhase::Committing && sent == 1 {
                    ctx.fault_point(kernel::faults::FaultPoint::TcAfterFirstCommit);
                }
            }
            op = operation.next;
        }
        sent
    }

    /// An ldm confirmed operation `tc_op` (`what`, e.g. "COMMITCONF"), which
    /// must be in phase `expected`; it moves to `to`. Returns its
    /// transaction when that was the last answer its phase waited for.
    pub(crate) fn operation_confirmed(
        &mut self,
        tc_op: u32,
        expected: OpPhase,
        to: OpPhase,
        what: &str,
    ) -> Option<u32> {
        let operation = &mut self.records.operations[tc_op as usize];
        if operation.resolving || operation.transaction == NIL {
            // RESOLVE_CONF moves it on; or a late answer for an operation
            // that a resolve finished already.
            return None;
        }
        assert_eq!(
            operation.phase, expected,
            "{what} for an operation not {expected:?}"
        );
        operation.phase = to;
        let transaction = operation.transaction;
        let record = &mut self.records.transactions[transaction as usize];
        record.outstanding -= 1;
        (record.outstanding == 0).then_some(transaction)
    }

    fn add_table(&mut self, from: BlockRef, request: TcAddTabReq, ctx: &mut dyn Context) {
        let table = &request.table;
        let id = table.id as usize;
        let map = self.node_failures.route(&request.map);
        self.map_version = self.map_version.max(map.version);
        let (unique, hidden) = self.unique_routes(table, &request.map);
        for route in hidden {
            self.set_route(route);
        }
        self.set_route(TableRoute {
            definition: request.table,
            created: request.map,
            map,
            unique,
            hidden_of: None,
        });
        send(
            ctx,
            self.config.address,
            from,
            AddTabConf {
                table_id: id as u32,
            },
        );
    }

    fn set_route(&mut self, route: TableRoute) {
        let id = route.definition.id as usize;
        if self.tables.len() <= id {
            self.tables.resize_with(id + 1, || None);
        }
        self.tables[id] = Some(route);
    }

    fn drop_table(&mut self, from: BlockRef, order: DropTabOrd, ctx: &mut dyn Context) {
        // A base table goes with its unique indexes' hidden tables (a
        // hidden table is never dropped alone).
        let slot = self.tables.get_mut(order.table_id as usize);
        let base = slot.filter(|slot| slot.as_ref().is_some_and(|route| route.hidden_of.is_none()));
        if let Some(route) = base.and_then(Option::take) {
            for index in route.unique {
                self.tables[index.table_id as usize] = None;
            }
        }
        send(
            ctx,
            self.config.address,
            from,
            DropTabRep {
                table_id: order.table_id,
                busy: false,
            },
        );
    }

    fn start_phase(&mut self, from: BlockRef, request: StartPhaseReq, ctx: &mut dyn Context) {
        if request.phase == signal::phases::INITIALISE {
            self.schedule_timeout_scan(ctx);
        }
        if request.phase == signal::phases::GLOBAL_CHECKPOINT {
            self.started = true;
        }
        send(
            ctx,
            self.config.address,
            from,
            StartPhaseConf {
                phase: request.phase,
            },
        );
    }
}

impl Tc {
    /// This node restarts into a running cluster: nothing from another
    /// data node is handled until it is admitted (a late signal meant for
    /// its previous incarnation must not reach this one).
    pub fn await_admission(&mut self) {
        let own = self.config.address.node;
        self.node_failures.await_admission(own);
    }
}

impl Block for Tc {
    fn address(&self) -> BlockRef {
        self.config.address
    }

    fn handle(&mut self, envelope: Envelope, ctx: &mut dyn Context) {
        let from = envelope.from;
        if self.node_failures.refuses(from) {
            return;
        }
        match envelope.signal {
            Signal::TcKeyReq(request) => self.tc_key_req(from, request, ctx),
            Signal::TcKeyReqDroppedRep(dropped) => self.tc_key_req_dropped(from, dropped, ctx),
            Signal::LqhKeyConf(conf) => self.lqh_key_conf(from, conf, ctx),
            Signal::LqhKeyRef(refusal) => self.lqh_key_ref(from, refusal, ctx),
            Signal::TcCommitReq(request) => self.tc_commit_req(from, request, ctx),
            Signal::TcRollbackReq(request) => self.tc_rollback_req(from, request, ctx),
            Signal::CommitConf(conf) => self.commit_conf(conf, ctx),
            Signal::CompleteConf(conf) => self.complete_conf(conf, ctx),
            Signal::AbortConf(conf) => self.abort_conf(conf, ctx),
            Signal::ResolveConf(conf) => self.resolve_conf(conf, ctx),
            Signal::TakeoverOpRep(report) => self.takeover_op_rep(from, report),
            Signal::TakeoverConf(conf) => self.takeover_conf(conf, ctx),
            Signal::GcpPrepare(request) => self.gcp_prepare(from, request, ctx),
            Signal::GcpCommit(request) => self.gcp_commit(from, request, ctx),
            Signal::TcAddTabReq(request) => self.add_table(from, request, ctx),
            Signal::TcAlterTabReq(request) => self.alter_table(from, request, ctx),
            Signal::BuildUniqueReq(request) if from.node == self.config.address.node => {
                self.build_unique(from, request, ctx)
            }
            // Answers to the build's own scans and transactions.
            Signal::ScanPartitionConf(conf) => self.build_scanned(from, conf, ctx),
            Signal::ScanPartitionRef(refusal) => self.build_scan_refused(from, refusal, ctx),
            Signal::TransIdAi(read) if from == self.config.address => self.build_row(read),
            Signal::TcKeyConf(conf) if from == self.config.address => {
                self.build_round_done(conf, ctx)
            }
            Signal::TcKeyRef(refusal) if from == self.config.address => {
                self.build_round_refused(refusal, ctx)
            }
            Signal::TcRollbackConf(_) if from == self.config.address => {}
            Signal::ContinueB(ContinueB {
                job: unique_build::UNIQUE_BUILD_JOB,
            }) => self.build_step(ctx),
            Signal::DropTabOrd(order) => self.drop_table(from, order, ctx),
            Signal::DictTakeoverReq(request) => {
                let tables = self.table_versions();
                let me = self.config.address;
                kernel::schema_takeover::answer(ctx, me, from, request, 0, tables.into_iter());
            }
            Signal::StartPhaseReq(request) => self.start_phase(from, request, ctx),
            Signal::GcpFlushReq(request) => self.gcp_flush_req(from, request, ctx),
            Signal::MasterGcpReq(request) => self.master_gcp_req(from, request, ctx),
            Signal::GcpDurableRep(report) => self.gcp_durable_rep(report, ctx),
            Signal::GciWaitReq(request) => self.gci_wait_req(from, request, ctx),
            Signal::ApiFailRep(report) => self.api_failed(report, ctx),
            Signal::NodeFailRep(report) => self.node_failed(from, report, ctx),
            Signal::NodeFailCompleteRep(report) => {
                self.node_fail_complete(report.membership_id, ctx)
            }
            Signal::ContinueB(ContinueB {
                job: TIMEOUT_SCAN_JOB,
            }) => {
                self.timeout_scan(ctx);
                self.schedule_timeout_scan(ctx);
                self.answer_if_drained(ctx);
                self.answer_switches(ctx);
            }
            Signal::TcDrainReq(_)
                if from.node == self.config.address.node && from.kind == BlockKind::Membership =>
            {
                self.draining = Some(from);
                self.answer_if_drained(ctx);
            }
            // From API nodes addressed to this block: never panic.
            other if codec::is_api_request(other.number()) => {
                if let Some(reply) = other.refusal() {
                    send(ctx, self.config.address, from, reply);
                }
            }
            other => panic!(
                "tc {} got unexpected signal {} from {from}",
                self.config.address,
                other.name()
            ),
        }
    }
}
