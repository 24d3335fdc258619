// main.go: the Go driver workload (database/sql + github.com/go-sql-driver/mysql)
// that an application would run against a MySQL-compatible server: tables,
// prepared statements, transactions, AUTO_INCREMENT keys, a join, an upsert,
// a JSON document and a delete, each result checked exactly. Prints each step, then
// "driver workload: ok" (exit 0); on a wrong result or an error it prints
// what was expected and what came back, and exits 1. The same workload is
// in crates/cli/tests/drivers/java/src/main/java/tessera/DriverWorkload.java;
// see crates/cli/tests/drivers/README.md.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

func env(name, fallback string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return fallback
}

func step(format string, args ...any) {
	fmt.Printf("step: "+format+"\n", args...)
}

func check(what string, expected, got any) error {
	if fmt.Sprint(expected) != fmt.Sprint(got) {
		return fmt.Errorf("%s: expected %v, got %v", what, expected, got)
	}
	fmt.Printf("  ok: %s = %v\n", what, got)
	return nil
}

// rowsAffected checks a statement's affected-rows count.
func rowsAffected(what string, res sql.Result, expected int64) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: RowsAffected: %w", what, err)
	}
	return check(what+" rows affected", expected, n)
}

func ts(s string) time.Time {
	t, err := time.ParseInLocation("2006-01-02 15:04:05", s, time.UTC)
	if err != nil {
		panic(err)
	}
	return t
}

type customer struct {
	id      int
	name    string
	balance string // DECIMAL(12,2) as its exact text
	created time.Time
}

var initialCustomers = []customer{
	{1, "alice", "123.45", ts("2024-01-15 10:30:00")},
	{2, "bob", "0.50", ts("2023-12-31 23:59:59")},
	{3, "carol", "-7.25", ts("2024-02-29 00:00:01")},
}

const createCustomer = "CREATE TABLE customer (id INT NOT NULL PRIMARY KEY, name VARCHAR(40) NOT NULL, " +
	"balance DECIMAL(12,2) NOT NULL, created DATETIME NOT NULL) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
const createOrders = "CREATE TABLE orders (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, customer_id INT NOT NULL, " +
	"amount DECIMAL(10,2) NOT NULL, note VARCHAR(100), KEY by_customer (customer_id)) " +
	"DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
const insertCustomer = "INSERT INTO customer (id, name, balance, created) VALUES (?, ?, ?, ?)"
const selectCustomer = "SELECT name, balance, created FROM customer WHERE id = ?"

