//! constants: the protocol's numbers: capability flags, server status
//! flags, column types and flags, character sets and command bytes. Names
//! follow MySQL's own so they can be looked up in its documentation.

// Capability flags, negotiated in the handshake: the server advertises its
// set, the client answers with the subset it uses.

/// Use the improved version of old password authentication (always set).
pub const CLIENT_LONG_PASSWORD: u32 = 0x1;
/// Report rows matched, not rows changed, as affected rows of an UPDATE.
pub const CLIENT_FOUND_ROWS: u32 = 0x2;
/// Longer column flags in column definitions (always set by 4.1+).
pub const CLIENT_LONG_FLAG: u32 = 0x4;
/// The handshake response may name a database to start in.
pub const CLIENT_CONNECT_WITH_DB: u32 = 0x8;
/// Forbid `database.table.column` names (ignored by servers).
pub const CLIENT_NO_SCHEMA: u32 = 0x10;
/// Compressed protocol (Tessera does not advertise it).
pub const CLIENT_COMPRESS: u32 = 0x20;
/// ODBC client (ignored).
pub const CLIENT_ODBC: u32 = 0x40;
/// `LOAD DATA LOCAL` may be used (Tessera does not advertise it).
pub const CLIENT_LOCAL_FILES: u32 = 0x80;
/// The parser ignores spaces before `(`.
pub const CLIENT_IGNORE_SPACE: u32 = 0x100;
/// The 4.1 protocol: the only one this crate decodes.
pub const CLIENT_PROTOCOL_41: u32 = 0x200;
/// An interactive client (selects `interactive_timeout`).
pub const CLIENT_INTERACTIVE: u32 = 0x400;
/// The client may switch to TLS after the handshake (an SSL request).
pub const CLIENT_SSL: u32 = 0x800;
/// Client-side only: do not raise SIGPIPE.
pub const CLIENT_IGNORE_SIGPIPE: u32 = 0x1000;
/// The client expects status flags in EOF packets.
pub const CLIENT_TRANSACTIONS: u32 = 0x2000;
/// Reserved (old flag for 4.1 protocol).
pub const CLIENT_RESERVED: u32 = 0x4000;
/// Auth response carries a 1-byte length (4.1 authentication).
pub const CLIENT_SECURE_CONNECTION: u32 = 0x8000;
/// A COM_QUERY may hold several statements separated by `;`.
pub const CLIENT_MULTI_STATEMENTS: u32 = 0x10000;
/// The client can handle several result sets for one COM_QUERY.
pub const CLIENT_MULTI_RESULTS: u32 = 0x20000;
/// The client can handle several result sets for one COM_STMT_EXECUTE.
pub const CLIENT_PS_MULTI_RESULTS: u32 = 0x40000;
/// Pluggable authentication: the handshake names the auth plugin.
pub const CLIENT_PLUGIN_AUTH: u32 = 0x80000;
/// The handshake response carries connection attributes.
pub const CLIENT_CONNECT_ATTRS: u32 = 0x100000;
/// The auth response is length-encoded (may exceed 255 bytes).
pub const CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA: u32 = 0x200000;
/// The client can handle expired passwords (sandbox mode).
pub const CLIENT_CAN_HANDLE_EXPIRED_PASSWORDS: u32 = 0x400000;
/// OK packets carry session state changes (Tessera does not advertise it:
/// `encode_ok` writes `info` as the rest of the packet).
pub const CLIENT_SESSION_TRACK: u32 = 0x800000;
/// The server ends result sets with an OK packet (header 0xFE) instead of
/// EOF packets.
pub const CLIENT_DEPRECATE_EOF: u32 = 0x1000000;
/// The client may ask to omit result set metadata.
pub const CLIENT_OPTIONAL_RESULTSET_METADATA: u32 = 0x2000000;
/// zstd compression.
pub const CLIENT_ZSTD_COMPRESSION_ALGORITHM: u32 = 0x4000000;
/// COM_QUERY and COM_STMT_EXECUTE carry query attributes (Tessera does not
/// advertise it, so commands never have the attributes prefix).
pub const CLIENT_QUERY_ATTRIBUTES: u32 = 0x8000000;

