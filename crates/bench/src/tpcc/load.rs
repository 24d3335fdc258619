//! tpcc's initial population (clause 4.3.3.1): drops and creates the
//! database and its nine tables, then loads the items once and every
//! warehouse's rows, warehouses in parallel on `connections` connections,
//! in multi-row INSERTs of `ROWS_PER_INSERT` rows, with a progress bar
//! over the rows.
//!
//! Every warehouse's rows come from a stream seeded by the run's seed and
//! the warehouse id, so which thread loads a warehouse changes nothing.

use super::random::{
    derive_seed, last_name, NurandConstants, Random, ITEM_STREAM, ORDER_LINE_COUNT_STREAM,
    WAREHOUSE_STREAM,
};
use super::values::{datetime_text, format_cents, format_rate};
use super::{
    retryable, schema, setup_failure, TpccOptions, CUSTOMERS_PER_DISTRICT, DISTRICTS_PER_WAREHOUSE,
    FIRST_NEW_ORDER, ITEMS, ORDERS_PER_DISTRICT,
};
use crate::mysql::{self, Connection};
use crate::BenchError;
use indicatif::{ProgressBar, ProgressStyle};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// Rows per INSERT statement: large enough that round trips do not
/// dominate, small enough that a statement stays well below packet and
/// transaction limits (a customer row is about 700 bytes).
const ROWS_PER_INSERT: u64 = 500;
/// Attempts of one INSERT that fails with a deadlock or lock wait timeout
/// (which rolled the whole statement back, so it may run again).
const MAX_ATTEMPTS: u32 = 10;

/// Drops and recreates the database and its tables, and loads them; how
/// long that took.
pub(super) fn load(
    options: &TpccOptions,
    seed: u64,
    constants: NurandConstants,
) -> Result<Duration, BenchError> {
    let started = Instant::now();
    create_database(options)?;
    let progress = ProgressBar::new(planned_rows(seed, options.warehouses));
    progress.set_style(
        ProgressStyle::with_template(
            "loading {bar:40} {human_pos}/{human_len} rows, {per_sec}, eta {eta}",
        )
        .expect("the progress template is valid"),
    );
    let context = LoadContext {
        options,
        seed,
        constants,
        // c_since, h_date and o_entry_d are the load's time (clause 4.3.3.1).
        loaded_at: mysql::quote(&datetime_text(SystemTime::now())),
        progress: &progress,
        // Job 0 is the items; job w is warehouse w.
        next_job: AtomicU32::new(0),
        failed: AtomicBool::new(false),
    };
    let threads = options
        .connections
        .min(options.warehouses.saturating_add(1));
    let context = &context;
    let mut first_error = None;
    std::thread::scope(|scope| {
        let loaders: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(move || {
                    let result = load_jobs(context);
                    if result.is_err() {
                        // The others stop at their next job.
                        context.failed.store(true, Ordering::Relaxed);
                    }
                    result
                })
            })
            .collect();
        for loader in loaders {
            match loader.join() {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    if first_error.is_none() {
                        first_error = Some(error);
                    }
                }
                // A loader panic is a bug in this crate: surface it.
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
    });
    progress.finish_and_clear();
    match first_error {
        Some(error) => Err(setup_failure("loading the TPC-C tables failed", error)),
        None => Ok(started.elapsed()),
    }
}

/// What the loading threads share.
struct LoadContext<'a> {
    options: &'a TpccOptions,
    seed: u64,
    constants: NurandConstants,
    /// The load's time as a quoted DATETIME literal.
    loaded_at: String,
    progress: &'a ProgressBar,
    /// The next job to take: 0 the items, then warehouses 1..=warehouses.
    next_job: AtomicU32,
    /// A thread failed: the others stop at their next job.
    failed: AtomicBool,
}

/// `DROP DATABASE IF EXISTS`, `CREATE DATABASE`, then the tables.
fn create_database(options: &TpccOptions) -> Result<(), BenchError> {
    let connect = |database: Option<&str>| {
        Connection::connect(&options.connect_options(database))
            .map_err(|error| setup_failure(&format!("cannot connect to {}", options.mysql), error))
    };
    let run = |connection: &mut Connection, statement: &str| {
        connection
            .query(statement)
            .map(drop)
            .map_err(|error| setup_failure(statement, error))
    };
    let mut server = connect(None)?;
    // The name is checked to be a plain identifier, so backquotes suffice.
    run(
        &mut server,
        &format!("DROP DATABASE IF EXISTS `{}`", options.database),
    )?;
    run(
        &mut server,
        &format!("CREATE DATABASE `{}`", options.database),
    )?;
    let mut database = connect(Some(options.database.as_str()))?;
    for statement in schema::create_table_statements(options.partitioned) {
        run(&mut database, &statement)?;
    }
    Ok(())
}

