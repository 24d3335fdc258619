//! Nemeses: the faults a run inflicts, drawn from its seed
//! (docs/design/0019-fault-harness.md, decision 4). A schedule names the
//! kinds it draws from; each fault is drawn (kind, target, duration)
//! from the seed, applied, lifted, and logged with its times as a
//! [`Window`]. Between two faults the cluster heals: every data node
//! started again (see `run`).
//!
//! The detection time is a data node's heartbeat interval times the
//! heartbeats it may miss (250 ms x 4 by default): a short pause stays
//! under it (the node is never declared dead), a long one goes over it
//! (the others exclude the node, which finds itself out when it wakes,
//! shuts down, and its angel restarts it). A slow link is set on the
//! proxy in front of a data node (`proxy`), which the long schedule
//! puts on every data node's host.

use crate::cluster::NodeView;
use crate::hosts::Host;
use stdx::mix::XorShift;

/// Which faults a run draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Kills, pauses and partitions: the CI run.
    Short,
    /// Every kind: also mgmd killed, rolling restarts and whole-cluster
    /// kills with their restarts.
    Long,
}

impl Schedule {
    pub fn parse(text: &str) -> Result<Schedule, String> {
        match text {
            "short" => Ok(Schedule::Short),
            "long" => Ok(Schedule::Long),
            other => Err(format!("no schedule {other:?}: choose short or long")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Schedule::Short => "short",
            Schedule::Long => "long",
        }
    }

    /// The kinds of fault it deals, each once a round (a kind listed
    /// twice, twice).
    pub fn kinds(self) -> &'static [Kind] {
        match self {
            Schedule::Short => &[Kind::Kill, Kind::Pause, Kind::Partition],
            Schedule::Long => &[
                Kind::Kill,
                Kind::Pause,
                Kind::Partition,
                Kind::Partition,
                Kind::KillMgmd,
                Kind::RollingRestart,
                Kind::ClusterKill,
                Kind::SlowLink,
            ],
        }
    }

    /// The pause between the cluster healed and the next fault: time for
    /// the clients to show full throughput again.
    pub fn gap_ms(self, random: &mut XorShift) -> u64 {
        match self {
            Schedule::Short => 1_500 + random.below(2_000),
            Schedule::Long => 3_000 + random.below(4_000),
        }
    }
}

/// A kind of fault (the key of the run's counts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Kill,
    Pause,
    Partition,
    KillMgmd,
    RollingRestart,
    ClusterKill,
    SlowLink,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Kill => "kill",
            Kind::Pause => "pause",
            Kind::Partition => "partition",
            Kind::KillMgmd => "kill-mgmd",
            Kind::RollingRestart => "rolling-restart",
            Kind::ClusterKill => "cluster-kill",
            Kind::SlowLink => "slow-link",
        }
    }
}

/// A pause shorter than the detection time (the node is never declared
/// dead) and one longer (it is).
pub const SHORT_PAUSE_MS: u64 = 500;
pub const LONG_PAUSE_MS: u64 = 3_000;

/// One fault, drawn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL a data node; its angel restarts it.
    Kill { node: u16 },
    /// SIGSTOP a data node, SIGCONT after `millis`.
    Pause { node: u16, millis: u64 },
    /// Network rules for `millis`, then healed.
    Partition { shape: Shape, millis: u64 },
    /// SIGKILL mgmd, started again after `millis`.
    KillMgmd { millis: u64 },
    /// `all restart`: every data node restarted, one at a time.
    RollingRestart,
    /// SIGKILL every data node at once; their angels restart the cluster
    /// from disk.
    ClusterKill,
    /// Every link from the other data nodes to `node` (through its
    /// proxy) delayed, jittered and narrowed, for `millis`.
    SlowLink {
        node: u16,
        link: crate::proxy::Link,
        millis: u64,
    },
}

/// A partition's shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// One data node cut off from every other host.
    Isolate(u16),
    /// The two nodes of a node group cut off from each other.
    SplitGroup(u16, u16),
    /// One node of each group on either side; mgmd (the arbitrator)
    /// reachable from the first side only.
    HalvesWithArbitrator(Vec<u16>, Vec<u16>),
    /// The same halves, mgmd reachable from both (it picks one).
    Halves(Vec<u16>, Vec<u16>),
    /// The data nodes in a ring, each reaching its two neighbours only
    /// (a majority each, no two alike).
    MajorityRing(Vec<u16>),
    /// What a node receives from the other data nodes loses `percent`
    /// of its packets (one way).
    Loss { node: u16, percent: u8 },
}

