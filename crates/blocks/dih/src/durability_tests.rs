//! Tests of the master's durability rounds (`durability.rs`): a round end
//! to end (GcpFlushReq to every tc, GcpSaveReq to every ldm, CopyGciReq to
//! every dih, GcpDurableRep to every tc; each step only once every answer
//! of the previous one is in), with and without a system file; the newest
//! GCI waiting for a round replacing an older one; the high part held at
//! most one above what every system file records as started while a round
//! is stuck; a non-master recording each copy before confirming it; the
//! answers out of place that stop the node; and a round held at flushing
//! until a failed node's transactions are taken over.

use crate::restart_tests::{
    copied, initial_start_with_a_system_file, not_found, render, two_node_dih, update_steps, Disk,
};
use crate::tests::{
    after_switch, dih_of, ldm_of, ldms_of, lines_to, membership_of, run_durability_round,
    start_master, switch, tc_of, tcs_of, EPOCH_MS, GCP_MS,
};
use crate::Dih;
use kernel::testing::{deliver, line, RecordingContext};
use kernel::Report;
use signal::signals::{
    CopyGciConf, CopyGciReq, GcpCompleteRep, GcpDurableRep, GcpFlushConf, GcpFlushReq, GcpSaveConf,
    GcpSaveReq, NodeFailConf, NodeFailRep, RestartGciOrd, RestoreConf, RestoredRep, StartPhaseConf,
    StartPhaseReq, TakeoverCompleteRep,
};
use signal::{BlockKind, BlockRef, Gci, NodeId, NodeSet};
use storage::system_file::{Slot, SystemFile};

const NODES: [u16; 2] = [1, 2];

fn master() -> BlockRef {
    dih_of(1)
}

/// A started diskless master of nodes 1 and 2.
fn started_master() -> (Dih, RecordingContext) {
    let mut dih = two_node_dih(1, true);
    let mut ctx = RecordingContext::new();
    start_master(&mut dih, &mut ctx, &NODES);
    (dih, ctx)
}

/// Switches once per epoch for ticks `ticks` (ctx time = tick x epoch),
/// checking each switch's trace; returns the last GCI.
fn switch_through(
    dih: &mut Dih,
    ctx: &mut RecordingContext,
    ticks: std::ops::RangeInclusive<u64>,
) -> Gci {
    let mut previous = dih.latest_gci();
    for tick in ticks {
        ctx.now_ms = tick * EPOCH_MS;
        let (gci, trace) = switch(dih, ctx, &NODES);
        assert_eq!(
            trace,
            after_switch(&NODES, previous, gci),
            "at {} ms",
            ctx.now_ms
        );
        previous = gci;
    }
    previous
}

