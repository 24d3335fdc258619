//! Tests of dih's part of a start (`restart.rs`) and of its system file
//! (`system_file.rs`): golden traces of a 2-node master's initial start
//! and restart with a system file (the file operations too, decoded), the
//! restored GCI decision and the refusal, the start GCI one high part above
//! everything reported, a restart reading what an earlier run wrote, and
//! the damaged or foreign files that stop the node.
//!
//! The master is played against by hand: the other dih's reports are
//! delivered from `dih_of(2)`, the master's signals to itself are delivered
//! back, and file requests are answered with `FsConf`s from the node's io
//! block (`Disk` keeps the bytes written, so a later run can read them).

use crate::system_file::token;
use crate::tests::{config, dih_of, ldm_of, lines_to, membership_of, tcs_of, timer, EPOCH_MS};
use crate::{Dih, DihConfig};
use kernel::testing::{delayed_line, deliver, line, FsRequest, RecordingContext};
use kernel::{Context, Report};
use signal::fs::{FileName, FsDone, FsErrorKind, FsOperation, OpenMode};
use signal::signals::{
    CopyGciConf, CopyGciReq, FsConf, GcpCommit, GcpCommitConf, GcpCompleteRep, GcpDurableRep,
    RestartGciOrd, RestartGciRep, RestoreConf, RestoreReq, RestoredRep, StartPhaseConf,
    StartPhaseReq, SystemFileRep,
};
use signal::{BlockKind, BlockRef, Gci, NodeId, NodeSet};
use storage::system_file::{decode_slot, Slot, SystemFile, WritePlan, FILE_BYTES, SLOT_BYTES};

/// The system file (both copies live in it).
pub(crate) const SYSTEM: FileName = FileName::System { copy: 0 };
/// The restored GCI of a refused restart.
const REFUSED: Gci = Gci(u64::MAX);

/// The dih of `node` in a cluster of nodes 1 and 2 (one node group),
/// with or without a system file.
pub(crate) fn two_node_dih(node: u16, diskless: bool) -> Dih {
    Dih::new(DihConfig {
        address: dih_of(node),
        diskless,
        ..config(vec![(NodeId(1), 0), (NodeId(2), 0)], 2, 2)
    })
    .announced()
}

fn io_of(node: u16) -> BlockRef {
    BlockRef::new(NodeId(node), BlockKind::Io, 0)
}

/// One file request as a trace line: requester, token, operation; a
/// written copy is decoded (sequence and record), so the line shows what
/// the file will hold.
pub(crate) fn render(request: &FsRequest) -> String {
    let token = match request.token {
        token::READ => "read",
        token::UPDATE_STEP => "step",
        token::UPDATE_DONE => "done",
        other => panic!("unknown dih token {other}"),
    };
    let what = match &request.operation {
        FsOperation::Open { file, mode } => format!("open {file} {mode:?}"),
        FsOperation::Read { file, offset, len } => format!("read {file} at {offset}, {len} bytes"),
        FsOperation::Write { file, offset, data } => {
            assert_eq!(data.len(), SLOT_BYTES, "dih writes whole copies");
            let (record, sequence) =
                decode_slot(data.as_slice()).expect("dih writes only valid copies");
            format!("write {file} at {offset}: sequence {sequence}, {record:?}")
        }
        FsOperation::Sync { file } => format!("sync {file}"),
        other => panic!("dih asked for {}", other.name()),
    };
    format!("{} {token}: {what}", request.from)
}

/// The lines of the read at start.
pub(crate) fn read_step(node: u16) -> Vec<String> {
    vec![format!(
        "{} read: read {SYSTEM} at 0, {FILE_BYTES} bytes",
        dih_of(node)
    )]
}

/// The lines of one update: (create the file,) write `first`, fsync,
/// write the other copy, fsync; the last one answers with UPDATE_DONE.
pub(crate) fn update_steps(
    node: u16,
    create: bool,
    first: Slot,
    sequence: u64,
    record: SystemFile,
) -> Vec<String> {
    let dih = dih_of(node);
    let mut steps = Vec::new();
    if create {
        steps.push(format!("{dih} step: open {SYSTEM} {:?}", OpenMode::Create));
    }
    for slot in [first, first.other()] {
        steps.push(format!(
            "{dih} step: write {SYSTEM} at {}: sequence {sequence}, {record:?}",
            slot.file_offset()
        ));
        steps.push(format!("{dih} step: sync {SYSTEM}"));
    }
    let last = steps.pop().expect("an update has steps");
    steps.push(last.replace(" step: ", " done: "));
    steps
}

/// A node's data directory as far as its system file goes: the writes
/// dih asked for, applied in order (syncs are taken as done).
#[derive(Default)]
pub(crate) struct Disk {
    pub(crate) bytes: Vec<u8>,
}

impl Disk {
    /// Answers every request of `requests` (update steps) in order, as the
    /// io thread would, checking that dih sends nothing before the last.
    pub(crate) fn answer(
        &mut self,
        dih: &mut Dih,
        ctx: &mut RecordingContext,
        requests: Vec<FsRequest>,
    ) {
        let count = requests.len();
        for (index, request) in requests.into_iter().enumerate() {
            let io = io_of(request.from.node.0);
            let result = match request.operation {
                FsOperation::Open { file, .. } => {
                    assert_eq!(file, SYSTEM);
                    Ok(FsDone::Opened {
                        size: self.bytes.len() as u64,
                    })
                }
                FsOperation::Write { file, offset, data } => {
                    assert_eq!(file, SYSTEM);
                    let end = offset as usize + data.len();
                    if self.bytes.len() < end {
                        self.bytes.resize(end, 0);
                    }
                    self.bytes[offset as usize..end].copy_from_slice(data.as_slice());
                    Ok(FsDone::Written {
                        bytes: data.len() as u32,
                    })
                }
                FsOperation::Sync { file } => {
                    assert_eq!(file, SYSTEM);
                    Ok(FsDone::Synced)
                }
                other => panic!("unexpected request {}", other.name()),
            };
            let conf = FsConf {
                token: request.token,
                result,
            };
            deliver(dih, ctx, io, conf);
            if index + 1 < count {
                assert!(
                    ctx.sent.is_empty(),
                    "dih waits for the last step of the update"
                );
            }
        }
    }

