// go.mod: module definition for the Go (go-sql-driver/mysql) driver workload
// that crates/cli/tests drives against Tessera's SQL node.
module tessera/driverworkload

go 1.24.0

require github.com/go-sql-driver/mysql v1.10.1

require filippo.io/edwards25519 v1.2.0 // indirect
