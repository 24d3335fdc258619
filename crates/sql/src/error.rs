//! The errors a statement ends with, as MySQL numbers them: each carries
//! MySQL's error number, its SQLSTATE and a message, so that clients and
//! drivers that react to a number (sysbench ignores 1205 and 1213 and
//! restarts the transaction) react to ours the same way. A data node's
//! refusal becomes the MySQL error that means the same
//! (docs/design/0027-sql-node.md, "Errors").

use crate::types::SqlType;
use crate::value::Value;
use client::{ClientError, ErrorClass, ErrorCode};
use std::fmt;

/// A MySQL error: number, SQLSTATE, message.
#[derive(Clone, Debug, PartialEq)]
pub struct SqlError {
    /// MySQL's error number (1064, 1146, ...).
    pub code: u16,
    /// The SQLSTATE, five characters.
    pub state: &'static str,
    /// The message, as MySQL words it where one exists.
    pub message: String,
    /// The statement met a table definition other than the one it was
    /// planned with: plan it again.
    pub schema_changed: bool,
    /// A duplicate key's value, as the cluster stores it: the message
    /// shows it as stored until the session words it with the key's SQL
    /// types ([`SqlError::word_duplicate`]), which only the catalog knows.
    pub duplicate: Option<Box<DuplicateEntry>>,
}

/// What a duplicate-key error (1062) repeated.
#[derive(Clone, Debug, PartialEq)]
pub struct DuplicateEntry {
    /// The table's cluster name, `database/table`.
    pub table: String,
    /// The unique index, `None` for the primary key.
    pub index: Option<String>,
    /// The stored values, one per column of the key, in the key's order.
    pub entry: Vec<client::Value>,
}

/// A key's value as MySQL shows it in 1062's message: its columns'
/// texts joined by '-' ('1-abc' for a two-column key).
fn entry_text(values: impl Iterator<Item = Value>) -> String {
    let mut text = Vec::new();
    for (at, value) in values.enumerate() {
        if at > 0 {
            text.push(b'-');
        }
        crate::value::write_text(&value, &mut text);
    }
    String::from_utf8_lossy(&text).into_owned()
}