    /// The answer to the read at start: the file's bytes.
    pub(crate) fn read_answer(&self, ctx: &RecordingContext) -> FsConf {
        FsConf {
            token: token::READ,
            result: Ok(FsDone::Read {
                data: ctx.pool().copy_from(&self.bytes).expect("pool has room"),
            }),
        }
    }
}

/// The file as an update with `sequence` leaves it (both copies equal).
pub(crate) fn file_bytes(record: SystemFile, sequence: u64) -> Vec<u8> {
    let copy = WritePlan {
        first: Slot::A,
        sequence,
    }
    .encode(&record);
    [copy, copy].concat()
}

/// The read's answer when there is no system file (initial start).
pub(crate) fn not_found() -> FsConf {
    let read = FsOperation::Read {
        file: SYSTEM,
        offset: 0,
        len: FILE_BYTES as u32,
    };
    FsConf {
        token: token::READ,
        result: Err(read.error(FsErrorKind::NotFound, "No such file or directory")),
    }
}

fn phase(phase: u8) -> StartPhaseReq {
    StartPhaseReq { phase }
}

pub(crate) fn record(node_id: u16, start_count: u32, complete: Gci, started: Gci) -> SystemFile {
    SystemFile {
        node_id,
        start_count,
        latest_complete_gci: complete.0,
        highest_started_gci: started.0,
        members: 0,
    }
}

/// What a COPY_GCI writes in a cluster of nodes 1 and 2 (both alive).
pub(crate) fn copied(node_id: u16, start_count: u32, complete: Gci, started: Gci) -> SystemFile {
    SystemFile {
        members: NodeSet::of([NodeId(1), NodeId(2)]).bits(),
        ..record(node_id, start_count, complete, started)
    }
}

fn restore_conf(highest_gci: Gci, replayed: u64) -> RestoreConf {
    RestoreConf {
        highest_gci,
        replayed,
    }
}

/// Phase INITIALISE at the master, with `answer` to its read.
fn initialise(dih: &mut Dih, ctx: &mut RecordingContext, answer: FsConf) {
    let (me, membership) = (dih_of(1), membership_of(1));
    deliver(dih, ctx, membership, phase(1));
    assert!(ctx.take_trace().is_empty(), "the conf waits for the read");
    let requests: Vec<String> = ctx.take_fs_requests().iter().map(render).collect();
    assert_eq!(requests, read_step(1));
    deliver(dih, ctx, io_of(1), answer);
    let trace = ctx.take_trace();
    assert_eq!(trace.len(), 2, "{trace:?}");
    assert!(
        trace[0].starts_with(&format!("{me} -> {membership} SystemFileRep")),
        "membership hears what the file records before the conf: {trace:?}"
    );
    assert_eq!(trace[1], line(me, membership, StartPhaseConf { phase: 1 }));
    assert!(ctx.take_fs_requests().is_empty());
}

/// What dih tells membership of a node without a system file.
fn no_system_file(node: u16) -> String {
    line(
        dih_of(node),
        membership_of(node),
        SystemFileRep {
            complete_gci: Gci(0),
            members: NodeSet::EMPTY,
        },
    )
}

/// Phase RESTART_GCI at the master: it reports `mine`, dih 2 reports
/// `theirs` (first), and the master orders `decision` to both dihs.
fn restart_gci(dih: &mut Dih, ctx: &mut RecordingContext, mine: Gci, theirs: Gci, decision: Gci) {
    restart_gci_leaving_out(dih, ctx, (mine, theirs), decision, NodeSet::EMPTY);
}

/// As `restart_gci`, the order naming `stale` stale.
fn restart_gci_leaving_out(
    dih: &mut Dih,
    ctx: &mut RecordingContext,
    (mine, theirs): (Gci, Gci),
    decision: Gci,
    stale: NodeSet,
) {
    let me = dih_of(1);
    deliver(dih, ctx, membership_of(1), phase(2));
    // The members its system file recorded with that GCI.
    let members = dih
        .system
        .record
        .and_then(|record| NodeSet::from_bits(record.members))
        .unwrap_or(NodeSet::EMPTY);
    let mine = || RestartGciRep {
        complete_gci: mine,
        members,
    };
    assert_eq!(ctx.take_trace(), vec![line(me, me, mine())]);
    let theirs = RestartGciRep {
        complete_gci: theirs,
        members: NodeSet::EMPTY,
    };
    deliver(dih, ctx, dih_of(2), theirs);
    assert!(
        ctx.take_trace().is_empty(),
        "the master's own report is missing"
    );
    deliver(dih, ctx, me, mine());
    let order = || RestartGciOrd {
        restored_gci: decision,
        stale,
    };
    assert_eq!(ctx.take_trace(), lines_to(me, &[me, dih_of(2)], order));
}

/// The master's RestartGciOrd to itself: the phase's conf.
fn restart_gci_ord(dih: &mut Dih, ctx: &mut RecordingContext, restored: Gci) {
    let me = dih_of(1);
    let order = RestartGciOrd {
        restored_gci: restored,
        stale: NodeSet::EMPTY,
    };
    deliver(dih, ctx, me, order);
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, membership_of(1), StartPhaseConf { phase: 2 })]
    );
    assert_eq!(ctx.take_reports(), vec![Report::RestoredGci(restored)]);
    deliver(dih, ctx, membership_of(1), phase(3));
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, membership_of(1), StartPhaseConf { phase: 3 })]
    );
}

