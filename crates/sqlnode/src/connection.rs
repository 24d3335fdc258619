//! One client connection's protocol: the handshake and authentication,
//! then each command packet answered (docs/design/0027-sql-node.md,
//! "Protocol"). Bytes in, bytes out: `server` moves them on the socket.
//!
//! Authentication (docs/design/0031-users-and-grants.md): the account
//! the user name and address find in the cluster, verified by its plugin
//! (`mysql_native_password`, advertised; `caching_sha2_password`, its
//! fast path from this SQL node's cache, its full path, the password
//! itself, only over TLS), after an auth switch when the client answered
//! with the other plugin. `root` with no account of its own has no
//! password and logs in from loopback only, as a fresh MySQL install.
//! Anything else gets 1045.

use mysql_protocol::{self as wire, Command, PacketWriter, ParamType, ParamValue, WireError};
use sql::value::Value;
use sql::{codes, Session, SqlError};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::encode::Framing;

/// Seconds a client has to complete the handshake (MySQL's
/// connect_timeout).
pub const CONNECT_TIMEOUT_SECONDS: u64 = 10;

/// The largest packet a client may send (max_allowed_packet).
pub const MAX_PACKET: usize = 64 << 20;

/// The capabilities the server offers.
pub const SERVER_CAPABILITIES: u32 = wire::CLIENT_LONG_PASSWORD
    | wire::CLIENT_FOUND_ROWS
    | wire::CLIENT_LONG_FLAG
    | wire::CLIENT_CONNECT_WITH_DB
    | wire::CLIENT_PROTOCOL_41
    | wire::CLIENT_INTERACTIVE
    | wire::CLIENT_TRANSACTIONS
    | wire::CLIENT_SECURE_CONNECTION
    | wire::CLIENT_MULTI_STATEMENTS
    | wire::CLIENT_MULTI_RESULTS
    | wire::CLIENT_PS_MULTI_RESULTS
    | wire::CLIENT_PLUGIN_AUTH
    | wire::CLIENT_CONNECT_ATTRS
    | wire::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
    | wire::CLIENT_DEPRECATE_EOF;

/// Where a connection is in its life.
enum Phase {
    /// The greeting is to be sent.
    Greeting,
    /// Waiting for the client's handshake response.
    Handshake,
    /// Waiting for the answer to an auth switch: the scramble answered
    /// with the account's own plugin.
    AuthSwitch(Box<Login>),
    /// caching_sha2_password's full authentication: waiting for the
    /// password (over TLS).
    FullAuthentication(Box<Login>),
    /// Serving commands.
    Commands(Box<Session>),
    /// Closed: nothing more is read or written.
    Closed,
}

/// A login under way: the account found, what the client asked for.
struct Login {
    account: sql::accounts::Account,
    /// The user name as the client sent it.
    user: String,
    database: Option<String>,
}

/// What a prepared statement keeps between executions on the wire side.
#[derive(Default)]
struct Statement {
    /// The parameter types the first execution sent.
    types: Vec<ParamType>,
    /// COM_STMT_SEND_LONG_DATA's bytes, per parameter.
    long_data: Vec<Option<Vec<u8>>>,
}

/// What SHOW PROCESSLIST shows of a connection, kept apart from the
/// connection so it can be read while a worker serves it. Written twice
/// per statement, so without allocating once warm: the text buffer is
/// reused, the database copied only when it changes.
#[derive(Clone, Debug, Default)]
pub struct Activity {
    /// The user, once authenticated.
    pub user: String,
    /// The current database.
    pub database: Option<String>,
    /// The statement running.
    pub running: Running,
    /// The text of the last COM_QUERY (its buffer, reused).
    text: String,
}

/// The statement a connection runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Running {
    /// None.
    #[default]
    Nothing,
    /// A COM_QUERY (its text in [`Activity`]).
    Text,
    /// A prepared statement's execution.
    Prepared(u32),
}

impl Activity {
    /// SHOW PROCESSLIST's Info column.
    pub fn info(&self) -> Option<String> {
        match self.running {
            Running::Nothing => None,
            Running::Text => Some(self.text.clone()),
            Running::Prepared(id) => Some(format!("(prepared statement {id})")),
        }
    }
}

