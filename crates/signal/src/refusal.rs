//! Refusals of API requests addressed to a block that does not serve them.
//!
//! The receiving block is chosen by the bytes of the signal record, so a
//! buggy or hostile client can send any API request to any block. Data from
//! the network never stops a node: every block answers such a request with
//! the REF the signal table declares for it (every API request has one)
//! and `BadRequest`. A block's dispatch does
//!
//! ```text
//! other if codec::is_api_request(other.number()) => {
//!     if let Some(refusal) = other.refusal() {
//!         kernel::send(ctx, self.address, from, refusal);
//!     }
//! }
//! ```
//!
//! `Signal::refusal` is generated from the signal table (`refused_by`);
//! the tests here check the refusals of each kind of request.

#[cfg(test)]
mod tests {
    use crate::signals::{
        ApiRegReq, DropTabReq, ListTablesConf, ListTablesReq, SchemaRef, TcCommitReq, TcKeyRef,
    };
    use crate::Signal;
    use crate::{ErrorCode, SectionPool, TransactionId};

    #[test]
    fn schema_requests_get_a_schema_ref_with_their_id() {
        let pool = SectionPool::leak([1; 6]);
        let request: Signal = DropTabReq {
            request_id: 7,
            name: pool.copy_from(b"t").expect("room"),
        }
        .into();
        let Some(Signal::SchemaRef(refusal)) = Signal::refusal(&request) else {
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
        let Some(Signal::SchemaRef(refusal)) = Signal::refusal(&request) else {
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
        assert!(Signal::refusal(&answer).is_none());
    }

    #[test]
    fn transaction_requests_get_a_tc_key_ref() {
        let request: Signal = TcCommitReq {
            transaction_id: TransactionId(9),
        }
        .into();
        let Some(Signal::TcKeyRef(refusal)) = Signal::refusal(&request) else {
            panic!("no TcKeyRef");
        };
        assert_eq!(
            refusal,
            TcKeyRef {
                transaction_id: TransactionId(9),
                client_op: u32::MAX,
                error: ErrorCode::BadRequest,
                index_id: 0
            }
        );
    }

    #[test]
    fn a_misaddressed_registration_gets_an_api_reg_ref_and_replies_get_none() {
        let registration: Signal = ApiRegReq {
            protocol_version: 1,
            token: crate::signals::ApiToken::NONE,
        }
        .into();
        let Some(Signal::ApiRegRef(refusal)) = Signal::refusal(&registration) else {
            panic!("no ApiRegRef");
        };
        assert_eq!(refusal.error, ErrorCode::BadRequest);
        let reply: Signal = TcKeyRef {
            transaction_id: TransactionId(1),
            client_op: 0,
            error: ErrorCode::BadRequest,
            index_id: 0,
        }
        .into();
        assert!(Signal::refusal(&reply).is_none());
    }
}
