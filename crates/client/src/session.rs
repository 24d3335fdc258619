//! `AsyncSession`: many transactions in flight from one thread (the
//! flexAsynch pattern, seed 001).
//!
//! The owning thread hands executing transactions to the session; the
//! session appends each batch to the outgoing frames of the transaction's
//! data node, and `send` writes each node's frames with one write, so all
//! the batches bound for one node travel together. Replies from every
//! connection's receive thread are posted to the session's one inbox;
//! `poll` applies them and hands back each transaction whose batch is
//! answered, together with the caller's value that travelled with it.
//!
//! ```text
//!  execute(tx, commit, user) ──> per-node frames ──send()──> node 2, node 3, ...
//!  receive threads ──> inbox ──poll()──> Completion { transaction, user, result }
//! ```
//!
//! The sync API (`Transaction::execute`) is the same machinery with one
//! transaction and the transaction's own inbox.
//!
//! A durable commit (`Commit::Durable`) is handed back only once its GCI is
//! durable: when its committing TCKEYCONF arrives, the session queues its
//! GCI_WAIT_REQ with the other outgoing signals of that node, sends it in
//! the same poll, and keeps the transaction in flight (with a fresh reply
//! timeout) until the answer.

use crate::cluster::Cluster;
use crate::connection::FrameBuilder;
use crate::dispatch::{Inbox, Posted, Replies};
use crate::error::ClientError;
use crate::transaction::{Commit, Outcome, Progress, Transaction};
use signal::TransactionId;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A transaction whose batch is answered (or failed), handed back by
/// [`AsyncSession::poll`].
pub struct Completion<'a, T> {
    /// The transaction, to read rows from (`get`), to execute again (after
    /// `Commit::No`) or to drop.
    pub transaction: Transaction<'a>,
    /// The value given to [`AsyncSession::execute`].
    pub user: T,
    /// The outcome, as `Transaction::execute` would have returned it.
    pub result: Result<Outcome, ClientError>,
}

struct InFlight<'a, T> {
    transaction: Transaction<'a>,
    user: T,
    /// When the reply timeout passes (set when sent).
    deadline: Option<Instant>,
}

/// Signals waiting to be written to one data node.
#[derive(Default)]
struct Outgoing {
    frames: FrameBuilder,
    /// The transactions whose batches are in `frames` (slot, id).
    transactions: Vec<(u32, TransactionId)>,
}

/// The transactions in flight, each in a numbered slot. The number is the
/// tag of the transaction's registration, posted with each of its replies
/// (`dispatch::Posted`), so that a reply finds its transaction by index
/// rather than by a lookup of its id. A slot is reused once its
/// transaction is handed back; the id is checked, so a late reply for an
/// earlier occupant is a stray.
struct Slots<V> {
    slots: Vec<Option<V>>,
    /// Numbers of empty slots.
    free: Vec<u32>,
    /// Slots in use.
    used: usize,
}

impl<V> Slots<V> {
    fn new() -> Slots<V> {
        Slots {
            slots: Vec::new(),
            free: Vec::new(),
            used: 0,
        }
    }

    /// An empty slot's number, to fill or release.
    fn reserve(&mut self) -> u32 {
        self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            (self.slots.len() - 1) as u32
        })
    }

    /// Gives back a reserved slot left empty.
    fn release(&mut self, slot: u32) {
        self.free.push(slot);
    }

    fn fill(&mut self, slot: u32, value: V) {
        self.slots[slot as usize] = Some(value);
        self.used += 1;
    }

    fn get_mut(&mut self, slot: u32) -> Option<&mut V> {
        self.slots.get_mut(slot as usize)?.as_mut()
    }

    /// Empties a slot, returning what it held.
    fn take(&mut self, slot: u32) -> Option<V> {
        let value = self.slots.get_mut(slot as usize)?.take()?;
        self.used -= 1;
        self.free.push(slot);
        Some(value)
    }

    fn len(&self) -> usize {
        self.used
    }

    fn is_empty(&self) -> bool {
        self.used == 0
    }

    /// The filled slots: (number, value).
    fn iter(&self) -> impl Iterator<Item = (u32, &V)> {
        let filled = self.slots.iter().enumerate();
        filled.filter_map(|(slot, value)| Some((slot as u32, value.as_ref()?)))
    }
}

