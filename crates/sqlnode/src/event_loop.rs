//! One event loop of the SQL node: a thread that waits on its epoll set
//! (its connections, the shared listener, its wake eventfd), serves each
//! ready connection in a task, resumes the tasks their replies or
//! deadlines wake, writes what its tasks sent the data nodes once per
//! round (`client::gather`), and closes its connections idle past their
//! limit (docs/design/0027-sql-node.md, "Threads").
//!
//! A connection is registered one-shot: its event starts exactly one task,
//! and the connection stays silent until that task has read everything
//! there is, answered every complete command and written the answers, and
//! re-armed it (level-triggered: bytes that came meanwhile raise it again
//! at once). A task whose client does not take its output fast enough
//! waits for the socket to drain, suspended like any other wait, so a slow
//! reader holds up nobody else.

use crate::connection::MAX_PACKET;
use crate::server::{self, Client, ClientIo, Shared};
use crate::task::{Tasks, WakeQueue};
use crate::tls::Tls;
use std::io::{self, Write};
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use stdx::epoll::{Epoll, Event, NO_EVENT};

/// The epoll token of the listener; a client's is its id + 3.
const LISTENER: u64 = 0;
/// The epoll token of the loop's wake eventfd.
const WAKE: u64 = 1;
/// The epoll token of the cluster connection's receiver (first loop).
const RECEIVE: u64 = 2;
/// How often a loop looks for idle connections.
const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// How long a task waits for a client to take a response.
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);
/// Events taken from the set at once.
const EVENTS_AT_ONCE: usize = 256;
/// A connection waits for one readable event (then silent until re-armed).
const READ_ONE_SHOT: u32 = (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLONESHOT) as u32;
/// A connection's task waits for one event of room to write.
const WRITE_ONE_SHOT: u32 = (libc::EPOLLOUT | libc::EPOLLONESHOT) as u32;
/// The listener, in every loop's set: each connection wakes one loop.
const EXCLUSIVE_READ: u32 = (libc::EPOLLIN | libc::EPOLLEXCLUSIVE) as u32;
/// Level-triggered reading (the wake eventfd, the receiver's set).
const READ: u32 = libc::EPOLLIN as u32;

/// A client's token in its loop's set.
pub(crate) fn client_token(id: u32) -> u64 {
    id as u64 + 3
}

/// What other threads reach of a loop.
pub(crate) struct LoopShared {
    index: usize,
    epoll: Epoll,
    /// Tasks woken by other threads; its eventfd wakes the loop.
    pub(crate) wakes: Arc<WakeQueue>,
    /// Connections another loop accepted for this one.
    incoming: Mutex<Vec<Arc<Client>>>,
    /// The cluster connection's receive side: the first loop owns it
    /// (sleeps on it too); the others read it after each round of work,
    /// so that under load replies for their tasks need no wake-up.
    receiver: Option<Arc<client::Receiver>>,
    owns_receiver: bool,
}

impl LoopShared {
    pub(crate) fn new(
        index: usize,
        listener: &TcpListener,
        receiver: Option<Arc<client::Receiver>>,
    ) -> io::Result<LoopShared> {
        let epoll = Epoll::new()?;
        epoll.add(listener.as_raw_fd(), LISTENER, EXCLUSIVE_READ)?;
        let wakes = Arc::new(WakeQueue::new()?);
        epoll.add(wakes.fd(), WAKE, READ)?;
        let owns_receiver = index == 0 && receiver.is_some();
        if let Some(receiver) = receiver.as_ref().filter(|_| owns_receiver) {
            epoll.add(receiver.fd(), RECEIVE, READ)?;
        }
        Ok(LoopShared {
            index,
            epoll,
            wakes,
            incoming: Mutex::new(Vec::new()),
            receiver,
            owns_receiver,
        })
    }

    /// Hands this loop a connection another loop accepted for it.
    fn hand_over(&self, client: Arc<Client>) {
        self.incoming.lock().expect("incoming lock").push(client);
        self.wakes.poke();
    }
}

