//! Agreeing on node failures under the simulator (docs/design/failures.md
//! §2-§4): a node killed (its links break) or paused past the detection
//! time (its heartbeats stop) is agreed failed by every survivor, which
//! install the same membership under the same id; the president's death
//! moves the presidency to the next lowest id; a paused node finds itself
//! declared failed when it runs again and shuts down; a side that may not
//! continue by the survival rule shuts down, saying why. These runs carry
//! no transactions: failover with a client at work is `failover.rs`.

use signal::{NodeId, NodeSet};
use sim::{ClusterShape, NoClient, NodeLimits, Simulation};
use std::collections::BTreeSet;

/// Default heartbeat settings (config): 250 ms, 4 missed.
const DETECTION_US: u64 = 4 * 250_000;

fn started(seed: u64, data_nodes: u16, replicas: u16) -> Simulation {
    let shape = ClusterShape::new(data_nodes, replicas);
    let mut simulation = Simulation::with_cluster(seed, shape, NodeLimits::default(), false);
    simulation.start_nodes();
    simulation
}

fn run_for(simulation: &mut Simulation, duration_us: u64) {
    let until = simulation.world().now_us() + duration_us;
    simulation.run_until_us(&mut NoClient, until);
}

fn running(simulation: &Simulation) -> Vec<NodeId> {
    let stopped = simulation.world().stopped();
    simulation
        .world()
        .data_nodes()
        .iter()
        .copied()
        .filter(|node| !stopped.contains_key(node))
        .collect()
}

/// Every running node installed the same membership, of exactly the
/// running nodes; returns its id.
fn agreed(simulation: &Simulation, seed: u64) -> u32 {
    let alive = running(simulation);
    let expected = NodeSet::of(alive.iter().copied());
    let memberships: Vec<(NodeId, (u32, NodeSet))> = alive
        .iter()
        .map(|&node| (node, simulation.world().membership_of(node)))
        .collect();
    let id = memberships[0].1 .0;
    for (node, (membership_id, live)) in &memberships {
        assert_eq!(
            (*membership_id, *live),
            (id, expected),
            "seed {seed}: node {node} installed another membership: {memberships:?}"
        );
    }
    id
}

fn stop_reason(simulation: &Simulation, node: NodeId) -> String {
    simulation
        .world()
        .stopped()
        .get(&node)
        .cloned()
        .unwrap_or_else(|| panic!("node {node} did not stop"))
}

#[test]
fn a_killed_node_is_agreed_failed_by_every_survivor() {
    for seed in 1..=6 {
        let mut simulation = started(seed, 4, 2);
        let nodes = simulation.world().data_nodes().to_vec();
        assert_eq!(agreed(&simulation, seed), 1);
        // Any node, the president (the lowest id) included.
        let victim = nodes[seed as usize % nodes.len()];
        run_for(&mut simulation, seed * 37_000);
        simulation.kill_node(victim);
        run_for(&mut simulation, 3 * DETECTION_US);
        assert_eq!(running(&simulation).len(), 3, "seed {seed}");
        assert!(agreed(&simulation, seed) >= 2, "seed {seed}");
        let president = simulation
            .memberships()
            .map(|membership| membership.president())
            .collect::<Vec<_>>();
        let expected = *running(&simulation).first().expect("survivors");
        assert!(
            running(&simulation).iter().all(|&node| simulation
                .world()
                .membership_of(node)
                .1
                .first()
                == Some(expected)),
            "seed {seed}: the lowest survivor is president: {president:?}"
        );
    }
}

#[test]
fn a_paused_node_is_declared_failed_and_shuts_down_when_it_runs_again() {
    for seed in 1..=4 {
        let mut simulation = started(seed, 4, 2);
        let nodes = simulation.world().data_nodes().to_vec();
        let victim = nodes[(seed as usize + 1) % nodes.len()];
        simulation.pause_node(victim, 3 * DETECTION_US);
        run_for(&mut simulation, 2 * DETECTION_US);
        // Declared failed by the others while it is still paused.
        let survivors: Vec<NodeId> = nodes.iter().copied().filter(|&n| n != victim).collect();
        for &node in &survivors {
            let (id, live) = simulation.world().membership_of(node);
            assert!(
                id >= 2 && live == NodeSet::of(survivors.iter().copied()),
                "seed {seed}: node {node} has membership {id} {live}"
            );
        }
        run_for(&mut simulation, 2 * DETECTION_US);
        let reason = stop_reason(&simulation, victim);
        assert!(
            reason.contains("has no node of node group"),
            "seed {seed}: node {victim}: {reason}"
        );
        assert_eq!(running(&simulation), survivors, "seed {seed}");
        agreed(&simulation, seed);
    }
}

