//! Local checkpoints and restore from them (`lcp`, `lcp_restore.rs`,
//! `restore.rs`), on the in-memory disk of `lcp_test_disk.rs`: each test
//! writes rows, takes LCPs, stops the node (power loss: only fsynced bytes
//! survive; or kill: every write reached the disk), restores a fresh ldm
//! from the disk and compares its rows (row id, GCI, image; index
//! consistent) with what the first ldm held at the restored GCI.

use crate::lcp_test_disk::{fatal_message, gci, Node, Parts, Rows, TABLE_ID};
use signal::fs::FileName;
use signal::signals::OperationKind::{Delete, Insert, Update};
use signal::ErrorCode;
use storage::lcp_control::{ControlFile, DataFileReader};

/// Inserts keys `keys` at `at`.
fn insert_all(node: &mut Node, keys: std::ops::Range<i32>, at: u32) {
    for k in keys {
        node.write(Insert, k, i64::from(k), gci(at));
    }
}

/// The next LCP id of `partition` (its data file's number).
fn next_lcp_id(node: &Node, partition: u32) -> u64 {
    node.ldm.tables[TABLE_ID as usize]
        .as_ref()
        .and_then(|table| table.partitions[partition as usize].as_ref())
        .expect("owned")
        .lcp
        .next_lcp_id
}

/// Where the redo `partition` needs starts (its newest restorable LCP's).
fn redo_start(node: &Node, partition: u32) -> u64 {
    node.ldm.tables[TABLE_ID as usize]
        .as_ref()
        .and_then(|table| table.partitions[partition as usize].as_ref())
        .expect("owned")
        .lcp
        .restorable_start_lsn
        .expect("a restorable LCP")
}

fn data_file(partition: u32, file: u64) -> FileName {
    FileName::LcpData {
        table: TABLE_ID,
        partition,
        file: file as u32,
    }
}

fn control_file(partition: u32, copy: u32) -> FileName {
    FileName::LcpControl {
        table: TABLE_ID,
        partition,
        copy,
    }
}

#[test]
fn a_restore_loads_the_lcp_then_replays_redo_to_the_same_rows() {
    let mut node = Node::initial();
    insert_all(&mut node, 0..120, 2);
    for k in (0..120).step_by(3) {
        node.write(Update, k, i64::from(k) + 1000, gci(2));
    }
    for k in (0..120).step_by(5) {
        node.write(Delete, k, 0, gci(2));
    }
    node.save(gci(2));
    node.run_lcps(2);
    // After the LCPs: new rows, updates, deletes, and deleted keys back.
    insert_all(&mut node, 120..180, 3);
    for k in (1..120).step_by(7).filter(|k| k % 5 != 0) {
        node.write(Update, k, -i64::from(k), gci(3));
    }
    for k in (2..120).step_by(11).filter(|k| k % 5 != 0) {
        node.write(Delete, k, 0, gci(3));
    }
    for k in (0..120).step_by(10) {
        node.write(Insert, k, 77, gci(3));
    }
    node.save(gci(3));
    let expected = node.rows();
    let restored = Node::restart(node.crash(), gci(3));
    assert_eq!(restored.rows(), expected);
    let loaded = restored
        .phase("restore local checkpoints")
        .expect("reported");
    let replayed = restored.phase("replay redo log").expect("reported");
    assert!(loaded >= 90, "the LCPs held the first rows ({loaded})");
    assert!(
        replayed < 150,
        "only the changes after the LCPs are replayed ({replayed})"
    );
}

