//! Decoding: [`SignalDecoder`] takes the signal records of one verified
//! frame body, one at a time, and the signal table's `decode_body` turns
//! each body into its signal, checking every length, count, flag, node id
//! and enum value (the bytes come from the network: errors, never panics).

use super::field::{flag, Sections};
use super::{Reader, WireError, SIGNAL_HEAD_BYTES};
use crate::ids::{BlockKind, BlockRef, Gci, NodeId, TransactionId};
use crate::section::SectionPool;
use crate::signals::{decode_body, Envelope, TcKeyConf, TransIdAi};

/// Decodes the signals of one verified frame body, one at a time.
pub struct SignalDecoder<'a> {
    body: &'a [u8],
    remaining: u16,
    sender: NodeId,
    receiver: NodeId,
}

impl<'a> SignalDecoder<'a> {
    /// Decodes `signal_count` signals from `body`, sent by node `sender` to
    /// node `receiver`.
    pub fn new(body: &'a [u8], signal_count: u16, sender: NodeId, receiver: NodeId) -> Self {
        SignalDecoder {
            body,
            remaining: signal_count,
            sender,
            receiver,
        }
    }

    /// Signals not decoded yet.
    pub fn remaining(&self) -> u16 {
        self.remaining
    }

    /// Bytes of the body not decoded yet (the records of the remaining
    /// signals).
    pub fn unread_bytes(&self) -> usize {
        self.body.len()
    }

    /// The next signal, `Ok(None)` at the end. On [`WireError::OutOfSections`]
    /// the decoder has not advanced, so the caller may retry later.
    pub fn next(&mut self, pool: &'static SectionPool) -> Result<Option<Envelope>, WireError> {
        self.next_from(Sections::all(pool))
    }

    /// As [`SignalDecoder::next`], but a section may not take the pool's
    /// reserve (`SectionPool::alloc_leaving_reserve`): for signals from API
    /// nodes, which must never take what data-node links, redo and local
    /// checkpoints need. [`WireError::OutOfSections`] then means the request
    /// is to be refused (or retried later); the decoder has not advanced.
    ///
    /// [`SignalDecoder::next`]: SignalDecoder::next
    pub fn next_leaving_reserve(
        &mut self,
        pool: &'static SectionPool,
    ) -> Result<Option<Envelope>, WireError> {
        self.next_from(Sections::leaving_reserve(pool))
    }

    fn next_from(&mut self, sections: Sections) -> Result<Option<Envelope>, WireError> {
        let Some(head) = self.head()? else {
            return Ok(None);
        };
        let mut r = Reader::new(&self.body[SIGNAL_HEAD_BYTES..head.record_end]);
        let signal = decode_body(head.number, &mut r, sections)?;
        let (from, to) = self.finish(r, &head)?;
        Ok(Some(Envelope { from, to, signal }))
    }

