//! tpcc's five transactions (TPC-C clause 2) as DBT2 runs them: the deck
//! that deals the mix, each transaction's input drawn as its clause 2.x.1
//! says, and its statements, values written as SQL literals, between
//! `START TRANSACTION` and `COMMIT`. Retrying, reconnecting and counting
//! are the terminal's (`terminal`), which runs the same input again after
//! a deadlock.

use super::random::{last_name, NurandConstants, Random};
use super::values::{format_cents, parse_cents};
use super::{retryable, CUSTOMERS_PER_DISTRICT, DISTRICTS_PER_WAREHOUSE, ITEMS};
use crate::mysql::{Connection, MysqlError, Param, QueryResult};
use std::fmt;
use std::str::FromStr;

/// An item id no item has: clause 2.4.1.4's unused value, which makes 1%
/// of New-Orders roll back.
const UNUSED_ITEM: u32 = ITEMS + 1;

/// Stock-Level looks at the order lines of this many recent orders
/// (clause 2.8.2.2).
const STOCK_LEVEL_ORDERS: u32 = 20;

/// A transaction type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TransactionKind {
    NewOrder,
    Payment,
    OrderStatus,
    Delivery,
    StockLevel,
}

impl TransactionKind {
    /// Every kind, in report order (`index` is the position here).
    pub(super) const ALL: [TransactionKind; 5] = [
        TransactionKind::NewOrder,
        TransactionKind::Payment,
        TransactionKind::OrderStatus,
        TransactionKind::Delivery,
        TransactionKind::StockLevel,
    ];

    /// The name in reports.
    pub(super) fn name(self) -> &'static str {
        match self {
            TransactionKind::NewOrder => "new_order",
            TransactionKind::Payment => "payment",
            TransactionKind::OrderStatus => "order_status",
            TransactionKind::Delivery => "delivery",
            TransactionKind::StockLevel => "stock_level",
        }
    }

    /// The position in `ALL`.
    pub(super) fn index(self) -> usize {
        match self {
            TransactionKind::NewOrder => 0,
            TransactionKind::Payment => 1,
            TransactionKind::OrderStatus => 2,
            TransactionKind::Delivery => 3,
            TransactionKind::StockLevel => 4,
        }
    }

    /// Cards of this kind in a deck of 100: the mix, with clause 5.2.3's
    /// minimums for the small three and New-Order taking the rest less
    /// Payment's 43.
    fn cards(self) -> u32 {
        match self {
            TransactionKind::NewOrder => 45,
            TransactionKind::Payment => 43,
            TransactionKind::OrderStatus
            | TransactionKind::Delivery
            | TransactionKind::StockLevel => 4,
        }
    }
}

/// The mix as a shuffled deck (clause 5.2.4.2's card deck): every 100
/// draws hold exactly the mix, so a short run keeps the proportions.
pub(super) struct Deck {
    cards: Vec<TransactionKind>,
    next: usize,
}

impl Deck {
    /// A deck, shuffled by `random`.
    pub(super) fn new(random: &mut Random) -> Deck {
        let mut cards: Vec<TransactionKind> = TransactionKind::ALL
            .into_iter()
            .flat_map(|kind| vec![kind; kind.cards() as usize])
            .collect();
        random.shuffle(&mut cards);
        Deck { cards, next: 0 }
    }

    /// The next card; the deck is shuffled again once dealt.
    pub(super) fn draw(&mut self, random: &mut Random) -> TransactionKind {
        if self.next == self.cards.len() {
            random.shuffle(&mut self.cards);
            self.next = 0;
        }
        let kind = self.cards[self.next];
        self.next += 1;
        kind
    }
}

/// Why an attempt failed.
#[derive(Debug)]
pub(super) enum Failure {
    /// The server's error, or the connection's (code 0).
    Sql(MysqlError),
    /// A row the transaction needs is missing or unreadable: the data is
    /// not TPC-C's (not loaded, or broken).
    Data(String),
}

impl From<MysqlError> for Failure {
    fn from(error: MysqlError) -> Failure {
        Failure::Sql(error)
    }
}

