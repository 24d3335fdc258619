//! What the client's end-to-end tests share.

use client::{ColumnDef, ColumnType, TableDef};

/// Table `kv`: an INT UNSIGNED key `k` and a BIGINT `v`, both NOT NULL.
pub fn kv_table() -> TableDef {
    let column = |name: &str, column_type| ColumnDef {
        name: name.into(),
        column_type,
        nullable: false,
    };
    TableDef {
        indexes: Vec::new(),
        revision: 0,
        id: 0,
        version: 0,
        name: "kv".into(),
        partitions: 0,
        primary_key: vec![0],
        columns: vec![
            column("k", ColumnType::Int { unsigned: true }),
            column("v", ColumnType::BigInt { unsigned: false }),
        ],
        partition_key: Vec::new(),
    }
}