#[test]
fn golden_trace_of_a_durability_round_at_the_master_of_two_nodes() {
    let (mut dih, mut ctx) = started_master();
    let me = master();
    let (tcs, ldms) = (tcs_of(&NODES), ldms_of(&NODES));
    assert_eq!(
        ldms,
        [ldm_of(1, 0), ldm_of(1, 1), ldm_of(2, 0), ldm_of(2, 1)],
        "every ldm of every node"
    );

    // Epochs of global checkpoint 1 close nothing.
    assert_eq!(
        switch_through(&mut dih, &mut ctx, 1..=19),
        Gci::from_parts(1, 19)
    );
    // The switch to 2/0 closes global checkpoint 1: its last GCI, 1/19,
    // is flushed by every tc of every node.
    ctx.now_ms = GCP_MS;
    let (gci, trace) = switch(&mut dih, &mut ctx, &NODES);
    let g = Gci::from_parts(1, 19);
    assert_eq!(gci, Gci::from_parts(2, 0));
    assert_eq!(
        trace,
        [
            vec![
                line(me, dih_of(2), GcpCompleteRep { gci }),
                kernel::testing::delayed_line(me, me, crate::tests::timer(), EPOCH_MS),
            ],
            lines_to(me, &tcs, || GcpFlushReq { gci: g }),
        ]
        .concat()
    );

    // Flush: every tc must answer; epochs go on meanwhile.
    for &tc in &tcs[..3] {
        deliver(&mut dih, &mut ctx, tc, GcpFlushConf { gci: g });
    }
    assert!(ctx.take_trace().is_empty(), "tc 2#1 has not flushed");
    assert_eq!(
        switch_through(&mut dih, &mut ctx, 21..=21),
        Gci::from_parts(2, 1)
    );
    deliver(&mut dih, &mut ctx, tcs[3], GcpFlushConf { gci: g });
    assert_eq!(
        ctx.take_trace(),
        lines_to(me, &ldms, || GcpSaveReq { gci: g })
    );

    // Save: every ldm of every node.
    for &ldm in ldms.iter().rev().take(3) {
        deliver(&mut dih, &mut ctx, ldm, GcpSaveConf { gci: g });
    }
    assert!(ctx.take_trace().is_empty(), "ldm 1#0 has not saved");
    assert_eq!(
        switch_through(&mut dih, &mut ctx, 22..=22),
        Gci::from_parts(2, 2)
    );
    deliver(&mut dih, &mut ctx, ldms[0], GcpSaveConf { gci: g });
    // Copy: every dih, itself included, records g complete and the latest
    // GCI (2/2 by now) started.
    let copy = || CopyGciReq {
        complete_gci: g,
        started_gci: Gci::from_parts(2, 2),
    };
    assert_eq!(ctx.take_trace(), lines_to(me, &[me, dih_of(2)], copy));
    deliver(
        &mut dih,
        &mut ctx,
        dih_of(2),
        CopyGciConf { complete_gci: g },
    );
    assert!(ctx.take_trace().is_empty(), "the master has not copied");
    deliver(&mut dih, &mut ctx, me, copy());
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, me, CopyGciConf { complete_gci: g })]
    );
    assert_eq!(ctx.take_reports(), vec![Report::CompleteGci(g)]);
    assert_eq!(dih.complete_gci(), g);
    deliver(&mut dih, &mut ctx, me, CopyGciConf { complete_gci: g });
    // Durable: every tc of every node answers the clients waiting for g.
    assert_eq!(
        ctx.take_trace(),
        lines_to(me, &tcs, || GcpDurableRep { gci: g })
    );

    // 2 is recorded started everywhere: at 4000 ms the high part advances
    // again, and global checkpoint 2's round begins.
    assert_eq!(
        switch_through(&mut dih, &mut ctx, 23..=39),
        Gci::from_parts(2, 19)
    );
    ctx.now_ms = 2 * GCP_MS;
    let (gci, trace) = switch(&mut dih, &mut ctx, &NODES);
    assert_eq!(gci, Gci::from_parts(3, 0));
    assert_eq!(trace, after_switch(&NODES, Gci::from_parts(2, 19), gci));
    run_durability_round(
        &mut dih,
        &mut ctx,
        &NODES,
        Gci::from_parts(2, 19),
        Gci::from_parts(3, 0),
    );
}

