//! `ClientError`: the one error type of the client API. Every failure a
//! caller can see is one of its variants, so an application matches on one
//! type and asks the same two questions of every error: which registry code
//! (`code()`, stable numbers from `signal::error`) and whether retrying the
//! transaction may help (`is_temporary()`).

use crate::transaction::OpId;
use crate::Value;
use signal::error::ErrorClass;
use signal::{ErrorCode, Gci, NodeId};
use std::fmt;
use std::time::Duration;

/// Why a client call failed.
///
/// ```
/// use client::ClientError;
/// use signal::ErrorCode;
/// let error = ClientError::Operation { code: ErrorCode::LockWaitTimeout, op: None, table: None };
/// assert_eq!(error.code(), Some(ErrorCode::LockWaitTimeout));
/// assert!(error.is_temporary());
/// ```
#[derive(Debug)]
pub enum ClientError {
    /// mgmd could not be reached or refused a request.
    Mgmd(mgmclient::MgmdError),
    /// The cluster config served by mgmd is unusable for a client.
    Config(String),
    /// The TCP connection to a data node could not be made.
    Connect {
        /// Address tried.
        addr: String,
        /// The last OS error.
        source: std::io::Error,
    },
    /// The data node did not finish starting within the connect timeout.
    NotStarted {
        /// Address of the data node.
        addr: String,
        /// How long the client waited.
        waited: Duration,
    },
    /// The data node refused a transaction; the transaction is aborted on
    /// the data node and every lock it held is released.
    Operation {
        /// Why.
        code: ErrorCode,
        /// The operation that failed, when the data node named one.
        op: Option<OpId>,
        /// The name of that operation's table, when known: a round trip
        /// carrying several tables' operations fails on one of them.
        table: Option<String>,
    },
    /// A write would have repeated the value of the primary key or of a
    /// unique index (code DuplicateKey, class Constraint): the transaction
    /// is aborted, as with [`ClientError::Operation`].
    DuplicateKey {
        /// The unique index whose value was repeated; `None`: the primary
        /// key.
        index: Option<String>,
        /// The value repeated, one per column of the key in the key's
        /// order, when the client can tell it: empty when the data node
        /// named no operation, or the write did not carry every column of
        /// the key (an UPDATE of one column of a two-column unique index).
        entry: Vec<Value>,
        /// The operation that wrote it.
        op: Option<OpId>,
        /// The name of that operation's table, when known.
        table: Option<String>,
    },
    /// The data node refused a schema request (create, drop, get).
    Schema {
        /// Why.
        code: ErrorCode,
        /// The table the request was about.
        table: String,
    },
    /// The client rejected a request before sending anything: a value that
    /// does not fit its column, an unknown column, an invalid table definition.
    Invalid {
        /// Why (ValueTooLong, BadValue, NullNotAllowed, UnknownColumn,
        /// BadTableDefinition, ...).
        code: ErrorCode,
        /// What it concerns (table, column, value), for the message.
        detail: String,
    },
    /// The connection to a data node was lost: the outcome of a request in
    /// flight is unknown.
    ConnectionLost {
        /// The data node (0 when it never identified itself).
        node: NodeId,
        /// What happened, for the message.
        reason: String,
    },
    /// A data node refused to wait for a GCI to become durable
    /// (GCI_WAIT_REF, e.g. TooManyGciWaits). What committed in that GCI
    /// stays committed; only its durability is not confirmed yet, and
    /// waiting again later (`Cluster::wait_durable`) may confirm it.
    DurableWaitRefused {
        /// Why.
        code: ErrorCode,
        /// The GCI waited for.
        gci: Gci,
    },
    /// The GCI waited for was rolled back: a whole-cluster restart
    /// restored an earlier GCI and started above this one, so what
    /// committed in it (an acknowledged but not yet durable commit) is
    /// lost. Permanent: waiting again gets the same answer.
    RolledBack {
        /// The GCI waited for.
        gci: Gci,
    },
    /// A commit of a transaction that wrote was sent and its answer never
    /// came: `cause` says what happened (a lost connection, a timeout).
    /// The transaction may have committed or not; a blind retry may apply
    /// it twice. (A transaction of reads only gets the cause itself: it
    /// changed nothing, so retrying is safe.) Read back what
    /// it wrote before retrying, or make it idempotent. Also a durable
    /// commit whose commit was confirmed but whose wait for durability
    /// failed (the transaction's state then says `Committed`: what is
    /// unknown is whether it outlives a crash). Class `OutcomeUnknown`,
    /// code `CommitOutcomeUnknown`; not temporary.
    OutcomeUnknown {
        /// What was lost.
        cause: Box<ClientError>,
    },
    /// No reply within the reply timeout: the outcome of the request is
    /// unknown (a commit's timeout is an [`ClientError::OutcomeUnknown`]).
    Timeout {
        /// What was waited for.
        what: &'static str,
        /// How long.
        waited: Duration,
    },
    /// The data node sent something this client does not understand.
    Protocol(String),
    /// The API was used wrongly (for example executing a committed transaction).
    Usage(String),
}

