//! Tests of the LCP formats: round trips, every single-bit flip detected
//! with an offset, truncation, random bytes, the control-file choice across
//! crashes, and a model test of partial LCP chains (write, trim, delete
//! files, restore) against a map of the rows.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use stdx::mix::XorShift;

use super::*;

/// Records as (row id, GCI, image; `None` for a delete).
type Records = Vec<(u32, u64, Option<Vec<u8>>)>;

fn entry(
    file_number: u32,
    first: u16,
    count: u16,
    lcp_id: u64,
    max_gci_written: u64,
) -> DataFileEntry {
    DataFileEntry {
        file_number,
        full_parts: PartRange::new(first, count),
        lcp_id,
        max_gci_written,
        row_records: 10 * file_number,
        delete_records: file_number,
    }
}

fn control_sample() -> ControlFile {
    ControlFile {
        lcp_id: 9,
        previous_lcp_id: 8,
        table_id: 4,
        table_version: 2,
        partition: 3,
        row_id_page_shift: DEFAULT_ROW_ID_PAGE_SHIFT,
        max_gci_completed: 0x33_0000_0000,
        max_gci_written: 0x34_0000_0002,
        redo_start_lsn: 123_456,
        row_count: 1_000_000,
        max_page_count: 9_000,
        data_files: vec![
            entry(10, 0, 2048, 3, 0x30_0000_0000),
            entry(11, 2000, 100, 5, 0x31_0000_0000),
            entry(12, 52, 10, 9, 0x34_0000_0002),
        ],
    }
}

/// Recomputes a control file's trailing checksum after a test edits it.
fn reseal(bytes: &mut [u8]) {
    let at = bytes.len() - 4;
    let checksum = crc32c::crc32c(&bytes[..at]);
    put_u32(bytes, at, checksum);
}

#[test]
fn part_ranges_wrap() {
    let range = PartRange::new(2046, 4);
    assert_eq!(range.parts().collect::<Vec<_>>(), vec![2046, 2047, 0, 1]);
    assert!(range.contains(2047) && range.contains(0) && range.contains(1));
    assert!(!range.contains(2) && !range.contains(2045));
    assert_eq!(range.next_first(), 2);
    assert!((0..PART_COUNT).all(|part| PartRange::ALL.contains(part)));
    assert_eq!(PartRange::ALL.next_first(), 0);
    assert_eq!(part_of_row_id((2049 << 10) | 5, 10), 1);
    assert_eq!(part_of_row_id(7, 10), 0);
    assert_eq!(page_of_row_id((3 << 10) | 1023, 10), 3);
}

#[test]
#[should_panic(expected = "part count must be 1..=2048")]
fn empty_part_range_is_refused() {
    PartRange::new(0, 0);
}

#[test]
fn control_round_trip() {
    let control = control_sample();
    let bytes = control.encode();
    assert_eq!(
        bytes.len(),
        CONTROL_HEADER_BYTES + 3 * CONTROL_ENTRY_BYTES + 4
    );
    assert_eq!(&bytes[..8], b"TSLCPCTL");
    assert_eq!(get_u32(&bytes, 12) as usize, bytes.len());
    assert_eq!(get_u64(&bytes, 56), control.max_gci_written);
    assert_eq!(
        get_u32(&bytes, CONTROL_HEADER_BYTES),
        10,
        "first entry's file number"
    );
    assert_eq!(ControlFile::decode(&bytes), Ok(control.clone()));
    assert!(control.references(11) && !control.references(13));
    assert!(control.is_restorable(0x34_0000_0002) && !control.is_restorable(0x34_0000_0001));
}

#[test]
fn control_every_single_bit_flip_is_detected() {
    let bytes = control_sample().encode();
    for bit in 0..bytes.len() * 8 {
        let mut flipped = bytes.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        let error = ControlFile::decode(&flipped).expect_err("flip detected");
        assert!(error.offset() <= bytes.len() as u64, "{error}");
    }
}

