//! The client against a fake cluster of several data nodes on loopback:
//! connecting to every node, routing by key hint to the primary's node,
//! schema requests to the president, map versions and stale maps, and the
//! async API with many transactions in flight from one thread.

use client::{
    AsyncSession, ClientError, Cluster, ColumnDef, ColumnType, Commit, Completion, ConnectOptions,
    ErrorCode, LockMode, OpId, Table, TableDef, TransactionState, Value,
};
use fakenode::{FakeCluster, FakeDataNode, FakeDataNodeOptions, ReceivedSignal};
use signal::signals::OperationKind;
use signal::{NodeId, TransactionId};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn accounts(partitions: u32) -> TableDef {
    let column = |name: &str, column_type, nullable| ColumnDef {
        name: name.into(),
        column_type,
        nullable,
    };
    TableDef {
        indexes: Vec::new(),
        revision: 0,
        id: 0,
        version: 0,
        name: "accounts".into(),
        partitions,
        primary_key: vec![0],
        columns: vec![
            column("id", ColumnType::Int { unsigned: true }, false),
            column("balance", ColumnType::BigInt { unsigned: false }, false),
        ],
        partition_key: Vec::new(),
    }
}

struct Setup {
    fake: FakeCluster,
    _mgmd: mgmd::MgmdHandle,
    mgmd_addr: String,
}

fn setup(nodes: &[u16]) -> Setup {
    let fake = FakeCluster::start(
        FakeDataNodeOptions {
            tc_instances: 2,
            ..Default::default()
        },
        nodes,
    )
    .expect("fake nodes listen");
    let mgmd = fake.start_mgmd().expect("mgmd starts");
    let mgmd_addr = mgmd.local_addr().to_string();
    Setup {
        fake,
        _mgmd: mgmd,
        mgmd_addr,
    }
}

impl Setup {
    fn connect(&self) -> Cluster {
        Cluster::connect(&self.mgmd_addr).expect("connects to every node")
    }

    fn clear_received(&self) {
        for node in self.fake.nodes() {
            node.clear_received();
        }
    }

    /// (node, signal) for every signal named `name` received by any node.
    fn received(&self, name: &str) -> Vec<(u16, ReceivedSignal)> {
        self.fake
            .nodes()
            .iter()
            .flat_map(|node| {
                node.received()
                    .into_iter()
                    .filter(|signal| signal.name == name)
                    .map(move |signal| (node.node_id(), signal))
            })
            .collect()
    }

    /// The nodes that received TCKEYREQs of `transaction`.
    fn nodes_of(&self, transaction: TransactionId) -> Vec<u16> {
        let mut nodes: Vec<u16> = self
            .received("TcKeyReq")
            .into_iter()
            .filter(|(_, signal)| signal.transaction_id == Some(transaction))
            .map(|(node, _)| node)
            .collect();
        nodes.dedup();
        nodes
    }

    fn primary_of(&self, table: &Table, key: u32) -> u16 {
        let mut bytes = Vec::new();
        table
            .encode_key(&[Value::from(key)], &mut bytes)
            .expect("key");
        self.fake
            .primary_of("accounts", &bytes)
            .expect("table exists")
    }
}

fn insert(cluster: &Cluster, table: &Arc<Table>, key: u32) -> TransactionId {
    let mut transaction = cluster
        .transaction_with_hint(table, &[Value::from(key)])
        .expect("hint");
    transaction
        .insert(
            table,
            &[
                ("id", Value::from(key)),
                ("balance", Value::from(key as i64)),
            ],
        )
        .expect("row");
    transaction.execute(Commit::Yes).expect("insert commits");
    transaction.id()
}

