//! Requests for tools that look at the replicas themselves (the replica
//! checker): the list of online tables, the committed rows of one
//! partition replica on one data node, in row-id order, with each row's
//! GCI, and the same rows through that replica's ordered index. All are
//! plain request/answer exchanges like schema requests.

use crate::cluster::{section_from, unexpected_reply, Cluster};
use crate::dispatch::SchemaReply;
use crate::error::ClientError;
use crate::table::{Row, Table};
use signal::replica_check::{decode_scan_batch, ReplicaCheckReport, ReplicaRows, ScanRow};
use signal::scan_bounds::{self, ScanBounds};
use signal::scan_program::ProgramWriter;
use signal::signals::{scan_flags, ListTablesReq, ScanPartitionReq, ScanReq};
use signal::{BlockKind, Gci, NodeId, TransactionId};
use std::sync::Arc;

/// One row of a partition replica, as its ldm holds it.
#[derive(Clone, Debug)]
pub struct ScannedRow {
    /// Row id (page and slot) within the partition.
    pub row_id: u32,
    /// GCI of the row's last committed change.
    pub gci: Gci,
    /// The values.
    pub row: Row,
}

/// One batch of a partition replica scan.
#[derive(Clone, Debug)]
pub struct PartitionScan {
    /// Rows in row-id order.
    pub rows: Vec<ScannedRow>,
    /// Where the next batch starts (`start_row` of the next call).
    pub next_row: u32,
    /// No rows remain after this batch.
    pub done: bool,
}

/// Bytes before each row's attribute entries: row id, GCI, length.
const ROW_PREFIX_BYTES: usize = 4 + 8 + 4;

impl Cluster {
    /// The names of the online tables, sorted by byte value (any dict answers).
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// for name in cluster.list_tables()? {
    ///     println!("{name}");
    /// }
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn list_tables(&self) -> Result<Vec<String>, ClientError> {
        let reply = self.schema_request("(every table)", true, |request_id| {
            Ok(ListTablesReq { request_id }.into())
        })?;
        match reply {
            SchemaReply::Tables(Ok(names)) => Ok(names),
            SchemaReply::Tables(Err(error)) => {
                Err(ClientError::Protocol(format!("table names: {error}")))
            }
            other => Err(unexpected_reply("(every table)", other)),
        }
    }

    /// Up to `max_rows` committed rows of partition `partition` of `table`
    /// as the replica on data node `node` holds them, from row id
    /// `start_row` on. Rows of operations not yet committed are not shown.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// let table = cluster.table("t")?;
    /// let mut start = 0;
    /// loop {
    ///     let batch = cluster.scan_partition(signal::NodeId(2), &table, 0, start, 100)?;
    ///     for scanned in &batch.rows {
    ///         println!("row {} GCI {}: {:?}", scanned.row_id, scanned.gci, scanned.row.values());
    ///     }
    ///     if batch.done { break; }
    ///     start = batch.next_row;
    /// }
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn scan_partition(
        &self,
        node: NodeId,
        table: &Arc<Table>,
        partition: u32,
        start_row: u32,
        max_rows: u32,
    ) -> Result<PartitionScan, ClientError> {
        let index = self.connection_index(node).ok_or_else(|| {
            ClientError::Usage(format!("{node} is not a data node of this cluster"))
        })?;
        let map = self.routing_map(table).ok_or_else(|| {
            ClientError::Usage(format!("table {:?} has no partition map", table.name()))
        })?;
        let placement = map.partitions.get(partition as usize).ok_or_else(|| {
            ClientError::Usage(format!(
                "table {:?} has {} partitions, not {}",
                table.name(),
                map.partitions.len(),
                partition + 1
            ))
        })?;
        let (rows, next_row, done) = self.scan_partition_raw(
            index,
            placement.ldm_instance,
            table,
            partition,
            start_row,
            max_rows,
        )?;
        Ok(PartitionScan {
            rows: decode_scanned_rows(table, &rows)?,
            next_row,
            done,
        })
    }