impl Fault {
    /// Draws a fault of `kind` against `nodes` (as mgmd shows them); the
    /// schedule chose the kind.
    pub fn draw(kind: Kind, random: &mut XorShift, nodes: &[NodeView]) -> Fault {
        let pick = |random: &mut XorShift| nodes[random.below(nodes.len() as u64) as usize].id;
        match kind {
            Kind::Kill => Fault::Kill { node: pick(random) },
            Kind::Pause => Fault::Pause {
                node: pick(random),
                millis: if random.below(2) == 0 {
                    SHORT_PAUSE_MS
                } else {
                    LONG_PAUSE_MS
                },
            },
            Kind::Partition => Fault::Partition {
                shape: Shape::draw(random, nodes),
                millis: 3_000 + random.below(5_000),
            },
            Kind::KillMgmd => Fault::KillMgmd {
                millis: 2_000 + random.below(4_000),
            },
            Kind::RollingRestart => Fault::RollingRestart,
            Kind::ClusterKill => Fault::ClusterKill,
            Kind::SlowLink => Fault::SlowLink {
                node: pick(random),
                link: crate::proxy::Link {
                    delay: std::time::Duration::from_millis(20 + random.below(280)),
                    jitter: std::time::Duration::from_millis(random.below(100)),
                    bandwidth: (random.below(2) == 0).then(|| 200_000 + random.below(2_000_000)),
                },
                millis: 3_000 + random.below(7_000),
            },
        }
    }

    pub fn kind(&self) -> Kind {
        match self {
            Fault::Kill { .. } => Kind::Kill,
            Fault::Pause { .. } => Kind::Pause,
            Fault::Partition { .. } => Kind::Partition,
            Fault::KillMgmd { .. } => Kind::KillMgmd,
            Fault::RollingRestart => Kind::RollingRestart,
            Fault::ClusterKill => Kind::ClusterKill,
            Fault::SlowLink { .. } => Kind::SlowLink,
        }
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Kill { node } => write!(f, "kill -9 data node {node} (its angel restarts it)"),
            Fault::Pause { node, millis } => {
                write!(
                    f,
                    "pause data node {node} for {millis} ms (SIGSTOP, SIGCONT)"
                )
            }
            Fault::Partition { shape, millis } => write!(f, "partition for {millis} ms: {shape}"),
            Fault::KillMgmd { millis } => {
                write!(f, "kill -9 mgmd, started again after {millis} ms")
            }
            Fault::RollingRestart => write!(f, "rolling restart (all restart)"),
            Fault::ClusterKill => {
                write!(
                    f,
                    "kill -9 every data node (the angels restart the cluster)"
                )
            }
            Fault::SlowLink { node, link, millis } => write!(
                f,
                "slow links into data node {node} for {millis} ms: delay {} ms, jitter {} ms, \
                 {}",
                link.delay.as_millis(),
                link.jitter.as_millis(),
                link.bandwidth
                    .map_or("unlimited bandwidth".to_string(), |rate| format!(
                        "{rate} bytes/s"
                    ))
            ),
        }
    }
}

/// How many partition shapes both schedules draw from: isolate, split a
/// group, the two kinds of halves, the majority ring, one-way loss.
pub const SHAPES: u64 = 6;

impl Shape {
    fn draw(random: &mut XorShift, nodes: &[NodeView]) -> Shape {
        let mut groups: std::collections::BTreeMap<u64, Vec<u16>> = Default::default();
        for node in nodes {
            groups.entry(node.group).or_default().push(node.id);
        }
        // Each side of a split takes one node of each group, drawn.
        let mut first = Vec::new();
        let mut second = Vec::new();
        for members in groups.values() {
            let chosen = random.below(members.len() as u64) as usize;
            for (index, &id) in members.iter().enumerate() {
                if index == chosen {
                    first.push(id);
                } else {
                    second.push(id);
                }
            }
        }
        let ids: Vec<u16> = nodes.iter().map(|node| node.id).collect();
        match random.below(SHAPES) {
            0 => Shape::Isolate(ids[random.below(ids.len() as u64) as usize]),
            1 => {
                let members: Vec<&Vec<u16>> = groups
                    .values()
                    .filter(|members| members.len() >= 2)
                    .collect();
                match members.get(random.below(members.len().max(1) as u64) as usize) {
                    Some(members) => Shape::SplitGroup(members[0], members[1]),
                    None => Shape::Isolate(ids[0]),
                }
            }
            2 => Shape::HalvesWithArbitrator(first, second),
            3 => Shape::Halves(first, second),
            4 => {
                let mut ring = ids;
                for index in (1..ring.len()).rev() {
                    ring.swap(index, random.below(index as u64 + 1) as usize);
                }
                Shape::MajorityRing(ring)
            }
            _ => Shape::Loss {
                node: ids[random.below(ids.len() as u64) as usize],
                percent: 20 + random.below(41) as u8,
            },
        }
    }