/// A connection's protocol state.
pub struct Connection {
    /// The connection id.
    pub id: u32,
    peer: SocketAddr,
    engine: Arc<sql::Engine>,
    phase: Phase,
    scramble: [u8; 20],
    capabilities: u32,
    statements: HashMap<u32, Statement>,
    /// Several statements in one COM_QUERY: the client's capability, then
    /// what COM_SET_OPTION says.
    multi_statements: bool,
    /// What SHOW PROCESSLIST shows.
    activity: Arc<std::sync::Mutex<Activity>>,
    /// The flag KILL QUERY sets, handed to the session.
    interrupt: Arc<std::sync::atomic::AtomicBool>,
    /// The account, once authenticated.
    account: Option<sql::accounts::Account>,
    /// The user name the client gave (for SHOW PROCESSLIST).
    user: String,
    /// Whether the connection runs over TLS (a password may be sent in
    /// it).
    secure: bool,
    /// Whether TLS is offered (the server has a certificate).
    tls_offered: bool,
    /// Whether a login must come over TLS (`--require-secure-transport`).
    require_secure: bool,
    /// The client asked for TLS: the bytes after its request are TLS
    /// records, for the socket side to take over.
    tls_requested: bool,
}

/// How a server's connections may be secured.
#[derive(Clone, Copy, Debug, Default)]
pub struct Security {
    /// TLS is offered.
    pub tls_offered: bool,
    /// A login without TLS is refused (error 3159).
    pub require_secure: bool,
}

impl Connection {
    /// A connection from `peer`, showing what it does in `activity`.
    pub fn new(
        id: u32,
        peer: SocketAddr,
        engine: Arc<sql::Engine>,
        scramble: [u8; 20],
        activity: Arc<std::sync::Mutex<Activity>>,
        interrupt: Arc<std::sync::atomic::AtomicBool>,
        security: Security,
    ) -> Connection {
        Connection {
            id,
            peer,
            engine,
            phase: Phase::Greeting,
            scramble,
            capabilities: 0,
            statements: HashMap::new(),
            multi_statements: false,
            activity,
            interrupt,
            account: None,
            user: String::new(),
            secure: false,
            tls_offered: security.tls_offered,
            require_secure: security.require_secure,
            tls_requested: false,
        }
    }

    /// Whether the client asked for TLS since the last call: the socket
    /// side then runs every byte through TLS, the input left unread
    /// included (`secured` says it has).
    pub fn take_tls_request(&mut self) -> bool {
        std::mem::take(&mut self.tls_requested)
    }

    /// The connection runs over TLS from now on.
    pub fn secured(&mut self) {
        self.secure = true;
    }

    fn capabilities_offered(&self) -> u32 {
        match self.tls_offered {
            true => SERVER_CAPABILITIES | wire::CLIENT_SSL,
            false => SERVER_CAPABILITIES,
        }
    }

    /// Whether the connection is over.
    pub fn is_closed(&self) -> bool {
        matches!(self.phase, Phase::Closed)
    }

    /// Seconds the connection may stay idle: until it authenticates,
    /// `CONNECT_TIMEOUT`; then its session's `wait_timeout`.
    pub fn idle_limit(&self) -> u64 {
        match &self.phase {
            Phase::Commands(session) => session.wait_timeout(),
            _ => CONNECT_TIMEOUT_SECONDS,
        }
    }

    /// Writes the greeting if it is due.
    pub fn greet(&mut self, out: &mut Vec<u8>) {
        if !matches!(self.phase, Phase::Greeting) {
            return;
        }
        let mut writer = PacketWriter::new(0);
        let start = writer.begin(out);
        wire::Handshake {
            server_version: sql::variables::VERSION,
            connection_id: self.id,
            scramble: &self.scramble,
            capabilities: self.capabilities_offered(),
            charset: wire::UTF8MB4_GENERAL_CI,
            status: wire::SERVER_STATUS_AUTOCOMMIT,
            auth_plugin: "mysql_native_password",
        }
        .encode(out);
        writer.finish(out, start);
        self.phase = Phase::Handshake;
    }