/// The MySQL error numbers the SQL node uses, with their SQLSTATEs.
pub mod codes {
    /// Can't create database; database exists.
    pub const DB_CREATE_EXISTS: u16 = 1007;
    /// Can't drop database; database doesn't exist.
    pub const DB_DROP_EXISTS: u16 = 1008;
    /// Access denied for user.
    pub const ACCESS_DENIED: u16 = 1045;
    /// Access denied to a database (no privilege there).
    pub const ACCESS_DENIED_FOR_DB: u16 = 1044;
    /// A command denied on a table (its privilege not held).
    pub const TABLE_ACCESS_DENIED: u16 = 1142;
    /// No database selected.
    pub const NO_DB: u16 = 1046;
    /// Unknown command.
    pub const UNKNOWN_COM: u16 = 1047;
    /// Column cannot be null.
    pub const BAD_NULL: u16 = 1048;
    /// Unknown database.
    pub const BAD_DB: u16 = 1049;
    /// Table already exists.
    pub const TABLE_EXISTS: u16 = 1050;
    /// Unknown table (in DROP TABLE).
    pub const BAD_TABLE: u16 = 1051;
    /// Column is ambiguous.
    pub const NON_UNIQ: u16 = 1052;
    /// Unknown column.
    pub const BAD_FIELD: u16 = 1054;
    /// Identifier name is too long.
    pub const TOO_LONG_IDENT: u16 = 1059;
    /// Duplicate column name.
    pub const DUP_FIELDNAME: u16 = 1060;
    /// Clauses that may not go together (LIMIT in a multi-table UPDATE).
    pub const WRONG_USAGE: u16 = 1221;
    /// A multi-table DELETE names a table its FROM does not have.
    pub const UNKNOWN_TABLE: u16 = 1109;
    /// A column name that may not be used.
    pub const WRONG_COLUMN_NAME: u16 = 1166;
    /// A common table expression's column list and SELECT list differ
    /// in length.
    pub const VIEW_WRONG_LIST: u16 = 1353;
    /// A view's query no longer compiles (a table or column it names is
    /// gone, or the reader lacks a privilege it needs).
    pub const VIEW_INVALID: u16 = 1356;
    /// A view names itself, directly or through others.
    pub const VIEW_RECURSIVE: u16 = 1462;
    /// A view's query has a parameter or variable.
    pub const VIEW_SELECT_VARIABLE: u16 = 1351;
    /// DROP VIEW of a table (or the reverse).
    pub const WRONG_OBJECT: u16 = 1347;
    /// UPDATE or DELETE of a view.
    pub const NON_UPDATABLE_TABLE: u16 = 1288;
    /// INSERT into a view.
    pub const NON_INSERTABLE_TABLE: u16 = 1471;
    /// A window function where none may stand (WHERE, HAVING, GROUP BY),
    /// or inside another.
    pub const WINDOW_INVALID_USE: u16 = 3593;
    /// A derived table without an alias.
    pub const DERIVED_MUST_HAVE_ALIAS: u16 = 1248;
    /// Duplicate key name.
    pub const DUP_KEYNAME: u16 = 1061;
    /// Duplicate entry for key.
    pub const DUP_ENTRY: u16 = 1062;
    /// Parse error.
    pub const PARSE: u16 = 1064;
    /// Multiple primary key defined.
    pub const MULTIPLE_PRI_KEY: u16 = 1068;
    /// Key column doesn't exist in table.
    pub const KEY_COLUMN_DOES_NOT_EXIST: u16 = 1072;
    /// Can't DROP; check that column/key exists.
    pub const CANT_DROP_FIELD_OR_KEY: u16 = 1091;
    /// Unknown thread id (KILL).
    pub const NO_SUCH_THREAD: u16 = 1094;
    /// Incorrect database name.
    pub const WRONG_DB_NAME: u16 = 1102;
    /// Incorrect table name.
    pub const WRONG_TABLE_NAME: u16 = 1103;
    /// Unknown error.
    pub const UNKNOWN_ERROR: u16 = 1105;
    /// Invalid use of group function.
    pub const INVALID_GROUP_FUNC_USE: u16 = 1111;
    /// The table is full.
    pub const RECORD_FILE_FULL: u16 = 1114;
    /// Got error during COMMIT: the SQL node's answer when a commit's
    /// outcome is unknown.
    pub const ERROR_DURING_COMMIT: u16 = 1180;
    /// Row size too large.
    pub const TOO_BIG_ROWSIZE: u16 = 1118;
    /// Column count doesn't match value count.
    pub const WRONG_VALUE_COUNT_ON_ROW: u16 = 1136;
    /// The SELECTs of a UNION give different numbers of columns.
    pub const WRONG_NUMBER_OF_COLUMNS_IN_SELECT: u16 = 1222;
    /// A column neither grouped on nor determined by the grouping.
    pub const WRONG_FIELD_WITH_GROUP: u16 = 1055;
    /// Not unique table/alias.
    pub const NONUNIQ_TABLE: u16 = 1066;
    /// Aggregates and plain columns mixed without GROUP BY.
    pub const MIX_OF_GROUP_FUNC_AND_FIELDS: u16 = 1140;
    /// FUNCTION does not exist.
    pub const SP_DOES_NOT_EXIST: u16 = 1305;
    /// Incorrect parameter count in the call to a native function.
    pub const WRONG_PARAMCOUNT_TO_NATIVE_FCT: u16 = 1582;
    /// Table doesn't exist.
    pub const NO_SUCH_TABLE: u16 = 1146;
    /// Packet bigger than max_allowed_packet.
    pub const NET_PACKET_TOO_LARGE: u16 = 1153;
    /// This table type requires a primary key.
    pub const REQUIRES_PRIMARY_KEY: u16 = 1173;
    /// Unknown system variable.
    pub const UNKNOWN_SYSTEM_VARIABLE: u16 = 1193;
    /// Lock wait timeout exceeded.
    pub const LOCK_WAIT_TIMEOUT: u16 = 1205;
    /// Incorrect arguments.
    pub const WRONG_ARGUMENTS: u16 = 1210;
    /// Deadlock found; try restarting transaction.
    pub const LOCK_DEADLOCK: u16 = 1213;
    /// Variable can't be set to the value.
    pub const WRONG_VALUE_FOR_VAR: u16 = 1231;
    /// A NOWAIT read found its row locked.
    pub const LOCK_NOWAIT: u16 = 3572;
    /// Incorrect argument type to variable.
    pub const WRONG_TYPE_FOR_VAR: u16 = 1232;
    /// This version doesn't yet support the feature.
    pub const NOT_SUPPORTED_YET: u16 = 1235;
    /// Unknown prepared statement handler.
    pub const UNKNOWN_STMT_HANDLER: u16 = 1243;
    /// Out of range value for column.
    pub const WARN_DATA_OUT_OF_RANGE: u16 = 1264;
    /// A value of an expression is out of its type's range.
    pub const DATA_OUT_OF_RANGE: u16 = 1690;
    /// A value is not one of an ENUM's members.
    pub const DATA_TRUNCATED: u16 = 1265;
    /// Text that is not a date or time where one is needed.
    pub const TRUNCATED_WRONG_VALUE: u16 = 1292;
    /// This command is not supported in the prepared statement protocol yet.
    pub const UNSUPPORTED_PS: u16 = 1295;
    /// Got temporary error from the storage engine.
    pub const GET_TEMPORARY_ERRMSG: u16 = 1297;
    /// Query execution was interrupted.
    pub const QUERY_INTERRUPTED: u16 = 1317;
    /// Field doesn't have a default value.
    pub const NO_DEFAULT_FOR_FIELD: u16 = 1364;
    /// Incorrect value for a column.
    pub const TRUNCATED_WRONG_VALUE_FOR_FIELD: u16 = 1366;
    /// Data too long for column.
    pub const DATA_TOO_LONG: u16 = 1406;
    /// Incorrect value (a DATE, TIME or TIMESTAMP literal's text).
    pub const WRONG_VALUE: u16 = 1525;
    /// Division by 0 (a warning, an error in a value to store).
    pub const DIVISION_BY_ZERO: u16 = 1365;
    /// Incorrect value for a function (STR_TO_DATE of text that is no
    /// date).
    pub const WRONG_VALUE_FOR_TYPE: u16 = 1411;
    /// Unknown locale (FORMAT's).
    pub const UNKNOWN_LOCALE: u16 = 1649;
    /// A window name no WINDOW clause defines.
    pub const WINDOW_NO_SUCH_WINDOW: u16 = 3579;
    /// A window naming one with a frame.
    pub const WINDOW_NO_INHERIT_FRAME: u16 = 3580;
    /// A window naming another with a PARTITION BY of its own.
    pub const WINDOW_NO_CHILD_PARTITIONING: u16 = 3581;
    /// A window naming another writing ORDER BY again.
    pub const WINDOW_NO_REDEFINE_ORDER_BY: u16 = 3582;
    /// Windows naming each other in a circle.
    pub const WINDOW_CIRCULARITY: u16 = 3583;
    /// A frame starting UNBOUNDED FOLLOWING.
    pub const WINDOW_FRAME_START_ILLEGAL: u16 = 3584;
    /// A frame ending UNBOUNDED PRECEDING.
    pub const WINDOW_FRAME_END_ILLEGAL: u16 = 3585;
    /// A frame offset that is not a non-negative integer.
    pub const WINDOW_FRAME_ILLEGAL: u16 = 3586;
    /// A recursive common table expression without a UNION.
    pub const CTE_RECURSIVE_REQUIRES_UNION: u16 = 3573;
    /// A recursive one whose non-recursive SELECTs do not come first.
    pub const CTE_RECURSIVE_REQUIRES_NONRECURSIVE_FIRST: u16 = 3574;
    /// A recursive SELECT with an aggregate or window function.
    pub const CTE_RECURSIVE_FORBIDS_AGGREGATION: u16 = 3575;
    /// A recursive SELECT reading the expression on a LEFT JOIN's right.
    pub const CTE_RECURSIVE_FORBIDDEN_JOIN_ORDER: u16 = 3576;
    /// A recursive SELECT naming the expression other than once in FROM.
    pub const CTE_RECURSIVE_REQUIRES_SINGLE_REFERENCE: u16 = 3577;
    /// A recursion past `cte_max_recursion_depth`.
    pub const CTE_MAX_RECURSION_DEPTH: u16 = 3636;
    /// Text stored in a JSON column that is not JSON.
    pub const INVALID_JSON_TEXT: u16 = 3140;
    /// A JSON function's argument that is not JSON text.
    pub const INVALID_JSON_TEXT_IN_PARAM: u16 = 3141;
    /// A JSON path that does not parse.
    pub const INVALID_JSON_PATH: u16 = 3143;
    /// A JSON function's argument of a type that is not JSON or text.
    pub const INVALID_TYPE_FOR_JSON: u16 = 3146;
    /// A JSON document nested deeper than 100.
    pub const JSON_DOCUMENT_TOO_DEEP: u16 = 3157;
    /// A JSON or TEXT column in a key (MySQL indexes JSON through
    /// generated columns only).
    pub const JSON_USED_AS_KEY: u16 = 3152;
    /// A user-level lock name that is empty or NULL.
    pub const USER_LOCK_WRONG_NAME: u16 = 3057;
    /// A GET_LOCK that would close a cycle of sessions waiting for each
    /// other's user-level locks.
    pub const USER_LOCK_DEADLOCK: u16 = 3058;
    /// A user-level lock name of more than 64 characters.
    pub const USER_LOCK_OVERLONG_NAME: u16 = 3059;
}

