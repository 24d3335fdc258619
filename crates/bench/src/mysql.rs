//! A small blocking MySQL client for the SQL benchmarks: one TCP
//! connection, the handshake (mysql_native_password, and
//! caching_sha2_password's fast path), text queries and their results,
//! statements with `?` parameters run either as text (the values put in
//! as literals) or prepared (COM_STMT_PREPARE once per text, then
//! COM_STMT_EXECUTE with binary values and binary rows), MySQL's errors.
//! Its packets are `mysql_protocol`'s, the same codec the SQL node
//! speaks, so a benchmark runs the same way against `tessera sql` and
//! MariaDB. Results come back as text either way (`quote` makes text
//! safe to put in a literal).

use mysql_protocol::{self as wire, ColumnType, PacketWriter, Reader};
use std::collections::HashMap;
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
    /// Run statements with parameters prepared (server-side), not as
    /// text.
    pub prepared: bool,
    /// Ask the server to let a transaction's INSERTs wait for its next
    /// round trip (NDB's `transaction_allow_batching`), where it knows
    /// the variable; a server that does not runs without.
    pub batching: bool,
}

/// A statement parameter's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param<'a> {
    /// An integer.
    Int(i64),
    /// Text.
    Text(&'a str),
}

/// A statement the server prepared.
struct Prepared {
    id: u32,
    params: usize,
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

/// ER_UNKNOWN_SYSTEM_VARIABLE.
const UNKNOWN_SYSTEM_VARIABLE: u16 = 1193;

/// Largest packet accepted from the server.
const MAX_PACKET: usize = 64 << 20;

/// A connection.
pub struct Connection {
    stream: TcpStream,
    input: Vec<u8>,
    prepared: bool,
    /// Statements prepared on this connection, by text.
    statements: HashMap<String, Prepared>,
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
            prepared: options.prepared,
            statements: HashMap::new(),
        };
        connection.log_in(options)?;
        if options.batching {
            match connection.query("SET SESSION transaction_allow_batching = 1") {
                Err(error) if error.code == UNKNOWN_SYSTEM_VARIABLE => {}
                other => {
                    other?;
                }
            }
        }
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

    /// Runs `sql` with its `?` placeholders taking `params` in order:
    /// prepared (once per text on this connection) when the connection
    /// was opened so, else as text with the values as literals.
    pub fn run(&mut self, sql: &str, params: &[Param<'_>]) -> Result<QueryResult, MysqlError> {
        if !self.prepared {
            return self.query(&interpolate(sql, params)?);
        }
        let (id, count) = match self.statements.get(sql) {
            Some(prepared) => (prepared.id, prepared.params),
            None => {
                let prepared = self.prepare(sql)?;
                let taken = (prepared.id, prepared.params);
                self.statements.insert(sql.to_string(), prepared);
                taken
            }
        };
        if count != params.len() {
            return Err(MysqlError::client(format!(
                "{sql:?} has {count} parameters, {} given",
                params.len()
            )));
        }
        self.execute(id, params)
    }

    /// COM_STMT_PREPARE: the statement's id and parameter count.
    fn prepare(&mut self, sql: &str) -> Result<Prepared, MysqlError> {
        let mut payload = Vec::with_capacity(sql.len() + 1);
        payload.push(0x16);
        payload.extend_from_slice(sql.as_bytes());
        self.write_packet(0, &payload)?;
        let (_, first) = self.read_packet()?;
        match first.first() {
            Some(0x00) => {}
            Some(0xFF) => return Err(server_error(&first)),
            _ => return Err(MysqlError::client("an unexpected answer to a prepare")),
        }
        let mut reader = Reader::new(&first[1..]);
        let id = reader.u32()?;
        let columns = reader.u16()? as usize;
        let params = reader.u16()? as usize;
        // The parameters' and the columns' definitions, each run ended by
        // an EOF (no CLIENT_DEPRECATE_EOF).
        for count in [params, columns] {
            if count > 0 {
                for _ in 0..=count {
                    self.read_packet()?;
                }
            }
        }
        Ok(Prepared { id, params })
    }

    /// COM_STMT_EXECUTE of statement `id` with `params`.
    fn execute(&mut self, id: u32, params: &[Param<'_>]) -> Result<QueryResult, MysqlError> {
        let mut payload = vec![0x17];
        payload.extend_from_slice(&id.to_le_bytes());
        payload.push(0); // no cursor
        payload.extend_from_slice(&1u32.to_le_bytes()); // iterations
        if !params.is_empty() {
            payload.extend(std::iter::repeat_n(0u8, params.len().div_ceil(8))); // no NULLs
            payload.push(1); // types follow
            for param in params {
                let column_type = match param {
                    Param::Int(_) => ColumnType::LongLong,
                    Param::Text(_) => ColumnType::VarString,
                };
                payload.extend_from_slice(&[column_type.as_u8(), 0]);
            }
            for param in params {
                match param {
                    Param::Int(value) => payload.extend_from_slice(&value.to_le_bytes()),
                    Param::Text(text) => wire::put_lenenc_bytes(&mut payload, text.as_bytes()),
                }
            }
        }
        self.write_packet(0, &payload)?;
        self.read_result(|packet, types| match packet.first() {
            Some(0x00) => binary_row(packet, types),
            _ => Err(MysqlError::client("a binary row without its 0x00 header")),
        })
    }

    /// Reads a statement's answer: an OK, an error, or a result set whose
    /// rows `row` decodes (given the columns' types and signedness).
    fn read_result(
        &mut self,
        mut row: impl FnMut(&[u8], &[(ColumnType, bool)]) -> Result<Vec<Option<String>>, MysqlError>,
    ) -> Result<QueryResult, MysqlError> {
        let (_, first) = self.read_packet()?;
        let columns = match first.first() {
            Some(0x00) => return ok_result(&first),
            Some(0xFF) => return Err(server_error(&first)),
            _ => Reader::new(&first)
                .lenenc_int()?
                .ok_or_else(|| MysqlError::client("a result set without a column count"))?
                as usize,
        };
        let mut types = Vec::with_capacity(columns);
        for _ in 0..columns {
            let (_, definition) = self.read_packet()?;
            types.push(column_type(&definition)?);
        }
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
                _ => rows.push(row(&packet, &types)?),
            }
        }
        Ok(QueryResult {
            rows,
            affected_rows: 0,
            last_insert_id: 0,
        })
    }

