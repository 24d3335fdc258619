//! The primary's side of a node restart's copy (`copy.rs`): a walk that
//! waits long for a row some operation holds says which operation, once,
//! and goes on when the operation commits.

use crate::tests::{int, txn, Bench, LDM, NODE, V};
use kernel::Report;
use signal::signals::{CopyFragReq, LockMode, NodeFailRep, OperationKind};
use signal::{BlockKind, BlockRef, Gci, NodeId, NodeSet};

const RESTARTING: NodeId = NodeId(3);

#[test]
fn a_copy_that_waits_long_for_a_held_row_names_the_operation_holding_it() {
    let mut bench = Bench::new();
    let (op, _) = bench.prepare(
        txn(7),
        OperationKind::Insert,
        LockMode::Exclusive,
        1,
        Some(&[(V, Some(&int(10)))]),
    );
    bench.trace();
    // Node 3 restarts: a starting member.
    let membership = BlockRef::new(NODE, BlockKind::Membership, 0);
    bench.deliver(
        membership,
        NodeFailRep {
            membership_id: 2,
            live: NodeSet::of([NODE, RESTARTING]),
            failed: NodeSet::EMPTY,
            president: NODE,
            starting: NodeSet::of([RESTARTING]),
            returned: NodeSet::EMPTY,
        },
    );
    bench.trace();
    let (partition, _) = bench.route(1);
    let restarting_ldm = BlockRef::new(RESTARTING, BlockKind::Ldm, 0);
    bench.deliver(
        restarting_ldm,
        CopyFragReq {
            table_id: crate::tests::TABLE_ID,
            partition,
            since_gci: Gci(0),
        },
    );
    bench.ctx.take_reports();
    // The walk meets the insert's row and waits, looking again each ms.
    let retry = || signal::signals::ContinueB {
        job: crate::copy::job::SEND,
    };
    for now in [1, 5_000, 9_999] {
        bench.ctx.now_ms = now;
        bench.deliver(LDM, retry());
    }
    assert!(bench.ctx.take_reports().is_empty());
    assert!(!bench
        .trace()
        .iter()
        .any(|line| line.contains("CopyRowsReq")));
    // Ten seconds on the same row: logged once, with the operation.
    for now in [10_001, 10_002, 20_000] {
        bench.ctx.now_ms = now;
        bench.deliver(LDM, retry());
    }
    let reports = bench.ctx.take_reports();
    assert!(
        matches!(&reports[..], [Report::Log(line)]
            if line.contains(&format!("the copy of table {} partition {partition} to {restarting_ldm} has waited", crate::tests::TABLE_ID))
                && line.contains("Prepared Insert")
                && line.contains(&format!("{:?}", txn(7)))),
        "{reports:?}"
    );
    // The insert commits: the walk goes on and the partition is sent.
    bench.trace();
    bench.commit(op, crate::tests::gci(5));
    bench.deliver(LDM, retry());
    let trace = bench.trace();
    assert!(
        trace.iter().any(|line| line.contains("CopyRowsReq")),
        "{trace:#?}"
    );
}
