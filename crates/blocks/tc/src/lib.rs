//! tc: the transaction coordinator block (NDB's DBTC), one instance per tc
//! thread (DESIGN.md §4).
//!
//! A client's batch arrives as TCKEYREQs; each operation is routed by its
//! key's hash to the ldm owning its partition (LQHKEYREQ). When the batch is
//! prepared, the tc either answers (TCKEYCONF) or, asked to commit, takes
//! the current GCI at the commit decision, sends COMMIT to every operation,
//! acknowledges the client with the GCI, then sends COMPLETE. Any failure
//! aborts the whole transaction and releases every lock. GCP_PREPARE makes
//! the tc hold new commit decisions until GCP_COMMIT hands out the next GCI,
//! which is what keeps dependent transactions' GCIs ordered (DESIGN.md §5).
//!
//! Split by concern: `records` (pools), `execute` (batches), `commit`
//! (commit, complete, GCP), `abort` (abort, timeouts, API failure).

mod abort;
mod commit;
mod execute;
mod misaddressed;
pub mod records;
#[cfg(test)]
mod robustness_tests;
#[cfg(test)]
mod tests;

use kernel::{send, Block, Context};
use records::Records;
use signal::schema::TableDef;
use signal::signals::*;
use signal::{codec, BlockRef, Envelope, Gci, Signal};
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
}

pub(crate) struct TableRoute {
    pub(crate) definition: Arc<TableDef>,
    pub(crate) map: Arc<PartitionMap>,
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
}

impl Tc {
    /// Builds a tc with its pools.
    pub fn new(config: TcConfig) -> Tc {
        Tc {
            records: Records::new(config.max_transactions, config.max_operations),
            config,
            tables: Vec::new(),
            started: false,
            current_gci: Gci(0),
            gcp_prepared: false,
            waiting_for_gci_head: records::NIL,
            waiting_for_gci_tail: records::NIL,
            counters: TcCounters::default(),
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

    fn timeout_scan_period_ms(&self) -> u64 {
        (self.config.lock_wait_timeout_ms / 10).clamp(10, 100)
    }

    fn add_table(&mut self, from: BlockRef, request: TcAddTabReq, ctx: &mut dyn Context) {
        let id = request.table.id as usize;
        if self.tables.len() <= id {
            self.tables.resize_with(id + 1, || None);
        }
        self.tables[id] = Some(TableRoute {
            definition: request.table,
            map: request.map,
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

    fn drop_table(&mut self, from: BlockRef, order: DropTabOrd, ctx: &mut dyn Context) {
        if let Some(slot) = self.tables.get_mut(order.table_id as usize) {
            *slot = None;
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
        if request.phase == 1 {
            let address = self.config.address;
            let period = self.timeout_scan_period_ms();
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
        if request.phase == 3 {
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

impl Block for Tc {
    fn address(&self) -> BlockRef {
        self.config.address
    }

    fn handle(&mut self, envelope: Envelope, ctx: &mut dyn Context) {
        let from = envelope.from;
        match envelope.signal {
            Signal::TcKeyReq(request) => self.tc_key_req(from, request, ctx),
            Signal::LqhKeyConf(conf) => self.lqh_key_conf(conf, ctx),
            Signal::LqhKeyRef(refusal) => self.lqh_key_ref(refusal, ctx),
            Signal::TcCommitReq(request) => self.tc_commit_req(from, request, ctx),
            Signal::TcRollbackReq(request) => self.tc_rollback_req(from, request, ctx),
            Signal::CommitConf(conf) => self.commit_conf(conf, ctx),
            Signal::CompleteConf(conf) => self.complete_conf(conf, ctx),
            Signal::AbortConf(conf) => self.abort_conf(conf, ctx),
            Signal::GcpPrepare(request) => self.gcp_prepare(from, request, ctx),
            Signal::GcpCommit(request) => self.gcp_commit(from, request, ctx),
            Signal::TcAddTabReq(request) => self.add_table(from, request, ctx),
            Signal::DropTabOrd(order) => self.drop_table(from, order, ctx),
            Signal::StartPhaseReq(request) => self.start_phase(from, request, ctx),
            Signal::ApiFailRep(report) => self.api_failed(report, ctx),
            Signal::ContinueB(ContinueB {
                job: TIMEOUT_SCAN_JOB,
            }) => {
                self.timeout_scan(ctx);
                let address = self.config.address;
                let period = self.timeout_scan_period_ms();
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
            // From API nodes addressed to this block: never panic.
            other if codec::is_api_request(other.number()) => {
                misaddressed::refuse_misaddressed(self.config.address, from, other, ctx)
            }
            other => panic!(
                "tc {} got unexpected signal {} from {from}",
                self.config.address,
                other.name()
            ),
        }
    }
}
