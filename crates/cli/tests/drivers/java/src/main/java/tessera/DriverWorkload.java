// DriverWorkload.java: the Java driver workload (JDBC + MySQL Connector/J)
// that an application would run against a MySQL-compatible server: tables,
// prepared statements, transactions, AUTO_INCREMENT keys, a join, an upsert,
// a JSON document and a delete, each result checked exactly. Prints each step, then
// "driver workload: ok" (exit 0); on a wrong result or an error it prints
// what was expected and what came back, and exits 1. The same workload is
// in crates/cli/tests/drivers/go/main.go; see crates/cli/tests/drivers/README.md.
package tessera;

import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.sql.Types;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;

public final class DriverWorkload {
    /** A wrong result: what was expected and what came back. */
    static final class Failure extends Exception {
        Failure(String message) {
            super(message);
        }
    }

    record Customer(int id, String name, BigDecimal balance, LocalDateTime created) {}

    record Order(int customerId, BigDecimal amount, String note) {}

    static final String CREATE_CUSTOMER =
            "CREATE TABLE customer (id INT NOT NULL PRIMARY KEY, name VARCHAR(40) NOT NULL, "
                    + "balance DECIMAL(12,2) NOT NULL, created DATETIME NOT NULL) "
                    + "DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin";
    static final String CREATE_ORDERS =
            "CREATE TABLE orders (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, customer_id INT NOT NULL, "
                    + "amount DECIMAL(10,2) NOT NULL, note VARCHAR(100), KEY by_customer (customer_id)) "
                    + "DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin";
    static final String INSERT_CUSTOMER =
            "INSERT INTO customer (id, name, balance, created) VALUES (?, ?, ?, ?)";
    static final String SELECT_CUSTOMER = "SELECT name, balance, created FROM customer WHERE id = ?";
    static final String JOIN =
            "SELECT c.name, SUM(o.amount) FROM customer c JOIN orders o ON o.customer_id = c.id "
                    + "GROUP BY c.name ORDER BY c.name";
    static final String UPSERT =
            "INSERT INTO customer (id, name, balance, created) VALUES (?, ?, ?, ?) "
                    + "ON DUPLICATE KEY UPDATE balance = balance + VALUES(balance)";

    static final List<Customer> INITIAL = List.of(
            new Customer(1, "alice", new BigDecimal("123.45"), LocalDateTime.parse("2024-01-15T10:30:00")),
            new Customer(2, "bob", new BigDecimal("0.50"), LocalDateTime.parse("2023-12-31T23:59:59")),
            new Customer(3, "carol", new BigDecimal("-7.25"), LocalDateTime.parse("2024-02-29T00:00:01")));

    static final List<Order> ORDERS = List.of(
            new Order(1, new BigDecimal("10.00"), "first"),
            new Order(1, new BigDecimal("5.25"), null),
            new Order(2, new BigDecimal("3.50"), "bob's order"),
            new Order(1, new BigDecimal("0.75"), "third"));

    private final Connection conn;

    DriverWorkload(Connection conn) {
        this.conn = conn;
    }

    static void step(String what) {
        System.out.println("step: " + what);
    }

    /** Exact comparison; BigDecimal by equals, so the scale (123.45 vs 123.450) counts too. */
    static void check(String what, Object expected, Object got) throws Failure {
        if (!Objects.equals(expected, got)) {
            throw new Failure(what + ": expected " + expected + ", got " + got);
        }
        System.out.println("  ok: " + what + " = " + got);
    }

    static void dropTables(Connection c, int timeoutSeconds) throws SQLException {
        try (Statement s = c.createStatement()) {
            s.setQueryTimeout(timeoutSeconds);
            s.execute("DROP TABLE IF EXISTS orders");
            s.execute("DROP TABLE IF EXISTS customer");
            s.execute("DROP TABLE IF EXISTS profile");
        }
    }

    int countCustomers() throws SQLException {
        try (Statement s = conn.createStatement();
                ResultSet rs = s.executeQuery("SELECT COUNT(*) FROM customer")) {
            rs.next();
            return rs.getInt(1);
        }
    }

    void setCustomer(PreparedStatement ps, Customer c) throws SQLException {
        ps.setInt(1, c.id());
        ps.setString(2, c.name());
        ps.setBigDecimal(3, c.balance());
        ps.setObject(4, c.created());
    }