#[test]
fn control_truncated_or_extended_is_detected() {
    let bytes = control_sample().encode();
    for length in 0..bytes.len() {
        let error = ControlFile::decode(&bytes[..length]).expect_err("cut detected");
        assert!(error.offset() <= bytes.len() as u64);
    }
    let mut longer = bytes.clone();
    longer.push(0);
    let error = ControlFile::decode(&longer).expect_err("a byte after the end");
    assert!(matches!(error, LcpError::Invalid { .. }), "{error}");
    assert_eq!(error.offset(), bytes.len() as u64);
}

#[test]
fn control_rules_are_checked_behind_a_good_checksum() {
    // Parts 1000..2000 left out of every full range: nothing restores them.
    let mut bytes = control_sample().encode();
    put_u16(&mut bytes, CONTROL_HEADER_BYTES + 6, 1000);
    reseal(&mut bytes);
    let error = ControlFile::decode(&bytes).expect_err("uncovered part");
    assert_eq!(error.offset(), CONTROL_HEADER_BYTES as u64);
    assert!(error.to_string().contains("part 1000"), "{error}");
    // File numbers must grow along the chain.
    let mut bytes = control_sample().encode();
    put_u32(&mut bytes, CONTROL_HEADER_BYTES + CONTROL_ENTRY_BYTES, 9);
    reseal(&mut bytes);
    let error = ControlFile::decode(&bytes).expect_err("numbers go down");
    assert_eq!(
        error.offset(),
        (CONTROL_HEADER_BYTES + CONTROL_ENTRY_BYTES) as u64
    );
    // An entry's GCI above the LCP's max_gci_written.
    let mut bytes = control_sample().encode();
    put_u64(&mut bytes, 56, 0x34_0000_0001);
    reseal(&mut bytes);
    let error = ControlFile::decode(&bytes).expect_err("gci above max");
    assert_eq!(
        error.offset(),
        (CONTROL_HEADER_BYTES + 2 * CONTROL_ENTRY_BYTES + 16) as u64
    );
    // A foreign magic behind a good checksum.
    let mut bytes = control_sample().encode();
    bytes[0] = b'X';
    reseal(&mut bytes);
    assert_eq!(
        ControlFile::decode(&bytes),
        Err(LcpError::BadMagic { offset: 0 })
    );
}

#[test]
#[should_panic(expected = "held in full by no data file")]
fn encoding_an_incomplete_chain_panics() {
    let mut control = control_sample();
    control.data_files.remove(0);
    control.encode();
}

#[test]
fn restore_plan_roles() {
    let control = control_sample();
    let plan = control.restore_plan();
    assert_eq!(plan.first_needed(), 0);
    // Part 100: only file 0 holds it in full; later files carry changes.
    assert_eq!(plan.part_role(0, 100), PartRole::AllRows);
    assert_eq!(plan.part_role(1, 100), PartRole::Changes);
    assert_eq!(plan.part_role(2, 100), PartRole::Changes);
    // Part 2047: file 1 holds it in full, so file 0's copy is skipped.
    assert_eq!(plan.part_role(0, 2047), PartRole::Skip);
    assert_eq!(plan.part_role(1, 2047), PartRole::AllRows);
    assert_eq!(plan.part_role(2, 2047), PartRole::Changes);
    // Part 55: file 2.
    assert_eq!(plan.part_role(1, 55), PartRole::Skip);
    assert_eq!(plan.part_role(2, 55), PartRole::AllRows);
    // Pages at or above max_page_count are skipped whatever the part.
    let row_on_page = |page: u32| page << DEFAULT_ROW_ID_PAGE_SHIFT;
    assert_eq!(plan.row_role(0, row_on_page(100)), PartRole::AllRows);
    assert_eq!(
        plan.row_role(0, row_on_page(8_999)),
        plan.part_role(0, (8_999 % 2048) as u16)
    );
    assert_eq!(plan.row_role(0, row_on_page(9_000)), PartRole::Skip);
}

