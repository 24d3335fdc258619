//! From config to blocks: how many instances of each block a data node
//! runs and how each is sized. Production (`runtime`) and the simulator
//! both build a node's blocks here, so the simulator runs exactly the
//! production blocks with production sizing.

use config::{ClusterConfig, ClusterSettings};
use dict::{Dict, DictConfig};
use dih::{Dih, DihConfig};
use ldm::{LcpSettings, Ldm, LdmConfig, RedoSettings};
use membership::{Membership, MembershipConfig};
use signal::{BlockKind, BlockRef, NodeId};
use storage::redo::{RedoGeometry, MAX_RECORD_PAGES, PAGE_BYTES};
use tc::{Tc, TcConfig};

/// The blocks of one data node, not yet placed on threads.
pub struct NodeBlocks {
    /// One per ldm thread.
    pub ldms: Vec<Ldm>,
    /// One per tc thread.
    pub tcs: Vec<Tc>,
    /// Distribution and GCI switch.
    pub dih: Dih,
    /// Schema.
    pub dict: Dict,
    /// Start phases, API registration.
    pub membership: Membership,
}

/// The redo log of ldm `instance`: its parts, and buffers of `redo_buffer`
/// bytes each (at least the largest record).
fn redo_settings(
    settings: &ClusterSettings,
    geometry: RedoGeometry,
    instance: u16,
    ldm_instances: u16,
) -> RedoSettings {
    let buffer_pages = (settings.redo_buffer / PAGE_BYTES as u64)
        .max(MAX_RECORD_PAGES as u64 * 2)
        .min(geometry.ring_pages()) as u32;
    RedoSettings {
        geometry,
        buffer_pages,
        // A marker and its page per GCP, for a good number of GCPs while
        // the log is full (bounded to a quarter of the ring).
        marker_reserve_pages: (geometry.ring_pages() / 4).clamp(1, 256) as u32,
        parts: dih::redo_parts_of_ldm(instance, ldm_instances, settings.redo_log_parts),
    }
}

/// Builds the blocks of data node `node` as `config` describes it, for a
/// start with the other nodes.
pub fn build_blocks(config: &ClusterConfig, node: NodeId) -> Result<NodeBlocks, String> {
    build_blocks_for(config, node, false)
}

/// Builds the blocks of data node `node` as `config` describes it;
/// `joining`: the cluster runs without the node, which rejoins it by a
/// node restart (docs/design/0018-node-restart.md).
pub fn build_blocks_for(
    config: &ClusterConfig,
    node: NodeId,
    joining: bool,
) -> Result<NodeBlocks, String> {
    if config.data_node(node.0).is_none() {
        return Err(format!("node {node} is not a data node in the config"));
    }
    let settings = &config.cluster;
    let ldm_instances = config.threads.ldm as u16;
    let tc_instances = config.threads.tc as u16;
    let data_nodes: Vec<(NodeId, u32)> = config
        .data_nodes
        .iter()
        .map(|data_node| (NodeId(data_node.id), data_node.node_group))
        .collect();
    let geometry = RedoGeometry::new(settings.redo_log_files, settings.redo_log_file_size)
        .map_err(|error| format!("config: {error}"))?;
    let ldms = (0..ldm_instances)
        .map(|instance| {
            Ldm::new(LdmConfig {
                address: BlockRef::new(node, BlockKind::Ldm, instance),
                data_memory_bytes: settings.data_memory_bytes / ldm_instances as u64,
                max_operations: settings.max_concurrent_operations,
                redo: (!settings.diskless)
                    .then(|| redo_settings(settings, geometry, instance, ldm_instances)),
            })
            .with_lcp_settings(LcpSettings {
                enabled: settings.local_checkpoints,
                recovery_work: settings.recovery_work,
                ..LcpSettings::default()
            })
        })
        .collect();
    let tcs = (0..tc_instances)
        .map(|instance| {
            let address = BlockRef::new(node, BlockKind::Tc, instance);
            Tc::new(tc_config(settings, address, tc_instances, ldm_instances))
        })
        .collect();
    let dih = Dih::new(DihConfig {
        address: BlockRef::new(node, BlockKind::Dih, 0),
        tc_instances,
        ldm_instances,
        data_nodes: data_nodes.clone(),
        replicas: settings.replicas,
        redo_log_parts: settings.redo_log_parts,
        epoch_interval_ms: settings.epoch_interval_ms,
        gcp_interval_ms: settings.gcp_interval_ms,
        diskless: settings.diskless,
    });
    let dict = Dict::new(DictConfig {
        address: BlockRef::new(node, BlockKind::Dict, 0),
        tc_instances,
        ldm_instances,
        data_nodes: data_nodes.clone(),
        replicas: settings.replicas,
        redo_log_parts: settings.redo_log_parts,
        diskless: settings.diskless,
    });
    let membership = Membership::new(MembershipConfig {
        address: BlockRef::new(node, BlockKind::Membership, 0),
        tc_instances,
        ldm_instances,
        data_nodes,
        heartbeat_interval_ms: settings.heartbeat_interval_ms,
        heartbeat_missed: settings.heartbeat_missed,
        api_heartbeat_missed: settings.api_heartbeat_missed(),
        arbitration: membership::ArbitrationSettings {
            enabled: config.mgmd.arbitration_rank > 0,
            timeout_ms: settings.arbitration_timeout_ms,
        },
        joining,
    });
    let (mut ldms, mut tcs): (Vec<Ldm>, Vec<Tc>) = (ldms, tcs);
    if joining {
        // Until admitted, a late signal meant for this node's previous
        // incarnation is dropped (docs/design/0018-node-restart.md).
        ldms.iter_mut().for_each(Ldm::await_admission);
        tcs.iter_mut().for_each(Tc::await_admission);
    }
    Ok(NodeBlocks {
        ldms,
        tcs,
        dih,
        dict,
        membership,
    })
}