    /// Takes the complete packets at the front of `input` (removing
    /// them) and writes the answers to `out`. A malformed or oversized
    /// packet closes the connection (after an error packet where the
    /// protocol allows one).
    pub fn receive(&mut self, input: &mut Vec<u8>, out: &mut Vec<u8>) {
        let mut consumed = 0;
        while !self.is_closed() {
            let packet = match wire::take_packet(&input[consumed..], MAX_PACKET) {
                Ok(Some(packet)) => packet,
                Ok(None) => break,
                Err(WireError::TooLarge { .. }) => {
                    let error = SqlError::new(
                        codes::NET_PACKET_TOO_LARGE,
                        "Got a packet bigger than 'max_allowed_packet' bytes",
                    );
                    let mut writer = PacketWriter::new(0);
                    self.framing(out, &mut writer).error(&error);
                    self.phase = Phase::Closed;
                    break;
                }
                Err(_) => {
                    self.phase = Phase::Closed;
                    break;
                }
            };
            consumed += packet.consumed;
            let payload = packet.payload.into_owned();
            let sequence = packet.sequence;
            self.handle(&payload, sequence, out);
            if self.tls_requested {
                // What follows is TLS records, not packets.
                break;
            }
        }
        input.drain(..consumed);
    }

    fn framing<'a>(&self, out: &'a mut Vec<u8>, writer: &'a mut PacketWriter) -> Framing<'a> {
        let mut status = 0;
        if let Phase::Commands(session) = &self.phase {
            if session.autocommit() {
                status |= wire::SERVER_STATUS_AUTOCOMMIT;
            }
            if session.in_transaction() {
                status |= wire::SERVER_STATUS_IN_TRANS;
            }
        } else {
            status |= wire::SERVER_STATUS_AUTOCOMMIT;
        }
        Framing {
            out,
            writer,
            deprecate_eof: self.capabilities & wire::CLIENT_DEPRECATE_EOF != 0,
            found_rows: self.capabilities & wire::CLIENT_FOUND_ROWS != 0,
            status,
            // Only a statement's answer counts its warnings: the query's
            // and the execution's set them.
            warnings: 0,
        }
    }

    fn handle(&mut self, payload: &[u8], sequence: u8, out: &mut Vec<u8>) {
        let mut writer = PacketWriter::new(sequence.wrapping_add(1));
        match &self.phase {
            Phase::Handshake => self.authenticate(payload, &mut writer, out),
            Phase::AuthSwitch(_) | Phase::FullAuthentication(_) => {
                self.continue_login(payload, &mut writer, out)
            }
            Phase::Commands(_) => self.command(payload, &mut writer, out),
            Phase::Greeting | Phase::Closed => self.phase = Phase::Closed,
        }
    }

    fn authenticate(&mut self, payload: &[u8], writer: &mut PacketWriter, out: &mut Vec<u8>) {
        let response = match wire::decode_handshake_response(payload) {
            Ok(wire::HandshakeResponseOrSsl::Response(response)) => response,
            Ok(wire::HandshakeResponseOrSsl::SslRequest { capabilities }) => {
                if !self.tls_offered || self.secure {
                    let error = SqlError::new(
                        codes::ACCESS_DENIED,
                        "TLS is not offered by this SQL node (start it with --tls-cert and --tls-key)",
                    );
                    self.framing(out, writer).error(&error);
                    self.phase = Phase::Closed;
                    return;
                }
                // The handshake response follows inside TLS.
                self.capabilities = capabilities & self.capabilities_offered();
                self.tls_requested = true;
                return;
            }
            Err(error) => {
                let error = SqlError::new(1043, format!("Bad handshake: {error}"));
                self.framing(out, writer).error(&error);
                self.phase = Phase::Closed;
                return;
            }
        };
        self.capabilities = response.capabilities & self.capabilities_offered();
        self.multi_statements = self.capabilities & wire::CLIENT_MULTI_STATEMENTS != 0;
        if self.require_secure && !self.secure {
            let error = SqlError::new(
                3159,
                "Connections using insecure transport are prohibited while --require_secure_transport=ON.",
            );
            self.framing(out, writer).error(&error);
            self.phase = Phase::Closed;
            return;
        }
        let with_password = !response.auth_response.is_empty();
        let account = match self.engine.accounts.find(&response.user, self.peer.ip()) {
            Ok(Some(account)) => account,
            Ok(None) => return self.deny(&response.user, with_password, writer, out),
            Err(error) => {
                self.framing(out, writer).error(&error);
                self.phase = Phase::Closed;
                return;
            }
        };
        let login = Box::new(Login {
            account,
            user: response.user.clone(),
            database: response.database.clone(),
        });
        let client_plugin = response
            .auth_plugin
            .as_deref()
            .unwrap_or("mysql_native_password");
        let no_password = login.account.authentication.is_empty() && !with_password;
        if !no_password && client_plugin != login.account.plugin.name() {
            // The client answered with another plugin: ask again with the
            // account's (the same scramble).
            let plugin = login.account.plugin.name();
            let start = writer.begin(out);
            wire::encode_auth_switch(out, plugin, &self.scramble);
            writer.finish(out, start);
            self.phase = Phase::AuthSwitch(login);
            return;
        }
        self.verify(login, &response.auth_response, writer, out);
    }