#[test]
fn append_and_trim_drops_files_whose_parts_are_all_newer() {
    let chain = vec![entry(1, 0, 2048, 1, 1)];
    // A full LCP replaces the whole chain.
    assert_eq!(
        append_and_trim(&chain, entry(2, 0, 2048, 2, 2)),
        vec![entry(2, 0, 2048, 2, 2)]
    );
    // Rotating halves: after two halves the first full file is not needed.
    let chain = append_and_trim(&chain, entry(2, 0, 1024, 2, 2));
    assert_eq!(chain.len(), 2);
    let chain = append_and_trim(&chain, entry(3, 1024, 1024, 3, 3));
    assert_eq!(
        chain.iter().map(|e| e.file_number).collect::<Vec<_>>(),
        vec![2, 3]
    );
    let older = ControlFile {
        data_files: vec![entry(1, 0, 2048, 1, 1), entry(2, 0, 1024, 2, 2)],
        lcp_id: 2,
        max_gci_written: 2,
        ..control_sample()
    };
    let newer = ControlFile {
        data_files: chain,
        lcp_id: 3,
        previous_lcp_id: 2,
        max_gci_written: 3,
        ..control_sample()
    };
    assert_eq!(files_to_delete(&older, &newer).collect::<Vec<_>>(), vec![1]);
}

#[test]
#[should_panic(expected = "every part in full")]
fn a_first_lcp_must_hold_every_part() {
    append_and_trim(&[], entry(1, 0, 100, 1, 1));
}

fn header_sample() -> DataFileHeader {
    DataFileHeader {
        file_number: 12,
        lcp_id: 9,
        table_id: 4,
        table_version: 2,
        partition: 3,
        full_parts: PartRange::new(52, 10),
        row_id_page_shift: DEFAULT_ROW_ID_PAGE_SHIFT,
    }
}

/// A data file with rows in full and change parts and deletes.
fn data_sample() -> (Vec<u8>, DataFileSummary, Records) {
    let mut out = Vec::new();
    let mut writer = DataFileWriter::new(header_sample(), &mut out);
    let mut expected = Vec::new();
    for index in 0..20u32 {
        let row_id = ((index * 37) << DEFAULT_ROW_ID_PAGE_SHIFT) | index;
        let gci = 0x34_0000_0000 + u64::from(index % 3);
        let part = part_of_row_id(row_id, DEFAULT_ROW_ID_PAGE_SHIFT);
        if index % 4 == 3 && !header_sample().full_parts.contains(part) {
            writer.delete(&mut out, row_id, gci);
            expected.push((row_id, gci, None));
        } else {
            let image: Vec<u8> = (0..index * 3).map(|byte| byte as u8 ^ 0x5a).collect();
            writer.row(&mut out, row_id, gci, &image);
            expected.push((row_id, gci, Some(image)));
        }
    }
    let summary = writer.finish(&mut out);
    (out, summary, expected)
}

fn read_all(bytes: &[u8]) -> Result<(DataFileHeader, Records, DataFileSummary), LcpError> {
    let mut reader = DataFileReader::new(bytes, bytes.len() as u64)?;
    let mut records = Vec::new();
    while let Some((offset, record)) = reader.next_in_file(bytes)? {
        assert!(offset < bytes.len() as u64);
        records.push(match record {
            Record::Row { row_id, gci, image } => (row_id, gci, Some(image.to_vec())),
            Record::Delete { row_id, gci } => (row_id, gci, None),
        });
    }
    Ok((
        *reader.header(),
        records,
        reader.summary().expect("end reached"),
    ))
}