impl ClientError {
    /// The registry code of this error, when it has one.
    ///
    /// ```
    /// use client::ClientError;
    /// let error = ClientError::Usage("transaction already committed".into());
    /// assert_eq!(error.code(), None);
    /// ```
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::DuplicateKey { .. } => Some(ErrorCode::DuplicateKey),
            ClientError::Operation { code, .. }
            | ClientError::Schema { code, .. }
            | ClientError::Invalid { code, .. }
            | ClientError::DurableWaitRefused { code, .. } => Some(*code),
            ClientError::ConnectionLost { .. } => Some(ErrorCode::ConnectionLost),
            ClientError::OutcomeUnknown { .. } => Some(ErrorCode::CommitOutcomeUnknown),
            ClientError::RolledBack { .. } => Some(ErrorCode::GciRolledBack),
            ClientError::NotStarted { .. } => Some(ErrorCode::NodeNotStarted),
            _ => None,
        }
    }

    /// The class of the error code, when there is one.
    ///
    /// ```
    /// use client::ClientError;
    /// use signal::{error::ErrorClass, ErrorCode};
    /// let error = ClientError::Operation { code: ErrorCode::DuplicateKey, op: None, table: None };
    /// assert_eq!(error.class(), Some(ErrorClass::Constraint));
    /// ```
    pub fn class(&self) -> Option<ErrorClass> {
        self.code().map(ErrorCode::class)
    }

    /// Whether retrying the whole transaction may succeed. A timeout counts
    /// as temporary: the data node may only have been slow.
    ///
    /// ```
    /// use client::ClientError;
    /// use signal::ErrorCode;
    /// let error = ClientError::Operation { code: ErrorCode::NoSuchRow, op: None, table: None };
    /// assert!(!error.is_temporary());
    /// ```
    pub fn is_temporary(&self) -> bool {
        if matches!(self, ClientError::OutcomeUnknown { .. }) {
            return false;
        }
        matches!(self, ClientError::Timeout { .. }) || self.class() == Some(ErrorClass::Temporary)
    }

    /// Whether a commit was sent and may or may not have happened (class
    /// `OutcomeUnknown`): find out before retrying.
    ///
    /// ```
    /// use client::ClientError;
    /// let lost = ClientError::Timeout { what: "a commit", waited: std::time::Duration::ZERO };
    /// let error = ClientError::OutcomeUnknown { cause: Box::new(lost) };
    /// assert!(error.is_outcome_unknown() && !error.is_temporary());
    /// ```
    pub fn is_outcome_unknown(&self) -> bool {
        matches!(self, ClientError::OutcomeUnknown { .. })
    }

    /// The failing operation of an `Operation` error, when the data node named one.
    ///
    /// ```
    /// use client::ClientError;
    /// let error = ClientError::Usage("x".into());
    /// assert_eq!(error.failed_op(), None);
    /// ```
    pub fn failed_op(&self) -> Option<OpId> {
        match self {
            ClientError::Operation { op, .. } | ClientError::DuplicateKey { op, .. } => *op,
            _ => None,
        }
    }

    /// The name of the table of the operation that failed, when the data
    /// node named the operation: the table an error of a round trip that
    /// carried several tables' operations is about.
    ///
    /// ```
    /// use client::ClientError;
    /// let error = ClientError::Usage("x".into());
    /// assert_eq!(error.failed_table(), None);
    /// ```
    pub fn failed_table(&self) -> Option<&str> {
        match self {
            ClientError::Operation { table, .. } | ClientError::DuplicateKey { table, .. } => {
                table.as_deref()
            }
            _ => None,
        }
    }

    /// A short stable label for counting errors: the code's number, or the
    /// variant's name when there is no code (`"timeout"`, `"protocol"`, ...);
    /// an unknown outcome names its cause after a slash.
    ///
    /// ```
    /// use client::ClientError;
    /// use signal::ErrorCode;
    /// let error = ClientError::Operation { code: ErrorCode::DuplicateKey, op: None, table: None };
    /// assert_eq!(error.label(), "630");
    /// let timeout = ClientError::Timeout { what: "a commit", waited: Default::default() };
    /// let unknown = ClientError::OutcomeUnknown { cause: Box::new(timeout) };
    /// assert_eq!(unknown.label(), "4022/timeout");
    /// ```
    pub fn label(&self) -> String {
        if let ClientError::OutcomeUnknown { cause } = self {
            // Which loss made it unknown matters to whoever counts.
            let code = ErrorCode::CommitOutcomeUnknown as u16;
            return format!("{code}/{}", cause.label());
        }
        if let Some(code) = self.code() {
            return (code as u16).to_string();
        }
        match self {
            ClientError::Mgmd(_) => "mgmd",
            ClientError::Config(_) => "config",
            ClientError::Connect { .. } => "connect",
            ClientError::Timeout { .. } => "timeout",
            ClientError::Protocol(_) => "protocol",
            _ => "usage",
        }
        .to_string()
    }
}

