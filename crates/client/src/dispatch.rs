//! The table of requests in flight on one data-node connection, and the
//! receive side that fills it.
//!
//! Every transaction with a batch outstanding, and every schema request,
//! has a slot here: its own small state behind its own mutex and condvar.
//! The receive thread looks the slot up by transaction id or request id,
//! records the reply and wakes the one waiter. Nothing in a slot assumes
//! that its waiter is a blocked thread: the sync API waits on the slot's
//! condvar, and an async API can keep many slots registered from one thread
//! and collect the finished ones (the slot is where a ready-queue hook goes).
//!
//! When the connection ends, `close` fails every slot with the reason, and
//! registering new slots fails at once, so no caller waits for a reply that
//! cannot come.

use signal::signals::{ApiRegConf, TcKeyConf};
use signal::{ErrorCode, Gci, NodeId, Signal, TransactionId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

/// One waiter's state plus the condvar its waiter sleeps on.
pub(crate) struct Slot<T> {
    state: Mutex<T>,
    ready: Condvar,
}

impl<T> Slot<T> {
    fn new(state: T) -> Slot<T> {
        Slot {
            state: Mutex::new(state),
            ready: Condvar::new(),
        }
    }

    /// Locks the state. A panic while holding the lock cannot leave the
    /// plain data here inconsistent, so poisoning is ignored.
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes the state and wakes the waiter.
    pub(crate) fn update(&self, change: impl FnOnce(&mut T)) {
        let mut state = self.lock();
        change(&mut state);
        drop(state);
        self.ready.notify_all();
    }

    /// Waits until `done` holds or `deadline` passes; returns the locked
    /// state and whether `done` held.
    pub(crate) fn wait_until(
        &self,
        deadline: Instant,
        mut done: impl FnMut(&T) -> bool,
    ) -> (MutexGuard<'_, T>, bool) {
        let mut state = self.lock();
        loop {
            if done(&state) {
                return (state, true);
            }
            let now = Instant::now();
            if now >= deadline {
                return (state, false);
            }
            state = self
                .ready
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// How a transaction's outstanding request ended other than by a
/// confirmation.
#[derive(Debug)]
pub(crate) enum BatchEnd {
    /// TCKEYREF: the transaction is aborted on the data node.
    Refused {
        /// The failing operation (u32::MAX: none named).
        client_op: u32,
        /// Why.
        error: ErrorCode,
    },
    /// TCROLLBACKCONF.
    RolledBack,
    /// The connection ended.
    Lost(String),
}

/// What has arrived for a transaction's outstanding batch.
#[derive(Default, Debug)]
pub(crate) struct TransactionProgress {
    /// Row data of reads, by client operation number, in arrival order.
    /// Copied out of the section at once: a batch may read more rows than
    /// the pool has sections, and they wait here for the batch's TCKEYCONF,
    /// which the receive thread could not decode with the pool drained.
    pub rows: Vec<(u32, Vec<u8>)>,
    /// Operations confirmed by TCKEYCONFs so far.
    pub confirmed_operations: u32,
    /// A TCKEYCONF said the transaction is committed.
    pub committed: bool,
    /// Commit GCI from that TCKEYCONF.
    pub gci: Gci,
    /// Set when the request ended otherwise.
    pub end: Option<BatchEnd>,
}

impl TransactionProgress {
    /// Forgets a previous batch before a new one is sent.
    pub(crate) fn reset(&mut self) {
        *self = TransactionProgress::default();
    }

    fn confirm(&mut self, conf: &TcKeyConf) {
        self.confirmed_operations = self.confirmed_operations.saturating_add(conf.operations);
        if conf.committed {
            self.committed = true;
            self.gci = conf.gci;
        }
    }
}

/// How a schema request ended.
#[derive(Debug)]
pub(crate) enum SchemaReply {
    /// CREATE_TAB_CONF. Its id and version are not kept: the client
    /// fetches the whole stored definition next.
    Created,
    /// DROP_TAB_CONF.
    Dropped,
    /// GET_TABINFO_CONF.
    Info {
        /// Encoded table definition.
        definition: Vec<u8>,
    },
    /// SCHEMA_REF.
    Refused(ErrorCode),
    /// The connection ended.
    Lost(String),
}

/// The registration handshake's state.
#[derive(Default, Debug)]
pub(crate) struct Registration {
    /// The last API_REGCONF and the node that sent it.
    pub conf: Option<(NodeId, ApiRegConf)>,
    /// The connection ended.
    pub lost: Option<String>,
}

pub(crate) type TransactionSlot = Slot<TransactionProgress>;
pub(crate) type RequestSlot = Slot<Option<SchemaReply>>;

#[derive(Default)]
struct Waiting {
    closed: Option<String>,
    transactions: HashMap<TransactionId, Arc<TransactionSlot>>,
    requests: HashMap<u32, Arc<RequestSlot>>,
}

/// The in-flight table of one connection.
pub(crate) struct Dispatch {
    waiting: Mutex<Waiting>,
    /// The registration handshake (one per connection).
    pub registration: Slot<Registration>,
    /// Replies for nothing registered (late answers after a timeout, the
    /// answer to a rollback sent from Drop): counted, then dropped.
    pub stray_replies: AtomicU64,
}

impl Dispatch {
    pub(crate) fn new() -> Dispatch {
        Dispatch {
            waiting: Mutex::new(Waiting::default()),
            registration: Slot::new(Registration::default()),
            stray_replies: AtomicU64::new(0),
        }
    }

    fn waiting(&self) -> MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Why the connection ended, or `None` while it is up.
    pub(crate) fn closed_reason(&self) -> Option<String> {
        self.waiting().closed.clone()
    }

    /// The slot of `transaction`, created if needed; `Err(reason)` once the
    /// connection has ended.
    pub(crate) fn register_transaction(
        &self,
        transaction: TransactionId,
    ) -> Result<Arc<TransactionSlot>, String> {
        let mut waiting = self.waiting();
        if let Some(reason) = &waiting.closed {
            return Err(reason.clone());
        }
        Ok(Arc::clone(
            waiting
                .transactions
                .entry(transaction)
                .or_insert_with(|| Arc::new(Slot::new(TransactionProgress::default()))),
        ))
    }

    /// Forgets a transaction's slot; later replies for it are strays.
    pub(crate) fn unregister_transaction(&self, transaction: TransactionId) {
        self.waiting().transactions.remove(&transaction);
    }

    /// A new slot for schema request `request_id`.
    pub(crate) fn register_request(&self, request_id: u32) -> Result<Arc<RequestSlot>, String> {
        let mut waiting = self.waiting();
        if let Some(reason) = &waiting.closed {
            return Err(reason.clone());
        }
        let slot = Arc::new(Slot::new(None));
        waiting.requests.insert(request_id, Arc::clone(&slot));
        Ok(slot)
    }

    /// Forgets a schema request's slot.
    pub(crate) fn unregister_request(&self, request_id: u32) {
        self.waiting().requests.remove(&request_id);
    }

    /// Number of transactions and requests waiting (for tests and reports).
    pub(crate) fn in_flight(&self) -> usize {
        let waiting = self.waiting();
        waiting.transactions.len() + waiting.requests.len()
    }

    /// Ends the connection's life: every waiter fails with `reason`, and
    /// nothing can register any more. Called once by the receive thread.
    pub(crate) fn close(&self, reason: String) {
        let (transactions, requests) = {
            let mut waiting = self.waiting();
            if waiting.closed.is_none() {
                waiting.closed = Some(reason.clone());
            }
            (
                std::mem::take(&mut waiting.transactions),
                std::mem::take(&mut waiting.requests),
            )
        };
        for slot in transactions.values() {
            slot.update(|progress| progress.end = Some(BatchEnd::Lost(reason.clone())));
        }
        for slot in requests.values() {
            slot.update(|reply| *reply = Some(SchemaReply::Lost(reason.clone())));
        }
        self.registration
            .update(|registration| registration.lost = Some(reason.clone()));
    }

    fn transaction(&self, transaction: TransactionId) -> Option<Arc<TransactionSlot>> {
        let slot = self.waiting().transactions.get(&transaction).cloned();
        if slot.is_none() {
            self.stray_replies.fetch_add(1, Ordering::Relaxed);
        }
        slot
    }

    fn request(&self, request_id: u32) -> Option<Arc<RequestSlot>> {
        let slot = self.waiting().requests.get(&request_id).cloned();
        if slot.is_none() {
            self.stray_replies.fetch_add(1, Ordering::Relaxed);
        }
        slot
    }

    fn answer_request(&self, request_id: u32, reply: SchemaReply) {
        if let Some(slot) = self.request(request_id) {
            slot.update(|state| *state = Some(reply));
        }
    }

    /// Hands one received signal from node `sender` to its waiter.
    /// `Err` names a signal an API node must never receive: the caller
    /// closes the connection, because the peer is not speaking the protocol.
    pub(crate) fn deliver(&self, sender: NodeId, signal: Signal) -> Result<(), String> {
        match signal {
            Signal::ApiRegConf(conf) => self
                .registration
                .update(|registration| registration.conf = Some((sender, conf))),
            Signal::TcKeyConf(conf) => {
                if let Some(slot) = self.transaction(conf.transaction_id) {
                    slot.update(|progress| progress.confirm(&conf));
                }
            }
            Signal::TcKeyRef(refusal) => {
                if let Some(slot) = self.transaction(refusal.transaction_id) {
                    slot.update(|progress| {
                        progress.end = Some(BatchEnd::Refused {
                            client_op: refusal.client_op,
                            error: refusal.error,
                        })
                    });
                }
            }
            Signal::TransIdAi(data) => {
                if let Some(slot) = self.transaction(data.transaction_id) {
                    // No wake-up: rows always precede the batch's TCKEYCONF.
                    slot.lock()
                        .rows
                        .push((data.client_op, data.data.as_slice().to_vec()));
                }
            }
            Signal::TcRollbackConf(conf) => {
                if let Some(slot) = self.transaction(conf.transaction_id) {
                    slot.update(|progress| progress.end = Some(BatchEnd::RolledBack));
                }
            }
            Signal::CreateTabConf(conf) => {
                self.answer_request(conf.request_id, SchemaReply::Created)
            }
            Signal::DropTabConf(conf) => self.answer_request(conf.request_id, SchemaReply::Dropped),
            Signal::GetTabInfoConf(conf) => self.answer_request(
                conf.request_id,
                SchemaReply::Info {
                    definition: conf.definition.as_slice().to_vec(),
                },
            ),
            Signal::SchemaRef(refusal) => {
                self.answer_request(refusal.request_id, SchemaReply::Refused(refusal.error))
            }
            other => {
                return Err(format!(
                    "received {} (signal {}), which an API node never receives",
                    other.name(),
                    other.number()
                ))
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use signal::signals::{TcKeyRef, TransIdAi};
    use signal::SectionPool;
    use std::time::Duration;

    #[test]
    fn replies_reach_their_slot_and_strays_are_counted() {
        let pool = SectionPool::leak([8, 1, 1, 1, 1, 1]);
        let dispatch = Dispatch::new();
        let id = TransactionId(7);
        let slot = dispatch.register_transaction(id).unwrap();
        let row = pool.copy_from(b"row").unwrap();
        dispatch
            .deliver(
                NodeId(2),
                TransIdAi {
                    transaction_id: id,
                    client_op: 1,
                    data: row,
                }
                .into(),
            )
            .unwrap();
        dispatch
            .deliver(
                NodeId(2),
                TcKeyConf {
                    transaction_id: id,
                    operations: 2,
                    committed: true,
                    gci: Gci(9),
                    map_version: 0,
                }
                .into(),
            )
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let (progress, done) = slot.wait_until(deadline, |progress| progress.committed);
        assert!(done);
        assert_eq!(progress.rows.len(), 1);
        assert_eq!(progress.confirmed_operations, 2);
        assert_eq!(progress.gci, Gci(9));
        drop(progress);
        dispatch.unregister_transaction(id);
        dispatch
            .deliver(
                NodeId(2),
                TcKeyRef {
                    transaction_id: id,
                    client_op: 0,
                    error: ErrorCode::NoSuchRow,
                }
                .into(),
            )
            .unwrap();
        assert_eq!(dispatch.stray_replies.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn closing_fails_every_waiter_and_refuses_new_ones() {
        let dispatch = Arc::new(Dispatch::new());
        let slot = dispatch.register_transaction(TransactionId(1)).unwrap();
        let request = dispatch.register_request(3).unwrap();
        let closer = Arc::clone(&dispatch);
        let thread = std::thread::spawn(move || closer.close("peer went away".into()));
        let deadline = Instant::now() + Duration::from_secs(20);
        let (progress, done) = slot.wait_until(deadline, |progress| progress.end.is_some());
        assert!(done);
        assert!(
            matches!(&progress.end, Some(BatchEnd::Lost(reason)) if reason == "peer went away")
        );
        drop(progress);
        let (reply, done) = request.wait_until(deadline, Option::is_some);
        assert!(done);
        assert!(matches!(&*reply, Some(SchemaReply::Lost(_))));
        drop(reply);
        thread.join().unwrap();
        assert!(dispatch.register_transaction(TransactionId(2)).is_err());
        assert!(dispatch.register_request(4).is_err());
        assert_eq!(dispatch.in_flight(), 0);
        assert_eq!(dispatch.closed_reason().as_deref(), Some("peer went away"));
    }

    #[test]
    fn signals_for_data_nodes_are_refused() {
        let dispatch = Dispatch::new();
        let error = dispatch
            .deliver(
                NodeId(2),
                signal::signals::TcCommitReq {
                    transaction_id: TransactionId(1),
                }
                .into(),
            )
            .unwrap_err();
        assert!(error.contains("TcCommitReq"), "{error}");
    }
}