#[test]
fn data_file_round_trip() {
    let (bytes, summary, expected) = data_sample();
    assert_eq!(&bytes[..8], b"TSLCPDAT");
    assert_eq!(summary.file_bytes(), bytes.len() as u64);
    assert!(summary.delete_records > 0 && summary.row_records > 0);
    assert_eq!(summary.max_gci_written, 0x34_0000_0002);
    let (header, records, read_summary) = read_all(&bytes).expect("valid file");
    assert_eq!(header, header_sample());
    assert_eq!(records, expected);
    assert_eq!(read_summary, summary);
    // The file matches its control entry.
    let control = control_sample();
    let entry = summary.entry(&header);
    let control = ControlFile {
        data_files: vec![control.data_files[0], control.data_files[1], entry],
        ..control
    };
    header
        .check_against(&control, &entry)
        .expect("header matches");
    read_summary.check_against(&entry).expect("counts match");
    let other = DataFileEntry {
        row_records: entry.row_records + 1,
        ..entry
    };
    assert!(read_summary.check_against(&other).is_err());
    let other = DataFileEntry {
        file_number: 13,
        ..entry
    };
    assert_eq!(
        header
            .check_against(&control, &other)
            .expect_err("wrong file")
            .offset(),
        12
    );
}

#[test]
fn data_file_streams_in_any_chunk_size() {
    let (bytes, summary, expected) = data_sample();
    for chunk in [1usize, 7, 24, 25, 64, 1000] {
        let mut reader = DataFileReader::new(&bytes[..chunk.min(bytes.len())], bytes.len() as u64)
            .or_else(|_| DataFileReader::new(&bytes[..DATA_HEADER_BYTES], bytes.len() as u64))
            .expect("header");
        let mut records = Vec::new();
        let mut window = chunk;
        loop {
            let start = reader.position() as usize;
            let end = (start + window).min(bytes.len());
            match reader.next(&bytes[start..end]).expect("valid file") {
                Step::NeedMore { bytes: needed } => {
                    assert!(needed > end - start);
                    window = needed;
                }
                Step::Record { record, length, .. } => {
                    window = chunk;
                    assert_eq!(reader.position() as usize, start + length);
                    records.push(match record {
                        Record::Row { row_id, gci, image } => (row_id, gci, Some(image.to_vec())),
                        Record::Delete { row_id, gci } => (row_id, gci, None),
                    });
                }
                Step::End(read) => {
                    assert_eq!(read, summary);
                    break;
                }
            }
        }
        assert_eq!(records, expected, "chunk {chunk}");
    }
}

#[test]
fn data_file_every_single_bit_flip_is_detected() {
    let (bytes, _, _) = data_sample();
    for bit in 0..bytes.len() * 8 {
        let mut flipped = bytes.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        let error = read_all(&flipped).expect_err("flip detected");
        assert!(error.offset() <= bytes.len() as u64, "{error}");
        // The error points at the record (or header) holding the flip, or
        // at the length field that made the reader look elsewhere.
        let near = (bit / 8 + DATA_HEADER_BYTES) as u64;
        assert!(
            error.offset() <= near || matches!(error, LcpError::Truncated { .. }),
            "bit {bit}: {error}"
        );
    }
}

#[test]
fn data_file_truncated_or_extended_is_detected() {
    let (bytes, _, _) = data_sample();
    for length in 0..bytes.len() {
        let error = read_all(&bytes[..length]).expect_err("cut detected");
        assert!(error.offset() <= length as u64, "{error}");
    }
    let mut longer = bytes.clone();
    longer.extend_from_slice(&[0; 3]);
    let error = read_all(&longer).expect_err("trailing bytes");
    assert_eq!(error.offset(), bytes.len() as u64);
}

#[test]
#[should_panic(expected = "which this file holds in full")]
fn writer_refuses_deletes_in_full_parts() {
    let mut out = Vec::new();
    let mut writer = DataFileWriter::new(header_sample(), &mut out);
    writer.delete(&mut out, 52 << DEFAULT_ROW_ID_PAGE_SHIFT, 1);
}

