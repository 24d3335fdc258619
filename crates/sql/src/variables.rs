//! System variables: the ones drivers and tools ask for when they connect
//! (`SELECT @@max_allowed_packet, @@wait_timeout`, `SHOW VARIABLES`) with
//! MySQL 8.0's defaults, and the few that change what the SQL node does
//! (`autocommit`). A session's SET keeps its value for the session;
//! `SET GLOBAL` is refused: a SQL node keeps no state of its own.

use crate::value::Value;

/// What the SQL node calls itself: a MySQL 8.0 version, so drivers pick
/// their 8.0 behaviour, then Tessera's.
pub const VERSION: &str = concat!("8.0.36-tessera-", env!("CARGO_PKG_VERSION"));

/// The variables and their defaults (names lower case, sorted).
pub fn defaults() -> Vec<(&'static str, Value)> {
    let text = |s: &str| Value::from(s);
    let int = Value::Int;
    vec![
        ("auto_increment_increment", int(1)),
        ("auto_increment_offset", int(1)),
        ("big_tables", int(0)),
        ("autocommit", int(1)),
        ("character_set_client", text("utf8mb4")),
        ("character_set_connection", text("utf8mb4")),
        ("character_set_database", text("utf8mb4")),
        ("character_set_results", text("utf8mb4")),
        ("character_set_server", text("utf8mb4")),
        ("collation_connection", text("utf8mb4_bin")),
        ("collation_database", text("utf8mb4_bin")),
        ("collation_server", text("utf8mb4_bin")),
        ("cte_max_recursion_depth", int(1000)),
        ("default_storage_engine", text("ndbcluster")),
        ("default_week_format", int(0)),
        ("div_precision_increment", int(4)),
        ("explicit_defaults_for_timestamp", int(1)),
        ("foreign_key_checks", int(1)),
        ("group_concat_max_len", int(1024)),
        ("have_ssl", text("DISABLED")),
        ("init_connect", text("")),
        ("innodb_lock_wait_timeout", int(50)),
        ("interactive_timeout", int(28800)),
        ("license", text("Apache-2.0")),
        ("lock_wait_timeout", int(31536000)),
        ("lower_case_table_names", int(0)),
        ("max_execution_time", int(0)),
        ("max_allowed_packet", int(67108864)),
        ("max_connections", int(4096)),
        ("net_buffer_length", int(16384)),
        ("net_read_timeout", int(30)),
        ("net_write_timeout", int(60)),
        ("performance_schema", int(0)),
        ("query_cache_size", int(0)),
        ("query_cache_type", text("OFF")),
        ("socket", text("")),
        ("sql_auto_is_null", int(0)),
        ("sql_big_selects", int(1)),
        ("sql_log_bin", int(1)),
        ("sql_mode", text("ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION")),
        ("sql_notes", int(1)),
        ("sql_quote_show_create", int(1)),
        ("sql_safe_updates", int(0)),
        ("sql_select_limit", Value::UInt(u64::MAX)),
        ("sql_warnings", int(0)),
        ("system_time_zone", text("UTC")),
        ("time_zone", text("SYSTEM")),
        ("transaction_allow_batching", int(0)),
        ("transaction_isolation", text("READ-COMMITTED")),
        ("transaction_read_only", int(0)),
        ("unique_checks", int(1)),
        ("tx_isolation", text("READ-COMMITTED")),
        ("tx_read_only", int(0)),
        ("version", text(VERSION)),
        ("version_comment", text("Tessera: a distributed in-memory database in NDB's architecture")),
        ("version_compile_machine", text(std::env::consts::ARCH)),
        ("version_compile_os", text(std::env::consts::OS)),
        ("wait_timeout", int(28800)),
    ]
}

/// The variables that are switches, 1 or 0 (ON or OFF): a word other
/// than ON, OFF, TRUE or FALSE is a wrong value for them (1231), where
/// it is a wrong type (1232) for a variable that holds a count.
const SWITCHES: &[&str] = &[
    "autocommit",
    "big_tables",
    "explicit_defaults_for_timestamp",
    "foreign_key_checks",
    "sql_auto_is_null",
    "sql_big_selects",
    "sql_log_bin",
    "sql_notes",
    "sql_quote_show_create",
    "sql_safe_updates",
    "sql_warnings",
    "transaction_allow_batching",
    "transaction_read_only",
    "tx_read_only",
    "unique_checks",
];

/// Whether variable `name` (lower case) is a switch.
pub fn is_switch(name: &str) -> bool {
    SWITCHES.contains(&name)
}

/// The default of `name` (lower case), if it is a variable.
pub fn default_of(name: &str) -> Option<Value> {
    defaults()
        .into_iter()
        .find(|(known, _)| *known == name)
        .map(|(_, value)| value)
}

/// A LIKE pattern over variable names (case-insensitive, as MySQL's).
pub fn name_matches(name: &str, pattern: Option<&str>) -> bool {
    match pattern {
        None => true,
        Some(pattern) => crate::expr::like(
            name.to_ascii_lowercase().as_bytes(),
            pattern.to_ascii_lowercase().as_bytes(),
        ),
    }
}
