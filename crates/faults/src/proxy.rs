//! Delay, jitter and slow links, which this kernel cannot make without
//! netem (docs/design/0019-fault-harness.md, decision 3): a small TCP
//! proxy on a data node's host, in the path of every connection other
//! data nodes make to it. An nftables rule in the host's namespace
//! redirects what arrives for the node's port from those hosts to the
//! proxy, which connects to the node on its own address and copies
//! bytes both ways, each chunk held until its delivery time: now plus
//! the link's delay plus a random part of its jitter, and after the
//! chunk before it (order is kept), and no sooner than a limited
//! bandwidth lets it through. With no delay set, bytes pass at once.
//!
//! ```text
//!  node 3 --tcp 10.77.0.4:11861--> [host of node 2: nft redirect to :11871]
//!           proxy :11871 --(delay)--> 10.77.0.3:11861 node 2
//! ```
//!
//! Each connection is two readers and two writers (threads): a reader
//! stamps each chunk with its delivery time, its writer sleeps until
//! then. A side that ends or fails ends the connection on both sides.

use crate::hosts::{Host, Network};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How a proxied link behaves now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Link {
    pub delay: Duration,
    /// Up to this much more, drawn per chunk.
    pub jitter: Duration,
    /// Bytes per second each way; `None`: unlimited.
    pub bandwidth: Option<u64>,
}

/// A proxy in front of one data node.
pub struct Proxy {
    link: Arc<Mutex<Link>>,
    stop: Arc<AtomicBool>,
    listen: SocketAddr,
    acceptor: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    /// On `host`: redirects TCP for `port` arriving from `sources` to
    /// `listen_port`, where the proxy forwards to `host`'s own
    /// `port`. Connections made before this are not affected: start it
    /// before the node's peers connect.
    pub fn start(
        network: &Network,
        host: &Host,
        port: u16,
        listen_port: u16,
        sources: &[&Host],
    ) -> Result<Proxy, String> {
        let addresses: Vec<String> = sources
            .iter()
            .map(|source| source.address.to_string())
            .collect();
        let rule = format!(
            "ip saddr {{ {} }} tcp dport {port} redirect to :{listen_port}",
            addresses.join(", ")
        );
        for args in [
            vec!["add", "table", "ip", "faults_proxy"],
            vec![
                "add",
                "chain",
                "ip",
                "faults_proxy",
                "prerouting",
                "{ type nat hook prerouting priority -100 ; }",
            ],
        ] {
            network.nft(host, &args)?;
        }
        let mut args = vec!["add", "rule", "ip", "faults_proxy", "prerouting"];
        args.extend(rule.split(' '));
        network.nft(host, &args)?;
        let link = Arc::new(Mutex::new(Link::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let target = SocketAddr::from((host.address, port));
        let listen = SocketAddr::from((host.address, listen_port));
        let (ready_send, ready) = mpsc::channel();
        let acceptor = {
            let (network_host, link, stop) = (host.clone(), Arc::clone(&link), Arc::clone(&stop));
            let path = format!("/run/netns/{}", network.namespace_of(host));
            std::thread::Builder::new()
                .name(format!("proxy-{}", network_host.name))
                .spawn(move || {
                    let listener = crate::hosts::enter_path(&path).and_then(|()| {
                        TcpListener::bind(("0.0.0.0", listen_port))
                            .map_err(|error| format!("proxy bind :{listen_port}: {error}"))
                    });
                    let listener = match listener {
                        Ok(listener) => {
                            let _ = ready_send.send(Ok(()));
                            listener
                        }
                        Err(error) => {
                            let _ = ready_send.send(Err(error));
                            return;
                        }
                    };
                    accept(&listener, target, &link, &stop);
                })
                .map_err(|error| format!("proxy thread: {error}"))?
        };
        ready
            .recv()
            .map_err(|_| "the proxy thread ended".to_string())??;
        Ok(Proxy {
            link,
            stop,
            listen,
            acceptor: Some(acceptor),
        })
    }

    /// Sets the link's behaviour for every connection, at once.
    pub fn set(&self, link: Link) {
        *self
            .link
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = link;
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the acceptor (from this namespace the address may not be
        // reachable; the acceptor also polls the flag).
        let _ = TcpStream::connect_timeout(&self.listen, Duration::from_millis(50));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

fn accept(
    listener: &TcpListener,
    target: SocketAddr,
    link: &Arc<Mutex<Link>>,
    stop: &Arc<AtomicBool>,
) {
    if listener.set_nonblocking(true).is_err() {
        return;
    }
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((inbound, _)) => {
                seed = seed.wrapping_add(0x9E37_79B9);
                let _ = inbound.set_nonblocking(false);
                let Ok(outbound) = TcpStream::connect(target) else {
                    let _ = inbound.shutdown(Shutdown::Both);
                    continue;
                };
                let _ = inbound.set_nodelay(true);
                let _ = outbound.set_nodelay(true);
                for (from, to, salt) in [
                    (inbound.try_clone(), outbound.try_clone(), 1),
                    (outbound.try_clone(), inbound.try_clone(), 2),
                ] {
                    if let (Ok(from), Ok(to)) = (from, to) {
                        pump(from, to, Arc::clone(link), seed ^ salt);
                    }
                }
            }
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Copies `from` to `to`, each chunk delayed as the link says.
fn pump(mut from: TcpStream, mut to: TcpStream, link: Arc<Mutex<Link>>, seed: u64) {
    let (send, receive) = mpsc::channel::<(Instant, Vec<u8>)>();
    let ends = (from.try_clone(), to.try_clone());
    let _ = std::thread::Builder::new()
        .name("proxy-read".into())
        .spawn(move || {
            let mut random = stdx::mix::XorShift::new(seed);
            let mut last = Instant::now();
            let mut buffer = vec![0u8; 64 * 1024];
            loop {
                let read = match from.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(read) => read,
                };
                let now = Instant::now();
                let link = *link
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let jitter = match link.jitter.as_micros() as u64 {
                    0 => Duration::ZERO,
                    micros => Duration::from_micros(random.below(micros)),
                };
                let mut at = (now + link.delay + jitter).max(last);
                if let Some(rate) = link.bandwidth.filter(|&rate| rate > 0) {
                    at = at.max(last + Duration::from_secs_f64(read as f64 / rate as f64));
                }
                last = at;
                if send.send((at, buffer[..read].to_vec())).is_err() {
                    break;
                }
            }
            // The writer drains what was read, then ends its side.
        });
    let _ = std::thread::Builder::new()
        .name("proxy-write".into())
        .spawn(move || {
            for (at, bytes) in receive {
                let now = Instant::now();
                if at > now {
                    std::thread::sleep(at - now);
                }
                if to.write_all(&bytes).is_err() {
                    break;
                }
            }
            // One side ended or failed: end the connection on both.
            if let (Ok(from), Ok(to)) = ends {
                let _ = from.shutdown(Shutdown::Both);
                let _ = to.shutdown(Shutdown::Both);
            }
        });
}