#[test]
fn a_restore_takes_the_previous_lcp_when_the_newer_one_needs_a_later_gci() {
    let mut node = Node::initial();
    insert_all(&mut node, 0..80, 2);
    node.save(gci(2));
    node.run_lcps(2);
    let older = [next_lcp_id(&node, 0) - 1, next_lcp_id(&node, 1) - 1];
    for k in (0..80).step_by(4) {
        node.write(Update, k, 5, gci(3));
    }
    node.save(gci(3));
    let at_3: Rows = node.rows();
    // Changes of GCI 4, which never becomes complete, then new LCPs that
    // hold them: not restorable at GCI 3.
    for k in (1..80).step_by(4) {
        node.write(Delete, k, 0, gci(4));
    }
    insert_all(&mut node, 80..100, 4);
    node.run_lcps(2);
    let newer = [next_lcp_id(&node, 0) - 1, next_lcp_id(&node, 1) - 1];
    let disk = node.kill();
    for partition in 0..2 {
        assert!(disk.contains_key(&data_file(partition, older[partition as usize])));
        assert!(disk.contains_key(&data_file(partition, newer[partition as usize])));
    }
    let restored = Node::restart(disk, gci(3));
    assert_eq!(restored.rows(), at_3);
    // The newer LCPs' control files and data files are gone: a later
    // restart at a higher GCI must not take them (their GCI 4 was voided).
    // (The restored node has taken new LCPs since, with higher ids.)
    let disk = restored.kill();
    for partition in 0..2 {
        let newer = newer[partition as usize];
        assert!(!disk.contains_key(&data_file(partition, newer)));
        for copy in 0..2 {
            if let Some(file) = disk.get(&control_file(partition, copy)) {
                let control = ControlFile::decode(&file.current).expect("valid");
                assert_ne!(control.lcp_id, newer, "LCP {newer} is not restorable");
            }
        }
    }
}

#[test]
fn a_kill_in_the_middle_of_an_lcp_restores_from_the_previous_one() {
    let mut node = Node::initial();
    insert_all(&mut node, 0..700, 2);
    node.save(gci(2));
    node.run_lcps(2);
    for k in (0..700).step_by(3) {
        node.write(Update, k, 299, gci(3));
    }
    for k in (1..700).step_by(13) {
        node.write(Delete, k, 0, gci(3));
    }
    node.save(gci(3));
    node.save(gci(4));
    let expected = node.rows();
    // The next LCP, cut once part of its data file is written.
    while !node.ldm.lcp.is_running() {
        node.fire_timers();
        while !node.ldm.lcp.is_running() && node.step() {}
    }
    let running = node.ldm.lcp.running_partition().expect("running");
    let file = data_file(running, next_lcp_id(&node, running));
    while node
        .ctx
        .disk
        .get(&file)
        .is_none_or(|f| f.current.len() < 1000)
    {
        assert!(node.step(), "the LCP writes its data file");
        assert!(node.ldm.lcp.is_running(), "cut before the LCP ends");
    }
    let disk = node.kill();
    assert!(disk[&file].current.len() < 200_000, "a part of the file");
    let restored = Node::restart(disk, gci(3));
    assert_eq!(restored.rows(), expected);
    // The cut file was deleted; the restored node's own next LCP may have
    // written its number again, whole.
    let disk = restored.kill();
    if let Some(file) = disk.get(&file) {
        let mut reader =
            DataFileReader::new(&file.current, file.current.len() as u64).expect("a header");
        while reader.next_in_file(&file.current).expect("whole").is_some() {}
    }
}

#[test]
fn a_damaged_control_copy_is_survived_and_a_damaged_data_file_stops_the_node() {
    let mut node = Node::initial();
    insert_all(&mut node, 0..60, 2);
    node.save(gci(2));
    node.run_lcps(2);
    node.save(gci(3));
    for k in (0..60).step_by(2) {
        node.write(Update, k, 9, gci(3));
    }
    node.save(gci(4));
    let expected = node.rows();
    let lcp = next_lcp_id(&node, 0) - 1;
    let mut disk = node.crash();
    // Slot 1 holds partition 0's first (empty) LCP, superseded; slot 0 the
    // newest, restorable one.
    let older = disk
        .get_mut(&control_file(0, 1))
        .expect("the older control file");
    older.current[20] ^= 0x10;
    older.durable = older.current.clone();
    let restored = Node::restart(disk.clone(), gci(4));
    assert_eq!(restored.rows(), expected);
    assert_eq!(
        restored.phase("damaged LCP control file copies passed over"),
        Some(1)
    );
    // A bit flipped in the data file the restore needs: the node stops,
    // naming the file and the offset.
    let data = disk
        .get_mut(&data_file(0, lcp))
        .expect("the LCP's data file");
    let middle = data.current.len() / 2;
    data.current[middle] ^= 0x01;
    data.durable = data.current.clone();
    let message = fatal_message(|| {
        Node::restart(disk, gci(4));
    });
    assert!(
        message.contains(&format!("lcp/{TABLE_ID}/0/{lcp}.data")) && message.contains("at byte"),
        "{message}"
    );
}