    /// An answer after the handshake response: to an auth switch, or the
    /// password of caching_sha2_password's full authentication.
    fn continue_login(&mut self, payload: &[u8], writer: &mut PacketWriter, out: &mut Vec<u8>) {
        match std::mem::replace(&mut self.phase, Phase::Closed) {
            Phase::AuthSwitch(login) => self.verify(login, payload, writer, out),
            Phase::FullAuthentication(login) => {
                // The password, NUL-terminated, over TLS only: in the clear
                // it would be readable on the way (clients ask for an RSA
                // key instead, which this server does not offer).
                let password = payload.strip_suffix(&[0]).unwrap_or(payload);
                let stored = String::from_utf8_lossy(&login.account.authentication).into_owned();
                if !self.secure
                    || !mysql_protocol::auth::verify_caching_sha2_stored(&stored, password)
                {
                    let message = match self.secure {
                        true => None,
                        false => Some("caching_sha2_password sends the password on a first login to a SQL node: connect with TLS (once done, this SQL node's cache lets the fast path in without it)"),
                    };
                    return self.deny_with(&login.user, true, message, writer, out);
                }
                let proof = mysql_protocol::auth::caching_sha2_stage2(password);
                self.engine.fast_auth.remember(&login.account, proof);
                self.finish_login(*login, writer, out);
            }
            _ => self.phase = Phase::Closed,
        }
    }

    /// Checks `response` to the scramble against `login`'s account.
    fn verify(
        &mut self,
        login: Box<Login>,
        response: &[u8],
        writer: &mut PacketWriter,
        out: &mut Vec<u8>,
    ) {
        use sql::accounts::Plugin;
        let stored = &login.account.authentication;
        let with_password = !response.is_empty();
        if stored.is_empty() || response.is_empty() {
            // No password: only the empty answer; a password: never it.
            return match stored.is_empty() && response.is_empty() {
                true => self.finish_login(*login, writer, out),
                false => self.deny(&login.user, with_password, writer, out),
            };
        }
        match login.account.plugin {
            Plugin::Native => {
                let good = <&[u8; 20]>::try_from(stored.as_slice()).is_ok_and(|stage2| {
                    mysql_protocol::auth::verify_native_password(stage2, &self.scramble, response)
                });
                match good {
                    true => self.finish_login(*login, writer, out),
                    false => self.deny(&login.user, with_password, writer, out),
                }
            }
            Plugin::CachingSha2 => {
                let cached = self.engine.fast_auth.proof(&login.account);
                let fast = cached.is_some_and(|proof| {
                    mysql_protocol::auth::verify_caching_sha2_fast(&proof, &self.scramble, response)
                });
                let start = writer.begin(out);
                match fast {
                    true => {
                        wire::encode_auth_more_data(out, &[0x03]);
                        writer.finish(out, start);
                        self.finish_login(*login, writer, out);
                    }
                    false => {
                        // Not in the cache (or a wrong password): the
                        // password itself decides.
                        wire::encode_auth_more_data(out, &[0x04]);
                        writer.finish(out, start);
                        self.phase = Phase::FullAuthentication(login);
                    }
                }
            }
        }
    }

