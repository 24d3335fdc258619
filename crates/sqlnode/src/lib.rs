//! sqlnode: `tessera sql`, a stateless SQL node speaking MySQL's
//! client/server protocol over the cluster (docs/design/0027-sql-node.md).
//!
//! Codemap:
//! - `server`: the listener, the shared epoll set and the workers;
//! - `pool`: how many workers run (a base, and more while some stall);
//! - `connection`: one connection's protocol (handshake, authentication,
//!   commands) over the `sql` engine's session;
//! - `encode`: results as OK, ERR and result-set packets.
//!
//! Architecture invariant: the wire codec is `mysql_protocol`'s (pure
//! code over bytes), the SQL is `sql`'s; this crate owns only sockets,
//! threads and the protocol's sequence of packets.

mod connection;
mod encode;
mod pool;
mod server;

pub use connection::MAX_PACKET;
pub use server::SqlServer;

use std::net::SocketAddr;
use std::sync::Arc;

/// Connects to the cluster through mgmd at `mgmd` and serves SQL on
/// `address` with `workers` threads (more while some stall on locks).
pub fn start(mgmd: &str, address: SocketAddr, workers: usize) -> Result<SqlServer, String> {
    let cluster = client::Cluster::connect(mgmd)
        .map_err(|error| format!("connecting to the cluster at {mgmd}: {error}"))?;
    // The cluster connection lives as long as the process: sessions'
    // transactions borrow it for 'static.
    let cluster: &'static client::Cluster = Box::leak(Box::new(cluster));
    SqlServer::start(address, workers, |server| sql::Engine::new(cluster, server))
        .map_err(|error| format!("starting the SQL node on {address}: {error}"))
}

/// The engine type, for those that build a server themselves.
pub type Engine = Arc<sql::Engine>;