#[test]
fn both_control_copies_damaged_stop_the_node() {
    let mut node = Node::initial();
    insert_all(&mut node, 0..20, 2);
    node.save(gci(2));
    node.run_lcps(2);
    node.save(gci(3));
    let mut disk = node.crash();
    for copy in 0..2 {
        let control = disk.get_mut(&control_file(1, copy)).expect("control");
        control.current[30] ^= 0x04;
        control.durable = control.current.clone();
    }
    let message = fatal_message(|| {
        Node::restart(disk, gci(3));
    });
    assert!(
        message.contains("partition 1") && message.contains("checksum"),
        "{message}"
    );
}

#[test]
fn deleted_rows_stay_deleted() {
    let mut node = Node::initial();
    insert_all(&mut node, 0..100, 2);
    for k in (0..100).filter(|k| k % 4 == 0) {
        node.write(Delete, k, 0, gci(2));
    }
    node.save(gci(2));
    node.run_lcps(2);
    for k in (0..100).filter(|k| k % 4 == 1) {
        node.write(Delete, k, 0, gci(3));
    }
    node.save(gci(3));
    let expected = node.rows();
    let restored = Node::restart(node.crash(), gci(3));
    assert_eq!(restored.rows(), expected);
    for k in 0..100 {
        assert_eq!(restored.row_id(k).is_some(), k % 4 >= 2, "key {k}");
    }
}

#[test]
fn the_redo_tail_moves_once_an_lcp_is_restorable() {
    let mut node = Node::initial();
    // More than a redo file (32 pages) of records in each part.
    insert_all(&mut node, 0..400, 2);
    for round in 0..2 {
        for k in 0..400 {
            node.write(Update, k, i64::from(round * 1000 + k), gci(2));
        }
    }
    node.save(gci(2));
    let before = node.redo_pages_in_use();
    assert!(before.iter().all(|&pages| pages > 40), "{before:?}");
    node.run_lcps(2);
    // The LCPs count but are not restorable until GCI 2 is known complete.
    assert_eq!(node.redo_pages_in_use(), before);
    node.save(gci(3));
    let after = node.redo_pages_in_use();
    for (before, after) in before.iter().zip(&after) {
        assert!(after + 30 <= *before, "{before} -> {after}");
    }
    let expected = node.rows();
    let restored = Node::restart(node.crash(), gci(3));
    assert_eq!(restored.rows(), expected);
}

#[test]
fn a_full_redo_log_makes_the_lcps_hurry() {
    let mut node = Node::initial();
    node.save(gci(2));
    let done = node.ldm.lcps_completed();
    let mut k = 0;
    let refused = loop {
        match node.try_write(Insert, k, i64::from(k), gci(3)) {
            Ok(()) => k += 1,
            Err(error) => break error,
        }
    };
    assert_eq!(refused, ErrorCode::RedoLogFull);
    // No time passed: the refusal started the LCPs at once, without their
    // pause.
    assert_eq!(node.ctx.now_ms, 0);
    assert_eq!(node.ldm.lcps_completed(), done + 2);
    // Once GCI 3 is complete they are restorable and the tail moves.
    node.save(gci(3));
    node.save(gci(4));
    node.try_write(Insert, k, 1, gci(5))
        .expect("the tail moved: room again");
}

