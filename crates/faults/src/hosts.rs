//! Separate network hosts on one machine (docs/design/0019-fault-harness.md,
//! decision 3): a network namespace per host, each with one veth pair
//! into a bridge and one address on 10.77.0.0/24, all inside a private
//! mount and network namespace of the calling thread, so nothing leaks
//! onto the machine and everything vanishes with the run.
//!
//! ```text
//!  private namespace of the run:  br0 (bridge)
//!                                  |-- veth-a <-> eth0 in host "a", 10.77.0.2
//!                                  |-- veth-b <-> eth0 in host "b", 10.77.0.3
//! ```
//!
//! Processes run in a host through `ip netns exec`; a thread enters one
//! with `setns`. Partitions are nftables rules in the receiving host's
//! input chain (one way: a drop of what arrives from a given address).
//! Needs root, iproute2 and nftables: [`Network::isolate`] says which is
//! missing.

use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::process::Command;

/// The run's private subnet: host `i` (from 0) is 10.77.0.(i + 2).
const SUBNET: [u8; 3] = [10, 77, 0];

/// One host: a network namespace with one address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    /// Its name (the namespace's is `faults-<name>`).
    pub name: String,
    pub address: Ipv4Addr,
}

impl Host {
    fn namespace(&self) -> String {
        format!("faults-{}", self.name)
    }
}

/// The hosts of a run.
#[derive(Debug)]
pub struct Network {
    hosts: Vec<Host>,
}