/// The SQLSTATE MySQL gives an error number.
fn state_of(code: u16) -> &'static str {
    use codes::*;
    match code {
        ACCESS_DENIED => "28000",
        NO_DB => "3D000",
        UNKNOWN_COM | NET_PACKET_TOO_LARGE => "08S01",
        BAD_NULL | DUP_ENTRY => "23000",
        BAD_DB
        | PARSE
        | DUP_KEYNAME
        | CANT_DROP_FIELD_OR_KEY
        | TOO_LONG_IDENT
        | WRONG_DB_NAME
        | WRONG_TABLE_NAME
        | MULTIPLE_PRI_KEY
        | KEY_COLUMN_DOES_NOT_EXIST
        | TOO_BIG_ROWSIZE
        | REQUIRES_PRIMARY_KEY
        | WRONG_VALUE_FOR_VAR
        | WRONG_TYPE_FOR_VAR
        | NOT_SUPPORTED_YET
        | DUP_FIELDNAME
        | DERIVED_MUST_HAVE_ALIAS
        | WRONG_FIELD_WITH_GROUP
        | NONUNIQ_TABLE
        | MIX_OF_GROUP_FUNC_AND_FIELDS
        | SP_DOES_NOT_EXIST
        | WRONG_PARAMCOUNT_TO_NATIVE_FCT
        | USER_LOCK_WRONG_NAME
        | USER_LOCK_OVERLONG_NAME => "42000",
        TABLE_EXISTS => "42S01",
        BAD_TABLE | NO_SUCH_TABLE => "42S02",
        BAD_FIELD => "42S22",
        NON_UNIQ => "23000",
        WRONG_VALUE_COUNT_ON_ROW => "21S01",
        WRONG_NUMBER_OF_COLUMNS_IN_SELECT => "21000",
        LOCK_DEADLOCK | USER_LOCK_DEADLOCK => "40001",
        WARN_DATA_OUT_OF_RANGE | DATA_OUT_OF_RANGE => "22003",
        TRUNCATED_WRONG_VALUE => "22007",
        DATA_TRUNCATED => "01000",
        DATA_TOO_LONG => "22001",
        TRUNCATED_WRONG_VALUE_FOR_FIELD => "HY000",
        QUERY_INTERRUPTED => "70100",
        DIVISION_BY_ZERO => "22012",
        INVALID_JSON_TEXT | INVALID_JSON_TEXT_IN_PARAM | INVALID_TYPE_FOR_JSON => "22032",
        INVALID_JSON_PATH => "42000",
        _ => "HY000",
    }
}

