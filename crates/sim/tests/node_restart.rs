//! A node restart's admission under the simulator
//! (docs/design/0018-node-restart.md): a killed node started again asks
//! the running cluster to admit it, and every member installs the same
//! membership with it as a starting member; the president stays the
//! president (a restarted lower id does not take the master roles); a
//! starting member holds no data that counts for the survival rule, so
//! its death changes nothing and it cannot keep a side alive on its own.

use signal::{NodeId, NodeSet};
use sim::{ClusterShape, NoClient, NodeLimits, Simulation};

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

fn set(ids: &[u16]) -> NodeSet {
    NodeSet::of(ids.iter().map(|&id| NodeId(id)))
}

/// Every running node's membership block agrees on (id, live, starting,
/// president); returns them.
fn agreed(simulation: &Simulation, seed: u64) -> (u32, NodeSet, NodeSet, NodeId) {
    let world = simulation.world();
    let views: Vec<(NodeId, (u32, NodeSet, NodeSet, NodeId))> = simulation
        .memberships()
        .map(|membership| {
            let node = kernel::Block::address(membership).node;
            let (id, live) = membership.membership();
            (
                node,
                (id, live, membership.starting(), membership.president()),
            )
        })
        .filter(|(node, _)| !world.is_stopped(*node))
        .collect();
    let first = views[0].1;
    for (node, view) in &views {
        assert_eq!(*view, first, "seed {seed}: node {node} differs: {views:?}");
    }
    first
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
fn a_restarted_node_is_admitted_as_a_starting_member_and_the_president_stays() {
    for seed in 1..=4 {
        let mut simulation = started(seed, 2, 2);
        // The simulator's data nodes are 2, 3 and 4.
        // Node 2, the president, dies; node 3 goes on (the arbitrator
        // grants it) and becomes president.
        run_for(&mut simulation, seed * 41_000);
        simulation.kill_node(NodeId(2));
        run_for(&mut simulation, 3 * DETECTION_US);
        let (id, live, starting, president) = agreed(&simulation, seed);
        assert_eq!(
            (live, starting, president),
            (set(&[3]), set(&[]), NodeId(3))
        );

        simulation.restart_node(NodeId(2));
        run_for(&mut simulation, 3 * DETECTION_US);
        let (joined, live, starting, president) = agreed(&simulation, seed);
        assert!(joined > id, "seed {seed}: a new membership id");
        assert_eq!(
            (live, starting, president),
            (set(&[2, 3]), set(&[2]), NodeId(3)),
            "seed {seed}: node 2 rejoins as a starting member; node 3 stays president"
        );
        assert!(simulation.world().split_brain().is_none());
        // It ran its phases: restored its own data, took the master's
        // schema, joined the GCI protocol.
        let restarted = simulation
            .memberships()
            .find(|membership| kernel::Block::address(*membership).node == NodeId(2))
            .expect("node 2's membership");
        assert_eq!(restarted.state(), membership::start::StartState::Admitted);
        let latest = simulation.world().latest_gci_of(NodeId(3));
        assert!(
            simulation.world().latest_gci_of(NodeId(2)) > signal::Gci(0)
                && simulation.world().latest_gci_of(NodeId(2)) <= latest,
            "seed {seed}: node 2 follows the GCIs"
        );
        // The dih master did not move.
        for dih in simulation.dihs() {
            assert!(
                dih.is_master() == (kernel::Block::address(dih).node == NodeId(3)),
                "seed {seed}: only node 3's dih is the master"
            );
        }

        // A starting node holds no data that counts: when node 3 dies,
        // node 2 alone lacks the node group and shuts down.
        simulation.kill_node(NodeId(3));
        run_for(&mut simulation, 3 * DETECTION_US);
        let reason = stop_reason(&simulation, NodeId(2));
        assert!(
            reason.contains("has no node of node group"),
            "seed {seed}: {reason}"
        );
    }
}

#[test]
fn a_starting_member_that_dies_changes_nothing_and_may_rejoin_again() {
    for seed in 1..=4 {
        let mut simulation = started(seed, 3, 3);
        simulation.kill_node(NodeId(4));
        run_for(&mut simulation, 3 * DETECTION_US);
        simulation.restart_node(NodeId(4));
        run_for(&mut simulation, 3 * DETECTION_US);
        let (_, live, starting, president) = agreed(&simulation, seed);
        assert_eq!(
            (live, starting, president),
            (set(&[2, 3, 4]), set(&[4]), NodeId(2))
        );

        // It dies again while starting: the others carry on, holding the
        // node group whole.
        simulation.kill_node(NodeId(4));
        run_for(&mut simulation, 3 * DETECTION_US);
        let (_, live, starting, _) = agreed(&simulation, seed);
        assert_eq!((live, starting), (set(&[2, 3]), set(&[])), "seed {seed}");

        // And is admitted again.
        simulation.restart_node(NodeId(4));
        run_for(&mut simulation, 3 * DETECTION_US);
        let (_, live, starting, _) = agreed(&simulation, seed);
        assert_eq!(
            (live, starting),
            (set(&[2, 3, 4]), set(&[4])),
            "seed {seed}"
        );

        // The president dies: of the two nodes that hold data one is
        // left, exactly half, so node 3 asks the arbitrator, which grants
        // it; node 3 is the president now (the lowest id not starting).
        simulation.kill_node(NodeId(2));
        run_for(&mut simulation, 3 * DETECTION_US);
        let (_, live, starting, president) = agreed(&simulation, seed);
        assert_eq!(
            (live, starting, president),
            (set(&[3, 4]), set(&[4]), NodeId(3)),
            "seed {seed}"
        );
    }
}

/// Inserts `k` -> "value k" in its own transaction, retrying temporary
/// errors and settling an unknown outcome by retrying (a duplicate key
/// then means the first attempt committed).
fn insert_settled(cluster: &client::Cluster, table: &std::sync::Arc<client::Table>, k: u64) {
    use client::{ClientError, Commit, Value};
    let mut retried = false;
    for _ in 0..50 {
        let mut transaction = cluster.transaction();
        let v = Value::from(format!("value {k}").as_str());
        let result = transaction
            .insert(table, &[("k", Value::UInt(k)), ("v", v)])
            .and_then(|_| transaction.execute(Commit::Yes));
        match result {
            Ok(_) => return,
            Err(error) if error.code() == Some(client::ErrorCode::DuplicateKey) && retried => {
                return
            }
            Err(error)
                if error.is_temporary() || matches!(error, ClientError::OutcomeUnknown { .. }) =>
            {
                retried = true;
            }
            Err(error) => panic!("insert {k}: {error:?}"),
        }
    }
    panic!("insert {k} never committed");
}

#[test]
fn a_restarting_node_takes_the_schema_and_schema_changes_wait_for_it() {
    use sim::harness::{create_kv_table, kv_table_definition, Harness};
    use std::time::Duration;
    for seed in 1..=3 {
        let victim = NodeId(3);
        let (refusal, _, agreement) = Harness::new(seed)
            .nodes(2, 2)
            .kill_at(victim, 1_000_000)
            .restart_at(victim, 4_000_000)
            .run_then(
                move |cluster, context| {
                    let table = create_kv_table(cluster, "kept");
                    for k in 0..20 {
                        insert_settled(cluster, &table, k);
                    }
                    // Past the kill, the failure's agreement, the restart
                    // and the restarting node's phases.
                    context.sleep(Duration::from_millis(8_000));
                    for k in 20..40 {
                        insert_settled(cluster, &table, k);
                    }
                    cluster
                        .create_table(&kv_table_definition("later"))
                        .map_err(|error| error.code())
                },
                |simulation| simulation.schema_agreement(&[NodeId(2), NodeId(3)]),
            );
        assert_eq!(
            refusal,
            Err(Some(client::ErrorCode::NodeRestartInProgress)),
            "seed {seed}: a create waits while a node restarts"
        );
        let tables = agreement.unwrap_or_else(|error| panic!("seed {seed}: {error}"));
        assert_eq!(tables.len(), 1, "seed {seed}: {tables:?}");
    }
}

/// Writes `k` -> `value` (insert or update) in its own transaction,
/// retrying as `insert_settled` does.
fn upsert_settled(
    cluster: &client::Cluster,
    table: &std::sync::Arc<client::Table>,
    k: u64,
    value: &str,
) {
    use client::{ClientError, Commit, Value};
    for _ in 0..50 {
        let mut transaction = cluster.transaction();
        let row = [("k", Value::UInt(k)), ("v", Value::from(value))];
        let result = transaction
            .write(table, &row)
            .and_then(|_| transaction.execute(Commit::Yes));
        match result {
            Ok(_) => return,
            Err(error)
                if error.is_temporary() || matches!(error, ClientError::OutcomeUnknown { .. }) => {}
            Err(error) => panic!("write {k}: {error:?}"),
        }
    }
    panic!("write {k} never committed");
}

/// Deletes `k` in its own transaction; a missing row is fine (an earlier
/// attempt with an unknown outcome committed).
fn delete_settled(cluster: &client::Cluster, table: &std::sync::Arc<client::Table>, k: u64) {
    use client::{ClientError, Commit, Value};
    for _ in 0..50 {
        let mut transaction = cluster.transaction();
        let result = transaction
            .delete(table, &[Value::UInt(k)])
            .and_then(|_| transaction.execute(Commit::Yes));
        match result {
            Ok(_) => return,
            Err(error) if error.code() == Some(client::ErrorCode::NoSuchRow) => return,
            Err(error)
                if error.is_temporary() || matches!(error, ClientError::OutcomeUnknown { .. }) => {}
            Err(error) => panic!("delete {k}: {error:?}"),
        }
    }
    panic!("delete {k} never committed");
}

/// Loads a table on 2 data nodes, kills `victim`, changes rows while it
/// is down (updates, deletes, inserts), starts it again (`initial`: its
/// files deleted) while writes go on, and returns whether the replicas
/// agree once quiet, and the restarted node's start state.
fn copy_run(
    seed: u64,
    victim: NodeId,
    initial: bool,
) -> (Result<(), String>, Option<membership::start::StartState>) {
    use sim::harness::{create_kv_table, Harness};
    use std::time::Duration;
    let harness = Harness::new(seed).nodes(2, 2).kill_at(victim, 2_000_000);
    let harness = match initial {
        true => harness.restart_initial_at(victim, 5_000_000),
        false => harness.restart_at(victim, 5_000_000),
    };
    let (table_id, _, inspected) = harness.run_then(
        move |cluster, context| {
            let table = create_kv_table(cluster, "copied");
            for k in 0..200 {
                insert_settled(cluster, &table, k);
            }
            // Past the kill: the node misses updates, deletes and
            // inserts.
            context.sleep(Duration::from_millis(2_500));
            for k in 0..200 {
                match k % 4 {
                    0 => upsert_settled(cluster, &table, k, "changed while down"),
                    1 => delete_settled(cluster, &table, k),
                    _ => {}
                }
            }
            for k in 200..260 {
                insert_settled(cluster, &table, k);
            }
            // Writes go on while the node restarts and copies (deleted
            // keys come back, too).
            for round in 0..40u64 {
                let k = (round * 7) % 260;
                upsert_settled(cluster, &table, k, &format!("round {round}"));
                if round % 5 == 0 {
                    delete_settled(cluster, &table, (round * 11) % 260);
                }
                context.sleep(Duration::from_millis(100));
            }
            // Quiet, then look.
            context.sleep(Duration::from_millis(2_000));
            table.def().id
        },
        move |simulation| {
            let state = simulation
                .memberships()
                .find(|membership| kernel::Block::address(*membership).node == victim)
                .map(|membership| membership.state());
            (simulation.replicas_agree(0), state)
        },
    );
    assert_eq!(table_id, 0, "seed {seed}: the table the check looks at");
    inspected
}

#[test]
fn a_restarted_node_copies_what_changed_and_its_replicas_equal_the_primarys() {
    for seed in 1..=4 {
        // Node 3, and node 2 (the president: node 3 takes the master
        // roles and keeps them).
        for victim in [NodeId(3), NodeId(2)] {
            let (agreement, state) = copy_run(seed, victim, false);
            assert_eq!(
                state,
                Some(membership::start::StartState::Admitted),
                "seed {seed}: node {victim} ran its copy"
            );
            agreement.unwrap_or_else(|error| panic!("seed {seed}, node {victim}: {error}"));
        }
    }
}

#[test]
fn an_initial_node_restart_copies_every_row() {
    for seed in 1..=4 {
        let (agreement, state) = copy_run(seed, NodeId(3), true);
        assert_eq!(
            state,
            Some(membership::start::StartState::Admitted),
            "seed {seed}"
        );
        agreement.unwrap_or_else(|error| panic!("seed {seed}: {error}"));
    }
}
