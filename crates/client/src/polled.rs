//! Receiving without a thread per connection: the data-node sockets of a
//! [`Receiver`] are read by an application's event loop when it has
//! nothing else to do (NDB's poll owner), so a reply reaches a task of
//! that loop without waking another thread first
//! (docs/design/0027-sql-node.md, "Threads").
//!
//! ```text
//!  socket ──> receiver's epoll set ──> owner's loop: Receiver::receive_ready
//!                                 └──> fallback thread, while no loop owns it
//!                                      or the owner has not looked for a while
//! ```
//!
//! A [`ConnectOptions`](crate::ConnectOptions) with a receiver makes the TCP
//! transport register each connection here instead of starting its
//! receive thread. Until a loop takes the receiver over (and after it
//! gives it back), the receiver's own thread reads, so connecting and
//! registering need no loop. While a loop owns it, the thread sleeps and
//! looks every `FALLBACK_LOOK`: an owner out of its poll for longer than
//! that (a long statement) has its sockets read by the thread until it is
//! back, so replies and heartbeats wait for it at most that long. Two readers of one
//! connection never overlap: each connection is read under its own lock,
//! and a reader that finds it taken leaves it to the other.

use crate::connection::Inbound;
use crate::environment::Link;
use crate::id_hash::IdMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use stdx::epoll::{Epoll, EventFd, NO_EVENT};

/// How often the fallback thread looks whether the owner still polls.
const FALLBACK_LOOK: Duration = Duration::from_millis(20);
/// The token of the eventfd that wakes the fallback thread's wait.
const KICK: u64 = 0;
/// `owner_seen`'s value while the owner waits in its poll.
const IN_POLL: u64 = u64::MAX;
/// Every connection and the kick are watched level-triggered for reading.
const READ: u32 = libc::EPOLLIN as u32;
/// Ready sockets taken from the set at once.
const EVENTS_AT_ONCE: usize = 64;

/// One connection's receive side.
struct Polled {
    stream: TcpStream,
    inbound: Inbound,
}

type Slot = Arc<Mutex<Option<Polled>>>;

