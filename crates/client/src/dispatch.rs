//! The table of requests in flight on one data-node connection, the
//! receive side that fills it, and the inboxes replies are posted to.
//!
//! Transactions: a transaction with a batch outstanding is registered here
//! under its id with an [`Inbox`]. The receive thread looks the inbox up and
//! posts the reply ([`Reply`]) to it; whoever owns the inbox (an
//! `AsyncSession` with many transactions in flight from one thread, or one
//! sync `Transaction`) takes the replies and applies them. A reply that
//! ends the transaction at the tc (a committing TCKEYCONF, TCKEYREF,
//! TCROLLBACKCONF) also removes the registration, under the same lock as
//! the lookup.
//!
//! Requests (schema requests, table lists, partition scans): a slot per
//! request (its state behind its own mutex and condvar), since only the
//! sync API sends them. A scan waits on many requests at once, one per
//! partition, over several connections: they share one slot
//! ([`SharedSlot`]) that collects their answers in arrival order.
//!
//! Waits for a durable GCI (GCI_WAIT_REQ): registered under their request
//! id with an inbox and the transaction they belong to (a wait of its own
//! uses a private inbox); GCI_WAIT_CONF/REF are posted to that inbox as
//! `Reply::Durable`/`Reply::DurableRefused` for that transaction, and end
//! the registration. Both the sync and the async API wait this way.
//!
//! When the connection ends, `close` posts `Reply::Lost` for every
//! registered transaction and GCI wait and fails every schema slot, and
//! registering new ones fails at once, so no caller waits for a reply that
//! cannot come.

use crate::cooperative::WakeUp;
use crate::environment::Clock;
use crate::id_hash::IdMap;
use signal::codec::ApiReply;
use signal::signals::{ApiRegConf, GciWaitConf, GciWaitRef, TcKeyConf};
use signal::{ErrorCode, Gci, NodeId, Signal, TransactionId};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

/// One waiter's state plus the condvar its waiter sleeps on.
pub(crate) struct Slot<T> {
    state: Mutex<T>,
    ready: WakeUp,
}

impl<T> Slot<T> {
    pub(crate) fn new(state: T) -> Slot<T> {
        Slot {
            state: Mutex::new(state),
            ready: WakeUp::default(),
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
        clock: &Clock,
        deadline: Instant,
        mut done: impl FnMut(&T) -> bool,
    ) -> (MutexGuard<'_, T>, bool) {
        let mut state = self.lock();
        loop {
            if done(&state) {
                return (state, true);
            }
            if clock.now() >= deadline {
                return (state, false);
            }
            state = clock.wait(&self.state, &self.ready, state, Some(deadline));
        }
    }
}

/// A reply for a transaction, as posted to its inbox.
#[derive(Debug)]
pub(crate) enum Reply {
    /// TCKEYCONF.
    Conf {
        /// Operations confirmed.
        operations: u32,
        /// The transaction is committed.
        committed: bool,
        /// Commit GCI.
        gci: Gci,
        /// The sender's distribution version.
        map_version: u32,
    },
    /// TCKEYREF: the transaction is aborted on the data node.
    Refused {
        /// The failing operation (u32::MAX: none named).
        client_op: u32,
        /// Why.
        error: ErrorCode,
        /// With DuplicateKey: the unique index (0: the primary key).
        index_id: u32,
    },
    /// TRANSID_AI: row data of a read, copied out of its section at once
    /// (a batch may read more rows than the pool has sections) into the
    /// row bytes of the inbox, taken with the replies ([`Replies`]).
    Row {
        /// The read operation.
        client_op: u32,
        /// Where its attribute entries are in [`Replies::row_bytes`].
        data: Range<usize>,
    },
    /// TCROLLBACKCONF.
    RolledBack,
    /// GCI_WAIT_CONF: the GCI waited for is complete (durable).
    Durable {
        /// The cluster's latest complete GCI (at least the one waited for).
        complete_gci: Gci,
    },
    /// GCI_WAIT_REF: the tc did not take the wait.
    DurableRefused {
        /// Why.
        error: ErrorCode,
    },
    /// The connection ended.
    Lost(String),
}

/// One reply posted to an inbox.
#[derive(Debug)]
pub(crate) struct Posted {
    /// The transaction it answers.
    pub(crate) transaction: TransactionId,
    /// The tag the transaction was registered with (a session's slot for
    /// it, so that the session finds it without a lookup by id).
    pub(crate) tag: u32,
    pub(crate) reply: Reply,
}

/// Replies posted to an inbox, as its owner takes them.
#[derive(Default, Debug)]
pub(crate) struct Replies {
    /// In the order they arrived on each connection.
    pub(crate) list: Vec<Posted>,
    /// The row data of the `Reply::Row`s in `list`, one after the other:
    /// one buffer for all of them, so a row costs a copy, not an allocation.
    pub(crate) row_bytes: Vec<u8>,
}

impl Replies {
    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Empties both, keeping their memory.
    pub(crate) fn clear(&mut self) {
        self.list.clear();
        self.row_bytes.clear();
    }
}

#[derive(Default)]
struct InboxState {
    replies: Replies,
    /// The owner sleeps on the condvar (so a post must wake it).
    sleeping: bool,
}

/// Where the receive threads post the replies of the transactions of one
/// owner (a session or a sync transaction), across connections.
#[derive(Default)]
pub(crate) struct Inbox {
    state: Mutex<InboxState>,
    ready: WakeUp,
}

impl Inbox {
    fn lock(&self) -> MutexGuard<'_, InboxState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Posts a reply.
    pub(crate) fn post(&self, transaction: TransactionId, tag: u32, reply: Reply) {
        self.post_with(|replies| {
            replies.list.push(Posted {
                transaction,
                tag,
                reply,
            })
        });
    }

