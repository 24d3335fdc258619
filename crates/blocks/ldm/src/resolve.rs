//! RESOLVE_REQ: finishing an operation on the live replicas after a data
//! node of its chain failed (docs/design/failures.md §6), or its
//! coordinator did (§7: the tc taking over sends it, and hears the
//! answer, `reply_to`). The normal
//! COMMIT, COMPLETE and ABORT run from replica to replica through the
//! chain as it was at prepare, so one that reached the failed node went
//! no further; the tc then sends RESOLVE_REQ with the chain of live
//! replicas. Each replica finds the operation by its tc and does the step
//! if it still has it to do (a replica the normal signal already reached
//! has nothing left), then passes the request on; the far end answers the
//! tc. A replica that finds nothing (the operation never got there, or is
//! finished) passes it on all the same: a later replica may still hold it.

use crate::operation::OpState;
use crate::Ldm;
use kernel::{send, Context, Report};
use signal::signals::{resolve_step, ResolveConf, ResolveReq};
use signal::{BlockKind, BlockRef};

impl Ldm {
    pub(crate) fn resolve(&mut self, from: BlockRef, request: ResolveReq, ctx: &mut dyn Context) {
        let chain = request.chain.as_slice();
        let Some(position) = chain.iter().position(|&node| node == self.address.node) else {
            ctx.report(Report::Log(format!(
                "ldm {}: ignored a RESOLVE_REQ from {from} whose chain {chain:?} does not \
                 hold this node",
                self.address
            )));
            return;
        };
        if let Some(index) = self.operations.find_by_tc(request.tc, request.tc_op) {
            let operation = &self.operations[index];
            if operation.transaction_id == request.transaction_id {
                match (request.step, operation.state) {
                    (resolve_step::COMMIT, OpState::Prepared) => {
                        self.commit_here(index, request.gci.0, ctx)
                    }
                    (resolve_step::COMPLETE, OpState::Committed { .. }) => {
                        self.complete_here(index)
                    }
                    (resolve_step::ABORT, OpState::Waiting | OpState::Prepared) => {
                        self.undo_prepare(index);
                        self.release_operation(index);
                    }
                    // Done here already.
                    _ => {}
                }
            }
        }
        let failed = self.node_failures.failed();
        let alive = |node: &&signal::NodeId| !failed.contains(**node);
        let next = if request.step == resolve_step::ABORT {
            chain[position + 1..].iter().find(alive)
        } else {
            chain[..position].iter().rev().find(alive)
        };
        match next {
            Some(&node) => {
                let next = BlockRef::new(node, BlockKind::Ldm, self.address.instance);
                send(ctx, self.address, next, request);
            }
            None => send(
                ctx,
                self.address,
                request.reply_to,
                ResolveConf {
                    tc: request.tc,
                    tc_op: request.tc_op,
                    transaction_id: request.transaction_id,
                    step: request.step,
                },
            ),
        }
    }
}