#[test]
fn reader_refuses_deletes_in_full_parts() {
    let header = DataFileHeader {
        full_parts: PartRange::new(0, 1),
        ..header_sample()
    };
    let mut out = Vec::new();
    let mut writer = DataFileWriter::new(header_sample(), &mut out);
    writer.delete(&mut out, 0, 1);
    writer.finish(&mut out);
    // The same records under a header that holds part 0 in full.
    out[..DATA_HEADER_BYTES].copy_from_slice(&{
        let mut other = Vec::new();
        DataFileWriter::new(header, &mut other);
        other
    });
    let error = read_all(&out).expect_err("delete in a full part");
    assert_eq!(error.offset(), (DATA_HEADER_BYTES + 12) as u64);
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = XorShift::new(99);
    let control = control_sample().encode();
    let (data, _, _) = data_sample();
    for round in 0..20_000u64 {
        let length = rng.below(600) as usize;
        let mut bytes: Vec<u8> = (0..length).map(|_| rng.next_u64() as u8).collect();
        match round % 4 {
            // Real files with a few bytes overwritten or cut.
            0 => {
                bytes = control.clone();
                for _ in 0..1 + rng.below(3) {
                    let at = rng.below(bytes.len() as u64) as usize;
                    bytes[at] = rng.next_u64() as u8;
                }
            }
            1 => {
                bytes = data[..rng.below(data.len() as u64 + 1) as usize].to_vec();
                if !bytes.is_empty() && rng.below(2) == 0 {
                    let at = rng.below(bytes.len() as u64) as usize;
                    bytes[at] = rng.next_u64() as u8;
                }
            }
            // A valid data header followed by garbage.
            2 => {
                let mut file = data[..DATA_HEADER_BYTES].to_vec();
                file.extend_from_slice(&bytes);
                bytes = file;
            }
            _ => {}
        }
        let _ = ControlFile::decode(&bytes);
        let _ = choose_control(Some(&bytes), Some(&control), 4, 3, rng.next_u64());
        let _ = read_all(&bytes);
        if let Ok(mut reader) = DataFileReader::new(&bytes, rng.below(1 << 20)) {
            let start = (reader.position() as usize).min(bytes.len());
            let _ = reader.next(&bytes[start..]);
        }
    }
}

fn first_lcp(lcp_id: u64, max_gci_written: u64) -> ControlFile {
    ControlFile {
        lcp_id,
        previous_lcp_id: 0,
        max_gci_written,
        data_files: vec![entry(1, 0, 2048, lcp_id, max_gci_written)],
        ..control_sample()
    }
}

fn next_lcp(previous: &ControlFile, max_gci_written: u64) -> ControlFile {
    let lcp_id = previous.lcp_id + 1;
    let last = previous.data_files.last().expect("chain");
    let new = entry(last.file_number + 1, 0, 2048, lcp_id, max_gci_written);
    ControlFile {
        lcp_id,
        previous_lcp_id: previous.lcp_id,
        max_gci_written,
        data_files: append_and_trim(&previous.data_files, new),
        ..previous.clone()
    }
}

