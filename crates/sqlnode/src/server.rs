//! The SQL node's server: the listener, the table of connections, and a
//! few event loops that serve them all (docs/design/0027-sql-node.md,
//! "Threads"): as many as the machine has cores by default, never a
//! thread per connection.
//!
//! A connection belongs to one loop (dealt out in turn as they are
//! accepted, by whichever loop the listener woke). Its loop serves each of
//! its ready requests in a task (`task`), which runs the statements
//! against the cluster and suspends in every wait for a reply, so a loop
//! keeps as many statements in flight as it has busy connections, and a
//! statement waiting for a row lock holds nothing but its own task.
//! SHOW PROCESSLIST and KILL see every connection through the table.

use crate::connection::{Activity, Connection, Security};
use crate::event_loop::{self, LoopShared};
use crate::tls::Tls;
use foldhash::{HashMap, HashMapExt};
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Who owns a connection's I/O right now.
#[derive(Default)]
pub(crate) struct Ownership {
    /// A task has it.
    pub(crate) busy: bool,
    /// It was asked for while busy: look again before giving it back.
    pub(crate) poked: bool,
}

/// A connection as the server holds it.
pub(crate) struct Client {
    pub(crate) id: u32,
    peer: SocketAddr,
    /// The loop that serves it.
    pub(crate) home: usize,
    pub(crate) ownership: Mutex<Ownership>,
    /// Locked by the task serving it, for as long as it serves.
    pub(crate) io: Mutex<ClientIo>,
    pub(crate) fd: i32,
    pub(crate) since: Mutex<Instant>,
    pub(crate) killed: AtomicBool,
    /// What SHOW PROCESSLIST shows of it.
    activity: Arc<Mutex<Activity>>,
    /// Seconds it may stay idle before it is closed (set by its task).
    pub(crate) idle_limit: AtomicU64,
    /// KILL QUERY: its running statement stops at its next check.
    interrupt: Arc<AtomicBool>,
}

impl Client {
    /// Its token in its loop's epoll set.
    pub(crate) fn token(&self) -> u64 {
        event_loop::client_token(self.id)
    }
}

pub(crate) struct ClientIo {
    pub(crate) stream: TcpStream,
    pub(crate) input: Vec<u8>,
    pub(crate) output: Vec<u8>,
    pub(crate) protocol: Connection,
    /// The TLS session, once the client asked for one.
    pub(crate) tls: Option<Tls>,
    /// TLS records read and not yet decrypted.
    pub(crate) records: Vec<u8>,
}

pub(crate) struct Shared {
    pub(crate) listener: TcpListener,
    /// The TLS configuration, when TLS is offered.
    pub(crate) tls: Option<Arc<rustls::ServerConfig>>,
    /// Logins must come over TLS.
    require_secure: bool,
    pub(crate) stopping: AtomicBool,
    pub(crate) clients: Mutex<HashMap<u32, Arc<Client>>>,
    engine: Mutex<Option<Arc<sql::Engine>>>,
    next_id: AtomicU32,
    pub(crate) loops: Vec<Arc<LoopShared>>,
    /// Deals new connections out to the loops in turn.
    next_home: AtomicUsize,
}

impl Shared {
    /// The connections now (a copy: the lock is not held while they are
    /// looked at).
    pub(crate) fn clients_now(&self) -> Vec<Arc<Client>> {
        self.clients
            .lock()
            .expect("clients lock")
            .values()
            .cloned()
            .collect()
    }

    pub(crate) fn client(&self, id: u32) -> Option<Arc<Client>> {
        self.clients.lock().expect("clients lock").get(&id).cloned()
    }
}

/// A running SQL node server.
pub struct SqlServer {
    shared: Arc<Shared>,
    address: SocketAddr,
    threads: Vec<JoinHandle<()>>,
}

/// The engine's view of the server (SHOW PROCESSLIST, KILL).
struct ServerView {
    shared: std::sync::Weak<Shared>,
}