impl Failure {
    /// A deadlock, lock wait timeout or other rollback the server asks to
    /// retry: the same input may run again.
    pub(super) fn is_retryable(&self) -> bool {
        matches!(self, Failure::Sql(error) if retryable(error))
    }

    /// The connection is broken: nothing more can run on it.
    pub(super) fn connection_lost(&self) -> bool {
        matches!(self, Failure::Sql(error) if error.code == 0)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Sql(error) => write!(f, "{error}"),
            Failure::Data(message) => write!(f, "unexpected data: {message}"),
        }
    }
}

/// How a transaction that did not fail ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    Committed,
    /// New-Order's intentional rollback (the unused item).
    RolledBack,
}

/// Where a terminal works and the constants it draws with.
#[derive(Clone, Copy, Debug)]
pub(super) struct Home {
    /// The terminal's warehouse.
    pub(super) warehouse_id: u32,
    /// Warehouses in the database (remote warehouses are drawn from them).
    pub(super) warehouses: u32,
    /// The district of the terminal's Stock-Levels (clause 2.8.1.1: fixed
    /// per terminal).
    pub(super) stock_level_district: u32,
    pub(super) constants: NurandConstants,
}

/// How a customer is chosen (clause 2.5.1.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum CustomerSelector {
    ById(u32),
    /// By last name; `fallback_id` when no customer has it (which a
    /// TPC-C population never lacks, but a partial one may).
    ByLastName {
        last_name: String,
        fallback_id: u32,
    },
}

/// One line of a New-Order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct OrderLineInput {
    pub(super) item_id: u32,
    pub(super) supply_warehouse_id: u32,
    pub(super) quantity: u32,
}

/// A New-Order's input (clause 2.4.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct NewOrderInput {
    pub(super) warehouse_id: u32,
    pub(super) district_id: u32,
    pub(super) customer_id: u32,
    pub(super) lines: Vec<OrderLineInput>,
}

/// A Payment's input (clause 2.5.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct PaymentInput {
    pub(super) warehouse_id: u32,
    pub(super) district_id: u32,
    pub(super) customer_warehouse_id: u32,
    pub(super) customer_district_id: u32,
    pub(super) customer: CustomerSelector,
    pub(super) amount_cents: i64,
}

/// An Order-Status's input (clause 2.6.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct OrderStatusInput {
    pub(super) warehouse_id: u32,
    pub(super) district_id: u32,
    pub(super) customer: CustomerSelector,
}

/// A Delivery's input (clause 2.7.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct DeliveryInput {
    pub(super) warehouse_id: u32,
    pub(super) carrier_id: u32,
}

/// A Stock-Level's input (clause 2.8.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct StockLevelInput {
    pub(super) warehouse_id: u32,
    pub(super) district_id: u32,
    pub(super) threshold: u32,
}

/// One transaction's input: drawn once, run again as it is after a
/// deadlock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Input {
    NewOrder(NewOrderInput),
    Payment(PaymentInput),
    OrderStatus(OrderStatusInput),
    Delivery(DeliveryInput),
    StockLevel(StockLevelInput),
}

impl Home {
    /// A `kind` transaction's input.
    pub(super) fn input(&self, kind: TransactionKind, random: &mut Random) -> Input {
        match kind {
            TransactionKind::NewOrder => Input::NewOrder(self.new_order(random)),
            TransactionKind::Payment => Input::Payment(self.payment(random)),
            TransactionKind::OrderStatus => Input::OrderStatus(OrderStatusInput {
                warehouse_id: self.warehouse_id,
                district_id: random.between(1, DISTRICTS_PER_WAREHOUSE),
                customer: self.customer(random),
            }),
            TransactionKind::Delivery => Input::Delivery(DeliveryInput {
                warehouse_id: self.warehouse_id,
                carrier_id: random.between(1, 10),
            }),
            TransactionKind::StockLevel => Input::StockLevel(StockLevelInput {
                warehouse_id: self.warehouse_id,
                district_id: self.stock_level_district,
                threshold: random.between(10, 20),
            }),
        }
    }

