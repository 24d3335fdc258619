//! Faults a run injects into the simulated cluster (docs/design/testing.md
//! §5c), and schedules of them drawn from a seed: the simulator's nemesis.
//!
//! Every fault is one a real cluster meets, modelled as production sees
//! it. A crash loses what the node had not synced. TCP links between data
//! nodes never lose or reorder a signal while they stay up: a lossy or
//! partitioned path holds what is sent (retransmission) until it heals,
//! so a partition shorter than the heartbeats tolerate is a delay, and a
//! longer one ends in a node failure whose broken link loses what was
//! held; a link that breaks outright is [`Fault::CutLink`], and the
//! clients' links to a node that runs on break with
//! [`Fault::CutClients`]. A pause is a
//! SIGSTOP or a frozen VM. A fault point crashes the node at a named step
//! of a protocol, or stalls it there.

use crate::config::ClusterShape;
use crate::simulation::Simulation;
use kernel::faults::{FaultAction, FaultPoint};
use signal::NodeId;
use std::fmt;
use stdx::mix::XorShift;

/// One fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The node dies (kill -9, power loss).
    Kill(NodeId),
    /// The node stops running for a while (SIGSTOP, then SIGCONT).
    Pause {
        /// The node.
        node: NodeId,
        /// For how long, microseconds.
        duration_us: u64,
    },
    /// Nothing from `from` reaches `to` for a while (one-way loss on the
    /// path: TCP holds and retransmits).
    Partition {
        /// Sending side.
        from: NodeId,
        /// Receiving side.
        to: NodeId,
        /// Until it heals, microseconds.
        duration_us: u64,
    },
    /// Nothing any other data node sends reaches the node for a while
    /// (one-way loss into it), while what it sends arrives: a node that
    /// hears nobody (design 0019, finding 8).
    Deaf {
        /// The node.
        node: NodeId,
        /// Until it heals, microseconds.
        duration_us: u64,
    },
    /// Nothing crosses the link between two data nodes, either way, for
    /// a while; every other link works. Two at once, between node groups,
    /// make a majority ring.
    SilentLink {
        /// One end.
        a: NodeId,
        /// The other.
        b: NodeId,
        /// Until it heals, microseconds.
        duration_us: u64,
    },
    /// The node is cut off from every other data node, both ways, for a
    /// while.
    Isolate {
        /// The node.
        node: NodeId,
        /// Until it heals, microseconds.
        duration_us: u64,
    },
    /// The connection between two data nodes breaks (a reset, a cut
    /// cable, a send buffer overrun).
    CutLink(NodeId, NodeId),
    /// The node can no longer reach the arbitrator (mgmd).
    CutOffArbitrator(NodeId),
    /// Every API node's connection to the node breaks, the node running
    /// on (the clients go on through the other nodes).
    CutClients(NodeId),
    /// The node crashes (or stalls) when it next reaches the fault point.
    Arm(NodeId, FaultPoint, FaultAction),
    /// The node, stopped, starts again over its disk while the others run
    /// (the angel, or an operator): a node restart. Nothing if it runs,
    /// or if no other node serves (mgmd would tell it the cluster does not
    /// run: it would wait for a whole-cluster start, which a run's end
    /// checks do themselves).
    Restart(NodeId),
    /// As `Restart`, with its files deleted first (`--initial`).
    RestartInitial(NodeId),
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Fault::Kill(node) => write!(f, "kill node {node}"),
            Fault::Pause { node, duration_us } => {
                write!(f, "pause node {node} for {} ms", duration_us / 1000)
            }
            Fault::Partition {
                from,
                to,
                duration_us,
            } => write!(f, "partition {from} -> {to} for {} ms", duration_us / 1000),
            Fault::Isolate { node, duration_us } => {
                write!(f, "isolate node {node} for {} ms", duration_us / 1000)
            }
            Fault::Deaf { node, duration_us } => {
                write!(
                    f,
                    "nothing reaches node {node} for {} ms",
                    duration_us / 1000
                )
            }
            Fault::SilentLink { a, b, duration_us } => {
                write!(
                    f,
                    "silence the link {a} - {b} for {} ms",
                    duration_us / 1000
                )
            }
            Fault::CutLink(a, b) => write!(f, "break the link {a} - {b}"),
            Fault::CutOffArbitrator(node) => write!(f, "cut node {node} off from the arbitrator"),
            Fault::CutClients(node) => write!(f, "break the clients' links to node {node}"),
            Fault::Arm(node, point, action) => {
                write!(f, "arm {} on node {node} ({action})", point.name())
            }
            Fault::Restart(node) => write!(f, "restart node {node}"),
            Fault::RestartInitial(node) => write!(f, "restart node {node} --initial"),
        }
    }
}

