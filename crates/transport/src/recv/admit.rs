//! Admission: what a connection must show before the receive thread
//! registers it under a node id and lets its signals reach a block
//! (docs/design/0007-groundwork.md, "Authenticated admission";
//! docs/wire-format.md §7).
//!
//! - An **API node**'s first frame must open with API_REGREQ to membership
//!   carrying the token mgmd issued with the frame's sender id (checked with
//!   the cluster secret, not by asking mgmd), of an allocation no older than
//!   one already admitted for that id. Anything else gets API_REGREF
//!   `NotAdmitted`, written here, and the connection is closed.
//! - A **data node** proves it holds the cluster secret in a three-frame
//!   handshake, each frame holding one signal:
//!
//! ```text
//!   dialer (lower id)                          acceptor (higher id)
//!     seq 0  LINK_HELLO_REQ  challenge d   -->
//!                                          <--  seq 0  LINK_HELLO_CONF challenge a,
//!                                                       proof(acceptor; a, d)
//!     checks the proof; registers the link
//!     seq 1  LINK_PROOF_REP  proof(dialer; d, a) -->
//!                                               checks the proof; registers
//!     seq 2.. signals                              seq 1.. signals
//! ```
//!
//!   Each proof is an HMAC under the secret of the role, both node ids,
//!   both incarnations and both challenges (`admission::LinkStatement`);
//!   each side's challenge is fresh, so a proof seen on one connection is
//!   worth nothing on another. A peer without the secret is closed, and
//!   one that never finishes is closed by the identify timeout.
//!
//! Until it is admitted, a connection may send frames of at most
//! [`UNIDENTIFIED_FRAME_BYTES`], so an unknown peer cannot make this node
//! buffer more than that.

use super::{CloseReason, Dispatch, Peer};
use crate::registry::RegisterError;
use admission::{LinkRole, LinkStatement, CHALLENGE_BYTES};
use mio::net::TcpStream;
use signal::codec::{self, FrameHeader, SignalDecoder};
use signal::signals::{ApiRegRef, LinkHelloConf, LinkHelloReq, LinkProofRep};
use signal::{BlockKind, BlockRef, Envelope, ErrorCode, NodeId, Signal};
use std::io::{ErrorKind, Write};

/// The largest frame a connection may send before it is admitted: its
/// first frame is an API_REGREQ or a link handshake signal, under 200
/// bytes; the rest of a first frame of an API node's may hold more.
pub(super) const UNIDENTIFIED_FRAME_BYTES: usize = 4096;

/// Where a connection is in the data-node handshake.
#[derive(Clone, Copy, Debug, Default)]
pub(super) enum Handshake {
    /// Nothing sent yet: an accepted connection before its first frame.
    #[default]
    Idle,
    /// This node dialed and sent LINK_HELLO_REQ with `challenge`.
    Dialed { challenge: [u8; CHALLENGE_BYTES] },
    /// This node accepted `node`'s LINK_HELLO_REQ and answered with its
    /// own challenge; LINK_PROOF_REP is due.
    Answered {
        node: NodeId,
        incarnation: u32,
        own_challenge: [u8; CHALLENGE_BYTES],
        peer_challenge: [u8; CHALLENGE_BYTES],
    },
}

/// The parts of a connection admission reads and writes.
pub(super) struct Admitting<'a> {
    pub stream: &'a mut TcpStream,
    pub write_half: &'a mut Option<std::net::TcpStream>,
    pub dialed: Option<NodeId>,
    pub handshake: &'a mut Handshake,
}

/// What a frame from a connection not yet admitted led to.
pub(super) enum Admitted {
    /// A handshake step: the frame is consumed, the connection waits for
    /// the next one.
    Pending,
    /// The connection is registered as `Peer`; the rest of the frame
    /// (after `first`, if any) is routed as usual.
    Peer {
        peer: Peer,
        /// The API node's API_REGREQ, to route to membership.
        first: Option<Envelope>,
    },
}