    fn new_order(&self, random: &mut Random) -> NewOrderInput {
        let district_id = random.between(1, DISTRICTS_PER_WAREHOUSE);
        let customer_id =
            random.nurand(1023, 1, CUSTOMERS_PER_DISTRICT, self.constants.customer_id);
        let line_count = random.between(5, 15);
        let rolls_back = random.percent(1);
        let mut lines: Vec<OrderLineInput> = (0..line_count)
            .map(|_| {
                let item_id = random.nurand(8191, 1, ITEMS, self.constants.item_id);
                // 1% of lines come from another warehouse, when there is one.
                let supply_warehouse_id = if self.warehouses > 1 && random.percent(1) {
                    self.other_warehouse(random)
                } else {
                    self.warehouse_id
                };
                OrderLineInput {
                    item_id,
                    supply_warehouse_id,
                    quantity: random.between(1, 10),
                }
            })
            .collect();
        // Stock rows are locked in key order, so New-Orders sharing items
        // wait for one another instead of deadlocking.
        lines.sort_by_key(|line| (line.supply_warehouse_id, line.item_id));
        if rolls_back {
            // The unused item is the last line (clause 2.4.1.4), so the
            // rollback undoes work already done. There are at least 5.
            let last = lines.len() - 1;
            lines[last].item_id = UNUSED_ITEM;
        }
        NewOrderInput {
            warehouse_id: self.warehouse_id,
            district_id,
            customer_id,
            lines,
        }
    }

    fn payment(&self, random: &mut Random) -> PaymentInput {
        let district_id = random.between(1, DISTRICTS_PER_WAREHOUSE);
        // 85% of customers pay at their own warehouse (clause 2.5.1.2).
        let (customer_warehouse_id, customer_district_id) =
            if self.warehouses == 1 || random.percent(85) {
                (self.warehouse_id, district_id)
            } else {
                (
                    self.other_warehouse(random),
                    random.between(1, DISTRICTS_PER_WAREHOUSE),
                )
            };
        PaymentInput {
            warehouse_id: self.warehouse_id,
            district_id,
            customer_warehouse_id,
            customer_district_id,
            customer: self.customer(random),
            amount_cents: i64::from(random.between(100, 500_000)),
        }
    }

    /// 60% by last name, 40% by id (clauses 2.5.1.2, 2.6.1.2).
    fn customer(&self, random: &mut Random) -> CustomerSelector {
        if random.percent(60) {
            CustomerSelector::ByLastName {
                last_name: last_name(random.nurand(255, 0, 999, self.constants.last_name_run)),
                fallback_id: random.nurand(
                    1023,
                    1,
                    CUSTOMERS_PER_DISTRICT,
                    self.constants.customer_id,
                ),
            }
        } else {
            CustomerSelector::ById(random.nurand(
                1023,
                1,
                CUSTOMERS_PER_DISTRICT,
                self.constants.customer_id,
            ))
        }
    }

    /// A warehouse other than home, uniformly (needs two warehouses).
    fn other_warehouse(&self, random: &mut Random) -> u32 {
        let pick = random.between(1, self.warehouses - 1);
        if pick >= self.warehouse_id {
            pick + 1
        } else {
            pick
        }
    }
}

impl Input {
    /// The transaction's kind.
    pub(super) fn kind(&self) -> TransactionKind {
        match self {
            Input::NewOrder(_) => TransactionKind::NewOrder,
            Input::Payment(_) => TransactionKind::Payment,
            Input::OrderStatus(_) => TransactionKind::OrderStatus,
            Input::Delivery(_) => TransactionKind::Delivery,
            Input::StockLevel(_) => TransactionKind::StockLevel,
        }
    }