/// The stream that draws the o_ol_cnt of district `district_id`'s orders:
/// its own, so `planned_rows` can count the order lines before loading.
fn order_line_counts(seed: u64, warehouse_id: u32, district_id: u32) -> Random {
    let district =
        u64::from(warehouse_id) * u64::from(DISTRICTS_PER_WAREHOUSE + 1) + u64::from(district_id);
    Random::new(derive_seed(seed, ORDER_LINE_COUNT_STREAM, district))
}

/// Rows the load inserts, order lines counted exactly (the progress bar's
/// length).
fn planned_rows(seed: u64, warehouses: u32) -> u64 {
    let new_orders = u64::from(ORDERS_PER_DISTRICT - FIRST_NEW_ORDER + 1);
    // Customers, their history rows, orders and new orders.
    let per_district =
        2 * u64::from(CUSTOMERS_PER_DISTRICT) + u64::from(ORDERS_PER_DISTRICT) + new_orders;
    let mut rows = u64::from(ITEMS);
    for warehouse_id in 1..=warehouses {
        // The warehouse, its stock and its districts.
        rows += 1 + u64::from(ITEMS) + u64::from(DISTRICTS_PER_WAREHOUSE);
        for district_id in 1..=DISTRICTS_PER_WAREHOUSE {
            rows += per_district;
            let mut counts = order_line_counts(seed, warehouse_id, district_id);
            for _ in 0..ORDERS_PER_DISTRICT {
                rows += u64::from(counts.between(5, 15));
            }
        }
    }
    rows
}

/// One loading thread: takes jobs until none is left or another thread
/// failed.
fn load_jobs(context: &LoadContext<'_>) -> Result<(), String> {
    let options = context.options;
    let connection = Connection::connect(&options.connect_options(Some(options.database.as_str())))
        .map_err(|error| format!("cannot connect to {}: {error}", options.mysql))?;
    let mut loader = Loader {
        connection,
        context,
    };
    loop {
        if context.failed.load(Ordering::Relaxed) {
            return Ok(());
        }
        let job = context.next_job.fetch_add(1, Ordering::Relaxed);
        if job > options.warehouses {
            return Ok(());
        }
        if job == 0 {
            loader.items()?;
        } else {
            loader.warehouse(job)?;
        }
    }
}

/// A multi-row INSERT being filled.
struct Batch {
    table: &'static str,
    /// The statement: `INSERT INTO table (columns) VALUES ` then the rows.
    statement: String,
    /// Length of the statement's head, to empty it after a flush.
    head_length: usize,
    rows: u64,
}

impl Batch {
    fn new(table: &'static str, columns: &str) -> Batch {
        let statement = format!("INSERT INTO {table} ({columns}) VALUES ");
        Batch {
            table,
            head_length: statement.len(),
            statement,
            rows: 0,
        }
    }
}

/// A loading thread's connection and what it shares.
struct Loader<'a> {
    connection: Connection,
    context: &'a LoadContext<'a>,
}

