//! The framing of the management protocol: one JSON object per line. Shared
//! by the server and the clients so both enforce the same line limit and
//! write each message with a single `write_all` (messages from two threads
//! on one socket must never interleave).

use std::io::{self, BufRead, Write};

use serde_json::Value;

/// Longest line the server accepts; a longer one closes the connection, so
/// a confused or hostile peer cannot make mgmd buffer without bound (with
/// `MAX_CONNECTIONS` connections, 32 MiB at most). A data node's status
/// push, the longest request, is a few KiB.
pub const MAX_LINE_BYTES: usize = 64 << 10;

/// What `read_line` found.
#[derive(Debug, PartialEq, Eq)]
pub enum LineRead {
    /// `buf` holds one whole line, without its '\n'.
    Complete,
    /// The peer closed the connection (a partial last line is dropped).
    Eof,
    /// The line grew past the limit before its '\n' arrived.
    TooLong,
}

/// Appends bytes to `buf` until a '\n'. On a read error (such as a read
/// timeout) the bytes read so far stay in `buf`, so calling again resumes
/// the same line; the caller clears `buf` after each complete line.
pub fn read_line(reader: &mut impl BufRead, buf: &mut Vec<u8>, max: usize) -> io::Result<LineRead> {
    loop {
        let available = match reader.fill_buf() {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(LineRead::Eof);
        }
        let (taken, complete) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => {
                buf.extend_from_slice(&available[..i]);
                (i + 1, true)
            }
            None => {
                buf.extend_from_slice(available);
                (available.len(), false)
            }
        };
        reader.consume(taken);
        if buf.len() > max {
            return Ok(LineRead::TooLong);
        }
        if complete {
            return Ok(LineRead::Complete);
        }
    }
}

/// Writes `value` as one line with a single write.
pub fn write_line(writer: &mut impl Write, value: &Value) -> io::Result<()> {
    let mut bytes = serde_json::to_vec(value).map_err(io::Error::other)?;
    bytes.push(b'\n');
    writer.write_all(&bytes)?;
    writer.flush()
}

/// Formats host and port as a socket address string, bracketing IPv6.
pub fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufReader;

    #[test]
    fn reads_lines_and_enforces_the_limit() {
        let data = b"{\"a\":1}\r\n\nabcdefghij\nrest".to_vec();
        let mut reader = BufReader::with_capacity(3, &data[..]);
        let mut buf = Vec::new();
        assert_eq!(
            read_line(&mut reader, &mut buf, 8).ok(),
            Some(LineRead::Complete)
        );
        assert_eq!(buf, b"{\"a\":1}\r");
        buf.clear();
        assert_eq!(
            read_line(&mut reader, &mut buf, 8).ok(),
            Some(LineRead::Complete)
        );
        assert!(buf.is_empty());
        assert_eq!(
            read_line(&mut reader, &mut buf, 8).ok(),
            Some(LineRead::TooLong)
        );
        buf.clear();
        let mut reader = BufReader::new(&b"rest"[..]);
        assert_eq!(
            read_line(&mut reader, &mut buf, 8).ok(),
            Some(LineRead::Eof)
        );
    }

    #[test]
    fn ipv6_hosts_are_bracketed() {
        assert_eq!(host_port("127.0.0.1", 1), "127.0.0.1:1");
        assert_eq!(host_port("::1", 2), "[::1]:2");
        assert_eq!(host_port("[::1]", 3), "[::1]:3");
    }
}