    /// Posts a TRANSID_AI's row data (copied into the inbox's row bytes),
    /// and then `then` when given (the TCKEYCONF that carried the row):
    /// both under one lock, with one wake-up.
    pub(crate) fn post_row(
        &self,
        transaction: TransactionId,
        tag: u32,
        client_op: u32,
        data: &[u8],
        then: Option<Reply>,
    ) {
        self.post_with(|replies| {
            let start = replies.row_bytes.len();
            replies.row_bytes.extend_from_slice(data);
            let data = start..replies.row_bytes.len();
            replies.list.push(Posted {
                transaction,
                tag,
                reply: Reply::Row { client_op, data },
            });
            if let Some(reply) = then {
                replies.list.push(Posted {
                    transaction,
                    tag,
                    reply,
                });
            }
        });
    }

    /// Adds to the posted replies under the lock, then wakes the owner only
    /// if it sleeps (a condvar notify costs a system call even with nobody
    /// waiting).
    fn post_with(&self, add: impl FnOnce(&mut Replies)) {
        let mut state = self.lock();
        add(&mut state.replies);
        let wake = state.sleeping;
        drop(state);
        if wake {
            self.ready.notify_one();
        }
    }

    /// Moves every posted reply to `out` (which must be empty), waiting
    /// until there is one or `deadline` passes (`None`: do not wait).
    /// Returns whether `out` received anything.
    pub(crate) fn take(&self, clock: &Clock, out: &mut Replies, deadline: Option<Instant>) -> bool {
        debug_assert!(
            out.is_empty() && out.row_bytes.is_empty(),
            "replies taken earlier are handled first"
        );
        let mut state = self.lock();
        while state.replies.is_empty() {
            let Some(deadline) = deadline else { break };
            if clock.now() >= deadline {
                break;
            }
            state.sleeping = true;
            state = clock.wait(&self.state, &self.ready, state, Some(deadline));
            state.sleeping = false;
        }
        // Swapping hands the buffers back and forth, keeping their memory.
        std::mem::swap(out, &mut state.replies);
        !out.is_empty()
    }

