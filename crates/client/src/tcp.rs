//! The production transport: one TCP connection per data node, with a
//! receive thread that reads into the connection's [`Inbound`], or read
//! by whoever polls a [`Receiver`] (`polled`).
//!
//! ```text
//!  NodeConnection::send ──> TcpLink::write (write timeout) ──> socket
//!  socket ──> receive thread: Inbound::read_from, Inbound::deliver
//! ```

use crate::environment::{Inbound, Link, Transport};
use crate::error::ClientError;
use crate::polled::Receiver;
use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Opens TCP connections, retrying refused ones (data nodes may still be
/// starting) every `retry_interval` until the deadline.
pub(crate) struct TcpTransport {
    pub retry_interval: Duration,
    /// A node that stops reading must not block senders forever: a write
    /// that cannot finish in time ends the connection.
    pub write_timeout: Duration,
    /// Connections are read by this receiver's poller instead of a
    /// thread each.
    pub receiver: Option<std::sync::Arc<Receiver>>,
}

impl Transport for TcpTransport {
    fn open(
        &self,
        addr: &str,
        deadline: Instant,
        inbound: Inbound,
    ) -> Result<Box<dyn Link>, ClientError> {
        let stream = connect_with_retry(addr, deadline, self.retry_interval)?;
        let connect_error = |source| ClientError::Connect {
            addr: addr.to_string(),
            source,
        };
        // Latency of small batches matters more than packet count.
        stream.set_nodelay(true).map_err(connect_error)?;
        stream
            .set_write_timeout(Some(self.write_timeout))
            .map_err(connect_error)?;
        if let Some(receiver) = &self.receiver {
            return receiver.register(stream, inbound).map_err(connect_error);
        }
        let receive_stream = stream.try_clone().map_err(connect_error)?;
        let receive_thread = std::thread::Builder::new()
            .name(format!("tessera-recv-{addr}"))
            .spawn(move || receive_loop(receive_stream, inbound))
            .map_err(connect_error)?;
        Ok(Box::new(TcpLink {
            stream,
            receive_thread: Mutex::new(Some(receive_thread)),
        }))
    }
}

/// The send side of one TCP connection; owns its receive thread.
struct TcpLink {
    stream: TcpStream,
    receive_thread: Mutex<Option<JoinHandle<()>>>,
}

impl Link for TcpLink {
    fn write(&self, bytes: &[u8]) -> std::io::Result<()> {
        (&self.stream).write_all(bytes)
    }

    fn shutdown(&self) {
        // Wakes the receive thread out of its blocking read.
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

impl Drop for TcpLink {
    fn drop(&mut self) {
        self.shutdown();
        let thread = self
            .receive_thread
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

fn connect_with_retry(
    addr: &str,
    deadline: Instant,
    retry_interval: Duration,
) -> Result<TcpStream, ClientError> {
    loop {
        match TcpStream::connect(addr) {
            Ok(stream) => return Ok(stream),
            Err(error) => {
                let retryable = matches!(
                    error.kind(),
                    std::io::ErrorKind::ConnectionRefused
                        | std::io::ErrorKind::ConnectionReset
                        | std::io::ErrorKind::TimedOut
                );
                if !retryable || Instant::now() + retry_interval > deadline {
                    return Err(ClientError::Connect {
                        addr: addr.to_string(),
                        source: error,
                    });
                }
                std::thread::sleep(retry_interval);
            }
        }
    }
}

/// The receive thread: frames in, signals to their waiters, until the
/// stream ends or carries something invalid; then every waiter fails.
fn receive_loop(mut stream: TcpStream, mut inbound: Inbound) {
    let reason = loop {
        match inbound.read_from(&mut stream) {
            Ok(0) => break "connection closed by the data node".to_string(),
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => break format!("read failed: {error}"),
        }
        if let Err(reason) = inbound.deliver(true) {
            break reason;
        }
    };
    let _ = stream.shutdown(Shutdown::Both);
    inbound.close(reason);
}
