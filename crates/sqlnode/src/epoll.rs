//! An epoll set, through libc: the listener shared by every event loop
//! (each wakes alone for it: EPOLLEXCLUSIVE), connections one-shot (silent
//! from their event until the task that serves them re-arms them), and a
//! loop's wake eventfd.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub(crate) struct Epoll {
    fd: OwnedFd,
}

/// One ready descriptor: its token and whether it was readable or writable
/// (or hung up, which a read or write then finds).
pub(crate) type Event = libc::epoll_event;

impl Epoll {
    pub(crate) fn new() -> io::Result<Epoll> {
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
    pub(crate) fn add_one_shot(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let events = (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLONESHOT) as u32;
        self.control(libc::EPOLL_CTL_ADD, fd, token, events)
    }

    /// Watches `fd` again for one readable event after its last was served.
    pub(crate) fn rearm(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let events = (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLONESHOT) as u32;
        self.control(libc::EPOLL_CTL_MOD, fd, token, events)
    }

    /// Watches `fd` for one event when it can take more output.
    pub(crate) fn rearm_writable(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let events = (libc::EPOLLOUT | libc::EPOLLONESHOT) as u32;
        self.control(libc::EPOLL_CTL_MOD, fd, token, events)
    }

    /// Watches `fd` for every readable event, waking one waiter of the
    /// sets holding it.
    pub(crate) fn add_exclusive(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let events = (libc::EPOLLIN | libc::EPOLLEXCLUSIVE) as u32;
        self.control(libc::EPOLL_CTL_ADD, fd, token, events)
    }

    /// Watches `fd` level-triggered (a wake eventfd).
    pub(crate) fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        self.control(libc::EPOLL_CTL_ADD, fd, token, libc::EPOLLIN as u32)
    }

    pub(crate) fn delete(&self, fd: RawFd) {
        let _ = self.control(libc::EPOLL_CTL_DEL, fd, 0, 0);
    }

    /// Waits up to `timeout_ms` (-1: no limit) for events, filling
    /// `events`; how many came.
    pub(crate) fn wait(&self, events: &mut [Event], timeout_ms: i32) -> io::Result<usize> {
        // SAFETY: room for `events.len()` events.
        let count = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                events.as_mut_ptr(),
                events.len().min(i32::MAX as usize) as i32,
                timeout_ms,
            )
        };
        match count {
            count if count >= 0 => Ok(count as usize),
            _ => Err(io::Error::last_os_error()),
        }
    }
}