#[test]
fn the_client_connects_to_every_node_and_hints_route_to_the_primary() {
    let setup = setup(&[2, 3]);
    let cluster = setup.connect();
    assert_eq!(cluster.data_nodes(), [NodeId(2), NodeId(3)]);
    assert_eq!(cluster.tc_instances_on(NodeId(3)), Some(2));
    for node in setup.fake.nodes() {
        let registrations = node
            .received()
            .iter()
            .filter(|signal| signal.name == "ApiRegReq")
            .count();
        assert_eq!(registrations, 1, "node {} registered once", node.node_id());
    }
    cluster.create_table(&accounts(4)).expect("create");
    let table = cluster.table("accounts").expect("table");
    assert!(table.map().is_some(), "the map comes with the definition");
    setup.clear_received();
    let mut primaries = std::collections::BTreeMap::<u16, u32>::new();
    for key in 0..64u32 {
        let primary = setup.primary_of(&table, key);
        *primaries.entry(primary).or_default() += 1;
        assert_eq!(
            cluster
                .primary_node(&table, &[Value::from(key)])
                .expect("key"),
            Some(NodeId(primary))
        );
        let transaction = insert(&cluster, &table, key);
        assert_eq!(setup.nodes_of(transaction), [primary], "key {key}");
    }
    assert_eq!(
        primaries.len(),
        2,
        "both nodes hold primaries: {primaries:?}"
    );
    // Every tc instance of both nodes got work: the hint picks the tc
    // numbered like the ldm instance of the key's partition, and each
    // node's primaries are on both of its ldm instances.
    let mut tcs: Vec<(u16, u16)> = setup
        .received("TcKeyReq")
        .into_iter()
        .map(|(node, signal)| (node, signal.to_instance))
        .collect();
    tcs.sort_unstable();
    tcs.dedup();
    assert_eq!(tcs, [(2, 0), (2, 1), (3, 0), (3, 1)]);
    assert_eq!(setup.fake.nodes()[0].row_count("accounts"), 64);
}

/// Rows keyed (warehouse, id), placed by the warehouse alone (`PARTITION
/// BY KEY (warehouse)`).
fn by_warehouse(partitions: u32) -> TableDef {
    let column = |name: &str| ColumnDef {
        name: name.into(),
        column_type: ColumnType::Int { unsigned: true },
        nullable: false,
    };
    TableDef {
        indexes: Vec::new(),
        revision: 0,
        id: 0,
        version: 0,
        name: "stock".into(),
        partitions,
        primary_key: vec![0, 1],
        columns: vec![column("warehouse"), column("id"), column("quantity")],
        partition_key: vec![0],
    }
}

#[test]
fn a_partition_hint_starts_the_transaction_where_those_rows_primary_lives() {
    let setup = setup(&[2, 3]);
    let cluster = setup.connect();
    cluster.create_table(&by_warehouse(4)).expect("create");
    let table = cluster.table("stock").expect("table");
    let mut nodes = std::collections::BTreeSet::new();
    for warehouse in 0..32u32 {
        let hinted = cluster.transaction_with_partition_hint(&table, &[Value::from(warehouse)]);
        let placement = table
            .placement(&[Value::from(warehouse), Value::from(7u32)])
            .expect("key")
            .expect("the map comes with the definition");
        let instances = cluster.tc_instances_on(hinted.node()).expect("a data node");
        assert_eq!(
            (hinted.node(), hinted.tc_instance()),
            (placement.replicas[0], placement.ldm_instance % instances),
            "warehouse {warehouse}"
        );
        for id in [0u32, 1, 1000, 99_999] {
            let mut bytes = Vec::new();
            table
                .encode_key(&[Value::from(warehouse), Value::from(id)], &mut bytes)
                .expect("key");
            let primary = setup
                .fake
                .primary_of("stock", &bytes)
                .expect("table exists");
            assert_eq!(
                hinted.node(),
                NodeId(primary),
                "warehouse {warehouse}, id {id}"
            );
        }
        nodes.insert(hinted.node());
    }
    assert_eq!(nodes.len(), 2, "warehouses on both nodes: {nodes:?}");
    // Values that do not fit the partition key, or a table placed by its
    // whole primary key, give no hint: round robin, as unhinted.
    cluster.create_table(&accounts(4)).expect("create");
    let accounts = cluster.table("accounts").expect("table");
    for (table, values) in [
        (&table, vec![Value::from(1u32), Value::from(2u32)]),
        (&table, vec![Value::from("one")]),
        (&accounts, vec![Value::from(1u32)]),
    ] {
        let placements: std::collections::BTreeSet<(NodeId, u16)> = (0..4)
            .map(|_| {
                let transaction = cluster.transaction_with_partition_hint(table, &values);
                (transaction.node(), transaction.tc_instance())
            })
            .collect();
        assert_eq!(placements.len(), 4, "{values:?}: {placements:?}");
    }
}