// Server status flags, sent in OK and EOF packets.

/// A transaction is open.
pub const SERVER_STATUS_IN_TRANS: u16 = 0x1;
/// Autocommit is on.
pub const SERVER_STATUS_AUTOCOMMIT: u16 = 0x2;
/// Another result set follows this one.
pub const SERVER_MORE_RESULTS_EXISTS: u16 = 0x8;
/// The query used a bad index.
pub const SERVER_STATUS_NO_GOOD_INDEX_USED: u16 = 0x10;
/// The query used no index.
pub const SERVER_STATUS_NO_INDEX_USED: u16 = 0x20;
/// A cursor was opened for the prepared statement (COM_STMT_FETCH works).
pub const SERVER_STATUS_CURSOR_EXISTS: u16 = 0x40;
/// The cursor's last row was sent.
pub const SERVER_STATUS_LAST_ROW_SENT: u16 = 0x80;
/// The current database was dropped.
pub const SERVER_STATUS_DB_DROPPED: u16 = 0x100;
/// `NO_BACKSLASH_ESCAPES` sql mode is on.
pub const SERVER_STATUS_NO_BACKSLASH_ESCAPES: u16 = 0x200;
/// The prepared statement's result metadata changed since prepare.
pub const SERVER_STATUS_METADATA_CHANGED: u16 = 0x400;
/// The query was logged as slow.
pub const SERVER_QUERY_WAS_SLOW: u16 = 0x800;
/// This result set holds a stored procedure's OUT parameters.
pub const SERVER_PS_OUT_PARAMS: u16 = 0x1000;
/// The open transaction is read-only.
pub const SERVER_STATUS_IN_TRANS_READONLY: u16 = 0x2000;
/// Session state changed (with CLIENT_SESSION_TRACK only).
pub const SERVER_SESSION_STATE_CHANGED: u16 = 0x4000;

/// A column's (or binary parameter's) type, as on the wire.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ColumnType {
    /// Old DECIMAL (pre-5.0), sent as text.
    Decimal = 0,
    /// TINYINT: 1 byte.
    Tiny = 1,
    /// SMALLINT: 2 bytes.
    Short = 2,
    /// INT: 4 bytes.
    Long = 3,
    /// FLOAT: 4 bytes IEEE.
    Float = 4,
    /// DOUBLE: 8 bytes IEEE.
    Double = 5,
    /// NULL: no value bytes.
    Null = 6,
    /// TIMESTAMP.
    Timestamp = 7,
    /// BIGINT: 8 bytes.
    LongLong = 8,
    /// MEDIUMINT: 4 bytes in the binary protocol.
    Int24 = 9,
    /// DATE.
    Date = 10,
    /// TIME.
    Time = 11,
    /// DATETIME.
    DateTime = 12,
    /// YEAR: 2 bytes in the binary protocol.
    Year = 13,
    /// VARCHAR.
    VarChar = 15,
    /// BIT.
    Bit = 16,
    /// JSON.
    Json = 245,
    /// DECIMAL, sent as text.
    NewDecimal = 246,
    /// ENUM.
    Enum = 247,
    /// SET.
    Set = 248,
    /// TINYBLOB / TINYTEXT.
    TinyBlob = 249,
    /// MEDIUMBLOB / MEDIUMTEXT.
    MediumBlob = 250,
    /// LONGBLOB / LONGTEXT.
    LongBlob = 251,
    /// BLOB / TEXT.
    Blob = 252,
    /// VARCHAR / VARBINARY as sent in result sets.
    VarString = 253,
    /// CHAR / BINARY.
    String = 254,
    /// GEOMETRY.
    Geometry = 255,
}