#[test]
fn a_row_id_reused_during_an_lcp_replays_cleanly() {
    let mut node = Node::initial();
    insert_all(&mut node, 0..40, 2);
    node.save(gci(2));
    // Two keys of one partition: a exists, b does not.
    let a = 5;
    let b = (1000..)
        .find(|&b| node.route(b).0 == node.route(a).0)
        .expect("a key of the same partition");
    let row = node.row_id(a).expect("a exists");
    // An LCP of a's partition starts; before its scan reaches the row, a
    // is deleted and b inserted into the freed slot.
    loop {
        node.fire_timers();
        while !node.ldm.lcp.is_running() && node.step() {}
        if node.ldm.lcp.running_partition() == Some(node.route(a).0) {
            break;
        }
        node.pump();
    }
    node.hold = true;
    let delete = node.prepare(Delete, a, 0).expect("prepared");
    node.commit(delete, gci(3));
    let insert = node.prepare(Insert, b, 3).expect("prepared");
    node.commit(insert, gci(3));
    node.hold = false;
    assert_eq!(node.row_id(b), Some(row), "b took a's slot");
    let done = node.ldm.lcps_completed();
    node.pump();
    assert_eq!(node.ldm.lcps_completed(), done + 1);
    node.save(gci(3));
    node.save(gci(4));
    let expected = node.rows();
    // Replay from the LCP's start deletes a's row id, which holds b in
    // the LCP, then inserts b again.
    let restored = Node::restart(node.crash(), gci(4));
    assert_eq!(restored.rows(), expected);
    assert_eq!(restored.row_id(b), Some(row));
    assert_eq!(restored.row_id(a), None);
}

#[test]
fn an_lcp_writes_committed_images_of_rows_being_changed() {
    let mut node = Node::initial();
    insert_all(&mut node, 0..30, 2);
    node.save(gci(2));
    let at_2 = node.rows();
    // An update and an insert prepared, not committed, while the LCPs run.
    let update = node.prepare(Update, 3, 12345).expect("prepared");
    let insert = node.prepare(Insert, 500, 1).expect("prepared");
    node.run_lcps(2);
    node.commit(update, gci(3));
    node.commit(insert, gci(3));
    node.save(gci(3));
    let at_3 = node.rows();
    let disk = node.crash();
    let restored = Node::restart(disk.clone(), gci(2));
    assert_eq!(restored.rows(), at_2, "the LCPs hold the committed images");
    let restored = Node::restart(disk, gci(3));
    assert_eq!(restored.rows(), at_3);
}

#[test]
fn a_restored_node_takes_lcps_and_restarts_again() {
    let mut node = Node::initial();
    insert_all(&mut node, 0..50, 2);
    node.save(gci(2));
    node.run_lcps(2);
    node.save(gci(3));
    let mut node = Node::restart(node.crash(), gci(3));
    insert_all(&mut node, 50..90, 5);
    node.save(gci(5));
    node.run_lcps(2);
    for k in (0..90).step_by(2) {
        node.write(Delete, k, 0, gci(6));
    }
    node.save(gci(6));
    node.save(gci(7));
    node.run_lcps(2);
    node.save(gci(8));
    let expected = node.rows();
    let restored = Node::restart(node.crash(), gci(8));
    assert_eq!(restored.rows(), expected);
}

