//! The `tessera` binary: one program, a subcommand per process role
//! (docs/design/processes-and-blocks.md §1): `mgmd`, `node`, `mgm`, `bench`,
//! `demo`.

mod angel;
mod demo;
mod progress;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

// Counts heap allocations per thread, so `all report threads` can show that
// the ldm and tc threads do not allocate once warm. The allocator under it
// is mimalloc: the SQL node allocates per statement on two threads, where
// glibc's malloc took about a sixth of its CPU (docs/benchmarks.md, "TPC-C
// against MariaDB").
#[global_allocator]
static ALLOCATOR: stdx::alloc_counter::CountingAllocator<mimalloc::MiMalloc> =
    stdx::alloc_counter::CountingAllocator(mimalloc::MiMalloc);

/// Tessera: a distributed, in-memory, synchronously replicated
/// transactional database in the architecture of MySQL Cluster (NDB).
#[derive(Parser, Debug)]
#[command(name = "tessera", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the management server: serves the cluster config, hands out node
    /// ids, knows which nodes are up (NDB's ndb_mgmd).
    Mgmd {
        /// Cluster config file (TOML; see examples/cluster.toml).
        #[arg(long)]
        config: PathBuf,
    },
    /// Run a data node (NDB's ndbmtd), under an angel: a supervising
    /// parent that starts the node again when it dies without being asked
    /// to stop, and it rejoins the cluster by a node restart.
    Node {
        /// Address of the mgmd, HOST:PORT.
        #[arg(long)]
        mgmd: String,
        /// This node's id, as in the config's [[data_node]] sections.
        #[arg(long)]
        node_id: u16,
        /// Start from nothing: delete this node's redo log, checkpoints,
        /// system file and schema in its data_dir first. Without it the node
        /// restarts from them (a whole-cluster restart recovers every
        /// transaction of a complete GCI).
        #[arg(long)]
        initial: bool,
        /// The file holding the cluster secret (default: the config's
        /// [cluster] secret_file, relative to the config's directory on
        /// mgmd's host).
        #[arg(long, value_name = "FILE")]
        secret_file: Option<PathBuf>,
        /// Run the data node in this process, with no angel: nothing
        /// starts it again when it dies.
        #[arg(long)]
        no_angel: bool,
        /// The angel gives up after this many restarts within
        /// `--restart-window`.
        #[arg(long, default_value_t = 10)]
        restarts: u32,
        /// The window the angel counts restarts in, in seconds.
        #[arg(long, value_name = "SECONDS", default_value_t = 600)]
        restart_window: u64,
    },
    /// Management client (NDB's ndb_mgm): `-e show`, `-e "all report threads"`,
    /// `-e "all report checkpoints"`, `-e "check replicas"` (compares every
    /// live replica of every partition, and names the dead ones), and for
    /// tests `-e "node N fault POINT"` (crash there) or `-e "node N fault
    /// POINT delay MS"` (stall there); `-e "node N restart [--initial]"`
    /// (its angel starts it again: a node restart; `--wait` for it to be
    /// started) and `-e "all restart"` (a rolling restart, one node at a
    /// time).
    Mgm {
        /// Address of the mgmd, HOST:PORT.
        #[arg(long)]
        mgmd: String,
        /// Command to execute.
        #[arg(short = 'e', long = "execute")]
        execute: String,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// `node N restart`: return once the node is started again.
        #[arg(long)]
        wait: bool,
    },
    /// Run a SQL node: a stateless MySQL-protocol front end to the
    /// cluster (MySQL Cluster's mysqld). Connect with `mariadb -h HOST -P
    /// PORT -u root`; any number can serve one cluster.
    Sql {
        /// Address of the mgmd, HOST:PORT.
        #[arg(long)]
        mgmd: String,
        /// The MySQL port to listen on.
        #[arg(long, default_value_t = 3306)]
        port: u16,
        /// The address to listen on.
        #[arg(long, default_value = "127.0.0.1")]
        bind: String,
        /// Threads serving connections (event loops; never a thread per
        /// connection): each runs many statements at once, suspending
        /// each while it waits for the cluster. Default: one per core.
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
        threads: Option<u16>,
        /// TLS: the certificate chain (PEM) the SQL port offers; clients
        /// ask for TLS as MySQL's do (`--ssl`, `sslMode=REQUIRED`).
        #[arg(long, requires = "tls_key")]
        tls_cert: Option<std::path::PathBuf>,
        /// TLS: the certificate's private key (PEM).
        #[arg(long, requires = "tls_cert")]
        tls_key: Option<std::path::PathBuf>,
        /// Refuse logins that do not come over TLS (error 3159).
        #[arg(long)]
        require_secure_transport: bool,
    },
    /// Load generators.
    Bench {
        #[command(subcommand)]
        bench: BenchCommand,
    },
    /// Write a new cluster secret (64 random hex digits, readable by its
    /// owner only) to FILE, for the config's [cluster] secret_file. An
    /// existing file is never overwritten.
    Secret {
        /// Where to write it.
        file: PathBuf,
    },
    /// Start a local cluster on loopback (mgmd and data nodes as child
    /// processes) and keep it up until Ctrl-C or SIGTERM.
    Demo(demo::DemoOptions),
}