/// Writes one frame holding `signal` from `from` to `to`, with sequence
/// `sequence`, on a connection the send thread does not know yet (so no
/// other writer). The socket is fresh, so its send buffer takes the few
/// bytes at once; anything else closes the connection.
pub(super) fn write_frame(
    stream: &mut TcpStream,
    from: BlockRef,
    to: BlockRef,
    incarnation: u32,
    sequence: u64,
    signal: Signal,
) -> Result<(), CloseReason> {
    let mut frame = Vec::with_capacity(codec::FRAME_HEADER_BYTES + 128);
    let start = codec::begin_frame(&mut frame);
    let envelope = Envelope { from, to, signal };
    codec::encode_signal(&mut frame, &envelope)
        .map_err(|error| CloseReason::FrameNotWritten(error.to_string()))?;
    codec::finish_frame(&mut frame, start, from.node, incarnation, sequence, 1);
    loop {
        return match stream.write(&frame) {
            Ok(written) if written == frame.len() => Ok(()),
            Ok(written) => Err(CloseReason::FrameNotWritten(format!(
                "only {written} of {} bytes taken",
                frame.len()
            ))),
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(error) => Err(CloseReason::FrameNotWritten(error.to_string())),
        };
    }
}

/// Fresh random bytes for a challenge; a node whose random source fails
/// cannot prove anything, so the connection is closed (and retried).
fn challenge() -> Result<[u8; CHALLENGE_BYTES], CloseReason> {
    admission::random_bytes().map_err(|error| CloseReason::NoRandomness(error.to_string()))
}

/// Membership's address on `node`: the nominal sender and receiver of the
/// handshake signals, which only receive threads read.
fn membership(node: NodeId) -> BlockRef {
    BlockRef::new(node, BlockKind::Membership, 0)
}

/// Whether `signal` is one of the link handshake's, which no block takes.
pub(super) fn is_handshake(signal: &Signal) -> bool {
    matches!(
        signal,
        Signal::LinkHelloReq(_) | Signal::LinkHelloConf(_) | Signal::LinkProofRep(_)
    )
}

impl Dispatch {
    /// Starts the handshake on a connection this node dialed to `node`:
    /// LINK_HELLO_REQ with a fresh challenge.
    pub(super) fn start_dial(
        &self,
        stream: &mut TcpStream,
        node: NodeId,
        handshake: &mut Handshake,
    ) -> Result<(), CloseReason> {
        let challenge = challenge()?;
        write_frame(
            stream,
            membership(self.own_node),
            membership(node),
            self.incarnation,
            0,
            LinkHelloReq { challenge }.into(),
        )?;
        *handshake = Handshake::Dialed { challenge };
        Ok(())
    }

    /// Takes a frame of a connection not yet admitted: the next step of a
    /// data node's handshake, or an API node's registration.
    pub(super) fn admit(
        &mut self,
        header: &FrameHeader,
        decoder: &mut SignalDecoder<'_>,
        connection: Admitting<'_>,
    ) -> Result<Admitted, CloseReason> {
        let sender = header.sender;
        if sender == self.own_node {
            return Err(CloseReason::OwnNodeId);
        }
        if let Some(expected) = connection.dialed {
            if sender != expected {
                return Err(CloseReason::WrongPeer {
                    expected,
                    found: sender,
                });
            }
        }
        if self.link_mut(sender).is_none() {
            return self.admit_api_node(header, decoder, connection);
        }
        let signal = self.only_signal(header, decoder)?;
        match (*connection.handshake, signal) {
            (Handshake::Idle, Signal::LinkHelloReq(hello)) if connection.dialed.is_none() => {
                self.answer_hello(header, hello, connection)
            }
            (Handshake::Dialed { challenge }, Signal::LinkHelloConf(answer)) => {
                self.finish_dial(header, challenge, answer, connection)
            }
            (
                Handshake::Answered {
                    node,
                    incarnation,
                    own_challenge,
                    peer_challenge,
                },
                Signal::LinkProofRep(proof),
            ) => {
                let statement = LinkStatement {
                    role: LinkRole::Dialer,
                    prover: node,
                    verifier: self.own_node,
                    prover_incarnation: incarnation,
                    verifier_incarnation: self.incarnation,
                    prover_challenge: peer_challenge,
                    verifier_challenge: own_challenge,
                };
                if !self.secret.verify_link_proof(&statement, &proof.proof) {
                    return Err(CloseReason::BadLinkProof(node));
                }
                // The acceptor's hello was its frame 0.
                let peer = self.register(node, incarnation, connection.write_half, 1, true)?;
                self.data_node_connected(node, incarnation);
                Ok(Admitted::Peer { peer, first: None })
            }
            (_, other) => Err(CloseReason::HandshakeOutOfOrder {
                node: sender,
                signal: other.name(),
            }),
        }
    }

