//! tpcc: the TPC-C workload as DBT2 runs it, over the MySQL protocol
//! (`crate::mysql`), so it runs the same against `tessera sql` and
//! MariaDB. This file owns the public API (`TpccOptions`, `run`,
//! `TpccReport`) and the run's sequence: load (optional), the mix for the
//! duration, the consistency check.
//!
//! - `schema`: the nine tables' CREATE TABLE statements;
//! - `load`: the initial population of clause 4.3.3.1, warehouses loaded
//!   in parallel;
//! - `transactions`: the five transactions' inputs and statements;
//! - `terminal`: one connection running the mix, retrying deadlocks;
//! - `consistency`: conditions 1 to 4 of clause 3.3.2;
//! - `report`: tpmC and the per transaction figures, as text and JSON;
//! - `random`, `values`: random numbers and text of clause 4.3.2, exact
//!   money and dates as SQL text.
//!
//! Keying and think times are off: each connection runs transactions back
//! to back, so tpmC here measures the database, not a TPC-C compliant
//! configuration.
//!
//! ```no_run
//! use bench::tpcc::{self, TpccOptions};
//! let options = TpccOptions { load: true, warehouses: 2, ..TpccOptions::default() };
//! let report = tpcc::run(&options)?;
//! println!("{}", report.to_text());
//! # Ok::<(), bench::BenchError>(())
//! ```

use crate::mysql::{ConnectOptions, Connection, MysqlError};
use crate::BenchError;
use random::{derive_seed, NurandConstants, Random, CONSTANTS_STREAM, TERMINAL_STREAM};
use std::fmt;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use terminal::{MixStats, Terminal};
use transactions::Home;

pub use consistency::Consistency;
pub use report::{TpccReport, TransactionReport};

mod consistency;
mod load;
mod random;
mod report;
mod schema;
mod terminal;
mod transactions;
mod values;

/// Items (clause 4.3.3.1): i_id 1..=ITEMS.
const ITEMS: u32 = 100_000;
/// Districts per warehouse.
const DISTRICTS_PER_WAREHOUSE: u32 = 10;
/// Customers per district.
const CUSTOMERS_PER_DISTRICT: u32 = 3_000;
/// Orders per district in the initial population.
const ORDERS_PER_DISTRICT: u32 = 3_000;
/// The first undelivered order of each district as loaded: the last 900
/// orders are in new_order.
const FIRST_NEW_ORDER: u32 = 2_101;
/// Most warehouses a run may ask for (the population is about 100 MB per
/// warehouse, so this is far beyond any machine this runs on).
const MAX_WAREHOUSES: u32 = 100_000;
/// Most connections a run may ask for (each is a thread).
const MAX_CONNECTIONS: u32 = 4_096;

/// What to run.
///
/// ```
/// let options = bench::tpcc::TpccOptions::default();
/// assert_eq!(options.database, "tpcc");
/// assert_eq!(options.warehouses, 1);
/// assert!(options.partitioned);
/// ```
#[derive(Clone, Debug)]
pub struct TpccOptions {
    /// The SQL server, HOST:PORT.
    pub mysql: String,
    /// The user.
    pub user: String,
    /// The password (empty: none).
    pub password: String,
    /// The database holding the TPC-C tables.
    pub database: String,
    /// Warehouses: loaded with `load`, run on otherwise (the database must
    /// hold at least this many).
    pub warehouses: u32,
    /// Drop and recreate the database and load the initial population
    /// before the run.
    pub load: bool,
    /// How long the mix runs (zero: no mix, only the load and the check).
    pub duration: Duration,
    /// Connections, each a terminal with its own home warehouse
    /// (connection i works at warehouse i % warehouses + 1); also the
    /// loading threads.
    pub connections: u32,
    /// Partition the warehouse tables by their warehouse column
    /// (`PARTITION BY KEY (x_w_id)`), so a warehouse's rows share a
    /// partition.
    pub partitioned: bool,
    /// Run the transactions' statements prepared (COM_STMT_PREPARE once
    /// per connection, then COM_STMT_EXECUTE), not as text.
    pub prepared: bool,
    /// Ask the server to batch each transaction's INSERTs with its next
    /// round trip (`transaction_allow_batching`), where it can.
    pub batching: bool,
}