/// Runs loop `index` until the server stops.
pub(crate) fn run(shared: &Arc<Shared>, index: usize) {
    let this = Arc::clone(&shared.loops[index]);
    let mut tasks = Tasks::new(Arc::clone(&this.wakes));
    let mut events = vec![NO_EVENT; EVENTS_AT_ONCE];
    let mut last_sweep = Instant::now();
    let owned = this.receiver.as_ref().filter(|_| this.owns_receiver);
    if let Some(receiver) = owned {
        receiver.take_over();
    }
    // The tasks' requests to the data nodes wait for the end of the
    // round, then go out with one write per node (flushed by the drop too).
    let _gathering = client::gather::on_this_thread();
    while !shared.stopping.load(Ordering::Relaxed) {
        let now = Instant::now();
        let mut wake_by = last_sweep + SWEEP_EVERY;
        if let Some(deadline) = tasks.next_deadline() {
            wake_by = wake_by.min(deadline);
        }
        let timeout_ms = if this.wakes.prepare_sleep() {
            // Rounded up: a wait shorter than its deadline would only
            // come round again.
            let left = wake_by.saturating_duration_since(now);
            left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32
        } else {
            0
        };
        // Everything the round's tasks sent goes out before the loop sleeps.
        client::gather::flush();
        if let Some(receiver) = owned {
            receiver.polling(true);
        }
        let ready = match this.epoll.wait(&mut events, timeout_ms) {
            Ok(ready) => ready,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => 0,
            Err(error) => {
                eprintln!("sql node: epoll_wait failed: {error}");
                std::thread::sleep(Duration::from_millis(10));
                0
            }
        };
        this.wakes.awake();
        if let Some(receiver) = owned {
            receiver.polling(false);
        }
        for event in &events[..ready] {
            on_event(shared, &this, &mut tasks, event);
        }
        if ready > 0 && !this.owns_receiver {
            if let Some(receiver) = &this.receiver {
                receiver.receive_ready();
            }
        }
        tasks.resume_woken(Instant::now());
        if last_sweep.elapsed() >= SWEEP_EVERY {
            last_sweep = Instant::now();
            sweep_idle(shared, &this, &mut tasks);
            tasks.trim_spare_stacks();
        }
    }
    if let Some(receiver) = owned {
        receiver.give_back();
    }
}

fn on_event(shared: &Arc<Shared>, this: &Arc<LoopShared>, tasks: &mut Tasks, event: &Event) {
    match event.u64 {
        LISTENER => {
            for client in server::accept(shared) {
                if client.home == this.index {
                    take_on(shared, this, tasks, client);
                } else {
                    shared.loops[client.home].hand_over(client);
                }
            }
        }
        RECEIVE => {
            if let Some(receiver) = &this.receiver {
                receiver.receive_ready();
            }
        }
        WAKE => {
            this.wakes.drain();
            let incoming = std::mem::take(&mut *this.incoming.lock().expect("incoming lock"));
            for client in incoming {
                take_on(shared, this, tasks, client);
            }
        }
        token => {
            let id = (token - 3) as u32;
            if tasks.serves(id) {
                // Its task waits for the socket to take more output.
                tasks.resume_serving(id);
            } else if let Some(client) = shared.client(id) {
                if let Some(client) = server::claim(&client) {
                    start_serving(shared, this, tasks, client);
                }
            }
        }
    }
}

/// A new connection of this loop: its greeting is due, then it is watched.
fn take_on(shared: &Arc<Shared>, this: &Arc<LoopShared>, tasks: &mut Tasks, client: Arc<Client>) {
    // Claimed first, then watched: an event before the greeting is only a
    // poke.
    let claimed = server::claim(&client);
    if this
        .epoll
        .add(client.fd, client.token(), READ_ONE_SHOT)
        .is_err()
    {
        client.killed.store(true, Ordering::Relaxed);
    }
    if let Some(client) = claimed {
        start_serving(shared, this, tasks, client);
    }
}

