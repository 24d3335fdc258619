//! The SQL node's server: a fixed pool of worker threads serves every
//! connection (seed 004's thread pool, not a thread per connection;
//! docs/design/0027-sql-node.md, "Threads").
//!
//! Leader/follower: one idle worker at a time waits on the sockets; when
//! connections have bytes to read it claims them, serves the first itself
//! (no hand-off between threads) and queues the rest for the others,
//! waking one to lead meanwhile. A connection is claimed once (one being
//! served is only marked to look again). A worker owns the connection
//! while it serves it: it reads everything there is, answers every
//! complete command (running statements synchronously against the
//! cluster), writes the answers, and gives the connection back. A connection inside a
//! transaction goes to the front queue: its locks are held until it
//! moves on, so it must not wait behind new work.

use crate::connection::{Activity, Connection, MAX_PACKET};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
/// How long a worker waits for a client to take a response.
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);

/// Who owns a connection's I/O right now.
#[derive(Default)]
struct Ownership {
    /// A worker has it (or it waits in the queue).
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
    /// Its session is inside a transaction (set by its worker).
    in_transaction: AtomicBool,
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

/// The work queues: connections in a transaction first.
#[derive(Default)]
struct Queues {
    front: VecDeque<Arc<Client>>,
    back: VecDeque<Arc<Client>>,
    stopping: bool,
}

struct Shared {
    /// The poll and its events: held by the one worker that waits on the
    /// sockets (the leader).
    poll: Mutex<(Poll, Events)>,
    listener: TcpListener,
    queues: Mutex<Queues>,
    ready: Condvar,
    clients: Mutex<HashMap<u32, Arc<Client>>>,
    registry: mio::Registry,
    /// When idle connections were last looked for.
    last_sweep: Mutex<Instant>,
    engine: Mutex<Option<Arc<sql::Engine>>>,
    next_id: AtomicU32,
}

/// A running SQL node server.
pub struct SqlServer {
    shared: Arc<Shared>,
    address: SocketAddr,
    waker: Arc<Waker>,
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
        let clients: Vec<Arc<Client>> = shared
            .clients
            .lock()
            .expect("clients lock")
            .values()
            .cloned()
            .collect();
        let mut list: Vec<sql::Process> = clients
            .iter()
            .map(|client| {
                let Activity {
                    user,
                    database,
                    info,
                } = client.activity.lock().expect("activity lock").clone();
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
            // The socket shut: its worker or the leader closes it.
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
    /// Listens on `address` and serves with `workers` threads; the engine
    /// comes from `engine`, given the server's view (for SHOW PROCESSLIST).
    pub fn start(
        address: SocketAddr,
        workers: usize,
        engine: impl FnOnce(Arc<dyn sql::Server>) -> sql::SqlResult<Arc<sql::Engine>>,
    ) -> io::Result<SqlServer> {
        let poll = Poll::new()?;
        let mut listener = TcpListener::bind(address)?;
        let address = listener.local_addr()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let registry = poll.registry().try_clone()?;
        let shared = Arc::new(Shared {
            poll: Mutex::new((poll, Events::with_capacity(1024))),
            listener,
            queues: Mutex::new(Queues::default()),
            ready: Condvar::new(),
            clients: Mutex::new(HashMap::new()),
            registry,
            last_sweep: Mutex::new(Instant::now()),
            engine: Mutex::new(None),
            next_id: AtomicU32::new(1),
        });
        let view: Arc<dyn sql::Server> = Arc::new(ServerView {
            shared: Arc::downgrade(&shared),
        });
        let engine = engine(view).map_err(|error| io::Error::other(error.to_string()))?;
        *shared.engine.lock().expect("engine lock") = Some(engine);
        let mut threads = Vec::new();
        for index in 0..workers.max(1) {
            let shared = Arc::clone(&shared);
            threads.push(
                std::thread::Builder::new()
                    .name(format!("sql-worker-{index}"))
                    // Reserved, not committed: pages are touched only by
                    // deep expressions (sql::STATEMENT_STACK_BYTES).
                    .stack_size(sql::STATEMENT_STACK_BYTES)
                    .spawn(move || worker(&shared))?,
            );
        }
        Ok(SqlServer {
            shared,
            address,
            waker,
            threads,
        })
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
        self.shared.queues.lock().expect("queues lock").stopping = true;
        self.shared.ready.notify_all();
        let _ = self.waker.wake();
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
/// (its greeting is due).
fn accept(shared: &Arc<Shared>, claimed: &mut Vec<Arc<Client>>) {
    loop {
        let (mut stream, peer) = match shared.listener.accept() {
            Ok(accepted) => accepted,
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => return,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => {
                // Out of file descriptors and the like: drop this one and
                // carry on serving the others.
                eprintln!("sql node: accept failed: {error}");
                return;
            }
        };
        let _ = stream.set_nodelay(true);
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
        if shared
            .registry
            .register(&mut stream, Token(id as usize + 2), Interest::READABLE)
            .is_err()
        {
            continue;
        }
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
            in_transaction: AtomicBool::new(false),
            activity,
            idle_limit: AtomicU64::new(crate::connection::CONNECT_TIMEOUT_SECONDS),
            interrupt,
        });
        shared
            .clients
            .lock()
            .expect("clients lock")
            .insert(id, Arc::clone(&client));
        claimed.extend(claim(&client));
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

/// Queues claimed clients for the other workers, those in a transaction
/// first.
fn enqueue(shared: &Shared, clients: impl IntoIterator<Item = Arc<Client>>) {
    let mut queues = shared.queues.lock().expect("queues lock");
    let mut queued = 0;
    for client in clients {
        match client.in_transaction.load(Ordering::Relaxed) {
            true => queues.front.push_back(client),
            false => queues.back.push_back(client),
        }
        queued += 1;
    }
    drop(queues);
    for _ in 0..queued {
        shared.ready.notify_one();
    }
}

/// A worker: serves queued clients; with none queued, becomes the leader
/// that waits on the sockets if no other worker is, and serves the first
/// ready client itself (leader/follower: a request is read by the thread
/// that answers it, with no hand-off, whenever a worker is idle); else
/// waits for queued work.
fn worker(shared: &Arc<Shared>) {
    let mut claimed: Vec<Arc<Client>> = Vec::new();
    loop {
        let queued = {
            let mut queues = shared.queues.lock().expect("queues lock");
            if queues.stopping {
                return;
            }
            match queues.front.pop_front().or_else(|| queues.back.pop_front()) {
                Some(client) => Some(client),
                None => match shared.poll.try_lock() {
                    // Lead: poll below, without the queue's lock.
                    Ok(guard) => {
                        drop(queues);
                        lead(shared, guard, &mut claimed);
                        None
                    }
                    Err(_) => {
                        // Another worker leads: wait for work, and look
                        // again now and then in case the leader is busy
                        // serving.
                        let _ = shared
                            .ready
                            .wait_timeout(queues, Duration::from_millis(50))
                            .expect("queues lock");
                        None
                    }
                },
            }
        };
        if let Some(client) = queued {
            serve(shared, client);
            continue;
        }
        if claimed.is_empty() {
            continue;
        }
        // The first ready client is this worker's; the others go to the
        // queue, and an idle worker is woken to lead while this one serves.
        let first = claimed.remove(0);
        enqueue(shared, claimed.drain(..));
        shared.ready.notify_one();
        serve(shared, first);
    }
}

/// About once a second, claims the connections idle past their limit
/// (`wait_timeout`, or the handshake's `connect_timeout`), marked to be
/// closed by whoever serves them.
fn sweep_idle(shared: &Arc<Shared>, claimed: &mut Vec<Arc<Client>>) {
    {
        let mut last = shared.last_sweep.lock().expect("sweep lock");
        if last.elapsed() < Duration::from_secs(1) {
            return;
        }
        *last = Instant::now();
    }
    let clients: Vec<Arc<Client>> = shared
        .clients
        .lock()
        .expect("clients lock")
        .values()
        .cloned()
        .collect();
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

/// Waits on the sockets once and claims the clients with bytes to read.
fn lead(
    shared: &Arc<Shared>,
    mut guard: std::sync::MutexGuard<'_, (Poll, Events)>,
    claimed: &mut Vec<Arc<Client>>,
) {
    let (poll, events) = &mut *guard;
    if let Err(error) = poll.poll(events, Some(Duration::from_millis(500))) {
        if error.kind() != io::ErrorKind::Interrupted {
            eprintln!("sql node: poll failed: {error}");
            std::thread::sleep(Duration::from_millis(10));
        }
        return;
    }
    sweep_idle(shared, claimed);
    for event in events.iter() {
        match event.token() {
            LISTENER => accept(shared, claimed),
            WAKER => {}
            Token(token) => {
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
                let _ = shared.registry.deregister(&mut io.stream);
            }
            client
                .in_transaction
                .store(io.protocol.in_transaction(), Ordering::Relaxed);
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
        return;
    }
}

/// Reads everything the socket holds; true when the peer closed or the
/// input grew past what a packet may be.
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
