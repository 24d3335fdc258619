//! A small blocking MySQL client for the SQL benchmarks: one TCP
//! connection, the handshake (mysql_native_password, and
//! caching_sha2_password's fast path), text queries and their results,
//! MySQL's errors. Its packets are `mysql_protocol`'s, the same codec the
//! SQL node speaks, so a benchmark runs the same way against `tessera
//! sql` and MariaDB. Values travel as text: statements carry their
//! values as literals (`quote` makes text safe to put in one).

use mysql_protocol::{self as wire, PacketWriter, Reader};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Where and as whom to connect.
#[derive(Clone, Debug)]
pub struct ConnectOptions {
    /// HOST:PORT.
    pub address: String,
    /// The user.
    pub user: String,
    /// The password (empty: none).
    pub password: String,
    /// The database to start in.
    pub database: Option<String>,
}

/// An error: the server's (its number and message) or the connection's
/// (number 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MysqlError {
    /// MySQL's error number; 0 for a broken or refused connection.
    pub code: u16,
    /// What happened.
    pub message: String,
}

impl MysqlError {
    fn client(message: impl Into<String>) -> MysqlError {
        MysqlError {
            code: 0,
            message: message.into(),
        }
    }

    /// A deadlock or lock wait timeout: the transaction was rolled back
    /// and may run again (1213, 1205).
    pub fn is_retryable(&self) -> bool {
        matches!(self.code, 1213 | 1205)
    }
}

impl std::fmt::Display for MysqlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.code {
            0 => write!(f, "{}", self.message),
            code => write!(f, "ERROR {code}: {}", self.message),
        }
    }
}

impl std::error::Error for MysqlError {}

impl From<io::Error> for MysqlError {
    fn from(error: io::Error) -> MysqlError {
        MysqlError::client(format!("connection: {error}"))
    }
}

impl From<wire::WireError> for MysqlError {
    fn from(error: wire::WireError) -> MysqlError {
        MysqlError::client(format!("malformed packet from the server: {error:?}"))
    }
}

/// What a statement gave back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueryResult {
    /// Its rows, each value as text (`None`: NULL); empty for a statement
    /// without a result set.
    pub rows: Vec<Vec<Option<String>>>,
    /// Rows changed (an OK's count).
    pub affected_rows: u64,
    /// The first AUTO_INCREMENT value generated.
    pub last_insert_id: u64,
}

impl QueryResult {
    /// The first row's first value, when there is one and it is not NULL.
    pub fn scalar(&self) -> Option<&str> {
        self.rows.first()?.first()?.as_deref()
    }
}

/// The capabilities this client uses.
const CAPABILITIES: u32 = wire::CLIENT_LONG_PASSWORD
    | wire::CLIENT_LONG_FLAG
    | wire::CLIENT_PROTOCOL_41
    | wire::CLIENT_TRANSACTIONS
    | wire::CLIENT_SECURE_CONNECTION
    | wire::CLIENT_PLUGIN_AUTH
    | wire::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
    | wire::CLIENT_MULTI_RESULTS;

/// Largest packet accepted from the server.
const MAX_PACKET: usize = 64 << 20;

/// A connection.
pub struct Connection {
    stream: TcpStream,
    input: Vec<u8>,
}