    void checkCustomer(Customer want) throws SQLException, Failure {
        try (PreparedStatement ps = conn.prepareStatement(SELECT_CUSTOMER)) {
            ps.setInt(1, want.id());
            try (ResultSet rs = ps.executeQuery()) {
                if (!rs.next()) {
                    throw new Failure("customer " + want.id() + ": expected a row, got none");
                }
                check("customer " + want.id() + " name", want.name(), rs.getString(1));
                check("customer " + want.id() + " balance", want.balance(), rs.getBigDecimal(2));
                check("customer " + want.id() + " created", want.created(),
                        rs.getObject(3, LocalDateTime.class));
                Timestamp ts = rs.getTimestamp(3);
                check("customer " + want.id() + " created (getTimestamp)", want.created(),
                        ts == null ? null : ts.toLocalDateTime());
                if (rs.next()) {
                    throw new Failure("customer " + want.id() + ": expected one row, got more");
                }
            }
        }
    }

    void checkAbsent(int id) throws SQLException, Failure {
        try (PreparedStatement ps = conn.prepareStatement(SELECT_CUSTOMER)) {
            ps.setInt(1, id);
            try (ResultSet rs = ps.executeQuery()) {
                if (rs.next()) {
                    throw new Failure("customer " + id + ": expected no row, got name " + rs.getString(1));
                }
            }
        }
        System.out.println("  ok: customer " + id + " absent");
    }

    interface Work {
        void run() throws SQLException, Failure;
    }

    /**
     * Runs work (which ends with commit() or rollback()) with autocommit off.
     * On a failure it rolls back and leaves autocommit off, rather than letting
     * setAutoCommit(true) commit a half-done transaction.
     */
    void transaction(Work work) throws SQLException, Failure {
        conn.setAutoCommit(false);
        try {
            work.run();
        } catch (SQLException | Failure | RuntimeException e) {
            try {
                conn.rollback();
            } catch (SQLException ignored) {
                // the original failure is what counts
            }
            throw e;
        }
        conn.setAutoCommit(true);
    }

    void createTables() throws SQLException {
        step("create tables customer and orders");
        try (Statement s = conn.createStatement()) {
            s.execute(CREATE_CUSTOMER);
            s.execute(CREATE_ORDERS);
        }
    }

    void insertCommitted() throws SQLException, Failure {
        step("insert " + INITIAL.size() + " customers with a prepared INSERT in one transaction, commit");
        transaction(() -> {
            try (PreparedStatement ps = conn.prepareStatement(INSERT_CUSTOMER)) {
                for (Customer c : INITIAL) {
                    setCustomer(ps, c);
                    check("insert customer " + c.id() + " rows affected", 1, ps.executeUpdate());
                }
            }
            conn.commit();
        });
        check("customers after commit", INITIAL.size(), countCustomers());
    }

    void insertRolledBack() throws SQLException, Failure {
        step("insert customer 4 in a second transaction, roll back");
        transaction(() -> {
            try (PreparedStatement ps = conn.prepareStatement(INSERT_CUSTOMER)) {
                setCustomer(ps, new Customer(4, "dave", new BigDecimal("1.00"),
                        LocalDateTime.parse("2024-03-01T12:00:00")));
                check("insert customer 4 rows affected", 1, ps.executeUpdate());
            }
            try (PreparedStatement q = conn.prepareStatement("SELECT COUNT(*) FROM customer WHERE id = ?")) {
                q.setInt(1, 4);
                try (ResultSet rs = q.executeQuery()) {
                    rs.next();
                    check("customer 4 visible inside its transaction", 1, rs.getInt(1));
                }
            }
            conn.rollback();
        });
        checkAbsent(4);
        check("customers after rollback", INITIAL.size(), countCustomers());
    }

    void selectByKey() throws SQLException, Failure {
        step("prepared SELECT by primary key: name, exact DECIMAL balance, DATETIME created");
        for (Customer c : INITIAL) {
            checkCustomer(c);
        }
        checkAbsent(99);
    }