#[test]
fn with_a_system_file_the_copy_conf_waits_for_both_fsynced_copies() {
    let mut dih = two_node_dih(1, false);
    let mut ctx = RecordingContext::new();
    let mut disk = Disk::default();
    initial_start_with_a_system_file(&mut dih, &mut ctx, &mut disk);
    let me = master();
    let (tcs, ldms) = (tcs_of(&NODES), ldms_of(&NODES));
    assert_eq!(
        switch_through(&mut dih, &mut ctx, 1..=20),
        Gci::from_parts(2, 0)
    );
    let g = Gci::from_parts(1, 19);
    for &tc in &tcs {
        deliver(&mut dih, &mut ctx, tc, GcpFlushConf { gci: g });
    }
    for &ldm in &ldms {
        deliver(&mut dih, &mut ctx, ldm, GcpSaveConf { gci: g });
    }
    let started = Gci::from_parts(2, 0);
    let copy = || CopyGciReq {
        complete_gci: g,
        started_gci: started,
    };
    assert_eq!(
        ctx.take_trace(),
        [
            lines_to(me, &ldms, || GcpSaveReq { gci: g }),
            lines_to(me, &[me, dih_of(2)], copy),
        ]
        .concat()
    );
    deliver(&mut dih, &mut ctx, me, copy());
    let requests = ctx.take_fs_requests();
    // The start recorded sequence 2; this update is 3.
    assert_eq!(
        requests.iter().map(render).collect::<Vec<_>>(),
        update_steps(1, false, Slot::A, 3, copied(1, 1, g, started))
    );
    assert!(ctx.take_trace().is_empty(), "not durable yet");
    assert!(ctx.take_reports().is_empty(), "not complete yet");
    deliver(
        &mut dih,
        &mut ctx,
        dih_of(2),
        CopyGciConf { complete_gci: g },
    );
    assert!(ctx.take_trace().is_empty());
    disk.answer(&mut dih, &mut ctx, requests);
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, me, CopyGciConf { complete_gci: g })]
    );
    assert_eq!(ctx.take_reports(), vec![Report::CompleteGci(g)]);
    deliver(&mut dih, &mut ctx, me, CopyGciConf { complete_gci: g });
    assert_eq!(
        ctx.take_trace(),
        lines_to(me, &tcs, || GcpDurableRep { gci: g })
    );
    assert_eq!(
        disk.bytes,
        crate::restart_tests::file_bytes(copied(1, 1, g, started), 3)
    );
}

/// Only the white box reaches this: a switch may advance the high part
/// (the only thing that asks for a round) only when every system file
/// records the current high part started, which a running round has not
/// done yet; so through signals a second request never meets a running
/// round (see the stuck-round test). The rule still holds when called.
#[test]
fn a_newer_gci_waiting_for_its_round_replaces_an_older_one() {
    let (mut dih, mut ctx) = started_master();
    let me = master();
    let (tcs, ldms) = (tcs_of(&NODES), ldms_of(&NODES));
    let (first, older, newer) = (
        Gci::from_parts(1, 5),
        Gci::from_parts(1, 7),
        Gci::from_parts(1, 9),
    );
    dih.request_durable(first, &mut ctx);
    assert_eq!(
        ctx.take_trace(),
        lines_to(me, &tcs, || GcpFlushReq { gci: first })
    );
    dih.request_durable(older, &mut ctx);
    dih.request_durable(newer, &mut ctx);
    assert!(ctx.take_trace().is_empty(), "one round at a time");

    for &tc in &tcs {
        deliver(&mut dih, &mut ctx, tc, GcpFlushConf { gci: first });
    }
    assert_eq!(
        ctx.take_trace(),
        lines_to(me, &ldms, || GcpSaveReq { gci: first })
    );
    for &ldm in &ldms {
        deliver(&mut dih, &mut ctx, ldm, GcpSaveConf { gci: first });
    }
    let copy = || CopyGciReq {
        complete_gci: first,
        started_gci: crate::INITIAL_GCI,
    };
    assert_eq!(ctx.take_trace(), lines_to(me, &[me, dih_of(2)], copy));
    deliver(&mut dih, &mut ctx, me, copy());
    ctx.sent.clear();
    ctx.reports.clear();
    for dih_block in [me, dih_of(2)] {
        deliver(
            &mut dih,
            &mut ctx,
            dih_block,
            CopyGciConf {
                complete_gci: first,
            },
        );
    }
    // The first round ends; the next one is for the newest GCI only.
    assert_eq!(
        ctx.take_trace(),
        [
            lines_to(me, &tcs, || GcpDurableRep { gci: first }),
            lines_to(me, &tcs, || GcpFlushReq { gci: newer }),
        ]
        .concat()
    );
    run_durability_round(&mut dih, &mut ctx, &NODES, newer, crate::INITIAL_GCI);
    assert!(ctx.take_trace().is_empty(), "no round for {older}");

    // A GCI already complete needs no round.
    dih.request_durable(older, &mut ctx);
    assert!(ctx.take_trace().is_empty());
}