#[test]
fn unhinted_transactions_go_round_robin_over_nodes_and_tc_instances() {
    let setup = setup(&[2, 3]);
    let cluster = setup.connect();
    let placements: Vec<(NodeId, u16)> = (0..8)
        .map(|_| {
            let transaction = cluster.transaction();
            (transaction.node(), transaction.tc_instance())
        })
        .collect();
    let first = placements
        .iter()
        .position(|&placement| placement == (NodeId(2), 0))
        .expect("node 2 tc 0 is used");
    let cycle = [
        (NodeId(2), 0),
        (NodeId(2), 1),
        (NodeId(3), 0),
        (NodeId(3), 1),
    ];
    for (step, placement) in placements[first..].iter().enumerate() {
        assert_eq!(*placement, cycle[step % 4], "{placements:?}");
    }
    let on_three = cluster.transaction_on_node(NodeId(3)).expect("node 3");
    assert_eq!(on_three.node(), NodeId(3));
    assert!(cluster.transaction_on_node(NodeId(9)).is_err());
}

#[test]
fn schema_changes_go_to_the_president_and_move_on_after_not_master() {
    let setup = setup(&[2, 3, 4]);
    let cluster = setup.connect();
    cluster.create_table(&accounts(0)).expect("create");
    let creates = setup.received("CreateTabReq");
    assert_eq!(creates.len(), 1);
    assert_eq!(creates[0].0, 2, "the president is the lowest node id");

    // The president changes: node 2 refuses, node 3 refuses, node 4 takes it.
    setup.fake.set_president(4);
    setup.clear_received();
    cluster
        .drop_table("accounts")
        .expect("drop on the new president");
    let drops: Vec<u16> = setup
        .received("DropTabReq")
        .into_iter()
        .map(|(node, _)| node)
        .collect();
    assert_eq!(drops, [2, 3, 4]);
    // The client remembers who took it.
    setup.clear_received();
    cluster.create_table(&accounts(0)).expect("create again");
    let creates: Vec<u16> = setup
        .received("CreateTabReq")
        .into_iter()
        .map(|(node, _)| node)
        .collect();
    assert_eq!(creates, [4]);
    // Fetches are answered by any dict.
    assert_eq!(setup.received("GetTabInfoReq").len(), 1);
}

#[test]
fn a_lost_connection_is_routed_around() {
    let setup = setup(&[2, 3]);
    let cluster = setup.connect();
    cluster.create_table(&accounts(4)).expect("create");
    let table = cluster.table("accounts").expect("table");
    setup.fake.node(2).expect("node 2").disconnect_all();
    let deadline = Instant::now() + Duration::from_secs(20);
    while cluster.is_node_connected(NodeId(2)) {
        assert!(Instant::now() < deadline, "the client notices the loss");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(!cluster.is_connected());
    setup.clear_received();
    // Keys whose primary was on node 2 go to the next replica's node.
    for key in 0..16u32 {
        let transaction = insert(&cluster, &table, key);
        assert_eq!(setup.nodes_of(transaction), [3], "key {key}");
    }
    for _ in 0..4 {
        assert_eq!(cluster.transaction().node(), NodeId(3));
    }
    // A fetch moves on to node 3; a schema change finds no president until
    // node 3 becomes it.
    cluster.invalidate_table("accounts");
    cluster.table("accounts").expect("fetched from node 3");
    let error = cluster.drop_table("accounts").unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::NotMaster), "{error}");
    assert!(error.is_temporary());
    setup.fake.set_president(3);
    cluster.drop_table("accounts").expect("node 3 is president");
}