impl Default for TpccOptions {
    fn default() -> Self {
        TpccOptions {
            mysql: "127.0.0.1:3306".into(),
            user: "root".into(),
            password: String::new(),
            database: "tpcc".into(),
            warehouses: 1,
            load: false,
            duration: Duration::from_secs(60),
            connections: 8,
            partitioned: true,
            prepared: false,
            batching: false,
        }
    }
}

impl TpccOptions {
    /// Checks the options; the error says which one is wrong.
    ///
    /// ```
    /// let options = bench::tpcc::TpccOptions { warehouses: 0, ..Default::default() };
    /// assert!(options.validate().unwrap_err().to_string().contains("warehouses"));
    /// ```
    pub fn validate(&self) -> Result<(), BenchError> {
        let invalid = |message: String| Err(BenchError::Options(message));
        if !(1..=MAX_WAREHOUSES).contains(&self.warehouses) {
            return invalid(format!("warehouses must be 1..={MAX_WAREHOUSES}"));
        }
        if !(1..=MAX_CONNECTIONS).contains(&self.connections) {
            return invalid(format!("connections must be 1..={MAX_CONNECTIONS}"));
        }
        // The name goes into statements between backquotes, unescaped.
        let plain = |character: char| {
            character.is_ascii_alphanumeric() || character == '_' || character == '$'
        };
        if self.database.is_empty() || self.database.len() > 64 || !self.database.chars().all(plain)
        {
            return invalid(format!(
                "database {:?} must be 1 to 64 letters, digits, '_' or '$'",
                self.database
            ));
        }
        if self.mysql.is_empty() {
            return invalid("mysql must be HOST:PORT".into());
        }
        Ok(())
    }

    /// How to connect, in `database` (`None`: in none).
    fn connect_options(&self, database: Option<&str>) -> ConnectOptions {
        ConnectOptions {
            address: self.mysql.clone(),
            user: self.user.clone(),
            password: self.password.clone(),
            database: database.map(str::to_string),
            prepared: self.prepared,
            batching: self.batching,
        }
    }
}

/// Loads (with `load`), runs the mix for `duration` on `connections`
/// connections, then checks consistency conditions 1 to 4. Errors inside
/// transactions are counted in the report; failing to connect, to load,
/// or finding fewer warehouses than asked for is an `Err`.
///
/// ```no_run
/// let options = bench::tpcc::TpccOptions { duration: std::time::Duration::from_secs(10), ..Default::default() };
/// let report = bench::tpcc::run(&options)?;
/// assert!(report.is_consistent(), "{}", report.to_text());
/// # Ok::<(), bench::BenchError>(())
/// ```
pub fn run(options: &TpccOptions) -> Result<TpccReport, BenchError> {
    options.validate()?;
    let seed = run_seed();
    let constants = NurandConstants::pick(&mut Random::new(derive_seed(seed, CONSTANTS_STREAM, 0)));
    let load = if options.load {
        Some(load::load(options, seed, constants)?)
    } else {
        None
    };
    check_loaded(options)?;
    let (stats, measured) = run_mix(options, seed, constants)?;
    // A fresh connection: the check must not depend on one left idle
    // through the run.
    let mut connection = connect(options)?;
    let consistency = consistency::check(&mut connection);
    Ok(TpccReport::new(
        options,
        load,
        measured,
        &stats,
        consistency,
    ))
}

/// A seed that differs from run to run.
fn run_seed() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64);
    nanos ^ u64::from(std::process::id()).rotate_left(32)
}

/// A connection in the TPC-C database.
fn connect(options: &TpccOptions) -> Result<Connection, BenchError> {
    Connection::connect(&options.connect_options(Some(options.database.as_str()))).map_err(
        |error| {
            setup_failure(
                &format!(
                    "cannot connect to {} in database {}",
                    options.mysql, options.database
                ),
                error,
            )
        },
    )
}

/// Fails unless the database holds at least `warehouses` warehouses.
fn check_loaded(options: &TpccOptions) -> Result<(), BenchError> {
    let mut connection = connect(options)?;
    let counted = connection
        .query("SELECT COUNT(*) FROM warehouse")
        .map_err(|error| {
            setup_failure(
                &format!(
                    "database {} holds no TPC-C tables (load it first)",
                    options.database
                ),
                error,
            )
        })?;
    let loaded: u64 = counted
        .scalar()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0);
    if loaded < u64::from(options.warehouses) {
        return Err(BenchError::Options(format!(
            "database {} holds {loaded} warehouses but {} were asked for: load it with \
             load (and as many warehouses) first",
            options.database, options.warehouses
        )));
    }
    Ok(())
}