impl Simulation {
    /// Injects `fault` now.
    pub fn inject(&mut self, fault: Fault) {
        let now_us = self.world().now_us();
        match fault {
            Fault::Kill(node) => self.kill_node(node),
            Fault::Pause { node, duration_us } => {
                // A node already stopped, or paused, is left as it is.
                if !self.world().is_stopped(node) && !self.world().is_paused(node) {
                    self.pause_node(node, duration_us.max(1));
                }
            }
            Fault::Partition {
                from,
                to,
                duration_us,
            } => self.world_mut().hold_link(from, to, now_us + duration_us),
            Fault::Isolate { node, duration_us } => {
                let peers: Vec<NodeId> = self.world().data_nodes().to_vec();
                for peer in peers.into_iter().filter(|&peer| peer != node) {
                    self.world_mut().hold_link(node, peer, now_us + duration_us);
                    self.world_mut().hold_link(peer, node, now_us + duration_us);
                }
            }
            Fault::Deaf { node, duration_us } => {
                let peers: Vec<NodeId> = self.world().data_nodes().to_vec();
                for peer in peers.into_iter().filter(|&peer| peer != node) {
                    self.world_mut().hold_link(peer, node, now_us + duration_us);
                }
            }
            Fault::SilentLink { a, b, duration_us } => {
                self.world_mut().hold_link(a, b, now_us + duration_us);
                self.world_mut().hold_link(b, a, now_us + duration_us);
            }
            Fault::CutLink(a, b) => self.cut_link(a, b),
            Fault::CutOffArbitrator(node) => self.cut_off_arbitrator(node),
            // The API nodes' side is the driver's (`harness::drive`).
            Fault::CutClients(_) => {}
            Fault::Arm(node, point, action) => self.world_mut().arm_fault_with(node, point, action),
            Fault::Restart(node) | Fault::RestartInitial(node) => {
                let world = self.world();
                let serving = world.data_nodes().iter().any(|&other| {
                    other != node && !world.is_stopped(other) && world.node_started(other)
                });
                if world.is_stopped(node) && serving {
                    self.restart_node_with(node, fault == Fault::RestartInitial(node));
                }
            }
        }
    }
}

/// Faults at simulated times, injected as the clock reaches them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Schedule {
    /// (time in microseconds, fault), ascending by time.
    pub faults: Vec<(u64, Fault)>,
}

impl Schedule {
    /// `fault` at `at_us`.
    pub fn add(&mut self, at_us: u64, fault: Fault) {
        let index = self.faults.partition_point(|&(time, _)| time <= at_us);
        self.faults.insert(index, (at_us, fault));
    }

    /// Injects every fault due by the simulation's clock; returns them.
    pub fn inject_due(&mut self, simulation: &mut Simulation) -> Vec<(u64, Fault)> {
        let now_us = simulation.world().now_us();
        let due = self.faults.partition_point(|&(time, _)| time <= now_us);
        let injected: Vec<(u64, Fault)> = self.faults.drain(..due).collect();
        for &(_, fault) in &injected {
            simulation.inject(fault);
        }
        injected
    }