#[test]
fn a_newer_map_version_in_a_reply_refreshes_the_map() {
    let setup = setup(&[2, 3]);
    let cluster = setup.connect();
    cluster.create_table(&accounts(4)).expect("create");
    let table = cluster.table("accounts").expect("table");
    assert_eq!(cluster.map_version(), 1);
    assert_eq!(table.map_version(), 1);
    let key = 5u32;
    let before = setup.primary_of(&table, key);
    insert(&cluster, &table, key);

    setup.fake.move_primaries();
    let after = setup.primary_of(&table, key);
    assert_ne!(before, after, "the fake moved the primary");
    // Any reply carries the new version: here a read.
    let mut transaction = cluster.transaction();
    transaction
        .read(&table, &[Value::from(key)], LockMode::CommittedRead)
        .expect("key");
    transaction.execute(Commit::Yes).expect("read");
    assert_eq!(cluster.map_version(), 2);

    // The application still holds the old table: the hint refreshes the
    // map once and routes by the new one.
    setup.clear_received();
    let mut transaction = cluster
        .transaction_with_hint(&table, &[Value::from(key)])
        .expect("hint");
    assert_eq!(transaction.node(), NodeId(after));
    assert_eq!(setup.received("GetTabInfoReq").len(), 1, "one refresh");
    transaction
        .update(&table, &[Value::from(key)], &[("balance", Value::from(9))])
        .expect("update");
    transaction.execute(Commit::Yes).expect("update commits");
    let fresh = cluster.table("accounts").expect("cached");
    assert_eq!(fresh.map_version(), 2);
    assert_eq!(
        fresh.def(),
        table.def(),
        "same table, newer map: the old handle keeps working"
    );
    for key in 0..16u32 {
        let transaction = cluster
            .transaction_with_hint(&table, &[Value::from(key)])
            .expect("hint");
        assert_eq!(transaction.node().0, setup.primary_of(&table, key));
    }
    assert_eq!(
        setup.received("GetTabInfoReq").len(),
        1,
        "no more refreshes"
    );
}

#[test]
fn a_stale_map_after_drop_and_recreate_refreshes_and_carries_on() {
    let setup = setup(&[2, 3]);
    let cluster = setup.connect();
    let other = setup.connect();
    cluster.create_table(&accounts(2)).expect("create");
    let stale = cluster.table("accounts").expect("table");
    insert(&cluster, &stale, 1);

    // Another client drops the table and creates it anew, differently spread.
    other.drop_table("accounts").expect("drop");
    other.create_table(&accounts(3)).expect("recreate");

    let mut transaction = cluster
        .transaction_with_hint(&stale, &[Value::from(7u32)])
        .expect("hint by the stale map");
    transaction
        .insert(
            &stale,
            &[("id", Value::from(7u32)), ("balance", Value::from(7))],
        )
        .expect("row");
    let error = transaction.execute(Commit::Yes).unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::UnknownTable), "{error}");
    assert_eq!(transaction.state(), TransactionState::Aborted);

    // The refusal dropped the cached definition: the next lookup fetches
    // the new table and its map, and work carries on.
    setup.clear_received();
    let fresh = cluster.table("accounts").expect("refetched");
    assert_eq!(setup.received("GetTabInfoReq").len(), 1);
    assert_ne!(fresh.def().id, stale.def().id);
    assert_eq!(fresh.def().partitions, 3);
    assert_eq!(fresh.map().map(|map| map.partitions.len()), Some(3));
    for key in 0..12u32 {
        let transaction = insert(&cluster, &fresh, key);
        assert_eq!(setup.nodes_of(transaction), [setup.primary_of(&fresh, key)]);
    }
    assert_eq!(setup.fake.nodes()[1].row_count("accounts"), 12);
}