    /// Runs the transaction once. On an error the transaction is left
    /// open: the caller rolls it back.
    pub(super) fn run(&self, connection: &mut Connection) -> Result<Outcome, Failure> {
        connection.query("START TRANSACTION")?;
        let outcome = match self {
            Input::NewOrder(input) => new_order(connection, input)?,
            Input::Payment(input) => payment(connection, input)?,
            Input::OrderStatus(input) => order_status(connection, input)?,
            Input::Delivery(input) => delivery(connection, input)?,
            Input::StockLevel(input) => stock_level(connection, input)?,
        };
        if outcome == Outcome::Committed {
            connection.query("COMMIT")?;
        }
        Ok(outcome)
    }
}

/// An integer parameter.
fn int(value: impl Into<i64>) -> Param<'static> {
    Param::Int(value.into())
}

/// New-Order (clause 2.4.2).
fn new_order(connection: &mut Connection, input: &NewOrderInput) -> Result<Outcome, Failure> {
    let warehouse_id = input.warehouse_id;
    let district_id = input.district_id;
    let customer_id = input.customer_id;
    connection.run(
        "SELECT w_tax FROM warehouse WHERE w_id = ?",
        &[int(warehouse_id)],
    )?;
    let district = connection.run(
        "SELECT d_tax, d_next_o_id FROM district WHERE d_w_id = ? AND d_id = ? FOR UPDATE",
        &[int(warehouse_id), int(district_id)],
    )?;
    let order_id: u32 = parsed(first_row(&district, "district")?, 1, "d_next_o_id")?;
    connection.run(
        "UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = ? AND d_id = ?",
        &[int(warehouse_id), int(district_id)],
    )?;
    let customer = connection.run(
        "SELECT c_discount, c_last, c_credit FROM customer \
         WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
        &[int(warehouse_id), int(district_id), int(customer_id)],
    )?;
    first_row(&customer, "customer")?;
    let all_local = input
        .lines
        .iter()
        .all(|line| line.supply_warehouse_id == warehouse_id);
    let line_count = input.lines.len() as i64;
    connection.run(
        "INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, \
         o_all_local) VALUES (?, ?, ?, ?, NOW(), NULL, ?, ?)",
        &[
            int(order_id),
            int(district_id),
            int(warehouse_id),
            int(customer_id),
            int(line_count),
            int(all_local),
        ],
    )?;
    connection.run(
        "INSERT INTO new_order (no_o_id, no_d_id, no_w_id) VALUES (?, ?, ?)",
        &[int(order_id), int(district_id), int(warehouse_id)],
    )?;
    // The stock row's district information column is named by the
    // district: one statement text per district.
    let stock_query = format!(
        "SELECT s_quantity, s_data, s_dist_{district_id:02} FROM stock \
         WHERE s_w_id = ? AND s_i_id = ? FOR UPDATE"
    );
    for (index, line) in input.lines.iter().enumerate() {
        let line_number = index as i64 + 1;
        let item_id = line.item_id;
        let supply_warehouse_id = line.supply_warehouse_id;
        let item = connection.run(
            "SELECT i_price, i_name, i_data FROM item WHERE i_id = ?",
            &[int(item_id)],
        )?;
        let Some(item_row) = item.rows.first() else {
            // Clause 2.4.2.3: an unused item rolls the whole order back.
            connection.query("ROLLBACK")?;
            return Ok(Outcome::RolledBack);
        };
        let price_cents = money(item_row, 0, "i_price")?;
        let stock = connection.run(&stock_query, &[int(supply_warehouse_id), int(item_id)])?;
        let stock_row = first_row(&stock, "stock")?;
        let stock_quantity: i64 = parsed(stock_row, 0, "s_quantity")?;
        let district_information = field(stock_row, 2, "s_dist")?;
        let quantity = i64::from(line.quantity);
        // Clause 2.4.2.2: stock is replenished by 91 when it would fall
        // below 10.
        let new_quantity = if stock_quantity >= quantity + 10 {
            stock_quantity - quantity
        } else {
            stock_quantity - quantity + 91
        };
        let remote = supply_warehouse_id != warehouse_id;
        connection.run(
            "UPDATE stock SET s_quantity = ?, s_ytd = s_ytd + ?, \
             s_order_cnt = s_order_cnt + 1, s_remote_cnt = s_remote_cnt + ? \
             WHERE s_w_id = ? AND s_i_id = ?",
            &[
                int(new_quantity),
                int(quantity),
                int(remote),
                int(supply_warehouse_id),
                int(item_id),
            ],
        )?;
        // Amounts go as cents over 100: an exact DECIMAL on every server.
        connection.run(
            "INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, \
             ol_supply_w_id, ol_delivery_d, ol_quantity, ol_amount, ol_dist_info) VALUES \
             (?, ?, ?, ?, ?, ?, NULL, ?, ? / 100, ?)",
            &[
                int(order_id),
                int(district_id),
                int(warehouse_id),
                int(line_number),
                int(item_id),
                int(supply_warehouse_id),
                int(quantity),
                int(quantity * price_cents),
                Param::Text(district_information),
            ],
        )?;
    }
    Ok(Outcome::Committed)
}