    /// Drops every posted reply (late replies of an earlier batch).
    pub(crate) fn clear(&self) {
        self.lock().replies.clear();
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
    /// ALTER_TAB_CONF: an index change is done (the client fetches the
    /// new definition next).
    Altered,
    /// GET_TABINFO_CONF.
    Info {
        /// Encoded table definition.
        definition: Vec<u8>,
        /// Distribution version when the map was taken.
        map_version: u32,
        /// Encoded partition map.
        map: Vec<u8>,
    },
    /// LIST_TABLES_CONF: the names, or why they could not be decoded.
    Tables(Result<Vec<String>, String>),
    /// SCAN_PARTITION_CONF, SCAN_CONF.
    Scan {
        /// Encoded rows (row id, GCI, length, attribute entries).
        rows: Vec<u8>,
        /// Where the next batch starts (SCAN_CONF: its `resume_row`).
        next_row: u32,
        /// No rows remain.
        done: bool,
        /// SCAN_CONF: rows that met the filter (0 for the replica scan).
        matched: u32,
        /// SCAN_CONF: rows the batch looked at.
        examined: u32,
        /// SCAN_CONF: the index key to resume after (empty otherwise).
        resume_key: Vec<u8>,
    },
    /// SCHEMA_REF, SCAN_PARTITION_REF, SCAN_REF.
    Refused(ErrorCode),
    /// The connection ended.
    Lost(String),
}

/// The registration handshake's state.
#[derive(Default, Debug)]
pub(crate) struct Registration {
    /// The last API_REGCONF and the node that sent it.
    pub conf: Option<(NodeId, ApiRegConf)>,
    /// The data node refused the registration (API_REGREF).
    pub refused: Option<ErrorCode>,
    /// The connection ended.
    pub lost: Option<String>,
}

pub(crate) type RequestSlot = Slot<Option<SchemaReply>>;

/// The answers to several requests waited on together, by request id, in
/// the order they came (each request answers once).
pub(crate) type SharedSlot = Slot<Vec<(u32, SchemaReply)>>;

/// Who waits for a request's answer.
#[derive(Clone)]
enum Waiter {
    One(Arc<RequestSlot>),
    Shared(Arc<SharedSlot>),
}

impl Waiter {
    fn answer(&self, request_id: u32, reply: SchemaReply) {
        match self {
            Waiter::One(slot) => slot.update(|state| *state = Some(reply)),
            Waiter::Shared(slot) => slot.update(|answers| answers.push((request_id, reply))),
        }
    }
}

#[derive(Default)]
struct Waiting {
    closed: Option<String>,
    /// Where each transaction's replies go, with its tag.
    transactions: IdMap<TransactionId, (Arc<Inbox>, u32)>,
    requests: IdMap<u32, Waiter>,
    /// GCI waits by request id: where the answer goes, for which transaction.
    gci_waits: IdMap<u32, (TransactionId, Arc<Inbox>, u32)>,
}

/// The dispatch of each of a cluster's connections, by data node: the
/// current connection's, replaced when a lost connection is opened again.
#[derive(Default)]
pub(crate) struct Peers {
    by_node: Mutex<Vec<(NodeId, std::sync::Weak<Dispatch>)>>,
}

impl Peers {
    /// Data node `node`'s connection is now the one of `dispatch`.
    pub(crate) fn set(&self, node: NodeId, dispatch: &Arc<Dispatch>) {
        let mut by_node = self.by_node.lock().unwrap_or_else(PoisonError::into_inner);
        let weak = Arc::downgrade(dispatch);
        match by_node.iter_mut().find(|(known, _)| *known == node) {
            Some(entry) => entry.1 = weak,
            None => by_node.push((node, weak)),
        }
    }

