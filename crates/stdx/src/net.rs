//! A TCP connect from a chosen local address. A data node's connections
//! to its peers and to mgmd leave from its own configured address, so a
//! firewall between hosts sees them as that node's; the standard library
//! has no call to bind before connecting.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd};

/// How [`connect_from`] waits.
#[derive(Clone, Copy, Debug)]
pub enum Connect {
    /// Returns at once, the connect under way (EINPROGRESS): the caller
    /// polls the socket for writability, as with a non-blocking connect.
    NonBlocking,
    /// Waits for the connection, at most this long (a blocking socket
    /// whose send timeout bounds the connect, as Linux does).
    Within(std::time::Duration),
}

/// Connects to `remote` from address `local` (the port is the system's
/// choice).
pub fn connect_from(local: Ipv4Addr, remote: SocketAddrV4, how: Connect) -> io::Result<TcpStream> {
    let address = |ip: Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    let length = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    let flags = match how {
        Connect::NonBlocking => libc::SOCK_NONBLOCK,
        Connect::Within(_) => 0,
    };
    // SAFETY: socket(2) takes no pointers; the descriptor it returns is
    // owned by `stream` from here on, which closes it on every path.
    let stream = unsafe {
        let fd = libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC | flags,
            0,
        );
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        TcpStream::from_raw_fd(fd)
    };
    if let Connect::Within(timeout) = how {
        stream.set_write_timeout(Some(timeout))?;
    }
    let fd = stream.as_raw_fd();
    let source = address(local, 0);
    // SAFETY: `source` is a valid sockaddr_in of `length` bytes that
    // outlives the call.
    if unsafe { libc::bind(fd, (&source as *const libc::sockaddr_in).cast(), length) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let target = address(*remote.ip(), remote.port());
    // SAFETY: as above, for `target`.
    if unsafe { libc::connect(fd, (&target as *const libc::sockaddr_in).cast(), length) } != 0 {
        let error = io::Error::last_os_error();
        let under_way =
            matches!(how, Connect::NonBlocking) && error.raw_os_error() == Some(libc::EINPROGRESS);
        if !under_way {
            return Err(error);
        }
    }
    Ok(stream)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    #[test]
    fn a_connection_leaves_from_the_chosen_address() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let std::net::SocketAddr::V4(remote) = listener.local_addr().expect("bound") else {
            unreachable!("bound to IPv4")
        };
        let local = Ipv4Addr::new(127, 0, 0, 7);
        let how = Connect::Within(std::time::Duration::from_secs(5));
        let mut stream = connect_from(local, remote, how).expect("connects");
        let (mut accepted, peer) = listener.accept().expect("accepts");
        assert_eq!(peer.ip(), std::net::IpAddr::V4(local));
        stream.write_all(b"x").expect("writes");
        let mut byte = [0u8; 1];
        accepted.read_exact(&mut byte).expect("reads");
        assert_eq!(&byte, b"x");
    }
}
