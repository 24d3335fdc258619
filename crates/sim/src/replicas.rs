//! The replica checker at the end of a run, through the production path:
//! a simulated API node sends SCAN_PARTITIONREQ to the ldm of every replica
//! of every partition of the bank table (paging with each answer's
//! `next_row`), gathers the committed rows, and compares (row id, key, row
//! GCI, values) across the replicas of each partition with
//! `signal::replica_check` (the key columns are among the values). The
//! primaries' rows are then checked against the bank: each row lives in
//! the partition its key hashes to, the accounts hold what the clients
//! read last, and the table has exactly the rows the clients expect.

use crate::bank::Bank;
use crate::rows;
use crate::simulation::Client;
use crate::world::ClientIo;
use signal::attr::key_hash;
use signal::partition::bucket;
use signal::replica_check::{ReplicaCheckReport, ReplicaRows, ScanRow};
use signal::schema::TableDef;
use signal::signals::{PartitionMap, ScanPartitionConf, ScanPartitionReq};
use signal::{BlockKind, BlockRef, Envelope, NodeId, Signal};

/// The checker's API node (API nodes have ids 128..=255; the bank's start
/// at 200).
pub const CHECKER_API: BlockRef = BlockRef::new(NodeId(254), BlockKind::Api, 0);

/// Fewest and most rows the checker asks for per scan request (random in
/// between, so partitions take several batches).
const MIN_BATCH_ROWS: u64 = 8;
const MAX_BATCH_ROWS: u64 = 64;

/// One partition replica being scanned.
struct Scan {
    partition: u32,
    ldm: BlockRef,
    rows: ReplicaRows,
    done: bool,
}

/// The replica checker: a simulated API node scanning every replica.
pub struct ReplicaChecker {
    table: TableDef,
    map: PartitionMap,
    /// Per partition, its replicas in chain order (primary first).
    scans: Vec<Scan>,
    finished: usize,
    batches: u64,
}

impl ReplicaChecker {
    /// A checker of `table`, whose replicas `map` places.
    pub fn new(table: &TableDef, map: &PartitionMap) -> ReplicaChecker {
        let scans = map
            .partitions
            .iter()
            .enumerate()
            .flat_map(|(partition, placement)| {
                placement.replicas.iter().map(move |&node| Scan {
                    partition: partition as u32,
                    ldm: BlockRef::new(node, BlockKind::Ldm, placement.ldm_instance),
                    rows: ReplicaRows::new(node),
                    done: false,
                })
            })
            .collect();
        ReplicaChecker {
            table: table.clone(),
            map: map.clone(),
            scans,
            finished: 0,
            batches: 0,
        }
    }

    /// Sends the first request of every scan.
    pub fn begin(&mut self, io: &mut ClientIo<'_>) {
        for index in 0..self.scans.len() {
            self.request(index, 0, io);
        }
    }

    /// Whether every replica has been scanned to its end.
    pub fn done(&self) -> bool {
        self.finished == self.scans.len()
    }

    /// Scan batches received.
    pub fn batches(&self) -> u64 {
        self.batches
    }

    fn request(&mut self, index: usize, start_row: u32, io: &mut ClientIo<'_>) {
        let scan = &self.scans[index];
        let max_rows = (MIN_BATCH_ROWS + io.below(MAX_BATCH_ROWS - MIN_BATCH_ROWS + 1)) as u32;
        io.send(Envelope {
            from: CHECKER_API,
            to: scan.ldm,
            signal: ScanPartitionReq {
                request_id: index as u32,
                table_id: self.table.id,
                partition: scan.partition,
                start_row,
                max_rows,
            }
            .into(),
        });
    }