impl ColumnType {
    /// The type of a wire byte, or `None` for bytes that are not a type a
    /// client may send (including server-internal types like NEWDATE).
    pub fn from_u8(byte: u8) -> Option<ColumnType> {
        Some(match byte {
            0 => ColumnType::Decimal,
            1 => ColumnType::Tiny,
            2 => ColumnType::Short,
            3 => ColumnType::Long,
            4 => ColumnType::Float,
            5 => ColumnType::Double,
            6 => ColumnType::Null,
            7 => ColumnType::Timestamp,
            8 => ColumnType::LongLong,
            9 => ColumnType::Int24,
            10 => ColumnType::Date,
            11 => ColumnType::Time,
            12 => ColumnType::DateTime,
            13 => ColumnType::Year,
            15 => ColumnType::VarChar,
            16 => ColumnType::Bit,
            245 => ColumnType::Json,
            246 => ColumnType::NewDecimal,
            247 => ColumnType::Enum,
            248 => ColumnType::Set,
            249 => ColumnType::TinyBlob,
            250 => ColumnType::MediumBlob,
            251 => ColumnType::LongBlob,
            252 => ColumnType::Blob,
            253 => ColumnType::VarString,
            254 => ColumnType::String,
            255 => ColumnType::Geometry,
            _ => return None,
        })
    }

    /// The wire byte of this type.
    pub fn as_u8(self) -> u8 {
        self as u8
    }
}

// Column definition flags.

/// The column is NOT NULL.
pub const NOT_NULL_FLAG: u16 = 1;
/// The column is part of the primary key.
pub const PRI_KEY_FLAG: u16 = 2;
/// The column is part of a unique key.
pub const UNIQUE_KEY_FLAG: u16 = 4;
/// The column is part of a non-unique key.
pub const MULTIPLE_KEY_FLAG: u16 = 8;
/// The column is a BLOB or TEXT.
pub const BLOB_FLAG: u16 = 16;
/// The column is unsigned.
pub const UNSIGNED_FLAG: u16 = 32;
/// The column is ZEROFILL.
pub const ZEROFILL_FLAG: u16 = 64;
/// The column holds binary data (binary collation).
pub const BINARY_FLAG: u16 = 128;
/// The column is an ENUM.
pub const ENUM_FLAG: u16 = 256;
/// The column is AUTO_INCREMENT.
pub const AUTO_INCREMENT_FLAG: u16 = 512;
/// The column is a TIMESTAMP.
pub const TIMESTAMP_FLAG: u16 = 1024;
/// The column is a SET.
pub const SET_FLAG: u16 = 2048;
/// The column has no default value.
pub const NO_DEFAULT_VALUE_FLAG: u16 = 4096;
/// The column is set to now on UPDATE.
pub const ON_UPDATE_NOW_FLAG: u16 = 8192;
/// The column is numeric (clients use it to right-align).
pub const NUM_FLAG: u16 = 32768;

// Character sets (collation ids), as in the handshake and column
// definitions.

/// utf8mb4_general_ci.
pub const UTF8MB4_GENERAL_CI: u8 = 45;
/// binary: the collation of numbers, dates and BLOBs in column definitions.
pub const BINARY_CHARSET: u8 = 63;
/// utf8mb4_0900_ai_ci: MySQL 8's default.
pub const UTF8MB4_0900_AI_CI: u8 = 255;

// Command bytes: the first byte of a packet in the command phase.