/// The receive side of a process's data-node connections, read by
/// whoever polls it (see the module's text).
pub struct Receiver {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

struct Shared {
    /// Every connection's socket (level-triggered) and the kick eventfd.
    epoll: Epoll,
    kick: EventFd,
    connections: Mutex<IdMap<u64, Slot>>,
    next_token: AtomicU64,
    /// A loop owns the polling.
    owned: AtomicBool,
    /// Microseconds since `epoch` when the owner last came out of its poll,
    /// or `IN_POLL` while it waits in it.
    owner_seen: AtomicU64,
    epoch: Instant,
    stopping: AtomicBool,
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Receiver")
            .field("owned", &self.shared.owned.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Receiver {
    /// A receiver and its fallback thread, which reads until a loop takes
    /// over.
    pub fn new() -> io::Result<Arc<Receiver>> {
        let (epoll, kick) = (Epoll::new()?, EventFd::new()?);
        let shared = Arc::new(Shared {
            epoll,
            kick,
            connections: Mutex::new(IdMap::default()),
            next_token: AtomicU64::new(KICK + 1),
            owned: AtomicBool::new(false),
            owner_seen: AtomicU64::new(0),
            epoch: Instant::now(),
            stopping: AtomicBool::new(false),
        });
        shared.epoll.add(shared.kick.fd(), KICK, READ)?;
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("tessera-receive".to_string())
                .spawn(move || fallback(&shared))?
        };
        Ok(Arc::new(Receiver {
            shared,
            thread: Mutex::new(Some(thread)),
        }))
    }

    /// The descriptor an owner's loop watches (readable while some
    /// connection has bytes).
    pub fn fd(&self) -> RawFd {
        self.shared.epoll.fd()
    }

    /// The calling loop reads from now on ([`Receiver::receive_ready`] when
    /// [`Receiver::fd`] is readable); the fallback thread steps back.
    pub fn take_over(&self) {
        self.shared
            .owner_seen
            .store(self.shared.now(), Ordering::SeqCst);
        self.shared.owned.store(true, Ordering::SeqCst);
        self.shared.kick.signal();
    }

    /// The owner stops reading; the fallback thread reads again.
    pub fn give_back(&self) {
        self.shared.owned.store(false, Ordering::SeqCst);
        self.wake_fallback();
    }

    /// The owner is about to wait in its poll (true) or is back from it
    /// (false); while it is out of it for long, the fallback thread reads.
    pub fn polling(&self, waiting: bool) {
        let seen = if waiting { IN_POLL } else { self.shared.now() };
        self.shared.owner_seen.store(seen, Ordering::Relaxed);
    }

    /// Reads every connection that has bytes, delivering their replies
    /// (the owner's loop, when [`Receiver::fd`] is readable).
    pub fn receive_ready(&self) {
        self.shared.receive_ready();
    }

    fn wake_fallback(&self) {
        let thread = self.thread.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(thread) = thread.as_ref() {
            thread.thread().unpark();
        }
    }

    /// Registers a connection's receive side; the link writes to it and
    /// ends it.
    pub(crate) fn register(
        self: &Arc<Self>,
        stream: TcpStream,
        inbound: Inbound,
    ) -> io::Result<Box<dyn Link>> {
        let receive_stream = stream.try_clone()?;
        let fd = receive_stream.as_raw_fd();
        let token = self.shared.next_token.fetch_add(1, Ordering::Relaxed);
        let slot: Slot = Arc::new(Mutex::new(Some(Polled {
            stream: receive_stream,
            inbound,
        })));
        self.shared
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(token, slot);
        if let Err(error) = self.shared.epoll.add(fd, token, READ) {
            self.shared
                .end(token, format!("cannot watch the socket: {error}"));
            return Err(error);
        }
        Ok(Box::new(PolledLink {
            stream,
            token,
            shared: Arc::downgrade(&self.shared),
        }))
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.shared.kick.signal();
        self.wake_fallback();
        let thread = self
            .thread
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

impl Shared {
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    /// Waits up to `timeout_ms` (-1: no limit) for ready connections and
    /// reads them.
    fn wait_and_receive(&self, timeout_ms: i32) {
        let mut events = [NO_EVENT; EVENTS_AT_ONCE];
        let ready = self.epoll.wait(&mut events, timeout_ms).unwrap_or(0);
        for event in &events[..ready] {
            match event.u64 {
                KICK => self.kick.drain(),
                token => self.receive(token),
            }
        }
    }

    fn receive_ready(&self) {
        self.wait_and_receive(0);
    }

    /// Reads connection `token` until it has nothing more, delivering
    /// every whole frame; ends it on end of stream, a failed read or
    /// invalid bytes.
    fn receive(&self, token: u64) {
        let slot = self
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&token)
            .cloned();
        let Some(slot) = slot else { return };
        // Another reader has it: it reads until nothing is left.
        let Ok(mut polled) = slot.try_lock() else {
            return;
        };
        let Some(Polled { stream, inbound }) = polled.as_mut() else {
            return;
        };
        let ended = loop {
            let mut reader = DontWait {
                fd: stream.as_raw_fd(),
                short: false,
            };
            match inbound.read_from(&mut reader) {
                Ok(0) => break Some("connection closed by the data node".to_string()),
                Ok(_) => {
                    if let Err(reason) = inbound.deliver(true) {
                        break Some(reason);
                    }
                    // A read that did not fill the buffer took all there
                    // was; more raises the set again.
                    if reader.short {
                        break None;
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => break None,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => break Some(format!("read failed: {error}")),
            }
        };
        drop(polled);
        if let Some(reason) = ended {
            self.end(token, reason);
        }
    }

    /// Ends connection `token`: unwatched, shut, and every waiter failed
    /// with `reason`. Once only: a second end finds nothing.
    fn end(&self, token: u64, reason: String) {
        let slot = self
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&token);
        let Some(slot) = slot else { return };
        let polled = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
        self.close(polled, reason);
    }

    /// Ends connection `token` unless a reader has it now (that reader
    /// finds its end, the socket being shut).
    fn end_unless_read(&self, token: u64, reason: String) {
        let mut connections = self
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(slot) = connections.get(&token).cloned() else {
            return;
        };
        let Ok(mut polled) = slot.try_lock() else {
            return;
        };
        connections.remove(&token);
        drop(connections);
        let polled = polled.take();
        self.close(polled, reason);
    }

    fn close(&self, polled: Option<Polled>, reason: String) {
        if let Some(Polled { stream, inbound }) = polled {
            self.epoll.delete(stream.as_raw_fd());
            let _ = stream.shutdown(Shutdown::Both);
            inbound.close(reason);
        }
    }

    /// Whether the owner has been out of its poll for longer than
    /// `FALLBACK_LOOK`.
    fn owner_is_away(&self) -> bool {
        let seen = self.owner_seen.load(Ordering::Relaxed);
        seen != IN_POLL && self.now().saturating_sub(seen) > FALLBACK_LOOK.as_micros() as u64
    }
}

/// The fallback thread: reads while no loop owns the receiver, and
/// stands in for an owner away from its poll for as long as it is away.
fn fallback(shared: &Shared) {
    while !shared.stopping.load(Ordering::SeqCst) {
        if !shared.owned.load(Ordering::SeqCst) {
            // Woken by the kick when a loop takes over, or to stop.
            shared.wait_and_receive(-1);
            continue;
        }
        std::thread::park_timeout(FALLBACK_LOOK);
        while shared.owned.load(Ordering::SeqCst)
            && shared.owner_is_away()
            && !shared.stopping.load(Ordering::SeqCst)
        {
            shared.wait_and_receive(FALLBACK_LOOK.as_millis() as i32);
        }
    }
}

/// Reads without blocking, whatever the socket's mode (its writes block,
/// with a timeout: the mode is shared with the write side).
struct DontWait {
    fd: RawFd,
    /// The last read returned less than asked for.
    short: bool,
}

impl Read for DontWait {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        // SAFETY: writes at most `buffer.len()` bytes into the buffer.
        let read = unsafe {
            libc::recv(
                self.fd,
                buffer.as_mut_ptr().cast(),
                buffer.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if read < 0 {
            return Err(io::Error::last_os_error());
        }
        let read = read as usize;
        self.short = read < buffer.len();
        Ok(read)
    }
}

/// The send side of a polled connection.
struct PolledLink {
    stream: TcpStream,
    token: u64,
    shared: Weak<Shared>,
}

impl Link for PolledLink {
    fn write(&self, bytes: &[u8]) -> io::Result<()> {
        (&self.stream).write_all(bytes)
    }

    fn shutdown(&self) {
        // The next read finds the end and fails every waiter.
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

impl Drop for PolledLink {
    fn drop(&mut self) {
        self.shutdown();
        if let Some(shared) = self.shared.upgrade() {
            shared.end_unless_read(self.token, "connection closed by the client".to_string());
        }
    }
}