    /// The one signal of a handshake frame, addressed to this node's
    /// membership (handshake frames hold nothing else).
    fn only_signal(
        &mut self,
        header: &FrameHeader,
        decoder: &mut SignalDecoder<'_>,
    ) -> Result<Signal, CloseReason> {
        let not_alone = CloseReason::HandshakeOutOfOrder {
            node: header.sender,
            signal: "a frame of other than one signal",
        };
        if header.signal_count != 1 {
            return Err(not_alone);
        }
        match decoder.next(self.refusal_pool) {
            Ok(Some(envelope)) => Ok(envelope.signal),
            Ok(None) => Err(not_alone),
            Err(error) => Err(CloseReason::Decode(error)),
        }
    }

    /// The checks of a data node's connection before it is answered or
    /// registered: who dials whom, its incarnation, one link per pair.
    fn check_data_node(
        &mut self,
        node: NodeId,
        incarnation: u32,
        dialed: Option<NodeId>,
    ) -> Result<(), CloseReason> {
        if self.registry.is_cut_incarnation(node, incarnation) {
            return Err(CloseReason::Cut(node));
        }
        let link = self
            .link_mut(node)
            .ok_or(CloseReason::HandshakeOutOfOrder {
                node,
                signal: "a link handshake from a node that is no data node",
            })?;
        if link.dials && dialed.is_none() {
            return Err(CloseReason::MustBeDialed(node));
        }
        if let Some(highest) = link.highest_incarnation {
            if incarnation < highest {
                return Err(CloseReason::OldIncarnation {
                    node,
                    incarnation,
                    highest,
                });
            }
        }
        if self.registry.is_connected(node) {
            return Err(CloseReason::AlreadyConnected(node));
        }
        Ok(())
    }

    /// The acceptor's side of LINK_HELLO_REQ: checks, then LINK_HELLO_CONF
    /// with this node's challenge and its proof.
    fn answer_hello(
        &mut self,
        header: &FrameHeader,
        hello: LinkHelloReq,
        connection: Admitting<'_>,
    ) -> Result<Admitted, CloseReason> {
        let node = header.sender;
        self.check_data_node(node, header.incarnation, None)?;
        let own_challenge = challenge()?;
        let proof = self.secret.link_proof(&LinkStatement {
            role: LinkRole::Acceptor,
            prover: self.own_node,
            verifier: node,
            prover_incarnation: self.incarnation,
            verifier_incarnation: header.incarnation,
            prover_challenge: own_challenge,
            verifier_challenge: hello.challenge,
        });
        write_frame(
            connection.stream,
            membership(self.own_node),
            membership(node),
            self.incarnation,
            0,
            LinkHelloConf {
                challenge: own_challenge,
                proof,
            }
            .into(),
        )?;
        *connection.handshake = Handshake::Answered {
            node,
            incarnation: header.incarnation,
            own_challenge,
            peer_challenge: hello.challenge,
        };
        Ok(Admitted::Pending)
    }

    /// The dialer's side of LINK_HELLO_CONF: checks the acceptor's proof,
    /// answers with its own (LINK_PROOF_REP) and registers the link.
    fn finish_dial(
        &mut self,
        header: &FrameHeader,
        own_challenge: [u8; CHALLENGE_BYTES],
        answer: LinkHelloConf,
        connection: Admitting<'_>,
    ) -> Result<Admitted, CloseReason> {
        let node = header.sender;
        self.check_data_node(node, header.incarnation, connection.dialed)?;
        let statement = LinkStatement {
            role: LinkRole::Acceptor,
            prover: node,
            verifier: self.own_node,
            prover_incarnation: header.incarnation,
            verifier_incarnation: self.incarnation,
            prover_challenge: answer.challenge,
            verifier_challenge: own_challenge,
        };
        if !self.secret.verify_link_proof(&statement, &answer.proof) {
            return Err(CloseReason::BadLinkProof(node));
        }
        let proof = self.secret.link_proof(&LinkStatement {
            role: LinkRole::Dialer,
            prover: self.own_node,
            verifier: node,
            prover_incarnation: self.incarnation,
            verifier_incarnation: header.incarnation,
            prover_challenge: own_challenge,
            verifier_challenge: answer.challenge,
        });
        write_frame(
            connection.stream,
            membership(self.own_node),
            membership(node),
            self.incarnation,
            1,
            LinkProofRep { proof }.into(),
        )?;
        // This node's frames 0 and 1 were the handshake's.
        let incarnation = header.incarnation;
        let peer = self.register(node, incarnation, connection.write_half, 2, true)?;
        self.data_node_connected(node, header.incarnation);
        Ok(Admitted::Peer { peer, first: None })
    }