    /// One scan batch as the ldm sent it: the encoded rows, where the next
    /// batch starts, and whether it was the last.
    fn scan_partition_raw(
        &self,
        connection: usize,
        ldm_instance: u16,
        table: &Arc<Table>,
        partition: u32,
        start_row: u32,
        max_rows: u32,
    ) -> Result<(Vec<u8>, u32, bool), ClientError> {
        let table_id = table.def().id;
        let reply = self.request_on(
            &self.connection(connection),
            (BlockKind::Ldm, ldm_instance),
            table.name(),
            &|request_id| {
                Ok(ScanPartitionReq {
                    request_id,
                    table_id,
                    partition,
                    start_row,
                    max_rows,
                }
                .into())
            },
        )?;
        let SchemaReply::Scan {
            rows,
            next_row,
            done,
            ..
        } = reply
        else {
            return Err(unexpected_reply(table.name(), reply));
        };
        Ok((rows, next_row, done))
    }

    /// Every row of one partition replica through its ordered index
    /// `index` (0: the primary key's), in index order, as [`ScanRow`]s
    /// (row id, GCI, every column).
    fn index_rows(
        &self,
        (connection, ldm_instance): (usize, u16),
        table: &Arc<Table>,
        partition: u32,
        index: u32,
    ) -> Result<Vec<ScanRow>, ClientError> {
        let program = ProgramWriter::new(&[])
            .finish()
            .expect("a program of every column and no filter encodes");
        let mut rows = Vec::new();
        let mut resume: Option<(Vec<u8>, u32)> = None;
        loop {
            let mut bounds = Vec::new();
            let resume_key = resume.as_ref().map_or(&[][..], |(key, _)| key);
            scan_bounds::encode(
                ScanBounds {
                    low: &[],
                    high: &[],
                    resume: resume_key,
                },
                &mut bounds,
            )
            .map_err(|code| ClientError::Invalid {
                code,
                detail: "a resume key too long".into(),
            })?;
            let flags = if resume.is_some() {
                scan_flags::RESUME
            } else {
                0
            };
            let resume_row = resume.as_ref().map_or(0, |&(_, row)| row);
            let (table_id, table_version) = (table.def().id, table.def().version);
            let request = |request_id| {
                Ok(ScanReq {
                    request_id,
                    table_id,
                    table_version,
                    partition,
                    index,
                    flags,
                    max_rows: 1000,
                    max_bytes: scan_flags::MAX_BATCH_BYTES,
                    resume_row,
                    transaction_id: TransactionId(0),
                    bounds: section_from(&bounds)?,
                    program: section_from(&program)?,
                }
                .into())
            };
            let reply = self.request_retrying(connection, ldm_instance, table.name(), &request)?;
            let SchemaReply::Scan {
                rows: batch,
                next_row,
                done,
                resume_key,
                ..
            } = reply
            else {
                return Err(unexpected_reply(table.name(), reply));
            };
            rows.extend(decode_scan_batch(&batch).map_err(|error| {
                ClientError::Protocol(format!("index scan of {:?}: {error}", table.name()))
            })?);
            if done {
                return Ok(rows);
            }
            resume = Some((resume_key, next_row));
        }
    }

    /// A request to a replica's ldm, asked again for a while when the
    /// node refuses it for now: a node that just started, or whose read
    /// lease is being renewed, serves no scan yet (`ReadLeaseExpired`,
    /// `NodeNotStarted`), and the checker runs right after restarts.
    fn request_retrying(
        &self,
        connection: usize,
        ldm_instance: u16,
        table: &str,
        request: &impl Fn(u32) -> Result<signal::Signal, ClientError>,
    ) -> Result<SchemaReply, ClientError> {
        const ATTEMPTS: u32 = 50;
        const PAUSE: std::time::Duration = std::time::Duration::from_millis(200);
        let mut attempt = 1;
        loop {
            let reply = self.request_on(
                &self.connection(connection),
                (BlockKind::Ldm, ldm_instance),
                table,
                request,
            );
            match reply {
                Err(ClientError::Schema { code, .. })
                    if attempt < ATTEMPTS
                        && matches!(
                            code,
                            signal::ErrorCode::ReadLeaseExpired | signal::ErrorCode::NodeNotStarted
                        ) =>
                {
                    attempt += 1;
                    self.clock().sleep(PAUSE);
                }
                other => return other,
            }
        }
    }