#[test]
fn a_node_that_is_not_up_yet_is_waited_for() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("free port")
        .port();
    let early = FakeDataNode::start(Default::default()).expect("listens");
    let late_addr = format!("127.0.0.1:{port}");
    let starter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        FakeDataNode::start(FakeDataNodeOptions {
            node_id: 3,
            port,
            not_started_replies: 2,
            ..Default::default()
        })
        .expect("the late node listens")
    });
    let options = ConnectOptions {
        connect_timeout: Duration::from_secs(20),
        register_retry_interval: Duration::from_millis(20),
        ..Default::default()
    };
    let cluster =
        Cluster::connect_direct_many(&[&early.addr().to_string(), &late_addr], 200, options)
            .expect("both nodes register in time");
    let late = starter.join().expect("starter");
    assert_eq!(cluster.data_nodes(), [NodeId(2), NodeId(3)]);
    assert_eq!(
        late.received()
            .iter()
            .filter(|signal| signal.name == "ApiRegReq")
            .count(),
        3
    );

    // Two addresses of one node are refused.
    let error = Cluster::connect_direct_many(
        &[&early.addr().to_string(), &early.addr().to_string()],
        201,
        ConnectOptions::default(),
    )
    .err()
    .expect("one node twice");
    assert!(matches!(error, ClientError::Config(_)), "{error}");
}

/// Runs `session` until nothing is in flight, collecting every completion.
fn drain<'a, T>(session: &mut AsyncSession<'a, T>) -> Vec<Completion<'a, T>> {
    let mut done = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while session.in_flight() > 0 {
        assert!(Instant::now() < deadline, "the session finishes");
        session.poll(Duration::from_secs(1), &mut done);
    }
    done
}

#[test]
fn many_transactions_in_flight_from_one_thread_share_one_write_per_node() {
    let setup = setup(&[2, 3]);
    let cluster = setup.connect();
    cluster.create_table(&accounts(4)).expect("create");
    let table = cluster.table("accounts").expect("table");
    setup.clear_received();
    let mut session = cluster.session::<u32>();
    for key in 0..300u32 {
        let mut transaction = cluster
            .transaction_with_hint(&table, &[Value::from(key)])
            .expect("hint");
        transaction
            .insert(
                &table,
                &[
                    ("id", Value::from(key)),
                    ("balance", Value::from(10 * key as i64)),
                ],
            )
            .expect("row");
        session.execute(transaction, Commit::Yes, key);
    }
    assert_eq!(session.in_flight(), 300);
    assert_eq!(session.send(), 300);
    let done = drain(&mut session);
    assert_eq!(done.len(), 300);
    let mut keys: Vec<u32> = done
        .iter()
        .map(|completion| {
            let outcome = completion.result.as_ref().expect("committed");
            assert!(outcome.committed && outcome.gci.is_some());
            assert_eq!(completion.transaction.state(), TransactionState::Committed);
            completion.user
        })
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, (0..300).collect::<Vec<_>>());
    drop(done);
    for node in setup.fake.nodes() {
        let requests: Vec<ReceivedSignal> = node
            .received()
            .into_iter()
            .filter(|signal| signal.name == "TcKeyReq")
            .collect();
        let frames: std::collections::BTreeSet<u64> = requests
            .iter()
            .map(|signal| signal.frame_sequence)
            .collect();
        assert_eq!(frames.len(), 1, "one frame for node {}", node.node_id());
        assert_eq!(requests[0].frame_signals as usize, requests.len());
        assert!(
            requests.len() > 50,
            "{} on node {}",
            requests.len(),
            node.node_id()
        );
    }

    // Reads in flight, rows back through the completions.
    for key in 0..300u32 {
        let mut transaction = cluster
            .transaction_with_hint(&table, &[Value::from(key)])
            .expect("hint");
        transaction
            .read(&table, &[Value::from(key)], LockMode::CommittedRead)
            .expect("key");
        session.execute(transaction, Commit::Yes, key);
    }
    for completion in drain(&mut session) {
        completion.result.expect("read");
        let row = completion.transaction.get(OpId::new(0)).expect("row");
        assert_eq!(
            row.get("balance"),
            Some(&Value::Int(10 * completion.user as i64))
        );
    }
    assert_eq!(cluster.in_flight(), 0);
}

