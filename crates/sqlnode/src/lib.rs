//! sqlnode: `tessera sql`, a stateless SQL node speaking MySQL's
//! client/server protocol over the cluster (docs/design/0027-sql-node.md).
//!
//! Codemap:
//! - `server`: the listener, the table of connections, starting and
//!   stopping the event loops;
//! - `event_loop`: one loop thread: its epoll set, serving each ready
//!   connection in a task, idle connections closed;
//! - `task`: connection tasks as stackful coroutines whose waits for the
//!   cluster suspend them (`client::cooperative`), their wakes and
//!   deadlines;
//! - `connection`: one connection's protocol (handshake, authentication,
//!   commands) over the `sql` engine's session;
//! - `encode`: results as OK, ERR and result-set packets;
//! - `tls`: TLS on the SQL port: the certificate, and records to and
//!   from a connection's plaintext.
//!
//! Architecture invariant: the wire codec is `mysql_protocol`'s (pure
//! code over bytes), the SQL is `sql`'s; this crate owns only sockets,
//! threads and the protocol's sequence of packets.

mod connection;
mod encode;
mod event_loop;
mod server;
mod task;
mod tls;

pub use connection::MAX_PACKET;
pub use server::{ServerSecurity, SqlServer};
pub use tls::TlsFiles;

use std::net::SocketAddr;
use std::sync::Arc;

/// How `tessera sql` runs.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Event-loop threads (`None`: one per core).
    pub loops: Option<usize>,
    /// The certificate and key TLS is offered with (`None`: no TLS).
    pub tls: Option<TlsFiles>,
    /// Logins must come over TLS (MySQL's require_secure_transport).
    pub require_secure_transport: bool,
}

/// Connects to the cluster through mgmd at `mgmd` and serves SQL on
/// `address` as `options` say.
pub fn start(mgmd: &str, address: SocketAddr, options: Options) -> Result<SqlServer, String> {
    let tls = options.tls.as_ref().map(tls::server_config).transpose()?;
    if options.require_secure_transport && tls.is_none() {
        return Err(
            "--require-secure-transport needs TLS: give --tls-cert and --tls-key".to_string(),
        );
    }
    let security = ServerSecurity {
        tls,
        require_secure: options.require_secure_transport,
    };
    let loops = options.loops.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    // The first loop reads the data nodes' replies itself (a thread stands
    // in until it starts, and while it is away from its poll).
    let receiver = client::Receiver::new()
        .map_err(|error| format!("starting the cluster connection's receiver: {error}"))?;
    let options = client::ConnectOptions {
        receiver: Some(Arc::clone(&receiver)),
        ..Default::default()
    };
    let cluster = client::Cluster::connect_with(mgmd, options)
        .map_err(|error| format!("connecting to the cluster at {mgmd}: {error}"))?;
    // The cluster connection lives as long as the process: sessions'
    // transactions borrow it for 'static.
    let cluster: &'static client::Cluster = Box::leak(Box::new(cluster));
    SqlServer::start(address, loops, Some(receiver), security, |server| {
        sql::Engine::new(cluster, server)
    })
    .map_err(|error| format!("starting the SQL node on {address}: {error}"))
}

/// The engine type, for those that build a server themselves.
pub type Engine = Arc<sql::Engine>;