/// Payment (clause 2.5.2).
fn payment(connection: &mut Connection, input: &PaymentInput) -> Result<Outcome, Failure> {
    let warehouse_id = input.warehouse_id;
    let district_id = input.district_id;
    let customer_warehouse_id = input.customer_warehouse_id;
    let customer_district_id = input.customer_district_id;
    let cents = input.amount_cents;
    connection.run(
        "UPDATE warehouse SET w_ytd = w_ytd + ? / 100 WHERE w_id = ?",
        &[int(cents), int(warehouse_id)],
    )?;
    let warehouse = connection.run(
        "SELECT w_name, w_street_1, w_street_2, w_city, w_state, w_zip FROM warehouse \
         WHERE w_id = ?",
        &[int(warehouse_id)],
    )?;
    let warehouse_name = field(first_row(&warehouse, "warehouse")?, 0, "w_name")?;
    connection.run(
        "UPDATE district SET d_ytd = d_ytd + ? / 100 WHERE d_w_id = ? AND d_id = ?",
        &[int(cents), int(warehouse_id), int(district_id)],
    )?;
    let district = connection.run(
        "SELECT d_name, d_street_1, d_street_2, d_city, d_state, d_zip FROM district \
         WHERE d_w_id = ? AND d_id = ?",
        &[int(warehouse_id), int(district_id)],
    )?;
    let district_name = field(first_row(&district, "district")?, 0, "d_name")?;
    let customer_id = find_customer(
        connection,
        customer_warehouse_id,
        customer_district_id,
        &input.customer,
    )?;
    let customer_key = [
        int(customer_warehouse_id),
        int(customer_district_id),
        int(customer_id),
    ];
    let customer = connection.run(
        "SELECT c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, c_zip, \
         c_phone, c_since, c_credit, c_credit_lim, c_discount, c_balance FROM customer \
         WHERE c_w_id = ? AND c_d_id = ? AND c_id = ? FOR UPDATE",
        &customer_key,
    )?;
    let credit = field(first_row(&customer, "customer")?, 10, "c_credit")?;
    // CHAR values may come back padded on some servers.
    if credit.trim_end() == "BC" {
        let data = connection.run(
            "SELECT c_data FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
            &customer_key,
        )?;
        let old_data = field(first_row(&data, "customer")?, 0, "c_data")?;
        // Clause 2.5.2.2: the payment goes in front of the bad-credit
        // customer's history, which is cut at 500 characters.
        let new_data: String = format!(
            "{customer_id} {customer_district_id} {customer_warehouse_id} {district_id} \
             {warehouse_id} {}|{old_data}",
            format_cents(cents)
        )
        .chars()
        .take(500)
        .collect();
        connection.run(
            "UPDATE customer SET c_balance = c_balance - ? / 100, \
             c_ytd_payment = c_ytd_payment + ? / 100, c_payment_cnt = c_payment_cnt + 1, \
             c_data = ? WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
            &[
                int(cents),
                int(cents),
                Param::Text(&new_data),
                customer_key[0],
                customer_key[1],
                customer_key[2],
            ],
        )?;
    } else {
        connection.run(
            "UPDATE customer SET c_balance = c_balance - ? / 100, \
             c_ytd_payment = c_ytd_payment + ? / 100, c_payment_cnt = c_payment_cnt + 1 \
             WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
            &[
                int(cents),
                int(cents),
                customer_key[0],
                customer_key[1],
                customer_key[2],
            ],
        )?;
    }
    // h_data is the two names separated by four spaces (clause 2.5.2.2).
    let history_data = format!("{warehouse_name}    {district_name}");
    connection.run(
        "INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, \
         h_data) VALUES (?, ?, ?, ?, ?, NOW(), ? / 100, ?)",
        &[
            int(customer_id),
            int(customer_district_id),
            int(customer_warehouse_id),
            int(district_id),
            int(warehouse_id),
            int(cents),
            Param::Text(&history_data),
        ],
    )?;
    Ok(Outcome::Committed)
}