    void updateForUpdate() throws SQLException, Failure {
        step("transaction: SELECT ... FOR UPDATE customer 1, prepared UPDATE of its balance, commit");
        transaction(() -> {
            try (PreparedStatement ps = conn.prepareStatement("SELECT balance FROM customer WHERE id = ? FOR UPDATE")) {
                ps.setInt(1, 1);
                try (ResultSet rs = ps.executeQuery()) {
                    if (!rs.next()) {
                        throw new Failure("select for update customer 1: expected a row, got none");
                    }
                    check("customer 1 balance read FOR UPDATE", new BigDecimal("123.45"), rs.getBigDecimal(1));
                }
            }
            try (PreparedStatement ps = conn.prepareStatement("UPDATE customer SET balance = balance + ? WHERE id = ?")) {
                ps.setBigDecimal(1, new BigDecimal("76.55"));
                ps.setInt(2, 1);
                check("update customer 1 rows affected", 1, ps.executeUpdate());
            }
            conn.commit();
        });
        checkCustomer(new Customer(1, "alice", new BigDecimal("200.00"), INITIAL.get(0).created()));
    }

    void insertOrders() throws SQLException, Failure {
        step("insert " + ORDERS.size() + " orders, check AUTO_INCREMENT ids from getGeneratedKeys");
        List<Long> ids = new ArrayList<>();
        try (PreparedStatement ps = conn.prepareStatement(
                "INSERT INTO orders (customer_id, amount, note) VALUES (?, ?, ?)", Statement.RETURN_GENERATED_KEYS)) {
            for (int i = 0; i < ORDERS.size(); i++) {
                Order o = ORDERS.get(i);
                ps.setInt(1, o.customerId());
                ps.setBigDecimal(2, o.amount());
                if (o.note() == null) {
                    ps.setNull(3, Types.VARCHAR);
                } else {
                    ps.setString(3, o.note());
                }
                check("insert order " + i + " rows affected", 1, ps.executeUpdate());
                try (ResultSet keys = ps.getGeneratedKeys()) {
                    if (!keys.next()) {
                        throw new Failure("order " + i + " generated key: expected one, got none");
                    }
                    long id = keys.getLong(1);
                    if (id <= 0 || (!ids.isEmpty() && id <= ids.get(ids.size() - 1))) {
                        throw new Failure("order " + i + " id: expected > 0 and > previous ids " + ids + ", got " + id);
                    }
                    if (keys.next()) {
                        throw new Failure("order " + i + " generated keys: expected one, got more");
                    }
                    System.out.println("  ok: order " + i + " got id " + id);
                    ids.add(id);
                }
            }
        }
        List<String> want = new ArrayList<>();
        for (int i = 0; i < ORDERS.size(); i++) {
            Order o = ORDERS.get(i);
            want.add(ids.get(i) + ":" + o.customerId() + ":" + o.amount() + ":" + (o.note() == null ? "NULL" : o.note()));
        }
        List<String> stored = new ArrayList<>();
        try (Statement s = conn.createStatement();
                ResultSet rs = s.executeQuery("SELECT id, customer_id, amount, note FROM orders ORDER BY id")) {
            while (rs.next()) {
                String note = rs.getString(4);
                stored.add(rs.getLong(1) + ":" + rs.getInt(2) + ":" + rs.getBigDecimal(3) + ":"
                        + (note == null ? "NULL" : note));
            }
        }
        check("stored orders (id:customer:amount:note)", String.join(" ", want), String.join(" ", stored));
    }

    static Map<String, BigDecimal> readJoin(ResultSet rs, List<String> order) throws SQLException {
        Map<String, BigDecimal> sums = new TreeMap<>();
        while (rs.next()) {
            order.add(rs.getString(1));
            sums.put(rs.getString(1), rs.getBigDecimal(2));
        }
        return sums;
    }