    /// Runs one statement (COM_QUERY).
    pub fn query(&mut self, sql: &str) -> Result<QueryResult, MysqlError> {
        let mut payload = Vec::with_capacity(sql.len() + 1);
        payload.push(0x03);
        payload.extend_from_slice(sql.as_bytes());
        self.write_packet(0, &payload)?;
        self.read_result(|packet, types| text_row(packet, types.len()))
    }
}

/// A text protocol row of `columns` values (NULL as 0xFB).
fn text_row(packet: &[u8], columns: usize) -> Result<Vec<Option<String>>, MysqlError> {
    let mut reader = Reader::new(packet);
    let mut row = Vec::with_capacity(columns);
    for _ in 0..columns {
        if reader.remaining() > 0 && packet[packet.len() - reader.remaining()] == 0xFB {
            reader.u8()?;
            row.push(None);
        } else {
            let bytes = reader.lenenc_bytes()?;
            row.push(Some(String::from_utf8_lossy(bytes).into_owned()));
        }
    }
    Ok(row)
}

/// An OK packet's counts.
fn ok_result(packet: &[u8]) -> Result<QueryResult, MysqlError> {
    let mut reader = Reader::new(&packet[1..]);
    let affected_rows = reader.lenenc_int()?.unwrap_or(0);
    let last_insert_id = reader.lenenc_int()?.unwrap_or(0);
    Ok(QueryResult {
        rows: Vec::new(),
        affected_rows,
        last_insert_id,
    })
}