impl sql::Server for ServerView {
    fn processes(&self) -> Vec<sql::Process> {
        let Some(shared) = self.shared.upgrade() else {
            return Vec::new();
        };
        let clients = shared.clients_now();
        let mut list: Vec<sql::Process> = clients
            .iter()
            .map(|client| {
                let (user, database, info) = {
                    let activity = client.activity.lock().expect("activity lock");
                    (
                        activity.user.clone(),
                        activity.database.clone(),
                        activity.info(),
                    )
                };
                let busy = client.ownership.lock().expect("ownership lock").busy;
                sql::Process {
                    id: client.id,
                    user,
                    host: client.peer.to_string(),
                    database,
                    command: if busy { "Query" } else { "Sleep" },
                    seconds: client.since.lock().expect("since lock").elapsed().as_secs(),
                    info,
                }
            })
            .collect();
        list.sort_by_key(|p| p.id);
        list
    }

    fn kill(&self, id: u32, query_only: bool) -> bool {
        let Some(shared) = self.shared.upgrade() else {
            return false;
        };
        let Some(client) = shared
            .clients
            .lock()
            .expect("clients lock")
            .get(&id)
            .cloned()
        else {
            return false;
        };
        // The running statement stops at its next check.
        client.interrupt.store(true, Ordering::Relaxed);
        if !query_only {
            // The socket shut: the task its event starts closes it.
            client.killed.store(true, Ordering::Relaxed);
            // SAFETY: `fd` belongs to the client's stream, alive while the
            // client is in the table; shutdown does not close it.
            unsafe {
                libc::shutdown(client.fd, libc::SHUT_RDWR);
            }
        }
        true
    }
}

/// How a server's connections are secured.
#[derive(Clone, Default)]
pub struct ServerSecurity {
    /// TLS's configuration, when it is offered.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Logins without TLS are refused.
    pub require_secure: bool,
}

impl SqlServer {
    /// Listens on `address` and serves with `loops` event-loop threads,
    /// the first reading the cluster's replies from `receiver` when given;
    /// the engine comes from `engine`, given the server's view (for SHOW
    /// PROCESSLIST).
    pub fn start(
        address: SocketAddr,
        loops: usize,
        receiver: Option<Arc<client::Receiver>>,
        security: ServerSecurity,
        engine: impl FnOnce(Arc<dyn sql::Server>) -> sql::SqlResult<Arc<sql::Engine>>,
    ) -> io::Result<SqlServer> {
        let listener = TcpListener::bind(address)?;
        listener.set_nonblocking(true)?;
        let address = listener.local_addr()?;
        let loops = (0..loops.max(1))
            .map(|index| LoopShared::new(index, &listener, receiver.clone()).map(Arc::new))
            .collect::<io::Result<Vec<_>>>()?;
        let shared = Arc::new(Shared {
            listener,
            tls: security.tls,
            require_secure: security.require_secure,
            stopping: AtomicBool::new(false),
            clients: Mutex::new(HashMap::new()),
            engine: Mutex::new(None),
            next_id: AtomicU32::new(1),
            loops,
            next_home: AtomicUsize::new(0),
        });
        let view: Arc<dyn sql::Server> = Arc::new(ServerView {
            shared: Arc::downgrade(&shared),
        });
        let engine = engine(view).map_err(|error| io::Error::other(error.to_string()))?;
        *shared.engine.lock().expect("engine lock") = Some(engine);
        let mut server = SqlServer {
            shared: Arc::clone(&shared),
            address,
            threads: Vec::new(),
        };
        // On an error here, dropping `server` stops what was started.
        for index in 0..shared.loops.len() {
            let shared = Arc::clone(&shared);
            let thread = std::thread::Builder::new()
                .name(format!("sql-loop-{index}"))
                .spawn(move || event_loop::run(&shared, index))?;
            server.threads.push(thread);
        }
        Ok(server)
    }

    /// Where it listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Stops every thread and closes every connection.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.shared.stopping.store(true, Ordering::Relaxed);
        for event_loop in &self.shared.loops {
            event_loop.wakes.poke();
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
        let clients: Vec<Arc<Client>> = self
            .shared
            .clients
            .lock()
            .expect("clients lock")
            .drain()
            .map(|(_, c)| c)
            .collect();
        for client in clients {
            // A connection whose task was left suspended keeps its lock:
            // closing its socket is enough.
            match client.io.try_lock() {
                Ok(mut io) => io.protocol.close(),
                Err(_) => {
                    // SAFETY: `fd` belongs to the client's stream, alive
                    // while the client is held; shutdown does not close it.
                    unsafe {
                        libc::shutdown(client.fd, libc::SHUT_RDWR);
                    }
                }
            }
        }
    }
}