impl Connection {
    /// Connects and logs in.
    pub fn connect(options: &ConnectOptions) -> Result<Connection, MysqlError> {
        let stream = TcpStream::connect(&options.address).map_err(|error| {
            MysqlError::client(format!("connecting to {}: {error}", options.address))
        })?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(120)))?;
        let mut connection = Connection {
            stream,
            input: Vec::new(),
        };
        connection.log_in(options)?;
        Ok(connection)
    }

    /// The next packet: its sequence id and payload.
    fn read_packet(&mut self) -> Result<(u8, Vec<u8>), MysqlError> {
        loop {
            if let Some(packet) = wire::take_packet(&self.input, MAX_PACKET)? {
                let taken = (packet.sequence, packet.payload.into_owned());
                let consumed = packet.consumed;
                self.input.drain(..consumed);
                return Ok(taken);
            }
            let mut chunk = [0u8; 64 * 1024];
            let read = self.stream.read(&mut chunk)?;
            if read == 0 {
                return Err(MysqlError::client("the server closed the connection"));
            }
            self.input.extend_from_slice(&chunk[..read]);
        }
    }

    fn write_packet(&mut self, sequence: u8, payload: &[u8]) -> Result<(), MysqlError> {
        let mut out = Vec::with_capacity(payload.len() + 4);
        PacketWriter::new(sequence).packet(&mut out, payload);
        self.stream.write_all(&out)?;
        Ok(())
    }

    fn log_in(&mut self, options: &ConnectOptions) -> Result<(), MysqlError> {
        let (_, greeting) = self.read_packet()?;
        if greeting.first() == Some(&0xFF) {
            return Err(server_error(&greeting));
        }
        let mut reader = Reader::new(&greeting);
        let protocol = reader.u8()?;
        if protocol != 10 {
            return Err(MysqlError::client(format!(
                "unknown protocol version {protocol}"
            )));
        }
        reader.null_terminated()?; // server version
        reader.u32()?; // connection id
        let mut scramble = reader.bytes(8)?.to_vec();
        reader.u8()?; // filler
        let low = reader.u16()? as u32;
        reader.u8()?; // charset
        reader.u16()?; // status
        let high = reader.u16()? as u32;
        let server_capabilities = low | high << 16;
        let data_length = reader.u8()? as usize;
        reader.skip(10)?;
        let rest = data_length.saturating_sub(8).max(13);
        let part = reader.bytes(rest.min(reader.remaining()))?;
        // The second part ends with a NUL that is not scramble.
        scramble.extend_from_slice(&part[..part.len().saturating_sub(1)]);
        let plugin = String::from_utf8_lossy(reader.null_terminated_or_rest()).into_owned();
        let scramble: [u8; 20] = scramble
            .get(..20)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| MysqlError::client("the greeting's scramble is short"))?;
        let plugin = match plugin.as_str() {
            "caching_sha2_password" => "caching_sha2_password",
            _ => "mysql_native_password",
        };
        let mut capabilities = CAPABILITIES & server_capabilities | wire::CLIENT_PROTOCOL_41;
        if options.database.is_some() {
            capabilities |= wire::CLIENT_CONNECT_WITH_DB;
        }
        let mut response = Vec::new();
        response.extend_from_slice(&capabilities.to_le_bytes());
        response.extend_from_slice(&(MAX_PACKET as u32).to_le_bytes());
        response.push(wire::UTF8MB4_GENERAL_CI);
        response.extend_from_slice(&[0u8; 23]);
        response.extend_from_slice(options.user.as_bytes());
        response.push(0);
        wire::put_lenenc_bytes(&mut response, &answer(plugin, &options.password, &scramble));
        if let Some(database) = &options.database {
            response.extend_from_slice(database.as_bytes());
            response.push(0);
        }
        response.extend_from_slice(plugin.as_bytes());
        response.push(0);
        self.write_packet(1, &response)?;
        loop {
            let (sequence, packet) = self.read_packet()?;
            match packet.first() {
                Some(0x00) => return Ok(()),
                Some(0xFF) => return Err(server_error(&packet)),
                // An auth switch: answer its scramble with its plugin.
                Some(0xFE) => {
                    let mut reader = Reader::new(&packet[1..]);
                    let plugin = String::from_utf8_lossy(reader.null_terminated()?).into_owned();
                    let data = reader.rest();
                    let scramble: [u8; 20] = data
                        .get(..20)
                        .and_then(|s| s.try_into().ok())
                        .ok_or_else(|| MysqlError::client("an auth switch without a scramble"))?;
                    let reply = answer(&plugin, &options.password, &scramble);
                    self.write_packet(sequence.wrapping_add(1), &reply)?;
                }
                // caching_sha2_password: 3 is the fast path's success (an OK
                // follows); 4 asks for the password, which needs TLS.
                Some(0x01) => {
                    match packet.get(1) {
                        Some(0x03) => continue,
                        _ => return Err(MysqlError::client(
                            "the server wants the password itself (caching_sha2_password's full \
                             authentication), which this client sends only over TLS, which it \
                             lacks: use a mysql_native_password account",
                        )),
                    }
                }
                _ => return Err(MysqlError::client("an unexpected answer to the login")),
            }
        }
    }

    /// Runs one statement (COM_QUERY).
    pub fn query(&mut self, sql: &str) -> Result<QueryResult, MysqlError> {
        let mut payload = Vec::with_capacity(sql.len() + 1);
        payload.push(0x03);
        payload.extend_from_slice(sql.as_bytes());
        self.write_packet(0, &payload)?;
        let (_, first) = self.read_packet()?;
        match first.first() {
            Some(0x00) => {
                let mut reader = Reader::new(&first[1..]);
                let affected_rows = reader.lenenc_int()?.unwrap_or(0);
                let last_insert_id = reader.lenenc_int()?.unwrap_or(0);
                Ok(QueryResult {
                    rows: Vec::new(),
                    affected_rows,
                    last_insert_id,
                })
            }
            Some(0xFF) => Err(server_error(&first)),
            _ => {
                let columns = Reader::new(&first)
                    .lenenc_int()?
                    .ok_or_else(|| MysqlError::client("a result set without a column count"))?
                    as usize;
                for _ in 0..columns {
                    self.read_packet()?;
                }
                // The EOF after the definitions.
                let (_, eof) = self.read_packet()?;
                if eof.first() != Some(&0xFE) {
                    return Err(MysqlError::client("no EOF after the column definitions"));
                }
                let mut rows = Vec::new();
                loop {
                    let (_, packet) = self.read_packet()?;
                    match packet.first() {
                        Some(0xFE) if packet.len() < 9 => break,
                        Some(0xFF) => return Err(server_error(&packet)),
                        _ => {
                            let mut reader = Reader::new(&packet);
                            let mut row = Vec::with_capacity(columns);
                            for _ in 0..columns {
                                if reader.remaining() > 0
                                    && packet[packet.len() - reader.remaining()] == 0xFB
                                {
                                    reader.u8()?;
                                    row.push(None);
                                } else {
                                    let bytes = reader.lenenc_bytes()?;
                                    row.push(Some(String::from_utf8_lossy(bytes).into_owned()));
                                }
                            }
                            rows.push(row);
                        }
                    }
                }
                Ok(QueryResult {
                    rows,
                    affected_rows: 0,
                    last_insert_id: 0,
                })
            }
        }
    }
}