    /// As [`next`], but the two signals an API node receives for every
    /// read, TCKEYCONF and TRANSID_AI, come back as an [`ApiReply`] whose
    /// row borrows from the frame: the client's receive thread hands it
    /// to the waiting transaction without a section in between.
    ///
    /// [`next`]: SignalDecoder::next
    pub fn next_for_api(
        &mut self,
        pool: &'static SectionPool,
    ) -> Result<Option<ForApi<'a>>, WireError> {
        let Some(head) = self.head()? else {
            return Ok(None);
        };
        let body: &'a [u8] = &self.body[SIGNAL_HEAD_BYTES..head.record_end];
        let mut r = Reader::new(body);
        let reply = match head.number {
            TC_KEY_CONF => ApiReply::TcKeyConf {
                transaction_id: TransactionId(r.u64()?),
                operations: r.u32()?,
                committed: flag(&mut r, "TcKeyConf committed")?,
                gci: Gci(r.u64()?),
                map_version: r.u32()?,
                row: if flag(&mut r, "TcKeyConf row")? {
                    Some((r.u32()?, r.bytes32()?))
                } else {
                    None
                },
            },
            TRANS_ID_AI => ApiReply::TransIdAi {
                transaction_id: TransactionId(r.u64()?),
                client_op: r.u32()?,
                data: r.bytes32()?,
            },
            number => {
                let signal = decode_body(number, &mut r, Sections::all(pool))?;
                let (from, to) = self.finish(r, &head)?;
                return Ok(Some(ForApi::Signal(Envelope { from, to, signal })));
            }
        };
        let (_, to) = self.finish(r, &head)?;
        Ok(Some(ForApi::Reply { to, reply }))
    }

    /// The head of the next signal record, checked; `None` at the end.
    fn head(&self) -> Result<Option<RecordHead>, WireError> {
        if self.remaining == 0 {
            return if self.body.is_empty() {
                Ok(None)
            } else {
                Err(WireError::BadField("bytes after the last signal"))
            };
        }
        let mut head = Reader::new(self.body);
        let number = head.u16()?;
        let to_kind =
            BlockKind::from_u8(head.u8()?).ok_or(WireError::BadField("receiver block"))?;
        let from_kind =
            BlockKind::from_u8(head.u8()?).ok_or(WireError::BadField("sender block"))?;
        let to_instance = head.u16()?;
        let from_instance = head.u16()?;
        let body_bytes = head.u32()? as usize;
        let record_end = SIGNAL_HEAD_BYTES
            .checked_add(body_bytes)
            .ok_or(WireError::Truncated)?;
        if self.body.len() < record_end {
            return Err(WireError::Truncated);
        }
        Ok(Some(RecordHead {
            number,
            to_kind,
            from_kind,
            to_instance,
            from_instance,
            record_end,
        }))
    }

    /// Checks that the body was read to its end, moves past the record and
    /// returns its (sender, receiver).
    fn finish(
        &mut self,
        rest: Reader<'_>,
        head: &RecordHead,
    ) -> Result<(BlockRef, BlockRef), WireError> {
        if !rest.is_empty() {
            return Err(WireError::BadField("bytes after signal fields"));
        }
        self.body = &self.body[head.record_end..];
        self.remaining -= 1;
        Ok((
            BlockRef::new(self.sender, head.from_kind, head.from_instance),
            BlockRef::new(self.receiver, head.to_kind, head.to_instance),
        ))
    }
}

/// A signal record's head.
struct RecordHead {
    number: u16,
    to_kind: BlockKind,
    from_kind: BlockKind,
    to_instance: u16,
    from_instance: u16,
    record_end: usize,
}

/// Signal numbers [`SignalDecoder::next_for_api`] decodes in place.
const TC_KEY_CONF: u16 = TcKeyConf::NUMBER;
const TRANS_ID_AI: u16 = TransIdAi::NUMBER;

/// What [`SignalDecoder::next_for_api`] returns.
#[derive(Debug)]
pub enum ForApi<'a> {
    /// A TCKEYCONF or TRANSID_AI, its row in the frame, addressed to `to`.
    Reply { to: BlockRef, reply: ApiReply<'a> },
    /// Any other signal, decoded as [`SignalDecoder::next`] does.
    Signal(Envelope),
}

/// A TCKEYCONF or TRANSID_AI whose row bytes borrow from the frame; the
/// fields and checks are those of [`TcKeyConf`] and [`TransIdAi`].
#[derive(Debug, PartialEq)]
pub enum ApiReply<'a> {
    TcKeyConf {
        transaction_id: TransactionId,
        operations: u32,
        committed: bool,
        gci: Gci,
        map_version: u32,
        /// The client op and attribute entries of the row it carries.
        row: Option<(u32, &'a [u8])>,
    },
    TransIdAi {
        transaction_id: TransactionId,
        client_op: u32,
        data: &'a [u8],
    },
}

impl ApiReply<'_> {
    /// The signal's name.
    pub fn name(&self) -> &'static str {
        match self {
            ApiReply::TcKeyConf { .. } => "TcKeyConf",
            ApiReply::TransIdAi { .. } => "TransIdAi",
        }
    }
}