#[test]
fn async_failures_come_back_as_completions() {
    let setup = setup(&[2, 3]);
    let options = ConnectOptions {
        reply_timeout: Duration::from_millis(300),
        ..Default::default()
    };
    let cluster = Cluster::connect_with(&setup.mgmd_addr, options).expect("connects");
    cluster.create_table(&accounts(4)).expect("create");
    let table = cluster.table("accounts").expect("table");
    let mut session = cluster.session::<&str>();

    // Nothing to send: completes at once. A refused batch: the error.
    session.execute(cluster.transaction(), Commit::Yes, "empty");
    setup
        .fake
        .node(2)
        .expect("node 2")
        .fail_next_batches(Some(OperationKind::Read), &[ErrorCode::LockWaitTimeout]);
    let mut refused = cluster.transaction_on_node(NodeId(2)).expect("node 2");
    refused
        .read(&table, &[Value::from(1u32)], LockMode::Shared)
        .expect("key");
    session.execute(refused, Commit::Yes, "refused");
    // A transaction kept open across two executes, then committed.
    let mut open = cluster.transaction_on_node(NodeId(3)).expect("node 3");
    open.insert(
        &table,
        &[("id", Value::from(2u32)), ("balance", Value::from(2))],
    )
    .expect("row");
    session.execute(open, Commit::No, "open");
    let mut outcomes = std::collections::BTreeMap::new();
    let mut open = None;
    for completion in drain(&mut session) {
        outcomes.insert(completion.user, completion.result.map_err(|e| e.code()));
        if completion.user == "open" {
            open = Some(completion.transaction);
        }
    }
    assert_eq!(outcomes["empty"].map(|o| o.committed), Ok(true));
    assert_eq!(outcomes["refused"], Err(Some(ErrorCode::LockWaitTimeout)));
    let open = open.expect("open transaction");
    assert_eq!(open.state(), TransactionState::Active);
    session.execute(open, Commit::Yes, "commit");
    let done = drain(&mut session);
    assert!(done[0].result.as_ref().expect("committed").committed);
    drop(done);

    // A silent node: the reply timeout fails the transaction; a commit
    // that wrote has an unknown outcome, one of reads only just timed out.
    setup.fake.node(3).expect("node 3").set_silent(true);
    let mut silent = cluster.transaction_on_node(NodeId(3)).expect("node 3");
    silent
        .update(&table, &[Value::from(2u32)], &[("balance", Value::from(3))])
        .expect("key");
    session.execute(silent, Commit::Yes, "silent");
    let done = drain(&mut session);
    let error = done[0].result.as_ref().unwrap_err();
    assert!(
        matches!(error, ClientError::OutcomeUnknown { cause }
            if matches!(**cause, ClientError::Timeout { .. })),
        "{error}"
    );
    assert_eq!(done[0].transaction.state(), TransactionState::Unknown);
    drop(done);
    let mut silent = cluster.transaction_on_node(NodeId(3)).expect("node 3");
    silent
        .read(&table, &[Value::from(2u32)], LockMode::CommittedRead)
        .expect("key");
    session.execute(silent, Commit::Yes, "silent read");
    let done = drain(&mut session);
    let error = done[0].result.as_ref().unwrap_err();
    assert!(matches!(error, ClientError::Timeout { .. }), "{error}");
    drop(done);

    // A lost connection fails what is in flight on it (a commit that
    // wrote with an unknown outcome, one of reads as a lost connection),
    // and later sends.
    let mut lost = cluster.transaction_on_node(NodeId(3)).expect("node 3");
    lost.update(&table, &[Value::from(2u32)], &[("balance", Value::from(4))])
        .expect("key");
    session.execute(lost, Commit::Yes, "lost");
    let mut lost_read = cluster.transaction_on_node(NodeId(3)).expect("node 3");
    lost_read
        .read(&table, &[Value::from(2u32)], LockMode::CommittedRead)
        .expect("key");
    session.execute(lost_read, Commit::Yes, "lost read");
    session.send();
    setup.fake.node(3).expect("node 3").disconnect_all();
    let done = drain(&mut session);
    let codes: std::collections::BTreeMap<_, _> = done
        .iter()
        .map(|completion| {
            (
                completion.user,
                completion.result.as_ref().unwrap_err().code(),
            )
        })
        .collect();
    assert_eq!(codes["lost"], Some(ErrorCode::CommitOutcomeUnknown));
    assert_eq!(codes["lost read"], Some(ErrorCode::ConnectionLost));
    drop(done);
    let mut after = cluster.transaction_on_node(NodeId(3)).expect("node 3");
    after
        .read(&table, &[Value::from(2u32)], LockMode::CommittedRead)
        .expect("key");
    session.execute(after, Commit::Yes, "after");
    let done = drain(&mut session);
    assert_eq!(
        done[0].result.as_ref().unwrap_err().code(),
        Some(ErrorCode::ConnectionLost)
    );
    drop(done);
    assert_eq!(cluster.in_flight(), 0);
}