    void join() throws SQLException, Failure {
        step("join: " + JOIN);
        List<String> expectedOrder = List.of("alice", "bob");
        Map<String, BigDecimal> expected = new TreeMap<>(Map.of(
                "alice", new BigDecimal("16.00"), "bob", new BigDecimal("3.50")));
        // Once as a plain Statement and once as a PreparedStatement.
        try (Statement s = conn.createStatement(); ResultSet rs = s.executeQuery(JOIN)) {
            List<String> order = new ArrayList<>();
            Map<String, BigDecimal> got = readJoin(rs, order);
            check("join row order (statement)", expectedOrder, order);
            check("join sums (statement)", expected, got);
        }
        try (PreparedStatement ps = conn.prepareStatement(JOIN); ResultSet rs = ps.executeQuery()) {
            List<String> order = new ArrayList<>();
            Map<String, BigDecimal> got = readJoin(rs, order);
            check("join row order (prepared)", expectedOrder, order);
            check("join sums (prepared)", expected, got);
        }
    }

    void upsert() throws SQLException, Failure {
        step("upsert: " + UPSERT);
        try (PreparedStatement ps = conn.prepareStatement(UPSERT)) {
            setCustomer(ps, new Customer(2, "bob-ignored", new BigDecimal("10.00"),
                    LocalDateTime.parse("2025-01-01T00:00:00")));
            check("upsert existing customer 2 rows affected", 2, ps.executeUpdate());
            checkCustomer(new Customer(2, "bob", new BigDecimal("10.50"), INITIAL.get(1).created()));
            Customer erin = new Customer(5, "erin", new BigDecimal("42.00"), LocalDateTime.parse("2025-06-30T08:15:30"));
            setCustomer(ps, erin);
            check("upsert new customer 5 rows affected", 1, ps.executeUpdate());
            checkCustomer(erin);
        }
    }

