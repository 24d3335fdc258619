//! tpcc's schema: the CREATE TABLE statements of the nine TPC-C tables
//! (clause 1.3) in MySQL syntax that both MariaDB and Tessera accept, every
//! table with a primary key, and with `partitioned` the warehouse tables
//! partitioned by their warehouse column so a warehouse's rows share a
//! partition.

/// One table: its name, its column and key definitions, and the column
/// its rows are partitioned by (`None`: never partitioned).
struct TableDefinition {
    name: &'static str,
    body: &'static str,
    warehouse_column: Option<&'static str>,
}

/// The tables in creation order.
const TABLES: [TableDefinition; 9] = [
    TableDefinition {
        name: "warehouse",
        body: "w_id INT NOT NULL,
  w_name VARCHAR(10) NOT NULL,
  w_street_1 VARCHAR(20) NOT NULL,
  w_street_2 VARCHAR(20) NOT NULL,
  w_city VARCHAR(20) NOT NULL,
  w_state CHAR(2) NOT NULL,
  w_zip CHAR(9) NOT NULL,
  w_tax DECIMAL(4,4) NOT NULL,
  w_ytd DECIMAL(12,2) NOT NULL,
  PRIMARY KEY (w_id)",
        warehouse_column: Some("w_id"),
    },
    TableDefinition {
        name: "district",
        body: "d_id INT NOT NULL,
  d_w_id INT NOT NULL,
  d_name VARCHAR(10) NOT NULL,
  d_street_1 VARCHAR(20) NOT NULL,
  d_street_2 VARCHAR(20) NOT NULL,
  d_city VARCHAR(20) NOT NULL,
  d_state CHAR(2) NOT NULL,
  d_zip CHAR(9) NOT NULL,
  d_tax DECIMAL(4,4) NOT NULL,
  d_ytd DECIMAL(12,2) NOT NULL,
  d_next_o_id INT NOT NULL,
  PRIMARY KEY (d_w_id, d_id)",
        warehouse_column: Some("d_w_id"),
    },
    TableDefinition {
        name: "customer",
        body: "c_id INT NOT NULL,
  c_d_id INT NOT NULL,
  c_w_id INT NOT NULL,
  c_first VARCHAR(16) NOT NULL,
  c_middle CHAR(2) NOT NULL,
  c_last VARCHAR(16) NOT NULL,
  c_street_1 VARCHAR(20) NOT NULL,
  c_street_2 VARCHAR(20) NOT NULL,
  c_city VARCHAR(20) NOT NULL,
  c_state CHAR(2) NOT NULL,
  c_zip CHAR(9) NOT NULL,
  c_phone CHAR(16) NOT NULL,
  c_since DATETIME NOT NULL,
  c_credit CHAR(2) NOT NULL,
  c_credit_lim DECIMAL(12,2) NOT NULL,
  c_discount DECIMAL(4,4) NOT NULL,
  c_balance DECIMAL(12,2) NOT NULL,
  c_ytd_payment DECIMAL(12,2) NOT NULL,
  c_payment_cnt INT NOT NULL,
  c_delivery_cnt INT NOT NULL,
  c_data VARCHAR(500) NOT NULL,
  PRIMARY KEY (c_w_id, c_d_id, c_id),
  KEY c_by_last (c_w_id, c_d_id, c_last, c_first)",
        warehouse_column: Some("c_w_id"),
    },
    // history has no key of its own in TPC-C; h_id is one because every
    // Tessera table needs a primary key. It is not partitioned: with
    // AUTO_INCREMENT alone in the key, h_w_id could not be the partition
    // column (MySQL wants it in every unique key).
    TableDefinition {
        name: "history",
        body: "h_id BIGINT NOT NULL AUTO_INCREMENT,
  h_c_id INT NOT NULL,
  h_c_d_id INT NOT NULL,
  h_c_w_id INT NOT NULL,
  h_d_id INT NOT NULL,
  h_w_id INT NOT NULL,
  h_date DATETIME NOT NULL,
  h_amount DECIMAL(6,2) NOT NULL,
  h_data VARCHAR(24) NOT NULL,
  PRIMARY KEY (h_id)",
        warehouse_column: None,
    },
    TableDefinition {
        name: "new_order",
        body: "no_o_id INT NOT NULL,
  no_d_id INT NOT NULL,
  no_w_id INT NOT NULL,
  PRIMARY KEY (no_w_id, no_d_id, no_o_id)",
        warehouse_column: Some("no_w_id"),
    },
    TableDefinition {
        name: "orders",
        body: "o_id INT NOT NULL,
  o_d_id INT NOT NULL,
  o_w_id INT NOT NULL,
  o_c_id INT NOT NULL,
  o_entry_d DATETIME NOT NULL,
  o_carrier_id INT NULL,
  o_ol_cnt INT NOT NULL,
  o_all_local INT NOT NULL,
  PRIMARY KEY (o_w_id, o_d_id, o_id),
  KEY o_by_customer (o_w_id, o_d_id, o_c_id, o_id)",
        warehouse_column: Some("o_w_id"),
    },
    TableDefinition {
        name: "order_line",
        body: "ol_o_id INT NOT NULL,
  ol_d_id INT NOT NULL,
  ol_w_id INT NOT NULL,
  ol_number INT NOT NULL,
  ol_i_id INT NOT NULL,
  ol_supply_w_id INT NOT NULL,
  ol_delivery_d DATETIME NULL,
  ol_quantity INT NOT NULL,
  ol_amount DECIMAL(6,2) NOT NULL,
  ol_dist_info CHAR(24) NOT NULL,
  PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number)",
        warehouse_column: Some("ol_w_id"),
    },
    // Items are the same for every warehouse: partitioning them by
    // warehouse would mean nothing.
    TableDefinition {
        name: "item",
        body: "i_id INT NOT NULL,
  i_im_id INT NOT NULL,
  i_name VARCHAR(24) NOT NULL,
  i_price DECIMAL(5,2) NOT NULL,
  i_data VARCHAR(50) NOT NULL,
  PRIMARY KEY (i_id)",
        warehouse_column: None,
    },
    TableDefinition {
        name: "stock",
        body: "s_i_id INT NOT NULL,
  s_w_id INT NOT NULL,
  s_quantity INT NOT NULL,
  s_dist_01 CHAR(24) NOT NULL,
  s_dist_02 CHAR(24) NOT NULL,
  s_dist_03 CHAR(24) NOT NULL,
  s_dist_04 CHAR(24) NOT NULL,
  s_dist_05 CHAR(24) NOT NULL,
  s_dist_06 CHAR(24) NOT NULL,
  s_dist_07 CHAR(24) NOT NULL,
  s_dist_08 CHAR(24) NOT NULL,
  s_dist_09 CHAR(24) NOT NULL,
  s_dist_10 CHAR(24) NOT NULL,
  s_ytd INT NOT NULL,
  s_order_cnt INT NOT NULL,
  s_remote_cnt INT NOT NULL,
  s_data VARCHAR(50) NOT NULL,
  PRIMARY KEY (s_w_id, s_i_id)",
        warehouse_column: Some("s_w_id"),
    },
];

/// The CREATE TABLE statements of the nine tables, in creation order;
/// with `partitioned`, the warehouse tables end in
/// `PARTITION BY KEY (their warehouse column)`.
pub(super) fn create_table_statements(partitioned: bool) -> Vec<String> {
    TABLES
        .iter()
        .map(|table| {
            let partition = match (partitioned, table.warehouse_column) {
                (true, Some(column)) => format!(" PARTITION BY KEY ({column})"),
                _ => String::new(),
            };
            format!(
                "CREATE TABLE {} (\n  {}\n) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin{partition}",
                table.name, table.body
            )
        })
        .collect()
}