#[test]
fn one_node_of_each_group_may_fail_but_not_a_whole_group() {
    for seed in 1..=3 {
        let mut simulation = started(seed, 4, 2);
        let nodes = simulation.world().data_nodes().to_vec();
        // Groups are consecutive: {nodes[0], nodes[1]}, {nodes[2], nodes[3]}.
        simulation.kill_node(nodes[1]);
        run_for(&mut simulation, 2 * DETECTION_US);
        let first = agreed(&simulation, seed);
        assert!(first >= 2, "seed {seed}");
        simulation.kill_node(nodes[2]);
        run_for(&mut simulation, 2 * DETECTION_US);
        // Ids rise at every change (a refused or widened round skips some).
        assert!(agreed(&simulation, seed) > first, "seed {seed}");
        assert_eq!(running(&simulation), vec![nodes[0], nodes[3]]);
        // The last node of the first group: the rest has none of it.
        simulation.kill_node(nodes[0]);
        run_for(&mut simulation, 2 * DETECTION_US);
        assert!(running(&simulation).is_empty(), "seed {seed}");
        let reason = stop_reason(&simulation, nodes[3]);
        assert!(
            reason.contains(&format!("lost nodes {{{}}}", nodes[0]))
                && reason.contains("has no node of node group 0"),
            "seed {seed}: {reason}"
        );
    }
}

#[test]
fn a_survivor_of_two_continues_once_the_arbitrator_lets_it() {
    for seed in 1..=10 {
        let mut simulation = started(seed, 2, 2);
        let nodes = simulation.world().data_nodes().to_vec();
        let victim = nodes[seed as usize % 2];
        let survivor = nodes[1 - seed as usize % 2];
        run_for(&mut simulation, (seed * 7_919) % 300_000);
        simulation.kill_node(victim);
        run_for(&mut simulation, 2 * DETECTION_US);
        assert_eq!(running(&simulation), vec![survivor], "seed {seed}");
        assert_eq!(agreed(&simulation, seed), 2, "seed {seed}");
        assert_eq!(
            simulation.world().arbitrator().decisions(),
            &[(survivor, 1, NodeSet::of([survivor]), true)],
            "seed {seed}"
        );
    }
}

#[test]
fn a_survivor_of_two_that_cannot_reach_the_arbitrator_shuts_down() {
    let mut simulation = started(5, 2, 2);
    let nodes = simulation.world().data_nodes().to_vec();
    simulation.cut_off_arbitrator(nodes[0]);
    simulation.kill_node(nodes[1]);
    // Detection, then the arbitration timeout (3 s by default).
    run_for(&mut simulation, 2 * DETECTION_US + 4_000_000);
    assert!(running(&simulation).is_empty());
    let reason = stop_reason(&simulation, nodes[0]);
    assert!(
        reason.contains("has 1 of the 2 nodes") && reason.contains("only the arbitrator"),
        "{reason}"
    );
}

#[test]
fn a_split_of_two_leaves_exactly_one_side_serving() {
    let mut winners = BTreeSet::new();
    for seed in 1..=20 {
        let mut simulation = started(seed, 2, 2);
        let nodes = simulation.world().data_nodes().to_vec();
        run_for(&mut simulation, (seed * 7_919) % 300_000);
        // Both alive, the link between them cut: each side asks.
        simulation.cut_link(nodes[0], nodes[1]);
        run_for(&mut simulation, 2 * DETECTION_US);
        let alive = running(&simulation);
        assert_eq!(alive.len(), 1, "seed {seed}: exactly one side serves");
        let winner = alive[0];
        let loser = nodes.iter().copied().find(|&n| n != winner).expect("two");
        assert_eq!(agreed(&simulation, seed), 2, "seed {seed}");
        let reason = stop_reason(&simulation, loser);
        assert!(
            reason.contains("only the arbitrator"),
            "seed {seed}: {reason}"
        );
        let decisions = simulation.world().arbitrator().decisions();
        assert_eq!(
            decisions.iter().filter(|decision| decision.3).count(),
            1,
            "seed {seed}: one grant: {decisions:?}"
        );
        winners.insert(winner);
    }
    assert_eq!(
        winners.len(),
        2,
        "either side may win, depending on the seed"
    );
}

#[test]
fn three_replicas_carry_on_by_majority_after_a_pause_of_one() {
    let mut simulation = started(6, 3, 3);
    let nodes = simulation.world().data_nodes().to_vec();
    // The president stops: its watcher detects it; the next lowest id
    // runs the protocol.
    simulation.pause_node(nodes[0], 4 * DETECTION_US);
    run_for(&mut simulation, 2 * DETECTION_US);
    for &node in &nodes[1..] {
        assert_eq!(
            simulation.world().membership_of(node),
            (2, NodeSet::of(nodes[1..].iter().copied())),
            "node {node}"
        );
    }
    run_for(&mut simulation, 4 * DETECTION_US);
    let reason = stop_reason(&simulation, nodes[0]);
    assert!(reason.contains("1 of the 3 nodes, a minority"), "{reason}");
    assert_eq!(running(&simulation), nodes[1..]);
}