    // A document stored through a prepared INSERT, read back whole and by
    // path (the server describes JSON with the binary character set, as
    // MySQL does: the driver must still give UTF-8 text), changed with
    // JSON_SET and found by a JSON comparison.
    void jsonDocuments() throws SQLException, Failure {
        step("JSON column: prepared INSERT, ->, ->>, JSON_SET, a JSON comparison");
        try (Statement s = conn.createStatement()) {
            s.execute("CREATE TABLE profile (id INT NOT NULL PRIMARY KEY, doc JSON)");
        }
        try (PreparedStatement ps = conn.prepareStatement("INSERT INTO profile VALUES (?, ?)")) {
            ps.setInt(1, 1);
            ps.setString(2, "{\"tags\":[\"x\"],\"name\":\"Zo\u00eb\"}");
            check("insert profile rows affected", 1, ps.executeUpdate());
        }
        try (PreparedStatement ps = conn.prepareStatement(
                "SELECT doc, doc->>'$.name', JSON_LENGTH(doc->'$.tags') FROM profile WHERE id = ?")) {
            ps.setInt(1, 1);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                check("stored document (normalized)", "{\"name\": \"Zo\u00eb\", \"tags\": [\"x\"]}", rs.getString(1));
                check("doc->>'$.name'", "Zo\u00eb", rs.getString(2));
                check("tags", 1, rs.getInt(3));
            }
        }
        try (PreparedStatement ps = conn.prepareStatement("UPDATE profile SET doc = JSON_SET(doc, '$.age', ?) WHERE id = ?")) {
            ps.setInt(1, 42);
            ps.setInt(2, 1);
            check("JSON_SET rows affected", 1, ps.executeUpdate());
        }
        try (PreparedStatement ps = conn.prepareStatement(
                "SELECT id FROM profile WHERE doc->'$.age' = ? AND doc->'$.name' = ?")) {
            ps.setInt(1, 42);
            ps.setString(2, "Zo\u00eb");
            try (ResultSet rs = ps.executeQuery()) {
                check("profile found by its document", true, rs.next());
                check("its id", 1, rs.getInt(1));
            }
        }
    }

    void deleteAndDrop() throws SQLException, Failure {
        step("prepared DELETE of customer 3 by key, then DROP the tables");
        try (PreparedStatement ps = conn.prepareStatement("DELETE FROM customer WHERE id = ?")) {
            ps.setInt(1, 3);
            check("delete customer 3 rows affected", 1, ps.executeUpdate());
        }
        checkAbsent(3);
        List<Integer> ids = new ArrayList<>();
        try (Statement s = conn.createStatement(); ResultSet rs = s.executeQuery("SELECT id FROM customer ORDER BY id")) {
            while (rs.next()) {
                ids.add(rs.getInt(1));
            }
        }
        check("customer ids left", List.of(1, 2, 5), ids);
        try (Statement s = conn.createStatement()) {
            for (String q : List.of("DROP TABLE orders", "DROP TABLE customer", "DROP TABLE profile")) {
                s.execute(q);
                System.out.println("  ok: " + q);
            }
        }
    }

    void run() throws SQLException, Failure {
        try (Statement s = conn.createStatement(); ResultSet rs = s.executeQuery("SELECT VERSION()")) {
            rs.next();
            System.out.println("  ok: server version " + rs.getString(1));
        }
        step("drop leftover tables (DROP TABLE IF EXISTS)");
        dropTables(conn, 0);
        createTables();
        insertCommitted();
        insertRolledBack();
        selectByKey();
        updateForUpdate();
        insertOrders();
        join();
        upsert();
        jsonDocuments();
        deleteAndDrop();
    }

    static String option(Map<String, String> args, String name, String env, String fallback) {
        if (args.containsKey(name)) {
            return args.get(name);
        }
        String v = System.getenv(env);
        return v != null ? v : fallback;
    }

    public static void main(String[] argv) {
        Map<String, String> args = new TreeMap<>();
        for (int i = 0; i < argv.length; i++) {
            String a = argv[i];
            if (a.startsWith("--") && a.contains("=")) {
                args.put(a.substring(2, a.indexOf('=')), a.substring(a.indexOf('=') + 1));
            } else if (a.startsWith("--") && i + 1 < argv.length) {
                args.put(a.substring(2), argv[++i]);
            } else {
                System.err.println("usage: DriverWorkload [--host H] [--port P] [--user U] [--password PW] "
                        + "[--database DB] [--prepare server|client] [--tls yes|no]  (or env DRIVER_HOST, DRIVER_PORT, "
                        + "DRIVER_USER, DRIVER_PASSWORD, DRIVER_DATABASE, DRIVER_PREPARE)");
                System.exit(2);
            }
        }
        String host = option(args, "host", "DRIVER_HOST", "127.0.0.1");
        String port = option(args, "port", "DRIVER_PORT", "3306");
        String user = option(args, "user", "DRIVER_USER", "app");
        String password = option(args, "password", "DRIVER_PASSWORD", "");
        String database = option(args, "database", "DRIVER_DATABASE", "appdb");
        String prepare = option(args, "prepare", "DRIVER_PREPARE", "server");
        // --tls yes: TLS without verifying the server's certificate (a test's own).
        boolean tls = option(args, "tls", "DRIVER_TLS", "no").equals("yes");
        if (!prepare.equals("server") && !prepare.equals("client")) {
            System.err.println("--prepare must be server or client, got " + prepare);
            System.exit(2);
        }
        // server: COM_STMT_PREPARE/EXECUTE (binary protocol); client: Connector/J's
        // default, parameters interpolated into text-protocol COM_QUERY.
        String url = "jdbc:mysql://" + host + ":" + port + "/" + database
                + "?useServerPrepStmts=" + prepare.equals("server")
                + (tls ? "&sslMode=REQUIRED" : "&sslMode=DISABLED&allowPublicKeyRetrieval=true")
                + "&connectTimeout=10000&socketTimeout=60000";
        System.out.println("java driver workload: " + user + "@" + host + ":" + port + "/" + database
                + " (MySQL Connector/J, prepare=" + prepare + ")");
        step("connect");
        Connection conn = null;
        try {
            conn = DriverManager.getConnection(url, user, password);
            new DriverWorkload(conn).run();
            conn.close();
        } catch (SQLException | Failure e) {
            String detail = e instanceof SQLException sql
                    ? e + " (SQLState " + sql.getSQLState() + ", error " + sql.getErrorCode() + ")"
                    : e.getMessage();
            System.out.println("FAILED: " + detail);
            // Best effort: roll back by closing, then leave no tables behind.
            try {
                if (conn != null) {
                    conn.close();
                }
            } catch (SQLException ignored) {
                // already failing
            }
            try (Connection c = DriverManager.getConnection(url, user, password)) {
                dropTables(c, 10);
            } catch (SQLException cleanup) {
                System.out.println("cleanup after failure: " + cleanup);
            }
            System.exit(1);
        }
        System.out.println("driver workload: ok");
    }
}