/// Phase RESTORE_DATA up to the local ldms' confs (`confs` from ldm 0 and
/// 1): returns what dih asked of its system file.
fn restore_data(
    dih: &mut Dih,
    ctx: &mut RecordingContext,
    restored: Gci,
    confs: [RestoreConf; 2],
) -> Vec<FsRequest> {
    let me = dih_of(1);
    deliver(dih, ctx, membership_of(1), phase(4));
    let ldms = [ldm_of(1, 0), ldm_of(1, 1)];
    let restore = || RestoreReq {
        restored_gci: restored,
    };
    assert_eq!(ctx.take_trace(), lines_to(me, &ldms, restore));
    let count = confs[0].replayed + confs[1].replayed;
    for (ldm, conf) in ldms.into_iter().zip(confs) {
        deliver(dih, ctx, ldm, conf);
    }
    assert_eq!(
        ctx.take_reports(),
        vec![Report::Phase {
            name: "restore data (all ldm threads)",
            elapsed_ms: 0,
            count,
            unit: "row changes replayed",
        }]
    );
    ctx.take_fs_requests()
}

/// The master's and dih 2's RestoredRep (dih 2's first), then phases
/// RESTORE_DATA's and SCHEMA's confs.
fn restored(dih: &mut Dih, ctx: &mut RecordingContext, mine: Gci, theirs: Gci) {
    let (me, membership) = (dih_of(1), membership_of(1));
    let mine = || RestoredRep { highest_gci: mine };
    assert_eq!(ctx.take_trace(), vec![line(me, me, mine())]);
    let theirs = RestoredRep {
        highest_gci: theirs,
    };
    deliver(dih, ctx, dih_of(2), theirs);
    assert!(
        ctx.take_trace().is_empty(),
        "the master's own report is missing"
    );
    deliver(dih, ctx, me, mine());
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, membership, StartPhaseConf { phase: 4 })]
    );
    deliver(dih, ctx, membership, phase(5));
    assert_eq!(
        ctx.take_trace(),
        vec![line(me, membership, StartPhaseConf { phase: 5 })]
    );
}

/// Phase GLOBAL_CHECKPOINT at the master up to its CopyGciReqs, which must
/// carry `restored` and `start`; the master's own request is delivered and
/// what it asks of its file returned.
fn record_start(
    dih: &mut Dih,
    ctx: &mut RecordingContext,
    restored: Gci,
    start: Gci,
) -> Vec<FsRequest> {
    let me = dih_of(1);
    deliver(dih, ctx, membership_of(1), phase(6));
    let copy = || CopyGciReq {
        complete_gci: restored,
        started_gci: start,
    };
    assert_eq!(ctx.take_trace(), lines_to(me, &[me, dih_of(2)], copy));
    deliver(dih, ctx, me, copy());
    ctx.take_fs_requests()
}

/// After a restart's start copy: every node's copy reports the restored
/// GCI complete (once); anything else is wrong.
fn restored_gci_reports(ctx: &mut RecordingContext, restored: Gci) {
    let reports = ctx.take_reports();
    assert!(
        reports
            .iter()
            .all(|report| *report == Report::CompleteGci(restored)),
        "{reports:?}"
    );
}

/// The master's copy is written: its CopyGciConf to itself, dih 2's, and
/// the start GCI goes to every tc; then the tcs confirm and phase 6 ends.
fn commit_start(dih: &mut Dih, ctx: &mut RecordingContext, restored: Gci, start: Gci) {
    let (me, membership) = (dih_of(1), membership_of(1));
    let copied = || CopyGciConf {
        complete_gci: restored,
    };
    assert_eq!(ctx.take_trace(), vec![line(me, me, copied())]);
    deliver(dih, ctx, dih_of(2), copied());
    assert!(
        ctx.take_trace().is_empty(),
        "the master's copy conf is missing"
    );
    deliver(dih, ctx, me, copied());
    let tcs = tcs_of(&[1, 2]);
    // The restored GCI is complete: tcs answer clients waiting for GCIs of
    // the previous run; then the start GCI.
    let mut expected = Vec::new();
    if restored != Gci(0) {
        expected.extend(lines_to(me, &tcs, || GcpDurableRep { gci: restored }));
    }
    expected.extend(lines_to(me, &tcs, || GcpCommit { gci: start }));
    assert_eq!(ctx.take_trace(), expected);
    for &tc in &tcs {
        deliver(dih, ctx, tc, GcpCommitConf { gci: start });
    }
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(me, dih_of(2), GcpCompleteRep { gci: start }),
            line(me, membership, StartPhaseConf { phase: 6 }),
            delayed_line(me, me, timer(), EPOCH_MS),
        ]
    );
    assert_eq!(ctx.take_reports(), vec![Report::LatestGci(start)]);
    assert_eq!(dih.latest_gci(), start);
}

#[test]
fn golden_trace_of_a_diskless_start_of_a_two_node_master() {
    let mut dih = two_node_dih(1, true);
    let mut ctx = RecordingContext::new();
    let (me, membership) = (dih_of(1), membership_of(1));
    deliver(&mut dih, &mut ctx, membership, phase(1));
    assert_eq!(
        ctx.take_trace(),
        vec![
            no_system_file(1),
            line(me, membership, StartPhaseConf { phase: 1 })
        ]
    );
    assert!(ctx.take_fs_requests().is_empty(), "diskless: no file");
    restart_gci(&mut dih, &mut ctx, Gci(0), Gci(0), Gci(0));
    restart_gci_ord(&mut dih, &mut ctx, Gci(0));
    let requests = restore_data(
        &mut dih,
        &mut ctx,
        Gci(0),
        [restore_conf(Gci(0), 0), restore_conf(Gci(0), 0)],
    );
    assert!(requests.is_empty(), "diskless: nothing to record");
    restored(&mut dih, &mut ctx, Gci(0), Gci(0));
    // Nothing anywhere: the initial GCI.
    let start = crate::INITIAL_GCI;
    let requests = record_start(&mut dih, &mut ctx, Gci(0), start);
    assert!(requests.is_empty(), "diskless: copied at once");
    commit_start(&mut dih, &mut ctx, Gci(0), start);
    assert!(ctx.take_fs_requests().is_empty());
    assert_eq!(dih.complete_gci(), Gci(0));
}