#[test]
fn a_second_failure_during_the_protocol_is_agreed_too() {
    // Two nodes of different groups die a few hundred microseconds apart,
    // so the second dies while the first is being agreed: at any step of
    // it, depending on the seed. If the first failure was committed
    // before the second was known, the survivors judge the second against
    // three nodes and continue (each holds its group's last live node);
    // if both are agreed in one round, the survivors are two of four with
    // no group whole, which the arbitrator lets continue. Either way they
    // agree and carry on.
    let mut arbitrated = 0;
    for seed in 1..=40 {
        let mut simulation = started(seed, 4, 2);
        let nodes = simulation.world().data_nodes().to_vec();
        let first = nodes[seed as usize % 2];
        let second = nodes[2 + (seed as usize / 2) % 2];
        simulation.kill_node(first);
        run_for(&mut simulation, 100 + seed * 25);
        simulation.kill_node(second);
        run_for(&mut simulation, 2 * DETECTION_US);
        let alive = running(&simulation);
        assert_eq!(alive.len(), 2, "seed {seed}");
        let decisions = simulation.world().arbitrator().decisions();
        if decisions.is_empty() {
            assert!(agreed(&simulation, seed) >= 3, "seed {seed}: two changes");
        } else {
            assert!(
                decisions.iter().all(|decision| decision.3),
                "seed {seed}: {decisions:?}"
            );
            agreed(&simulation, seed);
            arbitrated += 1;
        }
    }
    assert!(
        arbitrated > 0 && arbitrated < 40,
        "both paths happen across the seeds ({arbitrated} of 40 went to the arbitrator)"
    );
}

#[test]
fn any_single_kill_or_pause_at_any_time_ends_in_one_agreed_membership() {
    for seed in 1..=60 {
        let mut simulation = started(seed, 4, 2);
        let nodes = simulation.world().data_nodes().to_vec();
        let victim = nodes[(seed as usize * 7) % nodes.len()];
        run_for(&mut simulation, (seed * 7_919) % 400_000);
        if seed % 2 == 0 {
            simulation.kill_node(victim);
        } else {
            simulation.pause_node(victim, 2 * DETECTION_US + (seed * 13_007) % DETECTION_US);
        }
        run_for(&mut simulation, 6 * DETECTION_US);
        let survivors: Vec<NodeId> = nodes.iter().copied().filter(|&n| n != victim).collect();
        assert_eq!(running(&simulation), survivors, "seed {seed}");
        assert!(agreed(&simulation, seed) >= 2, "seed {seed}");
    }
}

/// The president dies in the middle of agreeing a failure (fault points
/// FAILURE_AFTER_PREPARE and FAILURE_AFTER_COMMIT: its prepares, or its
/// commits, went out to every member and nothing more): the next lowest
/// node becomes president, agrees both failures, and every survivor
/// installs the same membership. Two groups of two: node 5 dies, then
/// president 2 at the point; {3, 4} hold one node of each group, half of
/// {2, 3, 4, 5}, so the arbitrator lets them go on.
#[test]
fn the_president_dying_while_it_agrees_a_failure_leaves_one_membership() {
    use sim::{FaultAction, FaultPoint};
    for point in [
        FaultPoint::FailureAfterPrepare,
        FaultPoint::FailureAfterCommit,
    ] {
        for seed in 1..=4 {
            let mut simulation = started(seed, 4, 2);
            simulation
                .world_mut()
                .arm_fault_with(NodeId(2), point, FaultAction::Crash);
            run_for(&mut simulation, seed * 41_000);
            simulation.kill_node(NodeId(5));
            run_for(&mut simulation, 4 * DETECTION_US);
            let fired = simulation.world().fired_faults().to_vec();
            assert_eq!(
                fired.len(),
                1,
                "seed {seed}: {point:?} fired once: {fired:?}"
            );
            assert_eq!(
                running(&simulation),
                vec![NodeId(3), NodeId(4)],
                "seed {seed}: {point:?}: {:?}",
                simulation.world().stopped()
            );
            let id = agreed(&simulation, seed);
            assert!(id >= 2, "seed {seed}: {point:?}: membership {id}");
        }
    }
}

/// A president that stalls at a step of agreeing a failure for less than
/// the heartbeats tolerate finishes it when it runs again: one failure,
/// one new membership, nobody else lost.
#[test]
fn a_president_stalled_while_it_agrees_a_failure_finishes_it() {
    use sim::{FaultAction, FaultPoint};
    for seed in 1..=4 {
        let mut simulation = started(seed, 4, 2);
        let stall = FaultAction::Delay { ms: 300 };
        simulation
            .world_mut()
            .arm_fault_with(NodeId(2), FaultPoint::FailureAfterPrepare, stall);
        run_for(&mut simulation, seed * 41_000);
        simulation.kill_node(NodeId(5));
        run_for(&mut simulation, 4 * DETECTION_US);
        assert_eq!(simulation.world().fired_faults().len(), 1, "seed {seed}");
        assert_eq!(
            running(&simulation),
            vec![NodeId(2), NodeId(3), NodeId(4)],
            "seed {seed}: {:?}",
            simulation.world().stopped()
        );
        assert_eq!(agreed(&simulation, seed), 2, "seed {seed}");
    }
}