/// Runs a command to its end; its error output on failure.
fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|error| format!("cannot run {program}: {error}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

impl Network {
    /// Moves the calling thread (and every process it starts from now on)
    /// into a private mount and network namespace, with loopback up and
    /// a private `/run/netns` for the hosts' namespaces. Fails, saying
    /// why, without root, iproute2 or nftables.
    pub fn isolate() -> Result<(), String> {
        // SAFETY: geteuid(2) reads a process attribute.
        if unsafe { libc::geteuid() } != 0 {
            return Err("the fault harness needs root (network namespaces, nftables)".into());
        }
        for (program, package) in [("ip", "iproute2"), ("nft", "nftables")] {
            let found = Command::new(program)
                .arg("-V")
                .output()
                .is_ok_and(|output| output.status.success());
            if !found {
                return Err(format!(
                    "the fault harness needs `{program}` (apt-get install {package})"
                ));
            }
        }
        // SAFETY: unshare(2) changes the calling thread's namespaces only.
        if unsafe { libc::unshare(libc::CLONE_NEWNS | libc::CLONE_NEWNET) } != 0 {
            return Err(format!(
                "unshare(CLONE_NEWNS | CLONE_NEWNET): {}",
                std::io::Error::last_os_error()
            ));
        }
        // Mounts made from here on stay in this namespace.
        let root = c"/";
        // SAFETY: mount(2) with valid C strings and null data.
        let private = unsafe {
            libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )
        };
        if private != 0 {
            return Err(format!(
                "making mounts private: {}",
                std::io::Error::last_os_error()
            ));
        }
        std::fs::create_dir_all("/run/netns")
            .map_err(|error| format!("creating /run/netns: {error}"))?;
        run(
            "mount",
            &["-t", "tmpfs", "-o", "size=1m", "faults-netns", "/run/netns"],
        )?;
        run("ip", &["link", "set", "lo", "up"])
    }

    /// Makes a host per name, each on the bridge with its address. Call
    /// after [`Network::isolate`], on the same thread.
    pub fn new(names: &[&str]) -> Result<Network, String> {
        if names.len() > 200 {
            return Err(format!("{} hosts: at most 200", names.len()));
        }
        run("ip", &["link", "add", "br0", "type", "bridge"])?;
        run("ip", &["link", "set", "br0", "up"])?;
        let mut hosts = Vec::new();
        for (index, name) in names.iter().enumerate() {
            let host = Host {
                name: name.to_string(),
                address: Ipv4Addr::new(SUBNET[0], SUBNET[1], SUBNET[2], index as u8 + 2),
            };
            let namespace = host.namespace();
            let outer = format!("veth-{index}");
            run("ip", &["netns", "add", &namespace])?;
            run(
                "ip",
                &[
                    "link", "add", &outer, "type", "veth", "peer", "name", "eth0", "netns",
                    &namespace,
                ],
            )?;
            run("ip", &["link", "set", &outer, "master", "br0", "up"])?;
            let address = format!("{}/24", host.address);
            for args in [
                vec!["addr", "add", address.as_str(), "dev", "eth0"],
                vec!["link", "set", "eth0", "up"],
                vec!["link", "set", "lo", "up"],
            ] {
                let mut full = vec!["netns", "exec", namespace.as_str(), "ip"];
                full.extend(args);
                run("ip", &full)?;
            }
            hosts.push(host);
        }
        Ok(Network { hosts })
    }

    /// The hosts, in the order given.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    /// The host named `name`.
    pub fn host(&self, name: &str) -> Option<&Host> {
        self.hosts.iter().find(|host| host.name == name)
    }

    /// A command that runs `program` in `host`.
    pub fn command(&self, host: &Host, program: &str) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &host.namespace(), program]);
        command
    }

    /// Moves the calling thread into `host`'s network: its sockets from
    /// now on are that host's (a client running "on" the host).
    pub fn enter(&self, host: &Host) -> Result<(), String> {
        enter_path(&format!("/run/netns/{}", host.namespace()))
    }

    /// The name of `host`'s network namespace.
    pub fn namespace_of(&self, host: &Host) -> String {
        host.namespace()
    }

    /// Runs `nft` with `args` in `host`'s namespace.
    pub fn nft(&self, host: &Host, args: &[&str]) -> Result<(), String> {
        let namespace = host.namespace();
        let mut full = vec!["netns", "exec", namespace.as_str(), "nft"];
        full.extend_from_slice(args);
        run("ip", &full)
    }

    /// Drops everything `to` receives from `from` (one way).
    pub fn cut(&self, from: &Host, to: &Host) -> Result<(), String> {
        self.input_rule(to, &format!("ip saddr {} drop", from.address))
    }

    /// Drops `percent` of the packets `to` receives from `from`, at
    /// random (one way; TCP retransmits, so links slow and stall rather
    /// than break).
    pub fn lose(&self, from: &Host, to: &Host, percent: u8) -> Result<(), String> {
        self.input_rule(
            to,
            &format!(
                "ip saddr {} numgen random mod 100 < {} drop",
                from.address,
                percent.min(100)
            ),
        )
    }

    /// Adds `rule` to the input chain of `to`'s table of faults.
    fn input_rule(&self, to: &Host, rule: &str) -> Result<(), String> {
        let exec = |args: &[&str]| self.nft(to, args);
        // `add` of an existing table or chain changes nothing.
        exec(&["add", "table", "inet", "faults"])?;
        exec(&[
            "add",
            "chain",
            "inet",
            "faults",
            "input",
            "{ type filter hook input priority 0 ; }",
        ])?;
        let mut args = vec!["add", "rule", "inet", "faults", "input"];
        args.extend(rule.split(' '));
        exec(&args)
    }

    /// Removes every cut: each host receives from every other again.
    pub fn heal(&self) -> Result<(), String> {
        for host in &self.hosts {
            let namespace = host.namespace();
            // A host never cut has no table: nothing to remove.
            let _ = run(
                "ip",
                &[
                    "netns", "exec", &namespace, "nft", "delete", "table", "inet", "faults",
                ],
            );
        }
        Ok(())
    }
}

/// Moves the calling thread into the network namespace at `path` (a
/// file under `/run/netns`).
pub fn enter_path(path: &str) -> Result<(), String> {
    let file = std::fs::File::open(path).map_err(|error| format!("opening {path}: {error}"))?;
    // SAFETY: setns(2) on a namespace file descriptor we hold open.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(format!(
            "setns into {path}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}
