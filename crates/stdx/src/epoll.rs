//! Linux's epoll set and eventfd, through libc: what an event loop waits
//! on (a set several threads may wait on at once, which mio's `Poll` is
//! not) and what wakes it from another thread.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// One ready descriptor: its token (`u64`) and its events.
pub type Event = libc::epoll_event;

/// An empty event, to fill a buffer for [`Epoll::wait`].
pub const NO_EVENT: Event = libc::epoll_event { events: 0, u64: 0 };

/// An epoll set.
pub struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    pub fn new() -> io::Result<Epoll> {
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

    /// The set's own descriptor (readable while something in it is
    /// ready: a set can be watched from another set).
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
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

    /// Watches `fd` for `events` (libc's EPOLL* flags) under `token`.
    pub fn add(&self, fd: RawFd, token: u64, events: u32) -> io::Result<()> {
        self.control(libc::EPOLL_CTL_ADD, fd, token, events)
    }

    /// Watches `fd` for `events` instead (one-shot descriptors re-armed).
    pub fn modify(&self, fd: RawFd, token: u64, events: u32) -> io::Result<()> {
        self.control(libc::EPOLL_CTL_MOD, fd, token, events)
    }

    /// Stops watching `fd` (one not watched is no error).
    pub fn delete(&self, fd: RawFd) {
        let _ = self.control(libc::EPOLL_CTL_DEL, fd, 0, 0);
    }

    /// Waits up to `timeout_ms` (-1: no limit) for events, filling
    /// `events`; how many came.
    pub fn wait(&self, events: &mut [Event], timeout_ms: i32) -> io::Result<usize> {
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

/// An eventfd: written by one thread to wake another's epoll wait.
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    /// Non-blocking, so that draining an unwritten one never waits.
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: eventfd has no memory preconditions; its fd is owned here.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor nobody else owns.
        Ok(EventFd {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Makes it readable (wakes whoever waits on it).
    pub fn signal(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live buffer to the eventfd.
        unsafe {
            libc::write(self.fd.as_raw_fd(), one.as_ptr().cast(), one.len());
        }
    }

    /// Makes it unreadable again after it woke its waiter.
    pub fn drain(&self) {
        let mut count = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a live buffer.
        unsafe {
            libc::read(self.fd.as_raw_fd(), count.as_mut_ptr().cast(), count.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signalled_eventfd_wakes_the_set_until_drained() {
        let epoll = Epoll::new().unwrap();
        let event = EventFd::new().unwrap();
        epoll.add(event.fd(), 7, libc::EPOLLIN as u32).unwrap();
        let mut events = [NO_EVENT; 4];
        assert_eq!(epoll.wait(&mut events, 0).unwrap(), 0);
        event.signal();
        assert_eq!(epoll.wait(&mut events, 0).unwrap(), 1);
        assert_eq!({ events[0].u64 }, 7);
        event.drain();
        assert_eq!(epoll.wait(&mut events, 0).unwrap(), 0);
    }
}