/// The initial start of the master (node 1 of 2) with a system file, up
/// to the end of phase 6, every signal and file request checked; `disk`
/// ends up holding what dih wrote.
pub(crate) fn initial_start_with_a_system_file(
    dih: &mut Dih,
    ctx: &mut RecordingContext,
    disk: &mut Disk,
) {
    // No file: an initial start.
    initialise(dih, ctx, not_found());
    restart_gci(dih, ctx, Gci(0), Gci(0), Gci(0));
    restart_gci_ord(dih, ctx, Gci(0));
    let requests = restore_data(
        dih,
        ctx,
        Gci(0),
        [restore_conf(Gci(0), 0), restore_conf(Gci(0), 0)],
    );
    // The file is created with the initial record, copy A then copy B,
    // each fsynced; the report to the master waits for the last fsync.
    assert_eq!(
        requests.iter().map(render).collect::<Vec<_>>(),
        update_steps(1, true, Slot::A, 1, SystemFile::initial(1))
    );
    assert!(ctx.take_trace().is_empty(), "the report waits for the file");
    disk.answer(dih, ctx, requests);
    restored(dih, ctx, Gci(0), Gci(0));

    let start = crate::INITIAL_GCI;
    let requests = record_start(dih, ctx, Gci(0), start);
    assert_eq!(
        requests.iter().map(render).collect::<Vec<_>>(),
        update_steps(1, false, Slot::A, 2, copied(1, 1, Gci(0), start))
    );
    assert!(ctx.take_trace().is_empty(), "the conf waits for the file");
    disk.answer(dih, ctx, requests);
    commit_start(dih, ctx, Gci(0), start);
}

#[test]
fn golden_trace_of_an_initial_start_of_a_two_node_master_with_a_system_file() {
    let mut dih = two_node_dih(1, false);
    let mut ctx = RecordingContext::new();
    let mut disk = Disk::default();
    initial_start_with_a_system_file(&mut dih, &mut ctx, &mut disk);
    let start = crate::INITIAL_GCI;
    assert_eq!(disk.bytes, file_bytes(copied(1, 1, Gci(0), start), 2));
    assert!(ctx.take_fs_requests().is_empty());
}

#[test]
fn golden_trace_of_a_restart_of_a_two_node_master_from_its_system_file() {
    let mut dih = two_node_dih(1, false);
    let mut ctx = RecordingContext::new();
    // The last run's last round recorded 3/19 complete and 4/2 started
    // here; the cluster stopped before node 2 wrote it (2/19 there).
    let on_disk = record(1, 3, Gci::from_parts(3, 19), Gci::from_parts(4, 2));
    let mut disk = Disk {
        bytes: file_bytes(on_disk, 9),
    };
    let answer = disk.read_answer(&ctx);
    initialise(&mut dih, &mut ctx, answer);

    // The restored GCI is the highest complete one anywhere.
    let restored_gci = Gci::from_parts(3, 19);
    restart_gci(
        &mut dih,
        &mut ctx,
        restored_gci,
        Gci::from_parts(2, 19),
        restored_gci,
    );
    restart_gci_ord(&mut dih, &mut ctx, restored_gci);

    // The ldms restore up to it (their redo holds GCIs beyond), then the
    // file records the restart: one more start, 3/19 complete.
    let requests = restore_data(
        &mut dih,
        &mut ctx,
        restored_gci,
        [
            restore_conf(Gci::from_parts(3, 22), 40),
            restore_conf(Gci::from_parts(4, 1), 2),
        ],
    );
    let restarted = record(1, 4, restored_gci, Gci::from_parts(4, 2));
    assert_eq!(
        requests.iter().map(render).collect::<Vec<_>>(),
        update_steps(1, false, Slot::A, 10, restarted)
    );
    disk.answer(&mut dih, &mut ctx, requests);

    // The master may have run one high part past 4 (the started high every
    // file recorded): this node may have handed out GCIs up to 5/max.
    // Node 2 (3 started: up to 4/max) reports less; the first GCI is one
    // high part above 5.
    let mine = Gci::from_parts(5, u32::MAX);
    restored(&mut dih, &mut ctx, mine, Gci::from_parts(4, u32::MAX));
    let start = Gci::from_parts(6, 0);

    // The start GCI is recorded as started (3/19 stays complete) before any
    // tc gets it.
    let requests = record_start(&mut dih, &mut ctx, restored_gci, start);
    assert_eq!(
        requests.iter().map(render).collect::<Vec<_>>(),
        update_steps(1, false, Slot::A, 11, copied(1, 4, restored_gci, start))
    );
    disk.answer(&mut dih, &mut ctx, requests);
    restored_gci_reports(&mut ctx, restored_gci);
    commit_start(&mut dih, &mut ctx, restored_gci, start);
    assert_eq!(dih.complete_gci(), restored_gci);

    // The first timed switch after the interval may advance the high part:
    // 6 is recorded as started everywhere.
    ctx.now_ms = crate::tests::GCP_MS;
    deliver(&mut dih, &mut ctx, dih_of(1), timer());
    let prepare = || signal::signals::GcpPrepare {
        new_gci: Gci::from_parts(7, 0),
    };
    assert_eq!(
        ctx.take_trace(),
        lines_to(dih_of(1), &tcs_of(&[1, 2]), prepare)
    );
}

