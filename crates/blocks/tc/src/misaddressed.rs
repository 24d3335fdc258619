//! Requests an API node addressed to a block that does not serve them.
//!
//! The receiving block is chosen by the bytes of the signal record, so a
//! buggy or hostile client can send any API request to any block. Data from
//! the network never stops a node: the block answers with the request's REF
//! and `BadRequest` where the request has one, and otherwise drops it (the
//! client times out).

use kernel::Context;
use signal::signals::{SchemaRef, TcKeyRef};
use signal::{BlockRef, ErrorCode, Signal};

/// Answers (or drops) an API request this block does not serve.
pub(crate) fn refuse_misaddressed(
    address: BlockRef,
    from: BlockRef,
    signal: Signal,
    ctx: &mut dyn Context,
) {
    let error = ErrorCode::BadRequest;
    let refusal: Option<Signal> = match signal {
        Signal::CreateTabReq(request) => Some(
            SchemaRef {
                request_id: request.request_id,
                error,
            }
            .into(),
        ),
        Signal::DropTabReq(request) => Some(
            SchemaRef {
                request_id: request.request_id,
                error,
            }
            .into(),
        ),
        Signal::GetTabInfoReq(request) => Some(
            SchemaRef {
                request_id: request.request_id,
                error,
            }
            .into(),
        ),
        Signal::TcKeyReq(request) => Some(
            TcKeyRef {
                transaction_id: request.transaction_id,
                client_op: request.client_op,
                error,
            }
            .into(),
        ),
        Signal::TcCommitReq(request) => Some(
            TcKeyRef {
                transaction_id: request.transaction_id,
                client_op: u32::MAX,
                error,
            }
            .into(),
        ),
        Signal::TcRollbackReq(request) => Some(
            TcKeyRef {
                transaction_id: request.transaction_id,
                client_op: u32::MAX,
                error,
            }
            .into(),
        ),
        // ApiRegReq has no REF; anything else is not an API request and
        // never reaches here.
        _ => None,
    };
    if let Some(refusal) = refusal {
        kernel::send(ctx, address, from, refusal);
    }
}