impl Drop for SqlServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Takes every waiting connection, each with its loop dealt out in turn;
/// none when the listener has nothing (or failed: said, and the loop
/// pauses so as not to spin on it).
pub(crate) fn accept(shared: &Shared) -> Vec<Arc<Client>> {
    let mut accepted = Vec::new();
    loop {
        let (stream, peer) = match shared.listener.accept() {
            Ok(accepted) => accepted,
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => return accepted,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => {
                // Out of file descriptors and the like: the connection
                // waits in the backlog while the others are served. The
                // listener stays ready, so a pause keeps the loop from
                // spinning on it meanwhile.
                eprintln!("sql node: accept failed: {error}");
                std::thread::sleep(Duration::from_millis(10));
                return accepted;
            }
        };
        if stream.set_nonblocking(true).is_err() {
            continue;
        }
        let _ = stream.set_nodelay(true);
        keep_alive(&stream);
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
        let engine = shared
            .engine
            .lock()
            .expect("engine lock")
            .clone()
            .expect("the engine is set before serving");
        let fd = stream.as_raw_fd();
        let activity = Arc::new(Mutex::new(Activity::default()));
        let interrupt = Arc::new(AtomicBool::new(false));
        let home = shared.next_home.fetch_add(1, Ordering::Relaxed) % shared.loops.len();
        let client = Arc::new(Client {
            id,
            peer,
            home,
            ownership: Mutex::new(Ownership::default()),
            io: Mutex::new(ClientIo {
                stream,
                input: Vec::new(),
                output: Vec::new(),
                tls: None,
                records: Vec::new(),
                protocol: Connection::new(
                    id,
                    peer,
                    engine,
                    scramble(),
                    Arc::clone(&activity),
                    Arc::clone(&interrupt),
                    Security {
                        tls_offered: shared.tls.is_some(),
                        require_secure: shared.require_secure,
                    },
                ),
            }),
            fd,
            since: Mutex::new(Instant::now()),
            killed: AtomicBool::new(false),
            activity,
            idle_limit: AtomicU64::new(crate::connection::CONNECT_TIMEOUT_SECONDS),
            interrupt,
        });
        shared
            .clients
            .lock()
            .expect("clients lock")
            .insert(id, Arc::clone(&client));
        accepted.push(client);
    }
}

/// Probes a connection that has been silent for a minute, so that a
/// client whose host vanished (no FIN, no RST) is closed within about two
/// minutes and its open transaction rolled back, its locks freed, instead
/// of at `wait_timeout` (eight hours by default). MySQL's server sets
/// SO_KEEPALIVE on client connections too.
fn keep_alive(stream: &TcpStream) {
    let fd = stream.as_raw_fd();
    for (level, option, value) in [
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1),
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, 60),
        (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, 10),
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 6),
    ] {
        let value: libc::c_int = value;
        // SAFETY: a live socket and a c_int option value of its size.
        unsafe {
            libc::setsockopt(
                fd,
                level,
                option,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
}

/// 20 random scramble bytes, printable and never 0 (as MySQL's).
fn scramble() -> [u8; 20] {
    let mut bytes = [0u8; 20];
    // SAFETY: getrandom writes at most `len` bytes into the buffer.
    let filled = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if filled != bytes.len() as isize {
        let seed = Instant::now().elapsed().as_nanos() as u64 ^ std::process::id() as u64;
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = (seed.rotate_left(i as u32 * 7) & 0xFF) as u8;
        }
    }
    for byte in &mut bytes {
        *byte = 33 + (*byte % 94);
    }
    bytes
}

/// Marks `client` as taken by a task, unless one has it already (then
/// it is told to look again before giving it back): the client to serve,
/// or `None`.
pub(crate) fn claim(client: &Arc<Client>) -> Option<Arc<Client>> {
    let mut ownership = client.ownership.lock().expect("ownership lock");
    if ownership.busy {
        ownership.poked = true;
        return None;
    }
    ownership.busy = true;
    Some(Arc::clone(client))
}
