//! DROP TABLE (NDB's DROP_TAB): take a table off every block of every data
//! node. Runs on the master dict only.
//!
//! ```text
//!  API       master dict       every tc          every ldm        other dicts
//!   |-DropTabReq-->|  (table invisible here)           |                 |
//!   |              |-- DropTabOrd ---->|  refuse new operations          |
//!   |              |<-- DropTabRep ----|               |                 |
//!   |              |  (every tc answered)              |                 |
//!   |              |-- DropTabOrd ------------------->|                 |
//!   |              |<-- DropTabRep{busy: true} -------|  operations in flight
//!   |              |   ... 10 ms later ...             |                 |
//!   |              |-- DropTabOrd ------------------->|                 |
//!   |              |<-- DropTabRep{busy: false} ------|  partitions freed
//!   |              |-- DropTabOrd ------------------------------------->|  forget it,
//!   |              |                                                    |  version + 1,
//!   |              |                                                    |  schema file written
//!   |              |<-- DropTabRep{busy: false} ------------------------|
//!   |              |  (table removed, schema version + 1,
//!   |              |   schema file written)
//!   |<-DropTabConf-|
//! ```
//!
//! The tcs go first so that no new operation reaches an ldm once the ldms
//! are asked; an ldm still finishing operations on the table says busy and
//! is asked again until it is done. A tc saying busy is asked again the
//! same way. The other dicts go last: until then they still hand out the
//! definition, and an operation routed with it is refused by the tc.
//! As for a create, every dict writes its schema file before it confirms,
//! the master last, so a drop confirmed to the client survives a restart.

use crate::persistence::AfterSave;
use crate::requests::{DropStep, Operation};
use crate::tables::TableState;
use crate::Dict;
use kernel::faults::FaultPoint;
use kernel::Context;
use signal::signals::{DropTabOrd, DropTabRep};
use signal::{BlockKind, BlockRef, Envelope, ErrorCode};

/// How long a block that is busy with the table gets before it is asked
/// again.
pub const DROP_RETRY_DELAY_MS: u64 = 10;

impl Dict {
    /// Starts dropping the table named `name`.
    pub(crate) fn start_drop(
        &mut self,
        requester: BlockRef,
        request_id: u32,
        name: &str,
        ctx: &mut dyn Context,
    ) {
        let Some(entry) = self.tables.by_name(name) else {
            return self.refuse(requester, request_id, ErrorCode::UnknownTable, ctx);
        };
        let table_id = entry.definition.id;
        // Operations run one at a time, so no other is half-way through.
        self.tables
            .change_state(table_id, TableState::Online, TableState::Dropping);
        self.running = Some(Operation::Drop {
            requester,
            request_id,
            table_id,
            step: DropStep::Coordinators,
        });
        self.tcs.start_round();
        for &tc in self.tcs.members() {
            kernel::send(ctx, self.address, tc, DropTabOrd { table_id });
        }
    }

    /// A tc, ldm or dict answered a `DropTabOrd`.
    pub(crate) fn drop_table_report(
        &mut self,
        from: BlockRef,
        report: DropTabRep,
        ctx: &mut dyn Context,
    ) {
        let Some(Operation::Drop { table_id, step, .. }) = &mut self.running else {
            panic!(
                "dict {}: DropTabRep from {from} while no drop runs",
                self.address
            );
        };
        assert_eq!(
            report.table_id, *table_id,
            "DropTabRep from {from} for another table than the one being dropped"
        );
        let table_id = *table_id;
        let answers = match (*step, from.kind) {
            (DropStep::Coordinators, BlockKind::Tc) => &mut self.tcs,
            (DropStep::DataManagers, BlockKind::Ldm) => &mut self.ldms,
            (DropStep::Dictionaries, BlockKind::Dict) => &mut self.dicts,
            (step, _) => panic!(
                "dict {}: DropTabRep from {from} while the drop waits on {step:?}",
                self.address
            ),
        };
        if report.busy {
            let again = Envelope {
                from: self.address,
                to: from,
                signal: DropTabOrd { table_id }.into(),
            };
            ctx.send_delayed(again, DROP_RETRY_DELAY_MS);
            return;
        }
        if answers.record(from, "DropTabRep") {
            self.drop_step_answered(ctx);
        }
    }

    /// Every block of the step answered (or failed): the next step.
    pub(crate) fn drop_step_answered(&mut self, ctx: &mut dyn Context) {
        let Some(Operation::Drop { table_id, step, .. }) = &mut self.running else {
            unreachable!("drop_step_answered runs within a drop");
        };
        let table_id = *table_id;
        let next = match *step {
            DropStep::Coordinators => Some((DropStep::DataManagers, &mut self.ldms)),
            DropStep::DataManagers if !self.dicts.members().is_empty() => {
                Some((DropStep::Dictionaries, &mut self.dicts))
            }
            DropStep::DataManagers | DropStep::Dictionaries => None,
            DropStep::Saving => unreachable!("no DropTabRep is accepted while saving"),
        };
        if let Some((next_step, blocks)) = next {
            if next_step == DropStep::DataManagers {
                ctx.fault_point(FaultPoint::DropAfterCoordinators);
            }
            *step = next_step;
            blocks.start_round();
            if next_step == DropStep::Dictionaries {
                // Highest node first, as a create announces.
                for &dict in blocks.members().iter().rev() {
                    kernel::send(ctx, self.address, dict, DropTabOrd { table_id });
                    ctx.fault_point(FaultPoint::DropAfterFirstDictionary);
                }
                return;
            }
            for &block in blocks.members() {
                kernel::send(ctx, self.address, block, DropTabOrd { table_id });
            }
            return;
        }
        *step = DropStep::Saving;
        self.tables.remove(table_id);
        self.bump_schema_version(ctx);
        // The client hears once the schema file no longer holds the table
        // (`Dict::operation_saved`).
        self.save_schema(AfterSave::AnswerClient, ctx);
    }
}