/// Order-Status (clause 2.6.2).
fn order_status(connection: &mut Connection, input: &OrderStatusInput) -> Result<Outcome, Failure> {
    let warehouse_id = input.warehouse_id;
    let district_id = input.district_id;
    let customer_id = find_customer(connection, warehouse_id, district_id, &input.customer)?;
    let customer = connection.run(
        "SELECT c_balance, c_first, c_middle, c_last FROM customer \
         WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
        &[int(warehouse_id), int(district_id), int(customer_id)],
    )?;
    first_row(&customer, "customer")?;
    let order = connection.run(
        "SELECT o_id, o_carrier_id, o_entry_d FROM orders \
         WHERE o_w_id = ? AND o_d_id = ? AND o_c_id = ? ORDER BY o_id DESC LIMIT 1",
        &[int(warehouse_id), int(district_id), int(customer_id)],
    )?;
    if let Some(order_row) = order.rows.first() {
        let order_id: u32 = parsed(order_row, 0, "o_id")?;
        connection.run(
            "SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d \
             FROM order_line WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?",
            &[int(warehouse_id), int(district_id), int(order_id)],
        )?;
    }
    Ok(Outcome::Committed)
}

/// Delivery (clause 2.7.4), all ten districts in one transaction.
fn delivery(connection: &mut Connection, input: &DeliveryInput) -> Result<Outcome, Failure> {
    let warehouse_id = input.warehouse_id;
    let carrier_id = input.carrier_id;
    for district_id in 1..=DISTRICTS_PER_WAREHOUSE {
        let oldest = connection.run(
            "SELECT no_o_id FROM new_order WHERE no_w_id = ? AND no_d_id = ? \
             ORDER BY no_o_id LIMIT 1 FOR UPDATE",
            &[int(warehouse_id), int(district_id)],
        )?;
        let Some(oldest_row) = oldest.rows.first() else {
            continue;
        };
        let order_id: u32 = parsed(oldest_row, 0, "no_o_id")?;
        let key = [int(warehouse_id), int(district_id), int(order_id)];
        let deleted = connection.run(
            "DELETE FROM new_order WHERE no_w_id = ? AND no_d_id = ? AND no_o_id = ?",
            &key,
        )?;
        if deleted.affected_rows == 0 {
            continue;
        }
        let order = connection.run(
            "SELECT o_c_id FROM orders WHERE o_w_id = ? AND o_d_id = ? AND o_id = ?",
            &key,
        )?;
        let customer_id: u32 = parsed(first_row(&order, "orders")?, 0, "o_c_id")?;
        connection.run(
            "UPDATE orders SET o_carrier_id = ? WHERE o_w_id = ? AND o_d_id = ? AND o_id = ?",
            &[int(carrier_id), key[0], key[1], key[2]],
        )?;
        connection.run(
            "UPDATE order_line SET ol_delivery_d = NOW() \
             WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?",
            &key,
        )?;
        let total = connection.run(
            "SELECT SUM(ol_amount) FROM order_line \
             WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?",
            &key,
        )?;
        let total_cents = match total.scalar() {
            Some(text) => parse_cents(text)
                .ok_or_else(|| Failure::Data(format!("SUM(ol_amount) is not money: {text:?}")))?,
            None => 0,
        };
        connection.run(
            "UPDATE customer SET c_balance = c_balance + ? / 100, \
             c_delivery_cnt = c_delivery_cnt + 1 \
             WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
            &[
                int(total_cents),
                int(warehouse_id),
                int(district_id),
                int(customer_id),
            ],
        )?;
    }
    Ok(Outcome::Committed)
}