/// Many transactions in flight from one thread. Owned by that thread
/// (it is `Send`, not shared); get one from [`Cluster::session`].
///
/// `T` is any value the caller wants back with each completion (the keys
/// of the batch, a start time, an index into its own table).
///
/// ```no_run
/// use client::{Cluster, Commit, LockMode, Value};
/// use std::time::Duration;
/// let cluster = Cluster::connect("127.0.0.1:11860")?;
/// let table = cluster.table("kv")?;
/// let mut session = cluster.session::<u64>();
/// // 100 reads in flight at once, each on the tc of its key's primary.
/// for key in 0..100u64 {
///     let mut transaction = cluster.transaction_with_hint(&table, &[Value::UInt(key)])?;
///     transaction.read(&table, &[Value::UInt(key)], LockMode::CommittedRead)?;
///     session.execute(transaction, Commit::Yes, key);
/// }
/// session.send(); // one write per data node
/// let mut done = Vec::new();
/// while session.in_flight() > 0 {
///     session.poll(Duration::from_secs(1), &mut done);
///     for completion in done.drain(..) {
///         match completion.result {
///             Ok(_) => {
///                 let row = completion.transaction.get(client::OpId::new(0));
///                 println!("key {}: {:?}", completion.user, row.and_then(|row| row.get("v")));
///             }
///             Err(error) => println!("key {}: {error}", completion.user),
///         }
///     }
/// }
/// # Ok::<(), client::ClientError>(())
/// ```
pub struct AsyncSession<'a, T = ()> {
    cluster: &'a Cluster,
    inbox: Arc<Inbox>,
    /// Indexed like the cluster's connections.
    outgoing: Vec<Outgoing>,
    in_flight: Slots<InFlight<'a, T>>,
    /// Finished without a reply (nothing to send, or failed before sending).
    ready: Vec<Completion<'a, T>>,
    replies: Replies,
    /// The earliest deadline of a sent transaction may be at or after this.
    next_deadline: Option<Instant>,
}