    fn deny(
        &mut self,
        user: &str,
        with_password: bool,
        writer: &mut PacketWriter,
        out: &mut Vec<u8>,
    ) {
        self.deny_with(user, with_password, None, writer, out);
    }

    fn deny_with(
        &mut self,
        user: &str,
        with_password: bool,
        reason: Option<&str>,
        writer: &mut PacketWriter,
        out: &mut Vec<u8>,
    ) {
        let host = self.peer.ip().to_string();
        let using = if with_password { "YES" } else { "NO" };
        let mut message =
            format!("Access denied for user '{user}'@'{host}' (using password: {using})");
        if let Some(reason) = reason {
            message.push_str(": ");
            message.push_str(reason);
        }
        let error = SqlError::new(codes::ACCESS_DENIED, message);
        self.framing(out, writer).error(&error);
        self.phase = Phase::Closed;
    }

    /// The account proved: a session in the asked-for database (where it
    /// must hold a privilege: 1044 otherwise), and the OK.
    fn finish_login(&mut self, login: Login, writer: &mut PacketWriter, out: &mut Vec<u8>) {
        self.user = login.user.clone();
        self.show_running(Running::Nothing, &[]);
        let session = Session::new(
            Arc::clone(&self.engine),
            self.id,
            login.account.clone(),
            login.database.as_deref(),
            Arc::clone(&self.interrupt),
        );
        match session {
            Ok(session) => {
                self.account = Some(login.account);
                self.phase = Phase::Commands(Box::new(session));
                self.framing(out, writer).ok(0, 0, "");
            }
            Err(error) => {
                self.framing(out, writer).error(&error);
                self.phase = Phase::Closed;
            }
        }
    }

    fn command(&mut self, payload: &[u8], writer: &mut PacketWriter, out: &mut Vec<u8>) {
        let command = match wire::decode_command(payload) {
            Ok(command) => command,
            Err(_) => {
                self.phase = Phase::Closed;
                return;
            }
        };
        let running = match &command {
            Command::Query(text) => Some((Running::Text, &text[..text.len().min(1024)])),
            Command::StmtExecute(execute) => {
                Some((Running::Prepared(execute.statement_id), &[][..]))
            }
            _ => None,
        };
        if let Some((running, text)) = running {
            self.show_running(running, text);
        }
        self.run_command(command, writer, out);
        self.show_running(Running::Nothing, &[]);
    }