#[test]
fn a_restart_reads_what_the_previous_run_wrote_and_starts_above_it() {
    let mut disk = Disk::default();
    // First run: an initial start that records the start GCI 1/0.
    {
        let mut dih = two_node_dih(1, false);
        let mut ctx = RecordingContext::new();
        initial_start_with_a_system_file(&mut dih, &mut ctx, &mut disk);
        // A round records 1/19 complete, 2/0 started (node 2 did too).
        let copy = CopyGciReq {
            complete_gci: Gci::from_parts(1, 19),
            started_gci: Gci::from_parts(2, 0),
        };
        deliver(&mut dih, &mut ctx, dih_of(1), copy);
        let requests = ctx.take_fs_requests();
        disk.answer(&mut dih, &mut ctx, requests);
        assert_eq!(
            ctx.take_reports(),
            vec![Report::CompleteGci(Gci::from_parts(1, 19))]
        );
    }
    // Second run, from the same disk: 1/19 is restored; every GCI up to
    // 3/max may have been handed out (2 recorded started, plus one).
    let mut dih = two_node_dih(1, false);
    let mut ctx = RecordingContext::new();
    let answer = disk.read_answer(&ctx);
    initialise(&mut dih, &mut ctx, answer);
    let restored_gci = Gci::from_parts(1, 19);
    restart_gci(&mut dih, &mut ctx, restored_gci, restored_gci, restored_gci);
    restart_gci_ord(&mut dih, &mut ctx, restored_gci);
    let confs = [
        restore_conf(Gci::from_parts(2, 3), 5),
        restore_conf(Gci(0), 0),
    ];
    let requests = restore_data(&mut dih, &mut ctx, restored_gci, confs);
    assert_eq!(
        requests.iter().map(render).collect::<Vec<_>>(),
        update_steps(
            1,
            false,
            Slot::A,
            4,
            // The members recorded with the complete GCI stay.
            copied(1, 2, restored_gci, Gci::from_parts(2, 0))
        )
    );
    disk.answer(&mut dih, &mut ctx, requests);
    restored(
        &mut dih,
        &mut ctx,
        Gci::from_parts(3, u32::MAX),
        Gci::from_parts(3, u32::MAX),
    );
    let start = Gci::from_parts(4, 0);
    let requests = record_start(&mut dih, &mut ctx, restored_gci, start);
    disk.answer(&mut dih, &mut ctx, requests);
    restored_gci_reports(&mut ctx, restored_gci);
    commit_start(&mut dih, &mut ctx, restored_gci, start);
    assert_eq!(disk.bytes, file_bytes(copied(1, 2, restored_gci, start), 5));
}

/// A diskless master whose ldms report `ldm_highest` and whose peer
/// reports `theirs` at RESTORE_DATA: the start GCI its phase 6 records.
fn start_gci_after(ldm_highest: Gci, theirs: Gci) -> Gci {
    let mut dih = two_node_dih(1, true);
    let mut ctx = RecordingContext::new();
    let me = dih_of(1);
    deliver(&mut dih, &mut ctx, membership_of(1), phase(1));
    ctx.sent.clear();
    restart_gci(&mut dih, &mut ctx, Gci(0), Gci(0), Gci(0));
    deliver(
        &mut dih,
        &mut ctx,
        me,
        RestartGciOrd {
            restored_gci: Gci(0),
            stale: NodeSet::EMPTY,
        },
    );
    deliver(&mut dih, &mut ctx, membership_of(1), phase(3));
    deliver(&mut dih, &mut ctx, membership_of(1), phase(4));
    deliver(
        &mut dih,
        &mut ctx,
        ldm_of(1, 0),
        restore_conf(ldm_highest, 0),
    );
    deliver(&mut dih, &mut ctx, ldm_of(1, 1), restore_conf(Gci(0), 0));
    ctx.sent.clear();
    for (from, highest_gci) in [(dih_of(2), theirs), (me, ldm_highest)] {
        deliver(&mut dih, &mut ctx, from, RestoredRep { highest_gci });
    }
    deliver(&mut dih, &mut ctx, membership_of(1), phase(5));
    ctx.sent.clear();
    deliver(&mut dih, &mut ctx, membership_of(1), phase(6));
    match &ctx.sent[0].envelope.signal {
        signal::Signal::CopyGciReq(copy) => copy.started_gci,
        other => panic!("expected CopyGciReq, got {other:?}"),
    }
}

#[test]
fn the_start_gci_is_one_high_part_above_the_highest_gci_any_node_reports() {
    let parts = Gci::from_parts;
    // Nothing anywhere: the initial GCI.
    assert_eq!(start_gci_after(Gci(0), Gci(0)), crate::INITIAL_GCI);
    // The highest of the nodes' reports decides, whichever node has it.
    assert_eq!(start_gci_after(Gci(0), parts(7, 3)), parts(8, 0));
    assert_eq!(start_gci_after(parts(7, 3), parts(2, 9)), parts(8, 0));
    assert_eq!(
        start_gci_after(parts(5, u32::MAX), parts(5, 0)),
        parts(6, 0)
    );
    // Even an epoch of global checkpoint 0 moves the start past it.
    assert_eq!(start_gci_after(Gci(1), Gci(0)), parts(1, 0));
}

#[test]
fn a_report_that_arrives_before_the_masters_own_phase_is_counted() {
    let mut dih = two_node_dih(1, true);
    let mut ctx = RecordingContext::new();
    let me = dih_of(1);
    // Node 2 runs phase RESTART_GCI before the master does.
    let theirs = RestartGciRep {
        complete_gci: Gci(0),
        members: NodeSet::EMPTY,
    };
    deliver(&mut dih, &mut ctx, dih_of(2), theirs);
    assert!(ctx.take_trace().is_empty());
    deliver(&mut dih, &mut ctx, membership_of(1), phase(1));
    deliver(&mut dih, &mut ctx, membership_of(1), phase(2));
    let mine = RestartGciRep {
        complete_gci: Gci(0),
        members: NodeSet::EMPTY,
    };
    ctx.sent.clear();
    deliver(&mut dih, &mut ctx, me, mine);
    let order = || RestartGciOrd {
        restored_gci: Gci(0),
        stale: NodeSet::EMPTY,
    };
    assert_eq!(ctx.take_trace(), lines_to(me, &[me, dih_of(2)], order));
}