    /// An API node's first frame: API_REGREQ with a valid token first.
    fn admit_api_node(
        &mut self,
        header: &FrameHeader,
        decoder: &mut SignalDecoder<'_>,
        connection: Admitting<'_>,
    ) -> Result<Admitted, CloseReason> {
        let node = header.sender;
        let Some(&newest) = self.api_allocations.get(usize::from(node.0)) else {
            return Err(CloseReason::NodeIdOutOfRange(node));
        };
        // No sections: an API_REGREQ needs none, and anything else is refused.
        let envelope = match decoder.next(self.refusal_pool) {
            Ok(Some(envelope)) => envelope,
            Ok(None) => return Err(self.refuse_api_node(node, "no API_REGREQ", connection)),
            Err(error) => return Err(CloseReason::Decode(error)),
        };
        let Signal::ApiRegReq(request) = &envelope.signal else {
            return Err(self.refuse_api_node(
                node,
                "its first signal is not API_REGREQ",
                connection,
            ));
        };
        if envelope.from.kind != BlockKind::Api || envelope.to.kind != BlockKind::Membership {
            return Err(self.refuse_api_node(
                node,
                "its API_REGREQ is not from an API block to membership",
                connection,
            ));
        }
        if !self.secret.verify_api_token(node, &request.token) {
            return Err(self.refuse_api_node(
                node,
                "its token is not one mgmd issued for this node id",
                connection,
            ));
        }
        if request.token.allocation < newest {
            return Err(self.refuse_api_node(
                node,
                "its token is of an older allocation of this node id than one admitted before",
                connection,
            ));
        }
        let peer = self.register(node, 0, connection.write_half, 0, false)?;
        if let Some(newest) = self.api_allocations.get_mut(usize::from(node.0)) {
            *newest = request.token.allocation;
        }
        Ok(Admitted::Peer {
            peer,
            first: Some(envelope),
        })
    }

    /// Answers an API node that is not admitted with API_REGREF
    /// `NotAdmitted` (best effort: the connection closes either way) and
    /// returns why to close it.
    fn refuse_api_node(
        &self,
        node: NodeId,
        why: &'static str,
        connection: Admitting<'_>,
    ) -> CloseReason {
        let refusal = ApiRegRef {
            error: ErrorCode::NotAdmitted,
        };
        let _ = write_frame(
            connection.stream,
            membership(self.own_node),
            BlockRef::new(node, BlockKind::Api, 0),
            self.incarnation,
            0,
            refusal.into(),
        );
        CloseReason::NotAdmitted { node, why }
    }

    /// Registers the connection of `node` (its incarnation `incarnation`;
    /// 0 for an API node) for the send thread, whose frames on it continue
    /// at `first_sequence`.
    fn register(
        &mut self,
        node: NodeId,
        incarnation: u32,
        write_half: &mut Option<std::net::TcpStream>,
        first_sequence: u64,
        data_node: bool,
    ) -> Result<Peer, CloseReason> {
        let write_stream = write_half.take().ok_or(CloseReason::NoWriteHalf)?;
        let registered = self
            .registry
            .register(node, incarnation, write_stream, first_sequence);
        let connection_id = match registered {
            Ok(connection_id) => connection_id,
            Err(RegisterError::AlreadyConnected) => {
                return Err(CloseReason::AlreadyConnected(node))
            }
            Err(RegisterError::NodeIdOutOfRange) => {
                return Err(CloseReason::NodeIdOutOfRange(node))
            }
            Err(RegisterError::Cut) => return Err(CloseReason::Cut(node)),
            Err(RegisterError::Closed) => return Err(CloseReason::Shutdown),
        };
        Ok(Peer {
            node,
            connection_id,
            data_node,
        })
    }
}
