//! Waiting until a GCI is durable (docs/design/transactions.md §9,
//! docs/design/durability.md §2).
//!
//! A commit's TCKEYCONF carries its GCI. The GCI is *complete* (durable)
//! once every data node has logged every commit of it and recorded it in
//! its system file: a whole-cluster crash can no longer lose it. A client
//! learns that with GCI_WAIT_REQ{gci} to any tc, which answers
//! GCI_WAIT_CONF{complete_gci} as soon as the cluster's complete GCI
//! reaches gci (at once if it has), or GCI_WAIT_REF (e.g. TooManyGciWaits).
//!
//! [`DurableWait`] is one such request in flight: registered in the
//! connection's dispatch under its request id, its answer posted to an
//! inbox like a transaction's replies. Two users:
//! - [`Cluster::wait_durable`] (here): a wait of its own, sync;
//! - `Commit::Durable` (`transaction`, `session`): a commit that returns
//!   only once its GCI is durable, in the sync and the async API.
//!
//! Any tc can answer, so a wait whose connection is lost is asked again on
//! another connected node (the transaction's own tc is asked first); lost
//! connections are never reused, so this ends.

use crate::cluster::Cluster;
use crate::connection::FrameBuilder;
use crate::dispatch::{Inbox, Replies, Reply};
use crate::error::ClientError;
use signal::signals::GciWaitReq;
use signal::{BlockKind, ErrorCode, Gci, TransactionId};
use std::sync::Arc;

/// What a [`Cluster::wait_durable`] registers its wait under (it has no
/// transaction; its inbox is its own, so any id would do).
const OWN_WAIT: TransactionId = TransactionId(0);

/// One GCI_WAIT_REQ sent (or about to be).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct DurableWait {
    /// The GCI waited for.
    pub(crate) gci: Gci,
    /// The request id its answer carries.
    request_id: u32,
    /// Index of the connection it goes to.
    pub(crate) connection: usize,
}

/// What a reply means for a [`DurableWait`].
#[derive(Debug)]
pub(crate) enum WaitAnswer {
    /// The GCI is durable; the cluster's complete GCI (at least it).
    Durable(Gci),
    /// The wait failed for good (refused, or a nonsensical answer).
    Failed(ClientError),
    /// The connection ended before an answer: ask another node (the
    /// reason stays with the connection, for the error if none is left).
    Lost,
    /// Not an answer to a GCI wait.
    Other,
}

impl DurableWait {
    /// Registers a wait for `gci` on tc `tc` (connection index, instance)
    /// whose answer goes to `inbox` for `transaction` (posted with `tag`,
    /// see `dispatch::Posted`), and appends the
    /// GCI_WAIT_REQ to `frames` (bound for that connection). On an error
    /// nothing stays registered or appended.
    pub(crate) fn prepare(
        cluster: &Cluster,
        gci: Gci,
        tc: (usize, u16),
        transaction: TransactionId,
        inbox: &Arc<Inbox>,
        tag: u32,
        frames: &mut FrameBuilder,
    ) -> Result<DurableWait, ClientError> {
        let (connection_index, tc_instance) = tc;
        let connection = cluster.connection(connection_index);
        let request_id = cluster.next_request_id();
        connection
            .dispatch
            .register_gci_wait(request_id, transaction, inbox, tag)
            .map_err(|reason| connection.lost(reason))?;
        let checkpoint = frames.checkpoint();
        let request = GciWaitReq { request_id, gci }.into();
        if let Err(error) = frames.push(&connection.envelope(BlockKind::Tc, tc_instance, request)) {
            frames.restore(checkpoint);
            connection.dispatch.unregister_gci_wait(request_id);
            return Err(error);
        }
        Ok(DurableWait {
            gci,
            request_id,
            connection: connection_index,
        })
    }

    /// Gives the wait up: a later answer is a stray.
    pub(crate) fn cancel(&self, cluster: &Cluster) {
        cluster
            .connection(self.connection)
            .dispatch
            .unregister_gci_wait(self.request_id);
    }

    /// What `reply` (posted for this wait's transaction) means.
    pub(crate) fn answer(&self, reply: Reply) -> WaitAnswer {
        match reply {
            Reply::Durable { complete_gci } if complete_gci >= self.gci => {
                WaitAnswer::Durable(complete_gci)
            }
            Reply::Durable { complete_gci } => WaitAnswer::Failed(ClientError::Protocol(format!(
                "asked to wait for GCI {}, the data node answered that GCI {complete_gci} is \
                 complete",
                self.gci
            ))),
            Reply::DurableRefused {
                error: ErrorCode::GciRolledBack,
            } => WaitAnswer::Failed(ClientError::RolledBack { gci: self.gci }),
            Reply::DurableRefused { error } => {
                WaitAnswer::Failed(ClientError::DurableWaitRefused {
                    code: error,
                    gci: self.gci,
                })
            }
            Reply::Lost(_) => WaitAnswer::Lost,
            _ => WaitAnswer::Other,
        }
    }
}

impl Cluster {
    /// Waits until GCI `gci` is complete (durable: a whole-cluster crash
    /// can no longer lose what committed in it, or before it) and returns
    /// the cluster's complete GCI, at least `gci`. The GCI of a commit is
    /// in its [`Outcome`](crate::Outcome); `Commit::Durable` does this
    /// wait as part of the commit.
    ///
    /// Any connected data node answers; if its connection is lost the next
    /// one is asked. Errors: `ConnectionLost` (no connection left),
    /// `DurableWaitRefused` (the data node holds too many waits: retry
    /// later), `Timeout` (no answer within the reply timeout).
    ///
    /// ```no_run
    /// use client::{Cluster, Commit, Value};
    /// let cluster = Cluster::connect("127.0.0.1:11860")?;
    /// let table = cluster.table("kv")?;
    /// let mut transaction = cluster.transaction();
    /// transaction.write(&table, &[("k", Value::UInt(1)), ("v", Value::from("one"))])?;
    /// let outcome = transaction.execute(Commit::Yes)?;
    /// if let Some(gci) = outcome.gci {
    ///     let complete = cluster.wait_durable(gci)?;
    ///     assert!(complete >= gci);
    /// }
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn wait_durable(&self, gci: Gci) -> Result<Gci, ClientError> {
        let inbox = Arc::new(Inbox::default());
        let mut frames = FrameBuilder::default();
        let mut replies = Replies::default();
        let timeout = self.options().reply_timeout;
        let mut preferred = self.any_tc();
        loop {
            let tc = self.durable_wait_tc(preferred)?;
            frames.clear();
            let wait = DurableWait::prepare(self, gci, tc, OWN_WAIT, &inbox, 0, &mut frames)?;
            if let Err(error) = self.connection(tc.0).send(&mut frames) {
                wait.cancel(self);
                return Err(error);
            }
            let deadline = self.clock().now() + timeout;
            // Until an answer, or the connection is lost (then ask another).
            'answer: loop {
                if !inbox.take(self.clock(), &mut replies, Some(deadline)) {
                    wait.cancel(self);
                    return Err(ClientError::Timeout {
                        what: "a wait for a durable GCI",
                        waited: timeout,
                    });
                }
                replies.row_bytes.clear();
                for posted in replies.list.drain(..) {
                    match wait.answer(posted.reply) {
                        WaitAnswer::Durable(complete_gci) => return Ok(complete_gci),
                        WaitAnswer::Failed(error) => return Err(error),
                        WaitAnswer::Lost => break 'answer,
                        WaitAnswer::Other => {}
                    }
                }
            }
            replies.clear();
            preferred = tc;
        }
    }
}
