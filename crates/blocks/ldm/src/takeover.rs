//! TAKEOVER_REQ: what this ldm holds of the transactions whose
//! coordinator failed (docs/design/failures.md §7; NDB's LQH_TRANSREQ).
//! The tc taking over asks every ldm of every survivor once every
//! survivor refuses the failed nodes, so no operation of theirs can
//! still arrive; each ldm reports every operation record whose tc ran
//! on a failed node, with its state, and then says it is done. The tc
//! decides each transaction's outcome from what every replica reported,
//! and finishes it with RESOLVE_REQ (`resolve`).

use crate::operation::OpState;
use crate::Ldm;
use kernel::{send, Context};
use signal::signals::{takeover_state, TakeoverConf, TakeoverOpRep, TakeoverReq};
use signal::{BlockRef, Gci};

impl Ldm {
    pub(crate) fn takeover(&mut self, from: BlockRef, request: TakeoverReq, ctx: &mut dyn Context) {
        let mut operations = 0;
        for index in self.operations.in_use_indices() {
            let operation = &self.operations[index];
            if !request.failed.contains(operation.tc.node) {
                continue;
            }
            let (state, gci) = match operation.state {
                OpState::Waiting => (takeover_state::WAITING, 0),
                OpState::Prepared => (takeover_state::PREPARED, 0),
                OpState::Committed { gci } => (takeover_state::COMMITTED, gci),
                OpState::Free => unreachable!("in_use_indices yields records in use"),
            };
            send(
                ctx,
                self.address,
                from,
                TakeoverOpRep {
                    membership_id: request.membership_id,
                    tc: operation.tc,
                    tc_op: operation.tc_op,
                    transaction_id: operation.transaction_id,
                    chain: operation.chain,
                    state,
                    gci: Gci(gci),
                },
            );
            operations += 1;
        }
        send(
            ctx,
            self.address,
            from,
            TakeoverConf {
                membership_id: request.membership_id,
                operations,
            },
        );
    }
}