#[test]
fn an_unchanged_partition_gets_a_new_control_file_naming_the_same_data_file() {
    let mut node = Node::initial();
    insert_all(&mut node, 0..200, 2);
    node.save(gci(2));
    node.run_lcps(2);
    node.save(gci(3));
    let full = [next_lcp_id(&node, 0) - 1, next_lcp_id(&node, 1) - 1];
    let data = node.ctx.disk[&data_file(0, full[0])].current.clone();
    // No change since: the next LCPs write control files only, and the
    // redo the partitions need starts later.
    let before = [redo_start(&node, 0), redo_start(&node, 1)];
    node.run_lcps(2);
    node.save(gci(4));
    for partition in 0..2 {
        let newest = next_lcp_id(&node, partition) - 1;
        assert!(newest > full[partition as usize]);
        assert!(!node.ctx.disk.contains_key(&data_file(partition, newest)));
    }
    assert_eq!(node.ctx.disk[&data_file(0, full[0])].current, data);
    let after = [redo_start(&node, 0), redo_start(&node, 1)];
    assert!(
        after
            .iter()
            .zip(&before)
            .all(|(after, before)| after > before),
        "{before:?} -> {after:?}"
    );
    let expected = node.rows();
    let restored = Node::restart(node.crash(), gci(4));
    assert_eq!(restored.rows(), expected);
    assert_eq!(restored.phase("replay redo log"), Some(0));
}

#[test]
fn a_restart_that_restores_gci_0_discards_the_lcps_of_the_run_it_rolls_back() {
    // A run whose LCPs hold rows of GCI 2, which never became complete.
    let mut node = Node::initial();
    insert_all(&mut node, 0..60, 2);
    node.run_lcps(2);
    let rolled_back = [next_lcp_id(&node, 0) - 1, next_lcp_id(&node, 1) - 1];
    // The restart restores GCI 0: the redo log is formatted anew. Partition
    // 0 takes its first LCP of the new run at once; partition 1's waits for
    // the LCP timer, which the crash below comes before.
    let mut node = Node::restart(node.crash(), gci(0));
    let disk = &node.ctx.disk;
    for partition in 0..2 {
        let file = data_file(partition, rolled_back[partition as usize]);
        assert!(!disk.contains_key(&file), "{file} of the rolled-back run");
        for copy in 0..2 {
            if let Some(file) = disk.get(&control_file(partition, copy)) {
                let control = ControlFile::decode(&file.current).expect("valid");
                assert_eq!(control.lcp_id, 1, "only the new run's first LCP");
            }
        }
    }
    // The new run commits and completes GCI 3 (above every GCI handed out
    // before), and crashes.
    insert_all(&mut node, 100..160, 3);
    node.save(gci(3));
    let expected = node.rows();
    // Restoring GCI 3 must not take an LCP of the rolled-back run (its
    // GCI 2 is below 3, so it would count as restorable, and its redo start
    // is an LSN of the log the restart formatted away).
    let restored = Node::restart(node.crash(), gci(3));
    assert_eq!(restored.rows(), expected);
}

#[test]
fn a_partition_without_a_restorable_lcp_replays_its_part_from_the_oldest_record() {
    // Both partitions log to part 0. After a restart that restores GCI 0
    // no partition has an LCP; partition 0's first LCP of the new run is
    // taken at once and is restorable (nothing committed yet).
    let node = Node::initial_with(Parts::Shared);
    let mut node = Node::restart_with(node.crash(), gci(0), Parts::Shared);
    let keys_of_1: Vec<i32> = (0..200).filter(|&k| node.route(k).0 == 1).collect();
    for &k in &keys_of_1[..40] {
        node.write(Insert, k, i64::from(k), gci(2));
    }
    // Partition 1's first LCP holds a row of GCI 3: restorable only once GCI
    // 3 is complete. Partition 0, unchanged, then gets a control file with
    // a later redo start, restorable at once.
    node.write(Insert, keys_of_1[40], 1, gci(3));
    node.run_lcps(2);
    assert!(
        redo_start(&node, 0) > 40,
        "partition 0's redo starts after the inserts"
    );
    node.save(gci(2));
    let mut expected = node.rows();
    expected.retain(|_, (gci_of_row, _)| *gci_of_row <= gci(2).0);
    // Restoring GCI 2: partition 1 has no restorable LCP, so its part is
    // replayed from the oldest record (which the tail kept for it), not
    // from partition 0's redo start.
    let restored = Node::restart_with(node.crash(), gci(2), Parts::Shared);
    assert_eq!(restored.rows(), expected);
}