func dropTables(ctx context.Context, db *sql.DB) error {
	for _, q := range []string{"DROP TABLE IF EXISTS orders", "DROP TABLE IF EXISTS customer", "DROP TABLE IF EXISTS profile"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// readCustomer reads one customer through a prepared SELECT by primary key.
func readCustomer(db *sql.DB, id int) (customer, error) {
	stmt, err := db.Prepare(selectCustomer)
	if err != nil {
		return customer{}, fmt.Errorf("prepare %q: %w", selectCustomer, err)
	}
	defer stmt.Close()
	c := customer{id: id}
	var balance []byte
	if err := stmt.QueryRow(id).Scan(&c.name, &balance, &c.created); err != nil {
		return c, err
	}
	c.balance = string(balance)
	return c, nil
}

func checkCustomer(db *sql.DB, want customer) error {
	got, err := readCustomer(db, want.id)
	if err != nil {
		return fmt.Errorf("select customer %d: %w", want.id, err)
	}
	if err := check(fmt.Sprintf("customer %d name", want.id), want.name, got.name); err != nil {
		return err
	}
	if err := check(fmt.Sprintf("customer %d balance", want.id), want.balance, got.balance); err != nil {
		return err
	}
	if !got.created.Equal(want.created) {
		return fmt.Errorf("customer %d created: expected %v, got %v", want.id, want.created, got.created)
	}
	fmt.Printf("  ok: customer %d created = %v\n", want.id, got.created.Format("2006-01-02 15:04:05"))
	return nil
}

func checkAbsent(db *sql.DB, id int) error {
	_, err := readCustomer(db, id)
	if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("customer %d: expected no row, got %v", id, err)
	}
	fmt.Printf("  ok: customer %d absent\n", id)
	return nil
}

func countCustomers(db *sql.DB) (int, error) {
	var n int
	err := db.QueryRow("SELECT COUNT(*) FROM customer").Scan(&n)
	return n, err
}

func createTables(db *sql.DB) error {
	step("create tables customer and orders")
	for _, q := range []string{createCustomer, createOrders} {
		if _, err := db.Exec(q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

func insertCommitted(db *sql.DB) error {
	step("insert %d customers with a prepared INSERT in one transaction, commit", len(initialCustomers))
	tx, err := db.Begin()
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	stmt, err := tx.Prepare(insertCustomer)
	if err != nil {
		return fmt.Errorf("prepare %q: %w", insertCustomer, err)
	}
	defer stmt.Close()
	for _, c := range initialCustomers {
		res, err := stmt.Exec(c.id, c.name, c.balance, c.created)
		if err != nil {
			return fmt.Errorf("insert customer %d: %w", c.id, err)
		}
		if err := rowsAffected(fmt.Sprintf("insert customer %d", c.id), res, 1); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	n, err := countCustomers(db)
	if err != nil {
		return fmt.Errorf("count customers: %w", err)
	}
	return check("customers after commit", len(initialCustomers), n)
}

func insertRolledBack(db *sql.DB) error {
	step("insert customer 4 in a second transaction, roll back")
	tx, err := db.Begin()
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	stmt, err := tx.Prepare(insertCustomer)
	if err != nil {
		return fmt.Errorf("prepare %q: %w", insertCustomer, err)
	}
	defer stmt.Close()
	res, err := stmt.Exec(4, "dave", "1.00", ts("2024-03-01 12:00:00"))
	if err != nil {
		return fmt.Errorf("insert customer 4: %w", err)
	}
	if err := rowsAffected("insert customer 4", res, 1); err != nil {
		return err
	}
	var inside int
	if err := tx.QueryRow("SELECT COUNT(*) FROM customer WHERE id = ?", 4).Scan(&inside); err != nil {
		return fmt.Errorf("count inside transaction: %w", err)
	}
	if err := check("customer 4 visible inside its transaction", 1, inside); err != nil {
		return err
	}
	if err := tx.Rollback(); err != nil {
		return fmt.Errorf("rollback: %w", err)
	}
	if err := checkAbsent(db, 4); err != nil {
		return err
	}
	n, err := countCustomers(db)
	if err != nil {
		return fmt.Errorf("count customers: %w", err)
	}
	return check("customers after rollback", len(initialCustomers), n)
}

func selectByKey(db *sql.DB) error {
	step("prepared SELECT by primary key: name, exact DECIMAL balance, DATETIME created")
	for _, c := range initialCustomers {
		if err := checkCustomer(db, c); err != nil {
			return err
		}
	}
	return checkAbsent(db, 99)
}

func updateForUpdate(db *sql.DB) error {
	step("transaction: SELECT ... FOR UPDATE customer 1, prepared UPDATE of its balance, commit")
	tx, err := db.Begin()
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	var balance []byte
	if err := tx.QueryRow("SELECT balance FROM customer WHERE id = ? FOR UPDATE", 1).Scan(&balance); err != nil {
		return fmt.Errorf("select for update: %w", err)
	}
	if err := check("customer 1 balance read FOR UPDATE", "123.45", string(balance)); err != nil {
		return err
	}
	stmt, err := tx.Prepare("UPDATE customer SET balance = balance + ? WHERE id = ?")
	if err != nil {
		return fmt.Errorf("prepare update: %w", err)
	}
	defer stmt.Close()
	res, err := stmt.Exec("76.55", 1)
	if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	if err := rowsAffected("update customer 1", res, 1); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return checkCustomer(db, customer{1, "alice", "200.00", initialCustomers[0].created})
}

type order struct {
	customerID int
	amount     string
	note       sql.NullString
}

var orders = []order{
	{1, "10.00", sql.NullString{String: "first", Valid: true}},
	{1, "5.25", sql.NullString{}},
	{2, "3.50", sql.NullString{String: "bob's order", Valid: true}},
	{1, "0.75", sql.NullString{String: "third", Valid: true}},
}

func noteText(n sql.NullString) string {
	if !n.Valid {
		return "NULL"
	}
	return n.String
}

func insertOrders(db *sql.DB) error {
	step("insert %d orders, check AUTO_INCREMENT ids from LastInsertId", len(orders))
	stmt, err := db.Prepare("INSERT INTO orders (customer_id, amount, note) VALUES (?, ?, ?)")
	if err != nil {
		return fmt.Errorf("prepare insert orders: %w", err)
	}
	defer stmt.Close()
	var ids []int64
	for i, o := range orders {
		res, err := stmt.Exec(o.customerID, o.amount, o.note)
		if err != nil {
			return fmt.Errorf("insert order %d: %w", i, err)
		}
		if err := rowsAffected(fmt.Sprintf("insert order %d", i), res, 1); err != nil {
			return err
		}
		id, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("order %d LastInsertId: %w", i, err)
		}
		if id <= 0 || (len(ids) > 0 && id <= ids[len(ids)-1]) {
			return fmt.Errorf("order %d id: expected > 0 and > previous ids %v, got %d", i, ids, id)
		}
		fmt.Printf("  ok: order %d got id %d\n", i, id)
		ids = append(ids, id)
	}
	rows, err := db.Query("SELECT id, customer_id, amount, note FROM orders ORDER BY id")
	if err != nil {
		return fmt.Errorf("select orders: %w", err)
	}
	defer rows.Close()
	var stored []string
	for rows.Next() {
		var id int64
		var o order
		var amount []byte
		if err := rows.Scan(&id, &o.customerID, &amount, &o.note); err != nil {
			return fmt.Errorf("scan order: %w", err)
		}
		o.amount = string(amount)
		stored = append(stored, fmt.Sprintf("%d:%d:%s:%s", id, o.customerID, o.amount, noteText(o.note)))
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read orders: %w", err)
	}
	var want []string
	for i, o := range orders {
		want = append(want, fmt.Sprintf("%d:%d:%s:%s", ids[i], o.customerID, o.amount, noteText(o.note)))
	}
	return check("stored orders (id:customer:amount:note)", strings.Join(want, " "), strings.Join(stored, " "))
}

func join(db *sql.DB) error {
	const q = "SELECT c.name, SUM(o.amount) FROM customer c JOIN orders o ON o.customer_id = c.id GROUP BY c.name ORDER BY c.name"
	step("join: %s", q)
	// Once as a text-protocol query and once as a prepared statement.
	for _, prepared := range []bool{false, true} {
		var rows *sql.Rows
		var err error
		if prepared {
			var stmt *sql.Stmt
			if stmt, err = db.Prepare(q); err == nil {
				defer stmt.Close()
				rows, err = stmt.Query()
			}
		} else {
			rows, err = db.Query(q)
		}
		if err != nil {
			return fmt.Errorf("join (prepared=%v): %w", prepared, err)
		}
		var got []string
		for rows.Next() {
			var name string
			var sum []byte
			if err := rows.Scan(&name, &sum); err != nil {
				rows.Close()
				return fmt.Errorf("scan join: %w", err)
			}
			got = append(got, name+"="+string(sum))
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return fmt.Errorf("read join: %w", err)
		}
		if err := check(fmt.Sprintf("join result (prepared=%v)", prepared), "alice=16.00 bob=3.50", strings.Join(got, " ")); err != nil {
			return err
		}
	}
	return nil
}

func upsert(db *sql.DB) error {
	const q = "INSERT INTO customer (id, name, balance, created) VALUES (?, ?, ?, ?) " +
		"ON DUPLICATE KEY UPDATE balance = balance + VALUES(balance)"
	step("upsert: %s", q)
	stmt, err := db.Prepare(q)
	if err != nil {
		return fmt.Errorf("prepare upsert: %w", err)
	}
	defer stmt.Close()
	res, err := stmt.Exec(2, "bob-ignored", "10.00", ts("2025-01-01 00:00:00"))
	if err != nil {
		return fmt.Errorf("upsert existing customer 2: %w", err)
	}
	if err := rowsAffected("upsert existing customer 2", res, 2); err != nil {
		return err
	}
	if err := checkCustomer(db, customer{2, "bob", "10.50", initialCustomers[1].created}); err != nil {
		return err
	}
	erin := customer{5, "erin", "42.00", ts("2025-06-30 08:15:30")}
	res, err = stmt.Exec(erin.id, erin.name, erin.balance, erin.created)
	if err != nil {
		return fmt.Errorf("upsert new customer 5: %w", err)
	}
	if err := rowsAffected("upsert new customer 5", res, 1); err != nil {
		return err
	}
	return checkCustomer(db, erin)
}

// jsonDocuments stores a document through a prepared INSERT, reads it
// back whole and by path (the server describes JSON with the binary
// character set, as MySQL does: the driver must still give UTF-8 text),
// changes it with JSON_SET and finds it by a JSON comparison.
func jsonDocuments(db *sql.DB) error {
	step("JSON column: prepared INSERT, ->, ->>, JSON_SET, a JSON comparison")
	if _, err := db.Exec("CREATE TABLE profile (id INT NOT NULL PRIMARY KEY, doc JSON)"); err != nil {
		return fmt.Errorf("create profile: %w", err)
	}
	if _, err := db.Exec("INSERT INTO profile VALUES (?, ?)", 1, `{"tags":["x"],"name":"Zoë"}`); err != nil {
		return fmt.Errorf("insert profile: %w", err)
	}
	var doc, name string
	var tags int
	const q = "SELECT doc, doc->>'$.name', JSON_LENGTH(doc->'$.tags') FROM profile WHERE id = ?"
	if err := db.QueryRow(q, 1).Scan(&doc, &name, &tags); err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	if err := check("stored document (normalized)", `{"name": "Zoë", "tags": ["x"]}`, doc); err != nil {
		return err
	}
	if err := check("doc->>'$.name'", "Zoë", name); err != nil {
		return err
	}
	if err := check("tags", 1, tags); err != nil {
		return err
	}
	if _, err := db.Exec("UPDATE profile SET doc = JSON_SET(doc, '$.age', ?) WHERE id = ?", 42, 1); err != nil {
		return fmt.Errorf("JSON_SET: %w", err)
	}
	var id int
	if err := db.QueryRow("SELECT id FROM profile WHERE doc->'$.age' = ? AND doc->'$.name' = ?", 42, "Zoë").Scan(&id); err != nil {
		return fmt.Errorf("select by JSON values: %w", err)
	}
	return check("profile found by its document", 1, id)
}

func deleteAndDrop(db *sql.DB) error {
	step("prepared DELETE of customer 3 by key, then DROP the tables")
	stmt, err := db.Prepare("DELETE FROM customer WHERE id = ?")
	if err != nil {
		return fmt.Errorf("prepare delete: %w", err)
	}
	defer stmt.Close()
	res, err := stmt.Exec(3)
	if err != nil {
		return fmt.Errorf("delete customer 3: %w", err)
	}
	if err := rowsAffected("delete customer 3", res, 1); err != nil {
		return err
	}
	if err := checkAbsent(db, 3); err != nil {
		return err
	}
	rows, err := db.Query("SELECT id FROM customer ORDER BY id")
	if err != nil {
		return fmt.Errorf("select ids: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			return fmt.Errorf("scan id: %w", err)
		}
		ids = append(ids, strconv.Itoa(id))
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read ids: %w", err)
	}
	if err := check("customer ids left", "1,2,5", strings.Join(ids, ",")); err != nil {
		return err
	}
	// Pagination with parameters: the driver prepares it on the server,
	// LIMIT and OFFSET included.
	var paged int
	if err := db.QueryRow("SELECT id FROM customer ORDER BY id LIMIT ? OFFSET ?", 1, 1).Scan(&paged); err != nil {
		return fmt.Errorf("page of ids: %w", err)
	}
	if err := check("second customer id", "2", strconv.Itoa(paged)); err != nil {
		return err
	}
	for _, q := range []string{"DROP TABLE orders", "DROP TABLE customer", "DROP TABLE profile"} {
		if _, err := db.Exec(q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
		fmt.Printf("  ok: %s\n", q)
	}
	return nil
}

func main() {
	host := flag.String("host", env("DRIVER_HOST", "127.0.0.1"), "server host (env DRIVER_HOST)")
	port := flag.Int("port", func() int { p, _ := strconv.Atoi(env("DRIVER_PORT", "3306")); return p }(), "server port (env DRIVER_PORT)")
	user := flag.String("user", env("DRIVER_USER", "app"), "user (env DRIVER_USER)")
	password := flag.String("password", env("DRIVER_PASSWORD", ""), "password (env DRIVER_PASSWORD)")
	database := flag.String("database", env("DRIVER_DATABASE", "appdb"), "database (env DRIVER_DATABASE)")
	useTLS := flag.Bool("tls", env("DRIVER_TLS", "") == "1", "connect over TLS, the server's certificate not verified (env DRIVER_TLS=1)")
	flag.Parse()

	cfg := mysql.NewConfig()
	cfg.User = *user
	cfg.Passwd = *password
	cfg.Net = "tcp"
	cfg.Addr = fmt.Sprintf("%s:%d", *host, *port)
	cfg.DBName = *database
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.Timeout = 10 * time.Second
	cfg.ReadTimeout = 60 * time.Second
	cfg.WriteTimeout = 60 * time.Second
	if *useTLS {
		cfg.TLSConfig = "skip-verify"
	}

	fmt.Printf("go driver workload: %s@%s/%s (go-sql-driver/mysql, server-side prepared statements)\n", cfg.User, cfg.Addr, cfg.DBName)
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		fmt.Printf("FAILED: open: %v\n", err)
		os.Exit(1)
	}
	defer db.Close()

	err = func() error {
		step("connect")
		if err := db.Ping(); err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		var version string
		if err := db.QueryRow("SELECT VERSION()").Scan(&version); err != nil {
			return fmt.Errorf("SELECT VERSION(): %w", err)
		}
		fmt.Printf("  ok: server version %s\n", version)
		step("drop leftover tables (DROP TABLE IF EXISTS)")
		if err := dropTables(context.Background(), db); err != nil {
			return err
		}
		for _, s := range []func(*sql.DB) error{
			createTables, insertCommitted, insertRolledBack, selectByKey, updateForUpdate,
			insertOrders, join, upsert, jsonDocuments, deleteAndDrop,
		} {
			if err := s(db); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		fmt.Printf("FAILED: %v\n", err)
		// Best effort: leave no tables behind, without hanging on a lock.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if cerr := dropTables(ctx, db); cerr != nil {
			fmt.Printf("cleanup after failure: %v\n", cerr)
		}
		db.Close()
		os.Exit(1)
	}
	fmt.Println("driver workload: ok")
}