/// COM_SLEEP (internal; never sent by clients).
pub const COM_SLEEP: u8 = 0x00;
/// COM_QUIT: close the connection.
pub const COM_QUIT: u8 = 0x01;
/// COM_INIT_DB: change the current database.
pub const COM_INIT_DB: u8 = 0x02;
/// COM_QUERY: run a text query.
pub const COM_QUERY: u8 = 0x03;
/// COM_FIELD_LIST: list a table's columns (deprecated).
pub const COM_FIELD_LIST: u8 = 0x04;
/// COM_CREATE_DB (deprecated).
pub const COM_CREATE_DB: u8 = 0x05;
/// COM_DROP_DB (deprecated).
pub const COM_DROP_DB: u8 = 0x06;
/// COM_REFRESH (deprecated).
pub const COM_REFRESH: u8 = 0x07;
/// COM_SHUTDOWN (deprecated).
pub const COM_SHUTDOWN: u8 = 0x08;
/// COM_STATISTICS: a human-readable status string.
pub const COM_STATISTICS: u8 = 0x09;
/// COM_PROCESS_INFO (deprecated).
pub const COM_PROCESS_INFO: u8 = 0x0A;
/// COM_CONNECT (internal).
pub const COM_CONNECT: u8 = 0x0B;
/// COM_PROCESS_KILL: kill a connection (deprecated; KILL is a query).
pub const COM_PROCESS_KILL: u8 = 0x0C;
/// COM_DEBUG: dump debug information to the server log.
pub const COM_DEBUG: u8 = 0x0D;
/// COM_PING: is the server alive.
pub const COM_PING: u8 = 0x0E;
/// COM_TIME (internal).
pub const COM_TIME: u8 = 0x0F;
/// COM_DELAYED_INSERT (internal).
pub const COM_DELAYED_INSERT: u8 = 0x10;
/// COM_CHANGE_USER: re-authenticate as another user.
pub const COM_CHANGE_USER: u8 = 0x11;
/// COM_BINLOG_DUMP (replication).
pub const COM_BINLOG_DUMP: u8 = 0x12;
/// COM_TABLE_DUMP (replication).
pub const COM_TABLE_DUMP: u8 = 0x13;
/// COM_CONNECT_OUT (internal).
pub const COM_CONNECT_OUT: u8 = 0x14;
/// COM_REGISTER_SLAVE (replication).
pub const COM_REGISTER_SLAVE: u8 = 0x15;
/// COM_STMT_PREPARE: prepare a statement.
pub const COM_STMT_PREPARE: u8 = 0x16;
/// COM_STMT_EXECUTE: execute a prepared statement.
pub const COM_STMT_EXECUTE: u8 = 0x17;
/// COM_STMT_SEND_LONG_DATA: send a parameter's value in pieces.
pub const COM_STMT_SEND_LONG_DATA: u8 = 0x18;
/// COM_STMT_CLOSE: forget a prepared statement (no response).
pub const COM_STMT_CLOSE: u8 = 0x19;
/// COM_STMT_RESET: drop a statement's long data and cursor.
pub const COM_STMT_RESET: u8 = 0x1A;
/// COM_SET_OPTION: turn multi-statements on or off.
pub const COM_SET_OPTION: u8 = 0x1B;
/// COM_STMT_FETCH: fetch rows from a statement's cursor.
pub const COM_STMT_FETCH: u8 = 0x1C;
/// COM_DAEMON (internal).
pub const COM_DAEMON: u8 = 0x1D;
/// COM_BINLOG_DUMP_GTID (replication).
pub const COM_BINLOG_DUMP_GTID: u8 = 0x1E;
/// COM_RESET_CONNECTION: reset session state without re-authenticating.
pub const COM_RESET_CONNECTION: u8 = 0x1F;

/// COM_SET_OPTION's argument: turn multi-statements on.
pub const MYSQL_OPTION_MULTI_STATEMENTS_ON: u16 = 0;
/// COM_SET_OPTION's argument: turn multi-statements off.
pub const MYSQL_OPTION_MULTI_STATEMENTS_OFF: u16 = 1;

/// COM_STMT_EXECUTE flag: no cursor.
pub const CURSOR_TYPE_NO_CURSOR: u8 = 0;
/// COM_STMT_EXECUTE flag: open a read-only cursor.
pub const CURSOR_TYPE_READ_ONLY: u8 = 1;
/// COM_STMT_EXECUTE flag: cursor for update.
pub const CURSOR_TYPE_FOR_UPDATE: u8 = 2;
/// COM_STMT_EXECUTE flag: scrollable cursor.
pub const CURSOR_TYPE_SCROLLABLE: u8 = 4;