#[derive(Subcommand, Debug)]
enum BenchCommand {
    /// Primary-key inserts, reads, updates and deletes, every read verified
    /// (the flexAsynch analogue).
    Keylookup(KeylookupArgs),
    /// One-row writes while a data node is killed (SIGKILL): how long after
    /// the kill the first new transaction commits, and commits per 100 ms.
    Failover(FailoverArgs),
    /// TPC-C (DBT2's workload) through the MySQL protocol, against
    /// `tessera sql` or any MySQL server: tpmC, latencies, consistency.
    Tpcc(TpccArgs),
}

#[derive(clap::Args, Debug)]
struct TpccArgs {
    /// The MySQL server, HOST:PORT.
    #[arg(long)]
    mysql: String,
    /// Its user.
    #[arg(long, default_value = "root")]
    user: String,
    /// The user's password (an account with mysql_native_password, or
    /// caching_sha2_password after one TLS login to that server).
    #[arg(long, default_value = "")]
    password: String,
    /// The database (created by --load).
    #[arg(long, default_value = "tpcc")]
    database: String,
    /// Warehouses (the scale: 10 districts, 30,000 customers and 100,000
    /// stock rows each).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    warehouses: u32,
    /// Drop and create the database and load its initial population first.
    #[arg(long)]
    load: bool,
    /// Seconds of the transaction mix (0: load and check only).
    #[arg(long, default_value_t = 60)]
    duration: u64,
    /// Connections running the mix (a terminal each; keying and think
    /// times off).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=4096))]
    connections: u32,
    /// Create the tables without PARTITION BY KEY on the warehouse.
    #[arg(long)]
    no_partitioning: bool,
    /// Run the transactions' statements prepared (the binary protocol:
    /// each text prepared once per connection), not as text.
    #[arg(long)]
    prepared: bool,
    /// Ask the server to send each transaction's INSERTs with its next
    /// round trip (NDB's transaction_allow_batching; a duplicate key then
    /// fails a later statement or the COMMIT). Servers without the
    /// variable run without it.
    #[arg(long)]
    batching: bool,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
struct FailoverArgs {
    /// Address of the mgmd, HOST:PORT.
    #[arg(long)]
    mgmd: String,
    /// The process to kill (a data node's pid, from `mgm -e show`).
    #[arg(long)]
    kill_pid: u32,
    /// How: KILL (SIGKILL: its links break at once) or STOP (SIGSTOP: it
    /// goes silent, and the heartbeats must find it; SIGCONT at the end).
    #[arg(long, default_value = "KILL")]
    signal: String,
    /// Milliseconds of load before the kill.
    #[arg(long, default_value_t = 3000)]
    kill_after_ms: u64,
    /// Milliseconds of load in all.
    #[arg(long, default_value_t = 8000)]
    duration_ms: u64,
    /// Client threads.
    #[arg(long, default_value_t = 4)]
    threads: u32,
    /// Table written (created if missing).
    #[arg(long, default_value = "failover")]
    table: String,
    /// Print one JSON object (with the commits of every 100 ms).
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
struct KeylookupArgs {
    /// Address of the mgmd, HOST:PORT.
    #[arg(long)]
    mgmd: String,
    /// Rows in the table.
    #[arg(long, default_value_t = 100_000)]
    records: u64,
    /// Comma-separated phases: insert, read, update, delete, range, scan
    /// (may repeat; range scans 100 consecutive keys through the ordered
    /// index, scan the whole table with a filter taking 1% of the rows).
    #[arg(long, default_value = "insert,read,update,read,delete")]
    phases: String,
    /// Client threads.
    #[arg(long, default_value_t = 4)]
    threads: u32,
    /// Seconds per read or update phase (without it: one pass).
    #[arg(long)]
    duration: Option<u64>,
    /// Table name.
    #[arg(long, default_value = "keylookup")]
    table: String,
    /// Ordered indexes besides the primary key's, one on each of c0, c1,
    /// ... (0 to 16): what every write keeps besides the row.
    #[arg(long, default_value_t = 0)]
    indexes: u32,
    /// Operations per transaction.
    #[arg(long = "ops-per-txn", visible_alias = "batch", default_value_t = 8)]
    ops_per_txn: u32,
    /// Transactions in flight per thread (through the async API).
    #[arg(long, default_value_t = 1)]
    inflight: u32,
    /// Most operations per second over all threads.
    #[arg(long)]
    rate: Option<f64>,
    /// Read and check every record of the existing table, writing nothing
    /// (instead of the phases).
    #[arg(long, conflicts_with = "phases")]
    verify_only: bool,
    /// Record every write sent and acknowledged (key, round, GCI) in FILE;
    /// with --verify-only, check every row against it.
    #[arg(long, value_name = "FILE")]
    ledger: Option<PathBuf>,
    /// With --verify-only --ledger: only writes acknowledged with a GCI up
    /// to G (H/L, or H for a whole global checkpoint) must be visible.
    #[arg(long, value_name = "G", requires_all = ["ledger", "verify_only"],
          value_parser = bench::keylookup::parse_gci)]
    restored_gci: Option<client::Gci>,
    /// Commit every write transaction durably: acknowledged only once its GCI
    /// is durable (latencies include the wait); with --ledger, such
    /// acknowledgements are marked durable.
    #[arg(long, conflicts_with = "verify_only")]
    durable: bool,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Mgmd { config } => mgmd::run_server(&config).map_err(|error| error.to_string()),
        Command::Node {
            mgmd,
            node_id,
            initial,
            secret_file,
            no_angel,
            restarts,
            restart_window,
        } if !no_angel && std::env::var_os(angel::CHILD_ENV).is_none() => {
            let mut node_args = vec![
                "node".to_string(),
                "--no-angel".to_string(),
                "--mgmd".to_string(),
                mgmd.clone(),
                "--node-id".to_string(),
                node_id.to_string(),
            ];
            if let Some(file) = secret_file {
                node_args.push("--secret-file".to_string());
                node_args.push(file.to_string_lossy().into_owned());
            }
            let options = angel::AngelOptions {
                node_args,
                initial,
                node_id,
                mgmd,
                restarts,
                window: Duration::from_secs(restart_window),
            };
            return match angel::run(options) {
                Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
                Err(error) => {
                    eprintln!("tessera: {error}");
                    ExitCode::FAILURE
                }
            };
        }
        Command::Node {
            mgmd,
            node_id,
            initial,
            secret_file,
            ..
        } => {
            angel::die_with_angel();
            let run = datanode::run(datanode::NodeOptions {
                mgmd,
                node_id,
                initial,
                secret_file,
            });
            if let Err(failure) = run {
                eprintln!("tessera: {}", failure.message);
                if failure.mgmd_unreachable {
                    // A network fault: an angel restarting the node tries
                    // again.
                    return ExitCode::from(datanode::MGMD_UNREACHABLE_EXIT_CODE as u8);
                }
                // It never started (a refusal, a bad config): its angel
                // does not start it again.
                return ExitCode::from(angel::NOT_STARTED_EXIT_CODE);
            }
            Ok(())
        }
        Command::Mgm {
            mgmd,
            execute,
            json,
            ..
        } if is_check_replicas(&execute) => return check_replicas(&mgmd, json),
        Command::Mgm {
            mgmd,
            execute,
            json,
            wait,
        } => {
            // A restart's progress as a live bar while --wait waits.
            let mut progress = progress::RestartProgress::new();
            let result =
                mgmd::mgm::run_command_watching(&mgmd, &execute, json, wait, &mut |id, node| {
                    progress.show(id, node)
                });
            progress.finish();
            match result {
                Ok(output) => {
                    println!("{output}");
                    Ok(())
                }
                Err(error) => Err(error.to_string()),
            }
        }
        Command::Bench {
            bench: BenchCommand::Keylookup(args),
        } => return run_keylookup(args),
        Command::Bench {
            bench: BenchCommand::Failover(args),
        } => run_failover(args),
        Command::Bench {
            bench: BenchCommand::Tpcc(args),
        } => return run_tpcc(args),
        Command::Sql {
            mgmd,
            port,
            bind,
            threads,
            tls_cert,
            tls_key,
            require_secure_transport,
        } => {
            let options = sqlnode::Options {
                loops: threads.map(usize::from),
                tls: tls_cert
                    .zip(tls_key)
                    .map(|(certificate, key)| sqlnode::TlsFiles { certificate, key }),
                require_secure_transport,
            };
            run_sql(&mgmd, &bind, port, options)
        }
        Command::Secret { file } => admission::ClusterSecret::create_file(&file)
            .map_err(|error| format!("cannot write a new secret to {}: {error}", file.display())),
        Command::Demo(options) => demo::run(options),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("tessera: {message}");
            ExitCode::FAILURE
        }
    }
}