#[test]
fn choose_control_decision_table() {
    let older = next_lcp(&first_lcp(4, 50), 100);
    let newer = next_lcp(&older, 200);
    let (o, n) = (older.encode(), newer.encode());
    let mut torn = n.clone();
    torn.truncate(n.len() / 2);
    let mut rotten = o.clone();
    rotten[30] ^= 4;
    let choose =
        |zero: Option<&[u8]>, one: Option<&[u8]>, gci| choose_control(zero, one, 4, 3, gci);

    // Newer not yet restorable: the older one, the newer passed over.
    let choice = choose(Some(&o), Some(&n), 150).expect("older restorable");
    assert_eq!(choice.restore, Some((ControlSlot::Zero, older.clone())));
    assert_eq!(choice.write_next, ControlSlot::One);
    assert_eq!(choice.newest_lcp_id, newer.lcp_id);
    assert_eq!(
        choice.passed_over,
        vec![(
            ControlSlot::One,
            SlotProblem::NotRestorable {
                lcp_id: newer.lcp_id,
                max_gci_written: 200
            }
        )]
    );
    // Both restorable: the newer, and the older is overwritten next.
    let choice = choose(Some(&o), Some(&n), 250).expect("newer restorable");
    assert_eq!(choice.restore, Some((ControlSlot::One, newer.clone())));
    assert_eq!(choice.write_next, ControlSlot::Zero);
    assert!(choice.passed_over.is_empty());
    // A torn newer file (crash mid-write): the older one, damage reported.
    let choice = choose(Some(&o), Some(&torn), 250).expect("older restorable");
    assert_eq!(choice.restore, Some((ControlSlot::Zero, older.clone())));
    assert!(matches!(
        &choice.passed_over[..],
        [(
            ControlSlot::One,
            SlotProblem::Damaged(LcpError::Truncated { .. })
        )]
    ));
    // A rotten older file under a restorable newer one: the newer.
    let choice = choose(Some(&rotten), Some(&n), 250).expect("newer restorable");
    assert_eq!(choice.restore, Some((ControlSlot::One, newer.clone())));
    assert!(matches!(
        &choice.passed_over[..],
        [(ControlSlot::Zero, SlotProblem::Damaged(_))]
    ));
    // The rotten older one was the only restorable LCP: stop, naming it.
    let error = choose(Some(&rotten), Some(&n), 150).expect_err("nothing restorable");
    let message = error.to_string();
    assert!(
        message.contains("control file 0 damaged, at byte"),
        "{message}"
    );
    assert!(
        message.contains("control file 1 LCP 6 needs GCI 200"),
        "{message}"
    );
    // Both damaged.
    assert!(matches!(
        choose(Some(&rotten), Some(&torn), 250),
        Err(ChoiceError::NoRestorableLcp { .. })
    ));
    // A partition with no LCP yet, or whose first LCP's write was torn or
    // never became restorable: redo alone, the first LCP goes to both slots.
    for (zero, one) in [
        (None, None),
        (Some(&torn[..]), None),
        (Some(&[][..]), Some(&torn[..])),
    ] {
        let choice = choose(zero, one, 250).expect("no LCP yet");
        assert_eq!(choice.restore, None);
        assert_eq!(choice.write_next, ControlSlot::Zero);
    }
    let first = first_lcp(4, 50).encode();
    let choice = choose(Some(&first), Some(&first), 40).expect("first LCP not restorable");
    assert_eq!(choice.restore, None);
    assert_eq!(choice.passed_over.len(), 2);
    let choice = choose(Some(&first), Some(&torn), 40).expect("first LCP not restorable");
    assert_eq!(choice.restore, None);
    let choice = choose(Some(&first), Some(&first), 50).expect("first LCP restorable");
    assert_eq!(choice.restore, Some((ControlSlot::Zero, first_lcp(4, 50))));
    // Another partition's file, and two different files with one LCP id.
    let foreign = ControlFile {
        partition: 9,
        ..older.clone()
    }
    .encode();
    assert!(matches!(
        choose(Some(&o), Some(&foreign), 250),
        Err(ChoiceError::WrongPartition {
            slot: ControlSlot::One,
            partition: 9,
            ..
        })
    ));
    let twin = ControlFile {
        row_count: 1,
        ..older.clone()
    }
    .encode();
    assert_eq!(
        choose(Some(&o), Some(&twin), 250),
        Err(ChoiceError::Disagree {
            lcp_id: older.lcp_id
        })
    );
}