/// The cluster formed and node 2 went on to RESTART_GCI before this
/// node's membership announced the president: its report waits in the
/// dih, and counts once the president (this node) is known.
#[test]
fn a_report_that_arrives_before_the_president_is_announced_waits_for_it() {
    let mut dih = Dih::new(DihConfig {
        address: dih_of(2),
        diskless: true,
        ..config(vec![(NodeId(1), 0), (NodeId(2), 0), (NodeId(3), 0)], 3, 2)
    });
    let mut ctx = RecordingContext::new();
    let me = dih_of(2);
    deliver(&mut dih, &mut ctx, membership_of(2), phase(1));
    ctx.sent.clear();
    let report = || RestartGciRep {
        complete_gci: Gci(0),
        members: NodeSet::EMPTY,
    };
    deliver(&mut dih, &mut ctx, dih_of(3), report());
    assert!(ctx.take_trace().is_empty(), "held: no master known yet");
    // Node 1 is stale: node 2 is the president, and node 1 is out.
    let president = signal::signals::PresidentRep {
        president: NodeId(2),
    };
    deliver(&mut dih, &mut ctx, membership_of(2), president);
    assert!(dih.is_master());
    let out = signal::signals::NodeFailRep {
        membership_id: 1,
        live: NodeSet::of([NodeId(2), NodeId(3)]),
        failed: NodeSet::of([NodeId(1)]),
        president: NodeId(2),
        starting: NodeSet::EMPTY,
        returned: NodeSet::EMPTY,
    };
    deliver(&mut dih, &mut ctx, membership_of(2), out);
    deliver(&mut dih, &mut ctx, membership_of(2), phase(2));
    ctx.sent.clear();
    deliver(&mut dih, &mut ctx, me, report());
    let order = || RestartGciOrd {
        restored_gci: Gci(0),
        stale: NodeSet::EMPTY,
    };
    assert_eq!(
        ctx.take_trace(),
        lines_to(me, &[me, dih_of(3)], order),
        "node 3's early report counted, node 1 not waited for"
    );
}

#[test]
#[should_panic(expected = "twice in one round")]
fn a_second_restart_report_from_one_node_stops_the_master() {
    let mut dih = two_node_dih(1, true);
    let mut ctx = RecordingContext::new();
    let report = || RestartGciRep {
        complete_gci: Gci(0),
        members: NodeSet::EMPTY,
    };
    deliver(&mut dih, &mut ctx, dih_of(2), report());
    deliver(&mut dih, &mut ctx, dih_of(2), report());
}

#[test]
#[should_panic(expected = "but the master is")]
fn a_restart_report_at_a_non_master_stops_the_node() {
    let mut dih = two_node_dih(2, true);
    let mut ctx = RecordingContext::new();
    let report = RestartGciRep {
        complete_gci: Gci(0),
        members: NodeSet::EMPTY,
    };
    deliver(&mut dih, &mut ctx, dih_of(1), report);
}

#[test]
fn the_master_refuses_a_restart_when_it_has_nothing_while_another_has_a_gci() {
    // The master lost its data directory (no file: 0) while node 2 has
    // 5/3 complete: node 1 is stale (it needs a node restart from its
    // peer), which formation should have seen: the reports changed.
    let mut dih = two_node_dih(1, false);
    let mut ctx = RecordingContext::new();
    initialise(&mut dih, &mut ctx, not_found());
    restart_gci(&mut dih, &mut ctx, Gci(0), Gci::from_parts(5, 3), REFUSED);
    // The operator learns why, and what to do, from the node's log.
    let reports = ctx.take_reports();
    assert!(
        matches!(&reports[..], [Report::Log(line)]
            if line.contains("refused") && line.contains("Start the nodes again")),
        "{reports:?}"
    );
    assert!(ctx.take_fs_requests().is_empty());
}

#[test]
fn the_master_leaves_out_a_node_that_has_nothing() {
    // Node 2 lost its data directory (or started with --initial): it is
    // stale, and rejoins by a node restart once the cluster runs.
    let mut dih = two_node_dih(1, false);
    let mut ctx = RecordingContext::new();
    let on_disk = record(1, 1, Gci::from_parts(5, 3), Gci::from_parts(6, 0));
    let answer = Disk {
        bytes: file_bytes(on_disk, 4),
    }
    .read_answer(&ctx);
    initialise(&mut dih, &mut ctx, answer);
    let reports = (Gci::from_parts(5, 3), Gci(0));
    let decision = Gci::from_parts(5, 3);
    restart_gci_leaving_out(
        &mut dih,
        &mut ctx,
        reports,
        decision,
        NodeSet::of([NodeId(2)]),
    );
}

#[test]
#[should_panic(expected = "fatal: dih 1:dih#0: the master (1:dih#0) refused the system restart")]
fn a_refused_restart_stops_the_master() {
    let mut dih = two_node_dih(1, true);
    let mut ctx = RecordingContext::new();
    restart_gci(&mut dih, &mut ctx, Gci(0), Gci::from_parts(5, 3), REFUSED);
    let order = RestartGciOrd {
        restored_gci: REFUSED,
        stale: NodeSet::EMPTY,
    };
    deliver(&mut dih, &mut ctx, dih_of(1), order);
}

#[test]
#[should_panic(expected = "fatal")]
fn a_refused_restart_stops_every_other_node() {
    let mut dih = two_node_dih(2, false);
    let mut ctx = RecordingContext::new();
    let on_disk = record(2, 1, Gci::from_parts(5, 3), Gci::from_parts(6, 0));
    let answer = Disk {
        bytes: file_bytes(on_disk, 4),
    }
    .read_answer(&ctx);
    deliver(&mut dih, &mut ctx, membership_of(2), phase(1));
    deliver(&mut dih, &mut ctx, io_of(2), answer);
    deliver(&mut dih, &mut ctx, membership_of(2), phase(2));
    assert_eq!(
        ctx.take_trace(),
        vec![
            line(
                dih_of(2),
                membership_of(2),
                SystemFileRep {
                    complete_gci: Gci::from_parts(5, 3),
                    members: NodeSet::EMPTY,
                }
            ),
            line(dih_of(2), membership_of(2), StartPhaseConf { phase: 1 }),
            line(
                dih_of(2),
                dih_of(1),
                RestartGciRep {
                    complete_gci: Gci::from_parts(5, 3),
                    members: NodeSet::EMPTY,
                }
            ),
        ]
    );
    let order = RestartGciOrd {
        restored_gci: REFUSED,
        stale: NodeSet::EMPTY,
    };
    deliver(&mut dih, &mut ctx, dih_of(1), order);
}