impl ClientError {
    /// A copy, for reporting one failure to several transactions (an I/O
    /// error is copied as its kind and message).
    pub(crate) fn duplicate(&self) -> ClientError {
        match self {
            ClientError::Mgmd(error) => ClientError::Protocol(error.to_string()),
            ClientError::Config(message) => ClientError::Config(message.clone()),
            ClientError::Connect { addr, source } => ClientError::Connect {
                addr: addr.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            ClientError::NotStarted { addr, waited } => ClientError::NotStarted {
                addr: addr.clone(),
                waited: *waited,
            },
            ClientError::Operation { code, op, table } => ClientError::Operation {
                code: *code,
                op: *op,
                table: table.clone(),
            },
            ClientError::DuplicateKey {
                index,
                entry,
                op,
                table,
            } => ClientError::DuplicateKey {
                index: index.clone(),
                entry: entry.clone(),
                op: *op,
                table: table.clone(),
            },
            ClientError::Schema { code, table } => ClientError::Schema {
                code: *code,
                table: table.clone(),
            },
            ClientError::Invalid { code, detail } => ClientError::Invalid {
                code: *code,
                detail: detail.clone(),
            },
            ClientError::ConnectionLost { node, reason } => ClientError::ConnectionLost {
                node: *node,
                reason: reason.clone(),
            },
            ClientError::DurableWaitRefused { code, gci } => ClientError::DurableWaitRefused {
                code: *code,
                gci: *gci,
            },
            ClientError::Timeout { what, waited } => ClientError::Timeout {
                what,
                waited: *waited,
            },
            ClientError::OutcomeUnknown { cause } => ClientError::OutcomeUnknown {
                cause: Box::new(cause.duplicate()),
            },
            ClientError::RolledBack { gci } => ClientError::RolledBack { gci: *gci },
            ClientError::Protocol(message) => ClientError::Protocol(message.clone()),
            ClientError::Usage(message) => ClientError::Usage(message.clone()),
        }
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Mgmd(error) => write!(f, "{error}"),
            ClientError::Config(message) => write!(f, "unusable cluster config: {message}"),
            ClientError::Connect { addr, source } => {
                write!(f, "cannot connect to data node at {addr}: {source}")
            }
            ClientError::NotStarted { addr, waited } => write!(
                f,
                "data node at {addr} did not finish starting within {} ms",
                waited.as_millis()
            ),
            ClientError::Operation {
                code, op: Some(op), ..
            } => {
                write!(f, "operation {} failed: {code}", op.index())
            }
            ClientError::Operation { code, op: None, .. } => {
                write!(f, "transaction failed: {code}")
            }
            ClientError::DuplicateKey { index: None, .. } => {
                write!(f, "duplicate primary key: {}", ErrorCode::DuplicateKey)
            }
            ClientError::DuplicateKey {
                index: Some(index), ..
            } => write!(
                f,
                "duplicate value for unique index {index:?}: {}",
                ErrorCode::DuplicateKey
            ),
            ClientError::Schema { code, table } => write!(f, "table {table:?}: {code}"),
            ClientError::Invalid { code, detail } => write!(f, "{detail}: {code}"),
            ClientError::ConnectionLost { node, reason } => write!(
                f,
                "connection to data node {node} lost ({reason}); the outcome of requests in \
                 flight is unknown ({})",
                ErrorCode::ConnectionLost
            ),
            ClientError::DurableWaitRefused { code, gci } => write!(
                f,
                "the data node would not wait for GCI {gci} to become durable: {code}; what \
                 committed in it stays committed, its durability is not confirmed yet"
            ),
            ClientError::Timeout { what, waited } => write!(
                f,
                "no reply to {what} within {} ms; the outcome is unknown",
                waited.as_millis()
            ),
            ClientError::OutcomeUnknown { cause } => {
                write!(f, "{}; {cause}", ErrorCode::CommitOutcomeUnknown)
            }
            ClientError::RolledBack { gci } => write!(
                f,
                "GCI {gci} was rolled back by a whole-cluster restart: what committed in it is \
                 lost ({})",
                ErrorCode::GciRolledBack
            ),
            ClientError::Protocol(message) => write!(f, "protocol error from data node: {message}"),
            ClientError::Usage(message) => write!(f, "{message}"),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientError::Mgmd(error) => Some(error),
            ClientError::Connect { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<mgmclient::MgmdError> for ClientError {
    fn from(error: mgmclient::MgmdError) -> ClientError {
        ClientError::Mgmd(error)
    }
}
