//! `MgmdError`: every way the management server or its clients can fail,
//! worded so a user can act on it ("cannot connect to mgmd at
//! 127.0.0.1:11860: connection refused").

use std::fmt;
use std::io;

use config::ConfigError;

#[derive(Debug)]
pub enum MgmdError {
    /// The cluster config file is wrong or unreadable.
    Config(ConfigError),
    /// The server could not listen on its address.
    Bind { addr: String, source: io::Error },
    /// A client could not reach mgmd.
    Connect { addr: String, source: io::Error },
    /// Reading or writing failed; `context` says what was being done.
    Io { context: String, source: io::Error },
    /// mgmd answered something that is not a valid response.
    Protocol(String),
    /// mgmd understood the request and refused it; its own message.
    Refused(String),
    /// `tessera mgm` was given a command it does not know.
    UnknownCommand(String),
    /// mgmd has no usable cluster secret (none named, unreadable, too
    /// short): it cannot issue API tokens, so it does not start.
    Secret(String),
    /// mgmd cannot read or keep its state file (the data nodes' start
    /// counts and its arbitration grants): it does not start on a state
    /// it cannot trust.
    State(String),
}

/// Commands `mgm::run_command` understands, for error messages and help.
pub const KNOWN_COMMANDS: &[&str] = &[
    "show",
    "all report threads",
    "all report checkpoints",
    "node <id> fault <point> [delay <ms>]",
    "node <id> restart [--initial]",
    "node <id> stop",
    "node <id> start",
    "all restart",
];

impl fmt::Display for MgmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MgmdError::Config(e) => write!(f, "{e}"),
            MgmdError::Bind { addr, source } => {
                write!(f, "cannot listen on {addr}: {}", describe_io(source))
            }
            MgmdError::Connect { addr, source } => {
                write!(
                    f,
                    "cannot connect to mgmd at {addr}: {}",
                    describe_io(source)
                )
            }
            MgmdError::Io { context, source } => write!(f, "{context}: {}", describe_io(source)),
            MgmdError::Protocol(message) => write!(f, "bad response from mgmd: {message}"),
            MgmdError::Refused(message) => write!(f, "mgmd: {message}"),
            MgmdError::UnknownCommand(command) => write!(
                f,
                "unknown command \"{command}\"; known commands: {}",
                KNOWN_COMMANDS.join(", ")
            ),
            MgmdError::Secret(message) => write!(f, "{message}"),
            MgmdError::State(message) => write!(f, "mgmd's state: {message}"),
        }
    }
}

impl std::error::Error for MgmdError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MgmdError::Config(e) => Some(e),
            MgmdError::Bind { source, .. }
            | MgmdError::Connect { source, .. }
            | MgmdError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<ConfigError> for MgmdError {
    fn from(e: ConfigError) -> Self {
        MgmdError::Config(e)
    }
}

/// Short lower-case wording for the common socket errors; std's Display
/// adds "(os error 111)" and capitals, which read badly after a colon.
pub(crate) fn describe_io(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => "connection refused".to_owned(),
        io::ErrorKind::ConnectionReset => "connection reset".to_owned(),
        io::ErrorKind::ConnectionAborted => "connection aborted".to_owned(),
        io::ErrorKind::BrokenPipe => "connection closed".to_owned(),
        io::ErrorKind::UnexpectedEof => "connection closed".to_owned(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => "timed out".to_owned(),
        io::ErrorKind::AddrInUse => "address already in use".to_owned(),
        io::ErrorKind::AddrNotAvailable => "address not available".to_owned(),
        _ => e.to_string(),
    }
}