impl Loader<'_> {
    /// Adds a row (its values, without parentheses) to `batch`, sending
    /// the batch when full.
    fn add(&mut self, batch: &mut Batch, values: &str) -> Result<(), String> {
        if batch.rows > 0 {
            batch.statement.push_str(", ");
        }
        batch.statement.push('(');
        batch.statement.push_str(values);
        batch.statement.push(')');
        batch.rows += 1;
        if batch.rows >= ROWS_PER_INSERT {
            self.flush(batch)?;
        }
        Ok(())
    }

    /// Sends `batch`'s rows, if any, and empties it.
    fn flush(&mut self, batch: &mut Batch) -> Result<(), String> {
        if batch.rows == 0 {
            return Ok(());
        }
        let mut attempt = 1;
        loop {
            match self.connection.query(&batch.statement) {
                Ok(_) => break,
                Err(error) if retryable(&error) && attempt < MAX_ATTEMPTS => {
                    std::thread::sleep(Duration::from_millis(10 * u64::from(attempt)));
                    attempt += 1;
                }
                Err(error) => {
                    return Err(format!(
                        "inserting {} rows into {}: {error}",
                        batch.rows, batch.table
                    ))
                }
            }
        }
        self.context.progress.inc(batch.rows);
        batch.statement.truncate(batch.head_length);
        batch.rows = 0;
        Ok(())
    }

    /// The item table (clause 4.3.3.1).
    fn items(&mut self) -> Result<(), String> {
        let mut random = Random::new(derive_seed(self.context.seed, ITEM_STREAM, 0));
        let mut items = Batch::new("item", "i_id, i_im_id, i_name, i_price, i_data");
        for item_id in 1..=ITEMS {
            let row = format!(
                "{item_id}, {}, {}, {}, {}",
                random.between(1, 10_000),
                mysql::quote(&random.alphanumeric(14, 24)),
                format_cents(i64::from(random.between(100, 10_000))),
                mysql::quote(&random.item_data()),
            );
            self.add(&mut items, &row)?;
        }
        self.flush(&mut items)
    }

    /// Warehouse `warehouse_id`: its row, its stock, its districts and
    /// their customers, history, orders, order lines and new orders.
    fn warehouse(&mut self, warehouse_id: u32) -> Result<(), String> {
        let seed = derive_seed(self.context.seed, WAREHOUSE_STREAM, warehouse_id.into());
        let mut random = Random::new(seed);
        let mut warehouses = Batch::new(
            "warehouse",
            "w_id, w_name, w_street_1, w_street_2, w_city, w_state, w_zip, w_tax, w_ytd",
        );
        let row = format!(
            "{warehouse_id}, {}, {}, {}, 300000.00",
            mysql::quote(&random.alphanumeric(6, 10)),
            address(&mut random),
            format_rate(random.between(0, 2000)),
        );
        self.add(&mut warehouses, &row)?;
        self.flush(&mut warehouses)?;
        self.stock(warehouse_id, &mut random)?;
        let mut districts = Batch::new(
            "district",
            "d_id, d_w_id, d_name, d_street_1, d_street_2, d_city, d_state, d_zip, d_tax, \
             d_ytd, d_next_o_id",
        );
        for district_id in 1..=DISTRICTS_PER_WAREHOUSE {
            let row = format!(
                "{district_id}, {warehouse_id}, {}, {}, {}, 30000.00, {}",
                mysql::quote(&random.alphanumeric(6, 10)),
                address(&mut random),
                format_rate(random.between(0, 2000)),
                ORDERS_PER_DISTRICT + 1,
            );
            self.add(&mut districts, &row)?;
        }
        self.flush(&mut districts)?;
        let mut tables = DistrictTables::empty();
        for district_id in 1..=DISTRICTS_PER_WAREHOUSE {
            self.customers(warehouse_id, district_id, &mut random, &mut tables)?;
            self.orders(warehouse_id, district_id, &mut random, &mut tables)?;
        }
        self.flush(&mut tables.customers)?;
        self.flush(&mut tables.history)?;
        self.flush(&mut tables.orders)?;
        self.flush(&mut tables.order_lines)?;
        self.flush(&mut tables.new_orders)
    }

    /// The warehouse's 100,000 stock rows.
    fn stock(&mut self, warehouse_id: u32, random: &mut Random) -> Result<(), String> {
        let mut stock = Batch::new(
            "stock",
            "s_i_id, s_w_id, s_quantity, s_dist_01, s_dist_02, s_dist_03, s_dist_04, s_dist_05, \
             s_dist_06, s_dist_07, s_dist_08, s_dist_09, s_dist_10, s_ytd, s_order_cnt, \
             s_remote_cnt, s_data",
        );
        for item_id in 1..=ITEMS {
            let mut row = format!("{item_id}, {warehouse_id}, {}", random.between(10, 100));
            for _ in 0..DISTRICTS_PER_WAREHOUSE {
                row.push_str(", ");
                row.push_str(&mysql::quote(&random.alphanumeric(24, 24)));
            }
            row.push_str(", 0, 0, 0, ");
            row.push_str(&mysql::quote(&random.item_data()));
            self.add(&mut stock, &row)?;
        }
        self.flush(&mut stock)
    }

    /// A district's 3,000 customers and their history rows.
    fn customers(
        &mut self,
        warehouse_id: u32,
        district_id: u32,
        random: &mut Random,
        tables: &mut DistrictTables,
    ) -> Result<(), String> {
        // A copy of the shared reference, so the text it lends does not
        // hold `self` borrowed across `add`.
        let context = self.context;
        let loaded_at = &context.loaded_at;
        for customer_id in 1..=CUSTOMERS_PER_DISTRICT {
            // The first 1,000 customers take the names of 0..=999 in turn,
            // so every name exists in every district (clause 4.3.3.1).
            let name_number = if customer_id <= 1000 {
                customer_id - 1
            } else {
                random.nurand(255, 0, 999, context.constants.last_name_load)
            };
            let credit = if random.percent(10) { "BC" } else { "GC" };
            let row = format!(
                "{customer_id}, {district_id}, {warehouse_id}, {}, 'OE', {}, {}, {}, {loaded_at}, \
                 '{credit}', 50000.00, {}, -10.00, 10.00, 1, 0, {}",
                mysql::quote(&random.alphanumeric(8, 16)),
                mysql::quote(&last_name(name_number)),
                address(random),
                mysql::quote(&random.numeric(16, 16)),
                format_rate(random.between(0, 5000)),
                mysql::quote(&random.alphanumeric(300, 500)),
            );
            self.add(&mut tables.customers, &row)?;
            let row = format!(
                "{customer_id}, {district_id}, {warehouse_id}, {district_id}, {warehouse_id}, \
                 {loaded_at}, 10.00, {}",
                mysql::quote(&random.alphanumeric(12, 24)),
            );
            self.add(&mut tables.history, &row)?;
        }
        Ok(())
    }

    /// A district's 3,000 orders, their lines, and the new orders of the
    /// last 900.
    fn orders(
        &mut self,
        warehouse_id: u32,
        district_id: u32,
        random: &mut Random,
        tables: &mut DistrictTables,
    ) -> Result<(), String> {
        let context = self.context;
        let loaded_at = &context.loaded_at;
        // Every customer has exactly one order: o_c_id is a permutation.
        let mut customer_ids: Vec<u32> = (1..=CUSTOMERS_PER_DISTRICT).collect();
        random.shuffle(&mut customer_ids);
        let mut line_counts = order_line_counts(context.seed, warehouse_id, district_id);
        for (order_id, customer_id) in (1..=ORDERS_PER_DISTRICT).zip(customer_ids) {
            let delivered = order_id < FIRST_NEW_ORDER;
            let carrier = if delivered {
                random.between(1, 10).to_string()
            } else {
                "NULL".to_string()
            };
            let line_count = line_counts.between(5, 15);
            let row = format!(
                "{order_id}, {district_id}, {warehouse_id}, {customer_id}, {loaded_at}, \
                 {carrier}, {line_count}, 1"
            );
            self.add(&mut tables.orders, &row)?;
            for line_number in 1..=line_count {
                let (delivered_at, amount) = if delivered {
                    (loaded_at.as_str(), "0.00".to_string())
                } else {
                    ("NULL", format_cents(i64::from(random.between(1, 999_999))))
                };
                let row = format!(
                    "{order_id}, {district_id}, {warehouse_id}, {line_number}, {}, \
                     {warehouse_id}, {delivered_at}, 5, {amount}, {}",
                    random.between(1, ITEMS),
                    mysql::quote(&random.alphanumeric(24, 24)),
                );
                self.add(&mut tables.order_lines, &row)?;
            }
            if !delivered {
                let row = format!("{order_id}, {district_id}, {warehouse_id}");
                self.add(&mut tables.new_orders, &row)?;
            }
        }
        Ok(())
    }
}