impl SqlError {
    /// The error `code` with MySQL's SQLSTATE for it.
    pub fn new(code: u16, message: impl Into<String>) -> SqlError {
        SqlError {
            code,
            state: state_of(code),
            message: message.into(),
            schema_changed: false,
            duplicate: None,
        }
    }

    /// Words a duplicate key's value with the SQL types of its columns
    /// (a DATE as '2024-05-01', not as the integer stored): `sql_types`
    /// gives them for the entry's table and key, `zone` is the session's
    /// time zone (a TIMESTAMP's). Leaves the message as it is when the
    /// types are not known (a table dropped since).
    pub fn word_duplicate(
        &mut self,
        sql_types: impl FnOnce(&DuplicateEntry) -> Option<Vec<SqlType>>,
        zone: i64,
    ) {
        let Some(duplicate) = self.duplicate.take() else {
            return;
        };
        let Some(types) = sql_types(&duplicate).filter(|t| t.len() == duplicate.entry.len()) else {
            return;
        };
        let stored = entry_text(duplicate.entry.iter().cloned().map(Value::from_stored));
        let worded = entry_text(
            duplicate
                .entry
                .iter()
                .zip(&types)
                .map(|(value, sql_type)| crate::types::load(value.clone(), sql_type, zone)),
        );
        self.message = self
            .message
            .replacen(&format!("'{stored}'"), &format!("'{worded}'"), 1);
    }

