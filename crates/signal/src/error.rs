//! The registry of error codes that travel in REF signals and reach users.
//!
//! Numbers are stable (clients and, later, the SQL node's mapping to MySQL
//! errors depend on them); NDB's number is reused where NDB has the same
//! error. Every code has a class: temporary errors may succeed if the whole
//! transaction is retried, constraint errors report the data as it is, and
//! permanent errors will fail again unchanged, and an unknown outcome
//! means a commit may or may not have happened: the caller must find out
//! (read the data back) before it retries.

use std::fmt;

/// How a caller should react to an error.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ErrorClass {
    /// Retry the transaction (lock wait timeout, table full, overload).
    Temporary,
    /// The data says no (duplicate key, no such row).
    Constraint,
    /// The request is wrong (unknown table, value too long).
    Permanent,
    /// The commit was sent but its answer never came (the connection or
    /// the reply was lost): it may have committed or not. Retrying blindly
    /// may apply it twice; read back what it wrote (or make the
    /// transaction idempotent) first.
    OutcomeUnknown,
}

macro_rules! error_codes {
    ($( $(#[$doc:meta])* $name:ident = $code:literal, $class:ident, $message:literal; )*) => {
        /// A Tessera error code.
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
        #[repr(u16)]
        pub enum ErrorCode {
            $( $(#[$doc])* $name = $code, )*
        }

        impl ErrorCode {
            /// Every code, for documentation and tests.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$name,)*];

            /// Decodes a wire value.
            pub fn from_u16(value: u16) -> Option<ErrorCode> {
                match value {
                    $( $code => Some(ErrorCode::$name), )*
                    _ => None,
                }
            }

            /// The class of this error.
            pub fn class(self) -> ErrorClass {
                match self {
                    $( ErrorCode::$name => ErrorClass::$class, )*
                }
            }

            /// A message for humans.
            pub fn message(self) -> &'static str {
                match self {
                    $( ErrorCode::$name => $message, )*
                }
            }
        }
    };
}

error_codes! {
    /// A committed read, update or delete found no row with the key.
    NoSuchRow = 626, Constraint, "no such row";
    /// An insert found a row with the key.
    DuplicateKey = 630, Constraint, "duplicate key";
    /// A lock was not granted within the lock-wait timeout (deadlock detection).
    LockWaitTimeout = 266, Temporary, "lock wait timeout: transaction aborted, probably a deadlock";
    /// A read asked not to wait (NOWAIT, SKIP LOCKED) found its row locked
    /// by another transaction.
    LockNotAvailable = 4031, Temporary, "lock not available: the row is locked by another transaction and the read was asked not to wait";
    NodeShuttingDown = 270, Temporary, "the data node is stopping and begins no new transaction: retry (another node takes it)";
    /// DataMemory of the partition's ldm is exhausted.
    TableFull = 827, Temporary, "table is full: DataMemory exhausted (increase data_memory)";
    /// The table does not exist (or was dropped).
    UnknownTable = 723, Permanent, "unknown table";
    /// The client's table definition is older than the table's (dropped and recreated).
    SchemaVersionMismatch = 241, Temporary, "table definition changed: refresh and retry";
    /// A value is longer than its column allows.
    ValueTooLong = 1406, Permanent, "value too long for its column";
    /// The transaction exceeded max_operations_per_transaction.
    TooManyOperations = 261, Permanent, "too many operations in one transaction";
    /// The node's operation records (max_concurrent_operations) are all in use.
    OutOfOperationRecords = 233, Temporary, "out of operation records on the data node";
    /// The node's transaction records (max_concurrent_transactions) are all in use.
    OutOfTransactionRecords = 234, Temporary, "out of transaction records on the data node";
    /// The node ran out of signal buffers (overload).
    OutOfSignalMemory = 4011, Temporary, "out of signal memory on the data node (overload)";
    /// The transaction was idle longer than inactive_transaction_timeout_ms.
    TransactionInactive = 4012, Temporary, "transaction aborted: inactive for too long";
    /// The transaction is not known to the coordinator (finished, aborted or never started).
    UnknownTransaction = 4013, Permanent, "unknown transaction";
    /// A data node that held part of the transaction failed before it
    /// committed: the survivors aborted it everywhere, so retrying is safe.
    NodeFailureAbort = 4010, Temporary, "node failure caused abort of transaction";
    /// The data node has not finished starting.
    NodeNotStarted = 4009, Temporary, "data node is not started";
    /// A NULL for a column that is not nullable (or a missing key column).
    NullNotAllowed = 839, Permanent, "NULL or missing value for a NOT NULL or key column";
    /// A value has the wrong width or encoding for its column type.
    BadValue = 4014, Permanent, "value does not match its column type";
    /// A column id does not exist in the table.
    UnknownColumn = 4015, Permanent, "unknown column";
    /// The cluster holds as many tables as it can (10 922: a take-over
    /// lists them all in one section).
    TooManyTables = 707, Permanent, "too many tables: the cluster holds at most 10922";
    /// Schema changes wait while a data node is in its node restart.
    NodeRestartInProgress = 711, Temporary, "a data node is restarting (node restart): schema changes wait until it has started; retry";
    /// A table with this name already exists.
    TableExists = 721, Permanent, "table already exists";
    /// The table definition is invalid (see the data node log for which rule).
    BadTableDefinition = 4016, Permanent, "invalid table definition";
    /// A request was malformed (client bug).
    BadRequest = 4017, Permanent, "malformed request";
    /// The schema is busy with another change or with operations in flight; retry.
    SchemaBusy = 785, Temporary, "schema is busy: retry";
    /// A row is too large for a page.
    RowTooLarge = 4018, Permanent, "row too large";
    /// The transaction was aborted (by the client or after an earlier error).
    TransactionAborted = 4019, Temporary, "transaction aborted";
    /// Schema changes run on the president's dict; ask another node.
    NotMaster = 4020, Temporary, "this data node is not the schema master: send schema requests to the president";
    /// A redo log part has no room before its tail until a local checkpoint
    /// completes and moves it.
    RedoLogFull = 410, Temporary, "redo log full: retry once a local checkpoint has freed log space";
    /// Redo writes do not keep up with commits (the redo buffer is full).
    RedoOverloaded = 1234, Temporary, "redo log overloaded: writes to disk fall behind, retry";
    /// Too many clients wait for a GCI to become durable at this tc.
    TooManyGciWaits = 4021, Temporary, "too many waits for a durable GCI at this data node";
    /// The connection to the data node was lost with no commit in flight:
    /// the data node aborts the API node's open transactions, so retrying
    /// is safe.
    ConnectionLost = 4008, Temporary, "connection to the data node lost";
    /// A wait for a GCI that a whole-cluster restart rolled back: the
    /// cluster restored an earlier GCI and started its new GCIs above
    /// this one, so what committed in it is gone.
    GciRolledBack = 4023, Permanent, "the GCI was rolled back by a whole-cluster restart: what committed in it is lost";
    /// The data node that would serve a read has not heard from the
    /// cluster within its read lease (it was paused or cut off, and its
    /// replicas may have been promoted elsewhere): it serves no reads.
    ReadLeaseExpired = 4025, Temporary, "the data node's read lease ran out (paused or cut off from the cluster): it serves no reads; retry";
    NotPrimary = 4026, Temporary, "this data node's replica of the partition is not its primary now: ask the primary";
    /// A scan's filter or projection is malformed or does not fit the
    /// table (columns whose types do not compare, LIKE on a number, too
    /// deep or too long).
    BadFilter = 4027, Permanent, "malformed scan filter: it does not fit the table's columns";
    /// A scan asked for batches larger than a data node sends.
    ScanBatchTooLarge = 4028, Permanent, "scan batch too large: at most 128 KiB of rows a batch";
    /// An increment would leave its column's integer range, or found the
    /// column NULL (`OperationKind::Increment`).
    ValueOutOfRange = 4030, Permanent, "an increment would leave the column's range, or the column is NULL";
    /// A table already has an index of that name.
    IndexExists = 4244, Permanent, "index already exists: the table has an index of that name";
    /// The table has no index of that name (or the definition naming it is
    /// stale: refresh it).
    UnknownIndex = 4243, Permanent, "unknown index";
    /// A table has at most 16 indexes besides its primary key, and 65,535
    /// index changes in its life.
    TooManyIndexes = 4029, Permanent, "too many indexes: a table has at most 16";
    /// An API node's registration did not carry the token mgmd issued
    /// with its node id (or carried one of an older allocation of the
    /// id): the data node refuses it and closes the connection.
    NotAdmitted = 4024, Permanent, "connection not admitted: the API node id was not issued to this client by the cluster's mgmd (no valid token)";
    /// A commit was sent and then its connection or its reply was lost:
    /// it may or may not have committed (class `OutcomeUnknown`).
    CommitOutcomeUnknown = 4022, OutcomeUnknown, "the outcome of the commit is unknown: its connection or reply was lost after it was sent; read back before retrying";
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "error {} ({:?}): {}",
            *self as u16,
            self.class(),
            self.message()
        )
    }
}

impl std::error::Error for ErrorCode {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for &code in ErrorCode::ALL {
            assert!(seen.insert(code as u16), "duplicate number for {code:?}");
            assert_eq!(ErrorCode::from_u16(code as u16), Some(code));
        }
        assert_eq!(ErrorCode::from_u16(1), None);
    }
}
