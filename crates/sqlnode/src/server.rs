//! The SQL node's server: a pool of worker threads serves every
//! connection (seed 004's thread pool, not a thread per connection;
//! docs/design/0027-sql-node.md, "Threads"). The pool's size is `pool`'s:
//! a base, and more while workers stall.
//!
//! Every idle worker waits in `epoll_wait` on one shared epoll set, taking
//! one event at a time. A connection is registered one-shot: its event
//! goes to exactly one worker and the connection stays silent until that
//! worker re-arms it, once it has read everything there is, answered every
//! complete command (running statements synchronously against the
//! cluster) and written the answers. So a request is read by the thread
//! that answers it, with no hand-off between threads, and no two workers
//! ever serve one connection. Re-arming is level-triggered: bytes that
//! arrived meanwhile raise the event again at once.

use crate::connection::{Activity, Connection, MAX_PACKET};
use crate::pool::{Pool, WorkerState};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The epoll token of the listener; a client's is its id + 2.
const LISTENER: u64 = 0;
/// The epoll token of the stop eventfd.
const STOP: u64 = 1;
/// How often an idle worker wakes to look for idle connections.
const SWEEP_EVERY_MS: i32 = 500;
/// How long a worker waits for a client to take a response.
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);

/// Who owns a connection's I/O right now.
#[derive(Default)]
struct Ownership {
    /// A worker has it.
    busy: bool,
    /// Bytes arrived while busy: look again before giving it back.
    poked: bool,
}

/// A connection as the server holds it.
struct Client {
    id: u32,
    peer: SocketAddr,
    ownership: Mutex<Ownership>,
    io: Mutex<ClientIo>,
    fd: i32,
    since: Mutex<Instant>,
    killed: AtomicBool,
    /// What SHOW PROCESSLIST shows of it.
    activity: Arc<Mutex<Activity>>,
    /// Seconds it may stay idle before it is closed (set by its worker).
    idle_limit: AtomicU64,
    /// KILL QUERY: its running statement stops at its next check.
    interrupt: Arc<AtomicBool>,
}

struct ClientIo {
    stream: TcpStream,
    input: Vec<u8>,
    output: Vec<u8>,
    protocol: Connection,
}

struct Shared {
    /// The epoll set every idle worker waits on.
    epoll: Epoll,
    listener: TcpListener,
    /// Written once to stop: level-triggered, it wakes every worker.
    stop: OwnedFd,
    stopping: AtomicBool,
    clients: Mutex<HashMap<u32, Arc<Client>>>,
    /// When idle connections were last looked for.
    last_sweep: Mutex<Instant>,
    engine: Mutex<Option<Arc<sql::Engine>>>,
    next_id: AtomicU32,
    /// How many workers run, and which are stalled.
    pool: Pool,
    /// Every worker thread started (finished ones are pruned as new ones
    /// start), joined when the server stops.
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Numbers the worker threads' names.
    next_worker: AtomicU32,
}

impl Shared {
    /// The connections now (a copy: the lock is not held while they are
    /// looked at).
    fn clients_now(&self) -> Vec<Arc<Client>> {
        self.clients
            .lock()
            .expect("clients lock")
            .values()
            .cloned()
            .collect()
    }
}

/// A running SQL node server.
pub struct SqlServer {
    shared: Arc<Shared>,
    address: SocketAddr,
    /// Starts workers while others stall.
    monitor: Option<JoinHandle<()>>,
}