/// `tessera sql`: serves until the process is stopped (a SQL node keeps
/// nothing: stopping it loses only its connections' open transactions,
/// which roll back).
fn run_sql(mgmd: &str, bind: &str, port: u16, options: sqlnode::Options) -> Result<(), String> {
    let address: std::net::SocketAddr = format!("{bind}:{port}")
        .parse()
        .map_err(|error| format!("bad --bind {bind:?}: {error}"))?;
    let server = sqlnode::start(mgmd, address, options)?;
    println!("sql node listening on {}", server.address());
    loop {
        std::thread::park();
    }
}

/// `check replicas` (any case and spacing): the one mgm command that runs
/// as an API node, because it reads every replica through the data nodes.
fn is_check_replicas(command: &str) -> bool {
    let words: Vec<String> = command.split_whitespace().map(str::to_lowercase).collect();
    words == ["check", "replicas"]
}

/// Compares every replica of every partition; exits non-zero on a mismatch.
fn check_replicas(mgmd: &str, json: bool) -> ExitCode {
    let report = client::Cluster::connect(mgmd).and_then(|cluster| cluster.check_replicas());
    match report {
        Ok(report) => {
            if json {
                println!("{}", report.to_json());
            } else {
                println!("{report}");
            }
            if report.mismatches == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(error) => {
            eprintln!("tessera mgm: check replicas: {error}");
            ExitCode::FAILURE
        }
    }
}

/// `tessera bench tpcc`: exits non-zero when a consistency condition
/// failed (the figures are printed either way).
fn run_tpcc(args: TpccArgs) -> ExitCode {
    let options = bench::tpcc::TpccOptions {
        mysql: args.mysql,
        user: args.user,
        password: args.password,
        database: args.database,
        warehouses: args.warehouses,
        load: args.load,
        duration: Duration::from_secs(args.duration),
        connections: args.connections,
        partitioned: !args.no_partitioning,
        prepared: args.prepared,
        batching: args.batching,
    };
    match bench::tpcc::run(&options) {
        Ok(report) => {
            match args.json {
                true => println!("{}", report.to_json()),
                false => print!("{}", report.to_text()),
            }
            match report.is_consistent() {
                true => ExitCode::SUCCESS,
                false => {
                    eprintln!("bench tpcc: a consistency condition failed");
                    ExitCode::FAILURE
                }
            }
        }
        Err(error) => {
            eprintln!("bench tpcc: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run_failover(args: FailoverArgs) -> Result<(), String> {
    let options = bench::failover::FailoverOptions {
        mgmd: args.mgmd,
        threads: args.threads,
        table: args.table,
        kill_after: Duration::from_millis(args.kill_after_ms),
        duration: Duration::from_millis(args.duration_ms),
    };
    let pid = args.kill_pid as libc::pid_t;
    let signal = match args.signal.to_ascii_uppercase().as_str() {
        "KILL" => libc::SIGKILL,
        "STOP" => libc::SIGSTOP,
        other => return Err(format!("bench failover: --signal {other}: KILL or STOP")),
    };
    let report = bench::failover::run(&options, || {
        // SAFETY: kill(2) touches no memory of ours.
        unsafe {
            libc::kill(pid, signal);
        }
    })
    .map_err(|error| format!("bench failover: {error}"));
    if signal == libc::SIGSTOP {
        // SAFETY: as above. The node runs again, finds it was declared
        // failed, and exits.
        unsafe {
            libc::kill(pid, libc::SIGCONT);
        }
    }
    let report = report?;
    if args.json {
        let text =
            serde_json::to_string(&report).map_err(|error| format!("bench failover: {error}"))?;
        println!("{text}");
    } else {
        println!("{}", report.to_text());
    }
    Ok(())
}

fn run_keylookup(args: KeylookupArgs) -> ExitCode {
    let phases = match bench::keylookup::Phase::parse_list(&args.phases) {
        Ok(phases) => phases,
        Err(error) => {
            eprintln!("tessera bench keylookup: {error}");
            return ExitCode::FAILURE;
        }
    };
    let options = bench::keylookup::KeylookupOptions {
        mgmd: args.mgmd,
        records: args.records,
        phases,
        threads: args.threads,
        duration_s: args.duration,
        table: args.table,
        indexes: args.indexes,
        ops_per_txn: args.ops_per_txn,
        inflight: args.inflight,
        rate: args.rate,
        verify_only: args.verify_only,
        durable: args.durable,
        ledger: args.ledger,
        restored_gci: args.restored_gci,
        json: args.json,
        ..bench::keylookup::KeylookupOptions::default()
    };
    match bench::keylookup::run(&options) {
        Ok(report) => {
            if options.json {
                println!("{}", report.to_json());
            } else {
                print!("{}", report.to_text());
            }
            if report.mismatches() > 0 {
                eprintln!(
                    "tessera bench keylookup: {} mismatches",
                    report.mismatches()
                );
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(error) => {
            eprintln!("tessera bench keylookup: {error}");
            ExitCode::FAILURE
        }
    }
}
