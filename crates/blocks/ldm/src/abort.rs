//! ABORT along the replica chain, and undoing a prepare: the operation's
//! reserved var slot is returned and it leaves the row's lock queue (an
//! inserted row it alone held is freed). The row itself was never changed
//! (docs/design/transactions.md §6).

use crate::operation::{OpState, NIL};
use crate::{layout_and_partition, Ldm};
use kernel::{send, Context, Report};
use signal::signals::{AbortConf, AbortReq};
use signal::{BlockKind, BlockRef};

impl Ldm {
    /// Drops a prepared or waiting operation: its reserved var slot, its
    /// place in the lock queue (an inserted row it alone held is freed).
    pub(crate) fn undo_prepare(&mut self, index: u32) {
        let operation = &self.operations[index];
        let (new_var, index_nodes) = (operation.new_var, operation.index_nodes);
        if new_var != NIL || index_nodes > 0 {
            let Ldm {
                memory,
                operations,
                tables,
                ..
            } = self;
            let operation = &mut operations[index];
            (operation.new_var, operation.index_nodes) = (NIL, 0);
            let (_, partition) = layout_and_partition(tables, operation);
            if new_var != NIL {
                partition.free_var(memory, new_var);
            }
            partition.release_index_promise(memory, index_nodes);
        }
        self.release_from_row(index);
    }

    /// ABORT, from the tc at the primary (the first replica alive, after a
    /// failure) or from the previous replica: undo
    /// the operation here; if it had been passed on, pass the abort on too
    /// (it follows the prepare on the same link, so it never overtakes it);
    /// otherwise this is the end of the chain and the tc hears ABORTCONF.
    pub(crate) fn abort(&mut self, from: BlockRef, request: AbortReq, ctx: &mut dyn Context) {
        let mut next = None;
        if let Some(index) = self.operations.find_by_tc(request.tc, request.tc_op) {
            let operation = &self.operations[index];
            if operation.transaction_id != request.transaction_id {
                // A peer's word: drop it, and keep the record for its own
                // transaction.
                ctx.report(Report::Log(format!(
                    "ldm {}: ignored ABORT from {from} of operation {} of {}: it names                      transaction {:?}, the record belongs to {:?}",
                    self.address,
                    request.tc_op,
                    request.tc,
                    request.transaction_id,
                    operation.transaction_id
                )));
                return;
            }
            match operation.state {
                OpState::Waiting | OpState::Prepared => {
                    if operation.forwarded {
                        // The next replica alive: one that failed gets
                        // nothing more, and the one after it refuses what
                        // the failed one may still have sent it.
                        let failed = self.node_failures.failed();
                        let later = &operation.chain.as_slice()[operation.position as usize + 1..];
                        next = later
                            .iter()
                            .find(|&&node| !failed.contains(node))
                            .map(|&node| {
                                BlockRef::new(node, BlockKind::Ldm, self.address.instance)
                            });
                    }
                    self.undo_prepare(index);
                    self.release_operation(index);
                }
                OpState::Committed { .. } => {
                    // Never sent by a tc that works (commit is decided
                    // once); a committed operation stays committed.
                    ctx.report(Report::Log(format!(
                        "ldm {}: ignored ABORT from {from} of operation {} of {}: it is                          committed here",
                        self.address, request.tc_op, request.tc
                    )));
                    return;
                }
                OpState::Free => unreachable!("find_by_tc returns only live records"),
            }
        }
        match next {
            Some(next) => send(ctx, self.address, next, request),
            None => send(
                ctx,
                self.address,
                request.tc,
                AbortConf {
                    tc_op: request.tc_op,
                },
            ),
        }
    }
}
