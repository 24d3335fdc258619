//! error: the one error type of every decoder in this crate.

use std::fmt;

/// Why bytes from a client could not be decoded (or a packet refused).
///
/// The server answers most of these by closing the connection: after a
/// framing or decoding error the byte stream can no longer be trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// The input ended while reading the named field.
    Truncated(&'static str),
    /// The input is complete but not valid for the protocol.
    Malformed(String),
    /// A packet announced more bytes than the limit allows.
    TooLarge {
        /// The announced size in bytes (so far, for multi-frame packets).
        size: usize,
        /// The limit the caller set.
        limit: usize,
    },
    /// Valid protocol this crate (or Tessera) does not speak.
    Unsupported(String),
}

impl fmt::Display for WireError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated(what) => write!(formatter, "truncated packet: missing {what}"),
            WireError::Malformed(why) => write!(formatter, "malformed packet: {why}"),
            WireError::TooLarge { size, limit } => {
                write!(
                    formatter,
                    "packet of {size} bytes exceeds the limit of {limit} bytes"
                )
            }
            WireError::Unsupported(what) => write!(formatter, "unsupported: {what}"),
        }
    }
}

impl std::error::Error for WireError {}
