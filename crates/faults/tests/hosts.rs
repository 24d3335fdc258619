//! Separate hosts on one machine (`faults::hosts`): two network
//! namespaces on a bridge reach each other over TCP; a cut drops what
//! one receives from the other; healing restores it. Needs root,
//! iproute2 and nftables (CI installs them); without them the test fails
//! saying which is missing. Everything lives in a private namespace of
//! the test's thread and vanishes with it.

use faults::hosts::{Host, Network};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

/// Whether a thread on `from` can open a TCP connection to `to`'s
/// listener and read its greeting (within a second).
fn reaches(network: &Network, from: &Host, to: &Host) -> bool {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                network.enter(from).expect("entering the host");
                let address = SocketAddr::from((to.address, 9000));
                let Ok(mut stream) = TcpStream::connect_timeout(&address, Duration::from_secs(1))
                else {
                    return false;
                };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
                let mut greeting = [0u8; 2];
                stream.read_exact(&mut greeting).is_ok() && &greeting == b"hi"
            })
            .join()
            .expect("the client thread")
    })
}

#[test]
fn two_hosts_reach_each_other_and_a_cut_drops_traffic_until_healed() {
    std::thread::spawn(|| {
        Network::isolate().unwrap_or_else(|error| panic!("{error}"));
        let network = Network::new(&["a", "b"]).expect("two hosts");
        let (a, b) = (network.host("a").unwrap(), network.host("b").unwrap());
        assert_ne!(a.address, b.address);
        // A listener on b that greets every connection.
        let (ready, listening) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                network.enter(b).expect("entering b");
                let listener = TcpListener::bind((b.address, 9000)).expect("binding on b");
                listener.set_nonblocking(true).expect("nonblocking");
                ready.send(()).expect("ready");
                for _ in 0..400 {
                    match listener.accept() {
                        Ok((mut stream, _)) => {
                            let _ = stream.write_all(b"hi");
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
            });
            listening.recv().expect("the listener is up");
            assert!(reaches(&network, a, b), "a reaches b");
            network.cut(a, b).expect("the cut");
            assert!(!reaches(&network, a, b), "b drops what comes from a");
            network.heal().expect("healing");
            assert!(reaches(&network, a, b), "healed, a reaches b again");
        });
    })
    .join()
    .expect("the test's thread");
}