    /// A parse error, worded as MySQL's.
    pub fn parse(detail: impl fmt::Display) -> SqlError {
        SqlError::new(
            codes::PARSE,
            format!("You have an error in your SQL syntax: {detail}"),
        )
    }

    /// What the SQL node does not do (yet).
    pub fn unsupported(what: impl fmt::Display) -> SqlError {
        SqlError::new(
            codes::NOT_SUPPORTED_YET,
            format!("This version of Tessera doesn't yet support '{what}'"),
        )
    }

    /// Table `database.table` doesn't exist.
    pub fn no_such_table(database: &str, table: &str) -> SqlError {
        SqlError::new(
            codes::NO_SUCH_TABLE,
            format!("Table '{database}.{table}' doesn't exist"),
        )
    }

    /// Unknown column `column` in `place`.
    pub fn bad_field(column: &str, place: &str) -> SqlError {
        SqlError::new(
            codes::BAD_FIELD,
            format!("Unknown column '{column}' in '{place}'"),
        )
    }

    /// A data node's or the client library's refusal as the MySQL error
    /// that means the same. `table` names the table for the message.
    ///
    /// Every temporary error that rolled the transaction back is 1213
    /// (SQLSTATE 40001, "transaction rolled back: retry it"), the error
    /// drivers and sysbench retry on, except a lock wait timeout, which
    /// is MySQL's own 1205; the message says what really happened.
    pub fn from_client(error: &ClientError, table: &str) -> SqlError {
        let mut mapped = SqlError::map_client(error, table);
        mapped.schema_changed = matches!(
            error.code(),
            Some(
                ErrorCode::SchemaVersionMismatch
                    | ErrorCode::UnknownTable
                    | ErrorCode::UnknownIndex
            )
        );
        mapped
    }