    /// The one-way cuts (from, to) it makes, over `hosts`: each data
    /// node's host by id, mgmd's, and every client host. Loss is not a
    /// cut: see [`Shape::losses`].
    pub fn cuts<'h>(
        &self,
        node_host: &dyn Fn(u16) -> &'h Host,
        mgmd: &'h Host,
        clients: &[&'h Host],
        all_nodes: &[u16],
    ) -> Vec<(&'h Host, &'h Host)> {
        let mut cuts = Vec::new();
        let mut both = |a: &'h Host, b: &'h Host| {
            cuts.push((a, b));
            cuts.push((b, a));
        };
        match self {
            Shape::Isolate(node) => {
                let isolated = node_host(*node);
                for &other in all_nodes.iter().filter(|&&other| other != *node) {
                    both(isolated, node_host(other));
                }
                both(isolated, mgmd);
                for &client in clients {
                    both(isolated, client);
                }
            }
            Shape::SplitGroup(a, b) => both(node_host(*a), node_host(*b)),
            Shape::HalvesWithArbitrator(first, second) | Shape::Halves(first, second) => {
                for &a in first {
                    for &b in second {
                        both(node_host(a), node_host(b));
                    }
                }
                if matches!(self, Shape::HalvesWithArbitrator(..)) {
                    for &b in second {
                        both(node_host(b), mgmd);
                    }
                }
            }
            Shape::MajorityRing(ring) => {
                let n = ring.len();
                for i in 0..n {
                    for j in i + 1..n {
                        let neighbours = j == i + 1 || (i == 0 && j == n - 1);
                        if !neighbours {
                            both(node_host(ring[i]), node_host(ring[j]));
                        }
                    }
                }
            }
            Shape::Loss { .. } => {}
        }
        cuts
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shape::Isolate(node) => write!(f, "data node {node} isolated from every host"),
            Shape::SplitGroup(a, b) => write!(f, "node group split: {a} | {b}"),
            Shape::HalvesWithArbitrator(first, second) => {
                write!(f, "halves {first:?} + mgmd | {second:?}")
            }
            Shape::Halves(first, second) => {
                write!(f, "halves {first:?} | {second:?}, mgmd reachable from both")
            }
            Shape::MajorityRing(ring) => write!(f, "majority ring {ring:?}"),
            Shape::Loss { node, percent } => write!(
                f,
                "data node {node} loses {percent}% of what the other data nodes send it"
            ),
        }
    }
}

/// A fault applied: when it began, when it was lifted, and when every
/// data node was started again after it (ns since the run began).
#[derive(Clone, Debug)]
pub struct Window {
    pub fault: Fault,
    pub start: u64,
    pub end: u64,
    /// `None`: the cluster did not heal in time.
    pub healed: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes() -> Vec<NodeView> {
        [(2, 0), (3, 0), (4, 1), (5, 1)]
            .into_iter()
            .map(|(id, group)| NodeView {
                id,
                group,
                state: "started".into(),
                pid: None,
            })
            .collect()
    }

    #[test]
    fn a_seed_draws_the_same_faults_and_halves_take_one_node_per_group() {
        let draw = |seed| {
            let mut random = XorShift::new(seed);
            (0..50)
                .map(|_| {
                    let kinds = Schedule::Long.kinds();
                    let kind = kinds[random.below(kinds.len() as u64) as usize];
                    Fault::draw(kind, &mut random, &nodes())
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        for fault in draw(7).into_iter().chain(draw(9)) {
            if let Fault::Partition {
                shape: Shape::Halves(first, second) | Shape::HalvesWithArbitrator(first, second),
                ..
            } = fault
            {
                let group = |id: u16| u16::from(id >= 4);
                assert_eq!(first.len(), 2);
                assert_ne!(group(first[0]), group(first[1]), "{first:?}");
                assert_ne!(group(second[0]), group(second[1]), "{second:?}");
            }
        }
    }

    #[test]
    fn a_partition_is_drawn_in_every_shape() {
        let mut random = XorShift::new(3);
        let mut shapes = std::collections::HashSet::new();
        for _ in 0..400 {
            if let Fault::Partition { shape, .. } =
                Fault::draw(Kind::Partition, &mut random, &nodes())
            {
                shapes.insert(std::mem::discriminant(&shape));
            }
        }
        assert_eq!(shapes.len() as u64, SHAPES);
    }

    #[test]
    fn a_majority_ring_leaves_each_node_its_two_neighbours() {
        let hosts: Vec<Host> = (0..5)
            .map(|index| Host {
                name: format!("h{index}"),
                address: std::net::Ipv4Addr::new(10, 0, 0, index),
            })
            .collect();
        let node_host = |id: u16| &hosts[id as usize - 2];
        let ring = Shape::MajorityRing(vec![2, 4, 3, 5]);
        let cuts = ring.cuts(&node_host, &hosts[4], &[], &[2, 3, 4, 5]);
        let cut = |a: u16, b: u16| cuts.contains(&(node_host(a), node_host(b)));
        // 2-4-3-5-2: the diagonals 2-3 and 4-5 are cut, both ways.
        assert!(cut(2, 3) && cut(3, 2) && cut(4, 5) && cut(5, 4));
        assert!(!cut(2, 4) && !cut(4, 3) && !cut(3, 5) && !cut(5, 2));
        assert_eq!(cuts.len(), 4);
    }
}