#[test]
fn dropping_a_session_rolls_back_what_it_holds() {
    let setup = setup(&[2]);
    let cluster = setup.connect();
    cluster.create_table(&accounts(2)).expect("create");
    let table = cluster.table("accounts").expect("table");
    let node = setup.fake.node(2).expect("node 2");
    node.set_silent(true);
    let mut session = cluster.session::<()>();
    let mut transaction = cluster.transaction();
    transaction
        .insert(
            &table,
            &[("id", Value::from(1u32)), ("balance", Value::from(1))],
        )
        .expect("row");
    session.execute(transaction, Commit::No, ());
    session.send();
    let deadline = Instant::now() + Duration::from_secs(20);
    while node.open_transactions() == 0 {
        assert!(Instant::now() < deadline, "the batch arrives");
        std::thread::sleep(Duration::from_millis(5));
    }
    node.set_silent(false);
    drop(session);
    while node.open_transactions() != 0 {
        assert!(Instant::now() < deadline, "the rollback arrives");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(setup.received("TcRollbackReq").len(), 1);
    assert_eq!(cluster.in_flight(), 0);
}

#[test]
fn tables_are_listed_and_partition_replicas_scanned_row_by_row() {
    let setup = setup(&[2, 3]);
    let cluster = setup.connect();
    assert!(cluster.list_tables().expect("list").is_empty());
    cluster.create_table(&accounts(3)).expect("create");
    let mut other = accounts(1);
    other.name = "a_first".into();
    cluster.create_table(&other).expect("create");
    assert_eq!(
        cluster.list_tables().expect("list"),
        ["a_first", "accounts"]
    );
    let table = cluster.table("accounts").expect("table");
    for key in 0..50u32 {
        insert(&cluster, &table, key);
    }
    let mut seen = Vec::new();
    for partition in 0..3 {
        let replicas = &table.map().expect("map").partitions[partition as usize].replicas;
        let mut per_replica = Vec::new();
        for &node in replicas {
            let mut rows = Vec::new();
            let mut start = 0;
            loop {
                let batch = cluster
                    .scan_partition(node, &table, partition, start, 7)
                    .expect("scan");
                assert!(batch.rows.len() <= 7);
                rows.extend(batch.rows);
                if batch.done {
                    break;
                }
                start = batch.next_row;
            }
            per_replica.push(
                rows.iter()
                    .map(|scanned| {
                        assert_ne!(scanned.gci, client::Gci(0), "a committed row has a GCI");
                        let id = scanned.row.get("id").and_then(Value::as_u64).expect("id");
                        assert_eq!(scanned.row.get("balance"), Some(&Value::Int(id as i64)));
                        (scanned.row_id, id)
                    })
                    .collect::<Vec<_>>(),
            );
        }
        assert!(per_replica.windows(2).all(|pair| pair[0] == pair[1]));
        seen.extend(per_replica[0].iter().map(|&(_, id)| id));
    }
    seen.sort_unstable();
    assert_eq!(
        seen,
        (0..50).collect::<Vec<u64>>(),
        "every row in one partition"
    );
    let error = cluster
        .scan_partition(NodeId(2), &table, 3, 0, 10)
        .unwrap_err();
    assert!(matches!(error, ClientError::Usage(_)), "{error}");
    cluster.drop_table("accounts").expect("drop");
    let error = cluster
        .scan_partition(NodeId(2), &table, 0, 0, 10)
        .unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::UnknownTable), "{error}");
}