#[test]
#[should_panic(expected = "but 1:dih#0 is the master")]
fn a_restart_order_from_a_dih_that_is_not_the_master_stops_the_node() {
    let mut dih = two_node_dih(2, true);
    let mut ctx = RecordingContext::new();
    let order = RestartGciOrd {
        restored_gci: Gci(0),
        stale: NodeSet::EMPTY,
    };
    deliver(&mut dih, &mut ctx, dih_of(2), order);
}

/// The master reads `bytes` as its system file in phase INITIALISE.
fn read_file(bytes: Vec<u8>) {
    let mut dih = two_node_dih(1, false);
    let mut ctx = RecordingContext::new();
    deliver(&mut dih, &mut ctx, membership_of(1), phase(1));
    let answer = Disk { bytes }.read_answer(&ctx);
    deliver(&mut dih, &mut ctx, io_of(1), answer);
}

fn sample() -> SystemFile {
    record(1, 2, Gci::from_parts(3, 7), Gci::from_parts(4, 2))
}

#[test]
#[should_panic(expected = "fatal")]
fn a_system_file_with_both_copies_damaged_stops_the_node() {
    let mut bytes = file_bytes(sample(), 5);
    bytes[40] ^= 0x01;
    bytes[SLOT_BYTES + 33] ^= 0x80;
    read_file(bytes);
}

#[test]
#[should_panic(expected = "is damaged, the node stops")]
fn a_full_length_system_file_damaged_in_both_copies_stops_the_node() {
    let mut bytes = file_bytes(sample(), 5);
    bytes[10] ^= 0x02;
    bytes[SLOT_BYTES + 10] ^= 0x02;
    read_file(bytes);
}

/// The first update of a new file was cut short before copy A was whole:
/// the file ends before copy B, so no update ever finished and nothing was
/// recorded. The node starts as if there were no file (an initial start
/// crashed before serving anything), reporting complete GCI 0.
#[test]
fn a_system_file_whose_first_write_was_cut_short_is_an_initial_start() {
    let mut dih = two_node_dih(2, false);
    let mut ctx = RecordingContext::new();
    deliver(&mut dih, &mut ctx, membership_of(2), phase(1));
    let answer = Disk {
        bytes: file_bytes(sample(), 5)[..100].to_vec(),
    }
    .read_answer(&ctx);
    deliver(&mut dih, &mut ctx, io_of(2), answer);
    assert_eq!(
        ctx.take_trace(),
        vec![
            no_system_file(2),
            line(dih_of(2), membership_of(2), StartPhaseConf { phase: 1 })
        ]
    );
    deliver(&mut dih, &mut ctx, membership_of(2), phase(2));
    assert_eq!(
        ctx.take_trace(),
        vec![line(
            dih_of(2),
            dih_of(1),
            RestartGciRep {
                complete_gci: Gci(0),
                members: NodeSet::EMPTY,
            }
        )]
    );
}

#[test]
#[should_panic(expected = "fatal")]
fn an_all_zero_system_file_stops_the_node() {
    read_file(vec![0; FILE_BYTES]);
}

#[test]
#[should_panic(expected = "belongs to node 2, not node 1")]
fn another_nodes_system_file_stops_the_node() {
    read_file(file_bytes(record(2, 1, Gci(0), Gci(0)), 1));
}

#[test]
#[should_panic(expected = "fatal: dih 1:dih#0: cannot read the system file")]
fn an_io_error_reading_the_system_file_stops_the_node() {
    let mut dih = two_node_dih(1, false);
    let mut ctx = RecordingContext::new();
    deliver(&mut dih, &mut ctx, membership_of(1), phase(1));
    let read = FsOperation::Read {
        file: SYSTEM,
        offset: 0,
        len: FILE_BYTES as u32,
    };
    let conf = FsConf {
        token: token::READ,
        result: Err(read.error(FsErrorKind::Io, "Input/output error")),
    };
    deliver(&mut dih, &mut ctx, io_of(1), conf);
}

#[test]
#[should_panic(expected = "fatal: dih 1:dih#0: writing the system file failed")]
fn an_io_error_writing_the_system_file_stops_the_node() {
    let mut dih = two_node_dih(1, false);
    let mut ctx = RecordingContext::new();
    initialise(&mut dih, &mut ctx, not_found());
    restart_gci(&mut dih, &mut ctx, Gci(0), Gci(0), Gci(0));
    restart_gci_ord(&mut dih, &mut ctx, Gci(0));
    let confs = [restore_conf(Gci(0), 0), restore_conf(Gci(0), 0)];
    let requests = restore_data(&mut dih, &mut ctx, Gci(0), confs);
    let sync = requests
        .into_iter()
        .find(|request| matches!(request.operation, FsOperation::Sync { .. }))
        .expect("an update syncs");
    let conf = FsConf {
        token: sync.token,
        result: Err(sync.operation.error(FsErrorKind::Io, "fsync failed")),
    };
    deliver(&mut dih, &mut ctx, io_of(1), conf);
}

#[test]
fn a_system_file_with_one_damaged_copy_is_read_from_the_other_which_is_rewritten_last() {
    for damaged in [Slot::A, Slot::B] {
        let mut bytes = file_bytes(sample(), 5);
        bytes[damaged.range()][100] ^= 0x10;
        let mut dih = two_node_dih(1, false);
        let mut ctx = RecordingContext::new();
        let answer = Disk { bytes }.read_answer(&ctx);
        initialise(&mut dih, &mut ctx, answer);
        // The damage goes to the node's log, naming the file and offset.
        let reports = ctx.take_reports();
        assert!(
            matches!(&reports[..], [Report::Log(line)]
                if line.contains("has a damaged copy at offset")),
            "{reports:?}"
        );
        // The good copy's record is what the node reports.
        let mine = Gci::from_parts(3, 7);
        restart_gci(&mut dih, &mut ctx, mine, mine, mine);
        restart_gci_ord(&mut dih, &mut ctx, mine);
        let confs = [restore_conf(mine, 0), restore_conf(mine, 0)];
        let requests = restore_data(&mut dih, &mut ctx, mine, confs);
        // The damaged copy is rewritten first: the good one survives a
        // crash during that write.
        assert_eq!(
            requests.iter().map(render).collect::<Vec<_>>(),
            update_steps(
                1,
                false,
                damaged,
                6,
                record(1, 3, mine, Gci(sample().highest_started_gci))
            ),
            "damaged copy {damaged}"
        );
    }
}