    fn scanned(&mut self, from: BlockRef, conf: ScanPartitionConf, io: &mut ClientIo<'_>) {
        let index = conf.request_id as usize;
        let Some(scan) = self.scans.get_mut(index).filter(|scan| !scan.done) else {
            panic!("replica checker: {conf:?} from {from} answers no open scan");
        };
        assert_eq!(
            from, scan.ldm,
            "replica checker: the scan of partition {} answered by another block",
            scan.partition
        );
        self.batches += 1;
        if let Err(error) = scan.rows.push_batch(conf.rows.as_slice()) {
            panic!(
                "replica checker: partition {} on node {}: {error}",
                scan.partition, scan.rows.node
            );
        }
        if conf.done {
            scan.done = true;
            self.finished += 1;
        } else {
            self.request(index, conf.next_row, io);
        }
    }

    /// Compares the replicas of every partition and checks that each row
    /// lives in the partition its key hashes to. Panics on any difference;
    /// returns the report and the primaries' rows, partition by partition.
    pub fn compare(&self) -> (ReplicaCheckReport, Vec<ScanRow>) {
        assert!(self.done(), "replica checker: scans still open");
        let mut report = ReplicaCheckReport::new();
        let mut rows = Vec::new();
        for (partition, _) in self.map.partitions.iter().enumerate() {
            let replicas: Vec<ReplicaRows> = self
                .scans
                .iter()
                .filter(|scan| scan.partition == partition as u32)
                .map(|scan| scan.rows.clone())
                .collect();
            if let Err(error) = report.check_partition(self.table.id, partition as u32, &replicas) {
                panic!("replica checker: partition {partition}: {error}");
            }
            let primary = &replicas[0];
            for row in &primary.rows {
                let decoded = rows::decode_row(&row.values).unwrap_or_else(|error| {
                    panic!(
                        "replica checker: partition {partition} row {} on node {}: {error}",
                        row.row_id, primary.node
                    )
                });
                let hash = key_hash(&self.table, &rows::key_bytes(decoded.id))
                    .expect("a bank key is a valid key");
                let home = self.map.bucket_partitions[bucket(hash) as usize];
                assert_eq!(
                    home, partition as u32,
                    "replica checker: key {} is in partition {partition}, but hashes to {home}",
                    decoded.id
                );
            }
            rows.extend(primary.rows.iter().cloned());
        }
        assert!(
            report.is_consistent(),
            "replica checker: replicas differ: {report}"
        );
        (report, rows)
    }

    /// Compares the replicas of every partition ([`ReplicaChecker::compare`]),
    /// then checks the primaries against what the bank's clients know: the
    /// accounts hold what they read last, and the table has exactly the
    /// rows they expect. Panics on any difference.
    pub fn finish(&self, bank: &Bank) -> ReplicaCheckReport {
        let (report, primary_rows) = self.compare();
        for row in &primary_rows {
            let decoded = rows::decode_row(&row.values).expect("compare decoded every row");
            if let Some(read) = bank.final_rows().get(&decoded.id) {
                assert_eq!(
                    &decoded, read,
                    "replica checker: account {} (row {}) differs from its final read",
                    decoded.id, row.row_id
                );
            }
        }
        assert_eq!(
            primary_rows.len() as u64,
            bank.rows_expected(),
            "replica checker: the primaries hold {} rows, the clients expect {}",
            primary_rows.len(),
            bank.rows_expected()
        );
        report
    }
}

impl Client for ReplicaChecker {
    fn on_signal(&mut self, envelope: Envelope, io: &mut ClientIo<'_>) {
        let from = envelope.from;
        assert_eq!(
            envelope.to,
            CHECKER_API,
            "replica checker: {} from {from} to API node {} after the workload ended",
            envelope.signal.name(),
            envelope.to
        );
        match envelope.signal {
            Signal::ScanPartitionConf(conf) => self.scanned(from, conf, io),
            other => panic!("replica checker: unexpected {other:?} from {from}"),
        }
    }

    /// The bank's last watchdog timer may still fire: nothing to do.
    fn on_wake(&mut self, _token: u64, _io: &mut ClientIo<'_>) {}
}