/// Two control slots on a disk; a crash during a write leaves a torn copy.
#[test]
fn control_protocol_survives_crashes() {
    let mut rng = XorShift::new(5);
    let mut slots: [Option<Vec<u8>>; 2] = [None, None];
    let slot_index = |slot: ControlSlot| slot.index() as usize;
    let mut durable: Option<ControlFile> = None;
    let mut lcp_id = 0;
    let mut gci = 10;
    for round in 0..2_000 {
        // Restart (every round, so every crash is followed by one).
        let choice = choose_control(slots[0].as_deref(), slots[1].as_deref(), 4, 3, u64::MAX)
            .unwrap_or_else(|error| panic!("round {round}: {error}"));
        assert_eq!(
            choice.restore.as_ref().map(|(_, control)| control),
            durable.as_ref(),
            "round {round}"
        );
        lcp_id = lcp_id.max(choice.newest_lcp_id) + 1;
        gci += 1;
        let new = match &choice.restore {
            None => ControlFile {
                lcp_id,
                ..first_lcp(1, gci)
            },
            Some((_, previous)) => {
                let mut new = next_lcp(previous, gci);
                new.lcp_id = lcp_id;
                new.data_files.last_mut().expect("new file").lcp_id = lcp_id;
                new
            }
        };
        let bytes = new.encode();
        let torn = |rng: &mut XorShift| bytes[..rng.below(bytes.len() as u64) as usize].to_vec();
        let crash = rng.below(4) == 0;
        if choice.restore.is_none() {
            // The first LCP: slot Zero, then slot One.
            if crash && rng.below(2) == 0 {
                slots[0] = Some(torn(&mut rng));
                continue;
            }
            slots[0] = Some(bytes.clone());
            durable = Some(new.clone());
            slots[1] = Some(if crash { torn(&mut rng) } else { bytes.clone() });
        } else {
            let target = slot_index(choice.write_next);
            if crash {
                slots[target] = Some(torn(&mut rng));
            } else {
                slots[target] = Some(bytes);
                durable = Some(new);
            }
        }
    }
}

/// The model test: a partition under random inserts, updates and deletes,
/// checkpointed by partial LCPs of random size (rotating parts, as
/// Durability II will), files deleted as soon as a newer LCP frees them,
/// restored now and then from the files alone and compared with the model.
#[test]
fn partial_lcp_chains_restore_the_model() {
    const ROWS: u32 = 6_000;
    let shift = 0; // one row per page: part = row_id % 2048
    let mut rng = XorShift::new(77);
    let mut model: BTreeMap<u32, (u64, Vec<u8>)> = BTreeMap::new();
    let mut delete_gci: HashMap<u32, u64> = HashMap::new();
    let mut changed: BTreeSet<u32> = BTreeSet::new();
    let mut disk: HashMap<u32, Vec<u8>> = HashMap::new();
    let mut control_bytes: Option<Vec<u8>> = None;
    let mut gci = 1u64;
    let mut longest_chain = 0;
    for lcp_id in 1..=300u64 {
        // Load: a burst of changes, sometimes none.
        let changes = match rng.below(5) {
            0 => 0,
            1 => rng.below(3_000),
            _ => rng.below(80),
        };
        for _ in 0..changes {
            gci += rng.below(2);
            let row_id = rng.below(u64::from(ROWS)) as u32;
            if rng.below(3) == 0 {
                if model.remove(&row_id).is_some() {
                    delete_gci.insert(row_id, gci);
                    changed.insert(row_id);
                }
            } else {
                let image = (0..rng.below(12)).map(|_| rng.next_u64() as u8).collect();
                model.insert(row_id, (gci, image));
                changed.insert(row_id);
            }
        }
        let previous = control_bytes
            .as_ref()
            .map(|bytes| ControlFile::decode(bytes).expect("own control file"));
        let mut control = match &previous {
            // An unchanged partition writes only a new control file.
            Some(previous) if changed.is_empty() => ControlFile {
                lcp_id,
                previous_lcp_id: previous.lcp_id,
                ..previous.clone()
            },
            _ => {
                let full_parts = match &previous {
                    None => PartRange::ALL,
                    Some(previous) => {
                        let last = previous.data_files.last().expect("chain");
                        // Mostly a few parts (long chains), sometimes many.
                        let bound = if rng.below(4) == 0 {
                            u64::from(PART_COUNT)
                        } else {
                            64
                        };
                        PartRange::new(last.full_parts.next_first(), 1 + rng.below(bound) as u16)
                    }
                };
                let file_number = previous
                    .as_ref()
                    .map_or(1, |p| p.data_files.last().expect("chain").file_number + 1);
                let header = DataFileHeader {
                    file_number,
                    lcp_id,
                    table_id: 4,
                    table_version: 1,
                    partition: 3,
                    full_parts,
                    row_id_page_shift: shift,
                };
                let mut out = Vec::new();
                let mut writer = DataFileWriter::new(header, &mut out);
                for (&row_id, (row_gci, image)) in &model {
                    let part = part_of_row_id(row_id, shift);
                    if full_parts.contains(part) || changed.contains(&row_id) {
                        writer.row(&mut out, row_id, *row_gci, image);
                    }
                }
                for &row_id in &changed {
                    if !model.contains_key(&row_id)
                        && !full_parts.contains(part_of_row_id(row_id, shift))
                    {
                        writer.delete(&mut out, row_id, delete_gci[&row_id]);
                    }
                }
                let summary = writer.finish(&mut out);
                assert!(
                    disk.insert(file_number, out).is_none(),
                    "file numbers are never reused"
                );
                let chain = previous.as_ref().map_or(&[][..], |p| &p.data_files[..]);
                let data_files = append_and_trim(chain, summary.entry(&header));
                ControlFile {
                    lcp_id,
                    previous_lcp_id: previous.as_ref().map_or(0, |p| p.lcp_id),
                    table_id: 4,
                    table_version: 1,
                    partition: 3,
                    row_id_page_shift: shift,
                    max_gci_completed: gci,
                    max_gci_written: previous
                        .as_ref()
                        .map_or(0, |p| p.max_gci_written)
                        .max(summary.max_gci_written),
                    redo_start_lsn: lcp_id * 1000,
                    row_count: 0,
                    max_page_count: ROWS,
                    data_files,
                }
            }
        };
        control.row_count = model.len() as u64;
        longest_chain = longest_chain.max(control.data_files.len());
        changed.clear();
        // The LCP is restorable at once here (the test has no GCP lag), so
        // the files it freed go.
        if let Some(previous) = &previous {
            for file in files_to_delete(previous, &control) {
                disk.remove(&file).expect("deleted once");
            }
        }
        let bytes = control.encode();
        control_bytes = Some(bytes);
        assert_eq!(
            disk.len(),
            control.data_files.len(),
            "only the chain's files stay on disk"
        );
        if lcp_id % 7 == 0 || lcp_id == 300 {
            let restored = restore(control_bytes.as_ref().expect("written"), &disk);
            let expected: BTreeMap<u32, (u64, Vec<u8>)> = model.clone();
            assert_eq!(restored, expected, "LCP {lcp_id}");
        }
    }
    assert!(
        longest_chain > 20,
        "the test builds long chains ({longest_chain})"
    );
}