    fn run_command(&mut self, command: Command<'_>, writer: &mut PacketWriter, out: &mut Vec<u8>) {
        let Phase::Commands(session) = &mut self.phase else {
            return;
        };
        match command {
            Command::Quit => self.phase = Phase::Closed,
            Command::Ping | Command::SetOption(_) | Command::Debug => {
                self.framing(out, writer).ok(0, 0, "")
            }
            Command::ResetConnection => {
                let account = self.account.clone().expect("a session has its account");
                let database = session.database().map(str::to_string);
                session.end();
                self.statements.clear();
                match Session::new(
                    Arc::clone(&self.engine),
                    self.id,
                    account,
                    database.as_deref(),
                    Arc::clone(&self.interrupt),
                ) {
                    Ok(fresh) => **session = fresh,
                    Err(error) => return self.framing(out, writer).error(&error),
                }
                self.framing(out, writer).ok(0, 0, "");
            }
            Command::InitDb(name) => {
                let name = String::from_utf8_lossy(name).into_owned();
                match session.use_database(&name) {
                    Ok(()) => self.framing(out, writer).ok(0, 0, ""),
                    Err(error) => self.framing(out, writer).error(&error),
                }
            }
            Command::Query(text) => {
                let text = String::from_utf8_lossy(text).into_owned();
                let results = session.query(&text, self.multi_statements);
                let count = results.len();
                let warnings: Vec<u16> = (0..count).map(|i| session.warnings_of(i)).collect();
                for (index, result) in results.into_iter().enumerate() {
                    let mut framing = self.framing(out, writer);
                    framing.warnings = warnings[index];
                    if index + 1 < count {
                        framing.status |= wire::SERVER_MORE_RESULTS_EXISTS;
                    }
                    match result {
                        Ok(response) => framing.response(&response, false),
                        Err(error) => framing.error(&error),
                    }
                }
            }
            Command::StmtPrepare(text) => {
                let text = String::from_utf8_lossy(text).into_owned();
                match session.prepare(&text) {
                    Ok((id, _))
                        if session
                            .prepared(id)
                            .is_some_and(|p| p.params > u16::MAX as usize) =>
                    {
                        session.close_statement(id);
                        let error = SqlError::new(
                            1390,
                            "Prepared statement contains too many placeholders",
                        );
                        self.framing(out, writer).error(&error);
                    }
                    Ok((id, prepared)) => {
                        self.statements.insert(id, Statement::default());
                        let columns = prepared.columns.clone();
                        let params = prepared.params;
                        let mut framing = self.framing(out, writer);
                        let ok = wire::response::PrepareOk {
                            statement_id: id,
                            columns: columns.len() as u16,
                            params: params as u16,
                            warnings: 0,
                        };
                        let start = framing.writer.begin(framing.out);
                        ok.encode(framing.out);
                        framing.writer.finish(framing.out, start);
                        if params > 0 {
                            let placeholders: Vec<sql::OutputColumn> = (0..params)
                                .map(|_| {
                                    sql::OutputColumn::computed("?", sql::ColumnKind::Binary(0))
                                })
                                .collect();
                            framing.columns(&placeholders);
                            framing.end_of(false);
                        }
                        if !columns.is_empty() {
                            framing.columns(&columns);
                            framing.end_of(false);
                        }
                    }
                    Err(error) => self.framing(out, writer).error(&error),
                }
            }
            Command::StmtExecute(execute) => {
                let id = execute.statement_id;
                let Some(param_count) = session.prepared(id).map(|p| p.params) else {
                    let error = SqlError::new(
                        codes::UNKNOWN_STMT_HANDLER,
                        format!("Unknown prepared statement handler ({id}) given to mysqld_stmt_execute"),
                    );
                    return self.framing(out, writer).error(&error);
                };
                let statement = self.statements.entry(id).or_default();
                let params = match wire::decode_execute_params(
                    execute.rest,
                    param_count,
                    &mut statement.types,
                    &statement.long_data,
                ) {
                    Ok(params) => params.iter().map(param_value).collect::<Vec<_>>(),
                    Err(error) => {
                        let error = SqlError::new(
                            codes::WRONG_ARGUMENTS,
                            format!("Incorrect arguments to mysqld_stmt_execute: {error}"),
                        );
                        return self.framing(out, writer).error(&error);
                    }
                };
                statement.long_data.clear();
                let result = session.execute(id, &params);
                let warnings = session.warnings_of(0);
                let mut framing = self.framing(out, writer);
                framing.warnings = warnings;
                match result {
                    Ok(response) => framing.response(&response, true),
                    Err(error) => framing.error(&error),
                }
            }
            Command::StmtSendLongData {
                statement_id,
                param,
                data,
            } => {
                // No answer, as MySQL's. Only for a parameter the statement
                // has, and at most MAX_PACKET bytes a statement in all.
                let params = session.prepared(statement_id).map_or(0, |p| p.params);
                if let Some(statement) = self.statements.get_mut(&statement_id) {
                    let param = param as usize;
                    let held: usize = statement.long_data.iter().flatten().map(Vec::len).sum();
                    if param < params && held + data.len() <= MAX_PACKET {
                        if statement.long_data.len() <= param {
                            statement.long_data.resize(param + 1, None);
                        }
                        statement.long_data[param]
                            .get_or_insert_with(Vec::new)
                            .extend_from_slice(data);
                    }
                }
            }
            Command::StmtClose(id) => {
                session.close_statement(id);
                self.statements.remove(&id);
            }
            Command::StmtReset(id) => {
                if let Some(statement) = self.statements.get_mut(&id) {
                    statement.long_data.clear();
                }
                self.framing(out, writer).ok(0, 0, "");
            }
            Command::ProcessKill(id) => {
                let results = session.query(&format!("KILL {id}"), false);
                match results.into_iter().next() {
                    Some(Err(error)) => self.framing(out, writer).error(&error),
                    _ => self.framing(out, writer).ok(0, 0, ""),
                }
            }
            Command::Statistics => {
                let text = format!("Uptime: {}  Threads: 1  Questions: 0", self.engine.uptime());
                let start = writer.begin(out);
                out.extend_from_slice(text.as_bytes());
                writer.finish(out, start);
            }
            Command::FieldList(_) => self.framing(out, writer).end_of(true),
            Command::StmtFetch { .. } | Command::ChangeUser | Command::Other(_) => {
                let error = SqlError::new(codes::UNKNOWN_COM, "Unknown command");
                self.framing(out, writer).error(&error);
            }
        }
    }