/// An epoll set, through libc (a set many threads wait on at once, which
/// mio's `Poll` is not).
struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 has no memory preconditions; the fd it
        // returns is owned here.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor nobody else owns.
        Ok(Epoll {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    fn control(&self, operation: i32, fd: RawFd, token: u64, events: u32) -> io::Result<()> {
        let mut event = libc::epoll_event { events, u64: token };
        // SAFETY: a valid epoll fd and event for the call's duration.
        let done = unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), operation, fd, &mut event) };
        match done {
            0 => Ok(()),
            _ => Err(io::Error::last_os_error()),
        }
    }

    /// Watches `fd` for one readable event (then silent until re-armed).
    fn add_one_shot(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let events = (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLONESHOT) as u32;
        self.control(libc::EPOLL_CTL_ADD, fd, token, events)
    }

    /// Watches `fd` again after its one event was served.
    fn rearm(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let events = (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLONESHOT) as u32;
        self.control(libc::EPOLL_CTL_MOD, fd, token, events)
    }

    /// Watches `fd` for every readable event, waking one waiter each.
    fn add_shared(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let events = (libc::EPOLLIN | libc::EPOLLEXCLUSIVE) as u32;
        self.control(libc::EPOLL_CTL_ADD, fd, token, events)
    }

    /// Watches `fd` level-triggered for every waiter (the stop signal).
    fn add_for_all(&self, fd: RawFd, token: u64) -> io::Result<()> {
        self.control(libc::EPOLL_CTL_ADD, fd, token, libc::EPOLLIN as u32)
    }

    fn delete(&self, fd: RawFd) {
        let _ = self.control(libc::EPOLL_CTL_DEL, fd, 0, 0);
    }

    /// One event's token, or `None` after `timeout_ms`.
    fn wait_one(&self, timeout_ms: i32) -> io::Result<Option<u64>> {
        let mut event = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: room for the one event asked for.
        let count = unsafe { libc::epoll_wait(self.fd.as_raw_fd(), &mut event, 1, timeout_ms) };
        match count {
            1 => Ok(Some(event.u64)),
            0 => Ok(None),
            _ => Err(io::Error::last_os_error()),
        }
    }
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
            // The socket shut: the worker its event wakes closes it.
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

impl SqlServer {
    /// Listens on `address` and serves with `workers` threads (more while
    /// some stall: `pool`); the engine comes from `engine`, given the
    /// server's view (for SHOW PROCESSLIST).
    pub fn start(
        address: SocketAddr,
        workers: usize,
        engine: impl FnOnce(Arc<dyn sql::Server>) -> sql::SqlResult<Arc<sql::Engine>>,
    ) -> io::Result<SqlServer> {
        let listener = TcpListener::bind(address)?;
        listener.set_nonblocking(true)?;
        let address = listener.local_addr()?;
        let epoll = Epoll::new()?;
        epoll.add_shared(listener.as_raw_fd(), LISTENER)?;
        // SAFETY: eventfd has no memory preconditions; its fd is owned here.
        let stop = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if stop < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor nobody else owns.
        let stop = unsafe { OwnedFd::from_raw_fd(stop) };
        epoll.add_for_all(stop.as_raw_fd(), STOP)?;
        let shared = Arc::new(Shared {
            epoll,
            listener,
            stop,
            stopping: AtomicBool::new(false),
            clients: Mutex::new(HashMap::new()),
            last_sweep: Mutex::new(Instant::now()),
            engine: Mutex::new(None),
            next_id: AtomicU32::new(1),
            pool: Pool::new(workers),
            threads: Mutex::new(Vec::new()),
            next_worker: AtomicU32::new(0),
        });
        let view: Arc<dyn sql::Server> = Arc::new(ServerView {
            shared: Arc::downgrade(&shared),
        });
        let engine = engine(view).map_err(|error| io::Error::other(error.to_string()))?;
        *shared.engine.lock().expect("engine lock") = Some(engine);
        let mut server = SqlServer {
            shared: Arc::clone(&shared),
            address,
            monitor: None,
        };
        // On an error here, dropping `server` stops what was started.
        for _ in 0..shared.pool.base() {
            start_worker(&shared)?;
        }
        server.monitor = Some(
            std::thread::Builder::new()
                .name("sql-pool".to_string())
                .spawn(move || monitor(&shared))?,
        );
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
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live buffer to the eventfd.
        unsafe {
            libc::write(self.shared.stop.as_raw_fd(), one.as_ptr().cast(), one.len());
        }
        // The monitor first: no worker starts after this.
        self.shared.pool.wake_monitor();
        if let Some(monitor) = self.monitor.take() {
            let _ = monitor.join();
        }
        let threads = std::mem::take(&mut *self.shared.threads.lock().expect("threads lock"));
        for thread in threads {
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
            client.io.lock().expect("io lock").protocol.close();
        }
    }
}