/// Starts the task that serves `client` (claimed for it).
fn start_serving(
    shared: &Arc<Shared>,
    this: &Arc<LoopShared>,
    tasks: &mut Tasks,
    client: Arc<Client>,
) {
    let id = client.id;
    let body = {
        let shared = Arc::clone(shared);
        let this = Arc::clone(this);
        let client = Arc::clone(&client);
        move || serve(&shared, &this, client)
    };
    if let Err(error) = tasks.start(id, body) {
        // No stack to be had: the connection is closed, the others go on.
        eprintln!("sql node: connection {id} closed: no task for it ({error})");
        close(shared, this, &client);
    }
}

/// About once a second, closes this loop's connections idle past their
/// limit (`wait_timeout`, or the handshake's `connect_timeout`): claimed,
/// marked, and served by a task that closes them.
fn sweep_idle(shared: &Arc<Shared>, this: &Arc<LoopShared>, tasks: &mut Tasks) {
    for client in shared.clients_now() {
        if client.home != this.index {
            continue;
        }
        let idle = client.since.lock().expect("since lock").elapsed();
        if idle.as_secs() < client.idle_limit.load(Ordering::Relaxed) {
            continue;
        }
        if let Some(claimed) = server::claim(&client) {
            claimed.killed.store(true, Ordering::Relaxed);
            start_serving(shared, this, tasks, claimed);
        }
    }
}

/// A task's body: serves `client` until it has nothing more to answer,
/// then gives it back (or closes it).
fn serve(shared: &Arc<Shared>, this: &Arc<LoopShared>, client: Arc<Client>) {
    // A panic serving one connection (a bug) closes that connection; the
    // loop and every other connection carry on.
    let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        serve_until_idle(shared, this, &client)
    }));
    if served.is_err() {
        eprintln!(
            "sql node: connection {} closed after a panic serving it",
            client.id
        );
        // Closing ends its session, which may run into the same bug.
        let closed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            close(shared, this, &client)
        }));
        if closed.is_err() {
            forget(shared, this, &client);
        }
    }
}