impl<'a, T> AsyncSession<'a, T> {
    /// A session on `cluster` (same as [`Cluster::session`]).
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// let session: client::AsyncSession<'_, ()> = client::AsyncSession::new(&cluster);
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn new(cluster: &'a Cluster) -> AsyncSession<'a, T> {
        AsyncSession {
            cluster,
            inbox: Arc::default(),
            outgoing: cluster
                .data_nodes()
                .iter()
                .map(|_| Outgoing::default())
                .collect(),
            in_flight: Slots::new(),
            ready: Vec::new(),
            replies: Replies::default(),
            next_deadline: None,
        }
    }

    /// Transactions handed to [`AsyncSession::execute`] and not yet
    /// returned by [`AsyncSession::poll`].
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// assert_eq!(cluster.session::<()>().in_flight(), 0);
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn in_flight(&self) -> usize {
        self.in_flight.len() + self.ready.len()
    }

    /// Queues the transaction's operations as one batch (committing with
    /// `Commit::Yes` or `Commit::Durable`) for its data node;
    /// [`AsyncSession::send`] (or the next `poll`) writes it. The
    /// transaction comes back from `poll` with `user` and the outcome,
    /// errors included (nothing fails here); with `Commit::Durable` once
    /// its GCI is durable.
    ///
    /// ```no_run
    /// use client::{Commit, Value};
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// let table = cluster.table("kv")?;
    /// let mut session = cluster.session();
    /// let mut transaction = cluster.transaction_with_hint(&table, &[Value::UInt(1)])?;
    /// transaction.write(&table, &[("k", Value::UInt(1)), ("v", Value::from("one"))])?;
    /// session.execute(transaction, Commit::Yes, "first write");
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn execute(&mut self, mut transaction: Transaction<'a>, commit: Commit, user: T) {
        if !std::ptr::eq(transaction.cluster(), self.cluster) {
            self.ready.push(Completion {
                transaction,
                user,
                result: Err(ClientError::Usage(
                    "the transaction belongs to another Cluster than the session".into(),
                )),
            });
            return;
        }
        let connection = transaction.connection_index();
        let outgoing = &mut self.outgoing[connection];
        let slot = self.in_flight.reserve();
        let result = match transaction.prepare(commit, &self.inbox, slot, &mut outgoing.frames) {
            Ok(None) => {
                outgoing.transactions.push((slot, transaction.id()));
                let in_flight = InFlight {
                    transaction,
                    user,
                    deadline: None,
                };
                self.in_flight.fill(slot, in_flight);
                return;
            }
            Ok(Some(outcome)) => Ok(outcome),
            Err(error) => Err(error),
        };
        self.in_flight.release(slot);
        self.ready.push(Completion {
            transaction,
            user,
            result,
        });
    }

    /// Writes the queued batches: one write per data node, whatever the
    /// number of transactions bound for it. Returns the number of
    /// transactions sent; a failed write fails its transactions (they come
    /// back from `poll` with the error).
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// let mut session = cluster.session::<()>();
    /// assert_eq!(session.send(), 0);
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn send(&mut self) -> usize {
        if self
            .outgoing
            .iter()
            .all(|outgoing| outgoing.frames.is_empty())
        {
            return 0;
        }
        let mut sent = 0;
        let deadline = self.cluster.clock().now() + self.cluster.options().reply_timeout;
        for (index, outgoing) in self.outgoing.iter_mut().enumerate() {
            if outgoing.frames.is_empty() {
                continue;
            }
            let result = (self.cluster.connection(index)).send_reporting(&mut outgoing.frames);
            outgoing.frames.clear();
            for (slot, id) in outgoing.transactions.drain(..) {
                // Failed and handed back before it was sent (its connection
                // was lost), perhaps with its slot taken since.
                let Some(in_flight) = self
                    .in_flight
                    .get_mut(slot)
                    .filter(|in_flight| in_flight.transaction.id() == id)
                else {
                    continue;
                };
                match &result {
                    Ok(()) => {
                        in_flight.transaction.sent();
                        in_flight.deadline = Some(deadline);
                        sent += 1;
                    }
                    Err(failure) => {
                        let Some(mut failed) = self.in_flight.take(slot) else {
                            continue;
                        };
                        let error = failed
                            .transaction
                            .send_failed(failure.error.duplicate(), failure.maybe_received);
                        self.ready.push(Completion {
                            transaction: failed.transaction,
                            user: failed.user,
                            result: Err(error),
                        });
                    }
                }
            }
        }
        if sent > 0 && self.next_deadline.is_none() {
            self.next_deadline = Some(deadline);
        }
        sent
    }

    /// Sends what is queued, then waits up to `timeout` until at least one
    /// transaction is answered (or fails, or passes the reply timeout) and
    /// appends every answered one to `out`; returns how many it appended
    /// (0 after the timeout, or at once with nothing in flight).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// let mut session = cluster.session::<()>();
    /// let mut done = Vec::new();
    /// assert_eq!(session.poll(Duration::from_millis(10), &mut done), 0);
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn poll(&mut self, timeout: Duration, out: &mut Vec<Completion<'a, T>>) -> usize {
        self.send();
        let before = out.len();
        out.append(&mut self.ready);
        let wait_until = self.cluster.clock().now() + timeout;
        loop {
            let waiting = out.len() == before && !self.in_flight.is_empty();
            // Wake for the earliest reply timeout too, so it is noticed.
            let deadline = match (waiting, self.next_deadline) {
                (false, _) => None,
                (true, Some(expiry)) => Some(expiry.min(wait_until)),
                (true, None) => Some(wait_until),
            };
            let mut replies = std::mem::take(&mut self.replies);
            if self
                .inbox
                .take(self.cluster.clock(), &mut replies, deadline)
            {
                let Replies { list, row_bytes } = &mut replies;
                for posted in list.drain(..) {
                    self.apply(posted, row_bytes, out);
                }
                row_bytes.clear();
            }
            self.replies = replies;
            // Durable commits' GCI waits queued by the replies go out now
            // (and get their reply timeout before `expire` looks); a failed
            // write hands them back at once.
            self.send();
            out.append(&mut self.ready);
            self.expire(out);
            if out.len() > before
                || self.in_flight.is_empty()
                || self.cluster.clock().now() >= wait_until
            {
                return out.len() - before;
            }
        }
    }

    fn apply(&mut self, posted: Posted, row_bytes: &[u8], out: &mut Vec<Completion<'a, T>>) {
        let Posted {
            transaction: id,
            tag: slot,
            reply,
        } = posted;
        // Replies for a transaction already handed back are late strays.
        let Some(in_flight) = self
            .in_flight
            .get_mut(slot)
            .filter(|in_flight| in_flight.transaction.id() == id)
        else {
            return;
        };
        let result = match in_flight.transaction.on_reply(reply, row_bytes) {
            Progress::Waiting => return,
            Progress::Done(result) => result,
            Progress::SendDurableWait => {
                let outgoing = &mut self.outgoing;
                let queued =
                    in_flight
                        .transaction
                        .push_durable_wait(&self.inbox, slot, |connection| {
                            &mut outgoing[connection].frames
                        });
                match queued {
                    Ok(connection) => {
                        outgoing[connection].transactions.push((slot, id));
                        return;
                    }
                    Err(error) => Err(error),
                }
            }
        };
        if let Some(done) = self.in_flight.take(slot) {
            out.push(Completion {
                transaction: done.transaction,
                user: done.user,
                result,
            });
        }
    }

    /// Fails every sent transaction whose reply timeout has passed.
    fn expire(&mut self, out: &mut Vec<Completion<'a, T>>) {
        let now = self.cluster.clock().now();
        if self.next_deadline.is_none_or_later(now) {
            return;
        }
        let expired: Vec<u32> = self
            .in_flight
            .iter()
            .filter(|(_, in_flight)| in_flight.deadline.is_some_and(|deadline| deadline <= now))
            .map(|(slot, _)| slot)
            .collect();
        for slot in expired {
            if let Some(mut timed_out) = self.in_flight.take(slot) {
                let error = timed_out.transaction.timed_out();
                out.push(Completion {
                    transaction: timed_out.transaction,
                    user: timed_out.user,
                    result: Err(error),
                });
            }
        }
        self.next_deadline = self
            .in_flight
            .iter()
            .filter_map(|(_, in_flight)| in_flight.deadline)
            .min();
    }
}

/// `Option<Instant>` as a deadline: nothing to do yet.
trait DeadlineExt {
    fn is_none_or_later(&self, now: Instant) -> bool;
}

impl DeadlineExt for Option<Instant> {
    fn is_none_or_later(&self, now: Instant) -> bool {
        match self {
            None => true,
            Some(deadline) => *deadline > now,
        }
    }
}

/// A session moves to the thread that owns it.
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<AsyncSession<'static, u64>>();
    assert_send::<Transaction<'static>>();
};

#[cfg(test)]
mod tests {
    use super::Slots;

    #[test]
    fn slots_are_reused_once_emptied_and_count_what_they_hold() {
        let mut slots = Slots::new();
        let first = slots.reserve();
        slots.fill(first, "first");
        let second = slots.reserve();
        assert_ne!(first, second);
        slots.release(second);
        assert_eq!(slots.reserve(), second, "a released slot is reused");
        slots.fill(second, "second");
        assert_eq!(slots.len(), 2);
        assert_eq!(slots.take(first), Some("first"));
        assert_eq!(slots.take(first), None, "taken once");
        assert_eq!(slots.get_mut(first), None);
        assert_eq!(slots.reserve(), first, "an emptied slot is reused");
        assert_eq!(slots.get_mut(second), Some(&mut "second"));
        assert_eq!(slots.get_mut(99), None);
        assert_eq!(slots.iter().collect::<Vec<_>>(), [(second, &"second")]);
        assert_eq!(slots.len(), 1);
        assert!(!slots.is_empty());
    }
}