    /// The replica checker: for every partition of every online table,
    /// reads every replica's committed rows and compares (row id, key, row
    /// GCI, values) with the primary's, and reads each replica's rows
    /// again through each of its ordered indexes (the primary key's and
    /// the table's others), which must hold every live row once, in key
    /// order, and nothing else. Each unique index's hidden table is
    /// checked the same way, and against the table's rows: one hidden
    /// row for each row with non-NULL values in its columns, naming that
    /// row, and nothing else. Run it on a quiet cluster: rows of
    /// transactions in flight differ between replicas until they
    /// complete.
    ///
    /// ```no_run
    /// let cluster = client::Cluster::connect("127.0.0.1:11860")?;
    /// let report = cluster.check_replicas()?;
    /// assert_eq!(report.mismatches, 0, "{report}");
    /// # Ok::<(), client::ClientError>(())
    /// ```
    pub fn check_replicas(&self) -> Result<ReplicaCheckReport, ClientError> {
        let mut report = ReplicaCheckReport::new();
        // Dead replicas are out of every map: say whose they are.
        report.dead_nodes = self.data_nodes_down_now()?;
        for name in self.list_tables()? {
            // The definition as dict holds it now: a cached one may name
            // an index dropped since (the check would find it missing),
            // or lack one created since (left unchecked).
            self.invalidate_table(&name);
            let table = match self.table(&name) {
                Ok(table) => table,
                // Dropped since the listing: nothing to check.
                Err(error) if error.code() == Some(signal::ErrorCode::UnknownTable) => continue,
                Err(error) => return Err(error),
            };
            let rows = self.check_table(&table, &mut report)?;
            // Each unique index's hidden table, as a table and against
            // the rows.
            for (index, hidden) in table.unique_index_tables() {
                let hidden_rows = self.check_table(hidden, &mut report)?;
                let map = self.routing_map(hidden).ok_or_else(|| {
                    ClientError::Protocol(format!("table {name:?} came without a partition map"))
                })?;
                let rows = (&rows[..], &hidden_rows[..]);
                report.check_unique_index(table.def(), index, rows, &map.bucket_partitions);
            }
        }
        Ok(report)
    }

    /// Checks every partition of `table` into `report`; returns the rows
    /// of each partition's reference replica (with their partition).
    fn check_table(
        &self,
        table: &Arc<Table>,
        report: &mut ReplicaCheckReport,
    ) -> Result<Vec<(u32, ScanRow)>, ClientError> {
        const BATCH_ROWS: u32 = 1000;
        let name = table.name();
        let map = self.routing_map(table).ok_or_else(|| {
            ClientError::Protocol(format!("table {name:?} came without a partition map"))
        })?;
        // Every ordered index with its columns: the primary key's (0)
        // and the others.
        let typed = |columns: &[u16]| -> Vec<(u16, signal::schema::ColumnType)> {
            columns
                .iter()
                .map(|&column| (column, table.def().columns[column as usize].column_type))
                .collect()
        };
        let mut indexes = vec![(0, typed(&table.def().primary_key))];
        indexes.extend(
            table
                .def()
                .indexes
                .iter()
                .map(|index| (index.id, typed(&index.columns))),
        );
        let mut reference_rows = Vec::new();
        for (partition, placement) in map.partitions.iter().enumerate() {
            let mut replicas = Vec::with_capacity(placement.replicas.len());
            for &node in &placement.replicas {
                let index = self.connection_index(node).ok_or_else(|| {
                    ClientError::Protocol(format!("the map of {name:?} names unknown node {node}"))
                })?;
                let mut rows = ReplicaRows::new(node);
                let mut start = 0;
                loop {
                    let (batch, next_row, done) = self.scan_partition_raw(
                        index,
                        placement.ldm_instance,
                        table,
                        partition as u32,
                        start,
                        BATCH_ROWS,
                    )?;
                    rows.push_batch(&batch).map_err(|error| {
                        ClientError::Protocol(format!("scan of {name:?} on {node}: {error}"))
                    })?;
                    if done {
                        break;
                    }
                    start = next_row;
                }
                for (index_id, columns) in &indexes {
                    let index_rows = self.index_rows(
                        (index, placement.ldm_instance),
                        table,
                        partition as u32,
                        *index_id,
                    )?;
                    report.check_index(
                        (table.def().id, partition as u32),
                        (*index_id, columns),
                        &rows,
                        &index_rows,
                    );
                }
                replicas.push(rows);
            }
            report
                .check_partition(table.def().id, partition as u32, &replicas)
                .map_err(|error| ClientError::Protocol(format!("checking {name:?}: {error}")))?;
            if let Some(reference) = replicas.into_iter().next() {
                let partition = partition as u32;
                reference_rows.extend(reference.rows.into_iter().map(|row| (partition, row)));
            }
        }
        Ok(reference_rows)
    }
}