    /// Updates what SHOW PROCESSLIST shows: the statement running (None
    /// when done) and the current database.
    fn show_running(&self, running: Running, text: &[u8]) {
        let database = match &self.phase {
            Phase::Commands(session) => session.database(),
            _ => None,
        };
        let mut activity = self.activity.lock().expect("activity lock");
        activity.running = running;
        if running == Running::Text {
            activity.text.clear();
            activity.text.push_str(&String::from_utf8_lossy(text));
        }
        if activity.database.as_deref() != database {
            activity.database = database.map(str::to_string);
        }
        if activity.user != self.user {
            activity.user.clone_from(&self.user);
        }
    }

    /// The connection is closing: its transaction rolls back.
    pub fn close(&mut self) {
        if let Phase::Commands(session) = &mut self.phase {
            session.end();
        }
        self.phase = Phase::Closed;
    }
}

/// A binary-protocol parameter as a value: dates and times as the
/// typed values they are (a date and time the calendar does not have,
/// such as MySQL's zero date, as its text, which a column then refuses
/// with the usual error).
fn param_value(param: &ParamValue<'_>) -> Value {
    use sql::temporal::{Date, DateTime, Time, MICROS_PER_SECOND};
    match *param {
        ParamValue::Null => Value::Null,
        ParamValue::Int(x) => Value::Int(x),
        ParamValue::UInt(x) => Value::UInt(x),
        ParamValue::Double(x) => Value::Double(x),
        ParamValue::Bytes(bytes) => Value::Bytes(bytes.to_vec()),
        ParamValue::DateTime {
            year,
            month,
            day,
            hour,
            minute,
            second,
            microsecond,
        } => {
            let date = Date::new(year as i64, month as i64, day as i64);
            let datetime = date.and_then(|date| {
                DateTime::new(
                    date,
                    hour as i64,
                    minute as i64,
                    second as i64,
                    microsecond as i64,
                )
            });
            match (date, datetime) {
                (Some(date), Some(_))
                    if hour == 0 && minute == 0 && second == 0 && microsecond == 0 =>
                {
                    Value::Date(date)
                }
                (_, Some(mut datetime)) => {
                    datetime.fsp = if microsecond != 0 { 6 } else { 0 };
                    Value::DateTime(datetime)
                }
                _ => Value::from(
                    format!("{year:04}-{month:02}-{day:02} {hour:02}:{minute:02}:{second:02}")
                        .as_str(),
                ),
            }
        }
        ParamValue::Time {
            negative,
            days,
            hour,
            minute,
            second,
            microsecond,
        } => {
            let seconds =
                (days as i64 * 24 + hour as i64) * 3600 + minute as i64 * 60 + second as i64;
            // A day count past TIME's range saturates, and TIME refuses it
            // below: never a wrapped value that would pass.
            let micros = seconds
                .saturating_mul(MICROS_PER_SECOND)
                .saturating_add(microsecond as i64);
            let fsp = if microsecond != 0 { 6 } else { 0 };
            match Time::new(if negative { -micros } else { micros }, fsp) {
                Some(time) => Value::Time(time),
                None => {
                    Value::from(format!("{}{seconds}", if negative { "-" } else { "" }).as_str())
                }
            }
        }
    }
}