/// Stock-Level (clause 2.8.2).
fn stock_level(connection: &mut Connection, input: &StockLevelInput) -> Result<Outcome, Failure> {
    let warehouse_id = input.warehouse_id;
    let district_id = input.district_id;
    let district = connection.run(
        "SELECT d_next_o_id FROM district WHERE d_w_id = ? AND d_id = ?",
        &[int(warehouse_id), int(district_id)],
    )?;
    let next_order_id: u32 = parsed(first_row(&district, "district")?, 0, "d_next_o_id")?;
    let oldest_order_id = next_order_id.saturating_sub(STOCK_LEVEL_ORDERS);
    connection.run(
        "SELECT COUNT(DISTINCT s.s_i_id) FROM order_line ol \
         JOIN stock s ON s.s_w_id = ol.ol_w_id AND s.s_i_id = ol.ol_i_id \
         WHERE ol.ol_w_id = ? AND ol.ol_d_id = ? AND ol.ol_o_id < ? AND ol.ol_o_id >= ? \
         AND s.s_quantity < ?",
        &[
            int(warehouse_id),
            int(district_id),
            int(next_order_id),
            int(oldest_order_id),
            int(input.threshold),
        ],
    )?;
    Ok(Outcome::Committed)
}

/// The id of the customer `selector` names in warehouse `warehouse_id`,
/// district `district_id`. By last name, the one at position ceil(n / 2)
/// of those with the name sorted by first name (clause 2.5.2.2).
fn find_customer(
    connection: &mut Connection,
    warehouse_id: u32,
    district_id: u32,
    selector: &CustomerSelector,
) -> Result<u32, Failure> {
    match selector {
        CustomerSelector::ById(customer_id) => Ok(*customer_id),
        CustomerSelector::ByLastName {
            last_name: name,
            fallback_id,
        } => {
            let found = connection.run(
                "SELECT c_id FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_last = ? \
                 ORDER BY c_first",
                &[int(warehouse_id), int(district_id), Param::Text(name)],
            )?;
            match middle_row(&found.rows) {
                Some(row) => parsed(row, 0, "c_id"),
                None => Ok(*fallback_id),
            }
        }
    }
}

/// The row at position ceil(n / 2), counting from 1, of `rows`.
pub(super) fn middle_row(rows: &[Vec<Option<String>>]) -> Option<&[Option<String>]> {
    let position = rows.len().div_ceil(2);
    rows.get(position.checked_sub(1)?).map(Vec::as_slice)
}

/// The first row of `result`; a missing `what` row is a data failure.
fn first_row<'r>(result: &'r QueryResult, what: &str) -> Result<&'r [Option<String>], Failure> {
    result
        .rows
        .first()
        .map(Vec::as_slice)
        .ok_or_else(|| Failure::Data(format!("no {what} row")))
}

/// Column `index` of `row`, which must not be NULL.
fn field<'r>(row: &'r [Option<String>], index: usize, what: &str) -> Result<&'r str, Failure> {
    row.get(index)
        .and_then(Option::as_deref)
        .ok_or_else(|| Failure::Data(format!("{what} is NULL or missing")))
}

/// Column `index` of `row` as a number.
fn parsed<T: FromStr>(row: &[Option<String>], index: usize, what: &str) -> Result<T, Failure> {
    let text = field(row, index, what)?;
    text.trim()
        .parse()
        .map_err(|_| Failure::Data(format!("{what} is not a number: {text:?}")))
}

/// Column `index` of `row` as cents.
fn money(row: &[Option<String>], index: usize, what: &str) -> Result<i64, Failure> {
    let text = field(row, index, what)?;
    parse_cents(text).ok_or_else(|| Failure::Data(format!("{what} is not money: {text:?}")))
}