/// Runs the mix on every connection until the duration is over; the
/// merged figures and the time measured.
fn run_mix(
    options: &TpccOptions,
    seed: u64,
    constants: NurandConstants,
) -> Result<(MixStats, Duration), BenchError> {
    let mut stats = MixStats::default();
    if options.duration.is_zero() {
        return Ok((stats, Duration::ZERO));
    }
    let connect_options = options.connect_options(Some(options.database.as_str()));
    // Every connection is made before the clock starts, so a server that
    // refuses some fails the run instead of shrinking it.
    let mut terminals = Vec::with_capacity(options.connections as usize);
    for index in 0..options.connections {
        let connection = Connection::connect(&connect_options).map_err(|error| {
            setup_failure(
                &format!(
                    "cannot open connection {} of {} to {}",
                    index + 1,
                    options.connections,
                    options.mysql
                ),
                error,
            )
        })?;
        let home = Home {
            warehouse_id: index % options.warehouses + 1,
            warehouses: options.warehouses,
            // Terminals sharing a warehouse take different districts.
            stock_level_district: (index / options.warehouses) % DISTRICTS_PER_WAREHOUSE + 1,
            constants,
        };
        let terminal_seed = derive_seed(seed, TERMINAL_STREAM, u64::from(index));
        terminals.push(Terminal::new(
            connection,
            connect_options.clone(),
            home,
            terminal_seed,
        ));
    }
    let started = Instant::now();
    let deadline = started + options.duration;
    let threads: Vec<_> = terminals
        .into_iter()
        .map(|terminal| std::thread::spawn(move || terminal.run_until(deadline)))
        .collect();
    for thread in threads {
        match thread.join() {
            Ok(terminal_stats) => stats.merge(&terminal_stats),
            // A terminal panic is a bug in this crate: surface it.
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
    Ok((stats, started.elapsed()))
}

/// A deadlock, a lock wait timeout, or another error after which the
/// server says the transaction was rolled back (Tessera's temporary
/// errors): the transaction may run again.
fn retryable(error: &MysqlError) -> bool {
    error.is_retryable() || error.message.contains("rolled back")
}

/// A failure to connect, load or prepare as a `BenchError`.
fn setup_failure(context: &str, error: impl fmt::Display) -> BenchError {
    BenchError::Sql(format!("{context}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::consistency::{
        condition_1, condition_2, condition_3, condition_4, verdict, Figures, NewOrderFigures,
        OrderFigures,
    };
    use super::random::last_name;
    use super::transactions::{middle_row, CustomerSelector, Deck, Input, TransactionKind};
    use super::values::{datetime_text, format_cents, format_rate, parse_cents};
    use super::*;

    fn home(warehouses: u32) -> Home {
        Home {
            warehouse_id: 1,
            warehouses,
            stock_level_district: 3,
            constants: NurandConstants::pick(&mut Random::new(7)),
        }
    }

    #[test]
    fn nurand_stays_in_its_range() {
        let mut random = Random::new(1);
        for (mask, low, high) in [(1023, 1, 3000), (255, 0, 999), (8191, 1, 100_000)] {
            for constant in [0, mask / 2, mask] {
                for _ in 0..20_000 {
                    let value = random.nurand(mask, low, high, constant);
                    assert!(
                        (low..=high).contains(&value),
                        "NURand({mask}, {low}, {high}) gave {value}"
                    );
                }
            }
        }
    }

    #[test]
    fn nurand_is_skewed() {
        // Values whose low bits are all ones are the hot ones: the most
        // drawn value comes up far more often than a uniform draw's 100.
        let mut random = Random::new(2);
        let mut counts = vec![0u32; 1000];
        for _ in 0..100_000 {
            counts[random.nurand(255, 0, 999, 0) as usize] += 1;
        }
        let most = counts.iter().copied().max().unwrap_or(0);
        assert!(most > 300, "the most drawn value came up {most} times");
    }

    #[test]
    fn uniform_draws_cover_their_range() {
        let mut random = Random::new(3);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            let value = random.between(1, 10);
            assert!((1..=10).contains(&value));
            seen[value as usize - 1] = true;
        }
        assert!(seen.iter().all(|&hit| hit));
    }

    #[test]
    fn the_same_seed_repeats_the_stream() {
        let mut first = Random::new(42);
        let mut second = Random::new(42);
        for _ in 0..100 {
            assert_eq!(first.next_u64(), second.next_u64());
        }
        assert_ne!(derive_seed(42, 1, 0), derive_seed(42, 1, 1));
        assert_ne!(derive_seed(42, 1, 0), derive_seed(42, 2, 0));
    }

    #[test]
    fn run_constants_keep_their_distance_from_load_constants() {
        for seed in 0..2000 {
            let constants = NurandConstants::pick(&mut Random::new(seed));
            let delta = constants.last_name_run.abs_diff(constants.last_name_load);
            assert!((65..=119).contains(&delta), "delta {delta}");
            assert!(delta != 96 && delta != 112, "delta {delta}");
            assert!(constants.last_name_run <= 255 && constants.last_name_load <= 255);
            assert!(constants.customer_id <= 1023 && constants.item_id <= 8191);
        }
    }

    #[test]
    fn last_names_are_built_from_syllables() {
        assert_eq!(last_name(0), "BARBARBAR");
        assert_eq!(last_name(371), "PRICALLYOUGHT");
        assert_eq!(last_name(999), "EINGEINGEING");
        assert_eq!(last_name(40), "BARPRESBAR");
        // Every name fits c_last VARCHAR(16).
        assert!((0..1000).all(|number| last_name(number).len() <= 16));
    }

    #[test]
    fn generated_text_has_the_spec_lengths_and_characters() {
        let mut random = Random::new(4);
        let mut original = 0;
        for _ in 0..10_000 {
            let text = random.alphanumeric(8, 16);
            assert!((8..=16).contains(&text.len()));
            assert!(text.bytes().all(|byte| byte.is_ascii_alphanumeric()));
            let digits = random.numeric(16, 16);
            assert!(digits.len() == 16 && digits.bytes().all(|byte| byte.is_ascii_digit()));
            let zip = random.zip();
            assert!(zip.len() == 9 && zip.ends_with("11111"));
            let data = random.item_data();
            assert!((26..=50).contains(&data.len()));
            original += u32::from(data.contains("ORIGINAL"));
        }
        assert!(
            (800..=1200).contains(&original),
            "{original} of 10000 hold ORIGINAL"
        );
    }

    #[test]
    fn shuffling_keeps_every_element() {
        let mut random = Random::new(5);
        let mut ids: Vec<u32> = (1..=3000).collect();
        random.shuffle(&mut ids);
        assert_ne!(ids, (1..=3000).collect::<Vec<u32>>());
        ids.sort_unstable();
        assert_eq!(ids, (1..=3000).collect::<Vec<u32>>());
    }

    #[test]
    fn the_deck_deals_the_mix_exactly() {
        let mut random = Random::new(6);
        let mut deck = Deck::new(&mut random);
        let mut counts = [0u32; 5];
        for _ in 0..100_000 {
            counts[deck.draw(&mut random).index()] += 1;
        }
        assert_eq!(counts, [45_000, 43_000, 4_000, 4_000, 4_000]);
        // Within a single deck of 100, the order is shuffled: the first 45
        // cards are not all New-Orders.
        let mut fresh = Deck::new(&mut random);
        let first: Vec<TransactionKind> = (0..45).map(|_| fresh.draw(&mut random)).collect();
        assert!(first.iter().any(|&kind| kind != TransactionKind::NewOrder));
    }

    #[test]
    fn new_order_inputs_follow_clause_2_4_1() {
        let mut random = Random::new(8);
        let single = home(1);
        let mut rolled_back = 0;
        for _ in 0..20_000 {
            let Input::NewOrder(input) = single.input(TransactionKind::NewOrder, &mut random)
            else {
                panic!("a New-Order was asked for");
            };
            assert!((5..=15).contains(&input.lines.len()));
            assert!((1..=10).contains(&input.district_id));
            assert!((1..=3000).contains(&input.customer_id));
            let unused = input
                .lines
                .iter()
                .filter(|line| line.item_id > ITEMS)
                .count();
            if unused > 0 {
                assert_eq!(unused, 1);
                assert!(input
                    .lines
                    .last()
                    .is_some_and(|line| line.item_id == ITEMS + 1));
                rolled_back += 1;
            }
            for line in &input.lines {
                // One warehouse: every line is local.
                assert_eq!(line.supply_warehouse_id, 1);
                assert!((1..=10).contains(&line.quantity));
            }
        }
        assert!(
            (100..=300).contains(&rolled_back),
            "{rolled_back} of 20000 roll back"
        );
        // With several warehouses, about 1% of lines are remote, never home.
        let several = home(5);
        let (mut lines, mut remote) = (0, 0);
        for _ in 0..5_000 {
            let Input::NewOrder(input) = several.input(TransactionKind::NewOrder, &mut random)
            else {
                panic!("a New-Order was asked for");
            };
            for line in &input.lines {
                lines += 1;
                if line.supply_warehouse_id != 1 {
                    assert!((2..=5).contains(&line.supply_warehouse_id));
                    remote += 1;
                }
            }
        }
        assert!(
            remote > lines / 200 && remote < lines / 50,
            "{remote} of {lines} remote"
        );
    }

    #[test]
    fn payment_inputs_follow_clause_2_5_1() {
        let mut random = Random::new(9);
        let several = home(3);
        let (mut by_name, mut remote) = (0, 0);
        for _ in 0..10_000 {
            let Input::Payment(input) = several.input(TransactionKind::Payment, &mut random) else {
                panic!("a Payment was asked for");
            };
            assert!((100..=500_000).contains(&input.amount_cents));
            assert_eq!(input.warehouse_id, 1);
            if input.customer_warehouse_id != 1 {
                remote += 1;
            } else {
                assert_eq!(input.customer_district_id, input.district_id);
            }
            if let CustomerSelector::ByLastName {
                last_name: name, ..
            } = &input.customer
            {
                assert!(name.len() >= 9);
                by_name += 1;
            }
        }
        assert!((5_500..=6_500).contains(&by_name), "{by_name} by name");
        assert!((1_200..=1_800).contains(&remote), "{remote} remote");
        let Input::StockLevel(stock_level) =
            several.input(TransactionKind::StockLevel, &mut random)
        else {
            panic!("a Stock-Level was asked for");
        };
        assert_eq!(stock_level.district_id, 3);
        assert!((10..=20).contains(&stock_level.threshold));
    }

    #[test]
    fn customers_by_name_take_the_middle_row() {
        let rows = |n: usize| -> Vec<Vec<Option<String>>> {
            (1..=n).map(|id| vec![Some(id.to_string())]).collect()
        };
        let middle = |n: usize| middle_row(&rows(n)).and_then(|row| row[0].clone());
        assert_eq!(middle(0), None);
        assert_eq!(middle(1).as_deref(), Some("1"));
        assert_eq!(middle(4).as_deref(), Some("2"));
        assert_eq!(middle(5).as_deref(), Some("3"));
    }

    #[test]
    fn money_is_exact_in_cents() {
        assert_eq!(parse_cents("300000.00"), Some(30_000_000));
        assert_eq!(parse_cents("-10.00"), Some(-1000));
        assert_eq!(parse_cents("0.5"), Some(50));
        assert_eq!(parse_cents("12"), Some(1200));
        assert_eq!(parse_cents("1.2300"), Some(123));
        assert_eq!(parse_cents(".07"), Some(7));
        assert_eq!(parse_cents("1.005"), None);
        assert_eq!(parse_cents("abc"), None);
        assert_eq!(parse_cents("-"), None);
        assert_eq!(parse_cents(""), None);
        assert_eq!(format_cents(-1000), "-10.00");
        assert_eq!(format_cents(5), "0.05");
        assert_eq!(format_cents(-5), "-0.05");
        assert_eq!(format_cents(0), "0.00");
        // ol_amount = quantity * i_price, with no f64 rounding anywhere.
        let price = parse_cents("99.99").unwrap_or_default();
        assert_eq!(format_cents(7 * price), "699.93");
        // 0.1 + 0.2 is exactly 0.3 in cents (not in f64).
        let sum = parse_cents("0.10").unwrap_or_default() + parse_cents("0.20").unwrap_or_default();
        assert_eq!(format_cents(sum), "0.30");
        for cents in [-123_456_789, -1, 0, 1, 99, 100, 999_999] {
            assert_eq!(parse_cents(&format_cents(cents)), Some(cents));
        }
        assert_eq!(format_rate(0), "0.0000");
        assert_eq!(format_rate(2000), "0.2000");
        assert_eq!(format_rate(5), "0.0005");
    }

    #[test]
    fn datetimes_print_in_utc() {
        let at = |seconds: u64| datetime_text(UNIX_EPOCH + Duration::from_secs(seconds));
        assert_eq!(at(0), "1970-01-01 00:00:00");
        assert_eq!(at(951_782_400), "2000-02-29 00:00:00");
        assert_eq!(at(1_700_000_000), "2023-11-14 22:13:20");
        assert_eq!(at(4_107_542_399), "2100-02-28 23:59:59");
    }

    #[test]
    fn schema_has_nine_tables_partitioned_by_warehouse() {
        let partitioned = schema::create_table_statements(true);
        assert_eq!(partitioned.len(), 9);
        for statement in &partitioned {
            assert!(statement.contains("PRIMARY KEY"), "{statement}");
            assert!(statement.contains("COLLATE=utf8mb4_bin"), "{statement}");
            let by_warehouse = statement.contains("PARTITION BY KEY (");
            let global = statement.starts_with("CREATE TABLE history ")
                || statement.starts_with("CREATE TABLE item ");
            assert_eq!(by_warehouse, !global, "{statement}");
        }
        assert!(partitioned
            .iter()
            .any(|statement| statement.ends_with("PARTITION BY KEY (s_w_id)")));
        assert!(schema::create_table_statements(false)
            .iter()
            .all(|statement| !statement.contains("PARTITION")));
    }

    /// Two warehouses of two districts each, as loaded: consistent.
    fn consistent_figures() -> Figures {
        let mut figures = Figures::default();
        for warehouse_id in 1..=2 {
            figures.warehouse_ytd.insert(warehouse_id, 6_000_000);
            figures.district_ytd_sum.insert(warehouse_id, 6_000_000);
            for district_id in 1..=2 {
                let key = (warehouse_id, district_id);
                figures.next_order_id.insert(key, 3001);
                figures.orders.insert(
                    key,
                    OrderFigures {
                        max_order_id: 3000,
                        order_line_count_sum: 30_123,
                    },
                );
                figures.new_orders.insert(
                    key,
                    NewOrderFigures {
                        max_order_id: 3000,
                        min_order_id: 2101,
                        count: 900,
                    },
                );
                figures.order_lines.insert(key, 30_123);
            }
        }
        figures
    }

    #[test]
    fn consistent_figures_pass() {
        assert_eq!(verdict(&consistent_figures()), Consistency::Ok);
    }

    #[test]
    fn condition_1_names_the_first_warehouse_off() {
        let mut figures = consistent_figures();
        figures.district_ytd_sum.insert(2, 5_999_999);
        let failure = condition_1(&figures).unwrap_or_default();
        assert!(
            failure.starts_with("condition 1: warehouse 2:"),
            "{failure}"
        );
        assert!(
            failure.contains("60000.00") && failure.contains("59999.99"),
            "{failure}"
        );
        figures.warehouse_ytd.insert(1, 1);
        let failure = condition_1(&figures).unwrap_or_default();
        assert!(
            failure.contains("warehouse 1:") && failure.contains("1 more"),
            "{failure}"
        );
    }

    #[test]
    fn condition_2_compares_next_order_ids() {
        let mut figures = consistent_figures();
        figures.next_order_id.insert((2, 1), 3002);
        let failure = condition_2(&figures).unwrap_or_default();
        assert!(failure.contains("warehouse 2 district 1"), "{failure}");
        assert!(failure.contains("MAX(o_id) = 3000"), "{failure}");
        // A district with no new orders is held to the first equality alone.
        let mut figures = consistent_figures();
        figures.new_orders.remove(&(1, 2));
        assert_eq!(condition_2(&figures), None);
        figures.new_orders.insert(
            (1, 1),
            NewOrderFigures {
                max_order_id: 2999,
                min_order_id: 2100,
                count: 900,
            },
        );
        let failure = condition_2(&figures).unwrap_or_default();
        assert!(failure.contains("MAX(no_o_id) = 2999"), "{failure}");
    }

    #[test]
    fn condition_3_finds_gaps_in_new_orders() {
        let mut figures = consistent_figures();
        figures.new_orders.insert(
            (1, 2),
            NewOrderFigures {
                max_order_id: 3000,
                min_order_id: 2101,
                count: 899,
            },
        );
        let failure = condition_3(&figures).unwrap_or_default();
        assert!(
            failure.starts_with("condition 3: warehouse 1 district 2:"),
            "{failure}"
        );
        assert_eq!(condition_1(&figures), None);
        assert_eq!(condition_2(&figures), None);
    }

    #[test]
    fn condition_4_counts_order_lines() {
        let mut figures = consistent_figures();
        figures.order_lines.insert((2, 2), 30_122);
        figures.order_lines.insert((3, 1), 5);
        let failure = condition_4(&figures).unwrap_or_default();
        assert!(failure.contains("warehouse 2 district 2"), "{failure}");
        assert!(failure.contains("1 more"), "{failure}");
        let Consistency::Failed(failures) = verdict(&figures) else {
            panic!("condition 4 fails");
        };
        assert_eq!(failures.len(), 1);
    }

    #[test]
    fn options_are_checked() {
        assert!(TpccOptions::default().validate().is_ok());
        let bad = [
            TpccOptions {
                warehouses: 0,
                ..TpccOptions::default()
            },
            TpccOptions {
                connections: 0,
                ..TpccOptions::default()
            },
            TpccOptions {
                database: "tpcc`; DROP".into(),
                ..TpccOptions::default()
            },
            TpccOptions {
                database: String::new(),
                ..TpccOptions::default()
            },
        ];
        for options in bad {
            assert!(options.validate().is_err(), "{options:?}");
        }
    }

    #[test]
    fn retryable_errors_are_deadlocks_timeouts_and_rollbacks() {
        let error = |code: u16, message: &str| MysqlError {
            code,
            message: message.into(),
        };
        assert!(retryable(&error(1213, "Deadlock found")));
        assert!(retryable(&error(1205, "Lock wait timeout exceeded")));
        assert!(retryable(&error(
            1180,
            "overload (the transaction was rolled back)"
        )));
        assert!(!retryable(&error(1062, "Duplicate entry")));
        assert!(!retryable(&error(0, "the server closed the connection")));
    }

    #[test]
    fn the_report_has_every_figure() {
        let mut stats = MixStats::default();
        stats
            .error_messages
            .push("payment: ERROR 1064: oops".into());
        let options = TpccOptions::default();
        let report = TpccReport::new(
            &options,
            Some(Duration::from_secs(3)),
            Duration::from_secs(30),
            &stats,
            Consistency::Failed(vec!["condition 3: warehouse 1 district 2: ...".into()]),
        );
        let json = report.to_json();
        assert_eq!(json["tpmc"], 0.0);
        assert_eq!(json["warehouses"], 1);
        assert_eq!(json["connections"], 8);
        assert_eq!(json["duration_s"], 30.0);
        assert_eq!(json["load_seconds"], 3.0);
        assert_eq!(
            json["consistency"][0],
            "condition 3: warehouse 1 district 2: ..."
        );
        for name in [
            "new_order",
            "payment",
            "order_status",
            "delivery",
            "stock_level",
        ] {
            for figure in [
                "count",
                "errors",
                "retried",
                "rolled_back",
                "p50_ms",
                "p95_ms",
                "p99_ms",
            ] {
                assert!(
                    json["transactions"][name][figure].is_number(),
                    "{name}.{figure}"
                );
            }
        }
        let text = report.to_text();
        assert!(text.contains("consistency: FAILED"), "{text}");
        assert!(text.contains("ERROR 1064"), "{text}");
        let consistent = TpccReport {
            consistency: Consistency::Ok,
            load_seconds: None,
            ..report
        };
        assert_eq!(consistent.to_json()["consistency"], "ok");
        assert!(consistent.to_json()["load_seconds"].is_null());
        assert!(consistent.is_consistent());
    }
}