/// A non-master with a system file whose last round (complete 4/19,
/// started 5/2) is older than what another node recorded (5/19 complete
/// in a round whose copy this node never wrote: the cluster stopped
/// between the two nodes' writes).
#[test]
fn a_node_whose_file_lags_records_the_restored_gci_without_breaking_its_file() {
    let mut dih = two_node_dih(2, false);
    let mut ctx = RecordingContext::new();
    let (me, master, membership) = (dih_of(2), dih_of(1), membership_of(2));
    let on_disk = record(2, 1, Gci::from_parts(4, 19), Gci::from_parts(5, 2));
    let mut disk = Disk {
        bytes: file_bytes(on_disk, 7),
    };
    deliver(&mut dih, &mut ctx, membership, phase(1));
    ctx.fs_requests.clear();
    let answer = disk.read_answer(&ctx);
    deliver(&mut dih, &mut ctx, io_of(2), answer);
    deliver(&mut dih, &mut ctx, membership, phase(2));
    let restored_gci = Gci::from_parts(5, 19);
    let order = RestartGciOrd {
        restored_gci,
        stale: NodeSet::EMPTY,
    };
    deliver(&mut dih, &mut ctx, master, order);
    deliver(&mut dih, &mut ctx, membership, phase(3));
    deliver(&mut dih, &mut ctx, membership, phase(4));
    ctx.sent.clear();
    for instance in 0..2 {
        let conf = restore_conf(restored_gci, 0);
        deliver(&mut dih, &mut ctx, ldm_of(2, instance), conf);
    }
    let requests = ctx.take_fs_requests();
    let written: Vec<SystemFile> = requests
        .iter()
        .filter_map(|request| match &request.operation {
            FsOperation::Write { data, .. } => decode_slot(data.as_slice()).ok(),
            _ => None,
        })
        .map(|(record, _)| record)
        .collect();
    assert_eq!(written.len(), 2);
    assert!(written
        .iter()
        .all(|record| record.latest_complete_gci == restored_gci.0
            && record.highest_started_gci >= restored_gci.0
            && record.start_count == 2));
    disk.answer(&mut dih, &mut ctx, requests);
    let trace = ctx.take_trace();
    assert_eq!(trace.len(), 2, "the report to the master and the conf");
    assert!(trace[0].starts_with(&format!("{me} -> {master} RestoredRep")));
}

/// The master (node 1 of 2) runs phase RESTART_GCI and hears node 2's
/// report, then its own: (complete GCI, members recorded with it) each.
fn master_hears_restart_reports(
    ctx: &mut RecordingContext,
    mine: (Gci, &[u16]),
    theirs: (Gci, &[u16]),
) {
    let mut dih = two_node_dih(1, true);
    deliver(&mut dih, ctx, membership_of(1), phase(1));
    ctx.take_fs_requests();
    ctx.take_trace();
    for (from, (complete_gci, members)) in [(dih_of(2), theirs), (dih_of(1), mine)] {
        let members = NodeSet::of(members.iter().map(|&id| NodeId(id)));
        deliver(
            &mut dih,
            ctx,
            from,
            RestartGciRep {
                complete_gci,
                members,
            },
        );
    }
}

/// The master's system file says GCI 7/0 was made durable by node 1
/// alone (node 2 had failed): node 2's older data (5/0) is stale. It takes
/// no part, and shuts down saying so; the master does not wait for it.
#[test]
fn a_node_that_failed_before_the_restored_gci_is_stale_and_shuts_down() {
    let (newest, older) = (Gci::from_parts(7, 0), Gci::from_parts(5, 0));
    let (mut ctx, me) = (RecordingContext::new(), dih_of(1));
    master_hears_restart_reports(&mut ctx, (newest, &[1]), (older, &[1, 2]));
    let order = || RestartGciOrd {
        restored_gci: newest,
        stale: NodeSet::of([NodeId(2)]),
    };
    assert_eq!(ctx.take_trace(), lines_to(me, &[me, dih_of(2)], order));
    let logs = format!("{:?}", ctx.take_reports());
    assert!(logs.contains("node(s) {2} failed before it"), "{logs}");

    // At node 2: it shuts down, saying why.
    let mut stale = two_node_dih(2, true);
    let mut ctx = RecordingContext::new();
    deliver(&mut stale, &mut ctx, me, order());
    let reports = ctx.take_reports();
    assert!(
        reports.iter().any(|report| matches!(report,
            Report::Shutdown(reason) if reason.contains("needs a node restart"))),
        "{reports:?}"
    );
    assert!(ctx.take_trace().is_empty(), "it confirms no phase");
}

/// The master itself is the stale node (the president failed first, the
/// other node carried on): a start it leads cannot leave it out, so it
/// refuses the restart, saying why, rather than start on older data.
#[test]
fn a_stale_master_refuses_the_restart() {
    let (newest, older) = (Gci::from_parts(7, 0), Gci::from_parts(5, 0));
    let (mut ctx, me) = (RecordingContext::new(), dih_of(1));
    master_hears_restart_reports(&mut ctx, (older, &[1, 2]), (newest, &[2]));
    let order = || RestartGciOrd {
        restored_gci: REFUSED,
        stale: NodeSet::EMPTY,
    };
    assert_eq!(ctx.take_trace(), lines_to(me, &[me, dih_of(2)], order));
    let logs = format!("{:?}", ctx.take_reports());
    assert!(
        logs.contains("failed before it") && logs.contains("should have left it out"),
        "{logs}"
    );
}