/// The batches of a warehouse's district-level tables, filled district
/// after district.
struct DistrictTables {
    customers: Batch,
    history: Batch,
    orders: Batch,
    order_lines: Batch,
    new_orders: Batch,
}

impl DistrictTables {
    fn empty() -> DistrictTables {
        DistrictTables {
            customers: Batch::new(
                "customer",
                "c_id, c_d_id, c_w_id, c_first, c_middle, c_last, c_street_1, c_street_2, \
                 c_city, c_state, c_zip, c_phone, c_since, c_credit, c_credit_lim, c_discount, \
                 c_balance, c_ytd_payment, c_payment_cnt, c_delivery_cnt, c_data",
            ),
            history: Batch::new(
                "history",
                "h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data",
            ),
            orders: Batch::new(
                "orders",
                "o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local",
            ),
            order_lines: Batch::new(
                "order_line",
                "ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, ol_delivery_d, \
                 ol_quantity, ol_amount, ol_dist_info",
            ),
            new_orders: Batch::new("new_order", "no_o_id, no_d_id, no_w_id"),
        }
    }
}

/// Street 1, street 2, city, state and zip (clause 4.3.2.7) as five quoted
/// literals separated by commas.
fn address(random: &mut Random) -> String {
    format!(
        "{}, {}, {}, {}, {}",
        mysql::quote(&random.alphanumeric(10, 20)),
        mysql::quote(&random.alphanumeric(10, 20)),
        mysql::quote(&random.alphanumeric(10, 20)),
        mysql::quote(&random.alphanumeric(2, 2)),
        mysql::quote(&random.zip()),
    )
}