    /// `table` is the statement's; an error the data node tied to one
    /// operation names that operation's table instead (a write that waited
    /// for a later statement's round trip fails there).
    fn map_client(error: &ClientError, table: &str) -> SqlError {
        let table = error.failed_table().unwrap_or(table);
        let code = error.code();
        match (code, error.class()) {
            (Some(ErrorCode::DuplicateKey), _) => {
                let (index, entry) = match error {
                    ClientError::DuplicateKey { index, entry, .. } => (index.as_deref(), &entry[..]),
                    _ => (None, &[][..]),
                };
                let key = index.unwrap_or("PRIMARY");
                // As MySQL 8 names a key: its table, without the
                // database (the cluster's name is `database/table`). A
                // round trip carrying several tables' writes (a COMMIT's)
                // may not know whose key it was.
                let qualified = match table.rsplit('/').next().unwrap_or(table) {
                    "" => key.to_string(),
                    table => format!("{table}.{key}"),
                };
                if entry.is_empty() {
                    // The client could not tell the value (the write did
                    // not carry the whole key).
                    return SqlError::new(
                        codes::DUP_ENTRY,
                        format!("Duplicate entry for key '{qualified}'"),
                    );
                }
                let stored = entry_text(entry.iter().cloned().map(Value::from_stored));
                let mut mapped = SqlError::new(
                    codes::DUP_ENTRY,
                    format!("Duplicate entry '{stored}' for key '{qualified}'"),
                );
                mapped.duplicate = Some(Box::new(DuplicateEntry {
                    table: table.to_string(),
                    index: index.map(str::to_string),
                    entry: entry.to_vec(),
                }));
                mapped
            }
            (Some(ErrorCode::LockWaitTimeout), _) => SqlError::new(
                codes::LOCK_WAIT_TIMEOUT,
                "Lock wait timeout exceeded; try restarting transaction",
            ),
            (Some(ErrorCode::LockNotAvailable), _) => SqlError::new(
                codes::LOCK_NOWAIT,
                "Statement aborted because lock(s) could not be acquired immediately and NOWAIT is set.",
            ),
            (Some(ErrorCode::TableFull), _) => SqlError::new(
                codes::RECORD_FILE_FULL,
                format!("The table '{table}' is full"),
            ),
            (Some(ErrorCode::UnknownTable), _) => {
                let (database, name) = table.split_once('/').unwrap_or(("", table));
                SqlError::no_such_table(database, name)
            }
            (Some(ErrorCode::TableExists), _) => SqlError::new(
                codes::TABLE_EXISTS,
                format!("Table '{}' already exists", table.replace('/', ".")),
            ),
            (Some(ErrorCode::NullNotAllowed), _) => {
                SqlError::new(codes::BAD_NULL, format!("Column cannot be null: {error}"))
            }
            (Some(ErrorCode::ValueTooLong), _) => {
                SqlError::new(codes::DATA_TOO_LONG, format!("Data too long: {error}"))
            }
            (Some(ErrorCode::RowTooLarge), _) => SqlError::new(
                codes::TOO_BIG_ROWSIZE,
                format!("Row size too large: {error}"),
            ),
            (Some(ErrorCode::IndexExists), _) => {
                SqlError::new(codes::DUP_KEYNAME, format!("Duplicate key name: {error}"))
            }
            (Some(ErrorCode::UnknownIndex), _) => SqlError::new(
                codes::CANT_DROP_FIELD_OR_KEY,
                format!("Can't DROP; check that the index exists: {error}"),
            ),
            (_, Some(ErrorClass::Temporary)) => SqlError::new(
                codes::LOCK_DEADLOCK,
                format!("Transaction rolled back: {error}; try restarting transaction"),
            ),
            // A commit whose outcome is unknown may have committed: not
            // an error to retry blindly.
            (_, Some(ErrorClass::OutcomeUnknown)) => SqlError::new(
                codes::ERROR_DURING_COMMIT,
                format!("Got error during COMMIT: its outcome is unknown (it may have committed): {error}"),
            ),
            _ if error.is_temporary() => SqlError::new(
                codes::LOCK_DEADLOCK,
                format!("Transaction rolled back: {error}; try restarting transaction"),
            ),
            _ => SqlError::new(
                codes::UNKNOWN_ERROR,
                format!("Got error from the cluster: {error}"),
            ),
        }
    }
}

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ERROR {} ({}): {}", self.code, self.state, self.message)
    }
}

impl std::error::Error for SqlError {}

/// A statement's result or its error.
pub type SqlResult<T> = Result<T, SqlError>;