/// `sql` with each `?` outside quotes replaced by its parameter as a
/// literal.
fn interpolate(sql: &str, params: &[Param<'_>]) -> Result<String, MysqlError> {
    let mut out = String::with_capacity(sql.len() + 16 * params.len());
    let mut values = params.iter();
    let mut quoted: Option<char> = None;
    for character in sql.chars() {
        match (quoted, character) {
            (Some(open), c) if c == open => quoted = None,
            (None, '\'' | '"' | '`') => quoted = Some(character),
            (None, '?') => {
                match values.next() {
                    Some(Param::Int(value)) => out.push_str(&value.to_string()),
                    Some(Param::Text(text)) => out.push_str(&quote(text)),
                    None => {
                        return Err(MysqlError::client(format!(
                            "{sql:?} has more parameters than the {} given",
                            params.len()
                        )))
                    }
                }
                continue;
            }
            _ => {}
        }
        out.push(character);
    }
    match values.next() {
        Some(_) => Err(MysqlError::client(format!(
            "{sql:?} has fewer parameters than the {} given",
            params.len()
        ))),
        None => Ok(out),
    }
}

/// A column definition's type, and whether it is UNSIGNED.
fn column_type(definition: &[u8]) -> Result<(ColumnType, bool), MysqlError> {
    let mut reader = Reader::new(definition);
    for _ in 0..6 {
        reader.lenenc_bytes()?; // catalog, schema, table, org_table, name, org_name
    }
    reader.lenenc_int()?; // length of the fixed fields
    reader.u16()?; // character set
    reader.u32()?; // display length
    let byte = reader.u8()?;
    let flags = reader.u16()?;
    let column_type = ColumnType::from_u8(byte)
        .ok_or_else(|| MysqlError::client(format!("a column of unknown type {byte}")))?;
    Ok((column_type, flags & wire::UNSIGNED_FLAG != 0))
}

/// A binary result row's values, as text (`None`: NULL), as the text
/// protocol would give them for the types the benchmarks read.
fn binary_row(
    packet: &[u8],
    types: &[(ColumnType, bool)],
) -> Result<Vec<Option<String>>, MysqlError> {
    let bitmap_bytes = (types.len() + 7 + 2) / 8;
    let bitmap = packet
        .get(1..1 + bitmap_bytes)
        .ok_or_else(|| MysqlError::client("a binary row shorter than its NULL bitmap"))?;
    let mut reader = Reader::new(&packet[1 + bitmap_bytes..]);
    let mut row = Vec::with_capacity(types.len());
    for (index, (column_type, unsigned)) in types.iter().enumerate() {
        let bit = index + 2;
        if bitmap[bit / 8] & (1 << (bit % 8)) != 0 {
            row.push(None);
            continue;
        }
        let unsigned = *unsigned;
        let text = match column_type {
            ColumnType::Tiny if unsigned => reader.u8()?.to_string(),
            ColumnType::Tiny => (reader.u8()? as i8).to_string(),
            ColumnType::Short | ColumnType::Year if unsigned => reader.u16()?.to_string(),
            ColumnType::Short | ColumnType::Year => (reader.u16()? as i16).to_string(),
            ColumnType::Long | ColumnType::Int24 if unsigned => reader.u32()?.to_string(),
            ColumnType::Long | ColumnType::Int24 => (reader.u32()? as i32).to_string(),
            ColumnType::LongLong if unsigned => reader.u64()?.to_string(),
            ColumnType::LongLong => (reader.u64()? as i64).to_string(),
            ColumnType::Float => f32::from_bits(reader.u32()?).to_string(),
            ColumnType::Double => f64::from_bits(reader.u64()?).to_string(),
            ColumnType::Date | ColumnType::DateTime | ColumnType::Timestamp => {
                let length = reader.u8()? as usize;
                let bytes = reader.bytes(length)?;
                let field = |at: usize| bytes.get(at).copied().unwrap_or(0);
                let year = u16::from_le_bytes([field(0), field(1)]);
                let mut text = format!("{year:04}-{:02}-{:02}", field(2), field(3));
                if *column_type != ColumnType::Date {
                    text.push_str(&format!(" {:02}:{:02}:{:02}", field(4), field(5), field(6)));
                }
                text
            }
            ColumnType::Time => {
                let length = reader.u8()? as usize;
                let bytes = reader.bytes(length)?;
                let field = |at: usize| bytes.get(at).copied().unwrap_or(0);
                let days = u32::from_le_bytes([field(1), field(2), field(3), field(4)]);
                let sign = if field(0) == 1 { "-" } else { "" };
                let hours = days * 24 + u32::from(field(5));
                format!("{sign}{hours:02}:{:02}:{:02}", field(6), field(7))
            }
            _ => String::from_utf8_lossy(reader.lenenc_bytes()?).into_owned(),
        };
        row.push(Some(text));
    }
    Ok(row)
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
    fn parameters_become_literals_outside_quotes_only() {
        let text = interpolate(
            "SELECT '?', ? FROM t WHERE a = ? AND `b?` = ?",
            &[Param::Int(-5), Param::Text("it's"), Param::Int(7)],
        )
        .unwrap();
        assert_eq!(text, "SELECT '?', -5 FROM t WHERE a = 'it''s' AND `b?` = 7");
        assert!(interpolate("SELECT ?, ?", &[Param::Int(1)]).is_err());
        assert!(interpolate("SELECT ?", &[Param::Int(1), Param::Int(2)]).is_err());
    }

    #[test]
    fn binary_rows_read_as_the_text_protocol_would() {
        // Columns: INT, NULL (a VARCHAR), BIGINT, DATETIME, VARCHAR.
        let types = [
            (ColumnType::Long, false),
            (ColumnType::VarString, false),
            (ColumnType::LongLong, false),
            (ColumnType::DateTime, false),
            (ColumnType::VarString, false),
        ];
        let mut packet = vec![0x00];
        // NULL bitmap with offset 2: column 1 is bit 3.
        packet.push(1 << 3);
        packet.extend_from_slice(&(-7i32).to_le_bytes());
        packet.extend_from_slice(&(1i64 << 40).to_le_bytes());
        packet.extend_from_slice(&[7, 0xE8, 0x07, 11, 29, 13, 5, 9]);
        wire::put_lenenc_bytes(&mut packet, b"abc");
        let row = binary_row(&packet, &types).unwrap();
        assert_eq!(
            row,
            vec![
                Some("-7".to_string()),
                None,
                Some((1i64 << 40).to_string()),
                Some("2024-11-29 13:05:09".to_string()),
                Some("abc".to_string()),
            ]
        );
        // Cut short: an error, not a panic.
        assert!(binary_row(&packet[..packet.len() - 2], &types).is_err());
        assert!(binary_row(&[0x00], &types).is_err());
        // UNSIGNED reads unsigned.
        let unsigned = [(ColumnType::Long, true)];
        let mut packet = vec![0x00, 0];
        packet.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            binary_row(&packet, &unsigned).unwrap(),
            vec![Some(u32::MAX.to_string())]
        );
    }

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