/// The login answer `plugin` computes for `password` (empty for none).
fn answer(plugin: &str, password: &str, scramble: &[u8; 20]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    match plugin {
        "caching_sha2_password" => {
            wire::caching_sha2_response(password.as_bytes(), scramble).to_vec()
        }
        _ => wire::native_password_response(password.as_bytes(), scramble).to_vec(),
    }
}

/// The error in an ERR packet.
fn server_error(packet: &[u8]) -> MysqlError {
    let code = packet
        .get(1..3)
        .map_or(0, |bytes| u16::from_le_bytes([bytes[0], bytes[1]]));
    // `#` and the five-character SQLSTATE come before the message.
    let message = match packet.get(3) {
        Some(b'#') => packet.get(9..).unwrap_or_default(),
        _ => packet.get(3..).unwrap_or_default(),
    };
    MysqlError {
        code: code.max(1),
        message: String::from_utf8_lossy(message).into_owned(),
    }
}

/// `text` as a SQL string literal: quoted, its quotes and backslashes
/// escaped.
pub fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        match c {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            '\0' => out.push_str("\\0"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_keeps_text_inside_its_literal() {
        assert_eq!(quote("it's"), "'it''s'");
        assert_eq!(quote("a\\b"), "'a\\\\b'");
        assert_eq!(quote(""), "''");
    }

    #[test]
    fn server_errors_read_their_number_and_message() {
        let mut packet = vec![0xFF, 0x15, 0x04, b'#'];
        packet.extend_from_slice(b"28000Access denied");
        let error = server_error(&packet);
        assert_eq!(error.code, 1045);
        assert_eq!(error.message, "Access denied");
        assert!(!error.is_retryable());
    }
}