    /// Between one and `most` faults at random times in
    /// `from_us..until_us`, for a cluster of `shape`, drawn from `random`.
    /// Pauses and partitions last from a few milliseconds (a delay the
    /// heartbeats absorb) to a few seconds (a node failure).
    pub fn random(
        random: &mut XorShift,
        shape: ClusterShape,
        from_us: u64,
        until_us: u64,
        most: u64,
    ) -> Schedule {
        assert!(until_us > from_us, "an empty window for faults");
        let nodes = shape.node_ids();
        let count = 1 + random.below(most.max(1));
        let mut schedule = Schedule::default();
        for _ in 0..count {
            let at_us = from_us + random.below(until_us - from_us);
            let node = nodes[random.below(nodes.len() as u64) as usize];
            let other = |random: &mut XorShift| -> Option<NodeId> {
                let others: Vec<NodeId> =
                    nodes.iter().copied().filter(|&peer| peer != node).collect();
                (!others.is_empty()).then(|| others[random.below(others.len() as u64) as usize])
            };
            // A duration the heartbeats absorb, or one they do not.
            let duration_us = if random.below(2) == 0 {
                1_000 + random.below(400_000)
            } else {
                1_200_000 + random.below(2_000_000)
            };
            let fault = match random.below(11) {
                9 => Fault::Deaf { node, duration_us },
                10 => match other(random) {
                    Some(peer) => {
                        // Half the time with a second silent link between
                        // the two other nodes: a majority ring.
                        let rest: Vec<NodeId> = nodes
                            .iter()
                            .copied()
                            .filter(|&other| other != node && other != peer)
                            .collect();
                        if rest.len() >= 2 && random.below(2) == 0 {
                            schedule.add(
                                at_us,
                                Fault::SilentLink {
                                    a: rest[0],
                                    b: rest[1],
                                    duration_us,
                                },
                            );
                        }
                        Fault::SilentLink {
                            a: node,
                            b: peer,
                            duration_us,
                        }
                    }
                    None => Fault::Pause { node, duration_us },
                },
                0 | 1 => Fault::Kill(node),
                8 => Fault::CutClients(node),
                2 => Fault::Pause { node, duration_us },
                3 => match other(random) {
                    Some(to) => Fault::Partition {
                        from: node,
                        to,
                        duration_us,
                    },
                    None => Fault::Kill(node),
                },
                4 => Fault::Isolate { node, duration_us },
                5 => match other(random) {
                    Some(peer) => Fault::CutLink(node, peer),
                    None => Fault::Pause { node, duration_us },
                },
                6 => Fault::CutOffArbitrator(node),
                _ => {
                    let points = FaultPoint::ALL;
                    let point = points[random.below(points.len() as u64) as usize];
                    // Mostly a crash; now and then a stall, shorter or
                    // longer than the heartbeats tolerate.
                    let action = match random.below(3) {
                        0 => FaultAction::Delay {
                            ms: 20 + random.below(2_500),
                        },
                        _ => FaultAction::Crash,
                    };
                    Fault::Arm(node, point, action)
                }
            };
            // The steps of agreeing a failure and of the take-overs run on
            // whichever node is president when a failure comes: arm them
            // on every node, and kill a node soon after, so that one of
            // them reaches its step.
            if let Fault::Arm(_, point, action) = fault {
                if point.runs_at_the_president() {
                    for &other in nodes.iter().filter(|&&other| other != node) {
                        schedule.add(at_us, Fault::Arm(other, point, action));
                    }
                    let victim = nodes[random.below(nodes.len() as u64) as usize];
                    schedule.add(at_us + 1_000 + random.below(200_000), Fault::Kill(victim));
                }
            }
            schedule.add(at_us, fault);
        }
        schedule
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .faults
            .iter()
            .map(|(at_us, fault)| format!("{} ms: {fault}", at_us / 1000))
            .collect();
        write!(f, "{}", parts.join("; "))
    }
}