impl Drop for SqlServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Takes every waiting connection; each new one is claimed into `claimed`
/// (its greeting is due) and watched from then on.
fn accept(shared: &Arc<Shared>, claimed: &mut Vec<Arc<Client>>) {
    loop {
        let (stream, peer) = match shared.listener.accept() {
            Ok(accepted) => accepted,
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => return,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => {
                // Out of file descriptors and the like: the connection
                // waits in the backlog while the others are served. The
                // listener stays ready, so a pause keeps the workers from
                // spinning on it meanwhile.
                eprintln!("sql node: accept failed: {error}");
                std::thread::sleep(Duration::from_millis(10));
                return;
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
        let client = Arc::new(Client {
            id,
            peer,
            ownership: Mutex::new(Ownership::default()),
            io: Mutex::new(ClientIo {
                stream,
                input: Vec::new(),
                output: Vec::new(),
                protocol: Connection::new(
                    id,
                    peer,
                    engine,
                    scramble(),
                    Arc::clone(&activity),
                    Arc::clone(&interrupt),
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
        // Claimed first, then watched: an event before the greeting is
        // only a poke.
        claimed.extend(claim(&client));
        if shared.epoll.add_one_shot(fd, id as u64 + 2).is_err() {
            client.killed.store(true, Ordering::Relaxed);
        }
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

/// Marks `client` as taken by a worker, unless one has it already (then
/// it is told to look again before giving it back): the client to serve,
/// or `None`.
fn claim(client: &Arc<Client>) -> Option<Arc<Client>> {
    let mut ownership = client.ownership.lock().expect("ownership lock");
    if ownership.busy {
        ownership.poked = true;
        return None;
    }
    ownership.busy = true;
    Some(Arc::clone(client))
}

/// A worker: waits for one event at a time on the shared epoll set and
/// serves what it finds; about once a second it also closes connections
/// idle past their limit.
/// Starts one more worker thread.
fn start_worker(shared: &Arc<Shared>) -> io::Result<()> {
    let state = shared.pool.join();
    let index = shared.next_worker.fetch_add(1, Ordering::Relaxed);
    let started = {
        let shared = Arc::clone(shared);
        let state = Arc::clone(&state);
        std::thread::Builder::new()
            .name(format!("sql-worker-{index}"))
            // Reserved, not committed: pages are touched only by deep
            // expressions (sql::STATEMENT_STACK_BYTES).
            .stack_size(sql::STATEMENT_STACK_BYTES)
            .spawn(move || worker(&shared, &state))
    };
    match started {
        Ok(thread) => {
            let mut threads = shared.threads.lock().expect("threads lock");
            threads.retain(|thread| !thread.is_finished());
            threads.push(thread);
            Ok(())
        }
        Err(error) => {
            shared.pool.abandon(&state);
            Err(error)
        }
    }
}

/// Starts workers while others stall (`pool`), until the server stops.
fn monitor(shared: &Arc<Shared>) {
    let stopping = || shared.stopping.load(Ordering::Relaxed);
    let mut refused = false;
    while let Some(shortfall) = shared.pool.next_shortfall(&stopping) {
        for _ in 0..shortfall {
            if let Err(error) = start_worker(shared) {
                // The process's thread limit: the pool works on with the
                // threads it has. Said once, until a start succeeds.
                if !refused {
                    eprintln!(
                        "sql node: cannot start another worker ({} running): {error}",
                        shared.pool.size()
                    );
                }
                refused = true;
                break;
            }
            refused = false;
        }
    }
}

fn worker(shared: &Arc<Shared>, state: &WorkerState) {
    let mut claimed: Vec<Arc<Client>> = Vec::new();
    loop {
        if shared.stopping.load(Ordering::Relaxed) {
            return;
        }
        shared.pool.idle(state);
        let token = match shared.epoll.wait_one(SWEEP_EVERY_MS) {
            Ok(None) => {
                if shared.pool.retire_or_stay(state) {
                    return;
                }
                None
            }
            Ok(token) => {
                shared.pool.busy(state);
                token
            }
            Err(error) => {
                shared.pool.busy(state);
                if error.kind() != io::ErrorKind::Interrupted {
                    eprintln!("sql node: epoll_wait failed: {error}");
                    std::thread::sleep(Duration::from_millis(10));
                }
                continue;
            }
        };
        sweep_idle(shared, &mut claimed);
        match token {
            None | Some(STOP) => {}
            Some(LISTENER) => accept(shared, &mut claimed),
            Some(token) => {
                let id = (token - 2) as u32;
                let client = shared
                    .clients
                    .lock()
                    .expect("clients lock")
                    .get(&id)
                    .cloned();
                if let Some(client) = client {
                    claimed.extend(claim(&client));
                }
            }
        }
        for client in claimed.drain(..) {
            serve(shared, client);
        }
    }
}

/// About once a second, claims the connections idle past their limit
/// (`wait_timeout`, or the handshake's `connect_timeout`), marked to be
/// closed by the worker that serves them.
fn sweep_idle(shared: &Arc<Shared>, claimed: &mut Vec<Arc<Client>>) {
    {
        // Looked at after every event: another worker sweeping, or a sweep
        // less than a second ago, and this one goes on at once.
        let Ok(mut last) = shared.last_sweep.try_lock() else {
            return;
        };
        if last.elapsed() < Duration::from_secs(1) {
            return;
        }
        *last = Instant::now();
    }
    let clients = shared.clients_now();
    for client in clients {
        let idle = client.since.lock().expect("since lock").elapsed();
        if idle.as_secs() < client.idle_limit.load(Ordering::Relaxed) {
            continue;
        }
        if let Some(claimed_client) = claim(&client) {
            claimed_client.killed.store(true, Ordering::Relaxed);
            claimed.push(claimed_client);
        }
    }
}

/// Serves `client` until it has nothing more to answer, then gives it back.
fn serve(shared: &Arc<Shared>, client: Arc<Client>) {
    loop {
        let closed = {
            let mut io = client.io.lock().expect("io lock");
            let io = &mut *io;
            io.protocol.greet(&mut io.output);
            let mut closed = client.killed.load(Ordering::Relaxed) || read_available(io);
            if !closed {
                *client.since.lock().expect("since lock") = Instant::now();
                let ClientIo {
                    input,
                    output,
                    protocol,
                    ..
                } = io;
                // A panic serving one connection (a bug) closes that
                // connection; the worker and every other connection
                // carry on.
                let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    protocol.receive(input, output)
                }));
                if served.is_err() {
                    eprintln!(
                        "sql node: connection {} closed after a panic serving it",
                        client.id
                    );
                    closed = true;
                }
            }
            closed |= write_all(io).is_err();
            closed |= io.protocol.is_closed();
            if closed {
                io.protocol.close();
                shared.epoll.delete(io.stream.as_raw_fd());
            }
            client
                .idle_limit
                .store(io.protocol.idle_limit(), Ordering::Relaxed);
            // Idle from the end of what it asked, not its start.
            *client.since.lock().expect("since lock") = Instant::now();
            closed
        };
        if closed {
            shared
                .clients
                .lock()
                .expect("clients lock")
                .remove(&client.id);
            return;
        }
        let mut ownership = client.ownership.lock().expect("ownership lock");
        if ownership.poked {
            ownership.poked = false;
            continue;
        }
        ownership.busy = false;
        drop(ownership);
        // Given back first, then watched again: an event from here on
        // finds it free. Bytes already waiting raise it at once.
        if shared.epoll.rearm(client.fd, client.id as u64 + 2).is_err() {
            // Not watched, it would hang: close it at the next look.
            client.killed.store(true, Ordering::Relaxed);
            let _ = claim(&client).map(|claimed| serve(shared, claimed));
        }
        return;
    }
}

/// Reads what the socket holds; true when the peer closed or the input
/// grew past what a packet may be. A read that does not fill the chunk
/// took everything there was: the next read would only say WouldBlock (a
/// system call per statement saved), and bytes that come later raise the
/// connection again when it is re-armed.
fn read_available(io: &mut ClientIo) -> bool {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match io.stream.read(&mut chunk) {
            Ok(0) => return true,
            Ok(n) => {
                io.input.extend_from_slice(&chunk[..n]);
                if io.input.len() > MAX_PACKET + 64 * 1024 {
                    // More than one whole packet buffered unanswered: the
                    // decoder refuses oversized ones first, so this is a
                    // client flooding without reading.
                    return true;
                }
                if n < chunk.len() {
                    return false;
                }
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => return false,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return true,
        }
    }
}

/// Writes the pending output, waiting for the socket when it is full.
fn write_all(io: &mut ClientIo) -> io::Result<()> {
    let mut written = 0;
    let deadline = Instant::now() + WRITE_TIMEOUT;
    while written < io.output.len() {
        match io.stream.write(&io.output[written..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => written += n,
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(io::ErrorKind::TimedOut.into());
                }
                let mut poll_fd = libc::pollfd {
                    fd: io.stream.as_raw_fd(),
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: one valid pollfd for the duration of the call.
                unsafe {
                    libc::poll(
                        &mut poll_fd,
                        1,
                        left.as_millis().min(i32::MAX as u128) as i32,
                    );
                }
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    io.output.clear();
    Ok(())
}
