//! Heartbeats between data nodes under the simulator
//! (docs/design/failures.md §2, design 0020): in a cluster of three,
//! where every node watches every other, a node paused past the detection
//! time is suspected, and nothing else is; it suspects nobody when it
//! runs again (what reached it meanwhile comes at once). Without a pause no node is ever suspected:
//! every run's end-of-run check asserts that (`Simulation::check_quiet`).

use signal::NodeId;
use sim::{ClusterShape, NoClient, NodeLimits, Simulation};

/// Default heartbeat settings (config): 250 ms, 4 missed.
const DETECTION_US: u64 = 4 * 250_000;

fn suspicions(simulation: &Simulation) -> Vec<(NodeId, Vec<NodeId>)> {
    simulation
        .memberships()
        .map(|membership| {
            let node = kernel::Block::address(membership).node;
            (node, membership.suspected().to_vec())
        })
        .collect()
}

#[test]
fn a_paused_node_is_suspected_and_nothing_else() {
    for seed in [1, 2, 3] {
        let mut simulation =
            Simulation::with_cluster(seed, ClusterShape::new(3, 1), NodeLimits::default(), false);
        simulation.start_nodes();
        let nodes = simulation.world().data_nodes().to_vec();
        let (first, middle, last) = (nodes[0], nodes[1], nodes[2]);
        // Running for a while suspects nobody.
        let now = simulation.world().now_us();
        simulation.run_until_us(&mut NoClient, now + 3 * DETECTION_US);
        assert!(
            suspicions(&simulation).iter().all(|(_, s)| s.is_empty()),
            "seed {seed}: {:?}",
            suspicions(&simulation)
        );
        // The middle node stops for twice the detection time: the others
        // suspect it (the first to agree it failed may spare the other
        // the suspicion), and suspect nothing else.
        simulation.pause_node(middle, 2 * DETECTION_US);
        let now = simulation.world().now_us();
        simulation.run_until_us(&mut NoClient, now + 4 * DETECTION_US);
        let suspicions = suspicions(&simulation);
        assert!(
            suspicions.iter().all(|(node, suspected)| {
                suspected.iter().all(|&s| s == middle) && (*node != middle || suspected.is_empty())
            }),
            "seed {seed}: {suspicions:?}"
        );
        assert!(
            suspicions
                .iter()
                .any(|(node, suspected)| [first, last].contains(node) && suspected == &[middle]),
            "seed {seed}: {suspicions:?}"
        );
    }
}

#[test]
fn a_pause_shorter_than_the_detection_time_suspects_nobody() {
    let mut simulation =
        Simulation::with_cluster(4, ClusterShape::new(2, 2), NodeLimits::default(), false);
    simulation.start_nodes();
    let nodes = simulation.world().data_nodes().to_vec();
    simulation.pause_node(nodes[1], DETECTION_US / 2);
    let now = simulation.world().now_us();
    simulation.run_until_us(&mut NoClient, now + 4 * DETECTION_US);
    assert!(
        suspicions(&simulation).iter().all(|(_, s)| s.is_empty()),
        "{:?}",
        suspicions(&simulation)
    );
}