/// How each of a node's `tc_instances` tcs is sized: an equal share of the
/// node's transaction and operation records.
fn tc_config(
    settings: &ClusterSettings,
    address: BlockRef,
    tc_instances: u16,
    ldm_instances: u16,
) -> TcConfig {
    let max_operations = (settings.max_concurrent_operations / tc_instances as u32).max(1);
    TcConfig {
        address,
        max_transactions: (settings.max_concurrent_transactions / tc_instances as u32).max(1),
        max_operations,
        // A transaction takes all its operation records from its tc's
        // share. One larger than the share could never run: it would get
        // the temporary OutOfOperationRecords, and a client that retries
        // temporary errors would retry it forever. Capped at the share, it
        // gets the permanent TooManyOperations instead.
        max_operations_per_transaction: settings.max_operations_per_transaction.min(max_operations),
        lock_wait_timeout_ms: settings.lock_wait_timeout_ms,
        inactive_transaction_timeout_ms: settings.inactive_transaction_timeout_ms,
        ldm_instances,
    }
}

/// The partitions (of a table with the default partition count) that ldm
/// instance `ldm` of a node in `node_group` owns: partition p lives in group
/// p % groups, on ldm (p / groups) % ldm_instances (dih's default map).
pub fn default_partitions_of_ldm(config: &ClusterConfig, node_group: u32, ldm: u32) -> Vec<u32> {
    let groups = config.node_groups().max(1);
    let ldm_instances = config.threads.ldm.max(1);
    (0..groups * ldm_instances)
        .filter(|p| p % groups == node_group && (p / groups) % ldm_instances == ldm)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernel::testing::RecordingContext;
    use kernel::{Block, Context, Report};
    use signal::schema::{ColumnDef, ColumnType, TableDef};
    use signal::signals::{CreateTabReq, GetTabInfoReq, NodeConnectedRep, StartPhaseReq};
    use signal::{Envelope, ErrorCode, Gci, Signal};

    /// The blocks of every node of a cluster, delivering each other's
    /// signals in send order (timers once nothing else is left), so that the
    /// cluster protocols of membership, dih and dict run against each other
    /// and the real tcs and ldms.
    struct Cluster {
        nodes: Vec<(NodeBlocks, RecordingContext)>,
        queue: std::collections::VecDeque<Envelope>,
        timers: Vec<(u64, Envelope)>,
        now_ms: u64,
        /// Reports by node index.
        reports: Vec<Vec<Report>>,
        /// Signals to API nodes.
        to_api: Vec<Signal>,
    }

    impl Cluster {
        fn new(config: &ClusterConfig) -> Cluster {
            let nodes: Vec<_> = config
                .data_nodes
                .iter()
                .map(|node| {
                    let blocks = build_blocks(config, NodeId(node.id)).expect("a data node");
                    (blocks, RecordingContext::new())
                })
                .collect();
            let reports = vec![Vec::new(); nodes.len()];
            Cluster {
                nodes,
                queue: Default::default(),
                timers: Vec::new(),
                now_ms: 0,
                reports,
                to_api: Vec::new(),
            }
        }

        fn send(&mut self, from: BlockRef, to: BlockRef, signal: impl Into<Signal>) {
            let signal = signal.into();
            self.queue.push_back(Envelope { from, to, signal });
        }

        fn deliver(&mut self, envelope: Envelope) {
            let to = envelope.to;
            if to.kind == BlockKind::Api {
                self.to_api.push(envelope.signal);
                return;
            }
            let index = self
                .nodes
                .iter()
                .position(|(blocks, _)| blocks.membership.address().node == to.node)
                .unwrap_or_else(|| panic!("a signal to {to}, on no node"));
            let (blocks, ctx) = &mut self.nodes[index];
            ctx.now_ms = self.now_ms;
            let block: &mut dyn Block = match to.kind {
                BlockKind::Membership => &mut blocks.membership,
                BlockKind::Dih => &mut blocks.dih,
                BlockKind::Dict => &mut blocks.dict,
                BlockKind::Tc => &mut blocks.tcs[to.instance as usize],
                BlockKind::Ldm => &mut blocks.ldms[to.instance as usize],
                BlockKind::Api | BlockKind::Io => unreachable!(),
            };
            block.handle(envelope, ctx);
            for sent in ctx.sent.drain(..) {
                match sent.delay_ms {
                    None => self.queue.push_back(sent.envelope),
                    Some(delay) => self.timers.push((self.now_ms + delay, sent.envelope)),
                }
            }
            self.reports[index].append(&mut ctx.reports);
        }

        /// Runs until nothing is left before `until_ms`.
        fn run(&mut self, until_ms: u64) {
            loop {
                if let Some(envelope) = self.queue.pop_front() {
                    self.deliver(envelope);
                    continue;
                }
                let Some(next) = (0..self.timers.len()).min_by_key(|&i| self.timers[i].0) else {
                    return;
                };
                if self.timers[next].0 > until_ms {
                    return;
                }
                let (due_ms, envelope) = self.timers.remove(next);
                self.now_ms = self.now_ms.max(due_ms);
                self.deliver(envelope);
            }
        }
    }

    fn two_node_config() -> ClusterConfig {
        let text = r#"
[mgmd]
host = "127.0.0.1"
port = 1186

[cluster]
replicas = 2
data_memory = "16M"
diskless = true

[threads]
ldm = 2
tc = 2

[[data_node]]
id = 3
host = "127.0.0.1"
port = 11863
data_dir = "n3"

[[data_node]]
id = 2
host = "127.0.0.1"
port = 11862
data_dir = "n2"
"#;
        ClusterConfig::from_toml_str(text, "test").expect("valid config")
    }

    #[test]
    fn a_two_node_cluster_forms_switches_gcis_together_and_creates_tables_at_the_president() {
        let config = two_node_config();
        let mut cluster = Cluster::new(&config);
        let membership = |node| BlockRef::new(NodeId(node), BlockKind::Membership, 0);
        for (node, peer) in [(3, 2), (2, 3)] {
            let connected = NodeConnectedRep {
                node: NodeId(peer),
                incarnation: 1,
            };
            cluster.send(membership(node), membership(node), connected);
            cluster.send(
                membership(node),
                membership(node),
                StartPhaseReq { phase: 0 },
            );
        }
        cluster.run(0);
        let initial = Gci::from_parts(1, 0);
        for reports in &cluster.reports {
            // Phase timings are log lines and checkpoint counters come
            // on the ldm's own schedule; the state reports are checked.
            let state: Vec<Report> = reports
                .iter()
                .filter(|report| {
                    !matches!(
                        report,
                        Report::Phase { .. } | Report::Checkpoints(_) | Report::Log(_)
                    )
                })
                .cloned()
                .collect();
            assert!(
                matches!(
                    &state[..],
                    [
                        Report::Membership { membership_id: 1, live },
                        Report::RestoredGci(Gci(0)),
                        Report::LatestGci(gci),
                        Report::NodeStarted
                    ] if live.len() == 2 && *gci == initial
                ),
                "{state:?}"
            );
        }
        assert!(cluster.nodes[1].0.dih.is_master(), "node 2, the lowest id");
        assert!(cluster.nodes[1].0.dict.is_master());

        // Every switch reaches both nodes.
        cluster.run(1000);
        let last = |reports: &Vec<Report>| {
            reports.iter().rev().find_map(|report| match report {
                Report::LatestGci(gci) => Some(*gci),
                _ => None,
            })
        };
        assert_eq!(last(&cluster.reports[0]), Some(Gci::from_parts(1, 10)));
        assert_eq!(last(&cluster.reports[1]), Some(Gci::from_parts(1, 10)));

        // A create at the other node is refused; at the president it runs on
        // both, and both dicts then hand out the table.
        let table = TableDef {
            indexes: Vec::new(),
            revision: 0,
            id: 0,
            version: 0,
            name: "t1".into(),
            columns: vec![ColumnDef {
                name: "k".into(),
                column_type: ColumnType::Int { unsigned: false },
                nullable: false,
            }],
            primary_key: vec![0],
            partitions: 0,
            partition_key: Vec::new(),
        };
        let api = BlockRef::new(NodeId(200), BlockKind::Api, 0);
        let pool = cluster.nodes[0].1.pool();
        for node in [3, 2] {
            let definition = pool.copy_from(&table.encode_to_vec()).expect("room");
            let dict = BlockRef::new(NodeId(node), BlockKind::Dict, 0);
            let request_id = node.into();
            cluster.send(
                api,
                dict,
                CreateTabReq {
                    request_id,
                    definition,
                },
            );
            cluster.run(1000);
        }
        match &cluster.to_api[..] {
            [Signal::SchemaRef(refused), Signal::CreateTabConf(created)] => {
                assert_eq!(
                    (refused.request_id, refused.error),
                    (3, ErrorCode::NotMaster)
                );
                assert_eq!(created.request_id, 2);
            }
            other => panic!("unexpected answers {other:?}"),
        }
        cluster.to_api.clear();
        for node in [3, 2] {
            let name = pool.copy_from(b"t1").expect("room");
            let dict = BlockRef::new(NodeId(node), BlockKind::Dict, 0);
            cluster.send(
                api,
                dict,
                GetTabInfoReq {
                    request_id: 5,
                    name,
                },
            );
            cluster.run(1000);
        }
        for answer in cluster.to_api.drain(..) {
            let Signal::GetTabInfoConf(conf) = answer else {
                panic!("expected the definition, got {answer:?}");
            };
            assert_eq!(conf.schema_version, 2);
            let map = signal::codec::decode_partition_map(conf.map.as_slice()).expect("a map");
            // Default partitions: 1 group x 2 ldm threads, primaries spread.
            let primaries: Vec<NodeId> = map.partitions.iter().map(|p| p.replicas[0]).collect();
            assert_eq!(primaries, [NodeId(3), NodeId(2)]);
        }
        for node in &cluster.nodes {
            assert_eq!(node.0.dict.schema_version(), 2);
        }
    }

    #[test]
    fn a_transaction_may_not_have_more_operations_than_its_tcs_share_of_records() {
        let settings = ClusterSettings {
            max_concurrent_operations: 100,
            max_operations_per_transaction: 10_000,
            ..ClusterSettings::default()
        };
        let address = BlockRef::new(NodeId(2), BlockKind::Tc, 0);
        let config = tc_config(&settings, address, 4, 1);
        assert_eq!(config.max_operations, 25);
        assert_eq!(config.max_operations_per_transaction, 25);
        let settings = ClusterSettings {
            max_operations_per_transaction: 10,
            ..settings
        };
        let config = tc_config(&settings, address, 4, 1);
        assert_eq!(
            config.max_operations_per_transaction, 10,
            "a smaller limit stays"
        );
    }

    #[test]
    fn config_and_ldm_agree_on_recovery_work() {
        // The config crate depends on no block, so it keeps its own copy
        // of the bounds the ldm accepts; a value the config lets through
        // must be one the ldm was built for.
        assert_eq!(config::RECOVERY_WORK_RANGE, ldm::RECOVERY_WORK_RANGE);
        assert_eq!(
            ClusterSettings::default().recovery_work,
            LcpSettings::default().recovery_work
        );
    }
}