#[test]
fn the_high_part_stays_within_one_of_the_recorded_started_high_while_a_round_is_stuck() {
    let (mut dih, mut ctx) = started_master();
    let me = master();
    let (tcs, ldms) = (tcs_of(&NODES), ldms_of(&NODES));
    // 1 is recorded started (phase 6): the high part may reach 2.
    assert_eq!(
        switch_through(&mut dih, &mut ctx, 1..=20),
        Gci::from_parts(2, 0)
    );
    let g = Gci::from_parts(1, 19);

    // The round hangs in its flush: for 6 more gcp intervals, every switch
    // only advances the epoch (and asks for no new round).
    let last = switch_through(&mut dih, &mut ctx, 21..=140);
    assert_eq!(last, Gci::from_parts(2, 120));
    // The flush and save finish; the copy waits for dih 2.
    for &tc in &tcs {
        deliver(&mut dih, &mut ctx, tc, GcpFlushConf { gci: g });
    }
    for &ldm in &ldms {
        deliver(&mut dih, &mut ctx, ldm, GcpSaveConf { gci: g });
    }
    let copy = || CopyGciReq {
        complete_gci: g,
        started_gci: last,
    };
    assert_eq!(
        ctx.take_trace(),
        [
            lines_to(me, &ldms, || GcpSaveReq { gci: g }),
            lines_to(me, &[me, dih_of(2)], copy),
        ]
        .concat()
    );
    deliver(&mut dih, &mut ctx, me, copy());
    deliver(&mut dih, &mut ctx, me, CopyGciConf { complete_gci: g });
    ctx.sent.clear();
    assert_eq!(ctx.take_reports(), vec![Report::CompleteGci(g)]);
    // Recorded here, not yet at node 2: still no new high part.
    assert_eq!(
        switch_through(&mut dih, &mut ctx, 141..=141),
        Gci::from_parts(2, 121)
    );
    deliver(
        &mut dih,
        &mut ctx,
        dih_of(2),
        CopyGciConf { complete_gci: g },
    );
    assert_eq!(
        ctx.take_trace(),
        lines_to(me, &tcs, || GcpDurableRep { gci: g })
    );

    // Every file records 2 started: the next switch advances the high
    // part at once (the interval passed long ago) and closes 2/121.
    ctx.now_ms = 142 * EPOCH_MS;
    let (gci, trace) = switch(&mut dih, &mut ctx, &NODES);
    assert_eq!(gci, Gci::from_parts(3, 0));
    assert_eq!(trace, after_switch(&NODES, Gci::from_parts(2, 121), gci));
    // The round of 2/121 hangs too: 3 is one above the recorded 2, so the
    // high part stays at 3 however long it hangs.
    let last = switch_through(&mut dih, &mut ctx, 143..=200);
    assert_eq!(
        last,
        Gci::from_parts(3, 58),
        "at most one above the recorded 2"
    );
}