fn decode_scanned_rows(
    table: &Arc<Table>,
    mut bytes: &[u8],
) -> Result<Vec<ScannedRow>, ClientError> {
    let malformed = || {
        ClientError::Protocol(format!(
            "malformed partition scan rows of table {:?}",
            table.name()
        ))
    };
    let mut rows = Vec::new();
    while !bytes.is_empty() {
        let prefix = bytes.get(..ROW_PREFIX_BYTES).ok_or_else(malformed)?;
        let row_id = u32::from_le_bytes(prefix[0..4].try_into().map_err(|_| malformed())?);
        let gci = u64::from_le_bytes(prefix[4..12].try_into().map_err(|_| malformed())?);
        let length = u32::from_le_bytes(prefix[12..16].try_into().map_err(|_| malformed())?);
        let end = ROW_PREFIX_BYTES
            .checked_add(length as usize)
            .filter(|&end| end <= bytes.len())
            .ok_or_else(malformed)?;
        rows.push(ScannedRow {
            row_id,
            gci: Gci(gci),
            row: Table::decode_row(table, &bytes[ROW_PREFIX_BYTES..end])?,
        });
        bytes = &bytes[end..];
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use signal::schema::{ColumnDef, ColumnType, TableDef};

    #[test]
    fn scanned_rows_decode_and_malformed_ones_are_protocol_errors() {
        let table = Arc::new(Table::new(TableDef {
            indexes: Vec::new(),
            revision: 0,
            id: 1,
            version: 1,
            name: "t".into(),
            partitions: 1,
            primary_key: vec![0],
            columns: vec![ColumnDef {
                name: "k".into(),
                column_type: ColumnType::Int { unsigned: true },
                nullable: false,
            }],
            partition_key: Vec::new(),
        }));
        let mut entry = Vec::new();
        table
            .encode_key(&[crate::Value::UInt(9)], &mut entry)
            .unwrap();
        let mut bytes = Vec::new();
        for row_id in [3u32, 8] {
            bytes.extend_from_slice(&row_id.to_le_bytes());
            bytes.extend_from_slice(&Gci::from_parts(4, 1).0.to_le_bytes());
            bytes.extend_from_slice(&(entry.len() as u32).to_le_bytes());
            bytes.extend_from_slice(&entry);
        }
        let rows = decode_scanned_rows(&table, &bytes).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].row_id, 8);
        assert_eq!(rows[1].gci, Gci::from_parts(4, 1));
        assert_eq!(rows[0].row.get("k"), Some(&crate::Value::UInt(9)));
        for cut in 1..bytes.len() {
            if cut == bytes.len() / 2 {
                continue; // a whole first row
            }
            let error = decode_scanned_rows(&table, &bytes[..cut]).unwrap_err();
            assert!(matches!(error, ClientError::Protocol(_)), "{cut}: {error}");
        }
    }
}