fn serve_until_idle(shared: &Arc<Shared>, this: &Arc<LoopShared>, client: &Arc<Client>) {
    loop {
        let closed = {
            let mut io = client
                .io
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let io = &mut *io;
            io.protocol.greet(&mut io.output);
            let mut closed = client.killed.load(Ordering::Relaxed) || receive_bytes(io);
            if !closed {
                *client.since.lock().expect("since lock") = Instant::now();
                let ClientIo {
                    input,
                    output,
                    protocol,
                    ..
                } = io;
                protocol.receive(input, output);
                if io.protocol.take_tls_request() {
                    closed |= start_tls(shared, io).is_err();
                }
            }
            if let Some(tls) = &mut io.tls {
                closed |= tls.encrypt(&mut io.output).is_err();
            }
            closed |= write_all(this, client, io).is_err();
            closed |= io.protocol.is_closed();
            client
                .idle_limit
                .store(io.protocol.idle_limit(), Ordering::Relaxed);
            // Idle from the end of what it asked, not its start.
            *client.since.lock().expect("since lock") = Instant::now();
            closed
        };
        if closed {
            close(shared, this, client);
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
        if this
            .epoll
            .modify(client.fd, client.token(), READ_ONE_SHOT)
            .is_err()
        {
            // Not watched, it would hang: closed now, taken back first
            // (nothing else claims it meanwhile: claims are made on this
            // loop's thread, which runs this task).
            client.ownership.lock().expect("ownership lock").busy = true;
            close(shared, this, client);
        }
        return;
    }
}

/// Closes `client`'s connection and forgets it.
fn close(shared: &Arc<Shared>, this: &Arc<LoopShared>, client: &Arc<Client>) {
    {
        let mut io = client
            .io
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        io.protocol.close();
    }
    forget(shared, this, client);
}

/// Stops watching `client` and drops it from the table (its socket closes
/// with the last reference).
fn forget(shared: &Arc<Shared>, this: &Arc<LoopShared>, client: &Arc<Client>) {
    this.epoll.delete(client.fd);
    // SAFETY: `fd` belongs to the client's stream, alive while it is held;
    // shutdown does not close it. The peer sees the end at once, whoever
    // still holds the client.
    unsafe {
        libc::shutdown(client.fd, libc::SHUT_RDWR);
    }
    shared
        .clients
        .lock()
        .expect("clients lock")
        .remove(&client.id);
}

/// Reads what the socket holds into the connection's input (through
/// its TLS session when it has one); true when the peer closed, sent
/// what does not decode as TLS, or flooded.
fn receive_bytes(io: &mut ClientIo) -> bool {
    let Some(tls) = &mut io.tls else {
        return read_available(&io.stream, &mut io.input);
    };
    let closed = read_available(&io.stream, &mut io.records);
    // Records that came with the end are still taken (a last statement
    // and the client's close).
    tls.decrypt(&mut io.records, &mut io.input).is_err() || closed
}

/// The client asked for TLS: from here on its bytes go through a TLS
/// session, those already read after its request first.
fn start_tls(shared: &Shared, io: &mut ClientIo) -> io::Result<()> {
    let config = shared
        .tls
        .as_ref()
        .ok_or_else(|| io::Error::other("TLS requested where none is offered"))?;
    let mut tls = Tls::new(config)?;
    io.records.append(&mut io.input);
    tls.decrypt(&mut io.records, &mut io.input)?;
    io.tls = Some(tls);
    io.protocol.secured();
    // Plaintext that came in the same read as the handshake's end.
    if !io.input.is_empty() {
        io.protocol.receive(&mut io.input, &mut io.output);
    }
    Ok(())
}

/// Reads what the socket holds; true when the peer closed or the input
/// grew past what a packet may be. A read that does not fill the chunk
/// took everything there was: the next read would only say WouldBlock (a
/// system call per statement saved), and bytes that come later raise the
/// connection again when it is re-armed. Bytes go straight into the
/// input's spare room: no chunk on the task's stack to clear and copy.
fn read_available(stream: &std::net::TcpStream, into: &mut Vec<u8>) -> bool {
    const CHUNK: usize = 16 * 1024;
    loop {
        let start = into.len();
        into.reserve(CHUNK);
        let spare = into.spare_capacity_mut();
        // SAFETY: recv writes at most CHUNK bytes, within the spare room
        // just reserved; only the bytes it reports written are then
        // counted as the input's.
        let read = unsafe {
            libc::recv(
                stream.as_raw_fd(),
                spare.as_mut_ptr().cast(),
                CHUNK.min(spare.len()),
                0,
            )
        };
        match read {
            0 => return true,
            read if read > 0 => {
                let read = read as usize;
                // SAFETY: recv initialized these `read` bytes.
                unsafe { into.set_len(start + read) };
                if into.len() > MAX_PACKET + 64 * 1024 {
                    // More than one whole packet buffered unanswered: the
                    // decoder refuses oversized ones first, so this is a
                    // client flooding without reading.
                    return true;
                }
                if read < CHUNK {
                    return false;
                }
            }
            _ => {
                let error = io::Error::last_os_error();
                match error.kind() {
                    io::ErrorKind::WouldBlock => return false,
                    io::ErrorKind::Interrupted => continue,
                    _ => return true,
                }
            }
        }
    }
}

/// Writes the pending output; while the socket is full, the task waits
/// for it to drain (its loop serves the others meanwhile). A client that
/// takes nothing for `WRITE_TIMEOUT` is given up (MySQL's
/// net_write_timeout); one that reads slowly but reads is served to the
/// end, however long its result.
fn write_all(this: &LoopShared, client: &Client, io: &mut ClientIo) -> io::Result<()> {
    let mut written = 0;
    let mut deadline = None;
    while written < io.output.len() {
        match io.stream.write(&io.output[written..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                written += n;
                deadline = None;
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                let deadline = *deadline.get_or_insert_with(|| Instant::now() + WRITE_TIMEOUT);
                if Instant::now() >= deadline {
                    return Err(io::ErrorKind::TimedOut.into());
                }
                this.epoll
                    .modify(client.fd, client.token(), WRITE_ONE_SHOT)?;
                let suspended = client::cooperative::suspend(Some(deadline));
                assert!(
                    suspended,
                    "connections are served only by tasks, whose waits suspend"
                );
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    io.output.clear();
    Ok(())
}