/// Restore from a control file and the data files it names.
fn restore(control_bytes: &[u8], disk: &HashMap<u32, Vec<u8>>) -> BTreeMap<u32, (u64, Vec<u8>)> {
    let control = ControlFile::decode(control_bytes).expect("control file");
    let plan = control.restore_plan();
    let mut rows = BTreeMap::new();
    for (index, entry) in control.data_files.iter().enumerate() {
        let bytes = disk
            .get(&entry.file_number)
            .expect("every chain file is on disk");
        let mut reader = DataFileReader::new(bytes, bytes.len() as u64).expect("header");
        reader
            .header()
            .check_against(&control, entry)
            .expect("the file the chain names");
        while let Some((_, record)) = reader.next_in_file(bytes).expect("valid records") {
            match record {
                Record::Row { row_id, gci, image } => match plan.row_role(index, row_id) {
                    PartRole::Skip => {}
                    PartRole::AllRows | PartRole::Changes => {
                        rows.insert(row_id, (gci, image.to_vec()));
                    }
                },
                Record::Delete { row_id, .. } => match plan.row_role(index, row_id) {
                    PartRole::Skip => {}
                    PartRole::AllRows => panic!("a delete record in a part held in full"),
                    PartRole::Changes => {
                        rows.remove(&row_id);
                    }
                },
            }
        }
        reader
            .summary()
            .expect("end")
            .check_against(entry)
            .expect("counts");
    }
    assert_eq!(rows.len() as u64, control.row_count);
    rows
}