#[test]
fn a_non_master_with_a_system_file_records_each_copy_before_confirming_it() {
    let mut dih = two_node_dih(2, false);
    let mut ctx = RecordingContext::new();
    let mut disk = Disk::default();
    let (me, master, membership) = (dih_of(2), master(), membership_of(2));
    let io = BlockRef::new(signal::NodeId(2), BlockKind::Io, 0);
    deliver(&mut dih, &mut ctx, membership, StartPhaseReq { phase: 1 });
    assert_eq!(ctx.take_fs_requests().len(), 1, "the read");
    deliver(&mut dih, &mut ctx, io, not_found());
    deliver(&mut dih, &mut ctx, membership, StartPhaseReq { phase: 2 });
    let order = RestartGciOrd {
        restored_gci: Gci(0),
        stale: NodeSet::EMPTY,
    };
    deliver(&mut dih, &mut ctx, master, order);
    deliver(&mut dih, &mut ctx, membership, StartPhaseReq { phase: 3 });
    deliver(&mut dih, &mut ctx, membership, StartPhaseReq { phase: 4 });
    for instance in 0..2 {
        let conf = RestoreConf {
            highest_gci: Gci(0),
            replayed: 0,
        };
        deliver(&mut dih, &mut ctx, ldm_of(2, instance), conf);
    }
    let requests = ctx.take_fs_requests();
    assert_eq!(
        requests.iter().map(render).collect::<Vec<_>>(),
        update_steps(2, true, Slot::A, 1, SystemFile::initial(2))
    );
    ctx.sent.clear();
    disk.answer(&mut dih, &mut ctx, requests);
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(
                me,
                master,
                RestoredRep {
                    highest_gci: Gci(0)
                }
            ),
            line(me, membership, StartPhaseConf { phase: 4 }),
        ]
    );
    ctx.reports.clear();

    // The master's copies: each written, then confirmed.
    let initial = crate::INITIAL_GCI;
    let g = Gci::from_parts(1, 19);
    for (sequence, complete, started) in [(2, Gci(0), initial), (3, g, Gci::from_parts(2, 0))] {
        let copy = CopyGciReq {
            complete_gci: complete,
            started_gci: started,
        };
        deliver(&mut dih, &mut ctx, master, copy);
        let requests = ctx.take_fs_requests();
        assert_eq!(
            requests.iter().map(render).collect::<Vec<_>>(),
            update_steps(2, false, Slot::A, sequence, copied(2, 1, complete, started))
        );
        assert!(ctx.take_trace().is_empty(), "the conf waits for the file");
        disk.answer(&mut dih, &mut ctx, requests);
        assert_eq!(
            ctx.take_trace(),
            vec![line(
                me,
                master,
                CopyGciConf {
                    complete_gci: complete
                }
            )]
        );
    }
    assert_eq!(ctx.take_reports(), vec![Report::CompleteGci(g)]);
    assert_eq!(dih.complete_gci(), g);
    assert_eq!(
        disk.bytes,
        crate::restart_tests::file_bytes(copied(2, 1, g, Gci::from_parts(2, 0)), 3)
    );
}

#[test]
#[should_panic(expected = "while the previous one is being written")]
fn a_second_copy_request_while_one_is_written_stops_the_node() {
    let mut dih = two_node_dih(2, false);
    let mut ctx = RecordingContext::new();
    let io = BlockRef::new(signal::NodeId(2), BlockKind::Io, 0);
    deliver(
        &mut dih,
        &mut ctx,
        membership_of(2),
        StartPhaseReq { phase: 1 },
    );
    deliver(&mut dih, &mut ctx, io, not_found());
    let copy = || CopyGciReq {
        complete_gci: Gci(0),
        started_gci: crate::INITIAL_GCI,
    };
    deliver(&mut dih, &mut ctx, master(), copy());
    deliver(&mut dih, &mut ctx, master(), copy());
}

#[test]
#[should_panic(expected = "but 1:dih#0 is the master")]
fn a_copy_request_from_a_dih_that_is_not_the_master_stops_the_node() {
    let mut dih = two_node_dih(1, true);
    let mut ctx = RecordingContext::new();
    let copy = CopyGciReq {
        complete_gci: Gci(0),
        started_gci: crate::INITIAL_GCI,
    };
    deliver(&mut dih, &mut ctx, dih_of(2), copy);
}

