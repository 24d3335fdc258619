//! Refusals of API requests addressed to a block that does not serve them.
//!
//! The receiving block is chosen by the bytes of the signal record, so a
//! buggy or hostile client can send any API request to any block. Data from
//! the network never stops a node: every block answers such a request with
//! the request's REF and `BadRequest` where the request has one, and
//! otherwise drops it (the client times out). A block's dispatch does
//!
//! ```text
//! other if codec::is_api_request(other.number()) => {
//!     if let Some(refusal) = refusal::refuse_api_request(&other) {
//!         kernel::send(ctx, self.address, from, refusal);
//!     }
//! }
//! ```

use crate::signals::{GciWaitRef, ScanPartitionRef, SchemaRef, TcKeyRef};
use crate::{ErrorCode, Signal};

/// The refusal owed to the API `request` by a block that does not serve it:
/// a [`SchemaRef`] for schema requests and a [`TcKeyRef`] for transaction
/// requests, each with `BadRequest` and the request's echoed id (`client_op`
/// `u32::MAX` where the request names no operation). `None` where the
/// request has no REF ([`crate::signals::ApiRegReq`]) or `request` is not an
/// API request at all. The request itself (and its sections) stays with the
/// caller.
pub fn refuse_api_request(request: &Signal) -> Option<Signal> {
    let error = ErrorCode::BadRequest;
    let schema_ref = |request_id| Some(SchemaRef { request_id, error }.into());
    let tc_key_ref = |transaction_id, client_op| {
        Some(
            TcKeyRef {
                transaction_id,
                client_op,
                error,
            }
            .into(),
        )
    };
    match request {
        Signal::CreateTabReq(request) => schema_ref(request.request_id),
        Signal::DropTabReq(request) => schema_ref(request.request_id),
        Signal::GetTabInfoReq(request) => schema_ref(request.request_id),
        Signal::ListTablesReq(request) => schema_ref(request.request_id),
        Signal::TcKeyReq(request) => tc_key_ref(request.transaction_id, request.client_op),
        Signal::TcCommitReq(request) => tc_key_ref(request.transaction_id, u32::MAX),
        Signal::TcRollbackReq(request) => tc_key_ref(request.transaction_id, u32::MAX),
        Signal::GciWaitReq(request) => Some(
            GciWaitRef {
                request_id: request.request_id,
                error,
            }
            .into(),
        ),
        Signal::ScanPartitionReq(request) => Some(
            ScanPartitionRef {
                request_id: request.request_id,
                error,
            }
            .into(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signals::{ApiRegReq, DropTabReq, ListTablesConf, ListTablesReq, TcCommitReq};
    use crate::{SectionPool, TransactionId};

    #[test]
    fn schema_requests_get_a_schema_ref_with_their_id() {
        let pool = SectionPool::leak([1; 6]);
        let request: Signal = DropTabReq {
            request_id: 7,
            name: pool.copy_from(b"t").expect("room"),
        }
        .into();
        let Some(Signal::SchemaRef(refusal)) = refuse_api_request(&request) else {
            panic!("no SchemaRef");
        };
        assert_eq!(
            refusal,
            SchemaRef {
                request_id: 7,
                error: ErrorCode::BadRequest
            }
        );
    }

    #[test]
    fn a_misaddressed_list_tables_req_gets_a_schema_ref_with_its_id() {
        let request: Signal = ListTablesReq { request_id: 11 }.into();
        let Some(Signal::SchemaRef(refusal)) = refuse_api_request(&request) else {
            panic!("no SchemaRef");
        };
        assert_eq!(
            refusal,
            SchemaRef {
                request_id: 11,
                error: ErrorCode::BadRequest
            }
        );
        // Its answer is not a request: nothing to refuse.
        let pool = SectionPool::leak([1; 6]);
        let answer: Signal = ListTablesConf {
            request_id: 11,
            schema_version: 1,
            names: pool.copy_from(&[0, 0]).expect("room"),
        }
        .into();
        assert!(refuse_api_request(&answer).is_none());
    }

    #[test]
    fn transaction_requests_get_a_tc_key_ref() {
        let request: Signal = TcCommitReq {
            transaction_id: TransactionId(9),
        }
        .into();
        let Some(Signal::TcKeyRef(refusal)) = refuse_api_request(&request) else {
            panic!("no TcKeyRef");
        };
        assert_eq!(
            refusal,
            TcKeyRef {
                transaction_id: TransactionId(9),
                client_op: u32::MAX,
                error: ErrorCode::BadRequest
            }
        );
    }

    #[test]
    fn requests_without_a_ref_and_other_signals_get_none() {
        let registration: Signal = ApiRegReq {
            protocol_version: 1,
        }
        .into();
        assert!(refuse_api_request(&registration).is_none());
        let reply: Signal = TcKeyRef {
            transaction_id: TransactionId(1),
            client_op: 0,
            error: ErrorCode::BadRequest,
        }
        .into();
        assert!(refuse_api_request(&reply).is_none());
    }
}
