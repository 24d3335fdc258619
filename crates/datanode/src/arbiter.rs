//! The way from membership to the arbitrator (docs/design/failures.md §4):
//! the io thread hands each ARBITRATION_REQ here, which asks mgmd
//! (`arbitrate`, docs/mgm-protocol.md) on a thread of its own, so a slow
//! or unreachable mgmd never holds up file I/O, and hands the answer back
//! to the io thread as the ARBITRATION_CONF membership waits for.
//!
//! Blocks never touch sockets; this is the node's side of the one request
//! a block makes of mgmd. Membership gives up after its own timeout
//! whatever happens here, so an answer that comes late is ignored there.

use admission::{ArbitrationStatement, ClusterSecret};
use kernel::waker::Waker;
use signal::signals::{ArbitrationConf, ArbitrationReq};
use signal::{BlockKind, BlockRef, Envelope, NodeId, NodeSet};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;

/// Asks mgmd for arbitration on behalf of this node's membership.
pub struct Arbiter {
    node: NodeId,
    /// mgmd's `host:port`.
    mgmd: String,
    /// This node's own address, which requests leave from (a firewall
    /// between hosts sees them as this node's), when it is one IPv4
    /// address.
    source: Option<std::net::Ipv4Addr>,
    secret: ClusterSecret,
    answers: Sender<Envelope>,
}

impl Arbiter {
    /// An arbiter for data node `node` asking mgmd at `mgmd`, proving its
    /// requests with `secret`. Answers come out of the receiver; `waker`
    /// (the io thread's) is woken after each.
    pub fn new(
        node: NodeId,
        mgmd: String,
        source: Option<std::net::Ipv4Addr>,
        secret: ClusterSecret,
    ) -> (Arbiter, Receiver<Envelope>) {
        let (answers, receiver) = channel();
        let arbiter = Arbiter {
            node,
            mgmd,
            source,
            secret,
            answers,
        };
        (arbiter, receiver)
    }

    /// The way into the io thread that answers take: the runtime sends
    /// its stop request the same way (`NodeRuntime::stop_gracefully`).
    pub fn answers(&self) -> Sender<Envelope> {
        self.answers.clone()
    }

    /// Asks, on a new thread, and sends the answer (ARBITRATION_CONF from
    /// the node's io address to `from`) once it has one, waking `waker`.
    pub fn ask(&self, from: BlockRef, request: ArbitrationReq, waker: Arc<Waker>) {
        let (node, mgmd, source, secret, answers) = (
            self.node,
            self.mgmd.clone(),
            self.source,
            self.secret.clone(),
            self.answers.clone(),
        );
        let spawned = std::thread::Builder::new()
            .name("arbitration".into())
            .spawn(move || {
                let (answered, granted) = ask_mgmd(node, &mgmd, source, &secret, &request);
                let answer = Envelope {
                    from: BlockRef::new(node, BlockKind::Io, 0),
                    to: from,
                    signal: ArbitrationConf {
                        membership_id: request.membership_id,
                        side: request.side,
                        answered,
                        granted,
                    }
                    .into(),
                };
                // The io thread is gone only when the node stops.
                let _ = answers.send(answer);
                waker.wake();
            });
        if let Err(error) = spawned {
            // No answer: membership's timeout shuts the side down.
            eprintln!("tessera node {node}: arbitration: cannot start a thread to ask: {error}");
        }
    }
}

/// One request to mgmd: (answered, granted). Logs what happened.
fn ask_mgmd(
    node: NodeId,
    mgmd: &str,
    source: Option<std::net::Ipv4Addr>,
    secret: &ClusterSecret,
    request: &ArbitrationReq,
) -> (bool, bool) {
    let statement = ArbitrationStatement {
        node,
        membership_id: request.membership_id,
        before: request.before,
        side: request.side,
    };
    let proof = secret.arbitration_proof(&statement);
    let ids = |set: NodeSet| set.iter().map(|node| node.0).collect::<Vec<u16>>();
    let connected = match source {
        Some(source) => mgmd::client::MgmClient::connect_from(mgmd, source),
        None => mgmd::client::MgmClient::connect(mgmd),
    };
    let answer = connected.and_then(|mut client| {
        client.arbitrate(
            node.0,
            request.membership_id,
            &ids(request.before),
            &ids(request.side),
            &proof,
        )
    });
    match answer {
        Ok(answer) => {
            eprintln!(
                "tessera node {node}: arbitration: mgmd at {mgmd} {} side {} of membership {} \
                 {}: {}",
                if answer.granted { "granted" } else { "refused" },
                request.side,
                request.membership_id,
                request.before,
                answer.reason
            );
            (true, answer.granted)
        }
        Err(error) => {
            eprintln!(
                "tessera node {node}: arbitration: cannot get an answer from mgmd at {mgmd}: \
                 {error}"
            );
            (false, false)
        }
    }
}