#[test]
#[should_panic(expected = "GcpSaveConf 1/19 from 1:ldm#0 outside its round")]
fn a_save_conf_before_every_tc_flushed_stops_the_node() {
    let (mut dih, mut ctx) = started_master();
    switch_through(&mut dih, &mut ctx, 1..=20);
    let g = Gci::from_parts(1, 19);
    deliver(
        &mut dih,
        &mut ctx,
        tcs_of(&NODES)[0],
        GcpFlushConf { gci: g },
    );
    deliver(&mut dih, &mut ctx, ldm_of(1, 0), GcpSaveConf { gci: g });
}

#[test]
#[should_panic(expected = "outside its round")]
fn a_flush_conf_for_another_gci_stops_the_node() {
    let (mut dih, mut ctx) = started_master();
    switch_through(&mut dih, &mut ctx, 1..=20);
    let wrong = Gci::from_parts(1, 18);
    deliver(
        &mut dih,
        &mut ctx,
        tcs_of(&NODES)[0],
        GcpFlushConf { gci: wrong },
    );
}

#[test]
#[should_panic(expected = "while no copy runs")]
fn a_copy_conf_with_no_copy_running_stops_the_node() {
    let (mut dih, mut ctx) = started_master();
    deliver(
        &mut dih,
        &mut ctx,
        dih_of(2),
        CopyGciConf {
            complete_gci: Gci(0),
        },
    );
}

#[test]
#[should_panic(expected = "twice in one round")]
fn a_second_flush_conf_from_one_tc_stops_the_node() {
    let (mut dih, mut ctx) = started_master();
    switch_through(&mut dih, &mut ctx, 1..=20);
    let g = Gci::from_parts(1, 19);
    let tc = tcs_of(&NODES)[2];
    deliver(&mut dih, &mut ctx, tc, GcpFlushConf { gci: g });
    deliver(&mut dih, &mut ctx, tc, GcpFlushConf { gci: g });
}

/// Node 2 fails while its tcs may have been committing: the master's
/// round gets past flushing only once the take-over of node 2's
/// transactions reports complete, for the membership that left node 2
/// out (a report of an earlier one, from a take-over started again since,
/// holds on).
#[test]
fn a_round_waits_at_flushing_for_the_takeover_of_a_failed_nodes_transactions() {
    let (mut dih, mut ctx) = started_master();
    let me = master();
    let gci = Gci::from_parts(1, 5);
    deliver(
        &mut dih,
        &mut ctx,
        membership_of(1),
        NodeFailRep {
            membership_id: 3,
            live: NodeSet::of([NodeId(1)]),
            failed: NodeSet::of([NodeId(2)]),
            president: NodeId(1),
            starting: NodeSet::EMPTY,
            returned: NodeSet::EMPTY,
        },
    );
    assert_eq!(
        ctx.take_trace(),
        [line(
            me,
            membership_of(1),
            NodeFailConf { membership_id: 3 }
        )]
    );
    dih.request_durable(gci, &mut ctx);
    let (tcs, ldms) = (tcs_of(&[1]), ldms_of(&[1]));
    assert_eq!(ctx.take_trace(), lines_to(me, &tcs, || GcpFlushReq { gci }));
    for &tc in &tcs {
        deliver(&mut dih, &mut ctx, tc, GcpFlushConf { gci });
    }
    assert!(
        ctx.take_trace().is_empty(),
        "no marker is saved while the take-over runs"
    );
    let report = |membership_id| TakeoverCompleteRep {
        membership_id,
        committed: 1,
        aborted: 2,
    };
    deliver(&mut dih, &mut ctx, tc_of(1, 0), report(2));
    assert!(ctx.take_trace().is_empty(), "an earlier take-over holds on");
    deliver(&mut dih, &mut ctx, tc_of(1, 0), report(3));
    assert_eq!(ctx.take_trace(), lines_to(me, &ldms, || GcpSaveReq { gci }));
}