    fn current(&self) -> Vec<(NodeId, std::sync::Weak<Dispatch>)> {
        self.by_node
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The in-flight table of one connection.
pub(crate) struct Dispatch {
    waiting: Mutex<Waiting>,
    /// Set once by `close` (a lock-free `closed_reason().is_some()` for routing).
    closed: AtomicBool,
    /// The registration handshake (one per connection).
    pub registration: Slot<Registration>,
    /// Replies for nothing registered (late answers after a timeout, the
    /// answer to a rollback sent from Drop): counted, then dropped.
    pub stray_replies: AtomicU64,
    /// The dispatches of the cluster's connections, by data node, set
    /// once the client is connected (shared by them all, and updated when
    /// a lost connection is replaced): a data node's API_NODE_FAILREP
    /// closes the connections to the nodes it names.
    peers: std::sync::OnceLock<Arc<Peers>>,
    /// A frame arrived since the heartbeat thread last looked
    /// (`heartbeat.rs`): any frame is a sign of the data node's life.
    pub heard: AtomicBool,
    /// The data node refused to begin a transaction because it is
    /// stopping (NodeShuttingDown): new transactions go elsewhere while
    /// this connection lasts.
    pub stopping: AtomicBool,
}

impl Dispatch {
    pub(crate) fn new() -> Dispatch {
        Dispatch {
            waiting: Mutex::new(Waiting::default()),
            closed: AtomicBool::new(false),
            registration: Slot::new(Registration::default()),
            stray_replies: AtomicU64::new(0),
            peers: std::sync::OnceLock::new(),
            heard: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
        }
    }

    /// The cluster's connections (this one among them), once connected.
    pub(crate) fn set_peers(&self, peers: &Arc<Peers>) {
        let _ = self.peers.set(Arc::clone(peers));
    }

    /// API_NODE_FAILREP from data node `reporter`: the cluster agreed that
    /// the nodes of `failed` failed. What waits on the connections to them
    /// fails now (their outcome is unknown, as for any lost connection),
    /// and they are used no more, even while such a node, silent, keeps
    /// its connection open.
    fn peers_failed(&self, reporter: NodeId, failed: signal::NodeSet) {
        let Some(peers) = self.peers.get() else {
            return;
        };
        for (node, dispatch) in peers.current() {
            if failed.contains(node) {
                if let Some(dispatch) = dispatch.upgrade() {
                    dispatch.close(format!(
                        "the cluster agreed that data node {node} failed (reported by data \
                         node {reporter})"
                    ));
                }
            }
        }
    }

    fn waiting(&self) -> MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Why the connection ended, or `None` while it is up.
    pub(crate) fn closed_reason(&self) -> Option<String> {
        self.waiting().closed.clone()
    }

    /// Whether the connection has ended (without taking the lock).
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Replies for `transaction` go to `inbox`, posted with `tag`, from
    /// now on (replacing an earlier registration); `Err(reason)` once the
    /// connection has ended.
    pub(crate) fn register_transaction(
        &self,
        transaction: TransactionId,
        inbox: &Arc<Inbox>,
        tag: u32,
    ) -> Result<(), String> {
        let mut waiting = self.waiting();
        if let Some(reason) = &waiting.closed {
            return Err(reason.clone());
        }
        waiting
            .transactions
            .insert(transaction, (Arc::clone(inbox), tag));
        Ok(())
    }

    /// Forgets a transaction's registration; later replies for it are strays.
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
        waiting
            .requests
            .insert(request_id, Waiter::One(Arc::clone(&slot)));
        Ok(slot)
    }

    /// Request `request_id`'s answer goes to `slot` with others'.
    pub(crate) fn register_shared_request(
        &self,
        request_id: u32,
        slot: &Arc<SharedSlot>,
    ) -> Result<(), String> {
        let mut waiting = self.waiting();
        if let Some(reason) = &waiting.closed {
            return Err(reason.clone());
        }
        waiting
            .requests
            .insert(request_id, Waiter::Shared(Arc::clone(slot)));
        Ok(())
    }

    /// Forgets a schema request's slot.
    pub(crate) fn unregister_request(&self, request_id: u32) {
        self.waiting().requests.remove(&request_id);
    }

    /// The answer to GCI wait `request_id` goes to `inbox`, as a reply for
    /// `transaction` posted with `tag`; `Err(reason)` once the connection
    /// has ended.
    pub(crate) fn register_gci_wait(
        &self,
        request_id: u32,
        transaction: TransactionId,
        inbox: &Arc<Inbox>,
        tag: u32,
    ) -> Result<(), String> {
        let mut waiting = self.waiting();
        if let Some(reason) = &waiting.closed {
            return Err(reason.clone());
        }
        waiting
            .gci_waits
            .insert(request_id, (transaction, Arc::clone(inbox), tag));
        Ok(())
    }

    /// Forgets a GCI wait; a later answer to it is a stray.
    pub(crate) fn unregister_gci_wait(&self, request_id: u32) {
        self.waiting().gci_waits.remove(&request_id);
    }

    /// Number of transactions, requests and GCI waits waiting (for tests
    /// and reports).
    pub(crate) fn in_flight(&self) -> usize {
        let waiting = self.waiting();
        waiting.transactions.len() + waiting.requests.len() + waiting.gci_waits.len()
    }

    /// Ends the connection's life: every waiter fails with `reason`, and
    /// nothing can register any more. Called once by the receive thread.
    pub(crate) fn close(&self, reason: String) {
        let (transactions, requests, gci_waits) = {
            let mut waiting = self.waiting();
            if waiting.closed.is_none() {
                waiting.closed = Some(reason.clone());
            }
            self.closed.store(true, Ordering::Release);
            (
                std::mem::take(&mut waiting.transactions),
                std::mem::take(&mut waiting.requests),
                std::mem::take(&mut waiting.gci_waits),
            )
        };
        for (transaction, (inbox, tag)) in transactions {
            inbox.post(transaction, tag, Reply::Lost(reason.clone()));
        }
        for (transaction, inbox, tag) in gci_waits.into_values() {
            inbox.post(transaction, tag, Reply::Lost(reason.clone()));
        }
        for (request_id, waiter) in requests {
            waiter.answer(request_id, SchemaReply::Lost(reason.clone()));
        }
        self.registration
            .update(|registration| registration.lost = Some(reason.clone()));
    }

    /// Posts `reply` to the inbox of `transaction`; `last` (the reply ends
    /// the transaction at the tc) also forgets the registration.
    fn post(&self, transaction: TransactionId, reply: Reply, last: bool) {
        let mut waiting = self.waiting();
        if last {
            let registered = waiting.transactions.remove(&transaction);
            drop(waiting);
            match registered {
                Some((inbox, tag)) => inbox.post(transaction, tag, reply),
                None => self.count_stray(),
            }
        } else {
            // Posted under the lock (an inbox's lock is always taken last),
            // which saves counting a reference to the inbox up and down.
            match waiting.transactions.get(&transaction) {
                Some((inbox, tag)) => inbox.post(transaction, *tag, reply),
                None => self.count_stray(),
            }
        }
    }

    /// Posts row data for `transaction` (not its last reply).
    fn post_row(&self, transaction: TransactionId, client_op: u32, data: &[u8]) {
        let waiting = self.waiting();
        match waiting.transactions.get(&transaction) {
            Some((inbox, tag)) => inbox.post_row(transaction, *tag, client_op, data, None),
            None => self.count_stray(),
        }
    }

    /// Posts a TCKEYCONF that carries a read's row: the row, then `reply`,
    /// as `post` would (`last`: it ends the registration).
    fn post_conf_with_row(
        &self,
        transaction: TransactionId,
        client_op: u32,
        data: &[u8],
        reply: Reply,
        last: bool,
    ) {
        let mut waiting = self.waiting();
        let registered = if last {
            waiting.transactions.remove(&transaction)
        } else {
            waiting.transactions.get(&transaction).cloned()
        };
        drop(waiting);
        match registered {
            Some((inbox, tag)) => inbox.post_row(transaction, tag, client_op, data, Some(reply)),
            None => self.count_stray(),
        }
    }

    fn count_stray(&self) {
        self.stray_replies.fetch_add(1, Ordering::Relaxed);
    }

    fn request(&self, request_id: u32) -> Option<Waiter> {
        let waiter = self.waiting().requests.get(&request_id).cloned();
        if waiter.is_none() {
            self.stray_replies.fetch_add(1, Ordering::Relaxed);
        }
        waiter
    }

    /// Posts the answer to GCI wait `request_id` (which ends it).
    fn answer_gci_wait(&self, request_id: u32, reply: Reply) {
        let registered = self.waiting().gci_waits.remove(&request_id);
        match registered {
            Some((transaction, inbox, tag)) => inbox.post(transaction, tag, reply),
            None => {
                self.stray_replies.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn answer_request(&self, request_id: u32, reply: SchemaReply) {
        if let Some(waiter) = self.request(request_id) {
            waiter.answer(request_id, reply);
        }
    }

    /// Hands one received signal from node `sender` to its waiter.
    /// `Err` names a signal an API node must never receive: the caller
    /// closes the connection, because the peer is not speaking the protocol.
    /// Posts a TCKEYCONF or TRANSID_AI decoded in place
    /// ([`SignalDecoder::next_for_api`]) to its transaction's inbox.
    ///
    /// [`SignalDecoder::next_for_api`]: signal::codec::SignalDecoder::next_for_api
    pub(crate) fn deliver_reply(&self, reply: ApiReply<'_>) {
        match reply {
            ApiReply::TcKeyConf {
                transaction_id,
                operations,
                committed,
                gci,
                map_version,
                row,
            } => {
                let reply = Reply::Conf {
                    operations,
                    committed,
                    gci,
                    map_version,
                };
                match row {
                    None => self.post(transaction_id, reply, committed),
                    Some((client_op, data)) => {
                        self.post_conf_with_row(transaction_id, client_op, data, reply, committed)
                    }
                }
            }
            ApiReply::TransIdAi {
                transaction_id,
                client_op,
                data,
            } => self.post_row(transaction_id, client_op, data),
        }
    }

    pub(crate) fn deliver(&self, sender: NodeId, signal: Signal) -> Result<(), String> {
        match signal {
            Signal::ApiRegConf(conf) => self
                .registration
                .update(|registration| registration.conf = Some((sender, conf))),
            Signal::ApiRegRef(refusal) => self
                .registration
                .update(|registration| registration.refused = Some(refusal.error)),
            Signal::TcKeyConf(TcKeyConf {
                transaction_id,
                operations,
                committed,
                gci,
                map_version,
                row,
            }) => self.deliver_reply(ApiReply::TcKeyConf {
                transaction_id,
                operations,
                committed,
                gci,
                map_version,
                row: row.as_ref().map(|row| (row.client_op, row.data.as_slice())),
            }),
            Signal::TcKeyRef(refusal) => {
                if refusal.error == ErrorCode::NodeShuttingDown {
                    self.stopping.store(true, Ordering::Relaxed);
                }
                self.post(
                    refusal.transaction_id,
                    Reply::Refused {
                        client_op: refusal.client_op,
                        error: refusal.error,
                        index_id: refusal.index_id,
                    },
                    true,
                )
            }
            Signal::TransIdAi(data) => self.deliver_reply(ApiReply::TransIdAi {
                transaction_id: data.transaction_id,
                client_op: data.client_op,
                data: data.data.as_slice(),
            }),
            Signal::TcRollbackConf(conf) => self.post(conf.transaction_id, Reply::RolledBack, true),
            Signal::GciWaitConf(GciWaitConf {
                request_id,
                complete_gci,
            }) => self.answer_gci_wait(request_id, Reply::Durable { complete_gci }),
            Signal::GciWaitRef(GciWaitRef { request_id, error }) => {
                self.answer_gci_wait(request_id, Reply::DurableRefused { error })
            }
            Signal::CreateTabConf(conf) => {
                self.answer_request(conf.request_id, SchemaReply::Created)
            }
            Signal::DropTabConf(conf) => self.answer_request(conf.request_id, SchemaReply::Dropped),
            Signal::AlterTabConf(conf) => {
                self.answer_request(conf.request_id, SchemaReply::Altered)
            }
            Signal::GetTabInfoConf(conf) => self.answer_request(
                conf.request_id,
                SchemaReply::Info {
                    definition: conf.definition.as_slice().to_vec(),
                    map_version: conf.map_version,
                    map: conf.map.as_slice().to_vec(),
                },
            ),
            Signal::SchemaRef(refusal) => {
                self.answer_request(refusal.request_id, SchemaReply::Refused(refusal.error))
            }
            Signal::ListTablesConf(conf) => {
                let names = signal::codec::decode_table_names(conf.names.as_slice())
                    .map(|names| names.into_iter().map(str::to_string).collect())
                    .map_err(|error| error.to_string());
                self.answer_request(conf.request_id, SchemaReply::Tables(names))
            }
            Signal::ScanPartitionConf(conf) => self.answer_request(
                conf.request_id,
                SchemaReply::Scan {
                    rows: conf.rows.as_slice().to_vec(),
                    next_row: conf.next_row,
                    done: conf.done,
                    matched: 0,
                    examined: 0,
                    resume_key: Vec::new(),
                },
            ),
            Signal::ScanPartitionRef(refusal) => {
                self.answer_request(refusal.request_id, SchemaReply::Refused(refusal.error))
            }
            Signal::ScanConf(conf) => self.answer_request(
                conf.request_id,
                SchemaReply::Scan {
                    rows: conf.rows.as_slice().to_vec(),
                    next_row: conf.resume_row,
                    done: conf.done,
                    matched: conf.matched,
                    examined: conf.examined,
                    resume_key: conf.resume_key.as_slice().to_vec(),
                },
            ),
            Signal::ScanRef(refusal) => {
                self.answer_request(refusal.request_id, SchemaReply::Refused(refusal.error))
            }
            Signal::ApiNodeFailRep(report) => self.peers_failed(sender, report.failed),
            // Its frame counted as a sign of life already.
            Signal::ApiHeartbeatConf(_) => {}
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

    fn take_all(inbox: &Inbox) -> Vec<(TransactionId, Reply)> {
        let posted = take_with_rows(inbox).list.into_iter();
        posted
            .map(|posted| (posted.transaction, posted.reply))
            .collect()
    }

    /// A section pool, and a dispatch with transaction `id` registered
    /// under `tag` to a fresh inbox.
    fn registered(id: TransactionId, tag: u32) -> (&'static SectionPool, Dispatch, Arc<Inbox>) {
        let pool = SectionPool::leak([8, 1, 1, 1, 1, 1]);
        let dispatch = Dispatch::new();
        let inbox = Arc::new(Inbox::default());
        dispatch.register_transaction(id, &inbox, tag).unwrap();
        (pool, dispatch, inbox)
    }

    fn take_with_rows(inbox: &Inbox) -> Replies {
        let mut out = Replies::default();
        inbox.take(
            &Clock::System,
            &mut out,
            Some(Instant::now() + Duration::from_secs(5)),
        );
        out
    }

    #[test]
    fn replies_reach_their_inbox_and_strays_are_counted() {
        let (pool, dispatch, inbox) = registered(TransactionId(7), 5);
        let id = TransactionId(7);
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
                    map_version: 4,
                    row: None,
                }
                .into(),
            )
            .unwrap();
        let Replies { list, row_bytes } = take_with_rows(&inbox);
        assert!(list.iter().all(|posted| posted.tag == 5), "{list:?}");
        let replies: Vec<_> = list
            .into_iter()
            .map(|posted| (posted.transaction, posted.reply))
            .collect();
        assert_eq!(replies.len(), 2);
        assert!(
            matches!(&replies[0], (t, Reply::Row { client_op: 1, data }) if *t == id && row_bytes[data.clone()] == *b"row")
        );
        assert!(matches!(
            replies[1].1,
            Reply::Conf {
                operations: 2,
                committed: true,
                gci: Gci(9),
                map_version: 4
            }
        ));
        assert_eq!(
            dispatch.in_flight(),
            0,
            "a committing TCKEYCONF ends the registration"
        );
        dispatch
            .deliver(
                NodeId(2),
                TcKeyRef {
                    transaction_id: id,
                    client_op: 0,
                    error: ErrorCode::NoSuchRow,
                    index_id: 0,
                }
                .into(),
            )
            .unwrap();
        assert_eq!(dispatch.stray_replies.load(Ordering::Relaxed), 1);
        let mut out = Replies::default();
        assert!(
            !inbox.take(&Clock::System, &mut out, None),
            "nothing posted for a stray"
        );
    }

    /// A committing TCKEYCONF that carries the last read's row posts the
    /// row, then the confirmation, and ends the registration.
    #[test]
    fn a_conf_carrying_a_row_posts_the_row_then_the_conf() {
        let (pool, dispatch, inbox) = registered(TransactionId(8), 3);
        let id = TransactionId(8);
        dispatch
            .deliver(
                NodeId(2),
                TcKeyConf {
                    transaction_id: id,
                    operations: 1,
                    committed: true,
                    gci: Gci(0),
                    map_version: 4,
                    row: Some(signal::signals::ReadRow {
                        client_op: 0,
                        data: pool.copy_from(b"the row").unwrap(),
                    }),
                }
                .into(),
            )
            .unwrap();
        let Replies { list, row_bytes } = take_with_rows(&inbox);
        let replies: Vec<_> = list.into_iter().map(|posted| posted.reply).collect();
        assert_eq!(replies.len(), 2, "{replies:?}");
        assert!(
            matches!(&replies[0], Reply::Row { client_op: 0, data } if row_bytes[data.clone()] == *b"the row"),
            "{replies:?}"
        );
        assert!(
            matches!(
                replies[1],
                Reply::Conf {
                    operations: 1,
                    committed: true,
                    ..
                }
            ),
            "{replies:?}"
        );
        assert_eq!(dispatch.in_flight(), 0, "the committing conf ends it");
    }

    #[test]
    fn a_sleeping_owner_is_woken_by_a_post() {
        let inbox = Arc::new(Inbox::default());
        let poster = Arc::clone(&inbox);
        let thread = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            poster.post(TransactionId(1), 0, Reply::RolledBack);
        });
        let replies = take_all(&inbox);
        assert_eq!(replies.len(), 1);
        thread.join().unwrap();
    }

    #[test]
    fn closing_fails_every_waiter_and_refuses_new_ones() {
        let dispatch = Arc::new(Dispatch::new());
        let inbox = Arc::new(Inbox::default());
        dispatch
            .register_transaction(TransactionId(1), &inbox, 0)
            .unwrap();
        let request = dispatch.register_request(3).unwrap();
        let closer = Arc::clone(&dispatch);
        let thread = std::thread::spawn(move || closer.close("peer went away".into()));
        let replies = take_all(&inbox);
        assert!(
            matches!(&replies[..], [(TransactionId(1), Reply::Lost(reason))] if reason == "peer went away")
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        let (reply, done) = request.wait_until(&Clock::System, deadline, Option::is_some);
        assert!(done);
        assert!(matches!(&*reply, Some(SchemaReply::Lost(_))));
        drop(reply);
        thread.join().unwrap();
        assert!(dispatch
            .register_transaction(TransactionId(2), &inbox, 0)
            .is_err());
        assert!(dispatch.register_request(4).is_err());
        assert_eq!(dispatch.in_flight(), 0);
        assert_eq!(dispatch.closed_reason().as_deref(), Some("peer went away"));
    }

    #[test]
    fn gci_wait_answers_reach_their_inbox_once_and_close_fails_the_rest() {
        let dispatch = Dispatch::new();
        let inbox = Arc::new(Inbox::default());
        let (first, second) = (TransactionId(7), TransactionId(8));
        dispatch.register_gci_wait(1, first, &inbox, 0).unwrap();
        dispatch.register_gci_wait(2, second, &inbox, 0).unwrap();
        dispatch.register_gci_wait(3, second, &inbox, 0).unwrap();
        assert_eq!(dispatch.in_flight(), 3);
        dispatch
            .deliver(
                NodeId(2),
                GciWaitConf {
                    request_id: 1,
                    complete_gci: Gci(40),
                }
                .into(),
            )
            .unwrap();
        dispatch
            .deliver(
                NodeId(2),
                GciWaitRef {
                    request_id: 2,
                    error: ErrorCode::TooManyGciWaits,
                }
                .into(),
            )
            .unwrap();
        let replies = take_all(&inbox);
        assert!(matches!(
            replies[..],
            [
                (
                    TransactionId(7),
                    Reply::Durable {
                        complete_gci: Gci(40)
                    }
                ),
                (
                    TransactionId(8),
                    Reply::DurableRefused {
                        error: ErrorCode::TooManyGciWaits
                    }
                )
            ]
        ));
        // An answer ends the wait: a repeat is a stray.
        dispatch
            .deliver(
                NodeId(2),
                GciWaitConf {
                    request_id: 1,
                    complete_gci: Gci(41),
                }
                .into(),
            )
            .unwrap();
        assert_eq!(dispatch.stray_replies.load(Ordering::Relaxed), 1);
        dispatch.close("gone".into());
        let replies = take_all(&inbox);
        assert!(
            matches!(&replies[..], [(TransactionId(8), Reply::Lost(reason))] if reason == "gone")
        );
        assert_eq!(dispatch.in_flight(), 0);
        assert!(dispatch.register_gci_wait(4, first, &inbox, 0).is_err());
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
