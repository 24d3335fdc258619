//! The cost secondary ordered indexes add to a row's insert
//! (docs/design/0023-secondary-indexes.md): rows inserted and committed
//! into one partition through the same calls the ldm makes (reserve a
//! slot, fill it, promise the indexes' nodes, commit), without and with
//! three secondary indexes (an INT, a BIGINT, and a VARCHAR with an INT),
//! in random key order. Prints ns per row for each; run under
//! `valgrind --tool=callgrind` with a small row count for instructions
//! per row.
//!
//! `cargo run --release -p rowstore --example index_insert_bench -- [ROWS] [INDEXES]`
//! (INDEXES 0 to 3: that configuration alone, for callgrind).

use rowstore::page_memory::PageMemory;
use rowstore::{Partition, RowLayout};
use signal::attr::AttrWriter;
use signal::schema::{ColumnDef, ColumnType, IndexDef, TableDef};
use std::time::Instant;
use stdx::mix::XorShift;

fn table(indexes: usize) -> TableDef {
    let all = [
        IndexDef {
            id: 1,
            name: "by_a".into(),
            columns: vec![1],
            unique: None,
        },
        IndexDef {
            id: 2,
            name: "by_b".into(),
            columns: vec![2],
            unique: None,
        },
        IndexDef {
            id: 3,
            name: "by_s_a".into(),
            columns: vec![3, 1],
            unique: None,
        },
    ];
    TableDef {
        id: 1,
        version: 1,
        name: "t".into(),
        columns: vec![
            ColumnDef::new("k", ColumnType::BigInt { unsigned: true }, false),
            ColumnDef::new("a", ColumnType::Int { unsigned: false }, false),
            ColumnDef::new("b", ColumnType::BigInt { unsigned: false }, false),
            ColumnDef::new("s", ColumnType::VarChar(32), false),
        ],
        primary_key: vec![0],
        partitions: 1,
        indexes: all[..indexes].to_vec(),
        revision: 0,
        partition_key: Vec::new(),
    }
}

/// ns per row of inserting `rows` rows into a partition of `table`;
/// `check` compares every index with the rows afterwards.
fn run(table: &TableDef, rows: u64, check: bool) -> f64 {
    let layout = RowLayout::new(table);
    let mut memory = PageMemory::new(rows * 400 + (64 << 20));
    let mut partition = Partition::new(0, &layout, &memory);
    for index in &table.indexes {
        partition.add_secondary_index(&memory, &layout, index.id, &index.columns);
    }
    let mut random = XorShift::new(7);
    let mut image = vec![0u8; layout.image_max_bytes()];
    let mut key = [0u8; 16];
    let mut changes = [0u8; 128];
    let started = Instant::now();
    for _ in 0..rows {
        let k = random.next_u64();
        let text = format!("{:012x}", random.next_u64());
        let key_length = {
            let mut writer = AttrWriter::new(&mut key);
            writer.push(0, Some(&k.to_le_bytes())).unwrap();
            writer.len()
        };
        let changes_length = {
            let mut writer = AttrWriter::new(&mut changes);
            writer
                .push(1, Some(&(random.next_u64() as i32).to_le_bytes()))
                .unwrap();
            writer
                .push(2, Some(&(random.next_u64() as i64).to_le_bytes()))
                .unwrap();
            writer.push(3, Some(text.as_bytes())).unwrap();
            writer.len()
        };
        let length = layout
            .build_image(
                &mut image,
                None,
                &key[..key_length],
                &changes[..changes_length],
            )
            .expect("a valid row");
        let row = partition.reserve_row(&mut memory).expect("memory");
        partition
            .fill_reserved_row(&mut memory, &layout, row, &image[..length], k as u32)
            .expect("memory");
        partition.commit_row(&mut memory, &layout, row, 1, 0);
    }
    let elapsed = started.elapsed().as_nanos() as f64 / rows as f64;
    if check {
        partition
            .check_ordered(&memory, &layout)
            .expect("every index equals the rows");
    }
    elapsed
}

fn main() {
    let rows: u64 = std::env::args()
        .nth(1)
        .map(|text| text.parse().expect("ROWS is a number"))
        .unwrap_or(1_000_000);
    if let Some(indexes) = std::env::args().nth(2) {
        let indexes: usize = indexes.parse().expect("INDEXES is 0 to 3");
        let ns = run(&table(indexes.min(3)), rows, false);
        println!("{rows} rows, {indexes} secondary indexes: {ns:.0} ns per insert and commit");
        return;
    }
    let without = run(&table(0), rows, true);
    let with = run(&table(3), rows, true);
    println!("{rows} rows, ns per insert and commit:");
    println!("  primary key's ordered index only: {without:.0}");
    println!(
        "  and 3 secondary indexes: {with:.0} ({:.2}x)",
        with / without
    );
}
